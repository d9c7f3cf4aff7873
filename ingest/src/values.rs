//! Value formats: how a consumed value joins the open batch, and how the
//! batch becomes the table's rows.
//!
//! - JSON (and Debezium events, converted to JSON on the way in): one
//!   object per line, decoded by the writer's JSON-lines decoder, with the
//!   errors `tributary write` gives.
//! - Avro: each value framed as Confluent's wire format (magic byte 0, the
//!   schema id big-endian, the Avro body), decoded in one go by
//!   `arrow_avro`'s decoder into Arrow, then checked by the writer as any
//!   Arrow batch. A plain Avro value gets that framing on the way in; a
//!   framed one must name the schema id of the job's schema.
//!
//! With [`KeyFrom::MessageKey`], the record key comes from the message key:
//! a JSON object's fields for the key fields, or else the key's text (a
//! JSON string unquoted) for a table's single key field.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow_avro::reader::{Decoder, ReaderBuilder};
use arrow_avro::schema::{AvroSchema, Fingerprint, FingerprintAlgorithm, SchemaStore};
use serde_json::{Map, Value};
use tributary_format::{IS_DELETED, TableSchema};
use tributary_writer::Rows;

use crate::batch::{Batch, Position};
use crate::debezium::{Debezium, Refusal};
use crate::error::{Error, Result};
use crate::settings::{IngestSettings, KeyFrom, ValueFormat};

/// The Confluent wire format's magic byte, before the schema id.
const MAGIC: u8 = 0;

/// The schema id a plain Avro value is framed with.
const PLAIN_ID: u32 = 0;

/// Why a batch has no rows: value number `.0` of the batch cannot be
/// written, or the writer failed otherwise.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A value and why it cannot be written.
    Value(usize, Refusal),
    /// Not about one value.
    Other(Error),
}

/// What is in the values, and where record keys come from.
#[derive(Debug)]
pub(crate) struct Values {
    format: Format,
    key_from: KeyFrom,
    /// The table's key fields, and whether each is a string.
    key_fields: Vec<(String, bool)>,
}

#[derive(Debug)]
enum Format {
    Json { debezium: Option<Debezium> },
    Avro { schema: String, framed_id: Option<u32> },
}

impl Values {
    /// The job's value format, checked against the table's `schema`.
    pub(crate) fn new(settings: &IngestSettings, schema: &TableSchema) -> Result<Self> {
        let invalid = |what: &str, reason: String| Error::InvalidInput { what: what.into(), reason };
        let format = match &settings.format {
            ValueFormat::Json => Format::Json { debezium: None },
            ValueFormat::DebeziumJson { order_by } => {
                let field = schema.single_ordering().map(|i| schema.field_name(i).to_string()).ok_or_else(|| {
                    invalid(
                        "ingest --format debezium-json",
                        "the table needs one ordering field for the events' order".into(),
                    )
                })?;
                Format::Json { debezium: Some(Debezium::new(order_by, &field)) }
            }
            ValueFormat::Avro { schema: text, schema_id } => {
                let decoded = decoder(text, schema_id.unwrap_or(PLAIN_ID), 1)
                    .map_err(|e| invalid("the Avro value schema", e.to_string()))?
                    .schema();
                // A field the table lacks would fail every batch: say so now.
                for f in decoded.fields() {
                    if f.name() != IS_DELETED && schema.arrow().index_of(f.name()).is_err() {
                        let reason = format!("field `{}` is not a column of the table", f.name());
                        return Err(invalid("the Avro value schema", reason));
                    }
                }
                Format::Avro { schema: text.clone(), framed_id: *schema_id }
            }
        };
        let key_fields: Vec<(String, bool)> = schema
            .record_key()
            .columns()
            .map(|i| (schema.field_name(i).to_string(), schema.arrow().field(i).data_type() == &DataType::Utf8))
            .collect();
        if settings.key_from == KeyFrom::MessageKey && matches!(format, Format::Avro { .. }) && key_fields.len() != 1 {
            return Err(invalid(
                "ingest --key-from message",
                "with Avro values the message key fills a single key field; this table's key has several".into(),
            ));
        }
        Ok(Self { format, key_from: settings.key_from, key_fields })
    }

    /// Checks `value` (with its message `key`) and appends it to `batch`,
    /// or says why it cannot be written.
    pub(crate) fn accept(
        &self,
        batch: &mut Batch,
        at: Position,
        key: Option<&[u8]>,
        value: &[u8],
    ) -> std::result::Result<(), Refusal> {
        let key = match self.key_from {
            KeyFrom::Value => None,
            KeyFrom::MessageKey => {
                let field = self.key_fields.first().map(|(f, _)| f.clone());
                Some(key.ok_or_else(|| (field, "the message has no key to take the record key from".to_string()))?)
            }
        };
        match &self.format {
            Format::Json { debezium } => {
                let text = std::str::from_utf8(value).map_err(|e| (None, format!("not UTF-8 text: {e}")))?;
                if text.trim().is_empty() {
                    return Err((None, "an empty value, not a JSON object".into()));
                }
                let mut owned = match debezium {
                    Some(d) => Some(d.record(value)?),
                    None => None,
                };
                if let Some(key) = key {
                    owned = Some(self.with_json_key(owned.as_deref().unwrap_or(text), key)?);
                }
                let text = owned.as_deref().unwrap_or(text);
                batch.push(at, None, |data| {
                    // A JSON value holds no raw line break outside its strings
                    // (inside them it is invalid anyway), so one value is one line.
                    if text.contains(['\n', '\r']) {
                        data.extend_from_slice(text.replace(['\n', '\r'], " ").as_bytes());
                    } else {
                        data.extend_from_slice(text.as_bytes());
                    }
                    data.push(b'\n');
                });
            }
            Format::Avro { framed_id: Some(id), .. } => {
                match value {
                    [MAGIC, a, b, c, d, ..] if u32::from_be_bytes([*a, *b, *c, *d]) == *id => {}
                    [MAGIC, a, b, c, d, ..] => {
                        let found = u32::from_be_bytes([*a, *b, *c, *d]);
                        return Err((
                            None,
                            format!("Confluent schema id {found}, not the job's value schema (id {id})"),
                        ));
                    }
                    _ => {
                        return Err((
                            None,
                            "not in Confluent's framing (magic byte 0, then a 4-byte schema id)".to_string(),
                        ));
                    }
                }
                batch.push(at, key.map(<[u8]>::to_vec), |data| data.extend_from_slice(value));
            }
            Format::Avro { framed_id: None, .. } => {
                batch.push(at, key.map(<[u8]>::to_vec), |data| {
                    data.push(MAGIC);
                    data.extend_from_slice(&PLAIN_ID.to_be_bytes());
                    data.extend_from_slice(value);
                });
            }
        }
        Ok(())
    }

    /// The value as consumed, from what [`Values::accept`] kept of it (a
    /// Debezium event's record, not the event).
    pub(crate) fn original<'a>(&self, kept: &'a [u8]) -> &'a [u8] {
        match &self.format {
            Format::Json { .. } => kept.strip_suffix(b"\n").unwrap_or(kept),
            Format::Avro { framed_id: None, .. } => kept.get(5..).unwrap_or(kept),
            Format::Avro { framed_id: Some(_), .. } => kept,
        }
    }

    /// The record `text` with its key fields taken from the message key.
    fn with_json_key(&self, text: &str, key: &[u8]) -> std::result::Result<String, Refusal> {
        let mut record: Map<String, Value> = match serde_json::from_str(text) {
            Ok(Value::Object(o)) => o,
            // The writer's decoder names what is wrong with it.
            _ => return Ok(text.to_string()),
        };
        let parsed: Option<Value> = serde_json::from_slice(key).ok();
        let parsed = match parsed {
            Some(Value::Object(mut o)) if o.contains_key("schema") && o.contains_key("payload") => {
                o.remove("payload").unwrap_or_default()
            }
            other => other.unwrap_or(Value::Null),
        };
        match (parsed, self.key_fields.as_slice()) {
            (Value::Object(fields), _) => {
                for (name, _) in &self.key_fields {
                    let v = fields.get(name).ok_or_else(|| {
                        (Some(name.clone()), "the message key (a JSON object) lacks this key field".into())
                    })?;
                    record.insert(name.clone(), v.clone());
                }
            }
            (parsed, [(name, is_string)]) => {
                let v = key_scalar(key, parsed, *is_string)
                    .map_err(|reason| (Some(name.clone()), format!("the message key: {reason}")))?;
                record.insert(name.clone(), v);
            }
            _ => {
                return Err((
                    None,
                    "the table's key has several fields: the message key must be a JSON object holding them".into(),
                ));
            }
        }
        Ok(Value::Object(record).to_string())
    }

    /// The rows of `batch`, or why it has none.
    pub(crate) fn rows(&self, schema: &TableSchema, batch: &Batch) -> std::result::Result<Rows, Failure> {
        match &self.format {
            Format::Json { .. } => {
                let text = std::str::from_utf8(batch.data())
                    .map_err(|e| Failure::Value(0, (None, format!("not UTF-8 text: {e}"))))?;
                tributary_writer::rows_from_json_lines(schema, text, "kafka", 1).map_err(value_failure)
            }
            Format::Avro { schema: avro, framed_id } => {
                let mut decoder = decoder(avro, framed_id.unwrap_or(PLAIN_ID), batch.len())
                    .map_err(|e| internal("the Avro decoder", e))?;
                for i in 0..batch.len() {
                    let value = batch.value(i);
                    let consumed = decoder
                        .decode(value)
                        .map_err(|e| Failure::Value(i, (None, format!("not Avro of the value schema: {e}"))))?;
                    if consumed != value.len() {
                        return Err(Failure::Value(
                            i,
                            (
                                None,
                                format!(
                                    "not Avro of the value schema: {} bytes of it are left",
                                    value.len() - consumed
                                ),
                            ),
                        ));
                    }
                }
                let decoded = decoder.flush().map_err(|e| internal("decoding Avro values", e))?;
                let mut decoded = decoded.unwrap_or_else(|| RecordBatch::new_empty(decoder.schema()));
                if self.key_from == KeyFrom::MessageKey {
                    decoded = self.with_key_column(decoded, batch)?;
                }
                tributary_writer::rows_from_batch(schema, &decoded, "kafka").map_err(value_failure)
            }
        }
    }

    /// `decoded` with its key column from the batch's message keys (as
    /// text; the writer converts it to the column's type).
    fn with_key_column(&self, decoded: RecordBatch, batch: &Batch) -> std::result::Result<RecordBatch, Failure> {
        let name = self.key_fields[0].0.clone();
        let mut texts = Vec::with_capacity(batch.len());
        for (i, entry) in batch.entries().iter().enumerate() {
            let key = entry.key.as_deref().unwrap_or_default();
            let text = match serde_json::from_slice::<Value>(key) {
                Ok(Value::String(s)) => s,
                _ => String::from_utf8(key.to_vec()).map_err(|e| {
                    Failure::Value(i, (Some(name.clone()), format!("the message key is not UTF-8 text: {e}")))
                })?,
            };
            texts.push(text);
        }
        let column: ArrayRef = Arc::new(StringArray::from(texts));
        let mut fields: Vec<Field> = Vec::new();
        let mut columns: Vec<ArrayRef> = Vec::new();
        let input = decoded.schema();
        for (f, c) in input.fields().iter().zip(decoded.columns()) {
            if f.name() != &name {
                fields.push(f.as_ref().clone());
                columns.push(c.clone());
            }
        }
        fields.push(Field::new(&name, DataType::Utf8, false));
        columns.push(column);
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
            .map_err(|e| internal("the message keys' column", e))
    }
}

/// A single key field's JSON value from the message key: its JSON value
/// when it is one (a JSON string's text for a string field), else its
/// text.
fn key_scalar(raw: &[u8], parsed: Value, is_string: bool) -> std::result::Result<Value, String> {
    let text = || String::from_utf8(raw.to_vec()).map_err(|e| format!("not UTF-8 text: {e}"));
    Ok(match parsed {
        Value::String(s) => Value::String(s),
        Value::Number(_) | Value::Bool(_) if is_string => Value::String(text()?),
        Value::Number(_) | Value::Bool(_) => parsed,
        _ => Value::String(text()?),
    })
}

/// The writer's error about record `n` (1-based) as the failure of value
/// `n - 1`.
fn value_failure(e: tributary_writer::Error) -> Failure {
    match e {
        tributary_writer::Error::BadRecord { record, field, reason, .. } if record >= 1 => {
            Failure::Value(record - 1, (field, reason))
        }
        other => Failure::Other(Error::Writer(other)),
    }
}

/// A step that cannot fail on values this module accepted.
fn internal(what: &str, e: impl std::fmt::Display) -> Failure {
    Failure::Other(Error::Internal { what: what.into(), reason: e.to_string() })
}

/// A decoder of Confluent-framed values with schema id `id` for `schema`,
/// holding up to `rows` rows.
fn decoder(schema: &str, id: u32, rows: usize) -> std::result::Result<Decoder, arrow::error::ArrowError> {
    let mut store = SchemaStore::new_with_type(FingerprintAlgorithm::Id);
    store.set(Fingerprint::Id(id), AvroSchema::new(schema.to_string()))?;
    ReaderBuilder::new().with_writer_schema_store(store).with_batch_size(rows.max(1)).build_decoder()
}

#[cfg(test)]
mod tests {
    use apache_avro::types::Value as Avro;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int64Type;

    use super::*;

    const TABLE: &str = r#"{"type":"record","name":"r","fields":[
        {"name":"id","type":"string"},{"name":"ts","type":"long"},
        {"name":"v","type":["null","long"],"default":null}]}"#;
    /// The values' schema: no key field (it comes from message keys).
    const VALUE: &str = r#"{"type":"record","name":"e","fields":[
        {"name":"ts","type":"long"},{"name":"v","type":["null","long"],"default":null}]}"#;

    fn table() -> TableSchema {
        TableSchema::new(TABLE, &["id"], Some("ts"), None).unwrap()
    }

    fn values(format: ValueFormat, key_from: KeyFrom) -> Values {
        let mut settings = IngestSettings::new("b", vec!["t".into()], "g");
        settings.format = format;
        settings.key_from = key_from;
        Values::new(&settings, &table()).unwrap()
    }

    fn at(offset: i64) -> Position {
        (("t".to_string(), 0), offset)
    }

    fn avro(ts: i64, v: Option<i64>) -> Vec<u8> {
        let schema = apache_avro::Schema::parse_str(VALUE).unwrap();
        let v = match v {
            Some(v) => Avro::Union(1, Box::new(Avro::Long(v))),
            None => Avro::Union(0, Box::new(Avro::Null)),
        };
        apache_avro::to_avro_datum(&schema, Avro::Record(vec![("ts".into(), Avro::Long(ts)), ("v".into(), v)])).unwrap()
    }

    fn framed(id: u32, body: &[u8]) -> Vec<u8> {
        let mut out = vec![MAGIC];
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    /// The rows' (key, ts, v).
    fn triples(rows: &Rows) -> Vec<(String, i64, Option<i64>)> {
        let b = &rows.batch;
        let (id, ts, v) = (b.column(0).as_string::<i32>(), b.column(1).as_primitive::<Int64Type>(), b.column(2));
        let v = v.as_primitive::<Int64Type>();
        (0..b.num_rows())
            .map(|i| (id.value(i).to_string(), ts.value(i), if v.is_null(i) { None } else { Some(v.value(i)) }))
            .collect()
    }

    #[test]
    fn json_keys_come_from_message_keys_as_text_json_strings_or_objects() {
        let vals = values(ValueFormat::Json, KeyFrom::MessageKey);
        let mut batch = Batch::default();
        for (o, key) in [(0, &b"a"[..]), (1, br#""b""#), (2, br#"{"id":"c"}"#), (3, b"42")] {
            vals.accept(&mut batch, at(o), Some(key), format!(r#"{{"id":"x","ts":{o},"v":{o}}}"#).as_bytes()).unwrap();
        }
        let rows = vals.rows(&table(), &batch).unwrap();
        let keys: Vec<String> = triples(&rows).into_iter().map(|t| t.0).collect();
        assert_eq!(keys, ["a", "b", "c", "42"]);
        let (field, reason) = vals.accept(&mut batch, at(4), None, br#"{"ts":4}"#).unwrap_err();
        assert_eq!(field.as_deref(), Some("id"), "{reason}");
        let (field, _) = vals.accept(&mut batch, at(5), Some(br#"{"other":1}"#), br#"{"ts":5}"#).unwrap_err();
        assert_eq!(field.as_deref(), Some("id"));
    }

    #[test]
    fn plain_and_framed_avro_decode_into_the_tables_rows() {
        let plain = values(ValueFormat::Avro { schema: VALUE.into(), schema_id: None }, KeyFrom::MessageKey);
        let mut batch = Batch::default();
        plain.accept(&mut batch, at(0), Some(b"k1"), &avro(5, Some(50))).unwrap();
        plain.accept(&mut batch, at(1), Some(b"k2"), &avro(6, None)).unwrap();
        assert_eq!(plain.original(batch.value(1)), avro(6, None));
        let rows = plain.rows(&table(), &batch).unwrap();
        assert_eq!(triples(&rows), [("k1".into(), 5, Some(50)), ("k2".into(), 6, None)]);

        let confluent = values(ValueFormat::Avro { schema: VALUE.into(), schema_id: Some(7) }, KeyFrom::MessageKey);
        let mut batch = Batch::default();
        confluent.accept(&mut batch, at(0), Some(b"k1"), &framed(7, &avro(1, Some(1)))).unwrap();
        let (_, reason) = confluent.accept(&mut batch, at(1), Some(b"k1"), &framed(8, &avro(1, None))).unwrap_err();
        assert!(reason.contains("schema id 8") && reason.contains("id 7"), "{reason}");
        let (_, reason) = confluent.accept(&mut batch, at(2), Some(b"k1"), &avro(1, None)).unwrap_err();
        assert!(reason.contains("Confluent"), "{reason}");
        // A body that is not of the schema: cut short, or with bytes left.
        let mut short = framed(7, &avro(2, Some(2)));
        short.pop();
        confluent.accept(&mut batch, at(3), Some(b"k2"), &short).unwrap();
        match confluent.rows(&table(), &batch) {
            Err(Failure::Value(1, (_, reason))) => assert!(reason.contains("not Avro"), "{reason}"),
            other => panic!("{other:?}"),
        }
        let mut long = framed(7, &avro(2, Some(2)));
        long.push(0);
        let mut batch = Batch::default();
        confluent.accept(&mut batch, at(4), Some(b"k2"), &long).unwrap();
        assert!(matches!(confluent.rows(&table(), &batch), Err(Failure::Value(0, _))));
    }

    #[test]
    fn an_avro_schema_the_table_cannot_take_is_refused_at_once() {
        let mut settings = IngestSettings::new("b", vec!["t".into()], "g");
        let stranger = r#"{"type":"record","name":"e","fields":[{"name":"zz","type":"long"}]}"#;
        settings.format = ValueFormat::Avro { schema: stranger.into(), schema_id: None };
        let e = Values::new(&settings, &table()).unwrap_err();
        assert!(e.to_string().contains("`zz`"), "{e}");
        settings.format = ValueFormat::Avro { schema: "{".into(), schema_id: None };
        assert!(Values::new(&settings, &table()).is_err());
    }
}
