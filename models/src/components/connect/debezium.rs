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

/// `MAX_ATTEMPTS_FOR_OBTAINING_REPLICATION_SLOT` (`PostgresConnection`).
pub const MAX_ATTEMPTS_FOR_OBTAINING_REPLICATION_SLOT: u32 = 900;
/// `PAUSE_BETWEEN_REPLICATION_SLOT_RETRIEVAL_ATTEMPTS`: 2 s.
pub const PAUSE_BETWEEN_REPLICATION_SLOT_RETRIEVAL_ATTEMPTS_MS: u64 = 2_000;

/// `snapshot.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotMode {
    Initial,
    NoData,
    WhenNeeded,
    Always,
}

impl SnapshotMode {
    pub fn name(self) -> &'static str {
        match self {
            SnapshotMode::Initial => "initial",
            SnapshotMode::NoData => "no_data",
            SnapshotMode::WhenNeeded => "when_needed",
            SnapshotMode::Always => "always",
        }
    }
}

/// `offset.mismatch.strategy` (3.4, DBZ-9688;
/// `PostgresConnectorConfig.OffsetSlotMismatchStrategy`): how the stored offset and the slot's
/// position are reconciled at start-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OffsetMismatchStrategy {
    NoValidation,
    TrustOffset,
    TrustSlot,
    TrustGreaterLsn,
}

impl OffsetMismatchStrategy {
    pub const ALL: [OffsetMismatchStrategy; 4] = [
        OffsetMismatchStrategy::NoValidation,
        OffsetMismatchStrategy::TrustOffset,
        OffsetMismatchStrategy::TrustSlot,
        OffsetMismatchStrategy::TrustGreaterLsn,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OffsetMismatchStrategy::NoValidation => "no_validation",
            OffsetMismatchStrategy::TrustOffset => "trust_offset",
            OffsetMismatchStrategy::TrustSlot => "trust_slot",
            OffsetMismatchStrategy::TrustGreaterLsn => "trust_greater_lsn",
        }
    }

    /// `trust_slot` and `trust_greater_lsn` skip the log-position check
    /// (`PostgresConnection.validateLogPosition`).
    pub fn checks_log_position(self) -> bool {
        matches!(self, OffsetMismatchStrategy::NoValidation | OffsetMismatchStrategy::TrustOffset)
    }
}

/// `lsn.flush.mode` (3.4, DBZ-9641; `PostgresConnectorConfig.LsnFlushMode`): who confirms positions
/// to the slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LsnFlushMode {
    /// Debezium confirms its stored offsets; the driver's keep-alive confirmation is off.
    Connector,
    /// Nothing confirms: the slot moves only when something outside advances it.
    Manual,
    /// Debezium confirms its stored offsets, and pgjdbc confirms keep-alive LSNs by its rule.
    ConnectorAndDriver,
}

/// Debezium's fallback for `connector_and_driver` without heartbeats
/// (`applyLsnFlushModeHeartbeatFallback`): 10 minutes.
pub const LSN_FLUSH_MODE_HEARTBEAT_FALLBACK_MS: u64 = 600_000;

impl DebeziumConfig {
    /// The heartbeat interval in effect: `connector_and_driver` with `heartbeat.interval.ms=0`
    /// forces 600 000 ms (`PostgresConnectorConfig.applyLsnFlushModeHeartbeatFallback`).
    pub fn effective_heartbeat_interval_ms(&self) -> u64 {
        if self.heartbeat_interval_ms == 0 && self.lsn_flush_mode == LsnFlushMode::ConnectorAndDriver {
            LSN_FLUSH_MODE_HEARTBEAT_FALLBACK_MS
        } else {
            self.heartbeat_interval_ms
        }
    }
}

impl LsnFlushMode {
    pub const ALL: [LsnFlushMode; 3] =
        [LsnFlushMode::Connector, LsnFlushMode::Manual, LsnFlushMode::ConnectorAndDriver];

    pub fn name(self) -> &'static str {
        match self {
            LsnFlushMode::Connector => "connector",
            LsnFlushMode::Manual => "manual",
            LsnFlushMode::ConnectorAndDriver => "connector_and_driver",
        }
    }
}

/// The connector properties the model uses, with Debezium's defaults.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DebeziumConfig {
    /// The Debezium release, `(major, minor)`. Before 2.7 the slot is confirmed from the offsets
    /// acknowledged in memory (`commitRecord` → `commit()`), not re-read from the offset store:
    /// DBZ-7816 (fixed in 2.7.0.Alpha2 by `PostgresConnectorTask.performCommit` re-reading the
    /// offsets).
    pub version: (u32, u32),
    /// `name` of the connector (the offsets-topic key).
    pub name: String,
    /// `topic.prefix`.
    pub topic_prefix: String,
    /// `slot.name` (default `debezium`).
    pub slot_name: String,
    /// `plugin.name` (the model supports `pgoutput`).
    pub plugin_name: String,
    /// `publication.name` (default `dbz_publication`).
    pub publication_name: String,
    /// `snapshot.mode` (default `initial`).
    pub snapshot_mode: SnapshotMode,
    /// `snapshot.fetch.size` (default 10 240).
    pub snapshot_fetch_size: u32,
    /// `max.batch.size` (default 2 048).
    pub max_batch_size: u32,
    /// `poll.interval.ms` (default 500).
    pub poll_interval_ms: u64,
    /// `retriable.restart.connector.wait.ms` (default 10 000).
    pub retriable_restart_connector_wait_ms: u64,
    /// `tombstones.on.delete` (default true).
    pub tombstones_on_delete: bool,
    /// Internal `log.position.check.enable` (default true).
    pub log_position_check_enable: bool,
    /// `offset.mismatch.strategy` (default `no_validation`).
    pub offset_mismatch_strategy: OffsetMismatchStrategy,
    /// `lsn.flush.mode` (default `connector`).
    pub lsn_flush_mode: LsnFlushMode,
    /// `heartbeat.interval.ms` (default 0: off).
    pub heartbeat_interval_ms: u64,
    /// `slot.failover` (PostgreSQL 17+, default false): create the slot as a failover slot.
    pub slot_failover: bool,
    /// `heartbeat.action.query`, modelled as an update of row 1 of this table (an upsert into a
    /// heartbeat table in the publication).
    pub heartbeat_action_table: Option<TableId>,
    /// The captured tables (`table.include.list`), in snapshot order.
    pub tables: Vec<TableId>,
}

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

    /// Whether this release confirms the slot from offsets re-read from the offset store
    /// (2.7 and later, DBZ-7816); before, from the offsets acknowledged in memory.
    pub fn confirms_from_offset_store(&self) -> bool {
        self.config.version >= (2, 7)
    }

    /// `commitRecord(record, metadata)`: Kafka acknowledged a record. A no-op since 2.7; before,
    /// it remembered the record's offset for the next `commit()`.
    pub fn commit_record(&mut self, offset: SourceOffset) {
        if !self.confirms_from_offset_store() {
            self.last_acked = Some(offset);
        }
    }

    /// The offset `commit()` confirms before 2.7.
    pub fn last_acked(&self) -> Option<SourceOffset> {
        self.last_acked
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

    /// `PostgresConnectorTask.start()` with the offset Connect loaded.
    pub fn start(&mut self, ctx: &mut Ctx, stored: Option<SourceOffset>) -> TaskEvent {
        self.stored = stored;
        self.offset = stored.unwrap_or_default();
        self.starting_slot = None;
        self.slot_created = None;
        self.snapshot = None;
        self.clear_queue();
        self.skip_upto = None;
        self.lsn_flushing_allowed = false;
        self.last_flushed = Lsn::INVALID;
        self.slot_info_attempts = 0;
        self.last_data_start = Lsn::INVALID;
        self.driver_flushed = Lsn::INVALID;
        ctx.observe(Observation::TaskStarted { offset: stored });
        if let Some(offset) = stored
            && offset.initial_snapshot_running()
            && self.config.snapshot_mode == SnapshotMode::NoData
        {
            return self.fail(
                ctx,
                "The connector previously stopped while taking a snapshot, but now the connector is configured \
                 to never allow snapshots. Reconfigure the connector to use snapshots initially or when needed."
                    .into(),
            );
        }
        let check = self.config.log_position_check_enable
            && self.config.offset_mismatch_strategy.checks_log_position()
            && stored.is_some_and(|offset| !offset.initial_snapshot_running());
        self.phase = if check { Phase::CheckingLogPosition } else { Phase::ReadingSlot };
        let slot = self.config.slot_name.clone();
        self.sql(ctx, SqlRequest::SlotInfo { slot });
        TaskEvent::None
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

    fn on_sql_reply(&mut self, ctx: &mut Ctx, reply: SqlReply) -> TaskEvent {
        if let SqlReply::Error(error) = &reply {
            return self.retriable(ctx, format!("org.postgresql.util.PSQLException: {error}"));
        }
        if let (Phase::CheckingLogPosition | Phase::ReadingSlot, SqlReply::Slot(Some(row))) = (&self.phase, &reply)
            && (row.restart_lsn.is_none() || row.confirmed_flush_lsn.is_none())
        {
            return self.slot_info_not_valid(ctx);
        }
        match (&self.phase, reply) {
            (Phase::CheckingLogPosition, SqlReply::Slot(row)) => {
                let stored = self.stored.unwrap_or_default();
                let (available, detail) = match &row {
                    None => (false, format!("slot \"{}\" does not exist", self.config.slot_name)),
                    Some(slot) => match (stored.lsn_proc, slot.restart_lsn) {
                        (None, _) => (true, "no lsn_proc stored: nothing to compare".into()),
                        (Some(lsn_proc), Some(restart)) if restart <= lsn_proc => {
                            (true, format!("restart_lsn {restart} <= lsn_proc {lsn_proc}"))
                        }
                        (Some(lsn_proc), restart) => (
                            false,
                            format!(
                                "restart_lsn {} > lsn_proc {lsn_proc}",
                                restart.map_or("NULL".to_string(), |lsn| lsn.to_string())
                            ),
                        ),
                    },
                };
                ctx.observe(Observation::LogPositionChecked { available, detail });
                if !available {
                    if self.config.snapshot_mode == SnapshotMode::WhenNeeded {
                        // The stored offset is dropped so that a new snapshot runs.
                        self.stored = None;
                        self.offset = SourceOffset::default();
                    } else {
                        return self.fail(
                            ctx,
                            "The connector is trying to read change stream starting at the stored offset, but this \
                             is no longer available on the server. Reconfigure the connector to use a snapshot mode \
                             when needed."
                                .into(),
                        );
                    }
                }
                // Start-up's slot read (`getSlotState`) reads the slot again; the row just read is
                // the same one.
                self.on_slot_read(ctx, row)
            }
            (Phase::ReadingSlot, SqlReply::Slot(row)) => self.on_slot_read(ctx, row),
            (Phase::EnsuringPublication, SqlReply::Ok) => {
                if self.starting_slot.is_none() {
                    self.phase = Phase::CreatingSlot;
                    let (slot, plugin) = (self.config.slot_name.clone(), self.config.plugin_name.clone());
                    let failover = self.config.slot_failover;
                    self.repl(ctx, ReplRequest::CreateSlot { slot, plugin, failover });
                    TaskEvent::None
                } else {
                    self.decide_snapshot(ctx)
                }
            }
            (Phase::SnapshotReadingLsn, SqlReply::Lsn(lsn)) => self.begin_snapshot(ctx, SnapshotCase::SlotExisted, lsn),
            (Phase::SnapshotScanning { table_index }, SqlReply::Rows { table, rows, done }) => {
                let table_index = *table_index;
                self.queue.get_mut().reserve(rows.len());
                for (key, row) in rows {
                    self.emit_snapshot_row(ctx, table, key, row);
                }
                if done {
                    if table_index + 1 < self.config.tables.len() {
                        self.scan_table(ctx, table_index + 1);
                    } else {
                        self.complete_snapshot(ctx);
                    }
                }
                TaskEvent::None
            }
            _ => TaskEvent::None,
        }
    }

    /// `PostgresConnection.fetchReplicationSlotInfo`: a slot row whose `restart_lsn` (or
    /// flush position) is NULL — an invalidated slot's — is "not yet valid": read it again in
    /// 2 s, up to 900 times (about 30 minutes, whatever `slot.max.retries` says), while the task
    /// reports RUNNING; then fail.
    fn slot_info_not_valid(&mut self, ctx: &mut Ctx) -> TaskEvent {
        self.slot_info_attempts += 1;
        if self.slot_info_attempts >= MAX_ATTEMPTS_FOR_OBTAINING_REPLICATION_SLOT {
            return self.fail(
                ctx,
                "org.apache.kafka.connect.errors.ConnectException: Unable to obtain valid replication slot. Make sure \
                 there are no long-running transactions running in parallel as they may hinder the allocation of the \
                 replication slot when starting this connector"
                    .into(),
            );
        }
        // Narrated at the first attempt and every 100th, not all 900.
        if self.slot_info_attempts == 1 || self.slot_info_attempts.is_multiple_of(100) {
            ctx.observe(Observation::SlotInfoRetry { attempt: self.slot_info_attempts });
        }
        TaskEvent::ReadSlotAgainAfter(PAUSE_BETWEEN_REPLICATION_SLOT_RETRIEVAL_ATTEMPTS_MS)
    }

    /// The pause of the 900-attempt loop ended: read the slot row again.
    pub fn on_slot_info_retry(&mut self, ctx: &mut Ctx) -> TaskEvent {
        if matches!(self.phase, Phase::CheckingLogPosition | Phase::ReadingSlot) {
            let slot = self.config.slot_name.clone();
            self.sql(ctx, SqlRequest::SlotInfo { slot });
        }
        TaskEvent::None
    }

    fn on_slot_read(&mut self, ctx: &mut Ctx, row: Option<SlotRow>) -> TaskEvent {
        ctx.observe(Observation::SlotRead { row: row.clone() });
        self.starting_slot = row.map(CopyOnWrite::new);
        self.phase = Phase::EnsuringPublication;
        let name = self.config.publication_name.clone();
        self.sql(ctx, SqlRequest::EnsurePublication { name });
        TaskEvent::None
    }

    fn decide_snapshot(&mut self, ctx: &mut Ctx) -> TaskEvent {
        let stored = self.stored;
        let (snapshot, reason) = match (self.config.snapshot_mode, stored) {
            (SnapshotMode::NoData, _) => (false, "snapshot.mode=no_data never snapshots data".to_string()),
            (SnapshotMode::Always, _) => (true, "snapshot.mode=always snapshots at every start".to_string()),
            (mode, None) => (true, format!("snapshot.mode={}: no stored offset", mode.name())),
            (mode, Some(offset)) if offset.initial_snapshot_running() => (
                true,
                format!(
                    "snapshot.mode={}: previous snapshot was cancelled before completion; a new snapshot will be taken",
                    mode.name()
                ),
            ),
            (mode, Some(_)) => (false, format!("snapshot.mode={}: stored offset, snapshot completed", mode.name())),
        };
        ctx.observe(Observation::SnapshotDecided { snapshot, reason });
        if !snapshot {
            return self.start_streaming(ctx);
        }
        match self.slot_created.as_deref() {
            Some((consistent_point, _)) => self.begin_snapshot(ctx, SnapshotCase::SlotCreatedNow, *consistent_point),
            None => {
                self.phase = Phase::SnapshotReadingLsn;
                self.sql(ctx, SqlRequest::CurrentWalLsn);
                TaskEvent::None
            }
        }
    }

    fn begin_snapshot(&mut self, ctx: &mut Ctx, case: SnapshotCase, lsn: Lsn) -> TaskEvent {
        self.snapshot_attempts += 1;
        let attempt = self.snapshot_attempts;
        // A fresh offset context: no lsn_proc, no lsn_commit.
        self.offset = SourceOffset { lsn: Some(lsn), snapshot: Some(SnapshotKind::Initial), ..SourceOffset::default() };
        self.snapshot = Some(SnapshotRun { attempt, case, lsn, buffered: None, rows: 0 });
        ctx.observe(Observation::SnapshotStarted { attempt, case, lsn });
        if self.config.tables.is_empty() {
            self.complete_snapshot(ctx);
            return TaskEvent::None;
        }
        self.scan_table(ctx, 0);
        TaskEvent::None
    }

    fn scan_table(&mut self, ctx: &mut Ctx, table_index: usize) {
        self.phase = Phase::SnapshotScanning { table_index };
        let exported_snapshot = match self.snapshot.as_ref().map(|run| run.case) {
            Some(SnapshotCase::SlotCreatedNow) => self.slot_created.as_deref().map(|(_, name)| name.clone()),
            _ => None,
        };
        let table = self.config.tables[table_index];
        let fetch_size = self.config.snapshot_fetch_size;
        self.sql(ctx, SqlRequest::ScanTable { table, exported_snapshot, fetch_size });
    }

    fn emit_snapshot_row(&mut self, ctx: &mut Ctx, table: TableId, key: Key, row: Row) {
        let Some(run) = self.snapshot.as_mut() else { return };
        let marker = if run.rows == 0 { SnapshotMarker::First } else { SnapshotMarker::Middle };
        run.rows += 1;
        let record = SourceRecord {
            topic: Topic::Change(table),
            key,
            value: Some(ChangeEvent::snapshot_read(Origin::Postgresql, table, row, run.lsn, marker, ctx.now.ms())),
            offset: self.offset,
        };
        if let Some(previous) = run.buffered.replace(record) {
            self.queue.get_mut().push(previous);
        }
    }

    fn complete_snapshot(&mut self, ctx: &mut Ctx) {
        let Some(mut run) = self.snapshot.take() else { return };
        self.offset.last_snapshot_record = true;
        self.offset.snapshot_completed = true;
        if let Some(mut last) = run.buffered.take() {
            if let Some(value) = last.value.as_mut() {
                value.source.snapshot = SnapshotMarker::Last;
            }
            last.offset = self.offset;
            self.queue.get_mut().push(last);
        }
        ctx.observe(Observation::SnapshotCompleted { attempt: run.attempt, rows: run.rows, lsn: run.lsn });
        self.start_streaming(ctx);
    }

    fn start_streaming(&mut self, ctx: &mut Ctx) -> TaskEvent {
        // Requested start: lsn_proc if stored, else lsn, else the slot's own position (0/0).
        let start = self.offset.resume_lsn().unwrap_or(Lsn::INVALID);
        // The search for already-processed events runs only when lsn_proc is stored.
        self.skip_upto = self.offset.lsn_proc;
        // `WalPositionLocator`'s false-match guard (debezium-connector-postgres#76, in 3.7): when
        // the stored event was a COMMIT (`messageType`), a DML arriving at its LSN is new: the
        // next WAL record starts where the commit record ends, so the next transaction's first
        // change can carry the stored lsn_proc. Before, the locator took it for a replay.
        self.skip_stored_commit = self.config.version >= (3, 7)
            && self.offset.lsn_proc.is_some()
            && self.offset.message_type == Some(MessageType::Commit);
        // Streaming offsets carry no snapshot keys.
        self.offset.snapshot = None;
        self.offset.last_snapshot_record = false;
        self.offset.snapshot_completed = false;
        self.lsn_flushing_allowed = false;
        self.phase = Phase::StartingStream;
        ctx.observe(Observation::StreamingRequested { start, skip_processed_upto: self.skip_upto });
        let (slot, publication) = (self.config.slot_name.clone(), self.config.publication_name.clone());
        self.repl(ctx, ReplRequest::StartReplication { slot, start, publication });
        TaskEvent::None
    }

    fn on_repl_reply(&mut self, ctx: &mut Ctx, reply: ReplReply) -> TaskEvent {
        match (&self.phase, reply) {
            (_, ReplReply::Error(error)) => self.retriable(ctx, format!("org.postgresql.util.PSQLException: {error}")),
            (Phase::CreatingSlot, ReplReply::SlotCreated { consistent_point, snapshot_name }) => {
                self.slot_created = Some(CopyOnWrite::new((consistent_point, snapshot_name)));
                self.decide_snapshot(ctx)
            }
            (Phase::StartingStream, ReplReply::StreamingStarted) => {
                self.phase = Phase::Streaming;
                match self.config.effective_heartbeat_interval_ms() {
                    0 => TaskEvent::None,
                    interval_ms => TaskEvent::HeartbeatEvery(interval_ms),
                }
            }
            (Phase::Streaming, ReplReply::XLogData(txn)) => {
                self.lsn_flushing_allowed = true;
                self.last_data_start = txn.end_lsn;
                self.process_transaction(txn);
                TaskEvent::None
            }
            (Phase::Streaming, ReplReply::Keepalive { wal_end }) => {
                self.on_keepalive(ctx, wal_end);
                TaskEvent::None
            }
            _ => TaskEvent::None,
        }
    }

    /// A heartbeat (`io.debezium.heartbeat.HeartbeatImpl`): a record on the heartbeat topic
    /// carrying the current offset, so that Connect stores it (and the slot is confirmed to it)
    /// though no change record was produced; and the `heartbeat.action.query`, on a connection of
    /// its own, whose write in a published table gives a quiet database a commit to process.
    pub fn on_heartbeat(&mut self, ctx: &mut Ctx) -> bool {
        if !self.is_streaming() {
            return false;
        }
        if self.offset.lsn_to_confirm().is_some() {
            let record = SourceRecord { topic: Topic::Heartbeat, key: 0, value: None, offset: self.offset };
            self.queue.get_mut().push(record);
        }
        if let Some(table) = self.config.heartbeat_action_table {
            let session = match self.heartbeat_session {
                Some(session) => session,
                None => {
                    let session = self.new_session();
                    self.heartbeat_session = Some(session);
                    session
                }
            };
            let ops = vec![RowOp::Update { table, key: 1, status: crate::core::ids::Status::Assessed }];
            ctx.send(Node::Postgres, Msg::Sql { session, request: SqlRequest::Transaction { ops } });
        }
        let lsn = self.offset.lsn_to_confirm();
        ctx.observe(Observation::Heartbeat { lsn, action_query: self.config.heartbeat_action_table.is_some() });
        true
    }

    /// pgjdbc's keep-alive rule (`V3PGReplicationStream.processKeepAliveMessage`, pgjdbc ≥ 42.7.0),
    /// on with `lsn.flush.mode=connector_and_driver`: when the last LSN Debezium confirmed
    /// explicitly is at or past the start of the last data message, a keep-alive LSN beyond both
    /// the explicit and the driver's flush position is confirmed. It moves the slot past
    /// Debezium's stored offset: Debezium never stores the keep-alive LSN.
    fn on_keepalive(&mut self, ctx: &mut Ctx, wal_end: Lsn) {
        if self.config.lsn_flush_mode != LsnFlushMode::ConnectorAndDriver {
            return;
        }
        if self.last_flushed >= self.last_data_start && wal_end > self.last_flushed && wal_end > self.driver_flushed {
            self.driver_flushed = wal_end;
            ctx.observe(Observation::KeepaliveConfirmed { lsn: wal_end });
            self.repl(ctx, ReplRequest::StatusUpdate { flush: wal_end });
        }
    }

    /// `processReplicationMessages` for one transaction: BEGIN, each change, COMMIT.
    fn process_transaction(&mut self, txn: DecodedTxn) {
        // BEGIN: position only.
        self.offset.tx_id = Some(txn.xid);
        for change in &txn.changes {
            let replayed = |upto: Lsn| change.lsn < upto || (change.lsn == upto && !self.skip_stored_commit);
            if self.skip_upto.is_some_and(replayed) {
                // Already processed before the restart: filtered out by the position locator.
                continue;
            }
            self.skip_upto = None;
            self.offset.lsn = Some(change.lsn);
            self.offset.lsn_proc = Some(change.lsn);
            self.offset.ts_usec = txn.commit_time.ms() * 1000;
            self.offset.message_type = Some(match change.kind {
                ChangeKind::Insert { .. } => MessageType::Insert,
                ChangeKind::Update { .. } => MessageType::Update,
                ChangeKind::Delete { .. } => MessageType::Delete,
            });
            if !self.config.tables.contains(&change.table) {
                continue; // a filtered table moves the offset but emits nothing
            }
            let (op, before, after) = match change.kind {
                ChangeKind::Insert { after } => (Op::Create, None, Some(after)),
                ChangeKind::Update { before, after } => (Op::Update, before, Some(after)),
                ChangeKind::Delete { before } => (Op::Delete, before, None),
            };
            let value = ChangeEvent {
                op,
                before,
                after,
                source: SourceInfo {
                    connector: Origin::Postgresql,
                    table: change.table,
                    lsn: change.lsn,
                    tx_id: Some(txn.xid),
                    snapshot: SnapshotMarker::Streamed,
                    ts_ms: txn.commit_time.ms(),
                },
            };
            let topic = Topic::Change(change.table);
            self.queue.get_mut().push(SourceRecord { topic, key: change.key, value: Some(value), offset: self.offset });
            if op == Op::Delete && self.config.tombstones_on_delete {
                self.queue.get_mut().push(SourceRecord { topic, key: change.key, value: None, offset: self.offset });
            }
        }
        // COMMIT: lsn_commit = lsn_proc = the commit's end.
        self.skip_upto = self.skip_upto.filter(|upto| *upto > txn.end_lsn);
        self.offset.lsn = Some(txn.end_lsn);
        self.offset.lsn_proc = Some(txn.end_lsn);
        self.offset.lsn_commit = Some(txn.end_lsn);
        self.offset.message_type = Some(MessageType::Commit);
    }

    /// `performCommit()`: confirm `lsn_commit ?? lsn_proc` of the offset Connect hands over (re-read
    /// from the offset store since 2.7; before, the last one Kafka acknowledged, in memory) to the
    /// slot, only while streaming.
    pub fn commit_offset(&mut self, ctx: &mut Ctx, stored: Option<SourceOffset>) {
        if let Some(flush) = self.commit_moves(stored) {
            self.last_flushed = flush;
            let from_offset_store = self.confirms_from_offset_store();
            ctx.observe(Observation::LsnFlushed { lsn: flush, from_offset_store });
            self.repl(ctx, ReplRequest::StatusUpdate { flush });
        }
    }

    /// Where `commit_offset` would confirm the slot to, if it would send a confirmation at all.
    pub fn commit_moves(&self, stored: Option<SourceOffset>) -> Option<Lsn> {
        if !self.is_streaming() || !self.lsn_flushing_allowed || self.config.lsn_flush_mode == LsnFlushMode::Manual {
            return None;
        }
        let lsn = stored.and_then(|offset| offset.lsn_to_confirm())?;
        Some(lsn).filter(|lsn| *lsn > self.last_flushed)
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

    /// The last LSN the task has completely processed on its current stream.
    pub fn processed_upto(&self) -> Option<Lsn> {
        if self.is_streaming() { self.offset.lsn_proc.or(self.offset.lsn) } else { None }
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
