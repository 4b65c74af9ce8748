//! The health signals an operator reads (game-day drill 7): what a dashboard shows of a
//! connector, read from the processes as they are at one moment.
//!
//! - `MilliSecondsBehindSource` and `MilliSecondsSinceLastEvent`, the streaming metrics of the
//!   connector's task (`context=streaming`; [`StreamingMeter`], `debezium-core`
//!   `io.debezium.pipeline.meters.StreamingMeter` and `CommonEventMeter`): -1 until the task's
//!   first event. The lag is the last event's, set when an event is dispatched: it does not grow
//!   while nothing arrives, so a connector RUNNING and idle shows its last, small lag; the time
//!   since the last event is what grows. Logical decoding messages move neither
//!   (`LogicalDecodingMessageMonitor` calls no event listener).
//! - The heartbeat's age: the time since the last record was appended to the connector's
//!   heartbeat topic (`__debezium-heartbeat.<topic.prefix>`), as a consumer of it sees it;
//!   `None` when none ever was (`heartbeat.interval.ms=0`, or none sent yet).
//! - The connector's slot as `pg_replication_slots` shows it on the primary: `wal_status` and the
//!   WAL it retains (`pg_current_wal_lsn() - restart_lsn`).
//! - The connector's and its task's states as the Connect REST API's
//!   `/connectors/<name>/status` gives them.
//!
//! Reading them changes nothing. The timed lens samples them over a run (the HTML report, the
//! run's JSON `health`) and I11 cites them where the run ended
//! ([`super::checkers::honest_liveness`]).

use crate::components::connect::ConnectorState;
use crate::components::connect::debezium::StreamingMeter;
use crate::core::event::Topic;
use crate::core::ids::Node;
use crate::core::time::SimTime;
use crate::scenario::processes::{Holder, Processes};

/// One connector's health signals at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthSignals {
    /// The connector's `name`.
    pub connector: String,
    /// The connector's state (`connector.state`): `STOPPED` when its target state is, else
    /// `RUNNING`.
    pub connector_state: ConnectorState,
    /// Its task's state (`tasks[0].state`); `None` when it has no task (the connector is
    /// STOPPED: its task list is empty).
    pub task_state: Option<ConnectorState>,
    /// The running task's streaming metrics; `None` when no task runs (each new task starts
    /// them afresh).
    pub meter: Option<StreamingMeter>,
    /// When the last record reached the connector's heartbeat topic (simulated ms).
    pub last_heartbeat_ms: Option<u64>,
    /// `heartbeat.interval.ms` (0: no heartbeats).
    pub heartbeat_interval_ms: u64,
    /// The connector's slot on the primary, if it exists there.
    pub slot: Option<SlotHealth>,
}

/// A slot's row of `pg_replication_slots`, as far as health goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotHealth {
    pub server: Node,
    pub slot_name: String,
    pub active: bool,
    /// `reserved`, `extended`, `unreserved` or `lost`.
    pub wal_status: String,
    /// `pg_current_wal_lsn() - restart_lsn` (0 once `restart_lsn` is NULL).
    pub retained_bytes: u64,
}

impl HealthSignals {
    /// Connector `c`'s signals as `processes` are now.
    pub fn read<H: Holder>(processes: &Processes<H>, c: usize) -> HealthSignals {
        let (connector, connector_state, task_state, meter, config) = H::read(processes.worker_of(c), |worker| {
            let connector = &worker.connectors[c];
            let status = connector.status();
            let connector_state =
                if status == ConnectorState::Stopped { ConnectorState::Stopped } else { ConnectorState::Running };
            let task_state = (status != ConnectorState::Stopped).then_some(status);
            (
                connector.debezium.name.clone(),
                connector_state,
                task_state,
                connector.streaming_meter(),
                connector.debezium,
            )
        });
        let heartbeat = Topic::heartbeat(c as u8);
        let last_heartbeat_ms = H::read(&processes.kafka, |kafka| {
            kafka.logs.iter().filter(|(tp, _)| tp.topic == heartbeat).filter_map(|(_, log)| log.last_append_ms()).max()
        });
        let standby = processes.pg2.as_ref().map(|pg| (Node::Pg2, pg));
        let slot = std::iter::once((Node::Pg1, &processes.pg1)).chain(standby).find_map(|(node, pg)| {
            H::read(pg, |pg| {
                if !pg.is_up() || !pg.is_primary() {
                    return None;
                }
                let current = pg.current_wal_lsn();
                pg.pg_replication_slots().into_iter().find(|row| row.slot_name == config.slot_name).map(|row| {
                    SlotHealth {
                        server: node,
                        retained_bytes: row.retained_bytes(current),
                        slot_name: row.slot_name,
                        active: row.active,
                        wal_status: row.wal_status.unwrap_or_default(),
                    }
                })
            })
        });
        HealthSignals {
            connector,
            connector_state,
            task_state,
            meter,
            last_heartbeat_ms,
            heartbeat_interval_ms: config.effective_heartbeat_interval_ms(),
            slot,
        }
    }

    /// `MilliSecondsBehindSource`: -1 before the task's first event, or with no task.
    pub fn milliseconds_behind_source(&self) -> i64 {
        self.meter.map_or(-1, |meter| meter.milliseconds_behind_source())
    }

    /// `MilliSecondsSinceLastEvent` at `now_ms`: -1 before the task's first event, or with no
    /// task.
    pub fn milliseconds_since_last_event(&self, now_ms: u64) -> i64 {
        self.meter.map_or(-1, |meter| meter.milliseconds_since_last_event(now_ms))
    }

    /// The heartbeat topic's age at `now_ms`: `None` when no heartbeat ever reached it.
    pub fn heartbeat_age_ms(&self, now_ms: u64) -> Option<u64> {
        self.last_heartbeat_ms.map(|at| now_ms.saturating_sub(at))
    }

    /// The signals in words at `now_ms`, for a finding: what a dashboard would have shown
    /// (`connector RUNNING, task RUNNING; MilliSecondsBehindSource -1 …`).
    pub fn describe(&self, now_ms: u64) -> String {
        let task = match self.task_state {
            Some(state) => format!("task {state}"),
            None => "no task".to_string(),
        };
        let lag = match self.meter.and_then(|meter| meter.lag_behind_source_ms) {
            None => "MilliSecondsBehindSource -1 (unknown: no event since the task started)".to_string(),
            Some(ms) => format!(
                "MilliSecondsBehindSource {ms} (the last event's, set when it came{})",
                self.meter
                    .and_then(|meter| meter.last_event_ms)
                    .map(|at| format!(" at {}; it does not grow while nothing arrives", SimTime(at)))
                    .unwrap_or_default()
            ),
        };
        let since = match self.milliseconds_since_last_event(now_ms) {
            -1 => "MilliSecondsSinceLastEvent -1".to_string(),
            ms => format!("MilliSecondsSinceLastEvent {ms}"),
        };
        let heartbeat = match (self.heartbeat_age_ms(now_ms), self.heartbeat_interval_ms) {
            (Some(age), _) => format!("the heartbeat topic's last record {age} ms old"),
            (None, 0) => "no heartbeat (heartbeat.interval.ms=0)".to_string(),
            (None, interval) => format!("no heartbeat ever (heartbeat.interval.ms={interval})"),
        };
        let slot = match &self.slot {
            Some(slot) => format!(
                "slot \"{}\" on {} {}, wal_status {}, {} bytes of WAL retained",
                slot.slot_name,
                slot.server.name(),
                if slot.active { "active" } else { "inactive" },
                slot.wal_status,
                slot.retained_bytes
            ),
            None => "no slot of the connector's on the primary".to_string(),
        };
        format!("connector {}, {task}; {lag}; {since}; {heartbeat}; {slot}", self.connector_state)
    }
}
