//! Tributary: many streaming writers upserting into one Apache Hudi table
//! (version 8, Merge-on-Read) at once, without ever aborting each other,
//! and an asynchronous compactor merging behind them.
//!
//! This crate holds the table API, the readers and the `tributary` binary.
//! Table metadata (timeline, TrueTime, file slices) lives in
//! [`tributary_timeline`], re-exported as [`timeline`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> tributary::Result<()> {
//! use tributary::{CreateOptions, Table};
//!
//! let dir = std::env::temp_dir().join(format!("tributary-doc-{}", std::process::id()));
//! let schema = r#"{"type":"record","name":"trip","fields":[
//!     {"name":"uuid","type":"string"},{"name":"ts","type":"long"},{"name":"city","type":"string"}]}"#;
//! let mut options = CreateOptions::new(schema, "uuid", "ts");
//! options.partition_field = Some("city".into());
//! let table = Table::create_local(&dir, options).await?;
//! assert_eq!(table.config().version, 8);
//!
//! let generator = table.time_generator(&Default::default());
//! let t = generator.new_instant().await?;
//! assert_eq!(t.as_str().len(), 17);
//! assert!(table.timeline().await?.instants().is_empty());
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(()) }
//! ```

pub mod error;
pub mod read;
pub mod table;

pub use error::{Error, Result};
pub use read::{Query, ReadOptions};
pub use table::{CreateOptions, Table, TimeSettings};
pub use tributary_timeline as timeline;
