//! Tributary: many streaming writers upserting into one Apache Hudi table
//! (version 8, Merge-on-Read) at once, without ever aborting each other,
//! and an asynchronous compactor merging behind them.
//!
//! This crate is the one a program imports, and holds the `tributary`
//! binary. It re-exports the table API (`tributary-table`) whole: what it
//! takes and returns (settings, clocks, locks, instants, write clients,
//! compactors, errors), and the crates [`arrow`] and [`object_store`]. Table
//! metadata (timeline, TrueTime, file slices) lives in
//! [`tributary_timeline`], re-exported whole as [`timeline`]. With the
//! `sql` feature (on by default), [`sql`] is the Apache DataFusion provider
//! (`tributary-datafusion`).
//!
//! A table is built by a [`TableBuilder`]: its settings ([`TableSettings`],
//! plain serde data) apart from the components it uses (clock, locks, spill
//! store), each injected with a `with_*` method or defaulted.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> tributary::Result<()> {
//! use std::sync::Arc;
//! use tributary::{CreateOptions, ManualClock, Table, TableSettings, TimeMode, TimeSettings};
//!
//! let dir = std::env::temp_dir().join(format!("tributary-doc-{}", std::process::id()));
//! let schema = r#"{"type":"record","name":"trip","fields":[
//!     {"name":"uuid","type":"string"},{"name":"ts","type":"long"},{"name":"city","type":"string"}]}"#;
//! let mut options = CreateOptions::new(schema, "uuid", "ts");
//! options.partition_field = Some("city".into());
//! let clock = Arc::new(ManualClock::new(1_766_264_468_078));
//! let settings = TableSettings {
//!     time: TimeSettings { mode: Some(TimeMode::HybridLogical), ..Default::default() },
//!     ..Default::default()
//! };
//! let table = Table::builder_local(&dir).with_settings(settings).with_clock(clock).create(options).await?;
//! assert_eq!(table.config().version, 8);
//!
//! // Instants come from the injected clock, under the table's lock.
//! let t = table.time_generator().new_instant().await?;
//! assert_eq!(t.as_str(), "20251220210108078");
//! assert!(table.timeline().await?.is_empty());
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(()) }
//! ```

pub use tributary_table::*;

/// SQL over tables through Apache DataFusion: a `TableProvider` with
/// projection, filter and limit pushdown (`tributary-datafusion`).
#[cfg(feature = "sql")]
pub use tributary_datafusion as sql;
