//! `[prediction]` (the scenario's, or a variant's) and `--expect`.

use super::ScenarioError;
use super::fields::{Cx, Field, Res, Section};
use super::tree::Val;
use handoff_models::scenario::spec::Invariant;
use handoff_models::scenario::spec::Prediction;
use handoff_models::scenario::spec::PredictionOrigin;
use handoff_models::scenario::spec::Verdict;

/// `--expect`: `holds`, `fails-closed`, or the invariants that must be violated (`I2,I4`); an
/// invariant with a `?` may be violated (`I2,I3?`, `holds,I11?`).
pub(super) fn parse_expect(text: &str, variant: Option<String>) -> Result<Prediction, ScenarioError> {
    let fail = |problem: String| ScenarioError { message: format!("--expect {text}: {problem}") };
    let forms = "expected holds, fails-closed, or the invariants that must be violated, like I2,I4 (with a `?` for \
                 one that may be: I2,I3?, and fails-closed? when the pipeline may stop short)";
    let (mut verdict, mut findings, mut allow) = (None, Vec::new(), Vec::new());
    let mut may_fail_closed = false;
    for item in text.split(',').map(str::trim) {
        match item {
            "" => return Err(fail(format!("an empty item; {forms}"))),
            "fails-closed?" => may_fail_closed = true,
            "holds" | "fails-closed" => {
                let given = if item == "holds" { Verdict::Holds } else { Verdict::FailsClosed };
                if let Some(other) = verdict.replace(given) {
                    return Err(fail(format!("{} and {item} both given; give one verdict", Verdict::name(other))));
                }
            }
            _ => {
                let (name, may) = item.strip_suffix('?').map_or((item, false), |name| (name.trim(), true));
                let invariant =
                    Invariant::parse(name).ok_or_else(|| fail(format!("unknown item `{item}`; {forms}")))?;
                if !Invariant::CHECKED.contains(&invariant) {
                    return Err(fail(format!("{invariant} ({}) is not checked by this version", invariant.name())));
                }
                if findings.contains(&invariant) || allow.contains(&invariant) {
                    return Err(fail(format!("{invariant} is given twice")));
                }
                if may { allow.push(invariant) } else { findings.push(invariant) }
            }
        }
    }
    let verdict = match (verdict, findings.is_empty()) {
        (Some(verdict), true) => verdict,
        (None, false) => Verdict::Violated,
        (Some(verdict), false) => {
            return Err(fail(format!(
                "{} says no invariant is violated, but {} must be; give one or the other",
                verdict.name(),
                findings.iter().map(Invariant::to_string).collect::<Vec<_>>().join(",")
            )));
        }
        (None, true) => return Err(fail(format!("no verdict and no invariant that must be violated; {forms}"))),
    };
    findings.sort();
    allow.sort();
    Ok(Prediction {
        verdict,
        findings,
        allow,
        may_fail_closed,
        why: format!("Given on the command line: --expect {text}."),
        origin: PredictionOrigin::Expect { text: text.to_string(), variant },
    })
}

pub(super) fn prediction(cx: &Cx, root: &Section) -> Res<Prediction> {
    prediction_table(cx, &cx.section(&root.need(cx, "prediction", "; add [prediction] with verdict and why")?)?)
}

/// A `[prediction]` table (the scenario's, or a variant's).
pub(super) fn prediction_table(cx: &Cx, s: &Section) -> Res<Prediction> {
    s.check_keys(cx, "verdict findings allow why", "field")?;
    let verdict_field = s.need(cx, "verdict", "")?;
    let verdict = cx.choice(&verdict_field, &Verdict::ALL.map(|verdict| (verdict.name(), verdict)))?;
    let findings = s.opt("findings", Vec::new(), |field| invariants(cx, field))?;
    let (allow, may_fail_closed) = s.opt("allow", (Vec::new(), false), |field| allowed(cx, field))?;
    let findings_field = s.get("findings");
    let verdict_at = verdict_field.at;
    match (verdict, findings.is_empty(), &findings_field) {
        (Verdict::Holds | Verdict::FailsClosed, false, Some(field)) => {
            return cx.fail(field, format!("must be empty when verdict = \"{}\"", verdict.name()));
        }
        (Verdict::Violated, true, _) => {
            let at = findings_field.as_ref().map_or(verdict_at, |field| field.at);
            return Err(cx.err(
                at,
                &s.field_path("findings"),
                "must name at least one invariant when verdict = \"violated\"",
            ));
        }
        _ => {}
    }
    if let Some(both) = allow.iter().find(|invariant| findings.contains(invariant))
        && let Some(field) = s.get("allow")
    {
        return cx.fail(&field, format!("{both} is already in findings"));
    }
    let why = s.req(cx, "why", |field| match cx.string(field)?.trim() {
        "" => cx.fail(field, "must not be empty: say why the verdict follows"),
        why => Ok(why.to_owned()),
    })?;
    Ok(Prediction { verdict, findings, allow, may_fail_closed, why, origin: PredictionOrigin::File })
}

/// `allow`: invariants that may be violated and, as `"fails-closed"`, whether the pipeline may
/// stop short of its boundary (a design that holds, judged under faults that take its resume
/// position away: it stops and says why).
fn allowed(cx: &Cx, field: &Field) -> Res<(Vec<Invariant>, bool)> {
    let items = cx.items(field, "an array of invariants, like [\"I2\"], or \"fails-closed\"")?;
    let is_fails_closed = |item: &Field| matches!(&item.item.val, Val::Str(text) if text.trim() == "fails-closed");
    let may_fail_closed = items.iter().any(is_fails_closed);
    let rest: Vec<Field> = items.into_iter().filter(|item| !is_fails_closed(item)).collect();
    Ok((invariant_items(cx, rest)?, may_fail_closed))
}

fn invariants(cx: &Cx, field: &Field) -> Res<Vec<Invariant>> {
    invariant_items(cx, cx.items(field, "an array of invariants, like [\"I2\"]")?)
}

fn invariant_items(cx: &Cx, items: Vec<Field>) -> Res<Vec<Invariant>> {
    let mut invariants = Vec::new();
    for item in items {
        let text = cx.string(&item)?;
        let Some(invariant) = Invariant::parse(text.trim()) else {
            return cx.fail(&item, format!("unknown invariant `{text}`; expected I1 to I12"));
        };
        if !Invariant::CHECKED.contains(&invariant) {
            let checked: Vec<String> = Invariant::CHECKED.iter().map(Invariant::to_string).collect();
            let checked = match checked.split_last() {
                Some((last, [])) => last.clone(),
                Some((last, others)) => format!("{} and {last}", others.join(", ")),
                None => "none".to_owned(),
            };
            return cx.fail(
                &item,
                format!("{invariant} ({}) is not checked by this version; it checks {checked}", invariant.name()),
            );
        }
        if invariants.contains(&invariant) {
            return cx.fail(&item, format!("{invariant} is listed twice"));
        }
        invariants.push(invariant);
    }
    Ok(invariants)
}
