//! Scenario files: TOML in, a validated [`handoff_models::scenario::spec::Spec`] out, or an error that
//! names the file, the line and the field. The format is documented in
//! `docs/scenario-format.md`.
//!
//! How it works: the file is parsed into a spanned tree ([`toml::de::DeTable`]), copied into a
//! small tree of our own whose every value remembers where it came from ([`tree::At`]: a byte offset
//! of the file, or the `--set` argument that wrote it). The `--set` overrides are applied to
//! that tree, and then one function per section reads it into the [`Spec`]. An error about a
//! value is reported where the value came from: `FILE:LINE:COL: FIELD: PROBLEM`, or
//! `--set ARG: FIELD: PROBLEM`.
//!
//! Every value is held to what a run can honour ([`handoff_models::core::limits`], the "Limits" of the
//! format): times within the run's horizon, settings within a day, rows, transactions and
//! heartbeats within what a run holds in memory. A value out of range is reported with both
//! ends of its range.

mod bound;
mod catalogue;
mod connector;
mod faults;
mod fields;
mod include;
mod load;
mod overrides;
mod prediction;
mod sections;
mod signals;
mod toml_text;
mod tree;
mod units;
mod variants;
mod workload;
mod write;

pub use faults::{every_fault_kind, every_fault_kind_with};
pub use fields::closest;
pub use load::{load, load_str, load_str_with, load_with, read_text};
pub use write::to_toml;

use handoff_models::scenario::spec::Spec;

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
