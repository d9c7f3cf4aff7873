//! Debezium change events (`--format debezium-json`): each envelope becomes
//! the record line the JSON decoder takes.
//!
//! - `op` `c` (create), `r` (snapshot read) and `u` (update) upsert `after`;
//! - `d` deletes the key of `before`;
//! - either way the table's ordering field takes the value at the path the
//!   job names (`source.lsn`, `ts_ms`, ...), so a late delete loses to a
//!   newer update as every delete does;
//! - an envelope inside `{"schema":..,"payload":..}` (the JSON converter
//!   with schemas enabled) is unwrapped;
//! - tombstones (null values, which Debezium sends after a delete for log
//!   compaction) never get here: the loop skips every null value.

use serde_json::{Map, Value};

/// Why an envelope cannot be written: the field involved, if any, and
/// what is wrong.
pub(crate) type Refusal = (Option<String>, String);

/// How envelopes map to records.
#[derive(Debug, Clone)]
pub(crate) struct Debezium {
    /// The envelope path whose value orders the changes, split at `.`.
    order_by: Vec<String>,
    /// The table column that value goes into.
    ordering_field: String,
}

impl Debezium {
    pub(crate) fn new(order_by: &str, ordering_field: &str) -> Self {
        Self { order_by: order_by.split('.').map(String::from).collect(), ordering_field: ordering_field.to_string() }
    }

    /// The record line (a JSON object) for the envelope `value`.
    pub(crate) fn record(&self, value: &[u8]) -> Result<String, Refusal> {
        let mut envelope: Value = serde_json::from_slice(value).map_err(|e| (None, format!("malformed JSON: {e}")))?;
        if envelope.get("schema").is_some()
            && let Some(payload) = envelope.get_mut("payload").map(Value::take)
        {
            envelope = payload;
        }
        let op: String = envelope
            .get("op")
            .and_then(Value::as_str)
            .ok_or_else(|| (Some("op".to_string()), "not a Debezium change event: no `op` string".to_string()))?
            .to_string();
        let (image, deletes) = match op.as_str() {
            "c" | "r" | "u" => ("after", false),
            "d" => ("before", true),
            "t" => return Err((Some("op".into()), "a truncate (`op` t) cannot be applied row by row".into())),
            other => {
                return Err((
                    Some("op".into()),
                    format!("`{other}` is not an operation this job applies (c, r, u, d)"),
                ));
            }
        };
        let order = self.order_value(&envelope)?;
        let mut record: Map<String, Value> = match envelope.get_mut(image).map(Value::take) {
            Some(Value::Object(o)) => o,
            _ => return Err((Some(image.into()), format!("`op` {op} needs the row image `{image}` as an object"))),
        };
        record.insert(self.ordering_field.clone(), order);
        if deletes {
            record.insert("_hoodie_is_deleted".into(), Value::Bool(true));
        }
        Ok(Value::Object(record).to_string())
    }

    fn order_value(&self, envelope: &Value) -> Result<Value, Refusal> {
        let mut at = envelope;
        for part in &self.order_by {
            at = at.get(part).unwrap_or(&Value::Null);
        }
        match at {
            Value::Number(_) | Value::String(_) => Ok(at.clone()),
            _ => Err((
                Some(self.order_by.join(".")),
                "the ordering path holds no number or string in this event".to_string(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(d: &Debezium, v: Value) -> Result<Value, Refusal> {
        d.record(v.to_string().as_bytes()).map(|r| serde_json::from_str(&r).unwrap())
    }

    #[test]
    fn changes_become_upserts_and_deletes_ordered_by_the_path() {
        let d = Debezium::new("source.lsn", "lsn");
        let update = json!({"op":"u","before":{"id":1,"n":"a"},"after":{"id":1,"n":"b"},"source":{"lsn":42}});
        assert_eq!(record(&d, update).unwrap(), json!({"id":1,"n":"b","lsn":42}));
        let delete =
            json!({"schema":{},"payload":{"op":"d","before":{"id":1,"n":"b"},"after":null,"source":{"lsn":43}}});
        assert_eq!(record(&d, delete).unwrap(), json!({"id":1,"n":"b","lsn":43,"_hoodie_is_deleted":true}));
        let (field, reason) = record(&d, json!({"op":"c","after":{"id":1},"source":{}})).unwrap_err();
        assert_eq!(field.as_deref(), Some("source.lsn"), "{reason}");
        let (field, _) = record(&d, json!({"op":"t","source":{"lsn":1}})).unwrap_err();
        assert_eq!(field.as_deref(), Some("op"));
        assert!(record(&d, json!({"after":{}})).is_err());
    }
}
