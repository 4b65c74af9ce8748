//! What a run can honour: the loader refuses what lies outside the documented limits
//! (docs/scenario-format.md, "Limits") with a message naming the field and both ends of its
//! range, and a run never passes its horizon or its trace budget silently.
//!
//! The memory a run holds is measured by its trace items ([`Observation::trace_items`]): one per
//! event of the trace, plus one per Kafka record, row change, sink apply, removed document or
//! position the event carries. Every record the models hold came through the trace, so a run's
//! memory grows with the count, and unlike a process's resident memory the count is
//! deterministic: the same scenario and seed give the same count on every machine, and the
//! property below can assert it exactly.
#![cfg(madsim)]

mod common;

use handoff_models::core::limits;
use handoff_models::scenario::spec::Invariant;
use handoff_sim::scenario::{self, load_str};
use handoff_sim::timed::runner::{self, RunLimit, RunOptions, RunResult};
use proptest::prelude::*;
use std::path::PathBuf;
use std::process::{Command, Output};

fn handoff(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_handoff")).args(args).output().expect("the handoff binary runs")
}

fn scenario_path(name: &str) -> String {
    common::scenario_path(name).display().to_string()
}

/// A scratch directory of this test process.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("handoff-bounds-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// `handoff run SCENARIO --set ARG` exits 2 before running anything, with a message on the
/// `--set` argument that names `field` and contains every phrase.
#[track_caller]
fn refused(set: &str, field: &str, phrases: &[&str]) {
    let output = handoff(&["run", &scenario_path("claims-restart-during-snapshot"), "--set", set]);
    let error = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "--set {set}: {error}");
    assert!(output.stdout.is_empty(), "--set {set}: nothing ran");
    assert!(error.starts_with(&format!("error: --set {set}: {field}: ")), "--set {set}: {error}");
    for phrase in phrases {
        assert!(error.contains(phrase), "--set {set}: {phrase:?} missing in {error}");
    }
}

// ---------------------------------------------------------------------------------------------
// The reproducers: each hung, ran out of memory or told another story; each is now
// refused at load time, naming the field and the bound.

/// The message of a time past the default horizon.
const PAST_THE_HORIZON: &str = "is out of range; expected 0s to 1h, the run's horizon (the default; \
                                acceptance.horizon_ms may raise it to 86400000, 1d)";

#[test]
fn absolute_triggers_far_in_the_future_are_refused() {
    for at in ["100000d", "18446744073709551615ms", "9223372036854775807ms", "99999999999999999999999ms"] {
        refused(&format!("fault[0].at=\"{at}\""), "fault[0].at", &[&format!("`{at}` {PAST_THE_HORIZON}")]);
    }
    refused(
        "workload.script[0].at=\"18446744073709551615ms\"",
        "workload.script[0].at",
        &[&format!("`18446744073709551615ms` {PAST_THE_HORIZON}")],
    );
    // One millisecond past a horizon the scenario gives.
    let output = handoff(&[
        "run",
        &scenario_path("claims-restart-during-snapshot"),
        "--set",
        "acceptance.horizon_ms=600000",
        "--set",
        "fault[0].at=\"600001ms\"",
    ]);
    let error = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{error}");
    assert!(
        error.contains(
            "fault[0].at: `600001ms` is out of range; expected 0s to 10min, the run's horizon (acceptance.horizon_ms \
             = 600000)"
        ),
        "{error}"
    );
}

#[test]
fn a_moment_delay_that_wrapped_around_is_refused() {
    // It used to wrap to the moment itself: the run exited 0 with another story.
    refused(
        "fault[0].at=\"streaming-started + 18446744073709551615ms\"",
        "fault[0].at",
        &[&format!("the delay `+ 18446744073709551615ms` {PAST_THE_HORIZON}")],
    );
}

#[test]
fn delays_and_start_times_of_i64_max_are_refused() {
    let horizon = "expected 0 to 3600000, the run's horizon (the default; acceptance.horizon_ms may raise it";
    refused("fault[0].restart_after_ms=9223372036854775807", "fault[0].restart_after_ms", &[horizon]);
    refused("connect.start_at_ms=9223372036854775807", "connect.start_at_ms", &[horizon]);
    refused("workload.end_ms=9223372036854775807", "workload.end_ms", &[horizon]);
}

#[test]
fn rows_rates_and_heartbeats_beyond_what_a_run_holds_are_refused() {
    refused(
        "table[0].rows=4294967295",
        "table[0].rows",
        &["4294967295 is out of range; expected 0 to 1000000: at most 1000000 rows in all tables"],
    );
    refused(
        "workload.inserts_per_second=1e9",
        "workload.inserts_per_second",
        &["makes 60000000000 transactions", "expected 0 to 1000000 transactions in a run"],
    );
    refused(
        "connector.\"heartbeat.interval.ms\"=1",
        "connector.\"heartbeat.interval.ms\"",
        &["makes 3600000 heartbeats", "expected 0 (off) or 4 to 86400000"],
    );
}

#[test]
fn a_conformance_transaction_of_u32_max_inserts_is_refused() {
    let dir = scratch("conform");
    let path = dir.join("huge.toml");
    std::fs::write(&path, "name = \"huge\"\n[[step]]\ntransaction = { name = \"t1\", inserts = 4294967295 }\n")
        .expect("written");
    let output = handoff(&["conform", path.to_str().expect("a path")]);
    let error = String::from_utf8_lossy(&output.stderr);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(output.status.code(), Some(2), "{error}");
    assert!(
        error.contains(
            "step 1: transaction t1: inserts + updates + deletes = 4294967295 is out of range; expected 1 to 100000"
        ),
        "{error}"
    );
}

#[test]
fn invalid_utf8_is_refused_with_its_line_column_and_byte_offset() {
    let dir = scratch("utf8");
    let text = std::fs::read(common::scenario_path("claims-failover")).expect("the scenario");
    // A stray byte where line 3 starts: `é` (two bytes in UTF-8) cut to its first byte.
    let third_line = text.iter().enumerate().filter(|(_, byte)| **byte == b'\n').nth(1).map(|(i, _)| i + 1);
    let offset = third_line.expect("three lines");
    let mut broken = text.clone();
    broken.splice(offset..offset, [b'a', b'b', 0xC3]);
    let scenario = dir.join("broken.toml");
    std::fs::write(&scenario, &broken).expect("written");
    let expected =
        format!("broken.toml:3:3: invalid UTF-8 at byte offset {} (0xC3); the file must be UTF-8 text", offset + 2);
    let loaded = scenario::load(&scenario, &[]).expect_err("not UTF-8");
    assert!(loaded.message.ends_with(&expected), "{}", loaded.message);
    let output = handoff(&["run", scenario.to_str().expect("a path")]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains(&expected));
    // A conformance workload: its first byte.
    let workload = dir.join("workload.toml");
    std::fs::write(&workload, [0xFFu8, b'\n']).expect("written");
    let output = handoff(&["conform", workload.to_str().expect("a path")]);
    let error = String::from_utf8_lossy(&output.stderr).into_owned();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(output.status.code(), Some(2), "{error}");
    assert!(error.contains("workload.toml:1:1: invalid UTF-8 at byte offset 0 (0xFF)"), "{error}");
}

// ---------------------------------------------------------------------------------------------
// The limits of a run, as it runs.

#[test]
fn a_run_that_reaches_its_horizon_ends_there_and_says_so() {
    // The slot-cap drill's connector retries for half an hour; a 5-minute horizon cuts it.
    let (spec, seed) = common::load("claims-slot-cap-stopped-connector", &["acceptance.horizon_ms=300000"]);
    let result = common::run(&spec, seed);
    assert_eq!(result.limit, Some(RunLimit::Horizon { horizon_ms: 300_000 }));
    assert_eq!(result.sim_time_ms, 300_000, "it ends at the horizon exactly");
    assert!(!result.boundary.reached);
    assert!(
        result.boundary.reason.starts_with("the run reached its horizon (t=300.000s"),
        "{}",
        result.boundary.reason
    );
    assert!(!result.prediction_held, "a cut run decides nothing");
    assert!(
        result.findings.iter().all(|finding| finding.invariant != Invariant::I11),
        "the I11 the full run finds is not claimed at a cut"
    );
    let timeline = handoff_sim::timed::report::timeline(&spec, &result);
    let last = timeline.last().expect("a timeline");
    assert!(last.starts_with("t=300.000s harness   RUN ENDED: it reached its horizon"), "{last}");
    // Without the horizon the same run reaches its acceptance timeout, undisturbed.
    let (spec, seed) = common::load("claims-slot-cap-stopped-connector", &[]);
    let full = common::run(&spec, seed);
    assert_eq!((full.limit, full.sim_time_ms), (None, 719_000));
    assert!(full.prediction_held);
}

#[test]
fn a_moment_delay_that_carries_past_the_horizon_leaves_the_fault_listed() {
    // The snapshot completes within seconds; 3599 s later is past the one-hour horizon.
    let (spec, seed) = common::load("claims-restart-during-snapshot", &["fault[0].at=\"snapshot-completed + 3599s\""]);
    let result = common::run(&spec, seed);
    assert_eq!(result.limit, Some(RunLimit::Horizon { horizon_ms: limits::DEFAULT_HORIZON_MS }));
    assert_eq!(result.sim_time_ms, limits::DEFAULT_HORIZON_MS);
    let due: Vec<&String> = result.unfired.iter().filter(|line| line.contains("after the run ended")).collect();
    assert_eq!(due.len(), 1, "{:?}", result.unfired);
    assert!(due[0].starts_with("kill-connect-worker (restart after 10000 ms) due at t=36"), "{}", due[0]);
}

#[test]
fn a_run_that_passes_its_trace_budget_ends_at_that_instant() {
    let (spec, seed) = common::load("claims-restart-during-snapshot", &[]);
    let options = RunOptions { max_trace_items: 1_000, ..RunOptions::FULL };
    let result = runner::run_with(&spec, seed, options);
    let Some(RunLimit::TraceBudget { items, budget }) = result.limit else {
        panic!("expected the trace budget, got {:?}", result.limit)
    };
    assert_eq!((items, budget), (result.trace_items, 1_000));
    assert_budget_kept(&result, 1_000);
    assert!(result.boundary.reason.contains("its trace budget"), "{}", result.boundary.reason);
    assert!(!result.prediction_held);
    // The full run, for comparison, holds four times as many.
    assert!(common::run(&spec, seed).trace_items > 4_000);
}

#[test]
fn the_cli_reports_a_cut_run_as_undecided() {
    let path = scenario_path("claims-slot-cap-stopped-connector");
    let output = handoff(&["run", &path, "--set", "acceptance.horizon_ms=300000", "--json"]);
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    assert_eq!(report["limit"]["kind"], "horizon");
    assert_eq!(report["limit"]["horizon_ms"], 300_000);
    assert_eq!(report["stats"]["sim_time_ms"], 300_000);
    assert_eq!(report["stats"]["horizon_ms"], 300_000);
    assert!(report["stats"]["trace_items"].as_u64().is_some_and(|items| items > 0));
    assert_eq!(report["prediction"]["held"], false);
    let output = handoff(&["run", &path, "--set", "acceptance.horizon_ms=300000"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("harness   RUN ENDED: it reached its horizon (t=300.000s"), "{text}");
    assert!(text.contains("\nprediction UNDECIDED: the run reached its horizon"), "{text}");
    // A sweep does not pass a cut run silently either.
    let output = handoff(&["sweep", &path, "--seeds", "2", "--jobs", "1", "--set", "acceptance.horizon_ms=300000"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("2 run(s) UNDECIDED: cut by a limit"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// Property: every scenario within the limits loads, and its run ends within its horizon and
// keeps its trace budget.

/// Asserts what a run's trace items promise: they are the sum over its trace, and they stay
/// within `budget` unless the run ended at the very instant its trace passed it.
#[track_caller]
fn assert_budget_kept(result: &RunResult, budget: u64) {
    let mut sum = 0u64;
    let mut passed_at = None;
    for event in &result.trace {
        sum += event.observation.trace_items();
        if sum > budget && passed_at.is_none() {
            passed_at = Some(event.at);
        }
        if let Some(at) = passed_at {
            assert_eq!(event.at, at, "an event after the instant the budget was passed");
        }
    }
    assert_eq!(sum, result.trace_items, "the count is the sum over the trace");
    match passed_at {
        None => assert!(!matches!(result.limit, Some(RunLimit::TraceBudget { .. })), "{:?}", result.limit),
        Some(at) => {
            assert!(matches!(result.limit, Some(RunLimit::TraceBudget { .. })), "{:?}", result.limit);
            assert_eq!(result.sim_time_ms, at.ms(), "the run ends at the instant it passed its budget");
        }
    }
}

/// A trigger: an absolute time, or a moment's occurrence and a delay, within `horizon_ms`.
fn trigger(horizon_ms: u64) -> impl Strategy<Value = String> {
    let moments =
        vec!["snapshot-scan-started", "snapshot-completed", "streaming-started", "change-acked", "task-started"];
    prop_oneof![
        (0..=horizon_ms).prop_map(|at_ms| format!("{at_ms}ms")),
        Just(format!("{horizon_ms}ms")),
        (proptest::sample::select(moments), 1..=3u32, prop_oneof![Just(0), 0..=horizon_ms])
            .prop_map(|(moment, occurrence, plus_ms)| format!("{moment}#{occurrence} + {plus_ms}ms")),
    ]
}

/// A fault's table body after `at`, its delays within `horizon_ms`.
fn fault(horizon_ms: u64) -> impl Strategy<Value = String> {
    let delay = prop_oneof![(1_000..=30_000u64).prop_map(move |ms| ms.min(horizon_ms)), 0..=horizon_ms];
    let links = vec![("connect", "postgres"), ("connect", "kafka"), ("sink", "kafka")];
    prop_oneof![
        proptest::option::of(delay.clone()).prop_map(|after| match after {
            Some(ms) => format!("action = \"kill-connect-worker\"\nrestart_after_ms = {ms}\n"),
            None => "action = \"kill-connect-worker\"\n".to_owned(),
        }),
        delay.clone().prop_map(|ms| format!("action = \"kill-connector-task\"\nrestart_after_ms = {ms}\n")),
        delay.clone().prop_map(|ms| format!("action = \"stop-connector\"\nresume_after_ms = {ms}\n")),
        delay.clone().prop_map(|ms| format!("action = \"crash-postgres\"\nrestart_after_ms = {ms}\n")),
        (proptest::sample::select(links), 1..=horizon_ms)
            .prop_map(|((a, b), ms)| format!("action = \"clog\"\nbetween = [\"{a}\", \"{b}\"]\nduration_ms = {ms}\n")),
        (1..=64u64).prop_map(|mb| format!("action = \"wal-burst\"\nbytes = \"{mb}MB\"\n")),
        Just("action = \"rebuild-connector\"\n".to_owned()),
        Just("action = \"recreate-slot\"\n".to_owned()),
        Just("action = \"checkpoint\"\n".to_owned()),
    ]
}

prop_compose! {
    /// A scenario file within the documented limits. Times span them whole (horizons up to a
    /// day, triggers and delays anywhere within the horizon, timer settings from their least);
    /// sizes are scaled down to what a debug build runs in a second or two (up to 3,000 rows
    /// and 3,000 background transactions), and the trace budget with them.
    fn within_limits()(horizon_ms in prop_oneof![limits::MIN_HORIZON_MS..=600_000, limits::MIN_HORIZON_MS..=limits::MAX_HORIZON_MS])(
        horizon_ms in Just(horizon_ms),
        rows in 0..=3_000u32,
        fetch in prop_oneof![1..=50u32, 50..=20_000u32],
        scan in 1..=1_000_000i64,
        poll_ms in prop_oneof![1..=1_000u64, 1..=limits::MAX_SETTING_MS],
        flush_ms in prop_oneof![1..=120_000u64, 1..=limits::MAX_SETTING_MS],
        heartbeat_ms in prop_oneof![Just(0u64), horizon_ms.div_ceil(3_000)..=limits::MAX_SETTING_MS],
        start_at_ms in prop_oneof![Just(0u64), 0..=horizon_ms],
        (window_start, window_length) in (0..=horizon_ms, 1..=horizon_ms),
        transactions in 0..=3_000u64,
        timeout_ms in prop_oneof![0..=600_000u64, 0..=limits::MAX_HORIZON_MS],
        scripts in proptest::collection::vec((trigger(horizon_ms), 1..=3_000i64, 0..3u8), 0..4),
        faults in proptest::collection::vec((trigger(horizon_ms), fault(horizon_ms)), 0..4),
        profile in proptest::option::of((1..=5u32, 0..=horizon_ms, 0..=horizon_ms)),
        sink in proptest::sample::select(vec!["version-guard", "naive-upsert", "snapshot-epoch"]),
        mode in proptest::sample::select(vec!["initial", "no_data", "when_needed", "always"]),
    ) -> String {
        let end_ms = (window_start + window_length).min(horizon_ms);
        let start_ms = end_ms - window_length.min(end_ms);
        let seconds = (end_ms - start_ms) as f64 / 1000.0;
        let mut text = format!(
            "name = \"within-limits\"\n\
             [postgres]\nscan_rows_per_second = {scan}\n\
             [[table]]\nname = \"public.claims\"\nrows = {rows}\n\
             [connector]\n\"topic.prefix\" = \"claims\"\n\"plugin.name\" = \"pgoutput\"\n\"snapshot.mode\" = \"{mode}\"\n\
             \"snapshot.fetch.size\" = {fetch}\n\"poll.interval.ms\" = {poll_ms}\n\"heartbeat.interval.ms\" = {heartbeat_ms}\n\
             [connect]\n\"offset.flush.interval.ms\" = {flush_ms}\nstart_at_ms = {start_at_ms}\n\
             [sink]\napply = \"{sink}\"\n\
             [workload]\nstart_ms = {start_ms}\nend_ms = {end_ms}\ninserts_per_second = {:?}\nupdates_per_second = {:?}\n",
            transactions as f64 / 2.0 / seconds.max(0.001),
            transactions as f64 / 2.0 / seconds.max(0.001),
        );
        // Steps the loader takes: an insert of a key past the loaded ones, an update or delete of
        // a loaded row.
        let loaded = i64::from(rows);
        for (at, key, op) in scripts {
            let (op, key) = match op {
                1 | 2 if loaded > 0 => (["update", "delete"][usize::from(op) - 1], (key - 1) % loaded + 1),
                _ => ("insert", key + loaded),
            };
            text.push_str(&format!("[[workload.script]]\nat = \"{at}\"\n{op} = {key}\n"));
        }
        for (at, action) in faults {
            text.push_str(&format!("[[fault]]\nat = \"{at}\"\n{action}"));
        }
        if let Some((max_faults, a, b)) = profile {
            text.push_str(&format!(
                "[fault_profile]\nkinds = [\"kill-connect-worker\", \"stop-connector\", \"crash-postgres\", \"clog\", \
                 \"rebuild-connector\"]\nmax_faults = {max_faults}\nwindow = [\"{}ms\", \"{}ms\"]\n\
                 moments = [\"snapshot-completed\", \"change-acked\"]\n",
                a.min(b),
                a.max(b)
            ));
        }
        text.push_str(&format!(
            "[acceptance]\nhorizon_ms = {horizon_ms}\ntimeout_ms = {timeout_ms}\n\
             [prediction]\nverdict = \"holds\"\nwhy = \"a generated scenario\"\n"
        ));
        text
    }
}

/// The property test's trace budget, scaled down with its sizes. (In a sample of 100 cases, 19
/// runs reached their boundary, 73 their horizon, 8 this budget: triggers anywhere up to the
/// horizon keep many runs going until it.)
const TEST_BUDGET: u64 = 20_000;

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_run_within_the_limits_ends_within_its_horizon_and_budget(text in within_limits(), seed in 0..1_000u64) {
        let loaded = load_str("within-limits.toml", &text, &[])
            .unwrap_or_else(|error| panic!("a scenario within the limits does not load: {error}\n{text}"));
        let spec = loaded.spec;
        let horizon_ms = spec.acceptance.horizon_ms;
        let options = RunOptions { max_trace_items: TEST_BUDGET, ..RunOptions::FULL };
        let result = runner::run_with(&spec, seed, options);
        prop_assert!(result.sim_time_ms <= horizon_ms, "ended at {} past {horizon_ms}\n{text}", result.sim_time_ms);
        if result.limit == Some(RunLimit::Horizon { horizon_ms }) {
            prop_assert_eq!(result.sim_time_ms, horizon_ms);
        }
        assert_budget_kept(&result, TEST_BUDGET);
        // The generated faults stay within the horizon as the explicit ones must.
        for fault in &result.schedule {
            let time = fault.trigger.ms();
            let delay = fault.action.delay_ms().unwrap_or(0);
            prop_assert!(time <= horizon_ms && delay <= horizon_ms, "{fault:?} past {horizon_ms}");
        }
        // A run that saved as a scenario loads again, within the limits.
        let saved = scenario::to_toml(&spec, loaded.seed);
        prop_assert!(saved.is_ok(), "{:?}", saved);
    }
}

// ---------------------------------------------------------------------------------------------
// Property: every value out of the limits exits 2, naming the field and the bound.

/// A field, a value, and what the message must say.
fn case(path: &str, value: String, bound: &str) -> (String, String, String) {
    (path.to_owned(), value, bound.to_owned())
}

/// A field held to a range, a value out of it, and what the message must say.
fn out_of_bounds() -> impl Strategy<Value = (String, String, String)> {
    let past = |low: u64| prop_oneof![low..=low + 1_000, low..=i64::MAX as u64, Just(u64::MAX)];
    let horizon = limits::DEFAULT_HORIZON_MS;
    let day = limits::MAX_SETTING_MS;
    prop_oneof![
        past(horizon + 1).prop_map(move |ms| case(
            "fault[0].at",
            format!("\"{ms}ms\""),
            "expected 0s to 1h, the run's horizon"
        )),
        past(horizon + 1).prop_map(move |ms| case(
            "workload.script[1].at",
            format!("\"snapshot-scan-started + {ms}ms\""),
            "expected 0s to 1h, the run's horizon"
        )),
        past(horizon + 1).prop_map(move |ms| case(
            "fault_profile.window",
            format!("[\"0s\", \"{ms}ms\"]"),
            "expected 0s to 1h, the run's horizon"
        )),
        past(horizon + 1).prop_map(move |ms| case(
            "fault[0].restart_after_ms",
            ms.to_string(),
            "expected 0 to 3600000, the run's horizon"
        )),
        past(horizon + 1).prop_map(move |ms| case(
            "connect.start_at_ms",
            ms.to_string(),
            "expected 0 to 3600000, the run's horizon"
        )),
        past(horizon + 1).prop_map(move |ms| case(
            "workload.end_ms",
            ms.to_string(),
            "expected 0 to 3600000, the run's horizon"
        )),
        prop_oneof![0..limits::MIN_HORIZON_MS, past(limits::MAX_HORIZON_MS + 1)].prop_map(move |ms| case(
            "acceptance.horizon_ms",
            ms.to_string(),
            "expected 1000 to 86400000 (1s to 1d)"
        )),
        past(day + 1).prop_map(move |ms| case("acceptance.timeout_ms", ms.to_string(), "expected 0 to 86400000")),
        prop_oneof![Just(0u64), past(day + 1)].prop_map(move |ms| case(
            "connector.\"poll.interval.ms\"",
            ms.to_string(),
            "expected 1 to 86400000 (1d"
        )),
        prop_oneof![Just(0u64), past(day + 1)].prop_map(move |ms| case(
            "connect.\"offset.flush.interval.ms\"",
            ms.to_string(),
            "expected 1 to 86400000 (1d"
        )),
        prop_oneof![Just(0u64), past(day + 1)].prop_map(move |ms| case(
            "sink.\"auto.commit.interval.ms\"",
            ms.to_string(),
            "expected 1 to 86400000 (1d"
        )),
        (1..=3u64).prop_map(move |ms| case(
            "connector.\"heartbeat.interval.ms\"",
            ms.to_string(),
            "expected 0 (off) or 4 to 86400000"
        )),
        past(limits::MAX_ROWS + 1).prop_map(move |rows| case(
            "table[0].rows",
            rows.to_string(),
            "expected 0 to 1000000: at most 1000000 rows"
        )),
        (16_667..=1_000_000_000u64).prop_map(move |rate| case(
            "workload.inserts_per_second",
            rate.to_string(),
            "expected 0 to 1000000 transactions in a run"
        )),
        (1_000_000_001..=u64::MAX).prop_map(move |rate| case(
            "workload.updates_per_second",
            format!("{rate}.0"),
            "is out of range; expected 0 to 1000000000 per second"
        )),
        prop_oneof![Just(0u64), past(1_000_000_001)].prop_map(move |rate| case(
            "postgres.scan_rows_per_second",
            rate.to_string(),
            "expected 1 to 1000000000"
        )),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_value_out_of_the_limits_exits_2_naming_the_field_and_the_bound((path, value, bound) in out_of_bounds()) {
        let set = format!("{path}={value}");
        let output = handoff(&["run", &scenario_path("claims-restart-during-snapshot"), "--set", &set]);
        let error = String::from_utf8_lossy(&output.stderr);
        prop_assert_eq!(output.status.code(), Some(2), "--set {}: {}", set, error);
        prop_assert!(output.stdout.is_empty(), "--set {set}: nothing ran");
        // The field (an array's element for a window), then the bound with both its ends.
        prop_assert!(error.starts_with(&format!("error: --set {set}: {path}")), "--set {set}: {error}");
        prop_assert!(error.contains(&bound), "--set {set}: {bound:?} missing in {error}");
    }
}
