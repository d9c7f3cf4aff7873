//! Validated rows, what both input doors produce: the table's columns,
//! their delete flags and record keys.

use arrow::array::{BooleanArray, RecordBatch};
use tributary_format::Keys;
use tributary_format::TableSchema;

use crate::error::{Error, Result};

/// Validated rows in the table's column layout, with delete flags and
/// their record keys. Made from Arrow batches and JSON values by
/// [`Commit`](crate::Commit)'s writes, and by [`rows_from_json_lines`](crate::rows_from_json_lines).
#[derive(Debug, Clone)]
pub struct Rows {
    /// Table columns (the table's Arrow schema, without meta columns).
    pub batch: RecordBatch,
    /// `true` where the row deletes its key; `None` when nothing is deleted.
    pub deleted: Option<BooleanArray>,
    /// Each row's `_hoodie_record_key` (and what the bucket index hashes).
    keys: Keys,
}

impl Rows {
    /// Validated `batch` with its delete flags: builds the record keys, the
    /// one place they are built; a key that cannot be formed is an error
    /// naming the record (`record_of` numbers the batch's rows).
    pub(super) fn new(
        schema: &TableSchema,
        batch: RecordBatch,
        deleted: Option<BooleanArray>,
        source: &str,
        record_of: impl Fn(usize) -> usize,
    ) -> Result<Self> {
        let keys = schema
            .record_key()
            .build(&batch)
            .map_err(|e| bad(source, record_of(e.row), e.field.as_deref(), e.reason))?;
        Ok(Self { batch, deleted, keys })
    }

    /// The rows' record keys.
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.batch.num_rows()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.batch.num_rows() == 0
    }
}

/// A bad record: `reason` names what is wrong with record `record` of
/// `source` (and its `field`, if known).
pub(super) fn bad(source: &str, record: usize, field: Option<&str>, reason: impl Into<String>) -> Error {
    Error::BadRecord { input: source.to_string(), record, field: field.map(String::from), reason: reason.into() }
}
