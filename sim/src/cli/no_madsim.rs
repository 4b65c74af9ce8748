//! The same commands in a build without madsim: each says what is missing and exits 2.

use crate::Plan;
use handoff_models::scenario::spec::Spec;
use std::path::PathBuf;
use std::process::ExitCode;

fn no_simulation() -> ExitCode {
    eprintln!(
        "error: this build has no simulation: it was compiled without `--cfg madsim` (a RUSTFLAGS \
         environment variable replaces the workspace's .cargo/config.toml); rebuild without RUSTFLAGS \
         or with RUSTFLAGS=\"--cfg madsim\""
    );
    ExitCode::from(2)
}

pub fn run(_spec: &Spec, _name: &str, _seed: u64, _json: bool, _timeline: &crate::TimelineFlags) -> ExitCode {
    no_simulation()
}

pub fn sweep(_spec: &Spec, _path: &std::path::Path, _sets: &[String], _plan: Plan) -> ExitCode {
    no_simulation()
}

pub fn sweep_worker(_spec: &Spec, _name: &str, _save: Option<&std::path::Path>) -> ExitCode {
    no_simulation()
}

pub fn merge(_inputs: Vec<(String, std::io::BufReader<std::fs::File>)>, _json: bool) -> ExitCode {
    no_simulation()
}

pub fn shrink(
    _spec: &Spec,
    _seed: u64,
    _invariant: Option<handoff_models::scenario::spec::Invariant>,
    _out: Option<PathBuf>,
    _max_runs: usize,
) -> ExitCode {
    no_simulation()
}

pub fn drill(
    _lesson: &handoff_sim::drills::Lesson,
    _dir: &std::path::Path,
    _predict: Option<String>,
    _seed: Option<u64>,
    _json: bool,
) -> ExitCode {
    no_simulation()
}
