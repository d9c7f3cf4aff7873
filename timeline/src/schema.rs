//! The table schema in force: one home for where readers, writers and the
//! compactor find it (`docs/design.md`, "Schema evolution").

use tributary_format::{CommitMetadata, SequenceGroup, TableSchema};

use crate::config::TableConfig;
use crate::error::Result;
use crate::instant::{Instant, InstantTime, State};
use crate::timeline::{Timeline, TimelineFolder};

/// Completed writes read, newest first, for one that records a schema,
/// before the create schema stands in.
const SCHEMA_LOOKBACK: usize = 32;

/// The extra-metadata key under which a commit of a table with sequence
/// groups records the groups in force (the `hoodie.properties` key's
/// name, whose value is the groups the table was created with).
pub const SEQUENCE_GROUPS_KEY: &str = "tributary.merge.sequence.groups";

/// The schema in force and the instant that recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaInForce {
    /// The schema's Avro JSON (without meta fields).
    pub json: String,
    /// The sequence groups the same commit records, when it records any
    /// ([`SEQUENCE_GROUPS_KEY`]); `None`: those of `hoodie.properties`.
    pub sequence_groups: Option<Vec<SequenceGroup>>,
    /// The completed write whose commit metadata records it; `None` for
    /// the create schema of `hoodie.properties`.
    pub instant: Option<InstantTime>,
}

/// The completed writes of `timeline`'s active part, the one that became
/// visible last first, then the latest archived one (the history is not
/// walked further).
fn latest_writes(timeline: &Timeline) -> Vec<&Instant> {
    let mut writes: Vec<&Instant> =
        timeline.active().iter().filter(|i| i.is_completed() && i.action.writes_data()).collect();
    writes.sort_by(|a, b| b.cmp_visibility(a));
    if let Some(latest) = timeline.latest_completed_write()
        && timeline.is_archived(&latest.requested)
        && !writes.iter().any(|w| w.requested == latest.requested)
    {
        writes.push(latest);
    }
    writes
}

/// The schema in force at `timeline`, as Hudi's `TableSchemaResolver`
/// finds it: the `extraMetadata.schema` of the completed write that became
/// visible last and records one, else `hoodie.table.create.schema`. Every
/// commit Tributary makes records the schema in force merged with its own
/// (`tributary_format::merge_committed`), so the latest is the union of
/// every evolution before it. `None` if neither exists.
///
/// `known` is a schema the caller found before, at the instant it names:
/// if that instant is still the latest write, nothing is read.
pub async fn schema_in_force(
    folder: &TimelineFolder,
    config: &TableConfig,
    timeline: &Timeline,
    known: Option<&SchemaInForce>,
) -> Result<Option<SchemaInForce>> {
    for i in latest_writes(timeline).into_iter().take(SCHEMA_LOOKBACK) {
        if let Some(k) = known
            && k.instant.as_ref() == Some(&i.requested)
        {
            return Ok(Some(k.clone()));
        }
        let bytes = folder.read(i, State::Completed).await?;
        let path = folder.path_of(i, State::Completed)?;
        let meta = CommitMetadata::from_bytes_shared(&bytes, path.as_ref())?;
        if let Some(json) = meta.schema_json().filter(|j| !j.is_empty()) {
            let sequence_groups = match meta.extra_metadata.get(SEQUENCE_GROUPS_KEY) {
                Some(text) => {
                    Some(SequenceGroup::parse_list(text).map_err(|reason| tributary_format::Error::Corrupt {
                        path: path.to_string(),
                        reason: format!("extraMetadata {SEQUENCE_GROUPS_KEY}: {reason}"),
                    })?)
                }
                None => None,
            };
            return Ok(Some(SchemaInForce {
                json: json.to_string(),
                sequence_groups,
                instant: Some(i.requested.clone()),
            }));
        }
    }
    Ok(config.create_schema.clone().map(|json| SchemaInForce { json, sequence_groups: None, instant: None }))
}

impl TableConfig {
    /// This configuration with the sequence groups in force: those the
    /// latest commit recorded, which hold every group and column a schema
    /// evolution added since the table was made.
    pub fn in_force(&self, schema: &SchemaInForce) -> TableConfig {
        match &schema.sequence_groups {
            Some(groups) if *groups != self.sequence_groups => {
                TableConfig { sequence_groups: groups.clone(), ..self.clone() }
            }
            _ => self.clone(),
        }
    }

    /// `json`, a schema of this table, in the forms writers and readers
    /// need, checked against the configured key, ordering and partition
    /// fields.
    pub fn schema_of(&self, json: &str) -> Result<TableSchema> {
        Ok(TableSchema::with_ordering_fields(
            json,
            &self.record_key_fields,
            &self.ordering_fields,
            self.partition_fields.first().map(String::as_str),
        )?)
    }
}
