//! The bucket index stored in the table: [`BucketSpec`] and the hash
//! ([`BucketHash`]) that maps a record key to a bucket.

/// Which hash maps a record key to a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BucketHash {
    /// `murmur3_x86_32(utf8(key), seed 0) mod N`, over the whole
    /// `_hoodie_record_key` (for a composite key, the `field:value,...` text).
    #[default]
    Murmur3,
    /// Hudi's Java rule: `(values.hashCode() & i32::MAX) % N`, where
    /// `values` is the Java `List<String>` of the key (one field) or of the
    /// key fields' values (a composite key).
    HudiJava,
}

impl BucketHash {
    /// The config value.
    pub fn name(self) -> &'static str {
        match self {
            BucketHash::Murmur3 => "murmur3",
            BucketHash::HudiJava => "hudi-java",
        }
    }

    /// Parses a config value.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "murmur3" => Some(BucketHash::Murmur3),
            "hudi-java" => Some(BucketHash::HudiJava),
            _ => None,
        }
    }
}

/// Bucket-index settings stored in the table so every writer agrees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketSpec {
    /// Number of buckets (file groups) per partition.
    pub num_buckets: u32,
    /// Key-to-bucket hash.
    pub hash: BucketHash,
}
