//! The durable local store.
//!
//! [`TableLocation::local`](crate::TableLocation::local) wraps the local file system in [`DurableLocalStore`],
//! which fsyncs every file it writes and the folders above it before a put
//! returns, so that "committed" means "on disk". As its [`LocalTidy`] says,
//! a delete also removes the folders it leaves empty below a scratch folder
//! (for a Hudi table, an instant's marker folder under `.hoodie/.temp` once
//! it commits), and a disposable folder once it holds no file (a Hudi
//! metadata table being deleted, `.hoodie/metadata`). The layer that names
//! a table's paths (the timeline crate's layout) chooses those folders.
//!
//! It is also the one home of Hadoop's checksum sidecars. Spark and the other
//! Hadoop-based Hudi writers reach a local table through Hadoop's
//! `ChecksumFileSystem`, which writes a sidecar `.<name>.crc` (the CRCs of the
//! file's chunks) beside every file `<name>` and verifies it on each read.
//! The store treats a file and its sidecar as Hadoop does:
//!
//! - listings never show sidecars (Hadoop hides every `.*.crc`), so no other
//!   code meets them as timeline, log or base files;
//! - deleting a file deletes its sidecar (first: a crash in between leaves a
//!   file without a checksum, which Hadoop reads unverified, never a sidecar
//!   that a later file of the same name would be checked against);
//! - writing a file (a put, a completed upload, a copy's destination)
//!   removes any sidecar of that name first: the sidecar holds the CRCs of
//!   the old bytes, and Hadoop would reject the new ones (for example once
//!   `hoodie.properties` is rewritten);
//! - a create-if-absent (`PutMode::Create`, `CopyMode::Create`) touches the
//!   sidecar only once the create succeeded, removing one left stale by a
//!   file deleted without it. A create refused because the file exists
//!   leaves that file's sidecar alone: the file may be one a Hadoop writer
//!   is creating at that moment, and Hadoop creates the file before its
//!   sidecar and fails the whole create when the sidecar disappears in
//!   between, leaving the file behind (for Hudi's lock file, a lock nobody
//!   holds until it expires).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyMode, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, UploadPart,
};

/// Which folders a delete in a [`DurableLocalStore`] tidies up after itself,
/// chosen by the layer that names a table's paths. [`LocalTidy::NONE`]
/// tidies nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalTidy {
    /// The name of a scratch folder: a delete below a folder of this name
    /// removes the folders it leaves empty, up to (not including) that
    /// folder.
    pub scratch_folder: Option<&'static str>,
    /// A disposable folder, as its parent's name and its own: once a delete
    /// inside it leaves it without files, it goes whole.
    pub disposable_folder: Option<(&'static str, &'static str)>,
}

impl LocalTidy {
    /// Tidies nothing: a delete removes only the file.
    pub const NONE: Self = Self { scratch_folder: None, disposable_folder: None };
}

/// The local file system, with every written file and its folders fsynced
/// before the write is reported done. A delete inside the scratch folder of
/// its [`LocalTidy`] also removes the folders it leaves empty there, up to
/// (not including) the scratch folder.
/// Hadoop's checksum sidecars (`.<name>.crc`) are hidden from listings,
/// deleted with their file and removed when their file is rewritten (see the
/// module documentation).
#[derive(Debug, Clone)]
pub struct DurableLocalStore {
    inner: Arc<LocalFileSystem>,
    /// Folders whose own entry is known to be on disk.
    durable_dirs: Arc<std::sync::Mutex<std::collections::HashSet<PathBuf>>>,
    /// The folders a delete tidies.
    tidy: LocalTidy,
}

impl DurableLocalStore {
    /// A store over the whole local file system that tidies no folders.
    pub fn new() -> Self {
        Self::with_tidy(LocalTidy::NONE)
    }

    /// A store over the whole local file system whose deletes tidy the
    /// folders `tidy` names.
    pub fn with_tidy(tidy: LocalTidy) -> Self {
        Self { inner: Arc::new(LocalFileSystem::new()), durable_dirs: Default::default(), tidy }
    }

    /// Removes the checksum sidecar of `location` (no sidecar is fine), off
    /// the async threads.
    async fn remove_sidecar(&self, location: &Path) -> object_store::Result<()> {
        let Ok(file) = self.inner.path_to_filesystem(location) else { return Ok(()) };
        tokio::task::spawn_blocking(move || remove_checksum_sidecar(&file))
            .await
            .map_err(|e| object_store::Error::Generic { store: "DurableLocalStore", source: Box::new(e) })?
            .map_err(|e| object_store::Error::Generic { store: "DurableLocalStore", source: Box::new(e) })
    }

    /// Runs `write`, which writes `location`, with the file's checksum
    /// sidecar handled as the module notes say (removed before an overwrite;
    /// for a create-if-absent, `create`, only once it succeeded), then syncs
    /// the file and its folders.
    async fn write_file<T>(
        &self,
        location: &Path,
        create: bool,
        write: impl std::future::Future<Output = object_store::Result<T>>,
    ) -> object_store::Result<T> {
        if !create {
            self.remove_sidecar(location).await?;
        }
        let r = write.await?;
        // The sidecar of a create goes in the same trip to a blocking
        // thread as the sync.
        let file = self.inner.path_to_filesystem(location)?;
        let known = self.durable_dirs.clone();
        tokio::task::spawn_blocking(move || {
            if create {
                remove_checksum_sidecar(&file)?;
            }
            sync_file_and_parents(&file, &known)
        })
        .await
        .map_err(|e| object_store::Error::Generic { store: "DurableLocalStore", source: Box::new(e) })?
        .map_err(|e| object_store::Error::Generic { store: "DurableLocalStore", source: Box::new(e) })?;
        Ok(r)
    }
}

impl Default for DurableLocalStore {
    fn default() -> Self {
        Self::new()
    }
}

/// fsyncs `file` and its folder (which holds the new entry). Folders above
/// are synced too, up to three levels (partition folders and
/// `.hoodie/.temp/<t>/<partition>` marker folders may be new), unless this
/// store already made the folder's own entry durable.
fn sync_file_and_parents(
    file: &std::path::Path,
    known: &std::sync::Mutex<std::collections::HashSet<PathBuf>>,
) -> std::io::Result<()> {
    std::fs::File::open(file)?.sync_all()?;
    let mut dir = file.parent();
    for _ in 0..3 {
        let Some(d) = dir else { break };
        std::fs::File::open(d)?.sync_all()?;
        let was_known = known.lock().map(|mut k| !k.insert(d.to_path_buf())).unwrap_or(false);
        if was_known {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

/// Removes the folders between `file` (just deleted) and the scratch
/// folder named `scratch` above it that are now empty, nearest first, and
/// forgets that they were durable. Folders outside the scratch folder are
/// left alone, and so is the scratch folder itself: other writers create
/// their instant folders in it concurrently, and removing a folder that
/// another writer is about to create a child in would fail that write.
fn remove_emptied_scratch_folders(
    file: &std::path::Path,
    scratch: &str,
    known: &std::sync::Mutex<std::collections::HashSet<PathBuf>>,
) {
    let Some(temp) = file.ancestors().find(|a| a.file_name().is_some_and(|n| n == scratch)) else { return };
    let mut dir = file.parent();
    while let Some(d) = dir.filter(|d| *d != temp) {
        if std::fs::remove_dir(d).is_err() {
            // What a killed writer staged goes; an instant's folder may
            // still hold partition folders in which a writer killed while
            // creating its first marker left only that marker's staging
            // file: they go too, and then the folder.
            let cleared = if d.parent() == Some(temp) { sweep_staging_folders(d) } else { only_staging_files(d) };
            if !(cleared && std::fs::remove_dir(d).is_ok()) {
                break;
            }
        }
        if let Ok(mut known) = known.lock() {
            known.remove(d);
        }
        dir = d.parent();
    }
}

/// Removes what is left of the disposable folder `(parent, name)` once
/// `file`, just deleted, was in it: each folder from `file`'s up to and
/// including the disposable one that holds no file any more goes, with the
/// empty folders inside it (a Hudi metadata table, the disposable folder of
/// a Hudi table, has folders that never hold a file, such as
/// `.hoodie/.aux/.bootstrap`; Hudi removes it whole too).
fn remove_emptied_disposable_folders(
    file: &std::path::Path,
    (parent, name): (&str, &str),
    known: &std::sync::Mutex<std::collections::HashSet<PathBuf>>,
) {
    let is_disposable_root = |d: &std::path::Path| {
        d.file_name().is_some_and(|n| n == name) && d.parent().and_then(|p| p.file_name()).is_some_and(|n| n == parent)
    };
    let Some(root) = file.ancestors().skip(1).find(|a| is_disposable_root(a)) else { return };
    let mut dir = file.parent();
    while let Some(d) = dir {
        if !holds_no_files(d) || !remove_empty_tree(d) {
            break;
        }
        if let Ok(mut known) = known.lock() {
            known.retain(|k| !k.starts_with(d));
        }
        if d == root {
            break;
        }
        dir = d.parent();
    }
}

/// Whether the folder `dir` holds no file at any depth, besides checksum
/// sidecars (which listings hide, so only an orphaned one can be left).
fn holds_no_files(dir: &std::path::Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.into_iter().all(|e| {
        e.is_ok_and(|e| match e.file_type() {
            Ok(t) if t.is_dir() => holds_no_files(&e.path()),
            Ok(_) => e.file_name().to_str().is_some_and(is_checksum_sidecar),
            Err(_) => false,
        })
    })
}

/// Removes the folder `dir` with the empty folders and orphaned checksum
/// sidecars inside it, deepest first (never another file); true when `dir`
/// is gone.
fn remove_empty_tree(dir: &std::path::Path) -> bool {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => {
                    remove_empty_tree(&e.path());
                }
                Ok(_) if e.file_name().to_str().is_some_and(is_checksum_sidecar) => {
                    let _ = std::fs::remove_file(e.path());
                }
                _ => {}
            }
        }
    }
    std::fs::remove_dir(dir).is_ok()
}

/// Whether `dir` holds nothing but staging files (`<name>#<n>`), and if so
/// deletes them. Inside an instant's marker folder, once its last marker is
/// deleted, these are what a writer killed while creating a marker left:
/// nobody else can see or remove them. Stops at the first other entry.
fn only_staging_files(dir: &std::path::Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    let mut staged = Vec::new();
    for e in entries {
        let Ok(e) = e else { return false };
        if !e.file_name().to_str().is_some_and(is_staging) || e.file_type().map_or(true, |t| !t.is_file()) {
            return false;
        }
        staged.push(e.path());
    }
    staged.iter().all(|p| std::fs::remove_file(p).is_ok())
}

/// Removes the sub-folders of `dir` (recursively) that hold nothing but
/// staging files, then `dir`'s own staging files if it holds nothing else;
/// true when `dir` is then empty. A folder holding a file that is no
/// staging file cannot empty, so the sweep stops at the first one it reads:
/// deleting each of an instant's thousands of markers in turn then reads a
/// little of their folder, not all of it, every time.
fn sweep_staging_folders(dir: &std::path::Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    let mut folders = Vec::new();
    for e in entries {
        let Ok(e) = e else { return false };
        match e.file_type() {
            Ok(t) if t.is_dir() => folders.push(e.path()),
            Ok(_) if e.file_name().to_str().is_some_and(is_staging) => {}
            _ => return false,
        }
    }
    for f in folders {
        if sweep_staging_folders(&f) {
            let _ = std::fs::remove_dir(f);
        }
    }
    only_staging_files(dir)
}

/// Whether `name` is a staging file, `<file>#<n>`: where `LocalFileSystem`
/// writes a file before moving it into place. Listings never show them.
fn is_staging(name: &str) -> bool {
    name.rsplit_once('#').is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// One folder's listing, as `LocalFileSystem::list_with_delimiter` gives it
/// (files as objects, sub-folders as common prefixes, symbolic links
/// followed and broken ones skipped, staging files and checksum sidecars
/// hidden, a missing folder empty), read with one `read_dir` and one stat
/// of each file relative to the folder. `LocalFileSystem` stats each entry
/// by its full path three times and converts it through a URL, which made
/// listing the active timeline most of a commit's cost. `None` when a name
/// is not a valid path part (not UTF-8, or with a control character), which
/// `LocalFileSystem`'s own listing then reports.
fn list_folder(dir: &std::path::Path, prefix: &Path) -> std::io::Result<Option<ListResult>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
            return Ok(Some(ListResult { common_prefixes: Vec::new(), objects: Vec::new() }));
        }
        Err(e) => return Err(e),
    };
    let mut common_prefixes = std::collections::BTreeSet::new();
    let mut objects = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        // `LocalFileSystem` names an entry by the raw name; one it cannot
        // (a control character) is its own listing's error to report.
        let Some(part) = name.to_str().and_then(|n| object_store::path::PathPart::parse(n).ok()) else {
            return Ok(None);
        };
        let name = part.as_ref();
        let kind = entry.file_type()?;
        let metadata = if kind.is_symlink() { std::fs::metadata(entry.path()) } else { entry.metadata() };
        let metadata = match metadata {
            Ok(m) => m,
            // Deleted since the folder was read, or a broken link.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if metadata.is_dir() {
            common_prefixes.insert(prefix.clone().join(part.clone()));
        } else if !is_staging(name) && !is_checksum_sidecar(name) {
            objects.push(object_meta(prefix.clone().join(part.clone()), &metadata));
        }
    }
    Ok(Some(ListResult { common_prefixes: common_prefixes.into_iter().collect(), objects }))
}

/// Every file below `dir`, as `LocalFileSystem::list` gives them (symbolic
/// links followed, a link back to a folder above an error, broken links,
/// staging files and checksum sidecars skipped, a missing folder empty), in
/// batches sent on `tx`; read as [`list_folder`] reads one folder. Stops
/// when the receiver is gone.
fn walk_folders(dir: PathBuf, prefix: Path, tx: &tokio::sync::mpsc::Sender<object_store::Result<Vec<ObjectMeta>>>) {
    use std::os::unix::fs::MetadataExt;
    const BATCH: usize = 1000;
    let generic = |e: Box<dyn std::error::Error + Send + Sync>| object_store::Error::Generic {
        store: "DurableLocalStore",
        source: e,
    };
    let mut batch = Vec::new();
    // Each folder to read, with its object path and the folders above it
    // (device and inode), against which a linked folder is checked.
    let mut stack = vec![(dir, prefix, Vec::<(u64, u64)>::new())];
    while let Some((dir, prefix, above)) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => continue,
            Err(e) => {
                let _ = tx.blocking_send(Err(generic(format!("{}: {e}", dir.display()).into())));
                return;
            }
        };
        let here = match std::fs::metadata(&dir) {
            Ok(m) => (m.dev(), m.ino()),
            Err(_) => continue,
        };
        for entry in entries {
            let found = entry.map_err(|e| format!("{}: {e}", dir.display())).and_then(|entry| {
                let name = entry.file_name();
                let part = name
                    .to_str()
                    .and_then(|n| object_store::path::PathPart::parse(n).ok())
                    .ok_or_else(|| format!("{}: not a valid object path", entry.path().display()))?;
                let kind = entry.file_type().map_err(|e| format!("{}: {e}", entry.path().display()))?;
                let metadata = if kind.is_symlink() { std::fs::metadata(entry.path()) } else { entry.metadata() };
                let location = prefix.clone().join(part.clone());
                match metadata {
                    Ok(m) => Ok(Some((entry, part.as_ref().to_string(), location, m))),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(format!("{}: {e}", entry.path().display())),
                }
            });
            let (entry, name, location, metadata) = match found {
                Ok(Some(found)) => found,
                Ok(None) => continue,
                Err(e) => {
                    let _ = tx.blocking_send(Err(generic(e.into())));
                    return;
                }
            };
            if metadata.is_dir() {
                let id = (metadata.dev(), metadata.ino());
                if id == here || above.contains(&id) {
                    let loop_err = format!("{}: a link back to a folder above it", entry.path().display());
                    let _ = tx.blocking_send(Err(generic(loop_err.into())));
                    return;
                }
                let mut chain = above.clone();
                chain.push(here);
                stack.push((entry.path(), location, chain));
            } else if !is_staging(&name) && !is_checksum_sidecar(&name) {
                batch.push(object_meta(location, &metadata));
                if batch.len() == BATCH && tx.blocking_send(Ok(std::mem::take(&mut batch))).is_err() {
                    return;
                }
            }
        }
    }
    if !batch.is_empty() {
        let _ = tx.blocking_send(Ok(batch));
    }
}

/// A file's [`ObjectMeta`], with the e-tag `LocalFileSystem` gives it
/// (inode, modification time in microseconds and size, in hex), so that
/// conditional requests match either way.
fn object_meta(location: Path, metadata: &std::fs::Metadata) -> ObjectMeta {
    use std::os::unix::fs::MetadataExt;
    let modified = metadata.modified().unwrap_or(std::time::SystemTime::UNIX_EPOCH);
    let micros = modified.duration_since(std::time::SystemTime::UNIX_EPOCH).unwrap_or_default().as_micros();
    ObjectMeta {
        location,
        last_modified: modified.into(),
        size: metadata.len(),
        e_tag: Some(format!("{:x}-{micros:x}-{:x}", metadata.ino(), metadata.len())),
        version: None,
    }
}

/// Whether `name` is a Hadoop checksum sidecar: Hadoop's `ChecksumFileSystem`
/// names the sidecar of `<name>` `.<name>.crc` and hides every file whose
/// name starts with `.` and ends with `.crc` from its listings.
fn is_checksum_sidecar(name: &str) -> bool {
    name.len() > ".crc".len() && name.starts_with('.') && name.ends_with(".crc")
}

/// The path of the checksum sidecar Hadoop keeps beside `file`.
fn checksum_sidecar(file: &std::path::Path) -> Option<PathBuf> {
    let name = file.file_name()?.to_str()?;
    Some(file.with_file_name(format!(".{name}.crc")))
}

/// Deletes the checksum sidecar beside `file`, if there is one.
fn remove_checksum_sidecar(file: &std::path::Path) -> std::io::Result<()> {
    let Some(sidecar) = checksum_sidecar(file) else { return Ok(()) };
    match std::fs::remove_file(&sidecar) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Removes the staging files (`<file>#1`, `#2`, ...) that a process killed
/// while writing `file` leaves beside it. The store's listings never show
/// them, so deleting `file` is the one moment to find them.
fn remove_staging(file: &std::path::Path) {
    for n in 1.. {
        let mut staged = file.as_os_str().to_owned();
        staged.push(format!("#{n}"));
        if std::fs::remove_file(std::path::Path::new(&staged)).is_err() {
            break;
        }
    }
}

impl fmt::Display for DurableLocalStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DurableLocalStore({})", self.inner)
    }
}

/// The file [`create_folder`] writes and deletes. Timeline listings skip
/// the name (the timeline crate's `Timeline`), so one seen meanwhile, or
/// left by a crash in between, is no stray timeline file.
pub const FOLDER_PLACEHOLDER: &str = ".tributary-folder";

/// Makes folder `dir` of a local store exist, as something that lists it
/// expects (Hudi's Java timeline, a store rooted at the folder): a local
/// store creates a file's folders when it writes the file, so this writes
/// the empty file [`FOLDER_PLACEHOLDER`] in `dir`, then deletes it (the
/// folder stays). In an object store, which has no folders, it leaves
/// nothing. Errors name the placeholder's path.
pub async fn create_folder(store: &dyn ObjectStore, dir: &Path) -> crate::Result<()> {
    use object_store::ObjectStoreExt;
    let placeholder = dir.clone().join(FOLDER_PLACEHOLDER);
    let store_err = |op, e| crate::Error::store(op, &placeholder, e);
    store.put(&placeholder, PutPayload::from_static(b"")).await.map_err(|e| store_err("create", e))?;
    store.delete(&placeholder).await.map_err(|e| store_err("delete", e))?;
    Ok(())
}

struct DurableUpload {
    inner: Box<dyn MultipartUpload>,
    store: DurableLocalStore,
    location: Path,
}

impl fmt::Debug for DurableUpload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DurableUpload({})", self.location)
    }
}

#[async_trait]
impl MultipartUpload for DurableUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.inner.put_part(data)
    }
    async fn complete(&mut self) -> object_store::Result<PutResult> {
        self.store.write_file(&self.location, false, self.inner.complete()).await
    }
    async fn abort(&mut self) -> object_store::Result<()> {
        self.inner.abort().await
    }
}

/// Reads of at most this many bytes in all are answered on the calling
/// thread rather than on a blocking thread. A trip to a blocking thread
/// wakes two threads, which costs more than copying a few pages from the
/// page cache: a snapshot read of 2,016 small log files spent a quarter of
/// its CPU time in those wake-ups.
const INLINE_READ_BYTES: u64 = 256 << 10;

/// Bytes `ranges` of `file` (the object `location`), with positioned
/// reads. As `get_range` answers: a range that runs past the end of the
/// file gives the bytes up to the end (a reader then finds the file shorter
/// than listed, and says so), one that starts at or past the end is an
/// error. A missing file is [`object_store::Error::NotFound`].
#[cfg(unix)]
fn read_ranges_here(
    location: &Path,
    file: &std::path::Path,
    ranges: &[std::ops::Range<u64>],
) -> object_store::Result<Vec<bytes::Bytes>> {
    use std::os::unix::fs::FileExt;
    let generic = |reason: String| object_store::Error::Generic {
        store: "DurableLocalStore",
        source: format!("reading {}: {reason}", file.display()).into(),
    };
    let failed = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => {
            object_store::Error::NotFound { path: location.to_string(), source: Box::new(e) }
        }
        _ => generic(e.to_string()),
    };
    let f = std::fs::File::open(file).map_err(failed)?;
    ranges
        .iter()
        .map(|r| {
            let mut buf = vec![0u8; r.end.saturating_sub(r.start) as usize];
            let mut filled = 0;
            while filled < buf.len() {
                match f.read_at(&mut buf[filled..], r.start + filled as u64) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(failed(e)),
                }
            }
            if filled == 0 && !buf.is_empty() {
                return Err(generic(format!("bytes {r:?} start at or past the end of the file")));
            }
            buf.truncate(filled);
            Ok(bytes::Bytes::from(buf))
        })
        .collect()
}

#[cfg(not(unix))]
fn read_ranges_here(
    _location: &Path,
    _file: &std::path::Path,
    _ranges: &[std::ops::Range<u64>],
) -> object_store::Result<Vec<bytes::Bytes>> {
    unreachable!("only unix reads on the calling thread")
}

#[async_trait]
impl ObjectStore for DurableLocalStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let create = matches!(opts.mode, PutMode::Create);
        self.write_file(location, create, self.inner.put_opts(location, payload, opts)).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(DurableUpload { inner, store: self.clone(), location: location.clone() }))
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[std::ops::Range<u64>],
    ) -> object_store::Result<Vec<bytes::Bytes>> {
        if !cfg!(unix) {
            return self.inner.get_ranges(location, ranges).await;
        }
        let total: u64 = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
        let file = self.inner.path_to_filesystem(location)?;
        if total <= INLINE_READ_BYTES {
            return read_ranges_here(location, &file, ranges);
        }
        let (location, ranges) = (location.clone(), ranges.to_vec());
        tokio::task::spawn_blocking(move || read_ranges_here(&location, &file, &ranges))
            .await
            .map_err(|e| object_store::Error::Generic { store: "DurableLocalStore", source: Box::new(e) })?
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        use futures::StreamExt;
        // Each delete in one trip to a blocking thread, ten at once as
        // `LocalFileSystem` runs them: first the file's checksum sidecar and
        // the staging files beside it (they must go even when the file
        // itself never appeared), then the file, then the folders it
        // emptied.
        let (inner, known, tidy) = (self.inner.clone(), self.durable_dirs.clone(), self.tidy);
        locations
            .map(move |location| {
                let (inner, known) = (inner.clone(), known.clone());
                async move {
                    let location = location?;
                    let file = inner.path_to_filesystem(&location)?;
                    tokio::task::spawn_blocking(move || {
                        let _ = remove_checksum_sidecar(&file);
                        remove_staging(&file);
                        match std::fs::remove_file(&file) {
                            Ok(()) => {}
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                                return Err(object_store::Error::NotFound {
                                    path: location.to_string(),
                                    source: Box::new(e),
                                });
                            }
                            Err(e) => {
                                return Err(object_store::Error::Generic {
                                    store: "DurableLocalStore",
                                    source: format!("deleting {}: {e}", file.display()).into(),
                                });
                            }
                        }
                        if let Some(scratch) = tidy.scratch_folder {
                            remove_emptied_scratch_folders(&file, scratch, &known);
                        }
                        if let Some(disposable) = tidy.disposable_folder {
                            remove_emptied_disposable_folders(&file, disposable, &known);
                        }
                        Ok(location)
                    })
                    .await
                    .map_err(|e| object_store::Error::Generic { store: "DurableLocalStore", source: Box::new(e) })?
                }
            })
            .buffered(10)
            .boxed()
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        use futures::StreamExt;
        let folder = prefix.cloned().unwrap_or_default();
        let dir = match self.inner.path_to_filesystem(&folder) {
            Ok(dir) => dir,
            Err(e) => return futures::stream::once(async move { Err(e) }).boxed(),
        };
        // Walked as `list_with_delimiter` reads a folder, for the same
        // reason: `LocalFileSystem` stats each entry three times by path.
        futures::stream::once(async move {
            let (tx, rx) = tokio::sync::mpsc::channel(2);
            tokio::task::spawn_blocking(move || walk_folders(dir, folder, &tx));
            futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|batch| (batch, rx)) })
        })
        .flatten()
        .flat_map(|batch| match batch {
            Ok(objects) => futures::stream::iter(objects.into_iter().map(Ok)).boxed(),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        })
        .boxed()
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let folder = prefix.cloned().unwrap_or_default();
        let dir = self.inner.path_to_filesystem(&folder)?;
        let listed = tokio::task::spawn_blocking(move || list_folder(&dir, &folder))
            .await
            .map_err(|e| object_store::Error::Generic { store: "DurableLocalStore", source: Box::new(e) })?
            .map_err(|e| object_store::Error::Generic { store: "DurableLocalStore", source: Box::new(e) })?;
        if let Some(listing) = listed {
            return Ok(listing);
        }
        let mut listing = self.inner.list_with_delimiter(prefix).await?;
        listing.objects.retain(|m| !m.location.filename().is_some_and(is_checksum_sidecar));
        Ok(listing)
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        let create = matches!(options.mode, CopyMode::Create);
        self.write_file(to, create, self.inner.copy_opts(from, to, options)).await
    }
}

#[cfg(test)]
mod tests {
    use object_store::ObjectStoreExt;

    use super::*;

    /// The folders a Hudi table's layout has its deletes tidy.
    const HUDI: LocalTidy =
        LocalTidy { scratch_folder: Some(".temp"), disposable_folder: Some((".hoodie", "metadata")) };

    #[tokio::test]
    async fn without_tidy_a_delete_removes_only_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = DurableLocalStore::new();
        let folder = dir.path().join("t/.hoodie/.temp/20250101000000000/p");
        let marker = Path::from_absolute_path(folder.join("a.marker")).unwrap();
        store.put(&marker, PutPayload::from_static(b"x")).await.unwrap();
        store.delete(&marker).await.unwrap();
        assert!(folder.is_dir(), "no scratch folder is named, so the emptied folder stays");
    }

    #[tokio::test]
    async fn deletes_take_staging_leftovers_and_emptied_folders_with_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = DurableLocalStore::with_tidy(HUDI);
        let folder = dir.path().join("t/.hoodie/.temp/20250101000000000");
        let path = |name: &str| Path::from_absolute_path(folder.join(name)).unwrap();
        store.put(&path("keep.marker"), PutPayload::from_static(b"x")).await.unwrap();
        store.put(&path("a.marker"), PutPayload::from_static(b"x")).await.unwrap();
        // What a writer killed while writing leaves: a staged file beside the
        // real one, and one whose real file never appeared.
        std::fs::write(folder.join("a.marker#1"), b"partial").unwrap();
        std::fs::write(folder.join("b.marker#1"), b"partial").unwrap();
        std::fs::write(folder.join("b.marker#2"), b"partial").unwrap();
        store.delete(&path("a.marker")).await.unwrap();
        assert!(!folder.join("a.marker#1").exists());
        assert!(folder.join("b.marker#1").exists(), "the folder still has a marker: nothing else goes");
        assert!(matches!(store.delete(&path("b.marker")).await, Err(object_store::Error::NotFound { .. })));
        assert!(!folder.join("b.marker#1").exists() && !folder.join("b.marker#2").exists());
        // A staged marker whose real name is unknown goes with the folder's
        // last marker.
        std::fs::write(folder.join("e.marker#1"), b"").unwrap();
        store.delete(&path("keep.marker")).await.unwrap();
        assert!(!folder.exists(), "the folder and its orphaned staging file are gone");
        // The emptied instant folder goes; `.temp` stays, and so do emptied
        // folders elsewhere.
        store.put(&path("c/d.marker"), PutPayload::from_static(b"x")).await.unwrap();
        store.delete(&path("c/d.marker")).await.unwrap();
        assert!(!folder.exists());
        assert!(dir.path().join("t/.hoodie/.temp").is_dir());
        // A partition folder holding only a killed writer's staged first
        // marker goes with the instant's last real marker elsewhere.
        store.put(&path("city=rome/f.marker"), PutPayload::from_static(b"x")).await.unwrap();
        std::fs::create_dir_all(folder.join("city=oslo")).unwrap();
        std::fs::write(folder.join("city=oslo/g.marker#1"), b"partial").unwrap();
        store.delete(&path("city=rome/f.marker")).await.unwrap();
        assert!(!folder.exists(), "the staged-only partition folder went with the instant folder");
        // While the instant folder still holds a marker of its own, the
        // sweep stops there; the staged-only partition folder goes with
        // that marker.
        store.put(&path("h.marker"), PutPayload::from_static(b"x")).await.unwrap();
        store.put(&path("city=rome/f.marker"), PutPayload::from_static(b"x")).await.unwrap();
        std::fs::create_dir_all(folder.join("city=oslo")).unwrap();
        std::fs::write(folder.join("city=oslo/g.marker#1"), b"partial").unwrap();
        store.delete(&path("city=rome/f.marker")).await.unwrap();
        assert!(folder.join("h.marker").exists() && !folder.join("city=rome").exists());
        store.delete(&path("h.marker")).await.unwrap();
        assert!(!folder.exists(), "the staged-only partition folder went with the instant's last marker");
        let data = Path::from_absolute_path(dir.path().join("t/city=oslo/x.log")).unwrap();
        store.put(&data, PutPayload::from_static(b"x")).await.unwrap();
        store.delete(&data).await.unwrap();
        assert!(dir.path().join("t/city=oslo").is_dir());
    }

    /// A folder made through a local store stays, empty; in a store without
    /// folders nothing is left.
    #[tokio::test]
    async fn create_folder_leaves_the_folder_and_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("t/.hoodie/timeline");
        create_folder(&DurableLocalStore::new(), &Path::from_absolute_path(&folder).unwrap()).await.unwrap();
        assert!(folder.is_dir());
        assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0, "the placeholder is gone");
        let memory = object_store::memory::InMemory::new();
        create_folder(&memory, &Path::from("t/.hoodie/timeline")).await.unwrap();
        assert!(memory.list_with_delimiter(None).await.unwrap().objects.is_empty());
        assert!(memory.list_with_delimiter(None).await.unwrap().common_prefixes.is_empty());
    }

    #[tokio::test]
    async fn hadoop_checksum_sidecars_are_hidden_deleted_and_never_left_stale() {
        use futures::TryStreamExt;
        let dir = tempfile::tempdir().unwrap();
        let store = DurableLocalStore::new();
        let timeline = dir.path().join("t/.hoodie/timeline");
        let partition = dir.path().join("t/eu");
        let path = |p: &std::path::Path| Path::from_absolute_path(p).unwrap();
        // What Spark leaves on a local disk: a sidecar beside each file.
        let completed = timeline.join("20250101000000000_20250101000001000.deltacommit");
        let log = partition.join(".00000000-0000-0000-0000-000000000000-0_20250101000000000.log.1_0-23-24");
        for f in [&completed, &log] {
            store.put(&path(f), PutPayload::from_static(b"bytes")).await.unwrap();
            std::fs::write(checksum_sidecar(f).unwrap(), b"crc").unwrap();
        }
        assert!(
            partition.join("..00000000-0000-0000-0000-000000000000-0_20250101000000000.log.1_0-23-24.crc").is_file()
        );
        // An orphaned sidecar whose file is gone is hidden too.
        std::fs::write(timeline.join(".20250101000000000.deltacommit.requested.crc"), b"crc").unwrap();

        let names = |metas: Vec<ObjectMeta>| {
            let mut v: Vec<String> = metas.iter().filter_map(|m| m.location.filename().map(String::from)).collect();
            v.sort();
            v
        };
        let all = names(store.list(Some(&path(&dir.path().join("t")))).try_collect().await.unwrap());
        assert_eq!(all, [log.file_name().unwrap().to_str().unwrap(), completed.file_name().unwrap().to_str().unwrap()]);
        let listing = store.list_with_delimiter(Some(&path(&timeline))).await.unwrap();
        assert_eq!(names(listing.objects), [completed.file_name().unwrap().to_str().unwrap()]);
        let listing = store.list_with_delimiter(Some(&path(&dir.path().join("t")))).await.unwrap();
        assert_eq!(listing.common_prefixes.len(), 2, "folders are still listed: {listing:?}");

        // Deleting a file deletes its sidecar.
        store.delete(&path(&log)).await.unwrap();
        assert!(!log.exists() && !checksum_sidecar(&log).unwrap().exists());

        // Rewriting a file removes the sidecar of its old bytes, whatever the
        // way it is written.
        let props = dir.path().join("t/.hoodie/hoodie.properties");
        let write_sidecar = |f: &std::path::Path| std::fs::write(checksum_sidecar(f).unwrap(), b"old crc").unwrap();
        store.put(&path(&props), PutPayload::from_static(b"a=1")).await.unwrap();
        write_sidecar(&props);
        store.put(&path(&props), PutPayload::from_static(b"a=2")).await.unwrap();
        assert!(!checksum_sidecar(&props).unwrap().exists());
        write_sidecar(&props);
        let mut upload = store.put_multipart(&path(&props)).await.unwrap();
        upload.put_part(PutPayload::from_static(b"a=3")).await.unwrap();
        upload.complete().await.unwrap();
        assert!(!checksum_sidecar(&props).unwrap().exists());
        write_sidecar(&props);
        store.copy(&path(&completed), &path(&props)).await.unwrap();
        assert!(!checksum_sidecar(&props).unwrap().exists());
        assert_eq!(std::fs::read(&props).unwrap(), b"bytes");
        // A refused create keeps the existing bytes and their sidecar (it may
        // be a Hadoop writer's, being written right now), by put or by copy.
        write_sidecar(&props);
        let refused = store.put_opts(&path(&props), PutPayload::from_static(b"x"), PutMode::Create.into()).await;
        assert!(matches!(refused, Err(object_store::Error::AlreadyExists { .. })));
        let copy = CopyOptions { mode: CopyMode::Create, ..Default::default() };
        let refused = store.copy_opts(&path(&completed), &path(&props), copy.clone()).await;
        assert!(matches!(refused, Err(object_store::Error::AlreadyExists { .. })));
        assert_eq!(std::fs::read(&props).unwrap(), b"bytes");
        assert_eq!(std::fs::read(checksum_sidecar(&props).unwrap()).unwrap(), b"old crc");
        // A create that succeeds removes a sidecar left stale by a file
        // deleted without it (by put or by copy).
        let lock = dir.path().join("t/.hoodie/lock");
        write_sidecar(&lock);
        store.put_opts(&path(&lock), PutPayload::from_static(b"mine"), PutMode::Create.into()).await.unwrap();
        assert!(!checksum_sidecar(&lock).unwrap().exists());
        std::fs::remove_file(&lock).unwrap();
        write_sidecar(&lock);
        store.copy_opts(&path(&completed), &path(&lock), copy).await.unwrap();
        assert!(!checksum_sidecar(&lock).unwrap().exists());
    }

    #[test]
    fn only_hadoop_sidecar_names_are_sidecars() {
        assert!(is_checksum_sidecar(".hoodie.properties.crc"));
        assert!(is_checksum_sidecar("..00000000-0000-0000-0000-000000000000-0_20250101000000000.log.1_0-23-24.crc"));
        for name in [".crc", "hoodie.properties.crc", ".hoodie_partition_metadata", "a.crc.x"] {
            assert!(!is_checksum_sidecar(name), "{name}");
        }
    }

    #[tokio::test]
    async fn deleting_a_metadata_tables_last_file_removes_its_folders() {
        let dir = tempfile::tempdir().unwrap();
        let store = DurableLocalStore::with_tidy(HUDI);
        let meta = dir.path().join("t/.hoodie/metadata");
        let path = |p: &std::path::Path| Path::from_absolute_path(p).unwrap();
        let files = [meta.join(".hoodie/hoodie.properties"), meta.join("files/.files-0000-0_0.log.1_0-0-0")];
        for f in &files {
            store.put(&path(f), PutPayload::from_static(b"x")).await.unwrap();
        }
        // Folders a metadata table has that never hold a file.
        std::fs::create_dir_all(meta.join(".hoodie/.aux/.bootstrap/.partitions")).unwrap();
        std::fs::create_dir_all(meta.join(".hoodie/timeline/history")).unwrap();
        // An orphaned checksum sidecar (its file deleted by someone else).
        std::fs::write(meta.join(".hoodie/timeline/.gone.crc"), b"crc").unwrap();
        store.delete(&path(&files[0])).await.unwrap();
        assert!(!meta.join(".hoodie").exists(), "its folder held no file any more");
        assert!(meta.join("files").is_dir());
        store.delete(&path(&files[1])).await.unwrap();
        assert!(!meta.exists(), "the metadata folder goes with its last file");
        assert!(dir.path().join("t/.hoodie").is_dir());
    }

    /// The store's own listings, of one folder and recursive, give what
    /// `LocalFileSystem`'s do (less the sidecars they hide), for files,
    /// folders, links, broken links, staging files and a missing folder.
    #[tokio::test]
    async fn range_reads_are_the_local_file_systems() {
        let dir = tempfile::tempdir().unwrap();
        let big = (INLINE_READ_BYTES + 10) as usize;
        let content: Vec<u8> = (0..big).map(|i| (i % 251) as u8).collect();
        std::fs::write(dir.path().join("b 100%.log"), &content).unwrap();
        let (ours, theirs) = (DurableLocalStore::new(), LocalFileSystem::new());
        let path = Path::from_absolute_path(dir.path().join("b 100%.log")).unwrap();
        let len = big as u64;
        // Small reads (answered on the calling thread), one read above the
        // bound (on a blocking thread), several ranges at once.
        let cases: [&[std::ops::Range<u64>]; 5] =
            [&[0..10, 2..3], &[7..7, 0..0], &[len - 5..len, 0..1], &[0..len, 1..2], &[3..9, 100..4096, 4000..4100]];
        for ranges in cases {
            let got = ours.get_ranges(&path, ranges).await.unwrap();
            assert_eq!(got, theirs.get_ranges(&path, ranges).await.unwrap(), "{ranges:?}");
            let want: Vec<&[u8]> = ranges.iter().map(|r| &content[r.start as usize..r.end as usize]).collect();
            assert_eq!(got, want, "{ranges:?}");
        }
        let missing = Path::from_absolute_path(dir.path().join("gone.log")).unwrap();
        let err = ours.get_ranges(&missing, &[0..4, 4..8]).await.unwrap_err();
        assert!(matches!(err, object_store::Error::NotFound { .. }), "{err}");
        // A range that runs past the end gives what is there, as `get_range`
        // does (a file shorter than listed is then read as the damaged file
        // it is); one that starts past the end is an error.
        for past in [len - 2..len + 2, 5..len + 1000] {
            let got = ours.get_ranges(&path, std::slice::from_ref(&past)).await.unwrap();
            assert_eq!(got, [theirs.get_range(&path, past.clone()).await.unwrap()], "{past:?}");
        }
        let beyond = len + 1..len + 2;
        let err = ours.get_ranges(&path, std::slice::from_ref(&beyond)).await.unwrap_err();
        assert!(theirs.get_range(&path, beyond).await.is_err(), "LocalFileSystem refuses it too");
        assert!(err.to_string().contains("b 100%.log") && err.to_string().contains("past the end"), "{err}");
    }

    #[tokio::test]
    async fn listings_are_the_local_file_systems() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t");
        std::fs::create_dir_all(t.join("sub/deeper")).unwrap();
        for name in ["a.log.1_0-1-0", "b 100%.parquet", "c#12", "d#x", ".a.log.1_0-1-0.crc", "sub/in.txt"] {
            std::fs::write(t.join(name), name.as_bytes()).unwrap();
        }
        std::os::unix::fs::symlink(t.join("a.log.1_0-1-0"), t.join("link")).unwrap();
        std::os::unix::fs::symlink(t.join("sub"), t.join("linked-sub")).unwrap();
        std::os::unix::fs::symlink(t.join("gone"), t.join("broken")).unwrap();
        let (ours, theirs) = (DurableLocalStore::new(), LocalFileSystem::new());
        let path = |p: &std::path::Path| Path::from_absolute_path(p).unwrap();
        let sorted = |mut l: ListResult| {
            l.objects.sort_by(|a, b| a.location.cmp(&b.location));
            l
        };
        for folder in [t.clone(), t.join("sub"), t.join("missing"), t.join("a.log.1_0-1-0")] {
            let prefix = path(&folder);
            let got = sorted(ours.list_with_delimiter(Some(&prefix)).await.unwrap());
            let mut want = sorted(theirs.list_with_delimiter(Some(&prefix)).await.unwrap());
            want.objects.retain(|m| !m.location.filename().is_some_and(is_checksum_sidecar));
            assert_eq!(got.common_prefixes, want.common_prefixes, "{}", folder.display());
            assert_eq!(got.objects, want.objects, "{}", folder.display());
        }
        let names: Vec<_> = sorted(ours.list_with_delimiter(Some(&path(&t))).await.unwrap())
            .objects
            .iter()
            .map(|m| m.location.filename().unwrap().to_string())
            .collect();
        assert_eq!(names, ["a.log.1_0-1-0", "b 100%.parquet", "d#x", "link"]);

        // Recursively, the same files (in any order), through the linked folder too.
        use futures::TryStreamExt;
        for folder in [dir.path().to_path_buf(), t.join("sub"), t.join("missing")] {
            let prefix = path(&folder);
            let mut got: Vec<ObjectMeta> = ours.list(Some(&prefix)).try_collect::<Vec<_>>().await.unwrap();
            let mut want: Vec<ObjectMeta> = theirs.list(Some(&prefix)).try_collect::<Vec<_>>().await.unwrap();
            want.retain(|m| !m.location.filename().is_some_and(is_checksum_sidecar));
            got.sort_by(|a, b| a.location.cmp(&b.location));
            want.sort_by(|a, b| a.location.cmp(&b.location));
            assert_eq!(got, want, "{}", folder.display());
        }
        let all: Vec<ObjectMeta> = ours.list(Some(&path(&t))).try_collect::<Vec<_>>().await.unwrap();
        assert_eq!(all.len(), 6, "{all:?}");
        std::os::unix::fs::symlink(&t, t.join("sub/deeper/up")).unwrap();
        let looped: object_store::Result<Vec<ObjectMeta>> = ours.list(Some(&path(&t))).try_collect::<Vec<_>>().await;
        assert!(looped.is_err(), "a link to a folder above is an error, as LocalFileSystem's walk says");
    }
}
