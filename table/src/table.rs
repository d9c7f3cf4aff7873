//! An open table: its location, configuration and components, and what it
//! hands out (time generators, write clients, compactors, cleaning).
//! [`TableBuilder`](crate::TableBuilder) makes one.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::path::Path;
use tributary_compaction::{
    ArchiveSettings, ArchiveSummary, CleanRetention, CleanSummary, Compactor, CompactorSettings,
};
use tributary_timeline::TableConfig;
use tributary_timeline::create_folder;
use tributary_timeline::{
    Clock, FileSystemView, LockProvider, TableLocation, TimeGenerator, TimeMode, Timeline, TimelineFolder,
};

use crate::components::{Components, Spill};
use crate::error::{Error, Result};
use crate::settings::TableSettings;

/// An open Hudi table, with the components it was built with (see
/// [`TableBuilder`](crate::TableBuilder)). Cloning shares them.
#[derive(Debug, Clone)]
pub struct Table {
    pub(crate) loc: TableLocation,
    pub(crate) config: TableConfig,
    pub(crate) components: Components,
}

impl Table {
    /// Where the table lives.
    pub fn location(&self) -> &TableLocation {
        &self.loc
    }

    /// The table configuration.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// The settings the table was built with.
    pub fn settings(&self) -> &TableSettings {
        &self.components.settings
    }

    /// The clock the table reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.components.clock
    }

    /// The lock that serialises the table's instants.
    pub fn lock(&self) -> &Arc<dyn LockProvider> {
        &self.components.lock
    }

    /// The lock that lets one compactor or cleaner at a time work on the table.
    pub fn compaction_lock(&self) -> &Arc<dyn LockProvider> {
        &self.components.compaction_lock
    }

    /// Loads the current timeline.
    pub async fn timeline(&self) -> Result<Timeline> {
        Ok(Timeline::load(&self.loc, &self.config).await?)
    }

    /// Loads the current file-system view.
    pub async fn file_system_view(&self) -> Result<(Timeline, FileSystemView)> {
        let timeline = self.timeline().await?;
        let view = FileSystemView::load(&self.loc, &self.config, &timeline).await?;
        Ok((timeline, view))
    }

    /// The time mode this table's generators use: the one its
    /// [`TimeSettings`](crate::TimeSettings) name, else the one the table records, else
    /// wait-for-skew (a table another engine made, whose Java writers may
    /// share it).
    pub fn time_mode(&self) -> TimeMode {
        self.components.settings.time.mode.or(self.config.time_mode).unwrap_or(TimeMode::WaitForSkew)
    }

    /// A TrueTime generator per the table's [`TimeSettings`](crate::TimeSettings), reading the
    /// table's clock under the table's instant lock. The first lock hold of
    /// any generator of this opened `Table` (or of its clones) turns off a
    /// metadata table the table has, which Tributary does not maintain
    /// ([`tributary_timeline::MetadataTableGuard`]); a `Table` opened
    /// again checks again.
    pub fn time_generator(&self) -> TimeGenerator {
        let Components { settings, clock, lock, .. } = &self.components;
        TimeGenerator::new(self.time_mode(), settings.time.max_clock_skew, clock.clone(), lock.clone())
            .with_first_hold_hook(Arc::new(self.components.metadata_table.clone()))
            .metered(&self.loc.name())
    }

    /// A write client for this table, taking instants from
    /// [`Table::time_generator`]. Its heartbeat interval must be shorter
    /// than the table's [`TableSettings::heartbeat_expiry`], or its writes
    /// would be rolled back as failed while it writes them.
    ///
    /// It writes the table's create schema; a table another engine made
    /// records none, and its writers write its latest commit's schema
    /// (`extraMetadata.schema`), which this reads from the timeline now.
    pub async fn write_client(
        &self,
        settings: tributary_writer::WriteSettings,
    ) -> Result<tributary_writer::WriteClient> {
        let expiry = self.components.settings.heartbeat_expiry;
        if settings.heartbeat_interval >= expiry {
            return Err(Error::InvalidInput {
                what: format!("write client of {}", self.loc),
                reason: format!(
                    "heartbeat interval {:?} must be shorter than the table's heartbeat expiry {expiry:?}",
                    settings.heartbeat_interval
                ),
            });
        }
        // One listing of the active timeline: an instant this build cannot
        // read (an unknown action) is refused before the client's first
        // commit creates anything.
        let active = TimelineFolder::new(&self.loc, &self.config).load_active().await?;
        // A table whose records merge in ways Tributary does not know is
        // not written either: the writer combines a commit's versions by
        // the same rule.
        tributary_merge::check_merger(&self.config)?;
        // A table Tributary cannot write is reported as such, not as a
        // schema it lacks.
        self.config.check_writable()?;
        // The schema in force: the latest commit's, which holds every
        // column (and sequence group) added since the table was created.
        let (schema, config) = self.in_force(&active).await?;
        let (loc, time) = (self.loc.clone(), self.time_generator());
        let client = tributary_writer::WriteClient::with_schema(loc, config, schema, time, settings)?;
        Ok(client)
    }

    /// A compactor for this table: the table's schema, time generator,
    /// clock, compaction lock and spill store. Its heartbeat expiry is the
    /// table's ([`TableSettings::heartbeat_expiry`]), replacing the one in
    /// `settings`.
    pub async fn compactor(&self, settings: CompactorSettings) -> Result<Compactor> {
        let timeline = self.timeline().await?;
        let schema = self.schema(&timeline).await?;
        let (spill_store, spill_dir) = self.spill_root().await?;
        let settings = CompactorSettings { heartbeat_expiry: self.components.settings.heartbeat_expiry, ..settings };
        Ok(Compactor::builder(self.loc.clone(), self.config.clone())
            .with_schema(schema)
            .with_time(self.time_generator())
            .with_clock(self.components.clock.clone())
            .with_exec_lock(self.components.compaction_lock.clone())
            .with_spill(spill_store, spill_dir)
            .with_settings(settings)
            .build()?)
    }

    /// The store and folder compactors spill to.
    pub(crate) async fn spill_root(&self) -> Result<(Arc<dyn ObjectStore>, Path)> {
        match &self.components.spill {
            Spill::Given(store, dir) => Ok((store.clone(), dir.clone())),
            Spill::Local(dir) => {
                // Spill files never outlive the compaction: written without
                // fsync, and the folders they leave empty removed (never
                // `dir` itself, where writers of a local table put their
                // markers). A store rooted at `dir` needs the folder to
                // exist: it is made through the whole file system's store.
                let invalid = |e: &dyn std::fmt::Display| Error::InvalidInput {
                    what: format!("spill folder {} of {}", dir.display(), self.loc),
                    reason: e.to_string(),
                };
                let absolute = std::path::absolute(dir).map_err(|e| invalid(&e))?;
                let folder = Path::from_absolute_path(&absolute).map_err(|e| invalid(&e))?;
                create_folder(&object_store::local::LocalFileSystem::new(), &folder).await.map_err(|e| invalid(&e))?;
                let store = object_store::local::LocalFileSystem::new_with_prefix(&absolute)
                    .map_err(|e| invalid(&e))?
                    .with_automatic_cleanup(true);
                Ok((Arc::new(store), Path::default()))
            }
        }
    }

    /// Under the compaction lock, rolls back a few failed writes
    /// (heartbeats older than the table's
    /// [`TableSettings::heartbeat_expiry`];
    /// [`tributary_compaction::rollback_before_service`]), then removes
    /// file slices that none of the last `retain_commits` commits
    /// needs, recording a clean instant. `None` when there was nothing to
    /// remove. [`Table::clean_with`] with [`CleanRetention::Commits`].
    pub async fn clean(&self, retain_commits: usize) -> Result<Option<CleanSummary>> {
        self.clean_with(CleanRetention::Commits(retain_commits)).await
    }

    /// [`Table::clean`] keeping what `retention` keeps: the file slices the
    /// last N commits need (Hudi's `KEEP_LATEST_COMMITS`), or those the
    /// commits requested in the last N hours by the table's clock need
    /// (`KEEP_LATEST_BY_HOURS`). An invalid `retention` is refused before
    /// anything runs.
    pub async fn clean_with(&self, retention: CleanRetention) -> Result<Option<CleanSummary>> {
        retention.validate()?;
        let cleaned = self
            .after_rollback(|generator| async move {
                Ok(tributary_compaction::clean(&self.loc, &self.config, &generator, retention).await?)
            })
            .await?;
        if cleaned.is_some() {
            metrics::counter!(crate::metrics::CLEANS, "table" => self.loc.name()).increment(1);
        }
        Ok(cleaned)
    }

    /// Under the compaction lock, rolls back a few failed writes (they
    /// keep every later instant active;
    /// [`tributary_compaction::rollback_before_service`]), then moves the oldest completed
    /// instants into the table's LSM history as [`ArchiveSettings`] allow
    /// (`compaction/src/archive.rs` says which are kept and why).
    pub async fn archive(&self, settings: &ArchiveSettings) -> Result<ArchiveSummary> {
        let done = self
            .after_rollback(|generator| async move {
                Ok(tributary_compaction::archive(&self.loc, &self.config, &generator, settings).await?)
            })
            .await?;
        let table = self.loc.name();
        metrics::counter!(crate::metrics::ARCHIVES, "table" => table.clone()).increment(1);
        metrics::counter!(crate::metrics::ARCHIVED_INSTANTS, "table" => table.clone())
            .increment(done.archived.len() as u64);
        metrics::gauge!(crate::metrics::ACTIVE_INSTANTS, "table" => table).set(done.active as f64);
        Ok(done)
    }

    /// Runs the table service `job` under the compaction lock, after the
    /// rollback of a few failed writes (heartbeats older than the table's
    /// [`TableSettings::heartbeat_expiry`]; the next run takes the next
    /// few), with the table's time generator.
    async fn after_rollback<T, F, Fut>(&self, job: F) -> Result<T>
    where
        F: FnOnce(TimeGenerator) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let generator = self.time_generator();
        let Components { settings, clock, compaction_lock, .. } = &self.components;
        let guard = compaction_lock.acquire().await?;
        let result = async {
            tributary_compaction::rollback_before_service(
                &self.loc,
                &self.config,
                &generator,
                clock.as_ref(),
                settings.heartbeat_expiry,
            )
            .await?;
            job(generator).await
        }
        .await;
        guard.release().await?;
        result
    }
}
