//! Partition folders and their `.hoodie_partition_metadata` files.

use object_store::ObjectStoreExt;

use crate::StorageError;
use crate::error::{Error, Result};
use crate::instant::InstantTime;
use crate::layout::PARTITION_METADATA;
use tributary_storage::TableLocation;

/// Makes sure `partition` (relative, `""` for the table root) holds a
/// `.hoodie_partition_metadata`, creating it with `commit` as its commit
/// time. Safe to call concurrently: the first creator wins, others find it.
pub async fn ensure_partition(loc: &TableLocation, partition: &str, commit: &InstantTime) -> Result<()> {
    let depth = partition.split('/').filter(|s| !s.is_empty()).count();
    let path = loc.join(partition).clone().join(PARTITION_METADATA);
    // Usually it exists: one HEAD, where a create would be refused and then
    // read back.
    match loc.store.head(&path).await {
        Ok(_) => return Ok(()),
        Err(object_store::Error::NotFound { .. }) => {}
        Err(e) => return Err(Error::store("head", &path, e)),
    }
    let text = format!("#partition metadata\ncommitTime={commit}\npartitionDepth={depth}\n");
    match loc.create(&path, text.into_bytes()).await {
        Ok(()) | Err(StorageError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
