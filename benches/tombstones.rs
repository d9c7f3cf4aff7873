//! What deletes cost a compaction: compaction time and output size with 0%
//! and 5% deletes, and the bytes each retained tombstone takes.
//!
//! `cargo bench --bench tombstones` (`TRIBUTARY_BENCH_ROWS` sets the log
//! records, default 1,000,000, over a fifth as many keys). Per case: 10
//! commits of out-of-order updates, of which the given share are deletes,
//! then one compaction. Prints one line per case.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tributary::{CreateOptions, Table, TableSettings, TimeSettings};
use tributary_compaction::CompactorSettings;
use tributary_timeline::TimeMode;
use tributary_writer::WriteSettings;

const SCHEMA: &str = r#"{"type":"record","name":"trips","fields":[
 {"name":"uuid","type":"string"},{"name":"ts","type":"long"},{"name":"rider","type":"string"},
 {"name":"fare","type":"double"},{"name":"city","type":"string"}]}"#;

const COMMITS: usize = 10;

fn batch(rows: usize, keys: usize, deletes: f64, rng: &mut SmallRng) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("uuid", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("rider", DataType::Utf8, false),
        Field::new("fare", DataType::Float64, false),
        Field::new("city", DataType::Utf8, false),
        Field::new("_hoodie_is_deleted", DataType::Boolean, false),
    ]));
    let key: Vec<String> = (0..rows).map(|_| format!("key-{:012}", rng.random_range(0..keys))).collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(&key)),
            Arc::new(Int64Array::from_iter_values((0..rows).map(|_| rng.random_range(0..1_000_000_000i64)))),
            Arc::new(StringArray::from_iter_values((0..rows).map(|i| format!("rider-{}", i % 997)))),
            Arc::new(Float64Array::from_iter_values((0..rows).map(|_| rng.random_range(1.0..100.0)))),
            Arc::new(StringArray::from_iter_values((0..rows).map(|_| "oslo"))),
            Arc::new(BooleanArray::from_iter((0..rows).map(|_| Some(rng.random_bool(deletes))))),
        ],
    )
    .expect("bench setup")
}

fn dir_bytes(dir: &std::path::Path, pick: &dyn Fn(&str) -> bool) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).expect("bench setup").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = entry.metadata().expect("bench setup");
        if meta.is_dir() {
            if name != ".hoodie" {
                total += dir_bytes(&entry.path(), pick);
            }
        } else if pick(&name) {
            total += meta.len();
        }
    }
    total
}

async fn case(rows: usize, deletes: f64) {
    let dir = tempfile::tempdir().expect("bench setup");
    let mut o = CreateOptions::new(SCHEMA, "uuid", "ts");
    o.partition_field = Some("city".into());
    o.buckets = 4;
    let settings = TableSettings {
        time: TimeSettings { mode: Some(TimeMode::HybridLogical), ..Default::default() },
        ..Default::default()
    };
    let t = Table::builder_local(dir.path().join("t")).with_settings(settings).create(o).await.expect("bench setup");
    let keys = rows / 5;
    let mut rng = SmallRng::seed_from_u64(7);
    let client = t.write_client(WriteSettings::default()).await.expect("bench setup");
    for _ in 0..COMMITS {
        let b = batch(rows / COMMITS, keys, deletes, &mut rng);
        let mut c = client.start_commit().await.expect("bench setup");
        c.write_batch(&b).await.expect("bench setup");
        c.commit().await.expect("bench setup");
    }
    let started = Instant::now();
    let done =
        t.compactor(CompactorSettings::default()).await.expect("bench setup").run_once().await.expect("bench setup");
    let secs = started.elapsed().as_secs_f64();
    let records: u64 = done.iter().map(|s| s.records).sum();
    let tombstones: u64 = done.iter().map(|s| s.tombstones).sum();
    let tombstone_bytes: u64 = done.iter().map(|s| s.tombstone_bytes).sum();
    let base = dir_bytes(&dir.path().join("t"), &|n| n.ends_with(".parquet"));
    let per = if tombstones > 0 { tombstone_bytes as f64 / tombstones as f64 } else { 0.0 };
    println!(
        "deletes {:>4.1}%: {rows} log records -> {records} rows + {tombstones} tombstones; compaction {secs:.2} s \
         ({:.0} k records/s); base files {:.1} MiB; tombstone logs {:.1} KiB ({per:.1} bytes per tombstone)",
        deletes * 100.0,
        rows as f64 / secs / 1e3,
        base as f64 / (1 << 20) as f64,
        tombstone_bytes as f64 / 1024.0,
    );
}

fn main() {
    let rows: usize = std::env::var("TRIBUTARY_BENCH_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("bench setup");
    for deletes in [0.0, 0.05] {
        rt.block_on(case(rows, deletes));
    }
}
