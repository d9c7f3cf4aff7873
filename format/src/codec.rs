//! Record encoding for log blocks: Arrow rows to AVRO_DATA content (through
//! arrow-avro's row encoder) and back (through the columnar decoder of
//! [`crate::decode`], or arrow-avro for schemas it does not cover), without
//! per-value trees; and DELETE block content.

use std::io::BufRead;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;
use arrow_avro::schema::AvroSchema;
use arrow_avro::writer::EncodedRows;
use arrow_avro::writer::format::AvroBinaryFormat;
use bytes::Bytes;

use crate::decode::ColumnDecoder;
use crate::error::{Error, Result};
use crate::log_block::{BlockType, CONTENT_VERSION, HeaderKey, begin_block, encode_avro_content, finish_block};
use crate::schema::{TableSchema, put_bytes, put_long, strip_metadata};

/// Encodes batches of `meta + table` columns into AVRO_DATA block content.
/// Holds its buffers between blocks.
#[derive(Debug)]
pub struct DataBlockEncoder {
    encoder: arrow_avro::writer::Encoder,
}

impl DataBlockEncoder {
    /// An encoder for the table's log schema.
    pub fn new(schema: &TableSchema) -> Result<Self> {
        let encoder = row_encoder(schema.arrow_with_meta(), schema.log_json().to_string(), "log schema")?;
        Ok(Self { encoder })
    }

    /// Appends the content of one AVRO_DATA block holding every row of
    /// `batches` (schema: the table's `arrow_with_meta`) to `out`.
    pub fn encode_content(&mut self, batches: &[RecordBatch], out: &mut Vec<u8>) -> Result<usize> {
        for b in batches {
            self.encoder
                .encode(b)
                .map_err(|e| Error::InvalidInput { what: "records".into(), reason: format!("Avro encoding: {e}") })?;
        }
        let rows = self.encoder.flush();
        let start = out.len();
        out.reserve(8 + rows.bytes().len() + 4 * rows.len());
        encode_avro_content(datums(&rows), out);
        Ok(out.len() - start)
    }
}

/// arrow-avro's row encoder of batches with `arrow`'s fields, writing the
/// Avro record `avro_json` (`what` names it in errors).
fn row_encoder(arrow: &SchemaRef, avro_json: String, what: &str) -> Result<arrow_avro::writer::Encoder> {
    let md = std::collections::HashMap::from([("avro.schema".to_string(), avro_json)]);
    let schema = arrow::datatypes::Schema::new_with_metadata(arrow.fields().clone(), md);
    arrow_avro::writer::WriterBuilder::new(schema)
        .build_encoder::<AvroBinaryFormat>()
        .map_err(|e| Error::InvalidInput { what: what.into(), reason: e.to_string() })
}

/// Each row's Avro binary in `rows`, in order.
fn datums(rows: &EncodedRows) -> impl ExactSizeIterator<Item = &[u8]> {
    let data = rows.bytes();
    rows.offsets().windows(2).map(move |w| &data[w[0]..w[1]])
}

/// Encodes the table's own columns (no meta columns) of a batch as one Avro
/// datum per row, through arrow-avro. A log record's Avro binary is its
/// meta fields' ([`MetaFields::put`]) followed by this datum: a record
/// encodes as its fields one after another, and the log schema is the
/// meta fields, then the table's.
#[derive(Debug)]
pub struct TableDatumEncoder {
    encoder: arrow_avro::writer::Encoder,
}

impl TableDatumEncoder {
    /// An encoder of batches of `schema.arrow()`.
    pub fn new(schema: &TableSchema) -> Result<Self> {
        Ok(Self { encoder: row_encoder(schema.arrow(), schema.table_json(), "table schema")? })
    }

    /// The datums of every row of `batch` (schema: the table's `arrow`).
    pub fn encode(&mut self, batch: &RecordBatch) -> Result<TableDatums> {
        self.encoder
            .encode(batch)
            .map_err(|e| Error::InvalidInput { what: "records".into(), reason: format!("Avro encoding: {e}") })?;
        Ok(TableDatums { rows: self.encoder.flush() })
    }
}

/// The table columns' Avro datums of a batch's rows
/// ([`TableDatumEncoder::encode`]).
#[derive(Debug)]
pub struct TableDatums {
    rows: EncodedRows,
}

impl TableDatums {
    /// Row `i`'s datum.
    #[inline]
    pub fn get(&self, i: usize) -> &[u8] {
        let o = self.rows.offsets();
        &self.rows.bytes()[o[i]..o[i + 1]]
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }
}

/// The five meta fields (`META_FIELDS`, each an optional string) of the log
/// records one writer task writes into one file group under one instant,
/// in their Avro binary: what is the same for every record is encoded
/// once; `_hoodie_commit_seqno` is `<instant>_<task>_<n>`.
#[derive(Debug, Clone)]
pub struct MetaFields {
    commit_time: Vec<u8>,
    seqno_prefix: Vec<u8>,
    partition: Vec<u8>,
    file_name: Vec<u8>,
}

/// The union branch of a present optional string (`["null", "string"]`).
const SOME_STRING: u8 = 2;

/// `s` as a present optional string's Avro binary.
fn some_string(s: &str) -> Vec<u8> {
    let mut out = vec![SOME_STRING];
    put_bytes(&mut out, s.as_bytes());
    out
}

impl MetaFields {
    /// The meta fields of records of `instant`, written by task `task` into
    /// file group `file_id` of `partition`.
    pub fn new(instant: &str, task: u64, partition: &str, file_id: &str) -> Self {
        Self {
            commit_time: some_string(instant),
            seqno_prefix: format!("{instant}_{task}_").into_bytes(),
            partition: some_string(partition),
            file_name: some_string(file_id),
        }
    }

    /// The length of the meta fields [`MetaFields::put`] appends for a key
    /// of `key_len` bytes and sequence number `seqno`, at most.
    pub fn max_len(&self, seqno: u64, key_len: usize) -> usize {
        let digits = seqno.checked_ilog10().unwrap_or(0) as usize + 1;
        // Each string: its branch, a length of at most 10 bytes, its bytes.
        self.commit_time.len()
            + self.partition.len()
            + self.file_name.len()
            + 2 * 11
            + key_len
            + self.seqno_prefix.len()
            + digits
    }

    /// Appends the meta fields of the record with key `key` and sequence
    /// number `seqno` to `out`.
    #[inline]
    pub fn put(&self, out: &mut Vec<u8>, seqno: u64, key: &[u8]) {
        let mut digits = itoa::Buffer::new();
        let n = digits.format(seqno).as_bytes();
        out.extend_from_slice(&self.commit_time);
        out.push(SOME_STRING);
        put_long(out, (self.seqno_prefix.len() + n.len()) as i64);
        out.extend_from_slice(&self.seqno_prefix);
        out.extend_from_slice(n);
        out.push(SOME_STRING);
        put_bytes(out, key);
        out.extend_from_slice(&self.partition);
        out.extend_from_slice(&self.file_name);
    }
}

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

/// The records of a data block presented as an in-memory Avro object
/// container file, produced piece by piece as the reader pulls it: a header,
/// then per container block of at most `batch_rows` records its count and
/// size, the records themselves (read in place from the block's bytes) and
/// the sync marker. The reader buffers one container block at a time, so
/// memory follows a batch rather than a copy of the whole block.
pub struct ContainerStream {
    content: Bytes,
    records: Vec<Range<usize>>,
    batch_rows: usize,
    /// Next record to hand out.
    next: usize,
    /// End (exclusive) of the container block being handed out.
    chunk_end: usize,
    /// Whether the current container block still needs its sync marker.
    needs_sync: bool,
    current: Piece,
    pos: usize,
}

/// What a [`ContainerStream`] is handing out.
enum Piece {
    Owned(Vec<u8>),
    Record(Range<usize>),
    Sync,
}

/// The sync marker of the in-memory container files.
const SYNC: [u8; 16] = [0x5a; 16];

impl ContainerStream {
    fn new(writer_json: &str, content: Bytes, records: Vec<Range<usize>>, batch_rows: usize) -> Self {
        let header = crate::schema::ocf_header(writer_json, &SYNC);
        Self {
            content,
            records,
            batch_rows,
            next: 0,
            chunk_end: 0,
            needs_sync: false,
            current: Piece::Owned(header),
            pos: 0,
        }
    }

    fn piece(&self) -> &[u8] {
        match &self.current {
            Piece::Owned(v) => v,
            Piece::Record(r) => &self.content[r.clone()],
            Piece::Sync => &SYNC,
        }
    }

    /// The piece after the current one, or `None` at the end.
    fn advance(&mut self) -> Option<Piece> {
        if self.next < self.chunk_end {
            self.next += 1;
            return Some(Piece::Record(self.records[self.next - 1].clone()));
        }
        if self.needs_sync {
            self.needs_sync = false;
            return Some(Piece::Sync);
        }
        if self.next >= self.records.len() {
            return None;
        }
        self.chunk_end = (self.next + self.batch_rows).min(self.records.len());
        self.needs_sync = true;
        let chunk = &self.records[self.next..self.chunk_end];
        let mut head = Vec::with_capacity(20);
        put_long(&mut head, chunk.len() as i64);
        put_long(&mut head, chunk.iter().map(|r| r.len()).sum::<usize>() as i64);
        Some(Piece::Owned(head))
    }
}

impl std::io::Read for ContainerStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for ContainerStream {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        while self.pos >= self.piece().len() {
            match self.advance() {
                Some(piece) => {
                    self.current = piece;
                    self.pos = 0;
                }
                None => return Ok(&[]),
            }
        }
        let pos = self.pos;
        Ok(&self.piece()[pos..])
    }

    fn consume(&mut self, amount: usize) {
        self.pos += amount;
    }
}

/// `batch` relabelled with `schema` (same types; metadata dropped).
pub fn with_schema(
    batch: RecordBatch,
    schema: &SchemaRef,
) -> std::result::Result<RecordBatch, arrow::error::ArrowError> {
    RecordBatch::try_new(Arc::clone(schema), batch.columns().to_vec())
}

/// Scale of the decimal branch of a delete's ordering value
/// (`decimal(30,15)` in `HoodieDeleteRecord.orderingVal`).
pub const DELETE_DECIMAL_SCALE: i8 = 15;
/// Precision of the decimal branch of a delete's ordering value.
pub const DELETE_DECIMAL_PRECISION: u8 = 30;

/// An ordering (event-time) value as stored in delete records: one branch of
/// the `orderingVal` union of Hudi 1.x's `HoodieDeleteRecord`, whose branches
/// are one-field wrapper records (`IntWrapper{value:int}`, ...) encoded like
/// their value. Hudi's Java writer picks the branch by the Java class of the
/// value (`HoodieAvroUtils.wrapValueIntoAvro`): a long field (timestamps
/// included) gives `LongWrapper`, an int field `IntWrapper`.
#[derive(Debug, Clone, PartialEq)]
pub enum OrderingValue {
    /// No value: a delete that always wins.
    Null,
    /// `BooleanWrapper` (read only; booleans cannot order records).
    Boolean(bool),
    /// `IntWrapper`.
    Int(i32),
    /// `LongWrapper`.
    Long(i64),
    /// `FloatWrapper`.
    Float(f32),
    /// `DoubleWrapper`.
    Double(f64),
    /// `BytesWrapper`.
    Bytes(Vec<u8>),
    /// `StringWrapper`.
    String(String),
    /// `DateWrapper`: days since 1970-01-01.
    Date(i32),
    /// `DecimalWrapper` (`decimal(30,15)`): the unscaled value at scale
    /// [`DELETE_DECIMAL_SCALE`].
    Decimal(i128),
    /// `TimeMicrosWrapper`.
    TimeMicros(i64),
    /// `TimestampMicrosWrapper`.
    TimestampMicros(i64),
}

impl OrderingValue {
    /// The ordering value of row `r` of column `c` (the ordering field), as a
    /// delete record carries it: the union branch of the column's type, a
    /// decimal rescaled to [`DELETE_DECIMAL_SCALE`]. Null for a null value or
    /// a type that cannot order records.
    pub fn of(c: &ArrayRef, r: usize) -> OrderingValue {
        use arrow::array::{Array, AsArray};
        use arrow::datatypes::{self as t, DataType, TimeUnit};
        if c.is_null(r) {
            return OrderingValue::Null;
        }
        match c.data_type() {
            DataType::Int32 => OrderingValue::Int(c.as_primitive::<t::Int32Type>().value(r)),
            DataType::Date32 => OrderingValue::Date(c.as_primitive::<t::Date32Type>().value(r)),
            DataType::Int64 => OrderingValue::Long(c.as_primitive::<t::Int64Type>().value(r)),
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                OrderingValue::Long(c.as_primitive::<t::TimestampMillisecondType>().value(r))
            }
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                OrderingValue::Long(c.as_primitive::<t::TimestampMicrosecondType>().value(r))
            }
            DataType::Float32 => OrderingValue::Float(c.as_primitive::<t::Float32Type>().value(r)),
            DataType::Float64 => OrderingValue::Double(c.as_primitive::<t::Float64Type>().value(r)),
            DataType::Utf8 => OrderingValue::String(c.as_string::<i32>().value(r).to_string()),
            DataType::Decimal128(_, scale) => {
                OrderingValue::Decimal(rescale_decimal(c.as_primitive::<t::Decimal128Type>().value(r), *scale))
            }
            _ => OrderingValue::Null,
        }
    }
}

/// `unscaled` at `scale`, as an unscaled value at [`DELETE_DECIMAL_SCALE`]:
/// exact for scales up to 15 and values that fit 30 digits (what `init`
/// accepts for a decimal ordering field); a larger scale is truncated, and a
/// value too large saturates, which keeps the order.
pub fn rescale_decimal(unscaled: i128, scale: i8) -> i128 {
    let shift = i32::from(DELETE_DECIMAL_SCALE) - i32::from(scale);
    if shift >= 0 {
        10i128.checked_pow(shift as u32).and_then(|m| unscaled.checked_mul(m)).unwrap_or(if unscaled < 0 {
            i128::MIN
        } else {
            i128::MAX
        })
    } else {
        10i128.checked_pow((-shift) as u32).map_or(0, |d| unscaled / d)
    }
}

/// One entry of a DELETE block.
#[derive(Debug, Clone, PartialEq)]
pub struct DeleteRecord {
    /// Record key.
    pub key: String,
    /// Partition path.
    pub partition: String,
    /// Ordering value of the delete.
    pub ordering: OrderingValue,
}

/// Appends DELETE block content (`i32 version=3, i32 len, HoodieDeleteRecordList`).
pub fn encode_delete_content(records: &[DeleteRecord], out: &mut Vec<u8>) {
    let mut avro = Vec::with_capacity(records.len() * 64 + 2);
    if !records.is_empty() {
        put_long(&mut avro, records.len() as i64);
        for r in records {
            put_long(&mut avro, 1);
            put_bytes(&mut avro, r.key.as_bytes());
            put_long(&mut avro, 1);
            put_bytes(&mut avro, r.partition.as_bytes());
            put_ordering(&mut avro, &r.ordering);
        }
    }
    put_long(&mut avro, 0);
    out.extend_from_slice(&CONTENT_VERSION.to_be_bytes());
    out.extend_from_slice(&(avro.len() as i32).to_be_bytes());
    out.extend_from_slice(&avro);
}

/// The `orderingVal` union branch of each value, in Hudi 1.x's order.
mod branch {
    pub const NULL: i64 = 0;
    pub const BOOLEAN: i64 = 1;
    pub const INT: i64 = 2;
    pub const LONG: i64 = 3;
    pub const FLOAT: i64 = 4;
    pub const DOUBLE: i64 = 5;
    pub const BYTES: i64 = 6;
    pub const STRING: i64 = 7;
    pub const DATE: i64 = 8;
    pub const DECIMAL: i64 = 9;
    pub const TIME_MICROS: i64 = 10;
    pub const TIMESTAMP_MICROS: i64 = 11;
}

/// Appends `v` as its `orderingVal` branch.
fn put_ordering(avro: &mut Vec<u8>, v: &OrderingValue) {
    match v {
        OrderingValue::Null => put_long(avro, branch::NULL),
        OrderingValue::Boolean(b) => {
            put_long(avro, branch::BOOLEAN);
            avro.push(u8::from(*b));
        }
        OrderingValue::Int(v) => {
            put_long(avro, branch::INT);
            put_long(avro, i64::from(*v));
        }
        OrderingValue::Long(v) => {
            put_long(avro, branch::LONG);
            put_long(avro, *v);
        }
        OrderingValue::Float(v) => {
            put_long(avro, branch::FLOAT);
            avro.extend_from_slice(&v.to_le_bytes());
        }
        OrderingValue::Double(v) => {
            put_long(avro, branch::DOUBLE);
            avro.extend_from_slice(&v.to_le_bytes());
        }
        OrderingValue::Bytes(b) => {
            put_long(avro, branch::BYTES);
            put_bytes(avro, b);
        }
        OrderingValue::String(s) => {
            put_long(avro, branch::STRING);
            put_bytes(avro, s.as_bytes());
        }
        OrderingValue::Date(v) => {
            put_long(avro, branch::DATE);
            put_long(avro, i64::from(*v));
        }
        OrderingValue::Decimal(v) => {
            put_long(avro, branch::DECIMAL);
            put_bytes(avro, &decimal_bytes(*v));
        }
        OrderingValue::TimeMicros(v) => {
            put_long(avro, branch::TIME_MICROS);
            put_long(avro, *v);
        }
        OrderingValue::TimestampMicros(v) => {
            put_long(avro, branch::TIMESTAMP_MICROS);
            put_long(avro, *v);
        }
    }
}

/// Appends a whole DELETE block of `records` with `header` (the writer's
/// instant and schema) to `out`; returns its length in bytes.
pub fn encode_delete_block(records: &[DeleteRecord], header: &[(HeaderKey, String)], out: &mut Vec<u8>) -> usize {
    let open = begin_block(out, BlockType::Delete, header);
    encode_delete_content(records, out);
    finish_block(out, open, &[])
}

/// An Avro decimal's bytes: big-endian two's complement, shortest form.
fn decimal_bytes(v: i128) -> Vec<u8> {
    let b = v.to_be_bytes();
    let sign = if v < 0 { 0xff } else { 0x00 };
    // Drop leading sign bytes while the next byte keeps the sign bit.
    let mut start = 0;
    while start < 15 && b[start] == sign && (b[start + 1] & 0x80) == (sign & 0x80) {
        start += 1;
    }
    b[start..].to_vec()
}

/// The unscaled value of an Avro decimal's bytes.
fn decimal_from_bytes(b: &[u8]) -> std::result::Result<i128, String> {
    if b.is_empty() || b.len() > 16 {
        return Err(format!("decimal of {} bytes", b.len()));
    }
    let fill = if b[0] & 0x80 != 0 { 0xff } else { 0x00 };
    let mut full = [fill; 16];
    full[16 - b.len()..].copy_from_slice(b);
    Ok(i128::from_be_bytes(full))
}

struct AvroCursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> AvroCursor<'a> {
    fn long(&mut self) -> std::result::Result<i64, String> {
        let mut z: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            z |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(((z >> 1) as i64) ^ -((z & 1) as i64));
            }
        }
        Err("varint too long".into())
    }
    fn int(&mut self) -> std::result::Result<i32, String> {
        i32::try_from(self.long()?).map_err(|e| e.to_string())
    }
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.b.len()).ok_or("truncated value")?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn bytes(&mut self) -> std::result::Result<&'a [u8], String> {
        let n = usize::try_from(self.long()?).map_err(|_| "negative length".to_string())?;
        self.take(n)
    }
    fn string(&mut self) -> std::result::Result<String, String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|e| e.to_string())
    }
    fn opt_string(&mut self) -> std::result::Result<String, String> {
        match self.long()? {
            0 => Ok(String::new()),
            1 => self.string(),
            i => Err(format!("bad union branch {i}")),
        }
    }
}

/// Decodes DELETE block content.
pub fn decode_delete_content(content: &[u8], path: &str) -> Result<Vec<DeleteRecord>> {
    let corrupt = |reason: String| Error::CorruptLog {
        path: path.to_string(),
        offset: 0,
        reason: format!("delete block: {reason}"),
    };
    if content.len() < 8 {
        return Err(corrupt("shorter than its header".into()));
    }
    let version = i32::from_be_bytes([content[0], content[1], content[2], content[3]]);
    if version != CONTENT_VERSION {
        return Err(corrupt(format!("unsupported content version {version}")));
    }
    let mut c = AvroCursor { b: &content[8..], pos: 0 };
    let mut out = Vec::new();
    let parse = |c: &mut AvroCursor<'_>, out: &mut Vec<DeleteRecord>| -> std::result::Result<(), String> {
        loop {
            let mut n = c.long()?;
            if n == 0 {
                return Ok(());
            }
            if n < 0 {
                n = -n;
                c.long()?; // block byte size
            }
            for _ in 0..n {
                let key = c.opt_string()?;
                let partition = c.opt_string()?;
                let ordering = match c.long()? {
                    branch::NULL => OrderingValue::Null,
                    branch::BOOLEAN => OrderingValue::Boolean(c.take(1)?[0] != 0),
                    branch::INT => OrderingValue::Int(c.int()?),
                    branch::LONG => OrderingValue::Long(c.long()?),
                    branch::FLOAT => {
                        OrderingValue::Float(f32::from_le_bytes(c.take(4)?.try_into().map_err(|_| "float")?))
                    }
                    branch::DOUBLE => {
                        OrderingValue::Double(f64::from_le_bytes(c.take(8)?.try_into().map_err(|_| "double")?))
                    }
                    branch::BYTES => OrderingValue::Bytes(c.bytes()?.to_vec()),
                    branch::STRING => OrderingValue::String(c.string()?),
                    branch::DATE => OrderingValue::Date(c.int()?),
                    branch::DECIMAL => OrderingValue::Decimal(decimal_from_bytes(c.bytes()?)?),
                    branch::TIME_MICROS => OrderingValue::TimeMicros(c.long()?),
                    branch::TIMESTAMP_MICROS => OrderingValue::TimestampMicros(c.long()?),
                    i => return Err(format!("unsupported ordering value branch {i}")),
                };
                out.push(DeleteRecord { key, partition, ordering });
            }
        }
    };
    parse(&mut c, &mut out).map_err(corrupt)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_block::AvroContent;

    #[test]
    fn delete_content_matches_hudi_bytes() {
        // Spark's delete (format notes §5): one entry, key and partition
        // present, orderingVal branch 2 (`IntWrapper`) holding 0, Hudi's
        // "no ordering value" sentinel.
        let key = "334e26e9-8355-45cc-97c6-c31daf0df330";
        let rec = DeleteRecord { key: key.into(), partition: "city=chennai".into(), ordering: OrderingValue::Int(0) };
        let mut out = Vec::new();
        encode_delete_content(std::slice::from_ref(&rec), &mut out);
        let mut expect = vec![0x02, 0x02, 0x48];
        expect.extend_from_slice(key.as_bytes());
        expect.extend_from_slice(&[0x02, 0x18]);
        expect.extend_from_slice(b"city=chennai");
        expect.extend_from_slice(&[0x04, 0x00, 0x00]);
        assert_eq!(&out[8..], &expect[..]);
        assert_eq!(decode_delete_content(&out, "f").unwrap(), vec![rec]);
    }

    #[test]
    fn every_ordering_branch_round_trips() {
        let values = [
            OrderingValue::Null,
            OrderingValue::Int(-7),
            OrderingValue::Long(1 << 40),
            OrderingValue::Float(1.5),
            OrderingValue::Double(-2.25),
            OrderingValue::Bytes(vec![1, 2]),
            OrderingValue::String("b".into()),
            OrderingValue::Decimal(-123_456_789_000_000_000_000),
            OrderingValue::Decimal(0),
            OrderingValue::Decimal(127),
            OrderingValue::Decimal(128),
            OrderingValue::Decimal(-128),
            OrderingValue::Decimal(-129),
            OrderingValue::Date(19_000),
            OrderingValue::Boolean(true),
            OrderingValue::TimeMicros(1_000_000),
            OrderingValue::TimestampMicros(1_766_264_468_078_000),
        ];
        let records: Vec<DeleteRecord> = values
            .iter()
            .enumerate()
            .map(|(i, v)| DeleteRecord { key: format!("k{i}"), partition: String::new(), ordering: v.clone() })
            .collect();
        let mut out = Vec::new();
        encode_delete_content(&records, &mut out);
        assert_eq!(decode_delete_content(&out, "f").unwrap(), records);
    }

    #[test]
    fn decimal_bytes_are_shortest_twos_complement() {
        assert_eq!(decimal_bytes(0), vec![0x00]);
        assert_eq!(decimal_bytes(127), vec![0x7f]);
        assert_eq!(decimal_bytes(128), vec![0x00, 0x80]);
        assert_eq!(decimal_bytes(-1), vec![0xff]);
        assert_eq!(decimal_bytes(-128), vec![0x80]);
        assert_eq!(decimal_bytes(-129), vec![0xff, 0x7f]);
    }

    #[test]
    fn decimals_rescale_to_the_delete_scale() {
        assert_eq!(rescale_decimal(12_345, 2), 123_450_000_000_000_000);
        assert_eq!(rescale_decimal(-5, 15), -5);
        assert_eq!(rescale_decimal(12_345, 17), 123);
        assert_eq!(rescale_decimal(i128::MAX / 2, 0), i128::MAX);
    }

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
