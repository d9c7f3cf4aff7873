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
//! withdrawn (`tributary_timeline::lookup_writer`).
//!
//! The open commit lives in [`crate::commit`], its writer tasks in `task`,
//! what they share with the client in `shared`, its settings in `settings`.

use std::collections::HashMap;
use std::sync::Arc;
use tributary_merge::Combiner;

use tributary_format::TableSchema;
use tributary_timeline::{SequenceGroup, TableConfig, TableLocation, TimeGenerator, TimelineFolder};
use tributary_timeline::{WriterState, WriterStatus, lookup_writer};

use crate::backpressure::LogTally;
use crate::block_buffer::BlockBuffers;
pub use crate::commit::CHECKPOINT_PREFIX;
use crate::commit::Commit;
use crate::error::{Error, Result};
use crate::next::NextCommit;
pub(crate) use crate::settings::WriteSettings;
use crate::shared::{Shared, WriteMeters};
use crate::source::SourceLease;
use tributary_timeline::BucketIndex;

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
        let base_json = full.full_table_json();
        let schema = Arc::new(match &settings.columns {
            Some(cols) => full.partial(cols, &config.sequence_groups)?,
            None => full,
        });
        let timeline = TimelineFolder::new(&loc, &config);
        let writer = Arc::new(WriterState::new(&loc, &config, &settings.writer_id)?);
        let meters = WriteMeters::new(&loc);
        let backpressure = config.max_logs_per_file_group.map(|b| Arc::new(tokio::sync::Mutex::new(LogTally::new(b))));
        let combines = settings.combine && Combiner::combines_writes(&schema, &config, schema.is_partial());
        Ok(Self {
            shared: Arc::new(Shared {
                file_ids: std::sync::Mutex::new(HashMap::new()),
                loc,
                config,
                schema,
                base_json,
                in_force: std::sync::Mutex::new(None),
                index: BucketIndex::new(bucket),
                time,
                timeline,
                settings,
                writer,
                encoders: std::sync::Mutex::new(Vec::new()),
                buffers: BlockBuffers::default(),
                combines,
                meters,
                backpressure,
                next: NextCommit::default(),
            }),
        })
    }

    /// The schema this client writes: the table's (or, for a partial
    /// writer, its columns of it).
    pub fn schema(&self) -> &Arc<TableSchema> {
        &self.shared.schema
    }

    /// The sequence groups this client's commits merge by: those in force
    /// when it was made, with any it added ([`WriteClient::evolved_with_groups`]).
    pub fn sequence_groups(&self) -> &[SequenceGroup] {
        &self.shared.config.sequence_groups
    }

    /// The table this client writes.
    pub fn location(&self) -> &TableLocation {
        &self.shared.loc
    }

    /// The settings this client was made with.
    pub fn settings(&self) -> &WriteSettings {
        &self.shared.settings
    }

    /// Whether writes through this client add the columns their records
    /// bring: [`WriteSettings::evolve`], or the table's
    /// `tributary.schema.evolve.on.write`.
    pub fn evolves(&self) -> bool {
        self.shared.settings.evolve || self.shared.config.evolve_on_write
    }

    /// A client like this one whose commits write `full`, an evolution of
    /// this client's whole-table schema by Hudi's rules
    /// ([`tributary_format::check_evolution`]): added nullable columns,
    /// promoted types. It shares this client's writer id registration,
    /// bucket listings and backpressure count; commits already started
    /// keep the schema they started with. A commit of the new client
    /// records the schema in force then with these changes in it, so a
    /// column added by another writer meanwhile stays; one that writer
    /// added or promoted to another type fails the commit that completes
    /// second with a conflict naming the column.
    pub fn evolved(&self, full: TableSchema) -> Result<WriteClient> {
        self.evolved_with_groups(full, self.shared.config.sequence_groups.clone())
    }

    /// [`WriteClient::evolved`] that also writes under `sequence_groups`:
    /// this client's groups and new ones, or new columns in them, as a
    /// schema change may add (`tributary alter --sequence-group`; the
    /// caller checks that the columns are new). Commits record them with
    /// the schema, where every reader and the compactor find them.
    pub fn evolved_with_groups(&self, full: TableSchema, sequence_groups: Vec<SequenceGroup>) -> Result<WriteClient> {
        let s = &self.shared;
        let config = TableConfig { sequence_groups, ..s.config.clone() };
        let current = s.schema.full_table_json();
        tributary_format::check_evolution(&s.loc.to_string(), &current, &full.full_table_json())?;
        full.record_key().check_types(full.arrow()).map_err(|e| Error::InvalidInput {
            what: format!("{} (table {})", s.loc, s.config.name),
            reason: e.to_string(),
        })?;
        let schema = Arc::new(match &s.settings.columns {
            Some(cols) => full.partial(cols, &config.sequence_groups)?,
            None => full,
        });
        let file_ids = s.file_ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let in_force = s.in_force.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        Ok(Self {
            shared: Arc::new(Shared {
                file_ids: std::sync::Mutex::new(file_ids),
                loc: s.loc.clone(),
                config,
                schema,
                base_json: s.base_json.clone(),
                in_force: std::sync::Mutex::new(in_force),
                index: s.index,
                time: s.time.clone(),
                timeline: s.timeline.clone(),
                settings: s.settings.clone(),
                writer: s.writer.clone(),
                encoders: std::sync::Mutex::new(Vec::new()),
                buffers: BlockBuffers::default(),
                combines: s.combines,
                meters: WriteMeters::new(&s.loc),
                backpressure: s.backpressure.clone(),
                next: s.next.clone(),
            }),
        })
    }

    /// Starts a commit: takes an instant, creates the requested and inflight
    /// files, starts the heartbeat and the writer tasks. With
    /// [`WriteSettings::begin_next`], the commit the last one began, if it
    /// is still kept, is taken instead of a new instant.
    pub async fn start_commit(&self) -> Result<Commit> {
        Commit::start(self.shared.clone()).await
    }

    /// Withdraws the commit begun for this client's next commit
    /// ([`WriteSettings::begin_next`]), if one is kept, rather than leaving
    /// it pending until its interval ends. A client that begins commits
    /// early calls this when it stops writing: dropped without it, the
    /// begun commit stays pending until recovery rolls it back once its
    /// heartbeat expires.
    pub async fn close(&self) {
        self.shared.next.withdraw(&self.shared.loc, &self.shared.timeline).await;
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

    /// Takes writer id `id` over as a source of this client's commits, as
    /// [`WriteClient::register`] takes the client's own: under the table
    /// lock its generation is raised by one, and the status returned holds
    /// its last committed checkpoint (a source position). A commit that
    /// records a position for the lease ([`Commit::commit_with_sources`])
    /// fails, and nothing of it becomes visible, once another client took
    /// the id over since; so several clients can move sources between them
    /// (Kafka partitions in a rebalance) and none records a position of a
    /// source it no longer holds.
    pub async fn take_over_source(&self, id: &str) -> Result<(SourceLease, WriterStatus)> {
        let state = WriterState::new(&self.shared.loc, &self.shared.config, id)?;
        SourceLease::take_over(state, &self.shared.time).await
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
        Ok(lookup_writer(&self.shared.loc, &self.shared.config, writer_id).await?)
    }

    /// The last checkpoint `writer_id` attached to a commit that is
    /// visible, if any ([`WriteClient::checkpoint`]).
    pub async fn last_checkpoint(&self, writer_id: &str) -> Result<Option<String>> {
        Ok(self.checkpoint(writer_id).await?.checkpoint.map(|c| c.checkpoint))
    }
}
