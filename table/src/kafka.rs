//! [`Table::ingest`]: an exactly-once ingest job from Kafka
//! (`tributary_ingest`).

use tributary_ingest::{Ingest, IngestSettings};
use tributary_writer::WriteSettings;

use crate::Table;
use crate::error::Result;

impl Table {
    /// An ingest job that consumes what `settings` names and writes it
    /// through a write client made with `write` (its writer id, tasks,
    /// columns for a partial writer of a wide table). Run it with
    /// [`Ingest::run`]. Several jobs with one consumer group, on any hosts,
    /// split the topics' partitions; the table records each partition's
    /// offset with the data, so a restarted or rebalanced job neither loses
    /// nor repeats a record.
    pub async fn ingest(&self, write: WriteSettings, settings: IngestSettings) -> Result<Ingest> {
        let client = self.write_client(write).await?;
        Ok(Ingest::new(client, settings)?)
    }
}
