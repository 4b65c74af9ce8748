//! The timed lens: one run of a scenario under madsim.
//!
//! Each process is a madsim node ([`crate::node`]) on the run's simulated network ([`crate::net`]:
//! 1–10 ms per message, FIFO per connection), and the clock runs the models' real defaults
//! (`offset.flush.interval.ms`, `poll.interval.ms`, `checkpoint_timeout`, …). The harness — the
//! supervisor outside the modelled system — starts the nodes, injects the scenario's faults and
//! scripted transactions when their triggers come (a simulated time, or a model moment the nodes
//! report), and ends the run at the acceptance boundary: when the pipeline has caught up with the
//! source, or has stopped, or has not caught up within `acceptance.timeout_ms`.
//!
//! Every run also has two limits ([`handoff_models::core::limits`]): its horizon, a simulated time it
//! never passes (`acceptance.horizon_ms`), and its trace budget (trace items, which measure what
//! the run holds in memory). A run that reaches one before its boundary ends there, undecided,
//! and says so: the boundary's reason, a last line of the timeline, [`RunResult::limit`]. Times
//! are added with saturation: a time past the horizon is simply never reached.
//!
//! A run is a function of the scenario and the seed: a fresh madsim runtime seeded with it (the
//! scheduler's choices), the network's latencies and the workload generated from it (ChaCha8), no wall clock, ordered
//! collections throughout.

use crate::net::{Following, Net};
use crate::node::{self, now_ms, now_us};
use futures::StreamExt;
use futures::channel::mpsc;
use futures::future::{Either, select};
use handoff_models::components::connect::ConnectorState;
use handoff_models::core::component::Component;
use handoff_models::core::event::TopicPartition;
use handoff_models::core::fault::FaultOutcome;
use handoff_models::core::ids::{Fnv, Node};
use handoff_models::core::limits;
use handoff_models::core::lsn::Lsn;
use handoff_models::core::observe::{Observation, TraceEvent};
use handoff_models::core::protocol::{Control, Msg, RestRequest};
use handoff_models::core::time::SimTime;
use handoff_models::core::wal::WalEntry;
use handoff_models::exhaustive::world::{Action as WorldAction, World};
use handoff_models::judge::acceptance;
use handoff_models::judge::checkers::honest_liveness;
use handoff_models::judge::checkers::{Boundary, Checkers, Finding, RunEnd};
use handoff_models::judge::coverage::{Coverage, Mark};
use handoff_models::judge::oracle::Oracle;
use handoff_models::judge::record::{HandoffRecord, RecordInputs};
use handoff_models::judge::verdict::{self, Judgement};
use handoff_models::scenario::faults;
use handoff_models::scenario::processes::{Holder, Process, Processes};
use handoff_models::scenario::setup::{self, Options, System};
use handoff_models::scenario::spec::{Fault, FaultAction, Invariant, Moment, Spec, Trigger};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How often the harness looks whether the pipeline has caught up.
const ACCEPTANCE_CHECK_INTERVAL_MS: u64 = 500;

/// How long the operator waits before repeating a request a process that is down refused.
const REQUEST_RETRY_MS: u64 = 1_000;

/// Something the harness does when a trigger comes.
#[derive(Clone, Debug)]
enum Action {
    Fault(FaultAction),
    Scripted(usize),
}

#[derive(Clone, Debug)]
struct PendingTrigger {
    moment: Moment,
    occurrence: u32,
    plus_ms: u64,
    action: Action,
}

/// What the harness is told by the nodes.
enum Command {
    /// A moment trigger fired at `at_ms`: run the action then.
    Run { at_ms: u64, action: Action },
    /// The trace has just passed the run's budget: end the run now.
    OverBudget,
}

/// How the timed lens holds a component: behind a lock, shared by the process's madsim node
/// (which drives it) and the harness (which crashes it and reads it to judge the run).
#[derive(Clone, Copy, Debug)]
pub struct Locked;

impl Holder for Locked {
    type Of<C: Process> = Arc<Mutex<C>>;
    type Handle = Arc<Mutex<dyn Component + Send>>;
    fn hold<C: Process>(component: C) -> Arc<Mutex<C>> {
        Arc::new(Mutex::new(component))
    }
    fn with<C: Process, R>(held: &mut Arc<Mutex<C>>, f: impl FnOnce(&mut dyn Component) -> R) -> R {
        f(&mut *held.lock().expect("a component's lock"))
    }
    fn read<C: Process, R>(held: &Arc<Mutex<C>>, f: impl FnOnce(&C) -> R) -> R {
        f(&held.lock().expect("a component's lock"))
    }
    fn handle<C: Process>(held: &Arc<Mutex<C>>) -> Arc<Mutex<dyn Component + Send>> {
        held.clone()
    }
}

/// The processes of one run, shared between their nodes and the harness.
pub type Models = Processes<Locked>;

/// Everything a run's observations go to, as they happen: the trace hash, the checkers, the
/// coverage marks, and (when asked for) the trace itself.
struct Recorder {
    trace: Option<Vec<TraceEvent>>,
    hasher: Fnv,
    events: usize,
    /// Trace items so far ([`Observation::trace_items`]), and the run's budget of them.
    items: u64,
    max_items: u64,
    checkers: Checkers,
    coverage: Coverage,
    /// Faults that did not take effect at once: refused, or waiting their turn.
    fault_notes: Vec<FaultNote>,
    /// Where the server began decoding for the connector's latest stream: a request below the
    /// slot's `confirmed_flush` is forwarded to it, and nothing committed before it will come.
    stream_start: Option<Lsn>,
}

/// A fault that did not simply take effect when it came (kept in sweeps too: it explains a run).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FaultNote {
    pub at_ms: u64,
    /// The fault, or the operator's procedure, as the timeline names it.
    pub fault: String,
    /// `refused` (it did nothing) or `waited` (it ran once the procedure before it ended).
    pub outcome: FaultOutcome,
    pub reason: String,
}

impl std::fmt::Display for FaultNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {}: {} ({})", self.fault, SimTime(self.at_ms), self.outcome, self.reason)
    }
}

impl Recorder {
    fn new(trace: Option<Vec<TraceEvent>>, checkers: Checkers, max_items: u64) -> Recorder {
        Recorder {
            trace,
            hasher: Fnv::new(),
            events: 0,
            items: 0,
            max_items,
            checkers,
            coverage: Coverage::default(),
            fault_notes: Vec::new(),
            stream_start: None,
        }
    }

    /// Records an event; returns whether this event took the trace past its budget.
    fn record(&mut self, event: TraceEvent) -> bool {
        event.hash(&mut self.hasher);
        self.events += 1;
        let before = self.items;
        self.items = before.saturating_add(event.observation.trace_items());
        self.checkers.observe(&event);
        self.coverage.observe(&event);
        match &event.observation {
            Observation::StreamStarted { client: Node::Connect, start, .. } => self.stream_start = Some(*start),
            Observation::FaultRefused { action, reason } => self.fault_notes.push(FaultNote {
                at_ms: event.at.ms(),
                fault: action.to_string(),
                outcome: FaultOutcome::Refused,
                reason: reason.clone(),
            }),
            Observation::OperatorWaits { procedure, behind } => self.fault_notes.push(FaultNote {
                at_ms: event.at.ms(),
                fault: procedure.clone(),
                outcome: FaultOutcome::Waited,
                reason: format!("{behind} was under way; it ran when that ended"),
            }),
            _ => {}
        }
        if let Some(trace) = self.trace.as_mut() {
            trace.push(event);
        }
        before <= self.max_items && self.items > self.max_items
    }
}

/// State shared by the nodes and the harness of one run.
pub struct Shared {
    recorder: Mutex<Recorder>,
    primary: Mutex<Node>,
    net: Mutex<Net>,
    moments: Mutex<MomentState>,
    commands: mpsc::UnboundedSender<Command>,
}

struct MomentState {
    counts: BTreeMap<Moment, u32>,
    pending: Vec<PendingTrigger>,
}

impl Shared {
    /// The run's network.
    pub fn net(&self) -> MutexGuard<'_, Net> {
        self.net.lock().expect("net")
    }

    /// The physical node behind the database service name.
    pub fn primary(&self) -> Node {
        *self.primary.lock().expect("primary")
    }

    /// Hands a message to a process; returns it if the process has no inbox (it is down, or
    /// restarted and not yet running).
    fn inject(&self, node: Node, from: Node, msg: Msg) -> Option<Msg> {
        self.net().inject(node, from, msg, now_us()).err()
    }

    fn push(&self, at: SimTime, node: Node, observation: Observation) {
        let over_budget = self.recorder.lock().expect("recorder").record(TraceEvent { at, node, observation });
        if over_budget {
            let _ = self.commands.unbounded_send(Command::OverBudget);
        }
    }

    /// Records a step's observations; fires moment triggers. Returns whether a fault takes the
    /// recording node at this instant (it must not act again).
    pub fn record(&self, node: Node, at: SimTime, observations: Vec<Observation>) -> bool {
        let mut halt = false;
        for observation in observations {
            let moment = observation.moment();
            self.push(at, node, observation);
            let Some(moment) = moment else { continue };
            let mut moments = self.moments.lock().expect("moments");
            let count = {
                let count = moments.counts.entry(moment).or_insert(0);
                *count += 1;
                *count
            };
            let (fired, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut moments.pending)
                .into_iter()
                .partition(|trigger| trigger.moment == moment && trigger.occurrence == count);
            moments.pending = waiting;
            drop(moments);
            if fired.is_empty() {
                continue;
            }
            self.push(at, node, Observation::Moment { name: moment.name().into() });
            for trigger in fired {
                if trigger.plus_ms == 0 && takes_down(&trigger.action, node) {
                    halt = true;
                }
                let at_ms = at.plus_ms(trigger.plus_ms).ms();
                let _ = self.commands.unbounded_send(Command::Run { at_ms, action: trigger.action });
            }
        }
        halt
    }
}

/// Whether an action kills this node.
fn takes_down(action: &Action, node: Node) -> bool {
    matches!(
        (action, node),
        (Action::Fault(FaultAction::KillConnectWorker { .. }), Node::Connect)
            | (Action::Fault(FaultAction::CrashPostgres { .. } | FaultAction::FailOverToStandby { .. }), Node::Pg1)
    )
}

/// What a run keeps beyond its findings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// Keep the whole trace (for the narrated timeline); a sweep does not.
    pub keep_trace: bool,
    /// Build the handoff record.
    pub build_record: bool,
    /// The trace budget: the run ends when its trace passes this many items
    /// ([`limits::MAX_TRACE_ITEMS`]; tests lower it).
    pub max_trace_items: u64,
}

impl RunOptions {
    /// Everything, for `handoff run`.
    pub const FULL: RunOptions =
        RunOptions { keep_trace: true, build_record: true, max_trace_items: limits::MAX_TRACE_ITEMS };
    /// Findings, coverage and the trace hash only, for sweeps.
    pub const SWEEP: RunOptions =
        RunOptions { keep_trace: false, build_record: false, max_trace_items: limits::MAX_TRACE_ITEMS };
}

/// A limit a run reached before its acceptance boundary; it ended there, undecided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunLimit {
    /// Its horizon, `acceptance.horizon_ms`.
    Horizon { horizon_ms: u64 },
    /// Its trace budget: the trace had `items` trace items, more than `budget`.
    TraceBudget { items: u64, budget: u64 },
}

impl std::fmt::Display for RunLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunLimit::Horizon { horizon_ms } => {
                write!(f, "its horizon ({}, acceptance.horizon_ms = {horizon_ms})", SimTime(*horizon_ms))
            }
            RunLimit::TraceBudget { items, budget } => write!(
                f,
                "its trace budget ({items} trace items, events and the records they carry, past the {budget} a run \
                 may hold)"
            ),
        }
    }
}

/// The result of one run.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub seed: u64,
    /// The fault schedule the run used: the explicit faults, then the generated ones.
    pub schedule: Vec<Fault>,
    /// The trace (empty unless kept).
    pub trace: Vec<TraceEvent>,
    /// How many events the trace had.
    pub events: usize,
    pub findings: Vec<Finding>,
    pub record: Option<HandoffRecord>,
    pub boundary: Boundary,
    pub trace_hash: u64,
    pub sim_time_ms: u64,
    /// The coverage marks the run reached.
    pub coverage: BTreeSet<Mark>,
    /// Triggers that never fired (their moment never came).
    pub unfired: Vec<String>,
    /// Faults refused where the run stood, or that waited their turn.
    pub fault_notes: Vec<FaultNote>,
    /// Where the run did not follow its scenario's `[schedule]` (empty when it did, or has none).
    pub departures: Vec<String>,
    /// The trace's size in trace items ([`Observation::trace_items`]): what the run held.
    pub trace_items: u64,
    /// The limit the run reached before its boundary, if any: it ended there, undecided.
    pub limit: Option<RunLimit>,
    /// How the pipeline stopped short of its boundary, if it failed closed.
    pub failed_closed: Option<FailedClosed>,
    /// The prediction set against the run's findings and end ([`verdict::judge`]).
    pub judgement: Judgement,
    /// Whether the findings and the end are what the prediction says (never, for a run cut by a
    /// limit).
    pub prediction_held: bool,
}

/// A run that failed closed: it ended short of its acceptance boundary, within its limits, with the
/// connector not RUNNING (its task FAILED, or the connector STOPPED, or not running at all) — it
/// stopped instead of going on wrong, and says so (a connector that says RUNNING and does not catch
/// up is I11, not this). Its pipeline never caught up: whatever the sink holds then is where it
/// stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailedClosed {
    /// When the connector stopped for the last time (its task's failure or stop, where the run
    /// kept its trace; else when the run ended).
    pub at: SimTime,
    /// The connector's status at the end (`FAILED`, `STOPPED`, …).
    pub status: ConnectorState,
    /// Why the run ended there, in the boundary's words.
    pub reason: String,
}

impl RunResult {
    pub fn violated(&self) -> Vec<Invariant> {
        let mut invariants: Vec<Invariant> = self.findings.iter().map(|f| f.invariant).collect();
        invariants.sort();
        invariants.dedup();
        invariants
    }
}

/// Sets the scenario's prediction against a run's findings and whether it failed closed.
pub fn judge(spec: &Spec, findings: &[Finding], failed_closed: bool) -> Judgement {
    let violated: Vec<Invariant> = findings.iter().map(|f| f.invariant).collect();
    verdict::judge(&spec.prediction, &violated, Some(failed_closed))
}

/// The trace hash: FNV-1a over every event, in order.
pub fn trace_hash(trace: &[TraceEvent]) -> u64 {
    let mut hasher = Fnv::new();
    for event in trace {
        event.hash(&mut hasher);
    }
    std::hash::Hasher::finish(&hasher)
}

/// Runs a scenario with a seed in a fresh madsim runtime, keeping everything.
pub fn run(spec: &Spec, seed: u64) -> RunResult {
    run_with(spec, seed, RunOptions::FULL)
}

/// Runs a scenario with a seed in a fresh madsim runtime.
pub fn run_with(spec: &Spec, seed: u64, options: RunOptions) -> RunResult {
    let runtime = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    let spec_for_run = spec.clone();
    let outcome = runtime.block_on(async move { harness(spec_for_run, seed, options).await });
    drop(runtime);
    finish(spec, seed, options, outcome)
}

struct Outcome {
    recorder: Recorder,
    schedule: Vec<Fault>,
    boundary: Boundary,
    limit: Option<RunLimit>,
    /// Set when the pipeline said it was running and did not catch up (I11).
    liveness: Option<Finding>,
    /// Set when the pipeline stopped short of its boundary with the connector not running.
    failed_closed: Option<FailedClosed>,
    sink_checkpoint: BTreeMap<TopicPartition, u64>,
    unfired: Vec<String>,
    departures: Vec<String>,
}

fn finish(spec: &Spec, seed: u64, options: RunOptions, outcome: Outcome) -> RunResult {
    let Outcome {
        mut recorder,
        schedule,
        boundary,
        limit,
        liveness,
        mut failed_closed,
        sink_checkpoint,
        unfired,
        departures,
    } = outcome;
    recorder.checkers.finish(&boundary);
    let mut findings = recorder.checkers.findings().to_vec();
    findings.extend(liveness);
    if boundary.reached {
        recorder.coverage.marks.insert(Mark::AcceptanceReached);
    }
    let trace = recorder.trace.take().unwrap_or_default();
    if let Some(stopped) = &mut failed_closed {
        // The moment the connector stopped for good, where the trace says it.
        let last_stop = trace.iter().rev().find(|event| match &event.observation {
            Observation::TaskFailed { .. } => stopped.status == ConnectorState::Failed,
            Observation::TaskStopped { .. } => stopped.status != ConnectorState::Failed,
            _ => false,
        });
        if let Some(event) = last_stop {
            stopped.at = event.at;
        }
    }
    let judgement = judge(spec, &findings, failed_closed.is_some());
    let record = options.build_record.then(|| {
        HandoffRecord::build(&RecordInputs {
            spec,
            seed,
            trace: &trace,
            oracle: &recorder.checkers.evidence.oracle,
            boundary: &boundary,
            sink_checkpoint,
        })
    });
    RunResult {
        seed,
        schedule,
        trace_hash: recorder.hasher.finish(),
        events: recorder.events,
        sim_time_ms: boundary.at.ms(),
        prediction_held: limit.is_none() && judgement.held(),
        judgement,
        failed_closed,
        trace_items: recorder.items,
        limit,
        findings,
        record,
        boundary,
        trace,
        coverage: recorder.coverage.marks,
        fault_notes: std::mem::take(&mut recorder.fault_notes),
        unfired,
        departures,
    }
}

fn spawn_node(
    handle: &madsim::runtime::Handle,
    node: Node,
    model: Arc<Mutex<dyn Component + Send>>,
    shared: Arc<Shared>,
) -> madsim::runtime::NodeHandle {
    handle
        .create_node()
        .name(node.name())
        .ip(node::ip(node))
        .init(move || node::run(node, model.clone(), shared.clone()))
        .build()
}

async fn sleep_until_ms(at_ms: u64) {
    let now = now_ms();
    if at_ms > now {
        madsim::time::sleep(Duration::from_millis(at_ms - now)).await;
    }
}

/// What a harness step is, for people (a step left when the run ended).
fn describe_step(spec: &Spec, step: &HarnessStep) -> String {
    match step {
        HarnessStep::StartConnect => "the Connect worker's start".into(),
        HarnessStep::Action(action) => describe_action(spec, action),
        HarnessStep::Restart(node) => format!("the restart of {node}"),
        HarnessStep::Promote => "the standby's promotion".into(),
        HarnessStep::Inject { to, .. } => format!("a request to {to}"),
        HarnessStep::Unclog(a, b) => format!("the end of the clog {a} <-> {b}"),
        HarnessStep::Crash(node) => format!("crash {node}"),
        HarnessStep::ScheduleEnd => "the end of the schedule".into(),
    }
}

fn describe_action(spec: &Spec, action: &Action) -> String {
    match action {
        Action::Fault(fault) => fault.to_string(),
        Action::Scripted(index) => match spec.scripted.get(*index).map(|txn| txn.label.as_str()) {
            Some(label) if !label.is_empty() => format!("scripted transaction {index} ({label})"),
            _ => format!("scripted transaction {index}"),
        },
    }
}

async fn harness(spec: Spec, seed: u64, options: RunOptions) -> Outcome {
    // A scenario with a `[schedule]` runs its bound's world (as `handoff check` builds it, from
    // seed 0 and without the bgwriter's running-xacts records, as the exhaustive lens does) and
    // follows the path.
    let (spec, path) = match &spec.schedule {
        Some(schedule) => {
            let (world, bounds) = crate::check::bound(&spec).expect("a scheduled scenario has a [check] bound");
            let timing = World::timing(&world, &bounds, &schedule.steps).expect("the loader checked the path");
            (world, Some((schedule.clone(), timing)))
        }
        None => (spec, None),
    };
    let (build_seed, build_options) = match path {
        Some(_) => (0, Options { bgwriter_running_xacts: false, walsender_keepalives: false }),
        None => (seed, Options::default()),
    };
    let System { processes, initial_rows, connect_start_ms } = setup::build(&spec, build_seed, build_options);
    let schedule = faults::schedule(&spec, seed);
    let models: Models = processes.hold();
    let (commands_tx, mut commands_rx) = mpsc::unbounded();
    // Absolute triggers are scheduled now; moment triggers wait in the shared state.
    let mut scheduled: BTreeMap<(u64, u64), HarnessStep> = BTreeMap::new();
    let mut pending = Vec::new();
    let mut sequence = 0u64;
    let triggers = schedule
        .iter()
        .map(|fault| (fault.trigger, Action::Fault(fault.action)))
        .chain(spec.scripted.iter().enumerate().map(|(index, txn)| (txn.trigger, Action::Scripted(index))))
        .filter(|_| path.is_none());
    for (trigger, action) in triggers {
        match trigger {
            Trigger::At { at_ms } => {
                sequence += 1;
                scheduled.insert((at_ms, sequence), HarnessStep::Action(action));
            }
            Trigger::After { moment, occurrence, plus_ms } => {
                pending.push(PendingTrigger { moment, occurrence, plus_ms, action });
            }
        }
    }
    let recorder = Recorder::new(
        options.keep_trace.then(|| Vec::with_capacity(4096)),
        Checkers::new(Oracle::new(&initial_rows), spec.debezium.tables.clone())
            .named(handoff_models::judge::narrate::Names::of(&spec))
            .snapshot_mode(spec.debezium.snapshot_mode),
        options.max_trace_items,
    );
    let mut net = Net::new(seed, madsim::time::TimeHandle::current());
    if let Some((schedule, timing)) = &path {
        net.follow(Following::new(timing, schedule.step_ms, schedule.steps.len()));
    }
    let shared = Arc::new(Shared {
        recorder: Mutex::new(recorder),
        primary: Mutex::new(Node::Pg1),
        net: Mutex::new(net),
        moments: Mutex::new(MomentState { counts: BTreeMap::new(), pending }),
        commands: commands_tx,
    });
    let handle = madsim::runtime::Handle::current();
    let mut nodes = BTreeMap::new();
    // The servers first; on a path, the clients start a millisecond after the servers, so that
    // none of them finds a server not yet listening (in the world, every process is there from
    // the start). The Connect worker starts at `connector_start_ms`.
    let at_start = [Node::Kafka, Node::Pg1, Node::Pg2, Node::Sink, Node::App, Node::Operator, Node::Loader]
        .into_iter()
        .filter(|node| path.is_none() || !matches!(node, Node::Sink | Node::App));
    for node in at_start {
        if let Some(model) = models.handle(node) {
            nodes.insert(node, spawn_node(&handle, node, model, shared.clone()));
        }
    }
    let mut harness = Harness {
        spec: &spec,
        models: &models,
        shared: shared.clone(),
        handle,
        nodes,
        down: BTreeSet::new(),
        scheduled,
        sequence,
        following: path.is_some(),
    };
    // The world starts every process at once.
    let connect_start_ms = if path.is_some() { 1 } else { connect_start_ms };
    harness.schedule(connect_start_ms, HarnessStep::StartConnect);
    if let Some((schedule, timing)) = &path {
        for (index, step) in schedule.steps.iter().enumerate() {
            let at_ms = (index as u64 + 1).saturating_mul(schedule.step_ms);
            match *step {
                WorldAction::RunScripted { index } => {
                    harness.schedule(at_ms, HarnessStep::Action(Action::Scripted(index)))
                }
                WorldAction::Crash { node } => harness.schedule(at_ms, HarnessStep::Crash(node)),
                WorldAction::Restart { node } => harness.schedule(at_ms, HarnessStep::Restart(node)),
                WorldAction::Operate { operation } => {
                    harness.schedule(at_ms, HarnessStep::Action(Action::Fault(operation.fault())))
                }
                // The network and the nodes' timers follow these.
                WorldAction::Deliver { .. } | WorldAction::Fire { .. } => {}
            }
        }
        // After the path: what it left down comes back, what it did not run runs, and the run
        // goes on as usual.
        let end_ms = (schedule.steps.len() as u64 + 1).saturating_mul(schedule.step_ms);
        harness.schedule(end_ms, HarnessStep::ScheduleEnd);
        for node in &timing.down_at_end {
            harness.schedule(end_ms, HarnessStep::Restart(*node));
        }
        for index in &timing.scripts_not_run {
            harness.schedule(end_ms, HarnessStep::Action(Action::Scripted(*index)));
        }
    }

    let horizon_ms = spec.acceptance.horizon_ms;
    let mut last_activity_ms = 0u64;
    let (reached, reason, limit) = loop {
        // Run what is due.
        let now = now_ms();
        while let Some((&(at_ms, seq), _)) = harness.scheduled.iter().next() {
            if at_ms > now {
                break;
            }
            let step = harness.scheduled.remove(&(at_ms, seq)).expect("present");
            harness.run_step(step, now);
            last_activity_ms = now;
        }
        let workload_done = models.app.lock().expect("app").timed_done()
            && models.loader.as_ref().is_none_or(|loader| loader.lock().expect("loader").is_done());
        // The processes act on what the harness just did before anything is judged.
        if workload_done && harness.scheduled.is_empty() && now > last_activity_ms {
            if let Some((reached, reason)) = harness.acceptance() {
                break (reached, reason, None);
            }
            if now.saturating_sub(last_activity_ms) > spec.acceptance.timeout_ms {
                break (false, harness.stuck_reason(spec.acceptance.timeout_ms, last_activity_ms), None);
            }
        } else {
            last_activity_ms = last_activity_ms.max(now);
        }
        if now >= horizon_ms {
            let limit = RunLimit::Horizon { horizon_ms };
            break (false, harness.limit_reason(limit), Some(limit));
        }
        // Wait for the next scheduled step, a command from a node, the next check, or the horizon.
        let next_check = now.saturating_add(ACCEPTANCE_CHECK_INTERVAL_MS).min(horizon_ms);
        let wake_at = harness.scheduled.keys().next().map_or(next_check, |(at, _)| (*at).min(next_check));
        let sleep = sleep_until_ms(wake_at);
        futures::pin_mut!(sleep);
        match select(commands_rx.next(), sleep).await {
            Either::Left((Some(Command::Run { at_ms, action }), _)) => {
                harness.sequence += 1;
                harness.scheduled.insert((at_ms, harness.sequence), HarnessStep::Action(action));
            }
            Either::Left((Some(Command::OverBudget), _)) => {
                let recorder = shared.recorder.lock().expect("recorder");
                let limit = RunLimit::TraceBudget { items: recorder.items, budget: recorder.max_items };
                drop(recorder);
                break (false, harness.limit_reason(limit), Some(limit));
            }
            Either::Left((None, _)) | Either::Right(_) => {}
        }
    };
    let at = SimTime(now_ms());
    let sink_docs = models.sink.lock().expect("sink").docs.to_list();
    let sink_checkpoint = {
        let kafka = models.kafka.lock().expect("kafka");
        kafka
            .groups
            .get(&spec.sink_group)
            .map(|committed| committed.iter().map(|(tp, offset)| (*tp, *offset)).collect())
            .unwrap_or_default()
    };
    let unfired = shared
        .moments
        .lock()
        .expect("moments")
        .pending
        .iter()
        .map(|trigger| {
            let occurrence =
                if trigger.occurrence > 1 { format!("occurrence {} of ", trigger.occurrence) } else { String::new() };
            format!(
                "{}, waiting for {occurrence}the moment {}, which never came",
                describe_action(&spec, &trigger.action),
                trigger.moment.name()
            )
        })
        .chain(harness.scheduled.iter().map(|((at_ms, _), step)| {
            format!("{} due at {}, after the run ended", describe_step(&spec, step), SimTime(*at_ms))
        }))
        .collect();
    // A run cut by a limit is undecided: a pipeline still at work then is no liveness finding.
    let liveness = match limit {
        Some(_) => None,
        None => harness.liveness_finding(reached, &reason, at, spec.acceptance.timeout_ms),
    };
    let failed_closed = (!reached && limit.is_none() && liveness.is_none()).then(|| FailedClosed {
        at,
        status: models.connect.lock().expect("connect").status(),
        reason: reason.clone(),
    });
    // How the run ended, typed: the acceptance check on the state the run ended in (nothing ran
    // since the loop decided), or the limit it reached.
    let end = match limit {
        Some(_) => RunEnd::Limit,
        None => harness
            .decision()
            .ended()
            .unwrap_or_else(|| RunEnd::TimedOut { connector: models.connect.lock().expect("connect").status() }),
    };
    debug_assert_eq!(end.reached(), reached, "the typed end says what the loop decided");
    let departures = shared.net().following().map(Following::departures).unwrap_or_default();
    harness.tear_down().await;
    drop(harness);
    let recorder = {
        let mut recorder = shared.recorder.lock().expect("recorder");
        std::mem::replace(&mut *recorder, Recorder::new(None, Checkers::new(Oracle::new(&[]), Vec::new()), 0))
    };
    Outcome {
        recorder,
        schedule,
        boundary: Boundary { at, reached, reason, end, sink: sink_docs },
        limit,
        liveness,
        failed_closed,
        sink_checkpoint,
        unfired,
        departures,
    }
}

/// What the harness runs at a scheduled time.
#[derive(Clone, Debug)]
enum HarnessStep {
    StartConnect,
    Action(Action),
    Restart(Node),
    Promote,
    Inject {
        to: Node,
        from: Node,
        msg: Msg,
    },
    Unclog(Node, Node),
    /// A path's crash (the exhaustive world's `crash NODE`).
    Crash(Node),
    /// A path has been followed to its end.
    ScheduleEnd,
}

struct Harness<'a> {
    spec: &'a Spec,
    models: &'a Models,
    shared: Arc<Shared>,
    handle: madsim::runtime::Handle,
    nodes: BTreeMap<Node, madsim::runtime::NodeHandle>,
    /// Processes killed and not yet restarted.
    down: std::collections::BTreeSet<Node>,
    scheduled: BTreeMap<(u64, u64), HarnessStep>,
    sequence: u64,
    /// The run follows a `[schedule]`.
    following: bool,
}

impl Harness<'_> {
    fn schedule(&mut self, at_ms: u64, step: HarnessStep) {
        self.sequence += 1;
        self.scheduled.insert((at_ms, self.sequence), step);
    }

    fn observe(&self, node: Node, observation: Observation) {
        self.shared.push(SimTime(now_ms()), node, observation);
    }

    /// Clogs (or unclogs) the network between two physical processes, both ways.
    fn clog(&mut self, a: Node, b: Node, clogged: bool) {
        if !self.nodes.contains_key(&a) || !self.nodes.contains_key(&b) {
            return;
        }
        if clogged { self.shared.net().clog(a, b) } else { self.shared.net().unclog(a, b, now_us()) }
    }

    /// Ends the run's processes so that nothing of the run outlives it. madsim drops a killed
    /// node's tasks when they are next woken; the network wakes every node loop as it closes.
    async fn tear_down(&mut self) {
        for handle in self.nodes.values() {
            self.handle.kill(handle.id());
        }
        self.shared.net().close_all();
        madsim::time::sleep(Duration::from_millis(1)).await;
    }

    /// Kills a running process (a no-op for one that is down or not started).
    fn kill(&mut self, node: Node) {
        let Some(handle) = self.nodes.get(&node) else { return };
        if !self.down.insert(node) {
            return;
        }
        self.handle.kill(handle.id());
        // Its connections and what was on its way to it go with it; the restarted process
        // listens again when it runs.
        self.shared.net().unbind(node, now_us());
        if let Some(model) = self.models.handle(node) {
            model.lock().expect("a component's lock").crash();
        }
    }

    fn run_step(&mut self, step: HarnessStep, now: u64) {
        match step {
            HarnessStep::StartConnect => {
                let late = if self.following { &[Node::Sink, Node::App, Node::Connect][..] } else { &[Node::Connect] };
                for &node in late {
                    if let Some(model) = self.models.handle(node) {
                        self.nodes.insert(node, spawn_node(&self.handle, node, model, self.shared.clone()));
                    }
                }
            }
            HarnessStep::Restart(node) => {
                // Only a process that is down restarts (two overlapping crashes restart it once).
                if self.down.remove(&node)
                    && let Some(handle) = self.nodes.get(&node)
                {
                    self.handle.restart(handle.id());
                    self.observe(node, Observation::Restarted { process: node });
                }
            }
            HarnessStep::Promote => {
                self.shared.inject(Node::Pg2, Node::Operator, Msg::Control(Control::Promote));
                // The service name moves to the new primary; the gate hears of the failover.
                *self.shared.primary.lock().expect("primary") = Node::Pg2;
                self.schedule(
                    now,
                    HarnessStep::Inject {
                        to: Node::Operator,
                        from: Node::Operator,
                        msg: Msg::Control(Control::FailoverHappened),
                    },
                );
            }
            HarnessStep::Inject { to, from, msg } => {
                // A request to a process that is down or still starting (a REST call to a dead
                // worker) is refused: the operator tries again a second later while the process
                // is coming back, so every healed fault heals; one that stays down loses it.
                let refused = if self.down.contains(&to) { Some(msg) } else { self.shared.inject(to, from, msg) };
                let coming_back = !self.down.contains(&to)
                    || self.scheduled.values().any(|step| matches!(step, HarnessStep::Restart(node) if *node == to));
                if let Some(msg) = refused
                    && coming_back
                {
                    self.schedule(now.saturating_add(REQUEST_RETRY_MS), HarnessStep::Inject { to, from, msg });
                }
            }
            HarnessStep::Unclog(a, b) => self.clog(a, b, false),
            HarnessStep::Crash(node) => {
                if self.nodes.contains_key(&node) && !self.down.contains(&node) {
                    // The same observation the exhaustive world makes of a crash.
                    self.observe(node, Observation::crash_of(node));
                    self.kill(node);
                }
            }
            HarnessStep::ScheduleEnd => {}
            HarnessStep::Action(Action::Scripted(index)) => {
                self.shared.inject(Node::App, Node::App, Msg::Control(Control::RunScripted { index }));
            }
            HarnessStep::Action(Action::Fault(fault)) => {
                let target = match fault {
                    FaultAction::KillConnectWorker { .. }
                    | FaultAction::StopConnector { .. }
                    | FaultAction::KillConnectorTask { .. } => Node::Connect,
                    FaultAction::RecreateSlot | FaultAction::RebuildConnector => Node::Operator,
                    FaultAction::CrashPostgres { .. }
                    | FaultAction::FailOverToStandby { .. }
                    | FaultAction::WalBurst { .. }
                    | FaultAction::Checkpoint => self.shared.primary(),
                    FaultAction::Clog { between: (a, _), .. } => a,
                };
                // Kills and requests (REST calls, the task kill) need their process up.
                let needs_process = matches!(
                    fault,
                    FaultAction::KillConnectWorker { .. }
                        | FaultAction::CrashPostgres { .. }
                        | FaultAction::FailOverToStandby { .. }
                        | FaultAction::StopConnector { .. }
                        | FaultAction::KillConnectorTask { .. }
                );
                let absent = !self.nodes.contains_key(&target) || self.down.contains(&target);
                let refused = if target == Node::Connect && !self.nodes.contains_key(&Node::Connect) {
                    Some("the Connect worker has not started yet")
                } else if needs_process && absent {
                    Some(match (fault, target) {
                        (FaultAction::StopConnector { .. }, _) => {
                            "the Connect worker is down: the REST call is refused (connection refused)"
                        }
                        (FaultAction::KillConnectorTask { .. }, _) => "the Connect worker is down: no task runs",
                        (_, Node::Connect) => "the Connect worker is already down",
                        _ => "the primary is already down",
                    })
                } else if matches!(fault, FaultAction::FailOverToStandby { .. })
                    && !(target == Node::Pg1 && self.models.pg2.is_some())
                {
                    Some(if self.models.pg2.is_some() {
                        "no standby is left to promote: pg2 has been the primary since an earlier failover, and the \
                         old primary does not come back"
                    } else {
                        "there is no standby to promote: add [postgres.standby]"
                    })
                } else if let FaultAction::Clog { between: (a, b), .. } = fault
                    && [a, b].iter().any(|node| *node != Node::Postgres && !self.nodes.contains_key(node))
                {
                    Some("one of the two processes is not part of this system")
                } else {
                    None
                };
                if let Some(reason) = refused {
                    self.observe(target, Observation::FaultRefused { action: fault, reason: reason.into() });
                    return;
                }
                self.observe(target, Observation::Fault { action: fault });
                match fault {
                    FaultAction::KillConnectWorker { restart_after_ms } => {
                        if self.nodes.contains_key(&Node::Connect) {
                            self.kill(Node::Connect);
                            if let Some(after) = restart_after_ms {
                                self.schedule(now.saturating_add(after), HarnessStep::Restart(Node::Connect));
                            }
                        }
                    }
                    FaultAction::StopConnector { resume_after_ms } => {
                        self.shared.inject(Node::Connect, Node::Operator, Msg::Rest { request: RestRequest::Stop });
                        if let Some(after) = resume_after_ms {
                            self.schedule(
                                now.saturating_add(after),
                                HarnessStep::Inject {
                                    to: Node::Connect,
                                    from: Node::Operator,
                                    msg: Msg::Rest { request: RestRequest::Resume },
                                },
                            );
                        }
                    }
                    FaultAction::CrashPostgres { restart_after_ms } => {
                        self.kill(target);
                        self.schedule(now.saturating_add(restart_after_ms), HarnessStep::Restart(target));
                    }
                    FaultAction::RecreateSlot => {
                        self.shared.inject(Node::Operator, Node::Operator, Msg::Control(Control::RecreateSlot));
                    }
                    FaultAction::RebuildConnector => {
                        self.shared.inject(Node::Operator, Node::Operator, Msg::Control(Control::Rebuild));
                    }
                    FaultAction::KillConnectorTask { restart_after_ms } => {
                        self.shared.inject(Node::Connect, Node::Operator, Msg::Control(Control::KillTask));
                        if let Some(after) = restart_after_ms {
                            self.schedule(
                                now.saturating_add(after),
                                HarnessStep::Inject {
                                    to: Node::Connect,
                                    from: Node::Operator,
                                    msg: Msg::Rest { request: RestRequest::RestartTask },
                                },
                            );
                        }
                    }
                    FaultAction::WalBurst { bytes } => {
                        self.shared.inject(target, Node::Operator, Msg::Control(Control::WalBurst { bytes }));
                    }
                    FaultAction::Checkpoint => {
                        self.shared.inject(target, Node::Operator, Msg::Control(Control::Checkpoint));
                    }
                    FaultAction::Clog { between: (a, b), duration_ms } => {
                        let physical = |node: Node| if node == Node::Postgres { self.shared.primary() } else { node };
                        let (a, b) = (physical(a), physical(b));
                        self.clog(a, b, true);
                        self.schedule(now.saturating_add(duration_ms), HarnessStep::Unclog(a, b));
                    }
                    FaultAction::FailOverToStandby { promote_after_ms } => {
                        if target == Node::Pg1 && self.models.pg2.is_some() {
                            self.kill(Node::Pg1);
                            self.schedule(now.saturating_add(promote_after_ms), HarnessStep::Promote);
                        }
                    }
                }
            }
        }
    }

    /// The primary's last commit that touched a captured table.
    fn last_captured_commit(&self) -> Option<Lsn> {
        let primary = match self.shared.primary() {
            Node::Pg2 => self.models.pg2.as_ref().expect("pg2 exists").clone(),
            _ => self.models.pg1.clone(),
        };
        let pg = primary.lock().expect("pg");
        pg.durable.wal.entries.iter().rev().find_map(|entry| match entry {
            WalEntry::Txn(txn) if txn.changes.iter().any(|c| self.spec.debezium.tables.contains(&c.table)) => {
                Some(txn.end_lsn)
            }
            _ => None,
        })
    }

    /// `Some((reached, reason))` when the run can end.
    fn acceptance(&self) -> Option<(bool, String)> {
        let end = self.decision().ended()?;
        Some((end.reached(), end.reason().unwrap_or_default()))
    }

    /// Where the run stands ([`acceptance::decide`]), with what this lens knows: an operator's
    /// procedure stops the connector on its way to resuming it; the worker's node may be down;
    /// the connector's stream may have been forwarded past its offset.
    fn decision(&self) -> acceptance::Acceptance {
        let held = self.models.operator.lock().expect("operator").is_busy();
        let recorder = self.shared.recorder.lock().expect("recorder");
        acceptance::decide(
            self.models,
            acceptance::Circumstances {
                held,
                connect_up: self.nodes.contains_key(&Node::Connect),
                stream_start: recorder.stream_start,
                evidence: &recorder.checkers.evidence,
                last_captured_commit: || self.last_captured_commit(),
            },
        )
    }

    /// Why the run ended at a limit, in the words of the boundary's reason.
    fn limit_reason(&self, limit: RunLimit) -> String {
        let status = self.models.connect.lock().expect("connect").status();
        format!(
            "the run reached {limit} before its acceptance boundary (connector {status}); the boundary's checks \
             were not made"
        )
    }

    fn stuck_reason(&self, timeout_ms: u64, last_activity_ms: u64) -> String {
        let connect = self.models.connect.lock().expect("connect");
        format!(
            "the pipeline did not catch up within acceptance.timeout_ms={timeout_ms} after the last fault or \
             transaction at {} (connector {}, {})",
            SimTime(last_activity_ms),
            connect.status(),
            connect
                .debezium_phase()
                .map_or_else(|| "no task running".into(), |phase| format!("its task is {}", phase.describe()))
        )
    }

    /// I11 honest liveness ([`honest_liveness`]).
    fn liveness_finding(&self, reached: bool, reason: &str, at: SimTime, timeout_ms: u64) -> Option<Finding> {
        honest_liveness::check(self.models, &honest_liveness::RunEnded { reached, reason, at, timeout_ms })
    }
}
