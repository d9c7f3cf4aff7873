//! Exactly-once from a source: what a table records about a writer id
//! (its generation and last committed checkpoint), and the rule a run that
//! resumes a source follows: register the id first, then compare its last
//! committed checkpoint with the one the run's input starts after.

use tributary_writer::{WriteClient, WriterStatus};

use crate::error::{Error, Result};
use crate::table::Table;

impl Table {
    /// What the table records about writer `writer_id`: its generation
    /// and the checkpoint of its last visible commit that carried one (see
    /// [`WriteClient::checkpoint`](crate::WriteClient::checkpoint)). Reads the id's state
    /// file, and checks one commit file's existence; takes no lock.
    pub async fn checkpoint(&self, writer_id: &str) -> Result<tributary_writer::WriterStatus> {
        Ok(tributary_timeline::lookup_writer(&self.loc, &self.config, writer_id).await?)
    }

    /// Registers `client`'s writer id, taking it over from any earlier
    /// writer of it ([`WriteClient::register`]), then, when `expected` is
    /// given, checks that the id's last committed checkpoint is `expected`
    /// (empty: none). The comparison comes after the take-over, so no
    /// earlier writer of the id can commit after it: the checkpoint read
    /// stays the last one. On a mismatch it fails with
    /// [`Error::CheckpointMismatch`] (a conflict) before anything is written.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> tributary_table::Result<()> {
    /// use tributary_table::{CreateOptions, Table, WriteSettings};
    ///
    /// let dir = std::env::temp_dir().join(format!("tributary-doc-register-{}", std::process::id()));
    /// let schema = r#"{"type":"record","name":"r","fields":[{"name":"id","type":"string"},{"name":"ts","type":"long"}]}"#;
    /// let table = Table::create_local(&dir, CreateOptions::new(schema, "id", "ts")).await?;
    /// let settings = WriteSettings { writer_id: "app".into(), ..Default::default() };
    /// let client = table.write_client(settings).await?;
    /// let status = table.register_writer(&client, Some("")).await?; // none committed yet
    /// assert_eq!((status.generation, status.checkpoint), (1, None));
    /// let stale = table.register_writer(&client, Some("offset=7")).await.unwrap_err();
    /// assert_eq!(stale.kind(), tributary_table::ErrorKind::Conflict);
    /// # std::fs::remove_dir_all(&dir).ok();
    /// # Ok(()) }
    /// ```
    pub async fn register_writer(&self, client: &WriteClient, expected: Option<&str>) -> Result<WriterStatus> {
        let status = client.register().await?;
        let last = status.checkpoint_text();
        if let Some(expected) = expected
            && last.unwrap_or_default() != expected
        {
            return Err(Error::CheckpointMismatch {
                table: self.location().to_string(),
                writer_id: status.writer_id.clone(),
                expected: expected.to_string(),
                found: status.checkpoint.map(Box::new),
            });
        }
        Ok(status)
    }
}
