//! What a commit's writer task reports of each log file it stored.

/// One log file a commit wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileWrite {
    /// Partition path.
    pub partition: String,
    /// File group id.
    pub file_id: String,
    /// Bare log file name.
    pub name: String,
    /// Log version.
    pub version: u32,
    /// Data records written.
    pub records: u64,
    /// Delete entries written.
    pub deletes: u64,
    /// Blocks written.
    pub blocks: u64,
    /// File size in bytes.
    pub bytes: u64,
}
