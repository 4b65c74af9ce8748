//! The Debezium PostgreSQL connector's task (Debezium 3.x), as it behaves in its code
//! (`debezium-connector-postgres`; each point names the class or method it follows).
//!
//! - Start-up (`PostgresConnectorTask.start`), in order: stored offset (loaded by Connect), the
//!   log-position check (`validateLogPosition`: only with a stored offset that is not an
//!   in-progress INITIAL snapshot; "available" iff the slot exists and `lsn_proc` is absent or
//!   `restart_lsn ≤ lsn_proc`; unavailable → `when_needed` drops the offset, every other mode fails
//!   the task), the slot read, the publication, `CREATE_REPLICATION_SLOT` when the slot is missing.
//! - `snapshot.mode` `initial`, `no_data`, `when_needed`, `always`
//!   (`PostgresConnectorConfig.SnapshotMode`).
//! - The initial snapshot's two cases (`RelationalSnapshotChangeEventSource.doExecute`,
//!   `PostgresSnapshotChangeEventSource.connectionCreated`): slot created by this start → the
//!   exported snapshot at the consistent point, offset `lsn` = consistent point; slot already there
//!   → READ COMMITTED reads and `lsn` = `pg_current_wal_lsn()` read at snapshot start, in a fresh
//!   offset context.
//! - Emission (`EventDispatcher.BufferingSnapshotChangeRecordReceiver`): every row an `op=r`
//!   record; the last one held back and re-emitted with `snapshot=last` and the completion marker
//!   in its offset; no record for absent rows.
//! - A restart with an incomplete snapshot redoes it from scratch ("Previous snapshot was
//!   cancelled before completion", `RelationalSnapshotChangeEventSource.doExecute`), and, the
//!   slot existing by then, as case B.
//! - The offset keys (`lsn`, `lsn_proc`, `lsn_commit`, `txId`, snapshot flags;
//!   `PostgresOffsetContext.getOffset`, `SourceInfo`), with `lsn_commit` inside a transaction
//!   naming the previous commit.
//! - Streaming (`PostgresStreamingChangeEventSource.execute`, `WalPositionLocator`) from `lsn_proc`
//!   (else `lsn`, else the slot's position) and, on a stream restart with `lsn_proc` stored,
//!   skipping the already-processed changes of the replayed transaction.
//! - The slot is confirmed (`PostgresConnectorTask.performCommit`,
//!   `PostgresStreamingChangeEventSource.commitOffset`) only from offsets re-read from the offset
//!   store, on the poll after a successful flush, only while streaming, only after a replication
//!   message has arrived on the current stream (`lsnFlushingAllowed`), with `lsn_commit ??
//!   lsn_proc`.
//! - A lost database connection is retriable (`PostgresErrorHandler`): the task restarts in-process
//!   after `retriable.restart.connector.wait.ms`, re-reading the stored offset.
//!
//! - `offset.mismatch.strategy` (`PostgresConnectorConfig.OffsetSlotMismatchStrategy`,
//!   `PostgresReplicationConnection.startStreaming`): `trust_slot` and `trust_greater_lsn` skip the
//!   start-up log-position check, so a recreated or hand-advanced slot is trusted. Where the slot
//!   is ahead of the offset, every strategy ends up streaming from the slot's position (the server
//!   forwards a request below `confirmed_flush`; `trust_*` ask for it directly), which is what the
//!   model does. Where the slot is behind, `trust_offset` and `trust_greater_lsn` first advance it
//!   to the offset; the model streams from the offset without that advance, which delivers the same
//!   changes (only the slot's `confirmed_flush` moves earlier).
//!
//! - The slot reader (`PostgresConnection.fetchReplicationSlotInfo`, `readReplicationSlotInfo`): a
//!   slot row whose `restart_lsn` is NULL (an invalidated slot) is "not yet valid" and read again
//!   every 2 s, up to 900 times, while the task reports RUNNING, then the task fails; so
//!   `when_needed` never drops or recreates an invalidated slot. A walsender terminated under the
//!   task (its slot invalidated at a checkpoint) is a retriable error.
//!
//! - Heartbeats (`io.debezium.heartbeat`, `PostgresConnectorTask.start`): every
//!   `heartbeat.interval.ms` while streaming, a record on the heartbeat topic with the current
//!   offset (so Connect stores an offset no change record carried), and the
//!   `heartbeat.action.query`, modelled as an update of a heartbeat table's row on a connection of
//!   its own.
//! - `lsn.flush.mode` (`PostgresConnectorConfig.LsnFlushMode`,
//!   `PostgresReplicationConnection.startPgReplicationStream`): `connector`, `manual` (never
//!   confirms), `connector_and_driver` (pgjdbc confirms a keep-alive LSN once everything received
//!   was confirmed explicitly; with `heartbeat.interval.ms=0` Debezium forces heartbeats every 600
//!   000 ms, `applyLsnFlushModeHeartbeatFallback`).
//!
//! Left out (another issue makes them exact): the slot advance of
//! `trust_offset`/`trust_greater_lsn`, `slot.max.retries`, heartbeats emitted right after a
//! commit or a change (here only on the interval's timer), incremental and blocking snapshots, transaction metadata, the
//! queue's `max.queue.size` back-pressure, the `WalPositionLocator`'s rules for changes that
//! share an LSN (they never do here: each change has its own record). The locator is reduced to
//! "drop replayed changes at or before the stored `lsn_proc`", which is exact while transactions
//! do not interleave in the WAL, as here.
//!
//! The files: `config` (the properties), `startup` (start-up to the snapshot decision), `snapshot`,
//! `streaming` (the replication stream and its restart filter), `offsets` (acknowledgement and the
//! slot's confirmation); the task's state, its connections and its queue are here.

mod config;
mod offsets;
mod snapshot;
mod startup;
mod streaming;

pub use config::{
    DebeziumConfig, LSN_FLUSH_MODE_HEARTBEAT_FALLBACK_MS, LsnFlushMode, MAX_ATTEMPTS_FOR_OBTAINING_REPLICATION_SLOT,
    OffsetMismatchStrategy, PAUSE_BETWEEN_REPLICATION_SLOT_RETRIEVAL_ATTEMPTS_MS, SnapshotMode,
};

use crate::core::change::{ChangeKind, RowOp};
use crate::core::component::Ctx;
use crate::core::event::{
    ChangeEvent, MessageType, Op, Origin, SnapshotKind, SnapshotMarker, SourceInfo, SourceOffset, SourceRecord, Topic,
};
use crate::core::ids::{Key, Node, Row, TableId};
use crate::core::lsn::Lsn;
use crate::core::observe::{Observation, SnapshotCase};
use crate::core::protocol::{DecodedTxn, Msg, ReplReply, ReplRequest, SessionId, SlotRow, SqlReply, SqlRequest};
use crate::core::shared::{CopyOnWrite, Fixed};
use serde::{Deserialize, Serialize};

/// Where the task is in its life.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// Not started, or stopped.
    Idle,
    /// Start-up's log-position check (`validateLogPosition`): waiting for the slot row to validate
    /// the stored position.
    CheckingLogPosition,
    /// Start-up's slot read (`getSlotState`): waiting for the slot row.
    ReadingSlot,
    /// Waiting for `CREATE PUBLICATION` (if needed) to answer.
    EnsuringPublication,
    /// Waiting for `CREATE_REPLICATION_SLOT`.
    CreatingSlot,
    /// Case B: waiting for `pg_current_wal_lsn()`.
    SnapshotReadingLsn,
    /// Reading table `table_index` of the snapshot.
    SnapshotScanning {
        table_index: usize,
    },
    /// Waiting for `START_REPLICATION` to be accepted.
    StartingStream,
    Streaming,
    /// Waiting `retriable.restart.connector.wait.ms` before starting again.
    AwaitingRestart,
    Failed {
        reason: String,
    },
}

impl Phase {
    /// What the task is doing, for people: it reads after "the task is" (a stuck run's reason
    /// names it).
    pub fn describe(&self) -> String {
        match self {
            Phase::Idle => "idle".into(),
            Phase::CheckingLogPosition => "reading the slot row to check the stored offset's log position".into(),
            Phase::ReadingSlot => "reading the slot row".into(),
            Phase::EnsuringPublication => "creating the publication if it is missing".into(),
            Phase::CreatingSlot => "creating the replication slot".into(),
            Phase::SnapshotReadingLsn => "reading pg_current_wal_lsn() before a snapshot".into(),
            Phase::SnapshotScanning { table_index } => format!("scanning table {} of the snapshot", table_index + 1),
            Phase::StartingStream => "starting the replication stream".into(),
            Phase::Streaming => "streaming".into(),
            Phase::AwaitingRestart => "waiting to restart after a retriable error".into(),
            Phase::Failed { reason } => format!("failed: {reason}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct SnapshotRun {
    attempt: u32,
    case: SnapshotCase,
    lsn: Lsn,
    /// The held-back last record (`BufferingSnapshotChangeRecordReceiver`).
    buffered: Option<SourceRecord>,
    rows: usize,
}

/// Requests the task makes of its Connect worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskEvent {
    /// Nothing for the worker to do.
    None,
    /// Restart in-process after this many ms (a retriable error).
    RestartAfter(u64),
    /// Read the slot row again after this many ms (the 900-attempt loop,
    /// `MAX_ATTEMPTS_FOR_OBTAINING_REPLICATION_SLOT`).
    ReadSlotAgainAfter(u64),
    /// Streaming began: heartbeats start, one every this many ms.
    HeartbeatEvery(u64),
    /// The task failed with a non-retriable error.
    Failed,
}

/// The Debezium PostgreSQL source task. Owned by the Connect worker that runs it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DebeziumTask {
    pub config: Fixed<DebeziumConfig>,
    pub phase: Phase,
    /// The in-memory offset context.
    offset: SourceOffset,
    /// The offset loaded at start (None: no stored offset, or dropped by `when_needed`).
    stored: Option<SourceOffset>,
    /// The slot row read at start (`startingSlotInfo`).
    starting_slot: Option<CopyOnWrite<SlotRow>>,
    /// `(consistent_point, snapshot_name)` if this start created the slot.
    slot_created: Option<CopyOnWrite<(Lsn, String)>>,
    snapshot: Option<SnapshotRun>,
    snapshot_attempts: u32,
    /// The change-event queue `poll()` drains.
    pub queue: CopyOnWrite<Vec<SourceRecord>>,
    jdbc: Option<SessionId>,
    replication: Option<SessionId>,
    next_session: SessionId,
    /// Replayed changes at or before this LSN are skipped (the stored `lsn_proc`).
    skip_upto: Option<Lsn>,
    /// The stored event at `skip_upto` was a COMMIT (its end LSN, the start of the next WAL
    /// record): a change at that very LSN is the next transaction's first, not a replay
    /// (dbz#76, fixed in 3.7.0.Alpha2; before, it was skipped).
    skip_stored_commit: bool,
    /// `lsnFlushingAllowed`: false from a stream (re)start until the first message arrives.
    lsn_flushing_allowed: bool,
    /// The flushed LSN last sent to the server.
    last_flushed: Lsn,
    /// Before 2.7: the offset of the last record Kafka acknowledged (`commitRecord`).
    last_acked: Option<SourceOffset>,
    /// Reads of the slot row so far in this start (`fetchReplicationSlotInfo`).
    slot_info_attempts: u32,
    /// pgjdbc's state for its keep-alive rule: the start of the last data message received
    /// (a COMMIT is stamped with the commit's end) and the flush position the driver reports.
    last_data_start: Lsn,
    driver_flushed: Lsn,
    /// The heartbeat action query's own connection.
    heartbeat_session: Option<SessionId>,
}

impl DebeziumTask {
    pub fn new(config: Fixed<DebeziumConfig>, first_session: SessionId) -> DebeziumTask {
        DebeziumTask {
            config,
            phase: Phase::Idle,
            offset: SourceOffset::default(),
            stored: None,
            starting_slot: None,
            slot_created: None,
            snapshot: None,
            snapshot_attempts: 0,
            queue: CopyOnWrite::new(Vec::new()),
            jdbc: None,
            replication: None,
            next_session: first_session,
            skip_upto: None,
            skip_stored_commit: false,
            lsn_flushing_allowed: false,
            last_flushed: Lsn::INVALID,
            last_acked: None,
            slot_info_attempts: 0,
            last_data_start: Lsn::INVALID,
            driver_flushed: Lsn::INVALID,
            heartbeat_session: None,
        }
    }

    pub fn is_streaming(&self) -> bool {
        self.phase == Phase::Streaming
    }

    pub fn is_running(&self) -> bool {
        !matches!(self.phase, Phase::Idle | Phase::Failed { .. } | Phase::AwaitingRestart)
    }

    pub fn next_session(&self) -> SessionId {
        self.next_session
    }

    fn new_session(&mut self) -> SessionId {
        let session = self.next_session;
        self.next_session += 1;
        session
    }

    fn jdbc(&mut self) -> SessionId {
        match self.jdbc {
            Some(session) => session,
            None => {
                let session = self.new_session();
                self.jdbc = Some(session);
                session
            }
        }
    }

    fn sql(&mut self, ctx: &mut Ctx, request: SqlRequest) {
        let session = self.jdbc();
        ctx.send(Node::Postgres, Msg::Sql { session, request });
    }

    fn repl(&mut self, ctx: &mut Ctx, request: ReplRequest) {
        let session = match self.replication {
            Some(session) => session,
            None => {
                let session = self.new_session();
                self.replication = Some(session);
                session
            }
        };
        ctx.send(Node::Postgres, Msg::Repl { session, request });
    }

    fn close_sessions(&mut self, ctx: &mut Ctx) {
        if let Some(session) = self.jdbc.take() {
            ctx.send(Node::Postgres, Msg::Sql { session, request: SqlRequest::Close });
        }
        if let Some(session) = self.replication.take() {
            ctx.send(Node::Postgres, Msg::Repl { session, request: ReplRequest::Close });
        }
        if let Some(session) = self.heartbeat_session.take() {
            ctx.send(Node::Postgres, Msg::Sql { session, request: SqlRequest::Close });
        }
    }

    fn fail(&mut self, ctx: &mut Ctx, reason: String) -> TaskEvent {
        self.close_sessions(ctx);
        self.clear_queue();
        ctx.observe(Observation::TaskFailed { reason: reason.clone() });
        self.phase = Phase::Failed { reason };
        TaskEvent::Failed
    }

    /// A retriable error: stop, and start again after `retriable.restart.connector.wait.ms`.
    fn retriable(&mut self, ctx: &mut Ctx, reason: String) -> TaskEvent {
        self.close_sessions(ctx);
        self.clear_queue();
        let after_ms = self.config.retriable_restart_connector_wait_ms;
        ctx.observe(Observation::TaskRestarting { reason, after_ms });
        self.phase = Phase::AwaitingRestart;
        TaskEvent::RestartAfter(after_ms)
    }

    /// `BaseSourceTask.stop()`: close the connections (the slot is kept:
    /// `slot.drop.on.stop=false`).
    pub fn stop(&mut self, ctx: &mut Ctx) {
        self.close_sessions(ctx);
        self.clear_queue();
        self.phase = Phase::Idle;
    }

    /// The JDBC or replication connection to the database broke.
    pub fn on_database_connection_lost(&mut self, ctx: &mut Ctx) -> TaskEvent {
        if self.jdbc.is_none() && self.replication.is_none() {
            return TaskEvent::None;
        }
        // The sessions are gone with the connection.
        self.jdbc = None;
        self.replication = None;
        self.heartbeat_session = None;
        if matches!(self.phase, Phase::Idle | Phase::Failed { .. } | Phase::AwaitingRestart) {
            return TaskEvent::None;
        }
        self.retriable(
            ctx,
            "org.postgresql.util.PSQLException: An I/O error occurred while sending to the backend".into(),
        )
    }

    pub fn on_message(&mut self, ctx: &mut Ctx, msg: Msg) -> TaskEvent {
        match msg {
            Msg::SqlReply { session, reply } if Some(session) == self.jdbc => self.on_sql_reply(ctx, reply),
            Msg::ReplReply { session, reply } if Some(session) == self.replication => self.on_repl_reply(ctx, reply),
            _ => TaskEvent::None,
        }
    }

    fn clear_queue(&mut self) {
        if !self.queue.is_empty() {
            self.queue.get_mut().clear();
        }
    }

    /// Records waiting in the queue.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Drains up to `max.batch.size` records for `poll()`.
    pub fn drain(&mut self) -> Vec<SourceRecord> {
        let count = self.queue.len().min(self.config.max_batch_size as usize);
        if count == 0 {
            return Vec::new();
        }
        if count == self.queue.len() {
            // The usual case: the whole queue, handed over without a copy; the next batch is
            // likely as large.
            return std::mem::replace(&mut self.queue, CopyOnWrite::new(Vec::with_capacity(count))).into_inner();
        }
        self.queue.get_mut().drain(..count).collect()
    }
}

// The tests stay inline: they build the task from a scenario, and models/tests/layers.rs leaves
// out inline `#[cfg(test)]` modules only.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::change::Change;
    use crate::core::component::Outbox;
    use crate::core::ids::{Row, Status};
    use crate::core::time::SimTime;

    fn task() -> DebeziumTask {
        let spec = crate::scenario::spec::claims_minimal(3, crate::components::sink::ApplyRule::VersionGuard);
        DebeziumTask::new(Fixed::new(spec.debezium), 1)
    }

    fn row(version: u32) -> Row {
        Row { version, status: Status::Submitted, amount_cents: 1 }
    }

    fn txn(xid: u32, first: u64, keys: &[i64]) -> DecodedTxn {
        let changes: Vec<Change> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| Change {
                lsn: Lsn(first + 100 * i as u64),
                table: TableId(0),
                key: *key,
                kind: ChangeKind::Update { before: None, after: row(2) },
            })
            .collect();
        let commit = first + 100 * keys.len() as u64;
        DecodedTxn {
            xid,
            first_lsn: Lsn(first),
            commit_lsn: Lsn(commit),
            end_lsn: Lsn(commit + 40),
            commit_time: SimTime(1),
            changes,
            messages: Vec::new(),
        }
    }

    #[test]
    fn only_the_last_snapshot_record_carries_the_completion_marker() {
        let mut task = task();
        let mut out = Outbox::default();
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        task.slot_created = Some(CopyOnWrite::new((Lsn(0x100), "snap".into())));
        task.begin_snapshot(&mut ctx, SnapshotCase::SlotCreatedNow, Lsn(0x100));
        let rows = vec![(1, row(1)), (2, row(1)), (3, row(1))];
        task.on_sql_reply(&mut ctx, SqlReply::Rows { table: TableId(0), rows, done: true });
        let records: Vec<SourceRecord> = task.queue.to_vec();
        assert_eq!(records.len(), 3);
        let markers: Vec<SnapshotMarker> = records.iter().map(|r| r.value.expect("value").source.snapshot).collect();
        assert_eq!(markers, vec![SnapshotMarker::First, SnapshotMarker::Middle, SnapshotMarker::Last]);
        assert!(records[..2].iter().all(|r| !r.offset.snapshot_completed && r.offset.initial_snapshot_running()));
        assert!(records[2].offset.snapshot_completed && records[2].offset.last_snapshot_record);
        assert!(records.iter().all(|r| r.offset.lsn == Some(Lsn(0x100)) && r.offset.lsn_proc.is_none()));
        assert_eq!(task.phase, Phase::StartingStream, "streaming follows at once");
    }

    #[test]
    fn lsn_commit_inside_a_transaction_names_the_previous_commit() {
        let mut task = task();
        task.phase = Phase::Streaming;
        task.process_transaction(txn(10, 1000, &[1]));
        task.process_transaction(txn(11, 2000, &[2, 3]));
        let records: Vec<SourceRecord> = task.queue.to_vec();
        assert_eq!(records[1].offset.lsn_commit, Some(Lsn(1140)), "the first transaction's commit end");
        assert_eq!(records[2].offset.lsn_commit, Some(Lsn(1140)), "not the transaction it belongs to");
        assert_eq!(records[2].offset.lsn_proc, Some(Lsn(2100)));
        assert_eq!(task.offset.lsn_commit, Some(Lsn(2240)), "the COMMIT moves the in-memory offset only");
    }

    #[test]
    fn a_replayed_transaction_skips_the_changes_already_processed() {
        let mut task = task();
        task.phase = Phase::Streaming;
        // Stored lsn_proc is the first change of the transaction: PostgreSQL re-sends it whole.
        task.skip_upto = Some(Lsn(2000));
        task.process_transaction(txn(11, 2000, &[2, 3]));
        let keys: Vec<i64> = task.queue.iter().map(|r| r.key).collect();
        assert_eq!(keys, vec![3]);
        task.process_transaction(txn(12, 3000, &[4]));
        assert_eq!(task.queue.len(), 2, "later transactions are not filtered");
    }

    /// dbz#76: a COMMIT's end LSN is the start of the next WAL record, so the next transaction's
    /// first change can carry the stored `lsn_proc`. Since 3.7 the locator resumes there; before,
    /// it took the change for a replay and dropped it.
    #[test]
    fn a_change_at_the_stored_commit_end_is_new_since_3_7() {
        let stored_commit = SourceOffset {
            lsn: Some(Lsn(2000)),
            lsn_proc: Some(Lsn(2000)),
            lsn_commit: Some(Lsn(2000)),
            message_type: Some(MessageType::Commit),
            ..Default::default()
        };
        for (version, expected) in [((3, 7), vec![3, 4]), ((3, 6), vec![4])] {
            let mut task = task();
            let mut config = (*task.config).clone();
            config.version = version;
            task.config = Fixed::new(config);
            task.offset = stored_commit;
            let mut out = Outbox::default();
            task.start_streaming(&mut Ctx::new(SimTime(0), Node::Connect, &mut out));
            task.phase = Phase::Streaming;
            task.process_transaction(txn(11, 2000, &[3, 4]));
            let keys: Vec<i64> = task.queue.iter().map(|r| r.key).collect();
            assert_eq!(keys, expected, "Debezium {version:?}");
        }
        // A stored DML (lsn_proc past lsn_commit) is still skipped up to and including itself.
        let mut task = task();
        task.offset = SourceOffset {
            lsn_proc: Some(Lsn(2000)),
            lsn_commit: Some(Lsn(1900)),
            message_type: Some(MessageType::Insert),
            ..stored_commit
        };
        let mut out = Outbox::default();
        task.start_streaming(&mut Ctx::new(SimTime(0), Node::Connect, &mut out));
        task.phase = Phase::Streaming;
        task.process_transaction(txn(11, 2000, &[3, 4]));
        assert_eq!(task.queue.iter().map(|r| r.key).collect::<Vec<i64>>(), vec![4]);
    }

    #[test]
    fn a_change_at_the_stored_commits_end_is_new_after_a_commit_but_a_replay_after_a_dml() {
        // The first transaction ends at 2240; the next one's first change sits at 2240, where the
        // commit record ended (the seed-134 false alarm of the heartbeat fix: a heartbeat stored
        // the COMMIT's offset, and the restart dropped the next insert as already processed).
        let resume = |message_type| {
            let mut task = task();
            let mut out = Outbox::default();
            task.offset = SourceOffset {
                lsn: Some(Lsn(2240)),
                lsn_proc: Some(Lsn(2240)),
                lsn_commit: Some(Lsn(if message_type == MessageType::Commit { 2240 } else { 1140 })),
                message_type: Some(message_type),
                ..Default::default()
            };
            task.start_streaming(&mut Ctx::new(SimTime(0), Node::Connect, &mut out));
            task.phase = Phase::Streaming;
            task.process_transaction(txn(12, 2240, &[4, 5]));
            task.queue.iter().map(|r| r.key).collect::<Vec<i64>>()
        };
        assert_eq!(resume(MessageType::Commit), vec![4, 5], "after a stored COMMIT nothing is a replay");
        assert_eq!(resume(MessageType::Update), vec![5], "the stored change itself is skipped");
    }

    #[test]
    fn the_offset_names_the_last_message_processed() {
        let mut task = task();
        task.phase = Phase::Streaming;
        task.process_transaction(txn(11, 2000, &[2, 3]));
        let records: Vec<SourceRecord> = task.queue.to_vec();
        assert_eq!(records[0].offset.message_type, Some(MessageType::Update));
        assert_eq!(task.offset.message_type, Some(MessageType::Commit), "the COMMIT, as a heartbeat stores it");
    }

    #[test]
    fn the_slot_is_confirmed_only_while_streaming_after_a_message_with_lsn_commit_or_lsn_proc() {
        let mut task = task();
        let mut out = Outbox::default();
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        let stored = Some(SourceOffset {
            lsn: Some(Lsn(500)),
            lsn_proc: Some(Lsn(500)),
            lsn_commit: Some(Lsn(400)),
            ..Default::default()
        });
        task.phase = Phase::SnapshotScanning { table_index: 0 };
        task.commit_offset(&mut ctx, stored);
        task.phase = Phase::Streaming;
        task.commit_offset(&mut ctx, stored);
        assert!(out.sends.is_empty(), "nothing during a snapshot, nothing before a message arrived");
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        task.lsn_flushing_allowed = true;
        let snapshot_only = Some(SourceOffset { lsn: Some(Lsn(500)), snapshot_completed: true, ..Default::default() });
        task.commit_offset(&mut ctx, snapshot_only);
        assert!(out.sends.is_empty(), "a snapshot offset has neither lsn_commit nor lsn_proc");
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        task.commit_offset(&mut ctx, stored);
        assert!(matches!(
            out.sends.as_slice(),
            [(Node::Postgres, Msg::Repl { request: ReplRequest::StatusUpdate { flush: Lsn(400) }, .. })]
        ));
    }

    /// `PostgresConnection.fetchReplicationSlotInfo`: a slot row with `restart_lsn` NULL is read
    /// again every 2 s, 900 times in all, and only then does the task fail; a row that becomes
    /// valid meanwhile is taken.
    #[test]
    fn an_invalidated_slot_keeps_the_task_in_the_900_attempt_loop() {
        let lost = SlotRow {
            slot_name: "debezium".into(),
            plugin: "pgoutput".into(),
            active: false,
            restart_lsn: None,
            confirmed_flush_lsn: Some(Lsn(0x200)),
            wal_status: Some("lost".into()),
        };
        let mut task = task();
        let mut out = Outbox::default();
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        task.phase = Phase::ReadingSlot;
        for attempt in 1..MAX_ATTEMPTS_FOR_OBTAINING_REPLICATION_SLOT {
            let event = task.on_sql_reply(&mut ctx, SqlReply::Slot(Some(lost.clone())));
            assert_eq!(event, TaskEvent::ReadSlotAgainAfter(2_000), "attempt {attempt}");
            assert_eq!(task.phase, Phase::ReadingSlot, "still starting, the task RUNNING");
            task.on_slot_info_retry(&mut ctx);
        }
        let event = task.on_sql_reply(&mut ctx, SqlReply::Slot(Some(lost.clone())));
        assert_eq!(event, TaskEvent::Failed);
        assert!(
            matches!(&task.phase, Phase::Failed { reason } if reason.contains("Unable to obtain valid replication slot"))
        );

        let mut task = self::task();
        task.phase = Phase::ReadingSlot;
        assert_eq!(
            task.on_sql_reply(&mut ctx, SqlReply::Slot(Some(lost.clone()))),
            TaskEvent::ReadSlotAgainAfter(2_000)
        );
        let valid = SlotRow { restart_lsn: Some(Lsn(0x100)), wal_status: Some("reserved".into()), ..lost };
        assert_eq!(task.on_sql_reply(&mut ctx, SqlReply::Slot(Some(valid))), TaskEvent::None);
        assert_eq!(task.phase, Phase::EnsuringPublication);
    }

    /// `V3PGReplicationStream.processKeepAliveMessage`: pgjdbc confirms a keep-alive only with
    /// `connector_and_driver`, and only once everything received has been confirmed explicitly.
    #[test]
    fn the_driver_confirms_keepalives_only_when_nothing_received_is_unconfirmed() {
        let keepalive = |task: &mut DebeziumTask, lsn: u64| {
            let mut out = Outbox::default();
            let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
            task.on_repl_reply(&mut ctx, ReplReply::Keepalive { wal_end: Lsn(lsn) });
            out.sends
                .iter()
                .filter_map(|(_, msg)| match msg {
                    Msg::Repl { request: ReplRequest::StatusUpdate { flush }, .. } => Some(flush.0),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        let mut connector = task();
        connector.phase = Phase::Streaming;
        assert!(keepalive(&mut connector, 5000).is_empty(), "lsn.flush.mode=connector ignores keep-alives");

        let mut config = (*task().config).clone();
        config.lsn_flush_mode = LsnFlushMode::ConnectorAndDriver;
        let mut driver = DebeziumTask::new(Fixed::new(config), 1);
        driver.phase = Phase::Streaming;
        let mut out = Outbox::default();
        driver.on_repl_reply(
            &mut Ctx::new(SimTime(0), Node::Connect, &mut out),
            ReplReply::XLogData(txn(10, 1000, &[1])),
        );
        assert!(keepalive(&mut driver, 5000).is_empty(), "the transaction received is not confirmed yet");
        driver.last_flushed = Lsn(1140);
        assert_eq!(keepalive(&mut driver, 5000), [5000], "everything received confirmed: the keep-alive is");
        assert!(keepalive(&mut driver, 5000).is_empty(), "once");
        assert_eq!(keepalive(&mut driver, 6000), [6000]);
    }
}
