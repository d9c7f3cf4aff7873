//! Creating and opening tables: a [`TableBuilder`] takes where the table
//! lives, its [`TableSettings`] and the components it uses (clock, locks,
//! spill store), and [`CreateOptions`] say what a new table holds.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use apache_avro::Schema;
use object_store::ObjectStore;
use object_store::path::Path;
use tributary_format::{RecordKey, TableSchema};
use tributary_timeline::config::{NewTableConfig, SequenceGroup, TableConfig, split_fields};
use tributary_timeline::layout;
use tributary_timeline::protocol::metadata_table::MetadataTableGuard;
use tributary_timeline::store::create_folder;
use tributary_timeline::{
    BucketHash, BucketSpec, Clock, FileLock, HudiFileLock, InProcessLock, LeaseLock, LeaseSettings, LockProvider,
    MergeMode, SystemClock, TableLocation, TimeMode, TombstoneRetention,
};

use crate::error::{Error, Result};
use crate::settings::{LockKind, TableSettings};
use crate::table::Table;

/// What [`TableBuilder::create`] needs to make a table.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// Table name; defaults to the last folder of the table's path.
    pub name: Option<String>,
    /// Database name.
    pub database: Option<String>,
    /// The Avro schema (JSON) of the table's own columns.
    pub schema_json: String,
    /// Where the schema came from, for messages.
    pub schema_source: String,
    /// Record key fields in declared order: one, or several for a composite
    /// key, whose `_hoodie_record_key` is `field:value` pairs joined by `,`
    /// as Hudi's complex key generator writes it
    /// ([`tributary_format::key`]).
    pub record_key_fields: Vec<String>,
    /// Ordering (event-time) field.
    pub ordering_field: String,
    /// Optional partition field.
    pub partition_field: Option<String>,
    /// Name partition folders `field=value`.
    pub hive_style_partitioning: bool,
    /// Number of buckets.
    pub buckets: u32,
    /// Bucket hash.
    pub bucket_hash: BucketHash,
    /// Merge mode.
    pub merge_mode: MergeMode,
    /// Sequence groups for partial-column writers (merge mode becomes CUSTOM).
    pub sequence_groups: Vec<SequenceGroup>,
    /// How long compaction keeps tombstones of deleted keys (default:
    /// forever); a duration needs a date or timestamp ordering field, a
    /// number is in the ordering field's units.
    pub tombstone_retention: TombstoneRetention,
    /// The time mode the table records for its writers (`tributary.time.mode`
    /// in `hoodie.properties`); [`TimeSettings::mode`](crate::TimeSettings::mode)
    /// overrides it per process. By default [`TimeMode::HybridLogical`]: no
    /// lock hold sleeps, so commits are not capped at a few per second. A
    /// table Hudi's Java writers share needs [`TimeMode::WaitForSkew`], the
    /// mode they use (under a lock both sides take).
    pub time_mode: TimeMode,
}

impl CreateOptions {
    /// Options with defaults: 16 buckets, murmur3, event-time merging,
    /// hive-style partitions. `record_key` is the record key field, or
    /// several separated by `,` for a composite key (`"user_id,date,group_id"`,
    /// as `hoodie.table.recordkey.fields` lists them).
    pub fn new(
        schema_json: impl Into<String>,
        record_key: impl Into<String>,
        ordering_field: impl Into<String>,
    ) -> Self {
        Self {
            name: None,
            database: None,
            schema_json: schema_json.into(),
            schema_source: "schema".into(),
            record_key_fields: split_fields(&record_key.into()),
            ordering_field: ordering_field.into(),
            partition_field: None,
            hive_style_partitioning: true,
            buckets: 16,
            bucket_hash: BucketHash::Murmur3,
            merge_mode: MergeMode::EventTime,
            sequence_groups: Vec::new(),
            tombstone_retention: TombstoneRetention::Forever,
            time_mode: TimeMode::HybridLogical,
        }
    }
}

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

/// Where a table's compactors spill.
#[derive(Debug, Clone)]
pub(crate) enum Spill {
    /// What [`TableBuilder::with_spill_store`] was given.
    Given(Arc<dyn ObjectStore>, Path),
    /// A local folder, through a local store that skips fsync and removes
    /// the folders it empties; created when a compactor is made.
    Local(PathBuf),
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
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> tributary::Result<()> {
/// use std::sync::Arc;
/// use object_store::{memory::InMemory, path::Path};
/// use tributary::{CreateOptions, Table};
/// use tributary::timeline::{ManualClock, TableLocation};
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

/// The components a table was built with.
#[derive(Debug, Clone)]
pub(crate) struct Components {
    pub(crate) settings: TableSettings,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) lock: Arc<dyn LockProvider>,
    pub(crate) compaction_lock: Arc<dyn LockProvider>,
    pub(crate) spill: Spill,
    /// Turns the table's metadata table off in the first hold of the table
    /// lock by any of the table's time generators: one per opened (or
    /// created) table, shared by its clones and all their generators.
    pub(crate) metadata_table: MetadataTableGuard,
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
        let Some(stored) = tributary_timeline::properties::read(&loc).await? else {
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
            Some(dir) => layout::local_meta_dir(dir).join(file).display().to_string(),
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
        let src = options.schema_source.as_str();
        let schema = Schema::parse_str(&options.schema_json).map_err(|e| Error::InvalidInput {
            what: src.to_string(),
            reason: format!("not a valid Avro schema: {e}"),
        })?;
        let Schema::Record(record) = &schema else {
            return Err(Error::InvalidInput {
                what: src.to_string(),
                reason: "the top-level schema must be a record".into(),
            });
        };
        if let Some(meta) =
            record.fields.iter().find(|f| f.name.starts_with("_hoodie_") && f.name != "_hoodie_is_deleted")
        {
            return Err(Error::InvalidInput {
                what: src.to_string(),
                reason: format!("field `{}` uses the reserved `_hoodie_` prefix", meta.name),
            });
        }
        check_record_key(&schema, src, &options)?;
        check_field(&schema, src, "ordering", &options.ordering_field)?;
        let ordering = check_orderable(&schema, src, "ordering field", &options.ordering_field)?;
        check_retention(options.tombstone_retention, ordering, &options.ordering_field)?;
        if let Some(p) = &options.partition_field {
            check_field(&schema, src, "partition", p)?;
        }
        check_sequence_groups(&schema, src, &options)?;
        if options.buckets == 0 {
            return Err(Error::InvalidInput { what: "--buckets".into(), reason: "must be at least 1".into() });
        }
        let name = match &options.name {
            Some(n) => n.clone(),
            None => default_name(&loc),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(Error::InvalidInput {
                what: "table name".into(),
                reason: format!("`{name}` must be non-empty ASCII letters, digits or `_` (use --name)"),
            });
        }
        let config = TableConfig::new_table(&NewTableConfig {
            name,
            database: options.database.clone(),
            record_key_fields: options.record_key_fields.clone(),
            ordering_field: options.ordering_field.clone(),
            partition_field: options.partition_field.clone(),
            hive_style_partitioning: options.hive_style_partitioning,
            merge_mode: options.merge_mode,
            bucket: BucketSpec { num_buckets: options.buckets, hash: options.bucket_hash },
            schema_json: compact_json(&options.schema_json, src)?,
            sequence_groups: options.sequence_groups.clone(),
            tombstone_retention: options.tombstone_retention,
            time_mode: Some(options.time_mode),
        });
        // The creation time makes the file this create's own, so a retried
        // create that finds it knows whether it wrote it or found a table.
        let created = chrono::DateTime::from_timestamp_millis(components.clock.now_millis())
            .map_or_else(String::new, |t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
        let text = config.to_properties_text(&format!("Created by tributary at {created}"))?;
        match loc.create(&layout::properties_file(&loc.root), text.into_bytes()).await {
            Err(tributary_timeline::StorageError::AlreadyExists { .. }) => {
                return Err(Error::TableExists { path: loc.to_string() });
            }
            other => other?,
        }
        // Every checkpoint of this table will be in a writer state file, so
        // looking up a writer id without one scans no commits.
        tributary_timeline::protocol::writer_state::mark_new_table(&loc).await?;
        // Hudi's Java timeline lists `.hoodie/timeline/` and fails when a
        // local file system has no such folder (object stores have none).
        if loc.local_folder().is_some() {
            create_folder(
                loc.store.as_ref(),
                &layout::timeline_dir(&loc.root, config.timeline_layout, &config.timeline_path),
            )
            .await?;
        }
        Ok(Table { loc, config, components })
    }

    /// Resolves the location and the components.
    fn build(self) -> Result<(TableLocation, Components)> {
        let Self { target, settings, clock, lock, compaction_lock, spill } = self;
        let loc = match target {
            Target::Location(loc) => loc,
            Target::Local(dir) => TableLocation::local(dir)?,
            Target::Uri(uri, options) => TableLocation::parse_with(&uri, options)?,
        };
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
                    layout::hudi_lock_file(&loc.root),
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
                        Arc::new(FileLock::at(layout::local_compaction_lock_file(dir)))
                    } else {
                        Arc::new(FileLock::at(layout::local_instant_lock_file(dir)))
                    }
                }
                LockKind::InProcess => Arc::new(InProcessLock::new()),
                _ if compaction => Arc::new(LeaseLock::at(
                    loc.store.clone(),
                    layout::compaction_lease_file(&loc.root),
                    owner.clone(),
                    clock.clone(),
                    lease(settings.compaction_lease)?,
                )),
                _ => Arc::new(LeaseLock::at(
                    loc.store.clone(),
                    layout::lease_lock_file(&loc.root),
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
            (None, None, Some(table)) => Spill::Local(layout::local_temp_dir(table)),
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

fn field_names(schema: &Schema) -> Vec<&str> {
    match schema {
        Schema::Record(r) => r.fields.iter().map(|f| f.name.as_str()).collect(),
        _ => Vec::new(),
    }
}

fn check_field(schema: &Schema, source: &str, role: &str, name: &str) -> Result<()> {
    let names = field_names(schema);
    if names.contains(&name) {
        Ok(())
    } else {
        Err(Error::InvalidInput {
            what: source.to_string(),
            reason: format!("{role} field `{name}` is not in the schema (fields: {})", names.join(", ")),
        })
    }
}

/// Checks the record key fields: at least one, none twice, each in the
/// schema and of a type keys can hold (string, int, long, boolean, date,
/// timestamps, decimal; see [`tributary_format::key`]). Errors name the
/// field and the schema's source.
fn check_record_key(schema: &Schema, source: &str, options: &CreateOptions) -> Result<()> {
    let fields = &options.record_key_fields;
    if fields.is_empty() {
        return Err(Error::InvalidInput { what: "--record-key".into(), reason: "no record key field given".into() });
    }
    for (i, f) in fields.iter().enumerate() {
        if fields[..i].contains(f) {
            return Err(Error::InvalidInput {
                what: "--record-key".into(),
                reason: format!("record key field `{f}` is listed twice"),
            });
        }
        check_field(schema, source, "record key", f)?;
    }
    let table = TableSchema::new(&options.schema_json, fields, None, None)
        .map_err(|e| Error::InvalidInput { what: source.to_string(), reason: e.to_string() })?;
    for (name, column) in table.record_key().names().zip(table.record_key().columns()) {
        if !RecordKey::supports(table.arrow().field(column).data_type()) {
            return Err(Error::InvalidInput {
                what: source.to_string(),
                reason: format!(
                    "record key field `{name}` has type {}, which a record key cannot hold; use string, int, \
                     long, boolean, date, a timestamp (millis or micros) or decimal",
                    avro_type_of(schema, name)
                ),
            });
        }
    }
    Ok(())
}

/// The Avro type of field `name` of a record schema, as JSON.
fn avro_type_of(schema: &Schema, name: &str) -> String {
    let Schema::Record(r) = schema else { return String::new() };
    r.fields
        .iter()
        .find(|f| f.name == name)
        .map(|f| serde_json::to_string(&f.schema).unwrap_or_else(|_| format!("{:?}", f.schema)))
        .unwrap_or_default()
}

/// The family of an ordering field's type, for the checks that depend on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OrderingKind {
    /// int, long, float, double, decimal.
    Number,
    /// date and timestamps.
    Time,
    /// string.
    Text,
}

/// The non-null type of a field (the one branch of a nullable union).
fn non_null(schema: &Schema) -> &Schema {
    match schema {
        Schema::Union(u) => match u.variants().iter().filter(|v| !matches!(v, Schema::Null)).collect::<Vec<_>>()[..] {
            [one] => one,
            _ => schema,
        },
        other => other,
    }
}

/// Rejects an ordering field whose type cannot order versions and deletes
/// in every reader: int, long, float, double, string, date, timestamps
/// (millis or micros) and decimals that fit the delete record's
/// `decimal(30,15)` can, each optionally nullable. Returns its family.
fn check_orderable(schema: &Schema, source: &str, role: &str, name: &str) -> Result<OrderingKind> {
    let Schema::Record(r) = schema else { return Ok(OrderingKind::Number) };
    let Some(field) = r.fields.iter().find(|f| f.name == name) else { return Ok(OrderingKind::Number) };
    let shown = || serde_json::to_string(&field.schema).unwrap_or_else(|_| format!("{:?}", field.schema));
    let kind = match non_null(&field.schema) {
        Schema::Int | Schema::Long | Schema::Float | Schema::Double => Some(OrderingKind::Number),
        Schema::Date | Schema::TimestampMillis | Schema::TimestampMicros => Some(OrderingKind::Time),
        Schema::String => Some(OrderingKind::Text),
        Schema::Decimal(d) => {
            let (scale, whole) = (d.scale, d.precision.saturating_sub(d.scale));
            let limit = usize::from(tributary_format::codec::DELETE_DECIMAL_SCALE as u8);
            if scale > limit || whole > limit {
                return Err(Error::InvalidInput {
                    what: source.to_string(),
                    reason: format!(
                        "{role} `{name}` has type {}, but a delete carries its ordering value as decimal(30,15): \
                         use a decimal with at most 15 digits before and 15 after the point",
                        shown()
                    ),
                });
            }
            Some(OrderingKind::Number)
        }
        _ => None,
    };
    kind.ok_or_else(|| Error::InvalidInput {
        what: source.to_string(),
        reason: format!(
            "{role} `{name}` has type {}, which cannot order records; use int, long, float, double, \
             string, date, a timestamp (millis or micros) or decimal",
            shown()
        ),
    })
}

/// Rejects a tombstone retention the ordering field cannot measure: a
/// duration needs a date or timestamp, a number a numeric or time field.
fn check_retention(retention: TombstoneRetention, ordering: OrderingKind, field: &str) -> Result<()> {
    let fits = match retention {
        TombstoneRetention::Forever => true,
        TombstoneRetention::Lateness(_) => ordering == OrderingKind::Time,
        TombstoneRetention::Amount(_) => ordering != OrderingKind::Text,
    };
    if fits {
        return Ok(());
    }
    let need = match ordering {
        OrderingKind::Number => "a number in the field's units (or `forever`)",
        OrderingKind::Time => "a duration such as `7d` (or `forever`)",
        OrderingKind::Text => "`forever`, as a string has no distance",
    };
    Err(Error::InvalidInput {
        what: "--tombstone-retention".into(),
        reason: format!("`{}` does not fit the ordering field `{field}`: use {need}", retention.render()),
    })
}

/// Rejects sequence groups that cannot be merged unambiguously.
fn check_sequence_groups(schema: &Schema, source: &str, options: &CreateOptions) -> Result<()> {
    let bad = |reason: String| Err(Error::InvalidInput { what: "--sequence-group".into(), reason });
    let mut owner: std::collections::BTreeMap<&str, &str> = std::collections::BTreeMap::new();
    if !options.sequence_groups.is_empty()
        && let Schema::Record(r) = schema
    {
        for f in &r.fields {
            let nullable =
                matches!(&f.schema, Schema::Union(u) if u.variants().iter().any(|v| matches!(v, Schema::Null)));
            let fixed = options.record_key_fields.contains(&f.name)
                || options.partition_field.as_deref() == Some(f.name.as_str());
            if !nullable && !fixed {
                return bad(format!(
                    "column `{}` must be nullable ([\"null\", ...]) in a table with sequence groups: partial writers leave it unset",
                    f.name
                ));
            }
        }
    }
    for g in &options.sequence_groups {
        if !field_names(schema).contains(&g.ordering.as_str()) {
            return bad(format!("group ordering field `{}` is not in the schema {source}", g.ordering));
        }
        check_orderable(schema, source, "sequence group ordering field", &g.ordering)?;
        for c in std::iter::once(&g.ordering).chain(&g.columns) {
            check_field(schema, source, &format!("sequence group `{}` column", g.ordering), c)?;
            let special = if options.record_key_fields.contains(c) {
                Some("the record key")
            } else if *c == options.ordering_field {
                Some("the table's ordering field")
            } else if options.partition_field.as_deref() == Some(c.as_str()) {
                Some("the partition field")
            } else {
                None
            };
            if let Some(what) = special {
                return bad(format!("column `{c}` is {what}; it cannot belong to a sequence group"));
            }
            if let Some(other) = owner.insert(c, &g.ordering) {
                return bad(format!("column `{c}` is in two sequence groups (`{other}` and `{}`)", g.ordering));
            }
        }
    }
    Ok(())
}

fn compact_json(json: &str, source: &str) -> Result<String> {
    let value: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| Error::InvalidInput { what: source.to_string(), reason: format!("not valid JSON: {e}") })?;
    Ok(value.to_string())
}

/// The last folder of the table's path, with every character other than
/// ASCII letters and digits made `_`: the local folder's name when the
/// builder was given one, else the root path's last segment.
fn default_name(loc: &TableLocation) -> String {
    let last = match loc.local_folder() {
        Some(p) => p.file_name().map(|s| s.to_string_lossy().into_owned()),
        None => loc.root.filename().map(String::from),
    };
    last.unwrap_or_default().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}
