//! CDC_DATA blocks (type 6): the change records of Hudi's `.cdc` log files
//! in its `DATA_BEFORE_AFTER` supplemental logging mode
//! (`docs/design.md`, "Change log"; `../shared/docs/hudi-format.md` §11).
//!
//! A block's content is laid out as an AVRO_DATA block's (version 3, a
//! record count, then each record's length and Avro binary), and each
//! record is Hudi's CDC record (`HoodieCDCUtils.createCDCSchema`): `op` and
//! `ts_ms`, optional strings, then `before` and `after`, each the table's
//! record (meta columns aside) or null. The block's `SCHEMA` header is
//! that record schema, which readers decode the content with.

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::log_block::{AvroContent, BlockType, HeaderKey, begin_block, finish_block};
use crate::schema::{put_bytes, put_long};

/// The CDC record's name, as Hudi names it.
const CDC_RECORD: &str = "CDC";

/// The Avro schema of `DATA_BEFORE_AFTER` change records over a table
/// whose record schema (meta columns aside) is `table_json`: the record
/// `CDC` in the table's namespace with fields `op`, `ts_ms` (optional
/// strings), `before` and `after` (the table's record, optional; `after`
/// names the type `before` defines).
pub fn cdc_schema_json(table_json: &str) -> Result<String> {
    let bad = |reason: String| Error::InvalidInput { what: "the table's Avro schema".into(), reason };
    let table: Value = serde_json::from_str(table_json).map_err(|e| bad(e.to_string()))?;
    let name = table.get("name").and_then(Value::as_str).ok_or_else(|| bad("a record schema without a name".into()))?;
    let namespace = table.get("namespace").and_then(Value::as_str);
    let full_name = match namespace {
        Some(ns) if !ns.is_empty() && !name.contains('.') => format!("{ns}.{name}"),
        _ => name.to_string(),
    };
    let optional_string = json!(["null", "string"]);
    let mut cdc = json!({
        "type": "record",
        "name": CDC_RECORD,
        "fields": [
            {"name": "op", "type": optional_string, "default": null},
            {"name": "ts_ms", "type": optional_string, "default": null},
            {"name": "before", "type": ["null", table], "default": null},
            {"name": "after", "type": ["null", full_name], "default": null},
        ],
    });
    if let Some(ns) = namespace {
        cdc["namespace"] = json!(ns);
    }
    Ok(cdc.to_string())
}

/// One change record: its kind (`i`, `u` or `d`), the instant it is
/// recorded at (`ts_ms`), and the Avro binary of the table's record
/// before and after the change ([`crate::TableDatumEncoder`]).
#[derive(Debug, Clone, Copy)]
pub struct CdcRecord<'a> {
    /// `i`, `u` or `d`.
    pub op: &'a str,
    /// The instant the change is recorded at.
    pub ts_ms: &'a str,
    /// The row before (none for an insert).
    pub before: Option<&'a [u8]>,
    /// The row after (none for a delete).
    pub after: Option<&'a [u8]>,
}

/// Appends the content of one CDC_DATA block holding `records` to `out`;
/// returns how many records it holds.
pub fn encode_cdc_content<'a>(records: impl IntoIterator<Item = CdcRecord<'a>>, out: &mut Vec<u8>) -> usize {
    let mut content = AvroContent::begin(out);
    for r in records {
        let at = content.start_record(out);
        // A union's branch index, then the value: `["null", T]`.
        for s in [r.op, r.ts_ms] {
            put_long(out, 1);
            put_bytes(out, s.as_bytes());
        }
        for image in [r.before, r.after] {
            match image {
                None => put_long(out, 0),
                Some(datum) => {
                    put_long(out, 1);
                    out.extend_from_slice(datum);
                }
            }
        }
        content.end_record(out, at);
    }
    let n = content.records();
    content.finish(out);
    n
}

/// Appends one whole CDC_DATA block of `records` to `out`, with the
/// headers Hudi's CDC logger writes: `INSTANT_TIME` and `SCHEMA`
/// ([`cdc_schema_json`]). Returns how many records it holds.
pub fn encode_cdc_block<'a>(
    records: impl IntoIterator<Item = CdcRecord<'a>>,
    cdc_schema: &str,
    instant: &str,
    out: &mut Vec<u8>,
) -> usize {
    let header = [(HeaderKey::InstantTime, instant.to_string()), (HeaderKey::Schema, cdc_schema.to_string())];
    let open = begin_block(out, BlockType::CdcData, &header);
    let n = encode_cdc_content(records, out);
    finish_block(out, open, &[]);
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode_data_block;
    use arrow::array::{Array, AsArray, StructArray};

    const TABLE: &str = r#"{"type":"record","name":"trips","namespace":"hoodie.trips","fields":[{"name":"id","type":"string"},{"name":"ts","type":"long"}]}"#;

    /// `{"id": id, "ts": ts}` in Avro binary.
    fn datum(id: &str, ts: i64) -> Vec<u8> {
        let mut out = Vec::new();
        put_bytes(&mut out, id.as_bytes());
        put_long(&mut out, ts);
        out
    }

    #[test]
    fn change_records_read_back_through_their_schema() {
        let schema = cdc_schema_json(TABLE).unwrap();
        let parsed = apache_avro::Schema::parse_str(&schema).unwrap();
        assert!(matches!(parsed, apache_avro::Schema::Record(_)), "{schema}");
        let (a1, a2, b1) = (datum("a", 1), datum("a", 2), datum("b", 1));
        let records = [
            CdcRecord { op: "i", ts_ms: "20250101000000001", before: None, after: Some(&b1) },
            CdcRecord { op: "u", ts_ms: "20250101000000001", before: Some(&a1), after: Some(&a2) },
            CdcRecord { op: "d", ts_ms: "20250101000000001", before: Some(&b1), after: None },
        ];
        let mut content = Vec::new();
        assert_eq!(encode_cdc_content(records, &mut content), 3);
        let batch = decode_data_block(&content, &schema, &schema, "t.cdc").unwrap();
        let mut file = Vec::new();
        assert_eq!(encode_cdc_block(records, &schema, "20250101000000002", &mut file), 3);
        let blocks = crate::LogBlock::decode_all(&bytes::Bytes::from(file), "t.cdc").unwrap();
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].block_type, BlockType::CdcData);
        assert_eq!(blocks[0].header(HeaderKey::Schema), Some(schema.as_str()));
        assert_eq!(blocks[0].header(HeaderKey::InstantTime), Some("20250101000000002"));
        assert_eq!(&blocks[0].content[..], &content[..]);
        assert_eq!(batch.num_rows(), 3);
        let ops: Vec<&str> = batch.column(0).as_string::<i32>().iter().map(|o| o.unwrap()).collect();
        assert_eq!(ops, ["i", "u", "d"]);
        let image = |col: usize, row: usize| {
            let s: &StructArray = batch.column(col).as_struct();
            s.is_valid(row).then(|| {
                let id = s.column(0).as_string::<i32>().value(row).to_string();
                let ts = s.column(1).as_primitive::<arrow::datatypes::Int64Type>().value(row);
                (id, ts)
            })
        };
        assert_eq!(image(2, 0), None);
        assert_eq!(image(3, 0), Some(("b".into(), 1)));
        assert_eq!(image(2, 1), Some(("a".into(), 1)));
        assert_eq!(image(3, 1), Some(("a".into(), 2)));
        assert_eq!(image(2, 2), Some(("b".into(), 1)));
        assert_eq!(image(3, 2), None);
    }
}
