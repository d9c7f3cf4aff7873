//! A table that lives for months, compressed: one writer commits small
//! commits (4 records each, 200 keys) as fast as it can while `serve`
//! compacts, cleans and archives beside it in the same process, with the
//! metrics recorder installed. At each checkpoint it measures the table
//! as it is at that age: over the last fifth of the window before the
//! checkpoint, the commit rate (sampling time left out) and the medians of
//! ten samples, evenly spaced, of a snapshot read, compaction planning
//! (timeline and file-system view loaded, an instant taken, plan made) and
//! a timeline load, timed while the services run; at the checkpoint, the
//! active timeline's size and archiving's cost per instant. The whole
//! window's commit rate is printed beside, warm-up included, and the share
//! of the window's wall time `serve` spent in its jobs.
//!
//! A read under load costs what the logs piled up since the last
//! compaction cost, which depends on where in the services' cycle it
//! falls. So at each checkpoint the writer also pauses until `serve` has
//! run two compaction rounds, and times ten more reads and plans back to
//! back ("at rest"): what the table's age alone costs (its timeline, its
//! history, its files).
//!
//! `cargo bench --bench longevity`. Environment:
//! - `TRIBUTARY_BENCH_COMMITS`: checkpoints, default `500,5000,20000,100000`;
//! - `TRIBUTARY_BENCH_TABLE`: where the table goes, a local folder (default
//!   a temporary one) or a URI such as `s3://bucket/prefix/t` (the S3
//!   server of `.ci/s3.sh`, reached through its `AWS_*` variables);
//! - `TRIBUTARY_BENCH_SERVE=0`: no `serve` and no metrics recorder, and a
//!   table without a bound on logs per file group (nothing would compact
//!   them): the writer's throughput without services, to compare.
//!
//! It measures; it asserts only that the table stays readable and that
//! its active timeline stays bounded while `serve` runs (the test
//! `service::serve_compacts_cleans_and_archives_while_a_writer_commits`
//! checks the behaviour).

use std::time::{Duration, Instant};

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use std::sync::Arc;
use tributary::{
    CreateOptions, PlanSettings, ReadOptions, ServiceEvent, ServiceSchedule, Table, TableBuilder, TableSettings,
    TimeSettings, WriteSettings,
};
use tributary_timeline::TimeMode;

const SCHEMA: &str = r#"{"type":"record","name":"trips","fields":[
    {"name":"uuid","type":"string"},{"name":"ts","type":"long"},
    {"name":"fare","type":"double"},{"name":"city","type":"string"}]}"#;
const KEYS: u64 = 200;
const RECORDS_PER_COMMIT: u64 = 4;

fn batch(schema: &Arc<Schema>, commit: u64) -> RecordBatch {
    let first = commit * RECORDS_PER_COMMIT;
    let n = first..first + RECORDS_PER_COMMIT;
    RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from_iter_values(n.clone().map(|i| format!("k{}", i % KEYS)))),
            Arc::new(Int64Array::from_iter_values(n.clone().map(|i| i as i64))),
            Arc::new(Float64Array::from_iter_values(n.map(|i| i as f64))),
            Arc::new(StringArray::from_iter_values((0..RECORDS_PER_COMMIT).map(|_| "oslo"))),
        ],
    )
    .expect("batch")
}

fn builder(target: &str) -> TableBuilder {
    let settings = TableSettings {
        time: TimeSettings { mode: Some(TimeMode::HybridLogical), ..Default::default() },
        ..Default::default()
    };
    if target.contains("://") { Table::builder_uri(target) } else { Table::builder_local(target) }
        .with_settings(settings)
}

/// How many times, in the last fifth of each window, the writer pauses to
/// time a snapshot read, compaction planning and a timeline load.
const SAMPLES: u64 = 10;

/// The commit after which the writer times its first sample of the window
/// `from..until`, and the commits between samples: the last fifth of the
/// window, ending at its checkpoint.
fn sampling(from: u64, until: u64) -> (u64, u64) {
    let step = ((until - from) / 5 / SAMPLES).max(1);
    (until.saturating_sub(step * (SAMPLES - 1)).max(from + 1), step)
}

/// The time `f` took, in milliseconds.
async fn time_ms<F: std::future::Future<Output = ()>>(f: F) -> f64 {
    let start = Instant::now();
    f.await;
    start.elapsed().as_secs_f64() * 1000.0
}

/// The median of `samples`.
fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A window's samples: read, plan and timeline-load times.
#[derive(Default)]
struct Samples {
    read: Vec<f64>,
    plan: Vec<f64>,
    timeline: Vec<f64>,
    /// The most uncompacted logs of one file group, at each plan.
    logs: Vec<f64>,
    /// Time the writer spent sampling, left out of its commit rate.
    spent: Duration,
}

impl Samples {
    /// Times one read, one plan and one timeline load of `t` now, with
    /// `commits` made so far.
    async fn take(&mut self, t: &Table, commits: u64) {
        let start = Instant::now();
        let mut logs = 0;
        self.read.push(
            time_ms(async {
                let rows = t.read(&ReadOptions::default()).await.expect("read").num_rows();
                assert_eq!(rows as u64, KEYS.min(commits * RECORDS_PER_COMMIT));
            })
            .await,
        );
        self.plan.push(
            time_ms(async {
                let (_, view) = t.file_system_view().await.expect("view");
                let now = t.time_generator().new_instant().await.expect("instant");
                std::hint::black_box(tributary_compaction::plan(&view, &now, &PlanSettings::default()));
                logs = tributary_compaction::LogSpread::of(&view, &Default::default()).max;
            })
            .await,
        );
        self.logs.push(logs as f64);
        self.timeline.push(
            time_ms(async {
                std::hint::black_box(t.timeline().await.expect("timeline"));
            })
            .await,
        );
        self.spent += start.elapsed();
    }
}

/// Files in the active timeline folder (not its history).
async fn active_timeline_files(t: &Table) -> usize {
    let loc = t.location();
    let dir = loc.root.clone().join(".hoodie").join("timeline");
    let listed = loc.store.list_with_delimiter(Some(&dir)).await.expect("list the timeline");
    listed.objects.len()
}

impl Samples {
    /// The medians of the read, plan and timeline-load times.
    fn medians(&mut self) -> (f64, f64, f64) {
        (median(&mut self.read), median(&mut self.plan), median(&mut self.timeline))
    }
}

#[derive(Default)]
struct ServiceTally {
    archived: usize,
    archive_time: Duration,
    /// Time `serve`'s jobs took, all kinds.
    busy: Duration,
    compactions: usize,
    failures: Vec<String>,
}

fn main() {
    let checkpoints: Vec<u64> = std::env::var("TRIBUTARY_BENCH_COMMITS")
        .unwrap_or_else(|_| "500,5000,20000,100000".into())
        .split(',')
        .map(|c| c.trim().parse().expect("TRIBUTARY_BENCH_COMMITS: counts separated by `,`"))
        .collect();
    let serve_on = std::env::var("TRIBUTARY_BENCH_SERVE").map_or(true, |v| v != "0");
    let dir = tempfile::tempdir().expect("temp dir");
    let target = std::env::var("TRIBUTARY_BENCH_TABLE")
        .unwrap_or_else(|_| dir.path().join("t").to_str().expect("UTF-8 path").to_string());
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        if serve_on {
            // As `--metrics-addr` installs it, without the listener.
            let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
            metrics::set_global_recorder(recorder).expect("install the metrics recorder");
        }
        let mut options = CreateOptions::new(SCHEMA, "uuid", "ts");
        options.partition_field = Some("city".into());
        options.buckets = 4;
        if !serve_on {
            options.max_logs_per_file_group = None;
        }
        let t = builder(&target).create(options).await.expect("create the table");
        let tally = Arc::new(std::sync::Mutex::new(ServiceTally::default()));
        // Compaction rounds run, for the writer to wait on.
        let (rounds_tx, mut rounds) = tokio::sync::watch::channel(0u64);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let service = serve_on.then(|| {
            let (target, tally) = (target.clone(), tally.clone());
            let rounds_tx = rounds_tx.clone();
            tokio::spawn(async move {
                let table = builder(&target).open().await.expect("open for serve");
                // Hudi's retention and archiving bounds; services more often.
                let schedule = ServiceSchedule {
                    compact_every: Duration::from_secs(1),
                    clean_every: Some(Duration::from_secs(5)),
                    archive_every: Some(Duration::from_secs(5)),
                    ..ServiceSchedule::default()
                };
                tributary::serve(
                    &table,
                    &schedule,
                    async {
                        let _ = stopped.await;
                    },
                    |e| {
                        let mut t = tally.lock().expect("tally");
                        if let ServiceEvent::Compacted { took, .. }
                        | ServiceEvent::Cleaned { took, .. }
                        | ServiceEvent::Archived { took, .. } = &e
                        {
                            t.busy += *took;
                        }
                        match e {
                            ServiceEvent::Archived { done, took } => {
                                t.archived += done.archived.len();
                                t.archive_time += took;
                            }
                            ServiceEvent::Compacted { done, .. } => {
                                t.compactions += done.len();
                                rounds_tx.send_modify(|r| *r += 1);
                            }
                            ServiceEvent::Failed { job, error } => t.failures.push(format!("{job}: {error}")),
                            _ => {}
                        }
                    },
                )
                .await
                .expect("serve")
            })
        });
        let client = t.write_client(WriteSettings::default()).await.expect("write client");
        let schema = Arc::new(Schema::new(vec![
            Field::new("uuid", DataType::Utf8, false),
            Field::new("ts", DataType::Int64, false),
            Field::new("fare", DataType::Float64, false),
            Field::new("city", DataType::Utf8, false),
        ]));
        println!(
            "longevity: {} ({}), {RECORDS_PER_COMMIT} records per commit, {KEYS} keys",
            t.location(),
            if serve_on { "serve and metrics on" } else { "no serve, no metrics" }
        );
        println!(
            "{:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>6} {:>9} {:>9} {:>12} {:>10} {:>10}",
            "commits",
            "commits/s",
            "read ms",
            "at rest",
            "plan ms",
            "at rest",
            "timeline",
            "logs",
            "active",
            "archived",
            "archive ms/i",
            "window c/s",
            "serve busy"
        );
        let mut commit = 0u64;
        let mut busy_before = Duration::ZERO;
        for &until in &checkpoints {
            let (from, window) = (commit, Instant::now());
            let (first_sample, step) = sampling(from, until);
            // The last fifth's start: where its rate is measured from.
            let tail_from = first_sample.saturating_sub(step).max(from);
            let mut tail = Instant::now();
            let mut samples = Samples::default();
            while commit < until {
                let mut c = client.start_commit().await.expect("start commit");
                c.write_batch(&batch(&schema, commit)).await.expect("write");
                c.commit().await.expect("commit");
                commit += 1;
                if commit == tail_from {
                    tail = Instant::now();
                }
                if commit >= first_sample && (commit - first_sample).is_multiple_of(step) {
                    samples.take(&t, commit).await;
                }
            }
            let whole = (commit - from) as f64 / window.elapsed().saturating_sub(samples.spent).as_secs_f64();
            let rate = (commit - tail_from) as f64 / tail.elapsed().saturating_sub(samples.spent).as_secs_f64();
            let (read_ms, plan_ms, timeline_ms) = samples.medians();
            let logs = median(&mut samples.logs);
            let mut rest = Samples::default();
            if serve_on {
                let seen = *rounds.borrow_and_update();
                tokio::time::timeout(Duration::from_secs(60), rounds.wait_for(|r| *r >= seen + 2))
                    .await
                    .expect("serve compacts within a minute")
                    .expect("serve runs");
                for _ in 0..SAMPLES {
                    rest.take(&t, commit).await;
                }
            }
            let (rest_read, rest_plan, _) = rest.medians();
            let files = active_timeline_files(&t).await;
            let tl = t.timeline().await.expect("timeline");
            let active = tl.active().len();
            let (archived, per_instant, busy) = {
                let s = tally.lock().expect("tally");
                let per = s.archive_time.as_secs_f64() * 1000.0 / s.archived.max(1) as f64;
                // The share of the window's wall time `serve` spent in jobs.
                let busy = 100.0 * (s.busy - busy_before).as_secs_f64() / window.elapsed().as_secs_f64();
                busy_before = s.busy;
                (s.archived, per, busy)
            };
            println!(
                "{commit:>8} {rate:>10.1} {read_ms:>9.1} {rest_read:>9.1} {plan_ms:>9.1} {rest_plan:>9.1} {timeline_ms:>8.1}ms {logs:>6} {active:>9} {archived:>9} \
                 {per_instant:>12.2} {whole:>10.1} {busy:>9.0}%   ({files} files in .hoodie/timeline)"
            );
        }
        let _ = stop.send(());
        if let Some(s) = service {
            let report = s.await.expect("serve task");
            let t = tally.lock().expect("tally");
            println!(
                "serve: {} compaction rounds ({} compactions), {} cleaning, {} archiving rounds, {} failures",
                report.compactions, t.compactions, report.cleans, report.archives, report.failures
            );
            for f in t.failures.iter().take(5) {
                println!("  failed: {f}");
            }
        }
    });
}
