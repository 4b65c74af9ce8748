//! Seed sweeps: `handoff explore`, `handoff merge`.
//!
//! A sweep runs a range of seeds of one scenario, each in its own fresh madsim runtime, on `--jobs`
//! jobs. A run's trace is never kept; its findings, coverage marks and trace hash are counted into
//! the summary and handed on (a `--json` line) in seed order, then dropped, so memory does not grow
//! with the sweep. The seeds themselves are computed as they are needed, never listed. The report
//! (but for its timing) does not depend on the number of jobs, nor on where the runs ran: in this
//! process ([`sweep`], for tests and benchmarks) or in worker processes ([`sweep_in_workers`], what
//! `handoff explore` does), where a run that kills its process is reported as a [`Crash`] and the
//! sweep goes on (see [`crate::workers`]).
//! `--shard K/N` takes every N-th seed of the range, starting with the K-th, so N machines of any
//! batch system can share a sweep; `handoff merge` combines their `--json` outputs.

use crate::runner::{self, RunOptions, RunResult};
use crate::workers::{self, Workers};
use handoff_models::judge::coverage::Mark;
use handoff_models::judge::verdict::{self, Judgement, Outcome};
use handoff_models::scenario::spec::{Invariant, Prediction, PredictionOrigin, Spec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::ops::ControlFlow;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
    /// flag at fault (`handoff explore` checks its plan with this before it runs anything).
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
    /// Violated invariants.
    pub findings: Vec<Invariant>,
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
    pub fn from(_spec: &Spec, result: &RunResult) -> SeedRun {
        let findings = result.violated();
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

    /// The `--json` line: a run as it is, a crash as `{"crashed": {...}}`.
    pub fn json_line(&self) -> String {
        match self {
            SeedOutcome::Ran(run) => serde_json::to_string(run).expect("a run serialises"),
            SeedOutcome::Crashed(crash) => {
                #[derive(Serialize)]
                struct Line<'a> {
                    crashed: &'a Crash,
                }
                serde_json::to_string(&Line { crashed: crash }).expect("a crash serialises")
            }
        }
    }
}

/// The summary lists at most this many crashed seeds, the lowest (every one has its `--json` line).
pub const CRASHES_LISTED: usize = 100;

/// A sweep's summary, also the last `--json` line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub scenario: String,
    /// The `--set` arguments of the sweep (replay commands repeat them).
    pub sets: Vec<String>,
    /// The range swept, before sharding: `--start` and `--seeds`.
    pub start: u64,
    pub seeds: u64,
    pub shard: String,
    /// Runs that ended (crashed seeds are not among them).
    pub runs: u64,
    pub seconds: f64,
    pub runs_per_second: f64,
    /// Invariant → (runs that violated it, first such seed).
    pub findings: BTreeMap<Invariant, (u64, u64)>,
    /// Runs with a finding the prediction does not cover (or that failed closed, when it says the
    /// design holds).
    pub unexpected_runs: u64,
    /// Runs that failed closed, and the first such seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_closed: Option<(u64, u64)>,
    /// The prediction the sweep is judged against (the same in every run).
    pub prediction: Prediction,
    /// The prediction set against the sweep (filled in when the sweep or the merge ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<SweepVerdict>,
    /// Runs cut by a limit before their boundary (undecided), and the first such seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited: Option<(u64, u64)>,
    /// Mark → runs that reached it.
    pub coverage: BTreeMap<Mark, u64>,
    /// The first seed whose two runs differed, with `--check-determinism`.
    pub nondeterministic_seed: Option<u64>,
    /// Seeds whose worker process died (or timed out) before answering.
    pub crashed_runs: u64,
    /// The lowest [`CRASHES_LISTED`] of them, in seed order.
    pub crashed: Vec<Crash>,
}

/// A sweep's verdict, as its `--json` summary gives it: whether the prediction held, and each
/// invariant's outcome (a predicted one no run violated is `predicted-but-never-seen`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepVerdict {
    pub held: bool,
    #[serde(flatten)]
    pub judgement: Judgement,
}

impl Summary {
    pub fn new(scenario: &str, sets: &[String], shard: (u64, u64), prediction: &Prediction) -> Summary {
        Summary {
            scenario: scenario.to_string(),
            failed_closed: None,
            prediction: prediction.clone(),
            verdict: None,
            sets: sets.to_vec(),
            start: 0,
            seeds: 0,
            shard: format!("{}/{}", shard.0, shard.1),
            runs: 0,
            seconds: 0.0,
            runs_per_second: 0.0,
            findings: BTreeMap::new(),
            unexpected_runs: 0,
            limited: None,
            coverage: Mark::ALL.iter().map(|mark| (*mark, 0)).collect(),
            nondeterministic_seed: None,
            crashed_runs: 0,
            crashed: Vec::new(),
        }
    }

    pub fn add(&mut self, run: &SeedRun) {
        self.runs += 1;
        for invariant in &run.findings {
            let entry = self.findings.entry(*invariant).or_insert((0, run.seed));
            entry.0 += 1;
            entry.1 = entry.1.min(run.seed);
        }
        if !run.unexpected.is_empty() || run.failed_closed_unexpected {
            self.unexpected_runs += 1;
        }
        if run.failed_closed {
            let (runs, first) = self.failed_closed.get_or_insert((0, run.seed));
            *runs += 1;
            *first = (*first).min(run.seed);
        }
        if run.limit.is_some() {
            let (runs, first) = self.limited.get_or_insert((0, run.seed));
            *runs += 1;
            *first = (*first).min(run.seed);
        }
        for mark in &run.coverage {
            *self.coverage.entry(*mark).or_insert(0) += 1;
        }
    }

    pub fn add_crash(&mut self, crash: &Crash) {
        self.crashed_runs += 1;
        let at = self.crashed.partition_point(|listed| listed.seed < crash.seed);
        if at < CRASHES_LISTED {
            self.crashed.insert(at, crash.clone());
            self.crashed.truncate(CRASHES_LISTED);
        }
    }

    pub fn add_outcome(&mut self, outcome: &SeedOutcome) {
        match outcome {
            SeedOutcome::Ran(run) => self.add(run),
            SeedOutcome::Crashed(crash) => self.add_crash(crash),
        }
    }

    /// Every run ended, within its limits, as predicted, and deterministically: what `explore`
    /// and `merge` exit 0 on. A finding the prediction does not cover, a run cut short by its
    /// horizon or trace budget (undecided), a crashed seed or two runs of one seed that differ
    /// make it false.
    pub fn as_expected(&self) -> bool {
        self.nondeterministic_seed.is_none()
            && self.unexpected_runs == 0
            && self.limited.is_none()
            && self.crashed_runs == 0
            && self.judgement().held()
    }

    /// The prediction set against the sweep: the invariants any run violated, and whether any
    /// run failed closed ([`verdict::judge`], as for one run). A predicted invariant no run
    /// violated is [`Outcome::PredictedButNeverSeen`].
    pub fn judgement(&self) -> Judgement {
        let violated: Vec<Invariant> = self.findings.keys().copied().collect();
        verdict::judge(&self.prediction, &violated, Some(self.failed_closed.is_some()))
    }

    /// Fills in [`Summary::verdict`], once the runs are counted.
    pub fn finish(&mut self) {
        let judgement = self.judgement();
        self.verdict = Some(SweepVerdict { held: self.as_expected(), judgement });
    }

    /// The command that replays one seed of this sweep.
    pub fn replay_command(&self, seed: u64) -> String {
        replay_command(&self.scenario, &choice_args(&self.prediction, &self.sets), seed)
    }

    pub fn render(&self, spec: &Spec) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "explore   {} ({}), shard {}", spec.name, self.scenario, self.shard);
        let _ = writeln!(out, "runs      {} in {:.1}s: {:.0} runs/s", self.runs, self.seconds, self.runs_per_second);
        if let Some(seed) = self.nondeterministic_seed {
            let _ = writeln!(out, "DETERMINISM BROKEN: seed {seed} gave two different traces");
        }
        if self.crashed_runs > 0 {
            let _ = writeln!(
                out,
                "CRASHED   {} seed(s): the process running them died, so they have no run (replay each on its own)",
                self.crashed_runs
            );
            for crash in &self.crashed {
                let _ = writeln!(out, "  seed {:<8} {}\n      {}", crash.seed, crash.cause, crash.replay);
            }
            if self.crashed_runs > self.crashed.len() as u64 {
                let _ = writeln!(
                    out,
                    "  and {} more (the lowest {CRASHES_LISTED} are listed; --json has a line for every one)",
                    self.crashed_runs - self.crashed.len() as u64
                );
            }
        }
        let judgement = self.judgement();
        let _ = writeln!(out, "\nfindings by invariant (runs; first seed; replay)");
        if judgement.invariants.is_empty() {
            let _ = writeln!(out, "  none");
        }
        for judged in &judgement.invariants {
            let invariant = judged.invariant;
            match self.findings.get(&invariant) {
                Some((runs, first)) => {
                    let _ = writeln!(
                        out,
                        "  {invariant} {:<20} {runs:>7} runs  first seed {first:<6} {}\n      {}",
                        invariant.name(),
                        judged.outcome.label(),
                        self.replay_command(*first)
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "  {invariant} {:<20} {:>7} runs  {}",
                        invariant.name(),
                        0,
                        judged.outcome.label()
                    );
                }
            }
        }
        match (self.failed_closed, judgement.failing_closed) {
            (Some((runs, first)), outcome) => {
                let label = match outcome {
                    Some(Outcome::ViolatedAsPredicted) => "failed closed, as predicted",
                    Some(Outcome::AllowedAndViolated) => "allowed: the prediction says the pipeline may stop short",
                    _ => "UNEXPECTED: the prediction says the pipeline catches up",
                };
                let _ = writeln!(
                    out,
                    "  FAILED CLOSED           {runs:>7} runs  first seed {first:<6} {label}\n      {}",
                    self.replay_command(first)
                );
            }
            (None, Some(Outcome::PredictedButNeverSeen)) => {
                let _ = writeln!(out, "  FAILED CLOSED           {:>7} runs  PREDICTED BUT NEVER SEEN", 0);
            }
            (None, _) => {}
        }
        let _ = writeln!(out, "\ncoverage (runs that reached each situation)");
        for (mark, runs) in &self.coverage {
            let flag = if *runs == 0 { "  NOT REACHED: the sweep proved nothing about it" } else { "" };
            let _ = writeln!(out, "  {:<58} {runs:>7}{flag}", mark.name());
        }
        let _ = writeln!(
            out,
            "  (not modelled yet, so never reached: a slot going unreserved, an incremental snapshot's chunk window)"
        );
        let _ = writeln!(
            out,
            "\n{} run(s) with a finding the prediction does not cover",
            if self.unexpected_runs == 0 { "no".to_string() } else { self.unexpected_runs.to_string() }
        );
        if let Some((runs, first)) = self.limited {
            let _ = writeln!(
                out,
                "{runs} run(s) UNDECIDED: cut by a limit (the horizon or the trace budget) before their boundary; \
                 first seed {first}\n      {}",
                self.replay_command(first)
            );
        }
        let failed_closed = match self.failed_closed {
            Some((runs, first)) => format!("{runs} run(s) failed closed (first seed {first})"),
            None => String::new(),
        };
        let _ = writeln!(out);
        for line in
            crate::verdict::verdict_lines(&self.prediction, &judgement, crate::verdict::Lens::Sweep, &failed_closed)
        {
            let _ = writeln!(out, "{line}");
        }
        let _ = writeln!(out, "predicted   {}", crate::verdict::predicted(&self.prediction));
        let _ = writeln!(out, "from        {}", crate::verdict::origin(&self.prediction));
        out
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
    let mut command = format!("handoff run {scenario} --seed {seed}");
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
        panic!("explore::sweep needs a plan that Sweep::check accepts: {error}");
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

/// Runs a sweep with every seed in a worker process (`handoff explore-worker`, see
/// [`crate::workers`]), one per job, each started once and handed seed after seed. A seed whose
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

/// `handoff merge`: combines the `--json` outputs of the shards of one sweep, read line by line.
///
/// Each input is one whole `explore --json` output: its runs (and crashed seeds) in seed order, then
/// its summary line. The inputs must agree on the scenario, the `--set`s, the range (`--start`,
/// `--seeds`) and the number of shards N; each shard may be given once (so no seed is counted twice);
/// a shard that is missing is named in the merged summary's `shard`. Every input's lines must be
/// exactly its shard's seeds (all of them, unless a `--check-determinism` stop ended it early) and
/// agree with its summary's counts. Memory does not grow with the runs.
pub fn merge<R: std::io::BufRead>(inputs: Vec<(String, R)>) -> Result<Summary, String> {
    let mut first: Option<(String, Summary, Sweep)> = None;
    let mut shards: BTreeMap<u64, String> = BTreeMap::new();
    // The runs are counted as they come; the prediction is the shards' (their summary lines').
    let mut merged = Summary::new(
        "",
        &[],
        (1, 1),
        &Prediction {
            verdict: handoff_models::scenario::spec::Verdict::Holds,
            findings: Vec::new(),
            allow: Vec::new(),
            may_fail_closed: false,
            why: String::new(),
            origin: PredictionOrigin::File,
        },
    );
    let (mut seconds, mut nondeterministic) = (0.0f64, None::<u64>);
    for (file, reader) in inputs {
        let mut lines = SeedLines::default();
        let mut summary_line: Option<(usize, Summary)> = None;
        for (index, line) in reader.lines().enumerate() {
            let number = index + 1;
            let line = line.map_err(|error| format!("{file}:{number}: cannot read: {error}"))?;
            if line.trim().is_empty() {
                continue;
            }
            if let Some((at, _)) = &summary_line {
                return Err(format!(
                    "{file}:{number}: a line after the summary line (line {at}): a file holds one sweep, its runs \
                     then its summary"
                ));
            }
            let value: serde_json::Value =
                serde_json::from_str(&line).map_err(|error| format!("{file}:{number}: not a JSON line: {error}"))?;
            if let Some(summary) = value.get("summary") {
                let summary: Summary = serde_json::from_value(summary.clone())
                    .map_err(|error| format!("{file}:{number}: not a sweep summary: {error}"))?;
                summary_line = Some((number, summary));
            } else if let Some(crash) = value.get("crashed") {
                let crash: Crash = serde_json::from_value(crash.clone())
                    .map_err(|error| format!("{file}:{number}: not a crashed seed: {error}"))?;
                lines.saw(crash.seed, &file, number)?;
                merged.add_crash(&crash);
            } else {
                let run: SeedRun = serde_json::from_value(value)
                    .map_err(|error| format!("{file}:{number}: not a sweep run: {error}"))?;
                lines.saw(run.seed, &file, number)?;
                merged.add(&run);
            }
        }
        let (at, summary) = summary_line.ok_or_else(|| {
            format!(
                "{file}: no summary line at the end: the sweep did not finish or the file was cut short (merge takes \
                 whole `handoff explore --json` outputs)"
            )
        })?;
        let shard = parse_shard(&summary.shard).ok_or_else(|| {
            format!(
                "{file}:{at}: shard \"{}\" is not K/N (a merged summary cannot be merged again: merge the shards' own \
                 files)",
                summary.shard
            )
        })?;
        let plan = Sweep {
            start: summary.start,
            seeds: summary.seeds,
            jobs: 1,
            shard,
            check_determinism: false,
            progress: false,
        };
        plan.check().map_err(|error| format!("{file}:{at}: the summary's range is not a sweep: {error}"))?;
        match &first {
            None => first = Some((file.clone(), summary.clone(), plan.clone())),
            Some((first_file, base, base_plan)) => {
                if base.scenario != summary.scenario || base.sets != summary.sets {
                    return Err(format!(
                        "{file}:{at}: a sweep of {} {}, but {first_file} is a sweep of {} {}: only sweeps of one \
                         scenario merge",
                        summary.scenario,
                        sets_text(&summary.sets),
                        base.scenario,
                        sets_text(&base.sets)
                    ));
                }
                if base.prediction != summary.prediction {
                    return Err(format!(
                        "{file}:{at}: this sweep was judged against another prediction than {first_file}'s ({} from {}, \
                         against {} from {}): merge the shards of one sweep (the same --variant and --expect)",
                        crate::verdict::predicted(&summary.prediction),
                        crate::verdict::origin(&summary.prediction),
                        crate::verdict::predicted(&base.prediction),
                        crate::verdict::origin(&base.prediction)
                    ));
                }
                if (base_plan.start, base_plan.seeds, base_plan.shard.1) != (plan.start, plan.seeds, plan.shard.1) {
                    return Err(format!(
                        "{file}:{at}: shard {} of {}, but {first_file} is shard {} of {}: merge the shards of one \
                         sweep (the same --start, --seeds and number of shards N)",
                        summary.shard,
                        range_text(&plan),
                        base.shard,
                        range_text(base_plan)
                    ));
                }
            }
        }
        if let Some(other) = shards.insert(shard.0, file.clone()) {
            return Err(format!(
                "{file}: shard {} is also {other}: give each shard once (its seeds would count twice)",
                summary.shard
            ));
        }
        lines.check(&file, &summary, &plan)?;
        seconds = seconds.max(summary.seconds);
        nondeterministic = match (nondeterministic, summary.nondeterministic_seed) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    let (_, base, plan) = first.ok_or("no input to merge")?;
    let mut label = shards.keys().map(|k| format!("{k}/{}", plan.shard.1)).collect::<Vec<_>>().join(" + ");
    let missing = plan.shard.1 - shards.len() as u64;
    if missing > 0 && missing <= 8 {
        let names: Vec<String> =
            (1..=plan.shard.1).filter(|k| !shards.contains_key(k)).map(|k| format!("{k}/{}", plan.shard.1)).collect();
        label.push_str(&format!(" (missing: {})", names.join(", ")));
    } else if missing > 8 {
        label.push_str(&format!(" (missing: {missing} of the {} shards)", plan.shard.1));
    }
    merged.scenario = base.scenario;
    merged.sets = base.sets;
    merged.prediction = base.prediction;
    merged.start = plan.start;
    merged.seeds = plan.seeds;
    merged.shard = label;
    merged.seconds = seconds;
    merged.runs_per_second = merged.runs as f64 / seconds.max(1e-9);
    merged.nondeterministic_seed = nondeterministic;
    merged.finish();
    Ok(merged)
}

/// The seeds of one input's lines, checked as they come without keeping them: strictly rising by
/// one step, so that at the summary they can be compared with the shard's seeds.
#[derive(Default)]
struct SeedLines {
    count: u64,
    first: Option<u64>,
    last: u64,
    step: Option<u64>,
}

impl SeedLines {
    fn saw(&mut self, seed: u64, file: &str, number: usize) -> Result<(), String> {
        if self.first.is_some() {
            let step = seed.checked_sub(self.last).filter(|step| *step > 0).ok_or_else(|| {
                format!(
                    "{file}:{number}: seed {seed} after seed {}: a sweep writes its seeds in rising order, once each",
                    self.last
                )
            })?;
            if *self.step.get_or_insert(step) != step {
                return Err(format!(
                    "{file}:{number}: seed {seed} after seed {}: the seeds of a shard are evenly spaced, and these \
                     lines skip one",
                    self.last
                ));
            }
        }
        self.first.get_or_insert(seed);
        self.last = seed;
        self.count += 1;
        Ok(())
    }

    fn check(&self, file: &str, summary: &Summary, plan: &Sweep) -> Result<(), String> {
        let shard = format!("shard {} of {}", summary.shard, range_text(plan));
        if let Some(first) = self.first
            && (first != plan.seed(0) || self.step.is_some_and(|step| step != plan.shard.1))
        {
            return Err(format!(
                "{file}: the lines' seeds ({first}, then every {}) are not those of {shard} ({}, then every {})",
                self.step.unwrap_or(plan.shard.1),
                plan.seed(0),
                plan.shard.1
            ));
        }
        let complete = summary.nondeterministic_seed.is_none();
        if self.count > plan.count() || (complete && self.count < plan.count()) {
            return Err(format!(
                "{file}: {} seed line(s), but {shard} has {} seeds: the file was cut short or added to",
                self.count,
                plan.count()
            ));
        }
        if summary.runs + summary.crashed_runs != self.count {
            return Err(format!(
                "{file}: the summary counts {} run(s) and {} crashed seed(s), but the file has {} seed line(s)",
                summary.runs, summary.crashed_runs, self.count
            ));
        }
        Ok(())
    }
}

/// Parses a summary's `K/N`.
fn parse_shard(text: &str) -> Option<(u64, u64)> {
    let (k, n) = text.split_once('/')?;
    Some((k.parse().ok()?, n.parse().ok()?))
}

fn range_text(plan: &Sweep) -> String {
    format!("--start {} --seeds {}", plan.start, plan.seeds)
}

fn sets_text(sets: &[String]) -> String {
    if sets.is_empty() {
        "with no --set".to_string()
    } else {
        sets.iter().map(|set| format!("--set '{set}'")).collect::<Vec<_>>().join(" ")
    }
}
