//! The `tributary` command-line tool.
//!
//! On failure it prints `error: <message>` to standard error and exits with
//! a code that says what the caller can do (see [`EXIT_CODES`]): the
//! [`ErrorKind::exit_code`] of the error's kind.

use std::path::PathBuf;
use std::process::ExitCode;

use std::io::{BufRead, Write};
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use tributary::{CreateOptions, LockKind, Query, ReadOptions, Table, TableSettings, TimeSettings, TombstoneRetention};
use tributary_format::ErrorKind;
use tributary_timeline::{BucketHash, InstantTime, MergeMode, TimeMode};
use tributary_writer::WriteSettings;

/// What the exit codes mean; shown by `--help`. Each code is
/// [`ErrorKind::exit_code`] of the error's kind.
const EXIT_CODES: &str = "\
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
struct Cli {
    #[command(flatten)]
    store: StoreArgs,
    #[command(subcommand)]
    command: Command,
}

/// How the table's store and lock are reached; options of every command.
#[derive(clap::Args, Clone)]
struct StoreArgs {
    /// A store option KEY=VALUE for an object-store table, after the
    /// environment's (AWS_*, GOOGLE_*, AZURE_*): endpoint, region,
    /// access_key_id, secret_access_key, allow_http, retry_max,
    /// retry_timeout, ... Repeatable.
    #[arg(long = "store-option", value_name = "KEY=VALUE", global = true, value_parser = key_value)]
    store_options: Vec<(String, String)>,
    /// How long a lease of the table lock lasts unless renewed (object
    /// stores): a dead holder blocks others this long.
    #[arg(long, global = true, default_value = "60s", value_parser = humantime::parse_duration)]
    lock_lease: Duration,
    /// How often a lease holder renews its lease; below half the lease.
    #[arg(long, global = true, default_value = "10s", value_parser = humantime::parse_duration)]
    lock_renew_interval: Duration,
    /// Which lock serialises the table's instants.
    #[arg(long, global = true, value_enum, default_value_t = LockArg::Auto)]
    lock: LockArg,
    /// With `--lock hudi-file`: a lock file older than this was left by a
    /// dead holder and is deleted; set Hudi's
    /// `hoodie.write.lock.filesystem.expire` (minutes) alike. 0: never.
    #[arg(long, global = true, default_value = "0s", value_parser = humantime::parse_duration)]
    hudi_lock_expire: Duration,
}

#[derive(Clone, Copy, ValueEnum)]
enum LockArg {
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
    async fn open(&self, table: &str, settings: TableSettings) -> anyhow::Result<Table> {
        Ok(self.builder(table, settings).open().await?)
    }

    fn builder(&self, table: &str, settings: TableSettings) -> tributary::TableBuilder {
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
fn key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("`{s}`: expected KEY=VALUE"))
}

#[derive(Clone, Copy, ValueEnum)]
enum MergeModeArg {
    /// The larger ordering-field value wins.
    EventTime,
    /// The later write wins.
    CommitTime,
}

#[derive(Clone, Copy, ValueEnum)]
enum BucketHashArg {
    /// murmur3_x86_32 of the UTF-8 key, seed 0.
    Murmur3,
    /// Hudi's Java rule, for tables shared with Hudi's Java writers.
    HudiJava,
}

#[derive(Subcommand)]
enum Command {
    /// Create a Hudi v8 Merge-on-Read table from an Avro schema.
    Init {
        /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
        table: String,
        /// Avro schema file (.avsc) of the table's columns.
        #[arg(long)]
        schema: PathBuf,
        /// Record key field, or several separated by `,` for a composite key
        /// (`user_id,date,group_id`), written `field:value,...` as Hudi's
        /// complex key generator writes it.
        #[arg(long)]
        record_key: String,
        /// Ordering (event-time) field.
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
        /// How instants are generated; by default the mode the table
        /// records (`init --time-mode`), or wait-for-skew for a table
        /// another engine made.
        #[arg(long, value_enum)]
        time_mode: Option<TimeModeArg>,
        /// Maximum clock skew between writers, in milliseconds.
        #[arg(long, default_value_t = 200)]
        max_clock_skew_ms: u64,
    },
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
        /// Keep compacting every interval until stopped.
        #[arg(long)]
        watch: bool,
        /// Pause between rounds with --watch (e.g. 500ms, 10s, 1m).
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        interval: Duration,
        /// Compact a file group once it has this many completed logs.
        #[arg(long, default_value_t = 1)]
        min_logs: usize,
        /// At most this many file groups per plan.
        #[arg(long)]
        max_groups: Option<usize>,
        /// File groups compacted at once.
        #[arg(long, default_value_t = 2)]
        parallelism: usize,
        /// Memory budget of the compactor, in MiB, shared by the groups
        /// compacted at once; larger groups merge through spill files.
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
        memory_mb: u64,
        /// Local folder for spill files, in a subfolder per table (default:
        /// the table's `.hoodie/.temp` for a local table, the system's
        /// temporary folder otherwise).
        #[arg(long)]
        spill_dir: Option<PathBuf>,
        /// How instants are generated; by default the mode the table
        /// records (`init --time-mode`), or wait-for-skew for a table
        /// another engine made.
        #[arg(long, value_enum)]
        time_mode: Option<TimeModeArg>,
        /// Maximum clock skew between writers, in milliseconds.
        #[arg(long, default_value_t = 200)]
        max_clock_skew_ms: u64,
        /// A pending write whose heartbeat is older than this has failed.
        #[arg(long, default_value = "2m", value_parser = humantime::parse_duration)]
        heartbeat_expiry: Duration,
    },
    /// Remove file slices that no retained commit needs (after rolling back failed writes).
    Clean {
        /// Table: a local folder, or a URI (s3://bucket/path, gs://, az://, file://).
        table: String,
        /// Keep what the last N commits need.
        #[arg(long, default_value_t = 10)]
        retain_commits: usize,
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
        /// Incremental: exclusive start (completion time).
        #[arg(long)]
        begin: Option<String>,
        /// Incremental: inclusive end (completion time); default the latest.
        #[arg(long)]
        end: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value = "jsonl")]
        format: FormatArg,
        /// Include the `_hoodie_*` meta columns.
        #[arg(long)]
        meta: bool,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum TimeModeArg {
    /// Hudi's algorithm: hold the lock for the clock skew.
    WaitForSkew,
    /// max(clock, last + 1 ms) from the time stored in the lock.
    HybridLogical,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum QueryArg {
    /// Latest merged rows.
    Snapshot,
    /// Base files only.
    ReadOptimized,
    /// Rows whose commit completed in (begin, end].
    Incremental,
}

#[derive(Clone, Copy, ValueEnum)]
enum CheckpointFormatArg {
    /// The checkpoint alone (nothing when there is none).
    Plain,
    /// One JSON object: writer_id, checkpoint, instant, completed, generation
    /// (null values when there is no checkpoint).
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    /// One JSON object per line.
    Jsonl,
    /// CSV with a header.
    Csv,
    /// An aligned text table.
    Table,
}

/// A failure the binary itself finds (an input file it cannot open, a
/// malformed line or argument), with what the caller can do about it.
#[derive(Debug)]
struct CliError {
    kind: ErrorKind,
    message: String,
}

impl CliError {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    /// A local file that cannot be opened or read: a path or permission the
    /// caller can fix, or a device that may come back.
    fn io(message: String, e: &std::io::Error) -> Self {
        use std::io::ErrorKind as Io;
        let kind = match e.kind() {
            Io::NotFound | Io::PermissionDenied | Io::InvalidData | Io::InvalidInput => ErrorKind::InvalidInput,
            _ => ErrorKind::Unavailable,
        };
        Self { kind, message }
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// The kind of the first error in `e`'s chain that has one.
fn error_kind(e: &anyhow::Error) -> Option<ErrorKind> {
    e.chain().find_map(|c| {
        if let Some(e) = c.downcast_ref::<CliError>() {
            Some(e.kind)
        } else if let Some(e) = c.downcast_ref::<tributary::Error>() {
            Some(e.kind())
        } else if let Some(e) = c.downcast_ref::<tributary_writer::Error>() {
            Some(e.kind())
        } else if let Some(e) = c.downcast_ref::<tributary_compaction::Error>() {
            Some(e.kind())
        } else if let Some(e) = c.downcast_ref::<tributary_merge::Error>() {
            Some(e.kind())
        } else if let Some(e) = c.downcast_ref::<tributary_timeline::Error>() {
            Some(e.kind())
        } else {
            c.downcast_ref::<tributary_format::Error>().map(|e| e.kind())
        }
    })
}

/// The exit code for a failed run: its kind's code, else 1.
fn exit_code(e: &anyhow::Error) -> ExitCode {
    error_kind(e).map_or(ExitCode::FAILURE, |k| ExitCode::from(k.exit_code()))
}

fn instant_arg(s: &str, what: &str) -> anyhow::Result<InstantTime> {
    InstantTime::parse(s).map_err(|e| CliError::new(ErrorKind::InvalidInput, format!("{what}: {e}")).into())
}

/// What `write` does about exactly-once: whether it registers its writer
/// ID, and the checkpoints it commits and expects.
struct Checkpointing {
    /// Take the writer ID over before writing (`--writer-id` given).
    register: bool,
    /// Committed with the input (`--checkpoint`).
    checkpoint: Option<String>,
    /// The last committed checkpoint this run resumes after (`--expect-checkpoint`).
    expect: Option<String>,
}

/// The writer ID `write` uses when none is given; it is not registered.
const DEFAULT_CLI_WRITER: &str = "cli";

/// Checks `write`'s checkpoint options, which need a writer ID, and a
/// checkpoint, which must be one non-empty line (an empty `tributary
/// checkpoint` output means "none").
fn checkpointing(
    writer_id: &Option<String>,
    checkpoint: Option<String>,
    expect: Option<String>,
    commit_every: Option<usize>,
) -> Result<Checkpointing, CliError> {
    let invalid = |m: String| CliError::new(ErrorKind::InvalidInput, m);
    if writer_id.is_none() {
        for (option, given) in [("--checkpoint", checkpoint.is_some()), ("--expect-checkpoint", expect.is_some())] {
            if given {
                return Err(invalid(format!(
                    "{option} needs --writer-id: checkpoints are kept per writer ID (run `tributary write TABLE \
                     --writer-id ID --checkpoint OFFSET`)"
                )));
            }
        }
    }
    if let Some(cp) = &checkpoint {
        if commit_every.is_some() {
            return Err(invalid(
                "--checkpoint cannot be combined with --commit-every: the checkpoint covers the whole input, so it \
                 is committed with all of it in one commit (run one `write` per checkpoint instead)"
                    .into(),
            ));
        }
        if cp.is_empty() {
            return Err(invalid("--checkpoint: must not be empty (an empty checkpoint means none)".into()));
        }
        if cp.contains(['\n', '\r']) {
            return Err(invalid(format!("--checkpoint `{}`: must be one line", cp.escape_debug())));
        }
    }
    Ok(Checkpointing { register: writer_id.is_some(), checkpoint, expect })
}

async fn write(
    store: &StoreArgs,
    table: String,
    input: Option<PathBuf>,
    settings: WriteSettings,
    commit_every: Option<usize>,
    time: TimeSettings,
    checkpointing: Checkpointing,
) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let t = store.open(&table, TableSettings { time, ..Default::default() }).await?;
    let writer_id = settings.writer_id.clone();
    let client = t.write_client(settings).await?;
    let Checkpointing { register, mut checkpoint, expect } = checkpointing;
    if register {
        // Take the ID over first: from here on no earlier writer of the ID
        // can commit, so the checkpoint read here stays the last one.
        let status = client.register().await?;
        let last = status.checkpoint.as_ref().map(|c| c.checkpoint.as_str());
        if let Some(expected) = &expect
            && last.unwrap_or_default() != expected
        {
            let found = match &status.checkpoint {
                Some(c) => format!("its last committed checkpoint is `{}` (instant {})", c.checkpoint, c.instant),
                None => "it has no committed checkpoint".into(),
            };
            let expected =
                if expected.is_empty() { "no checkpoint".to_string() } else { format!("checkpoint `{expected}`") };
            return Err(CliError::new(
                ErrorKind::Conflict,
                format!(
                    "{}: writer ID `{writer_id}`: expected {expected}, but {found}: another writer with \
                     this ID committed since; nothing was written; read the checkpoint again",
                    t.location()
                ),
            )
            .into());
        }
    }
    let (reader, source): (Box<dyn BufRead>, String) = match &input {
        None => (Box::new(std::io::BufReader::new(std::io::stdin())), "stdin".into()),
        Some(p) if p.as_os_str() == "-" => (Box::new(std::io::BufReader::new(std::io::stdin())), "stdin".into()),
        Some(p) => {
            let f =
                std::fs::File::open(p).map_err(|e| CliError::io(format!("cannot open {}: {e}", p.display()), &e))?;
            (Box::new(std::io::BufReader::with_capacity(1 << 20, f)), p.display().to_string())
        }
    };
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {pos} records ({per_sec}) {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    let limit = commit_every.unwrap_or(usize::MAX).max(1);
    let schema = client.schema().clone();
    let mut commit: Option<tributary_writer::Commit> = None;
    let (mut instants, mut records, mut stored, mut files, mut bytes) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut count = |s: tributary_writer::CommitSummary, bar: &indicatif::ProgressBar| {
        instants += 1;
        records += s.rows;
        stored += s.records();
        files += s.files.len() as u64;
        bytes += s.bytes();
        bar.set_message(format!("committed {}", s.instant));
    };
    let committed_checkpoint = checkpoint.clone();
    // Blocks of lines are decoded on blocking threads, several at a time,
    // while the commit writes the ones before them; they are written in
    // input order, each validated whole before anything of it is written.
    let depth = std::thread::available_parallelism().map_or(2, |n| n.get()) + 1;
    let mut lines = JsonLines { reader, source: source.clone(), next_line: 1 };
    let mut queue: std::collections::VecDeque<Decoded> = std::collections::VecDeque::new();
    let (mut assigned, mut at_end) = (0usize, false);
    loop {
        while !at_end && queue.len() < depth {
            match lines.next_block((limit - assigned).min(JSON_BLOCK_RECORDS)) {
                Ok(Some(block)) => {
                    assigned += block.records;
                    let ends_commit = assigned >= limit;
                    if ends_commit {
                        assigned = 0;
                    }
                    let (schema, source, n) = (schema.clone(), source.clone(), block.records);
                    let rows = tokio::task::spawn_blocking(move || {
                        tributary_writer::input::rows_from_json_lines(&schema, &block.text, &source, block.first_line)
                    });
                    queue.push_back(Decoded::Block { rows, records: n, ends_commit });
                }
                Ok(None) => at_end = true,
                Err(e) => {
                    queue.push_back(Decoded::Failed(e));
                    at_end = true;
                }
            }
        }
        let Some(next) = queue.pop_front() else { break };
        let decoded = match next {
            Decoded::Failed(e) => Err(e),
            Decoded::Block { rows, records, ends_commit } => match rows.await {
                Ok(Ok(rows)) => Ok((rows, records, ends_commit)),
                Ok(Err(e)) => Err(CliError::new(e.kind(), e.to_string())),
                Err(e) => Err(CliError::new(ErrorKind::Internal, format!("decoding {source}: {e}"))),
            },
        };
        let (rows, n, ends_commit) = match decoded {
            Ok(d) => d,
            Err(e) => {
                if let Some(c) = commit.take() {
                    c.abort().await?;
                }
                return Err(CliError::new(e.kind, format!("{}; nothing of this commit was written", e.message)).into());
            }
        };
        if n > 0 {
            let c = match commit.as_mut() {
                Some(c) => c,
                None => commit.insert(client.start_commit().await?),
            };
            c.write(rows).await?;
            bar.inc(n as u64);
        }
        if ends_commit && let Some(c) = commit.take() {
            count(c.commit().await?, &bar);
        }
    }
    // The end of the input: the last commit takes the checkpoint; with no
    // records, the checkpoint still advances, in an empty commit.
    let last = match commit.take() {
        Some(c) => Some(c),
        None if checkpoint.is_some() => Some(client.start_commit().await?),
        None => None,
    };
    if let Some(c) = last {
        count(c.commit_with_checkpoint(checkpoint.take()).await?, &bar);
    }
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    let committed = match (&committed_checkpoint, register) {
        (Some(cp), _) => {
            format!("; checkpoint `{cp}` committed as writer `{writer_id}` (generation {})", client.generation())
        }
        (None, true) => format!("; as writer `{writer_id}` (generation {})", client.generation()),
        (None, false) => String::new(),
    };
    // Of a key's versions in one commit, only the one the merge keeps is
    // stored (see `WriteSettings::combine`).
    let combined = match records - stored.min(records) {
        0 => String::new(),
        n => format!(" ({stored} stored: {n} were older versions of a key in the same commit)"),
    };
    println!(
        "wrote {records} records{combined} in {instants} instants: {files} files, {bytes} bytes, {secs:.2} s ({:.0} \
         records/s){committed}",
        records as f64 / secs.max(1e-9)
    );
    Ok(())
}

async fn checkpoint(
    store: &StoreArgs,
    table: String,
    writer_id: String,
    format: CheckpointFormatArg,
) -> anyhow::Result<()> {
    let t = store.open(&table, TableSettings::default()).await?;
    let status = t.checkpoint(&writer_id).await?;
    let mut out = std::io::stdout().lock();
    match format {
        CheckpointFormatArg::Plain => {
            if let Some(c) = &status.checkpoint {
                writeln!(out, "{}", c.checkpoint)?;
            }
        }
        CheckpointFormatArg::Json => {
            let c = status.checkpoint.as_ref();
            let doc = serde_json::json!({
                "writer_id": status.writer_id,
                "checkpoint": c.map(|c| c.checkpoint.as_str()),
                "instant": c.map(|c| c.instant.as_str()),
                "completed": c.and_then(|c| c.completed.as_ref()).map(|t| t.as_str()),
                "generation": status.generation,
            });
            writeln!(out, "{doc}")?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Records per block of JSON lines that `write` decodes as one piece.
const JSON_BLOCK_RECORDS: usize = 8192;

/// A block of JSON lines: its text, its first line's number, its records
/// (non-blank lines).
struct JsonBlock {
    text: String,
    first_line: usize,
    records: usize,
}

/// A block on its way to the commit: decoding, or the input's failure,
/// reported when the blocks before it are written.
enum Decoded {
    Block {
        rows: tokio::task::JoinHandle<Result<tributary_writer::Rows, tributary_writer::Error>>,
        records: usize,
        ends_commit: bool,
    },
    Failed(CliError),
}

/// `write`'s input, read in blocks of whole lines.
struct JsonLines {
    reader: Box<dyn BufRead>,
    source: String,
    /// The number of the next line to read.
    next_line: usize,
}

impl JsonLines {
    /// The next block of at most `max_records` records; `None` at the end.
    fn next_block(&mut self, max_records: usize) -> Result<Option<JsonBlock>, CliError> {
        let (first_line, mut records) = (self.next_line, 0);
        let mut text = String::with_capacity(max_records.min(JSON_BLOCK_RECORDS) * 128);
        while records < max_records {
            let start = text.len();
            // Appends the line, checking it is UTF-8 as it goes.
            let read = self.reader.read_line(&mut text).map_err(|e| self.unreadable(&e))?;
            if read == 0 {
                break;
            }
            if !text[start..].trim().is_empty() {
                records += 1;
            }
            self.next_line += 1;
        }
        if text.is_empty() {
            return Ok(None);
        }
        Ok(Some(JsonBlock { text, first_line, records }))
    }

    fn unreadable(&self, e: &std::io::Error) -> CliError {
        CliError::io(format!("{} line {}: cannot read: {e}", self.source, self.next_line), e)
    }
}

impl From<TimeModeArg> for TimeMode {
    fn from(mode: TimeModeArg) -> Self {
        match mode {
            TimeModeArg::WaitForSkew => TimeMode::WaitForSkew,
            TimeModeArg::HybridLogical => TimeMode::HybridLogical,
        }
    }
}

fn time_settings(mode: Option<TimeModeArg>, max_clock_skew_ms: u64) -> TimeSettings {
    TimeSettings { mode: mode.map(TimeMode::from), max_clock_skew: Duration::from_millis(max_clock_skew_ms) }
}

async fn compact(
    store: &StoreArgs,
    table: String,
    watch: bool,
    interval: Duration,
    table_settings: TableSettings,
    settings: tributary_compaction::CompactorSettings,
) -> anyhow::Result<()> {
    let t = store.open(&table, table_settings).await?;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.enable_steady_tick(Duration::from_millis(200));
    loop {
        let started = std::time::Instant::now();
        bar.set_message("compacting");
        let compactor = t.compactor(settings.clone()).await?;
        let done = compactor.run_once().await?;
        let secs = started.elapsed().as_secs_f64();
        bar.suspend(|| {
            if done.is_empty() {
                println!("nothing to compact");
            }
            for s in &done {
                println!(
                    "compaction {} completed {}: {} groups ({} key first, {} spilled), {} records, {} tombstones \
                     kept, {} bytes read, {} bytes written, {secs:.2} s",
                    s.instant,
                    s.completed,
                    s.groups,
                    s.key_first_groups,
                    s.spilled_groups,
                    s.records,
                    s.tombstones,
                    s.bytes_read,
                    s.bytes_written + s.tombstone_bytes
                );
            }
        });
        if !watch {
            break;
        }
        bar.set_message(format!("waiting {}", humantime::format_duration(interval)));
        tokio::time::sleep(interval).await;
    }
    bar.finish_and_clear();
    Ok(())
}

async fn read(store: &StoreArgs, table: String, options: ReadOptions, format: FormatArg) -> anyhow::Result<()> {
    let t = store.open(&table, TableSettings::default()).await?;
    let batch = t.read(&options).await?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match format {
        FormatArg::Jsonl => {
            let mut w = arrow::json::LineDelimitedWriter::new(&mut out);
            w.write(&batch)?;
            w.finish()?;
        }
        FormatArg::Csv => {
            let mut w = arrow::csv::Writer::new(&mut out);
            w.write(&batch)?;
        }
        FormatArg::Table => {
            writeln!(out, "{}", arrow::util::pretty::pretty_format_batches(&[batch])?)?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Parses `--tombstone-retention`.
fn tombstone_retention(s: &str) -> Result<TombstoneRetention, String> {
    TombstoneRetention::parse(s)
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let store = &cli.store;
    match cli.command {
        Command::Init {
            table,
            schema,
            record_key,
            ordering_field,
            partition_field,
            buckets,
            merge_mode,
            bucket_hash,
            name,
            database,
            no_hive_style,
            sequence_groups,
            tombstone_retention,
            time_mode,
        } => {
            let schema_json = std::fs::read_to_string(&schema)
                .map_err(|e| CliError::io(format!("cannot read schema {}: {e}", schema.display()), &e))?;
            let mut options = CreateOptions::new(schema_json, record_key, ordering_field);
            options.schema_source = schema.display().to_string();
            options.partition_field = partition_field;
            options.buckets = buckets;
            options.name = name;
            options.database = database;
            options.hive_style_partitioning = !no_hive_style;
            options.tombstone_retention = tombstone_retention;
            options.time_mode = time_mode.into();
            options.sequence_groups = sequence_groups
                .iter()
                .map(|g| {
                    tributary_timeline::SequenceGroup::parse(g).ok_or_else(|| {
                        CliError::new(
                            ErrorKind::InvalidInput,
                            format!("--sequence-group `{g}`: expected ordering_field=col1,col2"),
                        )
                        .into()
                    })
                })
                .collect::<anyhow::Result<_>>()?;
            options.merge_mode = match merge_mode {
                MergeModeArg::EventTime => MergeMode::EventTime,
                MergeModeArg::CommitTime => MergeMode::CommitTime,
            };
            options.bucket_hash = match bucket_hash {
                BucketHashArg::Murmur3 => BucketHash::Murmur3,
                BucketHashArg::HudiJava => BucketHash::HudiJava,
            };
            let t = store.builder(&table, TableSettings::default()).create(options).await?;
            let c = t.config();
            println!(
                "created table `{}` at {} (version {}, MERGE_ON_READ, {} buckets, {}, {} time)",
                c.name,
                t.location(),
                c.version,
                c.bucket.map_or(0, |b| b.num_buckets),
                c.merge_mode,
                t.time_mode().name()
            );
        }
        Command::Timeline { table } => {
            let t = store.open(&table, TableSettings::default()).await?;
            let timeline = t.timeline().await?;
            for w in timeline.warnings() {
                eprintln!("warning: {w}");
            }
            for i in timeline.instants() {
                let line = format!(
                    "{}  {:<14} {:<10} {}",
                    i.requested,
                    i.action.name(),
                    i.state,
                    i.completed.as_ref().map_or("-".to_string(), |c| c.to_string())
                );
                // Instants a Java writer archived into the LSM history.
                if timeline.is_archived(&i.requested) { println!("{line}  archived") } else { println!("{line}") }
            }
        }
        Command::Write {
            table,
            input,
            tasks,
            commit_every,
            writer_id,
            checkpoint,
            expect_checkpoint,
            columns,
            buckets,
            keep_every_version,
            time_mode,
            max_clock_skew_ms,
        } => {
            let checkpointing = checkpointing(&writer_id, checkpoint, expect_checkpoint, commit_every)?;
            let writer_id = writer_id.unwrap_or_else(|| DEFAULT_CLI_WRITER.into());
            let combine = !keep_every_version;
            let settings = WriteSettings { tasks, writer_id, columns, buckets, combine, ..Default::default() };
            let time = time_settings(time_mode, max_clock_skew_ms);
            write(store, table, input, settings, commit_every, time, checkpointing).await?;
        }
        Command::Checkpoint { table, writer_id, format } => checkpoint(store, table, writer_id, format).await?,
        Command::Compact {
            table,
            watch,
            interval,
            min_logs,
            max_groups,
            parallelism,
            memory_mb,
            spill_dir,
            time_mode,
            max_clock_skew_ms,
            heartbeat_expiry,
        } => {
            let time = time_settings(time_mode, max_clock_skew_ms);
            let table_settings = TableSettings { time, heartbeat_expiry, spill_dir, ..Default::default() };
            let settings = tributary_compaction::CompactorSettings {
                plan: tributary_compaction::PlanSettings {
                    min_log_files: min_logs,
                    max_groups: max_groups.unwrap_or(usize::MAX),
                    ..Default::default()
                },
                parallelism,
                memory_budget: usize::try_from(memory_mb << 20).unwrap_or(usize::MAX),
                ..Default::default()
            };
            compact(store, table, watch, interval, table_settings, settings).await?;
        }
        Command::Clean { table, retain_commits, heartbeat_expiry, time_mode, max_clock_skew_ms } => {
            let time = time_settings(time_mode, max_clock_skew_ms);
            let settings = TableSettings { time, heartbeat_expiry, ..Default::default() };
            let t = store.open(&table, settings).await?;
            match t.clean(retain_commits).await? {
                None => println!("nothing to clean"),
                Some(s) => println!(
                    "clean {} completed {}: {} files deleted, earliest retained commit {}",
                    s.instant,
                    s.completed,
                    s.deleted_files.len(),
                    if s.earliest_commit_to_retain.is_empty() { "-" } else { &s.earliest_commit_to_retain }
                ),
            }
        }
        Command::Read { table, query, as_of, begin, end, format, meta } => {
            let as_of = as_of.map(|t| instant_arg(&t, "--as-of")).transpose()?;
            let query = match query {
                QueryArg::Snapshot => Query::Snapshot,
                QueryArg::ReadOptimized => Query::ReadOptimized,
                QueryArg::Incremental => {
                    let begin = instant_arg(begin.as_deref().unwrap_or("00000000000000000"), "--begin")?;
                    let end = instant_arg(end.as_deref().unwrap_or("99999999999999999"), "--end")?;
                    Query::Incremental { begin, end }
                }
            };
            read(store, table, ReadOptions { query, as_of, with_meta: meta, ..Default::default() }, format).await?;
        }
    }
    Ok(())
}

/// The allocator, configured in .cargo/config.toml (README, "Allocator").
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", message(&e));
            exit_code(&e)
        }
    }
}

/// The error and its causes, joined by `: `, leaving out a cause whose text
/// an earlier one already shows (object-store errors repeat their sources
/// in their own messages).
fn message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_code_documented() {
        for kind in [
            ErrorKind::InvalidInput,
            ErrorKind::Corrupt,
            ErrorKind::Unavailable,
            ErrorKind::Conflict,
            ErrorKind::Internal,
        ] {
            let line = format!("\n  {:<3} {kind}", kind.exit_code());
            assert!(EXIT_CODES.contains(&line), "{line:?} missing from:\n{EXIT_CODES}");
        }
    }

    #[test]
    fn the_kind_is_found_through_context() {
        let bad = tributary_writer::Error::BadRecord { input: "in".into(), record: 2, field: None, reason: "x".into() };
        let e = anyhow::Error::from(tributary::Error::from(bad)).context("writing");
        assert_eq!(error_kind(&e), Some(ErrorKind::InvalidInput));
        let e = anyhow::Error::from(tributary_timeline::Error::LockTimeout {
            lock: "l".into(),
            waited: Duration::from_secs(1),
        });
        assert_eq!(error_kind(&e), Some(ErrorKind::Unavailable));
        let e = anyhow::Error::from(CliError::new(ErrorKind::InvalidInput, "--as-of: bad"));
        assert_eq!(error_kind(&e), Some(ErrorKind::InvalidInput));
        assert_eq!(error_kind(&anyhow::anyhow!("broken pipe")), None);
    }
}
