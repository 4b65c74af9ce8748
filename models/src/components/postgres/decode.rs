//! Logical decoding of one slot: the reorder buffer and what pgoutput emits
//! (`src/backend/replication/logical/decode.c`, `reorderbuffer.c`, `snapbuild.c`,
//! `src/backend/replication/pgoutput/pgoutput.c`).
//!
//! A decoder reads the WAL from the slot's `restart_lsn`, entry by entry:
//! - every record carrying an xid creates that transaction's entry in the reorder buffer if it
//!   has none (`ReorderBufferProcessXid`, before any filtering by database), with `first_lsn`
//!   its start; a change or transactional message of the slot's database is queued in it;
//! - a commit record emits the whole transaction, its changes (and, for a client that asked for
//!   `messages`, its transactional messages) in LSN order, iff its commit record starts at or
//!   after `start_decoding_at` and it is in the slot's database (`DecodeCommit`,
//!   `DecodeTXNNeedSkip`); pgoutput sends nothing for a transaction with nothing to send
//!   (PostgreSQL ≥ 15). So transactions come out whole, in commit order, whatever order they
//!   began in;
//! - an abort record forgets the transaction (`ReorderBufferAbort`);
//! - a non-transactional message is emitted at once when its record starts at or after
//!   `start_decoding_at` (`logicalmsg_decode`), between whole transactions;
//! - a running-xacts record (RX) proposes the slot's next `restart_lsn` and `catalog_xmin`
//!   (`SnapBuildProcessRunningXacts`): the restart point is the last RX this decoder
//!   serialised before the oldest buffered transaction's first record (its
//!   `restart_decoding_lsn`, frozen when its entry was created from
//!   `rb->current_restart_decoding_lsn`; nothing when it had serialised none), or the RX itself
//!   when none is buffered; the `catalog_xmin` is the oldest base snapshot's xmin among the
//!   buffered transactions (`ReorderBufferGetOldestXmin`: a transaction gets its base snapshot
//!   at its first decoded change in the slot's database, `SnapBuildProcessChange`, with the
//!   builder's xmin then, the `oldestRunningXid` of the last RX read), or, with none, the RX's
//!   `oldestRunningXid`. Then the buffered transactions older than `oldestRunningXid` are
//!   dropped: they crashed (`ReorderBufferAbortOld`).
//!
//! Positions, as pgoutput gives them in PostgreSQL 15 (reference postgres-transactions.md
//! §6.3): a change's LSN is its record's start; a message's is its record's end; BEGIN's is the
//! first sent item's (pgoutput defers BEGIN to the first change or message it sends,
//! `pgoutput_send_begin`); COMMIT's is the end of the commit record. A COMMIT's end can equal a
//! later-emitted transaction's change LSN: the record after a commit can belong to a
//! transaction that was open before it.
//!
//! Transactions written in one step ([`WalEntry::Txn`]) have no record between their first and
//! their commit, so they never need the buffer.
//!
//! A slot's creation (and its waits) is the snapshot builder's business (`creation.rs`). A
//! decoder that reads from the creation's `restart_lsn` (no RX was serialised there) rebuilds
//! the snapshot through the same records (`SnapBuildFindSnapshot`), up to and including the RX
//! that made the creation consistent: until then no RX is serialised, so none proposes a
//! restart point; an RX that makes the builder consistent with nothing running proposes
//! nothing at all; and only changes the builder collects (FULL_SNAPSHOT from `next_phase_at`
//! on) are queued and get a base snapshot. From a serialised RX the snapshot is restored
//! (`SnapBuildRestore`) and the decoder is consistent from its first record.
//!
//! Left out: PostgreSQL hands every transaction the builder's cached snapshot
//! (`builder->snapshot`, rebuilt at a catalog-modifying commit); here a transaction's base
//! snapshot takes the builder's xmin at its first change.

use super::snapbuild::{Found, RunningXacts, SnapBuilder};
use super::*;
use crate::core::protocol::DecodedMessage;
use crate::core::wal::{CommittedTxn, MessageRecord};

/// One open transaction in the reorder buffer (`ReorderBufferTXN`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) struct BufferedTxn {
    pub xid: Xid,
    /// The first record seen with its xid.
    pub first_lsn: Lsn,
    /// Its queued changes of the slot's database, in LSN order.
    pub changes: Vec<Change>,
    /// Its queued transactional messages of the slot's database.
    pub messages: Vec<DecodedMessage>,
    /// The xmin of its base snapshot (`ReorderBufferSetBaseSnapshot` at its first decoded change
    /// or transactional message in the slot's database, `SnapBuildProcessChange`): the builder's
    /// xmin then, the `oldestRunningXid` of the last RX read. `None`: it has none yet.
    pub base_xmin: Option<Xid>,
}

/// The reorder buffer: the open transactions a decoder has seen, in `first_lsn` order
/// (`toplevel_by_lsn`). Empty unless transaction blocks are open.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) struct ReorderBuffer {
    pub txns: Vec<BufferedTxn>,
    /// The builder's xmin (`builder->xmin`): the `oldestRunningXid` of the last RX read.
    pub builder_xmin: Option<Xid>,
    /// While the decoder reads at or before the slot's creation consistent point: the snapshot
    /// builder rebuilding what the creation built (`SnapBuildFindSnapshot`); `None` before the
    /// first RX and after it.
    pub rebuilding: Option<Box<SnapBuilder>>,
}

/// What a decoder emits for one WAL entry.
pub(super) enum Decoded {
    Nothing,
    Txn(DecodedTxn),
    Message(DecodedMessage),
    /// An RX was processed: the slot's candidates (`None` proposes nothing).
    RunningXacts {
        rx: Lsn,
        restart: Option<Lsn>,
        catalog_xmin: Option<Xid>,
    },
}

/// What a decoder is decoding for.
pub(super) struct DecodeContext<'a> {
    pub config: &'a PostgresConfig,
    pub publications: &'a BTreeMap<String, super::Publication>,
    pub publication: &'a str,
    pub slot_database: Option<&'a str>,
    /// `start_decoding_at`: transactions whose commit starts before it are not emitted.
    pub start: Lsn,
    /// pgoutput's `messages` option.
    pub messages: bool,
    /// The WAL, and where this decoder began reading it (the slot's `restart_lsn` then).
    pub wal: &'a Wal,
    pub read_from: Lsn,
    /// The start of the RX that made the slot's creation consistent
    /// ([`Slot::creation_consistent_at`]): a decoder reading from before it rebuilds the
    /// snapshot through the same records, and serialises no RX up to it.
    pub creation_consistent_at: Option<Lsn>,
}

impl DecodeContext<'_> {
    fn table_database(&self, table: TableId) -> Option<&str> {
        self.config.tables[usize::from(table.0)].database.as_deref()
    }

    fn is_slot_database(&self, database: Option<&str>) -> bool {
        database == self.slot_database
    }

    /// Whether the RX starting at `rx` was serialised by this decoder (`SnapBuildSerialize`,
    /// only once the builder is consistent): not one at or before the creation's consistent
    /// point, which a decoder reading from the creation's `restart_lsn` processes while
    /// rebuilding (`SnapBuildFindSnapshot`), the consistent one included.
    fn serialised(&self, rx: Lsn) -> bool {
        self.creation_consistent_at.is_none_or(|consistent| rx > consistent)
    }

    /// `restart_decoding_lsn` of a transaction first seen at `first_lsn`: the last RX this
    /// decoder serialised before it (`rb->current_restart_decoding_lsn`; `None`: it serialised
    /// none, `InvalidXLogRecPtr`).
    fn restart_decoding_lsn(&self, first_lsn: Lsn) -> Option<Lsn> {
        let before = self.wal.first_entry_at_or_after(first_lsn);
        self.wal.entries[..before]
            .iter()
            .rev()
            .take_while(|entry| entry.start() >= self.read_from)
            .find_map(|entry| match entry {
                WalEntry::RunningXacts { start, .. } => Some(*start),
                _ => None,
            })
            .filter(|rx| self.serialised(*rx))
    }

    /// Whether the decoder is still rebuilding the creation's snapshot at `lsn`.
    fn rebuilds_at(&self, lsn: Lsn) -> bool {
        self.creation_consistent_at.is_some_and(|consistent| lsn <= consistent)
    }
}

impl ReorderBuffer {
    /// `ReorderBufferProcessXid`: the transaction's entry, created at its first record.
    fn txn(&mut self, xid: Xid, lsn: Lsn) -> &mut BufferedTxn {
        let index = match self.txns.iter().position(|txn| txn.xid == xid) {
            Some(index) => index,
            None => {
                self.txns.push(BufferedTxn {
                    xid,
                    first_lsn: lsn,
                    changes: Vec::new(),
                    messages: Vec::new(),
                    base_xmin: None,
                });
                self.txns.len() - 1
            }
        };
        &mut self.txns[index]
    }

    /// `SnapBuildProcessChange` for a change (or transactional message) of `xid` in the slot's
    /// database at `lsn`: whether it is queued. While rebuilding the creation's snapshot, only in
    /// FULL_SNAPSHOT from `next_phase_at` on; the transaction gets its base snapshot at its
    /// first queued one.
    fn process_change(&mut self, cx: &DecodeContext, xid: Xid, lsn: Lsn) -> bool {
        if cx.rebuilds_at(lsn) && !self.rebuilding.as_ref().is_some_and(|builder| builder.collects_changes_of(xid)) {
            return false;
        }
        let builder_xmin = self.builder_xmin;
        let txn = self.txn(xid, lsn);
        if txn.base_xmin.is_none() {
            txn.base_xmin = builder_xmin;
        }
        true
    }

    /// `SnapBuildProcessRunningXacts` up to the proposals: whether this RX proposes anything.
    /// While rebuilding, `SnapBuildFindSnapshot` decides (nothing when it makes the builder
    /// consistent with nothing running); the waits it would start are long over.
    fn process_running_xacts(&mut self, cx: &DecodeContext, record: RunningXacts<'_>) -> bool {
        self.builder_xmin = Some(record.oldest_running_xid());
        if !cx.rebuilds_at(record.start) {
            self.rebuilding = None;
            return true;
        }
        let builder = self.rebuilding.get_or_insert_with(|| Box::new(SnapBuilder::new(false)));
        match builder.process_running_xacts(record) {
            Found::Consistent { nothing_running: true } => false,
            Found::Consistent { nothing_running: false } | Found::ReadOn | Found::Wait { .. } => true,
        }
    }

    fn take(&mut self, xid: Xid) -> Option<BufferedTxn> {
        let index = self.txns.iter().position(|txn| txn.xid == xid)?;
        Some(self.txns.remove(index))
    }

    /// Decodes one WAL entry.
    pub(super) fn decode(&mut self, cx: &DecodeContext, entry: &WalEntry) -> Decoded {
        match entry {
            WalEntry::Txn(txn) => {
                if txn.commit_lsn >= cx.start
                    && let Some(decoded) = decode_txn(cx, txn, &txn.changes, &[])
                {
                    return Decoded::Txn(decoded);
                }
                Decoded::Nothing
            }
            WalEntry::Changes { xid, start, changes, .. } => {
                let database = changes.first().and_then(|change| cx.table_database(change.table));
                self.txn(*xid, *start);
                if cx.is_slot_database(database) && self.process_change(cx, *xid, *start) {
                    self.txn(*xid, *start).changes.extend_from_slice(changes);
                }
                Decoded::Nothing
            }
            WalEntry::Message(record) => {
                let MessageRecord { xid, transactional, prefix, payload_bytes, database, start, end, content } =
                    &**record;
                if let Some(xid) = xid {
                    self.txn(*xid, *start);
                }
                if !cx.is_slot_database(database.as_deref()) {
                    return Decoded::Nothing;
                }
                let message = DecodedMessage {
                    lsn: *end,
                    transactional: *transactional,
                    prefix: prefix.clone(),
                    payload_bytes: *payload_bytes,
                    content: *content,
                };
                match (transactional, xid) {
                    (true, Some(xid)) => {
                        if self.process_change(cx, *xid, *start) {
                            self.txn(*xid, *start).messages.push(message);
                        }
                        Decoded::Nothing
                    }
                    _ if *start >= cx.start && cx.messages => Decoded::Message(message),
                    _ => Decoded::Nothing,
                }
            }
            WalEntry::Commit(txn) => {
                let Some(buffered) = self.take(txn.xid) else { return Decoded::Nothing };
                if txn.commit_lsn < cx.start {
                    return Decoded::Nothing;
                }
                let messages = if cx.messages { buffered.messages.as_slice() } else { &[] };
                decode_txn(cx, txn, &buffered.changes, messages).map_or(Decoded::Nothing, Decoded::Txn)
            }
            WalEntry::Abort { xid, .. } => {
                self.take(*xid);
                Decoded::Nothing
            }
            WalEntry::RunningXacts { start, end, xids, next_xid } => {
                let record = RunningXacts { start: *start, end: *end, next_xid: *next_xid, xids };
                let oldest_running = record.oldest_running_xid();
                let proposes = self.process_running_xacts(cx, record);
                // `ReorderBufferGetOldestXmin`, else `oldestRunningXid`.
                let catalog_xmin =
                    proposes.then(|| self.txns.iter().filter_map(|txn| txn.base_xmin).min().unwrap_or(oldest_running));
                // Only from a serialised RX (the builder is consistent): the oldest transaction's
                // `restart_decoding_lsn`, or this RX when none is buffered.
                let restart = match self.txns.iter().min_by_key(|txn| txn.first_lsn) {
                    _ if !proposes || !cx.serialised(*start) => None,
                    Some(oldest) => cx.restart_decoding_lsn(oldest.first_lsn),
                    None => Some(*start),
                };
                // `ReorderBufferAbortOld`: what is older than every running xid crashed.
                self.txns.retain(|txn| txn.xid >= oldest_running);
                Decoded::RunningXacts { rx: *start, restart, catalog_xmin }
            }
            WalEntry::Checkpoint { .. }
            | WalEntry::OtherDatabase { .. }
            | WalEntry::EndOfRecovery { .. }
            | WalEntry::LogicalMessage { .. }
            | WalEntry::Switch { .. } => Decoded::Nothing,
        }
    }
}

/// What pgoutput emits for one committed transaction whose queued changes are `changes` and
/// transactional messages `messages`: the published changes and the messages in LSN order, or
/// nothing when the transaction is in another database (`DecodeTXNNeedSkip`) or has nothing to
/// send (PostgreSQL ≥ 15 sends no empty transactions). A publication that does not exist
/// publishes every table here, as the walsender checks it at start. `first_lsn` is BEGIN's
/// position: the first sent item's.
fn decode_txn(
    cx: &DecodeContext,
    txn: &CommittedTxn,
    changes: &[Change],
    messages: &[DecodedMessage],
) -> Option<DecodedTxn> {
    let database = txn.changes.first().and_then(|change| cx.table_database(change.table));
    if !txn.changes.is_empty() && !cx.is_slot_database(database) {
        return None;
    }
    let publication = cx.publications.get(cx.publication);
    let changes: Vec<Change> = changes
        .iter()
        .filter(|change| publication.is_none_or(|p| p.publishes(change.table, txn.commit_lsn)))
        .copied()
        .collect();
    // A message is sent before a change at the same LSN: it ended where the change starts.
    let first_lsn = match (changes.first(), messages.first()) {
        (Some(change), Some(message)) => change.lsn.min(message.lsn),
        (Some(change), None) => change.lsn,
        (None, Some(message)) => message.lsn,
        (None, None) => return None,
    };
    Some(DecodedTxn {
        xid: txn.xid,
        first_lsn,
        commit_lsn: txn.commit_lsn,
        end_lsn: txn.end_lsn,
        commit_time: txn.commit_time,
        changes,
        messages: messages.to_vec(),
    })
}
