//! Shared test fixtures of the merge crate.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use proptest::prelude::*;
use tributary_format::SequenceGroup;
use tributary_format::TableSchema;
use tributary_format::{DeleteRecord, OrderingValue};
use tributary_timeline::{NewTableConfig, TableConfig};

use crate::rules::merge;
use crate::version::Version;

pub(crate) const SCHEMA: &str = r#"{"type":"record","name":"r","fields":[
    {"name":"id","type":"string"},{"name":"ts","type":"long"},
    {"name":"a","type":["null","string"],"default":null},{"name":"b","type":["null","long"],"default":null}]}"#;

/// One generated write: kind 0 whole rows, 1 partial rows, 2 deletes.
#[derive(Debug, Clone)]
pub(crate) struct Write {
    pub(crate) kind: u8,
    /// Partial writes: whether `a` and `b` are written.
    pub(crate) present: (bool, bool),
    pub(crate) rows: Vec<(u8, i64, Option<u8>, Option<i64>)>,
}

pub(crate) fn write() -> impl Strategy<Value = Write> {
    (
        0u8..3,
        any::<(bool, bool)>(),
        prop::collection::vec((0u8..40, 0i64..6, any::<Option<u8>>(), any::<Option<i64>>()), 0..30),
    )
        .prop_map(|(kind, present, rows)| Write { kind, present, rows })
}

/// Record key `id`: short ones, and long ones that share their first 16
/// bytes, so that the merge index holds keys both ways and sorts past
/// equal prefixes.
pub(crate) fn key_of(id: u8) -> String {
    if id.is_multiple_of(2) { format!("{}{id:03}", "p".repeat(14)) } else { format!("key{id:03}") }
}

pub(crate) fn version(schema: &TableSchema, w: &Write, n: usize) -> Version {
    let keys: Vec<String> = w.rows.iter().map(|r| key_of(r.0)).collect();
    if w.kind == 2 {
        return Version::Deletes(
            w.rows
                .iter()
                .zip(&keys)
                .map(|(r, k)| DeleteRecord {
                    key: k.clone(),
                    partition: String::new(),
                    ordering: OrderingValue::Long(r.1),
                })
                .collect(),
        );
    }
    let partial = w.kind == 1;
    let len = w.rows.len();
    let text = |v: String| -> ArrayRef { Arc::new(StringArray::from(vec![v; len])) };
    let seqno: ArrayRef = Arc::new(StringArray::from_iter_values((0..len).map(|i| format!("{n}_{i}"))));
    let a: ArrayRef = Arc::new(StringArray::from_iter(
        w.rows.iter().map(|r| if partial && !w.present.0 { None } else { r.2.map(|x| format!("a{x}")) }),
    ));
    let b: ArrayRef =
        Arc::new(Int64Array::from_iter(w.rows.iter().map(|r| if partial && !w.present.1 { None } else { r.3 })));
    let columns = vec![
        text(format!("c{n}")),
        seqno,
        Arc::new(StringArray::from(keys.clone())) as ArrayRef,
        text(String::new()),
        text("f".into()),
        Arc::new(StringArray::from(keys)) as ArrayRef,
        Arc::new(Int64Array::from_iter_values(w.rows.iter().map(|r| r.1))) as ArrayRef,
        a,
        b,
    ];
    let target = schema.arrow_with_meta();
    if partial {
        let nullable = arrow::datatypes::Schema::new(
            target.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect::<Vec<_>>(),
        );
        let batch = RecordBatch::try_new(Arc::new(nullable), columns).unwrap();
        let present = [true, true, true, true, true, true, true, w.present.0, w.present.1];
        Version::Partial { batch, present: present.into() }
    } else {
        Version::Rows(RecordBatch::try_new(target.clone(), columns).unwrap())
    }
}

/// The table, its versions, and their whole merge sorted by key.
pub(crate) struct Case {
    pub(crate) schema: TableSchema,
    pub(crate) config: TableConfig,
    pub(crate) versions: Vec<Version>,
    pub(crate) want: Option<Vec<ArrayRef>>,
}

/// `writes` as a slice of a table with, when `grouped`, a sequence group
/// (`a` follows the largest `b`).
pub(crate) fn case(writes: &[Write], grouped: bool) -> Case {
    let schema = TableSchema::new(SCHEMA, &["id"], Some("ts"), None).unwrap();
    let mut new = NewTableConfig::new("t", "id", "ts", SCHEMA);
    if grouped {
        new.sequence_groups = vec![SequenceGroup { ordering: "b".into(), columns: vec!["a".into()] }];
    }
    let config = TableConfig::new_table(&new);
    let versions: Vec<Version> = writes.iter().enumerate().map(|(n, w)| version(&schema, w, n)).collect();
    let want = merge(&schema, &config, &versions).unwrap().map(sorted);
    Case { schema, config, versions, want }
}

pub(crate) fn sorted(b: RecordBatch) -> Vec<ArrayRef> {
    crate::rules::sort_by_key(std::slice::from_ref(&b)).unwrap().columns().to_vec()
}
