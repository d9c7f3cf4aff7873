//! Parquet files read through the store by ranges: the one
//! [`AsyncFileReader`] of the crates (history files here, base files in the
//! merge crate).
//!
//! Opening a file ([`StoreFile::open`]) fetches its last [`TAIL_BYTES`] in
//! one request, which also answers its size: all of a small file, so reading
//! it needs nothing more, and the footer of most others. What a footer
//! decodes to ([`arrow_metadata`]) is kept once per process, keyed by the
//! footer's bytes, as [`tributary_format::memo`] keeps what other small
//! files parse to: readers open the same base files over and over, and
//! decoding a footer and mapping its schema to Arrow costs more than reading
//! a small file's rows.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::{ParquetError, Result};
use parquet::file::FOOTER_SIZE;
use parquet::file::metadata::{FooterTail, PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use tributary_format::Memo;

/// How many bytes of a file's end [`StoreFile::open`] fetches.
pub const TAIL_BYTES: u64 = 256 << 10;

/// A Parquet file read through the store by ranges (a store error comes
/// back as [`ParquetError::External`]; [`crate::Error::parquet`] unwraps it).
#[derive(Debug, Clone)]
pub struct StoreFile {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    /// The file's last bytes, fetched on opening (empty if not).
    tail: Bytes,
}

impl StoreFile {
    /// The file at `path` in `store`, `size` bytes long; nothing is fetched
    /// until asked for.
    pub fn new(store: Arc<dyn ObjectStore>, path: Path, size: u64) -> Self {
        Self { store, path, size, tail: Bytes::new() }
    }

    /// Opens the file at `path` in `store`: one request fetches its size
    /// and its last [`TAIL_BYTES`] (a HEAD and a ranged GET on a store
    /// that serves no suffix ranges).
    pub async fn open(store: Arc<dyn ObjectStore>, path: Path) -> crate::Result<Self> {
        let suffix = GetOptions::new().with_range(Some(GetRange::Suffix(TAIL_BYTES)));
        let (size, tail) = match store.get_opts(&path, suffix).await {
            Ok(got) => {
                let size = got.meta.size;
                (size, got.bytes().await.map_err(|e| crate::Error::store("get", &path, e))?)
            }
            Err(object_store::Error::NotSupported { .. }) => {
                let size = store.head(&path).await.map_err(|e| crate::Error::store("head", &path, e))?.size;
                let range = size.saturating_sub(TAIL_BYTES)..size;
                (size, store.get_range(&path, range).await.map_err(|e| crate::Error::store("get", &path, e))?)
            }
            Err(e) => return Err(crate::Error::store("get", &path, e)),
        };
        Ok(Self { store, path, size, tail })
    }

    /// All of the file, when [`StoreFile::open`] fetched it whole (a file
    /// of at most [`TAIL_BYTES`]).
    pub fn whole(&self) -> Option<&Bytes> {
        (self.tail.len() as u64 == self.size).then_some(&self.tail)
    }

    /// The file's Arrow reader metadata under default options (no page
    /// index), decoded once per process per footer (`arrow_metadata`).
    pub async fn arrow_metadata(&mut self) -> Result<ArrowReaderMetadata> {
        let size = self.size;
        let last = self.get_bytes(size.saturating_sub(FOOTER_SIZE as u64)..size).await?;
        let len = footer_len(&last, size)?;
        let footer = self.get_bytes(size - len as u64..size).await?;
        arrow_metadata(&footer)
    }

    /// [`StoreFile::arrow_metadata`] with the file's page indexes (each
    /// column chunk's page statistics and page places) when it has them, so
    /// that a reader can skip pages; they sit before the footer, and a
    /// file's are fetched in one request unless the opening tail holds
    /// them. Decoded anew each time: only filtered reads ask for them.
    pub async fn arrow_metadata_with_page_index(&mut self) -> Result<ArrowReaderMetadata> {
        let plain = self.arrow_metadata().await?;
        let mut reader = ParquetMetaDataReader::new_with_metadata(plain.metadata().as_ref().clone())
            .with_page_index_policy(PageIndexPolicy::Optional);
        reader.load_page_index(&mut *self).await?;
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
        ArrowReaderMetadata::try_new(Arc::new(reader.finish()?), options)
    }
}

/// The length of the footer (metadata and its 8 closing bytes) of a
/// `size`-byte Parquet file whose last 8 bytes are `last`.
fn footer_len(last: &[u8], size: u64) -> Result<usize> {
    let last: &[u8; FOOTER_SIZE] = last
        .try_into()
        .map_err(|_| ParquetError::General(format!("a {size}-byte file is too short for a Parquet footer")))?;
    let len = FooterTail::try_new(last)?.metadata_length() + FOOTER_SIZE;
    if len as u64 > size {
        return Err(ParquetError::General(format!("the Parquet footer says {len} bytes, the file has {size}")));
    }
    Ok(len)
}

/// The Arrow reader metadata (default options) of the Parquet file that
/// ends with `footer` (its metadata and 8 closing bytes); decoded once per
/// process per footer content, so a changed file is never a stale answer.
pub(crate) fn arrow_metadata(footer: &[u8]) -> Result<ArrowReaderMetadata> {
    static DECODED: Memo<std::result::Result<ArrowReaderMetadata, String>> = Memo::new();
    DECODED
        .get_or(footer, || {
            let metadata = footer
                .len()
                .checked_sub(FOOTER_SIZE)
                .ok_or_else(|| ParquetError::General("a Parquet footer shorter than 8 bytes".into()))
                .and_then(|end| ParquetMetaDataReader::decode_metadata(&footer[..end]))
                .map_err(|e| e.to_string())?;
            ArrowReaderMetadata::try_new(Arc::new(metadata), ArrowReaderOptions::new()).map_err(|e| e.to_string())
        })
        .map_err(ParquetError::General)
}

/// The Arrow reader metadata of a whole Parquet file in memory
/// (`arrow_metadata` of its footer).
pub fn arrow_metadata_of_file(file: &Bytes) -> Result<ArrowReaderMetadata> {
    let size = file.len() as u64;
    let len = footer_len(&file[file.len().saturating_sub(FOOTER_SIZE)..], size)?;
    arrow_metadata(&file[file.len() - len..])
}

impl AsyncFileReader for StoreFile {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes>> {
        Box::pin(async move {
            let tail_start = self.size - self.tail.len() as u64;
            if range.start >= tail_start && range.end <= self.size {
                let at = |o: u64| (o - tail_start) as usize;
                return Ok(self.tail.slice(at(range.start)..at(range.end)));
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counting::{CountingStore, Requests};
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use futures::TryStreamExt;
    use futures::stream::BoxStream;
    use object_store::memory::InMemory;
    use object_store::{
        CopyOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, PutMultipartOptions, PutOptions, PutPayload,
        PutResult,
    };
    use parquet::arrow::{ArrowWriter, ParquetRecordBatchStreamBuilder};

    /// A Parquet file of `rows` rows of one long column (a pseudo-random
    /// sequence, so that it does not compress away).
    fn parquet_bytes(rows: i64) -> (Vec<u8>, Vec<i64>) {
        let values: Vec<i64> = (0..rows).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64)).collect();
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(values.clone()))]).unwrap();
        let mut out = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut out, schema, None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        (out, values)
    }

    async fn read_all(store: Arc<dyn ObjectStore>, path: &Path) -> Vec<i64> {
        let mut file = StoreFile::open(store, path.clone()).await.unwrap();
        let metadata = file.arrow_metadata().await.unwrap();
        let batches: Vec<RecordBatch> = ParquetRecordBatchStreamBuilder::new_with_metadata(file, metadata)
            .build()
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        batches
            .iter()
            .flat_map(|b| b.column(0).as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec())
            .collect()
    }

    #[tokio::test]
    async fn a_small_file_is_read_in_one_request() {
        let (bytes, values) = parquet_bytes(1_000);
        assert!((bytes.len() as u64) < TAIL_BYTES);
        let store = Arc::new(CountingStore::new(Arc::new(InMemory::new())));
        let path = Path::from("t/p/small.parquet");
        store.put(&path, bytes.into()).await.unwrap();
        store.take();
        assert_eq!(read_all(store.clone(), &path).await, values);
        assert_eq!(store.take(), Requests { gets: 1, ..Requests::default() });
        // The footer decoded once is the same metadata again.
        let mut file = StoreFile::open(store.clone(), path.clone()).await.unwrap();
        let metadata = file.arrow_metadata().await.unwrap();
        assert_eq!(metadata.metadata().file_metadata().num_rows(), 1_000);
    }

    #[tokio::test]
    async fn a_large_file_fetches_what_its_tail_lacks() {
        let (bytes, values) = parquet_bytes(100_000);
        assert!(bytes.len() as u64 > TAIL_BYTES);
        let store = Arc::new(CountingStore::new(Arc::new(InMemory::new())));
        let path = Path::from("large.parquet");
        store.put(&path, bytes.into()).await.unwrap();
        store.take();
        assert_eq!(read_all(store.clone(), &path).await, values);
        let requests = store.take();
        assert!(requests.gets > 1 && requests.heads == 0, "{requests:?}");
    }

    /// A store that serves no suffix ranges, as Azure's.
    #[derive(Debug)]
    struct NoSuffix(InMemory);

    impl std::fmt::Display for NoSuffix {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "NoSuffix")
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for NoSuffix {
        async fn put_opts(&self, l: &Path, p: PutPayload, o: PutOptions) -> object_store::Result<PutResult> {
            self.0.put_opts(l, p, o).await
        }
        async fn put_multipart_opts(
            &self,
            l: &Path,
            o: PutMultipartOptions,
        ) -> object_store::Result<Box<dyn MultipartUpload>> {
            self.0.put_multipart_opts(l, o).await
        }
        async fn get_opts(&self, l: &Path, o: GetOptions) -> object_store::Result<GetResult> {
            if let Some(GetRange::Suffix(_)) = o.range {
                return Err(object_store::Error::NotSupported { source: "no suffix ranges".into() });
            }
            self.0.get_opts(l, o).await
        }
        fn delete_stream(
            &self,
            l: BoxStream<'static, object_store::Result<Path>>,
        ) -> BoxStream<'static, object_store::Result<Path>> {
            self.0.delete_stream(l)
        }
        fn list(&self, p: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
            self.0.list(p)
        }
        async fn list_with_delimiter(&self, p: Option<&Path>) -> object_store::Result<ListResult> {
            self.0.list_with_delimiter(p).await
        }
        async fn copy_opts(&self, f: &Path, t: &Path, o: CopyOptions) -> object_store::Result<()> {
            self.0.copy_opts(f, t, o).await
        }
    }

    #[tokio::test]
    async fn a_store_without_suffix_ranges_is_asked_for_the_size_first() {
        let (bytes, values) = parquet_bytes(1_000);
        let store = Arc::new(NoSuffix(InMemory::new()));
        let path = Path::from("small.parquet");
        store.put(&path, bytes.into()).await.unwrap();
        assert_eq!(read_all(store, &path).await, values);
    }

    #[tokio::test]
    async fn a_bad_footer_is_an_error_naming_its_length() {
        let store = Arc::new(InMemory::new());
        let path = Path::from("bad.parquet");
        let mut bytes = vec![0u8; 100];
        bytes.extend_from_slice(&1_000_000u32.to_le_bytes());
        bytes.extend_from_slice(b"PAR1");
        store.put(&path, bytes.into()).await.unwrap();
        let mut file = StoreFile::open(store.clone(), path.clone()).await.unwrap();
        let e = file.arrow_metadata().await.unwrap_err().to_string();
        assert!(e.contains("1000008 bytes, the file has 108"), "{e}");
        store.put(&path, b"PAR1".to_vec().into()).await.unwrap();
        let mut file = StoreFile::open(store, path).await.unwrap();
        let e = file.arrow_metadata().await.unwrap_err().to_string();
        assert!(e.contains("too short for a Parquet footer"), "{e}");
        // And a missing file is the store's error, naming its path.
        let missing = StoreFile::open(Arc::new(InMemory::new()), Path::from("gone.parquet")).await.unwrap_err();
        assert!(missing.to_string().contains("gone.parquet"), "{missing}");
    }
}
