//! The `tributary` command-line tool.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use tributary::{CreateOptions, Table};
use tributary_timeline::{BucketHash, MergeMode};

#[derive(Parser)]
#[command(
    name = "tributary",
    version,
    about = "Non-blocking concurrent upserts into Apache Hudi v8 Merge-on-Read tables"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
        /// Table folder.
        table: PathBuf,
        /// Avro schema file (.avsc) of the table's columns.
        #[arg(long)]
        schema: PathBuf,
        /// Record key field.
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
    },
    /// Print the timeline: requested time, action, state, completion time.
    Timeline {
        /// Table folder.
        table: PathBuf,
    },
}

async fn run(cli: Cli) -> anyhow::Result<()> {
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
        } => {
            let schema_json = std::fs::read_to_string(&schema)
                .map_err(|e| anyhow::anyhow!("cannot read schema {}: {e}", schema.display()))?;
            let mut options = CreateOptions::new(schema_json, record_key, ordering_field);
            options.schema_source = schema.display().to_string();
            options.partition_field = partition_field;
            options.buckets = buckets;
            options.name = name;
            options.database = database;
            options.hive_style_partitioning = !no_hive_style;
            options.merge_mode = match merge_mode {
                MergeModeArg::EventTime => MergeMode::EventTime,
                MergeModeArg::CommitTime => MergeMode::CommitTime,
            };
            options.bucket_hash = match bucket_hash {
                BucketHashArg::Murmur3 => BucketHash::Murmur3,
                BucketHashArg::HudiJava => BucketHash::HudiJava,
            };
            let t = Table::create_local(&table, options).await?;
            let c = t.config();
            println!(
                "created table `{}` at {} (version {}, MERGE_ON_READ, {} buckets, {})",
                c.name,
                t.location(),
                c.version,
                c.bucket.map_or(0, |b| b.num_buckets),
                c.merge_mode
            );
        }
        Command::Timeline { table } => {
            let t = Table::open_local(&table).await?;
            let timeline = t.timeline().await?;
            for w in timeline.warnings() {
                eprintln!("warning: {w}");
            }
            for i in timeline.instants() {
                println!(
                    "{}  {:<14} {:<10} {}",
                    i.requested,
                    i.action.name(),
                    i.state,
                    i.completed.as_ref().map_or("-".to_string(), |c| c.to_string())
                );
            }
        }
    }
    Ok(())
}

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
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
