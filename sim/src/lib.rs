//! # handoff-sim
//!
//! The timed lens of `handoff`: scenario files, the madsim simulation that runs the models of
//! `handoff-models` as nodes with real timeouts and seeded faults, and the reports.
//!
//! Its parts, one folder each:
//!
//! - [`scenario`]: scenario files: reading (with `--set` overrides and variants), validating and
//!   writing them;
//! - `timed`: one run of a scenario under madsim (the runner and its harness, the nodes, the
//!   simulated network) and what `handoff run` prints;
//! - `sweep`: seed sweeps (`handoff sweep`, in worker processes), merging shards, shrinking a
//!   failing seed and saving it as a regression;
//! - [`exhaustive`]: `handoff check`, the exhaustive lens on a scenario's `[check]` bound (the
//!   depth-first explorer, the search for the shortest counterexample, the command's budget);
//! - [`conform`]: `handoff conform`, the model against a real PostgreSQL server;
//! - [`verdict`]: how each lens words its verdict against the prediction;
//! - [`drills`]: the lessons `handoff drills` lists and `handoff drill NAME` runs.
//!
//! The simulation needs madsim's simulated runtime, which exists only when the crate is built
//! with `--cfg madsim` (set for the workspace in `.cargo/config.toml`). Without it, only the
//! scenario loader is built, and the `handoff` binary says what is missing.

pub mod conform;
pub mod drills;
pub mod exhaustive;
pub mod scenario;
#[cfg(madsim)]
pub mod sweep;
#[cfg(madsim)]
pub mod timed;
pub mod verdict;

/// How to start this binary again, for the commands it prints (a replay, a shrunk scenario, a
/// sweep's failing seeds): `cargo run --release --` when Cargo started it (`cargo run` and
/// `cargo test` set `CARGO` for the process), so that the README's `cargo run --release -- run …`
/// is followed by hints that work as they are; else the path it was started by when that is a
/// path (`target/release/handoff`), else `handoff` (found on the `PATH`).
pub fn program() -> &'static str {
    static PROGRAM: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PROGRAM.get_or_init(|| {
        if std::env::var_os("CARGO").is_some() {
            return "cargo run --release --".to_owned();
        }
        match std::env::args_os().next().and_then(|arg| arg.into_string().ok()) {
            Some(path) if path.contains('/') && !path.contains(char::is_whitespace) => path,
            _ => "handoff".to_owned(),
        }
    })
}

/// The version of the JSON every command prints (docs/json.md): each top-level object (and each
/// line of `sweep --json`) carries it as `schema_version`. It changes when a field is removed or
/// changes its meaning; a new field does not change it.
pub const JSON_SCHEMA_VERSION: u32 = 1;

/// `value` as one JSON object with `schema_version` first and its own fields after, in their
/// order, for the commands whose report is a struct of its own (`check`, `conform`).
pub fn versioned_json<T: serde::Serialize>(value: &T) -> String {
    let body = serde_json::to_string(value).unwrap_or_else(|error| {
        serde_json::json!({ "error": format!("the report does not serialise: {error}") }).to_string()
    });
    match body.strip_prefix('{') {
        Some("}") => format!("{{\"schema_version\":{JSON_SCHEMA_VERSION}}}"),
        Some(fields) => format!("{{\"schema_version\":{JSON_SCHEMA_VERSION},{fields}"),
        None => format!("{{\"schema_version\":{JSON_SCHEMA_VERSION},\"report\":{body}}}"),
    }
}
