//! What a running ingest job has done, readable while it runs.

use std::sync::atomic::AtomicU64;

/// Counters of a running job, readable while it runs
/// ([`Ingest::stats`](crate::Ingest::stats)).
#[derive(Debug, Default)]
pub struct IngestStats {
    /// Records committed to the table.
    pub records: AtomicU64,
    /// Records left out as bad ([`OnBadRecord::Skip`](crate::OnBadRecord::Skip),
    /// [`OnBadRecord::DeadLetter`](crate::OnBadRecord::DeadLetter)).
    pub bad_records: AtomicU64,
    /// Tombstones (null values) skipped.
    pub tombstones: AtomicU64,
    /// Commits made.
    pub commits: AtomicU64,
    /// Commits that failed and were retried from the committed offsets.
    pub retries: AtomicU64,
    /// Times consuming was paused because a full batch waited longer for
    /// the commit in flight than a moment (the writer waits out
    /// compaction's backpressure, say).
    pub pauses: AtomicU64,
    /// The partitions this process owns now.
    pub partitions: AtomicU64,
    /// Each fetched partition's lag (records after the last one consumed),
    /// from the client's statistics every few seconds.
    pub lag: std::sync::Mutex<std::collections::BTreeMap<(String, i32), i64>>,
    /// The requested instant of the last commit.
    pub last_commit: std::sync::Mutex<Option<String>>,
}

/// What a finished job did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestSummary {
    /// Records committed.
    pub records: u64,
    /// Commits made.
    pub commits: u64,
    /// Bad records left out.
    pub bad_records: u64,
}
