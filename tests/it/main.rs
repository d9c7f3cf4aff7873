//! Integration tests: one binary, a module per behaviour.

#![allow(clippy::unwrap_used)]

mod archived;
mod backpressure;
mod builder;
mod changes;
mod checkpoint;
mod client;
mod compaction;
mod corpus;
mod cost;
mod errors;
mod history_model;
mod incremental;
mod init;
mod instants;
#[cfg(feature = "kafka")]
mod kafka;
mod keys;
mod live;
mod long_lived;
mod merge_model;
mod metadata_table;
mod ordering_fields;
mod read;
mod recovery;
mod robustness;
mod s3;
mod scan;
mod schema_evolution;
mod service;
mod sql;
mod support;
mod tombstones;
mod wide;
mod write;
