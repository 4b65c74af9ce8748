//! Scenario files: TOML in, a validated [`handoff_models::scenario::spec::Spec`] out, or an error that
//! names the file, the line and the field. The format is documented in
//! `docs/scenario-format.md`.
//!
//! How it works: the file is parsed into a spanned tree ([`toml::de::DeTable`]), copied into a
//! small tree of our own whose every value remembers where it came from ([`At`]: a byte offset
//! of the file, or the `--set` argument that wrote it). The `--set` overrides are applied to
//! that tree, and then one function per section reads it into the [`Spec`]. An error about a
//! value is reported where the value came from: `FILE:LINE:COL: FIELD: PROBLEM`, or
//! `--set ARG: FIELD: PROBLEM`.
//!
//! Every value is held to what a run can honour ([`handoff_models::core::limits`], the "Limits" of the
//! format): times within the run's horizon, settings within a day, rows, transactions and
//! heartbeats within what a run holds in memory. A value out of range is reported with both
//! ends of its range.

use handoff_models::components::connect::ConnectConfig;
use handoff_models::components::connect::debezium::{DebeziumConfig, SnapshotMode};
use handoff_models::components::connect::debezium::{LsnFlushMode, OffsetMismatchStrategy};
use handoff_models::components::operator::GatePolicy;
use handoff_models::components::sink::ApplyRule;
use handoff_models::core::change::{ReplicaIdentity, RowOp};
use handoff_models::core::ids::{Node, Status, TableId};
use handoff_models::core::limits;
use handoff_models::core::protocol::OffsetReset;
use handoff_models::core::time::SimTime;
use handoff_models::core::units;
use handoff_models::exhaustive::world::{OperateWhile, Operation};
use handoff_models::scenario::spec::{
    Acceptance, Background, CheckBound, Fault, FaultAction, FaultKind, FaultProfile, HandoffMethod, Invariant, Moment,
    Prediction, PredictionOrigin, Schedule, ScriptedTxn, Spec, TableSetup, Trigger, Verdict,
};
use std::collections::BTreeMap;
use std::fmt::Display;
use std::path::Path;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// A loaded scenario.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub spec: Spec,
    /// The file's `seed` (default 1): what `handoff run` uses without `--seed`.
    pub seed: u64,
}

/// A scenario error, fully formatted: `file:line:column: field: problem` or
/// `--set ARG: field: problem`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    pub message: String,
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ScenarioError {}

/// What the command line asks of a scenario besides the file: `--set PATH=VALUE` overrides,
/// `--variant NAME` (one of the file's `[variants]`), `--expect PREDICTION`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Choice {
    pub sets: Vec<String>,
    pub variant: Option<String>,
    pub expect: Option<String>,
}

impl Choice {
    /// Only `--set`s.
    pub fn sets(sets: &[String]) -> Choice {
        Choice { sets: sets.to_vec(), variant: None, expect: None }
    }
}

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
    let cx = Cx { file, text, sets };
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
    let entries = match &root.val {
        Val::Table(entries) => entries.as_slice(),
        _ => &[],
    };
    let mut loaded = scenario(&cx, &Section { path: String::new(), entries, at: At::File(0) })?;
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

/// Whether a `--set` at this path leaves the design as the file gives it, so that the file's
/// prediction still applies: the fault profile (how a sweep explores the same design), the
/// `[check]` bound (how `handoff check` explores it), the run's horizon (a limit: a run it cuts is
/// undecided), the `seed`, the scenario's name and description, the prediction and the variants
/// themselves. Any other setting changes what is predicted about.
fn keeps_the_design(steps: &[Step]) -> bool {
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

/// Whether a variant's settings are exactly these changes (each path once, the same values).
fn same_changes(variant: &[(Vec<Step>, Item, At)], changes: &[(Vec<Step>, Item)]) -> bool {
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

/// `--expect`: `holds`, `fails-closed`, or the invariants that must be violated (`I2,I4`); an
/// invariant with a `?` may be violated (`I2,I3?`, `holds,I11?`).
fn parse_expect(text: &str, variant: Option<String>) -> Result<Prediction, ScenarioError> {
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

/// A `[variants.NAME]` of the file: settings (as `--set` would give them) and their prediction.
struct Variant {
    name: String,
    sets: Vec<(Vec<Step>, Item, At)>,
    prediction: Prediction,
}

/// `[variants.NAME]`: `set = { PATH = VALUE, ... }` and `[variants.NAME.prediction]`.
fn variants(cx: &Cx, root: &Section) -> Res<Vec<Variant>> {
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

// ---------------------------------------------------------------------------------------------
// The tree: values that remember where they came from.

/// Where a value came from: a byte offset in the file, or the index of a `--set` argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    File(usize),
    Set(usize),
}

#[derive(Clone, Debug)]
enum Val {
    Str(String),
    /// `None`: an integer TOML accepts but that does not fit in an `i64`.
    Int(Option<i64>),
    /// The value and its text as written (a release like `3.7` is written as a float).
    Float(f64, String),
    Bool(bool),
    Datetime,
    Array(Vec<Item>),
    Table(Vec<Entry>),
}

impl Val {
    fn kind(&self) -> &'static str {
        match self {
            Val::Str(_) => "a string",
            Val::Int(_) => "an integer",
            Val::Float(..) => "a float",
            Val::Bool(_) => "a boolean",
            Val::Datetime => "a datetime",
            Val::Array(_) => "an array",
            Val::Table(_) => "a table",
        }
    }
}

#[derive(Clone, Debug)]
struct Item {
    val: Val,
    at: At,
}

#[derive(Clone, Debug)]
struct Entry {
    key: String,
    key_at: At,
    item: Item,
}

impl Entry {
    /// Errors about an entry point at its key (the start of its line), unless `--set` wrote it.
    fn at(&self) -> At {
        match self.item.at {
            At::Set(index) => At::Set(index),
            At::File(_) => self.key_at,
        }
    }
}

/// Copies a parsed value; `set` is the index of the `--set` argument it comes from, if any.
fn convert(value: &Spanned<DeValue<'_>>, set: Option<usize>) -> Item {
    let at = set.map_or(At::File(value.span().start), At::Set);
    let val = match value.get_ref() {
        DeValue::String(text) => Val::Str(text.to_string()),
        DeValue::Integer(int) => Val::Int(i64::from_str_radix(int.as_str(), int.radix()).ok()),
        DeValue::Float(float) => Val::Float(float.as_str().parse().unwrap_or(f64::NAN), float.as_str().to_string()),
        DeValue::Boolean(flag) => Val::Bool(*flag),
        DeValue::Datetime(_) => Val::Datetime,
        DeValue::Array(items) => Val::Array(items.iter().map(|item| convert(item, set)).collect()),
        DeValue::Table(table) => Val::Table(convert_table(table, set)),
    };
    Item { val, at }
}

/// Copies a parsed table, its entries in the order of the text.
fn convert_table(table: &DeTable<'_>, set: Option<usize>) -> Vec<Entry> {
    let mut entries: Vec<(usize, Entry)> = table
        .iter()
        .map(|(key, value)| {
            let start = key.span().start;
            let key_at = set.map_or(At::File(start), At::Set);
            (start, Entry { key: key.get_ref().to_string(), key_at, item: convert(value, set) })
        })
        .collect();
    entries.sort_by_key(|(start, _)| *start);
    entries.into_iter().map(|(_, entry)| entry).collect()
}

// ---------------------------------------------------------------------------------------------
// `--set PATH=VALUE`

#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

const MAX_SET_DEPTH: usize = 32;

/// Applies one `--set`; returns its path and value.
fn apply_set(cx: &Cx, root: &mut Item, index: usize, arg: &str) -> Res<(Vec<Step>, Item)> {
    let at = At::Set(index);
    let Some((path, value)) = arg.split_once('=') else {
        return Err(cx.err(at, arg.trim(), "expected PATH=VALUE, e.g. sink.apply=naive-upsert"));
    };
    let path = path.trim();
    let field = if path.is_empty() { "\"\"" } else { path };
    let steps = parse_path(path).map_err(|problem| cx.err(at, field, format!("malformed path: {problem}")))?;
    let value = match DeValue::parse(value.trim()) {
        Ok(parsed) => convert(&parsed, Some(index)),
        Err(_) => Item { val: Val::Str(value.to_owned()), at },
    };
    set_in(root, &steps, value.clone()).map_err(|(field, problem)| cx.err(at, &field, problem))?;
    Ok((steps, value))
}

/// `a.b."c.d"[0].e`: keys (bare, or quoted without escapes), each followed by any number of `[n]`.
fn parse_path(path: &str) -> Result<Vec<Step>, String> {
    let chars: Vec<char> = path.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    loop {
        let key: String = match chars.get(i) {
            Some(&quote @ ('"' | '\'')) => {
                let Some(length) = chars[i + 1..].iter().position(|c| *c == quote) else {
                    return Err("unterminated quoted key".into());
                };
                i += length + 2;
                chars[i - length - 1..i - 1].iter().collect()
            }
            Some(&c) if is_bare(c) => {
                let length = chars[i..].iter().take_while(|c| is_bare(**c)).count();
                i += length;
                chars[i - length..i].iter().collect()
            }
            Some(c) => return Err(format!("expected a key at character {}, found `{c}`", i + 1)),
            None => return Err("expected a key".into()),
        };
        steps.push(Step::Key(key));
        while chars.get(i) == Some(&'[') {
            let digits: String = chars[i + 1..].iter().take_while(|c| c.is_ascii_digit()).collect();
            i += digits.len() + 2;
            match digits.parse() {
                Ok(index) if chars.get(i - 1) == Some(&']') => steps.push(Step::Index(index)),
                _ => return Err("an index is a whole number in brackets, like [0]".into()),
            }
        }
        if steps.len() > MAX_SET_DEPTH {
            return Err(format!("more than {MAX_SET_DEPTH} steps"));
        }
        match chars.get(i) {
            None => return Ok(steps),
            Some('.') => i += 1,
            Some(c) => return Err(format!("unexpected `{c}` at character {}", i + 1)),
        }
    }
}

fn is_bare(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Puts `value` at `steps` under `root`, creating missing tables. An error names the path
/// where the walk stopped, and the problem.
fn set_in(root: &mut Item, steps: &[Step], value: Item) -> Result<(), (String, String)> {
    let (mut item, mut path) = (root, String::new());
    for (n, step) in steps.iter().enumerate() {
        let kind = item.val.kind();
        item = match (step, &mut item.val) {
            (Step::Key(key), Val::Table(entries)) => {
                path = join(&path, key);
                let position = entries.iter().position(|entry| entry.key == *key);
                let position = match (position, steps.get(n + 1)) {
                    (Some(position), _) => position,
                    (None, Some(Step::Index(index))) => {
                        return Err((
                            format!("{path}[{index}]"),
                            format!("index {index} is past the end: {path} has no entries"),
                        ));
                    }
                    (None, _) => {
                        let table = Item { val: Val::Table(Vec::new()), at: value.at };
                        entries.push(Entry { key: key.clone(), key_at: value.at, item: table });
                        entries.len() - 1
                    }
                };
                &mut entries[position].item
            }
            (Step::Index(index), Val::Array(items)) => {
                let count = items.len();
                let Some(element) = items.get_mut(*index) else {
                    return Err((
                        format!("{path}[{index}]"),
                        format!(
                            "index {index} is past the end: {path} has {count} {}",
                            if count == 1 { "entry" } else { "entries" }
                        ),
                    ));
                };
                path = format!("{path}[{index}]");
                element
            }
            (Step::Key(_), _) => return Err((path, format!("is {kind}, not a table"))),
            (Step::Index(_), _) => return Err((path, format!("is {kind}, not an array"))),
        };
    }
    *item = value;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Reading the tree: typed access that carries the location.

type Res<T> = Result<T, ScenarioError>;

struct Cx<'a> {
    file: &'a str,
    text: &'a str,
    sets: &'a [String],
}

/// A value to read, its path as written in TOML, and where errors about it go.
struct Field<'t> {
    path: String,
    item: &'t Item,
    at: At,
}

/// A table to read.
struct Section<'t> {
    path: String,
    entries: &'t [Entry],
    at: At,
}

impl Cx<'_> {
    fn err(&self, at: At, field: &str, problem: impl Display) -> ScenarioError {
        let message = match at {
            At::File(offset) => {
                let (line, column) = line_col(self.text, offset);
                format!("{}:{line}:{column}: {field}: {problem}", self.file)
            }
            At::Set(index) => {
                format!("--set {}: {field}: {problem}", self.sets.get(index).map_or("", String::as_str))
            }
        };
        ScenarioError { message }
    }

    fn fail<T>(&self, field: &Field, problem: impl Display) -> Res<T> {
        Err(self.err(field.at, &field.path, problem))
    }

    fn wrong<T>(&self, field: &Field, expected: &str) -> Res<T> {
        self.fail(field, format!("expected {expected}, found {}", field.item.val.kind()))
    }

    fn string<'t>(&self, field: &Field<'t>) -> Res<&'t str> {
        match &field.item.val {
            Val::Str(text) => Ok(text),
            _ => self.wrong(field, "a string"),
        }
    }

    fn owned(&self, field: &Field) -> Res<String> {
        self.string(field).map(str::to_owned)
    }

    fn int(&self, field: &Field, low: i64, high: i64) -> Res<i64> {
        match field.item.val {
            Val::Int(Some(value)) if (low..=high).contains(&value) => Ok(value),
            Val::Int(value) => self.fail(field, out_of_range(value, low, high)),
            _ => self.wrong(field, "an integer"),
        }
    }

    fn u64(&self, field: &Field) -> Res<u64> {
        self.int(field, 0, i64::MAX).map(|value| value as u64)
    }

    fn u32(&self, field: &Field, low: u32) -> Res<u32> {
        self.int(field, i64::from(low), i64::from(u32::MAX)).map(|value| value as u32)
    }

    /// A time of the run in milliseconds, from `low` to the run's horizon.
    fn time_ms(&self, field: &Field, low: u64, horizon: &Horizon) -> Res<u64> {
        match field.item.val {
            Val::Int(Some(value)) if u64::try_from(value).is_ok_and(|value| (low..=horizon.ms).contains(&value)) => {
                Ok(value as u64)
            }
            Val::Int(value) => self
                .fail(field, format!("{}, {}", out_of_range(value, low as i64, horizon.ms as i64), horizon.describe())),
            _ => self.wrong(field, "an integer"),
        }
    }

    /// A timer setting in milliseconds, from `low` to a day: a longer timer would never fire
    /// within the longest horizon.
    fn setting_ms(&self, field: &Field, low: u64) -> Res<u64> {
        let high = limits::MAX_SETTING_MS as i64;
        match field.item.val {
            Val::Int(Some(value)) if (low as i64..=high).contains(&value) => Ok(value as u64),
            Val::Int(value) => self.fail(field, setting_out_of_range(value, low)),
            _ => self.wrong(field, "an integer"),
        }
    }

    /// A rate per second: a finite number from 0 to [`MAX_RATE`] (integers are accepted).
    fn rate(&self, field: &Field) -> Res<f64> {
        let value = match field.item.val {
            Val::Float(value, _) => value,
            Val::Int(Some(value)) => value as f64,
            _ => return self.wrong(field, "a number"),
        };
        if !(0.0..=MAX_RATE).contains(&value) {
            return self.fail(field, format!("{value} is out of range; expected 0 to {MAX_RATE} per second"));
        }
        Ok(value)
    }

    fn section<'t>(&self, field: &Field<'t>) -> Res<Section<'t>> {
        match &field.item.val {
            Val::Table(entries) => Ok(Section { path: field.path.clone(), entries, at: field.item.at }),
            _ => self.wrong(field, "a table"),
        }
    }

    /// The elements of an array, each a field `path[i]`.
    fn items<'t>(&self, field: &Field<'t>, expected: &str) -> Res<Vec<Field<'t>>> {
        let Val::Array(items) = &field.item.val else { return self.wrong(field, expected) };
        let elements = items.iter().enumerate();
        Ok(elements.map(|(i, item)| Field { path: format!("{}[{i}]", field.path), item, at: item.at }).collect())
    }

    /// One of a fixed set of strings.
    fn choice<T: Copy>(&self, field: &Field, options: &[(&str, T)]) -> Res<T> {
        let text = self.string(field)?;
        match options.iter().find(|(name, _)| *name == text) {
            Some((_, value)) => Ok(*value),
            None => self.fail(field, unknown_value(text, options.iter().map(|(name, _)| *name))),
        }
    }

    /// A trigger whose time, or delay after its moment, is within the run's horizon.
    fn trigger(&self, field: &Field, horizon: &Horizon) -> Res<Trigger> {
        let text = self.string(field)?;
        let trigger = parse_trigger(text).or_else(|problem| self.fail(field, problem))?;
        let (what, ms) = match trigger {
            Trigger::At { at_ms } => (format!("`{}`", text.trim()), at_ms),
            Trigger::After { plus_ms, .. } => {
                let delay = text.split_once('+').map_or("", |(_, delay)| delay).trim();
                (format!("the delay `+ {delay}`"), plus_ms)
            }
        };
        if ms > horizon.ms {
            return self.fail(
                field,
                format!("{what} is out of range; expected 0s to {}, {}", duration_text(horizon.ms), horizon.describe()),
            );
        }
        Ok(trigger)
    }
}

/// The highest rate of the background workload: the transaction budget in one millisecond.
const MAX_RATE: f64 = (limits::MAX_TRANSACTIONS * 1_000) as f64;

/// The run's horizon, for the fields held to it.
#[derive(Clone, Copy, Debug)]
struct Horizon {
    ms: u64,
    /// Whether the scenario gives it (`[acceptance] horizon_ms`).
    given: bool,
}

impl Horizon {
    /// What the bound is and where it comes from, for messages.
    fn describe(&self) -> String {
        if self.given {
            format!("the run's horizon (acceptance.horizon_ms = {})", self.ms)
        } else {
            format!(
                "the run's horizon (the default; acceptance.horizon_ms may raise it to {}, {})",
                limits::MAX_HORIZON_MS,
                duration_text(limits::MAX_HORIZON_MS)
            )
        }
    }
}

fn setting_out_of_range(value: Option<i64>, low: u64) -> String {
    format!(
        "{} ({}, the longest horizon: a longer timer never fires)",
        out_of_range(value, low as i64, limits::MAX_SETTING_MS as i64),
        duration_text(limits::MAX_SETTING_MS)
    )
}

impl<'t> Section<'t> {
    fn field_path(&self, key: &str) -> String {
        join(&self.path, key)
    }

    fn field(&self, entry: &'t Entry) -> Field<'t> {
        Field { path: self.field_path(&entry.key), item: &entry.item, at: entry.at() }
    }

    fn get(&self, key: &str) -> Option<Field<'t>> {
        self.entries.iter().find(|entry| entry.key == key).map(|entry| self.field(entry))
    }

    /// A required field.
    fn need(&self, cx: &Cx, key: &str, hint: &str) -> Res<Field<'t>> {
        self.get(key).ok_or_else(|| cx.err(self.at, &self.field_path(key), format!("required field is missing{hint}")))
    }

    fn req<T>(&self, cx: &Cx, key: &str, read: impl FnOnce(&Field<'t>) -> Res<T>) -> Res<T> {
        read(&self.need(cx, key, "")?)
    }

    fn opt<T>(&self, key: &str, default: T, read: impl FnOnce(&Field<'t>) -> Res<T>) -> Res<T> {
        self.get(key).map_or(Ok(default), |field| read(&field))
    }

    /// A sub-table; a missing one reads as empty.
    fn sub(&self, cx: &Cx, key: &str) -> Res<Section<'t>> {
        match self.get(key) {
            Some(field) => cx.section(&field),
            None => Ok(Section { path: self.field_path(key), entries: &[], at: self.at }),
        }
    }

    /// Every key must be one of `known` (names separated by spaces); `what`: "field" or
    /// "connector property".
    fn check_keys(&self, cx: &Cx, known: &str, what: &str) -> Res<()> {
        let known: Vec<&str> = known.split_whitespace().collect();
        if let Some(entry) = self.entries.iter().find(|entry| !known.contains(&entry.key.as_str())) {
            let hint = match closest(&entry.key, &known) {
                Some(name) => format!("did you mean \"{name}\"?"),
                None if known.len() > 16 => "see docs/scenario-format.md for the ones this testbed knows".into(),
                None => format!("expected one of {}", known.join(", ")),
            };
            return Err(cx.err(entry.at(), &self.field_path(&entry.key), format!("unknown {what}; {hint}")));
        }
        Ok(())
    }
}

/// A TOML path: `a.b`, with keys that are not bare quoted (`connector."snapshot.mode"`).
fn join(prefix: &str, key: &str) -> String {
    let key = toml_key(key);
    if prefix.is_empty() { key } else { format!("{prefix}.{key}") }
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let column = before.rsplit('\n').next().map_or(0, |line| line.chars().count()) + 1;
    (before.matches('\n').count() + 1, column)
}

/// `5000000 is out of range; expected 0 to 3600000`: both ends, always.
fn out_of_range(value: Option<i64>, low: i64, high: i64) -> String {
    let value = value.map_or_else(|| "the value".to_owned(), |value| value.to_string());
    format!("{value} is out of range; expected {low} to {high}")
}

fn unknown_value<'a>(text: &str, names: impl Iterator<Item = &'a str>) -> String {
    format!("unknown value `{text}`; expected one of {}", names.collect::<Vec<_>>().join(", "))
}

/// The candidate closest to `word`, if the edit distance is small.
fn closest<'k>(word: &str, candidates: &[&'k str]) -> Option<&'k str> {
    let word: Vec<char> = word.to_lowercase().chars().collect();
    candidates
        .iter()
        .filter(|candidate| candidate.chars().count().abs_diff(word.len()) <= 3)
        .map(|candidate| (edit_distance(&word, &candidate.chars().collect::<Vec<_>>()), *candidate))
        .filter(|(distance, candidate)| *distance <= (candidate.chars().count() / 3).clamp(1, 3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Optimal-string-alignment distance (Levenshtein plus adjacent transpositions).
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    rows[0] = (0..=b.len()).collect();
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1).min(rows[i][j - 1] + 1).min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

// ---------------------------------------------------------------------------------------------
// Units and triggers.

/// `5min` → 300 000 (ms); `16MB` → 16 777 216 (bytes), as [`units::parse`] reads them, a unit
/// required. A value too large for a `u64` reads as `u64::MAX`, out of every range (so that the
/// message gives the range, not a syntax).
fn with_unit(text: &str, table: &[(&str, u64)]) -> Option<u64> {
    match units::parse(text, table, None) {
        Ok(value) => Some(value),
        Err(units::UnitError::TooLarge) => Some(u64::MAX),
        Err(_) => None,
    }
}

fn duration_ms(text: &str) -> Option<u64> {
    with_unit(text, &units::TIME_UNITS_MS)
}

const DURATION_UNITS: &str = "ms, s, min, h, d";

const TRIGGER_FORMS: &str = "expected a time like \"30s\" (ms, s, min, h, d) or a moment like \
    \"snapshot-scan-started\", \"streaming-started#2 + 1s\"";

/// `30s`, `2500ms`, `snapshot-scan-started`, `streaming-started#2 + 1s`.
fn parse_trigger(text: &str) -> Result<Trigger, String> {
    let trimmed = text.trim();
    let invalid = || format!("invalid trigger `{text}`; {TRIGGER_FORMS}");
    if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
        return duration_ms(trimmed).map(|at_ms| Trigger::At { at_ms }).ok_or_else(invalid);
    }
    let (head, plus) = match trimmed.split_once('+') {
        Some((head, plus)) => (head.trim(), Some(plus.trim())),
        None => (trimmed, None),
    };
    let (name, occurrence) = match head.split_once('#') {
        Some((name, occurrence)) => (name.trim(), Some(occurrence.trim())),
        None => (head, None),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(invalid());
    }
    let Some(moment) = Moment::parse(name) else { return Err(unknown_moment(name)) };
    let occurrence = match occurrence {
        None => 1,
        Some(n) => match n.parse::<u32>() {
            Ok(count) if count >= 1 && n.chars().all(|c| c.is_ascii_digit()) => count,
            _ => return Err(format!("occurrence `#{n}` must be a whole number from 1 to {}", u32::MAX)),
        },
    };
    let plus_ms = match plus {
        None => 0,
        Some(delay) => duration_ms(delay).ok_or_else(|| {
            format!("`{delay}` is not a delay; expected a duration like \"200ms\" ({DURATION_UNITS})")
        })?,
    };
    Ok(Trigger::After { moment, occurrence, plus_ms })
}

fn unknown_moment(name: &str) -> String {
    let names: Vec<&str> = Moment::ALL.iter().map(|moment| moment.name()).collect();
    format!("unknown moment `{name}`; the moments are {}", names.join(", "))
}

// ---------------------------------------------------------------------------------------------
// The sections.

fn scenario(cx: &Cx, root: &Section) -> Res<Loaded> {
    let known = "name description seed versions postgres table connector connect kafka sink workload fault \
        fault_profile handoff failover acceptance prediction check schedule variants";
    root.check_keys(cx, known, "field")?;
    let name = root.req(cx, "name", |field| cx.owned(field))?;
    let description = root.opt("description", String::new(), |field| cx.owned(field))?;
    let seed = root.opt("seed", 1, |field| cx.u64(field))?;
    // The horizon first: the times of every other section are held to it.
    let (acceptance, horizon) = acceptance(cx, &root.sub(cx, "acceptance")?)?;
    let postgres = postgres(cx, &root.sub(cx, "postgres")?)?;
    let tables = tables(cx, root)?;
    let (mut debezium, connector_properties) = connector(cx, &root.sub(cx, "connector")?, &tables, &horizon)?;
    if debezium.slot_failover
        && postgres.version < 17
        && let Some(field) = root.sub(cx, "connector")?.get("slot.failover")
    {
        return cx.fail(&field, "slot.failover needs PostgreSQL 17 or later ([postgres] version = 17)");
    }
    debezium.version = versions(cx, &root.sub(cx, "versions")?)?;
    let (connect, connector_start_ms) = connect(cx, &root.sub(cx, "connect")?, &horizon)?;
    let kafka_partitions = kafka(cx, &root.sub(cx, "kafka")?)?;
    let sink = sink(cx, &root.sub(cx, "sink")?)?;
    let (background, scripted) = workload(cx, &root.sub(cx, "workload")?, &tables, &horizon)?;
    let faults = faults(cx, root, postgres.standby.is_some(), &horizon)?;
    let profile = match root.get("fault_profile") {
        Some(field) => Some(fault_profile(cx, &cx.section(&field)?, postgres.standby.is_some(), &horizon)?),
        None => None,
    };
    let handoff = handoff(cx, &root.sub(cx, "handoff")?, &horizon)?;
    let gate = failover(cx, &root.sub(cx, "failover")?, postgres.standby.is_some())?;
    let prediction = prediction(cx, root)?;
    let check = match root.get("check") {
        Some(field) => Some(check(cx, &cx.section(&field)?, &tables)?),
        None => None,
    };
    let schedule = match root.get("schedule") {
        Some(field) => Some(schedule(cx, root, &cx.section(&field)?, &horizon)?),
        None => None,
    };
    let spec = Spec {
        name,
        description,
        postgres_major_version: postgres.version,
        wal_segment_size: postgres.wal_segment_size,
        checkpoint_timeout_ms: postgres.checkpoint_timeout_ms,
        max_wal_size_mb: postgres.max_wal_size_mb,
        max_slot_wal_keep_size_mb: postgres.max_slot_wal_keep_size_mb,
        wal_keep_size_mb: postgres.wal_keep_size_mb,
        scan_rows_per_second: postgres.scan_rows_per_second,
        standby: postgres.standby,
        sync_replication_slots: postgres.sync_replication_slots,
        synchronized_standby_slots: postgres.synchronized_standby_slots,
        tables,
        debezium,
        connector_properties,
        connector_start_ms,
        connect,
        kafka_partitions,
        sink_rule: sink.rule,
        sink_group: sink.group,
        sink_auto_commit_interval_ms: sink.auto_commit_interval_ms,
        sink_max_poll_records: sink.max_poll_records,
        sink_auto_offset_reset: sink.auto_offset_reset,
        background,
        scripted,
        faults,
        profile,
        handoff,
        gate,
        acceptance,
        prediction,
        check,
        schedule: schedule.as_ref().map(|(schedule, _)| schedule.clone()),
    };
    if let Some((schedule, items)) = &schedule {
        // The path must be one the bound can take, step by step.
        let (world, bounds) = crate::check::bound(&spec).map_err(|problem| cx.err(root.at, "schedule", problem))?;
        if let Err((index, problem)) =
            handoff_models::exhaustive::world::World::timing(&world, &bounds, &schedule.steps)
        {
            return cx.fail(&items[index.min(items.len() - 1)], problem);
        }
    }
    Ok(Loaded { spec, seed })
}

/// `[versions]`: the releases whose behaviour differs in the model.
fn versions(cx: &Cx, s: &Section) -> Res<(u32, u32)> {
    s.check_keys(cx, "debezium", "field")?;
    s.opt("debezium", (3, 7), |field| {
        // `3.7` unquoted (as `--set versions.debezium=3.7` gives it) is a float: use its text.
        let text = match &field.item.val {
            Val::Float(_, raw) => raw.as_str(),
            _ => cx.string(field)?,
        };
        let parsed = text.split_once('.').and_then(|(major, minor)| {
            let minor = minor.split('.').next()?;
            Some((major.trim().parse::<u32>().ok()?, minor.trim().parse::<u32>().ok()?))
        });
        match parsed {
            Some(version) if ((1, 0)..=(3, 7)).contains(&version) => Ok(version),
            Some(_) => cx.fail(field, format!("`{text}`: the model knows Debezium 1.0 to 3.7")),
            None => cx.fail(field, format!("`{text}` is not a release like \"3.7\" or \"2.6\"")),
        }
    })
}

struct Postgres {
    version: u32,
    wal_segment_size: u64,
    checkpoint_timeout_ms: u64,
    max_wal_size_mb: u64,
    max_slot_wal_keep_size_mb: Option<u64>,
    wal_keep_size_mb: u64,
    scan_rows_per_second: u64,
    standby: Option<u64>,
    sync_replication_slots: bool,
    synchronized_standby_slots: bool,
}

fn postgres(cx: &Cx, s: &Section) -> Res<Postgres> {
    s.check_keys(
        cx,
        "version wal_segment_size checkpoint_timeout max_wal_size max_slot_wal_keep_size wal_keep_size \
         synchronized_standby_slots scan_rows_per_second standby",
        "field",
    )?;
    let version = s.opt("version", 15, |field| match cx.int(field, 15, 18)? {
        18 => cx.fail(
            field,
            "PostgreSQL 18 is not modelled yet (idle_replication_slot_timeout, its view and error changes); use 15, 16 \
             or 17",
        ),
        version => Ok(version as u32),
    })?;
    let wal_segment_size = s.opt("wal_segment_size", 16 << 20, |field| {
        let text = cx.string(field)?;
        let Some(bytes) = with_unit(text, &units::SIZE_UNITS) else {
            return cx.fail(
                field,
                format!("`{text}` is not a size; expected a power of two from 1MB to 1GB, like \"16MB\""),
            );
        };
        if !bytes.is_power_of_two() || !(1 << 20..=1 << 30).contains(&bytes) {
            return cx.fail(field, format!("`{text}` is out of range; expected a power of two from 1MB to 1GB"));
        }
        Ok(bytes)
    })?;
    let checkpoint_timeout_ms = s.opt("checkpoint_timeout", 300_000, |field| {
        let text = cx.string(field)?;
        let Some(ms) = duration_ms(text) else {
            return cx.fail(
                field,
                format!("`{text}` is not a duration; expected a number and a unit ({DURATION_UNITS}), like \"5min\""),
            );
        };
        if !(30_000..=86_400_000).contains(&ms) {
            return cx.fail(field, format!("`{text}` is out of range; expected 30s to 1d"));
        }
        Ok(ms)
    })?;
    // Sizes in whole megabytes, as PostgreSQL keeps them (`GUC_UNIT_MB`), up to its own maximum.
    let megabytes = |field: &Field, minimum_bytes: u64| -> Res<u64> {
        let text = cx.string(field)?;
        let range = format!("{} to {}", size_text(minimum_bytes), size_text(MAX_SETTING_MB << 20));
        match with_unit(text, &units::SIZE_UNITS) {
            Some(bytes) if !(minimum_bytes..=MAX_SETTING_MB << 20).contains(&bytes) => {
                cx.fail(field, format!("`{text}` is out of range; expected {range}"))
            }
            Some(bytes) if bytes % (1 << 20) == 0 => Ok(bytes >> 20),
            Some(_) => cx.fail(field, format!("`{text}` must be whole megabytes, {range}")),
            None => cx.fail(field, format!("`{text}` is not a size like \"4MB\" or \"1GB\"")),
        }
    };
    let max_wal_size_mb = s.opt("max_wal_size", 1024, |field| megabytes(field, 2 * wal_segment_size))?;
    let max_slot_wal_keep_size_mb = s.opt("max_slot_wal_keep_size", None, |field| {
        if cx.string(field)? == "-1" { Ok(None) } else { megabytes(field, 0).map(Some) }
    })?;
    let wal_keep_size_mb =
        s.opt("wal_keep_size", 0, |field| if cx.string(field)? == "0" { Ok(0) } else { megabytes(field, 0) })?;
    let scan_rows_per_second =
        s.opt("scan_rows_per_second", 20_000, |field| cx.int(field, 1, MAX_SCAN_ROWS_PER_SECOND))? as u64;
    let mut sync_replication_slots = false;
    let standby = match s.get("standby") {
        None => None,
        Some(field) => {
            let standby = cx.section(&field)?;
            standby.check_keys(cx, "replication_delay_ms sync_replication_slots", "field")?;
            if let Some(field) = standby.get("sync_replication_slots") {
                sync_replication_slots = prop_bool(cx, &field)?;
                if sync_replication_slots && version < 17 {
                    return cx.fail(&field, "sync_replication_slots needs PostgreSQL 17 or later (version = 17)");
                }
            }
            Some(standby.opt("replication_delay_ms", 0, |field| cx.setting_ms(field, 0))?)
        }
    };
    // The primary's `synchronized_standby_slots`: the standby's physical slot, by name.
    let synchronized_standby_slots = match s.get("synchronized_standby_slots") {
        None => false,
        Some(field) => {
            let names = cx.string(&field)?.trim();
            if version < 17 {
                return cx.fail(&field, "synchronized_standby_slots needs PostgreSQL 17 or later (version = 17)");
            }
            if standby.is_none() {
                return cx.fail(&field, "synchronized_standby_slots names a standby's slot: add [postgres.standby]");
            }
            !names.is_empty()
        }
    };
    Ok(Postgres {
        version,
        wal_segment_size,
        checkpoint_timeout_ms,
        max_wal_size_mb,
        max_slot_wal_keep_size_mb,
        wal_keep_size_mb,
        scan_rows_per_second,
        standby,
        sync_replication_slots,
        synchronized_standby_slots,
    })
}

/// The largest `max_wal_size`, `max_slot_wal_keep_size` and `wal_keep_size`: PostgreSQL's own
/// maximum for a size in megabytes (`MAX_KILOBYTES`, `INT_MAX`).
const MAX_SETTING_MB: u64 = i32::MAX as u64;

/// The fastest snapshot `SELECT`: a billion rows a second, a million-row table in a millisecond.
const MAX_SCAN_ROWS_PER_SECOND: i64 = 1_000_000_000;

fn tables(cx: &Cx, root: &Section) -> Res<Vec<TableSetup>> {
    let field = root.need(cx, "table", "; add at least one [[table]]")?;
    let items = cx.items(&field, "an array of tables ([[table]])")?;
    if items.is_empty() {
        return cx.fail(&field, "at least one [[table]] is required");
    }
    if let Some(item) = items.get(limits::MAX_TABLES) {
        let problem = format!("too many tables: {}; expected 1 to {}", items.len(), limits::MAX_TABLES);
        return cx.fail(item, problem);
    }
    let mut tables: Vec<TableSetup> = Vec::new();
    let mut all_rows = 0;
    for (index, item) in items.iter().enumerate() {
        let s = cx.section(item)?;
        s.check_keys(cx, "name rows replica_identity", "field")?;
        let name_field = s.need(cx, "name", "")?;
        let name = table_name(cx, &name_field)?;
        if let Some(previous) = tables.iter().position(|table| table.name == name) {
            return cx.fail(&name_field, format!("`{name}` is already table[{previous}]"));
        }
        let id = TableId(index as u16);
        // All tables together hold at most `MAX_ROWS` rows.
        let left = limits::MAX_ROWS - all_rows;
        let rows = s.opt("rows", 0, |field| match field.item.val {
            Val::Int(Some(value)) if (0..=left as i64).contains(&value) => Ok(value as u32),
            Val::Int(value) => {
                let before =
                    if all_rows > 0 { format!(", {all_rows} of them in the tables before") } else { String::new() };
                let limit = limits::MAX_ROWS;
                cx.fail(
                    field,
                    format!("{}: at most {limit} rows in all tables{before}", out_of_range(value, 0, left as i64)),
                )
            }
            _ => cx.wrong(field, "an integer"),
        })?;
        all_rows += u64::from(rows);
        let identities = [("default", ReplicaIdentity::Default), ("full", ReplicaIdentity::Full)];
        let replica_identity =
            s.opt("replica_identity", ReplicaIdentity::Default, |field| cx.choice(field, &identities))?;
        tables.push(TableSetup { id, name, rows, replica_identity });
    }
    Ok(tables)
}

/// `schema.table`.
fn table_name(cx: &Cx, field: &Field) -> Res<String> {
    let name = cx.string(field)?;
    let identifier = |part: &str| {
        part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    };
    match name.split_once('.') {
        Some((schema, table)) if identifier(schema) && identifier(table) => Ok(name.to_owned()),
        _ => cx.fail(field, format!("`{name}` is not a schema-qualified table name like \"public.claims\"")),
    }
}

fn table_id(cx: &Cx, field: &Field, name: &str, tables: &[TableSetup]) -> Res<TableId> {
    match tables.iter().find(|table| table.name == name) {
        Some(table) => Ok(table.id),
        None => {
            let names: Vec<&str> = tables.iter().map(|table| table.name.as_str()).collect();
            cx.fail(field, format!("`{name}` is not a table of [[table]]; the tables are {}", names.join(", ")))
        }
    }
}

/// The Debezium properties the model uses.
const MODELLED: &str = "name connector.class topic.prefix plugin.name slot.name publication.name \
    publication.autocreate.mode snapshot.mode snapshot.fetch.size max.batch.size max.queue.size poll.interval.ms \
    retriable.restart.connector.wait.ms tombstones.on.delete table.include.list offset.mismatch.strategy \
    lsn.flush.mode heartbeat.interval.ms heartbeat.action.query slot.failover slot.drop.on.stop \
    provide.transaction.metadata";

/// Accepted and shown in the handoff record, with no effect on the model.
const ACCEPTED: &str = "database.hostname database.port database.user database.password database.dbname \
    tasks.max key.converter value.converter key.converter.schemas.enable value.converter.schemas.enable \
    snapshot.isolation.mode snapshot.locking.mode decimal.handling.mode time.precision.mode schema.include.list \
    errors.max.retries";

const CONNECTOR_CLASS: &str = "io.debezium.connector.postgresql.PostgresConnector";
const DECODERBUFS: &str = "Debezium's default, decoderbufs, is not modelled";

/// A connector property as a string (strings, integers and booleans are accepted).
fn prop_text(cx: &Cx, field: &Field) -> Res<String> {
    match &field.item.val {
        Val::Str(text) => Ok(text.clone()),
        Val::Int(Some(value)) => Ok(value.to_string()),
        Val::Int(None) => cx.fail(field, "the integer is out of range"),
        Val::Bool(flag) => Ok(flag.to_string()),
        _ => cx.wrong(field, "a string, integer or boolean"),
    }
}

/// An integer property's value: `60000` or `"60000"` (`None`: an integer too large for an
/// `i64`).
fn prop_value(cx: &Cx, field: &Field) -> Res<Option<i64>> {
    match &field.item.val {
        Val::Int(value) => Ok(*value),
        Val::Str(text) => {
            let text = text.trim();
            match text.parse() {
                Ok(value) => Ok(Some(value)),
                Err(_) if is_integer(text) => Ok(None),
                Err(_) => cx.fail(field, format!("expected an integer, found `{text}`")),
            }
        }
        _ => cx.wrong(field, "an integer"),
    }
}

/// Whether `text` is a whole number (of any size): digits, after a minus sign or not.
fn is_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
}

/// An integer property from `low` to `high`.
fn prop_int(cx: &Cx, field: &Field, low: i64, high: i64) -> Res<i64> {
    match prop_value(cx, field)? {
        Some(value) if (low..=high).contains(&value) => Ok(value),
        value => cx.fail(field, out_of_range(value, low, high)),
    }
}

/// A timer property in milliseconds, from `low` to a day (as [`Cx::setting_ms`]).
fn prop_setting_ms(cx: &Cx, field: &Field, low: u64) -> Res<u64> {
    match prop_value(cx, field)? {
        Some(value) if (low as i64..=limits::MAX_SETTING_MS as i64).contains(&value) => Ok(value as u64),
        value => cx.fail(field, setting_out_of_range(value, low)),
    }
}

/// A boolean property: `true` or `"true"`.
fn prop_bool(cx: &Cx, field: &Field) -> Res<bool> {
    match &field.item.val {
        Val::Bool(flag) => Ok(*flag),
        Val::Str(text) if text.trim().eq_ignore_ascii_case("true") => Ok(true),
        Val::Str(text) if text.trim().eq_ignore_ascii_case("false") => Ok(false),
        Val::Str(text) => cx.fail(field, format!("expected true or false, found `{text}`")),
        _ => cx.wrong(field, "a boolean"),
    }
}

/// A property the model supports with one value only (so far).
fn prop_only(cx: &Cx, s: &Section, key: &str, only: &str) -> Res<()> {
    match s.get(key) {
        Some(field) if !prop_text(cx, &field)?.trim().eq_ignore_ascii_case(only) => {
            let text = prop_text(cx, &field)?;
            cx.fail(&field, format!("`{text}` is not modelled yet; only {only}"))
        }
        _ => Ok(()),
    }
}

fn connector(
    cx: &Cx,
    s: &Section,
    tables: &[TableSetup],
    horizon: &Horizon,
) -> Res<(DebeziumConfig, BTreeMap<String, String>)> {
    s.check_keys(cx, &format!("{MODELLED} {ACCEPTED}"), "connector property")?;
    let text = |key: &str, default: &str| s.opt(key, default.to_owned(), |field| prop_text(cx, field));
    let milliseconds = |key: &str, default: u64, low: u64| s.opt(key, default, |field| prop_setting_ms(cx, field, low));
    let small = |key: &str, default: i64| {
        s.opt(key, default, |field| prop_int(cx, field, 1, i64::from(u32::MAX))).map(|value| value as u32)
    };
    let flag = |key: &str, default: bool| s.opt(key, default, |field| prop_bool(cx, field));
    let non_empty = |key: &str, default: &str| {
        let value = text(key, default)?;
        match s.get(key) {
            Some(field) if value.trim().is_empty() => cx.fail(&field, "must not be empty"),
            _ => Ok(value),
        }
    };

    let name = non_empty("name", "claims-connector")?;
    if let Some(field) = s.get("connector.class")
        && prop_text(cx, &field)? != CONNECTOR_CLASS
    {
        return cx.fail(
            &field,
            format!("`{}` is not the PostgreSQL connector; expected {CONNECTOR_CLASS}", prop_text(cx, &field)?),
        );
    }
    let prefix_field = s.need(cx, "topic.prefix", "; topics are <topic.prefix>.<schema>.<table>")?;
    let topic_prefix = prop_text(cx, &prefix_field)?;
    if topic_prefix.is_empty() || !topic_prefix.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
        return cx.fail(
            &prefix_field,
            format!("`{topic_prefix}` is not a valid topic prefix (letters, digits, `.`, `_`, `-`)"),
        );
    }
    let plugin_field = s.need(cx, "plugin.name", &format!("; set it to pgoutput ({DECODERBUFS})"))?;
    let plugin_name = prop_text(cx, &plugin_field)?.trim().to_ascii_lowercase();
    if plugin_name != "pgoutput" {
        return cx.fail(&plugin_field, format!("`{plugin_name}` is not modelled; only pgoutput ({DECODERBUFS})"));
    }
    let slot_name = non_empty("slot.name", "debezium")?;
    if slot_name.len() > 63 || !slot_name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        let field = s.need(cx, "slot.name", "")?;
        return cx.fail(
            &field,
            format!("`{slot_name}` is not a valid slot name (lower-case letters, digits and `_`, at most 63)"),
        );
    }
    let publication_name = non_empty("publication.name", "dbz_publication")?;
    prop_only(cx, s, "publication.autocreate.mode", "all_tables")?;
    let snapshot_mode = s.opt("snapshot.mode", SnapshotMode::Initial, |field| snapshot_mode(cx, field))?;
    let snapshot_fetch_size = small("snapshot.fetch.size", 10_240)?;
    let max_batch_size = small("max.batch.size", 2_048)?;
    let max_queue_size = small("max.queue.size", 8_192)?;
    if max_queue_size <= max_batch_size
        && let Some(field) = s.get("max.queue.size").or_else(|| s.get("max.batch.size"))
    {
        return cx.fail(
            &field,
            format!("max.queue.size ({max_queue_size}) must be larger than max.batch.size ({max_batch_size})"),
        );
    }
    let poll_interval_ms = milliseconds("poll.interval.ms", 500, 1)?;
    let retriable_restart_connector_wait_ms = milliseconds("retriable.restart.connector.wait.ms", 10_000, 1)?;
    let tombstones_on_delete = flag("tombstones.on.delete", true)?;
    let all_tables = tables;
    let tables = include_list(cx, s, tables)?;
    let offset_mismatch_strategy = choose(
        cx,
        s,
        "offset.mismatch.strategy",
        &OffsetMismatchStrategy::ALL,
        OffsetMismatchStrategy::name,
        OffsetMismatchStrategy::NoValidation,
    )?;
    let lsn_flush_mode =
        choose(cx, s, "lsn.flush.mode", &LsnFlushMode::ALL, LsnFlushMode::name, LsnFlushMode::Connector)?;
    let heartbeat_interval_ms = milliseconds("heartbeat.interval.ms", 0, 0)?;
    // Every heartbeat is a record in Kafka and an event of the trace: at most `MAX_HEARTBEATS`
    // over the horizon.
    if let Some(field) = s.get("heartbeat.interval.ms")
        && heartbeat_interval_ms > 0
        && horizon.ms / heartbeat_interval_ms > limits::MAX_HEARTBEATS
    {
        let shortest = horizon.ms.div_ceil(limits::MAX_HEARTBEATS);
        return cx.fail(
            &field,
            format!(
                "{heartbeat_interval_ms} ms makes {} heartbeats within {}, {}; expected 0 (off) or {shortest} to {}: at \
                 most {} heartbeats in a run",
                horizon.ms / heartbeat_interval_ms,
                duration_text(horizon.ms),
                horizon.describe(),
                limits::MAX_SETTING_MS,
                limits::MAX_HEARTBEATS
            ),
        );
    }
    let slot_failover = flag("slot.failover", false)?;
    // The action query is modelled as an upsert into a table of the scenario: the query must
    // name one (`INSERT INTO public.heartbeat … ON CONFLICT … DO UPDATE …`).
    let heartbeat_action_table = match s.get("heartbeat.action.query") {
        None => None,
        Some(field) => {
            let query = prop_text(cx, &field)?;
            let named: Vec<&TableSetup> =
                all_tables.iter().filter(|table| query.contains(table.name.as_str())).collect();
            match named.as_slice() {
                [table] if table.rows >= 1 => Some(table.id),
                [table] => {
                    return cx
                        .fail(&field, format!("the heartbeat table {} needs its row: give it rows = 1", table.name));
                }
                _ => {
                    return cx.fail(
                        &field,
                        "the model runs the heartbeat query as an upsert of row 1 of a table of the scenario: name \
                         exactly one [[table]] in it, e.g. INSERT INTO public.heartbeat ...",
                    );
                }
            }
        }
    };
    if heartbeat_action_table.is_some() && heartbeat_interval_ms == 0 {
        let field = s.get("heartbeat.action.query").expect("present");
        return cx.fail(&field, "heartbeat.action.query runs only with heartbeat.interval.ms above 0");
    }
    for key in ["slot.drop.on.stop", "provide.transaction.metadata"] {
        if let Some(field) = s.get(key)
            && prop_bool(cx, &field)?
        {
            return cx.fail(&field, "true is not modelled yet; only false");
        }
    }
    let mut properties = BTreeMap::new();
    for entry in s.entries {
        properties.insert(entry.key.clone(), prop_text(cx, &s.field(entry))?);
    }
    let debezium = DebeziumConfig {
        version: (3, 7),
        name,
        topic_prefix,
        slot_name,
        plugin_name,
        publication_name,
        snapshot_mode,
        snapshot_fetch_size,
        max_batch_size,
        poll_interval_ms,
        retriable_restart_connector_wait_ms,
        tombstones_on_delete,
        log_position_check_enable: true,
        offset_mismatch_strategy,
        lsn_flush_mode,
        heartbeat_interval_ms,
        heartbeat_action_table,
        slot_failover,
        tables,
    };
    Ok((debezium, properties))
}

/// An enumerated connector property: one of `all`, by its Debezium name.
fn choose<T: Copy>(cx: &Cx, s: &Section, key: &str, all: &[T], name: fn(T) -> &'static str, default: T) -> Res<T> {
    s.opt(key, default, |field| {
        let text = prop_text(cx, field)?;
        match all.iter().copied().find(|value| name(*value) == text.trim()) {
            Some(value) => Ok(value),
            None => cx.fail(field, unknown_value(&text, all.iter().map(|value| name(*value)))),
        }
    })
}

fn snapshot_mode(cx: &Cx, field: &Field) -> Res<SnapshotMode> {
    let modes = [SnapshotMode::Initial, SnapshotMode::NoData, SnapshotMode::WhenNeeded, SnapshotMode::Always];
    let text = prop_text(cx, field)?;
    let lower = text.trim().to_ascii_lowercase();
    if let Some(mode) = modes.into_iter().find(|mode| mode.name() == lower) {
        return Ok(mode);
    }
    let names = modes.map(SnapshotMode::name).join(", ");
    match lower.as_str() {
        "never" => {
            cx.fail(field, "`never` was removed in Debezium 3.3 (DBZ-8171); it was an alias of `no_data`: use no_data")
        }
        "initial_only" | "configuration_based" | "custom" => {
            cx.fail(field, format!("`{text}` is not modelled yet; expected one of {names}"))
        }
        _ => cx.fail(field, format!("unknown value `{text}`; expected one of {names}")),
    }
}

/// `table.include.list`: names of `[[table]]`, in snapshot order; all tables by default.
fn include_list(cx: &Cx, s: &Section, tables: &[TableSetup]) -> Res<Vec<TableId>> {
    let Some(field) = s.get("table.include.list") else {
        return Ok(tables.iter().map(|table| table.id).collect());
    };
    let mut ids = Vec::new();
    for name in prop_text(cx, &field)?.split(',').map(str::trim) {
        if name.is_empty() {
            return cx.fail(&field, "an empty table name in the list");
        }
        let id = table_id(cx, &field, name, tables)?;
        if ids.contains(&id) {
            return cx.fail(&field, format!("`{name}` is listed twice"));
        }
        ids.push(id);
    }
    Ok(ids)
}

fn connect(cx: &Cx, s: &Section, horizon: &Horizon) -> Res<(ConnectConfig, u64)> {
    s.check_keys(cx, "offset.flush.interval.ms offset.flush.timeout.ms start_at_ms", "field")?;
    let setting = |key: &str, default: u64| s.opt(key, default, |field| cx.setting_ms(field, 1));
    let config = ConnectConfig {
        offset_flush_interval_ms: setting("offset.flush.interval.ms", 60_000)?,
        offset_flush_timeout_ms: setting("offset.flush.timeout.ms", 5_000)?,
    };
    let start_at_ms = s.opt("start_at_ms", 0, |field| cx.time_ms(field, 0, horizon))?;
    Ok((config, start_at_ms))
}

fn kafka(cx: &Cx, s: &Section) -> Res<u32> {
    s.check_keys(cx, "partitions", "field")?;
    s.opt("partitions", 1, |field| cx.int(field, 1, 64).map(|value| value as u32))
}

struct Sink {
    rule: ApplyRule,
    group: String,
    auto_commit_interval_ms: u64,
    max_poll_records: u32,
    auto_offset_reset: OffsetReset,
}

fn sink(cx: &Cx, s: &Section) -> Res<Sink> {
    s.check_keys(cx, "apply group.id auto.commit.interval.ms max.poll.records auto.offset.reset", "field")?;
    let rules = [ApplyRule::VersionGuard, ApplyRule::NaiveUpsert, ApplyRule::SnapshotEpoch];
    let rules = rules.map(|rule| (rule.name(), rule));
    let rule = s.req(cx, "apply", |field| cx.choice(field, &rules))?;
    let group = s.opt("group.id", "claims-search-index".to_owned(), |field| match cx.string(field)? {
        "" => cx.fail(field, "must not be empty"),
        group => Ok(group.to_owned()),
    })?;
    let auto_commit_interval_ms = s.opt("auto.commit.interval.ms", 5_000, |field| cx.setting_ms(field, 1))?;
    let max_poll_records = s.opt("max.poll.records", 500, |field| cx.u32(field, 1))?;
    // The sink is a plain consumer group: `ConsumerConfig`'s default, `latest`.
    let resets = OffsetReset::ALL.map(|reset| (reset.name(), reset));
    let auto_offset_reset =
        s.opt("auto.offset.reset", OffsetReset::CONSUMER_DEFAULT, |field| cx.choice(field, &resets))?;
    Ok(Sink { rule, group, auto_commit_interval_ms, max_poll_records, auto_offset_reset })
}

fn workload(
    cx: &Cx,
    s: &Section,
    tables: &[TableSetup],
    horizon: &Horizon,
) -> Res<(Option<Background>, Vec<ScriptedTxn>)> {
    let known = "start_ms end_ms inserts_per_second updates_per_second deletes_per_second script";
    s.check_keys(cx, known, "field")?;
    let start_ms = s.opt("start_ms", 0, |field| cx.time_ms(field, 0, horizon))?;
    let end_ms = s.opt("end_ms", 0, |field| cx.time_ms(field, 0, horizon))?;
    let rate = |key: &str| s.opt(key, 0.0, |field| cx.rate(field));
    let (inserts_per_second, updates_per_second, deletes_per_second) =
        (rate("inserts_per_second")?, rate("updates_per_second")?, rate("deletes_per_second")?);
    let busy = inserts_per_second > 0.0 || updates_per_second > 0.0 || deletes_per_second > 0.0;
    if end_ms < start_ms || (busy && end_ms == start_ms) {
        let field = s.get("end_ms").or_else(|| s.get("start_ms"));
        let (at, path) = field.map_or_else(|| (s.at, s.field_path("end_ms")), |field| (field.at, field.path));
        let problem = if end_ms < start_ms {
            format!("end_ms ({end_ms}) is before start_ms ({start_ms})")
        } else {
            format!("the window is empty (start_ms = end_ms = {end_ms}); a rate above 0 needs end_ms > start_ms")
        };
        return Err(cx.err(at, &path, problem));
    }
    let background =
        busy.then_some(Background { start_ms, end_ms, inserts_per_second, updates_per_second, deletes_per_second });
    let mut scripted = Vec::new();
    if let Some(field) = s.get("script") {
        let items = cx.items(&field, "an array of tables ([[workload.script]])")?;
        if let Some(item) = items.get(limits::MAX_TRANSACTIONS as usize) {
            let problem = format!(
                "too many scripted transactions: {}; expected 0 to {} transactions in a run",
                items.len(),
                limits::MAX_TRANSACTIONS
            );
            return cx.fail(item, problem);
        }
        for item in &items {
            scripted.push(script_entry(cx, item, tables, Some(horizon))?);
        }
        script_steps_apply(cx, &items, &scripted, tables, background.as_ref())?;
    }
    // The background's transactions and the scripted ones: at most `MAX_TRANSACTIONS`.
    if let Some(background) = &background {
        let total = background.transactions().saturating_add(scripted.len() as u64);
        if total > limits::MAX_TRANSACTIONS {
            // Blame the rate that makes the most.
            let rates = [
                ("inserts_per_second", inserts_per_second),
                ("updates_per_second", updates_per_second),
                ("deletes_per_second", deletes_per_second),
            ];
            let ((key, rate), count) = rates
                .into_iter()
                .zip(background.transaction_counts())
                .max_by_key(|(_, count)| *count)
                .expect("three rates");
            let field = s.get(key).expect("the rate that makes transactions is given");
            let others = total - count;
            let seconds = (end_ms - start_ms) as f64 / 1000.0;
            let most = ((limits::MAX_TRANSACTIONS - others.min(limits::MAX_TRANSACTIONS)) as f64 / seconds).floor();
            let problem = format!(
                "{rate} per second makes {count} transactions in the window of {} (start_ms = {start_ms} to end_ms = \
                 {end_ms}){}; expected 0 to {} transactions in a run, background and scripted together: at most \
                 {most} per second here",
                duration_text(end_ms - start_ms),
                if others > 0 { format!(", {total} with the other rates and the script") } else { String::new() },
                limits::MAX_TRANSACTIONS,
            );
            return cx.fail(&field, problem);
        }
    }
    Ok((background, scripted))
}

/// Whether step `other` may run before step `this`: unless both run at absolute times and
/// `other`'s is later (a moment's time is known only in the run).
fn may_run_before(other: &ScriptedTxn, this: &ScriptedTxn) -> bool {
    match (other.trigger, this.trigger) {
        (Trigger::At { at_ms: other }, Trigger::At { at_ms: this }) => other <= this,
        _ => true,
    }
}

/// The `insert`, `update` or `delete` field of a script entry: where an error about its step
/// points.
fn op_field<'t>(cx: &Cx, item: &Field<'t>) -> Res<Field<'t>> {
    let s = cx.section(item)?;
    Ok(s.get("insert").or_else(|| s.get("update")).or_else(|| s.get("delete")).expect("a step has an operation"))
}

/// Every `[[workload.script]]` step can apply in some run: an update or delete names a row that
/// exists at some point before it (loaded, inserted by a step that may run before it, or among
/// the keys the background workload inserts), and an insert names a key that is free at some
/// point before it (not loaded, or deleted by a step or the background). A step that can never
/// apply is refused here; one whose fate depends on the run (the background deleted its row)
/// is reported in the run's timeline when it does not apply.
fn script_steps_apply(
    cx: &Cx,
    items: &[Field],
    scripted: &[ScriptedTxn],
    tables: &[TableSetup],
    background: Option<&Background>,
) -> Res<()> {
    let first = tables.first().map(|table| table.id);
    for (index, (item, txn)) in items.iter().zip(scripted).enumerate() {
        let Some(op) = txn.ops.first() else { continue };
        let (table, key) = match *op {
            RowOp::Insert { table, key, .. } | RowOp::Update { table, key, .. } | RowOp::Delete { table, key } => {
                (table, key)
            }
        };
        let setup = &tables[usize::from(table.0)];
        let rows = i64::from(setup.rows);
        let loaded = key <= rows;
        // The background workload changes the first table: it inserts the keys after the loaded
        // ones, and deletes rows it believes live.
        let background = background.filter(|_| Some(table) == first);
        let [inserts, _, _] = background.map_or([0, 0, 0], Background::transaction_counts);
        let background_inserts = key > rows && (key - rows) as u64 <= inserts;
        let background_deletes = background.is_some_and(|b| b.deletes_per_second > 0.0);
        let step_before = |wanted: fn(&RowOp) -> bool| {
            scripted.iter().enumerate().any(|(other, step)| {
                other != index
                    && may_run_before(step, txn)
                    && step.ops.iter().any(|op| wanted(op) && op_target(op) == (table, key))
            })
        };
        let name = &setup.name;
        let loaded_keys =
            if rows == 0 { "it loads no row".to_string() } else { format!("keys 1 to {rows} are loaded") };
        let problem = match op {
            RowOp::Update { .. } | RowOp::Delete { .. }
                if !loaded && !background_inserts && !step_before(|op| matches!(op, RowOp::Insert { .. })) =>
            {
                let verb = if matches!(op, RowOp::Update { .. }) { "update" } else { "delete" };
                Some(format!(
                    "claim {key} is not a row of {name} ({loaded_keys}) and no step that may run before this one \
                     inserts it: the {verb} would change nothing"
                ))
            }
            RowOp::Insert { .. }
                if loaded && !background_deletes && !step_before(|op| matches!(op, RowOp::Delete { .. })) =>
            {
                Some(format!(
                    "claim {key} is already a row of {name} ({loaded_keys}) and no step that may run before this one \
                     deletes it: the insert would fail with a duplicate key"
                ))
            }
            _ => None,
        };
        if let Some(problem) = problem {
            return cx.fail(&op_field(cx, item)?, problem);
        }
    }
    Ok(())
}

/// The row an operation names.
fn op_target(op: &RowOp) -> (TableId, i64) {
    match *op {
        RowOp::Insert { table, key, .. } | RowOp::Update { table, key, .. } | RowOp::Delete { table, key } => {
            (table, key)
        }
    }
}

/// A `[[workload.script]]` entry (`timed`: it has an `at`, within the horizon), or a
/// `[[check.script]]` one (it may run at any point of the exhaustive lens, so it has none).
fn script_entry(cx: &Cx, item: &Field, tables: &[TableSetup], timed: Option<&Horizon>) -> Res<ScriptedTxn> {
    let s = cx.section(item)?;
    let trigger = match timed {
        Some(horizon) => {
            s.check_keys(cx, "at insert update delete status amount_cents table label", "field")?;
            s.req(cx, "at", |field| cx.trigger(field, horizon))?
        }
        None => {
            s.check_keys(cx, "insert update delete status amount_cents table label", "field")?;
            Trigger::At { at_ms: 0 }
        }
    };
    let ops: Vec<&Entry> =
        s.entries.iter().filter(|entry| ["insert", "update", "delete"].contains(&entry.key.as_str())).collect();
    let op = match ops.as_slice() {
        [] => return Err(cx.err(s.at, &s.path, "one of insert, update or delete is required")),
        [op] => *op,
        [first, second, ..] => {
            let problem =
                format!("exactly one of insert, update or delete is allowed; found {} and {}", first.key, second.key);
            return Err(cx.err(second.at(), &s.path, problem));
        }
    };
    let key = cx.int(&s.field(op), 1, i64::MAX)?;
    let table = match s.get("table") {
        Some(field) => table_id(cx, &field, cx.string(&field)?, tables)?,
        None => TableId(0),
    };
    let statuses = [Status::Submitted, Status::Assessed, Status::Approved, Status::Paid, Status::Closed];
    let statuses = statuses.map(|status| (status.name(), status));
    let status = |default| s.opt("status", default, |field| cx.choice(field, &statuses));
    for (key, applies) in [("status", op.key != "delete"), ("amount_cents", op.key == "insert")] {
        if let Some(field) = s.get(key).filter(|_| !applies) {
            return cx.fail(&field, format!("does not apply to {}", op.key));
        }
    }
    let row_op = match op.key.as_str() {
        "insert" => RowOp::Insert {
            table,
            key,
            status: status(Status::Submitted)?,
            amount_cents: s.opt("amount_cents", 100_000, |field| cx.u32(field, 0))?,
        },
        "update" => RowOp::Update { table, key, status: status(Status::Approved)? },
        _ => RowOp::Delete { table, key },
    };
    let label = s.opt("label", String::new(), |field| cx.owned(field))?;
    Ok(ScriptedTxn { trigger, ops: vec![row_op], label })
}

fn faults(cx: &Cx, root: &Section, standby: bool, horizon: &Horizon) -> Res<Vec<Fault>> {
    let Some(field) = root.get("fault") else { return Ok(Vec::new()) };
    cx.items(&field, "an array of tables ([[fault]])")?.iter().map(|item| fault(cx, item, standby, horizon)).collect()
}

/// The fields of `[[fault]]` besides `at` and `action`.
const FAULT_FIELDS: [&str; 6] =
    ["restart_after_ms", "resume_after_ms", "promote_after_ms", "between", "duration_ms", "bytes"];

/// The fields an action takes, besides `at` and `action`.
fn fault_fields(kind: FaultKind) -> &'static [&'static str] {
    match kind {
        FaultKind::KillConnectWorker | FaultKind::KillConnectorTask | FaultKind::CrashPostgres => &["restart_after_ms"],
        FaultKind::StopConnector => &["resume_after_ms"],
        FaultKind::FailOverToStandby => &["promote_after_ms"],
        FaultKind::Clog => &["between", "duration_ms"],
        FaultKind::WalBurst => &["bytes"],
        FaultKind::RecreateSlot | FaultKind::RebuildConnector | FaultKind::Checkpoint => &[],
    }
}

fn fault(cx: &Cx, item: &Field, standby: bool, horizon: &Horizon) -> Res<Fault> {
    let s = cx.section(item)?;
    s.check_keys(cx, &format!("at action {}", FAULT_FIELDS.join(" ")), "field")?;
    let trigger = s.req(cx, "at", |field| cx.trigger(field, horizon))?;
    let action_field = s.need(cx, "action", "")?;
    let kind = cx.choice(&action_field, &FaultKind::ALL.map(|kind| (kind.name(), kind)))?;
    let action = kind.name();
    let takes = fault_fields(kind);
    for key in FAULT_FIELDS.into_iter().filter(|key| !takes.contains(key)) {
        if let Some(field) = s.get(key) {
            let takes = if takes.is_empty() { "no other field".to_owned() } else { takes.join(" and ") };
            return cx.fail(&field, format!("does not apply to action {action} (it takes {takes})"));
        }
    }
    if kind == FaultKind::FailOverToStandby && !standby {
        return cx.fail(&action_field, "fail-over-to-standby needs a standby: add [postgres.standby]");
    }
    let needed = |key: &str| s.need(cx, key, &format!(" (required by action {action})"));
    // Delays are times of the run: within its horizon.
    let optional = |key: &str| s.get(key).map(|field| cx.time_ms(&field, 0, horizon)).transpose();
    let required = |key: &str| needed(key).and_then(|field| cx.time_ms(&field, 0, horizon));
    let action = match kind {
        FaultKind::KillConnectWorker => {
            FaultAction::KillConnectWorker { restart_after_ms: optional("restart_after_ms")? }
        }
        FaultKind::KillConnectorTask => {
            FaultAction::KillConnectorTask { restart_after_ms: optional("restart_after_ms")? }
        }
        FaultKind::StopConnector => FaultAction::StopConnector { resume_after_ms: optional("resume_after_ms")? },
        FaultKind::CrashPostgres => FaultAction::CrashPostgres { restart_after_ms: required("restart_after_ms")? },
        FaultKind::FailOverToStandby => {
            FaultAction::FailOverToStandby { promote_after_ms: required("promote_after_ms")? }
        }
        FaultKind::RecreateSlot => FaultAction::RecreateSlot,
        FaultKind::RebuildConnector => FaultAction::RebuildConnector,
        FaultKind::Clog => FaultAction::Clog {
            between: clog_between(cx, &needed("between")?, standby)?,
            duration_ms: needed("duration_ms").and_then(|field| cx.time_ms(&field, 1, horizon))?,
        },
        FaultKind::WalBurst => FaultAction::WalBurst { bytes: wal_burst_bytes(cx, &needed("bytes")?)? },
        FaultKind::Checkpoint => FaultAction::Checkpoint,
    };
    Ok(Fault { trigger, action })
}

/// The processes a clog can name: the database service and the machines.
const CLOG_NODES: [Node; 9] = [
    Node::Postgres,
    Node::Pg1,
    Node::Pg2,
    Node::Connect,
    Node::Kafka,
    Node::Sink,
    Node::App,
    Node::Operator,
    Node::Loader,
];

/// `between = ["connect", "postgres"]`: two distinct processes.
fn clog_between(cx: &Cx, field: &Field, standby: bool) -> Res<(Node, Node)> {
    let items = cx.items(field, "an array of two process names, like [\"connect\", \"postgres\"]")?;
    let [first, second] = items.as_slice() else {
        let count = items.len();
        return cx.fail(field, format!("expected two process names, found {count}; like [\"connect\", \"postgres\"]"));
    };
    let nodes = CLOG_NODES.map(|node| (node.name(), node));
    let (a, b) = (cx.choice(first, &nodes)?, cx.choice(second, &nodes)?);
    if a == b {
        return cx.fail(second, format!("a clog is between two different processes; `{a}` is named twice"));
    }
    if let Some(item) = [(first, a), (second, b)].into_iter().find(|(_, node)| *node == Node::Pg2 && !standby) {
        return cx.fail(item.0, "pg2 is the standby: add [postgres.standby]");
    }
    Ok((a, b))
}

/// The most WAL a burst may write.
const MAX_WAL_BURST: u64 = 64 << 30;

/// `bytes = "64MB"`: 1 byte to 64GB.
fn wal_burst_bytes(cx: &Cx, field: &Field) -> Res<u64> {
    let text = cx.string(field)?;
    let Some(bytes) = with_unit(text, &units::SIZE_UNITS) else {
        return cx.fail(
            field,
            format!("`{text}` is not a size; expected a number and a unit (B, kB, MB, GB), like \"64MB\""),
        );
    };
    if !(1..=MAX_WAL_BURST).contains(&bytes) {
        return cx.fail(field, format!("`{text}` is out of range; expected 1B to 64GB"));
    }
    Ok(bytes)
}

/// `[fault_profile]`: faults generated per seed (swarm testing).
fn fault_profile(cx: &Cx, s: &Section, standby: bool, horizon: &Horizon) -> Res<FaultProfile> {
    s.check_keys(cx, "kinds max_faults window moments", "field")?;
    let kinds_field = s.need(cx, "kinds", "; name the fault actions the seed may draw, like [\"clog\"]")?;
    let kinds = listed_once(cx, &kinds_field, "an array of fault actions, like [\"clog\"]", |item| {
        let kind = cx.choice(item, &FaultKind::ALL.map(|kind| (kind.name(), kind)))?;
        if kind == FaultKind::FailOverToStandby && !standby {
            return cx.fail(item, "fail-over-to-standby needs a standby: add [postgres.standby]");
        }
        Ok(kind)
    })?;
    if kinds.is_empty() {
        return cx.fail(&kinds_field, "must name at least one fault action");
    }
    let max_faults = s.opt("max_faults", 3, |field| cx.int(field, 0, 20).map(|value| value as u32))?;
    // The default window is the first minute, or the whole run if its horizon is shorter.
    let window_ms = s.opt("window", (0, horizon.ms.min(60_000)), |field| window(cx, field, horizon))?;
    let moments = s.opt("moments", Vec::new(), |field| {
        listed_once(cx, field, "an array of moments, like [\"snapshot-completed\"]", |item| {
            let text = cx.string(item)?;
            match Moment::parse(text) {
                Some(moment) => Ok(moment),
                None => cx.fail(item, unknown_moment(text)),
            }
        })
    })?;
    Ok(FaultProfile { kinds, max_faults, window_ms, moments })
}

/// The elements of an array, each read by `read` and none twice.
fn listed_once<T: PartialEq>(cx: &Cx, field: &Field, expected: &str, read: impl Fn(&Field) -> Res<T>) -> Res<Vec<T>> {
    let mut values = Vec::new();
    for item in cx.items(field, expected)? {
        let value = read(&item)?;
        if values.contains(&value) {
            return cx.fail(&item, format!("`{}` is listed twice", cx.string(&item)?));
        }
        values.push(value);
    }
    Ok(values)
}

/// `window = ["0s", "60s"]`: two times within the horizon, the start not after the end.
fn window(cx: &Cx, field: &Field, horizon: &Horizon) -> Res<(u64, u64)> {
    let items = cx.items(field, "an array of two times, like [\"0s\", \"60s\"]")?;
    let [start, end] = items.as_slice() else {
        return cx.fail(field, format!("expected two times, found {}; like [\"0s\", \"60s\"]", items.len()));
    };
    let time = |item: &Field| {
        let text = cx.string(item)?;
        match duration_ms(text) {
            Some(ms) if ms <= horizon.ms => Ok(ms),
            Some(_) => cx.fail(
                item,
                format!(
                    "`{text}` is out of range; expected 0s to {}, {}",
                    duration_text(horizon.ms),
                    horizon.describe()
                ),
            ),
            None => cx.fail(item, format!("`{text}` is not a time; expected a number and a unit ({DURATION_UNITS})")),
        }
    };
    let (start_ms, end_ms) = (time(start)?, time(end)?);
    if start_ms > end_ms {
        let (from, to) = (cx.string(start)?, cx.string(end)?);
        return cx.fail(field, format!("the start ({from}) is after the end ({to})"));
    }
    Ok((start_ms, end_ms))
}

fn handoff(cx: &Cx, s: &Section, horizon: &Horizon) -> Res<HandoffMethod> {
    s.check_keys(cx, "method read_at_ms", "field")?;
    let methods = [("connector-snapshot", false), ("plain-read", true)];
    let method = s.get("method");
    let plain = method.as_ref().map_or(Ok(false), |field| cx.choice(field, &methods))?;
    match (plain, s.get("read_at_ms"), method) {
        (true, Some(field), _) => Ok(HandoffMethod::PlainRead { read_at_ms: cx.time_ms(&field, 0, horizon)? }),
        (true, None, Some(method)) => {
            Err(cx.err(method.at, &s.field_path("read_at_ms"), "required with method = \"plain-read\""))
        }
        (false, Some(field), _) => {
            cx.fail(&field, "applies only to method = \"plain-read\" (the method is connector-snapshot)")
        }
        _ => Ok(HandoffMethod::ConnectorSnapshot),
    }
}

fn failover(cx: &Cx, s: &Section, standby: bool) -> Res<GatePolicy> {
    s.check_keys(cx, "gate", "field")?;
    let gates = [("off", GatePolicy::Off), ("rebuild", GatePolicy::Rebuild), ("fail-closed", GatePolicy::FailClosed)];
    let Some(field) = s.get("gate") else { return Ok(GatePolicy::Off) };
    let gate = cx.choice(&field, &gates)?;
    if gate != GatePolicy::Off && !standby {
        return cx.fail(
            &field,
            format!("gate `{}` needs a standby to fail over to: add [postgres.standby]", cx.string(&field)?),
        );
    }
    Ok(gate)
}

fn acceptance(cx: &Cx, s: &Section) -> Res<(Acceptance, Horizon)> {
    s.check_keys(cx, "timeout_ms sample_size horizon_ms", "field")?;
    let (low, high) = (limits::MIN_HORIZON_MS as i64, limits::MAX_HORIZON_MS as i64);
    let horizon_ms = s.opt("horizon_ms", limits::DEFAULT_HORIZON_MS, |field| match field.item.val {
        Val::Int(Some(value)) if (low..=high).contains(&value) => Ok(value as u64),
        Val::Int(value) => cx.fail(
            field,
            format!(
                "{} ({} to {})",
                out_of_range(value, low, high),
                duration_text(low as u64),
                duration_text(high as u64)
            ),
        ),
        _ => cx.wrong(field, "an integer"),
    })?;
    let acceptance = Acceptance {
        timeout_ms: s.opt("timeout_ms", 600_000, |field| cx.int(field, 0, high).map(|value| value as u64))?,
        sample_size: s.opt("sample_size", 20, |field| cx.u32(field, 0))?,
        horizon_ms,
    };
    Ok((acceptance, Horizon { ms: horizon_ms, given: s.get("horizon_ms").is_some() }))
}

/// `[check]`: the bound of `handoff check`.
fn check(cx: &Cx, s: &Section, tables: &[TableSetup]) -> Res<CheckBound> {
    s.check_keys(cx, "rows crash crashes periodic_fires operations operate_while script unreached_ok", "field")?;
    let rows = s.req(cx, "rows", |field| cx.int(field, 1, i64::from(MAX_CHECK_ROWS)))? as u32;
    let crash = s.opt("crash", Vec::new(), |field| {
        let mut nodes = Vec::new();
        for item in cx.items(field, "an array of process names, like [\"connect\", \"postgres\"]")? {
            let node = cx.choice(&item, &CheckBound::CRASHABLE)?;
            if nodes.contains(&node) {
                return cx.fail(&item, "is named twice");
            }
            nodes.push(node);
        }
        Ok(nodes)
    })?;
    let crashes = s.opt("crashes", crash.len() as u8, |field| Ok(cx.int(field, 0, 4)? as u8))?;
    if crashes > 0
        && crash.is_empty()
        && let Some(field) = s.get("crashes")
    {
        return cx.fail(&field, "needs crash = [...]: name the processes that may crash");
    }
    let periodic_fires = s.opt("periodic_fires", 1, |field| Ok(cx.int(field, 0, 3)? as u8))?;
    let mut scripts = Vec::new();
    if let Some(field) = s.get("script") {
        let items = cx.items(&field, "an array of tables ([[check.script]])")?;
        let all: Vec<ScriptedTxn> =
            items.iter().map(|item| script_entry(cx, item, tables, None)).collect::<Res<_>>()?;
        for item in items {
            let txn = script_entry(cx, &item, tables, None)?;
            // The bound's transactions may run in any order: an insert of a loaded key applies
            // only after a step deletes it.
            if let Some(RowOp::Insert { table, key, .. }) = txn.ops.first()
                && *key <= i64::from(rows)
                && !all.iter().any(|step| {
                    step.ops.iter().any(|op| matches!(op, RowOp::Delete { .. }) && op_target(op) == (*table, *key))
                })
            {
                return cx.fail(
                    &op_field(cx, &item)?,
                    format!(
                        "the bound loads keys 1 to {rows} (rows = {rows}); claim {key} is one of them and no \
                         [[check.script]] step deletes it: the insert would always fail with a duplicate key"
                    ),
                );
            }
            if let Some(RowOp::Update { key, .. } | RowOp::Delete { key, .. }) = txn.ops.first()
                && *key > i64::from(rows)
            {
                let at = cx.section(&item)?;
                let op = at.get("update").or_else(|| at.get("delete")).expect("an update or a delete");
                return cx
                    .fail(&op, format!("the bound loads keys 1 to {rows} (rows = {rows}); {key} is not one of them"));
            }
            scripts.push(txn);
        }
    }
    let unreached_ok = s.opt("unreached_ok", Vec::new(), |field| {
        let names = handoff_models::exhaustive::check::SOMETIMES.map(|name| (name, name));
        cx.items(field, "an array of `sometimes` property names")?
            .iter()
            .map(|item| cx.choice(item, &names).map(str::to_owned))
            .collect()
    })?;
    let operations = s.opt("operations", Vec::new(), |field| {
        let names = Operation::ALL.map(|operation| (operation.name(), operation));
        let mut operations = Vec::new();
        for item in cx.items(field, "an array of operations, like [\"recreate-slot\"]")? {
            let operation = cx.choice(&item, &names)?;
            if operations.contains(&operation) {
                return cx.fail(&item, "is named twice");
            }
            operations.push(operation);
        }
        Ok(operations)
    })?;
    let operate_while = s.opt("operate_while", OperateWhile::AnyTime, |field| {
        let names = OperateWhile::ALL.map(|when| (when.name(), when));
        cx.choice(field, &names)
    })?;
    if operate_while != OperateWhile::AnyTime
        && operations.is_empty()
        && let Some(field) = s.get("operate_while")
    {
        return cx.fail(&field, "needs operations = [...]: name what the operator may do");
    }
    Ok(CheckBound { rows, scripts, crash, crashes, periodic_fires, operations, operate_while, unreached_ok })
}

/// `[schedule]`: a path through the `[check]` bound for `handoff run` to follow.
fn schedule<'t>(cx: &Cx, root: &Section<'t>, s: &Section<'t>, horizon: &Horizon) -> Res<(Schedule, Vec<Field<'t>>)> {
    s.check_keys(cx, "step_ms steps", "field")?;
    if root.get("check").is_none() {
        return Err(cx.err(
            s.at,
            "schedule",
            "a schedule is a path through the [check] bound; the scenario has no [check]",
        ));
    }
    // The schedule is the run's whole story: the timed faults and workload would be ignored.
    for (key, what) in [("fault", "[[fault]]"), ("fault_profile", "[fault_profile]"), ("workload", "[workload]")] {
        if let Some(field) = root.get(key) {
            return cx.fail(
                &field,
                format!(
                    "a scenario with a [schedule] takes its crashes and transactions from the schedule and \
                     [[check.script]]; remove {what}"
                ),
            );
        }
    }
    let step_ms = s.opt("step_ms", 10, |field| Ok(cx.int(field, 2, 60_000)? as u64))?;
    let field = s.need(cx, "steps", ": the path, e.g. steps = [\"deliver pg1 -> connect\", \"crash connect\"]")?;
    let items = cx.items(&field, "an array of steps, like [\"deliver pg1 -> connect\", \"crash connect\"]")?;
    if items.is_empty() {
        return cx.fail(&field, "is empty: a schedule has at least one step");
    }
    // Step k is taken at (k + 1) × step_ms, and the schedule ends a step after the last one.
    let end_ms = (items.len() as u64 + 1).saturating_mul(step_ms);
    if end_ms > horizon.ms {
        let most = (horizon.ms / step_ms).saturating_sub(1);
        let expected = if most == 0 {
            format!("no step of {step_ms} ms fits: lower step_ms")
        } else {
            format!("expected 1 to {most} steps")
        };
        return cx.fail(
            &field,
            format!(
                "{} steps of {step_ms} ms end at {}, past {}; {expected}",
                items.len(),
                SimTime(end_ms),
                horizon.describe()
            ),
        );
    }
    let mut steps = Vec::with_capacity(items.len());
    for item in &items {
        let text = cx.string(item)?;
        steps.push(text.parse().or_else(|problem: String| cx.fail(item, problem))?);
    }
    Ok((Schedule { step_ms, steps }, items))
}

/// The most rows a bound may load per table (the state space grows fast with rows).
const MAX_CHECK_ROWS: u32 = 8;

fn prediction(cx: &Cx, root: &Section) -> Res<Prediction> {
    prediction_table(cx, &cx.section(&root.need(cx, "prediction", "; add [prediction] with verdict and why")?)?)
}

/// A `[prediction]` table (the scenario's, or a variant's).
fn prediction_table(cx: &Cx, s: &Section) -> Res<Prediction> {
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

// ---------------------------------------------------------------------------------------------
// Writing a scenario.

/// Writes `spec` as a scenario file (docs/scenario-format.md) that [`load_str`] reads back to
/// the same `Spec`, with `seed` as its seed: for `handoff shrink` and for saving failing seeds.
///
/// Sections come in the order the bundled scenarios use, and every value the `Spec` holds is
/// written explicitly, so the file does not depend on the format's defaults. The connector's
/// modelled properties are written from `spec.debezium` (keeping the text of
/// `spec.connector_properties` where it means the same value), and every other property from
/// `spec.connector_properties` as given.
///
/// An error names what the format cannot express: a scripted transaction with other than one
/// operation, a table that is not in `spec.tables`, or any value the loader would reject or
/// read differently (the written text is read back and compared before it is returned).
pub fn to_toml(spec: &Spec, seed: u64) -> Result<String, String> {
    if i64::try_from(seed).is_err() {
        return Err(format!("seed {seed} does not fit in a TOML integer; at most {}", i64::MAX));
    }
    let mut w = Writer::default();
    write_top(&mut w, spec, seed);
    write_versions(&mut w, spec);
    write_postgres(&mut w, spec);
    write_tables(&mut w, spec);
    write_connector(&mut w, spec)?;
    write_connect(&mut w, spec);
    write_kafka(&mut w, spec);
    write_sink(&mut w, spec);
    write_workload(&mut w, spec)?;
    write_faults(&mut w, spec);
    write_fault_profile(&mut w, spec);
    write_handoff(&mut w, spec);
    write_failover(&mut w, spec);
    write_acceptance(&mut w, spec);
    write_prediction(&mut w, spec);
    write_check(&mut w, spec)?;
    write_schedule(&mut w, spec);
    check_read_back(&w.text, spec, seed)?;
    Ok(w.text)
}

/// The text of a scenario file, a line at a time.
#[derive(Default)]
struct Writer {
    text: String,
}

impl Writer {
    /// `[header]`, after a blank line.
    fn table(&mut self, header: &str) {
        self.blank_line();
        self.text.push_str(&format!("[{header}]\n"));
    }

    /// `[[header]]`: one more entry of an array of tables.
    fn entry(&mut self, header: &str) {
        self.blank_line();
        self.text.push_str(&format!("[[{header}]]\n"));
    }

    /// `key = value`; `value` is TOML already.
    fn field(&mut self, key: &str, value: impl Display) {
        self.text.push_str(&format!("{} = {value}\n", toml_key(key)));
    }

    fn blank_line(&mut self) {
        if !self.text.is_empty() {
            self.text.push('\n');
        }
    }
}

fn write_top(w: &mut Writer, spec: &Spec, seed: u64) {
    w.field("name", toml_string(&spec.name));
    w.field("description", toml_string(&spec.description));
    w.field("seed", seed);
}

fn write_versions(w: &mut Writer, spec: &Spec) {
    let (major, minor) = spec.debezium.version;
    if (major, minor) != (3, 7) {
        w.table("versions");
        w.field("debezium", toml_string(&format!("{major}.{minor}")));
    }
}

fn write_postgres(w: &mut Writer, spec: &Spec) {
    w.table("postgres");
    w.field("version", spec.postgres_major_version);
    w.field("wal_segment_size", toml_string(&size_text(spec.wal_segment_size)));
    w.field("checkpoint_timeout", toml_string(&duration_text(spec.checkpoint_timeout_ms)));
    if spec.max_wal_size_mb != 1024 {
        w.field("max_wal_size", toml_string(&size_text(spec.max_wal_size_mb << 20)));
    }
    if let Some(cap_mb) = spec.max_slot_wal_keep_size_mb {
        w.field("max_slot_wal_keep_size", toml_string(&size_text(cap_mb << 20)));
    }
    if spec.wal_keep_size_mb != 0 {
        w.field("wal_keep_size", toml_string(&size_text(spec.wal_keep_size_mb << 20)));
    }
    if spec.synchronized_standby_slots {
        w.field("synchronized_standby_slots", toml_string("standby_slot"));
    }
    w.field("scan_rows_per_second", spec.scan_rows_per_second);
    if let Some(replication_delay_ms) = spec.standby {
        w.table("postgres.standby");
        w.field("replication_delay_ms", replication_delay_ms);
        if spec.sync_replication_slots {
            w.field("sync_replication_slots", true);
        }
    }
}

fn write_tables(w: &mut Writer, spec: &Spec) {
    for table in &spec.tables {
        w.entry("table");
        w.field("name", toml_string(&table.name));
        w.field("rows", table.rows);
        let identity = match table.replica_identity {
            ReplicaIdentity::Default => "default",
            ReplicaIdentity::Full => "full",
        };
        w.field("replica_identity", toml_string(identity));
    }
}

/// A table's name from its id.
fn table_name_of(spec: &Spec, table: TableId, whose: &str) -> Result<String, String> {
    match spec.tables.get(usize::from(table.0)) {
        Some(setup) => Ok(setup.name.clone()),
        None => Err(format!("{whose} names table {} but the scenario has {} tables", table.0, spec.tables.len())),
    }
}

/// A modelled connector property as the `Spec` holds it.
enum Modelled {
    /// A text the loader takes as written.
    Text(String),
    /// A text the loader trims and lower-cases.
    Lower(String),
    Int(u64),
    Bool(bool),
    /// `table.include.list`: names separated by commas.
    Tables(Vec<String>),
}

impl Modelled {
    /// Whether `text`, as the scenario gave it, means this value to the loader.
    fn means(&self, text: &str) -> bool {
        match self {
            Modelled::Text(value) => text == value,
            Modelled::Lower(value) => text.trim().to_ascii_lowercase() == *value,
            Modelled::Int(value) => text.trim().parse::<i64>().ok().and_then(|n| u64::try_from(n).ok()) == Some(*value),
            Modelled::Bool(value) => text.trim().eq_ignore_ascii_case(if *value { "true" } else { "false" }),
            Modelled::Tables(names) => text.split(',').map(str::trim).eq(names.iter().map(String::as_str)),
        }
    }

    /// The value as TOML.
    fn toml(&self) -> String {
        match self {
            Modelled::Text(value) | Modelled::Lower(value) => toml_string(value),
            Modelled::Int(value) => value.to_string(),
            Modelled::Bool(value) => value.to_string(),
            Modelled::Tables(names) => toml_string(&names.join(",")),
        }
    }
}

/// Debezium's default `max.queue.size`.
const DEFAULT_MAX_QUEUE_SIZE: u32 = 8_192;

fn write_connector(w: &mut Writer, spec: &Spec) -> Result<(), String> {
    let d = &spec.debezium;
    let tables =
        d.tables.iter().map(|table| table_name_of(spec, *table, "table.include.list")).collect::<Result<_, _>>()?;
    let mut modelled = vec![
        ("name", Modelled::Text(d.name.clone())),
        ("connector.class", Modelled::Text(CONNECTOR_CLASS.to_owned())),
        ("topic.prefix", Modelled::Text(d.topic_prefix.clone())),
        ("plugin.name", Modelled::Lower(d.plugin_name.clone())),
        ("slot.name", Modelled::Text(d.slot_name.clone())),
        ("publication.name", Modelled::Text(d.publication_name.clone())),
        ("snapshot.mode", Modelled::Lower(d.snapshot_mode.name().to_owned())),
        ("snapshot.fetch.size", Modelled::Int(u64::from(d.snapshot_fetch_size))),
        ("max.batch.size", Modelled::Int(u64::from(d.max_batch_size))),
        ("poll.interval.ms", Modelled::Int(d.poll_interval_ms)),
        ("retriable.restart.connector.wait.ms", Modelled::Int(d.retriable_restart_connector_wait_ms)),
        ("tombstones.on.delete", Modelled::Bool(d.tombstones_on_delete)),
        ("table.include.list", Modelled::Tables(tables)),
    ];
    // The default queue must stay larger than the batch.
    if d.max_batch_size >= DEFAULT_MAX_QUEUE_SIZE && !spec.connector_properties.contains_key("max.queue.size") {
        modelled.push(("max.queue.size", Modelled::Int(u64::from(d.max_batch_size.saturating_mul(4)))));
    }
    w.table("connector");
    for (key, value) in &modelled {
        match spec.connector_properties.get(*key) {
            Some(text) if value.means(text) => w.field(key, property_value(text)),
            _ => w.field(key, value.toml()),
        }
    }
    for (key, text) in &spec.connector_properties {
        if !modelled.iter().any(|(written, _)| written == key) {
            w.field(key, property_value(text));
        }
    }
    Ok(())
}

/// A connector property's text as TOML: an integer or a boolean when it is one, else a string.
fn property_value(text: &str) -> String {
    let integer = text.parse::<i64>().is_ok_and(|value| value.to_string() == text);
    if integer || text == "true" || text == "false" { text.to_owned() } else { toml_string(text) }
}

fn write_connect(w: &mut Writer, spec: &Spec) {
    w.table("connect");
    w.field("offset.flush.interval.ms", spec.connect.offset_flush_interval_ms);
    w.field("offset.flush.timeout.ms", spec.connect.offset_flush_timeout_ms);
    w.field("start_at_ms", spec.connector_start_ms);
}

fn write_kafka(w: &mut Writer, spec: &Spec) {
    w.table("kafka");
    w.field("partitions", spec.kafka_partitions);
}

fn write_sink(w: &mut Writer, spec: &Spec) {
    w.table("sink");
    w.field("apply", toml_string(spec.sink_rule.name()));
    w.field("group.id", toml_string(&spec.sink_group));
    w.field("auto.commit.interval.ms", spec.sink_auto_commit_interval_ms);
    w.field("max.poll.records", spec.sink_max_poll_records);
    w.field("auto.offset.reset", toml_string(spec.sink_auto_offset_reset.name()));
}

fn write_workload(w: &mut Writer, spec: &Spec) -> Result<(), String> {
    if let Some(background) = &spec.background {
        w.table("workload");
        w.field("start_ms", background.start_ms);
        w.field("end_ms", background.end_ms);
        w.field("inserts_per_second", float_text(background.inserts_per_second));
        w.field("updates_per_second", float_text(background.updates_per_second));
        w.field("deletes_per_second", float_text(background.deletes_per_second));
    }
    for (index, txn) in spec.scripted.iter().enumerate() {
        write_script(w, spec, "workload.script", index, txn)?;
    }
    Ok(())
}

/// One `[[workload.script]]` entry (with its `at`) or `[[check.script]]` one (without).
fn write_script(w: &mut Writer, spec: &Spec, header: &str, index: usize, txn: &ScriptedTxn) -> Result<(), String> {
    let whose = format!("{} entry {index} ({})", header.replace('.', " "), basic_string(&txn.label));
    let [op] = txn.ops.as_slice() else {
        return Err(format!("{whose} has {} operations; the format has one operation per [[{header}]]", txn.ops.len()));
    };
    w.entry(header);
    if header == "workload.script" {
        w.field("at", toml_string(&trigger_text(&txn.trigger)));
    }
    {
        let table = match *op {
            RowOp::Insert { table, key, status, amount_cents } => {
                w.field("insert", key);
                w.field("status", toml_string(status.name()));
                w.field("amount_cents", amount_cents);
                table
            }
            RowOp::Update { table, key, status } => {
                w.field("update", key);
                w.field("status", toml_string(status.name()));
                table
            }
            RowOp::Delete { table, key } => {
                w.field("delete", key);
                table
            }
        };
        if table != TableId(0) {
            w.field("table", toml_string(&table_name_of(spec, table, &whose)?));
        }
        if !txn.label.is_empty() {
            w.field("label", toml_string(&txn.label));
        }
    }
    Ok(())
}

fn write_check(w: &mut Writer, spec: &Spec) -> Result<(), String> {
    let Some(check) = &spec.check else { return Ok(()) };
    w.table("check");
    w.field("rows", check.rows);
    let name = |node: &Node| CheckBound::CRASHABLE.iter().find(|(_, n)| n == node).map(|(name, _)| *name);
    let crash: Option<Vec<&str>> = check.crash.iter().map(name).collect();
    let crash = crash.ok_or_else(|| {
        let named: Vec<&str> = check.crash.iter().map(|node| node.name()).collect();
        let crashable: Vec<&str> = CheckBound::CRASHABLE.iter().map(|(name, _)| *name).collect();
        format!(
            "[check] crash names a process a bound cannot crash: {}; it can crash {}",
            named.join(", "),
            crashable.join(", ")
        )
    })?;
    w.field("crash", toml_strings(crash));
    w.field("crashes", check.crashes);
    w.field("periodic_fires", check.periodic_fires);
    if !check.operations.is_empty() {
        w.field("operations", toml_strings(check.operations.iter().map(|operation| operation.name())));
        w.field("operate_while", toml_string(check.operate_while.name()));
    }
    if !check.unreached_ok.is_empty() {
        w.field("unreached_ok", toml_strings(check.unreached_ok.iter().map(String::as_str)));
    }
    for (index, txn) in check.scripts.iter().enumerate() {
        write_script(w, spec, "check.script", index, txn)?;
    }
    Ok(())
}

fn write_schedule(w: &mut Writer, spec: &Spec) {
    let Some(schedule) = &spec.schedule else { return };
    w.table("schedule");
    w.field("step_ms", schedule.step_ms);
    w.text.push_str("steps = [\n");
    for step in &schedule.steps {
        w.text.push_str(&format!("    {},\n", toml_string(&step.to_string())));
    }
    w.text.push_str("]\n");
}

fn write_faults(w: &mut Writer, spec: &Spec) {
    for fault in &spec.faults {
        w.entry("fault");
        w.field("at", toml_string(&trigger_text(&fault.trigger)));
        w.field("action", toml_string(FaultKind::of(&fault.action).name()));
        match fault.action {
            FaultAction::KillConnectWorker { restart_after_ms }
            | FaultAction::KillConnectorTask { restart_after_ms } => {
                if let Some(ms) = restart_after_ms {
                    w.field("restart_after_ms", ms);
                }
            }
            FaultAction::StopConnector { resume_after_ms } => {
                if let Some(ms) = resume_after_ms {
                    w.field("resume_after_ms", ms);
                }
            }
            FaultAction::CrashPostgres { restart_after_ms } => w.field("restart_after_ms", restart_after_ms),
            FaultAction::FailOverToStandby { promote_after_ms } => w.field("promote_after_ms", promote_after_ms),
            FaultAction::Clog { between: (a, b), duration_ms } => {
                w.field("between", toml_strings([a.name(), b.name()]));
                w.field("duration_ms", duration_ms);
            }
            FaultAction::WalBurst { bytes } => w.field("bytes", toml_string(&size_text(bytes))),
            FaultAction::RecreateSlot | FaultAction::RebuildConnector | FaultAction::Checkpoint => {}
        }
    }
}

fn write_fault_profile(w: &mut Writer, spec: &Spec) {
    let Some(profile) = &spec.profile else { return };
    w.table("fault_profile");
    w.field("kinds", toml_strings(profile.kinds.iter().map(|kind| kind.name())));
    w.field("max_faults", profile.max_faults);
    let (start, end) = profile.window_ms;
    w.field("window", toml_strings([duration_text(start), duration_text(end)]));
    w.field("moments", toml_strings(profile.moments.iter().map(|moment| moment.name())));
}

fn write_handoff(w: &mut Writer, spec: &Spec) {
    if let HandoffMethod::PlainRead { read_at_ms } = spec.handoff {
        w.table("handoff");
        w.field("method", toml_string("plain-read"));
        w.field("read_at_ms", read_at_ms);
    }
}

fn write_failover(w: &mut Writer, spec: &Spec) {
    let gate = match spec.gate {
        GatePolicy::Off => return,
        GatePolicy::Rebuild => "rebuild",
        GatePolicy::FailClosed => "fail-closed",
    };
    w.table("failover");
    w.field("gate", toml_string(gate));
}

fn write_acceptance(w: &mut Writer, spec: &Spec) {
    w.table("acceptance");
    w.field("timeout_ms", spec.acceptance.timeout_ms);
    w.field("sample_size", spec.acceptance.sample_size);
    w.field("horizon_ms", spec.acceptance.horizon_ms);
}

fn write_prediction(w: &mut Writer, spec: &Spec) {
    let prediction = &spec.prediction;
    w.table("prediction");
    w.field("verdict", toml_string(prediction.verdict.name()));
    w.field("findings", toml_strings(prediction.findings.iter().map(Invariant::to_string)));
    if !prediction.allow.is_empty() || prediction.may_fail_closed {
        let fails_closed = prediction.may_fail_closed.then(|| "fails-closed".to_string());
        w.field("allow", toml_strings(prediction.allow.iter().map(Invariant::to_string).chain(fails_closed)));
    }
    w.field("why", toml_string(&prediction.why));
}

/// Reads the written text back: it must load, to the same `Spec` (but for the connector
/// properties, which gain the modelled ones) and seed.
fn check_read_back(text: &str, spec: &Spec, seed: u64) -> Result<(), String> {
    let loaded = load_str("(written)", text, &[])
        .map_err(|error| format!("the scenario written for `{}` does not load: {error}", spec.name))?;
    if loaded.seed != seed {
        return Err(format!(
            "the scenario written for `{}` reads back with seed {}, not {seed}",
            spec.name, loaded.seed
        ));
    }
    let mut read = loaded.spec;
    read.connector_properties.clone_from(&spec.connector_properties);
    // The written file's prediction is its own, whatever the run's came from.
    read.prediction.origin.clone_from(&spec.prediction.origin);
    if read != *spec {
        let (written, read) = (format!("{spec:#?}"), format!("{read:#?}"));
        let difference = written.lines().zip(read.lines()).find(|(a, b)| a != b);
        let (a, b) = difference.map_or(("", ""), |(a, b)| (a.trim(), b.trim()));
        return Err(format!("the scenario written for `{}` reads back differently: `{a}` as `{b}`", spec.name));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Values as TOML.

/// `30s`, `2500ms`, `snapshot-scan-started + 200ms`, `change-acked#3 + 1500ms`.
fn trigger_text(trigger: &Trigger) -> String {
    match *trigger {
        Trigger::At { at_ms } => duration_text(at_ms),
        Trigger::After { moment, occurrence, plus_ms } => {
            let mut text = moment.name().to_owned();
            if occurrence != 1 {
                text.push_str(&format!("#{occurrence}"));
            }
            if plus_ms > 0 {
                text.push_str(&format!(" + {}", duration_text(plus_ms)));
            }
            text
        }
    }
}

/// `5min`, `90s`, `1500ms`; `0s`.
fn duration_text(ms: u64) -> String {
    units::duration_text(ms)
}

/// `16MB`, `64GB`, `1536B` (terabytes are not written: no size of the format reaches them).
fn size_text(bytes: u64) -> String {
    units::size_text(bytes)
}

/// A float that reads back as the same value: Rust's shortest form (`1.0`, `2.5`, `1e-7`).
fn float_text(value: f64) -> String {
    format!("{value:?}")
}

/// A key: bare when it can be, else a quoted string (`"snapshot.mode"`).
fn toml_key(key: &str) -> String {
    if !key.is_empty() && key.chars().all(is_bare) { key.to_owned() } else { basic_string(key) }
}

/// A string: a multi-line basic string if it has a line break, else a basic string.
fn toml_string(text: &str) -> String {
    if text.contains('\n') { multi_line_string(text) } else { basic_string(text) }
}

/// `["a", "b"]`.
fn toml_strings<S: AsRef<str>>(texts: impl IntoIterator<Item = S>) -> String {
    let texts: Vec<String> = texts.into_iter().map(|text| toml_string(text.as_ref())).collect();
    format!("[{}]", texts.join(", "))
}

fn basic_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => push_escaped(&mut out, c),
        }
    }
    out.push('"');
    out
}

/// `"""` and a line break (which TOML drops), then the text with its line breaks. A quote is
/// escaped when another quote or the end follows it, so no `"""` ends the string early.
fn multi_line_string(text: &str) -> String {
    let mut out = String::from("\"\"\"\n");
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if matches!(chars.peek(), Some('"') | None) => out.push_str("\\\""),
            '"' | '\n' => out.push(c),
            c => push_escaped(&mut out, c),
        }
    }
    out.push_str("\"\"\"");
    out
}

/// A character of a basic string: backslashes and control characters (but tabs) escaped.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push('\t'),
        c if c.is_control() && u32::from(c) < 0x80 => out.push_str(&format!("\\u{:04X}", u32::from(c))),
        c => out.push(c),
    }
}

/// The `--set` that lets a profile draw every fault kind the scenario's system can take
/// (`explore --all-faults`): all of them, less `fail-over-to-standby` without a standby.
pub fn every_fault_kind(spec: &Spec) -> String {
    every_fault_kind_with(spec.standby.is_some())
}

/// As [`every_fault_kind`], for a system with or without a standby.
pub fn every_fault_kind_with(standby: bool) -> String {
    use handoff_models::scenario::spec::FaultKind;
    let kinds: Vec<String> = FaultKind::ALL
        .iter()
        .filter(|kind| handoff_models::scenario::faults::applies(**kind, standby))
        .map(|kind| format!("\"{}\"", kind.name()))
        .collect();
    format!("fault_profile.kinds=[{}]", kinds.join(", "))
}
