//! The storage crate's one error type: what can go wrong reaching a table's
//! store, the local file system or a table lock.

use std::time::Duration;

pub use tributary_format::ErrorKind;

/// Result alias used throughout the storage crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in storage and locks.
///
/// Variants say what the caller can do: fix the input ([`Error::InvalidInput`]),
/// retry later ([`Error::LockTimeout`], [`Error::Store`], [`Error::Io`]),
/// start over ([`Error::AlreadyExists`], [`Error::LockLost`]) or treat the
/// data as damaged ([`Error::Corrupt`]). Messages name the path or lock
/// involved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Caller-supplied input (a table URI, a store option, a lock setting) is invalid.
    #[error("{what}: {reason}")]
    InvalidInput {
        /// The input involved, e.g. a table URI or an option name.
        what: String,
        /// Why it is invalid.
        reason: String,
    },
    /// A file that must be created fresh already exists.
    #[error("{path} already exists")]
    AlreadyExists {
        /// The existing object.
        path: String,
    },
    /// A file on storage (a Parquet footer, a lock file) is damaged.
    #[error("{path}: corrupt: {reason}")]
    Corrupt {
        /// The damaged object.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The table lock could not be taken in time.
    #[error("timed out after {waited:?} waiting for the table lock {lock}")]
    LockTimeout {
        /// Which lock.
        lock: String,
        /// How long we waited.
        waited: Duration,
    },
    /// A lease lock expired and was taken by another owner while we held it.
    #[error("lost the table lock {lock}: {reason}")]
    LockLost {
        /// Which lock.
        lock: String,
        /// What happened.
        reason: String,
    },
    /// An object-store call failed.
    #[error("{op} {path}: {source}")]
    Store {
        /// The operation ("get", "put", "list", ...).
        op: &'static str,
        /// The object or prefix.
        path: String,
        /// The underlying error.
        #[source]
        source: object_store::Error,
    },
    /// A local OS call failed (only the local file lock and durable store use these).
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The local path.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// What the caller can do about this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidInput { .. } => ErrorKind::InvalidInput,
            Error::AlreadyExists { .. } | Error::LockLost { .. } => ErrorKind::Conflict,
            Error::Corrupt { .. } => ErrorKind::Corrupt,
            // A write to a missing object's place fails only when the
            // bucket or container itself is missing.
            Error::Store { op: "create" | "put", source: object_store::Error::NotFound { .. }, .. } => {
                ErrorKind::InvalidInput
            }
            Error::Store { source, .. } => match source {
                // Credentials, permissions and options are the caller's to fix.
                object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. }
                | object_store::Error::UnknownConfigurationKey { .. }
                | object_store::Error::InvalidPath { .. }
                | object_store::Error::NotSupported { .. }
                | object_store::Error::NotImplemented { .. } => ErrorKind::InvalidInput,
                _ => ErrorKind::Unavailable,
            },
            Error::LockTimeout { .. } | Error::Io { .. } => ErrorKind::Unavailable,
        }
    }

    /// Wraps an object-store error, naming the operation and path.
    pub fn store(op: &'static str, path: impl ToString, source: object_store::Error) -> Self {
        match source {
            object_store::Error::AlreadyExists { .. } => Error::AlreadyExists { path: path.to_string() },
            source => Error::Store { op, path: path.to_string(), source },
        }
    }

    /// Wraps a Parquet error met reading the file at `path`: the store's
    /// error when one lies beneath it, else corruption of the file.
    pub fn parquet(path: &str, e: parquet::errors::ParquetError) -> Self {
        match e {
            parquet::errors::ParquetError::External(inner) => match inner.downcast::<object_store::Error>() {
                Ok(store) => Error::store("get", path, *store),
                Err(other) => Error::Corrupt { path: path.to_string(), reason: other.to_string() },
            },
            e => Error::Corrupt { path: path.to_string(), reason: e.to_string() },
        }
    }

    /// Wraps a local IO error, naming the operation and path.
    pub fn io(op: &'static str, path: impl AsRef<std::path::Path>, source: std::io::Error) -> Self {
        Error::Io { op, path: path.as_ref().display().to_string(), source }
    }

    /// Whether a store error may pass if the operation is tried again: a
    /// failure reported by the store's client after its own retries (a
    /// timeout, a dropped connection, a 5xx), or a task that did not finish.
    /// Answers about the object (not found, already exists, precondition)
    /// and errors of configuration or permission are not.
    pub fn is_transient(source: &object_store::Error) -> bool {
        matches!(source, object_store::Error::Generic { .. } | object_store::Error::JoinError { .. })
    }

    /// True when the error reports an object that was not found.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Store { source: object_store::Error::NotFound { .. }, .. })
    }
}
