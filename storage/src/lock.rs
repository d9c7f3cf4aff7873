//! Table lock providers.
//!
//! A lock serialises instant generation and the creation of completed
//! timeline files. Each lock also stores the last time issued under it, which
//! the TrueTime generator uses as a floor (see the timeline crate's `truetime.rs`).
//!
//! - [`InProcessLock`]: tasks of one process.
//! - [`FileLock`]: processes on one host, through an OS file lock under
//!   `.hoodie/.aux/`; the OS releases it if the holder dies.
//! - [`LeaseLock`](crate::LeaseLock): any processes sharing an object
//!   store, through a JSON lease document written with conditional puts; a
//!   dead holder's lease expires (`lease.rs`).

use std::fmt::Debug;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::error::{Error, Result};

/// Something that grants exclusive access to a table's timeline.
#[async_trait]
pub trait LockProvider: Send + Sync + Debug {
    /// Blocks until the lock is held.
    async fn acquire(&self) -> Result<Box<dyn LockGuard>>;
    /// A short description for messages.
    fn describe(&self) -> String;
    /// Whether the lock keeps the last time issued under it from one
    /// holder to the next ([`LockGuard::last_issued`]), which the
    /// hybrid-logical time mode needs: it issues no time below that one
    /// and waits out no clock skew (the timeline crate's `TimeGenerator`
    /// refuses the mode under a lock that does not). True by default.
    fn keeps_last_issued(&self) -> bool {
        true
    }
}

/// Proof that the lock is held. Release it with [`LockGuard::release`];
/// dropping it also releases (for a [`LeaseLock`](crate::LeaseLock), by
/// letting the lease expire).
#[async_trait]
pub trait LockGuard: Send {
    /// The last time (epoch ms) issued under this lock, if any.
    fn last_issued(&self) -> Option<i64>;
    /// Records the time just issued; stored when the lock is released.
    fn set_last_issued(&mut self, millis: i64);
    /// A check that the lock is still held, for the step that must happen
    /// under it; by default one that always passes (a lock the OS or this
    /// process keeps cannot be taken from a live holder).
    fn fence(&self) -> Fence {
        Fence::none()
    }
    /// Stores the state and releases the lock.
    async fn release(self: Box<Self>) -> Result<()>;
}

/// Confirms that a lock is still held: [`Fence::check`] right before a step
/// that must happen under the lock (creating a completed instant) fails
/// with [`Error::LockLost`] when another holder has taken it over. Taken
/// from a guard with [`LockGuard::fence`]; cloning shares it.
#[derive(Clone)]
pub struct Fence(Option<Arc<dyn FenceCheck>>);

impl Fence {
    /// A fence that always passes.
    pub fn none() -> Self {
        Self(None)
    }

    /// A fence that runs `check`.
    pub fn new(check: Arc<dyn FenceCheck>) -> Self {
        Self(Some(check))
    }

    /// Fails when the lock this fence came from is no longer held.
    pub async fn check(&self) -> Result<()> {
        match &self.0 {
            Some(c) => c.check().await,
            None => Ok(()),
        }
    }
}

impl std::fmt::Debug for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Fence(checked)" } else { "Fence(none)" })
    }
}

/// What a [`Fence`] runs: a lock's own test that its holder still holds it.
#[async_trait]
pub trait FenceCheck: Send + Sync {
    /// Fails with [`Error::LockLost`] when the lock is no longer held.
    async fn check(&self) -> Result<()>;
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

/// An OS file lock (`flock`) on a lock file, for a table's instants
/// `<table>/.hoodie/.aux/tributary.lock`.
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
    /// A lock on the given lock file: for a table's instants,
    /// `<table>/.hoodie/.aux/tributary.lock`
    /// (the timeline layer names it: `layout::local_instant_lock_file`).
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Eight tasks take `lock` twenty times each: never two at once, and
    /// (for a lock that stores it) every issued time is kept.
    pub(crate) async fn exclusive(lock: Arc<dyn LockProvider>) {
        exclusive_with(lock, true).await
    }

    /// [`exclusive`] for a lock that stores no last issued time when
    /// `stores_time` is false.
    pub(crate) async fn exclusive_with(lock: Arc<dyn LockProvider>, stores_time: bool) {
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
        assert_eq!(g.last_issued(), stores_time.then_some(160), "every increment kept");
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
        let a = FileLock::at(dir.path().join(".hoodie/.aux/tributary.lock"));
        let b = FileLock::at(dir.path().join(".hoodie/.aux/tributary.lock"));
        let both: Arc<dyn LockProvider> = Arc::new(Alternate(Arc::new(a), Arc::new(b), AtomicUsize::new(0)));
        exclusive(both).await;
    }

    /// Two locks on one resource, taken in turn: two processes in one.
    #[derive(Debug)]
    pub(crate) struct Alternate(pub Arc<dyn LockProvider>, pub Arc<dyn LockProvider>, pub AtomicUsize);
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
        fn keeps_last_issued(&self) -> bool {
            self.0.keeps_last_issued() && self.1.keeps_last_issued()
        }
    }
}
