//! The merge's key index: an open-addressing table whose lookups can be
//! started ahead of time.
//!
//! A merge looks up every version's record key, and in a slice of a few
//! hundred thousand keys nearly every lookup misses the CPU caches: most of
//! a merge's index time is spent waiting on memory, one lookup after
//! another. General hash maps give no way to start the next lookups' memory
//! reads while one is pending. This table does: [`KeyIndex::touch`] reads
//! the slot a hash starts probing at, so a caller that knows the next few
//! dozen hashes touches them all first, and their cache misses overlap;
//! the lookups that follow then find their slots in cache.
//!
//! Slots are probed linearly from `hash >> shift`, and the table doubles
//! when it is half full. Entries are never removed (a merge only adds keys).
//! A stored hash is never 0, which marks an empty slot.

/// An open-addressing table of `T` by a 64-bit hash (see the module notes).
/// The caller compares keys: [`KeyIndex::probe`] takes the equality test.
#[derive(Debug, Clone)]
pub(crate) struct KeyIndex<T> {
    /// `(hash, value)`; hash 0 is an empty slot.
    slots: Vec<(u64, T)>,
    len: usize,
    /// `64 - log2(slots.len())`: a hash's first slot is `hash >> shift`.
    shift: u32,
}

/// Where [`KeyIndex::probe`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    /// The slot holding the key.
    Found(usize),
    /// The empty slot where the key belongs.
    Vacant(usize),
}

/// A hash as stored: never 0.
#[inline]
fn stored(hash: u64) -> u64 {
    hash | 1
}

impl<T: Default> Default for KeyIndex<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Default> KeyIndex<T> {
    /// Smallest table: 16 slots.
    const MIN_BITS: u32 = 4;

    /// An empty index.
    pub(crate) fn new() -> Self {
        Self::with_bits(Self::MIN_BITS)
    }

    fn with_bits(bits: u32) -> Self {
        let slots = std::iter::repeat_with(|| (0, T::default())).take(1 << bits).collect();
        Self { slots, len: 0, shift: 64 - bits }
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties it, keeping its slots.
    pub(crate) fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = (0, T::default()));
        self.len = 0;
    }

    /// Bytes of its slots.
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<(u64, T)>()
    }

    /// Grows the table so that `additional` more entries fit without a
    /// further resize.
    pub(crate) fn reserve(&mut self, additional: usize) {
        let want = Self::slots_for(self.len.saturating_add(additional));
        if want > self.slots.len() {
            self.resize(want.trailing_zeros());
        }
    }

    /// Bytes of the slots of an index of `entries` entries, sized for them
    /// at once.
    pub(crate) fn bytes_for(entries: usize) -> usize {
        Self::slots_for(entries).saturating_mul(std::mem::size_of::<(u64, T)>())
    }

    /// Slots for `entries` entries: at least twice as many, a power of two.
    fn slots_for(entries: usize) -> usize {
        entries.saturating_mul(2).max(1 << Self::MIN_BITS).checked_next_power_of_two().unwrap_or(usize::MAX)
    }

    fn resize(&mut self, bits: u32) {
        let old = std::mem::replace(self, Self::with_bits(bits));
        self.len = old.len;
        let mask = self.slots.len() - 1;
        for (hash, value) in old.slots.into_iter().filter(|s| s.0 != 0) {
            let mut i = (hash >> self.shift) as usize;
            while self.slots[i].0 != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = (hash, value);
        }
    }

    /// Reads the slot `hash` starts probing at and returns its stored hash
    /// (to be folded into a value the caller keeps alive): the read is what
    /// matters, as it brings the slot into cache for a lookup soon after.
    #[inline]
    pub(crate) fn touch(&self, hash: u64) -> u64 {
        self.slots[(stored(hash) >> self.shift) as usize].0
    }

    /// Finds the entry of `hash` for which `eq` holds, or the empty slot
    /// where it belongs.
    #[inline]
    pub(crate) fn probe(&self, hash: u64, mut eq: impl FnMut(&T) -> bool) -> Probe {
        let hash = stored(hash);
        let mask = self.slots.len() - 1;
        let mut i = (hash >> self.shift) as usize;
        loop {
            let (h, value) = &self.slots[i];
            if *h == 0 {
                return Probe::Vacant(i);
            }
            if *h == hash && eq(value) {
                return Probe::Found(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The entry in slot `i` (from [`Probe::Found`]).
    #[inline]
    pub(crate) fn get_mut(&mut self, i: usize) -> &mut T {
        &mut self.slots[i].1
    }

    /// Stores `value` for `hash` in the empty slot `i` (from
    /// [`Probe::Vacant`], with nothing inserted since).
    pub(crate) fn insert(&mut self, i: usize, hash: u64, value: T) {
        debug_assert_eq!(self.slots[i].0, 0, "slot {i} is empty");
        self.slots[i] = (stored(hash), value);
        self.len += 1;
        if self.len * 2 > self.slots.len() {
            self.resize(64 - self.shift + 1);
        }
    }

    /// The entries, in slot order (stable while nothing is inserted).
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().filter(|s| s.0 != 0).map(|s| &s.1)
    }

    /// The entries, mutably, in the order of [`KeyIndex::iter`].
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.slots.iter_mut().filter(|s| s.0 != 0).map(|s| &mut s.1)
    }
}

impl<T: Default> KeyIndex<T> {
    /// Finds the entry of `key` (hash `hash`) in an index whose entries hold
    /// their key as a [`KeyRef`] (`key_of`) into `arena`, or the empty slot
    /// where it belongs; with the key's in-place form, when it has one, for
    /// [`KeyRef::or_store`].
    #[inline]
    pub(crate) fn probe_key(
        &self,
        key: &[u8],
        hash: u64,
        arena: &[u8],
        key_of: impl Fn(&T) -> &KeyRef,
    ) -> (Probe, Option<KeyRef>) {
        let inline = KeyRef::inline(key);
        let probe = match inline {
            Some(k) => self.probe(hash, |s| *key_of(s) == k),
            None => self.probe(hash, |s| key_of(s).is_stored() && key_of(s).bytes(arena) == key),
        };
        (probe, inline)
    }
}

/// A record key in the index: up to [`KeyRef::INLINE`] bytes held in place
/// (the last byte is the length), a longer key as its place in the key
/// arena (the last byte is [`KeyRef::STORED`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct KeyRef([u8; 16]);

impl KeyRef {
    const INLINE: usize = 15;
    const STORED: u8 = 0xff;

    /// `key` held in place, when it is short enough.
    #[inline]
    pub(crate) fn inline(key: &[u8]) -> Option<Self> {
        (key.len() <= Self::INLINE).then(|| {
            let mut b = [0u8; 16];
            b[..key.len()].copy_from_slice(key);
            b[15] = key.len() as u8;
            Self(b)
        })
    }

    /// The key of `len` bytes at `start` in the arena.
    pub(crate) fn stored(start: usize, len: usize) -> Self {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&(start as u64).to_le_bytes());
        b[8..15].copy_from_slice(&(len as u64).to_le_bytes()[..7]);
        b[15] = Self::STORED;
        Self(b)
    }

    /// `key` as a new entry holds it: `inline` (its in-place form, from
    /// [`KeyIndex::probe_key`]), else appended to `arena`.
    #[inline]
    pub(crate) fn or_store(inline: Option<Self>, key: &[u8], arena: &mut Vec<u8>) -> Self {
        inline.unwrap_or_else(|| {
            arena.extend_from_slice(key);
            Self::stored(arena.len() - key.len(), key.len())
        })
    }

    pub(crate) fn is_stored(&self) -> bool {
        self.0[15] == Self::STORED
    }

    /// The key's bytes.
    #[inline]
    pub(crate) fn bytes<'a>(&'a self, arena: &'a [u8]) -> &'a [u8] {
        if self.is_stored() {
            let start = u64::from_le_bytes(self.0[..8].try_into().expect("8 bytes")) as usize;
            let mut len = [0u8; 8];
            len[..7].copy_from_slice(&self.0[8..15]);
            &arena[start..start + u64::from_le_bytes(len) as usize]
        } else {
            &self.0[..usize::from(self.0[15])]
        }
    }

    /// The key's first 16 bytes, zero-padded, as a number: keys whose
    /// prefixes differ order as their prefixes do.
    pub(crate) fn prefix(&self, arena: &[u8]) -> u128 {
        let key = self.bytes(arena);
        let mut b = [0u8; 16];
        let n = key.len().min(16);
        b[..n].copy_from_slice(&key[..n]);
        u128::from_be_bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    /// A poor hash, so that keys collide and probes wrap around.
    fn poor_hash(k: u16) -> u64 {
        u64::from(k % 13).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(k % 2)
    }

    proptest! {
        /// Upserts into the index read back like a map's, through growth,
        /// colliding hashes and probes that wrap around.
        #[test]
        fn index_upserts_like_a_map(ops in prop::collection::vec((0u16..300, any::<u32>()), 0..600), reserve in 0usize..50) {
            let mut index: KeyIndex<(u16, u32)> = KeyIndex::new();
            index.reserve(reserve);
            let mut model: HashMap<u16, u32> = HashMap::new();
            for (k, v) in ops {
                let hash = poor_hash(k);
                // Touching is a read only.
                let _ = index.touch(hash);
                match index.probe(hash, |e| e.0 == k) {
                    Probe::Found(i) => index.get_mut(i).1 = v,
                    Probe::Vacant(i) => index.insert(i, hash, (k, v)),
                }
                model.insert(k, v);
                prop_assert_eq!(index.len(), model.len());
            }
            let mut got: Vec<(u16, u32)> = index.iter().copied().collect();
            got.sort_unstable();
            let mut want: Vec<(u16, u32)> = model.into_iter().collect();
            want.sort_unstable();
            prop_assert_eq!(got, want);
            prop_assert!(index.slots.len() >= 2 * index.len());
        }
    }
}
