//! A standalone compaction job for a table that others write: recover failed
//! writes, plan at a TrueTime instant, compact, repeat every few seconds.
//!
//! `cargo run --release --example compaction_job -- TABLE_DIR [ROUNDS]`

use std::time::Duration;

use tributary::{Table, TableSettings, TimeSettings};
use tributary_compaction::CompactorSettings;
use tributary_compaction::PlanSettings;
use tributary_timeline::TimeMode;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next() else {
        eprintln!("usage: compaction_job TABLE_DIR [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = args.next().map(|r| r.parse()).transpose()?.unwrap_or(3);
    // Writers of this table take instants in hybrid-logical mode too; the
    // compactor shares their table lock, which is what keeps its instant
    // ordered with their completion times.
    let time = TimeSettings { mode: Some(TimeMode::HybridLogical), ..Default::default() };
    let table = Table::builder_local(&dir).with_settings(TableSettings { time, ..Default::default() }).open().await?;
    let settings = CompactorSettings {
        plan: PlanSettings { min_log_files: 2, max_groups: 64, ..Default::default() },
        memory_budget: 256 << 20,
        ..Default::default()
    };
    for round in 1..=rounds {
        let compactor = table.compactor(settings.clone()).await?;
        let done = compactor.run_once().await?;
        if done.is_empty() {
            println!("round {round}: nothing to compact");
        }
        for s in done {
            println!(
                "round {round}: compaction {} -> {} groups, {} records, {:.1} MB read, {:.1} MB written",
                s.instant,
                s.groups,
                s.records,
                s.bytes_read as f64 / 1e6,
                s.bytes_written as f64 / 1e6
            );
        }
        if round < rounds {
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    }
    Ok(())
}
