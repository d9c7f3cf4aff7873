//! SQL through Apache DataFusion: `sql(query, tables)` over Tributary's
//! provider.

use std::collections::HashMap;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use pyo3::prelude::*;
use tributary::Table;
use tributary::sql::datafusion::error::DataFusionError;
use tributary::sql::datafusion::prelude::SessionContext;
use tributary::sql::{ReadAs, TributaryTable, query_error};

use crate::batches::PyBatches;
use crate::errors::{TributaryError, invalid, to_py};
use crate::runtime::{block, block_on};
use crate::table::{PyTable, builder};

/// The exception for a failed query over `over`: a table's error or an
/// invalid query by its kind, anything else as a `TributaryError`.
fn failed(e: DataFusionError, over: &str) -> PyErr {
    match query_error(e, over) {
        Ok(e) => to_py(e),
        Err(e) => TributaryError::new_err(format!("the query over {over}: {e}")),
    }
}

/// The table a name in `tables` stands for: a `Table`, or a URI with the
/// options of [`ReadAs::with_options`] (`uri@as-of=T`).
fn table_of(
    py: Python<'_>,
    name: &str,
    value: &Bound<'_, PyAny>,
    storage_options: &Option<HashMap<String, String>>,
) -> PyResult<(Table, ReadAs)> {
    if let Ok(t) = value.cast::<PyTable>() {
        return Ok((t.get().table().clone(), ReadAs::default()));
    }
    let spec: String = value
        .extract()
        .map_err(|_| invalid(&format!("tables[{name:?}]"), "expected a tributary.Table or a URI string"))?;
    let (uri, read_as) = ReadAs::of_spec(&spec).map_err(|e| invalid(&format!("tables[{name:?}]"), e))?;
    let table = block(py, builder(uri, storage_options.clone()).open())?;
    Ok((table, read_as))
}

/// `sql(query, tables, *, storage_options=None, stream=False)`: runs
/// `query` over `tables` (name to table), and returns its rows as a
/// `pyarrow.Table`, or with `stream` as `Batches` read as the query runs.
#[pyfunction]
#[pyo3(signature = (query, tables, *, storage_options = None, stream = false))]
pub(crate) fn sql<'py>(
    py: Python<'py>,
    query: &str,
    tables: HashMap<String, Bound<'py, PyAny>>,
    storage_options: Option<HashMap<String, String>>,
    stream: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let mut named: Vec<_> = tables.iter().collect();
    named.sort_by(|a, b| a.0.cmp(b.0));
    let mut opened = Vec::with_capacity(named.len());
    for (name, value) in &named {
        opened.push((name.to_string(), table_of(py, name, value, &storage_options)?));
    }
    let over = match named.is_empty() {
        true => "no tables".to_string(),
        false => named.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "),
    };
    let ctx = SessionContext::new();
    let run = async {
        for (name, (table, read_as)) in opened {
            let provider =
                TributaryTable::new(table, read_as).await.map_err(|e| DataFusionError::External(e.into()))?;
            ctx.register_table(name.as_str(), Arc::new(provider))?;
        }
        ctx.sql(query).await?.execute_stream().await
    };
    let batches = block_on(py, run)?.map_err(|e| failed(e, &over))?;
    let schema = batches.schema();
    let over_stream = over.clone();
    let batches = batches.map_err(move |e| failed(e, &over_stream)).boxed();
    if stream {
        return Ok(Bound::new(py, PyBatches::new(schema, batches))?.into_any());
    }
    let collected = block_on(py, batches.try_collect::<Vec<_>>())??;
    let out = arrow_pyarrow::Table::try_new(collected, schema).map_err(|e| failed(e.into(), &over))?;
    arrow_pyarrow::IntoPyArrow::into_pyarrow(out, py)
}
