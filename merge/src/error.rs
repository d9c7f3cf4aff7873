//! The merge crate's one error type.

use tributary_format::ErrorKind;

/// Result alias of the merge crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of reading and merging file slices. [`Error::kind`] tells the
/// caller what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Table metadata could not be read.
    #[error(transparent)]
    Timeline(#[from] tributary_timeline::Error),
    /// A log block, record or schema could not be decoded.
    #[error(transparent)]
    Format(#[from] tributary_format::Error),
    /// A stored file (base file, spill file) cannot be read as its format
    /// says.
    #[error("{path}: corrupt: {reason}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong, and where.
        reason: String,
    },
    /// The table cannot be merged as configured (for example a record
    /// merger this build does not know).
    #[error("{what}: {reason}")]
    Invalid {
        /// The table or setting involved.
        what: String,
        /// Why it cannot be merged.
        reason: String,
    },
    /// A bug: an invariant of the merge does not hold, or an Arrow kernel
    /// refused data the merge built itself.
    #[error("internal error in {what}: {reason}")]
    Internal {
        /// What was being done, naming the table and file.
        what: String,
        /// What went wrong.
        reason: String,
    },
}

impl Error {
    /// What the caller can do about this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Timeline(e) => e.kind(),
            Error::Format(e) => e.kind(),
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            Error::Invalid { .. } => ErrorKind::InvalidInput,
            Error::Internal { .. } => ErrorKind::Internal,
        }
    }
}
