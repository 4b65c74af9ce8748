//! Reading the tree: typed access that carries the location, and the wording of errors.

use super::ScenarioError;
use super::toml_text::{duration_text, toml_key};
use super::tree::{At, Entry, Item, Val};
use super::units::parse_trigger;
use handoff_models::core::limits;
use handoff_models::scenario::spec::Trigger;
use std::fmt::Display;

pub(super) type Res<T> = Result<T, ScenarioError>;

pub(super) struct Cx<'a> {
    pub(super) file: &'a str,
    pub(super) text: &'a str,
    pub(super) sets: &'a [String],
    /// The files sections read with `from`, in the order read.
    pub(super) included: &'a [super::include::Included],
}

/// A value to read, its path as written in TOML, and where errors about it go.
pub(super) struct Field<'t> {
    pub(super) path: String,
    pub(super) item: &'t Item,
    pub(super) at: At,
}

/// A table to read.
pub(super) struct Section<'t> {
    pub(super) path: String,
    pub(super) entries: &'t [Entry],
    pub(super) at: At,
}

impl Cx<'_> {
    pub(super) fn err(&self, at: At, field: &str, problem: impl Display) -> ScenarioError {
        let message = match at {
            At::File(offset) => {
                let (line, column) = line_col(self.text, offset);
                format!("{}:{line}:{column}: {field}: {problem}", self.file)
            }
            At::Set(index) => {
                format!("--set {}: {field}: {problem}", self.sets.get(index).map_or("", String::as_str))
            }
            At::Included(index, offset) => match self.included.get(index) {
                Some(included) => {
                    let (line, column) = line_col(&included.text, offset);
                    format!("{}:{line}:{column}: {field}: {problem}", included.name)
                }
                None => format!("{}: {field}: {problem}", self.file),
            },
        };
        ScenarioError { message }
    }

    pub(super) fn fail<T>(&self, field: &Field, problem: impl Display) -> Res<T> {
        Err(self.err(field.at, &field.path, problem))
    }

    pub(super) fn wrong<T>(&self, field: &Field, expected: &str) -> Res<T> {
        self.fail(field, format!("expected {expected}, found {}", field.item.val.kind()))
    }

    pub(super) fn string<'t>(&self, field: &Field<'t>) -> Res<&'t str> {
        match &field.item.val {
            Val::Str(text) => Ok(text),
            _ => self.wrong(field, "a string"),
        }
    }

    pub(super) fn boolean(&self, field: &Field) -> Res<bool> {
        match field.item.val {
            Val::Bool(flag) => Ok(flag),
            _ => self.wrong(field, "a boolean"),
        }
    }

    pub(super) fn owned(&self, field: &Field) -> Res<String> {
        self.string(field).map(str::to_owned)
    }

    pub(super) fn int(&self, field: &Field, low: i64, high: i64) -> Res<i64> {
        match field.item.val {
            Val::Int(Some(value)) if (low..=high).contains(&value) => Ok(value),
            Val::Int(value) => self.fail(field, out_of_range(value, low, high)),
            _ => self.wrong(field, "an integer"),
        }
    }

    pub(super) fn u64(&self, field: &Field) -> Res<u64> {
        self.int(field, 0, i64::MAX).map(|value| value as u64)
    }

    pub(super) fn u32(&self, field: &Field, low: u32) -> Res<u32> {
        self.int(field, i64::from(low), i64::from(u32::MAX)).map(|value| value as u32)
    }

    /// A time of the run in milliseconds, from `low` to the run's horizon.
    pub(super) fn time_ms(&self, field: &Field, low: u64, horizon: &Horizon) -> Res<u64> {
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
    pub(super) fn setting_ms(&self, field: &Field, low: u64) -> Res<u64> {
        let high = limits::MAX_SETTING_MS as i64;
        match field.item.val {
            Val::Int(Some(value)) if (low as i64..=high).contains(&value) => Ok(value as u64),
            Val::Int(value) => self.fail(field, setting_out_of_range(value, low)),
            _ => self.wrong(field, "an integer"),
        }
    }

    /// A rate per second: a finite number from 0 to [`MAX_RATE`] (integers are accepted).
    pub(super) fn rate(&self, field: &Field) -> Res<f64> {
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

    pub(super) fn section<'t>(&self, field: &Field<'t>) -> Res<Section<'t>> {
        match &field.item.val {
            Val::Table(entries) => Ok(Section { path: field.path.clone(), entries, at: field.item.at }),
            _ => self.wrong(field, "a table"),
        }
    }

    /// The elements of an array, each a field `path[i]`.
    pub(super) fn items<'t>(&self, field: &Field<'t>, expected: &str) -> Res<Vec<Field<'t>>> {
        let Val::Array(items) = &field.item.val else { return self.wrong(field, expected) };
        let elements = items.iter().enumerate();
        Ok(elements.map(|(i, item)| Field { path: format!("{}[{i}]", field.path), item, at: item.at }).collect())
    }

    /// One of a fixed set of strings.
    pub(super) fn choice<T: Copy>(&self, field: &Field, options: &[(&str, T)]) -> Res<T> {
        let text = self.string(field)?;
        match options.iter().find(|(name, _)| *name == text) {
            Some((_, value)) => Ok(*value),
            None => self.fail(field, unknown_value(text, options.iter().map(|(name, _)| *name))),
        }
    }

    /// A trigger whose time, or delay after its moment, is within the run's horizon.
    pub(super) fn trigger(&self, field: &Field, horizon: &Horizon) -> Res<Trigger> {
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
pub(super) struct Horizon {
    pub(super) ms: u64,
    /// Whether the scenario gives it (`[acceptance] horizon_ms`).
    pub(super) given: bool,
}

impl Horizon {
    /// What the bound is and where it comes from, for messages.
    pub(super) fn describe(&self) -> String {
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

pub(super) fn setting_out_of_range(value: Option<i64>, low: u64) -> String {
    format!(
        "{} ({}, the longest horizon: a longer timer never fires)",
        out_of_range(value, low as i64, limits::MAX_SETTING_MS as i64),
        duration_text(limits::MAX_SETTING_MS)
    )
}

impl<'t> Section<'t> {
    pub(super) fn field_path(&self, key: &str) -> String {
        join(&self.path, key)
    }

    pub(super) fn field(&self, entry: &'t Entry) -> Field<'t> {
        Field { path: self.field_path(&entry.key), item: &entry.item, at: entry.at() }
    }

    pub(super) fn get(&self, key: &str) -> Option<Field<'t>> {
        self.entries.iter().find(|entry| entry.key == key).map(|entry| self.field(entry))
    }

    /// A required field.
    pub(super) fn need(&self, cx: &Cx, key: &str, hint: &str) -> Res<Field<'t>> {
        self.get(key).ok_or_else(|| cx.err(self.at, &self.field_path(key), format!("required field is missing{hint}")))
    }

    pub(super) fn req<T>(&self, cx: &Cx, key: &str, read: impl FnOnce(&Field<'t>) -> Res<T>) -> Res<T> {
        read(&self.need(cx, key, "")?)
    }

    pub(super) fn opt<T>(&self, key: &str, default: T, read: impl FnOnce(&Field<'t>) -> Res<T>) -> Res<T> {
        self.get(key).map_or(Ok(default), |field| read(&field))
    }

    /// A sub-table; a missing one reads as empty.
    pub(super) fn sub(&self, cx: &Cx, key: &str) -> Res<Section<'t>> {
        match self.get(key) {
            Some(field) => cx.section(&field),
            None => Ok(Section { path: self.field_path(key), entries: &[], at: self.at }),
        }
    }

    /// Every key must be one of `known` (names separated by spaces); `what`: "field" or
    /// "connector property".
    pub(super) fn check_keys(&self, cx: &Cx, known: &str, what: &str) -> Res<()> {
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
pub(super) fn join(prefix: &str, key: &str) -> String {
    let key = toml_key(key);
    if prefix.is_empty() { key } else { format!("{prefix}.{key}") }
}

/// 1-based line and column (in characters) of a byte offset.
pub(super) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let column = before.rsplit('\n').next().map_or(0, |line| line.chars().count()) + 1;
    (before.matches('\n').count() + 1, column)
}

/// `5000000 is out of range; expected 0 to 3600000`: both ends, always.
pub(super) fn out_of_range(value: Option<i64>, low: i64, high: i64) -> String {
    let value = value.map_or_else(|| "the value".to_owned(), |value| value.to_string());
    format!("{value} is out of range; expected {low} to {high}")
}

pub(super) fn unknown_value<'a>(text: &str, names: impl Iterator<Item = &'a str>) -> String {
    format!("unknown value `{text}`; expected one of {}", names.collect::<Vec<_>>().join(", "))
}

/// The candidate closest to `word`, if the edit distance is small.
pub fn closest<'k>(word: &str, candidates: &[&'k str]) -> Option<&'k str> {
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
