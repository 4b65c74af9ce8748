//! The checkers: each invariant of the README's table ("The invariants") that this version checks,
//! one file each, fed the trace one event at a time and, at the acceptance boundary, the sink's
//! final state.
//!
//! Every checker compares what the pipeline delivered (Kafka's logs, the sink's applies) with the
//! oracle, the committed source history. None of them trusts the pipeline's own bookkeeping:
//! offsets and "snapshot completed" flags are evidence of what the pipeline believes, never of
//! what is durable. A finding names the invariant, the key, the versions expected and seen, and
//! the moment (simulated time, LSN) it became true.
//!
//! Checked: I1 no gap, I2 no resurrection, I3 monotonic apply, I4 one history, I5 ack ≤ durable,
//! I6 fail closed, I8 failover gate, I9 outbox complete (events reaching their routed topic;
//! the consumer's side effects not yet), and I11 honest liveness where a timed run ends
//! ([`honest_liveness`]: it reads the processes, not the trace), I10 duplicates absorbed
//! (outbox replays, [`exactly_once`]), I12 tombstones seen ([`tombstones_seen`]). Not yet: I7.

mod ack_durable;
mod exactly_once;
mod fail_closed;
mod failover_gate;
pub mod honest_liveness;
mod monotonic_apply;
mod no_gap;
mod no_resurrection;
mod one_history;
pub mod outbox_complete;
pub mod published;
pub mod tombstones_seen;

use crate::components::sink::DocList;
use crate::core::event::{KafkaRecord, SourceOffset};
use crate::core::ids::{Key, TableId};
use crate::core::lsn::Lsn;
use crate::core::observe::{Doc, Observation, TraceEvent};
use crate::core::protocol::ConnectorState;
use crate::core::shared::{CopyOnWrite, Fixed};
use crate::core::time::SimTime;
use crate::judge::narrate::Names;
use crate::judge::oracle::Oracle;
use crate::scenario::spec::Invariant;
use published::Published;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A violated invariant.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Finding {
    pub invariant: Invariant,
    pub name: String,
    /// The key it is about, when it is about one: the row's number in the model (a claim ID on
    /// the claims table; on a two-column key the row's place in key order, `key_text` gives its
    /// columns' values), or an outbox event's id (I9, I10).
    pub key: Option<Key>,
    /// The table the key is a row of, when the checker knows it ([`Finding::on`]); `--json`
    /// gives its name as `table`.
    #[serde(skip)]
    pub table_id: Option<TableId>,
    /// The name of the table the key is a row of, filled when the finding is reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// The key as the table names it, filled when the finding is reported: `(region_id,
    /// hub_id) = (3, 1)` on a two-column key, else the number. `None` on the claims table of
    /// the default example, whose findings say `key 7`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_text: Option<String>,
    pub expected: String,
    pub seen: String,
    /// When it became true.
    pub at: SimTime,
    /// The log position involved, when there is one.
    pub lsn: Option<Lsn>,
    pub detail: String,
    /// How many times the same invariant was violated for the same key.
    pub occurrences: u32,
}

impl Finding {
    pub fn new(invariant: Invariant, key: Option<Key>, at: SimTime) -> Finding {
        Finding {
            invariant,
            name: invariant.name().into(),
            key,
            table_id: None,
            table: None,
            key_text: None,
            expected: String::new(),
            seen: String::new(),
            at,
            lsn: None,
            detail: String::new(),
            occurrences: 1,
        }
    }

    /// The table the finding's key is a row of.
    pub fn on(mut self, table: TableId) -> Finding {
        self.table_id = Some(table);
        self
    }

    /// The table of a change record's topic, if it is a change topic.
    pub fn on_record(self, record: &KafkaRecord) -> Finding {
        match record.tp.topic {
            crate::core::event::Topic::Change(table) => self.on(table),
            _ => self,
        }
    }

    pub fn expected(mut self, text: impl Into<String>) -> Finding {
        self.expected = text.into();
        self
    }

    pub fn seen(mut self, text: impl Into<String>) -> Finding {
        self.seen = text.into();
        self
    }

    pub fn lsn(mut self, lsn: Lsn) -> Finding {
        self.lsn = Some(lsn);
        self
    }

    pub fn detail(mut self, text: impl Into<String>) -> Finding {
        self.detail = text.into();
        self
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.invariant, self.name)?;
        if let Some(key) = self.key {
            // I9 and I10 are about outbox events, by their id.
            let what = if matches!(self.invariant, Invariant::I9 | Invariant::I10) { "event" } else { "key" };
            match (&self.key_text, &self.table) {
                (Some(text), Some(table)) => write!(f, ", {what} {text} of {table}")?,
                _ => write!(f, ", {what} {key}")?,
            }
        }
        write!(f, " ({}", self.at)?;
        if let Some(lsn) = self.lsn {
            write!(f, ", {lsn}")?;
        }
        write!(f, "): expected {}; seen {}", self.expected, self.seen)?;
        let mut detail = self.detail.chars();
        if let Some(first) = detail.next() {
            write!(f, ". {}{}", first.to_uppercase(), detail.as_str())?;
        }
        if self.occurrences > 1 {
            write!(f, " [{} times]", self.occurrences)?;
        }
        Ok(())
    }
}

/// The state at the acceptance boundary.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Boundary {
    pub at: SimTime,
    /// Whether the pipeline was running and caught up; if not, the reconciliation checks (I1,
    /// I2 at the boundary) are not made and `reason` says why.
    pub reached: bool,
    pub reason: String,
    /// How the run ended, typed (`reason` says it in words).
    pub end: RunEnd,
    /// The sink's documents.
    pub sink: DocList,
}

/// How a run ended: at its acceptance boundary, stopped short of it and saying so, not caught up
/// in time, or cut by a limit. `--json` gives it with a `kind` tag (`{"kind": "task-failed",
/// "failure": "..."}`); the boundary's `reason` keeps the sentence.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RunEnd {
    /// The pipeline caught up with the source: the acceptance boundary.
    CaughtUp,
    /// The connector's task FAILED, with Debezium's reason.
    TaskFailed { failure: String },
    /// The connector is STOPPED.
    ConnectorStopped,
    /// The sink's consumer FAILED, with the consumer's exception.
    SinkFailed { failure: String },
    /// Neither caught up nor stopped within `acceptance.timeout_ms` after the last fault or
    /// transaction; the connector's status then.
    TimedOut { connector: ConnectorState },
    /// The run reached a limit (its horizon or its trace budget) first: undecided.
    Limit,
}

impl RunEnd {
    /// Whether the run reached its acceptance boundary.
    pub fn reached(&self) -> bool {
        matches!(self, RunEnd::CaughtUp)
    }

    /// Whether the run stopped short of its boundary because a process said it cannot go on.
    pub fn stopped(&self) -> bool {
        matches!(self, RunEnd::TaskFailed { .. } | RunEnd::ConnectorStopped | RunEnd::SinkFailed { .. })
    }

    /// The timed lens's reason for an end its acceptance check decides (the boundary's words).
    pub fn reason(&self) -> Option<String> {
        match self {
            RunEnd::CaughtUp => Some("the pipeline caught up with the source".into()),
            RunEnd::TaskFailed { failure } => Some(format!("the connector task FAILED: {failure}")),
            RunEnd::ConnectorStopped => Some("the connector is STOPPED".into()),
            RunEnd::SinkFailed { failure } => Some(format!("the sink's consumer FAILED: {failure}")),
            RunEnd::TimedOut { .. } | RunEnd::Limit => None,
        }
    }
}

/// What every checker can read: the oracle, Kafka's published content, the stored offset.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Evidence {
    /// The source's history and what reached Kafka: the bulk of the evidence, shared between
    /// the exhaustive lens's states until one of them changes it.
    pub oracle: CopyOnWrite<Oracle>,
    pub published: CopyOnWrite<Published>,
    /// The connector's offset as the offsets topic holds it.
    pub stored_offset: Option<SourceOffset>,
    /// The captured tables whose changes the sink reads (the outbox tables the connector's
    /// transforms route are not among them: their rows are events, judged by I9).
    pub captured: Fixed<Vec<TableId>>,
    /// The outboxes whose events I9 checks: the captured outbox tables the connector's
    /// transforms route, and the message outboxes (`Spec::event_outboxes`).
    pub outbox_tables: Fixed<Vec<TableId>>,
    /// Per message outbox, in order: why the connector's transforms do not route its events'
    /// records, when they do not (I9 says it of an event they left on `<topic.prefix>.message`).
    pub message_routing: Fixed<Vec<Option<String>>>,
    /// The `slot.name` of the connector that routes the outbox events (I9 reads its life).
    pub slot_name: Fixed<String>,
    /// The place of the connector that routes the outbox events (its `[[connector]]` entry).
    pub outbox_connector: u8,
    /// The first connector's name and `slot.name`: the connector I1–I8 judge. Empty: every
    /// connector observation is the first connector's (a checker built without a scenario).
    pub main_connector: Fixed<(String, String, Vec<TableId>)>,
    /// The outbox's consumer's inbox rule, when the scenario has the consumer (I9, I10).
    pub consumer: Option<crate::components::consumer::InboxRule>,
    /// The connector's first replication stream: when, and from where decoding emitted.
    pub first_stream_start: Option<(SimTime, Lsn)>,
    /// The scenario's table and topic names, for the findings' words.
    pub names: Fixed<Names>,
    /// Which timeline the stored offset's position was read on.
    pub timelines: Timelines,
    /// Whether a connector that starts without a completed snapshot in its stored offset takes
    /// one (`snapshot.mode` `initial`, `when_needed`, `always`; not `no_data`).
    pub restart_snapshots: bool,
    /// Which logical decoding messages the connector turns into records
    /// (`message.prefix.include.list` / `message.prefix.exclude.list`).
    pub message_prefixes: Fixed<crate::components::connect::debezium::MessagePrefixFilter>,
    /// The prefix of the messages the connector's own `heartbeat.action.query` writes, if it
    /// writes messages: they never stop, so the acceptance boundary does not wait for them.
    pub heartbeat_message_prefix: Fixed<Option<String>>,
    /// The first connector's incremental snapshot table scans (I4: a completed backfill read
    /// every row its table held throughout it).
    pub backfill_scans: one_history::BackfillScans,
    /// The tables a later configuration adds to the capture (the script's `connector_config`
    /// steps), each with the WAL position from which its changes are the pipeline's to deliver:
    /// `Lsn::MAX` until a replication stream starts after a Connect worker applied the
    /// configuration (a filtered publication takes the table in at the task's start, before
    /// `START_REPLICATION`: PostgreSQL publishes its changes committed from then on), then the
    /// end of the last commit record written before that stream started. A change of the table
    /// from before is the backfill's to bring (I1 and I4 judge the end state), not the stream's.
    /// Empty without such steps.
    pub added_tables: Vec<(TableId, Lsn)>,
    /// With `added_tables`: the end of the last commit record written, and the tables of the
    /// configuration a Connect worker applied last.
    pub wal_seen: Lsn,
    pub applied_tables: Vec<TableId>,
}

impl Evidence {
    /// Whether a change of `table` committed at `commit_lsn` is the first connector's to
    /// deliver: the table is captured, and was captured by then ([`Evidence::added_tables`]).
    pub fn expects(&self, table: TableId, commit_lsn: Lsn) -> bool {
        self.captured.contains(&table)
            && self.added_tables.iter().find(|(added, _)| *added == table).is_none_or(|(_, from)| *from <= commit_lsn)
    }
}

impl Evidence {
    /// Whether the acceptance boundary waits for a logical message with `prefix`: one the
    /// connector captures, and not its own heartbeat's.
    pub fn awaits_message(&self, prefix: &str) -> bool {
        self.message_prefixes.captures(prefix) && self.heartbeat_message_prefix.as_deref() != Some(prefix)
    }
}

impl Evidence {
    /// Whether an observation is of a connector other than the first: its task's (tagged), its
    /// stream's or slot confirmations (by its slot), its stored offsets (by its name), its
    /// snapshot scans (by table). Kafka's appends are everybody's.
    pub fn of_another_connector(&self, observation: &Observation) -> bool {
        let (name, slot, tables) = &*self.main_connector;
        if name.is_empty() {
            return matches!(observation, Observation::OfConnector { .. });
        }
        match observation {
            Observation::OfConnector { .. } => true,
            Observation::StreamStarted { slot: of, .. } | Observation::SlotConfirmed { slot: of, .. } => of != slot,
            Observation::SourceOffsetStored { connector, .. } => connector != name,
            // A snapshot scan of a table the first connector does not capture.
            Observation::ScanStarted {
                client:
                    crate::core::ids::Node::Connect | crate::core::ids::Node::Connect2 | crate::core::ids::Node::Connect3,
                table,
                ..
            } => !tables.contains(table),
            _ => false,
        }
    }

    /// Where a record is, as Kafka names it: `claims.public.claims-0@17`.
    pub fn record_at(&self, record: &KafkaRecord) -> String {
        if self.names.tables.is_empty() {
            return format!("partition {} offset {}", record.tp.partition, record.offset);
        }
        format!("{}@{}", self.names.partition(record.tp), record.offset)
    }
}

/// PostgreSQL's timeline history as the checkers need it: a position is a WAL location *on a
/// timeline*, and after a promotion the same location names different WAL on the old timeline
/// and on the new one.
///
/// PostgreSQL keeps, per timeline, the history of its ancestors with the point where each ended
/// (`readTimeLineHistory`, `src/backend/access/transam/timeline.c`); `tliOfPointInHistory` gives
/// the timeline that owns a location in that history (each entry's `begin` inclusive, `end`
/// exclusive) and `tliSwitchPoint` where a timeline of the history ends. Logical decoding reads
/// WAL by it (`XLogReadDetermineTimeline`, `src/backend/access/transam/xlogutils.c`): on the
/// promoted server, a location below the switch point is the old timeline's WAL, one at or past it
/// the new timeline's. So a resume position read on the old timeline is valid up to the switch
/// point (the walsender refuses a physical start point past its timeline's end the same way,
/// `StartReplication` in `src/backend/replication/walsender.c`), and one read on the new timeline
/// is valid wherever it lies.
///
/// The model has one original timeline (1, `pg1`) and at most one promotion. A position's
/// timeline is that of the server the connector read it from: its replication stream, or its
/// snapshot (always on the primary of the moment).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Timelines {
    /// The promotion: the promoted server, its new timeline, and the switch point where the old
    /// timeline ends in its history.
    branch: Option<(crate::core::ids::Node, u32, Lsn)>,
    /// The timeline the connector reads now (its last stream or snapshot).
    reading: u32,
    /// The timeline the stored offset's position was read on.
    stored: u32,
}

/// The timeline every run starts on.
const FIRST_TIMELINE: u32 = 1;

impl Default for Timelines {
    fn default() -> Timelines {
        Timelines { branch: None, reading: FIRST_TIMELINE, stored: FIRST_TIMELINE }
    }
}

impl Timelines {
    /// The timeline a server writes: the promoted one its new timeline, any other the first.
    pub fn of(&self, server: crate::core::ids::Node) -> u32 {
        match self.branch {
            Some((promoted, timeline, _)) if promoted == server => timeline,
            _ => FIRST_TIMELINE,
        }
    }

    /// The newest timeline: where a new connection lands (the database service follows the
    /// promotion).
    pub fn current(&self) -> u32 {
        self.branch.map_or(FIRST_TIMELINE, |(_, timeline, _)| timeline)
    }

    /// `tliSwitchPoint`: where `timeline` ends in the newest timeline's history (`None`: it
    /// has not ended).
    pub fn end_of(&self, timeline: u32) -> Option<Lsn> {
        match self.branch {
            Some((_, newest, switch)) if timeline != newest => Some(switch),
            _ => None,
        }
    }

    /// Whether `lsn`, read on `timeline`, is a location of the newest timeline's history: at
    /// or before the point where `timeline` ends in it.
    pub fn in_history(&self, timeline: u32, lsn: Lsn) -> bool {
        self.end_of(timeline).is_none_or(|end| lsn <= end)
    }

    /// The timeline the stored offset's position was read on.
    pub fn stored(&self) -> u32 {
        self.stored
    }

    /// Whether the stored offset's position was read before the promotion, on the timeline
    /// the promotion ended (the connector has yet to cross the failover).
    pub fn stored_before_promotion(&self) -> bool {
        self.end_of(self.stored).is_some()
    }

    fn observe(&mut self, observation: &Observation, previous: Option<SourceOffset>) {
        use crate::core::ids::Node;
        match observation {
            Observation::Promoted { server, timeline, switch_lsn, .. } => {
                self.branch = Some((*server, *timeline, *switch_lsn));
            }
            Observation::StreamStarted { server, client: Node::Connect | Node::Connect2 | Node::Connect3, .. } => {
                self.reading = self.of(*server)
            }
            Observation::SnapshotStarted { .. } => self.reading = self.current(),
            Observation::SourceOffsetStored { offset, .. } => {
                let position = |offset: Option<SourceOffset>| offset.and_then(|offset| offset.resume_lsn());
                if position(*offset) != position(previous) {
                    self.stored = self.reading;
                }
            }
            _ => {}
        }
    }
}

/// All checkers, fed in trace order.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Checkers {
    pub evidence: Evidence,
    no_resurrection: no_resurrection::NoResurrection,
    monotonic_apply: monotonic_apply::MonotonicApply,
    ack_durable: ack_durable::AckDurable,
    fail_closed: fail_closed::FailClosed,
    failover_gate: failover_gate::FailoverGate,
    outbox_complete: outbox_complete::OutboxComplete,
    exactly_once: exactly_once::ExactlyOnce,
    pub tombstones_seen: tombstones_seen::TombstonesSeen,
    findings: Vec<Finding>,
    finished: bool,
}

impl Checkers {
    pub fn new(oracle: Oracle, captured: Vec<TableId>) -> Checkers {
        Checkers {
            evidence: Evidence {
                oracle: CopyOnWrite::new(oracle),
                published: CopyOnWrite::new(Published::default()),
                stored_offset: None,
                captured: Fixed::new(captured),
                outbox_tables: Fixed::new(Vec::new()),
                message_routing: Fixed::new(Vec::new()),
                slot_name: Fixed::new(String::new()),
                outbox_connector: 0,
                main_connector: Fixed::new((String::new(), String::new(), Vec::new())),
                consumer: None,
                first_stream_start: None,
                added_tables: Vec::new(),
                wal_seen: Lsn::INVALID,
                applied_tables: Vec::new(),
                names: Fixed::new(Names::default()),
                timelines: Timelines::default(),
                restart_snapshots: true,
                message_prefixes: Fixed::new(Default::default()),
                heartbeat_message_prefix: Fixed::new(None),
                backfill_scans: Default::default(),
            },
            no_resurrection: Default::default(),
            monotonic_apply: Default::default(),
            ack_durable: Default::default(),
            fail_closed: Default::default(),
            failover_gate: Default::default(),
            outbox_complete: Default::default(),
            exactly_once: Default::default(),
            tombstones_seen: Default::default(),
            findings: Vec::new(),
            finished: false,
        }
    }

    /// The scenario's names, for the findings' words (a finding names a Kafka record by its
    /// topic, partition and offset).
    pub fn named(mut self, names: Names) -> Checkers {
        self.evidence.names = Fixed::new(names);
        self
    }

    /// The connector's `snapshot.mode`, as far as the checkers need it: whether a start without a
    /// completed snapshot stored takes one.
    pub fn snapshot_mode(mut self, mode: crate::components::connect::debezium::SnapshotMode) -> Checkers {
        self.evidence.restart_snapshots = mode != crate::components::connect::debezium::SnapshotMode::NoData;
        self
    }

    /// The connector's `message.prefix.include.list` / `message.prefix.exclude.list` (which
    /// logical decoding messages I1 expects on `<topic.prefix>.message`) and the prefix of its
    /// message heartbeat, if any.
    pub fn messages(mut self, debezium: &crate::components::connect::debezium::DebeziumConfig) -> Checkers {
        self.evidence.message_prefixes = Fixed::new(debezium.message_prefixes.clone());
        self.evidence.heartbeat_message_prefix =
            Fixed::new(debezium.heartbeat_action_message.as_ref().map(|message| message.prefix.clone()));
        self
    }

    /// The outboxes whose events I9 checks (the outbox tables the connector's transforms route,
    /// the message outboxes, and what the transforms make of a message outbox's records), and
    /// the connector's slot (I9).
    pub fn outbox(mut self, spec: &crate::scenario::spec::Spec) -> Checkers {
        self.evidence.outbox_tables = Fixed::new(spec.event_outboxes());
        let chain = spec.transform_chain().ok();
        self.evidence.message_routing = Fixed::new(
            (0..spec.message_outboxes.len())
                .map(|outbox| chain.as_ref().and_then(|chain| chain.message_routing(outbox as u16).err()))
                .collect(),
        );
        let routing = spec.routing_slots();
        self.evidence.outbox_connector = (0..spec.connector_count())
            .find(|c| routing.first() == Some(&spec.connector(*c).slot_name))
            .unwrap_or(0) as u8;
        self.evidence.slot_name =
            Fixed::new(routing.first().cloned().unwrap_or_else(|| spec.debezium.slot_name.clone()));
        if spec.connector_count() > 1 {
            self.evidence.main_connector =
                Fixed::new((spec.debezium.name.clone(), spec.debezium.slot_name.clone(), spec.debezium.tables.clone()));
        }
        self.evidence.consumer = spec.consumer.as_ref().map(|consumer| consumer.inbox);
        self
    }

    /// The tables later configurations add to the first connector's capture
    /// ([`Evidence::added_tables`]).
    pub fn added_tables(mut self, debezium: &crate::components::connect::debezium::DebeziumConfig) -> Checkers {
        let first = &debezium.tables;
        self.evidence.added_tables = self
            .evidence
            .captured
            .iter()
            .filter(|table| !first.contains(table))
            .map(|table| (*table, Lsn(u64::MAX)))
            .collect();
        self
    }

    /// Whether the Connect workers run exactly-once source tasks (the exactly-once check).
    pub fn exactly_once(mut self, enabled: bool) -> Checkers {
        self.exactly_once.enabled = enabled;
        self
    }

    /// Committed snapshot reads that repeat an earlier one, under exactly-once (the record
    /// says how many: exactly-once does not remove them).
    /// The change topics' compaction, if they are compacted, and how the sink treats tombstones
    /// (I12).
    pub fn compaction(
        mut self,
        compaction: Option<crate::components::kafka::Compaction>,
        null_values: crate::components::sink::NullValues,
    ) -> Checkers {
        self.tombstones_seen.delete_retention_ms = compaction.map(|compaction| compaction.delete_retention_ms);
        self.tombstones_seen.null_values = null_values;
        self
    }

    pub fn snapshot_repeats(&self) -> u64 {
        self.exactly_once.snapshot_repeats
    }

    fn report(&mut self, mut finding: Finding) {
        if let (Some(table), Some(key)) = (finding.table_id, finding.key)
            && !self.evidence.names.tables.is_empty()
        {
            finding.table = Some(self.evidence.names.table(table).to_owned());
            finding.key_text = self.evidence.names.key_label(table, key);
        }
        if let Some(existing) = self
            .findings
            .iter_mut()
            .find(|f| f.invariant == finding.invariant && f.key == finding.key && f.table_id == finding.table_id)
        {
            existing.occurrences += 1;
        } else {
            self.findings.push(finding);
        }
    }

    /// Feeds one trace event.
    /// Whether an observation can change the checkers (the others leave them as they are, so
    /// the exhaustive lens does not copy them for it). Debug builds check this on every step of
    /// the exhaustive world.
    pub fn observes(&self, observation: &Observation) -> bool {
        use crate::core::ids::Node;
        Oracle::observes(observation)
            // The outbox checker reads nothing where no outbox is checked.
            || (!self.evidence.outbox_tables.is_empty() && self.outbox_complete.observes_now(observation))
            || self.exactly_once.observes(observation)
            || self.tombstones_seen.observes(observation)
            || (!self.evidence.added_tables.is_empty()
                && matches!(
                    observation,
                    Observation::ConnectorReconfigured { .. } | Observation::CommitWritten { .. }
                ))
            || matches!(
                observation,
                Observation::SlotConfirmed { by: Node::Connect | Node::Connect2 | Node::Connect3, .. }
                    | Observation::KeepaliveConfirmed { .. }
                    | Observation::SnapshotStarted { .. }
                    | Observation::StreamStarted { client: Node::Connect | Node::Connect2 | Node::Connect3, .. }
                    | Observation::GateChecked { .. }
                    | Observation::Appended { .. }
                    | Observation::TransactionEnded { .. }
                    | Observation::SourceOffsetStored { .. }
                    | Observation::SinkApplied { .. }
                    | Observation::SinkReconciled { .. }
                    | Observation::IncrementalSnapshotStarted { .. }
                    | Observation::ChunkRead { .. }
                    | Observation::IncrementalTableScanned { .. }
                    | Observation::TaskStarted { offset: None }
            )
    }

    pub fn observe(&mut self, event: &TraceEvent) {
        let at = event.at;
        let observation = &event.observation;
        if Oracle::observes(observation) {
            self.evidence.oracle.get_mut().observe(at, observation);
        }
        // Checkers that look at a moment read the evidence as it was just before it.
        let mut found = Vec::new();
        self.outbox_complete.observe(&self.evidence, at, observation, &mut found);
        // Every connector's records are judged: exactly-once is the workers'.
        self.exactly_once.observe(&self.evidence, at, observation, &mut found);
        if self.tombstones_seen.observes(observation) {
            self.tombstones_seen.observe(at, observation);
        }
        // What another connector's stream, slot or offsets do is not the first connector's
        // (I9 reads the outbox connector's slot above; its records go to `published` below).
        if self.evidence.of_another_connector(observation) {
            for finding in found {
                self.report(finding);
            }
            return;
        }
        self.ack_durable.observe(&self.evidence, at, observation, &mut found);
        self.fail_closed.observe(&self.evidence, at, observation, &mut found);
        self.failover_gate.observe(&self.evidence, at, observation, &mut found);
        self.no_resurrection.observe(&self.evidence, at, observation, &mut found);
        self.monotonic_apply.observe(&self.evidence, at, observation, &mut found);
        self.evidence.timelines.observe(observation, self.evidence.stored_offset);
        if !self.evidence.added_tables.is_empty() {
            self.observe_capture(observation);
        }
        match observation {
            Observation::Appended { records, transaction } => {
                self.evidence.published.get_mut().append(at, records, *transaction)
            }
            Observation::TransactionEnded { producer_id, committed, .. } => {
                self.evidence.published.get_mut().transaction_ended(at, *producer_id, *committed)
            }
            Observation::SourceOffsetStored { offset, .. } => self.evidence.stored_offset = *offset,
            Observation::StreamStarted {
                client:
                    crate::core::ids::Node::Connect | crate::core::ids::Node::Connect2 | crate::core::ids::Node::Connect3,
                start,
                ..
            } => {
                self.evidence.first_stream_start.get_or_insert((at, *start));
            }
            Observation::IncrementalSnapshotStarted { .. }
            | Observation::ChunkRead { .. }
            | Observation::IncrementalTableScanned { .. }
            | Observation::TaskStarted { offset: None } => {
                self.evidence.backfill_scans.observe(observation);
            }
            _ => {}
        }
        for finding in found {
            self.report(finding);
        }
    }

    /// Where the capture of each added table begins ([`Evidence::added_tables`]).
    fn observe_capture(&mut self, observation: &Observation) {
        use crate::core::ids::Node;
        let evidence = &mut self.evidence;
        match observation {
            Observation::Committed { txn, .. } => evidence.wal_seen = evidence.wal_seen.max(txn.end_lsn),
            Observation::CommitWritten { end_lsn, .. } => evidence.wal_seen = evidence.wal_seen.max(*end_lsn),
            Observation::ConnectorReconfigured { tables, .. } => evidence.applied_tables.clone_from(tables),
            // The first stream after a configuration that captures a table begins its capture.
            Observation::StreamStarted { client: Node::Connect | Node::Connect2 | Node::Connect3, .. } => {
                for (table, start) in evidence.added_tables.iter_mut() {
                    if start.0 == u64::MAX && evidence.applied_tables.contains(table) {
                        *start = evidence.wal_seen;
                    }
                }
            }
            _ => {}
        }
    }

    /// The checks made once, at the acceptance boundary.
    pub fn finish(&mut self, boundary: &Boundary) {
        if self.finished {
            return;
        }
        self.finished = true;
        let mut found = Vec::new();
        one_history::check(&self.evidence, boundary, &mut found);
        self.outbox_complete.check(&self.evidence, boundary, &mut found);
        if boundary.reached {
            no_gap::check(&self.evidence, boundary, &self.findings, &mut found);
            no_gap::check_messages(&self.evidence, boundary, &mut found);
            no_resurrection::check_boundary(&self.evidence, boundary, &self.tombstones_seen.removed, &mut found);
            self.tombstones_seen.check(&self.evidence, boundary, &mut found);
        }
        for finding in found {
            self.report(finding);
        }
    }

    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// Whether any finding names `invariant`.
    pub fn violated(&self, invariant: Invariant) -> bool {
        self.findings.iter().any(|finding| finding.invariant == invariant)
    }
}

/// `v3` or `absent` or `deleted (v3)`: a document state in a finding.
pub fn describe_doc(doc: Option<&Doc>) -> String {
    match doc {
        None => "absent".into(),
        Some(Doc::Live(row)) => format!("version {} ({})", row.version, row.status.name()),
        Some(Doc::Tombstone(Some(version))) => format!("deleted (tombstone at version {version})"),
        Some(Doc::Tombstone(None)) => "deleted".into(),
    }
}
