//! The change-feed consumer's state: where it stands in the feed, and the
//! replica it built from the feed alone, kept as a consumer keeps them in
//! its own store (both outlive its crashes, and a window is applied whole
//! or not at all).
//!
//! A window is applied only from the position it was asked from, so a
//! zombie consumer that wakes with an old window applies nothing. Each
//! change must fit the replica: an insert's key is absent, an update's or
//! delete's row before is the one held. A window the cleaner overtook is
//! refused by the table; the consumer then starts again from a snapshot
//! and the position of the timeline it read.

use std::collections::BTreeMap;
use std::sync::Arc;

use tributary::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StructArray};
use tributary::arrow::datatypes::{Field, Fields, Schema};
use tributary::{
    CHANGE_AFTER, CHANGE_BEFORE, CHANGE_KEY, CHANGE_OP, CHANGE_PARTITION, Changes, InstantTime, ReadOptions, Table,
    Timeline,
};
use tributary_format::{META_FIELDS, PARTITION_PATH, RECORD_KEY};

/// A row of the replica: its table columns as one JSON object (nulls left
/// out, so a column added later reads the same as one never written).
type RowJson = String;

/// The consumer's durable state.
#[derive(Debug, Default)]
pub(crate) struct Feed {
    /// Where the next window begins; `None` before the first.
    position: Option<InstantTime>,
    /// By partition and record key.
    rows: BTreeMap<(String, String), RowJson>,
    /// Windows applied, changes in them, and starts from a snapshot.
    pub(crate) windows: usize,
    pub(crate) changes: usize,
    pub(crate) restarts: usize,
}

impl Feed {
    /// Where the next window begins.
    pub(crate) fn position(&self) -> InstantTime {
        self.position.clone().unwrap_or(InstantTime::EARLIEST)
    }

    /// Applies `window`, asked from `from`; nothing when the position has
    /// moved since (another incarnation applied it). `Err` when a change
    /// does not fit the replica.
    pub(crate) fn apply(&mut self, from: &InstantTime, window: &Changes) -> Result<(), String> {
        if self.position() != *from {
            return Ok(());
        }
        let rows = &window.rows;
        let text = |name: &str| rows.column_by_name(name).map(|c| c.as_string::<i32>().clone());
        let (Some(op), Some(partition), Some(key)) = (text(CHANGE_OP), text(CHANGE_PARTITION), text(CHANGE_KEY)) else {
            return Err(format!("the feed's columns are {:?}", rows.schema()));
        };
        let before = images(rows, CHANGE_BEFORE)?;
        let after = images(rows, CHANGE_AFTER)?;
        let mut next = self.rows.clone();
        for i in 0..rows.num_rows() {
            let k = (partition.value(i).to_string(), key.value(i).to_string());
            let held = next.get(&k);
            let fits = match op.value(i) {
                "i" => held.is_none() && before[i].is_none() && after[i].is_some(),
                "u" => held == before[i].as_ref() && after[i].is_some() && before[i] != after[i],
                "d" => held.is_some() && held == before[i].as_ref() && after[i].is_none(),
                _ => false,
            };
            if !fits {
                return Err(format!(
                    "change {} of {k:?} in ({from}, {}] (before {:?}) does not follow the replica's row {held:?}",
                    op.value(i),
                    window.end,
                    before[i]
                ));
            }
            match &after[i] {
                Some(row) => next.insert(k, row.clone()),
                None => next.remove(&k),
            };
        }
        self.rows = next;
        self.position = Some(window.end.clone());
        self.windows += 1;
        self.changes += rows.num_rows();
        Ok(())
    }

    /// Starts again from `snapshot`, the table read at `timeline`: the
    /// position is the last completion `timeline` holds.
    pub(crate) fn restart(&mut self, timeline: &Timeline, snapshot: &RecordBatch) -> Result<(), String> {
        self.rows = rows_of(snapshot)?;
        self.position = Some(timeline.latest_completed().map_or(InstantTime::EARLIEST, |i| i.visible_at().clone()));
        self.restarts += 1;
        Ok(())
    }

    /// Compares the replica with the table's snapshot.
    pub(crate) fn matches(&self, snapshot: &RecordBatch) -> Result<(), String> {
        let want = rows_of(snapshot)?;
        if want == self.rows {
            return Ok(());
        }
        let missing: Vec<_> = want.iter().filter(|(k, v)| self.rows.get(*k) != Some(*v)).take(3).collect();
        let extra: Vec<_> = self.rows.iter().filter(|(k, v)| want.get(*k) != Some(*v)).take(3).collect();
        Err(format!(
            "the feed's replica ({} rows, {} windows from {:?}) differs from the table ({} rows): \
             the table has {missing:?}, the replica {extra:?}",
            self.rows.len(),
            self.windows,
            self.position,
            want.len()
        ))
    }
}

/// The table read at `timeline` with its meta columns, for
/// [`Feed::restart`] and [`Feed::matches`].
pub(crate) async fn snapshot(table: &Table, timeline: &Timeline) -> tributary::Result<RecordBatch> {
    table.read_at(timeline, &ReadOptions { with_meta: true, unordered: true, ..ReadOptions::default() }).await
}

/// The rows of a snapshot read with meta columns, by partition and key.
fn rows_of(snapshot: &RecordBatch) -> Result<BTreeMap<(String, String), RowJson>, String> {
    let meta = META_FIELDS;
    let column = |n: &str| snapshot.column_by_name(n).map(|c| c.as_string::<i32>().clone());
    let (Some(partition), Some(key)) = (column(meta[PARTITION_PATH]), column(meta[RECORD_KEY])) else {
        return Err(format!("a snapshot without meta columns: {:?}", snapshot.schema()));
    };
    let fields: Fields = snapshot.schema().fields()[meta.len()..].iter().cloned().collect();
    let json = json_lines(&fields, &snapshot.columns()[meta.len()..])?;
    Ok((0..snapshot.num_rows())
        .map(|i| ((partition.value(i).to_string(), key.value(i).to_string()), json[i].clone()))
        .collect())
}

/// The feed's `before` or `after` images as JSON, `None` where null.
pub(crate) fn images(rows: &RecordBatch, name: &str) -> Result<Vec<Option<RowJson>>, String> {
    let Some(s) = rows.column_by_name(name).and_then(|c| c.as_any().downcast_ref::<StructArray>()) else {
        return Err(format!("the feed has no struct column `{name}`"));
    };
    let json = json_lines(s.fields(), s.columns())?;
    Ok((0..s.len()).map(|i| (!s.is_null(i)).then(|| json[i].clone())).collect())
}

/// One JSON object per row of `columns`.
fn json_lines(fields: &Fields, columns: &[ArrayRef]) -> Result<Vec<String>, String> {
    let fields: Vec<Field> = fields.iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns.to_vec()).map_err(|e| e.to_string())?;
    let mut writer = tributary::arrow::json::LineDelimitedWriter::new(Vec::new());
    writer.write(&batch).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    let text = String::from_utf8(writer.into_inner()).map_err(|e| e.to_string())?;
    Ok(text.lines().map(String::from).collect())
}
