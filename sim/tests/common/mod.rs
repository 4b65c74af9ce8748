//! Helpers shared by the integration tests.
#![allow(dead_code)]

use handoff_models::scenario::spec::{Invariant, Spec};
use handoff_sim::exhaustive::check::{CheckPlan, Strategy};
use handoff_sim::scenario;
use handoff_sim::timed::runner::{self, RunResult};
use std::path::PathBuf;

/// How the tests explore a bound to its end: breadth first (so a counterexample found is the
/// shortest), two threads, at most 12,000,000 states.
pub const WHOLE_BOUND: CheckPlan = CheckPlan {
    strategy: Strategy::Bfs,
    max_depth: None,
    threads: 2,
    timeout: None,
    max_states: 12_000_000,
    max_memory_bytes: None,
};

/// The folders of bundled scenarios: the scenarios, the bug zoo and the seed database. Each file in
/// them is a scenario a user runs as it is, so each is held to "same seed, same trace".
pub const BUNDLED_FOLDERS: [&str; 3] = ["scenarios", "scenarios/zoo", "scenarios/regressions"];

/// Every bundled scenario, read from the folders (not listed by hand, so a new file is covered the
/// day it is added): its name (the path under `scenarios/`, without `.toml`) and its path, in
/// name order.
pub fn bundled() -> Vec<(String, PathBuf)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for folder in BUNDLED_FOLDERS {
        let dir = root.join(folder);
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut in_folder: Vec<(String, PathBuf)> = entries
            .map(|entry| entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display())).path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
            .map(|path| {
                let stem = path.file_stem().expect("a file name").to_string_lossy().to_string();
                let name = match folder.strip_prefix("scenarios/") {
                    Some(sub) => format!("{sub}/{stem}"),
                    None => stem,
                };
                (name, path)
            })
            .collect();
        assert!(!in_folder.is_empty(), "{folder}/ holds no scenario");
        in_folder.sort();
        found.extend(in_folder);
    }
    found
}

/// Loads a scenario file with its own seed.
pub fn load_path(path: &std::path::Path) -> (Spec, u64) {
    let loaded = scenario::load(path, &[]).unwrap_or_else(|e| panic!("{e}"));
    (loaded.spec, loaded.seed)
}

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
