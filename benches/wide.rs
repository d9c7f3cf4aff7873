//! Partial-column ingest and compaction beside full-row figures, on one
//! wide schema: two sources each write half the columns (a sequence group
//! each) of the same keys, against one source writing whole rows.
//!
//! `cargo bench --bench wide` (`TRIBUTARY_BENCH_ROWS` sets records per source,
//! default 2,000,000). Prints one line per case.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tributary::{CreateOptions, Table, TableSettings, TimeSettings};
use tributary_compaction::CompactorSettings;
use tributary_timeline::{SequenceGroup, TimeMode};
use tributary_writer::WriteSettings;

const SCHEMA: &str = r#"{"type":"record","name":"wide","fields":[
 {"name":"id","type":"string"},{"name":"ts","type":["null","long"],"default":null},
 {"name":"a1","type":["null","string"],"default":null},{"name":"a2","type":["null","double"],"default":null},
 {"name":"a3","type":["null","long"],"default":null},{"name":"ts_a","type":["null","long"],"default":null},
 {"name":"b1","type":["null","string"],"default":null},{"name":"b2","type":["null","double"],"default":null},
 {"name":"b3","type":["null","long"],"default":null},{"name":"ts_b","type":["null","long"],"default":null}]}"#;

const BATCH: usize = 65_536;
const COMMIT: usize = 1_000_000;

/// CPU seconds (user + system) of this process, from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn batches(columns: &[&str], rows: usize, keys: usize, seed: u64) -> Vec<RecordBatch> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out = Vec::new();
    let mut left = rows;
    while left > 0 {
        let n = left.min(BATCH);
        left -= n;
        let mut fields = vec![Field::new("id", DataType::Utf8, false)];
        let mut cols: Vec<ArrayRef> = vec![Arc::new(StringArray::from_iter_values(
            (0..n).map(|_| format!("key-{:09}", rng.random_range(0..keys))),
        ))];
        for c in columns {
            let (dt, col): (DataType, ArrayRef) = match c.chars().last() {
                Some('1') => (
                    DataType::Utf8,
                    Arc::new(StringArray::from_iter_values(
                        (0..n).map(|_| format!("text-{:016}", rng.random::<u64>())),
                    )),
                ),
                Some('2') => {
                    (DataType::Float64, Arc::new(Float64Array::from_iter_values((0..n).map(|_| rng.random()))))
                }
                _ => (
                    DataType::Int64,
                    Arc::new(Int64Array::from_iter_values((0..n).map(|_| rng.random_range(0..i64::MAX)))),
                ),
            };
            fields.push(Field::new(*c, dt, true));
            cols.push(col);
        }
        out.push(RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).expect("batch"));
    }
    out
}

async fn run(name: &str, groups: bool, sources: &[&[&str]], rows: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut o = CreateOptions::new(SCHEMA, "id", "ts");
    o.buckets = 16;
    if groups {
        o.sequence_groups = ["ts_a=a1,a2,a3", "ts_b=b1,b2,b3"].iter().filter_map(|g| SequenceGroup::parse(g)).collect();
    }
    let time = TimeSettings { mode: Some(TimeMode::HybridLogical), max_clock_skew: Duration::from_millis(200) };
    let settings = TableSettings { time, ..Default::default() };
    let table = Table::builder_local(dir.path().join("t")).with_settings(settings).create(o).await.expect("table");
    let data: Vec<Vec<RecordBatch>> =
        sources.iter().enumerate().map(|(i, cols)| batches(cols, rows, rows / 2, i as u64)).collect();
    let (cpu0, t0) = (cpu_seconds(), Instant::now());
    let mut written = 0u64;
    let mut bytes = 0u64;
    for (cols, source) in sources.iter().zip(&data) {
        let columns = groups.then(|| cols.iter().map(|c| c.to_string()).collect());
        let client =
            table.write_client(WriteSettings { tasks: 2, columns, ..Default::default() }).await.expect("client");
        for chunk in source.chunks(COMMIT / BATCH) {
            let mut c = client.start_commit().await.expect("commit");
            for b in chunk {
                c.write_batch(b).await.expect("write");
            }
            let s = c.commit().await.expect("commit");
            written += s.records();
            bytes += s.bytes();
        }
    }
    let (ingest_s, ingest_cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds() - cpu0);
    let (cpu1, t1) = (cpu_seconds(), Instant::now());
    let compactor = table.compactor(CompactorSettings::default()).await.expect("compactor");
    let done = compactor.run_once().await.expect("compaction");
    let (compact_s, compact_cpu) = (t1.elapsed().as_secs_f64(), cpu_seconds() - cpu1);
    let merged: u64 = done.iter().map(|s| s.records).sum();
    println!(
        "{name:<22} ingest {written:>9} records {:>8.0} rec/s {:>8.0} rec/CPU-s {:>6.1} MB/s | compact {:>8.0} rec/s in, {:>8.0} rec/CPU-s, {merged} rows out",
        written as f64 / ingest_s,
        written as f64 / ingest_cpu.max(1e-9),
        bytes as f64 / 1e6 / ingest_s,
        written as f64 / compact_s,
        written as f64 / compact_cpu.max(1e-9),
    );
}

fn main() {
    let rows: usize = std::env::var("TRIBUTARY_BENCH_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000_000);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let a: &[&str] = &["a1", "a2", "a3", "ts_a"];
    let b: &[&str] = &["b1", "b2", "b3", "ts_b"];
    let all: &[&str] = &["ts", "a1", "a2", "a3", "ts_a", "b1", "b2", "b3", "ts_b"];
    rt.block_on(run("full rows, 1 source", false, &[all], rows));
    rt.block_on(run("partial, 2 sources", true, &[a, b], rows));
}
