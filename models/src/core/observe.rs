//! Observations: what the models report as they act, for the checkers and the narrator.
//!
//! An observation is a fact about one step of one component, stated in the domain's terms. The
//! lens stamps it with the simulated time and the node ([`TraceEvent`]); the sequence of them is
//! the run's trace. Checkers read the trace against the oracle (the committed history), never
//! against a component's private state.

use crate::core::event::{KafkaRecord, SourceOffset, SourceRecord, TopicPartition};
use crate::core::fault::{FaultAction, Moment};
use crate::core::ids::Role;
use crate::core::ids::{Csn, Key, Node, Row, TableId};
use crate::core::lsn::Lsn;
use crate::core::protocol::ConnectorState;
use crate::core::protocol::SlotRow;
use crate::core::shared::ByContent;
use crate::core::signal::{ChunkId, ScanStatus, Watermark};
use crate::core::time::SimTime;
use crate::core::wal::CommittedTxn;
use serde::{Deserialize, Serialize};

/// How a snapshot `SELECT` saw the table.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScanSnapshot {
    /// An imported exported snapshot, REPEATABLE READ (`SET TRANSACTION SNAPSHOT`).
    Exported { name: String },
    /// The statement's own snapshot, READ COMMITTED.
    Statement,
}

/// Debezium's two initial-snapshot cases (`PostgresSnapshotChangeEventSource.connectionCreated`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SnapshotCase {
    /// A: the slot was created by this task start; the snapshot reads the exported snapshot at
    /// the consistent point.
    SlotCreatedNow,
    /// B: the slot already existed; READ COMMITTED reads and streaming from
    /// `pg_current_wal_lsn()` read at snapshot start.
    SlotExisted,
}

/// What a sink did with one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SinkAction {
    /// The document for the key now holds `row`.
    Upserted,
    /// The document was deleted (a versioned tombstone is kept where the rule keeps one).
    Deleted,
    /// The version guard refused the record as older than what the index holds.
    RejectedStale,
    /// Nothing to do (a Kafka tombstone, a delete of a missing document).
    Ignored,
}

/// What the sink did with one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Apply {
    pub record: KafkaRecord,
    pub action: SinkAction,
    pub before: Option<Doc>,
    pub after: Option<Doc>,
}

/// A record is named by its partition and offset: its content went into the trace hash when it
/// was appended (a partition's log never changes), so hashing it again per apply adds nothing.
impl std::hash::Hash for Apply {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.record.tp.hash(state);
        self.record.offset.hash(state);
        self.action.hash(state);
        self.before.hash(state);
        self.after.hash(state);
    }
}

/// What one `poll()` returned, in brief.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PollSummary {
    pub records: usize,
    pub snapshot_rows: usize,
    pub tombstones: usize,
    /// The first few streamed changes: `op` code, the table of a change topic's record, and key.
    pub first_changes: Vec<(char, Option<crate::core::ids::TableId>, Key)>,
    pub changes: usize,
    pub last_snapshot_record: bool,
}

impl PollSummary {
    pub fn of(records: &[SourceRecord]) -> PollSummary {
        let mut summary = PollSummary { records: records.len(), ..PollSummary::default() };
        for record in records {
            match record.value {
                // A heartbeat record has no value either, and is no tombstone: the narrator
                // counts it as what is left of `records`.
                None if record.topic == crate::core::event::Topic::Heartbeat => {}
                None => summary.tombstones += 1,
                Some(value) if value.source.snapshot.is_snapshot() => {
                    summary.snapshot_rows += 1;
                    summary.last_snapshot_record |= value.source.snapshot.is_last();
                }
                Some(value) => {
                    summary.changes += 1;
                    if summary.first_changes.len() < 4 {
                        let table = match record.topic {
                            crate::core::event::Topic::Change(table) => Some(table),
                            _ => None,
                        };
                        summary.first_changes.push((value.op.code(), table, record.key));
                    }
                }
            }
        }
        summary
    }
}

/// A sink document: a live row, or a tombstone remembering a deleted version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Doc {
    Live(Row),
    /// Deleted; the version of the delete when known.
    Tombstone(Option<u32>),
}

/// Outcome of the failover gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GateVerdict {
    /// The saved offset is available on the new source's slot: resume.
    Available,
    /// Unavailable: rebuild from a new snapshot.
    Rebuild,
    /// Unavailable: stay stopped and say so.
    FailClosed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Observation {
    // ----- PostgreSQL -----
    /// A transaction committed (the oracle's input).
    Committed {
        server: Node,
        txn: ByContent<CommittedTxn>,
    },
    SlotCreated {
        server: Node,
        slot: String,
        restart_lsn: Lsn,
        consistent_point: Lsn,
        snapshot_name: String,
    },
    SlotDropped {
        server: Node,
        slot: String,
    },
    /// A snapshot `SELECT` began; `snapshot_csn` is what it sees, `wal_lsn` the write position then.
    ScanStarted {
        server: Node,
        client: Node,
        table: TableId,
        snapshot: ScanSnapshot,
        snapshot_csn: Csn,
        wal_lsn: Lsn,
        rows: usize,
    },
    /// `START_REPLICATION` accepted: decoding emits commits at or after `start`.
    StreamStarted {
        server: Node,
        client: Node,
        slot: String,
        requested: Lsn,
        confirmed_flush: Lsn,
        start: Lsn,
        restart_lsn: Lsn,
    },
    /// `confirmed_flush` moved by a client's confirmation.
    SlotConfirmed {
        server: Node,
        slot: String,
        from: Lsn,
        to: Lsn,
        by: Node,
    },
    /// The slot file was written with these positions (a restart candidate was installed).
    SlotSaved {
        server: Node,
        slot: String,
        restart_lsn: Lsn,
        confirmed_flush: Lsn,
    },
    Checkpoint {
        server: Node,
        lsn: Lsn,
    },
    /// A checkpoint invalidated a slot whose `restart_lsn` fell behind the oldest segment it
    /// keeps (`max_slot_wal_keep_size`), terminating its walsender first if it was active.
    SlotInvalidated {
        server: Node,
        slot: String,
        restart_lsn: Lsn,
        oldest_kept: Lsn,
        walsender_terminated: bool,
    },
    /// PostgreSQL 17+: the standby's slotsync worker created or moved its copy of a failover slot.
    SlotSynced {
        server: Node,
        slot: String,
        restart_lsn: Lsn,
        confirmed_flush: Lsn,
    },
    /// Debezium's slot reader found the slot's `restart_lsn` NULL and waits 2 s to read it again
    /// (attempt `attempt` of 900), while the task reports RUNNING.
    SlotInfoRetry {
        attempt: u32,
    },
    /// The JDBC driver confirmed a keep-alive's LSN to the slot (`lsn.flush.mode=connector_and_driver`,
    /// or a 42.7.0-42.7.5 driver under Debezium before 3.2).
    KeepaliveConfirmed {
        lsn: Lsn,
    },
    /// Debezium's heartbeat: a record with the current offset (its position `lsn`, if any) and,
    /// with `heartbeat.action.query`, the query.
    Heartbeat {
        lsn: Option<Lsn>,
        action_query: bool,
    },
    /// WAL written in a database nobody captures.
    WalWritten {
        server: Node,
        bytes: u64,
        end: Lsn,
    },
    /// The server (re)started; `slots` gives each slot's `confirmed_flush` as loaded.
    ServerStarted {
        server: Node,
        role: Role,
        slots: Vec<(String, Lsn)>,
    },
    /// A standby was promoted: its history ends at `switch_lsn` (commit `csn`) and continues on
    /// `timeline`. `slots` are the logical slots it has.
    Promoted {
        server: Node,
        timeline: u32,
        switch_lsn: Lsn,
        csn: Csn,
        slots: Vec<String>,
    },

    // ----- Kafka Connect and Debezium -----
    /// The worker started; the connector's target state as it read it back from the config
    /// topic (RUNNING or STOPPED).
    WorkerStarted {
        target_state: ConnectorState,
    },
    /// The source task started and loaded its stored offset.
    TaskStarted {
        offset: Option<SourceOffset>,
    },
    /// The start-up log-position check (`PostgresConnection.validateLogPosition`) and its verdict.
    LogPositionChecked {
        available: bool,
        detail: String,
    },
    /// The slot row the task read at start (`None`: no such slot).
    SlotRead {
        row: Option<SlotRow>,
    },
    SnapshotDecided {
        snapshot: bool,
        reason: String,
    },
    SnapshotStarted {
        attempt: u32,
        case: SnapshotCase,
        lsn: Lsn,
    },
    SnapshotCompleted {
        attempt: u32,
        rows: usize,
        lsn: Lsn,
    },
    StreamingRequested {
        start: Lsn,
        skip_processed_upto: Option<Lsn>,
    },
    /// `poll()` returned records to Connect.
    Polled {
        summary: PollSummary,
    },
    /// Kafka acknowledged `count` records, `changes` of them streamed changes;
    /// `completion_marker` if one carried `snapshot_completed=true`.
    ProduceAcked {
        count: usize,
        changes: usize,
        completion_marker: bool,
    },
    /// An offset flush stored this offset in the offsets topic (and `commit()` was called).
    OffsetsCommitted {
        offset: Option<SourceOffset>,
    },
    OffsetFlushFailed {
        reason: String,
    },
    /// Debezium confirmed this LSN to the slot (a standby status update): from the offset
    /// re-read from the offset store (2.7 and later), or from the offsets Kafka acknowledged, in
    /// memory (1.1 to 2.6, DBZ-7816; before 1.1, [`Observation::LsnFlushedLastPolled`]).
    LsnFlushed {
        lsn: Lsn,
        from_offset_store: bool,
    },
    TaskFailed {
        reason: String,
    },
    TaskRestarting {
        reason: String,
        after_ms: u64,
    },
    /// The task ended: stopped gracefully, or not (`graceful: false`: it threw an exception and
    /// is FAILED until restarted). Either way its final offset commit has run.
    TaskStopped {
        graceful: bool,
    },

    // ----- Kafka -----
    /// Records appended to partition logs (durable from now on).
    Appended {
        records: Vec<KafkaRecord>,
        /// The producer id of the transaction they belong to; `None`: not transactional. Records
        /// of a transaction are in the log at once (a `read_uncommitted` reader sees them) and
        /// count for `read_committed` readers once [`Observation::TransactionEnded`] commits them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        transaction: Option<u32>,
    },
    /// A transaction ended: its markers are written on every partition it touched.
    TransactionEnded {
        transactional_id: String,
        producer_id: u32,
        committed: bool,
        /// Why it ended: the producer asked, a new instance of its `transactional.id` called
        /// `initTransactions()` (the old one is fenced and its open transaction aborted), or the
        /// coordinator's sweep found it older than its `transaction.timeout.ms`.
        cause: TransactionEnd,
        /// Its data records: how many per partition it wrote.
        records: usize,
    },
    /// The offsets topic now holds this value for the connector (`None`: tombstone).
    SourceOffsetStored {
        connector: String,
        offset: Option<SourceOffset>,
    },
    GroupCommitted {
        group: String,
        positions: Vec<(TopicPartition, u64)>,
    },

    // ----- sink -----
    SinkStarted {
        positions: Vec<(TopicPartition, u64)>,
    },
    /// One record applied (not narrated one by one).
    SinkApplied {
        applies: Vec<Apply>,
    },
    /// A completed snapshot epoch removed the documents it did not see.
    SinkReconciled {
        epoch_lsn: Lsn,
        removed: Vec<(TableId, Key, Row)>,
    },

    // ----- clients -----
    AppTxnFailed {
        reason: String,
    },
    LoaderRead {
        rows: usize,
        lsn: Lsn,
    },

    // ----- operator -----
    GateChecked {
        saved_offset: Option<Box<SourceOffset>>,
        slot: Option<Box<SlotRow>>,
        timeline: u32,
        switch_lsn: Option<Lsn>,
        current_lsn: Lsn,
        verdict: GateVerdict,
        detail: String,
    },
    OperatorAction {
        action: String,
    },

    // ----- harness -----
    /// A fault the harness injected.
    Fault {
        action: FaultAction,
    },
    /// The harness restarted a process (after a fault).
    Restarted {
        process: Node,
    },
    /// A named model moment was reached (what fault and workload triggers wait for).
    Moment {
        name: String,
    },

    // Later additions stay at the end, so that the trace hashes of runs without them do not move.
    /// The task threw an exception (`kill-connector-task`); `committing`: its send loop ended
    /// and its final offset commit runs (a task still starting has nothing to commit).
    TaskFailing {
        committing: bool,
    },
    /// A REST call found no worker to answer it (connection refused, or the connection broke);
    /// the caller tries again every `retry_after_ms`.
    RestUnanswered {
        request: String,
        retry_after_ms: u64,
    },
    /// A REST call refused before has been answered at last.
    RestAnswered {
        request: String,
    },
    /// A fault that could not take effect where the run stood, and why (it did nothing).
    FaultRefused {
        action: FaultAction,
        reason: String,
    },
    /// An operator's procedure that arrived while another one ran: it waits its turn.
    OperatorWaits {
        procedure: String,
        behind: String,
    },
    /// A procedure that waited now runs.
    OperatorResumesWaiting {
        procedure: String,
    },
    // ----- clients, continued (last: a variant's place is part of the trace hash) -----
    /// A scripted transaction (`[[workload.script]]` or `[[check.script]]`) did not apply: it
    /// changed no row (`ops`: its operations), failed (`reason`: the server's error), or got no
    /// answer.
    ScriptedNotApplied {
        ops: Vec<crate::core::change::RowOp>,
        reason: String,
    },
    /// The sink's consumer failed: `auto.offset.reset=none` and no committed offset for these
    /// partitions. It reads nothing until it is restarted.
    SinkFailed {
        reason: String,
        partitions: Vec<TopicPartition>,
    },
    /// A process other than PostgreSQL and the Connect worker crashed (a step of the
    /// exhaustive lens, or of a schedule that follows one): its volatile state is lost.
    Crashed {
        process: Node,
    },
    // ----- PostgreSQL (last, so that the variants before keep their place in trace hashes) -----
    /// Crash recovery (the restart after a crash) replayed the WAL and requests the checkpoint
    /// that ends it (`CHECKPOINT_END_OF_RECOVERY`), before the server accepts connections.
    CrashRecoveryEnded {
        server: Node,
    },
    /// A transaction block's commit record is in WAL (decodable from now on); it becomes
    /// visible and COMMIT returns in a later step ([`Moment::CommitInWal`]).
    CommitWritten {
        server: Node,
        xid: crate::core::ids::Xid,
        commit_lsn: Lsn,
        end_lsn: Lsn,
    },
    // ----- Debezium's restart search (issue 18) -----
    /// The restart's search phase (`WalPositionLocator.resumeFromLsn`) found where to resume;
    /// the task reconnects and streams again from the stored `lsn_proc` with the filter on.
    WalPositionFound {
        resume: Lsn,
        reconnect_at: Lsn,
    },
    /// A slot being created found the running-xacts record at `at` a new phase (`found`: the
    /// server log's "initial starting point" or "initial consistent point") and waits for the
    /// transactions `xids` to end before it logs another one (`SnapBuildFindSnapshot`,
    /// `SnapBuildWaitSnapshot`, `snapbuild.c`); its session gets no answer meanwhile.
    SlotCreationWaiting {
        server: Node,
        slot: String,
        found: String,
        at: Lsn,
        xids: Vec<crate::core::ids::Xid>,
    },
    /// `idle_in_transaction_session_timeout` ended a session idle in a transaction block: the
    /// backend exits ("terminating connection due to idle-in-transaction timeout") and its
    /// transaction aborts (`xid`: the one it had, whose ABORT record is written).
    SessionTerminated {
        server: Node,
        client: Node,
        xid: Option<crate::core::ids::Xid>,
        idle_ms: u64,
    },
    /// Debezium before 1.1 confirmed this LSN to the slot from the last record `poll()` returned,
    /// whether or not Kafka had it yet (`PostgresConnectorTask.poll()` set `lastOffset`,
    /// `commit()` confirmed it; DBZ-1766). From 1.1 a confirmation is [`Observation::LsnFlushed`].
    LsnFlushedLastPolled {
        lsn: Lsn,
    },
    /// Debezium sought its slot to the stored offset before streaming
    /// (`pg_replication_slot_advance(slot, target)`, `PostgresReplicationConnection`
    /// `advanceReplicationSlot`): the slot moved up to `target`, or the server refused (`refused`:
    /// its error; the slot was ahead) and the release only logged it (2.2 to 2.4, DBZ-6191).
    SlotSought {
        slot: String,
        target: Lsn,
        refused: Option<String>,
    },
    // ----- Logical decoding messages (issue 18, dbz#1379) -----
    /// `pg_logical_emit_message` wrote its record (`LogLogicalMessage`): `lsn` is the record's
    /// end, as pgoutput stamps it; `xid` the writer's transaction for a transactional message
    /// (it is decoded only if that transaction commits); `database` the writer's (`None`: the
    /// main one). A non-transactional message is not flushed when written: a crash before the
    /// next flush loses it. `committed`: a transactional message outside a transaction block,
    /// whose transaction of its own committed (and was flushed) with it.
    MessageWritten {
        server: Node,
        lsn: Lsn,
        transactional: bool,
        xid: Option<crate::core::ids::Xid>,
        prefix: String,
        database: Option<String>,
        committed: bool,
        /// What its content is: an outbox event (the table-free outbox), or bytes the model
        /// does not keep. Hashed only when it is an event.
        #[serde(default, skip_serializing_if = "crate::core::ids::MessageContent::is_opaque")]
        content: crate::core::ids::MessageContent,
    },
    // ----- The outbox's consumer (issue 19) -----
    /// The consumer read its group's committed offsets and starts at these positions.
    ConsumerStarted {
        positions: Vec<(TopicPartition, u64)>,
    },
    /// The consumer handled one routed record (`event`: the outbox row, table and event id).
    EventHandled {
        tp: TopicPartition,
        offset: u64,
        event: (crate::core::ids::TableId, crate::core::ids::Key),
        aggregate_id: u32,
        event_type: crate::core::ids::Status,
        handled: Handled,
    },
    /// The consumer failed (no committed offset and `auto.offset.reset=none`).
    ConsumerFailed {
        reason: String,
    },
    // ----- Single message transforms (issue 19) -----
    /// The connector's transforms ran on the records one `poll()` returned: `routed` went to
    /// another topic than the connector's (the outbox `EventRouter`'s), `dropped` were dropped
    /// (and their offsets acknowledged at once); `first_drop`: what the transform logged for the
    /// first one.
    Transformed {
        routed: usize,
        dropped: usize,
        first_drop: Option<String>,
    },
    /// What the Connect worker observed of its connector `connector` (the index of a
    /// `[[connector]]` entry, 1 or more): the first connector's observations are the
    /// pipeline's own and stand untagged, as when the worker ran one connector.
    OfConnector {
        connector: u8,
        observation: Box<Observation>,
    },
    // ----- Compaction (issue 20) -----
    /// The log cleaner cleaned a partition of a compacted topic: `removed` records are gone for
    /// every consumer; `deletes`: the removed records that carried a delete (offset, key, whether
    /// a tombstone, otherwise an `op=d` event); `horizons`: tombstones that got their delete
    /// horizon (offset, key, from when the next cleaning removes them).
    Compacted {
        tp: TopicPartition,
        removed: u32,
        deletes: Vec<(u64, Key, bool)>,
        horizons: Vec<(u64, Key, SimTime)>,
    },
    // ----- The Connect workers' group (issue 20) -----
    /// Kafka's group coordinator completed a join: generation `generation`, its leader and
    /// members.
    GroupRebalanced {
        generation: u32,
        leader: Node,
        members: Vec<Node>,
    },
    /// The coordinator removed a member (`reason`: it left, its session expired, it did not join
    /// in time).
    GroupMemberRemoved {
        worker: Node,
        reason: String,
    },
    /// The leader's assignor: for each member the connectors whose task it starts and stops;
    /// `delayed`, lost tasks held back until the scheduled rebalance (`delay_ms` from now);
    /// `duplicated`, tasks found running on two workers (revoked from both).
    GroupAssignmentsComputed {
        generation: u32,
        assignments: Vec<(Node, Vec<u8>, Vec<u8>)>,
        delayed: Vec<u8>,
        duplicated: Vec<u8>,
        delay_ms: u64,
    },
    /// A worker received its assignment for `generation`.
    GroupAssigned {
        generation: u32,
        assigned: Vec<u8>,
        revoked: Vec<u8>,
        delay_ms: u64,
    },
    /// A worker that lost the coordinator stopped its own tasks (KAFKA-9184).
    GroupSelfRevoked {
        connectors: Vec<u8>,
    },
    /// A worker shut down cleanly: it left the group and its process ended.
    WorkerLeft,
    // New variants go last: a trace hash hashes an observation with its place in this enum.
    /// `wal_sender_timeout` ended the walsender of `client`'s replication connection ("terminating
    /// walsender process due to replication timeout"): its slot is free for the next client.
    WalSenderTimedOut {
        server: Node,
        client: Node,
        slot: String,
        timeout_ms: u64,
    },
    /// An exhaustive path's pause of this Connect worker: it has outlasted the worker's
    /// `session.timeout.ms` and PostgreSQL's `wal_sender_timeout`; the worker goes on as it was.
    PausedPastTimeouts,
    /// A worker of a group forwarded a REST call (`request`, as the client made it) to `to`: the
    /// leader, or the worker the task is assigned to.
    RestForwarded {
        request: String,
        to: Node,
    },
    /// A record of the Connect cluster's config topic: the connector's target state (STARTED when
    /// `running`) and its task count (tagged with the connector, [`Observation::of_connector`]).
    ConnectConfigWritten {
        running: bool,
        tasks: u8,
    },
    /// A REST call of the operator failed (`error`, the worker's answer); it is made again.
    RestFailed {
        request: String,
        error: String,
        retry_after_ms: u64,
    },
    /// The task read a signal row on its stream (the source channel) and executed it before
    /// the row's own record (`EventDispatcher.dispatchDataChangeEvent`): its `id`, `type` and
    /// `data`, and what it did.
    SignalExecuted {
        id: String,
        signal_type: String,
        data: String,
        outcome: String,
        /// The channel it came by (the source channel when not said).
        #[serde(default, skip_serializing_if = "crate::core::signal::SignalVia::is_source")]
        via: crate::core::signal::SignalVia,
    },
    /// An incremental snapshot began (`notifyStarted`), queueing these tables.
    IncrementalSnapshotStarted {
        tables: Vec<TableId>,
    },
    /// At the task's start the stored offset said an incremental snapshot was running: `init`
    /// reads a chunk of `table` after the stored key, with a fresh chunk id.
    IncrementalSnapshotResumed {
        table: TableId,
        after: Option<Key>,
    },
    /// `readChunk` wrote the open watermark of `chunk` and read `rows` rows of `table`, keys
    /// after `after` up to the table's `maximum_key` (`last`: the chunk's last key).
    ChunkRead {
        table: TableId,
        chunk: ChunkId,
        after: Option<Key>,
        last: Option<Key>,
        rows: u32,
        maximum_key: Key,
        /// The table's `additional-conditions`, `AND (…)` in the query.
        #[serde(default, skip_serializing_if = "crate::core::signal::QueryFilter::is_none")]
        filter: crate::core::signal::QueryFilter,
        /// The column the query orders and bounds by (the signal's `surrogate-key`; none: the
        /// key `id`): `after`, `last` and `maximum_key` are its values.
        #[serde(default, skip_serializing_if = "crate::core::signal::ChunkOrder::is_primary_key")]
        order: crate::core::signal::ChunkOrder,
        /// Set when the key is the table's nullable unique column (`message.key.columns`): the
        /// positions are its values ([`crate::core::ids::UniqueColumn::NULL`] for NULL), the
        /// bounds compared as it says.
        #[serde(default, skip_serializing_if = "crate::core::signal::ChunkNulls::is_none")]
        nulls: crate::core::signal::ChunkNulls,
    },
    /// The stream reached `chunk`'s open watermark: its window opened.
    WindowOpened {
        chunk: ChunkId,
    },
    /// The stream reached `chunk`'s close watermark: the rows left in its buffer were emitted
    /// (`emitted`); `deduplicated` had been removed by streamed events of the same keys.
    WindowClosed {
        table: Option<TableId>,
        chunk: ChunkId,
        emitted: u32,
        deduplicated: u32,
    },
    /// A watermark of another chunk than the current one (an earlier start's, replayed) was
    /// read and ignored.
    WatermarkIgnored {
        chunk: ChunkId,
        watermark: Watermark,
    },
    /// A table of the incremental snapshot is done (`TABLE_SCAN_COMPLETED`), `rows` read.
    IncrementalTableScanned {
        table: TableId,
        status: ScanStatus,
        rows: u64,
        reason: String,
    },
    /// The incremental snapshot has no collection left (`postIncrementalSnapshotCompleted`).
    IncrementalSnapshotCompleted,
    /// A READ COMMITTED range query of `client` on `table` ran while transaction `xid`, which
    /// changed `rows` of the rows in its range (the first `key`), had its commit record in the
    /// WAL but was not yet visible (`RecordTransactionCommit` done, `ProcArrayEndTransaction` not):
    /// the query read those rows as they were before it. The precondition of the incremental
    /// snapshot's visibility race.
    ReadMissedCommit {
        client: Node,
        table: TableId,
        xid: crate::core::ids::Xid,
        key: Key,
        rows: u32,
    },
    /// The maximum-key and chunk queries of `table` carry the snapshot's `additional-conditions`
    /// for it: `AND (filter)`; rows that do not match are never read.
    AdditionalConditions {
        table: TableId,
        filter: crate::core::signal::RowFilter,
    },
    /// `readChunk` found the snapshot paused (`pause-snapshot`): no watermark, no chunk; `table`
    /// waits after key `after` until `resume-snapshot` or a task restart.
    IncrementalSnapshotPaused {
        table: TableId,
        after: Option<Key>,
    },
    /// `resume-snapshot` cleared the pause: `readChunk` runs for `table`.
    IncrementalSnapshotUnpaused {
        table: TableId,
    },
    /// `readChunk` began with a stop request (`checkAndProcessStopFlag`): `stopped` left the
    /// snapshot (the current table among them when `current` is true: its rows not yet read are
    /// never emitted), `not_queued` were named but are not in the snapshot, `unmatched` named
    /// no captured table, `left` are still to read; `running` false: no snapshot was running,
    /// the request was ignored.
    IncrementalSnapshotStopped {
        running: bool,
        stopped: Vec<TableId>,
        current: bool,
        not_queued: Vec<TableId>,
        unmatched: Vec<String>,
        left: Vec<TableId>,
    },
    /// A blocking snapshot began (`ChangeEventSourceCoordinator.doBlockingSnapshot`): streaming
    /// paused after the signal's message, at the offset whose `lsn` is `lsn`; `tables` are read,
    /// in order, by READ COMMITTED `SELECT`s at the current time.
    BlockingSnapshotStarted {
        tables: Vec<TableId>,
        lsn: Lsn,
    },
    /// The blocking snapshot read every table: `rows` records, the last one carrying the
    /// completion; streaming resumes at the pause position.
    BlockingSnapshotCompleted {
        rows: u32,
    },
    /// The blocking snapshot failed (`doBlockingSnapshot`'s catch: "Error while executing
    /// requested blocking snapshot."): `rows` were read, the held-back last one (`held`) is never
    /// emitted (DBZ-8335), the offset keeps `snapshot=BLOCKING`; streaming resumes.
    BlockingSnapshotFailed {
        reason: String,
        rows: u32,
        held: Option<(TableId, Key)>,
    },
    /// `readChunk` reached `table` with a `surrogate-key` (`column`) the table does not have:
    /// `getQueryColumns` threw (DBZ-7797) after the open watermark was written. `at_start`: in
    /// `init`, failing the task; else in a signal's action, caught and logged as a warning while
    /// streaming goes on with the snapshot stuck (no close watermark, the table still queued).
    SurrogateKeyMissing {
        table: TableId,
        column: String,
        at_start: bool,
    },
    /// A row of the signal table read on the stream while `signal.enabled.channels` has no
    /// `source`: not read as a signal (`EventDispatcher` has no source channel); `watermark`: the
    /// chunk whose watermark it is, which then opens or closes nothing.
    SignalRowNotRead {
        key: Key,
        watermark: Option<crate::core::signal::ChunkId>,
    },
    /// The Kafka signal channel's consumer of connector's task starts (`KafkaSignalChannel.init`,
    /// `assign` of partition 0): at the group's committed position, or at the earliest offset
    /// when the group has none (`auto.offset.reset=earliest`).
    KafkaSignalConsumerStarted {
        topic: u16,
        group: String,
        position: u64,
        committed: bool,
    },
    /// A record of the Kafka signal topic whose key is not the connector's `topic.prefix`:
    /// logged and dropped (`KafkaSignalChannel.processSignal`).
    KafkaSignalSkipped {
        topic: u16,
        offset: u64,
        key: String,
        prefix: String,
    },
    /// A read-only incremental snapshot's watermark (`read.only=true`): `readChunk`'s `SELECT *
    /// FROM pg_current_snapshot()` before the chunk query (low) or after it (`high`).
    SnapshotWatermark {
        chunk: crate::core::signal::ChunkId,
        high: bool,
        xids: crate::core::protocol::SnapshotXids,
    },
    /// A read-only incremental snapshot's window moved: `event` of transaction `xid` (None: the
    /// offset has none) met `rule`.
    ReadOnlyWindow {
        chunk: Option<crate::core::signal::ChunkId>,
        xid: Option<crate::core::ids::Xid>,
        event: crate::core::signal::ReadOnlyEvent,
        rule: crate::core::signal::ReadOnlyRule,
    },
    /// A task that threw an exception has stopped (its final offset commit has run) while a
    /// restart (`POST …/tasks/0/restart`) or, after a stop, a resume was waiting for it: the
    /// herder starts a new task at once instead of leaving it FAILED. (A failed task nobody asked
    /// to restart is [`Observation::TaskStopped`] with `graceful: false`.)
    FailedTaskReplaced,
    /// A Connect worker applied connector configuration `version` (`PUT
    /// /connectors/<name>/config`): the connector now captures `tables` (`table.include.list`,
    /// with the signal table); its running task is stopped and a new one started with it
    /// (`DistributedHerder`'s task reconfiguration: changed task configurations restart the
    /// tasks).
    ConnectorReconfigured {
        version: u8,
        tables: Vec<TableId>,
    },
}

/// What the consumer did with one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Handled {
    /// The side effect was applied (for the `times`-th time for this event).
    Applied { times: u32 },
    /// The inbox already had the event: nothing applied.
    Absorbed,
    /// The inbox insert committed; the side effect is the next transaction.
    InboxRecorded,
    /// The offset past it was committed before handling it.
    OffsetCommitted,
}

/// An observation with its time and node: one line of the trace.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TraceEvent {
    pub at: SimTime,
    pub node: Node,
    pub observation: Observation,
}

impl Observation {
    /// The observation connector `connector`'s part of the worker makes of `self`: tagged unless
    /// it is the first connector's.
    pub fn of_connector(connector: u8, observation: Observation) -> Observation {
        if connector == 0 {
            observation
        } else {
            Observation::OfConnector { connector, observation: Box::new(observation) }
        }
    }

    /// What a crash of `node` is recorded as, in both lenses: a Connect worker's kill, a
    /// PostgreSQL crash, or another process's crash.
    pub fn crash_of(node: Node) -> Observation {
        match node {
            Node::Connect | Node::Connect2 | Node::Connect3 => {
                Observation::Fault { action: FaultAction::KillConnectWorker { restart_after_ms: None } }
            }
            Node::Consumer => Observation::Fault { action: FaultAction::KillConsumer { restart_after_ms: None } },
            Node::Pg1 | Node::Pg2 | Node::Postgres => {
                Observation::Fault { action: FaultAction::CrashPostgres { restart_after_ms: 0 } }
            }
            _ => Observation::Crashed { process: node },
        }
    }

    /// How much of the run this observation stands for, in trace items: one, plus one per row
    /// change, Kafka record, sink apply, removed document or position it carries. A run's models
    /// hold what came through its trace (Kafka's logs are the appended records, the sink's
    /// documents the applies, the WAL and the oracle the committed changes), so a run's memory
    /// grows with the sum; the runner bounds it ([`crate::core::limits::MAX_TRACE_ITEMS`]).
    pub fn trace_items(&self) -> u64 {
        let carried = match self {
            Observation::Committed { txn, .. } => txn.changes.len(),
            Observation::Appended { records, .. } => records.len(),
            Observation::SinkApplied { applies } => applies.len(),
            Observation::SinkReconciled { removed, .. } => removed.len(),
            Observation::GroupCommitted { positions, .. } | Observation::SinkStarted { positions } => positions.len(),
            Observation::ServerStarted { slots, .. } => slots.len(),
            Observation::Promoted { slots, .. } => slots.len(),
            Observation::OfConnector { observation, .. } => return observation.trace_items(),
            _ => 0,
        };
        1 + carried as u64
    }

    /// The model moment this observation is, if any (what triggers wait for).
    pub fn moment(&self) -> Option<Moment> {
        match self {
            Observation::ScanStarted { client: Node::Connect | Node::Connect2 | Node::Connect3, .. } => {
                Some(Moment::SnapshotScanStarted)
            }
            Observation::ProduceAcked { completion_marker: true, .. } => Some(Moment::SnapshotCompletionMarkerAcked),
            Observation::SnapshotCompleted { .. } => Some(Moment::SnapshotCompleted),
            Observation::SourceOffsetStored { offset: Some(offset), .. } if offset.snapshot_completed => {
                Some(Moment::SnapshotCompletionStored)
            }
            Observation::StreamStarted { client: Node::Connect | Node::Connect2 | Node::Connect3, .. } => {
                Some(Moment::StreamingStarted)
            }
            Observation::ProduceAcked { changes, .. } if *changes > 0 => Some(Moment::ChangeAcked),
            Observation::OffsetsCommitted { offset: Some(_) } => Some(Moment::OffsetsStored),
            Observation::TaskStarted { .. } => Some(Moment::TaskStarted),
            Observation::Promoted { .. } => Some(Moment::Promoted),
            Observation::CommitWritten { .. } => Some(Moment::CommitInWal),
            Observation::EventHandled { .. } => Some(Moment::EventHandled),
            Observation::WindowClosed { .. } => Some(Moment::WindowClosed),
            _ => None,
        }
    }
}

/// Why a Kafka transaction ended ([`Observation::TransactionEnded`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransactionEnd {
    /// `EndTxn` from the producer (`commitTransaction()` / `abortTransaction()`).
    Requested,
    /// `InitProducerId` for the same `transactional.id` found it open: fenced and aborted.
    Fenced,
    /// An operator aborted a hanging transaction (`kafka-transactions.sh abort`, KIP-664).
    AdminAbort,
    /// `transaction.timeout.ms` passed: the coordinator's sweep fenced the epoch and aborted it.
    TimedOut,
}
