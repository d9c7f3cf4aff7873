//! `tributary ingest`: its arguments and its run, with a progress line.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tributary::ingest::{IngestSettings, KeyFrom, StartAt, ValueFormat};
use tributary::{Error, TableSettings, WriteSettings};

use crate::args::{IngestArgs, IngestFormatArg, KeyFromArg, StartArgValue, StoreArgs};
use crate::output::Failure;

fn invalid(what: &str, reason: &str) -> Error {
    Error::InvalidInput { what: what.into(), reason: reason.into() }
}

/// The value format `--format` and the options that go with it name.
fn value_format(args: &IngestArgs) -> Result<ValueFormat, Error> {
    let only = |flag: &str, format: &str| Err(invalid(flag, &format!("only --format {format} takes it")));
    if args.order_by.is_some() && !matches!(args.format, IngestFormatArg::DebeziumJson) {
        return only("--order-by", "debezium-json");
    }
    if !matches!(args.format, IngestFormatArg::Avro) {
        if args.value_schema.is_some() {
            return only("--value-schema", "avro");
        }
        if args.schema_id.is_some() {
            return only("--schema-id", "avro");
        }
    }
    Ok(match args.format {
        IngestFormatArg::Json => ValueFormat::Json,
        IngestFormatArg::DebeziumJson => match &args.order_by {
            Some(order_by) => ValueFormat::DebeziumJson { order_by: order_by.clone() },
            None => return Err(invalid("--format debezium-json", "needs --order-by PATH (source.lsn, ts_ms, ...)")),
        },
        IngestFormatArg::Avro => {
            let Some(path) = &args.value_schema else {
                return Err(invalid("--format avro", "needs --value-schema FILE (the values' Avro schema)"));
            };
            let schema = std::fs::read_to_string(path)
                .map_err(|e| invalid(&format!("--value-schema {}", path.display()), &e.to_string()))?;
            ValueFormat::Avro { schema, schema_id: args.schema_id }
        }
    })
}

/// Runs the job until SIGTERM or Ctrl-C, printing progress to standard
/// error every few seconds.
pub(crate) async fn run(store: &StoreArgs, args: IngestArgs) -> Result<(), Failure> {
    // Listened for from the start: a stop that comes while the job starts
    // (opening the table, joining the group) ends it cleanly once it runs,
    // instead of killing the process.
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    if let Some(addr) = args.metrics.metrics_addr {
        crate::metrics::serve_metrics(addr)?;
    }
    let t = store.open(&args.table, TableSettings::default()).await?;
    let format = value_format(&args)?;
    let mut settings = IngestSettings::new(args.brokers, args.topics, args.group);
    settings.format = format;
    settings.commit_records = args.commit_records;
    settings.commit_interval = args.commit_interval;
    settings.on_bad_record = args.on_bad_record.0;
    settings.key_from = match args.key_from {
        KeyFromArg::Value => KeyFrom::Value,
        KeyFromArg::Message => KeyFrom::MessageKey,
    };
    settings.start_at = match args.start {
        StartArgValue::Earliest => StartAt::Earliest,
        StartArgValue::Latest => StartAt::Latest,
    };
    settings.kafka = args.kafka.into_iter().collect();
    let write = WriteSettings {
        tasks: args.tasks,
        writer_id: format!("ingest-{}", std::process::id()),
        columns: args.columns,
        combine: !args.keep_every_version,
        // A job commits every interval while records come: each commit
        // begins the next in its lock hold, kept for two intervals.
        begin_next: Some(settings.commit_interval.max(Duration::from_secs(1)) * 2),
        ..Default::default()
    };
    let job = t.ingest(write, settings).await?;
    let stats = job.stats();
    let progress = tokio::spawn(async move {
        let started = std::time::Instant::now();
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            let records = stats.records.load(Ordering::Relaxed);
            let secs = started.elapsed().as_secs_f64().max(1e-3);
            let lag = stats.lag.lock().map(|l| l.clone()).unwrap_or_default();
            let last = stats.last_commit.lock().ok().and_then(|l| l.clone()).unwrap_or_else(|| "none".into());
            let per_partition: Vec<String> = lag.iter().map(|((t, p), l)| format!("{t}/{p} {l}")).collect();
            eprintln!(
                "{records} records ({:.0}/s), {} commits (last {last}), {} bad, {} partitions, lag {} ({})",
                records as f64 / secs,
                stats.commits.load(Ordering::Relaxed),
                stats.bad_records.load(Ordering::Relaxed),
                stats.partitions.load(Ordering::Relaxed),
                lag.values().sum::<i64>(),
                per_partition.join(", "),
            );
        }
    });
    let shutdown = async move {
        let stopped = |s: Option<tokio::signal::unix::Signal>| async move {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stopped(term.take()) => {}
            () = stopped(interrupt.take()) => {}
        }
        eprintln!("stopping: committing the open batch");
    };
    let result = job.run(shutdown).await;
    progress.abort();
    let summary = result.map_err(Error::from)?;
    eprintln!(
        "{} records in {} commits, {} bad records left out",
        summary.records, summary.commits, summary.bad_records
    );
    Ok(())
}
