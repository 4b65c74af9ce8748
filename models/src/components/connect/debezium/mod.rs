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
//! - Streaming (`PostgresStreamingChangeEventSource.execute`) from `lsn_proc` (else `lsn`, else
//!   the slot's position), each decoded transaction read as pgoutput's messages (BEGIN at the
//!   first change's LSN, the changes, COMMIT at its end), processed as
//!   `processReplicationMessages` does (`lastCompletelyProcessedLsn`, `lsn_commit`,
//!   `lsn_events_processed`); on a restart with `lsn_proc` stored, the search phase and the
//!   filtering phase of `WalPositionLocator` (`locator`, ported literally, with the rules of the
//!   configured release).
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
//!   model does. `trust_offset` and `trust_greater_lsn` seek the slot first (below).
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
//! - Releases (`[versions] debezium`): before 1.1 `commit()` confirms the last record `poll()`
//!   returned (DBZ-1766); before 1.3 there is no locator (the stream skips everything at or below
//!   the stored `lsn`, and `lsn_proc` is confirmed); before 2.7 the slot is confirmed from the
//!   offsets acknowledged in memory (DBZ-7816); the locator's own rules are in `locator`.
//!
//! - The slot seek (`PostgresReplicationConnection.startStreaming`, `advanceReplicationSlot`;
//!   DBZ-5739, DBZ-7015, dbz#1863; which release seeks when: [`DebeziumConfig::slot_seek`]): before
//!   `START_REPLICATION`, `pg_replication_slot_advance(slot, lsn_commit ?? lsn)`. A slot behind
//!   the offset is moved up to it; a slot ahead makes PostgreSQL refuse ("cannot advance
//!   replication slot to …, minimum is …"), which fails the task ("Cannot seek to the last known
//!   offset …"), except in 2.2 to 2.4, which log it and stream on (DBZ-6191). The seek runs on the
//!   first stream of a start, not again when the search reconnects (by then the slot is at the
//!   target, and the same target is no move).
//!
//! Left out (another issue makes them exact): `slot.max.retries` (a refused seek from 2.5 is
//! retried six times, 10 s apart, before the task fails; here it fails at once), heartbeats
//! emitted right after a commit or a change (here only on the interval's timer), the parts of
//! incremental and blocking snapshots `incremental` and `blocking` list,
//! transaction metadata (so no BEGIN record ever carries an offset), the `<prefix>.message` records
//! of logical decoding messages (their offsets move; no record is emitted), the queue's
//! `max.queue.size` back-pressure.
//!
//! The files: `config` (the properties), `startup` (start-up to the snapshot decision), `snapshot`,
//! `streaming` (the replication stream and its restart filter), `incremental` (signals and
//! incremental snapshots), `blocking` (blocking snapshots), `offsets` (acknowledgement and the
//! slot's confirmation); the task's state, its connections and its queue are here.

mod blocking;
mod config;
mod incremental;
mod kafka_signal;
mod locator;
mod offsets;
mod read_only;
mod snapshot;
mod startup;
mod streaming;

pub use kafka_signal::KafkaSignalOutcome;
pub use locator::{LocatorRules, WalPositionLocator};

pub use config::{
    DebeziumConfig, HeartbeatMessage, KafkaChannel, KafkaSignalEntry, LSN_FLUSH_MODE_HEARTBEAT_FALLBACK_MS,
    LsnFlushMode, MAX_ATTEMPTS_FOR_OBTAINING_REPLICATION_SLOT, MessagePrefixFilter, OffsetMismatchStrategy,
    PAUSE_BETWEEN_REPLICATION_SLOT_RETRIEVAL_ATTEMPTS_MS, Signalling, SlotSeek, SnapshotMode, WatermarkingStrategy,
};

use crate::core::change::{Change, ChangeKind, RowOp};
use crate::core::component::Ctx;
use crate::core::event::{
    ChangeEvent, MessageType, Op, Origin, SnapshotKind, SnapshotMarker, SourceInfo, SourceOffset, SourceRecord, Topic,
    key_placement, message_key,
};
use crate::core::ids::{Key, Node, Row, TableId, Xid};
use crate::core::lsn::Lsn;
use crate::core::observe::{Observation, SnapshotCase};
use crate::core::protocol::{
    DecodedMessage, DecodedTxn, Msg, ReplReply, ReplRequest, SessionId, SlotRow, SqlReply, SqlRequest,
};
use crate::core::shared::{CopyOnWrite, Fixed, Meter};
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
    /// The seek before the stream (`pg_replication_slot_advance(slot, target)`): waiting for
    /// its answer, then `START_REPLICATION` at `start`.
    SeekingSlot {
        target: Lsn,
        start: Lsn,
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
            Phase::SeekingSlot { target, .. } => {
                format!("seeking the replication slot to the stored offset {target} (pg_replication_slot_advance)")
            }
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
    /// The restart's `WalPositionLocator` while it searches or filters (None once it passes
    /// every message, or when there was nothing to search for).
    locator: Option<Box<WalPositionLocator>>,
    /// The search phase runs on the current stream (`searchWalPosition`).
    searching: bool,
    /// Before 1.3: every message at or below this LSN (the stored `lsn`) is skipped.
    legacy_skip_upto: Option<Lsn>,
    /// `lastCompletelyProcessedLsn` of the streaming source: the stream's start, then the last
    /// message that was the last at its LSN.
    last_completely_processed_lsn: Option<Lsn>,
    /// `previousLsn` of `incrementLsnEventsProcessed` (3.7): the LSN of the last DML counted.
    previous_dml_lsn: Option<Lsn>,
    /// Before 1.3 only: the LSN of the last COMMIT the task read on its stream. The 1.0–1.2
    /// pgoutput decoder reads every COMMIT but passes none on, so the offset never holds a
    /// commit's end; what the task has read is what it has processed. Stays None from 1.3 on.
    last_commit_handled: Option<Lsn>,
    /// `lsnFlushingAllowed`: false from a stream (re)start until the first message arrives.
    lsn_flushing_allowed: bool,
    /// The flushed LSN last sent to the server.
    last_flushed: Lsn,
    /// Before 2.7, the offset `commit()` confirms: from 1.1 that of the last record Kafka
    /// acknowledged (`commitRecord`); before 1.1 that of the last record `poll()` returned.
    last_acked: Option<SourceOffset>,
    /// Reads of the slot row so far in this start (`fetchReplicationSlotInfo`).
    slot_info_attempts: u32,
    /// pgjdbc's state for its keep-alive rule: the start of the last data message received
    /// (a COMMIT is stamped with the commit's end) and the flush position the driver reports.
    last_data_start: Lsn,
    driver_flushed: Lsn,
    /// The heartbeat action query's own connection.
    heartbeat_session: Option<SessionId>,
    /// The incremental snapshot, while one runs (`incremental`).
    incremental: Option<Box<incremental::IncrementalSnapshot>>,
    /// The streaming thread is in `readChunk`: the stream waits (`incremental`).
    stalled: Option<Box<incremental::Stalled>>,
    /// Set while a message sends the streaming thread into `readChunk`: that message's place.
    stalled_index: Option<usize>,
    /// Where this task's chunk ids come from: its worker's place and the task's start (the
    /// worker counts them), and the chunks drawn so far (`ChunkId`).
    chunk_origin: (usize, u32),
    chunks_drawn: u32,
    /// A `stop-snapshot` waiting for the next `readChunk` (`incremental`): in memory only.
    stop_request: Option<Box<incremental::StopRequest>>,
    /// A blocking snapshot's tables, signalled: the streaming loop pauses before its next
    /// message (`blocking`).
    blocking_request: Option<Vec<(TableId, u8)>>,
    /// The blocking snapshot while it runs (`blocking`).
    blocking: Option<Box<blocking::BlockingSnapshot>>,
    /// The streaming metrics this task registers (`context=streaming`): new with each task,
    /// never acted on.
    pub meter: Meter<StreamingMeter>,
}

/// Debezium's streaming metrics (the MBean `debezium.postgres:type=connector-metrics,
/// context=streaming,server=<topic.prefix>`), as the task's streaming thread updates them:
/// `StreamingMeter` (`MilliSecondsBehindSource`) and `CommonEventMeter`
/// (`MilliSecondsSinceLastEvent`), `debezium-core` `io.debezium.pipeline.meters`. A task's
/// metrics start empty: each is -1 until its first event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StreamingMeter {
    /// `lastEventTimestamp`: when the last event was dispatched, included or filtered
    /// (`CommonEventMeter.updateCommonEventMetrics`, from `onEvent` and `onFilteredEvent`).
    pub last_event_ms: Option<u64>,
    /// `lagBehindSource`: at the last included event, the time from its source timestamp (the
    /// commit time) to its dispatch (`StreamingMeter.onEvent`). It is set by events only: it
    /// does not grow while nothing arrives.
    pub lag_behind_source_ms: Option<u64>,
    /// `totalNumberOfEventsSeen`.
    pub events_seen: u64,
}

impl StreamingMeter {
    /// `onEvent`: an event of a captured table (or a captured message) was dispatched at
    /// `now_ms`; `source_ms` is its source timestamp.
    pub fn on_event(&mut self, now_ms: u64, source_ms: u64) {
        self.last_event_ms = Some(now_ms);
        self.lag_behind_source_ms = Some(now_ms.saturating_sub(source_ms));
        self.events_seen += 1;
    }

    /// `onFilteredEvent`: an event the filters dropped (a table not captured, a message prefix
    /// not included) still counts as seen.
    pub fn on_filtered_event(&mut self, now_ms: u64) {
        self.last_event_ms = Some(now_ms);
        self.events_seen += 1;
    }

    /// `MilliSecondsBehindSource`: the last event's lag, -1 before any.
    pub fn milliseconds_behind_source(&self) -> i64 {
        self.lag_behind_source_ms.map_or(-1, |ms| i64::try_from(ms).unwrap_or(i64::MAX))
    }

    /// `MilliSecondsSinceLastEvent` at `now_ms`: -1 before any event.
    pub fn milliseconds_since_last_event(&self, now_ms: u64) -> i64 {
        self.last_event_ms.map_or(-1, |at| i64::try_from(now_ms.saturating_sub(at)).unwrap_or(i64::MAX))
    }
}

impl DebeziumTask {
    pub fn new(config: Fixed<DebeziumConfig>, first_session: SessionId) -> DebeziumTask {
        DebeziumTask {
            meter: Meter::default(),
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
            locator: None,
            searching: false,
            legacy_skip_upto: None,
            last_completely_processed_lsn: None,
            previous_dml_lsn: None,
            last_commit_handled: None,
            lsn_flushing_allowed: false,
            last_flushed: Lsn::INVALID,
            last_acked: None,
            slot_info_attempts: 0,
            last_data_start: Lsn::INVALID,
            driver_flushed: Lsn::INVALID,
            heartbeat_session: None,
            incremental: None,
            stalled: None,
            stalled_index: None,
            chunk_origin: (0, 0),
            chunks_drawn: 0,
            stop_request: None,
            blocking_request: None,
            blocking: None,
        }
    }

    /// Where the chunk ids of this task come from: the worker's place in its group and the
    /// task's start, which the worker counts across crashes (see [`crate::core::signal::ChunkId`]).
    pub fn with_chunk_origin(mut self, worker: usize, start: u32) -> DebeziumTask {
        self.chunk_origin = (worker, start);
        self
    }

    pub fn is_streaming(&self) -> bool {
        self.phase == Phase::Streaming
    }

    /// The restart rules of the configured release.
    pub fn rules(&self) -> LocatorRules {
        LocatorRules::of(self.config.version)
    }

    /// The restart's search phase is running: messages go to the locator, none is dispatched.
    pub fn is_searching(&self) -> bool {
        self.is_streaming() && self.searching
    }

    pub fn is_running(&self) -> bool {
        !matches!(self.phase, Phase::Idle | Phase::Failed { .. } | Phase::AwaitingRestart)
    }

    /// The task failed (`Phase::Failed`).
    pub fn has_failed(&self) -> bool {
        matches!(self.phase, Phase::Failed { .. })
    }

    pub fn next_session(&self) -> SessionId {
        self.next_session
    }

    fn new_session(&mut self) -> SessionId {
        let session = self.next_session;
        self.next_session += 1;
        session
    }

    /// The `heartbeat.action.query`'s own connection, opened at its first use.
    fn heartbeat_session(&mut self) -> SessionId {
        if let Some(session) = self.heartbeat_session {
            return session;
        }
        let session = self.new_session();
        self.heartbeat_session = Some(session);
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
        if self.confirms_last_polled() {
            // Before 1.1, `poll()`: `lastOffset` = the last record returned (DBZ-1766).
            self.last_acked = Some(self.queue[count - 1].offset);
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

    /// `StreamingMeter` and `CommonEventMeter`: -1 until the first event; the lag is the last
    /// included event's and does not move with the clock; a filtered event moves the time since
    /// the last event only.
    #[test]
    fn the_streaming_metrics_are_set_by_events() {
        let mut meter = StreamingMeter::default();
        assert_eq!((meter.milliseconds_behind_source(), meter.milliseconds_since_last_event(5_000)), (-1, -1));
        meter.on_event(1_020, 1_000);
        assert_eq!((meter.milliseconds_behind_source(), meter.milliseconds_since_last_event(1_020)), (20, 0));
        assert_eq!((meter.milliseconds_behind_source(), meter.milliseconds_since_last_event(61_020)), (20, 60_000));
        meter.on_filtered_event(70_000);
        assert_eq!((meter.milliseconds_behind_source(), meter.milliseconds_since_last_event(70_500)), (20, 500));
        assert_eq!(meter.events_seen, 2);
        // A meter is never part of a state's identity: the exhaustive lens ignores it.
        let mut other = task();
        other.meter.0.on_event(5, 1);
        assert_eq!(other, task());
    }

    fn row(version: u32) -> Row {
        Row::new(version, Status::Submitted, 1)
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

    fn with_version(version: (u32, u32)) -> DebeziumTask {
        let mut task = task();
        let mut config = (*task.config).clone();
        config.version = version;
        task.config = Fixed::new(config);
        task
    }

    /// The replication requests the task sent.
    fn repl_requests(out: &Outbox) -> Vec<ReplRequest> {
        out.sends
            .iter()
            .filter_map(|(_, msg)| match msg {
                Msg::Repl { request, .. } => Some(request.clone()),
                _ => None,
            })
            .collect()
    }

    /// A restart from `stored`: the stream starts, `txns` arrive on it (the search phase), and,
    /// once the locator has found the resume point and the task reconnected, arrive again on the
    /// new stream (the filtering phase, PostgreSQL re-sending the same transactions). Returns the
    /// keys of the change records and the replication requests sent.
    fn restart(task: &mut DebeziumTask, stored: SourceOffset, txns: &[DecodedTxn]) -> (Vec<i64>, Vec<ReplRequest>) {
        let mut out = Outbox::default();
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        task.offset = stored;
        task.start_streaming(&mut ctx);
        // 2.1 to 2.4 seek the slot first (`startStreaming`); the slot is where the offset is.
        if let Phase::SeekingSlot { target, .. } = task.phase {
            task.on_sql_reply(&mut ctx, SqlReply::Lsn(target));
        }
        task.on_repl_reply(&mut ctx, ReplReply::StreamingStarted);
        for txn in txns {
            task.on_repl_reply(&mut ctx, ReplReply::XLogData(txn.clone()));
        }
        if task.phase == Phase::StartingStream {
            task.on_repl_reply(&mut ctx, ReplReply::StreamingStarted);
            for txn in txns {
                task.on_repl_reply(&mut ctx, ReplReply::XLogData(txn.clone()));
            }
        }
        (task.queue.iter().map(|r| r.key).collect(), repl_requests(&out))
    }

    fn stored(lsn_proc: u64, lsn_commit: u64, message_type: MessageType) -> SourceOffset {
        SourceOffset {
            lsn: Some(Lsn(lsn_proc)),
            lsn_proc: Some(Lsn(lsn_proc)),
            lsn_commit: Some(Lsn(lsn_commit)),
            message_type: Some(message_type),
            ..Default::default()
        }
    }

    /// §5.3: the search reads the replayed transaction on a first stream, then the task
    /// reconnects at the stored `lsn_proc` and filters the replay up to the change after it.
    #[test]
    fn a_restart_searches_then_reconnects_and_filters_the_replay() {
        let mut task = task();
        // Stored: the first change of transaction 11 (its BEGIN shares the LSN), lsn_commit the
        // previous commit.
        let (keys, requests) = restart(&mut task, stored(2000, 1140, MessageType::Update), &[txn(11, 2000, &[2, 3])]);
        assert_eq!(keys, vec![3], "the stored change is skipped, the next one replayed");
        let starts: Vec<Lsn> = requests
            .iter()
            .filter_map(|r| match r {
                ReplRequest::StartReplication { start, .. } => Some(*start),
                _ => None,
            })
            .collect();
        assert_eq!(starts, [Lsn(2000), Lsn(2000)], "the search stream, then the filtering one, both at lsn_proc");
        assert!(requests.contains(&ReplRequest::Close), "the search stream is closed");
        assert_eq!(task.offset.lsn_commit, Some(Lsn(2240)));
        let mut out = Outbox::default();
        task.process_transaction(txn(12, 3000, &[4]));
        task.on_repl_reply(
            &mut Ctx::new(SimTime(0), Node::Connect, &mut out),
            ReplReply::XLogData(txn(12, 3000, &[4])),
        );
        assert_eq!(task.queue.len(), 3, "later transactions are not filtered");
    }

    /// An offset stored before any COMMIT was processed has no `lsn_commit`. Since 1.9.4 it loads
    /// with `lsn_commit = lsn_proc` (DBZ-3942); from 1.3 to 1.9.3 the loader read the `lsn_proc`
    /// key for the commit LSN anyway. Either way the search skips the stored change and replays
    /// the rest of its transaction, on every release with the search.
    #[test]
    fn an_offset_without_lsn_commit_resumes_after_its_change() {
        for version in [(3, 7), (1, 9), (1, 8), (1, 3)] {
            let mut task = with_version(version);
            let offset = SourceOffset { lsn_commit: None, ..stored(2000, 0, MessageType::Insert) };
            let (keys, _) = restart(&mut task, offset, &[txn(11, 2000, &[2, 3])]);
            assert_eq!(keys, vec![3], "{version:?}");
        }
    }

    /// The search phase dispatches nothing and the slot is not confirmed during it since 2.0
    /// (`lsnFlushingAllowed`, DBZ-5031); before 2.0 it is.
    #[test]
    fn the_search_phase_confirms_nothing_since_2_0() {
        for (version, confirms) in [((2, 0), false), ((1, 9), true)] {
            let mut task = with_version(version);
            let mut out = Outbox::default();
            let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
            task.offset = stored(2000, 1140, MessageType::Update);
            task.start_streaming(&mut ctx);
            task.on_repl_reply(&mut ctx, ReplReply::StreamingStarted);
            assert!(task.is_searching());
            assert_eq!(
                task.commit_moves(Some(stored(2240, 2240, MessageType::Commit))).is_some(),
                confirms,
                "{version:?}"
            );
        }
    }

    /// DBZ-5739: the seek before the stream. 2.1 asks PostgreSQL to move the slot to the stored
    /// `lsn_commit` and fails on its refusal (the slot is ahead); 2.2 only logs the refusal and
    /// streams (DBZ-6191); 2.0 does not seek; 3.6 with `trust_offset` seeks only a slot behind.
    #[test]
    fn the_slot_seek_before_the_stream_by_release() {
        let ahead = SlotRow {
            slot_name: "debezium".into(),
            plugin: "pgoutput".into(),
            active: false,
            restart_lsn: Some(Lsn(1000)),
            confirmed_flush_lsn: Some(Lsn(3000)),
            wal_status: Some("reserved".into()),
        };
        let behind = SlotRow { confirmed_flush_lsn: Some(Lsn(1500)), ..ahead.clone() };
        let refusal = SqlReply::Error("ERROR: cannot advance replication slot to 0/8C0, minimum is 0/BB8".into());
        let start = |version: (u32, u32), strategy: OffsetMismatchStrategy, slot: &SlotRow| {
            let mut task = with_version(version);
            let mut config = (*task.config).clone();
            config.offset_mismatch_strategy = strategy;
            task.config = Fixed::new(config);
            task.starting_slot = Some(CopyOnWrite::new(slot.clone()));
            task.offset = stored(2000, 1140, MessageType::Update);
            let mut out = Outbox::default();
            task.start_streaming(&mut Ctx::new(SimTime(0), Node::Connect, &mut out));
            let seeks: Vec<Lsn> = out
                .sends
                .iter()
                .filter_map(|(_, msg)| match msg {
                    Msg::Sql { request: SqlRequest::AdvanceSlot { to, .. }, .. } => Some(*to),
                    _ => None,
                })
                .collect();
            (task, seeks)
        };
        let no_validation = OffsetMismatchStrategy::NoValidation;
        let (_, seeks) = start((2, 0), no_validation, &ahead);
        assert!(seeks.is_empty(), "no seek before 2.1");
        let (mut task, seeks) = start((2, 1), no_validation, &ahead);
        assert_eq!(seeks, [Lsn(1140)], "the stored lsn_commit");
        let mut out = Outbox::default();
        let event = task.on_sql_reply(&mut Ctx::new(SimTime(0), Node::Connect, &mut out), refusal.clone());
        assert_eq!(event, TaskEvent::Failed);
        assert!(
            matches!(&task.phase, Phase::Failed { reason } if reason.contains("Cannot seek to the last known offset '0/474'"))
        );
        let (mut task, _) = start((2, 2), no_validation, &ahead);
        let mut out = Outbox::default();
        task.on_sql_reply(&mut Ctx::new(SimTime(0), Node::Connect, &mut out), refusal);
        assert_eq!(task.phase, Phase::StartingStream, "DBZ-6191: logged, the stream starts");
        assert!(out.observations.iter().any(|o| matches!(o, Observation::SlotSought { refused: Some(_), .. })));
        let trust_offset = OffsetMismatchStrategy::TrustOffset;
        assert_eq!(start((3, 5), trust_offset, &ahead).1, [Lsn(1140)]);
        assert!(start((3, 6), trust_offset, &ahead).1.is_empty(), "dbz#1863: a slot ahead is not sought");
        assert_eq!(start((3, 6), trust_offset, &behind).1, [Lsn(1140)], "a slot behind is");
        assert!(start((3, 7), no_validation, &behind).1.is_empty());
    }

    /// DBZ-6204 (row 5): the stored COMMIT ends where the next transaction's BEGIN and first
    /// change start. Since 2.2 the search resumes at that BEGIN; before, the change is lost.
    #[test]
    fn a_change_at_the_stored_commits_end_is_new_since_2_2() {
        for (version, expected) in [((3, 7), vec![3, 4]), ((3, 6), vec![3, 4]), ((2, 2), vec![3, 4]), ((2, 1), vec![4])]
        {
            let mut task = with_version(version);
            let (keys, _) = restart(&mut task, stored(2000, 2000, MessageType::Commit), &[txn(11, 2000, &[3, 4])]);
            assert_eq!(keys, expected, "Debezium {version:?}");
        }
    }

    /// dbz#76 (row 6): the stored COMMIT's end is the LSN of a change of an older, interleaved
    /// transaction emitted after it. Since 3.7 a false match; before, everything up to it lost.
    #[test]
    fn an_interleaved_change_at_the_stored_commits_end_is_new_since_3_7() {
        for (version, expected) in [((3, 7), vec![3, 4]), ((3, 6), vec![])] {
            let mut task = with_version(version);
            let (keys, _) = restart(&mut task, stored(2000, 2000, MessageType::Commit), &[txn(11, 1900, &[3, 4])]);
            assert_eq!(keys, expected, "Debezium {version:?}");
        }
    }

    /// A stored DML (lsn_proc past lsn_commit) is skipped up to and including itself.
    #[test]
    fn a_stored_change_is_a_replay() {
        let mut task = task();
        let (keys, _) = restart(&mut task, stored(2240, 1140, MessageType::Update), &[txn(12, 2140, &[4, 5, 6])]);
        assert_eq!(keys, vec![6]);
    }

    /// dbz#1554 (row 7): the count of events processed at a shared LSN, stored since 3.7.
    #[test]
    fn events_at_one_lsn_are_counted_in_the_offset_since_3_7() {
        let copy = |first| {
            let mut txn = txn(11, first, &[1, 2, 3]);
            for change in &mut txn.changes {
                change.lsn = Lsn(first);
            }
            txn
        };
        let mut task = task();
        task.phase = Phase::Streaming;
        task.process_transaction(copy(2000));
        let counts: Vec<u32> = task.queue.iter().map(|r| r.offset.lsn_events_processed).collect();
        assert_eq!(counts, [1, 2, 3]);
        assert_eq!(task.offset.lsn_events_processed, 0, "reset by the COMMIT");
        let mut old = with_version((3, 6));
        old.phase = Phase::Streaming;
        old.process_transaction(copy(2000));
        assert!(old.queue.iter().all(|r| r.offset.lsn_events_processed == 0), "3.6 does not count");
        // Restarting from the second row's offset (after an earlier commit). 3.7 resumes at the
        // shared LSN skipping two events, but the filter counts the BEGIN there as one of them
        // (`skipMessage` runs for BEGIN too): the second row comes again, a duplicate.
        let second = SourceOffset { lsn_commit: Some(Lsn(1140)), ..task.queue[1].offset };
        for (version, expected) in [((3, 7), vec![2, 3]), ((3, 6), vec![])] {
            let mut task = with_version(version);
            let (keys, _) = restart(&mut task, second, &[copy(2000)]);
            assert_eq!(keys, expected, "Debezium {version:?}");
        }
    }

    /// DBZ-5597 (row 3, fixed): the filtering stream delivers an LSN the search never saw (the
    /// slot was confirmed past the resume point meanwhile): the task fails.
    #[test]
    fn an_unseen_lsn_on_the_filtering_stream_fails_the_task_since_2_0() {
        for version in [(2, 0), (1, 9)] {
            let mut task = with_version(version);
            let mut out = Outbox::default();
            let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
            task.offset = stored(2000, 1140, MessageType::Update);
            task.start_streaming(&mut ctx);
            task.on_repl_reply(&mut ctx, ReplReply::StreamingStarted);
            task.on_repl_reply(&mut ctx, ReplReply::XLogData(txn(11, 2000, &[2, 3])));
            task.on_repl_reply(&mut ctx, ReplReply::StreamingStarted);
            // Forwarded past transaction 11: the next one arrives.
            let event = task.on_repl_reply(&mut ctx, ReplReply::XLogData(txn(12, 3000, &[4])));
            if version == (2, 0) {
                assert_eq!(event, TaskEvent::Failed);
                assert!(
                    matches!(&task.phase, Phase::Failed { reason } if reason.contains("not present among LSNs seen"))
                );
            } else {
                assert!(task.queue.is_empty(), "1.9 filters it, and everything after");
                task.on_repl_reply(&mut ctx, ReplReply::XLogData(txn(13, 4000, &[5])));
                assert!(task.queue.is_empty());
            }
        }
    }

    /// dbz#1379 (row 8): the stored event is a non-transactional message; only messages follow.
    #[test]
    fn after_a_stored_message_later_messages_are_processed_since_3_6() {
        for (version, searching) in [((3, 6), false), ((3, 5), true)] {
            let mut task = with_version(version);
            let mut out = Outbox::default();
            let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
            task.offset = stored(2000, 2000, MessageType::Message);
            task.start_streaming(&mut ctx);
            task.on_repl_reply(&mut ctx, ReplReply::StreamingStarted);
            let message = |lsn| {
                ReplReply::Message(crate::core::protocol::DecodedMessage {
                    lsn: Lsn(lsn),
                    transactional: false,
                    prefix: "heartbeat".into(),
                    payload_bytes: 1,
                    content: Default::default(),
                })
            };
            task.on_repl_reply(&mut ctx, message(2100));
            task.on_repl_reply(&mut ctx, ReplReply::StreamingStarted);
            task.on_repl_reply(&mut ctx, message(2100));
            task.on_repl_reply(&mut ctx, message(2200));
            assert_eq!(task.is_searching(), searching, "{version:?}");
            let expected = if searching { Some(Lsn(2000)) } else { Some(Lsn(2200)) };
            assert_eq!(task.offset.lsn_commit, expected, "{version:?}: the messages count as commits once processed");
            // 3.6 publishes both messages on claims.message; 3.5, still searching, none.
            let published: Vec<Lsn> = task
                .drain()
                .iter()
                .filter(|record| record.topic == Topic::Message)
                .map(|record| record.value.expect("a message record").source.lsn)
                .collect();
            let expected: Vec<Lsn> = if searching { vec![] } else { vec![Lsn(2100), Lsn(2200)] };
            assert_eq!(published, expected, "{version:?}");
        }
    }

    fn decoded_message(lsn: u64, prefix: &str, transactional: bool) -> DecodedMessage {
        DecodedMessage {
            lsn: Lsn(lsn),
            transactional,
            prefix: prefix.into(),
            payload_bytes: 8,
            content: Default::default(),
        }
    }

    /// §5.2, §7.2: a logical message becomes an `op=m` record on `<topic.prefix>.message`, keyed
    /// by its prefix, with the offset after it (a non-transactional one is its own commit; a
    /// transactional one carries its transaction's xid, in its place among the changes).
    #[test]
    fn logical_messages_become_message_records() {
        let mut task = task();
        task.phase = Phase::Streaming;
        let mut out = Outbox::default();
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        task.on_repl_reply(&mut ctx, ReplReply::Message(decoded_message(1000, "audit", false)));
        let mut outbox = txn(11, 1100, &[1, 2]);
        outbox.messages = vec![decoded_message(1150, "outbox", true)];
        task.on_repl_reply(&mut ctx, ReplReply::XLogData(outbox));
        let records = task.drain();
        type Seen = (Topic, Op, i64, Lsn, Option<Xid>);
        let seen: Vec<Seen> = records
            .iter()
            .map(|r| {
                let value = r.value.expect("a value");
                (r.topic, value.op, r.key, value.source.lsn, value.source.tx_id)
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                (Topic::Message, Op::Message, message_key("audit"), Lsn(1000), None),
                (Topic::Change(TableId(0)), Op::Update, 1, Lsn(1100), Some(11)),
                (Topic::Message, Op::Message, message_key("outbox"), Lsn(1150), Some(11)),
                (Topic::Change(TableId(0)), Op::Update, 2, Lsn(1200), Some(11)),
            ]
        );
        assert_eq!(records[0].offset.lsn_commit, Some(Lsn(1000)), "a non-transactional message is a commit");
        assert_eq!(records[0].offset.message_type, Some(MessageType::Message));
        assert_eq!(records[2].offset.lsn_commit, Some(Lsn(1000)), "inside a transaction, the previous commit");
        assert_ne!(message_key("audit"), message_key("outbox"));
    }

    /// A message carrying an outbox event (the table-free outbox) is the same `op=m` record; the
    /// model keeps the event in it as an outbox row's change keeps its row: the event's number as
    /// the record's key, the event as `after`, its message outbox as `source.table`, and a
    /// placement by the prefix, where Kafka puts a record keyed `{prefix}`.
    #[test]
    fn a_message_carrying_an_outbox_event_keeps_the_event_in_its_record() {
        let mut task = task();
        task.phase = Phase::Streaming;
        let mut out = Outbox::default();
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        let event = crate::core::ids::MessageEvent {
            outbox: 1,
            id: 42,
            aggregate_id: 7,
            event_type: crate::core::ids::Status::Paid,
        };
        let message = DecodedMessage {
            content: crate::core::ids::MessageContent::Event(event),
            ..decoded_message(1000, "outbox", false)
        };
        task.on_repl_reply(&mut ctx, ReplReply::Message(message));
        let [record] = task.drain().try_into().expect("one record");
        let value = record.value.expect("a value");
        assert_eq!((record.topic, value.op, record.key), (Topic::Message, Op::Message, 42));
        assert_eq!(value.after, Some(event.row()));
        assert_eq!(value.source.table, TableId::message_outbox(1));
        assert_eq!(record.placement, Some(key_placement(message_key("outbox"))));
        assert_eq!(record.offset.lsn_commit, Some(Lsn(1000)), "a non-transactional message is a commit");
    }

    /// `message.prefix.exclude.list` (`LogicalDecodingMessageFilter`): an excluded message makes no
    /// record, but Debezium processed it: the offset moves to it all the same.
    #[test]
    fn an_excluded_message_moves_the_offset_without_a_record() {
        for (filter, published) in [
            (MessagePrefixFilter::Exclude(vec!["heartbeat".into()]), 0),
            (MessagePrefixFilter::Include(vec!["heartbeat".into()]), 1),
            (MessagePrefixFilter::Include(vec!["outbox".into()]), 0),
            (MessagePrefixFilter::All, 1),
        ] {
            let mut task = task();
            let mut config = (*task.config).clone();
            config.message_prefixes = filter.clone();
            task.config = Fixed::new(config);
            task.phase = Phase::Streaming;
            let mut out = Outbox::default();
            let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
            task.on_repl_reply(&mut ctx, ReplReply::Message(decoded_message(1000, "heartbeat", false)));
            assert_eq!(task.offset.lsn_commit, Some(Lsn(1000)), "{filter:?}");
            assert_eq!(task.drain().len(), published, "{filter:?}");
        }
    }

    /// A message heartbeat: `heartbeat.action.query` = `SELECT pg_logical_emit_message(false,
    /// 'heartbeat', now()::varchar)` writes a message on the heartbeat's own session.
    #[test]
    fn a_message_heartbeat_emits_its_message() {
        let mut task = task();
        let mut config = (*task.config).clone();
        config.heartbeat_interval_ms = 10_000;
        config.heartbeat_action_message =
            Some(HeartbeatMessage { transactional: false, prefix: "heartbeat".into(), payload_bytes: 29 });
        task.config = Fixed::new(config);
        task.phase = Phase::Streaming;
        let mut out = Outbox::default();
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        assert!(task.on_heartbeat(&mut ctx));
        assert!(task.on_heartbeat(&mut ctx));
        let emitted: Vec<(SessionId, SqlRequest)> = out
            .sends
            .iter()
            .filter_map(|(_, msg)| match msg {
                Msg::Sql { session, request } => Some((*session, request.clone())),
                _ => None,
            })
            .collect();
        let request = SqlRequest::EmitMessage { transactional: false, prefix: "heartbeat".into(), payload_bytes: 29 };
        assert_eq!(emitted.len(), 2);
        assert!(emitted.iter().all(|(session, sent)| *sent == request && *session == emitted[0].0), "{emitted:?}");
    }

    const SIGNALS: TableId = TableId(1);

    /// A task capturing the claims table and a signal table, streaming, with one scripted
    /// `execute-snapshot` of the claims table and chunks of 2 rows.
    fn signalling_task(watermarking: WatermarkingStrategy) -> DebeziumTask {
        use crate::core::signal::{Signal, SignalAction, SnapshotType};
        let mut config = (*task().config).clone();
        config.tables = vec![TableId(0), SIGNALS];
        config.signalling = Some(Signalling {
            table: SIGNALS,
            chunk_size: 2,
            watermarking,
            read_only: false,
            signals: vec![Signal {
                id: "ad-hoc-1".into(),
                data: "{}".into(),
                action: SignalAction::ExecuteSnapshot {
                    kind: SnapshotType::Incremental,
                    collections: vec![TableId(0)],
                    conditions: Vec::new(),
                    surrogate_key: None,
                },
            }],
            source_channel: true,
            kafka: None,
        });
        let mut task = DebeziumTask::new(Fixed::new(config), 1).with_chunk_origin(0, 1);
        task.phase = Phase::Streaming;
        task.jdbc = Some(1);
        task.replication = Some(2);
        task
    }

    /// One committed transaction of inserts into the signal table (or, `delete`, a delete).
    fn signal_txn(xid: u32, first: u64, key: i64, delete: bool) -> DecodedTxn {
        let mut txn = txn(xid, first, &[key]);
        txn.changes[0].table = SIGNALS;
        txn.changes[0].kind = if delete {
            ChangeKind::Delete { before: None }
        } else {
            ChangeKind::Insert { after: Row::new(1, Status::Submitted, 0) }
        };
        txn
    }

    /// The SQL the task sent, in order.
    fn sql_sent(out: &Outbox) -> Vec<SqlRequest> {
        out.sends
            .iter()
            .filter_map(|(_, msg)| match msg {
                Msg::Sql { request, .. } => Some(request.clone()),
                _ => None,
            })
            .collect()
    }

    fn committed() -> SqlReply {
        SqlReply::Committed { xid: 1, commit_lsn: Lsn(1), end_lsn: Lsn(2), changes: Vec::new() }
    }

    /// Signal row 1 on the stream, and the replies to its first `readChunk` on claims (keys 1
    /// to 3, chunks of 2): the open watermark, the maximum key 3, rows 1 and 2, the close.
    fn read_first_chunk(task: &mut DebeziumTask, ctx: &mut Ctx) {
        task.on_repl_reply(ctx, ReplReply::XLogData(signal_txn(10, 1000, 1, false)));
        task.on_sql_reply(ctx, committed());
        task.on_sql_reply(ctx, SqlReply::Rows { table: TableId(0), rows: vec![(3, row(1))], done: true });
        task.on_sql_reply(ctx, SqlReply::Rows { table: TableId(0), rows: vec![(1, row(1)), (2, row(1))], done: true });
        task.on_sql_reply(ctx, committed());
    }

    /// §6.3: a stop naming a queued table (and a name no table has) waits for the next
    /// `readChunk`, which removes that table and reads on in the current one.
    #[test]
    fn a_stop_of_a_queued_table_is_processed_by_the_next_read_chunk_and_the_current_goes_on() {
        use crate::core::signal::{ChunkId, Signal, SignalAction, SnapshotType, Watermark, watermark_key};
        const OTHER: TableId = TableId(2);
        let mut task = signalling_task(WatermarkingStrategy::InsertInsert);
        let mut config = (*task.config).clone();
        config.tables.push(OTHER);
        let signalling = config.signalling.as_mut().expect("signalling");
        signalling.signals[0].action = SignalAction::ExecuteSnapshot {
            kind: SnapshotType::Incremental,
            collections: vec![TableId(0), OTHER],
            conditions: Vec::new(),
            surrogate_key: None,
        };
        signalling.signals.push(Signal {
            id: "stop-1".into(),
            data: String::new(),
            action: SignalAction::StopSnapshot {
                kind: SnapshotType::Incremental,
                tables: Some(vec![OTHER]),
                unmatched: vec!["public.nothing".into()],
            },
        });
        task.config = Fixed::new(config);
        let mut out = Outbox::default();
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        read_first_chunk(&mut task, &mut ctx);
        let chunk = ChunkId::new(0, 1, 1);
        // The stop row inside the window: a request only.
        task.on_repl_reply(
            &mut ctx,
            ReplReply::XLogData(signal_txn(11, 1100, watermark_key(chunk, Watermark::Open), false)),
        );
        task.on_repl_reply(&mut ctx, ReplReply::XLogData(signal_txn(12, 1200, 2, false)));
        assert!(
            !out.observations.iter().any(|o| matches!(o, Observation::IncrementalSnapshotStopped { .. })),
            "nothing stops before the next readChunk"
        );
        assert_eq!(task.offset.incremental.map(|i| i.collections().to_vec()), Some(vec![TableId(0), OTHER]));
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        // The close emits the window and runs readChunk, which processes the stop first.
        task.on_repl_reply(
            &mut ctx,
            ReplReply::XLogData(signal_txn(13, 1300, watermark_key(chunk, Watermark::Close), false)),
        );
        assert!(task.in_read_chunk(), "the current table goes on: chunk 2's open watermark");
        assert_eq!(task.offset.incremental.map(|i| i.collections().to_vec()), Some(vec![TableId(0)]));
        assert!(out.observations.iter().any(|o| matches!(
            o,
            Observation::IncrementalSnapshotStopped { running: true, stopped, current: false, not_queued, unmatched, left }
                if stopped == &[OTHER] && not_queued.is_empty() && unmatched == &["public.nothing".to_string()]
                    && left == &[TableId(0)]
        )));
        let reads = task.queue.iter().filter(|r| r.value.is_some_and(|v| v.op == Op::Read)).count();
        assert_eq!(reads, 2, "the window the stop arrived in is emitted");
    }

    /// §6.1–§6.2: the signal row sends the streaming thread into `readChunk` before the row's own
    /// record; the stream waits; the chunk's rows are buffered, the window's events drop theirs,
    /// and the close watermark emits the rest as `op=r` records and reads the next chunk.
    #[test]
    fn a_signal_runs_read_chunk_before_its_own_record_and_the_window_drops_changed_rows() {
        use crate::core::signal::{ChunkId, Watermark, watermark_key};
        let mut task = signalling_task(WatermarkingStrategy::InsertInsert);
        let mut out = Outbox::default();
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        task.on_repl_reply(&mut ctx, ReplReply::XLogData(signal_txn(10, 1000, 1, false)));
        assert!(task.in_read_chunk() && task.queue.is_empty(), "the signal's record waits for readChunk");
        let chunk = ChunkId::new(0, 1, 1);
        let open = watermark_key(chunk, Watermark::Open);
        // A change arriving meanwhile waits too.
        task.on_repl_reply(&mut ctx, ReplReply::XLogData(txn(11, 1100, &[5])));
        assert!(task.queue.is_empty());
        task.on_sql_reply(&mut ctx, committed());
        task.on_sql_reply(&mut ctx, SqlReply::Rows { table: TableId(0), rows: vec![(3, row(1))], done: true });
        task.on_sql_reply(
            &mut ctx,
            SqlReply::Rows { table: TableId(0), rows: vec![(1, row(1)), (2, row(1))], done: true },
        );
        task.on_sql_reply(&mut ctx, committed());
        let sent = sql_sent(&out);
        let insert = |key| SqlRequest::Transaction {
            ops: vec![RowOp::Insert { table: SIGNALS, key, status: Status::Submitted, amount_cents: 0 }],
        };
        assert_eq!(
            sent,
            vec![
                insert(open),
                SqlRequest::SelectRange {
                    table: TableId(0),
                    after: None,
                    upto: None,
                    limit: 1,
                    descending: true,
                    filter: None,
                    order_by: Default::default(),
                    per_column: false,
                    nulls: Default::default()
                },
                SqlRequest::SelectRange {
                    table: TableId(0),
                    after: None,
                    upto: None,
                    limit: 2,
                    descending: false,
                    filter: None,
                    order_by: Default::default(),
                    per_column: false,
                    nulls: Default::default()
                },
                insert(watermark_key(chunk, Watermark::Close)),
            ]
        );
        assert!(!task.in_read_chunk());
        let keys: Vec<(Topic, i64)> = task.queue.iter().map(|r| (r.topic, r.key)).collect();
        assert_eq!(keys, [(Topic::Change(SIGNALS), 1), (Topic::Change(TableId(0)), 5)], "then the held change");
        let stored = task.queue[0].offset.incremental.expect("the context in the offset");
        assert_eq!(
            (stored.collections(), stored.maximum_key(), stored.primary_key()),
            (&[TableId(0)][..], Some(3), None)
        );
        // The stream: the open watermark, an update of claim 2 inside the window, the close.
        let mut out = Outbox::default();
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        task.on_repl_reply(&mut ctx, ReplReply::XLogData(signal_txn(12, 1200, open, false)));
        task.on_repl_reply(&mut ctx, ReplReply::XLogData(txn(13, 1300, &[2])));
        let close = watermark_key(chunk, Watermark::Close);
        task.on_repl_reply(&mut ctx, ReplReply::XLogData(signal_txn(14, 1400, close, false)));
        let reads: Vec<(i64, SnapshotMarker)> = task
            .queue
            .iter()
            .filter_map(|r| r.value.filter(|v| v.op == Op::Read).map(|v| (r.key, v.source.snapshot)))
            .collect();
        assert_eq!(reads, [(1, SnapshotMarker::Incremental)], "claim 2 changed inside the window: dropped");
        let read = task.queue.iter().find(|r| r.value.is_some_and(|v| v.op == Op::Read)).expect("a read");
        assert_eq!(read.offset.incremental.and_then(|i| i.primary_key()), Some(1));
        assert!(task.in_read_chunk(), "the close runs readChunk for the next chunk; its own record waits");
        assert!(
            out.observations.iter().any(|o| matches!(o, Observation::WindowClosed { emitted: 1, deduplicated: 1, .. }))
        );
    }

    /// `insert_delete`: the open row's DELETE closes the window; a watermark of another chunk id
    /// is ignored.
    #[test]
    fn insert_delete_closes_on_the_open_rows_delete_and_other_chunks_are_ignored() {
        use crate::core::signal::{ChunkId, Watermark, watermark_key};
        let mut task = signalling_task(WatermarkingStrategy::InsertDelete);
        let mut out = Outbox::default();
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        read_first_chunk(&mut task, &mut ctx);
        let open = watermark_key(ChunkId::new(0, 1, 1), Watermark::Open);
        assert_eq!(
            sql_sent(&out).last(),
            Some(&SqlRequest::Transaction { ops: vec![RowOp::Delete { table: SIGNALS, key: open }] })
        );
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        let stale = watermark_key(ChunkId::new(0, 0, 7), Watermark::Open);
        task.on_repl_reply(&mut ctx, ReplReply::XLogData(signal_txn(11, 1100, stale, false)));
        task.on_repl_reply(&mut ctx, ReplReply::XLogData(signal_txn(12, 1200, open, false)));
        task.on_repl_reply(&mut ctx, ReplReply::XLogData(signal_txn(13, 1300, open, true)));
        let reads = task.queue.iter().filter(|r| r.value.is_some_and(|v| v.op == Op::Read)).count();
        assert_eq!(reads, 2);
        assert!(out.observations.iter().any(|o| matches!(o, Observation::WatermarkIgnored { .. })));
    }

    /// §6.3: a start from an offset with a running snapshot reads a chunk after the stored key,
    /// with a fresh chunk id, before its stream starts.
    #[test]
    fn a_start_with_a_running_snapshot_reads_after_the_stored_key_before_streaming() {
        let mut task = signalling_task(WatermarkingStrategy::InsertInsert).with_chunk_origin(0, 2);
        task.phase = Phase::EnsuringPublication;
        task.offset = SourceOffset {
            incremental: Some(crate::core::event::IncrementalOffset::new(&[TableId(0)], Some(2), Some(3))),
            ..stored(2000, 1140, MessageType::Commit)
        };
        let mut out = Outbox::default();
        let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
        task.start_streaming(&mut ctx);
        assert!(task.in_read_chunk() && task.phase == Phase::EnsuringPublication, "no stream yet");
        task.on_sql_reply(&mut ctx, committed());
        task.on_sql_reply(&mut ctx, SqlReply::Rows { table: TableId(0), rows: vec![(3, row(1))], done: true });
        task.on_sql_reply(&mut ctx, committed());
        let sent = sql_sent(&out);
        assert_eq!(
            sent[1],
            SqlRequest::SelectRange {
                table: TableId(0),
                after: Some(2),
                upto: Some(3),
                limit: 2,
                descending: false,
                filter: None,
                order_by: Default::default(),
                per_column: false,
                nulls: Default::default()
            },
            "no maximum-key query: the stored one"
        );
        assert!(
            repl_requests(&out).iter().any(|r| matches!(r, ReplRequest::StartReplication { .. })),
            "the stream starts when the read returns"
        );
    }

    /// DBZ-1766 (row 1): before 1.1, `commit()` confirms the last record `poll()` returned.
    #[test]
    fn before_1_1_the_last_polled_record_is_confirmed() {
        for (version, confirmed) in [((1, 0), true), ((1, 1), false)] {
            let mut task = with_version(version);
            task.phase = Phase::Streaming;
            task.process_transaction(txn(10, 1000, &[1]));
            let polled = task.drain();
            assert_eq!(task.last_acked().is_some(), confirmed, "{version:?}");
            task.commit_record(polled[0].offset);
            assert!(task.last_acked().is_some());
        }
    }

    /// DBZ-1766 (row 1): the confirmation says where it came from, so that a timeline does not
    /// blame a 1.0 confirmation of unproduced records on DBZ-7816's acknowledged offsets.
    #[test]
    fn a_confirmation_before_1_1_is_reported_as_the_last_polled_record() {
        for (version, last_polled) in [((1, 0), true), ((1, 1), false)] {
            let mut task = with_version(version);
            task.phase = Phase::Streaming;
            task.process_transaction(txn(10, 1000, &[1]));
            let polled = task.drain();
            task.commit_record(polled[0].offset);
            let mut out = Outbox::default();
            let mut ctx = Ctx::new(SimTime(0), Node::Connect, &mut out);
            let confirm = task.last_acked();
            task.commit_offset(&mut ctx, confirm);
            let observed: Vec<&Observation> = out.observations.iter().collect();
            if last_polled {
                assert!(
                    matches!(observed[..], [Observation::LsnFlushedLastPolled { lsn: Lsn(1000) }]),
                    "{version:?}: {observed:?}"
                );
            } else {
                assert!(
                    matches!(observed[..], [Observation::LsnFlushed { lsn: Lsn(1000), from_offset_store: false }]),
                    "{version:?}: {observed:?}"
                );
            }
        }
    }

    /// Before 1.3 (no locator): the stream starts at the stored `lsn` and skips every message at
    /// or below it; no COMMIT position is kept, so `lsn_proc` is what is confirmed.
    #[test]
    fn before_1_3_the_stream_skips_everything_up_to_the_stored_lsn() {
        let mut task = with_version((1, 2));
        task.phase = Phase::Streaming;
        task.process_transaction(txn(10, 1000, &[1, 2]));
        assert_eq!(task.offset.lsn_commit, None);
        assert_eq!(task.offset.lsn_to_confirm(), Some(Lsn(1100)));
        let mut task = with_version((1, 2));
        let (keys, requests) =
            restart(&mut task, stored(2000, 1140, MessageType::Update), &[txn(11, 1900, &[3, 4, 5])]);
        assert_eq!(keys, vec![5], "the changes at 1900 and 2000 are skipped");
        assert_eq!(requests.len(), 1, "no search, no reconnect");
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

    /// DBZ-7533 / pgjdbc#3138 (row 10): a 42.7.0–42.7.5 driver confirms keep-alives by default;
    /// Debezium switches that off only from 3.2, except with `connector_and_driver`.
    #[test]
    fn a_42_7_driver_confirms_keepalives_under_debezium_before_3_2() {
        let config = |version, pgjdbc, lsn_flush_mode| DebeziumConfig {
            version,
            pgjdbc,
            lsn_flush_mode,
            ..(*task().config).clone()
        };
        use LsnFlushMode::{Connector, ConnectorAndDriver};
        assert!(config((3, 1), Some((42, 7, 3)), Connector).driver_confirms_keepalives());
        assert!(!config((3, 2), Some((42, 7, 3)), Connector).driver_confirms_keepalives(), "switched off");
        assert!(!config((3, 1), None, Connector).driver_confirms_keepalives(), "3.1 ships 42.6.1");
        assert!(!config((2, 6), Some((42, 6, 0)), Connector).driver_confirms_keepalives(), "no auto-flush before 42.7");
        assert!(config((3, 7), None, ConnectorAndDriver).driver_confirms_keepalives());
        assert!(!config((3, 7), Some((42, 6, 1)), ConnectorAndDriver).driver_confirms_keepalives());
        // The rule itself, on a 3.1 task with a 42.7.3 driver.
        let mut old = DebeziumTask::new(Fixed::new(config((3, 1), Some((42, 7, 3)), Connector)), 1);
        old.phase = Phase::Streaming;
        let mut out = Outbox::default();
        old.on_repl_reply(
            &mut Ctx::new(SimTime(0), Node::Connect, &mut out),
            ReplReply::Keepalive { wal_end: Lsn(5000) },
        );
        assert!(
            matches!(
                out.sends.as_slice(),
                [(_, Msg::Repl { request: ReplRequest::StatusUpdate { flush: Lsn(5000) }, .. })]
            ),
            "nothing received yet: the keep-alive is confirmed"
        );
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

    /// pgjdbc's keep-alive guard belongs to one stream: every `START_REPLICATION` builds a new
    /// `V3PGReplicationStream` whose positions start at `INVALID_LSN`, so before its first
    /// XLogData a keep-alive is confirmed even though the previous stream (a restart's search
    /// stream) received data nobody confirmed.
    #[test]
    fn a_new_stream_confirms_a_keepalive_before_its_first_data() {
        let mut config = (*task().config).clone();
        config.version = (3, 1);
        config.pgjdbc = Some((42, 7, 3));
        let mut driver = DebeziumTask::new(Fixed::new(config), 1);
        driver.phase = Phase::Streaming;
        let flushes = |task: &mut DebeziumTask, reply: ReplReply| {
            let mut out = Outbox::default();
            task.on_repl_reply(&mut Ctx::new(SimTime(0), Node::Connect, &mut out), reply);
            out.sends
                .iter()
                .filter_map(|(_, msg)| match msg {
                    Msg::Repl { request: ReplRequest::StatusUpdate { flush }, .. } => Some(flush.0),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
        flushes(&mut driver, ReplReply::XLogData(txn(10, 1000, &[1])));
        assert!(flushes(&mut driver, ReplReply::Keepalive { wal_end: Lsn(5000) }).is_empty(), "data unconfirmed");
        let mut out = Outbox::default();
        driver.request_stream(&mut Ctx::new(SimTime(0), Node::Connect, &mut out), Lsn(1000));
        driver.phase = Phase::Streaming;
        assert_eq!(
            flushes(&mut driver, ReplReply::Keepalive { wal_end: Lsn(5000) }),
            [5000],
            "a new stream: nothing received on it yet"
        );
    }
}
