//! Damaged metadata gives clear errors or warnings, never a panic.

use crate::support::*;

fn new_table(dir: &std::path::Path) -> std::path::PathBuf {
    init_trips(dir, "t", &[])
}

fn edit_properties(table: &std::path::Path, f: impl FnOnce(String) -> String) {
    let p = table.join(".hoodie/hoodie.properties");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, f(text)).unwrap();
}

#[test]
fn damaged_properties_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let table = new_table(dir.path());
    let t = table.to_str().unwrap();
    let original = std::fs::read_to_string(table.join(".hoodie/hoodie.properties")).unwrap();
    type Edit = Box<dyn Fn(String) -> String>;
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|s: String| s.replace("hoodie.table.version=8", "hoodie.table.version=5")),
            "unsupported table version 5",
        ),
        (
            Box::new(|s: String| s.replace("hoodie.table.version=8", "hoodie.table.version=eight")),
            "hoodie.table.version",
        ),
        (
            Box::new(|s: String| {
                s.lines().filter(|l| !l.starts_with("hoodie.record.merge.mode")).collect::<Vec<_>>().join("\n")
            }),
            "missing required key `hoodie.record.merge.mode`",
        ),
        (Box::new(|s: String| s.replace("num.buckets=16", "num.buckets=-3")), "hoodie.bucket.index.num.buckets"),
        (Box::new(|s: String| s.replace("hoodie.table.name=t", "hoodie.table.name=u")), "hoodie.table.checksum"),
        (Box::new(|_| "\u{0}\u{1}garbage\\".to_string()), "hoodie.properties"),
        (Box::new(|_| String::new()), "missing required key `hoodie.table.version`"),
    ];
    for (edit, expect) in cases {
        std::fs::write(table.join(".hoodie/hoodie.properties"), &original).unwrap();
        edit_properties(&table, edit);
        let err = tributary_err(&["timeline", t]);
        assert!(err.contains(expect), "expected `{expect}` in: {err}");
        assert!(err.contains("hoodie.properties"), "names the file: {err}");
    }
    let err = tributary_err(&["timeline", dir.path().join("nothing").to_str().unwrap()]);
    assert!(err.contains("not a Hudi table"), "{err}");
}

#[test]
fn stray_timeline_files_are_skipped_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let table = new_table(dir.path());
    let tl = table.join(".hoodie/timeline");
    std::fs::create_dir_all(tl.join("history")).unwrap();
    for (name, content) in [
        ("20251220210108078.deltacommit.requested", ""),
        ("20251220210108078.deltacommit.inflight", ""),
        ("20251220210108078_20251220210109593.deltacommit", "x"),
        ("20251220210110000.deltacommit.requested", ""),
        (".DS_Store", "junk"),
        ("README.txt", "junk"),
        ("2025.deltacommit", ""),
    ] {
        std::fs::write(tl.join(name), content).unwrap();
    }
    let out = tributary(&["timeline", table.to_str().unwrap()]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines[0].starts_with("20251220210108078  deltacommit"), "{stdout}");
    assert!(lines[0].contains("COMPLETED") && lines[0].ends_with("20251220210109593"), "{stdout}");
    assert!(lines[1].contains("REQUESTED") && lines[1].ends_with('-'), "{stdout}");
    for stray in ["README.txt", "2025.deltacommit"] {
        assert!(stderr.contains(stray), "warning names {stray}: {stderr}");
    }
}

/// An instant of an action this build does not know could change what a
/// reader sees: every command that loads the timeline refuses it, naming
/// the file and the action, and writes nothing.
#[test]
fn an_unknown_timeline_action_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let table = new_table(dir.path());
    let t = table.to_str().unwrap();
    let name = "20251220210108079.frobnicate.requested";
    std::fs::write(table.join(".hoodie/timeline").join(name), "").unwrap();
    let before = std::fs::read_dir(table.join(".hoodie/timeline")).unwrap().count();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "{\"uuid\":\"a\",\"ts\":1,\"fare\":2.5,\"city\":\"x\"}\n").unwrap();
    for args in
        [vec!["timeline", t], vec!["read", t], vec!["write", t, "--input", input.to_str().unwrap()], vec!["compact", t]]
    {
        let err = tributary_err(&args);
        assert!(err.contains(name) && err.contains("unknown timeline action `frobnicate`"), "{args:?}: {err}");
    }
    assert_eq!(std::fs::read_dir(table.join(".hoodie/timeline")).unwrap().count(), before, "nothing was written");
}

/// A log block of a type no reader here handles (an HFile block in a data
/// table), or of no known type: reads and compaction fail naming the log
/// file and the type found, and no base file is written.
#[test]
fn a_log_block_that_cannot_be_read_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let table = init_trips(dir.path(), "t", &["--buckets", "1"]);
    let t = table.to_str().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "{\"uuid\":\"a\",\"ts\":1,\"fare\":2.5,\"city\":\"x\"}\n").unwrap();
    tributary_ok(&["write", t, "--input", input.to_str().unwrap()]);
    let log = std::fs::read_dir(&table)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().contains(".log."))
        .expect("the write's log file");
    let name = log.file_name().unwrap().to_string_lossy().into_owned();
    // The block type is the int after the magic (6 bytes), the block size
    // (8) and the log format version (4).
    let set_type = |code: i32| {
        let mut bytes = std::fs::read(&log).unwrap();
        bytes[18..22].copy_from_slice(&code.to_be_bytes());
        std::fs::write(&log, bytes).unwrap();
    };
    set_type(4);
    for args in [vec!["read", t], vec!["compact", t]] {
        let err = tributary_err(&args);
        assert!(err.contains(&name) && err.contains("type 4 (HFileData)"), "{args:?}: {err}");
    }
    set_type(9);
    let err = tributary_err(&["read", t]);
    assert!(err.contains(&name) && err.contains("unknown block type 9"), "{err}");
    let parquet =
        std::fs::read_dir(&table).unwrap().flatten().filter(|e| e.path().extension().is_some_and(|x| x == "parquet"));
    assert_eq!(parquet.count(), 0, "no base file was written");
}
