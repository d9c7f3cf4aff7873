//! The consumer's callbacks: partition assignments and revocations reach
//! the ingest loop as events. A newly assigned partition is paused at once,
//! until the loop has taken its writer id over and moved it to the offset
//! the table records.

use std::sync::Arc;

use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::TopicPartitionList;
use tokio::sync::mpsc::UnboundedSender;

use tributary_timeline::metrics as names;

use crate::stats::IngestStats;

/// A topic and partition.
pub(crate) type Partition = (String, i32);

/// A change of the partitions this process consumes.
#[derive(Debug)]
pub(crate) enum Event {
    /// These partitions are this process's now (paused).
    Assigned(Vec<Partition>),
    /// These partitions are no longer this process's.
    Revoked(Vec<Partition>),
}

/// The consumer context: forwards rebalances to the ingest loop, and the
/// client's statistics (each partition's lag) to the job's counters.
pub(crate) struct Context {
    pub(crate) events: UnboundedSender<Event>,
    pub(crate) stats: Arc<IngestStats>,
    /// The table's name, the `table` label of every metric.
    pub(crate) table: String,
}

fn partitions(tpl: &TopicPartitionList) -> Vec<Partition> {
    tpl.elements().iter().map(|e| (e.topic().to_string(), e.partition())).collect()
}

impl ClientContext for Context {
    /// Every `statistics.interval.ms`: the lag of each partition this
    /// consumer fetches (records after the last one consumed).
    fn stats(&self, statistics: Statistics) {
        let mut lags = std::collections::BTreeMap::new();
        for (topic, t) in &statistics.topics {
            for (partition, p) in &t.partitions {
                if *partition < 0 || p.consumer_lag < 0 || p.fetch_state == "none" {
                    continue;
                }
                let labels =
                    [("table", self.table.clone()), ("topic", topic.clone()), ("partition", partition.to_string())];
                metrics::gauge!(names::INGEST_LAG, &labels).set(p.consumer_lag as f64);
                lags.insert((topic.clone(), *partition), p.consumer_lag);
            }
        }
        if let Ok(mut lag) = self.stats.lag.lock() {
            *lag = lags;
        }
    }
}

impl ConsumerContext for Context {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            // The loop may be gone (it is shutting down): nothing to tell.
            let _ = self.events.send(Event::Revoked(partitions(tpl)));
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => {
                if let Err(e) = consumer.pause(tpl) {
                    tracing::warn!(error = %e, "pausing newly assigned partitions failed");
                }
                let _ = self.events.send(Event::Assigned(partitions(tpl)));
            }
            Rebalance::Revoke(_) => {}
            Rebalance::Error(e) => tracing::warn!(error = %e, "consumer group rebalance failed"),
        }
    }
}
