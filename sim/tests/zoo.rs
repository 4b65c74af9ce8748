//! The bug zoo (`scenarios/zoo/`): each entry is a hazard of the real systems (a Debezium issue or
//! a code path, named in the entry's header), a `[check]` bound
//! in which `handoff check` finds it, and the counterexample as the entry's `[schedule]`; its
//! `-fixed` twin is the same bound with the fix, where every invariant holds.
//!
//! For each entry: the exhaustive lens explores the bound completely (its size pinned, so that a
//! change in semantics shows as a number), finds the predicted invariant violated, and its
//! shortest counterexample is exactly the entry's schedule; the timed lens follows that schedule
//! step for step and finds the same invariant. For each twin: the bound, explored completely,
//! holds everything, and the timed run holds its prediction.
//!
//! An entry whose hazard costs an outage rather than data (DBZ-7533) is found as failing closed:
//! the bound has a path that ends with the pipeline stopped short of its boundary, that shortest
//! path is the entry's schedule, and the timed lens following it fails closed too; no path of the
//! twin's bound does.
#![cfg(madsim)]

mod common;

use handoff_models::exhaustive::check::FAILS_CLOSED;
use handoff_models::judge::verdict::Outcome as Judged;
use handoff_models::scenario::spec::{Invariant, Spec};
use handoff_sim::exhaustive::check::{self, Outcome};
use handoff_sim::scenario;
use handoff_sim::timed::runner;
use std::path::PathBuf;

fn zoo(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/zoo").join(format!("{name}.toml"))
}

/// Checks an entry and its twin: `(generated, unique)` states of the entry's bound and of the
/// twin's.
#[track_caller]
fn entry(name: &str, invariant: Invariant, sizes: (usize, usize), twin_sizes: (usize, usize)) {
    found_and_replayed(name, invariant, sizes);
    let (twin, loaded, report) = twin_checked(name, twin_sizes);
    assert!(report.properties.iter().all(|p| p.outcome != Outcome::Counterexample), "{twin}");
    assert!(runner::run(&loaded.spec, loaded.seed).prediction_held, "{twin}: the timed run");
}

/// A historic Debezium bug (reference debezium-postgres.md §9): the entry on the release that had
/// it, as [`entry`]; its twin on the release that fixed it, where `invariant` holds throughout the
/// bound. The twin may keep findings of other bugs of its release (before 2.7, DBZ-7816's I5),
/// which its prediction allows.
#[track_caller]
fn historic(name: &str, invariant: Invariant, sizes: (usize, usize), twin_sizes: (usize, usize)) -> check::CheckReport {
    let spec = found_and_replayed(name, invariant, sizes);
    let (twin, loaded, report) = twin_checked(name, twin_sizes);
    assert_eq!(loaded.spec.check, spec.check, "{twin}: the same bound");
    let fixed = report.properties.iter().find(|p| p.invariant == Some(invariant)).expect("checked");
    assert_ne!(fixed.outcome, Outcome::Counterexample, "{twin}: {invariant} holds on the fixed release");
    assert!(runner::run(&loaded.spec, loaded.seed).prediction_held, "{twin}: the timed run");
    report
}

/// The entry's bound has `sizes` and a counterexample for `invariant`, the entry's `[schedule]`,
/// and the timed lens follows that path to the same finding. Returns the entry's spec.
#[track_caller]
fn found_and_replayed(name: &str, invariant: Invariant, sizes: (usize, usize)) -> Spec {
    let (loaded, report) = checked(name, sizes);
    let spec = loaded.spec;
    let found = report
        .properties
        .iter()
        .find(|p| p.invariant == Some(invariant))
        .unwrap_or_else(|| panic!("{name}: no property checks {invariant}"));
    assert_eq!(found.outcome, Outcome::Counterexample, "{name}: {invariant}");
    let schedule = spec.schedule.as_ref().expect("an entry carries its counterexample as its schedule");
    assert_eq!(
        found.path, schedule.steps,
        "{name}: the shortest counterexample changed; its story now:\n{}",
        found.story
    );
    // The timed lens follows the path to the same finding.
    let run = runner::run(&spec, loaded.seed);
    assert!(run.departures.is_empty(), "{name}: {:?}", run.departures);
    assert!(run.violated().contains(&invariant), "{name}: {:?}", run.violated());
    assert!(run.prediction_held, "{name}: {:?}", run.violated());
    spec
}

/// The twin `<name>-fixed`: its bound, explored completely, has `twin_sizes` and is as its
/// prediction says.
#[track_caller]
fn twin_checked(name: &str, twin_sizes: (usize, usize)) -> (String, scenario::Loaded, check::CheckReport) {
    let twin = format!("{name}-fixed");
    let (loaded, report) = checked(&twin, twin_sizes);
    (twin, loaded, report)
}

/// The zoo scenario `name`, and its bound's report: explored completely, of `sizes`
/// (generated, unique), every property as its prediction says.
#[track_caller]
fn checked(name: &str, sizes: (usize, usize)) -> (scenario::Loaded, check::CheckReport) {
    let loaded = scenario::load(&zoo(name), &[]).unwrap_or_else(|e| panic!("{e}"));
    let report = check::check(&loaded.spec, name, common::WHOLE_BOUND).expect("a bound");
    assert!(report.complete, "{name}: the bound is explored completely");
    assert_eq!((report.states, report.unique_states), sizes, "{name}: the bound's size");
    assert!(report.as_expected(), "{name}:\n{}", check::text(&report));
    (loaded, report)
}

#[test]
fn dbz_5915_6204_a_change_sharing_the_stored_lsn() {
    historic("dbz-5915-6204-change-sharing-the-stored-lsn", Invariant::I1, (981_626, 398_506), (994_564, 404_964));
}

#[test]
fn dbz_7816_a_slot_confirmed_before_the_offsets_are_stored() {
    entry("dbz-7816-slot-confirmed-before-offsets-stored", Invariant::I5, (47_526, 19_607), (189_501, 73_733));
}

#[test]
fn a_wall_clock_stream_start() {
    entry("wall-clock-stream-start", Invariant::I1, (145_562, 53_400), (8_619, 3_782));
}

#[test]
fn dbz_9688_trust_slot_after_a_recreated_slot() {
    entry("dbz-9688-trust-slot-after-recreated-slot", Invariant::I6, (202_325, 78_537), (192_289, 74_851));
}

#[test]
fn the_missing_log_position_check_after_a_snapshot() {
    // The twin's bound was 985,229 / 361,063 before the runbook's stop, begun while a periodic
    // offset flush was under way, went on as soon as that flush ended (issue 21).
    entry("missing-log-position-check-after-snapshot", Invariant::I6, (458_663, 171_861), (969_168, 354_270));
}

#[test]
fn the_resurrection_after_an_incomplete_snapshot() {
    entry("resurrection-after-incomplete-snapshot", Invariant::I2, (96_099, 42_758), (96_099, 42_758));
}

#[test]
fn a_naive_sink() {
    entry("naive-sink", Invariant::I3, (57_367, 24_397), (57_367, 24_397));
}

#[test]
fn dbz_1554_copy_rows_sharing_an_lsn() {
    historic("dbz-1554-copy-rows-sharing-an-lsn", Invariant::I1, (675_454, 274_150), (682_069, 277_724));
}

#[test]
fn dbz_76_a_change_at_the_stored_commits_end_in_an_interleaved_transaction() {
    historic(
        "dbz-76-commit-end-shared-by-an-interleaved-change",
        Invariant::I1,
        (392_426, 130_816),
        (392_536, 130_871),
    );
}

#[test]
fn dbz_5031_5597_a_slot_confirmed_during_the_restart_search() {
    historic(
        "dbz-5031-5597-slot-confirmed-during-the-restart-search",
        Invariant::I1,
        (4_743_339, 1_644_361),
        (4_540_604, 1_563_295),
    );
}

#[test]
fn dbz_1766_the_last_polled_record_confirmed() {
    historic("dbz-1766-last-polled-record-confirmed", Invariant::I6, (345_577, 111_056), (280_951, 89_318));
}

/// DBZ-5739: a slot advanced by hand while the connector was down. 2.0 streams past the skipped
/// commit silently; 2.1 seeks the slot to the stored offset first, PostgreSQL refuses to move it
/// back, and the task fails.
#[test]
fn dbz_5739_a_slot_advanced_by_hand() {
    let twin = historic("dbz-5739-slot-advanced-by-hand", Invariant::I6, (49_478, 20_429), (64_940, 25_704));
    assert!(fails_closed(&twin), "the fixed twin: the seek fails the task on some path");
}

/// dbz#1863: from 3.6 `trust_offset` seeks only a slot behind the offset, so the slot advanced by
/// hand is trusted again; 3.5 still seeks and fails.
#[test]
fn dbz_1863_trust_offset_after_a_slot_advanced_by_hand() {
    let twin =
        historic("dbz-1863-trust-offset-slot-advanced-by-hand", Invariant::I6, (205_249, 79_087), (262_860, 98_126));
    assert!(fails_closed(&twin), "the fixed twin: the seek fails the task on some path");
}

#[test]
fn dbz_7903_a_blocking_snapshot_rerun_as_initial() {
    let twin =
        historic("dbz-7903-blocking-snapshot-rerun-as-initial", Invariant::I2, (655_941, 201_243), (644_436, 196_342));
    assert!(twin.properties.iter().all(|p| p.outcome != Outcome::Counterexample), "the twin holds everything");
}

/// Whether some path of a checked bound fails closed.
fn fails_closed(report: &check::CheckReport) -> bool {
    report.properties.iter().any(|p| p.name == FAILS_CLOSED && p.outcome == Outcome::Reached)
}

/// A historic Debezium bug whose cost is an outage: the entry's bound, explored completely, has a
/// path that fails closed and no invariant violated; its shortest such path is the entry's
/// `[schedule]`, which the timed lens follows to the same stop; the twin's bound, on the release
/// that fixed it, has no such path, and its timed run holds.
#[track_caller]
fn historic_outage(name: &str, sizes: (usize, usize), twin_sizes: (usize, usize)) {
    let (loaded, report) = checked(name, sizes);
    let spec = loaded.spec;
    assert_eq!(report.judgement.failing_closed, Some(Judged::ViolatedAsPredicted), "{name}");
    assert!(report.properties.iter().all(|p| p.outcome != Outcome::Counterexample), "{name}: no invariant violated");
    let found = report.properties.iter().find(|p| p.name == FAILS_CLOSED).expect("the property");
    let schedule = spec.schedule.as_ref().expect("an entry carries its path as its schedule");
    assert_eq!(found.path, schedule.steps, "{name}: the shortest path changed; its story now:\n{}", found.story);
    let run = runner::run(&spec, loaded.seed);
    assert!(run.departures.is_empty(), "{name}: {:?}", run.departures);
    assert!(run.failed_closed.is_some(), "{name}: the timed lens stops where the path does");
    assert_eq!(run.violated(), Vec::<Invariant>::new(), "{name}");
    assert!(run.prediction_held, "{name}");
    let (twin, loaded, report) = twin_checked(name, twin_sizes);
    assert_eq!(loaded.spec.check, spec.check, "{twin}: the same bound");
    assert!(!fails_closed(&report), "{twin}: no path fails closed on the fixed release");
    assert!(report.properties.iter().all(|p| p.outcome != Outcome::Counterexample), "{twin}");
    assert!(runner::run(&loaded.spec, loaded.seed).prediction_held, "{twin}: the timed run");
}

/// DBZ-7533 / pgjdbc#3138 (reference §9 row 10): a 42.7.3 driver under Debezium 3.1 confirms a
/// keep-alive past the stored offset; restart_lsn follows a RUNNING_XACTS record past the stored
/// lsn_proc, and the restarted task's log-position check fails it. Nothing captured is lost (the
/// driver's guard confirms only WAL that produced no message): the cost is the outage. 3.2 turns
/// the driver's automatic flush off.
#[test]
fn dbz_7533_a_driver_confirming_keepalives() {
    historic_outage("dbz-7533-driver-confirms-keepalives", (336_244, 111_983), (69_896, 27_432));
}

/// dbz#1379 (reference §9 row 8): a stored heartbeat message; the 3.5 search waits for a COMMIT
/// and the filter drops the heartbeat message written before it: a lost `op=m` record (I1).
#[test]
fn dbz_1379_a_stored_message_and_the_messages_after_it() {
    historic("dbz-1379-stored-message-restart", Invariant::I1, (1_582_120, 530_909), (1_600_991, 540_012));
}

#[test]
fn an_outbox_consumer_without_an_inbox() {
    entry("outbox-consumer-without-inbox", Invariant::I10, (7_184, 2_886), (7_002, 2_796));
}

#[test]
fn an_outbox_consumer_committing_its_offset_before_the_effect() {
    entry("outbox-offset-before-effect", Invariant::I9, (6_176, 2_516), (7_002, 2_796));
}

/// A Connect restart's replay reaches a consumer without an inbox; exactly-once source tasks and
/// a `read_committed` consumer remove it (the twin), in the same bound.
#[test]
fn a_restart_replay_without_exactly_once() {
    entry("outbox-restart-replay-without-exactly-once", Invariant::I10, (4_212, 2_272), (619, 438));
}

/// A zombie worker: paused past its session and `wal_sender_timeout`, it publishes what it held
/// while the worker that took its task publishes the same from the slot; exactly-once source tasks
/// fence the zombie (the twin), whose task then fails if it kept its assignment.
#[test]
fn a_zombie_worker_without_exactly_once() {
    let spec = found_and_replayed("zombie-worker-without-exactly-once", Invariant::I10, (427_844, 138_104));
    // (The twin's size grew from 1,422,729 / 424,480 when I10's window began to wait for the
    // restarted task's first poll: states between a start and that poll are now told apart.)
    let (twin, loaded, report) = twin_checked("zombie-worker-without-exactly-once", (1_434_886, 428_258));
    assert_eq!(loaded.spec.check, spec.check, "{twin}: the same bound");
    assert!(report.properties.iter().all(|p| p.outcome != Outcome::Counterexample), "{twin}");
    // The twin's bound ends failed closed on the paths where the zombie keeps the task: its
    // fenced task fails (reference kafka-connect.md §2.4), as its prediction allows.
    let failed = report.properties.iter().find(|p| p.name == FAILS_CLOSED).expect("checked");
    assert_eq!(failed.outcome, Outcome::Reached, "{twin}");
    assert!(runner::run(&loaded.spec, loaded.seed).prediction_held, "{twin}: the timed run");
}

/// DBZ-3860: before 1.8 a composite key's chunk bounds compare each column on its own; the chunk
/// after (1, 2) up to (2, 1) reads nothing and hub (2, 1) is never snapshotted (I4, I1). The twin
/// on 1.8 reads it.
///
/// The twin's timed run has no `[schedule]` to follow, so it signals from its `[workload]`; that
/// signal is the signal table's row 1, and the bound's becomes row 2: the bounds are the same
/// but for that number.
#[test]
fn dbz_3860_composite_key_chunk_bounds() {
    let name = "dbz-3860-composite-key-chunk-bounds";
    let spec = found_and_replayed(name, Invariant::I4, (129, 78));
    let (twin, loaded, report) = twin_checked(name, (418, 220));
    let renumbered = |bound: &Option<handoff_models::scenario::spec::CheckBound>| {
        let mut bound = bound.clone().expect("a bound");
        for script in &mut bound.scripts {
            for op in &mut script.ops {
                if let handoff_models::core::change::RowOp::Insert { key, .. } = op {
                    *key = 0;
                }
            }
        }
        bound
    };
    assert_eq!(renumbered(&loaded.spec.check), renumbered(&spec.check), "{twin}: the same bound");
    assert!(report.properties.iter().all(|p| p.outcome != Outcome::Counterexample), "{twin} holds everything");
    assert!(runner::run(&loaded.spec, loaded.seed).prediction_held, "{twin}: the timed run");
}

/// DBZ-5071: before 2.6 a nullable key column (`message.key.columns` on `external_id`, NULL in
/// hub 2) is bounded by plain comparisons; the maximum key is NULL, so every chunk after the first
/// is empty and hubs 3 and 2 are never snapshotted (I4, I1). The twin on 2.6 reads 1, 3, then the
/// NULL row, and stops after NULL. The twin signals from its `[workload]` too (see DBZ-3860).
#[test]
fn dbz_5071_null_key_column_chunk_bounds() {
    use handoff_models::core::ids::UniqueColumn;
    use handoff_models::core::observe::Observation;
    use handoff_models::core::signal::ChunkNulls;
    let name = "dbz-5071-null-key-column-chunk-bounds";
    let spec = found_and_replayed(name, Invariant::I4, (129, 78));
    // The chunks each release reads: (after, last, rows, maximum key, nulls).
    type Chunk = (Option<i64>, Option<i64>, u32, i64, ChunkNulls);
    let chunks = |run: &runner::RunResult| -> Vec<Chunk> {
        run.trace
            .iter()
            .filter_map(|event| match &event.observation {
                Observation::ChunkRead { after, last, rows, maximum_key, nulls, .. } => {
                    Some((*after, *last, *rows, *maximum_key, *nulls))
                }
                _ => None,
            })
            .collect()
    };
    let null = UniqueColumn::NULL;
    let run = runner::run(&spec, 1);
    assert_eq!(
        chunks(&run),
        [(None, Some(1), 1, null, ChunkNulls::Unaware), (Some(1), None, 0, null, ChunkNulls::Unaware)],
        "2.5: the maximum key is NULL, the second chunk reads nothing"
    );
    let i4: Vec<_> = run.findings.iter().filter(|finding| finding.invariant == Invariant::I4).collect();
    assert_eq!(i4.len(), 1, "one finding per table");
    assert_eq!(i4[0].key, Some(2), "the first row no chunk read, in key order");
    assert!(i4[0].seen.contains("2 row(s)") && i4[0].seen.contains("key(s) 2, 3"), "{}", i4[0].seen);
    assert!(i4[0].detail.contains("DBZ-5071"), "{}", i4[0].detail);

    let (twin, loaded, report) = twin_checked(name, (1198, 574));
    assert!(report.properties.iter().all(|p| p.outcome != Outcome::Counterexample), "{twin} holds everything");
    let run = runner::run(&loaded.spec, loaded.seed);
    assert!(run.prediction_held, "{twin}: the timed run");
    let aware = ChunkNulls::NullAware;
    assert_eq!(
        chunks(&run),
        [
            (None, Some(1), 1, null, aware),
            (Some(1), Some(3), 1, null, aware),
            (Some(3), Some(null), 1, null, aware),
            (Some(null), None, 0, null, aware),
        ],
        "{twin}: 1, 3, then the NULL row (NULLs sort last), and nothing after NULL"
    );
}
