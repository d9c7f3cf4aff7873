//! Instants per second for one table on local disk, with 1, 4 and 16
//! concurrent generators, in both TrueTime modes. Each generator has its own
//! OS file lock handle, as separate processes would.
//!
//! Run with `cargo bench --bench instants`. Prints one line per case.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tributary_timeline::{FileLock, SystemClock, TimeGenerator, TimeMode};

async fn rate(mode: TimeMode, generators: usize, run_for: Duration) -> f64 {
    let dir = tempfile::tempdir().expect("temp dir");
    let count = Arc::new(AtomicU64::new(0));
    let deadline = tokio::time::Instant::now() + run_for;
    let mut tasks = Vec::new();
    for _ in 0..generators {
        let generator = TimeGenerator::new(
            mode,
            Duration::from_millis(200),
            Arc::new(SystemClock),
            Arc::new(FileLock::at(tributary_timeline::local_instant_lock_file(dir.path()))),
        );
        let count = count.clone();
        tasks.push(tokio::spawn(async move {
            while tokio::time::Instant::now() < deadline {
                generator.new_instant().await.expect("instant");
                count.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let started = tokio::time::Instant::now();
    for t in tasks {
        t.await.expect("task");
    }
    count.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    println!("{:<16} {:>10} {:>14}", "mode", "generators", "instants/s");
    for (mode, name, secs) in
        [(TimeMode::WaitForSkew, "wait-for-skew", 4), (TimeMode::HybridLogical, "hybrid-logical", 3)]
    {
        for generators in [1, 4, 16] {
            let r = rt.block_on(rate(mode, generators, Duration::from_secs(secs)));
            println!("{name:<16} {generators:>10} {r:>14.1}");
        }
    }
}
