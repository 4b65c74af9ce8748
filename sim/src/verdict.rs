//! What a verdict says, in words, for every lens: the prediction in a line, where it came from,
//! and whether it held (`prediction held: I2 no resurrection was violated, as predicted`). The
//! decision itself is [`handoff_models::judge::verdict::judge`]'s; `--json` gives its fields, not these
//! words.

use handoff_models::judge::verdict::{Judgement, Outcome};
use handoff_models::scenario::spec::{Invariant, Prediction, PredictionOrigin, Verdict};

fn invariants(list: &[Invariant]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list.iter().map(|i| format!("{i} {}", i.name())).collect::<Vec<_>>().join(", ")
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
    if prediction.may_fail_closed && prediction.verdict == Verdict::Holds {
        text.push_str(" (or it may fail closed: stop safely short and say why)");
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
pub fn prediction_line(prediction: &Prediction) -> String {
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
                    // An allowed I11 says the pipeline did not catch up: then say nothing of it.
                    _ if judgement.of(Invariant::I11).is_some_and(Outcome::seen) => "",
                    _ if judgement.failing_closed.is_some_and(Outcome::seen) => "",
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
                Lens::Check | Lens::CheckSoFar => {
                    "predicted the pipeline to fail closed, but no path of the bound does".to_string()
                }
                Lens::Run => "predicted the pipeline to fail closed, but it caught up with the source".to_string(),
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
