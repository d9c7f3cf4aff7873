//! Random scans for property tests: filter trees over a table's columns,
//! projections and limits; this file's own evaluator of a filter (SQL's
//! three-valued logic over `Option`s) on a model's rows; and the rows a
//! scan returns, as text, to compare with them.

use arrow::array::{Array, RecordBatch};
use futures::TryStreamExt;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use tributary::{CompareOp, Predicate, Query, ReadOptions, Table};

/// A row as text, `None` for null, in the order of a [`Columns`]' names.
pub type Row = Vec<Option<String>>;

/// The columns random scans read: their names, and for each a strategy of
/// literals to compare it with.
pub struct Columns {
    pub names: &'static [&'static str],
    pub literal: fn(&str) -> BoxedStrategy<Lit>,
}

/// A filter, as a test evaluates it and as Tributary is told it; columns
/// by their index in [`Columns::names`].
#[derive(Debug, Clone)]
pub enum F {
    Cmp(usize, CompareOp, Lit),
    In(usize, Vec<Lit>, bool),
    IsNull(usize, bool),
    And(Box<F>, Box<F>),
    Or(Box<F>, Box<F>),
    Not(Box<F>),
}

#[derive(Debug, Clone)]
pub enum Lit {
    Int(i64),
    Text(String),
}

fn op() -> impl Strategy<Value = CompareOp> {
    prop::sample::select(vec![
        CompareOp::Eq,
        CompareOp::NotEq,
        CompareOp::Lt,
        CompareOp::LtEq,
        CompareOp::Gt,
        CompareOp::GtEq,
    ])
}

fn atom(columns: &'static Columns) -> impl Strategy<Value = F> {
    (0..columns.names.len()).prop_flat_map(move |c| {
        let lit = move || (columns.literal)(columns.names[c]);
        prop_oneof![
            3 => (op(), lit()).prop_map(move |(o, l)| F::Cmp(c, o, l)),
            2 => (prop::collection::vec(lit(), 1..4), prop::bool::weighted(0.2)).prop_map(move |(v, n)| F::In(c, v, n)),
            1 => any::<bool>().prop_map(move |n| F::IsNull(c, n)),
        ]
    })
}

/// Filter trees of comparisons, `IN` lists and null tests under `AND`,
/// `OR` and `NOT`.
pub fn filter(columns: &'static Columns) -> impl Strategy<Value = F> {
    atom(columns).prop_recursive(3, 8, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| F::And(Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| F::Or(Box::new(a), Box::new(b))),
            inner.prop_map(|a| F::Not(Box::new(a))),
        ]
    })
}

impl Lit {
    fn literal(&self) -> tributary::Literal {
        match self {
            Lit::Int(i) => (*i).into(),
            Lit::Text(s) => s.as_str().into(),
        }
    }

    /// `value op self`, null when `value` is.
    fn compare(&self, value: &Option<String>, op: CompareOp) -> Option<bool> {
        let value = value.as_ref()?;
        let ord = match self {
            Lit::Int(i) => value.parse::<i64>().expect("an integer column").cmp(i),
            Lit::Text(s) => value.as_str().cmp(s.as_str()),
        };
        Some(match op {
            CompareOp::Eq => ord.is_eq(),
            CompareOp::NotEq => ord.is_ne(),
            CompareOp::Lt => ord.is_lt(),
            CompareOp::LtEq => ord.is_le(),
            CompareOp::Gt => ord.is_gt(),
            CompareOp::GtEq => ord.is_ge(),
        })
    }
}

impl F {
    /// It as a scan's filter on the columns `names`.
    pub fn predicate(&self, names: &[&str]) -> Predicate {
        match self {
            F::Cmp(c, o, l) => Predicate::compare(names[*c], *o, l.literal()),
            F::In(c, v, negated) => Predicate::InList {
                column: names[*c].into(),
                values: v.iter().map(Lit::literal).collect(),
                negated: *negated,
            },
            F::IsNull(c, negated) => Predicate::IsNull { column: names[*c].into(), negated: *negated },
            F::And(a, b) => a.predicate(names).and(b.predicate(names)),
            F::Or(a, b) => a.predicate(names).or(b.predicate(names)),
            F::Not(a) => a.predicate(names).not(),
        }
    }

    /// Its value on `row`: `None` for SQL's null.
    pub fn eval(&self, row: &Row) -> Option<bool> {
        match self {
            F::Cmp(c, o, l) => l.compare(&row[*c], *o),
            F::In(c, v, negated) => {
                let mut any = Some(false);
                for l in v {
                    any = or(any, l.compare(&row[*c], CompareOp::Eq));
                }
                if *negated { any.map(|b| !b) } else { any }
            }
            F::IsNull(c, negated) => Some(row[*c].is_none() != *negated),
            F::And(a, b) => and(a.eval(row), b.eval(row)),
            F::Or(a, b) => or(a.eval(row), b.eval(row)),
            F::Not(a) => a.eval(row).map(|b| !b),
        }
    }
}

fn and(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

fn or(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

/// One query of a case: a filter, the columns returned, a limit, and a
/// memory budget.
#[derive(Debug, Clone)]
pub struct Ask {
    pub filter: F,
    pub columns: Vec<usize>,
    pub limit: Option<usize>,
    /// Bytes: the smallest has every slice with logs merged the general way
    /// through spill partitions, or folded; the middle one streams the
    /// winners of whole-row slices as the key-first merge decodes them; the
    /// largest merges each slice in memory.
    pub budget: Option<usize>,
}

/// Random asks over `columns`.
pub fn ask(columns: &'static Columns) -> impl Strategy<Value = Ask> {
    let n = columns.names.len();
    let projection = prop::sample::subsequence((0..n).collect::<Vec<_>>(), 1..=n).prop_shuffle();
    let budget = prop::option::weighted(0.5, prop::sample::select(vec![512usize, 8 << 10, 1 << 20]));
    (filter(columns), projection, prop::option::weighted(0.2, 0usize..6), budget)
        .prop_map(|(filter, columns, limit, budget)| Ask { filter, columns, limit, budget })
}

/// `batch`'s rows as text, `None` for null, sorted.
pub fn rows_of(batch: &RecordBatch) -> Vec<Row> {
    let mut rows: Vec<Row> = (0..batch.num_rows())
        .map(|r| {
            batch
                .columns()
                .iter()
                .map(|c| (!c.is_null(r)).then(|| arrow::util::display::array_value_to_string(c, r).unwrap()))
                .collect()
        })
        .collect();
    rows.sort();
    rows
}

/// The model rows `ask` passes, projected, sorted.
pub fn expected(rows: &[Row], ask: &Ask) -> Vec<Row> {
    let mut out: Vec<Row> = rows
        .iter()
        .filter(|r| ask.filter.eval(r) == Some(true))
        .map(|r| ask.columns.iter().map(|&c| r[c].clone()).collect())
        .collect();
    out.sort();
    out
}

/// The rows `t`'s scan of `query` returns for `ask`, sorted.
pub async fn scanned(t: &Table, names: &[&str], query: &Query, ask: &Ask) -> Vec<Row> {
    let mut scan = t
        .scan()
        .query(query.clone())
        .columns(ask.columns.iter().map(|&c| names[c]))
        .filter(ask.filter.predicate(names));
    if let Some(n) = ask.limit {
        scan = scan.limit(n);
    }
    if let Some(bytes) = ask.budget {
        scan = scan.memory_budget(bytes);
    }
    let batches: Vec<RecordBatch> = scan.stream().await.unwrap().try_collect().await.unwrap();
    let mut rows: Vec<Row> = batches.iter().flat_map(rows_of).collect();
    rows.sort();
    rows
}

/// The rows an unfiltered read of `query` returns, as the columns `names`.
pub async fn read_rows(t: &Table, names: &[&str], query: &Query) -> Vec<Row> {
    let all = t.read(&ReadOptions { query: query.clone(), with_meta: true, ..Default::default() }).await.unwrap();
    let indexes: Vec<usize> = names.iter().map(|c| all.schema().index_of(c).unwrap()).collect();
    rows_of(&all.project(&indexes).unwrap())
}

/// `got` equals `want`, or with a limit is as many of its rows as the
/// limit allows.
pub fn check(got: Vec<Row>, want: Vec<Row>, ask: &Ask, names: &[&str], what: &str) -> Result<(), TestCaseError> {
    match ask.limit {
        None => prop_assert_eq!(got, want, "{} with filter {}", what, ask.filter.predicate(names)),
        Some(n) => {
            prop_assert_eq!(got.len(), n.min(want.len()), "{} limited to {}", what, n);
            for r in &got {
                prop_assert!(want.contains(r), "{what}: row {r:?} does not pass {}", ask.filter.predicate(names));
            }
        }
    }
    Ok(())
}
