//! Where the table records each partition's position: one writer id per
//! group, topic and partition, whose checkpoint is the partition's next
//! offset (`tributary_writer::SourceLease`).

/// The writer id of partition `partition` of `topic` consumed by `group`:
/// `kafka.<group>.<topic>.<partition>`. A group or topic with characters
/// a writer id cannot hold (or too long for one) is named by a hash of
/// both instead: `kafka.h<16 hex digits>.<partition>`.
pub(crate) fn source_id(group: &str, topic: &str, partition: i32) -> String {
    let plain = format!("kafka.{group}.{topic}.{partition}");
    let fits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    // `.` separates the parts, so neither part may hold one.
    if fits(group) && fits(topic) && plain.len() <= 128 {
        return plain;
    }
    let mut bytes = Vec::with_capacity(group.len() + topic.len() + 1);
    bytes.extend_from_slice(group.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(topic.as_bytes());
    let hash = murmur3::murmur3_x64_128(&mut std::io::Cursor::new(bytes), 0).unwrap_or_default();
    format!("kafka.h{:016x}.{partition}", hash as u64)
}

/// The checkpoint text of a partition whose next record is `next`.
pub(crate) fn render(next: i64) -> String {
    next.to_string()
}

/// The next offset a checkpoint records; `None` if it is not one this
/// crate wrote.
pub(crate) fn parse(checkpoint: &str) -> Option<i64> {
    checkpoint.parse().ok().filter(|n: &i64| *n >= 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_group_topic_and_partition() {
        assert_eq!(source_id("orders-ingest", "orders", 3), "kafka.orders-ingest.orders.3");
        let odd = source_id("team/a", "orders", 3);
        assert!(odd.starts_with("kafka.h") && odd.ends_with(".3"), "{odd}");
        assert_ne!(odd, source_id("team/b", "orders", 3));
        // `.` in a name would make two pairs share an id.
        assert_ne!(source_id("a.b", "c", 0), source_id("a", "b.c", 0));
        assert!(source_id(&"g".repeat(200), "t", 0).len() <= 128);
        assert_eq!(parse(&render(42)), Some(42));
        assert_eq!(parse("x"), None);
    }
}
