//! WAL records as the other processes see them: a committed transaction with its changes, and
//! the records that move a logical slot or fill the disk. The server's WAL itself (positions,
//! page layout, sizes) is the PostgreSQL component's (`components::postgres::wal`).

use crate::core::change::Change;
use crate::core::ids::{Csn, Xid};
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
    /// `xl_running_xacts`, written by the background writer, at checkpoints and at slot
    /// creation. Always empty here: transactions are atomic in this model.
    RunningXacts {
        start: Lsn,
        end: Lsn,
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
    /// `pg_logical_emit_message`: the message record and, for a transactional one, its
    /// commit. pgoutput sends messages only with its `messages` option, which no client here
    /// sets (`pgoutput_message`), so decoding passes over it.
    LogicalMessage {
        start: Lsn,
        end: Lsn,
    },
    /// `pg_switch_wal()`'s `XLOG_SWITCH`: the rest of its segment counts as written.
    Switch {
        start: Lsn,
        end: Lsn,
    },
}

impl WalEntry {
    pub fn start(&self) -> Lsn {
        match self {
            WalEntry::Txn(txn) => txn.first_lsn,
            WalEntry::RunningXacts { start, .. }
            | WalEntry::Checkpoint { start, .. }
            | WalEntry::OtherDatabase { start, .. }
            | WalEntry::EndOfRecovery { start, .. }
            | WalEntry::LogicalMessage { start, .. }
            | WalEntry::Switch { start, .. } => *start,
        }
    }

    pub fn end(&self) -> Lsn {
        match self {
            WalEntry::Txn(txn) => txn.end_lsn,
            WalEntry::RunningXacts { end, .. }
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
}
