//! `cargo xtask valgrind-sweep`: the standing memory-safety check (docs/memory-safety.md).
//!
//! Every bundled scenario (`scenarios/*.toml` and `scenarios/zoo/*.toml`, or the ones named with
//! `--scenario`) is swept with `handoff sweep` under valgrind's memcheck, with every fault
//! kind the scenario's system can take switched on in its `[fault_profile]` (up to six faults a
//! run), and the sweep passes only when memcheck counts zero errors in every process.
//!
//! By default the release binary is built with the system allocator (`--features
//! system-allocator`, into `target/valgrind`), so that memcheck sees every heap block and can
//! report overruns and uses after free; `--allocator mimalloc` checks the binary exactly as users
//! run it (memcheck then sees mimalloc's pages as a few large blocks: uninitialised reads and
//! wild addresses are still found, heap overruns inside a page are not).

use crate::{cargo, root, run};
use std::path::{Path, PathBuf};
use std::process::Command;

use handoff_models::scenario::spec::FaultKind;

struct Options {
    seeds: u64,
    start: u64,
    jobs: usize,
    scenarios: Vec<PathBuf>,
    mimalloc: bool,
    track_origins: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options =
        Options { seeds: 100, start: 0, jobs: 2, scenarios: Vec::new(), mimalloc: false, track_origins: false };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--seeds" => {
                options.seeds = value("--seeds")?.parse().map_err(|_| "--seeds: expected a whole number from 1")?;
                if options.seeds == 0 {
                    return Err("--seeds 0: a sweep of no seed checks nothing".into());
                }
            }
            "--start" => options.start = value("--start")?.parse().map_err(|_| "--start: expected a whole number")?,
            "--jobs" => {
                options.jobs = value("--jobs")?.parse().map_err(|_| "--jobs: expected a whole number from 1 to 64")?;
                if !(1..=64).contains(&options.jobs) {
                    return Err("--jobs: expected a whole number from 1 to 64".into());
                }
            }
            "--scenario" => options.scenarios.push(PathBuf::from(value("--scenario")?)),
            "--allocator" => match value("--allocator")?.as_str() {
                "system" => options.mimalloc = false,
                "mimalloc" => options.mimalloc = true,
                other => return Err(format!("--allocator {other}: expected system or mimalloc")),
            },
            "--track-origins" => options.track_origins = true,
            other => return Err(format!("valgrind-sweep: unknown argument {other}")),
        }
    }
    Ok(options)
}

pub fn command(args: &[String]) -> Result<bool, String> {
    let options = parse(args)?;
    let root = root();
    if Command::new("valgrind").arg("--version").output().is_err() {
        return Err("valgrind is not installed (Debian: apt-get install valgrind)".into());
    }
    let target = root.join(if options.mimalloc { "target" } else { "target/valgrind" });
    let mut build = cargo();
    build.current_dir(&root).args(["build", "--release", "--package", "handoff-sim", "--bin", "handoff"]);
    if !options.mimalloc {
        build.args(["--features", "system-allocator", "--target-dir"]).arg(&target);
    }
    run(&mut build)?;
    let binary = target.join("release/handoff");
    let scenarios = if options.scenarios.is_empty() { bundled(&root)? } else { options.scenarios.clone() };
    let logs = root.join("target/valgrind-logs");
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs).map_err(|error| format!("cannot create {}: {error}", logs.display()))?;
    say!(
        "valgrind-sweep: {} scenario(s) x {} seed(s) from {}, every fault kind, {} allocator, logs in {}",
        scenarios.len(),
        options.seeds,
        options.start,
        if options.mimalloc { "mimalloc" } else { "the system" },
        logs.display()
    );
    let (mut runs, mut errors, mut failed) = (0u64, 0u64, Vec::new());
    for (index, scenario) in scenarios.iter().enumerate() {
        let outcome = sweep_one(&root, &binary, scenario, &options, &logs.join(format!("{index:02}")))?;
        runs += outcome.runs;
        errors += outcome.errors;
        say!(
            "  {:<70} {:>5} runs  {:>3} memcheck error(s){}",
            scenario.display(),
            outcome.runs,
            outcome.errors,
            outcome.problem.as_deref().map(|problem| format!("  {problem}")).unwrap_or_default()
        );
        if outcome.errors > 0 || outcome.problem.is_some() {
            failed.push(scenario.display().to_string());
        }
    }
    say!("valgrind-sweep: {runs} runs, {errors} memcheck error(s)");
    if failed.is_empty() {
        say!("valgrind-sweep: ok");
    } else {
        say!("valgrind-sweep: FAILED in {}; read the logs named above", failed.join(", "));
    }
    Ok(failed.is_empty())
}

/// The bundled scenarios, in name order.
fn bundled(root: &Path) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    for folder in ["scenarios", "scenarios/zoo"] {
        let entries =
            std::fs::read_dir(root.join(folder)).map_err(|error| format!("cannot read {folder}/: {error}"))?;
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|extension| extension == "toml"))
            .map(|path| path.strip_prefix(root).map(Path::to_path_buf).unwrap_or(path))
            .collect();
        files.sort();
        found.extend(files);
    }
    Ok(found)
}

struct Outcome {
    runs: u64,
    errors: u64,
    problem: Option<String>,
}

/// What a scenario's system can take (the loader's own rule, `faults::applies`): every fault
/// kind, but a failover only with a standby, a consumer kill only with the outbox's consumer, a
/// hanging transaction only with exactly-once workers (transactions), a worker's clean shutdown
/// only in a group; a scenario with a
/// `[schedule]` (a counterexample path) follows its path and takes no profile.
fn profile_sets(scenario_text: &str) -> Vec<String> {
    let has = |header: &str| scenario_text.lines().any(|line| line.trim() == header);
    if has("[schedule]") {
        return Vec::new();
    }
    let exactly_once =
        scenario_text.lines().any(|line| line.replace(' ', "") == "\"exactly.once.source.support\"=\"enabled\"");
    let workers = scenario_text
        .lines()
        .find_map(|line| line.replace(' ', "").strip_prefix("workers=").and_then(|n| n.parse::<u8>().ok()))
        .unwrap_or(1);
    let system = handoff_models::scenario::faults::System {
        standby: has("[postgres.standby]"),
        consumer: has("[consumer]"),
        transactions: exactly_once,
        workers,
    };
    let kinds: Vec<String> = FaultKind::ALL
        .iter()
        .filter(|kind| handoff_models::scenario::faults::applies(**kind, system))
        .map(|kind| format!("\"{}\"", kind.name()))
        .collect();
    vec![format!("fault_profile.kinds=[{}]", kinds.join(", ")), "fault_profile.max_faults=6".into()]
}

fn sweep_one(root: &Path, binary: &Path, scenario: &Path, options: &Options, logs: &Path) -> Result<Outcome, String> {
    let text = std::fs::read_to_string(root.join(scenario))
        .map_err(|error| format!("cannot read {}: {error}", scenario.display()))?;
    std::fs::create_dir_all(logs).map_err(|error| format!("cannot create {}: {error}", logs.display()))?;
    let mut command = Command::new("valgrind");
    command
        .current_dir(root)
        .arg("--trace-children=yes")
        .arg("--num-callers=40")
        .arg(format!("--log-file={}/%p.log", logs.display()));
    if options.track_origins {
        command.arg("--track-origins=yes");
    }
    command
        .arg(binary)
        .arg("sweep")
        .arg(scenario)
        .args(["--seeds", &options.seeds.to_string(), "--start", &options.start.to_string()])
        .args(["--jobs", &options.jobs.to_string(), "--json"]);
    for set in profile_sets(&text) {
        command.arg("--set").arg(set);
    }
    let output = command.output().map_err(|error| format!("cannot run valgrind: {error}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let runs = stdout.lines().filter(|line| is_run_line(line)).count() as u64;
    let (errors, crashed) = read_logs(logs)?;
    // `sweep` exits 0 or 1 by the scenario's prediction; anything else is a problem here.
    let problem = match output.status.code() {
        Some(0 | 1) if crashed.is_empty() && runs == options.seeds => None,
        Some(0 | 1) if !crashed.is_empty() => Some(format!("a process died: {}", crashed.join("; "))),
        Some(0 | 1) => Some(format!("{runs} of {} runs reported", options.seeds)),
        _ => Some(format!(
            "handoff sweep ended with {}: {}",
            crate::describe_status(output.status),
            stderr.lines().last().unwrap_or("")
        )),
    };
    Ok(Outcome { runs, errors, problem })
}

/// Sums memcheck's error counts over every process's log; lists processes killed by a signal.
fn read_logs(logs: &Path) -> Result<(u64, Vec<String>), String> {
    let (mut errors, mut crashed) = (0, Vec::new());
    let entries = std::fs::read_dir(logs).map_err(|error| format!("cannot read {}: {error}", logs.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let text =
            std::fs::read_to_string(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
        for line in text.lines() {
            if let Some(rest) = line.split("ERROR SUMMARY: ").nth(1) {
                errors += rest.split_whitespace().next().and_then(|count| count.parse::<u64>().ok()).unwrap_or(0);
            }
            if line.contains("Process terminating with default action of signal") {
                crashed.push(format!("{} ({})", path.display(), line.split("signal ").nth(1).unwrap_or("?")));
            }
        }
        // A clean process's log says nothing worth keeping; an error's log is kept for reading.
        if text.contains("ERROR SUMMARY: 0 errors") && !text.contains("Process terminating") {
            let _ = std::fs::remove_file(&path);
        }
    }
    Ok((errors, crashed))
}

/// Whether a line of `sweep --json` is a run's (docs/json.md, `sweep-run`): `{"schema_version":1,
/// "seed":…}` (or, before the schema was versioned, `{"seed":…}`), not a crashed seed's nor the
/// summary.
fn is_run_line(line: &str) -> bool {
    let Some(rest) = line.strip_prefix('{') else { return false };
    let rest = match rest.strip_prefix("\"schema_version\":") {
        Some(versioned) => versioned.split_once(',').map_or("", |(_, fields)| fields),
        None => rest,
    };
    rest.starts_with("\"seed\":")
}

#[cfg(test)]
mod tests {
    #[test]
    fn run_lines_are_told_from_crashes_and_the_summary() {
        use super::is_run_line;
        assert!(is_run_line(r#"{"schema_version":1,"seed":3,"trace_hash":"00"}"#));
        assert!(is_run_line(r#"{"seed":3,"trace_hash":"00"}"#));
        assert!(!is_run_line(r#"{"schema_version":1,"crashed":{"seed":3}}"#));
        assert!(!is_run_line(r#"{"schema_version":1,"summary":{"seeds":3}}"#));
        assert!(!is_run_line("seed 3"));
    }

    use super::profile_sets;

    #[test]
    fn a_profile_takes_only_the_faults_its_system_can_take() {
        let plain = profile_sets("name = \"s\"\n[sink]\n").join(" ");
        assert!(!plain.contains("fail-over-to-standby") && !plain.contains("kill-consumer"), "{plain}");
        let full = profile_sets("[postgres.standby]\n[consumer]\n").join(" ");
        assert!(full.contains("fail-over-to-standby") && full.contains("kill-consumer"), "{full}");
        assert!(!full.contains("hang-transaction"), "{full}");
        let transactional = profile_sets("[connect]\n\"exactly.once.source.support\" = \"enabled\"\n").join(" ");
        assert!(transactional.contains("hang-transaction"), "{transactional}");
        assert!(profile_sets("[schedule]\n").is_empty(), "a followed path takes no profile");
        let alone = profile_sets("[connect]\n").join(" ");
        assert!(alone.contains("stop-connector") && !alone.contains("stop-connect-worker"), "{alone}");
        let group = profile_sets("[connect]\nworkers = 2\n").join(" ");
        assert!(group.contains("stop-connect-worker") && group.contains("\"stop-connector\""), "{group}");
        assert!(group.contains("rebuild-connector") && group.contains("kill-connector-task"), "{group}");
        assert!(group.contains("pause-connect-worker"), "{group}");
    }
}
