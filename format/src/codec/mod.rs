//! Record encoding for log blocks: Arrow rows to AVRO_DATA content (through
//! arrow-avro's row encoder) and back (through the columnar decoder of
//! [`crate::decode`], or arrow-avro for schemas it does not cover), without
//! per-value trees; and DELETE block content.
//!
//! Encoding lives in `encoder`, the decode stream in `batches` (over the
//! in-memory container file of `container`), DELETE blocks in
//! `delete_block`.

mod batches;
mod cdc_block;
mod container;
mod delete_block;
mod encoder;

pub use batches::{DataBlockBatches, decode_data_block};
pub use cdc_block::{CdcRecord, cdc_schema_json, encode_cdc_block, encode_cdc_content};
pub use delete_block::{
    DELETE_DECIMAL_SCALE, DeleteRecord, OrderingValue, decode_delete_content, encode_delete_block,
    encode_delete_content, rescale_decimal,
};
pub use encoder::{DataBlockEncoder, MetaFields, TableDatumEncoder, TableDatums};
