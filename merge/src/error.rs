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

/// A storage error (a store call, a lock) reaches callers as the timeline
/// error that wraps it, so it reads and classifies as it did.
impl From<tributary_timeline::StorageError> for Error {
    fn from(e: tributary_timeline::StorageError) -> Self {
        Error::Timeline(e.into())
    }
}

impl Error {
    /// A Parquet read of `path` that failed: a store failure underneath is
    /// the store's (retryable) error, anything else means the file does not
    /// read as Parquet (the rule is [`tributary_timeline::Error::parquet`]'s).
    pub fn parquet(path: &str, e: parquet::errors::ParquetError) -> Self {
        Error::Timeline(tributary_timeline::Error::parquet(path, e))
    }

    /// An Arrow kernel that refused data the merge built: a bug.
    pub fn arrow(what: impl Into<String>, e: arrow::error::ArrowError) -> Self {
        Error::Internal { what: what.into(), reason: e.to_string() }
    }

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
