//! Coverage marks: each mark is reached by a run that should reach it, and a mark for a situation
//! a run does not get into stays unset. A sweep flags the marks no run reached; a mark that could
//! never be set would be flagged forever and prove nothing, so every mark has its run here.
#![cfg(madsim)]

mod common;

use handoff_models::judge::coverage::Mark;
use handoff_models::scenario::spec::Spec;
use std::collections::{BTreeMap, BTreeSet};

/// A run: a bundled scenario with `--set` overrides, at its own seed; or a scenario written here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Run {
    Bundled(&'static str, &'static [&'static str]),
    /// The claims table with a connect–kafka clog from t=55s to t=75s, across the first offset
    /// flush (at t=60s, `offset.flush.interval.ms` 60 s): the flush waits on Kafka longer than
    /// `offset.flush.timeout.ms` (5 s).
    ClogAcrossTheFirstFlush,
}

/// Long enough after the last fault for Debezium's 900 slot reads, 2 s apart (30 minutes).
const WAIT_OUT_THE_SLOT_READS: &[&str] = &["acceptance.timeout_ms=2400000"];

/// The run that reaches `mark`, and why it must. No wildcard arm: a new mark does not compile
/// until it has a run here.
fn reached_by(mark: Mark) -> Run {
    match mark {
        // The runbook's restart test: an update and a delete while the scan runs, the worker
        // killed before the completion marker is stored, then case B.
        Mark::UpdateDuringScan
        | Mark::DeleteDuringScan
        | Mark::KilledBeforeCompletionStored
        | Mark::SnapshotRestarted
        | Mark::SnapshotCaseB
        | Mark::DuplicateAbsorbed
        | Mark::AcceptanceReached => Run::Bundled("claims-restart-during-snapshot", &[]),
        // A worker killed after streaming: what Kafka acknowledged past the last flush is
        // produced again.
        Mark::ChangeReplayed => Run::Bundled("claims-failover-pg17-synchronized-restart", &[]),
        // PostgreSQL 15 failover: no slot on the promoted standby, the gate rebuilds, and the
        // new snapshot's epoch removes what the old history had and the new one does not.
        Mark::PromotedWithoutSlot | Mark::EpochRemovedDocuments => Run::Bundled("claims-failover", &[]),
        // The slot recreated on the promoted standby: the stored `lsn` is below its
        // `confirmed_flush`, and the server forwards the stream.
        Mark::StreamForwarded => Run::Bundled("claims-failover-right-after-snapshot", &[]),
        // A server crash: the slot comes back with the `confirmed_flush` last saved.
        Mark::SlotPositionWentBack => Run::Bundled("claims-slot-cap-crash-recovery", &[]),
        // The worker down at promotion: at restart the stored position is not on the new slot.
        Mark::LogPositionUnavailable | Mark::TaskFailed => {
            Run::Bundled("claims-failover-worker-down-at-promotion", &[])
        }
        Mark::OffsetFlushTimedOut => Run::ClogAcrossTheFirstFlush,
        Mark::LinkClogged => Run::Bundled("claims-consumer-starts-late", &[]),
        // 2 GB of WAL past a 1 GB cap: the next checkpoint invalidates the slot, and Debezium's
        // slot reader finds `restart_lsn` NULL and reads it again every 2 s.
        Mark::SlotInvalidated | Mark::SlotInfoRetried => Run::Bundled("claims-slot-cap-running-connector", &[]),
        // The same, waited out: the 900th read fails the task.
        Mark::SlotInfoAttemptsExhausted => Run::Bundled("claims-slot-cap-running-connector", WAIT_OUT_THE_SLOT_READS),
        // PostgreSQL 17, `sync_replication_slots`: the standby copies the failover slot and the
        // promoted standby has it.
        Mark::SlotSynced | Mark::PromotedWithSyncedSlot => Run::Bundled("claims-failover-pg17-synchronized", &[]),
        // `lsn.flush.mode=connector_and_driver` on a quiet database: pgjdbc confirms the
        // walsender's keep-alive LSN.
        Mark::KeepaliveConfirmed => Run::Bundled("claims-quiet-database-keepalive-fix", &[]),
        // Game-day drill 1: the events routed, replayed after the worker's kill, and absorbed
        // by the inbox; without one, applied again.
        Mark::OutboxEventRouted | Mark::InboxAbsorbed => Run::Bundled("outbox-status-changes-connect-killed", &[]),
        Mark::EffectAppliedAgain => Run::Bundled("outbox-status-changes-connect-killed", NO_INBOX),
        // Game-day drill 2: the backfill's windows close.
        Mark::WindowClosed => Run::Bundled("hubs-backfill", &[]),
        // A hub updated and one deleted inside chunk 2's window.
        Mark::WindowDeduplicated => Run::Bundled("hubs-backfill-changes-in-window", &[]),
        // The worker killed as window 60 closes, after an offset with the context was stored.
        Mark::BackfillResumed => Run::Bundled("hubs-backfill-restart", &[]),
        // The path `handoff check` found: hub 2's delete has its commit record in the WAL before
        // chunk 2's open watermark, and is not yet visible when the chunk query runs.
        Mark::ReadMissedCommit => Run::Bundled("hubs-backfill-visibility-race", &[]),
    }
}

/// The drill's consumer without an inbox.
const NO_INBOX: &[&str] = &["consumer.inbox=none"];

fn spec_and_seed(run: Run) -> (Spec, u64) {
    match run {
        Run::Bundled(name, sets) => common::load(name, sets),
        Run::ClogAcrossTheFirstFlush => {
            let rest = "[sink]\napply = \"version-guard\"\n\
                        [workload]\nstart_ms = 0\nend_ms = 60000\ninserts_per_second = 1.0\n\
                        [prediction]\nverdict = \"holds\"\nwhy = \"a clog only delays\"\n\
                        [[fault]]\nat = \"55s\"\naction = \"clog\"\nbetween = [\"connect\", \"kafka\"]\nduration_ms = 20000\n";
            (common::load_text(&common::claims("clog-across-the-first-flush", 200, "", rest)), 1)
        }
    }
}

fn marks_of(run: Run) -> BTreeSet<Mark> {
    let (spec, seed) = spec_and_seed(run);
    common::run(&spec, seed).coverage
}

#[test]
fn every_mark_is_reached_by_a_run_that_should_reach_it() {
    let mut runs: BTreeMap<Run, Vec<Mark>> = BTreeMap::new();
    for mark in Mark::ALL {
        runs.entry(reached_by(mark)).or_default().push(mark);
    }
    for (run, marks) in runs {
        let reached = marks_of(run);
        for mark in marks {
            assert!(reached.contains(&mark), "{run:?} should reach \"{mark}\"; it reached {reached:?}");
        }
    }
}

#[test]
fn marks_stay_unset_where_the_situation_does_not_arise() {
    let cases: [(Run, &[Mark]); 5] = [
        // Hub 20's update and hub 25's delete are autocommit statements: visible as they commit,
        // so no chunk query misses them.
        (Run::Bundled("hubs-backfill-changes-in-window", &[]), &[Mark::ReadMissedCommit]),
        // The bundled drill ends ten minutes after its burst: the slot reader is still reading.
        (Run::Bundled("claims-slot-cap-running-connector", &[]), &[Mark::SlotInfoAttemptsExhausted, Mark::TaskFailed]),
        // PostgreSQL 15 has no failover slots.
        (Run::Bundled("claims-failover", &[]), &[Mark::SlotSynced, Mark::PromotedWithSyncedSlot]),
        // The default `lsn.flush.mode=connector`: pgjdbc never confirms a keep-alive.
        (Run::Bundled("claims-quiet-database", &[]), &[Mark::KeepaliveConfirmed, Mark::AcceptanceReached]),
        // No cap, no crash: nothing is invalidated and no slot row is read twice.
        (
            Run::Bundled("claims-restart-during-snapshot", &[]),
            &[
                Mark::SlotInvalidated,
                Mark::SlotInfoRetried,
                Mark::SlotPositionWentBack,
                Mark::OutboxEventRouted,
                Mark::InboxAbsorbed,
                Mark::EffectAppliedAgain,
            ],
        ),
    ];
    for (run, absent) in cases {
        let reached = marks_of(run);
        for mark in absent {
            assert!(!reached.contains(mark), "{run:?} should not reach \"{mark}\"; it reached {reached:?}");
        }
    }
}
