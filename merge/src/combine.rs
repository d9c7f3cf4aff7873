//! Combining a write's versions of a key before they are stored.
//!
//! A commit often carries several versions of one record key: a batch of
//! events in which a key changed more than once. Of those, a writer needs to
//! store only the one the merge keeps: readers and the compactor then merge
//! the same rows from fewer versions, and the writer stores fewer bytes.
//! Hudi's writers do the same by default (`hoodie.combine.before.upsert`).
//!
//! Combining is exact because both row rules ([`crate::rules`]) pick a
//! maximum: under event-time ordering the largest ordering value wins, a tie
//! going to the later write; under commit-time ordering the later write
//! wins. Whether a run of versions is combined first or not, it merges with
//! the versions before and after it to the same winner, under Tributary's
//! rules as under Hudi's. The combiner holds back where that is not so:
//!
//! - a write of some columns only, and a table with sequence groups: the
//!   column rule merges columns apart, not whole versions;
//! - a custom merger: its rule is unknown;
//! - a version without an ordering value, in a table with an ordering
//!   field: the column rule applies it as the later write that keeps the
//!   row's ordering value, where the row rule takes it as the smallest value
//!   (event time) or takes it whole (commit time). It is kept as it is, and
//!   the key's later versions combine after it;
//! - deletes: the caller keeps them apart. A version that comes after a
//!   delete of its key must not combine with one before it, so the caller
//!   stores what the combiner holds (then the deletes) and [`Combiner::clear`]s
//!   it first.
//!
//! The combiner holds places, not rows: a version is `(source, row)`, a row
//! of one of the batches given to [`Combiner::add_source`]. What it keeps,
//! [`Combiner::kept`], is in write order: a key appears once, unless a
//! version of it could not combine, and then its versions keep their order.

use arrow::array::{Array, StringArray};
use arrow::buffer::NullBuffer;
use std::cmp::Ordering;
use tributary_format::TableSchema;
use tributary_timeline::{MergeMode, TableConfig};

use crate::index::{KeyIndex, KeyRef, Probe};
use crate::ordering::{Ord2, OrderColumn};

/// How versions of a key combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// Not at all: every version is kept.
    Keep,
    /// The later version wins; versions without a value in column
    /// `ordering` (the table's ordering field) are kept apart.
    Latest { ordering: Option<usize> },
    /// The larger value of column `ordering` of the batches wins; a tie goes
    /// to the later version.
    EventTime { ordering: usize },
}

impl Rule {
    /// The rule of writes of `schema`'s columns (`partial`: some of the
    /// table's) into a table of `config`.
    fn of(schema: &TableSchema, config: &TableConfig, partial: bool) -> Self {
        if partial || !config.sequence_groups.is_empty() {
            return Rule::Keep;
        }
        match (config.merge_mode, schema.ordering_indices().first().copied()) {
            (MergeMode::EventTime, Some(ordering)) => Rule::EventTime { ordering },
            // Event-time ordering without an ordering field merges by write
            // order, as the row rule does.
            (MergeMode::EventTime | MergeMode::CommitTime, ordering) => Rule::Latest { ordering },
            (MergeMode::Custom, _) => Rule::Keep,
        }
    }

    /// The column of the ordering field, when it is read.
    fn ordering(self) -> Option<usize> {
        match self {
            Rule::Keep => None,
            Rule::Latest { ordering } => ordering,
            Rule::EventTime { ordering } => Some(ordering),
        }
    }
}

/// A key's kept version is final: the next version of the key is kept
/// after it rather than compared with it.
const FINAL: u32 = 1 << 31;

/// One batch versions come from: its record keys, and its ordering column
/// (with its nulls) when the rule reads it.
struct Source {
    keys: StringArray,
    ordering: Option<(OrderColumn, Option<NullBuffer>)>,
}

/// A record key's kept version: its key, its ordering value, and its place
/// in the picks (or'ed with [`FINAL`] once it must not be replaced).
#[derive(Default)]
struct Slot {
    key: KeyRef,
    order: Ord2,
    pick: u32,
}

/// What the combiner holds of the versions taken.
#[derive(Default)]
struct Kept {
    /// Per key, its kept version.
    index: KeyIndex<Slot>,
    /// The bytes of keys too long to hold in the index, back to back.
    arena: Vec<u8>,
    /// The kept versions, as `(source, row)`.
    picks: Vec<(u32, u32)>,
}

impl Kept {
    /// Takes the version `at` of `key` (hash `hash`), ordering value `order`
    /// when the rule reads it, under `rule`.
    #[inline]
    fn offer(&mut self, rule: Rule, key: &[u8], hash: u64, order: Option<Ord2>, at: (u32, u32)) {
        let next = self.picks.len() as u32;
        let (found, inline) = self.index.probe_key(key, hash, &self.arena, |s| &s.key);
        // A version without an ordering value is kept as it is, and ends the
        // run of versions its key's later versions combine with.
        let last = if order == Some(Ord2::Null) { FINAL } else { 0 };
        let order = order.unwrap_or_default();
        match found {
            Probe::Vacant(i) => {
                let key = KeyRef::or_store(inline, key, &mut self.arena);
                self.picks.push(at);
                self.index.insert(i, hash, Slot { key, order, pick: next | last });
            }
            Probe::Found(i) => {
                let slot = self.index.get_mut(i);
                if slot.pick & FINAL != 0 || last == FINAL {
                    self.picks.push(at);
                    *slot = Slot { key: slot.key, order, pick: next | last };
                } else if !matches!(rule, Rule::EventTime { .. }) || order.cmp(&slot.order) != Ordering::Less {
                    self.picks[slot.pick as usize] = at;
                    slot.order = order;
                }
            }
        }
    }
}

/// Combines versions of the same record key as they come, in write order,
/// keeping per key only the version the merge would keep (see the module
/// notes).
pub struct Combiner {
    rule: Rule,
    /// The ordering fields' columns: the rule's, and with several fields
    /// the others after it, compared element by element.
    ordering: Vec<usize>,
    hasher: foldhash::fast::FixedState,
    sources: Vec<Source>,
    kept: Kept,
    /// [`Combiner::kept`] reordered the kept versions since the last clear.
    sorted: bool,
}

impl std::fmt::Debug for Combiner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Combiner({:?}: {} kept of {} sources)", self.rule, self.kept.picks.len(), self.sources.len())
    }
}

impl Combiner {
    /// A combiner for writes of `schema`'s columns into a table of `config`;
    /// `partial` when the write carries some columns only. One that may not
    /// combine (see the module notes) keeps every version.
    pub fn new(schema: &TableSchema, config: &TableConfig, partial: bool) -> Self {
        let mut combiner = Self::with_rule(Rule::of(schema, config, partial));
        combiner.ordering = schema.ordering_indices().to_vec();
        combiner
    }

    /// Whether a [`Combiner::new`] of the same arguments combines versions
    /// at all.
    pub fn combines_writes(schema: &TableSchema, config: &TableConfig, partial: bool) -> bool {
        Rule::of(schema, config, partial) != Rule::Keep
    }

    /// A combiner that keeps every version, whatever the rules.
    pub fn keep_every_version() -> Self {
        Self::with_rule(Rule::Keep)
    }

    fn with_rule(rule: Rule) -> Self {
        Self {
            rule,
            ordering: Vec::new(),
            hasher: foldhash::fast::FixedState::with_seed(0x636f_6d62_696e_6572),
            sources: Vec::new(),
            kept: Kept::default(),
            sorted: false,
        }
    }

    /// Whether versions of a key combine at all.
    pub fn combines(&self) -> bool {
        self.rule != Rule::Keep
    }

    /// Adds a batch versions come from, with its record keys `keys` (one
    /// per row of `batch`, which has the table's columns); returns its
    /// number for [`Combiner::push`].
    pub fn add_source(&mut self, keys: &StringArray, batch: &arrow::array::RecordBatch) -> u32 {
        // The rule reads the ordering fields' column (one field's, or a
        // struct of several: `ordering_column_of`).
        let ordering = self.rule.ordering().and_then(|_| tributary_format::ordering_column_of(batch, &self.ordering));
        let ordering = ordering.map(|c| (OrderColumn::of(&c), c.logical_nulls()));
        self.sources.push(Source { keys: keys.clone(), ordering });
        (self.sources.len() - 1) as u32
    }

    /// Takes the versions at rows `rows` of source `source`, the next in
    /// write order: each is kept as its key's first version, kept in place
    /// of the key's version held (which lost to it), or dropped (it lost).
    pub fn push(&mut self, source: u32, rows: &[u32]) {
        debug_assert!(!self.sorted, "a combiner takes no versions between `kept` and `clear`");
        if self.rule == Rule::Keep {
            self.kept.picks.extend(rows.iter().map(|&r| (source, r)));
            return;
        }
        use std::hash::BuildHasher;
        let src = &self.sources[source as usize];
        // A chunk's hashes and ordering values first, and the index slots
        // the hashes start at read, so that the reads' cache misses overlap.
        const CHUNK: usize = 32;
        let mut hashes = [0u64; CHUNK];
        let mut orders: [Option<Ord2>; CHUNK] = Default::default();
        for chunk in rows.chunks(CHUNK) {
            for ((h, o), &r) in hashes.iter_mut().zip(orders.iter_mut()).zip(chunk) {
                *h = self.hasher.hash_one(src.keys.value(r as usize).as_bytes());
                *o = src.ordering.as_ref().map(|(c, nulls)| c.at(nulls.as_ref(), r as usize));
            }
            let touched = hashes[..chunk.len()].iter().fold(0, |t, h| t ^ self.kept.index.touch(*h));
            std::hint::black_box(touched);
            for ((&hash, order), &r) in hashes.iter().zip(orders.iter_mut()).zip(chunk) {
                let key = src.keys.value(r as usize).as_bytes();
                self.kept.offer(self.rule, key, hash, order.take(), (source, r));
            }
        }
    }

    /// The versions kept, as `(source, row)`, in write order (sources in
    /// the order they were added). [`Combiner::clear`] it before it takes
    /// more versions: its index finds versions by their place in this list.
    pub fn kept(&mut self) -> &[(u32, u32)] {
        // A key's kept versions each won a run of its versions that ends
        // before the next one's starts, so write order keeps their order.
        self.kept.picks.sort_unstable();
        self.sorted = true;
        &self.kept.picks
    }

    /// Forgets every source and version, keeping the memory.
    pub fn clear(&mut self) {
        self.sorted = false;
        self.kept.index.clear();
        self.kept.arena.clear();
        self.kept.picks.clear();
        self.sources.clear();
    }

    /// Bytes of its index and places (not of the batches it refers to).
    pub fn retained_bytes(&self) -> usize {
        self.kept.index.allocated_bytes()
            + self.kept.arena.capacity()
            + self.kept.picks.capacity() * std::mem::size_of::<(u32, u32)>()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, RecordBatch};
    use proptest::prelude::*;
    use tributary_format::SequenceGroup;
    use tributary_format::{DeleteRecord, OrderingValue};
    use tributary_timeline::NewTableConfig;

    use super::*;
    use crate::version::Version;

    const SCHEMA: &str = r#"{"type":"record","name":"r","fields":[{"name":"k","type":"string"},
        {"name":"ts","type":["null","long"]},{"name":"v","type":"long"}]}"#;

    fn schema() -> TableSchema {
        TableSchema::new(SCHEMA, &["k"], Some("ts"), None).unwrap()
    }

    fn config(mode: MergeMode) -> TableConfig {
        let mut new = NewTableConfig::new("t", "k", "ts", SCHEMA);
        new.merge_mode = mode;
        TableConfig::new_table(&new)
    }

    /// `batch` with meta columns in front, as a reader sees a log's rows.
    fn with_meta(batch: &RecordBatch) -> RecordBatch {
        let n = batch.num_rows();
        let text = |v: &str| -> ArrayRef { Arc::new(StringArray::from(vec![v; n])) };
        let mut columns = vec![
            text("c"),
            Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("c_{i}")))) as ArrayRef,
            batch.column(0).clone(),
            text(""),
            text("f"),
        ];
        columns.extend(batch.columns().iter().cloned());
        RecordBatch::try_new(schema().arrow_with_meta().clone(), columns).unwrap()
    }

    fn batch(rows: &[(&str, Option<i64>, i64)]) -> RecordBatch {
        let s = schema();
        RecordBatch::try_new(
            s.arrow().clone(),
            vec![
                Arc::new(StringArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>())),
                Arc::new(Int64Array::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
                Arc::new(Int64Array::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())),
            ],
        )
        .unwrap()
    }

    /// The picks' `v` values, in order.
    fn kept(c: &mut Combiner, batches: &[RecordBatch]) -> Vec<i64> {
        c.kept()
            .iter()
            .map(|&(s, r)| {
                batches[s as usize].column(2).as_any().downcast_ref::<Int64Array>().unwrap().value(r as usize)
            })
            .collect()
    }

    fn combine(mode: MergeMode, batches: &[RecordBatch]) -> Combiner {
        let mut c = Combiner::new(&schema(), &config(mode), false);
        for b in batches {
            let keys = b.column(0).as_any().downcast_ref::<StringArray>().unwrap().clone();
            let s = c.add_source(&keys, b);
            let rows: Vec<u32> = (0..b.num_rows() as u32).collect();
            // One at a time and in runs alike.
            let (one, rest) = rows.split_at(rows.len().min(1));
            c.push(s, one);
            c.push(s, rest);
        }
        c
    }

    #[test]
    fn event_time_keeps_the_largest_value_and_the_later_on_a_tie() {
        let batches = [
            batch(&[("a", Some(5), 1), ("b", Some(1), 2), ("a", Some(3), 3)]),
            batch(&[("a", Some(5), 4), ("c", Some(0), 5), ("b", Some(0), 6)]),
        ];
        let mut c = combine(MergeMode::EventTime, &batches);
        assert_eq!(kept(&mut c, &batches), vec![2, 4, 5]);
    }

    #[test]
    fn commit_time_keeps_the_later() {
        let batches = [batch(&[("a", Some(5), 1), ("b", Some(1), 2), ("a", Some(3), 3)])];
        assert_eq!(kept(&mut combine(MergeMode::CommitTime, &batches), &batches), vec![2, 3]);
    }

    #[test]
    fn a_version_without_an_ordering_value_is_kept_apart() {
        let batches = [batch(&[("a", Some(5), 1), ("a", None, 2), ("a", Some(3), 3), ("a", Some(4), 4)])];
        assert_eq!(kept(&mut combine(MergeMode::EventTime, &batches), &batches), vec![1, 2, 4]);
    }

    #[test]
    fn partial_writes_sequence_groups_and_custom_mergers_keep_every_version() {
        let s = schema();
        assert!(!Combiner::new(&s, &config(MergeMode::EventTime), true).combines());
        assert!(!Combiner::new(&s, &config(MergeMode::Custom), false).combines());
        let groups = TableConfig {
            sequence_groups: vec![SequenceGroup { ordering: "ts".into(), columns: vec!["v".into()] }],
            ..config(MergeMode::EventTime)
        };
        assert!(!Combiner::new(&s, &groups, false).combines());
        let batches = [batch(&[("a", Some(5), 1), ("a", Some(3), 2)])];
        assert_eq!(kept(&mut combine(MergeMode::Custom, &batches), &batches), vec![1, 2]);
    }

    proptest! {
        /// Combined or not, a write merges with what came before it to the
        /// same rows, under either ordering, by the row rule and by the
        /// column rule (a slice that also holds partial versions).
        #[test]
        fn combining_does_not_change_what_a_merge_keeps(
            before in prop::collection::vec((0u8..6, prop::option::weighted(0.9, 0i64..4)), 0..12),
            write in prop::collection::vec((0u8..6, prop::option::weighted(0.9, 0i64..4)), 0..40),
            deleted in prop::collection::vec((0u8..6, prop::option::of(0i64..4)), 0..3),
            commit_time in any::<bool>(),
            column_rule in any::<bool>(),
        ) {
            let mode = if commit_time { MergeMode::CommitTime } else { MergeMode::EventTime };
            let rows = |v: &[(u8, Option<i64>)], base: i64| -> Vec<(String, Option<i64>, i64)> {
                v.iter().enumerate().map(|(i, (k, ts))| (format!("key{k}"), *ts, base + i as i64)).collect()
            };
            let to_batch = |rows: &[(String, Option<i64>, i64)]| {
                batch(&rows.iter().map(|r| (r.0.as_str(), r.1, r.2)).collect::<Vec<_>>())
            };
            let earlier = to_batch(&rows(&before, 0));
            let written = to_batch(&rows(&write, 1000));
            let deletes: Vec<DeleteRecord> = deleted.iter().map(|(k, ts)| DeleteRecord {
                key: format!("key{k}"),
                partition: String::new(),
                ordering: ts.map_or(OrderingValue::Null, OrderingValue::Long),
            }).collect();
            let mut c = combine(mode, std::slice::from_ref(&written));
            let picked: Vec<u32> = c.kept().iter().map(|p| p.1).collect();
            let combined = arrow::compute::take_record_batch(&written, &arrow::array::UInt32Array::from(picked)).unwrap();
            let s = schema();
            let cfg = config(mode);
            let merged = |w: &RecordBatch| {
                let versions = [
                    Version::Rows(with_meta(&earlier)),
                    Version::Deletes(deletes.clone()),
                    Version::Rows(with_meta(w)),
                ];
                // The table's columns: the meta columns number rows as written.
                crate::rules::merge_as(&s, &cfg, &versions, column_rule, true)
                    .unwrap()
                    .map(|b| b.columns()[5..].to_vec())
            };
            prop_assert_eq!(merged(&combined), merged(&written));
        }
    }
}
