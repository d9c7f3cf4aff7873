//! Recovery of failed writes and cleaning, through the CLI (and a compactor
//! whose clock runs ahead, to age a heartbeat), on the store
//! `TRIBUTARY_TEST_STORE` names (see [`Place`]).

use std::sync::Arc;
use std::time::Duration;

use tributary::TableSettings;
use tributary_compaction::CompactorSettings;
use tributary_timeline::{Clock, OffsetClock, SystemClock};

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
    let before = tributary_ok(&["read", t]);

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
    assert_eq!(tributary_ok(&["read", t]), before, "uncommitted files are invisible");

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
    assert_eq!(tributary_ok(&["read", t]), before);
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
    let before = tributary_ok(&["read", t]);
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
    assert_eq!(tributary_ok(&["read", t]), before, "reads unchanged");
    let timeline = tributary_ok(&["timeline", t]);
    assert!(timeline.lines().any(|l| l.contains("clean") && l.contains("COMPLETED")), "{timeline}");
    if have_official_reader() {
        let rows = assert_same_rows(t, "after cleaning");
        assert_eq!(rows.len(), before.lines().count());
    }
}
