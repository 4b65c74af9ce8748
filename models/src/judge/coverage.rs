//! Coverage marks: the interesting situations a run reached, read off its trace.
//!
//! A sweep that never reached a situation proved nothing about it, so `handoff sweep` counts the
//! runs that reached each mark and flags the marks no run reached (TigerBeetle's coverage marks,
//! `src/testing/marks.zig`). A mark is set by the trace alone, never by a component's private
//! state.
//!
//! Not marked yet: a slot going `unreserved` (past `max_wal_size` but not yet invalidated), the
//! commit-visibility race behind an incremental snapshot's watermarks. Not marked because the
//! models do not have them: an exactly-once transaction.

use crate::core::change::ChangeKind;
use crate::core::event::Origin;
use crate::core::fault::FaultAction;
use crate::core::ids::Node;
use crate::core::lsn::Lsn;
use crate::core::observe::{Observation, SinkAction, SnapshotCase, TraceEvent};
use crate::judge::oracle::DocId;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mark {
    /// An update committed while the connector's snapshot scan was running.
    UpdateDuringScan,
    /// A delete committed while the connector's snapshot scan was running.
    DeleteDuringScan,
    /// The Connect worker or the task died, or the connector was stopped, while its snapshot was
    /// not recorded complete in the offsets topic.
    KilledBeforeCompletionStored,
    /// A second snapshot started.
    SnapshotRestarted,
    /// A snapshot ran as case B (the slot already existed: READ COMMITTED reads).
    SnapshotCaseB,
    /// A streamed change was published to Kafka twice (a replay after a restart).
    ChangeReplayed,
    /// The version guard refused a record older than the document.
    DuplicateAbsorbed,
    /// A snapshot epoch removed documents it did not see.
    EpochRemovedDocuments,
    /// Decoding was forwarded from the requested start to the slot's `confirmed_flush`.
    StreamForwarded,
    /// A restarted server's slot came back with a `confirmed_flush` older than the last
    /// confirmation (feedback never saved).
    SlotPositionWentBack,
    /// A standby was promoted and has none of the connector's slots.
    PromotedWithoutSlot,
    /// The connector's start-up check found its stored position unavailable.
    LogPositionUnavailable,
    /// The connector task failed.
    TaskFailed,
    /// An offset flush was not acknowledged in `offset.flush.timeout.ms`.
    OffsetFlushTimedOut,
    /// A network link was clogged.
    LinkClogged,
    /// A checkpoint invalidated a slot that fell behind `max_slot_wal_keep_size`.
    SlotInvalidated,
    /// Debezium's slot reader found the slot row not valid (`restart_lsn` NULL) and read it again:
    /// the 900-attempt loop (`MAX_ATTEMPTS_FOR_OBTAINING_REPLICATION_SLOT`).
    SlotInfoRetried,
    /// The 900-attempt loop ran out and the task failed.
    SlotInfoAttemptsExhausted,
    /// A standby's slotsync worker copied a failover slot (PostgreSQL 17 `sync_replication_slots`).
    SlotSynced,
    /// A standby was promoted with a copy of the connector's slot (a synced failover slot).
    PromotedWithSyncedSlot,
    /// The JDBC driver confirmed a keep-alive's LSN to the slot
    /// (`lsn.flush.mode=connector_and_driver`).
    KeepaliveConfirmed,
    /// The run reached its acceptance boundary with the pipeline caught up.
    AcceptanceReached,
    /// The connector's transforms routed an outbox event to its topic (I9's path).
    OutboxEventRouted,
    /// The outbox's consumer's inbox absorbed a redelivered event (I10's rule at work).
    InboxAbsorbed,
    /// The outbox's consumer applied an event's side effect a second time (I10 violated).
    EffectAppliedAgain,
    /// An incremental snapshot's watermark window closed on the stream (its chunk emitted).
    WindowClosed,
    /// A streamed event removed a row from an open window's buffer (the DBLog dedup rule).
    WindowDeduplicated,
    /// A task start took a running incremental snapshot up again from its stored offset.
    BackfillResumed,
    /// A chunk query (or the maximum-key query) ran while a transaction that changed a row in its
    /// range had its commit record in the WAL but was not yet visible: the precondition of the
    /// incremental snapshot's visibility race.
    ReadMissedCommit,
}

impl Mark {
    pub const ALL: [Mark; 29] = [
        Mark::UpdateDuringScan,
        Mark::DeleteDuringScan,
        Mark::KilledBeforeCompletionStored,
        Mark::SnapshotRestarted,
        Mark::SnapshotCaseB,
        Mark::ChangeReplayed,
        Mark::DuplicateAbsorbed,
        Mark::EpochRemovedDocuments,
        Mark::StreamForwarded,
        Mark::SlotPositionWentBack,
        Mark::PromotedWithoutSlot,
        Mark::LogPositionUnavailable,
        Mark::TaskFailed,
        Mark::OffsetFlushTimedOut,
        Mark::LinkClogged,
        Mark::SlotInvalidated,
        Mark::SlotInfoRetried,
        Mark::SlotInfoAttemptsExhausted,
        Mark::SlotSynced,
        Mark::PromotedWithSyncedSlot,
        Mark::KeepaliveConfirmed,
        Mark::AcceptanceReached,
        Mark::OutboxEventRouted,
        Mark::InboxAbsorbed,
        Mark::EffectAppliedAgain,
        Mark::WindowClosed,
        Mark::WindowDeduplicated,
        Mark::BackfillResumed,
        Mark::ReadMissedCommit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mark::UpdateDuringScan => "update during the snapshot scan",
            Mark::DeleteDuringScan => "delete during the snapshot scan",
            Mark::KilledBeforeCompletionStored => "killed or stopped before the completion marker was stored",
            Mark::SnapshotRestarted => "snapshot restarted",
            Mark::SnapshotCaseB => "snapshot with the slot already there (case B)",
            Mark::ChangeReplayed => "streamed change replayed into Kafka",
            Mark::DuplicateAbsorbed => "duplicate absorbed by the version guard",
            Mark::EpochRemovedDocuments => "snapshot epoch removed documents",
            Mark::StreamForwarded => "stream start forwarded to confirmed_flush",
            Mark::SlotPositionWentBack => "slot confirmed_flush went back after a crash",
            Mark::PromotedWithoutSlot => "promotion with the slot missing",
            Mark::LogPositionUnavailable => "stored position unavailable at start-up",
            Mark::TaskFailed => "connector task failed",
            Mark::OffsetFlushTimedOut => "offset flush timed out",
            Mark::LinkClogged => "network link clogged",
            Mark::SlotInvalidated => "slot invalidated at a checkpoint",
            Mark::SlotInfoRetried => "slot row read again (the 900-attempt loop)",
            Mark::SlotInfoAttemptsExhausted => "900-attempt loop ran out, task failed",
            Mark::SlotSynced => "failover slot synced to the standby",
            Mark::PromotedWithSyncedSlot => "promotion with a synced slot",
            Mark::KeepaliveConfirmed => "keep-alive LSN confirmed by the driver",
            Mark::AcceptanceReached => "acceptance boundary reached",
            Mark::OutboxEventRouted => "outbox event routed to its topic",
            Mark::InboxAbsorbed => "redelivered event absorbed by the inbox",
            Mark::EffectAppliedAgain => "event's side effect applied again",
            Mark::WindowClosed => "incremental snapshot window closed",
            Mark::WindowDeduplicated => "streamed event dropped a row from a window",
            Mark::BackfillResumed => "incremental snapshot resumed after a restart",
            Mark::ReadMissedCommit => "chunk query missed a commit already in the WAL (visibility race)",
        }
    }
}

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Follows a trace and sets marks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    pub marks: BTreeSet<Mark>,
    scanning: bool,
    snapshots: u32,
    /// A snapshot started and no offset flush has stored its completion (or a streaming offset).
    snapshot_unrecorded: bool,
    published: BTreeSet<(Lsn, DocId)>,
    last_confirmed: BTreeMap<(Node, String), Lsn>,
    /// The task is in the 900-attempt loop: it found the slot row not valid and has not read a
    /// valid one since.
    reading_slot_again: bool,
}

impl Coverage {
    pub fn observe(&mut self, event: &TraceEvent) {
        match &event.observation {
            Observation::ScanStarted { client: Node::Connect | Node::Connect2 | Node::Connect3, .. } => {
                self.scanning = true
            }
            Observation::SnapshotCompleted { .. } => self.scanning = false,
            Observation::Committed { txn, .. } if self.scanning => {
                for change in &txn.changes {
                    match change.kind {
                        ChangeKind::Update { .. } => self.marks.insert(Mark::UpdateDuringScan),
                        ChangeKind::Delete { .. } => self.marks.insert(Mark::DeleteDuringScan),
                        ChangeKind::Insert { .. } => false,
                    };
                }
            }
            Observation::SnapshotStarted { case, .. } => {
                self.snapshots += 1;
                self.snapshot_unrecorded = true;
                if self.snapshots > 1 {
                    self.marks.insert(Mark::SnapshotRestarted);
                }
                if *case == SnapshotCase::SlotExisted {
                    self.marks.insert(Mark::SnapshotCaseB);
                }
            }
            Observation::SourceOffsetStored { offset: Some(offset), .. }
                if offset.snapshot.is_none() || offset.snapshot_is_completed() =>
            {
                self.snapshot_unrecorded = false;
            }
            Observation::Fault { action } => {
                let takes_the_task = matches!(
                    action,
                    FaultAction::KillConnectWorker { .. }
                        | FaultAction::KillConnectorTask { .. }
                        | FaultAction::StopConnector { .. }
                );
                if takes_the_task && self.snapshot_unrecorded {
                    self.marks.insert(Mark::KilledBeforeCompletionStored);
                }
                if takes_the_task {
                    self.scanning = false;
                    self.reading_slot_again = false;
                }
                if matches!(action, FaultAction::Clog { .. }) {
                    self.marks.insert(Mark::LinkClogged);
                }
            }
            Observation::WindowClosed { deduplicated, .. } => {
                self.marks.insert(Mark::WindowClosed);
                if *deduplicated > 0 {
                    self.marks.insert(Mark::WindowDeduplicated);
                }
            }
            Observation::IncrementalSnapshotResumed { .. } => {
                self.marks.insert(Mark::BackfillResumed);
            }
            Observation::ReadMissedCommit { .. } => {
                self.marks.insert(Mark::ReadMissedCommit);
            }
            Observation::Transformed { routed, .. } if *routed > 0 => {
                self.marks.insert(Mark::OutboxEventRouted);
            }
            Observation::EventHandled { handled, .. } => match handled {
                crate::core::observe::Handled::Absorbed => {
                    self.marks.insert(Mark::InboxAbsorbed);
                }
                crate::core::observe::Handled::Applied { times } if *times > 1 => {
                    self.marks.insert(Mark::EffectAppliedAgain);
                }
                _ => {}
            },
            Observation::Appended { records, .. } => {
                for record in records {
                    let Some(event) = record.value else { continue };
                    if event.source.snapshot.is_snapshot()
                        || event.source.connector != Origin::Postgresql
                        || event.op == crate::core::event::Op::Message
                    {
                        continue;
                    }
                    if !self.published.insert((event.source.lsn, (event.source.table, record.key))) {
                        self.marks.insert(Mark::ChangeReplayed);
                    }
                }
            }
            Observation::SinkApplied { applies }
                if applies.iter().any(|apply| apply.action == SinkAction::RejectedStale) =>
            {
                self.marks.insert(Mark::DuplicateAbsorbed);
            }
            Observation::SinkReconciled { removed, .. } if !removed.is_empty() => {
                self.marks.insert(Mark::EpochRemovedDocuments);
            }
            Observation::StreamStarted { requested, start, .. } if requested.is_valid() && start > requested => {
                self.marks.insert(Mark::StreamForwarded);
            }
            Observation::SlotConfirmed { server, slot, to, .. } => {
                self.last_confirmed.insert((*server, slot.clone()), *to);
            }
            Observation::ServerStarted { server, slots, .. } => {
                for (slot, confirmed) in slots {
                    if self.last_confirmed.get(&(*server, slot.clone())).is_some_and(|last| confirmed < last) {
                        self.marks.insert(Mark::SlotPositionWentBack);
                    }
                }
            }
            Observation::Promoted { slots, .. } => {
                // A promoted standby has logical slots only as copies its slotsync worker made.
                self.marks.insert(if slots.is_empty() {
                    Mark::PromotedWithoutSlot
                } else {
                    Mark::PromotedWithSyncedSlot
                });
            }
            Observation::SlotInvalidated { .. } => {
                self.marks.insert(Mark::SlotInvalidated);
            }
            Observation::SlotSynced { .. } => {
                self.marks.insert(Mark::SlotSynced);
            }
            Observation::KeepaliveConfirmed { .. } => {
                self.marks.insert(Mark::KeepaliveConfirmed);
            }
            Observation::SlotInfoRetry { .. } => {
                self.marks.insert(Mark::SlotInfoRetried);
                self.reading_slot_again = true;
            }
            Observation::SlotRead { .. }
            | Observation::TaskStarted { .. }
            | Observation::Crashed { process: Node::Connect | Node::Connect2 | Node::Connect3 } => {
                self.reading_slot_again = false;
            }
            Observation::LogPositionChecked { available, .. } => {
                // The row the check read was valid: the loop, if it ran, is over.
                self.reading_slot_again = false;
                if !available {
                    self.marks.insert(Mark::LogPositionUnavailable);
                }
            }
            Observation::TaskFailed { .. } => {
                self.marks.insert(Mark::TaskFailed);
                if std::mem::take(&mut self.reading_slot_again) {
                    self.marks.insert(Mark::SlotInfoAttemptsExhausted);
                }
            }
            Observation::OffsetFlushFailed { .. } => {
                self.marks.insert(Mark::OffsetFlushTimedOut);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Coverage, Mark};
    use crate::core::ids::Node;
    use crate::core::observe::{Observation, TraceEvent};
    use crate::core::time::SimTime;

    fn marks(observations: Vec<Observation>) -> Vec<Mark> {
        let mut coverage = Coverage::default();
        for observation in observations {
            coverage.observe(&TraceEvent { at: SimTime::ZERO, node: Node::Connect, observation });
        }
        coverage.marks.into_iter().collect()
    }

    fn failed() -> Observation {
        Observation::TaskFailed { reason: "failed".into() }
    }

    #[test]
    fn only_a_failure_inside_the_slot_read_loop_is_the_loop_running_out() {
        let retry = || Observation::SlotInfoRetry { attempt: 1 };
        assert_eq!(
            marks(vec![retry(), failed()]),
            [Mark::TaskFailed, Mark::SlotInfoRetried, Mark::SlotInfoAttemptsExhausted]
        );
        // The row became valid and the check then failed the task: not the loop.
        let checked = Observation::LogPositionChecked { available: false, detail: String::new() };
        assert_eq!(
            marks(vec![retry(), checked, failed()]),
            [Mark::LogPositionUnavailable, Mark::TaskFailed, Mark::SlotInfoRetried]
        );
        // A valid row read, then a later failure: not the loop either.
        assert_eq!(
            marks(vec![retry(), Observation::SlotRead { row: None }, failed()]),
            [Mark::TaskFailed, Mark::SlotInfoRetried]
        );
        // The worker crashed in the loop; the restarted task fails for another reason.
        let crashed = Observation::Crashed { process: Node::Connect };
        assert_eq!(marks(vec![retry(), crashed, failed()]), [Mark::TaskFailed, Mark::SlotInfoRetried]);
    }

    #[test]
    fn a_promotion_marks_whether_the_standby_had_the_slot() {
        let promoted = |slots: Vec<String>| Observation::Promoted {
            server: Node::Pg2,
            timeline: 2,
            switch_lsn: crate::core::lsn::Lsn(0x100),
            csn: 1,
            slots,
        };
        assert_eq!(marks(vec![promoted(Vec::new())]), [Mark::PromotedWithoutSlot]);
        assert_eq!(marks(vec![promoted(vec!["debezium".into()])]), [Mark::PromotedWithSyncedSlot]);
    }
}
