//! Kafka: partition logs keyed by record key, Connect's offsets topic, consumer-group offsets
//! (Apache Kafka: `BuiltInPartitioner.partitionForKey`, `KafkaOffsetBackingStore` for the offsets
//! topic, `KafkaConsumer` and `ConsumerConfig` for the group).
//!
//! - A record's partition is `toPositive(murmur2(keyBytes)) % partitions`, the default
//!   partitioner, over the key as the JSON converter writes it (`{"id":17}`); order holds per
//!   partition only.
//! - The offsets topic is compacted: for each connector the last value written wins, and a `None`
//!   value is a tombstone (an offsets reset).
//! - A fetch is a long poll: it is answered as soon as one of its partitions has data.
//!
//! - Transactions (KIP-98; reference kafka-connect.md §3): the transaction coordinator keeps, per
//!   `transactional.id`, the producer id, its epoch and the open transaction
//!   (`TransactionMetadata`). `InitProducerId` bumps the epoch, fencing every older instance, and
//!   aborts a transaction the id left open (`TransactionCoordinator.prepareInitProducerIdTransit`:
//!   Ongoing → PrepareEpochFence → PrepareAbort; the client's retry on CONCURRENT_TRANSACTIONS is
//!   folded into one answer). A produce or `EndTxn` with an older epoch is refused (fenced).
//!   `EndTxn` writes a control record (a COMMIT or ABORT marker) on every partition the
//!   transaction wrote to, which takes an offset of its own; offsets written inside the
//!   transaction reach the offsets topic's committed view only with the commit. Every
//!   `transaction.abort.timed.out.transaction.cleanup.interval.ms` the coordinator aborts, with an
//!   epoch fence, the transactions open longer than their `transaction.timeout.ms`
//!   (`abortTimedOutTransactions`).
//! - Fetches by `isolation.level` (§3.2): control records are never given to a consumer;
//!   `read_committed` reads only below the last stable offset (the first offset of the earliest
//!   open transaction on the partition) and drops records of aborted transactions
//!   (`CompletedFetch` with the aborted-transactions index).
//!
//! - Compaction of the change topics (`cleanup.policy=compact`, §6): see [`Compaction`].
//!
//! The cluster is one durable broker: with `acks=all` and enough replicas, an acknowledged write
//! survives, and the model does not crash it. Left out: time and size retention (`retention.ms`),
//! broker failures, rebalancing of the consumer group, hanging transactions (§3.3), and an open
//! transaction's offsets stalling another task's offset read (§2.2: only a task's own
//! predecessor's transaction can be open on its offsets here, and its `InitProducerId` aborts it
//! before the read).

pub mod group;

use crate::components::kafka::group::{ConnectTopics, GroupCoordinator};
use crate::core::component::{Component, Ctx, Timer};
use crate::core::event::{KafkaRecord, Placement, SourceOffset, Topic, TopicPartition};
use crate::core::ids::{Key, Node};
use crate::core::observe::{Observation, TransactionEnd};
use crate::core::protocol::{
    ConnectorConfigRecord, GroupRequest, IsolationLevel, KafkaReply, KafkaRequest, Msg, ProducerEpoch,
    TransactionalOffset,
};
use crate::core::shared::{CopyOnWrite, Fixed, Meter, Optional};
use crate::core::time::SimTime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A scenario's `[kafka]` section. The cluster's [`KafkaConfig`] adds the topics, one per
/// captured table (and the heartbeat topic), which the run derives.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KafkaSection {
    /// `num.partitions`: partitions of every change topic.
    pub partitions: u32,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms` (10 000): how often the
    /// transaction coordinator looks for transactions open past their timeout.
    pub transaction_abort_sweep_interval_ms: u64,
    /// The change topics' `cleanup.policy`: `None` is `delete` (the default, and what a topic
    /// Debezium's producer auto-creates gets), `Some` is `compact` with its settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Compaction>,
    /// The broker's `group.initial.rebalance.delay.ms` (3 000): how long the first join of an
    /// empty group waits for more members (a group of Connect workers only).
    #[serde(default = "default_group_initial_rebalance_delay_ms")]
    pub group_initial_rebalance_delay_ms: u64,
}

fn default_group_initial_rebalance_delay_ms() -> u64 {
    group::GROUP_INITIAL_REBALANCE_DELAY_MS
}

/// Log compaction of a topic (`cleanup.policy=compact`; reference kafka-connect.md §6): the
/// topic settings and the broker's cleaner backoff, with Kafka's defaults in [`Compaction::DEFAULT`].
///
/// The cleaner (`LogCleaner`, `LogCleanerManager.cleanableOffsets`, `Cleaner.shouldRetainRecord`):
/// - never touches the active segment (a segment rolls when a record arrives `segment.ms` after
///   the segment's first), anything at or above the last stable offset, or records younger than
///   `min.compaction.lag.ms`;
/// - cleans a partition when its dirty ratio (records appended since the last cleaning, over all
///   records below the cleanable end) reaches `min.cleanable.dirty.ratio`, or when a tombstone's
///   delete horizon has passed (KIP-534);
/// - keeps the latest record of each key (a key with no record since the last cleaning keeps
///   its record), drops the records of aborted transactions;
/// - keeps a tombstone (a record with a null value) until `delete.retention.ms` after the first
///   cleaning that saw it (KIP-534's delete horizon, stamped on its batch), then removes it.
///
/// The model counts records where Kafka counts bytes (the ratio's sizes), and cleans every
/// cleanable partition on each wake-up, every `log.cleaner.backoff.ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Compaction {
    /// `delete.retention.ms` (86 400 000: one day).
    pub delete_retention_ms: u64,
    /// `min.compaction.lag.ms` (0).
    pub min_compaction_lag_ms: u64,
    /// `segment.ms` (604 800 000: seven days).
    pub segment_ms: u64,
    /// `min.cleanable.dirty.ratio` (0.5), in thousandths.
    pub min_cleanable_dirty_ratio_per_mille: u32,
    /// The broker's `log.cleaner.backoff.ms` (15 000): how long the cleaner sleeps when it
    /// found nothing to clean.
    pub log_cleaner_backoff_ms: u64,
}

impl Compaction {
    /// Kafka's defaults (`LogConfig`, `CleanerConfig`).
    pub const DEFAULT: Compaction = Compaction {
        delete_retention_ms: 86_400_000,
        min_compaction_lag_ms: 0,
        segment_ms: 604_800_000,
        min_cleanable_dirty_ratio_per_mille: 500,
        log_cleaner_backoff_ms: 15_000,
    };
}

/// `transaction.abort.timed.out.transaction.cleanup.interval.ms`'s default
/// (`TransactionStateManagerConfig`).
pub const TRANSACTION_ABORT_SWEEP_INTERVAL_MS: u64 = 10_000;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KafkaConfig {
    /// Partitions of every change topic (`num.partitions` when Debezium auto-creates them).
    pub partitions: u32,
    /// The change topics, created before the run.
    pub topics: Vec<Topic>,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub transaction_abort_sweep_interval_ms: u64,
    /// How the change topics are compacted, if they are (`cleanup.policy=compact`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Compaction>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct PendingFetch {
    client: Node,
    request_id: u64,
    positions: Vec<(TopicPartition, u64)>,
    max_records: u32,
    isolation: IsolationLevel,
}

/// The transaction coordinator's state of one `transactional.id` (`TransactionMetadata`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TransactionState {
    pub producer: ProducerEpoch,
    /// The producer's `transaction.timeout.ms`, sent with `InitProducerId`.
    pub timeout_ms: u64,
    /// The transaction in progress (Ongoing), if any; Empty, CompleteCommit and CompleteAbort
    /// are alike here: the next write begins a new one.
    pub open: Option<OpenTransaction>,
    /// The sequence of the last batch appended for the current epoch: the producer is idempotent
    /// (`enable.idempotence=true`), so a batch sent again after a lost connection is not
    /// appended twice (the broker answers DUPLICATE_SEQUENCE, which the producer takes as
    /// success). The model's sequence is the client's request id, increasing per instance.
    #[serde(default)]
    pub last_sequence: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OpenTransaction {
    /// When its first partition was added (the timeout counts from there).
    pub started_at: SimTime,
    /// The partitions it wrote records to, each with how many.
    pub partitions: Vec<(TopicPartition, usize)>,
    /// The source offsets it wrote to the offsets topic, in order.
    pub offsets: Vec<(String, Option<SourceOffset>)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Kafka {
    pub config: Fixed<KafkaConfig>,
    /// Partition logs (shared between states until a produce appends).
    pub logs: CopyOnWrite<BTreeMap<TopicPartition, PartitionLog>>,
    /// The offsets topic after compaction: connector → offset.
    pub source_offsets: CopyOnWrite<BTreeMap<String, SourceOffset>>,
    /// Committed consumer-group offsets.
    pub groups: CopyOnWrite<BTreeMap<String, BTreeMap<TopicPartition, u64>>>,
    /// The transaction coordinator: its state per `transactional.id` (durable, in
    /// `__transaction_state`).
    pub transactions: CopyOnWrite<BTreeMap<String, TransactionState>>,
    /// The next producer id the coordinator hands out.
    next_producer_id: u32,
    pending_fetches: Vec<PendingFetch>,
    /// The Connect workers' group coordinator, when the workers form a group
    /// (`[connect] workers` above 1).
    pub group: Optional<GroupCoordinator>,
}

pub use crate::core::event::murmur2;

/// Records per segment of a partition log.
const SEGMENT_RECORDS: usize = 512;

/// One partition's log, in fixed-size segments (as Kafka's own log is): appending never moves
/// the records already there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PartitionLog {
    segments: Vec<Vec<KafkaRecord>>,
    len: usize,
    /// What transactions wrote here; `None` until the first transactional record.
    txn: Option<Box<TxnIndex>>,
    /// What the cleaner needs and did, on a compacted topic's partition; `None` elsewhere.
    cleaning: Option<Box<Cleaning>>,
    /// When the last record was appended (simulated ms; `None`: never): what a consumer of the
    /// heartbeat topic reads as the heartbeat's age. A meter, never acted on.
    last_append_ms: Meter<Option<u64>>,
}

/// A compacted partition's cleaning state (the segments' timestamps and bases, the cleaner's
/// checkpoint, the delete horizons of the tombstones it has seen).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Cleaning {
    /// Each offset's append time (the record's timestamp).
    appended_at_ms: Vec<u64>,
    /// The offsets the cleaner removed: no consumer is given them again.
    removed: Vec<bool>,
    /// The active segment's base offset (`segment.ms` rolls it when a record arrives).
    active_base: u64,
    /// The cleaner's checkpoint (`cleaner-offset-checkpoint`): below it the log is clean.
    first_dirty: u64,
    /// Tombstones a cleaning has seen: (offset, delete horizon in ms).
    horizons: Vec<(u64, u64)>,
}

/// What one cleaning of a partition removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cleaned {
    /// Records removed.
    pub removed: u32,
    /// The removed records that carried a delete: (offset, key, whether a tombstone; otherwise
    /// an `op=d` change event).
    pub deletes: Vec<(u64, Key, bool)>,
    /// Tombstones that got their delete horizon in this cleaning: (offset, key, horizon).
    pub horizons: Vec<(u64, Key, SimTime)>,
}

/// A partition's transactional bookkeeping: which records are transactional and whose, where the
/// markers are, which transactions are open and which were aborted (the producer state and the
/// aborted-transaction index, `.txnindex`, of a Kafka partition).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct TxnIndex {
    /// Transactional data records: (offset, producer id), by offset.
    records: Vec<(u64, u32)>,
    /// Offsets of control records (COMMIT / ABORT markers), ascending. A marker's slot in the
    /// segments holds a placeholder record nobody reads.
    markers: Vec<u64>,
    /// Open transactions: (producer id, first offset).
    open: Vec<(u32, u64)>,
    /// Aborted transactions: (producer id, first offset, marker offset).
    aborted: Vec<(u32, u64, u64)>,
}

impl TxnIndex {
    /// The last stable offset, capped by the log end.
    fn lso(&self, len: u64) -> u64 {
        self.open.iter().map(|(_, first)| *first).min().unwrap_or(len).min(len)
    }

    fn is_marker(&self, offset: u64) -> bool {
        self.markers.binary_search(&offset).is_ok()
    }

    fn producer_of(&self, offset: u64) -> Option<u32> {
        self.records.binary_search_by_key(&offset, |(at, _)| *at).ok().map(|index| self.records[index].1)
    }

    fn is_aborted(&self, offset: u64) -> bool {
        self.producer_of(offset).is_some_and(|producer| {
            self.aborted.iter().any(|(of, first, marker)| *of == producer && *first <= offset && offset < *marker)
        })
    }

    /// Whether a consumer at `isolation` is given the record at `offset` (below the LSO for
    /// `read_committed`; the caller stops there).
    fn visible(&self, offset: u64, isolation: IsolationLevel) -> bool {
        !self.is_marker(offset) && (isolation == IsolationLevel::ReadUncommitted || !self.is_aborted(offset))
    }
}

impl PartitionLog {
    /// The log end offset.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, record: KafkaRecord) {
        match self.segments.last_mut() {
            Some(segment) if segment.len() < SEGMENT_RECORDS => segment.push(record),
            _ => {
                let mut segment = Vec::with_capacity(SEGMENT_RECORDS);
                segment.push(record);
                self.segments.push(segment);
            }
        }
        self.len += 1;
    }

    /// When the last record was appended (simulated ms), if any was.
    pub fn last_append_ms(&self) -> Option<u64> {
        self.last_append_ms.0
    }

    /// The records from `offset` on.
    pub fn iter_from(&self, offset: usize) -> impl Iterator<Item = &KafkaRecord> + '_ {
        let (first, skip) = (offset / SEGMENT_RECORDS, offset % SEGMENT_RECORDS);
        let head = self.segments.get(first).map(|segment| &segment[skip.min(segment.len())..]);
        head.into_iter().chain(self.segments.iter().skip(first + 1).map(Vec::as_slice)).flatten()
    }

    pub fn iter(&self) -> impl Iterator<Item = &KafkaRecord> + '_ {
        self.segments.iter().flatten()
    }

    /// Where a consumer at `isolation` can read up to: the log end, or for `read_committed` the
    /// last stable offset.
    pub fn readable_end(&self, isolation: IsolationLevel) -> u64 {
        match (&self.txn, isolation) {
            (Some(txn), IsolationLevel::ReadCommitted) => txn.lso(self.len as u64),
            _ => self.len as u64,
        }
    }

    /// The records a consumer at `isolation` is given, from `offset` on (control records, those
    /// the cleaner removed and, for `read_committed`, aborted records left out; nothing at or
    /// past the LSO).
    pub fn visible_from(&self, offset: usize, isolation: IsolationLevel) -> impl Iterator<Item = &KafkaRecord> + '_ {
        let end = self.readable_end(isolation);
        self.iter_from(offset)
            .take_while(move |record| record.offset < end)
            .filter(move |record| self.gives(record.offset, isolation))
    }

    /// Whether a consumer at `isolation` is given the record at `offset`, below its readable end.
    fn gives(&self, offset: u64, isolation: IsolationLevel) -> bool {
        self.txn.as_deref().is_none_or(|txn| txn.visible(offset, isolation))
            && self.cleaning.as_deref().is_none_or(|cleaning| !cleaning.removed[offset as usize])
    }

    /// The offset past the last record a consumer at `isolation` can be given: a consumer whose
    /// position is there has read everything it can (markers and aborted records at the end of
    /// the log are nothing to wait for).
    pub fn visible_end(&self, isolation: IsolationLevel) -> u64 {
        let end = self.readable_end(isolation);
        if self.txn.is_none() && self.cleaning.is_none() {
            return end;
        }
        (0..end).rev().find(|offset| self.gives(*offset, isolation)).map_or(0, |offset| offset + 1)
    }

    /// A partition of a compacted topic.
    fn compacted() -> PartitionLog {
        PartitionLog { cleaning: Some(Box::default()), ..PartitionLog::default() }
    }

    /// Stamps the record just appended with its time (a compacted partition keeps them), rolling
    /// the active segment first if its first record is `segment.ms` old (`UnifiedLog.maybeRoll`).
    fn stamp_last(&mut self, now_ms: u64, segment_ms: u64) {
        self.last_append_ms = Meter(Some(now_ms));
        let offset = self.len as u64 - 1;
        let Some(cleaning) = self.cleaning.as_deref_mut() else { return };
        if offset > cleaning.active_base
            && now_ms.saturating_sub(cleaning.appended_at_ms[cleaning.active_base as usize]) >= segment_ms
        {
            cleaning.active_base = offset;
        }
        cleaning.appended_at_ms.push(now_ms);
        cleaning.removed.push(false);
    }

    /// One wake-up of the cleaner for this partition (`LogCleanerManager.grabFilthiestCompactedLog`,
    /// `Cleaner.doClean`): cleans it if it is due, and says what it removed.
    fn clean(&mut self, now_ms: u64, config: &Compaction) -> Option<Cleaned> {
        let lso = self.readable_end(IsolationLevel::ReadCommitted);
        let len = self.len as u64;
        let cleaning = self.cleaning.as_deref()?;
        // `cleanableOffsets`: the active segment, the first unstable offset and the first
        // record younger than `min.compaction.lag.ms` bound what may be cleaned.
        let young = cleaning
            .appended_at_ms
            .iter()
            .position(|at| at.saturating_add(config.min_compaction_lag_ms) > now_ms)
            .map_or(len, |offset| offset as u64);
        let end = cleaning.active_base.min(lso).min(young);
        let first_dirty = cleaning.first_dirty.min(end);
        let present = |range: std::ops::Range<u64>| range.filter(|offset| !cleaning.removed[*offset as usize]).count();
        let (clean, dirty) = (present(0..first_dirty), present(first_dirty..end));
        let ratio_due =
            dirty > 0 && dirty * 1000 >= (clean + dirty) * config.min_cleanable_dirty_ratio_per_mille as usize;
        let horizon_due = cleaning.horizons.iter().any(|(offset, horizon)| *horizon <= now_ms && *offset < end);
        if !ratio_due && !horizon_due {
            return None;
        }
        // The offset map: the latest offset of each key in the dirty part (aborted records and
        // control records are not in it).
        let txn = self.txn.as_deref();
        let data = |offset: u64| txn.is_none_or(|txn| !txn.is_marker(offset) && !txn.is_aborted(offset));
        let mut latest: BTreeMap<Key, u64> = BTreeMap::new();
        for record in self.iter_from(first_dirty as usize).take_while(|record| record.offset < end) {
            if !cleaning.removed[record.offset as usize] && data(record.offset) {
                latest.insert(record.key, record.offset);
            }
        }
        let mut cleaned = Cleaned::default();
        let mut removed = Vec::new();
        let mut horizons = cleaning.horizons.clone();
        for record in self.iter().take_while(|record| record.offset < end) {
            let offset = record.offset;
            if cleaning.removed[offset as usize] || txn.is_some_and(|txn| txn.is_marker(offset)) {
                continue;
            }
            let superseded = latest.get(&record.key).is_some_and(|last| *last > offset);
            let horizon = horizons.iter().position(|(at, _)| *at == offset);
            let remove = if !data(offset) || superseded {
                true
            } else if record.value.is_none() {
                match horizon {
                    None => {
                        let at = now_ms.saturating_add(config.delete_retention_ms);
                        horizons.push((offset, at));
                        cleaned.horizons.push((offset, record.key, SimTime(at)));
                        false
                    }
                    Some(index) => horizons[index].1 <= now_ms,
                }
            } else {
                false
            };
            if remove {
                removed.push(offset);
                if let Some(index) = horizon {
                    horizons.remove(index);
                }
                let delete = record.value.is_none_or(|event| event.op == crate::core::event::Op::Delete);
                if delete && data(offset) {
                    cleaned.deletes.push((offset, record.key, record.value.is_none()));
                }
            }
        }
        let cleaning = self.cleaning.as_deref_mut().expect("compacted");
        for offset in &removed {
            cleaning.removed[*offset as usize] = true;
        }
        cleaning.horizons = horizons;
        cleaning.first_dirty = end;
        cleaned.removed = removed.len() as u32;
        Some(cleaned)
    }

    fn append_transactional(&mut self, record: KafkaRecord, producer_id: u32) {
        let txn = self.txn.get_or_insert_with(Box::default);
        txn.records.push((record.offset, producer_id));
        if !txn.open.iter().any(|(of, _)| *of == producer_id) {
            txn.open.push((producer_id, record.offset));
        }
        self.push(record);
    }

    /// Writes the marker that ends `producer_id`'s transaction here.
    fn write_marker(&mut self, tp: TopicPartition, producer_id: u32, committed: bool) {
        let offset = self.len as u64;
        let txn = self.txn.get_or_insert_with(Box::default);
        if let Some(index) = txn.open.iter().position(|(of, _)| *of == producer_id) {
            let (_, first) = txn.open.remove(index);
            if !committed {
                txn.aborted.push((producer_id, first, offset));
            }
        }
        txn.markers.push(offset);
        // The control record's slot: never given to a consumer.
        self.push(KafkaRecord { tp, offset, key: 0, value: None });
    }
}

/// Keys below this have their partition memoised.
const MEMO_KEYS: usize = 1 << 16;

thread_local! {
    /// `partition_for_key` is a pure function called once per produced record: its results for
    /// small keys are kept, per thread, for one partition count. A memo changes no result.
    static PARTITIONS: std::cell::RefCell<(u32, Vec<u32>)> = const { std::cell::RefCell::new((0, Vec::new())) };
}

/// The default partitioner for a record key, serialised as `{"id":17}`.
pub fn partition_for_key(key: Key, partitions: u32) -> u32 {
    let Some(index) = usize::try_from(key).ok().filter(|index| *index < MEMO_KEYS) else {
        return murmur2_partition(key, partitions);
    };
    PARTITIONS.with(|memo| {
        let mut memo = memo.borrow_mut();
        if memo.0 != partitions {
            *memo = (partitions, Vec::new());
        }
        if memo.1.len() <= index {
            memo.1.resize(index + 1, u32::MAX);
        }
        if memo.1[index] == u32::MAX {
            memo.1[index] = murmur2_partition(key, partitions);
        }
        memo.1[index]
    })
}

fn murmur2_partition(key: Key, partitions: u32) -> u32 {
    let mut buffer = [0u8; 32];
    let mut digits = [0u8; 20];
    let mut length = 0;
    let mut value = key.unsigned_abs();
    loop {
        digits[length] = b'0' + (value % 10) as u8;
        length += 1;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    let prefix = b"{\"id\":";
    buffer[..prefix.len()].copy_from_slice(prefix);
    let mut end = prefix.len();
    if key < 0 {
        buffer[end] = b'-';
        end += 1;
    }
    for digit in digits[..length].iter().rev() {
        buffer[end] = *digit;
        end += 1;
    }
    buffer[end] = b'}';
    end += 1;
    ((murmur2(&buffer[..end]) & 0x7fff_ffff) as u32) % partitions.max(1)
}

impl Kafka {
    pub fn new(config: Fixed<KafkaConfig>) -> Kafka {
        let mut logs = BTreeMap::new();
        for topic in &config.topics {
            // `cleanup.policy` is the change topics' setting; the others keep `delete`.
            let compacted = config.compaction.is_some() && matches!(topic, Topic::Change(_));
            for partition in 0..config.partitions {
                let log = if compacted { PartitionLog::compacted() } else { PartitionLog::default() };
                logs.insert(TopicPartition { topic: *topic, partition }, log);
            }
        }
        Kafka {
            config,
            logs: CopyOnWrite::new(logs),
            source_offsets: CopyOnWrite::new(BTreeMap::new()),
            groups: CopyOnWrite::new(BTreeMap::new()),
            transactions: CopyOnWrite::new(BTreeMap::new()),
            next_producer_id: 0,
            pending_fetches: Vec::new(),
            group: Optional::default(),
        }
    }

    /// With a coordinator for the Connect workers' group, its first join delayed by
    /// `group.initial.rebalance.delay.ms`.
    /// The cluster's config topic starts with each connector's configuration (`connectors`)
    /// and is read by `workers` workers.
    pub fn with_connect_group(
        mut self,
        initial_rebalance_delay_ms: u64,
        connectors: Vec<ConnectorConfigRecord>,
        workers: u8,
    ) -> Kafka {
        let mut group = GroupCoordinator::new(initial_rebalance_delay_ms);
        group.topics = ConnectTopics::new(connectors, workers);
        self.group = Optional::some(group);
        self
    }

    /// Each partition's end as a `read_uncommitted` consumer waits for it: past the last record
    /// it can be given.
    pub fn log_end_offsets(&self) -> Vec<(TopicPartition, u64)> {
        self.visible_ends(IsolationLevel::ReadUncommitted)
    }

    /// Each partition's end as a consumer at `isolation` waits for it: past the last record it
    /// can be given ([`PartitionLog::visible_end`]); the log end where no transaction wrote.
    pub fn visible_ends(&self, isolation: IsolationLevel) -> Vec<(TopicPartition, u64)> {
        self.logs.iter().map(|(tp, log)| (*tp, log.visible_end(isolation))).collect()
    }

    /// `segment.ms` of the compacted topics (no segment rolls where nothing is compacted).
    fn segment_ms(&self) -> u64 {
        self.config.compaction.map_or(u64::MAX, |compaction| compaction.segment_ms)
    }

    /// Whether some transaction is open.
    pub fn has_open_transactions(&self) -> bool {
        self.transactions.values().any(|state| state.open.is_some())
    }

    /// The hanging transactions: open on a partition, unknown to the coordinator (reference
    /// kafka-connect.md §3.3), each with where it pins the last stable offset.
    pub fn hanging_transactions(&self) -> Vec<(TopicPartition, u64)> {
        let known = |producer: u32| self.transactions.values().any(|state| state.producer.producer_id == producer);
        self.logs
            .iter()
            .filter_map(|(tp, log)| log.txn.as_deref().map(|txn| (tp, txn)))
            .flat_map(|(tp, txn)| {
                txn.open.iter().filter(|(producer, _)| !known(*producer)).map(move |(_, first)| (*tp, *first))
            })
            .collect()
    }

    /// A delayed produce request (KIP-890's motivation): the last transactional record of the
    /// first partition that has one arrives again after its transaction ended, under a producer
    /// state the coordinator no longer has, and opens a transaction nobody will end. Nothing
    /// happens where no transaction has written yet.
    fn hang_transaction(&mut self, ctx: &mut Ctx) {
        let last = self.logs.iter().find_map(|(tp, log)| {
            let txn = log.txn.as_deref()?;
            let (offset, _) = txn.records.last()?;
            log.iter_from(*offset as usize).next().map(|record| (*tp, *record))
        });
        let Some((tp, record)) = last else { return };
        let orphan = self.next_producer_id;
        self.next_producer_id += 1;
        let segment_ms = self.segment_ms();
        let log = self.logs.get_mut().entry(tp).or_default();
        let stored = KafkaRecord { offset: log.len() as u64, ..record };
        log.append_transactional(stored, orphan);
        log.stamp_last(ctx.now.ms(), segment_ms);
        ctx.observe(Observation::Appended { records: vec![stored], transaction: Some(orphan) });
        self.answer_pending_fetches(ctx);
    }

    /// `kafka-transactions.sh abort` of every hanging transaction: an ABORT marker where it is
    /// open; the last stable offset moves on.
    fn abort_hanging(&mut self, ctx: &mut Ctx) {
        let hanging = self.hanging_transactions();
        let segment_ms = self.segment_ms();
        for (tp, first) in hanging {
            let log = self.logs.get_mut().get_mut(&tp).expect("a hanging transaction's partition");
            let Some(producer_id) = log.txn.as_deref().and_then(|txn| txn.producer_of(first)) else { continue };
            log.write_marker(tp, producer_id, false);
            log.stamp_last(ctx.now.ms(), segment_ms);
            ctx.observe(Observation::TransactionEnded {
                // The coordinator has no transactional.id for it.
                transactional_id: String::new(),
                producer_id,
                committed: false,
                cause: TransactionEnd::AdminAbort,
                records: 1,
            });
        }
        self.answer_pending_fetches(ctx);
    }

    fn fetch(
        &self,
        positions: &[(TopicPartition, u64)],
        max_records: u32,
        isolation: IsolationLevel,
    ) -> Vec<KafkaRecord> {
        let available: usize = positions
            .iter()
            .filter_map(|(tp, position)| self.logs.get(tp).map(|log| log.len().saturating_sub(*position as usize)))
            .sum();
        let mut records = Vec::with_capacity(available.min(max_records as usize));
        for (tp, position) in positions {
            let Some(log) = self.logs.get(tp) else { continue };
            let room = (max_records as usize).saturating_sub(records.len());
            records.extend(log.visible_from(*position as usize, isolation).take(room).copied());
        }
        records
    }

    fn answer_pending_fetches(&mut self, ctx: &mut Ctx) {
        let pending = std::mem::take(&mut self.pending_fetches);
        for fetch in pending {
            let records = self.fetch(&fetch.positions, fetch.max_records, fetch.isolation);
            if records.is_empty() {
                self.pending_fetches.push(fetch);
            } else {
                ctx.send(
                    fetch.client,
                    Msg::KafkaReply {
                        request_id: fetch.request_id,
                        reply: KafkaReply::Fetched { records, log_end_offsets: self.visible_ends(fetch.isolation) },
                    },
                );
            }
        }
    }

    /// The epoch check of a transactional request: the producer's epoch must be the current one
    /// for its id.
    fn current(&self, producer: ProducerEpoch) -> Result<String, String> {
        match self.transactions.iter().find(|(_, state)| state.producer.producer_id == producer.producer_id) {
            Some((id, state)) if state.producer.epoch == producer.epoch => Ok(id.clone()),
            Some((id, state)) => Err(format!(
                "ProducerFencedException: transactional.id {id} has epoch {} now; this producer has epoch {}",
                state.producer.epoch, producer.epoch
            )),
            None => Err(format!("InvalidPidMappingException: producer id {} is unknown", producer.producer_id)),
        }
    }

    /// Ends `id`'s open transaction: a marker on every partition it wrote to; with a commit, its
    /// offsets reach the offsets topic's committed view.
    fn end_transaction(&mut self, ctx: &mut Ctx, id: &str, committed: bool, cause: TransactionEnd) {
        let Some(state) = self.transactions.get_mut().get_mut(id) else { return };
        let Some(open) = state.open.take() else { return };
        let producer_id = state.producer.producer_id;
        if cause != TransactionEnd::Requested {
            // Aborted by the coordinator: the epoch is fenced (`PrepareEpochFence`).
            state.producer.epoch = state.producer.epoch.saturating_add(1);
        }
        let segment_ms = self.segment_ms();
        let logs = self.logs.get_mut();
        for (tp, _) in &open.partitions {
            let log = logs.entry(*tp).or_default();
            log.write_marker(*tp, producer_id, committed);
            log.stamp_last(ctx.now.ms(), segment_ms);
        }
        if committed {
            for (connector, offset) in open.offsets {
                match offset {
                    Some(value) => self.source_offsets.get_mut().insert(connector.clone(), value),
                    None => self.source_offsets.get_mut().remove(&connector),
                };
                ctx.observe(Observation::SourceOffsetStored { connector, offset });
            }
        }
        ctx.observe(Observation::TransactionEnded {
            transactional_id: id.to_owned(),
            producer_id,
            committed,
            cause,
            records: open.partitions.iter().map(|(_, count)| count).sum(),
        });
        self.answer_pending_fetches(ctx);
        self.arm_abort_sweep(ctx);
    }

    /// The coordinator's sweep runs every cleanup interval; the model arms it only while a
    /// transaction is open, for the first sweep at which one will have timed out.
    fn arm_abort_sweep(&self, ctx: &mut Ctx) {
        let interval = self.config.transaction_abort_sweep_interval_ms.max(1);
        let due = self
            .transactions
            .values()
            .filter_map(|state| state.open.as_ref().map(|open| open.started_at.ms() + state.timeout_ms))
            .min();
        match due {
            Some(due) => {
                // Sweeps run at multiples of the interval from the broker's start.
                let at = due.div_ceil(interval).max(1) * interval;
                ctx.set_timer(Timer::TransactionAbortSweep, at.saturating_sub(ctx.now.ms()).max(1));
            }
            None => ctx.cancel_timer(Timer::TransactionAbortSweep),
        }
    }

    /// `abortTimedOutTransactions`: every transaction open longer than its timeout is aborted
    /// with an epoch fence.
    fn abort_timed_out(&mut self, ctx: &mut Ctx) {
        let now = ctx.now.ms();
        let expired: Vec<String> = self
            .transactions
            .iter()
            .filter(|(_, state)| state.open.as_ref().is_some_and(|open| open.started_at.ms() + state.timeout_ms <= now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.end_transaction(ctx, &id, false, TransactionEnd::TimedOut);
        }
        self.arm_abort_sweep(ctx);
    }

    /// `id`'s open transaction, begun now if none is (`AddPartitionsToTxn` starts its timeout),
    /// with a record counted for each of `written`.
    fn add_to_transaction(
        &mut self,
        ctx: &mut Ctx,
        id: &str,
        written: impl IntoIterator<Item = TopicPartition>,
    ) -> Option<&mut OpenTransaction> {
        let state = self.transactions.get_mut().get_mut(id)?;
        if state.open.is_none() {
            state.open = Some(OpenTransaction { started_at: ctx.now, partitions: Vec::new(), offsets: Vec::new() });
            self.arm_abort_sweep(ctx);
        }
        let open = self.transactions.get_mut().get_mut(id)?.open.as_mut()?;
        for tp in written {
            match open.partitions.iter_mut().find(|(of, _)| *of == tp) {
                Some((_, count)) => *count += 1,
                None => open.partitions.push((tp, 1)),
            }
        }
        Some(open)
    }

    fn handle(&mut self, ctx: &mut Ctx, from: Node, request_id: u64, request: KafkaRequest) {
        let reply = match request {
            KafkaRequest::WriteConnectConfig { connector, write } => {
                let Some(group) = self.group.0.as_mut() else { return };
                group.topics.write_config(ctx, connector, write);
                KafkaReply::ConnectConfigWritten
            }
            KafkaRequest::WriteConnectStatus { connector, state, generation } => {
                if let Some(group) = self.group.0.as_mut() {
                    group.topics.write_status(connector, state, generation);
                }
                return;
            }
            KafkaRequest::ReadConnectStatus { connector } => {
                let Some(group) = self.group.0.as_ref() else { return };
                let c = usize::from(connector);
                let (Some((state, _)), Some(config)) = (group.topics.status.get(c), group.topics.config.get(c)) else {
                    return;
                };
                KafkaReply::ConnectStatus { state: *state, config: *config }
            }
            KafkaRequest::Produce { records, transaction } => {
                let id = match transaction.map(|producer| self.current(producer)) {
                    Some(Err(reason)) => {
                        ctx.send(from, Msg::KafkaReply { request_id, reply: KafkaReply::Fenced { reason } });
                        return;
                    }
                    Some(Ok(id)) => Some(id),
                    None => None,
                };
                if let Some(id) = &id {
                    let state = self.transactions.get_mut().get_mut(id).expect("current");
                    if state.last_sequence.is_some_and(|last| last >= request_id) {
                        ctx.send(
                            from,
                            Msg::KafkaReply { request_id, reply: KafkaReply::Produced { offsets: Vec::new() } },
                        );
                        return;
                    }
                    state.last_sequence = Some(request_id);
                }
                let producer_id = transaction.map(|producer| producer.producer_id);
                let segment_ms = self.segment_ms();
                let mut appended = Vec::with_capacity(records.len());
                for record in records.iter() {
                    let tp = TopicPartition {
                        topic: record.topic,
                        partition: match record.placement {
                            None => partition_for_key(record.key, self.config.partitions),
                            Some(Placement::KeyHash(hash)) => hash % self.config.partitions.max(1),
                            // A partition the topic does not have fails the send in Kafka; no
                            // transform sets one here (the outbox columns hold no integer for a
                            // `…:partition` placement, which fails the router instead).
                            Some(Placement::Partition(partition)) => partition % self.config.partitions.max(1),
                        },
                    };
                    let log = self.logs.get_mut().entry(tp).or_default();
                    let stored = KafkaRecord { tp, offset: log.len() as u64, key: record.key, value: record.value };
                    match producer_id {
                        Some(producer_id) => log.append_transactional(stored, producer_id),
                        None => log.push(stored),
                    }
                    log.stamp_last(ctx.now.ms(), segment_ms);
                    appended.push(stored);
                }
                if let Some(id) = &id {
                    self.add_to_transaction(ctx, id, appended.iter().map(|record| record.tp));
                }
                let offsets = appended.iter().map(|record| (record.tp, record.offset)).collect();
                ctx.observe(Observation::Appended { records: appended, transaction: producer_id });
                self.answer_pending_fetches(ctx);
                KafkaReply::Produced { offsets }
            }
            KafkaRequest::WriteSourceOffsetInTransaction(write) => {
                let TransactionalOffset { connector, offset, producer } = *write;
                match self.current(producer) {
                    Ok(id) => {
                        if let Some(open) = self.add_to_transaction(ctx, &id, []) {
                            open.offsets.push((connector, offset));
                        }
                        KafkaReply::SourceOffsetWritten
                    }
                    Err(reason) => KafkaReply::Fenced { reason },
                }
            }
            KafkaRequest::WriteSourceOffset { connector, offset } => {
                match offset {
                    Some(value) => self.source_offsets.get_mut().insert(connector.clone(), value),
                    None => self.source_offsets.get_mut().remove(&connector),
                };
                ctx.observe(Observation::SourceOffsetStored { connector, offset });
                KafkaReply::SourceOffsetWritten
            }
            KafkaRequest::ReadSourceOffset { connector } => {
                KafkaReply::SourceOffset(self.source_offsets.get(&connector).copied())
            }
            KafkaRequest::Fetch { positions, max_records, isolation } => {
                let records = self.fetch(&positions, max_records, isolation);
                if records.is_empty() {
                    self.pending_fetches.retain(|pending| pending.client != from);
                    self.pending_fetches.push(PendingFetch {
                        client: from,
                        request_id,
                        positions,
                        max_records,
                        isolation,
                    });
                    return;
                }
                KafkaReply::Fetched { records, log_end_offsets: self.visible_ends(isolation) }
            }
            KafkaRequest::InitProducerId { transactional_id, transaction_timeout_ms } => {
                // An open transaction of an older instance is aborted, with an epoch fence.
                self.end_transaction(ctx, &transactional_id, false, TransactionEnd::Fenced);
                let fresh = self.next_producer_id;
                let state = self.transactions.get_mut().entry(transactional_id).or_insert_with(|| TransactionState {
                    producer: ProducerEpoch { producer_id: fresh, epoch: 0 },
                    timeout_ms: transaction_timeout_ms,
                    open: None,
                    last_sequence: None,
                });
                if state.producer.producer_id == fresh {
                    self.next_producer_id += 1;
                } else {
                    state.producer.epoch = state.producer.epoch.saturating_add(1);
                }
                state.timeout_ms = transaction_timeout_ms;
                state.last_sequence = None;
                KafkaReply::ProducerId(state.producer)
            }
            KafkaRequest::EndTxn { producer, commit } => match self.current(producer) {
                Ok(id) => {
                    self.end_transaction(ctx, &id, commit, TransactionEnd::Requested);
                    KafkaReply::TxnEnded
                }
                Err(reason) => KafkaReply::Fenced { reason },
            },
            KafkaRequest::CommitGroup { group, positions } => {
                let committed = self.groups.get_mut().entry(group.clone()).or_default();
                for (tp, position) in &positions {
                    committed.insert(*tp, *position);
                }
                ctx.observe(Observation::GroupCommitted { group, positions });
                KafkaReply::GroupCommitted
            }
            KafkaRequest::ReadGroup { group, reset } => KafkaReply::Group {
                committed: self
                    .groups
                    .get(&group)
                    .map(|c| c.iter().map(|(tp, o)| (*tp, *o)).collect())
                    .unwrap_or_default(),
                partitions: self
                    .logs
                    .iter()
                    .map(|(tp, log)| {
                        let start = match reset {
                            crate::core::protocol::OffsetReset::Earliest => Some(0),
                            crate::core::protocol::OffsetReset::Latest => Some(log.len() as u64),
                            crate::core::protocol::OffsetReset::None => None,
                        };
                        (*tp, start)
                    })
                    .collect(),
            },
        };
        ctx.send(from, Msg::KafkaReply { request_id, reply });
    }
}

impl Kafka {
    /// The log cleaner's wake-up: every compacted partition that is due is cleaned
    /// ([`Compaction`]); then it sleeps `log.cleaner.backoff.ms`.
    fn run_cleaner(&mut self, ctx: &mut Ctx) {
        let Some(config) = self.config.compaction else { return };
        let now = ctx.now.ms();
        let due: Vec<TopicPartition> =
            self.logs.iter().filter(|(_, log)| log.cleaning.is_some()).map(|(tp, _)| *tp).collect();
        for tp in due {
            let Some(cleaned) = self.logs.get_mut().get_mut(&tp).and_then(|log| log.clean(now, &config)) else {
                continue;
            };
            if cleaned.removed > 0 || !cleaned.horizons.is_empty() {
                ctx.observe(Observation::Compacted {
                    tp,
                    removed: cleaned.removed,
                    deletes: cleaned.deletes,
                    horizons: cleaned.horizons,
                });
            }
        }
        ctx.set_timer(Timer::LogCleaner, config.log_cleaner_backoff_ms.max(1));
    }
}

impl Component for Kafka {
    fn start(&mut self, ctx: &mut Ctx) {
        // The coordinator loads `__transaction_state` and sweeps as before.
        if self.has_open_transactions() {
            self.arm_abort_sweep(ctx);
        }
        if let Some(compaction) = self.config.compaction {
            ctx.set_timer(Timer::LogCleaner, compaction.log_cleaner_backoff_ms.max(1));
        }
        if let Some(group) = self.group.0.as_mut() {
            group.start(ctx);
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx, from: Node, msg: Msg) {
        match msg {
            Msg::Kafka { request_id, request } => self.handle(ctx, from, request_id, request),
            Msg::Control(crate::core::protocol::Control::HangTransaction) => self.hang_transaction(ctx),
            Msg::Control(crate::core::protocol::Control::AbortHangingTransactions) => self.abort_hanging(ctx),
            Msg::Control(crate::core::protocol::Control::GroupSessionOutlasted { worker }) => {
                if let Some(group) = self.group.0.as_mut() {
                    group.on_session_expired(ctx, worker);
                }
            }
            Msg::Group(request) => {
                let Some(group) = self.group.0.as_mut() else { return };
                match request {
                    GroupRequest::Join { member, owned, session_timeout_ms, rebalance_timeout_ms } => {
                        group.join(ctx, from, member, owned, (session_timeout_ms, rebalance_timeout_ms))
                    }
                    GroupRequest::Sync { member, generation, assignments } => {
                        group.sync(ctx, from, (member, generation), assignments)
                    }
                    GroupRequest::Heartbeat { member, generation } => group.heartbeat(ctx, from, member, generation),
                    GroupRequest::Leave { member } => group.leave(ctx, member),
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx, timer: Timer) {
        match timer {
            Timer::TransactionAbortSweep => self.abort_timed_out(ctx),
            Timer::LogCleaner => self.run_cleaner(ctx),
            Timer::GroupCoordinator => {
                if let Some(group) = self.group.0.as_mut() {
                    group.on_phase_deadline(ctx);
                }
            }
            Timer::GroupSession { member } => {
                if let Some(group) = self.group.0.as_mut() {
                    group.on_session_expired(ctx, member);
                }
            }
            _ => {}
        }
    }

    fn on_connection_lost(&mut self, _ctx: &mut Ctx, peer: Node) {
        self.pending_fetches.retain(|pending| pending.client != peer);
    }

    fn crash(&mut self) {
        self.pending_fetches.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_partitioned_as_its_json_bytes() {
        for key in [0, 7, 42, 1000, -3, i64::MAX, i64::MIN + 1] {
            let bytes = format!("{{\"id\":{key}}}");
            assert_eq!(partition_for_key(key, 7), ((murmur2(bytes.as_bytes()) & 0x7fff_ffff) as u32) % 7, "{key}");
        }
    }

    #[test]
    fn the_memo_answers_as_the_partitioner_for_every_partition_count() {
        for partitions in [3, 7, 3, 1] {
            for key in [1, 2, 1000, 65_535, 65_536, 1 << 40] {
                assert_eq!(
                    partition_for_key(key, partitions),
                    murmur2_partition(key, partitions),
                    "{key}/{partitions}"
                );
            }
        }
    }

    #[test]
    fn a_partition_log_reads_from_any_offset_across_segments() {
        let topic = Topic::Change(crate::core::ids::TableId(0));
        let tp = TopicPartition { topic, partition: 0 };
        let mut log = PartitionLog::default();
        let count = SEGMENT_RECORDS * 2 + 5;
        for offset in 0..count as u64 {
            log.push(KafkaRecord { tp, offset, key: offset as i64, value: None });
        }
        assert_eq!(log.len(), count);
        for start in [0, 1, SEGMENT_RECORDS - 1, SEGMENT_RECORDS, SEGMENT_RECORDS * 2 + 4, count, count + 9] {
            let offsets: Vec<u64> = log.iter_from(start).map(|record| record.offset).collect();
            assert_eq!(offsets, (start as u64..count as u64).collect::<Vec<_>>(), "from {start}");
        }
    }

    mod transactions {
        use super::super::*;
        use crate::core::component::{Outbox, TimerRequest};
        use crate::core::event::SourceRecord;
        use crate::core::ids::TableId;

        const TOPIC: Topic = Topic::Change(TableId(0));
        const TP: TopicPartition = TopicPartition { topic: TOPIC, partition: 0 };

        fn kafka() -> Kafka {
            Kafka::new(Fixed::new(KafkaConfig {
                partitions: 1,
                topics: vec![TOPIC],
                transaction_abort_sweep_interval_ms: TRANSACTION_ABORT_SWEEP_INTERVAL_MS,
                compaction: None,
            }))
        }

        /// Sends `request` at `at_ms` from Connect; returns the reply (if any) and what happened.
        fn ask(kafka: &mut Kafka, at_ms: u64, request_id: u64, request: KafkaRequest) -> (Option<KafkaReply>, Outbox) {
            let mut out = Outbox::default();
            let msg = Msg::Kafka { request_id, request };
            kafka.on_message(&mut Ctx::new(SimTime(at_ms), Node::Connect, &mut out), Node::Connect, msg);
            let reply = out.sends.iter().find_map(|(_, msg)| match msg {
                Msg::KafkaReply { request_id: id, reply } if *id == request_id => Some(reply.clone()),
                _ => None,
            });
            (reply, out)
        }

        fn init(kafka: &mut Kafka, at_ms: u64) -> (ProducerEpoch, Outbox) {
            let request =
                KafkaRequest::InitProducerId { transactional_id: "t-0".into(), transaction_timeout_ms: 60_000 };
            match ask(kafka, at_ms, 100 + at_ms, request) {
                (Some(KafkaReply::ProducerId(producer)), out) => (producer, out),
                other => panic!("{other:?}"),
            }
        }

        fn produce(kafka: &mut Kafka, at_ms: u64, request_id: u64, key: i64, producer: ProducerEpoch) -> KafkaReply {
            let record =
                SourceRecord { topic: TOPIC, key, value: None, offset: SourceOffset::default(), placement: None };
            let request =
                KafkaRequest::Produce { records: CopyOnWrite::new(vec![record]), transaction: Some(producer) };
            ask(kafka, at_ms, request_id, request).0.expect("answered")
        }

        fn visible(kafka: &Kafka, isolation: IsolationLevel) -> Vec<i64> {
            kafka.fetch(&[(TP, 0)], 100, isolation).iter().map(|record| record.key).collect()
        }

        #[test]
        fn read_committed_waits_at_the_lso_and_never_sees_an_aborted_record() {
            let mut kafka = kafka();
            let (first, _) = init(&mut kafka, 0);
            produce(&mut kafka, 1, 1, 10, first);
            // Open: a read_uncommitted reader sees it, a read_committed one waits at the LSO.
            assert_eq!(visible(&kafka, IsolationLevel::ReadUncommitted), vec![10]);
            assert_eq!(visible(&kafka, IsolationLevel::ReadCommitted), Vec::<i64>::new());
            assert_eq!(kafka.visible_ends(IsolationLevel::ReadCommitted), vec![(TP, 0)]);
            // A new instance of the transactional.id fences the old one and aborts its transaction.
            let (second, out) = init(&mut kafka, 2);
            assert!(second.epoch > first.epoch && second.producer_id == first.producer_id);
            assert!(out.observations.iter().any(|o| matches!(
                o,
                Observation::TransactionEnded { committed: false, cause: TransactionEnd::Fenced, records: 1, .. }
            )));
            assert!(matches!(produce(&mut kafka, 3, 2, 11, first), KafkaReply::Fenced { .. }), "the zombie is fenced");
            produce(&mut kafka, 4, 3, 10, second);
            let end = KafkaRequest::EndTxn { producer: second, commit: true };
            assert_eq!(ask(&mut kafka, 5, 4, end).0, Some(KafkaReply::TxnEnded));
            // Log: 10 (aborted), ABORT marker, 10, COMMIT marker.
            assert_eq!(kafka.logs.get(&TP).map(PartitionLog::len), Some(4));
            assert_eq!(visible(&kafka, IsolationLevel::ReadCommitted), vec![10]);
            assert_eq!(visible(&kafka, IsolationLevel::ReadUncommitted), vec![10, 10], "markers are never given out");
            // The markers at the end are nothing to wait for.
            assert_eq!(kafka.visible_ends(IsolationLevel::ReadCommitted), vec![(TP, 3)]);
        }

        #[test]
        fn offsets_written_in_a_transaction_count_only_once_it_commits() {
            let mut kafka = kafka();
            let (producer, _) = init(&mut kafka, 0);
            let offset = SourceOffset::default();
            let write = KafkaRequest::WriteSourceOffsetInTransaction(Box::new(TransactionalOffset {
                connector: "c".into(),
                offset: Some(offset),
                producer,
            }));
            assert_eq!(ask(&mut kafka, 1, 1, write).0, Some(KafkaReply::SourceOffsetWritten));
            let read = || KafkaRequest::ReadSourceOffset { connector: "c".into() };
            assert_eq!(ask(&mut kafka, 2, 2, read()).0, Some(KafkaReply::SourceOffset(None)));
            ask(&mut kafka, 3, 3, KafkaRequest::EndTxn { producer, commit: true });
            assert_eq!(ask(&mut kafka, 4, 4, read()).0, Some(KafkaReply::SourceOffset(Some(offset))));
        }

        #[test]
        fn the_sweep_aborts_a_transaction_open_past_its_timeout_and_fences_its_producer() {
            let mut kafka = kafka();
            let (producer, _) = init(&mut kafka, 0);
            let (_, out) = ask(&mut kafka, 1_500, 1, {
                let record = SourceRecord {
                    topic: TOPIC,
                    key: 1,
                    value: None,
                    offset: SourceOffset::default(),
                    placement: None,
                };
                KafkaRequest::Produce { records: CopyOnWrite::new(vec![record]), transaction: Some(producer) }
            });
            // Open at 1.5 s with a 60 s timeout: the first sweep at or after 61.5 s is at 70 s.
            assert!(out.timers.contains(&TimerRequest::Set { timer: Timer::TransactionAbortSweep, after_ms: 68_500 }));
            let mut out = Outbox::default();
            kafka.on_timer(&mut Ctx::new(SimTime(70_000), Node::Kafka, &mut out), Timer::TransactionAbortSweep);
            assert!(out.observations.iter().any(|o| matches!(
                o,
                Observation::TransactionEnded { committed: false, cause: TransactionEnd::TimedOut, .. }
            )));
            assert!(!kafka.has_open_transactions());
            let end = KafkaRequest::EndTxn { producer, commit: true };
            assert!(matches!(ask(&mut kafka, 70_001, 2, end).0, Some(KafkaReply::Fenced { .. })));
            assert_eq!(visible(&kafka, IsolationLevel::ReadCommitted), Vec::<i64>::new());
        }

        #[test]
        fn a_batch_sent_again_is_appended_once() {
            let mut kafka = kafka();
            let (producer, _) = init(&mut kafka, 0);
            produce(&mut kafka, 1, 7, 1, producer);
            produce(&mut kafka, 2, 7, 1, producer);
            assert_eq!(visible(&kafka, IsolationLevel::ReadUncommitted), vec![1]);
        }
    }

    mod compaction {
        use super::super::*;
        use crate::core::component::Outbox;
        use crate::core::event::{ChangeEvent, Op, Origin, SnapshotMarker, SourceInfo, SourceRecord};
        use crate::core::ids::{Row, Status, TableId};
        use crate::core::lsn::Lsn;

        const TOPIC: Topic = Topic::Change(TableId(0));
        const TP: TopicPartition = TopicPartition { topic: TOPIC, partition: 0 };

        fn kafka(compaction: Compaction) -> Kafka {
            Kafka::new(Fixed::new(KafkaConfig {
                partitions: 1,
                topics: vec![TOPIC, Topic::Heartbeat],
                transaction_abort_sweep_interval_ms: TRANSACTION_ABORT_SWEEP_INTERVAL_MS,
                compaction: Some(compaction),
            }))
        }

        fn settings() -> Compaction {
            Compaction { segment_ms: 10_000, delete_retention_ms: 60_000, ..Compaction::DEFAULT }
        }

        fn event(op: Op, version: u32) -> ChangeEvent {
            let row = Row::new(version, Status::Submitted, 1);
            let source = SourceInfo {
                connector: Origin::Postgresql,
                table: TableId(0),
                lsn: Lsn(u64::from(version)),
                tx_id: None,
                snapshot: SnapshotMarker::Streamed,
                ts_ms: 0,
            };
            let (before, after) = if op == Op::Delete { (Some(row), None) } else { (None, Some(row)) };
            ChangeEvent { op, before, after, source }
        }

        /// Appends `key`'s record (`None`: a tombstone) at `at_ms`.
        fn append(kafka: &mut Kafka, at_ms: u64, key: i64, value: Option<ChangeEvent>) {
            let record = SourceRecord { topic: TOPIC, key, value, offset: SourceOffset::default(), placement: None };
            let request = KafkaRequest::Produce { records: CopyOnWrite::new(vec![record]), transaction: None };
            let mut out = Outbox::default();
            let msg = Msg::Kafka { request_id: at_ms, request };
            kafka.on_message(&mut Ctx::new(SimTime(at_ms), Node::Connect, &mut out), Node::Connect, msg);
        }

        /// The cleaner wakes at `at_ms`: what it reported.
        fn clean(kafka: &mut Kafka, at_ms: u64) -> Vec<Observation> {
            let mut out = Outbox::default();
            kafka.on_timer(&mut Ctx::new(SimTime(at_ms), Node::Kafka, &mut out), Timer::LogCleaner);
            out.observations
        }

        /// What a consumer reading from the start is given: (offset, key, op or tombstone).
        fn read(kafka: &Kafka) -> Vec<(u64, i64, Option<Op>)> {
            kafka
                .fetch(&[(TP, 0)], 100, IsolationLevel::ReadUncommitted)
                .iter()
                .map(|record| (record.offset, record.key, record.value.map(|event| event.op)))
                .collect()
        }

        /// Claim 3 read, updated, deleted (op=d and tombstone): the cleaner keeps the latest
        /// record of each key below the active segment, removes the op=d with the older versions
        /// at its first cleaning after the tombstone, and the tombstone itself only at a cleaning
        /// `delete.retention.ms` after the one that first saw it.
        #[test]
        fn the_cleaner_keeps_the_latest_record_and_the_tombstone_until_its_horizon() {
            let mut kafka = kafka(settings());
            append(&mut kafka, 1_000, 3, Some(event(Op::Read, 1)));
            append(&mut kafka, 1_000, 4, Some(event(Op::Read, 1)));
            append(&mut kafka, 2_000, 3, Some(event(Op::Update, 2)));
            append(&mut kafka, 5_000, 3, Some(event(Op::Delete, 2)));
            append(&mut kafka, 5_000, 3, None);
            // Everything is in the active segment: nothing is cleanable.
            assert!(clean(&mut kafka, 15_000).is_empty());
            assert_eq!(read(&kafka).len(), 5);
            // A record 10 s after the segment's first rolls it; the old segment is cleanable.
            append(&mut kafka, 11_000, 4, Some(event(Op::Update, 2)));
            let observed = clean(&mut kafka, 30_000);
            let Some(Observation::Compacted { removed, deletes, horizons, .. }) = observed.first() else {
                panic!("{observed:?}")
            };
            assert_eq!(*removed, 3, "claim 3's read, update and op=d");
            assert_eq!(deletes, &vec![(3, 3, false)]);
            assert_eq!(horizons, &vec![(4, 3, SimTime(90_000))]);
            assert_eq!(
                read(&kafka),
                vec![(1, 4, Some(Op::Read)), (4, 3, None), (5, 4, Some(Op::Update))],
                "claim 4's read stays: its update is in the active segment"
            );
            // Before the horizon the tombstone stays; a cleaning after it removes it.
            assert!(clean(&mut kafka, 75_000).is_empty());
            let observed = clean(&mut kafka, 90_000);
            let Some(Observation::Compacted { removed: 1, deletes, .. }) = observed.first() else {
                panic!("{observed:?}")
            };
            assert_eq!(deletes, &vec![(4, 3, true)]);
            assert_eq!(read(&kafka), vec![(1, 4, Some(Op::Read)), (5, 4, Some(Op::Update))]);
            // The other topics keep `cleanup.policy=delete`.
            assert!(kafka.logs[&TopicPartition { topic: Topic::Heartbeat, partition: 0 }].cleaning.is_none());
        }

        /// `min.compaction.lag.ms` keeps young records out of the cleaning, and the dirty ratio
        /// decides whether a partition is cleaned at all.
        #[test]
        fn young_records_and_a_clean_log_are_left_alone() {
            let mut kafka = kafka(Compaction { min_compaction_lag_ms: 50_000, ..settings() });
            append(&mut kafka, 1_000, 3, Some(event(Op::Read, 1)));
            append(&mut kafka, 2_000, 3, Some(event(Op::Update, 2)));
            append(&mut kafka, 20_000, 5, Some(event(Op::Read, 1)));
            assert!(clean(&mut kafka, 30_000).is_empty(), "claim 3's records are younger than the lag");
            assert!(!clean(&mut kafka, 60_000).is_empty());
            assert_eq!(read(&kafka).iter().map(|(offset, ..)| *offset).collect::<Vec<_>>(), vec![1, 2]);
            // Nothing appended since: the dirty ratio is 0, no cleaning.
            assert!(clean(&mut kafka, 120_000).is_empty());
        }
    }

    #[test]
    fn murmur2_matches_kafka() {
        // Values from Kafka's UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21"), -973_932_308);
        assert_eq!(murmur2(b"foobar"), -790_332_482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985_981_536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1_486_304_829);
        assert_eq!(murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58_897_971);
        assert_eq!(murmur2(b"abc"), 479_470_107);
    }
}
