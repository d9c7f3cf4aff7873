//! The row rule, and the merge index that applies it at scale.
//!
//! Versions are fed one at a time (or a [`KeyBatch`] at a time) into a hash
//! index of record keys ([`crate::index`]). A slot holds the key itself when
//! it is at most 15 bytes (compared as one 16-byte value), else its place in
//! a key arena; the winner's ordering value; and where the winning row is
//! (batch, row) or that a delete won. The surviving rows are gathered at the
//! end, in write order for readers or in key order for the compactor.

use std::cmp::Ordering;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use tributary_format::DeleteRecord;
use tributary_format::{META_FIELDS, RECORD_KEY, TableSchema};
use tributary_timeline::MergeMode;

use crate::error::{Error, Result};
use crate::index::{KeyIndex, KeyRef, Probe};
use crate::ordering::{Ord2, OrderColumn, is_unconditional};
use crate::tombstone::Tombstone;
use crate::version::Version;

/// Where a key's winning row is: `batch << 32 | row`, or [`DELETED`].
type RowAt = u64;
/// A delete won: the key has no row.
const DELETED: RowAt = u64::MAX;

fn row_at(batch: usize, row: usize) -> RowAt {
    ((batch as u64) << 32) | row as u64
}

/// The (batch, row) of a place.
pub(crate) fn row_of(at: RowAt) -> (usize, usize) {
    ((at >> 32) as usize, (at & 0xffff_ffff) as usize)
}

/// Versions gathered for [`RowMerger::push_batch`]: keys back to back, and
/// per version where its key ends, its ordering value and its place.
#[derive(Default)]
pub(crate) struct KeyBatch {
    keys: Vec<u8>,
    versions: Vec<(usize, Ord2, RowAt)>,
    hashes: Vec<u64>,
}

impl KeyBatch {
    /// Versions a batch gathers before it is merged: enough lookups to
    /// overlap, few enough that the keys stay in the first-level cache.
    pub(crate) const LEN: usize = 32;

    /// Adds a version of `key` whose row is row `row` of source `source`;
    /// true when the batch is full.
    #[inline]
    pub(crate) fn push(&mut self, key: &[u8], order: Ord2, source: usize, row: usize) -> bool {
        self.keys.extend_from_slice(key);
        self.versions.push((self.keys.len(), order, row_at(source, row)));
        self.versions.len() >= Self::LEN
    }
}

/// One record key's current winner.
#[derive(Default)]
struct Slot {
    key: KeyRef,
    order: Ord2,
    at: RowAt,
}

/// The whole-row merge, fed one version at a time: each version is a
/// complete row (a partial version's absent columns are null).
///
/// Short keys are held in the index itself and compared as one 16-byte
/// value; longer ones are copied once into an arena, and the index compares
/// a full hash before it compares their bytes. Either way a lookup touches
/// the index (and the arena), not the much larger batches the key came from.
pub(crate) struct RowMerger {
    schema: arrow::datatypes::SchemaRef,
    /// The (first) ordering field's column, meta fields first.
    ordering: Option<usize>,
    /// Every ordering field's column, meta fields first.
    ordering_cols: Vec<usize>,
    event_time: bool,
    hasher: foldhash::fast::FixedState,
    table: KeyIndex<Slot>,
    /// The bytes of keys too long to hold in the index, back to back.
    arena: Vec<u8>,
    batches: Vec<RecordBatch>,
    /// Memory held by `batches`.
    batch_bytes: usize,
}

impl RowMerger {
    pub(crate) fn new(schema: &TableSchema, mode: MergeMode) -> Self {
        let ordering = schema.ordering_indices().first().map(|i| i + META_FIELDS.len());
        Self {
            schema: schema.arrow_with_meta().clone(),
            ordering,
            ordering_cols: schema.ordering_indices().iter().map(|i| i + META_FIELDS.len()).collect(),
            event_time: mode == MergeMode::EventTime && ordering.is_some(),
            hasher: foldhash::fast::FixedState::with_seed(0x7269_6275_7461_7279),
            table: KeyIndex::new(),
            arena: Vec::new(),
            batches: Vec::new(),
            batch_bytes: 0,
        }
    }

    /// Memory held: the batches rows are taken from, and the key index.
    pub(crate) fn retained_bytes(&self) -> usize {
        self.batch_bytes + self.table.allocated_bytes() + self.arena.capacity()
    }

    /// Replaces the batches by one batch of the current winning rows, so the
    /// rows that lost are freed. Merging goes on as before: every key keeps
    /// its winner, deleted keys keep their delete.
    pub(crate) fn fold(&mut self) -> Result<()> {
        if self.batches.len() <= 1 && self.batches.first().is_none_or(|b| b.num_rows() == self.live()) {
            return Ok(());
        }
        let winners = self.winners();
        let state = self.gather(winners.iter().map(|p| row_of(p.0)).collect())?;
        self.place(&winners, state.into_iter().collect());
        Ok(())
    }

    /// The winning rows' places, in ascending order (so a gather runs
    /// forward), each with its key's rank among the live keys in the index's
    /// iteration order (stable while the index is not changed).
    pub(crate) fn winners(&self) -> Vec<(RowAt, u32)> {
        let mut picks: Vec<(RowAt, u32)> =
            self.table.iter().filter(|s| s.at != DELETED).enumerate().map(|(i, s)| (s.at, i as u32)).collect();
        picks.sort_unstable();
        picks
    }

    /// Replaces the batches by `batches`, which hold the rows of `winners`
    /// (from [`RowMerger::winners`], the index unchanged since) in that order.
    pub(crate) fn place(&mut self, winners: &[(RowAt, u32)], batches: Vec<RecordBatch>) {
        let mut moved = vec![0 as RowAt; winners.len()];
        let mut places =
            batches.iter().enumerate().flat_map(|(b, batch)| (0..batch.num_rows()).map(move |r| row_at(b, r)));
        for p in winners {
            moved[p.1 as usize] = places.next().expect("one row per winner");
        }
        for (s, at) in self.table.iter_mut().filter(|s| s.at != DELETED).zip(moved) {
            s.at = at;
        }
        self.batch_bytes = batches.iter().map(RecordBatch::get_array_memory_size).sum();
        self.batches = batches;
    }

    /// Keys whose winner is a row.
    fn live(&self) -> usize {
        self.table.iter().filter(|s| s.at != DELETED).count()
    }

    /// The merged state as versions that merge to the same result under
    /// either merge, and go on merging the same with later versions: the
    /// winning rows, then a delete (with its ordering value) per deleted key.
    pub(crate) fn into_versions(mut self) -> Result<Vec<Version>> {
        self.fold()?;
        let deletes: Vec<DeleteRecord> = self
            .table
            .iter()
            .filter(|s| s.at == DELETED)
            .map(|s| {
                let key = String::from_utf8_lossy(s.key.bytes(&self.arena)).into_owned();
                DeleteRecord { key, partition: String::new(), ordering: s.order.to_delete() }
            })
            .collect();
        let mut out: Vec<Version> = self.batches.into_iter().map(Version::Rows).collect();
        if !deletes.is_empty() {
            out.push(Version::Deletes(deletes));
        }
        Ok(out)
    }

    /// The rows at `indices` of the batches, or `None` for no rows.
    fn gather(&self, indices: Vec<(usize, usize)>) -> Result<Option<RecordBatch>> {
        if indices.is_empty() {
            return Ok(None);
        }
        let columns: Vec<ArrayRef> = (0..self.schema.fields().len())
            .map(|c| {
                let arrays: Vec<&dyn Array> = self.batches.iter().map(|b| b.column(c).as_ref()).collect();
                arrow::compute::interleave(&arrays, &indices)
            })
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| Error::arrow("row merge", e))?;
        RecordBatch::try_new(self.schema.clone(), columns).map(Some).map_err(|e| Error::arrow("row merge", e))
    }

    /// Applies one key's version: a row at `at`, or a delete.
    #[inline]
    fn apply(&mut self, key: &[u8], order: Ord2, at: RowAt, always: bool) {
        use std::hash::BuildHasher;
        let hash = self.hasher.hash_one(key);
        self.apply_hashed(key, hash, order, at, always);
    }

    /// [`RowMerger::apply`] of a key whose hash is known.
    #[inline]
    fn apply_hashed(&mut self, key: &[u8], hash: u64, order: Ord2, at: RowAt, always: bool) {
        let (found, inline) = self.table.probe_key(key, hash, &self.arena, |s| &s.key);
        match found {
            Probe::Found(i) => {
                let event_time = self.event_time;
                let s = self.table.get_mut(i);
                if always || !event_time || order.cmp(&s.order) != Ordering::Less {
                    s.order = order;
                    s.at = at;
                }
            }
            Probe::Vacant(i) => {
                let key = KeyRef::or_store(inline, key, &mut self.arena);
                self.table.insert(i, hash, Slot { key, order, at });
            }
        }
    }

    /// The column of the ordering value when versions are ordered by it
    /// (event-time ordering), as an index into the meta-first schema.
    pub(crate) fn event_time_ordering(&self) -> Option<usize> {
        self.ordering.filter(|_| self.event_time)
    }

    /// Whether versions are ordered by several ordering fields, which
    /// only whole rows carry (the key-first merge reads one).
    pub(crate) fn several_ordering_fields(&self) -> bool {
        self.event_time && self.ordering_cols.len() > 1
    }

    /// Bytes of a key index sized for `keys` keys at once.
    pub(crate) fn index_bytes_for(keys: usize) -> usize {
        KeyIndex::<Slot>::bytes_for(keys)
    }

    /// Sizes an empty index for `keys` keys, so that it does not grow (and
    /// rehash) step by step; a no-op once the index holds keys.
    pub(crate) fn expect_keys(&mut self, keys: usize) {
        if self.table.is_empty() {
            self.table.reserve(keys);
        }
    }

    /// Starts the memory reads of the lookups of `hashes` (see
    /// [`KeyIndex::touch`]).
    #[inline]
    fn touch(&self, hashes: &[u64]) {
        let touched = hashes.iter().fold(0, |t, h| t ^ self.table.touch(*h));
        std::hint::black_box(touched);
    }

    /// Merges the versions gathered in `batch` (in their order), and
    /// empties it. The keys' hashes are all computed, and the index slots
    /// they start probing at read, before the first lookup, so the lookups'
    /// cache misses overlap.
    pub(crate) fn push_batch(&mut self, batch: &mut KeyBatch) {
        use std::hash::BuildHasher;
        batch.hashes.clear();
        let mut start = 0;
        for v in &batch.versions {
            batch.hashes.push(self.hasher.hash_one(&batch.keys[start..v.0]));
            start = v.0;
        }
        self.touch(&batch.hashes);
        let mut start = 0;
        for (v, hash) in batch.versions.drain(..).zip(&batch.hashes) {
            self.apply_hashed(&batch.keys[start..v.0], *hash, v.1, v.2, false);
            start = v.0;
        }
        batch.keys.clear();
    }

    /// Merges the keys of `keys` (with their `ordering` values), whose rows
    /// are rows `first_row..` of source `source`.
    pub(crate) fn push_keys(
        &mut self,
        keys: &ArrayRef,
        ordering: Option<&ArrayRef>,
        source: usize,
        first_row: usize,
    ) -> Result<()> {
        let keys = keys.as_string_opt::<i32>().ok_or_else(|| Error::Internal {
            what: "merge input".into(),
            reason: "_hoodie_record_key is not a string column".into(),
        })?;
        use std::hash::BuildHasher;
        let order_column = ordering.map(OrderColumn::of);
        let order_nulls = ordering.and_then(|c| c.logical_nulls());
        // Hashes a chunk at a time, so the lookups overlap (see `push_batch`).
        let mut hashes = [0u64; KeyBatch::LEN];
        for chunk in (0..keys.len()).step_by(KeyBatch::LEN) {
            let rows = chunk..keys.len().min(chunk + KeyBatch::LEN);
            for r in rows.clone() {
                hashes[r - chunk] = self.hasher.hash_one(keys.value(r).as_bytes());
            }
            self.touch(&hashes[..rows.len()]);
            for r in rows {
                if keys.is_null(r) {
                    continue;
                }
                let order = match &order_column {
                    Some(c) => c.at(order_nulls.as_ref(), r),
                    None => Ord2::Null,
                };
                let at = row_at(source, first_row + r);
                self.apply_hashed(keys.value(r).as_bytes(), hashes[r - chunk], order, at, false);
            }
        }
        Ok(())
    }

    /// Merges the next version in write order.
    pub(crate) fn push(&mut self, v: &Version) -> Result<()> {
        match v {
            Version::Rows(b) | Version::Partial { batch: b, .. } => {
                let ordering = match self.event_time {
                    true => tributary_format::ordering_column_of(b, &self.ordering_cols),
                    false => None,
                };
                self.push_keys(b.column(RECORD_KEY), ordering.as_ref(), self.batches.len(), 0)?;
                self.batch_bytes += b.get_array_memory_size();
                self.batches.push(b.clone());
            }
            Version::Deletes(ds) => {
                for d in ds {
                    self.apply(
                        d.key.as_bytes(),
                        Ord2::from_delete(&d.ordering),
                        DELETED,
                        is_unconditional(&d.ordering),
                    );
                }
            }
        }
        Ok(())
    }

    /// The tombstones of the keys a delete won (see [`crate::tombstone`]);
    /// none under commit-time ordering, where a later write always wins.
    pub(crate) fn tombstones(&self) -> Vec<Tombstone> {
        if !self.event_time {
            return Vec::new();
        }
        self.table
            .iter()
            .filter(|s| s.at == DELETED)
            .filter_map(|s| Tombstone::of(s.key.bytes(&self.arena), &s.order))
            .collect()
    }

    /// The surviving rows, sorted by record key with `by_key`, else in
    /// write order; `None` when none survive.
    pub(crate) fn finish(self, by_key: bool) -> Result<Option<RecordBatch>> {
        let indices = self.survivors(by_key);
        if indices.is_empty() {
            return Ok(None);
        }
        self.gather(indices)
    }

    /// [`RowMerger::finish`] in batches of at most `rows` rows, gathered as
    /// they are pulled, so the surviving rows are never copied all at once.
    pub(crate) fn finish_in_batches(self, by_key: bool, rows: usize) -> Survivors {
        let indices = self.survivors(by_key);
        Survivors { merger: self, indices, next: 0, rows: rows.max(1) }
    }

    /// Where the surviving rows are, in key order with `by_key`, else in
    /// write order.
    fn survivors(&self, by_key: bool) -> Vec<(usize, usize)> {
        let live = self.table.iter().filter(|s| s.at != DELETED);
        if by_key {
            // By key prefix, and by the whole key where prefixes tie.
            let arena = &self.arena;
            let mut picks: Vec<(u128, KeyRef, RowAt)> = live.map(|s| (s.key.prefix(arena), s.key, s.at)).collect();
            picks.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.bytes(arena).cmp(b.1.bytes(arena))));
            picks.iter().map(|p| row_of(p.2)).collect()
        } else {
            let mut picks: Vec<RowAt> = live.map(|s| s.at).collect();
            picks.sort_unstable();
            picks.into_iter().map(row_of).collect()
        }
    }
}

/// The surviving rows of a merge, a batch at a time: see
/// [`RowMerger::finish_in_batches`].
pub(crate) struct Survivors {
    merger: RowMerger,
    indices: Vec<(usize, usize)>,
    next: usize,
    rows: usize,
}

impl Iterator for Survivors {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        let end = self.indices.len().min(self.next + self.rows);
        let part = self.indices.get(self.next..end).filter(|p| !p.is_empty())?.to_vec();
        self.next = end;
        self.merger.gather(part).transpose()
    }
}
