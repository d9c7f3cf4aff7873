//! Parquet files read through the store by ranges: the one
//! [`AsyncFileReader`] of the crates (history files here, base files in the
//! merge crate).

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

/// A Parquet file read through the store by ranges (a store error comes
/// back as [`ParquetError::External`]; [`crate::Error::parquet`] unwraps it).
#[derive(Debug, Clone)]
pub struct StoreFile {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
}

impl StoreFile {
    /// The file at `path` in `store`, `size` bytes long.
    pub fn new(store: Arc<dyn ObjectStore>, path: Path, size: u64) -> Self {
        Self { store, path, size }
    }
}

impl AsyncFileReader for StoreFile {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes>> {
        Box::pin(async move {
            self.store.get_range(&self.path, range).await.map_err(|e| ParquetError::External(Box::new(e)))
        })
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, Result<Arc<ParquetMetaData>>> {
        Box::pin(async move {
            let size = self.size;
            // The options say whether to read the page index too.
            let reader = ParquetMetaDataReader::new().with_arrow_reader_options(options);
            let metadata = reader.load_and_finish(self, size).await?;
            Ok(Arc::new(metadata))
        })
    }
}
