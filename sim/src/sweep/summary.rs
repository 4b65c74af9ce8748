//! The summary of a sweep: counts of findings, coverage marks and crashed seeds, and its text.

use super::*;

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
        for invariant in &run.violated() {
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

    /// Every run ended, within its limits, as predicted, and deterministically: what `sweep`
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
        let _ = writeln!(out, "sweep     {} ({}), shard {}", spec.name, self.scenario, self.shard);
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
            "  (not marked yet: a slot going unreserved, the commit-visibility race behind the watermarks)"
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
