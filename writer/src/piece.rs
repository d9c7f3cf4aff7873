//! A piece of a write: the rows of one batch routed to one bucket of one
//! partition, the message an open commit sends its writer tasks.

use std::sync::Arc;

use arrow::array::StringArray;
use tributary_format::TableDatums;

use crate::input::Rows;

/// A piece of a write routed to one bucket.
pub(crate) struct Piece {
    pub(crate) rows: Arc<Rows>,
    /// The Avro datums of the rows' table columns, when the write encoded
    /// them (it does when versions do not combine).
    pub(crate) datums: Option<Arc<TableDatums>>,
    /// The memory a row of `rows` holds, about.
    pub(crate) row_bytes: usize,
    pub(crate) keys: Arc<StringArray>,
    pub(crate) partition: Arc<str>,
    pub(crate) bucket: u32,
    pub(crate) indices: Vec<u32>,
}

impl std::fmt::Debug for Piece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Piece({}/{}: {} rows)", self.partition, self.bucket, self.indices.len())
    }
}
