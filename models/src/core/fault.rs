//! What the harness does to the system (faults and operator actions) and the model moments a
//! trigger can wait for: observations name them, so they belong to the core.

use crate::core::ids::Node;
use crate::core::lsn::Lsn;
use serde::{Deserialize, Serialize};
use std::fmt;

/// A model moment that triggers can wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Moment {
    /// The connector's snapshot `SELECT` began (its snapshot is fixed from now on).
    SnapshotScanStarted,
    /// Kafka acknowledged the record carrying `snapshot_completed=true`, and no offset flush has
    /// stored it yet: "immediately before the connector records completion".
    SnapshotCompletionMarkerAcked,
    /// The connector finished reading its snapshot.
    SnapshotCompleted,
    /// An offset flush stored the completion marker.
    SnapshotCompletionStored,
    /// The connector's replication stream started.
    StreamingStarted,
    /// Kafka acknowledged a batch with streamed changes: they wait for the next offset flush
    /// (the offset-flush window). `#n` is the n-th such batch.
    ChangeAcked,
    /// An offset flush stored offsets in the offsets topic.
    OffsetsStored,
    /// The connector task started (and read its stored offset).
    TaskStarted,
    /// The standby was promoted.
    Promoted,
    /// A transaction block's commit record is in WAL and the transaction is not yet visible to
    /// new snapshots nor answered (`RecordTransactionCommit` done, `ProcArrayEndTransaction`
    /// not yet, `xact.c`).
    CommitInWal,
    /// The outbox's consumer finished a local transaction (or its offset commit, for
    /// `offset-before-effect`) on a routed record: `#n` is the n-th.
    EventHandled,
    /// An incremental snapshot's window closed on the stream (its buffered rows emitted, the
    /// next chunk's read begun): `#n` is the n-th.
    WindowClosed,
}

impl Moment {
    pub const ALL: [Moment; 12] = [
        Moment::SnapshotScanStarted,
        Moment::SnapshotCompletionMarkerAcked,
        Moment::SnapshotCompleted,
        Moment::SnapshotCompletionStored,
        Moment::StreamingStarted,
        Moment::ChangeAcked,
        Moment::OffsetsStored,
        Moment::TaskStarted,
        Moment::Promoted,
        Moment::CommitInWal,
        Moment::EventHandled,
        Moment::WindowClosed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Moment::SnapshotScanStarted => "snapshot-scan-started",
            Moment::SnapshotCompletionMarkerAcked => "snapshot-completion-marker-acked",
            Moment::SnapshotCompleted => "snapshot-completed",
            Moment::SnapshotCompletionStored => "snapshot-completion-stored",
            Moment::StreamingStarted => "streaming-started",
            Moment::ChangeAcked => "change-acked",
            Moment::OffsetsStored => "offsets-stored",
            Moment::TaskStarted => "task-started",
            Moment::Promoted => "promoted",
            Moment::CommitInWal => "commit-in-wal",
            Moment::EventHandled => "event-handled",
            Moment::WindowClosed => "incremental-window-closed",
        }
    }

    pub fn parse(text: &str) -> Option<Moment> {
        Moment::ALL.into_iter().find(|moment| moment.name() == text)
    }
}

/// When something happens: at a simulated time, or some time after the first (or n-th)
/// occurrence of a moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Trigger {
    At { at_ms: u64 },
    After { moment: Moment, occurrence: u32, plus_ms: u64 },
}

impl Trigger {
    /// Its time: the simulated time, or the delay after the moment.
    pub fn ms(&self) -> u64 {
        match *self {
            Trigger::At { at_ms } => at_ms,
            Trigger::After { plus_ms, .. } => plus_ms,
        }
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trigger::At { at_ms } => write!(f, "{}", crate::core::time::SimTime(*at_ms)),
            Trigger::After { moment, occurrence, plus_ms } => {
                if *occurrence > 1 {
                    write!(f, "occurrence {occurrence} of ")?;
                }
                write!(f, "{}", moment.name())?;
                if *plus_ms > 0 {
                    write!(f, " + {plus_ms} ms")?;
                }
                Ok(())
            }
        }
    }
}

/// A fault (or operator action) the harness injects. In JSON (a timeline event's fields) it is
/// `{"action": "kill-connect-worker", "restart_after_ms": 10000}`, the scenario format's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum FaultAction {
    /// Hard-kill the Connect worker process (the task dies with it); start it again later.
    KillConnectWorker { restart_after_ms: Option<u64> },
    /// `PUT /connectors/<name>/stop`, and `resume` later.
    StopConnector { resume_after_ms: Option<u64> },
    /// Crash the primary PostgreSQL server (`pg_ctl stop -m immediate`) and start it again.
    CrashPostgres { restart_after_ms: u64 },
    /// The primary's host is lost; the standby is promoted `promote_after_ms` later and the
    /// database service name moves to it.
    FailOverToStandby { promote_after_ms: u64 },
    /// An operator drops the connector's slot (if it exists) and creates it again with
    /// `pg_create_logical_replication_slot` — what the Debezium documentation asks for on a
    /// promoted PostgreSQL ≤ 16 ("create the slot on the new primary").
    RecreateSlot,
    /// The recovery runbook for a slot that cannot be trusted: stop the connector, delete its
    /// offsets, drop its slot (if it exists) and resume it, so that it snapshots again on a new
    /// slot (an invalidated slot is never dropped by Debezium itself,
    /// `PostgresConnection.fetchReplicationSlotInfo`; a slot that cannot resume needs a new slot
    /// and a new snapshot, PostgreSQL documentation, "Logical Replication Failover").
    RebuildConnector,
    /// The connector's task dies on its own (the worker lives on): no final offset commit; it is
    /// restarted (`POST /connectors/<name>/tasks/0/restart`) `restart_after_ms` later.
    KillConnectorTask { restart_after_ms: Option<u64> },
    /// The network between two processes clogs for `duration_ms`: messages wait, then arrive in
    /// order (a stalled TCP connection, not a reset).
    Clog { between: (Node, Node), duration_ms: u64 },
    /// `bytes` of WAL written in a database nobody captures.
    WalBurst { bytes: u64 },
    /// `CHECKPOINT` on the primary.
    Checkpoint,
    /// An operator advances the connector's slot by hand:
    /// `SELECT pg_replication_slot_advance('<slot>', <to>)` with `to_lsn`, or, without one,
    /// `pg_current_wal_lsn()` (the WAL end: the function clamps its target to the flush pointer).
    /// PostgreSQL refuses it while a walsender holds the slot and below `confirmed_flush`; the
    /// operator reports the refusal and does nothing else.
    AdvanceSlot { to_lsn: Option<Lsn> },
    /// Hard-kill the outbox's consumer (its database keeps the inbox and the side effects; the
    /// group keeps its committed offsets); start it again later.
    KillConsumer { restart_after_ms: Option<u64> },
    /// A hanging transaction (reference kafka-connect.md §3.3; KIP-664, KIP-890): a delayed
    /// produce request of the exactly-once task's last transaction arrives after that transaction
    /// ended and leaves an open transaction on the partition that the coordinator does not know.
    /// The partition's last stable offset stops there: `read_committed` consumers stall and the
    /// log cleaner stops; nothing reports an error. `abort_after_ms` later an operator finds it
    /// (`kafka-transactions.sh find-hanging`) and aborts it (`kafka-transactions.sh abort`).
    HangTransaction { abort_after_ms: Option<u64> },
    /// A Connect worker of a group shuts down cleanly (SIGTERM): its tasks stop gracefully, it
    /// sends LeaveGroup, the process ends; it is started again `restart_after_ms` later.
    StopConnectWorker { restart_after_ms: Option<u64> },
    /// A Connect worker stops for `duration_ms` (a long garbage-collection pause, a frozen VM):
    /// nothing it does happens meanwhile — no heartbeat, no poll, no timer — and what reaches it
    /// waits; then it goes on where it was, still believing it runs its tasks.
    PauseConnectWorker { duration_ms: u64 },
}

impl FaultAction {
    /// Whether it acts on one connector (its REST API, its task, its slot): with several
    /// connectors, a scenario names which.
    pub fn acts_on_a_connector(&self) -> bool {
        matches!(
            self,
            FaultAction::StopConnector { .. }
                | FaultAction::KillConnectorTask { .. }
                | FaultAction::RecreateSlot
                | FaultAction::RebuildConnector
                | FaultAction::AdvanceSlot { .. }
        )
    }

    /// How long after it the fault heals itself (a restart, a resume, a promotion, the end of a
    /// clog), if it does.
    pub fn delay_ms(&self) -> Option<u64> {
        match *self {
            FaultAction::KillConnectWorker { restart_after_ms: Some(ms) }
            | FaultAction::KillConnectorTask { restart_after_ms: Some(ms) }
            | FaultAction::StopConnector { resume_after_ms: Some(ms) }
            | FaultAction::CrashPostgres { restart_after_ms: ms }
            | FaultAction::FailOverToStandby { promote_after_ms: ms }
            | FaultAction::Clog { duration_ms: ms, .. }
            | FaultAction::HangTransaction { abort_after_ms: Some(ms) }
            | FaultAction::StopConnectWorker { restart_after_ms: Some(ms) }
            | FaultAction::PauseConnectWorker { duration_ms: ms } => Some(ms),
            _ => None,
        }
    }
}

impl fmt::Display for FaultAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultAction::KillConnectWorker { restart_after_ms } => {
                write!(f, "kill-connect-worker")?;
                if let Some(after) = restart_after_ms {
                    write!(f, " (restart after {after} ms)")?;
                }
                Ok(())
            }
            FaultAction::StopConnector { resume_after_ms } => {
                write!(f, "stop-connector")?;
                if let Some(after) = resume_after_ms {
                    write!(f, " (resume after {after} ms)")?;
                }
                Ok(())
            }
            FaultAction::CrashPostgres { restart_after_ms } => {
                write!(f, "crash-postgres (restart after {restart_after_ms} ms)")
            }
            FaultAction::FailOverToStandby { promote_after_ms } => {
                write!(f, "fail-over-to-standby (promote after {promote_after_ms} ms)")
            }
            FaultAction::RecreateSlot => write!(f, "recreate-slot (drop it if it exists, create it again by SQL)"),
            FaultAction::RebuildConnector => {
                write!(f, "rebuild-connector (stop it, delete its offsets, drop its slot, resume it on a new slot)")
            }
            FaultAction::KillConnectorTask { restart_after_ms } => {
                write!(f, "kill-connector-task")?;
                if let Some(after) = restart_after_ms {
                    write!(f, " (restart after {after} ms)")?;
                }
                Ok(())
            }
            FaultAction::Clog { between: (a, b), duration_ms } => {
                write!(f, "clog {a} <-> {b} for {duration_ms} ms")
            }
            FaultAction::WalBurst { bytes } => {
                write!(f, "wal-burst of {} in another database", crate::core::units::size_text(*bytes))
            }
            FaultAction::Checkpoint => write!(f, "checkpoint"),
            FaultAction::AdvanceSlot { to_lsn: Some(lsn) } => {
                write!(f, "advance-slot to {lsn} (pg_replication_slot_advance by hand)")
            }
            FaultAction::AdvanceSlot { to_lsn: None } => {
                write!(f, "advance-slot to the WAL end (pg_replication_slot_advance by hand)")
            }
            FaultAction::KillConsumer { restart_after_ms } => {
                write!(f, "kill-consumer")?;
                if let Some(after) = restart_after_ms {
                    write!(f, " (restart after {after} ms)")?;
                }
                Ok(())
            }
            FaultAction::HangTransaction { abort_after_ms } => {
                write!(
                    f,
                    "hang-transaction (a delayed produce request leaves an open transaction the coordinator does not know)"
                )?;
                if let Some(after) = abort_after_ms {
                    write!(f, " (kafka-transactions.sh abort after {after} ms)")?;
                }
                Ok(())
            }
            FaultAction::StopConnectWorker { restart_after_ms } => {
                write!(f, "stop-connect-worker (a clean shutdown: its tasks stop, it leaves the group)")?;
                if let Some(after) = restart_after_ms {
                    write!(f, " (start again after {after} ms)")?;
                }
                Ok(())
            }
            FaultAction::PauseConnectWorker { duration_ms } => {
                write!(
                    f,
                    "pause-connect-worker for {duration_ms} ms (a stop-the-world pause: it does nothing, then goes on)"
                )
            }
        }
    }
}

/// What became of a fault that did not simply take effect when it came: `refused` (it did
/// nothing where the run stood) or `waited` (an operator's procedure ran once the one before it
/// ended). `--json` gives it as the fault note's `outcome`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultOutcome {
    Refused,
    Waited,
}

impl fmt::Display for FaultOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultOutcome::Refused => "refused",
            FaultOutcome::Waited => "waited",
        })
    }
}
