//! Writes LSM history folders as Java lays them out (Hudi 1.x
//! `LSMTimelineFolder`), for tests: Tributary itself never archives. The
//! layout is the one `tributary_timeline::history` documents, checked
//! against folders Spark wrote.

use std::sync::Arc;

use arrow::array::{BinaryArray, Int32Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use object_store::path::Path;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, GzipLevel};
use parquet::file::properties::WriterProperties;

use tributary_timeline::delete_if_exists;
use tributary_timeline::{Error, Instant, Result, State, TableConfig, TableLocation, TimelineFolder};
use tributary_timeline::{MANIFEST_PREFIX, VERSION_FILE, history_dir, latest_snapshot};

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
    let dir = history_dir(loc, config)
        .ok_or_else(|| Error::InvalidInput { what: "archive".into(), reason: "a layout-1 table".into() })?;
    let writer = TimelineFolder::new(loc, config);
    let mut contents = Vec::new();
    for i in instants {
        contents.push(writer.read(i, State::Completed).await?);
    }
    let times: Vec<(String, String)> = instants
        .iter()
        .map(|i| (i.requested.to_string(), i.completed.as_ref().map(ToString::to_string).unwrap_or_default()))
        .collect();
    let rows: Vec<Row<'_>> = instants
        .iter()
        .zip(&times)
        .zip(&contents)
        .map(|((i, (t, c)), m)| (t.as_str(), Some(c.as_str()), i.action.completed_name(), Some(&m[..])))
        .collect();
    let (version, previous) = latest_snapshot(loc, &dir).await?.unwrap_or_default();
    let mut listed: Vec<(String, u64)> =
        previous.iter().map(|f| (f.path.filename().unwrap_or_default().to_string(), f.len)).collect();
    listed.push(write_file(loc, &dir, &rows).await?);
    write_manifest(loc, &dir, version + 1, &listed).await?;
    for i in instants {
        for state in [State::Requested, State::Inflight, State::Completed] {
            delete_if_exists(loc, &writer.path_of(i, state)?).await?;
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

/// The rows as a Parquet file of Hudi's `HoodieLSMTimelineInstant`
/// columns, gzip-compressed as Java writes them.
pub fn parquet_bytes(rows: &[Row<'_>]) -> Result<Vec<u8>> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("instantTime", DataType::Utf8, true),
        Field::new("completionTime", DataType::Utf8, true),
        Field::new("action", DataType::Utf8, true),
        Field::new("metadata", DataType::Binary, true),
        Field::new("plan", DataType::Binary, true),
        Field::new("version", DataType::Int32, false),
    ]));
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
