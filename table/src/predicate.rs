//! Filters a scan takes ([`crate::Scan::filter`]): comparisons of a column
//! with a literal, `IN` lists, null tests, and `AND`, `OR` and `NOT` of
//! them. A scan evaluates them on merged rows with SQL's three-valued logic
//! (a row passes when the filter is true, not null), and uses them before
//! reading anything to skip partitions and buckets that cannot hold a
//! passing row.
//!
//! A filter never reaches into a merge: it is evaluated on the rows a merge
//! returns, so an older version of a key can never pass in place of a newer
//! one that fails (`docs/design.md`, "Scans").
//!
//! SQL front ends (the DataFusion provider, `tributary read --where`)
//! translate their expressions into these.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatch, Scalar};
use arrow::compute::kernels::{boolean, cmp};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Schema};

/// A comparison a [`Predicate::Compare`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompareOp {
    /// `=`
    Eq,
    /// `<>`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
}

impl CompareOp {
    fn symbol(self) -> &'static str {
        match self {
            Self::Eq => "=",
            Self::NotEq => "<>",
            Self::Lt => "<",
            Self::LtEq => "<=",
            Self::Gt => ">",
            Self::GtEq => ">=",
        }
    }
}

/// One literal value: an Arrow array of length one, of any type a column
/// may be compared with (it is cast to the column's type).
#[derive(Debug, Clone)]
pub struct Literal(ArrayRef);

impl PartialEq for Literal {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_data() == other.0.to_data()
    }
}

impl Literal {
    /// The value at `row` of `array`.
    pub fn of(array: &ArrayRef, row: usize) -> Self {
        Self(array.slice(row, 1))
    }

    /// The value as a one-element array.
    pub fn array(&self) -> &ArrayRef {
        &self.0
    }

    /// This value as `to`, failing where it does not convert exactly
    /// (`'abc'` as an integer, say).
    pub(crate) fn cast(&self, to: &DataType) -> Result<ArrayRef, String> {
        if self.0.data_type() == to {
            return Ok(self.0.clone());
        }
        let options = CastOptions { safe: false, ..Default::default() };
        cast_with_options(&self.0, to, &options).map_err(|e| format!("{self} is not a {to}: {e}"))
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_null(0) {
            return f.write_str("NULL");
        }
        let text = arrow::util::display::array_value_to_string(&self.0, 0).map_err(|_| fmt::Error)?;
        match self.0.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => write!(f, "'{text}'"),
            _ => f.write_str(&text),
        }
    }
}

macro_rules! literal_from {
    ($($t:ty => $array:ty),* $(,)?) => {$(
        impl From<$t> for Literal {
            fn from(v: $t) -> Self {
                Self(Arc::new(<$array>::from(vec![v])))
            }
        }
    )*};
}

literal_from!(
    i32 => arrow::array::Int32Array,
    i64 => arrow::array::Int64Array,
    f64 => arrow::array::Float64Array,
    bool => arrow::array::BooleanArray,
    &str => arrow::array::StringArray,
    String => arrow::array::StringArray,
);

/// A filter on a table's rows (see the module notes).
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    /// `column op value`: null when the column is null.
    Compare {
        /// The column's name.
        column: String,
        /// The comparison.
        op: CompareOp,
        /// The value, cast to the column's type.
        value: Literal,
    },
    /// `column IN (values)`, or `NOT IN` when `negated`.
    InList {
        /// The column's name.
        column: String,
        /// The values, each cast to the column's type.
        values: Vec<Literal>,
        /// `NOT IN`.
        negated: bool,
    },
    /// `column IS NULL`, or `IS NOT NULL` when `negated`.
    IsNull {
        /// The column's name.
        column: String,
        /// `IS NOT NULL`.
        negated: bool,
    },
    /// Every one of them (true when empty).
    And(Vec<Predicate>),
    /// Any one of them (false when empty).
    Or(Vec<Predicate>),
    /// Not it.
    Not(Box<Predicate>),
}

impl Predicate {
    /// `column op value`.
    pub fn compare(column: impl Into<String>, op: CompareOp, value: impl Into<Literal>) -> Self {
        Self::Compare { column: column.into(), op, value: value.into() }
    }

    /// `column = value`.
    pub fn eq(column: impl Into<String>, value: impl Into<Literal>) -> Self {
        Self::compare(column, CompareOp::Eq, value)
    }

    /// `column IN (values)`.
    pub fn in_list<L: Into<Literal>>(column: impl Into<String>, values: impl IntoIterator<Item = L>) -> Self {
        Self::InList { column: column.into(), values: values.into_iter().map(Into::into).collect(), negated: false }
    }

    /// `column IS NULL`.
    pub fn is_null(column: impl Into<String>) -> Self {
        Self::IsNull { column: column.into(), negated: false }
    }

    /// `self AND other`.
    pub fn and(self, other: Predicate) -> Self {
        match self {
            Self::And(mut all) => {
                all.push(other);
                Self::And(all)
            }
            one => Self::And(vec![one, other]),
        }
    }

    /// `self OR other`.
    pub fn or(self, other: Predicate) -> Self {
        Self::Or(vec![self, other])
    }

    /// `NOT self`.
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Self {
        Self::Not(Box::new(self))
    }

    /// The columns it reads.
    pub fn columns(&self) -> BTreeSet<&str> {
        let mut out = BTreeSet::new();
        self.visit_columns(&mut |c| {
            out.insert(c);
        });
        out
    }

    fn visit_columns<'a>(&'a self, f: &mut impl FnMut(&'a str)) {
        match self {
            Self::Compare { column, .. } | Self::InList { column, .. } | Self::IsNull { column, .. } => f(column),
            Self::And(ps) | Self::Or(ps) => ps.iter().for_each(|p| p.visit_columns(f)),
            Self::Not(p) => p.visit_columns(f),
        }
    }

    /// Its top-level conjuncts: the terms of an `AND` (flattened), or
    /// itself.
    pub fn conjuncts(&self) -> Vec<&Predicate> {
        match self {
            Self::And(ps) => ps.iter().flat_map(Predicate::conjuncts).collect(),
            one => vec![one],
        }
    }

    /// Checks it against `schema`: every column exists and every literal
    /// converts to its column's type. The reason when not.
    pub fn check(&self, schema: &Schema) -> Result<(), String> {
        let field = |column: &str| {
            schema.field_with_name(column).map_err(|_| {
                let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                format!("no column `{column}` (the columns are {})", names.join(", "))
            })
        };
        match self {
            Self::Compare { column, value, .. } => value.cast(field(column)?.data_type()).map(drop),
            Self::InList { column, values, .. } => {
                let to = field(column)?.data_type();
                values.iter().try_for_each(|v| v.cast(to).map(drop))
            }
            Self::IsNull { column, .. } => field(column).map(drop),
            Self::And(ps) | Self::Or(ps) => ps.iter().try_for_each(|p| p.check(schema)),
            Self::Not(p) => p.check(schema),
        }
    }

    /// Its value on each row of `batch`, which holds every column it reads
    /// ([`Predicate::check`] first): true, false or null.
    pub fn evaluate(&self, batch: &RecordBatch) -> Result<BooleanArray, String> {
        let column = |name: &str| {
            batch.column_by_name(name).cloned().ok_or_else(|| format!("no column `{name}` among the rows read"))
        };
        let arrow = |e: arrow::error::ArrowError| e.to_string();
        Ok(match self {
            Self::Compare { column: name, op, value } => {
                let c = column(name)?;
                compare(&c, *op, &value.cast(c.data_type())?).map_err(arrow)?
            }
            Self::InList { column: name, values, negated } => {
                let c = column(name)?;
                let mut any = BooleanArray::from(vec![false; batch.num_rows()]);
                for v in values {
                    let eq = compare(&c, CompareOp::Eq, &v.cast(c.data_type())?).map_err(arrow)?;
                    any = boolean::or_kleene(&any, &eq).map_err(arrow)?;
                }
                if *negated { boolean::not(&any).map_err(arrow)? } else { any }
            }
            Self::IsNull { column: name, negated } => {
                let c = column(name)?;
                if *negated { arrow::compute::is_not_null(&c) } else { arrow::compute::is_null(&c) }.map_err(arrow)?
            }
            Self::And(ps) => {
                let mut all = BooleanArray::from(vec![true; batch.num_rows()]);
                for p in ps {
                    all = boolean::and_kleene(&all, &p.evaluate(batch)?).map_err(arrow)?;
                }
                all
            }
            Self::Or(ps) => {
                let mut any = BooleanArray::from(vec![false; batch.num_rows()]);
                for p in ps {
                    any = boolean::or_kleene(&any, &p.evaluate(batch)?).map_err(arrow)?;
                }
                any
            }
            Self::Not(p) => boolean::not(&p.evaluate(batch)?).map_err(arrow)?,
        })
    }

    /// The rows of `batch` it is true on.
    pub fn filter(&self, batch: &RecordBatch) -> Result<RecordBatch, String> {
        let mask = self.evaluate(batch)?;
        if mask.true_count() == batch.num_rows() {
            return Ok(batch.clone());
        }
        arrow::compute::filter_record_batch(batch, &mask).map_err(|e| e.to_string())
    }

    /// Whether some row whose columns in `known` hold its values (one row)
    /// could pass: false when a conjunct that reads only those columns is
    /// false or null on them. Used with a partition's values.
    pub fn may_pass(&self, known: &RecordBatch) -> bool {
        let have = |p: &Predicate| p.columns().iter().all(|c| known.column_by_name(c).is_some());
        self.conjuncts().into_iter().filter(|p| have(p)).all(|p| match p.evaluate(known) {
            Ok(v) => v.is_valid(0) && v.value(0),
            // A value that does not convert decides nothing.
            Err(_) => true,
        })
    }

    /// The values `column` can take in a passing row, when a conjunct says
    /// (`column = v`, `column IN (...)`); `None` when any value may pass.
    pub fn values_of(&self, column: &str) -> Option<Vec<&Literal>> {
        self.conjuncts().into_iter().find_map(|p| match p {
            Self::Compare { column: c, op: CompareOp::Eq, value } if c == column => Some(vec![value]),
            Self::InList { column: c, values, negated: false } if c == column => Some(values.iter().collect()),
            _ => None,
        })
    }
}

fn compare(c: &ArrayRef, op: CompareOp, value: &ArrayRef) -> Result<BooleanArray, arrow::error::ArrowError> {
    let v = Scalar::new(value.clone());
    match op {
        CompareOp::Eq => cmp::eq(c, &v),
        CompareOp::NotEq => cmp::neq(c, &v),
        CompareOp::Lt => cmp::lt(c, &v),
        CompareOp::LtEq => cmp::lt_eq(c, &v),
        CompareOp::Gt => cmp::gt(c, &v),
        CompareOp::GtEq => cmp::gt_eq(c, &v),
    }
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |f: &mut fmt::Formatter<'_>, ps: &[Predicate], op: &str, empty: &str| {
            if ps.is_empty() {
                return f.write_str(empty);
            }
            for (i, p) in ps.iter().enumerate() {
                if i > 0 {
                    write!(f, " {op} ")?;
                }
                write!(f, "({p})")?;
            }
            Ok(())
        };
        match self {
            Self::Compare { column, op, value } => write!(f, "{column} {} {value}", op.symbol()),
            Self::InList { column, values, negated } => {
                let values: Vec<String> = values.iter().map(ToString::to_string).collect();
                write!(f, "{column} {}IN ({})", if *negated { "NOT " } else { "" }, values.join(", "))
            }
            Self::IsNull { column, negated } => write!(f, "{column} IS {}NULL", if *negated { "NOT " } else { "" }),
            Self::And(ps) => list(f, ps, "AND", "TRUE"),
            Self::Or(ps) => list(f, ps, "OR", "FALSE"),
            Self::Not(p) => write!(f, "NOT ({p})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::Field;

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Utf8, false),
            Field::new("amount", DataType::Int64, true),
        ]));
        let ids = StringArray::from(vec!["a", "b", "c", "d"]);
        let amounts = Int64Array::from(vec![Some(50), Some(150), None, Some(100)]);
        RecordBatch::try_new(schema, vec![Arc::new(ids), Arc::new(amounts)]).unwrap()
    }

    fn ids(p: &Predicate) -> Vec<String> {
        let b = p.filter(&batch()).unwrap();
        let c = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
        c.iter().map(|v| v.unwrap().to_string()).collect()
    }

    #[test]
    fn three_valued_logic_keeps_rows_that_are_true() {
        let gt = Predicate::compare("amount", CompareOp::Gt, 60i64);
        assert_eq!(ids(&gt), ["b", "d"]);
        // NOT of null is null: the null amount passes neither.
        assert_eq!(ids(&gt.clone().not()), ["a"]);
        assert_eq!(ids(&gt.clone().or(Predicate::is_null("amount"))), ["b", "c", "d"]);
        assert_eq!(ids(&gt.and(Predicate::in_list("id", ["a", "b"]))), ["b"]);
        // A literal of another type is cast to the column's.
        assert_eq!(ids(&Predicate::eq("amount", "100")), ["d"]);
        let not_in = Predicate::InList { column: "amount".into(), values: vec![50i64.into()], negated: true };
        assert_eq!(ids(&not_in), ["b", "d"]);
    }

    #[test]
    fn checks_name_what_is_wrong() {
        let schema = batch().schema();
        let e = Predicate::eq("amonut", 1i64).check(&schema).unwrap_err();
        assert!(e.contains("no column `amonut`") && e.contains("id, amount"), "{e}");
        let e = Predicate::eq("amount", "lots").check(&schema).unwrap_err();
        assert!(e.contains("'lots' is not a Int64"), "{e}");
    }

    #[test]
    fn partition_values_and_key_values() {
        let region = Arc::new(Schema::new(vec![Field::new("region", DataType::Utf8, true)]));
        let eu = RecordBatch::try_new(region, vec![Arc::new(StringArray::from(vec!["eu"]))]).unwrap();
        let p = Predicate::eq("region", "us").and(Predicate::compare("amount", CompareOp::Gt, 1i64));
        assert!(!p.may_pass(&eu));
        assert!(Predicate::eq("region", "eu").and(Predicate::eq("amount", 1i64)).may_pass(&eu));
        // An OR across columns decides nothing about the partition.
        assert!(Predicate::eq("region", "us").or(Predicate::eq("amount", 1i64)).may_pass(&eu));
        let keys = Predicate::in_list("id", ["a", "b"]).and(Predicate::eq("region", "eu"));
        assert_eq!(keys.values_of("id").map(|v| v.len()), Some(2));
        assert_eq!(keys.values_of("amount"), None);
        assert_eq!(keys.to_string(), "(id IN ('a', 'b')) AND (region = 'eu')");
    }
}
