//! Commits on an S3 server or on local disk: commits per second for one
//! table with 1, 4 and 16 concurrent writers in both TrueTime modes, how
//! long each hold of the table lock lasts, p50 and p99, and the store
//! requests per commit, by kind. Each writer has its own table handle, lock
//! and write client, as separate processes would. On S3 the lock is the
//! lease document in the bucket; on local disk it is an OS file lock.
//!
//! On an S3 server: `.ci/s3.sh start DIR && source DIR/env` (which sets
//! `TRIBUTARY_TEST_S3` and the `AWS_*` variables), then
//! `cargo bench --bench objectstore`. On local disk:
//! `TRIBUTARY_BENCH_LOCAL=DIR cargo bench --bench objectstore`, with DIR an
//! existing folder. `TRIBUTARY_BENCH_SECS` sets how long each case runs
//! (default 8); `TRIBUTARY_BENCH_MODES` the modes to run, comma-separated
//! (default `hybrid-logical,wait-for-skew`). With
//! `TRIBUTARY_BENCH_LOCK_UNRETRIED` set, the lease locks write through an
//! S3 client of their own that does not retry by itself. With
//! `TRIBUTARY_BENCH_BEGIN_NEXT` set, each commit begins its writer's next one
//! in its completion hold (`WriteSettings::begin_next`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use async_trait::async_trait;
use tributary::{CreateOptions, Table, TableSettings, TimeSettings};
use tributary_timeline::{CountingStore, Requests};
use tributary_timeline::{
    Fence, FileLock, LeaseLock, LeaseSettings, LockGuard, LockProvider, SystemClock, TableLocation, TimeMode,
};
use tributary_writer::WriteSettings;

const SCHEMA: &str = r#"{"type":"record","name":"trips","fields":[
    {"name":"uuid","type":"string"},{"name":"ts","type":"long"},{"name":"fare","type":"double"}]}"#;
const ROWS: usize = 100;

/// A lock that records how long each hold lasted.
#[derive(Debug)]
struct Timed {
    inner: Arc<dyn LockProvider>,
    holds: Arc<Mutex<Vec<Duration>>>,
}

struct TimedGuard {
    inner: Box<dyn LockGuard>,
    since: Instant,
    holds: Arc<Mutex<Vec<Duration>>>,
}

#[async_trait]
impl LockProvider for Timed {
    async fn acquire(&self) -> tributary_timeline::StorageResult<Box<dyn LockGuard>> {
        let inner = self.inner.acquire().await?;
        Ok(Box::new(TimedGuard { inner, since: Instant::now(), holds: self.holds.clone() }))
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn keeps_last_issued(&self) -> bool {
        self.inner.keeps_last_issued()
    }
}

#[async_trait]
impl LockGuard for TimedGuard {
    fn last_issued(&self) -> Option<i64> {
        self.inner.last_issued()
    }
    fn set_last_issued(&mut self, millis: i64) {
        self.inner.set_last_issued(millis)
    }
    fn fence(&self) -> Fence {
        self.inner.fence()
    }
    async fn release(self: Box<Self>) -> tributary_timeline::StorageResult<()> {
        let r = self.inner.release().await;
        self.holds.lock().expect("holds").push(self.since.elapsed());
        r
    }
}

fn batch(writer: usize, n: u64) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("uuid", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("fare", DataType::Float64, false),
    ]));
    let keys: Vec<String> = (0..ROWS).map(|i| format!("w{writer}-k{i}")).collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(keys)),
            Arc::new(Int64Array::from_iter_values((0..ROWS).map(|_| n as i64))),
            Arc::new(Float64Array::from_iter_values((0..ROWS).map(|i| i as f64))),
        ],
    )
    .expect("batch")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted.get(((sorted.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or_default()
}

struct Figures {
    commits_per_sec: f64,
    commit_p50: Duration,
    commit_p99: Duration,
    hold_p50: Duration,
    hold_p99: Duration,
    per_commit: Requests,
    commits: usize,
}

/// Where the bench's tables live.
enum Place {
    /// An S3 bucket URI; the lock is a lease document in it.
    S3(String),
    /// A local folder; the lock is an OS file lock on the table folder.
    Local(String),
}

async fn run(place: &Place, mode: TimeMode, writers: usize, run_for: Duration) -> Figures {
    let name = match mode {
        TimeMode::WaitForSkew => "wait",
        TimeMode::HybridLogical => "hybrid",
    };
    let base = match place {
        Place::S3(b) | Place::Local(b) => b.trim_end_matches('/'),
    };
    let uri = format!("{base}/bench-objectstore/{name}-{writers}-{}", std::process::id());
    let healthy = tributary_timeline::parse_location(&uri).expect("table URI");
    let store = Arc::new(CountingStore::new(healthy.store.clone()));
    let loc = TableLocation::new(store.clone(), healthy.root.clone());
    let settings =
        TableSettings { time: TimeSettings { mode: Some(mode), ..Default::default() }, ..Default::default() };
    let mut options = CreateOptions::new(SCHEMA, "uuid", "ts");
    options.buckets = 4;
    Table::builder(loc.clone()).with_settings(settings.clone()).create(options).await.expect("create");
    let holds = Arc::new(Mutex::new(Vec::new()));
    // The lease locks' store: the table's, or with TRIBUTARY_BENCH_LOCK_UNRETRIED
    // an S3 client of its own that never retries by itself, so that the
    // lock resolves every failed write at once by reading the document.
    let lock_store: Arc<CountingStore> = match (place, std::env::var_os("TRIBUTARY_BENCH_LOCK_UNRETRIED")) {
        (Place::S3(_), Some(_)) => {
            let no_retries = object_store::RetryConfig { max_retries: 0, ..Default::default() };
            let s3 = object_store::aws::AmazonS3Builder::from_env().with_url(uri.as_str()).with_retry(no_retries);
            Arc::new(CountingStore::new(Arc::new(s3.build().expect("the lock's S3 client"))))
        }
        _ => store.clone(),
    };
    let begin_next = std::env::var_os("TRIBUTARY_BENCH_BEGIN_NEXT").map(|_| Duration::from_secs(10));
    let mut clients = Vec::new();
    for w in 0..writers {
        let inner: Arc<dyn LockProvider> = match place {
            Place::S3(_) => Arc::new(LeaseLock::at(
                lock_store.clone(),
                tributary_timeline::lease_lock_file(&loc.root),
                format!("bench-{w}"),
                Arc::new(SystemClock),
                LeaseSettings::default(),
            )),
            Place::Local(_) => {
                Arc::new(FileLock::at(tributary_timeline::local_instant_lock_file(std::path::Path::new(&uri))))
            }
        };
        let lock = Arc::new(Timed { inner, holds: holds.clone() });
        let t = Table::builder(loc.clone()).with_settings(settings.clone()).with_lock(lock).open().await.expect("open");
        let client = t
            .write_client(WriteSettings { tasks: 1, writer_id: format!("w{w}"), begin_next, ..Default::default() })
            .await
            .expect("client");
        clients.push(client);
    }
    store.take();
    lock_store.take();
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let deadline = started + run_for;
    let mut tasks = Vec::new();
    for (w, client) in clients.into_iter().enumerate() {
        let latencies = latencies.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                let mut c = client.start_commit().await.expect("start");
                c.write_batch(&batch(w, n)).await.expect("write");
                c.commit().await.expect("commit");
                latencies.lock().expect("latencies").push(t0.elapsed());
                n += 1;
            }
            client.close().await;
        }));
    }
    for t in tasks {
        t.await.expect("writer");
    }
    let elapsed = started.elapsed();
    // When the locks share the table's store, the second take is empty.
    let requests = store.take() + lock_store.take();
    let mut lat = latencies.lock().expect("latencies").clone();
    lat.sort();
    let mut held = holds.lock().expect("holds").clone();
    held.sort();
    let commits = lat.len();
    let per = |n: usize| (n + commits / 2) / commits.max(1);
    Figures {
        commits_per_sec: commits as f64 / elapsed.as_secs_f64(),
        commit_p50: percentile(&lat, 0.5),
        commit_p99: percentile(&lat, 0.99),
        hold_p50: percentile(&held, 0.5),
        hold_p99: percentile(&held, 0.99),
        per_commit: Requests {
            gets: per(requests.gets),
            heads: per(requests.heads),
            lists: per(requests.lists),
            puts: per(requests.puts),
            deletes: per(requests.deletes),
        },
        commits,
    }
}

fn main() {
    let place = match (std::env::var("TRIBUTARY_BENCH_LOCAL"), std::env::var("TRIBUTARY_TEST_S3")) {
        (Ok(dir), _) => Place::Local(dir),
        (_, Ok(base)) => Place::S3(base),
        _ => {
            eprintln!(
                "no place for the tables: set TRIBUTARY_BENCH_LOCAL=DIR, or run `.ci/s3.sh start DIR && source \
                 DIR/env` first"
            );
            std::process::exit(2);
        }
    };
    let modes = std::env::var("TRIBUTARY_BENCH_MODES").unwrap_or_else(|_| "hybrid-logical,wait-for-skew".into());
    if let Some(bad) = modes.split(',').map(str::trim).find(|m| !["hybrid-logical", "wait-for-skew"].contains(m)) {
        eprintln!("TRIBUTARY_BENCH_MODES: unknown mode {bad:?} (hybrid-logical, wait-for-skew)");
        std::process::exit(2);
    }
    let secs = std::env::var("TRIBUTARY_BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(8);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    println!(
        "{:<15} {:>7} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}  requests per commit",
        "mode", "writers", "commits", "commits/s", "p50", "p99", "hold p50", "hold p99"
    );
    for (mode, name) in [(TimeMode::HybridLogical, "hybrid-logical"), (TimeMode::WaitForSkew, "wait-for-skew")] {
        if !modes.split(',').any(|m| m.trim() == name) {
            continue;
        }
        for writers in [1, 4, 16] {
            let f = rt.block_on(run(&place, mode, writers, Duration::from_secs(secs)));
            println!(
                "{name:<15} {writers:>7} {:>8} {:>9.1} {:>7.0}ms {:>7.0}ms {:>7.1}ms {:>7.1}ms  {}",
                f.commits,
                f.commits_per_sec,
                f.commit_p50.as_secs_f64() * 1e3,
                f.commit_p99.as_secs_f64() * 1e3,
                f.hold_p50.as_secs_f64() * 1e3,
                f.hold_p99.as_secs_f64() * 1e3,
                f.per_commit
            );
        }
    }
}
