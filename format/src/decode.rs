//! A columnar decoder for the AVRO_DATA records of flat schemas: Avro binary
//! straight into Arrow buffers, one pass per record, no per-value objects.
//!
//! Log records are read far more often than they are written (every snapshot
//! read and every compaction decodes them), so this is the read path's hot
//! loop. A schema is compiled once into one step per field; each record is
//! then a walk over the steps, appending to typed `Vec`s that become the
//! Arrow arrays without a copy. Strings are validated as UTF-8 once per
//! column and batch.
//!
//! It covers records of primitive fields (boolean, int, long, float, double,
//! string, bytes, and the date and timestamp logical types), each optionally
//! in a two-branch union with null: what the table schemas of this crate and
//! of typical Hudi tables consist of. [`ColumnDecoder::compile`] returns
//! `None` for any other schema, and callers then use arrow-avro, which
//! handles all of Avro. The output is exactly arrow-avro's (same Arrow types,
//! same values); a test holds the two to that.

use std::sync::Arc;

use apache_avro::Schema as AvroSchema;
use arrow::array::{ArrayRef, BinaryArray, BooleanArray, PrimitiveArray, RecordBatch, StringArray};
use arrow::array::{BooleanBufferBuilder, NullBufferBuilder};
use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{ArrowPrimitiveType, DataType, SchemaRef, TimeUnit};

use crate::memo::Memo;

/// How one field's value is laid out in Avro binary.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Wire {
    Boolean,
    Int,
    Long,
    Float,
    Double,
    /// Length-prefixed bytes; `utf8` for strings.
    Bytes {
        utf8: bool,
    },
}

/// One field of the record.
#[derive(Debug, Clone)]
struct Step {
    name: String,
    wire: Wire,
    /// For `["null", T]` / `[T, "null"]`: the branch index that is null.
    null_branch: Option<u64>,
    /// The Arrow type of the column (arrow-avro's mapping of the field).
    data_type: DataType,
}

/// Values being gathered for one column.
#[derive(Debug)]
enum Values {
    Boolean(BooleanBufferBuilder),
    Int(Vec<i32>),
    Long(Vec<i64>),
    Float(Vec<f32>),
    Double(Vec<f64>),
    Bytes { offsets: Vec<i32>, data: Vec<u8> },
}

#[derive(Debug)]
struct Column {
    values: Values,
    nulls: NullBufferBuilder,
}

/// A compiled decoder for one writer schema. Reuse it for every block
/// written under that schema.
#[derive(Debug)]
pub struct ColumnDecoder {
    steps: Vec<Step>,
    schema: SchemaRef,
    columns: Vec<Column>,
}

/// Why a record could not be decoded: which record and field, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeError {
    /// The field being read.
    pub field: String,
    /// What was wrong with its bytes.
    pub reason: String,
}

/// A cursor over one record's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    #[inline(always)]
    fn long(&mut self) -> Result<i64, &'static str> {
        // Union branches, lengths and small numbers take one byte.
        match self.bytes.get(self.pos) {
            Some(&b) if b < 0x80 => {
                self.pos += 1;
                Ok(i64::from(b >> 1) ^ -i64::from(b & 1))
            }
            Some(_) => self.long_slow(),
            None => Err("truncated varint"),
        }
    }

    #[inline(never)]
    fn long_slow(&mut self) -> Result<i64, &'static str> {
        let rest = &self.bytes[self.pos..];
        let mut value: u64 = 0;
        // With ten bytes at hand the loop has fixed bounds and unrolls.
        let window: &[u8] = match rest.first_chunk::<10>() {
            Some(w) => w,
            None => rest,
        };
        for (i, &b) in window.iter().enumerate() {
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                self.pos += i + 1;
                return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
            }
        }
        Err(if window.len() == 10 { "varint longer than 10 bytes" } else { "truncated varint" })
    }

    #[inline]
    fn int(&mut self) -> Result<i32, &'static str> {
        i32::try_from(self.long()?).map_err(|_| "int out of range")
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.bytes.len()).ok_or("value runs past the record")?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    #[inline]
    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], &'static str> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
}

/// The wire layout of a non-union Avro schema, when `data_type` is the
/// Arrow type arrow-avro gives it and this decoder can produce it.
fn wire_of(schema: &AvroSchema, data_type: &DataType) -> Option<Wire> {
    let wire = match schema {
        AvroSchema::Boolean => Wire::Boolean,
        AvroSchema::Int | AvroSchema::Date => Wire::Int,
        AvroSchema::Long
        | AvroSchema::TimestampMillis
        | AvroSchema::TimestampMicros
        | AvroSchema::LocalTimestampMillis
        | AvroSchema::LocalTimestampMicros => Wire::Long,
        AvroSchema::Float => Wire::Float,
        AvroSchema::Double => Wire::Double,
        AvroSchema::String => Wire::Bytes { utf8: true },
        AvroSchema::Bytes => Wire::Bytes { utf8: false },
        _ => return None,
    };
    let fits = matches!(
        (wire, data_type),
        (Wire::Boolean, DataType::Boolean)
            | (Wire::Int, DataType::Int32 | DataType::Date32)
            | (Wire::Long, DataType::Int64 | DataType::Timestamp(TimeUnit::Millisecond | TimeUnit::Microsecond, _))
            | (Wire::Float, DataType::Float32)
            | (Wire::Double, DataType::Float64)
            | (Wire::Bytes { utf8: true }, DataType::Utf8)
            | (Wire::Bytes { utf8: false }, DataType::Binary)
    );

    // The logical type must agree with the Arrow type, not just the wire.
    let logical_fits = match schema {
        AvroSchema::Date => *data_type == DataType::Date32,
        AvroSchema::TimestampMillis | AvroSchema::LocalTimestampMillis => {
            matches!(data_type, DataType::Timestamp(TimeUnit::Millisecond, _))
        }
        AvroSchema::TimestampMicros | AvroSchema::LocalTimestampMicros => {
            matches!(data_type, DataType::Timestamp(TimeUnit::Microsecond, _))
        }
        AvroSchema::Int => *data_type == DataType::Int32,
        AvroSchema::Long => *data_type == DataType::Int64,
        _ => true,
    };
    (fits && logical_fits).then_some(wire)
}

impl ColumnDecoder {
    /// A decoder for records written under `writer_json` that yields batches
    /// of `schema` (arrow-avro's Arrow mapping of that same Avro schema), or
    /// `None` when the schema has a field this decoder does not cover.
    pub fn compile(writer_json: &str, schema: &SchemaRef) -> Option<Self> {
        let AvroSchema::Record(record) = AvroSchema::parse_str(writer_json).ok()? else { return None };
        if record.fields.len() != schema.fields().len() {
            return None;
        }
        let mut steps = Vec::with_capacity(record.fields.len());
        for (f, arrow) in record.fields.iter().zip(schema.fields()) {
            if f.name != *arrow.name() {
                return None;
            }
            let (inner, null_branch) = match &f.schema {
                AvroSchema::Union(u) => match u.variants() {
                    [AvroSchema::Null, t] => (t, Some(0)),
                    [t, AvroSchema::Null] => (t, Some(1)),
                    _ => return None,
                },
                other => (other, None),
            };
            if null_branch.is_some() != arrow.is_nullable() {
                return None;
            }
            let wire = wire_of(inner, arrow.data_type())?;
            steps.push(Step { name: f.name.clone(), wire, null_branch, data_type: arrow.data_type().clone() });
        }
        let columns = steps.iter().map(|s| Column::new(s.wire, 0, 0)).collect();
        Some(Self { steps, schema: Arc::clone(schema), columns })
    }

    /// A decoder for blocks written under `writer_json`, compiled once per
    /// process and schema text (`memo.rs`). `None` when the schema is not
    /// one this decoder covers.
    pub fn for_schema(writer_json: &str) -> Option<Self> {
        static COMPILED: Memo<Option<Arc<ColumnDecoder>>> = Memo::new();
        let compiled = COMPILED.get_or(writer_json.as_bytes(), || {
            let schema = crate::schema::arrow_schema_of(writer_json).ok()?;
            Self::compile(writer_json, &schema).map(Arc::new)
        });
        compiled.map(|c| c.fresh())
    }

    /// A decoder with the same steps and no values gathered.
    fn fresh(&self) -> Self {
        let columns = self.steps.iter().map(|s| Column::new(s.wire, 0, 0)).collect();
        Self { steps: self.steps.clone(), schema: Arc::clone(&self.schema), columns }
    }

    /// The schema of the batches.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Appends one record, which must span all of `record`. On error the
    /// batch being built is left inconsistent: discard it with
    /// [`ColumnDecoder::reset`].
    pub fn push(&mut self, record: &[u8]) -> Result<(), DecodeError> {
        let mut c = Cursor { bytes: record, pos: 0 };
        for (step, col) in self.steps.iter().zip(self.columns.iter_mut()) {
            let fail = |reason: &str| DecodeError { field: step.name.clone(), reason: reason.to_string() };
            if let Some(null_branch) = step.null_branch {
                let branch = c.long().map_err(fail)?;
                if branch as u64 == null_branch {
                    col.push_null();
                    continue;
                }
                if branch != 1 - null_branch as i64 {
                    return Err(fail(&format!("union branch {branch} of a two-branch union")));
                }
            }
            col.nulls.append_non_null();
            col.push_value(&mut c).map_err(fail)?;
        }
        if c.pos != record.len() {
            return Err(DecodeError {
                field: self.steps.last().map(|s| s.name.clone()).unwrap_or_default(),
                reason: format!("record has {} bytes after its last field", record.len() - c.pos),
            });
        }
        Ok(())
    }

    /// Rows pushed since the last batch.
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |c| c.nulls.len())
    }

    /// Drops the rows gathered since the last batch.
    pub fn reset(&mut self) {
        for (step, col) in self.steps.iter().zip(self.columns.iter_mut()) {
            *col = Column::new(step.wire, 0, 0);
        }
    }

    /// The rows pushed since the last batch, as a batch; the decoder starts
    /// its next batch with buffers sized like this one's.
    pub fn finish(&mut self) -> Result<RecordBatch, arrow::error::ArrowError> {
        let mut arrays = Vec::with_capacity(self.steps.len());
        for (step, col) in self.steps.iter().zip(self.columns.iter_mut()) {
            let (rows, bytes) = col.sizes();
            let done = std::mem::replace(col, Column::new(step.wire, rows, bytes));
            arrays.push(done.finish(&step.data_type)?);
        }
        RecordBatch::try_new(Arc::clone(&self.schema), arrays)
    }
}

/// One field's value as [`KeyScanner::scan`] finds it, still in wire form.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scanned<'a> {
    /// The null branch of a union.
    Null,
    /// A boolean.
    Boolean(bool),
    /// An int or long (including dates and timestamps).
    Long(i64),
    /// A float.
    Float(f32),
    /// A double.
    Double(f64),
    /// A string's UTF-8 bytes (not yet validated).
    Text(&'a [u8]),
    /// A bytes value.
    Bytes(&'a [u8]),
}

/// Reads two fields of a record, a key and an ordering value, without
/// decoding the rest: fields before them are skipped by their lengths, and
/// the walk stops at the later of the two. This is what a merge needs from
/// a version that may lose, at a fraction of a full decode.
#[derive(Debug, Clone)]
pub struct KeyScanner {
    steps: Vec<Step>,
    key: usize,
    order: Option<usize>,
}

impl KeyScanner {
    /// The key (`None` when null) and the ordering value ([`Scanned::Null`]
    /// without an ordering field) of one record.
    pub fn scan<'a>(&self, record: &'a [u8]) -> Result<(Option<&'a [u8]>, Scanned<'a>), DecodeError> {
        let mut c = Cursor { bytes: record, pos: 0 };
        let (mut key, mut order) = (None, Scanned::Null);
        for (i, step) in self.steps.iter().enumerate() {
            let fail = |reason: &str| DecodeError { field: step.name.clone(), reason: reason.to_string() };
            if let Some(null_branch) = step.null_branch {
                let branch = c.long().map_err(fail)?;
                if branch as u64 == null_branch {
                    continue;
                }
                if branch != 1 - null_branch as i64 {
                    return Err(fail(&format!("union branch {branch} of a two-branch union")));
                }
            }
            let value = match step.wire {
                Wire::Boolean => Scanned::Boolean(c.take(1).map_err(fail)?[0] != 0),
                Wire::Int | Wire::Long => Scanned::Long(c.long().map_err(fail)?),
                Wire::Float => Scanned::Float(f32::from_le_bytes(c.fixed::<4>().map_err(fail)?)),
                Wire::Double => Scanned::Double(f64::from_le_bytes(c.fixed::<8>().map_err(fail)?)),
                Wire::Bytes { utf8 } => {
                    let len = usize::try_from(c.long().map_err(fail)?).map_err(|_| fail("negative length"))?;
                    let b = c.take(len).map_err(fail)?;
                    if utf8 { Scanned::Text(b) } else { Scanned::Bytes(b) }
                }
            };
            if i == self.key {
                key = match value {
                    Scanned::Text(b) | Scanned::Bytes(b) => Some(b),
                    _ => None,
                };
            }
            if Some(i) == self.order {
                order = value;
            }
        }
        Ok((key, order))
    }
}

impl ColumnDecoder {
    /// A scanner for field `key` (a string or bytes field) and field `order`
    /// of the records this decoder reads; `None` when `key` is not such a
    /// field or either index is out of range.
    pub fn key_scanner(&self, key: usize, order: Option<usize>) -> Option<KeyScanner> {
        let step = self.steps.get(key)?;
        if !matches!(step.wire, Wire::Bytes { .. }) || order.is_some_and(|o| o >= self.steps.len()) {
            return None;
        }
        let last = order.map_or(key, |o| o.max(key));
        Some(KeyScanner { steps: self.steps[..=last].to_vec(), key, order })
    }
}

impl Column {
    fn new(wire: Wire, rows: usize, bytes: usize) -> Self {
        let values = match wire {
            Wire::Boolean => Values::Boolean(BooleanBufferBuilder::new(rows)),
            Wire::Int => Values::Int(Vec::with_capacity(rows)),
            Wire::Long => Values::Long(Vec::with_capacity(rows)),
            Wire::Float => Values::Float(Vec::with_capacity(rows)),
            Wire::Double => Values::Double(Vec::with_capacity(rows)),
            Wire::Bytes { .. } => {
                let mut offsets = Vec::with_capacity(rows + 1);
                offsets.push(0);
                Values::Bytes { offsets, data: Vec::with_capacity(bytes) }
            }
        };
        Self { values, nulls: NullBufferBuilder::new(rows) }
    }

    /// Rows and value bytes gathered so far.
    fn sizes(&self) -> (usize, usize) {
        let bytes = match &self.values {
            Values::Bytes { data, .. } => data.len(),
            _ => 0,
        };
        (self.nulls.len(), bytes)
    }

    #[inline]
    fn push_null(&mut self) {
        self.nulls.append_null();
        match &mut self.values {
            Values::Boolean(b) => b.append(false),
            Values::Int(v) => v.push(0),
            Values::Long(v) => v.push(0),
            Values::Float(v) => v.push(0.0),
            Values::Double(v) => v.push(0.0),
            Values::Bytes { offsets, data } => offsets.push(data.len() as i32),
        }
    }

    #[inline]
    fn push_value(&mut self, c: &mut Cursor<'_>) -> Result<(), &'static str> {
        match &mut self.values {
            Values::Boolean(b) => match c.take(1)?[0] {
                0 => b.append(false),
                1 => b.append(true),
                _ => return Err("boolean byte is neither 0 nor 1"),
            },
            Values::Int(v) => v.push(c.int()?),
            Values::Long(v) => v.push(c.long()?),
            Values::Float(v) => v.push(f32::from_le_bytes(c.fixed::<4>()?)),
            Values::Double(v) => v.push(f64::from_le_bytes(c.fixed::<8>()?)),
            Values::Bytes { offsets, data } => {
                let len = usize::try_from(c.long()?).map_err(|_| "negative length")?;
                data.extend_from_slice(c.take(len)?);
                offsets.push(i32::try_from(data.len()).map_err(|_| "column over 2 GiB in one batch")?);
            }
        }
        Ok(())
    }

    fn finish(mut self, data_type: &DataType) -> Result<ArrayRef, arrow::error::ArrowError> {
        use arrow::datatypes as t;
        let nulls = self.nulls.finish();
        fn primitive<T: ArrowPrimitiveType>(
            v: Vec<T::Native>,
            nulls: Option<arrow::buffer::NullBuffer>,
            data_type: &DataType,
        ) -> Result<ArrayRef, arrow::error::ArrowError> {
            Ok(Arc::new(PrimitiveArray::<T>::try_new(ScalarBuffer::from(v), nulls)?.with_data_type(data_type.clone())))
        }
        match (self.values, data_type) {
            (Values::Boolean(mut b), _) => Ok(Arc::new(BooleanArray::new(b.finish(), nulls))),
            (Values::Int(v), DataType::Date32) => primitive::<t::Date32Type>(v, nulls, data_type),
            (Values::Int(v), _) => primitive::<t::Int32Type>(v, nulls, data_type),
            (Values::Long(v), DataType::Timestamp(TimeUnit::Millisecond, _)) => {
                primitive::<t::TimestampMillisecondType>(v, nulls, data_type)
            }
            (Values::Long(v), DataType::Timestamp(TimeUnit::Microsecond, _)) => {
                primitive::<t::TimestampMicrosecondType>(v, nulls, data_type)
            }
            (Values::Long(v), _) => primitive::<t::Int64Type>(v, nulls, data_type),
            (Values::Float(v), _) => primitive::<t::Float32Type>(v, nulls, data_type),
            (Values::Double(v), _) => primitive::<t::Float64Type>(v, nulls, data_type),
            (Values::Bytes { offsets, data }, _) => {
                let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
                let data = Buffer::from_vec(data);
                if *data_type == DataType::Utf8 {
                    Ok(Arc::new(StringArray::try_new(offsets, data, nulls)?))
                } else {
                    Ok(Arc::new(BinaryArray::try_new(offsets, data, nulls)?))
                }
            }
        }
    }
}
