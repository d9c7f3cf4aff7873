//! Partition folders and their `.hoodie_partition_metadata` files.

use crate::error::{Error, Result};
use crate::fs_view::PARTITION_METADATA;
use crate::instant::InstantTime;
use crate::location::TableLocation;

/// Makes sure `partition` (relative, `""` for the table root) holds a
/// `.hoodie_partition_metadata`, creating it with `commit` as its commit
/// time. Safe to call concurrently: the first creator wins, others find it.
pub async fn ensure_partition(loc: &TableLocation, partition: &str, commit: &InstantTime) -> Result<()> {
    let depth = partition.split('/').filter(|s| !s.is_empty()).count();
    let path = loc.join(partition).clone().join(PARTITION_METADATA);
    let text = format!("#partition metadata\ncommitTime={commit}\npartitionDepth={depth}\n");
    match loc.create(&path, text.into_bytes()).await {
        Ok(()) | Err(Error::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}
