//! The lock file of Hudi's `FileSystemBasedLockProvider`, so that Tributary
//! and Hudi's Java writers (Spark, Flink) configured with that provider
//! exclude each other on one table.
//!
//! Hudi's provider holds the lock by creating `<table>/.hoodie/lock`
//! (`hoodie.write.lock.filesystem.path` moves the folder) and releases it by
//! deleting the file. A lock file older than `hoodie.write.lock.filesystem.expire`
//! minutes, by its modification time, is expired and deleted by the next
//! contender; with no expiry (Hudi's default, 0) a dead holder's file stays
//! until removed by hand. The content is informational (Hudi's `LockInfo`:
//! creation time, thread name, stack); Hudi reads it only to log it.
//!
//! Tributary creates the file with create-if-absent (`PutMode::Create`),
//! which the local file system and object stores make atomic. Hudi's side
//! checks for the file and then creates it, which on a local file system is
//! two steps (Hadoop's `create(path, overwrite = false)`), so two Hudi
//! writers, or a Hudi writer and a Tributary writer arriving within that
//! gap, can both believe they hold it. Hudi accepts that risk for its own
//! writers; `docs/interop.md` records it.
//!
//! The lock stores no last-issued time
//! ([`LockProvider::keeps_last_issued`] is false), so instants taken under
//! it use the wait-for-skew mode only, as Hudi's own do; the time generator
//! refuses the hybrid-logical mode under it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::location::delete_object_if_exists;
use crate::lock::{LockGuard, LockProvider};

/// A lock shared with Hudi's `FileSystemBasedLockProvider`: the file
/// `<table>/.hoodie/lock`, present while held. See the module notes.
#[derive(Clone)]
pub struct HudiFileLock {
    store: Arc<dyn ObjectStore>,
    path: Path,
    owner: String,
    clock: Arc<dyn Clock>,
    expire: Option<Duration>,
    acquire_timeout: Duration,
    local: Arc<Mutex<()>>,
}

impl fmt::Debug for HudiFileLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HudiFileLock").field("path", &self.path).field("owner", &self.owner).finish()
    }
}

impl HudiFileLock {
    /// A lock on the lock file at `path` in `store`, which the caller
    /// names (for a table, the timeline crate's `layout::hudi_lock_file`).
    /// `expire` is Hudi's `hoodie.write.lock.filesystem.expire` (`None`:
    /// never, Hudi's default); `owner` names this process in the file.
    pub fn at(
        store: Arc<dyn ObjectStore>,
        path: Path,
        owner: impl Into<String>,
        clock: Arc<dyn Clock>,
        expire: Option<Duration>,
        acquire_timeout: Duration,
    ) -> Self {
        Self { store, path, owner: owner.into(), clock, expire, acquire_timeout, local: Arc::new(Mutex::new(())) }
    }

    /// What the file holds while this process holds the lock: Hudi's
    /// `LockInfo` fields, the owner as the thread name.
    fn content(&self) -> String {
        let created = chrono::DateTime::from_timestamp_millis(self.clock.now_millis())
            .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
            .unwrap_or_default();
        serde_json::json!({
            "lockCreateTime": created,
            "lockThreadName": format!("tributary {}", self.owner),
            "lockStacksInfo": [],
        })
        .to_string()
    }

    /// One attempt: creates the file, or deletes it when it has expired (the
    /// next attempt, right away, may then create it).
    async fn try_take(&self, content: &str) -> Result<Attempt> {
        let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
        match self.store.put_opts(&self.path, content.to_string().into(), opts).await {
            Ok(_) => return Ok(Attempt::Held),
            Err(object_store::Error::AlreadyExists { .. }) => {}
            Err(e) if Error::is_transient(&e) => return Ok(Attempt::Failed(format!("creating it failed: {e}"))),
            Err(e) => return Err(Error::store("create", &self.path, e)),
        }
        let Some(expire) = self.expire else { return Ok(Attempt::Busy) };
        let meta = match self.store.head(&self.path).await {
            Ok(m) => m,
            Err(object_store::Error::NotFound { .. }) => return Ok(Attempt::Busy),
            Err(e) if Error::is_transient(&e) => return Ok(Attempt::Failed(format!("reading its age failed: {e}"))),
            Err(e) => return Err(Error::store("head", &self.path, e)),
        };
        let age = self.clock.now_millis() - meta.last_modified.timestamp_millis();
        if age <= expire.as_millis() as i64 {
            return Ok(Attempt::Busy);
        }
        tracing::warn!(lock = %self.path, age_ms = age, "deleting an expired Hudi lock file");
        delete_object_if_exists(self.store.as_ref(), &self.path).await?;
        Ok(Attempt::Expired)
    }

    /// Who holds the lock, for a timeout's message: the holder's thread
    /// name from the file (Hudi's Java writers leave it empty) and how long
    /// ago the file was written.
    async fn holder(&self) -> String {
        let file = match self.store.get(&self.path).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return "the file is gone now".into(),
            Err(e) => return format!("reading the file failed: {e}"),
        };
        let age_ms = self.clock.now_millis() - file.meta.last_modified.timestamp_millis();
        let text = file.bytes().await.unwrap_or_default();
        let name = serde_json::from_slice::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["lockThreadName"].as_str().map(str::to_string));
        match name {
            Some(name) => format!("held by `{name}`, its file written {age_ms} ms ago"),
            None if text.is_empty() => format!("held by a Hudi writer (an empty file), written {age_ms} ms ago"),
            None => format!("held by an unknown writer, its file written {age_ms} ms ago"),
        }
    }
}

/// What one attempt at the lock came to.
enum Attempt {
    /// The file is ours: the lock is held.
    Held,
    /// Another holder's file stands.
    Busy,
    /// An expired file was deleted: try again at once, before the other
    /// contenders' next polls.
    Expired,
    /// The store failed in a way worth retrying; why.
    Failed(String),
}

struct HudiFileGuard {
    lock: HudiFileLock,
    content: String,
    _local: OwnedMutexGuard<()>,
}

#[async_trait]
impl LockProvider for HudiFileLock {
    async fn acquire(&self) -> Result<Box<dyn LockGuard>> {
        let local = self.local.clone().lock_owned().await;
        let started = tokio::time::Instant::now();
        let mut backoff = Duration::from_millis(5);
        let mut retried = false;
        loop {
            let content = self.content();
            let why = match self.try_take(&content).await? {
                Attempt::Held => return Ok(Box::new(HudiFileGuard { lock: self.clone(), content, _local: local })),
                // Right after deleting an expired file, one more attempt
                // without waiting; a clock so far ahead that every file
                // looks expired still waits between attempts.
                Attempt::Expired if !retried => {
                    retried = true;
                    continue;
                }
                Attempt::Expired | Attempt::Busy => None,
                Attempt::Failed(why) => Some(why),
            };
            retried = false;
            if started.elapsed() >= self.acquire_timeout {
                let why = match why {
                    Some(why) => why,
                    None => self.holder().await,
                };
                return Err(Error::LockTimeout {
                    lock: format!("{} ({why})", self.describe()),
                    waited: started.elapsed(),
                });
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(100));
        }
    }

    fn describe(&self) -> String {
        format!("Hudi lock file {}", self.path)
    }

    /// Hudi's lock file holds no time: instants under it wait out the
    /// clock skew, as Hudi's own writers do.
    fn keeps_last_issued(&self) -> bool {
        false
    }
}

#[async_trait]
impl LockGuard for HudiFileGuard {
    fn last_issued(&self) -> Option<i64> {
        None
    }

    fn set_last_issued(&mut self, _millis: i64) {}

    async fn release(self: Box<Self>) -> Result<()> {
        let lock = &self.lock;
        // Delete only our own file: after an expiry another holder's file
        // may stand at the path.
        match lock.store.get(&lock.path).await {
            Ok(r) => {
                let bytes = r.bytes().await.map_err(|e| Error::store("read", &lock.path, e))?;
                if bytes.as_ref() != self.content.as_bytes() {
                    tracing::warn!(lock = %lock.path, "the Hudi lock file is no longer ours; leaving it");
                    return Ok(());
                }
            }
            Err(object_store::Error::NotFound { .. }) => {
                tracing::warn!(lock = %lock.path, "the Hudi lock file was deleted while held");
                return Ok(());
            }
            Err(e) => return Err(Error::store("read", &lock.path, e)),
        }
        delete_object_if_exists(lock.store.as_ref(), &lock.path).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{ManualClock, SystemClock};
    use crate::lock::tests::exclusive_with;
    use object_store::memory::InMemory;

    fn lock(store: &Arc<dyn ObjectStore>, clock: Arc<dyn Clock>, expire: Option<Duration>) -> HudiFileLock {
        HudiFileLock::at(store.clone(), Path::from("t/.hoodie/lock"), "test", clock, expire, Duration::from_millis(300))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn excludes_and_releases_by_deleting_the_file() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let a = lock(&store, Arc::new(SystemClock), None);
        let held = a.acquire().await.unwrap();
        let text = store.get(&Path::from("t/.hoodie/lock")).await.unwrap().bytes().await.unwrap();
        let info: serde_json::Value = serde_json::from_slice(&text).unwrap();
        assert_eq!(info["lockThreadName"], "tributary test");
        // Another process (its own lock value) times out while it is held.
        let b = lock(&store, Arc::new(SystemClock), None);
        let err = b.acquire().await.err().expect("held by a");
        assert!(
            matches!(err, Error::LockTimeout { .. }) && err.to_string().contains("held by `tributary test`"),
            "{err}"
        );
        held.release().await.unwrap();
        assert!(store.head(&Path::from("t/.hoodie/lock")).await.is_err());
        b.acquire().await.unwrap().release().await.unwrap();
        exclusive_with(Arc::new(lock(&store, Arc::new(SystemClock), None)), false).await;
    }

    #[tokio::test]
    async fn an_expired_file_is_deleted_and_taken() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        // A file left by a dead holder: Hudi's Java writers leave it empty.
        store.put(&Path::from("t/.hoodie/lock"), "".into()).await.unwrap();
        let clock = Arc::new(ManualClock::new(SystemClock.now_millis()));
        let never = lock(&store, clock.clone(), None);
        let err = never.acquire().await.err().expect("held by the dead holder");
        assert!(err.to_string().contains("held by a Hudi writer (an empty file)"), "{err}");
        let minute = lock(&store, clock.clone(), Some(Duration::from_secs(60)));
        assert!(matches!(minute.acquire().await.err(), Some(Error::LockTimeout { .. })));
        clock.advance(61_000);
        minute.acquire().await.unwrap().release().await.unwrap();
    }

    #[tokio::test]
    async fn release_leaves_a_file_another_holder_wrote() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let a = lock(&store, Arc::new(SystemClock), None);
        let held = a.acquire().await.unwrap();
        store.put(&Path::from("t/.hoodie/lock"), "{\"lockThreadName\":\"spark\"}".into()).await.unwrap();
        held.release().await.unwrap();
        assert!(store.head(&Path::from("t/.hoodie/lock")).await.is_ok());
    }
}
