//! The exceptions of the module, one per [`tributary::ErrorKind`] (and one
//! for a fenced writer), all subclasses of `TributaryError`, carrying the
//! Rust error's message (the one the CLI prints).

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use tributary::ErrorKind;

pyo3::create_exception!(_tributary, TributaryError, PyException, "Base class of every error Tributary raises.");
pyo3::create_exception!(
    _tributary,
    InvalidInputError,
    TributaryError,
    "The caller's input (data, schema, option or path) is wrong: fix it and try again. Nothing was committed."
);
pyo3::create_exception!(
    _tributary,
    CorruptDataError,
    TributaryError,
    "Data on storage is damaged or contradicts itself; the message names the file. Retrying will not help."
);
pyo3::create_exception!(
    _tributary,
    UnavailableError,
    TributaryError,
    "Storage, the network or a lock is unavailable right now: the same call may succeed later."
);
pyo3::create_exception!(
    _tributary,
    ConflictError,
    TributaryError,
    "Another actor got there first (an existing table, a lost lock, a withdrawn write): start over."
);
pyo3::create_exception!(
    _tributary,
    FencedError,
    ConflictError,
    "A newer writer registered this writer id: this writer is replaced, and stops rather than retries."
);
pyo3::create_exception!(
    _tributary,
    InternalError,
    TributaryError,
    "A bug in Tributary (a panic or a broken invariant): please report it."
);

/// Adds the exception classes to module `m`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("TributaryError", py.get_type::<TributaryError>())?;
    m.add("InvalidInputError", py.get_type::<InvalidInputError>())?;
    m.add("CorruptDataError", py.get_type::<CorruptDataError>())?;
    m.add("UnavailableError", py.get_type::<UnavailableError>())?;
    m.add("ConflictError", py.get_type::<ConflictError>())?;
    m.add("FencedError", py.get_type::<FencedError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}

/// The exception for a Tributary error: by its kind, a fenced writer apart.
pub(crate) fn to_py(e: tributary::Error) -> PyErr {
    let message = e.to_string();
    if e.is_fenced() {
        return FencedError::new_err(message);
    }
    match e.kind() {
        ErrorKind::InvalidInput => InvalidInputError::new_err(message),
        ErrorKind::Corrupt => CorruptDataError::new_err(message),
        ErrorKind::Unavailable => UnavailableError::new_err(message),
        ErrorKind::Conflict => ConflictError::new_err(message),
        _ => InternalError::new_err(message),
    }
}

/// An `InvalidInputError` about `what`.
pub(crate) fn invalid(what: &str, reason: impl std::fmt::Display) -> PyErr {
    InvalidInputError::new_err(format!("{what}: {reason}"))
}

/// The runtime could not be started: the system refused threads.
pub(crate) fn no_runtime(e: std::io::Error) -> PyErr {
    UnavailableError::new_err(format!("cannot start Tributary's runtime: {e}"))
}
