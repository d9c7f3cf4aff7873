//! What the change feed costs, on the peers workload's shape: 1,000,000
//! rows over 200,000 keys in 16 buckets, compacted, then 40 commits of
//! 5,000 out-of-order upserts (a tenth of them late, so they change
//! nothing, and 2 % deletes).
//!
//! `cargo bench --bench changes` (`TRIBUTARY_BENCH_ROWS` sets the first
//! commit's rows, default 1,000,000, over a fifth as many keys). Writers
//! and the compactor write nothing for the feed, so the first figures are
//! the reads: the feed of all 40 commits at once, and a consumer following
//! them one window per commit. Then the same 40 commits go into a second
//! table that keeps a change log (`--change-log`), with a change-log round
//! after each commit: the writers' and the compactor's cost against the
//! first table's, the change log's cost, and its bytes per change.

#[path = "support/process.rs"]
mod process;

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tributary::{CreateOptions, InstantTime, Table, TableSettings, TimeSettings};
use tributary_compaction::CompactorSettings;
use tributary_timeline::TimeMode;
use tributary_writer::WriteSettings;

const SCHEMA: &str = r#"{"type":"record","name":"trips","fields":[
 {"name":"uuid","type":"string"},{"name":"ts","type":"long"},{"name":"rider","type":"string"},
 {"name":"driver","type":"string"},{"name":"fare","type":"double"},{"name":"tip","type":"double"},
 {"name":"distance","type":"double"},{"name":"city","type":"string"},{"name":"payment","type":"string"},
 {"name":"seats","type":"long"}]}"#;

const COMMITS: usize = 40;
const COMMIT_ROWS: usize = 5_000;

/// `rows` upserts of random keys; `late` of them with event times below
/// every earlier one, `deletes` of them deletes.
fn batch(rows: usize, keys: usize, ts: &mut i64, late: f64, deletes: f64, rng: &mut SmallRng) -> RecordBatch {
    let text = |name: &str| Field::new(name, DataType::Utf8, false);
    let float = |name: &str| Field::new(name, DataType::Float64, false);
    let schema = Arc::new(Schema::new(vec![
        text("uuid"),
        Field::new("ts", DataType::Int64, false),
        text("rider"),
        text("driver"),
        float("fare"),
        float("tip"),
        float("distance"),
        text("city"),
        text("payment"),
        Field::new("seats", DataType::Int64, false),
        Field::new("_hoodie_is_deleted", DataType::Boolean, false),
    ]));
    let times: Vec<i64> = (0..rows)
        .map(|_| {
            *ts += 1;
            if rng.random_bool(late) { rng.random_range(0..1_000) } else { *ts }
        })
        .collect();
    let floats = |rng: &mut SmallRng| -> ArrayRef {
        Arc::new(Float64Array::from_iter_values((0..rows).map(|_| rng.random_range(1.0..100.0))))
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values((0..rows).map(|_| format!("key-{:012}", rng.random_range(0..keys))))),
        Arc::new(Int64Array::from(times)),
        Arc::new(StringArray::from_iter_values((0..rows).map(|i| format!("rider-{}", i % 997)))),
        Arc::new(StringArray::from_iter_values((0..rows).map(|i| format!("driver-{}", i % 331)))),
        floats(rng),
        floats(rng),
        floats(rng),
        Arc::new(StringArray::from_iter_values((0..rows).map(|i| ["oslo", "lima", "pune"][i % 3]))),
        Arc::new(StringArray::from_iter_values((0..rows).map(|i| ["card", "cash"][i % 2]))),
        Arc::new(Int64Array::from_iter_values((0..rows).map(|i| (i % 4) as i64 + 1))),
        Arc::new(BooleanArray::from_iter((0..rows).map(|_| Some(rng.random_bool(deletes))))),
    ];
    RecordBatch::try_new(schema, columns).expect("bench setup")
}

fn main() {
    let rows: usize = std::env::var("TRIBUTARY_BENCH_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let keys = rows / 5;
    let ticks = process::clock_ticks_per_second();
    let cpu = || process::cpu_time(ticks).expect("CPU time").as_secs_f64();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("bench setup");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("bench setup");
        let t = table(&dir.path().join("t"), false).await;
        let begin = load(&t, rows).await;
        let mut data = Data::new(keys);
        let client = t.write_client(WriteSettings::default()).await.expect("bench setup");
        let (wall, used) = (Instant::now(), cpu());
        let mut ends = Vec::with_capacity(COMMITS);
        for _ in 0..COMMITS {
            ends.push(data.commit(&client).await);
        }
        let (commit_wall, commit_cpu) = (wall.elapsed().as_secs_f64(), cpu() - used);
        println!(
            "{COMMITS} commits of {COMMIT_ROWS} upserts over {rows} rows: {commit_wall:.2} s, {commit_cpu:.2} CPU-s \
             (the same with or without a consumer: nothing is written for the feed)"
        );

        let (wall, used) = (Instant::now(), cpu());
        let all = t.changes(&begin, &InstantTime::LATEST).await.expect("the feed");
        let (secs, spent) = (wall.elapsed().as_secs_f64(), cpu() - used);
        let n = all.rows.num_rows();
        let written = COMMITS * COMMIT_ROWS;
        println!(
            "the feed of all {COMMITS} commits at once: {n} changes of {written} rows written in {secs:.2} s, \
             {spent:.2} CPU-s ({:.0} k changes/s, {:.0} k changes per CPU-s)",
            n as f64 / secs / 1e3,
            n as f64 / spent / 1e3
        );

        let (wall, used) = (Instant::now(), cpu());
        let mut at = begin.clone();
        let mut followed = 0;
        for end in &ends {
            let window = t.changes(&at, end).await.expect("the feed");
            followed += window.rows.num_rows();
            at = window.end;
        }
        let (secs, spent) = (wall.elapsed().as_secs_f64(), cpu() - used);
        assert_eq!(followed, n, "the windows add up to the whole");
        println!(
            "a consumer following one window per commit: {COMMITS} windows in {secs:.2} s, {spent:.2} CPU-s \
             ({:.0} ms and {:.0} CPU-ms per window; {:.0} k changes per CPU-s)",
            secs * 1e3 / COMMITS as f64,
            spent * 1e3 / COMMITS as f64,
            n as f64 / spent / 1e3
        );
        let (wall, used) = (Instant::now(), cpu());
        t.compactor(CompactorSettings::default()).await.expect("setup").run_once().await.expect("compaction");
        let (compact_wall, compact_cpu) = (wall.elapsed().as_secs_f64(), cpu() - used);

        // The same commits into a table that keeps a change log, with a
        // change-log round after each.
        let logged = table(&dir.path().join("logged"), true).await;
        load(&logged, rows).await;
        let writer = logged.change_log_writer().await.expect("change-log writer");
        writer.run_once().await.expect("the load's change log");
        let mut data = Data::new(keys);
        let client = logged.write_client(WriteSettings::default()).await.expect("bench setup");
        let (mut write_wall, mut write_cpu, mut log_wall, mut log_cpu) = (0.0, 0.0, 0.0, 0.0);
        let (mut changes, mut bytes) = (0u64, 0u64);
        for _ in 0..COMMITS {
            let (wall, used) = (Instant::now(), cpu());
            data.commit(&client).await;
            write_wall += wall.elapsed().as_secs_f64();
            write_cpu += cpu() - used;
            let (wall, used) = (Instant::now(), cpu());
            let round = writer.run_once().await.expect("a change-log round").expect("a commit to record");
            log_wall += wall.elapsed().as_secs_f64();
            log_cpu += cpu() - used;
            changes += round.changes;
            bytes += round.bytes;
        }
        assert_eq!(changes as usize, n, "the change log holds the feed");
        let (wall, used) = (Instant::now(), cpu());
        logged.compactor(CompactorSettings::default()).await.expect("setup").run_once().await.expect("compaction");
        let (logged_compact_wall, logged_compact_cpu) = (wall.elapsed().as_secs_f64(), cpu() - used);
        println!(
            "with a change log: the {COMMITS} commits {write_wall:.2} s, {write_cpu:.2} CPU-s (without: \
             {commit_wall:.2} s, {commit_cpu:.2} CPU-s); the compaction after them {logged_compact_wall:.2} s, \
             {logged_compact_cpu:.2} CPU-s (without: {compact_wall:.2} s, {compact_cpu:.2} CPU-s)"
        );
        println!(
            "the change log, one round per commit: {changes} changes in {bytes} bytes ({:.0} bytes per change), \
             {log_wall:.2} s, {log_cpu:.2} CPU-s ({:.0} ms per round; {:.0} k changes per CPU-s)",
            bytes as f64 / changes as f64,
            log_wall * 1e3 / COMMITS as f64,
            changes as f64 / log_cpu / 1e3
        );
    });
}

/// A table of the bench's schema in `path`, 16 buckets, keeping a change
/// log or not.
async fn table(path: &std::path::Path, change_log: bool) -> Table {
    let mut o = CreateOptions::new(SCHEMA, "uuid", "ts");
    o.buckets = 16;
    o.change_log = change_log;
    let settings = TableSettings {
        time: TimeSettings { mode: Some(TimeMode::HybridLogical), ..Default::default() },
        ..Default::default()
    };
    Table::builder_local(path).with_settings(settings).create(o).await.expect("bench setup")
}

/// Loads `rows` rows over a fifth as many keys and compacts them; returns
/// the compaction's completion time.
async fn load(t: &Table, rows: usize) -> InstantTime {
    let client = t.write_client(WriteSettings::default()).await.expect("bench setup");
    let mut rng = SmallRng::seed_from_u64(7);
    let mut ts = 1_000;
    let mut c = client.start_commit().await.expect("bench setup");
    c.write_batch(&batch(rows, rows / 5, &mut ts, 0.0, 0.0, &mut rng)).await.expect("bench setup");
    c.commit().await.expect("bench setup");
    let compacted =
        t.compactor(CompactorSettings::default()).await.expect("setup").run_once().await.expect("bench setup");
    compacted.last().map(|s| s.completed.clone()).expect("a compaction")
}

/// The 40 commits' data, the same for every table.
struct Data {
    keys: usize,
    ts: i64,
    rng: SmallRng,
}

impl Data {
    fn new(keys: usize) -> Self {
        Self { keys, ts: 10_000_000, rng: SmallRng::seed_from_u64(11) }
    }

    /// Commits the next 5,000 upserts through `client`; its completion time.
    async fn commit(&mut self, client: &tributary::WriteClient) -> InstantTime {
        let mut c = client.start_commit().await.expect("bench setup");
        let rows = batch(COMMIT_ROWS, self.keys, &mut self.ts, 0.1, 0.02, &mut self.rng);
        c.write_batch(&rows).await.expect("bench setup");
        c.commit().await.expect("bench setup").completed
    }
}
