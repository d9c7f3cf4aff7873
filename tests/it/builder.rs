//! The table builder: injected clock, locks and spill store, and what it
//! derives from being given a local folder.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::RecordBatch;
use futures::TryStreamExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use tributary::{CreateOptions, LockKind, Query, ReadOptions, Table, TableSettings, TimeSettings};
use tributary_compaction::CompactorSettings;
use tributary_format::ErrorKind;
use tributary_timeline::{InstantTime, ManualClock, TableLocation, TimeMode};
use tributary_writer::WriteSettings;

use crate::support::{FARES_SCHEMA, hybrid, oslo_batch};

fn options() -> CreateOptions {
    let mut o = CreateOptions::new(FARES_SCHEMA, "uuid", "ts");
    o.partition_field = Some("city".into());
    o.buckets = 1;
    o
}

fn batch(keys: std::ops::Range<usize>, ts: i64) -> RecordBatch {
    let ids: Vec<String> = keys.clone().map(|k| format!("trip-{k:05}")).collect();
    let rows: Vec<(&str, i64, f64)> =
        keys.zip(&ids).map(|(k, id)| (id.as_str(), ts, k as f64 + ts as f64 / 10.0)).collect();
    oslo_batch(&rows)
}

/// A table built with an injected manual clock takes its instants, and its
/// write clients' instants and completion times, from that clock.
#[tokio::test]
async fn instants_come_from_the_injected_clock() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_766_264_468_078));
    let table =
        Table::builder_local(dir.path().join("t")).with_settings(hybrid()).with_clock(clock.clone()).create(options());
    let table = table.await.unwrap();
    let t = table.time_generator().new_instant().await.unwrap();
    assert_eq!(t, InstantTime::from_millis(1_766_264_468_078).unwrap());
    assert_eq!(t.as_str(), "20251220210108078");

    clock.set(1_766_264_500_000);
    let client = table.write_client(WriteSettings::default()).await.unwrap();
    let mut c = client.start_commit().await.unwrap();
    assert_eq!(c.instant(), &InstantTime::from_millis(1_766_264_500_000).unwrap());
    c.write_batch(&batch(0..3, 1)).await.unwrap();
    let done = c.commit().await.unwrap();
    // The clock stood still: the completion time is the next millisecond.
    assert_eq!(done.completed, InstantTime::from_millis(1_766_264_500_001).unwrap());

    // Reopened with another clock, the table's lock still keeps instants
    // ahead of every time issued before.
    let behind = Arc::new(ManualClock::new(1_766_264_000_000));
    let reopened =
        Table::builder_local(dir.path().join("t")).with_settings(hybrid()).with_clock(behind).open().await.unwrap();
    let later = reopened.time_generator().new_instant().await.unwrap();
    assert_eq!(later, InstantTime::from_millis(1_766_264_500_002).unwrap());
}

/// An in-memory store that counts the writes under one folder.
#[derive(Debug)]
struct CountingStore {
    inner: InMemory,
    under: Path,
    puts: AtomicUsize,
}

impl CountingStore {
    fn count(&self, location: &Path) {
        if location.prefix_matches(&self.under) {
            self.puts.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl std::fmt::Display for CountingStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CountingStore({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: object_store::PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        self.count(location);
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        self.count(location);
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &Path,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: futures::stream::BoxStream<'static, object_store::Result<Path>>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(
        &self,
        prefix: Option<&Path>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<object_store::ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: object_store::CopyOptions) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

/// A table in an object store (here in memory, with the default lease
/// lock) whose compactor is given a spill store: a budget of a few KiB
/// forces the merge through spill files, which all go to that store, under
/// the folder given, and are gone once the compaction completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spill_files_go_to_the_injected_spill_store() {
    let table_store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let location = TableLocation::new(table_store.clone(), Path::from("warehouse/trips"));
    let spill =
        Arc::new(CountingStore { inner: InMemory::new(), under: Path::from("spill"), puts: AtomicUsize::new(0) });
    let table = Table::builder(location)
        .with_settings(hybrid())
        .with_spill_store(spill.clone(), Path::from("spill"))
        .create(options())
        .await
        .unwrap();
    assert_eq!(table.config().name, "trips", "named for the root path's last segment");
    let client = table.write_client(WriteSettings::default()).await.unwrap();
    for ts in 1..=3 {
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&batch(0..400, ts)).await.unwrap();
        c.commit().await.unwrap();
    }
    let before = table.read(&ReadOptions { query: Query::Snapshot, ..Default::default() }).await.unwrap();

    let settings = CompactorSettings { memory_budget: 4 << 10, ..Default::default() };
    let done = table.compactor(settings).await.unwrap().run_once().await.unwrap();
    assert_eq!(done.len(), 1);
    assert!(done[0].groups > 0);
    assert_eq!(done[0].spilled_groups, done[0].groups, "every group spilled");
    assert!(spill.puts.load(Ordering::SeqCst) > 0, "spill files were written to the spill store");
    let left: Vec<_> = spill.list(Some(&Path::from("spill"))).try_collect().await.unwrap();
    assert!(left.is_empty(), "spill files are removed: {left:?}");
    let in_table: Vec<_> = table_store.list(Some(&Path::from("warehouse/trips"))).try_collect().await.unwrap();
    let spilled_there: Vec<_> = in_table.iter().filter(|m| m.location.as_ref().contains(".spill")).collect();
    assert!(spilled_there.is_empty(), "nothing spilled into the table's store: {spilled_there:?}");
    let after = table.read(&ReadOptions { query: Query::ReadOptimized, ..Default::default() }).await.unwrap();
    assert_eq!(after, before, "base files hold the merged rows");
}

/// A local table reads as its folder in messages; a file lock is refused
/// for a table not built for a local folder.
#[tokio::test]
async fn local_folder_is_known_to_the_builder_only() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("not_a_table");
    let err = Table::open_local(&folder).await.unwrap_err();
    assert!(err.to_string().starts_with(&folder.display().to_string()), "{err}");
    let table = Table::create_local(dir.path().join("t"), options()).await.unwrap();
    assert_eq!(table.location().to_string(), dir.path().join("t").display().to_string());
    assert!(table.lock().describe().starts_with("file lock"), "{}", table.lock().describe());

    let location = TableLocation::new(Arc::new(InMemory::new()), Path::from("t"));
    let file_lock = TableSettings { lock: LockKind::File, ..Default::default() };
    let err = Table::builder(location.clone()).with_settings(file_lock).create(options()).await.unwrap_err();
    assert!(err.to_string().contains("file lock"), "{err}");
    let table = Table::builder(location).create(options()).await.unwrap();
    assert!(table.lock().describe().starts_with("lease lock"), "{}", table.lock().describe());
    let loc = table.location();
    assert!(loc.store.head(&tributary_timeline::properties_file(&loc.root)).await.is_ok());
}

/// Hudi's lock file keeps no last issued time: a table built with it takes
/// its instants under the file and compacts under a lock of its own; a
/// hybrid-logical instant is refused, naming the lock and the mode to use,
/// and wait-for-skew instants are taken.
#[tokio::test]
async fn hudi_lock_file_refuses_hybrid_logical_instants() {
    let location = TableLocation::new(Arc::new(InMemory::new()), Path::from("t"));
    let hudi = |mode| TableSettings {
        lock: LockKind::HudiFile,
        time: TimeSettings { mode: Some(mode), ..Default::default() },
        ..Default::default()
    };
    let table = Table::builder(location.clone()).with_settings(hudi(TimeMode::HybridLogical)).create(options());
    let table = table.await.unwrap();
    assert!(table.lock().describe().starts_with("Hudi lock file"), "{}", table.lock().describe());
    assert!(!table.lock().keeps_last_issued());
    assert!(table.compaction_lock().describe().starts_with("lease lock"), "{}", table.compaction_lock().describe());
    let client = table.write_client(WriteSettings::default()).await.unwrap();
    let err = client.start_commit().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(err.to_string().contains("set the time mode to wait-for-skew"), "{err}");
    assert_eq!(table.timeline().await.unwrap().len(), 0, "no instant was requested");

    let table = Table::builder(location).with_settings(hudi(TimeMode::WaitForSkew)).open().await.unwrap();
    let client = table.write_client(WriteSettings::default()).await.unwrap();
    let mut c = client.start_commit().await.unwrap();
    c.write_batch(&batch(0..3, 1)).await.unwrap();
    c.commit().await.unwrap();
    assert_eq!(table.read(&ReadOptions::default()).await.unwrap().num_rows(), 3);
}

/// A table records its writers' time mode: hybrid-logical unless `init`
/// is told otherwise; a process may override it; a table that records none
/// (another engine made it) is written in wait-for-skew, and a generator
/// of each takes instants that way.
#[tokio::test]
async fn a_table_records_its_time_mode() {
    let store = Arc::new(InMemory::new());
    let at = |name: &str| TableLocation::new(store.clone(), Path::from(name));
    let with_mode = |mode: Option<TimeMode>| TableSettings {
        lock: LockKind::InProcess,
        time: TimeSettings { mode, ..Default::default() },
        ..Default::default()
    };
    let made = Table::builder(at("a")).with_settings(with_mode(None)).create(options()).await.unwrap();
    assert_eq!(made.config().time_mode, Some(TimeMode::HybridLogical));
    let opened = Table::builder(at("a")).with_settings(with_mode(None)).open().await.unwrap();
    assert_eq!(
        (opened.time_mode(), opened.time_generator().mode()),
        (TimeMode::HybridLogical, TimeMode::HybridLogical)
    );
    let overridden =
        Table::builder(at("a")).with_settings(with_mode(Some(TimeMode::WaitForSkew))).open().await.unwrap();
    assert_eq!(overridden.time_generator().mode(), TimeMode::WaitForSkew);

    let mut shared = options();
    shared.time_mode = TimeMode::WaitForSkew;
    Table::builder(at("b")).with_settings(with_mode(None)).create(shared).await.unwrap();
    let opened = Table::builder(at("b")).with_settings(with_mode(None)).open().await.unwrap();
    assert_eq!(opened.time_generator().mode(), TimeMode::WaitForSkew);

    // Without the property, as a table Spark made.
    let props = tributary_timeline::properties_file(&at("a").root);
    let text = String::from_utf8(store.get(&props).await.unwrap().bytes().await.unwrap().to_vec()).unwrap();
    assert!(text.contains("tributary.time.mode=hybrid-logical"), "{text}");
    let without: String =
        text.lines().filter(|l| !l.starts_with("tributary.time.mode")).map(|l| format!("{l}\n")).collect();
    store.put(&props, without.into()).await.unwrap();
    let opened = Table::builder(at("a")).with_settings(with_mode(None)).open().await.unwrap();
    assert_eq!((opened.config().time_mode, opened.time_mode()), (None, TimeMode::WaitForSkew));
}
