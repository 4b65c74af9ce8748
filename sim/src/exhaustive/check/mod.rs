//! `handoff check`: the exhaustive lens on a scenario's `[check]` bound (stateright's `Model` and `Checker`; the README's "Checking a bound exhaustively").
//!
//! The bound's world is the scenario's pipeline — its connector, Connect, Kafka and sink
//! settings — with `rows` rows per table, the bound's transactions free to run at any point,
//! the named processes free to crash (and restart) up to `crashes` times, the operator's
//! `operations` once each, and each periodic or retry timer firing at most `periodic_fires` times. Time is abstract: any armed timer may fire next.
//! The checkpoint, sink-commit and offset-flush-timeout timers never fire in a bound (their
//! effects are the timed lens's business), and the background workload, the timed faults and
//! the fault profile are the timed lens's too.
//!
//! The default strategy explores the bound depth-first on every thread with [`crate::exhaustive::dfs`],
//! which walks the same `stateright::Model` with less shared state between threads; `--strategy
//! bfs` and `random` are stateright's own checkers. The report gives the states generated and unique, the
//! maximum depth, the time and the rate, and per property: an `always` property holds or has a
//! counterexample; a `sometimes` property is reached or not — not reached is an error unless
//! the scenario says so (`unreached_ok`), because a bound that never reaches a situation proves
//! nothing about it. A counterexample is the shortest path breadth-first search meets: each
//! violated property is searched again, level by level on every thread, with the successors
//! merged in the level's order so that the same bound always tells the same story whatever the
//! threads (stateright's own BFS keeps the last discovery of a property, and its threads race);
//! it is narrated by the simulation's narrator.
//!
//! The command's limits — `--timeout`, `--max-states`, `--max-memory` ([`crate::exhaustive::budget`]) — hold
//! for all of it: the exploration and the searches for the shortest counterexamples share one
//! deadline, one count of states and one memory budget. A search cut short by one of them falls
//! back on the path the exploration found (real, but not the shortest) and the report says so
//! and why.

use crate::exhaustive::budget::{Budget, Limit, size_text};
use crate::exhaustive::dfs::{Explored, Table as Fingerprints};
use handoff_models::core::change::RowOp;
use handoff_models::core::component::{TaskTimer, Timer};
use handoff_models::core::ids::TableId;
use handoff_models::exhaustive::check::{FAILS_CLOSED, HandoffModel};
use handoff_models::exhaustive::world::{Action, Bounds, World};
use handoff_models::judge::verdict::{self, Judgement, Outcome as Judged};
use handoff_models::scenario::spec::{CheckBound, Invariant, Prediction, Spec};
use serde::Serialize;
use stateright::{Checker, Expectation, Model};
use std::time::{Duration, Instant};

mod shortest;
mod text;
use shortest::{Search, shortest};
pub use text::text;

/// How to explore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    Bfs,
    Dfs,
    /// Random walks (stateright's simulation), seeded.
    Random {
        seed: u64,
    },
}

#[derive(Clone, Copy, Debug)]
pub struct CheckPlan {
    pub strategy: Strategy,
    pub max_depth: Option<usize>,
    pub threads: usize,
    /// Stop the whole command after this long (random walks, which never finish on their own,
    /// need one).
    pub timeout: Option<Duration>,
    /// Stop after generating this many states, over the exploration and the counterexamples'
    /// searches (a bound too large for memory stops, and says so).
    pub max_states: usize,
    /// Stop before the process holds this much memory (`None`: no budget).
    pub max_memory_bytes: Option<u64>,
}

/// What a property came to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Holds,
    Counterexample,
    Reached,
    NotReached,
}

#[derive(Clone, Debug, Serialize)]
pub struct PropertyReport {
    pub name: &'static str,
    pub expectation: &'static str,
    pub outcome: Outcome,
    /// Whether the outcome is what the scenario expects (its prediction, its `unreached_ok`).
    pub expected: bool,
    /// The counterexample's steps, and its narration (empty unless there is a counterexample).
    pub steps: Vec<String>,
    pub story: String,
    /// Why the search for the shortest counterexample stopped before its end, if it did: then
    /// the steps are the path the exploration found, real but not the shortest.
    pub search_cut_short_by: Option<Limit>,
    /// The invariant an `always` property checks.
    #[serde(skip)]
    pub invariant: Option<Invariant>,
    /// The counterexample's path, and the invariants its last state violates.
    #[serde(skip)]
    pub path: Vec<Action>,
    #[serde(skip)]
    pub violated_at_end: Vec<Invariant>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    pub scenario: String,
    pub strategy: String,
    pub states: usize,
    pub unique_states: usize,
    pub max_depth: usize,
    pub seconds: f64,
    pub unique_states_per_second: f64,
    /// Whether the whole bound was explored (no limit reached, not random).
    pub complete: bool,
    /// Why it was not.
    pub cut_short_by: Option<Limit>,
    /// The seconds the searches for the shortest counterexamples took, and the states they
    /// generated.
    pub search_seconds: f64,
    pub search_states: usize,
    /// The command's limits: `--timeout` (seconds), `--max-states`, `--max-memory` (bytes).
    pub timeout_seconds: Option<f64>,
    pub max_states: usize,
    pub max_memory_bytes: Option<u64>,
    /// The process's peak resident memory, where the system says it.
    pub peak_memory_bytes: Option<u64>,
    /// What the exit status says: every property as predicted, some not, or not known because
    /// the bound was not explored completely.
    pub verdict: Verdict,
    /// The prediction set against the invariants the bound violates ([`verdict::judge`], as in
    /// every lens), for the invariants this lens has a property for.
    pub judgement: Judgement,
    /// Invariants the prediction names that this lens does not check (it has no property for
    /// them: I8 and I11 need the timed lens).
    pub not_checked: Vec<Invariant>,
    /// How the told path to failing closed ends (`the connector task FAILED: ...`), when one is
    /// told.
    pub stopped_short: Option<String>,
    pub properties: Vec<PropertyReport>,
    #[serde(skip)]
    pub prediction: Prediction,
}

/// What a check comes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The whole bound explored, every property as predicted (exit status 0).
    AsPredicted,
    /// Some property not as predicted (exit status 1): after a whole bound any difference; after
    /// a bound cut short, a counterexample the prediction does not name.
    NotAsPredicted,
    /// The bound cut short, and nothing found so far contradicts the prediction (exit status 3).
    Inconclusive,
}

impl Verdict {
    /// The exit status that says it.
    pub fn exit_status(self) -> u8 {
        match self {
            Verdict::AsPredicted => 0,
            Verdict::NotAsPredicted => 1,
            Verdict::Inconclusive => 3,
        }
    }

    fn of(complete: bool, properties: &[PropertyReport]) -> Verdict {
        // What a bound cut short found is found; what it did not find may lie past the cut.
        let refuted = properties.iter().any(|property| {
            !property.expected && (complete || matches!(property.outcome, Outcome::Counterexample | Outcome::Reached))
        });
        match (refuted, complete) {
            (true, _) => Verdict::NotAsPredicted,
            (false, true) => Verdict::AsPredicted,
            (false, false) => Verdict::Inconclusive,
        }
    }
}

impl CheckReport {
    /// Every property came out as the scenario expects.
    pub fn as_expected(&self) -> bool {
        self.properties.iter().all(|property| property.expected)
    }
}

/// Timers a bound never fires.
const DISABLED_TIMERS: [Timer; 3] =
    [Timer::Checkpoint, Timer::SinkCommit, Timer::first_task(TaskTimer::OffsetFlushTimeout)];

/// The most scripted transactions a bound runs (the world keeps the ones not run as bits).
const MAX_SCRIPTS: usize = 64;

/// The world's spec and bounds for a scenario's `[check]`.
pub fn bound(spec: &Spec) -> Result<(Spec, Bounds), String> {
    let Some(check) = &spec.check else {
        return Err(format!(
            "{} has no [check] section: the exhaustive lens needs a bound, e.g.\n  [check]\n  rows = 3\n  crash = [\"connect\"]",
            spec.name
        ));
    };
    if let Some(delay_ms) = spec.postgres.standby {
        return Err(format!(
            "{} has a standby (standby = {delay_ms}): the exhaustive world holds one PostgreSQL server; \
             check the bound without the standby, or explore failovers in the timed lens (handoff run / sweep)",
            spec.name
        ));
    }
    if spec.connect.workers > 2 {
        return Err(format!(
            "{} has a group of {} Connect workers ([connect] workers): the exhaustive world runs two at most; \
             check the bound with workers = 2, or explore the larger group in the timed lens (handoff run / sweep)",
            spec.name, spec.connect.workers
        ));
    }
    let mut world = spec.clone();
    // Every table loads the bound's rows but an outbox, which starts empty (its rows are events),
    // and a signal table (`signal.data.collection`), whose rows are the signals the bound writes.
    let signal_tables: Vec<TableId> = spec.connectors().filter_map(|connector| connector.signal_table()).collect();
    for table in world.tables.iter_mut().filter(|table| table.outbox.is_none() && !signal_tables.contains(&table.id)) {
        table.rows = check.rows;
    }
    if !check.scripts.is_empty() {
        world.scripted.clone_from(&check.scripts);
    }
    // Time is abstract in the world: a session stays idle between its steps for as long as an
    // interleaving makes it.
    for txn in &mut world.scripted {
        txn.step.idle_ms = 0;
    }
    for (index, txn) in world.scripted.iter().enumerate() {
        for op in txn.ops.iter().filter(|op| world.tables[usize::from(op.target().0.0)].outbox.is_none()) {
            if let RowOp::Update { key, .. } | RowOp::Delete { key, .. } = op
                && *key > i64::from(check.rows)
            {
                return Err(format!(
                    "workload.script[{index}] touches key {key}, which the bound does not load (rows = {}); \
                     give the bound its own transactions with [[check.script]]",
                    check.rows
                ));
            }
        }
    }
    if world.scripted.len() > MAX_SCRIPTS {
        return Err(format!(
            "the bound has {} scripted transactions; a bound runs at most {MAX_SCRIPTS}",
            world.scripted.len()
        ));
    }
    world.background = None;
    world.faults.clear();
    world.profile = None;
    let bounds = Bounds {
        crashable: check.crash.clone(),
        crashes: check.crashes,
        pausable: check.pause.clone(),
        pauses: check.pauses,
        periodic_fires: check.periodic_fires,
        disabled_timers: DISABLED_TIMERS.to_vec(),
        operations: check.operations.clone(),
        operate_while: check.operate_while,
        crash_while: check.crash_while,
        script_while: check.script_while,
        commit_visibility: check.commit_visibility,
        bgwriter_running_xacts: check.bgwriter_running_xacts,
        reductions: true,
    };
    Ok((world, bounds))
}

/// Explores a scenario's bound, and searches and tells each counterexample.
pub fn check(spec: &Spec, name: &str, plan: CheckPlan) -> Result<CheckReport, String> {
    check_with(spec, name, plan, true)
}

/// Explores a scenario's bound only: the report's counterexamples have no path and no story
/// (what the `check_throughput` benchmark measures).
pub fn explore(spec: &Spec, name: &str, plan: CheckPlan) -> Result<CheckReport, String> {
    check_with(spec, name, plan, false)
}

fn check_with(spec: &Spec, name: &str, plan: CheckPlan, tell: bool) -> Result<CheckReport, String> {
    let (world, bounds) = bound(spec)?;
    let budget = Budget::new(plan.timeout, plan.max_states, plan.max_memory_bytes);
    Ok(budget.watching(|| check_within(spec, name, plan, tell, HandoffModel::new(world, bounds), &budget)))
}

fn check_within(
    spec: &Spec,
    name: &str,
    plan: CheckPlan,
    tell: bool,
    model: HandoffModel,
    budget: &Budget,
) -> CheckReport {
    let check: &CheckBound = spec.check.as_ref().expect("bound() checked it");
    let started = Instant::now();
    let stateright = || {
        // stateright's checkers stop at their own timeout and state count, and at the budget's
        // halt (the model offers no more steps once it is raised).
        let mut builder = model.clone().halted_by(budget.halt()).checker().threads(plan.threads.max(1));
        if let Some(depth) = plan.max_depth {
            builder = builder.target_max_depth(depth);
        }
        if let Some(remaining) = budget.remaining() {
            builder = builder.timeout(remaining);
        }
        builder.target_state_count(plan.max_states)
    };
    let mut explored = match plan.strategy {
        Strategy::Bfs => joined(stateright().spawn_bfs().join(), budget),
        Strategy::Dfs => crate::exhaustive::dfs::explore(
            &model,
            plan.threads,
            crate::exhaustive::dfs::Limits { max_depth: plan.max_depth, budget },
        ),
        Strategy::Random { seed } => {
            joined(stateright().spawn_simulation(seed, stateright::UniformChooser).join(), budget)
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    if plan.strategy != Strategy::Dfs {
        budget.spend(explored.states);
        budget.exhausted();
    }
    let cut_short_by = match plan.strategy {
        // The depth-first explorer stops only at the budget; stateright's checkers stop at their
        // own timeout and count too (the budget has just counted their states, and checked the
        // deadline), or at the halt.
        Strategy::Dfs if !explored.cut_short => None,
        Strategy::Dfs | Strategy::Bfs => budget.reached(),
        Strategy::Random { .. } => Some(budget.reached().unwrap_or(Limit::Sampled)),
    }
    .or_else(|| plan.max_depth.filter(|depth| explored.max_depth >= *depth).map(|_| Limit::MaxDepth));
    let complete = cut_short_by.is_none();
    let search_started = Instant::now();
    let searched_before = budget.spent();
    let mut properties = Vec::new();
    let mut stopped_short = None;
    // The prediction set against what the bound violates, over the invariants it has a property for.
    let checked: Vec<Invariant> =
        model.properties().iter().filter_map(|property| invariant_of(property.name)).collect();
    let violated: Vec<Invariant> = model
        .properties()
        .iter()
        .filter(|property| property.expectation != Expectation::Sometimes)
        .filter(|property| explored.discoveries.contains_key(property.name))
        .filter_map(|property| invariant_of(property.name))
        .collect();
    // Failing closed, judged like an invariant: some path stops short (the property reached), or
    // a whole bound shows that none does; a bound cut short cannot tell it has not.
    let failed_closed =
        if explored.discoveries.contains_key(FAILS_CLOSED) { Some(true) } else { complete.then_some(false) };
    let mut judgement = verdict::judge(&spec.prediction, &violated, failed_closed);
    judgement.invariants.retain(|judged| checked.contains(&judged.invariant));
    let not_checked: Vec<Invariant> = spec
        .prediction
        .findings
        .iter()
        .chain(&spec.prediction.allow)
        .copied()
        .filter(|invariant| !checked.contains(invariant))
        .collect();
    for property in model.properties() {
        let found = explored.discoveries.contains_key(property.name);
        let (expectation, outcome) = match property.expectation {
            Expectation::Always => ("always", if found { Outcome::Counterexample } else { Outcome::Holds }),
            Expectation::Sometimes => ("sometimes", if found { Outcome::Reached } else { Outcome::NotReached }),
            Expectation::Eventually => ("eventually", if found { Outcome::Counterexample } else { Outcome::Holds }),
        };
        let fails_closed = property.name == FAILS_CLOSED;
        let expected = match outcome {
            // Failing closed is an outcome the prediction judges, not a goal of the bound.
            _ if fails_closed => judgement.failing_closed.is_none_or(Judged::as_predicted),
            // An invariant the prediction does not name must hold; one it names is judged.
            Outcome::Holds | Outcome::Counterexample => invariant_of(property.name)
                .and_then(|invariant| judgement.of(invariant))
                .is_none_or(Judged::as_predicted),
            Outcome::Reached => true,
            Outcome::NotReached => check.unreached_ok.iter().any(|ok| ok == property.name),
        };
        // A path is told for a counterexample, and for failing closed where the prediction
        // requires it or forbids it (where it only allows it, the search is not worth its time).
        let told = outcome == Outcome::Counterexample
            || (fails_closed
                && outcome == Outcome::Reached
                && matches!(judgement.failing_closed, Some(Judged::ViolatedAsPredicted | Judged::Unexpected)));
        let (path, search_cut_short_by) = if tell && told {
            let explored_path = explored.discoveries.remove(property.name).unwrap_or_default();
            match budget
                .exhausted()
                .map_or_else(|| shortest(&model, property.name, plan.threads, budget), Search::CutShort)
            {
                Search::Found(path) => (path, None),
                Search::CutShort(limit) => (explored_path, Some(limit)),
                // Breadth-first search meets every state the exploration met.
                Search::Missing => (explored_path, None),
            }
        } else {
            (Vec::new(), None)
        };
        let steps = path.iter().map(Action::to_string).collect();
        let story = if path.is_empty() {
            String::new()
        } else {
            handoff_models::exhaustive::check::narrate_path(&model, &path)
        };
        // The state the told path ends in: what it violates, and for failing closed, how it stopped.
        let end = (!path.is_empty()).then(|| World::after(&model.spec, &model.bounds, &path));
        let violated_at_end = end.as_ref().map(World::violated).unwrap_or_default();
        if fails_closed && let Some(reason) = end.and_then(|end| end.stopped_short_by()).and_then(|end| end.reason()) {
            stopped_short = Some(reason);
        }
        properties.push(PropertyReport {
            name: property.name,
            expectation,
            outcome,
            expected,
            steps,
            story,
            search_cut_short_by,
            invariant: invariant_of(property.name),
            path,
            violated_at_end,
        });
    }
    let unique = explored.unique_states;
    CheckReport {
        scenario: name.to_owned(),
        strategy: match plan.strategy {
            Strategy::Bfs => "bfs".into(),
            Strategy::Dfs => "dfs".into(),
            Strategy::Random { seed } => format!("random (seed {seed})"),
        },
        states: explored.states,
        unique_states: unique,
        max_depth: explored.max_depth,
        seconds,
        unique_states_per_second: if seconds > 0.0 { unique as f64 / seconds } else { 0.0 },
        complete,
        cut_short_by,
        search_seconds: search_started.elapsed().as_secs_f64(),
        search_states: budget.spent().saturating_sub(searched_before),
        timeout_seconds: plan.timeout.map(|timeout| timeout.as_secs_f64()),
        max_states: plan.max_states,
        max_memory_bytes: plan.max_memory_bytes,
        peak_memory_bytes: budget.peak_bytes(),
        verdict: Verdict::of(complete, &properties),
        judgement,
        not_checked,
        stopped_short,
        properties,
        prediction: spec.prediction.clone(),
    }
}

/// What a stateright checker that has stopped found. It rebuilds the paths it found through the
/// model's steps, which the budget's halt withholds: the halt is lifted first.
fn joined(checker: impl Checker<HandoffModel>, budget: &Budget) -> Explored {
    budget.lift_halt();
    Explored::of(checker)
}

/// The loopback address `--serve` may bind: an `IP:PORT` on 127.0.0.0/8 or `::1` (the Explorer
/// lets anyone who reaches it walk the model; it is not meant for a network).
pub fn serve_address(text: &str) -> Result<std::net::SocketAddr, String> {
    let address: std::net::SocketAddr = text
        .parse()
        .map_err(|_| format!("--serve {text}: not an address; give IP:PORT on loopback, e.g. 127.0.0.1:3000"))?;
    if !address.ip().is_loopback() {
        return Err(format!(
            "--serve {text}: {} is not a loopback address; the Explorer binds loopback only (127.0.0.1, ::1)",
            address.ip()
        ));
    }
    // stateright's server gives up without a word if it cannot bind: find out first.
    std::net::TcpListener::bind(address).map_err(|error| format!("--serve {text}: cannot listen there: {error}"))?;
    Ok(address)
}

/// stateright's web Explorer on a scenario's bound, for stepping through states by hand
/// (`GET /` in a browser). It serves until the process is stopped.
pub fn serve(spec: &Spec, address: std::net::SocketAddr, threads: usize) -> Result<(), String> {
    let (world, bounds) = bound(spec)?;
    let model = HandoffModel::new(world, bounds);
    model.checker().threads(threads.max(1)).serve(address);
    Ok(())
}

/// The invariant a property checks (`I2 no resurrection` → I2).
fn invariant_of(property: &str) -> Option<Invariant> {
    property.split_whitespace().next().and_then(Invariant::parse)
}

/// A counterexample as a scenario that `handoff run` replays: the scenario's pipeline and bound,
/// the path as its `[schedule]`, and a prediction of the invariants the path's last state
/// violates (the one the counterexample is about must be violated; the others may be). A path
/// to failing closed is exported the same way, predicting that the run fails closed.
pub fn export(spec: &Spec, property: &PropertyReport) -> Result<Spec, String> {
    use handoff_models::scenario::spec::{Prediction, PredictionOrigin, Verdict as Predicted};
    let invariant = match property.invariant {
        Some(invariant) => Some(invariant),
        None if property.name == FAILS_CLOSED => None,
        None => return Err(format!("`{}` is not an invariant: nothing to export", property.name)),
    };
    if property.path.is_empty() {
        let what = if invariant.is_some() { "counterexample" } else { "path" };
        return Err(format!("{} has no {what} to export", property.name));
    }
    let mut exported = spec.clone();
    let check = exported.check.as_mut().ok_or("the scenario has no [check] bound")?;
    if check.scripts.is_empty() {
        // The bound runs the scenario's scripted transactions at any point: the schedule says when.
        check.scripts = std::mem::take(&mut exported.scripted);
        for txn in &mut check.scripts {
            txn.trigger = handoff_models::scenario::spec::Trigger::At { at_ms: 0 };
            txn.step.idle_ms = 0;
        }
    }
    exported.scripted.clear();
    exported.background = None;
    exported.faults.clear();
    exported.profile = None;
    let (suffix, about) = match invariant {
        Some(invariant) => (
            format!("{}-counterexample", invariant.to_string().to_lowercase()),
            format!("for {invariant} ({})", invariant.name()),
        ),
        None => (
            "fails-closed".to_owned(),
            "to failing closed (the pipeline stops short of its boundary, saying why)".to_owned(),
        ),
    };
    exported.name = format!("{}-{suffix}", spec.name);
    let which = match (property.search_cut_short_by, invariant) {
        (None, Some(_)) => "The shortest counterexample `handoff check` found".to_owned(),
        (None, None) => "The shortest path `handoff check` found".to_owned(),
        (Some(_), _) => "A path `handoff check`'s exploration found (not the shortest: the search for \
                         that was cut short by a limit of the command)"
            .to_owned(),
    };
    exported.description =
        format!("{which} {about} in the bound of {}, as a path `handoff run` follows step by step.\n", spec.name);
    exported.prediction = Prediction {
        verdict: if invariant.is_some() { Predicted::Violated } else { Predicted::FailsClosed },
        origin: PredictionOrigin::File,
        findings: invariant.into_iter().collect(),
        // What else the path's last state violates; and I11, which the exhaustive world does not
        // check: after the path the run goes on, and a pipeline that can no longer catch up
        // while its connector says RUNNING shows it.
        allow: property
            .violated_at_end
            .iter()
            .copied()
            .chain([Invariant::I11])
            .filter(|other| Some(*other) != invariant)
            .collect(),
        may_fail_closed: false,
        why: format!(
            "handoff check found this path ({} steps); the exhaustive world tells it so:\n\n{}",
            property.path.len(),
            property.story.trim_end()
        ),
    };
    // A step lasts one `poll.interval.ms`: Connect's send loop refreshes the offsets it may
    // commit once per interval, and in the exhaustive world, where time does not pass, a flush
    // may store whatever Kafka has acknowledged before it; one interval per step gives the
    // timed lens the same freedom.
    let step_ms = spec.debezium.poll_interval_ms.max(10);
    exported.schedule = Some(handoff_models::scenario::spec::Schedule { step_ms, steps: property.path.clone() });
    Ok(exported)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The zoo's naive sink, whose bound has an I3 counterexample.
    fn naive_sink() -> HandoffModel {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/zoo/naive-sink.toml");
        let spec = crate::scenario::load(&path, &[]).expect("the zoo's naive sink").spec;
        let (world, bounds) = bound(&spec).expect("a bound");
        HandoffModel::new(world, bounds)
    }

    #[test]
    fn the_shortest_counterexample_does_not_depend_on_the_threads() {
        let model = naive_sink();
        let search = |threads| shortest(&model, "I3 monotonic apply", threads, &Budget::unlimited());
        let Search::Found(one) = search(1) else { panic!("a naive sink applies an older version after a crash") };
        assert!(!one.is_empty());
        assert_eq!(search(2), Search::Found(one.clone()));
        assert_eq!(search(3), Search::Found(one.clone()));
        // It is a counterexample: its last state violates I3, and no state before it does.
        assert!(World::violated_after(&model.spec, &model.bounds, &one).contains(&Invariant::I3));
        assert!(!World::violated_after(&model.spec, &model.bounds, &one[..one.len() - 1]).contains(&Invariant::I3));
        // A property nothing violates has no path.
        assert_eq!(shortest(&model, "I5 ack <= durable", 2, &Budget::unlimited()), Search::Missing);
    }

    #[test]
    fn the_search_stops_at_the_commands_limits() {
        let model = naive_sink();
        // The search counts its states into the budget, and stops at its limit.
        let budget = Budget::new(None, 1_000, None);
        assert_eq!(shortest(&model, "I3 monotonic apply", 2, &budget), Search::CutShort(Limit::MaxStates));
        assert!(budget.spent() >= 1_000 && budget.spent() < 10_000, "{}", budget.spent());
        let budget = Budget::new(Some(Duration::from_millis(1)), usize::MAX, None);
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(shortest(&model, "I3 monotonic apply", 2, &budget), Search::CutShort(Limit::Timeout));
        // A limit another part of the command reached (the memory watchdog) stops it too.
        let budget = Budget::unlimited();
        budget.stop(Limit::MaxMemory);
        assert_eq!(shortest(&model, "I3 monotonic apply", 1, &budget), Search::CutShort(Limit::MaxMemory));
    }

    #[test]
    fn a_search_cut_short_falls_back_on_the_explorations_path() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/zoo/naive-sink.toml");
        let spec = crate::scenario::load(&path, &[]).expect("the zoo's naive sink").spec;
        let plan = |max_states| CheckPlan {
            strategy: Strategy::Dfs,
            max_depth: None,
            threads: 2,
            timeout: None,
            max_states,
            max_memory_bytes: None,
        };
        let whole = check(&spec, "naive-sink", plan(usize::MAX)).expect("a bound");
        let generated = whole.states;
        // Room for the exploration, not for the search.
        let report = check(&spec, "naive-sink", plan(generated + 100)).expect("a bound");
        assert!(report.complete && report.cut_short_by.is_none(), "the exploration ends before the limit");
        assert_eq!(report.verdict, Verdict::AsPredicted, "{}", text(&report));
        let i3 = report.properties.iter().find(|p| p.name == "I3 monotonic apply").expect("I3");
        assert_eq!(i3.search_cut_short_by, Some(Limit::MaxStates));
        let shortest = whole.properties.iter().find(|p| p.name == "I3 monotonic apply").expect("I3");
        assert!(i3.path.len() >= shortest.path.len() && !i3.story.is_empty(), "{}", text(&report));
        assert!(
            World::violated_after(&spec_world(&spec), &bound(&spec).expect("a bound").1, &i3.path)
                .contains(&Invariant::I3)
        );
        assert!(text(&report).contains("NOT the shortest: the search for that was cut short by the state limit"));
    }

    fn spec_world(spec: &Spec) -> Spec {
        bound(spec).expect("a bound").0
    }

    fn zoo(name: &str) -> Spec {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../scenarios/zoo/{name}.toml"));
        crate::scenario::load(&path, &[]).expect("a zoo entry").spec
    }

    const WHOLE: CheckPlan = CheckPlan {
        strategy: Strategy::Dfs,
        max_depth: None,
        threads: 2,
        timeout: None,
        max_states: usize::MAX,
        max_memory_bytes: None,
    };

    fn fails_closed(report: &CheckReport) -> &PropertyReport {
        report.properties.iter().find(|p| p.name == FAILS_CLOSED).expect("the property")
    }

    /// Failing closed is judged in a bound as in a run: `holds` forbids it, an allowed
    /// `fails-closed` lets it be, `fails-closed` requires it, and a path to it is told.
    #[test]
    fn failing_closed_is_judged_in_a_bound() {
        // DBZ-5739's twin: the seek fails the task on some path, which the twin allows.
        let mut spec = zoo("dbz-5739-slot-advanced-by-hand-fixed");
        let allowed = check(&spec, "twin", WHOLE).expect("a bound");
        assert_eq!(fails_closed(&allowed).outcome, Outcome::Reached);
        assert_eq!(allowed.judgement.failing_closed, Some(Judged::AllowedAndViolated));
        assert!(fails_closed(&allowed).path.is_empty(), "an allowed outcome's path is not searched for");
        assert_eq!(allowed.verdict, Verdict::AsPredicted, "{}", text(&allowed));
        assert!(text(&allowed).contains("allowed to fail closed: some path of the bound fails closed"));
        // Forbidden: the verdict says so, and tells the path, which ends with the task FAILED.
        spec.prediction.may_fail_closed = false;
        let forbidden = check(&spec, "twin", WHOLE).expect("a bound");
        assert_eq!(forbidden.judgement.failing_closed, Some(Judged::Unexpected));
        assert_eq!(forbidden.verdict, Verdict::NotAsPredicted);
        let path = &fails_closed(&forbidden).path;
        assert!(!path.is_empty());
        let end = World::after(&spec_world(&spec), &bound(&spec).expect("a bound").1, path);
        assert!(end.stopped_short() && !end.at_acceptance_boundary());
        let told = text(&forbidden);
        assert!(told.contains("a path of the bound fails closed (the connector task FAILED: "), "{told}");
        assert!(told.contains("Cannot seek to the last known offset"), "{told}");
        assert!(told.contains("the prediction says the pipeline catches up"), "{told}");
        // Exported, the path is a scenario that predicts failing closed.
        let exported = export(&spec, fails_closed(&forbidden)).expect("exported");
        assert_eq!(exported.prediction.verdict, handoff_models::scenario::spec::Verdict::FailsClosed);
        assert_eq!(exported.schedule.expect("a schedule").steps, *path);
        assert!(exported.name.ends_with("-fails-closed"));
        // Required where no path fails closed: refuted.
        let mut never = zoo("dbz-7533-driver-confirms-keepalives-fixed");
        never.prediction.verdict = handoff_models::scenario::spec::Verdict::FailsClosed;
        let refuted = check(&never, "never", WHOLE).expect("a bound");
        assert_eq!(fails_closed(&refuted).outcome, Outcome::NotReached);
        assert_eq!(refuted.judgement.failing_closed, Some(Judged::PredictedButNeverSeen));
        assert_eq!(refuted.verdict, Verdict::NotAsPredicted);
        assert!(text(&refuted).contains("predicted the pipeline to fail closed, but no path of the bound does"));
    }
}
