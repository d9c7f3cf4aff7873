//! The format crate's error type, and [`ErrorKind`], the classification every
//! Tributary error type shares.

/// Result alias of the format crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a caller can do about an error. Every Tributary error type reports
/// one through its `kind()` method; the `tributary` binary turns it into the
/// exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller's input (a record, option, schema or path) is wrong: fix it
    /// and try again. Nothing was committed.
    InvalidInput,
    /// Data on storage is damaged or contradicts itself: the message names the
    /// file (and offset or field where known). Retrying will not help.
    Corrupt,
    /// Storage, the network or the lock is unavailable right now: the same
    /// call may succeed later.
    Unavailable,
    /// Another actor got there first, or took over what this one held (an
    /// existing file, a lost lock, a write withdrawn by recovery): start over.
    Conflict,
    /// A bug in Tributary (a panic or a broken invariant): report it.
    Internal,
}

impl ErrorKind {
    /// The process exit code the `tributary` binary uses for this kind.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::InvalidInput => 2,
            ErrorKind::Corrupt => 3,
            ErrorKind::Unavailable => 4,
            ErrorKind::Conflict => 5,
            ErrorKind::Internal => 70,
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ErrorKind::InvalidInput => "invalid input",
            ErrorKind::Corrupt => "corrupt data",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Conflict => "conflict",
            ErrorKind::Internal => "internal error",
        })
    }
}

/// Errors of encoding and decoding Hudi's file formats.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Metadata bytes are damaged or contradict themselves.
    #[error("{path}: corrupt: {reason}")]
    Corrupt {
        /// The damaged object.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A log file's bytes do not follow the HOODIE_LOG format.
    #[error("{path}: corrupt log block at byte {offset}: {reason}")]
    CorruptLog {
        /// The log file.
        path: String,
        /// Where the bad block (or record) starts.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// Avro metadata could not be encoded or decoded.
    #[error("{path}: avro: {reason}")]
    Avro {
        /// The object involved.
        path: String,
        /// The Avro library's message.
        reason: String,
    },
    /// Caller input (a schema, field names, values) is invalid.
    #[error("{what}: {reason}")]
    InvalidInput {
        /// The input involved.
        what: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A commit changed a column that a commit completed before it changed
    /// differently (`evolution::merge_committed`): this commit is not
    /// made; write the column with the type in force.
    #[error("{table}: schema conflict on column `{column}`: {reason}")]
    SchemaConflict {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// Both types, and what to do.
        reason: String,
    },
}

impl Error {
    /// What the caller can do about this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Corrupt { .. } | Error::CorruptLog { .. } | Error::Avro { .. } => ErrorKind::Corrupt,
            Error::InvalidInput { .. } => ErrorKind::InvalidInput,
            Error::SchemaConflict { .. } => ErrorKind::Conflict,
        }
    }
}
