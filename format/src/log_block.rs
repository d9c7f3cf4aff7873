//! The HOODIE_LOG block format (format notes §5), big-endian throughout:
//!
//! ```text
//! "#HUDI#"  i64 blockSize  i32 formatVersion=1  i32 blockType
//! header: i32 count, count × (i32 key, i32 len, utf8)
//! i64 contentLength  content
//! footer: same map encoding (writers emit count 0)
//! i64 reversePointer = blockSize + 6
//! ```
//!
//! `blockSize` counts everything after itself. Headers keep their order, so
//! a decoded block re-encodes to the same bytes.

use crate::error::{Error, Result};

/// The block magic.
pub(crate) const MAGIC: &[u8; 6] = b"#HUDI#";
/// `HoodieLogFormat.CURRENT_VERSION`.
pub(crate) const LOG_FORMAT_VERSION: i32 = 1;
/// Content version of data and delete blocks.
pub const CONTENT_VERSION: i32 = 3;

/// Block types (`HoodieLogBlockType` ordinals).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockType {
    /// Rollback command.
    Command = 0,
    /// Deleted keys.
    Delete = 1,
    /// Corrupt bytes.
    Corrupt = 2,
    /// Avro records.
    AvroData = 3,
    /// HFile records.
    HFileData = 4,
    /// A Parquet file.
    ParquetData = 5,
    /// Change-data-capture records.
    CdcData = 6,
}

impl BlockType {
    fn from_i32(v: i32) -> Option<Self> {
        Some(match v {
            0 => BlockType::Command,
            1 => BlockType::Delete,
            2 => BlockType::Corrupt,
            3 => BlockType::AvroData,
            4 => BlockType::HFileData,
            5 => BlockType::ParquetData,
            6 => BlockType::CdcData,
            _ => return None,
        })
    }
}

/// Header keys (`HeaderMetadataType` ordinals).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HeaderKey {
    /// The instant that wrote the block.
    InstantTime = 0,
    /// The instant a command block targets.
    TargetInstantTime = 1,
    /// Writer Avro schema JSON, meta fields first.
    Schema = 2,
    /// Command type (`"0"`: rollback).
    CommandBlockType = 3,
    /// Instants compacted into the block.
    CompactedBlockTimes = 4,
    /// Roaring bitmap of base-file positions.
    RecordPositions = 5,
    /// Spark retry dedupe id.
    BlockIdentifier = 6,
    /// `"true"` for partial-schema blocks.
    IsPartial = 7,
    /// Base instant the positions refer to.
    BaseFileInstantTimeOfRecordPositions = 8,
}

impl HeaderKey {
    fn from_i32(v: i32) -> Option<Self> {
        Some(match v {
            0 => HeaderKey::InstantTime,
            1 => HeaderKey::TargetInstantTime,
            2 => HeaderKey::Schema,
            3 => HeaderKey::CommandBlockType,
            4 => HeaderKey::CompactedBlockTimes,
            5 => HeaderKey::RecordPositions,
            6 => HeaderKey::BlockIdentifier,
            7 => HeaderKey::IsPartial,
            8 => HeaderKey::BaseFileInstantTimeOfRecordPositions,
            _ => return None,
        })
    }
}

/// One decoded (or to-be-encoded) log block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBlock {
    /// Its type.
    pub block_type: BlockType,
    /// Header entries, in file order.
    pub header: Vec<(HeaderKey, String)>,
    /// Raw content bytes (a slice of the file's bytes when decoded).
    pub content: bytes::Bytes,
    /// Footer entries, in file order.
    pub footer: Vec<(HeaderKey, String)>,
}

fn put_map(out: &mut Vec<u8>, map: &[(HeaderKey, String)]) {
    out.extend_from_slice(&(map.len() as i32).to_be_bytes());
    for (k, v) in map {
        out.extend_from_slice(&(*k as i32).to_be_bytes());
        out.extend_from_slice(&(v.len() as i32).to_be_bytes());
        out.extend_from_slice(v.as_bytes());
    }
}

impl LogBlock {
    /// The header value of `key`, if present.
    pub fn header(&self, key: HeaderKey) -> Option<&str> {
        self.header.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
    }

    /// Appends the encoded block to `out` (a reused buffer); returns the
    /// number of bytes written.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> usize {
        let open = begin_block(out, self.block_type, &self.header);
        out.extend_from_slice(&self.content);
        finish_block(out, open, &self.footer)
    }

    /// Decodes every block of a log file. `path` names the file in errors.
    /// Block contents are slices of `bytes`, not copies.
    pub fn decode_all(bytes: &bytes::Bytes, path: &str) -> Result<Vec<LogBlock>> {
        let mut blocks = Vec::new();
        let mut pos = 0usize;
        while pos < bytes.len() {
            let len = Self::framed_len(&bytes[pos..], pos as u64, path)?;
            let end = pos.checked_add(len).filter(|e| *e <= bytes.len()).ok_or_else(|| Error::CorruptLog {
                path: path.to_string(),
                offset: pos as u64,
                reason: format!("block of {len} bytes runs past the end of the file"),
            })?;
            blocks.push(Self::decode_framed(bytes.slice(pos..end), pos as u64, path)?);
            pos = end;
        }
        Ok(blocks)
    }

    /// Bytes needed to see a block's length: the magic and the size field.
    pub const FRAME_PREFIX: usize = 14;

    /// The whole length (magic, size field and body) of the block whose
    /// first bytes are `head` (at least [`Self::FRAME_PREFIX`] of them), found
    /// at `offset` of the file `path`. Lets a reader fetch one block at a time.
    pub fn framed_len(head: &[u8], offset: u64, path: &str) -> Result<usize> {
        let corrupt = |reason: String| Error::CorruptLog { path: path.to_string(), offset, reason };
        let mut r = Reader { bytes: head, pos: 0 };
        if r.take(6).map_err(&corrupt)? != MAGIC {
            return Err(corrupt("missing #HUDI# magic".into()));
        }
        let block_size = r.i64().map_err(&corrupt)?;
        usize::try_from(block_size)
            .ok()
            .and_then(|s| s.checked_add(Self::FRAME_PREFIX))
            .ok_or_else(|| corrupt(format!("bad block size {block_size}")))
    }

    /// Decodes one whole block (`bytes` from its magic to its reverse
    /// pointer), found at `offset` of the file `path`.
    pub fn decode_framed(bytes: bytes::Bytes, offset: u64, path: &str) -> Result<LogBlock> {
        let corrupt = |reason: String| Error::CorruptLog { path: path.to_string(), offset, reason };
        let head = Self::decode_head(&bytes, offset, path)?;
        let head = head.ok_or_else(|| corrupt("block ends inside its header".into()))?;
        if head.framed_len != bytes.len() {
            return Err(corrupt(format!("block size {} runs past the end of the file", head.framed_len - 14)));
        }
        let content = head.content.clone();
        let footer = Self::decode_tail(&head, &bytes[content.end..], offset, path)?;
        Ok(LogBlock { block_type: head.block_type, header: head.header, content: bytes.slice(content), footer })
    }

    /// The head of the block whose first bytes are `bytes` (at least
    /// [`Self::FRAME_PREFIX`] of them), found at `offset` of the file `path`:
    /// its type, header and where its content lies. `None` when `bytes` end
    /// before the head does. Lets a reader stream a large block's content
    /// rather than hold all of it.
    pub fn decode_head(bytes: &[u8], offset: u64, path: &str) -> Result<Option<BlockHead>> {
        const SHORT: &str = "unexpected end of file";
        let corrupt = |reason: String| Error::CorruptLog { path: path.to_string(), offset, reason };
        let framed_len = Self::framed_len(bytes, offset, path)?;
        let mut r = Reader { bytes, pos: Self::FRAME_PREFIX };
        let parsed = (|| {
            let version = r.i32()?;
            if version != LOG_FORMAT_VERSION {
                return Err(format!("unsupported log format version {version}"));
            }
            let type_code = r.i32()?;
            let block_type = BlockType::from_i32(type_code).ok_or_else(|| format!("unknown block type {type_code}"))?;
            let header = r.map()?;
            let content_len = r.i64()?;
            let content_len =
                usize::try_from(content_len).map_err(|_| format!("negative content length {content_len}"))?;
            Ok((block_type, header, content_len))
        })();
        match parsed {
            Ok((block_type, header, content_len)) => {
                let content = r.pos..r.pos.saturating_add(content_len);
                if content.end > framed_len {
                    return Err(corrupt(format!("content of {content_len} bytes runs past the block")));
                }
                Ok(Some(BlockHead { block_type, header, content, framed_len }))
            }
            Err(e) if e == SHORT && bytes.len() < framed_len => Ok(None),
            Err(e) => Err(corrupt(e)),
        }
    }

    /// Checks the bytes of a block after its content (`tail`: the footer
    /// and the reverse pointer) against its head; returns the footer.
    pub fn decode_tail(head: &BlockHead, tail: &[u8], offset: u64, path: &str) -> Result<Vec<(HeaderKey, String)>> {
        let corrupt = |reason: String| Error::CorruptLog { path: path.to_string(), offset, reason };
        let mut r = Reader { bytes: tail, pos: 0 };
        let footer = r.map().map_err(&corrupt)?;
        let reverse = r.i64().map_err(&corrupt)?;
        let block_size = (head.framed_len - Self::FRAME_PREFIX) as i64;
        if r.pos != tail.len() || reverse != block_size + 6 {
            return Err(corrupt(format!(
                "block size {block_size} and reverse pointer {reverse} disagree with the content"
            )));
        }
        Ok(footer)
    }
}

/// What [`LogBlock::decode_head`] reads of a block before its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockHead {
    /// The block's type.
    pub block_type: BlockType,
    /// Header entries, in file order.
    pub header: Vec<(HeaderKey, String)>,
    /// Where the content lies, in bytes from the block's magic.
    pub content: std::ops::Range<usize>,
    /// The whole block's length (magic, size field and body).
    pub framed_len: usize,
}

impl BlockHead {
    /// The header value of `key`, if present.
    pub fn header(&self, key: HeaderKey) -> Option<&str> {
        self.header.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_str())
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.bytes.len()).ok_or("unexpected end of file")?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn i32(&mut self) -> std::result::Result<i32, String> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> std::result::Result<i64, String> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    fn map(&mut self) -> std::result::Result<Vec<(HeaderKey, String)>, String> {
        let count = self.i32()?;
        if count < 0 {
            return Err(format!("negative header count {count}"));
        }
        (0..count)
            .map(|_| {
                let k = self.i32()?;
                let key = HeaderKey::from_i32(k).ok_or_else(|| format!("unknown header key {k}"))?;
                let len = usize::try_from(self.i32()?).map_err(|_| "negative header length".to_string())?;
                let v = std::str::from_utf8(self.take(len)?).map_err(|e| format!("header {key:?}: {e}"))?;
                Ok((key, v.to_string()))
            })
            .collect()
    }
}

/// A block being written in place: see [`begin_block`].
#[derive(Debug, Clone, Copy)]
pub struct OpenBlock {
    start: usize,
    content_len_at: usize,
}

/// Starts a block in `out`: magic, size placeholder, version, type and
/// header. Append the content directly to `out`, then call [`finish_block`];
/// nothing is copied twice.
pub fn begin_block(out: &mut Vec<u8>, block_type: BlockType, header: &[(HeaderKey, String)]) -> OpenBlock {
    let start = out.len();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[0u8; 8]);
    out.extend_from_slice(&LOG_FORMAT_VERSION.to_be_bytes());
    out.extend_from_slice(&(block_type as i32).to_be_bytes());
    put_map(out, header);
    let content_len_at = out.len();
    out.extend_from_slice(&[0u8; 8]);
    OpenBlock { start, content_len_at }
}

/// Ends a block begun with [`begin_block`]: footer, reverse pointer, and the
/// sizes patched in. Returns the block's length in bytes.
pub fn finish_block(out: &mut Vec<u8>, open: OpenBlock, footer: &[(HeaderKey, String)]) -> usize {
    let content_len = (out.len() - open.content_len_at - 8) as i64;
    out[open.content_len_at..open.content_len_at + 8].copy_from_slice(&content_len.to_be_bytes());
    put_map(out, footer);
    let block_size = (out.len() + 8 - (open.start + 14)) as i64;
    out[open.start + 6..open.start + 14].copy_from_slice(&block_size.to_be_bytes());
    out.extend_from_slice(&(block_size + 6).to_be_bytes());
    out.len() - open.start
}

/// Content of an AVRO_DATA block: version 3, count, then length-prefixed
/// Avro binary records. Appends to `out`.
pub(crate) fn encode_avro_content<'a>(records: impl ExactSizeIterator<Item = &'a [u8]>, out: &mut Vec<u8>) {
    let mut content = AvroContent::begin(out);
    for r in records {
        let at = content.start_record(out);
        out.extend_from_slice(r);
        content.end_record(out, at);
    }
    content.finish(out);
}

/// AVRO_DATA content written record by record straight into `out`, when
/// the records are not at hand as slices (a writer assembles each one from
/// parts): version 3, a count filled in by [`AvroContent::finish`], then
/// each record's length and bytes.
#[derive(Debug)]
pub struct AvroContent {
    count_at: usize,
    records: i32,
}

impl AvroContent {
    /// Starts the content at the end of `out`.
    pub fn begin(out: &mut Vec<u8>) -> Self {
        out.extend_from_slice(&CONTENT_VERSION.to_be_bytes());
        let count_at = out.len();
        out.extend_from_slice(&[0u8; 4]);
        Self { count_at, records: 0 }
    }

    /// Starts a record: reserves its length. Append its Avro binary to
    /// `out`, then call [`AvroContent::end_record`] with the returned
    /// position.
    #[inline]
    pub fn start_record(&mut self, out: &mut Vec<u8>) -> usize {
        let at = out.len();
        out.extend_from_slice(&[0u8; 4]);
        at
    }

    /// Ends the record started at `at`: fills in its length.
    #[inline]
    pub fn end_record(&mut self, out: &mut [u8], at: usize) {
        let len = (out.len() - at - 4) as i32;
        out[at..at + 4].copy_from_slice(&len.to_be_bytes());
        self.records += 1;
    }

    /// Records written so far.
    pub fn records(&self) -> usize {
        self.records as usize
    }

    /// Ends the content: fills in the record count.
    pub fn finish(self, out: &mut [u8]) {
        out[self.count_at..self.count_at + 4].copy_from_slice(&self.records.to_be_bytes());
    }
}

/// Splits AVRO_DATA content into its records' Avro binary slices.
pub fn decode_avro_content<'a>(content: &'a [u8], path: &str) -> Result<Vec<&'a [u8]>> {
    Ok(avro_record_ranges(content, path)?.into_iter().map(|r| &content[r]).collect())
}

/// The record count of AVRO_DATA `content` and where its first record's
/// length prefix starts (after the content version and the count).
pub fn avro_record_count(content: &[u8], path: &str) -> Result<(usize, usize)> {
    let corrupt = |reason: String| Error::CorruptLog {
        path: path.to_string(),
        offset: 0,
        reason: format!("data block: {reason}"),
    };
    let mut r = Reader { bytes: content, pos: 0 };
    let version = r.i32().map_err(&corrupt)?;
    if version != CONTENT_VERSION {
        return Err(corrupt(format!("unsupported content version {version}")));
    }
    let count = usize::try_from(r.i32().map_err(&corrupt)?).map_err(|_| corrupt("negative record count".into()))?;
    Ok((count, r.pos))
}

/// The record whose length prefix starts at `*pos` in AVRO_DATA content;
/// moves `*pos` past it.
pub fn next_avro_record<'a>(content: &'a [u8], pos: &mut usize) -> std::result::Result<&'a [u8], String> {
    let mut r = Reader { bytes: content, pos: *pos };
    let len = usize::try_from(r.i32()?).map_err(|_| "negative record length".to_string())?;
    let record = r.take(len)?;
    *pos = r.pos;
    Ok(record)
}

/// The byte ranges of AVRO_DATA content's records (after their length
/// prefixes), for callers that keep the content as shared bytes.
pub(crate) fn avro_record_ranges(content: &[u8], path: &str) -> Result<Vec<std::ops::Range<usize>>> {
    let (count, mut pos) = avro_record_count(content, path)?;
    let mut out = Vec::with_capacity(count.min(content.len() / 4));
    for i in 0..count {
        let record = next_avro_record(content, &mut pos).map_err(|reason| Error::CorruptLog {
            path: path.to_string(),
            offset: 0,
            reason: format!("data block record {}: {reason}", i + 1),
        })?;
        out.push(pos - record.len()..pos);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key() -> impl Strategy<Value = HeaderKey> {
        (0i32..9).prop_map(|k| HeaderKey::from_i32(k).unwrap())
    }

    proptest! {
        #[test]
        fn blocks_round_trip(t in 0i32..7, header in prop::collection::vec((key(), ".{0,20}"), 0..4),
                             content in prop::collection::vec(any::<u8>(), 0..200), n in 1usize..4) {
            let block = LogBlock { block_type: BlockType::from_i32(t).unwrap(), header, content: content.into(), footer: vec![] };
            let mut bytes = Vec::new();
            for _ in 0..n {
                block.encode_into(&mut bytes);
            }
            let back = LogBlock::decode_all(&bytes.into(), "x.log").unwrap();
            prop_assert_eq!(back.len(), n);
            prop_assert_eq!(&back[0], &block);
        }

        #[test]
        fn truncated_or_garbled_files_are_errors_not_panics(cut in 0usize..100, flip in 0usize..100) {
            let block = LogBlock { block_type: BlockType::AvroData, header: vec![(HeaderKey::InstantTime, "20250101000000000".into())], content: vec![1, 2, 3].into(), footer: vec![] };
            let mut bytes = Vec::new();
            block.encode_into(&mut bytes);
            let full = bytes.len();
            let mut garbled = bytes.clone();
            garbled[flip % full] ^= 0xff;
            let _ = LogBlock::decode_all(&garbled.into(), "x.log");
            bytes.truncate(cut % full);
            if !bytes.is_empty() {
                let err = LogBlock::decode_all(&bytes.into(), "x.log").unwrap_err().to_string();
                prop_assert!(err.contains("x.log"), "{}", err);
            }
        }
    }

    #[test]
    fn heads_read_from_a_prefix_and_check_the_content_length() {
        let block = LogBlock {
            block_type: BlockType::AvroData,
            header: vec![(HeaderKey::InstantTime, "20250101000000000".into())],
            content: vec![7; 40].into(),
            footer: vec![],
        };
        let mut bytes = Vec::new();
        block.encode_into(&mut bytes);
        let head = LogBlock::decode_head(&bytes[..60], 0, "x.log").unwrap().unwrap();
        assert_eq!(head.header(HeaderKey::InstantTime), Some("20250101000000000"));
        assert_eq!(&bytes[head.content.clone()], &[7; 40][..]);
        LogBlock::decode_tail(&head, &bytes[head.content.end..], 0, "x.log").unwrap();
        // A prefix that ends inside the header asks for more bytes.
        assert_eq!(LogBlock::decode_head(&bytes[..20], 0, "x.log").unwrap(), None);
        // A content length past the block is an error naming the file.
        let at = head.content.start - 8;
        bytes[at..at + 8].copy_from_slice(&1000i64.to_be_bytes());
        let err = LogBlock::decode_head(&bytes, 0, "x.log").unwrap_err().to_string();
        assert!(err.contains("x.log") && err.contains("runs past the block"), "{err}");
    }

    #[test]
    fn avro_content_round_trips() {
        let recs: Vec<&[u8]> = vec![b"ab", b"", b"xyz"];
        let mut out = Vec::new();
        encode_avro_content(recs.iter().copied(), &mut out);
        assert_eq!(decode_avro_content(&out, "f").unwrap(), recs);
    }
}
