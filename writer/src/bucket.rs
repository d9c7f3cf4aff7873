//! Record key → bucket routing.
//!
//! - [`BucketHash::Murmur3`] (default): `murmur3_x86_32(utf8(key), seed 0)`,
//!   masked to 31 bits (non-negative), `mod N`.
//! - [`BucketHash::HudiJava`]: Hudi's Java rule for a simple record key,
//!   `(List.of(key).hashCode() & Integer.MAX_VALUE) % N`, where `List.hashCode`
//!   is `31 + String.hashCode` over UTF-16 code units. Use it for tables shared
//!   with Hudi's Java writers. (Hudi 1.0.x also split simple keys containing
//!   `,`; newer versions do not, and neither do we.)

use tributary_timeline::{BucketHash, BucketSpec, nbcc_file_id};

/// Maps record keys to buckets and buckets to file ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketIndex {
    num_buckets: u32,
    hash: BucketHash,
}

/// Java's `String.hashCode`: `h = 31 * h + c` over UTF-16 code units, wrapping.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

impl BucketIndex {
    /// An index over `spec.num_buckets` buckets (at least 1).
    pub fn new(spec: BucketSpec) -> Self {
        Self { num_buckets: spec.num_buckets.max(1), hash: spec.hash }
    }

    /// Number of buckets.
    pub fn num_buckets(&self) -> u32 {
        self.num_buckets
    }

    /// The raw 31-bit hash of `key`.
    pub fn hash(&self, key: &str) -> u32 {
        match self.hash {
            BucketHash::Murmur3 => {
                // Reading from a byte slice cannot fail.
                let h = murmur3::murmur3_32(&mut std::io::Cursor::new(key.as_bytes()), 0).unwrap_or_default();
                h & 0x7fff_ffff
            }
            BucketHash::HudiJava => {
                let list_hash = 31i32.wrapping_add(java_string_hash(key));
                (list_hash & i32::MAX) as u32
            }
        }
    }

    /// The bucket of `key`.
    pub fn bucket(&self, key: &str) -> u32 {
        self.hash(key) % self.num_buckets
    }

    /// Buckets of many keys at once, written into `out` (cleared first), so a
    /// batch is routed with one reused buffer.
    pub fn route<'a>(&self, keys: impl IntoIterator<Item = &'a str>, out: &mut Vec<u32>) {
        out.clear();
        out.extend(keys.into_iter().map(|k| self.bucket(k)));
    }

    /// The file id of `bucket`: the NBCC id `{bucket:08}-0000-0000-0000-000000000000-0`.
    pub fn file_id(bucket: u32) -> String {
        nbcc_file_id(bucket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn index(n: u32, hash: BucketHash) -> BucketIndex {
        BucketIndex::new(BucketSpec { num_buckets: n, hash })
    }

    /// Vectors from the format notes (§4), computed from Hudi's Java algorithm.
    #[test]
    fn hudi_java_matches_the_reference_vectors() {
        for (key, string_hash, list_hash, b4, b256) in [
            ("334e26e9-8355-45cc-97c6-c31daf0df330", 1_880_221_124, 1_880_221_155u32, 3, 227),
            ("id1", 104_054, 104_085, 1, 149),
            ("a", 97, 128, 0, 128),
        ] {
            assert_eq!(java_string_hash(key), string_hash, "{key}");
            assert_eq!(index(4, BucketHash::HudiJava).hash(key), list_hash, "{key}");
            assert_eq!(index(4, BucketHash::HudiJava).bucket(key), b4, "{key}");
            assert_eq!(index(256, BucketHash::HudiJava).bucket(key), b256, "{key}");
        }
        // Non-BMP characters hash as two UTF-16 code units, as in Java.
        assert_eq!(java_string_hash("😀"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn murmur3_matches_reference_values() {
        // murmur3_x86_32 reference values (seed 0).
        let raw = |s: &str| murmur3::murmur3_32(&mut std::io::Cursor::new(s.as_bytes()), 0).unwrap();
        assert_eq!(raw(""), 0);
        assert_eq!(raw("hello"), 0x248b_fa47);
        assert_eq!(raw("The quick brown fox jumps over the lazy dog"), 0x2e4f_f723);
        let idx = index(16, BucketHash::Murmur3);
        assert_eq!(idx.bucket("hello"), (0x248b_fa47 & 0x7fff_ffff) % 16);
        assert_eq!(BucketIndex::file_id(7), "00000007-0000-0000-0000-000000000000-0");
    }

    proptest! {
        #[test]
        fn buckets_are_in_range_and_batch_routing_agrees(keys in prop::collection::vec(".{0,40}", 0..64), n in 1u32..1024, java in any::<bool>()) {
            let idx = index(n, if java { BucketHash::HudiJava } else { BucketHash::Murmur3 });
            let mut out = vec![99; 3];
            idx.route(keys.iter().map(String::as_str), &mut out);
            prop_assert_eq!(out.len(), keys.len());
            for (k, b) in keys.iter().zip(&out) {
                prop_assert!(*b < n);
                prop_assert_eq!(*b, idx.bucket(k));
            }
        }
    }
}
