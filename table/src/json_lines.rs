//! Ingesting JSON lines (one object per line) into a table: the input is
//! read in blocks of whole lines, decoded on blocking threads several
//! blocks at a time while the commit writes the blocks before them, and
//! written in input order, each block validated whole before anything of
//! it is written. This is what `tributary write` does with its input.

use std::collections::VecDeque;
use std::io::BufRead;
use std::sync::Arc;

use tributary_format::TableSchema;

use tributary_writer::{Commit, CommitSummary, Rows, WriteClient};

use crate::error::{Error, Result};

/// Records per block of JSON lines decoded as one piece.
const JSON_BLOCK_RECORDS: usize = 8192;

/// Options of [`write_json_lines`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonLinesOptions {
    /// Commit after this many records; by default (`None`) one commit for
    /// the whole input.
    pub commit_every: Option<usize>,
    /// The checkpoint the last commit carries (for example the source
    /// offset the input ends at), committed with the data in the same
    /// atomic step; with no records, it still advances, in an empty commit.
    /// The client's writer id should be registered first
    /// ([`Table::register_writer`](crate::Table::register_writer)).
    pub checkpoint: Option<String>,
}

/// What [`write_json_lines`] committed, summed over its commits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JsonLinesSummary {
    /// Commits made.
    pub instants: u64,
    /// Records given.
    pub records: u64,
    /// Records stored: of a key's versions in one commit, only the one the
    /// merge keeps is stored (see [`WriteSettings::combine`](crate::WriteSettings::combine)).
    pub stored: u64,
    /// Files written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Progress of a [`write_json_lines`], reported as it goes.
#[derive(Debug)]
#[non_exhaustive]
pub enum JsonLinesProgress<'a> {
    /// This many more records were written into the open commit.
    Written(u64),
    /// A commit completed.
    Committed(&'a CommitSummary),
}

/// Writes the JSON lines of `reader` (named `source` in messages) through
/// `client`, committing every [`JsonLinesOptions::commit_every`] records
/// and at the end, and calling `progress` as records are written and
/// commits complete. Blank lines are skipped.
///
/// A line that cannot be read or decoded fails the commit it belongs to:
/// that commit is aborted, and the error ([`Error::CommitAborted`]) says
/// nothing of it was written; commits completed before it stay.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> tributary_table::Result<()> {
/// use tributary_table::{CreateOptions, JsonLinesOptions, ReadOptions, Table, WriteSettings, write_json_lines};
///
/// let dir = std::env::temp_dir().join(format!("tributary-doc-jsonl-{}", std::process::id()));
/// let schema = r#"{"type":"record","name":"r","fields":[{"name":"id","type":"string"},{"name":"ts","type":"long"}]}"#;
/// let table = Table::create_local(&dir, CreateOptions::new(schema, "id", "ts")).await?;
/// let client = table.write_client(WriteSettings::default()).await?;
/// let input = "{\"id\":\"a\",\"ts\":1}\n\n{\"id\":\"b\",\"ts\":2}\n{\"id\":\"a\",\"ts\":3}\n";
/// let options = JsonLinesOptions { commit_every: Some(2), ..Default::default() };
/// let summary = write_json_lines(&client, input.as_bytes(), "input", &options, |_| {}).await?;
/// assert_eq!((summary.records, summary.instants), (3, 2));
/// assert_eq!(table.read(&ReadOptions::default()).await?.num_rows(), 2);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(()) }
/// ```
pub async fn write_json_lines<R: BufRead>(
    client: &WriteClient,
    reader: R,
    source: &str,
    options: &JsonLinesOptions,
    mut progress: impl FnMut(JsonLinesProgress<'_>),
) -> Result<JsonLinesSummary> {
    let limit = options.commit_every.unwrap_or(usize::MAX).max(1);
    let mut checkpoint = options.checkpoint.clone();
    let evolve = client.evolves();
    let mut client = client.clone();
    let mut schema = client.schema().clone();
    let mut commit: Option<Commit> = None;
    let mut summary = JsonLinesSummary::default();
    let mut count = |s: CommitSummary, progress: &mut dyn FnMut(JsonLinesProgress<'_>)| {
        summary.instants += 1;
        summary.records += s.rows;
        summary.stored += s.records();
        summary.files += s.files.len() as u64;
        summary.bytes += s.bytes();
        progress(JsonLinesProgress::Committed(&s));
    };
    // Blocks of lines are decoded on blocking threads, several at a time,
    // while the commit writes the ones before them; they are written in
    // input order, each validated whole before anything of it is written.
    let depth = std::thread::available_parallelism().map_or(2, |n| n.get()) + 1;
    let mut lines = JsonLines { reader, source: source.to_string(), next_line: 1 };
    let mut queue: VecDeque<Decoded> = VecDeque::new();
    let (mut assigned, mut at_end) = (0usize, false);
    loop {
        // Reading stops at the end of a commit until it is committed: the
        // input may be a stream (a pipe), whose next lines may be long in
        // coming, and what was read must not wait for them.
        let commit_ready =
            |q: &VecDeque<Decoded>| q.iter().any(|d| matches!(d, Decoded::Block { ends_commit: true, .. }));
        while !at_end && queue.len() < depth && !commit_ready(&queue) {
            match lines.next_block((limit - assigned).min(JSON_BLOCK_RECORDS)) {
                Ok(Some(block)) => {
                    assigned += block.records;
                    let ends_commit = assigned >= limit;
                    if ends_commit {
                        assigned = 0;
                    }
                    let text: Arc<str> = block.text.into();
                    let rows = decode(&schema, &text, source, block.first_line, evolve);
                    let (records, first_line) = (block.records, block.first_line);
                    queue.push_back(Decoded::Block { rows, records, ends_commit, text, first_line });
                }
                Ok(None) => at_end = true,
                Err(e) => {
                    queue.push_back(Decoded::Failed(e));
                    at_end = true;
                }
            }
        }
        let Some(next) = queue.pop_front() else { break };
        let decoded = match next {
            Decoded::Failed(e) => Err(e),
            Decoded::Block { rows, records, ends_commit, text, first_line } => match rows.await {
                Ok(Ok(Outcome::Rows(rows))) => Ok((rows, records, ends_commit)),
                Ok(Ok(Outcome::Evolve(columns))) => {
                    // The input gained columns: what was written under the
                    // schema before them is committed, the client evolves,
                    // and this block and the ones decoded after it are
                    // decoded again in the new schema.
                    if let Some(c) = commit.take() {
                        count(c.commit().await?, &mut progress);
                    }
                    client = evolve_for_columns(&client, &columns)?;
                    schema = client.schema().clone();
                    let again = Decoded::Block {
                        rows: decode(&schema, &text, source, first_line, evolve),
                        records,
                        ends_commit,
                        text,
                        first_line,
                    };
                    let rest: Vec<Decoded> = queue.drain(..).collect();
                    queue.push_back(again);
                    for d in rest {
                        queue.push_back(match d {
                            Decoded::Block { rows, records, ends_commit, text, first_line } => {
                                rows.abort();
                                let rows = decode(&schema, &text, source, first_line, evolve);
                                Decoded::Block { rows, records, ends_commit, text, first_line }
                            }
                            failed => failed,
                        });
                    }
                    continue;
                }
                Ok(Err(e)) => Err(Error::from(e)),
                Err(e) => Err(Error::TaskFailed { what: format!("decoding {source}"), reason: e.to_string() }),
            },
        };
        let (rows, n, ends_commit) = match decoded {
            Ok(d) => d,
            Err(e) => {
                if let Some(c) = commit.take() {
                    c.abort().await?;
                }
                return Err(Error::CommitAborted(Box::new(e)));
            }
        };
        if n > 0 {
            let c = match commit.as_mut() {
                Some(c) => c,
                None => commit.insert(client.start_commit().await?),
            };
            c.write(rows).await?;
            progress(JsonLinesProgress::Written(n as u64));
        }
        if ends_commit && let Some(c) = commit.take() {
            count(c.commit().await?, &mut progress);
        }
    }
    // The end of the input: the last commit takes the checkpoint; with no
    // records, the checkpoint still advances, in an empty commit.
    let last = match commit.take() {
        Some(c) => Some(c),
        None if checkpoint.is_some() => Some(client.start_commit().await?),
        None => None,
    };
    if let Some(c) = last {
        count(c.commit_with_checkpoint(checkpoint.take()).await?, &mut progress);
    }
    Ok(summary)
}

/// A block of JSON lines: its text, its first line's number, its records
/// (non-blank lines).
struct JsonBlock {
    text: String,
    first_line: usize,
    records: usize,
}

/// A block on its way to the commit: decoding, or the input's failure,
/// reported when the blocks before it are written.
enum Decoded {
    Block {
        rows: tokio::task::JoinHandle<tributary_writer::Result<Outcome>>,
        records: usize,
        ends_commit: bool,
        /// The block's text, decoded again should the schema evolve.
        text: Arc<str>,
        first_line: usize,
    },
    Failed(Error),
}

/// A decoded block: its rows, or (a write that evolves the schema) the
/// changes it asks of the schema, to make before it is decoded again.
enum Outcome {
    Rows(Rows),
    Evolve(Vec<tributary_writer::InputEvolution>),
}

/// Decodes `text` on a blocking thread; with `evolve`, it first looks for
/// columns the schema lacks.
fn decode(
    schema: &Arc<TableSchema>,
    text: &Arc<str>,
    source: &str,
    first_line: usize,
    evolve: bool,
) -> tokio::task::JoinHandle<tributary_writer::Result<Outcome>> {
    let (schema, text, source) = (schema.clone(), text.clone(), source.to_string());
    tokio::task::spawn_blocking(move || {
        if evolve {
            let columns = tributary_writer::schema_evolution_in_json_lines(&schema, &text, &source, first_line)?;
            if !columns.is_empty() {
                return Ok(Outcome::Evolve(columns));
            }
        }
        tributary_writer::rows_from_json_lines(&schema, &text, &source, first_line).map(Outcome::Rows)
    })
}

/// `client` evolved as `changes` ask: each new column added as a nullable
/// column of its type at the end of the schema, each promotion made.
fn evolve_for_columns(client: &WriteClient, changes: &[tributary_writer::InputEvolution]) -> Result<WriteClient> {
    use tributary_writer::InputEvolution;
    let full = client.schema();
    if full.is_partial() {
        return Err(Error::InvalidInput {
            what: "--evolve-schema".into(),
            reason: format!(
                "a partial writer (--columns) does not change the schema; the input asks to {changes:?}: make \
                 the change with `tributary alter`, then declare the columns"
            ),
        });
    }
    let mut json = full.full_table_json();
    for change in changes {
        json = match change {
            InputEvolution::Add(name, t) => {
                tributary_format::with_added_column(&json, name, &serde_json::Value::from(*t), None)?
            }
            InputEvolution::Promote(name, t) => tributary_format::with_column_type(&json, name, t)?,
        };
    }
    Ok(client.evolved(full.with_json(&json)?)?)
}

/// The input, read in blocks of whole lines.
struct JsonLines<R> {
    reader: R,
    source: String,
    /// The number of the next line to read.
    next_line: usize,
}

impl<R: BufRead> JsonLines<R> {
    /// The next block of at most `max_records` records; `None` at the end.
    fn next_block(&mut self, max_records: usize) -> Result<Option<JsonBlock>> {
        let (first_line, mut records) = (self.next_line, 0);
        let mut text = String::with_capacity(max_records.min(JSON_BLOCK_RECORDS) * 128);
        while records < max_records {
            let start = text.len();
            // Appends the line, checking it is UTF-8 as it goes.
            let read = self.reader.read_line(&mut text).map_err(|e| self.unreadable(e))?;
            if read == 0 {
                break;
            }
            if !text[start..].trim().is_empty() {
                records += 1;
            }
            self.next_line += 1;
        }
        if text.is_empty() {
            return Ok(None);
        }
        Ok(Some(JsonBlock { text, first_line, records }))
    }

    fn unreadable(&self, e: std::io::Error) -> Error {
        Error::Io { what: format!("{} line {}: cannot read", self.source, self.next_line), source: e }
    }
}
