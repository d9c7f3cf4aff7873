//! The memory policy of a slice merge: one place for every fraction.
//!
//! The compactor's budget is shared by the groups it merges at once, so each
//! slice merge gets a [`Share`] of it. Within a share:
//!
//! - decoded rows are estimated at three times their encoded bytes, and a
//!   spill partition's merge holds its rows twice (the versions, and the
//!   winners sorted by key), so a slice whose files take more than a sixth
//!   of the share is merged in bounded memory, with `P` = twice the
//!   estimate / share spill partitions (at most [`MAX_SPILL_PARTITIONS`]),
//!   each buffering a quarter of the share split `P` ways before it writes
//!   a spill object;
//! - the key-first merge may hold a key index of half the share
//!   ([`Limits::index`]), and index plus winning rows (estimated at one and a
//!   half times their Avro bytes) of three quarters ([`Limits::keep`]); past
//!   that the winners are written as sorted runs of half that each
//!   ([`Limits::run_bytes`]: a run is sorted by a copy of itself); a reader
//!   that takes rows in any order is handed the winners as they are
//!   decoded, so its key index may take three quarters
//!   ([`Share::stream_index`]);
//! - the general merge folds (drops the rows that lost) once what it holds
//!   passes 3/8 of the share ([`Share::fold_at`]), and hands its state on to
//!   spill partitions when the winners alone still take over a quarter
//!   ([`Share::spill_after_fold`]); the rest of the share is for what a fold
//!   gathers, the block being decoded and the Parquet writer;
//! - the Parquet writer closes a row group once its encoded pages take an
//!   eighth of the share ([`Share::row_group_bytes`]), and uploads through
//!   a buffer of about as much ([`Share::upload_buffer`]), so a large file
//!   never sits in memory whole.
//!
//! Readers merge without a share: they hold every row they return anyway.

/// Decoded rows per encoded byte, as the policy estimates them.
const DECODED_PER_ENCODED: usize = 3;

/// At most this many spill partitions per slice.
pub(crate) const MAX_SPILL_PARTITIONS: usize = 1024;

/// What the key-first merge may hold, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The key index: past this the key-first merge is declined.
    pub(crate) index: usize,
    /// The index plus the winning rows: past this the winners are spilled.
    pub(crate) keep: usize,
}

impl Limits {
    /// No limits: for readers, which hold every row anyway.
    pub(crate) const NONE: Limits = Limits { index: usize::MAX, keep: usize::MAX };

    /// The winning rows buffered for one sorted run when they are spilled:
    /// sorting them takes a copy, so a run is half of what may be kept.
    pub(crate) fn run_bytes(self) -> usize {
        (self.keep / 2).max(1)
    }
}

/// One slice merge's share of a memory budget, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share(usize);

impl Share {
    /// The share of each of `parallelism` merges running at once under
    /// `budget` bytes.
    pub fn of_budget(budget: usize, parallelism: usize) -> Self {
        Share((budget / parallelism.max(1)).max(1))
    }

    /// How many spill partitions a slice of `input_bytes` encoded bytes
    /// needs; 1 means it is merged in memory.
    pub(crate) fn partitions(self, input_bytes: u64) -> usize {
        usize::try_from(input_bytes)
            .unwrap_or(usize::MAX)
            .saturating_mul(DECODED_PER_ENCODED * 2)
            .div_ceil(self.0)
            .clamp(1, MAX_SPILL_PARTITIONS)
    }

    /// Bytes each of `partitions` spill partitions buffers before it writes.
    pub(crate) fn spill_buffer(self, partitions: usize) -> usize {
        self.0 / (4 * partitions.max(1))
    }

    /// The key-first merge's limits. A slice merged in memory needs none, as
    /// the key-first merge holds less than the whole slice.
    pub(crate) fn key_first(self, spills: bool) -> Limits {
        if spills { Limits { index: self.0 / 2, keep: self.0 / 4 * 3 } } else { Limits::NONE }
    }

    /// The key index of a key-first merge that streams its winners to a
    /// reader in any order ([`crate::slice::stream_slice`]): three quarters
    /// of the share, as the index is dropped before the winners are
    /// decoded, and the decode then holds a row group and a batch of log
    /// records. A slice merged in memory needs no limit.
    pub(crate) fn stream_index(self, spills: bool) -> usize {
        if spills { self.0 / 4 * 3 } else { usize::MAX }
    }

    /// What the general merge may hold before it folds.
    pub(crate) fn fold_at(self) -> usize {
        self.0 / 8 * 3
    }

    /// What the winners may still take after a fold before the merge goes on
    /// through spill partitions.
    pub(crate) fn spill_after_fold(self) -> usize {
        self.0 / 4
    }

    /// The encoded size at which the Parquet writer closes a row group: an
    /// eighth of the share, at least 1 MiB.
    pub fn row_group_bytes(self) -> usize {
        (self.0 / 8).max(1 << 20)
    }

    /// The upload buffer of a file being written: an eighth of the share,
    /// between 5 MiB (the smallest part an S3 multipart upload takes) and
    /// 10 MiB.
    pub fn upload_buffer(self) -> usize {
        (self.0 / 8).clamp(5 << 20, 10 << 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_of_a_share() {
        let share = Share::of_budget(256 << 20, 2);
        assert_eq!(share, Share(128 << 20));
        assert_eq!(share.partitions(0), 1);
        assert_eq!(share.partitions((128 << 20) / 6), 1);
        assert_eq!(share.partitions(128 << 20), 6);
        assert_eq!(share.partitions(u64::MAX), MAX_SPILL_PARTITIONS);
        assert_eq!(share.row_group_bytes(), 16 << 20);
        assert_eq!(share.upload_buffer(), 10 << 20);
        let small = Share::of_budget(16 << 20, 2);
        assert_eq!((small.row_group_bytes(), small.upload_buffer()), (1 << 20, 5 << 20));
        assert_eq!(share.spill_buffer(4), 8 << 20);
        assert_eq!(share.key_first(false), Limits::NONE);
        assert_eq!(share.key_first(true), Limits { index: 64 << 20, keep: 96 << 20 });
        assert_eq!((share.stream_index(true), share.stream_index(false)), (96 << 20, usize::MAX));
        assert_eq!(share.fold_at(), 48 << 20);
        assert_eq!(share.spill_after_fold(), 32 << 20);
    }
}
