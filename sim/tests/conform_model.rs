//! The model's side of the conformance workloads, without a server: the simulation's PostgreSQL
//! component, driven through its messages, shows the facts each workload is about, as
//! PostgreSQL 15's slot code has them (`slot.c`, `slotfuncs.c`, `logicalfuncs.c`, `xlog.c`).
//! `conform_pg15.rs` checks the same workloads against a real PostgreSQL 15.

use handoff_models::core::lsn::Lsn;
use handoff_sim::conform::model::ModelSide;
use handoff_sim::conform::observe::{ErrorClass, Outcome, Sign, SlotFacts};
use handoff_sim::conform::workload::Workload;
use std::path::Path;

/// Per step: the outcome and the facts of each slot.
struct Run {
    steps: Vec<(Outcome, Vec<SlotFacts>)>,
}

impl Run {
    fn of(name: &str) -> Run {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conform").join(format!("{name}.toml"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let workload = Workload::parse(&text, name).expect("the workload parses");
        let segment = workload.server.wal_segment_size_bytes;
        // A server a little into a segment, as after the real side's preparation.
        let mut model = ModelSide::new(&workload, Lsn(16 * segment + 0x110));
        let mut previous = model.view();
        let slots = workload.slots();
        let steps = workload
            .steps
            .iter()
            .map(|step| {
                let outcome = model.apply(step);
                let view = model.view();
                let facts = slots.iter().map(|slot| SlotFacts::derive(slot, &view, Some(&previous), segment)).collect();
                previous = view;
                (outcome, facts)
            })
            .collect();
        Run { steps }
    }

    /// Step `number` (1-based, as in the reports), slot `index`.
    fn facts(&self, number: usize, index: usize) -> &SlotFacts {
        &self.steps[number - 1].1[index]
    }

    fn outcome(&self, number: usize) -> &Outcome {
        &self.steps[number - 1].0
    }

    fn delivered(&self, number: usize) -> Vec<&str> {
        self.outcome(number).delivered.as_ref().expect("a step that delivers").iter().map(String::as_str).collect()
    }
}

/// §8, trace 1a: unreserved once five segments behind a 4MB cap, `safe_wal_size` exactly 0 on
/// the boundary; §7.2: lost at the next checkpoint, not before; every use an error.
#[test]
fn cap_exceeded_then_checkpoint() {
    let run = Run::of("cap-exceeded-then-checkpoint");
    assert_eq!(run.facts(4, 0).wal_status.as_deref(), Some("reserved"));
    let unreserved = run.facts(5, 0);
    assert_eq!((unreserved.wal_status.as_deref(), unreserved.segments_behind), (Some("unreserved"), Some(5)));
    assert_eq!(unreserved.safe_wal_size, Some(Sign::Zero));
    let lost = run.facts(6, 0);
    assert_eq!((lost.wal_status.as_deref(), lost.safe_wal_size, lost.segments_behind), (Some("lost"), None, None));
    for step in [7, 8, 9] {
        assert_eq!(run.outcome(step).error, Some(ErrorClass::SlotInvalidated), "step {step}");
    }
    assert!(!run.facts(10, 0).exists, "an invalidated slot can be dropped");
}

/// §8: extended beyond max_wal_size + 1 segments; the effective limit is the larger of the cap
/// and wal_keep_size (§7.1 step 4); a volume checkpoint (§7.3) invalidates at 7 behind.
#[test]
fn extended_then_lost_at_a_volume_checkpoint() {
    let run = Run::of("extended-then-lost-at-a-volume-checkpoint");
    assert_eq!(run.facts(2, 0).wal_status.as_deref(), Some("reserved"));
    assert_eq!(run.facts(3, 0).wal_status.as_deref(), Some("extended"));
    assert_eq!(run.facts(4, 0).wal_status.as_deref(), Some("extended"));
    assert_eq!(run.facts(4, 0).segments_behind, Some(6), "within wal_keep_size though past the 3MB cap");
    assert_eq!(run.facts(5, 0).wal_status.as_deref(), Some("lost"), "the write's own checkpoint");
}

/// §5.3: advance moves restart_lsn only to an RX (the checkpoint's), which brings the slot back
/// inside the cap; an advance below confirmed_flush is refused.
#[test]
fn rescue_by_advance() {
    let run = Run::of("rescue-by-advance");
    assert_eq!(run.facts(5, 0).wal_status.as_deref(), Some("unreserved"));
    let rescued = run.facts(6, 0);
    assert_eq!((rescued.wal_status.as_deref(), rescued.segments_behind), (Some("reserved"), Some(2)));
    assert_eq!(run.facts(7, 0).wal_status.as_deref(), Some("reserved"), "the checkpoint keeps it");
    assert_eq!(run.outcome(8).error, Some(ErrorClass::BelowMinimum));
    assert_eq!(run.outcome(9).error, None, "advancing to confirmed_flush itself is allowed");
}

/// §8's exception and §7.2: an active slot past the cap shows unreserved; the checkpoint ends its
/// walsender and invalidates it.
#[test]
fn active_slot_invalidated() {
    let run = Run::of("active-slot-invalidated");
    let before = run.facts(7, 0);
    assert_eq!((before.wal_status.as_deref(), before.active), (Some("unreserved"), true));
    let after = run.facts(8, 0);
    assert_eq!((after.wal_status.as_deref(), after.active), (Some("lost"), false));
    assert_eq!(run.outcome(9).ended_by_server, Some(true));
    assert_eq!(run.delivered(9), ["t1"], "the consumer had received t1 and never confirmed it");
    assert_eq!(run.outcome(10).error, Some(ErrorClass::SlotInvalidated));
}

/// §5.1: a consumer confirming only commits moves nothing in a quiet database; one confirming
/// keep-alives moves confirmed_flush, and restart_lsn follows to the background writer's RX.
#[test]
fn quiet_database_with_and_without_keepalive_confirmation() {
    let quiet = Run::of("quiet-database-commits-only");
    let pinned = quiet.facts(7, 0);
    assert_eq!((pinned.restart_lsn_moved, pinned.confirmed_flush_moved), (Some(false), Some(false)));
    assert_eq!(pinned.segments_behind, Some(5), "every segment written since creation is pinned");
    let confirmed = Run::of("quiet-database-keepalive-confirmed");
    for step in [4, 7] {
        let facts = confirmed.facts(step, 0);
        assert_eq!((facts.restart_lsn_moved, facts.confirmed_flush_moved), (Some(true), Some(true)), "step {step}");
        assert_eq!(facts.segments_behind, Some(0), "step {step}");
        assert!(confirmed.delivered(step).is_empty());
    }
}

/// Heartbeats: a commit in the captured database after the RX lets a commits-only consumer move
/// restart_lsn.
#[test]
fn heartbeats() {
    let run = Run::of("heartbeats");
    assert_eq!(run.facts(4, 0).segments_behind, Some(3));
    assert_eq!(run.delivered(5), ["heartbeat_1"]);
    assert_eq!(run.facts(5, 0).segments_behind, Some(0));
    assert_eq!(run.delivered(9), ["heartbeat_2"]);
    assert_eq!(run.facts(9, 0).restart_lsn_moved, Some(true));
}

/// §6: PostgreSQL 15 saves a feedback-only confirmation at no shutdown; a dirty (SQL-consumed)
/// slot is saved by the shutdown checkpoint; a crash keeps only what a checkpoint saved.
#[test]
fn redelivery_after_fast_and_immediate_restarts() {
    let fast = Run::of("redelivery-after-fast-restart");
    assert_eq!(fast.delivered(8), ["t1", "t2"], "the streamed slot re-delivers");
    assert!(fast.delivered(9).is_empty(), "the polled slot was saved at shutdown");
    let immediate = Run::of("redelivery-after-immediate-restart");
    assert_eq!(immediate.delivered(8), ["t1", "t2"]);
    assert_eq!(immediate.delivered(9), ["t1", "t2"], "the dirty slot was never saved");
    assert!(immediate.delivered(12).is_empty(), "the checkpoint saved it before the second crash");
}

/// §4.2: peek repeats, get consumes.
#[test]
fn peek_versus_get() {
    let run = Run::of("peek-versus-get");
    assert_eq!(run.delivered(3), ["t1"]);
    assert_eq!(run.delivered(4), ["t1"]);
    assert_eq!(run.facts(4, 0).confirmed_flush_moved, Some(false));
    assert_eq!(run.delivered(5), ["t1"]);
    assert_eq!(run.facts(5, 0).confirmed_flush_moved, Some(true));
    assert!(run.delivered(6).is_empty());
    assert_eq!(run.delivered(9), ["t2", "t3"]);
    assert!(run.delivered(10).is_empty());
}

/// §4.1: a start above confirmed_flush skips what commits before it; below, it is forwarded.
#[test]
fn start_above_and_below_confirmed_flush() {
    let run = Run::of("start-above-and-below-confirmed-flush");
    assert!(run.delivered(4).is_empty(), "t1 and t2 committed before the requested start");
    assert_eq!(run.facts(4, 0).confirmed_flush_moved, Some(true), "the keep-alive confirmed past them");
    assert_eq!(run.delivered(6), ["t3"], "t1 and t2 are gone for good");
    assert_eq!(run.delivered(8), ["t4"], "a start at restart_lsn is forwarded to confirmed_flush");
    assert!(run.delivered(9).is_empty());
}

// ---- Issue 18: sessions and transactions -----------------------------------------------------
// The expectations below are what PostgreSQL 15 showed for the same workloads (traces E1–E5 of
// the issue): restart_lsn and confirmed_flush by the step that wrote the record they point to,
// catalog_xmin by the workload's transaction of that xid.

/// The model's side of a workload, as `handoff conform` reports it.
struct Sessions {
    report: handoff_sim::conform::Report,
}

impl Sessions {
    fn of(name: &str) -> Sessions {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../conform").join(format!("{name}.toml"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        let workload = Workload::parse(&text, name).expect("the workload parses");
        Sessions { report: handoff_sim::conform::run(&workload, None).expect("the model runs the workload") }
    }

    fn step(&self, number: usize) -> &handoff_sim::conform::Side {
        &self.report.steps[number - 1].model
    }

    fn slot(&self, number: usize, slot: &str) -> &SlotFacts {
        &self.step(number).facts[slot]
    }

    /// restart_lsn, confirmed_flush and catalog_xmin as placed.
    fn placed(&self, number: usize, slot: &str) -> (String, String, String) {
        let facts = self.slot(number, slot);
        let text = |value: &Option<String>| value.clone().unwrap_or_default();
        (text(&facts.restart_lsn_at), text(&facts.confirmed_flush_at), text(&facts.catalog_xmin))
    }

    fn delivered(&self, number: usize) -> Vec<String> {
        self.step(number).outcome.delivered.clone().expect("a step that delivers")
    }

    fn creations(&self, number: usize) -> Vec<String> {
        self.step(number).outcome.creations.clone().unwrap_or_default()
    }
}

fn placed(restart: &str, confirmed: &str, catalog_xmin: &str) -> (String, String, String) {
    (restart.to_string(), confirmed.to_string(), catalog_xmin.to_string())
}

/// E1, E1b, E1c: an open transaction with an xid in another database holds restart_lsn at the RX
/// before its first record and catalog_xmin at its xid; a reader without an xid holds nothing;
/// the commit alone releases nothing, the next checkpoint's RX does.
#[test]
fn open_transaction_in_another_database_holds_restart() {
    let run = Sessions::of("open-transaction-in-another-database-holds-restart");
    assert_eq!(run.step(3).outcome.rows, Some(Vec::new()));
    assert_eq!(run.delivered(8), ["a1 [insert 1]"]);
    assert_eq!(run.placed(8, "s1"), placed("step 7", "end of step 7", "after a1"));
    assert_eq!(run.delivered(15), ["a2 [insert 2]"]);
    assert_eq!(run.placed(15, "s1"), placed("step 7", "end of step 14", "other1"));
    assert_eq!(run.delivered(18), ["a3 [insert 3]"]);
    assert_eq!(run.placed(18, "s1"), placed("step 7", "end of step 17", "other1"));
    assert!(run.delivered(20).is_empty(), "the other database's transaction is not delivered");
    assert_eq!(run.placed(20, "s1"), placed("step 7", "end of step 19", "other1"));
    assert!(run.delivered(22).is_empty());
    assert_eq!(run.placed(22, "s1"), placed("step 21", "end of step 21", "after a3"));
}

/// E2a: the creation waits for x1 (another database), then x2 (begun while it waited), not x3;
/// while it waits the slot is listed, active, without confirmed_flush; x3 is delivered whole.
#[test]
fn slot_creation_waits_for_running_transactions() {
    let run = Sessions::of("slot-creation-waits-for-running-transactions");
    for step in 7..=14 {
        assert_eq!(run.creations(step), ["s2 waiting"], "step {step}");
        assert!(run.slot(step, "s2").active, "step {step}");
        assert_eq!(run.placed(step, "s2"), placed("step 7", "NULL", "x1"), "step {step}");
    }
    assert_eq!(run.creations(15), ["s2 created"]);
    assert_eq!(run.placed(15, "s2"), placed("step 7", "end of step 15", "x1"));
    assert!(!run.slot(15, "s2").active);
    assert!(run.creations(16).is_empty(), "reported once");
    assert!(run.delivered(16).is_empty(), "x3 is still running");
    assert_eq!(run.placed(16, "s2"), placed("step 7", "end of step 15", "x2"));
    assert_eq!(run.delivered(18), ["x3 [insert 2]"]);
    assert_eq!(run.placed(18, "s2"), placed("step 7", "end of step 17", "x2"));
}

/// E2c: the exported snapshot is `c:c:` (c the next xid at the consistent point) and sees what
/// committed during the wait; the slot delivers exactly what committed after.
#[test]
fn exported_snapshot_sees_what_the_wait_let_commit() {
    let run = Sessions::of("exported-snapshot-sees-what-the-wait-let-commit");
    assert_eq!(run.creations(6), ["s4 waiting"]);
    assert_eq!(run.creations(10), ["s4 waiting"], "d_during began while it waited");
    assert_eq!(run.creations(11), ["s4 created"]);
    assert_eq!(run.placed(11, "s4"), placed("step 6", "end of step 11", "b_running"));
    assert_eq!(run.step(15).outcome.rows, Some(vec![20, 21, 22]));
    assert_eq!(run.step(16).outcome.snapshot.as_deref(), Some("xmin c_after; xmax c_after; running []"));
    assert_eq!(run.delivered(19), ["c_after [insert 23]"]);
    assert_eq!(run.placed(19, "s4"), placed("step 6", "end of step 12", "d_during"));
}

/// E3: commit order, whole transactions, one change per row in WAL order.
#[test]
fn interleaved_commits_in_commit_order() {
    let run = Sessions::of("interleaved-commits-in-commit-order");
    assert_eq!(
        run.delivered(18),
        [
            "b [insert 101]",
            "a [insert 100; insert 102]",
            "m [insert 130; insert 131; update 130; delete 131]",
            "u_multi [update 100; update 101; update 102]",
            "d_multi [delete 100; delete 101]",
        ]
    );
    assert_eq!(run.placed(18, "s5"), placed("step 1", "end of step 17", "a"));
    assert!(run.delivered(19).is_empty());
}

/// E4: rolled-back transactions are never delivered; while running they hold the slot like any
/// other; the ABORT releases it like a commit.
#[test]
fn rolled_back_transaction_never_delivered() {
    let run = Sessions::of("rolled-back-transaction-never-delivered");
    assert!(run.delivered(6).is_empty());
    assert_eq!(run.placed(6, "s1"), placed("step 1", "end of step 5", "r1"));
    assert_eq!(run.delivered(17), ["c1 [insert 111]"]);
    assert_eq!(run.placed(17, "s1"), placed("step 1", "end of step 16", "r1"));
    assert_eq!(run.delivered(20), ["c2 [insert 113]"]);
    assert_eq!(run.placed(20, "s1"), placed("step 1", "end of step 19", "r1"));
    assert!(run.delivered(22).is_empty());
    assert_eq!(run.placed(22, "s1"), placed("step 21", "end of step 21", "after c2"));
}

/// E5: transactional messages inside their committed transaction, in WAL order; non-transactional
/// ones at once, even from a rolled-back transaction, and before their own transaction.
#[test]
fn transactional_and_non_transactional_messages() {
    let run = Sessions::of("transactional-and-non-transactional-messages");
    assert_eq!(
        run.delivered(25),
        [
            "t_commit [insert 140; message x_commit 26B; insert 141]",
            "non-transactional message y_rolled_back 22B",
            "non-transactional message y_committed 22B",
            "t_commit_nontx [insert 170; insert 171]",
            "t_message [message z_autocommit 24B]",
            "non-transactional message w_autocommit 14B",
        ]
    );
}

/// Reads: REPEATABLE READ keeps its first snapshot, READ COMMITTED takes one per statement, an
/// uncommitted change is seen only by its own block; a snapshot's xmax is the latest completed
/// xid + 1, so a running xid at or above it is not listed (`GetSnapshotData`).
#[test]
fn repeatable_read_and_read_committed_reads() {
    let run = Sessions::of("repeatable-read-and-read-committed-reads");
    let rows = |step: usize| run.step(step).outcome.rows.clone().expect("a select");
    assert_eq!((rows(5), rows(8)), (vec![1], vec![1]));
    assert_eq!((rows(10), rows(11)), (vec![1], vec![1, 2]), "t2 committed in between");
    assert_eq!(rows(16), [2, 3], "x sees its own delete and insert");
    assert_eq!((rows(17), rows(18)), (vec![1], vec![1, 2]), "nobody else does");
    let snapshot = |step: usize| run.step(step).outcome.snapshot.clone().expect("a snapshot");
    assert_eq!(snapshot(19), "xmin t3; xmax t3; running []");
    assert_eq!(snapshot(21), "xmin t3; xmax t3; running []", "t_rc's new xid is above xmax");
    assert_eq!((rows(23), rows(24)), (vec![1], vec![2, 3, 4]));
    assert_eq!(snapshot(25), "xmin t_rc; xmax t_rc; running []");
    assert_eq!(rows(27), [2, 3], "outside its block, a fresh snapshot");
    assert_eq!(rows(29), [2, 3], "t_rc's insert rolled back");
}

/// E1c: a transaction begun in another database after a checkpoint pins restart_lsn at that
/// checkpoint's RX (the last before its first record); its ROLLBACK releases like a commit.
#[test]
fn rollback_in_another_database_releases_like_commit() {
    let run = Sessions::of("rollback-in-another-database-releases-like-commit");
    assert_eq!(run.delivered(5), ["a1 [insert 1]"]);
    assert_eq!(run.placed(5, "s1"), placed("step 4", "end of step 4", "after a1"));
    assert_eq!(run.delivered(11), ["a2 [insert 2]"]);
    assert_eq!(run.placed(11, "s1"), placed("step 4", "end of step 10", "other1"));
    assert_eq!(run.placed(13, "s1"), placed("step 4", "end of step 12", "other1"), "a checkpoint listing it");
    assert!(run.delivered(15).is_empty());
    assert_eq!(run.placed(15, "s1"), placed("step 4", "end of step 14", "other1"), "the ROLLBACK alone");
    assert_eq!(run.placed(17, "s1"), placed("step 16", "end of step 16", "after a2"));
}
