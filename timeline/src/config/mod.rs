//! `hoodie.properties`: the typed table configuration.
//!
//! The Java properties text is parsed once ([`properties_text`]) and read
//! into a [`TableConfig`] ([`table`]). Every key this library relies on
//! ([`keys`]) is validated on load; a missing key, an unsupported version
//! or a malformed value is an error naming the key. Keys we do not
//! interpret are kept verbatim and written back unchanged. The stored
//! settings' values have their own modules: [`merge_mode`], [`bucket`],
//! [`tombstone`] and [`time_mode`].

pub(crate) mod bucket;
pub(crate) mod keys;
pub(crate) mod merge_mode;
pub(crate) mod properties_text;
pub(crate) mod table;
pub(crate) mod time_mode;
pub(crate) mod tombstone;

pub use bucket::{BucketHash, BucketSpec};
pub use merge_mode::{MergeMode, SEQUENCE_GROUPS_STRATEGY_ID};
pub(crate) use properties_text::{ChecksumState, checksum_state, parse_properties, render_properties, table_checksum};
pub use table::{
    CHANGE_LOG_BEGIN_KEY, CHANGE_LOG_MODE, CHANGE_LOG_WRITER, CHANGE_LOGGED_OPERATION, DEFAULT_MAX_LOGS_PER_FILE_GROUP,
    DEFAULT_TABLE_VERSION, NULL_PARTITION, NewTableConfig, SequenceGroup, TableConfig, TableType, WRITABLE_VERSIONS,
    split_fields,
};
pub use time_mode::TimeMode;
pub use tombstone::TombstoneRetention;
