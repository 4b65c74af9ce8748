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
    for section in ["timeline", "findings (1)", "handoff record", "prediction", "HELD", "trace hash"] {
        assert!(text.contains(section), "missing {section}");
    }
    assert!(text.contains("I2 no resurrection, key 42"));
}

#[test]
fn a_prediction_that_does_not_hold_exits_1() {
    let output = handoff(&["run", &scenario("claims-restart-during-snapshot"), "--set", "sink.apply=snapshot-epoch"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stdout).contains("NOT HELD"));
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
fn explore_exits_1_on_an_unpredicted_finding_and_writes_json_lines_that_merge() {
    let dir = std::env::temp_dir().join(format!("handoff-explore-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let scenario = scenario("claims-restart-during-snapshot");
    let mut files = Vec::new();
    for shard in ["1/2", "2/2"] {
        let args = ["explore", &scenario, "--start", "520", "--seeds", "6", "--shard", shard, "--jobs", "1"];
        let output = handoff(&[&args[..], &["--set", "sink.apply=naive-upsert", "--json"]].concat());
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
        assert_eq!(lines.len(), 4, "three runs and a summary");
        assert!(lines[3].get("summary").is_some());
        let path = dir.join(format!("shard-{}.jsonl", &shard[..1]));
        std::fs::write(&path, text).expect("write");
        files.push(path.display().to_string());
    }
    // Seed 525 (in shard 2/2) violates I3, which the scenario does not predict.
    let merged = handoff(&["merge", &files[0], &files[1]]);
    assert_eq!(merged.status.code(), Some(1));
    let text = String::from_utf8_lossy(&merged.stdout);
    assert!(
        text.contains("I3 monotonic apply") && text.contains("NOT PREDICTED") && text.contains("--seed 525"),
        "{text}"
    );
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
fn explore_checks_determinism_when_asked() {
    let scenario = scenario("claims-restart-during-snapshot");
    let args = ["explore", &scenario, "--seeds", "20", "--jobs", "2", "--check-determinism", "--json"];
    let output = handoff(&args);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    let summary: serde_json::Value = serde_json::from_str(text.lines().last().expect("a summary line")).expect("JSON");
    assert_eq!(summary["summary"]["runs"], 20);
    assert!(summary["summary"]["nondeterministic_seed"].is_null(), "{summary}");
}

#[test]
fn explore_and_shrink_refuse_bad_flags() {
    let scenario = scenario("claims-restart-during-snapshot");
    assert_eq!(handoff(&["explore", &scenario, "--shard", "3/2"]).status.code(), Some(2));
    assert_eq!(handoff(&["explore", &scenario, "--shard", "one/two"]).status.code(), Some(2));
    assert_eq!(handoff(&["explore", &scenario, "--jobs", "0"]).status.code(), Some(2));
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
    assert!(text.contains("states    95931 generated, 42650 unique, max depth 40\n"), "{text}");
    let two = handoff(&["check", &scenario("claims-restart-during-snapshot"), "--threads", "2"]);
    assert!(String::from_utf8_lossy(&two.stdout).contains("states    95931 generated, 42650 unique, max depth "));
    assert!(text.contains("I2 no resurrection                       COUNTEREXAMPLE  predicted"), "{text}");
    assert!(text.contains("I1 no gap                                holds\n"), "{text}");
    assert!(text.contains("a crash hits an incomplete snapshot      reached"), "{text}");
    // The §4.4 story: the delete commits after the first snapshot read the row, the worker dies
    // before the completion is stored, the second snapshot (case B) streams past the delete.
    let story = text.split("counterexample: I2 no resurrection").nth(1).expect("a counterexample");
    for step in ["delete claim 3", "> crash connect", "case B, slot already existed", "sink      applied"] {
        assert!(story.contains(step), "{step:?} missing from:\n{story}");
    }
}

#[test]
fn check_reports_json_and_exits_1_when_the_prediction_is_wrong() {
    let path = scenario("claims-restart-during-snapshot");
    let output = handoff(&["check", &path, "--set", "sink.apply=snapshot-epoch", "--json", "--threads", "1"]);
    assert_eq!(output.status.code(), Some(1), "the prediction says I2 is violated; snapshot-epoch holds");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["unique_states"], 42650);
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
    assert!(text.contains("I2 no resurrection                       holds so far  the prediction says it is violated; not found before the cut"), "{text}");
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
    assert!(text.contains("I3 monotonic apply                       COUNTEREXAMPLE  NOT PREDICTED"), "{text}");
    // The whole bound, as predicted: 0 (check_explores_the_bound_and_narrates_the_shortest_counterexample).
}

#[test]
fn a_counterexample_search_cut_short_prints_the_path_the_exploration_found() {
    // Room for the bound's 95,931 states, not for the search after them.
    let path = scenario("claims-restart-during-snapshot");
    let dir = std::env::temp_dir().join(format!("handoff-cut-search-{}", std::process::id()));
    let dir_text = dir.display().to_string();
    let output = handoff(&["check", &path, "--max-states", "100000", "--export", &dir_text]);
    let text = String::from_utf8_lossy(&output.stdout);
    // The bound itself was explored completely, and everything is as predicted.
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("states    95931 generated, 42650 unique") && !text.contains("NOT explored"), "{text}");
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
    let margin = handoff_sim::budget::TIMEOUT_MARGIN_MS as f64 / 1000.0;
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
    // replay follows it and the resurrection is gone, so the prediction fails (exit 1).
    let output = handoff(&["run", &file_text, "--set", "sink.apply=snapshot-epoch"]);
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
