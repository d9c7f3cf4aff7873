//! Reading Avro timeline files (object container files, one record each).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use apache_avro::GenericSingleObjectWriter;
use apache_avro::types::Value;

use crate::error::{Error, Result};
use crate::memo::Memo;

/// The header of an Avro object container file, as the Avro specification
/// defines it in Avro itself.
const CONTAINER_HEADER: &str = r#"{"type":"record","name":"org.apache.avro.file.Header","fields":[
    {"name":"magic","type":{"type":"fixed","name":"Magic","size":4}},
    {"name":"meta","type":{"type":"map","values":"bytes"}},
    {"name":"sync","type":{"type":"fixed","name":"Sync","size":16}}]}"#;

/// The single record of an Avro object container file.
///
/// A timeline file holds its writer schema, often the same long schema
/// (Hudi's commit metadata) in every file: the schema is parsed once per
/// process and text (`memo.rs`), and the header and first block are read
/// with `apache_avro`'s datum reader. Files with a compression codec go
/// through `apache_avro`'s container reader.
pub(crate) fn read_single_record(bytes: &[u8], path: &str) -> Result<Value> {
    static HEADER: std::sync::LazyLock<apache_avro::Schema> = std::sync::LazyLock::new(|| {
        apache_avro::Schema::parse_str(CONTAINER_HEADER).expect("the container header schema parses")
    });
    static WRITERS: Memo<std::result::Result<Arc<apache_avro::Schema>, String>> = Memo::new();
    let err = |reason: String| Error::Avro { path: path.to_string(), reason };
    let mut rest = bytes;
    let header = apache_avro::from_avro_datum(&HEADER, &mut rest, None).map_err(|e| err(e.to_string()))?;
    let meta = match field(&header, "meta") {
        Some(Value::Map(m)) => m,
        _ => return Err(err("no metadata in the container header".into())),
    };
    let bytes_of = |key: &str| match meta.get(key) {
        Some(Value::Bytes(b)) => Some(b.as_slice()),
        _ => None,
    };
    if !matches!(bytes_of("avro.codec"), None | Some(b"null")) {
        let mut records = apache_avro::Reader::new(bytes).map_err(|e| err(e.to_string()))?;
        return records.next().ok_or_else(|| err("no record in container".into()))?.map_err(|e| err(e.to_string()));
    }
    let schema_json = bytes_of("avro.schema").ok_or_else(|| err("no avro.schema in the container header".into()))?;
    let schema = WRITERS
        .get_or(schema_json, || {
            let text = std::str::from_utf8(schema_json).map_err(|e| e.to_string())?;
            apache_avro::Schema::parse_str(text).map(Arc::new).map_err(|e| e.to_string())
        })
        .map_err(|e| err(format!("writer schema: {e}")))?;
    let count = apache_avro::from_avro_datum(&apache_avro::Schema::Long, &mut rest, None);
    let _size = apache_avro::from_avro_datum(&apache_avro::Schema::Long, &mut rest, None);
    match count {
        Ok(Value::Long(n)) if n >= 1 => {}
        Ok(_) | Err(_) => return Err(err("no record in container".into())),
    }
    apache_avro::from_avro_datum(&schema, &mut rest, None).map_err(|e| err(e.to_string()))
}

/// Strips nullable unions.
pub(crate) fn plain(v: &Value) -> &Value {
    match v {
        Value::Union(_, inner) => plain(inner),
        other => other,
    }
}

/// A field of a record value, unions stripped.
pub(crate) fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    match plain(v) {
        Value::Record(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| plain(v)),
        _ => None,
    }
}

/// Parses an Avro schema held in this crate (a bundled `.avsc`), naming it in errors.
pub(crate) fn parse_schema(json: &str, name: &str) -> Result<apache_avro::Schema> {
    apache_avro::Schema::parse_str(json).map_err(|e| Error::Avro { path: name.to_string(), reason: e.to_string() })
}

/// Encodes `record` as an Avro object container file holding exactly that one
/// record, laid out as Java Hudi lays out timeline files: the metadata map
/// holds only `avro.schema` (no `avro.codec` key, i.e. codec null), whose
/// value is `schema_json` byte for byte, then one block.
///
/// `schema` must be `schema_json` parsed; it encodes and validates the record
/// (apache-avro's own [`apache_avro::Writer`] would re-serialize the schema
/// and drop Java's `avro.java.string` properties). The 16-byte sync marker is
/// derived from the encoded record rather than drawn at random (map entries
/// are still encoded in `HashMap` order, so files with multi-entry maps are
/// not byte-stable). `path` names the target in errors.
#[cfg(test)]
pub(crate) fn write_single_record(
    schema: &apache_avro::Schema,
    schema_json: &str,
    record: Value,
    path: &str,
) -> Result<Vec<u8>> {
    let datum = apache_avro::to_avro_datum(schema, record)
        .map_err(|e| Error::Avro { path: path.to_string(), reason: e.to_string() })?;
    Ok(single_record_container(schema_json, &datum))
}

/// The object container file of [`write_single_record`] around one encoded
/// record, `datum`.
fn single_record_container(schema_json: &str, datum: &[u8]) -> Vec<u8> {
    let marker = sync_marker(datum);
    let mut out = Vec::with_capacity(datum.len() + schema_json.len() + 64);
    out.extend_from_slice(b"Obj\x01");
    put_long(&mut out, 1); // one metadata entry
    put_bytes(&mut out, b"avro.schema");
    put_bytes(&mut out, schema_json.as_bytes());
    put_long(&mut out, 0); // end of the metadata map
    out.extend_from_slice(&marker);
    put_long(&mut out, 1); // one object in the block
    put_bytes(&mut out, datum);
    out.extend_from_slice(&marker);
    out
}

/// A sync marker derived from the block's content (four CRC32s with different seeds).
fn sync_marker(datum: &[u8]) -> [u8; 16] {
    let mut marker = [0u8; 16];
    for (seed, chunk) in (0x4855_4449u32..).zip(marker.chunks_exact_mut(4)) {
        let mut h = crc32fast::Hasher::new_with_initial(seed);
        h.update(datum);
        chunk.copy_from_slice(&h.finalize().to_le_bytes());
    }
    marker
}

/// Appends an Avro `long` (zig-zag varint).
fn put_long(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Appends Avro `bytes`/`string`: the length as a long, then the bytes.
fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    // A slice's length always fits an i64.
    put_long(out, i64::try_from(bytes.len()).unwrap_or(i64::MAX));
    out.extend_from_slice(bytes);
}

/// A short name for the kind of an Avro value, for error messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Boolean(_) => "boolean",
        Value::Int(_) => "int",
        Value::Long(_) => "long",
        Value::Float(_) => "float",
        Value::Double(_) => "double",
        Value::Bytes(_) => "bytes",
        Value::String(_) => "string",
        Value::Fixed(..) => "fixed",
        Value::Enum(..) => "enum",
        Value::Union(..) => "union",
        Value::Array(_) => "array",
        Value::Map(_) => "map",
        Value::Record(_) => "record",
        _ => "logical value",
    }
}

/// Looks up field `name` of record `v` and converts it with `conv`.
///
/// A missing field or a null yields `Ok(None)`; a value of the wrong type is
/// [`Error::Corrupt`] naming `path`, the field and the types involved.
fn typed<'a, T>(
    v: &'a Value,
    name: &str,
    path: &str,
    expected: &str,
    conv: impl FnOnce(&'a Value) -> Option<T>,
) -> Result<Option<T>> {
    match field(v, name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => conv(value).map(Some).ok_or_else(|| Error::Corrupt {
            path: path.to_string(),
            reason: format!("field `{name}`: expected {expected}, found {}", kind(value)),
        }),
    }
}

/// A `long` field (an `int` is widened); `None` when missing or null.
pub(crate) fn opt_long(v: &Value, name: &str, path: &str) -> Result<Option<i64>> {
    typed(v, name, path, "long", |x| match x {
        Value::Long(n) => Some(*n),
        Value::Int(n) => Some(i64::from(*n)),
        _ => None,
    })
}

/// An `int` field (a `long` is accepted when it fits); `None` when missing or null.
pub(crate) fn opt_int(v: &Value, name: &str, path: &str) -> Result<Option<i32>> {
    typed(v, name, path, "int", |x| match x {
        Value::Int(n) => Some(*n),
        Value::Long(n) => i32::try_from(*n).ok(),
        _ => None,
    })
}

/// A `boolean` field; `None` when missing or null.
pub(crate) fn opt_bool(v: &Value, name: &str, path: &str) -> Result<Option<bool>> {
    typed(v, name, path, "boolean", |x| match x {
        Value::Boolean(b) => Some(*b),
        _ => None,
    })
}

/// A `string` field; `None` when missing or null.
pub(crate) fn opt_string(v: &Value, name: &str, path: &str) -> Result<Option<String>> {
    typed(v, name, path, "string", |x| match x {
        Value::String(s) => Some(s.clone()),
        _ => None,
    })
}

/// A record field (unions stripped); `None` when missing or null.
pub(crate) fn opt_record<'a>(v: &'a Value, name: &str, path: &str) -> Result<Option<&'a Value>> {
    typed(v, name, path, "record", |x| matches!(x, Value::Record(_)).then_some(x))
}

/// An array field's items (unions not yet stripped); `None` when missing or null.
pub(crate) fn opt_array<'a>(v: &'a Value, name: &str, path: &str) -> Result<Option<&'a [Value]>> {
    typed(v, name, path, "array", |x| match x {
        Value::Array(items) => Some(items.as_slice()),
        _ => None,
    })
}

/// A map field's entries (values' unions not yet stripped); `None` when missing or null.
pub(crate) fn opt_map<'a>(
    v: &'a Value,
    name: &str,
    path: &str,
) -> Result<Option<&'a std::collections::HashMap<String, Value>>> {
    typed(v, name, path, "map", |x| match x {
        Value::Map(entries) => Some(entries),
        _ => None,
    })
}

/// An array-of-strings field; empty when missing or null.
pub(crate) fn string_list(v: &Value, name: &str, path: &str) -> Result<Vec<String>> {
    opt_string_list(v, name, path).map(Option::unwrap_or_default)
}

/// An array-of-strings field; `None` when missing or null.
pub(crate) fn opt_string_list(v: &Value, name: &str, path: &str) -> Result<Option<Vec<String>>> {
    let Some(items) = opt_array(v, name, path)? else { return Ok(None) };
    items
        .iter()
        .map(|item| match plain(item) {
            Value::String(s) => Ok(s.clone()),
            other => Err(Error::Corrupt {
                path: path.to_string(),
                reason: format!("field `{name}`: expected array of string, found an item of type {}", kind(other)),
            }),
        })
        .collect::<Result<_>>()
        .map(Some)
}

/// A map field converted entry by entry with `conv` (expecting `expected`
/// values); `None` when missing or null.
pub(crate) fn opt_map_of<T>(
    v: &Value,
    name: &str,
    path: &str,
    expected: &str,
    conv: impl Fn(&Value) -> Option<T>,
) -> Result<Option<std::collections::BTreeMap<String, T>>> {
    let Some(entries) = opt_map(v, name, path)? else { return Ok(None) };
    entries
        .iter()
        .map(|(k, value)| {
            conv(plain(value)).map(|t| (k.clone(), t)).ok_or_else(|| Error::Corrupt {
                path: path.to_string(),
                reason: format!("field `{name}`, key `{k}`: expected {expected}, found {}", kind(plain(value))),
            })
        })
        .collect::<Result<_>>()
        .map(Some)
}

/// A bundled schema: parsed, as the compact JSON text Java embeds, and an
/// encoder that resolved its named types once (apache-avro's
/// [`apache_avro::to_avro_datum`] resolves them again on every call, which
/// costs more than encoding a commit's metadata).
pub(crate) struct Embedded {
    pub(crate) schema: apache_avro::Schema,
    pub(crate) json: String,
    encoder: Mutex<GenericSingleObjectWriter>,
}

/// The header [`Embedded`]'s encoder puts before each datum, and that is
/// cut off: apache-avro's single-object writer, the one that keeps its
/// schema resolved, frames a datum with a header of 10 to 20 bytes.
struct NoHeader;

/// The length of [`NoHeader`]'s header.
const NO_HEADER: usize = 10;

impl apache_avro::headers::HeaderBuilder for NoHeader {
    fn build_header(&self) -> Vec<u8> {
        vec![0; NO_HEADER]
    }
}

/// A lazily prepared bundled schema.
pub(crate) type EmbeddedCell = std::sync::OnceLock<std::result::Result<Embedded, String>>;

/// Prepares a bundled schema once: parsed, and compacted as Java's
/// `Schema.toString()` (keys in declaration order; the workspace enables
/// serde_json's `preserve_order`).
pub(crate) fn embedded(cell: &'static EmbeddedCell, pretty: &str, name: &str) -> Result<&'static Embedded> {
    cell.get_or_init(|| {
        let schema = parse_schema(pretty, name).map_err(|e| e.to_string())?;
        let json = serde_json::from_str::<serde_json::Value>(pretty).map_err(|e| format!("{name}: {e}"))?.to_string();
        let encoder = datum_encoder(&schema).map_err(|e| format!("{name}: {e}"))?;
        Ok(Embedded { schema, json, encoder: Mutex::new(encoder) })
    })
    .as_ref()
    .map_err(|reason| Error::Avro { path: name.to_string(), reason: reason.clone() })
}

/// An encoder of datums of `schema` (see [`Embedded`]).
fn datum_encoder(schema: &apache_avro::Schema) -> apache_avro::AvroResult<GenericSingleObjectWriter> {
    GenericSingleObjectWriter::new_with_capacity_and_header_builder(schema, 1024, NoHeader)
}

/// Writes `record` as the single record of a container under a bundled
/// schema, as [`write_single_record`] does (the record is validated, then
/// encoded).
pub(crate) fn encode_embedded(embedded: &Embedded, record: Value, what: &str) -> Result<Vec<u8>> {
    let err = |e: apache_avro::Error| Error::Avro { path: what.to_string(), reason: e.to_string() };
    let mut datum = Vec::new();
    let mut encoder = embedded.encoder.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Err(e) = encoder.write_value_ref(&record, &mut datum) {
        // A record that fails half encoded leaves its bytes in the encoder's
        // buffer, which refuses every record after: it starts over.
        *encoder = datum_encoder(&embedded.schema).map_err(err)?;
        return Err(err(e));
    }
    Ok(single_record_container(&embedded.json, &datum[NO_HEADER..]))
}

/// The non-null branch (index 1) of a `["null", T]` union.
pub(crate) fn some(v: Value) -> Value {
    Value::Union(1, Box::new(v))
}

/// A `["null", T]` union: null (index 0) or the value (index 1).
pub(crate) fn opt(v: Option<Value>) -> Value {
    match v {
        Some(v) => some(v),
        None => Value::Union(0, Box::new(Value::Null)),
    }
}

/// An array of strings.
pub(crate) fn string_array(items: &[String]) -> Value {
    Value::Array(items.iter().cloned().map(Value::String).collect())
}

/// A map of strings.
pub(crate) fn string_map(m: &BTreeMap<String, String>) -> Value {
    Value::Map(m.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect())
}

/// A map-of-string field; `None` when missing or null.
pub(crate) fn opt_strings(v: &Value, name: &str, path: &str) -> Result<Option<BTreeMap<String, String>>> {
    opt_map_of(v, name, path, "string", |x| match x {
        Value::String(s) => Some(s.clone()),
        _ => None,
    })
}

/// Fails unless `v` is a record (naming `what` was expected).
pub(crate) fn expect_record(v: &Value, what: &str, path: &str) -> Result<()> {
    match plain(v) {
        Value::Record(_) => Ok(()),
        _ => Err(corrupt(path, format!("expected a {what} record"))),
    }
}

/// The single record of a non-empty container, checked to be a record.
pub(crate) fn read_record(bytes: &[u8], path: &str, what: &str) -> Result<Value> {
    if bytes.is_empty() {
        return Err(corrupt(path, format!("empty file where a {what} was expected")));
    }
    let record = read_single_record(bytes, path)?;
    expect_record(&record, what, path)?;
    Ok(record)
}

/// A corrupt-metadata error naming the file.
pub(crate) fn corrupt(path: &str, reason: String) -> Error {
    Error::Corrupt { path: path.to_string(), reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRETTY: &str = r#"{"type": "record", "name": "R", "namespace": "n", "fields": [
        {"name": "a", "type": ["null", {"type": "record", "name": "S", "fields": [{"name": "x", "type": "long"}]}]},
        {"name": "m", "type": {"type": "map", "values": "string"}},
        {"name": "b", "type": ["null", "n.S"], "default": null}]}"#;

    /// The encoder that keeps its schema resolved writes what apache-avro's
    /// `to_avro_datum` writes, byte for byte, and rejects what it rejects.
    #[test]
    fn an_embedded_schema_encodes_as_apache_avro_does() {
        static CELL: EmbeddedCell = std::sync::OnceLock::new();
        let e = embedded(&CELL, PRETTY, "R").unwrap();
        let schema = parse_schema(PRETTY, "R").unwrap();
        let s = |x| Value::Record(vec![("x".into(), Value::Long(x))]);
        let record = |b: Value| {
            Value::Record(vec![
                ("a".into(), some(s(-3))),
                ("m".into(), string_map(&BTreeMap::from([("k".to_string(), "v".to_string())]))),
                ("b".into(), b),
            ])
        };
        for r in [record(opt(None)), record(some(s(1 << 40)))] {
            let ours = encode_embedded(e, r.clone(), "r").unwrap();
            assert_eq!(ours, write_single_record(&schema, &e.json, r, "r").unwrap());
            // The container decodes to its record.
            let back = read_single_record(&ours, "r").unwrap();
            assert!(matches!(back, Value::Record(_)), "{back:?}");
        }
        let wrong = Value::Record(vec![("a".into(), Value::Long(1))]);
        let err = encode_embedded(e, wrong, "the file").unwrap_err().to_string();
        assert!(err.contains("the file"), "{err}");
        // And the encoder goes on.
        let r = record(opt(None));
        assert_eq!(encode_embedded(e, r.clone(), "r").unwrap(), write_single_record(&schema, &e.json, r, "r").unwrap());
    }
}
