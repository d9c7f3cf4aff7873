//! Fault-injecting stores: wrappers over a table's `ObjectStore` that fail
//! chosen operations, to test crashes between the steps of a protocol.

use std::sync::Arc;

use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult,
};

/// A store whose puts to paths that `fails` picks fail, as if the process
/// died just before them; every other operation goes to the inner store.
pub struct FailPuts {
    inner: Arc<dyn ObjectStore>,
    what: &'static str,
    fails: Box<dyn Fn(&str) -> bool + Send + Sync>,
}

impl FailPuts {
    /// Fails the puts whose path `fails` picks, with `what` as the reason.
    pub fn new(
        inner: Arc<dyn ObjectStore>,
        what: &'static str,
        fails: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self { inner, what, fails: Box::new(fails) }
    }

    /// A compactor that dies after writing its base files, before its
    /// completed `<C>_<c>.commit` is created.
    pub fn before_commit(inner: Arc<dyn ObjectStore>) -> Self {
        Self::new(inner, "killed before commit", |p| p.ends_with(".commit"))
    }
}

impl std::fmt::Debug for FailPuts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FailPuts({}, {:?})", self.inner, self.what)
    }
}

impl std::fmt::Display for FailPuts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FailPuts({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for FailPuts {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        if (self.fails)(location.as_ref()) {
            return Err(object_store::Error::Generic { store: "fault", source: self.what.into() });
        }
        self.inner.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        if (self.fails)(location.as_ref()) {
            return Err(object_store::Error::Generic { store: "fault", source: self.what.into() });
        }
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
