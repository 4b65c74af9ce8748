//! WAL records as the other processes see them: a committed transaction with its changes, and
//! the records that move a logical slot or fill the disk. The server's WAL itself (positions,
//! page layout, sizes) is the PostgreSQL component's (`components::postgres::wal`).

use crate::core::change::Change;
use crate::core::ids::{Csn, MessageContent, Xid};
use crate::core::lsn::Lsn;
use crate::core::shared::CopyOnWrite;
use crate::core::time::SimTime;
use serde::{Deserialize, Serialize};

/// A transaction as it is in the WAL once committed: its records' positions and its changes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CommittedTxn {
    pub xid: Xid,
    pub csn: Csn,
    /// Start of the transaction's first record (the LSN pgoutput gives its BEGIN).
    pub first_lsn: Lsn,
    /// Start of the commit record: decoding emits the transaction iff this is at or after the
    /// start position.
    pub commit_lsn: Lsn,
    /// End of the commit record (`EndRecPtr`): what a consumer confirms to acknowledge it.
    pub end_lsn: Lsn,
    pub commit_time: SimTime,
    pub timeline: u32,
    pub changes: Vec<Change>,
}

/// A decoded WAL entry, in LSN order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WalEntry {
    Txn(CopyOnWrite<CommittedTxn>),
    /// `xl_running_xacts` (`LogStandbySnapshot`, `src/backend/storage/ipc/standby.c`), written by
    /// the background writer, at checkpoints and at slot creation: the top-level xids assigned
    /// and not yet out of the proc array, in every database (`GetRunningTransactionData`,
    /// `procarray.c`), and `nextXid`, exact at this record.
    RunningXacts {
        start: Lsn,
        end: Lsn,
        xids: Vec<Xid>,
        next_xid: Xid,
    },
    Checkpoint {
        start: Lsn,
        end: Lsn,
    },
    /// WAL written in a database nobody captures (`bytes` of it).
    OtherDatabase {
        start: Lsn,
        end: Lsn,
    },
    /// A promoted standby's `END_OF_RECOVERY`, the first record of its new timeline.
    EndOfRecovery {
        start: Lsn,
        end: Lsn,
        timeline: u32,
    },
    /// Unused since transaction blocks: a logical message is [`WalEntry::Message`]. Kept so
    /// that the variants after it keep their place.
    LogicalMessage {
        start: Lsn,
        end: Lsn,
    },
    /// `pg_switch_wal()`'s `XLOG_SWITCH`: the rest of its segment counts as written.
    Switch {
        start: Lsn,
        end: Lsn,
    },
    // ----- transaction blocks (later additions stay at the end) -----
    /// A change record of a transaction block, written when its statement ran, long before its
    /// commit: one heap record per row (`heap_insert`, `heap_update`, `heap_delete`,
    /// `src/backend/access/heap/heapam.c`), or one `Heap2 MULTI_INSERT` whose rows all carry
    /// its start (`heap_multi_insert`, a `COPY`). Each change's `lsn` is `start`. The record's
    /// database is its table's.
    Changes {
        xid: Xid,
        start: Lsn,
        end: Lsn,
        changes: Vec<Change>,
    },
    /// The commit record of a transaction block (`XactLogCommitRecord`, `xact.c`), carrying the
    /// whole transaction: every change (already in WAL as [`WalEntry::Changes`]) and its
    /// positions (`first_lsn` its first record, `commit_lsn` this record's start). Its entry
    /// starts at `commit_lsn`.
    Commit(CopyOnWrite<CommittedTxn>),
    /// The abort record of a transaction block that had an xid (`XactLogAbortRecord`, written by
    /// `RecordTransactionAbort`, `xact.c`). A crash writes none.
    Abort {
        xid: Xid,
        start: Lsn,
        end: Lsn,
    },
    /// `pg_logical_emit_message(transactional, prefix, content)` (`LogLogicalMessage`,
    /// `src/backend/replication/logical/message.c`). Boxed: the rare entry with strings and an
    /// event keeps every other entry of the WAL small.
    Message(Box<MessageRecord>),
}

/// A logical decoding message's WAL record ([`WalEntry::Message`]): `xid` is the writer's, if it
/// had one (a transactional message forces one); `database` is the writer's (`None`: the main
/// one).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MessageRecord {
    pub xid: Option<Xid>,
    pub transactional: bool,
    pub prefix: String,
    pub payload_bytes: u64,
    pub database: Option<String>,
    pub start: Lsn,
    pub end: Lsn,
    /// What its content is: an outbox event, or bytes the model does not keep.
    #[serde(default, skip_serializing_if = "MessageContent::is_opaque")]
    pub content: MessageContent,
}

impl WalEntry {
    pub fn start(&self) -> Lsn {
        match self {
            WalEntry::Txn(txn) => txn.first_lsn,
            WalEntry::Commit(txn) => txn.commit_lsn,
            WalEntry::Message(message) => message.start,
            WalEntry::RunningXacts { start, .. }
            | WalEntry::Changes { start, .. }
            | WalEntry::Abort { start, .. }
            | WalEntry::Checkpoint { start, .. }
            | WalEntry::OtherDatabase { start, .. }
            | WalEntry::EndOfRecovery { start, .. }
            | WalEntry::LogicalMessage { start, .. }
            | WalEntry::Switch { start, .. } => *start,
        }
    }

    pub fn end(&self) -> Lsn {
        match self {
            WalEntry::Txn(txn) | WalEntry::Commit(txn) => txn.end_lsn,
            WalEntry::Message(message) => message.end,
            WalEntry::RunningXacts { end, .. }
            | WalEntry::Changes { end, .. }
            | WalEntry::Abort { end, .. }
            | WalEntry::Checkpoint { end, .. }
            | WalEntry::OtherDatabase { end, .. }
            | WalEntry::EndOfRecovery { end, .. }
            | WalEntry::LogicalMessage { end, .. }
            | WalEntry::Switch { end, .. } => *end,
        }
    }

    /// "Important" WAL in the sense of `GetLastImportantRecPtr`: everything but the standby
    /// snapshot records themselves.
    pub fn is_important(&self) -> bool {
        !matches!(self, WalEntry::RunningXacts { .. })
    }

    /// A committed transaction: an autocommit one written in one step ([`WalEntry::Txn`]) or a
    /// transaction block's commit ([`WalEntry::Commit`]).
    pub fn committed(&self) -> Option<&CommittedTxn> {
        match self {
            WalEntry::Txn(txn) | WalEntry::Commit(txn) => Some(txn),
            _ => None,
        }
    }
}
