//! One function per subcommand: each opens the table, calls the library,
//! and hands what it returns to [`crate::output`].

use std::io::BufRead;
use std::path::PathBuf;
use std::time::Duration;

use tributary::{
    ArchiveSettings, BucketHash, CompactorSettings, CreateOptions, Error, JsonLinesOptions, JsonLinesProgress,
    MergeMode, PlanSettings, Query, ReadOptions, SequenceGroup, TableSettings, WriteSettings, write_json_lines,
};

use crate::args::{
    BucketHashArg, CheckpointFormatArg, Checkpointing, Cli, Command, DEFAULT_CLI_WRITER, FormatArg, MergeModeArg,
    QueryArg, StoreArgs, checkpointing, instant_arg, time_settings,
};
use crate::output::{self, Failure};

/// Runs the command `cli` names.
pub(crate) async fn run(cli: Cli) -> Result<(), Failure> {
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
                .map_err(|e| Error::Io { what: format!("cannot read schema {}", schema.display()), source: e })?;
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
                    SequenceGroup::parse(g).ok_or_else(|| Error::InvalidInput {
                        what: format!("--sequence-group `{g}`"),
                        reason: "expected ordering_field=col1,col2".into(),
                    })
                })
                .collect::<tributary::Result<_>>()?;
            options.merge_mode = match merge_mode {
                MergeModeArg::EventTime => MergeMode::EventTime,
                MergeModeArg::CommitTime => MergeMode::CommitTime,
            };
            options.bucket_hash = match bucket_hash {
                BucketHashArg::Murmur3 => BucketHash::Murmur3,
                BucketHashArg::HudiJava => BucketHash::HudiJava,
            };
            let t = store.builder(&table, TableSettings::default()).create(options).await?;
            output::created(&t);
        }
        Command::Timeline { table } => {
            let t = store.open(&table, TableSettings::default()).await?;
            output::timeline(&t.timeline().await?);
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
            let table_settings =
                TableSettings { time: time_settings(time_mode, max_clock_skew_ms), ..Default::default() };
            write(store, table, input, settings, commit_every, table_settings, checkpointing).await?;
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
            let settings = CompactorSettings {
                plan: PlanSettings {
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
            output::cleaned(t.clean(retain_commits).await?.as_ref());
        }
        Command::Archive {
            table,
            keep_min_commits,
            keep_max_commits,
            cleaner_commits_retained,
            compaction_delta_commits,
            heartbeat_expiry,
            time_mode,
            max_clock_skew_ms,
        } => {
            let time = time_settings(time_mode, max_clock_skew_ms);
            let t = store.open(&table, TableSettings { time, heartbeat_expiry, ..Default::default() }).await?;
            let settings = ArchiveSettings {
                keep_min_commits,
                keep_max_commits,
                cleaner_commits_retained,
                compaction_delta_commits,
                ..Default::default()
            };
            output::archived(&t.archive(&settings).await?);
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

/// `write`: registers the writer ID when given one (and compares its
/// checkpoint), then writes the input's JSON lines
/// ([`tributary::write_json_lines`]) behind a progress spinner.
async fn write(
    store: &StoreArgs,
    table: String,
    input: Option<PathBuf>,
    settings: WriteSettings,
    commit_every: Option<usize>,
    table_settings: TableSettings,
    checkpointing: Checkpointing,
) -> Result<(), Failure> {
    let started = std::time::Instant::now();
    let t = store.open(&table, table_settings).await?;
    let writer_id = settings.writer_id.clone();
    let client = t.write_client(settings).await?;
    let Checkpointing { register, checkpoint, expect } = checkpointing;
    if register {
        // Take the ID over first: from here on no earlier writer of the ID
        // can commit, so the checkpoint read here stays the last one.
        t.register_writer(&client, expect.as_deref()).await?;
    }
    let (reader, source): (Box<dyn BufRead + Send>, String) = match &input {
        None => (Box::new(std::io::BufReader::new(std::io::stdin())), "stdin".into()),
        Some(p) if p.as_os_str() == "-" => (Box::new(std::io::BufReader::new(std::io::stdin())), "stdin".into()),
        Some(p) => {
            let f = std::fs::File::open(p)
                .map_err(|e| Error::Io { what: format!("cannot open {}", p.display()), source: e })?;
            (Box::new(std::io::BufReader::with_capacity(1 << 20, f)), p.display().to_string())
        }
    };
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {pos} records ({per_sec}) {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    let options = JsonLinesOptions { commit_every, checkpoint: checkpoint.clone() };
    let summary = write_json_lines(&client, reader, &source, &options, |p| match p {
        JsonLinesProgress::Written(n) => bar.inc(n),
        JsonLinesProgress::Committed(s) => bar.set_message(format!("committed {}", s.instant)),
        _ => {}
    })
    .await?;
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    output::written(&summary, secs, &writer_id, client.generation(), checkpoint.as_deref(), register);
    Ok(())
}

/// `checkpoint`: what the table records about a writer ID.
async fn checkpoint(
    store: &StoreArgs,
    table: String,
    writer_id: String,
    format: CheckpointFormatArg,
) -> Result<(), Failure> {
    let t = store.open(&table, TableSettings::default()).await?;
    let status = t.checkpoint(&writer_id).await?;
    output::checkpoint(&status, format)
}

/// `compact`: one round, or a round every `interval` with `watch`.
async fn compact(
    store: &StoreArgs,
    table: String,
    watch: bool,
    interval: Duration,
    table_settings: TableSettings,
    settings: CompactorSettings,
) -> Result<(), Failure> {
    let t = store.open(&table, table_settings).await?;
    let bar = indicatif::ProgressBar::new_spinner();
    bar.enable_steady_tick(Duration::from_millis(200));
    loop {
        let started = std::time::Instant::now();
        bar.set_message("compacting");
        let compactor = t.compactor(settings.clone()).await?;
        let done = compactor.run_once().await?;
        let secs = started.elapsed().as_secs_f64();
        bar.suspend(|| output::compacted(&done, secs));
        if !watch {
            break;
        }
        bar.set_message(format!("waiting {}", humantime::format_duration(interval)));
        tokio::time::sleep(interval).await;
    }
    bar.finish_and_clear();
    Ok(())
}

/// `read`: the rows of one query.
async fn read(store: &StoreArgs, table: String, options: ReadOptions, format: FormatArg) -> Result<(), Failure> {
    let t = store.open(&table, TableSettings::default()).await?;
    let batch = t.read(&options).await?;
    output::rows(batch, format)
}
