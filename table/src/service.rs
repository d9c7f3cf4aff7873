//! The table services as one long-running loop: rollback of failed writes,
//! compaction, the change log, cleaning and archiving of one table, each on its own
//! schedule ([`ServiceSchedule`]), until a shutdown signal. `tributary
//! serve` runs one per table.
//!
//! Each job runs to its end; the shutdown signal is looked at between
//! jobs and while waiting, so a stop takes at most one job's time. Two
//! such loops on one table are safe: the compactor and the cleaner take
//! the compaction lock, archiving the table lock, so only one does each
//! job at a time and the other finds nothing left. A job's error is
//! reported ([`ServiceEvent::Failed`]) and the loop goes on: the next
//! round retries it, as an unavailable store or a lost lock asks. Only
//! invalid settings end it.

use std::future::Future;
use std::time::Duration;

use tributary_compaction::{
    ArchiveSettings, ArchiveSummary, CleanRetention, CleanSummary, CompactionSummary, CompactorSettings,
};

use crate::error::{Error, Result};
use crate::table::Table;

/// Which services run, and how often.
#[derive(Debug, Clone)]
pub struct ServiceSchedule {
    /// How often compaction runs (it rolls back failed writes first).
    pub compact_every: Duration,
    /// The compactor's settings.
    pub compactor: CompactorSettings,
    /// How often cleaning runs at the least; `None` for never. It also
    /// runs, before archiving, whenever archiving is due early (see
    /// `archive_every`).
    pub clean_every: Option<Duration>,
    /// What cleaning keeps: the file slices the last N commits need, or
    /// those the commits of the last N hours need.
    pub retention: CleanRetention,
    /// How often archiving runs at the least; `None` for never. As Hudi
    /// archives after any commit that leaves more than
    /// `hoodie.keep.max.commits` commits active, archiving
    /// (with cleaning first, whose retained range it must not pass) also
    /// runs as soon as a compaction round sees that many, and at least
    /// `keep.max − keep.min` more than the last archiving run left (so a
    /// run that could archive nothing is not repeated every round), at most
    /// once a second. The
    /// active timeline, which every commit and read lists, then stays near
    /// what the rules of archiving must keep, whatever the commit rate.
    pub archive_every: Option<Duration>,
    /// What archiving keeps.
    pub archive: ArchiveSettings,
    /// How often the change log records the commits completed since its
    /// last run, on a table that keeps one ([`Table::change_log_writer`]);
    /// `None` for never. Change-log writers share their writer id, so of
    /// two loops on one table whose runs overlap, the first to complete
    /// wins and the other's run fails with a conflict and is retried.
    pub change_log_every: Option<Duration>,
}

impl Default for ServiceSchedule {
    /// Compaction every 10 s, the change log every 10 s, cleaning every 5
    /// minutes (keeping 10 commits, Hudi's default), archiving every 5
    /// minutes (Hudi's bounds).
    fn default() -> Self {
        Self {
            compact_every: Duration::from_secs(10),
            compactor: CompactorSettings::default(),
            clean_every: Some(Duration::from_secs(300)),
            retention: CleanRetention::Commits(10),
            archive_every: Some(Duration::from_secs(300)),
            archive: ArchiveSettings::default(),
            change_log_every: Some(Duration::from_secs(10)),
        }
    }
}

impl ServiceSchedule {
    /// Checks the schedule, naming what is wrong.
    pub fn validate(&self) -> Result<()> {
        let invalid = |what: &str, reason: &str| Error::InvalidInput { what: what.into(), reason: reason.into() };
        if self.compact_every.is_zero() {
            return Err(invalid("compaction interval", "must be above zero"));
        }
        if self.clean_every.is_some_and(|d| d.is_zero()) {
            return Err(invalid("cleaning interval", "must be above zero"));
        }
        if self.archive_every.is_some_and(|d| d.is_zero()) {
            return Err(invalid("archiving interval", "must be above zero"));
        }
        if self.change_log_every.is_some_and(|d| d.is_zero()) {
            return Err(invalid("change-log interval", "must be above zero"));
        }
        self.retention.validate()?;
        Ok(self.archive.validate()?)
    }
}

/// A job a service loop ran, as it reports it.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServiceEvent {
    /// Compaction ran (with the rollback of failed writes before it).
    Compacted {
        /// The compactions it completed.
        done: Vec<CompactionSummary>,
        /// How long the job took.
        took: Duration,
    },
    /// Cleaning ran.
    Cleaned {
        /// What it removed; `None` when nothing needed removing.
        done: Option<CleanSummary>,
        /// How long the job took.
        took: Duration,
    },
    /// Archiving ran.
    Archived {
        /// What it archived.
        done: ArchiveSummary,
        /// How long the job took.
        took: Duration,
    },
    /// The change log ran.
    ChangeLogged {
        /// What it recorded; `None` when no commit completed since its last run.
        done: Option<crate::ChangeLogCommit>,
        /// How long the job took.
        took: Duration,
    },
    /// A job failed; the loop goes on and the next round retries it.
    Failed {
        /// The job: `compaction`, `change log`, `cleaning` or `archiving`.
        job: &'static str,
        /// Why.
        error: Error,
    },
}

/// What a service loop did before it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServiceReport {
    /// Compaction rounds run.
    pub compactions: u64,
    /// Cleaning rounds run.
    pub cleans: u64,
    /// Archiving rounds run.
    pub archives: u64,
    /// Change-log rounds run.
    pub change_logs: u64,
    /// Jobs that failed.
    pub failures: u64,
}

/// Runs the table services of `table` on `schedule` until `shutdown`
/// completes, reporting each job to `on_event`. Returns what it did; an
/// error only for an invalid schedule.
pub async fn serve(
    table: &Table,
    schedule: &ServiceSchedule,
    shutdown: impl Future<Output = ()>,
    mut on_event: impl FnMut(ServiceEvent),
) -> Result<ServiceReport> {
    schedule.validate()?;
    let compactor = table.compactor(schedule.compactor.clone()).await?;
    let mut report = ServiceReport::default();
    let start = tokio::time::Instant::now();
    let mut next_compact = start;
    let mut next_clean = schedule.clean_every.map(|d| start + d);
    let mut next_archive = schedule.archive_every.map(|d| start + d);
    let change_log = schedule.change_log_every.filter(|_| table.config().change_log().unwrap_or(false));
    let mut next_change_log = change_log.map(|d| start + d);
    let mut archiving = ArchiveTrigger::new(&schedule.archive);
    tokio::pin!(shutdown);
    loop {
        let now = tokio::time::Instant::now();
        // The job due the longest runs first (compaction, then the change
        // log, cleaning and archiving on a tie): a job that takes longer
        // than its interval, or compaction again at once near the bound,
        // never keeps the others from their turn.
        let jobs = [
            (Some(next_compact), Job::Compact),
            (next_change_log, Job::ChangeLog),
            (next_clean, Job::Clean),
            (next_archive, Job::Archive),
        ];
        let next = jobs.into_iter().filter_map(|(due, job)| Some((due.filter(|d| now >= *d)?, job))).min();
        if let Some((_, Job::Compact)) = next {
            report.compactions += 1;
            let mut again = false;
            let (result, took) = timed(table, "compaction", compactor.run_once()).await;
            match result {
                Ok(done) => {
                    // Writers wait at the bound on logs per file group:
                    // when a group is halfway there, compact again at once.
                    let spread = compactor.last_spread();
                    again = !done.is_empty() && near_bound(table, spread.as_ref());
                    if next_archive.is_some() && spread.is_some_and(|s| archiving.due(s.active_commits)) {
                        next_clean = next_clean.map(|_| now);
                        next_archive = Some(now);
                    }
                    on_event(ServiceEvent::Compacted { done, took });
                }
                Err(e) => fail(&mut report, &mut on_event, table, "compaction", e.into()),
            }
            next_compact = tokio::time::Instant::now() + if again { Duration::ZERO } else { schedule.compact_every };
        } else if let Some((due, Job::ChangeLog)) = next {
            report.change_logs += 1;
            let run = async { table.change_log_writer().await?.run_once().await };
            match timed(table, "change log", run).await {
                (Ok(done), took) => on_event(ServiceEvent::ChangeLogged { done, took }),
                (Err(e), _) => fail(&mut report, &mut on_event, table, "change log", e),
            }
            next_change_log = change_log.map(|d| due.max(tokio::time::Instant::now()) + d);
        } else if let Some((due, Job::Clean)) = next {
            report.cleans += 1;
            match timed(table, "cleaning", table.clean_with(schedule.retention)).await {
                (Ok(done), took) => on_event(ServiceEvent::Cleaned { done, took }),
                (Err(e), _) => fail(&mut report, &mut on_event, table, "cleaning", e),
            }
            next_clean = schedule.clean_every.map(|d| due.max(tokio::time::Instant::now()) + d);
        } else if let Some((due, Job::Archive)) = next {
            report.archives += 1;
            archiving.started();
            match timed(table, "archiving", table.archive(&schedule.archive)).await {
                (Ok(done), took) => {
                    archiving.ran(done.active_commits);
                    on_event(ServiceEvent::Archived { done, took })
                }
                (Err(e), _) => fail(&mut report, &mut on_event, table, "archiving", e),
            }
            next_archive = schedule.archive_every.map(|d| due.max(tokio::time::Instant::now()) + d);
        } else {
            let wake = [Some(next_compact), next_change_log, next_clean, next_archive]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now);
            tokio::select! {
                () = &mut shutdown => return Ok(report),
                () = tokio::time::sleep_until(wake) => {}
            }
            continue;
        }
        // Between jobs: a stop that came meanwhile ends the loop here.
        if futures::poll!(&mut shutdown).is_ready() {
            return Ok(report);
        }
    }
}

/// Runs `job`, recording how long it took as
/// `tributary_service_job_seconds{job}`.
async fn timed<T>(table: &Table, job: &'static str, run: impl Future<Output = T>) -> (T, Duration) {
    let start = std::time::Instant::now();
    let out = run.await;
    let took = start.elapsed();
    metrics::histogram!(crate::metrics::SERVICE_JOB, "table" => table.location().name(), "job" => job).record(took);
    (out, took)
}

/// The jobs of a service loop, in the order they run when due at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Job {
    Compact,
    ChangeLog,
    Clean,
    Archive,
}

/// When archiving is due before its interval: Hudi's trigger (more than
/// `keep.max` commits active), once the active commits have also grown by
/// `keep.max − keep.min` since the last run left them.
///
/// Early runs are at most one per [`EARLY_ARCHIVING_GAP`].
#[derive(Debug)]
struct ArchiveTrigger {
    keep_max: usize,
    step: usize,
    left: usize,
    last: Option<tokio::time::Instant>,
}

/// The least time between two archiving runs that [`ArchiveTrigger`]
/// starts early. A run holds the table lock, which every commit waits for,
/// and costs a history file whatever it archives; at one a second the
/// active timeline still stays within a second's commits of the bound.
const EARLY_ARCHIVING_GAP: Duration = Duration::from_secs(1);

impl ArchiveTrigger {
    fn new(settings: &ArchiveSettings) -> Self {
        let step = settings.keep_max_commits.saturating_sub(settings.keep_min_commits).max(1);
        Self { keep_max: settings.keep_max_commits, step, left: 0, last: None }
    }

    /// Whether `active` commits call for archiving now.
    fn due(&self, active: usize) -> bool {
        let rested = self.last.is_none_or(|l| l.elapsed() >= EARLY_ARCHIVING_GAP);
        rested && active > self.keep_max && active >= self.left + self.step
    }

    /// An archiving run starts (whether it then succeeds or not).
    fn started(&mut self) {
        self.last = Some(tokio::time::Instant::now());
    }

    /// An archiving run left `active` commits active.
    fn ran(&mut self, active: usize) {
        self.left = active;
    }
}

/// Whether the compactor's last plan found a file group holding at least
/// half the table's bound on uncompacted logs.
fn near_bound(table: &Table, spread: Option<&tributary_compaction::LogSpread>) -> bool {
    match (table.config().max_logs_per_file_group, spread) {
        (Some(bound), Some(s)) => s.max * 2 >= bound,
        _ => false,
    }
}

fn fail(
    report: &mut ServiceReport,
    on_event: &mut impl FnMut(ServiceEvent),
    table: &Table,
    job: &'static str,
    error: Error,
) {
    report.failures += 1;
    metrics::counter!(crate::metrics::SERVICE_FAILURES, "table" => table.location().name(), "job" => job).increment(1);
    tracing::warn!(job, error = %error, "table service job failed; the next round retries it");
    on_event(ServiceEvent::Failed { job, error });
}
