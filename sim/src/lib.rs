//! Deterministic simulation of Tributary tables.
//!
//! A *history* is one table written by 1 to 4 writers while a compactor and
//! a cleaner work on it, every one of them a simulated process that may
//! crash at any await point and restart, in a world whose store fails
//! operations, loses answers, stalls and completes operations out of order,
//! and whose clocks are skewed and drift. Everything is drawn from one
//! seed, and the same seed replays the same history, operation by
//! operation ([`Outcome::trace`]).
//!
//! After every instant that completes, and at the end, the table must equal
//! the model of what its writers committed: no acknowledged batch missing,
//! none visible twice, none visible that was never sent, no gap in a
//! writer's batches, a well-formed timeline, and snapshot, read-optimized
//! and incremental reads equal to the model ([`check`]).
//!
//! - [`world`]: the store, the faults, the clocks and the schedule;
//! - [`workload`]: what the writers send, and the model;
//! - [`history`]: the actors and one history's run;
//! - [`check`]: the checks of the table;
//! - [`recovery`]: the check that recovery rolls back only writers it found
//!   dead.
//!
//! The `tributary-sim` binary runs many histories and replays one.
//!
//! ```
//! let scale = tributary_sim::Scale { records: 20..40, ..Default::default() };
//! let first = tributary_sim::run(7, &scale).expect("history 7 passes its checks");
//! let again = tributary_sim::run(7, &scale).expect("and again");
//! assert_eq!(first.trace, again.trace, "a seed replays its history");
//! assert!(first.checks > 1);
//! ```

mod change_log;
pub mod check;
mod feed;
pub mod history;
pub mod recovery;
pub mod workload;
pub mod world;

pub use history::{Outcome, Scale, Stalls, TABLE_ROOT, run};
pub use world::FaultKind;
