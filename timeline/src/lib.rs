//! Table metadata for Tributary: the Hudi (table version 8, Merge-on-Read)
//! table configuration, the timeline of instants, TrueTime instant
//! generation under a table lock, and the file-system view that groups data
//! files into file slices by completion time.
//!
//! Where a table lives ([`TableLocation`]), the clock and the table locks
//! come from the `tributary-storage` crate and are re-exported here at the
//! paths they had. The only IO is [`object_store`] (plus the local OS file
//! lock of [`lock::FileLock`]); the clock is injected through [`Clock`].
//! Every path under a table's `.hoodie/` folder is named in [`layout`].
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

pub mod config;
pub mod error;
pub mod file_name;
pub mod fs_view;
pub mod history;
pub mod instant;
pub mod layout;
pub mod partition;
pub mod properties;
pub mod protocol;
pub mod timeline;
pub mod truetime;

// Storage and locks live in `tributary-storage`; their modules and types
// stay reachable at the paths they had here.
pub use config::{
    BucketHash, BucketSpec, MergeMode, NewTableConfig, SequenceGroup, TableConfig, TableType, TombstoneRetention,
};
pub use error::{Error, ErrorKind, Result};
pub use file_name::{BaseFileName, LogFileName, WriteToken, nbcc_file_id};
pub use fs_view::{FileGroup, FileSlice, FileSystemView};
pub use instant::{Action, Instant, InstantTime, State};
pub use timeline::{Timeline, TimelineWriter};
pub use tributary_storage::{
    Clock, DurableLocalStore, Fence, FenceCheck, FileLock, HUDI_CLOCK_DRIFT, HudiFileLock, InProcessLock, LeaseLock,
    LeaseSettings, LockGuard, LockProvider, ManualClock, OffsetClock, RETRY, RetryPolicy, SystemClock, TableLocation,
};
/// The storage crate's error, which [`Error::Storage`] wraps.
pub use tributary_storage::{Error as StorageError, Result as StorageResult};
pub use tributary_storage::{clock, counting, hudi_lock, lease, location, lock, parquet_file, store};
pub use truetime::{DEFAULT_MAX_CLOCK_SKEW, FirstHoldHook, TimeGenerator, TimeMode};

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
        let writer = super::TimelineWriter::new(&loc, &config);
        let done = super::Instant::requested(
            super::InstantTime::parse("20250101000000000").unwrap(),
            super::Action::DeltaCommit,
        );
        assert_send(super::Timeline::load(&loc, &config));
        assert_send(writer.read(&done, super::State::Completed));
        assert_send(writer.is_completed(&done));
        assert_send(super::protocol::writer_state::lookup(&loc, &config, "w"));
    }
}
