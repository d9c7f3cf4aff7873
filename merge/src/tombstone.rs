//! Tombstones: what a compaction keeps of a deleted key.
//!
//! When a delete wins a key (under event-time ordering, with an ordering
//! value), the key and the delete's ordering value outlive the compaction
//! that removes the row: the compactor writes them as a DELETE block into the
//! new file slice (`docs/design.md`, "Tombstones"), so that an older version
//! of the key that arrives later stays deleted. A delete without an ordering
//! value leaves none; it only ever beat what was written before it.
//!
//! Retention ([`TombstoneRetention`]) bounds how long they live: a tombstone
//! more than the bound below the newest ordering value of its file group is
//! dropped.

use arrow::datatypes::{DataType, TimeUnit};
use tributary_format::{DELETE_DECIMAL_SCALE, DeleteRecord};
use tributary_timeline::TombstoneRetention;

use crate::error::{Error, Result};
use crate::ordering::{Ord2, is_unconditional};

/// A deleted key and the ordering value of the delete that won it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tombstone {
    pub(crate) key: String,
    pub(crate) order: Ord2,
}

impl Tombstone {
    /// The tombstone a winning delete leaves, if any: only a delete with an
    /// ordering value (one that orders against later versions) leaves one.
    pub(crate) fn of(key: &[u8], order: &Ord2) -> Option<Self> {
        if *order == Ord2::Null || is_unconditional(&order.to_delete()) {
            return None;
        }
        Some(Tombstone { key: String::from_utf8_lossy(key).into_owned(), order: order.clone() })
    }
}

/// The lowest ordering value a tombstone may have and be kept, given the
/// newest ordering value of its file group; `None` keeps every tombstone.
fn floor(retention: TombstoneRetention, newest: &Ord2, field: &DataType, name: &str) -> Result<Option<Ord2>> {
    let unfit = |what: &str| Error::Invalid {
        what: format!("tributary.tombstone.retention `{}`", retention.render()),
        reason: format!("{what}, but the ordering field `{name}` is of type {field}"),
    };
    let amount = match retention {
        TombstoneRetention::Forever => return Ok(None),
        TombstoneRetention::Lateness(d) => match field {
            DataType::Timestamp(TimeUnit::Millisecond, _) => d.as_millis() as f64,
            DataType::Timestamp(TimeUnit::Microsecond, _) => d.as_micros() as f64,
            DataType::Date32 => d.as_secs().div_ceil(86_400) as f64,
            _ => return Err(unfit("a duration needs a date or timestamp ordering field")),
        },
        TombstoneRetention::Amount(a) => a,
    };
    Ok(match newest {
        Ord2::Null => None,
        Ord2::Int(n) => Some(Ord2::Int(n.saturating_sub(amount.ceil() as i64))),
        Ord2::Float(n) => Some(Ord2::Float(n - amount)),
        Ord2::Decimal(n) => {
            let scaled = amount * 10f64.powi(i32::from(DELETE_DECIMAL_SCALE));
            Some(Ord2::Decimal(Box::new(n.saturating_sub(scaled.ceil() as i128))))
        }
        Ord2::Text(_) | Ord2::Bytes(_) => return Err(unfit("a lateness bound needs a numeric or time ordering field")),
        Ord2::Tuple(_) => return Err(unfit("a lateness bound needs a single ordering field")),
    })
}

/// The tombstones of one file group that `retention` keeps, as delete
/// records of `partition` whose ordering values have the ordering field's
/// type (`field`, named `name`), sorted by key. `newest` is the newest
/// ordering value the group holds.
pub(crate) fn retained(
    mut tombstones: Vec<Tombstone>,
    newest: &Ord2,
    retention: TombstoneRetention,
    field: &DataType,
    name: &str,
    partition: &str,
) -> Result<Vec<DeleteRecord>> {
    if let Some(floor) = floor(retention, newest, field, name)? {
        tombstones.retain(|t| t.order.cmp(&floor) != std::cmp::Ordering::Less);
    }
    tombstones.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    Ok(tombstones
        .into_iter()
        .map(|t| DeleteRecord { key: t.key, partition: partition.to_string(), ordering: t.order.to_delete_as(field) })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tributary_format::OrderingValue;

    fn t(key: &str, order: Ord2) -> Tombstone {
        Tombstone { key: key.into(), order }
    }

    #[test]
    fn deletes_without_an_ordering_value_leave_no_tombstone() {
        assert!(Tombstone::of(b"k", &Ord2::Null).is_none());
        assert!(Tombstone::of(b"k", &Ord2::Int(0)).is_none());
        assert!(Tombstone::of(b"k", &Ord2::Int(5)).is_some());
    }

    #[test]
    fn a_bound_drops_only_what_is_older_than_newest_minus_bound() {
        let ts = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
        let day = 86_400_000;
        let all = vec![t("b", Ord2::Int(10 * day)), t("a", Ord2::Int(3 * day - 1)), t("c", Ord2::Int(3 * day))];
        let kept = retained(
            all.clone(),
            &Ord2::Int(10 * day),
            TombstoneRetention::Lateness(Duration::from_secs(7 * 86_400)),
            &ts,
            "ts",
            "p",
        )
        .unwrap();
        let keys: Vec<&str> = kept.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(keys, ["b", "c"]);
        assert_eq!(kept[0].ordering, OrderingValue::Long(10 * day));
        assert_eq!(kept[0].partition, "p");
        let forever = retained(all, &Ord2::Int(10 * day), TombstoneRetention::Forever, &ts, "ts", "p").unwrap();
        assert_eq!(forever.len(), 3);
    }

    #[test]
    fn a_date_bound_rounds_up_to_whole_days() {
        let kept = retained(
            vec![t("a", Ord2::Int(98)), t("b", Ord2::Int(99))],
            &Ord2::Int(100),
            TombstoneRetention::Lateness(Duration::from_secs(3_600)),
            &DataType::Date32,
            "day",
            "",
        )
        .unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].ordering, OrderingValue::Date(99));
    }

    #[test]
    fn bounds_that_do_not_fit_the_field_name_it() {
        let err = retained(
            vec![t("a", Ord2::Int(1))],
            &Ord2::Int(5),
            TombstoneRetention::Lateness(Duration::from_secs(60)),
            &DataType::Int64,
            "ts",
            "",
        )
        .unwrap_err();
        assert!(err.to_string().contains("`ts`") && err.to_string().contains("Int64"), "{err}");
    }

    #[test]
    fn decimal_bounds_are_in_value_units() {
        let scale = 10i128.pow(15);
        let kept = retained(
            vec![t("a", Ord2::Decimal(Box::new(7 * scale))), t("b", Ord2::Decimal(Box::new(8 * scale)))],
            &Ord2::Decimal(Box::new(10 * scale)),
            TombstoneRetention::Amount(2.5),
            &DataType::Decimal128(10, 2),
            "price",
            "",
        )
        .unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].ordering, OrderingValue::Decimal(8 * scale));
    }
}
