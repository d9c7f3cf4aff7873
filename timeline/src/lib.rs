//! Table metadata for Tributary: the Hudi (table version 8, Merge-on-Read)
//! table configuration, the timeline of instants, TrueTime instant
//! generation under a table lock, and the file-system view that groups data
//! files into file slices by completion time.
//!
//! Where a table lives ([`TableLocation`]), the clock and the table locks
//! come from the `tributary-storage` crate and are re-exported here. The
//! only IO is [`object_store`] (plus the local OS file lock of
//! [`FileLock`]); the clock is injected through [`Clock`]. Every path under
//! a table's `.hoodie/` folder is named in one module, `layout`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> tributary_timeline::Result<()> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tributary_timeline::{InProcessLock, ManualClock, TimeGenerator, TimeMode};
//!
//! let clock = Arc::new(ManualClock::new(1_766_264_468_078));
//! let generator = TimeGenerator::new(TimeMode::HybridLogical, Duration::from_millis(200), clock.clone(),
//!                              Arc::new(InProcessLock::new()));
//! let a = generator.new_instant().await?;
//! clock.advance(-5_000); // the clock jumps back...
//! let b = generator.new_instant().await?;
//! assert_eq!(a.as_str(), "20251220210108078");
//! assert!(b > a); // ...but instants never do.
//! # Ok(()) }
//! ```

#![warn(unreachable_pub)]

mod bucket;
mod config;
mod error;
mod file_name;
mod fs_view;
mod history;
mod history_writer;
mod instant;
mod layout;
mod partition;
mod properties;
mod protocol;
mod schema;
mod timeline;
mod truetime;

pub use error::{Error, ErrorKind, Result};

// `hoodie.properties`: the table's configuration and its stored settings.
pub use config::{
    BucketHash, BucketSpec, CHANGE_LOG_BEGIN_KEY, CHANGE_LOG_MODE, CHANGE_LOG_WRITER, CHANGE_LOGGED_OPERATION,
    DEFAULT_MAX_LOGS_PER_FILE_GROUP, DEFAULT_TABLE_VERSION, MergeMode, NULL_PARTITION, NewTableConfig,
    SEQUENCE_GROUPS_STRATEGY_ID, SequenceGroup, TableConfig, TableType, TimeMode, TombstoneRetention,
    WRITABLE_VERSIONS, split_fields,
};
pub use properties::{StoredProperties, read_properties};
pub use schema::{SEQUENCE_GROUPS_KEY, SchemaInForce, schema_in_force};

// Instants, the timeline and its history, and instant generation.
pub use history::{
    ArchivedRow, History, HistoryFile, MANIFEST_PREFIX, VERSION_FILE, history_dir, latest_snapshot, snapshot_files,
};
pub use history_writer::{HistoryMaintenance, HistorySettings, HistoryWriter, history_schema};
pub use instant::{Action, Instant, InstantTime, State};
pub use timeline::{Instants, Timeline, TimelineFolder};
pub use truetime::{DEFAULT_MAX_CLOCK_SKEW, FirstHoldHook, TimeGenerator};

// Data files: names, partitions and the file-system view.
pub use bucket::BucketIndex;
pub use file_name::{BaseFileName, CHANGE_DATA_SUFFIX, LogFileName, WriteToken, bucket_of_file_id, nbcc_file_id};
pub use fs_view::{
    DataFile, FileGroup, FileSlice, FileSystemView, GroupId, PlannedGroups, ReplacedGroup, list_data_files,
    list_partition_files, planned_groups, replaced_groups, replaces_groups,
};
pub use partition::ensure_partition;

// Every path under `.hoodie/`.
pub use layout::{
    LOCAL_TIDY, PARTITION_METADATA, compaction_lease_file, hudi_lock_file, lease_lock_file, local_compaction_lock_file,
    local_instant_lock_file, local_location, local_meta_dir, local_temp_dir, parse_location, parse_location_with,
    properties_file, temp_dir, timeline_dir,
};

// The commit protocol's shared steps.
pub use protocol::{
    CHECKPOINT_KEY_PREFIX, Checkpoint, CommitFence, Completion, DEFAULT_HEARTBEAT_EXPIRY, Heartbeat, MARKER_APPEND,
    MARKER_CREATE, MetadataTableGuard, WriterState, WriterStatus, begin_instant, complete_instant,
    complete_instant_then_begin, complete_instant_with, create_marker, delete_all_if_exist, delete_if_exists,
    heartbeat_expired, heartbeat_path, list_markers, lookup_writer, mark_new_table, marked_file, marker_dir,
    remove_leftovers, remove_markers, rollback_files, withdraw_instant, withdraw_or_leave,
};

// Storage and locks live in `tributary-storage`; the types the layers above
// take and return are re-exported here.
/// The names of the metrics Tributary records, and their descriptions.
pub use tributary_storage::metrics;
pub use tributary_storage::{
    Clock, CountingStore, DurableLocalStore, Fence, FenceCheck, FileLock, HUDI_CLOCK_DRIFT, HudiFileLock,
    InProcessLock, LeaseLock, LeaseSettings, LockGuard, LockProvider, ManualClock, OffsetClock, RETRY, Requests,
    RetryPolicy, StoreFile, SystemClock, TAIL_BYTES, TableLocation, arrow_metadata_of_file, create_folder,
    partition_file,
};
/// The storage crate's error, which [`Error::Storage`] wraps.
pub use tributary_storage::{Error as StorageError, Result as StorageResult};

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}
    #[test]
    fn public_types_are_send_sync() {
        assert_send_sync::<super::TimeGenerator>();
        assert_send_sync::<super::Timeline>();
        assert_send_sync::<super::FileSystemView>();
        assert_send_sync::<super::TableLocation>();
        assert_send_sync::<super::TableConfig>();
        assert_send_sync::<super::Error>();
    }

    /// Futures that read the LSM history are `Send`, so writers and
    /// readers can spawn them (built, never polled).
    #[test]
    fn history_reading_futures_are_send() {
        fn assert_send<T: Send>(_: T) {}
        let loc = super::TableLocation::new(
            std::sync::Arc::new(object_store::memory::InMemory::new()),
            object_store::path::Path::from("t"),
        );
        let config = super::TableConfig::new_table(&super::NewTableConfig::new("t", "id", "ts", "{}"));
        let writer = super::TimelineFolder::new(&loc, &config);
        let done = super::Instant::requested(
            super::InstantTime::parse("20250101000000000").unwrap(),
            super::Action::DeltaCommit,
        );
        assert_send(super::Timeline::load(&loc, &config));
        assert_send(writer.read(&done, super::State::Completed));
        assert_send(writer.is_completed(&done));
        assert_send(super::protocol::writer_state::lookup_writer(&loc, &config, "w"));
    }
}
