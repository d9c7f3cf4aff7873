//! Ordering values: what the event-time rule compares.
//!
//! A version's ordering value is its ordering field (`hoodie.table.ordering.fields`),
//! or the value a delete carries. Integers, dates, timestamps and decimals
//! compare as integers (decimals rescaled to the delete scale, 15), floats
//! in total order, strings and bytes
//! lexicographically; null orders below every value. A delete without an
//! ordering value (null, or Hudi's zero sentinel: Spark writes `int 0` or
//! `long 0` for deletes that carry no event time) always wins.

use std::cmp::Ordering;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::buffer::ScalarBuffer;
use arrow::datatypes::{DataType, TimeUnit};
use tributary_format::{OrderingValue, rescale_decimal};

/// Whether a delete carries no event time and so always wins.
pub(crate) fn is_unconditional(v: &OrderingValue) -> bool {
    matches!(v, OrderingValue::Null | OrderingValue::Int(0) | OrderingValue::Long(0))
}

/// A comparable ordering value.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) enum Ord2 {
    /// No value: orders below every value.
    #[default]
    Null,
    /// Integers, dates and timestamps.
    Int(i64),
    /// Decimals, unscaled at the delete scale (15), so that a row's value
    /// and a delete's compare exactly; boxed to keep the enum small.
    Decimal(Box<i128>),
    /// Floating-point values, in IEEE total order.
    Float(f64),
    /// Boxed, so that a value (and an index slot) stays small: a thin
    /// pointer keeps the enum at 16 bytes, where `String` or `Box<str>`
    /// would make it 24 or 32.
    #[expect(clippy::box_collection, reason = "a thin pointer keeps every index slot small")]
    Text(Box<String>),
    /// Bytes, in lexicographic order.
    #[expect(clippy::box_collection, reason = "a thin pointer keeps every index slot small")]
    Bytes(Box<Vec<u8>>),
    /// The values of several ordering fields (`hoodie.table.ordering.fields`
    /// lists more than one), compared element by element in their order:
    /// the first that differs decides.
    #[expect(clippy::box_collection, reason = "a thin pointer keeps every index slot small")]
    Tuple(Box<Vec<Ord2>>),
}

impl Ord2 {
    /// Compares two ordering values; values of different kinds compare
    /// equal, so write order decides between them.
    pub(crate) fn cmp(&self, other: &Ord2) -> Ordering {
        use Ord2::*;
        match (self, other) {
            (Null, Null) => Ordering::Equal,
            (Null, _) => Ordering::Less,
            (_, Null) => Ordering::Greater,
            (Int(a), Int(b)) => a.cmp(b),
            (Decimal(a), Decimal(b)) => a.cmp(b),
            (Float(a), Float(b)) => a.total_cmp(b),
            (Int(a), Float(b)) => (*a as f64).total_cmp(b),
            (Float(a), Int(b)) => a.total_cmp(&(*b as f64)),
            (Text(a), Text(b)) => a.cmp(b),
            (Bytes(a), Bytes(b)) => a.cmp(b),
            (Tuple(a), Tuple(b)) => {
                a.iter().zip(b.iter()).map(|(x, y)| x.cmp(y)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
            }
            // Mixed kinds cannot be ordered meaningfully; keep write order.
            _ => Ordering::Equal,
        }
    }

    /// The delete ordering value that reads back as this value.
    pub(crate) fn to_delete(&self) -> OrderingValue {
        match self {
            Ord2::Null => OrderingValue::Null,
            Ord2::Int(i) => OrderingValue::Long(*i),
            Ord2::Decimal(d) => OrderingValue::Decimal(**d),
            Ord2::Float(f) => OrderingValue::Double(*f),
            Ord2::Text(t) => OrderingValue::String(t.to_string()),
            Ord2::Bytes(b) => OrderingValue::Bytes(b.to_vec()),
            Ord2::Tuple(items) => OrderingValue::Array(items.iter().map(Ord2::to_delete).collect()),
        }
    }

    /// The delete ordering value of this value for an ordering field of type
    /// `field`: the union branch a delete written by a writer would carry
    /// (see [`OrderingValue::of`]), so every reader compares it with the
    /// field's values.
    pub(crate) fn to_delete_as(&self, field: &DataType) -> OrderingValue {
        match (self, field) {
            (Ord2::Int(i), DataType::Int32) => i32::try_from(*i).map_or(OrderingValue::Long(*i), OrderingValue::Int),
            (Ord2::Int(i), DataType::Date32) => i32::try_from(*i).map_or(OrderingValue::Long(*i), OrderingValue::Date),
            (Ord2::Float(f), DataType::Float32) => OrderingValue::Float(*f as f32),
            (Ord2::Tuple(items), DataType::Struct(fields)) => OrderingValue::Array(
                items.iter().zip(fields.iter()).map(|(v, f)| v.to_delete_as(f.data_type())).collect(),
            ),
            _ => self.to_delete(),
        }
    }

    /// The ordering value a delete record carries.
    pub(crate) fn from_delete(v: &OrderingValue) -> Self {
        match v {
            OrderingValue::Null => Ord2::Null,
            OrderingValue::Boolean(b) => Ord2::Int(i64::from(*b)),
            OrderingValue::Int(i) | OrderingValue::Date(i) => Ord2::Int(i64::from(*i)),
            OrderingValue::Long(i) | OrderingValue::TimeMicros(i) | OrderingValue::TimestampMicros(i) => Ord2::Int(*i),
            OrderingValue::Decimal(d) => Ord2::Decimal(Box::new(*d)),
            OrderingValue::Float(f) => Ord2::Float(f64::from(*f)),
            OrderingValue::Double(f) => Ord2::Float(*f),
            OrderingValue::Bytes(b) => Ord2::Bytes(Box::new(b.clone())),
            OrderingValue::String(s) => Ord2::Text(Box::new(s.clone())),
            OrderingValue::Array(items) => Ord2::Tuple(Box::new(items.iter().map(Ord2::from_delete).collect())),
        }
    }
}

/// The ordering value of row `r` of column `c`.
pub(crate) fn ordering_at(c: &ArrayRef, r: usize) -> Ord2 {
    use arrow::datatypes as t;
    if c.is_null(r) {
        return Ord2::Null;
    }
    match c.data_type() {
        DataType::Int32 => Ord2::Int(i64::from(c.as_primitive::<t::Int32Type>().value(r))),
        DataType::Int64 => Ord2::Int(c.as_primitive::<t::Int64Type>().value(r)),
        DataType::Date32 => Ord2::Int(i64::from(c.as_primitive::<t::Date32Type>().value(r))),
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            Ord2::Int(c.as_primitive::<t::TimestampMillisecondType>().value(r))
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            Ord2::Int(c.as_primitive::<t::TimestampMicrosecondType>().value(r))
        }
        DataType::Float32 => Ord2::Float(f64::from(c.as_primitive::<t::Float32Type>().value(r))),
        DataType::Float64 => Ord2::Float(c.as_primitive::<t::Float64Type>().value(r)),
        DataType::Utf8 => Ord2::Text(Box::new(c.as_string::<i32>().value(r).to_string())),
        DataType::Decimal128(_, scale) => {
            Ord2::Decimal(Box::new(rescale_decimal(c.as_primitive::<t::Decimal128Type>().value(r), *scale)))
        }
        // Several ordering fields (`TableSchema::ordering_column`).
        DataType::Struct(_) => {
            Ord2::Tuple(Box::new(c.as_struct().columns().iter().map(|f| ordering_at(f, r)).collect()))
        }
        _ => Ord2::Null,
    }
}

/// A batch's ordering column, read without a type check per row; it holds
/// the column's values (not a borrow), so it can be kept with the batch.
pub(crate) enum OrderColumn {
    Int32(ScalarBuffer<i32>),
    Int64(ScalarBuffer<i64>),
    Float32(ScalarBuffer<f32>),
    Float64(ScalarBuffer<f64>),
    Other(ArrayRef),
}

impl OrderColumn {
    pub(crate) fn of(c: &ArrayRef) -> Self {
        use arrow::datatypes as t;
        match c.data_type() {
            DataType::Int32 => Self::Int32(c.as_primitive::<t::Int32Type>().values().clone()),
            DataType::Date32 => Self::Int32(c.as_primitive::<t::Date32Type>().values().clone()),
            DataType::Int64 => Self::Int64(c.as_primitive::<t::Int64Type>().values().clone()),
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                Self::Int64(c.as_primitive::<t::TimestampMillisecondType>().values().clone())
            }
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                Self::Int64(c.as_primitive::<t::TimestampMicrosecondType>().values().clone())
            }
            DataType::Float32 => Self::Float32(c.as_primitive::<t::Float32Type>().values().clone()),
            DataType::Float64 => Self::Float64(c.as_primitive::<t::Float64Type>().values().clone()),
            _ => Self::Other(c.clone()),
        }
    }

    #[inline]
    pub(crate) fn at(&self, nulls: Option<&arrow::buffer::NullBuffer>, r: usize) -> Ord2 {
        if nulls.is_some_and(|n| n.is_null(r)) {
            return Ord2::Null;
        }
        match self {
            Self::Int32(v) => Ord2::Int(i64::from(v[r])),
            Self::Int64(v) => Ord2::Int(v[r]),
            Self::Float32(v) => Ord2::Float(f64::from(v[r])),
            Self::Float64(v) => Ord2::Float(v[r]),
            Self::Other(c) => ordering_at(c, r),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array};

    use super::*;

    /// A tombstone's value (`Ord2::to_delete_as`) takes the same union branch
    /// as a writer's delete of the same value (`OrderingValue::of`), on every
    /// ordering type, and reads back as the same comparable value.
    #[test]
    fn tombstones_and_writers_encode_ordering_values_alike() {
        let n: ArrayRef = Arc::new(Int64Array::from(vec![19_000i64]));
        let types = [
            DataType::Int32,
            DataType::Int64,
            DataType::Float32,
            DataType::Float64,
            DataType::Utf8,
            DataType::Date32,
            DataType::Timestamp(TimeUnit::Millisecond, Some("+00:00".into())),
            DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
            DataType::Decimal128(12, 2),
        ];
        for ty in types {
            let c = match ty {
                DataType::Date32 => arrow::compute::cast(&arrow::compute::cast(&n, &DataType::Int32).unwrap(), &ty),
                _ => arrow::compute::cast(&n, &ty),
            }
            .unwrap();
            let written = OrderingValue::of(&c, 0);
            let kept = ordering_at(&c, 0).to_delete_as(&ty);
            assert_eq!(kept, written, "{ty}");
            assert_eq!(Ord2::from_delete(&written), ordering_at(&c, 0), "{ty}");
        }
    }
}
