//! What a write client, its commits and their writer tasks share: the
//! table, its schema and configuration, the time generator, the writer
//! id's state, the file id of each bucket once listed, and the encoders and
//! block buffers kept for later commits.

use std::collections::HashMap;
use std::sync::Arc;

use tributary_format::TableDatumEncoder;
use tributary_format::TableSchema;
use tributary_merge::Combiner;
use tributary_timeline::{SchemaInForce, WriterState};
use tributary_timeline::{TableConfig, TableLocation, TimeGenerator, TimelineFolder};

use crate::backpressure::LogTally;
use crate::block_buffer::BlockBuffers;
use crate::error::Result;
use crate::next::NextCommit;
use crate::settings::WriteSettings;
use tributary_timeline::BucketIndex;

/// The file id of each bucket of one partition.
pub(crate) type BucketFileIds = HashMap<u32, String>;

/// What a client, its commits and their writer tasks share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// File id of each bucket, per partition, once the partition was listed.
    /// A bucket's file id never changes, so one listing per partition and
    /// client is enough.
    pub(crate) file_ids: std::sync::Mutex<HashMap<Arc<str>, Arc<BucketFileIds>>>,
    pub(crate) loc: TableLocation,
    pub(crate) config: TableConfig,
    pub(crate) schema: Arc<TableSchema>,
    /// The whole-table schema in force when the client was made, which
    /// `schema` evolves (`WriteClient::evolved`): a commit records the
    /// schema in force then, with the changes `schema` made to this one
    /// (`tributary_format::merge_committed`).
    pub(crate) base_json: String,
    /// The schema in force as the last commit found it under the lock.
    pub(crate) in_force: std::sync::Mutex<Option<SchemaInForce>>,
    pub(crate) index: BucketIndex,
    pub(crate) time: TimeGenerator,
    pub(crate) timeline: TimelineFolder,
    pub(crate) settings: WriteSettings,
    /// The writer id's state: its registered generation, and the step
    /// that fences and records each commit.
    pub(crate) writer: Arc<WriterState>,
    /// Avro encoders of the table columns that finished commits handed
    /// back: building one compiles the schema, which costs more than
    /// encoding a small commit. At most a few are kept.
    pub(crate) encoders: std::sync::Mutex<Vec<TableDatumEncoder>>,
    /// Buffers of log blocks whose files were stored, for the next blocks.
    pub(crate) buffers: BlockBuffers,
    /// Whether commits combine each key's versions (see
    /// [`WriteSettings::combine`]): then writer tasks encode the rows they
    /// keep; else a write encodes its rows as they come.
    pub(crate) combines: bool,
    /// Commits and records written, recorded as metrics.
    pub(crate) meters: WriteMeters,
    /// The uncompacted logs per file group, when the table bounds them
    /// (`crate::backpressure`).
    pub(crate) backpressure: Option<Arc<tokio::sync::Mutex<LogTally>>>,
    /// The commit begun for this client's next commit
    /// ([`WriteSettings::begin_next`]).
    pub(crate) next: NextCommit,
}

/// The counters a write client records ([`tributary_timeline::metrics`]),
/// for the recorder installed when the client was made.
#[derive(Debug)]
pub(crate) struct WriteMeters {
    pub(crate) commits: metrics::Counter,
    pub(crate) upserts: metrics::Counter,
    pub(crate) deletes: metrics::Counter,
    pub(crate) logs_max: metrics::Gauge,
    pub(crate) logs_p99: metrics::Gauge,
    pub(crate) backpressure_waits: metrics::Counter,
    pub(crate) backpressure_wait: metrics::Histogram,
}

impl WriteMeters {
    /// The counters of the table at `loc`.
    pub(crate) fn new(loc: &TableLocation) -> Self {
        use tributary_timeline::metrics::{
            BACKPRESSURE_WAIT, BACKPRESSURE_WAITS, COMMITS, LOGS_PER_GROUP_MAX, LOGS_PER_GROUP_P99, RECORDS_WRITTEN,
        };
        let table = loc.name();
        Self {
            commits: metrics::counter!(COMMITS, "table" => table.clone()),
            upserts: metrics::counter!(RECORDS_WRITTEN, "table" => table.clone(), "op" => "upsert"),
            deletes: metrics::counter!(RECORDS_WRITTEN, "table" => table.clone(), "op" => "delete"),
            logs_max: metrics::gauge!(LOGS_PER_GROUP_MAX, "table" => table.clone()),
            logs_p99: metrics::gauge!(LOGS_PER_GROUP_P99, "table" => table.clone()),
            backpressure_waits: metrics::counter!(BACKPRESSURE_WAITS, "table" => table.clone()),
            backpressure_wait: metrics::histogram!(BACKPRESSURE_WAIT, "table" => table),
        }
    }
}

/// Encoders a client keeps for its next commits.
const KEPT_ENCODERS: usize = 4;

impl Shared {
    /// What combines the versions of one file group of a commit.
    pub(crate) fn combiner(&self) -> Combiner {
        match self.combines {
            true => Combiner::new(&self.schema, &self.config, self.schema.is_partial()),
            false => Combiner::keep_every_version(),
        }
    }

    /// An encoder of the table columns: a kept one, else a new one.
    pub(crate) fn take_encoder(&self) -> Result<TableDatumEncoder> {
        let kept = self.encoders.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        match kept {
            Some(e) => Ok(e),
            None => Ok(TableDatumEncoder::new(&self.schema)?),
        }
    }

    /// Keeps `encoder`, which holds no rows (its last batch was flushed),
    /// for a later commit.
    pub(crate) fn keep_encoder(&self, encoder: TableDatumEncoder) {
        let mut kept = self.encoders.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if kept.len() < KEPT_ENCODERS {
            kept.push(encoder);
        }
    }
}
