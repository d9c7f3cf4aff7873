//! A table that lives for months, compressed: one writer commits small
//! commits (4 records each, 200 keys) as fast as it can while `serve`
//! compacts, cleans and archives beside it in the same process, with the
//! metrics recorder installed, and a sampler (a reader beside them) times
//! a snapshot read, compaction planning (timeline and file-system view
//! loaded, an instant taken, plan made) and a timeline load ten times a
//! second (less often where that would take more than a fifth of the
//! time). At each checkpoint it reports the table as it is at that age:
//! over the last fifth of the window before the checkpoint (at least its
//! last 400 commits), the commit rate and the medians of the sampler's
//! figures; at the checkpoint, the active timeline's size and archiving's
//! cost per instant. The whole window's commit rate is printed beside,
//! warm-up included, and the share of the window's wall time `serve`
//! spent in its jobs, with each job's rounds and mean time.
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

/// How often the sampler, a reader beside the writer, times a snapshot
/// read, compaction planning and a timeline load while the writer is in a
/// window's measured stretch. Ten a second spread the samples over every
/// phase of `serve`'s one-second compaction cycle.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Reads and plans timed at rest, after each window.
const REST_SAMPLES: usize = 10;

/// The fewest commits a window's measured stretch spans: at about 150
/// commits a second, two and a half compaction cycles and 25 samples.
const MIN_STRETCH: u64 = 400;

/// The commit from which the window `from..until` is measured: its last
/// fifth, or its last [`MIN_STRETCH`] commits when that is more (all of it
/// when it is shorter).
fn stretch_start(from: u64, until: u64) -> u64 {
    until.saturating_sub(((until - from) / 5).max(MIN_STRETCH)).max(from)
}

/// The median of `values`.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// One sample: a snapshot read, a plan and a timeline load, in
/// milliseconds, and the most uncompacted logs one file group held.
#[derive(Clone, Copy)]
struct Sample {
    read: f64,
    plan: f64,
    timeline: f64,
    logs: f64,
}

impl Sample {
    /// Times one read, one plan and one timeline load of `t` now, with at
    /// least `commits` made.
    async fn take(t: &Table, commits: u64) -> Self {
        let ms = |start: Instant| start.elapsed().as_secs_f64() * 1000.0;
        let start = Instant::now();
        let rows = t.read(&ReadOptions::default()).await.expect("read").num_rows() as u64;
        assert!((KEYS.min(commits * RECORDS_PER_COMMIT)..=KEYS).contains(&rows), "{rows} rows");
        let read = ms(start);
        let start = Instant::now();
        let (_, view) = t.file_system_view().await.expect("view");
        let now = t.time_generator().new_instant().await.expect("instant");
        std::hint::black_box(tributary_compaction::plan(&view, &now, &PlanSettings::default()));
        let plan = ms(start);
        let logs = tributary_compaction::LogSpread::of(&view, &Default::default()).max as f64;
        let start = Instant::now();
        std::hint::black_box(t.timeline().await.expect("timeline"));
        Self { read, plan, timeline: ms(start), logs }
    }

    /// The median of each figure of `samples`.
    fn medians(samples: &[Sample]) -> Sample {
        let of = |f: fn(&Sample) -> f64| median(samples.iter().map(f).collect());
        Sample { read: of(|s| s.read), plan: of(|s| s.plan), timeline: of(|s| s.timeline), logs: of(|s| s.logs) }
    }
}

/// The sampler's shared state: the commits made so far, and the samples
/// of the stretch being measured (`None` between stretches).
#[derive(Default)]
struct Sampling {
    committed: std::sync::atomic::AtomicU64,
    samples: std::sync::Mutex<Option<Vec<Sample>>>,
}

/// Samples `t` while `sampling` collects, until aborted: every
/// [`SAMPLE_EVERY`], or less often where a sample takes longer (on an
/// object store), so that sampling keeps to a fifth of the time.
async fn sampler(t: Table, sampling: Arc<Sampling>) {
    loop {
        let start = tokio::time::Instant::now();
        if sampling.samples.lock().expect("samples").is_some() {
            let sample = Sample::take(&t, sampling.committed.load(std::sync::atomic::Ordering::Relaxed)).await;
            if let Some(samples) = sampling.samples.lock().expect("samples").as_mut() {
                samples.push(sample);
            }
        }
        tokio::time::sleep_until(start + SAMPLE_EVERY.max(start.elapsed() * 5)).await;
    }
}

/// Files in the active timeline folder (not its history).
async fn active_timeline_files(t: &Table) -> usize {
    let loc = t.location();
    let dir = loc.root.clone().join(".hoodie").join("timeline");
    let listed = loc.store.list_with_delimiter(Some(&dir)).await.expect("list the timeline");
    listed.objects.len()
}

#[derive(Default)]
struct ServiceTally {
    archived: usize,
    archive_time: Duration,
    /// Time `serve`'s jobs took, all kinds.
    busy: Duration,
    /// Rounds run and time taken, per job: compaction, cleaning, archiving.
    jobs: [(u32, Duration); 3],
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
                            let job = match &e {
                                ServiceEvent::Compacted { .. } => 0,
                                ServiceEvent::Cleaned { .. } => 1,
                                _ => 2,
                            };
                            t.jobs[job].0 += 1;
                            t.jobs[job].1 += *took;
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
        let mut jobs_before = [(0u32, Duration::ZERO); 3];
        let sampling = Arc::new(Sampling::default());
        let sampler = tokio::spawn(sampler(t.clone(), sampling.clone()));
        for &until in &checkpoints {
            let (from, window) = (commit, Instant::now());
            let stretch_from = stretch_start(from, until);
            let mut stretch = Instant::now();
            while commit < until {
                if commit == stretch_from {
                    stretch = Instant::now();
                    *sampling.samples.lock().expect("samples") = Some(Vec::new());
                }
                let mut c = client.start_commit().await.expect("start commit");
                c.write_batch(&batch(&schema, commit)).await.expect("write");
                c.commit().await.expect("commit");
                commit += 1;
                sampling.committed.store(commit, std::sync::atomic::Ordering::Relaxed);
            }
            let whole = (commit - from) as f64 / window.elapsed().as_secs_f64();
            let rate = (commit - stretch_from) as f64 / stretch.elapsed().as_secs_f64();
            let samples = sampling.samples.lock().expect("samples").take().unwrap_or_default();
            let load = Sample::medians(&samples);
            let mut rest = Vec::new();
            if serve_on {
                let seen = *rounds.borrow_and_update();
                tokio::time::timeout(Duration::from_secs(60), rounds.wait_for(|r| *r >= seen + 2))
                    .await
                    .expect("serve compacts within a minute")
                    .expect("serve runs");
                for _ in 0..REST_SAMPLES {
                    rest.push(Sample::take(&t, commit).await);
                }
            }
            let rest = Sample::medians(&rest);
            let files = active_timeline_files(&t).await;
            let tl = t.timeline().await.expect("timeline");
            let active = tl.active().len();
            let (archived, per_instant, busy, jobs) = {
                let s = tally.lock().expect("tally");
                let per = s.archive_time.as_secs_f64() * 1000.0 / s.archived.max(1) as f64;
                // The share of the window's wall time `serve` spent in jobs.
                let busy = 100.0 * (s.busy - busy_before).as_secs_f64() / window.elapsed().as_secs_f64();
                busy_before = s.busy;
                // Each job's rounds in the window, and its mean time.
                let jobs = s.jobs.iter().zip(jobs_before).map(|(&(n, t), (n0, t0))| {
                    let rounds = n - n0;
                    format!("{rounds}×{:.0}", (t - t0).as_secs_f64() * 1000.0 / f64::from(rounds.max(1)))
                });
                let jobs = jobs.collect::<Vec<_>>().join(" ");
                jobs_before = s.jobs;
                (s.archived, per, busy, jobs)
            };
            println!(
                "{commit:>8} {rate:>10.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>8.1}ms {:>6} {active:>9} {archived:>9} \
                 {per_instant:>12.2} {whole:>10.1} {busy:>9.0}%   ({} samples; {files} files in .hoodie/timeline; \
                 compact, clean, archive: rounds×ms {jobs})",
                load.read,
                rest.read,
                load.plan,
                rest.plan,
                load.timeline,
                load.logs,
                samples.len()
            );
        }
        sampler.abort();
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
