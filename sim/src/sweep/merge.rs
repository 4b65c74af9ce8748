//! `handoff merge`: one summary from the `--json` outputs of a sweep's shards.

use super::*;

/// `handoff merge`: combines the `--json` outputs of the shards of one sweep, read line by line.
///
/// Each input is one whole `sweep --json` output: its runs (and crashed seeds) in seed order, then
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
            let version = crate::timed::report::JSON_SCHEMA_VERSION;
            match value.get("schema_version").and_then(serde_json::Value::as_u64) {
                Some(found) if found == u64::from(version) => {}
                found => {
                    return Err(format!(
                        "{file}:{number}: {}; this merge reads version {version} (docs/json.md): sweep the shards \
                         again with this build",
                        found.map_or("no schema_version".to_owned(), |found| format!("schema_version {found}"))
                    ));
                }
            }
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
                 whole `handoff sweep --json` outputs)"
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
