//! Loading a scenario: the file's text, the `--set` overrides and a chosen variant applied to its
//! tree, the sections read into a [`Spec`], and the prediction the run is judged against.

use super::fields::{Cx, Section, line_col};
use super::include::expand;
use super::overrides::{Step, apply_set, parse_path, set_in};
use super::prediction::parse_expect;
use super::sections::scenario;
use super::tree::{At, Item, Val, convert_table};
use super::variants::{keeps_the_design, same_changes, sets_what_is_not_modelled, variants};
use super::{Choice, Loaded, ScenarioError};
use handoff_models::scenario::spec::Prediction;
use handoff_models::scenario::spec::PredictionOrigin;
use handoff_models::scenario::spec::Verdict;
use std::path::Path;
use toml::de::DeTable;

/// Reads, overrides (`--set PATH=VALUE` arguments) and validates a scenario file.
pub fn load(path: &Path, sets: &[String]) -> Result<Loaded, ScenarioError> {
    load_with(path, &Choice::sets(sets))
}

/// As [`load`], with a variant and an expectation as the command line gives them.
pub fn load_with(path: &Path, choice: &Choice) -> Result<Loaded, ScenarioError> {
    let text = read_text(path).map_err(|message| ScenarioError { message })?;
    load_str_with(&path.display().to_string(), &text, choice)
}

/// Reads a text file (a scenario, a conformance workload): UTF-8, or an error naming the line,
/// the column and the byte offset (from 0) of the first byte that is not.
pub fn read_text(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|error| format!("{}: cannot read: {error}", path.display()))?;
    String::from_utf8(bytes).map_err(|error| {
        let offset = error.utf8_error().valid_up_to();
        let bytes = error.as_bytes();
        let valid = String::from_utf8_lossy(&bytes[..offset]);
        let (line, column) = line_col(&valid, offset);
        format!(
            "{}:{line}:{column}: invalid UTF-8 at byte offset {offset} (0x{:02X}); the file must be UTF-8 text",
            path.display(),
            bytes[offset]
        )
    })
}

/// As [`load`], from text; `file` names it in messages.
pub fn load_str(file: &str, text: &str, sets: &[String]) -> Result<Loaded, ScenarioError> {
    load_str_with(file, text, &Choice::sets(sets))
}

/// As [`load_with`], from text.
///
/// The prediction the run is judged against: `--expect` when given; else the scenario's
/// `[prediction]` when the design is the file's (no `--set`, or only `--set`s that keep the design:
/// see [`keeps_the_design`]), or when `--set prediction.…` edits it; else the prediction of the
/// variant whose `set` is exactly the run's changes (`--variant`'s settings and the `--set`s that
/// change the design); else none: the run is judged against "holds" and says so
/// ([`PredictionOrigin::Unpredicted`]).
pub fn load_str_with(file: &str, text: &str, choice: &Choice) -> Result<Loaded, ScenarioError> {
    let sets = &choice.sets;
    let cx = Cx { file, text, sets, included: &[] };
    let parsed = DeTable::parse(text).map_err(|error| {
        let offset = error.span().map_or(0, |span| span.start);
        let (line, column) = line_col(text, offset);
        ScenarioError { message: format!("{file}:{line}:{column}: invalid TOML: {}", error.message().trim()) }
    })?;
    let mut root = Item { val: Val::Table(convert_table(parsed.get_ref(), None)), at: At::File(0) };
    let variants = {
        let entries = match &root.val {
            Val::Table(entries) => entries.as_slice(),
            _ => &[],
        };
        variants(&cx, &Section { path: String::new(), entries, at: At::File(0) })?
    };
    let chosen = match &choice.variant {
        None => None,
        Some(name) => Some(variants.iter().find(|variant| variant.name == *name).ok_or_else(|| {
            let names: Vec<&str> = variants.iter().map(|variant| variant.name.as_str()).collect();
            ScenarioError {
                message: if names.is_empty() {
                    format!("--variant {name}: {file} has no [variants]")
                } else {
                    format!("--variant {name}: {file} has no variant `{name}`; its variants are {}", names.join(", "))
                },
            }
        })?),
    };
    let expected = choice.expect.as_deref().map(|text| parse_expect(text, choice.variant.clone())).transpose()?;
    // The chosen variant's settings first, then the command line's on top.
    let mut changes: Vec<(Vec<Step>, Item)> = Vec::new();
    if let Some(variant) = chosen {
        for (steps, value, at) in &variant.sets {
            set_in(&mut root, steps, value.clone()).map_err(|(field, problem)| cx.err(*at, &field, problem))?;
            changes.push((steps.clone(), value.clone()));
        }
    }
    let mut edits_prediction = false;
    for (index, arg) in sets.iter().enumerate() {
        let (steps, value) = apply_set(&cx, &mut root, index, arg)?;
        if matches!(steps.first(), Some(Step::Key(key)) if key == "prediction") {
            if let Some(variant) = chosen {
                return Err(cx.err(
                    At::Set(index),
                    "prediction",
                    format!(
                        "edits the scenario's own prediction, not variant `{}`'s; give the run's prediction with \
                         --expect",
                        variant.name
                    ),
                ));
            }
            edits_prediction = true;
        }
        if !keeps_the_design(&steps) {
            changes.retain(|(other, _)| *other != steps);
            changes.push((steps, value));
        }
    }
    // `from = "FILE"` last, so that the section's own keys, a variant's and the command line's
    // override what the file says.
    let mut included = Vec::new();
    let base = Path::new(file).parent().unwrap_or(Path::new(""));
    expand(&cx, &mut root, base, &mut included)?;
    let cx = Cx { included: &included, ..cx };
    let entries = match &root.val {
        Val::Table(entries) => entries.as_slice(),
        _ => &[],
    };
    let mut loaded = scenario(&cx, &Section { path: String::new(), entries, at: At::File(0) })?;
    // A setting the model does not simulate leaves the design as the model runs it.
    changes.retain(|(steps, _)| !sets_what_is_not_modelled(steps, &loaded.spec));
    let matching = || variants.iter().find(|variant| same_changes(&variant.sets, &changes));
    if let Some(expected) = expected {
        loaded.spec.prediction = expected;
    } else if edits_prediction || changes.is_empty() {
        // The file's prediction (as edited) applies.
    } else if let Some(variant) = matching() {
        loaded.spec.prediction = variant.prediction.clone();
        loaded.spec.prediction.origin =
            PredictionOrigin::Variant { name: variant.name.clone(), chosen: chosen.is_some() };
    } else {
        let mut changed: Vec<String> = Vec::new();
        for (index, arg) in sets.iter().enumerate() {
            if let Ok(steps) = parse_path(arg.split_once('=').map_or(arg.as_str(), |(path, _)| path).trim())
                && !keeps_the_design(&steps)
                && !sets_what_is_not_modelled(&steps, &loaded.spec)
                && sets[index + 1..].iter().all(|later| later != arg)
            {
                changed.push(format!("--set {arg}"));
            }
        }
        let listed = chosen
            .map(|variant| format!("--variant {}", variant.name))
            .into_iter()
            .chain(changed.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
        loaded.spec.prediction = Prediction {
            verdict: Verdict::Holds,
            findings: Vec::new(),
            allow: Vec::new(),
            may_fail_closed: false,
            why: format!(
                "No prediction for this changed design ({listed}): the scenario's prediction is for its own design, \
                 and no variant of it has exactly these settings, so the run is judged against \"holds\". Pass \
                 --expect (holds, fails-closed, or the invariants, like I2,I4) or add a variant with its own prediction."
            ),
            origin: PredictionOrigin::Unpredicted {
                variant: chosen.map(|variant| variant.name.clone()),
                sets: changed,
            },
        };
    }
    Ok(loaded)
}
