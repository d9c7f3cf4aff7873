//! The column-wise merge: partial-column versions and sequence groups.
//!
//! Per record key, in write order:
//! - each sequence group's columns come from the version with the largest
//!   value of the group's ordering field (a tie goes to the later write); a
//!   version updates a group only if it carries the group's ordering value;
//! - the table's ordering field and the columns in no group follow the
//!   table's ordering field (event time), or the later write (commit time); a
//!   version without the table's ordering value keeps the row's and applies
//!   its ungrouped columns as the later write;
//! - columns a version does not carry keep their values; an explicit null in
//!   a carried column sets it to null;
//! - a delete removes the whole row when its ordering value is at least the
//!   row's table-level ordering value (or carries none); a later version that
//!   is not older than the delete re-creates the row with only its columns.

use foldhash::{HashMap, HashMapExt};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, new_null_array};
use tributary_format::{META_FIELDS, RECORD_KEY, TableSchema};
use tributary_timeline::{MergeMode, TableConfig};

use crate::error::{Error, Result};
use crate::ordering::{Ord2, is_unconditional, ordering_at};
use crate::tombstone::Tombstone;
use crate::version::Version;

/// What decides a column's value.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rule {
    /// Meta columns, key and partition: the latest version that changed the row.
    Latest,
    /// The table's ordering field and ungrouped columns.
    Table,
    /// Sequence group `g`.
    Group(usize),
}

/// A column a version set to null ([`RowState::src`]).
const WRITTEN_NULL: (u32, u32) = (u32::MAX, 0);

struct RowState {
    /// `(batch, row)` of each column's value; [`WRITTEN_NULL`]: set to
    /// null; `None`: never written (null, or its default once a version
    /// lacking it supplies one).
    src: Vec<Option<(u32, u32)>>,
    group_ord: Vec<Ord2>,
    row_ord: Ord2,
    deleted: bool,
}

/// Merges versions column by column; see the module notes. Returns the
/// surviving rows and, with `tombstones`, those of the keys a delete won.
pub(crate) fn merge_columns(
    schema: &TableSchema,
    config: &TableConfig,
    versions: &[Version],
    tombstones: bool,
) -> Result<(Option<RecordBatch>, Vec<Tombstone>)> {
    let full = schema.arrow_with_meta();
    let ncols = full.fields().len();
    let meta = META_FIELDS.len();
    let col = |name: &str| full.index_of(name).ok();
    if schema.ordering_indices().len() > 1 {
        return Err(Error::Invalid {
            what: "partial-column merge".into(),
            reason: "a table with several ordering fields takes whole rows only (no sequence groups or --columns)"
                .into(),
        });
    }
    let table_ord = schema.single_ordering().map(|i| i + meta);
    let mut rules = vec![Rule::Table; ncols];
    for r in rules.iter_mut().take(meta) {
        *r = Rule::Latest;
    }
    for k in schema.record_key().columns() {
        rules[k + meta] = Rule::Latest;
    }
    if let Some(p) = schema.partition_index() {
        rules[p + meta] = Rule::Latest;
    }
    let mut group_ord_col = Vec::new();
    for (g, group) in config.sequence_groups.iter().enumerate() {
        let o = col(&group.ordering).ok_or_else(|| Error::Invalid {
            what: format!("sequence group `{}`", group.ordering),
            reason: "its ordering field is not in the table schema".into(),
        })?;
        group_ord_col.push(o);
        rules[o] = Rule::Group(g);
        for c in &group.columns {
            if let Some(i) = col(c) {
                rules[i] = Rule::Group(g);
            }
        }
    }
    let event_time = config.merge_mode != MergeMode::CommitTime && table_ord.is_some();
    let ngroups = group_ord_col.len();

    let batches: Vec<(&RecordBatch, Option<&[bool]>)> = versions
        .iter()
        .filter_map(|v| match v {
            Version::Rows(b) => Some((b, None)),
            Version::Partial { batch, present } => Some((batch, Some(&present[..]))),
            Version::Deletes(_) => None,
        })
        .collect();
    let mut states: HashMap<&str, RowState> = HashMap::new();
    let fresh = || RowState {
        src: vec![None; ncols],
        group_ord: vec![Ord2::Null; ngroups],
        row_ord: Ord2::Null,
        deleted: false,
    };
    let mut bi = 0usize;
    // Which groups a row wins, per row (one buffer for them all).
    let mut take_group = vec![false; ngroups];
    for v in versions {
        match v {
            Version::Deletes(ds) => {
                for d in ds {
                    let order = Ord2::from_delete(&d.ordering);
                    let st = states.entry(d.key.as_str()).or_insert_with(fresh);
                    let wins = !event_time
                        || is_unconditional(&d.ordering)
                        || st.row_ord == Ord2::Null
                        || order.cmp(&st.row_ord) != std::cmp::Ordering::Less;
                    if wins {
                        *st = fresh();
                        st.deleted = true;
                        st.row_ord = if is_unconditional(&d.ordering) { Ord2::Null } else { order };
                    }
                }
            }
            Version::Rows(_) | Version::Partial { .. } => {
                let (b, present) = batches[bi];
                let keys = b.column(RECORD_KEY).as_string_opt::<i32>().ok_or_else(|| Error::Internal {
                    what: "merge input".into(),
                    reason: "_hoodie_record_key is not a string column".into(),
                })?;
                let has = |c: usize| present.is_none_or(|p| p[c]);
                for r in 0..b.num_rows() {
                    if keys.is_null(r) {
                        continue;
                    }
                    let at = Some((bi as u32, r as u32));
                    let t = table_ord.filter(|&c| has(c)).map(|c| ordering_at(b.column(c), r));
                    let t = t.filter(|o| *o != Ord2::Null);
                    let st = states.entry(keys.value(r)).or_insert_with(fresh);
                    if st.deleted {
                        if event_time
                            && let Some(t) = &t
                            && t.cmp(&st.row_ord) == std::cmp::Ordering::Less
                        {
                            continue; // older than the delete
                        }
                        let keep = st.row_ord.clone();
                        *st = fresh();
                        st.row_ord = keep;
                    }
                    let take_table = match (&t, event_time) {
                        (Some(t), true) => st.row_ord == Ord2::Null || t.cmp(&st.row_ord) != std::cmp::Ordering::Less,
                        _ => true,
                    };
                    if take_table && let Some(t) = t {
                        st.row_ord = t;
                    }
                    take_group.fill(false);
                    for (g, &oc) in group_ord_col.iter().enumerate() {
                        if has(oc) {
                            let o = ordering_at(b.column(oc), r);
                            if o != Ord2::Null
                                && (st.group_ord[g] == Ord2::Null
                                    || o.cmp(&st.group_ord[g]) != std::cmp::Ordering::Less)
                            {
                                st.group_ord[g] = o;
                                take_group[g] = true;
                            }
                        }
                    }
                    // A version that changes nothing (older than the row in
                    // every respect) leaves its meta columns too.
                    let touched = take_table || take_group.iter().any(|&t| t);
                    for (c, rule) in rules.iter().enumerate() {
                        if !has(c) {
                            // A column the version lacks keeps its value;
                            // one no version wrote takes its default (the
                            // absent column holds it, else null).
                            if touched && st.src[c].is_none() && !b.column(c).is_null(r) {
                                st.src[c] = at;
                            }
                            continue;
                        }
                        let take = match rule {
                            Rule::Latest => touched,
                            Rule::Table => take_table,
                            Rule::Group(g) => take_group[*g],
                        };
                        if take {
                            st.src[c] = if b.column(c).is_null(r) { Some(WRITTEN_NULL) } else { at };
                        }
                    }
                }
                bi += 1;
            }
        }
    }
    let tombstones: Vec<Tombstone> = if event_time && tombstones {
        states.iter().filter(|(_, s)| s.deleted).filter_map(|(k, s)| Tombstone::of(k.as_bytes(), &s.row_ord)).collect()
    } else {
        Vec::new()
    };
    let live: Vec<&RowState> = states.values().filter(|s| !s.deleted && s.src[RECORD_KEY].is_some()).collect();
    if live.is_empty() {
        return Ok((None, tombstones));
    }
    let null_at = batches.len();
    let columns: Vec<ArrayRef> = (0..ncols)
        .map(|c| {
            let picks: Vec<(usize, usize)> = live
                .iter()
                .map(|s| match s.src[c] {
                    None | Some(WRITTEN_NULL) => (null_at, 0),
                    Some((b, r)) => (b as usize, r as usize),
                })
                .collect();
            let mut arrays: Vec<&dyn Array> = batches.iter().map(|(b, _)| b.column(c).as_ref()).collect();
            // A null to pick from, made only when some row has no value.
            let nulls = picks.iter().any(|p| p.0 == null_at).then(|| new_null_array(full.field(c).data_type(), 1));
            arrays.extend(nulls.as_deref());
            arrow::compute::interleave(&arrays, &picks)
        })
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::arrow("column merge", e))?;
    let mut columns = columns;
    if let Some(o) = table_ord {
        columns[o] = keep_row_ordering(&columns[o], &live, o)?;
    }
    let rows = RecordBatch::try_new(full.clone(), columns).map_err(|e| Error::arrow("column merge: merged rows", e))?;
    Ok((Some(rows), tombstones))
}

/// A row re-created after a delete by a version without the table's ordering
/// value keeps the delete's: write it into the ordering column, so the row's
/// ordering survives compaction.
fn keep_row_ordering(col: &ArrayRef, live: &[&RowState], o: usize) -> Result<ArrayRef> {
    let patch: Vec<Option<&Ord2>> = live
        .iter()
        .map(|s| (matches!(s.src[o], None | Some(WRITTEN_NULL)) && s.row_ord != Ord2::Null).then_some(&s.row_ord))
        .collect();
    if patch.iter().all(Option::is_none) {
        return Ok(col.clone());
    }
    let err = |e: arrow::error::ArrowError| Error::arrow("column merge", e);
    let values: ArrayRef = match patch.iter().flatten().next() {
        Some(Ord2::Float(_)) => Arc::new(arrow::array::Float64Array::from_iter(
            patch.iter().map(|p| p.and_then(|v| if let Ord2::Float(f) = v { Some(*f) } else { None })),
        )),
        Some(Ord2::Text(_)) => Arc::new(arrow::array::StringArray::from_iter(
            patch.iter().map(|p| p.and_then(|v| if let Ord2::Text(t) = v { Some(t.to_string()) } else { None })),
        )),
        _ => Arc::new(arrow::array::Int64Array::from_iter(
            patch.iter().map(|p| p.and_then(|v| if let Ord2::Int(i) = v { Some(*i) } else { None })),
        )),
    };
    let values = arrow::compute::cast(&values, col.data_type()).map_err(err)?;
    let mask = arrow::array::BooleanArray::from_iter(patch.iter().map(|p| Some(p.is_some())));
    arrow::compute::kernels::zip::zip(&mask, &values, col).map_err(err)
}
