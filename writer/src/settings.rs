//! The settings of a write client: its writer tasks, memory budget and
//! channel depth, heartbeat interval, writer id, columns, bucket count,
//! whether commits combine each key's versions and whether each begins the
//! next.

use std::time::Duration;

/// Settings of a [`WriteClient`](crate::WriteClient).
#[derive(Debug, Clone)]
pub struct WriteSettings {
    /// Writer tasks per commit; task `i` owns buckets `b` with `b % tasks == i`.
    pub tasks: usize,
    /// Memory budget for buffered rows across all tasks.
    pub buffer_bytes: usize,
    /// Messages each task's channel holds before the producer waits.
    pub channel_depth: usize,
    /// How often the heartbeat file is refreshed (Hudi: 60 s).
    pub heartbeat_interval: Duration,
    /// Name of this writer, under which checkpoints are kept and which
    /// [`WriteClient::register`](crate::WriteClient::register) takes over:
    /// 1 to 128 characters from A-Z, a-z, 0-9, `.`, `_` and `-`, not
    /// starting with `.` (it names the file
    /// `.hoodie/.tributary/writers/<id>.json`). Default `default`.
    pub writer_id: String,
    /// The columns this writer writes (a partial writer); `None` for all.
    /// Its log blocks carry the column subset with `IS_PARTIAL=true`.
    pub columns: Option<Vec<String>>,
    /// The bucket count, for a table whose `hoodie.properties` records
    /// none (one a Hudi writer made: Hudi keeps the count in each writer's
    /// `hoodie.bucket.index.num.buckets`); it must equal the Hudi writers'.
    /// `None` takes the table's; a count the table records must match.
    pub buckets: Option<u32>,
    /// Whether a commit stores, of the versions of a key it is given, only
    /// the one the merge keeps (as Hudi's `hoodie.combine.before.upsert`):
    /// readers see the same rows either way, and fewer versions are
    /// written, read and compacted. Partial writes and tables with sequence
    /// groups or a custom merger store every version regardless (see
    /// [`tributary_merge::Combiner`]). Default true.
    pub combine: bool,
    /// How long a commit waits for compaction at the table's bound on
    /// uncompacted logs per file group before it gives up with an
    /// unavailable error naming the group (`docs/design.md`,
    /// "Backpressure"). Default 10 minutes.
    pub backpressure_timeout: Duration,
    /// Whether input that carries columns the table lacks adds them to the
    /// schema (as nullable columns at the end, typed from the values)
    /// instead of being refused. Callers that decode the input
    /// (`tributary::write_json_lines`, [`crate::schema_evolution_in_json_lines`])
    /// evolve the client ([`WriteClient::evolved`](crate::WriteClient::evolved))
    /// between commits; `docs/design.md`, "Schema evolution". Default false.
    pub evolve: bool,
    /// Whether each commit begins this client's next delta commit in the
    /// lock hold that completes it, and how long that begun commit waits
    /// for [`WriteClient::start_commit`](crate::WriteClient::start_commit)
    /// before it is withdrawn. A commit then takes the table lock once
    /// instead of twice, which matters when many writers share one lock on
    /// an object store (`docs/design.md`, "Commit protocol"). The begun
    /// commit is pending meanwhile, with a heartbeat, as any commit being
    /// written is: it holds back archiving, and what Hudi's engines do
    /// with a commit requested before a compaction and completed after it
    /// applies to every such commit (`docs/interop.md`). For a client that
    /// commits again within the interval (a streaming ingest); the
    /// hybrid-logical time mode only (under wait-for-skew nothing is begun
    /// early). [`WriteClient::close`](crate::WriteClient::close) withdraws
    /// a begun commit at once. Default `None`: each commit begins itself.
    pub begin_next: Option<Duration>,
}

impl Default for WriteSettings {
    fn default() -> Self {
        Self {
            tasks: 2,
            buffer_bytes: 128 << 20,
            channel_depth: 4,
            heartbeat_interval: Duration::from_secs(60),
            writer_id: "default".into(),
            columns: None,
            buckets: None,
            combine: true,
            backpressure_timeout: Duration::from_secs(600),
            evolve: false,
            begin_next: None,
        }
    }
}
