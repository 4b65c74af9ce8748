//! The `handoff` command line: exit codes, the JSON report, bad input.
#![cfg(madsim)]

mod common;

use std::process::{Command, Output};

fn handoff(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_handoff")).args(args).output().expect("the handoff binary runs")
}

fn scenario(name: &str) -> String {
    common::scenario_path(name).display().to_string()
}

#[test]
fn a_held_prediction_exits_0_and_prints_the_report() {
    let output = handoff(&["run", &scenario("claims-restart-during-snapshot")]);
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8_lossy(&output.stdout);
    for section in [
        "timeline",
        "findings (1)",
        "handoff record",
        "prediction held: I2 no resurrection was violated, as predicted",
        "from        the scenario's [prediction]",
        "trace hash",
    ] {
        assert!(text.contains(section), "missing {section}");
    }
    assert!(text.contains("I2 no resurrection, key 42"));
}

#[test]
fn a_prediction_that_does_not_hold_exits_1() {
    let output = handoff(&["run", &scenario("claims-restart-during-snapshot"), "--expect", "I2,I3"]);
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains(
            "prediction NOT held: predicted I3 monotonic apply to be violated, but the run did not violate it\n"
        ),
        "{text}"
    );
    assert!(text.contains("from        --expect I2,I3\n"), "{text}");
    let output = handoff(&["run", &scenario("claims-restart-during-snapshot"), "--expect", "holds"]);
    assert_eq!(output.status.code(), Some(1));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains(
            "prediction NOT held: I2 no resurrection was violated, which the prediction neither requires nor allows\n"
        ),
        "{text}"
    );
}

#[test]
fn the_json_report_has_the_documented_fields() {
    let output = handoff(&["run", &scenario("claims-wall-clock-start"), "--seed", "7", "--json"]);
    assert_eq!(output.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["seed"], 7);
    assert!(report["scenario"].as_str().is_some_and(|s| s.ends_with("claims-wall-clock-start.toml")));
    assert_eq!(report["trace_hash"].as_str().map(str::len), Some(16));
    let findings = report["findings"].as_array().expect("findings");
    assert!(!findings.is_empty());
    for finding in findings {
        for field in ["invariant", "name", "key", "expected", "seen", "at_ms", "detail"] {
            assert!(finding.get(field).is_some(), "finding lacks {field}");
        }
        assert!(finding["invariant"].as_str().is_some_and(|i| i.starts_with('I')));
    }
    assert_eq!(report["prediction"]["held"], true);
    assert_eq!(report["prediction"]["expected"]["verdict"], "violated");
    let record = &report["handoff_record"];
    for field in ["source_row_count", "sink_row_count", "keys_missing", "keys_extra", "sampled_hashes_match"] {
        assert!(record.get(field).is_some(), "handoff_record lacks {field}");
    }
    assert!(report["stats"]["events"].as_u64().is_some_and(|n| n > 0));
    assert!(report["stats"]["sim_time_ms"].as_u64().is_some_and(|n| n > 0));
}

/// `--json` gives each outcome typed, a `kind` and its data, beside the sentence it always had.
#[test]
fn the_json_report_types_the_outcomes() {
    let json = |args: &[&str]| -> serde_json::Value {
        let output = handoff(args);
        serde_json::from_slice(&output.stdout).expect("one JSON object")
    };
    // A task that fails on its own: the run ends short of its boundary, and says why.
    let report = json(&["run", &scenario("claims-failover"), "--set", "failover.gate=off", "--json"]);
    let record = &report["handoff_record"];
    assert_eq!(report["end"]["kind"], "task-failed");
    assert_eq!(record["acceptance_end"], report["end"]);
    assert_eq!(record["acceptance_reached"], false);
    let failure = report["end"]["failure"].as_str().expect("the task's failure");
    assert!(!failure.is_empty());
    assert_eq!(record["acceptance_note"], format!("the connector task FAILED: {failure}"));
    assert_eq!(report["failed_closed"]["status"], "FAILED");
    assert_eq!(record["failover_gate"]["result"]["kind"], "no-gate");
    assert_eq!(record["failover_gate"]["outcome"], "no gate ran: the connector decided by itself");

    // The restart drill: the restart test failed, with the counts the reconciliation gives.
    let report = json(&["run", &scenario("claims-restart-during-snapshot"), "--json"]);
    let record = &report["handoff_record"];
    assert_eq!(report["end"]["kind"], "caught-up");
    assert_eq!(record["acceptance_end"]["kind"], "caught-up");
    let result = &record["restart_test"]["result"];
    assert_eq!(result["kind"], "failed");
    for keys in ["keys_missing", "keys_extra", "keys_differing"] {
        assert_eq!(result[keys].as_u64(), record[keys].as_array().map(|list| list.len() as u64), "{keys}");
    }
    assert!(record["restart_test"]["outcome"].as_str().is_some_and(|text| text.starts_with("failed: ")));
    let marker = &record["snapshot_completion_marker"];
    assert!(["not-stored", "stored", "superseded"].contains(&marker["marker_outcome"]["kind"].as_str().unwrap_or("")));

    // The failover with its gate: rebuilt from a new snapshot after the failover.
    let report = json(&["run", &scenario("claims-failover"), "--json"]);
    let record = &report["handoff_record"];
    assert_eq!(record["failover_gate"]["result"]["kind"], "rebuilt-from-new-snapshot");
    assert_eq!(record["rebuild"]["kind"], "new-snapshot");
    assert_eq!(record["rebuild"]["after"]["kind"], "failover");
    let at_ms = record["rebuild"]["at_ms"].as_u64().expect("when");
    assert_eq!(
        record["rebuild_from_new_snapshot"],
        format!("a new snapshot started at t={}.{:03}s after the failover", at_ms / 1000, at_ms % 1000)
    );

    // A connector that says RUNNING and never catches up: timed out, I11.
    let report = json(&["run", &scenario("claims-slot-cap-stopped-connector"), "--json"]);
    assert_eq!(report["end"], serde_json::json!({ "kind": "timed-out", "connector": "RUNNING" }));
    assert_eq!(report["findings"][0]["invariant"], "I11");
    assert!(report["failed_closed"].is_null());
}

#[test]
fn the_same_seed_prints_the_same_trace_hash_and_another_seed_another() {
    let hash = |seed: &str| {
        let output = handoff(&["run", &scenario("claims-failover"), "--seed", seed, "--json"]);
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
        report["trace_hash"].as_str().expect("hash").to_string()
    };
    assert_eq!(hash("3"), hash("3"));
    assert_ne!(hash("3"), hash("4"));
}

#[test]
fn a_bad_scenario_exits_2_naming_file_line_and_field_and_runs_nothing() {
    let dir = std::env::temp_dir().join(format!("handoff-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("bad.toml");
    let text = std::fs::read_to_string(common::scenario_path("claims-failover"))
        .expect("scenario")
        .replace("\"snapshot.mode\" = \"initial\"", "\"snapshot.mode\" = \"inital\"");
    std::fs::write(&path, text).expect("write");
    let output = handoff(&["run", path.to_str().expect("utf-8")]);
    assert_eq!(output.status.code(), Some(2));
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(error.contains("bad.toml:"), "{error}");
    assert!(error.contains("connector.\"snapshot.mode\""), "{error}");
    assert!(error.contains("inital"), "{error}");
    assert!(output.stdout.is_empty(), "nothing ran");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_flags_exit_2() {
    assert_eq!(handoff(&["run", &scenario("claims-failover"), "--seed", "minus-one"]).status.code(), Some(2));
    assert_eq!(handoff(&["run", &scenario("claims-failover"), "--set", "sink.apply"]).status.code(), Some(2));
    assert_eq!(
        handoff(&["run", &scenario("claims-failover"), "--set", "sink.aply=naive-upsert"]).status.code(),
        Some(2)
    );
    assert_eq!(handoff(&["run", "no/such/file.toml"]).status.code(), Some(2));
    assert_eq!(handoff(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn sweep_exits_1_on_an_unpredicted_finding_and_writes_json_lines_that_merge() {
    let dir = std::env::temp_dir().join(format!("handoff-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let scenario = scenario("claims-restart-during-snapshot");
    let mut files = Vec::new();
    for shard in ["1/2", "2/2"] {
        let args = ["sweep", &scenario, "--start", "520", "--seeds", "6", "--shard", shard, "--jobs", "1"];
        // The naive sink's variant allows I3; this sweep expects I2 alone.
        let output = handoff(&[&args[..], &["--set", "sink.apply=naive-upsert", "--expect", "I2", "--json"]].concat());
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
        assert_eq!(lines.len(), 4, "three runs and a summary");
        assert!(lines[3].get("summary").is_some());
        let path = dir.join(format!("shard-{}.jsonl", &shard[..1]));
        std::fs::write(&path, text).expect("write");
        files.push(path.display().to_string());
    }
    // Seed 525 (in shard 2/2) violates I3, which the expectation does not name.
    let merged = handoff(&["merge", &files[0], &files[1]]);
    assert_eq!(merged.status.code(), Some(1));
    let text = String::from_utf8_lossy(&merged.stdout);
    assert!(
        text.contains("I3 monotonic apply") && text.contains("UNEXPECTED") && text.contains("--seed 525"),
        "{text}"
    );
    // The replay commands repeat the expectation, so that a seed replays against it.
    assert!(text.contains("--seed 525 --expect I2 --set 'sink.apply=naive-upsert'"), "{text}");
    assert!(text.contains("runs      6"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_shrunk_failure_is_written_once_and_replays_to_its_finding() {
    let dir = std::env::temp_dir().join(format!("handoff-shrink-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let out = dir.join("seed-525.toml").display().to_string();
    let scenario = scenario("claims-restart-during-snapshot");
    let args =
        ["shrink", &scenario, "--seed", "525", "--set", "sink.apply=naive-upsert", "--invariant", "I3", "--out", &out];
    let shrunk = handoff(&args);
    assert_eq!(shrunk.status.code(), Some(0), "{}", String::from_utf8_lossy(&shrunk.stderr));
    let text = String::from_utf8_lossy(&shrunk.stdout);
    assert!(text.contains("before") && text.contains("after") && text.contains("I3"), "{text}");
    // The shrunk file predicts its finding, so replaying it holds.
    let replayed = handoff(&["replay", &out]);
    assert_eq!(replayed.status.code(), Some(0), "{}", String::from_utf8_lossy(&replayed.stdout));
    assert!(String::from_utf8_lossy(&replayed.stdout).contains("I3 monotonic apply"));
    // A second shrink never overwrites the file.
    let again = handoff(&args);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists already"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sweep_checks_determinism_when_asked() {
    let scenario = scenario("claims-restart-during-snapshot");
    let args = ["sweep", &scenario, "--seeds", "20", "--jobs", "2", "--check-determinism", "--json"];
    let output = handoff(&args);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    let summary: serde_json::Value = serde_json::from_str(text.lines().last().expect("a summary line")).expect("JSON");
    assert_eq!(summary["summary"]["runs"], 20);
    assert!(summary["summary"]["nondeterministic_seed"].is_null(), "{summary}");
}

/// The seed sweep is `handoff sweep`; `explore`, its former name, is a hidden alias that runs the
/// same command: the same seed lines and the same summary (but for its timing), and its help says so.
#[test]
fn explore_is_a_hidden_alias_of_sweep() {
    let scenario = scenario("claims-restart-during-snapshot");
    let swept = |command: &str| {
        let output = handoff(&[command, &scenario, "--seeds", "3", "--jobs", "1", "--json"]);
        assert_eq!(output.status.code(), Some(0), "{command}: {}", String::from_utf8_lossy(&output.stderr));
        let mut lines: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect();
        let summary = lines.last_mut().and_then(|line| line["summary"].as_object_mut()).expect("a summary line");
        for timing in ["seconds", "runs_per_second"] {
            assert!(summary.remove(timing).is_some(), "{command}: no {timing} in the summary");
        }
        lines
    };
    let (sweep, explore) = (swept("sweep"), swept("explore"));
    assert_eq!(sweep.len(), 4, "three seed lines and the summary");
    assert_eq!(sweep, explore);
    let help = String::from_utf8_lossy(&handoff(&["--help"]).stdout).to_string();
    assert!(help.lines().any(|line| line.trim_start().starts_with("sweep ")), "{help}");
    assert!(!help.lines().any(|line| line.trim_start().starts_with("explore")), "the alias is hidden: {help}");
    let sweep_help = String::from_utf8_lossy(&handoff(&["sweep", "--help"]).stdout).to_string();
    assert!(
        sweep_help.contains("`handoff explore` is the former name of this command and still works"),
        "{sweep_help}"
    );
}

#[test]
fn sweep_and_shrink_refuse_bad_flags() {
    let scenario = scenario("claims-restart-during-snapshot");
    assert_eq!(handoff(&["sweep", &scenario, "--shard", "3/2"]).status.code(), Some(2));
    assert_eq!(handoff(&["sweep", &scenario, "--shard", "one/two"]).status.code(), Some(2));
    assert_eq!(handoff(&["sweep", &scenario, "--jobs", "0"]).status.code(), Some(2));
    assert_eq!(handoff(&["shrink", &scenario, "--seed", "1", "--invariant", "I99"]).status.code(), Some(2));
    let no_finding = handoff(&["shrink", &scenario, "--seed", "1", "--set", "sink.apply=snapshot-epoch"]);
    assert_eq!(no_finding.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_finding.stderr).contains("no finding to shrink"));
}

#[test]
fn check_explores_the_bound_and_narrates_the_shortest_counterexample() {
    // On one thread depth-first search is deterministic, so its maximum depth is pinned too (on
    // more, it depends on which thread takes which state first).
    let output = handoff(&["check", &scenario("claims-restart-during-snapshot"), "--threads", "1"]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    // The bound's size is pinned: a change in the models' semantics shows here as a number.
    assert!(text.contains("states    96099 generated, 42758 unique, max depth 40\n"), "{text}");
    let two = handoff(&["check", &scenario("claims-restart-during-snapshot"), "--threads", "2"]);
    assert!(String::from_utf8_lossy(&two.stdout).contains("states    96099 generated, 42758 unique, max depth "));
    assert!(text.contains("I2 no resurrection                       COUNTEREXAMPLE  violated, as predicted"), "{text}");
    assert!(text.contains("I1 no gap                                holds\n"), "{text}");
    assert!(text.contains("a crash hits an incomplete snapshot      reached"), "{text}");
    // The restart-during-snapshot story: the delete commits after the first snapshot read the row, the worker dies
    // before the completion is stored, the second snapshot (case B) streams past the delete.
    let story = text.split("counterexample: I2 no resurrection").nth(1).expect("a counterexample");
    for step in ["delete claim 3", "> crash connect", "case B, slot already existed", "sink      applied"] {
        assert!(story.contains(step), "{step:?} missing from:\n{story}");
    }
}

#[test]
fn check_reports_json_and_exits_1_when_the_prediction_is_wrong() {
    let path = scenario("claims-restart-during-snapshot");
    let args = ["check", &path, "--set", "sink.apply=snapshot-epoch", "--expect", "I2", "--json", "--threads", "1"];
    let output = handoff(&args);
    assert_eq!(output.status.code(), Some(1), "the expectation says I2 is violated; snapshot-epoch holds");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["unique_states"], 42758);
    assert_eq!(report["complete"], true);
    let properties = report["properties"].as_array().expect("properties");
    let i2 = properties.iter().find(|p| p["name"] == "I2 no resurrection").expect("I2");
    assert_eq!(i2["outcome"], "holds");
    assert_eq!(i2["expected"], false);
    assert!(properties.iter().all(|p| p["outcome"] != "counterexample"), "{properties:?}");
    let output = handoff(&["check", &path, "--json", "--threads", "1"]);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    let properties = report["properties"].as_array().expect("properties");
    let i2 = properties.iter().find(|p| p["name"] == "I2 no resurrection").expect("I2");
    assert_eq!(i2["outcome"], "counterexample");
    assert!(i2["steps"].as_array().is_some_and(|steps| steps.iter().any(|s| s == "crash connect")), "{i2}");
    assert!(i2["story"].as_str().is_some_and(|story| story.contains("case B, slot already existed")), "{i2}");
}

#[test]
fn check_says_what_it_needs() {
    // No [check] section: the bound is missing.
    let output = handoff(&["check", &scenario("claims-failover")]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("has no [check] section"));
    // A bound over a pipeline with a standby: the exhaustive world has one server.
    let dir = std::env::temp_dir().join(format!("handoff-check-standby-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let with_standby = dir.join("failover-bound.toml");
    let text = std::fs::read_to_string(scenario("claims-failover")).expect("the scenario");
    std::fs::write(&with_standby, format!("{text}\n[check]\nrows = 3\ncrash = [\"connect\"]\n")).expect("written");
    let output = handoff(&["check", with_standby.to_str().expect("a path")]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("has a standby"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let path = scenario("claims-restart-during-snapshot");
    for flags in [&["--threads", "0"][..], &["--max-states", "0"], &["--strategy", "sideways"], &["--timeout", "0"]] {
        let mut args = vec!["check", path.as_str()];
        args.extend_from_slice(flags);
        assert_eq!(handoff(&args).status.code(), Some(2), "{flags:?}");
    }
    // A bound cut short says so, and an `always` that held is only "held so far".
    let output = handoff(&["check", &path, "--max-states", "2000"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("(the bound was NOT explored completely)"), "{text}");
    assert!(text.contains("holds so far"), "{text}");
    // Limits that cannot be kept.
    for (flags, phrase) in [
        (&["--max-memory", "8gb"][..], "expected a size like 512MB"),
        (&["--max-memory", "100MB"], "at least 128MB"),
        (&["--max-memory", "1000TB"], "more than the"),
        (&["--timeout", "99999999999"], "at most 31536000 seconds"),
    ] {
        let mut args = vec!["check", path.as_str()];
        args.extend_from_slice(flags);
        let output = handoff(&args);
        assert_eq!(output.status.code(), Some(2), "{flags:?}");
        let error = String::from_utf8_lossy(&output.stderr);
        assert!(error.contains(flags[0]) && error.contains(phrase), "{flags:?}: {error}");
    }
}

/// The README's bound with a PostgreSQL restart: 10.6 M generated states, about 20 s and 3 GB
/// in a release build when nothing stops it (far longer in the test profile).
const LARGER_BOUND: [&str; 6] =
    ["--set", "check.crash=[\"connect\", \"postgres\"]", "--set", "check.crashes=2", "--max-states", "400000000"];

#[test]
fn a_bound_cut_short_exits_3_and_says_why() {
    let path = scenario("claims-restart-during-snapshot");
    let output = handoff(&["check", &path, "--max-states", "2000", "--threads", "1"]);
    assert_eq!(output.status.code(), Some(3), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("cut short by the state limit (--max-states 2000)"), "{text}");
    // I2 is predicted and not met yet: that is not known to be wrong.
    assert!(text.contains("I2 no resurrection                       holds so far  PREDICTED BUT NOT FOUND before the cut (it may lie past it)"), "{text}");
    let output = handoff(&["check", &path, "--max-states", "2000", "--threads", "1", "--json"]);
    assert_eq!(output.status.code(), Some(3));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["complete"], false);
    assert_eq!(report["cut_short_by"], "max-states");
    assert_eq!(report["verdict"], "inconclusive");
    assert!(report["states"].as_u64().is_some_and(|states| (2000..3000).contains(&states)), "{report}");
    // A cut bound that has already met a counterexample the prediction does not name is
    // refuted, cut or not: exit 1.
    let naive = common::scenario_path("zoo/naive-sink").display().to_string();
    let args = ["check", &naive, "--set", "prediction.findings=[\"I1\"]", "--max-states", "20000", "--threads", "1"];
    let output = handoff(&args);
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "I3 monotonic apply                       COUNTEREXAMPLE  UNEXPECTED: the prediction neither requires nor allows it"
        ),
        "{text}"
    );
    // The whole bound, as predicted: 0 (check_explores_the_bound_and_narrates_the_shortest_counterexample).
}

#[test]
fn a_counterexample_search_cut_short_prints_the_path_the_exploration_found() {
    // Room for the bound's 96,099 states, not for the search after them.
    let path = scenario("claims-restart-during-snapshot");
    let dir = std::env::temp_dir().join(format!("handoff-cut-search-{}", std::process::id()));
    let dir_text = dir.display().to_string();
    let output = handoff(&["check", &path, "--max-states", "100000", "--export", &dir_text]);
    let text = String::from_utf8_lossy(&output.stdout);
    // The bound itself was explored completely, and everything is as predicted.
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("states    96099 generated, 42758 unique") && !text.contains("NOT explored"), "{text}");
    let header = text.lines().find(|line| line.starts_with("counterexample: I2")).expect("the counterexample");
    assert!(
        header.ends_with(
            "steps, as the exploration found it, NOT the shortest: the search for that was cut short by the state limit (--max-states 100000))"
        ),
        "{header}"
    );
    // It is a real path to the resurrection, at least as long as the shortest (25 steps).
    let steps: usize = header["counterexample: I2 no resurrection (".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a step count");
    assert!(steps >= 25, "{header}");
    let story = text.split("counterexample: I2 no resurrection").nth(1).expect("a story");
    for step in ["delete claim 3", "> crash connect", "case B, slot already existed"] {
        assert!(story.contains(step), "{step:?} missing from:\n{story}");
    }
    // And the timed lens follows it to the same finding.
    let file = dir.join("claims-restart-during-snapshot-i2-counterexample.toml");
    let exported = std::fs::read_to_string(&file).expect("the counterexample was exported");
    assert!(exported.contains("not the shortest"), "{exported}");
    let output = handoff(&["run", &file.display().to_string()]);
    let replay = String::from_utf8_lossy(&output.stdout);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(output.status.code(), Some(0), "{replay}");
    assert!(replay.contains(&format!("schedule  followed step for step ({steps} steps)")), "{replay}");
    assert!(replay.contains("I2 no resurrection, key 3"), "{replay}");
}

#[test]
fn check_returns_at_its_timeout() {
    // Unstopped, this bound takes minutes in the test profile; with --timeout 1 the command
    // (exploration, counterexample search, report) returns within the documented margin of it.
    // The wall clock checked here allows 4 s in all past the timeout, for a loaded machine and
    // the process's start.
    let path = scenario("claims-restart-during-snapshot");
    let mut args = vec!["check", path.as_str(), "--timeout", "1", "--json"];
    args.extend_from_slice(&LARGER_BOUND);
    let started = std::time::Instant::now();
    let output = handoff(&args);
    let elapsed = started.elapsed();
    assert!(elapsed < std::time::Duration::from_secs(5), "took {elapsed:?}");
    assert_eq!(output.status.code(), Some(3), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["cut_short_by"], "timeout");
    assert_eq!(report["verdict"], "inconclusive");
    let seconds = report["seconds"].as_f64().expect("seconds") + report["search_seconds"].as_f64().expect("seconds");
    let margin = handoff_sim::exhaustive::budget::TIMEOUT_MARGIN_MS as f64 / 1000.0;
    assert!((0.9..1.0 + margin).contains(&seconds), "{seconds} s");
}

#[test]
fn check_stops_at_its_memory_budget() {
    // A bound whose shortest counterexample's search holds about 430 MB: a budget of 200MB stops
    // it (at 90 %), and the exploration's own path is printed instead.
    let path = scenario("claims-restart-during-snapshot");
    let args = ["check", &path, "--set", "check.crash=[\"connect\", \"postgres\"]", "--max-memory", "200MB", "--json"];
    let output = handoff(&args);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["max_memory_bytes"], 200u64 << 20);
    let peak = report["peak_memory_bytes"].as_u64().expect("the peak is measured");
    assert!(peak < 200 << 20, "{peak} bytes at the peak");
    let i2 = report["properties"].as_array().and_then(|p| p.iter().find(|p| p["name"] == "I2 no resurrection"));
    let i2 = i2.expect("I2");
    assert_eq!(i2["outcome"], "counterexample");
    assert_eq!(i2["search_cut_short_by"], "max-memory", "{i2}");
    assert!(i2["steps"].as_array().is_some_and(|steps| steps.len() >= 25), "{i2}");
    // The exploration held less than that and ran to the end: the verdict stands.
    assert_eq!(report["complete"], true, "{report}");
    assert_eq!(output.status.code(), Some(0));
    let output =
        handoff(&["check", &path, "--set", "check.crash=[\"connect\", \"postgres\"]", "--max-memory", "200MB"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("cut short by the memory budget (--max-memory 200MB; the command stops at 90 % of it)"),
        "{text}"
    );
}

#[test]
fn check_tells_the_same_counterexample_every_time() {
    let report = || {
        let output = handoff(&["check", &scenario("claims-restart-during-snapshot"), "--threads", "2"]);
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        // All but the timing and memory lines.
        text.lines()
            .filter(|line| !line.starts_with("time ") && !line.starts_with("memory "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(report(), report());
}

#[test]
fn a_counterexample_exported_by_check_replays_step_for_step_in_the_timed_lens() {
    let dir = std::env::temp_dir().join(format!("handoff-export-{}", std::process::id()));
    let dir_text = dir.display().to_string();
    let output = handoff(&["check", &scenario("claims-restart-during-snapshot"), "--export", &dir_text]);
    assert_eq!(output.status.code(), Some(0));
    let file = dir.join("claims-restart-during-snapshot-i2-counterexample.toml");
    let file_text = file.display().to_string();
    let exported = std::fs::read_to_string(&file).expect("the counterexample was exported");
    assert!(exported.contains("[schedule]") && exported.contains("\"crash connect\""), "{exported}");
    // The path is the run's whole story: any seed follows it, to the same finding.
    for seed in ["1", "2", "99"] {
        let output = handoff(&["run", &file_text, "--seed", seed]);
        let text = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{text}");
        assert!(text.contains("schedule  followed step for step (25 steps)"), "{text}");
        assert!(text.contains("I2 no resurrection, key 3"), "{text}");
        assert!(text.contains("snapshot started (case B, slot already existed)"), "{text}");
    }
    // The same path with the sink that removes what a completed snapshot no longer has: the
    // replay follows it and the resurrection is gone, so expecting I2 fails (exit 1).
    let output = handoff(&["run", &file_text, "--set", "sink.apply=snapshot-epoch", "--expect", "I2"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("followed step for step") && text.contains("findings (0)"), "{text}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn serve_opens_the_explorer_on_loopback_only() {
    use std::io::{Read, Write};
    let path = scenario("claims-restart-during-snapshot");
    for (address, phrase) in [("0.0.0.0:3000", "not a loopback address"), ("nowhere", "not an address")] {
        let output = handoff(&["check", &path, "--serve", address]);
        assert_eq!(output.status.code(), Some(2), "{address}");
        assert!(String::from_utf8_lossy(&output.stderr).contains(phrase), "{address}");
    }
    // A free loopback port, then the Explorer on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("bound").port();
    let address = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_handoff"))
        .args(["check", &path, "--serve", &address])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the handoff binary runs");
    let mut status = String::new();
    for _ in 0..100 {
        if let Ok(mut stream) = std::net::TcpStream::connect(&address) {
            let request = format!("GET /.status HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
            stream.write_all(request.as_bytes()).expect("request sent");
            stream.read_to_string(&mut status).expect("response read");
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().ok();
    child.wait().ok();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(status.contains("I2 no resurrection") && status.contains("unique_state_count"), "{status}");
}

fn handoff_with(env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_handoff"));
    command.args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("the handoff binary runs")
}

fn json_lines(output: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

#[test]
fn sweep_survives_a_crashing_seed_and_reports_it_with_its_signal_and_replay_command() {
    let scenario = scenario("claims-restart-during-snapshot");
    let args = ["sweep", &scenario, "--seeds", "10", "--jobs", "2", "--set", "sink.apply=naive-upsert", "--json"];
    let crashed = handoff_with(&[("HANDOFF_TEST_CRASH_SEED", "5")], &args);
    assert_eq!(crashed.status.code(), Some(1), "{}", String::from_utf8_lossy(&crashed.stderr));
    let lines = json_lines(&crashed);
    assert_eq!(lines.len(), 11, "one line per seed, in seed order, then the summary");
    let seeds: Vec<u64> =
        lines[..10].iter().map(|line| line.get("crashed").unwrap_or(line)["seed"].as_u64().expect("a seed")).collect();
    assert_eq!(seeds, (0..10).collect::<Vec<u64>>());
    let crash = &lines[5]["crashed"];
    assert_eq!(crash["cause"], "signal");
    assert_eq!(crash["signal"], 11);
    assert_eq!(crash["signal_name"], "SIGSEGV");
    assert_eq!(
        crash["replay"].as_str(),
        // Started by Cargo (as `cargo test` starts it), the hint is the README's form.
        Some(format!("cargo run --release -- run {scenario} --seed 5 --set 'sink.apply=naive-upsert'").as_str())
    );
    // The other nine ran, in a new worker after the crash too, exactly as in a sweep without it.
    let clean = handoff(&args);
    assert_eq!(clean.status.code(), Some(0), "{}", String::from_utf8_lossy(&clean.stderr));
    let clean_lines = json_lines(&clean);
    for seed in (0..10).filter(|seed| *seed != 5) {
        assert!(lines[seed].get("trace_hash").is_some(), "seed {seed} ran: {}", lines[seed]);
        assert_eq!(lines[seed], clean_lines[seed], "seed {seed}");
    }
    let summary = &lines[10]["summary"];
    assert_eq!(summary["runs"], 9);
    assert_eq!(summary["crashed_runs"], 1);
    assert_eq!(summary["crashed"][0]["seed"], 5);
    assert_eq!(clean_lines[10]["summary"]["crashed_runs"], 0);
    // One job: the first seed, two in a row (the next seed was already asked of the worker that
    // died) and the last.
    let mut one_job = args.to_vec();
    one_job[5] = "1";
    let crashed = handoff_with(&[("HANDOFF_TEST_CRASH_SEED", "0,5,6,9")], &one_job);
    assert_eq!(crashed.status.code(), Some(1));
    let lines = json_lines(&crashed);
    for seed in 0..10 {
        if [0, 5, 6, 9].contains(&seed) {
            assert_eq!(lines[seed]["crashed"]["seed"], seed, "{}", lines[seed]);
            assert_eq!(lines[seed]["crashed"]["signal_name"], "SIGSEGV");
        } else {
            assert_eq!(lines[seed], clean_lines[seed], "seed {seed}");
        }
    }
    assert_eq!(lines[10]["summary"]["crashed_runs"], 4);
    // The text report lists it too.
    let text_output = handoff_with(&[("HANDOFF_TEST_CRASH_SEED", "5")], &args[..args.len() - 1]);
    assert_eq!(text_output.status.code(), Some(1));
    let text = String::from_utf8_lossy(&text_output.stdout);
    assert!(text.contains("runs      9 in"), "{text}");
    assert!(text.contains("CRASHED   1 seed(s)"), "{text}");
    assert!(text.contains("seed 5        killed by SIGSEGV (signal 11)"), "{text}");
    assert!(
        text.contains(&format!(
            "      cargo run --release -- run {scenario} --seed 5 --set 'sink.apply=naive-upsert'\n"
        )),
        "{text}"
    );
}

#[test]
fn a_run_past_the_run_timeout_is_killed_and_reported_as_timed_out() {
    let scenario = scenario("claims-restart-during-snapshot");
    let started = std::time::Instant::now();
    let args = ["sweep", &scenario, "--seeds", "4", "--jobs", "2", "--run-timeout", "1", "--json"];
    let output = handoff_with(&[("HANDOFF_TEST_HANG_SEED", "2")], &args);
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "the watchdog ended the hung run");
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let lines = json_lines(&output);
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[2]["crashed"]["cause"], "timed-out", "{}", lines[2]);
    assert_eq!(lines[2]["crashed"]["timeout_s"], 1);
    assert!([0, 1, 3].iter().all(|seed| lines[*seed]["trace_hash"].is_string()));
    assert_eq!(lines[4]["summary"]["crashed_runs"], 1);
    assert_eq!(lines[4]["summary"]["runs"], 3);
}

#[test]
fn save_and_the_determinism_check_work_through_worker_processes() {
    let dir = std::env::temp_dir().join(format!("handoff-save-{}", std::process::id()));
    let dir_text = dir.display().to_string();
    let scenario = scenario("claims-restart-during-snapshot");
    let args = [
        "sweep",
        &scenario,
        "--start",
        "520",
        "--seeds",
        "6",
        "--jobs",
        "2",
        "--set",
        "sink.apply=naive-upsert",
        "--check-determinism",
        "--save",
        &dir_text,
    ];
    // Seed 523 crashes: it is reported, and the others are still checked and saved.
    let output = handoff_with(&[("HANDOFF_TEST_CRASH_SEED", "523")], &args);
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(!text.contains("DETERMINISM BROKEN"), "{text}");
    assert!(text.contains("runs      5 in") && text.contains("seed 523"), "{text}");
    let errors = String::from_utf8_lossy(&output.stderr);
    // I2 first fails at 520, I3 at 525 (a replay moves a claim back).
    for seed in ["520", "525"] {
        let file = dir.join(format!("claims-restart-during-snapshot-seed-{seed}.toml"));
        assert!(errors.contains(&format!("saved {}", file.display())), "{errors}");
        let replayed = handoff(&["replay", file.to_str().expect("a path")]);
        assert_eq!(replayed.status.code(), Some(0), "{}", String::from_utf8_lossy(&replayed.stdout));
    }
    assert_eq!(std::fs::read_dir(&dir).expect("the directory").count(), 2);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_sweep_that_would_run_no_seed_or_pass_the_largest_seed_is_refused() {
    let scenario = scenario("claims-restart-during-snapshot");
    for (flags, phrase) in [
        (&["--seeds", "0"][..], "--seeds 0: a sweep needs at least one seed"),
        (&["--shard", "5/10", "--seeds", "3"], "--shard 5/10 --seeds 3: shard 5 has no seed"),
        (&["--start", "18446744073709551615"], "--start 18446744073709551615 --seeds 1000: the range would end past"),
        (&["--start", "18446744073709551610", "--seeds", "10"], "--seeds can be at most 6"),
        (&["--run-timeout", "0"], "--run-timeout 0"),
    ] {
        let output = handoff(&[&["sweep", &scenario][..], flags].concat());
        assert_eq!(output.status.code(), Some(2), "{flags:?}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(phrase),
            "{flags:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.stdout.is_empty(), "{flags:?} ran nothing");
    }
    // The last seed itself is a range of one.
    let output = handoff(&["sweep", &scenario, "--start", "18446744073709551615", "--seeds", "1", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let lines = json_lines(&output);
    assert_eq!(lines[0]["seed"], u64::MAX);
    assert_eq!(lines[1]["summary"]["runs"], 1);
}

/// Starts `handoff` with its standard output a pipe whose reading end is closed at once.
fn into_a_closed_pipe(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_handoff"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the handoff binary runs");
    drop(child.stdout.take());
    child.wait_with_output().expect("it ends")
}

#[test]
fn a_closed_output_pipe_ends_every_command_quietly() {
    let scenario = scenario("claims-restart-during-snapshot");
    let dir = std::env::temp_dir().join(format!("handoff-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let shard = dir.join("shard.jsonl");
    let written = handoff(&["sweep", &scenario, "--seeds", "2", "--json"]);
    std::fs::write(&shard, &written.stdout).expect("write");
    let shard = shard.display().to_string();
    let workload = format!("{}/../conform/heartbeats.toml", env!("CARGO_MANIFEST_DIR"));
    let out = dir.join("shrunk.toml").display().to_string();
    let commands: [&[&str]; 9] = [
        &["run", &scenario],
        &["run", &scenario, "--json"],
        &["replay", &scenario],
        &["sweep", &scenario, "--seeds", "4"],
        // Streamed seeds: the closed pipe ends the sweep (it would take ages to run them all).
        &["sweep", &scenario, "--seeds", "18446744073709551615", "--json"],
        &["merge", &shard],
        &["check", &scenario, "--max-states", "2000"],
        &["conform", &workload],
        &["shrink", &scenario, "--seed", "525", "--set", "sink.apply=naive-upsert", "--max-runs", "5", "--out", &out],
    ];
    for args in commands {
        let output = into_a_closed_pipe(args);
        let errors = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {errors}");
        assert!(!errors.contains("panicked") && !errors.contains("Broken pipe"), "{args:?}: {errors}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sweep_streams_its_seeds_instead_of_listing_them() {
    // The largest range there is: a list of its seeds would not fit in any memory.
    let scenario = scenario("claims-restart-during-snapshot");
    let mut child = Command::new(env!("CARGO_BIN_EXE_handoff"))
        .args(["sweep", &scenario, "--seeds", "18446744073709551615", "--jobs", "1", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the handoff binary runs");
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().expect("piped")), &mut first)
        .expect("a line");
    let status = child.wait().expect("it ends");
    let run: serde_json::Value = serde_json::from_str(&first).expect("JSON");
    assert_eq!(run["seed"], 0);
    assert_eq!(status.code(), Some(0), "a closed pipe is the end of the output");
}

#[test]
fn jobs_and_threads_beyond_four_per_core_are_capped_and_it_says_so() {
    let scenario = scenario("claims-restart-during-snapshot");
    let output = handoff(&["sweep", &scenario, "--seeds", "3", "--jobs", "100000", "--json"]);
    assert_eq!(output.status.code(), Some(0));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let errors = String::from_utf8_lossy(&output.stderr);
    assert!(errors.contains(&format!("note: --jobs 100000 capped at {}", 4 * cores)), "{errors}");
    assert_eq!(json_lines(&output)[3]["summary"]["runs"], 3);
    let output = handoff(&["check", &scenario, "--threads", "100000", "--max-states", "2000"]);
    let errors = String::from_utf8_lossy(&output.stderr);
    assert!(errors.contains(&format!("note: --threads 100000 capped at {}", 4 * cores)), "{errors}");
    let output = handoff(&["sweep", &scenario, "--seeds", "3", "--jobs", &(4 * cores).to_string()]);
    assert!(!String::from_utf8_lossy(&output.stderr).contains("capped"));
}

#[test]
fn merge_refuses_files_that_are_not_whole_shards_of_one_sweep_and_carries_crashed_seeds() {
    let dir = std::env::temp_dir().join(format!("handoff-merge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let scenario = scenario("claims-restart-during-snapshot");
    let sweep = |shard: &str, env: &[(&str, &str)]| {
        let output =
            handoff_with(env, &["sweep", &scenario, "--seeds", "6", "--shard", shard, "--jobs", "1", "--json"]);
        let path = dir.join(format!("shard-{}.jsonl", shard.replace('/', "-of-")));
        std::fs::write(&path, &output.stdout).expect("write");
        path.display().to_string()
    };
    let one = sweep("1/2", &[("HANDOFF_TEST_CRASH_SEED", "2")]);
    let two = sweep("2/2", &[]);
    let merged = handoff(&["merge", &one, &two, "--json"]);
    assert_eq!(merged.status.code(), Some(1), "a crashed seed fails the merged sweep too");
    let summary = &json_lines(&merged)[0]["summary"];
    assert_eq!(summary["runs"], 5);
    assert_eq!(summary["crashed_runs"], 1);
    assert_eq!(summary["crashed"][0]["seed"], 2);
    assert_eq!(summary["shard"], "1/2 + 2/2");
    // A file without its summary line (cut short).
    let text = std::fs::read_to_string(&one).expect("read");
    let cut = dir.join("cut.jsonl");
    std::fs::write(&cut, text.lines().take(2).collect::<Vec<_>>().join("\n")).expect("write");
    let output = handoff(&["merge", cut.to_str().expect("a path"), &two]);
    assert_eq!(output.status.code(), Some(2));
    let errors = String::from_utf8_lossy(&output.stderr);
    assert!(errors.contains("cut.jsonl: no summary line"), "{errors}");
    // Shards of 3 and of 4 of the range.
    let a_third = sweep("1/3", &[]);
    let a_quarter = sweep("2/4", &[]);
    let output = handoff(&["merge", &a_third, &a_quarter]);
    assert_eq!(output.status.code(), Some(2));
    let errors = String::from_utf8_lossy(&output.stderr);
    assert!(errors.contains("shard-2-of-4.jsonl:3: shard 2/4 of --start 0 --seeds 6, but"), "{errors}");
    assert!(errors.contains("shard-1-of-3.jsonl is shard 1/3"), "{errors}");
    // One shard twice.
    let output = handoff(&["merge", &two, &two]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("give each shard once"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn short_runs_answered_in_batches_keep_every_seed_in_order_through_crashes() {
    // Runs of a few milliseconds: the supervisor asks a window's worth of seeds ahead and reads
    // their answers in batches; a crash must still cost exactly its seed.
    let dir = std::env::temp_dir().join(format!("handoff-batches-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let small = dir.join("small.toml");
    let text = std::fs::read_to_string(scenario("claims-restart-during-snapshot"))
        .expect("scenario")
        .replace("\nrows = 1000\n", "\nrows = 20\n")
        // Claim 42 is no row of 20: the loader refuses a delete that can never apply.
        .replace("\ndelete = 42\n", "\ndelete = 7\n")
        .replace("\nend_ms = 60000\n", "\nend_ms = 2000\n");
    std::fs::write(&small, text).expect("write");
    let small = small.display().to_string();
    // At 20 rows no run shows the scenario's I2 (claim 42 is not there to delete): no finding.
    let args = ["sweep", &small, "--seeds", "300", "--jobs", "2", "--expect", "holds", "--json"];
    let clean = handoff(&args);
    assert_eq!(clean.status.code(), Some(0), "{}", String::from_utf8_lossy(&clean.stderr));
    let clean_lines = json_lines(&clean);
    let crashed = handoff_with(&[("HANDOFF_TEST_CRASH_SEED", "100,101,102,250,299")], &args);
    assert_eq!(crashed.status.code(), Some(1), "{}", String::from_utf8_lossy(&crashed.stderr));
    let lines = json_lines(&crashed);
    assert_eq!(lines.len(), 301);
    for seed in 0..300 {
        if [100, 101, 102, 250, 299].contains(&seed) {
            assert_eq!(lines[seed]["crashed"]["seed"], seed, "{}", lines[seed]);
        } else {
            assert_eq!(lines[seed], clean_lines[seed], "seed {seed}");
        }
    }
    assert_eq!(lines[300]["summary"]["crashed_runs"], 5);
    assert_eq!(lines[300]["summary"]["runs"], 295);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sweep_all_faults_draws_every_kind_the_system_takes_and_replays_carry_them() {
    // With a standby every kind, the failover included; without one, all but the failover. A
    // `--set` of the profile's other fields alongside is fine.
    for (name, failover) in [("claims-failover", true), ("claims-restart-during-snapshot", false)] {
        let path = scenario(name);
        let args = ["sweep", &path, "--seeds", "3", "--all-faults", "--set", "fault_profile.max_faults=6", "--json"];
        let output = handoff(&args);
        assert!(output.status.code().is_some_and(|code| code <= 1), "{}", String::from_utf8_lossy(&output.stderr));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("a summary")).expect("JSON");
        let sets =
            summary["summary"]["sets"].as_array().expect("sets").iter().map(|set| set.to_string()).collect::<Vec<_>>();
        let kinds = sets.iter().find(|set| set.contains("fault_profile.kinds")).expect("the kinds are among the sets");
        assert!(kinds.contains("recreate-slot") && kinds.contains("checkpoint"), "{kinds}");
        assert_eq!(kinds.contains("fail-over-to-standby"), failover, "{name}: {kinds}");
    }
}

/// The timeline section of a text report, one entry per line (captions included).
fn timeline_lines(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|line| *line != "timeline")
        .skip(1)
        .take_while(|line| !line.is_empty())
        .map(|line| line.trim_start().to_string())
        .collect()
}

/// The number after `word` in `line` (`applied 12`), if any.
fn count_after(line: &str, word: &str) -> u64 {
    line.split(word)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.trim_end_matches([',', ';']).parse().ok())
        .unwrap_or(0)
}

/// Routine deliveries are folded by default and every line comes back with `--verbose`; the
/// folded lines count what they fold: the sink's applies add up to the same number either way.
#[test]
fn the_timeline_folds_routine_deliveries_unless_verbose() {
    let path = scenario("claims-restart-during-snapshot");
    let folded = handoff(&["run", &path]);
    let verbose = handoff(&["run", &path, "--verbose"]);
    assert_eq!((folded.status.code(), verbose.status.code()), (Some(0), Some(0)));
    let folded = timeline_lines(&String::from_utf8_lossy(&folded.stdout));
    let verbose = timeline_lines(&String::from_utf8_lossy(&verbose.stdout));
    assert!(folded.iter().any(|line| line.starts_with("(routine deliveries folded")), "a caption says so");
    assert!(!verbose.iter().any(|line| line.starts_with('(')), "no caption for the full view");
    let deliveries: Vec<&String> = folded.iter().filter(|line| line.contains(" delivery  ")).collect();
    assert!(!deliveries.is_empty() && folded.len() * 3 < verbose.len() * 2, "{} vs {}", folded.len(), verbose.len());
    assert!(!verbose.iter().any(|line| line.contains(" delivery  ")));
    // Every line the fold keeps is in the full timeline, in the same order.
    let mut rest = verbose.iter();
    for line in folded.iter().filter(|line| !line.starts_with('(') && !line.contains(" delivery  ")) {
        assert!(rest.any(|full| full == line), "{line} is not in the full timeline, in order");
    }
    let applied = |lines: &[String]| -> u64 {
        lines
            .iter()
            .map(|line| {
                if line.contains(" delivery  ") {
                    count_after(line, "the sink applied ")
                } else if line.contains(" sink      applied ") {
                    count_after(line, "applied ")
                } else {
                    0
                }
            })
            .sum()
    };
    assert_eq!(applied(&folded), applied(&verbose));
    assert!(applied(&verbose) > 1_000);
}

/// `--only` keeps the named processes' lines; `--key` follows one key and keeps the faults.
#[test]
fn only_and_key_filter_the_timeline() {
    let output = handoff(&["run", &scenario("claims-restart-during-snapshot"), "--only", "pg1,sink", "--verbose"]);
    assert_eq!(output.status.code(), Some(0));
    let lines = timeline_lines(&String::from_utf8_lossy(&output.stdout));
    let events: Vec<&String> = lines.iter().filter(|line| !line.starts_with('(')).collect();
    assert!(events.len() > 20);
    for line in &events {
        let process = line.split_whitespace().nth(1).unwrap_or_default();
        assert!(process == "pg1" || process == "sink", "{line}");
    }
    assert!(events.iter().any(|line| line.contains(" sink ")) && events.iter().any(|line| line.contains(" pg1 ")));

    let output = handoff(&["run", &scenario("hubs-backfill-keyless"), "--key", "public.hubs:7"]);
    assert_eq!(output.status.code(), Some(0));
    let lines = timeline_lines(&String::from_utf8_lossy(&output.stdout));
    assert!(lines.iter().any(|line| line.contains("update row 7 -> v2 closed") && line.contains("public.hubs")));
    assert!(lines.iter().any(|line| line.contains("chunk query on public.hubs with no WHERE")), "chunk 1 has hub 7");
    assert!(!lines.iter().any(|line| line.contains("update claim")), "no other key's commits");
    assert!(!lines.iter().any(|line| line.contains("(id) > (16)")), "chunk 2 does not have hub 7");
    assert!(lines.iter().any(|line| line.contains("FAULT: checkpoint")), "faults stay in view");

    // The windows of the chunk that read the key follow it (they name their chunk, not keys):
    // hub 30 is in chunk 2 of hubs-backfill, so its window lines are chunk 2's, not chunk 1's.
    let output = handoff(&["run", &scenario("hubs-backfill"), "--key", "public.hubs:30"]);
    let lines = timeline_lines(&String::from_utf8_lossy(&output.stdout));
    let windows: Vec<&String> =
        lines.iter().filter(|line| line.contains("window opened") || line.contains("window closed")).collect();
    assert_eq!(windows.len(), 2, "chunk 2's window opened and closed: {windows:#?}");
    assert!(windows.iter().all(|line| line.contains("-000000000002")), "{windows:#?}");

    // A folded delivery names where the followed key's own record went.
    let output = handoff(&["run", &scenario("claims-restart-during-snapshot"), "--key", "17"]);
    let lines = timeline_lines(&String::from_utf8_lossy(&output.stdout));
    let delivery = lines.iter().find(|line| line.contains(" delivery  ")).expect("a folded delivery");
    assert!(delivery.contains("key 17's at claims.public.claims-"), "{delivery}");
}

#[test]
fn timeline_flags_say_what_is_wrong() {
    let path = scenario("hubs-backfill");
    for (args, message) in [
        (["--only", "pg1,kafak"], "`kafak` is not a process; did you mean `kafka`?"),
        (["--only", "pg1,,sink"], "an empty process name"),
        (["--key", "public.hub:7"], "`public.hub` is not a table of the scenario; did you mean `public.hubs`?"),
        (["--key", "seven"], "`seven` is not a key"),
    ] {
        let output = handoff(&["run", &path, args[0], args[1]]);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let error = String::from_utf8_lossy(&output.stderr);
        assert!(error.contains(message), "{args:?}: {error}");
    }
}

/// A replay hint is a command that works as printed: the README's `cargo run --release --` form
/// when Cargo started the binary, the path it was started by otherwise.
#[test]
fn replay_hints_start_the_binary_the_way_it_was_started() {
    let path = scenario("claims-restart-during-snapshot");
    let hint = |output: &Output| {
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        text.lines()
            .find(|line| line.trim_start().contains(" run ") && line.contains("--seed 3"))
            .map(str::trim)
            .map(str::to_owned)
    };
    let args = ["sweep", path.as_str(), "--start", "3", "--seeds", "1", "--jobs", "1"];
    let via_cargo = handoff(&args);
    assert_eq!(hint(&via_cargo), Some(format!("cargo run --release -- run {path} --seed 3")));
    let binary = env!("CARGO_BIN_EXE_handoff");
    let direct = Command::new(binary).args(args).env_remove("CARGO").output().expect("the binary runs");
    assert_eq!(hint(&direct), Some(format!("{binary} run {path} --seed 3")));
    // What it prints runs: the hint's arguments replay the seed.
    let replayed = Command::new(binary).args(["run", &path, "--seed", "3"]).env_remove("CARGO").output().expect("runs");
    assert_eq!(replayed.status.code(), Some(0));
}

/// Every command's `--help` lists its exit statuses and describes every argument and option.
#[test]
fn every_help_lists_exit_statuses_and_describes_every_option() {
    for command in ["", "run", "drills", "drill", "replay", "sweep", "shrink", "check", "conform", "merge"] {
        let args: Vec<&str> = if command.is_empty() { vec!["--help"] } else { vec![command, "--help"] };
        let output = handoff(&args);
        assert_eq!(output.status.code(), Some(0), "{command} --help");
        let help = String::from_utf8_lossy(&output.stdout).to_string();
        assert!(help.contains("\nExit status: "), "`handoff {command} --help` lists no exit status:\n{help}");
        let mut in_list = false;
        for line in help.lines() {
            if line.ends_with(':') && !line.starts_with(' ') {
                in_list = matches!(line, "Arguments:" | "Options:" | "Commands:");
                continue;
            }
            let item = line.trim_start();
            if !in_list || item.is_empty() || line.len() - item.len() < 2 {
                continue;
            }
            // `  --seed <SEED>   The run's seed …`: a description after the name.
            let described = item.split_once("  ").is_some_and(|(_, rest)| !rest.trim().is_empty());
            assert!(described, "`handoff {command} --help`: `{item}` has no description");
        }
    }
}
