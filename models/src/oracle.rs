//! The oracle: the source's committed history, the truth every checker compares against
//! (DESIGN.md §2.2).
//!
//! It is built only from what the PostgreSQL model reports — commits and promotions — never from
//! the pipeline's bookkeeping. After a promotion, the history that survives is the promoted
//! standby's: commits of the old primary past the point the standby had replayed are marked lost
//! (asynchronous replication); the new primary's commits continue the history. Positions in the
//! surviving history are commit sequence numbers (csn), strictly increasing.

use crate::ids::{Csn, Key, Node, Row, TableId};
use crate::lsn::Lsn;
use crate::observe::Observation;
use crate::postgres::wal::CommittedTxn;
use crate::time::SimTime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A document: one row of one table.
pub type DocId = (TableId, Key);

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OracleCommit {
    pub server: Node,
    pub txn: Arc<CommittedTxn>,
    /// When the commit was observed.
    pub at: SimTime,
    /// Lost in a failover: committed on the old primary, never on the promoted standby.
    pub lost: bool,
}

/// One version of a document in the surviving history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Version {
    /// The commit that made it (0: loaded before the run).
    pub csn: Csn,
    /// The row from then on, `None` once deleted.
    pub row: Option<Row>,
    pub commit_lsn: Lsn,
    pub at: SimTime,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Oracle {
    pub commits: Vec<OracleCommit>,
    initial: BTreeMap<DocId, Row>,
    /// Surviving history per document, in csn order.
    history: BTreeMap<DocId, Vec<Version>>,
    /// The last csn of the surviving history.
    pub last_csn: Csn,
    /// Commits by the LSN of each of their change records.
    by_change_lsn: BTreeMap<Lsn, Vec<usize>>,
}

impl Oracle {
    pub fn new(initial_rows: &[(TableId, Key, Row)]) -> Oracle {
        let initial: BTreeMap<DocId, Row> = initial_rows.iter().map(|(t, k, r)| ((*t, *k), *r)).collect();
        let mut oracle = Oracle {
            commits: Vec::new(),
            initial,
            history: BTreeMap::new(),
            last_csn: 0,
            by_change_lsn: BTreeMap::new(),
        };
        oracle.rebuild();
        oracle
    }

    fn rebuild(&mut self) {
        self.history = self
            .initial
            .iter()
            .map(|(id, row)| {
                (*id, vec![Version { csn: 0, row: Some(*row), commit_lsn: Lsn::INVALID, at: SimTime::ZERO }])
            })
            .collect();
        self.last_csn = 0;
        let surviving: Vec<(Arc<CommittedTxn>, SimTime)> =
            self.commits.iter().filter(|c| !c.lost).map(|c| (c.txn.clone(), c.at)).collect();
        for (txn, at) in surviving {
            self.apply(&txn, at);
        }
    }

    fn apply(&mut self, txn: &CommittedTxn, at: SimTime) {
        for change in &txn.changes {
            let row = change.kind.after();
            self.history.entry((change.table, change.key)).or_default().push(Version {
                csn: txn.csn,
                row,
                commit_lsn: txn.commit_lsn,
                at,
            });
        }
        self.last_csn = self.last_csn.max(txn.csn);
    }

    /// Feeds one observation.
    pub fn observe(&mut self, at: SimTime, observation: &Observation) {
        match observation {
            Observation::Committed { server, txn } => {
                for change in &txn.changes {
                    self.by_change_lsn.entry(change.lsn).or_default().push(self.commits.len());
                }
                self.commits.push(OracleCommit { server: *server, txn: txn.clone(), at, lost: false });
                self.apply(txn, at);
            }
            Observation::Promoted { server, csn, .. } => {
                let mut changed = false;
                for commit in &mut self.commits {
                    if commit.server != *server && commit.txn.csn > *csn && !commit.lost {
                        commit.lost = true;
                        changed = true;
                    }
                }
                if changed {
                    self.rebuild();
                }
            }
            _ => {}
        }
    }

    /// The surviving history of one document.
    pub fn versions(&self, id: DocId) -> &[Version] {
        self.history.get(&id).map_or(&[], Vec::as_slice)
    }

    /// Every document that ever existed in the surviving history.
    pub fn documents(&self) -> impl Iterator<Item = DocId> + '_ {
        self.history.keys().copied()
    }

    /// The row of a document as of `csn`.
    pub fn row_at(&self, id: DocId, csn: Csn) -> Option<Row> {
        self.versions(id).iter().rev().find(|version| version.csn <= csn).and_then(|version| version.row)
    }

    /// The latest state of a document.
    pub fn current(&self, id: DocId) -> Option<Row> {
        self.versions(id).last().and_then(|version| version.row)
    }

    /// The last version (possibly a delete) of a document.
    pub fn last_version(&self, id: DocId) -> Option<&Version> {
        self.versions(id).last()
    }

    /// Live rows of a table at the end of the surviving history.
    pub fn live(&self, table: TableId) -> impl Iterator<Item = (Key, Row)> + '_ {
        self.history
            .iter()
            .filter(move |((t, _), _)| *t == table)
            .filter_map(|((_, key), versions)| versions.last().and_then(|v| v.row).map(|row| (*key, row)))
    }

    /// The csn interval `[from, until)` during which a document held exactly `row`, if ever.
    pub fn interval_of(&self, id: DocId, row: Row) -> Option<(Csn, Csn)> {
        let versions = self.versions(id);
        versions.iter().enumerate().find(|(_, version)| version.row == Some(row)).map(|(index, version)| {
            let until = versions.get(index + 1).map_or(Csn::MAX, |next| next.csn);
            (version.csn, until)
        })
    }

    /// The csn intervals during which a document was live.
    pub fn live_intervals(&self, id: DocId) -> Vec<(Csn, Csn)> {
        let versions = self.versions(id);
        let mut intervals = Vec::new();
        for (index, version) in versions.iter().enumerate() {
            if version.row.is_some() {
                let until = versions.get(index + 1).map_or(Csn::MAX, |next| next.csn);
                intervals.push((version.csn, until));
            }
        }
        intervals
    }

    /// Surviving commits, in order.
    pub fn surviving(&self) -> impl Iterator<Item = &OracleCommit> + '_ {
        self.commits.iter().filter(|commit| !commit.lost)
    }

    /// The surviving commit with this csn.
    pub fn commit_by_csn(&self, csn: Csn) -> Option<&OracleCommit> {
        self.surviving().find(|commit| commit.txn.csn == csn)
    }

    /// Finds the commit a streamed change came from: the same change record (LSN, document, row
    /// after). Surviving commits are preferred; a match only among lost ones is a phantom.
    pub fn find_change(&self, lsn: Lsn, id: DocId, after: Option<Row>) -> Option<&OracleCommit> {
        let mut lost = None;
        let candidates = self.by_change_lsn.get(&lsn).map_or(&[][..], Vec::as_slice);
        for commit in candidates.iter().map(|index| &self.commits[*index]) {
            let matches =
                commit.txn.changes.iter().any(|change| {
                    change.lsn == lsn && (change.table, change.key) == id && change.kind.after() == after
                });
            if matches {
                if !commit.lost {
                    return Some(commit);
                }
                lost.get_or_insert(commit);
            }
        }
        lost
    }
}
