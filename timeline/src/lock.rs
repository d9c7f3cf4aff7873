//! Table lock providers.
//!
//! A lock serialises instant generation and the creation of completed
//! timeline files. Each lock also stores the last time issued under it, which
//! the TrueTime generator uses as a floor (see `truetime.rs`).
//!
//! - [`InProcessLock`]: tasks of one process.
//! - [`FileLock`]: processes on one host, through an OS file lock under
//!   `.hoodie/.aux/`; the OS releases it if the holder dies.
//! - [`LeaseLock`]: any processes sharing an object store, through a JSON
//!   lease document written with conditional puts; a dead holder's lease
//!   expires.

use std::fmt::Debug;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::clock::Clock;
use crate::error::{Error, Result};

/// Something that grants exclusive access to a table's timeline.
#[async_trait]
pub trait LockProvider: Send + Sync + Debug {
    /// Blocks until the lock is held.
    async fn acquire(&self) -> Result<Box<dyn LockGuard>>;
    /// A short description for messages.
    fn describe(&self) -> String;
}

/// Proof that the lock is held. Release it with [`LockGuard::release`];
/// dropping it also releases (for [`LeaseLock`], by letting the lease expire).
#[async_trait]
pub trait LockGuard: Send {
    /// The last time (epoch ms) issued under this lock, if any.
    fn last_issued(&self) -> Option<i64>;
    /// Records the time just issued; stored when the lock is released.
    fn set_last_issued(&mut self, millis: i64);
    /// Stores the state and releases the lock.
    async fn release(self: Box<Self>) -> Result<()>;
}

/// A lock shared by the tasks of one process.
#[derive(Debug, Clone, Default)]
pub struct InProcessLock {
    state: Arc<Mutex<Option<i64>>>,
}

impl InProcessLock {
    /// A new, unheld lock.
    pub fn new() -> Self {
        Self::default()
    }
}

struct InProcessGuard {
    guard: OwnedMutexGuard<Option<i64>>,
}

#[async_trait]
impl LockProvider for InProcessLock {
    async fn acquire(&self) -> Result<Box<dyn LockGuard>> {
        Ok(Box::new(InProcessGuard { guard: self.state.clone().lock_owned().await }))
    }

    fn describe(&self) -> String {
        "in-process lock".into()
    }
}

#[async_trait]
impl LockGuard for InProcessGuard {
    fn last_issued(&self) -> Option<i64> {
        *self.guard
    }
    fn set_last_issued(&mut self, millis: i64) {
        *self.guard = Some(millis);
    }
    async fn release(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

/// An OS file lock (`flock`) on `<table>/.hoodie/.aux/tributary.lock`.
///
/// The file's content is the last issued time. The OS drops the lock when the
/// holding process exits, however it exits. Tasks of one process queue on an
/// in-process mutex first, so only one thread per process waits on the OS.
#[derive(Debug, Clone)]
pub struct FileLock {
    path: PathBuf,
    local: Arc<Mutex<()>>,
}

impl FileLock {
    /// The lock of the table at local path `table_root`.
    pub fn for_table(table_root: impl Into<PathBuf>) -> Self {
        Self::at(table_root.into().join(".hoodie").join(".aux").join("tributary.lock"))
    }

    /// A lock on the given lock file.
    pub fn at(path: PathBuf) -> Self {
        Self { path, local: Arc::new(Mutex::new(())) }
    }
}

struct FileGuard {
    file: std::fs::File,
    path: PathBuf,
    last: Option<i64>,
    dirty: bool,
    _local: OwnedMutexGuard<()>,
}

#[async_trait]
impl LockProvider for FileLock {
    async fn acquire(&self) -> Result<Box<dyn LockGuard>> {
        let local = self.local.clone().lock_owned().await;
        let path = self.path.clone();
        let (file, last) = tokio::task::spawn_blocking(move || -> Result<_> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| Error::io("create lock folder", dir, e))?;
            }
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| Error::io("open lock file", &path, e))?;
            file.lock().map_err(|e| Error::io("lock", &path, e))?;
            let mut text = String::new();
            file.read_to_string(&mut text).map_err(|e| Error::io("read lock file", &path, e))?;
            let last = text.trim().parse::<i64>().ok();
            Ok((file, last))
        })
        .await
        .map_err(|e| Error::io("lock", &self.path, std::io::Error::other(e)))??;
        Ok(Box::new(FileGuard { file, path: self.path.clone(), last, dirty: false, _local: local }))
    }

    fn describe(&self) -> String {
        format!("file lock {}", self.path.display())
    }
}

#[async_trait]
impl LockGuard for FileGuard {
    fn last_issued(&self) -> Option<i64> {
        self.last
    }
    fn set_last_issued(&mut self, millis: i64) {
        self.last = Some(millis);
        self.dirty = true;
    }
    async fn release(self: Box<Self>) -> Result<()> {
        let FileGuard { mut file, path, last, dirty, _local } = *self;
        tokio::task::spawn_blocking(move || -> Result<()> {
            if let (true, Some(t)) = (dirty, last) {
                let text = format!("{t:020}\n");
                file.seek(SeekFrom::Start(0))
                    .and_then(|_| file.write_all(text.as_bytes()))
                    .and_then(|_| file.set_len(text.len() as u64))
                    .map_err(|e| Error::io("write lock file", &path, e))?;
            }
            file.unlock().map_err(|e| Error::io("unlock", &path, e))
        })
        .await
        .map_err(|e| Error::io("unlock", "lock file", std::io::Error::other(e)))?
    }
}

/// Settings of a [`LeaseLock`].
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    /// How long a lease lasts without release; a dead holder blocks at most this long.
    pub lease: Duration,
    /// Give up acquiring after this long.
    pub acquire_timeout: Duration,
    /// First pause between attempts; doubles up to `max_backoff`.
    pub min_backoff: Duration,
    /// Longest pause between attempts.
    pub max_backoff: Duration,
}

impl Default for LeaseSettings {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(60),
            acquire_timeout: Duration::from_secs(120),
            min_backoff: Duration::from_millis(2),
            max_backoff: Duration::from_millis(100),
        }
    }
}

/// The lease document stored at `.hoodie/.locks/tributary_lock.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LeaseDoc {
    owner: String,
    expires_at_ms: i64,
    released: bool,
    last_issued_ms: Option<i64>,
}

/// A lease lock built on conditional puts: create-if-absent to take a free
/// lock, put-if-version-matches to take over a released or expired one and to
/// release. Works on any store that supports `PutMode::Update` (S3, GCS,
/// Azure, memory).
#[derive(Debug, Clone)]
pub struct LeaseLock {
    store: Arc<dyn ObjectStore>,
    path: Path,
    owner: String,
    clock: Arc<dyn Clock>,
    settings: LeaseSettings,
}

impl LeaseLock {
    /// The lease lock of the table rooted at `table_root` in `store`. `owner`
    /// must be unique among the processes sharing the table.
    pub fn for_table(
        store: Arc<dyn ObjectStore>,
        table_root: &Path,
        owner: impl Into<String>,
        clock: Arc<dyn Clock>,
        settings: LeaseSettings,
    ) -> Self {
        let path = table_root.clone().join(".hoodie").join(".locks").join("tributary_lock.json");
        Self::at(store, path, owner, clock, settings)
    }

    /// A lease lock on the document at `path`.
    pub fn at(
        store: Arc<dyn ObjectStore>,
        path: Path,
        owner: impl Into<String>,
        clock: Arc<dyn Clock>,
        settings: LeaseSettings,
    ) -> Self {
        Self { store, path, owner: owner.into(), clock, settings }
    }

    async fn try_take(&self) -> Result<Option<LeaseGuard>> {
        let now = self.clock.now_millis();
        let mine = |last| LeaseDoc {
            owner: self.owner.clone(),
            expires_at_ms: now + self.settings.lease.as_millis() as i64,
            released: false,
            last_issued_ms: last,
        };
        let (mode, last) = match self.store.get(&self.path).await {
            Err(object_store::Error::NotFound { .. }) => (PutMode::Create, None),
            Err(e) => return Err(Error::store("get", &self.path, e)),
            Ok(got) => {
                let version = UpdateVersion { e_tag: got.meta.e_tag.clone(), version: got.meta.version.clone() };
                let bytes = got.bytes().await.map_err(|e| Error::store("get", &self.path, e))?;
                let doc: LeaseDoc = serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
                    path: self.path.to_string(),
                    reason: format!("lease document: {e}"),
                })?;
                if !doc.released && doc.expires_at_ms > now {
                    return Ok(None);
                }
                if !doc.released {
                    tracing::warn!(lock = %self.path, owner = %doc.owner, "taking over an expired lease");
                }
                (PutMode::Update(version), doc.last_issued_ms)
            }
        };
        let doc = mine(last);
        match self.put(&doc, mode).await {
            Ok(version) => Ok(Some(LeaseGuard { lock: self.clone(), doc, version })),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => Ok(None),
            Err(e) => Err(Error::store("put", &self.path, e)),
        }
    }

    async fn put(&self, doc: &LeaseDoc, mode: PutMode) -> std::result::Result<UpdateVersion, object_store::Error> {
        let body = serde_json::to_vec(doc).unwrap_or_default();
        let res =
            self.store.put_opts(&self.path, PutPayload::from(body), PutOptions { mode, ..Default::default() }).await?;
        Ok(UpdateVersion { e_tag: res.e_tag, version: res.version })
    }
}

struct LeaseGuard {
    lock: LeaseLock,
    doc: LeaseDoc,
    version: UpdateVersion,
}

#[async_trait]
impl LockProvider for LeaseLock {
    async fn acquire(&self) -> Result<Box<dyn LockGuard>> {
        let started = tokio::time::Instant::now();
        let mut backoff = self.settings.min_backoff;
        loop {
            if let Some(g) = self.try_take().await? {
                return Ok(Box::new(g));
            }
            if started.elapsed() >= self.settings.acquire_timeout {
                return Err(Error::LockTimeout { lock: self.describe(), waited: started.elapsed() });
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(self.settings.max_backoff);
        }
    }

    fn describe(&self) -> String {
        format!("lease lock {}", self.path)
    }
}

#[async_trait]
impl LockGuard for LeaseGuard {
    fn last_issued(&self) -> Option<i64> {
        self.doc.last_issued_ms
    }
    fn set_last_issued(&mut self, millis: i64) {
        self.doc.last_issued_ms = Some(millis);
    }
    async fn release(self: Box<Self>) -> Result<()> {
        let LeaseGuard { lock, mut doc, version } = *self;
        if lock.clock.now_millis() > doc.expires_at_ms {
            return Err(Error::LockLost {
                lock: lock.describe(),
                reason: "lease expired before release; another owner may have taken it".into(),
            });
        }
        doc.released = true;
        match lock.put(&doc, PutMode::Update(version)).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::Precondition { .. }) => {
                Err(Error::LockLost { lock: lock.describe(), reason: "lease document changed while held".into() })
            }
            Err(e) => Err(Error::store("put", &lock.path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{ManualClock, SystemClock};
    use object_store::memory::InMemory;
    use std::sync::atomic::{AtomicUsize, Ordering};

    async fn exclusive(lock: Arc<dyn LockProvider>) {
        let inside = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (lock, inside) = (lock.clone(), inside.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..20 {
                    let mut g = lock.acquire().await.unwrap();
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                    let next = g.last_issued().unwrap_or(0) + 1;
                    tokio::task::yield_now().await;
                    g.set_last_issued(next);
                    inside.fetch_sub(1, Ordering::SeqCst);
                    g.release().await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let g = lock.acquire().await.unwrap();
        assert_eq!(g.last_issued(), Some(160), "every increment kept");
        g.release().await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn in_process_is_exclusive() {
        exclusive(Arc::new(InProcessLock::new())).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn file_lock_is_exclusive_across_instances() {
        let dir = tempfile::tempdir().unwrap();
        // Two instances on one file behave like two processes: separate
        // descriptors, so the OS lock must exclude them from each other.
        let a = FileLock::for_table(dir.path());
        let b = FileLock::for_table(dir.path());
        let both: Arc<dyn LockProvider> = Arc::new(Alternate(a, b, AtomicUsize::new(0)));
        exclusive(both).await;
    }

    #[derive(Debug)]
    struct Alternate(FileLock, FileLock, AtomicUsize);
    #[async_trait]
    impl LockProvider for Alternate {
        async fn acquire(&self) -> Result<Box<dyn LockGuard>> {
            if self.2.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
                self.0.acquire().await
            } else {
                self.1.acquire().await
            }
        }
        fn describe(&self) -> String {
            "alternate".into()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn lease_lock_is_exclusive() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let lock =
            LeaseLock::for_table(store, &Path::from("t"), "owner-1", Arc::new(SystemClock), LeaseSettings::default());
        exclusive(Arc::new(lock)).await;
    }

    #[tokio::test]
    async fn dead_lease_holder_expires() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let clock = Arc::new(ManualClock::new(1_000_000));
        let settings = LeaseSettings {
            lease: Duration::from_secs(10),
            acquire_timeout: Duration::from_millis(50),
            ..Default::default()
        };
        let a = LeaseLock::for_table(store.clone(), &Path::from("t"), "a", clock.clone(), settings.clone());
        let b = LeaseLock::for_table(store.clone(), &Path::from("t"), "b", clock.clone(), settings);
        let mut first = a.acquire().await.unwrap();
        assert_eq!(first.last_issued(), None, "a new lock has issued nothing");
        first.set_last_issued(42);
        first.release().await.unwrap();
        let mut held = a.acquire().await.unwrap();
        assert_eq!(held.last_issued(), Some(42), "a release stores the last issued time");
        held.set_last_issued(43); // stored only by a release, which never comes
        std::mem::forget(held); // the holder dies without releasing
        let err = b.acquire().await.err().expect("lease still live");
        assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
        clock.advance(10_001);
        let mut g = b.acquire().await.unwrap();
        assert_eq!(g.last_issued(), Some(42), "taking over an expired lease keeps the last stored time");
        g.set_last_issued(44);
        g.release().await.unwrap();
        let g = a.acquire().await.unwrap();
        assert_eq!(g.last_issued(), Some(44), "the new owner's release is stored");
        g.release().await.unwrap();
    }

    #[tokio::test]
    async fn expired_holder_learns_it_lost_the_lock() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let clock = Arc::new(ManualClock::new(0));
        let settings = LeaseSettings { lease: Duration::from_secs(1), ..Default::default() };
        let a = LeaseLock::for_table(store.clone(), &Path::from("t"), "a", clock.clone(), settings.clone());
        let b = LeaseLock::for_table(store, &Path::from("t"), "b", clock.clone(), settings);
        let ga = a.acquire().await.unwrap();
        clock.advance(2_000);
        let gb = b.acquire().await.unwrap();
        assert!(matches!(ga.release().await, Err(Error::LockLost { .. })));
        gb.release().await.unwrap();
    }
}
