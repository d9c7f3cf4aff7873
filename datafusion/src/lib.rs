//! Apache DataFusion over Tributary tables: [`TributaryTable`] is a
//! `TableProvider` whose scans are [`Table::scan`]s.
//!
//! - **Projection**: only the columns a query reads are returned, the
//!   `_hoodie_*` meta columns among them when it names them.
//! - **Filters**: comparisons of a column with a literal, `IN` lists,
//!   `BETWEEN`, null tests and `AND`, `OR` and `NOT` of them are pushed down
//!   as exact ([`Predicate`]): the scan prunes partitions and buckets with
//!   them and evaluates them on merged rows, so DataFusion does not filter
//!   again. Anything else (functions, casts of columns, comparisons of two
//!   columns, a literal that does not convert to its column's type) is left
//!   to DataFusion, as unsupported.
//! - **Limit**: pushed down when every filter was; the scan stops there.
//! - **Partitions**: the scan's file slices are shared out among
//!   DataFusion's target partitions by size, each merging its slices a few
//!   at a time.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use datafusion::prelude::SessionContext;
//! use tributary_datafusion::{ReadAs, TributaryTable};
//! use tributary_table::{CreateOptions, Table};
//!
//! let dir = std::env::temp_dir().join(format!("tributary-sql-doc-{}", std::process::id()));
//! let schema = r#"{"type":"record","name":"trip","fields":[
//!     {"name":"uuid","type":"string"},{"name":"ts","type":"long"},{"name":"city","type":"string"}]}"#;
//! let table = Table::builder_local(&dir).create(CreateOptions::new(schema, "uuid", "ts")).await?;
//! let rows = std::io::Cursor::new(r#"{"uuid":"a","ts":1,"city":"oslo"}
//! {"uuid":"b","ts":2,"city":"lima"}"#);
//! let client = table.write_client(Default::default()).await?;
//! tributary_table::write_json_lines(&client, rows, "rows", &Default::default(), |_| {}).await?;
//!
//! let ctx = SessionContext::new();
//! ctx.register_table("trips", Arc::new(TributaryTable::new(table, ReadAs::default()).await?))?;
//! let batches = ctx.sql("SELECT uuid FROM trips WHERE city = 'oslo'").await?.collect().await?;
//! assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 1);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(()) }
//! ```

/// The DataFusion this provider is built for.
pub use datafusion;

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result, ScalarValue, Statistics};
use datafusion::datasource::TableType;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator, TableProviderFilterPushDown, expr::InList};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    ReplaceChildrenOptions, SendableRecordBatchStream,
};
use futures::TryStreamExt;
use tributary_table::{CompareOp, InstantTime, Literal, Predicate, Query, Scan, ScanPlan, Table};

/// Which rows of a table a provider reads: a query and, for time travel,
/// an instant; or the change feed of a window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadAs {
    /// Snapshot (the default), read-optimized or incremental.
    pub query: Query,
    /// The table as of this instant.
    pub as_of: Option<InstantTime>,
    /// The change feed of the commits completed in `(begin, end]`
    /// ([`Table::changes`]) in place of the table's rows.
    pub changes: Option<(InstantTime, InstantTime)>,
}

impl ReadAs {
    /// A table as a query names it, `URI[@option...]`: the URI, and what
    /// its options (see [`ReadAs::with_options`]) ask for.
    pub fn of_spec(spec: &str) -> std::result::Result<(&str, ReadAs), String> {
        let uri = spec.split('@').next().unwrap_or_default();
        Ok((uri, ReadAs::default().with_options(&spec[uri.len()..])?))
    }

    /// `self` with the options of `options` applied in order, each after
    /// an `@`, as a table named in a query gives them
    /// (`trips=s3://b/trips@as-of=20250101000000000`): `as-of=T`,
    /// `read-optimized`, `incremental=BEGIN..END`, `changes=BEGIN..END`
    /// (completion times, either end open when left out). The error names
    /// the option and says which there are.
    pub fn with_options(mut self, options: &str) -> std::result::Result<Self, String> {
        let instant = |t: &str| InstantTime::parse(t).map_err(|e| format!("`{t}` in `{options}`: {e}"));
        for option in options.split('@').filter(|o| !o.is_empty()) {
            match option.split_once('=') {
                Some(("as-of", t)) => self.as_of = Some(instant(t)?),
                Some((name @ ("incremental" | "changes"), window)) => {
                    let (begin, end) = window
                        .split_once("..")
                        .ok_or_else(|| format!("`{option}`: expected {name}=BEGIN..END (completion times)"))?;
                    let bound = |t: &str| if t.is_empty() { Ok(None) } else { instant(t).map(Some) };
                    let (begin, end) = (bound(begin)?, bound(end)?);
                    match name {
                        "changes" => {
                            self.changes =
                                Some((begin.unwrap_or(InstantTime::EARLIEST), end.unwrap_or(InstantTime::LATEST)))
                        }
                        _ => self.query = Query::incremental(begin, end),
                    }
                }
                None if option == "read-optimized" => self.query = Query::ReadOptimized,
                _ => {
                    return Err(format!(
                        "`{option}` in `{options}`: the options are @as-of=T, @read-optimized, \
                         @incremental=BEGIN..END and @changes=BEGIN..END"
                    ));
                }
            }
        }
        Ok(self)
    }
}

/// What a failed query over Tributary tables means to its caller:
/// - a table's own error (reading, merging, a corrupt file), with its kind;
/// - a query DataFusion could not plan (syntax, an unknown table, column or
///   function, mismatched types): invalid input, about the query over
///   `over` (the tables it could name);
/// - anything else (say, an execution error of a function) is returned as
///   it is.
pub fn query_error(e: DataFusionError, over: &str) -> std::result::Result<tributary_table::Error, DataFusionError> {
    match e {
        DataFusionError::External(inner) => match inner.downcast::<tributary_table::Error>() {
            Ok(table) => Ok(*table),
            Err(other) => Err(DataFusionError::External(other)),
        },
        // Wrappers: what decides is what they wrap.
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => query_error(*inner, over),
        e if matches!(
            e.find_root(),
            DataFusionError::SQL(..) | DataFusionError::Plan(_) | DataFusionError::SchemaError(..)
        ) =>
        {
            Ok(tributary_table::Error::InvalidInput { what: format!("the query over {over}"), reason: e.to_string() })
        }
        e => Err(e),
    }
}

/// A Tributary table as a DataFusion table (see the crate notes). Each
/// query loads the latest timeline, so it sees the commits completed
/// before it started; the schema is the one in force when the provider
/// was made (or at its `as_of`), meta columns first. A provider of the
/// change feed ([`ReadAs::changes`]) holds the feed of its window as it
/// was when the provider was made, and leaves filters to DataFusion.
#[derive(Debug, Clone)]
pub struct TributaryTable {
    table: Table,
    read_as: ReadAs,
    schema: SchemaRef,
    changes: Option<arrow::array::RecordBatch>,
}

impl TributaryTable {
    /// A provider of `table`'s rows as `read_as` says.
    pub async fn new(table: Table, read_as: ReadAs) -> tributary_table::Result<Self> {
        if let Some((begin, end)) = &read_as.changes {
            let rows = table.changes(begin, end).await?.rows;
            return Ok(Self { table, read_as, schema: rows.schema(), changes: Some(rows) });
        }
        let schema = scan_of(&table, &read_as).with_meta(true).plan().await?.schema();
        Ok(Self { table, read_as, schema, changes: None })
    }

    /// The table.
    pub fn table(&self) -> &Table {
        &self.table
    }
}

fn scan_of<'t>(table: &'t Table, read_as: &ReadAs) -> Scan<'t> {
    let scan = table.scan().query(read_as.query.clone());
    match &read_as.as_of {
        Some(t) => scan.as_of(t.clone()),
        None => scan,
    }
}

fn external(e: tributary_table::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}

#[async_trait]
impl TableProvider for TributaryTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if let Some(rows) = &self.changes {
            let source = datafusion::datasource::memory::MemorySourceConfig::try_new_exec(
                &[vec![rows.clone()]],
                self.schema.clone(),
                projection.cloned(),
            )?;
            return Ok(source);
        }
        let columns: Vec<String> = match projection {
            Some(p) => p.iter().map(|&i| self.schema.field(i).name().clone()).collect(),
            None => self.schema.fields().iter().map(|f| f.name().clone()).collect(),
        };
        let mut scan = scan_of(&self.table, &self.read_as).columns(columns);
        for f in filters {
            // Only filters `supports_filters_pushdown` took come here as
            // pushed; any other is evaluated above the scan as well.
            if let Some(p) = predicate(f, &self.schema) {
                scan = scan.filter(p);
            }
        }
        if let Some(n) = limit {
            scan = scan.limit(n);
        }
        let plan = scan.plan().await.map_err(external)?;
        let parts = plan.split(state.config().target_partitions());
        Ok(Arc::new(TributaryScanExec::new(self.table.location().to_string(), plan.schema(), parts)))
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(filters
            .iter()
            .map(|f| match predicate(f, &self.schema) {
                Some(_) if self.changes.is_none() => TableProviderFilterPushDown::Exact,
                _ => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }
}

/// `e` as a scan's filter, when it is one that the scan evaluates exactly
/// as DataFusion would and every column and literal in it checks against
/// `schema`.
pub fn predicate(e: &Expr, schema: &Schema) -> Option<Predicate> {
    let p = translate(e)?;
    p.check(schema).ok()?;
    Some(p)
}

fn translate(e: &Expr) -> Option<Predicate> {
    match e {
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
            Operator::And => Some(translate(left)?.and(translate(right)?)),
            Operator::Or => Some(translate(left)?.or(translate(right)?)),
            _ => {
                let op = compare_op(*op)?;
                match (left.as_ref(), right.as_ref()) {
                    (Expr::Column(c), Expr::Literal(v, _)) => Some(Predicate::compare(&c.name, op, literal(v)?)),
                    (Expr::Literal(v, _), Expr::Column(c)) => {
                        Some(Predicate::compare(&c.name, flipped(op), literal(v)?))
                    }
                    _ => None,
                }
            }
        },
        Expr::Not(e) => Some(translate(e)?.not()),
        Expr::IsNull(e) => Some(Predicate::IsNull { column: column(e)?, negated: false }),
        Expr::IsNotNull(e) => Some(Predicate::IsNull { column: column(e)?, negated: true }),
        Expr::InList(InList { expr, list, negated }) => Some(Predicate::InList {
            column: column(expr)?,
            values: list
                .iter()
                .map(|v| if let Expr::Literal(v, _) = v { literal(v) } else { None })
                .collect::<Option<_>>()?,
            negated: *negated,
        }),
        Expr::Between(Between { expr, negated, low, high }) => {
            let (Expr::Literal(low, _), Expr::Literal(high, _)) = (low.as_ref(), high.as_ref()) else { return None };
            let c = column(expr)?;
            let within = Predicate::compare(&c, CompareOp::GtEq, literal(low)?).and(Predicate::compare(
                &c,
                CompareOp::LtEq,
                literal(high)?,
            ));
            Some(if *negated { within.not() } else { within })
        }
        _ => None,
    }
}

fn column(e: &Expr) -> Option<String> {
    match e {
        Expr::Column(c) => Some(c.name.clone()),
        _ => None,
    }
}

fn literal(v: &ScalarValue) -> Option<Literal> {
    v.to_array().ok().map(|a| Literal::of(&a, 0))
}

fn compare_op(op: Operator) -> Option<CompareOp> {
    Some(match op {
        Operator::Eq => CompareOp::Eq,
        Operator::NotEq => CompareOp::NotEq,
        Operator::Lt => CompareOp::Lt,
        Operator::LtEq => CompareOp::LtEq,
        Operator::Gt => CompareOp::Gt,
        Operator::GtEq => CompareOp::GtEq,
        _ => return None,
    })
}

/// `op` with its sides swapped: `5 < c` is `c > 5`.
fn flipped(op: CompareOp) -> CompareOp {
    match op {
        CompareOp::Lt => CompareOp::Gt,
        CompareOp::LtEq => CompareOp::GtEq,
        CompareOp::Gt => CompareOp::Lt,
        CompareOp::GtEq => CompareOp::LtEq,
        same => same,
    }
}

/// The execution of a [`TributaryTable`] scan: one DataFusion partition
/// per part of the scan's file slices ([`ScanPlan::split`]).
#[derive(Debug)]
pub struct TributaryScanExec {
    table: String,
    parts: Vec<ScanPlan>,
    properties: Arc<PlanProperties>,
}

impl TributaryScanExec {
    fn new(table: String, schema: SchemaRef, parts: Vec<ScanPlan>) -> Self {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(parts.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Self { table, parts, properties: Arc::new(properties) }
    }

    /// The file slices each partition reads.
    pub fn slices_per_partition(&self) -> Vec<usize> {
        self.parts.iter().map(|p| p.slices().len()).collect()
    }
}

impl DisplayAs for TributaryScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let slices: usize = self.parts.iter().map(|p| p.slices().len()).sum();
        write!(f, "TributaryScanExec: table={}, file_slices={slices}, partitions={}", self.table, self.parts.len())?;
        if let Some(filter) = self.parts.first().and_then(ScanPlan::filter) {
            write!(f, ", filter={filter}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for TributaryScanExec {
    fn name(&self) -> &'static str {
        "TributaryScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(children, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute))
    }

    /// What is known before reading: the bytes of the files each
    /// partition reads, as an inexact size of its output (merging drops
    /// older versions; projection drops columns). Row counts are not known
    /// without merging: base files keep tombstones, and logs hold versions.
    fn statistics_from_inputs(&self, _inputs: &[Arc<Statistics>], args: &StatisticsArgs) -> Result<Arc<Statistics>> {
        let schema = self.properties.eq_properties.schema();
        let parts = match args.partition() {
            Some(i) => self.parts.get(i..=i).unwrap_or_default(),
            None => &self.parts[..],
        };
        let bytes: u64 = parts.iter().map(ScanPlan::file_bytes).sum();
        let mut stats = Statistics::new_unknown(schema);
        stats.total_byte_size = Precision::Inexact(usize::try_from(bytes).unwrap_or(usize::MAX));
        Ok(Arc::new(stats))
    }

    fn execute(&self, partition: usize, _context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let schema = self.properties.eq_properties.schema().clone();
        let Some(part) = self.parts.get(partition) else {
            // A scan of no file slice has one partition, and no rows.
            return Ok(Box::pin(RecordBatchStreamAdapter::new(schema, futures::stream::empty())));
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, part.stream().map_err(external))))
    }
}
