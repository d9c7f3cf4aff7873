//! Failures say what the caller can do: the CLI's exit code is the error's
//! kind (2 invalid input, 3 corrupt, 4 unavailable, 5 conflict, 70 internal)
//! and its message names the input, table and record.

use std::time::Duration;

use tributary::{CreateOptions, Table, TableSettings, TimeSettings};
use tributary_format::ErrorKind;
use tributary_timeline::TimeMode;
use tributary_writer::WriteSettings;

use crate::support::{init_trips, tributary, trips_schema};

/// Runs `tributary`, requiring exit code `code` and no panic; returns stderr.
fn fails_with(code: i32, args: &[&str]) -> String {
    let out = tributary(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(code), "tributary {args:?}:\n{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn a_record_without_its_ordering_value_is_invalid_input() {
    let dir = tempfile::tempdir().unwrap();
    let table = init_trips(dir.path(), "t", &["--partition-field", "city"]);
    let input = dir.path().join("in.jsonl");
    std::fs::write(
        &input,
        "{\"uuid\":\"a\",\"ts\":1,\"rider\":\"A\",\"fare\":1.5,\"city\":\"paris\"}\n\
         {\"uuid\":\"b\",\"rider\":\"B\",\"fare\":1.5,\"city\":\"rome\"}\n",
    )
    .unwrap();
    let err = fails_with(2, &["write", table.to_str().unwrap(), "--input", input.to_str().unwrap()]);
    assert!(
        err.contains("in.jsonl line 2: field `ts`: missing ordering value; nothing of this commit was written"),
        "{err}"
    );
}

#[test]
fn malformed_json_is_invalid_input() {
    let dir = tempfile::tempdir().unwrap();
    let table = init_trips(dir.path(), "t", &[]);
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "{\"uuid\":\"a\",\n").unwrap();
    let err = fails_with(2, &["write", table.to_str().unwrap(), "--input", input.to_str().unwrap()]);
    assert!(err.contains("in.jsonl line 1: malformed JSON"), "{err}");
}

#[test]
fn a_missing_table_is_invalid_input_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no_such_table");
    let m = missing.to_str().unwrap();
    for args in [vec!["timeline", m], vec!["read", m], vec!["write", m, "--input", m]] {
        let err = fails_with(2, &args);
        assert!(err.contains(&format!("{m}: not a Hudi table")), "{args:?}: {err}");
    }
}

#[test]
fn a_missing_input_file_and_a_bad_instant_are_invalid_input() {
    let dir = tempfile::tempdir().unwrap();
    let table = init_trips(dir.path(), "t", &[]);
    let t = table.to_str().unwrap();
    let missing = dir.path().join("nothing.jsonl");
    let err = fails_with(2, &["write", t, "--input", missing.to_str().unwrap()]);
    assert!(err.contains(&format!("cannot open {}", missing.display())), "{err}");
    let err = fails_with(2, &["read", t, "--as-of", "yesterday"]);
    assert!(err.contains("--as-of"), "{err}");
}

#[test]
fn creating_over_an_existing_table_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let table = init_trips(dir.path(), "t", &[]);
    let schema = trips_schema(dir.path());
    let t = table.to_str().unwrap();
    let err = fails_with(
        5,
        &["init", t, "--schema", schema.to_str().unwrap(), "--record-key", "uuid", "--ordering-field", "ts"],
    );
    assert!(err.contains(&format!("{t}: a table already exists here")), "{err}");
}

#[test]
fn help_documents_the_exit_codes() {
    let out = tributary(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for line in ["2   invalid input", "3   corrupt data", "4   unavailable", "5   conflict", "70  internal error"] {
        assert!(help.contains(line), "`{line}` missing from --help:\n{help}");
    }
}

/// A commit one of whose writer tasks failed mid-commit cannot take more
/// rows or complete: the failed task's rows are lost, so completing it would
/// publish part of what was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_writer_task_failed_cannot_complete() {
    let dir = tempfile::tempdir().unwrap();
    let schema = r#"{"type":"record","name":"trips","fields":[
        {"name":"uuid","type":"string"},{"name":"ts","type":"long"},{"name":"city","type":"string"}]}"#;
    let mut options = CreateOptions::new(schema, "uuid", "ts");
    options.partition_field = Some("city".into());
    options.buckets = 1;
    let time = TimeSettings { mode: Some(TimeMode::HybridLogical), max_clock_skew: Duration::from_millis(200) };
    let table = Table::builder_local(dir.path().join("t"))
        .with_settings(TableSettings { time, ..Default::default() })
        .create(options)
        .await
        .unwrap();
    // A file where the partition folder must go: the task's flush fails.
    std::fs::write(dir.path().join("t").join("city=rome"), b"in the way").unwrap();
    let client = table.write_client(WriteSettings { tasks: 1, buffer_bytes: 1, ..Default::default() }).await.unwrap();
    let mut commit = client.start_commit().await.unwrap();
    let row = [serde_json::json!({"uuid": "a", "ts": 1, "city": "rome"})];
    // Until a write reports the task's failure; the deadline guards against
    // a hang only, far above what a slow machine needs.
    let hang_guard = Duration::from_secs(10 * 60);
    let deadline = std::time::Instant::now() + hang_guard;
    let mut failure = None;
    let mut i = 0;
    while failure.is_none() && std::time::Instant::now() < deadline {
        i += 1;
        failure = commit.write_json(&row, "rows", i).await.err();
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let failure =
        failure.unwrap_or_else(|| panic!("no write reported the failed task in {hang_guard:?} (a hang guard)"));
    assert_eq!(failure.kind(), ErrorKind::Unavailable, "{failure}");
    let again = commit.write_json(&row, "rows", 1).await.unwrap_err();
    assert_eq!(again.kind(), ErrorKind::InvalidInput, "{again}");
    assert!(again.to_string().contains("an earlier write of this commit failed"), "{again}");
    let instant = commit.instant().clone();
    let err = commit.commit().await.unwrap_err();
    assert!(err.to_string().contains(instant.as_str()), "{err}");
    let timeline = table.timeline().await.unwrap();
    assert!(timeline.is_empty(), "nothing of the commit stays: {:?}", timeline.instants());
}
