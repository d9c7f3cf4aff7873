//! Writers and the compaction service at once, as separate processes: a
//! writer's commit starts and completes while a compaction it saw planned
//! is still pending (writers do not wait for the compactor), and what they
//! wrote converges. Commit latencies
//! with and without the service are figures, not assertions: see
//! `benches/live.rs`. On the store `TRIBUTARY_TEST_STORE` names (see
//! [`Place`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::{Value, json};
use tributary::{Table, TableSettings, TimeSettings};
use tributary_timeline::TimeMode;
use tributary_writer::WriteSettings;

use crate::support::*;

const CHILD_ENV: &str = "TRIBUTARY_LIVE_WRITER";
const WRITERS: usize = 3;
/// A guard against a hang only, far above what a slow machine needs: the
/// run ends as soon as a commit has run from start to end while a
/// compaction was pending (seconds), and no test measures time.
const HANG_GUARD: Duration = Duration::from_secs(10 * 60);

/// The writer side, run only as a child process of
/// `writers_commit_while_the_compaction_service_runs` (`--ignored --exact`):
/// small commits until the stop file exists. Each committed event goes to
/// the output file; each commit that ran from start to end while a
/// compaction stayed pending leaves a file `<compaction>-w<writer>` in the
/// overlaps folder.
#[test]
#[ignore = "a child process of live::writers_commit_while_the_compaction_service_runs"]
fn live_writer_process() {
    let spec = std::env::var(CHILD_ENV).expect("run only by the parent test, which sets TRIBUTARY_LIVE_WRITER");
    let f: Vec<&str> = spec.split('|').collect();
    let [table, writer, stop, overlaps, out] = f.as_slice() else { panic!("bad child spec {spec}") };
    let writer: i64 = writer.parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let time = TimeSettings { mode: Some(TimeMode::HybridLogical), ..Default::default() };
        let t = Table::builder_uri(*table)
            .with_settings(TableSettings { time, ..Default::default() })
            .open()
            .await
            .unwrap();
        let settings = WriteSettings { tasks: 2, writer_id: format!("w{writer}"), ..Default::default() };
        let client = t.write_client(settings).await.unwrap();
        let schema = live_events::arrow_schema();
        let mut rng = StdRng::seed_from_u64(writer as u64);
        let table = TableUri::parse(table);
        let mut lines = Vec::new();
        while !Path::new(stop).exists() {
            // Event times are unique across writers (residue = writer id)
            // and arrive in random order.
            let events = live_events::next_events(&mut rng, writer);
            let batch = live_events::batch(&schema, &events, writer);
            let pending_before = pending_compactions(&table);
            let mut commit = client.start_commit().await.unwrap();
            commit.write_batch(&batch).await.unwrap();
            commit.commit().await.unwrap();
            // A compaction pending before this commit started and still
            // pending after it completed: the commit did not wait for it.
            let pending_after = pending_compactions(&table);
            for c in pending_before.intersection(&pending_after) {
                std::fs::write(Path::new(overlaps).join(format!("{c}-w{writer}")), "").unwrap();
            }
            for e in &events {
                lines.push(live_events::event_line(e));
            }
        }
        std::fs::write(out, lines.join("\n")).unwrap();
    });
}

/// Compactions planned and not completed, as the timeline folder shows
/// them: `<C>.compaction.requested` without a completed `<C>_<c>.commit`.
fn pending_compactions(table: &TableUri) -> BTreeSet<String> {
    let names = table.file_names_under(".hoodie/timeline", |_| true);
    let completed: BTreeSet<&str> =
        names.iter().filter_map(|n| n.strip_suffix(".commit")?.split_once('_').map(|(c, _)| c)).collect();
    names
        .iter()
        .filter_map(|n| n.strip_suffix(".compaction.requested"))
        .filter(|c| !completed.contains(c))
        .map(String::from)
        .collect()
}

/// The overlaps the writers reported: `(compaction, writer)`.
fn overlaps(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> =
        std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    out.sort();
    out
}

#[test]
fn writers_commit_while_the_compaction_service_runs() {
    let Some(place) = Place::new() else { return };
    let dir = place.scratch();
    let table = place.init_trips("t", &["--partition-field", "city", "--buckets", "4"]);
    let t = table.uri();
    let stop = dir.join("stop");
    let overlap_dir = dir.join("overlaps");
    std::fs::create_dir(&overlap_dir).unwrap();
    let mut compactor = std::process::Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args(["compact", t, "--watch", "--interval", "200ms", "--time-mode", "hybrid-logical"])
        .args(SHORT_LEASE)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let out = dir.join(format!("writer-{w}.txt"));
            let child = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--ignored", "--exact", "live::live_writer_process", "--nocapture", "--test-threads=1"])
                .env(CHILD_ENV, format!("{t}|{w}|{}|{}|{}", stop.display(), overlap_dir.display(), out.display()))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            (child, out)
        })
        .collect();
    // Until a writer's commit has run while a compaction was pending.
    let deadline = Instant::now() + HANG_GUARD;
    while overlaps(&overlap_dir).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen = overlaps(&overlap_dir);
    assert!(
        !seen.is_empty(),
        "no writer's commit ran from start to end while a compaction was pending, in {HANG_GUARD:?} (a hang guard)"
    );
    // Kill the service (SIGKILL) as soon as a compaction is pending, so it
    // likely dies mid-round; the final compaction below finishes what it left.
    while pending_compactions(&table).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    compactor.kill().unwrap();
    compactor.wait().unwrap();
    eprintln!("compactions pending when the service died: {:?}", pending_compactions(&table));
    std::fs::write(&stop, "").unwrap();
    let mut events = Vec::new();
    for (mut child, out) in writers {
        assert!(child.wait().unwrap().success(), "a writer failed");
        events.extend(std::fs::read_to_string(out).unwrap().lines().map(String::from));
    }
    eprintln!("{} commits ran while a compaction was pending: {seen:?}", seen.len());

    // The model: per key, the event with the largest (unique) event time.
    let mut model: BTreeMap<String, (i64, f64)> = BTreeMap::new();
    for l in &events {
        let Some(e) = l.strip_prefix("E ") else { continue };
        let f: Vec<&str> = e.split(' ').collect();
        let (ts, fare) = (f[1].parse::<i64>().unwrap(), f[2].parse::<f64>().unwrap());
        if model.get(f[0]).is_none_or(|(t, _)| ts > *t) {
            model.insert(f[0].to_string(), (ts, fare));
        }
    }
    assert!(!model.is_empty(), "the writers committed events");
    let want: Vec<Value> = model.iter().map(|(k, (ts, fare))| json!([k, ts, fare])).collect();
    let ours = |extra: &[&str]| -> Vec<Value> {
        let mut args = vec!["read", t, "--format", "jsonl"];
        args.extend_from_slice(extra);
        let mut rows: Vec<Value> = tributary_ok(&args)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|r| json!([r["uuid"], r["ts"], r["fare"].as_f64()]))
            .collect();
        rows.sort_by(|a, b| a[0].as_str().cmp(&b[0].as_str()));
        rows
    };
    assert_eq!(ours(&[]), want, "snapshot after the live run");

    // A final compaction finishes any plan the killed service left and
    // compacts everything; base files then hold the whole snapshot.
    tributary_ok(&["compact", t, "--time-mode", "hybrid-logical"]);
    assert_eq!(ours(&[]), want, "snapshot after the final compaction");
    assert_eq!(ours(&["--query", "read-optimized"]), want, "read-optimized equals the snapshot");
    if have_official_reader() {
        let rows = assert_same_rows(&table, "after the final compaction");
        let mut official: Vec<Value> = rows.iter().map(|r| json!([r["uuid"], r["ts"], r["fare"].as_f64()])).collect();
        official.sort_by(|a, b| a[0].as_str().cmp(&b[0].as_str()));
        assert_eq!(official, want, "the official reader after compaction");
    }
}
