//! `hoodie.properties`: the typed table configuration.
//!
//! The Java properties text is parsed once ([`properties_text`]) and read
//! into a [`TableConfig`] ([`table`]). Every key this library relies on
//! ([`keys`]) is validated on load; a missing key, an unsupported version
//! or a malformed value is an error naming the key. Keys we do not
//! interpret are kept verbatim and written back unchanged. The stored
//! settings' values have their own modules: [`merge_mode`], [`bucket`],
//! [`tombstone`] and [`time_mode`].

pub mod bucket;
pub mod keys;
pub mod merge_mode;
pub mod properties_text;
pub mod table;
pub mod time_mode;
pub mod tombstone;

pub use bucket::{BucketHash, BucketSpec};
pub use merge_mode::{
    COMMIT_TIME_STRATEGY_ID, CUSTOM_STRATEGY_ID, EVENT_TIME_STRATEGY_ID, MergeMode, PAYLOAD_STRATEGY_ID,
    SEQUENCE_GROUPS_STRATEGY_ID,
};
pub use properties_text::{ChecksumState, checksum_state, parse_properties, render_properties, table_checksum};
pub use table::{
    NewTableConfig, SUPPORTED_VERSIONS, SequenceGroup, TableConfig, TableType, key_generator_type, split_fields,
};
pub use time_mode::TimeMode;
pub use tombstone::TombstoneRetention;
