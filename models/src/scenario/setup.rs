//! Builds the modelled system from a validated scenario and a seed: the same starting point for
//! every lens.

use crate::components::app::App;
use crate::components::connect::{ConnectWorker, Connector, TargetState};
use crate::components::consumer::InboxConsumer;
use crate::components::kafka::{Kafka, KafkaConfig};
use crate::components::loader::Loader;
use crate::components::operator::{Operator, OperatorTarget};
use crate::components::postgres::{Postgres, PostgresConfig, ServerRun, TableSpec};
use crate::components::sink::SearchIndex;
use crate::core::event::Topic;
use crate::core::ids::Role;
use crate::core::ids::{Key, Node, Row, TableId};
use crate::core::lsn::Lsn;
use crate::core::shared::{CopyOnWrite, Fixed};
use crate::scenario::processes::{Plain, Processes};
use crate::scenario::spec::{HandoffMethod, Spec};
use crate::scenario::workload;

/// Where the WAL of the modelled cluster continues when a run starts: past `initdb` and the
/// initial load, as on a fresh PostgreSQL 15 cluster.
pub const INITIAL_WAL_LSN: Lsn = Lsn(0x16B_3748);

/// Every process of a run, in its starting state.
#[derive(Clone, Debug)]
pub struct System {
    pub processes: Processes<Plain>,
    pub initial_rows: Vec<(TableId, Key, Row)>,
    /// When the Connect worker process starts.
    pub connect_start_ms: u64,
}

/// Options a lens may change.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// The background writer's running-xacts records (the exhaustive lens turns them off).
    pub bgwriter_running_xacts: bool,
    /// Walsenders' keep-alive messages to a caught-up client (off in the exhaustive lens too).
    pub walsender_keepalives: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { bgwriter_running_xacts: true, walsender_keepalives: true }
    }
}

pub fn build(spec: &Spec, seed: u64, options: Options) -> System {
    let initial_rows = workload::initial_rows(spec, seed);
    // The scenario's `[postgres]` settings, plus what the run adds: the tables, where the WAL
    // starts, the lens's switches, and the standby as one server sees it.
    let pg_config = Fixed::new(PostgresConfig::new(
        &spec.postgres,
        ServerRun {
            bgwriter_running_xacts: options.bgwriter_running_xacts,
            // Keep-alives are sent where a consumer acts on them: pgjdbc's automatic flush, on
            // with `lsn.flush.mode=connector_and_driver` and with a 42.7.0-42.7.5 driver under
            // Debezium before 3.2 (DBZ-7533); runs where nobody reads them stay as they were.
            walsender_keepalives: options.walsender_keepalives && spec.debezium.driver_confirms_keepalives(),
            initial_wal_lsn: INITIAL_WAL_LSN,
            tables: spec
                .tables
                .iter()
                .map(|t| TableSpec {
                    id: t.id,
                    name: t.name.clone(),
                    replica_identity: t.replica_identity,
                    database: t.database.clone(),
                    composite_key: t.composite_key.clone(),
                    unique_column: t.unique_column.clone(),
                })
                .collect(),
        },
    ));
    let pg1 = Postgres::new(Node::Pg1, Role::Primary, pg_config, &initial_rows);
    let pg2 = spec.postgres.standby.map(|_| Postgres::new(Node::Pg2, Role::Standby, pg_config, &initial_rows));
    // Every connector's chain, validated when the scenario was read; routed topics are the
    // run's (several connectors may route to one topic).
    let chains = spec.run_transform_chains();
    let routed: Vec<Topic> = (0..spec.routed_topic_names().len()).map(|index| Topic::Routed(index as u16)).collect();
    let connectors = spec
        .connectors()
        .zip(chains)
        .enumerate()
        .map(|(c, (debezium, chain))| {
            Connector::new(Fixed::new(debezium.clone()), Fixed::new(chain), TargetState::Running)
                .with_interval_boundary(spec.transaction_boundary_interval_ms(c))
        })
        .collect();
    let mut connect_config = spec.connect.clone();
    connect_config.status_readers = spec.connect.workers > 1 && operator_reads_status(spec);
    let connect = ConnectWorker::new(Fixed::new(connect_config), connectors);
    // The group's other workers: the same configuration and connectors (the config topic).
    let connect2 = (spec.connect.workers >= 2).then(|| connect.clone());
    let connect3 = (spec.connect.workers >= 3).then(|| connect.clone());
    // Each connector's heartbeat topic (`__debezium-heartbeat.<topic.prefix>`) and message
    // topic (`<topic.prefix>.message`), where it writes them.
    let own_topics = spec.connectors().flat_map(|debezium| {
        let c = debezium.connector_index;
        // Logical decoding messages are decoded for every slot, whatever its publication.
        let messages = writes_messages(spec);
        (debezium.effective_heartbeat_interval_ms() > 0)
            .then_some(Topic::heartbeat(c))
            .into_iter()
            .chain(messages.then_some(Topic::message(c)))
    });
    let mut kafka = Kafka::new(Fixed::new(KafkaConfig {
        partitions: spec.kafka.partitions,
        transaction_abort_sweep_interval_ms: spec.kafka.transaction_abort_sweep_interval_ms,
        compaction: spec.kafka.compaction,
        topics: spec
            .tables
            .iter()
            // A table of another database is never captured: the connector reads its own
            // database (`database.dbname`), so no topic of it exists.
            .filter(|t| t.database.is_none())
            .map(|t| Topic::Change(t.id))
            .chain(own_topics)
            // The topics the connectors' transforms route to (auto-created by the first produce
            // in a real cluster, with `num.partitions`).
            .chain(routed)
            .collect(),
    }));
    if spec.connect.workers > 1 {
        // Every connector starts RUNNING with its one task configured.
        let config = spec
            .connectors()
            .map(|_| crate::core::protocol::ConnectorConfigRecord { running: true, tasks: 1 })
            .collect();
        kafka = kafka.with_connect_group(spec.kafka.group_initial_rebalance_delay_ms, config, spec.connect.workers);
    }
    let sink = SearchIndex::new(Fixed::new(spec.sink.clone()));
    let app = App::new(CopyOnWrite::new(workload::workload(spec, seed)));
    let mut operator = Operator::new(spec.gate, spec.debezium.name.clone(), spec.debezium.slot_name.clone());
    operator.targets = spec
        .connectors()
        .map(|debezium| OperatorTarget {
            name: debezium.name.clone(),
            slot_name: debezium.slot_name.clone(),
            rebuild_snapshots: debezium.snapshot_mode != crate::components::connect::debezium::SnapshotMode::NoData,
        })
        .collect();
    operator.rebuild_snapshots = operator.targets[0].rebuild_snapshots;
    operator.workers = spec.connect.workers.max(1);
    let loader = match spec.handoff {
        HandoffMethod::PlainRead { read_at_ms } => Some(Loader::new(
            spec.debezium.tables.first().copied().unwrap_or_default(),
            read_at_ms,
            spec.debezium.snapshot_fetch_size,
        )),
        HandoffMethod::ConnectorSnapshot => None,
    };
    let consumer = spec.consumer.as_ref().map(|config| InboxConsumer::new(Fixed::new(config.clone())));
    System {
        processes: Processes { pg1, pg2, connect, kafka, sink, app, operator, loader, consumer, connect2, connect3 },
        initial_rows,
        connect_start_ms: spec.connector_start_ms,
    }
}

/// Whether the operator may run a procedure that polls `GET …/status` (the failover gate, the
/// recovery runbook): only then do a group's workers write the status topic.
fn operator_reads_status(spec: &Spec) -> bool {
    use crate::core::fault::FaultAction;
    use crate::scenario::spec::FaultKind;
    let gate = spec.gate != crate::components::operator::GatePolicy::Off && spec.postgres.standby.is_some();
    let runbook = spec.faults.iter().any(|fault| matches!(fault.action, FaultAction::RebuildConnector));
    let drawn = spec.profile.as_ref().is_some_and(|profile| profile.kinds.contains(&FaultKind::RebuildConnector));
    let bound = spec
        .check
        .as_ref()
        .is_some_and(|bound| bound.operations.contains(&crate::scenario::schedule::Operation::RebuildConnector));
    gate || runbook || drawn || bound
}

/// Whether a run of `spec` can write logical decoding messages: a scripted
/// `pg_logical_emit_message` (in the scenario's script or its bound's), a heartbeat action
/// query that emits one, or a message outbox's events.
fn writes_messages(spec: &Spec) -> bool {
    let bound_scripts = spec.check.iter().flat_map(|bound| bound.scripts.iter());
    spec.connectors().any(|debezium| debezium.heartbeat_action_message.is_some())
        || !spec.message_outboxes.is_empty()
        || spec
            .scripted
            .iter()
            .chain(bound_scripts)
            .any(|txn| matches!(txn.step.kind, crate::components::app::StepKind::Message { .. }))
}
