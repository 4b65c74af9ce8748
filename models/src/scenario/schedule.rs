//! The steps of an exhaustive path, as data: what `handoff check` prints for a counterexample and
//! a scenario's `[schedule]` lists, and the operator actions and preconditions of a `[check]`
//! bound. The exhaustive lens takes these steps ([`crate::exhaustive::world`]); the timed lens
//! follows them.

use crate::core::component::Timer;
use crate::core::fault::FaultAction;
use crate::core::ids::Node;
use serde::{Deserialize, Serialize};

/// The processes of the world (the loader, the consumer and the second Connect worker only when
/// the scenario has one).
pub const NODES: [Node; 9] = [
    Node::Pg1,
    Node::Connect,
    Node::Kafka,
    Node::Sink,
    Node::App,
    Node::Operator,
    Node::Loader,
    Node::Consumer,
    Node::Connect2,
];

/// One step the world can take.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Action {
    /// Deliver the oldest message on the link `from → to`.
    Deliver { from: Node, to: Node },
    /// An armed timer fires.
    Fire { node: Node, timer: Timer },
    /// The application runs scripted transaction `index`.
    RunScripted { index: usize },
    /// A process crashes.
    Crash { node: Node },
    /// A crashed process starts again.
    Restart { node: Node },
    /// A Connect worker pauses (a stop-the-world GC pause, a stall) for longer than its
    /// `session.timeout.ms` and PostgreSQL's `wal_sender_timeout`: the group coordinator
    /// removes its member and its walsender ends, while the worker itself keeps its state and
    /// goes on afterwards: a zombie.
    Pause { node: Node },
    /// The operator does something by hand (each operation of the bound at most once).
    Operate { operation: Operation },
}

/// What an operator may do by hand in a bound (`[check] operations`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Operation {
    /// Drop the connector's slot and create it again (`pg_drop_replication_slot`,
    /// `pg_create_logical_replication_slot`), the connector's offsets left as they are.
    RecreateSlot,
    /// The recovery runbook: stop the connector, delete its offsets, drop its slot, resume.
    RebuildConnector,
    /// Advance the connector's slot to the WAL end by hand (`pg_replication_slot_advance`), the
    /// connector's offsets left as they are.
    AdvanceSlot,
}

/// When the operator may act in a bound (`[check] operate_while`): a drill's precondition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum OperateWhile {
    /// At any point.
    #[default]
    AnyTime,
    /// Only while the Connect worker is down.
    ConnectDown,
    /// Only while the Connect worker is down, once the offsets topic holds a streamed position
    /// (`lsn_proc`): the connector had been streaming before it went down.
    ConnectDownAfterStreaming,
}

/// When a process of `[check] crash` may crash in a bound (`[check] crash_while`): a drill's
/// precondition, as `operate_while` is the operator's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CrashWhile {
    /// At any point.
    #[default]
    AnyTime,
    /// Only once the offsets topic holds a streamed position (`lsn_proc`): the connector has
    /// snapshotted, streamed and stored where it was. A drill of the restart's search (which runs
    /// only with `lsn_proc` stored) then leaves out the crashes before it, whose hazards are other
    /// entries' (a restart during the initial snapshot, reference debezium-postgres.md §4.4).
    AfterStreaming,
}

/// When the bound's scripted transactions may run (`[check] script_while`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ScriptWhile {
    /// At any point, before the connector exists too.
    #[default]
    AnyTime,
    /// Only once the connector's replication stream has started: the deployment order a design
    /// prescribes (the outbox connector and its slot exist before the service writes events;
    /// an event written before its slot is in no slot's WAL, a hazard of its own).
    AfterStreamingStarted,
}

impl ScriptWhile {
    pub const ALL: [ScriptWhile; 2] = [ScriptWhile::AnyTime, ScriptWhile::AfterStreamingStarted];

    pub fn name(self) -> &'static str {
        match self {
            ScriptWhile::AnyTime => "any-time",
            ScriptWhile::AfterStreamingStarted => "after-streaming-started",
        }
    }
}

/// When a committed transaction becomes visible to other sessions' snapshots (`[check]
/// commit_visibility`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CommitVisibility {
    /// As PostgreSQL does: the commit record is written (`RecordTransactionCommit`), and the
    /// transaction leaves the proc array in a later step (`ProcArrayEndTransaction`), which any
    /// other step may precede. A snapshot taken in between sees it running.
    #[default]
    Lags,
    /// An idealised server whose commits are visible in the step that writes their commit
    /// record, so commit order is visibility order: the assumption DBLog's watermark argument
    /// makes. It shows what a design's soundness owes to that assumption.
    WithCommitRecord,
}

impl CommitVisibility {
    pub const ALL: [CommitVisibility; 2] = [CommitVisibility::Lags, CommitVisibility::WithCommitRecord];

    pub fn name(self) -> &'static str {
        match self {
            CommitVisibility::Lags => "lags",
            CommitVisibility::WithCommitRecord => "with-commit-record",
        }
    }
}

impl CrashWhile {
    pub const ALL: [CrashWhile; 2] = [CrashWhile::AnyTime, CrashWhile::AfterStreaming];

    pub fn name(self) -> &'static str {
        match self {
            CrashWhile::AnyTime => "any-time",
            CrashWhile::AfterStreaming => "after-streaming",
        }
    }
}

impl OperateWhile {
    pub const ALL: [OperateWhile; 3] =
        [OperateWhile::AnyTime, OperateWhile::ConnectDown, OperateWhile::ConnectDownAfterStreaming];

    pub fn name(self) -> &'static str {
        match self {
            OperateWhile::AnyTime => "any-time",
            OperateWhile::ConnectDown => "connect-down",
            OperateWhile::ConnectDownAfterStreaming => "connect-down-after-streaming",
        }
    }
}

impl Operation {
    pub const ALL: [Operation; 3] = [Operation::RecreateSlot, Operation::RebuildConnector, Operation::AdvanceSlot];

    /// Its place in `ALL`.
    pub fn index(self) -> usize {
        match self {
            Operation::RecreateSlot => 0,
            Operation::RebuildConnector => 1,
            Operation::AdvanceSlot => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Operation::RecreateSlot => "recreate-slot",
            Operation::RebuildConnector => "rebuild-connector",
            Operation::AdvanceSlot => "advance-slot",
        }
    }

    /// The same action as a timed fault.
    pub fn fault(self) -> FaultAction {
        match self {
            Operation::RecreateSlot => FaultAction::RecreateSlot,
            Operation::RebuildConnector => FaultAction::RebuildConnector,
            Operation::AdvanceSlot => FaultAction::AdvanceSlot { to_lsn: None },
        }
    }
}

/// A step as a schedule writes it (`handoff check` prints it, a scenario's `[schedule]` lists
/// it): `deliver pg1 -> connect`, `fire connect offset-flush`, `fire pg1 scan-batch:connect`,
/// `run script 1`, `crash connect`, `restart connect`, `pause connect-2`.
impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Deliver { from, to } => write!(f, "deliver {from} -> {to}"),
            Action::Fire { node, timer } => write!(f, "fire {node} {}", timer.name()),
            Action::RunScripted { index } => write!(f, "run script {index}"),
            Action::Crash { node } => write!(f, "crash {node}"),
            Action::Restart { node } => write!(f, "restart {node}"),
            Action::Pause { node } => write!(f, "pause {node}"),
            Action::Operate { operation } => write!(f, "operator {}", operation.name()),
        }
    }
}

/// The processes of the exhaustive world, by name.
fn world_node(name: &str) -> Result<Node, String> {
    NODES.into_iter().find(|node| node.name() == name).ok_or_else(|| {
        let names: Vec<&str> = NODES.iter().map(|node| node.name()).collect();
        format!("`{name}` is not a process of the world (one of {})", names.join(", "))
    })
}

fn parse_timer(text: &str) -> Result<Timer, String> {
    use crate::core::component::TaskTimer;
    if let Some(client) = text.strip_prefix("scan-batch:") {
        return Ok(Timer::ScanBatch { client: world_node(client)? });
    }
    // A task timer: `offset-flush` (the first connector's) or `offset-flush:2` (the second's).
    let (kind, connector) = match text.split_once(':') {
        Some((kind, place)) => match place.parse::<usize>() {
            Ok(place) if (1..=crate::core::limits::MAX_CONNECTORS).contains(&place) => (kind, (place - 1) as u8),
            _ => {
                return Err(format!(
                    "`{text}`: a task timer's connector is 1 to {}",
                    crate::core::limits::MAX_CONNECTORS
                ));
            }
        },
        None => (text, 0),
    };
    if let Some(timer) = TaskTimer::ALL.into_iter().find(|timer| timer.name() == kind) {
        return Ok(Timer::Task { connector, timer });
    }
    Timer::PLAIN.into_iter().find(|timer| timer.name() == text).ok_or_else(|| {
        let names: Vec<String> = Timer::PLAIN
            .iter()
            .map(|timer| timer.name())
            .chain(TaskTimer::ALL.iter().map(|timer| timer.name().to_string()))
            .collect();
        format!("`{text}` is not a timer (one of {}, scan-batch:CLIENT; a task timer of the second connector: offset-flush:2)", names.join(", "))
    })
}

impl std::str::FromStr for Action {
    type Err = String;

    fn from_str(text: &str) -> Result<Action, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        match words.as_slice() {
            ["deliver", from, "->", to] => Ok(Action::Deliver { from: world_node(from)?, to: world_node(to)? }),
            ["fire", node, timer] => Ok(Action::Fire { node: world_node(node)?, timer: parse_timer(timer)? }),
            ["run", "script", index] => index
                .parse()
                .map(|index| Action::RunScripted { index })
                .map_err(|_| format!("`{index}` is not a script number")),
            ["crash", node] => Ok(Action::Crash { node: world_node(node)? }),
            ["restart", node] => Ok(Action::Restart { node: world_node(node)? }),
            ["pause", node] => match world_node(node)? {
                node @ (Node::Connect | Node::Connect2) => Ok(Action::Pause { node }),
                other => Err(format!("`pause {other}`: only a Connect worker (connect, connect-2) pauses in a path")),
            },
            ["operator", name] => Operation::ALL
                .into_iter()
                .find(|operation| operation.name() == *name)
                .map(|operation| Action::Operate { operation })
                .ok_or_else(|| {
                    format!("`{name}` is not an operation (one of recreate-slot, rebuild-connector, advance-slot)")
                }),
            _ => Err(format!(
                "`{text}` is not a step: `deliver FROM -> TO`, `fire NODE TIMER`, `run script N`, `crash NODE`, `restart NODE`, `pause WORKER` or `operator OPERATION`"
            )),
        }
    }
}
