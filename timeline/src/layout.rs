//! The one home of a table's on-storage layout: the name of every folder
//! and file under `<table>/.hoodie/` that Tributary reads or writes (and the
//! partition metadata file beside the data), as constants and as functions
//! that build their paths.
//!
//! Object-store paths are built from the table root (`TableLocation::root`);
//! the `local_*` functions build the same names under a table in a local
//! folder, for what needs an OS path (file locks, spill folders). Modules
//! that only store things (locations, locks, stores) take the paths they
//! need from their callers, which name them here.
//!
//! ```text
//! <table>/
//!   .hoodie/
//!     hoodie.properties           PROPERTIES_FILE
//!     hoodie.properties.backup    PROPERTIES_BACKUP_FILE (during an update)
//!     timeline/                   timeline_dir (layout 2; `.hoodie` itself in layout 1)
//!       history/                  history_dir (the LSM history, layout 2)
//!     .temp/<t>/...               marker_dir (write markers; local spill files)
//!     .heartbeat/<t>              heartbeat_file
//!     .aux/tributary.lock         local_instant_lock_file (OS file lock)
//!     .aux/tributary-compaction.lock
//!     .locks/table_lock.json      lease_lock_file (Hudi's storage-based lock document)
//!     .locks/tributary_compaction.json
//!     lock                        hudi_lock_file (Hudi's FileSystemBasedLockProvider)
//!     metadata/                   metadata_table_dir (Hudi's metadata table)
//!     .tributary/writers/<id>.json, .tributary/writers.json
//!   <partition>/.hoodie_partition_metadata
//! ```

use std::path::PathBuf;

use object_store::path::Path;

use crate::instant::InstantTime;
use tributary_storage::{LocalTidy, TableLocation, join_relative};

/// The table's metadata folder under its root.
pub(crate) const META_FOLDER: &str = ".hoodie";
/// The table configuration file in `.hoodie`.
pub(crate) const PROPERTIES_FILE: &str = "hoodie.properties";
/// The backup Hudi writes beside `hoodie.properties` while it changes it.
pub(crate) const PROPERTIES_BACKUP_FILE: &str = "hoodie.properties.backup";
/// The timeline folder under `.hoodie` of a layout-2 table when
/// `hoodie.timeline.path` is not set.
pub(crate) const DEFAULT_TIMELINE_FOLDER: &str = "timeline";
/// The LSM history folder under the timeline folder when
/// `hoodie.timeline.history.path` is not set.
pub(crate) const DEFAULT_HISTORY_FOLDER: &str = "history";
/// The folder of write markers (one subfolder per instant) under `.hoodie`.
pub(crate) const TEMP_FOLDER: &str = ".temp";
/// The folder of heartbeats (one file per instant) under `.hoodie`.
pub(crate) const HEARTBEAT_FOLDER: &str = ".heartbeat";
/// Hudi's auxiliary folder under `.hoodie`, where the OS file locks live.
pub(crate) const AUX_FOLDER: &str = ".aux";
/// The folder of lease lock documents under `.hoodie`.
pub(crate) const LOCKS_FOLDER: &str = ".locks";
/// The metadata table's folder under `.hoodie`.
pub(crate) const METADATA_FOLDER: &str = "metadata";
/// Tributary's own folder under `.hoodie`.
pub(crate) const TRIBUTARY_FOLDER: &str = ".tributary";
/// The lock file of Hudi's `FileSystemBasedLockProvider` in `.hoodie`.
pub(crate) const HUDI_LOCK_FILE: &str = "lock";
/// The lease document of Hudi's storage-based lock in `.hoodie/.locks`.
pub(crate) const LEASE_LOCK_FILE: &str = "table_lock.json";
/// The lease document of Tributary's compaction lock in `.hoodie/.locks`.
pub(crate) const COMPACTION_LEASE_FILE: &str = "tributary_compaction.json";
/// The OS file lock of instants in `.hoodie/.aux`.
pub(crate) const INSTANT_LOCK_FILE: &str = "tributary.lock";
/// The OS file lock of compactions in `.hoodie/.aux`.
pub(crate) const COMPACTION_LOCK_FILE: &str = "tributary-compaction.lock";
/// The file in each partition folder that makes it a partition.
pub const PARTITION_METADATA: &str = ".hoodie_partition_metadata";

/// What a delete in a table's local folder tidies: the emptied folders of
/// `.hoodie/.temp` (an instant's markers, once it commits), and a metadata
/// table (`.hoodie/metadata`) once its last file goes.
pub const LOCAL_TIDY: LocalTidy =
    LocalTidy { scratch_folder: Some(TEMP_FOLDER), disposable_folder: Some((META_FOLDER, METADATA_FOLDER)) };

/// A Hudi table in the local folder `dir`
/// ([`TableLocation::local`] with [`LOCAL_TIDY`]).
pub fn local_location(dir: impl Into<PathBuf>) -> tributary_storage::Result<TableLocation> {
    TableLocation::local(dir, LOCAL_TIDY)
}

/// The Hudi table at `uri` ([`TableLocation::parse`] with [`LOCAL_TIDY`]).
pub fn parse_location(uri: &str) -> tributary_storage::Result<TableLocation> {
    TableLocation::parse(uri, LOCAL_TIDY)
}

/// The Hudi table at `uri`, its store configured from the environment and
/// `options` ([`TableLocation::parse_with`] with [`LOCAL_TIDY`]).
pub fn parse_location_with<I, K, V>(uri: &str, options: I) -> tributary_storage::Result<TableLocation>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: Into<String>,
{
    TableLocation::parse_with(uri, options, LOCAL_TIDY)
}

/// `<root>/.hoodie`.
pub(crate) fn meta_dir(root: &Path) -> Path {
    root.clone().join(META_FOLDER)
}

/// `<root>/.hoodie/hoodie.properties`.
pub fn properties_file(root: &Path) -> Path {
    meta_dir(root).join(PROPERTIES_FILE)
}

/// `<root>/.hoodie/hoodie.properties.backup`.
pub(crate) fn properties_backup_file(root: &Path) -> Path {
    meta_dir(root).join(PROPERTIES_BACKUP_FILE)
}

/// The folder holding the timeline: `.hoodie/<timeline_path>` for
/// timeline layout 2, `.hoodie` itself for layout 1.
pub fn timeline_dir(root: &Path, timeline_layout: u32, timeline_path: &str) -> Path {
    if timeline_layout >= 2 { join_relative(&meta_dir(root), timeline_path) } else { meta_dir(root) }
}

/// The LSM history folder: `<history_path>` under the timeline folder
/// `timeline_dir` (layout 2 only).
pub(crate) fn history_dir(timeline_dir: &Path, history_path: &str) -> Path {
    join_relative(timeline_dir, history_path)
}

/// `<root>/.hoodie/.temp`: the markers' folder, and a local table's
/// default spill folder.
pub fn temp_dir(root: &Path) -> Path {
    meta_dir(root).join(TEMP_FOLDER)
}

/// `<root>/.hoodie/.temp/<t>`: the folder of instant `t`'s markers.
pub(crate) fn marker_dir(root: &Path, instant: &InstantTime) -> Path {
    temp_dir(root).join(instant.as_str())
}

/// `<root>/.hoodie/.heartbeat`: the writers' heartbeat files.
pub(crate) fn heartbeat_dir(root: &Path) -> Path {
    meta_dir(root).join(HEARTBEAT_FOLDER)
}

/// `<root>/.hoodie/.heartbeat/<t>`.
pub(crate) fn heartbeat_file(root: &Path, instant: &InstantTime) -> Path {
    heartbeat_dir(root).join(instant.as_str())
}

/// `<root>/.hoodie/metadata`: Hudi's metadata table.
pub(crate) fn metadata_table_dir(root: &Path) -> Path {
    meta_dir(root).join(METADATA_FOLDER)
}

/// `<root>/.hoodie/lock`: the lock file of Hudi's
/// `FileSystemBasedLockProvider`.
pub fn hudi_lock_file(root: &Path) -> Path {
    meta_dir(root).join(HUDI_LOCK_FILE)
}

/// `<root>/.hoodie/.locks/table_lock.json`: the lease document of the
/// instant lock (the one Hudi's storage-based lock uses).
pub fn lease_lock_file(root: &Path) -> Path {
    meta_dir(root).join(LOCKS_FOLDER).join(LEASE_LOCK_FILE)
}

/// `<root>/.hoodie/.locks/tributary_compaction.json`: the lease document of
/// the compaction lock.
pub fn compaction_lease_file(root: &Path) -> Path {
    meta_dir(root).join(LOCKS_FOLDER).join(COMPACTION_LEASE_FILE)
}

/// `<root>/.hoodie/.tributary/writers/<id>.json`: writer `id`'s state.
pub(crate) fn writer_state_file(root: &Path, id: &str) -> Path {
    meta_dir(root).join(TRIBUTARY_FOLDER).join("writers").join(format!("{id}.json"))
}

/// `<root>/.hoodie/.tributary/writers.json`: since when checkpoints are in
/// writer state files.
pub(crate) fn writers_since_file(root: &Path) -> Path {
    meta_dir(root).join(TRIBUTARY_FOLDER).join("writers.json")
}

/// `<table>/.hoodie` of a table in local folder `table`.
pub fn local_meta_dir(table: &std::path::Path) -> PathBuf {
    table.join(META_FOLDER)
}

/// `<table>/.hoodie/.aux/tributary.lock`: the OS file lock of instants.
pub fn local_instant_lock_file(table: &std::path::Path) -> PathBuf {
    local_meta_dir(table).join(AUX_FOLDER).join(INSTANT_LOCK_FILE)
}

/// `<table>/.hoodie/.aux/tributary-compaction.lock`: the OS file lock of
/// compactions.
pub fn local_compaction_lock_file(table: &std::path::Path) -> PathBuf {
    local_meta_dir(table).join(AUX_FOLDER).join(COMPACTION_LOCK_FILE)
}

/// `<table>/.hoodie/.temp`: a local table's default spill folder.
pub fn local_temp_dir(table: &std::path::Path) -> PathBuf {
    local_meta_dir(table).join(TEMP_FOLDER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_every_path_as_before() {
        let root = Path::from("t");
        let t = InstantTime::parse("20250101000000000").unwrap();
        assert_eq!(meta_dir(&root).as_ref(), "t/.hoodie");
        assert_eq!(properties_file(&root).as_ref(), "t/.hoodie/hoodie.properties");
        assert_eq!(properties_backup_file(&root).as_ref(), "t/.hoodie/hoodie.properties.backup");
        assert_eq!(timeline_dir(&root, 2, "timeline").as_ref(), "t/.hoodie/timeline");
        assert_eq!(timeline_dir(&root, 1, "timeline").as_ref(), "t/.hoodie");
        assert_eq!(
            history_dir(&timeline_dir(&root, 2, "timeline"), "archive/lsm").as_ref(),
            "t/.hoodie/timeline/archive/lsm"
        );
        assert_eq!(marker_dir(&root, &t).as_ref(), "t/.hoodie/.temp/20250101000000000");
        assert_eq!(heartbeat_file(&root, &t).as_ref(), "t/.hoodie/.heartbeat/20250101000000000");
        assert_eq!(metadata_table_dir(&root).as_ref(), "t/.hoodie/metadata");
        assert_eq!(hudi_lock_file(&root).as_ref(), "t/.hoodie/lock");
        assert_eq!(lease_lock_file(&root).as_ref(), "t/.hoodie/.locks/table_lock.json");
        assert_eq!(compaction_lease_file(&root).as_ref(), "t/.hoodie/.locks/tributary_compaction.json");
        assert_eq!(writer_state_file(&root, "w").as_ref(), "t/.hoodie/.tributary/writers/w.json");
        assert_eq!(writers_since_file(&root).as_ref(), "t/.hoodie/.tributary/writers.json");
        let dir = std::path::Path::new("/d/t");
        assert_eq!(local_instant_lock_file(dir), std::path::Path::new("/d/t/.hoodie/.aux/tributary.lock"));
        assert_eq!(
            local_compaction_lock_file(dir),
            std::path::Path::new("/d/t/.hoodie/.aux/tributary-compaction.lock")
        );
        assert_eq!(local_temp_dir(dir), std::path::Path::new("/d/t/.hoodie/.temp"));
    }
}
