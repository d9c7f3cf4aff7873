//! DELETE blocks: delete records with their ordering values (the
//! `orderingVal` union of Hudi's `HoodieDeleteRecord`), encoded and
//! decoded.

use arrow::array::ArrayRef;

use crate::error::{Error, Result};
use crate::log_block::{BlockType, CONTENT_VERSION, HeaderKey, begin_block, finish_block};
use crate::schema::{put_bytes, put_long};

/// Scale of the decimal branch of a delete's ordering value
/// (`decimal(30,15)` in `HoodieDeleteRecord.orderingVal`).
pub const DELETE_DECIMAL_SCALE: i8 = 15;

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
    /// `ArrayWrapper` (Hudi 1.1+): the values of several ordering fields,
    /// in their configured order, compared element by element.
    Array(Vec<OrderingValue>),
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
            // Several ordering fields, as one struct column of them.
            DataType::Struct(_) => {
                OrderingValue::Array(c.as_struct().columns().iter().map(|f| OrderingValue::of(f, r)).collect())
            }
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
    pub(super) const NULL: i64 = 0;
    pub(super) const BOOLEAN: i64 = 1;
    pub(super) const INT: i64 = 2;
    pub(super) const LONG: i64 = 3;
    pub(super) const FLOAT: i64 = 4;
    pub(super) const DOUBLE: i64 = 5;
    pub(super) const BYTES: i64 = 6;
    pub(super) const STRING: i64 = 7;
    pub(super) const DATE: i64 = 8;
    pub(super) const DECIMAL: i64 = 9;
    pub(super) const TIME_MICROS: i64 = 10;
    pub(super) const TIMESTAMP_MICROS: i64 = 11;
    /// Outside an array: `ArrayWrapper`; inside one: `LocalDateWrapper`.
    pub(super) const ARRAY_OR_LOCAL_DATE: i64 = 12;
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
        OrderingValue::Array(items) => {
            // `ArrayWrapper{wrappedValues: [null, array<[null, ...]>]}`:
            // the array branch, one block of items, each wrapped alike.
            put_long(avro, branch::ARRAY_OR_LOCAL_DATE);
            put_long(avro, 1);
            if !items.is_empty() {
                put_long(avro, items.len() as i64);
                for item in items {
                    put_ordering(avro, item);
                }
            }
            put_long(avro, 0);
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

/// One `orderingVal` union value; `in_array` for an item of an
/// `ArrayWrapper`, whose branch 12 is `LocalDateWrapper` (days, as a date).
fn ordering_value(c: &mut AvroCursor<'_>, in_array: bool) -> std::result::Result<OrderingValue, String> {
    Ok(match c.long()? {
        branch::NULL => OrderingValue::Null,
        branch::BOOLEAN => OrderingValue::Boolean(c.take(1)?[0] != 0),
        branch::INT => OrderingValue::Int(c.int()?),
        branch::LONG => OrderingValue::Long(c.long()?),
        branch::FLOAT => OrderingValue::Float(f32::from_le_bytes(c.take(4)?.try_into().map_err(|_| "float")?)),
        branch::DOUBLE => OrderingValue::Double(f64::from_le_bytes(c.take(8)?.try_into().map_err(|_| "double")?)),
        branch::BYTES => OrderingValue::Bytes(c.bytes()?.to_vec()),
        branch::STRING => OrderingValue::String(c.string()?),
        branch::DATE => OrderingValue::Date(c.int()?),
        branch::DECIMAL => OrderingValue::Decimal(decimal_from_bytes(c.bytes()?)?),
        branch::TIME_MICROS => OrderingValue::TimeMicros(c.long()?),
        branch::TIMESTAMP_MICROS => OrderingValue::TimestampMicros(c.long()?),
        branch::ARRAY_OR_LOCAL_DATE if in_array => OrderingValue::Date(c.int()?),
        branch::ARRAY_OR_LOCAL_DATE => {
            let mut items = Vec::new();
            match c.long()? {
                0 => {}
                1 => loop {
                    let mut n = c.long()?;
                    if n == 0 {
                        break;
                    }
                    if n < 0 {
                        n = -n;
                        c.long()?; // block byte size
                    }
                    for _ in 0..n {
                        items.push(ordering_value(c, true)?);
                    }
                },
                i => return Err(format!("bad ArrayWrapper union branch {i}")),
            }
            OrderingValue::Array(items)
        }
        i => return Err(format!("unsupported ordering value branch {i}")),
    })
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
                let ordering = ordering_value(c, false)?;
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

    /// Several ordering fields: branch 12 `ArrayWrapper`, its array branch,
    /// one block of items each wrapped as a single value would be; the
    /// bytes `docs/interop.md` derives from Hudi's schema, and back.
    #[test]
    fn several_ordering_values_are_an_array_wrapper() {
        let ordering = OrderingValue::Array(vec![OrderingValue::Long(-2), OrderingValue::String("ab".into())]);
        let r = DeleteRecord { key: "k".into(), partition: String::new(), ordering: ordering.clone() };
        let mut out = Vec::new();
        encode_delete_content(std::slice::from_ref(&r), &mut out);
        let avro = &out[8..];
        // count 1; key (branch 1, "k"); partition (branch 1, ""); then the value.
        let value = &avro[1 + 3 + 2..avro.len() - 1];
        assert_eq!(value, [0x18, 0x02, 0x04, 0x06, 0x03, 0x0e, 0x04, b'a', b'b', 0x00]);
        assert_eq!(decode_delete_content(&out, "t").unwrap(), vec![r]);
        // Inside an array, branch 12 is a LocalDateWrapper.
        let mut c = AvroCursor { b: &[0x18, 0x02, 0x02, 0x18, 0x54, 0x00], pos: 0 };
        assert_eq!(ordering_value(&mut c, false).unwrap(), OrderingValue::Array(vec![OrderingValue::Date(42)]));
    }
}
