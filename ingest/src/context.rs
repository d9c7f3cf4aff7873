//! The consumer's callbacks: partition assignments and revocations reach
//! the ingest loop as events. A newly assigned partition is paused at once,
//! until the loop has taken its writer id over and moved it to the offset
//! the table records.

use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::topic_partition_list::TopicPartitionList;
use tokio::sync::mpsc::UnboundedSender;

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

/// The consumer context: forwards rebalances to the ingest loop.
pub(crate) struct Context {
    pub(crate) events: UnboundedSender<Event>,
}

fn partitions(tpl: &TopicPartitionList) -> Vec<Partition> {
    tpl.elements().iter().map(|e| (e.topic().to_string(), e.partition())).collect()
}

impl ClientContext for Context {}

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
