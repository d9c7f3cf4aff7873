//! Test support for Tributary, never published nor a dependency of a
//! library: fixtures that write table files as Java's Hudi writers lay them
//! out, for the tests of the crates and the integration tests.
//!
//! - [`history`]: Java-style archiving of chosen instants, and history
//!   files of any rows (those the library's writer refuses too), for the
//!   tests of what readers make of them.

pub mod history;
