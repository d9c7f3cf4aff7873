//! Tributary: many streaming writers upserting into one Apache Hudi table
//! (version 8, Merge-on-Read) at once, without ever aborting each other,
//! and an asynchronous compactor merging behind them.
//!
//! This crate holds the table API, the readers and the `tributary` binary.
//! Table metadata (timeline, TrueTime, file slices) lives in
//! [`tributary_timeline`], re-exported as [`timeline`].
//!
//! A table is built by a [`TableBuilder`]: its settings ([`TableSettings`],
//! plain serde data) apart from the components it uses (clock, locks, spill
//! store), each injected with a `with_*` method or defaulted.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> tributary::Result<()> {
//! use std::sync::Arc;
//! use tributary::timeline::{ManualClock, TimeMode};
//! use tributary::{CreateOptions, Table, TableSettings, TimeSettings};
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
//! assert!(table.timeline().await?.instants().is_empty());
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(()) }
//! ```

pub mod builder;
mod components;
mod create_options;
pub mod error;
mod incremental;
pub mod read;
pub mod settings;
pub mod table;

pub use builder::TableBuilder;
pub use create_options::CreateOptions;
pub use error::{Error, Result};
pub use read::{Query, ReadOptions};
pub use settings::{LockKind, TableSettings, TimeSettings};
pub use table::Table;
pub use tributary_timeline as timeline;
pub use tributary_timeline::TombstoneRetention;

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_sync() {
        assert_send_sync::<super::Table>();
        assert_send_sync::<super::TableBuilder>();
        assert_send_sync::<super::TableSettings>();
        assert_send_sync::<super::TimeSettings>();
        assert_send_sync::<super::LockKind>();
        assert_send_sync::<super::CreateOptions>();
        assert_send_sync::<super::ReadOptions>();
        assert_send_sync::<super::Error>();
    }
}
