//! `tributary write` against an independent model and the official Hudi
//! reader, on the store `TRIBUTARY_TEST_STORE` names (see [`Place`]).

use std::collections::BTreeMap;
use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::support::*;

/// One trips record as written; `deleted` marks a delete.
#[derive(Debug, Clone)]
struct Event {
    uuid: String,
    ts: i64,
    rider: String,
    fare: f64,
    city: String,
    deleted: bool,
}

impl Event {
    fn json(&self) -> Value {
        let mut v =
            json!({"uuid": self.uuid, "ts": self.ts, "rider": self.rider, "fare": self.fare, "city": self.city});
        if self.deleted {
            v["_hoodie_is_deleted"] = json!(true);
        }
        v
    }
}

/// Events over `keys` keys with random (out-of-order) event times; a key
/// keeps its city so it stays in one partition. With `unique_ts`, no two
/// events share an event time, which makes the result independent of the
/// order concurrent writers commit in.
fn events(rng: &mut StdRng, n: usize, keys: usize, unique_ts: Option<&mut Vec<i64>>) -> Vec<Event> {
    let cities = ["paris", "rome", "oslo"];
    let mut pool = unique_ts;
    (0..n)
        .map(|_| {
            let k = rng.random_range(0..keys);
            let ts = match pool.as_deref_mut() {
                Some(p) => p.pop().expect("enough event times"),
                None => rng.random_range(1..500),
            };
            Event {
                uuid: format!("key-{k:04}"),
                ts,
                rider: format!("rider-{}", rng.random_range(0..1000)),
                fare: f64::from(rng.random_range(0..4000)) / 4.0,
                city: cities[k % cities.len()].to_string(),
                deleted: rng.random_bool(0.1),
            }
        })
        .collect()
}

/// The event times 1 to `n`, shuffled: a pool for [`events`].
fn distinct_times(rng: &mut StdRng, n: usize) -> Vec<i64> {
    let mut times: Vec<i64> = (1..=n as i64).collect();
    for i in (1..n).rev() {
        times.swap(i, rng.random_range(0..=i));
    }
    times
}

/// The model: per key, in write order, a version (or delete) replaces the
/// current one when its event time is at least as large.
fn model(batches: &[Vec<Event>]) -> BTreeMap<String, Event> {
    let mut state: BTreeMap<String, Event> = BTreeMap::new();
    for e in batches.iter().flatten() {
        match state.get(&e.uuid) {
            Some(cur) if e.ts < cur.ts => {}
            _ => {
                state.insert(e.uuid.clone(), e.clone());
            }
        }
    }
    state.retain(|_, e| !e.deleted);
    state
}

/// Rows as comparable JSON objects of the table columns, sorted by key.
fn normalize(rows: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = rows
        .into_iter()
        .map(|r| {
            json!({"uuid": r["uuid"], "ts": r["ts"], "rider": r["rider"], "fare": r["fare"].as_f64(), "city": r["city"]})
        })
        .collect();
    out.sort_by(|a, b| a["uuid"].as_str().cmp(&b["uuid"].as_str()));
    out
}

fn expected(model: &BTreeMap<String, Event>) -> Vec<Value> {
    normalize(model.values().map(Event::json).collect())
}

fn ours(table: &TableUri) -> Vec<Value> {
    let out = tributary_ok(&["read", table.uri(), "--format", "jsonl"]);
    normalize(out.lines().map(|l| serde_json::from_str(l).unwrap()).collect())
}

fn official(table: &TableUri) -> Vec<Value> {
    let out = python(
        &format!(
            "import sys, json\n\
             import pyarrow as pa\n\
             {OPEN_TABLE}\
             b = open_table(sys.argv[1]).read()\n\
             rows = pa.Table.from_batches(b).to_pylist() if b else []\n\
             print(json.dumps(rows))"
        ),
        &[table.uri()],
    );
    normalize(serde_json::from_str(out.trim()).unwrap())
}

fn write_file(dir: &Path, name: &str, events: &[Event]) -> std::path::PathBuf {
    let p = dir.join(name);
    let text: String = events.iter().map(|e| format!("{}\n", e.json())).collect();
    std::fs::write(&p, text).unwrap();
    p
}

/// Written, then compacted: a partitioned and an unpartitioned table of
/// version 8, and a version-9 one, read alike by Tributary, the model and
/// the official reader.
#[test]
fn oracle_partitioned_and_unpartitioned() {
    let cases = [
        ("part", &["--partition-field", "city"][..]),
        ("flat", &[][..]),
        ("v9", &["--partition-field", "city", "--table-version", "9"][..]),
    ];
    for (name, extra) in cases {
        let Some(place) = Place::new() else { return };
        let table = place.init_trips(name, &[&["--buckets", "4"][..], extra].concat());
        let mut rng = StdRng::seed_from_u64(7);
        let mut written = Vec::new();
        for c in 0..5 {
            let batch = events(&mut rng, 150, 60, None);
            let f = write_file(place.scratch(), &format!("c{c}.jsonl"), &batch);
            let out = tributary_ok(&["write", table.uri(), "--input", f.to_str().unwrap(), "--tasks", "3"]);
            assert!(out.contains("in 1 instants"), "{out}");
            written.push(batch);
        }
        let want = expected(&model(&written));
        assert!(want.len() > 20, "the workload leaves rows");
        assert_eq!(ours(&table), want, "{name}: tributary read vs model");
        if have_official_reader() {
            assert_eq!(official(&table), want, "{name}: official reader vs model");
            assert_same_rows(&table, name);
        }
        let timeline = tributary_ok(&["timeline", table.uri()]);
        assert_eq!(timeline.lines().filter(|l| l.contains("COMPLETED")).count(), 5, "{timeline}");
        let out = tributary_ok(&["compact", table.uri()]);
        assert!(out.contains(" completed "), "{name}: {out}");
        assert_eq!(ours(&table), want, "{name}: tributary read after compaction");
        if have_official_reader() {
            assert_eq!(official(&table), want, "{name}: official reader after compaction");
        }
    }
}

/// A commit's versions of a key are combined into the one the merge keeps,
/// unless `--keep-every-version`: `write` says how many records it stored,
/// and both tables read the same, by Tributary and by the official reader.
#[test]
fn write_stores_one_version_per_key_unless_told_to_keep_every_version() {
    let Some(place) = Place::new() else { return };
    let mut rng = StdRng::seed_from_u64(23);
    // Without deletes, so that every key's versions combine to one.
    let batch: Vec<Event> =
        events(&mut rng, 2_000, 150, None).into_iter().map(|e| Event { deleted: false, ..e }).collect();
    let keys = batch.iter().map(|e| e.uuid.as_str()).collect::<std::collections::BTreeSet<_>>().len();
    let f = write_file(place.scratch(), "dups.jsonl", &batch);
    let want = expected(&model(std::slice::from_ref(&batch)));
    for keep in [false, true] {
        let table = place.init_trips(if keep { "every" } else { "combined" }, &["--buckets", "2"]);
        let mut args = vec!["write", table.uri(), "--input", f.to_str().unwrap()];
        if keep {
            args.push("--keep-every-version");
        }
        let out = tributary_ok(&args);
        let stored = format!("wrote 2000 records ({keys} stored: {} were older versions", 2_000 - keys);
        assert_eq!(out.contains(&stored), !keep, "{out}");
        assert!(out.contains("wrote 2000 records"), "{out}");
        assert_eq!(ours(&table), want, "keep every version: {keep}");
        if have_official_reader() {
            assert_eq!(official(&table), want, "official reader, keep every version: {keep}");
        }
    }
}

/// A commit larger than a data block (about 1 MiB) writes each bucket's
/// rows as several blocks of one log file, and every reader takes them all,
/// in order. A key deleted and then written again in the same commit (1 in
/// 10 events here is a delete, event times often tie) keeps that order in
/// the file, so the later write wins as the model says: with every version
/// stored, and with each key's versions combined between its deletes.
#[test]
fn a_large_commit_spans_several_blocks_and_keeps_each_keys_order() {
    let Some(place) = Place::new() else { return };
    let mut rng = StdRng::seed_from_u64(11);
    let batch = events(&mut rng, 30_000, 3_000, None);
    let f = write_file(place.scratch(), "big.jsonl", &batch);
    let want = expected(&model(std::slice::from_ref(&batch)));
    for keep in [true, false] {
        let table = place.init_trips(if keep { "every" } else { "combined" }, &["--buckets", "1"]);
        let mut args = vec!["write", table.uri(), "--input", f.to_str().unwrap(), "--tasks", "1"];
        if keep {
            args.push("--keep-every-version");
        }
        tributary_ok(&args);
        let logs = table.file_paths(|n| n.contains(".log."));
        assert_eq!(logs.len(), 1, "one bucket, one flush: one log file ({logs:?})");
        let blocks = tributary_format::LogBlock::decode_all(&table.read(&logs[0]), &logs[0]).unwrap();
        let data = blocks.iter().filter(|b| b.block_type == tributary_format::BlockType::AvroData).count();
        assert!(data >= 3, "{data} data blocks");
        assert_eq!(blocks.last().map(|b| b.block_type), Some(tributary_format::BlockType::Delete));
        let differ = |got: Vec<Value>| -> Vec<(Value, Option<Value>)> {
            let got: BTreeMap<String, Value> = got.into_iter().map(|r| (r["uuid"].to_string(), r)).collect();
            let mut d: Vec<(Value, Option<Value>)> = want
                .iter()
                .filter(|w| got.get(&w["uuid"].to_string()) != Some(w))
                .map(|w| (w.clone(), got.get(&w["uuid"].to_string()).cloned()))
                .collect();
            d.truncate(3);
            d
        };
        let ours = ours(&table);
        assert_eq!(ours.len(), want.len(), "keep {keep}: tributary read vs model: {:?}", differ(ours.clone()));
        assert!(differ(ours.clone()).is_empty(), "keep {keep}: tributary read vs model: {:?}", differ(ours));
        if have_official_reader() {
            let official = official(&table);
            assert!(
                differ(official.clone()).is_empty() && official.len() == want.len(),
                "keep {keep}: official reader vs model: {:?}",
                differ(official)
            );
        }
    }
}

#[test]
fn concurrent_processes_never_fail_and_converge() {
    const PROCESSES: usize = 4;
    const COMMITS: usize = 20;
    const PER_COMMIT: usize = 40;
    let Some(place) = Place::new() else { return };
    let table = place.init_trips("t", &["--partition-field", "city", "--buckets", "8"]);
    let mut rng = StdRng::seed_from_u64(11);
    let mut times = distinct_times(&mut rng, PROCESSES * COMMITS * PER_COMMIT);
    let inputs: Vec<Vec<Event>> =
        (0..PROCESSES).map(|_| events(&mut rng, COMMITS * PER_COMMIT, 150, Some(&mut times))).collect();
    let children: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(p, evs)| {
            let f = write_file(place.scratch(), &format!("p{p}.jsonl"), evs);
            std::process::Command::new(env!("CARGO_BIN_EXE_tributary"))
                .args(["write", table.uri(), "--input", f.to_str().unwrap(), "--tasks", "4"])
                .args(["--commit-every", &PER_COMMIT.to_string(), "--writer-id", &format!("p{p}")])
                .args(["--time-mode", "hybrid-logical"])
                .output()
                .unwrap()
        })
        .collect();
    for out in &children {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "writer failed: {}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(&format!("in {COMMITS} instants")), "{stdout}");
    }
    let timeline = tributary_ok(&["timeline", table.uri()]);
    let lines: Vec<&str> = timeline.lines().collect();
    assert_eq!(lines.len(), PROCESSES * COMMITS, "one instant per commit, no retries: {timeline}");
    assert!(lines.iter().all(|l| l.contains("COMPLETED")), "{timeline}");
    let want = expected(&model(&inputs));
    assert_eq!(ours(&table), want);
    if have_official_reader() {
        assert_eq!(official(&table), want);
        assert_same_rows(&table, "after the writers");
    }
}

#[test]
fn killed_writer_leaves_exactly_the_committed_data() {
    const PER_COMMIT: usize = 200;
    const COMMITS: usize = 400;
    let Some(place) = Place::new() else { return };
    let table = place.init_trips("t", &["--partition-field", "city", "--buckets", "4"]);
    let mut rng = StdRng::seed_from_u64(3);
    let all = events(&mut rng, PER_COMMIT * COMMITS, 500, None);
    let f = write_file(place.scratch(), "big.jsonl", &all);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args(["write", table.uri(), "--input", f.to_str().unwrap(), "--tasks", "2"])
        .args(["--commit-every", &PER_COMMIT.to_string(), "--time-mode", "hybrid-logical"])
        .args(SHORT_LEASE)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Completed deltacommits only (a local store's listing leaves out the
    // staging files, `<name>#<n>`, a kill can leave beside them).
    let completed =
        || table.file_names_under(".hoodie/timeline", |n| n.contains('_') && n.ends_with(".deltacommit")).len();
    // Until 3 commits completed; the deadline only guards against a hang,
    // far above what a slow machine needs (the writer completes a commit a
    // second or faster).
    let hang_guard = std::time::Duration::from_secs(10 * 60);
    let deadline = std::time::Instant::now() + hang_guard;
    while completed() < 3 && std::time::Instant::now() < deadline {
        assert!(child.try_wait().unwrap().is_none(), "the writer exited before it was killed");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let seen = completed();
    assert!(seen >= 3, "the writer completed {seen} commits, not 3, in {hang_guard:?} (a hang guard)");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let done = completed();
    assert!(done >= seen, "{done} completed commits, {seen} before the kill");
    assert!(done < COMMITS, "the kill came before the last of the {COMMITS} commits, not after {done}");
    // The timeline shows exactly those commits completed, and at most the
    // one the kill interrupted pending.
    let timeline = tributary_ok(&["timeline", table.uri()]);
    assert_eq!(timeline.lines().filter(|l| l.contains("COMPLETED")).count(), done, "{timeline}");
    assert!(timeline.lines().filter(|l| !l.contains("COMPLETED")).count() <= 1, "{timeline}");
    let chunks: Vec<Vec<Event>> = all.chunks(PER_COMMIT).take(done).map(<[Event]>::to_vec).collect();
    let want = expected(&model(&chunks));
    assert_eq!(ours(&table), want, "exactly the {done} committed commits are visible");
    if have_official_reader() {
        assert_eq!(official(&table), want);
        assert_same_rows(&table, "after the writers");
    }
}

#[test]
fn bad_input_names_line_and_field_and_changes_nothing() {
    let Some(place) = Place::new() else { return };
    let table = place.init_trips("t", &["--partition-field", "city"]);
    let good = r#"{"uuid":"a","ts":1,"rider":"A","fare":1.5,"city":"paris"}"#;
    let f = place.scratch().join("good.jsonl");
    std::fs::write(&f, format!("{good}\n")).unwrap();
    tributary_ok(&["write", table.uri(), "--input", f.to_str().unwrap()]);
    // Every object and its bytes, but the OS lock file (which holds the last
    // time issued).
    let listing = || -> Vec<(String, bytes::Bytes)> {
        table
            .list("")
            .into_iter()
            .filter(|p| !p.starts_with(".hoodie/.aux/"))
            .map(|p| (p.clone(), table.read(&p)))
            .collect()
    };
    let before = listing();
    let cases = [
        (r#"{"uuid":"b","ts":2,"rider":"B","fare":1.5,"city":"rome""#, "line 2: malformed JSON"),
        (r#"{"ts":2,"rider":"B","fare":1.5,"city":"rome"}"#, "line 2: field `uuid`: missing record key"),
        (r#"{"uuid":"b","rider":"B","fare":1.5,"city":"rome"}"#, "line 2: field `ts`: missing ordering value"),
        (
            r#"{"uuid":"b","ts":null,"rider":"B","fare":1.5,"city":"rome"}"#,
            "line 2: field `ts`: missing ordering value",
        ),
        (r#"{"uuid":"b","ts":"late","rider":"B","fare":1.5,"city":"rome"}"#, "line 2: field `ts`: expected an integer"),
        (r#"{"uuid":"b","ts":2,"rider":"B","fare":"cheap","city":"rome"}"#, "line 2: field `fare`: expected a number"),
        (
            r#"{"uuid":"b","ts":2,"rider":"B","fare":1.5,"city":"rome","color":"red"}"#,
            "line 2: field `color`: unknown column",
        ),
    ];
    for (bad, expect) in cases {
        let f = place.scratch().join("bad.jsonl");
        std::fs::write(&f, format!("{}\n{bad}\n", good.replace("\"a\"", "\"z\""))).unwrap();
        let err = tributary_err(&["write", table.uri(), "--input", f.to_str().unwrap()]);
        assert!(err.contains(expect), "expected `{expect}` in: {err}");
        assert!(err.contains("bad.jsonl"), "names the input: {err}");
        assert!(listing() == before, "the table changed after: {bad}");
    }
}

/// Input is decoded in blocks, several at a time, while earlier ones are
/// written: commits still hold exactly `--commit-every` records each, in
/// input order, across blank lines and block boundaries; a fault names its
/// line and leaves the commits before it, and nothing of its own.
#[test]
fn a_fault_keeps_the_commits_before_it_and_writes_nothing_of_its_own() {
    const PER_COMMIT: usize = 9_000;
    let Some(place) = Place::new() else { return };
    let table = place.init_trips("t", &["--partition-field", "city", "--buckets", "2"]);
    let mut rng = StdRng::seed_from_u64(11);
    // Distinct event times: which of two writes in one commit lands later
    // depends on its writer task, not on the input order.
    let mut times = distinct_times(&mut rng, 3 * PER_COMMIT);
    let all = events(&mut rng, 3 * PER_COMMIT, 3_000, Some(&mut times));
    let (mut text, mut line, mut fault_line) = (String::new(), 0, 0);
    for (i, e) in all.iter().enumerate() {
        if i % 1_000 == 7 {
            text.push('\n');
            line += 1;
        }
        if i == 2 * PER_COMMIT + 4_321 {
            text.push_str("{\"uuid\":\"key-0001\",\"ts\":\"late\",\"city\":\"paris\"}\n");
            line += 1;
            fault_line = line;
        }
        text.push_str(&format!("{}\n", e.json()));
        line += 1;
    }
    let f = place.scratch().join("blocks.jsonl");
    std::fs::write(&f, text).unwrap();
    let err = tributary_err(&[
        "write",
        table.uri(),
        "--input",
        f.to_str().unwrap(),
        "--commit-every",
        &PER_COMMIT.to_string(),
        "--time-mode",
        "hybrid-logical",
    ]);
    let expect = format!("blocks.jsonl line {fault_line}: field `ts`: expected an integer");
    assert!(err.contains(&expect) && err.contains("nothing of this commit was written"), "{expect}: {err}");
    let timeline = tributary_ok(&["timeline", table.uri()]);
    assert_eq!(timeline.lines().filter(|l| l.contains("COMPLETED")).count(), 2, "{timeline}");
    let chunks: Vec<Vec<Event>> = all.chunks(PER_COMMIT).take(2).map(<[Event]>::to_vec).collect();
    assert_eq!(ours(&table), expected(&model(&chunks)), "exactly the two commits before the fault");
}

/// A double in JSON input is stored as the nearest double to its decimal
/// text (correctly rounded), so it reads back as the same text: a parser
/// that is off by one unit in the last place changes data.
#[test]
fn json_doubles_are_stored_exactly() {
    let Some(place) = Place::new() else { return };
    let table = place.init_trips("t", &[]);
    let t = table.uri();
    let doubles =
        ["190.68485335992014", "0.9339946010589053", "842.6060005288901", "5e-324", "1.7976931348623157e308", "0.1"];
    let input = place.scratch().join("in.jsonl");
    let lines: Vec<String> = doubles
        .iter()
        .enumerate()
        .map(|(i, d)| format!(r#"{{"uuid":"k{i}","ts":1,"fare":{d},"city":"oslo"}}"#))
        .collect();
    std::fs::write(&input, lines.join("\n")).unwrap();
    tributary_ok(&["write", t, "--input", input.to_str().unwrap()]);
    let out = tributary_ok(&["read", t, "--format", "jsonl", "--sort"]);
    let read: Vec<f64> =
        out.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["fare"].as_f64().unwrap()).collect();
    let want: Vec<f64> = doubles.iter().map(|d| d.parse::<f64>().unwrap()).collect();
    assert_eq!(read, want);
}
