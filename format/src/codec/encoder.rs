//! Encoding rows for AVRO_DATA blocks: whole blocks of `meta + table`
//! columns, or the table columns' Avro datum of each row beside the meta
//! fields a writer task encodes once per file group.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow_avro::writer::EncodedRows;
use arrow_avro::writer::format::AvroBinaryFormat;

use crate::error::{Error, Result};
use crate::log_block::encode_avro_content;
use crate::schema::{TableSchema, put_bytes, put_long};

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
