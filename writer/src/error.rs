//! The writer crate's one error type.

/// Result alias of the writer crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of bucketing, the log format and the write client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Table metadata could not be read or written.
    #[error(transparent)]
    Timeline(#[from] tributary_timeline::Error),
    /// A log file's bytes do not follow the HOODIE_LOG format.
    #[error("{path}: corrupt log block at byte {offset}: {reason}")]
    CorruptLog {
        /// The log file.
        path: String,
        /// Where the bad block starts.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// Caller input is invalid.
    #[error("{what}: {reason}")]
    InvalidInput {
        /// The input involved.
        what: String,
        /// Why.
        reason: String,
    },
}
