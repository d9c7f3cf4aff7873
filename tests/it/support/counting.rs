//! A store that counts the requests made through it, by kind, to check how
//! many objects an operation reads: the library's own.

pub use tributary_timeline::{CountingStore, Requests};
