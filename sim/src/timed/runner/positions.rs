//! Where the pipeline's positions stand, sampled over a run for the HTML report
//! (`handoff run --html`): each server's WAL insert pointer and its slots as
//! `pg_replication_slots` shows them, each connector's stored offset and state, Kafka's end
//! offsets and last stable offsets of the change topics, the sink's own and its group's committed
//! positions.
//!
//! The harness samples when it keeps the trace (`handoff run`), each time its loop wakes (at
//! least every 500 ms of simulated time, and at every step it runs), and keeps a sample when
//! something moved since the last one kept (a quiet stretch costs one sample, so a long horizon
//! does not grow the list). Reading the models under their locks changes nothing and takes no
//! simulated time, so a run with samples is the run without them (same trace, same hash). A
//! sweep takes none.

use super::Models;
use handoff_models::components::kafka::{Kafka, PartitionLog};
use handoff_models::core::event::{KafkaRecord, Topic, TopicPartition};
use handoff_models::core::ids::Node;
use handoff_models::core::lsn::Lsn;
use handoff_models::core::protocol::IsolationLevel;
use handoff_models::judge::health::HealthSignals;
use handoff_models::scenario::spec::Spec;

/// One sample: where every position stood at `at_ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PositionSample {
    pub at_ms: u64,
    pub servers: Vec<ServerPositions>,
    pub connectors: Vec<ConnectorPositions>,
    pub kafka: KafkaPositions,
    /// The LSN of the newest record below the sink group's committed positions (its checkpoint
    /// on the LSN axis); `None` before it commits any.
    pub sink_checkpoint_lsn: Option<Lsn>,
    /// The sink group's committed positions, summed over the change topics' partitions.
    pub sink_committed_offsets: u64,
    /// The LSN of the newest record below the sink consumer's own positions: what it has
    /// fetched and applied, committed or not.
    pub sink_applied_lsn: Option<Lsn>,
}

impl PositionSample {
    /// Whether `other` has the same positions (its time aside).
    pub fn same_positions(&self, other: &PositionSample) -> bool {
        self.servers == other.servers
            && self.connectors == other.connectors
            && self.kafka == other.kafka
            && self.sink_checkpoint_lsn == other.sink_checkpoint_lsn
            && self.sink_committed_offsets == other.sink_committed_offsets
            && self.sink_applied_lsn == other.sink_applied_lsn
    }
}

/// A PostgreSQL server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerPositions {
    pub server: Node,
    pub up: bool,
    pub primary: bool,
    /// `pg_current_wal_lsn()`.
    pub wal_insert_lsn: Lsn,
    /// `max_slot_wal_keep_size` in bytes (`None`: -1, no cap).
    pub max_slot_wal_keep_size_bytes: Option<u64>,
    pub slots: Vec<SlotPositions>,
}

/// A row of `pg_replication_slots`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotPositions {
    pub slot_name: String,
    pub active: bool,
    /// `None`: NULL (an invalidated slot).
    pub restart_lsn: Option<Lsn>,
    pub confirmed_flush_lsn: Option<Lsn>,
    /// `reserved`, `extended`, `unreserved` or `lost`.
    pub wal_status: String,
    /// The WAL the slot keeps: `pg_current_wal_lsn() - restart_lsn` (0 once invalidated).
    pub retained_bytes: u64,
    /// `safe_wal_size`: bytes the write pointer may still advance before the slot is in danger
    /// of invalidation (`None`: NULL, no cap or lost).
    pub safe_wal_size_bytes: Option<i64>,
}

/// A connector: its state as the worker running its task reports it, its stored offset and its
/// health signals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectorPositions {
    /// The offsets topic's value's `lsn` for the connector (`None`: nothing stored, or a
    /// tombstone, or a snapshot offset without one).
    pub stored_lsn: Option<Lsn>,
    /// What a dashboard shows of it ([`HealthSignals`]: its name and states among them);
    /// `reachable` false when the worker
    /// running its task is down (its REST API does not answer).
    pub health: HealthSignals,
    pub reachable: bool,
}

/// Kafka's change topics (every partition of a `Topic::Change` or routed topic).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaPositions {
    /// Log end offsets, summed.
    pub end_offsets: u64,
    /// Last stable offsets, summed (the end offsets where no transaction is open).
    pub last_stable_offsets: u64,
    /// The newest source LSN among the records below the end offsets.
    pub end_lsn: Option<Lsn>,
    /// The newest source LSN among the records below the last stable offsets.
    pub stable_lsn: Option<Lsn>,
}

/// Whether a topic carries the captured stream (a table's change topic or an outbox's routed
/// topic, whose records carry their source LSN).
fn carries_changes(tp: &TopicPartition) -> bool {
    matches!(tp.topic, Topic::Change(_) | Topic::Routed(_))
}

/// The source LSN of the newest record below `end` in `records` (the last few records are
/// looked at: a tombstone carries none).
fn newest_lsn_below(log: &PartitionLog, end: u64) -> Option<Lsn> {
    let from = end.saturating_sub(8) as usize;
    let records: Vec<&KafkaRecord> = log.iter_from(from).take_while(|record| record.offset < end).collect();
    records.iter().rev().find_map(|record| record.value.map(|value| value.source.lsn))
}

fn kafka_positions(kafka: &Kafka) -> KafkaPositions {
    let mut positions = KafkaPositions { end_offsets: 0, last_stable_offsets: 0, end_lsn: None, stable_lsn: None };
    for (_, log) in kafka.logs.iter().filter(|(tp, _)| carries_changes(tp)) {
        let end = log.len() as u64;
        let stable = log.readable_end(IsolationLevel::ReadCommitted);
        positions.end_offsets += end;
        positions.last_stable_offsets += stable;
        positions.end_lsn = positions.end_lsn.max(newest_lsn_below(log, end));
        positions.stable_lsn = positions.stable_lsn.max(newest_lsn_below(log, stable));
    }
    positions
}

/// Takes one sample of `models` at `at_ms`; `down` are the processes killed and not restarted,
/// `primary` the server clients connect to.
pub fn sample(spec: &Spec, models: &Models, at_ms: u64, primary: Node, down: impl Fn(Node) -> bool) -> PositionSample {
    let mut servers = Vec::new();
    let pg2 = models.pg2.as_ref().map(|pg| (Node::Pg2, pg));
    for (node, pg) in std::iter::once((Node::Pg1, &models.pg1)).chain(pg2) {
        let pg = pg.lock().expect("pg");
        let wal_insert_lsn = pg.current_wal_lsn();
        let slots = pg
            .pg_replication_slots()
            .into_iter()
            .map(|row| SlotPositions {
                retained_bytes: row.retained_bytes(wal_insert_lsn),
                slot_name: row.slot_name,
                active: row.active,
                restart_lsn: row.restart_lsn,
                confirmed_flush_lsn: row.confirmed_flush_lsn,
                wal_status: row.wal_status.unwrap_or_default(),
                safe_wal_size_bytes: row.safe_wal_size,
            })
            .collect();
        servers.push(ServerPositions {
            server: node,
            up: pg.is_up() && !down(node),
            primary: node == primary,
            wal_insert_lsn,
            max_slot_wal_keep_size_bytes: pg.config.max_slot_wal_keep_size_mb.map(|mb| mb.saturating_mul(1 << 20)),
            slots,
        });
    }
    let health: Vec<HealthSignals> = (0..spec.connector_count()).map(|c| HealthSignals::read(models, c)).collect();
    let kafka = models.kafka.lock().expect("kafka");
    let connectors = health
        .into_iter()
        .enumerate()
        .map(|(c, health)| {
            let worker = models.worker_of(c);
            let node = models.workers().find(|(_, held)| std::sync::Arc::ptr_eq(held, worker)).map(|(node, _)| node);
            let reachable = node.is_none_or(|node| !down(node));
            let stored_lsn = kafka.source_offsets.get(&health.connector).and_then(|offset| offset.lsn);
            ConnectorPositions { stored_lsn, health, reachable }
        })
        .collect();
    let mut sink_checkpoint_lsn = None;
    let mut sink_committed_offsets = 0;
    let committed = kafka.groups.get(&spec.sink.group).into_iter().flatten();
    for (tp, offset) in committed.filter(|(tp, _)| carries_changes(tp)) {
        sink_committed_offsets += offset;
        if let Some(log) = kafka.logs.get(tp) {
            sink_checkpoint_lsn = sink_checkpoint_lsn.max(newest_lsn_below(log, *offset));
        }
    }
    let sink_applied_lsn = models
        .sink
        .lock()
        .expect("sink")
        .positions()
        .iter()
        .filter(|(tp, _)| carries_changes(tp))
        .filter_map(|(tp, offset)| kafka.logs.get(tp).and_then(|log| newest_lsn_below(log, *offset)))
        .max();
    PositionSample {
        at_ms,
        sink_applied_lsn,
        servers,
        connectors,
        kafka: kafka_positions(&kafka),
        sink_checkpoint_lsn,
        sink_committed_offsets,
    }
}
