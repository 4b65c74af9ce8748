//! The exhaustive lens on a tiny bound: 2 claims, an update and a delete that may run at any
//! point, one crash of the Connect worker (and its restart), one offset flush.

use handoff_models::components::sink::ApplyRule;
use handoff_models::core::component::{TaskTimer, Timer};
use handoff_models::core::ids::Node;
use handoff_models::exhaustive::check::{HandoffModel, narrate_path};
use handoff_models::exhaustive::world::{Action, Bounds};
use handoff_models::scenario::spec::claims_minimal;
use stateright::{Checker, HasDiscoveries, Model};

fn bounds() -> Bounds {
    Bounds {
        crashable: vec![Node::Connect],
        crashes: 1,
        pausable: Vec::new(),
        pauses: 0,
        periodic_fires: 1,
        disabled_timers: vec![Timer::Checkpoint, Timer::SinkCommit, Timer::first_task(TaskTimer::OffsetFlushTimeout)],
        operations: Vec::new(),
        operate_while: Default::default(),
        crash_while: Default::default(),
        script_while: Default::default(),
        commit_visibility: Default::default(),
        bgwriter_running_xacts: false,
        reductions: true,
    }
}

#[test]
fn the_snapshot_epoch_sink_holds_every_invariant_in_the_bound() {
    let model = HandoffModel::new(claims_minimal(2, ApplyRule::SnapshotEpoch), bounds());
    let checker = model.clone().checker().spawn_bfs().join();
    // Every `always` property holds and both `sometimes` situations are reached: the bound does
    // contain a crash during an incomplete snapshot and runs that reach the acceptance boundary.
    // No path fails closed: a Connect crash costs a restart, never a stop.
    for property in model.properties() {
        let found = checker.discovery(property.name).is_some();
        match property.name {
            handoff_models::exhaustive::check::FAILS_CLOSED => assert!(!found, "no path fails closed"),
            name if property.expectation == stateright::Expectation::Sometimes => assert!(found, "{name} reached"),
            name => assert!(!found, "{name} holds"),
        }
    }
    assert!(checker.unique_state_count() > 10_000, "the bound is not trivial: {}", checker.unique_state_count());
}

#[test]
fn a_naive_sink_resurrects_a_deleted_claim_after_a_restart_during_the_snapshot() {
    let model = HandoffModel::new(claims_minimal(2, ApplyRule::NaiveUpsert), bounds());
    let checker = model.clone().checker().finish_when(HasDiscoveries::AnyFailures).spawn_bfs().join();
    let path = checker.discovery("I2 no resurrection").expect("BFS finds a resurrection");
    let actions = path.into_actions();
    let story = narrate_path(&model, &actions);
    println!("{story}");
    // The counterexample is the §4.4 mechanism: the delete commits after the first snapshot read
    // the row, the worker dies before the completion is stored, the second snapshot (case B)
    // starts streaming past the delete and cannot retract the row.
    assert!(actions.contains(&Action::Crash { node: Node::Connect }), "{story}");
    assert!(actions.contains(&Action::RunScripted { index: 1 }), "{story}");
    assert!(story.contains("case B, slot already existed"), "{story}");
    assert!(story.contains("delete claim 2"), "{story}");
}

#[test]
fn the_version_guard_does_not_help_against_a_delete_that_is_never_streamed() {
    let model = HandoffModel::new(claims_minimal(2, ApplyRule::VersionGuard), bounds());
    let checker = model.checker().finish_when(HasDiscoveries::AnyFailures).spawn_bfs().join();
    assert!(checker.discovery("I2 no resurrection").is_some());
    for invariant in ["I1 no gap", "I3 monotonic apply", "I5 ack <= durable", "I6 fail closed"] {
        assert!(checker.discovery(invariant).is_none(), "{invariant}");
    }
}

/// Issue 18: a step of a named session is one step of the world, offered only when it is its
/// session's next one and the session has its previous answer; the sessions interleave.
#[test]
fn the_steps_of_a_session_run_in_order_one_answer_at_a_time_and_sessions_interleave() {
    use handoff_models::components::app::StepKind;
    use handoff_models::core::change::RowOp;
    use handoff_models::core::ids::{Status, TableId};
    use handoff_models::core::protocol::Isolation;
    use handoff_models::exhaustive::world::World;
    use handoff_models::scenario::spec::{ScriptStep, ScriptedTxn, Trigger};
    let mut spec = claims_minimal(2, ApplyRule::SnapshotEpoch);
    let on = |session: &str, kind: StepKind, ops: Vec<RowOp>| ScriptedTxn {
        trigger: Trigger::At { at_ms: 0 },
        ops,
        label: String::new(),
        step: ScriptStep { kind, session: Some(session.into()), database: None, idle_ms: 0 },
    };
    let begin = || StepKind::Begin { isolation: Isolation::ReadCommitted };
    let update = |key| vec![RowOp::Update { table: TableId(0), key, status: Status::Paid }];
    spec.scripted = vec![
        on("a", begin(), Vec::new()),
        on("a", StepKind::Statement, update(1)),
        on("b", begin(), Vec::new()),
        on("b", StepKind::Statement, update(2)),
        on("a", StepKind::Commit, Vec::new()),
        on("b", StepKind::Commit, Vec::new()),
    ];
    let bounds = Bounds { crashable: Vec::new(), crashes: 0, ..bounds() };
    let scripts = |world: &World| {
        let mut actions = Vec::new();
        world.actions(&bounds, &mut actions);
        actions
            .into_iter()
            .filter_map(|action| match action {
                Action::RunScripted { index } => Some(index),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let mut world = World::new(&spec, &bounds);
    assert_eq!(scripts(&world), [0, 2], "each session's first step");
    world.step(&Action::RunScripted { index: 0 });
    assert_eq!(scripts(&world), [2], "a's next step waits for the BEGIN's answer");
    world.step(&Action::RunScripted { index: 2 });
    world.step(&Action::Deliver { from: Node::Pg1, to: Node::App });
    assert_eq!(scripts(&world), [1], "a has its answer, b not yet");
    world.step(&Action::Deliver { from: Node::Pg1, to: Node::App });
    assert_eq!(scripts(&world), [1, 3]);
    for index in [3, 1] {
        world.step(&Action::RunScripted { index });
    }
    for _ in 0..2 {
        world.step(&Action::Deliver { from: Node::Pg1, to: Node::App });
    }
    assert_eq!(scripts(&world), [4, 5], "both commits may come in either order");
}

/// Keep-alives reach a bound only where the JDBC driver confirms them: a 42.7.0-42.7.5 driver
/// under Debezium before 3.2 (DBZ-7533, pgjdbc's `processKeepAliveMessage`); every other bound's
/// walsenders send none, and keeps its size.
#[test]
fn a_bound_has_keepalives_only_where_the_driver_confirms_them() {
    use handoff_models::exhaustive::world::World;
    let keepalives = |version: (u32, u32), pgjdbc: Option<(u32, u32, u32)>| {
        let mut spec = claims_minimal(1, ApplyRule::VersionGuard);
        spec.debezium.version = version;
        spec.debezium.pgjdbc = pgjdbc;
        World::new(&spec, &bounds()).processes.pg1.config.walsender_keepalives
    };
    assert!(keepalives((3, 1), Some((42, 7, 3))), "a 42.7.3 driver under 3.1 confirms them");
    assert!(!keepalives((3, 2), Some((42, 7, 6))), "3.2 switches the driver's automatic flush off");
    assert!(!keepalives((3, 1), None), "3.1 ships 42.6.1");
}
