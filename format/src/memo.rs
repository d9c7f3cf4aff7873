//! Process-wide memos of what is derived from schema text and small files.
//!
//! A table's files carry a handful of schemas over thousands of files and
//! blocks (each log block and each Avro timeline file holds its schema as
//! JSON), and parsing one costs more than decoding a small block. So what a
//! schema text parses to is kept once per process, keyed by the exact text;
//! past [`KEPT`] texts, or [`KEPT_BYTES`] of them, a memo starts over,
//! which bounds it.
//!
//! What is parsed from small files that every read takes again (the
//! timeline's `hoodie.properties`, commit metadata) is kept here too: one
//! memo, keyed by content, so a changed file is a new key and never a stale
//! answer.
//!
//! So are the decoded rows of small base files and small log blocks (the
//! merge crate's readers), in memos bounded by the bytes of their keys and
//! their values ([`Memo::weighed`]): until the next compaction, every
//! snapshot read takes the same logs and base files of the latest slices
//! again.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use foldhash::fast::FixedState;

/// Texts kept per memo at most.
pub(crate) const KEPT: usize = 256;

/// Bytes of texts kept per memo at most.
pub(crate) const KEPT_BYTES: usize = 16 << 20;

/// A memo of values derived from texts (or bytes), keyed by the exact
/// content; at most `KEPT` entries and `KEPT_BYTES` of keys unless
/// made with other bounds ([`Memo::bounded`], [`Memo::weighed`]).
pub struct Memo<V> {
    kept: Mutex<Kept<V>>,
    entries: usize,
    bytes: usize,
    /// The bytes a value holds, counted with its key's.
    weigh: fn(&V) -> usize,
}

/// A memo's entries and the bytes they hold.
struct Kept<V> {
    map: HashMap<Box<[u8]>, V, FixedState>,
    bytes: usize,
}

impl<V: Clone> Default for Memo<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Clone> Memo<V> {
    /// An empty memo.
    pub const fn new() -> Self {
        Self::bounded(KEPT, KEPT_BYTES)
    }

    /// An empty memo of at most `entries` values and `key_bytes` of keys,
    /// for values no larger than their keys.
    pub const fn bounded(entries: usize, key_bytes: usize) -> Self {
        Self::weighed(entries, key_bytes, |_| 0)
    }

    /// An empty memo of at most `entries` values and `bytes` of keys and
    /// values, a value counting as `weigh` says: for values that may be
    /// larger than their keys (decoded rows).
    pub const fn weighed(entries: usize, bytes: usize, weigh: fn(&V) -> usize) -> Self {
        Self {
            kept: Mutex::new(Kept { map: HashMap::with_hasher(FixedState::with_seed(0)), bytes: 0 }),
            entries,
            bytes,
            weigh,
        }
    }

    /// The value of `key`, made by `make` unless kept. `make` runs without
    /// the memo locked.
    pub fn get_or(&self, key: &[u8], make: impl FnOnce() -> V) -> V {
        if let Some(v) = self.kept.lock().unwrap_or_else(PoisonError::into_inner).map.get(key) {
            return v.clone();
        }
        let v = make();
        let size = key.len().saturating_add((self.weigh)(&v));
        if size > self.bytes {
            return v;
        }
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.map.len() >= self.entries || kept.bytes + size > self.bytes {
            kept.map.clear();
            kept.bytes = 0;
        }
        if kept.map.insert(key.into(), v.clone()).is_none() {
            kept.bytes += size;
        }
        v
    }
}

impl<V: Clone> Memo<Option<V>> {
    /// The value `make` gives for `key`, kept when `make` succeeds. A
    /// failure keeps no error: `make` runs again for it, so the error names
    /// what this caller names (a file's path), not what an earlier one did.
    pub fn get_or_try<E>(&self, key: &[u8], make: impl Fn() -> Result<V, E>) -> Result<V, E> {
        match self.get_or(key, || make().ok()) {
            Some(v) => Ok(v),
            None => make(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_made_once_per_text_and_the_memo_stays_bounded() {
        let memo: Memo<usize> = Memo::new();
        let mut made = 0;
        for _ in 0..3 {
            assert_eq!(
                memo.get_or(b"abc", || {
                    made += 1;
                    3
                }),
                3
            );
        }
        assert_eq!(made, 1);
        for i in 0..KEPT * 2 {
            memo.get_or(i.to_string().as_bytes(), || i);
        }
        assert!(memo.kept.lock().unwrap().map.len() <= KEPT);
        // Large keys count by their bytes.
        let big = vec![7u8; KEPT_BYTES / 3];
        for i in 0..8u8 {
            let mut key = big.clone();
            key[0] = i;
            memo.get_or(&key, || 0);
        }
        let kept = memo.kept.lock().unwrap();
        assert!(kept.bytes <= KEPT_BYTES && kept.map.len() <= 3);
    }

    #[test]
    fn failures_are_made_again_and_not_kept() {
        let memo: Memo<Option<usize>> = Memo::new();
        let made = std::cell::Cell::new(0);
        let fail = || -> Result<usize, String> {
            made.set(made.get() + 1);
            Err(format!("attempt {}", made.get()))
        };
        // Made once to learn it fails, once more for its error.
        assert_eq!(memo.get_or_try(b"k", fail), Err("attempt 2".to_string()));
        assert_eq!(memo.get_or_try(b"k", fail), Err("attempt 3".to_string()));
        assert_eq!(memo.get_or_try(b"ok", || Ok::<_, String>(4)), Ok(4));
        assert_eq!(memo.get_or_try(b"ok", || Err::<usize, _>("not asked")), Ok(4));
    }

    #[test]
    fn a_bounded_memo_keeps_its_own_bounds() {
        let memo: Memo<usize> = Memo::bounded(4, 10);
        for i in 0..9usize {
            memo.get_or(&[i as u8; 3], || i);
            let kept = memo.kept.lock().unwrap();
            assert!(kept.map.len() <= 3 && kept.bytes <= 10, "{} entries, {} bytes", kept.map.len(), kept.bytes);
        }
        // A key past the bound is answered and not kept.
        let mut made = 0;
        for _ in 0..2 {
            memo.get_or(&[9; 11], || {
                made += 1;
                0
            });
        }
        assert_eq!(made, 2);
        // A kept key is answered from the memo.
        memo.get_or(&[1; 2], || 5);
        assert_eq!(memo.get_or(&[1; 2], || 6), 5);
    }

    #[test]
    fn a_weighed_memo_counts_its_values() {
        let memo: Memo<Vec<u8>> = Memo::weighed(100, 100, Vec::len);
        for i in 0..20u8 {
            memo.get_or(&[i], || vec![i; 30]);
            let kept = memo.kept.lock().unwrap();
            assert!(kept.bytes <= 100 && kept.map.len() <= 3, "{} entries, {} bytes", kept.map.len(), kept.bytes);
        }
        // A value past the bound on its own is answered and not kept.
        let mut made = 0;
        for _ in 0..2 {
            memo.get_or(b"big", || {
                made += 1;
                vec![0; 100]
            });
        }
        assert_eq!(made, 2);
        assert_eq!(memo.get_or(&[19], Vec::new), vec![19; 30], "the last value is kept");
    }
}
