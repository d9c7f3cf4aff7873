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
    /// One input record is invalid; nothing of its commit becomes visible.
    #[error("{input} line {record}{}: {reason}", field.as_ref().map(|f| format!(": field `{f}`")).unwrap_or_default())]
    BadRecord {
        /// The input (file name, `stdin`, `batch`, `rows`).
        input: String,
        /// 1-based record number (line number for JSON lines).
        record: usize,
        /// The field involved, if any.
        field: Option<String>,
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
