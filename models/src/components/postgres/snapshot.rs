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
//!
//! READ COMMITTED takes a snapshot per statement; REPEATABLE READ takes one at the block's first
//! statement and keeps it, or imports an exported one with `SET TRANSACTION SNAPSHOT`
//! (`GetTransactionSnapshot`, `ImportSnapshot`, `src/backend/utils/time/snapmgr.c`).
//!
//! Left out: an import's check that the exporter is in the same database; a READ COMMITTED
//! block that has only read before its import is told its isolation level is wrong (PostgreSQL
//! says it "must be called before any query" first); SERIALIZABLE.

use super::xact::ABORTED_BLOCK;
use super::{Postgres, Session};
use crate::core::ids::{Csn, Node, Xid};
use crate::core::protocol::{Isolation, SessionId, SnapshotXids, SqlReply};
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

    /// The last csn up to which every commit is seen.
    pub fn prefix(&self) -> Csn {
        self.except.iter().copied().min().map_or(self.upto, |first| first - 1).min(self.upto)
    }
}

/// One snapshot in both forms: what `pg_current_snapshot()` prints, and the commits it sees.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Snapshot {
    pub xids: SnapshotXids,
    pub seen: SeenCommits,
}

/// A snapshot a slot's creation exported, with its name (`SnapBuildExportSnapshot`): valid until
/// the exporting session's next command.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Exported {
    pub name: String,
    pub snapshot: Snapshot,
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

impl Postgres {
    /// `GetSnapshotData` now, for a session whose block has the xid `own`, in both forms.
    pub(super) fn take_snapshot(&self, own: Option<Xid>) -> Snapshot {
        let running = self.running_xids();
        // The blocks between their commit record and their visibility. One that wrote no row
        // has no csn of its own (it shares the previous commit's) and hides nothing.
        let except = self
            .volatile
            .committing
            .iter()
            .filter(
                |committing| matches!(&committing.reply, SqlReply::Committed { changes, .. } if !changes.is_empty()),
            )
            .map(|committing| committing.csn)
            .collect();
        Snapshot {
            xids: snapshot_xids(&running, self.durable.next_xid, own),
            seen: SeenCommits { upto: self.durable.csn, except },
        }
    }

    /// The snapshot a statement of the session runs on (`GetTransactionSnapshot`,
    /// `snapmgr.c`): under REPEATABLE READ the block's, taken at its first statement (now, if
    /// this is it); otherwise a fresh one. An aborted block runs nothing.
    pub(super) fn statement_snapshot(&mut self, client: Node, session: SessionId) -> Result<Snapshot, String> {
        match self.block(client, session) {
            Some(block) if block.failed.is_some() => Err(ABORTED_BLOCK.into()),
            Some(block) if block.isolation == Isolation::RepeatableRead => match &block.snapshot {
                Some(snapshot) => Ok(snapshot.clone()),
                None => {
                    let snapshot = self.take_snapshot(block.xid);
                    self.block_mut(client, session).expect("open").snapshot = Some(snapshot.clone());
                    Ok(snapshot)
                }
            },
            Some(block) => Ok(self.take_snapshot(block.xid)),
            None => Ok(self.take_snapshot(None)),
        }
    }

    /// `SET TRANSACTION SNAPSHOT '<name>'` (`ImportSnapshot`, `snapmgr.c`), its checks in
    /// PostgreSQL's order: the first statement of a block without an xid; REPEATABLE READ (a
    /// READ COMMITTED block would take a new snapshot at its next statement; outside a block the
    /// implicit transaction is READ COMMITTED); a snapshot of that name still exported (its
    /// session has sent no other command).
    pub(super) fn import_snapshot(&mut self, client: Node, session: SessionId, name: &str) -> SqlReply {
        match self.block(client, session) {
            Some(block) if block.failed.is_some() => return SqlReply::Error(ABORTED_BLOCK.into()),
            Some(block) if block.snapshot.is_some() || block.xid.is_some() => {
                return SqlReply::Error("ERROR: SET TRANSACTION SNAPSHOT must be called before any query".into());
            }
            Some(block) if block.isolation == Isolation::RepeatableRead => {}
            _ => {
                return SqlReply::Error(
                    "ERROR: a snapshot-importing transaction must have isolation level SERIALIZABLE or REPEATABLE READ"
                        .into(),
                );
            }
        }
        let exported = self.volatile.sessions.values().find_map(|other| match &**other {
            Session::Replication { exported_snapshot: Some(exported), .. } if exported.name == name => {
                Some(exported.snapshot.clone())
            }
            _ => None,
        });
        match exported {
            Some(snapshot) => {
                self.block_mut(client, session).expect("open").snapshot = Some(snapshot);
                SqlReply::Ok
            }
            None => SqlReply::Error(format!("ERROR: invalid snapshot identifier: \"{name}\"")),
        }
    }
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
