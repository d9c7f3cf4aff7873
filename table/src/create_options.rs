//! What a new table holds ([`CreateOptions`]) and the checks its schema
//! and options pass at create time: the record key, ordering, partition
//! and sequence-group fields exist and have types their roles can use, and
//! a tombstone retention the ordering field can measure.

use apache_avro::Schema;
use tributary_format::{RecordKey, TableSchema};
use tributary_timeline::{BucketHash, MergeMode, TimeMode, TombstoneRetention};
use tributary_timeline::{SequenceGroup, split_fields};

use crate::error::{Error, Result};

/// What [`TableBuilder::create`](crate::TableBuilder::create) needs to make a table.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    /// Table name; defaults to the last folder of the table's path.
    pub name: Option<String>,
    /// `hoodie.table.version`: 8 (the default; every Hudi 1.x reader reads
    /// it) or 9 (what Hudi 1.1 and later create; Hudi 1.0.x readers refuse
    /// it). See [`WRITABLE_VERSIONS`](tributary_timeline::WRITABLE_VERSIONS).
    pub table_version: u32,
    /// Database name.
    pub database: Option<String>,
    /// The Avro schema (JSON) of the table's own columns.
    pub schema_json: String,
    /// Where the schema came from, for messages.
    pub schema_source: String,
    /// Record key fields in declared order: one, or several for a composite
    /// key, whose `_hoodie_record_key` is `field:value` pairs joined by `,`
    /// as Hudi's complex key generator writes it
    /// ([`RecordKey`](tributary_format::RecordKey)).
    pub record_key_fields: Vec<String>,
    /// Ordering (event-time) fields: one, or several (`"ts,seq"`, table
    /// version 9 only), whose values compare element by element in this
    /// order, as Hudi 1.1+ compares `hoodie.table.ordering.fields`.
    pub ordering_fields: Vec<String>,
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
    /// The bound on committed, uncompacted log files per file group, at
    /// which writers wait for compaction (`tributary.max.logs.per.file.group`);
    /// `None` for no bound. By default
    /// [`DEFAULT_MAX_LOGS_PER_FILE_GROUP`](crate::DEFAULT_MAX_LOGS_PER_FILE_GROUP).
    pub max_logs_per_file_group: Option<usize>,
    /// Whether every write adds the columns its records bring, as
    /// `write --evolve-schema` does (`tributary.schema.evolve.on.write`).
    /// Default false: a record with an unknown column is refused.
    pub evolve_on_write: bool,
    /// Whether the table keeps a change log that Hudi's CDC query reads
    /// (`hoodie.table.cdc.enabled`, [`Table::change_log_writer`](crate::Table::change_log_writer);
    /// `docs/design.md`, "Change log"). Default false.
    pub change_log: bool,
}

impl CreateOptions {
    /// Options with defaults: 16 buckets, murmur3, event-time merging,
    /// hive-style partitions. `record_key` is the record key field, or
    /// several separated by `,` for a composite key (`"user_id,date,group_id"`,
    /// as `hoodie.table.recordkey.fields` lists them). `ordering_field` is the
    /// ordering field, or several separated by `,` (version-9 tables).
    pub fn new(
        schema_json: impl Into<String>,
        record_key: impl Into<String>,
        ordering_field: impl Into<String>,
    ) -> Self {
        Self {
            name: None,
            table_version: tributary_timeline::DEFAULT_TABLE_VERSION,
            database: None,
            schema_json: schema_json.into(),
            schema_source: "schema".into(),
            record_key_fields: split_fields(&record_key.into()),
            ordering_fields: split_fields(&ordering_field.into()),
            partition_field: None,
            hive_style_partitioning: true,
            buckets: 16,
            bucket_hash: BucketHash::Murmur3,
            merge_mode: MergeMode::EventTime,
            sequence_groups: Vec::new(),
            tombstone_retention: TombstoneRetention::Forever,
            time_mode: TimeMode::HybridLogical,
            max_logs_per_file_group: Some(tributary_timeline::DEFAULT_MAX_LOGS_PER_FILE_GROUP),
            evolve_on_write: false,
            change_log: false,
        }
    }

    /// Checks the schema and the options against each other before a table
    /// is made of them: the schema is an Avro record without reserved
    /// `_hoodie_` fields, and every field the options name exists and has a
    /// type its role can use. Errors name the field and the schema's source.
    pub(crate) fn check(&self) -> Result<()> {
        let src = self.schema_source.as_str();
        let schema = Schema::parse_str(&self.schema_json).map_err(|e| Error::InvalidInput {
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
        check_record_key(&schema, src, self)?;
        check_ordering_fields(&schema, src, self)?;
        if let Some(p) = &self.partition_field {
            check_field(&schema, src, "partition", p)?;
        }
        check_sequence_groups(&schema, src, self)?;
        if self.buckets == 0 {
            return Err(Error::InvalidInput { what: "--buckets".into(), reason: "must be at least 1".into() });
        }
        if !tributary_timeline::WRITABLE_VERSIONS.contains(&self.table_version) {
            return Err(Error::InvalidInput {
                what: "--table-version".into(),
                reason: format!(
                    "{} is not a table version Tributary creates; it creates {:?}",
                    self.table_version,
                    tributary_timeline::WRITABLE_VERSIONS
                ),
            });
        }
        Ok(())
    }
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
            let limit = usize::from(tributary_format::DELETE_DECIMAL_SCALE as u8);
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

/// The ordering fields exist, can order records and fit the tombstone
/// retention; several need table version 9 (Hudi 1.0.x readers take the
/// key as one field's name), whole rows (no sequence groups) and no
/// retention bound (a distance has no meaning across several fields).
fn check_ordering_fields(schema: &Schema, src: &str, options: &CreateOptions) -> Result<()> {
    let fields = &options.ordering_fields;
    let bad = |reason: String| Err(Error::InvalidInput { what: "--ordering-field".into(), reason });
    match fields.as_slice() {
        [] => return bad("name the ordering (event-time) field".into()),
        [one] => {
            check_field(schema, src, "ordering", one)?;
            let kind = check_orderable(schema, src, "ordering field", one)?;
            return check_retention(options.tombstone_retention, kind, one);
        }
        _ => {}
    }
    let list = fields.join(",");
    for (i, f) in fields.iter().enumerate() {
        if fields[..i].contains(f) {
            return bad(format!("`{f}` is named twice in `{list}`"));
        }
        check_field(schema, src, "ordering", f)?;
        check_orderable(schema, src, "ordering field", f)?;
    }
    if options.table_version < 9 {
        return bad(format!(
            "several ordering fields (`{list}`) need --table-version 9: Hudi 1.0.x readers of a version-8 table take \
             the list as one field's name"
        ));
    }
    if !options.sequence_groups.is_empty() {
        return bad(format!(
            "several ordering fields (`{list}`) order whole rows: a table with them has no sequence groups"
        ));
    }
    if options.tombstone_retention != TombstoneRetention::Forever {
        return Err(Error::InvalidInput {
            what: "--tombstone-retention".into(),
            reason: format!("a bound needs a single ordering field, not `{list}`: use `forever`"),
        });
    }
    Ok(())
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
            } else if options.ordering_fields.contains(c) {
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

/// The schema text as compact JSON, as `hoodie.properties` records it.
pub(crate) fn compact_json(json: &str, source: &str) -> Result<String> {
    let value: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| Error::InvalidInput { what: source.to_string(), reason: format!("not valid JSON: {e}") })?;
    Ok(value.to_string())
}
