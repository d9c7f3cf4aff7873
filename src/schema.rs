//! Schema evolution through the table: the schema in force at an instant,
//! and changes committed without data (`tributary alter`).

use tributary_format::{SchemaChange, TableSchema};
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
        let client = self.write_client(WriteSettings { writer_id: "alter".into(), ..Default::default() }).await?;
        let current = client.schema().full_table_json();
        let mut json = current.clone();
        for a in alterations {
            json = match a {
                Alteration::AddColumn { name, data_type, default } => {
                    let t = tributary_format::avro_type_of(data_type)?;
                    tributary_format::with_added_column(&json, name, &t, default.as_ref())?
                }
                Alteration::Promote { name, data_type } => tributary_format::with_column_type(&json, name, data_type)?,
            };
        }
        let changes = tributary_format::check_evolution(&self.location().to_string(), &current, &json)?;
        let evolved = client.evolved(client.schema().with_json(&json)?)?;
        let summary = evolved.start_commit().await?.commit().await?;
        Ok((summary.instant, changes))
    }
}
