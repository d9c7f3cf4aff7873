//! `tributary-sim`: runs seeded histories of Tributary tables with crashes,
//! clock skew and store faults, checking each against its model.
//!
//! ```text
//! tributary-sim --histories 100000            # seeds 0..100000 on every core
//! tributary-sim --first-seed 5000 --histories 10
//! tributary-sim --replay 4242                 # one history, its figures
//! tributary-sim --histories 36000 --at-least 12000 --until-exists done
//! ```
//!
//! With `--until-exists`, the run starts no new history once that file
//! exists and `--at-least` histories have passed: CI runs as many histories
//! as fit beside its tests, and never fewer than the minimum.
//!
//! A failing history prints its seed and the command that replays it, and
//! the run exits with status 1.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use clap::Parser;
use tributary_sim::{FaultKind, Scale, Stalls, run};

#[path = "../../benches/support/process.rs"]
mod process;

/// mimalloc, as the `tributary` binary: histories allocate and free small
/// buffers all the time.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs seeded histories of Tributary tables and checks each one.
#[derive(Debug, Parser)]
#[command(name = "tributary-sim", version)]
struct Args {
    /// How many histories to run (seeds `first-seed` onwards).
    #[arg(long, default_value_t = 1_000)]
    histories: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    first_seed: u64,
    /// Start no new history once this file exists and `--at-least`
    /// histories have passed (the running ones finish, so the seeds run
    /// are still `first-seed` onwards, without gaps).
    #[arg(long)]
    until_exists: Option<std::path::PathBuf>,
    /// With `--until-exists`: how many histories pass before the file is
    /// looked at (at most `--histories`).
    #[arg(long, default_value_t = 0)]
    at_least: u64,
    /// Replay the history of this seed alone and print what it did.
    #[arg(long)]
    replay: Option<u64>,
    /// Threads running histories; by default one per core.
    #[arg(long)]
    threads: Option<usize>,
    /// Keep going after a failing history.
    #[arg(long)]
    keep_going: bool,
    /// How long stalls last: `short` (within the writers' heartbeat
    /// expiry), `long` (past it, so recovery rolls back writers that are
    /// alive) or `mixed` (either, by seed).
    #[arg(long, value_enum, default_value = "mixed")]
    stalls: Stalls,
    /// Only crash processes; never freeze one and let it wake as a zombie.
    #[arg(long)]
    no_zombies: bool,
    /// The lease of the lease locks, in seconds.
    #[arg(long, default_value_t = 30)]
    lease_secs: u64,
}

fn replay_command(seed: u64, scale: &Scale) -> String {
    let stalls = if scale.stalls == Stalls::Mixed { String::new() } else { format!(" {}", scale.stalls.flag()) };
    let zombies = if scale.zombies { "" } else { " --no-zombies" };
    let lease = if scale.lease == Scale::default().lease {
        String::new()
    } else {
        format!(" --lease-secs {}", scale.lease.as_secs())
    };
    format!("cargo run --release -p tributary-sim -- --replay {seed}{stalls}{zombies}{lease}")
}

fn main() {
    let args = Args::parse();
    let scale = Scale {
        stalls: args.stalls,
        zombies: !args.no_zombies,
        lease: std::time::Duration::from_secs(args.lease_secs),
        ..Scale::default()
    };
    if let Some(seed) = args.replay {
        match run(seed, &scale) {
            Ok(o) => {
                println!(
                    "seed {seed}: passed {} checks; {} store operations (trace {:016x}); {:.1} s of virtual time; \
                     {} instants archived; change feed: {} windows, {} changes, {} starts from a snapshot; \
                     {} change-log commits compared with the feed",
                    o.checks,
                    o.ops,
                    o.trace,
                    o.virtual_time.as_secs_f64(),
                    o.archived,
                    o.feed.0,
                    o.feed.1,
                    o.feed.2,
                    o.change_logs
                );
                for (k, n) in &o.faults {
                    println!("  {}: {n}", k.name());
                }
            }
            Err(e) => {
                println!("seed {seed} FAILED: {e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let next = AtomicU64::new(args.first_seed);
    let end = args.first_seed + args.histories;
    let stop = AtomicBool::new(false);
    let faults: Mutex<BTreeMap<FaultKind, u64>> = Mutex::new(BTreeMap::new());
    let (passed, checks, ops) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let archived = AtomicU64::new(0);
    // The change-feed consumers': windows, changes, starts from a snapshot.
    let feed = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
    let change_logs = AtomicU64::new(0);
    let failures: Mutex<Vec<(u64, String)>> = Mutex::new(Vec::new());
    let started = std::time::Instant::now();
    // Whether the run may stop early: the minimum has passed and the file
    // that ends it exists.
    let enough = |passed: &AtomicU64| match &args.until_exists {
        Some(path) => passed.load(Ordering::SeqCst) >= args.at_least && path.exists(),
        None => false,
    };
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    if stop.load(Ordering::SeqCst) || enough(&passed) {
                        return;
                    }
                    let seed = next.fetch_add(1, Ordering::SeqCst);
                    if seed >= end {
                        return;
                    }
                    match run(seed, &scale) {
                        Ok(o) => {
                            passed.fetch_add(1, Ordering::Relaxed);
                            checks.fetch_add(o.checks as u64, Ordering::Relaxed);
                            ops.fetch_add(o.ops, Ordering::Relaxed);
                            archived.fetch_add(o.archived as u64, Ordering::Relaxed);
                            change_logs.fetch_add(o.change_logs as u64, Ordering::Relaxed);
                            for (total, n) in feed.iter().zip([o.feed.0, o.feed.1, o.feed.2]) {
                                total.fetch_add(n as u64, Ordering::Relaxed);
                            }
                            let mut f = faults.lock().expect("fault counts");
                            for (k, n) in o.faults {
                                *f.entry(k).or_default() += n;
                            }
                        }
                        Err(e) => {
                            eprintln!("seed {seed} FAILED: {e}\n  replay: {}", replay_command(seed, &scale));
                            failures.lock().expect("failures").push((seed, e));
                            if !args.keep_going {
                                stop.store(true, Ordering::SeqCst);
                            }
                        }
                    }
                    let done = passed.load(Ordering::Relaxed);
                    if done > 0 && done.is_multiple_of(10_000) {
                        let secs = started.elapsed().as_secs_f64();
                        eprintln!("{done} histories passed, {:.0} per second", done as f64 / secs);
                    }
                }
            });
        }
    });
    let secs = started.elapsed().as_secs_f64();
    let n = passed.load(Ordering::Relaxed);
    // CPU time as well as wall time: in CI the run shares the machine.
    let cpu = match process::cpu_time(process::clock_ticks_per_second()) {
        Ok(t) => format!("; {:.1} CPU-s, {:.0} histories per CPU-s", t.as_secs_f64(), n as f64 / t.as_secs_f64()),
        Err(e) => format!("; CPU time unknown ({e})"),
    };
    println!(
        "{n} histories passed in {secs:.1} s (seeds {} to {}; {:.0} histories/s on {threads} threads{cpu}); {} checks, {} store operations, \
         {} instants archived; change feed: {} windows, {} changes, {} starts from a snapshot; {} change-log commits \
         compared with the feed",
        args.first_seed,
        next.load(Ordering::SeqCst).min(end).saturating_sub(1),
        n as f64 / secs,
        checks.load(Ordering::Relaxed),
        ops.load(Ordering::Relaxed),
        archived.load(Ordering::Relaxed),
        feed[0].load(Ordering::Relaxed),
        feed[1].load(Ordering::Relaxed),
        feed[2].load(Ordering::Relaxed),
        change_logs.load(Ordering::Relaxed)
    );
    let faults = faults.lock().expect("fault counts");
    for k in FaultKind::ALL {
        println!("  faults injected, {}: {}", k.name(), faults.get(&k).copied().unwrap_or(0));
    }
    let failures = failures.lock().expect("failures");
    if !failures.is_empty() {
        println!("{} histories FAILED; first: seed {}: {}", failures.len(), failures[0].0, failures[0].1);
        println!("replay: {}", replay_command(failures[0].0, &scale));
        std::process::exit(1);
    }
}
