//! The acceptance check, for both lenses: has the pipeline caught up with the source (the
//! acceptance boundary, DESIGN.md §4), has it stopped short and said so, or is it still at work?
//!
//! The pipeline has caught up when the connector is RUNNING with nothing queued, unsent or
//! unacknowledged, has processed every captured commit of the primary's WAL, and the sink has
//! read to the end of every partition with no snapshot epoch waiting to close. It has stopped
//! short when the connector's task is FAILED, the connector STOPPED, or the sink's consumer
//! FAILED: those processes say they cannot go on.
//!
//! Each lens gives what it alone knows as [`Circumstances`]: the exhaustive lens
//! ([`crate::exhaustive::world`]) the messages in flight, the scripted transactions not yet run,
//! the processes down and the loader's read; the timed lens (the madsim runner) the operator's
//! procedure under way, whether the Connect worker's node is up, and where the server began
//! decoding for the connector's latest stream.

use crate::components::connect::ConnectorState;
use crate::core::lsn::Lsn;
use crate::judge::checkers::{Evidence, RunEnd};
use crate::scenario::processes::{Holder, Processes};

/// What a lens knows beside its processes.
pub struct Circumstances<'a, LastCommit: Fn(usize) -> Option<Lsn>> {
    /// The lens holds the run for something of its own: still at work, whatever the processes
    /// say (the exhaustive lens: a message in flight, a scripted transaction not yet run, a
    /// process down, the loader's read unfinished; the timed lens: an operator's procedure under
    /// way, which stops the connector on its way to resuming it).
    pub held: bool,
    /// Whether the Connect worker's process is up.
    pub connect_up: bool,
    /// Where the server began decoding for the connector's latest stream, when the lens tracks
    /// it: a request below the slot's `confirmed_flush` is forwarded to it.
    pub stream_start: Option<Lsn>,
    /// The checkers' evidence: which commits reached Kafka.
    pub evidence: &'a Evidence,
    /// The end of the last commit connector `c` captures in the primary's WAL (asked only when
    /// the rest of the pipeline is settled).
    pub last_captured_commit: LastCommit,
}

/// Where a run stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acceptance {
    /// Still at work: the run goes on (or, past its timeout, has not caught up).
    Pending,
    /// Caught up ([`RunEnd::CaughtUp`]) or stopped short, saying why.
    Ended(RunEnd),
}

impl Acceptance {
    pub fn ended(self) -> Option<RunEnd> {
        match self {
            Acceptance::Pending => None,
            Acceptance::Ended(end) => Some(end),
        }
    }
}

/// Whether the run is at its acceptance boundary, has stopped short of it, or goes on.
pub fn decide<H: Holder, L: Fn(usize) -> Option<Lsn>>(
    processes: &Processes<H>,
    circumstances: Circumstances<'_, L>,
) -> Acceptance {
    let Circumstances { held, connect_up, stream_start, evidence, last_captured_commit } = circumstances;
    if held {
        return Acceptance::Pending;
    }
    // A consumer that failed says so: the pipeline stopped, loudly.
    if let Some(failure) = H::read(&processes.sink, |sink| sink.failed().map(str::to_string)) {
        return Acceptance::Ended(RunEnd::SinkFailed { failure });
    }
    if let Some(failure) = processes
        .consumer
        .as_ref()
        .and_then(|consumer| H::read(consumer, |consumer| consumer.failed().map(str::to_string)))
    {
        return Acceptance::Ended(RunEnd::SinkFailed { failure: format!("the outbox consumer: {failure}") });
    }
    // Every connector of the worker: one that says it cannot go on ends the run; each must
    // have processed the last commit it captures.
    let count = H::read(&processes.connect, |connect| connect.connectors.len());
    for c in 0..count {
        let (status, name) = H::read(processes.worker_of(c), |connect| {
            (connect.connectors[c].status(), connect.connectors[c].debezium.name.clone())
        });
        match status {
            ConnectorState::Failed => {
                let failure =
                    H::read(processes.worker_of(c), |connect| connect.connectors[c].failure().unwrap_or_default());
                let failure = if c == 0 { failure } else { format!("connector {name}: {failure}") };
                return Acceptance::Ended(RunEnd::TaskFailed { failure });
            }
            ConnectorState::Stopped => return Acceptance::Ended(RunEnd::ConnectorStopped),
            _ => {}
        }
    }
    if !connect_up || !processes.workers_drained() {
        return Acceptance::Pending;
    }
    for c in 0..count {
        let (status, processed) = H::read(processes.worker_of(c), |connect| {
            (connect.connectors[c].status(), connect.connectors[c].processed_upto())
        });
        if status != ConnectorState::Running {
            return Acceptance::Pending;
        }
        let Some(mut processed) = processed else { return Acceptance::Pending };
        // What the connector has processed, or, when its stream was forwarded past its offset (a
        // recreated slot's confirmed_flush) over commits that are all in Kafka already, where
        // decoding began: nothing before it is still to come. (Commits it skipped that never
        // reached Kafka leave the pipeline short: RUNNING and never catching up, I11.) The lens
        // follows the first connector's stream.
        if c == 0
            && let Some(start) = stream_start
            && start > processed
            && published_between(evidence, processed, start)
        {
            processed = start;
        }
        if last_captured_commit(c).is_some_and(|last| processed < last) {
            return Acceptance::Pending;
        }
        // A read-only incremental snapshot still running has work no captured commit stands
        // for: its buffered rows and the chunks still to read. (One that never ends, a window
        // held open, is the liveness finding of the timeout.)
        if H::read(processes.worker_of(c), |connect| connect.connectors[c].read_only_backfill_running()) {
            return Acceptance::Pending;
        }
        // The Kafka signal channel: every signal record produced has been read (a signal still
        // on the topic is work the pipeline has not done).
        if let Some((tp, read)) = H::read(processes.worker_of(c), |connect| connect.connectors[c].signals_read()) {
            let end = H::read(&processes.kafka, |kafka| {
                kafka.log_end_offsets().into_iter().find(|(of, _)| *of == tp).map_or(0, |(_, end)| end)
            });
            if read.is_none_or(|read| read < end) {
                return Acceptance::Pending;
            }
        }
    }
    // A transaction still open holds records a `read_committed` consumer cannot have yet: the
    // pipeline has not caught up until it ends (committed, or aborted by the next instance or the
    // coordinator's timeout).
    // A hanging transaction (open on a partition, unknown to the coordinator) holds its
    // partition's last stable offset until an operator aborts it.
    if H::read(&processes.kafka, |kafka| kafka.has_open_transactions() || !kafka.hanging_transactions().is_empty()) {
        return Acceptance::Pending;
    }
    // Each consumer waits for what its `isolation.level` lets it read: a `read_committed` one
    // is never given an aborted record.
    let sink_isolation = H::read(&processes.sink, |sink| sink.config.isolation_level);
    let ends = H::read(&processes.kafka, |kafka| kafka.visible_ends(sink_isolation));
    let caught_up = H::read(&processes.sink, |sink| {
        // A Kafka signal topic is the connector's input, not the sink's.
        ends.iter()
            .filter(|(tp, _)| !tp.topic.is_signal())
            .all(|(tp, end)| sink.positions().get(tp).is_some_and(|position| position >= end))
            && !sink.has_closing_epochs()
    });
    // The outbox's consumer has handled every routed event Kafka holds.
    let consumed = processes.consumer.as_ref().is_none_or(|consumer| {
        let isolation = H::read(consumer, |consumer| consumer.config.isolation_level);
        let own_ends;
        let ends = if isolation == sink_isolation {
            &ends
        } else {
            own_ends = H::read(&processes.kafka, |kafka| kafka.visible_ends(isolation));
            &own_ends
        };
        H::read(consumer, |consumer| {
            consumer.is_idle()
                && ends
                    .iter()
                    .filter(|(tp, _)| matches!(tp.topic, crate::core::event::Topic::Routed(_)))
                    .all(|(tp, end)| consumer.positions().get(tp).is_some_and(|position| position >= end))
        })
    });
    if caught_up && consumed { Acceptance::Ended(RunEnd::CaughtUp) } else { Acceptance::Pending }
}

/// Whether every captured change committed in `[from, to)` is in Kafka already.
fn published_between(evidence: &Evidence, from: Lsn, to: Lsn) -> bool {
    evidence.oracle.commits.iter().filter(|commit| !commit.lost).all(|commit| {
        commit.txn.commit_lsn < from
            || commit.txn.commit_lsn >= to
            || commit.txn.changes.iter().all(|change| {
                !evidence.expects(change.table, commit.txn.commit_lsn)
                    || evidence.published.has_change(change.lsn, (change.table, change.key), change.kind.after())
            })
    })
}

#[cfg(test)]
mod tests {
    use super::{Acceptance, Circumstances, decide};
    use crate::components::connect::TargetState;
    use crate::components::sink::ApplyRule;
    use crate::core::component::{Component, Ctx, Outbox};
    use crate::core::ids::Node;
    use crate::core::lsn::Lsn;
    use crate::core::protocol::{Control, KafkaReply, Msg};
    use crate::core::time::SimTime;
    use crate::exhaustive::world::{Action, Bounds, World};
    use crate::judge::checkers::{Checkers, Evidence, RunEnd};
    use crate::judge::oracle::Oracle;
    use crate::scenario::processes::{Holder, Plain, Processes};
    use crate::scenario::setup::{self, Options};
    use crate::scenario::spec::{Invariant, Spec, claims_minimal};

    fn spec() -> Spec {
        claims_minimal(2, ApplyRule::SnapshotEpoch)
    }

    /// The processes as the scenario builds them: nothing started.
    fn fresh() -> Processes<Plain> {
        setup::build(&spec(), 0, Options { bgwriter_running_xacts: false, walsender_keepalives: false }).processes
    }

    fn evidence() -> Evidence {
        Checkers::new(Oracle::new(&[]), Vec::new()).evidence
    }

    /// Circumstances that hold nothing back: the Connect worker up, no stream forwarded, no
    /// captured commit.
    fn settled(evidence: &Evidence) -> Circumstances<'_, fn(usize) -> Option<Lsn>> {
        Circumstances { held: false, connect_up: true, stream_start: None, evidence, last_captured_commit: |_| None }
    }

    /// Runs `f` on the component of `node` with a context at t=0.
    fn act<H: Holder>(processes: &mut Processes<H>, node: Node, f: impl FnOnce(&mut dyn Component, &mut Ctx)) {
        let mut outbox = Outbox::default();
        let mut ctx = Ctx::new(SimTime::ZERO, node, &mut outbox);
        processes.with_component(node, |component| f(component, &mut ctx)).expect("the process exists");
    }

    /// A world taken, one first possible step at a time and without crashes, to where the
    /// pipeline has caught up: the snapshot published, applied and the connector streaming.
    fn caught_up_world() -> World {
        walk_to_boundary(&spec(), false)
    }

    /// A world taken, one first possible step at a time and without crashes, to the acceptance
    /// boundary; with `stream_scripts`, the scripted transactions run only once the connector
    /// streams, so that their changes are streamed rather than snapshotted.
    fn walk_to_boundary(spec: &Spec, stream_scripts: bool) -> World {
        let bounds = Bounds {
            crashable: Vec::new(),
            crashes: 0,
            pausable: Vec::new(),
            pauses: 0,
            periodic_fires: 1,
            disabled_timers: Vec::new(),
            operations: Vec::new(),
            operate_while: Default::default(),
            crash_while: Default::default(),
            script_while: Default::default(),
            commit_visibility: Default::default(),
            bgwriter_running_xacts: false,
            reductions: true,
        };
        let mut world = World::new(spec, &bounds);
        let mut actions = Vec::new();
        for _ in 0..10_000 {
            if world.at_acceptance_boundary() {
                return world;
            }
            actions.clear();
            world.actions(&bounds, &mut actions);
            let streaming = world.processes.connect.processed_upto().is_some();
            let chosen = actions
                .iter()
                .find(|action| !stream_scripts || streaming || !matches!(action, Action::RunScripted { .. }))
                .or(actions.first());
            let Some(action) = chosen else { break };
            world.step(&action.clone());
        }
        panic!("the walk did not reach the acceptance boundary");
    }

    #[test]
    fn a_connector_not_yet_started_is_pending() {
        let processes = fresh();
        let evidence = evidence();
        assert_eq!(decide(&processes, settled(&evidence)), Acceptance::Pending);
    }

    #[test]
    fn a_stopped_connector_ends_the_run_unless_the_lens_holds_it() {
        let mut processes = fresh();
        processes.connect.connectors[0].target_state = TargetState::Stopped;
        let evidence = evidence();
        assert_eq!(decide(&processes, settled(&evidence)), Acceptance::Ended(RunEnd::ConnectorStopped));
        // An operator's procedure under way (the timed lens) stops the connector on its way to
        // resuming it: the run goes on.
        let held = Circumstances { held: true, ..settled(&evidence) };
        assert_eq!(decide(&processes, held), Acceptance::Pending);
    }

    #[test]
    fn a_failed_task_ends_the_run_even_with_its_worker_down() {
        let mut processes = fresh();
        act(&mut processes, Node::Connect, |connect, ctx| connect.start(ctx));
        act(&mut processes, Node::Connect, |connect, ctx| {
            connect.on_message(ctx, Node::Operator, Msg::Control(Control::KillTask { connector: 0 }))
        });
        let evidence = evidence();
        let down = Circumstances { connect_up: false, ..settled(&evidence) };
        let failure = "the task threw an exception (kill-connector-task)".to_string();
        assert_eq!(decide(&processes, down), Acceptance::Ended(RunEnd::TaskFailed { failure }));
    }

    #[test]
    fn a_failed_sink_consumer_ends_the_run() {
        let mut processes = fresh();
        let mut outbox = Outbox::default();
        let mut ctx = Ctx::new(SimTime::ZERO, Node::Sink, &mut outbox);
        processes.sink.start(&mut ctx);
        let request_id = match outbox.sends.first() {
            Some((Node::Kafka, Msg::Kafka { request_id, .. })) => *request_id,
            other => panic!("the sink first asks Kafka for its group: {other:?}"),
        };
        let tp = processes.kafka.log_end_offsets()[0].0;
        let mut ctx = Ctx::new(SimTime::ZERO, Node::Sink, &mut outbox);
        // No committed offset and `auto.offset.reset=none`: NoOffsetForPartitionException.
        let reply = KafkaReply::Group { committed: Vec::new(), partitions: vec![(tp, None)] };
        processes.sink.on_message(&mut ctx, Node::Kafka, Msg::KafkaReply { request_id, reply });
        let evidence = evidence();
        match decide(&processes, settled(&evidence)) {
            Acceptance::Ended(RunEnd::SinkFailed { failure }) => {
                assert!(failure.contains("NoOffsetForPartitionException"), "{failure}")
            }
            other => panic!("expected the sink's failure, got {other:?}"),
        }
    }

    #[test]
    fn a_caught_up_pipeline_reaches_the_boundary_and_only_then() {
        let world = caught_up_world();
        let processes = &world.processes;
        let evidence = &world.checkers.evidence;
        let ends = processes.kafka.log_end_offsets();
        assert!(ends.iter().any(|(_, end)| *end > 0), "the snapshot reached Kafka: {ends:?}");
        assert_eq!(decide(processes, settled(evidence)), Acceptance::Ended(RunEnd::CaughtUp));
        // Each thing that holds the boundary back.
        assert_eq!(decide(processes, Circumstances { held: true, ..settled(evidence) }), Acceptance::Pending);
        assert_eq!(decide(processes, Circumstances { connect_up: false, ..settled(evidence) }), Acceptance::Pending);
        let processed = processes.connect.processed_upto().expect("streaming");
        let later = Lsn(processed.0 + 0x100);
        let behind = |stream_start| Circumstances {
            held: false,
            connect_up: true,
            stream_start,
            evidence,
            last_captured_commit: move |_| Some(later),
        };
        assert_eq!(decide(processes, behind(None)), Acceptance::Pending);
        // The timed lens's forwarded stream: decoding began at `later`, past every commit the
        // connector had not processed (there are none here, so all of them are in Kafka).
        assert_eq!(decide(processes, behind(Some(later))), Acceptance::Ended(RunEnd::CaughtUp));
    }

    /// Before 1.3 the offset never holds a commit's end (the pgoutput decoder passed no COMMIT
    /// on): a pipeline that has streamed a change still reaches the boundary, once the task has
    /// read the COMMIT of the last captured transaction; 3.7 for contrast.
    #[test]
    fn a_pre_1_3_pipeline_that_streamed_a_change_reaches_the_boundary() {
        for version in [(1, 0), (1, 2), (3, 7)] {
            let mut spec = spec();
            spec.debezium.version = version;
            let world = walk_to_boundary(&spec, true);
            let evidence = &world.checkers.evidence;
            let streamed = evidence.oracle.commits.iter().flat_map(|commit| &commit.txn.changes).any(|change| {
                evidence.published.has_change(change.lsn, (change.table, change.key), change.kind.after())
            });
            assert!(streamed, "Debezium {version:?}: a scripted change was streamed to Kafka");
            let last = world.processes.pg1.last_commit_touching(&spec.debezium.tables).expect("a captured commit");
            let processed = world.processes.connect.processed_upto().expect("streaming");
            assert!(processed >= last, "Debezium {version:?}: processed {processed} reaches the last commit {last}");
            assert_eq!(decide(&world.processes, settled(evidence)), Acceptance::Ended(RunEnd::CaughtUp));
            // And so the model's pre-1.3 skip is judged: the stream started at the snapshot's
            // stored LSN, the consistent point, where the first change after the slot's creation
            // starts; it was skipped (`skipFirstFlushRecord`) and never reached Kafka.
            // From 1.3 on nothing is skipped there.
            let gap = world.findings().iter().any(|finding| finding.invariant == Invariant::I1);
            assert_eq!(gap, version < (1, 3), "Debezium {version:?}: the first streamed change skipped");
        }
    }

    /// A connector that never snapshots, streaming with nothing read yet and nothing captured to
    /// wait for, has processed all there is (0/0, the position its stream asked for): the run
    /// reaches the boundary, where the loaded rows no snapshot read are judged missing.
    #[test]
    fn a_stream_without_a_snapshot_that_has_read_nothing_reaches_the_boundary() {
        let mut spec = spec();
        spec.debezium.snapshot_mode = crate::components::connect::debezium::SnapshotMode::NoData;
        spec.scripted.clear();
        let world = walk_to_boundary(&spec, false);
        assert_eq!(world.processes.connect.processed_upto(), Some(Lsn::INVALID), "streaming, nothing read");
        let evidence = &world.checkers.evidence;
        assert_eq!(decide(&world.processes, settled(evidence)), Acceptance::Ended(RunEnd::CaughtUp));
        assert!(world.findings().iter().any(|finding| finding.invariant == Invariant::I1), "the loaded rows");
    }
}
