//! Committing a sealed batch: decode its values, write them, and commit
//! them with the next offset of every partition the batch holds. It runs
//! as a task of its own, so the loop consumes the next batch meanwhile.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use tributary_timeline::metrics as names;
use tributary_writer::{CommitSummary, Rows, SourceLease, WriteClient};

use crate::batch::{Batch, Position};
use crate::error::{Error, Result};
use crate::settings::OnBadRecord;
use crate::stats::IngestStats;
use crate::values::{Failure, Values};

/// How long a dead letter's delivery may take.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// What a batch's commit needs; cheap to clone into its task.
#[derive(Clone)]
pub(crate) struct Committer {
    pub(crate) client: WriteClient,
    pub(crate) values: Arc<Values>,
    pub(crate) on_bad_record: OnBadRecord,
    /// The dead-letter topic and its producer.
    pub(crate) dead_letters: Option<(String, FutureProducer)>,
    pub(crate) stats: Arc<IngestStats>,
}

/// A batch's commit, done: the batch's partitions and their next offsets,
/// with the commit's outcome.
#[derive(Debug)]
pub(crate) struct Flushed {
    pub(crate) ends: HashMap<crate::context::Partition, i64>,
    /// Records written.
    pub(crate) records: usize,
    /// Records per topic.
    pub(crate) per_topic: HashMap<String, u64>,
    pub(crate) result: Result<CommitSummary>,
}

impl Committer {
    /// Writes `batch` and commits it, each partition's next offset under
    /// its lease in `positions`.
    pub(crate) async fn commit(self, mut batch: Batch, positions: Vec<(SourceLease, String)>) -> Flushed {
        let result = self.write(&mut batch, &positions).await;
        let mut per_topic: HashMap<String, u64> = HashMap::new();
        for entry in batch.entries() {
            *per_topic.entry(entry.at.0.0.clone()).or_default() += 1;
        }
        Flushed { ends: std::mem::take(&mut batch.ends), records: batch.len(), per_topic, result }
    }

    async fn write(&self, batch: &mut Batch, positions: &[(SourceLease, String)]) -> Result<CommitSummary> {
        let rows = self.rows(batch).await?;
        let mut commit = self.client.start_commit().await?;
        if let Some(rows) = rows
            && let Err(e) = commit.write(rows).await
        {
            commit.abort().await?;
            return Err(e.into());
        }
        Ok(commit.commit_with_sources(None, positions).await?)
    }

    /// The batch's rows; bad values fail the job, or are left out (and
    /// dead-lettered) as the settings say. Decoding runs on a blocking
    /// thread.
    async fn rows(&self, batch: &mut Batch) -> Result<Option<Rows>> {
        if batch.is_empty() {
            return Ok(None);
        }
        let whole = std::mem::take(batch);
        let (values, schema) = (self.values.clone(), self.client.schema().clone());
        let (whole, first) = tokio::task::spawn_blocking(move || {
            let rows = values.rows(&schema, &whole);
            (whole, rows)
        })
        .await
        .map_err(|e| Error::Internal { what: "decoding a batch".into(), reason: e.to_string() })?;
        *batch = whole;
        let failure = match first {
            Ok(rows) => return Ok(Some(rows)),
            Err(f) => f,
        };
        if self.on_bad_record == OnBadRecord::Fail {
            return Err(self.error(batch, failure));
        }
        // Each value alone, to find every bad one.
        let schema = self.client.schema();
        let mut keep = vec![true; batch.len()];
        for (i, kept) in keep.iter_mut().enumerate() {
            if let Err(f) = self.values.rows(schema, &batch.single(i)) {
                let error = self.error(batch, shifted(f, i));
                *kept = false;
                self.leave_out(&batch.entries()[i].at, self.values.original(batch.value(i)), &error).await?;
            }
        }
        batch.retain(&keep);
        if batch.is_empty() {
            return Ok(None);
        }
        self.values.rows(schema, batch).map(Some).map_err(|f| self.error(batch, f))
    }

    /// A failure of `batch` as an error naming the value's position.
    fn error(&self, batch: &Batch, failure: Failure) -> Error {
        match failure {
            Failure::Value(i, (field, reason)) => match batch.entries().get(i) {
                Some(entry) => {
                    let ((topic, partition), offset) = &entry.at;
                    Error::BadRecord { topic: topic.clone(), partition: *partition, offset: *offset, field, reason }
                }
                None => Error::Internal { what: format!("value {i} of a batch"), reason },
            },
            Failure::Other(e) => e,
        }
    }

    /// Counts, logs and (with a dead-letter topic) delivers a bad value.
    pub(crate) async fn leave_out(&self, at: &Position, value: &[u8], error: &Error) -> Result<()> {
        let ((topic, partition), offset) = at;
        self.stats.bad_records.fetch_add(1, Ordering::Relaxed);
        let table = self.client.location().name();
        metrics::counter!(names::INGEST_BAD_RECORDS, "table" => table, "topic" => topic.clone()).increment(1);
        tracing::warn!(%topic, partition, offset, error = %error, "bad record left out");
        let Some((to, producer)) = &self.dead_letters else { return Ok(()) };
        let (partition_text, offset_text, reason) = (partition.to_string(), offset.to_string(), error.to_string());
        let headers = OwnedHeaders::new()
            .insert(Header { key: "tributary.topic", value: Some(topic.as_str()) })
            .insert(Header { key: "tributary.partition", value: Some(partition_text.as_str()) })
            .insert(Header { key: "tributary.offset", value: Some(offset_text.as_str()) })
            .insert(Header { key: "tributary.error", value: Some(reason.as_str()) });
        let record: FutureRecord<'_, (), [u8]> = FutureRecord::to(to).payload(value).headers(headers);
        producer.send(record, DELIVERY_TIMEOUT).await.map_err(|(e, _)| {
            Error::kafka(format!("delivering topic {topic} partition {partition} offset {offset} to {to}"), e)
        })?;
        Ok(())
    }
}

/// A failure of a batch holding value `i` alone, as one of value `i`.
fn shifted(failure: Failure, i: usize) -> Failure {
    match failure {
        Failure::Value(_, refusal) => Failure::Value(i, refusal),
        other => other,
    }
}
