//! Writes LSM history folders as Java lays them out (Hudi 1.x
//! `LSMTimelineFolder`), for tests: chosen instants archived as a Java
//! writer would (through the library's `HistoryWriter`), and files of any
//! rows, malformed ones included. The layout is the one
//! `tributary_timeline::History` documents, checked against folders Spark
//! wrote.

use std::sync::Arc;

use arrow::array::{BinaryArray, Int32Array, RecordBatch, StringArray};
use object_store::path::Path;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, GzipLevel};
use parquet::file::properties::WriterProperties;

use tributary_timeline::{
    ArchivedRow, Error, HistorySettings, HistoryWriter, Instant, MANIFEST_PREFIX, Result, State, TableConfig,
    TableLocation, TimelineFolder, VERSION_FILE, delete_if_exists, history_schema,
};

/// One archived instant: `(instant time, completion time, completed action, metadata)`.
pub type Row<'a> = (&'a str, Option<&'a str>, &'a str, Option<&'a [u8]>);

/// Writes one level-0 file per entry of `files` (rows in requested-time
/// order), then `manifest_<version>` listing them and `_version_`.
/// Returns the files' names.
pub async fn write_snapshot(
    loc: &TableLocation,
    dir: &Path,
    version: u64,
    files: &[Vec<Row<'_>>],
) -> Result<Vec<String>> {
    let mut listed = Vec::new();
    for rows in files {
        if !rows.is_empty() {
            listed.push(write_file(loc, dir, rows).await?);
        }
    }
    write_manifest(loc, dir, version, &listed).await?;
    Ok(listed.into_iter().map(|(name, _)| name).collect())
}

/// Archives the completed `instants` as a Java writer does: adds one
/// level-0 file holding them (with their completed files' content) to a
/// new snapshot of the table's history, then deletes their files from
/// the active timeline, pending states first.
pub async fn archive(loc: &TableLocation, config: &TableConfig, instants: &[Instant]) -> Result<()> {
    let history = HistoryWriter::new(loc, config, HistorySettings::default())?;
    let folder = TimelineFolder::new(loc, config);
    let mut rows = Vec::new();
    for i in instants {
        let metadata = folder.read(i, State::Completed).await?;
        rows.push(ArchivedRow {
            requested: i.requested.clone(),
            completed: i.completed.clone().unwrap_or_else(|| i.requested.clone()),
            action: i.action.completed_name().to_string(),
            metadata: (!metadata.is_empty()).then_some(metadata),
            plan: None,
        });
    }
    history.append(&rows).await?;
    for i in instants {
        for state in [State::Requested, State::Inflight, State::Completed] {
            delete_if_exists(loc, &folder.path_of(i, state)?).await?;
        }
    }
    Ok(())
}

/// Writes `rows` (not empty, in requested-time order) as the level-0
/// file `<first>_<last>_0.parquet`; returns its name and length.
async fn write_file(loc: &TableLocation, dir: &Path, rows: &[Row<'_>]) -> Result<(String, u64)> {
    let name = format!("{}_{}_0.parquet", rows[0].0, rows[rows.len() - 1].0);
    let bytes = parquet_bytes(rows)?;
    let len = bytes.len() as u64;
    loc.put(&dir.clone().join(name.as_str()), bytes).await?;
    Ok((name, len))
}

/// Writes `manifest_<version>` listing `files` (names and lengths),
/// then `_version_` naming it: the snapshot becomes the latest.
pub async fn write_manifest(loc: &TableLocation, dir: &Path, version: u64, files: &[(String, u64)]) -> Result<()> {
    let entries: Vec<_> =
        files.iter().map(|(name, len)| serde_json::json!({"fileName": name, "fileLen": len})).collect();
    let manifest = serde_json::to_vec_pretty(&serde_json::json!({ "files": entries }))
        .map_err(|e| Error::InvalidInput { what: "history manifest".into(), reason: e.to_string() })?;
    loc.put(&dir.clone().join(format!("{MANIFEST_PREFIX}{version}")), manifest).await?;
    Ok(loc.put(&dir.clone().join(VERSION_FILE), version.to_string().into_bytes()).await?)
}

/// The rows as a Parquet file of the history's columns, gzip-compressed
/// as Java writes them. Unlike the library's writer it takes any row (no
/// completion time, an unknown action), for tests of what readers make of
/// such rows.
pub fn parquet_bytes(rows: &[Row<'_>]) -> Result<Vec<u8>> {
    let schema = history_schema();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(StringArray::from_iter(rows.iter().map(|r| Some(r.0)))),
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.1))),
            Arc::new(StringArray::from_iter(rows.iter().map(|r| Some(r.2)))),
            Arc::new(BinaryArray::from_iter(rows.iter().map(|r| r.3))),
            Arc::new(BinaryArray::from_iter(rows.iter().map(|_| None::<&[u8]>))),
            Arc::new(Int32Array::from_iter_values(rows.iter().map(|_| 1))),
        ],
    )
    .map_err(|e| Error::InvalidInput { what: "history rows".into(), reason: e.to_string() })?;
    let props = WriterProperties::builder().set_compression(Compression::GZIP(GzipLevel::default())).build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, schema, Some(props))
        .map_err(|e| Error::InvalidInput { what: "history file".into(), reason: e.to_string() })?;
    writer.write(&batch).map_err(|e| Error::InvalidInput { what: "history file".into(), reason: e.to_string() })?;
    writer.close().map_err(|e| Error::InvalidInput { what: "history file".into(), reason: e.to_string() })?;
    Ok(out)
}
