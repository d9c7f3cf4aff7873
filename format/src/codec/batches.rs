//! The decode stream of an AVRO_DATA block: its rows in batches, through
//! the columnar decoder of [`crate::decode`] or arrow-avro, with the
//! record-name aliases that let another writer's record read by field.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow_avro::schema::AvroSchema;
use bytes::Bytes;

use super::container::ContainerStream;
use crate::decode::ColumnDecoder;
use crate::error::{Error, Result};
use crate::schema::strip_metadata;

/// Decodes AVRO_DATA `content` written under `writer_json` into a batch of
/// `reader_json` (schema resolution: missing fields take defaults, extra
/// fields are skipped). `path` names the log file in errors.
pub fn decode_data_block(content: &[u8], writer_json: &str, reader_json: &str, path: &str) -> Result<RecordBatch> {
    let batches = DataBlockBatches::new(Bytes::copy_from_slice(content), writer_json, reader_json, path, usize::MAX)?;
    let schema = batches.schema();
    let batches: Vec<RecordBatch> = batches.collect::<Result<_>>()?;
    arrow::compute::concat_batches(&schema, &batches).map_err(|e| Error::CorruptLog {
        path: path.to_string(),
        offset: 0,
        reason: e.to_string(),
    })
}

/// The rows of one AVRO_DATA block, decoded in batches of at most
/// `batch_rows` rows as they are pulled, so a caller that filters or spills
/// rows never holds the whole block decoded. It owns the block's bytes (a
/// shared slice, not a copy) and copies no record.
///
/// Blocks read under their own schema whose fields are flat go through the
/// [`ColumnDecoder`]; others (schema resolution, nested or logical types it
/// does not cover) through arrow-avro.
pub struct DataBlockBatches {
    source: Source,
    schema: SchemaRef,
    path: String,
}

enum Source {
    Columns {
        decoder: Box<ColumnDecoder>,
        content: Bytes,
        /// Where the next record's length prefix starts.
        pos: usize,
        /// Records not yet decoded.
        left: usize,
        /// Records decoded so far.
        done: usize,
        batch_rows: usize,
    },
    Arrow(Box<arrow_avro::reader::Reader<ContainerStream>>),
}

impl std::fmt::Debug for DataBlockBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DataBlockBatches({})", self.path)
    }
}

impl DataBlockBatches {
    /// Starts decoding `content` written under `writer_json` as `reader_json`.
    pub fn new(content: Bytes, writer_json: &str, reader_json: &str, path: &str, batch_rows: usize) -> Result<Self> {
        Self::open(content, writer_json, reader_json, path, batch_rows, true)
    }

    /// [`DataBlockBatches::new`], through arrow-avro unless `columnar`.
    fn open(
        content: Bytes,
        writer_json: &str,
        reader_json: &str,
        path: &str,
        batch_rows: usize,
        columnar: bool,
    ) -> Result<Self> {
        let corrupt = |reason: String| Error::CorruptLog { path: path.to_string(), offset: 0, reason };
        let batch_rows = batch_rows.clamp(1, 1 << 20);
        if columnar
            && writer_json == reader_json
            && let Some(decoder) = ColumnDecoder::for_schema(writer_json)
        {
            let schema = Arc::clone(decoder.schema());
            let (left, pos) = crate::log_block::avro_record_count(&content, path)?;
            let source = Source::Columns { decoder: Box::new(decoder), content, pos, left, done: 0, batch_rows };
            return Ok(Self { source, schema, path: path.to_string() });
        }
        let records = crate::log_block::avro_record_ranges(&content, path)?;
        let (writer_json, reader_json) = answering_names(writer_json, reader_json);
        let reader = arrow_avro::reader::ReaderBuilder::new()
            .with_reader_schema(AvroSchema::new(reader_json))
            .with_batch_size(records.len().clamp(1, batch_rows))
            .build(ContainerStream::new(&writer_json, content, records, batch_rows))
            .map_err(|e| corrupt(format!("data block schema: {e}")))?;
        let schema = strip_metadata(&reader.schema());
        Ok(Self { source: Source::Arrow(Box::new(reader)), schema, path: path.to_string() })
    }

    /// The schema of the batches.
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

impl Iterator for DataBlockBatches {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        let corrupt = |reason: String| Error::CorruptLog { path: self.path.clone(), offset: 0, reason };
        match &mut self.source {
            Source::Arrow(reader) => Some(match reader.next()? {
                Ok(batch) => with_schema(batch, &self.schema).map_err(|e| corrupt(e.to_string())),
                Err(e) => Err(corrupt(format!("data block: {e}"))),
            }),
            Source::Columns { decoder, content, pos, left, done, batch_rows } => {
                if *left == 0 {
                    return None;
                }
                let n = (*left).min(*batch_rows);
                for _ in 0..n {
                    let record = match crate::log_block::next_avro_record(content, pos) {
                        Ok(r) => r,
                        Err(reason) => {
                            *left = 0;
                            return Some(Err(corrupt(format!("data block record {}: {reason}", *done + 1))));
                        }
                    };
                    if let Err(e) = decoder.push(record) {
                        *left = 0;
                        decoder.reset();
                        return Some(Err(corrupt(format!(
                            "data block record {}, field `{}`: {}",
                            *done + 1,
                            e.field,
                            e.reason
                        ))));
                    }
                    *done += 1;
                }
                *left -= n;
                Some(decoder.finish().map_err(|e| corrupt(format!("data block: {e}"))))
            }
        }
    }
}

/// The full name of a top-level record schema: its name, qualified by its
/// namespace unless the name is qualified already.
fn record_full_name(schema: &serde_json::Value) -> Option<String> {
    let name = schema.get("name")?.as_str()?;
    Some(match schema.get("namespace").and_then(|n| n.as_str()).filter(|n| !n.is_empty() && !name.contains('.')) {
        Some(ns) => format!("{ns}.{name}"),
        None => name.to_string(),
    })
}

/// `writer_json` and `reader_json` with aliases that make their top-level
/// records' names match, when they differ. Hudi's writers name a table's
/// record as they please (Spark `hoodie.<table>.<table>_record`, Tributary
/// the create schema's name) and Hudi's readers match fields by name
/// whatever the record is called, but Avro resolution refuses records of
/// different names unless an alias says they are one. An alias without a
/// dot takes the namespace of its record, so the alias goes where it can
/// name the other side: the writer's qualified name among the reader's
/// aliases, else the reader's among the writer's (aliases do not change how
/// bytes decode). Nested named types are left as they are. Equal schemas
/// (the usual case) are returned without being parsed.
fn answering_names(writer_json: &str, reader_json: &str) -> (String, String) {
    let unchanged = || (writer_json.to_string(), reader_json.to_string());
    if writer_json == reader_json {
        return unchanged();
    }
    let parse = |j: &str| serde_json::from_str::<serde_json::Value>(j).ok();
    let (Some(mut writer), Some(mut reader)) = (parse(writer_json), parse(reader_json)) else { return unchanged() };
    let (Some(writer_name), Some(reader_name)) = (record_full_name(&writer), record_full_name(&reader)) else {
        return unchanged();
    };
    if writer_name == reader_name {
        return unchanged();
    }
    let writer_qualified = writer_name.contains('.');
    let (target, alias) = match (writer_qualified, reader_name.contains('.')) {
        (false, true) => (&mut writer, reader_name),
        _ => (&mut reader, writer_name),
    };
    let Some(object) = target.as_object_mut() else { return unchanged() };
    let aliases = object.entry("aliases").or_insert_with(|| serde_json::Value::Array(Vec::new()));
    let Some(list) = aliases.as_array_mut() else { return unchanged() };
    list.push(serde_json::Value::String(alias));
    (writer.to_string(), reader.to_string())
}

/// `batch` relabelled with `schema` (same types; metadata dropped).
pub(crate) fn with_schema(
    batch: RecordBatch,
    schema: &SchemaRef,
) -> std::result::Result<RecordBatch, arrow::error::ArrowError> {
    RecordBatch::try_new(Arc::clone(schema), batch.columns().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{DataBlockEncoder, MetaFields, TableDatumEncoder};
    use crate::log_block::{AvroContent, CONTENT_VERSION};
    use crate::schema::TableSchema;

    #[test]
    fn data_blocks_round_trip() {
        use arrow::array::{ArrayRef, Int64Array, StringArray};
        let schema = TableSchema::new(
            r#"{"type":"record","name":"r","fields":[{"name":"id","type":"string"},{"name":"ts","type":"long"},{"name":"v","type":["null","string"],"default":null}]}"#,
            &["id"],
            Some("ts"),
            None,
        )
        .unwrap();
        let s = |v: &[Option<&str>]| Arc::new(StringArray::from(v.to_vec())) as ArrayRef;
        let meta = |x: &str| s(&[Some(x), Some(x)]);
        let batch = RecordBatch::try_new(
            schema.arrow_with_meta().clone(),
            vec![
                meta("20250101000000000"),
                s(&[Some("20250101000000000_0_1"), Some("20250101000000000_0_2")]),
                s(&[Some("a"), Some("b")]),
                meta(""),
                meta("f"),
                s(&[Some("a"), Some("b")]),
                Arc::new(Int64Array::from(vec![5, 7])),
                s(&[None, Some("x")]),
            ],
        )
        .unwrap();
        let mut enc = DataBlockEncoder::new(&schema).unwrap();
        let mut content = Vec::new();
        enc.encode_content(std::slice::from_ref(&batch), &mut content).unwrap();
        let back = decode_data_block(&content, schema.log_json(), schema.log_json(), "f").unwrap();
        assert_eq!(back, batch);
        // Another writer's record name (Spark's `hoodie.<table>.<table>_record`)
        // with the same fields reads under this table's schema, by field.
        let spark_json = schema.log_json().replacen(r#""name":"r""#, r#""name":"t_record","namespace":"hoodie.t""#, 1);
        assert_ne!(spark_json, schema.log_json());
        let other = TableSchema::new(
            r#"{"type":"record","name":"events","namespace":"x","fields":[{"name":"id","type":"string"},{"name":"ts","type":"long"},{"name":"v","type":["null","string"],"default":null}]}"#,
            &["id"],
            Some("ts"),
            None,
        )
        .unwrap();
        let read = decode_data_block(&content, &spark_json, other.log_json(), "f").unwrap();
        assert_eq!(read.columns(), batch.columns());
        // And the other way: a block of a record in no namespace read under
        // a qualified one (Tributary's block, the latest commit Spark's).
        let read = decode_data_block(&content, schema.log_json(), &spark_json, "f").unwrap();
        assert_eq!(read.columns(), batch.columns());
        let plain = other.log_json().replacen(r#","namespace":"x""#, "", 1);
        assert_ne!(plain, other.log_json());
        let read = decode_data_block(&content, schema.log_json(), &plain, "f").unwrap();
        assert_eq!(read.columns(), batch.columns(), "both in no namespace");
        let (w, r) = answering_names(&spark_json, other.log_json());
        assert_eq!(w, spark_json);
        assert!(r.contains(r#""aliases":["hoodie.t.t_record"]"#), "{r}");
        let (w, _) = answering_names(schema.log_json(), &spark_json);
        assert!(w.contains(r#""aliases":["hoodie.t.t_record"]"#), "{w}");
        let same = answering_names(other.log_json(), other.log_json());
        assert_eq!(same, (other.log_json().to_string(), other.log_json().to_string()));
    }

    /// A record assembled from its meta fields and its table datum is the
    /// same bytes as arrow-avro's encoding of the whole log record (meta
    /// columns included), for every field kind the decoder covers and for
    /// sequence numbers and keys whose lengths take one or two varint bytes.
    fn assemble_records_as_arrow_avro_encodes_them(records: Vec<Vec<(String, apache_avro::types::Value)>>) {
        use arrow::array::{ArrayRef, StringArray};
        let schema = TableSchema::new(FLAT_SCHEMA, &["i"], None, None).unwrap();
        let decoded = decode_all(&flat_content(records), usize::MAX, true).unwrap();
        let decoded = arrow::compute::concat_batches(schema.arrow(), &decoded).unwrap();
        let batch = RecordBatch::try_new(schema.arrow().clone(), decoded.columns().to_vec()).unwrap();
        let n = batch.num_rows();
        let (instant, file_id) = ("20250101000000000", "00000003-0000-0000-0000-000000000000-0");
        let keys: Vec<String> = (0..n).map(|i| if i % 2 == 0 { format!("key-{i}") } else { "k".repeat(70) }).collect();
        let seqnos: Vec<u64> = (0..n as u64).map(|i| i * 1_000_003 + 1).collect();
        let constant = |v: &str| Arc::new(StringArray::from(vec![v; n])) as ArrayRef;
        let seq: Vec<String> = seqnos.iter().map(|q| format!("{instant}_7_{q}")).collect();
        let mut columns = vec![
            constant(instant),
            Arc::new(StringArray::from(seq)) as ArrayRef,
            Arc::new(StringArray::from(keys.clone())) as ArrayRef,
            constant("city=rome"),
            constant(file_id),
        ];
        columns.extend(batch.columns().iter().cloned());
        let whole = RecordBatch::try_new(schema.arrow_with_meta().clone(), columns).unwrap();
        let mut expected = Vec::new();
        DataBlockEncoder::new(&schema).unwrap().encode_content(std::slice::from_ref(&whole), &mut expected).unwrap();

        let datums = TableDatumEncoder::new(&schema).unwrap().encode(&batch).unwrap();
        assert_eq!(datums.len(), n);
        let meta = MetaFields::new(instant, 7, "city=rome", file_id);
        let mut got = Vec::new();
        let mut content = AvroContent::begin(&mut got);
        for i in 0..n {
            let at = content.start_record(&mut got);
            meta.put(&mut got, seqnos[i], keys[i].as_bytes());
            assert!(got.len() - at - 4 <= meta.max_len(seqnos[i], keys[i].len()), "row {i}");
            got.extend_from_slice(datums.get(i));
            content.end_record(&mut got, at);
        }
        assert_eq!(content.records(), n);
        content.finish(&mut got);
        assert_eq!(got, expected);
    }

    proptest::proptest! {
        #[test]
        fn meta_fields_and_datums_make_the_log_records(records in proptest::collection::vec(flat_record(), 1..30)) {
            assemble_records_as_arrow_avro_encodes_them(records);
        }
    }

    /// Every kind of field the columnar decoder covers, plain and in both
    /// union orders with null.
    const FLAT_SCHEMA: &str = r#"{"type":"record","name":"r","fields":[
        {"name":"b","type":"boolean"},
        {"name":"i","type":"int"},
        {"name":"l","type":["null","long"],"default":null},
        {"name":"f","type":["float","null"]},
        {"name":"d","type":"double"},
        {"name":"s","type":["null","string"],"default":null},
        {"name":"y","type":["bytes","null"]},
        {"name":"dt","type":["null",{"type":"int","logicalType":"date"}],"default":null},
        {"name":"tm","type":{"type":"long","logicalType":"timestamp-millis"}},
        {"name":"tu","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},
        {"name":"lt","type":{"type":"long","logicalType":"local-timestamp-micros"}}
    ]}"#;

    /// One random record of [`FLAT_SCHEMA`] as apache-avro values.
    fn flat_record() -> impl proptest::strategy::Strategy<Value = Vec<(String, apache_avro::types::Value)>> {
        use apache_avro::types::Value as V;
        use proptest::prelude::*;
        let null_first = |v: Option<V>| match v {
            None => V::Union(0, Box::new(V::Null)),
            Some(v) => V::Union(1, Box::new(v)),
        };
        let null_last = |v: Option<V>| match v {
            None => V::Union(1, Box::new(V::Null)),
            Some(v) => V::Union(0, Box::new(v)),
        };
        (
            (any::<bool>(), any::<i32>(), proptest::option::of(any::<i64>()), proptest::option::of(any::<f32>())),
            (
                any::<f64>(),
                proptest::option::of(".{0,12}"),
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..9)),
            ),
            (proptest::option::of(any::<i32>()), any::<i64>(), proptest::option::of(any::<i64>()), any::<i64>()),
        )
            .prop_map(move |((b, i, l, f), (d, s, y), (dt, tm, tu, lt))| {
                vec![
                    ("b".to_string(), V::Boolean(b)),
                    ("i".to_string(), V::Int(i)),
                    ("l".to_string(), null_first(l.map(V::Long))),
                    ("f".to_string(), null_last(f.map(V::Float))),
                    ("d".to_string(), V::Double(d)),
                    ("s".to_string(), null_first(s.map(V::String))),
                    ("y".to_string(), null_last(y.map(V::Bytes))),
                    ("dt".to_string(), null_first(dt.map(V::Date))),
                    ("tm".to_string(), V::TimestampMillis(tm)),
                    ("tu".to_string(), null_first(tu.map(V::TimestampMicros))),
                    ("lt".to_string(), V::LocalTimestampMicros(lt)),
                ]
            })
    }

    /// AVRO_DATA content of `records`, encoded by apache-avro.
    fn flat_content(records: Vec<Vec<(String, apache_avro::types::Value)>>) -> Vec<u8> {
        let schema = apache_avro::Schema::parse_str(FLAT_SCHEMA).unwrap();
        let mut out = Vec::new();
        out.extend_from_slice(&CONTENT_VERSION.to_be_bytes());
        out.extend_from_slice(&(records.len() as i32).to_be_bytes());
        for r in records {
            let datum = apache_avro::to_avro_datum(&schema, apache_avro::types::Value::Record(r)).unwrap();
            out.extend_from_slice(&(datum.len() as i32).to_be_bytes());
            out.extend_from_slice(&datum);
        }
        out
    }

    fn decode_all(content: &[u8], batch_rows: usize, columnar: bool) -> Result<Vec<RecordBatch>> {
        let c = Bytes::copy_from_slice(content);
        let batches = DataBlockBatches::open(c, FLAT_SCHEMA, FLAT_SCHEMA, "x.log", batch_rows, columnar)?;
        assert_eq!(matches!(batches.source, Source::Columns { .. }), columnar);
        batches.collect()
    }

    proptest::proptest! {
        #[test]
        fn columnar_decoding_equals_arrow_avro(
            records in proptest::collection::vec(flat_record(), 0..40),
            batch_rows in 1usize..50,
        ) {
            let content = flat_content(records);
            let ours = decode_all(&content, batch_rows, true).unwrap();
            let theirs = decode_all(&content, batch_rows, false).unwrap();
            proptest::prop_assert_eq!(ours, theirs);
        }
    }

    /// A decoded value as the key scanner reports it.
    fn scanned_at(c: &arrow::array::ArrayRef, row: usize) -> crate::decode::Scanned<'_> {
        use crate::decode::Scanned;
        use arrow::array::{Array, AsArray};
        use arrow::datatypes as t;
        if c.is_null(row) {
            return Scanned::Null;
        }
        match c.data_type() {
            t::DataType::Boolean => Scanned::Boolean(c.as_boolean().value(row)),
            t::DataType::Int32 => Scanned::Long(c.as_primitive::<t::Int32Type>().value(row).into()),
            t::DataType::Date32 => Scanned::Long(c.as_primitive::<t::Date32Type>().value(row).into()),
            t::DataType::Int64 => Scanned::Long(c.as_primitive::<t::Int64Type>().value(row)),
            t::DataType::Timestamp(t::TimeUnit::Millisecond, _) => {
                Scanned::Long(c.as_primitive::<t::TimestampMillisecondType>().value(row))
            }
            t::DataType::Timestamp(t::TimeUnit::Microsecond, _) => {
                Scanned::Long(c.as_primitive::<t::TimestampMicrosecondType>().value(row))
            }
            t::DataType::Float32 => Scanned::Float(c.as_primitive::<t::Float32Type>().value(row)),
            t::DataType::Float64 => Scanned::Double(c.as_primitive::<t::Float64Type>().value(row)),
            t::DataType::Utf8 => Scanned::Text(c.as_string::<i32>().value(row).as_bytes()),
            t::DataType::Binary => Scanned::Bytes(c.as_binary::<i32>().value(row)),
            other => panic!("no scanned form of {other}"),
        }
    }

    proptest::proptest! {
        #[test]
        fn key_scan_reads_what_the_decoder_decodes(
            records in proptest::collection::vec(flat_record(), 1..20),
            key in proptest::sample::select(vec![5usize, 6]),
            order in proptest::option::of(0usize..11),
        ) {
            let content = flat_content(records);
            let batch = decode_data_block(&content, FLAT_SCHEMA, FLAT_SCHEMA, "x.log").unwrap();
            let schema = crate::schema::arrow_schema_of(FLAT_SCHEMA).unwrap();
            let scanner = ColumnDecoder::compile(FLAT_SCHEMA, &schema).unwrap().key_scanner(key, order).unwrap();
            for (row, range) in crate::log_block::avro_record_ranges(&content, "x.log").unwrap().into_iter().enumerate() {
                let (k, o) = scanner.scan(&content[range]).unwrap();
                let want_key = match scanned_at(batch.column(key), row) {
                    crate::decode::Scanned::Text(b) | crate::decode::Scanned::Bytes(b) => Some(b),
                    _ => None,
                };
                proptest::prop_assert_eq!(k, want_key);
                let want_order = order.map_or(crate::decode::Scanned::Null, |o| scanned_at(batch.column(o), row));
                // Debug forms, so that NaN equals NaN.
                proptest::prop_assert_eq!(format!("{o:?}"), format!("{want_order:?}"));
            }
        }
    }

    #[test]
    fn key_scanner_needs_a_string_or_bytes_key() {
        let schema = crate::schema::arrow_schema_of(FLAT_SCHEMA).unwrap();
        let decoder = ColumnDecoder::compile(FLAT_SCHEMA, &schema).unwrap();
        assert!(decoder.key_scanner(1, None).is_none());
        assert!(decoder.key_scanner(5, Some(11)).is_none());
        assert!(decoder.key_scanner(5, Some(10)).is_some());
    }

    #[test]
    fn columnar_decoding_names_the_bad_record_and_field() {
        use apache_avro::types::Value as V;
        let record = |s: &str| {
            let schema = apache_avro::Schema::parse_str(FLAT_SCHEMA).unwrap();
            let fields = vec![
                ("b".to_string(), V::Boolean(true)),
                ("i".to_string(), V::Int(1)),
                ("l".to_string(), V::Union(0, Box::new(V::Null))),
                ("f".to_string(), V::Union(1, Box::new(V::Null))),
                ("d".to_string(), V::Double(1.0)),
                ("s".to_string(), V::Union(1, Box::new(V::String(s.to_string())))),
                ("y".to_string(), V::Union(1, Box::new(V::Null))),
                ("dt".to_string(), V::Union(0, Box::new(V::Null))),
                ("tm".to_string(), V::TimestampMillis(1)),
                ("tu".to_string(), V::Union(0, Box::new(V::Null))),
                ("lt".to_string(), V::LocalTimestampMicros(1)),
            ];
            apache_avro::to_avro_datum(&schema, V::Record(fields)).unwrap()
        };
        let good = record("ok");
        let mut bad = record("\u{e9}t\u{e9}");
        // Cut the second record inside its string field.
        bad.truncate(bad.len() - 12);
        let mut content = Vec::new();
        content.extend_from_slice(&CONTENT_VERSION.to_be_bytes());
        content.extend_from_slice(&2i32.to_be_bytes());
        for r in [&good, &bad] {
            content.extend_from_slice(&(r.len() as i32).to_be_bytes());
            content.extend_from_slice(r);
        }
        let err = decode_all(&content, 10, true).unwrap_err().to_string();
        assert!(err.contains("x.log") && err.contains("record 2") && err.contains("field `s`"), "{err}");

        // A record cut short of its declared length.
        let mut short = content.clone();
        short.truncate(short.len() - 3);
        let err = decode_all(&short, 10, true).unwrap_err().to_string();
        assert!(err.contains("record 2") && err.contains("end of file"), "{err}");
    }
}
