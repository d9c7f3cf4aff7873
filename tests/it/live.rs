//! Writers and the compaction service at once, as separate processes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tributary::{Table, TableSettings, TimeSettings};
use tributary_timeline::TimeMode;
use tributary_writer::WriteSettings;

use crate::support::*;

const CHILD_ENV: &str = "TRIBUTARY_LIVE_WRITER";
const WRITERS: usize = 3;
const WITH_COMPACTOR: Duration = Duration::from_secs(60);
const WITHOUT_COMPACTOR: Duration = Duration::from_secs(15);

/// The writer side, run in a child process: small commits until the
/// deadline. Each committed event and each commit latency goes to `out`.
#[test]
fn live_writer_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else { return };
    let f: Vec<&str> = spec.split('|').collect();
    let (table, writer, secs, out) = (f[0], f[1].parse::<i64>().unwrap(), f[2].parse::<u64>().unwrap(), f[3]);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let time = TimeSettings { mode: TimeMode::HybridLogical, ..Default::default() };
        let t = Table::builder_local(table)
            .with_settings(TableSettings { time, ..Default::default() })
            .open()
            .await
            .unwrap();
        let settings = WriteSettings { tasks: 2, writer_id: format!("w{writer}"), ..Default::default() };
        let client = t.write_client(settings).unwrap();
        let schema = Arc::new(Schema::new(vec![
            Field::new("uuid", DataType::Utf8, false),
            Field::new("ts", DataType::Int64, false),
            Field::new("rider", DataType::Utf8, true),
            Field::new("fare", DataType::Float64, false),
            Field::new("city", DataType::Utf8, false),
        ]));
        let mut rng = StdRng::seed_from_u64(writer as u64);
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut lines = Vec::new();
        while Instant::now() < deadline {
            // Event times are unique across writers (residue = writer id)
            // and arrive in random order.
            let events: Vec<(u32, i64, f64)> = (0..50)
                .map(|_| {
                    (
                        rng.random_range(0..400u32),
                        rng.random_range(1..1_000_000i64) * 4 + writer,
                        f64::from(rng.random_range(0..1000u32)),
                    )
                })
                .collect();
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![
                    Arc::new(StringArray::from_iter_values(events.iter().map(|e| format!("key-{:04}", e.0)))),
                    Arc::new(Int64Array::from_iter_values(events.iter().map(|e| e.1))),
                    Arc::new(StringArray::from_iter_values(events.iter().map(|_| format!("w{writer}")))),
                    Arc::new(Float64Array::from_iter_values(events.iter().map(|e| e.2))),
                    Arc::new(StringArray::from_iter_values(
                        events.iter().map(|e| ["paris", "rome"][(e.0 % 2) as usize]),
                    )),
                ],
            )
            .unwrap();
            let started = Instant::now();
            let mut commit = client.start_commit().await.unwrap();
            commit.write_batch(&batch).await.unwrap();
            commit.commit().await.unwrap();
            lines.push(format!("L {}", started.elapsed().as_micros()));
            for e in &events {
                lines.push(format!("E key-{:04} {} {}", e.0, e.1, e.2));
            }
        }
        std::fs::write(out, lines.join("\n")).unwrap();
    });
}

fn run_writers(table: &std::path::Path, dir: &std::path::Path, phase: &str, secs: u64) -> Vec<String> {
    let children: Vec<_> = (0..WRITERS)
        .map(|w| {
            let out = dir.join(format!("{phase}-{w}.txt"));
            let child = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "live::live_writer_process", "--nocapture", "--test-threads=1"])
                .env(CHILD_ENV, format!("{}|{w}|{secs}|{}", table.display(), out.display()))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap();
            (child, out)
        })
        .collect();
    let mut lines = Vec::new();
    for (mut child, out) in children {
        assert!(child.wait().unwrap().success(), "a writer failed");
        lines.extend(std::fs::read_to_string(out).unwrap().lines().map(String::from));
    }
    lines
}

fn percentiles(lines: &[String]) -> (f64, f64, usize) {
    let mut l: Vec<u64> = lines.iter().filter_map(|x| x.strip_prefix("L ")?.parse().ok()).collect();
    l.sort_unstable();
    let at = |q: f64| l[((l.len() as f64 * q) as usize).min(l.len() - 1)] as f64 / 1000.0;
    (at(0.5), at(0.99), l.len())
}

#[test]
fn writers_never_wait_for_the_compaction_service() {
    let dir = tempfile::tempdir().unwrap();
    let table = init_trips(dir.path(), "t", &["--partition-field", "city", "--buckets", "4"]);
    let t = table.to_str().unwrap();
    let mut compactor = std::process::Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args(["compact", t, "--watch", "--interval", "1s", "--time-mode", "hybrid-logical"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let on = run_writers(&table, dir.path(), "on", WITH_COMPACTOR.as_secs());
    compactor.kill().unwrap(); // SIGKILL, possibly mid-compaction
    let compactor_out = compactor.wait_with_output().unwrap();
    let rounds = String::from_utf8_lossy(&compactor_out.stdout).matches("compaction ").count();
    let off = run_writers(&table, dir.path(), "off", WITHOUT_COMPACTOR.as_secs());
    let (p50_on, p99_on, n_on) = percentiles(&on);
    let (p50_off, p99_off, n_off) = percentiles(&off);
    eprintln!(
        "commit latency with the compactor: p50 {p50_on:.1} ms, p99 {p99_on:.1} ms over {n_on} commits \
         ({rounds} compactions); without: p50 {p50_off:.1} ms, p99 {p99_off:.1} ms over {n_off} commits"
    );
    assert!(rounds >= 1, "the service compacted while writers ran");

    // The model: per key, the event with the largest (unique) event time.
    let mut model: BTreeMap<String, (i64, f64)> = BTreeMap::new();
    for l in on.iter().chain(&off) {
        let Some(e) = l.strip_prefix("E ") else { continue };
        let f: Vec<&str> = e.split(' ').collect();
        let (ts, fare) = (f[1].parse::<i64>().unwrap(), f[2].parse::<f64>().unwrap());
        if model.get(f[0]).is_none_or(|(t, _)| ts > *t) {
            model.insert(f[0].to_string(), (ts, fare));
        }
    }
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
        let out = python(
            "import sys, json\n\
             import pyarrow as pa\n\
             from hudi import HudiTableBuilder\n\
             t = HudiTableBuilder.from_base_uri(sys.argv[1]).build()\n\
             rows = pa.Table.from_batches(t.read()).to_pylist()\n\
             print(json.dumps(sorted([[r['uuid'], r['ts'], r['fare']] for r in rows])))",
            &[t],
        );
        let official: Vec<Value> = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(official, want, "the official reader after compaction");
    }
}
