//! `Batches`: a stream of record batches (a scan's, a query's) as a Python
//! iterator, each batch waited for with the GIL released. An error raises
//! the exception of its kind, which pyarrow's `RecordBatchReader` (built
//! over the iterator in `tributary/__init__.py`) hands on unchanged.

use std::sync::Mutex;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow_pyarrow::ToPyArrow;
use futures::StreamExt;
use futures::stream::BoxStream;
use pyo3::prelude::*;

use crate::errors::no_runtime;
use crate::runtime::runtime;

/// Batches of one schema, read as they are asked for.
#[pyclass(name = "Batches", module = "tributary._tributary", frozen)]
pub(crate) struct PyBatches {
    schema: SchemaRef,
    stream: Mutex<BoxStream<'static, PyResult<RecordBatch>>>,
}

impl PyBatches {
    /// The batches of `stream`, of `schema`.
    pub(crate) fn new(schema: SchemaRef, stream: BoxStream<'static, PyResult<RecordBatch>>) -> Self {
        Self { schema, stream: Mutex::new(stream) }
    }
}

#[pymethods]
impl PyBatches {
    /// The schema of every batch, as a `pyarrow.Schema`.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.schema.as_ref().to_pyarrow(py)
    }

    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// The next batch as a `pyarrow.RecordBatch`; `None` (the end) stops
    /// the iteration.
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let rt = runtime().map_err(no_runtime)?;
        // The lock is taken without the GIL, so a second thread asking at
        // once waits here without holding up the first.
        let next = py.detach(|| {
            let mut stream = self.stream.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            rt.block_on(stream.next())
        });
        next.transpose()?.map(|batch| batch.to_pyarrow(py)).transpose()
    }
}
