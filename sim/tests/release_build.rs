//! The release build, as users run it: the segmentation faults of issue 15 (docs/miscompilation.md).
//!
//! A debug build never crashed on these inputs; the release build did, in most runs, because LLVM
//! miscompiled `AckDurable::observe`. So these tests build `target/release/handoff` (cargo does
//! nothing when it is up to date) and run the reproducers many times: every run must end with the
//! exit code its findings give (never a signal), and with the same trace hash.
#![cfg(madsim)]

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Builds the release binary once per test process and returns its path.
fn release_binary() -> &'static PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .current_dir(&root)
            .args(["build", "--release", "--quiet", "--package", "handoff-sim", "--bin", "handoff"])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "cargo build --release failed: {status}");
        let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
        target.join("release/handoff")
    })
}

fn release(args: &[&str]) -> Output {
    Command::new(release_binary()).args(args).output().expect("the release binary runs")
}

fn scenario(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios").join(name).display().to_string()
}

/// Runs `args` (a `run ... --json`) `times` times; every run must exit with a code, the same one,
/// and report the same trace hash. Returns the code.
fn same_every_time(args: &[&str], times: usize) -> i32 {
    let mut seen: Option<(i32, String)> = None;
    for attempt in 0..times {
        let output = release(args);
        if let Some(signal) = output.status.signal() {
            panic!("run {attempt} of {args:?} was killed by signal {signal}");
        }
        let code = output.status.code().expect("an exit code");
        let report: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|error| panic!("run {attempt}: not one JSON object ({error}), exit {code}"));
        let hash = report["trace_hash"].as_str().expect("trace_hash").to_owned();
        match &seen {
            None => seen = Some((code, hash)),
            Some(first) => assert_eq!(first, &(code, hash), "run {attempt} of {args:?} differs from run 0"),
        }
    }
    seen.expect("at least one run").0
}

const MOST_KINDS: &str = r#"fault_profile.kinds=["kill-connect-worker","kill-connector-task","stop-connector","crash-postgres","clog","checkpoint","wal-burst","recreate-slot","rebuild-connector"]"#;

/// As [`MOST_KINDS`], for a group of workers.
const GROUP_KINDS: &str = r#"fault_profile.kinds=["kill-connect-worker","stop-connect-worker","pause-connect-worker","crash-postgres","clog","checkpoint","wal-burst","recreate-slot"]"#;

/// The issue's reproducer: exited 139 (SIGSEGV) in most runs of the release build, 1 in others.
#[test]
fn the_seed_41_reproducer_never_crashes() {
    let path = scenario("claims-restart-during-snapshot.toml");
    let args = ["run", &path, "--seed", "41", "--set", MOST_KINDS, "--set", "fault_profile.max_faults=6", "--json"];
    // Its faults (the file's worker kill at the completion marker, a stop refused while the
    // worker is down, a slot recreated while it is down, a rebuild whose new snapshot the
    // version-guard sink absorbs) leave the file's I2 and nothing else (a `--set` of the fault
    // profile keeps the file's prediction): 0, every time.
    assert_eq!(same_every_time(&args, 25), 0);
}

/// The issue's second reproducer: a valid setting on the keep-alive drill.
#[test]
fn the_keepalive_fix_with_a_larger_fetch_size_never_crashes() {
    let path = scenario("claims-quiet-database-keepalive-fix.toml");
    let args = ["run", &path, "--set", r#"connector."snapshot.fetch.size"=10240"#, "--json"];
    let code = same_every_time(&args, 10);
    assert!(code == 0 || code == 1, "exit {code}");
}

/// The sweeps that died: every bundled scenario with `rebuild-connector` among all the fault
/// kinds its system can take, 150 seeds each, in the release build. A crash is reported as a
/// crashed seed (or, were the isolation broken, kills `sweep`); either way the test fails.
#[test]
fn release_sweeps_with_every_fault_kind_never_crash() {
    let folder = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut scenarios: Vec<PathBuf> = std::fs::read_dir(&folder)
        .expect("scenarios/")
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "toml"))
        .collect();
    scenarios.sort();
    assert!(scenarios.len() >= 12);
    for path in &scenarios {
        let text = std::fs::read_to_string(path).expect("readable");
        if text.contains("\n[schedule]") {
            // A replayed path (`[schedule]`) takes its crashes from the path: it has no fault
            // profile to sweep (the loader refuses one).
            continue;
        }
        let standby = text.contains("[postgres.standby]");
        // A group of workers takes no fault that makes a REST call; it takes the workers' own.
        let group = text.contains("\nworkers = ");
        let kinds = if group {
            GROUP_KINDS.to_owned()
        } else if standby {
            MOST_KINDS.replace("\"clog\"", "\"clog\",\"fail-over-to-standby\"")
        } else {
            MOST_KINDS.to_owned()
        };
        let path = path.display().to_string();
        let output = release(&[
            "sweep",
            &path,
            "--seeds",
            "150",
            "--json",
            "--set",
            &kinds,
            "--set",
            "fault_profile.max_faults=6",
        ]);
        assert_eq!(output.status.signal(), None, "{path}: sweep was killed by a signal");
        let code = output.status.code().expect("an exit code");
        assert!(code == 0 || code == 1, "{path}: exit {code}: {}", String::from_utf8_lossy(&output.stderr));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let summary: serde_json::Value =
            serde_json::from_str(stdout.lines().last().expect("a summary line")).expect("JSON");
        // `sweep` isolates its runs in worker processes: a crash is a reported seed, not a
        // dead sweep, so the summary must count none.
        assert_eq!(summary["summary"]["crashed_runs"], 0, "{path}: {summary}");
        assert_eq!(summary["summary"]["runs"], 150, "{path}: {summary}");
    }
}

/// The standing no-false-alarm sweep (issue 16): every scenario predicted to hold and every
/// fixed zoo twin, swept with every fault kind its system can take (`sweep --all-faults`),
/// shows no finding the prediction does not allow. Where a fault kind exposes a real hazard of
/// the design, the scenario says so in its `all-faults` variant, whose prediction the sweep is
/// judged against; docs/no-false-alarms.md gives the full-size sweep (10,000 seeds each).
#[test]
fn designs_that_hold_show_no_false_alarm_under_every_fault_kind() {
    const SEEDS: u64 = 500;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut designs: Vec<PathBuf> = Vec::new();
    for folder in [root.clone(), root.join("zoo")] {
        for path in std::fs::read_dir(&folder).expect("a scenario folder").flatten().map(|entry| entry.path()) {
            let Some(name) = path.file_name().and_then(|name| name.to_str()) else { continue };
            if !name.ends_with(".toml") {
                continue;
            }
            let twin = folder != root && name.ends_with("-fixed.toml");
            // A scenario with a `[schedule]` follows one path through its bound and takes no
            // faults (the loader refuses them); its bound, explored whole by the exhaustive lens,
            // is its every-interleaving check (hubs-backfill-window-rule, in `backfills`).
            let holds = folder == root && {
                let loaded = handoff_sim::scenario::load(&path, &[]).expect("a bundled scenario loads");
                loaded.spec.prediction.verdict == handoff_models::scenario::spec::Verdict::Holds
                    && loaded.spec.schedule.is_none()
            };
            if twin || holds {
                designs.push(path);
            }
        }
    }
    designs.sort();
    assert!(designs.len() >= 10, "{designs:?}");
    let mut report = Vec::new();
    for path in &designs {
        let text = std::fs::read_to_string(path).expect("readable");
        let path = path.display().to_string();
        let mut args = vec!["sweep", &path, "--seeds", "500", "--all-faults", "--json"];
        if text.contains("[variants.all-faults]") {
            args.extend(["--variant", "all-faults"]);
        }
        let output = release(&args);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let summary: serde_json::Value =
            serde_json::from_str(stdout.lines().last().expect("a summary line")).expect("JSON");
        let summary = &summary["summary"];
        assert_eq!(summary["runs"], SEEDS, "{path}: {summary}");
        assert_eq!(summary["crashed_runs"], 0, "{path}: {summary}");
        assert_eq!(summary["unexpected_runs"], 0, "{path}: a finding the prediction does not allow: {summary}");
        assert_eq!(output.status.code(), Some(0), "{path}: {}", String::from_utf8_lossy(&output.stderr));
        report.push(format!("{path}: {SEEDS} seeds, findings {}", summary["findings"]));
    }
    eprintln!("{}", report.join("\n"));
}

/// Every bundled scenario and regression with a `[check]` bound (the zoo has its own test,
/// `zoo.rs`) is as its
/// prediction says in the exhaustive lens too: `handoff check` explores the whole bound and exits
/// 0. A bound whose prediction only the timed lens holds (a situation it never reaches, a drill it
/// cannot make) would tell a newcomer running `check` on it that the prediction did not hold.
#[test]
fn every_bundled_bound_is_as_its_scenario_predicts() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut bounds = 0;
    let mut names: Vec<PathBuf> = [root.clone(), root.join("regressions")]
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).expect("a scenarios folder"))
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    names.sort();
    for path in names {
        let text = std::fs::read_to_string(&path).expect("a scenario");
        if !text.lines().any(|line| line.trim() == "[check]") {
            continue;
        }
        bounds += 1;
        let output = release(&["check", &path.display().to_string()]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}:\n{}{}",
            path.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert!(bounds >= 5, "the bundled scenarios and regressions have bounds: {bounds}");
}
