//! Integration tests: one binary, a module per behaviour.

#![allow(clippy::unwrap_used)]

mod client;
mod compaction;
mod corpus;
mod init;
mod instants;
mod live;
mod merge_model;
mod read;
mod recovery;
mod robustness;
mod support;
mod wide;
mod write;
