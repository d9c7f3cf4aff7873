//! Shared test fixtures of the compaction crate.

use std::sync::Arc;

use object_store::memory::InMemory;
use object_store::path::Path;
use tributary_timeline::{BucketHash, BucketSpec, NewTableConfig, TableConfig, TableLocation};

/// An empty partitioned table (`city`, 2 buckets) in an in-memory store.
pub(crate) async fn memory_table() -> (TableLocation, TableConfig) {
    let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("warehouse/t"));
    let config = TableConfig::new_table(&NewTableConfig {
        partition_field: Some("city".into()),
        bucket: BucketSpec { num_buckets: 2, hash: BucketHash::Murmur3 },
        ..NewTableConfig::new("t", "id", "ts", "{}")
    });
    let text = config.to_properties_text("test").expect("properties");
    loc.create(&tributary_timeline::properties_file(&loc.root), text.into_bytes()).await.expect("create properties");
    (loc, config)
}
