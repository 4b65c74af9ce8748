//! Every message that crosses a network link between two modelled processes.
//!
//! Each protocol is a pair of enums (requests, replies) named after the real one: the PostgreSQL
//! client protocol as JDBC uses it ([`SqlRequest`]), the streaming replication protocol
//! ([`ReplRequest`]), physical WAL shipping to a standby, the Kafka protocol ([`KafkaRequest`]),
//! Kafka Connect's REST API ([`RestRequest`]), and the harness's control messages.
//!
//! A client numbers its sessions (a JDBC connection, a replication connection) and a server keeps
//! per-session state; a server's reply names the session it answers.

use crate::core::change::{Change, RowOp};
use crate::core::event::{KafkaRecord, SourceOffset, SourceRecord, TopicPartition};
use crate::core::ids::{Key, MessageContent, MessageEvent, Node, Row, TableId, Xid};
use crate::core::lsn::Lsn;
use crate::core::shared::CopyOnWrite;
use crate::core::time::SimTime;
use crate::core::wal::WalEntry;
use serde::{Deserialize, Serialize};

/// A client-chosen session number, unique within one run of the client process.
pub type SessionId = u64;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Msg {
    Sql {
        session: SessionId,
        request: SqlRequest,
    },
    SqlReply {
        session: SessionId,
        reply: SqlReply,
    },
    Repl {
        session: SessionId,
        request: ReplRequest,
    },
    ReplReply {
        session: SessionId,
        reply: ReplReply,
    },
    /// Physical streaming replication: WAL from the primary to its standby.
    WalShip {
        entries: Vec<WalEntry>,
    },
    /// PostgreSQL 17+: the positions of the primary's failover slots, as the standby's slotsync
    /// worker reads them (`pg_replication_slots` on the primary).
    SlotSync {
        slots: Vec<FailoverSlot>,
    },
    /// The standby's feedback: it has flushed the WAL up to `lsn` (its physical slot's position,
    /// which `synchronized_standby_slots` waits for).
    StandbyFlushed {
        lsn: Lsn,
    },
    Kafka {
        request_id: u64,
        request: KafkaRequest,
    },
    KafkaReply {
        request_id: u64,
        reply: KafkaReply,
    },
    /// A REST call on connector `connector` (the index of its `[[connector]]` entry).
    Rest {
        connector: u8,
        request: RestRequest,
    },
    RestReply {
        reply: RestReply,
    },
    /// A Connect worker to Kafka's group coordinator (the `connect` protocol of
    /// `WorkerCoordinator`, reference kafka-connect.md §5).
    Group(GroupRequest),
    /// The group coordinator's answer.
    GroupReply(GroupReply),
    /// From the harness: a scripted action (not a network message of the real system).
    Control(Control),
    /// A REST call a worker of a group forwards to another (the leader, or the worker a task is
    /// assigned to: `RestClient.httpRequest` on a `NotLeaderException` / `NotAssignedException`,
    /// reference kafka-connect.md §5.4); `id` pairs it with its answer.
    RestForward {
        id: u32,
        connector: u8,
        request: RestRequest,
        /// How many workers it has passed (1 or 2): `HerderRequestHandler` forwards a call at
        /// most twice (the `forward` query parameter), then answers 409.
        hops: u8,
    },
    /// The answer to a forwarded REST call, relayed to whoever made it.
    RestForwardReply {
        id: u32,
        reply: RestReply,
    },
    /// A record of the group's config topic as every worker's config consumer reads it
    /// (`KafkaConfigBackingStore`): connector `connector`'s target state and task count.
    ConnectConfig {
        connector: u8,
        record: ConnectorConfigRecord,
    },
}

/// A write to the config topic: records of their own for the target state and the task
/// configurations (`KafkaConfigBackingStore`'s `target-state-<name>` and `task-*`/`commit-*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConfigWrite {
    /// `putTargetState`: STARTED (`true`) or STOPPED.
    TargetState(bool),
    /// `putTaskConfigs`: this many task configurations.
    TaskConfigs(u8),
    /// `PUT …/stop` on the leader: an empty task configuration, then STOPPED.
    Stop,
}

/// What the Connect cluster's config topic says of a connector (reference kafka-connect.md §5.4):
/// its target state (`target-state-<name>`) and how many task configurations it has
/// (`commit-<name>`'s task count; 0 after `PUT …/stop`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConnectorConfigRecord {
    /// STARTED (`true`) or STOPPED.
    pub running: bool,
    pub tasks: u8,
}

/// What a JDBC session asks of PostgreSQL. One request at a time per session.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SqlRequest {
    /// `BEGIN; …; COMMIT` as one step.
    Transaction { ops: Vec<RowOp> },
    /// `SELECT pg_current_wal_lsn()`.
    CurrentWalLsn,
    /// `SELECT … FROM pg_replication_slots WHERE slot_name = $1`.
    SlotInfo { slot: String },
    /// `SELECT * FROM <table>` with a cursor fetching `fetch_size` rows at a time, in the
    /// session's current snapshot: an imported exported snapshot
    /// (`SET TRANSACTION SNAPSHOT '<name>'` in a REPEATABLE READ transaction) or, without one,
    /// a fresh statement snapshot (READ COMMITTED).
    ///
    /// `filter`: a blocking snapshot's `additional-conditions` statement
    /// (`SELECT * FROM <table> WHERE …`): only matching rows; one naming a column the table lacks
    /// is refused before anything is read.
    ScanTable {
        table: TableId,
        exported_snapshot: Option<String>,
        fetch_size: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filter: Option<Box<crate::core::signal::RowFilter>>,
    },
    /// `CREATE PUBLICATION <name> FOR ALL TABLES` unless it exists.
    /// `CREATE PUBLICATION name FOR ALL TABLES` if it does not exist (`tables: None`), or, with
    /// `publication.autocreate.mode = filtered`, `FOR TABLE` those tables, created or set so.
    EnsurePublication { name: String, tables: Option<Vec<TableId>> },
    /// `SELECT pg_drop_replication_slot($1)`.
    DropSlot { slot: String },
    /// `SELECT * FROM pg_create_logical_replication_slot($1, $2)`: a consistent point, no
    /// snapshot. The slot belongs to the session's database: `database`, or with `None` the
    /// server's main database (the one its tables are in).
    CreateSlot { slot: String, plugin: String, database: Option<String> },
    /// `SELECT timeline_id, pg_is_in_recovery() …` plus the switch point from the timeline
    /// history file: what a failover gate reads.
    TimelineInfo,
    /// Close the session (drops its cursor and snapshot).
    Close,
    /// `BEGIN; SELECT pg_logical_emit_message(true, $prefix, repeat('x', $payload_bytes));
    /// COMMIT` (`transactional`), or the non-transactional message alone.
    EmitMessage { transactional: bool, prefix: String, payload_bytes: u64 },
    /// `SELECT pg_switch_wal()`.
    SwitchWal,
    /// `SELECT * FROM pg_logical_slot_get_binary_changes($1, NULL, NULL, 'proto_version', '1',
    /// 'publication_names', $2)`: decodes and consumes.
    GetChanges { slot: String, publication: String },
    /// `pg_logical_slot_peek_binary_changes`: decodes without consuming.
    PeekChanges { slot: String, publication: String },
    /// `SELECT * FROM pg_replication_slot_advance($1, $2)`.
    AdvanceSlot { slot: String, to: Lsn },
    /// `SELECT … FROM pg_replication_slots`: every slot.
    ReplicationSlots,
    // ----- sessions and transaction blocks (reference postgres-transactions.md §1–§2) -----
    /// `BEGIN ISOLATION LEVEL …`: opens a transaction block in the session (answered `Ok`; in a
    /// block PostgreSQL only warns). No xid is assigned until the block first writes
    /// (`AssignTransactionId` is lazy, `xact.c`).
    Begin { isolation: Isolation },
    /// One DML statement: inside the session's transaction block when one is open, else
    /// autocommit. Each row it changes is its own WAL record with its own LSN (`INSERT … VALUES
    /// (…),(…)`, `UPDATE … WHERE id IN (…)`); with `copy`, the inserts are `COPY FROM`'s
    /// `Heap2 MULTI_INSERT` and share one LSN (`heap_multi_insert`, `DecodeMultiInsert`).
    ///
    /// In a block it answers [`SqlReply::StatementDone`]; outside one, as
    /// [`SqlRequest::Transaction`]. A statement touching a row another open block changed waits
    /// for that block to end (no reply until then); an error (duplicate key, `could not
    /// serialize access`, deadlock) fails the block: it accepts only `ROLLBACK` then.
    Statement { ops: Vec<RowOp>, copy: bool },
    /// `COMMIT` of the session's transaction block. A block that wrote writes its commit record
    /// in this step and answers [`SqlReply::Committed`] in a later one, when it has become
    /// visible (the server's `commit-visible` timer, armed with no delay); a block that wrote
    /// nothing answers `Ok` at once, a failed one [`SqlReply::RolledBack`]. Outside a block:
    /// `Ok`.
    Commit,
    /// `ROLLBACK` of the session's transaction block: [`SqlReply::RolledBack`] (outside a block:
    /// `Ok`).
    Rollback,
    /// `SELECT id, … FROM <table> ORDER BY id` in the session: the transaction's snapshot under
    /// REPEATABLE READ, a fresh statement snapshot under READ COMMITTED or outside a block.
    Select { table: TableId },
    /// The incremental snapshot's queries (`AbstractChunkQueryBuilder.buildChunkQuery`,
    /// `buildMaxPrimaryKeyQuery`; reference debezium-postgres.md §6.2): `SELECT * FROM <table>
    /// WHERE (id) > (after) AND (id) <= (upto) ORDER BY id LIMIT limit` (no lower bound on the
    /// first chunk), or with `descending` the largest key's row, `ORDER BY id DESC LIMIT 1`. A
    /// statement of the session as [`SqlRequest::Select`] is: a fresh statement snapshot under
    /// READ COMMITTED.
    /// `filter`: the snapshot's `additional-conditions` for the table, `AND (filter)`.
    /// `order_by`: the snapshot's `surrogate-key` (reference §6.4): the bounds `after` and `upto`
    /// are that column's values, `WHERE (col) > (after) AND (col) <= (upto) ORDER BY col`; rows
    /// with equal values come in key order (PostgreSQL promises no order among them).
    /// `per_column`: on a table with a two-column key ([`crate::core::ids::CompositeKey`]),
    /// Debezium before 1.8's bounds, which compare each column on its own (DBZ-3860):
    /// `k1 >= a1 AND k2 >= a2 AND NOT (k1 = a1 AND k2 = a2) AND k1 <= u1 AND k2 <= u2` for
    /// `after = (a1, a2)`, `upto = (u1, u2)`; on a one-column key it is the same range.
    /// `nulls`: not `None` when the key is the table's nullable unique column
    /// ([`crate::core::ids::UniqueColumn`], `message.key.columns`): the query orders and bounds
    /// by it (NULL last), its bounds positions of it, compared as the variant says.
    SelectRange {
        table: TableId,
        after: Option<Key>,
        upto: Option<Key>,
        limit: u32,
        descending: bool,
        filter: Option<Box<crate::core::signal::RowFilter>>,
        order_by: crate::core::signal::ChunkOrder,
        per_column: bool,
        #[serde(default, skip_serializing_if = "crate::core::signal::ChunkNulls::is_none")]
        nulls: crate::core::signal::ChunkNulls,
    },
    /// `SET TRANSACTION SNAPSHOT '<name>'` (REPEATABLE READ blocks only, first statement).
    ImportSnapshot { name: String },
    /// `SELECT pg_current_snapshot()`: `xmin:xmax:xip,…`.
    CurrentSnapshot,
    /// `pg_logical_slot_get_binary_changes` (`consume`) or `pg_logical_slot_peek_binary_changes`
    /// with pgoutput's options `proto_version '1'`, `publication_names`, and `messages` as
    /// given: answered with [`SqlReply::Decoded`], logical messages included.
    SlotChanges { slot: String, publication: String, consume: bool, messages: bool },
    /// The service's outbox write through a logical decoding message (the table-free outbox):
    /// its business statement `ops` (the claim's `UPDATE`), then `SELECT
    /// pg_logical_emit_message(transactional, prefix, content)` with the event as `content`
    /// (`payload_bytes` long), in one transaction. Outside a block it is one autocommit step, as
    /// [`SqlRequest::Transaction`] is (it waits for a row lock the same way, then runs whole:
    /// the change records, the message and the commit), answered [`SqlReply::Committed`] (or
    /// [`SqlReply::Lsn`] of the message when the statement changed no row); in a block, the
    /// statement and the message join the block, answered [`SqlReply::Lsn`]. A non-transactional
    /// message is written with the statement and decoded at once, whatever becomes of the
    /// transaction.
    OutboxMessage { ops: Vec<RowOp>, transactional: bool, prefix: String, payload_bytes: u64, event: MessageEvent },
}

/// `transaction_isolation` of a transaction block (reference postgres-transactions.md §2.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// A fresh snapshot per statement (the default).
    #[default]
    ReadCommitted,
    /// One snapshot, taken at the block's first statement, for the whole block.
    RepeatableRead,
}

impl Isolation {
    pub fn name(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "READ COMMITTED",
            Isolation::RepeatableRead => "REPEATABLE READ",
        }
    }
}

/// An MVCC snapshot as `pg_current_snapshot()` prints it (`xmin:xmax:xip1,xip2`): every xid below
/// `xmin` is finished, every xid at or above `xmax` is invisible, and `xip` lists the xids in
/// between still running when it was taken (reference postgres-transactions.md §2.1).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SnapshotXids {
    pub xmin: Xid,
    pub xmax: Xid,
    pub xip: Vec<Xid>,
}

impl std::fmt::Display for SnapshotXids {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:", self.xmin, self.xmax)?;
        for (i, xid) in self.xip.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{xid}")?;
        }
        Ok(())
    }
}

/// A row of `pg_replication_slots` with every column the conformance suite compares.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ReplicationSlotRow {
    pub slot_name: String,
    pub plugin: String,
    /// `None`: the server's main database.
    pub database: Option<String>,
    pub active: bool,
    pub restart_lsn: Option<Lsn>,
    pub confirmed_flush_lsn: Option<Lsn>,
    pub wal_status: Option<String>,
    /// `None` is SQL NULL.
    pub safe_wal_size: Option<i64>,
    /// The oldest xid whose catalog rows the slot still needs (`None` is SQL NULL).
    pub catalog_xmin: Option<Xid>,
}

impl ReplicationSlotRow {
    /// The WAL the slot keeps with the write pointer at `current`: `current - restart_lsn`, 0
    /// once `restart_lsn` is NULL (invalidated).
    pub fn retained_bytes(&self, current: Lsn) -> u64 {
        self.restart_lsn.map_or(0, |restart| current.0.saturating_sub(restart.0))
    }
}

/// A row of `pg_replication_slots` (the columns the models read).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SlotRow {
    pub slot_name: String,
    pub plugin: String,
    pub active: bool,
    pub restart_lsn: Option<Lsn>,
    pub confirmed_flush_lsn: Option<Lsn>,
    pub wal_status: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SqlReply {
    Committed {
        xid: Xid,
        commit_lsn: Lsn,
        end_lsn: Lsn,
        changes: Vec<Change>,
    },
    /// The transaction changed no row (an update or delete of a missing key): its operations.
    NothingChanged {
        ops: Vec<RowOp>,
    },
    Lsn(Lsn),
    Slot(Option<SlotRow>),
    /// The next cursor batch; `done` on the last one.
    Rows {
        table: TableId,
        rows: Vec<(Key, Row)>,
        done: bool,
    },
    Timeline {
        timeline: u32,
        in_recovery: bool,
        switch_lsn: Option<Lsn>,
        current_lsn: Lsn,
    },
    Ok,
    Error(String),
    /// What `pg_logical_slot_get_changes` / `peek_changes` emitted: whole transactions, in
    /// commit order.
    Changes(Vec<DecodedTxn>),
    /// `pg_replication_slots`.
    ReplicationSlots(Vec<ReplicationSlotRow>),
    /// A statement inside a transaction block ran: the changes it wrote, with their LSNs
    /// (empty: it changed no row). The block stays open.
    StatementDone {
        changes: Vec<Change>,
    },
    /// `ROLLBACK`: the block's xid, if it had one (its ABORT record was written).
    RolledBack {
        xid: Option<Xid>,
    },
    /// `pg_current_snapshot()`.
    Snapshot(SnapshotXids),
    /// What [`SqlRequest::SlotChanges`] decoded, in the order pgoutput emitted it: whole
    /// transactions ([`ReplReply::XLogData`], their transactional messages inside) and
    /// non-transactional messages ([`ReplReply::Message`]).
    Decoded(Vec<ReplReply>),
}

/// What a replication session asks of a walsender.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReplRequest {
    /// `CREATE_REPLICATION_SLOT "<slot>" LOGICAL <plugin>`: the default exports a snapshot.
    CreateSlot {
        slot: String,
        plugin: String,
        /// PostgreSQL 17+ `(FAILOVER)`: the slot is synchronized to standbys.
        failover: bool,
    },
    /// `START_REPLICATION SLOT "<slot>" LOGICAL <start> (proto_version '1', publication_names
    /// '<publication>')`.
    StartReplication {
        slot: String,
        start: Lsn,
        publication: String,
        /// pgoutput's `messages` option: send logical decoding messages (Debezium sets it on
        /// PostgreSQL ≥ 14, `PgOutputMessageDecoder.defaultOptions`).
        messages: bool,
    },
    /// Standby status update: the client has flushed everything up to `flush`.
    StatusUpdate {
        flush: Lsn,
    },
    Close,
}

/// A transaction as pgoutput streams it: BEGIN (`first_lsn`), the published changes, COMMIT
/// (stamped with `end_lsn`). Sent whole, after its commit, in commit order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DecodedTxn {
    pub xid: Xid,
    /// The XLogData position of its BEGIN as PostgreSQL 15's pgoutput sends it: BEGIN is
    /// deferred to the first item it sends (`pgoutput_send_begin`), so this is the first sent
    /// change's LSN (its record's start), or the first sent transactional message's (its
    /// record's end) when that comes first. Not the transaction's first WAL record: a change of
    /// an unpublished table, or a message the client did not ask for, is not sent.
    pub first_lsn: Lsn,
    /// The start of its commit record (BEGIN's `final_lsn`, COMMIT's `commit_lsn`).
    pub commit_lsn: Lsn,
    /// The end of its commit record (COMMIT's `end_lsn` and XLogData position).
    pub end_lsn: Lsn,
    pub commit_time: SimTime,
    pub changes: Vec<Change>,
    /// Its transactional logical messages (`pg_logical_emit_message(true, …)`), each stamped
    /// with the end of its record; sent only to a client that asked for `messages`. Between
    /// the changes by LSN.
    pub messages: Vec<DecodedMessage>,
}

/// A logical decoding message as pgoutput sends it (`M`, `logicalrep_write_message`): `lsn`
/// is the end of its WAL record (`message_cb_wrapper` gets `buf->endptr`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DecodedMessage {
    pub lsn: Lsn,
    pub transactional: bool,
    pub prefix: String,
    pub payload_bytes: u64,
    /// What its content is: an outbox event, or bytes the model does not keep.
    #[serde(default, skip_serializing_if = "MessageContent::is_opaque")]
    pub content: MessageContent,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReplReply {
    SlotCreated {
        consistent_point: Lsn,
        snapshot_name: String,
    },
    /// `CopyBothResponse`: streaming has begun.
    StreamingStarted,
    XLogData(DecodedTxn),
    /// A non-transactional logical message, sent as soon as its record is decoded, between
    /// whole transactions (only with the `messages` option).
    Message(DecodedMessage),
    /// A primary keep-alive message: `walEnd` is the end of the WAL the walsender has read.
    Keepalive {
        wal_end: Lsn,
    },
    Error(String),
}

/// A failover slot's positions on the primary, for the standby's slotsync worker.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FailoverSlot {
    pub name: String,
    pub plugin: String,
    pub restart_lsn: Lsn,
    pub confirmed_flush: Lsn,
    pub invalidated: bool,
}

/// The Kafka protocol, reduced to what the models need.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KafkaRequest {
    /// A produce request carrying one batch of records (`acks=all`). CopyOnWrite, because a client
    /// keeps it to send again until it is acknowledged. With `transaction`, the batch is part of
    /// that producer's open transaction (its first send adds the partitions, `AddPartitionsToTxn`).
    Produce { records: CopyOnWrite<Vec<SourceRecord>>, transaction: Option<ProducerEpoch> },
    /// Write (or with `None`, tombstone) the source offset of a connector in the offsets topic.
    WriteSourceOffset { connector: String, offset: Option<SourceOffset> },
    /// The same inside a producer's open transaction: exactly-once source tasks send their
    /// offsets through their own transactional producer (KIP-618). Boxed: a message's size is
    /// its largest request's.
    WriteSourceOffsetInTransaction(Box<TransactionalOffset>),
    /// Read the offsets topic to its end and return a connector's offset (what a `read_committed`
    /// reader sees: offsets written in a transaction count once it committed).
    ReadSourceOffset { connector: String },
    /// Fetch from each partition at the given position (a long poll: answered when there is
    /// data the consumer's `isolation.level` lets it see).
    Fetch { positions: Vec<(TopicPartition, u64)>, max_records: u32, isolation: IsolationLevel },
    /// `InitProducerId` for a `transactional.id` (`initTransactions()`): the coordinator bumps the
    /// epoch, which fences every older instance, and aborts a transaction the id left open.
    InitProducerId { transactional_id: String, transaction_timeout_ms: u64 },
    /// `EndTxn`: commit or abort the producer's open transaction (`commitTransaction()`).
    EndTxn { producer: ProducerEpoch, commit: bool },
    /// `OffsetCommit` for a consumer group.
    CommitGroup { group: String, positions: Vec<(TopicPartition, u64)> },
    /// `OffsetFetch` for a consumer group, plus the partitions of its topics and, for each, where
    /// a consumer without a committed offset starts by `reset` (`auto.offset.reset`; the
    /// `ListOffsets` a consumer sends for it).
    ReadGroup { group: String, reset: crate::core::protocol::OffsetReset },
    /// A Connect worker writes a record of the group's config topic (`KafkaConfigBackingStore`
    /// `putTargetState`, `putTaskConfigs`); every worker's config consumer reads it
    /// ([`Msg::ConnectConfig`]).
    WriteConnectConfig { connector: u8, write: ConfigWrite },
    /// A Connect worker writes connector `connector`'s state to the status topic
    /// (`KafkaStatusBackingStore.putSafe`: kept only if `generation` is not older than the
    /// state's); not answered (the worker does not wait for it).
    WriteConnectStatus { connector: u8, state: ConnectorState, generation: u32 },
    /// A worker's answer to `GET …/status` reads the status topic.
    ReadConnectStatus { connector: u8 },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum KafkaReply {
    Produced {
        offsets: Vec<(TopicPartition, u64)>,
    },
    SourceOffsetWritten,
    SourceOffset(Option<SourceOffset>),
    Fetched {
        records: Vec<KafkaRecord>,
        log_end_offsets: Vec<(TopicPartition, u64)>,
    },
    GroupCommitted,
    /// `InitProducerId`'s answer: the producer id and its new epoch.
    ProducerId(ProducerEpoch),
    /// The transaction ended as asked (its markers are written).
    TxnEnded,
    /// A transactional request from a producer whose epoch is not the current one
    /// (`ProducerFencedException` / `InvalidProducerEpochException`): a newer instance called
    /// `initTransactions()`, or the coordinator aborted the transaction when it timed out.
    Fenced {
        reason: String,
    },
    /// The committed offsets, and every partition with its reset position (`None` under
    /// `auto.offset.reset=none`: there is none).
    Group {
        committed: Vec<(TopicPartition, u64)>,
        partitions: Vec<(TopicPartition, Option<u64>)>,
    },
    /// The config topic record is written.
    ConnectConfigWritten,
    /// What the status topic says of a connector, and what the config topic says of it.
    ConnectStatus {
        state: ConnectorState,
        config: ConnectorConfigRecord,
    },
}

/// Kafka Connect's REST API for the one connector the model runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RestRequest {
    /// `PUT /connectors/<name>/stop`: stop the tasks gracefully; the target state STOPPED is
    /// stored in the config topic.
    Stop,
    /// `PUT /connectors/<name>/resume`.
    Resume,
    /// `DELETE /connectors/<name>/offsets` (KIP-875; the connector must be STOPPED).
    DeleteOffsets,
    /// `GET /connectors/<name>/status`.
    Status,
    /// `POST /connectors/<name>/tasks/0/restart`.
    RestartTask,
    /// `PUT /connectors/<name>/config` with the connector's configuration version `version`
    /// (the scenario's `connector_config` step: a new `table.include.list`).
    PutConfig { version: u8 },
}

impl RestRequest {
    /// The call as an HTTP client makes it on connector `connector`, for people.
    pub fn call(&self, connector: &str) -> String {
        match self {
            RestRequest::Stop => format!("PUT /connectors/{connector}/stop"),
            RestRequest::Resume => format!("PUT /connectors/{connector}/resume"),
            RestRequest::DeleteOffsets => format!("DELETE /connectors/{connector}/offsets"),
            RestRequest::Status => format!("GET /connectors/{connector}/status"),
            RestRequest::RestartTask => format!("POST /connectors/{connector}/tasks/0/restart"),
            RestRequest::PutConfig { .. } => format!("PUT /connectors/{connector}/config"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RestReply {
    Ok,
    Status { state: ConnectorState },
    Error(String),
}

/// A connector's task state as `GET /connectors/<name>/status` shows it (Kafka Connect's
/// `AbstractStatus.State`, with the `STOPPED` of KIP-875), spelled as the REST API spells it.
/// It lives here, with the REST protocol, because both ends of that protocol read it: the
/// Connect worker ([`crate::components::connect`]) reports it, the operator acts on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConnectorState {
    /// No task runs and none failed: the worker has not (re)started it yet.
    Unassigned,
    Running,
    /// The task is stopping gracefully (its final offset commit under way).
    Stopping,
    /// The connector's target state is STOPPED: no task runs.
    Stopped,
    /// The task failed and waits for `POST /connectors/<name>/tasks/0/restart`.
    Failed,
}

impl ConnectorState {
    /// The REST API's spelling (`RUNNING`).
    pub fn name(self) -> &'static str {
        match self {
            ConnectorState::Unassigned => "UNASSIGNED",
            ConnectorState::Running => "RUNNING",
            ConnectorState::Stopping => "STOPPING",
            ConnectorState::Stopped => "STOPPED",
            ConnectorState::Failed => "FAILED",
        }
    }
}

impl std::fmt::Display for ConnectorState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Hashed as its REST name, as the string it replaced was: the fingerprints of the exhaustive
/// lens's states (a status reply in flight is part of one) stay what they were.
impl std::hash::Hash for ConnectorState {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state);
    }
}

/// Harness actions delivered as messages so both lenses can drive them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Control {
    /// `pg_promote()` on the standby.
    Promote,
    /// The application runs scripted workload transaction `index` now.
    RunScripted { index: usize },
    /// The operator learns that a promotion happened and runs the failover gate.
    FailoverHappened,
    /// The operator drops and creates the connector's slot again.
    RecreateSlot { connector: u8 },
    /// The operator runs the recovery runbook: stop, delete offsets, drop the slot, resume.
    Rebuild { connector: u8 },
    /// The server writes this many bytes of WAL in a database nobody captures.
    WalBurst { bytes: u64 },
    /// `CHECKPOINT`.
    Checkpoint,
    /// Connector `connector`'s task dies (its worker lives on).
    KillTask { connector: u8 },
    /// `pg_ctl stop -m fast`: walsenders end, a shutdown checkpoint is written, and the control
    /// file says the server was shut down cleanly, so the next start is no crash recovery.
    Shutdown,
    /// The operator advances the connector's slot by hand (`pg_replication_slot_advance`) to
    /// `to`, or to the WAL end.
    AdvanceSlot { connector: u8, to: Option<Lsn> },
    /// Kafka: a delayed produce request leaves a transaction open that the coordinator does not
    /// know (a hanging transaction).
    HangTransaction,
    /// Kafka: `kafka-transactions.sh abort` of every hanging transaction.
    AbortHangingTransactions,
    /// A Connect worker of a group shuts down cleanly (SIGTERM): its tasks stop, it leaves the
    /// group, and the process ends.
    ShutdownWorker,
    /// Kafka's group coordinator: worker `worker` has not been heard from for its
    /// `session.timeout.ms` (a pause that outlasted its session, as the harness follows an
    /// exhaustive path's pause): as if its member's session timer fired.
    GroupSessionOutlasted { worker: Node },
    /// PostgreSQL: the walsender of `client`'s replication connection has had no reply for
    /// `wal_sender_timeout` (its client paused, or cut off behind a partition): it ends
    /// (`WalSndCheckTimeOut`, `walsender.c`).
    WalSenderTimeout { client: Node },
    /// The operator puts connector `connector`'s configuration version `version` (`PUT
    /// /connectors/<name>/config`), a scripted `connector_config` step.
    UpdateConfig { connector: u8, version: u8 },
}

/// A Connect worker's request to the group coordinator (`AbstractCoordinator`'s JoinGroup,
/// SyncGroup, Heartbeat and LeaveGroup, with `WorkerCoordinator`'s metadata).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GroupRequest {
    /// JoinGroup. `member` is `None` for a worker joining anew (the coordinator gives it its
    /// member id); `owned` is its metadata: the connectors whose task it runs now (its current
    /// assignment, `ConnectProtocol`'s `ExtendedWorkerState`). The worker's
    /// `session.timeout.ms` and `rebalance.timeout.ms` travel with it, as in the real request.
    Join { member: Option<u32>, owned: Vec<u8>, session_timeout_ms: u64, rebalance_timeout_ms: u64 },
    /// SyncGroup for `generation`; the leader's carries every member's assignment.
    Sync { member: u32, generation: u32, assignments: Option<Vec<(u32, GroupAssignment)>> },
    /// Heartbeat (every `heartbeat.interval.ms`).
    Heartbeat { member: u32, generation: u32 },
    /// LeaveGroup (a clean shutdown).
    Leave { member: u32 },
}

/// The group coordinator's answer to a [`GroupRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GroupReply {
    /// The join completed: generation `generation`, led by `leader`. The leader's answer
    /// carries every member's metadata (`members`: id, process, owned connectors); the
    /// others' is empty.
    Joined {
        member: u32,
        generation: u32,
        leader: u32,
        members: Vec<(u32, Node, Vec<u8>)>,
    },
    /// The assignment of the member for `generation`.
    Synced {
        generation: u32,
        assignment: GroupAssignment,
        /// The leader's process (`ExtendedAssignment.leaderUrl`): where REST calls only the
        /// leader serves are forwarded.
        leader: Node,
        /// The config topic as the leader read it to assign (`ExtendedAssignment.offset`: a
        /// member behind it reads the topic that far before it starts anything).
        config: Vec<ConnectorConfigRecord>,
    },
    Heartbeat,
    /// `REBALANCE_IN_PROGRESS` or `ILLEGAL_GENERATION`: join again, keeping the member id.
    Rejoin,
    /// `UNKNOWN_MEMBER_ID`: the coordinator removed the member (its session expired); join
    /// again as a new member.
    UnknownMember,
}

/// What the leader's assignor gives one member (`ExtendedAssignment`, incremental cooperative:
/// what is new to it, what it must stop, and the delay before the next rebalance).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GroupAssignment {
    /// Connectors whose task it starts (each connector has one task, and its connector
    /// instance goes with it).
    pub assigned: Vec<u8>,
    /// Connectors whose task it stops.
    pub revoked: Vec<u8>,
    /// `scheduled.rebalance.max.delay.ms` left before lost tasks are reassigned: every member
    /// rejoins after it (0: no rebalance is scheduled).
    pub delay_ms: u64,
}

/// `reconnect.backoff.max.ms` of the Kafka clients.
pub const KAFKA_RECONNECT_BACKOFF_MS: u64 = 1_000;

/// `auto.offset.reset`: where a consumer starts in a partition its group has no committed
/// offset for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OffsetReset {
    Earliest,
    Latest,
    None,
}

impl OffsetReset {
    pub const ALL: [OffsetReset; 3] = [OffsetReset::Earliest, OffsetReset::Latest, OffsetReset::None];

    /// A plain consumer group's default (`ConsumerConfig`); a Kafka Connect sink connector's
    /// worker sets `earliest`.
    pub const CONSUMER_DEFAULT: OffsetReset = OffsetReset::Latest;

    pub fn name(self) -> &'static str {
        match self {
            OffsetReset::Earliest => "earliest",
            OffsetReset::Latest => "latest",
            OffsetReset::None => "none",
        }
    }
}

/// An offsets-topic write inside a transaction ([`KafkaRequest::WriteSourceOffsetInTransaction`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TransactionalOffset {
    pub connector: String,
    pub offset: Option<SourceOffset>,
    pub producer: ProducerEpoch,
}

/// A transactional producer's identity at the broker (KIP-98): its producer id and epoch. A
/// request carrying an older epoch than the coordinator's is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProducerEpoch {
    pub producer_id: u32,
    pub epoch: u16,
}

/// A consumer's `isolation.level` (`ConsumerConfig`; default `read_uncommitted`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IsolationLevel {
    /// Everything up to the high watermark, records of open and aborted transactions included.
    #[default]
    ReadUncommitted,
    /// Only below the last stable offset, and no record of an aborted transaction.
    ReadCommitted,
}

impl IsolationLevel {
    pub const ALL: [IsolationLevel; 2] = [IsolationLevel::ReadUncommitted, IsolationLevel::ReadCommitted];

    pub fn name(self) -> &'static str {
        match self {
            IsolationLevel::ReadUncommitted => "read_uncommitted",
            IsolationLevel::ReadCommitted => "read_committed",
        }
    }
}
