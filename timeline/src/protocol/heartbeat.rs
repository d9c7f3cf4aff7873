//! Heartbeats: `.hoodie/.heartbeat/<t>`, rewritten every interval while
//! instant `t` is inflight, so that recovery can tell a live writer from a
//! dead one.
//!
//! Each beat writes the writer's clock reading (milliseconds since the
//! epoch, as decimal text) into the file, and [`heartbeat_age`] measures
//! against that reading, so the age depends only on the injected clocks,
//! never on a store's modification times (which object stores set from
//! their own clocks, and test stores not at all). Java's heartbeat client
//! reads the file's modification time, which a rewrite refreshes too.

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStoreExt;
use object_store::path::Path;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::instant::InstantTime;
use tributary_storage::Clock;
use tributary_storage::TableLocation;

/// How long a heartbeat may go unrefreshed before its instant counts as a
/// failed write: twice Hudi's default interval of 60 s.
pub const DEFAULT_HEARTBEAT_EXPIRY: Duration = Duration::from_secs(2 * 60);

/// `.hoodie/.heartbeat/<t>`.
pub fn heartbeat_path(loc: &TableLocation, t: &InstantTime) -> Path {
    crate::layout::heartbeat_file(&loc.root, t)
}

async fn beat(loc: &TableLocation, path: &Path, clock: &dyn Clock) -> Result<()> {
    Ok(loc.put(path, clock.now_millis().to_string().into_bytes()).await?)
}

/// How long ago, by `clock`, the writer of `t` last beat. A missing
/// heartbeat counts from `t` itself (a writer that died before its first
/// beat); a heartbeat whose content is not a time (Java writes empty files)
/// counts from the store's modification time, the only time it has.
pub(crate) async fn heartbeat_age(loc: &TableLocation, t: &InstantTime, clock: &dyn Clock) -> Result<Duration> {
    let path = heartbeat_path(loc, t);
    let last = match loc.store.get(&path).await {
        Ok(got) => {
            let modified = got.meta.last_modified.timestamp_millis();
            let bytes = got.bytes().await.map_err(|e| Error::store("get", &path, e))?;
            std::str::from_utf8(&bytes).ok().and_then(|s| s.trim().parse::<i64>().ok()).unwrap_or(modified)
        }
        Err(object_store::Error::NotFound { .. }) => t.to_millis().unwrap_or(0),
        Err(e) => return Err(Error::store("get", &path, e)),
    };
    let age = clock.now_millis().saturating_sub(last);
    Ok(Duration::from_millis(u64::try_from(age).unwrap_or(0)))
}

/// Whether the writer of `t` is dead by `clock`: its heartbeat is older
/// than `expiry`.
pub async fn heartbeat_expired(
    loc: &TableLocation,
    t: &InstantTime,
    clock: &dyn Clock,
    expiry: Duration,
) -> Result<bool> {
    Ok(heartbeat_age(loc, t, clock).await? > expiry)
}

/// A running heartbeat. Dropping it stops the beats (the file stays, goes
/// stale, and recovery then rolls the instant back); [`Heartbeat::stop`]
/// stops them and deletes the file.
#[derive(Debug)]
pub struct Heartbeat {
    path: Path,
    loc: TableLocation,
    task: JoinHandle<()>,
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Heartbeat {
    /// Writes the first beat of `instant`, then one every `every`.
    pub async fn start(
        loc: TableLocation,
        instant: &InstantTime,
        clock: Arc<dyn Clock>,
        every: Duration,
    ) -> Result<Self> {
        let path = heartbeat_path(&loc, instant);
        beat(&loc, &path, clock.as_ref()).await?;
        let (l, p) = (loc.clone(), path.clone());
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = beat(&l, &p, clock.as_ref()).await {
                    tracing::warn!("heartbeat {p}: {e}");
                }
            }
        });
        Ok(Self { path, loc, task })
    }

    /// Stops the beats and deletes the heartbeat file.
    pub async fn stop(self) -> Result<()> {
        self.task.abort();
        Ok(tributary_storage::delete_if_exists(&self.loc, &self.path).await?)
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;

    use super::*;
    use tributary_storage::ManualClock;

    fn table() -> TableLocation {
        TableLocation::new(Arc::new(InMemory::new()), Path::from("t"))
    }

    #[tokio::test(start_paused = true)]
    async fn age_is_measured_from_the_time_written_in_the_heartbeat() {
        let loc = table();
        let writer_clock = Arc::new(ManualClock::new(1_766_264_468_078));
        let t = InstantTime::from_millis(1_766_264_400_000).unwrap();
        let beat = Heartbeat::start(loc.clone(), &t, writer_clock.clone(), Duration::from_secs(3600)).await.unwrap();

        // The recovering actor's clock, 90 s ahead of the beat: not expired.
        let reader = ManualClock::new(1_766_264_468_078 + 90_000);
        assert_eq!(heartbeat_age(&loc, &t, &reader).await.unwrap(), Duration::from_secs(90));
        assert!(!heartbeat_expired(&loc, &t, &reader, DEFAULT_HEARTBEAT_EXPIRY).await.unwrap());
        reader.advance(31_000);
        assert!(heartbeat_expired(&loc, &t, &reader, DEFAULT_HEARTBEAT_EXPIRY).await.unwrap());

        // Stopped: the file is gone and the age counts from the instant.
        beat.stop().await.unwrap();
        let age = heartbeat_age(&loc, &t, &reader).await.unwrap();
        assert_eq!(age, Duration::from_millis(68_078 + 121_000));
    }

    #[tokio::test(start_paused = true)]
    async fn each_beat_writes_the_writers_clock() {
        let loc = table();
        let clock = Arc::new(ManualClock::new(1_000_000));
        let t = InstantTime::from_millis(999_000).unwrap();
        let _beat = Heartbeat::start(loc.clone(), &t, clock.clone(), Duration::from_secs(60)).await.unwrap();
        clock.advance(60_000);
        tokio::time::sleep(Duration::from_secs(61)).await;
        let reader = ManualClock::new(1_060_000);
        assert_eq!(heartbeat_age(&loc, &t, &reader).await.unwrap(), Duration::ZERO);
    }
}
