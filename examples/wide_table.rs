//! Three streams fill one wide row per user: orders, profile and risk score.
//! Each stream writes only its own columns, concurrently and out of order,
//! ordered by its own event-time field (a sequence group). The merged row
//! holds, per group, the newest values, however the events arrived.
//!
//! `cargo run --release --example wide_table [TABLE_DIR]`

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tributary::{CreateOptions, ReadOptions, Table, TableSettings, TimeSettings};
use tributary_compaction::CompactorSettings;
use tributary_timeline::{SequenceGroup, TimeMode};
use tributary_writer::WriteSettings;

const SCHEMA: &str = r#"{"type":"record","name":"users","fields":[
  {"name":"user_id","type":"string"},
  {"name":"ts","type":["null","long"],"default":null},
  {"name":"orders","type":["null","long"],"default":null},
  {"name":"last_order","type":["null","string"],"default":null},
  {"name":"orders_ts","type":["null","long"],"default":null},
  {"name":"name","type":["null","string"],"default":null},
  {"name":"country","type":["null","string"],"default":null},
  {"name":"profile_ts","type":["null","long"],"default":null},
  {"name":"risk","type":["null","double"],"default":null},
  {"name":"risk_ts","type":["null","long"],"default":null}]}"#;

const USERS: u32 = 1_000;
const COMMITS: usize = 5;
const PER_COMMIT: usize = 2_000;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join(format!("tributary-wide-{}", std::process::id())));
    let mut options = CreateOptions::new(SCHEMA, "user_id", "ts");
    options.buckets = 4;
    options.sequence_groups = ["orders_ts=orders,last_order", "profile_ts=name,country", "risk_ts=risk"]
        .iter()
        .filter_map(|g| SequenceGroup::parse(g))
        .collect();
    let time = TimeSettings { mode: Some(TimeMode::HybridLogical), max_clock_skew: Duration::from_millis(200) };
    let table =
        Table::builder_local(&dir).with_settings(TableSettings { time, ..Default::default() }).create(options).await?;
    println!("wide table {} with three sequence groups", dir.display());

    let streams: [(&str, &[&str]); 3] = [
        ("orders", &["orders", "last_order", "orders_ts"]),
        ("profile", &["name", "country", "profile_ts"]),
        ("risk", &["risk", "risk_ts"]),
    ];
    let mut tasks = Vec::new();
    for (i, (name, columns)) in streams.iter().enumerate() {
        let settings = WriteSettings {
            writer_id: (*name).into(),
            columns: Some(columns.iter().map(|c| c.to_string()).collect()),
            ..Default::default()
        };
        let client = table.write_client(settings).await?;
        let name = *name;
        tasks.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(i as u64);
            for _ in 0..COMMITS {
                let records: Vec<_> = (0..PER_COMMIT)
                    .map(|_| {
                        let user = format!("user-{:04}", rng.random_range(0..USERS));
                        // Event times arrive out of order.
                        let t = rng.random_range(1_700_000_000_000i64..1_700_000_600_000);
                        match name {
                            "orders" => json!({"user_id": user, "orders": rng.random_range(1..50), "last_order": format!("o-{t}"), "orders_ts": t}),
                            "profile" => {
                                let country = ["FR", "IT", "NO"][rng.random_range(0..3)];
                                json!({"user_id": user, "name": format!("name-{}", rng.random_range(0..100)), "country": country, "profile_ts": t})
                            }
                            _ => json!({"user_id": user, "risk": f64::from(rng.random_range(0..1000)) / 1000.0, "risk_ts": t}),
                        }
                    })
                    .collect();
                let mut commit = client.start_commit().await?;
                commit.write_json(&records, name, 1).await?;
                commit.commit().await?;
            }
            println!("stream {name}: {} partial records in {COMMITS} commits", COMMITS * PER_COMMIT);
            Ok::<_, tributary_writer::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let rows = table.read(&ReadOptions::default()).await?;
    println!("\nmerged rows ({} users), a sample:", rows.num_rows());
    println!("{}", arrow::util::pretty::pretty_format_batches(&[rows.slice(0, rows.num_rows().min(6))])?);

    let compactor = table.compactor(CompactorSettings::default()).await?;
    for s in compactor.run_once().await? {
        println!("compacted {} file groups, {} merged rows written to Parquet", s.groups, s.records);
    }
    let after = table.read(&ReadOptions::default()).await?;
    println!("after compaction the snapshot is unchanged: {}", after == rows);
    Ok(())
}
