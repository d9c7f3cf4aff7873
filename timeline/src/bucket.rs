//! Record key → bucket routing. Every version of a key (update or delete)
//! has the same `_hoodie_record_key`, built by one rule
//! ([`tributary_format::key`]), so it always lands in the same bucket.
//!
//! - [`BucketHash::Murmur3`] (default): `murmur3_x86_32(utf8(key), seed 0)`,
//!   masked to 31 bits (non-negative), `mod N`, where `key` is the whole
//!   `_hoodie_record_key`: for a composite key the `field:value,...` text,
//!   so the field names and the declared field order are part of the hash.
//! - [`BucketHash::HudiJava`]: Hudi's Java rule,
//!   `(values.hashCode() & Integer.MAX_VALUE) % N`, where `values` is a Java
//!   `List<String>`: `[key]` for a single-field key; for a composite key the
//!   key fields' values in declared order (Hudi's default
//!   `hoodie.bucket.index.hash.field` is the record key fields), a null
//!   value (written `__null__`) as a null element and an empty one
//!   (`__empty__`) as `""` ([`Keys::hash_values`]). `List.hashCode` is
//!   `h = 1; h = 31 * h + element hash` in wrapping 32-bit arithmetic, a null
//!   element hashing to 0 and a string by `String.hashCode` (`h = 31 * h + c`
//!   over UTF-16 code units); for one element that is `31 + String.hashCode`.
//!   Use it for tables shared with Hudi's Java writers. (Hudi 1.0.x also
//!   split simple keys containing `,`, and composite values containing `,`;
//!   newer versions do not, and neither do we.)

use crate::{BucketHash, BucketSpec, nbcc_file_id};
use tributary_format::Keys;

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

/// Java's `List<String>.hashCode` of `values` (`None` is a null element),
/// masked to 31 bits as Hudi's bucket rule masks it.
fn java_list_hash<'a>(values: impl IntoIterator<Item = Option<&'a str>>) -> u32 {
    let h = values.into_iter().fold(1i32, |h, v| h.wrapping_mul(31).wrapping_add(v.map_or(0, java_string_hash)));
    (h & i32::MAX) as u32
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

    /// The raw 31-bit hash of a single-field key `key`.
    pub fn hash(&self, key: &str) -> u32 {
        match self.hash {
            BucketHash::Murmur3 => murmur3_31(key),
            BucketHash::HudiJava => java_list_hash([Some(key)]),
        }
    }

    /// The bucket of a single-field key `key`.
    pub fn bucket(&self, key: &str) -> u32 {
        self.hash(key) % self.num_buckets
    }

    /// The bucket of row `row` of `keys` (single-field or composite).
    pub fn bucket_of(&self, keys: &Keys, row: usize) -> u32 {
        let h = match self.hash {
            BucketHash::Murmur3 => murmur3_31(keys.keys().value(row)),
            BucketHash::HudiJava => java_list_hash(keys.hash_values(row)),
        };
        h % self.num_buckets
    }

    /// The buckets of every row of `keys`, written into `out` (cleared
    /// first), so a batch is routed with one reused buffer.
    pub fn route(&self, keys: &Keys, out: &mut Vec<u32>) {
        out.clear();
        out.extend((0..keys.len()).map(|r| self.bucket_of(keys, r)));
    }

    /// The file id of `bucket`: the NBCC id `{bucket:08}-0000-0000-0000-000000000000-0`.
    pub fn file_id(bucket: u32) -> String {
        nbcc_file_id(bucket)
    }
}

/// `murmur3_x86_32(utf8(key), seed 0)`, masked to 31 bits.
fn murmur3_31(key: &str) -> u32 {
    // Reading from a byte slice cannot fail.
    murmur3::murmur3_32(&mut std::io::Cursor::new(key.as_bytes()), 0).unwrap_or_default() & 0x7fff_ffff
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

    /// Composite keys hash the Java `List` of their values. Expected list
    /// hashes: the first two by hand (`[a, null]`: `31 * (31 + 97) + 0`;
    /// `["", b]`: `31 * (31 + 0) + 98`), all of them printed by Java 17's
    /// `Arrays.asList(...).hashCode()` in `jshell`.
    #[test]
    fn hudi_java_hashes_composite_values_as_a_java_list() {
        for (values, java) in [
            (&[Some("a"), None][..], 3_968),
            (&[Some(""), Some("b")][..], 1_059),
            (&[None, None, Some("x")][..], 29_911),
            (&[Some("1"), Some("2020-02-22"), Some("1")][..], -214_025_753),
            (&[Some("1001"), Some("2017-10-01"), Some("7")][..], -1_911_400_592),
            (&[Some("zürich😀"), Some("42")][..], 887_182_558),
            (&[Some("-9223372036854775808"), Some("1970-01-01"), Some("-1")][..], -1_048_508_424),
        ] {
            assert_eq!(java_list_hash(values.iter().copied()), (java & i32::MAX) as u32, "{values:?}");
        }
        // Through the keys of a batch: user_id 1, 2020-02-22 (day 18314), group 1.
        let schema = tributary_format::TableSchema::new(
            r#"{"type":"record","name":"r","fields":[{"name":"user_id","type":"long"},
                {"name":"date","type":{"type":"int","logicalType":"date"}},{"name":"group_id","type":"int"}]}"#,
            &["user_id", "date", "group_id"],
            None,
            None,
        )
        .unwrap();
        let batch = arrow::array::RecordBatch::try_new(
            schema.arrow().clone(),
            vec![
                std::sync::Arc::new(arrow::array::Int64Array::from(vec![1, 1001])),
                std::sync::Arc::new(arrow::array::Date32Array::from(vec![18_314, 17_440])),
                std::sync::Arc::new(arrow::array::Int32Array::from(vec![1, 7])),
            ],
        )
        .unwrap();
        let keys = schema.record_key().build(&batch).unwrap();
        assert_eq!(keys.keys().value(0), "user_id:1,date:2020-02-22,group_id:1");
        let java = index(16, BucketHash::HudiJava);
        assert_eq!(java.bucket_of(&keys, 0), ((-214_025_753i32 & i32::MAX) as u32) % 16);
        assert_eq!(java.bucket_of(&keys, 1), ((-1_911_400_592i32 & i32::MAX) as u32) % 16);
        // murmur3 hashes the whole key text.
        let m = index(16, BucketHash::Murmur3);
        assert_eq!(m.bucket_of(&keys, 0), m.bucket("user_id:1,date:2020-02-22,group_id:1"));
    }

    proptest! {
        #[test]
        fn buckets_are_in_range_and_batch_routing_agrees(keys in prop::collection::vec(".{0,40}", 0..64), n in 1u32..1024, java in any::<bool>()) {
            let idx = index(n, if java { BucketHash::HudiJava } else { BucketHash::Murmur3 });
            let schema = tributary_format::TableSchema::new(
                r#"{"type":"record","name":"r","fields":[{"name":"k","type":"string"}]}"#, &["k"], None, None).unwrap();
            let batch = arrow::array::RecordBatch::try_new(
                schema.arrow().clone(),
                vec![std::sync::Arc::new(arrow::array::StringArray::from(keys.clone()))],
            ).unwrap();
            let built = schema.record_key().build(&batch).unwrap();
            let mut out = vec![99; 3];
            idx.route(&built, &mut out);
            prop_assert_eq!(out.len(), keys.len());
            for (k, b) in keys.iter().zip(&out) {
                prop_assert!(*b < n);
                prop_assert_eq!(*b, idx.bucket(k));
            }
        }
    }
}
