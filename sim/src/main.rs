//! `handoff`: run CDC snapshot-handoff scenarios in a deterministic simulation.

use clap::{Parser, Subcommand};
use handoff_sim::scenario;
#[cfg(madsim)]
use handoff_sim::{report, runner};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "handoff",
    version,
    about = "Prove or refute that a CDC snapshot and its change stream form one history"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario once, under madsim, and check it.
    Run {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// The run's seed (default: the scenario's `seed`).
        #[arg(long)]
        seed: Option<u64>,
        /// Override a scenario field, e.g. `--set sink.apply=naive-upsert` or
        /// `--set connector."snapshot.mode"=when_needed`. Repeatable.
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        /// Print one JSON object instead of the text report.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run { scenario: path, seed, sets, json } => {
            let loaded = match scenario::load(&path, &sets) {
                Ok(loaded) => loaded,
                Err(error) => {
                    eprintln!("error: {error}");
                    return ExitCode::from(2);
                }
            };
            let seed = seed.unwrap_or(loaded.seed);
            run(&loaded.spec, &path.display().to_string(), seed, json)
        }
    }
}

#[cfg(madsim)]
fn run(spec: &handoff_models::spec::Spec, name: &str, seed: u64, json: bool) -> ExitCode {
    let result = runner::run(spec, seed);
    if json {
        println!("{}", report::json(spec, name, &result));
    } else {
        print!("{}", report::text(spec, name, &result));
    }
    if result.prediction_held { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

#[cfg(not(madsim))]
fn run(_spec: &handoff_models::spec::Spec, _name: &str, _seed: u64, _json: bool) -> ExitCode {
    eprintln!(
        "error: this build has no simulation: it was compiled without `--cfg madsim` (a RUSTFLAGS \
         environment variable replaces the workspace's .cargo/config.toml); rebuild without RUSTFLAGS \
         or with RUSTFLAGS=\"--cfg madsim\""
    );
    ExitCode::from(2)
}
