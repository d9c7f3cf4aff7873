//! The durable local store.
//!
//! [`TableLocation::local`](crate::TableLocation::local) wraps the local file system in [`DurableLocalStore`],
//! which fsyncs every file it writes and the folders above it before a put
//! returns, so that "committed" means "on disk", and removes the folders
//! below `.hoodie/.temp` that a delete leaves empty (an instant's marker
//! folder once it commits).

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult, UploadPart,
};

/// The local file system, with every written file and its folders fsynced
/// before the write is reported done. A delete inside a `.temp` folder also
/// removes the folders it leaves empty there, up to (not including) `.temp`.
#[derive(Debug, Clone)]
pub struct DurableLocalStore {
    inner: Arc<LocalFileSystem>,
    /// Folders whose own entry is known to be on disk.
    durable_dirs: Arc<std::sync::Mutex<std::collections::HashSet<PathBuf>>>,
}

impl DurableLocalStore {
    /// A store over the whole local file system.
    pub fn new() -> Self {
        Self { inner: Arc::new(LocalFileSystem::new()), durable_dirs: Default::default() }
    }

    async fn sync(&self, location: &Path) -> object_store::Result<()> {
        let file = self.inner.path_to_filesystem(location)?;
        let known = self.durable_dirs.clone();
        tokio::task::spawn_blocking(move || sync_file_and_parents(&file, &known))
            .await
            .map_err(|e| object_store::Error::Generic { store: "DurableLocalStore", source: Box::new(e) })?
            .map_err(|e| object_store::Error::Generic { store: "DurableLocalStore", source: Box::new(e) })
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

/// Removes the folders between `file` (just deleted) and the `.temp`
/// folder above it that are now empty, nearest first, and forgets that they
/// were durable. Folders outside `.temp` are left alone, and so is `.temp`
/// itself: other writers create their instant folders in it concurrently,
/// and removing a folder that another writer is about to create a child in
/// would fail that write.
fn remove_emptied_temp_folders(file: &std::path::Path, known: &std::sync::Mutex<std::collections::HashSet<PathBuf>>) {
    let Some(temp) = file.ancestors().find(|a| a.file_name().is_some_and(|n| n == ".temp")) else { return };
    let mut dir = file.parent();
    while let Some(d) = dir.filter(|d| *d != temp) {
        if std::fs::remove_dir(d).is_err() && !(only_staging_files(d) && std::fs::remove_dir(d).is_ok()) {
            // An instant's folder may still hold partition folders in which a
            // writer killed while creating its first marker left only that
            // marker's staging file: they go too, and then the folder.
            let instant_folder = d.parent() == Some(temp);
            if !(instant_folder && sweep_staging_folders(d) && std::fs::remove_dir(d).is_ok()) {
                break;
            }
        }
        if let Ok(mut known) = known.lock() {
            known.remove(d);
        }
        dir = d.parent();
    }
}

/// Whether `dir` holds nothing but staging files (`<name>#<n>`), and if so
/// deletes them. Inside an instant's marker folder, once its last marker is
/// deleted, these are what a writer killed while creating a marker left:
/// nobody else can see or remove them. Stops at the first other entry.
fn only_staging_files(dir: &std::path::Path) -> bool {
    let is_staging = |name: &std::ffi::OsStr| {
        name.to_str()
            .and_then(|n| n.rsplit_once('#'))
            .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    let mut staged = Vec::new();
    for e in entries {
        let Ok(e) = e else { return false };
        if !is_staging(&e.file_name()) || e.file_type().map_or(true, |t| !t.is_file()) {
            return false;
        }
        staged.push(e.path());
    }
    staged.iter().all(|p| std::fs::remove_file(p).is_ok())
}

/// Removes the sub-folders of `dir` (recursively) that hold nothing but
/// staging files, then `dir`'s own staging files if it holds nothing else;
/// true when `dir` is then empty.
fn sweep_staging_folders(dir: &std::path::Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) && sweep_staging_folders(&e.path()) {
            let _ = std::fs::remove_dir(e.path());
        }
    }
    only_staging_files(dir)
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
        let r = self.inner.complete().await?;
        self.store.sync(&self.location).await?;
        Ok(r)
    }
    async fn abort(&mut self) -> object_store::Result<()> {
        self.inner.abort().await
    }
}

#[async_trait]
impl ObjectStore for DurableLocalStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let r = self.inner.put_opts(location, payload, opts).await?;
        self.sync(location).await?;
        Ok(r)
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
        self.inner.get_ranges(location, ranges).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        use futures::StreamExt;
        // Before each delete, the staging files beside the file (they must go
        // even when the file itself never appeared); after it, the folders it
        // emptied. Both touch the file system directly, off the async threads.
        let (before, after, known) = (self.inner.clone(), self.inner.clone(), self.durable_dirs.clone());
        let locations = locations
            .then(move |location| {
                let file = location.as_ref().ok().and_then(|l| before.path_to_filesystem(l).ok());
                async move {
                    if let Some(file) = file {
                        let _ = tokio::task::spawn_blocking(move || remove_staging(&file)).await;
                    }
                    location
                }
            })
            .boxed();
        self.inner
            .delete_stream(locations)
            .then(move |deleted| {
                let file = deleted.as_ref().ok().and_then(|l| after.path_to_filesystem(l).ok());
                let known = known.clone();
                async move {
                    if let Some(file) = file {
                        let _ = tokio::task::spawn_blocking(move || remove_emptied_temp_folders(&file, &known)).await;
                    }
                    deleted
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
        self.inner.copy_opts(from, to, options).await?;
        self.sync(to).await
    }
}

#[cfg(test)]
mod tests {
    use object_store::ObjectStoreExt;

    use super::*;

    #[tokio::test]
    async fn deletes_take_staging_leftovers_and_emptied_folders_with_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = DurableLocalStore::new();
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
        let data = Path::from_absolute_path(dir.path().join("t/city=oslo/x.log")).unwrap();
        store.put(&data, PutPayload::from_static(b"x")).await.unwrap();
        store.delete(&data).await.unwrap();
        assert!(dir.path().join("t/city=oslo").is_dir());
    }
}
