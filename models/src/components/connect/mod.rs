//! A Kafka Connect worker running one source task (the Debezium PostgreSQL task), in at-least-once
//! mode, as Apache Kafka's `connect/runtime` does it (each point names the class it follows).
//!
//! - `SubmittedRecords`: a FIFO of (offset, acked) for the connector's one source partition;
//!   the committable offset is the last offset of the contiguous acknowledged prefix, refreshed at
//!   the top of every send-loop iteration (each `poll()`; `AbstractWorkerSourceTask.execute`).
//! - The offset commit every `offset.flush.interval.ms` (fixed delay from task start,
//!   `SourceTaskOffsetCommitter`; `WorkerSourceTask.commitOffsets`, `OffsetStorageWriter`): take
//!   the committable snapshot, write it to the offsets topic, wait `offset.flush.timeout.ms` for
//!   the acknowledgement; on success call `SourceTask.commit()`, on timeout put the offsets back
//!   and do not call it. An empty flush also counts as success.
//! - A hard kill of the worker process loses everything volatile (the offsets topic is read to
//!   its end at start, `KafkaOffsetBackingStore`): the restarted task reads
//!   the last flushed offset and everything after it is produced again.
//! - A task failure is not a process death: `AbstractWorkerSourceTask.execute` catches the
//!   exception and runs `finalOffsetCommit(true)` unless the task was cancelled, so the
//!   acknowledged prefix is committed before the task is FAILED (`kill-connector-task`).
//! - A graceful stop (`Worker.stopTask`, then `AbstractWorkerSourceTask.close`): the poll in
//!   progress ends, in-flight records are awaited up to `offset.flush.timeout.ms`, the final
//!   offsets are committed, `commit()` is called, then the task's `stop()` (Debezium confirms the
//!   stored offset once and closes its connections).
//! - The producer: `max.in.flight.requests.per.connection=1`, `acks=all`; a poll's records are
//!   sent as one request, the next one when the previous is acknowledged.
//! - Debezium's `poll()` waits up to `poll.interval.ms` for a full batch; on the poll after
//!   `commit()` it first re-reads the stored offset and confirms it to the slot (`debezium.rs`).
//!
//! The connector's target state (RUNNING / STOPPED) is durable: `PUT .../stop` and `.../resume`
//! write it to the config topic (`KafkaConfigBackingStore.putTargetState`; STOPPED is KIP-875's),
//! so it survives a worker's death ([`Component::crash`] keeps it), and a restarting worker reads
//! it back and starts no task of a STOPPED connector (`Worker.startConnector` honours the
//! `TargetState`). A REST call needs a reachable worker.
//!
//! Exactly-once source support (KIP-618; reference kafka-connect.md §2), with
//! `exactly.once.source.support=enabled` (`ExactlyOnceWorkerSourceTask`):
//! - Start-up (§2.2): zombie fencing (with one task before and after, Connect only writes the
//!   task-count record, which changes nothing here), `initTransactions()` with the task's
//!   `transactional.id` `${group.id}-${connector}-0` — the coordinator bumps the epoch and aborts
//!   a transaction the previous instance left open — then the offsets are read as a
//!   `read_committed` consumer sees them.
//! - Steady state, `transaction.boundary=poll` (§2.3): each non-empty `poll()` is one
//!   transaction; its records and then its last offset are sent through the task's
//!   transactional producer, and `commitTransaction()` blocks the send loop until the commit is
//!   done; only then `commitRecord` and `SourceTask.commit()` are called, so Debezium confirms to
//!   the slot only committed offsets. No periodic offset committer runs.
//! - Failure (§2.4): a worker's death leaves its transaction open (`read_committed` readers wait
//!   at the last stable offset) until the next instance's `initTransactions()` or
//!   `transaction.timeout.ms` aborts it; a task failure skips the final commit
//!   (`finalOffsetCommit(true)`), so its transaction stays open the same way; a graceful stop
//!   commits it. A fenced producer fails the task.
//!
//! A group of workers (`[connect] workers` of 2 or 3; [`group`]): each worker holds every
//! connector's configuration and target state (the config topic, read to its end before it
//! joins) and runs the tasks the group's leader assigns it; with one worker no group protocol
//! runs and the worker runs every connector's task, as before.
//!
//! Left out: `transaction.boundary=connector`, `errors.tolerance`, orphaned tasks, REST calls
//! forwarded to a group's leader (a scenario with several workers takes no REST call yet).

pub mod debezium;
pub mod group;
mod rest;
pub mod transforms;

use crate::components::connect::debezium::{DebeziumConfig, DebeziumTask, Phase, TaskEvent};
use crate::components::connect::group::{GroupConfig, GroupMember, MemberState};
use crate::components::connect::transforms::chain::{Fate, TransformChain};
use crate::core::component::{Component, Ctx, TaskTimer, Timer};
use crate::core::event::TopicPartition;
use crate::core::event::{SourceOffset, SourceRecord};
use crate::core::fault::FaultAction;
use crate::core::ids::Key;
use crate::core::ids::Node;
use crate::core::observe::Observation;
/// The worker's status, as its REST API reports it (defined with the REST protocol, which the
/// operator reads too).
pub use crate::core::protocol::ConnectorState;
use crate::core::protocol::{
    Control, GroupReply, GroupRequest, KAFKA_RECONNECT_BACKOFF_MS, KafkaReply, KafkaRequest, Msg, ProducerEpoch,
    RestReply, RestRequest,
};
use crate::core::shared::{CopyOnWrite, Fixed, Optional};
use crate::core::time::SimTime;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConnectConfig {
    /// `offset.flush.interval.ms` (default 60 000).
    pub offset_flush_interval_ms: u64,
    /// `offset.flush.timeout.ms` (default 5 000).
    pub offset_flush_timeout_ms: u64,
    /// `exactly.once.source.support` (default `disabled`).
    #[serde(default)]
    pub exactly_once_source_support: ExactlyOnceSourceSupport,
    /// `group.id`: the worker group, part of each task's `transactional.id`.
    #[serde(default = "default_group_id")]
    pub group_id: String,
    /// `producer.transaction.timeout.ms` (the producer's `transaction.timeout.ms`, default 60 000).
    #[serde(default = "default_transaction_timeout_ms")]
    pub transaction_timeout_ms: u64,
    /// How many workers form the group (the testbed's `workers`, 1 to 3; default 1).
    #[serde(default = "one_worker")]
    pub workers: u8,
    /// The group settings (used with two or more workers).
    #[serde(default)]
    pub group: GroupConfig,
    /// In a group: whether anything reads the status topic (`GET …/status` by an operator's
    /// procedure). Its writes change nothing else, so without a reader the workers leave them
    /// out: fewer messages, the same history.
    #[serde(skip)]
    pub status_readers: bool,
}

fn one_worker() -> u8 {
    1
}

impl ConnectConfig {
    /// The defaults of `WorkerConfig` and `DistributedConfig` (`group.id` has none: this is the
    /// one of the `connect-distributed.properties` Kafka ships).
    pub fn new(offset_flush_interval_ms: u64, offset_flush_timeout_ms: u64) -> ConnectConfig {
        ConnectConfig {
            offset_flush_interval_ms,
            offset_flush_timeout_ms,
            exactly_once_source_support: ExactlyOnceSourceSupport::Disabled,
            group_id: default_group_id(),
            transaction_timeout_ms: default_transaction_timeout_ms(),
            workers: 1,
            group: GroupConfig::default(),
            status_readers: false,
        }
    }

    /// Whether source tasks run exactly-once (`exactly.once.source.support=enabled`).
    pub fn exactly_once(&self) -> bool {
        self.exactly_once_source_support == ExactlyOnceSourceSupport::Enabled
    }

    /// A task's `transactional.id` (`Worker.taskTransactionalId`): `${group.id}-${connector}-${task}`.
    pub fn transactional_id(&self, connector: &str) -> String {
        format!("{}-{connector}-0", self.group_id)
    }
}

fn default_group_id() -> String {
    "connect-cluster".into()
}

fn default_transaction_timeout_ms() -> u64 {
    60_000
}

/// The worker's `exactly.once.source.support` (`DistributedConfig.ExactlyOnceSourceSupport`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExactlyOnceSourceSupport {
    /// At-least-once source tasks with the periodic offset committer.
    #[default]
    Disabled,
    /// The leader writes the config topic transactionally; tasks still run at-least-once.
    Preparing,
    /// Transactional source tasks and zombie fencing.
    Enabled,
}

impl ExactlyOnceSourceSupport {
    pub const ALL: [ExactlyOnceSourceSupport; 3] =
        [ExactlyOnceSourceSupport::Disabled, ExactlyOnceSourceSupport::Preparing, ExactlyOnceSourceSupport::Enabled];

    pub fn name(self) -> &'static str {
        match self {
            ExactlyOnceSourceSupport::Disabled => "disabled",
            ExactlyOnceSourceSupport::Preparing => "preparing",
            ExactlyOnceSourceSupport::Enabled => "enabled",
        }
    }
}

/// The connector's target state, stored in the config topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TargetState {
    Running,
    Stopped,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Submitted {
    seq: u64,
    offset: SourceOffset,
    /// When Kafka acknowledged it.
    acked_at: Option<SimTime>,
}

/// What a pending Kafka request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Pending {
    /// Reading the stored offset to start (or restart) the task.
    StartOffsets,
    /// Reading the stored offset for Debezium's `performCommit()`, then the poll continues.
    CommitOffsets { then_stop: bool },
    /// A produce request carrying `count` submitted records of `first_seq..=last_seq` (the
    /// others in that range a transform dropped, acknowledged already).
    Produce { first_seq: u64, last_seq: u64, count: usize, changes: usize, completion_marker: bool },
    /// An offset flush.
    Flush { final_commit: bool },
    /// `DELETE /connectors/<name>/offsets`, answered to `reply_to` (the caller, and its
    /// forwarding id when a worker forwarded the call).
    DeleteOffsets { reply_to: rest::Caller },
    /// A record of the group's config topic; a REST call's, answered to `reply_to`.
    ConfigWrite { reply_to: Option<rest::Caller> },
    /// `GET …/status` in a group: reading the status topic.
    StatusRead { reply_to: rest::Caller },
    /// `initTransactions()` of an exactly-once task starting.
    InitProducer,
    /// The offsets of the open transaction, sent through the task's transactional producer.
    TxnOffsets { final_commit: bool },
    /// `commitTransaction()`.
    EndTxn { final_commit: bool },
    /// The Kafka signal channel's consumer: its group's committed position.
    SignalGroup,
    /// The Kafka signal channel's consumer: a fetch of the signal topic.
    SignalFetch,
    /// The Kafka signal channel's consumer: an (auto-)commit of its position.
    SignalCommit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum TaskState {
    /// Reading the stored offset before `SourceTask.start()`.
    Starting,
    Running,
    /// A graceful stop: waiting for in-flight records, then the final commit.
    Stopping,
    Failed,
}

/// The source task as Connect runs it: the Debezium task plus Connect's offset machinery.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct TaskRuntime {
    state: TaskState,
    /// Shared between states until a step changes the task (many Connect steps only read it).
    debezium: CopyOnWrite<DebeziumTask>,
    submitted: CopyOnWrite<VecDeque<Submitted>>,
    next_seq: u64,
    /// The committable snapshot (refreshed at each poll).
    committable: Option<SourceOffset>,
    /// `OffsetStorageWriter.data`: offsets waiting for the next flush.
    writer_data: Option<SourceOffset>,
    /// `OffsetStorageWriter.toFlush`.
    flushing: Option<SourceOffset>,
    /// Records polled but not yet sent (the producer's accumulator), submitted sequences
    /// `accumulator_first_seq..=accumulator_last_seq` (less those a transform dropped).
    accumulator: Vec<SourceRecord>,
    accumulator_first_seq: u64,
    accumulator_last_seq: u64,
    produce_in_flight: bool,
    /// When the current `poll()` started.
    poll_started_at: SimTime,
    poll_armed: bool,
    /// The armed poll is an idle one, armed only for an interval transaction boundary: records
    /// arriving before it bring it forward.
    #[serde(default)]
    poll_for_boundary: bool,
    /// `SourceTask.commit()` was called; the next poll performs the commit.
    commit_requested: bool,
    /// A poll is blocked reading the stored offset for `performCommit()`.
    poll_blocked: bool,
    /// The task threw an exception: its send loop ended and its final offset commit runs; it
    /// ends FAILED, not stopped.
    failing: bool,
    /// `POST /connectors/<name>/tasks/0/restart` came while the failing task was still
    /// committing: the herder starts the task anew once the old one has stopped.
    restart_requested: bool,
    /// Exactly-once: the task's transactional producer (`None` in at-least-once mode).
    eos: Option<EosProducer>,
    /// The Kafka signal channel's consumer (`signal.enabled.channels` has `kafka`).
    #[serde(default)]
    signals: Option<SignalConsumer>,
    /// The streaming loop's idle iteration is armed ([`TaskTimer::StreamIdle`]).
    #[serde(default)]
    idle_armed: bool,
}

/// The Kafka signal channel's consumer of a task (`KafkaSignalChannel`: a `KafkaConsumer`
/// assigned partition 0 of `signal.kafka.topic`, `enable.auto.commit=true`,
/// `auto.offset.reset=earliest`), polled by the SignalProcessor every `signal.poll.interval.ms`.
/// In memory only: a crashed task's consumer commits nothing more, and the next one starts at
/// what the group committed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct SignalConsumer {
    /// The fetch position (`None` until the group's committed position is read).
    position: Option<u64>,
    /// Records fetched and not yet returned by `poll()`: (offset, key).
    fetched: Vec<(u64, Key)>,
    /// Records `poll()` returned that the task has not read yet (it was busy): (offset, key).
    returned: Vec<(u64, Key)>,
    /// The position after the last record `poll()` returned (what an auto-commit commits).
    consumed: u64,
    /// What the consumer committed last, and when.
    committed: u64,
    committed_at: SimTime,
    fetching: bool,
}

/// An exactly-once source task's transactional producer (`ExactlyOnceWorkerSourceTask`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct EosProducer {
    /// Its id and epoch once `initTransactions()` returned.
    producer: Option<ProducerEpoch>,
    /// The offset of the last record the open transaction holds (`offsetWriter.offset`, the
    /// latest wins); `None`: no transaction is open.
    open: Option<SourceOffset>,
    /// `commitTransaction()` is running: the send loop waits for it.
    committing: bool,
    /// Debezium's in-process restart came due while a commit ran: it happens in the next
    /// `poll()`, which the task thread calls only once `commitTransaction()` has returned.
    #[serde(default)]
    restart_after_commit: bool,
    /// `transaction.boundary=interval`: when the boundary manager last committed
    /// (`initialize()` sets it when the task starts).
    last_commit_at: SimTime,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Volatile {
    /// Kafka requests awaiting a reply: id, the connector it is for, purpose, and the request
    /// (re-sent after a lost connection, as the Kafka clients retry).
    pending: Vec<(u64, u8, Pending, CopyOnWrite<KafkaRequest>)>,
    next_request: u64,
    /// In a group: REST calls it forwarded and awaits answers to: its id, the worker it went
    /// to, and the caller to relay the answer to.
    forwards: Vec<(u32, Node, rest::Caller)>,
    next_forward: u32,
    /// REST calls that came during a rebalance: the herder's tick serves them once it is over.
    rest_waiting: Vec<rest::Waiting>,
    /// The state it last wrote to the status topic, by connector.
    written_status: Vec<Option<ConnectorState>>,
}

impl Volatile {
    fn new() -> Volatile {
        Volatile {
            pending: Vec::new(),
            next_request: 1,
            forwards: Vec::new(),
            next_forward: 1,
            rest_waiting: Vec::new(),
            written_status: Vec::new(),
        }
    }

    fn request(&mut self, ctx: &mut Ctx, connector: usize, purpose: Pending, request: KafkaRequest) {
        let request_id = self.next_request;
        self.next_request += 1;
        self.pending.push((request_id, connector as u8, purpose, CopyOnWrite::new(request.clone())));
        ctx.send(Node::Kafka, Msg::Kafka { request_id, request });
    }

    /// Whether a request of connector `connector` for `purpose` awaits its reply.
    fn awaits(&self, connector: usize, purpose: impl Fn(&Pending) -> bool) -> bool {
        self.pending.iter().any(|(_, of, pending, _)| usize::from(*of) == connector && purpose(pending))
    }

    /// Forgets connector `connector`'s requests for `purpose`.
    fn forget(&mut self, connector: usize, purpose: impl Fn(&Pending) -> bool) {
        self.pending.retain(|(_, of, pending, _)| !(usize::from(*of) == connector && purpose(pending)));
    }
}

/// Sessions of connector `c` with PostgreSQL are numbered from `c << SESSION_BITS`: each
/// connector's task opens its own (a JDBC connection, a replication connection, a heartbeat
/// connection), and a reply finds its connector by its session.
const SESSION_BITS: u32 = 40;

fn first_session(connector: usize) -> u64 {
    ((connector as u64) << SESSION_BITS) + 1
}

/// One connector the worker runs (`[[connector]]`): its configuration and target state (in the
/// config topic, durable), its status, and its task (volatile).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Connector {
    pub debezium: Fixed<DebeziumConfig>,
    /// The connector's single message transforms (`transforms`), run on every record `poll()`
    /// returns, before it is produced.
    pub transforms: Fixed<TransformChain>,
    pub target_state: TargetState,
    /// `transaction.boundary` under exactly-once: `None` is `poll` (a transaction per non-empty
    /// batch), `Some(ms)` is `interval` with its `transaction.boundary.interval.ms`.
    pub transaction_boundary_interval_ms: Option<u64>,
    /// The task died and waits for a REST restart (the status shows FAILED).
    task_died: bool,
    /// Why the task failed, when Connect failed it (an exception in the transformation chain),
    /// as the status topic keeps its trace.
    failure: Option<String>,
    /// Lost at a crash: the running task and the next session number.
    task: Option<TaskRuntime>,
    next_session: u64,
    /// Its task is this worker's to run: always with one worker; in a group, what the leader
    /// assigned it (volatile).
    pub assigned: bool,
    /// In a group: how many task configurations the config topic holds for it, as this worker
    /// last read it (0 after `PUT …/stop`); `target_state` is likewise what it last read.
    pub config_tasks: u8,
    /// The configuration the connector was created with (version 0), which holds the table
    /// lists of the later versions ([`DebeziumConfig::later_tables`]); `debezium` is version
    /// `config_version` of it.
    first_config: Fixed<DebeziumConfig>,
    /// The configuration version it runs (`PUT /connectors/<name>/config`; durable, as the
    /// config topic is).
    pub config_version: u8,
    /// How many times this worker started the connector's task, across crashes: the incremental
    /// snapshot's chunk ids are drawn from it ([`crate::core::signal::ChunkId`], Debezium's
    /// random UUIDs, which never repeat). Counted only for a connector with a signal table, so
    /// that no other run's state changes.
    task_starts: u32,
}

impl Connector {
    pub fn new(
        debezium: Fixed<DebeziumConfig>,
        transforms: Fixed<TransformChain>,
        target_state: TargetState,
    ) -> Connector {
        Connector {
            first_config: debezium,
            config_version: 0,
            debezium,
            transforms,
            target_state,
            transaction_boundary_interval_ms: None,
            task_died: false,
            failure: None,
            task: None,
            next_session: 1,
            assigned: true,
            config_tasks: 1,
            task_starts: 0,
        }
    }

    /// With `transaction.boundary=interval` and its interval (reference kafka-connect.md §2.1).
    pub fn with_interval_boundary(mut self, interval_ms: Option<u64>) -> Connector {
        self.transaction_boundary_interval_ms = interval_ms;
        self
    }

    /// The task's state as the REST API shows it.
    pub fn status(&self) -> ConnectorState {
        match &self.task {
            None => {
                if self.target_state == TargetState::Stopped {
                    ConnectorState::Stopped
                } else if self.task_died {
                    ConnectorState::Failed
                } else {
                    ConnectorState::Unassigned
                }
            }
            Some(task) => match task.state {
                TaskState::Failed => ConnectorState::Failed,
                TaskState::Stopping => ConnectorState::Stopping,
                _ => ConnectorState::Running,
            },
        }
    }

    /// The Debezium task's phase, if a task runs.
    pub fn debezium_phase(&self) -> Option<&Phase> {
        self.task.as_ref().map(|task| &task.debezium.phase)
    }

    /// The running task's streaming metrics (`None`: no task runs).
    pub fn streaming_meter(&self) -> Option<debezium::StreamingMeter> {
        self.task.as_ref().map(|task| task.debezium.meter.0)
    }

    /// Why the task is FAILED, as its status says: the Debezium task's own error, or the
    /// exception Connect caught around it (a transform's).
    pub fn failure(&self) -> Option<String> {
        match self.debezium_phase() {
            Some(Phase::Failed { reason }) => Some(reason.clone()),
            _ => self.failure.clone(),
        }
    }

    /// The last LSN the task has completely processed while streaming.
    pub fn processed_upto(&self) -> Option<crate::core::lsn::Lsn> {
        self.task.as_ref().and_then(|task| task.debezium.processed_upto())
    }

    /// The Kafka signal channel's partition and how far the task has read it: `None` without the
    /// channel; `Some((tp, None))` while its consumer has not started or holds a record the task
    /// has not read yet.
    pub fn signals_read(&self) -> Option<(TopicPartition, Option<u64>)> {
        let kafka = self.debezium.signalling.as_ref()?.kafka.as_ref()?;
        let tp = TopicPartition { topic: crate::core::event::Topic::Signal(kafka.topic), partition: 0 };
        let read = self
            .task
            .as_ref()
            .and_then(|task| task.signals.as_ref())
            .filter(|consumer| {
                consumer.position.is_some() && consumer.returned.is_empty() && consumer.fetched.is_empty()
            })
            .map(|consumer| consumer.consumed);
        Some((tp, read))
    }

    /// Whether its task runs a read-only incremental snapshot (`read.only=true`): rows buffered
    /// or still to read that no captured commit stands for (the signal-table snapshot's
    /// watermark rows are commits the acceptance boundary waits for; these are not).
    pub fn read_only_backfill_running(&self) -> bool {
        self.task.as_ref().is_some_and(|task| task.debezium.wants_idle_iterations())
    }

    /// Whether nothing is waiting in its task: no queued, unsent or unacknowledged record.
    pub fn is_drained(&self) -> bool {
        self.task
            .as_ref()
            .is_none_or(|task| task.debezium.queued() == 0 && task.accumulator.is_empty() && !task.produce_in_flight)
    }
}

/// A Kafka Connect worker and the connectors it runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConnectWorker {
    pub config: Fixed<ConnectConfig>,
    /// Its connectors, in the order of the scenario's `[[connector]]` entries (at most
    /// [`crate::core::limits::MAX_CONNECTORS`]).
    pub connectors: Vec<Connector>,
    volatile: Volatile,
    /// Its membership of the workers' group (with two or more workers).
    pub membership: Optional<GroupMember>,
}

impl ConnectWorker {
    pub fn new(config: Fixed<ConnectConfig>, connectors: Vec<Connector>) -> ConnectWorker {
        assert!(
            !connectors.is_empty() && connectors.len() <= crate::core::limits::MAX_CONNECTORS,
            "a worker runs 1 to MAX_CONNECTORS connectors"
        );
        let membership = if config.workers > 1 { Optional::some(GroupMember::default()) } else { Optional::default() };
        ConnectWorker { config, connectors, volatile: Volatile::new(), membership }
    }

    /// Whether this worker is a member of a group (two or more workers).
    pub fn in_group(&self) -> bool {
        self.membership.0.is_some()
    }

    /// Whether the worker stopped cleanly and left its group (it does nothing more until it is
    /// started again).
    pub fn has_left(&self) -> bool {
        self.membership.0.as_ref().is_some_and(|member| member.state == MemberState::Left)
    }

    /// Whether the worker runs connector `c`'s task (in any state).
    pub fn runs_task(&self, c: usize) -> bool {
        self.connectors.get(c).is_some_and(|connector| connector.task.is_some())
    }

    /// A worker running one connector.
    pub fn single(
        config: Fixed<ConnectConfig>,
        debezium: Fixed<DebeziumConfig>,
        transforms: Fixed<TransformChain>,
        target_state: TargetState,
    ) -> ConnectWorker {
        ConnectWorker::new(config, vec![Connector::new(debezium, transforms, target_state)])
    }

    /// The first connector's task state, as the REST API shows it.
    pub fn status(&self) -> ConnectorState {
        self.connectors[0].status()
    }

    /// The first connector's Debezium phase, if its task runs.
    pub fn debezium_phase(&self) -> Option<&Phase> {
        self.connectors[0].debezium_phase()
    }

    /// Why the first connector's task is FAILED.
    pub fn failure(&self) -> Option<String> {
        self.connectors[0].failure()
    }

    /// The last LSN the first connector's task has completely processed while streaming.
    pub fn processed_upto(&self) -> Option<crate::core::lsn::Lsn> {
        self.connectors[0].processed_upto()
    }

    /// Whether nothing is waiting anywhere in the worker: no queued, unsent or unacknowledged
    /// record of any connector.
    pub fn is_drained(&self) -> bool {
        self.connectors.iter().all(Connector::is_drained)
    }

    fn start_task(&mut self, ctx: &mut Ctx, c: usize) {
        if !self.connectors[c].assigned {
            return; // another worker's task
        }
        self.connectors[c].failure = None;
        let mut task = DebeziumTask::new(self.connectors[c].debezium, self.connectors[c].next_session);
        if self.connectors[c].debezium.signalling.is_some() {
            self.connectors[c].task_starts += 1;
            task = task.with_chunk_origin(ctx.me.worker_index().unwrap_or(0), self.connectors[c].task_starts);
        }
        let debezium = CopyOnWrite::new(task);
        self.connectors[c].task = Some(TaskRuntime {
            state: TaskState::Starting,
            debezium,
            submitted: CopyOnWrite::new(VecDeque::new()),
            next_seq: 0,
            committable: None,
            writer_data: None,
            flushing: None,
            accumulator: Vec::new(),
            accumulator_first_seq: 0,
            accumulator_last_seq: 0,
            produce_in_flight: false,
            poll_started_at: ctx.now,
            poll_armed: false,
            poll_for_boundary: false,
            commit_requested: false,
            poll_blocked: false,
            failing: false,
            restart_requested: false,
            eos: self.config.exactly_once().then_some(EosProducer {
                producer: None,
                open: None,
                committing: false,
                restart_after_commit: false,
                last_commit_at: ctx.now,
            }),
            signals: None,
            idle_armed: false,
        });
        let signal_group =
            self.connectors[c].debezium.signalling.as_ref().and_then(|s| s.kafka.as_ref()).map(|k| k.group_id.clone());
        if let Some(group) = signal_group {
            // `KafkaSignalChannel.init`: the consumer is created with the task.
            if let Some(task) = self.connectors[c].task.as_mut() {
                task.signals = Some(SignalConsumer {
                    position: None,
                    fetched: Vec::new(),
                    returned: Vec::new(),
                    consumed: 0,
                    committed: 0,
                    committed_at: ctx.now,
                    fetching: false,
                });
            }
            let request = KafkaRequest::ReadGroup { group, reset: crate::core::protocol::OffsetReset::Earliest };
            self.volatile.request(ctx, c, Pending::SignalGroup, request);
        }
        let connector = self.connectors[c].debezium.name.clone();
        if self.config.exactly_once() {
            // Zombie fencing first: with one task before and after, only the task-count record is
            // written (`DistributedHerder.fenceZombieSourceTasks`); then `initTransactions()`.
            let transactional_id = self.config.transactional_id(&connector);
            let transaction_timeout_ms = self.config.transaction_timeout_ms;
            self.volatile.request(
                ctx,
                c,
                Pending::InitProducer,
                KafkaRequest::InitProducerId { transactional_id, transaction_timeout_ms },
            );
            return;
        }
        self.volatile.request(ctx, c, Pending::StartOffsets, KafkaRequest::ReadSourceOffset { connector });
        // scheduleWithFixedDelay: the first commit one interval after the task starts.
        ctx.set_timer(Timer::task(c as u8, TaskTimer::OffsetFlush), self.config.offset_flush_interval_ms);
    }

    fn handle_task_event(&mut self, ctx: &mut Ctx, c: usize, event: TaskEvent) {
        match event {
            TaskEvent::None => {}
            TaskEvent::RestartAfter(after_ms) => ctx.set_timer(Timer::task(c as u8, TaskTimer::TaskRestart), after_ms),
            TaskEvent::ReadSlotAgainAfter(after_ms) => {
                ctx.set_timer(Timer::task(c as u8, TaskTimer::SlotInfoRetry), after_ms)
            }
            TaskEvent::HeartbeatEvery(interval_ms) => {
                ctx.set_timer(Timer::task(c as u8, TaskTimer::Heartbeat), interval_ms)
            }
            TaskEvent::Failed => {
                if let Some(task) = self.connectors[c].task.as_mut() {
                    task.state = TaskState::Failed;
                }
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::PollReturns));
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::OffsetFlush));
            }
        }
        self.arm_poll(ctx, c);
    }

    /// Arms the timer for the moment the current `poll()` returns, if it has something to do.
    /// Before that: a task that failed inside a call that returns no event (the streaming thread's
    /// `NullPointerException` of a read-only snapshot) is failed here; a read-only snapshot's
    /// idle iterations are armed.
    fn arm_poll(&mut self, ctx: &mut Ctx, c: usize) {
        let poll_interval_ms = self.connectors[c].debezium.poll_interval_ms.max(1);
        if let Some(task) = self.connectors[c].task.as_mut()
            && task.state == TaskState::Running
        {
            if task.debezium.has_failed() {
                self.handle_task_event(ctx, c, TaskEvent::Failed);
                return;
            }
            if !task.idle_armed && task.debezium.wants_idle_iterations() {
                task.idle_armed = true;
                ctx.set_timer(Timer::task(c as u8, TaskTimer::StreamIdle), poll_interval_ms);
            }
        }
        let debezium = self.connectors[c].debezium;
        let boundary_interval_ms = self.connectors[c].transaction_boundary_interval_ms;
        let Some(task) = self.connectors[c].task.as_mut() else { return };
        let queued = task.debezium.queued();
        let brought_forward = task.poll_for_boundary && (queued > 0 || task.commit_requested);
        if task.state != TaskState::Running
            || (task.poll_armed && !brought_forward)
            || task.poll_blocked
            || task.eos.as_ref().is_some_and(|eos| eos.committing)
        {
            return;
        }
        // `transaction.boundary=interval`: an empty poll checks the boundary too
        // (`batchDispatched()` after a null batch), so an open transaction commits at the first
        // poll past its interval; other idle polls change nothing.
        let boundary_due = match (boundary_interval_ms, task.eos.as_ref()) {
            (Some(boundary), Some(eos)) if eos.open.is_some() => Some(eos.last_commit_at.ms() + boundary),
            _ => None,
        };
        if queued == 0 && !task.commit_requested && boundary_due.is_none() {
            return; // an idle poll changes nothing
        }
        let interval = debezium.poll_interval_ms.max(1);
        let delay = if queued >= debezium.max_batch_size as usize {
            0 // a full batch returns at once
        } else {
            // Polls return on a grid of poll.interval.ms from when the current one started; an
            // idle task's first poll that returns past the boundary is the one that commits.
            let elapsed = ctx.now.since(task.poll_started_at);
            let periods = elapsed.div_ceil(interval).max(1);
            let idle = queued == 0 && !task.commit_requested;
            task.poll_for_boundary = idle;
            let due = match boundary_due {
                Some(due) if idle => due.saturating_sub(task.poll_started_at.ms()).div_ceil(interval).max(periods),
                _ => periods,
            };
            task.poll_started_at.ms() + due * interval - ctx.now.ms()
        };
        task.poll_armed = true;
        ctx.set_timer(Timer::task(c as u8, TaskTimer::PollReturns), delay);
    }

    /// `poll()` returns now: perform a requested commit first, then hand records to the producer.
    fn poll_returns(&mut self, ctx: &mut Ctx, c: usize) {
        let debezium = self.connectors[c].debezium;
        let Some(task) = self.connectors[c].task.as_mut() else { return };
        task.poll_armed = false;
        task.poll_for_boundary = false;
        if task.state != TaskState::Running {
            return;
        }
        task.poll_started_at = ctx.now;
        refresh_committable(task, ctx.now);
        if task.commit_requested {
            task.commit_requested = false;
            task.poll_blocked = true;
            let connector = debezium.name.clone();
            self.volatile.request(
                ctx,
                c,
                Pending::CommitOffsets { then_stop: false },
                KafkaRequest::ReadSourceOffset { connector },
            );
            return;
        }
        self.finish_poll(ctx, c);
    }

    fn finish_poll(&mut self, ctx: &mut Ctx, c: usize) {
        let transforms = self.connectors[c].transforms;
        let Some(task) = self.connectors[c].task.as_mut() else { return };
        task.poll_blocked = false;
        task.poll_started_at = ctx.now;
        let records = if task.debezium.queued() > 0 { task.debezium.get_mut().drain() } else { Vec::new() };
        let last_offset = records.last().map(|record| record.offset);
        let mut failure = None;
        if !records.is_empty() && transforms.is_empty() {
            // No transforms: the batch goes to the producer as it is (moved, not copied).
            ctx.observe(Observation::Polled { summary: crate::core::observe::PollSummary::of(&records) });
            if task.accumulator.is_empty() {
                task.accumulator_first_seq = task.next_seq;
            }
            let submitted = task.submitted.get_mut();
            submitted.reserve(records.len());
            for record in &records {
                submitted.push_back(Submitted { seq: task.next_seq, offset: record.offset, acked_at: None });
                task.next_seq += 1;
            }
            task.accumulator_last_seq = task.next_seq - 1;
            if task.accumulator.is_empty() {
                task.accumulator = records;
            } else {
                task.accumulator.extend(records);
            }
        } else if !records.is_empty() {
            ctx.observe(Observation::Polled { summary: crate::core::observe::PollSummary::of(&records) });
            let submitted = task.submitted.get_mut();
            submitted.reserve(records.len());
            let mut dropped: Vec<String> = Vec::new();
            let mut routed = 0;
            for mut record in records {
                let seq = task.next_seq;
                // `AbstractWorkerSourceTask.sendRecords`: the chain runs per record; a record it
                // drops is acknowledged at once (`recordDropped`, `SubmittedRecords`), so the
                // offsets move past it; an exception ends the loop and fails the task, with the
                // records before it on their way.
                {
                    match transforms.apply(&record) {
                        Ok(Fate::Send { topic, placement }) => match transforms.topic(&topic) {
                            Some(to) => {
                                routed += usize::from(to != record.topic);
                                record.topic = to;
                                record.placement = placement;
                            }
                            None => {
                                failure = Some(format!(
                                    "a transform sent a record to `{topic}`, a topic the model does not know"
                                ));
                                break;
                            }
                        },
                        Ok(Fate::Dropped(why)) => {
                            submitted.push_back(Submitted { seq, offset: record.offset, acked_at: Some(ctx.now) });
                            task.next_seq += 1;
                            if !task.debezium.confirms_from_offset_store() {
                                task.debezium.get_mut().commit_record(record.offset);
                            }
                            dropped.push(why);
                            continue;
                        }
                        Err(problem) => {
                            failure = Some(problem);
                            break;
                        }
                    }
                }
                submitted.push_back(Submitted { seq, offset: record.offset, acked_at: None });
                task.next_seq += 1;
                if task.accumulator.is_empty() {
                    task.accumulator_first_seq = seq;
                }
                task.accumulator_last_seq = seq;
                task.accumulator.push(record);
            }
            if routed > 0 || !dropped.is_empty() {
                ctx.observe(Observation::Transformed {
                    routed,
                    dropped: dropped.len(),
                    first_drop: dropped.into_iter().next(),
                });
            }
        }
        if let Some(reason) = failure {
            self.send_accumulated(ctx, c);
            self.fail_task_for(ctx, c, reason);
            return;
        }
        if let Some(task) = self.connectors[c].task.as_mut()
            && let Some(eos) = task.eos.as_mut()
            && let Some(last) = last_offset
        {
            // Every record the poll returned has its offset written, one a transform dropped
            // too (`recordDropped`): the latest wins.
            eos.open = Some(last);
        }
        self.send_accumulated(ctx, c);
        let boundary_interval_ms = self.connectors[c].transaction_boundary_interval_ms;
        if let Some(task) = self.connectors[c].task.as_mut()
            && let Some(eos) = task.eos.as_mut()
        {
            // `batchDispatched()`: transaction.boundary=poll commits after every non-empty batch;
            // interval once `transaction.boundary.interval.ms` has passed since its last commit
            // (`ExactlyOnceWorkerSourceTask.buildTransactionManager`; with nothing open, the
            // model's commit does nothing). `commitTransaction()` blocks the loop.
            let due = match boundary_interval_ms {
                None => true,
                Some(interval) if ctx.now.ms() >= eos.last_commit_at.ms() + interval => {
                    eos.last_commit_at = ctx.now;
                    true
                }
                Some(_) => false,
            };
            if due && eos.open.is_some() {
                eos.committing = true;
                self.commit_transaction_if_sent(ctx, c, false);
                return;
            }
        }
        self.arm_poll(ctx, c);
    }

    /// `commitTransaction()` once every record of the transaction is acknowledged: its offsets
    /// through the transactional producer, then `EndTxn`.
    fn commit_transaction_if_sent(&mut self, ctx: &mut Ctx, c: usize, final_commit: bool) {
        let connector = self.connectors[c].debezium.name.clone();
        let Some(task) = self.connectors[c].task.as_mut() else { return };
        if task.produce_in_flight || !task.accumulator.is_empty() {
            return; // the producer's flush: wait for the acknowledgements
        }
        let Some(eos) = task.eos.as_ref() else { return };
        let (Some(producer), Some(offset)) = (eos.producer, eos.open) else { return };
        if self.volatile.awaits(c, |purpose| matches!(purpose, Pending::TxnOffsets { .. } | Pending::EndTxn { .. })) {
            return;
        }
        self.volatile.request(
            ctx,
            c,
            Pending::TxnOffsets { final_commit },
            KafkaRequest::WriteSourceOffsetInTransaction(Box::new(crate::core::protocol::TransactionalOffset {
                connector,
                offset: Some(offset),
                producer,
            })),
        );
    }

    /// The transaction committed: `commitRecord` for its records and `SourceTask.commit()`.
    fn transaction_committed(&mut self, ctx: &mut Ctx, c: usize, final_commit: bool) {
        let Some(task) = self.connectors[c].task.as_mut() else { return };
        let Some(eos) = task.eos.as_mut() else { return };
        let offset = eos.open.take();
        eos.committing = false;
        let restart = std::mem::take(&mut eos.restart_after_commit);
        ctx.observe(Observation::OffsetsCommitted { offset });
        if task.debezium.confirms_from_offset_store() {
            task.commit_requested = true;
        } else if let Some(offset) = offset {
            task.debezium.get_mut().commit_record(offset);
            let acked = task.debezium.last_acked();
            task.commit_offset(ctx, acked);
        }
        if final_commit {
            self.finish_stop(ctx, c);
        } else {
            if restart {
                self.restart_in_process(ctx, c);
            }
            self.send_accumulated(ctx, c);
            self.arm_poll(ctx, c);
            // A graceful stop that came while the commit ran goes on at once.
            self.continue_stop_if_drained(ctx, c);
        }
    }

    fn send_accumulated(&mut self, ctx: &mut Ctx, c: usize) {
        let Some(task) = self.connectors[c].task.as_mut() else { return };
        if task.produce_in_flight || task.accumulator.is_empty() {
            return;
        }
        let transaction = task.eos.as_ref().and_then(|eos| eos.producer);
        let batch = std::mem::take(&mut task.accumulator);
        task.produce_in_flight = true;
        let first_seq = task.accumulator_first_seq;
        let purpose = Pending::Produce {
            first_seq,
            last_seq: task.accumulator_last_seq,
            count: batch.len(),
            changes: batch
                .iter()
                .filter(|record| record.value.is_some_and(|value| !value.source.snapshot.is_snapshot()))
                .count(),
            completion_marker: batch.iter().any(|record| record.offset.snapshot_completed),
        };
        self.volatile.request(ctx, c, purpose, KafkaRequest::Produce { records: CopyOnWrite::new(batch), transaction });
    }

    fn on_produced(
        &mut self,
        ctx: &mut Ctx,
        c: usize,
        (first_seq, last_seq, count): (u64, u64, usize),
        changes: usize,
        completion_marker: bool,
    ) {
        let Some(task) = self.connectors[c].task.as_mut() else { return };
        task.produce_in_flight = false;
        // Sequences in `submitted` are consecutive: the batch is one range of it.
        let skip = task.submitted.front().map_or(0, |front| first_seq.saturating_sub(front.seq) as usize);
        for submitted in task.submitted.get_mut().iter_mut().skip(skip) {
            if submitted.seq > last_seq {
                break;
            }
            // A record a transform dropped in the range is acknowledged already.
            if submitted.seq >= first_seq && submitted.acked_at.is_none() {
                submitted.acked_at = Some(ctx.now);
                // Under exactly-once, `commitRecord` waits for the commit.
                if task.eos.is_none() && !task.debezium.confirms_from_offset_store() {
                    task.debezium.get_mut().commit_record(submitted.offset);
                }
            }
        }
        ctx.observe(Observation::ProduceAcked { count, changes, completion_marker });
        if task.eos.as_ref().is_some_and(|eos| eos.committing) {
            let final_commit = task.state == TaskState::Stopping;
            self.commit_transaction_if_sent(ctx, c, final_commit);
            return;
        }
        self.send_accumulated(ctx, c);
        self.continue_stop_if_drained(ctx, c);
    }

    /// The periodic offset commit (`WorkerSourceTask.commitOffsets`).
    fn offset_flush(&mut self, ctx: &mut Ctx, c: usize, final_commit: bool) {
        let debezium = self.connectors[c].debezium;
        let Some(task) = self.connectors[c].task.as_mut() else { return };
        if task.state == TaskState::Failed {
            return;
        }
        if let Some(eos) = task.eos.as_mut() {
            // No periodic committer under exactly-once; the final commit of a graceful stop
            // commits the open transaction, a failing task's skips it (`finalOffsetCommit`).
            if !final_commit {
                return;
            }
            if eos.open.is_some() && !task.failing {
                eos.committing = true;
                self.commit_transaction_if_sent(ctx, c, true);
            } else {
                self.finish_stop(ctx, c);
            }
            return;
        }
        if task.flushing.is_some() {
            // An earlier flush is still running; try at the next interval.
            ctx.set_timer(Timer::task(c as u8, TaskTimer::OffsetFlush), self.config.offset_flush_interval_ms);
            return;
        }
        // The committable offsets are refreshed at the top of every send-loop iteration: a poll
        // returns every poll.interval.ms even when it returns nothing.
        let last_poll_start =
            if final_commit { ctx.now } else { last_poll_start(task, ctx.now, debezium.poll_interval_ms) };
        refresh_committable(task, last_poll_start);
        if let Some(offset) = task.committable.take() {
            task.writer_data = Some(offset);
        }
        match task.writer_data.take() {
            None => {
                // Nothing to flush still counts as success.
                self.flush_succeeded(ctx, c, None, final_commit);
            }
            Some(offset) => {
                task.flushing = Some(offset);
                let connector = debezium.name.clone();
                self.volatile.request(
                    ctx,
                    c,
                    Pending::Flush { final_commit },
                    KafkaRequest::WriteSourceOffset { connector, offset: Some(offset) },
                );
                ctx.set_timer(Timer::task(c as u8, TaskTimer::OffsetFlushTimeout), self.config.offset_flush_timeout_ms);
            }
        }
    }

    fn flush_succeeded(&mut self, ctx: &mut Ctx, c: usize, offset: Option<SourceOffset>, final_commit: bool) {
        let Some(task) = self.connectors[c].task.as_mut() else { return };
        task.flushing = None;
        ctx.cancel_timer(Timer::task(c as u8, TaskTimer::OffsetFlushTimeout));
        if offset.is_some() {
            ctx.observe(Observation::OffsetsCommitted { offset });
        }
        if task.debezium.confirms_from_offset_store() {
            // SourceTask.commit(): Debezium only sets a flag; the next poll acts on it.
            task.commit_requested = true;
        } else {
            // Before 2.7, commit() confirms at once the last acknowledged offset (before 1.1,
            // the last polled one, DBZ-1766: `PostgresConnectorTask.commit()` on the committer
            // thread, `coordinator.commitOffset(lastOffset)`).
            let acked = task.debezium.last_acked();
            task.commit_offset(ctx, acked);
        }
        let stopping = task.state == TaskState::Stopping;
        if final_commit {
            self.finish_stop(ctx, c);
        } else if stopping {
            // A periodic flush was under way when the task began to stop: the final commit's
            // `beginFlush` waited for it (the writer's single flush permit, reference
            // kafka-connect.md §1.2, KAFKA-5756) and goes ahead now that it is done.
            self.continue_stop_if_drained(ctx, c);
        } else {
            ctx.set_timer(Timer::task(c as u8, TaskTimer::OffsetFlush), self.config.offset_flush_interval_ms);
            self.arm_poll(ctx, c);
        }
    }

    fn flush_timed_out(&mut self, ctx: &mut Ctx, c: usize) {
        let Some(task) = self.connectors[c].task.as_mut() else { return };
        let Some(offset) = task.flushing.take() else { return };
        // cancelFlush: the offsets go back; newer ones in `data` win.
        if task.writer_data.is_none() {
            task.writer_data = Some(offset);
        }
        self.volatile.forget(c, |purpose| matches!(purpose, Pending::Flush { .. }));
        ctx.observe(Observation::OffsetFlushFailed {
            reason: format!(
                "offset flush not acknowledged within offset.flush.timeout.ms={}",
                self.config.offset_flush_timeout_ms
            ),
        });
        let stopping = task.state == TaskState::Stopping;
        if stopping {
            self.finish_stop(ctx, c);
        } else {
            ctx.set_timer(Timer::task(c as u8, TaskTimer::OffsetFlush), self.config.offset_flush_interval_ms);
        }
    }

    /// The Kafka signal channel's partition: partition 0 of its topic.
    fn signal_partition(
        &self,
        c: usize,
    ) -> Option<(TopicPartition, &crate::components::connect::debezium::KafkaChannel)> {
        let kafka = self.connectors[c].debezium.signalling.as_ref()?.kafka.as_ref()?;
        Some((TopicPartition { topic: crate::core::event::Topic::Signal(kafka.topic), partition: 0 }, kafka))
    }

    /// The group's committed position (or the earliest offset): the consumer starts there, and
    /// the SignalProcessor's schedule begins (`scheduleAtFixedRate` with no initial delay).
    fn signal_group_read(&mut self, ctx: &mut Ctx, c: usize, committed: &[(TopicPartition, u64)]) {
        let Some((tp, kafka)) = self.signal_partition(c) else { return };
        let (topic, group) = (kafka.topic, kafka.group_id.clone());
        let stored = committed.iter().find(|(of, _)| *of == tp).map(|(_, position)| *position);
        let Some(consumer) = self.connectors[c].task.as_mut().and_then(|task| task.signals.as_mut()) else { return };
        let position = stored.unwrap_or(0);
        consumer.position = Some(position);
        consumer.consumed = position;
        consumer.committed = position;
        consumer.committed_at = ctx.now;
        ctx.observe(Observation::KafkaSignalConsumerStarted { topic, group, position, committed: stored.is_some() });
        ctx.set_timer(Timer::task(c as u8, TaskTimer::SignalPoll), 0);
    }

    /// `SignalProcessor.process` → `KafkaSignalChannel.read` → `poll()`: the auto-commit of what
    /// earlier polls returned (at most every `auto.commit.interval.ms`), the records fetched since
    /// the last poll handed to the task one by one, and the next fetch.
    fn signal_poll(&mut self, ctx: &mut Ctx, c: usize) {
        let Some((tp, kafka)) = self.signal_partition(c) else { return };
        let (group, poll_interval_ms, auto_commit_interval_ms) =
            (kafka.group_id.clone(), kafka.poll_interval_ms, kafka.auto_commit_interval_ms);
        let Some(task) = self.connectors[c].task.as_mut() else { return };
        match task.state {
            // The SignalProcessor starts once streaming is initialized (DBZ-7441): until then
            // the model looks again every 100 ms, and the schedule begins at the first look
            // that finds the task streaming.
            TaskState::Running if task.debezium.is_streaming() => {}
            TaskState::Running | TaskState::Starting => {
                ctx.set_timer(Timer::task(c as u8, TaskTimer::SignalPoll), poll_interval_ms.min(100));
                return;
            }
            TaskState::Stopping | TaskState::Failed => return,
        }
        let Some(consumer) = task.signals.as_mut() else { return };
        let Some(position) = consumer.position else { return };
        let mut requests = Vec::new();
        if consumer.consumed > consumer.committed
            && ctx.now.ms().saturating_sub(consumer.committed_at.ms()) >= auto_commit_interval_ms
        {
            consumer.committed = consumer.consumed;
            consumer.committed_at = ctx.now;
            requests.push((
                Pending::SignalCommit,
                KafkaRequest::CommitGroup { group: group.clone(), positions: vec![(tp, consumer.consumed)] },
            ));
        }
        let fetched = std::mem::take(&mut consumer.fetched);
        if let Some((last, _)) = fetched.last() {
            consumer.consumed = last + 1;
        }
        consumer.returned.extend(fetched);
        let returned = std::mem::take(&mut consumer.returned);
        let mut left = Vec::new();
        for (offset, key) in returned {
            if !left.is_empty() {
                left.push((offset, key));
                continue;
            }
            match task.debezium.get_mut().on_kafka_signal(ctx, offset, key) {
                crate::components::connect::debezium::KafkaSignalOutcome::Read => {}
                crate::components::connect::debezium::KafkaSignalOutcome::Wait => left.push((offset, key)),
            }
        }
        let consumer = task.signals.as_mut().expect("the consumer");
        consumer.returned = left;
        if !consumer.fetching {
            consumer.fetching = true;
            requests.push((
                Pending::SignalFetch,
                KafkaRequest::Fetch {
                    positions: vec![(tp, position)],
                    max_records: 500,
                    isolation: crate::core::protocol::IsolationLevel::ReadUncommitted,
                },
            ));
        }
        for (purpose, request) in requests {
            self.volatile.request(ctx, c, purpose, request);
        }
        ctx.set_timer(Timer::task(c as u8, TaskTimer::SignalPoll), poll_interval_ms);
        self.arm_poll(ctx, c);
    }

    /// `KafkaSignalChannel.close`: `commitSync()` of what `poll()` returned (a graceful stop).
    fn signal_close(&mut self, ctx: &mut Ctx, c: usize) {
        ctx.cancel_timer(Timer::task(c as u8, TaskTimer::SignalPoll));
        let Some((tp, kafka)) = self.signal_partition(c) else { return };
        let group = kafka.group_id.clone();
        let Some(consumer) = self.connectors[c].task.as_mut().and_then(|task| task.signals.take()) else { return };
        if consumer.position.is_some() && consumer.consumed > consumer.committed {
            let request = KafkaRequest::CommitGroup { group, positions: vec![(tp, consumer.consumed)] };
            self.volatile.request(ctx, c, Pending::SignalCommit, request);
        }
    }

    fn graceful_stop(&mut self, ctx: &mut Ctx, c: usize) {
        let Some(task) = self.connectors[c].task.as_mut() else { return };
        match task.state {
            TaskState::Running => {
                task.state = TaskState::Stopping;
                self.signal_close(ctx, c);
                let Some(task) = self.connectors[c].task.as_mut() else { return };
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::PollReturns));
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::OffsetFlush));
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::TaskRestart));
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::SlotInfoRetry));
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::Heartbeat));
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::SignalPoll));
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::StreamIdle));
                task.poll_armed = false;
                task.idle_armed = false;
                // The send loop exits; in-flight records are awaited.
                ctx.set_timer(Timer::task(c as u8, TaskTimer::StopTimeout), self.config.offset_flush_timeout_ms);
                self.continue_stop_if_drained(ctx, c);
            }
            TaskState::Starting | TaskState::Failed => {
                let mut task = self.connectors[c].task.take().expect("task present");
                task.debezium.get_mut().stop(ctx);
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::OffsetFlush));
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::PollReturns));
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::TaskRestart));
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::SlotInfoRetry));
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::Heartbeat));
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::SignalPoll));
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::StreamIdle));
                ctx.observe(Observation::TaskStopped { graceful: true });
            }
            TaskState::Stopping => {}
        }
    }

    fn continue_stop_if_drained(&mut self, ctx: &mut Ctx, c: usize) {
        let Some(task) = self.connectors[c].task.as_ref() else { return };
        if task.state == TaskState::Stopping && !task.produce_in_flight && task.flushing.is_none() {
            let pending_flush = self.volatile.awaits(c, |purpose| {
                matches!(purpose, Pending::Flush { .. } | Pending::TxnOffsets { .. } | Pending::EndTxn { .. })
            });
            if !pending_flush {
                ctx.cancel_timer(Timer::task(c as u8, TaskTimer::StopTimeout));
                self.offset_flush(ctx, c, true);
            }
        }
    }

    /// After the final commit: `SourceTask.stop()` performs one commit from the stored offset
    /// and closes the connections.
    fn finish_stop(&mut self, ctx: &mut Ctx, c: usize) {
        let connector = self.connectors[c].debezium.name.clone();
        self.volatile.request(
            ctx,
            c,
            Pending::CommitOffsets { then_stop: true },
            KafkaRequest::ReadSourceOffset { connector },
        );
    }

    fn on_kafka_reply(&mut self, ctx: &mut Ctx, request_id: u64, reply: KafkaReply) {
        let Some(index) = self.volatile.pending.iter().position(|(id, _, _, _)| *id == request_id) else { return };
        let (_, c, purpose, _) = self.volatile.pending.remove(index);
        let c = usize::from(c);
        match (purpose, reply) {
            (Pending::SignalGroup, KafkaReply::Group { committed, .. }) => self.signal_group_read(ctx, c, &committed),
            (Pending::SignalFetch, KafkaReply::Fetched { records, .. }) => {
                let Some(consumer) = self.connectors[c].task.as_mut().and_then(|task| task.signals.as_mut()) else {
                    return;
                };
                consumer.fetching = false;
                for record in records {
                    if consumer.position.is_some_and(|position| record.offset >= position) {
                        consumer.fetched.push((record.offset, record.key));
                        consumer.position = Some(record.offset + 1);
                    }
                }
            }
            (Pending::SignalCommit, _) => {}
            (Pending::StartOffsets, KafkaReply::SourceOffset(stored)) => {
                let connector = &mut self.connectors[c];
                let Some(task) = connector.task.as_mut() else { return };
                if task.state == TaskState::Starting || task.state == TaskState::Running {
                    task.state = TaskState::Running;
                    task.poll_started_at = ctx.now;
                    let event = task.debezium.get_mut().start(ctx, stored);
                    connector.next_session = task.debezium.next_session();
                    self.handle_task_event(ctx, c, event);
                }
            }
            (Pending::CommitOffsets { then_stop }, KafkaReply::SourceOffset(stored)) => {
                let Some(task) = self.connectors[c].task.as_mut() else { return };
                task.commit_offset(ctx, stored);
                if then_stop {
                    let mut task = self.connectors[c].task.take().expect("task present");
                    task.debezium.get_mut().stop(ctx);
                    ctx.observe(if task.failing && task.restart_requested {
                        Observation::FailedTaskReplaced
                    } else {
                        Observation::TaskStopped { graceful: !task.failing }
                    });
                    // A resume (or, for a failed task, a restart) that came while the task was
                    // stopping: the herder starts the task anew once the old one has stopped.
                    let start_again = if task.failing { task.restart_requested } else { true };
                    self.connectors[c].task_died = task.failing && !task.restart_requested;
                    if self.connectors[c].target_state == TargetState::Running && start_again {
                        self.start_task(ctx, c);
                    }
                } else {
                    self.finish_poll(ctx, c);
                }
            }
            (
                Pending::Produce { first_seq, last_seq, count, changes, completion_marker },
                KafkaReply::Produced { .. },
            ) => {
                self.on_produced(ctx, c, (first_seq, last_seq, count), changes, completion_marker);
            }
            (Pending::Flush { final_commit }, KafkaReply::SourceOffsetWritten) => {
                let offset = self.connectors[c].task.as_ref().and_then(|task| task.flushing);
                self.flush_succeeded(ctx, c, offset, final_commit);
            }
            (Pending::DeleteOffsets { reply_to }, KafkaReply::SourceOffsetWritten) => {
                rest::answer(ctx, reply_to, RestReply::Ok);
            }
            (Pending::ConfigWrite { reply_to: Some(reply_to) }, KafkaReply::ConnectConfigWritten) => {
                rest::answer(ctx, reply_to, RestReply::Ok);
            }
            (Pending::StatusRead { reply_to }, KafkaReply::ConnectStatus { state, config }) => {
                rest::answer(ctx, reply_to, RestReply::Status { state: rest::reported(state, config) });
            }
            (Pending::InitProducer, KafkaReply::ProducerId(producer)) => {
                let connector = self.connectors[c].debezium.name.clone();
                let Some(task) = self.connectors[c].task.as_mut() else { return };
                if let Some(eos) = task.eos.as_mut() {
                    eos.producer = Some(producer);
                }
                // The offsets as a `read_committed` consumer reads them.
                self.volatile.request(ctx, c, Pending::StartOffsets, KafkaRequest::ReadSourceOffset { connector });
            }
            (Pending::TxnOffsets { final_commit }, KafkaReply::SourceOffsetWritten) => {
                let Some(producer) = self.connectors[c].task.as_ref().and_then(|task| task.eos.as_ref()?.producer)
                else {
                    return;
                };
                self.volatile.request(
                    ctx,
                    c,
                    Pending::EndTxn { final_commit },
                    KafkaRequest::EndTxn { producer, commit: true },
                );
            }
            (Pending::EndTxn { final_commit }, KafkaReply::TxnEnded) => {
                self.transaction_committed(ctx, c, final_commit);
            }
            (
                Pending::Produce { .. } | Pending::TxnOffsets { .. } | Pending::EndTxn { .. },
                KafkaReply::Fenced { reason },
            ) => {
                // `ProducerFencedException`: the task fails; nothing it sends becomes visible.
                let Some(task) = self.connectors[c].task.as_mut() else { return };
                task.produce_in_flight = false;
                if let Some(eos) = task.eos.as_mut() {
                    eos.committing = false;
                    eos.open = None;
                }
                self.volatile.forget(c, |purpose| {
                    matches!(purpose, Pending::Produce { .. } | Pending::TxnOffsets { .. } | Pending::EndTxn { .. })
                });
                self.fail_task_for(ctx, c, format!("the task's transactional producer was fenced: {reason}"));
            }
            _ => {}
        }
    }

    /// The task throws an exception (`kill-connector-task`). `AbstractWorkerSourceTask.execute`
    /// catches it and, unless the task was cancelled, runs `finalOffsetCommit(true)`:
    /// `WorkerSourceTask` awaits the in-flight records (up to `offset.flush.timeout.ms`), commits
    /// the offsets of the acknowledged prefix and calls `SourceTask.commit()`; `close()` then calls
    /// `SourceTask.stop()` (Debezium's last commit from the stored offset) and the task is FAILED
    /// until `POST /connectors/<name>/tasks/0/restart`. Only the death of the worker process
    /// ([`Component::crash`]) loses uncommitted offsets. A task still starting has nothing
    /// submitted: it ends at once.
    /// An exception in Connect's own part of the send loop (the transformation chain under
    /// `errors.tolerance = none`): the task fails as [`ConnectWorker::fail_task`] describes, and
    /// its status keeps the reason.
    fn fail_task_for(&mut self, ctx: &mut Ctx, c: usize, reason: String) {
        ctx.observe(Observation::TaskFailed { reason: reason.clone() });
        self.connectors[c].failure = Some(reason);
        self.fail_task(ctx, c);
    }

    fn fail_task(&mut self, ctx: &mut Ctx, c: usize) {
        let Some(task) = self.connectors[c].task.as_mut() else {
            let reason = match self.connectors[c].status() {
                ConnectorState::Stopped => "the connector is STOPPED: no task runs",
                ConnectorState::Failed => "the task has already failed and waits for a restart",
                _ => "no task runs",
            };
            ctx.observe(Observation::FaultRefused {
                action: FaultAction::KillConnectorTask { restart_after_ms: None },
                reason: reason.into(),
            });
            return;
        };
        ctx.observe(Observation::TaskFailing {
            committing: matches!(task.state, TaskState::Running | TaskState::Stopping),
        });
        match task.state {
            TaskState::Running => {
                self.graceful_stop(ctx, c);
                if let Some(task) = self.connectors[c].task.as_mut() {
                    task.failing = true;
                }
            }
            TaskState::Stopping => task.failing = true,
            TaskState::Starting | TaskState::Failed => {
                let mut task = self.connectors[c].task.take().expect("task present");
                task.debezium.get_mut().stop(ctx);
                self.volatile.forget(c, |purpose| matches!(purpose, Pending::StartOffsets));
                for timer in [
                    Timer::task(c as u8, TaskTimer::PollReturns),
                    Timer::task(c as u8, TaskTimer::OffsetFlush),
                    Timer::task(c as u8, TaskTimer::TaskRestart),
                    Timer::task(c as u8, TaskTimer::SlotInfoRetry),
                    Timer::task(c as u8, TaskTimer::Heartbeat),
                    Timer::task(c as u8, TaskTimer::SignalPoll),
                    Timer::task(c as u8, TaskTimer::StreamIdle),
                ] {
                    ctx.cancel_timer(timer);
                }
                self.connectors[c].task_died = true;
                ctx.observe(Observation::TaskStopped { graceful: false });
            }
        }
    }

    fn on_rest(&mut self, ctx: &mut Ctx, c: usize, from: Node, request: RestRequest) {
        let reply = match request {
            RestRequest::Stop => {
                self.connectors[c].target_state = TargetState::Stopped;
                self.graceful_stop(ctx, c);
                RestReply::Ok
            }
            RestRequest::Resume => {
                let was_stopped = self.connectors[c].target_state == TargetState::Stopped;
                self.connectors[c].target_state = TargetState::Running;
                match self.connectors[c].task.as_mut() {
                    None => self.start_task(ctx, c),
                    // `PUT /stop` removed the connector's tasks (it writes an empty task
                    // configuration, `AbstractHerder.stopConnector`): a task still stopping, even
                    // one that failed on its way out, is replaced by a new one once it has
                    // stopped, as a resume generates the task configurations anew.
                    Some(task) if was_stopped => task.restart_requested = true,
                    Some(_) => {}
                }
                RestReply::Ok
            }
            RestRequest::DeleteOffsets => {
                if self.connectors[c].target_state != TargetState::Stopped || self.connectors[c].task.is_some() {
                    RestReply::Error(
                        "Connectors must be in the STOPPED state before their offsets can be modified".into(),
                    )
                } else {
                    let connector = self.connectors[c].debezium.name.clone();
                    self.volatile.request(
                        ctx,
                        c,
                        Pending::DeleteOffsets { reply_to: (from, None) },
                        KafkaRequest::WriteSourceOffset { connector, offset: None },
                    );
                    return;
                }
            }
            RestRequest::Status => RestReply::Status { state: self.connectors[c].status() },
            RestRequest::RestartTask => {
                self.restart_task(ctx, c);
                RestReply::Ok
            }
            RestRequest::PutConfig { version } => {
                self.reconfigure(ctx, c, version);
                RestReply::Ok
            }
        };
        ctx.send(from, Msg::RestReply { reply });
    }

    /// `PUT /connectors/<name>/config` with configuration `version` (one worker: its config is
    /// the config topic's). The herder restarts the connector with it; the connector's new task
    /// configurations differ from the old (`table.include.list` is in them), so the task is
    /// stopped, with its final offset commit, and started again with the new configuration
    /// (`DistributedHerder.processTaskConfigUpdatesWithIncrementalCooperative`: a task whose
    /// configuration changed is stopped and started). A FAILED task is replaced by a new one; a
    /// STOPPED connector keeps the configuration for its resume. Putting the configuration it
    /// already has changes nothing (`ConnectorsResource.putConnectorConfig` answers 200, and
    /// equal task configurations restart nothing).
    fn reconfigure(&mut self, ctx: &mut Ctx, c: usize, version: u8) {
        let connector = &mut self.connectors[c];
        if connector.config_version == version {
            return;
        }
        connector.config_version = version;
        connector.debezium = Fixed::new(connector.first_config.reconfigured(version));
        let tables = connector.debezium.tables.clone();
        ctx.observe(Observation::of_connector(c as u8, Observation::ConnectorReconfigured { version, tables }));
        if connector.target_state != TargetState::Running {
            return;
        }
        match connector.task.as_mut() {
            None if connector.task_died => {
                connector.task_died = false;
                self.start_task(ctx, c);
            }
            None => {}
            Some(task) if task.failing => task.restart_requested = true,
            // A task already stopping starts again when it has stopped (target RUNNING), with
            // the configuration as it is then.
            Some(task) if task.state == TaskState::Stopping => {}
            Some(_) => {
                self.graceful_stop(ctx, c);
                // A task still starting (or failed) is gone at once: its successor starts now.
                if self.connectors[c].task.is_none() {
                    self.start_task(ctx, c);
                }
            }
        }
    }

    /// `POST /connectors/<name>/tasks/0/restart` on the worker running the task: a stop and a
    /// start on this worker (a task failing now starts again once it has stopped).
    fn restart_task(&mut self, ctx: &mut Ctx, c: usize) {
        if self.connectors[c].target_state == TargetState::Running {
            match self.connectors[c].task.as_mut() {
                None => {
                    self.connectors[c].task_died = false;
                    self.start_task(ctx, c);
                }
                Some(task) if task.failing => task.restart_requested = true,
                Some(_) => {}
            }
        }
    }
}

/// When the send loop last started a `poll()`: polls return on a grid of `poll.interval.ms`
/// from the last one that returned early or with records.
fn last_poll_start(task: &TaskRuntime, now: SimTime, poll_interval_ms: u64) -> SimTime {
    let interval = poll_interval_ms.max(1);
    let elapsed = now.since(task.poll_started_at);
    task.poll_started_at.plus_ms(elapsed / interval * interval)
}

impl TaskRuntime {
    /// Debezium's `performCommit()` with `stored`; the task is copied only when it confirms.
    fn commit_offset(&mut self, ctx: &mut Ctx, stored: Option<SourceOffset>) {
        if self.debezium.commit_moves(stored).is_some() {
            self.debezium.get_mut().commit_offset(ctx, stored);
        }
    }
}

/// `SubmittedRecords.committableOffsets` as of a send-loop iteration at `upto`: pop the prefix
/// acknowledged by then, keep its last offset.
fn refresh_committable(task: &mut TaskRuntime, upto: SimTime) {
    while task.submitted.front().is_some_and(|record| record.acked_at.is_some_and(|at| at <= upto)) {
        let record = task.submitted.get_mut().pop_front().expect("front exists");
        task.committable = Some(record.offset);
    }
}

impl ConnectWorker {
    /// Runs `f` for connector `c`: what it observes is tagged as that connector's
    /// ([`Observation::of_connector`]; the first connector's stands as it is).
    fn for_connector(&mut self, ctx: &mut Ctx, c: usize, f: impl FnOnce(&mut ConnectWorker, &mut Ctx)) {
        let mark = ctx.observation_mark();
        f(self, ctx);
        if c > 0 {
            ctx.tag_observations_since(mark, |observation| Observation::of_connector(c as u8, observation));
        }
    }

    /// The connector whose task a PostgreSQL session belongs to.
    fn connector_of_session(&self, session: u64) -> Option<usize> {
        let c = (session >> SESSION_BITS) as usize;
        (c < self.connectors.len()).then_some(c)
    }

    fn on_task_timer(&mut self, ctx: &mut Ctx, c: usize, timer: TaskTimer) {
        match timer {
            TaskTimer::PollReturns => self.poll_returns(ctx, c),
            TaskTimer::OffsetFlush => self.offset_flush(ctx, c, false),
            TaskTimer::OffsetFlushTimeout => self.flush_timed_out(ctx, c),
            TaskTimer::StopTimeout => {
                // Give up waiting for in-flight records and commit what is acknowledged.
                if let Some(task) = self.connectors[c].task.as_mut() {
                    task.produce_in_flight = false;
                    self.volatile.forget(c, |purpose| matches!(purpose, Pending::Produce { .. }));
                }
                self.continue_stop_if_drained(ctx, c);
            }
            TaskTimer::SignalPoll => self.signal_poll(ctx, c),
            TaskTimer::StreamIdle => {
                if let Some(task) = self.connectors[c].task.as_mut() {
                    task.idle_armed = false;
                    if task.state == TaskState::Running {
                        task.debezium.get_mut().on_stream_idle(ctx);
                    }
                }
                self.arm_poll(ctx, c);
            }
            TaskTimer::Heartbeat => {
                let connector = &mut self.connectors[c];
                if let Some(task) = connector.task.as_mut()
                    && task.state == TaskState::Running
                    && task.debezium.get_mut().on_heartbeat(ctx)
                {
                    ctx.set_timer(
                        Timer::task(c as u8, TaskTimer::Heartbeat),
                        connector.debezium.effective_heartbeat_interval_ms(),
                    );
                    self.arm_poll(ctx, c);
                }
            }
            TaskTimer::SlotInfoRetry => {
                if let Some(task) = self.connectors[c].task.as_mut()
                    && task.state == TaskState::Running
                {
                    let event = task.debezium.get_mut().on_slot_info_retry(ctx);
                    self.handle_task_event(ctx, c, event);
                }
            }
            TaskTimer::TaskRestart => self.restart_in_process(ctx, c),
        }
    }

    /// Debezium's restart after a retriable error (`retriable.restart.connector.wait.ms`): in
    /// `poll()`, so not while an exactly-once task's `commitTransaction()` runs in the same
    /// thread; then it waits for it.
    fn restart_in_process(&mut self, ctx: &mut Ctx, c: usize) {
        let connector = &mut self.connectors[c];
        let Some(task) = connector.task.as_mut() else { return };
        if let Some(eos) = task.eos.as_mut()
            && eos.committing
        {
            eos.restart_after_commit = true;
            return;
        }
        if task.state == TaskState::Running {
            // Debezium restarts in-process and re-reads the stored offset.
            task.state = TaskState::Starting;
            let name = connector.debezium.name.clone();
            self.volatile.request(ctx, c, Pending::StartOffsets, KafkaRequest::ReadSourceOffset { connector: name });
        }
    }
}

/// The worker as a member of the group ([`group`]).
impl ConnectWorker {
    fn member(&mut self) -> &mut GroupMember {
        self.membership.0.as_mut().expect("a member of a group")
    }

    /// The connectors assigned to it: its metadata when it joins.
    fn owned(&self) -> Vec<u8> {
        (0..self.connectors.len()).filter(|c| self.connectors[*c].assigned).map(|c| c as u8).collect()
    }

    fn join(&mut self, ctx: &mut Ctx) {
        let owned = self.owned();
        let config = self.config.group;
        let member = self.member();
        member.state = MemberState::Joining;
        member.request_lost = false;
        let request = GroupRequest::Join {
            member: member.id,
            owned,
            session_timeout_ms: config.session_timeout_ms,
            rebalance_timeout_ms: config.rebalance_timeout_ms,
        };
        ctx.send(Node::Kafka, Msg::Group(request));
    }

    /// Connector `c`'s task is no longer this worker's: it stops gracefully (§1.5).
    fn revoke(&mut self, ctx: &mut Ctx, c: usize) {
        self.connectors[c].assigned = false;
        self.connectors[c].task_died = false;
        self.for_connector(ctx, c, |worker, ctx| worker.graceful_stop(ctx, c));
    }

    fn on_group_reply(&mut self, ctx: &mut Ctx, reply: GroupReply) {
        let member = self.member();
        member.last_heard = ctx.now;
        member.coordinator_unknown_since = None;
        if matches!(member.state, MemberState::ShuttingDown | MemberState::Left) {
            return;
        }
        match reply {
            GroupReply::Joined { member: id, generation, leader, members } => {
                let member = self.member();
                member.id = Some(id);
                member.generation = generation;
                member.state = MemberState::Syncing;
                let assignments = if id == leader {
                    // The leader has read the config topic to its end: every connector is
                    // configured (a STOPPED one too: its instance is assigned, and the worker
                    // holding it reports it STOPPED and runs no task).
                    let configured = (0..self.connectors.len()).map(|c| c as u8).collect();
                    let owned: Vec<(u32, Vec<u8>)> =
                        members.iter().map(|(id, _, owned)| (*id, owned.clone())).collect();
                    let max_delay_ms = self.config.group.scheduled_rebalance_max_delay_ms;
                    let member = self.member();
                    let round = member.assignor.assign(
                        ctx.now,
                        (generation, member.completed_generation),
                        &configured,
                        &owned,
                        max_delay_ms,
                    );
                    let nodes: std::collections::BTreeMap<u32, Node> =
                        members.iter().map(|(id, node, _)| (*id, *node)).collect();
                    member.owners =
                        round.holdings.iter().flat_map(|(id, tasks)| tasks.iter().map(|c| (*c, nodes[id]))).collect();
                    ctx.observe(Observation::GroupAssignmentsComputed {
                        generation,
                        assignments: round
                            .assignments
                            .iter()
                            .map(|(id, assignment)| {
                                (nodes[id], assignment.assigned.clone(), assignment.revoked.clone())
                            })
                            .collect(),
                        delayed: round.delayed,
                        duplicated: round.duplicated,
                        delay_ms: self.member().assignor.delay_ms,
                    });
                    Some(round.assignments)
                } else {
                    None
                };
                ctx.send(Node::Kafka, Msg::Group(GroupRequest::Sync { member: id, generation, assignments }));
            }
            GroupReply::Synced { generation, assignment, leader, config } => {
                let graceful_ms = self.config.group.task_shutdown_graceful_timeout_ms;
                let member = self.member();
                if generation != member.generation || member.state != MemberState::Syncing {
                    return;
                }
                member.state = MemberState::Stable;
                member.completed_generation = generation;
                member.leader = Some(leader);
                // Read the config topic as far as the leader had (`handleRebalanceCompleted`).
                self.read_config(&config);
                ctx.observe(Observation::GroupAssigned {
                    generation,
                    assigned: assignment.assigned.clone(),
                    revoked: assignment.revoked.clone(),
                    delay_ms: assignment.delay_ms,
                });
                let count = self.connectors.len();
                for c in assignment.revoked.iter().map(|c| usize::from(*c)).filter(|c| *c < count) {
                    self.revoke(ctx, c);
                }
                for c in assignment.assigned.iter().map(|c| usize::from(*c)).filter(|c| *c < count) {
                    self.connectors[c].assigned = true;
                    self.connectors[c].task_died = false;
                    if self.connectors[c].target_state == TargetState::Running && self.connectors[c].task.is_none() {
                        self.for_connector(ctx, c, |worker, ctx| worker.start_task(ctx, c));
                    }
                }
                if assignment.delay_ms > 0 {
                    self.member().rejoin_for_delay = true;
                    ctx.set_timer(Timer::GroupRejoin, assignment.delay_ms);
                }
                if !assignment.revoked.is_empty() {
                    // `onRevoked` awaits the stops (up to task.shutdown.graceful.timeout.ms),
                    // then the member joins again.
                    let member = self.member();
                    member.rejoin_after_revocation = true;
                    member.rejoin_for_delay = false;
                    ctx.set_timer(Timer::GroupRejoin, graceful_ms);
                }
                self.after_rebalance(ctx);
            }
            GroupReply::Heartbeat => {}
            GroupReply::Rejoin => {
                if matches!(self.member().state, MemberState::Stable | MemberState::Syncing) {
                    self.join(ctx);
                }
            }
            GroupReply::UnknownMember => {
                // Removed from the group: join as a new member, still running its tasks. Replies
                // to requests sent under the old id before that join come first and change
                // nothing more.
                let member = self.member();
                if member.id.is_some() {
                    member.id = None;
                    member.generation = 0;
                    self.join(ctx);
                }
            }
        }
    }

    /// What waits on tasks stopping: a join after a revocation, the leave of a clean shutdown.
    fn group_progress(&mut self, ctx: &mut Ctx) {
        let stopping = self.connectors.iter().any(|connector| !connector.assigned && connector.task.is_some());
        let member = self.member();
        if member.rejoin_after_revocation && !stopping && member.state == MemberState::Stable {
            member.rejoin_after_revocation = false;
            ctx.cancel_timer(Timer::GroupRejoin);
            self.join(ctx);
        } else if member.state == MemberState::ShuttingDown && !stopping {
            self.leave(ctx);
        }
    }

    fn leave(&mut self, ctx: &mut Ctx) {
        let member = self.member();
        member.state = MemberState::Left;
        if let Some(id) = member.id {
            ctx.send(Node::Kafka, Msg::Group(GroupRequest::Leave { member: id }));
        }
        ctx.cancel_timer(Timer::GroupRejoin);
        ctx.cancel_timer(Timer::GroupHeartbeat);
        ctx.observe(Observation::WorkerLeft);
    }

    /// A clean shutdown (`DistributedHerder.halt`): every task stops gracefully, then the
    /// member leaves the group (at once when they have stopped, or when
    /// `task.shutdown.graceful.timeout.ms` has passed).
    fn shut_down(&mut self, ctx: &mut Ctx) {
        if matches!(self.member().state, MemberState::ShuttingDown | MemberState::Left) {
            return;
        }
        for c in 0..self.connectors.len() {
            if self.connectors[c].assigned {
                self.revoke(ctx, c);
            }
        }
        let graceful_ms = self.config.group.task_shutdown_graceful_timeout_ms;
        let member = self.member();
        member.state = MemberState::ShuttingDown;
        member.rejoin_after_revocation = false;
        member.rejoin_for_delay = false;
        ctx.set_timer(Timer::GroupRejoin, graceful_ms);
        self.group_progress(ctx);
    }

    fn on_group_timer(&mut self, ctx: &mut Ctx, timer: Timer) {
        let config = self.config.group;
        let member = self.member();
        match (timer, member.state) {
            (_, MemberState::Left) => {}
            (Timer::GroupRejoin, MemberState::ShuttingDown) => self.leave(ctx),
            (Timer::GroupRejoin, MemberState::Stable) => {
                member.rejoin_after_revocation = false;
                if std::mem::take(&mut member.rejoin_for_delay) && member.assignor.scheduled_rebalance.is_some() {
                    member.assignor.delay_over = true;
                }
                self.join(ctx);
            }
            // A join or sync lost with its connection, after the client's reconnect backoff.
            (Timer::GroupRejoin, MemberState::Joining | MemberState::Syncing) if member.request_lost => self.join(ctx),
            (Timer::GroupHeartbeat, state) => {
                ctx.set_timer(Timer::GroupHeartbeat, config.heartbeat_interval_ms);
                // Heartbeats go from the join's answer on (`HeartbeatThread` is enabled in
                // COMPLETING_REBALANCE: a member waiting for the leader's assignment stays alive).
                if matches!(state, MemberState::Stable | MemberState::Syncing)
                    && let (Some(id), generation) = (member.id, member.generation)
                {
                    ctx.send(Node::Kafka, Msg::Group(GroupRequest::Heartbeat { member: id, generation }));
                }
                // `HeartbeatThread`: no answer for a session marks the coordinator unknown; still
                // unknown a heartbeat interval later, the worker stops its own tasks (KAFKA-9184).
                if state == MemberState::Stable && ctx.now.since(member.last_heard) >= config.session_timeout_ms {
                    let since = *member
                        .coordinator_unknown_since
                        .get_or_insert(member.last_heard.plus_ms(config.session_timeout_ms));
                    let owned = self.owned();
                    if ctx.now.since(since) >= config.heartbeat_interval_ms && !owned.is_empty() {
                        ctx.observe(Observation::GroupSelfRevoked { connectors: owned.clone() });
                        for c in owned {
                            self.revoke(ctx, usize::from(c));
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

impl Component for ConnectWorker {
    fn start(&mut self, ctx: &mut Ctx) {
        self.volatile = Volatile::new();
        let in_group = self.in_group();
        for c in 0..self.connectors.len() {
            self.for_connector(ctx, c, |worker, ctx| {
                let connector = &mut worker.connectors[c];
                connector.task_died = false;
                connector.task = None;
                // In a group, a task runs where the leader assigns it.
                connector.assigned = !in_group;
                connector.next_session = first_session(c);
                ctx.observe(Observation::WorkerStarted {
                    target_state: match connector.target_state {
                        TargetState::Running => ConnectorState::Running,
                        TargetState::Stopped => ConnectorState::Stopped,
                    },
                });
                if connector.target_state == TargetState::Running {
                    worker.start_task(ctx, c);
                }
            });
        }
        if in_group {
            let member = self.member();
            *member = GroupMember::default();
            member.last_heard = ctx.now;
            self.join(ctx);
            ctx.set_timer(Timer::GroupHeartbeat, self.config.group.heartbeat_interval_ms);
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx, from: Node, msg: Msg) {
        if !self.in_group() {
            return self.take_message(ctx, from, msg);
        }
        if self.has_left() {
            return; // the process has ended
        }
        match msg {
            Msg::GroupReply(reply) => self.on_group_reply(ctx, reply),
            Msg::Control(Control::ShutdownWorker) => self.shut_down(ctx),
            Msg::Rest { connector, request } => self.group_rest(ctx, (from, None), connector, request, 0),
            Msg::RestForward { id, connector, request, hops } => {
                self.group_rest(ctx, (from, Some(id)), connector, request, hops)
            }
            Msg::RestForwardReply { id, reply } => self.forwarded_answer(ctx, id, reply),
            Msg::ConnectConfig { connector, record } => self.on_config_record(ctx, connector, record),
            msg => self.take_message(ctx, from, msg),
        }
        self.group_progress(ctx);
        self.write_statuses(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx, timer: Timer) {
        if !self.in_group() {
            return self.take_timer(ctx, timer);
        }
        if self.has_left() {
            return;
        }
        match timer {
            Timer::GroupHeartbeat | Timer::GroupRejoin => self.on_group_timer(ctx, timer),
            timer => self.take_timer(ctx, timer),
        }
        self.group_progress(ctx);
        self.write_statuses(ctx);
    }

    fn on_connection_lost(&mut self, ctx: &mut Ctx, peer: Node) {
        if self.has_left() {
            return;
        }
        if peer == Node::Kafka
            && let Some(member) = self.membership.0.as_mut()
            && matches!(member.state, MemberState::Joining | MemberState::Syncing)
        {
            // A join or sync lost with the connection is sent again once the client has
            // reconnected (`reconnect.backoff.max.ms`).
            member.request_lost = true;
            member.rejoin_for_delay = false;
            ctx.set_timer(Timer::GroupRejoin, KAFKA_RECONNECT_BACKOFF_MS);
        }
        self.take_connection_lost(ctx, peer);
        if self.in_group() {
            self.forwards_lost(ctx, peer);
            self.group_progress(ctx);
            self.write_statuses(ctx);
        }
    }

    fn crash(&mut self) {
        self.volatile = Volatile::new();
        for (c, connector) in self.connectors.iter_mut().enumerate() {
            connector.task = None;
            connector.next_session = first_session(c);
        }
        if let Some(member) = self.membership.0.as_mut() {
            **member = GroupMember::default();
        }
    }
}

impl ConnectWorker {
    fn take_message(&mut self, ctx: &mut Ctx, from: Node, msg: Msg) {
        match msg {
            Msg::KafkaReply { request_id, reply } => {
                let Some(c) = self.volatile.pending.iter().find(|(id, ..)| *id == request_id).map(|(_, c, ..)| *c)
                else {
                    return;
                };
                self.for_connector(ctx, usize::from(c), |worker, ctx| worker.on_kafka_reply(ctx, request_id, reply));
            }
            Msg::Rest { connector, request } => {
                let c = usize::from(connector);
                if c < self.connectors.len() {
                    self.for_connector(ctx, c, |worker, ctx| worker.on_rest(ctx, c, from, request));
                } else {
                    ctx.send(from, Msg::RestReply { reply: RestReply::Error("Connector not found".into()) });
                }
            }
            Msg::Control(Control::KillTask { connector }) => {
                let c = usize::from(connector);
                if c < self.connectors.len() {
                    self.for_connector(ctx, c, |worker, ctx| {
                        if worker.connectors[c].task.is_some() {
                            // What the task's status says once it has failed.
                            worker.connectors[c].failure =
                                Some("the task threw an exception (kill-connector-task)".into());
                        }
                        worker.fail_task(ctx, c)
                    });
                }
            }
            Msg::SqlReply { session, .. } | Msg::ReplReply { session, .. } => {
                let Some(c) = self.connector_of_session(session) else { return };
                self.for_connector(ctx, c, |worker, ctx| {
                    let Some(task) = worker.connectors[c].task.as_mut() else { return };
                    if task.state == TaskState::Running {
                        let event = task.debezium.get_mut().on_message(ctx, msg);
                        worker.handle_task_event(ctx, c, event);
                    }
                });
            }
            _ => {}
        }
    }

    fn take_timer(&mut self, ctx: &mut Ctx, timer: Timer) {
        match timer {
            Timer::KafkaRetry => {
                for (request_id, _, _, request) in &self.volatile.pending {
                    ctx.send(Node::Kafka, Msg::Kafka { request_id: *request_id, request: (**request).clone() });
                }
            }
            Timer::Task { connector, timer } if usize::from(connector) < self.connectors.len() => {
                let c = usize::from(connector);
                self.for_connector(ctx, c, |worker, ctx| worker.on_task_timer(ctx, c, timer));
            }
            _ => {}
        }
    }

    fn take_connection_lost(&mut self, ctx: &mut Ctx, peer: Node) {
        if peer == Node::Kafka && !self.volatile.pending.is_empty() {
            // The Kafka clients reconnect (`reconnect.backoff.max.ms`) and send again what was not
            // answered; a produce request sent again may be appended twice.
            ctx.set_timer(Timer::KafkaRetry, KAFKA_RECONNECT_BACKOFF_MS);
            return;
        }
        if peer == Node::Postgres {
            // Every connector's task loses its connections to the database.
            for c in 0..self.connectors.len() {
                self.for_connector(ctx, c, |worker, ctx| {
                    if let Some(task) = worker.connectors[c].task.as_mut()
                        && task.state == TaskState::Running
                    {
                        let event = task.debezium.get_mut().on_database_connection_lost(ctx);
                        worker.handle_task_event(ctx, c, event);
                    }
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::sink::ApplyRule;
    use crate::core::component::{Outbox, TimerRequest};
    use crate::core::protocol::{ConfigWrite, ConnectorConfigRecord, GroupAssignment};
    use crate::scenario::spec::claims_minimal;

    /// A worker running the claims connector and an outbox connector.
    fn two_connectors() -> ConnectWorker {
        let spec = claims_minimal(2, ApplyRule::VersionGuard);
        let first = spec.debezium.clone();
        let second = DebeziumConfig {
            name: "outbox-connector".into(),
            connector_index: 1,
            slot_name: "outbox_slot".into(),
            topic_prefix: "outbox".into(),
            ..first.clone()
        };
        let none = || Fixed::new(TransformChain::none(Default::default()));
        ConnectWorker::new(
            Fixed::new(spec.connect.clone()),
            vec![
                Connector::new(Fixed::new(first), none(), TargetState::Running),
                Connector::new(Fixed::new(second), none(), TargetState::Running),
            ],
        )
    }

    fn step(worker: &mut ConnectWorker, f: impl FnOnce(&mut ConnectWorker, &mut Ctx)) -> Outbox {
        let mut out = Outbox::default();
        f(worker, &mut Ctx::new(SimTime(1), Node::Connect, &mut out));
        out
    }

    /// The offsets-topic read a connector's task start sent, by connector name.
    fn start_read(out: &Outbox, name: &str) -> u64 {
        out.sends
            .iter()
            .find_map(|(_, msg)| match msg {
                Msg::Kafka { request_id, request: KafkaRequest::ReadSourceOffset { connector } }
                    if connector == name =>
                {
                    Some(*request_id)
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("no offsets read for {name}: {:?}", out.sends))
    }

    #[test]
    fn each_connector_has_its_task_timers_sessions_and_tagged_observations() {
        let mut worker = two_connectors();
        let out = step(&mut worker, |w, ctx| w.start(ctx));
        // Each task reads its own offsets and arms its own offset flush.
        let (first, second) = (start_read(&out, "claims-connector"), start_read(&out, "outbox-connector"));
        for connector in [0, 1] {
            assert!(out.timers.contains(&TimerRequest::Set {
                timer: Timer::task(connector, TaskTimer::OffsetFlush),
                after_ms: worker.config.offset_flush_interval_ms
            }));
        }
        // The first connector's observations stand as they are; the second's are tagged.
        assert!(matches!(out.observations[0], Observation::WorkerStarted { .. }));
        assert!(out.observations.iter().any(|o| matches!(
            o,
            Observation::OfConnector { connector: 1, observation } if matches!(**observation, Observation::WorkerStarted { .. })
        )));
        // The second task starts with no stored offset: its sessions with PostgreSQL are its own.
        let reply = Msg::KafkaReply { request_id: second, reply: KafkaReply::SourceOffset(None) };
        let out = step(&mut worker, |w, ctx| w.on_message(ctx, Node::Kafka, reply));
        let sessions: Vec<u64> = out
            .sends
            .iter()
            .filter_map(|(to, msg)| match (to, msg) {
                (Node::Postgres, Msg::Sql { session, .. } | Msg::Repl { session, .. }) => Some(*session),
                _ => None,
            })
            .collect();
        assert!(!sessions.is_empty());
        assert!(sessions.iter().all(|session| worker.connector_of_session(*session) == Some(1)), "{sessions:?}");
        assert!(out.observations.iter().all(|o| matches!(o, Observation::OfConnector { connector: 1, .. })));
        assert_eq!(worker.connectors[1].status(), ConnectorState::Running);
        // The first task's offsets read is still pending: its reply reaches it, not the second.
        let reply = Msg::KafkaReply { request_id: first, reply: KafkaReply::SourceOffset(None) };
        let out = step(&mut worker, |w, ctx| w.on_message(ctx, Node::Kafka, reply));
        assert!(
            out.sends.iter().any(|(_, msg)| matches!(msg, Msg::Sql { session, .. } if *session < first_session(1)))
        );
        assert!(!out.observations.iter().any(|o| matches!(o, Observation::OfConnector { .. })));
    }

    /// `PUT /stop`, then the task throws while it stops (a kill), then `PUT /resume` before its
    /// final commit is done: the stop removed the connector's tasks, so the resume starts a new
    /// task once the old one has stopped, failed or not; a kill alone leaves the task FAILED with
    /// a reason its status gives.
    #[test]
    fn a_resume_after_a_stop_replaces_a_task_that_failed_on_its_way_out() {
        /// Answers every offsets request the worker sent (a read finds nothing stored).
        fn answer_offsets(worker: &mut ConnectWorker, out: Outbox) -> Outbox {
            let mut all = Outbox::default();
            let mut pending = out;
            loop {
                let replies: Vec<Msg> = pending
                    .sends
                    .iter()
                    .filter_map(|(_, msg)| match msg {
                        Msg::Kafka { request_id, request: KafkaRequest::ReadSourceOffset { .. } } => {
                            Some(Msg::KafkaReply { request_id: *request_id, reply: KafkaReply::SourceOffset(None) })
                        }
                        Msg::Kafka { request_id, request: KafkaRequest::WriteSourceOffset { .. } } => {
                            Some(Msg::KafkaReply { request_id: *request_id, reply: KafkaReply::SourceOffsetWritten })
                        }
                        _ => None,
                    })
                    .collect();
                all.observations.append(&mut pending.observations);
                if replies.is_empty() {
                    return all;
                }
                let mut next = Outbox::default();
                for reply in replies {
                    let mut out = step(worker, |w, ctx| w.on_message(ctx, Node::Kafka, reply));
                    next.sends.append(&mut out.sends);
                    next.observations.append(&mut out.observations);
                }
                pending = next;
            }
        }
        let mut worker = two_connectors();
        let out = step(&mut worker, |w, ctx| w.start(ctx));
        answer_offsets(&mut worker, out);
        assert_eq!(worker.connectors[0].status(), ConnectorState::Running);
        let rest = |request| Msg::Rest { connector: 0, request };
        let stop = step(&mut worker, |w, ctx| w.on_message(ctx, Node::Operator, rest(RestRequest::Stop)));
        let kill = step(&mut worker, |w, ctx| {
            w.on_message(ctx, Node::Operator, Msg::Control(Control::KillTask { connector: 0 }))
        });
        assert!(kill.observations.iter().any(|o| matches!(o, Observation::TaskFailing { committing: true })));
        let resume = step(&mut worker, |w, ctx| w.on_message(ctx, Node::Operator, rest(RestRequest::Resume)));
        let mut out = stop;
        out.sends.extend(kill.sends);
        out.sends.extend(resume.sends);
        let done = answer_offsets(&mut worker, out);
        // Not "FAILED, waiting for a restart": the resume's new task starts at once.
        assert!(done.observations.iter().any(|o| matches!(o, Observation::FailedTaskReplaced)));
        assert!(!done.observations.iter().any(|o| matches!(o, Observation::TaskStopped { .. })));
        assert!(
            done.observations.iter().any(|o| matches!(o, Observation::TaskStarted { .. })),
            "{:?}",
            done.observations
        );
        assert_eq!(worker.connectors[0].status(), ConnectorState::Running);
        assert_eq!(worker.connectors[0].failure(), None);
        // A kill alone: FAILED, and why.
        let kill = step(&mut worker, |w, ctx| {
            w.on_message(ctx, Node::Operator, Msg::Control(Control::KillTask { connector: 0 }))
        });
        answer_offsets(&mut worker, kill);
        assert_eq!(worker.connectors[0].status(), ConnectorState::Failed);
        assert_eq!(
            worker.connectors[0].failure().as_deref(),
            Some("the task threw an exception (kill-connector-task)")
        );
    }

    #[test]
    fn rest_calls_and_task_kills_act_on_their_connector_only() {
        let mut worker = two_connectors();
        step(&mut worker, |w, ctx| w.start(ctx));
        let out = step(&mut worker, |w, ctx| {
            w.on_message(ctx, Node::Operator, Msg::Rest { connector: 1, request: RestRequest::Stop })
        });
        assert!(out.sends.contains(&(Node::Operator, Msg::RestReply { reply: RestReply::Ok })));
        assert_eq!(worker.connectors[1].target_state, TargetState::Stopped);
        assert_eq!(worker.connectors[0].target_state, TargetState::Running);
        assert_eq!(worker.connectors[1].status(), ConnectorState::Stopped, "a task still starting ends at once");
        let out = step(&mut worker, |w, ctx| {
            w.on_message(ctx, Node::Operator, Msg::Control(Control::KillTask { connector: 0 }))
        });
        assert!(out.observations.iter().any(|o| matches!(o, Observation::TaskStopped { graceful: false })));
        assert_eq!(worker.connectors[0].status(), ConnectorState::Failed);
        assert_eq!(worker.connectors[1].status(), ConnectorState::Stopped);
        // A connector the worker does not run is not found.
        let out = step(&mut worker, |w, ctx| {
            w.on_message(ctx, Node::Operator, Msg::Rest { connector: 3, request: RestRequest::Status })
        });
        assert!(matches!(&out.sends[0].1, Msg::RestReply { reply: RestReply::Error(_) }));
        // A crash keeps each connector's target state, drops its task.
        worker.crash();
        assert_eq!(worker.connectors[1].target_state, TargetState::Stopped);
        assert!(worker.connectors.iter().all(|connector| connector.task.is_none()));
    }

    /// The assignment of `generation` from a leader, `connect`, that read every connector as
    /// RUNNING with its task.
    fn synced(generation: u32, assignment: GroupAssignment) -> GroupReply {
        let config = vec![ConnectorConfigRecord { running: true, tasks: 1 }; 2];
        GroupReply::Synced { generation, assignment, leader: Node::Connect, config }
    }

    /// The two connectors' worker as one member of a group of two.
    fn group_member() -> ConnectWorker {
        let worker = two_connectors();
        let config = ConnectConfig { workers: 2, ..(*worker.config).clone() };
        ConnectWorker::new(Fixed::new(config), worker.connectors)
    }

    fn at(worker: &mut ConnectWorker, ms: u64, f: impl FnOnce(&mut ConnectWorker, &mut Ctx)) -> Outbox {
        let mut out = Outbox::default();
        f(worker, &mut Ctx::new(SimTime(ms), Node::Connect, &mut out));
        out
    }

    fn group_requests(out: &Outbox) -> Vec<GroupRequest> {
        out.sends
            .iter()
            .filter_map(|(to, msg)| match (to, msg) {
                (Node::Kafka, Msg::Group(request)) => Some(request.clone()),
                _ => None,
            })
            .collect()
    }

    fn reply(worker: &mut ConnectWorker, ms: u64, reply: GroupReply) -> Outbox {
        at(worker, ms, |w, ctx| w.on_message(ctx, Node::Kafka, Msg::GroupReply(reply)))
    }

    #[test]
    fn a_group_member_runs_what_its_leader_assigns_and_joins_again_after_a_revocation() {
        let mut worker = group_member();
        let out = at(&mut worker, 0, |w, ctx| w.start(ctx));
        // No task before an assignment: a join with nothing owned, and the heartbeat timer.
        assert!(!out.sends.iter().any(|(_, msg)| matches!(msg, Msg::Kafka { .. })), "{:?}", out.sends);
        assert!(
            matches!(&group_requests(&out)[..], [GroupRequest::Join { member: None, owned, .. }] if owned.is_empty())
        );
        assert!(
            out.timers.iter().any(|t| matches!(t, TimerRequest::Set { timer: Timer::GroupHeartbeat, after_ms: 3_000 }))
        );
        // It leads: its assignor spreads the two new tasks over the two members.
        let members = vec![(1, Node::Connect, vec![]), (2, Node::Connect2, vec![])];
        let out = reply(&mut worker, 3_000, GroupReply::Joined { member: 1, generation: 1, leader: 1, members });
        let [GroupRequest::Sync { member: 1, generation: 1, assignments: Some(assignments) }] =
            &group_requests(&out)[..]
        else {
            panic!("{:?}", out.sends)
        };
        assert_eq!(assignments[0], (1, GroupAssignment { assigned: vec![0], revoked: vec![], delay_ms: 0 }));
        assert_eq!(assignments[1], (2, GroupAssignment { assigned: vec![1], revoked: vec![], delay_ms: 0 }));
        // Its part: the claims connector's task starts; the outbox connector's is not its own.
        let mine = GroupAssignment { assigned: vec![0], ..Default::default() };
        let out = reply(&mut worker, 3_010, synced(1, mine));
        assert_eq!(
            start_read(&out, "claims-connector"),
            out.sends
                .iter()
                .find_map(|(_, m)| match m {
                    Msg::Kafka { request_id, .. } => Some(*request_id),
                    _ => None,
                })
                .expect("a read")
        );
        assert!(worker.runs_task(0) && !worker.runs_task(1));
        // A rebalance revokes it: the task stops (still starting: at once) and the member joins
        // again, owning nothing.
        let out = reply(&mut worker, 20_000, GroupReply::Rejoin);
        assert!(
            matches!(&group_requests(&out)[..], [GroupRequest::Join { member: Some(1), owned, .. }] if owned == &vec![0])
        );
        reply(&mut worker, 20_010, GroupReply::Joined { member: 1, generation: 2, leader: 2, members: vec![] });
        let revoked = GroupAssignment { revoked: vec![0], ..Default::default() };
        let out = reply(&mut worker, 20_020, synced(2, revoked));
        assert!(!worker.runs_task(0));
        assert!(out.observations.iter().any(|o| matches!(o, Observation::TaskStopped { graceful: true })));
        assert!(
            matches!(&group_requests(&out)[..], [GroupRequest::Join { member: Some(1), owned, .. }] if owned.is_empty())
        );
    }

    #[test]
    fn a_worker_that_loses_its_coordinator_stops_its_own_tasks_and_a_clean_shutdown_leaves() {
        let mut worker = group_member();
        at(&mut worker, 0, |w, ctx| w.start(ctx));
        reply(&mut worker, 3_000, GroupReply::Joined { member: 1, generation: 1, leader: 2, members: vec![] });
        let both = GroupAssignment { assigned: vec![0, 1], ..Default::default() };
        reply(&mut worker, 3_010, synced(1, both));
        assert!(worker.runs_task(0) && worker.runs_task(1));
        // Heartbeats every 3 s, unanswered from t=3.010s: the coordinator is unknown from
        // t=13.010s, and a heartbeat interval later the worker stops its tasks (KAFKA-9184).
        let tick = |worker: &mut ConnectWorker, ms| at(worker, ms, |w, ctx| w.on_timer(ctx, Timer::GroupHeartbeat));
        for ms in [6_000, 9_000, 12_000, 15_000] {
            let out = tick(&mut worker, ms);
            assert!(matches!(&group_requests(&out)[..], [GroupRequest::Heartbeat { member: 1, generation: 1 }]));
            assert!(!out.observations.iter().any(|o| matches!(o, Observation::GroupSelfRevoked { .. })), "{ms}");
        }
        let out = tick(&mut worker, 18_000);
        assert!(
            out.observations
                .iter()
                .any(|o| matches!(o, Observation::GroupSelfRevoked { connectors } if connectors == &vec![0, 1]))
        );
        assert!(!worker.runs_task(0) && !worker.runs_task(1));
        // Told it was removed, it joins as a new member, once for every late answer.
        let out = reply(&mut worker, 25_000, GroupReply::UnknownMember);
        assert!(matches!(&group_requests(&out)[..], [GroupRequest::Join { member: None, .. }]));
        assert!(group_requests(&reply(&mut worker, 25_001, GroupReply::UnknownMember)).is_empty());
        // A clean shutdown with nothing running: LeaveGroup at once; then the process is over.
        reply(&mut worker, 26_000, GroupReply::Joined { member: 7, generation: 3, leader: 2, members: vec![] });
        reply(&mut worker, 26_010, synced(3, GroupAssignment::default()));
        let out =
            at(&mut worker, 27_000, |w, ctx| w.on_message(ctx, Node::Operator, Msg::Control(Control::ShutdownWorker)));
        assert_eq!(group_requests(&out), vec![GroupRequest::Leave { member: 7 }]);
        assert!(out.observations.contains(&Observation::WorkerLeft));
        assert!(worker.has_left());
        assert!(tick(&mut worker, 30_000).sends.is_empty(), "a worker that left does nothing more");
    }

    /// A member of a group of two, `connect`, stable in generation 1 led by `leader`, holding
    /// what `assigned` says (its tasks just started).
    fn stable_member(leader: Node, assigned: Vec<u8>) -> ConnectWorker {
        let mut worker = group_member();
        at(&mut worker, 0, |w, ctx| w.start(ctx));
        let leader_id = if leader == Node::Connect { 1 } else { 2 };
        let joined = GroupReply::Joined { member: 1, generation: 1, leader: leader_id, members: Vec::new() };
        if leader == Node::Connect {
            let members = vec![(1, Node::Connect, vec![]), (2, Node::Connect2, vec![])];
            reply(&mut worker, 3_000, GroupReply::Joined { member: 1, generation: 1, leader: 1, members });
        } else {
            reply(&mut worker, 3_000, joined);
        }
        let config = vec![ConnectorConfigRecord { running: true, tasks: 1 }; 2];
        let assignment = GroupAssignment { assigned, ..Default::default() };
        reply(&mut worker, 3_010, GroupReply::Synced { generation: 1, assignment, leader, config });
        worker
    }

    fn rest(worker: &mut ConnectWorker, ms: u64, from: Node, msg: Msg) -> Outbox {
        at(worker, ms, |w, ctx| w.on_message(ctx, from, msg))
    }

    #[test]
    fn in_a_group_a_stop_goes_to_the_leader_and_its_answer_comes_back() {
        let mut worker = stable_member(Node::Connect2, vec![]);
        let stop = Msg::Rest { connector: 0, request: RestRequest::Stop };
        let out = rest(&mut worker, 5_000, Node::Operator, stop);
        let [(Node::Connect2, Msg::RestForward { id, connector: 0, request: RestRequest::Stop, hops: 1 })] =
            out.sends[..]
        else {
            panic!("{:?}", out.sends)
        };
        assert!(out.observations.iter().any(|o| matches!(o, Observation::RestForwarded { to: Node::Connect2, .. })));
        // The leader's answer is relayed to the operator.
        let out = rest(&mut worker, 5_010, Node::Connect2, Msg::RestForwardReply { id, reply: RestReply::Ok });
        assert_eq!(out.sends, vec![(Node::Operator, Msg::RestReply { reply: RestReply::Ok })]);
        // A call forwarded twice already is not forwarded a third time: 409.
        let twice = Msg::RestForward { id: 7, connector: 0, request: RestRequest::Stop, hops: 2 };
        let out = rest(&mut worker, 5_020, Node::Connect3, twice);
        assert!(
            matches!(&out.sends[..], [(Node::Connect3, Msg::RestForwardReply { id: 7, reply: RestReply::Error(e) })] if e.contains("conflicting operation")),
            "{:?}",
            out.sends
        );
        // The leader goes away with a call forwarded to it: the call fails, the caller tries again.
        let out =
            rest(&mut worker, 6_000, Node::Operator, Msg::Rest { connector: 0, request: RestRequest::DeleteOffsets });
        assert!(matches!(out.sends[..], [(Node::Connect2, Msg::RestForward { .. })]));
        let out = at(&mut worker, 6_010, |w, ctx| w.on_connection_lost(ctx, Node::Connect2));
        assert!(
            matches!(&out.sends[..], [(Node::Operator, Msg::RestReply { reply: RestReply::Error(e) })] if e.contains("unreachable")),
            "{:?}",
            out.sends
        );
        // Status is any worker's to answer, from the status topic.
        let out = rest(&mut worker, 7_000, Node::Operator, Msg::Rest { connector: 0, request: RestRequest::Status });
        assert!(matches!(
            &out.sends[..],
            [(Node::Kafka, Msg::Kafka { request: KafkaRequest::ReadConnectStatus { connector: 0 }, .. })]
        ));
    }

    #[test]
    fn a_stop_in_the_config_topic_stops_the_task_and_a_resume_starts_it_after_a_rebalance() {
        let mut worker = stable_member(Node::Connect, vec![0]);
        assert!(worker.runs_task(0));
        // The leader serves the stop itself: one config record.
        let out = rest(&mut worker, 5_000, Node::Operator, Msg::Rest { connector: 0, request: RestRequest::Stop });
        assert!(matches!(
            &out.sends[..],
            [(
                Node::Kafka,
                Msg::Kafka { request: KafkaRequest::WriteConnectConfig { connector: 0, write: ConfigWrite::Stop }, .. }
            )]
        ));
        // Every worker reads the record: the task stops, and the member joins again.
        let stopped = ConnectorConfigRecord { running: false, tasks: 0 };
        let out = rest(&mut worker, 5_010, Node::Kafka, Msg::ConnectConfig { connector: 0, record: stopped });
        assert!(!worker.runs_task(0), "a task still starting ends at once");
        assert!(matches!(&group_requests(&out)[..], [GroupRequest::Join { .. }]));
        assert_eq!(worker.connectors[0].status(), ConnectorState::Stopped);
        // An offset reset is allowed now.
        let members = vec![(1, Node::Connect, vec![0, 1]), (2, Node::Connect2, vec![])];
        reply(&mut worker, 5_020, GroupReply::Joined { member: 1, generation: 2, leader: 1, members });
        let config = vec![stopped, ConnectorConfigRecord { running: true, tasks: 1 }];
        let nothing = GroupAssignment::default();
        reply(
            &mut worker,
            5_030,
            GroupReply::Synced { generation: 2, assignment: nothing, leader: Node::Connect, config },
        );
        let delete = Msg::Rest { connector: 0, request: RestRequest::DeleteOffsets };
        let out = rest(&mut worker, 6_000, Node::Operator, delete);
        assert!(matches!(
            &out.sends[..],
            [(Node::Kafka, Msg::Kafka { request: KafkaRequest::WriteSourceOffset { offset: None, .. }, .. })]
        ));
        // Resumed: the target state alone; the worker holding the connector generates its task
        // configuration, which makes every worker join again; the task starts after that rebalance.
        let resumed = ConnectorConfigRecord { running: true, tasks: 0 };
        let out = rest(&mut worker, 7_000, Node::Kafka, Msg::ConnectConfig { connector: 0, record: resumed });
        assert!(!worker.runs_task(0));
        assert!(out.sends.iter().any(|(_, msg)| matches!(
            msg,
            Msg::Kafka {
                request: KafkaRequest::WriteConnectConfig { connector: 0, write: ConfigWrite::TaskConfigs(1) },
                ..
            }
        )));
        let configured = ConnectorConfigRecord { running: true, tasks: 1 };
        let out = rest(&mut worker, 7_010, Node::Kafka, Msg::ConnectConfig { connector: 0, record: configured });
        assert!(matches!(&group_requests(&out)[..], [GroupRequest::Join { .. }]));
        let members = vec![(1, Node::Connect, vec![0, 1]), (2, Node::Connect2, vec![])];
        reply(&mut worker, 7_020, GroupReply::Joined { member: 1, generation: 3, leader: 1, members });
        let config = vec![configured; 2];
        let nothing = GroupAssignment::default();
        reply(
            &mut worker,
            7_030,
            GroupReply::Synced { generation: 3, assignment: nothing, leader: Node::Connect, config },
        );
        assert!(worker.runs_task(0), "the task starts where its connector is held");
    }

    #[test]
    fn the_leader_refuses_an_offset_reset_until_the_config_topic_says_stopped_with_no_task() {
        let mut worker = stable_member(Node::Connect, vec![0]);
        let delete = Msg::Rest { connector: 0, request: RestRequest::DeleteOffsets };
        let out = rest(&mut worker, 5_000, Node::Operator, delete);
        assert!(
            matches!(&out.sends[..], [(Node::Operator, Msg::RestReply { reply: RestReply::Error(e) })] if e.contains("STOPPED state")),
            "{:?}",
            out.sends
        );
    }
}
