//! Exactly-once writers: checkpoints committed with the data (`write
//! --writer-id ID --checkpoint OFFSET`), looked up from the writer's state
//! file (`tributary checkpoint`), and writer ids taken over by a newer
//! writer, which fences the older one. On the store
//! `TRIBUTARY_TEST_STORE` names (see [`Place`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tributary::{CreateOptions, LockKind, Query, ReadOptions, Table, TableSettings};
use tributary_format::CommitMetadata;
use tributary_format::ErrorKind;
use tributary_timeline::TableLocation;
use tributary_writer::WriteSettings;

use crate::support::*;

/// Source line `i` of the test's stream: key `k{i:04}`, fare `i`, two cities.
fn line(i: usize) -> String {
    format!("{{\"uuid\":\"k{i:04}\",\"ts\":{i},\"rider\":\"r{i}\",\"fare\":{i}.5,\"city\":\"c{}\"}}", i % 2)
}

/// Lines `from..to` of the source, in a file.
fn batch(dir: &Path, from: usize, to: usize) -> std::path::PathBuf {
    let p = dir.join(format!("lines-{from}-{to}.jsonl"));
    std::fs::write(&p, (from..to).map(|i| line(i) + "\n").collect::<String>()).unwrap();
    p
}

fn settings(id: &str) -> WriteSettings {
    WriteSettings { writer_id: id.into(), ..Default::default() }
}

/// Runs `tributary`, requiring exit code `code`; returns stderr.
fn fails_with(code: i32, args: &[&str]) -> String {
    let out = tributary(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(code), "tributary {args:?}:\n{stderr}");
    assert!(stderr.starts_with("error: ") && !stderr.contains("panicked"), "{stderr}");
    stderr
}

/// `tributary write` of source lines `from..to` as writer `id`, committing
/// checkpoint `to` after expecting `expect`.
fn write_cli(dir: &Path, table: &TableUri, id: &str, from: usize, to: usize, expect: &str) -> String {
    let input = batch(dir, from, to);
    let (t, input, to) = (table.uri(), input.to_str().unwrap(), to.to_string());
    tributary_ok(&[
        "write",
        t,
        "--input",
        input,
        "--writer-id",
        id,
        "--checkpoint",
        &to,
        "--expect-checkpoint",
        expect,
        "--time-mode",
        "hybrid-logical",
    ])
}

/// Records written by the table's completed delta commits, by their
/// commit metadata: a record written twice counts twice.
fn committed_writes(table: &TableUri) -> i64 {
    let names: Vec<String> =
        table.list(".hoodie/timeline").into_iter().filter(|p| p.ends_with(".deltacommit")).collect();
    names
        .iter()
        .map(|p| {
            let meta = CommitMetadata::from_avro_container(&table.read(p), p);
            meta.unwrap().write_stats().map(|s| s.num_writes).sum::<i64>()
        })
        .sum()
}

/// `tributary read` of `table`: fare by record key, each key once.
fn fares(table: &TableUri) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for l in tributary_ok(&["read", table.uri()]).lines() {
        let row: Value = serde_json::from_str(l).unwrap();
        let key = row["uuid"].as_str().unwrap().to_string();
        assert!(out.insert(key.clone(), row["fare"].as_f64().unwrap()).is_none(), "{key} read twice");
    }
    out
}

/// A writer crashes after writing its log files and recording its pending
/// checkpoint, before its commit becomes visible. After the restart,
/// `tributary checkpoint` prints the last visible offset, and writing from
/// there leaves every source record in the table exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resumes_from_the_printed_checkpoint_without_loss_or_duplicate() {
    const N: usize = 300;
    let Some(place) = Place::new() else { return };
    let table = place.init_trips("t", &["--partition-field", "city", "--buckets", "2"]);
    let t = table.uri();
    assert_eq!(tributary_ok(&["checkpoint", t, "--writer-id", "src"]), "", "no checkpoint yet");
    let out = write_cli(place.scratch(), &table, "src", 0, 100, "");
    assert!(out.contains("checkpoint `100` committed as writer `src` (generation 1)"), "{out}");

    // The second run: its completed file cannot be created (the process
    // dies there), after its log files and its pending entry are written.
    let dies = |s| -> Arc<dyn object_store::ObjectStore> {
        Arc::new(FailPuts::new(s, "killed before completion", |p| p.ends_with(".deltacommit")))
    };
    let crashed = table.builder_through(dies, hybrid()).open().await.unwrap();
    let client = crashed.write_client(settings("src")).await.unwrap();
    let status = client.register().await.unwrap();
    assert_eq!(status.generation, 2);
    assert_eq!(status.checkpoint.map(|c| c.checkpoint).as_deref(), Some("100"));
    let mut commit = client.start_commit().await.unwrap();
    let lines: Vec<Value> = (100..200).map(|i| serde_json::from_str(&line(i)).unwrap()).collect();
    commit.write_json(&lines, "source", 101).await.unwrap();
    let lost = commit.instant().to_string();
    let err = commit.commit_with_checkpoint(Some("200".into())).await.unwrap_err();
    assert!(err.to_string().contains("killed before completion"), "{err}");
    assert!(!table.file_names(|n| is_log(n) && n.contains(&format!("_{lost}.log."))).is_empty());
    let state: Value = serde_json::from_slice(&table.read(".hoodie/.tributary/writers/src.json")).unwrap();
    assert_eq!(state["pending"]["checkpoint"], "200", "the pending entry was written: {state}");
    assert_eq!(state["pending"]["instant"], lost.as_str(), "{state}");
    drop(client);

    // Restart: the printed offset is the last visible one.
    let printed = tributary_ok(&["checkpoint", t, "--writer-id", "src"]);
    assert_eq!(printed, "100\n");
    let from: usize = printed.trim().parse().unwrap();
    write_cli(place.scratch(), &table, "src", from, N, printed.trim());
    assert_eq!(tributary_ok(&["checkpoint", t, "--writer-id", "src"]), format!("{N}\n"));

    let want: BTreeMap<String, f64> = (0..N).map(|i| (format!("k{i:04}"), i as f64 + 0.5)).collect();
    assert_eq!(fares(&table), want, "every record present, with its values");
    assert_eq!(committed_writes(&table), N as i64, "and written by exactly one visible commit");
    let timeline = tributary_ok(&["timeline", t]);
    assert!(timeline.lines().any(|l| l.starts_with(&lost) && l.contains("INFLIGHT")), "{timeline}");
    if have_official_reader() {
        let rows = assert_same_rows(&table, "after the restart");
        assert_eq!(rows.len(), N, "the official reader ignores .hoodie/.tributary");
    }
}

/// Writer B registers the id writer A holds while A's commit is open: A's
/// commit fails naming the id, is withdrawn with its files, and B commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_writer_with_the_same_id_fences_the_older_one() {
    let Some(place) = Place::new() else { return };
    let root = place.table("t");
    let options = fares_options();
    let t = root.builder().with_settings(hybrid()).create(options).await.unwrap();
    let a = t.write_client(WriteSettings { buffer_bytes: 1, ..settings("x") }).await.unwrap();
    assert_eq!(a.register().await.unwrap().generation, 1);
    let mut c = a.start_commit().await.unwrap();
    c.write_batch(&oslo_batch(&[("a", 1, 1.0), ("b", 1, 1.0)])).await.unwrap();
    c.commit_with_checkpoint(Some("1".into())).await.unwrap();
    let before = t.read(&ReadOptions::default()).await.unwrap();

    let mut open = a.start_commit().await.unwrap();
    let fenced = open.instant().to_string();
    open.write_batch(&oslo_batch(&[("a", 2, 9.0), ("z", 2, 9.0)])).await.unwrap();
    let b = t.write_client(settings("x")).await.unwrap();
    let taken = b.register().await.unwrap();
    assert_eq!((taken.generation, taken.checkpoint.map(|c| c.checkpoint)), (2, Some("1".into())));

    let err = open.commit_with_checkpoint(Some("2".into())).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("writer ID `x` was taken over by a newer writer (generation 2)"), "{msg}");
    assert!(msg.contains(&fenced) && msg.contains(root.uri()), "{msg}");
    assert!(tributary::Error::from(err).is_fenced(), "{msg}");
    assert_eq!(t.read(&ReadOptions::default()).await.unwrap(), before, "nothing of A's commit is visible");
    let timeline = t.timeline().await.unwrap();
    assert!(timeline.get(&fenced.parse().unwrap()).is_none(), "A's instant is withdrawn: {:?}", timeline.instants());
    let leftovers = root.file_paths(|n| n.contains(&fenced));
    assert!(leftovers.is_empty(), "A's log files, markers and heartbeat are gone: {leftovers:?}");
    assert_eq!(b.last_checkpoint("x").await.unwrap().as_deref(), Some("1"));
    // A stays fenced; B commits.
    let err = a.start_commit().await.unwrap().commit().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    let mut c = b.start_commit().await.unwrap();
    c.write_batch(&oslo_batch(&[("z", 3, 3.0)])).await.unwrap();
    let done = c.commit_with_checkpoint(Some("3".into())).await.unwrap();
    let status = t.checkpoint("x").await.unwrap();
    assert_eq!(status.generation, 2);
    let last = status.checkpoint.unwrap();
    assert_eq!(
        (last.checkpoint.as_str(), &last.instant, last.completed.as_ref()),
        ("3", &done.instant, Some(&done.completed))
    );
    let rows = t.read(&ReadOptions { query: Query::Snapshot, ..Default::default() }).await.unwrap();
    assert_eq!(rows.num_rows(), 3, "a, b and B's z");
}

/// Commits that share a writer id optimistically
/// (`Commit::complete_only_after`): two clients, one registered and one
/// not, start from the same checkpoint; the first to complete records its
/// checkpoint, the other is refused as a conflict naming both checkpoints,
/// and is withdrawn with its files. Registering fences neither: the loser
/// completes once it starts over from the new checkpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_sharing_a_writer_id_complete_only_after_the_checkpoint_they_began_from() {
    let Some(place) = Place::new() else { return };
    let root = place.table("t");
    let t = root.builder().with_settings(hybrid()).create(fares_options()).await.unwrap();
    let a = t.write_client(settings("shared")).await.unwrap();
    let b = t.write_client(settings("shared")).await.unwrap();
    b.register().await.unwrap();
    let mut first = a.start_commit().await.unwrap();
    first.complete_only_after(None);
    first.write_batch(&oslo_batch(&[("a", 1, 1.0)])).await.unwrap();
    let mut second = b.start_commit().await.unwrap();
    second.complete_only_after(None);
    second.write_batch(&oslo_batch(&[("b", 1, 1.0)])).await.unwrap();
    let lost = second.instant().to_string();
    // `a` never registered, `b` did: the checkpoint alone decides.
    first.commit_with_checkpoint(Some("10".into())).await.unwrap();
    let err = second.commit_with_checkpoint(Some("20".into())).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    let msg = err.to_string();
    assert!(msg.contains("recorded checkpoint `10` since this commit began from ``") && msg.contains(&lost), "{msg}");
    assert!(!tributary::Error::from(err).is_fenced(), "the client may go on: {msg}");
    let timeline = t.timeline().await.unwrap();
    assert!(timeline.get(&lost.parse().unwrap()).is_none(), "the loser is withdrawn");
    assert!(root.file_paths(|n| n.contains(&lost)).is_empty(), "its files are gone");
    assert_eq!(t.checkpoint("shared").await.unwrap().checkpoint.unwrap().checkpoint, "10");

    let mut again = b.start_commit().await.unwrap();
    again.complete_only_after(Some("10"));
    again.write_batch(&oslo_batch(&[("b", 2, 2.0)])).await.unwrap();
    again.commit_with_checkpoint(Some("20".into())).await.unwrap();
    let mut stale = a.start_commit().await.unwrap();
    stale.complete_only_after(Some("10"));
    let err = stale.commit_with_checkpoint(Some("30".into())).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    let status = t.checkpoint("shared").await.unwrap();
    assert_eq!((status.generation, status.checkpoint.unwrap().checkpoint.as_str()), (1, "20"));
    let rows = t.read(&ReadOptions::default()).await.unwrap();
    assert_eq!(rows.num_rows(), 2, "a and b");
}

/// Looking a checkpoint up reads the writer's state file and checks one
/// completed file's existence, however many commits the table holds. (The
/// lock is this process's, whose requests are not the point.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_reads_one_file_however_long_the_timeline() {
    let Some(place) = Place::new() else { return };
    let healthy = place.table("fares").location();
    let store = Arc::new(CountingStore::new(healthy.store.clone()));
    let loc = TableLocation::new(store.clone(), healthy.root.clone());
    let mut options = CreateOptions::new(FARES_SCHEMA, "uuid", "ts");
    options.buckets = 2;
    let t = Table::builder(loc)
        .with_settings(TableSettings { lock: LockKind::InProcess, ..hybrid() })
        .create(options)
        .await
        .unwrap();
    let src = t.write_client(settings("src")).await.unwrap();
    src.register().await.unwrap();
    let mut c = src.start_commit().await.unwrap();
    c.write_batch(&oslo_batch(&[("s", 1, 1.0)])).await.unwrap();
    let mine = c.commit_with_checkpoint(Some("s-1".into())).await.unwrap();
    for w in 0..3 {
        let other = t.write_client(settings(&format!("w{w}"))).await.unwrap();
        for i in 0..10 {
            let mut c = other.start_commit().await.unwrap();
            c.write_batch(&oslo_batch(&[("o", i, 1.0)])).await.unwrap();
            c.commit_with_checkpoint(Some(format!("{w}-{i}"))).await.unwrap();
        }
    }
    assert_eq!(t.timeline().await.unwrap().completed().count(), 31);

    store.take();
    let found = t.checkpoint("src").await.unwrap().checkpoint.unwrap();
    assert_eq!((found.checkpoint.as_str(), &found.instant), ("s-1", &mine.instant));
    assert_eq!(
        store.take(),
        Requests { gets: 1, heads: 1, ..Requests::default() },
        "the state file, then the commit's completed file"
    );
    assert_eq!(t.checkpoint("nobody").await.unwrap().checkpoint, None);
    let nobody = store.take();
    assert_eq!(
        (nobody.gets, nobody.lists, nobody.puts),
        (2, 0, 0),
        "no state file, and writers.json says no commit holds one: {nobody:?}"
    );
    assert_eq!(src.last_checkpoint("w2").await.unwrap().as_deref(), Some("2-9"));
    assert_eq!(store.take(), Requests { gets: 1, heads: 1, ..Requests::default() });
}

#[test]
fn checkpoint_options_need_a_writer_id_and_one_commit() {
    let Some(place) = Place::new() else { return };
    let table = place.init_trips("t", &[]);
    let t = table.uri();
    let input = batch(place.scratch(), 0, 3);
    let i = input.to_str().unwrap();
    let err = fails_with(2, &["write", t, "--input", i, "--checkpoint", "3"]);
    assert!(err.contains("--checkpoint needs --writer-id"), "{err}");
    let err = fails_with(2, &["write", t, "--input", i, "--expect-checkpoint", "3"]);
    assert!(err.contains("--expect-checkpoint needs --writer-id"), "{err}");
    let err =
        fails_with(2, &["write", t, "--input", i, "--writer-id", "a", "--checkpoint", "3", "--commit-every", "2"]);
    assert!(err.contains("--checkpoint cannot be combined with --commit-every"), "{err}");
    let err = fails_with(2, &["write", t, "--input", i, "--writer-id", "a", "--checkpoint", ""]);
    assert!(err.contains("--checkpoint: must not be empty"), "{err}");
    let err = fails_with(2, &["write", t, "--input", i, "--writer-id", "a", "--checkpoint", "1\n2"]);
    assert!(err.contains("must be one line"), "{err}");
    let err = fails_with(2, &["checkpoint", t]);
    assert!(err.contains("--writer-id"), "{err}");
    assert!(tributary_ok(&["timeline", t]).is_empty(), "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_writer_ids_are_invalid_input_naming_the_id() {
    let Some(place) = Place::new() else { return };
    let table = place.init_trips("t", &[]);
    let t = table.uri();
    let input = batch(place.scratch(), 0, 3);
    for bad in ["../escape", "a/b", ".hidden", "with space", ""] {
        let err =
            fails_with(2, &["write", t, "--input", input.to_str().unwrap(), "--writer-id", bad, "--checkpoint", "3"]);
        assert!(err.contains(&format!("writer ID `{bad}`")) && err.contains("A-Z, a-z, 0-9"), "{err}");
        let err = fails_with(2, &["checkpoint", t, "--writer-id", bad]);
        assert!(err.contains(&format!("writer ID `{bad}`")), "{err}");
    }
    assert!(tributary_ok(&["timeline", t]).is_empty(), "nothing was written");
    let outside = place.file_names(|n| n.ends_with(".json") && n != "writers.json");
    assert!(outside.is_empty(), "no state file was made: {outside:?}");
    let opened = Table::open_uri(t).await.unwrap();
    let err = opened.write_client(settings("a:b")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("writer ID `a:b`: holds `:`"), "{err}");
}

/// `tributary checkpoint` prints the offset alone or as JSON; an empty
/// input still commits its checkpoint; `--expect-checkpoint` refuses to
/// write after someone else committed, before writing anything.
#[test]
fn the_checkpoint_command_and_expected_checkpoints() {
    let Some(place) = Place::new() else { return };
    let dir = place.scratch();
    let table = place.init_trips("t", &["--partition-field", "city"]);
    let t = table.uri();
    let json = |id: &str| -> Value {
        serde_json::from_str(&tributary_ok(&["checkpoint", t, "--writer-id", id, "--format", "json"])).unwrap()
    };
    assert_eq!(
        json("src"),
        serde_json::json!({"writer_id": "src", "checkpoint": null, "instant": null, "completed": null, "generation": 0})
    );
    write_cli(dir, &table, "src", 0, 10, "");
    let doc = json("src");
    assert_eq!((doc["checkpoint"].as_str(), doc["generation"].as_u64()), (Some("10"), Some(1)), "{doc}");
    let timeline = tributary_ok(&["timeline", t]);
    let (instant, completed) = (doc["instant"].as_str().unwrap(), doc["completed"].as_str().unwrap());
    assert!(timeline.lines().any(|l| l.starts_with(instant) && l.ends_with(completed)), "{doc}\n{timeline}");

    // Another run of the id commits after our read: we refuse, and write nothing.
    write_cli(dir, &table, "src", 10, 20, "10");
    let input = batch(dir, 10, 30);
    let err = fails_with(
        5,
        &[
            "write",
            t,
            "--input",
            input.to_str().unwrap(),
            "--writer-id",
            "src",
            "--checkpoint",
            "30",
            "--expect-checkpoint",
            "10",
        ],
    );
    assert!(
        err.contains("writer ID `src`: expected checkpoint `10`, but its last committed checkpoint is `20`"),
        "{err}"
    );
    assert_eq!(tributary_ok(&["timeline", t]).lines().count(), 2, "nothing was written");

    // An empty input moves the checkpoint on.
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let out =
        tributary_ok(&["write", t, "--input", empty.to_str().unwrap(), "--writer-id", "src", "--checkpoint", "25"]);
    assert!(out.contains("wrote 0 records in 1 instants"), "{out}");
    assert_eq!(tributary_ok(&["checkpoint", t, "--writer-id", "src"]), "25\n");
    assert_eq!(fares(&table).len(), 20);
}
