//! The sink: a search index fed by a Kafka consumer group, with one of three apply rules.
//!
//! - `version-guard`: upsert by key and monotonic row version; a record whose version is not
//!   newer than the document's is refused; a delete leaves a versioned tombstone so that an older
//!   upsert cannot bring the row back (the idempotent consumer: Kafka's `KafkaConsumer` javadoc,
//!   "Manual Offset Control", says an at-least-once consumer sees records again).
//! - `naive-upsert`: last write wins, a delete forgets the key.
//! - `snapshot-epoch`: `version-guard`, plus: a completed snapshot (all its records consumed)
//!   removes every live document it did not see and that no record from a later source position
//!   touched (a streamed change after its snapshot point, or a newer snapshot's read: a consumer
//!   that lags can read two snapshots before the older one's epoch closes; seed 3349 of the restart
//!   scenario's sweep found the older epoch removing a row only the newer one had, when the rule
//!   looked at streamed changes alone). Records are grouped into a snapshot by their `source.lsn`
//!   (a snapshot cannot retract anything: Debezium's `RelationalSnapshotChangeEventSource` emits
//!   only `op=r` reads, never a delete for a row that is gone). Because records of one snapshot are
//!   spread over partitions, the epoch closes only when every partition has been consumed up to
//!   where it ended when the `snapshot=last` record was read.
//!
//! The consumer (`enable.auto.commit` semantics, at least once): fetch, apply, and commit the
//! positions every `auto.commit.interval.ms`; a restart resumes from the committed positions. Where
//! a partition has none, `auto.offset.reset` decides (`ConsumerConfig`, `auto.offset.reset`):
//! `earliest` starts at the log start, `latest` at the log end as the consumer finds it (a consumer
//! that dies before its first commit skips, on restart, what was appended meanwhile), `none` fails
//! the consumer (`NoOffsetForPartitionException`: it stops and says so). The consumer is a plain
//! consumer group, whose default is `latest`; a Kafka Connect sink connector's consumer gets
//! `earliest` from its worker (`Worker.baseConsumerConfigs`), which is what a CDC projection needs.
//! The index and its epoch bookkeeping are durable; the positions are not.

use crate::core::component::{Component, Ctx, Timer};
use crate::core::event::{ChangeEvent, KafkaRecord, Op, TopicPartition};
use crate::core::ids::{Key, Node, TableId};
use crate::core::keymap::KeyMap;
use crate::core::lsn::Lsn;
use crate::core::observe::{Apply, Doc, Observation, SinkAction};
use crate::core::protocol::{IsolationLevel, KafkaReply, KafkaRequest, Msg, OffsetReset};
use crate::core::shared::Fixed;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// How the sink applies a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApplyRule {
    VersionGuard,
    NaiveUpsert,
    SnapshotEpoch,
}

impl ApplyRule {
    pub fn name(self) -> &'static str {
        match self {
            ApplyRule::VersionGuard => "version-guard",
            ApplyRule::NaiveUpsert => "naive-upsert",
            ApplyRule::SnapshotEpoch => "snapshot-epoch",
        }
    }

    /// The key rule as the handoff record states it; `key` names the documents' key (`claim ID`,
    /// or each table's key columns).
    pub fn key_rule(self, key: &str) -> String {
        match self {
            ApplyRule::VersionGuard => format!("{key} + monotonic row version; deletes kept as versioned tombstones"),
            ApplyRule::NaiveUpsert => format!("{key}, last write wins; deletes forget the key"),
            ApplyRule::SnapshotEpoch => {
                format!("{key} + monotonic row version; a completed snapshot removes the keys it did not see")
            }
        }
    }
}

/// The index's documents, per table. Claim IDs are small positive integers, so a table's
/// documents live in a [`KeyMap`]: a vector indexed by key (one lookup per record is the sink's
/// hottest path). Equal contents have equal representations: no table has an empty map.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Docs {
    tables: BTreeMap<TableId, KeyMap<Doc>>,
}

impl Docs {
    pub fn get(&self, id: (TableId, Key)) -> Option<Doc> {
        self.tables.get(&id.0).and_then(|docs| docs.get(id.1)).copied()
    }

    pub fn set(&mut self, id: (TableId, Key), doc: Option<Doc>) {
        match doc {
            Some(doc) => self.tables.entry(id.0).or_default().insert(id.1, doc),
            None => {
                let Some(docs) = self.tables.get_mut(&id.0) else { return };
                docs.remove(id.1);
                if docs.is_empty() {
                    self.tables.remove(&id.0);
                }
            }
        }
    }

    /// Every document, in (table, key) order.
    pub fn iter(&self) -> Vec<((TableId, Key), Doc)> {
        let mut all = Vec::with_capacity(self.tables.values().map(KeyMap::len).sum());
        for (table, docs) in &self.tables {
            docs.for_each(|key, doc| all.push(((*table, key), *doc)));
        }
        all
    }

    /// The documents in document order, as the checkers read them at the boundary.
    pub fn to_list(&self) -> DocList {
        DocList(self.iter())
    }
}

/// The sink's documents at one instant, in document order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "Vec<((TableId, Key), Doc)>")]
pub struct DocList(Vec<((TableId, Key), Doc)>);

impl DocList {
    pub fn get(&self, id: &(TableId, Key)) -> Option<&Doc> {
        self.0.binary_search_by(|(other, _)| other.cmp(id)).ok().map(|index| &self.0[index].1)
    }

    /// One table's documents, in key order.
    pub fn table(&self, table: TableId) -> &[((TableId, Key), Doc)] {
        let start = self.0.partition_point(|((t, _), _)| *t < table);
        let end = self.0.partition_point(|((t, _), _)| *t <= table);
        &self.0[start..end]
    }

    pub fn iter(&self) -> impl Iterator<Item = &((TableId, Key), Doc)> + '_ {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<Vec<((TableId, Key), Doc)>> for DocList {
    fn from(docs: Vec<((TableId, Key), Doc)>) -> DocList {
        docs.into_iter().collect()
    }
}

impl FromIterator<((TableId, Key), Doc)> for DocList {
    /// From documents in any order (a later one for the same id wins).
    fn from_iter<I: IntoIterator<Item = ((TableId, Key), Doc)>>(iter: I) -> DocList {
        let map: BTreeMap<(TableId, Key), Doc> = iter.into_iter().collect();
        DocList(map.into_iter().collect())
    }
}

/// The sink's settings: a scenario's `[sink]` section, as it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SinkConfig {
    pub rule: ApplyRule,
    /// `group.id`.
    pub group: String,
    /// `auto.commit.interval.ms` (default 5 000).
    pub auto_commit_interval_ms: u64,
    /// `max.poll.records` (default 500).
    pub max_poll_records: u32,
    /// `auto.offset.reset`.
    pub auto_offset_reset: OffsetReset,
    /// `isolation.level` (default `read_uncommitted`).
    #[serde(default)]
    pub isolation_level: IsolationLevel,
    /// What a Kafka tombstone (a record with a null value) does to the index.
    #[serde(default)]
    pub null_values: NullValues,
}

/// `behavior.on.null.values`, the Elasticsearch sink connector's name for it (reference
/// sinks.md: `ElasticsearchSinkConnectorConfig`; `ignore` was its default before 11.0.0): what a
/// Kafka tombstone does to the index. Debezium follows every `op=d` event with a tombstone of
/// the same key (`tombstones.on.delete=true`), so on a live topic the `op=d` event deletes and
/// the tombstone adds nothing; on a compacted topic the cleaner removes the `op=d` event once
/// its tombstone is cleanable, and the tombstone is then the only delete left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NullValues {
    /// A tombstone changes nothing: only `op=d` events delete.
    #[default]
    Ignore,
    /// A tombstone deletes its key's document.
    Delete,
}

impl NullValues {
    pub const ALL: [NullValues; 2] = [NullValues::Ignore, NullValues::Delete];

    pub fn name(self) -> &'static str {
        match self {
            NullValues::Ignore => "ignore",
            NullValues::Delete => "delete",
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Epoch {
    /// Documents the snapshot saw.
    seen: BTreeSet<(TableId, Key)>,
    tables: BTreeSet<TableId>,
    /// Set when the `last` record arrives: the log end offsets to reach before closing.
    close_at: Option<Vec<(TopicPartition, u64)>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Volatile {
    started: bool,
    positions: BTreeMap<TopicPartition, u64>,
    uncommitted: bool,
    commit_armed: bool,
    fetch_request: Option<u64>,
    commit_request: Option<u64>,
    read_request: Option<u64>,
    next_request: u64,
    /// The consumer failed (`auto.offset.reset=none` and no committed offset): why. It fetches
    /// nothing until it is restarted.
    failed: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SearchIndex {
    pub config: Fixed<SinkConfig>,
    /// The index: durable.
    pub docs: Docs,
    /// Open snapshot epochs by snapshot LSN (durable with the index).
    epochs: BTreeMap<Lsn, Epoch>,
    closed_epochs: BTreeSet<Lsn>,
    /// Per document, the newest source position a record about it came from: a streamed
    /// change's LSN, or a snapshot read's snapshot LSN (snapshot-epoch only).
    last_written: BTreeMap<(TableId, Key), Lsn>,
    volatile: Volatile,
}

impl SearchIndex {
    pub fn new(config: Fixed<SinkConfig>) -> SearchIndex {
        SearchIndex {
            config,
            docs: Docs::default(),
            epochs: BTreeMap::new(),
            closed_epochs: BTreeSet::new(),
            last_written: BTreeMap::new(),
            volatile: Volatile::default(),
        }
    }

    /// The consumer's current positions.
    pub fn positions(&self) -> &BTreeMap<TopicPartition, u64> {
        &self.volatile.positions
    }

    /// Why the consumer failed, if it did.
    pub fn failed(&self) -> Option<&str> {
        self.volatile.failed.as_deref()
    }

    fn read_group(&mut self, ctx: &mut Ctx) {
        let group = self.config.group.clone();
        let reset = self.config.auto_offset_reset;
        self.volatile.read_request = Some(self.request(ctx, KafkaRequest::ReadGroup { group, reset }));
    }

    /// Whether a completed snapshot epoch is waiting for its records to be consumed before it
    /// closes.
    pub fn has_closing_epochs(&self) -> bool {
        self.epochs.values().any(|epoch| epoch.close_at.is_some())
    }

    /// Live documents of a table.
    pub fn live(&self, table: TableId) -> impl Iterator<Item = (Key, crate::core::ids::Row)> + '_ {
        self.docs.iter().into_iter().filter_map(move |((t, key), doc)| match doc {
            Doc::Live(row) if t == table => Some((key, row)),
            _ => None,
        })
    }

    fn request(&mut self, ctx: &mut Ctx, request: KafkaRequest) -> u64 {
        self.volatile.next_request += 1;
        let request_id = self.volatile.next_request;
        ctx.send(Node::Kafka, Msg::Kafka { request_id, request });
        request_id
    }

    fn fetch(&mut self, ctx: &mut Ctx) {
        let positions = self.volatile.positions.iter().map(|(tp, position)| (*tp, *position)).collect();
        let max_records = self.config.max_poll_records;
        self.volatile.fetch_request = Some(
            self.request(ctx, KafkaRequest::Fetch { positions, max_records, isolation: self.config.isolation_level }),
        );
    }

    /// Applies one record by the configured rule.
    fn apply(&mut self, record: &KafkaRecord) -> (SinkAction, Option<Doc>, Option<Doc>) {
        let Some(event) = record.value else {
            return self.apply_tombstone(record);
        };
        let id = (event.source.table, record.key);
        let rule = self.config.rule;
        let decide = |before| match rule {
            ApplyRule::NaiveUpsert => naive(&event, before),
            ApplyRule::VersionGuard | ApplyRule::SnapshotEpoch => version_guard(&event, before),
        };
        let before = self.docs.get(id);
        let (action, after) = decide(before);
        if after != before {
            self.docs.set(id, after);
        }
        if self.config.rule == ApplyRule::SnapshotEpoch {
            self.track_epochs(&event, id);
        }
        (action, before, after)
    }

    /// A Kafka tombstone, by `behavior.on.null.values`: ignored, or a delete of the key's live
    /// document (its version unknown: the tombstone carries only the key, so the document's own
    /// version is the one a version guard keeps).
    fn apply_tombstone(&mut self, record: &KafkaRecord) -> (SinkAction, Option<Doc>, Option<Doc>) {
        let (NullValues::Delete, crate::core::event::Topic::Change(table)) = (self.config.null_values, record.tp.topic)
        else {
            return (SinkAction::Ignored, None, None);
        };
        let id = (table, record.key);
        let before = self.docs.get(id);
        let Some(Doc::Live(row)) = before else {
            return (SinkAction::Ignored, before, before);
        };
        let after = match self.config.rule {
            ApplyRule::NaiveUpsert => None,
            ApplyRule::VersionGuard | ApplyRule::SnapshotEpoch => Some(Doc::Tombstone(Some(row.version))),
        };
        self.docs.set(id, after);
        (SinkAction::Deleted, before, after)
    }

    fn track_epochs(&mut self, event: &ChangeEvent, id: (TableId, Key)) {
        let lsn = event.source.lsn;
        let last = self.last_written.entry(id).or_insert(lsn);
        *last = (*last).max(lsn);
        // An incremental snapshot's reads are no epoch: they come chunk by chunk among the
        // streamed changes, and a chunk retracts nothing (it only reads rows that exist). Nor
        // are a blocking snapshot's, in the model: it reads some tables at the current time,
        // not every table at the position its `source.lsn` names (on the wire its markers are
        // an initial snapshot's; a sink that took it for an epoch would retract by table).
        if event.op == Op::Read
            && !matches!(
                event.source.snapshot,
                crate::core::event::SnapshotMarker::Incremental | crate::core::event::SnapshotMarker::Blocking
            )
            && !self.closed_epochs.contains(&lsn)
        {
            let epoch = self.epochs.entry(lsn).or_default();
            epoch.seen.insert(id);
            epoch.tables.insert(id.0);
        }
    }

    fn note_epoch_end(&mut self, event: &ChangeEvent, log_end_offsets: &[(TopicPartition, u64)]) {
        if event.op == Op::Read
            && event.source.snapshot.is_last()
            && let Some(epoch) = self.epochs.get_mut(&event.source.lsn)
        {
            epoch.close_at = Some(log_end_offsets.to_vec());
        }
    }

    fn close_epochs(&mut self, ctx: &mut Ctx) {
        let ready: Vec<Lsn> = self
            .epochs
            .iter()
            .filter(|(_, epoch)| {
                epoch.close_at.as_ref().is_some_and(|ends| {
                    ends.iter().all(|(tp, end)| self.volatile.positions.get(tp).is_some_and(|p| p >= end))
                })
            })
            .map(|(lsn, _)| *lsn)
            .collect();
        for lsn in ready {
            let epoch = self.epochs.remove(&lsn).expect("epoch exists");
            self.closed_epochs.insert(lsn);
            // Older snapshots that never completed were abandoned: this one supersedes them.
            let abandoned: Vec<Lsn> = self
                .epochs
                .iter()
                .filter(|(older, e)| **older < lsn && e.close_at.is_none())
                .map(|(l, _)| *l)
                .collect();
            for older in abandoned {
                self.epochs.remove(&older);
                self.closed_epochs.insert(older);
            }
            let mut removed = Vec::new();
            for (id, doc) in self.docs.iter() {
                // Written from a later position (a streamed change, or a newer snapshot whose
                // records were consumed before this epoch closed): newer than this snapshot.
                let touched_after = self.last_written.get(&id).is_some_and(|written| *written >= lsn);
                if let Doc::Live(row) = doc
                    && epoch.tables.contains(&id.0)
                    && !epoch.seen.contains(&id)
                    && !touched_after
                {
                    removed.push((id.0, id.1, row));
                }
            }
            for (table, key, row) in &removed {
                self.docs.set((*table, *key), Some(Doc::Tombstone(Some(row.version))));
            }
            ctx.observe(Observation::SinkReconciled { epoch_lsn: lsn, removed });
        }
    }

    fn on_fetched(&mut self, ctx: &mut Ctx, records: Vec<KafkaRecord>, log_end_offsets: Vec<(TopicPartition, u64)>) {
        let mut applies = Vec::with_capacity(records.len());
        for record in &records {
            if !matches!(record.tp.topic, crate::core::event::Topic::Change(_)) {
                // The index's consumer reads only change topics' documents: heartbeats, logical
                // messages (`<topic.prefix>.message`) and routed outbox events are passed over.
                self.volatile.positions.insert(record.tp, record.offset + 1);
                continue;
            }
            let (action, before, after) = self.apply(record);
            applies.push(Apply { record: *record, action, before, after });
            self.volatile.positions.insert(record.tp, record.offset + 1);
            if let Some(event) = record.value {
                self.note_epoch_end(&event, &log_end_offsets);
            }
        }
        ctx.observe(Observation::SinkApplied { applies });
        if self.config.rule == ApplyRule::SnapshotEpoch {
            self.close_epochs(ctx);
        }
        if !records.is_empty() {
            self.volatile.uncommitted = true;
            if !self.volatile.commit_armed {
                self.volatile.commit_armed = true;
                ctx.set_timer(Timer::SinkCommit, self.config.auto_commit_interval_ms);
            }
        }
        self.fetch(ctx);
    }
}

fn naive(event: &ChangeEvent, _before: Option<Doc>) -> (SinkAction, Option<Doc>) {
    match (event.op, event.after) {
        (Op::Delete, _) => (SinkAction::Deleted, None),
        (_, Some(row)) => (SinkAction::Upserted, Some(Doc::Live(row))),
        (_, None) => (SinkAction::Ignored, _before),
    }
}

fn version_guard(event: &ChangeEvent, before: Option<Doc>) -> (SinkAction, Option<Doc>) {
    let stored_version = match before {
        None => None,
        Some(Doc::Live(row)) => Some(row.version),
        Some(Doc::Tombstone(version)) => version,
    };
    match (event.op, event.after) {
        (Op::Delete, _) => {
            let delete_version = event.before.map(|row| row.version);
            match (before, delete_version, stored_version) {
                // A delete of an older version than the document holds is stale.
                (Some(Doc::Live(_)), Some(deleted), Some(stored)) if deleted < stored => {
                    (SinkAction::RejectedStale, before)
                }
                (Some(Doc::Live(_)), deleted, stored) => {
                    (SinkAction::Deleted, Some(Doc::Tombstone(deleted.or(stored))))
                }
                (Some(Doc::Tombstone(existing)), deleted, _) => {
                    (SinkAction::Ignored, Some(Doc::Tombstone(existing.max(deleted))))
                }
                (None, deleted, _) => (SinkAction::Deleted, Some(Doc::Tombstone(deleted))),
            }
        }
        (_, Some(row)) => match stored_version {
            Some(stored) if row.version <= stored => (SinkAction::RejectedStale, before),
            // A tombstone of unknown version refuses every upsert: it cannot tell old from new.
            None if matches!(before, Some(Doc::Tombstone(None))) => (SinkAction::RejectedStale, before),
            _ => (SinkAction::Upserted, Some(Doc::Live(row))),
        },
        (_, None) => (SinkAction::Ignored, before),
    }
}

impl Component for SearchIndex {
    fn start(&mut self, ctx: &mut Ctx) {
        self.volatile = Volatile { started: true, ..Volatile::default() };
        self.read_group(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx, _from: Node, msg: Msg) {
        let Msg::KafkaReply { request_id, reply } = msg else { return };
        match reply {
            KafkaReply::Group { committed, partitions } if Some(request_id) == self.volatile.read_request => {
                self.volatile.read_request = None;
                let committed: BTreeMap<_, _> = committed.into_iter().collect();
                // `auto.offset.reset` where nothing is committed.
                let undefined: Vec<TopicPartition> = partitions
                    .iter()
                    .filter(|(tp, reset)| reset.is_none() && !committed.contains_key(tp) && !tp.topic.is_signal())
                    .map(|(tp, _)| *tp)
                    .collect();
                if !undefined.is_empty() {
                    // `Fetcher`/`SubscriptionState`: no position and no reset policy.
                    let reason = "org.apache.kafka.clients.consumer.NoOffsetForPartitionException: Undefined offset \
                                  with no reset policy for partitions (auto.offset.reset=none)"
                        .to_string();
                    self.volatile.failed = Some(reason.clone());
                    ctx.observe(Observation::SinkFailed { reason, partitions: undefined });
                    return;
                }
                // The sink reads the pipeline's topics, never a Kafka signal channel's.
                self.volatile.positions = partitions
                    .iter()
                    .filter(|(tp, _)| !tp.topic.is_signal())
                    .map(|(tp, reset)| (*tp, committed.get(tp).copied().or(*reset).unwrap_or(0)))
                    .collect();
                ctx.observe(Observation::SinkStarted {
                    positions: self.volatile.positions.iter().map(|(tp, p)| (*tp, *p)).collect(),
                });
                self.fetch(ctx);
            }
            KafkaReply::Fetched { records, log_end_offsets } if Some(request_id) == self.volatile.fetch_request => {
                self.volatile.fetch_request = None;
                self.on_fetched(ctx, records, log_end_offsets);
            }
            KafkaReply::GroupCommitted if Some(request_id) == self.volatile.commit_request => {
                self.volatile.commit_request = None;
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx, timer: Timer) {
        if timer == Timer::KafkaRetry {
            // The consumer reconnects and asks again for what was not answered.
            if self.volatile.read_request.is_some() {
                self.read_group(ctx);
            } else {
                if self.volatile.fetch_request.is_some() {
                    self.fetch(ctx);
                }
                if self.volatile.commit_request.is_some() {
                    self.volatile.uncommitted = true;
                    self.volatile.commit_request = None;
                    ctx.set_timer(Timer::SinkCommit, 0);
                }
            }
            return;
        }
        if timer == Timer::SinkCommit {
            self.volatile.commit_armed = false;
            if self.volatile.uncommitted {
                self.volatile.uncommitted = false;
                let group = self.config.group.clone();
                let positions = self.volatile.positions.iter().map(|(tp, p)| (*tp, *p)).collect();
                self.volatile.commit_request = Some(self.request(ctx, KafkaRequest::CommitGroup { group, positions }));
            }
        }
    }

    fn on_connection_lost(&mut self, ctx: &mut Ctx, peer: Node) {
        if peer == Node::Kafka && self.volatile.started {
            ctx.set_timer(Timer::KafkaRetry, crate::core::protocol::KAFKA_RECONNECT_BACKOFF_MS);
        }
    }

    fn crash(&mut self) {
        self.volatile = Volatile::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::{Origin, SnapshotMarker, SourceInfo};
    use crate::core::ids::{Row, Status};
    use crate::core::keymap::DENSE_KEYS;

    fn row(version: u32) -> Row {
        Row::new(version, Status::Submitted, 1)
    }

    fn event(op: Op, before: Option<Row>, after: Option<Row>) -> ChangeEvent {
        ChangeEvent {
            op,
            before,
            after,
            source: SourceInfo {
                connector: Origin::Postgresql,
                table: TableId(0),
                lsn: Lsn(1),
                tx_id: None,
                snapshot: SnapshotMarker::Streamed,
                ts_ms: 0,
            },
        }
    }

    #[test]
    fn the_version_guard_refuses_older_rows_and_remembers_deletes() {
        let live = Some(Doc::Live(row(3)));
        assert_eq!(version_guard(&event(Op::Update, None, Some(row(2))), live).0, SinkAction::RejectedStale);
        assert_eq!(version_guard(&event(Op::Update, None, Some(row(4))), live).0, SinkAction::Upserted);
        let (action, after) = version_guard(&event(Op::Delete, Some(row(3)), None), live);
        assert_eq!((action, after), (SinkAction::Deleted, Some(Doc::Tombstone(Some(3)))));
        assert_eq!(version_guard(&event(Op::Read, None, Some(row(3))), after).0, SinkAction::RejectedStale);
    }

    #[test]
    fn the_naive_sink_forgets_deletes_and_takes_any_row() {
        assert_eq!(naive(&event(Op::Delete, None, None), Some(Doc::Live(row(3)))), (SinkAction::Deleted, None));
        assert_eq!(
            naive(&event(Op::Read, None, Some(row(1))), Some(Doc::Live(row(3)))),
            (SinkAction::Upserted, Some(Doc::Live(row(1))))
        );
    }

    /// Snapshot reads of `keys` at snapshot position `lsn`, the last one marked last.
    fn snapshot(lsn: u64, keys: &[Key], first_offset: u64) -> Vec<KafkaRecord> {
        let tp = TopicPartition { topic: crate::core::event::Topic::Change(TableId(0)), partition: 0 };
        keys.iter()
            .enumerate()
            .map(|(index, key)| {
                let mut value = event(Op::Read, None, Some(row(1)));
                value.source.lsn = Lsn(lsn);
                value.source.snapshot = match index {
                    _ if index + 1 == keys.len() => SnapshotMarker::Last,
                    0 => SnapshotMarker::First,
                    _ => SnapshotMarker::Middle,
                };
                KafkaRecord { tp, offset: first_offset + index as u64, key: *key, value: Some(value) }
            })
            .collect()
    }

    /// `behavior.on.null.values`: a Kafka tombstone deletes a live document only under `delete`,
    /// and keeps a version guard's versioned tombstone.
    #[test]
    fn a_tombstone_deletes_only_when_the_sink_says_so() {
        for (null_values, rule, expected) in [
            (NullValues::Ignore, ApplyRule::VersionGuard, Some(Doc::Live(Row::new(2, Status::Submitted, 1)))),
            (NullValues::Delete, ApplyRule::VersionGuard, Some(Doc::Tombstone(Some(2)))),
            (NullValues::Delete, ApplyRule::NaiveUpsert, None),
        ] {
            let config = SinkConfig {
                rule,
                group: "g".into(),
                auto_commit_interval_ms: 5000,
                max_poll_records: 500,
                auto_offset_reset: OffsetReset::Earliest,
                isolation_level: IsolationLevel::ReadUncommitted,
                null_values,
            };
            let mut sink = SearchIndex::new(Fixed::new(config));
            sink.docs.set((TableId(0), 3), Some(Doc::Live(Row::new(2, Status::Submitted, 1))));
            let tp = TopicPartition { topic: crate::core::event::Topic::Change(TableId(0)), partition: 0 };
            let (action, _, _) = sink.apply(&KafkaRecord { tp, offset: 9, key: 3, value: None });
            assert_eq!(sink.docs.get((TableId(0), 3)), expected, "{null_values:?} {rule:?}");
            let deleted = null_values == NullValues::Delete;
            assert_eq!(action, if deleted { SinkAction::Deleted } else { SinkAction::Ignored });
        }
    }

    #[test]
    fn an_older_epoch_closing_late_spares_what_a_newer_snapshot_wrote() {
        // A lagging consumer reads two snapshots before the older one's epoch can close: the
        // older (position 10) saw claims 1, 2 and 4; the newer (position 20) saw 1, 2 and 3.
        let config = SinkConfig {
            rule: ApplyRule::SnapshotEpoch,
            group: "g".into(),
            auto_commit_interval_ms: 5000,
            max_poll_records: 500,
            auto_offset_reset: OffsetReset::Earliest,
            isolation_level: IsolationLevel::ReadUncommitted,
            null_values: NullValues::Ignore,
        };
        let mut sink = SearchIndex::new(Fixed::new(config));
        let mut records = snapshot(10, &[1, 2, 4], 0);
        records.extend(snapshot(20, &[1, 2, 3], 3));
        let tp = records[0].tp;
        let mut outbox = crate::core::component::Outbox::default();
        let mut ctx = Ctx::new(crate::core::time::SimTime::ZERO, Node::Sink, &mut outbox);
        sink.on_fetched(&mut ctx, records, vec![(tp, 6)]);
        // Both epochs closed: claim 3 (only the newer snapshot had it) stays; claim 4 (only the
        // older one had it) is removed by the newer one.
        assert!(!sink.has_closing_epochs());
        assert_eq!(sink.docs.get((TableId(0), 3)), Some(Doc::Live(row(1))));
        assert_eq!(sink.docs.get((TableId(0), 4)), Some(Doc::Tombstone(Some(1))));
        assert_eq!(sink.live(TableId(0)).map(|(key, _)| key).collect::<Vec<_>>(), vec![1, 2, 3]);
    }

    #[test]
    fn documents_are_stored_the_same_way_whatever_their_history() {
        let mut docs = Docs::default();
        let mut direct = Docs::default();
        for key in [5, 1, -2, DENSE_KEYS + 3, 9] {
            docs.set((TableId(0), key), Some(Doc::Live(row(1))));
        }
        for key in [9, 5, DENSE_KEYS + 3, -2] {
            docs.set((TableId(0), key), None);
        }
        direct.set((TableId(0), 1), Some(Doc::Live(row(1))));
        assert_eq!(docs, direct, "emptied slots leave no trace");
        assert_eq!(docs.get((TableId(0), 9)), None);
        docs.set((TableId(0), -2), Some(Doc::Tombstone(None)));
        docs.set((TableId(0), DENSE_KEYS + 3), Some(Doc::Live(row(2))));
        let keys: Vec<Key> = docs.iter().into_iter().map(|((_, key), _)| key).collect();
        assert_eq!(keys, vec![-2, 1, DENSE_KEYS + 3], "in key order");
    }
}
