//! A scan of a table far larger than its memory budget: peak RSS of the
//! scanning process, and what a query of one partition and two columns
//! fetches from the store.
//!
//! `cargo bench --bench scan` makes the table once (in
//! `TRIBUTARY_BENCH_DIR`, default `target/bench-scan`):
//! `TRIBUTARY_BENCH_ROWS` rows (default 20,000,000) of 10 columns over 8
//! regions (the partitions) and 4 buckets each, compacted into base files.
//! Each run then updates a tenth of the keys in logs, so every file slice
//! holds a base file and logs, and then, each in a process of its own:
//! - `scan`: every row, merged, through `Table::scan` with a memory budget
//!   (`TRIBUTARY_BENCH_BUDGET_MIB`, default 256); prints the rows, the time
//!   and the process's peak RSS (`VmHWM`); `RUST_LOG=tributary_merge=debug`
//!   shows how each slice was merged;
//! - `query`: the rows of one region, two columns, through a store that
//!   counts the bytes it serves, after the table is compacted again (slices
//!   without logs); prints those bytes beside the region's file sizes; then
//!   the same for a thousand keys of the region (row groups and pages of
//!   other keys skipped by their statistics).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use futures::TryStreamExt;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tributary::{CompareOp, CreateOptions, Predicate, Table, TableLocation, WriteSettings};
use tributary_compaction::CompactorSettings;
use tributary_timeline::{Clock, CountingStore, SystemClock};

#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[path = "support/process.rs"]
mod process;

const SCHEMA: &str = r#"{"type":"record","name":"wide","fields":[
 {"name":"id","type":"string"},{"name":"ts","type":"long"},{"name":"region","type":"string"},
 {"name":"amount","type":"long"},{"name":"price","type":"double"},{"name":"qty","type":"int"},
 {"name":"note","type":"string"},{"name":"flag","type":"boolean"},{"name":"category","type":"string"},
 {"name":"seq","type":"long"}]}"#;

const REGIONS: [&str; 8] = ["af", "ap", "eu", "me", "na", "oc", "sa", "us"];
const BATCH: usize = 100_000;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Rows for keys `keys` at event time `ts` (a later pass writes later
/// times, so its versions win).
fn batch(keys: &[usize], ts: i64, rng: &mut SmallRng) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("region", DataType::Utf8, false),
        Field::new("amount", DataType::Int64, false),
        Field::new("price", DataType::Float64, false),
        Field::new("qty", DataType::Int32, false),
        Field::new("note", DataType::Utf8, false),
        Field::new("flag", DataType::Boolean, false),
        Field::new("category", DataType::Utf8, false),
        Field::new("seq", DataType::Int64, false),
    ]));
    let n = keys.len();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(keys.iter().map(|k| format!("key-{k:010}")))),
        Arc::new(Int64Array::from_iter_values((0..n).map(|_| ts))),
        Arc::new(StringArray::from_iter_values(keys.iter().map(|k| REGIONS[k % REGIONS.len()]))),
        Arc::new(Int64Array::from_iter_values((0..n).map(|_| rng.random_range(0..1_000_000)))),
        Arc::new(Float64Array::from_iter_values((0..n).map(|_| rng.random_range(0.0..1000.0)))),
        Arc::new(Int32Array::from_iter_values((0..n).map(|_| rng.random_range(0..100)))),
        Arc::new(StringArray::from_iter_values((0..n).map(|_| format!("note-{:024x}", rng.random::<u128>() >> 32)))),
        Arc::new(BooleanArray::from_iter((0..n).map(|_| Some(rng.random_bool(0.5))))),
        Arc::new(StringArray::from_iter_values((0..n).map(|_| ["a", "b", "c", "d"][rng.random_range(0..4)]))),
        Arc::new(Int64Array::from_iter_values(keys.iter().map(|k| *k as i64))),
    ];
    RecordBatch::try_new(schema, columns).expect("batch")
}

async fn write(table: &Table, keys: impl Iterator<Item = usize>, ts: i64, seed: u64) {
    let client = table.write_client(WriteSettings { tasks: 2, ..Default::default() }).await.expect("client");
    let mut rng = SmallRng::seed_from_u64(seed);
    let keys: Vec<usize> = keys.collect();
    for commit in keys.chunks(1_000_000) {
        let mut c = client.start_commit().await.expect("start");
        for chunk in commit.chunks(BATCH) {
            c.write_batch(&batch(chunk, ts, &mut rng)).await.expect("write");
        }
        c.commit().await.expect("commit");
    }
}

async fn compact(table: &Table) {
    let started = Instant::now();
    let summary = table.compactor(CompactorSettings::default()).await.expect("compactor").run_once().await;
    summary.expect("compaction");
    println!("compacted in {:.1} s", started.elapsed().as_secs_f64());
}

/// Makes the table in `dir`.
async fn make(dir: &Path, rows: usize) {
    let mut o = CreateOptions::new(SCHEMA, "id", "ts");
    o.partition_field = Some("region".into());
    o.buckets = 4;
    let table = Table::builder_local(dir).create(o).await.expect("create");
    let started = Instant::now();
    write(&table, 0..rows, 1, 1).await;
    println!("{rows} rows written in {:.1} s", started.elapsed().as_secs_f64());
    compact(&table).await;
}

/// Updates a tenth of the keys in logs, later than every version so far.
async fn update(dir: &Path, rows: usize) {
    let table = Table::builder_local(dir).open().await.expect("open");
    let ts = SystemClock.now_millis();
    write(&table, (0..rows).step_by(10), ts, ts as u64).await;
    println!("{} keys updated in logs", rows.div_ceil(10));
}

/// Peak resident memory of this process (`VmHWM`), in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kib / 1024.0
}

async fn scan(dir: &Path, budget_mib: usize) {
    // `RUST_LOG=tributary_merge=debug` shows how each slice was merged.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let table = Table::builder_local(dir).open().await.expect("open");
    let ticks = process::clock_ticks_per_second();
    let (cpu, started) = (process::cpu_time(ticks).expect("cpu"), Instant::now());
    let mut rows = 0usize;
    let mut stream = table.scan().memory_budget(budget_mib << 20).stream().await.expect("scan");
    while let Some(b) = stream.try_next().await.expect("batch") {
        rows += b.num_rows();
    }
    let cpu = process::cpu_time(ticks).expect("cpu") - cpu;
    println!(
        "scan, {budget_mib} MiB budget: {rows} rows in {:.1} s ({:.1} CPU-s, {:.0} rows per CPU-s); peak RSS {:.0} MiB",
        started.elapsed().as_secs_f64(),
        cpu.as_secs_f64(),
        rows as f64 / cpu.as_secs_f64(),
        peak_rss_mib()
    );
}

async fn query(dir: &Path) {
    let table = Table::builder_local(dir).open().await.expect("open");
    compact(&table).await;
    let root = std::fs::canonicalize(dir).expect("table folder");
    let local = Arc::new(object_store::local::LocalFileSystem::new());
    let store = Arc::new(CountingStore::new(local));
    let loc = TableLocation::new(store.clone(), object_store::path::Path::from_absolute_path(&root).expect("path"));
    let table = Table::builder(loc).open().await.expect("open");
    // The bytes a scan fetches, and its rows.
    let fetched = |filter: Predicate| {
        let (table, store) = (&table, &store);
        async move {
            let plan = table.scan().columns(["id", "amount"]).filter(filter).plan().await.expect("plan");
            let before = store.bytes_read();
            let started = Instant::now();
            let batches: Vec<RecordBatch> = plan.stream().try_collect().await.expect("query");
            let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
            (store.bytes_read() - before, rows, started.elapsed())
        }
    };
    let (bytes, rows, took) = fetched(Predicate::eq("region", "eu")).await;
    let (mut region, mut all) = (0u64, 0u64);
    for entry in walk(&root) {
        if entry.extension().is_some_and(|e| e == "parquet") && !entry.to_string_lossy().contains("/.hoodie/") {
            let size = std::fs::metadata(&entry).expect("size").len();
            all += size;
            let folder = entry.parent().and_then(Path::file_name).map(|f| f.to_string_lossy().into_owned());
            if folder.is_some_and(|f| f == "eu" || f == "region=eu") {
                region += size;
            }
        }
    }
    let mib = |b: u64| b as f64 / 1048576.0;
    println!(
        "one region, two columns: {rows} rows in {:.2} s; fetched {:.1} MiB of the region's {:.1} MiB of base files ({:.1} MiB in all)",
        took.as_secs_f64(),
        mib(bytes),
        mib(region),
        mib(all)
    );
    // A thousand keys of the region: base files hold their rows in key
    // order, so the row groups and pages of other keys are skipped.
    let (low, high) = ("key-0000100000", "key-0000101000");
    let range = Predicate::eq("region", "eu")
        .and(Predicate::compare("id", CompareOp::GtEq, low))
        .and(Predicate::compare("id", CompareOp::Lt, high));
    let (bytes, rows, took) = fetched(range).await;
    println!(
        "one region, keys {low} to {high}, two columns: {rows} rows in {:.3} s; fetched {:.2} MiB",
        took.as_secs_f64(),
        mib(bytes)
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

fn child(step: &str) {
    let status = std::process::Command::new(std::env::current_exe().expect("exe")).arg(step).status().expect("spawn");
    assert!(status.success(), "{step} failed");
}

#[tokio::main]
async fn main() {
    let dir = PathBuf::from(std::env::var("TRIBUTARY_BENCH_DIR").unwrap_or_else(|_| "target/bench-scan".into()));
    let rows = env("TRIBUTARY_BENCH_ROWS", 20_000_000);
    // `cargo bench` passes `--bench`; the steps run as child processes so
    // that each one's peak RSS is its own.
    match std::env::args().nth(1).as_deref() {
        Some("make") => make(&dir, rows).await,
        Some("update") => update(&dir, rows).await,
        Some("scan") => scan(&dir, env("TRIBUTARY_BENCH_BUDGET_MIB", 256)).await,
        Some("query") => query(&dir).await,
        _ => {
            if !dir.join(".hoodie").exists() {
                child("make");
            }
            child("update");
            child("scan");
            child("query");
        }
    }
}
