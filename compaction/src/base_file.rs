//! Writing a new base file: Parquet encoded into chunks of one size, each
//! chunk handed to the upload as it is.
//!
//! Parquet's `AsyncArrowWriter` encodes each row group into a fresh buffer
//! that grows by doubling, then hands it to an `AsyncWrite`, and
//! `object_store`'s `BufWriter` copies it again into the part it fills.
//! Here the synchronous `ArrowWriter` writes into [`Chunks`]: a row group's
//! pages are copied once, into chunks of [`CHUNK_BYTES`], and a full chunk
//! goes to [`BufWriter::put`], which puts it into an upload part without a
//! copy. The chunks are of one size, so the allocator hands the memory of
//! an uploaded part back for the next ones.

use std::io::Write;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use object_store::ObjectStore;
use object_store::buffered::BufWriter;
use object_store::path::Path;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use std::sync::Arc;

use crate::error::{Error, Result};

/// Bytes per chunk of encoded Parquet.
const CHUNK_BYTES: usize = 1 << 20;

/// Parquet bytes in chunks of [`CHUNK_BYTES`]: the full ones, and the one
/// being filled.
#[derive(Default)]
struct Chunks {
    full: Vec<Bytes>,
    open: Vec<u8>,
}

impl Write for Chunks {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.open.capacity() == 0 {
            self.open.reserve_exact(CHUNK_BYTES);
        }
        let n = buf.len().min(CHUNK_BYTES - self.open.len());
        self.open.extend_from_slice(&buf[..n]);
        if self.open.len() == CHUNK_BYTES {
            self.full.push(std::mem::take(&mut self.open).into());
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A new base file being written to the store (see the module notes).
pub(crate) struct BaseFileWriter {
    parquet: ArrowWriter<Chunks>,
    upload: BufWriter,
    path: Path,
    /// Bytes handed to the upload.
    size: u64,
}

impl BaseFileWriter {
    /// A writer of `schema`'s rows, with `props`, to `path` in `store`,
    /// uploaded in parts of `part_bytes` (at most `parts_at_once` uploading
    /// at once).
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        path: Path,
        schema: SchemaRef,
        props: WriterProperties,
        part_bytes: usize,
        parts_at_once: usize,
    ) -> Result<Self> {
        let parquet = ArrowWriter::try_new(Chunks::default(), schema, Some(props)).map_err(|e| Error::Internal {
            what: format!("opening the Parquet writer of {path}"),
            reason: e.to_string(),
        })?;
        let upload = BufWriter::with_capacity(store, path.clone(), part_bytes).with_max_concurrency(parts_at_once);
        Ok(Self { parquet, upload, path, size: 0 })
    }

    /// Writes `batch`'s rows; the row groups it completes go to the upload.
    pub(crate) async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.parquet.write(batch).map_err(|e| self.encoding_failed(e))?;
        let full = std::mem::take(&mut self.parquet.inner_mut().full);
        self.send(full).await
    }

    /// Writes the last row group and the footer, and completes the upload;
    /// returns the file's size. The file is in the store when this returns.
    pub(crate) async fn close(mut self) -> Result<u64> {
        self.parquet.finish().map_err(|e| self.encoding_failed(e))?;
        let chunks = self.parquet.inner_mut();
        let mut rest = std::mem::take(&mut chunks.full);
        if !chunks.open.is_empty() {
            rest.push(std::mem::take(&mut chunks.open).into());
        }
        self.send(rest).await?;
        tokio::io::AsyncWriteExt::shutdown(&mut self.upload)
            .await
            .map_err(|e| Error::Unavailable { path: self.path.to_string(), reason: e.to_string() })?;
        Ok(self.size)
    }

    async fn send(&mut self, chunks: Vec<Bytes>) -> Result<()> {
        for chunk in chunks {
            self.size += chunk.len() as u64;
            self.upload.put(chunk).await.map_err(|e| tributary_timeline::Error::store("put", &self.path, e))?;
        }
        Ok(())
    }

    fn encoding_failed(&self, e: parquet::errors::ParquetError) -> Error {
        Error::Internal { what: format!("encoding {}", self.path), reason: e.to_string() }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;

    /// A file of many chunks and several upload parts reads back whole, and
    /// its size is what the store holds.
    #[tokio::test]
    async fn a_file_of_many_chunks_reads_back_whole() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("n", DataType::Int64, false),
        ]));
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let path = Path::from("t/p/f.parquet");
        let props = WriterProperties::builder()
            .set_dictionary_enabled(false)
            .set_compression(parquet::basic::Compression::UNCOMPRESSED)
            .set_max_row_group_row_count(Some(50_000))
            .build();
        let mut writer =
            BaseFileWriter::new(store.clone(), path.clone(), schema.clone(), props, 5 * CHUNK_BYTES, 1).unwrap();
        let mut want = Vec::new();
        for b in 0..8i64 {
            let ids: Vec<String> = (0..40_000).map(|i| format!("key-{b}-{i:08}-{:0>40}", i * 7)).collect();
            let n: Vec<i64> = (0..40_000).map(|i| b * 40_000 + i).collect();
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![Arc::new(StringArray::from(ids)), Arc::new(Int64Array::from(n))],
            )
            .unwrap();
            writer.write(&batch).await.unwrap();
            want.push(batch);
        }
        let size = writer.close().await.unwrap();
        let bytes = store.get(&path).await.unwrap().bytes().await.unwrap();
        assert_eq!(bytes.len() as u64, size);
        assert!(size > 10 * CHUNK_BYTES as u64, "{size} bytes: more chunks than one upload part");
        let got: Vec<RecordBatch> =
            ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap().build().unwrap().map(|b| b.unwrap()).collect();
        let got = arrow::compute::concat_batches(&schema, &got).unwrap();
        assert_eq!(got, arrow::compute::concat_batches(&schema, &want).unwrap());
    }
}
