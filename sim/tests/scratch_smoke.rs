use handoff_models::connect::ConnectConfig;
use handoff_models::debezium::{DebeziumConfig, SnapshotMode};
use handoff_models::ids::{Status, TableId};
use handoff_models::operator::GatePolicy;
use handoff_models::postgres::table::{ReplicaIdentity, RowOp};
use handoff_models::sink::ApplyRule;
use handoff_models::spec::*;
use handoff_sim::{report, runner};

fn spec(rule: ApplyRule) -> Spec {
    let t = TableId(0);
    Spec {
        name: "smoke".into(),
        description: "".into(),
        postgres_major_version: 15,
        wal_segment_size: 16 << 20,
        checkpoint_timeout_ms: 300_000,
        scan_rows_per_second: 500,
        standby: None,
        tables: vec![TableSetup { id: t, name: "public.claims".into(), rows: 1000, replica_identity: ReplicaIdentity::Full }],
        debezium: DebeziumConfig {
            name: "claims-connector".into(),
            topic_prefix: "claims".into(),
            slot_name: "debezium".into(),
            plugin_name: "pgoutput".into(),
            publication_name: "dbz_publication".into(),
            snapshot_mode: SnapshotMode::Initial,
            snapshot_fetch_size: 100,
            max_batch_size: 2048,
            poll_interval_ms: 500,
            retriable_restart_connector_wait_ms: 10_000,
            tombstones_on_delete: true,
            log_position_check_enable: true,
            tables: vec![t],
        },
        connector_properties: Default::default(),
        connector_start_ms: 0,
        connect: ConnectConfig { offset_flush_interval_ms: 60_000, offset_flush_timeout_ms: 5_000 },
        kafka_partitions: 3,
        sink_rule: rule,
        sink_group: "claims-search-index".into(),
        sink_auto_commit_interval_ms: 5000,
        sink_max_poll_records: 500,
        background: Some(Background { start_ms: 0, end_ms: 90_000, inserts_per_second: 1.0, updates_per_second: 1.0, deletes_per_second: 0.0 }),
        scripted: vec![
            ScriptedTxn { trigger: Trigger::After { moment: Moment::SnapshotScanStarted, occurrence: 1, plus_ms: 200 }, ops: vec![RowOp::Update { table: t, key: 17, status: Status::Approved }], label: "update 17".into() },
            ScriptedTxn { trigger: Trigger::After { moment: Moment::SnapshotScanStarted, occurrence: 1, plus_ms: 400 }, ops: vec![RowOp::Delete { table: t, key: 42 }], label: "delete 42".into() },
        ],
        faults: vec![Fault { trigger: Trigger::After { moment: Moment::SnapshotCompleted, occurrence: 1, plus_ms: 0 }, action: FaultAction::KillConnectWorker { restart_after_ms: Some(10_000) } }],
        handoff: HandoffMethod::ConnectorSnapshot,
        gate: GatePolicy::Off,
        acceptance: Acceptance { timeout_ms: 600_000, sample_size: 20 },
        prediction: Prediction { holds: false, findings: vec![Invariant::I2], allow: vec![], why: "x".into() },
    }
}

#[test]
fn smoke() {
    for rule in [ApplyRule::VersionGuard, ApplyRule::NaiveUpsert, ApplyRule::SnapshotEpoch] {
        let spec = spec(rule);
        let result = runner::run(&spec, 1);
        let text = report::text(&spec, "smoke", &result);
        if rule == ApplyRule::VersionGuard { println!("{text}"); }
        println!("{:?}: {:?} held={} events={} t={}", rule, result.violated(), result.prediction_held, result.trace.len(), result.sim_time_ms);
        for f in &result.findings { println!("  {f}"); }
    }
}
