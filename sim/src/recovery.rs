//! The check that recovery rolls back only writers it found dead.
//!
//! A process rolls back a pending delta commit `t` only when the heartbeat
//! it read for `t` is older than the heartbeat expiry by its own clock
//! (`docs/design.md`, "Recovery"). The world shows every read of a
//! heartbeat file and every rollback plan put in place, with the process
//! that made it, so the check replays that judgement: when a process
//! requests the rollback of `t`, the heartbeat it last read must be older
//! than the expiry by its clock now. Its clock only moves forward, so a
//! rollback that fails this was decided on a heartbeat that was fresh.
//!
//! Withdrawing a live writer does not lose its rows (its commit fails and is
//! retried), so the table checks alone see such a bug only as a history that
//! takes longer; this check sees it at the rollback.

use std::collections::HashMap;
use std::time::Duration;

use futures::FutureExt;
use object_store::ObjectStoreExt;
use object_store::memory::InMemory;
use object_store::path::Path;
use tributary::timeline::{Action, Clock, InstantTime};
use tributary_format::RollbackPlan;

use crate::world::{Op, Seen, SimClock};

/// What a process last read of a heartbeat file.
#[derive(Debug, Clone, Copy)]
enum Beat {
    /// The time written in it, by the writer's clock.
    At(i64),
    /// No file: the writer's age counts from its instant.
    Missing,
    /// Content that is not a time (recovery then takes the file's
    /// modification time, which the simulation does not control).
    Unreadable,
}

/// The heartbeats each process read, and the expiry they are judged by.
#[derive(Debug)]
pub struct Recovery {
    expiry: Duration,
    /// By process and instant.
    read: HashMap<(u32, InstantTime), Beat>,
}

impl Recovery {
    /// A check of recoveries that judge heartbeats by `expiry`.
    pub fn new(expiry: Duration) -> Self {
        Self { expiry, read: HashMap::new() }
    }

    /// Looks at one operation; `clock` is the clock of the process that
    /// made it. `Err` names a rollback of a writer whose heartbeat, as read,
    /// was fresh.
    pub fn see(&mut self, seen: &Seen<'_>, store: &InMemory, clock: &SimClock) -> Result<(), String> {
        let Some((dir, name)) = seen.path.rsplit_once('/') else { return Ok(()) };
        match seen.op {
            Op::Get if dir.ends_with(".hoodie/.heartbeat") => {
                let Ok(t) = InstantTime::parse(name) else { return Ok(()) };
                let beat = match seen.found.then(|| read_now(store, seen.path)) {
                    None => Beat::Missing,
                    Some(bytes) => bytes
                        .and_then(|b| std::str::from_utf8(&b).ok().and_then(|s| s.trim().parse().ok()))
                        .map_or(Beat::Unreadable, Beat::At),
                };
                self.read.insert((seen.pid, t), beat);
                Ok(())
            }
            Op::Put if dir.ends_with(".hoodie/timeline") && name.ends_with(".rollback.requested") => {
                let Some(t) = read_now(store, seen.path).and_then(|b| rolled_back(&b, seen.path)) else {
                    return Ok(());
                };
                let beat = match self.read.get(&(seen.pid, t.clone())) {
                    None => {
                        return Err(format!(
                            "process {} requested the rollback of {t} without reading its heartbeat",
                            seen.pid
                        ));
                    }
                    Some(Beat::Unreadable) => return Ok(()),
                    Some(Beat::Missing) => t.to_millis().unwrap_or(0),
                    Some(Beat::At(ms)) => *ms,
                };
                let age = clock.now_millis() - beat;
                if u128::try_from(age).is_ok_and(|age| age > self.expiry.as_millis()) {
                    return Ok(());
                }
                Err(format!(
                    "process {} requested the rollback of {t}, but the heartbeat it read (at {beat} ms) is \
                     {age} ms old by its clock, within the {:?} expiry: a live writer rolled back",
                    seen.pid, self.expiry
                ))
            }
            _ => Ok(()),
        }
    }
}

/// The delta commit a rollback plan rolls back, if that is what it does.
fn rolled_back(plan: &[u8], path: &str) -> Option<InstantTime> {
    let plan = RollbackPlan::from_avro_container(plan, path).ok()?;
    let info = plan.instant_to_rollback?;
    (info.action == Action::DeltaCommit.name()).then(|| InstantTime::parse(&info.commit_time).ok())?
}

/// The content of `path` in the in-memory `store`, which answers at once.
fn read_now(store: &InMemory, path: &str) -> Option<bytes::Bytes> {
    let path = Path::from(path);
    async { store.get(&path).await?.bytes().await }.now_or_never()?.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    use object_store::ObjectStoreExt;
    use tributary_format::InstantInfo;

    const EXPIRY: Duration = Duration::from_secs(5);

    fn heartbeat(t: &str) -> String {
        format!("t/.hoodie/.heartbeat/{t}")
    }

    async fn plan(store: &InMemory, t: &str) -> String {
        let plan = RollbackPlan {
            instant_to_rollback: Some(InstantInfo { commit_time: t.into(), action: "deltacommit".into() }),
            ..RollbackPlan::default()
        };
        let path = "t/.hoodie/timeline/20260101000009000.rollback.requested".to_string();
        store.put(&Path::from(path.as_str()), plan.to_avro_container().unwrap().into()).await.unwrap();
        path
    }

    /// A rollback passes when the heartbeat its process read had expired by
    /// that process's clock, and fails when it was fresh or never read.
    #[tokio::test(start_paused = true)]
    async fn a_rollback_must_follow_an_expired_heartbeat() {
        let t = "20260101000000000";
        let start = tokio::time::Instant::now();
        // The process's clock reads 2026-01-01 00:00:10.000 now.
        let epoch = InstantTime::parse(t).unwrap().to_millis().unwrap();
        let clock = SimClock::new(epoch + 10_000, start, 0, 0);
        let store = InMemory::new();
        let request = plan(&store, t).await;
        let beats = heartbeat(t);
        let put = |pid| Seen { pid, op: Op::Put, path: &request, found: true };
        let get = |pid, found| Seen { pid, op: Op::Get, path: &beats, found };
        let mut r = Recovery::new(EXPIRY);
        // Never read.
        let err = r.see(&put(1), &store, &clock).unwrap_err();
        assert!(err.contains("without reading its heartbeat"), "{err}");
        // A beat 4 s old: fresh.
        store.put(&Path::from(beats.as_str()), (epoch + 6_000).to_string().into()).await.unwrap();
        r.see(&get(1, true), &store, &clock).unwrap();
        let err = r.see(&put(1), &store, &clock).unwrap_err();
        assert!(err.contains("4000 ms old") && err.contains("live writer"), "{err}");
        // Another process read an old beat; the first one's read stands.
        store.put(&Path::from(beats.as_str()), (epoch + 1_000).to_string().into()).await.unwrap();
        r.see(&get(2, true), &store, &clock).unwrap();
        r.see(&put(2), &store, &clock).unwrap();
        assert!(r.see(&put(1), &store, &clock).is_err());
        // No heartbeat: the age counts from the instant, 10 s.
        r.see(&get(1, false), &store, &clock).unwrap();
        r.see(&put(1), &store, &clock).unwrap();
    }
}
