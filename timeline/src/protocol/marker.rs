//! Write markers: `.hoodie/.temp/<t>/<partition>/<file>.marker.<type>`.
//!
//! Before an instant creates a data file it creates the file's marker, so
//! the markers of an instant that never completes name every file it may
//! have written. Completing an instant deletes its markers; rolling one back
//! deletes the files they name, then the markers.

use futures::TryStreamExt;
use object_store::path::Path;

use crate::StorageError;
use crate::error::{Error, Result};
use crate::instant::InstantTime;
use tributary_storage::{TableLocation, join_relative};

/// The marker type of a new log file (Hudi's `IOType.APPEND`).
pub const MARKER_APPEND: &str = "APPEND";
/// The marker type of a new base file (Hudi's `IOType.CREATE`).
pub const MARKER_CREATE: &str = "CREATE";

/// `.hoodie/.temp/<t>`: the folder of instant `t`'s markers.
pub fn marker_dir(loc: &TableLocation, instant: &InstantTime) -> Path {
    crate::layout::marker_dir(&loc.root, instant)
}

/// The marker of data file `name` in `partition` (`""` when unpartitioned)
/// written by instant `t`, of type `kind` ([`MARKER_APPEND`] or [`MARKER_CREATE`]).
pub(crate) fn marker_path(loc: &TableLocation, instant: &InstantTime, partition: &str, name: &str, kind: &str) -> Path {
    join_relative(&marker_dir(loc, instant), partition).join(format!("{name}.marker.{kind}"))
}

/// Creates the marker of data file `name` before the file is written.
pub async fn create_marker(
    loc: &TableLocation,
    instant: &InstantTime,
    partition: &str,
    name: &str,
    kind: &str,
) -> Result<()> {
    // A retried flush finds its marker already there.
    match loc.create(&marker_path(loc, instant, partition, name, kind), Vec::new()).await {
        Ok(()) | Err(StorageError::AlreadyExists { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Every marker of instant `t`.
pub async fn list_markers(loc: &TableLocation, instant: &InstantTime) -> Result<Vec<Path>> {
    let dir = marker_dir(loc, instant);
    loc.store.list(Some(&dir)).map_ok(|m| m.location).try_collect().await.map_err(|e| Error::store("list", &dir, e))
}

/// The data file a marker of instant `t` names, as `(partition, file name)`;
/// `None` for an object that is not a marker.
pub fn marked_file(loc: &TableLocation, instant: &InstantTime, marker: &Path) -> Option<(String, String)> {
    let dir = marker_dir(loc, instant);
    let rel: Vec<String> = marker.prefix_match(&dir)?.map(|p| p.as_ref().to_string()).collect();
    let (name, partition) = rel.split_last()?;
    let (file, _) = name.rsplit_once(".marker.")?;
    Some((partition.join("/"), file.to_string()))
}

/// Deletes instant `t`'s markers once what they name is committed.
pub async fn remove_markers(loc: &TableLocation, instant: &InstantTime) -> Result<()> {
    let markers = list_markers(loc, instant).await?;
    delete_all(loc, &markers).await
}

/// Deletes the data files an uncompleted instant wrote, as named by its
/// markers, then the markers. Returns the data files deleted.
pub async fn rollback_files(loc: &TableLocation, instant: &InstantTime) -> Result<Vec<Path>> {
    let markers = list_markers(loc, instant).await?;
    let data: Vec<Path> = markers
        .iter()
        .filter_map(|m| marked_file(loc, instant, m))
        .map(|(partition, file)| join_relative(&loc.root, &partition).join(file))
        .collect();
    delete_all(loc, &data).await?;
    delete_all(loc, &markers).await?;
    Ok(data)
}

async fn delete_all(loc: &TableLocation, paths: &[Path]) -> Result<()> {
    Ok(tributary_storage::delete_all_if_exist(loc, paths.iter().cloned()).await?)
}

/// Removes what the writers of the completed `instants` may have left (a
/// writer killed after its commit completed, before it tidied up): their
/// markers and heartbeat files. One listing of the marker folder and one of
/// the heartbeat folder, not one per instant.
pub async fn remove_leftovers(loc: &TableLocation, instants: &[InstantTime]) -> Result<()> {
    let marked: std::collections::BTreeSet<Path> =
        list_folder(loc, crate::layout::temp_dir(&loc.root)).await?.common_prefixes.into_iter().collect();
    for t in instants.iter().filter(|t| marked.contains(&marker_dir(loc, t))) {
        remove_markers(loc, t).await?;
    }
    let beating: std::collections::BTreeSet<Path> = list_folder(loc, crate::layout::heartbeat_dir(&loc.root))
        .await?
        .objects
        .into_iter()
        .map(|m| m.location)
        .collect();
    let beats = instants.iter().map(|t| crate::layout::heartbeat_file(&loc.root, t)).filter(|p| beating.contains(p));
    Ok(tributary_storage::delete_all_if_exist(loc, beats).await?)
}

async fn list_folder(loc: &TableLocation, dir: Path) -> Result<object_store::ListResult> {
    loc.store.list_with_delimiter(Some(&dir)).await.map_err(|e| Error::store("list", &dir, e))
}
