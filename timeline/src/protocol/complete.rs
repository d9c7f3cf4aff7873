//! Completing an instant: the step that makes it visible.
//!
//! The completion time `c` is issued and `<t>_<c>.<action>` is created inside
//! one hold of the table lock ([`TimeGenerator::with_time`]). Because every
//! time is issued under that lock, a reader or compactor that took its own
//! time after this hold ends sees the completed file, and one that took it
//! before sees a larger `c` (`docs/design.md`, "TrueTime").

use object_store::ObjectStoreExt;

use crate::error::{Error, Result};
use crate::instant::{Instant, InstantTime, State};
use crate::store::TableLocation;
use crate::timeline::TimelineWriter;
use crate::truetime::TimeGenerator;

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
    writer: &TimelineWriter,
    time: &TimeGenerator,
    instant: &Instant,
    content: Vec<u8>,
    completion: Completion,
) -> Result<InstantTime> {
    time.with_time(|c| async move {
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
                    return Ok(done.completed.clone().unwrap_or(c));
                }
            }
        }
        let done = Instant { state: State::Completed, completed: Some(c.clone()), ..instant.clone() };
        writer.create(&done, State::Completed, content).await?;
        Ok(c)
    })
    .await
}
