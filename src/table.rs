//! The table API: create and open Hudi tables.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use apache_avro::Schema;
use tributary_timeline::config::{NewTableConfig, SequenceGroup, TableConfig};
use tributary_timeline::{
    BucketHash, BucketSpec, Clock, FileLock, FileSystemView, LeaseLock, LeaseSettings, LockProvider, MergeMode,
    SystemClock, TableLocation, TimeGenerator, TimeMode, Timeline,
};

use crate::error::{Error, Result};

/// What `Table::create` needs to make a table.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// Table name; defaults to the last folder of the path.
    pub name: Option<String>,
    /// Database name.
    pub database: Option<String>,
    /// The Avro schema (JSON) of the table's own columns.
    pub schema_json: String,
    /// Where the schema came from, for messages.
    pub schema_source: String,
    /// Record key field.
    pub record_key: String,
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
}

impl CreateOptions {
    /// Options with defaults: 16 buckets, murmur3, event-time merging, hive-style partitions.
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
            record_key: record_key.into(),
            ordering_field: ordering_field.into(),
            partition_field: None,
            hive_style_partitioning: true,
            buckets: 16,
            bucket_hash: BucketHash::Murmur3,
            merge_mode: MergeMode::EventTime,
            sequence_groups: Vec::new(),
        }
    }
}

/// How writers of a table take instants.
#[derive(Debug, Clone)]
pub struct TimeSettings {
    /// Generator mode.
    pub mode: TimeMode,
    /// Maximum clock skew between any two writers.
    pub max_clock_skew: Duration,
}

impl Default for TimeSettings {
    fn default() -> Self {
        Self { mode: TimeMode::WaitForSkew, max_clock_skew: tributary_timeline::DEFAULT_MAX_CLOCK_SKEW }
    }
}

/// An open Hudi table.
#[derive(Debug, Clone)]
pub struct Table {
    loc: TableLocation,
    config: TableConfig,
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

impl Table {
    /// Creates a table at a local folder.
    pub async fn create_local(path: impl Into<PathBuf>, options: CreateOptions) -> Result<Self> {
        Self::create(TableLocation::local(path)?, options).await
    }

    /// Creates a version-8 Merge-on-Read table at `loc`.
    pub async fn create(loc: TableLocation, options: CreateOptions) -> Result<Self> {
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
        check_field(&schema, src, "record key", &options.record_key)?;
        check_field(&schema, src, "ordering", &options.ordering_field)?;
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
            record_key: options.record_key.clone(),
            ordering_field: options.ordering_field.clone(),
            partition_field: options.partition_field.clone(),
            hive_style_partitioning: options.hive_style_partitioning,
            merge_mode: options.merge_mode,
            bucket: BucketSpec { num_buckets: options.buckets, hash: options.bucket_hash },
            schema_json: compact_json(&options.schema_json, src)?,
            sequence_groups: options.sequence_groups.clone(),
        });
        let text = config.to_properties_text("Created by tributary")?;
        match loc.create(&loc.properties_path(), text.into_bytes()).await {
            Err(tributary_timeline::Error::AlreadyExists { .. }) => {
                return Err(Error::TableExists { path: loc.to_string() });
            }
            other => other?,
        }
        Ok(Self { loc, config })
    }

    /// Opens the table at a local folder.
    pub async fn open_local(path: impl Into<PathBuf>) -> Result<Self> {
        Self::open(TableLocation::local(path)?).await
    }

    /// Opens the table at `loc`, validating its configuration.
    pub async fn open(loc: TableLocation) -> Result<Self> {
        let path = loc.properties_path();
        let bytes = match loc.get(&path).await {
            Ok(b) => b,
            Err(e) if e.is_not_found() => {
                return Err(Error::NotATable { path: loc.to_string() });
            }
            Err(e) => return Err(e.into()),
        };
        let text = String::from_utf8_lossy(&bytes);
        let shown = match &loc.local_root {
            Some(root) => root.join(".hoodie").join("hoodie.properties").display().to_string(),
            None => path.to_string(),
        };
        let config = TableConfig::parse(&text, &shown)?;
        Ok(Self { loc, config })
    }

    /// Where the table lives.
    pub fn location(&self) -> &TableLocation {
        &self.loc
    }

    /// The table configuration.
    pub fn config(&self) -> &TableConfig {
        &self.config
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

    /// The lock writers of this table share: an OS file lock for local
    /// tables, a lease lock on the object store otherwise.
    pub fn default_lock(&self, clock: Arc<dyn Clock>, owner: &str) -> Arc<dyn LockProvider> {
        match &self.loc.local_root {
            Some(root) => Arc::new(FileLock::for_table(root)),
            None => Arc::new(LeaseLock::for_table(
                self.loc.store.clone(),
                &self.loc.root,
                owner,
                clock,
                LeaseSettings::default(),
            )),
        }
    }

    /// A write client for this table with the table's default lock and the system clock.
    pub fn write_client(
        &self,
        time: &TimeSettings,
        settings: tributary_writer::WriteSettings,
    ) -> Result<tributary_writer::WriteClient> {
        Ok(tributary_writer::WriteClient::new(
            self.loc.clone(),
            self.config.clone(),
            self.time_generator(time),
            settings,
        )?)
    }

    /// The lock that lets one compactor at a time execute plans.
    pub fn compaction_lock(&self) -> Arc<dyn LockProvider> {
        match &self.loc.local_root {
            Some(root) => Arc::new(FileLock::at(root.join(".hoodie").join(".aux").join("tributary-compaction.lock"))),
            None => Arc::new(LeaseLock::at(
                self.loc.store.clone(),
                self.loc.meta_dir().join(".locks").join("tributary_compaction.json"),
                format!("pid-{}", std::process::id()),
                Arc::new(SystemClock),
                LeaseSettings { lease: Duration::from_secs(3600), ..Default::default() },
            )),
        }
    }

    /// A compactor for this table.
    pub async fn compactor(
        &self,
        time: &TimeSettings,
        settings: tributary_compaction::execute::CompactorSettings,
    ) -> Result<tributary_compaction::execute::Compactor> {
        let timeline = self.timeline().await?;
        let schema = self.schema(&timeline).await?;
        Ok(tributary_compaction::execute::Compactor::new(
            self.loc.clone(),
            self.config.clone(),
            schema,
            self.time_generator(time),
            self.compaction_lock(),
            settings,
        ))
    }

    /// Rolls back failed writes (expired heartbeats), then removes file
    /// slices that none of the last `retain_commits` commits needs, recording
    /// a clean instant. `None` when there was nothing to remove.
    pub async fn clean(
        &self,
        time: &TimeSettings,
        retain_commits: usize,
        heartbeat_expiry: Duration,
    ) -> Result<Option<tributary_compaction::clean::CleanSummary>> {
        let generator = self.time_generator(time);
        let clock = generator.clock().clone();
        let guard = self.compaction_lock().acquire().await?;
        let result = async {
            tributary_compaction::rollback::rollback_failed_writes(
                &self.loc,
                &self.config,
                &generator,
                clock.as_ref(),
                heartbeat_expiry,
            )
            .await?;
            Ok::<_, Error>(
                tributary_compaction::clean::clean(&self.loc, &self.config, &generator, retain_commits).await?,
            )
        }
        .await;
        guard.release().await?;
        result
    }

    /// A TrueTime generator on this table's default lock and the system clock.
    pub fn time_generator(&self, settings: &TimeSettings) -> TimeGenerator {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let owner = format!("pid-{}", std::process::id());
        let lock = self.default_lock(clock.clone(), &owner);
        TimeGenerator::new(settings.mode, settings.max_clock_skew, clock, lock)
    }
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
            let fixed = f.name == options.record_key || options.partition_field.as_deref() == Some(f.name.as_str());
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
        for c in std::iter::once(&g.ordering).chain(&g.columns) {
            check_field(schema, source, &format!("sequence group `{}` column", g.ordering), c)?;
            let special = if *c == options.record_key {
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

fn default_name(loc: &TableLocation) -> String {
    let last = match &loc.local_root {
        Some(p) => p.file_name().map(|s| s.to_string_lossy().into_owned()),
        None => loc.root.filename().map(String::from),
    };
    last.unwrap_or_default().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}
