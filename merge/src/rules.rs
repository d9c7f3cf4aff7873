//! Which rule merges a slice's versions: the row rule ([`crate::rows`]) for
//! whole rows, the column rule ([`crate::columns`]) when any version is
//! partial or the table has sequence groups; and whether this build knows
//! the table's merger at all.
//!
//! Per record key, versions are taken in write order (base rows, then each
//! log's data and delete blocks in log order):
//! - event-time ordering: the larger ordering value wins; on a tie the later
//!   write wins (log over base, later log over earlier);
//! - commit-time ordering: the later write wins;
//! - a delete wins like a version with its ordering value, and a delete
//!   without one ([`crate::ordering::is_unconditional`]) always wins.

use arrow::array::RecordBatch;
use tributary_format::{RECORD_KEY, TableSchema};
use tributary_timeline::SEQUENCE_GROUPS_STRATEGY_ID;
use tributary_timeline::{MergeMode, TableConfig};

use crate::error::{Error, Result};
use crate::rows::RowMerger;
use crate::tombstone::Tombstone;
use crate::version::Version;

/// Merges the versions of one slice under the table's rules; returns the
/// surviving rows (schema `schema.arrow_with_meta()`), or `None` when nothing
/// survives. Refuses custom mergers it does not know rather than misread.
pub fn merge(schema: &TableSchema, config: &TableConfig, versions: &[Version]) -> Result<Option<RecordBatch>> {
    let partial = versions.iter().any(|v| matches!(v, Version::Partial { .. }));
    merge_as(schema, config, versions, partial, false)
}

/// [`merge`] of part of a slice's keys, where `partial` says whether the
/// whole slice holds partial versions, so every part merges the same way;
/// with `by_key` the rows come sorted by record key.
pub(crate) fn merge_as(
    schema: &TableSchema,
    config: &TableConfig,
    versions: &[Version],
    partial: bool,
    by_key: bool,
) -> Result<Option<RecordBatch>> {
    Ok(merge_parts(schema, config, versions, partial, by_key)?.0)
}

/// [`merge_as`], with the tombstones of the keys a delete won when the rows
/// come by key (a compaction's merge; readers need none).
pub(crate) fn merge_parts(
    schema: &TableSchema,
    config: &TableConfig,
    versions: &[Version],
    partial: bool,
    by_key: bool,
) -> Result<(Option<RecordBatch>, Vec<Tombstone>)> {
    check_merger(config)?;
    if partial || !config.sequence_groups.is_empty() {
        let (merged, tombstones) = crate::columns::merge_columns(schema, config, versions, by_key)?;
        let merged = match merged {
            Some(b) if by_key => Some(sort_by_key(std::slice::from_ref(&b))?),
            other => other,
        };
        Ok((merged, tombstones))
    } else {
        let mut merger = RowMerger::new(schema, config.merge_mode);
        for v in versions {
            merger.push(v)?;
        }
        let tombstones = if by_key { merger.tombstones() } else { Vec::new() };
        Ok((merger.finish(by_key)?, tombstones))
    }
}

/// The rows of `batches` (one schema, at least one batch) in one batch,
/// sorted by record key. Only the key columns are put together to sort;
/// each row is copied once, into its place.
pub(crate) fn sort_by_key(batches: &[RecordBatch]) -> Result<RecordBatch> {
    let fail = |e: arrow::error::ArrowError| Error::arrow("sort by record key", e);
    if let [batch] = batches {
        let idx = arrow::compute::sort_to_indices(batch.column(RECORD_KEY), None, None).map_err(fail)?;
        return arrow::compute::take_record_batch(batch, &idx).map_err(fail);
    }
    let keys: Vec<&dyn arrow::array::Array> = batches.iter().map(|b| b.column(RECORD_KEY).as_ref()).collect();
    let keys = arrow::compute::concat(&keys).map_err(fail)?;
    let order = arrow::compute::sort_to_indices(&keys, None, None).map_err(fail)?;
    // Where each batch's rows start among the keys.
    let starts: Vec<usize> = batches
        .iter()
        .scan(0, |at, b| {
            let start = *at;
            *at += b.num_rows();
            Some(start)
        })
        .collect();
    let places: Vec<(usize, usize)> = order
        .values()
        .iter()
        .map(|&i| {
            let i = i as usize;
            let b = starts.partition_point(|&s| s <= i) - 1;
            (b, i - starts[b])
        })
        .collect();
    let refs: Vec<&RecordBatch> = batches.iter().collect();
    arrow::compute::interleave_record_batch(&refs, &places).map_err(fail)
}

/// Whether this build can merge the table's records.
pub fn check_merger(config: &TableConfig) -> Result<()> {
    // Version 9 records merge behaviour beyond the mode in these keys
    // (`docs/interop.md`, "Table version 9"): a partial-update mode (take
    // the previous value where a record holds the default or the
    // "unavailable" marker) and merge properties (a delete field and
    // marker). Merging without them would be wrong, with no error.
    let unsupported = config.other.iter().find(|(k, v)| {
        (k.as_str() == PARTIAL_UPDATE_MODE && !v.trim().is_empty()) || k.starts_with(MERGE_PROPERTY_PREFIX)
    });
    if let Some((key, value)) = unsupported {
        return Err(Error::Invalid {
            what: format!("table {}", config.name),
            reason: format!(
                "`{key}={value}` asks for merging Tributary does not do (partial updates of defaults or unavailable \
                 values, or a delete marker field); refusing to guess how records merge"
            ),
        });
    }
    if config.merge_mode == MergeMode::Custom && config.merge_strategy_id != SEQUENCE_GROUPS_STRATEGY_ID {
        return Err(Error::Invalid {
            what: format!("table {}", config.name),
            reason: format!(
                "merge mode CUSTOM with strategy {} is not supported; refusing to guess how records merge",
                config.merge_strategy_id
            ),
        });
    }
    Ok(())
}

/// `hoodie.table.partial.update.mode` (table version 9).
const PARTIAL_UPDATE_MODE: &str = "hoodie.table.partial.update.mode";
/// The prefix of `hoodie.record.merge.property.*` (table version 9).
const MERGE_PROPERTY_PREFIX: &str = "hoodie.record.merge.property.";

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::test_util::{case, write};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Rows in several batches sort as they would in one.
        #[test]
        fn batches_sort_by_key_as_one_batch(writes in proptest::collection::vec(write(), 1..6)) {
            let whole: Vec<_> = writes.into_iter().map(|w| crate::test_util::Write { kind: 0, ..w }).collect();
            let c = case(&whole, false);
            let batches: Vec<RecordBatch> = c
                .versions
                .iter()
                .filter_map(|v| match v {
                    Version::Rows(b) => Some(b.clone()),
                    _ => None,
                })
                .collect();
            prop_assume!(!batches.is_empty());
            let one = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
            let sorted = sort_by_key(&batches).unwrap();
            let expected = sort_by_key(std::slice::from_ref(&one)).unwrap();
            prop_assert_eq!(sorted.num_rows(), one.num_rows());
            // Keys may repeat across batches, so compare the keys' order and
            // the multiset of whole rows.
            prop_assert_eq!(sorted.column(RECORD_KEY), expected.column(RECORD_KEY));
            let rows = |b: &RecordBatch| {
                let mut r: Vec<String> = (0..b.num_rows())
                    .map(|i| {
                        b.columns()
                            .iter()
                            .map(|c| arrow::util::display::array_value_to_string(c, i).unwrap())
                            .collect::<Vec<_>>()
                            .join("|")
                    })
                    .collect();
                r.sort();
                r
            };
            prop_assert_eq!(rows(&sorted), rows(&one));
        }
    }

    /// A version-9 table asking for partial updates or a delete marker is
    /// refused, naming the key, rather than merged wrong.
    #[test]
    fn partial_update_modes_and_merge_properties_are_refused() {
        let mut config =
            TableConfig::new_table(&tributary_timeline::NewTableConfig::new("t", "id", "ts", crate::test_util::SCHEMA));
        assert!(check_merger(&config).is_ok());
        for (k, v) in [
            (PARTIAL_UPDATE_MODE, "IGNORE_DEFAULTS"),
            ("hoodie.record.merge.property.hoodie.payload.delete.field", "Op"),
        ] {
            let mut c = config.clone();
            c.other.insert(k.into(), v.into());
            let err = check_merger(&c).unwrap_err().to_string();
            assert!(err.contains(k) && err.contains(v), "{err}");
        }
        config.other.insert(PARTIAL_UPDATE_MODE.into(), String::new());
        assert!(check_merger(&config).is_ok(), "an empty mode is none");
    }
}
