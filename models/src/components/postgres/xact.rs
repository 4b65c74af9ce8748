//! Transaction blocks: `BEGIN`, statements, `COMMIT`, `ROLLBACK` in a session, as PostgreSQL
//! runs them (`src/backend/access/transam/xact.c`; reference postgres-transactions.md §1, §3,
//! §8).
//!
//! - A block has no xid until it first writes (`AssignTransactionId` is lazy): a statement that
//!   changes no row, or a read, leaves it without one. From its assignment the xid is running:
//!   in the proc array ([`Postgres::running_xids`]), so in every running-xacts record.
//! - Each changed row is its own WAL record ([`WalEntry::Changes`]) with its own LSN, written
//!   when the statement runs (`heap_insert`, `heap_update`, `heap_delete`); a `COPY`'s inserts
//!   share one `MULTI_INSERT` record and its LSN (`heap_multi_insert`). They are not flushed
//!   until the block's commit (or another flush, or the WAL writer): decoding, which reads to
//!   the flush pointer, sees them then.
//! - The block's changes are staged in its session: nobody else sees them until it commits; its
//!   own statements do. The rows it changed are locked: another statement touching one waits
//!   (`heap_update` → `XactLockTableWait`) until the holder ends, then, under READ COMMITTED,
//!   runs against the new row version (`EvalPlanQual`, `src/backend/executor/execMain.c`), and
//!   under REPEATABLE READ fails with `could not serialize access due to concurrent update` if
//!   the holder committed a change to it. An insert of a key another open block inserted waits
//!   the same way (`_bt_check_unique`).
//! - An error (duplicate key, serialization failure, deadlock) aborts the block at once: the
//!   ABORT record is written then, the xid and locks are released, and the block only accepts
//!   `ROLLBACK` (a `COMMIT` rolls back) (`AbortCurrentTransaction`, `TBLOCK_ABORT`).
//! - `COMMIT` writes the commit record carrying the whole transaction ([`WalEntry::Commit`]),
//!   applies the changes to the tables (durable: a crash from now on keeps the transaction), and
//!   only in a later step ([`Timer::CommitVisible`], no delay) leaves the proc array, becomes
//!   visible to new snapshots, releases its locks and answers (`RecordTransactionCommit`, then
//!   `ProcArrayEndTransaction`, then `ResourceOwnerRelease` in `CommitTransaction`). Between the
//!   two the transaction is decodable but invisible. A block that wrote nothing writes no commit
//!   record and answers `Ok`.
//! - `ROLLBACK` writes an ABORT record if the block had an xid (`RecordTransactionAbort`). A
//!   session that ends aborts its block; a crash aborts every block and writes nothing.
//!
//! Autocommit statements ([`SqlRequest::Transaction`], and [`SqlRequest::Statement`] outside a
//! block) stay one step with one [`WalEntry::Txn`]: they wait for a row lock like a block's
//! statement, and run whole when it is released.
//!
//! Simplifications: a statement that meets a locked row waits before writing any of its rows
//! (PostgreSQL writes the rows before the locked one first, then waits); waiters wake in the
//! order they began waiting; a deadlock is reported at once to the waiter that closes the
//! cycle (PostgreSQL reports it after `deadlock_timeout`, 1 s); subtransactions are not
//! modelled. Blocks whose commit records are written become visible one after the other, in
//! commit order, in one step; a snapshot taken meanwhile sees every commit but theirs
//! (`snapshot.rs`).

use super::functions::LogicalMessage;
use super::snapshot::{SeenCommits, Snapshot};
use super::*;
use crate::core::protocol::Isolation;

/// A session's open transaction block.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) struct Block {
    pub isolation: Isolation,
    /// Assigned at the first write.
    pub xid: Option<Xid>,
    /// The start of its first WAL record.
    pub first_lsn: Option<Lsn>,
    /// Its tables' database (`None`: the main one), known from its first change.
    pub database: Option<String>,
    /// Every change it wrote, in LSN order.
    pub changes: Vec<Change>,
    /// The rows as it changed them (`None`: deleted): what its own statements see.
    pub staged: BTreeMap<(TableId, Key), Option<Row>>,
    /// REPEATABLE READ: the snapshot taken at its first statement, or imported
    /// (`SET TRANSACTION SNAPSHOT`).
    pub snapshot: Option<Snapshot>,
    /// An error aborted it (`TBLOCK_ABORT`): the xid it had, if any.
    pub failed: Option<Option<Xid>>,
}

impl Block {
    fn new(isolation: Isolation) -> Block {
        Block {
            isolation,
            xid: None,
            first_lsn: None,
            database: None,
            changes: Vec::new(),
            staged: BTreeMap::new(),
            snapshot: None,
            failed: None,
        }
    }
}

/// A statement waiting for a row lock: it runs again when `on` ends.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) struct Parked {
    pub on: Xid,
    pub request: SqlRequest,
}

/// A block whose commit record is written and which is not yet visible.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) struct Committing {
    pub client: Node,
    pub session: SessionId,
    pub xid: Xid,
    /// Its commit's csn (`None`: it changed no row, only wrote messages).
    pub csn: Option<Csn>,
    /// The rows it locked.
    pub locked: Vec<(TableId, Key)>,
    pub reply: SqlReply,
}

pub(super) const ABORTED_BLOCK: &str =
    "ERROR: current transaction is aborted, commands ignored until end of transaction block";

fn serialization_failure() -> String {
    "ERROR: could not serialize access due to concurrent update".into()
}

/// The key an operation touches.
fn op_row(op: &RowOp) -> (TableId, Key) {
    op.target()
}

/// The row an insert writes; `None` for an update or a delete.
fn inserted_row(op: &RowOp) -> Option<Row> {
    match *op {
        RowOp::InsertEvent { aggregate_id, event_type, .. } => Some(Row::event(aggregate_id, event_type)),
        RowOp::Insert { status, amount_cents, .. } => Some(Row::new(1, status, amount_cents)),
        RowOp::Update { .. } | RowOp::Delete { .. } => None,
    }
}

impl Postgres {
    // ----- the proc array -----

    /// The top-level xids running now, in every database: blocks with an xid, and committed
    /// blocks not yet out of the proc array (`GetRunningTransactionData`, `procarray.c`).
    /// Sorted.
    pub(super) fn running_xids(&self) -> Vec<Xid> {
        let mut xids: Vec<Xid> = self.volatile.committing.iter().map(|committing| committing.xid).collect();
        if self.volatile.open_blocks > 0 {
            for session in self.volatile.sessions.values() {
                if let Session::Sql { block: Some(block), .. } = &**session
                    && let Some(xid) = block.xid
                {
                    xids.push(xid);
                }
            }
        }
        xids.sort_unstable();
        xids
    }

    pub(super) fn block(&self, client: Node, session: SessionId) -> Option<&Block> {
        match self.volatile.sessions.get(&(client, session)).map(|shared| &**shared) {
            Some(Session::Sql { block: Some(block), .. }) => Some(block),
            _ => None,
        }
    }

    pub(super) fn block_mut(&mut self, client: Node, session: SessionId) -> Option<&mut Block> {
        match self.volatile.sessions.get_mut(&(client, session)).map(CopyOnWrite::get_mut) {
            Some(Session::Sql { block: Some(block), .. }) => Some(block),
            _ => None,
        }
    }

    fn set_block(&mut self, client: Node, session: SessionId, new: Option<Block>) {
        let shared = self
            .volatile
            .sessions
            .entry((client, session))
            .or_insert_with(|| CopyOnWrite::new(Session::Sql { scan: None, block: None, parked: None }));
        if let Session::Sql { block, .. } = shared.get_mut() {
            match (block.is_some(), new.is_some()) {
                (false, true) => self.volatile.open_blocks += 1,
                (true, false) => self.volatile.open_blocks -= 1,
                _ => {}
            }
            *block = new.map(Box::new);
        }
    }

    /// Whether the session has an open block (failed or not).
    pub(super) fn in_block(&self, client: Node, session: SessionId) -> bool {
        self.block(client, session).is_some()
    }

    // ----- BEGIN, statements, COMMIT, ROLLBACK -----

    /// `BEGIN ISOLATION LEVEL …`. Inside a block PostgreSQL only warns.
    pub(super) fn begin(&mut self, client: Node, session: SessionId, isolation: Isolation) -> SqlReply {
        if !self.in_block(client, session) {
            self.set_block(client, session, Some(Block::new(isolation)));
        }
        SqlReply::Ok
    }

    /// A statement: in the session's block, or autocommit outside one. `None`: it waits for a
    /// row lock (its reply comes when it runs).
    pub(super) fn statement(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        ops: Vec<RowOp>,
        copy: bool,
    ) -> Option<SqlReply> {
        let Some(block) = self.block(client, session) else {
            return self.autocommit(ctx, client, session, SqlRequest::Statement { ops, copy });
        };
        if block.failed.is_some() {
            return Some(SqlReply::Error(ABORTED_BLOCK.into()));
        }
        if self.durable.role == Role::Standby {
            let reply = SqlReply::Error("ERROR: cannot execute INSERT in a read-only transaction".into());
            self.fail_block(ctx, client, session);
            return Some(reply);
        }
        // REPEATABLE READ takes its snapshot at the first statement, before any wait.
        if block.isolation == Isolation::RepeatableRead && block.snapshot.is_none() {
            let snapshot = self.take_snapshot(block.xid);
            self.block_mut(client, session).expect("open").snapshot = Some(snapshot);
        }
        let block = self.block(client, session).expect("open");
        let own_xid = block.xid;
        if let Some(holder) = self.lock_holder(&ops, own_xid) {
            return self.park(ctx, client, session, holder, SqlRequest::Statement { ops, copy });
        }
        let seen = block.snapshot.as_ref().map(|snapshot| &snapshot.seen);
        let pending = match self.plan(&ops, &block.staged, seen) {
            Ok(pending) => pending,
            Err(error) => {
                self.fail_block(ctx, client, session);
                return Some(SqlReply::Error(error));
            }
        };
        if pending.is_empty() {
            return Some(SqlReply::StatementDone { changes: Vec::new() });
        }
        let write_before = self.durable.wal.write_lsn();
        let xid = self.assign_xid(client, session);
        let database = self.config.tables[usize::from(pending[0].0.0)].database.clone();
        let mut changes = Vec::with_capacity(pending.len());
        for (start, end, record) in self.insert_change_records(pending, copy) {
            changes.extend_from_slice(&record);
            self.durable.wal.get_mut().push(WalEntry::Changes { xid, start, end, changes: record });
        }
        self.arm_wal_writer(ctx);
        let mut locked = Vec::with_capacity(changes.len());
        let block = self.block_mut(client, session).expect("open");
        block.first_lsn.get_or_insert(changes[0].lsn);
        if block.changes.is_empty() {
            block.database = database;
        }
        for change in &changes {
            block.staged.insert((change.table, change.key), change.kind.after());
            locked.push((change.table, change.key));
        }
        block.changes.extend_from_slice(&changes);
        for row in locked {
            self.volatile.row_locks.insert(row, xid);
        }
        self.after_wal_append(ctx);
        self.after_segments_written(ctx, write_before);
        Some(SqlReply::StatementDone { changes })
    }

    /// The block's xid, assigned now if it has none (`AssignTransactionId`).
    fn assign_xid(&mut self, client: Node, session: SessionId) -> Xid {
        let next = self.durable.next_xid;
        let block = self.block_mut(client, session).expect("open");
        match block.xid {
            Some(xid) => xid,
            None => {
                block.xid = Some(next);
                self.durable.next_xid += 1;
                next
            }
        }
    }

    /// An autocommit statement (or `Transaction`): waits for a row lock, else runs whole.
    pub(super) fn autocommit(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        request: SqlRequest,
    ) -> Option<SqlReply> {
        let (ops, copy) = match &request {
            SqlRequest::Transaction { ops } => (ops, false),
            SqlRequest::Statement { ops, copy } => (ops, *copy),
            SqlRequest::OutboxMessage { ops, .. } => (ops, false),
            _ => return Some(SqlReply::Error("ERROR: not a statement".into())),
        };
        if !self.volatile.row_locks.is_empty()
            && let Some(holder) = self.lock_holder(ops, None)
        {
            return self.park(ctx, client, session, holder, request);
        }
        match request {
            SqlRequest::OutboxMessage { ops, transactional, prefix, payload_bytes, event } => {
                Some(self.execute_outbox_message(ctx, &ops, transactional, prefix, payload_bytes, event))
            }
            _ => Some(self.execute(ctx, ops, copy)),
        }
    }

    /// [`SqlRequest::OutboxMessage`]: in the session's block, its statement joins the block (a
    /// wait for a row lock holds the message back with it) and then its message; outside one, the
    /// whole transaction as one autocommit step.
    pub(super) fn outbox_message(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        request: SqlRequest,
    ) -> Option<SqlReply> {
        if !self.in_block(client, session) {
            return self.autocommit(ctx, client, session, request);
        }
        let SqlRequest::OutboxMessage { ops, transactional, prefix, payload_bytes, event } = &request else {
            return Some(SqlReply::Error("ERROR: not an outbox message".into()));
        };
        match self.statement(ctx, client, session, ops.clone(), false) {
            None => {
                // It waits for a row lock: the message waits with its statement, and the whole
                // request runs again when the lock is released.
                if let Some(Session::Sql { parked: Some(parked), .. }) =
                    self.volatile.sessions.get_mut(&(client, session)).map(CopyOnWrite::get_mut)
                {
                    parked.request = request.clone();
                }
                None
            }
            Some(SqlReply::Error(error)) => Some(SqlReply::Error(error)),
            Some(_) => {
                let message = LogicalMessage {
                    transactional: *transactional,
                    prefix: prefix.clone(),
                    payload_bytes: *payload_bytes,
                    content: MessageContent::Event(*event),
                };
                Some(self.block_message(ctx, client, session, message))
            }
        }
    }

    /// The open transaction holding a lock on a row of `ops`, other than `own`.
    fn lock_holder(&self, ops: &[RowOp], own: Option<Xid>) -> Option<Xid> {
        if self.volatile.row_locks.is_empty() {
            return None;
        }
        ops.iter()
            .find_map(|op| self.volatile.row_locks.get(&op_row(op)).copied().filter(|holder| Some(*holder) != own))
    }

    /// The session whose block has `xid`.
    fn session_of(&self, xid: Xid) -> Option<(Node, SessionId)> {
        self.volatile.sessions.iter().find_map(|(id, session)| match &**session {
            Session::Sql { block: Some(block), .. } if block.xid == Some(xid) => Some(*id),
            _ => None,
        })
    }

    /// The statement waits for `holder` (`XactLockTableWait`), unless waiting would close a
    /// cycle: then it fails with a deadlock (`DeadLockCheck`, `src/backend/storage/lmgr/deadlock.c`).
    fn park(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        holder: Xid,
        request: SqlRequest,
    ) -> Option<SqlReply> {
        if let Some(own) = self.block(client, session).and_then(|block| block.xid) {
            let mut waited = holder;
            for _ in 0..=self.volatile.sessions.len() {
                let Some(id) = self.session_of(waited) else { break };
                let Some(Session::Sql { parked: Some(parked), .. }) = self.volatile.sessions.get(&id).map(|s| &**s)
                else {
                    break;
                };
                if parked.on == own {
                    self.fail_block(ctx, client, session);
                    return Some(SqlReply::Error(
                        "ERROR: deadlock detected DETAIL: Process waits for ShareLock on transaction; blocked by \
                         another process."
                            .into(),
                    ));
                }
                waited = parked.on;
            }
        }
        let shared = self
            .volatile
            .sessions
            .entry((client, session))
            .or_insert_with(|| CopyOnWrite::new(Session::Sql { scan: None, block: None, parked: None }));
        if let Session::Sql { parked, .. } = shared.get_mut() {
            *parked = Some(Box::new(Parked { on: holder, request }));
        }
        self.volatile.lock_waits.push((client, session));
        None
    }

    /// `xid` ended: committed and out of the proc array, or aborted; its lock is released
    /// (`XactLockTableDelete` at the end of `CommitTransaction` / `AbortTransaction`). Whatever
    /// waits on it (`XactLockTableWait`) goes on from here: the statements waiting for one of
    /// its rows, in the order they began waiting.
    fn xid_ended(&mut self, ctx: &mut Ctx, xid: Xid) {
        self.wake_waiters(ctx, xid);
        self.creations_transaction_ended(ctx, xid);
    }

    /// The statements waiting for a row of `xid` run again, in the order they began waiting.
    fn wake_waiters(&mut self, ctx: &mut Ctx, xid: Xid) {
        let waiting: Vec<(Node, SessionId)> = self
            .volatile
            .lock_waits
            .iter()
            .copied()
            .filter(|id| {
                matches!(self.volatile.sessions.get(id).map(|s| &**s),
                    Some(Session::Sql { parked: Some(parked), .. }) if parked.on == xid)
            })
            .collect();
        for (client, session) in waiting {
            self.volatile.lock_waits.retain(|id| *id != (client, session));
            let request = match self.volatile.sessions.get_mut(&(client, session)).map(CopyOnWrite::get_mut) {
                Some(Session::Sql { parked, .. }) => parked.take().map(|parked| parked.request),
                _ => None,
            };
            let Some(request) = request else { continue };
            let reply = match request {
                SqlRequest::Statement { ops, copy } => self.statement(ctx, client, session, ops, copy),
                outbox @ SqlRequest::OutboxMessage { .. } => self.outbox_message(ctx, client, session, outbox),
                other => self.autocommit(ctx, client, session, other),
            };
            if let Some(reply) = reply {
                ctx.send(client, Msg::SqlReply { session, reply });
                self.idle_in_transaction_from(ctx, client, session);
            }
        }
    }

    /// Releases the row locks of `xid`.
    fn release_locks(&mut self, xid: Xid, rows: &[(TableId, Key)]) {
        for row in rows {
            if self.volatile.row_locks.get(row) == Some(&xid) {
                self.volatile.row_locks.remove(row);
            }
        }
    }

    /// An error inside the block aborts it now (`AbortCurrentTransaction`): ABORT record if it
    /// had an xid, locks released; it stays open, failed, until ROLLBACK or COMMIT.
    fn fail_block(&mut self, ctx: &mut Ctx, client: Node, session: SessionId) {
        let Some(block) = self.block_mut(client, session) else { return };
        let old = std::mem::replace(block, Block::new(block.isolation));
        block.failed = Some(old.xid);
        self.abort(ctx, &old);
    }

    /// `RecordTransactionAbort` and the release of the block's locks.
    fn abort(&mut self, ctx: &mut Ctx, block: &Block) {
        let Some(xid) = block.xid else { return };
        let write_before = self.durable.wal.write_lsn();
        let (start, end) = self.durable.wal.get_mut().insert_record_unflushed(record_size::ABORT);
        self.durable.wal.get_mut().push(WalEntry::Abort { xid, start, end });
        self.arm_wal_writer(ctx);
        let rows: Vec<(TableId, Key)> = block.staged.keys().copied().collect();
        self.release_locks(xid, &rows);
        self.after_wal_append(ctx);
        self.after_segments_written(ctx, write_before);
        self.xid_ended(ctx, xid);
    }

    /// `ROLLBACK`. Outside a block PostgreSQL only warns.
    pub(super) fn rollback(&mut self, ctx: &mut Ctx, client: Node, session: SessionId) -> SqlReply {
        let Some(block) = self.block(client, session).cloned() else { return SqlReply::Ok };
        self.set_block(client, session, None);
        if let Some(xid) = block.failed {
            return SqlReply::RolledBack { xid };
        }
        self.abort(ctx, &block);
        SqlReply::RolledBack { xid: block.xid }
    }

    /// The session ended (closed, or its client is gone): its block aborts, its wait ends.
    pub(super) fn end_session_block(&mut self, ctx: &mut Ctx, client: Node, session: SessionId) {
        self.volatile.lock_waits.retain(|id| *id != (client, session));
        if let Some(block) = self.block(client, session).cloned() {
            self.set_block(client, session, None);
            self.abort(ctx, &block);
        }
    }

    /// `COMMIT`: `None` while the commit becomes visible (the reply comes with it).
    pub(super) fn commit(&mut self, ctx: &mut Ctx, client: Node, session: SessionId) -> Option<SqlReply> {
        let Some(block) = self.block(client, session).cloned() else { return Some(SqlReply::Ok) };
        self.set_block(client, session, None);
        if let Some(xid) = block.failed {
            return Some(SqlReply::RolledBack { xid });
        }
        let Some(xid) = block.xid else { return Some(SqlReply::Ok) };
        let write_before = self.durable.wal.write_lsn();
        let (commit_lsn, end_lsn) = self.durable.wal.get_mut().insert_record(record_size::COMMIT);
        let csn = if block.changes.is_empty() {
            self.durable.csn
        } else {
            self.durable.csn += 1;
            self.durable.csn
        };
        for change in &block.changes {
            self.durable.tables.get_mut()[usize::from(change.table.0)].apply(&change.kind, change.key, csn);
        }
        let txn = CopyOnWrite::new(CommittedTxn {
            xid,
            csn,
            first_lsn: block.first_lsn.unwrap_or(commit_lsn),
            commit_lsn,
            end_lsn,
            commit_time: ctx.now,
            timeline: self.durable.timeline,
            changes: block.changes.clone(),
        });
        self.durable.wal.get_mut().push(WalEntry::Commit(txn.clone()));
        if !block.changes.is_empty() {
            ctx.observe(Observation::Committed { server: self.node, txn: crate::core::shared::ByContent(txn) });
        }
        ctx.observe(Observation::CommitWritten { server: self.node, xid, commit_lsn, end_lsn });
        self.volatile.committing.push(Committing {
            client,
            session,
            xid,
            csn: (!block.changes.is_empty()).then_some(csn),
            locked: block.staged.keys().copied().collect(),
            reply: SqlReply::Committed { xid, commit_lsn, end_lsn, changes: block.changes },
        });
        ctx.set_timer(Timer::CommitVisible, 0);
        self.after_wal_append(ctx);
        self.after_segments_written(ctx, write_before);
        None
    }

    /// [`Timer::CommitVisible`]: every block whose commit record is written leaves the proc
    /// array, in commit order: visible, locks released, COMMIT answered, waiters woken.
    pub(super) fn commits_visible(&mut self, ctx: &mut Ctx) {
        // One after the other: while one leaves, the later ones are still in the proc array (a
        // running-xacts record a woken slot creation logs lists them).
        while !self.volatile.committing.is_empty() {
            let committing = self.volatile.committing.remove(0);
            self.release_locks(committing.xid, &committing.locked);
            if self.volatile.sessions.contains_key(&(committing.client, committing.session)) {
                ctx.send(committing.client, Msg::SqlReply { session: committing.session, reply: committing.reply });
            }
            self.xid_ended(ctx, committing.xid);
        }
    }

    /// `pg_logical_emit_message` inside the session's block: a transactional message joins
    /// the block (it assigns its xid); a non-transactional one carries the xid if it has one.
    pub(super) fn block_message(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        message: LogicalMessage,
    ) -> SqlReply {
        let LogicalMessage { transactional, prefix, payload_bytes, content } = message;
        let Some(block) = self.block(client, session) else { return SqlReply::Error(ABORTED_BLOCK.into()) };
        if block.failed.is_some() {
            return SqlReply::Error(ABORTED_BLOCK.into());
        }
        if self.durable.role == Role::Standby {
            return SqlReply::Error("ERROR: cannot execute pg_logical_emit_message() during recovery".into());
        }
        let xid = if transactional { Some(self.assign_xid(client, session)) } else { block.xid };
        let database = self.block(client, session).and_then(|block| block.database.clone());
        let write_before = self.durable.wal.write_lsn();
        let message = super::functions::LoggedMessage { xid, transactional, prefix, payload_bytes, database, content };
        let (start, end) = self.log_message(ctx, message, false);
        self.arm_wal_writer(ctx);
        if transactional {
            self.block_mut(client, session).expect("open").first_lsn.get_or_insert(start);
        }
        self.after_wal_append(ctx);
        self.after_segments_written(ctx, write_before);
        SqlReply::Lsn(end)
    }

    /// `SELECT … ORDER BY id` in the session: its block's snapshot under REPEATABLE READ (taken
    /// now if this is its first statement), a fresh one otherwise, with the block's own changes.
    /// [`SqlRequest::SelectRange`]: [`Self::select`]'s rows with keys in `(after, upto]` that
    /// match `filter`, the first `limit` in key order (or, `descending`, the last `limit`, largest
    /// first).
    pub(super) fn select_range(
        &mut self,
        client: Node,
        session: SessionId,
        table: TableId,
        range: ChunkRange,
        (limit, descending): (u32, bool),
        filter: Option<&crate::core::signal::RowFilter>,
    ) -> SqlReply {
        if let Some(error) = filter.and_then(undefined_column_error) {
            return error;
        }
        let unique = match self.key_column(table, range) {
            Ok(unique) => unique.map(|unique| unique.null_row),
            Err(error) => return error,
        };
        let reply = self.select(client, session, table);
        let SqlReply::Rows { table, rows, done } = reply else { return reply };
        let composite = self.composite_key(table);
        let in_range = |value: Key| range.contains(value, composite);
        let column = range.order_by.0;
        if column.is_none() && unique.is_none() {
            let rows = rows
                .into_iter()
                .filter(|(key, row)| in_range(*key) && filter.is_none_or(|filter| filter.matches(*key, row)));
            let rows: Vec<(Key, Row)> = if descending {
                rows.rev().take(limit as usize).collect()
            } else {
                rows.take(limit as usize).collect()
            };
            return SqlReply::Rows { table, rows, done };
        }
        // `ORDER BY col [DESC] LIMIT n` on another column (equal values in key order), or on the
        // nullable unique column (the NULL row last, first descending): by its value.
        let value_of = |key: Key, row: &Row| match (column, unique) {
            (Some(column), _) => column.value(key, row),
            (None, Some(null_row)) => crate::core::ids::UniqueColumn::position_in(null_row, key),
            (None, None) => key,
        };
        let mut rows: Vec<(Key, Key, Row)> = rows
            .into_iter()
            .map(|(key, row)| (value_of(key, &row), key, row))
            .filter(|(value, key, row)| in_range(*value) && filter.is_none_or(|filter| filter.matches(*key, row)))
            .collect();
        rows.sort_by_key(|(value, key, _)| (*value, *key));
        if descending {
            rows.reverse();
        }
        let rows = rows.into_iter().take(limit as usize).map(|(_, key, row)| (key, row)).collect();
        SqlReply::Rows { table, rows, done }
    }

    /// A READ COMMITTED statement's snapshot leaves out every transaction between its commit
    /// record and its visibility ([`Self::take_snapshot`]): says so for each such transaction that
    /// changed rows a range query's `reply` covers ([`Observation::ReadMissedCommit`]): keys in
    /// `(after, upto]` up to the last row returned when `limit` cut the reply short (down to it,
    /// `descending`), every key in the range otherwise.
    pub(super) fn observe_missed_commits(
        &self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        range: ChunkRange,
        (limit, descending): (u32, bool),
        reply: &SqlReply,
    ) {
        let SqlReply::Rows { table, rows, .. } = reply else { return };
        let repeatable_read =
            self.block(client, session).is_some_and(|block| block.isolation != Isolation::ReadCommitted);
        if repeatable_read || self.volatile.committing.is_empty() {
            return;
        }
        let cut = (rows.len() >= limit as usize).then(|| rows.last().map(|(key, _)| *key)).flatten();
        // Ordered by another column (`surrogate-key`), the range is that column's: which rows an
        // invisible transaction changed inside it is not known here, so every one of the table's
        // counts.
        let composite = self.composite_key(*table);
        let unique = self.key_column(*table, range).ok().flatten();
        let covered = |key: Key| {
            let value = unique.map_or(key, |unique| unique.position(key));
            !range.order_by.is_primary_key()
                || (range.contains(value, composite)
                    && cut.is_none_or(|cut| {
                        let cut = unique.map_or(cut, |unique| unique.position(cut));
                        if descending { value >= cut } else { value <= cut }
                    }))
        };
        for committing in self.volatile.committing.iter().filter(|committing| committing.csn.is_some()) {
            let mut keys = committing.locked.iter().filter(|(t, key)| t == table && covered(*key)).map(|(_, key)| *key);
            if let Some(key) = keys.next() {
                ctx.observe(Observation::ReadMissedCommit {
                    client,
                    table: *table,
                    xid: committing.xid,
                    key,
                    rows: 1 + keys.count() as u32,
                });
            }
        }
    }

    /// The nullable unique column a range query keys by (`nulls` set, no other ordering
    /// column), if it does; an error when the table has no such column.
    fn key_column(
        &self,
        table: TableId,
        range: ChunkRange,
    ) -> Result<Option<&crate::core::ids::UniqueColumn>, SqlReply> {
        if range.nulls.is_none() || !range.order_by.is_primary_key() {
            return Ok(None);
        }
        let spec = self.config.tables.get(usize::from(table.0));
        match spec.and_then(|spec| spec.unique_column.as_ref()) {
            Some(unique) => Ok(Some(unique)),
            None => Err(SqlReply::Error(format!(
                "ERROR: table \"{}\" has no nullable unique key column",
                spec.map_or("?", |spec| spec.name.as_str())
            ))),
        }
    }

    /// The table's two-column key, if it has one.
    fn composite_key(&self, table: TableId) -> Option<&crate::core::ids::CompositeKey> {
        self.config.tables.get(usize::from(table.0)).and_then(|spec| spec.composite_key.as_ref())
    }

    pub(super) fn select(&mut self, client: Node, session: SessionId, table: TableId) -> SqlReply {
        let snapshot = match self.statement_snapshot(client, session) {
            Ok(snapshot) => snapshot,
            Err(error) => return SqlReply::Error(error),
        };
        let mut rows: BTreeMap<Key, Row> = self.table(table).scan_seen(&snapshot.seen).into_iter().collect();
        if let Some(block) = self.block(client, session) {
            for ((changed, key), row) in &block.staged {
                if *changed != table {
                    continue;
                }
                match row {
                    Some(row) => rows.insert(*key, *row),
                    None => rows.remove(key),
                };
            }
        }
        SqlReply::Rows { table, rows: rows.into_iter().collect(), done: true }
    }

    // ----- shared with autocommit -----

    /// The row changes of `ops`, against the rows as the statement sees them: the block's own
    /// changes `own`, then the latest committed rows (READ COMMITTED and autocommit), or, with a
    /// REPEATABLE READ `snapshot`, the rows of that snapshot; a row another commit changed
    /// since is a serialization failure. An error stops everything (nothing is written).
    pub(super) fn plan(
        &self,
        ops: &[RowOp],
        own: &BTreeMap<(TableId, Key), Option<Row>>,
        snapshot: Option<&SeenCommits>,
    ) -> Result<Vec<(TableId, Key, ChangeKind)>, String> {
        let mut pending: Vec<(TableId, Key, ChangeKind)> = Vec::new();
        let mut staged: BTreeMap<(TableId, Key), Option<Row>> = BTreeMap::new();
        for op in ops {
            let (table, key) = op_row(op);
            let mine = staged.get(&(table, key)).or_else(|| own.get(&(table, key))).copied();
            let identity = self.table(table).replica_identity;
            let kind = match *op {
                RowOp::Insert { .. } | RowOp::InsertEvent { .. } => {
                    let Some(after) = inserted_row(op) else { continue };
                    let exists = match mine {
                        Some(row) => row.is_some(),
                        None => self.table(table).current(key).is_some(),
                    };
                    if exists {
                        let name = &self.config.tables[usize::from(table.0)].name;
                        let relation = name.rsplit('.').next().unwrap_or(name);
                        return Err(format!(
                            "ERROR: duplicate key value violates unique constraint \"{relation}_pkey\" DETAIL: Key \
                             (id)=({key}) already exists."
                        ));
                    }
                    Some(ChangeKind::Insert { after })
                }
                RowOp::Update { .. } | RowOp::Delete { .. } => {
                    let current = match (mine, snapshot) {
                        (Some(row), _) => row,
                        (None, None) => self.table(table).current(key),
                        (None, Some(seen)) => {
                            let visible = self.table(table).visible_to(key, seen);
                            if visible.is_some()
                                && self.table(table).last_change_csn(key).is_some_and(|last| !seen.sees(last))
                            {
                                return Err(serialization_failure());
                            }
                            visible
                        }
                    };
                    match *op {
                        RowOp::Update { status, .. } => current.map(|old| ChangeKind::Update {
                            before: (identity == ReplicaIdentity::Full).then_some(old),
                            after: Row { version: old.version + 1, status, ..old },
                        }),
                        _ => current.map(|old| ChangeKind::Delete {
                            before: (identity == ReplicaIdentity::Full).then_some(old),
                        }),
                    }
                }
            };
            if let Some(kind) = kind {
                staged.insert((table, key), kind.after());
                pending.push((table, key, kind));
            }
        }
        Ok(pending)
    }

    /// The WAL writer flushes, within `wal_writer_delay`, what was inserted without a flush
    /// (`WalWriterMain`, `src/backend/postmaster/walwriter.c`; `XLogBackgroundFlush`): armed
    /// when an unflushed record starts a tail of them.
    pub(super) fn arm_wal_writer(&mut self, ctx: &mut Ctx) {
        if self.durable.wal.flush_lsn() < self.durable.wal.write_lsn() && !self.volatile.wal_writer_armed {
            self.volatile.wal_writer_armed = true;
            ctx.set_timer(Timer::WalWriter, WAL_WRITER_DELAY_MS);
        }
    }

    /// [`Timer::WalWriter`]: everything inserted is flushed, and decodable.
    pub(super) fn wal_writer(&mut self, ctx: &mut Ctx) {
        self.volatile.wal_writer_armed = false;
        if self.durable.wal.get_mut().flush() {
            self.after_wal_append(ctx);
        }
    }

    /// Inserts the change records of `pending`, not flushed: one per row, or with `copy` one
    /// `MULTI_INSERT` for the inserts (each other row its own record). Returns each record's
    /// start, end and changes.
    pub(super) fn insert_change_records(
        &mut self,
        pending: Vec<(TableId, Key, ChangeKind)>,
        copy: bool,
    ) -> Vec<(Lsn, Lsn, Vec<Change>)> {
        let mut records = Vec::with_capacity(pending.len());
        if copy {
            let (inserts, others): (Vec<_>, Vec<_>) =
                pending.into_iter().partition(|(_, _, kind)| matches!(kind, ChangeKind::Insert { .. }));
            if !inserts.is_empty() {
                let sizes: Vec<u64> =
                    inserts.iter().map(|(_, _, kind)| kind.after().map_or(0, |row| row.tuple_data_bytes())).collect();
                let (start, end) =
                    self.durable.wal.get_mut().insert_record_unflushed(record_size::heap_multi_insert(&sizes));
                let changes =
                    inserts.into_iter().map(|(table, key, kind)| Change { lsn: start, table, key, kind }).collect();
                records.push((start, end, changes));
            }
            for (table, key, kind) in others {
                let (start, end) = self.durable.wal.get_mut().insert_record_unflushed(change_record_len(&kind));
                records.push((start, end, vec![Change { lsn: start, table, key, kind }]));
            }
        } else {
            for (table, key, kind) in pending {
                let (start, end) = self.durable.wal.get_mut().insert_record_unflushed(change_record_len(&kind));
                records.push((start, end, vec![Change { lsn: start, table, key, kind }]));
            }
        }
        records
    }
}

/// The size of one row's heap record.
pub(super) fn change_record_len(kind: &ChangeKind) -> u64 {
    match *kind {
        ChangeKind::Insert { after } => record_size::heap_insert(after.tuple_data_bytes()),
        ChangeKind::Update { before, after } => {
            record_size::heap_update(after.tuple_data_bytes(), before.map(|row| row.tuple_data_bytes()))
        }
        // Without a full replica identity only the 8-byte key is logged.
        ChangeKind::Delete { before } => record_size::heap_delete(before.map_or(8, |row| row.tuple_data_bytes())),
    }
}

/// The parser's refusal of a statement whose `WHERE` names a column the table lacks (raised
/// while the statement is analysed, before it takes a snapshot or reads a row).
pub(super) fn undefined_column_error(filter: &crate::core::signal::RowFilter) -> Option<SqlReply> {
    filter.undefined_column().map(|name| SqlReply::Error(format!("ERROR: column \"{name}\" does not exist")))
}

/// The bounds of a [`SqlRequest::SelectRange`]: `(col) > (after) AND (col) <= (upto)` on the
/// column `order_by` names (the key: the row-value comparison), or, `per_column` on a two-column
/// key, Debezium before 1.8's comparison of each column on its own (DBZ-3860).
#[derive(Clone, Copy, Debug)]
pub(super) struct ChunkRange {
    pub after: Option<Key>,
    pub upto: Option<Key>,
    pub order_by: crate::core::signal::ChunkOrder,
    pub per_column: bool,
    pub nulls: crate::core::signal::ChunkNulls,
}

impl ChunkRange {
    /// Whether a row whose ordering value is `value` (its key, or the `surrogate-key` column's
    /// value) is inside the bounds, on a table whose key is `composite` if it has two columns.
    /// Before 1.8 (`AbstractIncrementalSnapshotChangeEventSource.buildChunkQuery`,
    /// `addKeyColumnsToCondition`): `k1 >= ? AND k2 >= ? AND NOT (k1 = ? AND k2 = ?)` after the
    /// chunk's end and `k1 <= ? AND k2 <= ?` up to the maximum key, each a conjunction over the
    /// columns: a row past the end in the first column but below it in the second is skipped.
    ///
    /// On a nullable key column ([`crate::core::ids::UniqueColumn`]) `value`, `after` and `upto`
    /// are positions, NULL the largest. Debezium 2.6's bounds compare them so
    /// ([`ChunkNulls::NullAware`](crate::core::signal::ChunkNulls)); before 2.6 `k > ?` and
    /// `NOT (k > ?)` are unknown, so false, when either side is NULL (DBZ-5071).
    pub fn contains(&self, value: Key, composite: Option<&crate::core::ids::CompositeKey>) -> bool {
        if self.nulls == crate::core::signal::ChunkNulls::Unaware && self.order_by.is_primary_key() {
            use crate::core::ids::UniqueColumn;
            let known = |a: Key, b: Key| a != UniqueColumn::NULL && b != UniqueColumn::NULL;
            return self.after.is_none_or(|after| known(value, after) && value > after)
                && self.upto.is_none_or(|upto| known(value, upto) && value <= upto);
        }
        match composite.filter(|_| self.per_column && self.order_by.is_primary_key()) {
            None => self.after.is_none_or(|after| value > after) && self.upto.is_none_or(|upto| value <= upto),
            Some(key) => {
                let (k1, k2) = key.values(value);
                let above = self.after.is_none_or(|after| {
                    let (a1, a2) = key.values(after);
                    k1 >= a1 && k2 >= a2 && !(k1 == a1 && k2 == a2)
                });
                let below = self.upto.is_none_or(|upto| {
                    let (u1, u2) = key.values(upto);
                    k1 <= u1 && k2 <= u2
                });
                above && below
            }
        }
    }
}
