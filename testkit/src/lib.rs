//! Test support for Tributary, never published nor a dependency of a
//! library: fixtures that write table files as Java's Hudi writers lay them
//! out, for the tests of the crates and the integration tests.
//!
//! - [`history`]: an LSM history writer (Java archiving), since Tributary
//!   itself never archives.

pub mod history;
