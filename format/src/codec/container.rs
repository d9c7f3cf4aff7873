//! A data block's records as an in-memory Avro object container file,
//! which arrow-avro's reader decodes, handed out piece by piece.

use std::io::BufRead;
use std::ops::Range;

use bytes::Bytes;

use crate::schema::put_long;

/// The records of a data block presented as an in-memory Avro object
/// container file, produced piece by piece as the reader pulls it: a header,
/// then per container block of at most `batch_rows` records its count and
/// size, the records themselves (read in place from the block's bytes) and
/// the sync marker. The reader buffers one container block at a time, so
/// memory follows a batch rather than a copy of the whole block.
pub(crate) struct ContainerStream {
    content: Bytes,
    records: Vec<Range<usize>>,
    batch_rows: usize,
    /// Next record to hand out.
    next: usize,
    /// End (exclusive) of the container block being handed out.
    chunk_end: usize,
    /// Whether the current container block still needs its sync marker.
    needs_sync: bool,
    current: Piece,
    pos: usize,
}

/// What a [`ContainerStream`] is handing out.
enum Piece {
    Owned(Vec<u8>),
    Record(Range<usize>),
    Sync,
}

/// The sync marker of the in-memory container files.
const SYNC: [u8; 16] = [0x5a; 16];

impl ContainerStream {
    pub(super) fn new(writer_json: &str, content: Bytes, records: Vec<Range<usize>>, batch_rows: usize) -> Self {
        let header = crate::schema::ocf_header(writer_json, &SYNC);
        Self {
            content,
            records,
            batch_rows,
            next: 0,
            chunk_end: 0,
            needs_sync: false,
            current: Piece::Owned(header),
            pos: 0,
        }
    }

    fn piece(&self) -> &[u8] {
        match &self.current {
            Piece::Owned(v) => v,
            Piece::Record(r) => &self.content[r.clone()],
            Piece::Sync => &SYNC,
        }
    }

    /// The piece after the current one, or `None` at the end.
    fn advance(&mut self) -> Option<Piece> {
        if self.next < self.chunk_end {
            self.next += 1;
            return Some(Piece::Record(self.records[self.next - 1].clone()));
        }
        if self.needs_sync {
            self.needs_sync = false;
            return Some(Piece::Sync);
        }
        if self.next >= self.records.len() {
            return None;
        }
        self.chunk_end = (self.next + self.batch_rows).min(self.records.len());
        self.needs_sync = true;
        let chunk = &self.records[self.next..self.chunk_end];
        let mut head = Vec::with_capacity(20);
        put_long(&mut head, chunk.len() as i64);
        put_long(&mut head, chunk.iter().map(|r| r.len()).sum::<usize>() as i64);
        Some(Piece::Owned(head))
    }
}

impl std::io::Read for ContainerStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for ContainerStream {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        while self.pos >= self.piece().len() {
            match self.advance() {
                Some(piece) => {
                    self.current = piece;
                    self.pos = 0;
                }
                None => return Ok(&[]),
            }
        }
        let pos = self.pos;
        Ok(&self.piece()[pos..])
    }

    fn consume(&mut self, amount: usize) {
        self.pos += amount;
    }
}
