//! What `handoff run` prints: a narrated timeline, the findings, the handoff record, whether the
//! prediction held, the trace hash — as text, or as one JSON object.

use crate::runner::{RunLimit, RunResult};
use handoff_models::checkers::Finding;
use handoff_models::narrate::{self, Names};
use handoff_models::spec::{Invariant, Prediction, PredictionOrigin, Spec, Trigger, Verdict};
use handoff_models::verdict::{Judgement, Outcome};
use serde::Serialize;
use std::fmt::Write;

pub fn names(spec: &Spec) -> Names {
    Names {
        tables: spec.tables.iter().map(|t| t.name.clone()).collect(),
        topic_prefix: spec.debezium.topic_prefix.clone(),
    }
}

/// The narrated timeline, one line per event worth reading; a run cut by a limit ends with a
/// line that says so.
pub fn timeline(spec: &Spec, result: &RunResult) -> Vec<String> {
    let names = names(spec);
    let mut lines: Vec<String> = result.trace.iter().filter_map(|event| narrate::line(event, &names)).collect();
    if let Some(limit) = result.limit {
        let at = handoff_models::time::SimTime(result.sim_time_ms).to_string();
        lines.push(format!(
            "{at:<10} {:<9} RUN ENDED: it reached {limit} before its acceptance boundary, undecided",
            "harness"
        ));
    }
    lines
}

/// What to do about a limit the run reached.
fn limit_advice(limit: &RunLimit) -> String {
    match limit {
        RunLimit::Horizon { .. } => format!(
            "raise acceptance.horizon_ms (at most {}) to let it run longer",
            handoff_models::limits::MAX_HORIZON_MS
        ),
        RunLimit::TraceBudget { .. } => {
            "it grew past what a run may hold in memory: give it fewer rows, transactions or faults".into()
        }
    }
}

/// What a prediction says, in a line: `violated: I2 no resurrection (may also be violated: I3
/// monotonic apply)`.
pub fn predicted(prediction: &Prediction) -> String {
    let mut text = match prediction.verdict {
        Verdict::Holds => "holds: no invariant violated, and the pipeline catches up".to_string(),
        Verdict::Violated => format!("violated: {}", invariants(&prediction.findings)),
        Verdict::FailsClosed => {
            "fails closed: the pipeline stops safely short of its acceptance boundary, no invariant violated"
                .to_string()
        }
    };
    if !prediction.allow.is_empty() {
        text.push_str(&format!(" (may also be violated: {})", invariants(&prediction.allow)));
    }
    text
}

/// Where the prediction comes from, for the header: `the scenario's [prediction]`, `variant
/// snapshot-epoch`, `--expect I2`, or that there is none.
pub fn origin(prediction: &Prediction) -> String {
    match &prediction.origin {
        PredictionOrigin::File => "the scenario's [prediction]".to_string(),
        PredictionOrigin::Variant { name, chosen: true } => format!("the scenario's variant `{name}` (--variant)"),
        PredictionOrigin::Variant { name, chosen: false } => {
            format!("the scenario's variant `{name}`, whose settings the --set arguments give")
        }
        PredictionOrigin::Expect { text, variant: None } => format!("--expect {text}"),
        PredictionOrigin::Expect { text, variant: Some(name) } => format!("--expect {text} (on --variant {name})"),
        PredictionOrigin::Unpredicted { variant, sets } => format!(
            "NO PREDICTION for this changed design ({}): judged against holds; pass --expect or --variant",
            variant
                .iter()
                .map(|name| format!("--variant {name}"))
                .chain(sets.iter().cloned())
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

/// The header's prediction line.
fn prediction_line(prediction: &Prediction) -> String {
    match &prediction.origin {
        PredictionOrigin::Unpredicted { .. } => format!("predicted {}", origin(prediction)),
        _ => format!("predicted {}; from {}", predicted(prediction), origin(prediction)),
    }
}

/// Who saw what, in the words of a verdict: one run, a sweep's runs, a bound's states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lens {
    Run,
    Sweep,
    Check,
    /// A bound cut short: what it has explored so far.
    CheckSoFar,
}

impl Lens {
    fn never(self) -> &'static str {
        match self {
            Lens::Run => "the run did not violate it",
            Lens::Sweep => "no run violated it",
            Lens::Check => "no state of the bound violates it",
            Lens::CheckSoFar => "no state explored before the cut violates it",
        }
    }
}

fn joined(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn named(invariant: Invariant) -> String {
    format!("{invariant} {}", invariant.name())
}

/// The verdict: `prediction held: I2 no resurrection was violated, as predicted`, or `prediction
/// NOT held: ` and each thing that is not as predicted, then what was allowed. `failed_closed` is
/// how the lens tells that the pipeline failed closed (a run: when, why and what the sink then
/// held; a sweep: how many runs).
pub fn verdict_lines(prediction: &Prediction, judgement: &Judgement, lens: Lens, failed_closed: &str) -> Vec<String> {
    let of = |outcome: Outcome| judgement.with(outcome).map(named).collect::<Vec<_>>();
    let mut lines = Vec::new();
    if judgement.held() {
        let seen = of(Outcome::ViolatedAsPredicted);
        let plural = if seen.len() == 1 { "was" } else { "were" };
        lines.push(match (prediction.verdict, judgement.failing_closed) {
            (Verdict::FailsClosed, Some(_)) => format!(
                "prediction held: {failed_closed}; no invariant was violated{}, as predicted",
                if of(Outcome::AllowedAndViolated).is_empty() { "" } else { " but those allowed" }
            ),
            (Verdict::Violated, _) => format!("prediction held: {} {plural} violated, as predicted", joined(&seen)),
            (_, _) => format!(
                "prediction held: no invariant was violated{}{}, as predicted",
                if of(Outcome::AllowedAndViolated).is_empty() { "" } else { " but those allowed" },
                match lens {
                    Lens::Run => " and the pipeline caught up",
                    Lens::Sweep => " and every run caught up",
                    Lens::Check | Lens::CheckSoFar => "",
                }
            ),
        });
        if prediction.verdict == Verdict::Violated && judgement.failing_closed.is_some() {
            lines.push(format!("then {failed_closed} (a violated design may stop short)"));
        }
    } else {
        let mut problems: Vec<String> = Vec::new();
        for invariant in judgement.with(Outcome::PredictedButNeverSeen) {
            problems.push(format!("predicted {} to be violated, but {}", named(invariant), lens.never()));
        }
        let unexpected = of(Outcome::Unexpected);
        if !unexpected.is_empty() {
            problems.push(format!(
                "{} {} violated, which the prediction neither requires nor allows",
                joined(&unexpected),
                if unexpected.len() == 1 { "was" } else { "were" }
            ));
        }
        match judgement.failing_closed {
            Some(Outcome::Unexpected) => problems.push(format!(
                "{failed_closed}{}; the prediction says the pipeline catches up",
                if judgement.invariants.iter().any(|judged| judged.outcome.seen()) {
                    ""
                } else {
                    "; no invariant was violated"
                }
            )),
            Some(Outcome::PredictedButNeverSeen) => problems.push(match lens {
                Lens::Sweep => "predicted the pipeline to fail closed, but every run caught up".to_string(),
                _ => "predicted the pipeline to fail closed, but it caught up with the source".to_string(),
            }),
            _ => {}
        }
        lines.push(format!("prediction NOT held: {}", problems.join("; ")));
    }
    let allowed: Vec<String> = judgement
        .invariants
        .iter()
        .filter_map(|judged| match judged.outcome {
            Outcome::AllowedAndViolated => Some(format!("{} (violated)", named(judged.invariant))),
            Outcome::AllowedNotViolated => Some(format!("{} (not violated)", named(judged.invariant))),
            _ => None,
        })
        .collect();
    if !allowed.is_empty() {
        lines.push(format!("allowed to be violated: {}", allowed.join(", ")));
    }
    lines
}

/// How a run failed closed, for its verdict: when, why, and what the sink held then.
fn failed_closed_text(result: &RunResult) -> String {
    let Some(stopped) = &result.failed_closed else { return String::new() };
    let sink = match &result.record {
        Some(record)
            if record.keys_missing.is_empty() && record.keys_differing.is_empty() && record.keys_extra.is_empty() =>
        {
            "the sink matched the source where the run ended".to_string()
        }
        Some(record) => format!(
            "the sink is {} key(s) missing / {} differing / {} extra where the run ended, short of its acceptance \
             boundary",
            record.keys_missing.len(),
            record.keys_differing.len(),
            record.keys_extra.len()
        ),
        None => "the run ended short of its acceptance boundary".to_string(),
    };
    format!("the pipeline failed closed at {} ({}) and {sink}", stopped.at, stopped.reason)
}

fn invariants(list: &[Invariant]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list.iter().map(|i| format!("{i} {}", i.name())).collect::<Vec<_>>().join(", ")
    }
}

/// The run's options, printed at its start.
pub fn header(spec: &Spec, scenario: &str, result: &RunResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "scenario  {} ({scenario})", spec.name);
    if let Some(line) = spec.description.lines().find(|l| !l.trim().is_empty()) {
        let _ = writeln!(out, "          {}", line.trim());
    }
    let _ = writeln!(out, "{}", prediction_line(&spec.prediction));
    // A scheduled run is the bound's world.
    let rows: u32 = match (&spec.schedule, &spec.check) {
        (Some(_), Some(check)) => check.rows * spec.tables.len() as u32,
        _ => spec.tables.iter().map(|t| t.rows).sum(),
    };
    let _ = writeln!(
        out,
        "seed      {}; PostgreSQL {}, snapshot.mode={}, offset.flush.interval.ms={}, {} partition(s), sink apply={}, {} rows",
        result.seed,
        spec.postgres_major_version,
        spec.debezium.snapshot_mode.name(),
        spec.connect.offset_flush_interval_ms,
        spec.kafka_partitions,
        spec.sink_rule.name(),
        rows
    );
    for (index, fault) in result.schedule.iter().enumerate() {
        let origin = if index < spec.faults.len() { "" } else { "  (generated from the seed)" };
        let _ = writeln!(out, "fault     {} at {}{origin}", fault.action, trigger(&fault.trigger));
    }
    if let Some(profile) = &spec.profile {
        let kinds: Vec<&str> = profile.kinds.iter().map(|kind| kind.name()).collect();
        let _ = writeln!(
            out,
            "profile   up to {} fault(s) from {} in {}..{}",
            profile.max_faults,
            kinds.join(", "),
            handoff_models::time::SimTime(profile.window_ms.0),
            handoff_models::time::SimTime(profile.window_ms.1)
        );
    }
    if let (Some(schedule), Some(check)) = (&spec.schedule, &spec.check) {
        let _ = writeln!(
            out,
            "schedule  {} steps through the [check] bound, one every {} ms; then the run goes on as usual",
            schedule.steps.len(),
            schedule.step_ms
        );
        for (index, txn) in check.scripts.iter().enumerate() {
            let label = if txn.label.is_empty() { "transaction" } else { &txn.label };
            let _ = writeln!(out, "script {index}  {label}");
        }
    }
    for txn in &spec.scripted {
        let _ = writeln!(
            out,
            "scripted  {} at {}",
            if txn.label.is_empty() { "transaction" } else { &txn.label },
            trigger(&txn.trigger)
        );
    }
    if let Some(background) = spec.background {
        let _ = writeln!(
            out,
            "workload  {:.1} inserts/s, {:.1} updates/s, {:.1} deletes/s from {} ms to {} ms (from the seed)",
            background.inserts_per_second,
            background.updates_per_second,
            background.deletes_per_second,
            background.start_ms,
            background.end_ms
        );
    }
    out
}

fn trigger(trigger: &Trigger) -> String {
    trigger.to_string()
}

/// The whole text report.
pub fn text(spec: &Spec, scenario: &str, result: &RunResult) -> String {
    let mut out = header(spec, scenario, result);
    let _ = writeln!(out, "\ntimeline");
    for line in timeline(spec, result) {
        let _ = writeln!(out, "  {line}");
    }
    let _ = writeln!(out, "\nfindings ({})", result.findings.len());
    if result.findings.is_empty() {
        let _ = writeln!(out, "  none: {} held", invariants(&Invariant::CHECKED));
    }
    for finding in &result.findings {
        let _ = writeln!(out, "  {finding}");
    }
    if let Some(stopped) = &result.failed_closed {
        let _ = writeln!(
            out,
            "  the pipeline FAILED CLOSED at {}: {} (the connector {} instead of going on; the boundary's checks were \
             not made)",
            stopped.at,
            stopped.reason,
            if stopped.status == "FAILED" { "failed" } else { "stopped" }
        );
    }
    for unfired in &result.unfired {
        let _ = writeln!(out, "  note: trigger never fired: {unfired}");
    }
    if let Some(schedule) = &spec.schedule {
        if result.departures.is_empty() {
            let _ = writeln!(
                out,
                "
schedule  followed step for step ({} steps)",
                schedule.steps.len()
            );
        } else {
            let _ = writeln!(
                out,
                "
schedule  NOT FOLLOWED: the run departed from the path"
            );
            for departure in &result.departures {
                let _ = writeln!(out, "  {departure}");
            }
        }
    }
    if let Some(record) = &result.record {
        let _ = writeln!(out, "\nhandoff record");
        out.push_str(&record.render());
    }
    let prediction = &spec.prediction;
    let _ = writeln!(out);
    let verdict = match &result.limit {
        Some(limit) => vec![format!("prediction UNDECIDED: the run reached {limit} first; {}", limit_advice(limit))],
        None => verdict_lines(prediction, &result.judgement, Lens::Run, &failed_closed_text(result)),
    };
    for line in verdict {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "predicted   {}", predicted(prediction));
    let _ = writeln!(out, "from        {}", origin(prediction));
    for line in prediction.why.lines().filter(|l| !l.trim().is_empty()) {
        let _ = writeln!(out, "            {}", line.trim());
    }
    let _ = writeln!(
        out,
        "trace hash  {:016x} ({} events, {}.{:03}s simulated)",
        result.trace_hash,
        result.events,
        result.sim_time_ms / 1000,
        result.sim_time_ms % 1000
    );
    out
}

#[derive(Serialize)]
struct JsonFinding<'a> {
    invariant: String,
    name: &'a str,
    key: Option<i64>,
    expected: &'a str,
    seen: &'a str,
    at_ms: u64,
    lsn: Option<String>,
    detail: &'a str,
    occurrences: u32,
}

impl<'a> From<&'a Finding> for JsonFinding<'a> {
    fn from(finding: &'a Finding) -> Self {
        JsonFinding {
            invariant: finding.invariant.to_string(),
            name: &finding.name,
            key: finding.key,
            expected: &finding.expected,
            seen: &finding.seen,
            at_ms: finding.at.ms(),
            lsn: finding.lsn.map(|lsn| lsn.to_string()),
            detail: &finding.detail,
            occurrences: finding.occurrences,
        }
    }
}

/// The JSON report: one object.
pub fn json(spec: &Spec, scenario: &str, result: &RunResult) -> serde_json::Value {
    let findings: Vec<JsonFinding> = result.findings.iter().map(JsonFinding::from).collect();
    let names = |list: &[Invariant]| list.iter().map(|i| i.to_string()).collect::<Vec<_>>();
    serde_json::json!({
        "scenario": scenario,
        "name": spec.name,
        "seed": result.seed,
        "trace_hash": format!("{:016x}", result.trace_hash),
        "findings": findings,
        "prediction": {
            "expected": {
                "verdict": spec.prediction.verdict.name(),
                "findings": names(&spec.prediction.findings),
                "allow": names(&spec.prediction.allow),
                "why": spec.prediction.why,
                "origin": spec.prediction.origin,
            },
            "held": result.prediction_held,
            "undecided": result.limit.is_some(),
            "invariants": result.judgement.invariants,
            "failing_closed": result.judgement.failing_closed,
        },
        "failed_closed": result.failed_closed.as_ref().map(|stopped| serde_json::json!({
            "at_ms": stopped.at.ms(),
            "status": stopped.status,
            "reason": stopped.reason,
        })),
        "handoff_record": result.record,
        "stats": {
            "events": result.events,
            "sim_time_ms": result.sim_time_ms,
            "trace_items": result.trace_items,
            "horizon_ms": spec.acceptance.horizon_ms,
        },
        "limit": result.limit.map(|limit| match limit {
            RunLimit::Horizon { horizon_ms } => serde_json::json!({ "kind": "horizon", "horizon_ms": horizon_ms }),
            RunLimit::TraceBudget { items, budget } => {
                serde_json::json!({ "kind": "trace-budget", "trace_items": items, "budget": budget })
            }
        }),
        "unfired_triggers": result.unfired,
        "schedule_departures": result.departures,
        "timeline": timeline(spec, result),
    })
}
