//! Where a test's tables live: one test set, run on the local file system
//! or on S3.
//!
//! By default a [`Place`] is a fresh local temporary folder, as the tests
//! always had. With `TRIBUTARY_TEST_STORE=s3` its tables live under a fresh
//! prefix of `$TRIBUTARY_TEST_S3` (`s3://bucket[/prefix]`, reached through
//! the `AWS_*` variables, as `.ci/s3.sh` writes them):
//! `<TRIBUTARY_TEST_S3>/<run>/<test>-<n>/<table>`. Either way the place owns
//! a local scratch folder for schemas, inputs and other files that are not
//! the table's. A [`TableUri`] is one table of a place: its URI for the CLI
//! and [`tributary::Table::builder_uri`], and its objects listed, read
//! and written through the object store, so a test inspects and
//! damages a table in the same way on every store.

use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tributary::{Table, TableBuilder, TableSettings};
use tributary_timeline::{Clock, FileLock, SystemClock, TableLocation};

use super::require;

/// The store a test run's tables live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// A local folder (the default).
    Local,
    /// A prefix under `$TRIBUTARY_TEST_S3` (`TRIBUTARY_TEST_STORE=s3`).
    S3,
}

/// The store `TRIBUTARY_TEST_STORE` names: unset, empty or `local` for
/// [`Store::Local`], `s3` for [`Store::S3`].
pub fn store() -> Store {
    match std::env::var("TRIBUTARY_TEST_STORE").as_deref() {
        Err(_) | Ok("" | "local") => Store::Local,
        Ok("s3") => Store::S3,
        Ok(other) => panic!("TRIBUTARY_TEST_STORE=`{other}`: expected `local` or `s3`"),
    }
}

/// One test's places for tables, and its local scratch folder.
pub struct Place {
    scratch: tempfile::TempDir,
    /// Tables go under this URI: the scratch folder, or an S3 prefix.
    base: String,
    store: Store,
}

impl Place {
    /// A fresh place on the store `TRIBUTARY_TEST_STORE` names. On S3
    /// without `TRIBUTARY_TEST_S3`: `None` and a SKIP line, or a failure
    /// under `CI` (see [`require`]).
    #[must_use = "return from the test when the store is missing"]
    pub fn new() -> Option<Place> {
        Self::on(store())
    }

    /// A fresh place on `store`, whatever `TRIBUTARY_TEST_STORE` says: for
    /// the tests of object stores themselves ([`Place::new`] for the rest).
    #[must_use = "return from the test when the store is missing"]
    pub fn on(store: Store) -> Option<Place> {
        let scratch = tempfile::tempdir().unwrap();
        let base = match store {
            Store::Local => scratch.path().to_str().unwrap().to_string(),
            Store::S3 => {
                let root = std::env::var("TRIBUTARY_TEST_S3").ok().filter(|r| !r.is_empty());
                let what = "an S3 server for TRIBUTARY_TEST_STORE=s3 (TRIBUTARY_TEST_S3)";
                let root = require(what, "source the env file of `.ci/s3.sh start <dir>`", root)?;
                assert!(root.starts_with("s3://"), "TRIBUTARY_TEST_S3=`{root}`: expected s3://bucket[/prefix]");
                format!("{}/{}/{}", root.trim_end_matches('/'), run_id(), test_name())
            }
        };
        Some(Place { scratch, base, store })
    }

    /// The local scratch folder: schemas, inputs, outputs of the test.
    pub fn scratch(&self) -> &Path {
        self.scratch.path()
    }

    /// The table named `name` in this place (created or not).
    pub fn table(&self, name: &str) -> TableUri {
        TableUri::parse(&format!("{}/{name}", self.base))
    }

    /// Names of every object under this place (its tables, and on a local
    /// store the scratch files too) that satisfy `pred`, sorted.
    pub fn file_names(&self, pred: impl Fn(&str) -> bool) -> Vec<String> {
        TableUri::parse(&self.base).file_names(pred)
    }

    /// `tributary init` of a trips table named `name` (see
    /// [`super::init_trips_at`]).
    pub fn init_trips(&self, name: &str, extra: &[&str]) -> TableUri {
        let table = self.table(name);
        super::init_trips_at(self.scratch(), table.uri(), extra);
        table
    }
}

/// On S3, a passing test leaves nothing behind; a failing one keeps its
/// tables for a post-mortem and says where.
impl Drop for Place {
    fn drop(&mut self) {
        if self.store != Store::S3 {
            return;
        }
        if std::thread::panicking() {
            eprintln!("the failed test's tables are kept at {}", self.base);
            return;
        }
        let all = TableUri::parse(&self.base);
        let (store, root) = (all.loc.store.clone(), all.loc.root.clone());
        block_on(async move {
            let listed = store.list(Some(&root)).map_ok(|m| m.location).boxed();
            let _: Vec<StorePath> = store.delete_stream(listed).try_collect().await.unwrap();
        });
    }
}

/// This run's id: one prefix per test process, so runs never meet.
fn run_id() -> &'static str {
    static RUN: OnceLock<String> = OnceLock::new();
    RUN.get_or_init(|| format!("run-{}-{}", SystemClock.now_millis(), std::process::id()))
}

/// `<test>-<n>`: the test's name (the test thread's, `::` as `.`) and a
/// number unique in the run.
fn test_name() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let thread = std::thread::current();
    let name = thread.name().filter(|n| *n != "main").unwrap_or("test").replace("::", ".");
    format!("{name}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Runs `f` to completion on the helpers' own runtime, from sync or async
/// code alike: the calling thread waits (a worker of the test's runtime, if
/// called from one), and nothing of the test's runtime runs `f`, so the
/// helpers' store clients never outlive the runtime they were used on.
fn block_on<F>(f: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let rt = RUNTIME
        .get_or_init(|| tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(async move {
        let _ = tx.send(f.await);
    });
    rx.recv().expect("the helper task panicked")
}

/// One table of a [`Place`]: its URI, and its objects through the store.
/// Paths given to and returned by its methods are relative to the table
/// root, slash-separated (`.hoodie/timeline`, `city=oslo/x.parquet`).
#[derive(Clone)]
pub struct TableUri {
    uri: String,
    /// Used on the helpers' runtime only.
    loc: TableLocation,
}

impl std::fmt::Debug for TableUri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.uri)
    }
}

/// A table reads as its URI where a path or URI is taken
/// ([`super::assert_same_rows`], ...).
impl AsRef<std::ffi::OsStr> for TableUri {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.uri.as_ref()
    }
}

impl TableUri {
    /// The table at `uri` (a local folder or `s3://...`).
    pub fn parse(uri: &str) -> Self {
        Self { uri: uri.to_string(), loc: tributary_timeline::parse_location(uri).unwrap() }
    }

    /// The URI: what the CLI and [`Table::builder_uri`] take.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// A location of the table for the test's own runtime.
    pub fn location(&self) -> TableLocation {
        tributary_timeline::parse_location(&self.uri).unwrap()
    }

    /// `Table::builder_uri` of this table.
    pub fn builder(&self) -> TableBuilder {
        Table::builder_uri(&self.uri)
    }

    /// A builder of this table through the store `wrap` makes of the
    /// table's (a fault-injecting one, say), with `settings` and the lock the
    /// table's other processes use: on a local folder the table's OS file
    /// lock (a wrapped store has no folder to take it on) and a lock of this
    /// process for compactions; on S3 the default leases, in the wrapped store.
    pub fn builder_through(
        &self,
        wrap: impl FnOnce(Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore>,
        settings: TableSettings,
    ) -> TableBuilder {
        let healthy = self.location();
        let wrapped = TableLocation::new(wrap(healthy.store.clone()), healthy.root.clone());
        match healthy.local_folder() {
            Some(dir) => Table::builder(wrapped)
                .with_settings(TableSettings { lock: tributary::LockKind::InProcess, ..settings })
                .with_lock(Arc::new(FileLock::at(tributary_timeline::local_instant_lock_file(dir)))),
            None => Table::builder(wrapped).with_settings(settings),
        }
    }

    /// Relative paths of the objects under `prefix` (relative; `""` for the
    /// whole table), sorted; none when there are none.
    pub fn list(&self, prefix: &str) -> Vec<String> {
        let loc = self.loc.clone();
        let prefix = loc.join(prefix);
        let mut out = block_on(async move {
            let listed: Vec<_> = loc.store.list(Some(&prefix)).try_collect().await.unwrap();
            listed.iter().map(|m| loc.relative(&m.location)).collect::<Vec<String>>()
        });
        out.sort();
        out
    }

    /// Relative paths of the table's objects whose file name satisfies
    /// `pred`, sorted.
    pub fn file_paths(&self, pred: impl Fn(&str) -> bool) -> Vec<String> {
        self.list("").into_iter().filter(|p| pred(file_name(p))).collect()
    }

    /// File names of the table's objects that satisfy `pred`, sorted.
    pub fn file_names(&self, pred: impl Fn(&str) -> bool) -> Vec<String> {
        let mut out: Vec<String> =
            self.list("").iter().map(|p| file_name(p)).filter(|n| pred(n)).map(String::from).collect();
        out.sort();
        out
    }

    /// File names of the objects under `prefix` that satisfy `pred`, sorted.
    pub fn file_names_under(&self, prefix: &str, pred: impl Fn(&str) -> bool) -> Vec<String> {
        let mut out: Vec<String> =
            self.list(prefix).iter().map(|p| file_name(p)).filter(|n| pred(n)).map(String::from).collect();
        out.sort();
        out
    }

    /// The object at `path`, or `None` when there is none.
    pub fn get(&self, path: &str) -> Option<Bytes> {
        let (store, path) = (self.loc.store.clone(), self.loc.join(path));
        block_on(async move {
            match store.get(&path).await {
                Ok(got) => Some(got.bytes().await.unwrap()),
                Err(object_store::Error::NotFound { .. }) => None,
                Err(e) => panic!("get {path}: {e}"),
            }
        })
    }

    /// The object at `path`, which must exist.
    pub fn read(&self, path: &str) -> Bytes {
        self.get(path).unwrap_or_else(|| panic!("{self:?}: no object {path}"))
    }

    /// Whether an object is at `path`.
    pub fn exists(&self, path: &str) -> bool {
        let (store, path) = (self.loc.store.clone(), self.loc.join(path));
        block_on(async move {
            match store.head(&path).await {
                Ok(_) => true,
                Err(object_store::Error::NotFound { .. }) => false,
                Err(e) => panic!("head {path}: {e}"),
            }
        })
    }

    /// Writes `bytes` to `path`, replacing any object there.
    pub fn put(&self, path: &str, bytes: impl Into<Bytes>) {
        let (store, path, bytes) = (self.loc.store.clone(), self.loc.join(path), bytes.into());
        block_on(async move { store.put(&path, PutPayload::from(bytes)).await.unwrap() });
    }

    /// Copies every object of this table to the table `to` (whose store
    /// may be another), object by object.
    pub fn copy_to(&self, to: &TableUri) {
        for path in self.list("") {
            to.put(&path, self.read(&path));
        }
    }
}

/// The last segment of a slash-separated path.
fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
