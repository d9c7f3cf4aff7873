//! The table's Avro schema, its meta-field-prefixed log schema, and the
//! matching Arrow schemas.

use std::io::Cursor;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::key::RecordKey;
use crate::memo::Memo;

/// The five Hudi meta columns, in order.
pub const META_FIELDS: [&str; 5] = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
];
/// Index of `_hoodie_commit_time`.
pub const COMMIT_TIME: usize = 0;
/// Index of `_hoodie_commit_seqno`.
pub const COMMIT_SEQNO: usize = 1;
/// Index of `_hoodie_record_key`.
pub const RECORD_KEY: usize = 2;
/// Index of `_hoodie_partition_path`.
pub const PARTITION_PATH: usize = 3;
/// Index of `_hoodie_file_name`.
pub const FILE_NAME: usize = 4;
/// The column whose `true` marks a delete.
pub const IS_DELETED: &str = "_hoodie_is_deleted";

/// Columns whose values follow their own ordering field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceGroup {
    /// The group's ordering (event-time) field; it belongs to the group.
    pub ordering: String,
    /// The other columns of the group.
    pub columns: Vec<String>,
}

impl SequenceGroup {
    /// Parses `ts_a=a1,a2`.
    pub fn parse(text: &str) -> Option<Self> {
        let (ordering, cols) = text.split_once('=')?;
        let columns: Vec<String> = cols.split(',').map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect();
        let ordering = ordering.trim().to_string();
        (!ordering.is_empty() && !columns.is_empty()).then_some(Self { ordering, columns })
    }

    /// `ts_a=a1,a2`.
    pub fn render(&self) -> String {
        format!("{}={}", self.ordering, self.columns.join(","))
    }

    /// Parses a list `ts_a=a1,a2;ts_b=b1`, as `hoodie.properties` and
    /// commit metadata record it; `Err` names the group that does not
    /// parse.
    pub fn parse_list(text: &str) -> std::result::Result<Vec<Self>, String> {
        text.split(';')
            .filter(|g| !g.trim().is_empty())
            .map(|g| Self::parse(g).ok_or_else(|| format!("`{g}` is not `ordering=col,col`")))
            .collect()
    }

    /// The list form [`SequenceGroup::parse_list`] reads.
    pub fn render_list(groups: &[Self]) -> String {
        groups.iter().map(Self::render).collect::<Vec<_>>().join(";")
    }

    /// The ordering field of the first of `groups` that the record schema
    /// `json` lacks: readers refuse a table whose latest commit records
    /// such a pair. `None` when all are there (or `json` is no record).
    pub fn missing_ordering<'a>(groups: &'a [Self], json: &str) -> Option<&'a str> {
        let v: Value = serde_json::from_str(json).ok()?;
        let names: Vec<&str> = v["fields"].as_array()?.iter().filter_map(|f| f["name"].as_str()).collect();
        groups.iter().map(|g| g.ordering.as_str()).find(|o| !names.contains(o))
    }

    /// The groups of `ours` added to `in_force`: a group of either stands,
    /// and a group both hold has the columns of both (`ours`' new ones
    /// last). Groups only grow, by new columns, so the union keeps what
    /// any commit added. A column in two different groups is an error:
    /// the column, and why.
    pub fn union(in_force: &[Self], ours: &[Self]) -> std::result::Result<Vec<Self>, (String, String)> {
        let mut out = in_force.to_vec();
        for g in ours {
            match out.iter_mut().find(|o| o.ordering == g.ordering) {
                Some(o) => {
                    for c in &g.columns {
                        if !o.columns.contains(c) {
                            o.columns.push(c.clone());
                        }
                    }
                }
                None => out.push(g.clone()),
            }
        }
        let mut owner = std::collections::BTreeMap::new();
        for g in &out {
            for c in std::iter::once(&g.ordering).chain(&g.columns) {
                if let Some(other) = owner.insert(c.as_str(), g.ordering.as_str()) {
                    let why = format!("column `{c}` is in two sequence groups (`{other}` and `{}`)", g.ordering);
                    return Err((c.clone(), why));
                }
            }
        }
        Ok(out)
    }
}

/// A table's schema in the forms the writer and readers need.
#[derive(Debug, Clone)]
pub struct TableSchema {
    /// The whole table's schema JSON (differs from `table_json` for partial schemas).
    full_json: Arc<Value>,
    /// Set for a partial writer's column subset.
    partial: bool,
    table_json: Arc<Value>,
    log_json: String,
    arrow: SchemaRef,
    arrow_with_meta: SchemaRef,
    key: RecordKey,
    /// The ordering fields, in configured order (Hudi 1.1+ compares
    /// several element by element).
    ordering: Vec<usize>,
    partition: Option<usize>,
    /// Per column of `arrow_with_meta`, its Avro default as a one-row
    /// array, where the field declares a non-null one.
    defaults: Arc<[Option<ArrayRef>]>,
}

/// The non-null Avro defaults of `table_json`'s fields as one-row arrays
/// of their columns in `with_meta` (the meta fields come first and have
/// none). A default arrow's JSON reader cannot read as the column's type
/// (bytes, fixed) is left out: such rows read null.
fn defaults_of(table_json: &Value, with_meta: &SchemaRef) -> Arc<[Option<ArrayRef>]> {
    let fields = table_json.get("fields").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let mut out: Vec<Option<ArrayRef>> = vec![None; with_meta.fields().len()];
    for (i, f) in fields.iter().enumerate() {
        let Some(default) = f.get("default").filter(|d| !d.is_null()) else { continue };
        let Some(field) = with_meta.fields().get(i + META_FIELDS.len()) else { continue };
        let one = Schema::new(vec![Field::new("v", field.data_type().clone(), true)]);
        let row = json!({ "v": default }).to_string();
        let batch = arrow::json::ReaderBuilder::new(Arc::new(one))
            .build(Cursor::new(row.into_bytes()))
            .ok()
            .and_then(|mut r| r.next())
            .and_then(|b| b.ok());
        out[i + META_FIELDS.len()] = batch.filter(|b| b.num_rows() == 1).map(|b| b.column(0).clone());
    }
    out.into()
}

/// The Arrow schema arrow-avro decodes an Avro schema JSON to. Derived from
/// an empty in-memory object container file so it is exactly what the
/// decoder produces.
/// Kept once per process and schema text (`memo.rs`).
pub(crate) fn arrow_schema_of(avro_json: &str) -> Result<SchemaRef> {
    static MAPPED: Memo<std::result::Result<SchemaRef, String>> = Memo::new();
    let mapped = MAPPED.get_or(avro_json.as_bytes(), || {
        let ocf = ocf_header(avro_json, &[0u8; 16]);
        let reader = arrow_avro::reader::ReaderBuilder::new().build(Cursor::new(ocf)).map_err(|e| e.to_string())?;
        Ok(strip_metadata(&reader.schema()))
    });
    mapped.map_err(|e| Error::InvalidInput { what: "Avro schema".into(), reason: format!("cannot map to Arrow: {e}") })
}

/// The header of an Avro object container file holding records of
/// `avro_json`, with sync marker `sync`.
pub(crate) fn ocf_header(avro_json: &str, sync: &[u8; 16]) -> Vec<u8> {
    let mut ocf = Vec::with_capacity(avro_json.len() + 64);
    ocf.extend_from_slice(b"Obj\x01");
    put_long(&mut ocf, 1);
    put_bytes(&mut ocf, b"avro.schema");
    put_bytes(&mut ocf, avro_json.as_bytes());
    put_long(&mut ocf, 0);
    ocf.extend_from_slice(sync);
    ocf
}

/// The same schema without schema- or field-level metadata.
pub(crate) fn strip_metadata(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), f.data_type().clone(), f.is_nullable()))
            .collect::<Vec<_>>(),
    ))
}

/// Appends an Avro long (zigzag varint).
pub(crate) fn put_long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Appends Avro bytes/string (length, then the bytes).
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

/// The table's Avro schema JSON parsed (and checked to be a valid Avro
/// record schema), and the log blocks' schema text: the meta fields, then
/// the table's. Kept once per process and schema text (`memo.rs`): every
/// read and write of a table derives its schema from the same text.
fn parse_table_json(avro_json: &str) -> std::result::Result<(Arc<Value>, String), String> {
    static PARSED: Memo<std::result::Result<(Arc<Value>, String), String>> = Memo::new();
    PARSED.get_or(avro_json.as_bytes(), || {
        let table_json: Value = serde_json::from_str(avro_json).map_err(|e| format!("not JSON: {e}"))?;
        apache_avro::Schema::parse_str(avro_json).map_err(|e| format!("not a valid Avro schema: {e}"))?;
        let fields = table_json
            .get("fields")
            .and_then(Value::as_array)
            .ok_or("the top-level schema must be a record with fields")?;
        let mut log_json = table_json.clone();
        let mut all: Vec<Value> = META_FIELDS.iter().map(|n| meta_field(n)).collect();
        all.extend(fields.iter().cloned());
        log_json["fields"] = Value::Array(all);
        let log_json = log_json.to_string();
        Ok((Arc::new(table_json), log_json))
    })
}

fn meta_field(name: &str) -> Value {
    json!({"name": name, "type": ["null", "string"], "doc": "", "default": null})
}

impl TableSchema {
    /// Builds the schema forms from the table's Avro schema JSON (without
    /// meta fields). `key_fields` are the record key fields in declared
    /// order (one, or several for a composite key; none for a table Hudi
    /// made without a key, which can be read but not written).
    pub fn new<K: AsRef<str>>(
        avro_json: &str,
        key_fields: &[K],
        ordering: Option<&str>,
        partition: Option<&str>,
    ) -> Result<Self> {
        Self::with_ordering_fields(avro_json, key_fields, ordering.as_slice(), partition)
    }

    /// [`TableSchema::new`] with any number of ordering fields, in their
    /// configured order (`hoodie.table.ordering.fields`): none, one, or
    /// several compared element by element.
    pub fn with_ordering_fields<K: AsRef<str>, O: AsRef<str>>(
        avro_json: &str,
        key_fields: &[K],
        ordering: &[O],
        partition: Option<&str>,
    ) -> Result<Self> {
        let bad = |reason: String| Error::InvalidInput { what: "table schema".into(), reason };
        let (table_json, log_json) = parse_table_json(avro_json).map_err(bad)?;
        let arrow = arrow_schema_of(avro_json)?;
        let arrow_with_meta = arrow_schema_of(&log_json)?;
        let find = |name: &str, role: &str| {
            arrow.index_of(name).map_err(|_| bad(format!("{role} field `{name}` is not in the schema")))
        };
        let key = RecordKey::new(
            key_fields
                .iter()
                .map(|k| Ok((k.as_ref().to_string(), find(k.as_ref(), "record key")?)))
                .collect::<Result<_>>()?,
        );
        let ordering = ordering.iter().map(|o| find(o.as_ref(), "ordering")).collect::<Result<Vec<_>>>()?;
        let partition = partition.map(|p| find(p, "partition")).transpose()?;
        let defaults = defaults_of(&table_json, &arrow_with_meta);
        Ok(Self {
            full_json: table_json.clone(),
            partial: false,
            table_json,
            log_json,
            arrow,
            arrow_with_meta,
            key,
            ordering,
            partition,
            defaults,
        })
    }

    /// The schema of a partial writer that declares `columns`: those columns
    /// (the record key and partition field are always included), in table
    /// order. A column of a sequence group needs that group's ordering
    /// field; an unknown column is an error.
    pub fn partial(&self, columns: &[String], groups: &[SequenceGroup]) -> Result<Self> {
        let bad = |reason: String| Err(Error::InvalidInput { what: "--columns".into(), reason });
        for c in columns {
            if self.arrow.index_of(c).is_err() {
                return bad(format!("unknown column `{c}` (not in the table schema)"));
            }
        }
        for g in groups {
            let declared: Vec<&String> = g.columns.iter().filter(|c| columns.contains(c)).collect();
            if !declared.is_empty() && !columns.contains(&g.ordering) {
                return bad(format!(
                    "columns {declared:?} belong to the sequence group ordered by `{}`, which is not declared",
                    g.ordering
                ));
            }
        }
        let key: Vec<&str> = self.key.names().collect();
        let partition = self.partition.map(|p| self.field_name(p).to_string());
        let fixed = |name: &str| key.contains(&name) || Some(name) == partition.as_deref();
        for f in self.arrow.fields() {
            let name = f.name().as_str();
            if !f.is_nullable() && !columns.iter().any(|c| c == name) && !fixed(name) {
                return bad(format!("column `{name}` is not nullable, so a partial writer must declare it"));
            }
        }
        let keep = |name: &str| columns.iter().any(|c| c == name) || fixed(name);
        let mut json = Value::clone(&self.table_json);
        if let Some(fields) = json.get_mut("fields").and_then(Value::as_array_mut) {
            fields.retain(|f| f.get("name").and_then(Value::as_str).is_some_and(keep));
        }
        let ordering: Vec<&str> = self.ordering.iter().map(|&o| self.field_name(o)).filter(|o| keep(o)).collect();
        let mut out = Self::with_ordering_fields(&json.to_string(), &key, &ordering, partition.as_deref())?;
        out.full_json = self.full_json.clone();
        out.partial = true;
        Ok(out)
    }

    /// The whole-table schema `avro_json` (an evolution of this one) with
    /// this schema's record key, ordering and partition fields.
    pub fn with_json(&self, avro_json: &str) -> Result<Self> {
        let key: Vec<&str> = self.key.names().collect();
        let ordering: Vec<&str> = self.ordering.iter().map(|&o| self.field_name(o)).collect();
        let partition = self.partition.map(|p| self.field_name(p));
        Self::with_ordering_fields(avro_json, &key, &ordering, partition)
    }

    /// The Avro default of column `i` (of [`Self::arrow`]), if its field
    /// declares one.
    pub fn default_of(&self, i: usize) -> Option<&Value> {
        self.table_json.get("fields")?.get(i)?.get("default")
    }

    /// The value rows that lack column `i` of [`Self::arrow_with_meta`]
    /// read as: `rows` copies of its Avro default, or `None` where it
    /// declares none (or a null one), so such rows read null. Records of
    /// an older schema and base files written before the column was added
    /// take it (Avro's schema resolution).
    pub fn absent_column(&self, i: usize, rows: usize) -> Option<ArrayRef> {
        let one = self.defaults.get(i)?.as_ref()?;
        arrow::compute::take(one, &arrow::array::UInt32Array::from(vec![0u32; rows]), None).ok()
    }

    /// Whether this is a partial writer's column subset.
    pub fn is_partial(&self) -> bool {
        self.partial
    }

    /// The whole table's Avro schema JSON (without meta fields), also for a
    /// partial schema; commits record this one.
    pub fn full_table_json(&self) -> String {
        self.full_json.to_string()
    }

    /// The table's Avro schema JSON, without meta fields.
    pub fn table_json(&self) -> String {
        self.table_json.to_string()
    }

    /// The log blocks' SCHEMA header: the five meta fields, then the table's.
    pub fn log_json(&self) -> &str {
        &self.log_json
    }

    /// Arrow schema of the table's own columns.
    pub fn arrow(&self) -> &SchemaRef {
        &self.arrow
    }

    /// Arrow schema of meta columns plus table columns.
    pub fn arrow_with_meta(&self) -> &SchemaRef {
        &self.arrow_with_meta
    }

    /// The record key: its fields and their columns (indices among the
    /// table columns), and how `_hoodie_record_key` is formed from them.
    pub fn record_key(&self) -> &RecordKey {
        &self.key
    }

    /// Whether table column `i` is a record key field.
    pub fn is_key(&self, i: usize) -> bool {
        self.key.contains(i)
    }

    /// Indices of the ordering fields (among the table's columns), in their
    /// configured order; empty when there is none.
    pub fn ordering_indices(&self) -> &[usize] {
        &self.ordering
    }

    /// Index of the ordering field when there is exactly one.
    pub fn single_ordering(&self) -> Option<usize> {
        match self.ordering.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// Whether table column `i` is an ordering field.
    pub fn is_ordering(&self, i: usize) -> bool {
        self.ordering.contains(&i)
    }

    /// The ordering value column of `batch`, whose table columns start at
    /// column `offset` (0, or the meta fields' count): see
    /// [`ordering_column_of`]. `None` without an ordering field.
    pub fn ordering_column(&self, batch: &arrow::array::RecordBatch, offset: usize) -> Option<ArrayRef> {
        let cols: Vec<usize> = self.ordering.iter().map(|o| o + offset).collect();
        ordering_column_of(batch, &cols)
    }

    /// Index of the partition field, if any.
    pub fn partition_index(&self) -> Option<usize> {
        self.partition
    }

    /// Name of the table column at `i`.
    pub fn field_name(&self, i: usize) -> &str {
        self.arrow.field(i).name()
    }

    /// Arrow type of the table column at `i`.
    pub fn data_type(&self, i: usize) -> &DataType {
        self.arrow.field(i).data_type()
    }
}

/// The ordering value column of `batch` for the ordering fields at columns
/// `cols`: that column for one field, or for several a struct column of
/// them in their order, whose values compare element by element (Hudi's
/// `ArrayComparable`); `None` for none.
pub fn ordering_column_of(batch: &arrow::array::RecordBatch, cols: &[usize]) -> Option<ArrayRef> {
    match cols {
        [] => None,
        [one] => Some(batch.column(*one).clone()),
        several => {
            let fields: Vec<(Arc<Field>, ArrayRef)> = several
                .iter()
                .enumerate()
                .map(|(n, &c)| {
                    let column = batch.column(c).clone();
                    (Arc::new(Field::new(format!("o{n}"), column.data_type().clone(), true)), column)
                })
                .collect();
            Some(Arc::new(arrow::array::StructArray::from(fields)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_whose_ordering_field_the_schema_lacks_is_named() {
        let groups = SequenceGroup::parse_list("ts_a=a1;ts_c=c1").unwrap();
        let json =
            r#"{"type":"record","name":"r","fields":[{"name":"ts_a","type":"long"},{"name":"c1","type":"long"}]}"#;
        assert_eq!(SequenceGroup::missing_ordering(&groups, json), Some("ts_c"));
        assert_eq!(SequenceGroup::missing_ordering(&groups[..1], json), None);
    }

    #[test]
    fn maps_avro_types_to_arrow() {
        let s = TableSchema::new(
            r#"{"type":"record","name":"r","fields":[
                {"name":"id","type":"string"},{"name":"ts","type":"long"},
                {"name":"d","type":{"type":"int","logicalType":"date"}},
                {"name":"t","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},
                {"name":"m","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
                {"name":"x","type":["null","double"],"default":null}]}"#,
            &["id"],
            Some("ts"),
            None,
        )
        .unwrap();
        assert_eq!(s.arrow().fields().len(), 6);
        assert_eq!(s.arrow_with_meta().fields().len(), 11);
        assert_eq!(s.arrow_with_meta().field(0).name(), "_hoodie_commit_time");
        assert_eq!(s.data_type(2), &DataType::Date32);
        assert!(matches!(s.data_type(3), DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, _)));
        assert_eq!(s.data_type(4), &DataType::Decimal128(10, 2));
        assert!(!s.arrow().field(0).is_nullable());
        assert!(s.arrow().field(5).is_nullable());
        assert!(TableSchema::new(r#"{"type":"record","name":"r","fields":[]}"#, &["id"], None, None).is_err());
        let composite = TableSchema::new(
            r#"{"type":"record","name":"r","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"},
                {"name":"c","type":"long"}]}"#,
            &["c", "a"],
            None,
            None,
        )
        .unwrap();
        assert_eq!(composite.record_key().names().collect::<Vec<_>>(), ["c", "a"]);
        assert_eq!(composite.record_key().columns().collect::<Vec<_>>(), [2, 0]);
        assert!(composite.is_key(0) && !composite.is_key(1));
    }
}
