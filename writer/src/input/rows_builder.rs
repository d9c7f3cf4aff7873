//! The table's columns built record by record from JSON: the one home of
//! the rules for what a record may give or leave out, shared by the
//! reference decoding and the streaming one.

use arrow::array::{ArrayRef, BooleanBuilder, RecordBatch};
use tributary_format::TableSchema;

use super::column::Column;
use super::rows::{Rows, bad};
use super::scalar::Scalar;
use crate::error::{Error, Result};

/// A field's fault: its column and the reason.
pub(super) type Fault = (usize, String);

/// Builds the table's columns record by record: the one home of the rules
/// for what a JSON record may give a column, shared by the reference
/// decoding and the streaming one.
pub(super) struct RowsBuilder<'s> {
    pub(super) schema: &'s TableSchema,
    cols: Vec<Column>,
    deleted: BooleanBuilder,
    any_deleted: bool,
    /// Which columns the current record gave.
    seen: Vec<bool>,
    /// Each record's number (line), for the record key's errors.
    records: Vec<usize>,
}

impl<'s> RowsBuilder<'s> {
    pub(super) fn new(schema: &'s TableSchema, capacity: usize) -> Result<Self> {
        let fields = schema.arrow().fields();
        let cols = fields
            .iter()
            .map(|f| {
                Column::new(f.data_type(), capacity).ok_or_else(|| Error::InvalidInput {
                    what: format!("column `{}`", f.name()),
                    reason: format!("type {} is not supported for writing yet", f.data_type()),
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            schema,
            cols,
            deleted: BooleanBuilder::with_capacity(capacity),
            any_deleted: false,
            seen: vec![false; fields.len()],
            records: Vec::with_capacity(capacity),
        })
    }

    /// Whether column `i` must hold a value: the ordering field, and a key
    /// field (but a composite key's nullable field may be null, written
    /// `__null__`).
    fn required(&self, i: usize) -> bool {
        let is_key = self.schema.is_key(i);
        let null_key_ok =
            is_key && self.schema.record_key().is_composite() && self.schema.arrow().field(i).is_nullable();
        (is_key && !null_key_ok) || self.schema.is_ordering(i)
    }

    fn missing_required(&self, i: usize) -> Fault {
        let what = if self.schema.is_key(i) { "missing record key" } else { "missing ordering value" };
        (i, what.to_string())
    }

    /// The current record gives column `i` the value `v` (null included).
    pub(super) fn given(&mut self, i: usize, v: Scalar<'_>) -> std::result::Result<(), Fault> {
        if std::mem::replace(&mut self.seen[i], true) {
            return Err((i, "given twice".into()));
        }
        match v {
            Scalar::Null if self.required(i) => Err(self.missing_required(i)),
            Scalar::Null if self.schema.arrow().field(i).is_nullable() => {
                self.cols[i].null();
                Ok(())
            }
            Scalar::Null => Err((i, "null in a non-nullable column".into())),
            v => self.cols[i].push(v).map_err(|reason| (i, reason)),
        }
    }

    /// The current record leaves column `i` out: it takes its schema
    /// default, or null; a key field takes none (every record names its
    /// key), and a delete needs no value in a non-nullable column.
    pub(super) fn missing(&mut self, i: usize, is_deleted: bool) -> std::result::Result<(), Fault> {
        self.seen[i] = true;
        if self.schema.is_key(i) {
            return Err((i, "missing record key".into()));
        }
        match self.schema.default_of(i).filter(|d| !d.is_null()) {
            Some(d) => self.cols[i].push(Scalar::of(d)).map_err(|reason| (i, reason)),
            None if self.required(i) => Err(self.missing_required(i)),
            None if self.schema.arrow().field(i).is_nullable() => {
                self.cols[i].null();
                Ok(())
            }
            None if is_deleted => {
                self.cols[i].zero();
                Ok(())
            }
            None => Err((i, "missing value for a non-nullable column".into())),
        }
    }

    /// Ends record number `record`: fills the columns it left out.
    pub(super) fn end_record(&mut self, record: usize, is_deleted: bool) -> std::result::Result<(), Fault> {
        for i in 0..self.seen.len() {
            if !self.seen[i] {
                self.missing(i, is_deleted)?;
            }
            self.seen[i] = false;
        }
        self.any_deleted |= is_deleted;
        self.deleted.append_value(is_deleted);
        self.records.push(record);
        Ok(())
    }

    pub(super) fn finish(mut self, source: &str) -> Result<Rows> {
        let first = self.records.first().copied().unwrap_or(1);
        let columns: Vec<ArrayRef> = self.cols.into_iter().map(Column::finish).collect();
        let batch = RecordBatch::try_new(self.schema.arrow().clone(), columns)
            .map_err(|e| bad(source, first, None, format!("cannot build rows: {e}")))?;
        let deleted = self.any_deleted.then(|| self.deleted.finish());
        let records = self.records;
        Rows::new(self.schema, batch, deleted, source, |row| records.get(row).copied().unwrap_or(first))
    }
}
