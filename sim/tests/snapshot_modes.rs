//! Debezium's `snapshot.mode`s as the code behaves (`PostgresConnectorConfig.SnapshotMode`,
//! `PostgresConnection.validateLogPosition` and `fetchReplicationSlotInfo`).
#![cfg(madsim)]

mod common;

use handoff_models::core::observe::{Observation, SnapshotCase};
use handoff_models::scenario::spec::Invariant::{I1, I2};

fn snapshots(result: &handoff_sim::timed::runner::RunResult) -> Vec<SnapshotCase> {
    result
        .trace
        .iter()
        .filter_map(|event| match event.observation {
            Observation::SnapshotStarted { case, .. } => Some(case),
            _ => None,
        })
        .collect()
}

fn stop_and_resume(mode: &str) -> String {
    common::claims(
        "stop and resume",
        50,
        &format!("\"snapshot.mode\" = \"{mode}\""),
        r#"
    [sink]
    apply = "version-guard"
    [workload]
    end_ms = 60000
    updates_per_second = 1
    [[workload.script]]
    at = "35s"
    delete = 7
    [[fault]]
    at = "30s"
    action = "stop-connector"
    resume_after_ms = 10000
    [prediction]
    verdict = "holds"
    why = "-"
"#,
    )
}

#[test]
fn initial_snapshots_once_and_resumes_streaming_after_a_stop() {
    let result = common::run(&common::load_text(&stop_and_resume("initial")), 1);
    assert_eq!(snapshots(&result), vec![SnapshotCase::SlotCreatedNow]);
    assert_eq!(result.violated(), vec![], "the delete during the stop is streamed on resume");
}

#[test]
fn always_snapshots_at_every_start_and_cannot_retract_a_delete_made_while_stopped() {
    let result = common::run(&common::load_text(&stop_and_resume("always")), 1);
    assert_eq!(snapshots(&result), vec![SnapshotCase::SlotCreatedNow, SnapshotCase::SlotExisted]);
    // The second snapshot streams from pg_current_wal_lsn() read at its start, past the delete.
    assert_eq!(result.violated(), vec![I2], "{:?}", result.findings);
}

#[test]
fn no_data_never_snapshots_so_the_rows_loaded_before_never_arrive() {
    let result = common::run(&common::load_text(&stop_and_resume("no_data")), 1);
    assert_eq!(snapshots(&result), vec![]);
    let gaps: Vec<_> = result.findings.iter().filter(|f| f.invariant == I1).collect();
    assert!(!gaps.is_empty());
    assert!(gaps.iter().any(|f| f.detail.contains("loaded before the run")), "{:?}", gaps);
}

#[test]
fn when_needed_resnapshots_when_the_slot_is_gone_after_a_failover() {
    let (spec, seed) =
        common::load("claims-failover", &["failover.gate=off", "connector.\"snapshot.mode\"=when_needed"]);
    let result = common::run(&spec, seed);
    assert_eq!(result.violated(), vec![]);
    assert!(result.boundary.reached, "{}", result.boundary.reason);
    assert_eq!(snapshots(&result), vec![SnapshotCase::SlotCreatedNow, SnapshotCase::SlotCreatedNow]);
    let checks: Vec<bool> = result
        .trace
        .iter()
        .filter_map(|event| match event.observation {
            Observation::LogPositionChecked { available, .. } => Some(available),
            _ => None,
        })
        .collect();
    assert_eq!(checks, vec![false], "the stored lsn_proc has no slot behind it: the offset is dropped");
}

#[test]
fn always_fails_after_a_failover_although_the_documentation_recommends_it() {
    let (spec, seed) = common::load("claims-failover", &["failover.gate=off", "connector.\"snapshot.mode\"=always"]);
    let result = common::run(&spec, seed);
    assert!(!result.boundary.reached);
    assert!(result.boundary.reason.contains("FAILED"), "{}", result.boundary.reason);
}
