//! Creates a Hudi v8 Merge-on-Read table on local disk and shows TrueTime
//! instants from several concurrent writer tasks whose clocks disagree.
//!
//! `cargo run --example quickstart [TABLE_DIR]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use tributary::{Clock, CreateOptions, OffsetClock, SystemClock, Table, TableSettings, TimeMode, TimeSettings};

const SCHEMA: &str = r#"{"type":"record","name":"trips_record","namespace":"hoodie.trips","fields":[
  {"name":"uuid","type":"string"},{"name":"ts","type":"long"},
  {"name":"rider","type":["null","string"],"default":null},{"name":"city","type":"string"}]}"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("tributary-quickstart-{}", std::process::id())));
    let mut options = CreateOptions::new(SCHEMA, "uuid", "ts");
    options.partition_field = Some("city".into());
    options.buckets = 4;
    let table = Table::create_local(&dir, options).await?;
    println!("created {} (table version {}, {} buckets)", dir.display(), table.config().version, 4);

    for (mode, name) in [(TimeMode::HybridLogical, "hybrid-logical"), (TimeMode::WaitForSkew, "wait-for-skew")] {
        // Three "writers", each opening the table with a clock skewed by up
        // to ±150 ms (an injected clock), four tasks each. They share the
        // table's default lock: an OS file lock on the table folder.
        let started = Instant::now();
        let mut tasks = Vec::new();
        let time = TimeSettings { mode: Some(mode), max_clock_skew: Duration::from_millis(150) };
        for (writer, offset) in [(0, -150), (1, 0), (2, 150)] {
            let clock: Arc<dyn Clock> = Arc::new(OffsetClock::new(Arc::new(SystemClock), offset));
            let settings = TableSettings { time: time.clone(), ..Default::default() };
            let writer_table = Table::builder_local(&dir).with_settings(settings).with_clock(clock).open().await?;
            let generator = Arc::new(writer_table.time_generator());
            for task in 0..4 {
                let generator = generator.clone();
                tasks.push(tokio::spawn(async move {
                    let t = generator.new_instant().await?;
                    Ok::<_, tributary::Error>((t, writer, task))
                }));
            }
        }
        let mut issued = Vec::new();
        for t in tasks {
            issued.push(t.await??);
        }
        issued.sort();
        println!("\n{name}: {} instants in {:.0} ms", issued.len(), started.elapsed().as_secs_f64() * 1e3);
        for (t, writer, task) in issued {
            println!("  {t}  writer {writer} task {task}");
        }
    }
    let timeline = table.timeline().await?;
    println!("\ntimeline has {} instants (no commits yet)", timeline.len());
    println!("inspect it with: cargo run -- timeline {}", dir.display());
    Ok(())
}
