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
//! The cluster is one durable broker: with `acks=all` and enough replicas, an acknowledged write
//! survives, and the model does not crash it. Left out: transactions and `read_committed`,
//! compaction of change topics, retention, broker failures, rebalancing of the consumer group.

use crate::core::component::{Component, Ctx, Timer};
use crate::core::event::{KafkaRecord, Placement, SourceOffset, Topic, TopicPartition};
use crate::core::ids::{Key, Node};
use crate::core::observe::Observation;
use crate::core::protocol::{KafkaReply, KafkaRequest, Msg};
use crate::core::shared::{CopyOnWrite, Fixed};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A scenario's `[kafka]` section. The cluster's [`KafkaConfig`] adds the topics, one per
/// captured table (and the heartbeat topic), which the run derives.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KafkaSection {
    /// `num.partitions`: partitions of every change topic.
    pub partitions: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KafkaConfig {
    /// Partitions of every change topic (`num.partitions` when Debezium auto-creates them).
    pub partitions: u32,
    /// The change topics, created before the run.
    pub topics: Vec<Topic>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct PendingFetch {
    client: Node,
    request_id: u64,
    positions: Vec<(TopicPartition, u64)>,
    max_records: u32,
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
    pending_fetches: Vec<PendingFetch>,
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

    /// The records from `offset` on.
    pub fn iter_from(&self, offset: usize) -> impl Iterator<Item = &KafkaRecord> + '_ {
        let (first, skip) = (offset / SEGMENT_RECORDS, offset % SEGMENT_RECORDS);
        let head = self.segments.get(first).map(|segment| &segment[skip.min(segment.len())..]);
        head.into_iter().chain(self.segments.iter().skip(first + 1).map(Vec::as_slice)).flatten()
    }

    pub fn iter(&self) -> impl Iterator<Item = &KafkaRecord> + '_ {
        self.segments.iter().flatten()
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
            for partition in 0..config.partitions {
                logs.insert(TopicPartition { topic: *topic, partition }, PartitionLog::default());
            }
        }
        Kafka {
            config,
            logs: CopyOnWrite::new(logs),
            source_offsets: CopyOnWrite::new(BTreeMap::new()),
            groups: CopyOnWrite::new(BTreeMap::new()),
            pending_fetches: Vec::new(),
        }
    }

    pub fn log_end_offsets(&self) -> Vec<(TopicPartition, u64)> {
        self.logs.iter().map(|(tp, log)| (*tp, log.len() as u64)).collect()
    }

    fn fetch(&self, positions: &[(TopicPartition, u64)], max_records: u32) -> Vec<KafkaRecord> {
        let available: usize = positions
            .iter()
            .filter_map(|(tp, position)| self.logs.get(tp).map(|log| log.len().saturating_sub(*position as usize)))
            .sum();
        let mut records = Vec::with_capacity(available.min(max_records as usize));
        for (tp, position) in positions {
            let Some(log) = self.logs.get(tp) else { continue };
            let room = (max_records as usize).saturating_sub(records.len());
            records.extend(log.iter_from(*position as usize).take(room).copied());
        }
        records
    }

    fn answer_pending_fetches(&mut self, ctx: &mut Ctx) {
        let pending = std::mem::take(&mut self.pending_fetches);
        for fetch in pending {
            let records = self.fetch(&fetch.positions, fetch.max_records);
            if records.is_empty() {
                self.pending_fetches.push(fetch);
            } else {
                ctx.send(
                    fetch.client,
                    Msg::KafkaReply {
                        request_id: fetch.request_id,
                        reply: KafkaReply::Fetched { records, log_end_offsets: self.log_end_offsets() },
                    },
                );
            }
        }
    }

    fn handle(&mut self, ctx: &mut Ctx, from: Node, request_id: u64, request: KafkaRequest) {
        let reply = match request {
            KafkaRequest::Produce { records } => {
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
                    log.push(stored);
                    appended.push(stored);
                }
                let offsets = appended.iter().map(|record| (record.tp, record.offset)).collect();
                ctx.observe(Observation::Appended { records: appended });
                self.answer_pending_fetches(ctx);
                KafkaReply::Produced { offsets }
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
            KafkaRequest::Fetch { positions, max_records } => {
                let records = self.fetch(&positions, max_records);
                if records.is_empty() {
                    self.pending_fetches.retain(|pending| pending.client != from);
                    self.pending_fetches.push(PendingFetch { client: from, request_id, positions, max_records });
                    return;
                }
                KafkaReply::Fetched { records, log_end_offsets: self.log_end_offsets() }
            }
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

impl Component for Kafka {
    fn start(&mut self, _ctx: &mut Ctx) {}

    fn on_message(&mut self, ctx: &mut Ctx, from: Node, msg: Msg) {
        if let Msg::Kafka { request_id, request } = msg {
            self.handle(ctx, from, request_id, request);
        }
    }

    fn on_timer(&mut self, _ctx: &mut Ctx, _timer: Timer) {}

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
