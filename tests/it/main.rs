//! Integration tests: one binary, a module per behaviour.

#![allow(clippy::unwrap_used)]

mod corpus;
mod init;
mod instants;
mod robustness;
mod support;
mod write;
