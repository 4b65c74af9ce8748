//! MVCC snapshots: what a statement or a transaction sees, as xids (`GetSnapshotData`,
//! `src/backend/storage/ipc/procarray.c`; `pg_current_snapshot`, `src/backend/utils/adt/
//! xid8funcs.c`) and, for reading the tables, as the commits it sees by commit sequence number.
//!
//! A snapshot taken from the proc array: `xmax = latestCompletedXid + 1` (the newest xid that
//! left the proc array, not `nextXid`), `xip` the other sessions' running xids below `xmax` (of
//! every database: the proc array is the cluster's), `xmin` the smallest of `xmax`, the
//! caller's own xid and `xip`. An xid below `xmin`, or in `[xmin, xmax)` and not in `xip`, is
//! finished: visible if it committed. The caller's own xid is never in `xip`; its own changes
//! are visible to it by other means (the block's staged rows).
//!
//! The tables are read by commit sequence number (csn) instead ([`SeenCommits`]), which is
//! exactly the same set of transactions: the model gives a commit its csn when it writes the
//! commit record, in WAL order, and a transaction stays in the proc array from its xid's
//! assignment until it becomes visible (`ProcArrayEndTransaction`). So the committed
//! transactions a proc-array snapshot sees are those with a commit record (csn at or below the
//! last one) that are no longer in the proc array: every csn up to the last, except those of the
//! transactions between their commit record and their visibility at that moment. Aborted
//! transactions have no csn and are seen by neither form. A slot's exported snapshot sees the
//! transactions whose commit record precedes its consistent point
//! (`SnapBuildInitialSnapshot`, `snapbuild.c`): every csn up to the last one written before
//! that point, with no exception, even those still in the proc array.

use crate::core::ids::{Csn, Xid};
use crate::core::protocol::SnapshotXids;
use serde::{Deserialize, Serialize};

/// The commits a snapshot sees, by commit sequence number: every csn up to `upto` except those
/// in `except` (commit records written, not yet visible when the snapshot was taken).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SeenCommits {
    pub upto: Csn,
    pub except: Vec<Csn>,
}

impl SeenCommits {
    /// Every commit up to `upto`.
    pub fn upto(upto: Csn) -> SeenCommits {
        SeenCommits { upto, except: Vec::new() }
    }

    /// Whether a commit of csn `csn` is seen (csn 0: the rows loaded before the run).
    pub fn sees(&self, csn: Csn) -> bool {
        csn <= self.upto && !self.except.contains(&csn)
    }
}

/// One snapshot in both forms: what `pg_current_snapshot()` prints, and the commits it sees.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Snapshot {
    pub xids: SnapshotXids,
    pub seen: SeenCommits,
}

/// `GetSnapshotData` for a session whose own xid is `own`: `running` are the top-level xids in
/// the proc array (sorted), `next_xid` the next to be assigned. Every xid below `next_xid` was
/// assigned, so the newest one not running is `latestCompletedXid`.
pub fn snapshot_xids(running: &[Xid], next_xid: Xid, own: Option<Xid>) -> SnapshotXids {
    debug_assert!(running.windows(2).all(|pair| pair[0] < pair[1]), "running xids are sorted");
    let latest_completed = (0..next_xid).rev().find(|xid| running.binary_search(xid).is_err());
    let xmax = latest_completed.map_or(next_xid, |xid| xid + 1);
    let xip: Vec<Xid> = running.iter().copied().filter(|xid| *xid < xmax && Some(*xid) != own).collect();
    let xmin = xip.iter().copied().chain(own).fold(xmax, Xid::min);
    SnapshotXids { xmin, xmax, xip }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// T5: 766 runs in another database and is the newest xid: a new snapshot is `766:766:`
    /// (766 at xmax, not listed, still invisible).
    #[test]
    fn the_newest_running_xid_is_at_xmax_and_not_listed() {
        assert_eq!(snapshot_xids(&[766], 767, None).to_string(), "766:766:");
    }

    /// Nothing running: `xmin = xmax = nextXid` (E2c's fresh snapshot `754:754:`).
    #[test]
    fn nothing_running_is_next_xid_twice() {
        assert_eq!(snapshot_xids(&[], 754, None).to_string(), "754:754:");
    }

    /// An older xid still running under a newer finished one is listed; the caller's own xid
    /// lowers xmin but is never listed.
    #[test]
    fn running_xids_below_xmax_are_listed_and_the_own_one_is_not() {
        assert_eq!(snapshot_xids(&[744, 746], 748, None).to_string(), "744:748:744,746");
        assert_eq!(snapshot_xids(&[744, 746], 748, Some(744)).to_string(), "744:748:746");
        assert_eq!(snapshot_xids(&[744, 746], 748, Some(746)).to_string(), "744:748:744");
    }

    #[test]
    fn a_commit_not_yet_visible_is_not_seen() {
        let seen = SeenCommits { upto: 5, except: vec![4] };
        assert!(seen.sees(0) && seen.sees(3) && seen.sees(5));
        assert!(!seen.sees(4) && !seen.sees(6));
    }
}
