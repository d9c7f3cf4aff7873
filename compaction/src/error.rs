//! The compaction crate's one error type.

/// Result alias of the compaction crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of merging, planning, executing and cleaning.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Table metadata could not be read or written.
    #[error(transparent)]
    Timeline(#[from] tributary_timeline::Error),
    /// Log or record handling failed.
    #[error(transparent)]
    Writer(#[from] tributary_writer::Error),
    /// Data that cannot be merged as given.
    #[error("{what}: {reason}")]
    Invalid {
        /// What was being processed.
        what: String,
        /// Why it failed.
        reason: String,
    },
}
