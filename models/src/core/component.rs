//! The sans-IO contract every model follows.
//!
//! A component is a plain state machine. It is driven by four inputs — start, a message, a timer,
//! a lost connection — and answers through a [`Ctx`]: messages to send, timers to arm or cancel,
//! and observations for the checkers and the narrator. It never reads a clock, never draws a
//! random number, never blocks. That is what lets the madsim lens (`handoff-sim`) and the
//! stateright lens ([`crate::exhaustive::check`]) drive the same code.
//!
//! Durable and volatile state are separate in every component: [`Component::crash`] drops the
//! volatile part (what a process loses when it dies) and keeps the durable part (what is on disk
//! or in Kafka). A restart is `crash` followed by `start`.

use crate::core::ids::Node;
use crate::core::observe::Observation;
use crate::core::protocol::Msg;
use crate::core::time::SimTime;
use serde::{Deserialize, Serialize};

/// Every timer a component can arm. At most one instance of each kind per node is armed: arming
/// again re-arms it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Timer {
    /// PostgreSQL: the next batch of rows of a client's snapshot scan is ready.
    ScanBatch { client: Node },
    /// PostgreSQL: the background writer's running-xacts record (`LOG_SNAPSHOT_INTERVAL_MS`).
    BgwriterRunningXacts,
    /// PostgreSQL: a timed checkpoint (`checkpoint_timeout`).
    Checkpoint,
    /// PostgreSQL primary: ship WAL to the standby (after `replication_delay_ms`).
    ShipWal,
    /// Connect: a timer of connector `connector`'s source task (the index of its `[[connector]]`
    /// entry; a worker runs one task per connector, each with its own timers).
    Task { connector: u8, timer: TaskTimer },
    /// A consumer group member (the sink, the outbox's consumer): commit consumed positions
    /// (`auto.commit.interval.ms`).
    SinkCommit,
    /// A Kafka client sends its unanswered requests again after a lost connection.
    KafkaRetry,
    /// App: the next scheduled workload transaction.
    Workload,
    /// Loader: time to run the plain read.
    LoaderStart,
    /// Operator: retry a step of a procedure.
    OperatorRetry,
    /// PostgreSQL: transaction blocks whose commit record is in WAL leave the proc array
    /// (`ProcArrayEndTransaction` after `RecordTransactionCommit`, `xact.c`): they become
    /// visible, release their locks, and COMMIT returns. Armed with no delay, so that other
    /// events can come between the commit record and the visibility.
    CommitVisible,
    /// PostgreSQL: the WAL writer flushes what was inserted without a flush (`wal_writer_delay`).
    WalWriter,
    /// PostgreSQL: a session has been idle in a transaction block for
    /// `idle_in_transaction_session_timeout`.
    IdleInTransactionTimeout,
    /// The outbox's consumer: its local transaction on the record in hand is done
    /// (`processing_ms`).
    ConsumerWork,
    /// Kafka: the transaction coordinator's sweep for transactions open past their
    /// `transaction.timeout.ms` (every
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`).
    TransactionAbortSweep,
    /// Kafka: the log cleaner wakes up to clean the compacted partitions that are due (it sleeps
    /// `log.cleaner.backoff.ms` between looks).
    LogCleaner,
    /// Kafka: the Connect group coordinator's join phase ends (`rebalance.timeout.ms`, or
    /// `group.initial.rebalance.delay.ms` for an empty group): those that did not join are out.
    GroupCoordinator,
    /// Kafka: the session of the group member running on worker `member` expires
    /// (`session.timeout.ms` without a heartbeat).
    GroupSession { member: Node },
    /// A Connect worker of a group: its next heartbeat (`heartbeat.interval.ms`).
    GroupHeartbeat,
    /// A Connect worker of a group: join again (the delay of a scheduled rebalance, or the end
    /// of a revocation's graceful stops).
    GroupRejoin,
}

impl Timer {
    /// Every timer but the scan batch (one per client) and the connector tasks' ([`TaskTimer`]).
    pub const PLAIN: [Timer; 17] = [
        Timer::BgwriterRunningXacts,
        Timer::Checkpoint,
        Timer::ShipWal,
        Timer::SinkCommit,
        Timer::KafkaRetry,
        Timer::Workload,
        Timer::LoaderStart,
        Timer::OperatorRetry,
        Timer::CommitVisible,
        Timer::WalWriter,
        Timer::IdleInTransactionTimeout,
        Timer::ConsumerWork,
        Timer::TransactionAbortSweep,
        Timer::LogCleaner,
        Timer::GroupCoordinator,
        Timer::GroupHeartbeat,
        Timer::GroupRejoin,
    ];

    /// Connector `connector`'s task timer.
    pub const fn task(connector: u8, timer: TaskTimer) -> Timer {
        Timer::Task { connector, timer }
    }

    /// The timer of the first connector's task (the only one most scenarios have).
    pub const fn first_task(timer: TaskTimer) -> Timer {
        Timer::Task { connector: 0, timer }
    }

    /// Its name in a schedule and a timeline: `offset-flush`, `scan-batch:connect`.
    pub fn name(self) -> String {
        match self {
            Timer::ScanBatch { client } => format!("scan-batch:{client}"),
            Timer::BgwriterRunningXacts => "bgwriter-running-xacts".into(),
            Timer::Checkpoint => "checkpoint".into(),
            Timer::ShipWal => "ship-wal".into(),
            // The first connector's timers keep their plain names; another's carry its place.
            Timer::Task { connector: 0, timer } => timer.name().into(),
            Timer::Task { connector, timer } => format!("{}:{}", timer.name(), u32::from(connector) + 1),
            Timer::SinkCommit => "sink-commit".into(),
            Timer::KafkaRetry => "kafka-retry".into(),
            Timer::Workload => "workload".into(),
            Timer::LoaderStart => "loader-start".into(),
            Timer::OperatorRetry => "operator-retry".into(),
            Timer::CommitVisible => "commit-visible".into(),
            Timer::WalWriter => "wal-writer".into(),
            Timer::IdleInTransactionTimeout => "idle-in-transaction-session-timeout".into(),
            Timer::ConsumerWork => "consumer-work".into(),
            Timer::TransactionAbortSweep => "transaction-abort-sweep".into(),
            Timer::LogCleaner => "log-cleaner".into(),
            Timer::GroupCoordinator => "group-coordinator".into(),
            Timer::GroupSession { member } => format!("group-session:{member}"),
            Timer::GroupHeartbeat => "group-heartbeat".into(),
            Timer::GroupRejoin => "group-rejoin".into(),
        }
    }
}

/// A Connect source task's timers (each connector's task has its own set, [`Timer::Task`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TaskTimer {
    /// The source task's `poll()` returns (Debezium waits `poll.interval.ms` for records).
    PollReturns,
    /// The periodic offset commit (`offset.flush.interval.ms`).
    OffsetFlush,
    /// The offset flush did not complete in `offset.flush.timeout.ms`.
    OffsetFlushTimeout,
    /// A graceful stop's final commit gave up waiting for in-flight records.
    StopTimeout,
    /// Debezium: restart after a retriable error (`retriable.restart.connector.wait.ms`).
    TaskRestart,
    /// Debezium: read the slot row again (its `restart_lsn` was NULL; 900 attempts, 2 s apart).
    SlotInfoRetry,
    /// Debezium: the next heartbeat (`heartbeat.interval.ms`).
    Heartbeat,
    /// Debezium's SignalProcessor polls its channels (`signal.poll.interval.ms`): the Kafka
    /// signal channel's `poll()`.
    SignalPoll,
    /// Debezium's streaming loop read no message (`processMessages`' idle iteration,
    /// `dispatchHeartbeatEventAlsoToIncrementalSnapshot`): armed every `poll.interval.ms` while
    /// a read-only incremental snapshot runs.
    StreamIdle,
}

impl TaskTimer {
    pub const ALL: [TaskTimer; 9] = [
        TaskTimer::PollReturns,
        TaskTimer::OffsetFlush,
        TaskTimer::OffsetFlushTimeout,
        TaskTimer::StopTimeout,
        TaskTimer::TaskRestart,
        TaskTimer::SlotInfoRetry,
        TaskTimer::Heartbeat,
        TaskTimer::SignalPoll,
        TaskTimer::StreamIdle,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TaskTimer::PollReturns => "poll-returns",
            TaskTimer::OffsetFlush => "offset-flush",
            TaskTimer::OffsetFlushTimeout => "offset-flush-timeout",
            TaskTimer::StopTimeout => "stop-timeout",
            TaskTimer::TaskRestart => "task-restart",
            TaskTimer::SlotInfoRetry => "slot-info-retry",
            TaskTimer::Heartbeat => "heartbeat",
            TaskTimer::SignalPoll => "signal-poll",
            TaskTimer::StreamIdle => "stream-idle",
        }
    }

    /// Its place in [`TaskTimer::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// What a component asks of the world in one step.
#[derive(Debug, Default)]
pub struct Outbox {
    pub sends: Vec<(Node, Msg)>,
    pub timers: Vec<TimerRequest>,
    pub observations: Vec<Observation>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerRequest {
    Set { timer: Timer, after_ms: u64 },
    Cancel { timer: Timer },
}

impl Outbox {
    pub fn clear(&mut self) {
        self.sends.clear();
        self.timers.clear();
        self.observations.clear();
    }
}

/// The context of one step: the current simulated time, who is acting, and the outbox.
pub struct Ctx<'a> {
    pub now: SimTime,
    pub me: Node,
    out: &'a mut Outbox,
}

impl<'a> Ctx<'a> {
    pub fn new(now: SimTime, me: Node, out: &'a mut Outbox) -> Ctx<'a> {
        Ctx { now, me, out }
    }

    pub fn send(&mut self, to: Node, msg: Msg) {
        self.out.sends.push((to, msg));
    }

    pub fn set_timer(&mut self, timer: Timer, after_ms: u64) {
        self.out.timers.push(TimerRequest::Set { timer, after_ms });
    }

    pub fn cancel_timer(&mut self, timer: Timer) {
        self.out.timers.push(TimerRequest::Cancel { timer });
    }

    pub fn observe(&mut self, observation: Observation) {
        self.out.observations.push(observation);
    }

    /// How many observations this step has made so far (see [`Ctx::tag_observations_since`]).
    pub fn observation_mark(&self) -> usize {
        self.out.observations.len()
    }

    /// Rewrites the observations made since `mark` (a process reporting for one of its parts,
    /// as the Connect worker does for each connector but the first).
    pub fn tag_observations_since(&mut self, mark: usize, tag: impl Fn(Observation) -> Observation) {
        if mark >= self.out.observations.len() {
            return;
        }
        let tagged: Vec<Observation> = self.out.observations.drain(mark..).map(tag).collect();
        self.out.observations.extend(tagged);
    }
}

/// A modelled process.
pub trait Component {
    /// The process starts, or starts again after a crash.
    fn start(&mut self, ctx: &mut Ctx);
    /// A message arrived from `from`.
    fn on_message(&mut self, ctx: &mut Ctx, from: Node, msg: Msg);
    /// An armed timer fired.
    fn on_timer(&mut self, ctx: &mut Ctx, timer: Timer);
    /// The connection to `peer` broke (the peer crashed or was fenced). Messages it sent before
    /// are delivered first.
    fn on_connection_lost(&mut self, ctx: &mut Ctx, peer: Node);
    /// The process dies: drop everything volatile. Timers and in-flight messages are dropped by
    /// the lens.
    fn crash(&mut self);
}
