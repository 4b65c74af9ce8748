//! WAL retention for replication slots, computed the way PostgreSQL 15 computes it
//! (`src/backend/access/transam/xlog.c`, `src/backend/replication/slotfuncs.c`).
//!
//! - [`Retention::keep_log_seg`] is `KeepLogSeg` (`xlog.c`): the oldest segment a checkpoint
//!   keeps, from the slots' minimum `restart_lsn`, capped by `max_slot_wal_keep_size`, raised
//!   again to `wal_keep_size` (`KeepLogSeg`, `xlog.c`). The effective slot limit is therefore the larger of the two.
//! - [`Retention::wal_availability`] is `GetWALAvailability`: `reserved`, `extended`,
//!   `unreserved` or `lost` against the **write** pointer, with the cap and `wal_keep_size` terms
//!   global (the slots' minimum) and only the slot's own segment per slot (`GetWALAvailability`, `xlog.c`).
//! - [`Retention::safe_wal_size`] is the view's `safe_wal_size` (`pg_get_replication_slots`, `slotfuncs.c`).
//! - [`Retention::checkpoint_segments`] is `CheckPointSegments`, which decides when WAL volume
//!   requests a checkpoint (`XLogWrite`, `xlog.c`).
//!
//! Nothing here removes WAL or invalidates a slot: the checkpoint does both, and only the
//! checkpoint (`InvalidateObsoleteReplicationSlots`, `slot.c`).

use crate::core::lsn::Lsn;
use serde::{Deserialize, Serialize};

/// One megabyte, the unit of the `*_size` settings.
pub const MB: u64 = 1024 * 1024;

/// The settings retention depends on. Sizes in megabytes, as PostgreSQL stores them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Retention {
    /// `wal_segment_size` in bytes (`initdb --wal-segsize`).
    pub wal_segment_size_bytes: u64,
    /// `max_wal_size`.
    pub max_wal_size_mb: u64,
    /// `max_slot_wal_keep_size`; `None` is `-1`, no cap (the default).
    pub max_slot_wal_keep_size_mb: Option<u64>,
    /// `wal_keep_size`.
    pub wal_keep_size_mb: u64,
    /// `checkpoint_completion_target` in thousandths (0.9 is 900).
    pub checkpoint_completion_target_permille: u64,
}

/// `WALAvailability`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WalAvailability {
    Reserved,
    Extended,
    Unreserved,
    /// Shown as `lost`.
    Removed,
}

impl WalAvailability {
    /// The `wal_status` column.
    pub fn as_str(self) -> &'static str {
        match self {
            WalAvailability::Reserved => "reserved",
            WalAvailability::Extended => "extended",
            WalAvailability::Unreserved => "unreserved",
            WalAvailability::Removed => "lost",
        }
    }
}

impl Retention {
    /// PostgreSQL's defaults on a cluster with `wal_segment_size_bytes` segments.
    pub fn defaults(wal_segment_size_bytes: u64) -> Retention {
        Retention {
            wal_segment_size_bytes,
            max_wal_size_mb: 1024,
            max_slot_wal_keep_size_mb: None,
            wal_keep_size_mb: 0,
            checkpoint_completion_target_permille: 900,
        }
    }

    /// `XLByteToSeg`.
    pub fn segment_of(&self, lsn: Lsn) -> u64 {
        lsn.0 / self.wal_segment_size_bytes
    }

    /// `XLogSegNoOffsetToRecPtr(segno, 0)`.
    pub fn segment_start(&self, segno: u64) -> Lsn {
        Lsn(segno * self.wal_segment_size_bytes)
    }

    /// `ConvertToXSegs` / `XLogMBVarToSegs`: megabytes in whole segments.
    pub fn mb_to_segments(&self, mb: u64) -> u64 {
        mb / (self.wal_segment_size_bytes / MB).max(1)
    }

    /// `CheckPointSegments` (`CalculateCheckpointSegments`).
    pub fn checkpoint_segments(&self) -> u64 {
        let segments = self.mb_to_segments(self.max_wal_size_mb);
        (segments * 1000 / (1000 + self.checkpoint_completion_target_permille)).max(1)
    }

    /// `XLogCheckpointNeeded(finished)`: finishing segment `finished` requests a checkpoint
    /// when it is `CheckPointSegments - 1` or more past the last checkpoint's redo segment.
    pub fn checkpoint_needed(&self, last_redo: Lsn, finished_segment: u64) -> bool {
        finished_segment + 1 >= self.segment_of(last_redo) + self.checkpoint_segments()
    }

    /// `KeepLogSeg(recptr, &segno)`: lowers `segno` to the oldest segment to keep for the slots
    /// (whose minimum `restart_lsn` is `slots_minimum`) and `wal_keep_size`.
    pub fn keep_log_seg(&self, recptr: Lsn, slots_minimum: Option<Lsn>, segno: u64) -> u64 {
        let current = self.segment_of(recptr);
        let mut keep = current;
        if let Some(minimum) = slots_minimum.filter(|minimum| minimum.is_valid() && *minimum < recptr) {
            keep = self.segment_of(minimum);
            if let Some(cap_mb) = self.max_slot_wal_keep_size_mb {
                let cap = self.mb_to_segments(cap_mb);
                if current - keep > cap {
                    keep = current - cap;
                }
            }
        }
        if self.wal_keep_size_mb > 0 {
            let keep_segments = self.mb_to_segments(self.wal_keep_size_mb);
            if current - keep < keep_segments {
                keep = if current <= keep_segments { 1 } else { current - keep_segments };
            }
        }
        keep.min(segno)
    }

    /// `GetWALAvailability(restart_lsn)` against the write pointer `current`; `last_removed`
    /// is `XLogGetLastRemovedSegno()` (0 until the first removal since startup).
    pub fn wal_availability(
        &self,
        restart_lsn: Lsn,
        current: Lsn,
        slots_minimum: Option<Lsn>,
        last_removed: u64,
    ) -> WalAvailability {
        let target = self.segment_of(restart_lsn);
        let current_segment = self.segment_of(current);
        let oldest_slot_segment = self.keep_log_seg(current, slots_minimum, current_segment);
        let keep_for_max_wal_size = self.mb_to_segments(self.max_wal_size_mb) + 1;
        let oldest_for_max_wal_size =
            if current_segment > keep_for_max_wal_size { current_segment - keep_for_max_wal_size } else { 1 };
        if target >= oldest_slot_segment {
            if target >= oldest_for_max_wal_size { WalAvailability::Reserved } else { WalAvailability::Extended }
        } else if target > last_removed {
            WalAvailability::Unreserved
        } else {
            WalAvailability::Removed
        }
    }

    /// The view's `safe_wal_size`: bytes the write pointer may still advance before the slot's
    /// segment falls out of the limit. `None` without a cap (or for a lost slot, which the caller
    /// knows).
    pub fn safe_wal_size(&self, restart_lsn: Lsn, current: Lsn) -> Option<i64> {
        let cap_mb = self.max_slot_wal_keep_size_mb?;
        let limit = self.mb_to_segments(cap_mb).max(self.mb_to_segments(self.wal_keep_size_mb));
        let fail = self.segment_start(self.segment_of(restart_lsn) + limit + 1);
        Some(fail.0 as i64 - current.0 as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(cap_mb: Option<u64>, max_wal_size_mb: u64) -> Retention {
        Retention { max_slot_wal_keep_size_mb: cap_mb, max_wal_size_mb, ..Retention::defaults(MB) }
    }

    /// `GetWALAvailability` by hand: a 4 MB cap, 1 MB segments, the slot in segment 0x0E: unreserved
    /// once the write pointer is in segment 0x13 (+5), with `safe_wal_size` exactly 0 at
    /// 0/1300000.
    #[test]
    fn trace_1a_unreserved_at_five_segments_with_safe_wal_size_zero() {
        let retention = settings(Some(4), 64);
        let restart = Lsn(0x0E4_9AA8);
        let at = |current: u64| retention.wal_availability(restart, Lsn(current), Some(restart), 0);
        assert_eq!(at(0x12F_FFF0), WalAvailability::Reserved);
        assert_eq!(at(0x130_0000), WalAvailability::Unreserved);
        assert_eq!(retention.safe_wal_size(restart, Lsn(0x130_0000)), Some(0));
        assert!(retention.safe_wal_size(restart, Lsn(0x12F_FFF0)).unwrap() > 0);
    }

    /// Trace 1b: a 10 MB cap and `max_wal_size` 4 MB: extended at +6 segments, unreserved at +11.
    #[test]
    fn trace_1b_extended_at_six_unreserved_at_eleven() {
        let retention = settings(Some(10), 4);
        let restart = Lsn(0x0E0_0100);
        let at = |plus: u64| retention.wal_availability(restart, Lsn((0x0E + plus) << 20), Some(restart), 0);
        assert_eq!(at(5), WalAvailability::Reserved);
        assert_eq!(at(6), WalAvailability::Extended);
        assert_eq!(at(10), WalAvailability::Extended);
        assert_eq!(at(11), WalAvailability::Unreserved);
    }

    #[test]
    fn wal_keep_size_raises_the_effective_limit() {
        let retention = Retention { wal_keep_size_mb: 8, ..settings(Some(4), 1024) };
        assert_eq!(retention.keep_log_seg(Lsn(20 << 20), Some(Lsn(5 << 20)), 20), 12);
        let restart = Lsn(5 << 20);
        assert_eq!(retention.wal_availability(restart, Lsn(13 << 20), Some(restart), 0), WalAvailability::Reserved);
        assert_eq!(retention.wal_availability(restart, Lsn(14 << 20), Some(restart), 0), WalAvailability::Unreserved);
    }

    #[test]
    fn checkpoint_segments_follow_max_wal_size() {
        assert_eq!(settings(None, 4).checkpoint_segments(), 2, "trace 1b: 4 MB / 1.9");
        assert_eq!(Retention::defaults(16 * MB).checkpoint_segments(), 33);
        assert_eq!(settings(None, 2).checkpoint_segments(), 1);
    }
}
