//! How two versions of one record key are merged: [`MergeMode`]
//! (`hoodie.record.merge.mode`) and Hudi's merge strategy ids and payload
//! classes.

use std::fmt;

/// Strategy id Hudi uses for event-time ordering.
pub(crate) const EVENT_TIME_STRATEGY_ID: &str = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5";
/// Strategy id Hudi uses for commit-time ordering.
pub(crate) const COMMIT_TIME_STRATEGY_ID: &str = "ce9acb64-bde0-424c-9b91-f6ebba25356d";
/// Strategy id Hudi uses for custom mergers.
pub(crate) const CUSTOM_STRATEGY_ID: &str = "1897ef5f-18bc-4557-939c-9d6a8afd1519";

const DEFAULT_PAYLOAD: &str = "org.apache.hudi.common.model.DefaultHoodieRecordPayload";
pub(crate) const OVERWRITE_PAYLOAD: &str = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload";

/// Strategy id of Tributary's sequence-group merge (recorded with merge mode
/// CUSTOM, so readers that do not know it refuse the table).
pub const SEQUENCE_GROUPS_STRATEGY_ID: &str = "8c3f5e2a-4b1d-4e7a-9f60-2d1c7b3a9e45";

/// How two versions of one record key are merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MergeMode {
    /// The larger ordering-field value wins; ties go to the later write.
    #[default]
    EventTime,
    /// The later write wins.
    CommitTime,
    /// A custom merger named by the strategy id.
    Custom,
}

impl MergeMode {
    /// The `hoodie.record.merge.mode` value.
    pub fn name(self) -> &'static str {
        match self {
            MergeMode::EventTime => "EVENT_TIME_ORDERING",
            MergeMode::CommitTime => "COMMIT_TIME_ORDERING",
            MergeMode::Custom => "CUSTOM",
        }
    }

    /// Hudi's strategy id for the built-in modes.
    pub fn strategy_id(self) -> &'static str {
        match self {
            MergeMode::EventTime => EVENT_TIME_STRATEGY_ID,
            MergeMode::CommitTime => COMMIT_TIME_STRATEGY_ID,
            MergeMode::Custom => CUSTOM_STRATEGY_ID,
        }
    }

    /// The `hoodie.compaction.payload.class` Hudi records for the mode.
    pub(crate) fn payload_class(self) -> &'static str {
        match self {
            MergeMode::CommitTime => OVERWRITE_PAYLOAD,
            _ => DEFAULT_PAYLOAD,
        }
    }
}

impl fmt::Display for MergeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
