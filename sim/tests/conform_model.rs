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
