//! The write client's library API: Arrow input, checkpoints, abort, merge
//! modes; on the store `TRIBUTARY_TEST_STORE` names (see [`Place`]).

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, AsArray, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use tributary::{CreateOptions, Query, ReadOptions, Table};
use tributary_timeline::MergeMode;
use tributary_writer::WriteSettings;

use crate::support::{Place, hybrid, is_log, is_marker};

const SCHEMA: &str = r#"{"type":"record","name":"trips","fields":[
    {"name":"uuid","type":"string"},{"name":"ts","type":"long"},
    {"name":"fare","type":["null","double"],"default":null},{"name":"city","type":"string"}]}"#;

/// The options of the tables here: partitioned by city, 2 buckets, merging
/// by `mode`.
fn options(mode: MergeMode) -> CreateOptions {
    let mut o = CreateOptions::new(SCHEMA, "uuid", "ts");
    o.partition_field = Some("city".into());
    o.buckets = 2;
    o.merge_mode = mode;
    o
}

/// A table `t` in `place` merging by `mode`.
async fn table(place: &Place, mode: MergeMode) -> Table {
    place.table("t").builder().with_settings(hybrid()).create(options(mode)).await.unwrap()
}

fn batch(uuids: &[&str], ts: &[i64], fares: &[Option<f64>], deleted: Option<&[bool]>) -> RecordBatch {
    let mut fields = vec![
        Field::new("uuid", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, false),
        Field::new("fare", DataType::Float64, true),
        Field::new("city", DataType::Utf8, false),
    ];
    let mut cols: Vec<Arc<dyn Array>> = vec![
        Arc::new(StringArray::from(uuids.to_vec())),
        Arc::new(Int64Array::from(ts.to_vec())),
        Arc::new(Float64Array::from(fares.to_vec())),
        Arc::new(StringArray::from(vec!["oslo"; uuids.len()])),
    ];
    if let Some(d) = deleted {
        fields.push(Field::new("_hoodie_is_deleted", DataType::Boolean, false));
        cols.push(Arc::new(BooleanArray::from(d.to_vec())));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
}

async fn fares(t: &Table) -> Vec<(String, Option<f64>)> {
    let b = t.read(&ReadOptions::default()).await.unwrap();
    let u = b.column_by_name("uuid").unwrap().as_string::<i32>().clone();
    let f = b.column_by_name("fare").unwrap().as_primitive::<arrow::datatypes::Float64Type>().clone();
    (0..b.num_rows()).map(|i| (u.value(i).to_string(), (!f.is_null(i)).then(|| f.value(i)))).collect()
}

#[tokio::test]
async fn arrow_batches_merge_by_event_time() {
    let Some(place) = Place::new() else { return };
    let t = table(&place, MergeMode::EventTime).await;
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let mut c = client.start_commit().await.unwrap();
    c.write_batch(&batch(&["a", "b", "c"], &[10, 10, 10], &[Some(1.0), Some(2.0), None], None)).await.unwrap();
    c.commit().await.unwrap();
    let mut c = client.start_commit().await.unwrap();
    // a: older event, ignored; b: newer, wins; c: delete at a newer time.
    c.write_batch(&batch(&["a", "b", "c"], &[5, 11, 12], &[Some(9.0), Some(3.0), None], Some(&[false, false, true])))
        .await
        .unwrap();
    c.commit().await.unwrap();
    assert_eq!(fares(&t).await, vec![("a".into(), Some(1.0)), ("b".into(), Some(3.0))]);
    // Read-optimized sees no base files yet.
    let ro = t.read(&ReadOptions { query: Query::ReadOptimized, ..Default::default() }).await.unwrap();
    assert_eq!(ro.num_rows(), 0);
}

/// An unordered read returns the rows and columns of an ordered one, meta
/// columns or not (it reads the meta columns only when it returns them).
#[tokio::test]
async fn unordered_reads_return_the_rows_of_ordered_ones() {
    let Some(place) = Place::new() else { return };
    let t = table(&place, MergeMode::EventTime).await;
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let keys: Vec<String> = (0..40).map(|i| format!("k{:02}", (i * 7) % 40)).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    for round in 0..3_i64 {
        let mut c = client.start_commit().await.unwrap();
        let fares: Vec<Option<f64>> = (0..40).map(|i| (i % 5 != round as usize).then_some(i as f64)).collect();
        c.write_batch(&batch(&keys, &[round; 40], &fares, None)).await.unwrap();
        c.commit().await.unwrap();
    }
    for with_meta in [false, true] {
        let ordered = t.read(&ReadOptions { with_meta, ..Default::default() }).await.unwrap();
        let unordered = t.read(&ReadOptions { with_meta, unordered: true, ..Default::default() }).await.unwrap();
        assert_eq!(ordered.num_rows(), 40);
        // One partition: the ordered read is in key order.
        let by_key =
            arrow::compute::sort_to_indices(unordered.column_by_name("uuid").unwrap().as_ref(), None, None).unwrap();
        let sorted = arrow::compute::take_record_batch(&unordered, &by_key).unwrap();
        assert_eq!(sorted, ordered, "with_meta: {with_meta}");
        assert_eq!(ordered.schema().fields().iter().any(|f| f.name() == "_hoodie_record_key"), with_meta);
    }
}

#[tokio::test]
async fn commit_time_ordering_takes_the_later_write() {
    let Some(place) = Place::new() else { return };
    let t = table(&place, MergeMode::CommitTime).await;
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    for (ts, fare) in [(10, 1.0), (5, 2.0)] {
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&batch(&["a"], &[ts], &[Some(fare)], None)).await.unwrap();
        c.commit().await.unwrap();
    }
    assert_eq!(fares(&t).await, vec![("a".into(), Some(2.0))]);
}

#[tokio::test]
async fn checkpoints_survive_a_restart_per_writer() {
    let Some(place) = Place::new() else { return };
    let t = table(&place, MergeMode::EventTime).await;
    let settings = |id: &str| WriteSettings { writer_id: id.into(), ..Default::default() };
    let a = t.write_client(settings("orders")).await.unwrap();
    assert_eq!(a.last_checkpoint("orders").await.unwrap(), None);
    for offset in [100, 200] {
        let mut c = a.start_commit().await.unwrap();
        c.write_batch(&batch(&["x"], &[offset], &[Some(1.0)], None)).await.unwrap();
        c.commit_with_checkpoint(Some(format!("offset={offset}"))).await.unwrap();
    }
    let b = t.write_client(settings("profile")).await.unwrap();
    let mut c = b.start_commit().await.unwrap();
    c.write_batch(&batch(&["y"], &[1], &[None], None)).await.unwrap();
    c.commit_with_checkpoint(Some("p-7".into())).await.unwrap();
    // A commit without a checkpoint does not hide the last one.
    let c = a.start_commit().await.unwrap();
    c.commit().await.unwrap();

    let reopened = place.table("t").builder().with_settings(hybrid()).open().await.unwrap();
    let r = reopened.write_client(settings("orders")).await.unwrap();
    assert_eq!(r.last_checkpoint("orders").await.unwrap().as_deref(), Some("offset=200"));
    assert_eq!(r.last_checkpoint("profile").await.unwrap().as_deref(), Some("p-7"));
    assert_eq!(r.last_checkpoint("risk").await.unwrap(), None);
}

#[tokio::test]
async fn abort_leaves_nothing_behind() {
    let Some(place) = Place::new() else { return };
    let root = place.table("t");
    let t = table(&place, MergeMode::EventTime).await;
    // A tiny buffer forces flushes (log files) before the abort.
    let client = t.write_client(WriteSettings { buffer_bytes: 1, ..Default::default() }).await.unwrap();
    let mut c = client.start_commit().await.unwrap();
    let instant = c.instant().to_string();
    for i in 0..5 {
        c.write_batch(&batch(&["a", "b"], &[i, i], &[Some(1.0), Some(2.0)], None)).await.unwrap();
    }
    // The writer tasks flush in the background: wait until the commit's log
    // files and markers are there, so the abort has something to remove.
    let written = || {
        let logs = root.file_names(|n| is_log(n) && n.contains(&format!("_{instant}.log.")));
        let markers = root.file_names_under(&format!(".hoodie/.temp/{instant}"), is_marker);
        (logs, markers)
    };
    // (The deadline guards against a hang only, far above a slow machine's need.)
    let hang_guard = Duration::from_secs(10 * 60);
    let deadline = std::time::Instant::now() + hang_guard;
    while written().0.is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (logs, markers) = written();
    assert!(!logs.is_empty(), "the commit wrote log files before the abort (waited {hang_guard:?}, a hang guard)");
    assert!(!markers.is_empty(), "and their markers");
    for log in &logs {
        assert!(markers.iter().any(|m| m.starts_with(&format!("{log}.marker."))), "{log} has a marker: {markers:?}");
    }
    let heartbeat = format!(".hoodie/.heartbeat/{instant}");
    assert!(root.exists(&heartbeat), "the commit's heartbeat runs");
    let pending: Vec<String> = t.timeline().await.unwrap().instants().map(|i| i.requested.to_string()).collect();
    assert_eq!(pending, vec![instant.clone()], "the commit's instant is pending");

    c.abort().await.unwrap();
    assert_eq!(t.read(&ReadOptions::default()).await.unwrap().num_rows(), 0);
    assert!(t.timeline().await.unwrap().is_empty(), "the instant is withdrawn");
    let leftovers = root.file_paths(|n| is_log(n) || is_marker(n));
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert!(!root.exists(&heartbeat), "the heartbeat is stopped");
    let timeline_files = root.file_names_under(".hoodie/timeline", |n| n.contains(&instant));
    assert!(timeline_files.is_empty(), "{timeline_files:?}");
}

/// The futures a service spawns onto a multi-threaded runtime are `Send`
/// (checked when this test compiles): a commit with its checkpoint, a
/// writer's registration, a compaction run, a clean, archiving, a service
/// loop, and snapshot and incremental reads. A compaction's future once
/// held a closure over borrowed plan operations, and a read's a stream
/// over an iterator's closures, which made them `Send` for no lifetime,
/// so `tokio::spawn` refused them.
#[test]
fn table_futures_can_be_spawned() {
    #[allow(dead_code)]
    fn spawnable(commit: tributary_writer::Commit, table: Table, client: tributary_writer::WriteClient) {
        fn send<T: Send + 'static>(_: T) {}
        send(commit.commit_with_checkpoint(Some("offset".into())));
        send(async move { client.register().await });
        let t = table.clone();
        send(async move { t.compactor(Default::default()).await?.run_once().await.map_err(tributary::Error::from) });
        let t = table.clone();
        send(async move { t.read(&ReadOptions::default()).await });
        let t = table.clone();
        send(async move {
            let (begin, end) = (
                tributary::InstantTime::parse("20260101000000000")?,
                tributary::InstantTime::parse("20260102000000000")?,
            );
            t.read(&ReadOptions { query: Query::Incremental { begin, end }, ..Default::default() }).await
        });
        let t = table.clone();
        send(async move { t.archive(&Default::default()).await });
        let t = table.clone();
        send(async move { tributary::serve(&t, &Default::default(), std::future::pending(), |_| {}).await });
        send(async move { table.clean(1).await });
    }
    let _ = spawnable;
}

#[tokio::test]
async fn reads_at_one_loaded_timeline_see_its_commits_only() {
    let Some(place) = Place::new() else { return };
    let t = table(&place, MergeMode::EventTime).await;
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let mut c = client.start_commit().await.unwrap();
    c.write_batch(&batch(&["a"], &[1], &[Some(1.0)], None)).await.unwrap();
    c.commit().await.unwrap();
    let first = t.timeline().await.unwrap();
    let mut c = client.start_commit().await.unwrap();
    c.write_batch(&batch(&["a", "b"], &[2, 2], &[Some(2.0), Some(3.0)], None)).await.unwrap();
    c.commit().await.unwrap();
    let at_first = t.read_at(&first, &ReadOptions::default()).await.unwrap();
    let fare = at_first.column_by_name("fare").unwrap().as_primitive::<arrow::datatypes::Float64Type>();
    assert_eq!((at_first.num_rows(), fare.value(0)), (1, 1.0));
    assert_eq!(fares(&t).await, vec![("a".to_string(), Some(2.0)), ("b".to_string(), Some(3.0))]);
}

/// A lock that notes, as each hold ends, the timeline files then in the
/// store: what a reader or recovery taking the lock next would find.
#[derive(Debug)]
struct Witness {
    inner: Arc<dyn tributary::timeline::LockProvider>,
    store: Arc<dyn object_store::ObjectStore>,
    seen: Arc<std::sync::Mutex<Vec<Vec<String>>>>,
}

struct WitnessGuard {
    inner: Box<dyn tributary::timeline::LockGuard>,
    store: Arc<dyn object_store::ObjectStore>,
    seen: Arc<std::sync::Mutex<Vec<Vec<String>>>>,
}

#[async_trait::async_trait]
impl tributary::timeline::LockProvider for Witness {
    async fn acquire(&self) -> tributary::timeline::StorageResult<Box<dyn tributary::timeline::LockGuard>> {
        let inner = self.inner.acquire().await?;
        Ok(Box::new(WitnessGuard { inner, store: self.store.clone(), seen: self.seen.clone() }))
    }
    fn describe(&self) -> String {
        format!("witness of {}", self.inner.describe())
    }
}

#[async_trait::async_trait]
impl tributary::timeline::LockGuard for WitnessGuard {
    fn last_issued(&self) -> Option<i64> {
        self.inner.last_issued()
    }
    fn set_last_issued(&mut self, millis: i64) {
        self.inner.set_last_issued(millis)
    }
    fn fence(&self) -> tributary::timeline::Fence {
        self.inner.fence()
    }
    async fn release(self: Box<Self>) -> tributary::timeline::StorageResult<()> {
        use futures::TryStreamExt;
        let listed: Vec<_> = self.store.list(Some(&"t/.hoodie/timeline".into())).try_collect().await.unwrap();
        let names = listed.iter().filter_map(|m| m.location.filename().map(str::to_string)).collect();
        self.seen.lock().unwrap().push(names);
        self.inner.release().await
    }
}

/// The simulator's seed 41792 (docs/design.md, "Deterministic simulation"):
/// a writer put its inflight file after the lock hold that issued its
/// instant; the put stalled, recovery withdrew the write under the lock
/// before the file existed, and the write then completed without the logs
/// recovery had deleted. The requested and the inflight file must both be
/// there when the hold that issues the instant ends.
#[tokio::test]
async fn a_commit_is_requested_and_inflight_before_the_lock_hold_that_issued_it_ends() {
    let store: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let loc = tributary::timeline::TableLocation::new(store.clone(), "t".into());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let lock =
        Arc::new(Witness { inner: Arc::new(tributary::timeline::InProcessLock::new()), store, seen: seen.clone() });
    let t = Table::builder(loc)
        .with_settings(hybrid())
        .with_lock(lock)
        .create(options(MergeMode::EventTime))
        .await
        .unwrap();
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let holds_before = seen.lock().unwrap().len();
    let c = client.start_commit().await.unwrap();
    let holds = seen.lock().unwrap()[holds_before..].to_vec();
    let requested = format!("{}.deltacommit.requested", c.instant());
    let inflight = format!("{}.deltacommit.inflight", c.instant());
    let issuing = holds.iter().position(|files| files.contains(&requested)).expect("a hold created the requested file");
    assert!(
        holds[issuing].contains(&inflight),
        "the hold that created {requested} ended without {inflight}: {holds:?}"
    );
}

/// A commit given several versions of a key stores only the one the merge
/// keeps (the largest event time, the later write on a tie), across the
/// batches of the commit; rows deleted in between keep their order. The
/// reads agree with a commit that stores every version.
#[tokio::test]
async fn a_commit_stores_one_version_per_key_unless_told_to_keep_them_all() {
    let Some(place) = Place::new() else { return };
    let mut reads = Vec::new();
    for combine in [true, false] {
        // One bucket: every key in one file group.
        let mut o = options(MergeMode::EventTime);
        o.buckets = 1;
        let name = if combine { "combined" } else { "every" };
        let t = place.table(name).builder().with_settings(hybrid()).create(o).await.unwrap();
        let client = t.write_client(WriteSettings { combine, ..Default::default() }).await.unwrap();
        let mut c = client.start_commit().await.unwrap();
        // a: 3 versions, the newest first; b: a tie, the later wins; c:
        // written, deleted, written again (older than the delete: it loses);
        // d: written, then deleted.
        c.write_batch(&batch(
            &["a", "b", "c", "d"],
            &[30, 5, 10, 1],
            &[Some(1.0), Some(2.0), Some(3.0), Some(4.0)],
            None,
        ))
        .await
        .unwrap();
        c.write_batch(&batch(
            &["a", "b", "c", "d"],
            &[20, 5, 12, 2],
            &[Some(5.0), Some(6.0), None, None],
            Some(&[false, false, true, true]),
        ))
        .await
        .unwrap();
        c.write_batch(&batch(&["a", "c"], &[25, 11], &[Some(7.0), Some(8.0)], None)).await.unwrap();
        let summary = c.commit().await.unwrap();
        assert_eq!(summary.rows, 10);
        let records: u64 = summary.files.iter().map(|f| f.records).sum();
        let deletes: u64 = summary.files.iter().map(|f| f.deletes).sum();
        // Combined: a, b, c and d before the deletes, c after them; every
        // version: 8.
        assert_eq!((records, deletes), if combine { (5, 2) } else { (8, 2) }, "combine {combine}");
        let mut got = fares(&t).await;
        got.sort_by(|x, y| x.0.cmp(&y.0));
        reads.push(got);
    }
    assert_eq!(reads[0], vec![("a".into(), Some(1.0)), ("b".into(), Some(6.0))]);
    assert_eq!(reads[0], reads[1]);
}

/// Whether the heartbeat file of `t` exists.
async fn beating(t: &Table, instant: &tributary_timeline::InstantTime) -> bool {
    let path = tributary_timeline::heartbeat_path(t.location(), instant);
    object_store::ObjectStoreExt::head(&t.location().store, &path).await.is_ok()
}

/// The pending delta commits of `t`, with whether each is inflight.
async fn pending(t: &Table) -> Vec<(tributary_timeline::InstantTime, bool)> {
    let tl = t.timeline().await.unwrap();
    tl.pending().map(|i| (i.requested.clone(), i.state == tributary_timeline::State::Inflight)).collect()
}

/// A table and a client beginning each next commit early, kept for
/// `idle`, after its first commit (of key `a`).
async fn after_one_commit(
    place: &Place,
    idle: Duration,
) -> (Table, tributary_writer::WriteClient, tributary_writer::CommitSummary) {
    let t = table(place, MergeMode::EventTime).await;
    let settings = WriteSettings { begin_next: Some(idle), ..Default::default() };
    let client = t.write_client(settings).await.unwrap();
    let mut c = client.start_commit().await.unwrap();
    c.write_batch(&batch(&["a"], &[1], &[Some(1.0)], None)).await.unwrap();
    let first = c.commit().await.unwrap();
    (t, client, first)
}

#[tokio::test]
async fn a_commit_begins_the_next_in_its_completion_hold() {
    let Some(place) = Place::new() else { return };
    let (t, client, first) = after_one_commit(&place, Duration::from_secs(600)).await;

    // Begun in the completion's hold: the time right after the completion
    // time, requested and inflight, its heartbeat beating.
    let next = tributary_timeline::InstantTime::from_millis(first.completed.to_millis().unwrap() + 1).unwrap();
    assert_eq!(pending(&t).await, vec![(next.clone(), true)]);
    assert!(beating(&t, &next).await);
    assert_eq!(fares(&t).await, vec![("a".to_string(), Some(1.0))], "the begun commit hides nothing");

    let mut c = client.start_commit().await.unwrap();
    assert_eq!(c.instant(), &next, "the next commit writes into the begun one");
    c.write_batch(&batch(&["b"], &[1], &[Some(2.0)], None)).await.unwrap();
    let second = c.commit().await.unwrap();
    assert_eq!(second.instant, next);
    let mut rows = fares(&t).await;
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(rows, vec![("a".to_string(), Some(1.0)), ("b".to_string(), Some(2.0))]);

    // Closing withdraws the commit the second one began.
    let begun = pending(&t).await;
    assert_eq!(begun.len(), 1, "{begun:?}");
    client.close().await;
    assert_eq!(pending(&t).await, vec![]);
    assert!(!beating(&t, &begun[0].0).await);
    assert!(t.timeline().await.unwrap().warnings().is_empty());
}

#[tokio::test]
async fn a_begun_commit_left_unused_is_withdrawn() {
    let Some(place) = Place::new() else { return };
    let (t, client, _) = after_one_commit(&place, Duration::from_millis(200)).await;
    let begun = pending(&t).await;
    assert_eq!(begun.len(), 1, "{begun:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !pending(&t).await.is_empty() {
        assert!(std::time::Instant::now() < deadline, "the begun commit {begun:?} was not withdrawn");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!beating(&t, &begun[0].0).await);
    // A commit after the withdrawal begins itself.
    let mut c = client.start_commit().await.unwrap();
    assert!(c.instant() > &begun[0].0);
    c.write_batch(&batch(&["b"], &[1], &[Some(2.0)], None)).await.unwrap();
    c.commit().await.unwrap();
    assert_eq!(fares(&t).await.len(), 2);
}
