//! `[variants.NAME]`: named sets of changes with their own predictions, and which changes keep
//! the design as the file gives it (so that the file's prediction still applies).

use super::fields::{Cx, Res, Section};
use super::overrides::{Step, parse_path};
use super::prediction::prediction_table;
use super::tree::{At, Item, Val};
use handoff_models::scenario::spec::Prediction;
use handoff_models::scenario::spec::PredictionOrigin;

/// Whether a `--set` at this path leaves the design as the file gives it, so that the file's
/// prediction still applies: the fault profile (how a sweep explores the same design), the
/// `[check]` bound (how `handoff check` explores it), the run's horizon (a limit: a run it cuts is
/// undecided), the `seed`, the scenario's name and description, the prediction and the variants
/// themselves. Any other setting changes what is predicted about.
pub(super) fn keeps_the_design(steps: &[Step]) -> bool {
    let key = |index: usize| match steps.get(index) {
        Some(Step::Key(key)) => Some(key.as_str()),
        _ => None,
    };
    matches!(
        (key(0), key(1)),
        (Some("fault_profile" | "check" | "seed" | "name" | "description" | "prediction" | "variants"), _)
            | (Some("acceptance"), Some("horizon_ms"))
    )
}

/// Whether a `--set` at this path gives a setting the model does not simulate (listed in the
/// spec's `not_modelled`): the design, as the model runs it, is the same.
pub(super) fn sets_what_is_not_modelled(steps: &[Step], spec: &handoff_models::scenario::spec::Spec) -> bool {
    let (section, setting) = match steps {
        [Step::Key(section), Step::Key(setting)] if section == "connector" && spec.connector_count() > 1 => {
            (format!("connector {}", spec.connector(0).name), setting)
        }
        [Step::Key(section), Step::Key(setting)] => (section.clone(), setting),
        [Step::Key(section), Step::Index(index), Step::Key(setting)]
            if section == "connector" && *index < spec.connector_count() =>
        {
            if spec.connector_count() > 1 {
                (format!("connector {}", spec.connector(*index).name), setting)
            } else {
                (section.clone(), setting)
            }
        }
        _ => return false,
    };
    spec.not_modelled.iter().any(|item| item.section == section && item.setting == *setting)
}

/// Whether a variant's settings are exactly these changes (each path once, the same values).
pub(super) fn same_changes(variant: &[(Vec<Step>, Item, At)], changes: &[(Vec<Step>, Item)]) -> bool {
    variant.len() == changes.len()
        && variant.iter().all(|(steps, value, _)| {
            changes.iter().any(|(other, given)| other == steps && same_value(&value.val, &given.val))
        })
}

/// Two values as a run reads them (a table's entries in any order).
fn same_value(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Str(a), Val::Str(b)) => a == b,
        (Val::Int(a), Val::Int(b)) => a == b,
        (Val::Float(a, _), Val::Float(b, _)) => a == b,
        (Val::Bool(a), Val::Bool(b)) => a == b,
        (Val::Array(a), Val::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_value(&a.val, &b.val))
        }
        (Val::Table(a), Val::Table(b)) => {
            a.len() == b.len()
                && a.iter().all(|entry| {
                    b.iter().any(|other| other.key == entry.key && same_value(&entry.item.val, &other.item.val))
                })
        }
        _ => false,
    }
}

/// A `[variants.NAME]` of the file: settings (as `--set` would give them) and their prediction.
pub(super) struct Variant {
    pub(super) name: String,
    pub(super) sets: Vec<(Vec<Step>, Item, At)>,
    pub(super) prediction: Prediction,
}

/// `[variants.NAME]`: `set = { PATH = VALUE, ... }` and `[variants.NAME.prediction]`.
pub(super) fn variants(cx: &Cx, root: &Section) -> Res<Vec<Variant>> {
    let Some(field) = root.get("variants") else { return Ok(Vec::new()) };
    let table = cx.section(&field)?;
    let mut variants: Vec<Variant> = Vec::new();
    for entry in table.entries {
        let variant = table.field(entry);
        let s = cx.section(&variant)?;
        s.check_keys(cx, "set prediction", "field")?;
        let set =
            s.need(cx, "set", "; a variant changes settings, e.g. set = { \"sink.apply\" = \"snapshot-epoch\" }")?;
        let settings = cx.section(&set)?;
        let mut sets: Vec<(Vec<Step>, Item, At)> = Vec::new();
        flatten(cx, &settings, &mut Vec::new(), &mut sets)?;
        if sets.is_empty() {
            return cx.fail(&set, "names no setting; a variant changes at least one");
        }
        for (steps, _, at) in &sets {
            // A variant changes the design, or the faults it is judged under: the same design
            // under a wider `[fault_profile]` (every fault kind, say) may have a prediction of its
            // own, taken with `--variant` only (a plain `--set fault_profile…` keeps the file's).
            let faults = matches!(steps.first(), Some(Step::Key(key)) if key == "fault_profile");
            if keeps_the_design(steps) && !faults {
                return Err(cx.err(
                    *at,
                    &set.path,
                    "a variant changes the design or the fault profile; the [check] bound, the horizon, the seed \
                     and the prediction keep the scenario's prediction, so they are no variant's settings",
                ));
            }
        }
        if let Some(twin) = variants.iter().find(|other| {
            same_changes(
                &other.sets,
                &sets.iter().map(|(steps, item, _)| (steps.clone(), item.clone())).collect::<Vec<_>>(),
            )
        }) {
            return cx.fail(&set, format!("the same settings as variant `{}`: which prediction applies?", twin.name));
        }
        let prediction = Prediction {
            origin: PredictionOrigin::Variant { name: entry.key.clone(), chosen: false },
            ..prediction_table(
                cx,
                &cx.section(&s.need(cx, "prediction", "; add [variants.NAME.prediction] with verdict and why")?)?,
            )?
        };
        variants.push(Variant { name: entry.key.clone(), sets, prediction });
    }
    Ok(variants)
}

/// A variant's `set` table as paths: a key is a path as `--set` takes it (`"sink.apply"`,
/// `'connector."snapshot.mode"'`), and dotted keys (`sink.apply = …`) nest tables, which are
/// walked to their values.
fn flatten(cx: &Cx, s: &Section, prefix: &mut Vec<Step>, out: &mut Vec<(Vec<Step>, Item, At)>) -> Res<()> {
    for entry in s.entries {
        let field = s.field(entry);
        let steps = parse_path(&entry.key)
            .map_err(|problem| cx.err(field.at, &field.path, format!("malformed path: {problem}")))?;
        let depth = prefix.len();
        prefix.extend(steps);
        match &entry.item.val {
            Val::Table(entries) => {
                flatten(cx, &Section { path: field.path.clone(), entries, at: entry.item.at }, prefix, out)?
            }
            _ => {
                if out.iter().any(|(steps, _, _)| steps == prefix) {
                    return cx.fail(&field, "is set twice");
                }
                out.push((prefix.clone(), entry.item.clone(), field.at));
            }
        }
        prefix.truncate(depth);
    }
    Ok(())
}
