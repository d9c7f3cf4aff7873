//! [`LeaseLock`]: a table lock that needs nothing but the object store.
//!
//! The lock is one small JSON document, by default
//! `.hoodie/.locks/table_lock.json`, laid out like the document of Hudi's
//! `StorageBasedLockProvider` (RFC-91), so that Hudi writers configured with
//! that provider and Tributary writers exclude each other:
//!
//! ```json
//! {"expired":false,"validUntil":1766264528078,"owner":"host-a-4242-0",
//!  "tributaryGeneration":7,"tributaryLastIssued":1766264468078}
//! ```
//!
//! - **Take.** Read the document. If it is absent, create it
//!   (`If-None-Match: *`); if it is released (`expired`) or its lease ran
//!   out (`validUntil` plus the clock-drift allowance is past, by the
//!   reader's clock), replace it conditionally on the ETag just read
//!   (`If-Match`). Either way exactly one contender wins. The winner's
//!   document carries the next *generation*.
//! - **Renew.** While held, a background task rewrites the document every
//!   [`LeaseSettings::renew_interval`] with a new `validUntil`, each write
//!   conditional on the ETag of the holder's previous write, so a holder that
//!   works for minutes (a compaction) keeps its lease.
//! - **Check.** Right before a step that must happen under the lock (creating
//!   a completed instant), the holder calls [`Fence::check`]: when less than
//!   half the lease is known to remain, it renews first. A holder whose lease
//!   was taken over (a new generation; it was frozen, partitioned or too
//!   slow) fails there with [`Error::LockLost`] and writes nothing.
//! - **Release.** Rewrite the document with `expired: true`, conditional on
//!   the holder's ETag. Nothing ever deletes the document: S3 has no
//!   conditional delete, so a delete could remove another holder's lease.
//!
//! A conditional write whose answer is lost (a timeout, a 5xx after the
//! write) may be retried by the store client and then refused, although it
//! landed. Every refusal and every failure is therefore resolved by reading
//! the document back at once: when it still names this holder and
//! generation, the write is taken as done (or retried on the new ETag);
//! only a failed write that left the document unchanged is tried again
//! after a pause. Ceph RGW compares `If-Match` with the
//! unquoted ETag; a refusal with the document unchanged switches the lock to
//! sending ETags without quotes.
//!
//! Differences from Hudi's provider: the two `tributary*` fields (Hudi's
//! reader ignores unknown fields, and a Hudi writer drops them, after which
//! the generation starts again from 1 and the hybrid-logical floor is
//! empty); renewal conditional on the previous write as Hudi's; Hudi's
//! owner is a bare UUID.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, OwnedMutexGuard};
use tokio::task::JoinHandle;

use crate::clock::Clock;
use crate::error::{Error, ErrorKind, Result};
use crate::lock::{Fence, FenceCheck, LockGuard, LockProvider};

/// Hudi's allowance for clock drift between the holder that wrote
/// `validUntil` and the contender reading it (`CLOCK_DRIFT_BUFFER_MS`).
pub const HUDI_CLOCK_DRIFT: Duration = Duration::from_millis(500);

/// Settings of a [`LeaseLock`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSettings {
    /// How long a lease lasts unless renewed: a dead holder blocks others at
    /// most this long (plus [`LeaseSettings::clock_drift`]). Default 60 s.
    pub lease: Duration,
    /// How often a holder renews its lease. Default 10 s; must be below half
    /// the lease.
    pub renew_interval: Duration,
    /// How far apart the clocks of holders may be: a lease counts as run out
    /// only this long after its `validUntil`. Default and minimum: Hudi's
    /// 500 ms ([`HUDI_CLOCK_DRIFT`]).
    pub clock_drift: Duration,
    /// Give up acquiring after this long. Default 120 s. A failed read of
    /// the document does not end the wait before it.
    pub acquire_timeout: Duration,
    /// First pause between attempts; doubles up to `max_backoff`.
    pub min_backoff: Duration,
    /// Longest pause between attempts while the lock changes hands. While
    /// the document stays unchanged (its holder is stuck, dead or holding
    /// long), the pauses grow to an eighth of how long it has stayed so, at
    /// most a quarter of `renew_interval`, and never past the moment the
    /// lease runs out: a contender waiting out a dead holder's lease reads
    /// the document a few dozen times, not once every `max_backoff`, and
    /// sees a release within an eighth of the time it waited.
    pub max_backoff: Duration,
}

impl Default for LeaseSettings {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(60),
            renew_interval: Duration::from_secs(10),
            clock_drift: HUDI_CLOCK_DRIFT,
            acquire_timeout: Duration::from_secs(120),
            min_backoff: Duration::from_millis(2),
            max_backoff: Duration::from_millis(100),
        }
    }
}

impl LeaseSettings {
    /// Checks that the lease outlasts two renewals and the drift allowance
    /// is at least Hudi's; the error names the setting.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Error::InvalidInput { what: "lease lock settings".into(), reason };
        if self.renew_interval.is_zero() || self.renew_interval * 2 >= self.lease {
            return Err(bad(format!(
                "the renewal interval {:?} must be above zero and below half the lease {:?}",
                self.renew_interval, self.lease
            )));
        }
        if self.clock_drift < HUDI_CLOCK_DRIFT {
            return Err(bad(format!("the clock drift allowance {:?} must be at least 500 ms", self.clock_drift)));
        }
        Ok(())
    }
}

/// The lock document; field names as Hudi's `StorageLockData`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeaseDoc {
    /// Released (or given up); anyone may take it.
    expired: bool,
    /// Epoch milliseconds, by the holder's clock, when the lease runs out.
    valid_until: i64,
    /// Who holds (or last held) the lease.
    owner: String,
    /// Counts takes: one more than the document's before.
    #[serde(default, rename = "tributaryGeneration")]
    generation: u64,
    /// The hybrid-logical floor: the last time issued under the lock.
    #[serde(default, rename = "tributaryLastIssued", skip_serializing_if = "Option::is_none")]
    last_issued: Option<i64>,
}

/// A table lock built on conditional puts to one document; see the module
/// documentation for the protocol. Works on any store with conditional
/// puts (`PutMode::Create` and `PutMode::Update`): S3 and S3-compatible
/// servers, GCS, Azure, memory. Cloning shares the lock: tasks of one
/// process queue for it locally first, so only one of them polls the store.
#[derive(Debug, Clone)]
pub struct LeaseLock {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    store: Arc<dyn ObjectStore>,
    path: Path,
    owner: String,
    clock: Arc<dyn Clock>,
    settings: LeaseSettings,
    /// The store compares `If-Match` with the unquoted ETag (Ceph RGW).
    unquote: AtomicBool,
    local: Arc<Mutex<()>>,
}

/// What a read of the lock document found.
enum Found {
    Absent,
    Doc(LeaseDoc, UpdateVersion),
}

/// What one attempt to take the lock found.
enum Attempt {
    Took(Held),
    /// Another holder has it, under this document.
    Busy(LeaseDoc),
    /// The document could not be read now; nothing was written.
    Unread(Error),
}

/// How a conditional write ended.
enum Written {
    Done(UpdateVersion),
    /// Another holder's document is there now.
    Lost(LeaseDoc),
}

impl LeaseLock {
    /// A lease lock on the document at `path` in `store`: for a table's
    /// instants, `.hoodie/.locks/table_lock.json` (the document Hudi's
    /// storage-based lock uses; the timeline layer names it:
    /// `layout::lease_lock_file`).
    /// `owner` names this holder in the document and must be unique among
    /// the processes sharing the table (by default host and process id); a
    /// per-instance counter is appended.
    pub fn at(
        store: Arc<dyn ObjectStore>,
        path: Path,
        owner: impl Into<String>,
        clock: Arc<dyn Clock>,
        settings: LeaseSettings,
    ) -> Self {
        // One owner name per instance, so that two instances in one process
        // (two opens of one table) never take each other's lease for their own.
        static INSTANCES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let owner = format!("{}-{}", owner.into(), INSTANCES.fetch_add(1, Ordering::Relaxed));
        Self {
            shared: Arc::new(Shared {
                store,
                path,
                owner,
                clock,
                settings,
                unquote: AtomicBool::new(false),
                local: Arc::new(Mutex::new(())),
            }),
        }
    }

    /// The owner this lock writes into the document.
    pub fn owner(&self) -> &str {
        &self.shared.owner
    }
}

impl Shared {
    fn lease_ms(&self) -> i64 {
        i64::try_from(self.settings.lease.as_millis()).unwrap_or(i64::MAX)
    }

    fn store_err(&self, op: &'static str, e: object_store::Error) -> Error {
        Error::store(op, &self.path, e)
    }

    async fn read(&self) -> Result<Found> {
        let got = match self.store.get(&self.path).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(Found::Absent),
            Err(e) => return Err(self.store_err("get", e)),
        };
        let version = UpdateVersion { e_tag: got.meta.e_tag.clone(), version: got.meta.version.clone() };
        let bytes = got.bytes().await.map_err(|e| self.store_err("get", e))?;
        let doc = serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
            path: self.path.to_string(),
            reason: format!("not a lock document (expected Hudi's storage lock JSON): {e}"),
        })?;
        Ok(Found::Doc(doc, version))
    }

    /// Epoch milliseconds, by the holder's clock of `doc`, after which its
    /// lease has run out: `validUntil` plus the drift allowance.
    fn runs_out(&self, doc: &LeaseDoc) -> i64 {
        let drift = i64::try_from(self.settings.clock_drift.as_millis()).unwrap_or(i64::MAX);
        doc.valid_until.saturating_add(drift)
    }

    /// Whether `doc` is free to take now by this holder's clock.
    fn is_free(&self, doc: &LeaseDoc) -> bool {
        doc.expired || self.clock.now_millis() > self.runs_out(doc)
    }

    fn mode(&self, version: Option<&UpdateVersion>) -> PutMode {
        match version {
            None => PutMode::Create,
            Some(v) if self.unquote.load(Ordering::Relaxed) => PutMode::Update(UpdateVersion {
                e_tag: v.e_tag.as_deref().map(|t| t.trim_matches('"').to_string()),
                version: v.version.clone(),
            }),
            Some(v) => PutMode::Update(v.clone()),
        }
    }

    /// Writes `doc` if the document is still at `version` (absent when
    /// `None`). A refusal, or a failure that may have written anyway (a
    /// timeout, a 5xx), is resolved by reading the document back: when it
    /// holds `doc` (this very write landed before a retry was refused) the
    /// write is done; when it is unchanged (the store wants unquoted ETags)
    /// or still names this owner and generation (an earlier write of this
    /// holder landed) the write is retried on what was read.
    async fn write(&self, doc: &LeaseDoc, version: Option<UpdateVersion>) -> Result<Written> {
        let body = bytes::Bytes::from(serde_json::to_vec(doc).map_err(|e| Error::Corrupt {
            path: self.path.to_string(),
            reason: format!("cannot encode the lock document: {e}"),
        })?);
        let mut version = version;
        let mut backoff = Duration::from_millis(50);
        for attempt in 1..=4 {
            let opts = PutOptions { mode: self.mode(version.as_ref()), ..Default::default() };
            let mut failed = None;
            match self.store.put_opts(&self.path, PutPayload::from(body.clone()), opts).await {
                Ok(r) => return Ok(Written::Done(UpdateVersion { e_tag: r.e_tag, version: r.version })),
                Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {}
                // The write may have landed, or lost to another written at
                // the same moment (Ceph RGW answers some of those 500, not
                // 412): the document, read at once, says which.
                Err(e) if attempt < 4 && Error::is_transient(&e) => failed = Some(e),
                Err(e) => return Err(self.store_err("put", e)),
            }
            let found = match self.read().await {
                Ok(found) => found,
                Err(e) if failed.is_some() && e.kind() == ErrorKind::Unavailable => {
                    self.pause_after_failure(&e, &mut backoff).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let Found::Doc(current, now) = found else {
                if let Some(e) = &failed {
                    // Nothing landed: the create again, after a pause.
                    self.pause_after_failure(e, &mut backoff).await;
                }
                // Or gone: someone deleted the document by hand. Start over.
                version = None;
                continue;
            };
            if current == *doc {
                return Ok(Written::Done(now));
            }
            let unchanged = version.as_ref().is_some_and(|v| v.e_tag.is_some() && v.e_tag == now.e_tag);
            if let (true, Some(e)) = (unchanged, &failed) {
                // Nothing landed: the store failed the write. The same
                // conditional write again, after a pause.
                self.pause_after_failure(e, &mut backoff).await;
                continue;
            }
            if unchanged {
                // Refused although nothing changed: the store compares
                // `If-Match` with the unquoted ETag.
                if self.unquote.swap(true, Ordering::Relaxed) {
                    return Err(Error::LockLost {
                        lock: self.describe(),
                        reason: "the store refuses conditional writes on an unchanged document".into(),
                    });
                }
                tracing::info!(lock = %self.path, "the store compares If-Match with unquoted ETags; sending them so");
            } else if current.owner != doc.owner || current.generation != doc.generation {
                return Ok(Written::Lost(current));
            }
            version = Some(now);
        }
        Err(Error::LockLost {
            lock: self.describe(),
            reason: "the lock document kept changing under conditional writes".into(),
        })
    }

    /// Logs a failed lock write and waits `backoff` before it is sent
    /// again; each pause is four times the last.
    async fn pause_after_failure(&self, e: &(dyn std::fmt::Display + Sync), backoff: &mut Duration) {
        tracing::warn!(lock = %self.path, error = %e, "a lock write failed; trying it again");
        tokio::time::sleep(*backoff).await;
        *backoff *= 4;
    }

    /// One attempt to take the lock.
    async fn try_take(&self) -> Result<Attempt> {
        let found = match self.read().await {
            Err(e) if e.kind() == ErrorKind::Unavailable => return Ok(Attempt::Unread(e)),
            found => found?,
        };
        let (version, before) = match found {
            Found::Absent => (None, None),
            Found::Doc(doc, version) if self.is_free(&doc) => {
                if !doc.expired {
                    tracing::warn!(lock = %self.path, owner = %doc.owner, "taking over a lease that ran out");
                }
                (Some(version), Some(doc))
            }
            Found::Doc(doc, _) => return Ok(Attempt::Busy(doc)),
        };
        let doc = LeaseDoc {
            expired: false,
            valid_until: self.clock.now_millis().saturating_add(self.lease_ms()),
            owner: self.owner.clone(),
            generation: before.as_ref().map_or(0, |d| d.generation) + 1,
            last_issued: before.and_then(|d| d.last_issued),
        };
        let sent = tokio::time::Instant::now();
        match self.write(&doc, version).await? {
            Written::Done(version) => Ok(Attempt::Took(Held::new(doc, version, sent, &self.settings))),
            Written::Lost(current) => Ok(Attempt::Busy(current)),
        }
    }

    /// The pause before the next attempt on a lock held under `doc`, which
    /// has stayed unchanged for `unchanged`: `backoff`, or an eighth of
    /// `unchanged` when that is longer (at most a quarter of the renewal
    /// interval), and never past the moment `doc`'s lease runs out by this
    /// holder's clock ([`LeaseSettings::max_backoff`]).
    fn pause(&self, backoff: Duration, unchanged: Duration, doc: &LeaseDoc) -> Duration {
        let patient = backoff.max((unchanged / 8).min(self.settings.renew_interval / 4));
        let free_at = self.runs_out(doc).saturating_add(1);
        let until_free = u64::try_from(free_at.saturating_sub(self.clock.now_millis())).unwrap_or(0);
        patient.min(Duration::from_millis(until_free).max(backoff))
    }

    fn describe(&self) -> String {
        format!("lease lock {} (owner {})", self.path, self.owner)
    }
}

/// The holder's view of its lease.
#[derive(Debug)]
struct Held {
    doc: LeaseDoc,
    version: UpdateVersion,
    /// When the lease runs out by this process's monotonic clock, counted
    /// from before the write that set it.
    runs_out: tokio::time::Instant,
    /// Why the lease is known to be lost.
    lost: Option<String>,
}

impl Held {
    fn new(doc: LeaseDoc, version: UpdateVersion, sent: tokio::time::Instant, settings: &LeaseSettings) -> Self {
        Self { doc, version, runs_out: sent + settings.lease, lost: None }
    }

    /// Whether at least `margin` of the lease is known to remain, by both
    /// the monotonic clock and the table's clock.
    fn remains(&self, margin: Duration, clock: &dyn Clock) -> bool {
        let margin_ms = i64::try_from(margin.as_millis()).unwrap_or(i64::MAX);
        tokio::time::Instant::now() + margin < self.runs_out
            && clock.now_millis().saturating_add(margin_ms) < self.doc.valid_until
    }
}

/// The lease while held: shared by the guard, its fences and its renewal
/// task, which serialise their conditional writes on it.
struct Holding {
    lock: Arc<Shared>,
    held: Mutex<Held>,
    last_issued: AtomicI64,
}

impl Holding {
    fn last_issued(&self) -> Option<i64> {
        Some(self.last_issued.load(Ordering::Relaxed)).filter(|t| *t != i64::MIN)
    }

    /// Rewrites the document from `held` with `expired` and a new
    /// `validUntil`, conditional on the holder's last write.
    async fn rewrite(&self, held: &mut Held, expired: bool) -> Result<()> {
        if let Some(reason) = &held.lost {
            return Err(Error::LockLost { lock: self.lock.describe(), reason: reason.clone() });
        }
        let lock = &self.lock;
        let doc = LeaseDoc {
            expired,
            valid_until: if expired {
                held.doc.valid_until
            } else {
                lock.clock.now_millis().saturating_add(lock.lease_ms())
            },
            last_issued: self.last_issued().or(held.doc.last_issued),
            ..held.doc.clone()
        };
        let sent = tokio::time::Instant::now();
        match lock.write(&doc, Some(held.version.clone())).await? {
            Written::Done(version) => {
                *held = Held::new(doc, version, sent, &lock.settings);
                Ok(())
            }
            Written::Lost(now) => {
                let reason = format!(
                    "the lease (generation {}) was taken over by {} (generation {}); this holder was too slow, \
                     frozen or cut off for longer than the lease {:?}, so it stops before writing anything more",
                    held.doc.generation, now.owner, now.generation, lock.settings.lease
                );
                held.lost = Some(reason.clone());
                Err(Error::LockLost { lock: lock.describe(), reason })
            }
        }
    }

    async fn renew_forever(self: Arc<Self>) {
        loop {
            tokio::time::sleep(self.lock.settings.renew_interval).await;
            let mut held = self.held.lock().await;
            match self.rewrite(&mut held, false).await {
                Ok(()) => {}
                Err(Error::LockLost { reason, .. }) => {
                    tracing::error!(lock = %self.lock.path, %reason, "lost the lease while holding it");
                    return;
                }
                // A failed renewal is tried again at the next interval; the
                // lease still has most of its time.
                Err(e) => tracing::warn!(lock = %self.lock.path, error = %e, "renewing the lease failed"),
            }
        }
    }
}

#[async_trait]
impl FenceCheck for Holding {
    async fn check(&self) -> Result<()> {
        let mut held = self.held.lock().await;
        if let Some(reason) = &held.lost {
            return Err(Error::LockLost { lock: self.lock.describe(), reason: reason.clone() });
        }
        if held.remains(self.lock.settings.lease / 2, self.lock.clock.as_ref()) {
            return Ok(());
        }
        self.rewrite(&mut held, false).await
    }
}

struct LeaseGuard {
    holding: Arc<Holding>,
    renewer: JoinHandle<()>,
    _local: OwnedMutexGuard<()>,
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

#[async_trait]
impl LockProvider for LeaseLock {
    async fn acquire(&self) -> Result<Box<dyn LockGuard>> {
        let shared = &self.shared;
        let local = shared.local.clone().lock_owned().await;
        let started = tokio::time::Instant::now();
        let mut backoff = shared.settings.min_backoff;
        // The document last found, and since when it has been so.
        let mut seen: Option<(LeaseDoc, tokio::time::Instant)> = None;
        // A read that failed takes nothing: the wait goes on, and when the
        // timeout ends it on a failed read, that failure is the answer.
        let mut unread = None;
        loop {
            let busy = match shared.try_take().await? {
                Attempt::Busy(doc) => Some(doc),
                Attempt::Unread(e) => {
                    tracing::warn!(lock = %shared.path, error = %e, "reading the lock document failed; still waiting");
                    unread = Some(e);
                    None
                }
                Attempt::Took(held) => {
                    let last = held.doc.last_issued.unwrap_or(i64::MIN);
                    let holding = Arc::new(Holding {
                        lock: shared.clone(),
                        held: Mutex::new(held),
                        last_issued: AtomicI64::new(last),
                    });
                    let renewer = tokio::spawn(holding.clone().renew_forever());
                    return Ok(Box::new(LeaseGuard { holding, renewer, _local: local }));
                }
            };
            if started.elapsed() >= shared.settings.acquire_timeout {
                return Err(match (busy, unread) {
                    (None, Some(e)) => e,
                    _ => Error::LockTimeout { lock: self.describe(), waited: started.elapsed() },
                });
            }
            let now = tokio::time::Instant::now();
            if let Some(busy) = busy {
                let since = seen.take().filter(|(doc, _)| *doc == busy).map_or(now, |(_, since)| since);
                seen = Some((busy, since));
            }
            let left = shared.settings.acquire_timeout.saturating_sub(started.elapsed());
            let pause = seen.as_ref().map_or(backoff, |(doc, since)| shared.pause(backoff, now - *since, doc));
            tokio::time::sleep(pause.min(left)).await;
            backoff = (backoff * 2).min(shared.settings.max_backoff);
        }
    }

    fn describe(&self) -> String {
        self.shared.describe()
    }
}

#[async_trait]
impl LockGuard for LeaseGuard {
    fn last_issued(&self) -> Option<i64> {
        self.holding.last_issued()
    }

    fn set_last_issued(&mut self, millis: i64) {
        self.holding.last_issued.store(millis, Ordering::Relaxed);
    }

    fn fence(&self) -> Fence {
        Fence::new(self.holding.clone())
    }

    async fn release(self: Box<Self>) -> Result<()> {
        self.renewer.abort();
        let mut held = self.holding.held.lock().await;
        self.holding.rewrite(&mut held, true).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{ManualClock, SystemClock};
    use crate::lock::tests::exclusive;
    use object_store::memory::InMemory;

    fn lock(store: &Arc<dyn ObjectStore>, owner: &str, clock: Arc<dyn Clock>, settings: LeaseSettings) -> LeaseLock {
        LeaseLock::at(store.clone(), Path::from("t/.hoodie/.locks/table_lock.json"), owner, clock, settings)
    }

    async fn doc(store: &Arc<dyn ObjectStore>) -> LeaseDoc {
        let bytes = store.get(&Path::from("t/.hoodie/.locks/table_lock.json")).await.unwrap().bytes().await.unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn lease_lock_is_exclusive() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        exclusive(Arc::new(lock(&store, "owner-1", Arc::new(SystemClock), LeaseSettings::default()))).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn separate_instances_exclude_each_other() {
        // Two instances behave like two processes: each has its own local
        // queue, so only the store's conditional writes keep them apart.
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let a = lock(&store, "a", Arc::new(SystemClock), LeaseSettings::default());
        let b = lock(&store, "b", Arc::new(SystemClock), LeaseSettings::default());
        exclusive(Arc::new(crate::lock::tests::Alternate(Arc::new(a), Arc::new(b), Default::default()))).await;
    }

    #[test]
    fn the_document_reads_as_hudis_storage_lock() {
        // The fields Hudi's `StorageLockData` requires, and Hudi's own
        // document (no Tributary fields) read back.
        let hudi = r#"{"expired":false,"validUntil":1700000000000,"owner":"testOwner"}"#;
        let doc: LeaseDoc = serde_json::from_str(hudi).unwrap();
        assert_eq!((doc.generation, doc.last_issued), (0, None));
        let ours = serde_json::to_value(LeaseDoc { generation: 3, last_issued: Some(5), ..doc }).unwrap();
        assert_eq!(ours["validUntil"], 1_700_000_000_000_i64);
        assert_eq!(ours["expired"], false);
        assert_eq!(ours["owner"], "testOwner");
        assert_eq!(ours["tributaryGeneration"], 3);
    }

    #[tokio::test]
    async fn a_dead_holder_expires_and_release_never_deletes() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let clock = Arc::new(ManualClock::new(1_000_000));
        let settings = LeaseSettings {
            lease: Duration::from_secs(10),
            acquire_timeout: Duration::from_millis(50),
            ..Default::default()
        };
        let a = lock(&store, "a", clock.clone(), settings.clone());
        let b = lock(&store, "b", clock.clone(), settings);
        let mut first = a.acquire().await.unwrap();
        assert_eq!(first.last_issued(), None, "a new lock has issued nothing");
        first.set_last_issued(42);
        first.release().await.unwrap();
        let released = doc(&store).await;
        assert!(released.expired && released.generation == 1, "{released:?}");
        let mut held = a.acquire().await.unwrap();
        assert_eq!(held.last_issued(), Some(42), "a release stores the last issued time");
        assert_eq!(doc(&store).await.generation, 2);
        held.set_last_issued(43); // stored only by a write, which never comes
        drop(held); // the holder dies without releasing: no renewals, no release
        let err = b.acquire().await.err().expect("lease still live");
        assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
        clock.advance(10_000 + 400);
        let err = b.acquire().await.err().expect("within the drift allowance");
        assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
        clock.advance(200);
        let mut g = b.acquire().await.unwrap();
        assert_eq!(g.last_issued(), Some(42), "taking over a lease that ran out keeps the last stored time");
        assert_eq!(doc(&store).await.generation, 3);
        g.set_last_issued(44);
        g.release().await.unwrap();
        let g = a.acquire().await.unwrap();
        assert_eq!(g.last_issued(), Some(44), "the new owner's release is stored");
        g.release().await.unwrap();
    }

    /// Milliseconds since the epoch moving with tokio's (paused) time.
    #[derive(Debug)]
    struct TokioClock(tokio::time::Instant);

    impl Clock for TokioClock {
        fn now_millis(&self) -> i64 {
            1_700_000_000_000 + i64::try_from(self.0.elapsed().as_millis()).unwrap()
        }
    }

    /// Two contenders with default settings on a counting store, on a
    /// clock moving with tokio's time; `a` holds the lock.
    async fn contenders() -> (Arc<crate::counting::CountingStore>, Box<dyn LockGuard>, LeaseLock) {
        let counting = Arc::new(crate::counting::CountingStore::new(Arc::new(InMemory::new())));
        let store: Arc<dyn ObjectStore> = counting.clone();
        let clock: Arc<dyn Clock> = Arc::new(TokioClock(tokio::time::Instant::now()));
        let a = lock(&store, "a", clock.clone(), LeaseSettings::default());
        let b = lock(&store, "b", clock, LeaseSettings::default());
        let held = a.acquire().await.unwrap();
        counting.take();
        (counting, held, b)
    }

    /// A contender waiting on the lock while `hold` runs: how long it
    /// waited, and how many times it read the document.
    async fn wait_for(hold: impl Future<Output = ()>) -> (Duration, usize) {
        let (counting, held, b) = contenders().await;
        let started = tokio::time::Instant::now();
        let (_, taken) = tokio::join!(
            async {
                hold.await;
                held.release().await.unwrap();
            },
            b.acquire()
        );
        let waited = started.elapsed();
        let reads = counting.take().gets;
        taken.unwrap().release().await.unwrap();
        (waited, reads)
    }

    #[tokio::test(start_paused = true)]
    async fn a_contender_waits_out_a_dead_lease_with_few_reads() {
        let (counting, held, b) = contenders().await;
        drop(held); // the holder dies: no renewals, no release
        let settings = LeaseSettings::default();
        let started = tokio::time::Instant::now();
        b.acquire().await.unwrap().release().await.unwrap();
        let waited = started.elapsed();
        let reads = counting.take().gets;
        let runs_out = settings.lease + settings.clock_drift;
        assert!(waited > runs_out && waited < runs_out + Duration::from_millis(100), "took over after {waited:?}");
        // Every 100 ms throughout would be 600 reads.
        assert!(reads < 60, "{reads} reads of the document while waiting out a dead lease");
    }

    #[tokio::test(start_paused = true)]
    async fn a_contender_sees_a_release_soon_after_a_long_hold() {
        // A hold of 20 s, renewed twice on the way: the contender takes the
        // lock within an eighth of its wait (or the renewals' quarter) of the
        // release, and reads the document far less than every 100 ms.
        let (waited, reads) = wait_for(tokio::time::sleep(Duration::from_secs(20))).await;
        assert!(waited >= Duration::from_secs(20) && waited <= Duration::from_millis(22_600), "{waited:?}");
        assert!(reads < 100, "{reads} reads; every 100 ms would be 200");
        // A short hold is seen within the doubling backoff's 100 ms.
        let (waited, _) = wait_for(tokio::time::sleep(Duration::from_millis(300))).await;
        assert!(waited <= Duration::from_millis(400), "{waited:?}");
    }

    #[tokio::test]
    async fn a_holder_whose_lease_was_taken_over_is_fenced() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let clock = Arc::new(ManualClock::new(0));
        let settings = LeaseSettings {
            lease: Duration::from_secs(2),
            renew_interval: Duration::from_millis(900),
            ..Default::default()
        };
        let a = lock(&store, "a", clock.clone(), settings.clone());
        let b = lock(&store, "b", clock.clone(), settings);
        let ga = a.acquire().await.unwrap();
        let fence = ga.fence();
        fence.check().await.unwrap();
        clock.advance(3_000); // a is frozen past its lease
        let gb = b.acquire().await.unwrap();
        let err = fence.check().await.unwrap_err();
        assert!(matches!(err, Error::LockLost { .. }) && err.to_string().contains("generation 2"), "{err}");
        assert!(matches!(ga.release().await, Err(Error::LockLost { .. })));
        assert!(!doc(&store).await.expired, "the stale holder's release changed nothing");
        gb.release().await.unwrap();
    }

    #[tokio::test]
    async fn a_check_near_the_end_of_the_lease_renews_it() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let clock = Arc::new(ManualClock::new(0));
        let settings = LeaseSettings { lease: Duration::from_secs(10), ..Default::default() };
        let a = lock(&store, "a", clock.clone(), settings);
        let g = a.acquire().await.unwrap();
        assert_eq!(doc(&store).await.valid_until, 10_000);
        clock.advance(6_000);
        g.fence().check().await.unwrap();
        assert_eq!(doc(&store).await.valid_until, 16_000, "renewed: less than half the lease was left");
        g.release().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn the_renewal_task_keeps_a_long_hold_alive() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let settings = LeaseSettings {
            lease: Duration::from_secs(3),
            renew_interval: Duration::from_secs(1),
            ..Default::default()
        };
        let clock = Arc::new(ManualClock::new(0));
        let a = lock(&store, "a", clock.clone(), settings);
        let g = a.acquire().await.unwrap();
        for _ in 0..10 {
            clock.advance(1_000);
            tokio::time::sleep(Duration::from_millis(1_000)).await;
        }
        let now = doc(&store).await;
        assert!(now.valid_until >= 10_000 + 2_000, "renewed as time went on: {now:?}");
        g.fence().check().await.unwrap();
        g.release().await.unwrap();
    }

    /// A store with quirks: with `unquoted_if_match` it answers every
    /// `If-Match` as Ceph RGW does (it compares the header with the
    /// unquoted ETag, so quoted ETags never match); the next
    /// `failing_gets` reads fail as a server error would.
    #[derive(Debug, Default)]
    struct Quirky {
        inner: InMemory,
        unquoted_if_match: bool,
        failing_gets: std::sync::atomic::AtomicUsize,
        /// The next this many puts are written and then answered with a
        /// server error (the answer lost), or, with `failed_puts_land`
        /// false, answered so without being written.
        failing_puts: std::sync::atomic::AtomicUsize,
        failed_puts_land: bool,
    }

    impl std::fmt::Display for Quirky {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Quirky")
        }
    }

    #[async_trait]
    impl ObjectStore for Quirky {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            opts: PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            let fail = self.failing_puts.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            if fail.is_ok() {
                if self.failed_puts_land {
                    self.inner.put_opts(location, payload, opts).await?;
                }
                return Err(object_store::Error::Generic {
                    store: "Quirky",
                    source: "500 Internal Server Error".into(),
                });
            }
            if !self.unquoted_if_match {
                return self.inner.put_opts(location, payload, opts).await;
            }
            if let PutMode::Update(v) = &opts.mode
                && v.e_tag.as_deref().is_some_and(|t| t.starts_with('"'))
            {
                return Err(object_store::Error::Precondition { path: location.to_string(), source: "".into() });
            }
            let mut r = self.inner.put_opts(location, payload, opts).await?;
            r.e_tag = r.e_tag.map(|t| format!("\"{t}\""));
            Ok(r)
        }
        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }
        async fn get_opts(
            &self,
            location: &Path,
            options: object_store::GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            let fail = self.failing_gets.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            if fail.is_ok() {
                return Err(object_store::Error::Generic { store: "Quirky", source: "503 Slow Down".into() });
            }
            let mut r = self.inner.get_opts(location, options).await?;
            if self.unquoted_if_match {
                r.meta.e_tag = r.meta.e_tag.map(|t| format!("\"{t}\""));
            }
            Ok(r)
        }
        fn delete_stream(
            &self,
            locations: futures::stream::BoxStream<'static, object_store::Result<Path>>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<Path>> {
            self.inner.delete_stream(locations)
        }
        fn list(
            &self,
            prefix: Option<&Path>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
            self.inner.list(prefix)
        }
        async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<object_store::ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }
        async fn copy_opts(
            &self,
            from: &Path,
            to: &Path,
            options: object_store::CopyOptions,
        ) -> object_store::Result<()> {
            self.inner.copy_opts(from, to, options).await
        }
    }

    #[tokio::test]
    async fn a_store_that_wants_unquoted_etags_is_answered_so() {
        let store: Arc<dyn ObjectStore> = Arc::new(Quirky { unquoted_if_match: true, ..Default::default() });
        let clock = Arc::new(ManualClock::new(0));
        let a = lock(&store, "a", clock.clone(), LeaseSettings::default());
        for t in 0..3 {
            let mut g = a.acquire().await.unwrap();
            g.set_last_issued(t);
            g.release().await.unwrap();
        }
        let now = doc(&store).await;
        assert!(now.expired && now.generation == 3 && now.last_issued == Some(2), "{now:?}");
    }
    #[tokio::test(start_paused = true)]
    async fn a_failed_lock_write_is_resolved_by_reading_the_document_at_once() {
        // Written, but answered with a server error (as Ceph RGW answers
        // some of two racing writes): the document read back shows the
        // write landed, and the take and the release end without a pause.
        let quirky = Arc::new(Quirky { failed_puts_land: true, ..Default::default() });
        let store: Arc<dyn ObjectStore> = quirky.clone();
        let clock: Arc<dyn Clock> = Arc::new(TokioClock(tokio::time::Instant::now()));
        let a = lock(&store, "a", clock.clone(), LeaseSettings::default());
        let started = tokio::time::Instant::now();
        quirky.failing_puts.store(1, Ordering::SeqCst);
        let mut g = a.acquire().await.unwrap();
        g.set_last_issued(7);
        quirky.failing_puts.store(1, Ordering::SeqCst);
        g.release().await.unwrap();
        assert_eq!(started.elapsed(), Duration::ZERO, "no pause: each write was known to have landed");
        let now = doc(&store).await;
        assert!(now.expired && now.generation == 1 && now.last_issued == Some(7), "{now:?}");
        // Not written: the document is unchanged, so the same write goes
        // again after a pause, and lands.
        let quirky = Arc::new(Quirky::default());
        let store: Arc<dyn ObjectStore> = quirky.clone();
        let b = lock(&store, "b", clock, LeaseSettings::default());
        b.acquire().await.unwrap().release().await.unwrap();
        quirky.failing_puts.store(2, Ordering::SeqCst);
        let started = tokio::time::Instant::now();
        b.acquire().await.unwrap().release().await.unwrap();
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(250) && waited < Duration::from_secs(1), "{waited:?}");
        assert_eq!(doc(&store).await.generation, 2);
        // Nor when the document is still to be created.
        let quirky = Arc::new(Quirky::default());
        let store: Arc<dyn ObjectStore> = quirky.clone();
        let c = lock(&store, "c", Arc::new(TokioClock(tokio::time::Instant::now())), LeaseSettings::default());
        quirky.failing_puts.store(1, Ordering::SeqCst);
        let started = tokio::time::Instant::now();
        c.acquire().await.unwrap().release().await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_millis(50), "the create went again after one pause");
        assert_eq!(doc(&store).await.generation, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_goes_on_through_failed_reads() {
        let quirky = Arc::new(Quirky::default());
        let store: Arc<dyn ObjectStore> = quirky.clone();
        let clock: Arc<dyn Clock> = Arc::new(TokioClock(tokio::time::Instant::now()));
        let short = LeaseSettings { acquire_timeout: Duration::from_secs(1), ..Default::default() };
        let a = lock(&store, "a", clock.clone(), LeaseSettings::default());
        let b = lock(&store, "b", clock.clone(), LeaseSettings::default());
        let held = a.acquire().await.unwrap();
        quirky.failing_gets.store(5, Ordering::SeqCst);
        let (_, taken) = tokio::join!(
            async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                held.release().await.unwrap();
            },
            b.acquire()
        );
        let held = taken.expect("five failed reads in a wait do not end it");
        assert_eq!(quirky.failing_gets.load(Ordering::SeqCst), 0);
        // Every read failing: the timeout ends the wait with the store's
        // error, which says the store is unavailable.
        quirky.failing_gets.store(usize::MAX, Ordering::SeqCst);
        let err = lock(&store, "c", clock, short).acquire().await.err().expect("no read succeeds");
        assert!(matches!(err, Error::Store { .. }) && err.kind() == ErrorKind::Unavailable, "{err}");
        quirky.failing_gets.store(0, Ordering::SeqCst);
        held.release().await.unwrap();
    }
}
