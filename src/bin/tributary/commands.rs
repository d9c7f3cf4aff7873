//! One function per subcommand: each opens the table, calls the library,
//! and hands what it returns to [`crate::output`].

use std::io::BufRead;
use std::path::PathBuf;
use std::time::Duration;

use tributary::{
    BucketHash, CompactorSettings, CreateOptions, Error, JsonLinesOptions, JsonLinesProgress, MergeMode, Query,
    ReadOptions, SequenceGroup, ServiceSchedule, TableSettings, WriteSettings, serve, write_json_lines,
};

use crate::args::{
    BucketHashArg, CheckpointFormatArg, Checkpointing, Cli, Command, DEFAULT_CLI_WRITER, FormatArg, MergeModeArg,
    QueryArg, Rounds, StoreArgs, checkpointing, instant_arg, retention, time_settings,
};
use crate::output::{self, Failure};

/// Runs the command `cli` names.
pub(crate) async fn run(cli: Cli) -> Result<(), Failure> {
    let store = &cli.store;
    match cli.command {
        Command::Init {
            table,
            table_version,
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
            max_logs_per_file_group,
            evolve_schema,
            change_log,
        } => {
            let schema_json = std::fs::read_to_string(&schema)
                .map_err(|e| Error::Io { what: format!("cannot read schema {}", schema.display()), source: e })?;
            let mut options = CreateOptions::new(schema_json, record_key, ordering_field);
            options.schema_source = schema.display().to_string();
            options.table_version = table_version;
            options.partition_field = partition_field;
            options.buckets = buckets;
            options.name = name;
            options.database = database;
            options.hive_style_partitioning = !no_hive_style;
            options.tombstone_retention = tombstone_retention;
            options.time_mode = time_mode.into();
            options.max_logs_per_file_group = (max_logs_per_file_group > 0).then_some(max_logs_per_file_group);
            options.evolve_on_write = evolve_schema;
            options.change_log = change_log;
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
            evolve_schema,
            time_mode,
            max_clock_skew_ms,
            backpressure_timeout,
            metrics,
        } => {
            if let Some(addr) = metrics.metrics_addr {
                crate::metrics::serve_metrics(addr)?;
            }
            let checkpointing = checkpointing(&writer_id, checkpoint, expect_checkpoint, commit_every)?;
            let writer_id = writer_id.unwrap_or_else(|| DEFAULT_CLI_WRITER.into());
            let combine = !keep_every_version;
            let settings = WriteSettings {
                tasks,
                writer_id,
                columns,
                buckets,
                combine,
                backpressure_timeout,
                evolve: evolve_schema,
                ..Default::default()
            };
            let table_settings =
                TableSettings { time: time_settings(time_mode, max_clock_skew_ms), ..Default::default() };
            write(store, table, input, settings, commit_every, table_settings, checkpointing).await?;
        }
        #[cfg(feature = "kafka")]
        Command::Ingest(args) => crate::ingest::run(store, args).await?,
        Command::Checkpoint { table, writer_id, format } => checkpoint(store, table, writer_id, format).await?,
        Command::Compact { table, rounds, compactor, service } => {
            let table_settings = service.table_settings(compactor.spill_dir.clone());
            compact(store, table, rounds, table_settings, compactor.settings()).await?;
        }
        Command::Clean { table, retain_commits, retain_hours, heartbeat_expiry, time_mode, max_clock_skew_ms } => {
            let time = time_settings(time_mode, max_clock_skew_ms);
            let settings = TableSettings { time, heartbeat_expiry, ..Default::default() };
            let t = store.open(&table, settings).await?;
            output::cleaned(t.clean_with(retention(retain_commits, retain_hours)).await?.as_ref());
        }
        Command::ChangeLog { table, rounds, service } => {
            change_log(store, table, rounds, service.table_settings(None)).await?;
        }
        Command::Archive { table, bounds, service } => {
            let t = store.open(&table, service.table_settings(None)).await?;
            output::archived(&t.archive(&bounds.settings()).await?);
        }
        Command::Serve {
            tables,
            compact_every,
            clean_every,
            retain_commits,
            retain_hours,
            archive_every,
            change_log_every,
            bounds,
            compactor,
            service,
            metrics,
        } => {
            if let Some(addr) = metrics.metrics_addr {
                crate::metrics::serve_metrics(addr)?;
            }
            let schedule = ServiceSchedule {
                compact_every,
                compactor: compactor.settings(),
                clean_every: (!clean_every.is_zero()).then_some(clean_every),
                retention: retention(retain_commits, retain_hours),
                archive_every: (!archive_every.is_zero()).then_some(archive_every),
                archive: bounds.settings(),
                change_log_every: (!change_log_every.is_zero()).then_some(change_log_every),
            };
            serve_tables(store, tables, schedule, service.table_settings(compactor.spill_dir.clone())).await?;
        }
        Command::Read { table, query, as_of, window, format, meta, columns, filter, limit, sort } => {
            let as_of = as_of.map(|t| instant_arg(&t, "--as-of")).transpose()?;
            let query = match query {
                QueryArg::Snapshot => Query::Snapshot,
                QueryArg::ReadOptimized => Query::ReadOptimized,
                QueryArg::Incremental => {
                    let (begin, end) = window.bounds()?;
                    Query::incremental(begin, end)
                }
            };
            let plain = columns.is_empty() && filter.is_none() && limit.is_none();
            if plain && sort {
                let options = ReadOptions { query, as_of, with_meta: meta, ..Default::default() };
                read(store, table, options, format).await?;
            } else if plain {
                stream(store, table, query, as_of, meta, format).await?;
            } else {
                let read_as = tributary::sql::ReadAs { query, as_of, changes: None };
                let pick = crate::sql::Selection { columns, filter, limit, meta, sort };
                crate::sql::read(store, table, read_as, pick, format).await?;
            }
        }
        Command::Changes { table, window, format } => {
            let (begin, end) = window.bounds()?;
            let begin = begin.unwrap_or(tributary::InstantTime::EARLIEST);
            let end = end.unwrap_or(tributary::InstantTime::LATEST);
            let t = store.open(&table, TableSettings::default()).await?;
            let changes = t.changes(&begin, &end).await?;
            let n = changes.rows.num_rows();
            output::rows(changes.rows, format)?;
            eprintln!("{n} changes in ({}, {}]; the next window begins at {}", changes.begin, changes.end, changes.end);
        }
        Command::Sql { query, tables, format, output } => {
            crate::sql::sql(store, &query, &tables, format, output).await?;
        }
        Command::Alter { table, add_columns, promotions, sequence_groups } => {
            let t = store.open(&table, TableSettings::default()).await?;
            let alterations: Vec<_> = add_columns.into_iter().chain(promotions).chain(sequence_groups).collect();
            let (instant, changes) = t.alter_schema(&alterations).await?;
            output::altered(&instant, &changes);
        }
        Command::Schema { table, as_of, format } => {
            let as_of = as_of.map(|t| instant_arg(&t, "--as-of")).transpose()?;
            let t = store.open(&table, TableSettings::default()).await?;
            output::schema(&t.schema_at(as_of.as_ref()).await?, format);
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
    Rounds { watch, interval }: Rounds,
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

/// `change-log`: one round, or a round every `interval` with `watch`.
async fn change_log(
    store: &StoreArgs,
    table: String,
    Rounds { watch, interval }: Rounds,
    table_settings: TableSettings,
) -> Result<(), Failure> {
    let t = store.open(&table, table_settings).await?;
    let writer = t.change_log_writer().await?;
    loop {
        let started = std::time::Instant::now();
        let done = writer.run_once().await?;
        output::change_logged(done.as_ref(), started.elapsed().as_secs_f64());
        if !watch {
            return Ok(());
        }
        tokio::time::sleep(interval).await;
    }
}

/// `serve`: the table services of every table, each its own loop, until
/// SIGTERM or Ctrl-C; the jobs running then finish first.
async fn serve_tables(
    store: &StoreArgs,
    tables: Vec<String>,
    schedule: ServiceSchedule,
    settings: TableSettings,
) -> Result<(), Failure> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut loops = Vec::new();
    for uri in tables {
        let t = store.open(&uri, settings.clone()).await?;
        let (schedule, mut stopped) = (schedule.clone(), stopped.clone());
        loops.push(tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            let report = serve(&t, &schedule, shutdown, |e| output::service_event(&uri, &e)).await;
            (uri, report)
        }));
    }
    drop(stopped);
    let signal = async {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    };
    let all = futures::future::join_all(loops);
    tokio::pin!(all);
    let done = tokio::select! {
        r = signal => {
            r.map_err(|e| Error::Io { what: "waiting for a stop signal".into(), source: e })?;
            eprintln!("stopping: the running jobs finish first");
            let _ = stop.send(true);
            all.await
        }
        done = &mut all => done,
    };
    for joined in done {
        let (uri, report) =
            joined.map_err(|e| Error::TaskFailed { what: "a table service".into(), reason: e.to_string() })?;
        output::service_report(&uri, &report?);
    }
    Ok(())
}

/// `read --sort`: the rows of one query, ordered by partition and key.
async fn read(store: &StoreArgs, table: String, options: ReadOptions, format: FormatArg) -> Result<(), Failure> {
    let t = store.open(&table, TableSettings::default()).await?;
    let batch = t.read(&options).await?;
    output::rows(batch, format)
}

/// `read`: the rows of one query, printed as the scan's merges produce
/// them.
async fn stream(
    store: &StoreArgs,
    table: String,
    query: Query,
    as_of: Option<tributary::InstantTime>,
    meta: bool,
    format: FormatArg,
) -> Result<(), Failure> {
    use futures::TryStreamExt;
    let t = store.open(&table, TableSettings::default()).await?;
    let mut scan = t.scan().query(query).with_meta(meta);
    if let Some(at) = as_of {
        scan = scan.as_of(at);
    }
    let mut rows = scan.stream().await?;
    let mut sink = output::Rows::new(rows.schema(), format, None)?;
    while let Some(batch) = rows.try_next().await? {
        sink.write(&batch)?;
    }
    sink.finish()
}
