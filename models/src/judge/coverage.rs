//! Coverage marks: the interesting situations a run reached, read off its trace.
//!
//! A sweep that never reached a situation proved nothing about it, so `handoff explore` counts the
//! runs that reached each mark and flags the marks no run reached (TigerBeetle's coverage marks,
//! `src/testing/marks.zig`). A mark is set by the trace alone, never by a component's private
//! state.
//!
//! Not marked yet: a slot going `unreserved` or `lost` (the server models WAL retention and
//! invalidates slots at a checkpoint, but no mark says a run got there). Not marked because the
//! models do not have them: an incremental snapshot's chunk window, an exactly-once transaction.

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
    /// The run reached its acceptance boundary with the pipeline caught up.
    AcceptanceReached,
}

impl Mark {
    pub const ALL: [Mark; 16] = [
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
        Mark::AcceptanceReached,
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
            Mark::AcceptanceReached => "acceptance boundary reached",
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
}

impl Coverage {
    pub fn observe(&mut self, event: &TraceEvent) {
        match &event.observation {
            Observation::ScanStarted { client: Node::Connect, .. } => self.scanning = true,
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
                }
                if matches!(action, FaultAction::Clog { .. }) {
                    self.marks.insert(Mark::LinkClogged);
                }
            }
            Observation::Appended { records } => {
                for record in records {
                    let Some(event) = record.value else { continue };
                    if event.source.snapshot.is_snapshot() || event.source.connector != Origin::Postgresql {
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
            Observation::Promoted { slots, .. } if slots.is_empty() => {
                self.marks.insert(Mark::PromotedWithoutSlot);
            }
            Observation::LogPositionChecked { available: false, .. } => {
                self.marks.insert(Mark::LogPositionUnavailable);
            }
            Observation::TaskFailed { .. } => {
                self.marks.insert(Mark::TaskFailed);
            }
            Observation::OffsetFlushFailed { .. } => {
                self.marks.insert(Mark::OffsetFlushTimedOut);
            }
            _ => {}
        }
    }
}
