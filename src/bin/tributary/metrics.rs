//! `--metrics-addr`: serves the metrics the library records
//! ([`tributary::metrics`]) to Prometheus, over HTTP at that address (any
//! path; `/health` answers `OK`).

use std::net::SocketAddr;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

use crate::output::Failure;

/// Histogram buckets of the `_seconds` metrics: lock waits and holds of
/// milliseconds up to backpressure waits of minutes.
const SECONDS_BUCKETS: [f64; 15] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0, 300.0];

/// Installs the process's metrics recorder and serves it at `addr`. Call
/// it inside the runtime, before any table is opened: what a table records
/// goes to the recorder installed when it was opened.
pub(crate) fn serve_metrics(addr: SocketAddr) -> Result<(), Failure> {
    let failed = |e: metrics_exporter_prometheus::BuildError| tributary::Error::InvalidInput {
        what: format!("--metrics-addr {addr}"),
        reason: format!("cannot serve metrics there: {e}"),
    };
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &SECONDS_BUCKETS)
        .map_err(failed)?
        .install()
        .map_err(failed)?;
    tributary::metrics::describe();
    tracing::info!("metrics served at http://{addr}/metrics");
    eprintln!("metrics at http://{addr}/metrics");
    Ok(())
}
