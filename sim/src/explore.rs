//! Seed sweeps: `handoff explore`, `handoff merge`.
//!
//! A sweep runs a range of seeds of one scenario, each in its own fresh madsim runtime on one of
//! `--jobs` threads. A run's trace is never kept; its findings, coverage marks and trace hash are
//! counted into the summary and handed on (a `--json` line) in seed order, then dropped, so memory
//! does not grow with the sweep. The report (but for its timing) does not depend on the number of
//! threads.
//! `--shard K/N` takes every N-th seed of the range, starting with the K-th, so N machines of any
//! batch system can share a sweep; `handoff merge` combines their `--json` outputs.

use crate::runner::{self, RunOptions, RunResult};
use handoff_models::coverage::Mark;
use handoff_models::spec::{Invariant, Spec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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
    /// The seeds of this shard, in order.
    pub fn seeds(&self) -> Vec<u64> {
        let (k, n) = self.shard;
        (self.start..self.start.saturating_add(self.seeds)).filter(|seed| (seed - self.start) % n == k - 1).collect()
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
}

impl SeedRun {
    fn from(spec: &Spec, result: &RunResult) -> SeedRun {
        let findings = result.violated();
        let unexpected = findings
            .iter()
            .copied()
            .filter(|invariant| {
                !spec.prediction.findings.contains(invariant) && !spec.prediction.allow.contains(invariant)
            })
            .collect();
        SeedRun {
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

/// A sweep's summary, also the last `--json` line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub scenario: String,
    /// The `--set` arguments of the sweep (replay commands repeat them).
    pub sets: Vec<String>,
    pub shard: String,
    pub runs: u64,
    pub seconds: f64,
    pub runs_per_second: f64,
    /// Invariant → (runs that violated it, first such seed).
    pub findings: BTreeMap<Invariant, (u64, u64)>,
    /// Runs with a finding the prediction does not cover.
    pub unexpected_runs: u64,
    /// Runs cut by a limit before their boundary (undecided), and the first such seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited: Option<(u64, u64)>,
    /// Mark → runs that reached it.
    pub coverage: BTreeMap<Mark, u64>,
    /// The first seed whose two runs differed, with `--check-determinism`.
    pub nondeterministic_seed: Option<u64>,
}

impl Summary {
    pub fn new(scenario: &str, sets: &[String], shard: (u64, u64)) -> Summary {
        Summary {
            scenario: scenario.to_string(),
            sets: sets.to_vec(),
            shard: format!("{}/{}", shard.0, shard.1),
            runs: 0,
            seconds: 0.0,
            runs_per_second: 0.0,
            findings: BTreeMap::new(),
            unexpected_runs: 0,
            limited: None,
            coverage: Mark::ALL.iter().map(|mark| (*mark, 0)).collect(),
            nondeterministic_seed: None,
        }
    }

    pub fn add(&mut self, run: &SeedRun) {
        self.runs += 1;
        for invariant in &run.findings {
            let entry = self.findings.entry(*invariant).or_insert((0, run.seed));
            entry.0 += 1;
            entry.1 = entry.1.min(run.seed);
        }
        if !run.unexpected.is_empty() {
            self.unexpected_runs += 1;
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

    /// The command that replays one seed of this sweep.
    pub fn replay_command(&self, seed: u64) -> String {
        let mut command = format!("handoff run {} --seed {seed}", self.scenario);
        for set in &self.sets {
            command.push_str(&format!(" --set '{set}'"));
        }
        command
    }

    pub fn render(&self, spec: &Spec) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "explore   {} ({}), shard {}", spec.name, self.scenario, self.shard);
        let _ = writeln!(out, "runs      {} in {:.1}s: {:.0} runs/s", self.runs, self.seconds, self.runs_per_second);
        if let Some(seed) = self.nondeterministic_seed {
            let _ = writeln!(out, "DETERMINISM BROKEN: seed {seed} gave two different traces");
        }
        let _ = writeln!(out, "\nfindings by invariant (runs; first seed; replay)");
        if self.findings.is_empty() {
            let _ = writeln!(out, "  none");
        }
        for (invariant, (runs, first)) in &self.findings {
            let expected = spec.prediction.findings.contains(invariant) || spec.prediction.allow.contains(invariant);
            let _ = writeln!(
                out,
                "  {invariant} {:<20} {runs:>7} runs  first seed {first:<6} {}\n      {}",
                invariant.name(),
                if expected { "predicted" } else { "NOT PREDICTED" },
                self.replay_command(*first)
            );
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
        out
    }

    /// Whether the sweep found what it should not have: a finding the prediction does not
    /// cover, a run it could not decide, or two runs of one seed that differ.
    pub fn failed(&self) -> bool {
        self.nondeterministic_seed.is_some() || self.unexpected_runs > 0 || self.limited.is_some()
    }
}

/// Runs a sweep. `each` sees every run in seed order as soon as the runs before it are done (to
/// print `--json` lines as the sweep goes); nothing of a run is kept once it has been counted and
/// handed to `each`, so memory stays flat however many seeds are swept.
pub fn sweep(spec: &Spec, scenario: &str, sets: &[String], plan: &Sweep, each: impl FnMut(&SeedRun) + Send) -> Summary {
    let seeds = plan.seeds();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let nondeterministic: Mutex<Option<u64>> = Mutex::new(None);
    let ordered = Mutex::new(InOrder {
        next: 0,
        waiting: BTreeMap::new(),
        summary: Summary::new(scenario, sets, plan.shard),
        each,
    });
    let bar = plan.progress.then(|| {
        let bar = indicatif::ProgressBar::new(seeds.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} seeds  {per_sec}  eta {eta}  {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    // Timing a whole sweep is outside every simulated run.
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..plan.jobs.max(1) {
            scope.spawn(|| {
                loop {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&seed) = seeds.get(index) else { return };
                    let result = runner::run_with(spec, seed, RunOptions::SWEEP);
                    if plan.check_determinism {
                        let again = runner::run_with(spec, seed, RunOptions::SWEEP);
                        if again.trace_hash != result.trace_hash {
                            let mut first = nondeterministic.lock().expect("lock");
                            *first = Some(first.map_or(seed, |other: u64| other.min(seed)));
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                    let run = SeedRun::from(spec, &result);
                    drop(result);
                    if let Some(bar) = &bar {
                        bar.inc(1);
                        if !run.findings.is_empty() {
                            bar.set_message(format!("last finding: seed {seed}"));
                        }
                    }
                    ordered.lock().expect("lock").arrived(index, run);
                }
            });
        }
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let seconds = started.elapsed().as_secs_f64();
    let InOrder { mut summary, waiting, .. } = ordered.into_inner().expect("lock");
    // Only a determinism stop leaves runs waiting behind a seed that never ran; they count too.
    for run in waiting.values() {
        summary.add(run);
    }
    summary.seconds = seconds;
    summary.runs_per_second = summary.runs as f64 / seconds.max(1e-9);
    summary.nondeterministic_seed = nondeterministic.into_inner().expect("lock");
    summary
}

/// Runs a sweep and keeps every run, in seed order (for tests and small sweeps).
pub fn sweep_collect(spec: &Spec, scenario: &str, sets: &[String], plan: &Sweep) -> (Summary, Vec<SeedRun>) {
    let mut runs = Vec::new();
    let summary = sweep(spec, scenario, sets, plan, |run| runs.push(run.clone()));
    (summary, runs)
}

/// Runs finished out of order wait here until the runs before them are done: at most about as
/// many as there are threads.
struct InOrder<F> {
    next: usize,
    waiting: BTreeMap<usize, SeedRun>,
    summary: Summary,
    each: F,
}

impl<F: FnMut(&SeedRun)> InOrder<F> {
    fn arrived(&mut self, index: usize, run: SeedRun) {
        self.waiting.insert(index, run);
        while let Some(run) = self.waiting.remove(&self.next) {
            self.summary.add(&run);
            (self.each)(&run);
            self.next += 1;
        }
    }
}

/// `handoff merge`: combines the `--json` outputs of several shards (or sweeps of one scenario),
/// read line by line; a seed found in two inputs counts once.
pub fn merge<R: std::io::BufRead>(inputs: Vec<(String, R)>) -> Result<Summary, String> {
    let mut seen: std::collections::BTreeSet<u64> = std::collections::BTreeSet::new();
    let mut base: Option<Summary> = None;
    let mut merged: Option<Summary> = None;
    let (mut seconds, mut nondeterministic) = (0.0f64, None::<u64>);
    let mut shards = Vec::new();
    for (file, reader) in inputs {
        for (number, line) in reader.lines().enumerate() {
            let line = line.map_err(|error| format!("{file}:{}: cannot read: {error}", number + 1))?;
            if line.trim().is_empty() {
                continue;
            }
            let value: serde_json::Value = serde_json::from_str(&line)
                .map_err(|error| format!("{file}:{}: not a JSON line: {error}", number + 1))?;
            if let Some(summary) = value.get("summary") {
                let summary: Summary = serde_json::from_value(summary.clone())
                    .map_err(|error| format!("{file}:{}: not a sweep summary: {error}", number + 1))?;
                if let Some(first) = &base
                    && (first.scenario != summary.scenario || first.sets != summary.sets)
                {
                    return Err(format!(
                        "{file}:{}: a sweep of {} {:?}, not of {} {:?}: only sweeps of one scenario merge",
                        number + 1,
                        summary.scenario,
                        summary.sets,
                        first.scenario,
                        first.sets
                    ));
                }
                seconds = seconds.max(summary.seconds);
                nondeterministic = match (nondeterministic, summary.nondeterministic_seed) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                shards.push(summary.shard.clone());
                base.get_or_insert(summary);
            } else {
                let run: SeedRun = serde_json::from_value(value)
                    .map_err(|error| format!("{file}:{}: not a sweep run: {error}", number + 1))?;
                if seen.insert(run.seed) {
                    merged.get_or_insert_with(|| Summary::new("", &[], (1, 1))).add(&run);
                }
            }
        }
    }
    let base = base.ok_or("no sweep summary line in the inputs (were they written with --json?)")?;
    let mut summary = Summary::new(&base.scenario, &base.sets, (1, 1));
    if let Some(runs) = merged {
        summary.runs = runs.runs;
        summary.findings = runs.findings;
        summary.unexpected_runs = runs.unexpected_runs;
        summary.limited = runs.limited;
        summary.coverage = runs.coverage;
    }
    summary.shard = shards.join(" + ");
    summary.seconds = seconds;
    summary.runs_per_second = summary.runs as f64 / seconds.max(1e-9);
    summary.nondeterministic_seed = nondeterministic;
    Ok(summary)
}
