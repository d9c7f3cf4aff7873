//! What the writers of a history send, and the model of what a table holds
//! after any set of their batches committed.
//!
//! The table has two kinds of keys:
//!
//! - `k…` keys take whole rows and deletes from [`Role::Whole`] writers,
//!   ordered by `ts`;
//! - `p…` keys take partial rows from [`Role::GroupA`] writers (columns
//!   `a1`, ordered by `ts_a`) and [`Role::GroupB`] writers (`b1`, ordered
//!   by `ts_b`), the two sequence groups of the table.
//!
//! Every ordering value in a history is distinct and the batches carry them
//! out of order, so the model has one answer whatever order the batches
//! commit in: per key, the event with the largest ordering value wins (per
//! group for `p…` keys), and a `k…` key whose winner is a delete has no row.
//! Deletes stay on `k…` keys: a delete removes a whole row, and a row that
//! partial writers build up depends, under Tributary's rules as under
//! Hudi's, on the order its versions were written (`docs/design.md`,
//! "Partial-column writers and sequence groups").

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, RngCore};

/// The table's Avro schema.
pub const SCHEMA: &str = r#"{"type":"record","name":"sim","fields":[
 {"name":"id","type":"string"},
 {"name":"region","type":"string"},
 {"name":"ts","type":["null","long"],"default":null},
 {"name":"v","type":["null","long"],"default":null},
 {"name":"a1","type":["null","string"],"default":null},
 {"name":"ts_a","type":["null","long"],"default":null},
 {"name":"b1","type":["null","long"],"default":null},
 {"name":"ts_b","type":["null","long"],"default":null}]}"#;

/// The regions (partitions), chosen by key number.
const REGIONS: [&str; 3] = ["eu", "us", "apac"];

/// What a writer writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Whole rows and deletes of `k…` keys.
    Whole,
    /// Group `ts_a` (`a1`) of `p…` keys.
    GroupA,
    /// Group `ts_b` (`b1`) of `p…` keys.
    GroupB,
    /// Group `ts_c` (`c1`) of `p…` keys: a source that arrives later. The
    /// table is made without its columns; its writer adds them and the
    /// group (`tributary alter`) before it writes, while the others write.
    GroupC,
}

impl Role {
    /// The columns a writer of this role declares; `None` for all.
    pub fn columns(self) -> Option<Vec<String>> {
        match self {
            Role::Whole => None,
            Role::GroupA => Some(vec!["a1".into(), "ts_a".into()]),
            Role::GroupB => Some(vec!["b1".into(), "ts_b".into()]),
            Role::GroupC => Some(vec!["c1".into(), "ts_c".into()]),
        }
    }
}

/// One event: a key, its ordering value, a value, and whether it deletes.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    /// Key number.
    pub key: u32,
    /// Ordering value (`ts`, `ts_a` or `ts_b` by role); distinct in a history.
    pub order: i64,
    /// The value written (`v`, `a1` as text, or `b1`).
    pub value: i64,
    /// A delete (whole-row writers only).
    pub delete: bool,
}

/// One writer's input: its role and batches, sent in order, one commit each.
#[derive(Debug, Clone)]
pub struct WriterInput {
    /// The writer id.
    pub id: String,
    /// What it writes.
    pub role: Role,
    /// Its batches.
    pub batches: Vec<Vec<Event>>,
}

/// A history's input.
#[derive(Debug, Clone)]
pub struct Workload {
    /// One per writer.
    pub writers: Vec<WriterInput>,
}

/// A batch of one writer: writer number and batch number.
pub type BatchId = (usize, usize);

/// Key text of key number `key` written by `role`.
pub fn key_text(role: Role, key: u32) -> String {
    match role {
        Role::Whole => format!("k{key:03}"),
        Role::GroupA | Role::GroupB | Role::GroupC => format!("p{key:03}"),
    }
}

/// The region (partition) of key number `key`.
pub fn region(key: u32) -> &'static str {
    REGIONS[key as usize % REGIONS.len()]
}

impl Workload {
    /// `writers` writers (the first whole-row, the others drawn), about
    /// `records` events in all over `keys` keys of each kind, cut into
    /// batches of 1 to 40 events.
    pub fn draw(rng: &mut StdRng, writers: usize, records: usize, keys: u32) -> Self {
        let roles: Vec<Role> = (0..writers)
            .map(|w| match (w, rng.random_range(0..5)) {
                (0, _) | (_, 0 | 1) => Role::Whole,
                (_, 2) => Role::GroupA,
                (_, 3) => Role::GroupB,
                _ => Role::GroupC,
            })
            .collect();
        // Distinct ordering values, handed out in a shuffled order.
        let mut orders: Vec<i64> = (0..records as i64).map(|i| 1_000 + 3 * i).collect();
        orders.shuffle(rng);
        let mut inputs: Vec<WriterInput> = roles
            .iter()
            .enumerate()
            .map(|(w, &role)| WriterInput { id: format!("w{w}"), role, batches: Vec::new() })
            .collect();
        let mut orders = orders.into_iter();
        let mut left = records;
        while left > 0 {
            let w = rng.random_range(0..writers);
            let n = rng.random_range(1..=40).min(left);
            left -= n;
            let role = inputs[w].role;
            let batch = (0..n)
                .filter_map(|_| orders.next())
                .map(|order| Event {
                    key: rng.random_range(0..keys),
                    order,
                    value: i64::from(rng.next_u32() % 1_000_000),
                    delete: role == Role::Whole && rng.random_bool(0.2),
                })
                .collect();
            inputs[w].batches.push(batch);
        }
        Self { writers: inputs }
    }

    /// The events of batch `id`.
    pub fn batch(&self, id: BatchId) -> &[Event] {
        &self.writers[id.0].batches[id.1]
    }

    /// Every batch.
    pub fn all_batches(&self) -> BTreeSet<BatchId> {
        self.writers.iter().enumerate().flat_map(|(w, input)| (0..input.batches.len()).map(move |b| (w, b))).collect()
    }

    /// The rows a table holds once exactly `batches` committed.
    pub fn model(&self, batches: impl IntoIterator<Item = BatchId>) -> Rows {
        merge(batches.into_iter().map(|id| (self.writers[id.0].role, self.batch(id))))
    }

    /// An Arrow batch of batch `id`, as its writer sends it.
    pub fn arrow(&self, id: BatchId) -> RecordBatch {
        let role = self.writers[id.0].role;
        let events = self.batch(id);
        let ids: StringArray = events.iter().map(|e| Some(key_text(role, e.key))).collect();
        let regions: StringArray = events.iter().map(|e| Some(region(e.key))).collect();
        let orders = Int64Array::from_iter_values(events.iter().map(|e| e.order));
        let values = Int64Array::from_iter_values(events.iter().map(|e| e.value));
        let mut fields = vec![Field::new("id", DataType::Utf8, false), Field::new("region", DataType::Utf8, false)];
        let mut columns: Vec<ArrayRef> = vec![Arc::new(ids), Arc::new(regions)];
        match role {
            Role::Whole => {
                fields.push(Field::new("ts", DataType::Int64, true));
                fields.push(Field::new("v", DataType::Int64, true));
                fields.push(Field::new("_hoodie_is_deleted", DataType::Boolean, true));
                columns.push(Arc::new(orders));
                columns.push(Arc::new(values));
                columns.push(Arc::new(events.iter().map(|e| Some(e.delete)).collect::<BooleanArray>()));
            }
            Role::GroupA => {
                fields.push(Field::new("a1", DataType::Utf8, true));
                fields.push(Field::new("ts_a", DataType::Int64, true));
                columns.push(Arc::new(events.iter().map(|e| Some(format!("a{}", e.value))).collect::<StringArray>()));
                columns.push(Arc::new(orders));
            }
            Role::GroupB => {
                fields.push(Field::new("b1", DataType::Int64, true));
                fields.push(Field::new("ts_b", DataType::Int64, true));
                columns.push(Arc::new(values));
                columns.push(Arc::new(orders));
            }
            Role::GroupC => {
                fields.push(Field::new("c1", DataType::Int64, true));
                fields.push(Field::new("ts_c", DataType::Int64, true));
                columns.push(Arc::new(values));
                columns.push(Arc::new(orders));
            }
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("the workload's batches are well-formed")
    }
}

/// A row as the model and the checks see it: every column but the key.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Row {
    /// `region`.
    pub region: String,
    /// `ts`.
    pub ts: Option<i64>,
    /// `v`.
    pub v: Option<i64>,
    /// `a1`.
    pub a1: Option<String>,
    /// `ts_a`.
    pub ts_a: Option<i64>,
    /// `b1`.
    pub b1: Option<i64>,
    /// `ts_b`.
    pub ts_b: Option<i64>,
    /// `c1`, once a group-C writer added it.
    pub c1: Option<i64>,
    /// `ts_c`.
    pub ts_c: Option<i64>,
}

/// Rows by record key.
pub type Rows = BTreeMap<String, Row>;

/// Merges events of whole batches by the model's rule (see the module).
pub fn merge<'a>(batches: impl IntoIterator<Item = (Role, &'a [Event])>) -> Rows {
    // Per key number and role (the role decides the key's text and group),
    // the winning event.
    let mut winners: BTreeMap<(u32, u8), (Role, Event)> = BTreeMap::new();
    for (role, events) in batches {
        for e in events {
            let slot = winners.entry((e.key, role as u8)).or_insert((role, *e));
            if e.order > slot.1.order {
                *slot = (role, *e);
            }
        }
    }
    let mut rows = Rows::new();
    for (role, e) in winners.into_values() {
        if e.delete {
            continue;
        }
        let row = rows
            .entry(key_text(role, e.key))
            .or_insert_with(|| Row { region: region(e.key).to_string(), ..Row::default() });
        match role {
            Role::Whole => (row.ts, row.v) = (Some(e.order), Some(e.value)),
            Role::GroupA => (row.a1, row.ts_a) = (Some(format!("a{}", e.value)), Some(e.order)),
            Role::GroupB => (row.b1, row.ts_b) = (Some(e.value), Some(e.order)),
            Role::GroupC => (row.c1, row.ts_c) = (Some(e.value), Some(e.order)),
        }
    }
    rows
}

/// The rows of an Arrow batch a read returned (columns by name).
pub fn rows_of(batch: &RecordBatch) -> Result<Rows, String> {
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;
    let col = |name: &str| batch.column_by_name(name).ok_or_else(|| format!("the read has no column `{name}`"));
    let text = |name: &str| -> Result<Vec<Option<String>>, String> {
        let c = arrow::compute::cast(col(name)?, &DataType::Utf8).map_err(|e| e.to_string())?;
        Ok(c.as_string::<i32>().iter().map(|v| v.map(str::to_string)).collect())
    };
    let long = |name: &str| -> Result<Vec<Option<i64>>, String> {
        let c = arrow::compute::cast(col(name)?, &DataType::Int64).map_err(|e| e.to_string())?;
        Ok(c.as_primitive::<Int64Type>().iter().collect())
    };
    let (ids, regions, a1) = (text("id")?, text("region")?, text("a1")?);
    let (ts, v, ts_a, b1, ts_b) = (long("ts")?, long("v")?, long("ts_a")?, long("b1")?, long("ts_b")?);
    // Group C's columns exist once its writer added them.
    let added = |name: &str| match batch.column_by_name(name) {
        Some(_) => long(name),
        None => Ok(vec![None; batch.num_rows()]),
    };
    let (c1, ts_c) = (added("c1")?, added("ts_c")?);
    let mut rows = Rows::new();
    for i in 0..batch.num_rows() {
        let key = ids[i].clone().ok_or("a row without a key")?;
        let row = Row {
            region: regions[i].clone().unwrap_or_default(),
            ts: ts[i],
            v: v[i],
            a1: a1[i].clone(),
            ts_a: ts_a[i],
            b1: b1[i],
            ts_b: ts_b[i],
            c1: c1[i],
            ts_c: ts_c[i],
        };
        if rows.insert(key.clone(), row).is_some() {
            return Err(format!("key `{key}` is in the read twice"));
        }
    }
    Ok(rows)
}

/// The differences between `got` and `want`, at most a few, for a message.
pub fn diff(got: &Rows, want: &Rows) -> String {
    let mut out = Vec::new();
    for (k, w) in want {
        match got.get(k) {
            None => out.push(format!("missing {k}: {w:?}")),
            Some(g) if g != w => out.push(format!("{k}: got {g:?}, want {w:?}")),
            _ => {}
        }
    }
    for (k, g) in got {
        if !want.contains_key(k) {
            out.push(format!("unexpected {k}: {g:?}"));
        }
    }
    let n = out.len();
    out.truncate(4);
    format!("{n} rows differ: {}", out.join("; "))
}
