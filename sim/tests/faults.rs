//! The faults of the timed lens do what the real systems do.
#![cfg(madsim)]

mod common;

use handoff_models::components::connect::ConnectorState;
use handoff_models::core::fault::FaultOutcome;
use handoff_models::core::ids::Node;
use handoff_models::core::lsn::Lsn;
use handoff_models::core::observe::Observation;
use handoff_models::scenario::spec::Invariant::I3;

fn replay_text() -> String {
    common::claims(
        "replay",
        100,
        "",
        r#"
    [sink]
    apply = "naive-upsert"
    [workload]
    end_ms = 120000
    updates_per_second = 2
    [[workload.script]]
    at = "62s"
    update = 7
    [[workload.script]]
    at = "64s"
    update = 7
    status = "paid"
    [[fault]]
    at = "70s"
    action = "ACTION"
    DELAY = 5000
    [prediction]
    verdict = "holds"
    why = "-"
"#,
    )
}

fn replay(action: &str, delay: &str) -> handoff_sim::timed::runner::RunResult {
    let text = replay_text().replace("ACTION", action).replace("DELAY", delay);
    common::run(&common::load_text(&text), 1)
}

#[test]
fn a_hard_kill_replays_from_the_last_flushed_offset() {
    let result = replay("kill-connect-worker", "restart_after_ms");
    assert!(result.violated().contains(&I3), "acknowledged but unflushed changes come again: {:?}", result.findings);
}

#[test]
fn a_graceful_stop_commits_its_offsets_and_replays_nothing() {
    let result = replay("stop-connector", "resume_after_ms");
    assert_eq!(result.violated(), vec![], "{:?}", result.findings);
    let stopped = result.trace.iter().any(|e| matches!(e.observation, Observation::TaskStopped { graceful: true }));
    assert!(stopped);
    // After the resume, the task starts from the offset its final commit stored.
    let offsets: Vec<_> = result
        .trace
        .iter()
        .filter_map(|e| match &e.observation {
            Observation::TaskStarted { offset } => Some(*offset),
            _ => None,
        })
        .collect();
    assert_eq!(offsets.len(), 2);
    assert!(offsets[1].is_some_and(|offset| offset.lsn_proc.is_some()));
}

#[test]
fn a_postgres_crash_takes_an_unsaved_confirmed_flush_back_and_the_stream_repeats_safely() {
    // Offsets flushed every 5 s: most confirmations come between two running-xacts records (every
    // 15 s), install no restart candidate, and so are never saved.
    let text = replay_text()
        .replace("ACTION", "crash-postgres")
        .replace("DELAY", "restart_after_ms")
        .replace("naive-upsert", "version-guard")
        .replace("at = \"70s\"", "at = \"63s\"")
        .replace("[sink]", "[connect]\n\"offset.flush.interval.ms\" = 5000\n[sink]");
    let result = common::run(&common::load_text(&text), 1);
    assert_eq!(result.violated(), vec![], "{:?}", result.findings);
    let mut confirmed_before = Lsn::INVALID;
    let mut saved_before = Lsn::INVALID;
    let mut after_restart = None;
    for event in &result.trace {
        match &event.observation {
            Observation::SlotCreated { consistent_point, .. } => saved_before = *consistent_point,
            Observation::SlotSaved { confirmed_flush, .. } => saved_before = *confirmed_flush,
            Observation::SlotConfirmed { to, .. } if after_restart.is_none() => confirmed_before = *to,
            Observation::ServerStarted { slots, .. } if !slots.is_empty() => {
                after_restart = slots.first().map(|(_, lsn)| *lsn);
                break;
            }
            _ => {}
        }
    }
    let after_restart = after_restart.expect("the server restarted with its slot");
    assert_eq!(after_restart, saved_before, "the slot comes back with its last saved position");
    assert!(
        after_restart < confirmed_before,
        "feedback after the last save was lost: {after_restart} vs {confirmed_before}"
    );
    assert!(result.boundary.reached, "{}", result.boundary.reason);
}

#[test]
fn a_resume_sent_while_the_worker_is_down_is_retried_until_the_worker_is_back() {
    // The stop at 70 s asks for a resume at 75 s; the worker is killed at 72 s and comes back at
    // 82 s. The REST call at 75 s is refused and repeated every second, so the task starts again
    // after the worker has restarted and the pipeline reaches acceptance.
    let text = replay_text()
        .replace("ACTION", "stop-connector")
        .replace("DELAY", "resume_after_ms")
        .replace("naive-upsert", "version-guard")
        .replace(
            "[prediction]",
            "[[fault]]\nat = \"72s\"\naction = \"kill-connect-worker\"\nrestart_after_ms = 10000\n[prediction]",
        );
    let result = common::run(&common::load_text(&text), 1);
    assert!(result.boundary.reached, "{}", result.boundary.reason);
    assert_eq!(result.violated(), vec![], "{:?}", result.findings);
    let started: Vec<u64> = result
        .trace
        .iter()
        .filter(|e| matches!(e.observation, Observation::TaskStarted { .. }))
        .map(|e| e.at.ms())
        .collect();
    assert_eq!(started.len(), 2, "{started:?}");
    assert!(started[1] >= 82_000, "the task starts again only once the worker is back: {started:?}");
}

#[test]
fn a_resume_that_comes_while_the_task_is_stopping_starts_it_again_once_stopped() {
    // Kafka is unreachable from 70 s to 80 s, so the stop at 70.5 s waits for its in-flight
    // records; the resume at 71.5 s finds the task still stopping. Kafka Connect starts the task
    // anew once the old one has stopped, and the pipeline catches up.
    let text = replay_text()
        .replace("at = \"70s\"", "at = \"70500ms\"")
        .replace("ACTION", "stop-connector")
        .replace("DELAY", "resume_after_ms")
        .replace("= 5000", "= 1000")
        .replace("naive-upsert", "version-guard")
        .replace(
            "[prediction]",
            "[[fault]]\nat = \"70s\"\naction = \"clog\"\nbetween = [\"connect\", \"kafka\"]\nduration_ms = 10000\n[prediction]",
        );
    let result = common::run(&common::load_text(&text), 1);
    let events: Vec<(u64, &Observation)> = result
        .trace
        .iter()
        .filter(|e| matches!(e.observation, Observation::TaskStarted { .. } | Observation::TaskStopped { .. }))
        .map(|e| (e.at.ms(), &e.observation))
        .collect();
    assert!(
        matches!(events.as_slice(), [_, (stopped, Observation::TaskStopped { graceful: true }), (started, Observation::TaskStarted { .. })] if *stopped > 71_500 && started >= stopped),
        "{events:?}"
    );
    assert!(result.boundary.reached, "{}", result.boundary.reason);
    assert_eq!(result.violated(), vec![], "{:?}", result.findings);
}

#[test]
fn a_resume_sent_to_a_worker_that_never_comes_back_is_given_up_and_the_run_ends() {
    let text = replay_text()
        .replace("ACTION", "stop-connector")
        .replace("DELAY", "resume_after_ms")
        .replace("naive-upsert", "version-guard")
        .replace("[prediction]", "[[fault]]\nat = \"72s\"\naction = \"kill-connect-worker\"\n[prediction]");
    let result = common::run(&common::load_text(&text), 1);
    assert!(!result.boundary.reached, "nothing restarts the worker: {}", result.boundary.reason);
    assert!(result.sim_time_ms < 200_000, "the run ends instead of retrying forever: {}", result.sim_time_ms);
}

#[test]
fn a_task_failure_commits_what_kafka_acknowledged_and_replays_nothing() {
    // The same drill as the hard kill above: a task that throws (the worker lives on) runs its
    // final offset commit (AbstractWorkerSourceTask.execute: finalOffsetCommit(true)), so its
    // restart replays nothing and the naive sink never goes back to an older version.
    let result = replay("kill-connector-task", "restart_after_ms");
    assert_eq!(result.violated(), vec![], "{:?}", result.findings);
    let ends: Vec<&Observation> = result
        .trace
        .iter()
        .map(|e| &e.observation)
        .filter(|o| {
            matches!(
                o,
                Observation::TaskFailing { .. }
                    | Observation::OffsetsCommitted { .. }
                    | Observation::TaskStopped { .. }
            )
        })
        .collect();
    assert!(
        ends.windows(3).any(|w| matches!(
            w,
            [
                Observation::TaskFailing { committing: true },
                Observation::OffsetsCommitted { offset: Some(_) },
                Observation::TaskStopped { graceful: false }
            ]
        )),
        "the failing task commits, then is FAILED: {ends:?}"
    );
    assert!(result.boundary.reached, "{}", result.boundary.reason);
}

#[test]
fn a_task_failure_at_the_completion_marker_stores_it_and_a_worker_crash_does_not() {
    let (spec, seed) = common::load("claims-task-failure-at-completion-marker", &[]);
    let result = common::run(&spec, seed);
    assert!(result.prediction_held, "{:?}", result.findings);
    assert_eq!(result.violated(), vec![]);
    let failed_at = result
        .trace
        .iter()
        .position(|e| matches!(e.observation, Observation::TaskFailing { committing: true }))
        .expect("the task fails");
    let after = &result.trace[failed_at..];
    assert!(
        after.iter().any(|e| matches!(&e.observation,
            Observation::OffsetsCommitted { offset: Some(offset) } if offset.snapshot_completed || offset.lsn_proc.is_some())),
        "the final commit stores the marker's position"
    );
    assert!(
        !after.iter().any(|e| matches!(e.observation, Observation::SnapshotStarted { .. })),
        "the restarted task resumes the stream: no second snapshot"
    );
    // A worker crash at the same moment loses the uncommitted offsets: the restart snapshots
    // again from past the delete of claim 42, which is resurrected.
    let (spec, seed) =
        common::load("claims-task-failure-at-completion-marker", &["fault[0].action=kill-connect-worker"]);
    let crashed = common::run(&spec, seed);
    assert_eq!(crashed.violated(), vec![handoff_models::scenario::spec::Invariant::I2], "{:?}", crashed.findings);
}

#[test]
fn a_slot_recreation_during_the_failover_gate_waits_its_turn_and_then_runs() {
    let (spec, seed) = common::load("claims-failover-recreate-slot-during-gate", &[]);
    let result = common::run(&spec, seed);
    assert!(result.prediction_held, "{:?}", result.findings);
    let operator: Vec<&Observation> = result
        .trace
        .iter()
        .filter(|e| e.node == handoff_models::core::ids::Node::Operator)
        .map(|e| &e.observation)
        .collect();
    let waits = operator.iter().position(|o| matches!(o, Observation::OperatorWaits { .. })).expect("it waits");
    let gate = operator.iter().position(|o| matches!(o, Observation::GateChecked { .. })).expect("the gate decides");
    let runs =
        operator.iter().position(|o| matches!(o, Observation::OperatorResumesWaiting { .. })).expect("then it runs");
    assert!(waits < gate && gate < runs, "{operator:?}");
    assert!(
        matches!(operator.get(runs + 1), Some(Observation::OperatorAction { action }) if action.starts_with("drop slot")),
        "the recreation drops the slot once the gate has ended: {operator:?}"
    );
    // The run's JSON says so.
    assert_eq!(result.fault_notes.len(), 1, "{:?}", result.fault_notes);
    assert_eq!(result.fault_notes[0].outcome, FaultOutcome::Waited);
    let json = handoff_sim::timed::report::json(&spec, "s.toml", &result);
    assert_eq!(json["fault_notes"][0]["fault"], "recreate-slot", "{}", json["fault_notes"]);
}

#[test]
fn a_fault_that_cannot_act_is_refused_with_a_reason() {
    // A task failure while the worker is down: nothing to fail. It is refused, in the timeline
    // and in the run's notes, instead of vanishing.
    let text = replay_text().replace("ACTION", "kill-connect-worker").replace("DELAY", "restart_after_ms").replace(
        "[prediction]",
        "[[fault]]\nat = \"72s\"\naction = \"kill-connector-task\"\nrestart_after_ms = 1000\n[prediction]",
    );
    let spec = common::load_text(&text);
    let result = common::run(&spec, 1);
    let refused: Vec<&String> = result
        .trace
        .iter()
        .filter_map(|e| match &e.observation {
            Observation::FaultRefused { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert_eq!(refused, vec!["the Connect worker is down: no task runs"]);
    assert_eq!(result.fault_notes.len(), 1);
    assert_eq!(result.fault_notes[0].outcome, FaultOutcome::Refused);
    assert_eq!(result.fault_notes[0].at_ms, 72_000);
}

#[test]
fn in_the_exhaustive_world_an_operation_during_another_waits_its_turn() {
    use handoff_models::exhaustive::world::{Action, Operation, World};
    let path = common::scenario_path("zoo/missing-log-position-check-after-snapshot-fixed");
    let sets = vec![r#"check.operations=["rebuild-connector", "recreate-slot"]"#.to_string()];
    let loaded = handoff_sim::scenario::load(&path, &sets).unwrap_or_else(|e| panic!("{e}"));
    let (spec, bounds) = handoff_sim::exhaustive::check::bound(&loaded.spec).expect("a bound");
    // The runbook starts, and the slot recreation comes while it runs; then the world goes on,
    // delivering and firing, with no more crashes, operations or transactions.
    let mut actions = vec![
        Action::Operate { operation: Operation::RebuildConnector },
        Action::Operate { operation: Operation::RecreateSlot },
    ];
    let mut world = World::new(&spec, &bounds);
    for action in &actions {
        world.step(action);
    }
    let mut enabled = Vec::new();
    for _ in 0..400 {
        enabled.clear();
        world.actions(&bounds, &mut enabled);
        let Some(next) = enabled.iter().find(|a| matches!(a, Action::Deliver { .. } | Action::Fire { .. })).cloned()
        else {
            break;
        };
        world.step(&next);
        actions.push(next);
    }
    let steps = World::replay(&spec, &bounds, &actions);
    assert!(
        steps[1].1.iter().any(|e| matches!(e.observation, Observation::OperatorWaits { .. })),
        "the recreation waits: {:?}",
        steps[1].1
    );
    let later: Vec<&Observation> =
        steps[2..].iter().flat_map(|(_, events)| events.iter().map(|e| &e.observation)).collect();
    let runs = later
        .iter()
        .position(|o| matches!(o, Observation::OperatorResumesWaiting { .. }))
        .expect("the recreation runs once the runbook has ended");
    assert!(
        later[runs..].iter().any(|o| matches!(o, Observation::SlotCreated { .. })),
        "and it creates the slot again"
    );
}

#[test]
fn a_gate_stop_refused_while_the_worker_is_down_lands_before_the_restarted_task_polls() {
    // PostgreSQL 17 with a synchronized failover slot; the worker is down from 73 s to 83 s, so
    // the gate's stop at the promotion (80 s) is refused. The operator calls again every 100 ms:
    // the stop lands on the restarted worker before its task's first poll returns, nothing is
    // published from the new primary before the gate decides, and the gate finds the saved
    // offset available (no needless rebuild).
    let text = std::fs::read_to_string(common::scenario_path("claims-failover-pg17-synchronized")).expect("readable")
        .replacen(
            "[[fault]]\nat = \"75s\"",
            "[[fault]]\nat = \"73s\"\naction = \"kill-connect-worker\"\nrestart_after_ms = 10000\n\n[[fault]]\nat = \"75s\"",
            1,
        );
    let spec = common::load_text(&text);
    let result = common::run(&spec, 1);
    assert!(result.prediction_held, "{:?}", result.findings);
    let trace = &result.trace;
    let refused = trace
        .iter()
        .position(
            |e| matches!(&e.observation, Observation::RestUnanswered { request, .. } if request.ends_with("/stop")),
        )
        .expect("the stop is refused while the worker is down");
    let restarted = trace
        .iter()
        .position(|e| {
            matches!(e.observation, Observation::Restarted { process: handoff_models::core::ids::Node::Connect })
        })
        .expect("the worker restarts");
    let gate = trace.iter().position(|e| matches!(e.observation, Observation::GateChecked { .. })).expect("the gate");
    assert!(refused < restarted && restarted < gate);
    assert!(
        trace[refused + 1..restarted].iter().all(|e| !matches!(e.observation, Observation::RestUnanswered { .. })),
        "the refusal is told once, not at every retry"
    );
    assert!(
        !trace[restarted..gate].iter().any(|e| matches!(e.observation, Observation::Polled { .. })),
        "nothing is polled between the restart and the gate's decision"
    );
    assert!(matches!(
        trace[gate].observation,
        Observation::GateChecked { verdict: handoff_models::core::observe::GateVerdict::Available, .. }
    ));
}

#[test]
fn a_stop_accepted_before_the_worker_dies_is_honoured_when_it_restarts() {
    let (spec, seed) = common::load("claims-failover-worker-down-at-promotion", &[]);
    let result = common::run(&spec, seed);
    assert!(result.prediction_held, "{:?}", result.findings);
    let trace = &result.trace;
    let stopped_start = trace
        .iter()
        .position(
            |e| matches!(&e.observation, Observation::WorkerStarted { target_state } if *target_state == ConnectorState::Stopped),
        )
        .expect("the second restart reads back STOPPED");
    let next_task = trace[stopped_start..]
        .iter()
        .position(|e| matches!(e.observation, Observation::TaskStarted { .. }))
        .expect("the gate resumes the connector in the end");
    assert!(
        trace[stopped_start..stopped_start + next_task].iter().any(
            |e| matches!(&e.observation, Observation::OperatorAction { action } if action.starts_with("rebuild: resume"))
        ),
        "no task starts until the gate resumes the connector"
    );
}

#[test]
fn a_second_failover_with_no_standby_left_is_refused_with_a_reason() {
    // claims-failover promotes its standby at 75 s; a failover at 30 s first leaves nobody to
    // promote then. The later one used to be narrated as a FAULT and do nothing.
    let spec = bundled_with(
        "claims-failover",
        "\n[[fault]]\nat = \"30s\"\naction = \"fail-over-to-standby\"\npromote_after_ms = 2000\n",
    );
    let result = common::run(&spec, 1);
    let refused: Vec<(u64, &String)> = result
        .trace
        .iter()
        .filter_map(|e| match &e.observation {
            Observation::FaultRefused { reason, .. } => Some((e.at.ms(), reason)),
            _ => None,
        })
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].0, 75_000);
    assert!(refused[0].1.starts_with("no standby is left to promote"), "{refused:?}");
    assert_eq!(result.fault_notes.len(), 1);
    assert_eq!(result.fault_notes[0].outcome, FaultOutcome::Refused);
}

#[test]
fn the_runbook_does_not_take_a_refused_slot_drop_for_done() {
    // The network between Connect and PostgreSQL is clogged when the runbook runs: the stopped
    // task's walsender lives on (its close is held back), so `pg_drop_replication_slot` fails
    // with "is active". The operator used to resume on the old slot as if it were gone; now it
    // tries again until the walsender is gone, then drops the slot and resumes.
    let text = common::claims(
        "runbook-on-an-active-slot",
        100,
        "",
        r#"
    [sink]
    apply = "snapshot-epoch"
    "auto.offset.reset" = "earliest"
    [workload]
    end_ms = 60000
    updates_per_second = 2
    [[fault]]
    at = "20s"
    action = "clog"
    between = ["connect", "postgres"]
    duration_ms = 15000
    [[fault]]
    at = "22s"
    action = "rebuild-connector"
    [prediction]
    verdict = "holds"
    why = "-"
"#,
    );
    let spec = common::load_text(&text);
    let result = common::run(&spec, 1);
    let operator: Vec<(u64, &String)> = result
        .trace
        .iter()
        .filter_map(|e| match &e.observation {
            Observation::OperatorAction { action } => Some((e.at.ms(), action)),
            _ => None,
        })
        .collect();
    let failed: Vec<_> = operator.iter().filter(|(_, action)| action.contains("failed: ERROR")).collect();
    assert_eq!(failed.len(), 1, "said once: {operator:?}");
    assert!(failed[0].1.contains("is active"), "{failed:?}");
    let dropped = result
        .trace
        .iter()
        .find(|e| matches!(e.observation, Observation::SlotDropped { .. }))
        .map(|e| e.at.ms())
        .expect("the slot is dropped at last");
    assert!(dropped >= 35_000, "not before the clog ends and the walsender goes: {dropped}");
    let resumed = operator.iter().find(|(_, action)| action.starts_with("rebuild: resume")).expect("resumed").0;
    assert!(resumed >= dropped, "the connector resumes after the drop, at {resumed} ms");
    assert!(result.prediction_held, "{:?}", result.findings);
}

#[test]
fn a_procedure_whose_stop_someone_undid_stops_the_connector_again() {
    // The runbook stops the connector over a clogged Connect <-> Kafka link (the stop takes its
    // time), and meanwhile someone else stops and resumes it: the connector is RUNNING again when
    // the runbook looks for STOPPED. It used to poll for STOPPED forever (I11 with source and sink
    // identical, the zoo twins' every-fault sweep, seed 2654); now it stops the connector again.
    let spec = bundled_with(
        "zoo/naive-sink-fixed",
        r#"
[[fault]]
at = "12183ms"
action = "clog"
between = ["connect", "kafka"]
duration_ms = 13513
[[fault]]
at = "13691ms"
action = "rebuild-connector"
[[fault]]
at = "21885ms"
action = "stop-connector"
resume_after_ms = 2622
"#,
    );
    let result = common::run(&spec, 1);
    let again = result
        .trace
        .iter()
        .any(|e| matches!(&e.observation, Observation::OperatorAction { action } if action.contains("stop it again")));
    assert!(again, "the runbook stops the resumed connector again");
    assert!(result.prediction_held, "{:?}", result.findings);
    assert!(result.boundary.reached, "{}", result.boundary.reason);
}

#[test]
fn a_stream_forwarded_over_commits_already_in_kafka_does_not_wait_for_them() {
    // The keep-alive fix, every fault kind, seed 5754: PostgreSQL crashes after insert 1009 is in
    // Kafka but before the offset that covers it is stored; the operator recreates the slot just
    // after the restarted task checked it. The new stream is forwarded past the stored offset,
    // over insert 1009 (already in Kafka): nothing is lost, and the connector's own offset never
    // moves again. The run used to wait for it and end with I11 though source and sink matched.
    let spec = bundled_with(
        "claims-quiet-database-keepalive-fix",
        r#"
[[fault]]
at = "7347ms"
action = "crash-postgres"
restart_after_ms = 5317
[[fault]]
at = "17364ms"
action = "recreate-slot"
[[fault]]
at = "28510ms"
action = "wal-burst"
bytes = "45MB"
"#,
    );
    let result = common::run(&spec, 5754);
    let forwarded = result.trace.iter().any(|e| {
        matches!(e.observation, Observation::StreamStarted { requested, start, .. } if start > requested && requested > Lsn(0))
    });
    assert!(forwarded, "the restarted stream is forwarded past the stored offset");
    assert!(result.boundary.reached, "{}", result.boundary.reason);
    assert_eq!(result.violated(), vec![], "{:?}", result.findings);
}

/// A bundled scenario with more lines at its end (more `[[fault]]`s).
fn bundled_with(name: &str, more: &str) -> handoff_models::scenario::spec::Spec {
    let text = std::fs::read_to_string(common::scenario_path(name)).expect("the scenario");
    common::load_text(&(text + more))
}

/// A connector streaming with updates from 10 s to 30 s, stopped at 15 s and resumed at 25 s, with
/// `more` appended (the hand advance's faults, a `[versions]`, connector properties).
fn stopped_connector_with(connector_more: &str, more: &str) -> handoff_models::scenario::spec::Spec {
    common::load_text(&format!(
        r#"name = "advance-slot"
[[table]]
name = "public.claims"
rows = 3
[connector]
"topic.prefix" = "claims"
"plugin.name" = "pgoutput"
{connector_more}
[sink]
apply = "version-guard"
"auto.offset.reset" = "earliest"
[workload]
start_ms = 10000
end_ms = 30000
updates_per_second = 2
[[fault]]
at = "15s"
action = "stop-connector"
resume_after_ms = 10000
[prediction]
verdict = "holds"
why = "judged by the test"
{more}"#
    ))
}

/// The operator's advance is refused while the connector's walsender holds the slot (PostgreSQL's
/// `ReplicationSlotAcquire`): the timeline gives PostgreSQL's error, nothing moves, and the run
/// holds.
#[test]
fn a_slot_advanced_by_hand_while_the_connector_streams_is_refused() {
    let spec = stopped_connector_with("", "[[fault]]\nat = \"12s\"\naction = \"advance-slot\"\n");
    let result = common::run(&spec, 1);
    let refused = result.trace.iter().any(|e| {
        matches!(&e.observation, Observation::OperatorAction { action }
            if action.contains("failed") && action.contains("replication slot \"debezium\" is active"))
    });
    assert!(refused, "PostgreSQL refuses the advance of an active slot");
    assert!(
        !result.trace.iter().any(|e| matches!(e.observation, Observation::SlotConfirmed { by: Node::Operator, .. }))
    );
    assert_eq!(result.violated(), vec![], "{:?}", result.findings);
}

/// Advanced while the connector is stopped, the slot moves to the WAL end, and its restart_lsn to
/// the last running-xacts record the advance decoded past: in a timed run the background writer
/// wrote one after the stored offset (every 15 s with WAL written), so on resume the start-up check
/// sees restart_lsn > lsn_proc and the task fails instead of streaming past the updates committed
/// meanwhile (the silent path needs no such record in between: the zoo's
/// dbz-5739-slot-advanced-by-hand).
#[test]
fn a_slot_advanced_by_hand_past_a_running_xacts_record_fails_the_log_position_check() {
    let advance = "[[fault]]\nat = \"20s\"\naction = \"advance-slot\"\n";
    let result = common::run(&stopped_connector_with("", advance), 1);
    assert!(
        result.trace.iter().any(|e| matches!(e.observation, Observation::SlotConfirmed { by: Node::Operator, .. }))
    );
    let check_failed = result.trace.iter().any(|e| {
        matches!(&e.observation, Observation::LogPositionChecked { available: false, detail } if detail.contains("> lsn_proc"))
    });
    assert!(check_failed, "the advanced restart_lsn is past the stored lsn_proc");
    assert!(result.trace.iter().any(|e| matches!(e.observation, Observation::TaskFailed { .. })));
    assert_eq!(result.violated(), vec![], "{:?}", result.findings);
}
