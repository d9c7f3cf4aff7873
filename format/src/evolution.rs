//! Schema evolution on write, by Hudi's rules: the one home of what a new
//! table schema may change, and of how the schemas of concurrent commits
//! combine.
//!
//! A new schema may, against the one in force:
//! - add columns at the end of the record, or at the end of a nested
//!   record, that are nullable or have a default;
//! - promote a column's type: `int` to `long`, `float`, `double` or
//!   `string`; `long` to `float`, `double` or `string`; `float` to `double`
//!   or `string`; `string` to `bytes` and `bytes` to `string` (Avro's
//!   schema resolution, and Hudi's additions to it);
//! - make a required column nullable.
//!
//! Anything else is refused, naming the column, the old and new types and
//! the rule: dropping, renaming or reordering a column, narrowing a type,
//! making a nullable column required, and adding a required column with no
//! default. Hudi allows some of those only with schema on read
//! (`hoodie.schema.on.read.enable`), which keeps column ids in a separate
//! history; Tributary does not write that.
//!
//! Commits of concurrent writers each carry the schema they wrote under.
//! The commit that completes records [`merge_committed`] of the schema in
//! force and its own: columns others added stay, its additions are
//! appended, and a column two writers changed differently (added with
//! different types, or promoted to different types) fails the later commit
//! with a conflict.

use serde_json::{Value, json};

use crate::error::{Error, Result};

/// One change a new schema makes to the schema in force.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaChange {
    /// A column added (`path` is dotted for a nested record's field).
    Added {
        /// The column.
        path: String,
        /// Its Avro type, as JSON text.
        avro_type: String,
    },
    /// A column's type promoted.
    Promoted {
        /// The column.
        path: String,
        /// The type before.
        from: String,
        /// The type after.
        to: String,
    },
    /// A required column made nullable.
    MadeNullable {
        /// The column.
        path: String,
    },
}

impl std::fmt::Display for SchemaChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaChange::Added { path, avro_type } => write!(f, "add column `{path}` {avro_type}"),
            SchemaChange::Promoted { path, from, to } => write!(f, "promote column `{path}` from {from} to {to}"),
            SchemaChange::MadeNullable { path } => write!(f, "make column `{path}` nullable"),
        }
    }
}

/// The primitive types a column may be promoted between.
const PROMOTIONS: &[(&str, &[&str])] = &[
    ("int", &["long", "float", "double", "string"]),
    ("long", &["float", "double", "string"]),
    ("float", &["double", "string"]),
    ("string", &["bytes"]),
    ("bytes", &["string"]),
];

/// Whether a column of primitive type `from` may become `to`.
pub fn promotes(from: &str, to: &str) -> bool {
    PROMOTIONS.iter().any(|(f, tos)| *f == from && tos.contains(&to))
}

/// The rule text errors cite.
const RULES: &str = "a schema may only add nullable (or defaulted) columns at the end of a record, promote \
                     int→long/float/double/string, long→float/double/string, float→double/string, string↔bytes, \
                     or make a column nullable";
const SCHEMA_ON_READ: &str = "Hudi allows this only with schema on read (hoodie.schema.on.read.enable), which \
                              Tributary does not support";

/// A field's type split into its nullability and the type itself.
#[derive(Debug, Clone, PartialEq)]
struct Ty {
    nullable: bool,
    inner: Value,
}

fn split(t: &Value) -> Ty {
    if let Some(branches) = t.as_array() {
        let others: Vec<&Value> = branches.iter().filter(|b| b.as_str() != Some("null")).collect();
        if others.len() == 1 && branches.len() == 2 {
            return Ty { nullable: true, inner: normalize(others[0]) };
        }
    }
    Ty { nullable: false, inner: normalize(t) }
}

/// `{"type":"long"}` as `"long"`: one spelling of each plain type.
fn normalize(t: &Value) -> Value {
    match t.as_object() {
        Some(o) if o.len() == 1 && o.get("type").is_some_and(Value::is_string) => o["type"].clone(),
        _ => t.clone(),
    }
}

/// The plain primitive name of a type (no logical type), if it is one.
fn primitive(t: &Value) -> Option<&str> {
    t.as_str().filter(|s| matches!(*s, "boolean" | "int" | "long" | "float" | "double" | "string" | "bytes"))
}

fn is_record(t: &Value) -> bool {
    t.get("type").and_then(Value::as_str) == Some("record")
}

fn fields(record: &Value) -> &[Value] {
    record.get("fields").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn name(field: &Value) -> &str {
    field.get("name").and_then(Value::as_str).unwrap_or("")
}

/// A type for messages: its JSON, with a nullable one as `T (nullable)`.
fn show(t: &Ty) -> String {
    let inner = match t.inner.as_str() {
        Some(s) => s.to_string(),
        None => t.inner.to_string(),
    };
    if t.nullable { format!("{inner} (nullable)") } else { inner }
}

fn parse(json: &str, what: &str) -> Result<Value> {
    let v: Value = serde_json::from_str(json)
        .map_err(|e| Error::InvalidInput { what: what.to_string(), reason: format!("not JSON: {e}") })?;
    if !is_record(&v) {
        return Err(Error::InvalidInput { what: what.to_string(), reason: "not an Avro record schema".into() });
    }
    Ok(v)
}

fn refuse(table: &str, path: &str, reason: String) -> Error {
    Error::InvalidInput { what: format!("schema of {table}, column `{path}`"), reason }
}

/// Checks that `new` evolves `old` by the rules above and returns the
/// changes it makes (none when the two are equal). `table` names the table
/// in errors.
pub fn check_evolution(table: &str, old: &str, new: &str) -> Result<Vec<SchemaChange>> {
    let (old, new) = (parse(old, "schema in force")?, parse(new, "new schema")?);
    let mut changes = Vec::new();
    check_record(table, "", &old, &new, &mut changes)?;
    Ok(changes)
}

fn check_record(table: &str, prefix: &str, old: &Value, new: &Value, changes: &mut Vec<SchemaChange>) -> Result<()> {
    let (of, nf) = (fields(old), fields(new));
    let path = |f: &Value| format!("{prefix}{}", name(f));
    for (i, o) in of.iter().enumerate() {
        let p = path(o);
        match nf.get(i) {
            Some(n) if name(n) == name(o) => check_field(table, &p, o, n, changes)?,
            _ => {
                let reason = match nf.iter().position(|n| name(n) == name(o)) {
                    Some(j) => {
                        format!("it moves from position {i} to {j}: columns cannot be reordered; {SCHEMA_ON_READ}")
                    }
                    None => format!(
                        "it is missing from the new schema: columns cannot be dropped or renamed (a writer \
                         that does not write a column leaves it out of its records, not out of the schema); \
                         {SCHEMA_ON_READ}"
                    ),
                };
                return Err(refuse(table, &p, reason));
            }
        }
    }
    for n in &nf[of.len().min(nf.len())..] {
        let p = path(n);
        let t = split(&n["type"]);
        if !t.nullable && n.get("default").is_none() {
            return Err(refuse(
                table,
                &p,
                format!(
                    "an added column must be nullable or have a default, and this one is {} with no default \
                     (rows written before it have no value for it); {RULES}",
                    show(&t)
                ),
            ));
        }
        changes.push(SchemaChange::Added { path: p, avro_type: n["type"].to_string() });
    }
    Ok(())
}

fn check_field(table: &str, path: &str, old: &Value, new: &Value, changes: &mut Vec<SchemaChange>) -> Result<()> {
    let (o, n) = (split(&old["type"]), split(&new["type"]));
    if o.nullable && !n.nullable {
        return Err(refuse(
            table,
            path,
            format!(
                "{} → {}: a nullable column cannot become required (rows may hold nulls); {SCHEMA_ON_READ}",
                show(&o),
                show(&n)
            ),
        ));
    }
    if !o.nullable && n.nullable {
        changes.push(SchemaChange::MadeNullable { path: path.to_string() });
    }
    if o.inner == n.inner {
        return Ok(());
    }
    if is_record(&o.inner) && is_record(&n.inner) {
        return check_record(table, &format!("{path}."), &o.inner, &n.inner, changes);
    }
    match (primitive(&o.inner), primitive(&n.inner)) {
        (Some(from), Some(to)) if promotes(from, to) => {
            changes.push(SchemaChange::Promoted { path: path.to_string(), from: from.into(), to: to.into() });
            Ok(())
        }
        (Some(from), Some(to)) if promotes(to, from) => Err(refuse(
            table,
            path,
            format!("{from} → {to} narrows the type (values written as {from} may not fit); {SCHEMA_ON_READ}"),
        )),
        _ => Err(refuse(
            table,
            path,
            format!("{} → {} is not a promotion Hudi allows; {RULES}; {SCHEMA_ON_READ}", show(&o), show(&n)),
        )),
    }
}

/// The schema a commit records: `in_force` (the latest committed schema)
/// with the changes `ours` made to `base` (the schema the committing
/// writer started from). Columns added or promoted by either side are
/// kept; `ours`' additions follow `in_force`'s columns. A column both
/// sides changed since `base`, to different types, is a conflict: the
/// commit that completed first stands, and this one fails with
/// [`Error::SchemaConflict`] naming the column. Returns `in_force` itself
/// when `ours` changes nothing in it.
///
/// A schema in force only gains columns, so `in_force` holds every column
/// of `base` unless the lookup that found it missed the latest write; a
/// column of `base` it lacks is then kept too, at its end, rather than
/// recorded away.
pub fn merge_committed(table: &str, in_force: &str, base: &str, ours: &str) -> Result<String> {
    if ours == in_force {
        return Ok(in_force.to_string());
    }
    if in_force == base {
        return Ok(ours.to_string());
    }
    let (f, b, o) =
        (parse(in_force, "schema in force")?, parse(base, "writer's base schema")?, parse(ours, "writer schema")?);
    let merged = merge_record(table, "", &f, Some(&b), &o)?;
    Ok(if merged == f { in_force.to_string() } else { merged.to_string() })
}

fn merge_record(table: &str, prefix: &str, f: &Value, b: Option<&Value>, o: &Value) -> Result<Value> {
    let mut out = f.clone();
    let mut merged: Vec<Value> = fields(f).to_vec();
    for of in fields(o) {
        let n = name(of);
        let bf = b.and_then(|b| fields(b).iter().find(|x| name(x) == n));
        match merged.iter_mut().find(|x| name(x) == n) {
            None => merged.push(of.clone()),
            Some(ff) => {
                let path = format!("{prefix}{n}");
                let ty = merge_type(table, &path, &ff["type"], bf.map(|x| &x["type"]), &of["type"])?;
                if ty != ff["type"] {
                    ff["type"] = ty;
                }
            }
        }
    }
    out["fields"] = Value::Array(merged);
    Ok(out)
}

fn merge_type(table: &str, path: &str, f: &Value, b: Option<&Value>, o: &Value) -> Result<Value> {
    let (ft, ot) = (split(f), split(o));
    let bt = b.map(split);
    let nullable = ft.nullable || ot.nullable;
    let inner = if ft.inner == ot.inner {
        ft.inner.clone()
    } else if is_record(&ft.inner) && is_record(&ot.inner) {
        let bi = bt.as_ref().map(|t| &t.inner).filter(|t| is_record(t));
        merge_record(table, &format!("{path}."), &ft.inner, bi, &ot.inner)?
    } else if bt.as_ref().is_some_and(|t| t.inner == ot.inner) {
        // Ours left it as it was: the change in force stands.
        ft.inner.clone()
    } else if bt.as_ref().is_some_and(|t| t.inner == ft.inner) {
        // Only ours changed it.
        ot.inner.clone()
    } else {
        let how = if bt.is_none() { "added" } else { "changed" };
        return Err(Error::SchemaConflict {
            table: table.to_string(),
            column: path.to_string(),
            reason: format!(
                "this commit {how} it as {}, but a commit that completed first made it {}; the first commit's \
                 type stands: write this column as {} (or promote it in a later commit)",
                show(&ot),
                show(&ft),
                show(&Ty { nullable: ft.nullable, inner: ft.inner.clone() })
            ),
        });
    };
    if !nullable && inner == ft.inner {
        return Ok(f.clone());
    }
    if nullable && ft.nullable && inner == ft.inner {
        return Ok(f.clone());
    }
    Ok(if nullable { json!(["null", inner]) } else { inner })
}

/// The Avro type of a column type named on a command line: `int`, `long`,
/// `float`, `double`, `string`, `bytes`, `boolean`, `date`,
/// `timestamp-millis`, `timestamp-micros`, or `decimal(P,S)`.
pub fn avro_type_of(name: &str) -> Result<Value> {
    let t = name.trim();
    let bad = || Error::InvalidInput {
        what: format!("column type `{name}`"),
        reason: "expected int, long, float, double, string, bytes, boolean, date, timestamp-millis, \
                 timestamp-micros or decimal(P,S)"
            .into(),
    };
    Ok(match t {
        "int" | "long" | "float" | "double" | "string" | "bytes" | "boolean" => json!(t),
        "date" => json!({"type": "int", "logicalType": "date"}),
        "timestamp-millis" | "timestamp-micros" => json!({"type": "long", "logicalType": t}),
        _ => {
            let inner = t.strip_prefix("decimal(").and_then(|r| r.strip_suffix(')')).ok_or_else(bad)?;
            let (p, s) = inner.split_once(',').ok_or_else(bad)?;
            let (p, s): (u32, u32) = (p.trim().parse().map_err(|_| bad())?, s.trim().parse().map_err(|_| bad())?);
            json!({"type": "bytes", "logicalType": "decimal", "precision": p, "scale": s})
        }
    })
}

/// `schema` with a nullable column `name` of `avro_type` added at the end
/// of the top-level record; with `default`, the column's default (Avro
/// then puts the type before `null` in the union, as a default must match
/// the first branch).
pub fn with_added_column(schema: &str, name: &str, avro_type: &Value, default: Option<&Value>) -> Result<String> {
    let mut v = parse(schema, "table schema")?;
    if fields(&v).iter().any(|f| f.get("name").and_then(Value::as_str) == Some(name)) {
        return Err(Error::InvalidInput {
            what: format!("column `{name}`"),
            reason: "the table already has a column of that name".into(),
        });
    }
    let field = match default {
        None | Some(Value::Null) => json!({"name": name, "type": ["null", avro_type], "default": null}),
        Some(d) => json!({"name": name, "type": [avro_type, "null"], "default": d}),
    };
    if let Some(fs) = v.get_mut("fields").and_then(Value::as_array_mut) {
        fs.push(field);
    }
    let out = v.to_string();
    apache_avro::Schema::parse_str(&out).map_err(|e| Error::InvalidInput {
        what: format!("column `{name}`"),
        reason: format!("the schema with it is not valid Avro (is the default a value of the type?): {e}"),
    })?;
    Ok(out)
}

/// `schema` with top-level column `name` of primitive type `to`, keeping
/// its nullability. The caller checks the change ([`check_evolution`]).
pub fn with_column_type(schema: &str, name: &str, to: &str) -> Result<String> {
    let mut v = parse(schema, "table schema")?;
    let target = avro_type_of(to)?;
    let field = v
        .get_mut("fields")
        .and_then(Value::as_array_mut)
        .and_then(|fs| fs.iter_mut().find(|f| f.get("name").and_then(Value::as_str) == Some(name)))
        .ok_or_else(|| Error::InvalidInput {
            what: format!("column `{name}`"),
            reason: "not in the table schema".into(),
        })?;
    let t = field["type"].clone();
    field["type"] = match t.as_array() {
        Some(branches) if branches.len() == 2 => Value::Array(
            branches.iter().map(|b| if b.as_str() == Some("null") { b.clone() } else { target.clone() }).collect(),
        ),
        _ => target,
    };
    Ok(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(fields: &str) -> String {
        format!(r#"{{"type":"record","name":"r","fields":[{fields}]}}"#)
    }
    const ID: &str = r#"{"name":"id","type":"string"}"#;

    #[test]
    fn additions_promotions_and_nullability_are_changes() {
        let old = schema(&format!(r#"{ID},{{"name":"n","type":"int"}},{{"name":"s","type":["null","string"]}}"#));
        let new = schema(&format!(
            r#"{ID},{{"name":"n","type":["null","long"]}},{{"name":"s","type":["null","bytes"]}},
               {{"name":"x","type":["null","double"],"default":null}},{{"name":"y","type":"int","default":3}}"#
        ));
        let changes = check_evolution("t", &old, &new).unwrap();
        assert_eq!(
            changes,
            vec![
                SchemaChange::MadeNullable { path: "n".into() },
                SchemaChange::Promoted { path: "n".into(), from: "int".into(), to: "long".into() },
                SchemaChange::Promoted { path: "s".into(), from: "string".into(), to: "bytes".into() },
                SchemaChange::Added { path: "x".into(), avro_type: r#"["null","double"]"#.into() },
                SchemaChange::Added { path: "y".into(), avro_type: r#""int""#.into() },
            ]
        );
        assert!(check_evolution("t", &old, &old).unwrap().is_empty());
    }

    #[test]
    fn nested_records_gain_fields_at_their_end() {
        let inner = |extra: &str| {
            format!(
                r#"{{"name":"addr","type":{{"type":"record","name":"a","fields":[{{"name":"city","type":"string"}}{extra}]}}}}"#
            )
        };
        let old = schema(&format!("{ID},{}", inner("")));
        let new = schema(&format!("{ID},{}", inner(r#",{"name":"zip","type":["null","string"],"default":null}"#)));
        let changes = check_evolution("t", &old, &new).unwrap();
        assert!(matches!(&changes[..], [SchemaChange::Added { path, .. }] if path == "addr.zip"));
    }

    #[test]
    fn every_refused_change_names_the_column_and_the_rule() {
        let old = schema(&format!(r#"{ID},{{"name":"n","type":"long"}},{{"name":"s","type":["null","string"]}}"#));
        let cases = [
            (schema(&format!(r#"{ID},{{"name":"s","type":["null","string"]}}"#)), "`n`", "dropped"),
            (
                schema(&format!(r#"{ID},{{"name":"s","type":["null","string"]}},{{"name":"n","type":"long"}}"#)),
                "`n`",
                "reordered",
            ),
            (
                schema(&format!(r#"{ID},{{"name":"m","type":"long"}},{{"name":"s","type":["null","string"]}}"#)),
                "`n`",
                "renamed",
            ),
            (
                schema(&format!(r#"{ID},{{"name":"n","type":"int"}},{{"name":"s","type":["null","string"]}}"#)),
                "`n`",
                "long → int narrows",
            ),
            (
                schema(&format!(r#"{ID},{{"name":"n","type":"long"}},{{"name":"s","type":"string"}}"#)),
                "`s`",
                "cannot become required",
            ),
            (
                schema(&format!(r#"{ID},{{"name":"n","type":"boolean"}},{{"name":"s","type":["null","string"]}}"#)),
                "`n`",
                "not a promotion",
            ),
            (
                schema(&format!(
                    r#"{ID},{{"name":"n","type":"long"}},{{"name":"s","type":["null","string"]}},{{"name":"r","type":"int"}}"#
                )),
                "`r`",
                "no default",
            ),
        ];
        for (new, column, rule) in cases {
            let e = check_evolution("t", &old, &new).unwrap_err().to_string();
            assert!(e.contains(column) && e.contains(rule), "{e}");
            assert!(e.contains("schema of t"), "{e}");
        }
    }

    #[test]
    fn concurrent_additions_merge_and_a_type_clash_conflicts() {
        let base = schema(ID);
        let a = schema(&format!(r#"{ID},{{"name":"a","type":["null","long"],"default":null}}"#));
        let b = schema(&format!(r#"{ID},{{"name":"b","type":["null","string"],"default":null}}"#));
        // Nothing changed since the writer began: its schema is recorded.
        assert_eq!(merge_committed("t", &base, &base, &a).unwrap(), a);
        // An older writer records the schema in force.
        assert_eq!(merge_committed("t", &a, &base, &base).unwrap(), a);
        // Two additions: both kept, the later one's after.
        let both: Value = serde_json::from_str(&merge_committed("t", &a, &base, &b).unwrap()).unwrap();
        let names: Vec<&str> = fields(&both).iter().map(name).collect();
        assert_eq!(names, ["id", "a", "b"]);
        // The same column added with another type: a conflict naming it.
        let a_str = schema(&format!(r#"{ID},{{"name":"a","type":["null","string"],"default":null}}"#));
        let e = merge_committed("t", &a, &base, &a_str).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Conflict);
        assert!(e.to_string().contains("`a`") && e.to_string().contains("long"), "{e}");
        // The same column added with the same type: no conflict.
        assert_eq!(merge_committed("t", &a, &base, &a).unwrap(), a);
        // A promotion in force, and a writer that did not know it.
        let promoted = schema(&format!(r#"{ID},{{"name":"a","type":["null","double"],"default":null}}"#));
        assert_eq!(merge_committed("t", &promoted, &a, &a).unwrap(), promoted);
        // A schema in force that lacks a column the writer's base has (a
        // lookup that missed the latest write): the column is kept.
        assert_eq!(merge_committed("t", &base, &a, &a).unwrap(), a);
        let kept: Value = serde_json::from_str(&merge_committed("t", &b, &a, &a).unwrap()).unwrap();
        assert_eq!(fields(&kept).iter().map(name).collect::<Vec<_>>(), ["id", "b", "a"]);
    }

    #[test]
    fn alter_builds_valid_schemas() {
        let s = schema(ID);
        let added = with_added_column(&s, "n", &avro_type_of("long").unwrap(), Some(&json!(7))).unwrap();
        assert_eq!(check_evolution("t", &s, &added).unwrap().len(), 1);
        assert!(with_added_column(&added, "n", &json!("int"), None).is_err());
        assert!(with_added_column(&s, "m", &json!("long"), Some(&json!("x"))).is_err());
        let promoted = with_column_type(&added, "n", "double").unwrap();
        assert!(matches!(&check_evolution("t", &added, &promoted).unwrap()[..], [SchemaChange::Promoted { .. }]));
        assert!(avro_type_of("decimal(10,2)").is_ok() && avro_type_of("uuid").is_err());
    }
}
