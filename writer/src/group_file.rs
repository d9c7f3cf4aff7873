//! The log file of one file group a writer task assembles: rows held and
//! combined, encoded into AVRO_DATA blocks of bounded size, and deletes
//! into DELETE blocks, in the input's order of each key's versions.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::array::StringArray;
use tributary_format::{AvroContent, BlockType, HeaderKey, OpenBlock, begin_block, finish_block};
use tributary_format::{DeleteRecord, MetaFields, TableDatumEncoder, TableDatums, encode_delete_block};
use tributary_merge::Combiner;
use tributary_timeline::InstantTime;

use crate::block_buffer::MIN_BLOCK_BUFFER;
use crate::error::{Error, Result};
use crate::input::Rows;
use crate::piece::Piece;
use crate::shared::Shared;

/// The log file of one bucket of one partition, assembled as rows arrive.
///
/// Where versions combine ([`Combiner`]), rows are held (by reference to
/// their pieces) and combined as they come, while their keys are still in
/// the CPU's caches, so that of a key's versions only the one the merge
/// keeps is stored; when the file is flushed, the rows kept are gathered,
/// encoded as Avro (only they are) and written. Where they do not, each
/// piece's rows (which the write encoded) are written as they come.
///
/// Records go into AVRO_DATA blocks of up to about [`BLOCK_BYTES`] each, in
/// buffers used again once the file is stored. Deletes wait for the end of
/// the file, unless a row of a key they delete comes after them: then the
/// rows held and the deletes go first, as blocks of their own, so that the
/// file keeps the input's order of every key's versions (under commit-time
/// ordering, or on a tie of event times, the later write wins).
pub(crate) struct GroupFile {
    partition: Arc<str>,
    pub(crate) file_id: String,
    meta: MetaFields,
    /// The blocks sealed so far.
    pub(crate) sealed: Vec<bytes::Bytes>,
    /// The data block being written, if any.
    open: Option<OpenData>,
    /// The rows held, combined as they came, and the pieces they are in (by
    /// the combiner's source number).
    pub(crate) held: Combiner,
    sources: Vec<Source>,
    /// The memory of the rows held (those that lost too: their pieces stay
    /// held).
    pub(crate) held_bytes: usize,
    pub(crate) records: u64,
    /// Deletes not yet in a block, and their keys.
    pub(crate) deletes: Vec<DeleteRecord>,
    pub(crate) deleted_keys: foldhash::HashSet<String>,
    /// Deletes in sealed blocks.
    pub(crate) deletes_sealed: u64,
}

/// An AVRO_DATA block being written.
struct OpenData {
    out: Vec<u8>,
    block: OpenBlock,
    content: AvroContent,
}

/// A piece whose rows a group file holds.
struct Source {
    rows: Arc<Rows>,
    keys: Arc<StringArray>,
    datums: Option<Arc<TableDatums>>,
}

/// What a task's records are written with: the block header, the sequence
/// numbers and the Avro encoder, and the client's buffers.
pub(crate) struct Encoding {
    pub(crate) shared: Arc<Shared>,
    pub(crate) instant: InstantTime,
    pub(crate) header: Vec<(HeaderKey, String)>,
    pub(crate) seqno: u64,
    /// The Avro encoder of the table columns, once the task encoded rows.
    pub(crate) encoder: Option<TableDatumEncoder>,
}

impl Encoding {
    /// The Avro datums of `rows`' table columns (`what` names them). An
    /// encoder that failed may hold part of the rows, so it is dropped.
    fn datums(&mut self, rows: &RecordBatch, what: impl FnOnce() -> String) -> Result<TableDatums> {
        let mut encoder = match self.encoder.take() {
            Some(e) => e,
            None => self.shared.take_encoder()?,
        };
        let datums = encoder.encode(rows).map_err(|cause| Error::Encode {
            table: self.shared.loc.to_string(),
            instant: self.instant.to_string(),
            input: what(),
            cause: Box::new(cause),
        })?;
        self.encoder = Some(encoder);
        Ok(datums)
    }
}

impl GroupFile {
    /// An empty log file of file group `file_id` in `partition`, its
    /// records carrying `meta`, its rows combined by `held`.
    pub(crate) fn new(partition: Arc<str>, file_id: String, meta: MetaFields, held: Combiner) -> Self {
        GroupFile {
            partition,
            file_id,
            meta,
            sealed: Vec::new(),
            open: None,
            held,
            sources: Vec::new(),
            held_bytes: 0,
            records: 0,
            deletes: Vec::new(),
            deleted_keys: Default::default(),
            deletes_sealed: 0,
        }
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.sealed.iter().map(bytes::Bytes::len).sum::<usize>()
            + self.open.as_ref().map_or(0, |o| o.out.len())
            + self.held_bytes
            + DELETE_BYTES * self.deletes.len()
    }

    /// Starts holding rows of piece `p`; its source number.
    pub(crate) fn hold(&mut self, p: &Piece) -> u32 {
        self.sources.push(Source { rows: p.rows.clone(), keys: p.keys.clone(), datums: p.datums.clone() });
        self.held.add_source(&p.keys, &p.rows.batch)
    }

    /// Writes the rows held, of each key's versions the one the combiner
    /// keeps, in write order, into data blocks, and stops holding them.
    pub(crate) fn write_held(&mut self, enc: &mut Encoding) -> Result<()> {
        let GroupFile { partition, file_id, held, sources, .. } = self;
        let at: Vec<(usize, usize)> = held.kept().iter().map(|&(s, r)| (s as usize, r as usize)).collect();
        if sources.iter().all(|s| s.datums.is_some()) {
            // Encoded as they came (every row is kept).
            let records = at.iter().map(|&(s, r)| {
                let s = &sources[s];
                (s.keys.value(r).as_bytes(), s.datums.as_deref().map_or(&[][..], |d| d.get(r)))
            });
            write_records(records, &self.meta, enc, &mut self.open, &mut self.sealed, &mut self.records);
        } else if !at.is_empty() {
            // Only the rows kept are gathered and encoded.
            let batches: Vec<&RecordBatch> = sources.iter().map(|s| &s.rows.batch).collect();
            let what = || format!("{} rows of file group {file_id} in partition `{partition}`", at.len());
            let rows = arrow::compute::interleave_record_batch(&batches, &at).map_err(|e| Error::Internal {
                table: enc.shared.loc.to_string(),
                instant: enc.instant.to_string(),
                what: format!("gathering {}", what()),
                reason: e.to_string(),
            })?;
            let datums = enc.datums(&rows, what)?;
            let keys = at.iter().map(|&(s, r)| sources[s].keys.value(r).as_bytes());
            let records = keys.zip((0..rows.num_rows()).map(|i| datums.get(i)));
            write_records(records, &self.meta, enc, &mut self.open, &mut self.sealed, &mut self.records);
        }
        self.held.clear();
        self.sources.clear();
        self.held_bytes = 0;
        Ok(())
    }

    /// Writes the rows held and seals the data block, then the waiting
    /// deletes as a DELETE block.
    pub(crate) fn seal(&mut self, enc: &mut Encoding) -> Result<()> {
        self.write_held(enc)?;
        if let Some(open) = self.open.take() {
            self.sealed.push(seal_block(open, &mut self.records));
        }
        if !self.deletes.is_empty() {
            let mut out = Vec::new();
            encode_delete_block(&self.deletes, &enc.header, &mut out);
            self.sealed.push(bytes::Bytes::from(out));
            self.deletes_sealed += self.deletes.len() as u64;
            self.deletes.clear();
            self.deleted_keys.clear();
        }
        Ok(())
    }
}

/// Writes records (key, datum), each after its meta fields, into the open
/// data block, sealing it into `sealed` whenever it is full.
fn write_records<'r>(
    input: impl Iterator<Item = (&'r [u8], &'r [u8])> + Clone,
    meta: &MetaFields,
    enc: &mut Encoding,
    open: &mut Option<OpenData>,
    sealed: &mut Vec<bytes::Bytes>,
    records: &mut u64,
) {
    let need = |seqno: u64, (key, datum): (&[u8], &[u8])| 4 + meta.max_len(seqno, key.len()) + datum.len();
    // What the records take, to size a new block's buffer: a small
    // commit's block takes little memory, a large one's grows less.
    let mut rest: usize = input.clone().map(|r| need(enc.seqno, r)).sum();
    for (key, datum) in input {
        let need = need(enc.seqno, (key, datum));
        if let Some(o) = open.take_if(|o| o.content.records() > 0 && o.out.len() + need + BLOCK_TAIL > BLOCK_BYTES) {
            sealed.push(seal_block(o, records));
        }
        let o = open.get_or_insert_with(|| {
            let want = (rest + BLOCK_TAIL).clamp(MIN_BLOCK_BUFFER, BLOCK_BYTES);
            let mut out = enc.shared.buffers.take(want);
            let block = begin_block(&mut out, BlockType::AvroData, &enc.header);
            let content = AvroContent::begin(&mut out);
            OpenData { out, block, content }
        });
        if o.out.len() + need + BLOCK_TAIL > o.out.capacity() {
            // Doubling, up to the block size: a block never moves more than
            // once per doubling and never outgrows its seal.
            let len = o.out.len() + need + BLOCK_TAIL;
            let target = (o.out.capacity() * 2).max(len).min(BLOCK_BYTES.max(len));
            o.out.reserve_exact(target - o.out.len());
        }
        let at = o.content.start_record(&mut o.out);
        meta.put(&mut o.out, enc.seqno, key);
        o.out.extend_from_slice(datum);
        o.content.end_record(&mut o.out, at);
        enc.seqno += 1;
        rest = rest.saturating_sub(need);
    }
}

/// The data block `o`, finished, its records counted into `records`.
fn seal_block(o: OpenData, records: &mut u64) -> bytes::Bytes {
    let OpenData { mut out, block, content } = o;
    *records += content.records() as u64;
    content.finish(&mut out);
    finish_block(&mut out, block, &[]);
    bytes::Bytes::from(out)
}

/// The size a data block is sealed at: large enough that its header (the
/// schema) costs little, small enough that a block buffer is reused soon.
const BLOCK_BYTES: usize = 1 << 20;

/// Room a block keeps for its footer and reverse pointer.
const BLOCK_TAIL: usize = 16;

/// What a delete costs in the memory budget (its key, partition and
/// ordering value, roughly).
pub(crate) const DELETE_BYTES: usize = 64;
