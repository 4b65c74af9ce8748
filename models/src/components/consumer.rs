//! The outbox's consumer: a Kafka consumer group member reading the routed event topics, with its
//! own database, where it applies each event's side effect and keeps an inbox (`processed_event`,
//! the event ids it has handled) — the other half of the transactional outbox (reference
//! debezium-postgres.md §7.1; the game-day drill's consumer, DOMAIN.md drill 1).
//!
//! Per record, in `poll()` order, one record at a time (`processing_ms` each local transaction):
//! - `same-transaction` (the pattern): one local transaction inserts the event id into
//!   `processed_event` if absent and, only then, applies the side effect; a duplicate (the id is
//!   there) is absorbed. Then the offset is committed.
//! - `none`: the side effect is applied for every record, duplicates included.
//! - `separate-transaction`: the inbox insert commits in one transaction and the side effect in
//!   the next; a crash between them leaves the event marked handled and its effect never applied.
//! - `offset-before-effect`: the offset is committed (`commitSync`) before the record is handled
//!   (inbox and effect in one transaction): a crash after the commit and before the handling
//!   loses the event for this group.
//!
//! Offsets: with `enable.auto.commit = false` (the default here, as the pattern needs), a
//! `commitSync` of the position after each handled record; with `true`, the consumed positions are
//! committed every `auto.commit.interval.ms` (`ConsumerCoordinator.maybeAutoCommitOffsetsAsync`:
//! what `poll()` returned and the loop handled). A crash loses everything volatile (positions,
//! fetched records, the step in progress); the database (inbox and effects) is durable, and a
//! restarted member resumes from the group's committed offsets (`auto.offset.reset` where none).
//! Left out: rebalancing between several members, `max.poll.interval.ms`.

use crate::core::component::{Component, Ctx, Timer};
use crate::core::event::{KafkaRecord, Topic, TopicPartition};
use crate::core::ids::{Key, Node, TableId};
use crate::core::observe::{Handled, Observation};
use crate::core::protocol::{IsolationLevel, KafkaReply, KafkaRequest, Msg, OffsetReset};
use crate::core::shared::Fixed;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How the consumer makes its side effects idempotent, if it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum InboxRule {
    SameTransaction,
    None,
    SeparateTransaction,
    OffsetBeforeEffect,
}

impl InboxRule {
    pub const ALL: [InboxRule; 4] =
        [InboxRule::SameTransaction, InboxRule::None, InboxRule::SeparateTransaction, InboxRule::OffsetBeforeEffect];

    /// Its name in a scenario (`[consumer] inbox`).
    pub fn name(self) -> &'static str {
        match self {
            InboxRule::SameTransaction => "same-transaction",
            InboxRule::None => "none",
            InboxRule::SeparateTransaction => "separate-transaction",
            InboxRule::OffsetBeforeEffect => "offset-before-effect",
        }
    }

    /// The rule in words, for the handoff record.
    pub fn describe(self) -> &'static str {
        match self {
            InboxRule::SameTransaction => "inbox (processed_event) and side effect in one local transaction",
            InboxRule::None => "no inbox: the side effect for every record",
            InboxRule::SeparateTransaction => "inbox insert and side effect in two local transactions",
            InboxRule::OffsetBeforeEffect => "offset committed before the event is handled",
        }
    }
}

/// A scenario's `[consumer]` section.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConsumerConfig {
    pub inbox: InboxRule,
    /// `group.id`.
    pub group: String,
    /// `enable.auto.commit`.
    pub enable_auto_commit: bool,
    /// `auto.commit.interval.ms` (default 5 000).
    pub auto_commit_interval_ms: u64,
    /// `max.poll.records` (default 500).
    pub max_poll_records: u32,
    /// `auto.offset.reset`.
    pub auto_offset_reset: OffsetReset,
    /// How long one local transaction of the consumer's takes (testbed).
    pub processing_ms: u64,
    /// `isolation.level` (default `read_uncommitted`).
    #[serde(default)]
    pub isolation_level: IsolationLevel,
}

/// Where the record in hand is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Step {
    /// Its first local transaction is due.
    First,
    /// `separate-transaction`: the side effect's transaction is due.
    Effect,
    /// `offset-before-effect`: waiting for the commit before handling it.
    CommitFirst,
    /// `offset-before-effect`: committed; handling is due.
    AfterCommit,
    /// Handled: its `commitSync` is the next thing the loop does (a step of its own, so that a
    /// crash can come between the local commit and Kafka's).
    CommitDue,
    /// Handled; waiting for its `commitSync`.
    CommitAfter,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Volatile {
    started: bool,
    positions: BTreeMap<TopicPartition, u64>,
    /// Fetched and not yet handled.
    queue: VecDeque<KafkaRecord>,
    step: Option<Step>,
    work_armed: bool,
    uncommitted: bool,
    commit_armed: bool,
    fetch_request: Option<u64>,
    commit_request: Option<u64>,
    read_request: Option<u64>,
    next_request: u64,
    failed: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct InboxConsumer {
    pub config: Fixed<ConsumerConfig>,
    /// `processed_event`: the event ids handled (durable: the consumer's database).
    pub processed: BTreeSet<(TableId, Key)>,
    /// Side effects applied, per event (durable).
    pub effects: BTreeMap<(TableId, Key), u32>,
    volatile: Volatile,
}

impl InboxConsumer {
    pub fn new(config: Fixed<ConsumerConfig>) -> InboxConsumer {
        InboxConsumer { config, processed: BTreeSet::new(), effects: BTreeMap::new(), volatile: Volatile::default() }
    }

    /// Its positions in the routed partitions.
    pub fn positions(&self) -> &BTreeMap<TopicPartition, u64> {
        &self.volatile.positions
    }

    /// Nothing fetched is waiting to be handled.
    pub fn is_idle(&self) -> bool {
        self.volatile.queue.is_empty() && self.volatile.step.is_none()
    }

    /// Why the consumer failed, if it did.
    pub fn failed(&self) -> Option<&str> {
        self.volatile.failed.as_deref()
    }

    fn request(&mut self, ctx: &mut Ctx, request: KafkaRequest) -> u64 {
        self.volatile.next_request += 1;
        let request_id = self.volatile.next_request;
        ctx.send(Node::Kafka, Msg::Kafka { request_id, request });
        request_id
    }

    fn read_group(&mut self, ctx: &mut Ctx) {
        let group = self.config.group.clone();
        let reset = self.config.auto_offset_reset;
        self.volatile.read_request = Some(self.request(ctx, KafkaRequest::ReadGroup { group, reset }));
    }

    fn fetch(&mut self, ctx: &mut Ctx) {
        if self.volatile.fetch_request.is_some() || self.volatile.positions.is_empty() {
            return;
        }
        let positions = self.volatile.positions.iter().map(|(tp, position)| (*tp, *position)).collect();
        let max_records = self.config.max_poll_records;
        self.volatile.fetch_request = Some(
            self.request(ctx, KafkaRequest::Fetch { positions, max_records, isolation: self.config.isolation_level }),
        );
    }

    fn commit(&mut self, ctx: &mut Ctx) {
        let group = self.config.group.clone();
        let positions = self.volatile.positions.iter().map(|(tp, p)| (*tp, *p)).collect();
        self.volatile.commit_request = Some(self.request(ctx, KafkaRequest::CommitGroup { group, positions }));
    }

    fn arm_work(&mut self, ctx: &mut Ctx) {
        if !self.volatile.work_armed && self.volatile.step.is_some() {
            self.volatile.work_armed = true;
            // A local transaction takes `processing_ms`; sending the commit, no time.
            let after_ms = if self.volatile.step == Some(Step::CommitDue) { 0 } else { self.config.processing_ms };
            ctx.set_timer(Timer::ConsumerWork, after_ms);
        }
    }

    /// Takes the next record in hand, or polls again.
    fn next(&mut self, ctx: &mut Ctx) {
        if self.volatile.queue.is_empty() {
            self.volatile.step = None;
            self.fetch(ctx);
            return;
        }
        self.volatile.step =
            Some(if self.config.inbox == InboxRule::OffsetBeforeEffect { Step::CommitFirst } else { Step::First });
        if self.volatile.step == Some(Step::CommitFirst) {
            self.advance_position();
            self.commit(ctx);
            return;
        }
        self.arm_work(ctx);
    }

    /// The position past the record in hand.
    fn advance_position(&mut self) {
        if let Some(record) = self.volatile.queue.front() {
            self.volatile.positions.insert(record.tp, record.offset + 1);
        }
    }

    fn observe(&self, ctx: &mut Ctx, record: &KafkaRecord, handled: Handled) {
        let (aggregate_id, event_type) = record
            .value
            .and_then(|event| event.after)
            .map_or((0, crate::core::ids::Status::Submitted), |row| (row.aggregate_id, row.status));
        ctx.observe(Observation::EventHandled {
            tp: record.tp,
            offset: record.offset,
            event: event_id(record),
            aggregate_id,
            event_type,
            handled,
        });
    }

    /// The inbox check and the side effect, in one local transaction.
    fn handle_in_one_transaction(&mut self, ctx: &mut Ctx, record: &KafkaRecord) {
        let id = event_id(record);
        if self.processed.insert(id) {
            let times = self.apply_effect(id);
            self.observe(ctx, record, Handled::Applied { times });
        } else {
            self.observe(ctx, record, Handled::Absorbed);
        }
    }

    fn apply_effect(&mut self, id: (TableId, Key)) -> u32 {
        let times = self.effects.entry(id).or_default();
        *times += 1;
        *times
    }

    /// The record in hand is handled: move past it and commit as configured.
    fn finish_record(&mut self, ctx: &mut Ctx) {
        self.advance_position();
        self.volatile.queue.pop_front();
        if self.config.enable_auto_commit {
            self.volatile.uncommitted = true;
            if !self.volatile.commit_armed {
                self.volatile.commit_armed = true;
                ctx.set_timer(Timer::SinkCommit, self.config.auto_commit_interval_ms);
            }
            self.next(ctx);
        } else {
            self.volatile.step = Some(Step::CommitDue);
            self.arm_work(ctx);
        }
    }

    fn work(&mut self, ctx: &mut Ctx) {
        if self.volatile.step == Some(Step::CommitDue) {
            self.volatile.step = Some(Step::CommitAfter);
            self.commit(ctx);
            return;
        }
        let Some(record) = self.volatile.queue.front().copied() else {
            self.volatile.step = None;
            return;
        };
        match (self.volatile.step, self.config.inbox) {
            (Some(Step::First), InboxRule::SameTransaction) | (Some(Step::AfterCommit), _) => {
                self.handle_in_one_transaction(ctx, &record);
                if self.volatile.step == Some(Step::AfterCommit) {
                    // Committed already: on to the next record.
                    self.volatile.queue.pop_front();
                    self.next(ctx);
                } else {
                    self.finish_record(ctx);
                }
            }
            (Some(Step::First), InboxRule::None) => {
                let times = self.apply_effect(event_id(&record));
                self.observe(ctx, &record, Handled::Applied { times });
                self.finish_record(ctx);
            }
            (Some(Step::First), InboxRule::SeparateTransaction) => {
                if self.processed.insert(event_id(&record)) {
                    self.observe(ctx, &record, Handled::InboxRecorded);
                    self.volatile.step = Some(Step::Effect);
                    self.arm_work(ctx);
                } else {
                    self.observe(ctx, &record, Handled::Absorbed);
                    self.finish_record(ctx);
                }
            }
            (Some(Step::Effect), _) => {
                let times = self.apply_effect(event_id(&record));
                self.observe(ctx, &record, Handled::Applied { times });
                self.finish_record(ctx);
            }
            _ => {}
        }
    }

    fn on_fetched(&mut self, ctx: &mut Ctx, records: Vec<KafkaRecord>) {
        self.volatile.queue.extend(records.into_iter().filter(|record| matches!(record.tp.topic, Topic::Routed(_))));
        if self.volatile.step.is_none() {
            self.next(ctx);
        }
    }
}

/// The event a routed record carries: its outbox row (the `id` header's event).
fn event_id(record: &KafkaRecord) -> (TableId, Key) {
    (record.value.map_or(TableId(0), |event| event.source.table), record.key)
}

impl Component for InboxConsumer {
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
                let routed: Vec<_> =
                    partitions.into_iter().filter(|(tp, _)| matches!(tp.topic, Topic::Routed(_))).collect();
                let undefined: Vec<TopicPartition> = routed
                    .iter()
                    .filter(|(tp, reset)| reset.is_none() && !committed.contains_key(tp))
                    .map(|(tp, _)| *tp)
                    .collect();
                if !undefined.is_empty() {
                    let reason = "org.apache.kafka.clients.consumer.NoOffsetForPartitionException: Undefined offset \
                                  with no reset policy for partitions (auto.offset.reset=none)"
                        .to_string();
                    self.volatile.failed = Some(reason.clone());
                    ctx.observe(Observation::ConsumerFailed { reason });
                    return;
                }
                self.volatile.positions = routed
                    .iter()
                    .map(|(tp, reset)| (*tp, committed.get(tp).copied().or(*reset).unwrap_or(0)))
                    .collect();
                ctx.observe(Observation::ConsumerStarted {
                    positions: self.volatile.positions.iter().map(|(tp, p)| (*tp, *p)).collect(),
                });
                self.fetch(ctx);
            }
            KafkaReply::Fetched { records, .. } if Some(request_id) == self.volatile.fetch_request => {
                self.volatile.fetch_request = None;
                self.on_fetched(ctx, records);
            }
            KafkaReply::GroupCommitted if Some(request_id) == self.volatile.commit_request => {
                self.volatile.commit_request = None;
                match self.volatile.step {
                    Some(Step::CommitFirst) => {
                        if let Some(record) = self.volatile.queue.front().copied() {
                            self.observe(ctx, &record, Handled::OffsetCommitted);
                        }
                        self.volatile.step = Some(Step::AfterCommit);
                        self.arm_work(ctx);
                    }
                    Some(Step::CommitAfter) => self.next(ctx),
                    _ => {}
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx, timer: Timer) {
        match timer {
            Timer::ConsumerWork => {
                self.volatile.work_armed = false;
                self.work(ctx);
            }
            Timer::SinkCommit => {
                self.volatile.commit_armed = false;
                if self.volatile.uncommitted && self.volatile.commit_request.is_none() {
                    self.volatile.uncommitted = false;
                    self.commit(ctx);
                }
            }
            Timer::KafkaRetry => {
                // The client reconnects and asks again for what was not answered.
                if self.volatile.read_request.is_some() {
                    self.read_group(ctx);
                    return;
                }
                if self.volatile.fetch_request.take().is_some() {
                    self.fetch(ctx);
                }
                if self.volatile.commit_request.is_some() {
                    self.commit(ctx);
                }
            }
            _ => {}
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
    use crate::core::component::Outbox;
    use crate::core::event::{ChangeEvent, Op, Origin, SnapshotMarker, SourceInfo};
    use crate::core::ids::{Row, Status};
    use crate::core::lsn::Lsn;
    use crate::core::time::SimTime;

    const OUTBOX: TableId = TableId(1);
    const TOPIC: TopicPartition = TopicPartition { topic: Topic::Routed(0), partition: 0 };

    fn consumer(inbox: InboxRule) -> InboxConsumer {
        InboxConsumer::new(Fixed::new(ConsumerConfig {
            inbox,
            group: "g".into(),
            enable_auto_commit: false,
            auto_commit_interval_ms: 5_000,
            max_poll_records: 500,
            auto_offset_reset: OffsetReset::Earliest,
            processing_ms: 10,
            isolation_level: IsolationLevel::ReadUncommitted,
        }))
    }

    fn record(offset: u64, event: Key) -> KafkaRecord {
        let source = SourceInfo {
            connector: Origin::Postgresql,
            table: OUTBOX,
            lsn: Lsn(0x100),
            tx_id: Some(740),
            snapshot: SnapshotMarker::Streamed,
            ts_ms: 0,
        };
        let value = ChangeEvent { op: Op::Create, before: None, after: Some(Row::event(7, Status::Approved)), source };
        KafkaRecord { tp: TOPIC, offset, key: event, value: Some(value) }
    }

    fn act(consumer: &mut InboxConsumer, f: impl FnOnce(&mut InboxConsumer, &mut Ctx)) -> Outbox {
        let mut outbox = Outbox::default();
        let mut ctx = Ctx::new(SimTime(0), Node::Consumer, &mut outbox);
        f(consumer, &mut ctx);
        outbox
    }

    /// Starts the consumer at offset 0 of the routed partition and hands it `records`.
    fn started(inbox: InboxRule, records: Vec<KafkaRecord>) -> InboxConsumer {
        let mut consumer = consumer(inbox);
        act(&mut consumer, |c, ctx| c.start(ctx));
        let read = consumer.volatile.read_request.expect("reads its group");
        act(&mut consumer, |c, ctx| {
            let reply = KafkaReply::Group { committed: vec![], partitions: vec![(TOPIC, Some(0))] };
            c.on_message(ctx, Node::Kafka, Msg::KafkaReply { request_id: read, reply })
        });
        let fetch = consumer.volatile.fetch_request.expect("fetches");
        act(&mut consumer, |c, ctx| {
            let reply = KafkaReply::Fetched { records, log_end_offsets: vec![] };
            c.on_message(ctx, Node::Kafka, Msg::KafkaReply { request_id: fetch, reply })
        });
        consumer
    }

    fn handled(outbox: &Outbox) -> Vec<Handled> {
        outbox
            .observations
            .iter()
            .filter_map(|observation| match observation {
                Observation::EventHandled { handled, .. } => Some(*handled),
                _ => None,
            })
            .collect()
    }

    fn acknowledge_commit(consumer: &mut InboxConsumer) -> Outbox {
        if consumer.volatile.step == Some(Step::CommitDue) {
            act(consumer, |c, ctx| c.on_timer(ctx, Timer::ConsumerWork));
        }
        let commit = consumer.volatile.commit_request.expect("a commit in flight");
        act(consumer, |c, ctx| {
            c.on_message(ctx, Node::Kafka, Msg::KafkaReply { request_id: commit, reply: KafkaReply::GroupCommitted })
        })
    }

    #[test]
    fn the_inbox_absorbs_a_redelivered_event_in_the_effects_transaction() {
        let mut c = started(InboxRule::SameTransaction, vec![record(0, 1), record(1, 1)]);
        let first = act(&mut c, |c, ctx| c.on_timer(ctx, Timer::ConsumerWork));
        assert_eq!(handled(&first), vec![Handled::Applied { times: 1 }]);
        acknowledge_commit(&mut c);
        let second = act(&mut c, |c, ctx| c.on_timer(ctx, Timer::ConsumerWork));
        assert_eq!(handled(&second), vec![Handled::Absorbed]);
        assert_eq!(c.effects.get(&(OUTBOX, 1)), Some(&1));
    }

    #[test]
    fn without_an_inbox_every_delivery_applies_the_effect() {
        let mut c = started(InboxRule::None, vec![record(0, 1), record(1, 1)]);
        act(&mut c, |c, ctx| c.on_timer(ctx, Timer::ConsumerWork));
        acknowledge_commit(&mut c);
        let second = act(&mut c, |c, ctx| c.on_timer(ctx, Timer::ConsumerWork));
        assert_eq!(handled(&second), vec![Handled::Applied { times: 2 }]);
    }

    #[test]
    fn a_crash_between_the_inbox_and_the_effect_loses_the_effect() {
        let mut c = started(InboxRule::SeparateTransaction, vec![record(0, 1)]);
        let first = act(&mut c, |c, ctx| c.on_timer(ctx, Timer::ConsumerWork));
        assert_eq!(handled(&first), vec![Handled::InboxRecorded]);
        c.crash();
        // The group's offset was never committed: the restarted consumer reads the event again.
        let mut again = InboxConsumer { volatile: Volatile::default(), ..c.clone() };
        act(&mut again, |c, ctx| c.start(ctx));
        let read = again.volatile.read_request.expect("reads its group");
        act(&mut again, |c, ctx| {
            let reply = KafkaReply::Group { committed: vec![], partitions: vec![(TOPIC, Some(0))] };
            c.on_message(ctx, Node::Kafka, Msg::KafkaReply { request_id: read, reply })
        });
        let fetch = again.volatile.fetch_request.expect("fetches");
        act(&mut again, |c, ctx| {
            let reply = KafkaReply::Fetched { records: vec![record(0, 1)], log_end_offsets: vec![] };
            c.on_message(ctx, Node::Kafka, Msg::KafkaReply { request_id: fetch, reply })
        });
        let redelivered = act(&mut again, |c, ctx| c.on_timer(ctx, Timer::ConsumerWork));
        assert_eq!(handled(&redelivered), vec![Handled::Absorbed]);
        assert!(again.effects.is_empty(), "the side effect never happened");
    }

    #[test]
    fn offset_before_effect_commits_first_and_handles_after_the_acknowledgement() {
        let mut c = started(InboxRule::OffsetBeforeEffect, vec![record(0, 1)]);
        assert_eq!(c.positions().get(&TOPIC), Some(&1), "the position past the record is committed first");
        let committed = acknowledge_commit(&mut c);
        assert_eq!(handled(&committed), vec![Handled::OffsetCommitted]);
        let handled_now = act(&mut c, |c, ctx| c.on_timer(ctx, Timer::ConsumerWork));
        assert_eq!(handled(&handled_now), vec![Handled::Applied { times: 1 }]);
        assert!(c.is_idle());
    }
}
