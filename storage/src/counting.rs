//! [`CountingStore`]: counts the requests made through a store, by kind,
//! so that what an operation costs on an object store (where requests are
//! billed and each one is a round trip) can be shown and checked. A
//! metered one ([`CountingStore::metered`]) also records every request and
//! every failed one through the metrics facade ([`crate::metrics`]).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::sync::Arc;
//! use object_store::{ObjectStore, ObjectStoreExt, memory::InMemory, path::Path};
//! use tributary_storage::{CountingStore, Requests};
//!
//! let store = Arc::new(CountingStore::new(Arc::new(InMemory::new())));
//! store.put(&Path::from("a"), b"x".to_vec().into()).await.unwrap();
//! store.head(&Path::from("a")).await.unwrap();
//! assert_eq!(store.take(), Requests { puts: 1, heads: 1, ..Requests::default() });
//! // A read of several ranges counts a GET for each.
//! store.get_ranges(&Path::from("a"), &[0..1, 0..1]).await.unwrap();
//! assert_eq!((store.take(), store.bytes_read()), (Requests { gets: 2, ..Requests::default() }, 2));
//! # }
//! ```

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult,
};

/// Requests counted by a [`CountingStore`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Requests {
    /// GETs (whole objects or ranges).
    pub gets: usize,
    /// HEADs.
    pub heads: usize,
    /// Listings, recursive or by delimiter (one per call; a store may page).
    pub lists: usize,
    /// Puts, single or multipart (one per upload), and copies.
    pub puts: usize,
    /// Deletes, one per object.
    pub deletes: usize,
}

impl Requests {
    /// Every request, of any kind.
    pub fn total(&self) -> usize {
        self.gets + self.heads + self.lists + self.puts + self.deletes
    }
}

impl fmt::Display for Requests {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { gets, heads, lists, puts, deletes } = self;
        write!(f, "{puts} PUT, {gets} GET, {heads} HEAD, {lists} LIST, {deletes} DELETE")
    }
}

impl std::ops::Add for Requests {
    type Output = Requests;
    fn add(self, o: Requests) -> Requests {
        Requests {
            gets: self.gets + o.gets,
            heads: self.heads + o.heads,
            lists: self.lists + o.lists,
            puts: self.puts + o.puts,
            deletes: self.deletes + o.deletes,
        }
    }
}

impl std::ops::Sub for Requests {
    type Output = Requests;
    fn sub(self, o: Requests) -> Requests {
        Requests {
            gets: self.gets - o.gets,
            heads: self.heads - o.heads,
            lists: self.lists - o.lists,
            puts: self.puts - o.puts,
            deletes: self.deletes - o.deletes,
        }
    }
}

/// Passes every operation to the inner store, counting it.
#[derive(Debug)]
pub struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    counts: Arc<Tally>,
    /// The bytes of object data the GETs asked for.
    bytes: AtomicU64,
}

const GET: usize = 0;
const HEAD: usize = 1;
const LIST: usize = 2;
const PUT: usize = 3;
const DELETE: usize = 4;
/// The `kind` label of each request kind, by index.
const KINDS: [&str; 5] = ["get", "head", "list", "put", "delete"];

/// The counts by kind, and the metrics they are also recorded to.
#[derive(Debug, Default)]
struct Tally {
    counts: [AtomicUsize; 5],
    /// Requests and failed requests by kind; `None` when not metered.
    meters: Option<[(metrics::Counter, metrics::Counter); 5]>,
}

impl Tally {
    fn add(&self, kind: usize) {
        self.counts[kind].fetch_add(1, Ordering::Relaxed);
        if let Some(m) = &self.meters {
            m[kind].0.increment(1);
        }
    }

    /// Records a failed request. A missing object or a create that finds
    /// one are answers, not failures.
    fn failed(&self, kind: usize, e: &object_store::Error) {
        if let Some(m) = &self.meters
            && !matches!(
                e,
                object_store::Error::NotFound { .. }
                    | object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. }
                    | object_store::Error::NotModified { .. }
            )
        {
            m[kind].1.increment(1);
        }
    }

    /// Passes `r` on, recording it as failed when it is an error.
    fn check<T>(&self, kind: usize, r: object_store::Result<T>) -> object_store::Result<T> {
        if let Err(e) = &r {
            self.failed(kind, e);
        }
        r
    }
}

impl CountingStore {
    /// Counts the requests made to `inner`.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self { inner, counts: Arc::new(Tally::default()), bytes: AtomicU64::new(0) }
    }

    /// Counts the requests made to `inner`, and records them (and the
    /// failed ones) as [`STORE_REQUESTS`](crate::metrics::STORE_REQUESTS)
    /// and [`STORE_FAILURES`](crate::metrics::STORE_FAILURES) of table
    /// `table`, to the metrics recorder installed when this is called.
    pub fn metered(inner: Arc<dyn ObjectStore>, table: &str) -> Self {
        let meter = |name: &'static str, kind: &'static str| metrics::counter!(name, "table" => table.to_string(), "kind" => kind);
        let meters =
            KINDS.map(|k| (meter(crate::metrics::STORE_REQUESTS, k), meter(crate::metrics::STORE_FAILURES, k)));
        let counts = Tally { meters: Some(meters), ..Tally::default() };
        Self { inner, counts: Arc::new(counts), bytes: AtomicU64::new(0) }
    }

    fn add(&self, kind: usize) {
        self.counts.add(kind);
    }

    fn read(&self, f: impl Fn(&AtomicUsize) -> usize) -> Requests {
        let c = &self.counts.counts;
        Requests { gets: f(&c[GET]), heads: f(&c[HEAD]), lists: f(&c[LIST]), puts: f(&c[PUT]), deletes: f(&c[DELETE]) }
    }

    /// The requests counted so far.
    pub fn requests(&self) -> Requests {
        self.read(|c| c.load(Ordering::Relaxed))
    }

    /// The requests counted since the last call (or since creation).
    pub fn take(&self) -> Requests {
        self.read(|c| c.swap(0, Ordering::Relaxed))
    }

    /// The bytes of object data the GETs answered so far (the ranges
    /// asked for, not the headers or listings), for what a read fetches.
    pub fn bytes_read(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.add(PUT);
        self.counts.check(PUT, self.inner.put_opts(location, payload, opts).await)
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.add(PUT);
        self.counts.check(PUT, self.inner.put_multipart_opts(location, opts).await)
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        let head = options.head;
        let kind = if head { HEAD } else { GET };
        self.add(kind);
        let got = self.counts.check(kind, self.inner.get_opts(location, options).await)?;
        if !head {
            self.bytes.fetch_add(got.range.end - got.range.start, Ordering::Relaxed);
        }
        Ok(got)
    }
    /// Passed on whole, so that the store below answers it as one request
    /// where it can (a local folder reads small ranges on the calling
    /// thread); counted as one GET per range, the most its default would
    /// make.
    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[std::ops::Range<u64>],
    ) -> object_store::Result<Vec<bytes::Bytes>> {
        for _ in ranges {
            self.add(GET);
        }
        let got = self.counts.check(GET, self.inner.get_ranges(location, ranges).await)?;
        let read: u64 = got.iter().map(|b| b.len() as u64).sum();
        self.bytes.fetch_add(read, Ordering::Relaxed);
        Ok(got)
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let counts = self.counts.clone();
        let counted = locations.inspect(move |l| {
            if l.is_ok() {
                counts.add(DELETE);
            }
        });
        let counts = self.counts.clone();
        self.inner
            .delete_stream(counted.boxed())
            .inspect(move |r| {
                if let Err(e) = r {
                    counts.failed(DELETE, e);
                }
            })
            .boxed()
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.add(LIST);
        let counts = self.counts.clone();
        self.inner
            .list(prefix)
            .inspect(move |r| {
                if let Err(e) = r {
                    counts.failed(LIST, e);
                }
            })
            .boxed()
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.add(LIST);
        self.counts.check(LIST, self.inner.list_with_delimiter(prefix).await)
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        self.add(PUT);
        self.counts.check(PUT, self.inner.copy_opts(from, to, options).await)
    }
}
