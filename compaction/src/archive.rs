//! Archiving: moving the oldest completed instants from the active timeline
//! into Hudi's LSM history, so that the active timeline, which every load
//! lists, stays small however long the table lives.
//!
//! Which instants go follows Hudi's archiver (1.x `TimelineArchiverV2`):
//! nothing until the active timeline holds more than `keep_max_commits`
//! completed commits (delta commits, compactions, replace commits), then
//! the oldest down to `keep_min_commits`, and with them the completed
//! cleans and rollbacks requested before the last of those. Never archived
//! ([`ArchiveSettings`], [`Retained`]):
//!
//! - anything from the commit before the oldest pending write on (a write
//!   in flight, a pending compaction, or a failed write not yet rolled
//!   back): Hudi's readers take every instant older than the first active
//!   one as archived, hence completed;
//! - the delta commits a compaction scheduled by count still needs (the
//!   last `compaction_delta_commits` since the last compaction), as Hudi;
//! - the latest clean's retained range (from its earliest commit to
//!   retain, which its metadata records under either cleaning policy, so
//!   an hours policy's window holds archiving back as a commit count
//!   does);
//! - the first savepoint and everything after it;
//! - a replacecommit (insert overwrite, clustering) whose replaced file
//!   groups still have files, and everything after it: readers know those
//!   groups replaced only from the active timeline, so the cleaner deletes
//!   them first, as Hudi's archiver waits for its cleaner;
//! - a delta commit with a log in a latest file slice that has no base
//!   file, or whose base instant is newer than the delta commit. The
//!   official reader (hudi-rs) places an archived log by its requested
//!   time, not its completion time, so it would put such a log (a write
//!   requested before a compaction and completed after it, which
//!   non-blocking concurrency allows; or any log of a file group never
//!   compacted, whose slices it keys by the logs' own instants) in an older
//!   slice and lose its records. Every other archived file it reads right:
//!   it takes files older than the first active instant as committed.
//!   While compaction keeps up, this holds the timeline back to the oldest
//!   such log, which the next compaction of its file group moves out of
//!   the latest slice;
//! - the write that became visible last, and everything after it: its
//!   commit metadata holds the schema in force, which writers and the
//!   compactor look up under the lock on the active timeline alone
//!   (`tributary_timeline::schema_in_force`). It is the newest write
//!   unless one requested long before the others completed last (a slow
//!   write, or a schema change that waited for the lock); archived, the
//!   next commit would record the older schema of the write visible
//!   before it, and readers would lose its columns.
//!
//! A writer's checkpoint needs nothing kept: the state file holds the
//! checkpoint itself, and a pending entry's commit is looked for in the
//! history once its completed file is gone
//! (`timeline/src/protocol/writer_state.rs`).
//!
//! ```text
//!  archive                                     table lock          storage
//!    |  acquire --------------------------------->|
//!    |  list data files, load the timeline and the file-system view
//!    |  select (the rules above)
//!    |  read each instant's completed file (and plan) ------------------->|
//!    |  delete leftover markers and heartbeats of those instants ------->|
//!    |  history: <min>_<max>_0.parquet, manifest_<N+1>, _version_ ------->|
//!    |  delete requested and inflight files, then completed ones, oldest first
//!    |  history: merge full levels, clean old manifests and files ------->|
//!    |  release <---------------------------------|
//! ```
//!
//! The whole run holds the table lock, as Java's archiver does: a Java
//! writer and Tributary may both archive one table, and history cleaning
//! deletes files no manifest lists, which would include another archiver's
//! file in the making. A crash anywhere leaves a table every reader reads:
//! before `_version_` names the new manifest, the new file is unread and a
//! retry picks the same instants; after it, the instants are both in the
//! history and active (readers take the active copy), and the next run
//! takes those for archived: it deletes their active files and writes no
//! row for them again (Java's archiver may, which readers tolerate).

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use tributary_timeline::{
    Action, ArchivedRow, FileSystemView, HistoryMaintenance, HistorySettings, HistoryWriter, Instant, InstantTime,
    State, TableConfig, TableLocation, TimeGenerator, Timeline, TimelineFolder, delete_all_if_exist, list_data_files,
    planned_groups, remove_leftovers,
};

use crate::error::{Error, Result};

/// When and how much to archive, with Hudi's setting names and defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveSettings {
    /// `hoodie.keep.min.commits`: completed commits left active (20).
    pub keep_min_commits: usize,
    /// `hoodie.keep.max.commits`: archiving starts above this many
    /// completed commits (30).
    pub keep_max_commits: usize,
    /// `hoodie.cleaner.commits.retained`: the cleaner's retention (10).
    /// When it keeps more commits than `keep_min_commits` allows, the
    /// bounds rise to match, as Hudi raises them; 0 raises nothing. This
    /// is the `KEEP_LATEST_COMMITS` raise: for a `KEEP_LATEST_BY_HOURS`
    /// cleaner Hudi raises the bounds to the commits requested in the N
    /// hours before the latest commit, which archiving here does not;
    /// the latest clean's retained range ([`Retained::CleanRetained`])
    /// keeps that cleaner's window instead. (Tributary's cleaner counts
    /// archived commits too, so archiving never moves what it retains.)
    pub cleaner_commits_retained: usize,
    /// `hoodie.compact.inline.max.delta.commits`: the delta commits since
    /// the last compaction that a compaction scheduled by count needs (5).
    pub compaction_delta_commits: usize,
    /// How the history compacts and cleans its own files.
    pub history: HistorySettings,
}

impl Default for ArchiveSettings {
    fn default() -> Self {
        Self {
            keep_min_commits: 20,
            keep_max_commits: 30,
            cleaner_commits_retained: 10,
            compaction_delta_commits: 5,
            history: HistorySettings::default(),
        }
    }
}

impl ArchiveSettings {
    /// Checks the settings, naming the one that is wrong.
    pub fn validate(&self) -> Result<()> {
        if self.keep_min_commits == 0 {
            return Err(Error::Invalid { what: "hoodie.keep.min.commits".into(), reason: "must be at least 1".into() });
        }
        if self.keep_max_commits <= self.keep_min_commits {
            return Err(Error::Invalid {
                what: "hoodie.keep.max.commits".into(),
                reason: format!(
                    "{} must be greater than hoodie.keep.min.commits ({})",
                    self.keep_max_commits, self.keep_min_commits
                ),
            });
        }
        if self.history.compaction_batch_size < 2 {
            return Err(Error::Invalid {
                what: "hoodie.timeline.compaction.batch.size".into(),
                reason: "must be at least 2".into(),
            });
        }
        Ok(())
    }
}

/// Why archiving stopped where it did: the first instant a rule keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Retained {
    /// The commit before the oldest pending write (or that write), or an
    /// older commit that completed after that write was requested.
    PendingWrite(InstantTime),
    /// The delta commits a compaction scheduled by count needs.
    CompactionDeltaCommits(InstantTime),
    /// The latest clean's earliest commit to retain.
    CleanRetained(InstantTime),
    /// The first savepoint.
    Savepoint(InstantTime),
    /// A delta commit with a log in a latest file slice with no base file,
    /// or with a newer base.
    LatestSliceLog(InstantTime),
    /// A replacecommit whose replaced file groups still have files: only
    /// the active timeline tells readers they are replaced.
    ReplacedFiles(InstantTime),
    /// The write that became visible last, whose metadata holds the
    /// schema in force.
    SchemaInForce(InstantTime),
}

impl Retained {
    /// The first instant kept.
    pub fn instant(&self) -> &InstantTime {
        match self {
            Retained::PendingWrite(t)
            | Retained::CompactionDeltaCommits(t)
            | Retained::CleanRetained(t)
            | Retained::Savepoint(t)
            | Retained::LatestSliceLog(t)
            | Retained::ReplacedFiles(t)
            | Retained::SchemaInForce(t) => t,
        }
    }

    /// The rule, in words.
    pub fn reason(&self) -> &'static str {
        match self {
            Retained::PendingWrite(_) => {
                "the commit before the oldest pending write, or one that completed after that write was requested"
            }
            Retained::CompactionDeltaCommits(_) => "the delta commits a compaction scheduled by count needs",
            Retained::CleanRetained(_) => "the latest clean's earliest retained commit",
            Retained::Savepoint(_) => "the first savepoint",
            Retained::LatestSliceLog(_) => {
                "a log in a latest file slice with no base file or a newer one, which the official reader would misplace"
            }
            Retained::ReplacedFiles(_) => "a replacecommit whose replaced file groups the cleaner has not yet deleted",
            Retained::SchemaInForce(_) => {
                "the write that became visible last, whose metadata holds the schema in force"
            }
        }
    }
}

/// What one archiving run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArchiveSummary {
    /// The instants archived, by requested time.
    pub archived: Vec<Instant>,
    /// The history file they went into.
    pub history_file: Option<String>,
    /// The rule that kept the oldest active commit that was over the
    /// bound, when one did.
    pub retained: Option<Retained>,
    /// The history's own compaction and cleaning.
    pub history: HistoryMaintenance,
    /// Instants left on the active timeline after the run.
    pub active: usize,
    /// Of them, the commits that archiving's bounds count
    /// (completed, and writing data).
    pub active_commits: usize,
}

/// Archives what [`ArchiveSettings`] and the rules of the module notes
/// allow, holding the table lock of `time` throughout. Returns what it did;
/// nothing archived is not an error.
pub async fn archive(
    loc: &TableLocation,
    config: &TableConfig,
    time: &TimeGenerator,
    settings: &ArchiveSettings,
) -> Result<ArchiveSummary> {
    settings.validate()?;
    let history = HistoryWriter::new(loc, config, settings.history)?;
    time.with_lock(|| async { Ok(archive_locked(loc, config, &history, settings).await) }).await?
}

/// [`archive`] inside the table lock.
async fn archive_locked(
    loc: &TableLocation,
    config: &TableConfig,
    history: &HistoryWriter,
    settings: &ArchiveSettings,
) -> Result<ArchiveSummary> {
    // The data files are listed (under the lock, which every commit
    // waits for) only when the timeline is over its bound: most runs of a
    // service find nothing to do and cost one timeline load. Under the
    // lock no instant is requested or completes, so the timeline loaded
    // first still holds for the files listed after it.
    let timeline = Timeline::load(loc, config).await?;
    let active = timeline.active().len();
    let active_commits = active_commits(&timeline);
    if !has_work(&timeline, settings) {
        return Ok(ArchiveSummary { active, active_commits, ..Default::default() });
    }
    let files = list_data_files(loc).await?;
    let planned = planned_groups(loc, config, &timeline).await?;
    let view = FileSystemView::build(&timeline, files, &planned);
    let folder = TimelineFolder::new(loc, config);
    let clean_retained = crate::clean::latest_clean_retained(&folder, &timeline).await?;
    let selection = select(&timeline, &view, clean_retained, settings);
    let mut summary = ArchiveSummary { retained: selection.retained, active, active_commits, ..Default::default() };
    if selection.instants.is_empty() && selection.leftovers.is_empty() {
        return Ok(summary);
    }
    if !selection.instants.is_empty() {
        // Read several at once: on an object store each is a round trip,
        // and every commit waits for the lock this run holds.
        let reads: Vec<_> = selection.instants.iter().map(|i| row(&folder, i)).collect();
        let rows: Vec<ArchivedRow> = futures::stream::iter(reads).buffered(16).try_collect().await?;
        let archived: Vec<InstantTime> = selection.instants.iter().map(|i| i.requested.clone()).collect();
        remove_leftovers(loc, &archived).await?;
        summary.history_file = Some(history.append(&rows).await?);
    }
    // The instants now in the history, with those an interrupted run
    // archived but did not delete. Pending states first: an instant whose
    // completed file went first would look pending to anyone listing
    // meanwhile.
    let done: Vec<&Instant> = selection.instants.iter().chain(&selection.leftovers).collect();
    let mut pending_states = Vec::with_capacity(done.len() * 2);
    for i in &done {
        pending_states.push(folder.path_of(i, State::Requested)?);
        pending_states.push(folder.path_of(i, State::Inflight)?);
    }
    delete_all_if_exist(loc, pending_states).await?;
    let completed: Vec<_> = done.iter().map(|i| folder.path_of(i, State::Completed)).collect::<Result<_, _>>()?;
    delete_all_if_exist(loc, completed).await?;
    summary.history = history.compact_and_clean().await?;
    summary.active = active.saturating_sub(selection.instants.len());
    summary.active_commits = active_commits.saturating_sub(selection.instants.iter().filter(|i| is_commit(i)).count());
    tracing::info!(
        instants = selection.instants.len(),
        file = summary.history_file.as_deref().unwrap_or_default(),
        "archived"
    );
    summary.archived = selection.instants;
    Ok(summary)
}

/// The history row of the completed instant `i`.
async fn row(folder: &TimelineFolder, i: &Instant) -> Result<ArchivedRow> {
    let completed = i.completed.clone().ok_or_else(|| Error::Internal {
        what: format!("archiving instant {}", i.requested),
        reason: "selected while not completed".into(),
    })?;
    let metadata = non_empty(folder.read(i, State::Completed).await?);
    // The plan: the requested file of a clean or compaction (Java's
    // archiver takes it for these; Tributary writes no clustering).
    let plan = match i.action {
        Action::Clean | Action::Compaction | Action::LogCompaction => match folder.read(i, State::Requested).await {
            Ok(bytes) => non_empty(bytes),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e.into()),
        },
        _ => None,
    };
    Ok(ArchivedRow {
        requested: i.requested.clone(),
        completed,
        action: i.action.completed_name().to_string(),
        metadata,
        plan,
    })
}

fn non_empty(bytes: Bytes) -> Option<Bytes> {
    (!bytes.is_empty()).then_some(bytes)
}

/// The instants to archive, and the rule that stopped the selection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Selection {
    pub(crate) instants: Vec<Instant>,
    pub(crate) retained: Option<Retained>,
    /// Instants both active and in the history (a run was interrupted
    /// after its snapshot): only their active files are left to delete.
    pub(crate) leftovers: Vec<Instant>,
}

/// Whether `i` counts as a commit for the archiving bounds: a completed
/// instant that wrote data (completed as `deltacommit`, `commit` or
/// `replacecommit`).
fn is_commit(i: &Instant) -> bool {
    i.is_completed() && i.action.writes_data()
}

/// The completed commits (of any action that writes data) on `timeline`'s
/// active part: what `hoodie.keep.max.commits` bounds.
pub(crate) fn active_commits(timeline: &Timeline) -> usize {
    let (_, active) = split_active(timeline);
    active.iter().filter(|i| is_commit(i)).count()
}

/// The active instants of `timeline`, split into those an interrupted run
/// already put in the history (only their active files are left to
/// delete) and the rest.
fn split_active(timeline: &Timeline) -> (Vec<&Instant>, Vec<&Instant>) {
    let in_history = |t: &InstantTime| timeline.history().is_some_and(|h| h.holds(t));
    timeline.active().iter().partition(|i| i.is_completed() && in_history(&i.requested))
}

/// Whether a run has anything to do: leftovers of an interrupted run, or
/// more active commits than the upper bound.
fn has_work(timeline: &Timeline, settings: &ArchiveSettings) -> bool {
    let (leftovers, _) = split_active(timeline);
    !leftovers.is_empty() || active_commits(timeline) > settings.keep_max_commits
}

/// The pure selection (module notes).
pub(crate) fn select(
    timeline: &Timeline,
    view: &FileSystemView,
    clean_retained: Option<InstantTime>,
    settings: &ArchiveSettings,
) -> Selection {
    let (leftovers, active) = split_active(timeline);
    let leftovers: Vec<Instant> = leftovers.into_iter().cloned().collect();
    let commits: Vec<&Instant> = active.iter().copied().filter(|i| is_commit(i)).collect();
    if commits.len() <= settings.keep_max_commits {
        return Selection { leftovers, ..Selection::default() };
    }
    let keep_min = raised_keep_min(&commits, settings);
    let mut bounds: Vec<Retained> = Vec::new();
    // The oldest pending write, and the commit before it; and every
    // commit that completed after that write was requested: the write
    // loaded the timeline with it pending, and a Java writer reads a
    // pending compaction's plan when it commits (its requested file must
    // still be there).
    if let Some(p) = active.iter().find(|i| !i.is_completed() && i.action.writes_data()) {
        let before = commits.iter().rev().find(|c| c.requested < p.requested);
        let mut kept = before.map_or(&p.requested, |c| &c.requested);
        if let Some(c) = commits.iter().find(|c| c.completed.as_ref().is_some_and(|d| d > &p.requested))
            && &c.requested < kept
        {
            kept = &c.requested;
        }
        bounds.push(Retained::PendingWrite(kept.clone()));
    }
    if let Some(t) = compaction_retained(&commits, settings.compaction_delta_commits) {
        bounds.push(Retained::CompactionDeltaCommits(t));
    }
    if let Some(t) = clean_retained {
        bounds.push(Retained::CleanRetained(t));
    }
    if let Some(s) = active.iter().find(|i| i.action == Action::Savepoint && i.is_completed()) {
        bounds.push(Retained::Savepoint(s.requested.clone()));
    }
    let straddling = view
        .latest_slices()
        .into_iter()
        .flat_map(|s| {
            // A slice without a base file (a file group never compacted)
            // keeps every log's delta commit; one with a base keeps those
            // requested before it.
            let base = s.base.is_some().then(|| s.base_instant.clone());
            s.logs.into_iter().map(|l| l.name.instant.clone()).filter(move |t| base.as_ref().is_none_or(|b| t < b))
        })
        .min();
    if let Some(t) = straddling {
        bounds.push(Retained::LatestSliceLog(t));
    }
    // Hudi's archiver keeps a replacecommit until the cleaner deleted the
    // groups it replaced; readers know them replaced only from it.
    if let Some(t) = view.replaced().values().map(|g| &g.replaced_by).min() {
        bounds.push(Retained::ReplacedFiles(t.clone()));
    }
    // Writers find the schema in force in the metadata of the write that
    // became visible last, on the active timeline alone.
    if let Some(w) =
        active.iter().filter(|i| i.is_completed() && i.action.writes_data()).max_by(|a, b| a.cmp_visibility(b))
    {
        bounds.push(Retained::SchemaInForce(w.requested.clone()));
    }
    let first_kept = bounds.into_iter().min_by(|a, b| a.instant().cmp(b.instant()));
    let limit = commits.len() - keep_min;
    let chosen: Vec<&Instant> = commits
        .iter()
        .copied()
        .take_while(|c| first_kept.as_ref().is_none_or(|r| &c.requested < r.instant()))
        .take(limit)
        .collect();
    let retained = first_kept.filter(|_| chosen.len() < limit);
    let Some(last) = chosen.last().map(|c| c.requested.clone()) else {
        return Selection { instants: Vec::new(), retained, leftovers };
    };
    let mut instants: Vec<Instant> = chosen.into_iter().cloned().collect();
    instants.extend(
        active
            .iter()
            .filter(|i| matches!(i.action, Action::Clean | Action::Rollback) && i.is_completed())
            .filter(|i| i.requested < last)
            .map(|i| (*i).clone()),
    );
    instants.sort_by(|a, b| a.requested.cmp(&b.requested));
    Selection { instants, retained, leftovers }
}

/// `keep_min_commits`, raised (as Hudi raises it) when the cleaner keeps
/// more commits than it allows.
fn raised_keep_min(commits: &[&Instant], settings: &ArchiveSettings) -> usize {
    let retained = settings.cleaner_commits_retained;
    if retained == 0 || commits.len() <= retained {
        return settings.keep_min_commits;
    }
    // The cleaner's earliest commit to retain is the `retained`-th newest;
    // the commits after it, plus two, must stay.
    let after_ectr = retained - 1;
    settings.keep_min_commits.max(after_ectr + 2)
}

/// The first delta commit a compaction scheduled by count needs: with
/// fewer than `needed` delta commits since the last completed compaction,
/// that compaction (or the first delta commit when there is none);
/// otherwise the `needed`-th newest of them.
fn compaction_retained(commits: &[&Instant], needed: usize) -> Option<InstantTime> {
    let last_compaction = commits.iter().rposition(|c| c.action == Action::Compaction);
    let deltas: Vec<&InstantTime> = commits
        .iter()
        .skip(last_compaction.map_or(0, |n| n + 1))
        .filter(|c| c.action == Action::DeltaCommit)
        .map(|c| &c.requested)
        .collect();
    if deltas.len() < needed.max(1) {
        return match last_compaction {
            Some(n) => Some(commits[n].requested.clone()),
            None => deltas.first().map(|t| (*t).clone()),
        };
    }
    Some(deltas[deltas.len() - needed.max(1)].clone())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tributary_timeline::{History, InProcessLock, ManualClock, TimeMode, history_dir};

    use super::*;
    use crate::CleanRetention;
    use crate::test_util::{Table, compaction, delta_commit, exists, log, replace_commit, table, timeline, ts, writer};

    /// Small bounds: archive above 4 commits, down to 2; compactions by
    /// count need one delta commit.
    fn small() -> ArchiveSettings {
        ArchiveSettings {
            keep_min_commits: 2,
            keep_max_commits: 4,
            cleaner_commits_retained: 0,
            compaction_delta_commits: 1,
            history: HistorySettings { compaction_batch_size: 3, ..HistorySettings::default() },
        }
    }

    /// `n` delta commits to bucket 0, requested at `first`, `first + 10`,
    /// ..., each completed 5 ms later.
    async fn commits_from(tb: &Table, first: u32, n: u32) -> Vec<InstantTime> {
        let mut out = Vec::new();
        for k in 0..n {
            let t = first + 10 * k;
            delta_commit(tb, t, Some(t + 5), &[0]).await;
            out.push(ts(t));
        }
        out
    }

    async fn run(tb: &Table, settings: &ArchiveSettings) -> ArchiveSummary {
        archive(&tb.loc, &tb.config, &tb.time, settings).await.unwrap()
    }

    fn requested(s: &ArchiveSummary) -> Vec<InstantTime> {
        s.archived.iter().map(|i| i.requested.clone()).collect()
    }

    #[tokio::test]
    async fn nothing_is_archived_until_the_commits_pass_the_upper_bound() {
        let tb = table().await;
        commits_from(&tb, 100, 3).await;
        compaction(&tb, 140, 141).await;
        let s = run(&tb, &small()).await;
        assert!(s.archived.is_empty() && s.history_file.is_none(), "{s:?}");
        assert!(History::load(&tb.loc, &history_dir(&tb.loc, &tb.config).unwrap()).await.unwrap().files().is_empty());
    }

    #[tokio::test]
    async fn the_oldest_go_down_to_the_lower_bound_and_stay_readable() {
        let tb = table().await;
        let times = commits_from(&tb, 100, 5).await;
        compaction(&tb, 150, 151).await;
        let before = timeline(&tb).await;
        let s = run(&tb, &small()).await;
        assert_eq!(requested(&s), times[..4].to_vec());
        assert_eq!(s.retained, None);
        let after = timeline(&tb).await;
        for t in &times[..4] {
            assert!(after.is_archived(t), "{t}");
            for state in [State::Requested, State::Inflight, State::Completed] {
                let path = writer(&tb).path_of(before.get(t).unwrap(), state).unwrap();
                assert!(tb.loc.get(&path).await.is_err(), "{path} is gone from the active timeline");
            }
        }
        // Same instants, same completion times: the table reads the same.
        assert!(after.instants().eq(before.instants()), "{after:?} against {before:?}");
        assert_eq!(after.completed().count(), 6);
        // Archiving again finds 2 commits: nothing to do.
        assert!(run(&tb, &small()).await.archived.is_empty());
    }

    #[tokio::test]
    async fn a_pending_write_keeps_the_commit_before_it() {
        let tb = table().await;
        let times = commits_from(&tb, 100, 2).await;
        compaction(&tb, 117, 118).await;
        delta_commit(&tb, 125, None, &[0]).await; // a write still in flight
        let later = commits_from(&tb, 130, 4).await;
        let s = run(&tb, &small()).await;
        // The pending write at 125 keeps the compaction at 117 (the commit
        // before it) and on.
        assert_eq!(requested(&s), times);
        assert_eq!(s.retained, Some(Retained::PendingWrite(ts(117))));
        let tl = timeline(&tb).await;
        assert!(times.iter().all(|t| tl.is_archived(t)));
        assert!(!tl.is_archived(&ts(117)) && later.iter().all(|t| !tl.is_archived(t)));
    }

    /// A compaction requested before a pending write and completed after
    /// that write was requested stays: the write saw it pending and reads
    /// its plan (Java's writers do) when it commits.
    #[tokio::test]
    async fn a_commit_completed_after_a_pending_write_began_stays() {
        let tb = table().await;
        let first = commits_from(&tb, 100, 1).await; // 100
        compaction(&tb, 105, 130).await; // completes after the write at 125 began
        commits_from(&tb, 110, 2).await; // 110, 120: the commit before the write is 120
        delta_commit(&tb, 125, None, &[0]).await; // a write still in flight
        compaction(&tb, 135, 136).await; // the latest compaction
        commits_from(&tb, 140, 4).await;
        let s = run(&tb, &small()).await;
        // Without the rule, 105 and 110 would go too (the commit before
        // the write is 120).
        assert_eq!(requested(&s), first);
        assert_eq!(s.retained, Some(Retained::PendingWrite(ts(105))));
        assert!(!timeline(&tb).await.is_archived(&ts(105)));
    }

    /// A delta commit requested before a compaction and completed after it
    /// has its log in the compaction's slice; the official reader would put
    /// it in the older slice once archived, so it stays.
    #[tokio::test]
    async fn a_log_in_a_newer_slice_than_its_request_stays_active() {
        let tb = table().await;
        let times = commits_from(&tb, 100, 3).await; // 100, 110, 120
        delta_commit(&tb, 130, None, &[0]).await;
        compaction(&tb, 140, 145).await;
        let mut i = Instant::requested(ts(130), Action::DeltaCommit);
        i.completed = Some(ts(150));
        writer(&tb).create(&i, State::Completed, Vec::new()).await.unwrap();
        commits_from(&tb, 160, 3).await;
        let s = run(&tb, &small()).await;
        assert_eq!(s.retained, Some(Retained::LatestSliceLog(ts(130))));
        assert_eq!(requested(&s), times.to_vec());
        assert!(!timeline(&tb).await.is_archived(&ts(130)));
    }

    /// A write requested before the others and visible after them all
    /// (here a schema change, which writes no file) holds the schema in
    /// force: it stays, with everything after it.
    #[tokio::test]
    async fn the_write_visible_last_stays_active() {
        let tb = table().await;
        let first = commits_from(&tb, 100, 1).await; // 100
        delta_commit(&tb, 105, Some(300), &[]).await; // visible after every other
        commits_from(&tb, 110, 4).await;
        compaction(&tb, 150, 151).await;
        let s = run(&tb, &small()).await;
        assert_eq!(requested(&s), first);
        assert_eq!(s.retained, Some(Retained::SchemaInForce(ts(105))));
        let tl = timeline(&tb).await;
        assert!(!tl.is_archived(&ts(105)));
        // Once a newer write is visible, it may go.
        delta_commit(&tb, 310, Some(315), &[0]).await;
        let s = run(&tb, &small()).await;
        assert!(requested(&s).contains(&ts(105)), "{s:?}");
    }

    /// The logs of a file group never compacted: the official reader keys
    /// its slices by the logs' own instants, so none of them is archived.
    #[tokio::test]
    async fn logs_of_a_file_group_without_a_base_stay_active() {
        let tb = table().await;
        commits_from(&tb, 100, 2).await;
        delta_commit(&tb, 120, Some(125), &[0, 1]).await; // bucket 1: logs only
        commits_from(&tb, 130, 3).await;
        compaction(&tb, 170, 171).await;
        let s = run(&tb, &small()).await;
        assert_eq!(s.retained, Some(Retained::LatestSliceLog(ts(120))));
        assert_eq!(requested(&s), vec![ts(100), ts(110)]);
    }

    /// A replacecommit whose replaced file group still has files stays,
    /// with everything after it: only the active timeline tells readers
    /// the group is replaced. Once the cleaner deleted it, it goes.
    #[tokio::test]
    async fn a_replacecommit_stays_until_its_replaced_groups_are_cleaned() {
        let tb = table().await;
        let times = commits_from(&tb, 100, 3).await; // bucket 0: 100, 110, 120
        delta_commit(&tb, 130, Some(135), &[1]).await;
        compaction(&tb, 131, 136).await; // bucket 0's base
        replace_commit(&tb, 140, 145, 1).await; // replaces bucket 1's group
        commits_from(&tb, 150, 4).await;
        compaction(&tb, 200, 201).await;
        let s = run(&tb, &small()).await;
        assert_eq!(s.retained, Some(Retained::ReplacedFiles(ts(140))));
        assert_eq!(requested(&s), [times, vec![ts(130), ts(131)]].concat());
        assert!(!timeline(&tb).await.is_archived(&ts(140)));
        // The cleaner deletes the replaced group (its commit is long before
        // the earliest commit to retain); then the replacecommit goes.
        let cleaned = crate::clean(&tb.loc, &tb.config, &tb.time, CleanRetention::Commits(2)).await.unwrap().unwrap();
        assert!(cleaned.deleted_files.iter().any(|f| f.contains(&log(1, 130))), "{cleaned:?}");
        assert!(!exists(&tb, &log(1, 130)).await);
        let s = run(&tb, &small()).await;
        assert!(requested(&s).contains(&ts(140)), "{s:?}");
    }

    #[tokio::test]
    async fn archived_contents_and_plans_are_in_the_history() {
        let tb = table().await;
        compaction(&tb, 90, 95).await;
        let times = commits_from(&tb, 100, 5).await;
        compaction(&tb, 150, 151).await;
        let s = run(&tb, &small()).await;
        assert_eq!(requested(&s), [vec![ts(90)], times[..4].to_vec()].concat());
        let dir = history_dir(&tb.loc, &tb.config).unwrap();
        let history = History::load(&tb.loc, &dir).await.unwrap();
        assert_eq!(history.files().len(), 1);
        assert_eq!(history.files()[0].path.filename(), s.history_file.as_deref());
        let compaction = history.find_instant(&ts(90)).await.unwrap().unwrap();
        assert_eq!((compaction.action, compaction.completed), (Action::Commit, Some(ts(95))));
    }

    #[tokio::test]
    async fn full_levels_merge_and_old_manifests_go() {
        let tb = table().await;
        let settings = small();
        let mut t = 100;
        for _ in 0..4 {
            commits_from(&tb, t, 3).await;
            compaction(&tb, t + 25, t + 26).await;
            t += 30;
            run(&tb, &settings).await;
        }
        let dir = history_dir(&tb.loc, &tb.config).unwrap();
        let history = History::load(&tb.loc, &dir).await.unwrap();
        let levels: Vec<u32> = history.files().iter().map(|f| f.level).collect();
        assert!(levels.contains(&1), "three level-0 files merged into one of level 1: {levels:?}");
        assert!(history.files().iter().filter(|f| f.level == 0).count() < 3, "{levels:?}");
        let listing = tb.loc.store.list_with_delimiter(Some(&dir)).await.unwrap();
        let manifests =
            listing.objects.iter().filter(|m| m.location.filename().unwrap().starts_with("manifest_")).count();
        assert!(manifests <= 4, "{manifests} manifests kept");
        let tl = timeline(&tb).await;
        assert_eq!(tl.completed().count(), 16, "every commit is still in the timeline");
        let active = tl.active().len();
        assert_eq!(active, 2);
    }

    /// An hours clean records its earliest commit to retain as a commits
    /// clean does, and that holds archiving back to its window.
    #[tokio::test]
    async fn an_hours_clean_holds_archiving_back_to_its_window() {
        let tb = table().await;
        let old = commits_from(&tb, 100, 3).await;
        compaction(&tb, 130, 131).await;
        commits_from(&tb, 140, 3).await;
        compaction(&tb, 170, 171).await;
        // 24 hours before the cleaner's clock is the delta commit at 150.
        let clock = Arc::new(ManualClock::new(ts(150).to_millis().unwrap() + 24 * 3_600_000));
        let time = TimeGenerator::new(TimeMode::HybridLogical, Duration::ZERO, clock, Arc::new(InProcessLock::new()));
        let cleaned = crate::clean(&tb.loc, &tb.config, &time, CleanRetention::Hours(24)).await.unwrap().unwrap();
        assert_eq!(cleaned.earliest_commit_to_retain, ts(150).to_string());
        assert_eq!(cleaned.deleted_files.len(), old.len(), "the logs before the base at 130");

        // Six of the eight commits could go; the clean's window keeps 150 on.
        let s = run(&tb, &small()).await;
        assert_eq!(s.retained, Some(Retained::CleanRetained(ts(150))));
        assert_eq!(requested(&s), [old, vec![ts(130), ts(140)]].concat());
        let tl = timeline(&tb).await;
        assert!([150, 160, 170].iter().all(|&t| !tl.is_archived(&ts(t))));
    }

    #[test]
    fn settings_are_checked() {
        let bad = ArchiveSettings { keep_max_commits: 20, ..ArchiveSettings::default() };
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.contains("hoodie.keep.max.commits"), "{err}");
        assert!(ArchiveSettings::default().validate().is_ok());
    }
}
