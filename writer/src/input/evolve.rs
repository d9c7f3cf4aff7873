//! The columns input carries that the table does not have yet, and the
//! Avro type each one's values show, and the numeric columns whose values
//! outgrow their type: what a write that evolves the schema
//! (`WriteSettings::evolve`) adds as nullable columns and promotes.

use arrow::datatypes::DataType;
use serde_json::Value;
use tributary_format::{IS_DELETED, TableSchema};

use super::json::parse_json_lines;
use super::rows::bad;
use crate::error::Result;

/// What the values of one new column showed so far.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Seen {
    Nothing,
    Boolean,
    Long,
    Double,
    String,
}

impl Seen {
    fn avro(self) -> Option<&'static str> {
        match self {
            Seen::Nothing => None,
            Seen::Boolean => Some("boolean"),
            Seen::Long => Some("long"),
            Seen::Double => Some("double"),
            Seen::String => Some("string"),
        }
    }
}

/// A change the input asks of the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputEvolution {
    /// A new nullable column, and the Avro type of its values.
    Add(String, &'static str),
    /// A numeric column promoted to `long` or `double` because its values
    /// outgrow its type.
    Promote(String, &'static str),
}

/// The promotion a numeric column of `data_type` needs to hold `value`:
/// an `int` column a whole number beyond 32 bits (`long`), an `int` or
/// `long` column a number with a fraction or exponent (`double`).
fn outgrows(data_type: &DataType, value: &Value) -> Option<&'static str> {
    let Value::Number(n) = value else { return None };
    let whole = n.is_i64() || n.is_u64();
    match data_type {
        DataType::Int32 if whole && n.as_i64().is_none_or(|v| i32::try_from(v).is_err()) => Some("long"),
        DataType::Int32 | DataType::Int64 if !whole => Some("double"),
        _ => None,
    }
}

/// What the JSON lines of `text` ask of `schema`, in the order first
/// seen: the columns they carry that `schema` lacks, each with the Avro
/// type of its values (`boolean`, `long` for whole numbers, `double` for
/// any number with a fraction or exponent or whole numbers mixed with such,
/// `string`); and the `int` and `long` columns other than the key, ordering
/// and partition fields whose values outgrow them ([`InputEvolution`]).
/// A new column whose values are objects or arrays, mix kinds, or are all
/// null cannot be typed from the input: that is an error naming the line
/// and field, which says to add the column first with its type.
pub fn schema_evolution_in_json_lines(
    schema: &TableSchema,
    text: &str,
    source: &str,
    first_line: usize,
) -> Result<Vec<InputEvolution>> {
    let mut found: Vec<(String, Seen, usize)> = Vec::new();
    let mut promoted: Vec<(String, &'static str)> = Vec::new();
    let fixed = |i: usize| schema.is_key(i) || schema.is_ordering(i) || schema.partition_index() == Some(i);
    for (line, record) in parse_json_lines(text, source, first_line)? {
        let Some(fields) = record.as_object() else { continue };
        for (name, value) in fields {
            if name == IS_DELETED {
                continue;
            }
            if let Ok(i) = schema.arrow().index_of(name) {
                if !fixed(i)
                    && let Some(to) = outgrows(schema.data_type(i), value)
                {
                    match promoted.iter_mut().find(|(n, _)| n == name) {
                        Some(p) if p.1 == "long" => p.1 = to,
                        Some(_) => {}
                        None => promoted.push((name.clone(), to)),
                    }
                }
                continue;
            }
            let at = match found.iter().position(|(n, ..)| n == name) {
                Some(i) => i,
                None => {
                    found.push((name.clone(), Seen::Nothing, line));
                    found.len() - 1
                }
            };
            let seen = &mut found[at].1;
            let this = match value {
                Value::Null => continue,
                Value::Bool(_) => Seen::Boolean,
                Value::Number(n) if n.is_i64() || n.is_u64() => Seen::Long,
                Value::Number(_) => Seen::Double,
                Value::String(_) => Seen::String,
                Value::Array(_) | Value::Object(_) => {
                    return Err(bad(
                        source,
                        line,
                        Some(name),
                        "a new column of nested values is not typed from the input; add it first \
                         (`tributary alter --add-column NAME:TYPE`)",
                    ));
                }
            };
            *seen = match (*seen, this) {
                (Seen::Nothing, t) => t,
                (a, b) if a == b => a,
                (Seen::Long, Seen::Double) | (Seen::Double, Seen::Long) => Seen::Double,
                (a, b) => {
                    return Err(bad(
                        source,
                        line,
                        Some(name),
                        format!(
                            "a new column's values must be of one kind to type it, and this one holds {} \
                             and {} values; add it first (`tributary alter --add-column NAME:TYPE`)",
                            a.avro().unwrap_or("null"),
                            b.avro().unwrap_or("null")
                        ),
                    ));
                }
            };
        }
    }
    let promotions = promoted.into_iter().map(|(n, t)| Ok(InputEvolution::Promote(n, t)));
    promotions
        .chain(found.into_iter().map(|(name, seen, line)| match seen.avro() {
            Some(t) => Ok(InputEvolution::Add(name, t)),
            None => Err(bad(
                source,
                line,
                Some(&name),
                "a new column whose values are all null cannot be typed from the input; add it first \
                 (`tributary alter --add-column NAME:TYPE`)",
            )),
        }))
        .collect()
}
