//! The one merge of record versions, shared by the snapshot reader and the
//! compactor.
//!
//! Inputs are the versions of a file slice in write order: base rows first,
//! then each log's data and delete blocks in log order. Per record key:
//! - event-time ordering: the larger ordering value wins; on a tie the later
//!   write wins (log over base, later log over earlier);
//! - commit-time ordering: the later write wins;
//! - a delete wins like a version with its ordering value, and a delete
//!   without one (null, or Hudi's zero sentinel: Spark writes `int 0` or
//!   `long 0` for deletes that carry no event time) always wins.

use std::cmp::Ordering;
use std::collections::hash_map::Entry;

use foldhash::{HashMap, HashMapExt};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, TimeUnit};
use tributary_timeline::config::SEQUENCE_GROUPS_STRATEGY_ID;
use tributary_timeline::{MergeMode, TableConfig};
use tributary_writer::codec::{DeleteRecord, OrderingValue};
use tributary_writer::schema::{META_FIELDS, RECORD_KEY, TableSchema};

use crate::error::{Error, Result};

/// One unit of a slice, in write order.
#[derive(Debug, Clone)]
pub enum Version {
    /// Rows with meta columns first (the table's `arrow_with_meta` schema).
    Rows(RecordBatch),
    /// Rows of a partial writer, laid out as the table; `present[c]` says
    /// whether column `c` was written (absent columns keep their values).
    Partial {
        /// The rows, absent columns null.
        batch: RecordBatch,
        /// Which columns were written.
        present: Arc<[bool]>,
    },
    /// Deleted keys.
    Deletes(Vec<DeleteRecord>),
}

/// Whether a delete carries no event time and so always wins.
pub fn is_unconditional(v: &OrderingValue) -> bool {
    matches!(v, OrderingValue::Null | OrderingValue::Int(0) | OrderingValue::Long(0))
}

/// A comparable ordering value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ord2 {
    Null,
    Int(i64),
    Float(f64),
    Text(String),
    Bytes(Vec<u8>),
}

impl Ord2 {
    pub(crate) fn cmp(&self, other: &Ord2) -> Ordering {
        use Ord2::*;
        match (self, other) {
            (Null, Null) => Ordering::Equal,
            (Null, _) => Ordering::Less,
            (_, Null) => Ordering::Greater,
            (Int(a), Int(b)) => a.cmp(b),
            (Float(a), Float(b)) => a.total_cmp(b),
            (Int(a), Float(b)) => (*a as f64).total_cmp(b),
            (Float(a), Int(b)) => a.total_cmp(&(*b as f64)),
            (Text(a), Text(b)) => a.cmp(b),
            (Bytes(a), Bytes(b)) => a.cmp(b),
            // Mixed kinds cannot be ordered meaningfully; keep write order.
            _ => Ordering::Equal,
        }
    }

    pub(crate) fn from_delete(v: &OrderingValue) -> Self {
        match v {
            OrderingValue::Null => Ord2::Null,
            OrderingValue::Int(i) => Ord2::Int(i64::from(*i)),
            OrderingValue::Long(i) => Ord2::Int(*i),
            OrderingValue::Float(f) => Ord2::Float(f64::from(*f)),
            OrderingValue::Double(f) => Ord2::Float(*f),
            OrderingValue::Bytes(b) => Ord2::Bytes(b.clone()),
            OrderingValue::String(s) => Ord2::Text(s.clone()),
        }
    }
}

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
        DataType::Utf8 => Ord2::Text(c.as_string::<i32>().value(r).to_string()),
        DataType::Decimal128(..) => Ord2::Int(c.as_primitive::<t::Decimal128Type>().value(r) as i64),
        _ => Ord2::Null,
    }
}

struct Winner {
    order: Ord2,
    /// `(batch, row)` of the winning row; `None` when a delete won.
    at: Option<(usize, usize)>,
}

/// Merges the versions of one slice under the table's rules; returns the
/// surviving rows (schema `schema.arrow_with_meta()`), or `None` when nothing
/// survives. Refuses custom mergers it does not know rather than misread.
pub fn merge(schema: &TableSchema, config: &TableConfig, versions: &[Version]) -> Result<Option<RecordBatch>> {
    let partial = versions.iter().any(|v| matches!(v, Version::Partial { .. }));
    merge_as(schema, config, versions, partial)
}

/// [`merge`] of part of a slice's keys, where `partial` says whether the
/// whole slice holds partial versions, so every part merges the same way.
pub fn merge_as(
    schema: &TableSchema,
    config: &TableConfig,
    versions: &[Version],
    partial: bool,
) -> Result<Option<RecordBatch>> {
    check_merger(config)?;
    if partial || !config.sequence_groups.is_empty() {
        crate::columns::merge_columns(schema, config, versions)
    } else {
        merge_rows(schema, config.merge_mode, versions)
    }
}

/// Whether this build can merge the table's records.
pub fn check_merger(config: &TableConfig) -> Result<()> {
    if config.merge_mode == MergeMode::Custom && config.merge_strategy_id != SEQUENCE_GROUPS_STRATEGY_ID {
        return Err(Error::Invalid {
            what: format!("table {}", config.name),
            reason: format!(
                "merge mode CUSTOM with strategy {} is not supported; refusing to guess how records merge",
                config.merge_strategy_id
            ),
        });
    }
    Ok(())
}

/// The whole-row merge: each version is a complete row.
fn merge_rows(schema: &TableSchema, mode: MergeMode, versions: &[Version]) -> Result<Option<RecordBatch>> {
    let ordering = schema.ordering_index().map(|i| i + META_FIELDS.len());
    let batches: Vec<&RecordBatch> = versions
        .iter()
        .filter_map(|v| match v {
            Version::Rows(b) | Version::Partial { batch: b, .. } => Some(b),
            Version::Deletes(_) => None,
        })
        .collect();
    let keys: Vec<&StringArray> = batches
        .iter()
        .map(|b| {
            b.column(RECORD_KEY).as_string_opt::<i32>().ok_or_else(|| Error::Invalid {
                what: "merge input".into(),
                reason: "_hoodie_record_key is not a string column".into(),
            })
        })
        .collect::<Result<_>>()?;
    let mut winners: HashMap<&str, Winner> = HashMap::new();
    let event_time = mode == MergeMode::EventTime && ordering.is_some();
    let mut bi = 0;
    for v in versions {
        match v {
            Version::Rows(b) | Version::Partial { batch: b, .. } => {
                let k = keys[bi];
                let ord_col = ordering.map(|o| b.column(o));
                for r in 0..b.num_rows() {
                    if k.is_null(r) {
                        continue;
                    }
                    let order = match (event_time, ord_col) {
                        (true, Some(c)) => ordering_at(c, r),
                        _ => Ord2::Null,
                    };
                    let new = Winner { order, at: Some((bi, r)) };
                    match winners.entry(k.value(r)) {
                        Entry::Occupied(w) if event_time && new.order.cmp(&w.get().order) == Ordering::Less => {}
                        Entry::Occupied(mut w) => *w.get_mut() = new,
                        Entry::Vacant(v) => {
                            v.insert(new);
                        }
                    }
                }
                bi += 1;
            }
            Version::Deletes(ds) => {
                for d in ds {
                    let always = is_unconditional(&d.ordering);
                    let order = Ord2::from_delete(&d.ordering);
                    match winners.get_mut(d.key.as_str()) {
                        Some(w) if !always && event_time && order.cmp(&w.order) == Ordering::Less => {}
                        Some(w) => *w = Winner { order, at: None },
                        None => {
                            winners.insert(d.key.as_str(), Winner { order, at: None });
                        }
                    }
                }
            }
        }
    }
    let mut picks: Vec<(usize, usize)> = winners.values().filter_map(|w| w.at).collect();
    if picks.is_empty() {
        return Ok(None);
    }
    picks.sort_unstable();
    let columns: Vec<ArrayRef> = (0..schema.arrow_with_meta().fields().len())
        .map(|c| {
            let arrays: Vec<&dyn Array> = batches.iter().map(|b| b.column(c).as_ref()).collect();
            arrow::compute::interleave(&arrays, &picks)
        })
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::Invalid { what: "merge".into(), reason: e.to_string() })?;
    RecordBatch::try_new(schema.arrow_with_meta().clone(), columns)
        .map(Some)
        .map_err(|e| Error::Invalid { what: "merge".into(), reason: e.to_string() })
}
