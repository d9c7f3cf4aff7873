//! The change log (`docs/design.md`, "Change log"): the change feed
//! ([`Table::changes`]) written down in Hudi's CDC format, so that Spark's
//! CDC query (`hoodie.datasource.query.incremental.format=cdc`) reads
//! exactly the changes Tributary's feed gives.
//!
//! Writers do not write change records: under event-time ordering and
//! concurrent writers, what a commit changed is only known once the
//! commits before it completed. A change-log writer, a table service,
//! writes them behind the writers, window after window:
//!
//! 1. It starts a delta commit at instant `L` (requested under the lock,
//!    as every commit is). Every commit that completed before `L` is on the
//!    timeline then, and no commit completes at `L`.
//! 2. Its window is `(begin, L]` of completion times, where `begin` is
//!    the `L` of the last change-log commit (its writer id's checkpoint).
//! 3. For each file group the window changed, it stores one `.cdc` log
//!    file holding one CDC_DATA block of the group's changes in the
//!    `DATA_BEFORE_AFTER` mode, and completes the commit with the files in
//!    the groups' `cdcStats` and the window's end as its checkpoint, in one
//!    step, and only if the writer id's committed checkpoint is still
//!    `begin` ([`tributary_writer::Commit::complete_only_after`]). So
//!    windows neither overlap nor leave gaps, and change-log writers never
//!    fence each other: of two that started from one checkpoint, the first
//!    to complete wins and the other fails with a conflict and starts over
//!    from the new checkpoint. However long a window takes to record, some
//!    writer always gets through (writers that fenced each other by
//!    registering could take turns cancelling each other's windows
//!    forever).
//!
//! Data commits of such a table record an operation Hudi's CDC query
//! infers nothing from ([`tributary_timeline::CHANGE_LOGGED_OPERATION`]),
//! so a CDC query of a window `(b, e]` of requested times returns the
//! changes the change-log commits requested in it recorded, each with
//! `ts_ms` = that change-log commit's instant.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StructArray};
use arrow::compute::filter;
use tributary_format::{CdcRecord, TableDatumEncoder, TableSchema, cdc_schema_json, encode_cdc_block};
use tributary_timeline::{CHANGE_LOG_BEGIN_KEY, CHANGE_LOG_WRITER, GroupId, Instant, InstantTime};
use tributary_writer::{WriteClient, WriteSettings};

use crate::changes::{CHANGE_AFTER, CHANGE_BEFORE, CHANGE_COMMIT_TIME, CHANGE_OP};
use crate::error::{Error, Result};
use crate::table::Table;

/// Writes a table's change log ([`Table::change_log_writer`]).
#[derive(Debug)]
pub struct ChangeLogWriter {
    table: Table,
    client: WriteClient,
}

/// What one change-log commit recorded ([`ChangeLogWriter::run_once`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeLogCommit {
    /// The change-log commit's instant: the window's end, and the `ts_ms`
    /// Hudi's CDC query gives its changes.
    pub instant: InstantTime,
    /// Its completion time.
    pub completed: InstantTime,
    /// The window's exclusive start (a completion time): the previous
    /// change-log commit's instant, or the table's start.
    pub begin: InstantTime,
    /// Changes recorded.
    pub changes: u64,
    /// `.cdc` files written, one per file group that changed.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

impl Table {
    /// A writer of this table's change log, committing under writer id
    /// [`CHANGE_LOG_WRITER`]. Any number may run at once, in one process or
    /// several: none fences another, and each commit records only the window
    /// that follows the last one recorded ([`ChangeLogWriter::run_once`]). A
    /// table without a change log ([`crate::CreateOptions::change_log`]) is
    /// [`Error::InvalidInput`].
    pub async fn change_log_writer(&self) -> Result<ChangeLogWriter> {
        if !self.config().change_log()? {
            return Err(Error::InvalidInput {
                what: format!("the change log of {}", self.location()),
                reason: "the table keeps no change log (hoodie.table.cdc.enabled is not true; create it with \
                         --change-log)"
                    .into(),
            });
        }
        // Its heartbeat beats well within the table's expiry, whatever that is.
        let defaults = WriteSettings::default();
        let heartbeat_interval = defaults.heartbeat_interval.min(self.components.settings.heartbeat_expiry / 4);
        let settings = WriteSettings { writer_id: CHANGE_LOG_WRITER.into(), tasks: 1, heartbeat_interval, ..defaults };
        let client = self.write_client(settings).await?;
        Ok(ChangeLogWriter { table: self.clone(), client })
    }
}

impl ChangeLogWriter {
    /// Records the changes of the commits that completed since the last
    /// change-log commit, in one change-log commit; `None` when no data
    /// commit completed since. Fails with a conflict
    /// ([`crate::ErrorKind::Conflict`]) when another change-log writer
    /// recorded a window since this run read where its window begins;
    /// nothing of this run is visible then, and the next run starts where
    /// that one ended.
    pub async fn run_once(&self) -> Result<Option<ChangeLogCommit>> {
        let status = self.client.checkpoint(CHANGE_LOG_WRITER).await?;
        let begin = match &status.checkpoint {
            Some(c) => InstantTime::parse(&c.checkpoint)?,
            None => InstantTime::EARLIEST,
        };
        // A data commit completed since `begin` (the previous change-log
        // commit completed since too, and changed nothing): else there is
        // nothing to record, and no instant is taken.
        let data = |i: &Instant| {
            i.is_completed()
                && i.visible_at() > &begin
                && i.requested != begin
                && crate::changes::changes_rows(i.action)
        };
        if !self.table.timeline().await?.completed().any(data) {
            return Ok(None);
        }
        let mut commit = self.client.start_commit().await?;
        commit.complete_only_after(status.checkpoint_text());
        commit.set_extra_metadata(CHANGE_LOG_BEGIN_KEY, begin.as_str());
        let at = commit.instant().clone();
        let recorded = async {
            let timeline = self.table.timeline().await?;
            let window = self.table.changes_by_group(&timeline, &begin, &at).await?;
            let mut by_group: BTreeMap<GroupId, Vec<RecordBatch>> = BTreeMap::new();
            for (g, rows) in window.parts {
                by_group.entry(g).or_default().push(rows);
            }
            let mut encoding = Encoding {
                schema: &window.schema,
                encoder: TableDatumEncoder::new(&window.schema)?,
                cdc_schema: cdc_schema_json(&window.schema.table_json())?,
                at: &at,
                table: &self.table,
            };
            let (mut changes, mut files, mut bytes) = (0u64, 0usize, 0u64);
            for ((partition, file_id), parts) in by_group {
                let mut out = Vec::new();
                let n = encoding.group(&parts, &mut out)?;
                bytes += out.len() as u64;
                commit.write_change_data(&partition, &file_id, out.into(), n).await?;
                changes += n;
                files += 1;
            }
            Ok((changes, files, bytes))
        }
        .await;
        match recorded {
            Ok((changes, files, bytes)) => {
                let summary = commit.commit_with_checkpoint(Some(at.to_string())).await?;
                Ok(Some(ChangeLogCommit { instant: at, completed: summary.completed, begin, changes, files, bytes }))
            }
            Err(e) => {
                if let Err(abort) = commit.abort().await {
                    tracing::warn!(instant = %at, "aborting a change-log commit that failed: {abort}");
                }
                // Another change-log writer recorded this window meanwhile
                // (and the cleaner may have moved past its start since):
                // this run lost, and its completion would have been refused.
                let now = self.client.checkpoint(CHANGE_LOG_WRITER).await?;
                if now.checkpoint_text() != status.checkpoint_text() {
                    return Err(Error::CheckpointMismatch {
                        table: self.table.location().to_string(),
                        writer_id: CHANGE_LOG_WRITER.into(),
                        expected: status.checkpoint_text().unwrap_or_default().into(),
                        found: now.checkpoint.map(Box::new),
                    });
                }
                Err(e)
            }
        }
    }
}

/// What encoding a change-log commit's files needs.
struct Encoding<'a> {
    schema: &'a TableSchema,
    encoder: TableDatumEncoder,
    cdc_schema: String,
    at: &'a InstantTime,
    table: &'a Table,
}

/// One change, as its CDC record holds it.
struct Owned {
    op: String,
    ts_ms: String,
    before: Option<Vec<u8>>,
    after: Option<Vec<u8>>,
}

impl Encoding<'_> {
    fn internal(&self, reason: String) -> Error {
        Error::Internal {
            table: self.table.location().to_string(),
            what: format!("encoding the change log at {}", self.at),
            reason,
        }
    }

    /// Appends the CDC_DATA block of one file group's changes (`parts`,
    /// in the feed's columns) to `out`; returns how many changes it holds.
    fn group(&mut self, parts: &[RecordBatch], out: &mut Vec<u8>) -> Result<u64> {
        let mut rows: Vec<Owned> = Vec::new();
        for part in parts {
            let column =
                |name: &str| part.column_by_name(name).ok_or_else(|| self.internal(format!("no column `{name}`")));
            let ops = column(CHANGE_OP)?.as_string::<i32>().clone();
            let times = column(CHANGE_COMMIT_TIME)?.as_string::<i32>().clone();
            let (before, after) = (column(CHANGE_BEFORE)?.clone(), column(CHANGE_AFTER)?.clone());
            let before = self.datums(&before)?;
            let after = self.datums(&after)?;
            for (r, (before, after)) in before.into_iter().zip(after).enumerate() {
                rows.push(Owned { op: ops.value(r).to_string(), ts_ms: times.value(r).to_string(), before, after });
            }
        }
        let records = rows.iter().map(|c| CdcRecord {
            op: c.op.as_str(),
            ts_ms: c.ts_ms.as_str(),
            before: c.before.as_deref(),
            after: c.after.as_deref(),
        });
        Ok(encode_cdc_block(records, &self.cdc_schema, self.at.as_str(), out) as u64)
    }

    /// The Avro datum of each row of an image column (a struct of the
    /// table's columns), `None` where the image is null.
    fn datums(&mut self, image: &ArrayRef) -> Result<Vec<Option<Vec<u8>>>> {
        let image: &StructArray = image.as_struct();
        let present = arrow::array::BooleanArray::from_iter((0..image.len()).map(|r| Some(image.is_valid(r))));
        let columns: Vec<ArrayRef> = image
            .columns()
            .iter()
            .map(|c| filter(c, &present).map_err(|e| self.internal(e.to_string())))
            .collect::<Result<_>>()?;
        let batch =
            RecordBatch::try_new(Arc::clone(self.schema.arrow()), columns).map_err(|e| self.internal(e.to_string()))?;
        let encoded = self.encoder.encode(&batch)?;
        let mut next = 0;
        Ok((0..image.len())
            .map(|r| {
                image.is_valid(r).then(|| {
                    next += 1;
                    encoded.get(next - 1).to_vec()
                })
            })
            .collect())
    }
}
