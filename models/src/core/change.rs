//! Row changes as clients ask for them ([`RowOp`]) and as logical decoding reads them from the
//! WAL ([`Change`]): the vocabulary the database, the connector and the judge share.

use crate::core::ids::{Key, Row, Status, TableId};
use crate::core::lsn::Lsn;
use serde::{Deserialize, Serialize};

/// `REPLICA IDENTITY`: what an update or delete logs of the old row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplicaIdentity {
    /// The old primary key only (deletes), nothing for updates.
    #[default]
    Default,
    /// The whole old row.
    Full,
}

/// What a client asks a transaction to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RowOp {
    /// `INSERT INTO t VALUES (key, 1, status, amount)`.
    Insert { table: TableId, key: Key, status: Status, amount_cents: u32 },
    /// `UPDATE t SET status = …, version = version + 1 WHERE id = key`.
    Update { table: TableId, key: Key, status: Status },
    /// `DELETE FROM t WHERE id = key`.
    Delete { table: TableId, key: Key },
    /// The service's outbox insert (`[[table]] outbox`): `INSERT INTO outbox (id, aggregatetype,
    /// aggregateid, type, payload) VALUES (<uuid of id>, '<aggregatetype>', aggregate_id,
    /// 'Claim<Type>', '{"claim": …, "status": …}')`, the row [`Row::event`] describes.
    InsertEvent { table: TableId, id: Key, aggregate_id: u32, event_type: Status },
}

impl RowOp {
    /// The row it touches: its table and key.
    pub fn target(&self) -> (TableId, Key) {
        match *self {
            RowOp::Insert { table, key, .. } | RowOp::Update { table, key, .. } | RowOp::Delete { table, key } => {
                (table, key)
            }
            RowOp::InsertEvent { table, id, .. } => (table, id),
        }
    }

    /// Whether it inserts a row (a business row or an outbox event).
    pub fn is_insert(&self) -> bool {
        matches!(self, RowOp::Insert { .. } | RowOp::InsertEvent { .. })
    }
}

/// A row change as logical decoding sees it: the change record's LSN and the tuples pgoutput
/// sends (`before` only as the replica identity allows).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Change {
    pub lsn: Lsn,
    pub table: TableId,
    pub key: Key,
    pub kind: ChangeKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ChangeKind {
    Insert {
        after: Row,
    },
    /// `before` is logged with `REPLICA IDENTITY FULL` only.
    Update {
        before: Option<Row>,
        after: Row,
    },
    /// `before` is the whole old row with `REPLICA IDENTITY FULL`; otherwise only the key is
    /// logged.
    Delete {
        before: Option<Row>,
    },
}

impl ChangeKind {
    /// The row after the change, if any.
    pub fn after(&self) -> Option<Row> {
        match self {
            ChangeKind::Insert { after } | ChangeKind::Update { after, .. } => Some(*after),
            ChangeKind::Delete { .. } => None,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            ChangeKind::Insert { .. } => "insert",
            ChangeKind::Update { .. } => "update",
            ChangeKind::Delete { .. } => "delete",
        }
    }
}
