//! Tributary's table services: compaction, cleaning, archiving and the
//! rollback of failed writes. Merging is [`tributary_merge`]'s.
//!
//! The modules are private; this file re-exports what other crates use:
//!
//! - [`Error`] and [`Result`];
//! - [`Compactor`], built by a [`CompactorBuilder`] and set by
//!   [`CompactorSettings`] (with the [`PlanSettings`] of its planner); each
//!   compaction it executes is reported by a [`CompactionSummary`];
//! - [`plan`], the pure planner the compactor runs, for planning without
//!   executing;
//! - [`clean`], keeping what a [`CleanRetention`] keeps and reporting a
//!   [`CleanSummary`];
//! - [`rollback_failed_writes`], reporting each rollback as [`RolledBack`],
//!   and [`rollback_before_service`], the few a table service rolls back
//!   before its own job;
//! - [`archive`], set by [`ArchiveSettings`] and reporting an
//!   [`ArchiveSummary`] (with the [`Retained`] rule that stopped it).
//!
//! | file | owns |
//! |---|---|
//! | `plan` | the pure, synchronous compaction planner |
//! | `execute` | the compactor: scheduling plans and executing them |
//! | `base_file` | writing a compacted base file in parts, within a memory share |
//! | `clean` | deleting the file slices no retained commit needs |
//! | `rollback` | rolling back the delta commits of dead writers |
//! | `archive` | moving old instants into the LSM history |

#![warn(unreachable_pub)]

mod archive;
mod base_file;
mod clean;
mod error;
mod execute;
mod health;
mod plan;
mod rollback;
#[cfg(test)]
mod test_util;

// Errors.
pub use error::{Error, Result};

// Compaction: the compactor, its settings and what a run did.
pub use execute::{CompactionSummary, Compactor, CompactorBuilder, CompactorSettings};
pub use health::LogSpread;
pub use plan::{PlanSettings, plan};

// Cleaning old file slices.
pub use clean::{CleanRetention, CleanSummary, clean, cleaned_before, latest_clean_retained};

// Archiving old instants into the history.
pub use archive::{ArchiveSettings, ArchiveSummary, Retained, archive};

// Rolling back failed writes.
pub use rollback::{ROLLBACKS_PER_SERVICE_RUN, RolledBack, rollback_before_service, rollback_failed_writes};
