//! The state an open table holds beside its location and configuration:
//! the settings and components (clock, locks, spill store, metadata-table
//! guard) it was built with, which a [`TableBuilder`](crate::TableBuilder)
//! resolves and a [`Table`](crate::Table) hands out.

use std::path::PathBuf;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::path::Path;
use tributary_timeline::MetadataTableGuard;
use tributary_timeline::{Clock, LockProvider};

use crate::settings::TableSettings;

/// Where a table's compactors spill.
#[derive(Debug, Clone)]
pub(crate) enum Spill {
    /// What [`TableBuilder::with_spill_store`](crate::TableBuilder::with_spill_store) was given.
    Given(Arc<dyn ObjectStore>, Path),
    /// A local folder, through a local store that skips fsync and removes
    /// the folders it empties; created when a compactor is made.
    Local(PathBuf),
}

/// The components a table was built with.
#[derive(Debug, Clone)]
pub(crate) struct Components {
    pub(crate) settings: TableSettings,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) lock: Arc<dyn LockProvider>,
    pub(crate) compaction_lock: Arc<dyn LockProvider>,
    pub(crate) spill: Spill,
    /// Turns the table's metadata table off in the first hold of the table
    /// lock by any of the table's time generators: one per opened (or
    /// created) table, shared by its clones and all their generators.
    pub(crate) metadata_table: MetadataTableGuard,
}
