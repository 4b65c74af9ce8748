//! The scenario writer: `to_toml` writes a file that the loader reads back to the same `Spec`
//! (the connector properties may gain the modelled ones, with every original key's text kept),
//! for the bundled scenarios, for a spec using every feature of the format, and for generated
//! specs; and it refuses, without panicking, what the format cannot express.

use handoff_models::components::connect::ConnectConfig;
use handoff_models::components::connect::debezium::{DebeziumConfig, SnapshotMode};
use handoff_models::components::kafka::KafkaSection;
use handoff_models::components::operator::GatePolicy;
use handoff_models::components::postgres::PostgresSection;
use handoff_models::components::sink::{ApplyRule, SinkConfig};
use handoff_models::core::change::{ReplicaIdentity, RowOp};
use handoff_models::core::ids::{Node, Status, TableId};
use handoff_models::core::limits;
use handoff_models::exhaustive::world::{CrashWhile, OperateWhile, Operation};
use handoff_models::scenario::spec::{
    Acceptance, Background, CheckBound, Fault, FaultAction, FaultKind, FaultProfile, HandoffMethod, Invariant, Moment,
    NotModelled, Prediction, PredictionOrigin, ScriptedTxn, Spec, TableSetup, Trigger, Verdict,
};
use handoff_sim::scenario::{Loaded, load, load_str, to_toml};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Writes `spec`, reads it back, and checks it is the same scenario.
#[track_caller]
fn round_trip(spec: &Spec, seed: u64) -> String {
    let text = to_toml(spec, seed).unwrap_or_else(|error| panic!("to_toml failed: {error}"));
    let loaded = load_str("written.toml", &text, &[])
        .unwrap_or_else(|error| panic!("the written scenario does not load: {error}\n{text}"));
    assert_same(spec, seed, &loaded, &text);
    text
}

#[track_caller]
fn assert_same(spec: &Spec, seed: u64, loaded: &Loaded, text: &str) {
    assert_eq!(loaded.seed, seed, "{text}");
    for (key, value) in &spec.connector_properties {
        assert_eq!(loaded.spec.connector_properties.get(key), Some(value), "connector property {key:?} in\n{text}");
    }
    for (written, read) in spec.more_connectors.iter().zip(&loaded.spec.more_connectors) {
        for (key, value) in &written.properties {
            assert_eq!(read.properties.get(key), Some(value), "connector property {key:?} in\n{text}");
        }
    }
    let mut read = loaded.spec.clone();
    // Not modelled: the same settings, in the written file's order (by name).
    let sorted = |list: &[NotModelled]| {
        let mut list = list.to_vec();
        list.sort_by(|a, b| (&a.section, &a.setting).cmp(&(&b.section, &b.setting)));
        list
    };
    assert_eq!(sorted(&read.not_modelled), sorted(&spec.not_modelled), "{text}");
    read.not_modelled.clone_from(&spec.not_modelled);
    read.connector_properties.clone_from(&spec.connector_properties);
    for (read, written) in read.more_connectors.iter_mut().zip(&spec.more_connectors) {
        read.properties.clone_from(&written.properties);
    }
    assert_eq!(&read, spec, "{text}");
}

const CONNECTION: &str = "the connection to PostgreSQL: the model has its own server and connects to it";
const SERIALISATION: &str = "serialisation: the model carries rows and keys, not their bytes";
const ERRORS: &str =
    "error handling for records that fail conversion or a transformation: no record fails so in the model";

fn bundled() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    paths.sort();
    paths
}

/// Every run's schedule, pinned as `sweep --save` and `shrink` pin it (the profile's draw made
/// `[[fault]]`s), loads back as the same scenario: for every bundled scenario, with and without
/// its standby, every fault kind on, many seeds.
#[test]
fn pinned_schedules_of_every_fault_kind_load() {
    let mut pinned_faults = 0;
    for path in bundled() {
        let loaded = load(&path, &[]).unwrap_or_else(|error| panic!("{error}"));
        if loaded.spec.schedule.is_some() {
            // A replayed path takes its crashes from its `[schedule]`: no profile to pin.
            continue;
        }
        let mut variants = vec![loaded.spec.clone()];
        if loaded.spec.postgres.standby.is_some()
            && loaded.spec.gate == GatePolicy::Off
            && !loaded.spec.postgres.synchronized_standby_slots
        {
            let mut without = loaded.spec.clone();
            without.postgres.standby = None;
            without.postgres.sync_replication_slots = false;
            without.faults.retain(|fault| !matches!(fault.action, FaultAction::FailOverToStandby { .. }));
            variants.push(without);
        }
        for spec in variants {
            let standby = spec.postgres.standby.is_some();
            let mut profiled = spec.clone();
            profiled.profile = Some(FaultProfile {
                kinds: FaultKind::ALL
                    .into_iter()
                    .filter(|kind| standby || *kind != FaultKind::FailOverToStandby)
                    // The generated scenarios have no outbox consumer to kill, nor a group of
                    // workers for a clean shutdown.
                    .filter(|kind| !matches!(kind, FaultKind::KillConsumer | FaultKind::StopConnectWorker))
                    .collect(),
                max_faults: 8,
                window_ms: (0, 60_000),
                moments: Moment::ALL.to_vec(),
            });
            for seed in 0..150 {
                let mut pinned = profiled.clone();
                pinned.faults = handoff_models::scenario::faults::schedule(&profiled, seed);
                pinned.profile = None;
                pinned_faults += pinned.faults.len() - spec.faults.len();
                round_trip(&pinned, seed);
            }
        }
    }
    assert!(pinned_faults > 1_000, "the draws pinned {pinned_faults} faults");
}

/// A spec that uses every feature of the format.
fn everything() -> Spec {
    let (claims, payments) = (TableId(0), TableId(1));
    let mut properties = BTreeMap::new();
    for (key, value) in [
        ("topic.prefix", "claims"),
        ("plugin.name", "PGOUTPUT"),
        ("lsn.flush.mode", "connector_and_driver"),
        ("heartbeat.interval.ms", "5000"),
        ("heartbeat.action.query", "INSERT INTO public.payments VALUES (1) ON CONFLICT (id) DO UPDATE SET id = 1"),
        ("snapshot.mode", "When_Needed"),
        ("max.batch.size", " 512"),
        ("tombstones.on.delete", "FALSE"),
        ("table.include.list", "public.payments, public.claims"),
        ("max.queue.size", "1024"),
        ("database.port", "5432"),
        ("database.hostname", "postgres"),
        ("database.password", "a \"quoted\" \\ secret"),
        ("key.converter.schemas.enable", "false"),
        ("errors.max.retries", "-1"),
        ("message.key.columns", "public.claims:external_id"),
    ] {
        properties.insert(key.to_owned(), value.to_owned());
    }
    let at = |at_ms| Trigger::At { at_ms };
    let after = |moment, occurrence, plus_ms| Trigger::After { moment, occurrence, plus_ms };
    Spec {
        name: "every-feature".into(),
        description: "Every section.\nA \"quoted\" word, a backslash \\, three quotes \"\"\" and a tab\t.\n".into(),
        postgres: PostgresSection {
            major_version: 16,
            wal_segment_size: 64 << 20,
            checkpoint_timeout_ms: 90_000,
            max_wal_size_mb: 512,
            max_slot_wal_keep_size_mb: Some(2048),
            wal_keep_size_mb: 128,
            scan_rows_per_second: 5_000,
            standby: Some(250),
            sync_replication_slots: false,
            synchronized_standby_slots: false,
            idle_in_transaction_session_timeout_ms: 0,
            wal_sender_timeout_ms: handoff_models::components::postgres::WAL_SENDER_TIMEOUT_MS,
            publications: Vec::new(),
        },
        tables: vec![
            TableSetup {
                id: claims,
                name: "public.claims".into(),
                rows: 1_000,
                replica_identity: ReplicaIdentity::Full,
                database: None,
                outbox: None,
                composite_key: None,
                unique_column: Some(handoff_models::core::ids::UniqueColumn {
                    name: "external_id".into(),
                    null_row: 7,
                }),
                keyless: true,
            },
            TableSetup {
                id: payments,
                name: "public.payments".into(),
                rows: 10,
                replica_identity: ReplicaIdentity::Default,
                database: None,
                outbox: None,
                composite_key: Some(handoff_models::core::ids::CompositeKey {
                    columns: ["region_id".into(), "payment_no".into()],
                    group_rows: 4,
                }),
                unique_column: None,
                keyless: false,
            },
        ],
        debezium: DebeziumConfig {
            version: (2, 6),
            pgjdbc: Some((42, 7, 3)),
            name: "claims-connector".into(),
            connector_index: 0,
            topic_prefix: "claims".into(),
            slot_name: "claims_slot".into(),
            plugin_name: "pgoutput".into(),
            publication_name: "claims_publication".into(),
            publication_filtered: false,
            snapshot_mode: SnapshotMode::WhenNeeded,
            snapshot_fetch_size: 100,
            max_batch_size: 512,
            poll_interval_ms: 250,
            retriable_restart_connector_wait_ms: 3_000,
            tombstones_on_delete: false,
            log_position_check_enable: true,
            offset_mismatch_strategy:
                handoff_models::components::connect::debezium::OffsetMismatchStrategy::NoValidation,
            slot_seek_to_known_offset_on_start: false,
            lsn_flush_mode: handoff_models::components::connect::debezium::LsnFlushMode::ConnectorAndDriver,
            heartbeat_interval_ms: 5_000,
            heartbeat_action_table: Some(payments),
            heartbeat_action_message: None,
            message_prefixes: handoff_models::components::connect::debezium::MessagePrefixFilter::All,
            slot_failover: false,
            tables: vec![payments, claims],
            snapshot_tables: None,
            signalling: None,
            later_tables: Vec::new(),
            message_key_columns: vec![(
                claims,
                handoff_models::core::ids::UniqueColumn { name: "external_id".into(), null_row: 7 },
            )],
            null_key_tables: Vec::new(),
        },
        connector_properties: properties,
        connector_start_ms: 1_500,
        connect: ConnectConfig {
            exactly_once_source_support: handoff_models::components::connect::ExactlyOnceSourceSupport::Enabled,
            group_id: "claims-workers".into(),
            transaction_timeout_ms: 30_000,
            ..ConnectConfig::new(10_000, 2_000)
        },
        kafka: KafkaSection {
            partitions: 4,
            transaction_abort_sweep_interval_ms: 5_000,
            compaction: Some(handoff_models::components::kafka::Compaction {
                delete_retention_ms: 60_000,
                min_compaction_lag_ms: 5_000,
                segment_ms: 10_000,
                min_cleanable_dirty_ratio_per_mille: 250,
                log_cleaner_backoff_ms: 1_000,
            }),
            group_initial_rebalance_delay_ms: 1_000,
        },
        sink: SinkConfig {
            rule: ApplyRule::SnapshotEpoch,
            group: "claims-index".into(),
            auto_commit_interval_ms: 1_000,
            max_poll_records: 50,
            auto_offset_reset: handoff_models::core::protocol::OffsetReset::Latest,
            isolation_level: handoff_models::core::protocol::IsolationLevel::ReadCommitted,
            null_values: handoff_models::components::sink::NullValues::Delete,
        },
        background: Some(Background {
            start_ms: 5_000,
            end_ms: 120_000,
            inserts_per_second: 2.5,
            updates_per_second: 0.1,
            deletes_per_second: 1e-7,
            events_per_second: 0.0,
            transaction_size: 1,
            concurrency: 1,
        }),
        scripted: vec![
            ScriptedTxn {
                trigger: after(Moment::SnapshotScanStarted, 1, 200),
                ops: vec![RowOp::Delete { table: claims, key: 42 }],
                label: "delete claim 42 during the scan".into(),
                step: Default::default(),
            },
            ScriptedTxn {
                trigger: at(45_000),
                ops: vec![RowOp::Insert { table: payments, key: 11, status: Status::Paid, amount_cents: 0 }],
                label: String::new(),
                step: Default::default(),
            },
            ScriptedTxn {
                trigger: after(Moment::ChangeAcked, 3, 1_500),
                ops: vec![RowOp::Update { table: claims, key: 17, status: Status::Closed }],
                label: "a label\nof two lines".into(),
                step: Default::default(),
            },
            ScriptedTxn {
                trigger: at(0),
                ops: vec![RowOp::Insert {
                    table: claims,
                    key: 2_000,
                    status: Status::Submitted,
                    amount_cents: 100_000,
                }],
                label: "\"quoted\"".into(),
                step: Default::default(),
            },
        ],
        faults: vec![
            Fault {
                trigger: at(2_500),
                action: FaultAction::KillConnectWorker { restart_after_ms: Some(5_000) },
                connector: 0,
                worker: None,
            },
            Fault {
                trigger: at(3_000),
                action: FaultAction::KillConnectWorker { restart_after_ms: None },
                connector: 0,
                worker: None,
            },
            Fault {
                trigger: after(Moment::TaskStarted, 2, 0),
                action: FaultAction::KillConnectorTask { restart_after_ms: Some(1_000) },
                connector: 0,
                worker: None,
            },
            Fault {
                trigger: at(60_000),
                action: FaultAction::KillConnectorTask { restart_after_ms: None },
                connector: 0,
                worker: None,
            },
            Fault {
                trigger: at(61_000),
                action: FaultAction::StopConnector { resume_after_ms: Some(2_000) },
                connector: 0,
                worker: None,
            },
            Fault {
                trigger: at(62_000),
                action: FaultAction::StopConnector { resume_after_ms: None },
                connector: 0,
                worker: None,
            },
            Fault {
                trigger: at(63_000),
                action: FaultAction::CrashPostgres { restart_after_ms: 4_000 },
                connector: 0,
                worker: None,
            },
            Fault {
                trigger: after(Moment::OffsetsStored, 1, 10),
                action: FaultAction::Clog { between: (Node::Connect, Node::Postgres), duration_ms: 7_000 },
                connector: 0,
                worker: None,
            },
            Fault {
                trigger: at(64_000),
                action: FaultAction::Clog { between: (Node::Pg2, Node::Pg1), duration_ms: 1 },
                connector: 0,
                worker: None,
            },
            Fault {
                trigger: at(65_000),
                action: FaultAction::WalBurst { bytes: 64 << 20 },
                connector: 0,
                worker: None,
            },
            Fault { trigger: at(65_500), action: FaultAction::WalBurst { bytes: 1_536 }, connector: 0, worker: None },
            Fault { trigger: at(66_000), action: FaultAction::Checkpoint, connector: 0, worker: None },
            Fault {
                trigger: at(75_000),
                action: FaultAction::FailOverToStandby { promote_after_ms: 5_000 },
                connector: 0,
                worker: None,
            },
            Fault {
                trigger: after(Moment::Promoted, 1, 3_000),
                action: FaultAction::RecreateSlot,
                connector: 0,
                worker: None,
            },
        ],
        profile: Some(FaultProfile {
            kinds: vec![FaultKind::Clog, FaultKind::KillConnectorTask, FaultKind::FailOverToStandby],
            max_faults: 7,
            window_ms: (1_000, 90_000),
            moments: vec![Moment::ChangeAcked, Moment::SnapshotCompleted],
        }),
        handoff: HandoffMethod::PlainRead { read_at_ms: 2_500 },
        gate: GatePolicy::FailClosed,
        acceptance: Acceptance { timeout_ms: 300_000, sample_size: 5, horizon_ms: 7_200_000 },
        prediction: Prediction {
            verdict: Verdict::Violated,
            origin: PredictionOrigin::File,
            findings: vec![Invariant::I2, Invariant::I4],
            allow: vec![Invariant::I3],
            may_fail_closed: true,
            why: "Several reasons.\nThe second line ends in a quote: \"".into(),
        },
        check: Some(CheckBound {
            rows: 3,
            scripts: vec![
                ScriptedTxn {
                    trigger: Trigger::At { at_ms: 0 },
                    ops: vec![RowOp::Update { table: claims, key: 2, status: Status::Paid }],
                    label: "any time".into(),
                    step: Default::default(),
                },
                ScriptedTxn {
                    trigger: Trigger::At { at_ms: 0 },
                    ops: vec![RowOp::Delete { table: payments, key: 3 }],
                    label: String::new(),
                    step: Default::default(),
                },
            ],
            crash: vec![Node::Connect, Node::Pg1],
            crashes: 2,
            pause: vec![Node::Connect],
            pauses: 1,
            periodic_fires: 2,
            operations: vec![Operation::RecreateSlot],
            operate_while: OperateWhile::ConnectDownAfterStreaming,
            crash_while: CrashWhile::AfterStreaming,
            script_while: handoff_models::scenario::schedule::ScriptWhile::AfterStreamingStarted,
            commit_visibility: handoff_models::scenario::schedule::CommitVisibility::WithCommitRecord,
            bgwriter_running_xacts: true,
            unreached_ok: vec!["the acceptance boundary is reached".into()],
        }),
        // A schedule excludes timed faults and workload: see the exported counterexamples.
        schedule: None,
        consumer: None,
        more_connectors: Vec::new(),
        message_outboxes: Vec::new(),
        signal_topics: Vec::new(),
        // The properties above the model accepts and does not simulate, as the file lists them.
        // (A secret's value is not kept.)
        not_modelled: [
            ("database.hostname", "postgres", CONNECTION),
            ("database.password", "********", CONNECTION),
            ("database.port", "5432", CONNECTION),
            ("errors.max.retries", "-1", ERRORS),
            ("key.converter.schemas.enable", "false", SERIALISATION),
        ]
        .into_iter()
        .map(|(setting, value, why)| NotModelled {
            section: "connector".into(),
            setting: setting.into(),
            value: value.into(),
            why: why.into(),
        })
        .collect(),
    }
}

// ---------------------------------------------------------------------------------------------
// Round trips.

#[test]
fn bundled_scenarios_round_trip() {
    let paths = bundled();
    assert!(paths.len() >= 4, "expected the bundled scenarios, found {paths:?}");
    for path in paths {
        let loaded = load(&path, &[]).unwrap_or_else(|error| panic!("{error}"));
        let text = round_trip(&loaded.spec, loaded.seed);
        // Written again, the file is the same: the writer is a fixed point after one round.
        let again = load_str("written.toml", &text, &[]).unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(to_toml(&again.spec, again.seed).as_deref(), Ok(text.as_str()), "{}", path.display());
    }
}

#[test]
fn bundled_scenarios_round_trip_with_other_seeds() {
    for path in bundled() {
        let loaded = load(&path, &[]).unwrap_or_else(|error| panic!("{error}"));
        for seed in [0, 42, i64::MAX as u64] {
            round_trip(&loaded.spec, seed);
        }
    }
}

#[test]
fn every_feature_round_trips() {
    let spec = everything();
    let text = round_trip(&spec, 99);
    // The original text of modelled properties is kept where it means the same value.
    let loaded = load_str("written.toml", &text, &[]).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(loaded.spec.connector_properties["table.include.list"], "public.payments, public.claims");
    assert_eq!(loaded.spec.connector_properties["snapshot.mode"], "When_Needed");
    // Properties the scenario did not give are written, so nothing depends on the defaults.
    assert_eq!(loaded.spec.connector_properties["slot.name"], "claims_slot");
    assert_eq!(loaded.spec.connector_properties["poll.interval.ms"], "250");
}

#[test]
fn every_feature_writes_the_documented_syntax() {
    let text = to_toml(&everything(), 99).unwrap_or_else(|error| panic!("{error}"));
    for line in [
        "seed = 99\n",
        "[versions]\ndebezium = \"2.6\"\n",
        "wal_segment_size = \"64MB\"\n",
        "checkpoint_timeout = \"90s\"\n",
        "[postgres.standby]\nreplication_delay_ms = 250\n",
        "\"snapshot.mode\" = \"When_Needed\"\n",
        "\"database.port\" = 5432\n",
        "\"key.converter.schemas.enable\" = false\n",
        "\"errors.max.retries\" = -1\n",
        "\"max.batch.size\" = \" 512\"\n",
        "deletes_per_second = 1e-7\n",
        "at = \"snapshot-scan-started + 200ms\"\n",
        "at = \"change-acked#3 + 1500ms\"\n",
        "at = \"task-started#2\"\n",
        "at = \"2500ms\"\n",
        "at = \"1min\"\n",
        // A two-column key is written as its columns' values: row 11, 4 per region, is (3, 3).
        "insert = { region_id = 3, payment_no = 3 }\nstatus = \"paid\"\namount_cents = 0\ntable = \"public.payments\"\n",
        "update = 17\nstatus = \"closed\"\nlabel = \"\"\"\na label\nof two lines\"\"\"\n",
        "label = \"\\\"quoted\\\"\"\n",
        "action = \"clog\"\nbetween = [\"pg2\", \"pg1\"]\nduration_ms = 1\n",
        "action = \"wal-burst\"\nbytes = \"64MB\"\n",
        "bytes = \"1536B\"\n",
        "action = \"checkpoint\"\n\n",
        "action = \"recreate-slot\"\n\n",
        "[fault_profile]\nkinds = [\"clog\", \"kill-connector-task\", \"fail-over-to-standby\"]\nmax_faults = 7\n",
        "window = [\"1s\", \"90s\"]\nmoments = [\"change-acked\", \"snapshot-completed\"]\n",
        "[handoff]\nmethod = \"plain-read\"\nread_at_ms = 2500\n",
        "[failover]\ngate = \"fail-closed\"\n",
        "findings = [\"I2\", \"I4\"]\nallow = [\"I3\", \"fails-closed\"]\n",
        "three quotes \\\"\\\"\" and a tab\t.\n\"\"\"\n",
        "ends in a quote: \\\"\"\"\"\n",
        "[check]\nrows = 3\ncrash = [\"connect\", \"postgres\"]\ncrashes = 2\npause = [\"connect\"]\npauses = 1\n\
         crash_while = \"after-streaming\"\nscript_while = \"after-streaming-started\"\ncommit_visibility = \"with-commit-record\"\nperiodic_fires = 2\n",
        "unreached_ok = [\"the acceptance boundary is reached\"]\n",
        "[[check.script]]\nupdate = 2\nstatus = \"paid\"\nlabel = \"any time\"\n",
        "[[check.script]]\ndelete = { region_id = 1, payment_no = 3 }\ntable = \"public.payments\"\n",
    ] {
        assert!(text.contains(line), "expected {line:?} in:\n{text}");
    }
    let headers: Vec<&str> = text.lines().filter(|line| line.starts_with('[')).collect();
    let mut expected = vec!["[versions]", "[postgres]", "[postgres.standby]", "[[table]]", "[[table]]"];
    expected.extend(["[connector]", "[connect]", "[kafka]", "[sink]", "[workload]"]);
    expected.extend(["[[workload.script]]"; 4]);
    expected.extend(["[[fault]]"; 14]);
    expected.extend(["[fault_profile]", "[handoff]", "[failover]", "[acceptance]", "[prediction]"]);
    expected.extend(["[check]", "[[check.script]]", "[[check.script]]"]);
    assert_eq!(headers, expected);
}

#[test]
fn minimal_spec_round_trips() {
    let mut spec = handoff_models::scenario::spec::claims_minimal(3, ApplyRule::VersionGuard);
    spec.prediction.why = "nothing goes wrong".into();
    let text = round_trip(&spec, 1);
    for absent in ["[versions]", "[workload]\n", "[[fault]]", "[fault_profile]", "[handoff]", "[failover]", "allow"] {
        assert!(!text.contains(absent), "{absent:?} should not be written:\n{text}");
    }
}

#[test]
fn a_large_batch_gets_a_queue_larger_than_it() {
    let mut spec = everything();
    spec.connector_properties.remove("max.queue.size");
    spec.connector_properties.insert("max.batch.size".into(), "10000".into());
    spec.debezium.max_batch_size = 10_000;
    let text = round_trip(&spec, 1);
    assert!(text.contains("\"max.queue.size\" = 40000\n"), "{text}");
}

#[test]
fn inconsistent_property_text_yields_to_the_modelled_value() {
    let mut spec = everything();
    spec.connector_properties.insert("max.batch.size".into(), "7".into());
    let text = to_toml(&spec, 1).unwrap_or_else(|error| panic!("{error}"));
    assert!(text.contains("\"max.batch.size\" = 512\n"), "{text}");
    let loaded = load_str("written.toml", &text, &[]).unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(loaded.spec.debezium, spec.debezium);
}

// ---------------------------------------------------------------------------------------------
// What the format cannot express.

#[test]
fn a_statement_of_two_kinds_of_change_or_of_none_is_refused() {
    let mut spec = everything();
    spec.scripted[1].ops.push(RowOp::Delete { table: TableId(0), key: 5 });
    let error = to_toml(&spec, 1).unwrap_err();
    assert!(error.contains("workload script entry 1"), "{error}");
    assert!(error.contains("changes rows in different ways"), "{error}");
    spec.scripted[1].ops.clear();
    assert!(to_toml(&spec, 1).unwrap_err().contains("changes no row"));
}

/// Sessions and transactions (issue 18): named sessions in two databases, `BEGIN` at both
/// isolation levels, statements of several rows, a `COPY`, messages, `COMMIT`, `ROLLBACK`, idle
/// time, a later step at its own trigger and one without, background transactions of several
/// rows interleaved, and a bound's sessions.
#[test]
fn sessions_and_transactions_round_trip() {
    use handoff_models::components::app::StepKind;
    use handoff_models::core::protocol::Isolation;
    use handoff_models::scenario::spec::ScriptStep;
    let mut spec = everything();
    spec.tables.push(TableSetup {
        id: TableId(2),
        name: "public.reports".into(),
        rows: 0,
        replica_identity: ReplicaIdentity::Default,
        database: Some("analytics".into()),
        outbox: None,
        composite_key: None,
        unique_column: None,
        keyless: false,
    });
    let claims = TableId(0);
    let on = |session: &str, kind: StepKind, trigger: Trigger, ops: Vec<RowOp>, idle_ms: u64| ScriptedTxn {
        trigger,
        ops,
        label: String::new(),
        step: ScriptStep { kind, session: Some(session.into()), database: None, idle_ms },
    };
    let ready = Trigger::At { at_ms: 0 };
    let at = |at_ms| Trigger::At { at_ms };
    let after = |moment, occurrence, plus_ms| Trigger::After { moment, occurrence, plus_ms };
    let update = |key| RowOp::Update { table: claims, key, status: Status::Paid };
    let insert = |table, key| RowOp::Insert { table, key, status: Status::Submitted, amount_cents: 7 };
    let mut forgotten =
        on("forgotten", StepKind::Begin { isolation: Isolation::ReadCommitted }, at(9_000), Vec::new(), 0);
    forgotten.step.database = Some("analytics".into());
    spec.scripted.extend([
        on("s1", StepKind::Begin { isolation: Isolation::RepeatableRead }, at(1_000), Vec::new(), 0),
        on("s1", StepKind::Statement, ready, vec![update(1), update(2), update(3)], 0),
        on(
            "s2",
            StepKind::Begin { isolation: Isolation::ReadCommitted },
            after(Moment::SnapshotScanStarted, 1, 5),
            Vec::new(),
            0,
        ),
        on("s2", StepKind::Copy, ready, vec![insert(claims, 3_001), insert(claims, 3_002)], 250),
        on(
            "s1",
            StepKind::Message { transactional: true, prefix: "outbox".into(), payload_bytes: 64 },
            at(2_000),
            Vec::new(),
            0,
        ),
        on("s2", StepKind::Rollback, ready, Vec::new(), 0),
        on("s1", StepKind::Commit, ready, Vec::new(), 0),
        forgotten,
        on("forgotten", StepKind::Statement, ready, vec![insert(TableId(2), 1)], 3_600_000),
        on("forgotten", StepKind::Commit, ready, Vec::new(), 0),
        ScriptedTxn {
            trigger: at(10_000),
            ops: Vec::new(),
            label: "a heartbeat".into(),
            step: ScriptStep {
                kind: StepKind::Message { transactional: false, prefix: "hb".into(), payload_bytes: 0 },
                ..ScriptStep::default()
            },
        },
    ]);
    if let Some(background) = spec.background.as_mut() {
        background.transaction_size = 4;
        background.concurrency = 3;
    }
    let check = spec.check.as_mut().expect("a bound");
    let any = Trigger::At { at_ms: 0 };
    check.scripts.extend([
        on("a", StepKind::Begin { isolation: Isolation::ReadCommitted }, any, Vec::new(), 0),
        on("a", StepKind::Statement, any, vec![update(1), update(2)], 0),
        on("b", StepKind::Begin { isolation: Isolation::ReadCommitted }, any, Vec::new(), 0),
        on("b", StepKind::Statement, any, vec![RowOp::Delete { table: claims, key: 3 }], 0),
        on("a", StepKind::Commit, any, Vec::new(), 0),
        on("b", StepKind::Rollback, any, Vec::new(), 0),
    ]);
    let text = round_trip(&spec, 3);
    assert!(text.contains("session = \"forgotten\"\ndatabase = \"analytics\"\nbegin = true"), "{text}");
    assert!(text.contains("update = [1, 2, 3]"), "{text}");
    assert!(text.contains("copy = true") && text.contains("idle_ms = 3600000"), "{text}");
}

/// Message outboxes: their declarations, and `event` steps through them, autocommit and in a
/// session, numbered in one sequence with an outbox table's events.
#[test]
fn message_outboxes_round_trip() {
    use handoff_models::components::app::StepKind;
    use handoff_models::core::ids::MessageEvent;
    use handoff_models::core::protocol::Isolation;
    use handoff_models::scenario::spec::{MessageOutbox, OutboxTable, ScriptStep};
    let mut spec = everything();
    spec.tables.push(TableSetup {
        id: TableId(2),
        name: "public.outbox_event".into(),
        rows: 0,
        replica_identity: ReplicaIdentity::Default,
        database: None,
        outbox: Some(OutboxTable { aggregatetype: "claim".into(), delete: true }),
        composite_key: None,
        unique_column: None,
        keyless: false,
    });
    spec.message_outboxes = vec![
        MessageOutbox { prefix: "outbox".into(), aggregatetype: "claim".into(), transactional: true },
        MessageOutbox { prefix: "audit.v1".into(), aggregatetype: "policy".into(), transactional: false },
    ];
    let claims = TableId(0);
    let message = |outbox: u16, id, key, session: Option<&str>| {
        let event = MessageEvent { outbox, id, aggregate_id: key as u32, event_type: Status::Closed };
        ScriptedTxn {
            trigger: Trigger::At { at_ms: if session.is_some() { 0 } else { 4_000 } },
            ops: vec![RowOp::Update { table: claims, key, status: Status::Closed }],
            label: format!("event {id}"),
            step: ScriptStep {
                kind: spec.message_outboxes[usize::from(outbox)].step(event),
                session: session.map(str::to_owned),
                ..ScriptStep::default()
            },
        }
    };
    let begin = ScriptedTxn {
        trigger: Trigger::At { at_ms: 5_000 },
        ops: Vec::new(),
        label: String::new(),
        step: ScriptStep {
            kind: StepKind::Begin { isolation: Isolation::ReadCommitted },
            session: Some("s1".into()),
            ..ScriptStep::default()
        },
    };
    let rollback = ScriptedTxn {
        step: ScriptStep { kind: StepKind::Rollback, ..begin.step.clone() },
        trigger: Trigger::At { at_ms: 0 },
        ..begin.clone()
    };
    let table_event = ScriptedTxn::autocommit(
        Trigger::At { at_ms: 6_000 },
        vec![
            RowOp::Update { table: claims, key: 4, status: Status::Paid },
            RowOp::InsertEvent { table: TableId(2), id: 3, aggregate_id: 4, event_type: Status::Paid },
            RowOp::Delete { table: TableId(2), key: 3 },
        ],
        "the table's event",
    );
    spec.scripted = vec![message(0, 1, 5, None), begin, message(1, 2, 6, Some("s1")), rollback, table_event];
    let text = round_trip(&spec, 5);
    assert!(
        text.contains("[[message_outbox]]\nprefix = \"audit.v1\"\naggregatetype = \"policy\"\ntransactional = false"),
        "{text}"
    );
    assert!(text.contains("event = 5\nstatus = \"closed\"\noutbox = \"outbox\""), "{text}");
}

#[test]
fn unknown_tables_are_refused() {
    let mut spec = everything();
    spec.scripted[0].ops = vec![RowOp::Delete { table: TableId(9), key: 1 }];
    assert!(to_toml(&spec, 1).unwrap_err().contains("names table 9"));
    let mut spec = everything();
    spec.debezium.tables.push(TableId(2));
    assert!(to_toml(&spec, 1).unwrap_err().contains("table.include.list names table 2"));
}

#[test]
fn values_the_loader_rejects_or_reads_differently_are_refused() {
    type Change = fn(&mut Spec);
    let cases: Vec<(&str, Change)> = vec![
        ("not-trimmed why", |spec| spec.prediction.why = " padded ".into()),
        ("empty why", |spec| spec.prediction.why = String::new()),
        ("log position check off", |spec| spec.debezium.log_position_check_enable = false),
        ("idle background", |spec| {
            spec.background = Some(Background {
                start_ms: 0,
                end_ms: 10,
                inserts_per_second: 0.0,
                updates_per_second: 0.0,
                deletes_per_second: 0.0,
                events_per_second: 0.0,
                transaction_size: 1,
                concurrency: 1,
            })
        }),
        ("failover without standby", |spec| {
            spec.postgres.standby = None;
            spec.gate = GatePolicy::Off;
            spec.profile = None;
        }),
        ("unknown connector property", |spec| {
            spec.connector_properties.insert("snapshot.mod".into(), "initial".into());
        }),
        ("unchecked invariant", |spec| spec.prediction.allow = vec![Invariant::I7]),
        ("table id not its index", |spec| spec.tables[1].id = TableId(5)),
        ("huge timeout", |spec| spec.acceptance.timeout_ms = u64::MAX),
        ("a fault past the horizon", |spec| {
            spec.faults[0].trigger = Trigger::At { at_ms: spec.acceptance.horizon_ms + 1 }
        }),
        ("a delay past the horizon", |spec| {
            spec.faults[0].action = FaultAction::CrashPostgres { restart_after_ms: spec.acceptance.horizon_ms + 1 }
        }),
        ("too many rows", |spec| spec.tables[0].rows = limits::MAX_ROWS as u32),
        ("occurrence 0", |spec| {
            spec.faults[2].trigger = Trigger::After { moment: Moment::Promoted, occurrence: 0, plus_ms: 0 }
        }),
    ];
    for (case, change) in cases {
        let mut spec = everything();
        change(&mut spec);
        let error = to_toml(&spec, 1).expect_err(case);
        assert!(error.contains("every-feature"), "{case}: {error}");
    }
    assert!(to_toml(&everything(), u64::MAX).unwrap_err().contains("does not fit in a TOML integer"));
}

// ---------------------------------------------------------------------------------------------
// Generated specs.

/// Text with the characters that need care in TOML strings.
fn text() -> impl Strategy<Value = String> {
    let special = prop_oneof![Just('"'), Just('\\'), Just('\n'), Just('\r'), Just('\t'), Just('\u{7f}'), Just('\0')];
    let c = prop_oneof![3 => any::<char>(), 2 => special, 3 => proptest::char::range('a', 'z')];
    proptest::collection::vec(c, 0..24).prop_map(|chars| chars.into_iter().collect())
}

/// The horizon of [`everything`]: the generated times lie within it, as the loader requires.
const HORIZON_MS: u64 = 7_200_000;

/// A time of the run: within the horizon, its ends included.
fn ms() -> impl Strategy<Value = u64> {
    prop_oneof![0..100_000u64, (0..=HORIZON_MS / 60_000).prop_map(|n| n * 60_000), 0..=HORIZON_MS, Just(HORIZON_MS)]
}

/// Up to `i64::MAX`: what a TOML integer holds.
fn toml_int() -> impl Strategy<Value = u64> {
    prop_oneof![0..100_000u64, 0..=i64::MAX as u64]
}

fn trigger() -> impl Strategy<Value = Trigger> {
    prop_oneof![
        ms().prop_map(|at_ms| Trigger::At { at_ms }),
        (proptest::sample::select(Moment::ALL.to_vec()), prop_oneof![1..5u32, 1..=u32::MAX], ms())
            .prop_map(|(moment, occurrence, plus_ms)| Trigger::After { moment, occurrence, plus_ms }),
    ]
}

fn status() -> impl Strategy<Value = Status> {
    proptest::sample::select(vec![Status::Submitted, Status::Assessed, Status::Approved, Status::Paid, Status::Closed])
}

fn row_op() -> impl Strategy<Value = RowOp> {
    let table = (0..2u16).prop_map(TableId);
    let key = prop_oneof![1..100i64, 1..=i64::MAX];
    prop_oneof![
        (table.clone(), key.clone(), status(), any::<u32>())
            .prop_map(|(table, key, status, amount_cents)| RowOp::Insert { table, key, status, amount_cents }),
        (table.clone(), key.clone(), status()).prop_map(|(table, key, status)| RowOp::Update { table, key, status }),
        (table, key).prop_map(|(table, key)| RowOp::Delete { table, key }),
    ]
}

fn fault_action() -> impl Strategy<Value = FaultAction> {
    let nodes = vec![
        Node::Postgres,
        Node::Pg1,
        Node::Pg2,
        Node::Connect,
        Node::Kafka,
        Node::Sink,
        Node::App,
        Node::Operator,
        Node::Loader,
    ];
    let pair = proptest::sample::subsequence(nodes, 2).prop_shuffle().prop_map(|pair| (pair[0], pair[1]));
    prop_oneof![
        proptest::option::of(ms()).prop_map(|restart_after_ms| FaultAction::KillConnectWorker { restart_after_ms }),
        proptest::option::of(ms()).prop_map(|restart_after_ms| FaultAction::KillConnectorTask { restart_after_ms }),
        proptest::option::of(ms()).prop_map(|resume_after_ms| FaultAction::StopConnector { resume_after_ms }),
        ms().prop_map(|restart_after_ms| FaultAction::CrashPostgres { restart_after_ms }),
        ms().prop_map(|promote_after_ms| FaultAction::FailOverToStandby { promote_after_ms }),
        Just(FaultAction::RecreateSlot),
        (pair, 1..=HORIZON_MS).prop_map(|(between, duration_ms)| FaultAction::Clog { between, duration_ms }),
        prop_oneof![1..=(64u64 << 30), (1..=64u64).prop_map(|mb| mb << 20)]
            .prop_map(|bytes| FaultAction::WalBurst { bytes }),
        Just(FaultAction::Checkpoint),
        proptest::option::of(1..=u64::MAX)
            .prop_map(|to| FaultAction::AdvanceSlot { to_lsn: to.map(handoff_models::core::lsn::Lsn) }),
    ]
}

fn profile() -> impl Strategy<Value = FaultProfile> {
    // The generated scenarios have no outbox consumer to kill, nor a group of workers for a clean
    // shutdown.
    let kinds: Vec<FaultKind> = FaultKind::ALL
        .into_iter()
        .filter(|kind| !matches!(kind, FaultKind::KillConsumer | FaultKind::StopConnectWorker))
        .collect();
    let most = kinds.len();
    (
        proptest::sample::subsequence(kinds, 1..most).prop_shuffle(),
        0..=20u32,
        (ms(), ms()),
        proptest::sample::subsequence(Moment::ALL.to_vec(), 0..=Moment::ALL.len()).prop_shuffle(),
    )
        .prop_map(|(kinds, max_faults, (a, b), moments)| FaultProfile {
            kinds,
            max_faults,
            window_ms: (a.min(b), a.max(b)),
            moments,
        })
}

fn rate() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        0.0..1_000.0f64,
        proptest::num::f64::NORMAL.prop_map(f64::abs),
        Just(f64::MIN_POSITIVE / 4.0)
    ]
}

/// A background workload within the horizon and the transaction budget (less the scripted
/// transactions `spec()` may add): rates that would make too many are scaled down.
fn background() -> impl Strategy<Value = Option<Background>> {
    let busy = (ms(), 1..1_000_000u64, rate(), rate(), rate(), 1..=1_000u32);
    proptest::option::of(busy.prop_map(|(start_ms, length, inserts, updates, deletes, floor)| {
        let start_ms = start_ms.min(HORIZON_MS - length);
        let mut background = Background {
            start_ms,
            end_ms: start_ms + length,
            // At least one rate above 0, or the loader reads no background.
            inserts_per_second: inserts.max(f64::from(floor) / 1_000.0),
            updates_per_second: updates,
            deletes_per_second: deletes,
            events_per_second: 0.0,
            transaction_size: 1,
            concurrency: 1,
        };
        let budget = (limits::MAX_TRANSACTIONS - 6) as f64;
        while background.transactions() as f64 > budget {
            for rate in [
                &mut background.inserts_per_second,
                &mut background.updates_per_second,
                &mut background.deletes_per_second,
            ] {
                *rate /= 2.0;
            }
        }
        background
    }))
}

fn why() -> impl Strategy<Value = String> {
    text().prop_map(|text| match text.trim() {
        "" => "because".to_owned(),
        trimmed => trimmed.to_owned(),
    })
}

/// `op` made one the loader takes in any script: an update or delete of a loaded row, an insert
/// of a key past the loaded ones.
fn applicable(spec: &Spec, op: RowOp) -> RowOp {
    let loaded = |table: TableId| i64::from(spec.tables[usize::from(table.0)].rows);
    match op {
        RowOp::Insert { table, key, status, amount_cents } if key <= loaded(table) => {
            RowOp::Insert { table, key: key + loaded(table), status, amount_cents }
        }
        RowOp::Update { table, key, .. } | RowOp::Delete { table, key } if loaded(table) == 0 => {
            RowOp::Insert { table, key, status: Status::Submitted, amount_cents: 1 }
        }
        RowOp::Update { table, key, status } => RowOp::Update { table, key: (key - 1) % loaded(table) + 1, status },
        RowOp::Delete { table, key } => RowOp::Delete { table, key: (key - 1) % loaded(table) + 1 },
        insert => insert,
    }
}

prop_compose! {
    fn spec()(
        (name, description, why) in (text(), text(), why()),
        scripted in proptest::collection::vec((trigger(), row_op(), text()), 0..6),
        faults in proptest::collection::vec((trigger(), fault_action()), 0..8),
        profile in proptest::option::of(profile()),
        background in background(),
        (version, wal_segment_size, checkpoint_timeout_ms) in
            ((1..=3u32, 0..=9u32), (20..=30u32).prop_map(|shift| 1u64 << shift), 30_000..=86_400_000u64),
        (max_wal_segments, cap_mb, wal_keep_size_mb) in
            (2..=64u64, proptest::option::of(0..=65_536u64), 0..=65_536u64),
        (rows, batch, seed, plain_read) in
            (0..=(limits::MAX_ROWS - 10) as u32, 1..=20_000u32, toml_int(), proptest::option::of(ms())),
        holds in any::<bool>(),
    ) -> (Spec, u64) {
        let mut spec = everything();
        spec.name = name;
        spec.description = description;
        spec.prediction.why = why;
        spec.tables[0].rows = rows;
        // Steps the loader takes: an update or delete names a loaded row (a table without rows
        // gets an insert instead), an insert a key past the loaded ones.
        spec.scripted = scripted
            .into_iter()
            .map(|(trigger, op, label)| ScriptedTxn { trigger, ops: vec![applicable(&spec, op)], label, step: Default::default() })
            .collect();
        spec.faults = faults.into_iter().map(|(trigger, action)| Fault { trigger, action, connector: 0, worker: None }).collect();
        spec.profile = profile;
        spec.background = background;
        spec.debezium.version = version.min((3, 7));
        // From 3.2 Debezium needs a driver with `withAutomaticFlush` (42.7.6): the loader refuses
        // an older one there.
        if spec.debezium.version >= (3, 2) && spec.debezium.pgjdbc.is_some_and(|driver| driver < (42, 7, 6)) {
            spec.debezium.pgjdbc = Some((42, 7, 6));
        }
        spec.postgres.wal_segment_size = wal_segment_size;
        spec.postgres.checkpoint_timeout_ms = checkpoint_timeout_ms;
        spec.postgres.max_wal_size_mb = max_wal_segments * (wal_segment_size >> 20);
        spec.postgres.max_slot_wal_keep_size_mb = cap_mb;
        spec.postgres.wal_keep_size_mb = wal_keep_size_mb;
        spec.debezium.max_batch_size = batch;
        spec.connector_properties.insert("max.batch.size".into(), batch.to_string());
        spec.connector_properties.remove("max.queue.size");
        spec.handoff = plain_read.map_or(HandoffMethod::ConnectorSnapshot, |read_at_ms| HandoffMethod::PlainRead { read_at_ms });
        if holds {
            spec.prediction.verdict = Verdict::Holds;
            spec.prediction.findings.clear();
        }
        (spec, seed)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn generated_specs_round_trip((spec, seed) in spec()) {
        round_trip(&spec, seed);
    }

    /// Whatever a spec holds, the writer returns text or an error; it never panics.
    #[test]
    fn the_writer_never_panics(
        (spec, seed) in spec(),
        any_seed in any::<u64>(),
        occurrence in any::<u32>(),
        ops in proptest::collection::vec(row_op(), 0..3),
        table in any::<u16>(),
        rate in any::<f64>(),
    ) {
        let mut spec = spec;
        if let Some(txn) = spec.scripted.first_mut() {
            txn.ops = ops;
        }
        if let Some(fault) = spec.faults.first_mut() {
            fault.trigger = Trigger::After { moment: Moment::Promoted, occurrence, plus_ms: 0 };
        }
        spec.debezium.tables.push(TableId(table));
        if let Some(background) = &mut spec.background {
            background.deletes_per_second = rate;
        }
        let _ = to_toml(&spec, seed);
        let _ = to_toml(&spec, any_seed);
    }
}
