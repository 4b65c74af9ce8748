//! Seed sweeps: `handoff sweep`, `handoff merge`.
//!
//! A sweep runs a range of seeds of one scenario, each in its own fresh madsim runtime, on `--jobs`
//! jobs. A run's trace is never kept; its findings, coverage marks and trace hash are counted into
//! the summary and handed on (a `--json` line) in seed order, then dropped, so memory does not grow
//! with the sweep. The seeds themselves are computed as they are needed, never listed. The report
//! (but for its timing) does not depend on the number of jobs, nor on where the runs ran: in this
//! process ([`sweep`], for tests and benchmarks) or in worker processes ([`sweep_in_workers`], what
//! `handoff sweep` does), where a run that kills its process is reported as a [`Crash`] and the
//! sweep goes on (see [`crate::sweep::workers`]).
//! `--shard K/N` takes every N-th seed of the range, starting with the K-th, so N machines of any
//! batch system can share a sweep; `handoff merge` combines their `--json` outputs.

use crate::timed::runner::{self, RunOptions, RunResult};
use handoff_models::judge::coverage::Mark;
use handoff_models::judge::verdict::{self, Judgement, Outcome};
use handoff_models::scenario::spec::{Invariant, Prediction, PredictionOrigin, Spec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::ops::ControlFlow;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use workers::Workers;

mod merge;
pub mod regressions;
pub mod shrink;
mod summary;
pub mod workers;
pub use merge::merge;
pub use summary::{CRASHES_LISTED, Summary, SweepVerdict};

/// What to sweep.
#[derive(Clone, Debug)]
pub struct Sweep {
    pub start: u64,
    pub seeds: u64,
    pub jobs: usize,
    /// `(k, n)`: this is shard k of n (1-based).
    pub shard: (u64, u64),
    /// Run every seed twice and stop at the first whose trace hashes differ.
    pub check_determinism: bool,
    /// Show a progress bar.
    pub progress: bool,
}

impl Sweep {
    /// Refuses a sweep that would run no seed, or whose range passes the largest seed, naming the
    /// flag at fault (`handoff sweep` checks its plan with this before it runs anything).
    pub fn check(&self) -> Result<(), String> {
        let (k, n) = self.shard;
        if k == 0 || n == 0 || k > n {
            return Err(format!("--shard {k}/{n}: expected 1 <= K <= N"));
        }
        if self.jobs == 0 {
            return Err("--jobs 0: at least one job is needed".to_string());
        }
        if self.seeds == 0 {
            return Err("--seeds 0: a sweep needs at least one seed".to_string());
        }
        if self.start.checked_add(self.seeds - 1).is_none() {
            return Err(format!(
                "--start {} --seeds {}: the range would end past the largest seed, {}; from this start, --seeds \
                 can be at most {}",
                self.start,
                self.seeds,
                u64::MAX,
                u64::MAX - self.start + 1
            ));
        }
        if self.seeds < k {
            return Err(format!(
                "--shard {k}/{n} --seeds {}: shard {k} has no seed (its first would be seed number {k} of the \
                 range); sweep at least {k} seeds, or split the range into at most {} shards",
                self.seeds, self.seeds
            ));
        }
        Ok(())
    }

    /// How many seeds this shard runs.
    pub fn count(&self) -> u64 {
        let (k, n) = self.shard;
        if k == 0 || n == 0 || self.seeds < k { 0 } else { (self.seeds - k) / n + 1 }
    }

    /// The shard's `index`-th seed (`index < self.count()`, in a plan [`Sweep::check`] accepts).
    pub fn seed(&self, index: u64) -> u64 {
        let (k, n) = self.shard;
        self.start + (k - 1) + index * n
    }

    /// The seeds of this shard, in order, computed as they are needed.
    pub fn seeds(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.count()).map(|index| self.seed(index))
    }
}

/// One run of a sweep, as a `--json` line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedRun {
    pub seed: u64,
    pub trace_hash: String,
    /// The run's findings, as `run --json` gives them.
    pub findings: Vec<crate::timed::report::JsonFinding>,
    /// Violated invariants the prediction neither requires nor allows.
    pub unexpected: Vec<Invariant>,
    pub held: bool,
    pub coverage: Vec<Mark>,
    pub faults: usize,
    pub events: usize,
    pub sim_time_ms: u64,
    /// The limit the run reached before its boundary (its horizon, its trace budget), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// The pipeline failed closed: it stopped short of its boundary with the connector not running.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed_closed: bool,
    /// Failing closed is something the prediction does not cover (it says the design holds).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed_closed_unexpected: bool,
}

impl SeedRun {
    /// The invariants its findings violated, each once, in order.
    pub fn violated(&self) -> Vec<Invariant> {
        let mut invariants: Vec<Invariant> = self.findings.iter().map(|finding| finding.invariant).collect();
        invariants.sort();
        invariants.dedup();
        invariants
    }

    pub fn from(_spec: &Spec, result: &RunResult) -> SeedRun {
        let findings = result.findings.iter().map(crate::timed::report::JsonFinding::from).collect();
        let unexpected = result.judgement.with(Outcome::Unexpected).collect();
        SeedRun {
            failed_closed: result.failed_closed.is_some(),
            failed_closed_unexpected: result.judgement.failing_closed == Some(Outcome::Unexpected),
            seed: result.seed,
            trace_hash: format!("{:016x}", result.trace_hash),
            findings,
            unexpected,
            held: result.prediction_held,
            coverage: result.coverage.iter().copied().collect(),
            faults: result.schedule.len(),
            events: result.events,
            sim_time_ms: result.sim_time_ms,
            limit: result.limit.map(|limit| limit.to_string()),
        }
    }
}

/// A seed that gave no run: the worker process running it died, or ran past `--run-timeout`.
/// Its `--json` line is `{"crashed": {...}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Crash {
    pub seed: u64,
    #[serde(flatten)]
    pub cause: CrashCause,
    /// The command that runs the seed again, on its own.
    pub replay: String,
}

/// How a worker process ended without answering.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cause", rename_all = "kebab-case")]
pub enum CrashCause {
    /// Killed by a signal: a segmentation fault is SIGSEGV (11 on Linux), an abort SIGABRT (6).
    Signal { signal: i32, signal_name: String },
    /// Exited before answering (a Rust panic exits with 101).
    Exit { exit_code: i32 },
    /// Still running after `--run-timeout` seconds: killed.
    TimedOut { timeout_s: u64 },
}

impl std::fmt::Display for CrashCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CrashCause::Signal { signal, signal_name } => write!(f, "killed by {signal_name} (signal {signal})"),
            CrashCause::Exit { exit_code } => write!(f, "exited with status {exit_code} before answering"),
            CrashCause::TimedOut { timeout_s } => {
                write!(f, "still running after {timeout_s} s (--run-timeout): killed")
            }
        }
    }
}

/// What became of one seed of a sweep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeedOutcome {
    Ran(SeedRun),
    Crashed(Crash),
}

impl SeedOutcome {
    pub fn seed(&self) -> u64 {
        match self {
            SeedOutcome::Ran(run) => run.seed,
            SeedOutcome::Crashed(crash) => crash.seed,
        }
    }

    /// The `--json` line: a run as it is, a crash as `{"crashed": {...}}`, each with the JSON's
    /// `schema_version`.
    pub fn json_line(&self) -> String {
        let schema_version = crate::timed::report::JSON_SCHEMA_VERSION;
        match self {
            SeedOutcome::Ran(run) => {
                #[derive(Serialize)]
                struct Line<'a> {
                    schema_version: u32,
                    #[serde(flatten)]
                    run: &'a SeedRun,
                }
                serde_json::to_string(&Line { schema_version, run }).expect("a run serialises")
            }
            SeedOutcome::Crashed(crash) => {
                #[derive(Serialize)]
                struct Line<'a> {
                    schema_version: u32,
                    crashed: &'a Crash,
                }
                serde_json::to_string(&Line { schema_version, crashed: crash }).expect("a crash serialises")
            }
        }
    }
}

/// The command-line arguments besides the `--set`s that load the same prediction again:
/// `--variant NAME` or `--expect TEXT`, where the prediction came from one of them.
pub fn choice_args(prediction: &Prediction, sets: &[String]) -> Vec<String> {
    let mut args = Vec::new();
    match &prediction.origin {
        PredictionOrigin::Variant { name, chosen: true }
        | PredictionOrigin::Unpredicted { variant: Some(name), .. } => {
            args.extend(["--variant".to_string(), name.clone()]);
        }
        PredictionOrigin::Expect { text, variant } => {
            if let Some(name) = variant {
                args.extend(["--variant".to_string(), name.clone()]);
            }
            args.extend(["--expect".to_string(), text.clone()]);
        }
        // The `--set`s give a variant they match, and the scenario's own prediction, again.
        PredictionOrigin::Variant { chosen: false, .. }
        | PredictionOrigin::File
        | PredictionOrigin::Unpredicted { variant: None, .. } => {}
    }
    for set in sets {
        args.extend(["--set".to_string(), set.clone()]);
    }
    args
}

/// The command that replays one seed of a sweep of `scenario`, with the sweep's arguments
/// ([`choice_args`]).
pub fn replay_command(scenario: &str, args: &[String], seed: u64) -> String {
    let mut command = format!("{} run {scenario} --seed {seed}", crate::program());
    for arg in args {
        let plain = arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_.,/".contains(c));
        if plain { command.push_str(&format!(" {arg}")) } else { command.push_str(&format!(" '{arg}'")) }
    }
    command
}

/// Runs a sweep in this process. `each` sees every run in seed order as soon as the runs before it
/// are done (to print `--json` lines as the sweep goes); nothing of a run is kept once it has been
/// counted and handed to `each`, so memory stays flat however many seeds are swept. A run that
/// crashes takes the process with it: [`sweep_in_workers`] survives that.
///
/// The plan must be one that [`Sweep::check`] accepts.
pub fn sweep(
    spec: &Spec,
    scenario: &str,
    sets: &[String],
    plan: &Sweep,
    mut each: impl FnMut(&SeedRun) + Send,
) -> Summary {
    if let Err(error) = plan.check() {
        panic!("sweep::sweep needs a plan that Sweep::check accepts: {error}");
    }
    let outcome = drive(
        scenario,
        sets,
        &spec.prediction,
        plan,
        || Ok::<_, String>(InProcess { spec, asked: std::collections::VecDeque::new() }),
        |outcome| {
            if let SeedOutcome::Ran(run) = outcome {
                each(run);
            }
            ControlFlow::Continue(())
        },
    );
    match outcome {
        Ok(summary) => summary,
        Err(error) => unreachable!("a sweep in this process has no worker to lose: {error}"),
    }
}

/// Runs a sweep and keeps every run, in seed order (for tests and small sweeps).
pub fn sweep_collect(spec: &Spec, scenario: &str, sets: &[String], plan: &Sweep) -> (Summary, Vec<SeedRun>) {
    let mut runs = Vec::new();
    let summary = sweep(spec, scenario, sets, plan, |run| runs.push(run.clone()));
    (summary, runs)
}

/// Runs a sweep with every seed in a worker process (`handoff sweep-worker`, see
/// [`crate::sweep::workers`]), one per job, each started once and handed seed after seed. A seed whose
/// worker dies (a signal, an exit) or runs past `workers.run_timeout` is reported as a [`Crash`], and
/// a new worker takes the rest. `each` sees every outcome in seed order; when it breaks, the sweep
/// stops taking seeds and returns once the runs under way have ended. The summary is the same as
/// [`sweep`]'s (but for timing) when no seed crashes.
///
/// Errors: a plan [`Sweep::check`] refuses, a worker that cannot start or that loaded another
/// scenario than `spec` (the file changed during the sweep), a worker that answers out of protocol.
pub fn sweep_in_workers(
    spec: &Spec,
    scenario: &str,
    sets: &[String],
    plan: &Sweep,
    workers: &Workers,
    each: impl FnMut(&SeedOutcome) -> ControlFlow<()> + Send,
) -> Result<Summary, String> {
    plan.check()?;
    let fingerprint = workers::fingerprint(spec);
    let args = choice_args(&spec.prediction, sets);
    drive(scenario, sets, &spec.prediction, plan, || workers::Job::start(workers, scenario, &args, &fingerprint), each)
}

/// Runs seeds on one job, in the order asked. An error stops the sweep (the job cannot run seeds
/// at all).
pub(crate) trait RunSeed {
    /// Asks for a run of `seed`; a worker process starts on it as soon as it is free.
    fn ask(&mut self, seed: u64) -> Result<(), String>;
    /// The outcome of the oldest run asked and not yet answered.
    fn outcome(&mut self) -> Result<SeedOutcome, String>;
    /// How many seeds to keep asked ahead of their outcomes.
    fn in_flight(&self) -> usize;
}

/// A job that runs its seeds on its own thread of this process, when their outcome is wanted.
struct InProcess<'a> {
    spec: &'a Spec,
    asked: std::collections::VecDeque<u64>,
}

impl RunSeed for InProcess<'_> {
    fn ask(&mut self, seed: u64) -> Result<(), String> {
        self.asked.push_back(seed);
        Ok(())
    }

    fn outcome(&mut self) -> Result<SeedOutcome, String> {
        let seed = self.asked.pop_front().ok_or("an outcome of a run that was never asked")?;
        let result = runner::run_with(self.spec, seed, RunOptions::SWEEP);
        Ok(SeedOutcome::Ran(SeedRun::from(self.spec, &result)))
    }

    fn in_flight(&self) -> usize {
        1
    }
}

/// The sweep itself, whatever runs the seeds: `plan.jobs` threads (no more than there are seeds)
/// take the next seeds in turn, each with its own job, and the outcomes are counted and handed to
/// `each` in seed order.
fn drive<J: RunSeed>(
    scenario: &str,
    sets: &[String],
    prediction: &Prediction,
    plan: &Sweep,
    start_job: impl Fn() -> Result<J, String> + Sync,
    each: impl FnMut(&SeedOutcome) -> ControlFlow<()> + Send,
) -> Result<Summary, String> {
    let count = plan.count();
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let nondeterministic: Mutex<Option<u64>> = Mutex::new(None);
    let failure: Mutex<Option<String>> = Mutex::new(None);
    let mut summary = Summary::new(scenario, sets, plan.shard, prediction);
    summary.start = plan.start;
    summary.seeds = plan.seeds;
    let ordered = Mutex::new(InOrder { next: 0, waiting: BTreeMap::new(), summary, each, closed: false });
    let bar = plan.progress.then(|| {
        let bar = indicatif::ProgressBar::new(count);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} seeds  {per_sec}  eta {eta}  {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let jobs = u64::try_from(plan.jobs.max(1)).unwrap_or(u64::MAX).min(count);
    // Timing a whole sweep is outside every simulated run.
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                let fail = |error: String| {
                    failure.lock().expect("lock").get_or_insert(error);
                    stop.store(true, Ordering::Relaxed);
                };
                let mut job = match start_job() {
                    Ok(job) => job,
                    Err(error) => return fail(error),
                };
                let repeats = if plan.check_determinism { 2 } else { 1 };
                let mut in_flight: std::collections::VecDeque<u64> = std::collections::VecDeque::new();
                loop {
                    // Near the end, no job holds more than its share of the seeds left.
                    let left = count.saturating_sub(next.load(Ordering::Relaxed)).div_ceil(jobs);
                    let ahead = job.in_flight().min(usize::try_from(left).unwrap_or(usize::MAX).max(2));
                    while in_flight.len() < ahead && !stop.load(Ordering::Relaxed) {
                        // The next index, never past the last (nor wrapping round at u64::MAX).
                        let Ok(index) = next.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |index| {
                            (index < count).then_some(index + 1)
                        }) else {
                            break;
                        };
                        for _ in 0..repeats {
                            if let Err(error) = job.ask(plan.seed(index)) {
                                return fail(error);
                            }
                        }
                        in_flight.push_back(index);
                    }
                    // Once stopped, the seeds already asked still end and are counted.
                    let Some(index) = in_flight.pop_front() else { return };
                    let seed = plan.seed(index);
                    let mut outcome = match job.outcome() {
                        Ok(outcome) => outcome,
                        Err(error) => return fail(error),
                    };
                    if plan.check_determinism {
                        match (job.outcome(), &outcome) {
                            (Err(error), _) => return fail(error),
                            (Ok(SeedOutcome::Ran(again)), SeedOutcome::Ran(first)) => {
                                if again.trace_hash != first.trace_hash {
                                    let mut lowest = nondeterministic.lock().expect("lock");
                                    *lowest = Some(lowest.map_or(seed, |other: u64| other.min(seed)));
                                    stop.store(true, Ordering::Relaxed);
                                }
                            }
                            // The second run crashed: that is the seed's outcome.
                            (Ok(crashed @ SeedOutcome::Crashed(_)), SeedOutcome::Ran(_)) => outcome = crashed,
                            // The first crashed: the seed's outcome is that crash.
                            (Ok(_), SeedOutcome::Crashed(_)) => {}
                        }
                    }
                    if let Some(bar) = &bar {
                        bar.inc(1);
                        match &outcome {
                            SeedOutcome::Crashed(crash) => {
                                bar.println(format!("seed {seed} crashed: {}; replay: {}", crash.cause, crash.replay))
                            }
                            SeedOutcome::Ran(run) if !run.findings.is_empty() => {
                                bar.set_message(format!("last finding: seed {seed}"))
                            }
                            SeedOutcome::Ran(_) => {}
                        }
                    }
                    if ordered.lock().expect("lock").arrived(index, outcome).is_break() {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    if let Some(error) = failure.into_inner().expect("lock") {
        return Err(error);
    }
    let seconds = started.elapsed().as_secs_f64();
    let InOrder { mut summary, waiting, .. } = ordered.into_inner().expect("lock");
    // Seeds are taken in order and every job ends the seed it took, so none waits behind a gap.
    debug_assert!(waiting.is_empty(), "runs waiting behind a seed that never ran");
    summary.seconds = seconds;
    summary.runs_per_second = summary.runs as f64 / seconds.max(1e-9);
    summary.nondeterministic_seed = nondeterministic.into_inner().expect("lock");
    summary.finish();
    Ok(summary)
}

/// Outcomes that arrive out of order wait here until the seeds before them are done: at most about
/// as many as there are jobs.
struct InOrder<F> {
    next: u64,
    waiting: BTreeMap<u64, SeedOutcome>,
    summary: Summary,
    each: F,
    /// `each` said it wants no more (its output was closed): outcomes are still counted.
    closed: bool,
}

impl<F: FnMut(&SeedOutcome) -> ControlFlow<()>> InOrder<F> {
    fn arrived(&mut self, index: u64, outcome: SeedOutcome) -> ControlFlow<()> {
        self.waiting.insert(index, outcome);
        while let Some(outcome) = self.waiting.remove(&self.next) {
            self.summary.add_outcome(&outcome);
            if !self.closed && (self.each)(&outcome).is_break() {
                self.closed = true;
            }
            self.next += 1;
        }
        if self.closed { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    }
}
