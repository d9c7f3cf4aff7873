//! The compaction crate's one error type.

/// Result alias of the compaction crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of planning, executing, cleaning and rollback.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Table metadata could not be read or written.
    #[error(transparent)]
    Timeline(#[from] tributary_timeline::Error),
    /// A Hudi format could not be encoded or decoded.
    #[error(transparent)]
    Format(#[from] tributary_format::Error),
    /// Reading or merging a file slice failed.
    #[error(transparent)]
    Merge(#[from] tributary_merge::Error),
    /// Data that cannot be merged as given.
    #[error("{what}: {reason}")]
    Invalid {
        /// What was being processed.
        what: String,
        /// Why it failed.
        reason: String,
    },
}
