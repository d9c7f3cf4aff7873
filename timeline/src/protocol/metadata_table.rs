//! Turning off the metadata table, which Tributary does not maintain.
//!
//! Spark and Flink create a metadata table (`.hoodie/metadata`, itself a
//! Hudi table) by default. Its `files` partition lists the table's data
//! files, and readers with metadata reads on (Spark's default) take their
//! file listings from it instead of from storage while
//! `hoodie.table.metadata.partitions` in `hoodie.properties` includes
//! `files`. Tributary's commits, compactions, cleans and rollbacks do not
//! update it, so the first of them would leave it stale: new files missing,
//! deleted ones still listed.
//!
//! So before Tributary's first instant on such a table, it turns the
//! metadata table off exactly as a Hudi writer configured with
//! `hoodie.metadata.enable=false` does (`HoodieTable.maybeDeleteMetadataTable`,
//! `HoodieTableMetadataUtil.deleteMetadataTable` in Hudi 1.x):
//!
//! 1. `hoodie.properties` is changed so it lists no metadata partitions:
//!    `hoodie.table.metadata.partitions` and
//!    `hoodie.table.metadata.partitions.inflight` are set to empty
//!    (`HoodieTableConfig.clearMetadataPartitions`), with Hudi's backup
//!    protocol (`crate::properties`). From here on every reader lists
//!    storage;
//! 2. then `.hoodie/metadata` is deleted, file by file (a local table's
//!    store also removes its folders).
//!
//! A process stopped anywhere leaves a table Hudi reads correctly: before
//! step 1 completes, readers read the old properties (or their backup) and
//! a metadata table still in step with the data, since nothing of
//! Tributary's has happened yet; after it, they ignore what is left of
//! `.hoodie/metadata`. The next Tributary actor recovers the properties
//! and finishes the deletion.
//!
//! It runs inside a hold of the table lock ([`MetadataTableGuard`], which a
//! table's [`TimeGenerator`](crate::TimeGenerator) runs at the start of its
//! holds), so it happens before any instant of Tributary's is requested,
//! let alone completed, and never beside another Tributary actor's change.
//! A Hudi writer that shares the table must itself run with
//! `hoodie.metadata.enable=false`: one with it on would build the metadata
//! table again, and Tributary checks only once per guard, that is once per
//! opened table (see [`MetadataTableGuard`]).

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;

use crate::config::keys;
use crate::error::{Error, Result};
use crate::layout;
use crate::properties;
use crate::truetime::FirstHoldHook;
use tributary_storage::Clock;
use tributary_storage::TableLocation;

/// `<root>/.hoodie/metadata`.
pub(crate) fn metadata_path(loc: &TableLocation) -> Path {
    layout::metadata_table_dir(&loc.root)
}

/// What [`disable`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Disabled {
    /// The metadata partitions `hoodie.properties` listed (built, then
    /// being built) and no longer lists; empty when it listed none.
    pub partitions: Vec<String>,
    /// How many files of `.hoodie/metadata` were deleted.
    pub files_deleted: usize,
}

impl Disabled {
    /// Whether anything changed.
    pub(crate) fn changed(&self) -> bool {
        !self.partitions.is_empty() || self.files_deleted > 0
    }
}

/// Turns the metadata table off (module notes): clears the metadata
/// partitions in `hoodie.properties` (heading it with `comment`), then
/// deletes `.hoodie/metadata`. Does nothing to a table without one. Call it
/// holding the table lock.
pub(crate) async fn disable(loc: &TableLocation, comment: &str) -> Result<Disabled> {
    // One listing of `.hoodie` says whether an update of hoodie.properties
    // was interrupted (its backup is there) and whether a metadata table
    // folder exists; a table with neither costs it and one GET.
    let meta = layout::meta_dir(&loc.root);
    let listing = loc.store.list_with_delimiter(Some(&meta)).await.map_err(|e| Error::store("list", &meta, e))?;
    if listing.objects.iter().any(|m| m.location.filename() == Some(layout::PROPERTIES_BACKUP_FILE)) {
        // An update of hoodie.properties (ours or a Hudi writer's) stopped
        // midway: finish it first, as Hudi does before every change
        // (`recoverIfNeeded`). `modify` below recovers by itself only when
        // hoodie.properties is missing or damaged; a backup left beside an
        // intact file (the update stopped before its last step) holds the
        // properties from before that update, and would stay (for readers
        // to fall back to, should the file be damaged later) whenever
        // there is nothing to change.
        properties::recover(loc).await?;
    }
    let folder = metadata_path(loc);
    let has_folder = listing.common_prefixes.contains(&folder);
    let mut listed = Vec::new();
    properties::modify(loc, comment, |p| {
        for key in [keys::METADATA_PARTITIONS, keys::METADATA_PARTITIONS_INFLIGHT] {
            if let Some(v) = p.get_mut(key)
                && !v.trim().is_empty()
            {
                listed.extend(crate::config::split_fields(v));
                // Hudi keeps both keys, with no partitions.
                v.clear();
            }
        }
        !listed.is_empty()
    })
    .await?;
    if !has_folder {
        return Ok(Disabled { partitions: listed, files_deleted: 0 });
    }
    let files: Vec<Path> = loc
        .store
        .list(Some(&folder))
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .map_err(|e| Error::store("list", &folder, e))?;
    let files_deleted = files.len();
    let mut deleted = loc.store.delete_stream(futures::stream::iter(files.into_iter().map(Ok)).boxed());
    while let Some(d) = deleted.next().await {
        match d {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(Error::store("delete", &folder, e)),
        }
    }
    Ok(Disabled { partitions: listed, files_deleted })
}

/// Runs `disable` once per guard: at the start of the guard's first hold
/// of the table lock that succeeds in it (a hold whose run failed leaves it
/// to the next). Clones share the guard. The root crate makes one guard
/// each time a table is opened or created (`TableBuilder::open`, `create`),
/// shared by the `Table`, its clones and every actor's
/// [`TimeGenerator`](crate::TimeGenerator) they make, so nothing of
/// Tributary's is requested, written or completed on the table before it.
/// The same table opened twice has two guards, each of which runs it once
/// (the second finds nothing to turn off, at the cost of its check).
#[derive(Debug, Clone)]
pub struct MetadataTableGuard {
    loc: TableLocation,
    /// Set once [`disable`] succeeded; a failed attempt leaves it unset,
    /// so the next hold tries again.
    done: Arc<tokio::sync::OnceCell<()>>,
}

impl MetadataTableGuard {
    /// A guard for the table at `loc`.
    pub fn new(loc: TableLocation) -> Self {
        Self { loc, done: Arc::new(tokio::sync::OnceCell::new()) }
    }

    /// Turns the metadata table off unless this guard did already; logs
    /// what it changed. Call it holding the table lock; `clock` dates the
    /// rewritten `hoodie.properties`.
    pub async fn ensure(&self, clock: &dyn Clock) -> Result<()> {
        self.done.get_or_try_init(|| self.disable_logged(clock)).await.map(|_| ())
    }

    /// One attempt at [`disable`], logged.
    async fn disable_logged(&self, clock: &dyn Clock) -> Result<()> {
        let when = chrono::DateTime::from_timestamp_millis(clock.now_millis())
            .map_or_else(String::new, |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        let result = disable(&self.loc, &format!("Updated at {when} by tributary (metadata table off)")).await?;
        if result.changed() {
            tracing::warn!(
                table = %self.loc,
                partitions = %result.partitions.join(","),
                files_deleted = result.files_deleted,
                "turned the metadata table off (Tributary does not maintain it): hoodie.properties lists no \
                 metadata partitions and .hoodie/metadata was deleted; Hudi writers of this table must set \
                 hoodie.metadata.enable=false"
            );
        }
        Ok(())
    }
}

/// The guard runs as a time generator's first-hold hook
/// ([`TimeGenerator::with_first_hold_hook`](crate::TimeGenerator::with_first_hold_hook)).
#[async_trait::async_trait]
impl FirstHoldHook for MetadataTableGuard {
    async fn before_hold(&self, clock: &dyn Clock) -> Result<()> {
        self.ensure(clock).await
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutPayload};

    use super::*;
    use crate::config::{NewTableConfig, TableConfig, parse_properties};
    use tributary_storage::ManualClock;
    use tributary_storage::join_relative;

    /// A table whose properties list a metadata table, and the metadata
    /// table's files.
    async fn table_with_metadata(loc: &TableLocation) -> String {
        let text = TableConfig::new_table(&NewTableConfig::new("t", "id", "ts", "{}")).to_properties_text("x").unwrap();
        let text = format!(
            "{text}hoodie.table.metadata.partitions=column_stats,files,partition_stats\n\
             hoodie.table.metadata.partitions.inflight=record_index\n"
        );
        loc.create(&layout::properties_file(&loc.root), text.clone().into_bytes()).await.unwrap();
        for f in [
            ".hoodie/hoodie.properties",
            ".hoodie/timeline/00000000000000000_20250101000000000.deltacommit",
            "files/.files-0000-0_00000000000000000.log.1_0-0-0",
            "column_stats/.hoodie_partition_metadata",
        ] {
            loc.store.put(&join_relative(&metadata_path(loc), f), PutPayload::from_static(b"x")).await.unwrap();
        }
        text
    }

    async fn listed(loc: &TableLocation) -> Vec<Path> {
        loc.store.list(Some(&metadata_path(loc))).map_ok(|m| m.location).try_collect().await.unwrap()
    }

    #[tokio::test]
    async fn disabling_clears_the_partitions_then_deletes_the_folder_and_is_idempotent() {
        let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("t"));
        let before = table_with_metadata(&loc).await;
        let done = disable(&loc, "c").await.unwrap();
        assert_eq!(done.partitions, ["column_stats", "files", "partition_stats", "record_index"]);
        assert_eq!(done.files_deleted, 4);
        let after = properties::read_properties(&loc).await.unwrap().unwrap();
        assert_eq!(after.path, layout::properties_file(&loc.root));
        let config = TableConfig::parse(&after.text, "p").unwrap();
        assert_eq!(config.metadata_partitions(), (vec![], vec![]));
        // Both keys stay, empty, as Hudi leaves them; everything else is as it was.
        let mut expect = parse_properties(&before, "p").unwrap();
        expect.insert(keys::METADATA_PARTITIONS.into(), String::new());
        expect.insert(keys::METADATA_PARTITIONS_INFLIGHT.into(), String::new());
        assert_eq!(after.properties, expect);
        assert!(listed(&loc).await.is_empty());
        assert_eq!(disable(&loc, "c").await.unwrap(), Disabled::default());
    }

    /// A store that carries out the first `left` writes and deletes, and
    /// refuses every later one: a process stopped at that point.
    #[derive(Debug)]
    struct StopAfter {
        inner: Arc<dyn object_store::ObjectStore>,
        left: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl StopAfter {
        fn allow(left: &std::sync::atomic::AtomicUsize, path: &Path) -> object_store::Result<()> {
            use std::sync::atomic::Ordering;
            left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .map(|_| ())
                .map_err(|_| object_store::Error::PermissionDenied { path: path.to_string(), source: "stopped".into() })
        }
    }

    impl std::fmt::Display for StopAfter {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "StopAfter({})", self.inner)
        }
    }

    #[async_trait::async_trait]
    impl object_store::ObjectStore for StopAfter {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            opts: object_store::PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            Self::allow(&self.left, location)?;
            self.inner.put_opts(location, payload, opts).await
        }
        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            Self::allow(&self.left, location)?;
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
            let (inner, left) = (self.inner.clone(), self.left.clone());
            locations
                .then(move |l| {
                    let (inner, left) = (inner.clone(), left.clone());
                    async move {
                        let l = l?;
                        Self::allow(&left, &l)?;
                        inner.delete(&l).await.map(|()| l)
                    }
                })
                .boxed()
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
        async fn copy_opts(&self, from: &Path, to: &Path, o: object_store::CopyOptions) -> object_store::Result<()> {
            Self::allow(&self.left, to)?;
            self.inner.copy_opts(from, to, o).await
        }
    }

    /// `loc`'s table seen through a process that stops after `writes`
    /// writes and deletes.
    pub(crate) fn stopping_after(loc: &TableLocation, writes: usize) -> TableLocation {
        let left = Arc::new(std::sync::atomic::AtomicUsize::new(writes));
        TableLocation::new(Arc::new(StopAfter { inner: loc.store.clone(), left }), loc.root.clone())
    }

    /// A disable stopped after any of its writes or deletes leaves
    /// properties that list the whole metadata table, or list none; the
    /// next one finishes the job.
    #[tokio::test]
    async fn an_interrupted_disable_is_finished_by_the_next_one() {
        // How many writes and deletes a whole disable makes.
        let whole = {
            let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("t"));
            table_with_metadata(&loc).await;
            let counting = Arc::new(tributary_storage::CountingStore::new(loc.store.clone()));
            disable(&TableLocation::new(counting.clone(), loc.root.clone()), "c").await.unwrap();
            let r = counting.requests();
            r.puts + r.deletes
        };
        assert!(whole >= 8, "{whole}");
        for stop_after in 0..=whole {
            let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("t"));
            table_with_metadata(&loc).await;
            let outcome = disable(&stopping_after(&loc, stop_after), "c").await;
            assert_eq!(outcome.is_ok(), stop_after == whole, "stopped after {stop_after}: {outcome:?}");
            // What a reader sees now.
            let seen = properties::read_properties(&loc).await.unwrap().unwrap();
            let (built, _) = TableConfig::parse(&seen.text, "p").unwrap().metadata_partitions();
            if !built.is_empty() {
                assert_eq!(listed(&loc).await.len(), 4, "stopped after {stop_after}: listed, so it must be whole");
            }
            disable(&loc, "c").await.unwrap();
            let config =
                TableConfig::parse(&properties::read_properties(&loc).await.unwrap().unwrap().text, "p").unwrap();
            assert_eq!(config.metadata_partitions(), (vec![], vec![]), "stopped after {stop_after}");
            assert!(listed(&loc).await.is_empty(), "stopped after {stop_after}");
            assert!(loc.get(&properties::backup_path(&loc)).await.is_err(), "stopped after {stop_after}");
        }
    }

    #[tokio::test]
    async fn the_guard_disables_once() {
        let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("t"));
        table_with_metadata(&loc).await;
        let guard = MetadataTableGuard::new(loc.clone());
        let clock = ManualClock::new(1_766_264_468_078);
        guard.clone().ensure(&clock).await.unwrap();
        assert!(listed(&loc).await.is_empty());
        let text = properties::read_properties(&loc).await.unwrap().unwrap().text;
        assert!(text.lines().next().is_some_and(|l| l.contains("2025-12-20T21:01:08.078Z")), "{text}");
        // A metadata table built again later is not looked for again by this guard.
        table_with_metadata_again(&loc).await;
        guard.ensure(&clock).await.unwrap();
        assert_eq!(listed(&loc).await.len(), 1);
    }

    async fn table_with_metadata_again(loc: &TableLocation) {
        loc.store.put(&join_relative(&metadata_path(loc), "files/x"), PutPayload::from_static(b"x")).await.unwrap();
    }
}
