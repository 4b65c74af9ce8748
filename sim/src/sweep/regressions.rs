//! The seed database: failing runs saved as scenario files with an explicit fault schedule and
//! the finding as their prediction, so that `handoff replay FILE` (and `cargo test`) replays them.

use crate::scenario;
use crate::sweep::Summary;
use crate::timed::runner::{self, RunResult};
use handoff_models::scenario::spec::{Invariant, Prediction, PredictionOrigin, Spec, Verdict};
use std::path::{Path, PathBuf};

/// The scenario that replays one run: the run's whole fault schedule made explicit, no profile,
/// the run's seed, and its findings as the prediction.
pub fn pin(spec: &Spec, result: &RunResult, origin: &str) -> Spec {
    let mut pinned = spec.clone();
    pinned.faults = result.schedule.clone();
    pinned.profile = None;
    let findings: Vec<Invariant> = result.violated();
    let mut why = format!("Found by {origin} at seed {}.", result.seed);
    if let Some(stopped) = &result.failed_closed {
        why.push_str(&format!("\nThe pipeline failed closed at {}: {}", stopped.at, stopped.reason));
    }
    for finding in result.findings.iter().take(3) {
        why.push_str(&format!("\n{finding}"));
    }
    pinned.prediction = Prediction {
        verdict: match (findings.is_empty(), result.failed_closed.is_some()) {
            (false, _) => Verdict::Violated,
            (true, true) => Verdict::FailsClosed,
            (true, false) => Verdict::Holds,
        },
        findings,
        allow: Vec::new(),
        may_fail_closed: false,
        why,
        origin: PredictionOrigin::File,
    };
    pinned
}

/// File name for a pinned run.
pub fn file_name(spec: &Spec, seed: u64) -> String {
    format!("{}-seed-{seed}.toml", spec.name)
}

/// Writes a spec as a scenario file.
pub fn write(spec: &Spec, seed: u64, path: &Path) -> Result<(), String> {
    use std::io::Write;
    let text = scenario::to_toml(spec, seed).map_err(|error| format!("{}: {error}", path.display()))?;
    // A kept regression is edited by hand (its `why`): never overwrite one.
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(path).map_err(|error| {
        if error.kind() == std::io::ErrorKind::AlreadyExists {
            format!(
                "{}: exists already; remove it or choose another file (--out) or directory (--save)",
                path.display()
            )
        } else {
            format!("{}: cannot write: {error}", path.display())
        }
    })?;
    file.write_all(text.as_bytes()).map_err(|error| format!("{}: cannot write: {error}", path.display()))
}

/// `sweep --save DIR`: the first failing seed of each violated invariant, pinned.
pub fn save_first_failures(spec: &Spec, scenario: &str, summary: &Summary, dir: &Path) -> Result<Vec<PathBuf>, String> {
    first_failure_seeds(summary).into_iter().map(|seed| save_seed(spec, scenario, seed, dir)).collect()
}

/// The seeds `--save` keeps: the first failing seed of each violated invariant, and the first run
/// that failed closed, each once, in order.
pub fn first_failure_seeds(summary: &Summary) -> Vec<u64> {
    let mut seeds: Vec<u64> = summary.findings.values().map(|(_, first)| *first).collect();
    seeds.extend(summary.failed_closed.map(|(_, first)| first));
    seeds.sort_unstable();
    seeds.dedup();
    seeds
}

/// Runs one seed of a sweep of `scenario` again, whole, and writes it pinned into `dir` (created
/// if need be) as [`file_name`].
pub fn save_seed(spec: &Spec, scenario: &str, seed: u64, dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|error| format!("{}: cannot create: {error}", dir.display()))?;
    let result = runner::run(spec, seed);
    let pinned = pin(spec, &result, &format!("`handoff sweep {scenario}`"));
    let path = dir.join(file_name(spec, seed));
    write(&pinned, seed, &path)?;
    Ok(path)
}
