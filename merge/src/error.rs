//! The merge crate's one error type.

/// Result alias of the merge crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of reading and merging file slices.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Table metadata could not be read.
    #[error(transparent)]
    Timeline(#[from] tributary_timeline::Error),
    /// A log block, record or schema could not be decoded.
    #[error(transparent)]
    Format(#[from] tributary_format::Error),
    /// Data that cannot be merged as given.
    #[error("{what}: {reason}")]
    Invalid {
        /// What was being processed.
        what: String,
        /// Why it failed.
        reason: String,
    },
}
