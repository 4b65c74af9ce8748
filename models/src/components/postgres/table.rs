//! Tables with a primary key, row versions and MVCC visibility (what an exported
//! snapshot sees: `SnapBuildExportSnapshot`, `src/backend/replication/logical/snapbuild.c`).
//!
//! Every committed change creates a new row version stamped with the commit's sequence number
//! (csn), given when its commit record is written, so in WAL order. A snapshot sees a set of
//! commits: every csn up to one, except those not yet visible when it was taken
//! ([`SeenCommits`]; a commit record is in WAL before `ProcArrayEndTransaction` makes it visible,
//! `xact.c`). It sees exactly the versions created by a commit it sees and not deleted or
//! replaced by one. Why that equals PostgreSQL's xid snapshots is in `snapshot.rs`.

use super::snapshot::SeenCommits;
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

    fn visible_to(&self, seen: &SeenCommits) -> bool {
        seen.sees(self.created) && (self.is_live() || !seen.sees(self.deleted))
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

    /// The newest version visible to a snapshot that sees `seen`.
    fn visible_to(&self, seen: &SeenCommits) -> Option<Row> {
        self.later
            .iter()
            .rev()
            .chain(std::iter::once(&self.first))
            .find(|version| version.visible_to(seen))
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

    /// `SELECT * FROM t ORDER BY id` under a snapshot that sees the commits `seen`.
    pub fn scan_seen(&self, seen: &SeenCommits) -> Vec<(Key, Row)> {
        let mut rows = Vec::with_capacity(self.rows.len());
        self.rows.for_each(|key, versions| {
            if let Some(row) = versions.visible_to(seen) {
                rows.push((key, row));
            }
        });
        rows
    }

    /// The row of `key` visible to a snapshot that sees the commits `seen`.
    pub fn visible_to(&self, key: Key, seen: &SeenCommits) -> Option<Row> {
        self.rows.get(key)?.visible_to(seen)
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
        Row::new(version, Status::Submitted, 100)
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

    /// A commit not yet visible (`except`) is skipped: the version before it is seen, and a
    /// delete by it has not happened.
    #[test]
    fn a_snapshot_skips_the_commits_it_does_not_see() {
        let mut table = Table::new(TableId(0), ReplicaIdentity::Full);
        table.load(1, row(1));
        table.load(2, row(1));
        table.apply(&ChangeKind::Update { before: Some(row(1)), after: row(2) }, 1, 1);
        table.apply(&ChangeKind::Delete { before: Some(row(1)) }, 2, 2);
        table.apply(&ChangeKind::Insert { after: row(1) }, 3, 3);
        let all = SeenCommits::upto(3);
        assert_eq!(table.scan_seen(&all), table.scan(3));
        let without_1_and_2 = SeenCommits { upto: 3, except: vec![1, 2] };
        assert_eq!(table.scan_seen(&without_1_and_2), vec![(1, row(1)), (2, row(1)), (3, row(1))]);
        assert_eq!(table.visible_to(1, &without_1_and_2), Some(row(1)));
        let without_3 = SeenCommits { upto: 3, except: vec![3] };
        assert_eq!(table.scan_seen(&without_3), vec![(1, row(2))]);
    }
}
