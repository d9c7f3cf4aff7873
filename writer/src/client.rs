//! The write client: one per job or process.
//!
//! A commit moves through typed stages: [`WriteClient::start_commit`] takes a
//! TrueTime instant and creates the requested and inflight files; rows sent
//! with [`Commit::write`] are routed to bucket-owning writer tasks through
//! bounded channels (a slow disk pushes back on the producer); each task
//! buffers rows up to its share of the memory budget and flushes them as
//! new log files, each announced by a marker first; [`Commit::commit`]
//! flushes, gathers the write stats and creates the completed instant under
//! the lock. [`Commit::abort`] deletes what was written.
//!
//! The open commit lives in [`crate::commit`], its writer tasks in `task`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tributary_format::metadata::CommitMetadata;
use tributary_format::schema::TableSchema;
use tributary_timeline::protocol::Heartbeat;
use tributary_timeline::{Action, Instant, State, TableConfig, TableLocation, TimeGenerator, TimelineWriter};

use crate::bucket::BucketIndex;
use crate::commit::Commit;
use crate::error::{Error, Result};

/// Extra-metadata key prefix under which checkpoints are stored.
pub const CHECKPOINT_PREFIX: &str = "tributary.checkpoint.";

/// Settings of a [`WriteClient`].
#[derive(Debug, Clone)]
pub struct WriteSettings {
    /// Writer tasks per commit; task `i` owns buckets `b` with `b % tasks == i`.
    pub tasks: usize,
    /// Memory budget for buffered rows across all tasks.
    pub buffer_bytes: usize,
    /// Messages each task's channel holds before the producer waits.
    pub channel_depth: usize,
    /// How often the heartbeat file is refreshed (Hudi: 60 s).
    pub heartbeat_interval: Duration,
    /// Name of this writer, under which checkpoints are kept.
    pub writer_id: String,
    /// The columns this writer writes (a partial writer); `None` for all.
    /// Its log blocks carry the column subset with `IS_PARTIAL=true`.
    pub columns: Option<Vec<String>>,
}

impl Default for WriteSettings {
    fn default() -> Self {
        Self {
            tasks: 2,
            buffer_bytes: 128 << 20,
            channel_depth: 4,
            heartbeat_interval: Duration::from_secs(60),
            writer_id: "default".into(),
            columns: None,
        }
    }
}

/// The file id of each bucket of one partition.
pub(crate) type BucketFileIds = HashMap<u32, String>;

/// What a client, its commits and their writer tasks share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// File id of each bucket, per partition, once the partition was listed.
    /// A bucket's file id never changes, so one listing per partition and
    /// client is enough.
    pub(crate) file_ids: std::sync::Mutex<HashMap<Arc<str>, Arc<BucketFileIds>>>,
    pub(crate) loc: TableLocation,
    pub(crate) config: TableConfig,
    pub(crate) schema: Arc<TableSchema>,
    pub(crate) index: BucketIndex,
    pub(crate) time: TimeGenerator,
    pub(crate) timeline: TimelineWriter,
    pub(crate) settings: WriteSettings,
}

/// Writes commits into one table.
#[derive(Debug, Clone)]
pub struct WriteClient {
    shared: Arc<Shared>,
}

impl WriteClient {
    /// A client for the table at `loc` with configuration `config`, taking
    /// instants from `time`.
    pub fn new(loc: TableLocation, config: TableConfig, time: TimeGenerator, settings: WriteSettings) -> Result<Self> {
        let bucket = config.bucket.ok_or_else(|| Error::InvalidInput {
            what: format!("{loc} (table {})", config.name),
            reason: "no bucket count in hoodie.properties (hoodie.bucket.index.num.buckets); create it with tributary"
                .into(),
        })?;
        if settings.tasks == 0 {
            return Err(Error::InvalidInput { what: "tasks".into(), reason: "must be at least 1".into() });
        }
        let full = config.table_schema()?;
        // Keys are built per batch; a table whose key cannot be built is
        // refused here, before any commit starts.
        if full.record_key().is_empty() {
            return Err(Error::InvalidInput {
                what: format!("{loc} (table {})", config.name),
                reason: "no record key fields in hoodie.properties (hoodie.table.recordkey.fields)".into(),
            });
        }
        full.record_key().check_types(full.arrow()).map_err(|e| Error::InvalidInput {
            what: format!("{loc} (table {})", config.name),
            reason: e.to_string(),
        })?;
        let schema = Arc::new(match &settings.columns {
            Some(cols) => full.partial(cols, &config.sequence_groups)?,
            None => full,
        });
        let timeline = TimelineWriter::new(&loc, &config);
        Ok(Self {
            shared: Arc::new(Shared {
                file_ids: std::sync::Mutex::new(HashMap::new()),
                loc,
                config,
                schema,
                index: BucketIndex::new(bucket),
                time,
                timeline,
                settings,
            }),
        })
    }

    /// The table schema.
    pub fn schema(&self) -> &Arc<TableSchema> {
        &self.shared.schema
    }

    /// Starts a commit: takes an instant, creates the requested and inflight
    /// files, starts the heartbeat and the writer tasks.
    pub async fn start_commit(&self) -> Result<Commit> {
        let s = &self.shared;
        let timeline = s.timeline.clone();
        let instant = s
            .time
            .with_time(|t| async move {
                let i = Instant::requested(t.clone(), Action::DeltaCommit);
                timeline.create(&i, State::Requested, Vec::new()).await?;
                Ok(t)
            })
            .await?;
        let pending = Instant::requested(instant.clone(), Action::DeltaCommit);
        s.timeline.create(&pending, State::Inflight, Vec::new()).await?;
        let heartbeat =
            Heartbeat::start(s.loc.clone(), &instant, s.time.clock().clone(), s.settings.heartbeat_interval).await?;
        Commit::open(s.clone(), instant, heartbeat)
    }

    /// The last checkpoint `writer_id` attached to a completed commit, if any.
    pub async fn last_checkpoint(&self, writer_id: &str) -> Result<Option<String>> {
        let s = &self.shared;
        let timeline = tributary_timeline::Timeline::load(&s.loc, &s.config).await?;
        let mut done: Vec<&Instant> = timeline.completed().filter(|i| i.action == Action::DeltaCommit).collect();
        done.sort_by(|a, b| b.completed.cmp(&a.completed));
        let key = format!("{CHECKPOINT_PREFIX}{writer_id}");
        for i in done {
            let path = s.timeline.path_of(i, State::Completed)?;
            let bytes = s.loc.get(&path).await?;
            let meta = CommitMetadata::from_avro_container(&bytes, path.as_ref())?;
            if let Some(v) = meta.extra_metadata.get(&key) {
                return Ok(Some(v.clone()));
            }
        }
        Ok(None)
    }
}
