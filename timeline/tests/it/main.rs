//! The timeline crate through its public surface, with what only a test
//! needs: a history that Java's writers archived (written by
//! `tributary_testkit::history`, instants chosen by the test), and the
//! writer-state protocol end to end.

// Test helpers unwrap what tests set up themselves, as the tests do.
#![allow(clippy::unwrap_used)]

mod history;
mod writer_state;
