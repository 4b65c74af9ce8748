//! The health signals (game-day drill 7) as `run --json` gives them (`health`, docs/json.md):
//! what a dashboard shows of a connector that is RUNNING and delivering nothing, and of one kept
//! alive by a heartbeat. Each test reads the model's behaviour from a bundled scenario.
#![cfg(madsim)]

use serde_json::Value;
use std::process::Command;

fn run_json(scenario: &str) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_handoff"))
        .args(["run", &format!("scenarios/{scenario}.toml"), "--json"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("the handoff binary runs");
    assert!(
        matches!(output.status.code(), Some(0)),
        "{scenario}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("one JSON object")
}

/// The first connector's signals at each health sample: (at_ms, the signals).
fn first_connector(report: &Value) -> Vec<(u64, Value)> {
    report["health"]["samples"]
        .as_array()
        .expect("health samples")
        .iter()
        .map(|sample| (sample["at_ms"].as_u64().expect("at_ms"), sample["connectors"][0].clone()))
        .collect()
}

fn int(value: &Value, field: &str) -> i64 {
    value[field].as_i64().unwrap_or_else(|| panic!("{field} in {value}"))
}

/// The quiet database (claims-quiet-database): after its last insert at t=9s nothing the
/// connector captures commits. While its first task runs, `MilliSecondsBehindSource` stays at the
/// last event's small lag (it is set by events, not by the clock) and only
/// `MilliSecondsSinceLastEvent` grows; the in-process restart after the slot is lost starts the
/// metrics afresh (-1, unknown), and I11 cites them as they stood at the end.
#[test]
fn a_quiet_database_looks_well_by_its_lag_and_not_by_the_time_since_its_last_event() {
    let report = run_json("claims-quiet-database");
    let samples = first_connector(&report);
    // The first task's streaming stretch: RUNNING with a known lag.
    let streaming: Vec<&(u64, Value)> = samples
        .iter()
        .filter(|(at, signals)| *at >= 15_000 && signals["task_state"] == "RUNNING")
        .take_while(|(_, signals)| int(signals, "milliseconds_behind_source") >= 0)
        .collect();
    assert!(streaming.len() > 60, "a minute of streaming after the last insert: {streaming:?}");
    let lag = int(&streaming[0].1, "milliseconds_behind_source");
    assert!((0..1_000).contains(&lag), "the last event's lag is small: {lag}");
    for pair in streaming.windows(2) {
        let (earlier, later) = (&pair[0].1, &pair[1].1);
        assert_eq!(int(later, "milliseconds_behind_source"), lag, "the lag does not grow while nothing arrives");
        assert_eq!(
            int(later, "milliseconds_since_last_event") - int(earlier, "milliseconds_since_last_event"),
            (pair[1].0 - pair[0].0) as i64,
            "the time since the last event grows with the clock"
        );
    }
    assert!(int(&streaming.last().expect("a sample").1, "milliseconds_since_last_event") > 60_000);
    // At the end: a restarted task with no event (-1), its slot lost, RUNNING: I11, citing them.
    let (end_ms, end) = samples.last().expect("a last sample");
    assert_eq!(*end_ms, report["stats"]["sim_time_ms"].as_u64().expect("sim_time_ms"));
    assert_eq!((end["connector_state"].as_str(), end["task_state"].as_str()), (Some("RUNNING"), Some("RUNNING")));
    assert_eq!(int(end, "milliseconds_behind_source"), -1);
    assert_eq!(end["slot"]["wal_status"], "lost");
    let i11 = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|finding| finding["invariant"] == "I11")
        .expect("an I11 finding");
    let detail = i11["detail"].as_str().expect("detail");
    for cited in [
        "connector RUNNING, task RUNNING",
        "MilliSecondsBehindSource -1 (unknown: no event since the task started)",
        "MilliSecondsSinceLastEvent -1",
        "no heartbeat (heartbeat.interval.ms=0)",
        "slot \"debezium\" on pg1 inactive, wal_status lost",
    ] {
        assert!(detail.contains(cited), "I11 does not cite {cited:?}: {detail}");
    }
}

/// The message heartbeat (claims-quiet-database-message-heartbeat-restart): its heartbeat
/// records reach the heartbeat topic every 10 s, but a logical decoding message is no event to
/// the streaming metrics, so the time since the last event grows while the heartbeat stays fresh.
#[test]
fn a_message_heartbeat_is_fresh_while_the_time_since_the_last_event_grows() {
    let report = run_json("claims-quiet-database-message-heartbeat-restart");
    let samples = first_connector(&report);
    let fresh_and_quiet = samples.iter().find(|(_, signals)| {
        signals["heartbeat_age_ms"].as_u64().is_some_and(|age| age <= 11_000)
            && int(signals, "milliseconds_since_last_event") > 30_000
    });
    assert!(
        fresh_and_quiet.is_some(),
        "no moment with a fresh heartbeat and no event for 30 s: {:?}",
        samples.iter().step_by(10).collect::<Vec<_>>()
    );
    // Once the slot is lost, no heartbeat is sent: its age grows to the end.
    let (_, end) = samples.last().expect("a last sample");
    assert!(end["heartbeat_age_ms"].as_u64().is_some_and(|age| age > 300_000), "{end}");
    assert_eq!(end["slot"]["wal_status"], "lost");
}

/// The heartbeat action query (claims-quiet-database-heartbeat-fix) writes a captured row every
/// `heartbeat.interval.ms` (10 s): every 10 s an event, so the time since the last one never
/// passes the interval and a sample or two; the slot stays `reserved`.
#[test]
fn a_heartbeat_action_query_keeps_events_coming() {
    let report = run_json("claims-quiet-database-heartbeat-fix");
    let samples = first_connector(&report);
    let later: Vec<&(u64, Value)> = samples.iter().filter(|(at, _)| *at >= 20_000).collect();
    assert!(later.len() > 100, "{later:?}");
    for (at, signals) in later {
        let since = int(signals, "milliseconds_since_last_event");
        assert!((0..=11_000).contains(&since), "at {at}: {signals}");
        assert!(signals["heartbeat_age_ms"].as_u64().is_some_and(|age| age <= 11_000), "at {at}: {signals}");
        assert_eq!(signals["slot"]["wal_status"], "reserved", "at {at}: {signals}");
    }
}

/// A series every `interval_ms` from 0 to the end, the end included, for every connector.
#[test]
fn the_series_is_regular_and_ends_at_the_end() {
    let report = run_json("two-workers-one-leaves");
    let interval = report["health"]["interval_ms"].as_u64().expect("interval_ms");
    let samples = report["health"]["samples"].as_array().expect("samples");
    let times: Vec<u64> = samples.iter().map(|sample| sample["at_ms"].as_u64().expect("at_ms")).collect();
    let end = report["stats"]["sim_time_ms"].as_u64().expect("sim_time_ms");
    assert_eq!(times.first(), Some(&0));
    assert_eq!(times.last(), Some(&end));
    for pair in times.windows(2) {
        assert!(pair[1] - pair[0] == interval || pair[1] == end, "{pair:?} with interval {interval}");
    }
    let connectors = samples[0]["connectors"].as_array().expect("connectors").len();
    assert!(samples.iter().all(|sample| sample["connectors"].as_array().is_some_and(|c| c.len() == connectors)));
}
