//! A group of Connect workers (reference kafka-connect.md §5): how long a task stays unassigned
//! after its worker is lost, a paused worker's task revoked from both holders, and a group of
//! one that runs no protocol.

#![cfg(madsim)]

mod common;

use handoff_models::core::ids::Node;
use handoff_models::core::observe::{Observation, TraceEvent};
use handoff_sim::scenario::{Choice, load_with};
use handoff_sim::timed::runner::RunResult;

fn variant(name: &str, variant: Option<&str>) -> RunResult {
    let choice = Choice { variant: variant.map(str::to_owned), ..Default::default() };
    let loaded = load_with(&common::scenario_path(name), &choice).unwrap_or_else(|e| panic!("{e}"));
    let result = common::run(&loaded.spec, loaded.seed);
    assert!(result.prediction_held, "{name} {variant:?}: {:?}", result.violated());
    result
}

/// Connector `connector`'s task starts (on any worker) at these times.
fn task_starts(trace: &[TraceEvent], connector: u8) -> Vec<(u64, Node)> {
    trace
        .iter()
        .filter(|event| match &event.observation {
            Observation::TaskStarted { .. } => connector == 0,
            Observation::OfConnector { connector: c, observation } => {
                *c == connector && matches!(**observation, Observation::TaskStarted { .. })
            }
            _ => false,
        })
        .map(|event| (event.at.ms(), event.node))
        .collect()
}

/// The first start of the task after `after_ms`.
fn restarted_after(trace: &[TraceEvent], connector: u8, after_ms: u64) -> (u64, Node) {
    task_starts(trace, connector)
        .into_iter()
        .find(|(at, _)| *at > after_ms)
        .unwrap_or_else(|| panic!("connector {connector}'s task never started again after {after_ms} ms"))
}

#[test]
fn a_lost_task_waits_for_the_scheduled_rebalance_unless_it_was_the_leaders() {
    const FAULT_MS: u64 = 30_000;
    const OUTBOX: u8 = 1;
    const CLAIMS: u8 = 0;
    // Not the leader, leaving cleanly: lost, and unassigned for scheduled.rebalance.max.delay.ms
    // (300 s) from the rebalance that found it lost (3 s after the leave, at the survivor's next
    // heartbeat).
    let leave = variant("two-workers-one-leaves", None);
    let (at, node) = restarted_after(&leave.trace, OUTBOX, FAULT_MS);
    assert_eq!(node, Node::Connect);
    assert!((FAULT_MS + 300_000..FAULT_MS + 306_000).contains(&at), "clean leave: {at}");
    // The record says where the task ran, and for how long nowhere.
    let record = leave.record.as_ref().expect("a record");
    let outbox = &record.task_placement[usize::from(OUTBOX)];
    let workers: Vec<Node> = outbox.runs.iter().map(|run| run.worker).collect();
    assert_eq!(workers, [Node::Connect2, Node::Connect]);
    let gap = outbox.runs[1].from.ms() - outbox.runs[0].until.expect("it stopped").ms();
    assert!((300_000..306_000).contains(&gap), "{gap}");
    assert!(outbox.sentence().contains("nowhere for 303"), "{}", outbox.sentence());
    // Vanished: the session (10 s) first, then the same delay.
    let vanished = variant("two-workers-one-leaves", Some("vanished"));
    let (at, _) = restarted_after(&vanished.trace, OUTBOX, FAULT_MS);
    assert!((FAULT_MS + 305_000..FAULT_MS + 316_000).contains(&at), "vanished: {at}");
    // Back before the deadline: the task returns to the worker that came back, at the deadline.
    let back = variant("two-workers-one-leaves", Some("vanished-and-back"));
    assert_eq!(restarted_after(&back.trace, OUTBOX, FAULT_MS), (at + 8, Node::Connect2));
    // The leader lost: the new leader remembers nothing and assigns its task at once.
    let leader = variant("two-workers-one-leaves", Some("leader-lost"));
    let (at, node) = restarted_after(&leader.trace, CLAIMS, FAULT_MS);
    assert_eq!(node, Node::Connect2);
    assert!((FAULT_MS + 10_000..FAULT_MS + 14_000).contains(&at), "leader lost: {at}");
    let leaves = variant("two-workers-one-leaves", Some("leader-leaves"));
    let (at, _) = restarted_after(&leaves.trace, CLAIMS, FAULT_MS);
    assert!(at < FAULT_MS + 4_000, "leader leaves: {at}");
    // No delay: reassigned in the rebalance that finds it lost.
    let no_delay = variant("two-workers-one-leaves", Some("no-delay"));
    let (at, _) = restarted_after(&no_delay.trace, OUTBOX, FAULT_MS);
    assert!(at < FAULT_MS + 4_000, "no delay: {at}");
}

#[test]
fn a_paused_leaders_task_runs_twice_until_the_new_leader_revokes_it_from_both() {
    let result = variant("two-workers-leader-paused", None);
    let duplicated = result.trace.iter().find_map(|event| match &event.observation {
        Observation::GroupAssignmentsComputed { duplicated, assignments, .. } if !duplicated.is_empty() => {
            Some((event.at.ms(), duplicated.clone(), assignments.clone()))
        }
        _ => None,
    });
    let (at, tasks, assignments) = duplicated.expect("the leader finds the task on two workers");
    assert_eq!(tasks, vec![0]);
    assert!((50_000..56_000).contains(&at), "after the zombie wakes at 50 s: {at}");
    assert!(assignments.iter().all(|(_, _, revoked)| revoked == &vec![0]), "revoked from both: {assignments:?}");
    // Meanwhile the replacement could not take the slot the paused worker's walsender held.
    assert!(result.trace.iter().any(|event| event.node == Node::Connect2
        && matches!(&event.observation, Observation::TaskRestarting { reason, .. } if reason.contains("is active"))));
    // Then one worker runs it.
    assert_eq!(restarted_after(&result.trace, 0, at).1, Node::Connect);
}

#[test]
fn one_worker_runs_no_group_protocol_and_two_do() {
    let group = |observation: &Observation| {
        matches!(observation, Observation::GroupRebalanced { .. } | Observation::GroupAssigned { .. })
    };
    let (spec, seed) = common::load("outbox-status-changes-connect-killed", &[]);
    let alone = common::run(&spec, seed);
    assert!(!alone.trace.iter().any(|event| group(&event.observation)));
    // (The drill's profile names faults that make REST calls, which a group does not take.)
    let (spec, seed) =
        common::load("outbox-status-changes-connect-killed", &["connect.workers=2", r#"fault_profile.kinds=["clog"]"#]);
    let pair = common::run(&spec, seed);
    assert!(pair.trace.iter().any(|event| group(&event.observation)));
    assert!(pair.trace.iter().any(|event| event.node == Node::Connect2));
}

/// The claims restart drill keeps its verdicts with three workers: each of its designs, at the
/// scenario's seed and under the same fault profile (faults a group and a single worker both
/// take), violates the same invariants with one worker and with three.
#[test]
fn the_claims_restart_drill_keeps_its_verdicts_with_three_workers() {
    let profile = r#"fault_profile.kinds=["kill-connect-worker", "pause-connect-worker", "crash-postgres", "clog", "checkpoint", "wal-burst"]"#;
    for variant in [None, Some("snapshot-epoch"), Some("naive-upsert"), Some("exactly-once")] {
        let run = |workers: &str| {
            let choice = Choice {
                variant: variant.map(str::to_owned),
                sets: vec![profile.to_owned(), format!("connect.workers={workers}")],
                expect: None,
            };
            let loaded = load_with(&common::scenario_path("claims-restart-during-snapshot"), &choice)
                .unwrap_or_else(|e| panic!("{e}"));
            common::run(&loaded.spec, loaded.seed)
        };
        let (one, three) = (run("1"), run("3"));
        assert_eq!(one.violated(), three.violated(), "{variant:?}");
        let resurrects = variant != Some("snapshot-epoch");
        assert_eq!(
            three.violated().contains(&handoff_models::scenario::spec::Invariant::I2),
            resurrects,
            "{variant:?}"
        );
        assert!(three.trace.iter().any(|event| event.node == Node::Connect3), "three workers ran");
    }
}

/// `wal_sender_timeout` (60 s): a paused worker keeps its walsender, and the slot, through a 20 s
/// pause; a 90 s pause loses it 60 s in, and only then does the replacement stream.
#[test]
fn a_pause_past_wal_sender_timeout_frees_the_slot_to_the_replacement() {
    const PAUSE_MS: u64 = 30_000;
    let timed_out = |run: &RunResult| -> Vec<(u64, Node)> {
        run.trace
            .iter()
            .filter_map(|event| match &event.observation {
                Observation::WalSenderTimedOut { client, .. } => Some((event.at.ms(), *client)),
                _ => None,
            })
            .collect()
    };
    let streams = |run: &RunResult, client: Node| -> Vec<u64> {
        run.trace
            .iter()
            .filter(|event| {
                matches!(&event.observation, Observation::StreamStarted { client: c, slot, .. } if *c == client && slot == "claims_slot")
            })
            .map(|event| event.at.ms())
            .collect()
    };
    let short = variant("two-workers-leader-paused", None);
    assert!(timed_out(&short).is_empty(), "a 20 s pause keeps the walsender");
    let long = variant("two-workers-leader-paused", Some("paused-past-wal-sender-timeout"));
    assert_eq!(timed_out(&long), vec![(PAUSE_MS + 60_000, Node::Connect)]);
    let replacement = streams(&long, Node::Connect2);
    assert!(
        replacement.first().is_some_and(|at| (PAUSE_MS + 60_000..PAUSE_MS + 71_000).contains(at)),
        "connect-2 streams at its first attempt after the slot is free: {replacement:?}"
    );
    assert!(streams(&short, Node::Connect2).is_empty(), "with a 20 s pause the replacement never streams");
}

/// The failover gate on a group whose leader is down at the promotion (reference
/// kafka-connect.md §5.4): the stop goes to the worker that is up, which forwards it to the
/// leader it knows; the forward fails while that leader is down, and the operator calls again
/// until the group has a new leader, which serves it.
#[test]
fn a_stop_is_forwarded_to_the_leader_and_served_once_the_group_has_one_that_is_up() {
    let run = variant("claims-failover-worker-down-at-promotion", Some("two-workers"));
    let at = |matches: &dyn Fn(&TraceEvent) -> bool| -> Vec<u64> {
        run.trace.iter().filter(|event| matches(event)).map(|event| event.at.ms()).collect()
    };
    let forwarded = at(&|event| {
        event.node == Node::Connect2
            && matches!(&event.observation, Observation::RestForwarded { to: Node::Connect, request } if request.contains("/stop"))
    });
    assert!(forwarded.len() >= 2 && forwarded.iter().all(|ms| (80_000..82_000).contains(ms)), "{forwarded:?}");
    let failed = at(
        &|event| matches!(&event.observation, Observation::RestFailed { error, .. } if error.contains("unreachable")),
    );
    assert_eq!(failed.len(), forwarded.len(), "each forward to the dead leader fails back to the operator");
    // connect-2 leads once connect's session ends, and writes STOPPED itself.
    let removed =
        at(&|event| matches!(event.observation, Observation::GroupMemberRemoved { worker: Node::Connect, .. }));
    let stopped =
        at(&|event| matches!(event.observation, Observation::ConnectConfigWritten { running: false, tasks: 0 }));
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert!(removed[0] < stopped[0] && stopped[0] < removed[0] + 1_000, "removed {removed:?}, stopped {stopped:?}");
    // The gate then rebuilds: a new snapshot on a new slot, on connect-2.
    let record = run.record.as_ref().expect("a record");
    let gate = record.failover_gate.as_ref().expect("the gate ran");
    assert_eq!(gate.result, handoff_models::judge::record::GateResult::RebuiltFromNewSnapshot);
}

/// The recovery runbook on a group of two, exhaustively: the stop written by the leader, the
/// status topic polled, the offsets reset by the leader, the resume and the task configuration
/// written, the rebalances between, in every interleaving with an update of the row; one
/// history on every path, and none fails closed.
#[test]
fn the_runbook_in_a_group_forms_one_history_in_every_interleaving() {
    use handoff_sim::exhaustive::check;
    let sets = [
        "connect.workers=2",
        "check.crashes=0",
        "check.crash=[]",
        r#"check.unreached_ok=["a crash hits an incomplete snapshot"]"#,
    ]
    .map(str::to_owned);
    let path = common::scenario_path("zoo/missing-log-position-check-after-snapshot-fixed");
    let loaded = handoff_sim::scenario::load(&path, &sets).unwrap_or_else(|e| panic!("{e}"));
    let report = check::check(&loaded.spec, "the runbook in a group", common::WHOLE_BOUND).expect("a bound");
    assert!(report.complete, "explored completely");
    // Issue 21 (tables added while running): 2,177,690 / 658,356 before a stop that began while
    // a periodic offset flush was under way went on as soon as that flush ended (the final
    // commit's `beginFlush` waits only for it) instead of at offset.flush.timeout.ms.
    assert_eq!((report.states, report.unique_states), (2_024_613, 608_381), "the bound's size");
    assert!(report.as_expected(), "{}", check::text(&report));
}
