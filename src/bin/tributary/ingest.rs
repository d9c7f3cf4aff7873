//! `tributary ingest`: its arguments and its run, with a progress line.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tributary::ingest::{IngestSettings, StartAt, ValueFormat};
use tributary::{Error, TableSettings, WriteSettings};

use crate::args::{IngestArgs, IngestFormatArg, StartArgValue, StoreArgs};
use crate::output::Failure;

fn invalid(what: &str, reason: &str) -> Error {
    Error::InvalidInput { what: what.into(), reason: reason.into() }
}

/// Runs the job until SIGTERM or Ctrl-C, printing progress to standard
/// error every few seconds.
pub(crate) async fn run(store: &StoreArgs, args: IngestArgs) -> Result<(), Failure> {
    if let Some(addr) = args.metrics.metrics_addr {
        crate::metrics::serve_metrics(addr)?;
    }
    let t = store.open(&args.table, TableSettings::default()).await?;
    let mut settings = IngestSettings::new(args.brokers, args.topics, args.group);
    settings.commit_records = args.commit_records;
    settings.commit_interval = args.commit_interval;
    settings.on_bad_record = args.on_bad_record.0;
    settings.format = match (args.format, args.order_by) {
        (IngestFormatArg::Json, None) => ValueFormat::Json,
        (IngestFormatArg::DebeziumJson, Some(order_by)) => ValueFormat::DebeziumJson { order_by },
        (IngestFormatArg::Json, Some(_)) => {
            return Err(invalid("--order-by", "only --format debezium-json takes it").into());
        }
        (IngestFormatArg::DebeziumJson, None) => {
            return Err(invalid("--format debezium-json", "needs --order-by PATH (source.lsn, ts_ms, ...)").into());
        }
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
    let shutdown = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
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
