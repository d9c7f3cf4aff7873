//! The open batch: the values consumed since the last commit, one after
//! another in one buffer, each with its position and, when the record key
//! comes from the message key, that key.

use std::collections::HashMap;

use tokio::time::Instant;

use crate::context::Partition;

/// A record's topic, partition and offset.
pub(crate) type Position = (Partition, i64);

/// One value of the batch.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// Where the value ends in [`Batch::data`] (it starts where the one
    /// before ends).
    end: usize,
    /// Its position.
    pub(crate) at: Position,
    /// Its message key, kept when the record key comes from it.
    pub(crate) key: Option<Vec<u8>>,
}

/// Values consumed since the last commit.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// The values one after another, as the value format keeps them
    /// (`crate::values`).
    data: Vec<u8>,
    entries: Vec<Entry>,
    /// The next offset of each partition the batch holds (tombstones and
    /// left-out records included).
    pub(crate) ends: HashMap<Partition, i64>,
    /// When its first record was consumed.
    pub(crate) first_at: Option<Instant>,
}

impl Batch {
    /// Whether a partition advanced: something to commit (if only the
    /// offsets past tombstones and left-out records).
    pub(crate) fn advances(&self) -> bool {
        !self.ends.is_empty()
    }

    /// No values held.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Values held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Bytes of values held.
    pub(crate) fn bytes(&self) -> usize {
        self.data.len()
    }

    /// The whole buffer.
    pub(crate) fn data(&self) -> &[u8] {
        &self.data
    }

    /// The values' entries, in order.
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Value number `i`.
    pub(crate) fn value(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.entries[i - 1].end };
        &self.data[start..self.entries[i].end]
    }

    /// Notes that `at`'s partition advanced past it (its record is held,
    /// skipped or left out).
    pub(crate) fn advance(&mut self, at: &Position) {
        self.ends.insert(at.0.clone(), at.1 + 1);
        self.first_at.get_or_insert_with(Instant::now);
    }

    /// Appends a value, written by `fill` into the buffer's end.
    pub(crate) fn push(&mut self, at: Position, key: Option<Vec<u8>>, fill: impl FnOnce(&mut Vec<u8>)) {
        fill(&mut self.data);
        self.entries.push(Entry { end: self.data.len(), at, key });
    }

    /// A batch of value `i` alone (to find which values are bad).
    pub(crate) fn single(&self, i: usize) -> Batch {
        let mut one = Batch::default();
        let entry = &self.entries[i];
        one.push(entry.at.clone(), entry.key.clone(), |d| d.extend_from_slice(self.value(i)));
        one
    }

    /// Keeps the values for which `keep` holds; the partitions' ends stay.
    pub(crate) fn retain(&mut self, keep: &[bool]) {
        let mut kept = Batch { ends: std::mem::take(&mut self.ends), first_at: self.first_at, ..Batch::default() };
        for (i, entry) in self.entries.iter().enumerate() {
            if keep[i] {
                kept.push(entry.at.clone(), entry.key.clone(), |d| d.extend_from_slice(self.value(i)));
            }
        }
        *self = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_cut_where_they_end() {
        let mut b = Batch::default();
        let at = |o: i64| (("t".to_string(), 0), o);
        for (o, v) in [(0, "a\n"), (1, "bc\n"), (2, "def\n")] {
            b.advance(&at(o));
            b.push(at(o), None, |d| d.extend_from_slice(v.as_bytes()));
        }
        assert_eq!((b.len(), b.bytes()), (3, 9));
        assert_eq!(b.value(1), b"bc\n");
        assert_eq!(b.single(2).data(), b"def\n");
        b.retain(&[true, false, true]);
        assert_eq!(b.data(), b"a\ndef\n");
        assert_eq!(b.entries()[1].at, at(2));
        assert_eq!(b.ends[&("t".to_string(), 0)], 3);
    }
}
