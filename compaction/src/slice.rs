//! Reading a file slice: base Parquet rows and log blocks, as versions in
//! write order for the merge. Shared by the snapshot reader and the compactor.

use arrow::array::AsArray;
use arrow::array::{ArrayRef, RecordBatch, new_null_array};
use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tributary_timeline::fs_view::FileSlice;
use tributary_timeline::{InstantTime, TableLocation, Timeline};
use tributary_writer::codec::{decode_data_block_with, decode_delete_content};
use tributary_writer::log_block::{BlockType, HeaderKey, LogBlock};
use tributary_writer::schema::RECORD_KEY;
use tributary_writer::schema::TableSchema;

use crate::error::{Error, Result};
use crate::merge::Version;

/// The versions of one slice in write order: base rows, then each log's blocks.
pub async fn read_slice(
    loc: &TableLocation,
    schema: &TableSchema,
    slice: &FileSlice,
    timeline: &Timeline,
    base_only: bool,
) -> Result<Vec<Version>> {
    let mut out = Vec::new();
    if let Some(base) = &slice.base {
        out.extend(read_base(loc, schema, &base.file.path).await?);
    }
    if !base_only {
        for log in &slice.logs {
            out.extend(read_log(loc, schema, &log.file.path, timeline).await?);
        }
    }
    Ok(out)
}

/// The rows of a base (Parquet) file.
pub async fn read_base(
    loc: &TableLocation,
    schema: &TableSchema,
    path: &object_store::path::Path,
) -> Result<Vec<Version>> {
    let bytes = loc.get(path).await?;
    Ok(read_parquet(bytes, schema.arrow_with_meta(), path.as_ref())?.into_iter().map(Version::Rows).collect())
}

/// The versions in one log file, block by block. Blocks of instants that
/// did not complete (possible in pre-v8 logs) are skipped.
pub async fn read_log(
    loc: &TableLocation,
    schema: &TableSchema,
    log: &object_store::path::Path,
    timeline: &Timeline,
) -> Result<Vec<Version>> {
    read_log_keys(loc, schema, log, timeline, &mut |_| true).await
}

/// Rows decoded per step when a log is read through a key filter.
const FILTER_BATCH_ROWS: usize = 64 * 1024;

/// Like [`read_log`], keeping only records whose key `keep` accepts. Rows are
/// decoded and filtered a batch at a time, so memory follows what is kept.
pub async fn read_log_keys(
    loc: &TableLocation,
    schema: &TableSchema,
    log: &object_store::path::Path,
    timeline: &Timeline,
    keep: &mut (dyn FnMut(&str) -> bool + Send),
) -> Result<Vec<Version>> {
    let path = log.to_string();
    let blocks = LogBlock::decode_all(&loc.get(log).await?, &path)?;
    let mut out = Vec::new();
    for block in blocks {
        if let Some(t) = block.header(HeaderKey::InstantTime)
            && let Ok(t) = InstantTime::parse(t)
            && !timeline.is_completed(&t)
        {
            continue;
        }
        match block.block_type {
            BlockType::AvroData => {
                let writer_json = block.header(HeaderKey::Schema).unwrap_or(schema.log_json());
                let partial = block.header(HeaderKey::IsPartial) == Some("true");
                // A partial block is read as written, then widened to the table.
                let reader_json = if partial { writer_json } else { schema.log_json() };
                decode_data_block_with(&block.content, writer_json, reader_json, &path, FILTER_BATCH_ROWS, |b| {
                    let b = filter_keys(b, keep).map_err(|e| tributary_writer::Error::InvalidInput {
                        what: path.clone(),
                        reason: e.to_string(),
                    })?;
                    if b.num_rows() > 0 {
                        out.push(if partial {
                            widen(b, schema.arrow_with_meta(), &path).map_err(|e| {
                                tributary_writer::Error::InvalidInput { what: path.clone(), reason: e.to_string() }
                            })?
                        } else {
                            Version::Rows(b)
                        });
                    }
                    Ok(())
                })?;
            }
            BlockType::Delete => {
                let mut d = decode_delete_content(&block.content, &path)?;
                d.retain(|r| keep(&r.key));
                out.push(Version::Deletes(d));
            }
            BlockType::Command => {}
            other => {
                return Err(Error::Invalid {
                    what: path.clone(),
                    reason: format!("{other:?} log blocks are not supported"),
                });
            }
        }
    }
    Ok(out)
}

/// The rows of `b` whose record key `keep` accepts.
fn filter_keys(b: RecordBatch, keep: &mut (dyn FnMut(&str) -> bool + Send)) -> Result<RecordBatch> {
    let keys = b.column(RECORD_KEY).as_string::<i32>();
    let mask: arrow::array::BooleanArray = keys.iter().map(|k| Some(k.is_some_and(&mut *keep))).collect();
    if mask.true_count() == b.num_rows() {
        return Ok(b);
    }
    arrow::compute::filter_record_batch(&b, &mask)
        .map_err(|e| Error::Invalid { what: "log".into(), reason: e.to_string() })
}

/// A partial batch laid out as the whole table: absent columns are nulls and
/// marked absent.
fn widen(part: RecordBatch, target: &SchemaRef, path: &str) -> Result<Version> {
    let mut present = Vec::with_capacity(target.fields().len());
    let columns: Vec<ArrayRef> = target
        .fields()
        .iter()
        .map(|f| match part.column_by_name(f.name()) {
            Some(c) => {
                present.push(true);
                if c.data_type() == f.data_type() {
                    Ok(c.clone())
                } else {
                    arrow::compute::cast(c, f.data_type()).map_err(|e| Error::Invalid {
                        what: path.to_string(),
                        reason: format!("column {}: {e}", f.name()),
                    })
                }
            }
            None => {
                present.push(false);
                Ok(new_null_array(f.data_type(), part.num_rows()))
            }
        })
        .collect::<Result<_>>()?;
    // Absent columns are null even where the table says non-null.
    let nullable = arrow::datatypes::Schema::new(
        target.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
    );
    let batch = RecordBatch::try_new(std::sync::Arc::new(nullable), columns)
        .map_err(|e| Error::Invalid { what: path.to_string(), reason: e.to_string() })?;
    Ok(Version::Partial { batch, present: present.into() })
}

/// Reads a Parquet file, matching columns to `target` by name (casting
/// types, filling absent nullable columns with nulls).
pub fn read_parquet(bytes: bytes::Bytes, target: &SchemaRef, path: &str) -> Result<Vec<RecordBatch>> {
    let err = |e: &dyn std::fmt::Display| Error::Invalid { what: path.to_string(), reason: e.to_string() };
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(|e| err(&e))?
        .with_batch_size(8192)
        .build()
        .map_err(|e| err(&e))?;
    let mut out = Vec::new();
    for b in reader {
        let b = b.map_err(|e| err(&e))?;
        let columns: Vec<ArrayRef> = target
            .fields()
            .iter()
            .map(|f| match b.column_by_name(f.name()) {
                Some(c) if c.data_type() == f.data_type() => Ok(c.clone()),
                Some(c) => {
                    arrow::compute::cast(c, f.data_type()).map_err(|e| err(&format!("column {}: {e}", f.name())))
                }
                None => Ok(new_null_array(f.data_type(), b.num_rows())),
            })
            .collect::<Result<_>>()?;
        out.push(RecordBatch::try_new(target.clone(), columns).map_err(|e| err(&e))?);
    }
    Ok(out)
}
