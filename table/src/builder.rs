//! Creating and opening tables: a [`TableBuilder`] takes where the table
//! lives, its [`TableSettings`] and the components it uses (clock, locks,
//! spill store), and [`CreateOptions`] say what a new table holds.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::path::Path;
use tributary_timeline::{
    BucketSpec, Clock, FileLock, HudiFileLock, InProcessLock, LeaseLock, LeaseSettings, LockProvider,
    MetadataTableGuard, NewTableConfig, SystemClock, TableConfig, TableLocation, compaction_lease_file, create_folder,
    hudi_lock_file, lease_lock_file, local_compaction_lock_file, local_instant_lock_file, local_meta_dir,
    local_temp_dir, properties_file, timeline_dir,
};

use crate::components::{Components, Spill};
use crate::create_options::{CreateOptions, compact_json};
use crate::error::{Error, Result};
use crate::settings::{LockKind, TableSettings};
use crate::table::Table;

/// What a [`TableBuilder`] was pointed at.
#[derive(Debug, Clone)]
enum Target {
    /// A location in any store.
    Location(TableLocation),
    /// A local folder, not yet resolved.
    Local(PathBuf),
    /// A URI and store options, not yet parsed ([`TableLocation::parse_with`]).
    Uri(String, Vec<(String, String)>),
}

/// Builds a [`Table`]: where it lives, its [`TableSettings`] and the
/// components it uses, each injected with a `with_*` method or defaulted:
///
/// - clock: [`SystemClock`];
/// - instant lock and compaction lock: per [`TableSettings::lock`] (by
///   default an OS [`FileLock`] on the table folder for a table in a local
///   folder, a [`LeaseLock`] in the table's store otherwise);
/// - spill folder: the table's subfolder of [`TableSettings::spill_dir`], by
///   default the table's `.hoodie/.temp/` for a table in a local folder and
///   its subfolder of the system's temporary folder otherwise, through a
///   local store that skips fsync (spill files never outlive a compaction).
///
/// Nothing is checked or resolved until [`TableBuilder::open`] or
/// [`TableBuilder::create`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> tributary_table::Result<()> {
/// use std::sync::Arc;
/// use tributary_table::object_store::{memory::InMemory, path::Path};
/// use tributary_table::{CreateOptions, ManualClock, Table, TableLocation};
///
/// let location = TableLocation::new(Arc::new(InMemory::new()), Path::from("warehouse/trips"));
/// let schema = r#"{"type":"record","name":"trip","fields":[
///     {"name":"uuid","type":"string"},{"name":"ts","type":"long"}]}"#;
/// let table = Table::builder(location)
///     .with_clock(Arc::new(ManualClock::new(1_766_264_468_078)))
///     .with_spill_store(Arc::new(InMemory::new()), Path::from("spill"))
///     .create(CreateOptions::new(schema, "uuid", "ts"))
///     .await?;
/// assert_eq!(table.config().name, "trips");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `open` or `create` is called"]
pub struct TableBuilder {
    target: Target,
    settings: TableSettings,
    clock: Option<Arc<dyn Clock>>,
    lock: Option<Arc<dyn LockProvider>>,
    compaction_lock: Option<Arc<dyn LockProvider>>,
    spill: Option<(Arc<dyn ObjectStore>, Path)>,
}

impl TableBuilder {
    /// A builder for the table at `location`.
    pub fn new(location: TableLocation) -> Self {
        Self::for_target(Target::Location(location))
    }

    /// A builder for the table in local folder `dir` (resolved against the
    /// current folder), written durably.
    pub fn local(dir: impl Into<PathBuf>) -> Self {
        Self::for_target(Target::Local(dir.into()))
    }

    /// A builder for the table at `uri`: a local path, `file://`,
    /// `memory://`, `s3://`, `gs://` or `az://`, its store configured from
    /// the environment and [`TableBuilder::with_store_options`]; see
    /// [`TableLocation::parse_with`].
    pub fn uri(uri: impl Into<String>) -> Self {
        Self::for_target(Target::Uri(uri.into(), Vec::new()))
    }

    /// Options for the store of a builder made with [`TableBuilder::uri`]
    /// (`endpoint`, `region`, `access_key_id`, `allow_http`, `retry_max`,
    /// ...), applied after the environment's. Ignored for a builder given a
    /// location.
    pub fn with_store_options<K: Into<String>, V: Into<String>>(
        mut self,
        options: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        if let Target::Uri(_, opts) = &mut self.target {
            opts.extend(options.into_iter().map(|(k, v)| (k.into(), v.into())));
        }
        self
    }

    fn for_target(target: Target) -> Self {
        Self { target, settings: TableSettings::default(), clock: None, lock: None, compaction_lock: None, spill: None }
    }

    /// The table's settings; [`TableSettings::default`] if not given.
    pub fn with_settings(mut self, settings: TableSettings) -> Self {
        self.settings = settings;
        self
    }

    /// The clock instants, heartbeats and leases are read from; by default
    /// [`SystemClock`].
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The lock that serialises the table's instants, shared by every time
    /// generator, write client, compactor and cleaner of the table; by
    /// default the one [`TableSettings::lock`] names.
    pub fn with_lock(mut self, lock: Arc<dyn LockProvider>) -> Self {
        self.lock = Some(lock);
        self
    }

    /// The lock that lets one compactor or cleaner at a time work on the
    /// table; it must differ from the instant lock. By default the one
    /// [`TableSettings::lock`] names.
    pub fn with_compaction_lock(mut self, lock: Arc<dyn LockProvider>) -> Self {
        self.compaction_lock = Some(lock);
        self
    }

    /// Where compactors put their spill files: folder `dir` of `store`. By
    /// default [`TableSettings::spill_dir`]. Spill folders are named by
    /// compaction instant and file group, so tables that may compact at
    /// once need folders of their own.
    pub fn with_spill_store(mut self, store: Arc<dyn ObjectStore>, dir: Path) -> Self {
        self.spill = Some((store, dir));
        self
    }

    /// Opens the table, validating its configuration.
    pub async fn open(self) -> Result<Table> {
        let (loc, components) = self.build()?;
        // `hoodie.properties`, or its backup while a Hudi-style update of
        // it is in flight (`tributary_timeline::properties`).
        let Some(stored) = tributary_timeline::read_properties(&loc).await? else {
            // The store may be missing altogether (no such bucket): a
            // listing of the table's folder says so.
            if let Err(e) = loc.store.list_with_delimiter(Some(&loc.root)).await {
                return Err(Error::InvalidInput {
                    what: format!("table URI `{loc}`"),
                    reason: format!("the store answered that the table is missing, then failed to list it: {e}"),
                });
            }
            return Err(Error::NotATable { path: loc.to_string() });
        };
        let file = stored.path.filename().unwrap_or("hoodie.properties");
        let shown = match loc.local_folder() {
            Some(dir) => local_meta_dir(dir).join(file).display().to_string(),
            None => format!("{loc}/.hoodie/{file}"),
        };
        // The reader parsed the file already; what it could not parse (a
        // damaged file with no intact backup) is parsed again, to report why.
        let config = if stored.properties.is_empty() {
            TableConfig::parse(&stored.text, &shown)?
        } else {
            TableConfig::from_properties(stored.properties, &shown)?
        };
        Ok(Table { loc, config, components })
    }

    /// Creates a version-8 Merge-on-Read table: `.hoodie/hoodie.properties`,
    /// then `.hoodie/.tributary/writers.json`, which records that every
    /// checkpoint of the table is in a writer state file (so looking up a
    /// writer id that has none reads no commit).
    pub async fn create(self, options: CreateOptions) -> Result<Table> {
        let (loc, components) = self.build()?;
        options.check()?;
        let src = options.schema_source.as_str();
        let name = match &options.name {
            Some(n) => n.clone(),
            None => loc.name(),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Error::InvalidInput {
                what: "table name".into(),
                reason: format!("`{name}` must be non-empty ASCII letters, digits or `_` (use --name)"),
            });
        }
        let config = TableConfig::new_table(&NewTableConfig {
            version: options.table_version,
            name,
            database: options.database.clone(),
            record_key_fields: options.record_key_fields.clone(),
            ordering_fields: options.ordering_fields.clone(),
            partition_field: options.partition_field.clone(),
            hive_style_partitioning: options.hive_style_partitioning,
            merge_mode: options.merge_mode,
            bucket: BucketSpec { num_buckets: options.buckets, hash: options.bucket_hash },
            schema_json: compact_json(&options.schema_json, src)?,
            sequence_groups: options.sequence_groups.clone(),
            tombstone_retention: options.tombstone_retention,
            time_mode: Some(options.time_mode),
            max_logs_per_file_group: options.max_logs_per_file_group,
            evolve_on_write: options.evolve_on_write,
            change_log: options.change_log,
        });
        // The creation time makes the file this create's own, so a retried
        // create that finds it knows whether it wrote it or found a table.
        let created = chrono::DateTime::from_timestamp_millis(components.clock.now_millis())
            .map_or_else(String::new, |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        let text = config.to_properties_text(&format!("Created by tributary at {created}"))?;
        match loc.create(&properties_file(&loc.root), text.into_bytes()).await {
            Err(tributary_timeline::StorageError::AlreadyExists { .. }) => {
                return Err(Error::TableExists { path: loc.to_string() });
            }
            other => other?,
        }
        // Every checkpoint of this table will be in a writer state file, so
        // looking up a writer id without one scans no commits.
        tributary_timeline::mark_new_table(&loc).await?;
        // Hudi's Java timeline lists `.hoodie/timeline/` and fails when a
        // local file system has no such folder (object stores have none).
        if loc.local_folder().is_some() {
            create_folder(loc.store.as_ref(), &timeline_dir(&loc.root, config.timeline_layout, &config.timeline_path))
                .await?;
        }
        Ok(Table { loc, config, components })
    }

    /// Resolves the location and the components.
    fn build(self) -> Result<(TableLocation, Components)> {
        let Self { target, settings, clock, lock, compaction_lock, spill } = self;
        let loc = match target {
            Target::Location(loc) => loc,
            Target::Local(dir) => tributary_timeline::local_location(dir)?,
            Target::Uri(uri, options) => tributary_timeline::parse_location_with(&uri, options)?,
        };
        // Every request the table's store answers is counted in metrics.
        let loc = loc.metered();
        let invalid = |what: &str, reason: String| Error::InvalidInput {
            what: format!("table settings of {loc}: {what}"),
            reason,
        };
        if settings.heartbeat_expiry.is_zero() {
            return Err(invalid("heartbeat_expiry_ms", "must be longer than 0 ms".into()));
        }
        let clock = clock.unwrap_or_else(|| Arc::new(SystemClock));
        let local_dir = loc.local_folder().map(std::path::Path::to_path_buf);
        // The kind of each role's default lock: instants, then compaction.
        // Hudi's lock file serialises instants and completions; the
        // compaction lock stays Tributary's own, as for any table.
        let kind = match (settings.lock, &local_dir) {
            (LockKind::Auto, Some(_)) => LockKind::File,
            (LockKind::Auto, None) => LockKind::Lease,
            (kind, _) => kind,
        };
        let compaction_kind = match (kind, &local_dir) {
            (LockKind::HudiFile, Some(_)) => LockKind::File,
            (LockKind::HudiFile, None) => LockKind::Lease,
            (kind, _) => kind,
        };
        let owner = settings.lock_owner.clone().unwrap_or_else(default_owner);
        let lease = |lease: Duration| -> Result<LeaseSettings> {
            let s = LeaseSettings {
                lease,
                renew_interval: settings.lock_renew_interval,
                acquire_timeout: settings.lock_acquire_timeout,
                ..LeaseSettings::default()
            };
            s.validate()
                .map_err(|e| invalid("lock_lease_ms, compaction_lease_ms, lock_renew_interval_ms", e.to_string()))?;
            Ok(s)
        };
        // (A lock that keeps no last issued time, such as Hudi's, refuses
        // hybrid-logical instants in the time generator.)
        let default_lock = |kind: LockKind, compaction: bool| -> Result<Arc<dyn LockProvider>> {
            Ok(match kind {
                LockKind::HudiFile => Arc::new(HudiFileLock::at(
                    loc.store.clone(),
                    hudi_lock_file(&loc.root),
                    owner.clone(),
                    clock.clone(),
                    (!settings.hudi_lock_expire.is_zero()).then_some(settings.hudi_lock_expire),
                    settings.lock_acquire_timeout,
                )),
                LockKind::File => {
                    let Some(dir) = &local_dir else {
                        return Err(invalid(
                            "lock",
                            "a file lock needs a table in a local folder; use the lease lock or inject one with \
                             with_lock"
                                .into(),
                        ));
                    };
                    if compaction {
                        Arc::new(FileLock::at(local_compaction_lock_file(dir)))
                    } else {
                        Arc::new(FileLock::at(local_instant_lock_file(dir)))
                    }
                }
                LockKind::InProcess => Arc::new(InProcessLock::new()),
                _ if compaction => Arc::new(LeaseLock::at(
                    loc.store.clone(),
                    compaction_lease_file(&loc.root),
                    owner.clone(),
                    clock.clone(),
                    lease(settings.compaction_lease)?,
                )),
                _ => Arc::new(LeaseLock::at(
                    loc.store.clone(),
                    lease_lock_file(&loc.root),
                    owner.clone(),
                    clock.clone(),
                    lease(settings.lock_lease)?,
                )),
            })
        };
        let lock = match lock {
            Some(l) => l,
            None => default_lock(kind, false)?,
        };
        let compaction_lock = match compaction_lock {
            Some(l) => l,
            None => default_lock(compaction_kind, true)?,
        };
        // Spill folders are named by compaction instant and file group
        // alone, which two tables can share: a folder outside the table
        // holds one subfolder per table, lest one table's compaction clear
        // or read another's spill files.
        let spill = match (spill, &settings.spill_dir, &local_dir) {
            (Some((store, dir)), _, _) => Spill::Given(store, dir),
            (None, Some(dir), _) => Spill::Local(dir.join(spill_subfolder(&loc))),
            (None, None, Some(table)) => Spill::Local(local_temp_dir(table)),
            (None, None, None) => {
                Spill::Local(std::env::temp_dir().join("tributary-spill").join(spill_subfolder(&loc)))
            }
        };
        let metadata_table = MetadataTableGuard::new(loc.clone());
        Ok((loc, Components { settings, clock, lock, compaction_lock, spill, metadata_table }))
    }
}

/// The subfolder of a shared spill folder that the table at `loc` spills
/// to: the table's folder name and a CRC-32 of its location as it reads,
/// the same in every process, so a compaction still finds what a crashed
/// attempt of it spilled.
fn spill_subfolder(loc: &TableLocation) -> String {
    let name: String =
        loc.root.filename().unwrap_or("table").chars().filter(char::is_ascii_alphanumeric).take(40).collect();
    format!("{name}-{:08x}", crc32fast::hash(loc.to_string().as_bytes()))
}

/// The owner a lease lock names by default: host and process.
fn default_owner() -> String {
    let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "host".into());
    format!("{host}-{}", std::process::id())
}

/// The ways to a [`TableBuilder`], and the shortcuts through one with
/// default settings and components.
impl Table {
    /// A builder for the table at `location`.
    pub fn builder(location: TableLocation) -> TableBuilder {
        TableBuilder::new(location)
    }

    /// A builder for the table at `uri` (a local path, `file://`,
    /// `memory://`, `s3://`, `gs://` or `az://`); see [`TableBuilder::uri`].
    pub fn builder_uri(uri: impl Into<String>) -> TableBuilder {
        TableBuilder::uri(uri)
    }

    /// A builder for the table in local folder `dir`; see
    /// [`TableBuilder::local`].
    pub fn builder_local(dir: impl Into<PathBuf>) -> TableBuilder {
        TableBuilder::local(dir)
    }

    /// Creates a table at a local folder with default settings and
    /// components: `Table::builder_local(path).create(options)`.
    pub async fn create_local(path: impl Into<PathBuf>, options: CreateOptions) -> Result<Self> {
        TableBuilder::local(path).create(options).await
    }

    /// Creates a version-8 Merge-on-Read table at `loc` with default
    /// settings and components: `Table::builder(loc).create(options)`.
    pub async fn create(loc: TableLocation, options: CreateOptions) -> Result<Self> {
        TableBuilder::new(loc).create(options).await
    }

    /// Opens the table at a local folder with default settings and
    /// components: `Table::builder_local(path).open()`.
    pub async fn open_local(path: impl Into<PathBuf>) -> Result<Self> {
        TableBuilder::local(path).open().await
    }

    /// Opens the table at `uri` with its store configured from the
    /// environment and default settings: `Table::builder_uri(uri).open()`.
    pub async fn open_uri(uri: impl Into<String>) -> Result<Self> {
        TableBuilder::uri(uri).open().await
    }

    /// Opens the table at `loc` with default settings and components:
    /// `Table::builder(loc).open()`.
    pub async fn open(loc: TableLocation) -> Result<Self> {
        TableBuilder::new(loc).open().await
    }
}
