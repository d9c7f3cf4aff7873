//! A table's schema from a pyarrow schema: the Avro schema JSON Tributary
//! creates tables with, by arrow-avro's Arrow-to-Avro mapping, then made
//! into what Hudi's writers write (nullable fields as `["null", T]` with a
//! `null` default, the record named `<table>_record` in namespace
//! `hoodie.<table>`, microsecond timestamps for nanosecond ones).

use arrow::datatypes::{Field, Schema};
use arrow_avro::schema::AvroSchema;
use arrow_pyarrow::PyArrowType;
use pyo3::prelude::*;
use serde_json::{Map, Value, json};

use crate::errors::invalid;

/// `avro_schema_of(schema, name)`: the Avro schema JSON a table named
/// `name` is created with from pyarrow schema `schema`.
#[pyfunction]
#[pyo3(signature = (schema, name = "tributary"))]
pub(crate) fn avro_schema_of(schema: PyArrowType<Schema>, name: &str) -> PyResult<String> {
    avro_json(&schema.0, name)
}

/// The Avro schema JSON of Arrow schema `schema` for a table named `name`.
pub(crate) fn avro_json(schema: &Schema, name: &str) -> PyResult<String> {
    // Field metadata (pandas', say) is not schema: it would become Avro
    // properties.
    let plain = Schema::new(
        schema.fields().iter().map(|f| Field::clone(f).with_metadata(Default::default())).collect::<Vec<_>>(),
    );
    let avro = AvroSchema::try_from(&plain).map_err(|e| invalid("schema", e))?;
    let mut value: Value = serde_json::from_str(&avro.json_string).map_err(|e| invalid("schema", e))?;
    let Some(top) = value.as_object_mut() else {
        return Err(invalid("schema", "the Arrow schema did not map to an Avro record"));
    };
    let name = table_name(name);
    top.insert("name".into(), json!(format!("{name}_record")));
    top.insert("namespace".into(), json!(format!("hoodie.{name}")));
    hudi_style(&mut value);
    Ok(value.to_string())
}

/// `name` as an Avro name: ASCII letters, digits and `_`, not starting with
/// a digit.
fn table_name(name: &str) -> String {
    let mut out: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// Rewrites an Avro schema value in place, recursively: record fields
/// whose type is a union with `null` get `null` first and a `null` default;
/// nanosecond timestamps become microsecond ones (Hudi's readers know no
/// nanoseconds; the writer casts the values); arrow-avro's own `arrow*`
/// properties go.
fn hudi_style(value: &mut Value) {
    match value {
        Value::Array(branches) => branches.iter_mut().for_each(hudi_style),
        Value::Object(map) => {
            map.retain(|k, _| !k.starts_with("arrow"));
            if let Some(Value::String(logical)) = map.get_mut("logicalType") {
                match logical.as_str() {
                    "timestamp-nanos" => *logical = "timestamp-micros".into(),
                    "local-timestamp-nanos" => *logical = "local-timestamp-micros".into(),
                    _ => {}
                }
            }
            if map.get("type").and_then(Value::as_str) == Some("record")
                && let Some(Value::Array(fields)) = map.get_mut("fields")
            {
                fields.iter_mut().filter_map(Value::as_object_mut).for_each(nullable_first);
            }
            for (key, v) in map.iter_mut() {
                if matches!(key.as_str(), "type" | "items" | "values" | "fields") {
                    hudi_style(v);
                }
            }
        }
        _ => {}
    }
}

/// A field whose type is a union with `null`: `null` first, and a `null`
/// default (Hudi's writers write nullable fields so).
fn nullable_first(field: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = field.get_mut("type") else { return };
    let Some(at) = branches.iter().position(|b| b.as_str() == Some("null")) else { return };
    let null = branches.remove(at);
    branches.insert(0, null);
    field.insert("default".into(), Value::Null);
}
