//! The writer crate's one error type.

/// Result alias of the writer crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of bucketing, input conversion and the write client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Table metadata could not be read or written.
    #[error(transparent)]
    Timeline(#[from] tributary_timeline::Error),
    /// A Hudi format could not be encoded or decoded.
    #[error(transparent)]
    Format(#[from] tributary_format::Error),
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
