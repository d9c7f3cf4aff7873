//! Reading Avro timeline files (object container files, one record each).

use std::collections::BTreeSet;

use apache_avro::types::Value;

use crate::error::{Error, Result};

/// The single record of an Avro object container file.
pub fn read_single_record(bytes: &[u8], path: &str) -> Result<Value> {
    let err = |reason: String| Error::Avro { path: path.to_string(), reason };
    let reader = apache_avro::Reader::new(bytes).map_err(|e| err(e.to_string()))?;
    let mut records = reader;
    let first = records.next().ok_or_else(|| err("no record in container".into()))?.map_err(|e| err(e.to_string()))?;
    Ok(first)
}

/// Strips nullable unions.
pub fn plain(v: &Value) -> &Value {
    match v {
        Value::Union(_, inner) => plain(inner),
        other => other,
    }
}

/// A field of a record value, unions stripped.
pub fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    match plain(v) {
        Value::Record(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| plain(v)),
        _ => None,
    }
}

/// A string field of a record value.
pub fn string_field<'a>(v: &'a Value, name: &str) -> Option<&'a str> {
    match field(v, name)? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// The `(partitionPath, fileId)` pairs of a `HoodieCompactionPlan`.
pub fn plan_file_groups(bytes: &[u8], path: &str) -> Result<BTreeSet<(String, String)>> {
    if bytes.is_empty() {
        return Ok(BTreeSet::new());
    }
    let plan = read_single_record(bytes, path)?;
    let Some(Value::Array(ops)) = field(&plan, "operations") else {
        return Ok(BTreeSet::new());
    };
    ops.iter()
        .map(|op| {
            let file_id = string_field(op, "fileId").ok_or_else(|| Error::Corrupt {
                path: path.to_string(),
                reason: "compaction operation without fileId".into(),
            })?;
            let partition = string_field(op, "partitionPath").unwrap_or("");
            Ok((partition.to_string(), file_id.to_string()))
        })
        .collect()
}
