//! Rows as the official Hudi reader and as `tributary read` return them,
//! meta columns included, in one comparable form. Tables are named by path
//! or URI (`s3://...`, read with the `AWS_*` variables).

use std::ffi::OsStr;

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

/// Python defining `open_table(uri)`: the official reader's table at a
/// path or URI. For `s3://` it passes the endpoint and `allow_http` from the
/// `AWS_*` variables (as `.ci/s3.sh` writes them) as storage options; the
/// credentials and region it reads from the environment itself.
pub const OPEN_TABLE: &str = r#"
import os
from hudi import HudiTableBuilder
def open_table(uri):
    b = HudiTableBuilder.from_base_uri(uri)
    if uri.startswith('s3://'):
        env = os.environ.get
        o = {'aws_endpoint': env('AWS_ENDPOINT_URL') or env('AWS_ENDPOINT'), 'aws_allow_http': env('AWS_ALLOW_HTTP')}
        b = b.with_storage_options({k: v for k, v in o.items() if v})
    return b.build()
"#;

/// Python defining `rows_json(batches)`: rows as JSON in the forms `tributary
/// read --format jsonl` writes values JSON has no form for: a decimal as a
/// number, a timestamp in RFC 3339 with `Z`, bytes in hex, a map as an
/// object, and anything else (a date) as Python's `str` of it.
pub const ROWS_JSON: &str = r#"
import datetime, decimal, json
import pyarrow as pa
def _norm(v):
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, datetime.datetime):
        return v.isoformat().replace('+00:00', 'Z')
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    return str(v)
def rows_json(batches):
    if not batches:
        return '[]'
    t = pa.Table.from_batches(batches)
    maps = [f.name for f in t.schema if pa.types.is_map(f.type)]
    rows = t.to_pylist()
    for r in rows:
        for m in maps:
            if r[m] is not None:
                r[m] = dict(r[m])
    return json.dumps(rows, default=_norm)
"#;

/// The official reader's rows of `table` (a path or URI), meta columns
/// included; `opts` is Python that changes the `HudiReadOptions` named `o`.
/// Values are in `tributary read`'s JSON forms ([`ROWS_JSON`]).
pub fn official_rows(table: impl AsRef<OsStr>, opts: &str) -> Vec<Value> {
    let script = format!(
        "import sys\n\
         from hudi import HudiReadOptions, HudiQueryType\n\
         {OPEN_TABLE}\
         {ROWS_JSON}\
         t = open_table(sys.argv[1])\n\
         o = HudiReadOptions()\n\
         {opts}\n\
         print(rows_json(t.read(o)))"
    );
    let out = python(&script, &[table.as_ref().to_str().unwrap()]);
    comparable(serde_json::from_str(out.trim()).unwrap())
}

/// The official reader's rows of table `t` (a local folder or `s3://`):
/// its snapshot, or with `read_optimized` its base files only.
pub fn official_rows_of(t: &tributary::Table, read_optimized: bool) -> Vec<Value> {
    let uri = t.location().to_string();
    let path = uri.strip_prefix("file://").unwrap_or(&uri);
    let opts =
        if read_optimized { "o = o.with_hudi_option(\"hoodie.read.use.read_optimized.mode\", \"true\")" } else { "" };
    official_rows(path, opts)
}

/// `tributary read --meta` of `table` with `extra` options: rows with their
/// `_hoodie_*` meta columns.
pub fn our_rows(table: impl AsRef<OsStr>, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["read", table.as_ref().to_str().unwrap(), "--format", "jsonl", "--meta"];
    args.extend_from_slice(extra);
    comparable(tributary_ok(&args).lines().map(|l| serde_json::from_str(l).unwrap()).collect())
}

/// Asserts that both readers return the same rows, meta columns included,
/// and that every row has all five meta columns (so the comparison covers
/// them); returns the rows.
pub fn assert_same_rows(table: impl AsRef<OsStr>, what: &str) -> Vec<Value> {
    let table = table.as_ref();
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
