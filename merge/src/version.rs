//! A version: one unit of a file slice, in write order.

use std::sync::Arc;

use arrow::array::RecordBatch;
use tributary_format::DeleteRecord;

/// One unit of a slice, in write order.
#[derive(Debug, Clone)]
pub enum Version {
    /// Rows with meta columns first (the table's `arrow_with_meta` schema).
    Rows(RecordBatch),
    /// Rows of a partial writer, laid out as the table; `present[c]` says
    /// whether column `c` was written (absent columns keep their values).
    Partial {
        /// The rows, absent columns null.
        batch: RecordBatch,
        /// Which columns were written.
        present: Arc<[bool]>,
    },
    /// Deleted keys.
    Deletes(Vec<DeleteRecord>),
}

impl Version {
    /// The memory the version holds: its batch's buffers, or its deletes
    /// with their keys and partitions.
    pub fn held_bytes(&self) -> usize {
        match self {
            Version::Rows(batch) => batch.get_array_memory_size(),
            Version::Partial { batch, present } => batch.get_array_memory_size() + present.len(),
            Version::Deletes(deletes) => deletes
                .iter()
                .map(|d| std::mem::size_of::<DeleteRecord>() + d.key.capacity() + d.partition.capacity())
                .sum(),
        }
    }
}
