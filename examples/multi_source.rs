//! Three sources stream out-of-order updates into one local Hudi table at
//! the same time, each as its own group of tokio tasks with its own write
//! client. No commit ever waits for another source or fails; the merged
//! table keeps, per key, the version with the latest event time.
//!
//! `cargo run --release --example multi_source [TABLE_DIR]`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tributary::arrow;
use tributary::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use tributary::arrow::datatypes::{DataType, Field, Schema};
use tributary::{CreateOptions, ReadOptions, Table, TableSettings, TimeMode, TimeSettings, WriteSettings};

const SCHEMA: &str = r#"{"type":"record","name":"trips_record","namespace":"hoodie.trips","fields":[
  {"name":"uuid","type":"string"},{"name":"ts","type":"long"},
  {"name":"source","type":"string"},{"name":"fare","type":"double"},{"name":"city","type":"string"}]}"#;

const SOURCES: [&str; 3] = ["app", "web", "partner"];
const CITIES: [&str; 3] = ["paris", "rome", "oslo"];
const KEYS: u64 = 20_000;
const COMMITS: usize = 10;
const PER_COMMIT: usize = 20_000;

fn batch(rng: &mut StdRng, source: &str, n: usize) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("uuid", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("source", DataType::Utf8, false),
        Field::new("fare", DataType::Float64, false),
        Field::new("city", DataType::Utf8, false),
    ]));
    let keys: Vec<u64> = (0..n).map(|_| rng.random_range(0..KEYS)).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(keys.iter().map(|k| format!("trip-{k:06}")))),
        // Event times arrive out of order: anywhere in the last hour.
        Arc::new(Int64Array::from_iter_values((0..n).map(|_| 1_700_000_000_000 + rng.random_range(0..3_600_000)))),
        Arc::new(StringArray::from_iter_values(std::iter::repeat_n(source, n))),
        Arc::new(Float64Array::from_iter_values((0..n).map(|_| f64::from(rng.random_range(500..9_000)) / 100.0))),
        Arc::new(StringArray::from_iter_values(keys.iter().map(|k| CITIES[(*k % 3) as usize]))),
    ];
    RecordBatch::try_new(schema, columns).expect("batch")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("tributary-multi-source-{}", std::process::id())));
    let mut options = CreateOptions::new(SCHEMA, "uuid", "ts");
    options.partition_field = Some("city".into());
    options.buckets = 8;
    let time = TimeSettings { mode: Some(TimeMode::HybridLogical), ..Default::default() };
    let settings = TableSettings { time, ..Default::default() };
    let table = Table::builder_local(&dir).with_settings(settings).create(options).await?;
    println!("table {} (Hudi v8 MERGE_ON_READ, 8 buckets per city)", dir.display());

    let written = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut sources = Vec::new();
    for (i, name) in SOURCES.iter().enumerate() {
        let settings = WriteSettings { tasks: 2, writer_id: (*name).into(), ..Default::default() };
        let client = table.write_client(settings).await?;
        let written = written.clone();
        sources.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(i as u64);
            let mut latencies = Vec::new();
            for c in 0..COMMITS {
                let mut commit = client.start_commit().await?;
                commit.write_batch(&batch(&mut rng, name, PER_COMMIT)).await?;
                let t = Instant::now();
                let summary =
                    commit.commit_with_checkpoint(Some(format!("{name}-offset-{}", (c + 1) * PER_COMMIT))).await?;
                latencies.push(t.elapsed());
                written.fetch_add(summary.rows, Ordering::Relaxed);
            }
            Ok::<_, tributary::Error>(latencies)
        }));
    }
    let progress = {
        let written = written.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                println!("  ... {} records committed", written.load(Ordering::Relaxed));
            }
        })
    };
    for s in sources {
        let lat = s.await??;
        let max = lat.iter().max().copied().unwrap_or_default();
        println!("source finished: {} commits, slowest commit step {:.1} ms", lat.len(), max.as_secs_f64() * 1e3);
    }
    progress.abort();
    let secs = started.elapsed().as_secs_f64();
    let total = written.load(Ordering::Relaxed);
    println!(
        "{total} records in {} commits from 3 sources in {secs:.2} s ({:.0} records/s)",
        3 * COMMITS,
        total as f64 / secs
    );

    let timeline = table.timeline().await?;
    println!("\ntimeline (last 6 of {} instants):", timeline.len());
    let last: Vec<_> = timeline.instants().rev().take(6).collect();
    for i in last.into_iter().rev() {
        println!(
            "  {}  {}  {}  completed {}",
            i.requested,
            i.action,
            i.state,
            i.completed.as_ref().map_or("-".into(), |c| c.to_string())
        );
    }
    let client = table.write_client(WriteSettings::default()).await?;
    for name in SOURCES {
        println!("checkpoint of {name}: {:?}", client.last_checkpoint(name).await?);
    }

    let rows = table.read(&ReadOptions::default()).await?;
    println!("\nsnapshot: {} distinct trips; a sample:", rows.num_rows());
    let sample = rows.slice(0, rows.num_rows().min(8));
    println!("{}", arrow::util::pretty::pretty_format_batches(&[sample])?);
    println!("read it with: cargo run -- read {} --format table", dir.display());
    Ok(())
}
