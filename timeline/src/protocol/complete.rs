//! Completing an instant: the step that makes it visible.
//!
//! The completion time `c` is issued and `<t>_<c>.<action>` is created inside
//! one hold of the table lock ([`TimeGenerator::with_time`]). Because every
//! time is issued under that lock, a reader or compactor that took its own
//! time after this hold ends sees the completed file, and one that took it
//! before sees a larger `c` (`docs/design.md`, "TrueTime").
//!
//! [`complete_instant_with`] runs one more step inside that hold, just
//! before the completed file is created; a write client records its
//! writer's checkpoint there, so the checkpoint and the commit become
//! visible together (`writer_state.rs`).
//!
//! Beginning an instant ([`begin_instant`]) creates its requested and
//! inflight files in the hold that issues it. A write client that commits
//! again soon may begin its next delta commit in the hold that completes
//! the one before ([`complete_instant_then_begin`]), one hold per commit
//! instead of two (`docs/design.md`, "Commit protocol").

use std::future::Future;

use object_store::ObjectStoreExt;

use crate::error::{Error, Result};
use crate::instant::{Action, Instant, InstantTime, State};
use crate::timeline::TimelineFolder;
use crate::truetime::TimeGenerator;
use tributary_storage::{Fence, TableLocation};

/// Who may complete an instant, which decides what is checked under the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// Only its owner completes it (a write client's delta commit, the
    /// compactor's commit): its inflight file must still exist, since
    /// recovery withdraws the inflight file of a write it rolls back, and
    /// completing then would publish files recovery deletes. A missing
    /// inflight file fails with [`Error::Withdrawn`].
    Owned,
    /// Any recovering actor may finish it (rollback, clean): if another has
    /// completed it already, its completion time is returned and nothing is
    /// written.
    Shared,
}

/// Completes `instant` (requested or inflight) with `content` under the
/// table lock and returns its completion time.
pub async fn complete_instant(
    loc: &TableLocation,
    writer: &TimelineFolder,
    time: &TimeGenerator,
    instant: &Instant,
    content: Vec<u8>,
    completion: Completion,
) -> Result<InstantTime> {
    complete_instant_with(loc, writer, time, instant, content, completion, |_| async { Ok(None) }).await
}

/// [`complete_instant`] with a step that runs in the same lock hold, after
/// the completion time `c` is issued and the instant's state is checked,
/// and before `<t>_<c>.<action>` is created: a writer's checkpoint is
/// recorded there (`writer_state.rs`). When `before_visible` returns
/// content, the instant is completed with that instead of `content` (a
/// commit records the schema in force, which only the lock hold knows).
/// When `before_visible` fails, nothing is created and its error is
/// returned. It is not run for a
/// [`Completion::Shared`] instant that another actor completed already.
pub async fn complete_instant_with<F, Fut>(
    loc: &TableLocation,
    writer: &TimelineFolder,
    time: &TimeGenerator,
    instant: &Instant,
    content: Vec<u8>,
    completion: Completion,
    before_visible: F,
) -> Result<InstantTime>
where
    F: FnOnce(InstantTime) -> Fut,
    Fut: Future<Output = Result<Option<Vec<u8>>>>,
{
    Ok(complete_instant_then_begin(loc, writer, time, instant, content, completion, before_visible, None).await?.0)
}

/// Creates the requested and then the inflight file of `instant`, each
/// right after a check of `fence`, in the hold that issued its time.
/// Recovery withdraws a write by deleting its inflight file under the
/// lock, and a write completes only while that file exists; an inflight
/// file created after a withdrawal (its writer stalled in between, past
/// its heartbeat expiry) would let the write complete with files recovery
/// deleted, so the inflight file is never created outside that hold.
pub async fn begin_instant(writer: &TimelineFolder, instant: &Instant, fence: &Fence) -> Result<()> {
    fence.check().await?;
    writer.create(instant, State::Requested, Vec::new()).await?;
    fence.check().await?;
    writer.create(instant, State::Inflight, Vec::new()).await?;
    Ok(())
}

/// [`complete_instant_with`] that, given an action `next`, in the same hold
/// begins the next instant of that action at the time issued right after
/// the completion time, and returns it beside the completion time: its
/// requested file is created beside the completed file, its inflight file
/// after both, each after a check of the fence, as [`begin_instant`] does.
/// Only the hybrid-logical mode issues two times in one hold
/// ([`TimeGenerator::with_times_fenced`]); in the wait-for-skew mode, and
/// when beginning fails after the completion (the completion stands; what
/// was created of the next instant is deleted, or left for recovery to
/// roll back), no next instant is returned.
#[allow(clippy::too_many_arguments)]
pub async fn complete_instant_then_begin<F, Fut>(
    loc: &TableLocation,
    writer: &TimelineFolder,
    time: &TimeGenerator,
    instant: &Instant,
    content: Vec<u8>,
    completion: Completion,
    before_visible: F,
    next: Option<Action>,
) -> Result<(InstantTime, Option<Instant>)>
where
    F: FnOnce(InstantTime) -> Fut,
    Fut: Future<Output = Result<Option<Vec<u8>>>>,
{
    time.with_times_fenced(next.is_some(), |c, after, fence| async move {
        match completion {
            Completion::Owned => {
                let inflight = writer.path_of(instant, State::Inflight)?;
                match loc.store.head(&inflight).await {
                    Ok(_) => {}
                    Err(object_store::Error::NotFound { .. }) => {
                        return Err(Error::Withdrawn {
                            what: format!("{} {} of {loc}", instant.action.name(), instant.requested),
                            reason: "rolled back by recovery (its heartbeat expired); write it again".into(),
                        });
                    }
                    Err(e) => return Err(Error::store("head", &inflight, e)),
                }
            }
            Completion::Shared => {
                let timeline = writer.load().await?;
                if let Some(done) = timeline.get(&instant.requested).filter(|i| i.is_completed()) {
                    return Ok((done.completed.clone().unwrap_or(c), None));
                }
            }
        }
        // A holder that lost the lock (its lease taken over while it was
        // frozen or cut off) stops before recording anything: before the
        // step that runs under the lock, and again right before visibility.
        fence.check().await?;
        let content = before_visible(c.clone()).await?.unwrap_or(content);
        fence.check().await?;
        let done = Instant { state: State::Completed, completed: Some(c.clone()), ..instant.clone() };
        let Some(next) = after.zip(next).map(|(t, action)| Instant::requested(t, action)) else {
            writer.create(&done, State::Completed, content).await?;
            return Ok((c, None));
        };
        // The next instant's requested file is created beside the completed
        // file (the two are independent), its inflight file after both.
        let (completed, requested) = futures::join!(
            writer.create(&done, State::Completed, content),
            writer.create(&next, State::Requested, Vec::new())
        );
        let begun = match (completed, requested) {
            (Err(e), requested) => {
                if requested.is_ok() {
                    withdraw_or_leave(loc, writer, &next).await;
                }
                return Err(e);
            }
            (Ok(_), Err(e)) => Err(e),
            (Ok(_), Ok(_)) => match fence.check().await {
                Ok(()) => writer.create(&next, State::Inflight, Vec::new()).await.map(|_| ()),
                Err(e) => Err(e.into()),
            },
        };
        let begun = match begun {
            Ok(()) => Some(next),
            Err(e) => {
                tracing::warn!(instant = %next.requested, table = %loc, error = %e,
                    "beginning the next instant in the completion's hold failed; it is begun afresh");
                withdraw_or_leave(loc, writer, &next).await;
                None
            }
        };
        Ok((c, begun))
    })
    .await
}

/// [`withdraw_instant`] of an instant that wrote nothing, whose failure is
/// logged: the instant is then left pending for recovery to roll back
/// once its heartbeat expires. Returns whether it was withdrawn.
pub async fn withdraw_or_leave(loc: &TableLocation, writer: &TimelineFolder, instant: &Instant) -> bool {
    match withdraw_instant(loc, writer, instant).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(instant = %instant.requested, table = %loc, error = %e,
                "withdrawing a pending instant that wrote nothing failed; recovery rolls it back once its \
                 heartbeat expires");
            false
        }
    }
}

/// Deletes the pending files of `instant`, which must have no data files
/// left, inflight first: a failure leaves it pending (requested, or
/// requested and inflight), and recovery rolls it back once its heartbeat
/// expires.
pub async fn withdraw_instant(loc: &TableLocation, writer: &TimelineFolder, instant: &Instant) -> Result<()> {
    for state in [State::Inflight, State::Requested] {
        tributary_storage::delete_if_exists(loc, &writer.path_of(instant, state)?).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use object_store::memory::InMemory;
    use object_store::path::Path;

    use super::*;
    use crate::config::{NewTableConfig, TableConfig};
    use crate::instant::Action;
    use crate::truetime::TimeMode;
    use crate::{ErrorKind, Timeline};
    use tributary_storage::InProcessLock;
    use tributary_storage::ManualClock;

    struct Fixture {
        loc: TableLocation,
        config: TableConfig,
        writer: TimelineFolder,
        time: TimeGenerator,
    }

    fn fixture() -> Fixture {
        let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("t"));
        let config = TableConfig::new_table(&NewTableConfig::new("t", "id", "ts", "{}"));
        let writer = TimelineFolder::new(&loc, &config);
        let clock = Arc::new(ManualClock::new(1_766_264_468_078));
        let time = TimeGenerator::new(
            TimeMode::HybridLogical,
            Duration::from_millis(200),
            clock,
            Arc::new(InProcessLock::new()),
        );
        Fixture { loc, config, writer, time }
    }

    async fn started(f: &Fixture, action: Action) -> Instant {
        let t = f.time.new_instant().await.unwrap();
        let instant = Instant::requested(t, action);
        f.writer.create(&instant, State::Requested, Vec::new()).await.unwrap();
        f.writer.create(&instant, State::Inflight, Vec::new()).await.unwrap();
        instant
    }

    #[tokio::test]
    async fn an_owned_instant_completes_after_its_start_and_becomes_visible() {
        let f = fixture();
        let instant = started(&f, Action::DeltaCommit).await;
        let c = complete_instant(&f.loc, &f.writer, &f.time, &instant, Vec::new(), Completion::Owned).await.unwrap();
        assert!(c > instant.requested);
        let timeline = Timeline::load(&f.loc, &f.config).await.unwrap();
        assert_eq!(timeline.completion_time(&instant.requested), Some(&c));
    }

    #[tokio::test]
    async fn an_owned_instant_whose_inflight_file_was_withdrawn_does_not_complete() {
        let f = fixture();
        let instant = started(&f, Action::DeltaCommit).await;
        tributary_storage::delete_if_exists(&f.loc, &f.writer.path_of(&instant, State::Inflight).unwrap())
            .await
            .unwrap();
        let err =
            complete_instant(&f.loc, &f.writer, &f.time, &instant, Vec::new(), Completion::Owned).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict);
        assert!(err.to_string().contains(instant.requested.as_str()), "{err}");
        let timeline = Timeline::load(&f.loc, &f.config).await.unwrap();
        assert!(!timeline.is_completed(&instant.requested));
    }

    /// Completes `instant` under `time`, beginning a next delta commit
    /// when `next`.
    async fn complete_then_begin(
        f: &Fixture,
        time: &TimeGenerator,
        instant: &Instant,
        next: bool,
    ) -> (InstantTime, Option<Instant>) {
        let next = next.then_some(Action::DeltaCommit);
        let none = |_| async { Ok(None) };
        complete_instant_then_begin(&f.loc, &f.writer, time, instant, Vec::new(), Completion::Owned, none, next)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_completion_begins_the_next_instant_in_its_hold_in_hybrid_mode_only() {
        let f = fixture();
        let instant = started(&f, Action::DeltaCommit).await;
        let (c, next) = complete_then_begin(&f, &f.time, &instant, true).await;
        let next = next.expect("begun in hybrid-logical mode");
        assert_eq!(next.requested.to_millis(), c.to_millis().map(|c| c + 1));
        let timeline = Timeline::load(&f.loc, &f.config).await.unwrap();
        assert_eq!(timeline.completion_time(&instant.requested), Some(&c));
        let pending: Vec<_> = timeline.pending().map(|i| (i.requested.clone(), i.state)).collect();
        assert_eq!(pending, vec![(next.requested.clone(), State::Inflight)]);
        assert!(f.time.new_instant().await.unwrap() > next.requested, "both times were issued");

        // Without an action to begin, or under wait-for-skew, nothing is.
        assert!(complete_then_begin(&f, &f.time, &next, false).await.1.is_none());
        let skew = TimeGenerator::new(
            TimeMode::WaitForSkew,
            Duration::ZERO,
            Arc::new(ManualClock::new(1_766_264_469_000)),
            Arc::new(InProcessLock::new()),
        );
        let later = started(&f, Action::DeltaCommit).await;
        assert!(complete_then_begin(&f, &skew, &later, true).await.1.is_none());
        let timeline = Timeline::load(&f.loc, &f.config).await.unwrap();
        assert_eq!(timeline.pending().count(), 0);
    }

    #[tokio::test]
    async fn a_shared_instant_completes_once() {
        let f = fixture();
        let instant = started(&f, Action::Rollback).await;
        let first =
            complete_instant(&f.loc, &f.writer, &f.time, &instant, Vec::new(), Completion::Shared).await.unwrap();
        let again =
            complete_instant(&f.loc, &f.writer, &f.time, &instant, Vec::new(), Completion::Shared).await.unwrap();
        assert_eq!(first, again);
        assert!(Timeline::load(&f.loc, &f.config).await.unwrap().warnings().is_empty());
    }
}
