//! `hoodie.properties` on storage: reading it as Hudi's readers do, and
//! changing it with Hudi's fail-safe protocol.
//!
//! Hudi changes the file in place (`HoodieTableConfig.modify`), which it
//! guards with a second file, `hoodie.properties.backup`:
//!
//! 1. recover from an earlier attempt that stopped midway ([`recover`]);
//! 2. copy the current file, as read, to the backup;
//! 3. delete `hoodie.properties` (readers now read the backup);
//! 4. write the changed properties to `hoodie.properties`;
//! 5. read them back and compare (on a mismatch, delete the file again:
//!    readers keep reading the backup until a later attempt recovers);
//! 6. delete the backup.
//!
//! Readers ([`read`]) take `hoodie.properties` when it is there and intact,
//! else the backup, so a process stopped at any step leaves a table that
//! reads either the old properties or the new ones. A file is intact when
//! it reads as Java properties and its `hoodie.table.checksum`, if any,
//! matches the table and database names ([`checksum_state`]). Writes of
//! whole objects are atomic on every store Tributary uses (the local store
//! writes a staging file and renames it), so a file is never half there.
//!
//! Properties are changed as text keys and values: every key the change
//! does not touch is written back verbatim.

use std::collections::BTreeMap;

use object_store::path::Path;

use crate::config::{ChecksumState, checksum_state, keys, parse_properties, render_properties, table_checksum};
use crate::error::{Error, Result};
use crate::layout;
use tributary_storage::TableLocation;
use tributary_storage::delete_if_exists;

/// The backup Hudi writes while it changes `hoodie.properties`.
pub(crate) const BACKUP_FILE: &str = layout::PROPERTIES_BACKUP_FILE;

/// `<root>/.hoodie/hoodie.properties.backup`.
pub(crate) fn backup_path(loc: &TableLocation) -> Path {
    layout::properties_backup_file(&loc.root)
}

/// The table's properties as read from storage: the text, its keys and
/// values, and which file they came from.
#[derive(Debug, Clone)]
pub struct StoredProperties {
    /// The file's text.
    pub text: String,
    /// Its keys and values.
    pub properties: BTreeMap<String, String>,
    /// `hoodie.properties`, or the backup while an update is in flight.
    pub path: Path,
}

/// Reads `path` as properties: `None` when it does not exist; an error
/// when reading fails; the text and whether it is intact otherwise.
async fn load(loc: &TableLocation, path: &Path) -> Result<Option<(StoredProperties, bool)>> {
    let bytes = match loc.get(path).await {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (properties, intact) = match parse_properties(&text, path.as_ref()) {
        Ok(p) => {
            let intact = checksum_state(&p) != ChecksumState::Invalid;
            (p, intact)
        }
        Err(_) => (BTreeMap::new(), false),
    };
    Ok(Some((StoredProperties { text, properties, path: path.clone() }, intact)))
}

/// Reads the table's properties as Hudi's readers do (`fetchConfigs`):
/// `hoodie.properties` when it is there and intact, else the backup an
/// interrupted update left. `None` when neither file exists; a
/// `hoodie.properties` that is damaged with no intact backup beside it is
/// returned as it is, for the parser to report.
pub async fn read_properties(loc: &TableLocation) -> Result<Option<StoredProperties>> {
    let main = load(loc, &layout::properties_file(&loc.root)).await?;
    if let Some((p, true)) = main {
        return Ok(Some(p));
    }
    match load(loc, &backup_path(loc)).await? {
        Some((backup, true)) => {
            tracing::warn!(table = %loc, "reading {BACKUP_FILE}: hoodie.properties is missing or damaged while an update is in flight");
            Ok(Some(backup))
        }
        _ => Ok(main.map(|(p, _)| p)),
    }
}

/// Finishes what an interrupted update left, as Hudi does before it
/// changes the file (`recoverIfNeeded`): when `hoodie.properties` is
/// missing or damaged and an intact backup exists, the backup becomes
/// `hoodie.properties`; then the backup is deleted. Unlike Hudi, a
/// `hoodie.properties` without a checksum counts as intact here and is
/// kept (Hudi would delete it); a damaged one without an intact backup is
/// an error ([`Error::Corrupt`]). Call it holding the table lock.
pub(crate) async fn recover(loc: &TableLocation) -> Result<()> {
    let main_path = layout::properties_file(&loc.root);
    let backup = backup_path(loc);
    let main = load(loc, &main_path).await?;
    if !matches!(main, Some((_, true))) {
        match load(loc, &backup).await? {
            Some((b, true)) => {
                tracing::warn!(table = %loc, "restoring hoodie.properties from {BACKUP_FILE} (an update was interrupted)");
                delete_if_exists(loc, &main_path).await?;
                loc.create(&main_path, b.text.into_bytes()).await?;
            }
            _ if main.is_none() => {
                return Err(Error::Corrupt {
                    path: main_path.to_string(),
                    reason: format!("missing, and no intact {BACKUP_FILE} to restore it from"),
                });
            }
            _ => {
                return Err(Error::Corrupt {
                    path: main_path.to_string(),
                    reason: format!(
                        "its checksum does not match its table, and no intact {BACKUP_FILE} to restore it from"
                    ),
                });
            }
        }
    }
    Ok(delete_if_exists(loc, &backup).await?)
}

/// `properties` with Hudi's checksum added when it is missing or wrong, as
/// Hudi writes every properties file.
fn with_checksum(mut properties: BTreeMap<String, String>) -> BTreeMap<String, String> {
    if checksum_state(&properties) != ChecksumState::Valid
        && let Some(name) = properties.get(keys::NAME).cloned()
    {
        let database = properties.get(keys::DATABASE).cloned().filter(|d| !d.is_empty());
        properties.insert(keys::CHECKSUM.into(), table_checksum(database.as_deref(), &name).to_string());
    }
    properties
}

/// Changes `hoodie.properties` with Hudi's protocol (module notes): `change`
/// edits the keys and values and says whether it changed anything; when it
/// did not, nothing is written (and one GET was made, when the file is
/// intact; an interrupted update is recovered first otherwise). `comment`
/// heads the new file (Hudi writes `Updated at <time>`). Returns whether the
/// file changed. Call it holding the table lock.
pub(crate) async fn modify(
    loc: &TableLocation,
    comment: &str,
    change: impl FnOnce(&mut BTreeMap<String, String>) -> bool,
) -> Result<bool> {
    let main_path = layout::properties_file(&loc.root);
    let backup = backup_path(loc);
    let current = match load(loc, &main_path).await? {
        Some((p, true)) => p,
        _ => {
            recover(loc).await?;
            match load(loc, &main_path).await? {
                Some((p, true)) => p,
                _ => {
                    return Err(Error::Corrupt {
                        path: main_path.to_string(),
                        reason: "damaged after recovery".into(),
                    });
                }
            }
        }
    };
    let mut changed = current.properties;
    if !change(&mut changed) {
        return Ok(false);
    }
    let changed = with_checksum(changed);
    // A backup beside an intact file is what an update that had finished
    // but for its last step left: recovery would delete it.
    delete_if_exists(loc, &backup).await?;
    // The backup is the file as read, not a rendering of it: restoring it
    // gives back exactly what was there.
    loc.create(&backup, current.text.into_bytes()).await?;
    delete_if_exists(loc, &main_path).await?;
    loc.create(&main_path, render_properties(&changed, comment)?.into_bytes()).await?;
    match load(loc, &main_path).await? {
        Some((back, true)) if back.properties == changed => {}
        _ => {
            // Readers go to the backup until a later attempt recovers.
            delete_if_exists(loc, &main_path).await?;
            return Err(Error::Corrupt {
                path: main_path.to_string(),
                reason: "the rewritten file did not read back as written; the previous properties stay in \
                         hoodie.properties.backup"
                    .into(),
            });
        }
    }
    delete_if_exists(loc, &backup).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use object_store::memory::InMemory;

    use super::*;
    use crate::config::{NewTableConfig, TableConfig};

    fn table() -> (TableLocation, String) {
        let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("t"));
        let text = TableConfig::new_table(&NewTableConfig::new("t", "id", "ts", "{}")).to_properties_text("x").unwrap();
        (loc, text)
    }

    async fn text_of(loc: &TableLocation, path: &Path) -> Option<String> {
        loc.get(path).await.ok().map(|b| String::from_utf8(b.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_change_keeps_every_other_key_and_leaves_no_backup() {
        let (loc, text) = table();
        let text = format!("{text}some.unknown.key=kept as it is\n");
        loc.create(&layout::properties_file(&loc.root), text.into_bytes()).await.unwrap();
        let changed = modify(&loc, "Updated at test", |p| {
            p.insert("hoodie.table.metadata.partitions".into(), String::new());
            true
        })
        .await
        .unwrap();
        assert!(changed);
        let after = read_properties(&loc).await.unwrap().unwrap();
        assert_eq!(after.path, layout::properties_file(&loc.root));
        assert_eq!(after.properties.get("some.unknown.key").map(String::as_str), Some("kept as it is"));
        assert_eq!(after.properties.get("hoodie.table.metadata.partitions").map(String::as_str), Some(""));
        assert!(after.text.lines().next().is_some_and(|l| l.contains("Updated at test")), "{}", after.text);
        assert!(text_of(&loc, &backup_path(&loc)).await.is_none());
        TableConfig::parse(&after.text, "p").unwrap();
        // No change, no write.
        assert!(!modify(&loc, "again", |_| false).await.unwrap());
        assert_eq!(read_properties(&loc).await.unwrap().unwrap().text, after.text);
    }

    #[tokio::test]
    async fn readers_take_the_backup_while_hoodie_properties_is_missing_or_damaged() {
        let (loc, text) = table();
        loc.create(&backup_path(&loc), text.clone().into_bytes()).await.unwrap();
        // Step 3 done, step 4 not yet: only the backup.
        let got = read_properties(&loc).await.unwrap().unwrap();
        assert_eq!((got.path, got.text.as_str()), (backup_path(&loc), text.as_str()));
        // A damaged file (its checksum names another table) loses to the backup.
        let damaged = text.replace("hoodie.table.name=t", "hoodie.table.name=other");
        loc.create(&layout::properties_file(&loc.root), damaged.clone().into_bytes()).await.unwrap();
        assert_eq!(read_properties(&loc).await.unwrap().unwrap().path, backup_path(&loc));
        // Recovery puts the backup back and removes it.
        recover(&loc).await.unwrap();
        assert_eq!(text_of(&loc, &layout::properties_file(&loc.root)).await.as_deref(), Some(text.as_str()));
        assert!(text_of(&loc, &backup_path(&loc)).await.is_none());
        // Without a backup, a damaged file is reported, not replaced.
        delete_if_exists(&loc, &layout::properties_file(&loc.root)).await.unwrap();
        loc.create(&layout::properties_file(&loc.root), damaged.into_bytes()).await.unwrap();
        assert_eq!(recover(&loc).await.unwrap_err().kind(), crate::ErrorKind::Corrupt);
        assert!(
            read_properties(&loc).await.unwrap().is_some(),
            "the damaged file is returned for the parser to report"
        );
        let empty = TableLocation::new(Arc::new(InMemory::new()), Path::from("none"));
        assert!(read_properties(&empty).await.unwrap().is_none());
    }

    /// The backup is the file as it was read, byte for byte: its own
    /// header comment and spelling, not a rendering of its properties.
    #[tokio::test]
    async fn the_backup_is_the_file_as_read() {
        let (loc, text) = table();
        let text = format!("#Written by a Hudi writer\n{text}some.key=a\\:b\n");
        loc.create(&layout::properties_file(&loc.root), text.clone().into_bytes()).await.unwrap();
        // The process stops after two writes and deletes: deleting the old
        // backup (there is none) and creating the new one.
        let stopped = crate::protocol::metadata_table::tests::stopping_after(&loc, 2);
        let change = |p: &mut BTreeMap<String, String>| p.insert("k".into(), "v".into()).is_none();
        assert!(modify(&stopped, "c", change).await.is_err());
        assert_eq!(text_of(&loc, &backup_path(&loc)).await.as_deref(), Some(text.as_str()));
        assert_eq!(text_of(&loc, &layout::properties_file(&loc.root)).await.as_deref(), Some(text.as_str()));
        // The next change starts from it.
        assert!(modify(&loc, "c", change).await.unwrap());
        let after = read_properties(&loc).await.unwrap().unwrap();
        assert_eq!(after.properties.get("some.key").map(String::as_str), Some("a:b"));
        assert!(text_of(&loc, &backup_path(&loc)).await.is_none());
    }

    /// Every prefix of the protocol's steps leaves properties that read as
    /// either the old or the new ones, and a later change recovers and
    /// applies.
    #[tokio::test]
    async fn a_change_stopped_after_any_step_reads_old_or_new_and_recovers() {
        let (_, text) = table();
        let old = parse_properties(&text, "p").unwrap();
        let mut new = old.clone();
        new.insert("k".into(), "v".into());
        let new = with_checksum(new);
        for stop_after in 0..=5 {
            let (loc, _) = table();
            loc.create(&layout::properties_file(&loc.root), text.clone().into_bytes()).await.unwrap();
            let main = layout::properties_file(&loc.root);
            let backup = backup_path(&loc);
            // The steps of `modify` after recovery, cut short.
            for step in 0..stop_after {
                match step {
                    0 => loc.create(&backup, text.clone().into_bytes()).await.unwrap(),
                    1 => delete_if_exists(&loc, &main).await.unwrap(),
                    2 => loc.create(&main, render_properties(&new, "c").unwrap().into_bytes()).await.unwrap(),
                    3 => {} // reading back writes nothing
                    _ => delete_if_exists(&loc, &backup).await.unwrap(),
                }
            }
            let seen = read_properties(&loc).await.unwrap().unwrap().properties;
            let expect_new = stop_after >= 3;
            assert_eq!(seen, if expect_new { new.clone() } else { old.clone() }, "stopped after {stop_after} steps");
            // The next change recovers first and applies on what readers saw.
            modify(&loc, "c", |p| {
                p.insert("k2".into(), "v2".into());
                true
            })
            .await
            .unwrap();
            let after = read_properties(&loc).await.unwrap().unwrap();
            assert_eq!(after.path, main);
            assert_eq!(after.properties.contains_key("k"), expect_new, "stopped after {stop_after} steps");
            assert_eq!(after.properties.get("k2").map(String::as_str), Some("v2"));
            assert!(text_of(&loc, &backup).await.is_none());
        }
    }
}
