//! The data that flows from the connector through Kafka to the sink: Debezium change events,
//! their source offsets, and the records that carry them.
//!
//! Field names follow Debezium's envelope and offset keys (`SourceInfo`,
//! `PostgresOffsetContext.getOffset`, `EventDispatcher.BufferingSnapshotChangeRecordReceiver`):
//! `op` `r`/`c`/`u`/`d`, `source.lsn`, `source.txId`, `source.snapshot`
//! `first`/`true`/`last`/`false`, and the offset keys `lsn`, `lsn_proc`, `lsn_commit`, `txId`,
//! `snapshot`, `last_snapshot_record`, `snapshot_completed`.

use crate::core::ids::{Key, Row, TableId, Xid};
use crate::core::lsn::Lsn;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Debezium's `op` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Op {
    /// `r`: a snapshot read.
    #[serde(rename = "r")]
    Read,
    /// `c`: an insert.
    #[serde(rename = "c")]
    Create,
    /// `u`: an update.
    #[serde(rename = "u")]
    Update,
    /// `d`: a delete.
    #[serde(rename = "d")]
    Delete,
    /// `m`: a logical decoding message (`pg_logical_emit_message`) on `<topic.prefix>.message`
    /// (`PostgresStreamingChangeEventSource.processReplicationMessages`,
    /// `LogicalDecodingMessageMonitor`). It is no row change: `before` and `after` are empty,
    /// `source.lsn` is the message's LSN, and the record's key is its prefix
    /// ([`message_key`]).
    #[serde(rename = "m")]
    Message,
}

impl Op {
    pub fn code(self) -> char {
        match self {
            Op::Read => 'r',
            Op::Create => 'c',
            Op::Update => 'u',
            Op::Delete => 'd',
            Op::Message => 'm',
        }
    }
}

/// `source.snapshot`: where a record sits in a snapshot. Only the first and the last records of
/// a snapshot are marked; streamed records say `false`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotMarker {
    First,
    #[serde(rename = "true")]
    Middle,
    /// The last record of a snapshot (also for a one-row snapshot, whose only record is last).
    Last,
    #[serde(rename = "false")]
    Streamed,
    /// A row of an incremental snapshot's chunk (`source.snapshot = incremental`,
    /// `PostgresOffsetContext.incrementalSnapshotEvents`): an `op=r` read emitted among the
    /// streamed changes when its chunk's window closes. No record of an incremental snapshot is
    /// first or last.
    Incremental,
    /// A row of a blocking snapshot (`ChangeEventSourceCoordinator.doBlockingSnapshot`). On the
    /// wire its `source.snapshot` is `first`, `true` or `last`, as an initial snapshot's (only
    /// the offset's `snapshot=BLOCKING` tells them apart); the model marks it so that the judges
    /// read it as what it is: a row read at the current time while streaming is paused, not a
    /// snapshot at the source position its `source.lsn` names.
    Blocking,
}

impl SnapshotMarker {
    pub fn is_snapshot(self) -> bool {
        self != SnapshotMarker::Streamed
    }

    pub fn is_last(self) -> bool {
        self == SnapshotMarker::Last
    }
}

/// Who wrote a record (`source.connector`): the Debezium connector, or the plain-read loader of
/// the wall-clock handoff.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    Postgresql,
    Loader,
}

/// The `source` block of a change event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SourceInfo {
    pub connector: Origin,
    pub table: TableId,
    /// For a snapshot record, the snapshot's LSN; for a change, the change's LSN.
    pub lsn: Lsn,
    #[serde(rename = "txId")]
    pub tx_id: Option<Xid>,
    pub snapshot: SnapshotMarker,
    /// Commit time of a change, read time of a snapshot row (simulated milliseconds).
    pub ts_ms: u64,
}

/// A Debezium change event (the record value). A `None` value in a [`SourceRecord`] is a
/// tombstone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ChangeEvent {
    pub op: Op,
    pub before: Option<Row>,
    pub after: Option<Row>,
    pub source: SourceInfo,
}

impl ChangeEvent {
    /// An `op=r` snapshot read of `row`, at the snapshot's `lsn`.
    pub fn snapshot_read(
        connector: Origin,
        table: TableId,
        row: Row,
        lsn: Lsn,
        snapshot: SnapshotMarker,
        ts_ms: u64,
    ) -> ChangeEvent {
        ChangeEvent {
            op: Op::Read,
            before: None,
            after: Some(row),
            source: SourceInfo { connector, table, lsn, tx_id: None, snapshot, ts_ms },
        }
    }

    /// The row version the event carries: `after.version`, or for a delete `before.version`
    /// (present with `REPLICA IDENTITY FULL` only).
    pub fn version(&self) -> Option<u32> {
        self.after.or(self.before).map(|row| row.version)
    }
}

/// A Kafka topic the model knows.
///
/// `repr(u16)`: the tag takes the two bytes before the `u16` payloads, so a `Topic::Change` or a
/// `Topic::Routed` has no padding byte. With a one-byte tag the byte after it was padding, never
/// written, and the optimiser compares the whole four-byte value at once where the code asks
/// whether the payload is at least [`TableId::MESSAGE_OUTBOXES`]: correct, but memcheck cannot
/// tell that the answer does not depend on the padding and reports a jump on an uninitialised
/// value (`cargo xtask valgrind-sweep`, docs/memory-safety.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[repr(u16)]
pub enum Topic {
    /// `<topic.prefix>.<schema>.<table>`: the change topic of a captured table.
    Change(TableId),
    /// `__debezium-heartbeat.<topic.prefix>`: heartbeat records, which carry the connector's
    /// current offset so that Connect stores it (Debezium's `io.debezium.heartbeat`).
    Heartbeat,
    /// `<topic.prefix>.message`: the logical decoding messages Debezium captured (`op=m`),
    /// keyed by prefix (`LogicalDecodingMessageMonitor`).
    Message,
    /// A topic a transform routed records to (the outbox `EventRouter`'s
    /// `outbox.event.<aggregatetype>`): the index of its name among the connector's routed topics.
    Routed(u16),
    /// Another connector's heartbeat topic (`__debezium-heartbeat.<its topic.prefix>`): the index
    /// of its `[[connector]]` entry, 1 or more (the first connector's is [`Topic::Heartbeat`]).
    HeartbeatOf(u8),
    /// Another connector's logical decoding message topic (`<its topic.prefix>.message`), as
    /// [`Topic::HeartbeatOf`].
    MessageOf(u8),
    /// A Kafka signal channel's topic (`signal.kafka.topic`, Debezium's `KafkaSignalChannel`):
    /// the index of its name among the scenario's signal topics. Its records are signals an
    /// operator produced (partition 0, the only one the channel reads), keyed by the signal's
    /// number in the scenario; the connector reads the signal's content by that number.
    Signal(u16),
}

impl Topic {
    /// Connector `connector`'s heartbeat topic.
    pub fn heartbeat(connector: u8) -> Topic {
        if connector == 0 { Topic::Heartbeat } else { Topic::HeartbeatOf(connector) }
    }

    /// Connector `connector`'s logical decoding message topic.
    pub fn message(connector: u8) -> Topic {
        if connector == 0 { Topic::Message } else { Topic::MessageOf(connector) }
    }

    pub fn is_heartbeat(self) -> bool {
        matches!(self, Topic::Heartbeat | Topic::HeartbeatOf(_))
    }

    pub fn is_message(self) -> bool {
        matches!(self, Topic::Message | Topic::MessageOf(_))
    }

    pub fn is_signal(self) -> bool {
        matches!(self, Topic::Signal(_))
    }
}

/// The key of a logical decoding message's record: its prefix (`{"prefix": …}`), as a stable
/// number (FNV-1a of the prefix's bytes, non-negative), so that equal prefixes share a key and
/// so a partition, as Kafka's key hashing gives them.
pub fn message_key(prefix: &str) -> Key {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in prefix.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash >> 1) as Key
}

/// Where a record with the model's key `key` goes when the producer partitions by that key: the
/// default partitioner's hash of the key as the model serialises it (`{"id":17}`), made
/// positive. A record that keeps another number in its `key` (a logical message carrying an
/// outbox event keeps the event's) is given this placement for the key its Kafka key stands for,
/// so that it lands where a record keyed by that key would.
pub fn key_placement(key: Key) -> Placement {
    Placement::KeyHash((murmur2(format!("{{\"id\":{key}}}").as_bytes()) & 0x7fff_ffff) as u32)
}

/// `snapshot` offset key: which kind of snapshot is in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SnapshotKind {
    Initial,
    Blocking,
    Incremental,
}

/// `messageType` offset key: the kind of the last message processed (`ReplicationMessage.Operation`,
/// stored since Debezium 2.2, DBZ-5915). The restart search compares it with what arrives at the
/// stored LSN (`WalPositionLocator.resumeFromLsn`): a DML arriving at the LSN of a stored COMMIT is
/// a new transaction's first change, not a replay (debezium/dbz#76); a stored BEGIN or COMMIT at
/// the LSN the next transaction's BEGIN and first change share resumes at that BEGIN (DBZ-5915,
/// DBZ-6204); a stored non-transactional MESSAGE resumes at the first LSN received (dbz#1379).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum MessageType {
    Insert,
    Update,
    Delete,
    Commit,
    Begin,
    /// A logical decoding message (`pg_logical_emit_message`), transactional or not.
    Message,
}

impl MessageType {
    /// The name Debezium writes in the offset (`Operation.toString()`).
    pub fn name(self) -> &'static str {
        match self {
            MessageType::Insert => "INSERT",
            MessageType::Update => "UPDATE",
            MessageType::Delete => "DELETE",
            MessageType::Commit => "COMMIT",
            MessageType::Begin => "BEGIN",
            MessageType::Message => "MESSAGE",
        }
    }

    /// A row change (INSERT, UPDATE, DELETE).
    pub fn is_dml(self) -> bool {
        matches!(self, MessageType::Insert | MessageType::Update | MessageType::Delete)
    }
}

impl SnapshotKind {
    /// The value Debezium writes in the offset's `snapshot` key.
    pub fn name(self) -> &'static str {
        match self {
            SnapshotKind::Initial => "INITIAL",
            SnapshotKind::Blocking => "BLOCKING",
            SnapshotKind::Incremental => "INCREMENTAL",
        }
    }
}

/// Debezium PostgreSQL's source offset (`PostgresOffsetContext.getOffset`): the value Kafka
/// Connect stores in the offsets topic under the partition `{"server": <topic.prefix>}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SourceOffset {
    /// LSN of the event the record came from (snapshot records: the snapshot's LSN).
    pub lsn: Option<Lsn>,
    /// The last completely processed LSN; absent in snapshot records.
    pub lsn_proc: Option<Lsn>,
    /// End LSN of the last COMMIT processed (not of the current transaction).
    pub lsn_commit: Option<Lsn>,
    #[serde(rename = "txId")]
    pub tx_id: Option<Xid>,
    pub ts_usec: u64,
    /// The last message processed (streaming records only).
    #[serde(rename = "messageType")]
    pub message_type: Option<MessageType>,
    pub snapshot: Option<SnapshotKind>,
    pub last_snapshot_record: bool,
    pub snapshot_completed: bool,
    /// `lsn_events_processed` (3.7, debezium/dbz#1554): how many DML events at `lsn` were
    /// processed (a COPY or multi-row INSERT gives several one LSN); stored only when above 0,
    /// reset by a COMMIT (`PostgresOffsetContext.incrementLsnEventsProcessed`,
    /// `resetLsnEventsProcessed`). Releases before 3.7 never write it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lsn_events_processed: u32,
    /// The incremental snapshot's context while one runs (`AbstractIncrementalSnapshotContext
    /// .store`): the keys `incremental_snapshot_collections`,
    /// `incremental_snapshot_primary_key` and `incremental_snapshot_maximum_key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incremental: Option<IncrementalOffset>,
}

/// The incremental snapshot's context as an offset stores it (`AbstractIncrementalSnapshotContext
/// .store`, read back by `init`): the collections still to snapshot, the current one first
/// (`incremental_snapshot_collections`), the key of the last snapshot row emitted
/// (`incremental_snapshot_primary_key`: a restart reads the next chunk after it) and the current
/// table's largest key when its snapshot began (`incremental_snapshot_maximum_key`). Kept as a
/// few numbers: at most [`IncrementalOffset::MAX_COLLECTIONS`] collections queued, keys 0 for
/// none (a key is 1 or more).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct IncrementalOffset {
    collections: [TableId; IncrementalOffset::MAX_COLLECTIONS],
    count: u8,
    /// `incremental_snapshot_primary_key` (0: no row emitted yet for the current table).
    pub primary_key: Key,
    /// `incremental_snapshot_maximum_key` (0: not read yet).
    pub maximum_key: Key,
    /// Per collection, the scripted signal that queued it (its row's key; 0: none known), whose
    /// data holds the collection's `additional-conditions` filter: the model's reference to what
    /// `incremental_snapshot_collections` stores as text.
    #[serde(default, skip_serializing_if = "no_signals")]
    signals: [u8; IncrementalOffset::MAX_COLLECTIONS],
}

fn no_signals(signals: &[u8; IncrementalOffset::MAX_COLLECTIONS]) -> bool {
    signals.iter().all(|signal| *signal == 0)
}

/// The derived hash, with the signals only when one is known: offsets written before they were
/// kept keep their hashes (and every trace hash that contains them).
impl std::hash::Hash for IncrementalOffset {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.collections.hash(state);
        self.count.hash(state);
        self.primary_key.hash(state);
        self.maximum_key.hash(state);
        if !no_signals(&self.signals) {
            self.signals.hash(state);
        }
    }
}

impl IncrementalOffset {
    /// The most collections one incremental snapshot queues in the model.
    pub const MAX_COLLECTIONS: usize = 8;

    pub fn new(collections: &[TableId], primary_key: Option<Key>, maximum_key: Option<Key>) -> IncrementalOffset {
        let mut stored = [TableId::default(); IncrementalOffset::MAX_COLLECTIONS];
        let count = collections.len().min(IncrementalOffset::MAX_COLLECTIONS);
        stored[..count].copy_from_slice(&collections[..count]);
        IncrementalOffset {
            collections: stored,
            count: count as u8,
            primary_key: primary_key.unwrap_or(0),
            maximum_key: maximum_key.unwrap_or(0),
            signals: [0; IncrementalOffset::MAX_COLLECTIONS],
        }
    }

    /// From the collections still to snapshot, each with the signal that queued it.
    pub fn of_queue(queue: &[(TableId, u8)], primary_key: Option<Key>, maximum_key: Option<Key>) -> IncrementalOffset {
        let mut offset = IncrementalOffset::new(&[], primary_key, maximum_key);
        for (at, (table, signal)) in queue.iter().take(IncrementalOffset::MAX_COLLECTIONS).enumerate() {
            offset.collections[at] = *table;
            offset.signals[at] = *signal;
            offset.count += 1;
        }
        offset
    }

    /// The signal that queued each collection still to snapshot (0: none known).
    pub fn signals(&self) -> &[u8] {
        &self.signals[..usize::from(self.count)]
    }

    /// The collections still to snapshot, the current one first.
    pub fn collections(&self) -> &[TableId] {
        &self.collections[..usize::from(self.count)]
    }

    pub fn primary_key(&self) -> Option<Key> {
        Some(self.primary_key).filter(|key| *key != 0)
    }

    pub fn maximum_key(&self) -> Option<Key> {
        Some(self.maximum_key).filter(|key| *key != 0)
    }
}

fn is_zero(count: &u32) -> bool {
    *count == 0
}

/// The derived hash, field by field, with `lsn_events_processed` only above 1: the locator acts
/// on the count only when it is above 1 (`WalPositionLocator.resumeFromLsn`), so 0 and 1 are one
/// position to it, and offsets written before the count existed keep their hashes (and every trace
/// hash that contains them).
impl std::hash::Hash for SourceOffset {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.lsn.hash(state);
        self.lsn_proc.hash(state);
        self.lsn_commit.hash(state);
        self.tx_id.hash(state);
        self.ts_usec.hash(state);
        self.message_type.hash(state);
        self.snapshot.hash(state);
        self.last_snapshot_record.hash(state);
        self.snapshot_completed.hash(state);
        if self.lsn_events_processed > 1 {
            self.lsn_events_processed.hash(state);
        }
        if let Some(incremental) = &self.incremental {
            incremental.hash(state);
        }
    }
}

impl SourceOffset {
    /// `isInitialSnapshotRunning()`: an INITIAL snapshot that is not completed.
    pub fn initial_snapshot_running(&self) -> bool {
        self.snapshot == Some(SnapshotKind::Initial) && !self.snapshot_is_completed()
    }

    /// A snapshot counts as completed if `last_snapshot_record` or `snapshot_completed` is set.
    pub fn snapshot_is_completed(&self) -> bool {
        self.last_snapshot_record || self.snapshot_completed
    }

    /// The LSN Debezium confirms to the slot from this offset: `lsn_commit ?? lsn_proc`.
    ///
    /// Out of line on purpose, as is [`SourceOffset::resume_lsn`]: a miscompilation guard (see
    /// docs/miscompilation.md). Inlined into `stored.and_then(|offset| offset.lsn_to_confirm())`
    /// on an `Option<SourceOffset>`, rustc 1.95 (LLVM 22) reads `lsn_commit`'s discriminant before
    /// it has tested that the offset is `Some`, and uses it as an index to choose between the two
    /// fields' addresses (llvm/llvm-project#208611, rust-lang/rust#159035). A `None` offset leaves
    /// those bytes uninitialised, so the address is wild: `handoff run` crashed with SIGSEGV. A
    /// call is never executed speculatively, so here the discriminant is read only from a
    /// `SourceOffset` that exists; `cargo xtask ir-scan` checks every build for the pattern.
    #[inline(never)]
    pub fn lsn_to_confirm(&self) -> Option<Lsn> {
        self.lsn_commit.or(self.lsn_proc)
    }

    /// Where streaming resumes: `lsn_proc` if stored, else `lsn`. Out of line for the reason
    /// [`SourceOffset::lsn_to_confirm`] gives.
    #[inline(never)]
    pub fn resume_lsn(&self) -> Option<Lsn> {
        self.lsn_proc.or(self.lsn)
    }
}

impl fmt::Display for SourceOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(lsn) = self.lsn {
            parts.push(format!("lsn={lsn}"));
        }
        if let Some(lsn) = self.lsn_proc {
            parts.push(format!("lsn_proc={lsn}"));
        }
        if let Some(lsn) = self.lsn_commit {
            parts.push(format!("lsn_commit={lsn}"));
        }
        if let Some(kind) = self.snapshot {
            parts.push(format!("snapshot={}", kind.name()));
            parts.push(format!("snapshot_completed={}", self.snapshot_is_completed()));
        }
        if let Some(incremental) = &self.incremental {
            parts.push(format!("incremental_snapshot_collections={}", incremental.count));
            if let Some(key) = incremental.primary_key() {
                // A nullable key column's NULL ([`crate::core::ids::UniqueColumn::NULL`]).
                let key = crate::core::ids::UniqueColumn::text(key);
                parts.push(format!("incremental_snapshot_primary_key={key}"));
            }
        }
        if parts.is_empty() {
            parts.push("empty".into());
        }
        write!(f, "{{{}}}", parts.join(", "))
    }
}

/// A record a source task hands to Connect: topic, key, value (None = tombstone) and the source
/// offset Connect will store once the record is acknowledged.
///
/// A record routed by the outbox `EventRouter` ([`Topic::Routed`]) keeps the event's id as its
/// `key` and the outbox row's change as its `value` (the row carries `aggregateid`, `type` and
/// what the payload is made of): what a consumer reads of it (the `id` header, the key
/// `aggregateid`, the payload) is derived from them. Its Kafka key is the chain's, which chose its
/// `placement`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceRecord {
    pub topic: Topic,
    pub key: Key,
    pub value: Option<ChangeEvent>,
    pub offset: SourceOffset,
    /// Where the producer puts it when a transform changed its key or set its partition; `None`:
    /// by its own key, as the connector keyed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// The derived hash, with `placement` only when a transform set it.
impl std::hash::Hash for SourceRecord {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.topic.hash(state);
        self.key.hash(state);
        self.value.hash(state);
        self.offset.hash(state);
        if let Some(placement) = self.placement {
            placement.hash(state);
        }
    }
}

/// Kafka's `Utils.murmur2`: the default partitioner's hash, which the producer (in Connect) and
/// the model's Kafka both compute.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len();
    let mut h: u32 = SEED ^ length as u32;
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for chunk in chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Where the producer puts a record whose key a transform changed: the default partitioner over
/// the key's bytes, or the partition the transform set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Placement {
    /// `toPositive(murmur2(keyBytes))`: Kafka takes it modulo the topic's partitions
    /// (`BuiltInPartitioner.partitionForKey`).
    KeyHash(u32),
    /// The record's own partition.
    Partition(u32),
}

/// A (topic, partition) pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TopicPartition {
    pub topic: Topic,
    pub partition: u32,
}

/// A record as stored in a partition log and as fetched by a consumer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KafkaRecord {
    pub tp: TopicPartition,
    pub offset: u64,
    pub key: Key,
    pub value: Option<ChangeEvent>,
}
