//! What a compactor sees of a table's health each time it plans, recorded
//! as metrics ([`tributary_timeline::metrics`]): the uncompacted logs per
//! file group (the most and the 99th percentile), the age of the oldest
//! uncompacted log (compaction lag), the pending compactions and the
//! tombstone logs held; and what each compaction did.

use std::collections::BTreeSet;

use tributary_timeline::metrics::{
    COMPACTED_RECORDS, COMPACTION_LAG, COMPACTIONS, COMPACTIONS_PENDING, LOGS_PER_GROUP_MAX, LOGS_PER_GROUP_P99,
    TOMBSTONE_LOG_BYTES, TOMBSTONES_HELD,
};
use tributary_timeline::{FileSystemView, InstantTime, TableLocation, Timeline};

/// The uncompacted logs of a table's file groups, as a reader of the latest
/// slices merges them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogSpread {
    /// File groups whose latest slice holds logs.
    pub groups_with_logs: usize,
    /// The most logs one group holds.
    pub max: usize,
    /// The 99th percentile of logs over the groups holding any.
    pub p99: usize,
    /// When the oldest of those logs completed.
    pub oldest: Option<InstantTime>,
    /// Bytes of the tombstone logs of the latest slices.
    pub tombstone_log_bytes: u64,
    /// The commits on the active timeline the view was loaded with, as
    /// archiving's bounds count them (commits completed and not archived).
    pub active_commits: usize,
}

impl LogSpread {
    /// The spread over `view`'s latest slices, as a reader sees them
    /// while the compactions `pending` run. A slice's own tombstone log is
    /// not counted among its logs.
    pub fn of(view: &FileSystemView, pending: &BTreeSet<InstantTime>) -> Self {
        let mut counts = Vec::new();
        let mut spread = LogSpread::default();
        for group in view.groups() {
            let Some(slice) = group.latest_merged(pending) else { continue };
            let mut logs = 0;
            for log in &slice.logs {
                if slice.is_tombstone_log(log) {
                    spread.tombstone_log_bytes += log.file.size;
                    continue;
                }
                logs += 1;
                if spread.oldest.as_ref().is_none_or(|o| &log.completed < o) {
                    spread.oldest = Some(log.completed.clone());
                }
            }
            if logs > 0 {
                counts.push(logs);
            }
        }
        counts.sort_unstable();
        spread.groups_with_logs = counts.len();
        spread.max = counts.last().copied().unwrap_or(0);
        spread.p99 = match counts.len() {
            0 => 0,
            n => counts[(n * 99).div_ceil(100).saturating_sub(1)],
        };
        spread
    }
}

/// The gauges and counters a compactor records for its table.
#[derive(Debug, Clone)]
pub(crate) struct CompactionMeters {
    logs_max: metrics::Gauge,
    logs_p99: metrics::Gauge,
    lag: metrics::Gauge,
    pending: metrics::Gauge,
    tombstone_bytes: metrics::Gauge,
    tombstones: metrics::Gauge,
    compactions: metrics::Counter,
    records: metrics::Counter,
}

impl CompactionMeters {
    /// The meters of the table at `loc`, for the recorder installed now.
    pub(crate) fn new(loc: &TableLocation) -> Self {
        let table = loc.name();
        let gauge = |name: &'static str| metrics::gauge!(name, "table" => table.clone());
        let counter = |name: &'static str| metrics::counter!(name, "table" => table.clone());
        Self {
            logs_max: gauge(LOGS_PER_GROUP_MAX),
            logs_p99: gauge(LOGS_PER_GROUP_P99),
            lag: gauge(COMPACTION_LAG),
            pending: gauge(COMPACTIONS_PENDING),
            tombstone_bytes: gauge(TOMBSTONE_LOG_BYTES),
            tombstones: gauge(TOMBSTONES_HELD),
            compactions: counter(COMPACTIONS),
            records: counter(COMPACTED_RECORDS),
        }
    }

    /// Records what a plan saw: `view` at `timeline`, at `now_ms`.
    pub(crate) fn observe(&self, timeline: &Timeline, view: &FileSystemView, now_ms: i64) -> LogSpread {
        let pending: BTreeSet<InstantTime> = timeline.pending_compactions().map(|i| i.requested.clone()).collect();
        let mut spread = LogSpread::of(view, &pending);
        spread.active_commits = crate::archive::active_commits(timeline);
        self.logs_max.set(spread.max as f64);
        self.logs_p99.set(spread.p99 as f64);
        let lag_ms = spread.oldest.as_ref().and_then(InstantTime::to_millis).map_or(0, |t| (now_ms - t).max(0));
        self.lag.set(lag_ms as f64 / 1000.0);
        self.pending.set(pending.len() as f64);
        self.tombstone_bytes.set(spread.tombstone_log_bytes as f64);
        spread
    }

    /// Records a completed compaction: the records it wrote and the
    /// tombstones it kept.
    pub(crate) fn compacted(&self, records: u64, tombstones: u64) {
        self.records.increment(records);
        self.tombstones.set(tombstones as f64);
        self.compactions.increment(1);
    }
}
