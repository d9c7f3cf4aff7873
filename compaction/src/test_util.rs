//! Shared test fixtures of the compaction crate.

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStoreExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use tributary_format::CompactionPlan;
use tributary_timeline::{
    Action, BucketHash, BucketSpec, InProcessLock, Instant, InstantTime, ManualClock, NewTableConfig, State,
    TableConfig, TableLocation, TimeGenerator, TimeMode, Timeline, TimelineFolder, ensure_partition, nbcc_file_id,
    partition_file,
};

/// An empty partitioned table (`city`, 2 buckets) in an in-memory store.
pub(crate) async fn memory_table() -> (TableLocation, TableConfig) {
    let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("warehouse/t"));
    let config = TableConfig::new_table(&NewTableConfig {
        partition_field: Some("city".into()),
        bucket: BucketSpec { num_buckets: 2, hash: BucketHash::Murmur3 },
        ..NewTableConfig::new("t", "id", "ts", "{}")
    });
    let text = config.to_properties_text("test").expect("properties");
    loc.create(&tributary_timeline::properties_file(&loc.root), text.into_bytes()).await.expect("create properties");
    (loc, config)
}

/// A table in memory with its own instant generator.
pub(crate) struct Table {
    pub(crate) loc: TableLocation,
    pub(crate) config: TableConfig,
    pub(crate) time: TimeGenerator,
}

/// [`memory_table`] with the partition [`PARTITION`] and a manual clock.
pub(crate) async fn table() -> Table {
    let (loc, config) = crate::test_util::memory_table().await;
    ensure_partition(&loc, PARTITION, &ts(1)).await.unwrap();
    // 2025-01-02: clean instants come after every hand-made instant.
    let clock = Arc::new(ManualClock::new(1_735_776_000_000));
    let time = TimeGenerator::new(TimeMode::HybridLogical, Duration::ZERO, clock, Arc::new(InProcessLock::new()));
    Table { loc, config, time }
}

/// The partition the hand-made files go in.
pub(crate) const PARTITION: &str = "city=paris";

/// The hand-made instant time `n` (milliseconds into 2025-01-01).
pub(crate) fn ts(n: u32) -> InstantTime {
    InstantTime::parse(&format!("20250101000000{n:03}")).unwrap()
}

/// The log file of `bucket` written by the delta commit at `t`.
pub(crate) fn log(bucket: u32, t: u32) -> String {
    format!(".{}_{}.log.1_0-1-0", nbcc_file_id(bucket), ts(t))
}

/// The base file of `bucket` written by the compaction at `t`.
pub(crate) fn base(bucket: u32, t: u32) -> String {
    format!("{}_0-1-0_{}.parquet", nbcc_file_id(bucket), ts(t))
}

/// Creates the data file `name` in [`PARTITION`].
pub(crate) async fn put(tb: &Table, name: &str) {
    tb.loc.create(&tb.loc.join(&partition_file(PARTITION, name)), b"data".to_vec()).await.unwrap();
}

/// Whether the data file `name` exists in [`PARTITION`].
pub(crate) async fn exists(tb: &Table, name: &str) -> bool {
    tb.loc.store.head(&tb.loc.join(&partition_file(PARTITION, name))).await.is_ok()
}

/// The table's timeline folder.
pub(crate) fn writer(tb: &Table) -> TimelineFolder {
    TimelineFolder::new(&tb.loc, &tb.config)
}

/// A delta commit requested at `t`, completed at `c` (if any), writing a
/// log in each of `buckets`.
pub(crate) async fn delta_commit(tb: &Table, t: u32, c: Option<u32>, buckets: &[u32]) {
    let mut i = Instant::requested(ts(t), Action::DeltaCommit);
    writer(tb).create(&i, State::Requested, Vec::new()).await.unwrap();
    writer(tb).create(&i, State::Inflight, Vec::new()).await.unwrap();
    for &b in buckets {
        put(tb, &log(b, t)).await;
    }
    if let Some(c) = c {
        i.completed = Some(ts(c));
        writer(tb).create(&i, State::Completed, Vec::new()).await.unwrap();
    }
}

/// A compaction of bucket 0 requested at `k`, completed at `c`.
pub(crate) async fn compaction(tb: &Table, k: u32, c: u32) {
    let mut i = Instant::requested(ts(k), Action::Compaction);
    let plan = CompactionPlan::default().to_avro_container().unwrap();
    writer(tb).create(&i, State::Requested, plan).await.unwrap();
    writer(tb).create(&i, State::Inflight, Vec::new()).await.unwrap();
    put(tb, &base(0, k)).await;
    i.completed = Some(ts(c));
    writer(tb).create(&i, State::Completed, Vec::new()).await.unwrap();
}

/// A replacecommit (a Java writer's insert overwrite) requested at `t` and
/// completed at `c`, replacing the file group of `bucket`.
pub(crate) async fn replace_commit(tb: &Table, t: u32, c: u32, bucket: u32) {
    let mut i = Instant::requested(ts(t), Action::ReplaceCommit);
    writer(tb).create(&i, State::Requested, Vec::new()).await.unwrap();
    writer(tb).create(&i, State::Inflight, Vec::new()).await.unwrap();
    let mut meta = tributary_format::CommitMetadata { operation_type: "INSERT_OVERWRITE".into(), ..Default::default() };
    meta.partition_to_replace_file_ids.insert(PARTITION.into(), vec![nbcc_file_id(bucket)]);
    // Our encoder has no field for the replaced groups; Java's JSON form
    // (table version 6) carries them, and readers take either.
    let json = serde_json::to_vec(&meta).unwrap();
    i.completed = Some(ts(c));
    writer(tb).create(&i, State::Completed, json).await.unwrap();
}

/// The table's timeline, loaded.
pub(crate) async fn timeline(tb: &Table) -> Timeline {
    Timeline::load(&tb.loc, &tb.config).await.unwrap()
}
