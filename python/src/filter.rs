//! Row filters from Python, in the form pyarrow's and deltalake's
//! `filters` take: a list of `(column, op, value)` tuples that must all
//! hold, or a list of such lists of which one must (disjunctive normal
//! form). Values become Arrow scalars through `pyarrow.array`, so dates,
//! timestamps and decimals compare as their columns' types.

use arrow::array::{ArrayRef, make_array};
use arrow::datatypes::DataType;
use arrow_pyarrow::FromPyArrow;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use tributary::arrow::array::ArrayData;
use tributary::{CompareOp, Literal, Predicate};

use crate::errors::invalid;

/// The predicate of a Python filter (see the module notes).
pub(crate) fn predicate_of(filter: &Bound<'_, PyAny>) -> PyResult<Predicate> {
    let terms: Vec<Bound<'_, PyAny>> = filter
        .extract()
        .map_err(|_| invalid("filter", "expected a list of (column, op, value) tuples, or a list of such lists"))?;
    if terms.is_empty() {
        return Err(invalid("filter", "an empty list filters nothing out: pass None"));
    }
    if terms.iter().all(|t| t.is_instance_of::<PyTuple>()) {
        return conjunction(&terms);
    }
    let mut any = Vec::with_capacity(terms.len());
    for t in &terms {
        let inner: Vec<Bound<'_, PyAny>> = t
            .cast::<PyList>()
            .map_err(|_| invalid("filter", "mix of tuples and lists: use a list of lists of tuples"))?
            .iter()
            .collect();
        any.push(conjunction(&inner)?);
    }
    Ok(Predicate::Or(any))
}

/// `AND` of a list of tuples.
fn conjunction(terms: &[Bound<'_, PyAny>]) -> PyResult<Predicate> {
    let all = terms.iter().map(term).collect::<PyResult<Vec<_>>>()?;
    Ok(match <[Predicate; 1]>::try_from(all) {
        Ok([one]) => one,
        Err(all) => Predicate::And(all),
    })
}

/// One `(column, op, value)` tuple.
fn term(t: &Bound<'_, PyAny>) -> PyResult<Predicate> {
    let (column, op, value): (String, String, Bound<'_, PyAny>) =
        t.extract().map_err(|_| invalid("filter", format!("{t}: expected (column, op, value)")))?;
    let op = op.trim().to_ascii_lowercase();
    if value.is_none() {
        // `= None` and `!= None` are null tests, as in pyarrow.
        return match op.as_str() {
            "=" | "==" => Ok(Predicate::IsNull { column, negated: false }),
            "!=" | "<>" => Ok(Predicate::IsNull { column, negated: true }),
            _ => Err(invalid("filter", format!("`{column} {op} None`: only = and != compare with None"))),
        };
    }
    let compare = |op: CompareOp| Ok(Predicate::Compare { column: column.clone(), op, value: literal(&value)? });
    match op.as_str() {
        "=" | "==" => compare(CompareOp::Eq),
        "!=" | "<>" => compare(CompareOp::NotEq),
        "<" => compare(CompareOp::Lt),
        "<=" => compare(CompareOp::LtEq),
        ">" => compare(CompareOp::Gt),
        ">=" => compare(CompareOp::GtEq),
        "in" | "not in" => {
            let items: Vec<Bound<'_, PyAny>> = value
                .try_iter()
                .map_err(|_| invalid("filter", format!("`{column} {op}` takes a list of values")))?
                .collect::<PyResult<_>>()?;
            let values = items.iter().map(literal).collect::<PyResult<Vec<_>>>()?;
            Ok(Predicate::InList { column, values, negated: op == "not in" })
        }
        other => Err(invalid("filter", format!("unknown operator `{other}`: use =, !=, <, <=, >, >=, in or not in"))),
    }
}

/// A Python value as a one-row Arrow literal (`pyarrow.array([value])`).
fn literal(value: &Bound<'_, PyAny>) -> PyResult<Literal> {
    let py = value.py();
    let array = py.import("pyarrow")?.call_method1("array", (vec![value.clone()],))?;
    let array: ArrayRef = make_array(ArrayData::from_pyarrow_bound(&array)?);
    if matches!(array.data_type(), DataType::Null) {
        return Err(invalid("filter", format!("{value}: not a value a column holds")));
    }
    Ok(Literal::of(&array, 0))
}
