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
//! `TargetState`). A REST call needs a reachable worker. Left out:
//! group membership and rebalancing (`scheduled.rebalance.max.delay.ms`), exactly-once support,
//! `errors.tolerance`, the 5 s graceful-shutdown deadline and orphaned tasks.

pub mod debezium;
pub mod transforms;

use crate::components::connect::debezium::{DebeziumConfig, DebeziumTask, Phase, TaskEvent};
use crate::components::connect::transforms::chain::{Fate, TransformChain};
use crate::core::component::{Component, Ctx, Timer};
use crate::core::event::{SourceOffset, SourceRecord};
use crate::core::fault::FaultAction;
use crate::core::ids::Node;
use crate::core::observe::Observation;
/// The worker's status, as its REST API reports it (defined with the REST protocol, which the
/// operator reads too).
pub use crate::core::protocol::ConnectorState;
use crate::core::protocol::{
    Control, KAFKA_RECONNECT_BACKOFF_MS, KafkaReply, KafkaRequest, Msg, RestReply, RestRequest,
};
use crate::core::shared::{CopyOnWrite, Fixed};
use crate::core::time::SimTime;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConnectConfig {
    /// `offset.flush.interval.ms` (default 60 000).
    pub offset_flush_interval_ms: u64,
    /// `offset.flush.timeout.ms` (default 5 000).
    pub offset_flush_timeout_ms: u64,
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
    /// `DELETE /connectors/<name>/offsets`.
    DeleteOffsets,
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
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Volatile {
    task: Option<TaskRuntime>,
    /// Kafka requests awaiting a reply: id, purpose, and the request (re-sent after a lost
    /// connection, as the Kafka clients retry).
    pending: Vec<(u64, Pending, CopyOnWrite<KafkaRequest>)>,
    next_request: u64,
    next_session: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConnectWorker {
    pub config: Fixed<ConnectConfig>,
    pub debezium: Fixed<DebeziumConfig>,
    /// The connector's single message transforms (`transforms`), run on every record `poll()`
    /// returns, before it is produced.
    pub transforms: Fixed<TransformChain>,
    pub target_state: TargetState,
    /// The task died and waits for a REST restart (the status shows FAILED).
    task_died: bool,
    /// Why the task failed, when Connect failed it (an exception in the transformation chain),
    /// as the status topic keeps its trace.
    failure: Option<String>,
    volatile: Volatile,
}

impl ConnectWorker {
    pub fn new(
        config: Fixed<ConnectConfig>,
        debezium: Fixed<DebeziumConfig>,
        transforms: Fixed<TransformChain>,
        target_state: TargetState,
    ) -> ConnectWorker {
        ConnectWorker {
            config,
            debezium,
            transforms,
            target_state,
            task_died: false,
            failure: None,
            volatile: Volatile { task: None, pending: Vec::new(), next_request: 1, next_session: 1 },
        }
    }

    /// The task's state as the REST API shows it.
    pub fn status(&self) -> ConnectorState {
        match &self.volatile.task {
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
        self.volatile.task.as_ref().map(|task| &task.debezium.phase)
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
        self.volatile.task.as_ref().and_then(|task| task.debezium.processed_upto())
    }

    /// Whether nothing is waiting anywhere in the worker: no queued, unsent or unacknowledged
    /// record.
    pub fn is_drained(&self) -> bool {
        self.volatile
            .task
            .as_ref()
            .is_none_or(|task| task.debezium.queued() == 0 && task.accumulator.is_empty() && !task.produce_in_flight)
    }

    fn request(&mut self, ctx: &mut Ctx, purpose: Pending, request: KafkaRequest) {
        let request_id = self.volatile.next_request;
        self.volatile.next_request += 1;
        self.volatile.pending.push((request_id, purpose, CopyOnWrite::new(request.clone())));
        ctx.send(Node::Kafka, Msg::Kafka { request_id, request });
    }

    fn start_task(&mut self, ctx: &mut Ctx) {
        self.failure = None;
        let debezium = CopyOnWrite::new(DebeziumTask::new(self.debezium, self.volatile.next_session));
        self.volatile.task = Some(TaskRuntime {
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
            commit_requested: false,
            poll_blocked: false,
            failing: false,
            restart_requested: false,
        });
        let connector = self.debezium.name.clone();
        self.request(ctx, Pending::StartOffsets, KafkaRequest::ReadSourceOffset { connector });
        // scheduleWithFixedDelay: the first commit one interval after the task starts.
        ctx.set_timer(Timer::OffsetFlush, self.config.offset_flush_interval_ms);
    }

    fn handle_task_event(&mut self, ctx: &mut Ctx, event: TaskEvent) {
        match event {
            TaskEvent::None => {}
            TaskEvent::RestartAfter(after_ms) => ctx.set_timer(Timer::TaskRestart, after_ms),
            TaskEvent::ReadSlotAgainAfter(after_ms) => ctx.set_timer(Timer::SlotInfoRetry, after_ms),
            TaskEvent::HeartbeatEvery(interval_ms) => ctx.set_timer(Timer::Heartbeat, interval_ms),
            TaskEvent::Failed => {
                if let Some(task) = self.volatile.task.as_mut() {
                    task.state = TaskState::Failed;
                }
                ctx.cancel_timer(Timer::PollReturns);
                ctx.cancel_timer(Timer::OffsetFlush);
            }
        }
        self.arm_poll(ctx);
    }

    /// Arms the timer for the moment the current `poll()` returns, if it has something to do.
    fn arm_poll(&mut self, ctx: &mut Ctx) {
        let Some(task) = self.volatile.task.as_mut() else { return };
        if task.state != TaskState::Running || task.poll_armed || task.poll_blocked {
            return;
        }
        let queued = task.debezium.queued();
        if queued == 0 && !task.commit_requested {
            return; // an idle poll changes nothing
        }
        let interval = self.debezium.poll_interval_ms.max(1);
        let delay = if queued >= self.debezium.max_batch_size as usize {
            0 // a full batch returns at once
        } else {
            // Polls return on a grid of poll.interval.ms from when the current one started.
            let elapsed = ctx.now.since(task.poll_started_at);
            let periods = elapsed.div_ceil(interval).max(1);
            task.poll_started_at.ms() + periods * interval - ctx.now.ms()
        };
        task.poll_armed = true;
        ctx.set_timer(Timer::PollReturns, delay);
    }

    /// `poll()` returns now: perform a requested commit first, then hand records to the producer.
    fn poll_returns(&mut self, ctx: &mut Ctx) {
        let Some(task) = self.volatile.task.as_mut() else { return };
        task.poll_armed = false;
        if task.state != TaskState::Running {
            return;
        }
        task.poll_started_at = ctx.now;
        refresh_committable(task, ctx.now);
        if task.commit_requested {
            task.commit_requested = false;
            task.poll_blocked = true;
            let connector = self.debezium.name.clone();
            self.request(
                ctx,
                Pending::CommitOffsets { then_stop: false },
                KafkaRequest::ReadSourceOffset { connector },
            );
            return;
        }
        self.finish_poll(ctx);
    }

    fn finish_poll(&mut self, ctx: &mut Ctx) {
        let Some(task) = self.volatile.task.as_mut() else { return };
        task.poll_blocked = false;
        task.poll_started_at = ctx.now;
        let records = if task.debezium.queued() > 0 { task.debezium.get_mut().drain() } else { Vec::new() };
        let mut failure = None;
        if !records.is_empty() && self.transforms.is_empty() {
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
                    match self.transforms.apply(&record) {
                        Ok(Fate::Send { topic, placement }) => match self.transforms.topic(&topic) {
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
            self.send_accumulated(ctx);
            self.fail_task_for(ctx, reason);
            return;
        }
        self.send_accumulated(ctx);
        self.arm_poll(ctx);
    }

    fn send_accumulated(&mut self, ctx: &mut Ctx) {
        let Some(task) = self.volatile.task.as_mut() else { return };
        if task.produce_in_flight || task.accumulator.is_empty() {
            return;
        }
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
        self.request(ctx, purpose, KafkaRequest::Produce { records: CopyOnWrite::new(batch) });
    }

    fn on_produced(
        &mut self,
        ctx: &mut Ctx,
        (first_seq, last_seq, count): (u64, u64, usize),
        changes: usize,
        completion_marker: bool,
    ) {
        let Some(task) = self.volatile.task.as_mut() else { return };
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
                if !task.debezium.confirms_from_offset_store() {
                    task.debezium.get_mut().commit_record(submitted.offset);
                }
            }
        }
        ctx.observe(Observation::ProduceAcked { count, changes, completion_marker });
        self.send_accumulated(ctx);
        self.continue_stop_if_drained(ctx);
    }

    /// The periodic offset commit (`WorkerSourceTask.commitOffsets`).
    fn offset_flush(&mut self, ctx: &mut Ctx, final_commit: bool) {
        let Some(task) = self.volatile.task.as_mut() else { return };
        if task.state == TaskState::Failed {
            return;
        }
        if task.flushing.is_some() {
            // An earlier flush is still running; try at the next interval.
            ctx.set_timer(Timer::OffsetFlush, self.config.offset_flush_interval_ms);
            return;
        }
        // The committable offsets are refreshed at the top of every send-loop iteration: a poll
        // returns every poll.interval.ms even when it returns nothing.
        let last_poll_start =
            if final_commit { ctx.now } else { last_poll_start(task, ctx.now, self.debezium.poll_interval_ms) };
        refresh_committable(task, last_poll_start);
        if let Some(offset) = task.committable.take() {
            task.writer_data = Some(offset);
        }
        match task.writer_data.take() {
            None => {
                // Nothing to flush still counts as success.
                self.flush_succeeded(ctx, None, final_commit);
            }
            Some(offset) => {
                task.flushing = Some(offset);
                let connector = self.debezium.name.clone();
                self.request(
                    ctx,
                    Pending::Flush { final_commit },
                    KafkaRequest::WriteSourceOffset { connector, offset: Some(offset) },
                );
                ctx.set_timer(Timer::OffsetFlushTimeout, self.config.offset_flush_timeout_ms);
            }
        }
    }

    fn flush_succeeded(&mut self, ctx: &mut Ctx, offset: Option<SourceOffset>, final_commit: bool) {
        let Some(task) = self.volatile.task.as_mut() else { return };
        task.flushing = None;
        ctx.cancel_timer(Timer::OffsetFlushTimeout);
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
        if final_commit {
            self.finish_stop(ctx);
        } else {
            ctx.set_timer(Timer::OffsetFlush, self.config.offset_flush_interval_ms);
            self.arm_poll(ctx);
        }
    }

    fn flush_timed_out(&mut self, ctx: &mut Ctx) {
        let Some(task) = self.volatile.task.as_mut() else { return };
        let Some(offset) = task.flushing.take() else { return };
        // cancelFlush: the offsets go back; newer ones in `data` win.
        if task.writer_data.is_none() {
            task.writer_data = Some(offset);
        }
        self.volatile.pending.retain(|(_, purpose, _)| !matches!(purpose, Pending::Flush { .. }));
        ctx.observe(Observation::OffsetFlushFailed {
            reason: format!(
                "offset flush not acknowledged within offset.flush.timeout.ms={}",
                self.config.offset_flush_timeout_ms
            ),
        });
        let stopping = task.state == TaskState::Stopping;
        if stopping {
            self.finish_stop(ctx);
        } else {
            ctx.set_timer(Timer::OffsetFlush, self.config.offset_flush_interval_ms);
        }
    }

    fn graceful_stop(&mut self, ctx: &mut Ctx) {
        let Some(task) = self.volatile.task.as_mut() else { return };
        match task.state {
            TaskState::Running => {
                task.state = TaskState::Stopping;
                ctx.cancel_timer(Timer::PollReturns);
                ctx.cancel_timer(Timer::OffsetFlush);
                ctx.cancel_timer(Timer::TaskRestart);
                ctx.cancel_timer(Timer::SlotInfoRetry);
                ctx.cancel_timer(Timer::Heartbeat);
                task.poll_armed = false;
                // The send loop exits; in-flight records are awaited.
                ctx.set_timer(Timer::StopTimeout, self.config.offset_flush_timeout_ms);
                self.continue_stop_if_drained(ctx);
            }
            TaskState::Starting | TaskState::Failed => {
                let mut task = self.volatile.task.take().expect("task present");
                task.debezium.get_mut().stop(ctx);
                ctx.cancel_timer(Timer::OffsetFlush);
                ctx.cancel_timer(Timer::PollReturns);
                ctx.cancel_timer(Timer::TaskRestart);
                ctx.cancel_timer(Timer::SlotInfoRetry);
                ctx.cancel_timer(Timer::Heartbeat);
                ctx.observe(Observation::TaskStopped { graceful: true });
            }
            TaskState::Stopping => {}
        }
    }

    fn continue_stop_if_drained(&mut self, ctx: &mut Ctx) {
        let Some(task) = self.volatile.task.as_ref() else { return };
        if task.state == TaskState::Stopping && !task.produce_in_flight && task.flushing.is_none() {
            let pending_flush =
                self.volatile.pending.iter().any(|(_, purpose, _)| matches!(purpose, Pending::Flush { .. }));
            if !pending_flush {
                ctx.cancel_timer(Timer::StopTimeout);
                self.offset_flush(ctx, true);
            }
        }
    }

    /// After the final commit: `SourceTask.stop()` performs one commit from the stored offset
    /// and closes the connections.
    fn finish_stop(&mut self, ctx: &mut Ctx) {
        let connector = self.debezium.name.clone();
        self.request(ctx, Pending::CommitOffsets { then_stop: true }, KafkaRequest::ReadSourceOffset { connector });
    }

    fn on_kafka_reply(&mut self, ctx: &mut Ctx, request_id: u64, reply: KafkaReply) {
        let Some(index) = self.volatile.pending.iter().position(|(id, _, _)| *id == request_id) else { return };
        let (_, purpose, _) = self.volatile.pending.remove(index);
        match (purpose, reply) {
            (Pending::StartOffsets, KafkaReply::SourceOffset(stored)) => {
                let Some(task) = self.volatile.task.as_mut() else { return };
                if task.state == TaskState::Starting || task.state == TaskState::Running {
                    task.state = TaskState::Running;
                    task.poll_started_at = ctx.now;
                    let event = task.debezium.get_mut().start(ctx, stored);
                    self.volatile.next_session = task.debezium.next_session();
                    self.handle_task_event(ctx, event);
                }
            }
            (Pending::CommitOffsets { then_stop }, KafkaReply::SourceOffset(stored)) => {
                let Some(task) = self.volatile.task.as_mut() else { return };
                task.commit_offset(ctx, stored);
                if then_stop {
                    let mut task = self.volatile.task.take().expect("task present");
                    task.debezium.get_mut().stop(ctx);
                    ctx.observe(Observation::TaskStopped { graceful: !task.failing });
                    // A resume (or, for a failed task, a restart) that came while the task was
                    // stopping: the herder starts the task anew once the old one has stopped.
                    let start_again = if task.failing { task.restart_requested } else { true };
                    self.task_died = task.failing && !task.restart_requested;
                    if self.target_state == TargetState::Running && start_again {
                        self.start_task(ctx);
                    }
                } else {
                    self.finish_poll(ctx);
                }
            }
            (
                Pending::Produce { first_seq, last_seq, count, changes, completion_marker },
                KafkaReply::Produced { .. },
            ) => {
                self.on_produced(ctx, (first_seq, last_seq, count), changes, completion_marker);
            }
            (Pending::Flush { final_commit }, KafkaReply::SourceOffsetWritten) => {
                let offset = self.volatile.task.as_ref().and_then(|task| task.flushing);
                self.flush_succeeded(ctx, offset, final_commit);
            }
            (Pending::DeleteOffsets, KafkaReply::SourceOffsetWritten) => {
                ctx.send(Node::Operator, Msg::RestReply { reply: RestReply::Ok });
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
    fn fail_task_for(&mut self, ctx: &mut Ctx, reason: String) {
        ctx.observe(Observation::TaskFailed { reason: reason.clone() });
        self.failure = Some(reason);
        self.fail_task(ctx);
    }

    fn fail_task(&mut self, ctx: &mut Ctx) {
        let Some(task) = self.volatile.task.as_mut() else {
            let reason = match self.status() {
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
                self.graceful_stop(ctx);
                if let Some(task) = self.volatile.task.as_mut() {
                    task.failing = true;
                }
            }
            TaskState::Stopping => task.failing = true,
            TaskState::Starting | TaskState::Failed => {
                let mut task = self.volatile.task.take().expect("task present");
                task.debezium.get_mut().stop(ctx);
                self.volatile.pending.retain(|(_, purpose, _)| !matches!(purpose, Pending::StartOffsets));
                for timer in
                    [Timer::PollReturns, Timer::OffsetFlush, Timer::TaskRestart, Timer::SlotInfoRetry, Timer::Heartbeat]
                {
                    ctx.cancel_timer(timer);
                }
                self.task_died = true;
                ctx.observe(Observation::TaskStopped { graceful: false });
            }
        }
    }

    fn on_rest(&mut self, ctx: &mut Ctx, from: Node, request: RestRequest) {
        let reply = match request {
            RestRequest::Stop => {
                self.target_state = TargetState::Stopped;
                self.graceful_stop(ctx);
                RestReply::Ok
            }
            RestRequest::Resume => {
                self.target_state = TargetState::Running;
                if self.volatile.task.is_none() {
                    self.start_task(ctx);
                }
                RestReply::Ok
            }
            RestRequest::DeleteOffsets => {
                if self.target_state != TargetState::Stopped || self.volatile.task.is_some() {
                    RestReply::Error(
                        "Connectors must be in the STOPPED state before their offsets can be modified".into(),
                    )
                } else {
                    let connector = self.debezium.name.clone();
                    self.request(
                        ctx,
                        Pending::DeleteOffsets,
                        KafkaRequest::WriteSourceOffset { connector, offset: None },
                    );
                    return;
                }
            }
            RestRequest::Status => RestReply::Status { state: self.status() },
            RestRequest::RestartTask => {
                if self.target_state == TargetState::Running {
                    match self.volatile.task.as_mut() {
                        None => {
                            self.task_died = false;
                            self.start_task(ctx);
                        }
                        Some(task) if task.failing => task.restart_requested = true,
                        Some(_) => {}
                    }
                }
                RestReply::Ok
            }
        };
        ctx.send(from, Msg::RestReply { reply });
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

impl Component for ConnectWorker {
    fn start(&mut self, ctx: &mut Ctx) {
        self.volatile = Volatile { task: None, pending: Vec::new(), next_request: 1, next_session: 1 };
        self.task_died = false;
        ctx.observe(Observation::WorkerStarted {
            target_state: match self.target_state {
                TargetState::Running => ConnectorState::Running,
                TargetState::Stopped => ConnectorState::Stopped,
            },
        });
        if self.target_state == TargetState::Running {
            self.start_task(ctx);
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx, from: Node, msg: Msg) {
        match msg {
            Msg::KafkaReply { request_id, reply } => self.on_kafka_reply(ctx, request_id, reply),
            Msg::Rest { request } => self.on_rest(ctx, from, request),
            Msg::Control(Control::KillTask) => self.fail_task(ctx),
            Msg::SqlReply { .. } | Msg::ReplReply { .. } => {
                let Some(task) = self.volatile.task.as_mut() else { return };
                if task.state == TaskState::Running {
                    let event = task.debezium.get_mut().on_message(ctx, msg);
                    self.handle_task_event(ctx, event);
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx, timer: Timer) {
        match timer {
            Timer::PollReturns => self.poll_returns(ctx),
            Timer::KafkaRetry => {
                for (request_id, _, request) in &self.volatile.pending {
                    ctx.send(Node::Kafka, Msg::Kafka { request_id: *request_id, request: (**request).clone() });
                }
            }
            Timer::OffsetFlush => self.offset_flush(ctx, false),
            Timer::OffsetFlushTimeout => self.flush_timed_out(ctx),
            Timer::StopTimeout => {
                // Give up waiting for in-flight records and commit what is acknowledged.
                if let Some(task) = self.volatile.task.as_mut() {
                    task.produce_in_flight = false;
                    self.volatile.pending.retain(|(_, purpose, _)| !matches!(purpose, Pending::Produce { .. }));
                }
                self.continue_stop_if_drained(ctx);
            }
            Timer::Heartbeat => {
                if let Some(task) = self.volatile.task.as_mut()
                    && task.state == TaskState::Running
                    && task.debezium.get_mut().on_heartbeat(ctx)
                {
                    ctx.set_timer(Timer::Heartbeat, self.debezium.effective_heartbeat_interval_ms());
                    self.arm_poll(ctx);
                }
            }
            Timer::SlotInfoRetry => {
                if let Some(task) = self.volatile.task.as_mut()
                    && task.state == TaskState::Running
                {
                    let event = task.debezium.get_mut().on_slot_info_retry(ctx);
                    self.handle_task_event(ctx, event);
                }
            }
            Timer::TaskRestart => {
                if let Some(task) = self.volatile.task.as_mut()
                    && task.state == TaskState::Running
                {
                    // Debezium restarts in-process and re-reads the stored offset.
                    task.state = TaskState::Starting;
                    let connector = self.debezium.name.clone();
                    self.request(ctx, Pending::StartOffsets, KafkaRequest::ReadSourceOffset { connector });
                }
            }
            _ => {}
        }
    }

    fn on_connection_lost(&mut self, ctx: &mut Ctx, peer: Node) {
        if peer == Node::Kafka && !self.volatile.pending.is_empty() {
            // The Kafka clients reconnect (`reconnect.backoff.max.ms`) and send again what was not
            // answered; a produce request sent again may be appended twice.
            ctx.set_timer(Timer::KafkaRetry, KAFKA_RECONNECT_BACKOFF_MS);
            return;
        }
        if peer == Node::Postgres
            && let Some(task) = self.volatile.task.as_mut()
            && task.state == TaskState::Running
        {
            let event = task.debezium.get_mut().on_database_connection_lost(ctx);
            self.handle_task_event(ctx, event);
        }
    }

    fn crash(&mut self) {
        self.volatile = Volatile { task: None, pending: Vec::new(), next_request: 1, next_session: 1 };
    }
}
