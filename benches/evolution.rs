//! Reads and compaction of a table whose logs span three schema versions
//! (v1 `a: int`; v2 promotes `a` to long and adds `b`; v3 adds `c`),
//! beside the same records written under one schema.
//!
//! `cargo bench --bench evolution` (`TRIBUTARY_BENCH_ROWS` sets the
//! records, default 1,500,000, over a fifth as many keys, in three commits
//! of a third each). Prints one line per case.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tributary::{CreateOptions, ReadOptions, Table, WriteClient, WriteSettings};
use tributary_compaction::CompactorSettings;

#[path = "support/process.rs"]
mod process;

const V1: &str = r#"{"type":"record","name":"r","fields":[{"name":"id","type":"string"},{"name":"ts","type":"long"},
 {"name":"a","type":["null","int"],"default":null},{"name":"t","type":["null","string"],"default":null},
 {"name":"x","type":["null","double"],"default":null}]}"#;

const BATCH: usize = 65_536;

/// The schema of version `v`.
fn version(v: usize) -> String {
    let mut json = V1.to_string();
    if v >= 2 {
        json = tributary_format::with_column_type(&json, "a", "long").expect("promote");
        json = tributary_format::with_added_column(&json, "b", &serde_json::json!("string"), None).expect("add b");
    }
    if v >= 3 {
        json = tributary_format::with_added_column(&json, "c", &serde_json::json!("double"), None).expect("add c");
    }
    json
}

/// `rows` records of version `v`'s columns over `keys` keys; the keys and
/// event times depend on `seed` alone, so both cases write the same ones.
fn batches(v: usize, rows: usize, keys: usize, seed: u64) -> Vec<RecordBatch> {
    let (mut keys_rng, mut rng) = (SmallRng::seed_from_u64(seed), SmallRng::seed_from_u64(seed ^ 0x5eed));
    let mut out = Vec::new();
    let mut left = rows;
    while left > 0 {
        let n = left.min(BATCH);
        left -= n;
        let mut fields = vec![Field::new("id", DataType::Utf8, false), Field::new("ts", DataType::Int64, false)];
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|_| format!("key-{:09}", keys_rng.random_range(0..keys))),
            )),
            Arc::new(Int64Array::from_iter_values((0..n).map(|_| keys_rng.random_range(0..1_000_000_000i64)))),
        ];
        if v == 1 {
            fields.push(Field::new("a", DataType::Int32, true));
            cols.push(Arc::new(Int32Array::from_iter_values((0..n).map(|_| rng.random_range(0..1_000_000)))));
        } else {
            fields.push(Field::new("a", DataType::Int64, true));
            cols.push(Arc::new(Int64Array::from_iter_values((0..n).map(|_| rng.random_range(0..1_000_000)))));
        }
        fields.push(Field::new("t", DataType::Utf8, true));
        cols.push(Arc::new(StringArray::from_iter_values((0..n).map(|_| format!("text-{:012}", rng.random::<u32>())))));
        fields.push(Field::new("x", DataType::Float64, true));
        cols.push(Arc::new(Float64Array::from_iter_values((0..n).map(|_| rng.random()))));
        if v >= 2 {
            fields.push(Field::new("b", DataType::Utf8, true));
            cols.push(Arc::new(StringArray::from_iter_values((0..n).map(|_| format!("b-{}", rng.random::<u16>())))));
        }
        if v >= 3 {
            fields.push(Field::new("c", DataType::Float64, true));
            cols.push(Arc::new(Float64Array::from_iter_values((0..n).map(|_| rng.random()))));
        }
        out.push(RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).expect("batch"));
    }
    out
}

async fn commit(client: &WriteClient, batches: &[RecordBatch]) {
    let mut c = client.start_commit().await.expect("start");
    for b in batches {
        c.write_batch(b).await.expect("write");
    }
    c.commit().await.expect("commit");
}

/// Writes three commits, under schema versions 1, 2 and 3 (`evolving`) or
/// all under version 3, then reads the snapshot and compacts.
async fn run(name: &str, evolving: bool, rows: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let first = if evolving { version(1) } else { version(3) };
    let mut o = CreateOptions::new(first, "id", "ts");
    o.buckets = 16;
    let table = Table::create_local(&dir.path().join("t"), o).await.expect("table");
    let mut client = table.write_client(WriteSettings::default()).await.expect("client");
    for v in 1..=3 {
        if evolving && v > 1 {
            client = client.evolved(client.schema().with_json(&version(v)).expect("schema")).expect("evolve");
        }
        let data = batches(if evolving { v } else { 3 }, rows / 3, rows / 5, v as u64);
        commit(&client, &data).await;
    }
    let ticks = process::clock_ticks_per_second();
    let cpu = || process::cpu_time(ticks).expect("cpu time").as_secs_f64();
    let mut reads = Vec::new();
    for _ in 0..3 {
        let (c0, t0) = (cpu(), Instant::now());
        let read = table.read(&ReadOptions::default()).await.expect("read");
        reads.push((read.num_rows(), t0.elapsed().as_secs_f64(), cpu() - c0));
    }
    reads.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (n, read_s, read_cpu) = reads[1];
    let (c1, t1) = (cpu(), Instant::now());
    let done =
        table.compactor(CompactorSettings::default()).await.expect("compactor").run_once().await.expect("compact");
    let (compact_s, compact_cpu) = (t1.elapsed().as_secs_f64(), cpu() - c1);
    let records: u64 = done.iter().map(|s| s.records).sum();
    println!(
        "{name:<26} read {n:>8} rows {:>9.0} rows/s {:>9.0} rows/CPU-s | compact {rows} log records {:>9.0} rec/s {:>9.0} rec/CPU-s, {records} rows out",
        n as f64 / read_s,
        n as f64 / read_cpu.max(1e-9),
        rows as f64 / compact_s,
        rows as f64 / compact_cpu.max(1e-9),
    );
}

fn main() {
    let rows: usize = std::env::var("TRIBUTARY_BENCH_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_500_000);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(run("one schema version", false, rows));
    rt.block_on(run("three schema versions", true, rows));
}
