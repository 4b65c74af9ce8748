//! I9 outbox complete: every outbox event whose transaction committed reaches its routed topic.
//!
//! An outbox event is a row the service inserted into an outbox table (`[[table]] outbox`) in
//! its business change's transaction; the connector's `EventRouter` routes its insert to
//! `outbox.event.<aggregatetype>` (reference debezium-postgres.md §7.1). Its only way to Kafka is
//! the WAL through the connector's slot — or, while its row is still in the table, a snapshot of
//! the outbox table (an `op=r` is routed like an insert).
//!
//! Or it is a logical decoding message the service wrote in that transaction (a message outbox,
//! `[[message_outbox]]`: `pg_logical_emit_message(transactional, prefix, content)`), which
//! Debezium publishes as an `op=m` record, `DecodeLogicalDecodingMessageContent` turns into an
//! insert and the router routes (§7.2). Its only way to Kafka is the WAL: no row is left behind,
//! so no snapshot can ever bring it back. A transactional message's event is committed when its
//! transaction commits; a non-transactional one's when it is written (it is decoded even if its
//! transaction rolls back), unless a crash before its WAL was flushed lost it.
//!
//! Verifies, for every event of a routed outbox table and of every message outbox in the
//! surviving history (its transaction committed on a primary no promotion left behind):
//! - at the acceptance boundary (the pipeline caught up), that it was routed;
//! - wherever the run ends, that it can still be: an event never routed whose row is gone (the
//!   service deleted it in its own transaction, or it was a message and never had one) and whose
//!   WAL no slot of the connector holds any more (it committed before the connector's slot
//!   existed, or the slot was invalidated by `max_slot_wal_keep_size`, dropped or recreated after
//!   it committed) can never arrive. The finding names the event, its commit LSN (a message's:
//!   its own LSN) and why.
//!
//! With the outbox's consumer (`[consumer]`), at the acceptance boundary (the consumer has handled
//! everything Kafka holds): every routed event's side effect happened — at least once, and exactly
//! once with an inbox. An effect never applied is I9 (the finding says what the consumer's rule
//! did: an inbox insert committed apart from the effect, an offset committed before it); an
//! effect applied more than once is I10 (duplicates absorbed): the replayed record reached a
//! consumer whose rule did not absorb it.
//!
//! I10 also holds the routed topics to the pipeline's declared replay windows, as each record is
//! appended: an event appended again must have a reason since its previous append — the routing
//! connector's task started again (a worker killed, a task failed and restarted, a retriable
//! error: it resumes from its last stored offset and produces what came after it again), its
//! connector took a snapshot (a re-snapshot routes every row still in the outbox table again),
//! or Kafka restarted (the producer sends again what was not acknowledged: `acks=all` without
//! idempotence). A duplicate outside every window is one the pipeline cannot explain.
//!
//! Does not verify: an event still recoverable when the pipeline stopped short (its row is in
//! the table, or its WAL is still held): the handoff record lists it as not delivered; side
//! effects when the run did not reach its boundary; the sink's duplicates against the windows
//! (the handoff record counts them, by cause).

use super::{Boundary, Evidence, Finding};
use crate::core::event::Topic;
use crate::core::ids::{Row, TableId, event_uuid};
use crate::core::lsn::Lsn;
use crate::core::observe::Observation;
use crate::core::time::SimTime;
use crate::judge::oracle::{DocId, Oracle};
use crate::scenario::spec::Invariant;
use serde::{Deserialize, Serialize};

/// What happened to the connector's slot, as far as an event's WAL is concerned.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum SlotEvent {
    Created { at: SimTime, consistent_point: Lsn },
    Invalidated { at: SimTime, restart_lsn: Lsn, oldest_kept: Lsn },
    Dropped { at: SimTime },
}

impl SlotEvent {
    fn at(&self) -> SimTime {
        match self {
            SlotEvent::Created { at, .. } | SlotEvent::Invalidated { at, .. } | SlotEvent::Dropped { at } => *at,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OutboxComplete {
    slot: Vec<SlotEvent>,
    /// The consumer's side effects per event: how many times applied, and when first.
    effects: std::collections::BTreeMap<DocId, (u32, SimTime)>,
    /// Events the consumer handled in some way (absorbed, recorded, offset committed).
    handled: std::collections::BTreeSet<DocId>,
    /// When the latest replay window opened (the routing connector's task started, it began a
    /// snapshot, or Kafka restarted), what opened it, and the append sequence then (windows and
    /// appends are ordered by it: the exhaustive lens has no time).
    window: Option<(SimTime, Window, u64)>,
    /// The routing connector's task started and has not polled yet: until its first `poll()`
    /// returns, what reaches the routed topics was handed to the producer before the start (a
    /// send the network held back, the producer's retry after a clog), and the window takes those
    /// appends in when the first poll comes (outbox-steady-events, seed 16887 of its all-faults
    /// sweep: Debezium's in-process restart after a PostgreSQL crash started the task again 2 ms
    /// before the old sends, clogged for 20 s, reached Kafka; the restarted task then replayed them).
    #[serde(default)]
    awaiting_poll: bool,
}

/// What opens a replay window on the routed topics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Window {
    TaskStarted,
    Snapshot,
    KafkaRestarted,
}

impl Window {
    fn words(self) -> &'static str {
        match self {
            Window::TaskStarted => "its connector's task started again",
            Window::Snapshot => "its connector took a snapshot",
            Window::KafkaRestarted => "Kafka restarted",
        }
    }
}

/// An outbox event of the surviving history: its row (what it says), when it committed and at
/// which LSN, and how it was written.
pub struct OutboxEvent<'a> {
    /// `(outbox, id)`: an outbox table and the event's row key, or a message outbox
    /// ([`TableId::message_outbox`]) and the event's number.
    pub id: DocId,
    pub row: Row,
    /// When it committed (a non-transactional message: when it was written).
    pub at: SimTime,
    /// Its commit's LSN (a row's insert), or the message's own.
    pub lsn: Lsn,
    pub written: Written<'a>,
}

/// How the service wrote an outbox event.
pub enum Written<'a> {
    /// A row of an outbox table; `deleted`: the row is gone by the end (the service deletes it in
    /// its own transaction, or a later change did).
    Row { deleted: bool },
    /// A logical decoding message with this prefix: no row, ever.
    Message { prefix: &'a str, transactional: bool },
}

impl OutboxEvent<'_> {
    /// Whether nothing but its WAL can bring it to Kafka: its row is gone, or it never had one.
    pub fn row_gone(&self) -> bool {
        match self.written {
            Written::Row { deleted } => deleted,
            Written::Message { .. } => true,
        }
    }
}

/// Every event of the evidence's outboxes ([`crate::scenario::spec::Spec::event_outboxes`]), in
/// document order.
pub fn events(evidence: &Evidence) -> Vec<OutboxEvent<'_>> {
    events_of(&evidence.oracle, &evidence.outbox_tables)
}

/// Every event of these outboxes in the oracle's surviving history, in document order: an outbox
/// table's rows, then a message outbox's messages (a transactional one once its transaction
/// committed, a non-transactional one once written; neither when a crash or a promotion lost it).
pub fn events_of<'a>(oracle: &'a Oracle, outboxes: &[TableId]) -> Vec<OutboxEvent<'a>> {
    let mut events = Vec::new();
    for (id, versions) in oracle.histories() {
        if !outboxes.contains(&id.0) {
            continue;
        }
        let insert = versions.iter().find_map(|version| version.row.filter(Row::is_event).map(|row| (version, row)));
        if let Some((inserted, row)) = insert {
            let deleted = versions.last().is_some_and(|version| version.row.is_none());
            events.push(OutboxEvent {
                id,
                row,
                at: inserted.at,
                lsn: inserted.commit_lsn,
                written: Written::Row { deleted },
            });
        }
    }
    let mut messages: Vec<OutboxEvent> = oracle
        .messages
        .iter()
        .filter(|message| !message.lost && (message.durable_at.is_some() || !message.transactional))
        .filter_map(|message| {
            let event = message.event?;
            outboxes.contains(&event.id_in_outbox().0).then(|| OutboxEvent {
                id: event.id_in_outbox(),
                row: event.row(),
                at: if message.transactional { message.durable_at.unwrap_or(message.at) } else { message.at },
                lsn: message.lsn,
                written: Written::Message { prefix: &message.prefix, transactional: message.transactional },
            })
        })
        .collect();
    messages.sort_by_key(|event| event.id);
    messages.dedup_by_key(|event| event.id);
    events.extend(messages);
    events
}

impl OutboxComplete {
    /// Whether the checker reads an observation now: [`OutboxComplete::observes`], and a poll
    /// while a started task has not polled yet.
    pub fn observes_now(&self, observation: &Observation) -> bool {
        OutboxComplete::observes(observation)
            || (self.awaiting_poll && matches!(observation, Observation::Polled { .. }))
    }

    /// Whether the checker reads an observation (the slot's life).
    pub fn observes(observation: &Observation) -> bool {
        matches!(
            observation,
            Observation::SlotCreated { .. }
                | Observation::SlotInvalidated { .. }
                | Observation::SlotDropped { .. }
                | Observation::EventHandled { .. }
                | Observation::TaskStarted { .. }
                | Observation::SnapshotStarted { .. }
                | Observation::OfConnector { .. }
                | Observation::Crashed { .. }
                | Observation::Restarted { .. }
                | Observation::Appended { .. }
        )
    }

    pub fn observe(&mut self, evidence: &Evidence, at: SimTime, observation: &Observation, found: &mut Vec<Finding>) {
        if evidence.outbox_tables.is_empty() {
            return;
        }
        // The routing connector's own observations: tagged unless it is the first connector.
        let own = match observation {
            Observation::OfConnector { connector, observation } if *connector == evidence.outbox_connector => {
                Some(&**observation)
            }
            Observation::OfConnector { .. } => None,
            _ if evidence.outbox_connector == 0 => Some(observation),
            _ => None,
        };
        match own {
            Some(Observation::TaskStarted { .. }) => {
                self.window = Some((at, Window::TaskStarted, evidence.published.sequence()));
                self.awaiting_poll = true;
            }
            Some(Observation::Polled { .. }) if self.awaiting_poll => {
                // The task's first poll: what was appended since its start was sent before it.
                self.awaiting_poll = false;
                if let Some((_, _, opened)) = &mut self.window {
                    *opened = evidence.published.sequence();
                }
            }
            Some(Observation::SnapshotStarted { .. }) => {
                self.window = Some((at, Window::Snapshot, evidence.published.sequence()));
            }
            _ => {}
        }
        match observation {
            Observation::Crashed { process: crate::core::ids::Node::Kafka }
            | Observation::Restarted { process: crate::core::ids::Node::Kafka } => {
                self.window = Some((at, Window::KafkaRestarted, evidence.published.sequence()));
            }
            // A transactional record is on the topic only once its transaction commits; under
            // exactly-once the exactly-once check judges committed duplicates (with no window).
            Observation::Appended { records, transaction: None } => self.check_replays(evidence, at, records, found),
            _ => {}
        }
        let ours = |slot: &str| slot == evidence.slot_name.as_str();
        match observation {
            Observation::SlotCreated { slot, consistent_point, .. } if ours(slot) => {
                self.slot.push(SlotEvent::Created { at, consistent_point: *consistent_point });
            }
            Observation::SlotInvalidated { slot, restart_lsn, oldest_kept, .. } if ours(slot) => {
                self.slot.push(SlotEvent::Invalidated { at, restart_lsn: *restart_lsn, oldest_kept: *oldest_kept });
            }
            Observation::SlotDropped { slot, .. } if ours(slot) => self.slot.push(SlotEvent::Dropped { at }),
            Observation::EventHandled { event, handled, .. } => {
                self.handled.insert(*event);
                if let crate::core::observe::Handled::Applied { times } = handled {
                    self.effects.entry(*event).or_insert((0, at)).0 = *times;
                }
            }
            _ => {}
        }
    }

    /// I10's windows: each routed record of an event already on its topic came after a window
    /// opened since the event's previous append.
    fn check_replays(
        &self,
        evidence: &Evidence,
        at: SimTime,
        records: &[crate::core::event::KafkaRecord],
        found: &mut Vec<Finding>,
    ) {
        for record in records {
            let (crate::core::event::Topic::Routed(_), Some(value)) = (record.tp.topic, record.value) else {
                continue;
            };
            let id = (value.source.table, record.key);
            let Some(previous) = evidence.published.routed.get(&id) else { continue };
            if self.window.is_some_and(|(_, _, opened)| opened >= previous.last_seq) {
                continue;
            }
            found.push(
                Finding::new(Invariant::I10, Some(record.key), at)
                    .expected(format!(
                        "outbox event {} appended again to {} only inside a replay window (a restart of its \
                         connector's task, a snapshot, a Kafka restart)",
                        record.key,
                        evidence.names.topic(record.tp.topic)
                    ))
                    .seen(format!("appended again at {}, outside any window", evidence.record_at(record)))
                    .detail(format!(
                        "its previous append was at {}; {}: nothing in the pipeline declares this duplicate",
                        previous.last_at,
                        match self.window {
                            Some((opened, what, _)) => {
                                format!("the last window opened at {opened} ({}), before it", what.words())
                            }
                            None => "no window opened in the run".to_string(),
                        }
                    )),
            );
        }
    }

    /// Why an event's WAL is out of the connector's reach, if it is: it committed before the
    /// connector's first slot existed, or the slot was lost after it committed.
    fn out_of_reach(&self, evidence: &Evidence, event: &OutboxEvent) -> Option<String> {
        let slot = evidence.slot_name.as_str();
        let first = self.slot.iter().find_map(|slot_event| match slot_event {
            SlotEvent::Created { at, consistent_point } => Some((*at, *consistent_point)),
            _ => None,
        });
        match first {
            None => return Some(format!("no slot \"{slot}\" was ever created to hold its WAL")),
            Some((at, consistent_point)) if event.lsn < consistent_point => {
                return Some(format!(
                    "it committed before the connector's slot \"{slot}\" existed (created at {at}, consistent point \
                     {consistent_point}): no slot held its WAL"
                ));
            }
            Some(_) => {}
        }
        // The slot as the event's commit found it: lost (invalidated or dropped, not created
        // again since), it decodes nothing, and a slot created again starts past the event.
        let before = self.slot.iter().rev().find(|slot_event| slot_event.at() < event.at);
        match before {
            Some(SlotEvent::Invalidated { at, .. }) => {
                return Some(format!(
                    "it committed while the slot \"{slot}\" was lost (invalidated at {at}: max_slot_wal_keep_size): \
                     a lost slot decodes nothing, and a slot created again starts past it"
                ));
            }
            Some(SlotEvent::Dropped { at }) => {
                return Some(format!(
                    "it committed while the slot \"{slot}\" did not exist (dropped at {at}): a slot created again \
                     starts past it"
                ));
            }
            _ => {}
        }
        self.slot.iter().find_map(|slot_event| match slot_event {
            SlotEvent::Invalidated { at, restart_lsn, oldest_kept } if *at >= event.at => Some(format!(
                "the slot \"{slot}\" was invalidated at {at} before it was streamed (its restart_lsn {restart_lsn} \
                 fell behind the oldest WAL kept, {oldest_kept}: max_slot_wal_keep_size), and the WAL it needed is \
                 gone"
            )),
            SlotEvent::Dropped { at } if *at >= event.at => Some(format!(
                "the slot \"{slot}\" was dropped at {at} before it was streamed; a slot created again starts past it"
            )),
            _ => None,
        })
    }

    pub fn check(&self, evidence: &Evidence, boundary: &Boundary, found: &mut Vec<Finding>) {
        if evidence.outbox_tables.is_empty() {
            return;
        }
        if boundary.reached
            && let Some(rule) = evidence.consumer
        {
            self.check_effects(evidence, boundary, rule, found);
        }
        for event in events(evidence) {
            if evidence.published.routed.contains_key(&event.id) {
                continue;
            }
            let out_of_reach = self.out_of_reach(evidence, &event);
            let table = evidence.names.table(event.id.0);
            let row_fate = match event.written {
                Written::Row { deleted: true } => format!(
                    "its row was deleted from {table} (the service deletes it in its own transaction), so no snapshot \
                     of the outbox table can route it again: the event is gone for good"
                ),
                Written::Row { deleted: false } => {
                    format!("its row is still in {table}: a snapshot of the outbox table would route it (op=r)")
                }
                Written::Message { .. } if evidence.published.messages.contains_key(&event.lsn) => format!(
                    "it was written as a logical decoding message, which leaves no row behind: no snapshot can ever \
                     route it again, and the stream has gone past it; only its record on {} still holds its content, \
                     for a replay by hand",
                    evidence.names.topic(Topic::Message)
                ),
                Written::Message { .. } => "it was written as a logical decoding message, which leaves no row \
                     behind: no snapshot can ever route it again, the event is gone for good (reference \
                     debezium-postgres.md §7.2)"
                    .to_string(),
            };
            let detail = match (&out_of_reach, boundary.reached) {
                (Some(why), _) if event.row_gone() => format!("{why}; {row_fate}"),
                (Some(why), true) => format!("{why}; {row_fate}"),
                (None, true) => format!("{}; {row_fate}", passed_by(evidence, &event)),
                // Not caught up, and it can still arrive: not (yet) a finding.
                _ => continue,
            };
            let at = if boundary.reached { boundary.at } else { event.at };
            let (written, seen) = match event.written {
                Written::Row { .. } => (format!("committed at {}", event.at), "never routed: on no topic".to_string()),
                Written::Message { prefix, transactional } => (
                    format!(
                        "written as the {} logical message '{prefix}', committed at {}",
                        if transactional { "transactional" } else { "non-transactional" },
                        event.at
                    ),
                    if evidence.published.messages.contains_key(&event.lsn) {
                        format!("never routed: only its message's record, on {}", evidence.names.topic(Topic::Message))
                    } else {
                        "never routed: on no topic".to_string()
                    },
                ),
            };
            found.push(
                Finding::new(Invariant::I9, Some(event.id.1), at)
                    .expected(format!(
                        "outbox event {} (id {}, {} of claim {}, {written}) routed to {}",
                        event.id.1,
                        event_uuid(event.id.1),
                        event.row.event_type(),
                        event.row.aggregate_id,
                        routed_topics(evidence),
                    ))
                    .seen(seen)
                    .lsn(event.lsn)
                    .detail(detail),
            );
        }
    }
}

impl OutboxComplete {
    /// The consumer's side effects, at the boundary: each routed event's applied once (with an
    /// inbox) or at least once (without), and no more than once unless no rule absorbs repeats.
    fn check_effects(
        &self,
        evidence: &Evidence,
        boundary: &Boundary,
        rule: crate::components::consumer::InboxRule,
        found: &mut Vec<Finding>,
    ) {
        use crate::components::consumer::InboxRule;
        for event in events(evidence) {
            let Some(routed) = evidence.published.routed.get(&event.id) else { continue };
            let what =
                format!("outbox event {} ({} of claim {})", event.id.1, event.row.event_type(), event.row.aggregate_id);
            match self.effects.get(&event.id) {
                None => {
                    let why = match rule {
                        InboxRule::SeparateTransaction if self.handled.contains(&event.id) => {
                            "the consumer inserted its id into processed_event in one transaction and crashed before the side effect's transaction; the redelivered record found the id in the inbox and was skipped: the inbox must commit with the effect"
                        }
                        InboxRule::OffsetBeforeEffect => {
                            "the consumer committed the offset past it before handling it, and crashed before handling it: the group resumes after it and never delivers it again (at most once)"
                        }
                        _ => "the consumer went past it without applying its side effect",
                    };
                    found.push(
                        Finding::new(Invariant::I9, Some(event.id.1), boundary.at)
                            .expected(format!(
                                "{what}'s side effect applied (it reached the topic at {})",
                                routed.first_at
                            ))
                            .seen("never applied")
                            .lsn(event.lsn)
                            .detail(why),
                    );
                }
                Some((times, first_at)) if *times > 1 => {
                    let why = match rule {
                        InboxRule::None => {
                            "the consumer has no inbox: every delivery of the event applies its side effect again, and the pipeline delivers at least once (a restart replays what the stored offsets do not cover)"
                        }
                        _ => "the consumer's inbox did not absorb the replayed record",
                    };
                    found.push(
                        Finding::new(Invariant::I10, Some(event.id.1), boundary.at)
                            .expected(format!("{what}'s side effect applied once"))
                            .seen(format!(
                                "applied {times} times (first at {first_at}; {} record(s) of it on the topic)",
                                routed.records
                            ))
                            .lsn(event.lsn)
                            .detail(why),
                    );
                }
                Some(_) => {}
            }
        }
    }
}

/// Why an event the pipeline caught up past was never routed, as far as the evidence tells: a
/// message the connector's prefix filter leaves out, a message record the transforms did not
/// route, or the stream going past it.
fn passed_by(evidence: &Evidence, event: &OutboxEvent) -> String {
    let Written::Message { prefix, .. } = event.written else {
        return "the pipeline caught up without routing it: the connector's stream went past it".into();
    };
    if !evidence.message_prefixes.captures(prefix) {
        return format!(
            "the connector's message.prefix.include.list / message.prefix.exclude.list leaves out the prefix \
             '{prefix}' (LogicalDecodingMessageFilter): Debezium decodes the message and makes no record of it, and \
             its offset moves past it"
        );
    }
    if evidence.published.messages.contains_key(&event.lsn) {
        // What the transforms make of the outbox's messages, as the chain says it.
        return event
            .id
            .0
            .as_message_outbox()
            .and_then(|outbox| evidence.message_routing.get(usize::from(outbox)).cloned().flatten())
            .unwrap_or_else(|| {
                format!(
                    "its message's record reached {}, and the connector's transforms did not route it",
                    evidence.names.topic(Topic::Message)
                )
            });
    }
    "the pipeline caught up without routing it: the connector's stream went past it".into()
}

fn routed_topics(evidence: &Evidence) -> String {
    if evidence.names.routed.is_empty() {
        "a topic of its own (the connector's transforms route no event anywhere)".into()
    } else {
        evidence.names.routed.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::{MessageContent, MessageEvent, Node, Status};
    use crate::core::shared::{ByContent, CopyOnWrite};
    use crate::core::wal::CommittedTxn;

    fn written(lsn: u64, transactional: bool, xid: Option<u32>, id: i64) -> Observation {
        let event = MessageEvent { outbox: 0, id, aggregate_id: 7, event_type: Status::Approved };
        Observation::MessageWritten {
            server: Node::Pg1,
            lsn: Lsn(lsn),
            transactional,
            xid,
            prefix: "outbox".into(),
            database: None,
            committed: false,
            content: MessageContent::Event(event),
        }
    }

    fn committed(xid: u32, commit_lsn: u64) -> Observation {
        let txn = CommittedTxn {
            xid,
            csn: 1,
            first_lsn: Lsn(commit_lsn - 8),
            commit_lsn: Lsn(commit_lsn),
            end_lsn: Lsn(commit_lsn + 8),
            commit_time: SimTime(5),
            timeline: 1,
            changes: Vec::new(),
        };
        Observation::Committed { server: Node::Pg1, txn: ByContent(CopyOnWrite::new(txn)) }
    }

    /// A transactional message's event counts once its transaction committed (never when it
    /// rolled back); a non-transactional one's once written, unless a crash lost it unflushed.
    #[test]
    fn message_events_count_as_committed_by_what_their_message_is() {
        let mut oracle = Oracle::new(&[]);
        let at = SimTime(1);
        oracle.observe(at, &written(0x100, true, Some(740), 1));
        oracle.observe(at, &committed(740, 0x120));
        oracle.observe(at, &written(0x200, true, Some(741), 2)); // rolled back: no commit
        oracle.observe(at, &written(0x300, false, None, 3));
        let outboxes = [TableId::message_outbox(0)];
        let ids = |oracle: &Oracle| events_of(oracle, &outboxes).iter().map(|event| event.id.1).collect::<Vec<_>>();
        assert_eq!(ids(&oracle), [1, 3]);
        let events = events_of(&oracle, &outboxes);
        assert!(events.iter().all(OutboxEvent::row_gone), "a message leaves no row");
        assert!(matches!(events[1].written, Written::Message { prefix: "outbox", transactional: false }));
        assert!(events_of(&oracle, &[]).is_empty(), "only the outboxes asked for");
        oracle.observe(at, &Observation::CrashRecoveryEnded { server: Node::Pg1 });
        assert_eq!(ids(&oracle), [1], "the unflushed non-transactional message was lost in the crash");
    }
}

#[cfg(test)]
mod replay_window_tests {
    use crate::core::event::{ChangeEvent, KafkaRecord, Op, Origin, SnapshotMarker, SourceInfo, Topic, TopicPartition};
    use crate::core::ids::{Node, TableId};
    use crate::core::lsn::Lsn;
    use crate::core::observe::{Observation, TraceEvent};
    use crate::core::shared::Fixed;
    use crate::core::time::SimTime;
    use crate::judge::checkers::Checkers;
    use crate::judge::oracle::Oracle;
    use crate::scenario::spec::Invariant;

    const OUTBOX: TableId = TableId(1);

    fn checkers() -> Checkers {
        let mut checkers = Checkers::new(Oracle::new(&[]), Vec::new());
        checkers.evidence.outbox_tables = Fixed::new(vec![OUTBOX]);
        checkers
    }

    fn feed(checkers: &mut Checkers, at_ms: u64, observation: Observation) {
        checkers.observe(&TraceEvent { at: SimTime(at_ms), node: Node::Kafka, observation });
    }

    /// Event 7's routed record, at `offset` of the routed topic.
    fn routed(offset: u64) -> Observation {
        let source = SourceInfo {
            connector: Origin::Postgresql,
            table: OUTBOX,
            lsn: Lsn(0x16B_3800),
            tx_id: Some(740),
            snapshot: SnapshotMarker::Streamed,
            ts_ms: 0,
        };
        let value = ChangeEvent { op: Op::Create, before: None, after: None, source };
        let record = KafkaRecord {
            tp: TopicPartition { topic: Topic::Routed(0), partition: 0 },
            offset,
            key: 7,
            value: Some(value),
        };
        Observation::Appended { records: vec![record], transaction: None }
    }

    fn i10(checkers: &Checkers) -> usize {
        checkers.findings().iter().filter(|finding| finding.invariant == Invariant::I10).count()
    }

    #[test]
    fn a_duplicate_needs_a_replay_window_since_the_previous_append() {
        let mut checkers = checkers();
        feed(&mut checkers, 1_000, routed(0));
        assert_eq!(i10(&checkers), 0, "a first append is no duplicate");
        // A restart of the task: the replay that follows is declared.
        feed(&mut checkers, 2_000, Observation::TaskStarted { offset: None });
        feed(&mut checkers, 2_500, routed(1));
        assert_eq!(i10(&checkers), 0);
        // Another append with no window since the previous one: undeclared.
        feed(&mut checkers, 3_000, routed(2));
        assert_eq!(i10(&checkers), 1);
        let finding = &checkers.findings()[0];
        assert!(finding.to_string().contains("outside any window"), "{finding}");
        // A Kafka restart opens one (the producer sends again what was not acknowledged).
        feed(&mut checkers, 4_000, Observation::Restarted { process: Node::Kafka });
        feed(&mut checkers, 4_100, routed(3));
        assert_eq!(i10(&checkers), 1);
    }

    /// What the old task handed the producer before a restart can reach the topic after the
    /// restarted task started (held back by a clog, retried): the window takes it in until the
    /// new task's first poll, so the new task's replay of it is declared; an append after that
    /// poll is the new task's own, and a second append of it is not.
    #[test]
    fn sends_from_before_a_restart_that_land_after_it_are_inside_its_window() {
        let mut checkers = checkers();
        feed(&mut checkers, 1_000, Observation::TaskStarted { offset: None });
        let polled = Observation::Polled { summary: crate::core::observe::PollSummary::default() };
        feed(&mut checkers, 1_500, polled.clone());
        // The task restarts (Debezium's in-process restart after a retriable error) while the
        // old send of event 7 is still on its way.
        feed(&mut checkers, 2_000, Observation::TaskStarted { offset: None });
        assert!(checkers.observes(&polled), "a poll is read while the restarted task has not polled");
        feed(&mut checkers, 2_002, routed(0));
        feed(&mut checkers, 2_500, polled.clone());
        assert!(!checkers.observes(&polled), "and not once it has");
        feed(&mut checkers, 2_501, routed(1));
        assert_eq!(i10(&checkers), 0, "the replay of a send from before the restart is declared");
        feed(&mut checkers, 3_000, routed(2));
        assert_eq!(i10(&checkers), 1, "a second append by the same task is not");
    }

    /// Under exactly-once an event reaches its topic when its transaction commits: an aborted
    /// transaction's record is never on the topic for a `read_committed` consumer, and its
    /// committed copy after the restart is the event's first record, not a replay.
    #[test]
    fn a_routed_record_counts_when_its_transaction_commits() {
        let mut checkers = checkers();
        let in_transaction = |offset| match routed(offset) {
            Observation::Appended { records, .. } => Observation::Appended { records, transaction: Some(3) },
            _ => unreachable!(),
        };
        let ended = |committed| Observation::TransactionEnded {
            transactional_id: "connect-cluster-outbox-0".into(),
            producer_id: 3,
            committed,
            cause: crate::core::observe::TransactionEnd::Fenced,
            records: 1,
        };
        feed(&mut checkers, 1_000, in_transaction(0));
        assert!(checkers.evidence.published.routed.is_empty(), "an open transaction's record is not on the topic yet");
        feed(&mut checkers, 2_000, ended(false));
        assert!(checkers.evidence.published.routed.is_empty(), "an aborted transaction's record never is");
        // No task restart opens a window: the committed copy is the event's first record.
        feed(&mut checkers, 2_500, in_transaction(2));
        feed(&mut checkers, 2_600, ended(true));
        let routed = checkers.evidence.published.routed[&(OUTBOX, 7)];
        assert_eq!((routed.records, routed.first_at), (1, SimTime(2_600)));
        assert_eq!(i10(&checkers), 0);
    }

    #[test]
    fn only_the_routing_connectors_restart_opens_a_window() {
        let mut checkers = checkers();
        checkers.evidence.outbox_connector = 1;
        feed(&mut checkers, 1_000, routed(0));
        // The first connector's task (untagged) restarting explains nothing on the outbox's topic.
        feed(&mut checkers, 2_000, Observation::TaskStarted { offset: None });
        feed(&mut checkers, 2_500, routed(1));
        assert_eq!(i10(&checkers), 1);
        let snapshot = Observation::SnapshotStarted {
            attempt: 1,
            case: crate::core::observe::SnapshotCase::SlotCreatedNow,
            lsn: Lsn(0x16B_3800),
        };
        let tagged = Observation::OfConnector { connector: 1, observation: Box::new(snapshot) };
        feed(&mut checkers, 3_000, tagged);
        feed(&mut checkers, 3_500, routed(2));
        assert_eq!(i10(&checkers), 1, "the outbox connector's own re-snapshot declares it");
    }
}
