//! The delta commit a commit began for its client's next commit, in the
//! lock hold that completed it ([`WriteSettings::begin_next`]).
//!
//! [`WriteSettings::begin_next`]: crate::WriteSettings::begin_next

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;
use tributary_timeline::{Heartbeat, Instant, TableLocation, TimelineFolder, withdraw_or_leave};

/// A begun delta commit: requested and inflight, its heartbeat beating.
#[derive(Debug)]
struct Begun {
    instant: Instant,
    heartbeat: Heartbeat,
    /// Withdraws it once it has waited its interval unused.
    timer: JoinHandle<()>,
}

/// The slot a client keeps its begun commit in; the clients a client
/// evolves into share it. Dropped with the last of them, a begun commit
/// stops its heartbeat and stays pending until recovery rolls it back
/// (as a dropped [`crate::Commit`] does).
#[derive(Debug, Clone, Default)]
pub(crate) struct NextCommit(Arc<Mutex<Option<Begun>>>);

impl NextCommit {
    /// Whether no commit is kept (a commit then asks for one).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).is_none()
    }

    /// Takes the kept commit, if any, for a commit to write into.
    pub(crate) fn take(&self) -> Option<(Instant, Heartbeat)> {
        let begun = self.0.lock().unwrap_or_else(PoisonError::into_inner).take()?;
        begun.timer.abort();
        Some((begun.instant, begun.heartbeat))
    }

    /// Keeps `instant` with its `heartbeat` for the next commit, for at most
    /// `idle`; then it is withdrawn. A commit already kept (two commits of
    /// one client completed at once) stays, and `instant` is withdrawn.
    pub(crate) fn keep(
        &self,
        loc: &TableLocation,
        folder: &TimelineFolder,
        instant: Instant,
        heartbeat: Heartbeat,
        idle: Duration,
    ) {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_some() {
            tokio::spawn(withdraw(loc.clone(), folder.clone(), instant, heartbeat));
            return;
        }
        let (this, loc, folder, t) = (Arc::downgrade(&self.0), loc.clone(), folder.clone(), instant.requested.clone());
        let timer = tokio::spawn(async move {
            tokio::time::sleep(idle).await;
            // Gone with its client: its heartbeat stopped with it.
            let Some(this) = this.upgrade() else { return };
            let begun = {
                let mut slot = this.lock().unwrap_or_else(PoisonError::into_inner);
                match slot.as_ref() {
                    Some(b) if b.instant.requested == t => slot.take(),
                    _ => None,
                }
            };
            if let Some(b) = begun {
                withdraw(loc, folder, b.instant, b.heartbeat).await;
            }
        });
        *slot = Some(Begun { instant, heartbeat, timer });
    }

    /// Withdraws the kept commit, if any, at once.
    pub(crate) async fn withdraw(&self, loc: &TableLocation, folder: &TimelineFolder) {
        if let Some((instant, heartbeat)) = self.take() {
            withdraw(loc.clone(), folder.clone(), instant, heartbeat).await;
        }
    }
}

/// Withdraws a begun commit that wrote nothing, then stops its heartbeat;
/// when the withdrawal fails, the heartbeat is left to go stale, and
/// recovery rolls the commit back.
async fn withdraw(loc: TableLocation, folder: TimelineFolder, instant: Instant, heartbeat: Heartbeat) {
    if withdraw_or_leave(&loc, &folder, &instant).await
        && let Err(e) = heartbeat.stop().await
    {
        tracing::warn!(instant = %instant.requested, table = %loc, error = %e, "stopping a heartbeat failed");
    }
}
