//! Where a bounded reader's merged rows go as the merge finds them
//! ([`crate::stream_slice`]).

use arrow::array::RecordBatch;

/// Takes a slice's merged rows as the merge finds them.
pub trait RowSink: Send {
    /// Takes a batch of merged rows (schema `schema.arrow_with_meta()`);
    /// `false` ends the merge: the reader takes no more.
    fn take(&mut self, rows: RecordBatch) -> impl Future<Output = bool> + Send;
}
