//! Tributary's side of the peers benchmark (`python3 benches/peers/run.py`).
//!
//! `run.py` builds this target once (`cargo build --release --bench peers`)
//! and runs it once per case and repetition, each run a fresh process, so
//! that its CPU time is its own. The input is an Arrow IPC file that run.py
//! wrote with pyarrow; every table is partitioned by `region`, keyed by `id`
//! and ordered by `ts` (event-time merging), with hybrid-logical instants.
//! Each run prints one JSON line of figures on standard output: `wall`
//! (seconds), `cpu` (user + system seconds of this process, from
//! `/proc/self/stat`: the workspace forbids the `unsafe` that `getrusage`
//! would need), `rows`, and per case more (commit latencies, failed
//! attempts). Only the measured part is timed: reading the input and
//! opening the table come before the clock starts.
//!
//! Cases (`<exe> CASE --table DIR [...]`):
//!
//! - `ingest --input F [--buckets N]`: creates the table (untimed), then
//!   writes every batch of F in one commit.
//! - `upsert --input F`: one commit of every batch of F.
//! - `commits --input F [--first I] [--count N] [--writer-id W] [--barrier]`:
//!   one commit per record batch of F, batches I to I+N-1, one after the
//!   other; per-commit latencies. A commit that fails with a conflict is
//!   counted as a failed attempt and started over. With `--barrier` the
//!   process prints `{"ready":true}` once the table is open and waits for a
//!   line on standard input before it starts, so that run.py can start
//!   several writers at once.
//! - `read [--dump F]`: a snapshot read, `Table::scan` streamed into a list
//!   of record batches (unordered, as the other readers return rows, and
//!   not put together into one batch, as delta-rs's `to_pyarrow_table`
//!   returns a chunked table); `--dump` writes the rows to an Arrow IPC
//!   file afterwards, for run.py's content check.
//! - `compact [--budget-mb N]`: one `Compactor::run_once` (default
//!   settings: every file group with logs, 256 MiB budget, 2 groups at a
//!   time; `--budget-mb` sets the budget).
//! - `sql --queries F`: SQL through Tributary's DataFusion provider
//!   (`tributary::sql::TributaryTable`, a snapshot read) registered as `t`
//!   in a `SessionContext`, in this process. F is a JSON object of named
//!   queries (run.py writes it); each runs once, in order, collected in
//!   full, and is timed alone (planning and execution; opening the table,
//!   making the provider and an untimed `SELECT 1` that warms the session
//!   come before). Per query: `wall`, `cpu`, `rows` returned and
//!   `answer`, the rows as JSON objects (for every query but the one named
//!   `projection`, whose rows are only counted), which run.py checks
//!   against its model.

use std::fs::File;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use arrow::array::RecordBatch;
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use clap::{Parser, Subcommand};
use futures::TryStreamExt;
use serde_json::{Value, json};
use tributary::{CreateOptions, Table, TableSettings};
use tributary_compaction::CompactorSettings;
use tributary_format::ErrorKind;
use tributary_writer::{WriteClient, WriteSettings};

#[path = "../support/process.rs"]
mod process;

/// Attempts of one commit before the case gives up.
const MAX_ATTEMPTS: usize = 50;

/// The `sql` case's untimed first query: session start-up, no table.
#[cfg(feature = "sql")]
const WARM_UP: &str = "SELECT 1";

/// One run of one case.
#[derive(Parser)]
#[command(about = "Tributary's side of benches/peers/run.py: one case per run, one JSON line of figures")]
struct Args {
    /// The case to run.
    #[command(subcommand)]
    case: Case,
    /// The table's folder.
    #[arg(long, global = true)]
    table: Option<PathBuf>,
}

/// The cases; see the module documentation.
#[derive(Subcommand)]
enum Case {
    /// Create the table, then one commit of the whole input.
    Ingest {
        /// Arrow IPC file of the rows.
        #[arg(long)]
        input: PathBuf,
        /// Buckets (file groups) per partition.
        #[arg(long, default_value_t = 16)]
        buckets: u32,
        /// The table's Avro schema (run.py writes it from workload.py).
        #[arg(long)]
        schema: PathBuf,
    },
    /// One commit of the whole input into the existing table.
    Upsert {
        /// Arrow IPC file of the rows.
        #[arg(long)]
        input: PathBuf,
    },
    /// One commit per record batch of the input.
    Commits {
        /// Arrow IPC file, one record batch per commit.
        #[arg(long)]
        input: PathBuf,
        /// First batch to commit.
        #[arg(long, default_value_t = 0)]
        first: usize,
        /// Batches to commit (default: the rest).
        #[arg(long)]
        count: Option<usize>,
        /// This writer's id (each concurrent writer has its own).
        #[arg(long, default_value = "bench")]
        writer_id: String,
        /// Print `{"ready":true}` when ready and wait for a line on stdin.
        #[arg(long)]
        barrier: bool,
    },
    /// A snapshot read with `Table::read`.
    Read {
        /// Write the rows read to this Arrow IPC file (untimed).
        #[arg(long)]
        dump: Option<PathBuf>,
    },
    /// One compaction of every file group with logs.
    Compact {
        /// The compactor's memory budget in MiB (default: the compactor's).
        #[arg(long)]
        budget_mb: Option<usize>,
    },
    /// Named SQL queries through the DataFusion provider, each timed alone.
    Sql {
        /// JSON object of query name to SQL text; the table is `t`.
        #[arg(long)]
        queries: PathBuf,
    },
}

/// User plus system CPU seconds of this process (all threads) so far.
fn cpu_seconds(ticks: u64) -> f64 {
    process::cpu_time(ticks).expect("CPU time of this process").as_secs_f64()
}

/// A wall clock and a CPU clock started together.
struct Stopwatch {
    ticks: u64,
    cpu: f64,
    wall: Instant,
}

impl Stopwatch {
    fn start(ticks: u64) -> Self {
        Self { ticks, cpu: cpu_seconds(ticks), wall: Instant::now() }
    }

    /// (wall seconds, CPU seconds) since the start.
    fn stop(&self) -> (f64, f64) {
        (self.wall.elapsed().as_secs_f64(), cpu_seconds(self.ticks) - self.cpu)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
}

/// Out-of-the-box settings: the table's own time mode (hybrid-logical, as
/// created here).
fn table_settings() -> TableSettings {
    TableSettings::default()
}

fn read_batches(path: &Path) -> Vec<RecordBatch> {
    let file = File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let reader = FileReader::try_new(file, None).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    reader.map(|b| b.expect("a record batch of the input")).collect()
}

fn rows(batches: &[RecordBatch]) -> usize {
    batches.iter().map(RecordBatch::num_rows).sum()
}

async fn open(dir: &Path) -> Table {
    Table::builder_local(dir).with_settings(table_settings()).open().await.expect("open the table")
}

async fn client(table: &Table, writer_id: &str) -> WriteClient {
    let settings = WriteSettings { writer_id: writer_id.into(), ..Default::default() };
    table.write_client(settings).await.expect("write client")
}

/// Writes `batches` as one commit, starting over after a conflict; the
/// number of failed attempts.
async fn commit(client: &WriteClient, batches: &[RecordBatch]) -> usize {
    let mut failed = 0;
    loop {
        let attempt = async {
            let mut commit = client.start_commit().await?;
            for b in batches {
                commit.write_batch(b).await?;
            }
            commit.commit().await
        };
        match attempt.await {
            Ok(_) => return failed,
            Err(e) if e.kind() == ErrorKind::Conflict && failed + 1 < MAX_ATTEMPTS => failed += 1,
            Err(e) => panic!("commit failed after {failed} failed attempts: {e}"),
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3
}

fn ingest(dir: &Path, input: &Path, schema: &Path, buckets: u32, ticks: u64) -> Value {
    let rt = runtime();
    let batches = read_batches(input);
    let schema = std::fs::read_to_string(schema).unwrap_or_else(|e| panic!("read {}: {e}", schema.display()));
    let mut options = CreateOptions::new(schema, "id", "ts");
    options.partition_field = Some("region".into());
    options.buckets = buckets;
    let table = rt
        .block_on(Table::builder_local(dir).with_settings(table_settings()).create(options))
        .expect("create the table");
    let client = rt.block_on(client(&table, "bench"));
    let clock = Stopwatch::start(ticks);
    let failed = rt.block_on(commit(&client, &batches));
    let (wall, cpu) = clock.stop();
    json!({"rows": rows(&batches), "commits": 1, "failed": failed, "wall": wall, "cpu": cpu})
}

fn upsert(dir: &Path, input: &Path, ticks: u64) -> Value {
    let rt = runtime();
    let batches = read_batches(input);
    let table = rt.block_on(open(dir));
    let client = rt.block_on(client(&table, "bench"));
    let clock = Stopwatch::start(ticks);
    let failed = rt.block_on(commit(&client, &batches));
    let (wall, cpu) = clock.stop();
    json!({"rows": rows(&batches), "commits": 1, "failed": failed, "wall": wall, "cpu": cpu})
}

/// What the `commits` case runs.
struct CommitsCase<'a> {
    input: &'a Path,
    first: usize,
    count: Option<usize>,
    writer_id: &'a str,
    barrier: bool,
}

fn commits(dir: &Path, case: &CommitsCase<'_>, ticks: u64) -> Value {
    let rt = runtime();
    let all = read_batches(case.input);
    let end = case.count.map_or(all.len(), |n| (case.first + n).min(all.len()));
    let batches = &all[case.first.min(end)..end];
    let table = rt.block_on(open(dir));
    let client = rt.block_on(client(&table, case.writer_id));
    if case.barrier {
        println!("{}", json!({"ready": true}));
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).expect("the start signal on stdin");
    }
    let clock = Stopwatch::start(ticks);
    let (mut latencies, failed) = rt.block_on(async {
        let mut latencies = Vec::with_capacity(batches.len());
        let mut failed = 0;
        for b in batches {
            let started = Instant::now();
            failed += commit(&client, std::slice::from_ref(b)).await;
            latencies.push(started.elapsed());
        }
        (latencies, failed)
    });
    let (wall, cpu) = clock.stop();
    let latencies_ms: Vec<f64> = latencies.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    latencies.sort();
    json!({
        "rows": rows(batches),
        "commits": batches.len(),
        "failed": failed,
        "wall": wall,
        "cpu": cpu,
        "p50_ms": percentile(&latencies, 0.5),
        "p99_ms": percentile(&latencies, 0.99),
        "latencies_ms": latencies_ms,
    })
}

fn read(dir: &Path, dump: Option<&Path>, ticks: u64) -> Value {
    let rt = runtime();
    let table = rt.block_on(open(dir));
    let clock = Stopwatch::start(ticks);
    let (schema, batches) = rt.block_on(async {
        let stream = table.scan().stream().await.expect("read");
        let schema = stream.schema();
        (schema, stream.try_collect::<Vec<RecordBatch>>().await.expect("read"))
    });
    let (wall, cpu) = clock.stop();
    if let Some(path) = dump {
        let file = File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        let mut writer = FileWriter::try_new(file, &schema).expect("IPC writer");
        for batch in &batches {
            writer.write(batch).expect("write the rows read");
        }
        writer.finish().expect("finish the IPC file");
    }
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    json!({"rows": rows, "wall": wall, "cpu": cpu})
}

fn compact(dir: &Path, budget_mb: Option<usize>, ticks: u64) -> Value {
    let rt = runtime();
    let table = rt.block_on(open(dir));
    let mut settings = CompactorSettings::default();
    if let Some(mb) = budget_mb {
        settings.memory_budget = mb << 20;
    }
    let compactor = rt.block_on(table.compactor(settings)).expect("compactor");
    let clock = Stopwatch::start(ticks);
    let done = rt.block_on(compactor.run_once()).expect("compaction");
    let (wall, cpu) = clock.stop();
    json!({
        "compactions": done.len(),
        "groups": done.iter().map(|c| c.groups).sum::<usize>(),
        "records_out": done.iter().map(|c| c.records).sum::<u64>(),
        "bytes_read": done.iter().map(|c| c.bytes_read).sum::<u64>(),
        "bytes_written": done.iter().map(|c| c.bytes_written).sum::<u64>(),
        "wall": wall,
        "cpu": cpu,
    })
}

/// The rows of `batches` as JSON objects, one per row.
#[cfg(feature = "sql")]
fn json_rows(batches: &[RecordBatch]) -> Value {
    let mut writer = arrow::json::ArrayWriter::new(Vec::new());
    for b in batches {
        writer.write(b).expect("rows as JSON");
    }
    writer.finish().expect("rows as JSON");
    let bytes = writer.into_inner();
    if bytes.is_empty() { json!([]) } else { serde_json::from_slice(&bytes).expect("the JSON of the rows") }
}

/// The `sql` case: each named query of the file `queries`, timed alone.
#[cfg(feature = "sql")]
fn sql(dir: &Path, queries: &Path, ticks: u64) -> Value {
    use std::sync::Arc;
    use tributary::sql::datafusion::prelude::SessionContext;
    use tributary::sql::{ReadAs, TributaryTable};

    let text = std::fs::read_to_string(queries).unwrap_or_else(|e| panic!("read {}: {e}", queries.display()));
    let queries: serde_json::Map<String, Value> = serde_json::from_str(&text).expect("a JSON object of queries");
    let rt = runtime();
    let table = rt.block_on(open(dir));
    let provider = rt.block_on(TributaryTable::new(table, ReadAs::default())).expect("the table provider");
    let ctx = SessionContext::new();
    ctx.register_table("t", Arc::new(provider)).expect("register the table");
    rt.block_on(async { ctx.sql(WARM_UP).await?.collect().await }).expect("the warm-up query");
    let mut figures = serde_json::Map::new();
    let mut total = 0.0;
    for (name, query) in &queries {
        let query = query.as_str().expect("each query is a string");
        let clock = Stopwatch::start(ticks);
        let batches = rt
            .block_on(async { ctx.sql(query).await?.collect().await })
            .unwrap_or_else(|e| panic!("query {name}: {e}"));
        let (wall, cpu) = clock.stop();
        total += wall;
        let answer = if name == "projection" { Value::Null } else { json_rows(&batches) };
        figures.insert(name.clone(), json!({"wall": wall, "cpu": cpu, "rows": rows(&batches), "answer": answer}));
    }
    json!({"wall": total, "queries": figures})
}

#[cfg(not(feature = "sql"))]
fn sql(_dir: &Path, _queries: &Path, _ticks: u64) -> Value {
    panic!("the sql case needs the `sql` feature (on by default)")
}

/// The allocator, configured in .cargo/config.toml (README, "Allocator").
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    // `cargo bench` runs every bench target with `--bench`; this one is
    // driven by run.py, so say so instead of failing.
    let given: Vec<String> = std::env::args().skip(1).collect();
    if given.is_empty() || given.iter().any(|a| a == "--bench") {
        println!("peers: run `python3 benches/peers/run.py` (this target is its Tributary driver)");
        return;
    }
    let args = Args::parse();
    let ticks = process::clock_ticks_per_second();
    let dir = args.table.expect("--table DIR");
    let figures = match &args.case {
        Case::Ingest { input, buckets, schema } => ingest(&dir, input, schema, *buckets, ticks),
        Case::Upsert { input } => upsert(&dir, input, ticks),
        Case::Commits { input, first, count, writer_id, barrier } => {
            let case = CommitsCase { input, first: *first, count: *count, writer_id, barrier: *barrier };
            commits(&dir, &case, ticks)
        }
        Case::Read { dump } => read(&dir, dump.as_deref(), ticks),
        Case::Compact { budget_mb } => compact(&dir, *budget_mb, ticks),
        Case::Sql { queries } => sql(&dir, queries, ticks),
    };
    println!("{figures}");
}
