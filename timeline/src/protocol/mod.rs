//! The commit protocol's shared steps, one implementation each, used by the
//! write client, the compactor, the cleaner and recovery:
//!
//! - `marker`: a marker under `.hoodie/.temp/<t>/` names every data file an
//!   instant writes, before the file exists, so a failed instant's files can
//!   be found and deleted;
//! - `heartbeat`: a writer keeps `.hoodie/.heartbeat/<t>` fresh while its
//!   instant is inflight; the time of each beat is written in the file, so
//!   its age is measured by the injected clock, not by the store;
//! - `complete`: the completion time is issued and `<t>_<c>.<action>` is
//!   created inside one hold of the table lock, which is what makes the order
//!   of completion times the order of visibility;
//! - `writer_state`: a writer id's generation and last checkpoint, in
//!   `.hoodie/.tributary/writers/<id>.json`, updated in the completion's
//!   lock hold, so a checkpoint is visible exactly when its commit is, a
//!   newer writer with the same id fences the older one, and a lookup reads
//!   one file and, when that names a pending commit, checks that the
//!   commit's completed file exists (only when it does not, whether the
//!   history holds the commit);
//! - `metadata_table`: a Hudi metadata table, which Tributary does not
//!   maintain, is turned off as Hudi turns it off, under the table lock
//!   before any of Tributary's instants on the table.
//!
//! `docs/design.md` draws the whole sequence.

pub(crate) mod complete;
pub(crate) mod heartbeat;
pub(crate) mod marker;
pub(crate) mod metadata_table;
pub(crate) mod writer_state;

pub use complete::{
    Completion, begin_instant, complete_instant, complete_instant_then_begin, complete_instant_with, withdraw_instant,
    withdraw_or_leave,
};
pub use heartbeat::{DEFAULT_HEARTBEAT_EXPIRY, Heartbeat, heartbeat_expired, heartbeat_path};
pub use marker::{
    MARKER_APPEND, MARKER_CREATE, create_marker, list_markers, marked_file, marker_dir, remove_leftovers,
    remove_markers, rollback_files,
};
pub use metadata_table::MetadataTableGuard;
pub use writer_state::{
    CHECKPOINT_KEY_PREFIX, Checkpoint, CommitFence, WriterState, WriterStatus, lookup_writer, mark_new_table,
};

pub use tributary_storage::{delete_all_if_exist, delete_if_exists};
