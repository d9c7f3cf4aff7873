//! End-to-end ingest and compaction benchmark on local disk, in a temporary folder.
//!
//! 1. Ingest (`ingest`): N records (default 10,000,000; `TRIBUTARY_BENCH_ROWS`
//!    overrides) of 10 columns, keys drawn from a key space of N/2 (so about
//!    half are updates), in Arrow batches of 64k rows generated up front
//!    (untimed), into an unpartitioned 16-bucket table with hybrid-logical
//!    time, one commit per 1M records; once with 1 writer task and once with
//!    2, each into a fresh table.
//! 2. Small commits (`commits`): 200 commits of 100 records, 2 writer tasks.
//! 3. Snapshot read (`read`) of the 2-task table by [`Table::read`] and by the
//!    official Hudi reader (`pip install hudi==0.5.0`), when installed.
//! 4. Compaction (`compact`): a fresh 16-bucket unpartitioned table of the
//!    same records, written (untimed, in a setup child) as 5 commits of N/5
//!    records; every commit writes each key of a key space of N/5 once, in a
//!    fresh random order, so commits 2 to 5 only update existing keys and
//!    every file group gets exactly 5 log files (one flush per commit). Then
//!    one `Compactor::run_once` with a 256 MiB memory budget and parallelism
//!    2, timed in its own child; then a snapshot read of the compacted table
//!    by both readers.
//!
//! 5. Scale (`scale`, only when named): the pipeline of ingest, upserts,
//!    compactions behind them, snapshot read and a filtered scan at 1 M,
//!    10 M and 100 M records (`TRIBUTARY_BENCH_SCALES` overrides), with
//!    throughput per CPU-second and peak memory at each size
//!    (`support/scale.rs`).
//!
//! `TRIBUTARY_BENCH_ONLY` selects cases by the names above, comma separated
//! (`TRIBUTARY_BENCH_ONLY=compact`); all but `scale` run when it is unset. `read` without
//! `ingest` still writes the 2-task table it reads, without reporting it.
//!
//! Each case runs in a child process (this binary re-executed with
//! `TRIBUTARY_BENCH_CASE` set), so that its peak RSS is its own. CPU time
//! (user + system) and memory come from `/proc/self/stat` and
//! `/proc/self/status` (the workspace forbids the `unsafe` that
//! `getrusage` would need).
//!
//! Run with `cargo bench --bench ingest`; `TRIBUTARY_BENCH_ROWS=200000 cargo
//! bench --bench ingest` for a quick check. To profile one case, run the bench
//! executable directly as that child, e.g.
//! `TRIBUTARY_BENCH_CASE=compact-setup TRIBUTARY_BENCH_DIR=/tmp/t <exe>`, then
//! `TRIBUTARY_BENCH_CASE=compact TRIBUTARY_BENCH_DIR=/tmp/t perf record -g <exe>`
//! (compaction changes the table: copy the folder to profile it again).

use std::collections::HashMap;
use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::SchemaRef;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tributary::{CreateOptions, ReadOptions, Table, TableSettings, TimeSettings};
use tributary_compaction::CompactorSettings;
use tributary_timeline::TimeMode;
use tributary_writer::WriteSettings;

#[path = "support/process.rs"]
mod process;
#[path = "support/scale.rs"]
mod scale;

type BenchResult<T> = Result<T, Box<dyn Error>>;

const CASE_ENV: &str = "TRIBUTARY_BENCH_CASE";
const DIR_ENV: &str = "TRIBUTARY_BENCH_DIR";
const TASKS_ENV: &str = "TRIBUTARY_BENCH_TASKS";
const ROWS_ENV: &str = "TRIBUTARY_BENCH_ROWS";
const ONLY_ENV: &str = "TRIBUTARY_BENCH_ONLY";
const DEFAULT_ROWS: usize = 10_000_000;
const BATCH_ROWS: usize = 65_536;
const COMMIT_ROWS: usize = 1_000_000;
const BUCKETS: u32 = 16;
const SMALL_COMMITS: usize = 200;
const SMALL_COMMIT_ROWS: usize = 100;
/// Commits of the compaction case's table; each writes every key once.
const COMPACT_COMMITS: usize = 5;
/// The compactor's default memory budget, MiB (`TRIBUTARY_BENCH_BUDGET_MB` overrides).
const COMPACT_BUDGET_MIB: usize = 256;
/// File groups the compactor merges at once.
const COMPACT_PARALLELISM: usize = 2;
/// Write buffer of the compaction set-up: large enough that each commit
/// flushes once, so each file group gets one log file per commit.
const COMPACT_SETUP_BUFFER: usize = 16 << 30;
/// The line prefix by which a child reports its figures.
const REPORT: &str = "BENCH-RESULT";

const SCHEMA: &str = r#"{"type":"record","name":"ingest_record","namespace":"tributary.bench","fields":[
  {"name":"key","type":"string"},
  {"name":"ts","type":"long"},
  {"name":"rider","type":"string"},
  {"name":"driver","type":"string"},
  {"name":"note","type":"string"},
  {"name":"fare","type":"double"},
  {"name":"distance","type":"double"},
  {"name":"trip_id","type":"long"},
  {"name":"tip_micros","type":"long"},
  {"name":"passengers","type":"int"}]}"#;

const PYTHON_READ: &str = "import time,sys; from hudi import HudiTableBuilder; \
    t=HudiTableBuilder.from_base_uri(sys.argv[1]).build(); s=time.time(); b=t.read(); \
    n=sum(x.num_rows for x in b); print(n, time.time()-s)";

// ---------------------------------------------------------------- process figures

/// CPU time and memory of this process.
#[derive(Debug, Clone, Copy)]
struct Usage {
    /// User plus system CPU time of all threads.
    cpu: Duration,
    /// The system (kernel) part of it.
    sys: Duration,
    /// Resident set size now, KiB.
    rss_kib: u64,
    /// Peak resident set size so far (what `ru_maxrss` reports), KiB.
    peak_kib: u64,
}

fn usage(ticks_per_second: u64) -> BenchResult<Usage> {
    let (user, sys) = process::cpu_times(ticks_per_second)?;
    let cpu = user + sys;
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kib = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Ok(Usage { cpu, sys, rss_kib: kib("VmRSS:"), peak_kib: kib("VmHWM:") })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime")
}

fn table_settings() -> TableSettings {
    TableSettings {
        time: TimeSettings { mode: Some(TimeMode::HybridLogical), ..Default::default() },
        ..Default::default()
    }
}

fn write_settings(tasks: usize) -> WriteSettings {
    WriteSettings { tasks, ..Default::default() }
}

/// The bench table at `dir`, opened with the bench's settings.
async fn open_table(dir: &Path) -> tributary::Result<Table> {
    Table::builder_local(dir).with_settings(table_settings()).open().await
}

async fn create_table(dir: &Path) -> Table {
    create_table_with(dir, BUCKETS).await
}

async fn create_table_with(dir: &Path, buckets: u32) -> Table {
    let mut options = CreateOptions::new(SCHEMA, "key", "ts");
    options.buckets = buckets;
    options.name = Some("ingest_bench".into());
    Table::builder_local(dir).with_settings(table_settings()).create(options).await.expect("create the bench table")
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().map(|v| v.replace('_', "").parse().unwrap_or_else(|e| panic!("{name}={v}: {e}")))
}

fn total_rows() -> usize {
    env_usize(ROWS_ENV).unwrap_or(DEFAULT_ROWS).max(2)
}

/// Total size of the files under `dir`.
fn disk_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

// ---------------------------------------------------------------- data

/// Bytes of the zig-zag varint Avro writes for `v`.
fn varint_len(v: i64) -> u64 {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    let mut n = 1;
    while z >= 0x80 {
        z >>= 7;
        n += 1;
    }
    n
}

const ALPHABET: &[u8; 64] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -";

fn random_text(rng: &mut SmallRng, out: &mut String, min: usize, max: usize) {
    out.clear();
    let len = rng.random_range(min..=max);
    while out.len() < len {
        let mut bits: u64 = rng.random();
        for _ in 0..(len - out.len()).min(10) {
            out.push(ALPHABET[(bits & 63) as usize] as char);
            bits >>= 6;
        }
    }
}

/// Generated input: batches grouped by commit.
struct Data {
    commits: Vec<Vec<RecordBatch>>,
    rows: usize,
    /// Avro-encoded size of the table's own columns, summed over rows.
    avro_bytes: u64,
    /// Distinct keys: the rows a snapshot read must return.
    distinct_keys: usize,
}

/// Makes batches of bench records, counting distinct keys and Avro bytes.
/// Event times increase with every row made, so later writes win.
struct Generator {
    schema: SchemaRef,
    rng: SmallRng,
    seen: Vec<bool>,
    distinct_keys: usize,
    avro_bytes: u64,
    rows: usize,
    text: String,
}

impl Generator {
    fn new(schema: &SchemaRef, key_space: usize, seed: u64) -> Self {
        Self {
            schema: schema.clone(),
            rng: SmallRng::seed_from_u64(seed),
            seen: vec![false; key_space],
            distinct_keys: 0,
            avro_bytes: 0,
            rows: 0,
            text: String::new(),
        }
    }

    /// `n` records whose key numbers (below the key space) come from `next_key`.
    fn batch(&mut self, n: usize, mut next_key: impl FnMut(&mut SmallRng) -> usize) -> RecordBatch {
        let mut key = Vec::with_capacity(n);
        let mut ts = Vec::with_capacity(n);
        let mut texts: [Vec<String>; 3] = Default::default();
        let mut fare = Vec::with_capacity(n);
        let mut distance = Vec::with_capacity(n);
        let mut trip_id = Vec::with_capacity(n);
        let mut tip = Vec::with_capacity(n);
        let mut passengers = Vec::with_capacity(n);
        let rng = &mut self.rng;
        for i in 0..n {
            let k = next_key(rng);
            if !self.seen[k] {
                self.seen[k] = true;
                self.distinct_keys += 1;
            }
            let k = format!("key-{k:09}");
            let t = 1_700_000_000_000i64 + (self.rows + i) as i64;
            self.avro_bytes += k.len() as u64 + 1 + varint_len(t);
            key.push(k);
            ts.push(t);
            for col in texts.iter_mut() {
                random_text(rng, &mut self.text, 20, 40);
                self.avro_bytes += self.text.len() as u64 + 1;
                col.push(self.text.clone());
            }
            fare.push(rng.random_range(2.5..250.0));
            distance.push(rng.random_range(0.1..80.0));
            self.avro_bytes += 16;
            let id = rng.random_range(0..1i64 << 48);
            let tip_micros = rng.random_range(0..100_000_000i64);
            let p = rng.random_range(1..=8i32);
            self.avro_bytes += varint_len(id) + varint_len(tip_micros) + varint_len(p.into());
            trip_id.push(id);
            tip.push(tip_micros);
            passengers.push(p);
        }
        self.rows += n;
        let [rider, driver, note] = texts;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(key)),
            Arc::new(Int64Array::from(ts)),
            Arc::new(StringArray::from(rider)),
            Arc::new(StringArray::from(driver)),
            Arc::new(StringArray::from(note)),
            Arc::new(Float64Array::from(fare)),
            Arc::new(Float64Array::from(distance)),
            Arc::new(Int64Array::from(trip_id)),
            Arc::new(Int64Array::from(tip)),
            Arc::new(Int32Array::from(passengers)),
        ];
        RecordBatch::try_new(self.schema.clone(), columns).expect("generated batch matches the schema")
    }
}

/// `rows` records in commits of `per_commit`, batches of at most `batch_rows`,
/// keys drawn uniformly from `key_space`.
fn generate(
    schema: &SchemaRef,
    rows: usize,
    per_commit: usize,
    batch_rows: usize,
    key_space: usize,
    seed: u64,
) -> Data {
    let mut generator = Generator::new(schema, key_space, seed);
    let mut commits = Vec::new();
    let mut row = 0usize;
    while row < rows {
        let commit_end = (row + per_commit).min(rows);
        let mut batches = Vec::new();
        while row < commit_end {
            let n = batch_rows.min(commit_end - row);
            batches.push(generator.batch(n, |rng| rng.random_range(0..key_space)));
            row += n;
        }
        commits.push(batches);
    }
    Data { commits, rows, avro_bytes: generator.avro_bytes, distinct_keys: generator.distinct_keys }
}

// ---------------------------------------------------------------- child cases

/// Prints the figures of a case as one line the parent collects.
fn report(fields: &[(&str, String)]) {
    let line: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("{REPORT} {}", line.join(" "));
}

fn case_ingest(dir: &Path, tasks: usize, ticks: u64) -> BenchResult<()> {
    let rt = runtime();
    let rows = total_rows();
    let table = rt.block_on(create_table(dir));
    let client = rt.block_on(table.write_client(write_settings(tasks))).expect("write client");
    let data = generate(client.schema().arrow(), rows, COMMIT_ROWS, BATCH_ROWS, rows / 2, 42);
    let before = usage(ticks)?;
    let started = Instant::now();
    let (records, bytes, files, slowest) = rt.block_on(async {
        let (mut records, mut bytes, mut files, mut slowest) = (0u64, 0u64, 0usize, Duration::ZERO);
        for batches in &data.commits {
            let commit_started = Instant::now();
            let mut commit = client.start_commit().await?;
            for b in batches {
                commit.write_batch(b).await?;
            }
            let summary = commit.commit().await?;
            slowest = slowest.max(commit_started.elapsed());
            records += summary.rows;
            bytes += summary.bytes();
            files += summary.files.len();
        }
        Ok::<_, tributary_writer::Error>((records, bytes, files, slowest))
    })?;
    let secs = started.elapsed().as_secs_f64();
    let after = usage(ticks)?;
    report(&[
        ("rows", data.rows.to_string()),
        ("records", records.to_string()),
        ("commits", data.commits.len().to_string()),
        ("secs", format!("{secs:.6}")),
        ("bytes", bytes.to_string()),
        ("disk", disk_bytes(dir).to_string()),
        ("files", files.to_string()),
        ("slowest_commit", format!("{:.6}", slowest.as_secs_f64())),
        ("cpu", format!("{:.3}", (after.cpu - before.cpu).as_secs_f64())),
        ("rss_before_kib", before.rss_kib.to_string()),
        ("peak_kib", after.peak_kib.to_string()),
        ("avro_bytes", data.avro_bytes.to_string()),
        ("distinct", data.distinct_keys.to_string()),
    ]);
    Ok(())
}

fn case_small(dir: &Path, ticks: u64) -> BenchResult<()> {
    let rt = runtime();
    let table = rt.block_on(create_table(dir));
    let client = rt.block_on(table.write_client(write_settings(2))).expect("write client");
    let rows = SMALL_COMMITS * SMALL_COMMIT_ROWS;
    let data = generate(client.schema().arrow(), rows, SMALL_COMMIT_ROWS, SMALL_COMMIT_ROWS, rows, 7);
    let before = usage(ticks)?;
    let started = Instant::now();
    let mut latencies = rt.block_on(async {
        let mut latencies = Vec::with_capacity(data.commits.len());
        for batches in &data.commits {
            let t = Instant::now();
            let mut commit = client.start_commit().await?;
            for b in batches {
                commit.write_batch(b).await?;
            }
            commit.commit().await?;
            latencies.push(t.elapsed());
        }
        Ok::<_, tributary_writer::Error>(latencies)
    })?;
    let secs = started.elapsed().as_secs_f64();
    let after = usage(ticks)?;
    let tenth = (latencies.len() / 10).max(1);
    let mean_ms = |l: &[Duration]| l.iter().map(Duration::as_secs_f64).sum::<f64>() * 1e3 / l.len() as f64;
    let (first_ms, last_ms) = (mean_ms(&latencies[..tenth]), mean_ms(&latencies[latencies.len() - tenth..]));
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3;
    report(&[
        ("commits", latencies.len().to_string()),
        ("secs", format!("{secs:.6}")),
        ("p50_ms", format!("{:.3}", pct(0.5))),
        ("p99_ms", format!("{:.3}", pct(0.99))),
        ("first_ms", format!("{first_ms:.3}")),
        ("last_ms", format!("{last_ms:.3}")),
        ("cpu", format!("{:.3}", (after.cpu - before.cpu).as_secs_f64())),
        ("peak_kib", after.peak_kib.to_string()),
    ]);
    Ok(())
}

fn case_read(dir: &Path, ticks: u64) -> BenchResult<()> {
    let rt = runtime();
    let table = rt.block_on(Table::open_local(dir)).expect("open the bench table");
    let before = usage(ticks)?;
    let started = Instant::now();
    // Unordered, as the official reader returns rows; `tributary read` adds a sort.
    let batch = rt.block_on(table.read(&ReadOptions { unordered: true, ..Default::default() }))?;
    let secs = started.elapsed().as_secs_f64();
    let after = usage(ticks)?;
    report(&[
        ("rows", batch.num_rows().to_string()),
        ("secs", format!("{secs:.6}")),
        ("cpu", format!("{:.3}", (after.cpu - before.cpu).as_secs_f64())),
        ("peak_kib", after.peak_kib.to_string()),
    ]);
    Ok(())
}

/// Records per commit of the compaction case (also its key space).
fn compact_commit_rows() -> usize {
    (total_rows() / COMPACT_COMMITS).max(1)
}

/// Writes the compaction case's table: 5 commits, each writing every key of
/// the key space once in a fresh random order (untimed set-up).
fn case_compact_setup(dir: &Path, ticks: u64) -> BenchResult<()> {
    let rt = runtime();
    let per_commit = compact_commit_rows();
    let table = rt.block_on(create_table(dir));
    let settings = WriteSettings { tasks: 2, buffer_bytes: COMPACT_SETUP_BUFFER, ..Default::default() };
    let client = rt.block_on(table.write_client(settings))?;
    let mut generator = Generator::new(client.schema().arrow(), per_commit, 11);
    let mut order: Vec<usize> = (0..per_commit).collect();
    let started = Instant::now();
    let (records, bytes, logs_per_group) = rt.block_on(async {
        let (mut records, mut bytes) = (0u64, 0u64);
        let mut logs_per_group: HashMap<String, usize> = HashMap::new();
        for _ in 0..COMPACT_COMMITS {
            order.shuffle(&mut generator.rng);
            let mut commit = client.start_commit().await?;
            for chunk in order.chunks(BATCH_ROWS) {
                let mut keys = chunk.iter().copied();
                let batch = generator.batch(chunk.len(), |_| keys.next().expect("one key per row"));
                commit.write_batch(&batch).await?;
            }
            let summary = commit.commit().await?;
            records += summary.records();
            bytes += summary.bytes();
            for f in &summary.files {
                *logs_per_group.entry(f.file_id.clone()).or_default() += 1;
            }
        }
        Ok::<_, tributary_writer::Error>((records, bytes, logs_per_group))
    })?;
    let secs = started.elapsed().as_secs_f64();
    let after = usage(ticks)?;
    report(&[
        ("rows", generator.rows.to_string()),
        ("records", records.to_string()),
        ("commits", COMPACT_COMMITS.to_string()),
        ("secs", format!("{secs:.6}")),
        ("bytes", bytes.to_string()),
        ("disk", disk_bytes(dir).to_string()),
        ("groups", logs_per_group.len().to_string()),
        ("files", logs_per_group.values().sum::<usize>().to_string()),
        ("min_logs", logs_per_group.values().min().copied().unwrap_or(0).to_string()),
        ("max_logs", logs_per_group.values().max().copied().unwrap_or(0).to_string()),
        ("peak_kib", after.peak_kib.to_string()),
        ("avro_bytes", generator.avro_bytes.to_string()),
        ("distinct", generator.distinct_keys.to_string()),
    ]);
    Ok(())
}

/// The compactor's memory budget in bytes: `TRIBUTARY_BENCH_BUDGET_MB` MiB,
/// else the default.
fn compact_budget() -> usize {
    std::env::var("TRIBUTARY_BENCH_BUDGET_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(COMPACT_BUDGET_MIB) << 20
}

/// One compaction of the table at `dir`, timed.
fn case_compact(dir: &Path, ticks: u64) -> BenchResult<()> {
    let rt = runtime();
    let table = rt.block_on(open_table(dir))?;
    let settings =
        CompactorSettings { memory_budget: compact_budget(), parallelism: COMPACT_PARALLELISM, ..Default::default() };
    let compactor = rt.block_on(table.compactor(settings))?;
    let before = usage(ticks)?;
    let started = Instant::now();
    let done = rt.block_on(compactor.run_once())?;
    let secs = started.elapsed().as_secs_f64();
    let after = usage(ticks)?;
    let sum = |f: fn(&tributary_compaction::CompactionSummary) -> u64| done.iter().map(f).sum::<u64>();
    report(&[
        ("compactions", done.len().to_string()),
        ("groups", sum(|c| c.groups as u64).to_string()),
        ("records", sum(|c| c.records).to_string()),
        ("bytes_read", sum(|c| c.bytes_read).to_string()),
        ("bytes_written", sum(|c| c.bytes_written).to_string()),
        ("secs", format!("{secs:.6}")),
        ("cpu", format!("{:.3}", (after.cpu - before.cpu).as_secs_f64())),
        ("rss_before_kib", before.rss_kib.to_string()),
        ("peak_kib", after.peak_kib.to_string()),
        ("disk", disk_bytes(dir).to_string()),
    ]);
    Ok(())
}

fn child(case: &str) -> BenchResult<()> {
    let ticks = process::clock_ticks_per_second();
    let dir = PathBuf::from(std::env::var_os(DIR_ENV).expect("TRIBUTARY_BENCH_DIR for a child case"));
    match case {
        "ingest" => case_ingest(&dir, env_usize(TASKS_ENV).expect("TRIBUTARY_BENCH_TASKS for ingest"), ticks),
        "small" => case_small(&dir, ticks),
        "read" => case_read(&dir, ticks),
        "compact-setup" => case_compact_setup(&dir, ticks),
        "compact" => case_compact(&dir, ticks),
        "scale-write" => scale::case_write(&dir, ticks),
        "scale-compact" => scale::case_compact(&dir, ticks),
        "scale-read" => scale::case_read(&dir, ticks, false),
        "scale-scan" => scale::case_read(&dir, ticks, true),
        other => Err(format!("unknown case {other}").into()),
    }
}

// ---------------------------------------------------------------- parent

type Figures = HashMap<String, String>;

/// Runs one case in a child process; its figures, or why there are none
/// (with the last line the child wrote to stderr).
fn run_child(case: &str, dir: &Path, tasks: Option<usize>) -> Result<Figures, String> {
    let env: Vec<(&str, String)> = tasks.map(|t| (TASKS_ENV, t.to_string())).into_iter().collect();
    run_child_with(case, dir, &env)
}

/// [`run_child`] with more environment variables for the child.
fn run_child_with(case: &str, dir: &Path, env: &[(&str, String)]) -> Result<Figures, String> {
    let exe = std::env::current_exe().expect("path of this bench binary");
    let mut cmd = Command::new(exe);
    cmd.env(CASE_ENV, case).env(DIR_ENV, dir).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    let out = cmd.output().map_err(|e| format!("cannot start the child: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut figures = None;
    for line in stdout.lines() {
        match line.strip_prefix(REPORT) {
            Some(rest) => {
                figures = Some(
                    rest.split_whitespace()
                        .filter_map(|kv| kv.split_once('='))
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<Figures>(),
                )
            }
            None => println!("  [{case}] {line}"),
        }
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    for line in stderr.lines() {
        println!("  [{case}] stderr: {line}");
    }
    if !out.status.success() {
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty() && !l.starts_with("note: run with"));
        return Err(match last {
            Some(l) => format!("child failed ({}): {}", out.status, l.trim()),
            None => format!("child failed: {}", out.status),
        });
    }
    figures.ok_or_else(|| "child printed no figures".to_string())
}

fn get(f: &Figures, key: &str) -> f64 {
    f.get(key).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
}

fn mib(kib: f64) -> f64 {
    kib / 1024.0
}

/// Runs the official reader; (rows, seconds) or why not.
fn official_read(dir: &Path) -> Result<(u64, f64), String> {
    let out = Command::new("python3")
        .arg("-c")
        .arg(PYTHON_READ)
        .arg(dir)
        .output()
        .map_err(|e| format!("python3 not runnable: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("").to_string();
        return Err(format!("python3 failed ({}): {last}", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace();
    let rows = parts.next().and_then(|v| v.parse().ok()).ok_or_else(|| format!("unexpected output {text:?}"))?;
    let secs = parts.next().and_then(|v| v.parse().ok()).ok_or_else(|| format!("unexpected output {text:?}"))?;
    Ok((rows, secs))
}

/// Which cases run (`TRIBUTARY_BENCH_ONLY`).
#[derive(Debug, Clone, Copy)]
struct Selection {
    ingest: bool,
    commits: bool,
    read: bool,
    compact: bool,
    /// The scale benchmark ([`scale`]): only when named.
    scale: bool,
}

const CASE_NAMES: &str = "ingest, commits, read, compact, scale";

fn selection() -> Selection {
    let all = Selection { ingest: true, commits: true, read: true, compact: true, scale: false };
    let Ok(value) = std::env::var(ONLY_ENV) else { return all };
    let mut only = Selection { ingest: false, commits: false, read: false, compact: false, scale: false };
    let mut any = false;
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match name {
            "ingest" => only.ingest = true,
            "commits" => only.commits = true,
            "read" => only.read = true,
            "compact" => only.compact = true,
            "scale" => only.scale = true,
            other => panic!("{ONLY_ENV}={value}: unknown case `{other}` (cases: {CASE_NAMES})"),
        }
        any = true;
    }
    if any { only } else { all }
}

impl Selection {
    fn names(&self) -> String {
        let cases = [
            ("ingest", self.ingest),
            ("commits", self.commits),
            ("read", self.read),
            ("compact", self.compact),
            ("scale", self.scale),
        ];
        cases.iter().filter(|(_, on)| *on).map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
    }
}

/// Prints the snapshot reads of one table by both readers, checking the row
/// counts against `expected` distinct keys.
fn print_reads(expected: Option<u64>, ours: &Result<Figures, String>, official: &Result<(u64, f64), String>) {
    if let Some(d) = expected {
        println!("(expected rows: {d} distinct keys)");
    }
    println!("{:<26} {:>11} {:>9} {:>12} {:>8} {:>10}", "reader", "rows", "secs", "rows/s", "CPU-s", "peak MiB");
    let ours_rate = match ours {
        Ok(f) => {
            let (n, secs) = (get(f, "rows"), get(f, "secs"));
            println!(
                "{:<26} {:>11.0} {:>9.2} {:>12.0} {:>8.2} {:>10.0}",
                "tributary Table::read",
                n,
                secs,
                n / secs,
                get(f, "cpu"),
                mib(get(f, "peak_kib"))
            );
            if expected.is_some_and(|d| d as f64 != n) {
                println!("  MISMATCH: tributary returned {n} rows");
            }
            Some(n / secs)
        }
        Err(e) => {
            println!("{:<26} FAILED: {e}", "tributary Table::read");
            None
        }
    };
    match official {
        Ok((n, secs)) => {
            let rate = *n as f64 / secs;
            println!("{:<26} {:>11} {:>9.2} {:>12.0} {:>8} {:>10}", "hudi 0.5.0 (python)", n, secs, rate, "-", "-");
            if expected.is_some_and(|d| d != *n) {
                println!("  MISMATCH: the official reader returned {n} rows");
            }
            if let Some(r) = ours_rate {
                println!("ratio ours/official (rows/s): {:.2}", r / rate);
            }
        }
        Err(e) => println!("{:<26} skipped: {e}", "hudi 0.5.0 (python)"),
    }
}

/// Both snapshot reads of the table at `dir`, each announced.
fn run_reads(dir: &Path, what: &str) -> (Result<Figures, String>, Result<(u64, f64), String>) {
    println!("running snapshot read of {what} (ours) ...");
    let ours = run_child("read", dir, None);
    println!("running snapshot read of {what} (official hudi reader) ...");
    (ours, official_read(dir))
}

/// The compaction case's results.
struct CompactRun {
    setup: Result<Figures, String>,
    compact: Result<Figures, String>,
    ours: Result<Figures, String>,
    official: Result<(u64, f64), String>,
}

fn run_compact(dir: &Path) -> CompactRun {
    println!("running compaction set-up (untimed) ...");
    let setup = run_child("compact-setup", dir, None);
    let compact = match &setup {
        Ok(_) => {
            println!("running compaction ...");
            run_child("compact", dir, None)
        }
        Err(e) => Err(format!("no table to compact: {e}")),
    };
    let (ours, official) = match &compact {
        Ok(_) => run_reads(dir, "the compacted table"),
        Err(_) => (Err("no compacted table".into()), Err("no compacted table".into())),
    };
    CompactRun { setup, compact, ours, official }
}

fn print_compact(run: &CompactRun) {
    let per_commit = compact_commit_rows();
    println!();
    println!(
        "== compaction ({COMPACT_COMMITS} commits x {per_commit} records, each commit writes every key once; \
         {BUCKETS} buckets; budget {} MiB, parallelism {COMPACT_PARALLELISM}) ==",
        compact_budget() >> 20
    );
    let setup = match &run.setup {
        Ok(f) => f,
        Err(e) => {
            println!("set-up FAILED: {e}");
            return;
        }
    };
    println!(
        "set-up (untimed): {:.0} log records, {:.0} log files in {:.0} file groups ({:.0} to {:.0} per group), \
         {:.1} MB of logs, written in {:.1} s (peak {:.0} MiB)",
        get(setup, "records"),
        get(setup, "files"),
        get(setup, "groups"),
        get(setup, "min_logs"),
        get(setup, "max_logs"),
        get(setup, "bytes") / 1e6,
        get(setup, "secs"),
        mib(get(setup, "peak_kib")),
    );
    let f = match &run.compact {
        Ok(f) => f,
        Err(e) => {
            println!("compaction FAILED: {e}");
            return;
        }
    };
    let (input, output, secs, cpu) = (get(setup, "records"), get(f, "records"), get(f, "secs"), get(f, "cpu"));
    let (read, written) = (get(f, "bytes_read"), get(f, "bytes_written"));
    println!(
        "{:>9} {:>12} {:>12} {:>10} {:>11} {:>8} {:>13} {:>10} {:>10}",
        "secs", "in rec/s", "out rec/s", "read MB/s", "write MB/s", "CPU-s", "in rec/CPU-s", "RSS0 MiB", "peak MiB"
    );
    println!(
        "{:>9.2} {:>12.0} {:>12.0} {:>10.1} {:>11.1} {:>8.2} {:>13.0} {:>10.0} {:>10.0}",
        secs,
        input / secs,
        output / secs,
        read / 1e6 / secs,
        written / 1e6 / secs,
        cpu,
        input / cpu,
        mib(get(f, "rss_before_kib")),
        mib(get(f, "peak_kib")),
    );
    println!(
        "(in = {input:.0} log records read, out = {output:.0} records written; {:.1} MB read, {:.1} MB written; \
         {:.0} compaction(s) of {:.0} file groups; peak = VmHWM of the compactor's child process)",
        read / 1e6,
        written / 1e6,
        get(f, "compactions"),
        get(f, "groups"),
    );
    let distinct = get(setup, "distinct");
    if output != distinct {
        println!("  MISMATCH: the compaction wrote {output:.0} records for {distinct:.0} distinct keys");
    }
    if get(f, "compactions") != 1.0 || get(f, "groups") != f64::from(BUCKETS) {
        println!("  note: expected one compaction of {BUCKETS} file groups");
    }
    println!();
    println!("== snapshot read of the compacted table ==");
    print_reads(setup.get("distinct").and_then(|v| v.parse().ok()), &run.ours, &run.official);
}

fn parent() {
    let rows = total_rows();
    let only = selection();
    if only.scale {
        scale::parent();
        if !(only.ingest || only.commits || only.read || only.compact) {
            return;
        }
    }
    let root = tempfile::Builder::new().prefix("tributary-ingest-bench-").tempdir().expect("temp dir");
    println!("ingest bench: {rows} records; cases: {}; in {}", only.names(), root.path().display());
    if only.ingest || only.read {
        println!(
            "ingest: key space {}, batches of {BATCH_ROWS}, one commit per {COMMIT_ROWS}, {BUCKETS} buckets, \
             hybrid-logical",
            rows / 2
        );
    }

    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    println!("load average at start: {}", load());
    // The read case reads the tasks=2 table, so it is written even when ingest is not reported.
    let ingest_tasks: &[usize] = if only.ingest {
        &[1, 2]
    } else if only.read {
        &[2]
    } else {
        &[]
    };
    let mut ingest: Vec<(usize, Result<Figures, String>)> = Vec::new();
    for &tasks in ingest_tasks {
        let dir = root.path().join(format!("tasks{tasks}"));
        println!("running ingest tasks={tasks} ...");
        ingest.push((tasks, run_child("ingest", &dir, Some(tasks))));
    }
    let small = only.commits.then(|| {
        println!("running small commits ...");
        run_child("small", &root.path().join("small"), None)
    });
    let reads = only.read.then(|| {
        let have_table = ingest.iter().any(|(t, r)| *t == 2 && r.is_ok());
        if have_table {
            run_reads(&root.path().join("tasks2"), "the tasks=2 table")
        } else {
            (Err("no tasks=2 table to read".into()), Err("no tasks=2 table to read".into()))
        }
    });
    let compact = only.compact.then(|| run_compact(&root.path().join("compact")));

    let distinct = ingest
        .iter()
        .filter_map(|(t, r)| r.as_ref().ok().filter(|_| *t == 2))
        .find_map(|f| f.get("distinct").and_then(|v| v.parse::<u64>().ok()));
    if only.ingest {
        println!();
        println!("== ingest ({rows} records, 10 columns; MB = 10^6 bytes, MiB = 2^20) ==");
        println!(
            "{:<8} {:>9} {:>12} {:>9} {:>10} {:>8} {:>13} {:>8} {:>10} {:>10} {:>11}",
            "tasks",
            "secs",
            "records/s",
            "MB/s",
            "B/record",
            "CPU-s",
            "rec/CPU-s",
            "commits",
            "slowest s",
            "RSS0 MiB",
            "peak MiB"
        );
        let mut avro_per_record = None;
        for (tasks, r) in &ingest {
            match r {
                Ok(f) => {
                    let (records, secs, bytes, cpu) =
                        (get(f, "records"), get(f, "secs"), get(f, "bytes"), get(f, "cpu"));
                    println!(
                        "{:<8} {:>9.2} {:>12.0} {:>9.1} {:>10.1} {:>8.2} {:>13.0} {:>8} {:>10.2} {:>10.0} {:>11.0}",
                        tasks,
                        secs,
                        records / secs,
                        bytes / 1e6 / secs,
                        bytes / records,
                        cpu,
                        records / cpu,
                        f.get("commits").map_or("?", String::as_str),
                        get(f, "slowest_commit"),
                        mib(get(f, "rss_before_kib")),
                        mib(get(f, "peak_kib")),
                    );
                    if (get(f, "disk") - bytes).abs() > 0.05 * bytes {
                        println!(
                            "         note: {:.0} bytes on disk vs {bytes:.0} in the commit summaries",
                            get(f, "disk")
                        );
                    }
                    avro_per_record = Some(get(f, "avro_bytes") / get(f, "rows"));
                }
                Err(e) => println!("{tasks:<8} FAILED: {e}"),
            }
        }
        if let Some(a) = avro_per_record {
            println!(
                "(table columns encode to {a:.1} Avro bytes per record; B/record on disk adds the 5 _hoodie_ meta \
                 columns)"
            );
        }
        println!("(RSS0 = resident set after generating the input, before ingest; peak = VmHWM of the child process)");
    }

    if let Some(small) = &small {
        println!();
        println!("== small commits ({SMALL_COMMITS} commits x {SMALL_COMMIT_ROWS} records, tasks=2) ==");
        match small {
            Ok(f) => println!(
                "{:.1} commits/s  ({:.2} s; p50 {:.2} ms, p99 {:.2} ms; mean of the first 10% {:.2} ms, \
                 of the last 10% {:.2} ms; {:.2} CPU-s; peak {:.0} MiB)",
                get(f, "commits") / get(f, "secs"),
                get(f, "secs"),
                get(f, "p50_ms"),
                get(f, "p99_ms"),
                get(f, "first_ms"),
                get(f, "last_ms"),
                get(f, "cpu"),
                mib(get(f, "peak_kib")),
            ),
            Err(e) => println!("FAILED: {e}"),
        }
    }

    if let Some((ours, official)) = &reads {
        println!();
        println!("== snapshot read of the tasks=2 table ==");
        if !only.ingest
            && let Some((_, Err(e))) = ingest.first()
        {
            println!("(writing the table failed: {e})");
        }
        print_reads(distinct, ours, official);
    }

    if let Some(run) = &compact {
        print_compact(run);
    }
    println!();
    println!("load average at end: {} (this machine has 2 cores; other work skews the figures)", load());
}

/// The allocator, configured in .cargo/config.toml (README, "Allocator").
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    match std::env::var(CASE_ENV) {
        Ok(case) => {
            if let Err(e) = child(&case) {
                eprintln!("ingest bench case {case}: {e}");
                std::process::exit(1);
            }
        }
        Err(_) => parent(),
    }
}
