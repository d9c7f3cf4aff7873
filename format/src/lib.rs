//! Tributary's on-disk formats, with no IO of their own: the HOODIE_LOG
//! block framing ([`log_block`]), record encoding into and decoding out of
//! log blocks ([`codec`], with the columnar decoder of [`decode`]), the
//! table schema with its Hudi meta fields ([`schema`]), record keys as
//! Hudi's key generators form them ([`key`]), and the Avro
//! metadata of timeline instants ([`metadata`] for commits and compaction
//! plans, [`table_services`] for rollback and clean, over the helpers of
//! [`avro`]).
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

pub mod avro;
pub mod codec;
pub mod decode;
pub mod error;
pub mod key;
pub mod log_block;
pub mod memo;
pub mod metadata;
pub mod schema;
pub mod table_services;

pub use error::{Error, ErrorKind, Result};
pub use key::{KeyError, Keys, RecordKey};
pub use log_block::{BlockType, HeaderKey, LogBlock};
pub use metadata::{CommitMetadata, CompactionOperation, CompactionPlan, CompactionStrategy, RuntimeStats, WriteStat};
pub use schema::TableSchema;

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
