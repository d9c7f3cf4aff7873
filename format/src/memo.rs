//! Process-wide memos of what is derived from schema text.
//!
//! A table's files carry a handful of schemas over thousands of files and
//! blocks (each log block and each Avro timeline file holds its schema as
//! JSON), and parsing one costs more than decoding a small block. So what a
//! schema text parses to is kept once per process, keyed by the exact text;
//! past [`KEPT`] texts a memo starts over, which bounds it.
//!
//! The other crates keep what they derive from file contents here too (the
//! timeline its parsed `hoodie.properties`): one memo, keyed by content, so
//! a changed file is a new key and never a stale answer.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use foldhash::fast::FixedState;

/// Texts kept per memo at most.
pub const KEPT: usize = 256;

/// A memo of values derived from texts (or bytes), keyed by the exact
/// content; at most [`KEPT`] entries.
pub struct Memo<V> {
    map: Mutex<HashMap<Box<[u8]>, V, FixedState>>,
}

impl<V: Clone> Default for Memo<V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<V: Clone> Memo<V> {
    /// An empty memo.
    pub const fn new() -> Self {
        Self { map: Mutex::new(HashMap::with_hasher(FixedState::with_seed(0))) }
    }

    /// The value of `key`, made by `make` unless kept. `make` runs without
    /// the memo locked.
    pub fn get_or(&self, key: &[u8], make: impl FnOnce() -> V) -> V {
        if let Some(v) = self.map.lock().unwrap_or_else(PoisonError::into_inner).get(key) {
            return v.clone();
        }
        let v = make();
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if map.len() >= KEPT {
            map.clear();
        }
        map.insert(key.into(), v.clone());
        v
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
        assert!(memo.map.lock().unwrap().len() <= KEPT);
    }
}
