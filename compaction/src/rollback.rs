//! Rolling back failed writes (format notes §8).
//!
//! A delta commit whose writer died stays pending forever, and once the
//! active timeline starts after it, readers count it as archived, that is as
//! completed, and its orphan log files become visible. So failed writes are
//! rolled back physically, as Hudi 1.x does for table version 8:
//!
//! ```text
//!  rollback                                  table lock          storage
//!    |  pending <t>.deltacommit, heartbeat older than expiry (or none)
//!    |  plan: files named by the markers .hoodie/.temp/<t>/...
//!    |  acquire ------------------------------>|
//!    |  R = next time; <t> still pending and no other rollback of it?
//!    |  create <R>.rollback.requested (Avro HoodieRollbackPlan) ------------>|
//!    |  delete <t>.deltacommit.inflight (the writer can no longer complete)->|
//!    |  release <------------------------------|
//!    |  acquire ------------------------------>|   (when <R> has no inflight)
//!    |  <t> completed after all? drop <R>.rollback.requested and stop ----->|
//!    |  delete <t>.deltacommit.inflight again (idempotent) ---------------->|
//!    |  release <------------------------------|
//!    |  create <R>.rollback.inflight --------------------------------------->|
//!    |  delete the planned files, the markers and the heartbeat ------------>|
//!    |  delete <t>.deltacommit.requested ----------------------------------->|
//!    |  acquire ------------------------------>|
//!    |  c = next time; create <R>_<c>.rollback (HoodieRollbackMetadata) ---->|
//!    |  release <------------------------------|
//! ```
//!
//! A writer completes only under the lock and only while its inflight file
//! exists ([`Completion::Owned`]), so once a lock hold has withdrawn that
//! file, the writer cannot complete, and only then are its files deleted.
//! If the first withdrawal failed and the writer, only stalled, completed
//! before the second, the rollback is dropped: it had deleted nothing. The
//! failed instant leaves the timeline before its rollback completes, as
//! in Java's `BaseRollbackActionExecutor`; a rollback interrupted anywhere
//! stays pending and the next call finishes it from its plan, so calls are
//! idempotent. A writer whose heartbeat is fresh is never touched. The
//! requested rollback is created in the same lock hold that checks that the
//! instant is still pending and that no other rollback targets it, so two
//! concurrent calls never roll back one instant twice; completions check,
//! under the lock, that the rollback has not completed already. A pending
//! rollback with an inflight file whose target completed is not ours (ours
//! never get that far), and is left to Hudi.
//!
//! Paths in plans and metadata are absolute paths on the table's file system
//! without scheme (`/` + the object-store path, e.g.
//! `/warehouse/trips/city=paris/.f_t.log.1_0-1-0`): Java resolves them
//! against the table's own file system, as it resolves its own full paths.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use object_store::ObjectStoreExt;
use tributary_format::{InstantInfo, RollbackMetadata, RollbackPartitionMetadata, RollbackPlan, RollbackRequest};
use tributary_timeline::{
    Action, BaseFileName, Clock, Instant, InstantTime, LogFileName, State, TableConfig, TableLocation, TimeGenerator,
    Timeline, TimelineFolder,
};

use tributary_timeline::{
    Completion, complete_instant, delete_if_exists, list_markers, marked_file, remove_markers, rollback_files,
};
use tributary_timeline::{heartbeat_expired, heartbeat_path};

use crate::error::Result;
use tributary_timeline::DataFile;
use tributary_timeline::partition_file;

/// One failed delta commit that was rolled back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolledBack {
    /// The failed delta commit's instant.
    pub instant: InstantTime,
    /// The rollback's instant.
    pub rollback: InstantTime,
    /// When the rollback completed.
    pub completed: InstantTime,
    /// The data files deleted (or found already gone), relative to the table root.
    pub deleted_files: Vec<String>,
}

/// Rolls back every pending delta commit whose writer is dead, and finishes
/// rollbacks an earlier call left pending.
///
/// A writer is dead when its heartbeat `.hoodie/.heartbeat/<t>` was last
/// written more than `expiry` ago by `clock`. A missing heartbeat counts from
/// the instant's own time instead of from the epoch (Java's reading): a writer
/// creates its requested instant a moment before its first heartbeat, and
/// must not be rolled back in that moment. After `expiry` both readings agree.
///
/// Returns what was rolled back, oldest instant first.
pub async fn rollback_failed_writes(
    loc: &TableLocation,
    config: &TableConfig,
    time: &TimeGenerator,
    clock: &dyn Clock,
    expiry: Duration,
) -> Result<Vec<RolledBack>> {
    rollback_at_most(loc, config, time, clock, expiry, usize::MAX).await
}

/// How many failed writes a table service rolls back before its own job
/// ([`rollback_before_service`]).
pub const ROLLBACKS_PER_SERVICE_RUN: usize = 4;

/// The rollback a table service (compaction, cleaning, archiving) runs
/// before its own job: [`rollback_failed_writes`] of at most
/// [`ROLLBACKS_PER_SERVICE_RUN`] instants (pending rollbacks first, then
/// the oldest failed writes), so that a pile of failed writes (a crash
/// loop, a flaky store) delays the job by a few rollbacks, not by all of
/// them. When the store or the lock is unavailable meanwhile, the failure
/// is logged and the job goes on: a failed write's files belong to no file
/// slice, since its instant never completed, so compaction, cleaning and
/// archiving (which stops at the oldest pending instant) are right without
/// its rollback, and the next run tries again. Any other error is
/// returned.
pub async fn rollback_before_service(
    loc: &TableLocation,
    config: &TableConfig,
    time: &TimeGenerator,
    clock: &dyn Clock,
    expiry: Duration,
) -> Result<Vec<RolledBack>> {
    match rollback_at_most(loc, config, time, clock, expiry, ROLLBACKS_PER_SERVICE_RUN).await {
        Err(e) if e.kind() == tributary_format::ErrorKind::Unavailable => {
            tracing::warn!(table = %loc, error = %e, "rolling back failed writes failed; the job goes on, and the next run tries again");
            Ok(Vec::new())
        }
        done => done,
    }
}

/// [`rollback_failed_writes`] of at most `at_most` instants.
async fn rollback_at_most(
    loc: &TableLocation,
    config: &TableConfig,
    time: &TimeGenerator,
    clock: &dyn Clock,
    expiry: Duration,
    at_most: usize,
) -> Result<Vec<RolledBack>> {
    let timeline = Timeline::load(loc, config).await?;
    let writer = TimelineFolder::new(loc, config);
    let mut done = Vec::new();
    let mut targeted = BTreeSet::new();
    let mut runs = 0;
    for (rollback, plan) in pending_rollbacks(loc, &writer, &timeline).await? {
        let Some(target) = deltacommit_target(&plan) else { continue };
        if runs == at_most {
            // Left for a later call; the instant stays targeted.
            targeted.insert(target);
            continue;
        }
        targeted.insert(target.clone());
        if timeline.get(&target).is_some_and(Instant::is_completed) {
            if timeline.get(&rollback).is_some_and(|r| r.state == State::Requested) {
                abandon(loc, &writer, &rollback, &target).await?;
            } else {
                tracing::warn!(%rollback, instant = %target, "inflight rollback of a completed instant; left to Hudi");
            }
            continue;
        }
        runs += 1;
        done.extend(execute(loc, config, time, clock, &rollback, &target, &plan).await?);
    }
    let failed: Vec<InstantTime> = timeline
        .pending()
        .filter(|i| i.action == Action::DeltaCommit && !targeted.contains(&i.requested))
        .map(|i| i.requested.clone())
        .collect();
    for t in failed {
        if runs == at_most {
            break;
        }
        if !heartbeat_expired(loc, &t, clock, expiry).await? {
            continue;
        }
        let plan = plan_for(loc, &t).await?;
        let Some(rollback) = request(loc, config, time, &t, &plan).await? else { continue };
        runs += 1;
        done.extend(execute(loc, config, time, clock, &rollback, &t, &plan).await?);
    }
    done.sort_by(|a, b| a.instant.cmp(&b.instant));
    Ok(done)
}

/// The pending rollback instants and their plans (unreadable plans are
/// skipped with a warning: they are not ours to finish).
async fn pending_rollbacks(
    loc: &TableLocation,
    writer: &TimelineFolder,
    timeline: &Timeline,
) -> tributary_timeline::Result<Vec<(InstantTime, RollbackPlan)>> {
    let mut out = Vec::new();
    for i in timeline.pending().filter(|i| i.action == Action::Rollback) {
        let path = writer.path_of(i, State::Requested)?;
        let plan = match loc.get(&path).await {
            Ok(bytes) => RollbackPlan::from_avro_container(&bytes, path.as_ref()).map_err(Into::into),
            Err(e) => Err(tributary_timeline::Error::from(e)),
        };
        match plan {
            Ok(plan) => out.push((i.requested.clone(), plan)),
            Err(e) => tracing::warn!(rollback = %i.requested, "skipping pending rollback: {e}"),
        }
    }
    Ok(out)
}

/// The delta commit a plan rolls back, if it rolls back one.
fn deltacommit_target(plan: &RollbackPlan) -> Option<InstantTime> {
    let info = plan.instant_to_rollback.as_ref()?;
    (info.action == Action::DeltaCommit.name()).then(|| InstantTime::parse(&info.commit_time).ok()).flatten()
}

/// The rollback plan of `t`: one request per file its markers name, as Java's
/// marker-based rollback plans them for table version 8.
async fn plan_for(loc: &TableLocation, t: &InstantTime) -> Result<RollbackPlan> {
    let markers = list_markers(loc, t).await?;
    let files: BTreeSet<(String, String)> = markers.iter().filter_map(|m| marked_file(loc, t, m)).collect();
    let rollback_requests = files
        .into_iter()
        .map(|(partition, file)| {
            let (file_id, base_instant) = match (LogFileName::parse(&file), BaseFileName::parse(&file)) {
                (Ok(log), _) => (Some(log.file_id), Some(log.instant.to_string())),
                (_, Ok(base)) => (Some(base.file_id), Some(base.instant.to_string())),
                _ => (None, None),
            };
            RollbackRequest {
                files_to_be_deleted: vec![fs_path(loc, &partition, &file)],
                partition_path: partition,
                file_id,
                latest_base_instant: base_instant,
                log_blocks_to_be_deleted: Some(BTreeMap::new()),
            }
        })
        .collect();
    Ok(RollbackPlan {
        instant_to_rollback: Some(InstantInfo::new(t.as_str(), Action::DeltaCommit.name())),
        rollback_requests,
        ..Default::default()
    })
}

/// Takes a rollback instant and creates its requested file, in one lock
/// hold that re-reads the timeline: `None` when `t` completed meanwhile or
/// another rollback of `t` is already pending.
async fn request(
    loc: &TableLocation,
    config: &TableConfig,
    time: &TimeGenerator,
    t: &InstantTime,
    plan: &RollbackPlan,
) -> Result<Option<InstantTime>> {
    let content = plan.to_avro_container()?;
    let writer = TimelineFolder::new(loc, config);
    let requested = time
        .with_time_fenced(|r, fence| async move {
            let timeline = Timeline::load(loc, config).await?;
            if timeline.get(t).is_none_or(Instant::is_completed) {
                return Ok(None);
            }
            let others = pending_rollbacks(loc, &writer, &timeline).await?;
            if others.iter().any(|(_, p)| deltacommit_target(p).as_ref() == Some(t)) {
                return Ok(None);
            }
            fence.check().await?;
            writer.create(&Instant::requested(r.clone(), Action::Rollback), State::Requested, content).await?;
            // Withdrawn in the same lock hold: a writer that wakes up late
            // checks for its inflight file under the lock before it
            // completes, so it either completed before this hold (and is not
            // rolled back) or finds its instant withdrawn and fails. Should
            // this delete fail, `execute` withdraws it before deleting data.
            withdraw_inflight(loc, &writer, t).await?;
            Ok(Some(r))
        })
        .await?;
    Ok(requested)
}

/// Deletes `t`'s inflight delta commit file, if it is still there: once it
/// is gone, `t`'s writer can no longer complete it
/// ([`Completion::Owned`]). Must run under the table lock.
async fn withdraw_inflight(
    loc: &TableLocation,
    writer: &TimelineFolder,
    t: &InstantTime,
) -> tributary_timeline::Result<()> {
    let inflight = writer.path_of(&Instant::requested(t.clone(), Action::DeltaCommit), State::Inflight)?;
    Ok(delete_if_exists(loc, &inflight).await?)
}

/// Under the table lock, withdraws `t` before its rollback deletes anything:
/// `false` when `t` completed after all (its rollback was requested, but
/// the writer completed before the inflight file could be withdrawn), and
/// then nothing of `t` may be deleted.
async fn withdraw(loc: &TableLocation, config: &TableConfig, time: &TimeGenerator, t: &InstantTime) -> Result<bool> {
    let writer = TimelineFolder::new(loc, config);
    let writer = &writer;
    let withdrawn = time
        .with_time_fenced(|_, fence| async move {
            let timeline = Timeline::load(loc, config).await?;
            if timeline.get(t).is_some_and(Instant::is_completed) {
                return Ok(false);
            }
            fence.check().await?;
            withdraw_inflight(loc, writer, t).await?;
            Ok(true)
        })
        .await?;
    Ok(withdrawn)
}

/// Drops the requested rollback `rollback` of an instant that completed:
/// it never started (it has no inflight file), so it deleted nothing.
async fn abandon(loc: &TableLocation, writer: &TimelineFolder, rollback: &InstantTime, t: &InstantTime) -> Result<()> {
    tracing::warn!(%rollback, instant = %t, "dropping the requested rollback of an instant that completed");
    let instant = Instant::requested(rollback.clone(), Action::Rollback);
    Ok(delete_if_exists(loc, &writer.path_of(&instant, State::Requested)?).await?)
}

/// Carries out a requested rollback of `t` and completes it; `None` when
/// `t` completed before it could be withdrawn, and the rollback was dropped.
async fn execute(
    loc: &TableLocation,
    config: &TableConfig,
    time: &TimeGenerator,
    clock: &dyn Clock,
    rollback: &InstantTime,
    t: &InstantTime,
    plan: &RollbackPlan,
) -> Result<Option<RolledBack>> {
    let started = clock.now_millis();
    let writer = TimelineFolder::new(loc, config);
    let instant = Instant::requested(rollback.clone(), Action::Rollback);
    // The inflight rollback is created only once `t` is withdrawn, so a
    // pending rollback without one has deleted nothing yet.
    let inflight = writer.path_of(&instant, State::Inflight)?;
    let started_before = match loc.store.head(&inflight).await {
        Ok(_) => true,
        Err(object_store::Error::NotFound { .. }) => false,
        Err(e) => return Err(tributary_timeline::Error::store("head", &inflight, e).into()),
    };
    if !started_before && !withdraw(loc, config, time, t).await? {
        abandon(loc, &writer, rollback, t).await?;
        return Ok(None);
    }
    writer.create_if_absent(&instant, State::Inflight, Vec::new()).await?;

    // Files the plan names, then any its markers name beyond them (the
    // writer may have flushed after planning), then the markers.
    let mut deleted: BTreeSet<(String, String)> = BTreeSet::new();
    for r in &plan.rollback_requests {
        for f in &r.files_to_be_deleted {
            let name = file_name(f);
            delete_if_exists(loc, &loc.join(&partition_file(&r.partition_path, name))).await?;
            deleted.insert((r.partition_path.clone(), name.to_string()));
        }
    }
    for p in rollback_files(loc, t).await? {
        let rel = loc.relative(&p);
        let (partition, name) = rel.rsplit_once('/').unwrap_or(("", rel.as_str()));
        deleted.insert((partition.to_string(), name.to_string()));
    }
    delete_if_exists(loc, &heartbeat_path(loc, t)).await?;
    let failed = Instant::requested(t.clone(), Action::DeltaCommit);
    for state in [State::Inflight, State::Requested] {
        delete_if_exists(loc, &writer.path_of(&failed, state)?).await?;
    }

    let mut partitions: BTreeMap<String, RollbackPartitionMetadata> = BTreeMap::new();
    for (partition, name) in &deleted {
        let m = partitions.entry(partition.clone()).or_insert_with(|| RollbackPartitionMetadata {
            partition_path: partition.clone(),
            rollback_log_files: Some(BTreeMap::new()),
            log_files_from_failed_commit: Some(BTreeMap::new()),
            ..Default::default()
        });
        m.success_delete_files.push(fs_path(loc, partition, name));
    }
    let metadata = RollbackMetadata {
        start_rollback_time: rollback.to_string(),
        time_taken_in_millis: clock.now_millis().saturating_sub(started).max(0),
        total_files_deleted: i32::try_from(deleted.len()).unwrap_or(i32::MAX),
        commits_rollback: vec![t.to_string()],
        partition_metadata: partitions,
        instants_rollback: vec![InstantInfo::new(t.as_str(), Action::DeltaCommit.name())],
        ..Default::default()
    };
    let completed =
        complete_instant(loc, &writer, time, &instant, metadata.to_avro_container()?, Completion::Shared).await?;
    tracing::info!(instant = %t, %rollback, files = deleted.len(), "rolled back a failed delta commit");
    Ok(Some(RolledBack {
        instant: t.clone(),
        rollback: rollback.clone(),
        completed,
        deleted_files: deleted.iter().map(|(p, n)| partition_file(p, n)).collect(),
    }))
}

/// Deletes the orphans among `files`: data files of instants that are on
/// neither the active timeline nor in its history, that is of instants
/// withdrawn (rolled back, or aborted) before or while they were written.
/// A writer that stalled past its heartbeat expiry can write a log after
/// recovery rolled it back, and crash before it deletes it again; Hudi's
/// readers take such an orphan for archived and committed once the active
/// timeline starts after its instant.
///
/// `timeline` must have been loaded *after* `files` were listed: a writer
/// creates its requested instant before its first data file, so a file
/// listed earlier whose instant the later timeline lacks was withdrawn.
/// Nothing is deleted when the timeline cannot tell withdrawn from
/// archived ([`Timeline::knows_archive`]). Returns the files deleted,
/// relative to the table root.
pub(crate) async fn delete_orphans(
    loc: &TableLocation,
    timeline: &Timeline,
    files: &[DataFile],
) -> Result<Vec<String>> {
    if !timeline.knows_archive() {
        return Ok(Vec::new());
    }
    let mut deleted = Vec::new();
    let mut instants = BTreeSet::new();
    for f in files {
        let Some((_, instant)) = f.written() else { continue };
        if timeline.get(&instant).is_some() {
            continue;
        }
        tracing::info!(file = %f.path, %instant, "deleting an orphan: its instant was withdrawn");
        delete_if_exists(loc, &f.path).await?;
        deleted.push(partition_file(&f.partition, &f.name));
        instants.insert(instant);
    }
    for t in &instants {
        remove_markers(loc, t).await?;
    }
    Ok(deleted)
}

/// The path Java resolves against the table's file system: `/` plus the
/// object-store path of `<partition>/<name>`.
pub(crate) fn fs_path(loc: &TableLocation, partition: &str, name: &str) -> String {
    format!("/{}", loc.join(&partition_file(partition, name)))
}

/// The last segment of a path as written in a plan (ours or Java's, with or
/// without scheme).
pub(crate) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::TryStreamExt;
    use object_store::memory::InMemory;
    use object_store::path::Path;
    use tributary_timeline::ensure_partition;
    use tributary_timeline::{InProcessLock, ManualClock, SystemClock, TimeMode};

    use super::*;
    use tributary_timeline::marker_dir;

    struct Table {
        loc: TableLocation,
        config: TableConfig,
        clock: Arc<ManualClock>,
        time: TimeGenerator,
    }

    async fn table() -> Table {
        let (loc, config) = crate::test_util::memory_table().await;
        // The in-memory store stamps objects with the real time, so the
        // injected clock starts there.
        let clock = Arc::new(ManualClock::new(SystemClock.now_millis()));
        let time =
            TimeGenerator::new(TimeMode::HybridLogical, Duration::ZERO, clock.clone(), Arc::new(InProcessLock::new()));
        Table { loc, config, clock, time }
    }

    const PARTITION: &str = "city=paris";

    fn log_name(t: &InstantTime, bucket: u32) -> String {
        format!(".{}_{t}.log.1_0-1-0", tributary_timeline::nbcc_file_id(bucket))
    }

    /// A delta commit as a writer leaves it: requested, inflight, a marker
    /// and a log file per bucket, and (optionally) a heartbeat.
    async fn start_write(tb: &Table, buckets: &[u32], heartbeat: bool) -> InstantTime {
        let t = tb.time.new_instant().await.unwrap();
        let w = TimelineFolder::new(&tb.loc, &tb.config);
        let i = Instant::requested(t.clone(), Action::DeltaCommit);
        w.create(&i, State::Requested, Vec::new()).await.unwrap();
        w.create(&i, State::Inflight, Vec::new()).await.unwrap();
        if heartbeat {
            tb.loc.store.put(&heartbeat_path(&tb.loc, &t), Vec::new().into()).await.unwrap();
        }
        ensure_partition(&tb.loc, PARTITION, &t).await.unwrap();
        for &b in buckets {
            let name = log_name(&t, b);
            let marker = marker_dir(&tb.loc, &t).join(PARTITION).join(format!("{name}.marker.APPEND"));
            tb.loc.create(&marker, Vec::new()).await.unwrap();
            tb.loc.create(&tb.loc.join(&partition_file(PARTITION, &name)), b"log".to_vec()).await.unwrap();
        }
        t
    }

    async fn exists(loc: &TableLocation, path: &Path) -> bool {
        loc.store.head(path).await.is_ok()
    }

    async fn data_file_exists(tb: &Table, t: &InstantTime, bucket: u32) -> bool {
        exists(&tb.loc, &tb.loc.join(&partition_file(PARTITION, &log_name(t, bucket)))).await
    }

    async fn rollback(tb: &Table) -> Vec<RolledBack> {
        rollback_at(tb, usize::MAX).await
    }

    /// Rolls back at most `at_most` failed writes, as a table service
    /// does with [`ROLLBACKS_PER_SERVICE_RUN`].
    async fn rollback_at(tb: &Table, at_most: usize) -> Vec<RolledBack> {
        let expiry = tributary_timeline::DEFAULT_HEARTBEAT_EXPIRY;
        rollback_at_most(&tb.loc, &tb.config, &tb.time, tb.clock.as_ref(), expiry, at_most).await.unwrap()
    }

    async fn timeline(tb: &Table) -> Timeline {
        Timeline::load(&tb.loc, &tb.config).await.unwrap()
    }

    /// A table service rolls back the oldest few failed writes a run, and
    /// the next run the next few, until none is left.
    #[tokio::test]
    async fn a_service_rolls_back_a_few_failed_writes_a_run_oldest_first() {
        let tb = table().await;
        let now = tb.clock.now_millis();
        tb.clock.set(now - 10 * 60_000);
        let mut dead = Vec::new();
        for _ in 0..ROLLBACKS_PER_SERVICE_RUN + 2 {
            dead.push(start_write(&tb, &[0], false).await);
        }
        tb.clock.set(now);
        let run = || async {
            let done = rollback_at(&tb, ROLLBACKS_PER_SERVICE_RUN).await;
            done.into_iter().map(|r| r.instant).collect::<Vec<_>>()
        };
        assert_eq!(run().await, dead[..ROLLBACKS_PER_SERVICE_RUN]);
        assert!(data_file_exists(&tb, &dead[ROLLBACKS_PER_SERVICE_RUN], 0).await, "left for the next run");
        assert_eq!(run().await, dead[ROLLBACKS_PER_SERVICE_RUN..]);
        assert!(run().await.is_empty());
        assert!(timeline(&tb).await.pending().next().is_none());
    }

    #[tokio::test]
    async fn expired_writes_are_rolled_back_and_live_ones_left_alone() {
        let tb = table().await;
        let now = tb.clock.now_millis();
        tb.clock.set(now - 10 * 60_000);
        // A completed commit, whose files must survive.
        let done = start_write(&tb, &[0], false).await;
        let w = TimelineFolder::new(&tb.loc, &tb.config);
        let mut i = Instant::requested(done.clone(), Action::DeltaCommit);
        i.completed = Some(tb.time.new_instant().await.unwrap());
        w.create(&i, State::Completed, Vec::new()).await.unwrap();
        // A writer that died ten minutes ago without a heartbeat file...
        let dead = start_write(&tb, &[0, 1], false).await;
        // ...one that died just now, before its first heartbeat...
        tb.clock.set(now);
        let fresh_no_beat = start_write(&tb, &[1], false).await;
        // ...and a live writer with a fresh heartbeat.
        let live = start_write(&tb, &[0], true).await;

        // Only the instant whose writer is silent for longer than the expiry goes.
        tb.clock.set(now + 60_000);
        let rolled = rollback(&tb).await;
        assert_eq!(rolled.len(), 1, "{rolled:?}");
        let r = &rolled[0];
        assert_eq!(r.instant, dead);
        assert!(r.rollback > dead && r.completed > r.rollback);
        assert_eq!(
            r.deleted_files,
            vec![partition_file(PARTITION, &log_name(&dead, 0)), partition_file(PARTITION, &log_name(&dead, 1))]
        );
        assert!(!data_file_exists(&tb, &dead, 0).await && !data_file_exists(&tb, &dead, 1).await);
        assert!(data_file_exists(&tb, &done, 0).await);
        assert!(data_file_exists(&tb, &fresh_no_beat, 1).await);
        assert!(data_file_exists(&tb, &live, 0).await);
        assert!(exists(&tb.loc, &heartbeat_path(&tb.loc, &live)).await);
        let markers: Vec<_> = tb.loc.store.list(Some(&marker_dir(&tb.loc, &dead))).try_collect().await.unwrap();
        assert!(markers.is_empty());

        // The rollback is on the timeline; the failed instant is not.
        let tl = timeline(&tb).await;
        assert!(tl.get(&dead).is_none());
        let ri = tl.get(&r.rollback).unwrap();
        assert_eq!(
            (ri.action, ri.state, ri.completed.as_ref()),
            (Action::Rollback, State::Completed, Some(&r.completed))
        );
        assert!(tl.get(&live).is_some_and(|i| i.state == State::Inflight));
        let w = TimelineFolder::new(&tb.loc, &tb.config);
        let plan_path = w.path_of(ri, State::Requested).unwrap();
        let plan = RollbackPlan::from_avro_container(&tb.loc.get(&plan_path).await.unwrap(), "plan").unwrap();
        assert_eq!(plan.instant_to_rollback, Some(InstantInfo::new(dead.as_str(), "deltacommit")));
        assert_eq!(plan.rollback_requests.len(), 2);
        assert_eq!(plan.rollback_requests[0].partition_path, PARTITION);
        assert_eq!(
            plan.rollback_requests[0].files_to_be_deleted,
            vec![format!("/warehouse/t/{PARTITION}/{}", log_name(&dead, 0))]
        );
        assert_eq!(plan.rollback_requests[0].file_id.as_deref(), Some(tributary_timeline::nbcc_file_id(0).as_str()));
        assert!(w.read(ri, State::Inflight).await.unwrap().is_empty());
        let meta = RollbackMetadata::from_avro_container(&w.read(ri, State::Completed).await.unwrap(), "m").unwrap();
        assert_eq!(meta.commits_rollback, vec![dead.to_string()]);
        assert_eq!(meta.start_rollback_time, r.rollback.to_string());
        assert_eq!(meta.total_files_deleted, 2);
        assert_eq!(meta.instants_rollback, vec![InstantInfo::new(dead.as_str(), "deltacommit")]);
        let pm = &meta.partition_metadata[PARTITION];
        assert_eq!(pm.success_delete_files.len(), 2);
        assert!(pm.failed_delete_files.is_empty());

        // Nothing left to do: a second call changes nothing.
        let before = timeline(&tb).await.instants().cloned().collect::<Vec<_>>();
        assert!(rollback(&tb).await.is_empty());
        assert_eq!(timeline(&tb).await.instants().cloned().collect::<Vec<_>>(), before);

        // Once the expiry passes, the silent writers go too; the live one's
        // heartbeat is now stale as well.
        tb.clock.set(now + 3 * 60_000);
        let rolled = rollback(&tb).await;
        let gone: Vec<&InstantTime> = rolled.iter().map(|r| &r.instant).collect();
        assert_eq!(gone, vec![&fresh_no_beat, &live]);
        assert!(!data_file_exists(&tb, &live, 0).await);
        assert!(!exists(&tb.loc, &heartbeat_path(&tb.loc, &live)).await);
        assert!(data_file_exists(&tb, &done, 0).await);
        let tl = timeline(&tb).await;
        assert_eq!(tl.pending().count(), 0);
        assert_eq!(tl.completed().filter(|i| i.action == Action::Rollback).count(), 3);
    }

    #[tokio::test]
    async fn an_interrupted_rollback_is_finished_not_repeated() {
        let tb = table().await;
        let dead = start_write(&tb, &[0, 1], false).await;
        tb.clock.advance(10 * 60_000);
        // A rollback that stopped after its plan and one deletion.
        let plan = plan_for(&tb.loc, &dead).await.unwrap();
        let r = request(&tb.loc, &tb.config, &tb.time, &dead, &plan).await.unwrap().unwrap();
        // A second request for the same instant is refused.
        assert_eq!(request(&tb.loc, &tb.config, &tb.time, &dead, &plan).await.unwrap(), None);
        tb.loc.store.delete(&tb.loc.join(&partition_file(PARTITION, &log_name(&dead, 0)))).await.unwrap();

        let rolled = rollback(&tb).await;
        assert_eq!(rolled.len(), 1);
        assert_eq!((&rolled[0].instant, &rolled[0].rollback), (&dead, &r));
        assert_eq!(rolled[0].deleted_files.len(), 2, "already-gone files count as deleted");
        assert!(!data_file_exists(&tb, &dead, 1).await);
        let tl = timeline(&tb).await;
        assert_eq!(tl.len(), 1);
        assert!(tl.get(&r).is_some_and(Instant::is_completed));
        assert!(rollback(&tb).await.is_empty());

        // Completing twice keeps the first completion.
        let instant = Instant::requested(r.clone(), Action::Rollback);
        let writer = TimelineFolder::new(&tb.loc, &tb.config);
        let again =
            complete_instant(&tb.loc, &writer, &tb.time, &instant, Vec::new(), Completion::Shared).await.unwrap();
        assert_eq!(again, rolled[0].completed);
        assert_eq!(timeline(&tb).await.warnings().len(), 0);
    }

    #[tokio::test]
    async fn a_write_that_completes_before_the_lock_is_not_rolled_back() {
        let tb = table().await;
        let t = start_write(&tb, &[0], false).await;
        tb.clock.advance(10 * 60_000);
        let plan = plan_for(&tb.loc, &t).await.unwrap();
        // The writer commits between the expiry check and the rollback request.
        let w = TimelineFolder::new(&tb.loc, &tb.config);
        let mut i = Instant::requested(t.clone(), Action::DeltaCommit);
        i.completed = Some(tb.time.new_instant().await.unwrap());
        w.create(&i, State::Completed, Vec::new()).await.unwrap();
        assert_eq!(request(&tb.loc, &tb.config, &tb.time, &t, &plan).await.unwrap(), None);
        assert!(data_file_exists(&tb, &t, 0).await);
    }

    /// A rollback whose first withdrawal of the writer's inflight file
    /// failed: the requested rollback is on the timeline, and so is the
    /// writer's inflight file.
    async fn request_without_withdrawal(tb: &Table, t: &InstantTime) -> InstantTime {
        let plan = plan_for(&tb.loc, t).await.unwrap();
        let r = tb.time.new_instant().await.unwrap();
        let w = TimelineFolder::new(&tb.loc, &tb.config);
        w.create(&Instant::requested(r.clone(), Action::Rollback), State::Requested, plan.to_avro_container().unwrap())
            .await
            .unwrap();
        r
    }

    /// The writer of delta commit `t` completes it, as its owner does.
    async fn writer_completes(tb: &Table, t: &InstantTime) -> tributary_timeline::Result<InstantTime> {
        let w = TimelineFolder::new(&tb.loc, &tb.config);
        let i = Instant::requested(t.clone(), Action::DeltaCommit);
        complete_instant(&tb.loc, &w, &tb.time, &i, Vec::new(), Completion::Owned).await
    }

    #[tokio::test]
    async fn a_stalled_writer_that_completes_before_its_withdrawal_keeps_its_files() {
        let tb = table().await;
        let t = start_write(&tb, &[0], false).await;
        tb.clock.advance(10 * 60_000);
        let r = request_without_withdrawal(&tb, &t).await;
        // The writer wakes up and completes: its inflight file is still there.
        writer_completes(&tb, &t).await.unwrap();

        assert!(rollback(&tb).await.is_empty());
        assert!(data_file_exists(&tb, &t, 0).await, "a completed commit's files stay");
        let tl = timeline(&tb).await;
        assert!(tl.get(&r).is_none(), "the rollback that deleted nothing is dropped");
        assert!(tl.get(&t).is_some_and(Instant::is_completed));
    }

    #[tokio::test]
    async fn a_pending_rollback_withdraws_the_writer_before_deleting_its_files() {
        let tb = table().await;
        let t = start_write(&tb, &[0], false).await;
        tb.clock.advance(10 * 60_000);
        let r = request_without_withdrawal(&tb, &t).await;

        let rolled = rollback(&tb).await;
        assert_eq!(rolled.iter().map(|x| (&x.instant, &x.rollback)).collect::<Vec<_>>(), vec![(&t, &r)]);
        assert!(!data_file_exists(&tb, &t, 0).await);
        // The writer wakes up too late: its commit is refused.
        let e = writer_completes(&tb, &t).await.unwrap_err();
        assert!(matches!(e, tributary_timeline::Error::Withdrawn { .. }), "{e}");
        assert!(timeline(&tb).await.get(&t).is_none());
    }

    #[test]
    fn paths_for_java() {
        let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("warehouse/t"));
        assert_eq!(fs_path(&loc, "a/b", "f.parquet"), "/warehouse/t/a/b/f.parquet");
        assert_eq!(fs_path(&loc, "", "f.parquet"), "/warehouse/t/f.parquet");
        assert_eq!(file_name("s3a://bucket/warehouse/t/a/.f_1.log.1_0-1-0"), ".f_1.log.1_0-1-0");
        assert_eq!(file_name("f"), "f");
    }
}
