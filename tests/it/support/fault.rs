//! Fault-injecting stores: wrappers over a table's `ObjectStore` that make
//! chosen puts fail, stall, or succeed while reporting a failure, to test
//! crashes between the steps of a protocol and answers lost on the network.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult,
};

/// What happens to a put a [`FaultStore`] picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// It fails without writing, as if the process died just before it or
    /// the store refused it.
    Fail,
    /// It waits this long, then goes through.
    Slow(Duration),
    /// It is written, then reported as failed: the answer was lost (a
    /// timeout, a reset connection, a 5xx after the write).
    LostAnswer,
}

type Pick = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// A store whose puts to paths that a predicate picks meet a [`Fault`]:
/// every one of them ([`FaultStore::new`]), or only the first
/// ([`FaultStore::once`]); every other operation goes to the inner store.
pub struct FaultStore {
    inner: Arc<dyn ObjectStore>,
    what: &'static str,
    fault: Fault,
    picks: Pick,
    /// How many more picked puts meet the fault; `usize::MAX` for all.
    left: AtomicUsize,
    /// The paths of the puts that met it.
    hit: Mutex<Vec<String>>,
    /// With [`FaultStore::crash_after`], the writes (puts, deletes,
    /// copies) left before the process dies; every later one fails.
    writes_left: Option<Arc<AtomicUsize>>,
}

/// The name the crash tests know a [`FaultStore`] by: puts that fail.
pub type FailPuts = FaultStore;

impl FaultStore {
    /// Fails the puts whose path `fails` picks, with `what` as the reason.
    pub fn new(
        inner: Arc<dyn ObjectStore>,
        what: &'static str,
        fails: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self::with(inner, what, Fault::Fail, usize::MAX, fails)
    }

    /// Meets the first put whose path `picks` picks with `fault`.
    pub fn once(
        inner: Arc<dyn ObjectStore>,
        fault: Fault,
        picks: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self::with(inner, "injected fault", fault, 1, picks)
    }

    fn with(
        inner: Arc<dyn ObjectStore>,
        what: &'static str,
        fault: Fault,
        times: usize,
        picks: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self {
            inner,
            what,
            fault,
            picks: Box::new(picks),
            left: AtomicUsize::new(times),
            hit: Mutex::new(Vec::new()),
            writes_left: None,
        }
    }

    /// A process that dies after `writes` writes (puts, deletes, copies):
    /// every later write fails, reads go on.
    pub fn crash_after(inner: Arc<dyn ObjectStore>, writes: usize) -> Self {
        Self { writes_left: Some(Arc::new(AtomicUsize::new(writes))), ..Self::new(inner, "crashed", |_| false) }
    }

    /// Whether this write finds the process dead (and counts it).
    fn dead(&self) -> bool {
        self.writes_left
            .as_ref()
            .is_some_and(|w| w.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_err())
    }

    /// A compactor that dies after writing its base files, before its
    /// completed `<C>_<c>.commit` is created.
    pub fn before_commit(inner: Arc<dyn ObjectStore>) -> Self {
        Self::new(inner, "killed before commit", |p| p.ends_with(".commit"))
    }

    /// The paths of the puts that met the fault.
    pub fn hit(&self) -> Vec<String> {
        self.hit.lock().unwrap().clone()
    }

    /// The fault this put meets, if any (and counts it).
    fn meets(&self, location: &Path) -> Option<Fault> {
        if !(self.picks)(location.as_ref()) {
            return None;
        }
        self.left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).ok()?;
        self.hit.lock().unwrap().push(location.to_string());
        Some(self.fault)
    }

    fn error(&self) -> object_store::Error {
        object_store::Error::Generic { store: "fault", source: self.what.into() }
    }
}

impl std::fmt::Debug for FaultStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FaultStore({}, {:?}, {:?})", self.inner, self.fault, self.what)
    }
}

impl std::fmt::Display for FaultStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FaultStore({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for FaultStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if self.dead() {
            return Err(self.error());
        }
        match self.meets(location) {
            None => self.inner.put_opts(location, payload, opts).await,
            Some(Fault::Fail) => Err(self.error()),
            Some(Fault::Slow(d)) => {
                tokio::time::sleep(d).await;
                self.inner.put_opts(location, payload, opts).await
            }
            Some(Fault::LostAnswer) => {
                self.inner.put_opts(location, payload, opts).await?;
                Err(self.error())
            }
        }
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        if self.dead() {
            return Err(self.error());
        }
        match self.meets(location) {
            Some(Fault::Fail) => Err(self.error()),
            Some(Fault::Slow(d)) => {
                tokio::time::sleep(d).await;
                self.inner.put_multipart_opts(location, opts).await
            }
            // A multipart upload's answer comes at its completion, which
            // this wrapper does not see: it goes through.
            None | Some(Fault::LostAnswer) => self.inner.put_multipart_opts(location, opts).await,
        }
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        use futures::StreamExt;
        use object_store::ObjectStoreExt;
        let Some(left) = self.writes_left.clone() else { return self.inner.delete_stream(locations) };
        // Each delete counts as a write; once the process is dead, the
        // rest fail without reaching the store.
        let inner = self.inner.clone();
        locations
            .then(move |location| {
                let (inner, left) = (inner.clone(), left.clone());
                async move {
                    let path = location?;
                    if left.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_err() {
                        return Err(object_store::Error::Generic { store: "fault", source: "crashed".into() });
                    }
                    inner.delete(&path).await.map(|()| path)
                }
            })
            .boxed()
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        if self.dead() {
            return Err(self.error());
        }
        self.inner.copy_opts(from, to, options).await
    }
}
