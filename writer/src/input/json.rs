//! The JSON door: records as JSON values (the row API) or JSON-lines
//! text, decoded either through a JSON tree (the reference decoding) or
//! straight into the columns.

use serde_json::Value;
use tributary_format::{IS_DELETED, TableSchema};

use super::rows::{Rows, bad};
use super::rows_builder::{Fault, RowsBuilder};
use super::scalar::Scalar;
use crate::error::Result;

/// Builds validated rows from JSON objects. `first_record` numbers the
/// first value in error messages (its line in a JSON-lines file).
pub(crate) fn rows_from_json(
    schema: &TableSchema,
    values: &[Value],
    source: &str,
    first_record: usize,
) -> Result<Rows> {
    let numbered: Vec<(usize, &Value)> = values.iter().enumerate().map(|(n, v)| (first_record + n, v)).collect();
    rows_from_numbered(schema, &numbered, source)
}

/// [`rows_from_json`] over values that carry their own record numbers (the
/// lines of a JSON-lines text with blank lines in it). This is the
/// reference decoding: its checks run field by field in schema order, so a
/// record with several faults reports the first field's.
pub(super) fn rows_from_numbered(schema: &TableSchema, values: &[(usize, &Value)], source: &str) -> Result<Rows> {
    let mut rows = RowsBuilder::new(schema, values.len())?;
    for &(record, value) in values {
        let obj = value.as_object().ok_or_else(|| bad(source, record, None, "expected a JSON object"))?;
        for k in obj.keys() {
            if k != IS_DELETED && schema.arrow().index_of(k).is_err() {
                return Err(bad(source, record, Some(k), "unknown column (not in the table schema)"));
            }
        }
        let is_deleted = match obj.get(IS_DELETED) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(bad(source, record, Some(IS_DELETED), format!("expected true or false, got {other}")));
            }
        };
        let fault = |(i, reason): Fault| bad(source, record, Some(schema.arrow().field(i).name()), reason);
        for (i, f) in schema.arrow().fields().iter().enumerate() {
            match obj.get(f.name()) {
                Some(v) => rows.given(i, Scalar::of(v)).map_err(fault)?,
                None => rows.missing(i, is_deleted).map_err(fault)?,
            }
        }
        rows.end_record(record, is_deleted).map_err(fault)?;
    }
    rows.finish(source)
}

/// Decodes JSON-lines `text` into validated rows straight into Arrow
/// columns, with no JSON tree per record; `first_line` is the 1-based line
/// number of its first line, and blank lines are skipped. It accepts and
/// refuses exactly what `parse_json_lines` with `rows_from_json` does:
/// every column value goes through the same rules (`RowsBuilder`). Any
/// fault sends the text through that reference decoding instead, so errors
/// are the same too, naming the first faulty line and field.
pub fn rows_from_json_lines(schema: &TableSchema, text: &str, source: &str, first_line: usize) -> Result<Rows> {
    stream_decode(schema, text, first_line).or_else(|()| {
        let values = parse_json_lines(text, source, first_line)?;
        let numbered: Vec<(usize, &Value)> = values.iter().map(|(n, v)| (*n, v)).collect();
        rows_from_numbered(schema, &numbered, source)
    })
}

/// The fast path of [`rows_from_json_lines`]: `Err(())` on any fault, for
/// the reference decoding to name.
pub(super) fn stream_decode(schema: &TableSchema, text: &str, first_line: usize) -> std::result::Result<Rows, ()> {
    use serde::de::DeserializeSeed;
    let lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let mut rows = RowsBuilder::new(schema, text.len() / 64).map_err(drop)?;
    for (n, line) in lines {
        let mut de = serde_json::Deserializer::from_str(line);
        let is_deleted = RecordSeed(&mut rows).deserialize(&mut de).map_err(drop)?;
        de.end().map_err(drop)?;
        rows.end_record(first_line + n, is_deleted).map_err(drop)?;
    }
    rows.finish("").map_err(drop)
}

/// Decodes one JSON object into a [`RowsBuilder`]'s current record;
/// yields whether the record deletes its key.
struct RecordSeed<'b, 's>(&'b mut RowsBuilder<'s>);

impl<'de> serde::de::DeserializeSeed<'de> for RecordSeed<'_, '_> {
    type Value = bool;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<bool, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for RecordSeed<'_, '_> {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<bool, A::Error> {
        use serde::de::Error as _;
        let (mut is_deleted, mut next) = (None, 0);
        while let Some(field) = map.next_key_seed(FieldSeed(self.0.schema, next))? {
            match field {
                Field::Column(i) => {
                    map.next_value_seed(ValueSeed(self.0, i))?;
                    next = i + 1;
                }
                Field::IsDeleted(column) if is_deleted.is_none() => {
                    let flag = map.next_value::<Option<bool>>()?;
                    is_deleted = Some(flag.unwrap_or(false));
                    // A table may keep the flag as a column of its own too.
                    if let Some(i) = column {
                        self.0
                            .given(i, flag.map_or(Scalar::Null, Scalar::Bool))
                            .map_err(|(_, r)| A::Error::custom(r))?;
                    }
                }
                Field::IsDeleted(_) => return Err(A::Error::custom("given twice")),
            }
        }
        Ok(is_deleted.unwrap_or(false))
    }
}

/// A key of a record.
enum Field {
    /// A column of the table.
    Column(usize),
    /// `_hoodie_is_deleted`, and its column if the table has one.
    IsDeleted(Option<usize>),
}

/// A key of a record as a [`Field`]; an unknown column is an error.
/// Records mostly list their fields in schema order, so the column after
/// the last one is tried first.
struct FieldSeed<'s>(&'s TableSchema, usize);

impl<'de> serde::de::DeserializeSeed<'de> for FieldSeed<'_> {
    type Value = Field;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl serde::de::Visitor<'_> for FieldSeed<'_> {
    type Value = Field;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a column name")
    }

    fn visit_str<E: serde::de::Error>(self, name: &str) -> std::result::Result<Self::Value, E> {
        let fields = self.0.arrow().fields();
        let column = if fields.get(self.1).is_some_and(|f| f.name() == name) {
            Some(self.1)
        } else {
            self.0.arrow().index_of(name).ok()
        };
        match column {
            _ if name == IS_DELETED => Ok(Field::IsDeleted(column)),
            Some(i) => Ok(Field::Column(i)),
            None => Err(E::custom("unknown column")),
        }
    }
}

/// One column's value, handed to the [`RowsBuilder`] as a [`Scalar`].
struct ValueSeed<'b, 's>(&'b mut RowsBuilder<'s>, usize);

impl<'de> serde::de::DeserializeSeed<'de> for ValueSeed<'_, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl ValueSeed<'_, '_> {
    fn give<E: serde::de::Error>(self, v: Scalar<'_>) -> std::result::Result<(), E> {
        self.0.given(self.1, v).map_err(|(_, reason)| E::custom(reason))
    }
}

impl<'de> serde::de::Visitor<'de> for ValueSeed<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON scalar")
    }

    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<(), E> {
        self.give(Scalar::Null)
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> std::result::Result<(), E> {
        self.give(Scalar::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<(), E> {
        self.give(Scalar::Int(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<(), E> {
        match i64::try_from(v) {
            Ok(i) => self.give(Scalar::Int(i)),
            Err(_) => self.give(Scalar::UInt(v)),
        }
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<(), E> {
        self.give(Scalar::Float(v))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<(), E> {
        self.give(Scalar::Str(v))
    }
}

/// Parses JSON lines; `first_line` is the 1-based line number of `text`'s
/// first line. Blank lines are skipped.
pub(crate) fn parse_json_lines(text: &str, source: &str, first_line: usize) -> Result<Vec<(usize, Value)>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .map(|v| (first_line + i, v))
                .map_err(|e| bad(source, first_line + i, None, format!("malformed JSON: {e}")))
        })
        .collect()
}
