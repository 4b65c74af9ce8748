//! Helpers shared by the integration tests.
#![allow(dead_code)]

use handoff_models::scenario::spec::{Invariant, Spec};
use handoff_sim::scenario;
use handoff_sim::timed::runner::{self, RunResult};
use std::path::PathBuf;

/// The bundled scenarios, by file stem.
pub const SCENARIOS: [&str; 4] = [
    "claims-restart-during-snapshot",
    "claims-wall-clock-start",
    "claims-failover",
    "claims-failover-right-after-snapshot",
];

pub fn scenario_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("scenarios").join(format!("{name}.toml"))
}

/// Loads a bundled scenario with overrides.
pub fn load(name: &str, sets: &[&str]) -> (Spec, u64) {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let loaded = scenario::load(&scenario_path(name), &sets).unwrap_or_else(|e| panic!("{e}"));
    (loaded.spec, loaded.seed)
}

/// Loads a scenario from text.
pub fn load_text(text: &str) -> Spec {
    scenario::load_str("inline.toml", text, &[]).unwrap_or_else(|e| panic!("{e}")).spec
}

pub fn run(spec: &Spec, seed: u64) -> RunResult {
    runner::run(spec, seed)
}

/// The invariants a run violated.
pub fn violated(result: &RunResult) -> Vec<Invariant> {
    result.violated()
}

/// A scenario file for the claims table: `rows` claims (`REPLICA IDENTITY FULL`), a pgoutput
/// connector with `topic.prefix = "claims"` and the `connector` lines given, then `rest`.
pub fn claims(name: &str, rows: u32, connector: &str, rest: &str) -> String {
    format!(
        "name = \"{name}\"\n[[table]]\nname = \"public.claims\"\nrows = {rows}\nreplica_identity = \"full\"\n\
         [connector]\n\"topic.prefix\" = \"claims\"\n\"plugin.name\" = \"pgoutput\"\n{connector}\n{rest}"
    )
}
