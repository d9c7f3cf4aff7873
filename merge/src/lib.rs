//! Tributary's record merge, shared by snapshot readers and the compactor.
//!
//! The modules are private; this file re-exports what other crates use:
//!
//! - [`Error`] and [`Result`];
//! - [`Version`] (rows, partial rows or deletes, in write order), [`merge`]
//!   (merges a slice's versions by the table's rule) and [`check_merger`]
//!   (whether this build knows the table's merger);
//! - [`Combiner`], with which a writer keeps only the versions of a key it
//!   needs to store;
//! - [`merge_slice`], the one entry point for readers and the compactor: it
//!   merges the [`SliceFiles`] of a [`SliceMerge`] (whose base rows
//!   [`BaseRows`] filters, as [`written_by`] does) in a [`RowOrder`], within
//!   a [`Budget`], into a [`Merged`];
//! - [`Share`], a merge's part of a memory budget, and [`SpillArea`], where
//!   it spills.
//!
//! Each rule has one file:
//!
//! | file | owns |
//! |---|---|
//! | `version` | a version: rows, partial rows or deletes, in write order |
//! | `combine` | which of a write's versions of a key a writer needs to store |
//! | `ordering` | ordering values and how they compare; the zero-sentinel delete |
//! | `rules` | which rule merges a slice; whether this build knows the table's merger |
//! | `rows` | the row rule and the merge index that applies it |
//! | `columns` | the column rule: partial rows and sequence groups |
//! | `index` | the open-addressing key index behind `rows` |
//! | `keyed` | the key-first merge: index keys first, decode only the winners |
//! | `limits` | the memory policy: what a slice merge may hold before it folds or spills |
//! | `spill` | spill partitions, sorted runs and their merge |
//! | `read` | reading a slice's base and log files as versions |
//! | `tombstone` | what a compaction keeps of deleted keys, and for how long |
//! | `slice` | the one entry point: merge a file slice, for readers and the compactor |

#![warn(unreachable_pub)]

mod columns;
mod combine;
mod error;
mod index;
mod keyed;
mod limits;
mod ordering;
mod read;
mod rows;
mod rules;
mod sink;
mod slice;
mod spill;
#[cfg(test)]
mod test_util;
mod tombstone;
mod version;

// Errors.
pub use error::{Error, Result};

// Versions and the merge rules over them.
pub use rules::{check_merger, merge};
pub use version::Version;

// Writers: combining a write's versions of a key before they are stored.
pub use combine::Combiner;

// Merging a file slice, for snapshot readers and the compactor.
pub use read::{BaseReader, BaseRows, RowGroupFilter, SliceFiles, SliceMerge, written_by};
pub use sink::RowSink;
pub use slice::{Budget, Merged, RowOrder, merge_slice, stream_slice};

// Memory: a merge's share of the budget, and where it spills.
pub use limits::Share;
pub use spill::SpillArea;

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    #[test]
    fn public_types_are_send_sync() {
        assert_send_sync::<super::Error>();
        assert_send_sync::<super::Version>();
        assert_send_sync::<super::Budget>();
        assert_send_sync::<super::Share>();
        assert_send_sync::<super::SpillArea>();
        assert_send::<super::Merged>();
    }
}
