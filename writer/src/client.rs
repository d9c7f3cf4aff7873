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
//! Exactly-once: a client that [registers](WriteClient::register) its
//! writer id takes the id over (raising its generation) and learns the
//! id's last committed checkpoint; a commit carrying a checkpoint
//! ([`Commit::commit_with_checkpoint`]) records it in the id's state file in
//! the lock hold that makes the commit visible. Once a newer client
//! registers the same id, this one's commits fail with a conflict and are
//! withdrawn (`tributary_timeline::protocol::writer_state`).
//!
//! The open commit lives in [`crate::commit`], its writer tasks in `task`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tributary_merge::Combiner;

use tributary_format::codec::TableDatumEncoder;
use tributary_format::schema::TableSchema;
use tributary_timeline::protocol::Heartbeat;
use tributary_timeline::protocol::writer_state::{self, CHECKPOINT_KEY_PREFIX, WriterState, WriterStatus};
use tributary_timeline::{Action, Instant, State, TableConfig, TableLocation, TimeGenerator, TimelineWriter};

use crate::bucket::BucketIndex;
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::task::BlockBuffers;

/// Extra-metadata key prefix under which each commit also records its
/// checkpoint (`tributary.checkpoint.<writer id>`), for other tools; lookups
/// read the writer's state file instead.
pub const CHECKPOINT_PREFIX: &str = CHECKPOINT_KEY_PREFIX;

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
    /// Name of this writer, under which checkpoints are kept and which
    /// [`WriteClient::register`] takes over: 1 to 128 characters from A-Z,
    /// a-z, 0-9, `.`, `_` and `-`, not starting with `.` (it names the file
    /// `.hoodie/.tributary/writers/<id>.json`). Default `default`.
    pub writer_id: String,
    /// The columns this writer writes (a partial writer); `None` for all.
    /// Its log blocks carry the column subset with `IS_PARTIAL=true`.
    pub columns: Option<Vec<String>>,
    /// The bucket count, for a table whose `hoodie.properties` records
    /// none (one a Hudi writer made: Hudi keeps the count in each writer's
    /// `hoodie.bucket.index.num.buckets`); it must equal the Hudi writers'.
    /// `None` takes the table's; a count the table records must match.
    pub buckets: Option<u32>,
    /// Whether a commit stores, of the versions of a key it is given, only
    /// the one the merge keeps (as Hudi's `hoodie.combine.before.upsert`):
    /// readers see the same rows either way, and fewer versions are
    /// written, read and compacted. Partial writes and tables with sequence
    /// groups or a custom merger store every version regardless (see
    /// [`tributary_merge::Combiner`]). Default true.
    pub combine: bool,
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
            buckets: None,
            combine: true,
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
    /// The writer id's state: its registered generation, and the step
    /// that fences and records each commit.
    pub(crate) writer: WriterState,
    /// Avro encoders of the table columns that finished commits handed
    /// back: building one compiles the schema, which costs more than
    /// encoding a small commit. At most a few are kept.
    pub(crate) encoders: std::sync::Mutex<Vec<TableDatumEncoder>>,
    /// Buffers of log blocks whose files were stored, for the next blocks.
    pub(crate) buffers: BlockBuffers,
    /// Whether commits combine each key's versions (see
    /// [`WriteSettings::combine`]): then writer tasks encode the rows they
    /// keep; else a write encodes its rows as they come.
    pub(crate) combines: bool,
}

/// Encoders a client keeps for its next commits.
const KEPT_ENCODERS: usize = 4;

impl Shared {
    /// What combines the versions of one file group of a commit.
    pub(crate) fn combiner(&self) -> Combiner {
        match self.combines {
            true => Combiner::new(&self.schema, &self.config, self.schema.is_partial()),
            false => Combiner::keep_every_version(),
        }
    }

    /// An encoder of the table columns: a kept one, else a new one.
    pub(crate) fn take_encoder(&self) -> Result<TableDatumEncoder> {
        let kept = self.encoders.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        match kept {
            Some(e) => Ok(e),
            None => Ok(TableDatumEncoder::new(&self.schema)?),
        }
    }

    /// Keeps `encoder`, which holds no rows (its last batch was flushed),
    /// for a later commit.
    pub(crate) fn keep_encoder(&self, encoder: TableDatumEncoder) {
        let mut kept = self.encoders.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if kept.len() < KEPT_ENCODERS {
            kept.push(encoder);
        }
    }
}

/// Writes commits into one table.
#[derive(Debug, Clone)]
pub struct WriteClient {
    shared: Arc<Shared>,
}

impl WriteClient {
    /// A client for the table at `loc` with configuration `config`, taking
    /// instants from `time`, writing the table's create schema. A table
    /// Tributary cannot write ([`TableConfig::check_writable`]) is refused
    /// first.
    pub fn new(loc: TableLocation, config: TableConfig, time: TimeGenerator, settings: WriteSettings) -> Result<Self> {
        config.check_writable()?;
        let schema = config.table_schema()?;
        Self::build(loc, config, schema, time, settings)
    }

    /// [`WriteClient::new`] writing rows of `full`, the table's schema: a
    /// table another engine made records no create schema in
    /// `hoodie.properties`, and its writers' schema is its latest commit's
    /// (`extraMetadata.schema`), whose record names log blocks must keep.
    pub fn with_schema(
        loc: TableLocation,
        config: TableConfig,
        full: TableSchema,
        time: TimeGenerator,
        settings: WriteSettings,
    ) -> Result<Self> {
        config.check_writable()?;
        Self::build(loc, config, full, time, settings)
    }

    /// [`WriteClient::with_schema`] for a table found writable.
    fn build(
        loc: TableLocation,
        config: TableConfig,
        full: TableSchema,
        time: TimeGenerator,
        settings: WriteSettings,
    ) -> Result<Self> {
        let bucket = config.bucket_spec(settings.buckets)?;
        if settings.tasks == 0 {
            return Err(Error::InvalidInput { what: "tasks".into(), reason: "must be at least 1".into() });
        }
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
        let writer = WriterState::new(&loc, &config, &settings.writer_id)?;
        let combines = settings.combine && Combiner::combines_writes(&schema, &config, schema.is_partial());
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
                writer,
                encoders: std::sync::Mutex::new(Vec::new()),
                buffers: BlockBuffers::default(),
                combines,
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
        // The inflight file is created in the hold that issues the instant,
        // right after the requested one. Recovery withdraws a write by
        // deleting its inflight file under the lock, and a write can only
        // complete while that file exists; an inflight file created after
        // the withdrawal (its writer stalled in between, past its heartbeat
        // expiry) would let the write complete with files recovery deleted.
        let instant = s
            .time
            .with_time_fenced(|t, fence| async move {
                let i = Instant::requested(t.clone(), Action::DeltaCommit);
                fence.check().await?;
                timeline.create(&i, State::Requested, Vec::new()).await?;
                fence.check().await?;
                timeline.create(&i, State::Inflight, Vec::new()).await?;
                Ok(t)
            })
            .await?;
        let heartbeat =
            Heartbeat::start(s.loc.clone(), &instant, s.time.clock().clone(), s.settings.heartbeat_interval).await?;
        Commit::open(s.clone(), instant, heartbeat)
    }

    /// Registers this client as the writer of its writer id
    /// ([`WriteSettings::writer_id`]), taking the id over from any earlier
    /// writer, alive or not: under the table lock, the id's generation is
    /// raised by one, and the returned status holds that generation and the
    /// id's last committed checkpoint. No commit of an earlier writer of the
    /// id can become visible after this returns (it fails with a conflict
    /// and is withdrawn), so resuming the source after the returned
    /// checkpoint neither loses nor repeats a record.
    ///
    /// Register before starting commits: a commit started before
    /// registering belongs to the older generation and is fenced too. A
    /// client that never registers is not fenced, unless some client
    /// registered its id, in which case its commits fail as well.
    pub async fn register(&self) -> Result<WriterStatus> {
        Ok(self.shared.writer.take_over(&self.shared.time).await?)
    }

    /// The generation this client registered ([`WriteClient::register`]);
    /// 0 if it did not.
    pub fn generation(&self) -> u64 {
        self.shared.writer.generation()
    }

    /// What the table records about `writer_id`: its generation and last
    /// committed checkpoint. Reads the id's state file and, if it holds a
    /// commit that was about to complete, checks whether that commit's
    /// completed file exists; it does not read commit files (except, once
    /// per id, on a table written before state files existed).
    pub async fn checkpoint(&self, writer_id: &str) -> Result<WriterStatus> {
        Ok(writer_state::lookup(&self.shared.loc, &self.shared.config, writer_id).await?)
    }

    /// The last checkpoint `writer_id` attached to a commit that is
    /// visible, if any ([`WriteClient::checkpoint`]).
    pub async fn last_checkpoint(&self, writer_id: &str) -> Result<Option<String>> {
        Ok(self.checkpoint(writer_id).await?.checkpoint.map(|c| c.checkpoint))
    }
}
