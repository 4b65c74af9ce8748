//! A validated scenario: everything a run needs, in the models' terms. The `handoff-sim` crate
//! reads scenario files (TOML) into this, with errors that name the file, line and field.

pub use crate::components::app::StepKind;
use crate::components::connect::ConnectConfig;
use crate::components::connect::debezium::DebeziumConfig;
use crate::components::kafka::KafkaSection;
use crate::components::operator::GatePolicy;
use crate::components::postgres::PostgresSection;
use crate::components::sink::SinkConfig;
use crate::core::change::{ReplicaIdentity, RowOp};
/// A scenario's faults, triggers and moments are the core's: observations name them too.
pub use crate::core::fault::{FaultAction, Moment, Trigger};
use crate::core::ids::{Key, Node, TableId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// An invariant of the pipeline (the README's table, "The invariants").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Invariant {
    I1,
    I2,
    I3,
    I4,
    I5,
    I6,
    I7,
    I8,
    I9,
    I10,
    I11,
    I12,
}

impl Invariant {
    pub const ALL: [Invariant; 12] = [
        Invariant::I1,
        Invariant::I2,
        Invariant::I3,
        Invariant::I4,
        Invariant::I5,
        Invariant::I6,
        Invariant::I7,
        Invariant::I8,
        Invariant::I9,
        Invariant::I10,
        Invariant::I11,
        Invariant::I12,
    ];

    /// Invariants this version of the tool checks.
    pub const CHECKED: [Invariant; 11] = [
        Invariant::I1,
        Invariant::I2,
        Invariant::I3,
        Invariant::I4,
        Invariant::I5,
        Invariant::I6,
        Invariant::I8,
        Invariant::I9,
        Invariant::I10,
        Invariant::I11,
        Invariant::I12,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Invariant::I1 => "no gap",
            Invariant::I2 => "no resurrection",
            Invariant::I3 => "monotonic apply",
            Invariant::I4 => "one history",
            Invariant::I5 => "ack <= durable",
            Invariant::I6 => "fail closed",
            Invariant::I7 => "marker after data",
            Invariant::I8 => "failover gate",
            Invariant::I9 => "outbox complete",
            Invariant::I10 => "duplicates absorbed",
            Invariant::I11 => "honest liveness",
            Invariant::I12 => "tombstones seen",
        }
    }

    pub fn parse(text: &str) -> Option<Invariant> {
        Invariant::ALL.into_iter().find(|invariant| invariant.to_string().eq_ignore_ascii_case(text))
    }
}

impl fmt::Display for Invariant {
    /// Its identifier, `I1` to `I12`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let number = Invariant::ALL.iter().position(|invariant| invariant == self).map_or(0, |index| index + 1);
        write!(f, "I{number}")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Fault {
    pub trigger: Trigger,
    pub action: FaultAction,
    /// The connector a connector's fault acts on (`stop-connector`, `kill-connector-task`,
    /// `recreate-slot`, `rebuild-connector`, `advance-slot`): the place of its `[[connector]]`
    /// entry; 0 for every other fault.
    #[serde(default)]
    pub connector: u8,
    /// The worker a worker's fault acts on (`kill-connect-worker`, `stop-connect-worker`,
    /// `pause-connect-worker`): its place in the group (0 for `connect`); `None`: the worker that
    /// runs the first connector's task when the fault comes (`connect` when there is one worker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<u8>,
}

/// The kinds of fault a profile can enable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FaultKind {
    KillConnectWorker,
    KillConnectorTask,
    StopConnector,
    CrashPostgres,
    FailOverToStandby,
    RecreateSlot,
    RebuildConnector,
    Clog,
    WalBurst,
    Checkpoint,
    AdvanceSlot,
    KillConsumer,
    HangTransaction,
    StopConnectWorker,
    PauseConnectWorker,
}

impl FaultKind {
    pub const ALL: [FaultKind; 15] = [
        FaultKind::KillConnectWorker,
        FaultKind::KillConnectorTask,
        FaultKind::StopConnector,
        FaultKind::CrashPostgres,
        FaultKind::FailOverToStandby,
        FaultKind::RecreateSlot,
        FaultKind::RebuildConnector,
        FaultKind::Clog,
        FaultKind::WalBurst,
        FaultKind::Checkpoint,
        FaultKind::AdvanceSlot,
        FaultKind::KillConsumer,
        FaultKind::HangTransaction,
        FaultKind::StopConnectWorker,
        FaultKind::PauseConnectWorker,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::KillConnectWorker => "kill-connect-worker",
            FaultKind::KillConnectorTask => "kill-connector-task",
            FaultKind::StopConnector => "stop-connector",
            FaultKind::CrashPostgres => "crash-postgres",
            FaultKind::FailOverToStandby => "fail-over-to-standby",
            FaultKind::RecreateSlot => "recreate-slot",
            FaultKind::RebuildConnector => "rebuild-connector",
            FaultKind::Clog => "clog",
            FaultKind::WalBurst => "wal-burst",
            FaultKind::Checkpoint => "checkpoint",
            FaultKind::AdvanceSlot => "advance-slot",
            FaultKind::KillConsumer => "kill-consumer",
            FaultKind::HangTransaction => "hang-transaction",
            FaultKind::StopConnectWorker => "stop-connect-worker",
            FaultKind::PauseConnectWorker => "pause-connect-worker",
        }
    }

    pub fn parse(text: &str) -> Option<FaultKind> {
        FaultKind::ALL.into_iter().find(|kind| kind.name() == text)
    }

    pub fn of(action: &FaultAction) -> FaultKind {
        match action {
            FaultAction::KillConnectWorker { .. } => FaultKind::KillConnectWorker,
            FaultAction::KillConnectorTask { .. } => FaultKind::KillConnectorTask,
            FaultAction::StopConnector { .. } => FaultKind::StopConnector,
            FaultAction::CrashPostgres { .. } => FaultKind::CrashPostgres,
            FaultAction::FailOverToStandby { .. } => FaultKind::FailOverToStandby,
            FaultAction::RecreateSlot => FaultKind::RecreateSlot,
            FaultAction::RebuildConnector => FaultKind::RebuildConnector,
            FaultAction::Clog { .. } => FaultKind::Clog,
            FaultAction::WalBurst { .. } => FaultKind::WalBurst,
            FaultAction::Checkpoint => FaultKind::Checkpoint,
            FaultAction::AdvanceSlot { .. } => FaultKind::AdvanceSlot,
            FaultAction::KillConsumer { .. } => FaultKind::KillConsumer,
            FaultAction::HangTransaction { .. } => FaultKind::HangTransaction,
            FaultAction::StopConnectWorker { .. } => FaultKind::StopConnectWorker,
            FaultAction::PauseConnectWorker { .. } => FaultKind::PauseConnectWorker,
        }
    }
}

/// Swarm testing: the seed first picks which kinds are on (each allowed kind with probability
/// one half, at least one), how many faults (0 to `max_faults`), then each fault: its kind among
/// those on, its trigger (an absolute time in the window, or one of the moments plus up to two
/// seconds), and its delays. Every generated fault heals: a killed process restarts, a stopped
/// connector resumes, a clog clears.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FaultProfile {
    pub kinds: Vec<FaultKind>,
    pub max_faults: u32,
    /// Absolute triggers fall in `[start, end]` (simulated ms).
    pub window_ms: (u64, u64),
    /// Moments triggers may be tied to.
    pub moments: Vec<Moment>,
}

/// A table of the scenario.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TableSetup {
    pub id: TableId,
    pub name: String,
    /// Rows before the run: keys `1..=rows`.
    pub rows: u32,
    pub replica_identity: ReplicaIdentity,
    /// The database it is in (`[[table]] database`); `None`: the main one, where the connector
    /// reads.
    pub database: Option<String>,
    /// The service's transactional outbox (`[[table]] outbox`): the table its event rows go to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outbox: Option<OutboxTable>,
    /// A two-column primary key (`[[table]] primary_key`, `group_rows`); `None`: the key is `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composite_key: Option<crate::core::ids::CompositeKey>,
    /// A nullable column with a unique index `NULLS NOT DISTINCT` (`[[table]] unique_column`,
    /// `null_row`): the row's `id`, NULL in row `null_row`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_column: Option<crate::core::ids::UniqueColumn>,
    /// No primary key (`[[table]] primary_key = []`): its rows still have `id`, unique by the
    /// workload, but PostgreSQL knows no key. Debezium gives its records a null key unless
    /// `message.key.columns` names one (`TableSchemaBuilder.create`: no key columns, no key schema).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keyless: bool,
}

/// An outbox table (`[[table]] outbox = { aggregatetype = "claim", delete = false }`): the service
/// writes one event row per business change, in the business change's own transaction (the
/// outbox pattern's point: the event commits exactly when the change does). Its columns are the
/// outbox article's and `EventRouter`'s defaults: `id` uuid, `aggregatetype`, `aggregateid`,
/// `type`, `payload` jsonb (see [`crate::core::ids::Row`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OutboxTable {
    /// The `aggregatetype` column of every event the service writes here (the router's
    /// `route.by.field`: the routed topic is `outbox.event.<aggregatetype>` by default).
    pub aggregatetype: String,
    /// The service deletes each event row in the transaction that inserted it: the table stays
    /// empty, the INSERT is still in the WAL (and decodes), and nothing is left for a snapshot to
    /// read again.
    pub delete: bool,
}

/// A message outbox (`[[message_outbox]]`, the table-free outbox): the service writes each event
/// as a logical decoding message, `pg_logical_emit_message(transactional, prefix, content)`, in
/// its business change's transaction, the content the JSON object an outbox row would hold
/// ([`crate::core::ids::MessageEvent::content`]). No row is left behind: nothing but the WAL (and
/// a slot that holds it) can ever bring an event back (reference debezium-postgres.md §7.2).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MessageOutbox {
    /// The message's prefix (what `message.prefix.include.list` / `exclude.list` filter on).
    pub prefix: String,
    /// The `aggregatetype` of every event (the router's `route.by.field`).
    pub aggregatetype: String,
    /// `pg_logical_emit_message(true, …)`: the message is part of the business transaction and
    /// decoded at its commit. `false`: written and decoded at once, even if the transaction
    /// then rolls back.
    pub transactional: bool,
}

impl MessageOutbox {
    /// The step that writes `event` through this outbox: the business update (the step's
    /// statement) and the message, its content the event's JSON.
    pub fn step(&self, event: crate::core::ids::MessageEvent) -> StepKind {
        StepKind::OutboxMessage {
            transactional: self.transactional,
            prefix: self.prefix.clone(),
            payload_bytes: event.content(&self.aggregatetype).len() as u64,
            event,
        }
    }
}

/// The background workload, generated from the seed.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Background {
    pub start_ms: u64,
    pub end_ms: u64,
    pub inserts_per_second: f64,
    pub updates_per_second: f64,
    pub deletes_per_second: f64,
    /// The service's status changes with their outbox event (`[[table]] outbox`): the business
    /// update, the event row and (with `delete`) its delete, in one transaction.
    #[serde(default)]
    pub events_per_second: f64,
    /// Rows per transaction (1: each row its own autocommit transaction, as before).
    pub transaction_size: u32,
    /// Transactions open at once, their statements interleaved (each on a session of its own).
    pub concurrency: u32,
}

impl std::hash::Hash for Background {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.start_ms.hash(state);
        self.end_ms.hash(state);
        self.inserts_per_second.to_bits().hash(state);
        self.updates_per_second.to_bits().hash(state);
        self.deletes_per_second.to_bits().hash(state);
        // Hashed only when set: a workload without events hashes as before.
        if self.events_per_second != 0.0 {
            self.events_per_second.to_bits().hash(state);
        }
        self.transaction_size.hash(state);
        self.concurrency.hash(state);
    }
}

impl Eq for Background {}

impl Background {
    /// How many inserts, updates, deletes and outbox events the generator draws: each rate times
    /// the window's length, rounded (a count too large for a `u64` saturates).
    pub fn transaction_counts(&self) -> [u64; 4] {
        let seconds = self.end_ms.saturating_sub(self.start_ms) as f64 / 1000.0;
        [self.inserts_per_second, self.updates_per_second, self.deletes_per_second, self.events_per_second]
            .map(|rate| (rate * seconds).round() as u64)
    }

    /// All the transactions the generator draws.
    pub fn transactions(&self) -> u64 {
        self.transaction_counts().iter().fold(0, |sum, count| sum.saturating_add(*count))
    }
}

/// A scripted step (`[[workload.script]]`, `[[check.script]]`): by default one autocommit
/// statement on a session of its own (today's one-row transaction); with `step`, a step of a
/// named session (`BEGIN`, a statement, `COMMIT`, `ROLLBACK`, a logical message), idle for a
/// while after it if it says so.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScriptedTxn {
    /// When it runs. A step of a named session runs at its trigger once its session's previous
    /// step is answered and that step's idle time has passed; a session's later step without an
    /// `at` has `At { at_ms: 0 }`: as soon as its session is ready.
    pub trigger: Trigger,
    /// The rows its statement changes (none for `BEGIN`, `COMMIT`, `ROLLBACK`, a message).
    pub ops: Vec<RowOp>,
    /// What the author meant it to do, for the timeline.
    pub label: String,
    /// Its session and what it asks (the default: an autocommit statement).
    pub step: ScriptStep,
}

/// What a scripted step asks and on which session.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScriptStep {
    pub kind: StepKind,
    /// The named session; `None`: a session of its own, autocommit.
    pub session: Option<String>,
    /// The session's database (given on its first step); `None`: the main database.
    pub database: Option<String>,
    /// After its reply, the session stays idle this long before its next step.
    pub idle_ms: u64,
}

impl ScriptedTxn {
    /// Today's step: `ops` as one autocommit transaction at `trigger`.
    pub fn autocommit(trigger: Trigger, ops: Vec<RowOp>, label: impl Into<String>) -> ScriptedTxn {
        ScriptedTxn { trigger, ops, label: label.into(), step: ScriptStep::default() }
    }
}

/// How the snapshot and the stream are handed over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HandoffMethod {
    /// The connector's own snapshot (`snapshot.mode`).
    ConnectorSnapshot,
    /// A plain `SELECT` by a bulk loader at `read_at_ms`; the connector (usually
    /// `snapshot.mode=no_data`) starts at the connector's `start_at_ms`.
    PlainRead { read_at_ms: u64 },
}

/// What the author expects.
///
/// Whether a lens's observations bear it out is decided in one place, for every lens:
/// [`crate::judge::verdict::judge`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Prediction {
    /// What the run comes to: no finding and caught up, some findings, or stopped safely short.
    pub verdict: Verdict,
    /// Invariants that must be violated (empty unless the verdict is `Violated`).
    pub findings: Vec<Invariant>,
    /// Invariants that may be violated, or not (seed-dependent side effects), whatever the verdict.
    pub allow: Vec<Invariant>,
    /// Whether the pipeline may also fail closed (`allow = ["fails-closed"]`): under faults that
    /// take away the resume position (an operator recreating the slot), a correct design stops
    /// and says why, rather than catching up; the prediction can say that this is fine.
    #[serde(default)]
    pub may_fail_closed: bool,
    /// Why, in the author's words.
    pub why: String,
    /// Where the prediction comes from (the scenario's `[prediction]`, a variant, `--expect`), or
    /// that the design was changed and no prediction applies.
    pub origin: PredictionOrigin,
}

/// A prediction's verdict (`verdict = "holds" | "violated" | "fails-closed"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// No invariant violated (but those allowed), and the pipeline catches up with the source.
    Holds,
    /// The invariants in `findings` are violated.
    Violated,
    /// No invariant violated (but those allowed), and the pipeline stops safely short of the
    /// acceptance boundary: the connector fails (or is stopped) instead of going on wrong.
    FailsClosed,
}

impl Verdict {
    pub const ALL: [Verdict; 3] = [Verdict::Holds, Verdict::Violated, Verdict::FailsClosed];

    /// Its name in a scenario file and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::Violated => "violated",
            Verdict::FailsClosed => "fails-closed",
        }
    }
}

/// Where the prediction a run is judged against comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "kebab-case")]
pub enum PredictionOrigin {
    /// The scenario's own `[prediction]` (the design as the file gives it, or changed only where
    /// the prediction still applies: the fault profile, the `[check]` bound, the horizon).
    #[default]
    File,
    /// The `[variants.NAME.prediction]` of the variant whose settings are the run's; `chosen`:
    /// named by `--variant` (else the `--set`s gave exactly its settings).
    Variant { name: String, chosen: bool },
    /// `--expect` on the command line, as given (on the variant `--variant` named, if any).
    Expect { text: String, variant: Option<String> },
    /// The design was changed (`--variant` with more `--set`s, or `--set`s alone) and no variant
    /// has exactly these settings: the run is judged against "holds", and says so.
    Unpredicted { variant: Option<String>, sets: Vec<String> },
}

/// The acceptance boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Acceptance {
    /// Give up waiting for the pipeline to catch up this long after the last workload
    /// transaction and fault.
    pub timeout_ms: u64,
    /// Keys sampled for content hashes.
    pub sample_size: u32,
    /// The run's horizon: it ends at this simulated time at the latest, and says so if it has
    /// not reached its boundary by then ([`crate::core::limits`]).
    pub horizon_ms: u64,
}

/// A whole scenario, validated.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Spec {
    pub name: String,
    pub description: String,
    // The sections of the components sit where their settings were when they were flat fields:
    // a `Spec`'s hash (the sweep's workers compare it) hashes the same fields in the same order.
    /// `[postgres]`.
    pub postgres: PostgresSection,
    pub tables: Vec<TableSetup>,
    pub debezium: DebeziumConfig,
    /// The connector properties as the scenario gave them (for the handoff record).
    pub connector_properties: BTreeMap<String, String>,
    /// When the connector is first started (simulated ms).
    pub connector_start_ms: u64,
    pub connect: ConnectConfig,
    /// `[kafka]`.
    pub kafka: KafkaSection,
    /// `[sink]`.
    pub sink: SinkConfig,
    pub background: Option<Background>,
    pub scripted: Vec<ScriptedTxn>,
    /// The explicit fault schedule.
    pub faults: Vec<Fault>,
    /// Faults generated per seed, in addition to the explicit ones.
    pub profile: Option<FaultProfile>,
    pub handoff: HandoffMethod,
    pub gate: GatePolicy,
    pub acceptance: Acceptance,
    pub prediction: Prediction,
    /// The bound `handoff check` explores, if the scenario gives one.
    pub check: Option<CheckBound>,
    /// A path through the bound that `handoff run` follows step by step (a counterexample
    /// exported by `handoff check`).
    pub schedule: Option<Schedule>,
    /// `[consumer]`: the outbox's consumer, reading the routed event topics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<crate::components::consumer::ConsumerConfig>,
    /// `[[message_outbox]]`: the service's message outboxes, in order (a
    /// [`crate::core::ids::MessageEvent`] names one by its place here).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub message_outboxes: Vec<MessageOutbox>,
    /// The connectors after the first (`[[connector]]` entries 2 and on), which the same Connect
    /// worker runs: each an outbox connector, every table it captures routed by its transforms
    /// (the first connector, `debezium`, is the one the sink reads and I1–I8 judge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_connectors: Vec<ConnectorSection>,
    /// The Kafka signal channels' topics (`signal.kafka.topic`), in order of first appearance
    /// ([`crate::core::event::Topic::Signal`] names one by its place here), each with the
    /// signals the script produces to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signal_topics: Vec<SignalTopic>,
    /// Settings the scenario gives that the model knows and does not simulate (converters, topic
    /// creation, connection and security settings, worker plumbing): accepted, and listed once in
    /// the report so that nobody takes them for simulated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_modelled: Vec<NotModelled>,
}

/// A setting accepted without effect on the run: where it was given, its name and why the model
/// does without it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NotModelled {
    /// `connector` (or the connector's name when there are several), `connect`, `postgres`.
    pub section: String,
    pub setting: String,
    /// As given.
    pub value: String,
    pub why: String,
}

/// A Kafka signal topic and the signals the script produces to it, in order (a record's key is
/// the signal's place + 1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SignalTopic {
    pub name: String,
    pub signals: Vec<KafkaSignalStep>,
}

/// A `signal` step with `channel = "kafka"`: the record an operator produces
/// (`kafka-console-producer`), its key and the signal's `id` and `type`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KafkaSignalStep {
    pub key: String,
    pub id: String,
    pub signal_type: String,
    pub data: String,
}

/// A connector of the run beyond the first: its modelled properties and the properties as the
/// scenario gave them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConnectorSection {
    pub debezium: DebeziumConfig,
    pub properties: BTreeMap<String, String>,
}

/// The routed topic names of several chains, in order of first appearance.
fn routed_names(chains: &[crate::components::connect::transforms::chain::TransformChain]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for chain in chains {
        for name in &chain.routed_topics {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    names
}

/// `[schedule]`: a path through the `[check]` bound, one step every `step_ms` in the timed lens.
/// The network delivers each message, and each timer fires, at the step that takes it; what the
/// path does not take waits until the schedule has ended, and then the run goes on as usual.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Schedule {
    pub step_ms: u64,
    pub steps: Vec<crate::scenario::schedule::Action>,
}

/// `[check]`: the bound of the exhaustive lens. Time is abstract there (any armed timer may
/// fire next, a scripted transaction may run at any point), so a bound is counted in rows,
/// transactions and crashes, not in milliseconds.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CheckBound {
    /// Rows loaded per table (keys `1..=rows`).
    pub rows: u32,
    /// The transactions that may run at any point; empty: the scenario's scripted ones.
    pub scripts: Vec<ScriptedTxn>,
    /// Processes that may crash (a crashed process may restart), and how many crashes in all.
    pub crash: Vec<Node>,
    pub crashes: u8,
    /// Connect workers that may pause past their `session.timeout.ms` and `wal_sender_timeout`
    /// (a zombie: its peers take it for gone, it goes on when it wakes), and how many pauses in
    /// all.
    #[serde(default)]
    pub pause: Vec<Node>,
    #[serde(default)]
    pub pauses: u8,
    /// How many times each periodic timer (offset flush, bgwriter) may fire.
    pub periodic_fires: u8,
    /// What the operator may do by hand, each at most once, and when.
    pub operations: Vec<crate::scenario::schedule::Operation>,
    pub operate_while: crate::scenario::schedule::OperateWhile,
    /// When the processes in `crash` may crash.
    pub crash_while: crate::scenario::schedule::CrashWhile,
    /// When the scripted transactions may run.
    #[serde(default)]
    pub script_while: crate::scenario::schedule::ScriptWhile,
    /// When a commit becomes visible to other sessions' snapshots.
    #[serde(default)]
    pub commit_visibility: crate::scenario::schedule::CommitVisibility,
    /// Whether the background writer's RUNNING_XACTS records are in the bound (its timer fires
    /// up to `periodic_fires` times): what moves a slot's `restart_lsn` past its creation
    /// point. Off by default, as the exhaustive world's checkpoints are.
    pub bgwriter_running_xacts: bool,
    /// `sometimes` properties the bound is not expected to reach.
    pub unreached_ok: Vec<String>,
}

impl CheckBound {
    /// The processes a bound may crash, by their scenario names.
    pub const CRASHABLE: [(&'static str, Node); 6] = [
        ("connect", Node::Connect),
        ("connect-2", Node::Connect2),
        ("postgres", Node::Pg1),
        ("kafka", Node::Kafka),
        ("sink", Node::Sink),
        ("consumer", Node::Consumer),
    ];

    /// The Connect workers a bound may pause, by their scenario names.
    pub const PAUSABLE: [(&'static str, Node); 2] = [("connect", Node::Connect), ("connect-2", Node::Connect2)];
}

impl Spec {
    /// How many connectors the run has (`[[connector]]` entries; `[connector]` is one).
    pub fn connector_count(&self) -> usize {
        1 + self.more_connectors.len()
    }

    /// Connector `c`'s modelled properties.
    pub fn connector(&self, c: usize) -> &DebeziumConfig {
        if c == 0 { &self.debezium } else { &self.more_connectors[c - 1].debezium }
    }

    /// Connector `c`'s properties as the scenario gave them.
    /// Connector `c`'s `transaction.boundary`: `None` for `poll` (the default), the interval for
    /// `interval` (`transaction.boundary.interval.ms`, or the worker's `offset.flush.interval.ms`
    /// where it is unset: `SourceConnectorConfig`, `ExactlyOnceWorkerSourceTask`).
    pub fn transaction_boundary_interval_ms(&self, c: usize) -> Option<u64> {
        let properties = self.connector_properties_of(c);
        (properties.get("transaction.boundary").map(String::as_str) == Some("interval")).then(|| {
            properties
                .get("transaction.boundary.interval.ms")
                .and_then(|ms| ms.trim().parse().ok())
                .unwrap_or(self.connect.offset_flush_interval_ms)
        })
    }

    pub fn connector_properties_of(&self, c: usize) -> &BTreeMap<String, String> {
        if c == 0 { &self.connector_properties } else { &self.more_connectors[c - 1].properties }
    }

    /// Every connector's modelled properties, in entry order.
    pub fn connectors(&self) -> impl Iterator<Item = &DebeziumConfig> {
        std::iter::once(&self.debezium).chain(self.more_connectors.iter().map(|more| &more.debezium))
    }

    /// The first connector's transformation chain, from its `transforms` and `predicates`
    /// properties (validated when the scenario was read).
    pub fn transform_chain(
        &self,
    ) -> Result<
        crate::components::connect::transforms::chain::TransformChain,
        crate::components::connect::transforms::chain::ChainError,
    > {
        self.transform_chain_of(0)
    }

    /// Connector `c`'s transformation chain on its own (its routed topics its own).
    pub fn transform_chain_of(
        &self,
        c: usize,
    ) -> Result<
        crate::components::connect::transforms::chain::TransformChain,
        crate::components::connect::transforms::chain::ChainError,
    > {
        use crate::components::connect::transforms::chain::{TransformChain, is_chain_property};
        let context = self.chain_context_of(c);
        let properties: BTreeMap<String, String> = self
            .connector_properties_of(c)
            .iter()
            .filter(|(key, _)| is_chain_property(key))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        if properties.is_empty() {
            return Ok(TransformChain::none(context));
        }
        TransformChain::configure(&properties, context)
    }

    /// Every connector's chain as the run uses it: a routed topic is [`crate::core::event::Topic::Routed`]
    /// with its index in [`Spec::routed_topic_names`], whichever connector routes to it. A chain
    /// that does not configure (a spec built in code; the loader names the property) is none.
    pub fn run_transform_chains(&self) -> Vec<crate::components::connect::transforms::chain::TransformChain> {
        use crate::components::connect::transforms::chain::TransformChain;
        let mut chains: Vec<TransformChain> = (0..self.connector_count())
            .map(|c| self.transform_chain_of(c).unwrap_or_else(|_| TransformChain::none(Default::default())))
            .collect();
        let names = routed_names(&chains);
        for chain in &mut chains {
            chain.run_routed_topics.clone_from(&names);
        }
        chains
    }

    /// The names of the topics the run's transforms route to, every connector's, in order of
    /// first appearance.
    pub fn routed_topic_names(&self) -> Vec<String> {
        let chains: Vec<_> = (0..self.connector_count()).filter_map(|c| self.transform_chain_of(c).ok()).collect();
        routed_names(&chains)
    }

    /// What the transformation chain needs to know of the scenario to build the records
    /// Debezium builds: the topic prefix, the tables (with the aggregate type of an outbox
    /// table), the message outboxes, and the other logical messages the scenario writes (its
    /// heartbeat action query's, its script's and its bound's, the first writer of each prefix).
    pub fn chain_context(&self) -> crate::components::connect::transforms::chain::ChainContext {
        self.chain_context_of(0)
    }

    /// [`Spec::chain_context`] as connector `c` sees it: its topic prefix, its place, and every
    /// connector's heartbeat messages (a slot decodes every message, whatever its publication).
    pub fn chain_context_of(&self, c: usize) -> crate::components::connect::transforms::chain::ChainContext {
        use crate::components::connect::transforms::chain::{ChainContext, PlainMessage};
        let mut plain_messages: Vec<PlainMessage> = Vec::new();
        for heartbeat in self.connectors().filter_map(|debezium| debezium.heartbeat_action_message.as_ref()) {
            if plain_messages.iter().any(|plain| plain.prefix == heartbeat.prefix) {
                continue;
            }
            plain_messages.push(PlainMessage {
                prefix: heartbeat.prefix.clone(),
                payload_bytes: heartbeat.payload_bytes,
                // `now()::varchar` is 29 bytes; a literal of that size is taken for it.
                now: heartbeat.payload_bytes == 29,
            });
        }
        let bound_scripts = self.check.iter().flat_map(|bound| bound.scripts.iter());
        for txn in self.scripted.iter().chain(bound_scripts) {
            if let StepKind::Message { prefix, payload_bytes, .. } = &txn.step.kind
                && !plain_messages.iter().any(|plain| plain.prefix == *prefix)
            {
                plain_messages.push(PlainMessage { prefix: prefix.clone(), payload_bytes: *payload_bytes, now: false });
            }
        }
        ChainContext {
            topic_prefix: self.connector(c).topic_prefix.clone(),
            connector: c as u8,
            tables: self
                .tables
                .iter()
                .map(|table| (table.name.clone(), table.outbox.as_ref().map(|outbox| outbox.aggregatetype.clone())))
                .collect(),
            message_outboxes: self
                .message_outboxes
                .iter()
                .map(|outbox| (outbox.prefix.clone(), outbox.aggregatetype.clone()))
                .collect(),
            plain_messages,
        }
    }

    /// The outboxes whose events I9 checks: the captured outbox tables the connector's
    /// transforms route, and every message outbox ([`TableId::message_outbox`]): a message
    /// outbox's messages are the service's events and nothing else, routed or not (a chain that
    /// does not route them loses them, which I9 says).
    pub fn event_outboxes(&self) -> Vec<TableId> {
        let mut outboxes = self.routed_tables();
        outboxes.extend((0..self.message_outboxes.len()).map(|index| TableId::message_outbox(index as u16)));
        outboxes
    }

    /// The captured tables whose changes go to their change topics, for the sink: every table of
    /// the first connector's `table.include.list` but those its transforms route elsewhere (an
    /// outbox table under the `EventRouter`, whose rows are events, judged by I9). The other
    /// connectors capture only tables they route.
    pub fn sink_tables(&self) -> Vec<TableId> {
        // The signal table is the connector's control channel, captured so that its rows reach
        // the connector (`RelationalTableFilters`): its topic holds signals and watermarks, no
        // documents, and the checkers leave it out.
        let signal_table = self.debezium.signal_table();
        // With the tables later configurations add (`connector_config` steps).
        let captured = self.debezium.ever_captured();
        let tables = captured.iter().copied().filter(|table| Some(*table) != signal_table);
        match self.transform_chain() {
            Ok(chain) if !chain.is_empty() => tables.filter(|table| !chain.routes(*table)).collect(),
            _ => tables.collect(),
        }
    }

    /// The publication connector `debezium` uses, when its signal table is not in it: a
    /// publication that exists before the run (`[[publication]]`) without the signal table, which
    /// `publication.autocreate.mode=all_tables` uses as it is (`filtered` sets it to the
    /// captured tables, the signal table among them; a publication the connector creates is `FOR
    /// ALL TABLES`).
    pub fn unpublished_signal_table(&self, debezium: &DebeziumConfig) -> Option<&str> {
        let table = debezium.signal_table()?;
        if debezium.publication_filtered {
            return None;
        }
        let (name, tables) = self.postgres.publications.iter().find(|(name, _)| *name == debezium.publication_name)?;
        (!tables.contains(&table)).then_some(name.as_str())
    }

    /// The captured outbox tables whose events the connectors' transforms route.
    pub fn routed_tables(&self) -> Vec<TableId> {
        let mut tables: Vec<TableId> = Vec::new();
        for c in 0..self.connector_count() {
            if let Ok(chain) = self.transform_chain_of(c)
                && !chain.is_empty()
            {
                for table in &self.connector(c).tables {
                    if chain.routes(*table) && !tables.contains(table) {
                        tables.push(*table);
                    }
                }
            }
        }
        tables
    }

    /// The slots of the connectors that route outbox events: where an event's WAL is read.
    pub fn routing_slots(&self) -> Vec<String> {
        (0..self.connector_count())
            .filter(|c| {
                self.transform_chain_of(*c)
                    .is_ok_and(|chain| !chain.is_empty() && self.connector(*c).tables.iter().any(|t| chain.routes(*t)))
            })
            .map(|c| self.connector(c).slot_name.clone())
            .collect()
    }

    /// The keys loaded before the run for a table.
    pub fn initial_keys(&self, table: TableId) -> impl Iterator<Item = Key> + use<> {
        let rows = self.tables.get(usize::from(table.0)).map_or(0, |t| t.rows);
        1..=Key::from(rows)
    }
}

/// A small claims scenario for tests and the exhaustive lens: `rows` claims in `public.claims`
/// (`REPLICA IDENTITY FULL`), one update of claim 1 and one delete of claim 2 while anything may
/// happen, a connector with `snapshot.mode=initial` fetching one row at a time, one partition,
/// and the given sink rule. Its prediction is a placeholder: set it for the case at hand.
pub fn claims_minimal(rows: u32, rule: crate::components::sink::ApplyRule) -> Spec {
    use crate::components::connect::debezium::SnapshotMode;
    use crate::core::ids::Status;
    let table = TableId(0);
    let any_time = Trigger::At { at_ms: 0 };
    Spec {
        name: "claims-minimal".into(),
        description: "a few claims, an update and a delete, one connector crash".into(),
        postgres: PostgresSection::minimal(),
        tables: vec![TableSetup {
            id: table,
            name: "public.claims".into(),
            rows,
            replica_identity: ReplicaIdentity::Full,
            database: None,
            outbox: None,
            composite_key: None,
            unique_column: None,
            keyless: false,
        }],
        debezium: DebeziumConfig {
            version: (3, 7),
            pgjdbc: None,
            name: "claims-connector".into(),
            connector_index: 0,
            topic_prefix: "claims".into(),
            slot_name: "debezium".into(),
            plugin_name: "pgoutput".into(),
            publication_name: "dbz_publication".into(),
            publication_filtered: false,
            snapshot_mode: SnapshotMode::Initial,
            snapshot_fetch_size: 1,
            max_batch_size: 2048,
            poll_interval_ms: 500,
            retriable_restart_connector_wait_ms: 10_000,
            tombstones_on_delete: true,
            log_position_check_enable: true,
            offset_mismatch_strategy: crate::components::connect::debezium::OffsetMismatchStrategy::NoValidation,
            slot_seek_to_known_offset_on_start: false,
            lsn_flush_mode: crate::components::connect::debezium::LsnFlushMode::Connector,
            heartbeat_interval_ms: 0,
            slot_failover: false,
            heartbeat_action_table: None,
            heartbeat_action_message: None,
            message_prefixes: crate::components::connect::debezium::MessagePrefixFilter::All,
            tables: vec![table],
            snapshot_tables: None,
            signalling: None,
            later_tables: Vec::new(),
            message_key_columns: Vec::new(),
            null_key_tables: Vec::new(),
        },
        connector_properties: BTreeMap::new(),
        connector_start_ms: 0,
        connect: ConnectConfig::new(60_000, 5_000),
        kafka: KafkaSection {
            partitions: 1,
            transaction_abort_sweep_interval_ms: crate::components::kafka::TRANSACTION_ABORT_SWEEP_INTERVAL_MS,
            compaction: None,
            group_initial_rebalance_delay_ms: crate::components::kafka::group::GROUP_INITIAL_REBALANCE_DELAY_MS,
        },
        sink: SinkConfig {
            rule,
            group: "claims-search-index".into(),
            auto_commit_interval_ms: 5_000,
            max_poll_records: 500,
            auto_offset_reset: crate::core::protocol::OffsetReset::Earliest,
            isolation_level: crate::core::protocol::IsolationLevel::ReadUncommitted,
            null_values: crate::components::sink::NullValues::Ignore,
        },
        background: None,
        scripted: vec![
            ScriptedTxn::autocommit(
                any_time,
                vec![RowOp::Update { table, key: 1, status: Status::Approved }],
                "update claim 1",
            ),
            ScriptedTxn::autocommit(any_time, vec![RowOp::Delete { table, key: 2 }], "delete claim 2"),
        ],
        faults: Vec::new(),
        profile: None,
        handoff: HandoffMethod::ConnectorSnapshot,
        gate: GatePolicy::Off,
        acceptance: Acceptance {
            timeout_ms: 600_000,
            sample_size: 20,
            horizon_ms: crate::core::limits::DEFAULT_HORIZON_MS,
        },
        prediction: Prediction {
            verdict: Verdict::Holds,
            findings: Vec::new(),
            allow: Vec::new(),
            may_fail_closed: false,
            why: String::new(),
            origin: PredictionOrigin::File,
        },
        check: None,
        schedule: None,
        consumer: None,
        more_connectors: Vec::new(),
        signal_topics: Vec::new(),
        message_outboxes: Vec::new(),
        not_modelled: Vec::new(),
    }
}
