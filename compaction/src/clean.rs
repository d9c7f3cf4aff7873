//! Cleaning: deleting the file slices no retained commit needs, under
//! Hudi's two policies that retain by commits ([`CleanRetention`]):
//! `KEEP_LATEST_COMMITS` and `KEEP_LATEST_BY_HOURS`.
//!
//! Each policy names the *earliest commit to retain*; every completed data
//! commit (delta commit or compaction) from it on must stay readable: time
//! travel to its instant and incremental reads over it.
//!
//! - `KEEP_LATEST_COMMITS` (`hoodie.cleaner.commits.retained`): the oldest
//!   of the last N completed data commits, by completion time.
//! - `KEEP_LATEST_BY_HOURS` (`hoodie.cleaner.hours.retained`), as Hudi's
//!   `CleanerUtils.getEarliestCommitToRetain`: the completed data commit
//!   with the smallest *requested* time at or after now minus N hours, read
//!   from the clock of the clean's time generator (never the system's) and
//!   compared as instant times (UTC, as Tributary issues them). With no
//!   commit requested in the window there is none, and, as in Hudi,
//!   nothing is cleaned.
//!
//! Like Hudi's commits policy, the earliest commit to retain is then moved
//! back to the oldest pending data instant when that is older; Tributary
//! does so under both policies (Hudi's hours policy does not, and moving
//! back only ever keeps more). Then, conservatively, a file
//! slice (its base file and logs) is deleted only when a newer slice of its
//! file group has a base file whose commit completed before the earliest
//! commit to retain was requested. Every reader of a retained instant sees
//! that newer base, and every log that completed after it sits in its slice
//! or a later one, so nothing a retained instant needs is removed. Slices
//! behind a pending compaction stay (its slice has no completed base), and so
//! do log-only file groups. A file group a `replacecommit` replaced (insert
//! overwrite, clustering by a Java writer) goes whole once that commit
//! completed before the earliest commit to retain was requested. The plan
//! and the clean metadata record the policy by Hudi's name.
//!
//! ```text
//!  clean                                      table lock          storage
//!    |  list the data files, then load the timeline
//!    |  delete orphans (files of instants on neither) ---------------------->|
//!    |  plan from the timeline and the file-system view
//!    |  acquire ------------------------------->|
//!    |  R = next time; no other clean pending?
//!    |  create <R>.clean.requested (Avro HoodieCleanerPlan) ---------------->|
//!    |  release <-------------------------------|
//!    |  create <R>.clean.inflight (the plan again, as Java writes it) ------>|
//!    |  delete the planned files -------------------------------------------->|
//!    |  acquire ------------------------------->|
//!    |  c = next time; create <R>_<c>.clean (HoodieCleanMetadata) ---------->|
//!    |  release <-------------------------------|
//! ```
//!
//! Orphans are data files of withdrawn instants, which Hudi's readers could
//! take for archived ones ([`crate::rollback::delete_orphans`]); they are
//! no part of any slice and need no plan.
//!
//! A clean interrupted anywhere stays pending; the next call finishes it
//! from its plan before planning anything new. Plans list files as `/` plus their
//! object-store path (see [`crate::rollback`]); the completed metadata lists
//! bare file names per partition, as Java does. Tables with savepoints are
//! not cleaned (savepointed files are not tracked here).

use std::collections::BTreeMap;

use tributary_format::{
    ActionInstant, CleanFileInfo, CleanMetadata, CleanPartitionMetadata, CleanerPlan, KEEP_LATEST_COMMITS,
};
use tributary_timeline::{
    Action, Instant, InstantTime, State, TableConfig, TableLocation, TimeGenerator, Timeline, TimelineFolder,
};
use tributary_timeline::{FileSystemView, list_data_files, planned_groups};

use crate::error::{Error, Result};
use tributary_timeline::{Completion, complete_instant, delete_all_if_exist};

use crate::rollback::{file_name, fs_path};
use tributary_timeline::partition_file;

/// Hudi's name of the hours policy (`HoodieCleaningPolicy`), as plans and
/// clean metadata record it.
const KEEP_LATEST_BY_HOURS: &str = "KEEP_LATEST_BY_HOURS";

/// An hour, in milliseconds.
const HOUR_MILLIS: i64 = 3_600_000;

/// What a clean keeps: one of Hudi's cleaning policies that retain by
/// commits (`hoodie.cleaner.policy`), with its setting. The default is
/// Hudi's: the last 10 commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CleanRetention {
    /// `KEEP_LATEST_COMMITS` with `hoodie.cleaner.commits.retained`: the
    /// file slices the last N completed data commits need. At least 1.
    Commits(usize),
    /// `KEEP_LATEST_BY_HOURS` with `hoodie.cleaner.hours.retained` (Hudi's
    /// default is [`CleanRetention::DEFAULT_HOURS`]): the file slices every
    /// completed data commit requested in the last N hours needs, by the
    /// clock of the clean's time generator. With no commit requested in
    /// that window nothing is cleaned, as in Hudi. At least 1.
    Hours(u32),
}

impl Default for CleanRetention {
    /// `KEEP_LATEST_COMMITS`, 10 commits (Hudi's defaults).
    fn default() -> Self {
        CleanRetention::Commits(10)
    }
}

impl CleanRetention {
    /// Hudi's default `hoodie.cleaner.hours.retained`.
    pub const DEFAULT_HOURS: u32 = 24;

    /// The policy's name as Hudi writes it (`hoodie.cleaner.policy`, and
    /// `policy` in cleaner plans and clean metadata).
    pub fn policy(&self) -> &'static str {
        match self {
            CleanRetention::Commits(_) => KEEP_LATEST_COMMITS,
            CleanRetention::Hours(_) => KEEP_LATEST_BY_HOURS,
        }
    }

    /// Checks the setting, naming it when it is wrong.
    pub fn validate(&self) -> Result<()> {
        let (what, zero) = match self {
            CleanRetention::Commits(n) => ("hoodie.cleaner.commits.retained", *n == 0),
            CleanRetention::Hours(h) => ("hoodie.cleaner.hours.retained", *h == 0),
        };
        if zero {
            return Err(Error::Invalid { what: what.into(), reason: "must be at least 1".into() });
        }
        Ok(())
    }
}

impl std::fmt::Display for CleanRetention {
    /// The policy and its setting: `KEEP_LATEST_BY_HOURS (24 hours)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CleanRetention::Commits(n) => write!(f, "{} ({n} commits)", self.policy()),
            CleanRetention::Hours(h) => write!(f, "{} ({h} hours)", self.policy()),
        }
    }
}

/// What one clean did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CleanSummary {
    /// The clean's instant.
    pub instant: InstantTime,
    /// When the clean completed.
    pub completed: InstantTime,
    /// The earliest commit retained (the plan's `earliestInstantToRetain`; empty if it had none).
    pub earliest_commit_to_retain: String,
    /// The files deleted (or found already gone), relative to the table root.
    pub deleted_files: Vec<String>,
}

/// Deletes the file slices that no commit `retention` keeps needs (the
/// last N completed data commits, or those requested in the last N hours
/// by the clock of `time`), recording a `clean` instant. Returns `None`,
/// having written nothing, when there is nothing to delete.
///
/// A clean left pending by an earlier call is finished first, and that call
/// plans nothing new. `retention` must be valid ([`CleanRetention::validate`]).
pub async fn clean(
    loc: &TableLocation,
    config: &TableConfig,
    time: &TimeGenerator,
    retention: CleanRetention,
) -> Result<Option<CleanSummary>> {
    retention.validate()?;
    // Listed before the timeline is loaded, as the orphan sweep needs.
    let files = list_data_files(loc).await?;
    let timeline = Timeline::load(loc, config).await?;
    crate::rollback::delete_orphans(loc, &timeline, &files).await?;
    let writer = TimelineFolder::new(loc, config);
    if let Some(pending) = timeline.pending().find(|i| i.action == Action::Clean) {
        let path = writer.path_of(pending, State::Requested)?;
        let content = loc.get(&path).await?.to_vec();
        let plan = CleanerPlan::from_avro_container(&content, path.as_ref())?;
        if !plan.partitions_to_be_deleted.is_empty() {
            tracing::warn!(clean = %pending.requested, "pending clean deletes whole partitions; left to Hudi");
            return Ok(None);
        }
        return execute(loc, config, time, &pending.requested, &plan, content).await.map(Some);
    }
    let planned = planned_groups(loc, config, &timeline).await?;
    let view = FileSystemView::build(&timeline, files, &planned);
    let now = time.clock().now_millis();
    let keep = change_log_keeps(loc, config).await?;
    let Some(plan) = plan_clean(loc, &timeline, &view, retention, now, keep.as_ref()) else { return Ok(None) };
    let content = plan.to_avro_container()?;
    let w = writer.clone();
    let requested_content = content.clone();
    let requested = time
        .with_time(|r| async move {
            let timeline = Timeline::load(loc, config).await?;
            if timeline.pending().any(|i| i.action == Action::Clean) {
                return Ok(None);
            }
            w.create(&Instant::requested(r.clone(), Action::Clean), State::Requested, requested_content).await?;
            Ok(Some(r))
        })
        .await?;
    let Some(r) = requested else { return Ok(None) };
    execute(loc, config, time, &r, &plan, content).await.map(Some)
}

/// On a table that keeps a change log, where its next window begins (the
/// last change-log commit's instant, or the table's start before the
/// first): the cleaner keeps the slices that window merges. `None` for a
/// table without one.
async fn change_log_keeps(loc: &TableLocation, config: &TableConfig) -> Result<Option<InstantTime>> {
    if !config.change_log()? {
        return Ok(None);
    }
    let status = tributary_timeline::lookup_writer(loc, config, tributary_timeline::CHANGE_LOG_WRITER).await?;
    Ok(Some(match status.checkpoint {
        Some(c) => InstantTime::parse(&c.checkpoint)?,
        None => InstantTime::EARLIEST,
    }))
}

/// Plans a clean keeping what the commits `retention` keeps need, with
/// `now_millis` the time the hours policy counts back from (see the module
/// notes), and, on a table keeping a change log, what the change log's
/// next window, beginning at `change_log`, needs; `None` when nothing is
/// to be deleted. Change-data files (`.cdc`) go once their change-log
/// commit was requested and completed before the earliest commit to
/// retain: a change-data query starting there never reads them. Pure:
/// `loc` only names the files.
pub(crate) fn plan_clean(
    loc: &TableLocation,
    timeline: &Timeline,
    view: &FileSystemView,
    retention: CleanRetention,
    now_millis: i64,
    change_log: Option<&InstantTime>,
) -> Option<CleanerPlan> {
    if timeline.instants().any(|i| i.action == Action::Savepoint) {
        tracing::warn!("table has savepoints; not cleaning");
        return None;
    }
    let mut commits: Vec<&Instant> = timeline.completed().filter(|i| i.action.writes_data()).collect();
    commits.sort_by(|a, b| a.completed.cmp(&b.completed).then_with(|| a.requested.cmp(&b.requested)));
    let mut earliest = earliest_commit_to_retain(&commits, retention, now_millis)?;
    // The change log's next window merges the table as it was at its start.
    if let Some(start) = change_log
        && start < &earliest.requested
    {
        earliest =
            commits.iter().copied().filter(|c| &c.requested <= start).max_by(|a, b| a.requested.cmp(&b.requested))?;
    }
    if let Some(pending) =
        timeline.pending().filter(|i| i.action.writes_data()).min_by(|a, b| a.requested.cmp(&b.requested))
        && pending.requested < earliest.requested
    {
        earliest = pending;
    }
    let bound = &earliest.requested;
    let completed_before_bound = |t: &InstantTime| match timeline.completion_time(t) {
        Some(c) => c < bound,
        // Neither on the active timeline nor in the history: taken as
        // archived (Hudi's rule), so long completed.
        None => timeline.is_completed(t) && t < bound,
    };

    let mut files: BTreeMap<String, Vec<CleanFileInfo>> = BTreeMap::new();
    for group in view.groups() {
        let mut superseded = false;
        for slice in group.slices.values().rev() {
            if superseded {
                let names = slice.base_file_name().into_iter().chain(slice.log_file_names());
                files.entry(slice.partition.clone()).or_default().extend(names.map(|name| CleanFileInfo {
                    file_path: Some(fs_path(loc, &slice.partition, name)),
                    is_bootstrap_base_file: Some(false),
                }));
            }
            if slice.base.as_ref().is_some_and(|b| completed_before_bound(&b.name.instant)) {
                superseded = true;
            }
        }
    }
    // A file group replaced (insert overwrite, clustering) before the
    // earliest commit to retain was requested: no retained instant reads
    // it, so all of its files go, as Hudi's `CleanPlanner` deletes
    // replaced file groups.
    for ((partition, _), group) in view.replaced() {
        if completed_before_bound(&group.replaced_by) {
            files.entry(partition.clone()).or_default().extend(group.files.iter().map(|f| CleanFileInfo {
                file_path: Some(fs_path(loc, partition, &f.name)),
                is_bootstrap_base_file: Some(false),
            }));
        }
    }
    for (name, f) in view.change_data() {
        if &name.instant < bound && completed_before_bound(&name.instant) {
            files.entry(f.partition.clone()).or_default().push(CleanFileInfo {
                file_path: Some(fs_path(loc, &f.partition, &f.name)),
                is_bootstrap_base_file: Some(false),
            });
        }
    }
    files.retain(|_, f| !f.is_empty());
    if files.is_empty() {
        return None;
    }
    let action = if earliest.is_completed() { earliest.action.completed_name() } else { earliest.action.name() };
    let last_completed = commits.iter().map(|i| &i.requested).max().map(ToString::to_string).unwrap_or_default();
    Some(CleanerPlan {
        earliest_instant_to_retain: Some(ActionInstant {
            timestamp: earliest.requested.to_string(),
            action: action.to_string(),
            state: earliest.state.to_string(),
        }),
        last_completed_commit_timestamp: last_completed,
        policy: retention.policy().into(),
        file_paths_to_be_deleted_per_partition: files,
        ..Default::default()
    })
}

/// The earliest commit `retention` keeps among the completed data
/// `commits` (sorted by completion time), before the move back to a
/// pending instant; `None` when the policy names none.
fn earliest_commit_to_retain<'a>(
    commits: &[&'a Instant],
    retention: CleanRetention,
    now_millis: i64,
) -> Option<&'a Instant> {
    match retention {
        CleanRetention::Commits(n) => {
            if n == 0 || commits.len() <= n {
                return None;
            }
            Some(commits[commits.len() - n])
        }
        CleanRetention::Hours(h) => {
            // Hudi: now minus N hours as an instant time, and the first
            // completed commit, by requested time, requested at or after
            // it. A start with no instant time (outside years 1000 to
            // 9999) is before every commit, or after every one.
            let start = now_millis.saturating_sub(i64::from(h) * HOUR_MILLIS);
            let start = match InstantTime::from_millis(start) {
                Ok(s) => Some(s),
                Err(_) if start < 0 => None,
                Err(_) => return None,
            };
            commits
                .iter()
                .copied()
                .filter(|c| start.as_ref().is_none_or(|s| &c.requested >= s))
                .min_by(|a, b| a.requested.cmp(&b.requested))
        }
    }
}

/// Carries out a requested clean and completes it. `content` is the
/// requested file's bytes, copied into the inflight file as Java does.
async fn execute(
    loc: &TableLocation,
    config: &TableConfig,
    time: &TimeGenerator,
    r: &InstantTime,
    plan: &CleanerPlan,
    content: Vec<u8>,
) -> Result<CleanSummary> {
    let clock = time.clock().clone();
    let started = clock.now_millis();
    let writer = TimelineFolder::new(loc, config);
    let instant = Instant::requested(r.clone(), Action::Clean);
    writer.create_if_absent(&instant, State::Inflight, content).await?;

    let files = plan.files();
    // In one batch: a request per thousand files on S3.
    let paths = files.iter().map(|(partition, path)| loc.join(&partition_file(partition, file_name(path))));
    delete_all_if_exist(loc, paths).await?;
    let mut partitions: BTreeMap<String, CleanPartitionMetadata> = BTreeMap::new();
    let mut deleted = Vec::new();
    for (partition, path) in files {
        let name = file_name(&path).to_string();
        let rel = partition_file(&partition, &name);
        let m = partitions.entry(partition.clone()).or_insert_with(|| CleanPartitionMetadata {
            partition_path: partition.clone(),
            policy: plan.policy.clone(),
            is_partition_deleted: Some(false),
            ..Default::default()
        });
        m.delete_path_patterns.push(name.clone());
        m.success_delete_files.push(name);
        deleted.push(rel);
    }
    let earliest = plan.earliest_instant_to_retain.as_ref().map(|i| i.timestamp.clone()).unwrap_or_default();
    let metadata = CleanMetadata {
        start_clean_time: r.to_string(),
        time_taken_in_millis: clock.now_millis().saturating_sub(started).max(0),
        total_files_deleted: i32::try_from(deleted.len()).unwrap_or(i32::MAX),
        earliest_commit_to_retain: earliest.clone(),
        last_completed_commit_timestamp: plan.last_completed_commit_timestamp.clone(),
        partition_metadata: partitions,
        extra_metadata: plan.extra_metadata.clone(),
        ..Default::default()
    };
    let writer = TimelineFolder::new(loc, config);
    let completed =
        complete_instant(loc, &writer, time, &instant, metadata.to_avro_container()?, Completion::Shared).await?;
    tracing::info!(clean = %r, files = deleted.len(), earliest_commit_to_retain = %earliest, "cleaned");
    Ok(CleanSummary { instant: r.clone(), completed, earliest_commit_to_retain: earliest, deleted_files: deleted })
}

/// The earliest commit the latest active completed clean retains, if it
/// names one: the oldest instant whose file slices cleaning kept, so the
/// oldest that archiving keeps active and that time travel can reach.
pub async fn latest_clean_retained(folder: &TimelineFolder, timeline: &Timeline) -> Result<Option<InstantTime>> {
    let latest = timeline
        .active()
        .iter()
        .filter(|i| i.is_completed() && i.action == Action::Clean)
        .max_by(|a, b| a.completed.cmp(&b.completed));
    let Some(clean) = latest else { return Ok(None) };
    let bytes = folder.read(clean, State::Completed).await?;
    let path = folder.path_of(clean, State::Completed)?;
    let meta = CleanMetadata::from_avro_container(&bytes, path.as_ref())?;
    Ok(InstantTime::parse(&meta.earliest_commit_to_retain).ok())
}

/// The point before which a clean of `timeline` may have removed file
/// slices: the latest earliest-commit-to-retain among the completed clean
/// that completed last and every pending clean, whose plan's deletions may
/// already be under way. A read of the table as it was before that point
/// may miss files. Load `timeline` after listing the files a read uses:
/// a clean creates its plan before it deletes anything, so a clean that
/// removed a listed file's neighbours is then on it.
pub async fn cleaned_before(folder: &TimelineFolder, timeline: &Timeline) -> Result<Option<InstantTime>> {
    let mut retained = latest_clean_retained(folder, timeline).await?;
    for pending in timeline.pending().filter(|i| i.action == Action::Clean) {
        let path = folder.path_of(pending, State::Requested)?;
        let bytes = folder.read(pending, State::Requested).await?;
        let plan = CleanerPlan::from_avro_container(&bytes, path.as_ref())?;
        let planned = plan.earliest_instant_to_retain.and_then(|i| InstantTime::parse(&i.timestamp).ok());
        retained = retained.max(planned);
    }
    Ok(retained)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use object_store::ObjectStoreExt;
    use tributary_timeline::{InProcessLock, ManualClock, TimeMode};

    use super::CleanRetention::{Commits, Hours};
    use super::*;
    use crate::test_util::{
        PARTITION, Table, base, compaction, delta_commit, exists, log, put, table, timeline, ts, writer,
    };

    /// Bucket 0: slices {100: [d100]}, {200: base, [d300]}, {400: base, [d500]};
    /// bucket 1 is log-only: {100: [d100, d300, d500]}.
    async fn three_slices(tb: &Table) {
        delta_commit(tb, 100, Some(110), &[0, 1]).await;
        compaction(tb, 200, 210).await;
        delta_commit(tb, 300, Some(310), &[0, 1]).await;
        compaction(tb, 400, 410).await;
        delta_commit(tb, 500, Some(510), &[0, 1]).await;
    }

    #[tokio::test]
    async fn removes_only_superseded_slices_and_records_the_clean() {
        let tb = table().await;
        three_slices(&tb).await;

        // Keep 2 commits: the compaction at 400 and the delta commit at 500.
        // Only the slice before the base at 200 (completed at 210 < 400) goes.
        let s = clean(&tb.loc, &tb.config, &tb.time, Commits(2)).await.unwrap().unwrap();
        assert_eq!(s.deleted_files, vec![partition_file(PARTITION, &log(0, 100))]);
        assert_eq!(s.earliest_commit_to_retain, ts(400).to_string());
        assert!(!exists(&tb, &log(0, 100)).await);
        for kept in [base(0, 200), log(0, 300), base(0, 400), log(0, 500), log(1, 100), log(1, 300), log(1, 500)] {
            assert!(exists(&tb, &kept).await, "{kept}");
        }

        let tl = timeline(&tb).await;
        let ci = tl.get(&s.instant).unwrap();
        assert_eq!((ci.action, ci.state, ci.completed.as_ref()), (Action::Clean, State::Completed, Some(&s.completed)));
        let requested = writer(&tb).read(ci, State::Requested).await.unwrap();
        assert_eq!(writer(&tb).read(ci, State::Inflight).await.unwrap(), requested);
        let plan = CleanerPlan::from_avro_container(&requested, "plan").unwrap();
        assert_eq!(
            plan.earliest_instant_to_retain,
            Some(ActionInstant { timestamp: ts(400).to_string(), action: "commit".into(), state: "COMPLETED".into() })
        );
        assert_eq!(plan.last_completed_commit_timestamp, ts(500).to_string());
        assert_eq!((plan.policy.as_str(), plan.version), (KEEP_LATEST_COMMITS, 2));
        assert_eq!(plan.files(), vec![(PARTITION.to_string(), format!("/warehouse/t/{PARTITION}/{}", log(0, 100)))]);
        let meta =
            CleanMetadata::from_avro_container(&writer(&tb).read(ci, State::Completed).await.unwrap(), "m").unwrap();
        assert_eq!(meta.start_clean_time, s.instant.to_string());
        assert_eq!(meta.earliest_commit_to_retain, ts(400).to_string());
        assert_eq!(meta.total_files_deleted, 1);
        assert_eq!(meta.version, 2);
        let pm = &meta.partition_metadata[PARTITION];
        assert_eq!(pm.success_delete_files, vec![log(0, 100)]);
        assert_eq!(pm.delete_path_patterns, vec![log(0, 100)]);
        assert!(pm.failed_delete_files.is_empty());

        // Again with the same retention: nothing left, nothing written.
        let before = timeline(&tb).await.instants().cloned().collect::<Vec<_>>();
        assert_eq!(clean(&tb.loc, &tb.config, &tb.time, Commits(2)).await.unwrap(), None);
        assert_eq!(timeline(&tb).await.instants().cloned().collect::<Vec<_>>(), before);

        // Keep 1 commit (500): the base at 400 completed at 410 < 500, so
        // the slice at 200 goes, base and log. Log-only bucket 1 stays.
        let s = clean(&tb.loc, &tb.config, &tb.time, Commits(1)).await.unwrap().unwrap();
        assert_eq!(
            s.deleted_files,
            vec![partition_file(PARTITION, &base(0, 200)), partition_file(PARTITION, &log(0, 300))]
        );
        for kept in [base(0, 400), log(0, 500), log(1, 100), log(1, 300), log(1, 500)] {
            assert!(exists(&tb, &kept).await, "{kept}");
        }
        assert_eq!(timeline(&tb).await.completed().filter(|i| i.action == Action::Clean).count(), 2);
    }

    #[tokio::test]
    async fn orphans_of_withdrawn_instants_are_deleted() {
        let tb = table().await;
        three_slices(&tb).await;
        // Logs of an instant older than the whole timeline, and of one
        // between its commits, on neither the timeline nor a history: a
        // rolled-back writer wrote them late.
        put(&tb, &log(0, 50)).await;
        put(&tb, &log(1, 350)).await;
        // A pending write's log is no orphan.
        delta_commit(&tb, 600, None, &[1]).await;
        assert_eq!(
            clean(&tb.loc, &tb.config, &tb.time, Commits(5)).await.unwrap(),
            None,
            "nothing to clean but orphans"
        );
        assert!(!exists(&tb, &log(0, 50)).await && !exists(&tb, &log(1, 350)).await);
        for kept in [log(0, 100), base(0, 200), log(1, 500), log(1, 600)] {
            assert!(exists(&tb, &kept).await, "{kept}");
        }
    }

    #[tokio::test]
    async fn nothing_to_clean_writes_nothing() {
        let tb = table().await;
        // An empty table, and a table with fewer commits than retained.
        assert_eq!(clean(&tb.loc, &tb.config, &tb.time, Commits(1)).await.unwrap(), None);
        three_slices(&tb).await;
        assert_eq!(clean(&tb.loc, &tb.config, &tb.time, Commits(5)).await.unwrap(), None);
        // Commits retained up to the compaction at 200: its own slice stays.
        assert_eq!(clean(&tb.loc, &tb.config, &tb.time, Commits(4)).await.unwrap(), None);
        assert!(clean(&tb.loc, &tb.config, &tb.time, Commits(0)).await.is_err());
        // A pending write older than the retained commits holds the clean back.
        delta_commit(&tb, 150, None, &[]).await;
        assert_eq!(clean(&tb.loc, &tb.config, &tb.time, Commits(2)).await.unwrap(), None);
        let tl = timeline(&tb).await;
        assert!(tl.instants().all(|i| i.action != Action::Clean));
        assert!(exists(&tb, &log(0, 100)).await);
    }

    #[tokio::test]
    async fn an_interrupted_clean_is_finished_first() {
        let tb = table().await;
        three_slices(&tb).await;
        let tl = timeline(&tb).await;
        let view = FileSystemView::load(&tb.loc, &tb.config, &tl).await.unwrap();
        let plan = plan_clean(&tb.loc, &tl, &view, Commits(1), 0, None).unwrap();
        // A clean that stopped after its plan and one deletion.
        let r = tb.time.new_instant().await.unwrap();
        let i = Instant::requested(r.clone(), Action::Clean);
        writer(&tb).create(&i, State::Requested, plan.to_avro_container().unwrap()).await.unwrap();
        tb.loc.store.delete(&tb.loc.join(&partition_file(PARTITION, &base(0, 200)))).await.unwrap();

        // Deleting already: a read from before its retained commit is unsafe
        // while it is pending, though no completed clean says so yet.
        let folder = writer(&tb);
        let retained = plan.earliest_instant_to_retain.as_ref().map(|i| InstantTime::parse(&i.timestamp).unwrap());
        assert!(retained.is_some());
        assert_eq!(latest_clean_retained(&folder, &timeline(&tb).await).await.unwrap(), None);
        assert_eq!(cleaned_before(&folder, &timeline(&tb).await).await.unwrap(), retained);

        // The next call finishes it (with any retention) and plans nothing new.
        let s = clean(&tb.loc, &tb.config, &tb.time, Commits(3)).await.unwrap().unwrap();
        assert_eq!(s.instant, r);
        assert_eq!(s.deleted_files.len(), 3, "{:?}", s.deleted_files);
        assert!(!exists(&tb, &log(0, 100)).await && !exists(&tb, &log(0, 300)).await);
        let tl = timeline(&tb).await;
        assert_eq!(tl.instants().filter(|i| i.action == Action::Clean).count(), 1);
        assert!(tl.get(&r).is_some_and(Instant::is_completed));
        assert_eq!(clean(&tb.loc, &tb.config, &tb.time, Commits(1)).await.unwrap(), None);
    }

    /// The clock reading at which a window of `hours` starts exactly at
    /// the hand-made instant `t`.
    fn window_starts_at(t: u32, hours: u32) -> i64 {
        ts(t).to_millis().unwrap() + i64::from(hours) * 3_600_000
    }

    /// A generator of its own, reading a manual clock set to `millis`.
    fn generator_at(millis: i64) -> (Arc<ManualClock>, TimeGenerator) {
        let clock = Arc::new(ManualClock::new(millis));
        let lock = Arc::new(InProcessLock::new());
        (clock.clone(), TimeGenerator::new(TimeMode::HybridLogical, Duration::ZERO, clock, lock))
    }

    #[tokio::test]
    async fn hours_keep_what_the_commits_requested_in_the_window_need() {
        let tb = table().await;
        three_slices(&tb).await;

        // 24 hours back from the injected clock is the compaction requested
        // at 400: it and the delta commit at 500 are retained, and only the
        // slice before the base at 200 (completed at 210 < 400) goes.
        let (clock, time) = generator_at(window_starts_at(400, 24));
        let s = clean(&tb.loc, &tb.config, &time, Hours(24)).await.unwrap().unwrap();
        assert_eq!(s.earliest_commit_to_retain, ts(400).to_string());
        assert_eq!(s.deleted_files, vec![partition_file(PARTITION, &log(0, 100))]);
        let ci = timeline(&tb).await.get(&s.instant).cloned().unwrap();
        let plan =
            CleanerPlan::from_avro_container(&writer(&tb).read(&ci, State::Requested).await.unwrap(), "p").unwrap();
        assert_eq!(plan.policy, KEEP_LATEST_BY_HOURS);
        assert_eq!(
            plan.earliest_instant_to_retain,
            Some(ActionInstant { timestamp: ts(400).to_string(), action: "commit".into(), state: "COMPLETED".into() })
        );
        let meta =
            CleanMetadata::from_avro_container(&writer(&tb).read(&ci, State::Completed).await.unwrap(), "m").unwrap();
        assert_eq!(meta.earliest_commit_to_retain, ts(400).to_string());
        assert_eq!(meta.partition_metadata[PARTITION].policy, KEEP_LATEST_BY_HOURS);

        // One millisecond later the compaction was requested before the
        // window (it completed at 410, inside it, but requested times
        // count): the delta commit at 500 is the earliest retained, and the
        // slice at 200 goes too.
        clock.advance(1);
        let s = clean(&tb.loc, &tb.config, &time, Hours(24)).await.unwrap().unwrap();
        assert_eq!(s.earliest_commit_to_retain, ts(500).to_string());
        assert_eq!(
            s.deleted_files,
            vec![partition_file(PARTITION, &base(0, 200)), partition_file(PARTITION, &log(0, 300))]
        );
        for kept in [base(0, 400), log(0, 500), log(1, 100), log(1, 300), log(1, 500)] {
            assert!(exists(&tb, &kept).await, "{kept}");
        }

        // With no commit requested in the window, Hudi names no commit to
        // retain and cleans nothing; neither does this, though 1 commit
        // kept would remove more.
        delta_commit(&tb, 600, Some(610), &[0]).await;
        compaction(&tb, 700, 710).await;
        delta_commit(&tb, 800, Some(810), &[0]).await;
        let before = timeline(&tb).await.instants().cloned().collect::<Vec<_>>();
        clock.set(window_starts_at(801, 24));
        assert_eq!(clean(&tb.loc, &tb.config, &time, Hours(24)).await.unwrap(), None);
        assert_eq!(timeline(&tb).await.instants().cloned().collect::<Vec<_>>(), before);
        // A window reaching before year 1000 keeps every commit.
        assert_eq!(clean(&tb.loc, &tb.config, &time, Hours(u32::MAX)).await.unwrap(), None);
        assert!(clean(&tb.loc, &tb.config, &time, Hours(0)).await.is_err());
        // The same table cleaned by commits: the slice at 400 goes.
        let s = clean(&tb.loc, &tb.config, &time, Commits(1)).await.unwrap().unwrap();
        assert_eq!(s.earliest_commit_to_retain, ts(800).to_string());
        assert!(!exists(&tb, &base(0, 400)).await && exists(&tb, &base(0, 700)).await);
    }

    /// A write requested before the window and still pending moves the
    /// earliest commit to retain back to it, as under the commits policy;
    /// one requested inside the window moves nothing.
    #[tokio::test]
    async fn hours_move_back_to_the_oldest_pending_write() {
        let now = window_starts_at(401, 24); // the window holds the delta commit at 500 alone
        let plan_of = |tb: &Table| {
            let (loc, config) = (tb.loc.clone(), tb.config.clone());
            async move {
                let tl = Timeline::load(&loc, &config).await.unwrap();
                let view = FileSystemView::load(&loc, &config, &tl).await.unwrap();
                plan_clean(&loc, &tl, &view, Hours(24), now, None).unwrap()
            }
        };
        let inside = table().await;
        three_slices(&inside).await;
        delta_commit(&inside, 600, None, &[1]).await;
        let plan = plan_of(&inside).await;
        assert_eq!(plan.earliest_instant_to_retain.as_ref().unwrap().timestamp, ts(500).to_string());
        let deleted: Vec<String> = plan.files().into_iter().map(|(_, f)| file_name(&f).to_string()).collect();
        assert_eq!(deleted, vec![base(0, 200), log(0, 300), log(0, 100)]);

        let before = table().await;
        three_slices(&before).await;
        delta_commit(&before, 350, None, &[1]).await;
        let plan = plan_of(&before).await;
        // Back to 350: the base at 400 completed after it and supersedes
        // nothing; the base at 200 still supersedes the slice before it.
        assert_eq!(
            plan.earliest_instant_to_retain,
            Some(ActionInstant {
                timestamp: ts(350).to_string(),
                action: "deltacommit".into(),
                state: "INFLIGHT".into()
            })
        );
        assert_eq!(plan.files(), vec![(PARTITION.to_string(), format!("/warehouse/t/{PARTITION}/{}", log(0, 100)))]);
        assert_eq!(plan.policy, KEEP_LATEST_BY_HOURS);
    }

    #[test]
    fn retention_is_checked_and_named_as_hudi_names_it() {
        for (r, key) in [(Commits(0), "hoodie.cleaner.commits.retained"), (Hours(0), "hoodie.cleaner.hours.retained")] {
            let err = r.validate().unwrap_err().to_string();
            assert!(err.contains(key), "{err}");
        }
        assert!(Commits(1).validate().is_ok() && Hours(1).validate().is_ok());
        assert_eq!((Commits(3).policy(), Hours(24).policy()), ("KEEP_LATEST_COMMITS", "KEEP_LATEST_BY_HOURS"));
        assert_eq!(CleanRetention::default(), Commits(10));
        assert_eq!(Hours(CleanRetention::DEFAULT_HOURS).to_string(), "KEEP_LATEST_BY_HOURS (24 hours)");
    }
}
