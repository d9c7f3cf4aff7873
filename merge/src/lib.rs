//! Tributary's record merge, shared by snapshot readers and the compactor.
//! Each rule has one file:
//!
//! | file | owns |
//! |---|---|
//! | [`version`] | a version: rows, partial rows or deletes, in write order |
//! | [`combine`] | which of a write's versions of a key a writer needs to store |
//! | [`ordering`] | ordering values and how they compare; the zero-sentinel delete |
//! | [`rules`] | which rule merges a slice; whether this build knows the table's merger |
//! | `rows` | the row rule and the merge index that applies it |
//! | `columns` | the column rule: partial rows and sequence groups |
//! | `index` | the open-addressing key index behind `rows` |
//! | `keyed` | the key-first merge: index keys first, decode only the winners |
//! | [`limits`] | the memory policy: what a slice merge may hold before it folds or spills |
//! | [`spill`] | spill partitions, sorted runs and their merge |
//! | `read` | reading a slice's base and log files as versions |
//! | `tombstone` | what a compaction keeps of deleted keys, and for how long |
//! | [`slice`] | the one entry point: merge a file slice, for readers and the compactor |

mod columns;
pub mod combine;
pub mod error;
mod index;
mod keyed;
pub mod limits;
pub mod ordering;
mod read;
mod rows;
pub mod rules;
pub mod slice;
pub mod spill;
#[cfg(test)]
pub(crate) mod test_util;
mod tombstone;
pub mod version;

pub use combine::Combiner;
pub use error::{Error, Result};
pub use limits::Share;
pub use read::{BaseRows, SliceFiles, SliceMerge, written_by};
pub use rules::merge;
pub use slice::{Budget, Merged, RowOrder, merge_slice};
pub use spill::SpillArea;
pub use version::Version;

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
