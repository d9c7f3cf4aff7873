//! The command line: clap's definitions of the commands and options, and
//! the checks and conversions that turn them into the library's settings.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use tributary::{
    ArchiveSettings, CleanRetention, CompactorSettings, Error, InstantTime, LockKind, PlanSettings, Table,
    TableSettings, TimeMode, TimeSettings, TombstoneRetention,
};

/// What the exit codes mean; shown by `--help`. Each code is
/// [`tributary::ErrorKind::exit_code`] of the error's kind.
pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0   success
  1   any other failure (for example writing the output failed)
  2   invalid input: fix the record, option, schema or table path and run again
      (also for command-line usage errors); nothing of the failed commit is visible
  3   corrupt data: a file of the table is damaged (the message names it);
      retrying will not help
  4   unavailable: storage or the table lock is unavailable right now;
      the same command may succeed later
  5   conflict: another writer or a recovery got there first; start over
      (also: a newer run took the writer ID over, or --expect-checkpoint
      does not match; read the checkpoint again)
  70  internal error: a bug in Tributary; please report it";

#[derive(Parser)]
#[command(
    name = "tributary",
    version,
    about = "Non-blocking concurrent upserts into Apache Hudi v8 Merge-on-Read tables",
    after_help = EXIT_CODES
)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) store: StoreArgs,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// How the table's store and lock are reached; options of every command.
#[derive(clap::Args, Clone)]
pub(crate) struct StoreArgs {
    /// A store option KEY=VALUE for an object-store table, after the
    /// environment's (AWS_*, GOOGLE_*, AZURE_*): endpoint, region,
    /// access_key_id, secret_access_key, allow_http, retry_max,
    /// retry_timeout, ... Repeatable.
    #[arg(long = "store-option", value_name = "KEY=VALUE", global = true, value_parser = key_value)]
    pub(crate) store_options: Vec<(String, String)>,
    /// How long a lease of the table lock lasts unless renewed (object
    /// stores): a dead holder blocks others this long.
    #[arg(long, global = true, default_value = "60s", value_parser = humantime::parse_duration)]
    pub(crate) lock_lease: Duration,
    /// How often a lease holder renews its lease; below half the lease.
    #[arg(long, global = true, default_value = "10s", value_parser = humantime::parse_duration)]
    pub(crate) lock_renew_interval: Duration,
    /// Which lock serialises the table's instants.
    #[arg(long, global = true, value_enum, default_value_t = LockArg::Auto)]
    pub(crate) lock: LockArg,
    /// With `--lock hudi-file`: a lock file older than this was left by a
    /// dead holder and is deleted; set Hudi's
    /// `hoodie.write.lock.filesystem.expire` (minutes) alike. 0: never.
    #[arg(long, global = true, default_value = "0s", value_parser = humantime::parse_duration)]
    pub(crate) hudi_lock_expire: Duration,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum LockArg {
    /// An OS file lock for a table in a local folder, a lease lock in the
    /// store otherwise.
    Auto,
    /// Hudi's `FileSystemBasedLockProvider` lock file, `.hoodie/lock`: for a
    /// table Hudi's Java writers with that provider share (wait-for-skew
    /// instants only).
    HudiFile,
}

impl StoreArgs {
    /// Opens the table at `table` with these store options and lock
    /// settings on top of `settings`.
    pub(crate) async fn open(&self, table: &str, settings: TableSettings) -> tributary::Result<Table> {
        self.builder(table, settings).open().await
    }

    /// A builder for the table at `table` with these store options and
    /// lock settings on top of `settings`.
    pub(crate) fn builder(&self, table: &str, settings: TableSettings) -> tributary::TableBuilder {
        let settings = TableSettings {
            lock_lease: self.lock_lease,
            compaction_lease: self.lock_lease,
            lock_renew_interval: self.lock_renew_interval,
            lock: match self.lock {
                LockArg::Auto => settings.lock,
                LockArg::HudiFile => LockKind::HudiFile,
            },
            hudi_lock_expire: self.hudi_lock_expire,
            ..settings
        };
        Table::builder_uri(table).with_store_options(self.store_options.clone()).with_settings(settings)
    }
}

/// Parses `KEY=VALUE`.
pub(crate) fn key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("`{s}`: expected KEY=VALUE"))
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum MergeModeArg {
    /// The larger ordering-field value wins.
    EventTime,
    /// The later write wins.
    CommitTime,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum BucketHashArg {
    /// murmur3_x86_32 of the UTF-8 key, seed 0.
    Murmur3,
    /// Hudi's Java rule, for tables shared with Hudi's Java writers.
    HudiJava,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Create a Hudi Merge-on-Read table (version 8, or 9 with --table-version 9) from an Avro schema.
    Init {
        /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
        table: String,
        /// Hudi table version: 8, which every Hudi 1.x reader reads, or 9,
        /// what Hudi 1.1 and later create (Hudi 1.0.x readers refuse it).
        #[arg(long, default_value_t = tributary::DEFAULT_TABLE_VERSION, value_parser = clap::value_parser!(u32).range(8..=9))]
        table_version: u32,
        /// Avro schema file (.avsc) of the table's columns.
        #[arg(long)]
        schema: PathBuf,
        /// Record key field, or several separated by `,` for a composite key
        /// (`user_id,date,group_id`), written `field:value,...` as Hudi's
        /// complex key generator writes it.
        #[arg(long)]
        record_key: String,
        /// Ordering (event-time) field, or several separated by `,`
        /// (`ts,seq`, with --table-version 9): compared element by
        /// element, the first that differs decides.
        #[arg(long)]
        ordering_field: String,
        /// Partition field.
        #[arg(long)]
        partition_field: Option<String>,
        /// Number of buckets (file groups per partition).
        #[arg(long, default_value_t = 16)]
        buckets: u32,
        /// How versions of a key are merged.
        #[arg(long, value_enum, default_value = "event-time")]
        merge_mode: MergeModeArg,
        /// Key-to-bucket hash.
        #[arg(long, value_enum, default_value = "murmur3")]
        bucket_hash: BucketHashArg,
        /// Table name (default: the folder name).
        #[arg(long)]
        name: Option<String>,
        /// Database name.
        #[arg(long)]
        database: Option<String>,
        /// Name partition folders `value` instead of `field=value`.
        #[arg(long)]
        no_hive_style: bool,
        /// A sequence group `ordering_field=col1,col2`: those columns take
        /// their values from the version with the largest ordering value.
        /// Repeatable. Makes the merge mode CUSTOM.
        #[arg(long = "sequence-group", value_name = "ORDERING=COLS")]
        sequence_groups: Vec<String>,
        /// How long compaction keeps a deleted key's tombstone, so that an
        /// older event arriving later stays deleted: `forever`, a lateness
        /// bound in event time for date or timestamp ordering fields (`7d`),
        /// or a number in the ordering field's units. A tombstone more than
        /// the bound below the newest ordering value of its file group is
        /// dropped; an event later than that may bring the row back.
        #[arg(long, default_value = "forever", value_parser = tombstone_retention)]
        tombstone_retention: TombstoneRetention,
        /// How the table's writers generate instants unless told otherwise
        /// (recorded in hoodie.properties). hybrid-logical never sleeps in
        /// the lock; a table Hudi's Java writers share needs wait-for-skew,
        /// their algorithm.
        #[arg(long, value_enum, default_value = "hybrid-logical")]
        time_mode: TimeModeArg,
        /// The most committed log files a file group holds before
        /// compaction merges them: a writer that would pass it waits for
        /// compaction (backpressure). 0 for no bound.
        #[arg(long, default_value_t = tributary::DEFAULT_MAX_LOGS_PER_FILE_GROUP)]
        max_logs_per_file_group: usize,
        /// Every write adds the columns its records bring to the schema, as
        /// `write --evolve-schema` does (recorded in hoodie.properties).
        #[arg(long)]
        evolve_schema: bool,
        /// Keep a change log that Spark's CDC query reads
        /// (hoodie.table.cdc.enabled, DATA_BEFORE_AFTER): `tributary
        /// change-log` writes it behind the writers.
        #[arg(long)]
        change_log: bool,
    },
    /// Print the timeline: requested time, action, state, completion time; instants a Java writer archived into the LSM history (`.hoodie/timeline/history/`) are COMPLETED and end with `archived` (an archived compaction shows as `commit`, the action the history records).
    Timeline {
        /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
        table: String,
    },
    /// Upsert JSON-lines records (one object per line) into a table.
    Write {
        /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
        table: String,
        /// Input file; `-` or absent reads standard input.
        #[arg(long)]
        input: Option<PathBuf>,
        /// Writer tasks.
        #[arg(long, default_value_t = 2)]
        tasks: usize,
        /// Commit after this many records (default: one commit for the whole input).
        #[arg(long)]
        commit_every: Option<usize>,
        /// Writer ID: registers this run as the ID's writer, taking it over
        /// from any earlier run (whose commits then fail). Without it the
        /// run writes as the unregistered writer `cli`.
        #[arg(long)]
        writer_id: Option<String>,
        /// Commit this checkpoint (for example the source offset the input
        /// ends at) with the data, in the same atomic step; needs
        /// --writer-id. The whole input is one commit.
        #[arg(long, value_name = "OFFSET")]
        checkpoint: Option<String>,
        /// Write only if the writer ID's last committed checkpoint, read
        /// after taking the ID over, is this one (empty: none), else fail
        /// with a conflict before writing; pass what `tributary checkpoint`
        /// printed when the input was read.
        #[arg(long, value_name = "OFFSET")]
        expect_checkpoint: Option<String>,
        /// Write only these columns (a partial writer); the record key and
        /// partition field are always included.
        #[arg(long, value_delimiter = ',')]
        columns: Option<Vec<String>>,
        /// Bucket count of a table a Hudi writer made, whose
        /// hoodie.properties records none: the
        /// hoodie.bucket.index.num.buckets its Hudi writers use. A table
        /// Tributary made records its own (this must then match it).
        #[arg(long)]
        buckets: Option<u32>,
        /// Store every version of a key a commit is given; by default only
        /// the one the merge keeps is stored (reads see the same rows).
        #[arg(long)]
        keep_every_version: bool,
        /// Records may carry columns the table lacks: they are added to the
        /// schema as nullable columns at the end, typed from their values
        /// (boolean, long, double or string). Input written before the
        /// first record with a new column is committed first.
        #[arg(long)]
        evolve_schema: bool,
        /// How instants are generated; by default the mode the table
        /// records (`init --time-mode`), or wait-for-skew for a table
        /// another engine made.
        #[arg(long, value_enum)]
        time_mode: Option<TimeModeArg>,
        /// Maximum clock skew between writers, in milliseconds.
        #[arg(long, default_value_t = 200)]
        max_clock_skew_ms: u64,
        /// How long a commit waits for compaction at the table's bound on
        /// uncompacted logs per file group before it fails.
        #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
        backpressure_timeout: Duration,
        #[command(flatten)]
        metrics: MetricsArgs,
    },
    /// Consume Kafka topics into a table, exactly once, until SIGTERM or
    /// Ctrl-C: commit every N records or T seconds, with each partition's
    /// offset in the same commit. Run several with one --group, on any
    /// hosts: they split the partitions, and a restarted one resumes from
    /// the table's offsets.
    #[cfg(feature = "kafka")]
    Ingest(IngestArgs),
    /// Print the last committed checkpoint of a writer ID: the checkpoint
    /// and a newline, or nothing when it has none (exit code 0 either way).
    Checkpoint {
        /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
        table: String,
        /// Writer ID.
        #[arg(long)]
        writer_id: String,
        /// Output format.
        #[arg(long, value_enum, default_value = "plain")]
        format: CheckpointFormatArg,
    },
    /// Compact log files into Parquet base files, once or as a service.
    Compact {
        /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
        table: String,
        #[command(flatten)]
        rounds: Rounds,
        #[command(flatten)]
        compactor: CompactorArgs,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// Remove file slices that no retained commit needs (after rolling back failed writes).
    Clean {
        /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
        table: String,
        /// Keep what the last N commits need (Hudi's KEEP_LATEST_COMMITS).
        #[arg(long, default_value_t = 10)]
        retain_commits: usize,
        /// Keep instead what the commits requested in the last N hours need
        /// (Hudi's KEEP_LATEST_BY_HOURS, whose default is 24); with no
        /// commit requested in them, nothing is cleaned.
        #[arg(long, conflicts_with = "retain_commits")]
        retain_hours: Option<u32>,
        /// A pending write whose heartbeat is older than this has failed.
        #[arg(long, default_value = "2m", value_parser = humantime::parse_duration)]
        heartbeat_expiry: Duration,
        /// How instants are generated; by default the mode the table
        /// records (`init --time-mode`), or wait-for-skew for a table
        /// another engine made.
        #[arg(long, value_enum)]
        time_mode: Option<TimeModeArg>,
        /// Maximum clock skew between writers, in milliseconds.
        #[arg(long, default_value_t = 200)]
        max_clock_skew_ms: u64,
    },
    /// Record the changes of the commits completed since the last run in
    /// the table's change log (`init --change-log`): one commit of `.cdc`
    /// files that Spark's CDC query reads. Prints what it recorded.
    ChangeLog {
        /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
        table: String,
        #[command(flatten)]
        rounds: Rounds,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// Move the oldest completed instants into the table's LSM history
    /// (`.hoodie/timeline/history/`), as Hudi's archiver does (after
    /// rolling back failed writes), so the active timeline stays small.
    Archive {
        /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
        table: String,
        #[command(flatten)]
        bounds: ArchiveArgs,
        #[command(flatten)]
        service: ServiceArgs,
    },
    /// Run the table services of one or more tables until stopped (SIGTERM
    /// or Ctrl-C): rollback of failed writes and compaction, cleaning and
    /// archiving, each on its own schedule. Two such processes on one
    /// table are safe: each job takes the lock it needs.
    Serve {
        /// Tables: local folders, or URIs (s3://bucket/path, gs://, az://, file://).
        #[arg(required = true)]
        tables: Vec<String>,
        /// How often compaction runs (after rolling back failed writes).
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        compact_every: Duration,
        /// How often cleaning runs (`0s`: never).
        #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
        clean_every: Duration,
        /// What cleaning keeps: the file slices the last N commits need.
        #[arg(long, default_value_t = 10)]
        retain_commits: usize,
        /// What cleaning keeps instead: the file slices the commits
        /// requested in the last N hours need (Hudi's KEEP_LATEST_BY_HOURS).
        #[arg(long, conflicts_with = "retain_commits")]
        retain_hours: Option<u32>,
        /// How often archiving runs (`0s`: never).
        #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
        archive_every: Duration,
        /// How often the change log records what completed since its last
        /// run, on a table made with `init --change-log` (`0s`: never).
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        change_log_every: Duration,
        #[command(flatten)]
        bounds: ArchiveArgs,
        #[command(flatten)]
        compactor: CompactorArgs,
        #[command(flatten)]
        service: ServiceArgs,
        #[command(flatten)]
        metrics: MetricsArgs,
    },
    /// Print the change feed: for each commit that completed in (begin,
    /// end], in completion order, each key whose visible row it changed,
    /// with `op` (i, u, d) and the rows before and after. Standard error
    /// says where the next window begins.
    Changes {
        /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
        table: String,
        #[command(flatten)]
        window: WindowArgs,
        /// Output format.
        #[arg(long, value_enum, default_value = "jsonl")]
        format: FormatArg,
    },
    /// Read a table and print its rows, ordered by partition then record key.
    Read {
        /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
        table: String,
        /// Query type.
        #[arg(long, value_enum, default_value = "snapshot")]
        query: QueryArg,
        /// Time travel: the table as of this instant.
        #[arg(long)]
        as_of: Option<String>,
        /// Incremental: the window's bounds.
        #[command(flatten)]
        window: WindowArgs,
        /// Output format.
        #[arg(long, value_enum, default_value = "jsonl")]
        format: FormatArg,
        /// Include the `_hoodie_*` meta columns.
        #[arg(long)]
        meta: bool,
        /// Only these columns, in this order (`_hoodie_*` meta columns
        /// among them if named): NAME,NAME,...
        #[arg(long, value_delimiter = ',')]
        columns: Vec<String>,
        /// Only rows this SQL condition holds for (`amount > 100 AND
        /// region = 'eu'`), parsed by DataFusion.
        #[arg(long = "where", value_name = "CONDITION")]
        filter: Option<String>,
        /// At most this many rows.
        #[arg(long)]
        limit: Option<usize>,
        /// Rows ordered by partition, then record key. Without it rows
        /// stream as the file groups' merges produce them, in no fixed
        /// order, and memory follows the file groups merged at once, not
        /// the table; with it every row is held before the first prints.
        #[arg(long)]
        sort: bool,
    },
    /// Run a SQL query (Apache DataFusion) over one or more tables, each
    /// registered by name; rows stream as they are computed.
    Sql {
        /// The query: SELECT ..., EXPLAIN ..., over the tables' names.
        query: String,
        /// A table by name: NAME=URI, optionally read as of an instant
        /// (NAME=URI@as-of=T), read-optimized (@read-optimized),
        /// incremental (@incremental=BEGIN..END, completion times), or its
        /// change feed (@changes=BEGIN..END: the columns of `tributary
        /// changes`). Repeatable.
        #[arg(long = "table", value_name = "NAME=URI[@OPTION]", required = true, value_parser = table_arg)]
        tables: Vec<TableArg>,
        /// Output format.
        #[arg(long, value_enum, default_value = "jsonl")]
        format: FormatArg,
        /// Write the rows to this file rather than standard output.
        #[arg(long)]
        output: Option<PathBuf>,
    },
    /// Change the table's schema without writing data: add nullable
    /// columns at the end, or promote a column's type (int to long, float,
    /// double or string; long to float, double or string; float to double
    /// or string; string to bytes and back). Writers holding the old schema
    /// keep committing. Refused changes write nothing.
    Alter {
        /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
        table: String,
        /// Add a column NAME:TYPE or NAME:TYPE:DEFAULT (TYPE: int, long,
        /// float, double, string, bytes, boolean, date, timestamp-millis,
        /// timestamp-micros, decimal(P,S); DEFAULT a JSON value). Repeatable.
        #[arg(long = "add-column", value_name = "NAME:TYPE[:DEFAULT]", value_parser = add_column)]
        add_columns: Vec<tributary::Alteration>,
        /// Promote a column to a wider type: NAME:TYPE. Repeatable.
        #[arg(long = "promote", value_name = "NAME:TYPE", value_parser = promote)]
        promotions: Vec<tributary::Alteration>,
        /// In a table with sequence groups: a new group of columns added
        /// here (--add-column), ordered by a field added here too, or added
        /// columns for an existing group: ORDERING=COL,COL. Repeatable.
        #[arg(long = "sequence-group", value_name = "ORDERING=COL,COL", value_parser = sequence_group)]
        sequence_groups: Vec<tributary::Alteration>,
    },
    /// Print the schema in force (the latest commit's), or as of an
    /// instant: a table of its columns, or its Avro JSON.
    Schema {
        /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
        table: String,
        /// The schema time travel to this instant sees.
        #[arg(long)]
        as_of: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: SchemaFormatArg,
    },
}

/// How `tributary schema` prints.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum SchemaFormatArg {
    /// A table of columns: name, Avro type, nullability, role.
    Table,
    /// The Avro schema JSON, as commits record it.
    Avro,
}

/// `NAME:TYPE[:DEFAULT]` of `alter --add-column`.
fn add_column(s: &str) -> Result<tributary::Alteration, String> {
    let mut parts = s.splitn(3, ':');
    let (name, data_type) = match (parts.next(), parts.next()) {
        (Some(n), Some(t)) if !n.is_empty() && !t.is_empty() => (n.to_string(), t.to_string()),
        _ => return Err(format!("expected NAME:TYPE[:DEFAULT], got `{s}`")),
    };
    let default = parts
        .next()
        .map(|d| serde_json::from_str(d).map_err(|e| format!("default `{d}` of `{name}` is not a JSON value: {e}")))
        .transpose()?;
    Ok(tributary::Alteration::AddColumn { name, data_type, default })
}

/// `ORDERING=COL,COL` of `alter --sequence-group`.
fn sequence_group(s: &str) -> Result<tributary::Alteration, String> {
    tributary::SequenceGroup::parse(s)
        .map(tributary::Alteration::SequenceGroup)
        .ok_or_else(|| format!("expected ORDERING=COL,COL, got `{s}`"))
}

/// `NAME:TYPE` of `alter --promote`.
fn promote(s: &str) -> Result<tributary::Alteration, String> {
    match s.split_once(':') {
        Some((n, t)) if !n.is_empty() && !t.is_empty() => {
            Ok(tributary::Alteration::Promote { name: n.to_string(), data_type: t.to_string() })
        }
        _ => Err(format!("expected NAME:TYPE, got `{s}`")),
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum TimeModeArg {
    /// Hudi's algorithm: hold the lock for the clock skew.
    WaitForSkew,
    /// max(clock, last + 1 ms) from the time stored in the lock.
    HybridLogical,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum QueryArg {
    /// Latest merged rows.
    Snapshot,
    /// Base files only.
    ReadOptimized,
    /// Rows whose commit completed in (begin, end].
    Incremental,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum CheckpointFormatArg {
    /// The checkpoint alone (nothing when there is none).
    Plain,
    /// One JSON object: writer_id, checkpoint, instant, completed, generation
    /// (null values when there is no checkpoint).
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum FormatArg {
    /// One JSON object per line.
    Jsonl,
    /// CSV with a header.
    Csv,
    /// An aligned text table.
    Table,
    /// A Parquet file (with --output).
    Parquet,
}

impl From<TimeModeArg> for TimeMode {
    fn from(mode: TimeModeArg) -> Self {
        match mode {
            TimeModeArg::WaitForSkew => TimeMode::WaitForSkew,
            TimeModeArg::HybridLogical => TimeMode::HybridLogical,
        }
    }
}

/// The cleaner's retention: `--retain-hours` when given, else
/// `--retain-commits`.
pub(crate) fn retention(retain_commits: usize, retain_hours: Option<u32>) -> CleanRetention {
    retain_hours.map_or(CleanRetention::Commits(retain_commits), CleanRetention::Hours)
}

pub(crate) fn time_settings(mode: Option<TimeModeArg>, max_clock_skew_ms: u64) -> TimeSettings {
    TimeSettings { mode: mode.map(TimeMode::from), max_clock_skew: Duration::from_millis(max_clock_skew_ms) }
}

/// Parses `--tombstone-retention`.
pub(crate) fn tombstone_retention(s: &str) -> Result<TombstoneRetention, String> {
    TombstoneRetention::parse(s)
}

/// Parses an instant given as option `what`.
/// A window `(begin, end]` of completion times (`read --query
/// incremental`, `changes`).
#[derive(Debug, clap::Args)]
pub(crate) struct WindowArgs {
    /// Exclusive start (completion time); default before the first commit.
    #[arg(long)]
    begin: Option<String>,
    /// Inclusive end (completion time); default the latest.
    #[arg(long)]
    end: Option<String>,
}

impl WindowArgs {
    /// The bounds given, parsed; `None` where open.
    pub(crate) fn bounds(&self) -> tributary::Result<(Option<InstantTime>, Option<InstantTime>)> {
        let begin = self.begin.as_deref().map(|t| instant_arg(t, "--begin")).transpose()?;
        let end = self.end.as_deref().map(|t| instant_arg(t, "--end")).transpose()?;
        Ok((begin, end))
    }
}

pub(crate) fn instant_arg(s: &str, what: &str) -> tributary::Result<InstantTime> {
    InstantTime::parse(s).map_err(|e| Error::InvalidInput { what: what.to_string(), reason: e.to_string() })
}

/// What `write` does about exactly-once: whether it registers its writer
/// ID, and the checkpoints it commits and expects.
pub(crate) struct Checkpointing {
    /// Take the writer ID over before writing (`--writer-id` given).
    pub(crate) register: bool,
    /// Committed with the input (`--checkpoint`).
    pub(crate) checkpoint: Option<String>,
    /// The last committed checkpoint this run resumes after (`--expect-checkpoint`).
    pub(crate) expect: Option<String>,
}

/// The writer ID `write` uses when none is given; it is not registered.
pub(crate) const DEFAULT_CLI_WRITER: &str = "cli";

/// Checks `write`'s checkpoint options, which need a writer ID, and a
/// checkpoint, which must be one non-empty line (an empty `tributary
/// checkpoint` output means "none").
pub(crate) fn checkpointing(
    writer_id: &Option<String>,
    checkpoint: Option<String>,
    expect: Option<String>,
    commit_every: Option<usize>,
) -> tributary::Result<Checkpointing> {
    let invalid = |what: String, reason: &str| Error::InvalidInput { what, reason: reason.to_string() };
    if writer_id.is_none() {
        for (option, given) in [("--checkpoint", checkpoint.is_some()), ("--expect-checkpoint", expect.is_some())] {
            if given {
                return Err(invalid(
                    format!("{option} needs --writer-id"),
                    "checkpoints are kept per writer ID (run `tributary write TABLE --writer-id ID --checkpoint \
                     OFFSET`)",
                ));
            }
        }
    }
    if let Some(cp) = &checkpoint {
        if commit_every.is_some() {
            return Err(invalid(
                "--checkpoint cannot be combined with --commit-every".into(),
                "the checkpoint covers the whole input, so it is committed with all of it in one commit (run one \
                 `write` per checkpoint instead)",
            ));
        }
        if cp.is_empty() {
            return Err(invalid("--checkpoint".into(), "must not be empty (an empty checkpoint means none)"));
        }
        if cp.contains(['\n', '\r']) {
            return Err(invalid(format!("--checkpoint `{}`", cp.escape_debug()), "must be one line"));
        }
    }
    Ok(Checkpointing { register: writer_id.is_some(), checkpoint, expect })
}

/// How a table service opens its table: time mode, clock skew, heartbeat
/// expiry.
#[derive(clap::Args, Clone)]
pub(crate) struct ServiceArgs {
    /// How instants are generated; by default the mode the table
    /// records (`init --time-mode`), or wait-for-skew for a table
    /// another engine made.
    #[arg(long, value_enum)]
    pub(crate) time_mode: Option<TimeModeArg>,
    /// Maximum clock skew between writers, in milliseconds.
    #[arg(long, default_value_t = 200)]
    pub(crate) max_clock_skew_ms: u64,
    /// A pending write whose heartbeat is older than this has failed.
    #[arg(long, default_value = "2m", value_parser = humantime::parse_duration)]
    pub(crate) heartbeat_expiry: Duration,
}

/// One round of a table service, or a round every interval.
#[derive(clap::Args, Clone, Copy)]
pub(crate) struct Rounds {
    /// Keep running a round every interval until stopped.
    #[arg(long)]
    pub(crate) watch: bool,
    /// Pause between rounds with --watch (e.g. 500ms, 10s, 1m).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub(crate) interval: Duration,
}

impl ServiceArgs {
    /// The table settings these give (with `spill_dir` for a compactor).
    pub(crate) fn table_settings(&self, spill_dir: Option<PathBuf>) -> TableSettings {
        TableSettings {
            time: time_settings(self.time_mode, self.max_clock_skew_ms),
            heartbeat_expiry: self.heartbeat_expiry,
            spill_dir,
            ..Default::default()
        }
    }
}

/// The compactor's settings.
#[derive(clap::Args, Clone)]
pub(crate) struct CompactorArgs {
    /// Compact a file group once it has this many completed logs.
    #[arg(long, default_value_t = 1)]
    pub(crate) min_logs: usize,
    /// At most this many file groups per plan.
    #[arg(long)]
    pub(crate) max_groups: Option<usize>,
    /// File groups compacted at once.
    #[arg(long, default_value_t = 2)]
    pub(crate) parallelism: usize,
    /// Memory budget of the compactor, in MiB, shared by the groups
    /// compacted at once; larger groups merge through spill files.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) memory_mb: u64,
    /// Local folder for spill files, in a subfolder per table (default:
    /// the table's `.hoodie/.temp` for a local table, the system's
    /// temporary folder otherwise).
    #[arg(long)]
    pub(crate) spill_dir: Option<PathBuf>,
}

impl CompactorArgs {
    /// The compactor settings these give.
    pub(crate) fn settings(&self) -> CompactorSettings {
        CompactorSettings {
            plan: PlanSettings {
                min_log_files: self.min_logs,
                max_groups: self.max_groups.unwrap_or(usize::MAX),
                ..Default::default()
            },
            parallelism: self.parallelism,
            memory_budget: usize::try_from(self.memory_mb << 20).unwrap_or(usize::MAX),
            ..Default::default()
        }
    }
}

/// Archiving bounds, with Hudi's names and defaults.
#[derive(clap::Args, Clone)]
pub(crate) struct ArchiveArgs {
    /// `hoodie.keep.min.commits`: completed commits left active.
    #[arg(long, default_value_t = 20)]
    pub(crate) keep_min_commits: usize,
    /// `hoodie.keep.max.commits`: archive once more completed commits than this are active.
    #[arg(long, default_value_t = 30)]
    pub(crate) keep_max_commits: usize,
    /// `hoodie.cleaner.commits.retained`: the cleaner's retention, which raises the bounds when larger.
    #[arg(long, default_value_t = 10)]
    pub(crate) cleaner_commits_retained: usize,
    /// `hoodie.compact.inline.max.delta.commits`: delta commits since the last compaction kept for a
    /// compaction scheduled by count.
    #[arg(long, default_value_t = 5)]
    pub(crate) compaction_delta_commits: usize,
}

impl ArchiveArgs {
    /// The archive settings these give.
    pub(crate) fn settings(&self) -> ArchiveSettings {
        ArchiveSettings {
            keep_min_commits: self.keep_min_commits,
            keep_max_commits: self.keep_max_commits,
            cleaner_commits_retained: self.cleaner_commits_retained,
            compaction_delta_commits: self.compaction_delta_commits,
            ..Default::default()
        }
    }
}

/// Where a long-running command serves its metrics.
#[derive(Debug, clap::Args)]
pub(crate) struct MetricsArgs {
    /// Serve the metrics in Prometheus' text format over HTTP at this
    /// address (`127.0.0.1:9464`; any path answers).
    #[arg(long, value_name = "HOST:PORT")]
    pub(crate) metrics_addr: Option<std::net::SocketAddr>,
}

#[cfg(feature = "kafka")]
/// `tributary ingest`'s arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct IngestArgs {
    /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
    pub(crate) table: String,
    /// Kafka bootstrap servers: HOST:PORT[,HOST:PORT...].
    #[arg(long)]
    pub(crate) brokers: String,
    /// A topic to consume; repeat for several.
    #[arg(long = "topic", required = true)]
    pub(crate) topics: Vec<String>,
    /// The consumer group: processes with one group split the partitions.
    #[arg(long)]
    pub(crate) group: String,
    /// Commit after this many records.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) commit_records: usize,
    /// Commit once this long has passed since the open batch's first record.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub(crate) commit_interval: Duration,
    /// A record that cannot be written: `fail` (stop, naming its topic,
    /// partition, offset and field), `skip` (count and log it), or
    /// `dead-letter=TOPIC` (deliver it there with its position and the
    /// reason as headers).
    #[arg(long, default_value = "fail", value_parser = parse_on_bad_record)]
    pub(crate) on_bad_record: OnBadRecordArg,
    /// What values hold: `json` (a row of the table), `debezium-json` (a
    /// Debezium change event; needs --order-by) or `avro` (Avro binary of
    /// --value-schema; with --schema-id, in Confluent's framing).
    #[arg(long, value_enum, default_value = "json")]
    pub(crate) format: IngestFormatArg,
    /// With `--format avro`: the values' Avro schema (a JSON file), a
    /// record whose fields are table columns (and `_hoodie_is_deleted`).
    #[arg(long, value_name = "FILE")]
    pub(crate) value_schema: Option<std::path::PathBuf>,
    /// With `--format avro`: values are in Confluent's framing, and this is
    /// the schema registry's id of --value-schema; a value naming another
    /// id is a bad record.
    #[arg(long, value_name = "ID")]
    pub(crate) schema_id: Option<u32>,
    /// Where record keys come from: `value` (its key fields) or `message`
    /// (the message key: a JSON object of the key fields, or the single key
    /// field's text).
    #[arg(long, value_enum, default_value = "value")]
    pub(crate) key_from: KeyFromArg,
    /// With `--format debezium-json`: the path in each event whose value
    /// orders the changes and goes into the table's ordering field
    /// (`source.lsn`, `ts_ms`).
    #[arg(long, value_name = "PATH")]
    pub(crate) order_by: Option<String>,
    /// Where a partition the table holds no offset for starts.
    #[arg(long, value_enum, default_value = "earliest")]
    pub(crate) start: StartArgValue,
    /// A librdkafka consumer property (security.protocol=SSL, ...); repeat
    /// for several.
    #[arg(long = "kafka", value_name = "KEY=VALUE", value_parser = parse_property)]
    pub(crate) kafka: Vec<(String, String)>,
    /// Write only these columns (a partial writer of a wide table); the
    /// record key and partition field are always included.
    #[arg(long, value_delimiter = ',')]
    pub(crate) columns: Option<Vec<String>>,
    /// Writer tasks.
    #[arg(long, default_value_t = 2)]
    pub(crate) tasks: usize,
    /// Store every version of a key a commit is given; by default only
    /// the one the merge keeps is stored (reads see the same rows).
    #[arg(long)]
    pub(crate) keep_every_version: bool,
    #[command(flatten)]
    pub(crate) metrics: MetricsArgs,
}

#[cfg(feature = "kafka")]
/// `--on-bad-record`, parsed.
#[derive(Debug, Clone)]
pub(crate) struct OnBadRecordArg(pub(crate) tributary::ingest::OnBadRecord);

#[cfg(feature = "kafka")]
/// `--format` of `ingest`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum IngestFormatArg {
    /// A JSON object: a row of the table.
    Json,
    /// A Debezium change event in JSON.
    DebeziumJson,
    /// Avro binary of --value-schema.
    Avro,
}

#[cfg(feature = "kafka")]
/// `--key-from` of `ingest`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum KeyFromArg {
    /// The value's key fields.
    Value,
    /// The message key.
    Message,
}

#[cfg(feature = "kafka")]
/// `--start`, as clap parses it.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum StartArgValue {
    /// At the first record still in Kafka.
    Earliest,
    /// After the last record at the moment the partition is assigned.
    Latest,
}

#[cfg(feature = "kafka")]
fn parse_on_bad_record(text: &str) -> Result<OnBadRecordArg, String> {
    Ok(OnBadRecordArg(match text {
        "fail" => tributary::ingest::OnBadRecord::Fail,
        "skip" => tributary::ingest::OnBadRecord::Skip,
        _ => match text.strip_prefix("dead-letter=") {
            Some(topic) if !topic.is_empty() => tributary::ingest::OnBadRecord::DeadLetter(topic.to_string()),
            _ => return Err("expected fail, skip or dead-letter=TOPIC".into()),
        },
    }))
}

#[cfg(feature = "kafka")]
fn parse_property(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err("expected KEY=VALUE".into()),
    }
}

/// A table a query names: `NAME=URI`, then options each after `@`:
/// `@as-of=T`, `@read-optimized`, `@incremental=BEGIN..END`,
/// `@changes=BEGIN..END`.
#[derive(Clone, Debug)]
pub(crate) struct TableArg {
    pub(crate) name: String,
    pub(crate) uri: String,
    pub(crate) read_as: tributary::sql::ReadAs,
}

/// Parses `--table NAME=URI[@as-of=T][@read-optimized][@incremental=B..E][@changes=B..E]`.
pub(crate) fn table_arg(s: &str) -> Result<TableArg, String> {
    let (name, rest) = s.split_once('=').ok_or_else(|| format!("`{s}`: expected NAME=URI"))?;
    let (uri, read_as) = tributary::sql::ReadAs::of_spec(rest).map_err(|e| format!("`{s}`: {e}"))?;
    if name.is_empty() || uri.is_empty() {
        return Err(format!("`{s}`: expected NAME=URI"));
    }
    Ok(TableArg { name: name.to_string(), uri: uri.to_string(), read_as })
}
