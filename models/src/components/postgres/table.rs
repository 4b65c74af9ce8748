//! Tables with a primary key, row versions and MVCC visibility (what an exported
//! snapshot sees: `SnapBuildExportSnapshot`, `src/backend/replication/logical/snapbuild.c`).
//!
//! Every committed change creates a new row version stamped with the commit's sequence number
//! (csn). A snapshot is a csn: it sees exactly the versions created by commits at or before it
//! and not deleted by one of them. Commit order is WAL order here, because transactions are
//! atomic (one step from first record to commit); the gap between a commit record reaching WAL
//! and becoming visible in the proc array (`ProcArrayEndTransaction` after `RecordTransactionCommit`, `xact.c`) is
//! not modelled yet.

use crate::core::change::{ChangeKind, ReplicaIdentity};
use crate::core::ids::{Csn, Key, Row, TableId};
use crate::core::keymap::KeyMap;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct RowVersion {
    row: Row,
    created: Csn,
    /// The csn of the commit that deleted or replaced this version ([`LIVE`]: none yet), as
    /// PostgreSQL's `xmax`.
    deleted: Csn,
}

/// `deleted` of a version no commit has deleted or replaced: every snapshot is before it. (A
/// plain csn rather than an `Option`, so that every byte of a version is written: valgrind's
/// memcheck flagged the compiled `Option` test, which compares the absent csn before it looks at
/// the discriminant; docs/memory-safety.md.)
const LIVE: Csn = Csn::MAX;

impl RowVersion {
    fn live(row: Row, created: Csn) -> RowVersion {
        RowVersion { row, created, deleted: LIVE }
    }

    fn is_live(&self) -> bool {
        self.deleted == LIVE
    }

    fn visible_at(&self, snapshot: Csn) -> bool {
        self.created <= snapshot && snapshot < self.deleted
    }
}

/// Every version of one row, oldest first. Most rows never change: the first version is kept
/// inline, so loading a table allocates nothing per row.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Versions {
    first: RowVersion,
    later: Vec<RowVersion>,
}

impl Versions {
    fn new(version: RowVersion) -> Versions {
        Versions { first: version, later: Vec::new() }
    }

    fn last(&self) -> &RowVersion {
        self.later.last().unwrap_or(&self.first)
    }

    fn last_mut(&mut self) -> &mut RowVersion {
        self.later.last_mut().unwrap_or(&mut self.first)
    }

    /// The newest version visible to a snapshot.
    fn visible_at(&self, snapshot: Csn) -> Option<Row> {
        if self.later.is_empty() {
            return self.first.visible_at(snapshot).then_some(self.first.row);
        }
        self.later
            .iter()
            .rev()
            .chain(std::iter::once(&self.first))
            .find(|version| version.visible_at(snapshot))
            .map(|version| version.row)
    }
}

/// One table: every version of every row.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Table {
    pub id: TableId,
    pub replica_identity: ReplicaIdentity,
    rows: KeyMap<Versions>,
}

impl Table {
    pub fn new(id: TableId, replica_identity: ReplicaIdentity) -> Table {
        Table { id, replica_identity, rows: KeyMap::default() }
    }

    /// A table loaded with rows that existed before the run (csn 0), built in one pass.
    pub fn loaded(id: TableId, replica_identity: ReplicaIdentity, rows: impl IntoIterator<Item = (Key, Row)>) -> Table {
        let rows = rows.into_iter().map(|(key, row)| (key, Versions::new(RowVersion::live(row, 0))));
        Table { id, replica_identity, rows: rows.collect() }
    }

    /// Loads a row that existed before the run (csn 0).
    pub fn load(&mut self, key: Key, row: Row) {
        self.rows.insert(key, Versions::new(RowVersion::live(row, 0)));
    }

    /// The live row of `key` as of the latest commit.
    pub fn current(&self, key: Key) -> Option<Row> {
        let last = self.rows.get(key)?.last();
        last.is_live().then_some(last.row)
    }

    /// The csn of the last commit that changed `key` (created, replaced or deleted its latest
    /// version): under REPEATABLE READ, a change after the transaction's snapshot is a
    /// serialization failure.
    pub fn last_change_csn(&self, key: Key) -> Option<Csn> {
        let last = self.rows.get(key)?.last();
        Some(if last.is_live() { last.created } else { last.deleted })
    }

    /// The row of `key` visible to a snapshot.
    pub fn visible(&self, key: Key, snapshot: Csn) -> Option<Row> {
        self.rows.get(key)?.visible_at(snapshot)
    }

    /// `SELECT * FROM t ORDER BY id` under a snapshot.
    pub fn scan(&self, snapshot: Csn) -> Vec<(Key, Row)> {
        let mut rows = Vec::with_capacity(self.rows.len());
        self.rows.for_each(|key, versions| {
            if let Some(row) = versions.visible_at(snapshot) {
                rows.push((key, row));
            }
        });
        rows
    }

    /// Live rows as of the latest commit.
    pub fn live_rows(&self) -> impl Iterator<Item = (Key, Row)> + '_ {
        self.rows.iter().filter_map(|(key, versions)| {
            let last = versions.last();
            last.is_live().then_some((key, last.row))
        })
    }

    /// Keys that are live as of the latest commit, in order.
    pub fn live_keys(&self) -> Vec<Key> {
        self.live_rows().map(|(key, _)| key).collect()
    }

    /// Applies a committed change at `csn`.
    pub fn apply(&mut self, change: &ChangeKind, key: Key, csn: Csn) {
        match change {
            ChangeKind::Insert { .. } | ChangeKind::Update { .. } => {
                let version = RowVersion::live(change.after().expect("a row after"), csn);
                match self.rows.get_mut(key) {
                    Some(versions) => {
                        let last = versions.last_mut();
                        if last.is_live() {
                            last.deleted = csn;
                        }
                        versions.later.push(version);
                    }
                    None => {
                        self.rows.insert(key, Versions::new(version));
                    }
                }
            }
            ChangeKind::Delete { .. } => {
                if let Some(versions) = self.rows.get_mut(key) {
                    versions.last_mut().deleted = csn;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::Status;

    fn row(version: u32) -> Row {
        Row { version, status: Status::Submitted, amount_cents: 100 }
    }

    #[test]
    fn a_snapshot_sees_exactly_what_committed_before_it() {
        let mut table = Table::new(TableId(0), ReplicaIdentity::Full);
        table.load(1, row(1));
        table.load(2, row(1));
        table.apply(&ChangeKind::Update { before: Some(row(1)), after: row(2) }, 1, 1);
        table.apply(&ChangeKind::Delete { before: Some(row(1)) }, 2, 2);
        table.apply(&ChangeKind::Insert { after: row(1) }, 3, 3);
        assert_eq!(table.scan(0), vec![(1, row(1)), (2, row(1))]);
        assert_eq!(table.scan(1), vec![(1, row(2)), (2, row(1))]);
        assert_eq!(table.scan(2), vec![(1, row(2))]);
        assert_eq!(table.scan(3), vec![(1, row(2)), (3, row(1))]);
        assert_eq!(table.current(2), None);
        assert_eq!(table.visible(2, 1), Some(row(1)));
    }
}
