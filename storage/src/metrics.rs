//! The one home of Tributary's metric names: what every crate records
//! through the [`metrics`] facade, and [`describe`], which tells an
//! installed recorder what each one means.
//!
//! Every metric carries the label `table`, the table folder's name
//! ([`TableLocation::name`](crate::TableLocation::name)). The library only
//! records; a process that wants the figures installs a recorder (the
//! `tributary` binary's `--metrics-addr` serves them to Prometheus). With
//! none installed, recording costs an atomic load.

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};

/// Counter: delta commits a writer completed.
pub const COMMITS: &str = "tributary_commits_total";
/// Counter: records written by completed commits, with label `op`
/// (`upsert` or `delete`).
pub const RECORDS_WRITTEN: &str = "tributary_records_written_total";
/// Gauge: the most log files any file group's latest slice holds, as a
/// reader merges them (committed logs not yet compacted).
pub const LOGS_PER_GROUP_MAX: &str = "tributary_file_group_logs_max";
/// Gauge: the 99th percentile of log files per file group with logs.
pub const LOGS_PER_GROUP_P99: &str = "tributary_file_group_logs_p99";
/// Gauge: the age of the oldest committed log no compaction has merged
/// yet, in seconds (0 when none).
pub const COMPACTION_LAG: &str = "tributary_compaction_lag_seconds";
/// Gauge: compactions planned and not yet completed.
pub const COMPACTIONS_PENDING: &str = "tributary_compactions_pending";
/// Counter: compactions completed.
pub const COMPACTIONS: &str = "tributary_compactions_total";
/// Counter: log records compactions merged.
pub const COMPACTED_RECORDS: &str = "tributary_compacted_records_total";
/// Gauge: tombstones the last compaction kept in the file groups it
/// merged (`docs/design.md`, "Tombstones").
pub const TOMBSTONES_HELD: &str = "tributary_tombstones_held";
/// Gauge: bytes of the tombstone logs the latest file slices hold.
pub const TOMBSTONE_LOG_BYTES: &str = "tributary_tombstone_log_bytes";
/// Histogram: seconds spent waiting to take the table lock.
pub const LOCK_WAIT: &str = "tributary_lock_wait_seconds";
/// Histogram: seconds the table lock was held.
pub const LOCK_HOLD: &str = "tributary_lock_hold_seconds";
/// Histogram: seconds spent under the lock waiting out the clock skew
/// (the wait-for-skew time mode).
pub const SKEW_WAIT: &str = "tributary_clock_skew_wait_seconds";
/// Counter: object-store requests, with label `kind` (`get`, `head`,
/// `list`, `put`, `delete`).
pub const STORE_REQUESTS: &str = "tributary_store_requests_total";
/// Counter: object-store requests that failed, with label `kind`.
pub const STORE_FAILURES: &str = "tributary_store_request_failures_total";
/// Counter: cleaning runs that removed something.
pub const CLEANS: &str = "tributary_cleans_total";
/// Counter: archiving runs.
pub const ARCHIVES: &str = "tributary_archives_total";
/// Counter: instants moved to the timeline's history.
pub const ARCHIVED_INSTANTS: &str = "tributary_archived_instants_total";
/// Gauge: instants in the active timeline, after the last archiving run.
pub const ACTIVE_INSTANTS: &str = "tributary_active_instants";
/// Histogram: seconds each table-service job of `serve` took, with label
/// `job` (`compaction`, `cleaning`, `archiving`).
pub const SERVICE_JOB: &str = "tributary_service_job_seconds";
/// Counter: table-service jobs that failed, with label `job`.
pub const SERVICE_FAILURES: &str = "tributary_service_failures_total";
/// Histogram: seconds a writer waited for compaction at the log bound
/// (backpressure, `docs/design.md`).
pub const BACKPRESSURE_WAIT: &str = "tributary_backpressure_wait_seconds";
/// Counter: commits that waited at the log bound.
pub const BACKPRESSURE_WAITS: &str = "tributary_backpressure_waits_total";
/// Counter: records an ingest job committed, with label `topic`.
pub const INGEST_RECORDS: &str = "tributary_ingest_records_total";
/// Counter: commits an ingest job made.
pub const INGEST_COMMITS: &str = "tributary_ingest_commits_total";
/// Counter: bad records an ingest job left out (skipped or
/// dead-lettered), with label `topic`.
pub const INGEST_BAD_RECORDS: &str = "tributary_ingest_bad_records_total";
/// Gauge: records after the last one an ingest job consumed, with labels
/// `topic` and `partition` (the Kafka client's consumer lag).
pub const INGEST_LAG: &str = "tributary_ingest_lag";

/// Describes every metric to the installed recorder: its unit and help
/// text. Call it once after installing one.
pub fn describe() {
    describe_counter!(COMMITS, Unit::Count, "Delta commits completed by writers");
    describe_counter!(RECORDS_WRITTEN, Unit::Count, "Records written by completed commits, by op");
    describe_gauge!(LOGS_PER_GROUP_MAX, Unit::Count, "Most uncompacted log files in one file group");
    describe_gauge!(LOGS_PER_GROUP_P99, Unit::Count, "99th percentile of uncompacted log files per file group");
    describe_gauge!(COMPACTION_LAG, Unit::Seconds, "Age of the oldest committed log not yet compacted");
    describe_gauge!(COMPACTIONS_PENDING, Unit::Count, "Compactions planned and not completed");
    describe_counter!(COMPACTIONS, Unit::Count, "Compactions completed");
    describe_counter!(COMPACTED_RECORDS, Unit::Count, "Records written by compactions");
    describe_gauge!(TOMBSTONES_HELD, Unit::Count, "Tombstones kept by the last compaction");
    describe_gauge!(TOMBSTONE_LOG_BYTES, Unit::Bytes, "Bytes of tombstone logs in the latest file slices");
    describe_histogram!(LOCK_WAIT, Unit::Seconds, "Time waiting to take the table lock");
    describe_histogram!(LOCK_HOLD, Unit::Seconds, "Time the table lock was held");
    describe_histogram!(SKEW_WAIT, Unit::Seconds, "Time waiting out the clock skew under the lock");
    describe_counter!(STORE_REQUESTS, Unit::Count, "Object-store requests, by kind");
    describe_counter!(STORE_FAILURES, Unit::Count, "Object-store requests that failed, by kind");
    describe_counter!(CLEANS, Unit::Count, "Cleaning runs that removed file slices");
    describe_counter!(ARCHIVES, Unit::Count, "Archiving runs");
    describe_counter!(ARCHIVED_INSTANTS, Unit::Count, "Instants moved to the timeline history");
    describe_gauge!(ACTIVE_INSTANTS, Unit::Count, "Instants in the active timeline after archiving");
    describe_histogram!(SERVICE_JOB, Unit::Seconds, "Time each table-service job took, by job");
    describe_counter!(SERVICE_FAILURES, Unit::Count, "Table-service jobs that failed, by job");
    describe_histogram!(BACKPRESSURE_WAIT, Unit::Seconds, "Time writers waited for compaction at the log bound");
    describe_counter!(BACKPRESSURE_WAITS, Unit::Count, "Commits that waited for compaction at the log bound");
    describe_counter!(INGEST_RECORDS, Unit::Count, "Records ingest jobs committed, by topic");
    describe_counter!(INGEST_COMMITS, Unit::Count, "Commits ingest jobs made");
    describe_counter!(INGEST_BAD_RECORDS, Unit::Count, "Bad records ingest jobs left out, by topic");
    describe_gauge!(INGEST_LAG, Unit::Count, "Records after the last one consumed, by topic and partition");
}
