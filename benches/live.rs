//! Commit latency of concurrent writer processes with the compaction service
//! running beside them (`tributary compact --watch`), then without it.
//!
//! `cargo bench --bench live`. Prints the p50 and p99 commit latency of
//! each phase and the number of compactions; it measures, it does not
//! assert a speed (the test `live::writers_commit_while_the_compaction_service_runs`
//! checks the behaviour). The bench re-runs its own binary as the writer
//! processes.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::StdRng;
use tributary::{Table, TableSettings, TimeSettings};
use tributary_timeline::TimeMode;
use tributary_writer::WriteSettings;

#[path = "../tests/it/support/live_events.rs"]
mod live_events;

const CHILD_ENV: &str = "TRIBUTARY_BENCH_LIVE_WRITER";
const WRITERS: usize = 3;
const WITH_COMPACTOR: Duration = Duration::from_secs(60);
const WITHOUT_COMPACTOR: Duration = Duration::from_secs(15);

/// The writer side, in a child process: small commits until the deadline.
/// Each commit latency (`L <µs>`) and committed event (`E key ts fare`) goes
/// to the output file.
fn writer(spec: &str) {
    let f: Vec<&str> = spec.split('|').collect();
    let [table, writer, secs, out] = f.as_slice() else { panic!("bad child spec {spec}") };
    let writer: i64 = writer.parse().expect("writer number");
    let secs: u64 = secs.parse().expect("seconds");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        let time = TimeSettings { mode: Some(TimeMode::HybridLogical), ..Default::default() };
        let t = Table::builder_local(table)
            .with_settings(TableSettings { time, ..Default::default() })
            .open()
            .await
            .expect("open the table");
        let settings = WriteSettings { tasks: 2, writer_id: format!("w{writer}"), ..Default::default() };
        let client = t.write_client(settings).await.expect("write client");
        let schema = live_events::arrow_schema();
        let mut rng = StdRng::seed_from_u64(writer as u64);
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut lines = Vec::new();
        while Instant::now() < deadline {
            let events = live_events::next_events(&mut rng, writer);
            let batch = live_events::batch(&schema, &events, writer);
            let started = Instant::now();
            let mut commit = client.start_commit().await.expect("start commit");
            commit.write_batch(&batch).await.expect("write");
            commit.commit().await.expect("commit");
            lines.push(format!("L {}", started.elapsed().as_micros()));
            for e in &events {
                lines.push(live_events::event_line(e));
            }
        }
        std::fs::write(out, lines.join("\n")).expect("write the output");
    });
}

fn run_writers(table: &Path, dir: &Path, phase: &str, secs: u64) -> Vec<String> {
    let exe = std::env::current_exe().expect("path of this bench binary");
    let children: Vec<_> = (0..WRITERS)
        .map(|w| {
            let out = dir.join(format!("{phase}-{w}.txt"));
            let child = Command::new(&exe)
                .env(CHILD_ENV, format!("{}|{w}|{secs}|{}", table.display(), out.display()))
                .stdout(Stdio::null())
                .spawn()
                .expect("start a writer");
            (child, out)
        })
        .collect();
    let mut lines = Vec::new();
    for (mut child, out) in children {
        assert!(child.wait().expect("wait for a writer").success(), "a writer failed");
        lines.extend(std::fs::read_to_string(out).expect("writer output").lines().map(String::from));
    }
    lines
}

fn percentiles(lines: &[String]) -> (f64, f64, usize) {
    let mut l: Vec<u64> = lines.iter().filter_map(|x| x.strip_prefix("L ")?.parse().ok()).collect();
    l.sort_unstable();
    if l.is_empty() {
        return (f64::NAN, f64::NAN, 0);
    }
    let at = |q: f64| l[((l.len() as f64 * q) as usize).min(l.len() - 1)] as f64 / 1000.0;
    (at(0.5), at(0.99), l.len())
}

fn tributary(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_tributary")).args(args).output().expect("run tributary");
    assert!(out.status.success(), "tributary {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn main() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        writer(&spec);
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let schema = dir.path().join("trips.avsc");
    std::fs::write(&schema, live_events::SCHEMA).expect("write the schema");
    let table = dir.path().join("t");
    let t = table.to_str().expect("UTF-8 path");
    tributary(&[
        "init",
        t,
        "--schema",
        schema.to_str().expect("UTF-8 path"),
        "--record-key",
        "uuid",
        "--ordering-field",
        "ts",
        "--partition-field",
        "city",
        "--buckets",
        "4",
    ]);
    let mut compactor = Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args(["compact", t, "--watch", "--interval", "1s", "--time-mode", "hybrid-logical"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the compaction service");
    let on = run_writers(&table, dir.path(), "on", WITH_COMPACTOR.as_secs());
    compactor.kill().expect("stop the compaction service");
    let compactor_out = compactor.wait_with_output().expect("compaction service output");
    let rounds = String::from_utf8_lossy(&compactor_out.stdout).matches("compaction ").count();
    let off = run_writers(&table, dir.path(), "off", WITHOUT_COMPACTOR.as_secs());
    let (p50_on, p99_on, n_on) = percentiles(&on);
    let (p50_off, p99_off, n_off) = percentiles(&off);
    println!(
        "commit latency with the compactor: p50 {p50_on:.1} ms, p99 {p99_on:.1} ms over {n_on} commits \
         ({rounds} compactions); without: p50 {p50_off:.1} ms, p99 {p99_off:.1} ms over {n_off} commits"
    );
    // A sanity check of the run itself: the rows read back are the newest
    // event per key.
    let mut model: BTreeMap<String, i64> = BTreeMap::new();
    for l in on.iter().chain(&off) {
        let Some(e) = l.strip_prefix("E ") else { continue };
        let f: Vec<&str> = e.split(' ').collect();
        let ts: i64 = f[1].parse().expect("event time");
        if model.get(f[0]).is_none_or(|t| ts > *t) {
            model.insert(f[0].to_string(), ts);
        }
    }
    let rows = tributary(&["read", t, "--format", "jsonl"]);
    let mut got: BTreeMap<String, i64> = BTreeMap::new();
    for l in rows.lines() {
        let r: serde_json::Value = serde_json::from_str(l).expect("a JSON row");
        got.insert(r["uuid"].as_str().unwrap_or_default().to_string(), r["ts"].as_i64().unwrap_or_default());
    }
    assert_eq!(got, model, "the table holds the newest event per key");
}
