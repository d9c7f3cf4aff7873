//! The Arrow door: a [`RecordBatch`] matched to the table's columns by
//! name and cast to their types.

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch};
use tributary_format::{IS_DELETED, TableSchema};

use super::rows::{Rows, bad};
use crate::error::Result;

/// Casts that fail on a value that does not convert (Arrow's default
/// turns it into a null).
const STRICT: arrow::compute::CastOptions<'static> =
    arrow::compute::CastOptions { safe: false, format_options: arrow::util::display::FormatOptions::new() };

/// Validates an Arrow batch against the table schema. Columns are matched by
/// name and cast to the table's types (a value that does not convert is an
/// error naming the column); a missing nullable column is filled
/// with nulls; an optional boolean `_hoodie_is_deleted` column marks deletes.
pub fn rows_from_batch(schema: &TableSchema, batch: &RecordBatch, source: &str) -> Result<Rows> {
    let input = batch.schema();
    for f in input.fields() {
        if f.name() != IS_DELETED && schema.arrow().index_of(f.name()).is_err() {
            return Err(bad(source, 1, Some(f.name()), "unknown column (not in the table schema)"));
        }
    }
    let n = batch.num_rows();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.arrow().fields().len());
    for (i, field) in schema.arrow().fields().iter().enumerate() {
        let col = match batch.column_by_name(field.name()) {
            Some(c) if c.data_type() == field.data_type() => c.clone(),
            // A value that does not convert is an error, not a null.
            Some(c) => arrow::compute::cast_with_options(c, field.data_type(), &STRICT).map_err(|e| {
                bad(
                    source,
                    1,
                    Some(field.name()),
                    format!("cannot convert {} to {}: {e}", c.data_type(), field.data_type()),
                )
            })?,
            None if schema.is_key(i) => return Err(bad(source, 1, Some(field.name()), "missing record key column")),
            None if field.is_nullable() => arrow::array::new_null_array(field.data_type(), n),
            None => return Err(bad(source, 1, Some(field.name()), "missing column")),
        };
        // A composite key's nullable fields may hold nulls (`__null__`).
        let key_needs_value = schema.is_key(i) && (!schema.record_key().is_composite() || !field.is_nullable());
        if col.null_count() > 0 && (!field.is_nullable() || key_needs_value || schema.is_ordering(i)) {
            let row = (0..n).find(|r| col.is_null(*r)).unwrap_or(0);
            let what = if schema.is_key(i) {
                "missing record key"
            } else if schema.is_ordering(i) {
                "missing ordering value"
            } else {
                "null in a non-nullable column"
            };
            return Err(bad(source, row + 1, Some(field.name()), what));
        }
        columns.push(col);
    }
    let deleted = match batch.column_by_name(IS_DELETED) {
        None => None,
        Some(c) => {
            let b = c
                .as_any()
                .downcast_ref::<BooleanArray>()
                .ok_or_else(|| bad(source, 1, Some(IS_DELETED), "must be boolean"))?;
            (b.true_count() > 0).then(|| b.clone())
        }
    };
    let batch = RecordBatch::try_new(schema.arrow().clone(), columns)
        .map_err(|e| bad(source, 1, None, format!("cannot build rows: {e}")))?;
    Rows::new(schema, batch, deleted, source, |row| row + 1)
}
