//! The world: the components composed into one state, with the network as FIFO links between
//! them and time abstracted to "any armed timer may fire next". This is what the exhaustive lens
//! ([`crate::exhaustive::check`]) explores; it drives the very same component code as the timed lens.
//!
//! The world holds the primary (`pg1`, which clients reach as `postgres`), the Connect worker
//! with the Debezium task (and, with a group of two, the second worker `connect-2`), Kafka, the
//! sink, the application, and where the scenario has them the loader and the outbox's consumer.
//! A crash drops the process's volatile state, its timers and the messages in flight to it; the
//! messages it had already sent are still delivered, then its peers hear that the connection was
//! lost. A pause ([`Action::Pause`]) drops nothing: its peers time the worker out.
//!
//! With [`Bounds::reductions`], two reductions cut interleavings that cannot change an outcome:
//! - a request to a server (PostgreSQL, Kafka) is handled as it is sent. Arrival orders at a
//!   server are still every order of the clients' steps, and a request lost with a crashing
//!   client leaves the same durable state as a crash one step earlier, which is explored too.
//!   Replies stay asynchronous.
//! - the sink, and the outbox's consumer where the bound does not crash it, act only when no
//!   other message, timer, transaction or restart is pending (a crash, a pause or an operator's
//!   action may come before or after them). Each reads append-only partition logs in order and
//!   nothing else reads its state, so with one partition and no crash of it its applies (its
//!   side effects) do not depend on when it runs. With several partitions this explores one
//!   consumption order only.

use crate::core::component::{Component, Ctx, Outbox, Timer, TimerRequest};
use crate::core::ids::Node;
use crate::core::lsn::Lsn;
use crate::core::observe::{Observation, TraceEvent};
use crate::core::protocol::{Control, Msg};
use crate::core::shared::{self, CopyOnWrite, Fixed};
use crate::core::time::SimTime;
use crate::judge::acceptance::{self, Acceptance, Circumstances};
use crate::judge::checkers::{Boundary, Checkers, Finding, RunEnd};
use crate::judge::oracle::Oracle;
use crate::scenario::processes::{self, CopyOnWriteHolder, Processes};
use crate::scenario::setup::{self, Options};
use crate::scenario::spec::{Invariant, Spec};
use serde::{Deserialize, Serialize};
use sets::{Fired, Indices, Links, Nodes, Pairs, Timers};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

mod sets;

pub use crate::scenario::schedule::{
    Action, CommitVisibility, CrashWhile, NODES, OperateWhile, Operation, ScriptWhile,
};

/// What travels on a link.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Wire {
    Msg(Msg),
    /// The sender died: the receiver's connection to it is lost.
    Lost,
}

/// Bounds of an exploration.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Bounds {
    /// Processes that may crash, and how many crashes in all.
    pub crashable: Vec<Node>,
    pub crashes: u8,
    /// Connect workers that may pause past their session and `wal_sender_timeout` (a zombie,
    /// [`Action::Pause`]), and how many pauses in all.
    pub pausable: Vec<Node>,
    pub pauses: u8,
    /// How many times each periodic or retry timer may fire (its firing changes counters forever).
    pub periodic_fires: u8,
    /// Timers that never fire in this exploration (their behaviour is outside the bound).
    pub disabled_timers: Vec<Timer>,
    /// What the operator may do by hand, each at most once, and when.
    pub operations: Vec<Operation>,
    pub operate_while: OperateWhile,
    /// When the processes in `crashable` may crash.
    pub crash_while: CrashWhile,
    /// When the scripted transactions may run.
    pub script_while: ScriptWhile,
    /// When a commit becomes visible: with [`CommitVisibility::WithCommitRecord`] PostgreSQL's
    /// [`Timer::CommitVisible`] fires in the step that armed it, never as a step of its own.
    #[serde(default)]
    pub commit_visibility: CommitVisibility,
    /// Whether PostgreSQL's background writer logs RUNNING_XACTS (its timer counted as a
    /// periodic one); off, only slot creation writes them.
    pub bgwriter_running_xacts: bool,
    /// Reductions that keep the explored outcomes while cutting interleavings (see [`World`]).
    pub reductions: bool,
}

/// Timers a bound counts: those that re-arm themselves, and the retries a process makes while a
/// peer is down (each retry opens a new session or request, so an unbounded retry loop would make
/// the state space infinite: a connector retrying while PostgreSQL is down never repeats a state).
fn is_periodic(timer: Timer) -> bool {
    match timer {
        Timer::Task { timer, .. } => sets::PERIODIC_TASK.contains(&timer),
        _ => sets::PERIODIC.contains(&timer),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct World {
    /// The processes (the loader only when the scenario's handoff is a plain read; never a
    /// standby).
    pub processes: Processes<CopyOnWriteHolder>,
    /// What is on its way, per link (each queue shared between states until one changes it).
    links: Links,
    timers: Timers,
    down: Nodes,
    /// Pairs of processes that have talked (a connection exists between them).
    connections: Pairs,
    /// Scripted transactions not run yet, by index.
    scripted_pending: Indices,
    /// Operations not done yet, by their place in `Operation::ALL`.
    operations_pending: Indices,
    pub crashes_left: u8,
    pub pauses_left: u8,
    periodic_fired: Fired,
    pub checkers: CopyOnWrite<Checkers>,
    /// A crash of the Connect worker hit a snapshot that was not recorded complete.
    pub restarted_during_snapshot: bool,
    /// The captured tables (for the acceptance boundary).
    captured: Fixed<Vec<crate::core::ids::TableId>>,
    /// Which invariants the state violates, once asked (a property asks for each invariant).
    verdict: Verdict,
    immediate_requests: bool,
    /// [`CommitVisibility::WithCommitRecord`]: a commit is visible in the step that writes it.
    visible_with_commit_record: bool,
    immediate: Immediate,
    draining_immediate: bool,
    /// When replaying a path for display: every observation, in order. Boxed, as `tally` is:
    /// only a replay has them, and an exploration moves each state several times a step, so
    /// every byte of a world is copied millions of times.
    #[allow(clippy::box_collection)]
    recorded: Option<Box<Vec<TraceEvent>>>,
    /// When deriving a schedule's timing: what happens to every message and timer.
    tally: Option<Box<Tally>>,
}

/// The copies made while rehoming states (see [`World::rehome`]).
#[derive(Default)]
pub struct Copies {
    processes: processes::Copies,
    checkers: shared::Copies<Checkers>,
    wires: shared::Copies<Wire>,
}

impl std::hash::Hash for World {
    /// What tells states apart. Left out, as the same in every state an exploration compares:
    /// the captured tables and whether requests are immediate (fixed by the bound), the
    /// immediate queue (empty between steps), the verdict (a function of the rest), and what
    /// only a replay keeps (`recorded`, `tally`).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.processes.hash(state);
        self.checkers.hash(state);
        self.links.hash(state);
        self.timers.hash(state);
        self.down.hash(state);
        self.connections.hash(state);
        self.scripted_pending.hash(state);
        self.operations_pending.hash(state);
        self.periodic_fired.hash(state);
        state.write_u32(
            u32::from(self.pauses_left) << 9
                | u32::from(self.crashes_left) << 1
                | u32::from(self.restarted_during_snapshot),
        );
    }
}

/// Requests handled as they are sent, during a step (see [`Bounds::reductions`]). Empty between
/// steps, so a copy of a state starts with an empty one (without the work of copying a queue).
#[derive(Debug, Default, PartialEq, Eq)]
struct Immediate(VecDeque<(Node, Node, Wire)>);

impl Clone for Immediate {
    fn clone(&self) -> Immediate {
        debug_assert!(self.0.is_empty(), "a state is copied between steps");
        Immediate::default()
    }
}

/// The invariants a state violates, as bits by `Invariant::ALL`, computed at most once per
/// state (`KNOWN` set once it is). It is a function of the rest of the state, so it takes no
/// part in a state's identity. Two threads asking at once may both compute it; they store the
/// same bits.
#[derive(Debug, Default)]
struct Verdict(AtomicU64);

impl Verdict {
    const KNOWN: u64 = 1 << 63;
}

impl Clone for Verdict {
    fn clone(&self) -> Verdict {
        Verdict(AtomicU64::new(self.0.load(Ordering::Relaxed)))
    }
}

impl PartialEq for Verdict {
    fn eq(&self, _: &Verdict) -> bool {
        true
    }
}

impl Eq for Verdict {}

impl std::hash::Hash for Verdict {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

/// When each message of a path is delivered and each timer fires, by step: what the timed lens
/// needs to follow the path ([`World::timing`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Timing {
    /// Per link, for each message (or lost-connection notice) put on it, in order: the step that
    /// delivers it, or `None` when it is dropped with its receiver or still in flight at the end.
    pub deliveries: BTreeMap<(Node, Node), Vec<Option<usize>>>,
    /// Per timer: the steps at which it fires, in order.
    pub firings: BTreeMap<(Node, Timer), Vec<usize>>,
    /// Processes down when the path ends.
    pub down_at_end: Vec<Node>,
    /// Scripted transactions not run by the path.
    pub scripts_not_run: Vec<usize>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Tally {
    timings: Timing,
    /// The step being taken.
    step: usize,
    /// Per link: the numbers of the messages on it, oldest first.
    in_flight: BTreeMap<(Node, Node), VecDeque<usize>>,
}

impl Tally {
    fn enqueued(&mut self, from: Node, to: Node) {
        let items = self.timings.deliveries.entry((from, to)).or_default();
        items.push(None);
        self.in_flight.entry((from, to)).or_default().push_back(items.len() - 1);
    }

    fn delivered(&mut self, from: Node, to: Node) {
        if let Some(item) = self.in_flight.get_mut(&(from, to)).and_then(VecDeque::pop_front) {
            self.timings.deliveries.get_mut(&(from, to)).expect("enqueued")[item] = Some(self.step);
        }
    }

    fn dropped_to(&mut self, node: Node) {
        for ((_, to), items) in &mut self.in_flight {
            if *to == node {
                items.clear();
            }
        }
    }
}

thread_local! {
    /// Outboxes for [`World::with`] to reuse.
    static OUTBOXES: std::cell::RefCell<Vec<Outbox>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl World {
    /// The world of a scenario at its start (the exhaustive lens ignores triggers and timed
    /// workload: scripted transactions may run at any point).
    pub fn new(spec: &Spec, bounds: &Bounds) -> World {
        // Keep-alives reach the bound only where a consumer acts on them (`setup::build` turns
        // them on only when the JDBC driver confirms keep-alive LSNs, DBZ-7533): every other bound
        // keeps its size.
        let system = setup::build(spec, 0, World::options(bounds));
        let mut world = World {
            processes: system.processes.hold(),
            links: Links::default(),
            timers: Timers::default(),
            down: Nodes::default(),
            connections: Pairs::default(),
            scripted_pending: Indices::upto(spec.scripted.len()),
            operations_pending: {
                let mut pending = Indices::default();
                for operation in &bounds.operations {
                    pending.insert(operation.index());
                }
                pending
            },
            crashes_left: bounds.crashes,
            pauses_left: bounds.pauses,
            periodic_fired: Fired::default(),
            checkers: CopyOnWrite::new(
                Checkers::new(Oracle::new(&system.initial_rows), spec.sink_tables())
                    .named(crate::judge::narrate::Names::of(spec))
                    .snapshot_mode(spec.debezium.snapshot_mode)
                    .messages(&spec.debezium)
                    .added_tables(&spec.debezium)
                    .outbox(spec)
                    .exactly_once(spec.connect.exactly_once())
                    .compaction(spec.kafka.compaction, spec.sink.null_values),
            ),
            restarted_during_snapshot: false,
            captured: Fixed::new(spec.debezium.tables.clone()),
            verdict: Verdict::default(),
            immediate_requests: bounds.reductions,
            visible_with_commit_record: bounds.commit_visibility == CommitVisibility::WithCommitRecord,
            immediate: Immediate::default(),
            draining_immediate: false,
            recorded: None,
            tally: None,
        };
        let nodes: Vec<Node> = world.processes.nodes().collect();
        for node in nodes {
            world.with(node, |component, ctx| component.start(ctx));
        }
        world
    }

    /// The options a world builds its processes with: the timed lens replaying a path through
    /// the bound builds them so too.
    pub fn options(bounds: &Bounds) -> Options {
        Options { bgwriter_running_xacts: bounds.bgwriter_running_xacts, walsender_keepalives: true }
    }

    /// Gives this state parts of its own (see [`CopyOnWrite::rehome`]), shared with the other states
    /// rehomed with the same `copies`.
    pub fn rehome(&mut self, copies: &mut Copies) {
        self.processes.rehome(&mut copies.processes);
        self.checkers.rehome(&mut copies.checkers);
        self.links.rehome(&mut copies.wires);
    }

    /// Runs one step of a component and routes what it asks for.
    fn with(&mut self, node: Node, f: impl FnOnce(&mut dyn Component, &mut Ctx)) {
        // Outboxes are reused (a step's vectors keep their room for the next step's).
        let mut outbox = OUTBOXES.with(|pool| pool.borrow_mut().pop()).unwrap_or_default();
        {
            let mut ctx = Ctx::new(SimTime::ZERO, node, &mut outbox);
            let node = if node == Node::Postgres { Node::Pg1 } else { node };
            self.processes
                .with_component(node, |component| f(component, &mut ctx))
                .unwrap_or_else(|| panic!("{node} is not part of the exhaustive world"));
        }
        let mut visible_now = false;
        for request in outbox.timers.drain(..) {
            match request {
                TimerRequest::Set { timer: Timer::CommitVisible, .. } if self.visible_with_commit_record => {
                    visible_now = true;
                }
                TimerRequest::Set { timer, .. } => self.timers.insert(node, timer),
                TimerRequest::Cancel { timer } => {
                    self.timers.remove(node, timer);
                }
            }
        }
        for observation in outbox.observations.drain(..) {
            self.observe(TraceEvent { at: SimTime::ZERO, node, observation });
        }
        for (to, msg) in outbox.sends.drain(..) {
            let to = if to == Node::Postgres { Node::Pg1 } else { to };
            if self.down.contains(to) {
                // Connection refused.
                self.enqueue(to, node, Wire::Lost);
                continue;
            }
            self.connections.insert(node, to);
            if self.immediate_requests && to.is_server() && node != to {
                self.immediate.0.push_back((node, to, Wire::Msg(msg)));
            } else {
                self.enqueue(node, to, Wire::Msg(msg));
            }
        }
        OUTBOXES.with(|pool| pool.borrow_mut().push(outbox));
        if visible_now {
            // The commit leaves the proc array in the step that wrote its record (the timed
            // lens following this path fires the timer then too).
            if let Some(tally) = self.tally.as_mut() {
                tally.timings.firings.entry((node, Timer::CommitVisible)).or_default().push(tally.step);
            }
            let visible: fn(&mut dyn Component, &mut Ctx) = |c, ctx| c.on_timer(ctx, Timer::CommitVisible);
            self.with(node, visible);
        }
        if !self.draining_immediate {
            self.draining_immediate = true;
            while let Some((from, to, wire)) = self.immediate.0.pop_front() {
                self.receive(from, to, wire);
            }
            self.draining_immediate = false;
        }
    }

    fn enqueue(&mut self, from: Node, to: Node, wire: Wire) {
        self.links.push(from, to, wire);
        if let Some(tally) = self.tally.as_mut() {
            tally.enqueued(from, to);
        }
    }

    fn receive(&mut self, from: Node, to: Node, wire: Wire) {
        if self.down.contains(to) {
            return;
        }
        let logical = World::logical(from, to);
        match wire {
            Wire::Msg(msg) => self.with(to, |c, ctx| c.on_message(ctx, logical, msg)),
            Wire::Lost => self.with(to, |c, ctx| c.on_connection_lost(ctx, logical)),
        }
    }

    /// How `to` names `from`: clients call the database `postgres`.
    fn logical(from: Node, to: Node) -> Node {
        if from == Node::Pg1 && to != Node::Pg1 { Node::Postgres } else { from }
    }

    pub fn actions(&self, bounds: &Bounds, actions: &mut Vec<Action>) {
        let deferred = |node: Node| bounds.reductions && World::deferred(bounds, node);
        for (from, to, _) in self.links.iter() {
            if !deferred(to) {
                actions.push(Action::Deliver { from, to });
            }
        }
        for (node, timer) in self.timers.iter() {
            if !deferred(node) && self.may_fire(bounds, node, timer) && self.group_timer_may_fire(node, timer) {
                actions.push(Action::Fire { node, timer });
            }
        }
        let may_script = match bounds.script_while {
            ScriptWhile::AnyTime => true,
            ScriptWhile::AfterStreamingStarted => self.checkers.evidence.first_stream_start.is_some(),
        };
        if !self.down.contains(Node::Pg1) && may_script {
            // A step of a named session only when it is its session's next one and the session
            // waits for no answer (the steps of one session in order, sessions interleaved).
            for index in self.scripted_pending.iter() {
                if self.processes.app.may_run_scripted(index, 0) {
                    actions.push(Action::RunScripted { index });
                }
            }
        }
        for node in self.down.iter() {
            actions.push(Action::Restart { node });
        }
        // The sink's turn: when nothing else makes progress. A crash or an operator's action
        // may still come before or after it, so they do not hold the sink back (a crash that
        // never comes must not keep the pipeline from catching up).
        if bounds.reductions && actions.is_empty() {
            for (from, to, _) in self.links.iter() {
                if World::deferred(bounds, to) {
                    actions.push(Action::Deliver { from, to });
                }
            }
            for (node, timer) in self.timers.iter() {
                if World::deferred(bounds, node) && self.may_fire(bounds, node, timer) {
                    actions.push(Action::Fire { node, timer });
                }
            }
        }
        let may_operate = match bounds.operate_while {
            OperateWhile::AnyTime => true,
            OperateWhile::ConnectDown => self.down.contains(Node::Connect),
            OperateWhile::ConnectDownAfterStreaming => {
                self.down.contains(Node::Connect)
                    && self.processes.kafka.source_offsets.values().any(|offset| offset.lsn_proc.is_some())
            }
        };
        if may_operate {
            for index in self.operations_pending.iter() {
                actions.push(Action::Operate { operation: Operation::ALL[index] });
            }
        }
        let may_crash = match bounds.crash_while {
            CrashWhile::AnyTime => true,
            CrashWhile::AfterStreaming => {
                self.processes.kafka.source_offsets.values().any(|offset| offset.lsn_proc.is_some())
            }
        };
        if self.crashes_left > 0 && may_crash {
            for node in &bounds.crashable {
                if !self.down.contains(*node) {
                    actions.push(Action::Crash { node: *node });
                }
            }
        }
        if self.pauses_left > 0 {
            for node in &bounds.pausable {
                if !self.down.contains(*node) && self.processes.has(*node) {
                    actions.push(Action::Pause { node: *node });
                }
            }
        }
    }

    /// The consumers that act only when nothing else makes progress (see [`Bounds::reductions`]):
    /// the sink, and the outbox's consumer where the bound does not crash it.
    fn deferred(bounds: &Bounds, node: Node) -> bool {
        node == Node::Sink || (node == Node::Consumer && !bounds.crashable.contains(&Node::Consumer))
    }

    /// Whether worker `node`'s next heartbeat would be answered with news. The heartbeat thread
    /// sends one at a time (`AbstractCoordinator.HeartbeatThread` waits for the answer): none while
    /// something from Kafka is on its way to the worker.
    fn heartbeat_tells(&self, node: Node) -> bool {
        use crate::components::connect::group::MemberState;
        if self.links.carries(Node::Kafka, node) {
            return false;
        }
        let Some(worker) = self.processes.worker(node) else { return false };
        let Some(member) = worker.membership.0.as_deref() else { return false };
        let (Some(id), MemberState::Stable | MemberState::Syncing) = (member.id, member.state) else {
            return false;
        };
        self.processes.kafka.group.0.as_ref().is_some_and(|group| group.heartbeat_tells(id, member.generation))
    }

    /// Time does not pass in the world: a timer fires to say its deadline came. The group
    /// coordinator's are deadlines of silence, so they come only where the silence is the
    /// bound's: a member's session ends by its timer only when its worker is down or has joined
    /// again as a newer member since (a crash and a restart: the old member is heard from no
    /// more), a live worker's by a pause ([`Action::Pause`], which the bound counts); a join
    /// phase's `rebalance.timeout.ms` only when the members that have not joined are so (the delayed
    /// first join of an empty group, `group.initial.rebalance.delay.ms`, may end at any time).
    fn group_timer_may_fire(&self, node: Node, timer: Timer) -> bool {
        match timer {
            Timer::GroupSession { member } => {
                self.down.contains(member)
                    || self.processes.kafka.group.0.as_ref().is_some_and(|group| group.has_superseded(member))
            }
            // A heartbeat answered "carry on" changes nothing where time does not pass (the
            // session it extends never runs out by itself here): only those that tell the
            // worker to rejoin, or that it is no longer a member, are steps.
            Timer::GroupHeartbeat => self.heartbeat_tells(node),
            // Every member rejoins when a scheduled rebalance's delay ends, the leader among
            // them: where time does not pass, the leader's rejoin is the one that says the
            // delay is over (a follower's alone would find the leader's assignor still waiting,
            // and delay them all again, round after round).
            Timer::GroupRejoin => self
                .processes
                .worker(node)
                .and_then(|w| w.membership.0.as_deref())
                .is_none_or(|member| !member.rejoin_for_delay || member.leader.is_none_or(|leader| leader == node)),
            Timer::GroupCoordinator => self
                .processes
                .kafka
                .group
                .0
                .as_ref()
                .is_none_or(|group| group.deadline_may_pass(|worker| self.down.contains(worker))),
            _ => true,
        }
    }

    /// Whether an armed timer may fire within the bound.
    fn may_fire(&self, bounds: &Bounds, node: Node, timer: Timer) -> bool {
        let exhausted = is_periodic(timer) && self.periodic_fired.get(node, timer) >= bounds.periodic_fires;
        !bounds.disabled_timers.contains(&timer) && !exhausted
    }

    pub fn step(&mut self, action: &Action) {
        self.verdict = Verdict::default();
        match *action {
            Action::Deliver { from, to } => {
                let Some(wire) = self.links.pop(from, to) else {
                    return;
                };
                if let Some(tally) = self.tally.as_mut() {
                    tally.delivered(from, to);
                }
                self.receive(from, to, wire);
            }
            Action::Fire { node, timer } => {
                if self.timers.remove(node, timer) {
                    if let Some(tally) = self.tally.as_mut() {
                        tally.timings.firings.entry((node, timer)).or_default().push(tally.step);
                    }
                    if is_periodic(timer) {
                        self.periodic_fired.count(node, timer);
                    }
                    self.with(node, |c, ctx| c.on_timer(ctx, timer));
                }
            }
            Action::RunScripted { index } => {
                if self.scripted_pending.remove(index) {
                    self.with(Node::App, |c, ctx| {
                        c.on_message(ctx, Node::App, Msg::Control(Control::RunScripted { index }))
                    });
                }
            }
            Action::Pause { node } => {
                self.pauses_left = self.pauses_left.saturating_sub(1);
                self.observe(TraceEvent { at: SimTime::ZERO, node, observation: Observation::PausedPastTimeouts });
                // What the pause looks like from its peers once it has outlasted both timeouts
                // (a peer that is down has nothing to time out); the worker's own state, timers
                // and messages wait for it.
                if !self.down.contains(Node::Kafka) {
                    self.with(Node::Kafka, |c, ctx| {
                        c.on_message(ctx, Node::Kafka, Msg::Control(Control::GroupSessionOutlasted { worker: node }))
                    });
                }
                if !self.down.contains(Node::Pg1) {
                    self.with(Node::Pg1, |c, ctx| {
                        c.on_message(ctx, Node::Pg1, Msg::Control(Control::WalSenderTimeout { client: node }))
                    });
                }
            }
            Action::Crash { node } => {
                self.crashes_left = self.crashes_left.saturating_sub(1);
                if Node::WORKERS.contains(&node) {
                    let stored_complete = self
                        .processes
                        .kafka
                        .source_offsets
                        .values()
                        .any(|offset| offset.snapshot.is_none() || offset.snapshot_is_completed());
                    if !stored_complete {
                        self.restarted_during_snapshot = true;
                    }
                }
                self.processes.with_component(node, |component| component.crash());
                self.down.insert(node);
                self.timers.clear_node(node);
                self.links.clear_to(node);
                if let Some(tally) = self.tally.as_mut() {
                    tally.dropped_to(node);
                }
                for peer in self.connections.peers(node) {
                    self.connections.remove(node, peer);
                    if self.immediate_requests && peer.is_server() {
                        self.receive(node, peer, Wire::Lost);
                    } else {
                        self.enqueue(node, peer, Wire::Lost);
                    }
                }
                self.observe(TraceEvent { at: SimTime::ZERO, node, observation: Observation::crash_of(node) });
            }
            Action::Operate { operation } => {
                if self.operations_pending.remove(operation.index()) {
                    let action = operation.fault();
                    self.observe(TraceEvent {
                        at: SimTime::ZERO,
                        node: Node::Operator,
                        observation: Observation::Fault { action },
                    });
                    let control = match operation {
                        // A bound's operations act on the first connector.
                        Operation::RecreateSlot => Control::RecreateSlot { connector: 0 },
                        Operation::RebuildConnector => Control::Rebuild { connector: 0 },
                        Operation::AdvanceSlot => Control::AdvanceSlot { connector: 0, to: None },
                    };
                    self.with(Node::Operator, |c, ctx| c.on_message(ctx, Node::Operator, Msg::Control(control)));
                }
            }
            Action::Restart { node } => {
                if self.down.remove(node) {
                    self.observe(TraceEvent {
                        at: SimTime::ZERO,
                        node,
                        observation: Observation::Restarted { process: node },
                    });
                    self.with(node, |c, ctx| c.start(ctx));
                }
            }
        }
    }

    fn observe(&mut self, event: TraceEvent) {
        if self.checkers.observes(&event.observation) {
            self.checkers.get_mut().observe(&event);
        } else if cfg!(debug_assertions) {
            let mut checkers = (*self.checkers).clone();
            checkers.observe(&event);
            assert!(
                checkers == *self.checkers,
                "Checkers::observes must list {:?}: the checkers changed on it",
                event.observation
            );
        }
        if let Some(recorded) = self.recorded.as_mut() {
            recorded.push(event);
        }
    }

    /// Replays a path of actions from the start and returns, per action, the observations it
    /// produced: what the narrator prints for a counterexample.
    pub fn replay(spec: &Spec, bounds: &Bounds, actions: &[Action]) -> Vec<(Action, Vec<TraceEvent>)> {
        let mut world = World::new(spec, bounds);
        let mut steps = Vec::new();
        for action in actions {
            world.recorded = Some(Box::default());
            world.step(action);
            steps.push((action.clone(), world.recorded.take().map(|recorded| *recorded).unwrap_or_default()));
        }
        steps
    }

    /// Follows a path from the start, checking that each step can be taken where it is, and
    /// returns when each message is delivered and each timer fires (by step number).
    pub fn timing(spec: &Spec, bounds: &Bounds, actions: &[Action]) -> Result<Timing, (usize, String)> {
        let mut world = World::new(spec, bounds);
        // What the start sent is on its links already: count it.
        let mut tally = Tally::default();
        for (from, to, count) in world.links.iter() {
            for _ in 0..count {
                tally.enqueued(from, to);
            }
        }
        world.tally = Some(Box::new(tally));
        let mut enabled = Vec::new();
        for (index, action) in actions.iter().enumerate() {
            enabled.clear();
            world.actions(bounds, &mut enabled);
            if !enabled.contains(action) {
                let options: Vec<String> = enabled.iter().map(ToString::to_string).collect();
                return Err((
                    index,
                    format!(
                        "`{action}` cannot be taken at step {index}; the steps possible there are: {}",
                        if options.is_empty() { "none".to_string() } else { options.join("; ") }
                    ),
                ));
            }
            world.tally.as_mut().expect("tallying").step = index;
            world.step(action);
        }
        let mut timing = world.tally.take().expect("tallying").timings;
        timing.down_at_end = world.down.iter().collect();
        timing.scripts_not_run = world.scripted_pending.iter().collect();
        Ok(timing)
    }

    /// The state a path ends in.
    pub fn after(spec: &Spec, bounds: &Bounds, actions: &[Action]) -> World {
        let mut world = World::new(spec, bounds);
        for action in actions {
            world.step(action);
        }
        world
    }

    /// The invariants violated in the state a path ends in.
    pub fn violated_after(spec: &Spec, bounds: &Bounds, actions: &[Action]) -> Vec<Invariant> {
        World::after(spec, bounds, actions).violated()
    }

    /// The invariants this state violates, in order.
    pub fn violated(&self) -> Vec<Invariant> {
        let mut violated: Vec<Invariant> = self.findings().iter().map(|finding| finding.invariant).collect();
        violated.sort();
        violated.dedup();
        violated
    }

    /// The last commit connector `c` captures (the first connector's as the checkers see it).
    fn last_captured_commit(&self, c: usize) -> Option<Lsn> {
        if c == 0 {
            let evidence = &self.checkers.evidence;
            return self.processes.pg1.last_captured_event(&self.captured, |prefix| evidence.awaits_message(prefix));
        }
        let debezium = self.processes.connect.connectors[c].debezium;
        self.processes.pg1.last_captured_event(&debezium.tables, |prefix| debezium.awaits_message(prefix))
    }

    /// Whether the pipeline has caught up ([`acceptance::decide`]): nothing in flight, every
    /// scripted transaction run, no process down, the loader's read done, the connector
    /// streaming with everything decoded and acknowledged, the sink at the end of every
    /// partition.
    pub fn at_acceptance_boundary(&self) -> bool {
        self.decide(false) == Acceptance::Ended(RunEnd::CaughtUp)
    }

    /// [`acceptance::decide`] with what the world knows: held by a message in flight, a scripted
    /// transaction not yet run, a process down, the loader's read unfinished, and, with
    /// `operator_holds`, the operator's procedure under way.
    fn decide(&self, operator_holds: bool) -> Acceptance {
        let held = !self.links.is_empty()
            || !self.scripted_pending.is_empty()
            || !self.down.is_empty()
            || self.processes.loader.as_ref().is_some_and(|loader| !loader.is_done())
            || (operator_holds && self.processes.operator.is_busy());
        let circumstances = Circumstances {
            held,
            // A process down holds the run already.
            connect_up: true,
            // The world does not forward a stream's start past what the connector processed.
            stream_start: None,
            evidence: &self.checkers.evidence,
            last_captured_commit: |c| self.last_captured_commit(c),
        };
        acceptance::decide(&self.processes, circumstances)
    }

    /// Whether the pipeline has stopped short of its boundary and says so ([`acceptance::decide`]
    /// ends with [`RunEnd::stopped`]): the connector's task FAILED, the connector STOPPED or the
    /// sink's consumer FAILED, with nothing in flight, nothing scripted left to run and no process
    /// down. What a timed run calls failing closed.
    pub fn stopped_short(&self) -> bool {
        self.stopped_short_by().is_some()
    }

    /// How the pipeline stopped short of its boundary, if it has ([`World::stopped_short`]).
    pub fn stopped_short_by(&self) -> Option<RunEnd> {
        // Most states have a running pipeline: say so before looking at the rest.
        let stopping = self.processes.workers().any(|(_, worker)| {
            matches!(
                worker.status(),
                crate::components::connect::ConnectorState::Failed
                    | crate::components::connect::ConnectorState::Stopped
            )
        }) || self.processes.sink.failed().is_some();
        if !stopping {
            return None;
        }
        // As the timed lens holds a run while the operator's procedure is under way: the
        // connector it stopped is about to be resumed (in a bound, perhaps after more retries
        // than the bound lets its timer fire).
        self.decide(true).ended().filter(RunEnd::stopped)
    }

    /// Findings so far, and at the boundary the boundary checks too.
    pub fn findings(&self) -> Vec<Finding> {
        self.with_findings(<[Finding]>::to_vec)
    }

    /// Reads the findings without copying them (only at the boundary are the checkers copied,
    /// to make the boundary checks).
    fn with_findings<R>(&self, read: impl FnOnce(&[Finding]) -> R) -> R {
        if !self.at_acceptance_boundary() {
            return read(self.checkers.findings());
        }
        let mut checkers = Checkers::clone(&self.checkers);
        checkers.finish(&Boundary {
            at: SimTime::ZERO,
            reached: true,
            reason: "the pipeline caught up".into(),
            end: RunEnd::CaughtUp,
            sink: self.processes.sink.docs.to_list(),
        });
        read(checkers.findings())
    }

    /// A fingerprint of the state (aHash with fixed keys: the same in every run of a build).
    pub fn fingerprint(&self) -> u64 {
        ahash::RandomState::with_seeds(0x73686f72, 0x74657374, 0x70617468, 0x62667321).hash_one(self)
    }

    pub fn violates(&self, invariant: Invariant) -> bool {
        let mut violated = self.verdict.0.load(Ordering::Relaxed);
        if violated & Verdict::KNOWN == 0 {
            violated = self.with_findings(|findings| {
                findings.iter().fold(Verdict::KNOWN, |bits, finding| bits | 1 << invariant_bit(finding.invariant))
            });
            self.verdict.0.store(violated, Ordering::Relaxed);
        }
        violated & (1 << invariant_bit(invariant)) != 0
    }
}

/// An invariant's bit in a [`Verdict`].
fn invariant_bit(invariant: Invariant) -> u32 {
    invariant as u32
}
