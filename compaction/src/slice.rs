//! Reading a file slice: base Parquet rows and log blocks, as versions in
//! write order for the merge. Shared by the snapshot reader and the compactor.

use arrow::array::{ArrayRef, RecordBatch, new_null_array};
use arrow::datatypes::SchemaRef;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tributary_timeline::fs_view::FileSlice;
use tributary_timeline::{InstantTime, TableLocation, Timeline};
use tributary_writer::codec::{decode_data_block, decode_delete_content};
use tributary_writer::log_block::{BlockType, HeaderKey, LogBlock};
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
    let path = log.to_string();
    let bytes = loc.get(log).await?;
    let mut out = Vec::new();
    for block in LogBlock::decode_all(&bytes, &path)? {
        if let Some(t) = block.header(HeaderKey::InstantTime)
            && let Ok(t) = InstantTime::parse(t)
            && !timeline.is_completed(&t)
        {
            continue;
        }
        match block.block_type {
            BlockType::AvroData => {
                let writer_json = block.header(HeaderKey::Schema).unwrap_or(schema.log_json());
                if block.header(HeaderKey::IsPartial) == Some("true") {
                    // A column subset: read it as written, then widen to the
                    // table with the absent columns marked absent.
                    let part = decode_data_block(&block.content, writer_json, writer_json, &path)?;
                    out.push(widen(part, schema.arrow_with_meta(), &path)?);
                } else {
                    out.push(Version::Rows(decode_data_block(&block.content, writer_json, schema.log_json(), &path)?));
                }
            }
            BlockType::Delete => out.push(Version::Deletes(decode_delete_content(&block.content, &path)?)),
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
