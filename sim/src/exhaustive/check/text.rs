//! The text report of `handoff check`.

use super::*;

/// The text report.
pub fn text(report: &CheckReport) -> String {
    let mut out = String::new();
    out.push_str(&format!("check     {} ({})\n", report.scenario, report.strategy));
    out.push_str(&format!(
        "states    {} generated, {} unique, max depth {}{}\n",
        report.states,
        report.unique_states,
        report.max_depth,
        if report.complete { "" } else { " (the bound was NOT explored completely)" }
    ));
    if let Some(limit) = report.cut_short_by {
        out.push_str(&format!("cut short by {}\n", limit_text(report, limit)));
    }
    out.push_str(&format!("time      {:.2}s: {:.0} unique states/s", report.seconds, report.unique_states_per_second));
    if report.search_states > 0 {
        out.push_str(&format!("; {:.2}s more for the counterexamples", report.search_seconds));
    }
    out.push('\n');
    match (report.peak_memory_bytes, report.max_memory_bytes) {
        (Some(peak), Some(budget)) => out.push_str(&format!(
            "memory    {} at the peak, of {} (--max-memory)\n",
            size_text(peak),
            size_text(budget)
        )),
        (Some(peak), None) => out.push_str(&format!("memory    {} at the peak\n", size_text(peak))),
        (None, _) => {}
    }
    out.push_str("\nproperties\n");
    for property in &report.properties {
        if property.name == FAILS_CLOSED {
            // An outcome the prediction judges, like an invariant's.
            let outcome = match (&property.outcome, report.complete) {
                (Outcome::Reached, _) => "reached",
                (_, true) => "never",
                (_, false) => "not so far",
            };
            let note = match report.judgement.failing_closed {
                Some(judged) => format!("  {}", judged.label()),
                None => String::new(),
            };
            out.push_str(&format!("  {:<10} {:<40} {outcome}{note}\n", property.expectation, property.name));
            continue;
        }
        let outcome = match property.outcome {
            Outcome::Holds if report.complete => "holds",
            Outcome::Holds => "holds so far",
            Outcome::Counterexample => "COUNTEREXAMPLE",
            Outcome::Reached => "reached",
            Outcome::NotReached => "NOT REACHED",
        };
        let judged = property.invariant.and_then(|invariant| report.judgement.of(invariant));
        let note = match (&property.outcome, judged) {
            (Outcome::Holds, Some(Judged::PredictedButNeverSeen)) if !report.complete => {
                "  PREDICTED BUT NOT FOUND before the cut (it may lie past it)".to_string()
            }
            (Outcome::Holds | Outcome::Counterexample, Some(judged)) => format!("  {}", judged.label()),
            (Outcome::NotReached, _) if property.expected => "  expected (unreached_ok)".to_string(),
            (Outcome::NotReached, _) => "  the bound proves nothing about it".to_string(),
            _ => String::new(),
        };
        out.push_str(&format!("  {:<10} {:<40} {outcome}{note}\n", property.expectation, property.name));
    }
    for invariant in &report.not_checked {
        out.push_str(&format!(
            "  {:<10} {:<40} not checked by this lens (the prediction names it; run or sweep checks it)\n",
            "",
            format!("{invariant} {}", invariant.name())
        ));
    }
    out.push('\n');
    match report.verdict {
        Verdict::Inconclusive => out.push_str(
            "prediction UNDECIDED: the bound was NOT explored completely, and nothing found so far contradicts it\n",
        ),
        _ => {
            let lens = if report.complete { crate::verdict::Lens::Check } else { crate::verdict::Lens::CheckSoFar };
            let failed_closed = match &report.stopped_short {
                Some(reason) => format!("a path of the bound fails closed ({reason})"),
                None => "some path of the bound fails closed".to_owned(),
            };
            for line in crate::verdict::verdict_lines(&report.prediction, &report.judgement, lens, &failed_closed) {
                out.push_str(&format!("{line}\n"));
            }
            if report.judgement.failing_closed == Some(Judged::AllowedAndViolated) {
                out.push_str(&format!("allowed to fail closed: {failed_closed}\n"));
            }
        }
    }
    out.push_str(&format!(
        "predicted   {}\nfrom        {}\n",
        crate::verdict::predicted(&report.prediction),
        crate::verdict::origin(&report.prediction)
    ));
    for property in report.properties.iter().filter(|p| p.outcome == Outcome::Counterexample || !p.path.is_empty()) {
        let what = if property.outcome == Outcome::Counterexample { "counterexample" } else { "path" };
        let which = match property.search_cut_short_by {
            None => "the shortest BFS finds".to_owned(),
            Some(limit) => format!(
                "as the exploration found it, NOT the shortest: the search for that was cut short by {}",
                limit_text(report, limit)
            ),
        };
        out.push_str(&format!(
            "\n{what}: {} ({} steps, {which})\n{}",
            property.name,
            property.steps.len(),
            property.story
        ));
    }
    out
}

/// A limit, as the report names it.
fn limit_text(report: &CheckReport, limit: Limit) -> String {
    match limit {
        Limit::Timeout => match report.timeout_seconds {
            Some(seconds) => format!("the timeout (--timeout {seconds})"),
            None => "the timeout".to_owned(),
        },
        Limit::MaxStates => format!("the state limit (--max-states {})", report.max_states),
        Limit::MaxMemory => match report.max_memory_bytes {
            Some(bytes) => format!(
                "the memory budget (--max-memory {}; the command stops at {} % of it)",
                size_text(bytes),
                crate::exhaustive::budget::STOP_PERCENT
            ),
            None => "the memory budget".to_owned(),
        },
        Limit::MaxDepth => "the depth limit (--max-depth): paths end there".to_owned(),
        Limit::Sampled => "random walks, which sample the bound and never explore it completely".to_owned(),
    }
}
