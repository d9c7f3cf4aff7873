//! Recovery of failed writes and cleaning, through the CLI.

use crate::support::*;

fn files(table: &std::path::Path, pred: impl Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![table.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_dir() {
                stack.push(e.path());
            } else if pred(&name) {
                out.push(name);
            }
        }
    }
    out.sort();
    out
}

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
    let dir = tempfile::tempdir().unwrap();
    let table = init_trips(dir.path(), "t", &["--partition-field", "city", "--buckets", "2"]);
    let t = table.to_str().unwrap();
    let first = write_lines(dir.path(), "a.jsonl", 100, 1);
    tributary_ok(&["write", t, "--input", first.to_str().unwrap(), "--time-mode", "hybrid-logical"]);
    let before = tributary_ok(&["read", t]);

    // A writer dies while writing: kill it once its first log file exists.
    let big = write_lines(dir.path(), "b.jsonl", 400_000, 2);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args(["write", t, "--input", big.to_str().unwrap(), "--time-mode", "hybrid-logical", "--tasks", "2"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let logs_of_first = files(&table, |n| n.contains(".log.")).len();
    while files(&table, |n| n.contains(".log.")).len() <= logs_of_first && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let orphans: Vec<String> = files(&table, |n| n.contains(".log.")).into_iter().filter(|n| !n.is_empty()).collect();
    assert!(orphans.len() > logs_of_first, "the killed writer left log files");
    assert_eq!(tributary_ok(&["read", t]), before, "uncommitted files are invisible");
    let timeline = tributary_ok(&["timeline", t]);
    assert!(timeline.contains("INFLIGHT"), "{timeline}");

    // A live heartbeat protects it; an expired one gets it rolled back.
    let out = tributary_ok(&["compact", t, "--time-mode", "hybrid-logical", "--heartbeat-expiry", "10m"]);
    assert!(tributary_ok(&["timeline", t]).contains("INFLIGHT"), "{out}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    tributary_ok(&["compact", t, "--time-mode", "hybrid-logical", "--heartbeat-expiry", "1s"]);
    let timeline = tributary_ok(&["timeline", t]);
    assert!(!timeline.contains("INFLIGHT") && !timeline.contains("REQUESTED"), "{timeline}");
    assert!(timeline.lines().any(|l| l.contains("rollback") && l.contains("COMPLETED")), "{timeline}");
    let left = files(&table, |n| n.contains(".log."));
    assert!(left.len() <= logs_of_first, "orphan logs deleted: {left:?}");
    assert!(files(&table, |n| n.contains("marker")).is_empty());
    assert_eq!(tributary_ok(&["read", t]), before);
    if have_official_reader() {
        let out = python(
            "import sys\nfrom hudi import HudiTableBuilder\nprint(sum(b.num_rows for b in HudiTableBuilder.from_base_uri(sys.argv[1]).build().read()))",
            &[t],
        );
        assert_eq!(out.trim(), before.lines().count().to_string());
    }
}

#[test]
fn clean_removes_old_slices_and_keeps_reads() {
    let dir = tempfile::tempdir().unwrap();
    let table = init_trips(dir.path(), "t", &["--partition-field", "city", "--buckets", "2"]);
    let t = table.to_str().unwrap();
    for round in 0..3 {
        let f = write_lines(dir.path(), &format!("r{round}.jsonl"), 500, round + 1);
        tributary_ok(&["write", t, "--input", f.to_str().unwrap(), "--time-mode", "hybrid-logical"]);
        tributary_ok(&["compact", t, "--time-mode", "hybrid-logical"]);
    }
    let before = tributary_ok(&["read", t]);
    let bases_before = files(&table, |n| n.ends_with(".parquet"));
    let logs_before = files(&table, |n| n.contains(".log."));
    assert_eq!(
        tributary_ok(&["clean", t, "--retain-commits", "100", "--time-mode", "hybrid-logical"]).trim(),
        "nothing to clean"
    );
    let out = tributary_ok(&["clean", t, "--retain-commits", "1", "--time-mode", "hybrid-logical"]);
    assert!(out.contains("files deleted"), "{out}");
    let bases_after = files(&table, |n| n.ends_with(".parquet"));
    assert!(bases_after.len() < bases_before.len(), "{bases_before:?} -> {bases_after:?}");
    let logs_after = files(&table, |n| n.contains(".log."));
    assert!(logs_after.len() < logs_before.len(), "superseded logs removed: {logs_before:?} -> {logs_after:?}");
    assert_eq!(tributary_ok(&["read", t]), before, "reads unchanged");
    let timeline = tributary_ok(&["timeline", t]);
    assert!(timeline.lines().any(|l| l.contains("clean") && l.contains("COMPLETED")), "{timeline}");
    if have_official_reader() {
        let out = python(
            "import sys\nfrom hudi import HudiTableBuilder\nprint(sum(b.num_rows for b in HudiTableBuilder.from_base_uri(sys.argv[1]).build().read()))",
            &[t],
        );
        assert_eq!(out.trim(), before.lines().count().to_string());
    }
}
