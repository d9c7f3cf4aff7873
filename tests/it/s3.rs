//! A table on a real S3 server (Ceph RGW, started by `.ci/s3.sh`), shared by
//! processes that have nothing else in common: several writers and the
//! compaction service at once, a lock holder killed or frozen, faults on
//! every file a commit writes, and configurations that cannot work.
//!
//! The server comes from `TRIBUTARY_TEST_S3` (`s3://bucket`) and the
//! `AWS_*` variables `.ci/s3.sh` writes; without them these tests are
//! skipped, except under `CI`, where they fail.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tributary::{Query, ReadOptions, Table, TableSettings};
use tributary_timeline::{State, TableLocation};
use tributary_writer::WriteSettings;

use crate::support::*;

/// A place on the S3 server, or `None` (skip) when none is configured
/// outside CI.
fn s3() -> Option<Place> {
    Place::on(Store::S3)
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tributary"))
}

/// Runs `tributary` in its own working folder, with the environment's
/// store variables and nothing else shared.
fn run_in(dir: &Path, args: &[&str]) -> std::process::Output {
    bin().args(args).current_dir(dir).output().unwrap()
}

fn ok_in(dir: &Path, args: &[&str]) -> String {
    let out = run_in(dir, args);
    assert!(out.status.success(), "tributary {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Trips lines `(uuid, ts, city, fare)`.
fn lines(rows: &[(String, i64, &str, f64)]) -> String {
    rows.iter()
        .map(|(u, ts, city, fare)| format!(r#"{{"uuid":"{u}","ts":{ts},"city":"{city}","fare":{fare}}}"#))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `uuid -> (ts, fare)` as `tributary read` returns the snapshot.
fn snapshot(dir: &Path, uri: &str) -> BTreeMap<String, (i64, f64)> {
    let out = ok_in(dir, &["read", uri]);
    let mut rows = BTreeMap::new();
    for line in out.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let key = v["uuid"].as_str().unwrap().to_string();
        let prev = rows.insert(key.clone(), (v["ts"].as_i64().unwrap(), v["fare"].as_f64().unwrap()));
        assert!(prev.is_none(), "key {key} read twice");
    }
    rows
}

/// The lease document of the table's instant lock.
fn lock_doc(table: &TableUri) -> Option<Value> {
    serde_json::from_slice(&table.get(".hoodie/.locks/table_lock.json")?).ok()
}

/// The process id in a lease owner (`<host>-<pid>-<n>`).
fn owner_pid(doc: &Value) -> Option<u32> {
    doc["owner"].as_str()?.rsplit('-').nth(1)?.parse().ok()
}

/// How long a test waits for a process before it calls it hung: a guard
/// against a hang only, far above what the slowest machine needs (the
/// waits it bounds take seconds); no test measures time.
const HANG_GUARD: Duration = Duration::from_secs(10 * 60);

/// Waits until the table lock's lease document satisfies `pred` and `also`
/// holds; panics after [`HANG_GUARD`].
async fn wait_for_lock(table: &TableUri, pred: impl Fn(&Value) -> bool, also: impl Fn() -> bool) {
    let started = Instant::now();
    loop {
        let doc = lock_doc(table);
        if doc.as_ref().is_some_and(&pred) && also() {
            return;
        }
        assert!(
            started.elapsed() < HANG_GUARD,
            "the lock of {} never got there in {HANG_GUARD:?} (a hang guard, far above any slow machine's need); \
             last seen: {doc:?}",
            table.uri()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether process `pid` holds the lease.
fn held_by(pid: u32) -> impl Fn(&Value) -> bool {
    move |doc| doc["expired"] == false && owner_pid(doc) == Some(pid)
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap().success();
    assert!(ok, "kill {sig} {}", child.id());
}

/// Four writer processes and the compaction service on one `s3://` table,
/// each in its own working folder, sharing nothing but the store (the lock
/// is the lease document in it): no commit is lost or doubled, every key
/// ends at its newest event, and the official reader reads the same rows
/// over `s3://`.
#[test]
fn four_writers_and_the_compaction_service_share_only_the_store() {
    let Some(place) = s3() else { return };
    let (scratch, uri) = (place.scratch(), place.init_trips("four-writers", &[]).uri().to_string());
    let service_dir = tempfile::tempdir().unwrap();
    let mut service = bin()
        .args(["compact", &uri, "--watch", "--interval", "200ms", "--time-mode", "hybrid-logical"])
        .current_dir(service_dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    const WRITERS: usize = 4;
    const COMMITS: usize = 5;
    const ROWS: usize = 20;
    let mut model: BTreeMap<String, (i64, f64)> = BTreeMap::new();
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        // Shared keys `k0..k29` with event times unique across writers and
        // out of order, plus keys of this writer alone.
        let mut rows = Vec::new();
        for i in 0..COMMITS * ROWS {
            let (key, ts) = if i % 2 == 0 {
                (format!("k{}", (i * 7 + w) % 30), ((i * 37 + w * 11) % 997) as i64 * WRITERS as i64 + w as i64)
            } else {
                (format!("w{w}-{i}"), i as i64)
            };
            let fare = (w * 1000 + i) as f64;
            // A key lives in one city, so one partition holds it.
            let city = ["oslo", "rome", "lima"][key.bytes().map(usize::from).sum::<usize>() % 3];
            let e = model.entry(key.clone()).or_insert((ts, fare));
            if ts > e.0 {
                *e = (ts, fare);
            }
            rows.push((key, ts, city, fare));
        }
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.jsonl");
        std::fs::write(&input, lines(&rows)).unwrap();
        let child = bin()
            .args(["write", &uri, "--input", input.to_str().unwrap(), "--commit-every", &ROWS.to_string()])
            .args(["--writer-id", &format!("w{w}")])
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        writers.push((child, dir));
    }
    for (child, _dir) in writers {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "a writer failed:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    service.kill().unwrap();
    let service_out = service.wait_with_output().unwrap();
    let service_err = String::from_utf8_lossy(&service_out.stderr);
    assert!(!service_err.contains("panicked") && !service_err.contains("error:"), "{service_err}");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let t = rt.block_on(Table::open_uri(&uri)).unwrap();
    let timeline = rt.block_on(t.timeline()).unwrap();
    let commits = timeline.completed().filter(|i| i.action.name() == "deltacommit").count();
    assert_eq!(commits, WRITERS * COMMITS, "every commit visible once");
    assert_eq!(snapshot(scratch, &uri), model, "every key at its newest event");
    // The official reader, over s3:// too.
    if have_official_reader() {
        let official = official_rows(Path::new(&uri), "");
        let ours: Vec<Value> = comparable(ours_with_meta(scratch, &uri));
        assert_eq!(official.len(), model.len());
        assert_eq!(official, ours, "both readers read the same rows over s3://");
    }
}

/// `tributary read --meta` of the table at `uri`.
fn ours_with_meta(dir: &Path, uri: &str) -> Vec<Value> {
    ok_in(dir, &["read", uri, "--meta", "--sort"]).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_secs(1);

/// A writer that holds the table lock for 2 s at each instant (waiting out
/// a 2 s clock skew), with a 3 s lease renewed every second.
fn slow_writer(uri: &str, dir: &Path, rows: &[(String, i64, &str, f64)]) -> Child {
    let input = dir.join("in.jsonl");
    std::fs::write(&input, lines(rows)).unwrap();
    bin()
        .args(["write", uri, "--input", input.to_str().unwrap()])
        .args(["--time-mode", "wait-for-skew", "--max-clock-skew-ms", "2000"])
        .args(["--lock-lease", "3s", "--lock-renew-interval", "1s"])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn quick_writer_args<'a>(uri: &'a str, input: &'a str) -> Vec<&'a str> {
    vec!["write", uri, "--input", input, "--time-mode", "hybrid-logical", "--lock-lease", "3s"]
        .into_iter()
        .chain(["--lock-renew-interval", "1s"])
        .collect()
}

/// A lock holder killed with SIGKILL leaves its lease behind; another
/// process takes the lock once the lease runs out, and its write completes
/// where the killed one's never does. How long the takeover took (about
/// the lease plus one renewal interval) is printed as a figure, not
/// asserted: a timed bound belongs in a benchmark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_lock_holders_lease_runs_out_and_others_go_on() {
    let Some(place) = s3() else { return };
    let table = place.init_trips("sigkill", &[]);
    let uri = table.uri();
    let a_dir = tempfile::tempdir().unwrap();
    let mut a = slow_writer(uri, a_dir.path(), &[("a".into(), 1, "oslo", 1.0)]);
    let a_pid = a.id();
    wait_for_lock(&table, held_by(a_pid), || true).await;
    signal(&a, "-KILL");
    let killed = Instant::now();
    a.wait().unwrap();

    let b_dir = tempfile::tempdir().unwrap();
    let input = b_dir.path().join("in.jsonl");
    std::fs::write(&input, lines(&[("b".into(), 2, "rome", 2.0)])).unwrap();
    let b = bin()
        .args(quick_writer_args(uri, input.to_str().unwrap()))
        .current_dir(b_dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // b holds the lock only for moments: any owner but a means b took it.
    wait_for_lock(&table, |doc| owner_pid(doc) != Some(a_pid), || true).await;
    let resumed = killed.elapsed();
    let out = b.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    println!("lock taken over {resumed:?} after SIGKILL (lease {LEASE:?}, renewal {RENEW:?})");
    assert_eq!(snapshot(place.scratch(), uri).keys().collect::<Vec<_>>(), ["b"], "a's write never completed");
}

/// A holder frozen (SIGSTOP) until its lease is taken over, then thawed,
/// fails its commit with a clear error, and nothing of it becomes visible.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_holder_is_fenced_when_it_thaws() {
    let Some(place) = s3() else { return };
    let table = place.init_trips("sigstop", &[]);
    let uri = table.uri();
    let a_dir = tempfile::tempdir().unwrap();
    let a = slow_writer(uri, a_dir.path(), &[("a".into(), 1, "oslo", 1.0)]);
    // Freeze `a` while it holds the lock to complete its commit: its data
    // is written (a log file exists) and it holds the lock again.
    let has_log = || !table.file_names(is_log).is_empty();
    wait_for_lock(&table, held_by(a.id()), has_log).await;
    signal(&a, "-STOP");

    let b_dir = tempfile::tempdir().unwrap();
    let input = b_dir.path().join("in.jsonl");
    std::fs::write(&input, lines(&[("b".into(), 2, "rome", 2.0)])).unwrap();
    let out = run_in(b_dir.path(), &quick_writer_args(uri, input.to_str().unwrap()));
    assert!(out.status.success(), "b takes the lock over and commits: {}", String::from_utf8_lossy(&out.stderr));

    signal(&a, "-CONT");
    let out = a.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "a conflict: {stderr}");
    assert!(stderr.contains("lost the table lock") && stderr.contains("taken over"), "{stderr}");
    assert_eq!(snapshot(place.scratch(), uri).keys().collect::<Vec<_>>(), ["b"], "nothing of a is visible");
    let t = Table::open_uri(uri).await.unwrap();
    let timeline = t.timeline().await.unwrap();
    assert_eq!(timeline.completed().count(), 1, "only b's commit completed: {:?}", timeline.instants());
    assert!(
        timeline.instants().any(|i| i.state == State::Inflight),
        "a's write stays inflight, for recovery to roll back"
    );
}

/// Picks puts by their path.
type Picks = fn(&str) -> bool;

/// Which files a commit writes, by the paths of their puts.
const KINDS: &[(&str, Picks)] = &[
    ("requested instant", |p| p.ends_with(".deltacommit.requested")),
    ("inflight instant", |p| p.ends_with(".deltacommit.inflight")),
    ("heartbeat", |p| p.contains("/.heartbeat/")),
    ("partition metadata", |p| p.ends_with(".hoodie_partition_metadata")),
    ("marker", |p| p.contains(".marker.")),
    ("log file", |p| p.contains(".log.") && !p.contains(".marker.")),
    ("writer state", |p| p.contains("/.tributary/writers/")),
    ("lock document", |p| p.contains("/.locks/")),
    ("completed instant", |p| p.ends_with(".deltacommit") && p.contains('_')),
];

/// A put of every kind of file a commit writes fails, stalls, or succeeds
/// while reporting a failure: the table stays readable, and the commit is
/// visible exactly once when it returned success, not at all when it
/// returned an error. The next commit then succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_on_every_file_a_commit_writes_leave_it_visible_once_or_not_at_all() {
    let Some(place) = s3() else { return };
    let settings = TableSettings {
        lock_lease: Duration::from_secs(2),
        lock_renew_interval: Duration::from_millis(500),
        ..hybrid()
    };
    let mut outcomes = Vec::new();
    for (kind, picks) in KINDS {
        for fault in [Fault::Fail, Fault::Slow(Duration::from_millis(300)), Fault::LostAnswer] {
            let name = format!("{}-{fault:?}", kind.replace(' ', "-")).replace(['(', ')', ' '], "");
            let healthy = place.table(&name).location();
            let options = fares_options();
            Table::builder(healthy.clone()).with_settings(settings.clone()).create(options).await.unwrap();
            let store = Arc::new(FaultStore::once(healthy.store.clone(), fault, *picks));
            let faulty = Table::builder(TableLocation::new(store.clone(), healthy.root.clone()))
                .with_settings(settings.clone())
                .open()
                .await
                .unwrap();
            let rows = [("a", 1, 1.0), ("b", 1, 2.0)];
            let result = async {
                let client = faulty
                    .write_client(WriteSettings { writer_id: "w".into(), ..Default::default() })
                    .await
                    .map_err(|e| e.to_string())?;
                client.register().await.map_err(|e| e.to_string())?;
                let mut c = client.start_commit().await.map_err(|e| e.to_string())?;
                c.write_batch(&oslo_batch(&rows)).await.map_err(|e| e.to_string())?;
                c.commit_with_checkpoint(Some("1".into())).await.map_err(|e| e.to_string())
            }
            .await;
            assert_eq!(store.hit().len(), 1, "{kind}, {fault:?}: the fault met one put");
            let t = Table::builder(healthy.clone()).with_settings(settings.clone()).open().await.unwrap();
            let visible = fares(&t).await;
            let completed = t.timeline().await.unwrap().completed().count();
            match &result {
                Ok(_) => {
                    assert_eq!(visible, vec![("a".into(), 1.0), ("b".into(), 2.0)], "{kind}, {fault:?}");
                    assert_eq!(completed, 1, "{kind}, {fault:?}");
                }
                Err(e) => {
                    assert!(visible.is_empty(), "{kind}, {fault:?}: failed with {e}, yet visible: {visible:?}");
                    assert_eq!(completed, 0, "{kind}, {fault:?}: failed with {e}");
                }
            }
            // The table is not wedged: a healthy writer commits next.
            let client =
                t.write_client(WriteSettings { writer_id: "next".into(), ..Default::default() }).await.unwrap();
            let mut c = client.start_commit().await.unwrap();
            c.write_batch(&oslo_batch(&[("a", 2, 10.0)])).await.unwrap();
            c.commit().await.unwrap();
            let expected = if result.is_ok() { vec![("a", 10.0), ("b", 2.0)] } else { vec![("a", 10.0)] };
            let expected: Vec<(String, f64)> = expected.into_iter().map(|(k, f)| (k.to_string(), f)).collect();
            assert_eq!(fares(&t).await, expected, "{kind}, {fault:?}");
            outcomes.push(format!("{kind} / {fault:?}: {}", if result.is_ok() { "committed" } else { "failed" }));
        }
    }
    println!("{}", outcomes.join("\n"));
}

async fn fares(t: &Table) -> Vec<(String, f64)> {
    let b = t.read(&ReadOptions { query: Query::Snapshot, ..Default::default() }).await.unwrap();
    let mut rows: Vec<(String, f64)> = fares_rows(&b).into_iter().map(|(uuid, _, fare)| (uuid, fare)).collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows
}

/// Configurations that cannot work fail (rather than retry forever), with
/// an error naming the URI (or the endpoint it resolves to) and the cause.
#[test]
fn bad_configurations_fail_fast_naming_the_uri_and_the_cause() {
    let Some(place) = s3() else { return };
    let uri = place.table("bad-config").uri().to_string();
    let bucket = uri.trim_start_matches("s3://").split('/').next().unwrap().to_string();
    let dir = place.scratch();
    let bucket = bucket.as_str();
    // What, the arguments, what the error must name, extra environment.
    type Case<'a> = (&'a str, Vec<String>, Vec<&'a str>, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        ("unknown scheme", vec!["read".into(), "hdfs://nn/t".into()], vec!["hdfs://nn/t", "unknown scheme"], vec![]),
        (
            "missing bucket",
            vec!["read".into(), "s3://no-such-bucket/t".into()],
            vec!["s3://no-such-bucket/t", "NoSuchBucket"],
            vec![],
        ),
        (
            "bad credentials",
            vec!["read".into(), uri.clone()],
            vec![bucket, "403"],
            vec![("AWS_SECRET_ACCESS_KEY", "wrong")],
        ),
        (
            "unreachable endpoint",
            vec!["read".into(), uri.clone(), "--store-option".into(), "endpoint=http://127.0.0.1:9".into()],
            vec!["127.0.0.1:9", "Connection refused"],
            vec![],
        ),
        (
            "unknown store option",
            vec!["read".into(), uri.clone(), "--store-option".into(), "endpiont=x".into()],
            vec!["endpiont", "unknown store option"],
            vec![],
        ),
    ];
    for (what, args, names, env) in cases {
        let started = Instant::now();
        let out = output_unless_hung(bin().args(&args).envs(env).current_dir(dir), what);
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(matches!(out.status.code(), Some(2 | 4)), "{what}: exit {:?}: {stderr}", out.status.code());
        for n in &names {
            assert!(stderr.contains(n), "{what}: the error names `{n}`: {stderr}");
        }
        println!("{what}: {took:?}: {}", stderr.trim());
    }
}

/// The output of `cmd`, which must exit: killed and failed after
/// [`HANG_GUARD`], a bound on a hang, not on speed.
fn output_unless_hung(cmd: &mut Command, what: &str) -> std::process::Output {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > HANG_GUARD {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what}: still running after {HANG_GUARD:?} (a hang guard, far above any slow machine's need): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}
