//! What the binary prints: each command's report on standard output, and,
//! for a failed command, `error: <message>` on standard error and the exit
//! code of the error's kind.

use std::io::Write;
use std::process::ExitCode;

use tributary::arrow::array::RecordBatch;
use tributary::{
    ArchiveSummary, CleanSummary, CompactionSummary, JsonLinesSummary, ServiceEvent, ServiceReport, Table, Timeline,
    WriterStatus,
};

use crate::args::{CheckpointFormatArg, FormatArg};

/// Why a command failed: an error of the library, whose kind says what the
/// caller can do, or a failure to write the output (exit code 1).
#[derive(Debug)]
pub(crate) enum Failure {
    /// An error of the library.
    Table(tributary::Error),
    /// Writing or formatting the output failed.
    Output(Box<dyn std::error::Error + Send + Sync>),
}

impl From<tributary::Error> for Failure {
    fn from(e: tributary::Error) -> Self {
        Failure::Table(e)
    }
}

impl From<tributary::WriterError> for Failure {
    fn from(e: tributary::WriterError) -> Self {
        Failure::Table(e.into())
    }
}

impl From<tributary::CompactionError> for Failure {
    fn from(e: tributary::CompactionError) -> Self {
        Failure::Table(e.into())
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::Output(e.into())
    }
}

impl From<tributary::arrow::error::ArrowError> for Failure {
    fn from(e: tributary::arrow::error::ArrowError) -> Self {
        Failure::Output(e.into())
    }
}

impl Failure {
    /// The exit code: the [`tributary::ErrorKind::exit_code`] of a library
    /// error's kind, else 1.
    pub(crate) fn exit_code(&self) -> ExitCode {
        match self {
            Failure::Table(e) => ExitCode::from(e.kind().exit_code()),
            Failure::Output(_) => ExitCode::FAILURE,
        }
    }

    /// The error and its causes, joined by `: `, leaving out a cause whose
    /// text an earlier one already shows (object-store errors repeat their
    /// sources in their own messages).
    pub(crate) fn message(&self) -> String {
        let mut next: Option<&(dyn std::error::Error + 'static)> = match self {
            Failure::Table(e) => Some(e),
            Failure::Output(e) => Some(e.as_ref()),
        };
        let mut out = String::new();
        while let Some(cause) = next {
            next = cause.source();
            let text = cause.to_string();
            if out.contains(&text) {
                continue;
            }
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        out
    }
}

/// `init`: the table made.
pub(crate) fn created(t: &Table) {
    let c = t.config();
    println!(
        "created table `{}` at {} (version {}, MERGE_ON_READ, {} buckets, {}, {} time)",
        c.name,
        t.location(),
        c.version,
        c.bucket.map_or(0, |b| b.num_buckets),
        c.merge_mode,
        t.time_mode().name()
    );
}

/// `timeline`: its warnings on standard error, then one line per instant.
/// `alter`: the commit that recorded the new schema, and its changes.
pub(crate) fn altered(instant: &tributary::InstantTime, changes: &[tributary::SchemaChange]) {
    println!("committed the new schema at {instant}");
    for c in changes {
        println!("  {c}");
    }
}

/// `schema`: the schema in force, as a table of columns or as Avro JSON.
pub(crate) fn schema(at: &tributary::SchemaAt, format: crate::args::SchemaFormatArg) {
    let s = &at.schema;
    match format {
        crate::args::SchemaFormatArg::Avro => println!("{}", s.full_table_json()),
        crate::args::SchemaFormatArg::Table => {
            match &at.recorded_by {
                Some(i) => println!("schema recorded by commit {i}"),
                None => println!("create schema (hoodie.properties)"),
            }
            let json: serde_json::Value = serde_json::from_str(&s.full_table_json()).unwrap_or_default();
            let fields = json.get("fields").and_then(|f| f.as_array()).cloned().unwrap_or_default();
            println!("{:<28} {:<40} {:<8} role", "column", "avro type", "nullable");
            for (i, f) in fields.iter().enumerate() {
                let name = f.get("name").and_then(|n| n.as_str()).unwrap_or("");
                let ty = &f["type"];
                let nullable = ty.as_array().is_some_and(|b| b.iter().any(|x| x.as_str() == Some("null")));
                let mut roles = Vec::new();
                if s.is_key(i) {
                    roles.push("record key");
                }
                if s.is_ordering(i) {
                    roles.push("ordering");
                }
                if s.partition_index() == Some(i) {
                    roles.push("partition");
                }
                println!(
                    "{name:<28} {:<40} {:<8} {}",
                    ty.to_string(),
                    if nullable { "yes" } else { "no" },
                    roles.join(", ")
                );
            }
        }
    }
}

pub(crate) fn timeline(timeline: &Timeline) {
    for w in timeline.warnings() {
        eprintln!("warning: {w}");
    }
    for i in timeline.instants() {
        let line = format!(
            "{}  {:<14} {:<10} {}",
            i.requested,
            i.action.name(),
            i.state,
            i.completed.as_ref().map_or("-".to_string(), |c| c.to_string())
        );
        // Instants a Java writer archived into the LSM history.
        if timeline.is_archived(&i.requested) { println!("{line}  archived") } else { println!("{line}") }
    }
}

/// `write`: what was written, how fast, and as which writer.
pub(crate) fn written(
    s: &JsonLinesSummary,
    secs: f64,
    writer_id: &str,
    generation: u64,
    checkpoint: Option<&str>,
    registered: bool,
) {
    let JsonLinesSummary { instants, records, stored, files, bytes, .. } = *s;
    let committed = match (checkpoint, registered) {
        (Some(cp), _) => format!("; checkpoint `{cp}` committed as writer `{writer_id}` (generation {generation})"),
        (None, true) => format!("; as writer `{writer_id}` (generation {generation})"),
        (None, false) => String::new(),
    };
    // Of a key's versions in one commit, only the one the merge keeps is
    // stored (see `WriteSettings::combine`).
    let combined = match records - stored.min(records) {
        0 => String::new(),
        n => format!(" ({stored} stored: {n} were older versions of a key in the same commit)"),
    };
    println!(
        "wrote {records} records{combined} in {instants} instants: {files} files, {bytes} bytes, {secs:.2} s ({:.0} \
         records/s){committed}",
        records as f64 / secs.max(1e-9)
    );
}

/// `checkpoint`: the checkpoint alone, or the writer id's status as JSON.
pub(crate) fn checkpoint(status: &WriterStatus, format: CheckpointFormatArg) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match format {
        CheckpointFormatArg::Plain => {
            if let Some(c) = &status.checkpoint {
                writeln!(out, "{}", c.checkpoint)?;
            }
        }
        CheckpointFormatArg::Json => {
            let c = status.checkpoint.as_ref();
            let doc = serde_json::json!({
                "writer_id": status.writer_id,
                "checkpoint": c.map(|c| c.checkpoint.as_str()),
                "instant": c.map(|c| c.instant.as_str()),
                "completed": c.and_then(|c| c.completed.as_ref()).map(|t| t.as_str()),
                "generation": status.generation,
            });
            writeln!(out, "{doc}")?;
        }
    }
    out.flush()?;
    Ok(())
}

/// `compact`: one round's compactions.
pub(crate) fn compacted(done: &[CompactionSummary], secs: f64) {
    if done.is_empty() {
        println!("nothing to compact");
    }
    for s in done {
        println!(
            "compaction {} completed {}: {} groups ({} key first, {} spilled), {} records, {} tombstones kept, {} \
             bytes read, {} bytes written, {secs:.2} s",
            s.instant,
            s.completed,
            s.groups,
            s.key_first_groups,
            s.spilled_groups,
            s.records,
            s.tombstones,
            s.bytes_read,
            s.bytes_written + s.tombstone_bytes
        );
    }
}

/// `clean`: what was removed.
pub(crate) fn cleaned(summary: Option<&CleanSummary>) {
    match summary {
        None => println!("nothing to clean"),
        Some(s) => println!(
            "clean {} completed {}: {} files deleted, earliest retained commit {}",
            s.instant,
            s.completed,
            s.deleted_files.len(),
            if s.earliest_commit_to_retain.is_empty() { "-" } else { &s.earliest_commit_to_retain }
        ),
    }
}

/// `change-log`: what one round recorded.
pub(crate) fn change_logged(done: Option<&tributary::ChangeLogCommit>, secs: f64) {
    match done {
        None => println!("nothing to record"),
        Some(c) => println!(
            "change log {} completed {}: {} changes since {} in {} files, {} bytes, {secs:.2} s",
            c.instant, c.completed, c.changes, c.begin, c.files, c.bytes
        ),
    }
}

/// `serve`: one job of one table's services, a line each (a compaction
/// or clean that found nothing to do prints nothing).
pub(crate) fn service_event(table: &str, event: &ServiceEvent) {
    match event {
        ServiceEvent::Compacted { done, .. } if done.is_empty() => {}
        ServiceEvent::Compacted { done, .. } => {
            let groups: usize = done.iter().map(|c| c.groups).sum();
            println!("{table}: compacted {groups} file groups in {} compactions", done.len());
        }
        ServiceEvent::Cleaned { done: None, .. } => {}
        ServiceEvent::Cleaned { done: Some(c), .. } => println!("{table}: cleaned {} files", c.deleted_files.len()),
        ServiceEvent::Archived { done: a, .. } if a.archived.is_empty() => {}
        ServiceEvent::Archived { done: a, .. } => println!("{table}: archived {} instants", a.archived.len()),
        ServiceEvent::ChangeLogged { done: None, .. } => {}
        ServiceEvent::ChangeLogged { done: Some(c), .. } => {
            println!("{table}: change log {}: {} changes in {} files", c.instant, c.changes, c.files)
        }
        ServiceEvent::Failed { job, error } => eprintln!("{table}: {job} failed (retried next round): {error}"),
        _ => {}
    }
}

/// `serve`: what one table's services did, at the stop.
pub(crate) fn service_report(table: &str, r: &ServiceReport) {
    println!(
        "{table}: stopped after {} compaction rounds, {} cleans, {} archivings ({} failed)",
        r.compactions, r.cleans, r.archives, r.failures
    );
}

/// `archive`: what went into the history, and what kept the rest.
pub(crate) fn archived(s: &ArchiveSummary) {
    match (s.archived.first(), s.archived.last(), &s.history_file) {
        (Some(first), Some(last), Some(file)) => {
            println!("archived {} instants ({} to {}) into {file}", s.archived.len(), first.requested, last.requested)
        }
        _ => println!("nothing to archive"),
    }
    if let Some(r) = &s.retained {
        println!("kept from {}: {}", r.instant(), r.reason());
    }
    if !s.history.merged_into.is_empty() || s.history.deleted > 0 {
        println!("history: merged into {:?}, {} old files deleted", s.history.merged_into, s.history.deleted);
    }
}

/// `read`: the rows in the format asked for.
pub(crate) fn rows(batch: RecordBatch, format: FormatArg) -> Result<(), Failure> {
    let mut sink = Rows::new(batch.schema(), format, None)?;
    sink.write(&batch)?;
    sink.finish()
}

/// Rows written as they come, in the format asked for, to standard output
/// or a file; an aligned table is written once every row has come (its
/// widths need them all), Parquet only to a file.
pub(crate) enum Rows {
    Jsonl(arrow::json::LineDelimitedWriter<Box<dyn Write>>),
    Csv(arrow::csv::Writer<Box<dyn Write>>),
    Table(Vec<RecordBatch>, Box<dyn Write>),
    Parquet(parquet::arrow::ArrowWriter<std::fs::File>),
}

use tributary::arrow;

impl Rows {
    /// A writer of rows of `schema` in `format` to `output`, else standard
    /// output.
    pub(crate) fn new(
        schema: arrow::datatypes::SchemaRef,
        format: FormatArg,
        output: Option<std::path::PathBuf>,
    ) -> Result<Self, Failure> {
        let open = |path: &std::path::Path| {
            std::fs::File::create(path).map_err(|e| Failure::Output(format!("creating {}: {e}", path.display()).into()))
        };
        let out: Box<dyn Write> = match (&output, format) {
            (_, FormatArg::Parquet) => {
                let Some(path) = &output else {
                    return Err(Failure::Table(tributary::Error::InvalidInput {
                        what: "--format parquet".into(),
                        reason: "Parquet goes to a file: give --output FILE".into(),
                    }));
                };
                let w = parquet::arrow::ArrowWriter::try_new(open(path)?, schema, None)
                    .map_err(|e| Failure::Output(e.into()))?;
                return Ok(Rows::Parquet(w));
            }
            (Some(path), _) => Box::new(std::io::BufWriter::new(open(path)?)),
            (None, _) => Box::new(std::io::BufWriter::new(std::io::stdout())),
        };
        Ok(match format {
            FormatArg::Jsonl => Rows::Jsonl(arrow::json::LineDelimitedWriter::new(out)),
            FormatArg::Csv => Rows::Csv(arrow::csv::Writer::new(out)),
            FormatArg::Table | FormatArg::Parquet => Rows::Table(Vec::new(), out),
        })
    }

    /// Writes `batch`.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<(), Failure> {
        match self {
            Rows::Jsonl(w) => w.write(batch)?,
            Rows::Csv(w) => w.write(batch)?,
            Rows::Table(all, _) => all.push(batch.clone()),
            Rows::Parquet(w) => w.write(batch).map_err(|e| Failure::Output(e.into()))?,
        }
        Ok(())
    }

    /// Writes what is left and flushes.
    pub(crate) fn finish(self) -> Result<(), Failure> {
        match self {
            Rows::Jsonl(mut w) => {
                w.finish()?;
                w.into_inner().flush()?;
            }
            Rows::Csv(w) => w.into_inner().flush()?,
            Rows::Table(all, mut out) => {
                writeln!(out, "{}", arrow::util::pretty::pretty_format_batches(&all)?)?;
                out.flush()?;
            }
            Rows::Parquet(w) => {
                w.close().map_err(|e| Failure::Output(e.into()))?;
            }
        }
        Ok(())
    }
}
