//! Deletes stay deleted across compaction: a compaction keeps a deleted
//! key's tombstone in the new file slice, every reader applies it, and the
//! table's retention bounds how long it lives. On the store
//! `TRIBUTARY_TEST_STORE` names (see [`Place`]).

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use tributary::{CreateOptions, Query, ReadOptions, Table, TombstoneRetention};
use tributary_compaction::CompactorSettings;
use tributary_writer::WriteSettings;

use crate::support::{
    FARES_SCHEMA, Place, batch_with_deletes, fares_options, have_official_reader, hybrid, official_rows_of,
};

/// A fares table `t` in `place` with `retention`.
async fn fares(place: &Place, retention: TombstoneRetention) -> Table {
    let mut o = fares_options();
    o.tombstone_retention = retention;
    place.table("t").builder().with_settings(hybrid()).create(o).await.unwrap()
}

/// Writes `batch` in one commit.
async fn commit(t: &Table, batch: &RecordBatch) {
    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let mut c = client.start_commit().await.unwrap();
    c.write_batch(batch).await.unwrap();
    c.commit().await.unwrap();
}

/// Runs one compaction round; returns the tombstones it kept.
async fn compact(t: &Table) -> u64 {
    let done = t.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
    assert!(!done.is_empty(), "a compaction ran");
    done.iter().map(|s| s.tombstones).sum()
}

/// The keys `query` returns, in order, from Tributary's reader.
async fn our_keys(t: &Table, query: Query) -> Vec<String> {
    let b = t.read(&ReadOptions { query, with_meta: true, ..Default::default() }).await.unwrap();
    let keys = b.column_by_name("_hoodie_record_key").unwrap().as_string::<i32>();
    keys.iter().map(|k| k.unwrap().to_string()).collect()
}

/// The keys the official reader returns (snapshot, or read-optimized), sorted.
fn official_keys(t: &Table, read_optimized: bool) -> Vec<String> {
    let mut keys: Vec<String> = official_rows_of(t, read_optimized)
        .iter()
        .map(|r| r["_hoodie_record_key"].as_str().unwrap().to_string())
        .collect();
    keys.sort();
    keys
}

/// Both readers' snapshot keys equal `want`, and no read-optimized row is
/// one of `gone`.
async fn assert_keys(t: &Table, want: &[&str], gone: &[&str], what: &str) {
    assert_eq!(our_keys(t, Query::Snapshot).await, want, "{what}: Tributary snapshot");
    let ro = our_keys(t, Query::ReadOptimized).await;
    assert!(gone.iter().all(|g| !ro.iter().any(|k| k == g)), "{what}: read-optimized shows a deleted row: {ro:?}");
    if have_official_reader() {
        assert_eq!(official_keys(t, false), want, "{what}: official reader snapshot");
        let ro = official_keys(t, true);
        assert!(gone.iter().all(|g| !ro.iter().any(|k| k == g)), "{what}: official read-optimized: {ro:?}");
    }
}

/// The issue's history: a delete is compacted away, then an older update of
/// the same key commits. The row stays deleted in every reader and after
/// any number of further compactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_update_after_the_compaction_of_its_delete_stays_deleted() {
    let Some(place) = Place::new() else { return };
    let t = fares(&place, TombstoneRetention::Forever).await;
    commit(&t, &batch_with_deletes(&[("a", 10, 1.0), ("b", 10, 1.0), ("c", 10, 1.0)], &|_| false)).await;
    commit(&t, &batch_with_deletes(&[("a", 20, 0.0), ("c", 20, 0.0)], &|_| true)).await;
    assert_eq!(compact(&t).await, 2, "two tombstones kept");
    assert_keys(&t, &["b"], &["a", "c"], "after the compaction").await;

    // Older than the deletes (15 < 20): must not bring the rows back; a
    // newer update (25) of `c` re-creates it.
    commit(&t, &batch_with_deletes(&[("a", 15, 9.0), ("c", 25, 2.0)], &|_| false)).await;
    assert_keys(&t, &["b", "c"], &["a"], "late events on the compacted slice").await;
    assert_eq!(compact(&t).await, 1, "the tombstone of `a` lives on; `c` lives again");
    assert_keys(&t, &["b", "c"], &["a"], "after the second compaction").await;
    commit(&t, &batch_with_deletes(&[("a", 19, 9.0)], &|_| false)).await;
    assert_keys(&t, &["b", "c"], &["a"], "a late event after two compactions").await;
}

/// A slice whose only log is its own tombstone log is not compacted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tombstone_log_alone_does_not_trigger_a_compaction() {
    let Some(place) = Place::new() else { return };
    let t = fares(&place, TombstoneRetention::Forever).await;
    commit(&t, &batch_with_deletes(&[("a", 10, 1.0), ("b", 10, 1.0)], &|k| k == "a")).await;
    commit(&t, &batch_with_deletes(&[("b", 20, 1.0)], &|_| true)).await;
    compact(&t).await;
    let again = t.compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
    assert!(again.is_empty(), "nothing new to compact: {again:?}");
}

/// Retention: past the bound (measured from the newest ordering value of
/// the file group) a tombstone is dropped and a later, older event may bring
/// the row back; within the bound it stays deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_drops_tombstones_past_the_bound_and_keeps_the_rest() {
    let Some(place) = Place::new() else { return };
    // One bucket, so every key shares one file group and its newest value.
    let mut o = CreateOptions::new(FARES_SCHEMA, "uuid", "ts");
    o.buckets = 1;
    o.tombstone_retention = TombstoneRetention::Amount(100.0);
    let t = place.table("t").builder().with_settings(hybrid()).create(o).await.unwrap();
    commit(&t, &batch_with_deletes(&[("old", 900, 1.0), ("new", 900, 1.0), ("x", 900, 1.0)], &|_| false)).await;
    commit(&t, &batch_with_deletes(&[("old", 1000, 0.0)], &|_| true)).await;
    assert_eq!(compact(&t).await, 1, "newest is 1000: the tombstone at 1000 is within the bound");
    // The group's newest value moves to 1200; `new` is deleted at 1150.
    commit(&t, &batch_with_deletes(&[("x", 1200, 1.0), ("new", 1150, 0.0)], &|k| k == "new")).await;
    assert_eq!(compact(&t).await, 1, "1000 < 1200 - 100: dropped; 1150 kept");
    // Both late events are older than their deletes.
    commit(&t, &batch_with_deletes(&[("old", 950, 5.0), ("new", 1120, 5.0)], &|_| false)).await;
    assert_keys(&t, &["old", "x"], &["new"], "past the bound the row comes back; within it, not").await;
}

/// `init` refuses a retention its ordering field cannot measure.
#[tokio::test]
async fn a_retention_that_does_not_fit_the_ordering_field_is_refused() {
    let Some(place) = Place::new() else { return };
    let mut o = CreateOptions::new(FARES_SCHEMA, "uuid", "ts");
    o.tombstone_retention = TombstoneRetention::parse("7d").unwrap();
    let err = place.table("t").builder().create(o).await.unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("--tombstone-retention") && msg.contains("`ts`") && msg.contains("7d"), "{msg}");
    assert_eq!(err.kind(), tributary_format::ErrorKind::InvalidInput);
    assert!(place.table("t").list("").is_empty(), "nothing was written");
}

/// One ordering field type: its Avro type, and the Arrow type to cast test
/// values (given as integers) to.
struct Kind {
    avro: &'static str,
    arrow: DataType,
}

fn kinds() -> Vec<Kind> {
    let ts = |unit, logical| Kind { avro: logical, arrow: DataType::Timestamp(unit, Some("+00:00".into())) };
    vec![
        Kind { avro: r#""int""#, arrow: DataType::Int32 },
        Kind { avro: r#""long""#, arrow: DataType::Int64 },
        Kind { avro: r#""float""#, arrow: DataType::Float32 },
        Kind { avro: r#""double""#, arrow: DataType::Float64 },
        Kind { avro: r#""string""#, arrow: DataType::Utf8 },
        Kind { avro: r#"{"type":"int","logicalType":"date"}"#, arrow: DataType::Date32 },
        ts(arrow::datatypes::TimeUnit::Millisecond, r#"{"type":"long","logicalType":"timestamp-millis"}"#),
        ts(arrow::datatypes::TimeUnit::Microsecond, r#"{"type":"long","logicalType":"timestamp-micros"}"#),
        Kind {
            avro: r#"{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}"#,
            arrow: DataType::Decimal128(12, 2),
        },
    ]
}

/// Rows `(key, ordering value, deleted)` with the ordering value cast to `ty`.
fn typed_batch(ty: &DataType, rows: &[(&str, i64, bool)]) -> RecordBatch {
    let ord: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1)));
    let ord = match ty {
        DataType::Date32 => arrow::compute::cast(&arrow::compute::cast(&ord, &DataType::Int32).unwrap(), ty),
        _ => arrow::compute::cast(&ord, ty),
    }
    .unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("ord", ty.clone(), false),
        Field::new("_hoodie_is_deleted", DataType::Boolean, false),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            ord,
            Arc::new(BooleanArray::from_iter(rows.iter().map(|r| Some(r.2)))),
        ],
    )
    .unwrap()
}

/// On every ordering type a delete beats older versions and loses to newer
/// ones, whichever arrives first, in both readers, before and after
/// compaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_order_like_updates_on_every_ordering_type() {
    for kind in kinds() {
        let Some(place) = Place::new() else { return };
        let schema = format!(
            r#"{{"type":"record","name":"r","fields":[{{"name":"id","type":"string"}},{{"name":"ord","type":{}}}]}}"#,
            kind.avro
        );
        let mut o = CreateOptions::new(schema, "id", "ord");
        o.buckets = 2;
        let t = place.table("t").builder().with_settings(hybrid()).create(o).await.unwrap();
        let what = |stage: &str| format!("{} ({stage})", kind.avro);
        // a: update 5, then delete 7 (delete wins); b: update 5, delete 3
        // (update wins); c: delete 7, then update 5 (stays deleted); d:
        // delete 3, then update 5 (comes back).
        commit(&t, &typed_batch(&kind.arrow, &[("a", 5, false), ("b", 5, false), ("c", 7, true), ("d", 3, true)]))
            .await;
        commit(&t, &typed_batch(&kind.arrow, &[("a", 7, true), ("b", 3, true), ("c", 5, false), ("d", 5, false)]))
            .await;
        assert_keys(&t, &["b", "d"], &["a", "c"], &what("logs only")).await;
        compact(&t).await;
        assert_keys(&t, &["b", "d"], &["a", "c"], &what("compacted")).await;
        // After the compaction: older updates of the deleted keys stay out,
        // a newer one re-creates its row.
        commit(&t, &typed_batch(&kind.arrow, &[("a", 6, false), ("c", 8, false)])).await;
        assert_keys(&t, &["b", "c", "d"], &["a"], &what("late events after compaction")).await;
    }
}
