//! TrueTime instants stay unique and ordered across tasks and processes,
//! with skewed clocks, in both generator modes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use tributary_timeline::{
    Clock, FileLock, InProcessLock, InstantTime, LeaseLock, LeaseSettings, LockProvider, ManualClock, OffsetClock,
    SystemClock, TimeGenerator, TimeMode,
};

const CHILD_ENV: &str = "TRIBUTARY_INSTANT_CHILD";

/// Real (unskewed) time in nanoseconds, shared by all processes on the host.
#[allow(clippy::disallowed_methods)]
fn real_nanos() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
}

/// One generation: real start, real end, instant issued.
#[derive(Debug, Clone)]
struct Gen {
    start: u128,
    end: u128,
    instant: InstantTime,
}

/// Checks uniqueness and that a generation finished before another started
/// always has the smaller instant.
fn check_order(mut gens: Vec<Gen>) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for g in &gens {
        if !seen.insert(g.instant.clone()) {
            return Err(format!("duplicate instant {}", g.instant));
        }
    }
    // Sweep by start time, keeping the largest instant among generations that
    // ended before the current one started.
    let mut by_end = gens.clone();
    by_end.sort_by_key(|g| g.end);
    gens.sort_by_key(|g| g.start);
    let mut max_done: Option<InstantTime> = None;
    let mut j = 0;
    for g in &gens {
        while j < by_end.len() && by_end[j].end < g.start {
            if max_done.as_ref().is_none_or(|m| &by_end[j].instant > m) {
                max_done = Some(by_end[j].instant.clone());
            }
            j += 1;
        }
        if let Some(m) = &max_done
            && &g.instant <= m
        {
            return Err(format!("instant {} started after {m} finished but is not larger", g.instant));
        }
    }
    Ok(())
}

/// The child side: run only when `across_processes` re-executes the test
/// binary with `--ignored --exact` and `CHILD_ENV` set.
#[test]
#[ignore = "a child process of the instants::*_across_processes tests"]
fn instant_child_process() {
    let spec = std::env::var(CHILD_ENV).expect("run only by the parent test, which sets TRIBUTARY_INSTANT_CHILD");
    let parts: Vec<&str> = spec.split('|').collect();
    let [table, mode, offset, skew, tasks, per_task, start_at, out] = parts.as_slice() else {
        panic!("bad child spec {spec}");
    };
    let mode = TimeMode::parse(mode).unwrap();
    let offset: i64 = offset.parse().unwrap();
    let skew = Duration::from_millis(skew.parse().unwrap());
    let (tasks, per_task): (usize, usize) = (tasks.parse().unwrap(), per_task.parse().unwrap());
    let start_at: u128 = start_at.parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let gens = rt.block_on(async move {
        let clock: Arc<dyn Clock> = Arc::new(OffsetClock::new(Arc::new(SystemClock), offset));
        let lock: Arc<dyn LockProvider> =
            Arc::new(FileLock::at(tributary_timeline::local_instant_lock_file(std::path::Path::new(table))));
        let generator = Arc::new(TimeGenerator::new(mode, skew, clock, lock));
        while real_nanos() < start_at {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let mut handles = Vec::new();
        for _ in 0..tasks {
            let generator = generator.clone();
            handles.push(tokio::spawn(async move {
                let mut v = Vec::new();
                for _ in 0..per_task {
                    let start = real_nanos();
                    let instant = generator.new_instant().await.unwrap();
                    v.push(format!("{start} {} {instant}", real_nanos()));
                }
                v
            }));
        }
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.await.unwrap());
        }
        all
    });
    std::fs::write(out, gens.join("\n")).unwrap();
}

fn across_processes(mode: &str, skew_ms: i64) {
    const PROCESSES: usize = 3;
    const TASKS: usize = 8;
    const PER_TASK: usize = 25; // 3 × 8 × 25 = 600 instants
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("table");
    // Clocks at the edges of the allowed skew, and one in between.
    let offsets = [-skew_ms, skew_ms, skew_ms / 3];
    let start_at = real_nanos() + 1_500_000_000;
    let children: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let out = dir.path().join(format!("out-{p}"));
            let spec = format!(
                "{}|{mode}|{}|{skew_ms}|{TASKS}|{PER_TASK}|{start_at}|{}",
                table.display(),
                offsets[p],
                out.display()
            );
            let child = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--ignored", "--exact", "instants::instant_child_process", "--nocapture", "--test-threads=1"])
                .env(CHILD_ENV, spec)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            (child, out)
        })
        .collect();
    let mut gens = Vec::new();
    for (mut child, out) in children {
        assert!(child.wait().unwrap().success(), "child process failed");
        for line in std::fs::read_to_string(out).unwrap().lines() {
            let f: Vec<&str> = line.split(' ').collect();
            gens.push(Gen {
                start: f[0].parse().unwrap(),
                end: f[1].parse().unwrap(),
                instant: InstantTime::parse(f[2]).unwrap(),
            });
        }
    }
    assert_eq!(gens.len(), PROCESSES * TASKS * PER_TASK);
    check_order(gens).unwrap();
}

#[test]
fn wait_for_skew_instants_are_ordered_across_processes() {
    // A small skew keeps 600 serialised waits short; the rule is scale-free.
    across_processes("wait-for-skew", 25);
}

#[test]
fn hybrid_logical_instants_are_ordered_across_processes() {
    across_processes("hybrid-logical", 200);
}

#[test]
fn the_checker_catches_disorder() {
    let t = |s: &str| InstantTime::parse(s).unwrap();
    let ok = vec![
        Gen { start: 0, end: 10, instant: t("20250101000000002") },
        Gen { start: 5, end: 15, instant: t("20250101000000001") }, // overlaps: any order
        Gen { start: 20, end: 30, instant: t("20250101000000003") },
    ];
    check_order(ok.clone()).unwrap();
    let mut bad = ok.clone();
    bad[2].instant = t("20250101000000002");
    assert!(check_order(bad).unwrap_err().contains("duplicate"));
    let mut bad = ok;
    bad[2].instant = t("20250101000000001");
    assert!(check_order(bad).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random skews, clock jumps and interleavings of simulated processes
    /// sharing one lock (in-process or lease), on paused virtual time.
    #[test]
    fn instants_stay_ordered_under_random_skews(
        hybrid in any::<bool>(),
        lease in any::<bool>(),
        offsets in prop::collection::vec(-200i64..=200, 2..5),
        schedule in prop::collection::vec((0usize..4, 0u64..400, -30i64..60), 8..48),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        let result = rt.block_on(async move {
            let base = Arc::new(ManualClock::new(1_766_264_468_078));
            let lock: Arc<dyn LockProvider> = if lease {
                Arc::new(LeaseLock::at(
                    Arc::new(object_store::memory::InMemory::new()),
                    tributary_timeline::lease_lock_file(&object_store::path::Path::from("t")),
                    "shared",
                    base.clone(),
                    LeaseSettings::default(),
                ))
            } else {
                Arc::new(InProcessLock::new())
            };
            let mode = if hybrid { TimeMode::HybridLogical } else { TimeMode::WaitForSkew };
            let generators: Vec<Arc<TimeGenerator>> = offsets
                .iter()
                .map(|&o| {
                    Arc::new(TimeGenerator::new(
                        mode,
                        Duration::from_millis(200),
                        Arc::new(OffsetClock::new(base.clone(), o)),
                        lock.clone(),
                    ))
                })
                .collect();
            let seq = Arc::new(AtomicU64::new(0));
            let mut handles = Vec::new();
            for (p, delay, jump) in schedule {
                let generator = generators[p % generators.len()].clone();
                let (seq, base) = (seq.clone(), base.clone());
                handles.push(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    base.advance(jump);
                    let start = u128::from(seq.fetch_add(1, Ordering::SeqCst));
                    let instant = generator.new_instant().await.unwrap();
                    let end = u128::from(seq.fetch_add(1, Ordering::SeqCst));
                    Gen { start, end, instant }
                }));
            }
            let mut gens = Vec::new();
            for h in handles {
                gens.push(h.await.unwrap());
            }
            check_order(gens)
        });
        prop_assert!(result.is_ok(), "{:?}", result);
    }
}
