//! The one tokio runtime every call of the module runs on.

use std::sync::Mutex;

use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::errors::{no_runtime, to_py};

/// The process's runtime, with the id of the process that made it: a
/// child made by `fork` (Python's `multiprocessing` on Linux) inherits the
/// parent's runtime without its threads, and makes its own.
static RUNTIME: Mutex<Option<(u32, &'static Runtime)>> = Mutex::new(None);

/// The shared multi-thread runtime, made on first use in each process.
pub(crate) fn runtime() -> std::io::Result<&'static Runtime> {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((owner, rt)) = *slot
        && owner == pid
    {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("tributary").build()?;
    // Leaked: it lives as long as the process (an inherited one is never
    // dropped either, as its threads are not there to stop).
    let rt: &'static Runtime = Box::leak(Box::new(rt));
    *slot = Some((pid, rt));
    Ok(rt)
}

/// Runs future `f` on the shared runtime with the GIL released, and turns
/// its error into the exception of its kind.
pub(crate) fn block<T: Send>(
    py: Python<'_>,
    f: impl std::future::Future<Output = tributary::Result<T>> + Send,
) -> PyResult<T> {
    block_on(py, f)?.map_err(to_py)
}

/// Runs future `f` on the shared runtime with the GIL released, and
/// returns what it returned.
pub(crate) fn block_on<F>(py: Python<'_>, f: F) -> PyResult<F::Output>
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    let rt = runtime().map_err(no_runtime)?;
    Ok(py.detach(|| rt.block_on(f)))
}
