//! Schema evolution through the table: the schema in force at an instant,
//! and changes committed without data (`tributary alter`).

use tributary_format::{SchemaChange, SequenceGroup, TableSchema};
use tributary_timeline::{InstantTime, TimelineFolder};

use crate::WriteSettings;
use crate::error::{Error, Result};
use crate::table::Table;

/// A change to a table's schema, as `tributary alter` takes it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Alteration {
    /// Add a nullable column at the end of the schema: its name, its type
    /// ([`tributary_format::avro_type_of`]: `int`, `long`, `double`,
    /// `string`, `date`, `decimal(10,2)`, ...), and its default, if any
    /// (a JSON value of the type).
    AddColumn {
        /// The column.
        name: String,
        /// Its type.
        data_type: String,
        /// Its default.
        default: Option<serde_json::Value>,
    },
    /// Promote a column's type (`int` to `long`, ...).
    Promote {
        /// The column.
        name: String,
        /// The type it becomes.
        data_type: String,
    },
    /// In a table with sequence groups: a new group of columns this
    /// alteration adds, ordered by a new ordering field it adds too, or
    /// new columns for an existing group (named by its ordering field).
    /// Columns already in the table keep the rule they merge by.
    SequenceGroup(SequenceGroup),
}

/// The schema in force at an instant, and where it came from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SchemaAt {
    /// The schema.
    pub schema: TableSchema,
    /// The completed write whose commit metadata records it; `None` for
    /// the create schema.
    pub recorded_by: Option<InstantTime>,
}

impl Table {
    /// The schema in force now, or as of `as_of` (as time travel to it sees
    /// the table), with the commit that recorded it.
    pub async fn schema_at(&self, as_of: Option<&InstantTime>) -> Result<SchemaAt> {
        let full = self.timeline().await?;
        let timeline = match as_of {
            Some(t) => full.filtered(|i| &i.requested <= t),
            None => full,
        };
        let folder = TimelineFolder::new(self.location(), self.config());
        let found = tributary_timeline::schema_in_force(&folder, self.config(), &timeline, None).await?;
        let found = found.ok_or_else(|| Error::InvalidInput {
            what: self.location().to_string(),
            reason: "no schema: no commit carries one and hoodie.table.create.schema is not set".into(),
        })?;
        Ok(SchemaAt { schema: self.config().schema_of(&found.json)?, recorded_by: found.instant })
    }

    /// Changes the schema without writing data: the alterations are
    /// applied in order to the schema in force, checked by Hudi's evolution
    /// rules ([`tributary_format::check_evolution`]: nothing is written
    /// when one is refused), and committed in an empty delta commit whose
    /// metadata records the new schema, where every reader looks for it.
    /// Writers that hold the old schema keep committing; returns the
    /// commit's instant and the changes made.
    pub async fn alter_schema(&self, alterations: &[Alteration]) -> Result<(InstantTime, Vec<SchemaChange>)> {
        if alterations.is_empty() {
            return Err(Error::InvalidInput {
                what: format!("alter {}", self.location()),
                reason: "no change given".into(),
            });
        }
        // The commit's heartbeat beats well within the table's expiry.
        let defaults = WriteSettings::default();
        let heartbeat_interval = defaults.heartbeat_interval.min(self.components.settings.heartbeat_expiry / 3);
        let settings = WriteSettings { writer_id: "alter".into(), heartbeat_interval, ..defaults };
        let client = self.write_client(settings).await?;
        let current = client.schema().full_table_json();
        let mut json = current.clone();
        let (mut added, mut groups) = (Vec::new(), Vec::new());
        for a in alterations {
            json = match a {
                Alteration::AddColumn { name, data_type, default } => {
                    added.push(name.as_str());
                    let t = tributary_format::avro_type_of(data_type)?;
                    tributary_format::with_added_column(&json, name, &t, default.as_ref())?
                }
                Alteration::Promote { name, data_type } => tributary_format::with_column_type(&json, name, data_type)?,
                Alteration::SequenceGroup(g) => {
                    groups.push(g.clone());
                    continue;
                }
            };
        }
        let changes = tributary_format::check_evolution(&self.location().to_string(), &current, &json)?;
        let full = client.schema().with_json(&json)?;
        let groups = self.check_new_groups(client.sequence_groups(), &groups, &added, &full)?;
        let evolved = client.evolved_with_groups(full, groups)?;
        let summary = evolved.start_commit().await?.commit_schema_change().await?;
        Ok((summary.instant, changes))
    }

    /// The sequence groups `existing` with `new` added, checked: the table
    /// has groups already (its merge mode is Tributary's), and every column
    /// a new group or a group's new columns name is one this alteration
    /// adds (`added`), so no column already written changes the rule it
    /// merges by; a new group's ordering field holds values that order.
    fn check_new_groups(
        &self,
        existing: &[SequenceGroup],
        new: &[SequenceGroup],
        added: &[&str],
        schema: &TableSchema,
    ) -> Result<Vec<SequenceGroup>> {
        if new.is_empty() {
            return Ok(existing.to_vec());
        }
        let bad = |reason: String| Error::InvalidInput {
            what: format!("alter {} --sequence-group", self.location()),
            reason,
        };
        if existing.is_empty() {
            return Err(bad(
                "the table has no sequence groups: it merges whole rows (hoodie.record.merge.mode is not Tributary's \
                 CUSTOM merger), and Hudi readers would merge a new group's columns as whole rows too; create the \
                 table with a sequence group to add groups later"
                    .into(),
            ));
        }
        for g in new {
            let known = existing.iter().any(|e| e.ordering == g.ordering);
            let named = g.columns.iter().chain((!known).then_some(&g.ordering));
            for c in named {
                if !added.contains(&c.as_str()) {
                    return Err(bad(format!(
                        "column `{c}` is not one this alteration adds (--add-column): a column already in the table \
                         keeps the rule it merges by"
                    )));
                }
            }
            if !known {
                let i = schema
                    .arrow()
                    .index_of(&g.ordering)
                    .map_err(|_| bad(format!("`{}` is not a column", g.ordering)))?;
                use arrow::datatypes::DataType as T;
                let orders = matches!(
                    schema.data_type(i),
                    T::Int32 | T::Int64 | T::Float32 | T::Float64 | T::Utf8 | T::Date32 | T::Timestamp(..)
                );
                if !orders {
                    return Err(bad(format!(
                        "ordering field `{}` is {}, whose values do not order (use a number, string, date or timestamp)",
                        g.ordering,
                        schema.data_type(i)
                    )));
                }
            }
        }
        SequenceGroup::union(existing, new).map_err(|(_, reason)| bad(reason))
    }
}
