//! Tributary's table API: building, opening and creating a table
//! ([`TableBuilder`], [`Table`]), writing ([`WriteClient`],
//! [`write_json_lines`]), scanning and reading ([`Table::scan`],
//! [`Table::read`]), ingest from Kafka, and the table services (compaction,
//! cleaning, archiving, [`serve`]).
//!
//! Programs import the `tributary` crate, which re-exports this one whole
//! with the SQL provider beside it; this crate exists so that providers
//! built on the table API (`tributary-datafusion`) and the `tributary`
//! binary can share it.

mod builder;
mod change_log;
mod changes;
mod checkpoint;
mod components;
mod create_options;
mod error;
mod incremental;
mod json_lines;
#[cfg(feature = "kafka")]
mod kafka;
mod predicate;
mod read;
mod scan;
mod schema;
mod service;
mod settings;
mod statistics;
mod table;

// The table: building, opening and creating it, and its settings.
pub use builder::TableBuilder;
pub use create_options::CreateOptions;
pub use settings::{LockKind, TableSettings, TimeSettings};
pub use table::Table;
pub use tributary_timeline::{
    BucketHash, BucketSpec, DEFAULT_MAX_LOGS_PER_FILE_GROUP, DEFAULT_TABLE_VERSION, MergeMode, SequenceGroup,
    TableConfig, TableLocation, TableType, TombstoneRetention, WRITABLE_VERSIONS, local_location, parse_location,
    parse_location_with,
};

// Errors: the root crate's error, what the caller can do about it, and the
// errors of the crates it wraps (its variants carry them).
pub use error::{Error, Result};
/// Errors of compaction, rollback and cleaning ([`Error::Compaction`]).
pub use tributary_compaction::Error as CompactionError;
/// Errors of the Hudi file formats ([`Error::Format`]).
pub use tributary_format::Error as FormatError;
/// What a failed call's caller can do: fix the input, retry, start over, or
/// report a bug ([`Error::kind`]).
pub use tributary_format::ErrorKind;
/// Errors of reading and merging file slices ([`Error::Merge`]).
pub use tributary_merge::Error as MergeError;
/// Errors of the timeline, and of the stores and locks beneath it ([`Error::Timeline`]).
pub use tributary_timeline::Error as TimelineError;
/// Errors of stores and locks (wrapped by [`TimelineError`]).
pub use tributary_timeline::StorageError;
/// Errors of the write client ([`Error::Writer`]).
pub use tributary_writer::Error as WriterError;

// Time: clocks a table reads, and the TrueTime instants it issues.
pub use tributary_timeline::{
    Clock, DEFAULT_MAX_CLOCK_SKEW, ManualClock, OffsetClock, SystemClock, TimeGenerator, TimeMode,
};

// The timeline: instants, their actions and states, and file slices.
pub use tributary_timeline::{Action, FileGroup, FileSlice, FileSystemView, Instant, InstantTime, State, Timeline};

// Locks that serialise a table's instants and its compactors.
pub use tributary_timeline::{
    FileLock, HudiFileLock, InProcessLock, LeaseLock, LeaseSettings, LockGuard, LockProvider,
};

// Writing: write clients ([`Table::write_client`]), their commits, and the
// checkpoints writer ids commit with their data.
pub use tributary_writer::{Checkpoint, Commit, CommitSummary, Rows, WriteClient, WriteSettings, WriterStatus};

// Ingest: JSON lines decoded while earlier blocks are written.
pub use json_lines::{JsonLinesOptions, JsonLinesProgress, JsonLinesSummary, write_json_lines};

/// Exactly-once ingest from Kafka ([`Table::ingest`], `tributary ingest`).
#[cfg(feature = "kafka")]
pub mod ingest {
    pub use tributary_ingest::{
        Error, Ingest, IngestSettings, IngestStats, IngestSummary, KeyFrom, OnBadRecord, StartAt, ValueFormat,
    };
}

// Compaction, cleaning and archiving ([`Table::compactor`],
// [`Table::clean`] and [`Table::clean_with`], [`Table::archive`]).
pub use tributary_compaction::{ArchiveSettings, ArchiveSummary, Retained};
pub use tributary_compaction::{CleanRetention, CleanSummary};
pub use tributary_compaction::{CompactionSummary, Compactor, CompactorSettings};
pub use tributary_compaction::{LogSpread, PlanSettings};
pub use tributary_timeline::{HistoryMaintenance, HistorySettings};

// The metrics the library records through the `metrics` facade: their
// names, and `metrics::describe` for an installed recorder.
pub use tributary_timeline::metrics;

// The table services as one long-running loop (`tributary serve`).
pub use service::{ServiceEvent, ServiceReport, ServiceSchedule, serve};

// Reading ([`Table::read`]).
pub use change_log::{ChangeLogCommit, ChangeLogWriter};
pub use changes::{
    CHANGE_AFTER, CHANGE_BEFORE, CHANGE_COMMIT_TIME, CHANGE_COMPLETION_TIME, CHANGE_KEY, CHANGE_OP, CHANGE_PARTITION,
    Changes,
};
pub use predicate::{CompareOp, Literal, Predicate};
pub use read::{Query, ReadOptions};
pub use scan::{Scan, ScanPlan, ScanStream};
pub use schema::{Alteration, SchemaAt};
pub use tributary_format::{SchemaChange, TableSchema};
pub use tributary_timeline::{CHANGE_LOG_BEGIN_KEY, CHANGE_LOG_WRITER};

/// Arrow, whose record batches writes take and reads return.
pub use arrow;
/// `object_store`, the one IO of a table: the stores a [`TableLocation`]
/// and a spill folder ([`TableBuilder::with_spill_store`]) are made of.
pub use object_store;
/// The table metadata crate (timeline, TrueTime, locks, file slices), for
/// what this list leaves out.
pub use tributary_timeline as timeline;

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_sync() {
        assert_send_sync::<super::Table>();
        assert_send_sync::<super::TableBuilder>();
        assert_send_sync::<super::TableSettings>();
        assert_send_sync::<super::TimeSettings>();
        assert_send_sync::<super::LockKind>();
        assert_send_sync::<super::CreateOptions>();
        assert_send_sync::<super::ReadOptions>();
        assert_send_sync::<super::Error>();
    }
}
