//! `tributary._tributary.Table` and `create`: a table opened or created at
//! a URI, its writes, scans, compaction and metadata.

use std::collections::HashMap;

use arrow::datatypes::Schema;
use arrow_array::ffi_stream::ArrowArrayStreamReader;
use arrow_pyarrow::{FromPyArrow, IntoPyArrow, ToPyArrow};
use futures::{StreamExt, TryStreamExt};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyList};
use tributary::{
    CleanRetention, CompactionSummary, CompactorSettings, CreateOptions, InstantTime, Predicate, Query, ScanStream,
    Table, TableBuilder,
};

use crate::batches::PyBatches;
use crate::errors::{invalid, to_py};
use crate::filter::predicate_of;
use crate::runtime::block;
use crate::schema::avro_json;
use crate::writer::{PyWriter, commit_dict, write_stream};

/// A builder for `uri` with `storage_options` for its store.
pub(crate) fn builder(uri: &str, storage_options: Option<HashMap<String, String>>) -> TableBuilder {
    Table::builder_uri(uri).with_store_options(storage_options.unwrap_or_default())
}

/// Field names given as one string or a list of strings, as the
/// comma-separated list [`CreateOptions::new`] takes.
fn field_list(value: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    if let Ok(one) = value.extract::<String>() {
        return Ok(one);
    }
    let many: Vec<String> =
        value.extract().map_err(|_| invalid(what, "expected a column name or a list of column names"))?;
    Ok(many.join(","))
}

/// `create(uri, schema, record_key, ordering_field, *, partition_by=None,
/// buckets=16, change_log=False, storage_options=None)`: creates a
/// Merge-on-Read table.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (uri, schema, record_key, ordering_field, *, partition_by = None, buckets = 16, change_log = false, storage_options = None))]
pub(crate) fn create(
    py: Python<'_>,
    uri: String,
    schema: &Bound<'_, PyAny>,
    record_key: &Bound<'_, PyAny>,
    ordering_field: &Bound<'_, PyAny>,
    partition_by: Option<String>,
    buckets: u32,
    change_log: bool,
    storage_options: Option<HashMap<String, String>>,
) -> PyResult<PyTable> {
    let name = uri.trim_end_matches('/').rsplit(['/', '\\']).next().unwrap_or("tributary").to_string();
    let (schema_json, source) = match schema.extract::<String>() {
        Ok(json) => (json, "Avro schema".to_string()),
        Err(_) => {
            let arrow = Schema::from_pyarrow_bound(schema)
                .map_err(|_| invalid("schema", "expected a pyarrow.Schema or an Avro schema JSON string"))?;
            (avro_json(&arrow, &name)?, "pyarrow schema".to_string())
        }
    };
    let mut options = CreateOptions::new(
        schema_json,
        field_list(record_key, "record_key")?,
        field_list(ordering_field, "ordering_field")?,
    );
    options.schema_source = source;
    options.partition_field = partition_by;
    options.buckets = buckets;
    options.change_log = change_log;
    let b = builder(&uri, storage_options);
    let table = block(py, b.create(options))?;
    Ok(PyTable { table, uri })
}

/// A Hudi Merge-on-Read table that many writers upsert into at once.
#[pyclass(name = "Table", module = "tributary._tributary", frozen)]
pub(crate) struct PyTable {
    table: Table,
    uri: String,
}

/// The summary of a compaction, as a dict.
fn compaction_dict<'py>(py: Python<'py>, s: &CompactionSummary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("instant", s.instant.as_str())?;
    d.set_item("completed", s.completed.as_str())?;
    d.set_item("file_groups", s.groups)?;
    d.set_item("records", s.records)?;
    d.set_item("bytes_read", s.bytes_read)?;
    d.set_item("bytes_written", s.bytes_written)?;
    Ok(d)
}

/// What `to_pyarrow` and `to_batches` read.
struct ScanArgs {
    columns: Option<Vec<String>>,
    filter: Option<Predicate>,
    as_of: Option<InstantTime>,
    query: Query,
}

/// An instant time argument (17 digits, or legacy 14).
fn instant(t: &str, what: &str) -> PyResult<InstantTime> {
    InstantTime::parse(t).map_err(|e| invalid(what, e))
}

impl ScanArgs {
    fn new(
        columns: Option<Vec<String>>,
        filter: Option<&Bound<'_, PyAny>>,
        as_of: Option<&str>,
        query: &str,
        begin: Option<&str>,
        end: Option<&str>,
    ) -> PyResult<Self> {
        let filter = filter.filter(|f| !f.is_none()).map(predicate_of).transpose()?;
        let as_of = as_of.map(|t| instant(t, "as_of")).transpose()?;
        let query = match query {
            "snapshot" => Query::Snapshot,
            "read_optimized" => Query::ReadOptimized,
            "incremental" => Query::incremental(
                begin.map(|t| instant(t, "begin")).transpose()?,
                end.map(|t| instant(t, "end")).transpose()?,
            ),
            other => {
                return Err(invalid(
                    "query",
                    format!("`{other}`: use \"snapshot\", \"read_optimized\" or \"incremental\""),
                ));
            }
        };
        if !matches!(query, Query::Incremental { .. }) && (begin.is_some() || end.is_some()) {
            return Err(invalid("begin, end", "they bound an incremental query: pass query=\"incremental\""));
        }
        Ok(Self { columns, filter, as_of, query })
    }

    async fn stream(self, table: &Table) -> tributary::Result<ScanStream> {
        let mut scan = table.scan().query(self.query);
        if let Some(c) = self.columns {
            scan = scan.columns(c);
        }
        if let Some(f) = self.filter {
            scan = scan.filter(f);
        }
        if let Some(t) = self.as_of {
            scan = scan.as_of(t);
        }
        scan.stream().await
    }
}

impl PyTable {
    /// The table.
    pub(crate) fn table(&self) -> &Table {
        &self.table
    }
}

#[pymethods]
impl PyTable {
    /// Opens the table at `uri` (a local path, `file://`, `s3://`, `gs://`
    /// or `az://`), its store configured from the environment and
    /// `storage_options`.
    #[new]
    #[pyo3(signature = (uri, *, storage_options = None))]
    fn open(py: Python<'_>, uri: String, storage_options: Option<HashMap<String, String>>) -> PyResult<Self> {
        let b = builder(&uri, storage_options);
        let table = block(py, b.open())?;
        Ok(Self { table, uri })
    }

    /// The URI the table was opened with.
    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    /// The table's name (`hoodie.table.name`).
    #[getter]
    fn name(&self) -> &str {
        &self.table.config().name
    }

    fn __repr__(&self) -> String {
        format!("Table(uri={:?}, name={:?})", self.uri, self.table.config().name)
    }

    /// Writes `data` (anything with `__arrow_c_stream__`) in one commit.
    #[pyo3(signature = (data, *, writer_id = None, checkpoint = None))]
    fn _write<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        writer_id: Option<String>,
        checkpoint: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let input = ArrowArrayStreamReader::from_pyarrow_bound(data)?;
        let id = writer_id.clone().unwrap_or_else(|| crate::writer::DEFAULT_WRITER.into());
        let summary = block(py, write_stream(&self.table, input, writer_id, checkpoint))?;
        commit_dict(py, &summary, &id)
    }

    /// Starts a commit that several `write` calls add to, registering
    /// `writer_id` first when given.
    #[pyo3(signature = (*, writer_id = None))]
    fn writer(&self, py: Python<'_>, writer_id: Option<String>) -> PyResult<PyWriter> {
        PyWriter::start(py, &self.table, writer_id)
    }

    /// The rows, as a `pyarrow.Table`, or with `stream` as a
    /// `Batches` that merge as they are read.
    #[pyo3(signature = (columns, filter, as_of, query, begin, end, stream))]
    #[allow(clippy::too_many_arguments)]
    fn read<'py>(
        &self,
        py: Python<'py>,
        columns: Option<Vec<String>>,
        filter: Option<&Bound<'py, PyAny>>,
        as_of: Option<&str>,
        query: &str,
        begin: Option<&str>,
        end: Option<&str>,
        stream: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = ScanArgs::new(columns, filter, as_of, query, begin, end)?;
        let table = &self.table;
        if stream {
            let stream = block(py, args.stream(table))?;
            let schema = stream.schema();
            let batches = PyBatches::new(schema, stream.map_err(to_py).boxed());
            return Ok(Bound::new(py, batches)?.into_any());
        }
        let (schema, batches) = block(py, async move {
            let stream = args.stream(table).await?;
            let schema = stream.schema();
            let batches = stream.try_collect::<Vec<_>>().await?;
            Ok((schema, batches))
        })?;
        let out = arrow_pyarrow::Table::try_new(batches, schema).map_err(|e| invalid("to_pyarrow", e))?;
        out.into_pyarrow(py)
    }

    /// The change feed of the commits completed in `(begin, end]` (open
    /// ends when `None`): its rows as a `pyarrow.Table`, and the window's
    /// bounds, the end being where the next window begins.
    #[pyo3(signature = (begin, end))]
    fn changes<'py>(
        &self,
        py: Python<'py>,
        begin: Option<&str>,
        end: Option<&str>,
    ) -> PyResult<(Bound<'py, PyAny>, String, String)> {
        let begin = begin.map(|t| instant(t, "begin")).transpose()?.unwrap_or(InstantTime::EARLIEST);
        let end = end.map(|t| instant(t, "end")).transpose()?.unwrap_or(InstantTime::LATEST);
        let table = &self.table;
        let changes = block(py, table.changes(&begin, &end))?;
        let rows = changes.rows.schema();
        let out = arrow_pyarrow::Table::try_new(vec![changes.rows], rows).map_err(|e| invalid("changes", e))?;
        Ok((out.into_pyarrow(py)?, changes.begin.to_string(), changes.end.to_string()))
    }

    /// The schema in force, as a `pyarrow.Schema` (without the `_hoodie_`
    /// meta columns).
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let table = &self.table;
        let at = block(py, table.schema_at(None))?;
        at.schema.arrow().as_ref().to_pyarrow(py)
    }

    /// The schema in force as Avro schema JSON.
    fn avro_schema(&self, py: Python<'_>) -> PyResult<String> {
        let table = &self.table;
        let at = block(py, table.schema_at(None))?;
        Ok(at.schema.full_table_json())
    }

    /// Compacts what is due; a summary per compaction executed.
    fn compact<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let table = &self.table;
        let done = block(py, async move {
            let compactor = table.compactor(CompactorSettings::default()).await?;
            Ok(compactor.run_once().await?)
        })?;
        let items = done.iter().map(|s| compaction_dict(py, s)).collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// Records the changes of the commits completed since the last run in
    /// the table's change log; its summary, or `None` when none completed.
    fn write_change_log<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let table = &self.table;
        let done = block(py, async move { table.change_log_writer().await?.run_once().await })?;
        let Some(c) = done else { return Ok(None) };
        let d = PyDict::new(py);
        d.set_item("instant", c.instant.as_str())?;
        d.set_item("completed", c.completed.as_str())?;
        d.set_item("begin", c.begin.as_str())?;
        d.set_item("changes", c.changes)?;
        d.set_item("files", c.files)?;
        d.set_item("bytes", c.bytes)?;
        Ok(Some(d))
    }

    /// Rolls back a few failed writes, then deletes the file slices that
    /// no retained commit needs: those of the last `retain_commits`
    /// commits, or of the commits requested in the last `retain_hours`
    /// hours. The clean's summary, or `None` when there was nothing to do.
    #[pyo3(signature = (*, retain_commits = None, retain_hours = None))]
    fn clean<'py>(
        &self,
        py: Python<'py>,
        retain_commits: Option<usize>,
        retain_hours: Option<u32>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let retention = match (retain_commits, retain_hours) {
            (Some(n), None) => CleanRetention::Commits(n),
            (None, Some(h)) => CleanRetention::Hours(h),
            (None, None) => CleanRetention::Commits(10),
            (Some(_), Some(_)) => return Err(invalid("clean", "give retain_commits or retain_hours, not both")),
        };
        let table = &self.table;
        let Some(done) = block(py, table.clean_with(retention))? else { return Ok(None) };
        let d = PyDict::new(py);
        d.set_item("instant", done.instant.as_str())?;
        d.set_item("completed", done.completed.as_str())?;
        d.set_item("earliest_commit_to_retain", &done.earliest_commit_to_retain)?;
        d.set_item("deleted_files", &done.deleted_files)?;
        Ok(Some(d))
    }

    /// The timeline: one dict per instant, by requested time.
    fn timeline<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let table = &self.table;
        let timeline = block(py, table.timeline())?;
        let items = timeline
            .instants()
            .map(|i| {
                let d = PyDict::new(py);
                d.set_item("requested", i.requested.as_str())?;
                d.set_item("action", i.action.to_string())?;
                d.set_item("state", i.state.to_string())?;
                d.set_item("completed", i.completed.as_ref().map(InstantTime::as_str))?;
                Ok(d)
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// The table's snapshot as a provider capsule for DataFusion-Python's
    /// `session` (`SessionContext.register_table(name, table)`).
    fn __datafusion_table_provider__<'py>(
        &self,
        py: Python<'py>,
        session: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        crate::provider::provider_capsule(py, &self.table, session)
    }

    /// The last checkpoint writer `writer_id` committed, or `None`.
    fn checkpoint(&self, py: Python<'_>, writer_id: String) -> PyResult<Option<String>> {
        let table = &self.table;
        let status = block(py, table.checkpoint(&writer_id))?;
        Ok(status.checkpoint.map(|c| c.checkpoint))
    }
}

// A table is used from many Python threads at once.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<PyTable>();
};
