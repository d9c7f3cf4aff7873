//! Where a Tributary table lives, and the locks on it. Nothing here knows
//! Hudi's metadata: the timeline crate above names every path (the lock
//! files, the folders a delete tidies, [`LocalTidy`]) and passes it in.
//!
//! - [`TableLocation`]: a store and a root path, parsed from a URI (local
//!   folders, `memory://`, and with the `cloud` feature S3, GCS and Azure),
//!   with create-if-absent writes and retries ([`RETRY`]);
//! - [`DurableLocalStore`]: the local file system, fsynced, with Hadoop's
//!   `.crc` checksum sidecars kept as Hadoop keeps them;
//! - [`StoreFile`]: Parquet footers and byte ranges read through the store;
//! - [`Clock`]: the injected clock;
//! - the table locks behind [`LockProvider`]: [`InProcessLock`], the OS file
//!   lock [`FileLock`], the object-store lease [`LeaseLock`], and Hudi's
//!   lock file [`HudiFileLock`];
//! - [`CountingStore`]: a store wrapper that counts requests;
//! - [`metrics`]: the names of the metrics every crate records.
//!
//! The only IO is [`object_store`], plus the local OS file lock of
//! [`FileLock`] and the fsyncs of [`DurableLocalStore`].

#![warn(unreachable_pub)]

mod clock;
mod counting;
mod error;
mod hudi_lock;
mod lease;
mod location;
mod lock;
pub mod metrics;
mod parquet_file;
mod store;

pub use error::{Error, ErrorKind, Result};

// Where a table lives, and its store.
pub use counting::{CountingStore, Requests};
pub use location::{
    RETRY, RetryPolicy, TableLocation, delete_all_if_exist, delete_if_exists, join_relative, partition_file,
};
pub use parquet_file::{StoreFile, TAIL_BYTES, arrow_metadata_of_file};
pub use store::{DurableLocalStore, FOLDER_PLACEHOLDER, LocalTidy, create_folder};

// Time and locks.
pub use clock::{Clock, ManualClock, OffsetClock, SystemClock};
pub use hudi_lock::HudiFileLock;
pub use lease::{HUDI_CLOCK_DRIFT, LeaseLock, LeaseSettings};
pub use lock::{Fence, FenceCheck, FileLock, InProcessLock, LockGuard, LockProvider};

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}
    #[test]
    fn public_types_are_send_sync() {
        assert_send_sync::<super::TableLocation>();
        assert_send_sync::<super::DurableLocalStore>();
        assert_send_sync::<super::LeaseLock>();
        assert_send_sync::<super::HudiFileLock>();
        assert_send_sync::<super::FileLock>();
        assert_send_sync::<super::Error>();
    }
}
