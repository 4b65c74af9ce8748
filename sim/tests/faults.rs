//! The faults of the timed lens do what the real systems do.
#![cfg(madsim)]

mod common;

use handoff_models::lsn::Lsn;
use handoff_models::observe::Observation;
use handoff_models::spec::Invariant::I3;

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

fn replay(action: &str, delay: &str) -> handoff_sim::runner::RunResult {
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
