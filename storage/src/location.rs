//! Where a table lives: a store and a root path, named by a URI.
//!
//! [`TableLocation::parse`] takes what a user types: a local path,
//! `file://`, `memory://`, `s3://`, `gs://` or `az://` (and the other
//! spellings [`object_store::ObjectStoreScheme`] knows). Cloud stores read
//! the usual environment variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`) and
//! then the options given, which use the store builders' own keys
//! (`endpoint`, `region`, `access_key_id`, `allow_http`, ...). Every store
//! goes through [`object_store`]; the one local special case is that a
//! local folder is written through [`DurableLocalStore`], which fsyncs.
//!
//! Object stores retry throttling, server errors and timeouts themselves,
//! with bounded exponential backoff ([`RETRY`]), so a bad endpoint fails
//! within a bounded time instead of hanging.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutMode, PutPayload};

use crate::error::{Error, Result};
use crate::store::{DurableLocalStore, LocalTidy};

/// How object stores built from a URI retry throttling (429), server errors
/// (5xx) and timeouts: backoff from 100 ms doubling to at most 4 s, at most
/// 8 retries, and never past 30 s from the first attempt. The options
/// `retry_max` (a count) and `retry_timeout` (a duration such as `10s`)
/// change the last two.
pub const RETRY: RetryPolicy = RetryPolicy { max_retries: 8, timeout: Duration::from_secs(30) };

/// Bounds on an object store's retries; see [`RETRY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub max_retries: usize,
    /// No retry starts later than this after the first attempt.
    pub timeout: Duration,
}

impl RetryPolicy {
    #[cfg(feature = "cloud")]
    fn config(self) -> object_store::RetryConfig {
        object_store::RetryConfig {
            backoff: object_store::BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(4),
                base: 2.0,
            },
            max_retries: self.max_retries,
            retry_timeout: self.timeout,
        }
    }
}

/// `base` extended by the slash-separated segments of `relative`.
pub fn join_relative(base: &Path, relative: &str) -> Path {
    relative.split('/').filter(|s| !s.is_empty()).fold(base.clone(), |p, part| p.join(part))
}

/// The path of file `name` of `partition` relative to the table root:
/// `<partition>/<name>`, or `<name>` when the table is unpartitioned.
pub fn partition_file(partition: &str, name: &str) -> String {
    if partition.is_empty() { name.to_string() } else { format!("{partition}/{name}") }
}

/// Deletes an object; one already gone counts as deleted.
pub async fn delete_if_exists(loc: &TableLocation, path: &Path) -> Result<()> {
    delete_object_if_exists(loc.store.as_ref(), path).await
}

/// Deletes the objects at `paths` through the store's batched deletes (on
/// S3 a request per thousand, locally ten at once), in no particular order;
/// those already gone count as deleted. A caller that needs one set gone
/// before another calls this once for each.
pub async fn delete_all_if_exist(loc: &TableLocation, paths: impl IntoIterator<Item = Path>) -> Result<()> {
    use futures::StreamExt;
    let paths: Vec<Path> = paths.into_iter().collect();
    let Some(first) = paths.first() else { return Ok(()) };
    // The store's error names the file that failed.
    let what = format!("{first} and {} more files", paths.len() - 1);
    let mut deleted = loc.store.delete_stream(futures::stream::iter(paths.into_iter().map(Ok)).boxed());
    while let Some(d) = deleted.next().await {
        match d {
            Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(Error::store("delete", &what, e)),
        }
    }
    Ok(())
}

/// Deletes the object at `path` in `store`; one already gone counts as
/// deleted. [`delete_if_exists`] for a caller that holds a store, not a
/// table location.
pub(crate) async fn delete_object_if_exists(store: &dyn ObjectStore, path: &Path) -> Result<()> {
    match store.delete(path).await {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(Error::store("delete", path, e)),
    }
}

/// A table's store and root path.
///
/// Build one from a URI with [`TableLocation::parse`], from a local folder
/// with [`TableLocation::local`], or from any store with
/// [`TableLocation::new`].
///
/// ```
/// use tributary_storage::{LocalTidy, TableLocation};
///
/// let local = TableLocation::parse("/data/lake/trips", LocalTidy::NONE)?;
/// assert_eq!(local.root.as_ref(), "data/lake/trips");
/// assert!(local.local_folder().is_some());
///
/// let s3 = TableLocation::parse_with(
///     "s3://lake/warehouse/trips",
///     [("endpoint", "http://127.0.0.1:9000"), ("region", "us-east-1"), ("allow_http", "true")],
///     LocalTidy::NONE,
/// )?;
/// assert_eq!(s3.to_string(), "s3://lake/warehouse/trips");
/// assert_eq!(s3.root.as_ref(), "warehouse/trips");
///
/// let err = TableLocation::parse("ftp://host/trips", LocalTidy::NONE).unwrap_err().to_string();
/// assert!(err.contains("ftp://host/trips") && err.contains("scheme"), "{err}");
/// # Ok::<(), tributary_storage::Error>(())
/// ```
#[derive(Clone)]
pub struct TableLocation {
    /// The store holding the table.
    pub store: Arc<dyn ObjectStore>,
    /// The table's base path inside the store.
    pub root: Path,
    /// How the location reads in messages; `None` for `<store>/<root>`.
    label: Option<Arc<str>>,
    /// The folder, for a table in a local folder written durably.
    local: Option<Arc<std::path::Path>>,
    /// Parsed forms of objects, shared by every clone
    /// ([`TableLocation::remember`]).
    memo: Arc<Memo>,
}

/// Values kept by key for a location and its clones.
#[derive(Default)]
struct Memo(std::sync::Mutex<std::collections::HashMap<String, Arc<dyn std::any::Any + Send + Sync>>>);

impl fmt::Debug for TableLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TableLocation({self})")
    }
}

/// A table reads as its URI (a local one as its folder); one built from a
/// store as `<store>/<root>`.
impl fmt::Display for TableLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.label {
            Some(label) => f.write_str(label),
            None => write!(f, "{}/{}", self.store, self.root),
        }
    }
}

/// The one `memory://` store of this process, so that every location
/// parsed from a `memory://` URI sees the same objects.
fn process_memory() -> Arc<dyn ObjectStore> {
    static MEMORY: OnceLock<Arc<dyn ObjectStore>> = OnceLock::new();
    MEMORY.get_or_init(|| Arc::new(object_store::memory::InMemory::new())).clone()
}

impl TableLocation {
    /// A table in an arbitrary store.
    pub fn new(store: Arc<dyn ObjectStore>, root: Path) -> Self {
        Self { store, root, label: None, local: None, memo: Arc::default() }
    }

    /// A table in a local folder, written durably ([`DurableLocalStore`]),
    /// whose deletes tidy the folders `tidy` names. Folders are created as
    /// files are written. The location reads as the folder in messages.
    pub fn local(dir: impl Into<PathBuf>, tidy: LocalTidy) -> Result<Self> {
        let dir: PathBuf = dir.into();
        let dir = std::path::absolute(&dir).map_err(|e| Error::io("resolve table folder", &dir, e))?;
        let root = Path::from_absolute_path(&dir)
            .map_err(|e| Error::InvalidInput { what: dir.display().to_string(), reason: e.to_string() })?;
        let label = Some(Arc::from(dir.display().to_string()));
        let store = Arc::new(DurableLocalStore::with_tidy(tidy));
        Ok(Self { store, root, label, local: Some(Arc::from(dir.as_path())), memo: Arc::default() })
    }

    /// The table at `uri`, with its store configured from the environment
    /// alone; see [`TableLocation::parse_with`].
    pub fn parse(uri: &str, tidy: LocalTidy) -> Result<Self> {
        Self::parse_with(uri, std::iter::empty::<(&str, &str)>(), tidy)
    }

    /// The table at `uri`: a local path or `file://` URI (a local folder,
    /// see [`TableLocation::local`]), `memory://` (one store per process),
    /// or `s3://bucket/path`, `gs://bucket/path`, `az://container/path`
    /// (and the other spellings [`ObjectStoreScheme`] knows). A cloud
    /// store is configured from its environment variables, then from
    /// `options`, whose keys are the store builder's (`endpoint`, `region`,
    /// `access_key_id`, `secret_access_key`, `allow_http`, `timeout`, ...)
    /// plus `retry_max` and `retry_timeout` ([`RETRY`]). An unknown scheme
    /// or option key is an error naming it; nothing is contacted yet.
    // Without cloud stores the retry options are checked and go unused.
    #[cfg_attr(not(feature = "cloud"), allow(unused_variables, unused_assignments))]
    pub fn parse_with<I, K, V>(uri: &str, options: I, tidy: LocalTidy) -> Result<Self>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: Into<String>,
    {
        let invalid = |reason: String| Error::InvalidInput { what: format!("table URI `{uri}`"), reason };
        let url = match url::Url::parse(uri) {
            // A drive letter (`C:\...`) parses as a one-letter scheme.
            Ok(url) if url.scheme().len() > 1 => url,
            Ok(_) | Err(url::ParseError::RelativeUrlWithoutBase) => return Self::local(uri, tidy),
            Err(e) => return Err(invalid(e.to_string())),
        };
        let unknown_scheme = || {
            invalid(format!(
                "unknown scheme `{}`: expected a local path, file://, memory://, s3://, gs:// or az://",
                url.scheme()
            ))
        };
        let (scheme, root) = ObjectStoreScheme::parse(&url).map_err(|_| unknown_scheme())?;
        let mut retry = RETRY;
        let mut pairs = Vec::new();
        for (key, value) in options {
            let (key, value) = (key.as_ref().to_ascii_lowercase(), value.into());
            let bad = |reason: String| invalid(format!("option `{key}` = `{value}`: {reason}"));
            match key.as_str() {
                "retry_max" => retry.max_retries = value.parse().map_err(|e| bad(format!("{e}")))?,
                "retry_timeout" => {
                    retry.timeout = humantime::parse_duration(&value).map_err(|e| bad(format!("{e}")))?
                }
                _ => pairs.push((key, value)),
            }
        }
        let label = Some(Arc::from(uri.trim_end_matches('/')));
        let store: Arc<dyn ObjectStore> = match scheme {
            ObjectStoreScheme::Local => {
                let dir = url.to_file_path().map_err(|()| invalid("not a local file path".into()))?;
                if let Some((key, _)) = pairs.first() {
                    return Err(invalid(format!("option `{key}` does not apply to a local folder")));
                }
                return Self::local(dir, tidy);
            }
            ObjectStoreScheme::Memory => process_memory(),
            #[cfg(feature = "cloud")]
            ObjectStoreScheme::AmazonS3 => {
                let builder = object_store::aws::AmazonS3Builder::from_env().with_url(uri).with_retry(retry.config());
                let builder = configure(builder, &pairs, uri, |b, k, v| Ok(b.with_config(k.parse()?, v)))?;
                Arc::new(builder.build().map_err(|e| invalid(e.to_string()))?)
            }
            #[cfg(feature = "cloud")]
            ObjectStoreScheme::GoogleCloudStorage => {
                let builder =
                    object_store::gcp::GoogleCloudStorageBuilder::from_env().with_url(uri).with_retry(retry.config());
                let builder = configure(builder, &pairs, uri, |b, k, v| Ok(b.with_config(k.parse()?, v)))?;
                Arc::new(builder.build().map_err(|e| invalid(e.to_string()))?)
            }
            #[cfg(feature = "cloud")]
            ObjectStoreScheme::MicrosoftAzure => {
                let builder =
                    object_store::azure::MicrosoftAzureBuilder::from_env().with_url(uri).with_retry(retry.config());
                let builder = configure(builder, &pairs, uri, |b, k, v| Ok(b.with_config(k.parse()?, v)))?;
                Arc::new(builder.build().map_err(|e| invalid(e.to_string()))?)
            }
            #[cfg(not(feature = "cloud"))]
            ObjectStoreScheme::AmazonS3 | ObjectStoreScheme::GoogleCloudStorage | ObjectStoreScheme::MicrosoftAzure => {
                return Err(invalid(
                    "this build has no cloud stores (Tributary's `cloud` feature, on by default)".into(),
                ));
            }
            ObjectStoreScheme::Http => {
                return Err(invalid(
                    "plain HTTP stores have no conditional writes, which commits need; for an S3-compatible \
                     server use s3://bucket/path with the `endpoint` option (or AWS_ENDPOINT)"
                        .into(),
                ));
            }
            _ => return Err(unknown_scheme()),
        };
        Ok(Self { store, root, label, local: None, memo: Arc::default() })
    }

    /// The folder of a table in a local folder ([`TableLocation::local`]):
    /// what an OS file lock needs. `None` for any other store.
    pub fn local_folder(&self) -> Option<&std::path::Path> {
        self.local.as_deref()
    }

    /// The table's short name: its folder's name (the local folder's, else
    /// the root path's last segment), every character other than ASCII
    /// letters and digits made `_`. A new table is named so by default,
    /// and metrics label the table so ([`crate::metrics`]).
    pub fn name(&self) -> String {
        let last = match self.local_folder() {
            Some(p) => p.file_name().map(|s| s.to_string_lossy().into_owned()),
            None => self.root.filename().map(String::from),
        };
        last.unwrap_or_default().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
    }

    /// Keeps `value` under `key` for this location and every clone of it,
    /// replacing what was kept there: for the parsed form of objects that
    /// the caller can tell unchanged (a history snapshot, by its files),
    /// so that loading them again reads and parses nothing. A location
    /// made anew starts with nothing kept.
    pub fn remember<T: std::any::Any + Send + Sync>(&self, key: &str, value: Arc<T>) {
        self.memo.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key.to_string(), value);
    }

    /// What [`TableLocation::remember`] kept under `key`, if it is a `T`.
    pub fn recall<T: std::any::Any + Send + Sync>(&self, key: &str) -> Option<Arc<T>> {
        let kept = self.memo.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(key).cloned()?;
        kept.downcast::<T>().ok()
    }

    /// This location with its store wrapped in a metered
    /// [`CountingStore`](crate::CountingStore), recording the requests made
    /// through it under the table's [`name`](TableLocation::name).
    pub fn metered(mut self) -> Self {
        let name = self.name();
        self.store = Arc::new(crate::CountingStore::metered(self.store, &name));
        self
    }

    /// The path of `relative` (slash-separated) under the table root.
    pub fn join(&self, relative: &str) -> Path {
        join_relative(&self.root, relative)
    }

    /// `path` relative to the table root, slash-separated.
    pub fn relative(&self, path: &Path) -> String {
        // `Path::prefix_match` on the encoded text, joined again: the text
        // after the root and its delimiter.
        let (raw, root) = (path.as_ref(), self.root.as_ref());
        let rel = raw
            .strip_prefix(root)
            .and_then(|r| if r.is_empty() || root.is_empty() { Some(r) } else { r.strip_prefix('/') });
        rel.unwrap_or(raw).to_string()
    }

    /// Reads a whole object.
    pub async fn get(&self, path: &Path) -> Result<bytes::Bytes> {
        let got = self.store.get(path).await.map_err(|e| Error::store("get", path, e))?;
        got.bytes().await.map_err(|e| Error::store("get", path, e))
    }

    /// Writes `bytes` to `path`, replacing what is there: the same write
    /// again does no harm, so a failure that may be transient is retried a
    /// few times, with backoff, on top of the store's own retries.
    pub async fn put(&self, path: &Path, bytes: impl Into<bytes::Bytes>) -> Result<()> {
        let bytes: bytes::Bytes = bytes.into();
        retry_transient(path, "put", || {
            self.store.put_opts(path, PutPayload::from(bytes.clone()), PutMode::Overwrite.into())
        })
        .await
        .map(|_| ())
        .map_err(|e| Error::store("put", path, e))
    }

    /// Creates an object that must not exist yet, holding `bytes`.
    ///
    /// Idempotent: when the object is already there with exactly these
    /// bytes, the create counts as done. That is what a retry finds when an
    /// earlier attempt in fact succeeded but its answer was lost (a
    /// timeout, a connection reset, a 5xx after the write), so such a retry
    /// never turns into a failed commit or a second copy. A failure that may
    /// be transient is retried a few times, with backoff, on top of the
    /// store's own retries. [`Error::AlreadyExists`] means the object holds
    /// other bytes. The payload may come in pieces (a [`PutPayload`] of
    /// several buffers), written one after another.
    pub async fn create(&self, path: &Path, payload: impl Into<PutPayload>) -> Result<()> {
        let payload: PutPayload = payload.into();
        let put = || self.store.put_opts(path, payload.clone(), PutMode::Create.into());
        match retry_transient(path, "create", put).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => match self.get(path).await {
                Ok(existing) if holds(&existing, &payload) => Ok(()),
                Ok(_) => Err(Error::AlreadyExists { path: path.to_string() }),
                Err(e) => Err(e),
            },
            Err(e) => Err(Error::store("create", path, e)),
        }
    }
}

/// Whether `bytes` are exactly the payload's pieces, one after another.
fn holds(bytes: &[u8], payload: &PutPayload) -> bool {
    let mut rest = bytes;
    for piece in payload.iter() {
        match rest.strip_prefix(piece.as_ref()) {
            Some(r) => rest = r,
            None => return false,
        }
    }
    rest.is_empty()
}

/// Runs `op` until it succeeds, fails for good, or has failed transiently
/// ([`Error::is_transient`]) four times, with backoff from 50 ms.
async fn retry_transient<T, F, Fut>(path: &Path, what: &str, op: F) -> object_store::Result<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = object_store::Result<T>>,
{
    const ATTEMPTS: u32 = 4;
    let mut backoff = Duration::from_millis(50);
    let mut attempt = 1;
    loop {
        match op().await {
            Err(e) if attempt < ATTEMPTS && Error::is_transient(&e) => {
                tracing::warn!(path = %path, attempt, error = %e, "{what} failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff *= 4;
                attempt += 1;
            }
            result => return result,
        }
    }
}

/// Applies `pairs` to a store builder with `apply`, naming the URI and the
/// key of one the store does not know.
#[cfg(feature = "cloud")]
fn configure<B>(
    builder: B,
    pairs: &[(String, String)],
    uri: &str,
    apply: impl Fn(B, &str, &str) -> object_store::Result<B>,
) -> Result<B> {
    pairs.iter().try_fold(builder, |b, (k, v)| {
        apply(b, k, v).map_err(|e| Error::InvalidInput {
            what: format!("table URI `{uri}`"),
            reason: format!("unknown store option `{k}`: {e}"),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_what_follows_the_root() {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        for root in ["", "t", "a/b"] {
            let loc = TableLocation::new(store.clone(), Path::from(root));
            for rel in ["", "x", "p=1/.f_1.log.1_0-1-0", "p q/%/f.parquet"] {
                let path = join_relative(&loc.root, rel);
                // As `Path::prefix_match` splits it, joined with slashes.
                let parts: Vec<String> =
                    path.prefix_match(&loc.root).unwrap().map(|p| p.as_ref().to_string()).collect();
                assert_eq!(loc.relative(&path), parts.join("/"), "root {root:?}, {rel:?}");
            }
            // A path outside the root is given whole.
            assert_eq!(loc.relative(&Path::from("elsewhere/f")), "elsewhere/f");
        }
        let loc = TableLocation::new(store, Path::from("a/b"));
        assert_eq!(loc.relative(&Path::from("a/bc/f")), "a/bc/f");
    }

    #[test]
    fn paths_and_file_uris_are_local_folders() {
        let dir = tempfile::tempdir().unwrap();
        let by_path = TableLocation::parse(dir.path().to_str().unwrap(), LocalTidy::NONE).unwrap();
        let uri = url::Url::from_directory_path(dir.path()).unwrap();
        let by_uri = TableLocation::parse(uri.as_str(), LocalTidy::NONE).unwrap();
        assert_eq!(by_path.root, by_uri.root);
        assert_eq!(by_path.local_folder(), Some(dir.path()));
        assert_eq!(by_uri.local_folder(), Some(dir.path()));
        let relative = TableLocation::parse("some/folder", LocalTidy::NONE).unwrap();
        assert!(relative.local_folder().is_some_and(|p| p.is_absolute()));
    }

    #[tokio::test]
    async fn memory_uris_share_one_store_per_process() {
        let a = TableLocation::parse("memory:///lake/t", LocalTidy::NONE).unwrap();
        let b = TableLocation::parse("memory:///lake/t", LocalTidy::NONE).unwrap();
        a.create(&a.join("x"), b"1".to_vec()).await.unwrap();
        assert_eq!(&b.get(&b.join("x")).await.unwrap()[..], b"1");
        assert!(a.local_folder().is_none());
    }

    #[test]
    fn bad_uris_and_options_are_named() {
        let err = |uri: &str, opts: &[(&str, &str)]| {
            TableLocation::parse_with(uri, opts.iter().copied(), LocalTidy::NONE).expect_err("an error").to_string()
        };
        let e = err("hdfs://nn/t", &[]);
        assert!(e.contains("`hdfs://nn/t`") && e.contains("unknown scheme `hdfs`"), "{e}");
        let e = err("s3://b/t", &[("retry_timeout", "soon")]);
        assert!(e.contains("retry_timeout"), "{e}");
        let e = err("s3://b/t", &[("endpiont", "http://x")]);
        if cfg!(feature = "cloud") {
            assert!(e.contains("`s3://b/t`") && e.contains("endpiont"), "{e}");
        } else {
            assert!(e.contains("`s3://b/t`") && e.contains("`cloud` feature"), "{e}");
        }
        let e = err("https://example.com/t", &[]);
        assert!(e.contains("conditional writes"), "{e}");
        let e = err("file:///tmp/t", &[("region", "x")]);
        assert!(e.contains("region"), "{e}");
    }

    #[tokio::test]
    async fn a_create_that_already_happened_counts_as_done() {
        let loc = TableLocation::new(Arc::new(object_store::memory::InMemory::new()), Path::from("t"));
        let path = loc.join("a");
        loc.create(&path, b"same".to_vec()).await.unwrap();
        loc.create(&path, b"same".to_vec()).await.unwrap();
        let other = loc.create(&path, b"other".to_vec()).await;
        assert!(matches!(other, Err(Error::AlreadyExists { .. })), "{other:?}");
    }
}
