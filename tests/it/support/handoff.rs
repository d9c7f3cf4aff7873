//! Tables the Rust suite builds at length and leaves for the Spark suite
//! (`tests/spark/test_rust_suite_tables.py`) to read against the model each
//! test writes beside them. `.ci/run` names the folder in
//! `TRIBUTARY_SPARK_TABLES` for the test phase and the Spark phase after it.

use std::path::{Path, PathBuf};

use futures::TryStreamExt;

/// The folder `name` of the hand-off folder, made empty; `None` when
/// `TRIBUTARY_SPARK_TABLES` is unset (a local run that leaves nothing).
pub fn spark_handoff(name: &str) -> Option<PathBuf> {
    let root = std::env::var_os("TRIBUTARY_SPARK_TABLES")?;
    let dir = Path::new(&root).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Some(dir)
}

/// Copies every object of table `t`, in whatever store, into the local
/// folder `dir`, as a table of its own.
pub async fn copy_table_to(t: &tributary::Table, dir: &Path) {
    let root = t.location().root.clone();
    let objects: Vec<_> = t.location().store.list(Some(&root)).try_collect().await.unwrap();
    for o in objects {
        let relative: Vec<String> = o.location.prefix_match(&root).unwrap().map(|p| p.as_ref().to_string()).collect();
        let file = dir.join(relative.join("/"));
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, t.location().get(&o.location).await.unwrap()).unwrap();
    }
}

/// Rows `(uuid, ts, fare)` as the Spark suite reads them from the
/// expectations file.
pub fn fares_json(rows: &[(String, i64, f64)]) -> serde_json::Value {
    serde_json::Value::Array(rows.iter().map(|(k, ts, fare)| serde_json::json!([k, ts, fare])).collect())
}
