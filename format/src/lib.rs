//! Tributary's on-disk formats, with no IO of their own: the HOODIE_LOG
//! block framing ([`LogBlock`]), record encoding into and decoding out of
//! log blocks ([`DataBlockEncoder`], [`DataBlockBatches`], with the
//! columnar decoder [`ColumnDecoder`]), the table schema with its Hudi meta
//! fields ([`TableSchema`]), record keys as Hudi's key generators form them
//! ([`RecordKey`]), and the Avro metadata of timeline instants
//! ([`CommitMetadata`] and [`CompactionPlan`], [`RollbackPlan`] and
//! [`CleanMetadata`] for the table services).
//!
//! The writer, the merge (readers and compactor) and the timeline all use
//! these; none of them encodes or parses a Hudi format on its own.
//!
//! ```
//! # fn main() -> tributary_format::Result<()> {
//! use tributary_format::{BlockType, HeaderKey, LogBlock};
//!
//! let block = LogBlock {
//!     block_type: BlockType::Command,
//!     header: vec![(HeaderKey::InstantTime, "20251220210108078".into())],
//!     content: Default::default(),
//!     footer: vec![],
//! };
//! let mut bytes = Vec::new();
//! block.encode_into(&mut bytes);
//! let decoded = LogBlock::decode_all(&bytes.into(), "example.log")?;
//! assert_eq!(decoded, vec![block]);
//! assert_eq!(decoded[0].header(HeaderKey::InstantTime), Some("20251220210108078"));
//! # Ok(()) }
//! ```

#![warn(unreachable_pub)]

mod avro;
mod codec;
mod decode;
mod error;
mod evolution;
mod key;
mod log_block;
mod memo;
mod metadata;
mod schema;
mod table_services;

pub use error::{Error, ErrorKind, Result};
pub use evolution::{
    SchemaChange, avro_type_of, check_evolution, merge_committed, promotes, with_added_column, with_column_type,
};

// Records and keys.
pub use key::{KeyError, Keys, RecordKey};
pub use memo::Memo;
pub use schema::{
    COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, IS_DELETED, META_FIELDS, PARTITION_PATH, RECORD_KEY, SequenceGroup,
    TableSchema, ordering_column_of,
};

// Log blocks: framing, then record encoding and decoding.
pub use codec::{
    CdcRecord, DELETE_DECIMAL_SCALE, DataBlockBatches, DataBlockEncoder, DeleteRecord, MetaFields, OrderingValue,
    TableDatumEncoder, TableDatums, cdc_schema_json, decode_data_block, decode_delete_content, encode_cdc_block,
    encode_cdc_content, encode_delete_block, encode_delete_content, rescale_decimal,
};
pub use decode::{ColumnDecoder, KeyScanner, Scanned};
pub use log_block::{
    AvroContent, BlockHead, BlockType, CONTENT_VERSION, HeaderKey, LogBlock, OpenBlock, avro_record_count, begin_block,
    decode_avro_content, finish_block, next_avro_record,
};

// Instant metadata.
pub use metadata::{
    CommitMetadata, CompactionOperation, CompactionPlan, CompactionStrategy, RuntimeStats, WriteStat,
    clustering_file_groups,
};
pub use table_services::{
    ActionInstant, CleanFileInfo, CleanMetadata, CleanPartitionMetadata, CleanerPlan, InstantInfo, KEEP_LATEST_COMMITS,
    RollbackMetadata, RollbackPartitionMetadata, RollbackPlan, RollbackRequest,
};

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}
    #[test]
    fn public_types_are_send_sync() {
        assert_send_sync::<super::Error>();
        assert_send_sync::<super::TableSchema>();
        assert_send_sync::<super::RecordKey>();
        assert_send_sync::<super::Keys>();
        assert_send_sync::<super::CommitMetadata>();
        assert_send_sync::<super::CompactionPlan>();
        assert_send_sync::<super::LogBlock>();
    }
}
