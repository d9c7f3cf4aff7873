//! `sql`, and `read` with `--columns`, `--where` or `--limit`: queries
//! through Apache DataFusion over providers of the tables named
//! ([`tributary::sql::TributaryTable`]), their rows written as they come.

use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt;
use tributary::TableSettings;
use tributary::sql::datafusion::error::DataFusionError;
use tributary::sql::datafusion::prelude::{SessionContext, col};
use tributary::sql::{ReadAs, TributaryTable};

use crate::args::{FormatArg, StoreArgs, TableArg};
use crate::output::{self, Failure};

/// A query's failure: the tables it named, and DataFusion's message (a
/// table's own error keeps its kind; see [`tributary::sql::query_error`]).
fn failed(tables: &[TableArg], e: DataFusionError) -> Failure {
    let named: Vec<String> = tables.iter().map(|t| format!("{}={}", t.name, t.uri)).collect();
    let over = named.join(", ");
    match tributary::sql::query_error(e, &over) {
        Ok(e) => Failure::Table(e),
        Err(DataFusionError::External(other)) => Failure::Output(other),
        Err(e) => Failure::Output(format!("the query over {over}: {e}").into()),
    }
}

/// A session with each of `tables` registered by its name.
async fn session(store: &StoreArgs, tables: &[TableArg]) -> Result<SessionContext, Failure> {
    let ctx = SessionContext::new();
    for t in tables {
        let table = store.open(&t.uri, TableSettings::default()).await?;
        let provider = TributaryTable::new(table, t.read_as.clone()).await?;
        ctx.register_table(t.name.as_str(), Arc::new(provider)).map_err(|e| failed(tables, e))?;
    }
    Ok(ctx)
}

/// `sql`: runs `query` over `tables` and writes its rows.
pub(crate) async fn sql(
    store: &StoreArgs,
    query: &str,
    tables: &[TableArg],
    format: FormatArg,
    output: Option<PathBuf>,
) -> Result<(), Failure> {
    let ctx = session(store, tables).await?;
    let df = ctx.sql(query).await.map_err(|e| failed(tables, e))?;
    let stream = df.execute_stream().await.map_err(|e| failed(tables, e))?;
    write(stream, tables, format, output).await
}

/// What `read` picks with `--columns`, `--where` and `--limit`.
pub(crate) struct Selection {
    /// The columns, in order; every column (meta columns with `meta`)
    /// when empty.
    pub(crate) columns: Vec<String>,
    /// A SQL condition.
    pub(crate) filter: Option<String>,
    /// At most this many rows.
    pub(crate) limit: Option<usize>,
    /// The meta columns, when no columns are named.
    pub(crate) meta: bool,
    /// Rows ordered by partition, then record key.
    pub(crate) sort: bool,
}

/// `read` with `--columns`, `--where` or `--limit`: the filter parsed by
/// DataFusion's SQL parser against the table's columns.
pub(crate) async fn read(
    store: &StoreArgs,
    uri: String,
    read_as: ReadAs,
    pick: Selection,
    format: FormatArg,
) -> Result<(), Failure> {
    let tables = [TableArg { name: "t".into(), uri, read_as }];
    let ctx = session(store, &tables).await?;
    let fail = |e| failed(&tables, e);
    let mut df = ctx.table("t").await.map_err(fail)?;
    if let Some(filter) = pick.filter {
        let expr = df.parse_sql_expr(&filter).map_err(fail)?;
        df = df.filter(expr).map_err(fail)?;
    }
    if pick.sort {
        let order = ["_hoodie_partition_path", "_hoodie_record_key"].map(|c| col(c).sort(true, false));
        df = df.sort(order.to_vec()).map_err(fail)?;
    }
    let columns: Vec<String> = if pick.columns.is_empty() {
        let all = df.schema().fields().iter().map(|f| f.name().clone());
        all.filter(|n| pick.meta || !n.starts_with("_hoodie_")).collect()
    } else {
        pick.columns
    };
    let names: Vec<&str> = columns.iter().map(String::as_str).collect();
    df = df.select_columns(&names).map_err(fail)?;
    if pick.limit.is_some() {
        df = df.limit(0, pick.limit).map_err(fail)?;
    }
    let stream = df.execute_stream().await.map_err(fail)?;
    write(stream, &tables, format, None).await
}

async fn write(
    mut stream: tributary::sql::datafusion::physical_plan::SendableRecordBatchStream,
    tables: &[TableArg],
    format: FormatArg,
    output: Option<PathBuf>,
) -> Result<(), Failure> {
    let mut sink = output::Rows::new(stream.schema(), format, output)?;
    while let Some(batch) = stream.next().await {
        sink.write(&batch.map_err(|e| failed(tables, e))?)?;
    }
    sink.finish()
}
