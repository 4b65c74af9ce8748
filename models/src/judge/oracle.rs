//! The oracle: the source's committed history, the truth every checker compares against
//! (the oracle of property-based testing: an independent record of what should be true).
//!
//! It is built only from what the PostgreSQL model reports — commits and promotions — never from
//! the pipeline's bookkeeping. After a promotion, the history that survives is the promoted
//! standby's: commits of the old primary past the point the standby had replayed are marked lost
//! (asynchronous replication); the new primary's commits continue the history. Positions in the
//! surviving history are commit sequence numbers (csn), strictly increasing.

use crate::core::change::Change;
use crate::core::ids::{Csn, Key, Node, Row, TableId};
use crate::core::lsn::Lsn;
use crate::core::observe::Observation;
use crate::core::shared::CopyOnWrite;
use crate::core::time::SimTime;
use crate::core::wal::CommittedTxn;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A document: one row of one table.
pub type DocId = (TableId, Key);

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OracleCommit {
    pub server: Node,
    pub txn: CopyOnWrite<CommittedTxn>,
    /// When the commit was observed.
    pub at: SimTime,
    /// Lost in a failover: committed on the old primary, never on the promoted standby.
    pub lost: bool,
}

/// A document loaded before the run. Once a commit touches it, its history lives in
/// `Oracle::changed` (starting with this version).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct InitialDoc {
    id: DocId,
    version: Version,
    changed: bool,
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
    /// The rows loaded before the run, by document: one version each. Most documents never
    /// change, so they are kept here, in one sorted vector, and not in `changed`.
    initial: Vec<InitialDoc>,
    /// Surviving history of every document a commit touched, in csn order (a loaded
    /// document's history starts with its initial version).
    changed: BTreeMap<DocId, Vec<Version>>,
    /// The last csn of the surviving history.
    pub last_csn: Csn,
    /// Commits by the LSN of each of their change records.
    by_change_lsn: BTreeMap<Lsn, Vec<usize>>,
    /// The logical decoding messages written in the main database, in write order.
    pub messages: Vec<OracleMessage>,
}

/// A logical decoding message of the main database (`pg_logical_emit_message`), and whether
/// the history keeps it: a transactional one once its transaction committed; a
/// non-transactional one, which `LogLogicalMessage` does not flush, once a later commit of the
/// same server flushed the WAL past it (a crash before that may lose it, so until then the
/// oracle does not count on it).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OracleMessage {
    pub server: Node,
    /// The end of its record: its XLogData position (non-transactional) or, for a
    /// transactional one, its position inside its transaction.
    pub lsn: Lsn,
    pub transactional: bool,
    pub xid: Option<crate::core::ids::Xid>,
    pub prefix: String,
    /// The outbox event it carries, if the service wrote it (a message outbox's event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<crate::core::ids::MessageEvent>,
    /// When it was written.
    pub at: SimTime,
    /// When its transaction committed (transactional) or a later commit flushed it.
    pub durable_at: Option<SimTime>,
    /// Never decodable any more: written on a server that crashed before it was durable, or on
    /// a primary that a promotion left behind.
    pub lost: bool,
}

impl Oracle {
    pub fn new(initial_rows: &[(TableId, Key, Row)]) -> Oracle {
        let mut initial: Vec<InitialDoc> = initial_rows
            .iter()
            .map(|(t, k, row)| InitialDoc {
                id: (*t, *k),
                version: Version { csn: 0, row: Some(*row), commit_lsn: Lsn::INVALID, at: SimTime::ZERO },
                changed: false,
            })
            .collect();
        initial.sort_by_key(|doc| doc.id);
        initial.dedup_by_key(|doc| doc.id);
        Oracle {
            commits: Vec::new(),
            initial,
            changed: BTreeMap::new(),
            last_csn: 0,
            by_change_lsn: BTreeMap::new(),
            messages: Vec::new(),
        }
    }

    /// Where a loaded document is in `initial`. Loaded keys are usually consecutive, so the
    /// key's distance from the first one is tried before a binary search.
    fn initial_index(&self, id: DocId) -> Option<usize> {
        let first = self.initial.first()?;
        if first.id.0 == id.0
            && let Ok(guess) = usize::try_from(id.1.wrapping_sub(first.id.1))
            && self.initial.get(guess).is_some_and(|doc| doc.id == id)
        {
            return Some(guess);
        }
        self.initial.binary_search_by_key(&id, |doc| doc.id).ok()
    }

    fn rebuild(&mut self) {
        self.changed.clear();
        for doc in &mut self.initial {
            doc.changed = false;
        }
        self.last_csn = 0;
        let surviving: Vec<(CopyOnWrite<CommittedTxn>, SimTime)> =
            self.commits.iter().filter(|c| !c.lost).map(|c| (c.txn.clone(), c.at)).collect();
        for (txn, at) in surviving {
            self.apply(&txn, at);
        }
    }

    fn apply(&mut self, txn: &CommittedTxn, at: SimTime) {
        for change in &txn.changes {
            let row = change.kind.after();
            let id = (change.table, change.key);
            let initial = self.initial_index(id).map(|index| {
                self.initial[index].changed = true;
                self.initial[index].version
            });
            self.changed.entry(id).or_insert_with(|| initial.into_iter().collect()).push(Version {
                csn: txn.csn,
                row,
                commit_lsn: txn.commit_lsn,
                at,
            });
        }
        self.last_csn = self.last_csn.max(txn.csn);
    }

    /// Feeds one observation.
    /// Whether [`Oracle::observe`] changes anything for this observation.
    pub fn observes(observation: &Observation) -> bool {
        matches!(
            observation,
            Observation::Committed { .. }
                | Observation::Promoted { .. }
                | Observation::MessageWritten { database: None, .. }
                | Observation::CrashRecoveryEnded { .. }
        )
    }

    pub fn observe(&mut self, at: SimTime, observation: &Observation) {
        match observation {
            Observation::Committed { server, txn } => {
                for change in &txn.changes {
                    self.by_change_lsn.entry(change.lsn).or_default().push(self.commits.len());
                }
                self.commits.push(OracleCommit { server: *server, txn: txn.0.clone(), at, lost: false });
                self.apply(txn, at);
                // The commit flushed the WAL before it: the messages written before it on this
                // server are durable; a transactional one of this transaction is decoded.
                for message in self.messages.iter_mut().filter(|m| m.server == *server && m.durable_at.is_none()) {
                    let durable = if message.transactional {
                        message.xid == Some(txn.xid)
                    } else {
                        message.lsn <= txn.commit_lsn
                    };
                    if durable {
                        message.durable_at = Some(at);
                    }
                }
            }
            Observation::MessageWritten {
                server,
                lsn,
                transactional,
                xid,
                prefix,
                database: None,
                committed,
                content,
            } => {
                if *committed {
                    // Its transaction's commit flushed the WAL before it.
                    for earlier in self.messages.iter_mut().filter(|m| m.server == *server && m.durable_at.is_none()) {
                        if !earlier.transactional && earlier.lsn < *lsn {
                            earlier.durable_at = Some(at);
                        }
                    }
                }
                self.messages.push(OracleMessage {
                    server: *server,
                    lsn: *lsn,
                    transactional: *transactional,
                    xid: *xid,
                    prefix: prefix.clone(),
                    event: content.event(),
                    at,
                    durable_at: committed.then_some(at),
                    lost: false,
                });
            }
            Observation::CrashRecoveryEnded { server } => {
                // What the crash did not find flushed is gone; a transaction open then aborted.
                for message in self.messages.iter_mut().filter(|m| m.server == *server && m.durable_at.is_none()) {
                    message.lost = true;
                }
            }
            Observation::Promoted { server, csn, .. } => {
                let mut changed = false;
                for commit in &mut self.commits {
                    if commit.server != *server && commit.txn.csn > *csn && !commit.lost {
                        commit.lost = true;
                        changed = true;
                    }
                }
                // The old primary's messages: the model does not tell which ones the standby
                // replayed, so none is counted on after a promotion.
                for message in self.messages.iter_mut().filter(|m| m.server != *server) {
                    message.lost = true;
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
        match self.initial_index(id) {
            Some(index) if !self.initial[index].changed => std::slice::from_ref(&self.initial[index].version),
            _ => self.changed.get(&id).map_or(&[], Vec::as_slice),
        }
    }

    /// Every document with its surviving history, in document order.
    pub fn histories(&self) -> impl Iterator<Item = (DocId, &[Version])> + '_ {
        let mut initial = self.initial.iter().filter(|doc| !doc.changed).peekable();
        let mut changed = self.changed.iter().peekable();
        std::iter::from_fn(move || {
            let take_initial = match (initial.peek(), changed.peek()) {
                (None, None) => return None,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(doc), Some((id, _))) => doc.id < **id,
            };
            if take_initial {
                initial.next().map(|doc| (doc.id, std::slice::from_ref(&doc.version)))
            } else {
                changed.next().map(|(id, versions)| (*id, versions.as_slice()))
            }
        })
    }

    /// Every document that ever existed in the surviving history.
    pub fn documents(&self) -> impl Iterator<Item = DocId> + '_ {
        self.histories().map(|(id, _)| id)
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
        self.histories()
            .filter(move |((t, _), _)| *t == table)
            .filter_map(|((_, key), versions)| versions.last().and_then(|v| v.row).map(|row| (key, row)))
    }

    /// The csn intervals during which a document was live.
    pub fn live_intervals(&self, id: DocId) -> impl Iterator<Item = (Csn, Csn)> + '_ {
        live_intervals(self.versions(id))
    }

    /// Surviving commits, in order.
    pub fn surviving(&self) -> impl Iterator<Item = &OracleCommit> + '_ {
        self.commits.iter().filter(|commit| !commit.lost)
    }

    /// The surviving commit with this csn.
    pub fn commit_by_csn(&self, csn: Csn) -> Option<&OracleCommit> {
        self.surviving().find(|commit| commit.txn.csn == csn)
    }

    /// The changes of document `id` in the surviving commit `csn` (none if it did not survive).
    pub fn changes_of(&self, csn: Csn, id: DocId) -> impl Iterator<Item = &Change> {
        self.commit_by_csn(csn)
            .into_iter()
            .flat_map(|commit| commit.txn.changes.iter())
            .filter(move |change| (change.table, change.key) == id)
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

/// The csn interval `[from, until)` during which a document with this history held exactly
/// `row`, if ever.
pub fn interval_of(versions: &[Version], row: Row) -> Option<(Csn, Csn)> {
    versions.iter().enumerate().find(|(_, version)| version.row == Some(row)).map(|(index, version)| {
        let until = versions.get(index + 1).map_or(Csn::MAX, |next| next.csn);
        (version.csn, until)
    })
}

/// The csn intervals `[from, until)` during which a document with this history was live.
pub fn live_intervals(versions: &[Version]) -> impl Iterator<Item = (Csn, Csn)> + '_ {
    versions.iter().enumerate().filter(|(_, version)| version.row.is_some()).map(|(index, version)| {
        let until = versions.get(index + 1).map_or(Csn::MAX, |next| next.csn);
        (version.csn, until)
    })
}
