//! Rows as the official Hudi reader and as `tributary read` return them,
//! meta columns included, in one comparable form.

use std::path::Path;

use serde_json::Value;

use super::{python, tributary_ok};

/// Rows in a comparable form: each an object without its null-valued
/// fields (one reader writes a null, the other leaves the field out),
/// sorted by partition path and record key, then by the whole row.
pub fn comparable(rows: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = rows
        .into_iter()
        .map(|mut r| {
            if let Some(o) = r.as_object_mut() {
                o.retain(|_, v| !v.is_null());
            }
            r
        })
        .collect();
    let key = |r: &Value| {
        (r["_hoodie_partition_path"].as_str().map(String::from), r["_hoodie_record_key"].as_str().map(String::from))
    };
    out.sort_by(|a, b| key(a).cmp(&key(b)).then_with(|| a.to_string().cmp(&b.to_string())));
    out
}

/// The official reader's rows of `table`, meta columns included; `opts` is
/// Python that changes the `HudiReadOptions` named `o`. Values JSON has no
/// form for are written as Python's `str` of them (a date as `2020-02-22`,
/// as `tributary read` writes it).
pub fn official_rows(table: &Path, opts: &str) -> Vec<Value> {
    let script = format!(
        "import sys, json\n\
         import pyarrow as pa\n\
         from hudi import HudiTableBuilder, HudiReadOptions, HudiQueryType\n\
         t = HudiTableBuilder.from_base_uri(sys.argv[1]).build()\n\
         o = HudiReadOptions()\n\
         {opts}\n\
         b = t.read(o)\n\
         print(json.dumps(pa.Table.from_batches(b).to_pylist() if b else [], default=str))"
    );
    let out = python(&script, &[table.to_str().unwrap()]);
    comparable(serde_json::from_str(out.trim()).unwrap())
}

/// The official reader's rows of the local table `t`: its snapshot, or with
/// `read_optimized` its base files only.
pub fn official_rows_of(t: &tributary::Table, read_optimized: bool) -> Vec<Value> {
    let uri = t.location().to_string();
    let path = uri.strip_prefix("file://").unwrap_or(&uri);
    let opts =
        if read_optimized { "o = o.with_hudi_option(\"hoodie.read.use.read_optimized.mode\", \"true\")" } else { "" };
    official_rows(Path::new(path), opts)
}

/// `tributary read --meta` of `table` with `extra` options: rows with their
/// `_hoodie_*` meta columns.
pub fn our_rows(table: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["read", table.to_str().unwrap(), "--format", "jsonl", "--meta"];
    args.extend_from_slice(extra);
    comparable(tributary_ok(&args).lines().map(|l| serde_json::from_str(l).unwrap()).collect())
}

/// Asserts that both readers return the same rows, meta columns included,
/// and that every row has all five meta columns (so the comparison covers
/// them); returns the rows.
pub fn assert_same_rows(table: &Path, what: &str) -> Vec<Value> {
    let ours = our_rows(table, &[]);
    for r in &ours {
        for m in [
            "_hoodie_commit_time",
            "_hoodie_commit_seqno",
            "_hoodie_record_key",
            "_hoodie_partition_path",
            "_hoodie_file_name",
        ] {
            assert!(r.get(m).is_some(), "{what}: `{m}` missing in {r}");
        }
    }
    assert_eq!(official_rows(table, ""), ours, "{what}: the official reader vs tributary read --meta");
    ours
}
