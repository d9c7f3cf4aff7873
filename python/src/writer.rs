//! Writing: one commit per `Table.write` call, or a `Writer` whose commit
//! several calls add to before it is committed or aborted.

use std::sync::Mutex;

use arrow_array::ffi_stream::ArrowArrayStreamReader;
use arrow_pyarrow::FromPyArrow;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tributary::{Commit, CommitSummary, Table, WriteSettings};

use crate::errors::invalid;
use crate::runtime::block;

/// The writer id of writes that name none; it is not registered.
pub(crate) const DEFAULT_WRITER: &str = "default";

/// The summary of a commit, as a dict.
pub(crate) fn commit_dict<'py>(py: Python<'py>, s: &CommitSummary, writer_id: &str) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("instant", s.instant.as_str())?;
    d.set_item("completed", s.completed.as_str())?;
    d.set_item("rows", s.rows)?;
    d.set_item("records", s.records())?;
    d.set_item("files", s.files.len())?;
    d.set_item("bytes", s.bytes())?;
    d.set_item("writer_id", writer_id)?;
    Ok(d)
}

/// A commit of `table` under `writer_id` (registered first when given).
async fn start(table: &Table, writer_id: Option<String>) -> tributary::Result<Commit> {
    let id = writer_id.clone().unwrap_or_else(|| DEFAULT_WRITER.into());
    let client = table.write_client(WriteSettings { writer_id: id, ..Default::default() }).await?;
    if writer_id.is_some() {
        table.register_writer(&client, None).await?;
    }
    Ok(client.start_commit().await?)
}

/// Adds every batch of `input` to `commit`. On the first failure the
/// commit is aborted (nothing of it becomes visible) and the error says so.
async fn add(commit: &mut Option<Commit>, input: ArrowArrayStreamReader) -> tributary::Result<()> {
    let Some(open) = commit.as_mut() else { return Ok(()) };
    let mut failure = None;
    for batch in input {
        let batch = batch.map_err(|e| tributary::Error::InvalidInput { what: "data".into(), reason: e.to_string() });
        let written = match batch {
            Ok(b) => open.write_batch(&b).await.map_err(tributary::Error::from),
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            failure = Some(e);
            break;
        }
    }
    match failure {
        None => Ok(()),
        Some(e) => {
            // The error says what went wrong; a failed clean-up is left to
            // the table's rollback of failed writes.
            if let Some(c) = commit.take() {
                let _ = c.abort().await;
            }
            Err(tributary::Error::CommitAborted(Box::new(e)))
        }
    }
}

/// Writes every batch of `input` in one commit of `table`, and completes
/// it with `checkpoint`; registers `writer_id` first when given. A failed
/// batch aborts the commit: nothing of it becomes visible.
pub(crate) async fn write_stream(
    table: &Table,
    input: ArrowArrayStreamReader,
    writer_id: Option<String>,
    checkpoint: Option<String>,
) -> tributary::Result<CommitSummary> {
    let mut commit = Some(start(table, writer_id).await?);
    add(&mut commit, input).await?;
    match commit {
        Some(c) => Ok(c.commit_with_checkpoint(checkpoint).await?),
        None => Err(tributary::Error::InvalidInput { what: "data".into(), reason: "the commit was aborted".into() }),
    }
}

/// An open commit of one writer id that several `write` calls add to,
/// visible once `commit` returns; `abort` (or a failed write) withdraws it.
#[pyclass(name = "Writer", module = "tributary._tributary", frozen)]
pub(crate) struct PyWriter {
    writer_id: String,
    /// The open commit; `None` once committed or aborted, and while a call
    /// of another thread uses it.
    commit: Mutex<Option<Commit>>,
    /// The table's location, for messages.
    table: String,
}

impl PyWriter {
    /// Starts the commit (`Table.writer`).
    pub(crate) fn start(py: Python<'_>, table: &Table, writer_id: Option<String>) -> PyResult<Self> {
        let id = writer_id.clone().unwrap_or_else(|| DEFAULT_WRITER.into());
        let commit = block(py, start(table, writer_id))?;
        Ok(Self { writer_id: id, commit: Mutex::new(Some(commit)), table: table.location().to_string() })
    }

    /// The open commit, taken out while a call uses it.
    fn take(&self) -> PyResult<Commit> {
        let mut slot = self.commit.lock().unwrap_or_else(|p| p.into_inner());
        slot.take().ok_or_else(|| {
            invalid(
                &format!("writer `{}` of {}", self.writer_id, self.table),
                "its commit was committed or aborted, or another thread is using it",
            )
        })
    }

    fn put_back(&self, commit: Commit) {
        *self.commit.lock().unwrap_or_else(|p| p.into_inner()) = Some(commit);
    }
}

#[pymethods]
impl PyWriter {
    /// The writer id.
    #[getter]
    fn writer_id(&self) -> &str {
        &self.writer_id
    }

    /// The commit's instant.
    #[getter]
    fn instant(&self) -> Option<String> {
        let slot = self.commit.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref().map(|c| c.instant().to_string())
    }

    /// Whether the commit is still open.
    #[getter]
    fn is_open(&self) -> bool {
        self.commit.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    fn __repr__(&self) -> String {
        format!("Writer(table={:?}, writer_id={:?}, open={})", self.table, self.writer_id, self.is_open())
    }

    /// Adds `data` (anything with `__arrow_c_stream__`) to the commit.
    fn _write(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let input = ArrowArrayStreamReader::from_pyarrow_bound(data)?;
        let mut commit = Some(self.take()?);
        let result = block(py, add(&mut commit, input));
        if let Some(c) = commit {
            self.put_back(c);
        }
        result
    }

    /// Completes the commit with `checkpoint`, and returns its summary.
    #[pyo3(signature = (checkpoint = None))]
    fn commit<'py>(&self, py: Python<'py>, checkpoint: Option<String>) -> PyResult<Bound<'py, PyDict>> {
        let commit = self.take()?;
        let summary = block(py, async move { Ok(commit.commit_with_checkpoint(checkpoint).await?) })?;
        commit_dict(py, &summary, &self.writer_id)
    }

    /// Withdraws the commit, deleting what it wrote; nothing when it is no
    /// longer open.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        let Some(commit) = self.commit.lock().unwrap_or_else(|p| p.into_inner()).take() else { return Ok(()) };
        block(py, async move { Ok(commit.abort().await?) })
    }
}
