//! The simulator's own tests: histories pass their checks, a seed replays
//! its history operation by operation, the seeds of bugs the simulator
//! found stay fixed, and the official Hudi reader (hudi 0.5.0) reads the
//! final tables of a sample of histories as the model says. The CI run of
//! 60,000 histories is `tributary-sim` built with the `sim` profile (`.ci/run`).

use std::process::Command;

use futures::{FutureExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::Value;
use tributary_sim::workload::{Row, Rows};
use tributary_sim::{Scale, Stalls, TABLE_ROOT, run};

/// Seeds whose histories once failed, each kept since its bug was fixed,
/// with the stall mode it failed in, without zombies and with the 4 s
/// lease of the time (a seed replays its history while the simulator
/// draws as it did then):
///
/// - 34 (short stalls): a writer's commit failed, its cleanup failed to
///   delete one of its log files and withdrew the instant anyway; the
///   orphan log then read as committed (the reader took an instant older
///   than the active timeline for an archived one).
/// - 590 (long stalls): recovery requested the rollback of a stalled
///   writer's commit, and failed to withdraw its inflight file; a later
///   call carried the rollback out, deleting the log files while the writer
///   could still complete. It did, and its commit's rows were gone.
/// - 152, 1374, 1776, 2219, 2288, 3380, 3553 (long stalls): a stalled
///   writer rolled back by recovery wrote logs after the rollback listed
///   its markers; those orphans read as committed, and compaction plans
///   took them.
const REGRESSIONS: &[(u64, Stalls)] = &[
    (34, Stalls::Short),
    (590, Stalls::Long),
    (152, Stalls::Long),
    (1374, Stalls::Long),
    (1776, Stalls::Long),
    (2219, Stalls::Long),
    (2288, Stalls::Long),
    (3380, Stalls::Long),
    (3553, Stalls::Long),
];

/// Seeds whose histories once failed with the simulator's defaults (mixed
/// stalls, zombies, the 30 s lease), each kept since its bug was fixed:
///
/// - 41792: a writer's inflight file was put after its requested file and
///   outside the lock hold that issued the instant; that put stalled past
///   the heartbeat expiry, recovery withdrew the (not yet existing)
///   inflight file and rolled the write back, and the inflight file then
///   appeared. The write completed without the log recovery had deleted.
///   (`tests/it/client.rs` checks the fixed step itself: the seed draws
///   another history once the library's requests change.)
/// - 119: the change-feed consumer asked for a window beginning before
///   what an inflight clean retained; only completed cleans were checked,
///   so the window was answered from the slices left, and a key the
///   consumer held came back as an insert. (`compaction/src/clean.rs`
///   checks `cleaned_before` itself.)
/// - 3844: a change-log writer read its window's start, then a newer one
///   registered, recorded that window, and the cleaner moved past its
///   start; the older one's window was refused as cleaned (invalid input)
///   instead of failing as the conflict it is: another writer with its id
///   committed since.
/// - 15440: change-log writers registered their id on every run, each
///   fencing the run before it; zombies and restarts kept several going,
///   every run was cancelled by the next, the change log never advanced,
///   crashed runs piled up for recovery, compaction fell behind and the
///   writers stopped at their bound (stuck). Change-log writers now share
///   their id and only a checkpoint that moved refuses a run
///   (`tests/it/changes.rs` runs two at once).
const DEFAULT_REGRESSIONS: &[u64] = &[41792, 119, 3844, 15440];

fn pass(seed: u64, scale: &Scale) -> tributary_sim::Outcome {
    run(seed, scale).unwrap_or_else(|e| {
        panic!(
            "seed {seed} failed: {e}\nreplay: cargo run --release -p tributary-sim -- --replay {seed} {}{} --lease-secs {}",
            scale.stalls.flag(),
            if scale.zombies { "" } else { " --no-zombies" },
            scale.lease.as_secs()
        )
    })
}

#[test]
fn a_seed_replays_its_history() {
    for seed in [1, 2, 3] {
        let (a, b) = (pass(seed, &Scale::default()), pass(seed, &Scale::default()));
        assert_eq!((a.trace, a.ops, a.checks), (b.trace, b.ops, b.checks), "seed {seed}");
        assert!(a.ops > 100, "seed {seed} did something: {} operations", a.ops);
    }
}

#[test]
fn histories_pass() {
    let n: u64 = std::env::var("TRIBUTARY_SIM_HISTORIES").ok().and_then(|v| v.parse().ok()).unwrap_or(24);
    let mut checks = 0;
    for seed in 100..100 + n {
        checks += pass(seed, &Scale::default()).checks;
    }
    assert!(checks as u64 > 2 * n, "every history checks at least its instants and its end: {checks}");
}

#[test]
fn regression_seeds_pass() {
    for &(seed, stalls) in REGRESSIONS {
        let lease = std::time::Duration::from_secs(4);
        pass(seed, &Scale { stalls, zombies: false, lease, ..Scale::default() });
    }
    for &seed in DEFAULT_REGRESSIONS {
        pass(seed, &Scale::default());
    }
}

/// True when the official reader is installed; under `CI` its absence fails
/// the test instead.
fn have_official_reader() -> bool {
    let ok = Command::new("python3").args(["-c", "import hudi"]).output().is_ok_and(|o| o.status.success());
    if !ok && std::env::var_os("CI").is_some() {
        panic!("the official Hudi reader is required under CI (pip install hudi==0.5.0)");
    }
    ok
}

/// Writes every object of the table in `store` under `dir`.
fn dump(store: &dyn ObjectStore, dir: &std::path::Path) {
    let root = Path::from(TABLE_ROOT);
    let objects: Vec<_> =
        store.list(Some(&root)).try_collect::<Vec<_>>().now_or_never().expect("in memory").expect("listed");
    for o in objects {
        let rel = o.location.as_ref().strip_prefix(&format!("{TABLE_ROOT}/")).expect("under the table").to_string();
        let bytes = store
            .get(&o.location)
            .now_or_never()
            .expect("in memory")
            .expect("read")
            .bytes()
            .now_or_never()
            .expect("in memory")
            .expect("bytes");
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("folder");
        std::fs::write(path, bytes).expect("written");
    }
}

/// The official reader's read-optimized view: after the final compaction
/// the base files hold every row. Its snapshot refuses the table while any
/// log is in a slice (the sequence groups make it a CUSTOM merge table, and
/// compaction leaves deleted keys' tombstones in a log; see
/// `docs/design.md`, "Which readers can read it").
const READ: &str = r#"
import sys, json
import pyarrow as pa
from hudi import HudiTableBuilder, HudiReadOptions
o = HudiReadOptions().with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
b = HudiTableBuilder.from_base_uri(sys.argv[1]).build().read(o)
print(json.dumps(pa.Table.from_batches(b).to_pylist() if b else []))
"#;

fn official_rows(dir: &std::path::Path) -> Rows {
    let out = Command::new("python3").args(["-c", READ]).arg(dir).output().expect("python3 runs");
    assert!(out.status.success(), "the official reader failed: {}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).expect("JSON rows");
    let text = |r: &Value, f: &str| r[f].as_str().map(str::to_string);
    rows.iter()
        .map(|r| {
            let row = Row {
                region: text(r, "region").unwrap_or_default(),
                ts: r["ts"].as_i64(),
                v: r["v"].as_i64(),
                a1: text(r, "a1"),
                ts_a: r["ts_a"].as_i64(),
                b1: r["b1"].as_i64(),
                ts_b: r["ts_b"].as_i64(),
                c1: r["c1"].as_i64(),
                ts_c: r["ts_c"].as_i64(),
            };
            (text(r, "id").expect("a key"), row)
        })
        .collect()
}

#[test]
fn the_official_reader_reads_final_tables_as_the_model() {
    if !have_official_reader() {
        return;
    }
    for seed in [11, 12, 13, 14, 15, 16] {
        let outcome = pass(seed, &Scale::default());
        let dir = tempfile::tempdir().expect("temp dir");
        dump(outcome.store.as_deref().expect("the final store"), dir.path());
        let got = official_rows(dir.path());
        assert!(
            got == outcome.model,
            "seed {seed}: the official reader vs the model: {}",
            tributary_sim::workload::diff(&got, &outcome.model)
        );
    }
}
