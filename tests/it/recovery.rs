//! Recovery of failed writes and cleaning, through the CLI (and a compactor
//! whose clock runs ahead, to age a heartbeat, and cleans by hours under a
//! manual clock), on the store `TRIBUTARY_TEST_STORE` names (see [`Place`]).

use std::sync::Arc;
use std::time::Duration;

use tributary::{Action, CleanRetention, InstantTime, ReadOptions, TableSettings};
use tributary_compaction::CompactorSettings;
use tributary_timeline::{Clock, ManualClock, OffsetClock, SystemClock};
use tributary_writer::WriteSettings;

use crate::support::*;

fn write_lines(dir: &std::path::Path, name: &str, n: usize, ts: i64) -> std::path::PathBuf {
    let p = dir.join(name);
    let text: String = (0..n)
        .map(|i| {
            format!(
                "{{\"uuid\":\"k{:05}\",\"ts\":{ts},\"rider\":\"r\",\"fare\":1.0,\"city\":\"c{}\"}}\n",
                i % 3000,
                i % 2
            )
        })
        .collect();
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn expired_writes_are_rolled_back_before_compaction() {
    let Some(place) = Place::new() else { return };
    let table = place.init_trips("t", &["--partition-field", "city", "--buckets", "2"]);
    let t = table.uri();
    let first = write_lines(place.scratch(), "a.jsonl", 100, 1);
    tributary_ok(&["write", t, "--input", first.to_str().unwrap(), "--time-mode", "hybrid-logical"]);
    let before = tributary_ok(&["read", t, "--sort"]);

    // A writer dies while writing: kill it once its first log file exists.
    let big = write_lines(place.scratch(), "b.jsonl", 400_000, 2);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args(["write", t, "--input", big.to_str().unwrap(), "--time-mode", "hybrid-logical", "--tasks", "2"])
        .args(SHORT_LEASE)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let committed_logs = table.file_names(is_log);
    assert!(!committed_logs.is_empty(), "the first write made log files");
    while table.file_names(is_log).len() <= committed_logs.len() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let timeline = tributary_ok(&["timeline", t]);
    let inflight: Vec<&str> =
        timeline.lines().filter(|l| l.contains("INFLIGHT")).map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(inflight.len(), 1, "the killed write is the one inflight instant: {timeline}");
    let inflight = inflight[0].to_string();
    // The logs that appeared since the first write are the killed writer's
    // (its instant is in their names), not the committed ones.
    let orphans: Vec<String> = table.file_names(is_log).into_iter().filter(|n| !committed_logs.contains(n)).collect();
    assert!(!orphans.is_empty(), "the killed writer left log files");
    for o in &orphans {
        assert!(o.contains(&format!("_{inflight}.log.")), "{o} is a log of the killed write {inflight}");
    }
    assert!(!table.file_names(is_marker).is_empty(), "the killed writer left its markers");
    assert_eq!(tributary_ok(&["read", t, "--sort"]), before, "uncommitted files are invisible");

    // A live heartbeat protects it; an expired one gets it rolled back.
    let out = tributary_ok(&["compact", t, "--time-mode", "hybrid-logical", "--heartbeat-expiry", "10m"]);
    assert!(out.starts_with("compaction ") && out.contains(" completed "), "the committed logs are compacted: {out}");
    assert!(tributary_ok(&["timeline", t]).contains("INFLIGHT"), "{out}");
    // The heartbeat holds the writer's clock reading, so a compactor whose
    // clock runs 11 minutes ahead finds it past the 10-minute expiry, with
    // no wait (the CLI has no clock of its own to set; the library has).
    let expiry = Duration::from_secs(10 * 60);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let done = rt.block_on(async {
        let ahead: Arc<dyn Clock> = Arc::new(OffsetClock::new(Arc::new(SystemClock), 11 * 60 * 1000));
        let settings = TableSettings { heartbeat_expiry: expiry, ..hybrid() };
        let opened = table.builder().with_settings(settings).with_clock(ahead).open().await.unwrap();
        opened.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap()
    });
    assert!(
        done.is_empty(),
        "the first run compacted the committed logs, and the rolled back write adds none: {done:?}"
    );
    let timeline = tributary_ok(&["timeline", t]);
    assert!(!timeline.contains("INFLIGHT") && !timeline.contains("REQUESTED"), "{timeline}");
    assert!(timeline.lines().any(|l| l.contains("rollback") && l.contains("COMPLETED")), "{timeline}");
    assert_eq!(table.file_names(is_log), committed_logs, "orphan logs deleted, committed logs kept");
    assert!(table.file_names(is_marker).is_empty());
    assert_eq!(tributary_ok(&["read", t, "--sort"]), before);
    if have_official_reader() {
        let rows = assert_same_rows(t, "after the rollback");
        assert_eq!(rows.len(), before.lines().count());
    }
}

#[test]
fn clean_removes_old_slices_and_keeps_reads() {
    let Some(place) = Place::new() else { return };
    let table = place.init_trips("t", &["--partition-field", "city", "--buckets", "2"]);
    let t = table.uri();
    for round in 0..3 {
        let f = write_lines(place.scratch(), &format!("r{round}.jsonl"), 500, round + 1);
        tributary_ok(&["write", t, "--input", f.to_str().unwrap(), "--time-mode", "hybrid-logical"]);
        tributary_ok(&["compact", t, "--time-mode", "hybrid-logical"]);
    }
    let before = tributary_ok(&["read", t, "--sort"]);
    let bases_before = table.file_names(|n| n.ends_with(".parquet"));
    let logs_before = table.file_names(is_log);
    assert_eq!(
        tributary_ok(&["clean", t, "--retain-commits", "100", "--time-mode", "hybrid-logical"]).trim(),
        "nothing to clean"
    );
    let out = tributary_ok(&["clean", t, "--retain-commits", "1", "--time-mode", "hybrid-logical"]);
    assert!(out.contains("files deleted"), "{out}");
    let bases_after = table.file_names(|n| n.ends_with(".parquet"));
    assert!(bases_after.len() < bases_before.len(), "{bases_before:?} -> {bases_after:?}");
    let logs_after = table.file_names(is_log);
    assert!(logs_after.len() < logs_before.len(), "superseded logs removed: {logs_before:?} -> {logs_after:?}");
    assert_eq!(tributary_ok(&["read", t, "--sort"]), before, "reads unchanged");
    let timeline = tributary_ok(&["timeline", t]);
    assert!(timeline.lines().any(|l| l.contains("clean") && l.contains("COMPLETED")), "{timeline}");
    if have_official_reader() {
        let rows = assert_same_rows(t, "after cleaning");
        assert_eq!(rows.len(), before.lines().count());
    }
}

/// The hours policy (`Table::clean_with`, `clean --retain-hours`), on a
/// table whose clock is injected: three rounds of a write and a
/// compaction two hours apart, then cleans as the clock moves on. Each
/// keeps the slices the commits requested within the window need (time
/// travel to them reads as before) and removes the older ones; with no
/// commit in the window nothing is cleaned. The CLI refuses both
/// retentions at once, and zero hours.
#[test]
fn clean_by_hours_follows_the_table_clock() {
    let Some(place) = Place::new() else { return };
    let table = place.table("t");
    const HOUR: i64 = 3_600_000;
    const START: i64 = 1_735_689_600_000; // 2025-01-01T00:00:00Z
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let clock = Arc::new(ManualClock::new(START));
        let t =
            table.builder().with_settings(hybrid()).with_clock(clock.clone()).create(fares_options()).await.unwrap();
        let keys = ["k0", "k1", "k2", "k3", "k4", "k5"];
        let mut writes = Vec::new();
        for round in 0..3i64 {
            clock.set(START + 2 * HOUR * round);
            let client = t.write_client(WriteSettings::default()).await.unwrap();
            let rows: Vec<(&str, i64, f64)> = keys.iter().map(|k| (*k, round, round as f64)).collect();
            let mut c = client.start_commit().await.unwrap();
            c.write_batch(&oslo_batch(&rows)).await.unwrap();
            writes.push(c.commit().await.unwrap().instant);
            let done = t.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
            assert_eq!(done.len(), 1, "round {round} compacted");
        }
        let as_of = |w: &InstantTime| ReadOptions { as_of: Some(w.clone()), ..Default::default() };
        let read = |w: InstantTime| {
            let t = t.clone();
            async move { fares_rows(&t.read(&as_of(&w)).await.unwrap()) }
        };
        let (at_1, at_2) = (read(writes[1].clone()).await, read(writes[2].clone()).await);
        let logs_of = |w: &InstantTime| table.file_names(|n| is_log(n) && n.contains(&format!("_{w}.log.")));
        let bases_of = |w: &InstantTime| table.file_names(|n| n.ends_with(".parquet") && n.contains(w.as_str()));
        let compactions: Vec<InstantTime> = {
            let tl = t.timeline().await.unwrap();
            tl.completed().filter(|i| i.action == Action::Compaction).map(|i| i.requested.clone()).collect()
        };
        assert_eq!(compactions.len(), 3);
        assert!(!logs_of(&writes[0]).is_empty() && !bases_of(&compactions[0]).is_empty());

        // 4 hours back from 5.5 hours: the window starts at 1.5 hours and
        // holds the writes from the second on. Only the first write's logs
        // (before the first base, which completed before the window) go.
        clock.set(START + 11 * HOUR / 2);
        let s = t.clean_with(CleanRetention::Hours(4)).await.unwrap().expect("a clean ran");
        assert_eq!(s.earliest_commit_to_retain, writes[1].to_string());
        let first_logs: Vec<String> = logs_of(&writes[0]);
        assert!(first_logs.is_empty(), "the first write's logs are cleaned: {first_logs:?}");
        assert!(!bases_of(&compactions[0]).is_empty() && !logs_of(&writes[1]).is_empty());
        assert_eq!(read(writes[1].clone()).await, at_1, "the window's first write reads as before");

        // Two hours on, the window holds the third write alone: the first
        // base and the second write's logs go; the second base stays.
        clock.advance(2 * HOUR);
        let s = t.clean_with(CleanRetention::Hours(4)).await.unwrap().expect("a clean ran");
        assert_eq!(s.earliest_commit_to_retain, writes[2].to_string());
        assert!(bases_of(&compactions[0]).is_empty() && logs_of(&writes[1]).is_empty());
        assert!(!bases_of(&compactions[1]).is_empty() && !logs_of(&writes[2]).is_empty());
        assert_eq!(read(writes[2].clone()).await, at_2, "the window's write reads as before");

        // Past every commit: nothing to clean, nothing written.
        clock.advance(10 * HOUR);
        let before = t.timeline().await.unwrap().instants().cloned().collect::<Vec<_>>();
        assert_eq!(t.clean_with(CleanRetention::Hours(4)).await.unwrap(), None);
        assert_eq!(t.timeline().await.unwrap().instants().cloned().collect::<Vec<_>>(), before);
        assert!(t.clean_with(CleanRetention::Hours(0)).await.is_err());
    });

    // The CLI, reading the system clock, years after these commits.
    let t = table.uri();
    let both = tributary_err(&["clean", t, "--retain-hours", "1", "--retain-commits", "2"]);
    assert!(both.contains("cannot be used with"), "{both}");
    let both = tributary_err(&["serve", t, "--retain-hours", "1", "--retain-commits", "2"]);
    assert!(both.contains("cannot be used with"), "{both}");
    let zero = tributary_err(&["clean", t, "--retain-hours", "0"]);
    assert!(zero.contains("hoodie.cleaner.hours.retained"), "{zero}");
    let out = tributary_ok(&["clean", t, "--retain-hours", "1", "--time-mode", "hybrid-logical"]);
    assert_eq!(out.trim(), "nothing to clean", "no commit in the last hour");
}
