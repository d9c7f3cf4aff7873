//! The change log at the end of a history: every change-log commit still
//! on the active timeline whose window the cleaner kept must hold, in its
//! `.cdc` files, exactly the change feed of that window
//! ([`Table::changes`]); and a window the cleaner kept must still have its
//! files. (`check.rs` checks at every completion that the windows meet.)

use tributary::arrow::array::{AsArray, RecordBatch};
use tributary::timeline::{Action, CHANGE_LOG_BEGIN_KEY, CHANGE_LOG_WRITER, InstantTime, State, TimelineFolder};
use tributary::{CHANGE_AFTER, CHANGE_BEFORE, CHANGE_OP, Table};
use tributary_format::{BlockType, CommitMetadata, HeaderKey, LogBlock, decode_data_block};
use tributary_writer::CHECKPOINT_PREFIX;

use crate::feed::images;

/// One change as both sides can give it: op, row before, row after (JSON).
type Change = (String, Option<String>, Option<String>);

/// Checks the change-log commits of `table` against its change feed;
/// returns how many were compared.
pub(crate) async fn check(table: &Table) -> Result<usize, String> {
    let timeline = table.timeline().await.map_err(|e| format!("timeline: {e}"))?;
    let folder = TimelineFolder::new(table.location(), table.config());
    let cleaned = tributary_compaction::cleaned_before(&folder, &timeline).await.map_err(|e| format!("{e}"))?;
    let key = format!("{CHECKPOINT_PREFIX}{CHANGE_LOG_WRITER}");
    let mut compared = 0;
    for i in timeline.completed().filter(|i| i.action == Action::DeltaCommit && !timeline.is_archived(&i.requested)) {
        let what = format!("change-log commit {}", i.requested);
        let bytes = folder.read(i, State::Completed).await.map_err(|e| format!("{what}: {e}"))?;
        let meta = CommitMetadata::from_avro_container_shared(&bytes, i.requested.as_str())
            .map_err(|e| format!("{what}: {e}"))?;
        if !meta.extra_metadata.contains_key(&key) {
            continue;
        }
        let begin = meta.extra_metadata.get(CHANGE_LOG_BEGIN_KEY).ok_or(format!("{what}: no begin"))?;
        let begin = InstantTime::parse(begin).map_err(|e| format!("{what}: {e}"))?;
        if cleaned.as_ref().is_some_and(|c| &begin < c) {
            continue;
        }
        let mut got = Vec::new();
        for stat in meta.write_stats() {
            let path = table.location().join(&stat.path);
            let bytes = table.location().get(&path).await.map_err(|e| format!("{what}: its window was kept: {e}"))?;
            got.extend(decode(&bytes, &stat.path)?);
        }
        let feed = table.changes(&begin, &i.requested).await.map_err(|e| format!("{what}: the feed: {e}"))?;
        let mut want = changes_of(&feed.rows, CHANGE_OP)?;
        got.sort();
        want.sort();
        if got != want {
            let extra: Vec<_> = got.iter().filter(|c| !want.contains(c)).take(3).collect();
            let missing: Vec<_> = want.iter().filter(|c| !got.contains(c)).take(3).collect();
            return Err(format!(
                "{what} records {} changes of ({begin}, {}], the feed has {}: it records {extra:?} and lacks {missing:?}",
                got.len(),
                i.requested,
                want.len()
            ));
        }
        compared += 1;
    }
    Ok(compared)
}

/// The changes a `.cdc` file holds, decoded with the schema its blocks name.
fn decode(bytes: &bytes::Bytes, path: &str) -> Result<Vec<Change>, String> {
    let mut changes = Vec::new();
    for block in LogBlock::decode_all(bytes, path).map_err(|e| e.to_string())? {
        if block.block_type != BlockType::CdcData {
            return Err(format!("{path} holds a {:?} block", block.block_type));
        }
        let schema = block.header(HeaderKey::Schema).ok_or(format!("{path}: a block without a schema"))?;
        let rows = decode_data_block(&block.content, schema, schema, path).map_err(|e| e.to_string())?;
        changes.extend(changes_of(&rows, "op")?);
    }
    Ok(changes)
}

/// The (op, before, after) of each row of change records or of the feed.
fn changes_of(rows: &RecordBatch, op: &str) -> Result<Vec<Change>, String> {
    let ops = rows.column_by_name(op).ok_or(format!("no column `{op}`"))?.as_string::<i32>().clone();
    let (before, after) = (images(rows, CHANGE_BEFORE)?, images(rows, CHANGE_AFTER)?);
    Ok((0..rows.num_rows()).map(|r| (ops.value(r).to_string(), before[r].clone(), after[r].clone())).collect())
}
