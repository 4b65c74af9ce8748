//! The timed lens: one run of a scenario under madsim.
//!
//! Each process is a madsim node ([`crate::timed::node`]) on the run's simulated network ([`crate::timed::net`]:
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

use crate::timed::net::{Following, Net};
use crate::timed::node::{self, now_ms, now_us};
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

mod harness;
pub mod positions;
use harness::harness;
use positions::PositionSample;

/// How often the harness looks whether the pipeline has caught up.
const ACCEPTANCE_CHECK_INTERVAL_MS: u64 = 500;

/// How long the operator waits before repeating a request a process that is down refused.
const REQUEST_RETRY_MS: u64 = 1_000;

/// Something the harness does when a trigger comes.
#[derive(Clone, Debug)]
enum Action {
    /// A fault, the connector it acts on (the place of its `[[connector]]` entry) and the worker
    /// (its place in the group; `None`: the one running the first connector's task).
    Fault(FaultAction, u8, Option<u8>),
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
    /// A worker left its group on a clean shutdown: its process ends now (its connections close).
    Exit(Node),
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
        // A connector's refused fault is noted like the first connector's, with its name.
        let (observation, of_connector) = match &event.observation {
            Observation::OfConnector { connector, observation } => {
                (&**observation, Some(self.checkers.evidence.names.connector(*connector)))
            }
            observation => (observation, None),
        };
        match observation {
            Observation::StreamStarted { client: Node::Connect | Node::Connect2 | Node::Connect3, start, .. }
                if !self.checkers.evidence.of_another_connector(observation) =>
            {
                self.stream_start = Some(*start)
            }
            Observation::FaultRefused { action, reason } => self.fault_notes.push(FaultNote {
                at_ms: event.at.ms(),
                fault: match &of_connector {
                    Some(name) => format!("{action} on connector {name}"),
                    None => action.to_string(),
                },
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
pub struct RunState {
    recorder: Mutex<Recorder>,
    primary: Mutex<Node>,
    net: Mutex<Net>,
    moments: Mutex<MomentState>,
    commands: mpsc::UnboundedSender<Command>,
    /// Processes in a stop-the-world pause, and until when (microseconds).
    paused: Mutex<BTreeMap<Node, u64>>,
}

struct MomentState {
    counts: BTreeMap<Moment, u32>,
    pending: Vec<PendingTrigger>,
}

impl RunState {
    /// The run's network.
    pub fn net(&self) -> MutexGuard<'_, Net> {
        self.net.lock().expect("net")
    }

    /// The physical node behind the database service name.
    pub fn primary(&self) -> Node {
        *self.primary.lock().expect("primary")
    }

    /// Until when (microseconds) a process is paused, if it is.
    pub fn paused_until(&self, node: Node) -> Option<u64> {
        self.paused.lock().expect("paused").get(&node).copied()
    }

    /// A process that dies is no longer paused: its next incarnation starts afresh.
    fn unpause(&self, node: Node) {
        self.paused.lock().expect("paused").remove(&node);
    }

    /// Pauses a process until `until_us` (a later pause extends it).
    fn pause(&self, node: Node, until_us: u64) {
        let mut paused = self.paused.lock().expect("paused");
        let until = paused.entry(node).or_insert(0);
        *until = (*until).max(until_us);
    }

    /// Hands a message to a process; returns it if the process has no inbox (it is down, or
    /// restarted and not yet running).
    fn inject(&self, node: Node, from: Node, msg: Msg) -> Option<Msg> {
        self.net().inject(node, from, msg, now_us()).err().map(|msg| *msg)
    }

    /// Records an observation; returns whether it is another connector's than the first (whose
    /// moments are the ones triggers wait for).
    fn push(&self, at: SimTime, node: Node, observation: Observation) -> bool {
        let mut recorder = self.recorder.lock().expect("recorder");
        let another = recorder.checkers.evidence.of_another_connector(&observation);
        let over_budget = recorder.record(TraceEvent { at, node, observation });
        drop(recorder);
        if over_budget {
            let _ = self.commands.unbounded_send(Command::OverBudget);
        }
        another
    }

    /// Records a step's observations; fires moment triggers. Returns whether a fault takes the
    /// recording node at this instant (it must not act again).
    pub fn record(&self, node: Node, at: SimTime, observations: Vec<Observation>) -> bool {
        let mut halt = false;
        for observation in observations {
            if matches!(observation, Observation::WorkerLeft) {
                let _ = self.commands.unbounded_send(Command::Exit(node));
            }
            let moment = observation.moment();
            let another_connector = self.push(at, node, observation);
            let Some(moment) = moment.filter(|_| !another_connector) else { continue };
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
        (Action::Fault(FaultAction::KillConnectWorker { .. }, _, worker), node)
            if Node::WORKERS[usize::from(worker.unwrap_or(0))] == node
    ) || matches!(
        (action, node),
        (Action::Fault(FaultAction::KillConsumer { .. }, _, _), Node::Consumer)
            | (
                Action::Fault(FaultAction::CrashPostgres { .. } | FaultAction::FailOverToStandby { .. }, _, _),
                Node::Pg1
            )
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
    /// Where the pipeline's positions stood over the run (sampled when the trace is kept;
    /// [`positions`]).
    pub positions: Vec<PositionSample>,
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
    positions: Vec<PositionSample>,
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
        positions,
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
            findings: &findings,
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
        positions,
    }
}

fn spawn_node(
    handle: &madsim::runtime::Handle,
    node: Node,
    model: Arc<Mutex<dyn Component + Send>>,
    shared: Arc<RunState>,
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
