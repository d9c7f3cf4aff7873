//! Record keys: how `_hoodie_record_key` is formed from a record's key
//! fields, the way Hudi's key generators form it. This is the one home of
//! that rule: the writer builds every key (JSON lines, Arrow batches,
//! deletes) through [`RecordKey::build`].
//!
//! - **One key field** (Hudi's `SIMPLE` key generator, `NON_PARTITION` for
//!   an unpartitioned table): the field's value as text. A null value is
//!   refused.
//! - **Several key fields** (`COMPLEX`, or `NON_PARTITION` for an
//!   unpartitioned table, whose generator formats several fields the same
//!   way): `field:value` pairs in the order the fields were declared, joined
//!   by `,`, for example `user_id:1,date:2020-02-22,group_id:1`. A null value
//!   is written `__null__` and an empty string `__empty__`; a record whose key
//!   values are all null or empty is refused, as Hudi refuses it
//!   (`KeyGenUtils.getRecordKey`).
//!
//! Values become text as Hudi's Avro path renders them
//! (`HoodieAvroUtils.getNestedFieldValAsString`, which converts logical types
//! first, then calls `toString`):
//!
//! | Avro type | text | example |
//! |---|---|---|
//! | string | as is | `alice` |
//! | int, long | decimal digits | `-42` |
//! | boolean | `true` / `false` | `true` |
//! | date | ISO `yyyy-MM-dd` (`LocalDate.toString`; years past 9999 get a `+`) | `2020-02-22` |
//! | timestamp-millis/-micros (also local-) | the stored number, in its own unit | `1582329600000` |
//! | decimal | `BigDecimal.toString`: plain, or `1E-10` style when the exponent is below -6 | `1.50` |
//!
//! Timestamps follow Hudi's default
//! (`hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled=false`).
//! Hudi's engines disagree there: Spark's row writer renders a timestamp as
//! `java.sql.Timestamp` text in the JVM's zone. Float, double, bytes and
//! nested types are not accepted as key fields: Java's rendering of them is
//! either JVM-dependent (floating point) or not a value at all (a byte
//! buffer's `toString`).
//!
//! The bucket index hashes keys too; [`Keys::hash_values`] gives the values
//! Hudi's bucket index hashes for each record.

use std::fmt::Write as _;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray, StringBuilder};
use arrow::datatypes::{self as types, DataType, Schema};

use crate::error::{Error, Result};

/// How a composite key writes a null value.
pub(crate) const NULL_VALUE: &str = "__null__";
/// How a composite key writes an empty string.
pub(crate) const EMPTY_VALUE: &str = "__empty__";

/// A table's record key: the fields that form `_hoodie_record_key`, in
/// declared order, with their columns in the table schema.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecordKey {
    fields: Vec<(String, usize)>,
}

/// Why a record's key cannot be built. `row` is the 0-based row of the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    /// The row (0-based) whose key failed.
    pub row: usize,
    /// The key field involved, if one is.
    pub field: Option<String>,
    /// What is wrong.
    pub reason: String,
}

/// The record keys of a batch, and what the bucket index hashes.
#[derive(Debug, Clone)]
pub struct Keys {
    keys: Arc<StringArray>,
    /// For a composite key, each field's values as text (null where null),
    /// in key-field order; empty for a single-field key.
    values: Vec<StringArray>,
}

impl RecordKey {
    /// A key over `fields`: each field's name and its column in the table
    /// schema, in declared order.
    pub fn new(fields: Vec<(String, usize)>) -> Self {
        Self { fields }
    }

    /// Number of key fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True when the table declares no key field.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// True for a key of several fields (the `field:value,...` form).
    pub fn is_composite(&self) -> bool {
        self.fields.len() > 1
    }

    /// The key fields' names, in declared order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|(n, _)| n.as_str())
    }

    /// The key fields' columns (in the table schema), in declared order.
    pub fn columns(&self) -> impl Iterator<Item = usize> + '_ {
        self.fields.iter().map(|(_, i)| *i)
    }

    /// Whether column `column` of the table schema is a key field.
    pub fn contains(&self, column: usize) -> bool {
        self.fields.iter().any(|(_, i)| *i == column)
    }

    /// Whether values of `data_type` can be key values (see the module
    /// documentation for how each is written).
    pub fn supports(data_type: &DataType) -> bool {
        matches!(
            data_type,
            DataType::Utf8
                | DataType::Int32
                | DataType::Int64
                | DataType::Boolean
                | DataType::Date32
                | DataType::Timestamp(_, _)
                | DataType::Decimal128(_, _)
        )
    }

    /// Checks that every key field of `schema` (the table's columns) has a
    /// type keys can hold; the error names the field and its type.
    pub fn check_types(&self, schema: &Schema) -> Result<()> {
        for (name, i) in &self.fields {
            let dt = schema.field(*i).data_type();
            if !Self::supports(dt) {
                return Err(Error::InvalidInput {
                    what: format!("record key field `{name}`"),
                    reason: format!(
                        "type {dt} cannot be part of a record key; use string, int, long, boolean, date, \
                         a timestamp or decimal"
                    ),
                });
            }
        }
        Ok(())
    }

    /// The keys of `batch` (the table's columns). Fails on the first row
    /// whose key cannot be formed: a null single-field key, a composite key
    /// whose values are all null or empty, or a key field of a type keys
    /// cannot hold.
    pub fn build(&self, batch: &RecordBatch) -> std::result::Result<Keys, KeyError> {
        match self.fields.as_slice() {
            [] => Err(KeyError { row: 0, field: None, reason: "the table declares no record key field".into() }),
            [(name, i)] => {
                let col = batch.column(*i);
                if col.null_count() > 0
                    && let Some(row) = (0..col.len()).find(|r| col.is_null(*r))
                {
                    return Err(KeyError { row, field: Some(name.clone()), reason: "missing record key".into() });
                }
                Ok(Keys { keys: Arc::new(as_text(col, name)?), values: Vec::new() })
            }
            fields => {
                let values: Vec<StringArray> =
                    fields.iter().map(|(name, i)| as_text(batch.column(*i), name)).collect::<Result<_, _>>()?;
                let n = batch.num_rows();
                let width: usize = fields.iter().map(|(name, _)| name.len() + 2).sum::<usize>()
                    + values.iter().map(|v| v.value_data().len()).sum::<usize>();
                let mut keys = StringBuilder::with_capacity(n, width + n * 8);
                for row in 0..n {
                    let mut all_null_or_empty = true;
                    for (f, ((name, _), col)) in fields.iter().zip(&values).enumerate() {
                        if f > 0 {
                            keys.write_char(',').ok();
                        }
                        let v = if col.is_null(row) {
                            NULL_VALUE
                        } else {
                            match col.value(row) {
                                "" => EMPTY_VALUE,
                                v => {
                                    all_null_or_empty = false;
                                    v
                                }
                            }
                        };
                        keys.write_str(name).ok();
                        keys.write_char(':').ok();
                        keys.write_str(v).ok();
                    }
                    if all_null_or_empty {
                        let names: Vec<&str> = self.names().collect();
                        return Err(KeyError {
                            row,
                            field: None,
                            reason: format!(
                                "every record key field ({}) is null or empty; a key needs at least one value",
                                names.join(", ")
                            ),
                        });
                    }
                    keys.append_value("");
                }
                Ok(Keys { keys: Arc::new(keys.finish()), values })
            }
        }
    }
}

impl Keys {
    /// The `_hoodie_record_key` of each row.
    pub fn keys(&self) -> &Arc<StringArray> {
        &self.keys
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The values Hudi's bucket index hashes for `row`, in key-field order,
    /// as Hudi recovers them from the key string
    /// (`KeyGenUtils.extractRecordKeysByFields`): for a single-field key the
    /// key itself; for a composite key each field's value, `None` for a
    /// null (and for a value that is literally `__null__`), `""` for an
    /// empty one (and for `__empty__`). Hudi parses these back out of the
    /// key string; Tributary takes the values themselves, which is the
    /// same whenever the string parses back unambiguously (Hudi 1.0.x
    /// splits values that contain `,`).
    pub fn hash_values(&self, row: usize) -> HashValues<'_> {
        HashValues { keys: self, row, next: 0 }
    }
}

/// The iterator of [`Keys::hash_values`].
#[derive(Debug)]
pub struct HashValues<'a> {
    keys: &'a Keys,
    row: usize,
    next: usize,
}

impl<'a> Iterator for HashValues<'a> {
    type Item = Option<&'a str>;

    fn next(&mut self) -> Option<Self::Item> {
        let i = self.next;
        self.next += 1;
        if self.keys.values.is_empty() {
            return (i == 0).then(|| Some(self.keys.keys.value(self.row)));
        }
        let col = self.keys.values.get(i)?;
        Some(if col.is_null(self.row) {
            None
        } else {
            match col.value(self.row) {
                NULL_VALUE => None,
                EMPTY_VALUE => Some(""),
                v => Some(v),
            }
        })
    }
}

/// A key field's column as text (nulls stay null).
fn as_text(col: &ArrayRef, field: &str) -> std::result::Result<StringArray, KeyError> {
    if col.data_type() == &DataType::Utf8 {
        // String keys are their own text: no copy.
        return Ok(col.as_string::<i32>().clone());
    }
    let n = col.len();
    let mut out = StringBuilder::with_capacity(n, n * 12);
    // Appends each row's value through `write` (a null stays null).
    fn each<A: Array>(a: &A, out: &mut StringBuilder, mut write: impl FnMut(usize, &mut StringBuilder)) {
        for r in 0..a.len() {
            if a.is_null(r) {
                out.append_null();
            } else {
                write(r, out);
                out.append_value("");
            }
        }
    }
    match col.data_type() {
        DataType::Int32 => {
            let a = col.as_primitive::<types::Int32Type>();
            each(a, &mut out, |r, o| {
                let _ = write!(o, "{}", a.value(r));
            });
        }
        DataType::Int64 => {
            let a = col.as_primitive::<types::Int64Type>();
            each(a, &mut out, |r, o| {
                let _ = write!(o, "{}", a.value(r));
            });
        }
        DataType::Boolean => {
            let a = col.as_boolean();
            each(a, &mut out, |r, o| {
                let _ = write!(o, "{}", a.value(r));
            });
        }
        DataType::Date32 => {
            let a = col.as_primitive::<types::Date32Type>();
            if let Some(r) = (0..n).find(|r| !a.is_null(*r) && date_text(a.value(*r)).is_none()) {
                return Err(KeyError {
                    row: r,
                    field: Some(field.into()),
                    reason: format!("day {} is outside the dates a key can hold", a.value(r)),
                });
            }
            each(a, &mut out, |r, o| {
                if let Some(d) = date_text(a.value(r)) {
                    let _ = write!(o, "{d}");
                }
            });
        }
        DataType::Timestamp(unit, _) => {
            let a: &arrow::array::PrimitiveArray<types::Int64Type> = &match unit {
                types::TimeUnit::Second => col.as_primitive::<types::TimestampSecondType>().reinterpret_cast(),
                types::TimeUnit::Millisecond => {
                    col.as_primitive::<types::TimestampMillisecondType>().reinterpret_cast()
                }
                types::TimeUnit::Microsecond => {
                    col.as_primitive::<types::TimestampMicrosecondType>().reinterpret_cast()
                }
                types::TimeUnit::Nanosecond => col.as_primitive::<types::TimestampNanosecondType>().reinterpret_cast(),
            };
            each(a, &mut out, |r, o| {
                let _ = write!(o, "{}", a.value(r));
            });
        }
        DataType::Decimal128(_, scale) => {
            let a = col.as_primitive::<types::Decimal128Type>();
            let scale = i32::from(*scale);
            each(a, &mut out, |r, o| java_decimal(o, a.value(r), scale));
        }
        other => {
            return Err(KeyError {
                row: 0,
                field: Some(field.into()),
                reason: format!("type {other} cannot be part of a record key"),
            });
        }
    }
    Ok(out.finish())
}

/// Days since 1970-01-01 as Java's `LocalDate.toString` writes them
/// (`yyyy-MM-dd`, four-digit years with a sign outside 0..=9999, which is
/// also chrono's form); `None` outside chrono's range.
fn date_text(days: i32) -> Option<impl std::fmt::Display> {
    arrow::temporal_conversions::date32_to_datetime(days).map(|d| d.date())
}

/// `unscaled × 10^-scale` as Java's `BigDecimal.toString` writes it (its
/// documented rule): the digits of |unscaled|; the adjusted exponent
/// `-scale + (digits - 1)`; with `scale >= 0` and an adjusted exponent of at
/// least -6, plain notation with `scale` digits after the point (zeros
/// padded on the left, a leading `0` before a bare point); otherwise one
/// digit, the rest after a point, and `E` with the signed exponent.
fn java_decimal(out: &mut StringBuilder, unscaled: i128, scale: i32) {
    let digits = unscaled.unsigned_abs().to_string();
    if unscaled < 0 {
        out.write_char('-').ok();
    }
    let adjusted = i64::from(-scale) + (digits.len() as i64 - 1);
    if scale >= 0 && adjusted >= -6 {
        let scale = scale as usize;
        if scale == 0 {
            out.write_str(&digits).ok();
        } else if digits.len() > scale {
            let (int, frac) = digits.split_at(digits.len() - scale);
            let _ = write!(out, "{int}.{frac}");
        } else {
            let _ = write!(out, "0.{}{digits}", "0".repeat(scale - digits.len()));
        }
    } else {
        let (first, rest) = digits.split_at(1);
        out.write_str(first).ok();
        if !rest.is_empty() {
            let _ = write!(out, ".{rest}");
        }
        let _ = write!(out, "E{}{adjusted}", if adjusted >= 0 { "+" } else { "" });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BooleanArray, Date32Array, Decimal128Array, Int32Array, Int64Array, TimestampMillisecondArray};
    use arrow::datatypes::Field;

    fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let fields: Vec<Field> = cols.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), true)).collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), cols.into_iter().map(|(_, a)| a).collect()).unwrap()
    }

    fn key(names: &[&str]) -> RecordKey {
        RecordKey::new(names.iter().enumerate().map(|(i, n)| (n.to_string(), i)).collect())
    }

    fn texts(col: ArrayRef) -> Vec<Option<String>> {
        let a = as_text(&col, "f").unwrap();
        a.iter().map(|v| v.map(String::from)).collect()
    }

    /// Expected texts printed by Java 17 (`jshell`):
    /// `LocalDate.ofEpochDay(d)` and `new BigDecimal(BigInteger.valueOf(u), s)`.
    #[test]
    fn values_render_as_java_renders_them() {
        let days = [0, 18_314, -1, -719_528, -719_529, 2_932_897, 2_932_896, -25, 11_016];
        let java_dates = [
            "1970-01-01",
            "2020-02-22",
            "1969-12-31",
            "0000-01-01",
            "-0001-12-31",
            "+10000-01-01",
            "9999-12-31",
            "1969-12-07",
            "2000-02-29",
        ];
        let got = texts(Arc::new(Date32Array::from(days.to_vec())));
        assert_eq!(got, java_dates.iter().map(|s| Some(s.to_string())).collect::<Vec<_>>());

        let decimals: [(i128, i8, &str); 12] = [
            (150, 2, "1.50"),
            (-150, 2, "-1.50"),
            (1, 10, "1E-10"),
            (0, 10, "0E-10"),
            (0, 2, "0.00"),
            (123_456_789, 5, "1234.56789"),
            (-5, 7, "-5E-7"),
            (-5, 6, "-0.000005"),
            (12_345, 0, "12345"),
            (-1, 1, "-0.1"),
            (1, 6, "0.000001"),
            (10, 7, "0.0000010"),
        ];
        for (unscaled, scale, java) in decimals {
            let a = Decimal128Array::from(vec![unscaled]).with_precision_and_scale(38, scale).unwrap();
            assert_eq!(texts(Arc::new(a)), vec![Some(java.to_string())], "{unscaled} scale {scale}");
        }
        let big = Decimal128Array::from(vec![-99_999_999_999_999_999_999_999_999_999_999_999_999i128])
            .with_precision_and_scale(38, 38)
            .unwrap();
        assert_eq!(texts(Arc::new(big)), vec![Some("-0.99999999999999999999999999999999999999".into())]);

        assert_eq!(
            texts(Arc::new(Int64Array::from(vec![Some(i64::MIN), None, Some(7)]))),
            vec![Some("-9223372036854775808".into()), None, Some("7".into())]
        );
        assert_eq!(texts(Arc::new(Int32Array::from(vec![-42]))), vec![Some("-42".into())]);
        assert_eq!(
            texts(Arc::new(BooleanArray::from(vec![true, false]))),
            vec![Some("true".into()), Some("false".into())]
        );
        // A timestamp is its stored number (Hudi's default), whatever its zone.
        let ts = TimestampMillisecondArray::from(vec![1_582_329_600_000]).with_timezone("+00:00");
        assert_eq!(texts(Arc::new(ts)), vec![Some("1582329600000".into())]);
        assert!(as_text(&(Arc::new(arrow::array::Float64Array::from(vec![1.5])) as ArrayRef), "f").is_err());
    }

    #[test]
    fn a_single_field_key_is_the_value() {
        let b = batch(vec![("id", Arc::new(Int64Array::from(vec![1, 22])) as ArrayRef)]);
        let keys = key(&["id"]).build(&b).unwrap();
        assert_eq!(keys.keys().iter().collect::<Vec<_>>(), vec![Some("1"), Some("22")]);
        assert_eq!(keys.hash_values(1).collect::<Vec<_>>(), vec![Some("22")]);
        let b = batch(vec![("id", Arc::new(StringArray::from(vec![Some("a"), None])) as ArrayRef)]);
        let err = key(&["id"]).build(&b).unwrap_err();
        assert_eq!((err.row, err.field.as_deref()), (1, Some("id")));
    }

    #[test]
    fn a_composite_key_is_field_value_pairs() {
        let b = batch(vec![
            ("user_id", Arc::new(Int64Array::from(vec![Some(1), None, Some(3)])) as ArrayRef),
            ("date", Arc::new(Date32Array::from(vec![18_314, 18_315, 0])) as ArrayRef),
            ("group_id", Arc::new(StringArray::from(vec!["1", "", "__null__"])) as ArrayRef),
        ]);
        let keys = key(&["user_id", "date", "group_id"]).build(&b).unwrap();
        assert_eq!(
            keys.keys().iter().collect::<Vec<_>>(),
            vec![
                Some("user_id:1,date:2020-02-22,group_id:1"),
                Some("user_id:__null__,date:2020-02-23,group_id:__empty__"),
                Some("user_id:3,date:1970-01-01,group_id:__null__"),
            ]
        );
        assert_eq!(keys.hash_values(0).collect::<Vec<_>>(), vec![Some("1"), Some("2020-02-22"), Some("1")]);
        assert_eq!(keys.hash_values(1).collect::<Vec<_>>(), vec![None, Some("2020-02-23"), Some("")]);
        // Hudi reads the placeholder back as null, whatever wrote it.
        assert_eq!(keys.hash_values(2).collect::<Vec<_>>(), vec![Some("3"), Some("1970-01-01"), None]);
    }

    #[test]
    fn a_composite_key_needs_one_value() {
        let b = batch(vec![
            ("a", Arc::new(StringArray::from(vec![Some("x"), Some("")])) as ArrayRef),
            ("b", Arc::new(Int32Array::from(vec![Some(1), None])) as ArrayRef),
        ]);
        let err = key(&["a", "b"]).build(&b).unwrap_err();
        assert_eq!(err.row, 1);
        assert!(err.reason.contains("(a, b) is null or empty"), "{}", err.reason);
    }

    #[test]
    fn types_keys_cannot_hold_are_named() {
        let schema =
            Schema::new(vec![Field::new("id", DataType::Utf8, false), Field::new("x", DataType::Float64, false)]);
        assert!(key(&["id"]).check_types(&schema).is_ok());
        let err = RecordKey::new(vec![("id".into(), 0), ("x".into(), 1)]).check_types(&schema).unwrap_err();
        assert!(err.to_string().contains("record key field `x`") && err.to_string().contains("Float64"), "{err}");
    }
}
