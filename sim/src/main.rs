//! `handoff`: run CDC snapshot-handoff scenarios in a deterministic simulation.

use clap::{Parser, Subcommand};
use handoff_sim::exhaustive::{budget, check};
use handoff_sim::scenario;
use std::path::PathBuf;
use std::process::ExitCode;

/// Writes text to standard output, or returns from the function with the exit code to end on. A
/// closed pipe (`handoff sweep --json | head -1`) is the end of the output: the command stops
/// quietly with exit 0. Any other failure to write is an error (exit 2).
macro_rules! out {
    ($text:expr) => {
        if let Err(code) = crate::print_out(&$text) {
            return code;
        }
    };
}

mod cli;
use cli::commands;

/// mimalloc: the exhaustive lens allocates and frees component copies at every step, and the
/// system allocator took about 40 % of its instructions (docs/performance.md). The
/// `system-allocator` feature leaves it out, for valgrind (docs/memory-safety.md).
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "handoff",
    version,
    about = "Prove or refute that a CDC snapshot and its change stream form one history",
    after_help = "Exit status: 0 when what a command checks is as predicted; 1 when it is not; 2 for bad \
        input; `check` also 3 when its bound was not explored completely. Each command's --help says \
        what it checks. JSON output: docs/json.md."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario once, under madsim, and check it.
    #[command(after_help = "Exit status: 0 when the prediction (the scenario's, its variant's or --expect's) \
        held; 1 when it did not, or a pinned schedule departed from its path; 2 for bad input (the \
        scenario file, a --set, a flag).")]
    Run {
        /// The scenario file (TOML; docs/scenario-format.md).
        scenario: PathBuf,
        /// The run's seed (default: the scenario's `seed`).
        #[arg(long)]
        seed: Option<u64>,
        /// Override a scenario field, e.g. `--set sink.apply=naive-upsert` or
        /// `--set connector."snapshot.mode"=when_needed`. Repeatable.
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        #[command(flatten)]
        expectation: Expectation,
        /// Print one JSON object instead of the text report.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        timeline: TimelineFlags,
    },
    /// List the lessons: the claims runbook, the game-day drills and the bug zoo, each with its
    /// question.
    #[command(after_help = "Exit status: 0.")]
    Drills,
    /// Run a lesson: commit to a prediction first (asked on a terminal, or --predict), then see
    /// where it was right and wrong, from the model's findings and the scenario's reasoning.
    /// Exit 0 when the prediction matches what the model did, 1 when not, 2 on bad input.
    #[command(after_help = "Exit status: 0 when your prediction matches what the model did; 1 when it does \
        not; 2 for bad input (an unknown lesson, a malformed --predict, no terminal and no --predict) \
        or a lesson that is not modelled yet.")]
    Drill {
        /// The lesson's name, as `handoff drills` lists it (`restart-test`, `outbox`, `naive-sink`, …).
        name: String,
        /// Your prediction: `holds`, `fails-closed`, or the invariants you expect violated, like
        /// `I2,I4` (a `?` marks one that may be: `I2,I3?`). Without it, a terminal asks.
        #[arg(long, value_name = "PREDICTION")]
        predict: Option<String>,
        /// The run's seed (default: the scenario's `seed`).
        #[arg(long)]
        seed: Option<u64>,
        /// Print one JSON object instead of the explanation.
        #[arg(long)]
        json: bool,
    },
    /// Replay a saved scenario (a regression from `scenarios/regressions/`) at its own seed.
    #[command(after_help = "Exit status: as `run`: 0 when the file's prediction held; 1 when it did not, or \
        its pinned schedule departed from its path; 2 for bad input.")]
    Replay {
        /// The scenario file.
        file: PathBuf,
        /// Print one JSON object instead of the text report (as `run --json`).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        timeline: TimelineFlags,
    },
    /// Run many seeds of a scenario in parallel worker processes, and summarise findings, coverage
    /// and the seeds whose run crashed.
    #[command(
        alias = "explore",
        after_help = "Exit status: 0 when every run is as the prediction says; 1 when some run has a finding \
            the prediction does not cover or failed closed where it says the design holds, a predicted \
            invariant was violated by no run, a run was cut by a limit before its boundary, a seed \
            crashed or timed out, or (--check-determinism) a seed gave two traces; 2 for bad input.\n\n\
            `handoff explore` is the former name of this command and still works: it is the same \
            command, with the same flags and output."
    )]
    Sweep {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// How many seeds (at least 1; computed as the sweep goes, never listed).
        #[arg(long, default_value_t = 1000)]
        seeds: u64,
        /// The first seed (the range may end at 18446744073709551615, not past it).
        #[arg(long, default_value_t = 0)]
        start: u64,
        /// Worker processes, each running one seed at a time (default: the machine's cores; at
        /// most 4 per core).
        #[arg(long)]
        jobs: Option<usize>,
        /// Take shard K of N of the seed range (every N-th seed, from the K-th).
        #[arg(long, value_name = "K/N")]
        shard: Option<String>,
        /// Override a scenario field, as `run --set`. Repeatable.
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        #[command(flatten)]
        expectation: Expectation,
        /// One JSON line per run (or crashed seed), in seed order, then a summary line.
        #[arg(long)]
        json: bool,
        /// Save the first failing seed of each violated invariant as a scenario file here.
        #[arg(long, value_name = "DIR")]
        save: Option<PathBuf>,
        /// Run each seed twice and stop at the first whose trace hashes differ.
        #[arg(long)]
        check_determinism: bool,
        /// Kill a run's worker process after this many seconds without an answer and report the
        /// seed as timed out (a last defence against a run that never ends).
        #[arg(long, value_name = "SECONDS", default_value_t = 600)]
        run_timeout: u64,
        /// Let every seed draw from every fault kind the scenario's system can take (the
        /// standing no-false-alarm sweep): the same as a `--set fault_profile.kinds=[...]`
        /// listing them, which the summary's replay commands then carry.
        #[arg(long)]
        all_faults: bool,
    },
    /// A worker process of `sweep` (internal): loads the scenario, then runs each seed it reads
    /// on standard input and writes the run as a JSON line on standard output.
    #[command(hide = true, name = "sweep-worker")]
    SweepWorker {
        scenario: PathBuf,
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        #[command(flatten)]
        expectation: Expectation,
        #[arg(long, value_name = "DIR")]
        save: Option<PathBuf>,
    },
    /// Shrink a failing seed to a smaller scenario with the same finding, and write it.
    #[command(after_help = "Exit status: 0 when the shrunk scenario was written; 2 for bad input, a seed \
        without the finding, or a file that cannot be written.")]
    Shrink {
        /// The scenario file (TOML).
        scenario: PathBuf,
        /// The failing seed.
        #[arg(long)]
        seed: u64,
        /// Override a scenario field, as `run --set`. Repeatable.
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        #[command(flatten)]
        expectation: Expectation,
        /// Where to write the shrunk scenario (default:
        /// scenarios/regressions/NAME-seed-N-INVARIANT-shrunk.toml).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Keep a finding of this invariant (default: the run's first, in invariant order).
        #[arg(long, value_name = "I1..I12")]
        invariant: Option<String>,
        /// At most this many runs.
        #[arg(long, default_value_t = 2000)]
        max_runs: usize,
    },
    /// Explore a scenario's [check] bound exhaustively (stateright) and report every property.
    #[command(after_help = "Exit status: 0 when the whole bound was explored and every property is as \
        predicted; 1 when some property is not (or, in a bound cut short, a counterexample the \
        prediction does not name was found); 2 for bad input; 3 when the bound was NOT explored \
        completely (a limit was reached, or --strategy random) and nothing found so far contradicts \
        the prediction.")]
    Check {
        /// The scenario file (TOML) with its [check] bound.
        scenario: PathBuf,
        /// `dfs` (the default) keeps only its path and the states' fingerprints and is the faster;
        /// `bfs` keeps every pending state and reports the bound's diameter as its max depth.
        #[arg(long, value_enum, default_value_t = StrategyArg::Dfs)]
        strategy: StrategyArg,
        /// Explore no deeper than this many steps (the report then says the bound was not
        /// explored completely).
        #[arg(long, value_name = "D")]
        max_depth: Option<usize>,
        /// Threads (default: the machine's cores; at most 4 per core).
        #[arg(long, value_name = "T")]
        threads: Option<usize>,
        /// For `--strategy random`: the walks' seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Stop the whole command — the exploration and the searches for the shortest
        /// counterexamples — after this many seconds; it returns within a second of it
        /// (`--strategy random` stops after 10 s unless told).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<u64>,
        /// Stop after generating this many states, the exploration's and the searches' together.
        #[arg(long, value_name = "N", default_value_t = 4_000_000)]
        max_states: usize,
        /// The most memory the command may hold (`512MB`, `8GB`: B, kB, MB, GB, TB; or bytes).
        /// It stops at 90 % of it, and says so. Default: half of the machine's memory, or of its
        /// cgroup's limit if that is lower.
        #[arg(long, value_name = "SIZE")]
        max_memory: Option<String>,
        /// Override a scenario field, as `run --set`. Repeatable.
        #[arg(long = "set", value_name = "PATH=VALUE")]
        sets: Vec<String>,
        #[command(flatten)]
        expectation: Expectation,
        /// Print one JSON object instead of the text report.
        #[arg(long)]
        json: bool,
        /// Serve stateright's web Explorer on this loopback address (e.g. 127.0.0.1:3000) instead
        /// of checking: step through the bound's states by hand in a browser.
        #[arg(long, value_name = "ADDR")]
        serve: Option<String>,
        /// Write each counterexample into this directory as a scenario that `handoff run`
        /// replays (`<scenario>-<invariant>-counterexample.toml`).
        #[arg(long, value_name = "DIR")]
        export: Option<PathBuf>,
    },
    /// Run a workload of PostgreSQL server steps (slots, WAL, checkpoints) on the model and,
    /// with --against, on a real PostgreSQL 15 server too; report every step where they differ.
    #[command(after_help = "Exit status: 0 when the model (and the server, with --against) did what the \
        workload expects at every step; 1 when some step disagrees; 2 for bad input or a server that \
        cannot be used.")]
    Conform {
        /// The workload file (TOML; see docs/conform-format.md).
        workload: PathBuf,
        /// The server to compare with: postgres://user[:password]@host[:port]/dbname, or a unix
        /// socket directory as host (`postgres://user@%2Ftmp:5432/postgres`). Use a throwaway
        /// server: the run creates databases, a table and a publication, and sets
        /// max_wal_size, max_slot_wal_keep_size, wal_keep_size and checkpoint_timeout (reset at
        /// the end).
        #[arg(long, value_name = "URL")]
        against: Option<String>,
        /// The server's data directory, for workloads with `restart` steps (restarted with
        /// pg_ctl, run as the directory's owner).
        #[arg(long, value_name = "DIR", requires = "against")]
        pgdata: Option<PathBuf>,
        /// Print one JSON object instead of the text report.
        #[arg(long)]
        json: bool,
    },
    /// Combine the `--json` outputs of the shards of one sweep (`handoff sweep --shard`) into one summary.
    #[command(after_help = "Exit status: as `sweep`: 0 when every run of every shard is as the prediction \
        says; 1 when not; 2 for bad input (a missing or partial shard, shards of different sweeps).")]
    Merge {
        /// The files written by `handoff sweep --json --shard K/N`: one per shard, each whole,
        /// all of the same scenario, `--set`s, `--start`, `--seeds` and N.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print the merged summary as one JSON line (as `sweep --json`'s last line).
        #[arg(long)]
        json: bool,
    },
}

/// `--variant` and `--expect`: which prediction a changed design is judged against.
#[derive(clap::Args, Clone, Debug, Default)]
struct Expectation {
    /// Run the scenario's variant NAME (`[variants.NAME]`: its settings, judged against its own
    /// prediction).
    #[arg(long, value_name = "NAME")]
    variant: Option<String>,
    /// Judge against this prediction instead of the scenario's: `holds`, `fails-closed`, or the
    /// invariants that must be violated, like `I2,I4` (`I3?` for one that may be).
    #[arg(long, value_name = "PREDICTION")]
    expect: Option<String>,
}

impl Expectation {
    fn choice(&self, sets: &[String]) -> scenario::Choice {
        scenario::Choice { sets: sets.to_vec(), variant: self.variant.clone(), expect: self.expect.clone() }
    }
}

/// How the text report shows its timeline. The JSON report's timeline is always every line.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct TimelineFlags {
    /// Show only these processes' lines, like `pg1,connect` (the names the timeline shows:
    /// pg1, pg2, postgres, connect, connect-2, connect-3, kafka, sink, app, operator, loader,
    /// consumer).
    #[arg(long, value_name = "PROCESSES")]
    only: Option<String>,
    /// Follow one key across every process: `7`, or `public.hubs:7` for one table's; on a
    /// two-column key its columns' values, `public.orders:(5,2)`. Faults stay in view.
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
    /// Show every line: routine deliveries (poll, append, apply, acknowledge, group commit) are
    /// folded into one line per run of them otherwise.
    #[arg(long)]
    verbose: bool,
    /// Also write the run as one self-contained HTML page to FILE: swimlanes per process, the
    /// positions on one LSN axis, each slot's retained WAL against its cap, the findings linked
    /// to their moments, one key followed (--key, or the first finding's); it needs no network.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// `--strategy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum StrategyArg {
    Bfs,
    Dfs,
    Random,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check {
            scenario: path,
            strategy,
            max_depth,
            threads,
            seed,
            timeout,
            max_states,
            max_memory,
            sets,
            expectation,
            json,
            export,
            serve,
        } => {
            let loaded = match scenario::load_with(&path, &expectation.choice(&sets)) {
                Ok(loaded) => loaded,
                Err(error) => return bad_input(&error.to_string()),
            };
            if threads == Some(0) {
                return bad_input("--threads 0: at least one thread is needed");
            }
            let threads = threads.map(|threads| capped("--threads", threads));
            if let Some(text) = serve {
                if let Err(error) = check::bound(&loaded.spec) {
                    return bad_input(&format!("{}: {error}", path.display()));
                }
                let address = match check::serve_address(&text) {
                    Ok(address) => address,
                    Err(error) => return bad_input(&error),
                };
                eprintln!("explorer  http://{address}/ on the bound of {} (stop with Ctrl-C)", path.display());
                return match check::serve(&loaded.spec, address, threads.unwrap_or(1)) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(error) => bad_input(&format!("{}: {error}", path.display())),
                };
            }
            let strategy = match strategy {
                StrategyArg::Bfs => check::Strategy::Bfs,
                StrategyArg::Dfs => check::Strategy::Dfs,
                StrategyArg::Random => check::Strategy::Random { seed },
            };
            let timeout = match (timeout, strategy) {
                (Some(0), _) => return bad_input("--timeout 0: give a number of seconds above 0"),
                (Some(seconds), _) if seconds > budget::MAX_TIMEOUT_SECONDS => {
                    return bad_input(&format!(
                        "--timeout {seconds}: at most {} seconds (a year)",
                        budget::MAX_TIMEOUT_SECONDS
                    ));
                }
                (Some(seconds), _) => Some(std::time::Duration::from_secs(seconds)),
                (None, check::Strategy::Random { .. }) => Some(std::time::Duration::from_secs(10)),
                (None, _) => None,
            };
            let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            if max_states == 0 {
                return bad_input("--max-states 0: give a number of states above 0");
            }
            let max_memory_bytes = match max_memory_budget(max_memory.as_deref()) {
                Ok(bytes) => bytes,
                Err(error) => return bad_input(&error),
            };
            let plan = check::CheckPlan { strategy, max_depth, threads, timeout, max_states, max_memory_bytes };
            match check::check(&loaded.spec, &path.display().to_string(), plan) {
                Err(error) => bad_input(&format!("{}: {error}", path.display())),
                Ok(report) => {
                    if json {
                        out!(format!("{}\n", handoff_sim::versioned_json(&report)));
                    } else {
                        out!(check::text(&report));
                    }
                    if let Some(dir) = export {
                        for property in report.properties.iter().filter(|p| !p.path.is_empty()) {
                            let written = check::export(&loaded.spec, property)
                                .and_then(|spec| scenario::to_toml(&spec, loaded.seed).map(|text| (spec.name, text)))
                                .and_then(|(name, text)| {
                                    let file = dir.join(format!("{name}.toml"));
                                    std::fs::create_dir_all(&dir)
                                        .and_then(|()| std::fs::write(&file, text))
                                        .map(|()| file)
                                        .map_err(|error| format!("--export {}: {error}", dir.display()))
                                });
                            match written {
                                Ok(file) => eprintln!(
                                    "exported   {} -> {} (replay: {} run {0})",
                                    file.display(),
                                    property.name,
                                    handoff_sim::program()
                                ),
                                Err(error) => return bad_input(&error),
                            }
                        }
                    }
                    ExitCode::from(report.verdict.exit_status())
                }
            }
        }
        Command::Run { scenario: path, seed, sets, expectation, json, timeline } => {
            let loaded = match scenario::load_with(&path, &expectation.choice(&sets)) {
                Ok(loaded) => loaded,
                Err(error) => return bad_input(&error.to_string()),
            };
            let seed = seed.unwrap_or(loaded.seed);
            commands::run(&loaded.spec, &path.display().to_string(), seed, json, &timeline)
        }
        Command::Drills => {
            let lessons = handoff_sim::drills::lessons(&handoff_sim::drills::scenarios_dir());
            out!(handoff_sim::drills::catalogue(&lessons));
            ExitCode::SUCCESS
        }
        Command::Drill { name, predict, seed, json } => {
            let dir = handoff_sim::drills::scenarios_dir();
            let lessons = handoff_sim::drills::lessons(&dir);
            match handoff_sim::drills::find(&lessons, &name) {
                Ok(lesson) => commands::drill(lesson, &dir, predict, seed, json),
                Err(error) => bad_input(&error),
            }
        }
        Command::Replay { file, json, timeline } => {
            let loaded = match scenario::load(&file, &[]) {
                Ok(loaded) => loaded,
                Err(error) => return bad_input(&error.to_string()),
            };
            commands::run(&loaded.spec, &file.display().to_string(), loaded.seed, json, &timeline)
        }
        Command::Sweep {
            scenario: path,
            seeds,
            start,
            jobs,
            shard,
            sets,
            expectation,
            json,
            save,
            check_determinism,
            run_timeout,
            all_faults,
        } => {
            let mut sets = sets;
            if all_faults {
                // Whether there is a standby decides the list; the kinds every system takes make
                // the probe load even where other `--set`s name the profile but not its kinds.
                let mut probe = sets.clone();
                probe.push(scenario::every_fault_kind_with(Default::default()));
                match scenario::load_with(&path, &expectation.choice(&probe)) {
                    Ok(loaded) => sets.push(scenario::every_fault_kind(&loaded.spec)),
                    Err(error) => return bad_input(&error.to_string()),
                }
            }
            let loaded = match scenario::load_with(&path, &expectation.choice(&sets)) {
                Ok(loaded) => loaded,
                Err(error) => return bad_input(&error.to_string()),
            };
            let shard = match shard.as_deref().map(parse_shard).transpose() {
                Ok(shard) => shard.unwrap_or((1, 1)),
                Err(error) => return bad_input(&error),
            };
            if jobs == Some(0) {
                return bad_input("--jobs 0: at least one job is needed");
            }
            if run_timeout == 0 {
                return bad_input("--run-timeout 0: give a number of seconds above 0");
            }
            let jobs =
                capped("--jobs", jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())));
            let run_timeout = std::time::Duration::from_secs(run_timeout);
            let plan = Plan { seeds, start, jobs, shard, json, save, check_determinism, run_timeout };
            commands::sweep(&loaded.spec, &path, &sets, plan)
        }
        Command::SweepWorker { scenario: path, sets, expectation, save } => {
            let loaded = match scenario::load_with(&path, &expectation.choice(&sets)) {
                Ok(loaded) => loaded,
                Err(error) => return bad_input(&error.to_string()),
            };
            commands::sweep_worker(&loaded.spec, &path.display().to_string(), save.as_deref())
        }
        Command::Shrink { scenario: path, seed, sets, expectation, out, invariant, max_runs } => {
            let loaded = match scenario::load_with(&path, &expectation.choice(&sets)) {
                Ok(loaded) => loaded,
                Err(error) => return bad_input(&error.to_string()),
            };
            let invariant = match invariant.as_deref().map(|text| {
                handoff_models::scenario::spec::Invariant::parse(text)
                    .ok_or(format!("--invariant {text}: expected I1 to I12"))
            }) {
                Some(Err(error)) => return bad_input(&error),
                Some(Ok(invariant)) => Some(invariant),
                None => None,
            };
            commands::shrink(&loaded.spec, seed, invariant, out, max_runs)
        }
        Command::Conform { workload, against, pgdata, json } => conform(&workload, against, pgdata, json),
        Command::Merge { files, json } => {
            let mut inputs = Vec::new();
            for file in &files {
                match std::fs::File::open(file) {
                    Ok(opened) => inputs.push((file.display().to_string(), std::io::BufReader::new(opened))),
                    Err(error) => return bad_input(&format!("{}: cannot read: {error}", file.display())),
                }
            }
            commands::merge(inputs, json)
        }
    }
}

/// `handoff conform`.
fn conform(path: &std::path::Path, against: Option<String>, pgdata: Option<PathBuf>, json: bool) -> ExitCode {
    use handoff_sim::conform::workload::Workload;
    use handoff_sim::conform::{self, Against, pgserver::PgCtl, pgwire::Target, real::RestartWith};
    let text = match scenario::read_text(path) {
        Ok(text) => text,
        Err(error) => return bad_input(&error),
    };
    let workload = match Workload::parse(&text, &path.display().to_string()) {
        Ok(workload) => workload,
        Err(error) => return bad_input(&error),
    };
    let against = match against {
        None => None,
        Some(url) => {
            let target = match Target::parse(&url) {
                Ok(target) => target,
                Err(error) => return bad_input(&format!("--against: {error}")),
            };
            let restart = match pgdata {
                None => None,
                Some(data_dir) => match PgCtl::find() {
                    Ok(pg_ctl) => Some(RestartWith { data_dir, pg_ctl }),
                    Err(error) => return bad_input(&format!("--pgdata: {error}")),
                },
            };
            Some(Against { target, restart })
        }
    };
    match conform::run(&workload, against) {
        Ok(report) => {
            if json {
                out!(format!("{}\n", handoff_sim::versioned_json(&report)));
            } else {
                out!(conform::render_text(&report));
            }
            if report.disagreements == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) }
        }
        Err(error) => {
            eprintln!("error: {}: {error}", path.display());
            ExitCode::from(2)
        }
    }
}

/// `--max-memory`, or its default: half of what the machine gives the process (`None` where
/// the system does not show the process's memory, and none was asked for).
fn max_memory_budget(asked: Option<&str>) -> Result<Option<u64>, String> {
    let machine = budget::machine_memory_bytes();
    let Some(text) = asked else {
        return Ok(if budget::can_measure_memory() { budget::default_max_memory() } else { None });
    };
    let bytes = budget::parse_memory(text)?;
    if bytes < budget::MIN_MEMORY_BYTES {
        return Err(format!("--max-memory {text}: at least {}", budget::size_text(budget::MIN_MEMORY_BYTES)));
    }
    if let Some(machine) = machine.filter(|machine| bytes > *machine) {
        return Err(format!(
            "--max-memory {text}: more than the {} this machine gives the process (its memory, or its cgroup's limit)",
            budget::size_text(machine)
        ));
    }
    if !budget::can_measure_memory() {
        return Err(format!(
            "--max-memory {text}: this system does not show the process's memory (/proc/self/statm), so no budget can be kept"
        ));
    }
    Ok(Some(bytes))
}

fn bad_input(message: &str) -> ExitCode {
    use std::io::Write;
    // Standard error may be a closed pipe too: the exit code still says it.
    let _ = writeln!(std::io::stderr(), "error: {message}");
    ExitCode::from(2)
}

/// Writes to standard output (see [`out!`]): `Err` holds the code the command ends with.
fn print_out(text: &str) -> Result<(), ExitCode> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Err(ExitCode::SUCCESS),
        Err(error) => Err(bad_input(&format!("cannot write the output: {error}"))),
    }
}

/// Jobs (or threads) beyond this many per core add memory and switching, not speed.
const PARALLELISM_PER_CORE_MAX: usize = 4;

/// `requested` jobs or threads, capped at [`PARALLELISM_PER_CORE_MAX`] per core (saying so).
fn capped(flag: &str, requested: usize) -> usize {
    use std::io::Write;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let most = cores.saturating_mul(PARALLELISM_PER_CORE_MAX);
    if requested <= most {
        return requested;
    }
    let _ = writeln!(
        std::io::stderr(),
        "note: {flag} {requested} capped at {most}: {PARALLELISM_PER_CORE_MAX} per core, and this machine has {cores}"
    );
    most
}

/// Parses `K/N`.
fn parse_shard(text: &str) -> Result<(u64, u64), String> {
    let (k, n) = text.split_once('/').ok_or_else(|| format!("--shard {text}: expected K/N, e.g. 2/8"))?;
    let (k, n): (u64, u64) = match (k.trim().parse(), n.trim().parse()) {
        (Ok(k), Ok(n)) => (k, n),
        _ => return Err(format!("--shard {text}: K and N must be whole numbers, e.g. 2/8")),
    };
    if n == 0 || k == 0 || k > n {
        return Err(format!("--shard {text}: expected 1 <= K <= N"));
    }
    Ok((k, n))
}

/// What `handoff sweep` was asked for.
pub struct Plan {
    pub seeds: u64,
    pub start: u64,
    pub jobs: usize,
    pub shard: (u64, u64),
    pub json: bool,
    pub save: Option<std::path::PathBuf>,
    pub check_determinism: bool,
    pub run_timeout: std::time::Duration,
}
