//! The root crate's error type.

/// Result alias of the root crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of the table API, readers and CLI.
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
    /// Writing failed.
    #[error(transparent)]
    Writer(#[from] tributary_writer::Error),
    /// Merging or compaction failed.
    #[error(transparent)]
    Compaction(#[from] tributary_compaction::Error),
    /// There is no table at the path.
    #[error("{path}: not a Hudi table (no .hoodie/hoodie.properties)")]
    NotATable {
        /// The path given.
        path: String,
    },
    /// A table already exists where one was to be created.
    #[error("{path}: a table already exists here")]
    TableExists {
        /// The path given.
        path: String,
    },
    /// Caller input (schema, options) is invalid.
    #[error("{what}: {reason}")]
    InvalidInput {
        /// The input: a file, option or field.
        what: String,
        /// Why.
        reason: String,
    },
}
