//! The scenario loader: a complete file read into the expected `Spec`, and errors that name the
//! file, the line, the column and the field (or the `--set` argument).

use handoff_models::components::connect::debezium::{OffsetMismatchStrategy, SnapshotMode};
use handoff_models::components::operator::GatePolicy;
use handoff_models::components::sink::ApplyRule;
use handoff_models::core::change::{ReplicaIdentity, RowOp};
use handoff_models::core::ids::{Node, Status, TableId};
use handoff_models::core::lsn::Lsn;
use handoff_models::exhaustive::world::{Action, CrashWhile};
use handoff_models::scenario::spec::{
    Background, FaultAction, FaultKind, FaultProfile, HandoffMethod, Invariant, Moment, Trigger,
};
use handoff_sim::scenario::{Loaded, load_str};
use proptest::prelude::*;

/// Every section, with line numbers that the tests below do not depend on.
const COMPLETE: &str = r#"# A complete scenario.
name = "complete"
description = "every section"
seed = 7

[postgres]
version = 16
wal_segment_size = "64MB"
checkpoint_timeout = "30s"
scan_rows_per_second = 5000

[postgres.standby]
replication_delay_ms = 25

[[table]]
name = "public.claims"
rows = 100
replica_identity = "full"

[[table]]
name = "public.payments"

[connector]
"topic.prefix" = "claims"
"plugin.name" = "pgoutput"
"snapshot.mode" = "when_needed"
"max.batch.size" = "512"
"tombstones.on.delete" = false
"table.include.list" = "public.payments, public.claims"
"database.port" = 5432

[connect]
"offset.flush.interval.ms" = 10000
start_at_ms = 1000

[kafka]
partitions = 4

[sink]
apply = "snapshot-epoch"
"max.poll.records" = 50

[workload]
start_ms = 0
end_ms = 60000
inserts_per_second = 2.5
updates_per_second = 10

[[workload.script]]
at = "snapshot-scan-started + 200ms"
delete = 7
label = "delete during the scan"

[[workload.script]]
at = "45s"
insert = 1000
table = "public.payments"

[[workload.script]]
at = "streaming-started#2+1min"
update = 3
status = "paid"

[[fault]]
at = "snapshot-completion-marker-acked"
action = "kill-connect-worker"
restart_after_ms = 5000

[[fault]]
at = "2min"
action = "fail-over-to-standby"
promote_after_ms = 3000

[[fault]]
at = "promoted + 1s"
action = "stop-connector"

[failover]
gate = "rebuild"

[acceptance]
sample_size = 5

[prediction]
verdict = "violated"
findings = ["I2"]
allow = ["I3", "I8"]
why = "the kill lands between the marker ack and the flush"
"#;

/// The smallest valid scenario: 11 lines, so sections appended to it start on line 12.
const MIN: &str = r#"name = "min"
[[table]]
name = "public.claims"
[connector]
"topic.prefix" = "claims"
"plugin.name" = "pgoutput"
[sink]
apply = "version-guard"
[prediction]
verdict = "holds"
why = "nothing goes wrong"
"#;

fn load(text: &str, sets: &[&str]) -> Result<Loaded, String> {
    let sets: Vec<String> = sets.iter().map(|set| (*set).to_owned()).collect();
    load_str("s.toml", text, &sets).map_err(|error| error.message)
}

fn ok(text: &str, sets: &[&str]) -> Loaded {
    load(text, sets).unwrap_or_else(|message| panic!("expected a valid scenario, got: {message}"))
}

/// Asserts the error starts with `prefix` (`FILE:LINE:COL: FIELD:` or `--set ARG: FIELD:`) and
/// contains `phrase`.
#[track_caller]
fn fails(text: &str, sets: &[&str], prefix: &str, phrase: &str) {
    match load(text, sets) {
        Ok(_) => panic!("expected an error starting with {prefix:?}, but the scenario loaded"),
        Err(message) => {
            assert!(message.starts_with(prefix), "expected prefix {prefix:?} in:\n{message}");
            assert!(message.contains(phrase), "expected {phrase:?} in:\n{message}");
        }
    }
}

/// `MIN` with `old` replaced by `new` (which must occur once).
fn min_with(old: &str, new: &str) -> String {
    assert_eq!(MIN.matches(old).count(), 1, "{old:?} must occur once in MIN");
    MIN.replacen(old, new, 1)
}

// ---------------------------------------------------------------------------------------------
// Valid files.

#[test]
fn complete_scenario_reads_into_the_spec() {
    let loaded = ok(COMPLETE, &[]);
    let spec = &loaded.spec;
    assert_eq!(loaded.seed, 7);
    assert_eq!(spec.name, "complete");
    assert_eq!(spec.description, "every section");
    assert_eq!(spec.postgres.major_version, 16);
    assert_eq!(spec.postgres.wal_segment_size, 64 << 20);
    assert_eq!(spec.postgres.checkpoint_timeout_ms, 30_000);
    assert_eq!(spec.postgres.scan_rows_per_second, 5_000);
    assert_eq!(spec.postgres.standby, Some(25));

    assert_eq!(spec.tables.len(), 2);
    assert_eq!(spec.tables[0].id, TableId(0));
    assert_eq!(spec.tables[0].name, "public.claims");
    assert_eq!(spec.tables[0].rows, 100);
    assert_eq!(spec.tables[0].replica_identity, ReplicaIdentity::Full);
    assert_eq!(spec.tables[1].id, TableId(1));
    assert_eq!(spec.tables[1].rows, 0);
    assert_eq!(spec.tables[1].replica_identity, ReplicaIdentity::Default);

    let debezium = &spec.debezium;
    assert_eq!(debezium.name, "claims-connector");
    assert_eq!(debezium.topic_prefix, "claims");
    assert_eq!(debezium.plugin_name, "pgoutput");
    assert_eq!(debezium.slot_name, "debezium");
    assert_eq!(debezium.publication_name, "dbz_publication");
    assert_eq!(debezium.snapshot_mode, SnapshotMode::WhenNeeded);
    assert_eq!(debezium.snapshot_fetch_size, 10_240);
    assert_eq!(debezium.max_batch_size, 512);
    assert_eq!(debezium.poll_interval_ms, 500);
    assert_eq!(debezium.retriable_restart_connector_wait_ms, 10_000);
    assert!(!debezium.tombstones_on_delete);
    assert!(debezium.log_position_check_enable);
    assert_eq!(debezium.tables, vec![TableId(1), TableId(0)]);

    let properties: Vec<(&str, &str)> =
        spec.connector_properties.iter().map(|(key, value)| (key.as_str(), value.as_str())).collect();
    assert_eq!(
        properties,
        vec![
            ("database.port", "5432"),
            ("max.batch.size", "512"),
            ("plugin.name", "pgoutput"),
            ("snapshot.mode", "when_needed"),
            ("table.include.list", "public.payments, public.claims"),
            ("tombstones.on.delete", "false"),
            ("topic.prefix", "claims"),
        ]
    );

    assert_eq!(spec.connect.offset_flush_interval_ms, 10_000);
    assert_eq!(spec.connect.offset_flush_timeout_ms, 5_000);
    assert_eq!(spec.connector_start_ms, 1_000);
    assert_eq!(spec.kafka.partitions, 4);
    assert_eq!(spec.sink.rule, ApplyRule::SnapshotEpoch);
    assert_eq!(spec.sink.group, "claims-search-index");
    assert_eq!(spec.sink.auto_commit_interval_ms, 5_000);
    assert_eq!(spec.sink.max_poll_records, 50);

    assert_eq!(
        spec.background,
        Some(Background {
            start_ms: 0,
            end_ms: 60_000,
            inserts_per_second: 2.5,
            updates_per_second: 10.0,
            deletes_per_second: 0.0,
            events_per_second: 0.0,
            transaction_size: 1,
            concurrency: 1,
        })
    );
    assert_eq!(spec.scripted.len(), 3);
    assert_eq!(
        spec.scripted[0].trigger,
        Trigger::After { moment: Moment::SnapshotScanStarted, occurrence: 1, plus_ms: 200 }
    );
    assert_eq!(spec.scripted[0].ops, vec![RowOp::Delete { table: TableId(0), key: 7 }]);
    assert_eq!(spec.scripted[0].label, "delete during the scan");
    assert_eq!(spec.scripted[1].trigger, Trigger::At { at_ms: 45_000 });
    assert_eq!(
        spec.scripted[1].ops,
        vec![RowOp::Insert { table: TableId(1), key: 1000, status: Status::Submitted, amount_cents: 100_000 }]
    );
    assert_eq!(spec.scripted[1].label, "");
    assert_eq!(
        spec.scripted[2].trigger,
        Trigger::After { moment: Moment::StreamingStarted, occurrence: 2, plus_ms: 60_000 }
    );
    assert_eq!(spec.scripted[2].ops, vec![RowOp::Update { table: TableId(0), key: 3, status: Status::Paid }]);

    assert_eq!(spec.faults.len(), 3);
    assert_eq!(
        spec.faults[0].trigger,
        Trigger::After { moment: Moment::SnapshotCompletionMarkerAcked, occurrence: 1, plus_ms: 0 }
    );
    assert_eq!(spec.faults[0].action, FaultAction::KillConnectWorker { restart_after_ms: Some(5_000) });
    assert_eq!(spec.faults[1].trigger, Trigger::At { at_ms: 120_000 });
    assert_eq!(spec.faults[1].action, FaultAction::FailOverToStandby { promote_after_ms: 3_000 });
    assert_eq!(spec.faults[2].trigger, Trigger::After { moment: Moment::Promoted, occurrence: 1, plus_ms: 1_000 });
    assert_eq!(spec.faults[2].action, FaultAction::StopConnector { resume_after_ms: None });

    assert_eq!(spec.handoff, HandoffMethod::ConnectorSnapshot);
    assert_eq!(spec.gate, GatePolicy::Rebuild);
    assert_eq!(spec.acceptance.timeout_ms, 600_000);
    assert_eq!(spec.acceptance.sample_size, 5);
    assert_eq!(spec.prediction.verdict, handoff_models::scenario::spec::Verdict::Violated);
    assert_eq!(spec.prediction.findings, vec![Invariant::I2]);
    assert_eq!(spec.prediction.allow, vec![Invariant::I3, Invariant::I8]);
    assert_eq!(spec.prediction.why, "the kill lands between the marker ack and the flush");
}

#[test]
fn minimal_scenario_takes_the_documented_defaults() {
    let loaded = ok(MIN, &[]);
    let spec = &loaded.spec;
    assert_eq!(loaded.seed, 1);
    assert_eq!(spec.description, "");
    assert_eq!(spec.postgres.major_version, 15);
    assert_eq!(spec.postgres.wal_segment_size, 16 << 20);
    assert_eq!(spec.postgres.checkpoint_timeout_ms, 300_000);
    assert_eq!(spec.postgres.scan_rows_per_second, 20_000);
    assert_eq!(spec.postgres.standby, None);
    assert_eq!(spec.tables[0].rows, 0);
    assert_eq!(spec.debezium.snapshot_mode, SnapshotMode::Initial);
    assert_eq!(spec.debezium.max_batch_size, 2_048);
    assert!(spec.debezium.tombstones_on_delete);
    assert_eq!(spec.debezium.tables, vec![TableId(0)]);
    assert_eq!(spec.connector_properties.len(), 2);
    assert_eq!(spec.connect.offset_flush_interval_ms, 60_000);
    assert_eq!(spec.connector_start_ms, 0);
    assert_eq!(spec.kafka.partitions, 1);
    assert_eq!(spec.sink.rule, ApplyRule::VersionGuard);
    assert_eq!(spec.sink.max_poll_records, 500);
    assert_eq!(spec.background, None);
    assert!(spec.scripted.is_empty() && spec.faults.is_empty());
    assert_eq!(spec.gate, GatePolicy::Off);
    assert_eq!(spec.acceptance.timeout_ms, 600_000);
    assert_eq!(spec.acceptance.sample_size, 20);
    assert_eq!(spec.prediction.verdict, handoff_models::scenario::spec::Verdict::Holds);
    assert!(spec.prediction.findings.is_empty() && spec.prediction.allow.is_empty());
}

#[test]
fn plain_read_and_connector_values_as_strings() {
    let text = format!("{MIN}[handoff]\nmethod = \"plain-read\"\nread_at_ms = 2500\n");
    let text = text
        .replace("\"plugin.name\" = \"pgoutput\"", "\"plugin.name\" = \"pgoutput\"\n\"poll.interval.ms\" = \"250\"");
    let spec = ok(&text, &[]).spec;
    assert_eq!(spec.handoff, HandoffMethod::PlainRead { read_at_ms: 2_500 });
    assert_eq!(spec.debezium.poll_interval_ms, 250);
}

// ---------------------------------------------------------------------------------------------
// Errors in the file: FILE:LINE:COL: FIELD: PROBLEM.

#[test]
fn unknown_top_level_field() {
    fails(&format!("nmae = \"x\"\n{MIN}"), &[], "s.toml:1:1: nmae: ", "unknown field; did you mean \"name\"?");
}

#[test]
fn unknown_connector_property_with_suggestion() {
    let text = min_with(
        "\"plugin.name\" = \"pgoutput\"\n",
        "\"plugin.name\" = \"pgoutput\"\n\"snapshot.mod\" = \"initial\"\n",
    );
    fails(&text, &[], "s.toml:7:1: connector.\"snapshot.mod\": ", "did you mean \"snapshot.mode\"?");
}

#[test]
fn bad_snapshot_mode() {
    let text = min_with(
        "\"plugin.name\" = \"pgoutput\"\n",
        "\"plugin.name\" = \"pgoutput\"\n\"snapshot.mode\" = \"inital\"\n",
    );
    let message = load(&text, &[]).unwrap_err();
    assert_eq!(
        message,
        "s.toml:7:1: connector.\"snapshot.mode\": unknown value `inital`; expected one of initial, no_data, \
         when_needed, always"
    );
}

#[test]
fn snapshot_mode_never_was_removed() {
    let text =
        min_with("\"plugin.name\" = \"pgoutput\"\n", "\"plugin.name\" = \"pgoutput\"\n\"snapshot.mode\" = \"never\"\n");
    fails(&text, &[], "s.toml:7:1: connector.\"snapshot.mode\": ", "removed in Debezium 3.3 (DBZ-8171)");
    fails(&text, &[], "s.toml:7:1:", "alias of `no_data`");
}

#[test]
fn snapshot_mode_never_is_no_data_before_3_3() {
    let text =
        min_with("\"plugin.name\" = \"pgoutput\"\n", "\"plugin.name\" = \"pgoutput\"\n\"snapshot.mode\" = \"never\"\n");
    for release in ["1.0", "2.6", "3.2"] {
        let loaded = ok(&text, &[&format!("versions.debezium=\"{release}\"")]);
        assert_eq!(loaded.spec.debezium.snapshot_mode, SnapshotMode::NoData, "{release}");
        assert_eq!(loaded.spec.connector_properties["snapshot.mode"], "never");
    }
    fails(
        &text,
        &["versions.debezium=\"3.3\""],
        "s.toml:7:1: connector.\"snapshot.mode\": ",
        "removed in Debezium 3.3",
    );
}

#[test]
fn snapshot_mode_not_modelled_yet() {
    let text = min_with(
        "\"plugin.name\" = \"pgoutput\"\n",
        "\"plugin.name\" = \"pgoutput\"\n\"snapshot.mode\" = \"initial_only\"\n",
    );
    fails(&text, &[], "s.toml:7:1: connector.\"snapshot.mode\": ", "not modelled yet");
}

#[test]
fn missing_topic_prefix() {
    let text = min_with("\"topic.prefix\" = \"claims\"\n", "");
    fails(&text, &[], "s.toml:4:1: connector.\"topic.prefix\": ", "required field is missing");
}

#[test]
fn missing_plugin_name_explains_decoderbufs() {
    let text = min_with("\"plugin.name\" = \"pgoutput\"\n", "");
    fails(&text, &[], "s.toml:4:1: connector.\"plugin.name\": ", "decoderbufs, is not modelled");
    let text = min_with("\"pgoutput\"", "\"decoderbufs\"");
    fails(&text, &[], "s.toml:6:1: connector.\"plugin.name\": ", "decoderbufs, is not modelled");
}

#[test]
fn unmodelled_connector_properties() {
    let cases = [
        ("\"offset.mismatch.strategy\" = \"trust_everything\"", "trust_greater_lsn"),
        ("\"lsn.flush.mode\" = \"driver\"", "connector_and_driver"),
        ("\"heartbeat.action.query\" = \"SELECT 1\"", "name exactly one [[table]]"),
        ("\"slot.drop.on.stop\" = true", "true is not modelled yet"),
        ("\"provide.transaction.metadata\" = \"true\"", "true is not modelled yet"),
        (
            "\"publication.autocreate.mode\" = \"no_tables\"",
            "not modelled yet; all_tables (FOR ALL TABLES) or filtered",
        ),
        (
            "\"heartbeat.action.query\" = \"SELECT pg_logical_emit_message(false, 'hb', md5(now()::text))\"",
            "the content `md5(now()::text)`",
        ),
        ("\"message.prefix.include.list\" = \"outbox.*\"", "the model takes prefixes by name"),
        ("\"message.prefix.exclude.list\" = \"a,,b\"", "an empty prefix in the list"),
    ];
    for (line, phrase) in cases {
        let text = min_with("\"plugin.name\" = \"pgoutput\"\n", &format!("\"plugin.name\" = \"pgoutput\"\n{line}\n"));
        fails(&text, &[], "s.toml:7:1: connector.", phrase);
    }
}

/// `heartbeat.action.query` as a logical message, and the message prefix lists, read into the
/// connector; both lists at once are refused at the second.
#[test]
fn message_heartbeats_and_message_prefix_lists_read_into_the_connector() {
    use handoff_models::components::connect::debezium::{HeartbeatMessage, MessagePrefixFilter};
    let with =
        |lines: &str| min_with("\"plugin.name\" = \"pgoutput\"\n", &format!("\"plugin.name\" = \"pgoutput\"\n{lines}"));
    let text = with(
        "\"heartbeat.interval.ms\" = 10000\n\"heartbeat.action.query\" = \"SELECT pg_logical_emit_message(false, 'heartbeat', now()::varchar)\"\n\"message.prefix.exclude.list\" = \"heartbeat, audit\"\n",
    );
    let debezium = ok(&text, &[]).spec.debezium;
    assert_eq!(
        debezium.heartbeat_action_message,
        Some(HeartbeatMessage { transactional: false, prefix: "heartbeat".into(), payload_bytes: 29 })
    );
    assert_eq!(debezium.heartbeat_action_table, None);
    assert_eq!(debezium.message_prefixes, MessagePrefixFilter::Exclude(vec!["heartbeat".into(), "audit".into()]));
    assert_eq!(ok(MIN, &[]).spec.debezium.message_prefixes, MessagePrefixFilter::All);
    let both = with("\"message.prefix.include.list\" = \"a\"\n\"message.prefix.exclude.list\" = \"b\"\n");
    fails(&both, &[], "s.toml:8:1: connector.\"message.prefix.exclude.list\": ", "cannot both be set");
    let quiet = with("\"heartbeat.action.query\" = \"SELECT pg_logical_emit_message(false, 'hb', 'x')\"\n");
    fails(&quiet, &[], "s.toml:7:1: connector.", "runs only with heartbeat.interval.ms above 0");
}

#[test]
fn the_offset_mismatch_strategy_reads_into_the_connector() {
    for strategy in OffsetMismatchStrategy::ALL {
        let line = format!("\"plugin.name\" = \"pgoutput\"\n\"offset.mismatch.strategy\" = \"{}\"\n", strategy.name());
        let spec = ok(&min_with("\"plugin.name\" = \"pgoutput\"\n", &line), &[]).spec;
        assert_eq!(spec.debezium.offset_mismatch_strategy, strategy);
    }
    assert_eq!(ok(MIN, &[]).spec.debezium.offset_mismatch_strategy, OffsetMismatchStrategy::NoValidation);
}

/// `internal.slot.seek.to.known.offset.on.start` by release: refused before 2.5 with what the
/// release does instead, read from 2.5, and from 3.4 an alias of `offset.mismatch.strategy` (which
/// wins when both are set); the name without `internal.` is refused with the real one.
#[test]
fn the_slot_seek_property_by_release() {
    let seek = |value: &str| {
        min_with(
            "\"plugin.name\" = \"pgoutput\"\n",
            &format!("\"plugin.name\" = \"pgoutput\"\n\"internal.slot.seek.to.known.offset.on.start\" = {value}\n"),
        )
    };
    let prefix = "s.toml:7:1: connector.\"internal.slot.seek.to.known.offset.on.start\": ";
    fails(&seek("true"), &["versions.debezium=\"2.0\""], prefix, "before 2.1 there is no seek at all");
    fails(&seek("true"), &["versions.debezium=\"2.4\""], prefix, "exists from Debezium 2.5 (DBZ-7015)");
    fails(&seek("true"), &["versions.debezium=\"2.1\""], prefix, "2.1 to 2.4 seek the slot at every start");
    let on_2_5 = ok(&seek("true"), &["versions.debezium=\"2.5\""]).spec.debezium;
    assert!(on_2_5.slot_seek_to_known_offset_on_start);
    assert_eq!(on_2_5.offset_mismatch_strategy, OffsetMismatchStrategy::NoValidation);
    let on_3_4 = ok(&seek("true"), &["versions.debezium=\"3.4\""]).spec.debezium;
    assert_eq!(on_3_4.offset_mismatch_strategy, OffsetMismatchStrategy::TrustOffset, "the deprecated alias");
    let both = ok(&seek("true"), &["connector.\"offset.mismatch.strategy\"=\"trust_slot\""]).spec.debezium;
    assert_eq!(both.offset_mismatch_strategy, OffsetMismatchStrategy::TrustSlot, "the strategy wins");
    let unprefixed = min_with(
        "\"plugin.name\" = \"pgoutput\"\n",
        "\"plugin.name\" = \"pgoutput\"\n\"slot.seek.to.known.offset.on.start\" = true\n",
    );
    fails(&unprefixed, &[], "s.toml:7:1: connector.\"slot.seek.to.known.offset.on.start\": ", "as internal.slot.seek");
}

/// `advance-slot` takes an optional `to_lsn`, a valid LSN.
#[test]
fn advance_slot_fault_target() {
    let fault = |extra: &str| format!("{MIN}[[fault]]\nat = \"1s\"\naction = \"advance-slot\"\n{extra}");
    let spec = ok(&fault(""), &[]).spec;
    assert_eq!(spec.faults[0].action, FaultAction::AdvanceSlot { to_lsn: None });
    let spec = ok(&fault("to_lsn = \"0/16B3748\"\n"), &[]).spec;
    assert_eq!(spec.faults[0].action, FaultAction::AdvanceSlot { to_lsn: Some(Lsn(0x16B_3748)) });
    fails(&fault("to_lsn = \"16B3748\"\n"), &[], "s.toml:15:1: fault[0].to_lsn: ", "is not an LSN");
    fails(&fault("to_lsn = \"0/0\"\n"), &[], "s.toml:15:1: fault[0].to_lsn: ", "invalid target WAL LSN");
    fails(&fault("bytes = \"1MB\"\n"), &[], "s.toml:15:1: fault[0].bytes: ", "it takes to_lsn");
}

#[test]
fn wrong_type() {
    fails(&min_with("name = \"min\"", "name = 3"), &[], "s.toml:1:1: name: ", "expected a string, found an integer");
    fails(&format!("seed = \"one\"\n{MIN}"), &[], "s.toml:1:1: seed: ", "expected an integer, found a string");
    let text =
        min_with("\"plugin.name\" = \"pgoutput\"\n", "\"plugin.name\" = \"pgoutput\"\n\"max.batch.size\" = [1]\n");
    fails(&text, &[], "s.toml:7:1: connector.\"max.batch.size\": ", "expected an integer, found an array");
}

#[test]
fn partitions_out_of_range() {
    fails(
        &format!("{MIN}[kafka]\npartitions = 65\n"),
        &[],
        "s.toml:13:1: kafka.partitions: ",
        "65 is out of range; expected 1 to 64",
    );
    fails(&format!("{MIN}[kafka]\npartitions = 0\n"), &[], "s.toml:13:1: kafka.partitions: ", "expected 1 to 64");
}

#[test]
fn postgres_version() {
    let text = format!("{MIN}[postgres]\nversion = 18\n");
    fails(&text, &[], "s.toml:13:1: postgres.version: ", "idle_replication_slot_timeout");
    let text = format!("{MIN}[postgres]\nversion = 16\n[postgres.standby]\nsync_replication_slots = true\n");
    fails(&text, &[], "s.toml:15:1: postgres.standby.sync_replication_slots: ", "needs PostgreSQL 17");
    let text = format!("{MIN}[postgres]\nversion = 17\nsynchronized_standby_slots = \"s\"\n");
    fails(&text, &[], "s.toml:14:1: postgres.synchronized_standby_slots: ", "add [postgres.standby]");
    fails(&format!("{MIN}[postgres]\nversion = 14\n"), &[], "s.toml:13:1: postgres.version: ", "expected 15 to 18");
}

#[test]
fn bad_size() {
    let phrase = "power of two from 1MB to 1GB";
    fails(
        &format!("{MIN}[postgres]\nwal_segment_size = \"24MB\"\n"),
        &[],
        "s.toml:13:1: postgres.wal_segment_size: ",
        phrase,
    );
    fails(
        &format!("{MIN}[postgres]\nwal_segment_size = \"2GB\"\n"),
        &[],
        "s.toml:13:1: postgres.wal_segment_size: ",
        phrase,
    );
    fails(
        &format!("{MIN}[postgres]\nwal_segment_size = \"16MiB\"\n"),
        &[],
        "s.toml:13:1: postgres.wal_segment_size: ",
        "is not a size",
    );
}

#[test]
fn bad_duration() {
    let field = "s.toml:13:1: postgres.checkpoint_timeout: ";
    fails(&format!("{MIN}[postgres]\ncheckpoint_timeout = \"5 minutes\"\n"), &[], field, "is not a duration");
    fails(&format!("{MIN}[postgres]\ncheckpoint_timeout = \"10s\"\n"), &[], field, "expected 30s to 1d");
    fails(&format!("{MIN}[postgres]\ncheckpoint_timeout = \"2d\"\n"), &[], field, "expected 30s to 1d");
}

#[test]
fn unknown_moment_in_trigger() {
    let text = format!("{MIN}[[fault]]\nat = \"snapshot-started + 1s\"\naction = \"stop-connector\"\n");
    fails(
        &text,
        &[],
        "s.toml:13:1: fault[0].at: ",
        "unknown moment `snapshot-started`; the moments are snapshot-scan-started, ",
    );
    fails(&text, &[], "s.toml:13:1:", "change-acked, offsets-stored, task-started, promoted");
}

#[test]
fn bad_trigger_syntax() {
    for at in ["at 30s", "30 seconds", "streaming-started +", "streaming-started#0", "promoted + soon", ""] {
        let text = format!("{MIN}[[fault]]\nat = \"{at}\"\naction = \"stop-connector\"\n");
        fails(&text, &[], "s.toml:13:1: fault[0].at: ", "");
    }
    let text = format!("{MIN}[[fault]]\nat = \"at 30s\"\naction = \"stop-connector\"\n");
    fails(&text, &[], "s.toml:13:1: fault[0].at: ", "invalid trigger `at 30s`");
}

#[test]
fn fault_field_not_applying_to_its_action() {
    let text = format!("{MIN}[[fault]]\nat = \"1s\"\naction = \"crash-postgres\"\nresume_after_ms = 5\n");
    fails(&text, &[], "s.toml:15:1: fault[0].resume_after_ms: ", "does not apply to action crash-postgres");
}

#[test]
fn fault_missing_required_delay() {
    let text = format!("{MIN}[[fault]]\nat = \"1s\"\naction = \"crash-postgres\"\n");
    fails(&text, &[], "s.toml:12:1: fault[0].restart_after_ms: ", "required field is missing");
}

#[test]
fn failover_without_standby() {
    let text = format!("{MIN}[[fault]]\nat = \"1s\"\naction = \"fail-over-to-standby\"\npromote_after_ms = 100\n");
    fails(&text, &[], "s.toml:14:1: fault[0].action: ", "needs a standby");
    let with_standby = format!("{text}[postgres.standby]\n");
    assert_eq!(ok(&with_standby, &[]).spec.postgres.standby, Some(0));
}

#[test]
fn gate_without_standby() {
    fails(
        &format!("{MIN}[failover]\ngate = \"fail-closed\"\n"),
        &[],
        "s.toml:13:1: failover.gate: ",
        "needs a standby",
    );
}

#[test]
fn script_with_two_ops() {
    let text = format!("{MIN}[[workload.script]]\nat = \"1s\"\ninsert = 5\ndelete = 5\n");
    fails(
        &text,
        &[],
        "s.toml:15:1: workload.script[0]: ",
        "exactly one of insert, update, delete, event, signal, begin, commit, rollback, message or connector_config is allowed; found insert and delete",
    );
}

#[test]
fn script_with_no_op() {
    let text = format!("{MIN}[[workload.script]]\nat = \"1s\"\nlabel = \"nothing\"\n");
    fails(
        &text,
        &[],
        "s.toml:12:1: workload.script[0]: ",
        "one of insert, update, delete, event, signal, begin, commit, rollback, message or connector_config is required",
    );
}

#[test]
fn script_fields_that_do_not_apply() {
    let text = format!("{MIN}[[workload.script]]\nat = \"1s\"\ndelete = 5\nstatus = \"paid\"\n");
    fails(&text, &[], "s.toml:15:1: workload.script[0].status: ", "does not apply to delete");
    let text = format!("{MIN}[[workload.script]]\nat = \"1s\"\nupdate = 5\namount_cents = 1\n");
    fails(&text, &[], "s.toml:15:1: workload.script[0].amount_cents: ", "does not apply to update");
    let text = format!("{MIN}[[workload.script]]\nat = \"1s\"\nupdate = 5\ntable = \"public.nope\"\n");
    fails(&text, &[], "s.toml:15:1: workload.script[0].table: ", "`public.nope` is not a table");
}

#[test]
fn background_window() {
    let text = format!("{MIN}[workload]\nstart_ms = 10\nend_ms = 5\n");
    fails(&text, &[], "s.toml:14:1: workload.end_ms: ", "before start_ms");
    let text = format!("{MIN}[workload]\ninserts_per_second = 1.0\n");
    fails(&text, &[], "s.toml:12:1: workload.end_ms: ", "end_ms > start_ms");
    let text = format!("{MIN}[workload]\nend_ms = 100\ndeletes_per_second = -1.0\n");
    fails(
        &text,
        &[],
        "s.toml:14:1: workload.deletes_per_second: ",
        "-1 is out of range; expected 0 to 1000000000 per second",
    );
    let text = format!("{MIN}[workload]\nend_ms = 100\nupdates_per_second = nan\n");
    fails(&text, &[], "s.toml:14:1: workload.updates_per_second: ", "NaN is out of range; expected 0 to 1000000000");
}

#[test]
fn unknown_table_in_include_list() {
    let text = min_with(
        "\"plugin.name\" = \"pgoutput\"\n",
        "\"plugin.name\" = \"pgoutput\"\n\"table.include.list\" = \"public.claims,public.other\"\n",
    );
    fails(&text, &[], "s.toml:7:1: connector.\"table.include.list\": ", "`public.other` is not a table of [[table]]");
}

#[test]
fn handoff_rules() {
    fails(
        &format!("{MIN}[handoff]\nmethod = \"plain-read\"\n"),
        &[],
        "s.toml:13:1: handoff.read_at_ms: ",
        "required with method",
    );
    fails(
        &format!("{MIN}[handoff]\nread_at_ms = 5\n"),
        &[],
        "s.toml:13:1: handoff.read_at_ms: ",
        "applies only to method",
    );
}

#[test]
fn prediction_holds_with_findings() {
    let text = min_with("verdict = \"holds\"\n", "verdict = \"holds\"\nfindings = [\"I2\"]\n");
    fails(&text, &[], "s.toml:11:1: prediction.findings: ", "must be empty when verdict = \"holds\"");
}

#[test]
fn prediction_violated_without_findings() {
    let text = min_with("verdict = \"holds\"", "verdict = \"violated\"");
    fails(&text, &[], "s.toml:10:1: prediction.findings: ", "at least one invariant");
}

#[test]
fn prediction_naming_an_unchecked_invariant() {
    let text = min_with("verdict = \"holds\"\n", "verdict = \"violated\"\nfindings = [\"I2\", \"I7\"]\n");
    fails(
        &text,
        &[],
        "s.toml:11:19: prediction.findings[1]: ",
        "I7 (marker after data) is not checked by this version",
    );
}

#[test]
fn prediction_is_required() {
    let text = MIN.split("[prediction]").next().unwrap_or_default();
    fails(text, &[], "s.toml:1:1: prediction: ", "required field is missing");
    fails(
        &min_with("why = \"nothing goes wrong\"", "why = \"  \""),
        &[],
        "s.toml:11:1: prediction.why: ",
        "must not be empty",
    );
}

#[test]
fn missing_name_and_tables() {
    fails(&min_with("name = \"min\"\n", ""), &[], "s.toml:1:1: name: ", "required field is missing");
    let text = min_with("[[table]]\nname = \"public.claims\"\n", "");
    fails(&text, &[], "s.toml:1:1: table: ", "at least one [[table]]");
    let text = min_with("[[table]]", "[table]");
    fails(&text, &[], "s.toml:2:2: table: ", "expected an array of tables");
}

#[test]
fn toml_syntax_error() {
    let text = min_with("apply = \"version-guard\"", "apply = \"version-guard");
    fails(&text, &[], "s.toml:8:", "invalid TOML: ");
    fails("name = \"a\"\nname = \"b\"\n", &[], "s.toml:2:1: invalid TOML: ", "duplicate key");
}

// ---------------------------------------------------------------------------------------------
// Fault actions for sweeps, and `[fault_profile]`.

/// `MIN` and one `[[fault]]` (line 12) with `at = "1s"` (line 13) and these lines (from 14).
fn with_fault(lines: &str) -> String {
    format!("{MIN}[[fault]]\nat = \"1s\"\n{lines}")
}

#[test]
fn new_fault_actions_read_into_the_spec() {
    let text = format!(
        "{}[[fault]]\nat = \"2s\"\naction = \"kill-connector-task\"\n\
         [[fault]]\nat = \"change-acked#3 + 1500ms\"\naction = \"clog\"\nbetween = [\"pg2\", \"postgres\"]\n\
         duration_ms = 800\n\
         [[fault]]\nat = \"3s\"\naction = \"wal-burst\"\nbytes = \"64MB\"\n\
         [[fault]]\nat = \"4s\"\naction = \"checkpoint\"\n\
         [postgres.standby]\n",
        with_fault("action = \"kill-connector-task\"\nrestart_after_ms = 2500\n")
    );
    let faults = ok(&text, &[]).spec.faults;
    let actions: Vec<FaultAction> = faults.iter().map(|fault| fault.action).collect();
    assert_eq!(
        actions,
        vec![
            FaultAction::KillConnectorTask { restart_after_ms: Some(2_500) },
            FaultAction::KillConnectorTask { restart_after_ms: None },
            FaultAction::Clog { between: (Node::Pg2, Node::Postgres), duration_ms: 800 },
            FaultAction::WalBurst { bytes: 64 << 20 },
            FaultAction::Checkpoint,
        ]
    );
    assert_eq!(faults[2].trigger, Trigger::After { moment: Moment::ChangeAcked, occurrence: 3, plus_ms: 1_500 });
    for (size, bytes) in [("1B", 1), ("1536B", 1_536), ("8kB", 8 << 10), ("64GB", 64 << 30)] {
        let text = with_fault(&format!("action = \"wal-burst\"\nbytes = \"{size}\"\n"));
        assert_eq!(ok(&text, &[]).spec.faults[0].action, FaultAction::WalBurst { bytes });
    }
}

#[test]
fn clog_between_two_processes() {
    let clog = |between: &str| with_fault(&format!("action = \"clog\"\nbetween = {between}\nduration_ms = 100\n"));
    fails(&clog("[\"connect\"]"), &[], "s.toml:15:1: fault[0].between: ", "expected two process names, found 1");
    fails(&clog("[]"), &[], "s.toml:15:1: fault[0].between: ", "expected two process names, found 0");
    fails(&clog("\"connect\""), &[], "s.toml:15:1: fault[0].between: ", "expected an array of two process names");
    let message = load(&clog("[\"connect\", \"zookeeper\"]"), &[]).unwrap_err();
    assert_eq!(
        message,
        "s.toml:15:23: fault[0].between[1]: unknown value `zookeeper`; expected one of postgres, pg1, pg2, \
         connect, kafka, sink, app, operator, loader, consumer, connect-2, connect-3"
    );
    fails(&clog("[\"consumer\", \"kafka\"]"), &[], "s.toml:15:12: fault[0].between[0]: ", "add [consumer]");
    fails(&clog("[\"kafka\", \"kafka\"]"), &[], "s.toml:15:21: fault[0].between[1]: ", "`kafka` is named twice");
    fails(&clog("[\"pg1\", \"pg2\"]"), &[], "s.toml:15:19: fault[0].between[1]: ", "add [postgres.standby]");
    assert_eq!(
        ok(&format!("{}[postgres.standby]\n", clog("[\"pg1\", \"pg2\"]")), &[]).spec.faults[0].action,
        FaultAction::Clog { between: (Node::Pg1, Node::Pg2), duration_ms: 100 }
    );
}

#[test]
fn clog_needs_a_duration() {
    let text = with_fault("action = \"clog\"\nbetween = [\"sink\", \"kafka\"]\n");
    fails(&text, &[], "s.toml:12:1: fault[0].duration_ms: ", "required field is missing (required by action clog)");
    let text = with_fault("action = \"clog\"\nduration_ms = 5\n");
    fails(&text, &[], "s.toml:12:1: fault[0].between: ", "required field is missing (required by action clog)");
    let text = with_fault("action = \"clog\"\nbetween = [\"sink\", \"kafka\"]\nduration_ms = 0\n");
    fails(
        &text,
        &[],
        "s.toml:16:1: fault[0].duration_ms: ",
        "0 is out of range; expected 1 to 3600000, the run's horizon",
    );
}

#[test]
fn wal_burst_with_a_bad_size() {
    let burst = |size: &str| with_fault(&format!("action = \"wal-burst\"\nbytes = \"{size}\"\n"));
    let field = "s.toml:15:1: fault[0].bytes: ";
    fails(
        &burst("64 megabytes"),
        &[],
        field,
        "`64 megabytes` is not a size; expected a number and a unit (B, kB, MB, GB)",
    );
    fails(&burst("64MiB"), &[], field, "is not a size");
    fails(&burst("0MB"), &[], field, "`0MB` is out of range; expected 1B to 64GB");
    fails(&burst("65GB"), &[], field, "is out of range; expected 1B to 64GB");
    fails(&burst("1TB"), &[], field, "is out of range");
    fails(
        &with_fault("action = \"wal-burst\"\n"),
        &[],
        "s.toml:12:1: fault[0].bytes: ",
        "required by action wal-burst",
    );
    let text = with_fault("action = \"wal-burst\"\nbytes = 1024\n");
    fails(&text, &[], field, "expected a string, found an integer");
}

#[test]
fn fields_that_do_not_apply_to_the_new_actions() {
    let text = with_fault("action = \"checkpoint\"\nrestart_after_ms = 5\n");
    fails(
        &text,
        &[],
        "s.toml:15:1: fault[0].restart_after_ms: ",
        "does not apply to action checkpoint (it takes no other field)",
    );
    let text = with_fault("action = \"kill-connector-task\"\nresume_after_ms = 5\n");
    fails(&text, &[], "s.toml:15:1: fault[0].resume_after_ms: ", "(it takes restart_after_ms)");
    let text = with_fault("action = \"wal-burst\"\nbytes = \"1MB\"\nduration_ms = 5\n");
    fails(&text, &[], "s.toml:16:1: fault[0].duration_ms: ", "does not apply to action wal-burst (it takes bytes)");
    let text = with_fault("action = \"crash-postgres\"\nrestart_after_ms = 5\nbetween = [\"app\", \"postgres\"]\n");
    fails(&text, &[], "s.toml:16:1: fault[0].between: ", "does not apply to action crash-postgres");
    let text = with_fault("action = \"stop-connector\"\nbytes = \"1MB\"\n");
    fails(&text, &[], "s.toml:15:1: fault[0].bytes: ", "does not apply to action stop-connector");
    let text = with_fault("action = \"clog\"\nbetween = [\"app\", \"postgres\"]\nduration_ms = 5\nbytes = \"1MB\"\n");
    fails(&text, &[], "s.toml:17:1: fault[0].bytes: ", "(it takes between and duration_ms)");
    let text = with_fault("action = \"clogg\"\n");
    fails(&text, &[], "s.toml:14:1: fault[0].action: ", "unknown value `clogg`; expected one of kill-connect-worker, ");
}

/// `MIN` and a `[fault_profile]` (line 12) with these lines (from 13).
fn with_profile(lines: &str) -> String {
    format!("{MIN}[fault_profile]\n{lines}")
}

#[test]
fn fault_profile_reads_into_the_spec() {
    let text = with_profile(
        "kinds = [\"clog\", \"kill-connector-task\", \"fail-over-to-standby\"]\nmax_faults = 20\n\
         window = [\"5s\", \"2min\"]\nmoments = [\"change-acked\", \"task-started\"]\n[postgres.standby]\n",
    );
    assert_eq!(
        ok(&text, &[]).spec.profile,
        Some(FaultProfile {
            kinds: vec![FaultKind::Clog, FaultKind::KillConnectorTask, FaultKind::FailOverToStandby],
            max_faults: 20,
            window_ms: (5_000, 120_000),
            moments: vec![Moment::ChangeAcked, Moment::TaskStarted],
        })
    );
    let defaults = ok(&with_profile("kinds = [\"checkpoint\"]\n"), &[]).spec.profile;
    assert_eq!(
        defaults,
        Some(FaultProfile {
            kinds: vec![FaultKind::Checkpoint],
            max_faults: 3,
            window_ms: (0, 60_000),
            moments: vec![]
        })
    );
    assert_eq!(ok(MIN, &[]).spec.profile, None);
    let text = with_profile("kinds = [\"checkpoint\"]\nmax_faults = 0\nwindow = [\"10s\", \"10s\"]\n");
    let profile = ok(&text, &[]).spec.profile.expect("a profile");
    assert_eq!((profile.max_faults, profile.window_ms), (0, (10_000, 10_000)));
}

#[test]
fn the_documented_examples_load() {
    let doc = include_str!("../../docs/scenario-format.md");
    let blocks: Vec<&str> = doc.split("```toml\n").skip(1).filter_map(|block| block.split("```").next()).collect();
    assert!(!blocks.is_empty());
    for block in blocks {
        ok(&format!("{MIN}{block}"), &[]);
    }
}

#[test]
fn fault_profile_kinds() {
    fails(&with_profile("kinds = []\n"), &[], "s.toml:13:1: fault_profile.kinds: ", "at least one fault action");
    fails(&with_profile("max_faults = 2\n"), &[], "s.toml:12:1: fault_profile.kinds: ", "required field is missing");
    fails(
        &with_profile("kinds = [\"clog\", \"checkpoint\", \"clog\"]\n"),
        &[],
        "s.toml:13:32: fault_profile.kinds[2]: ",
        "`clog` is listed twice",
    );
    fails(
        &with_profile("kinds = [\"clog\", \"fail-over-to-standby\"]\n"),
        &[],
        "s.toml:13:18: fault_profile.kinds[1]: ",
        "fail-over-to-standby needs a standby: add [postgres.standby]",
    );
    fails(
        &with_profile("kinds = [\"kill-worker\"]\n"),
        &[],
        "s.toml:13:10: fault_profile.kinds[0]: ",
        "unknown value `kill-worker`; expected one of kill-connect-worker, kill-connector-task, ",
    );
    fails(&with_profile("kinds = \"clog\"\n"), &[], "s.toml:13:1: fault_profile.kinds: ", "expected an array");
}

#[test]
fn fault_profile_limits() {
    let text = with_profile("kinds = [\"clog\"]\nmax_faults = 21\n");
    fails(&text, &[], "s.toml:14:1: fault_profile.max_faults: ", "21 is out of range; expected 0 to 20");
    let text = with_profile("kinds = [\"clog\"]\nwindow = [\"60s\", \"10s\"]\n");
    fails(&text, &[], "s.toml:14:1: fault_profile.window: ", "the start (60s) is after the end (10s)");
    let text = with_profile("kinds = [\"clog\"]\nwindow = [\"60s\"]\n");
    fails(&text, &[], "s.toml:14:1: fault_profile.window: ", "expected two times, found 1");
    let text = with_profile("kinds = [\"clog\"]\nwindow = [\"0s\", \"a minute\"]\n");
    fails(&text, &[], "s.toml:14:17: fault_profile.window[1]: ", "`a minute` is not a time");
    let text = with_profile("kinds = [\"clog\"]\nmoments = [\"change-acked\", \"first-change-acked\"]\n");
    fails(
        &text,
        &[],
        "s.toml:14:28: fault_profile.moments[1]: ",
        "unknown moment `first-change-acked`; the moments are snapshot-scan-started, ",
    );
    let text = with_profile("kinds = [\"clog\"]\nmoments = [\"promoted\", \"promoted\"]\n");
    fails(&text, &[], "s.toml:14:24: fault_profile.moments[1]: ", "`promoted` is listed twice");
    let text = with_profile("kinds = [\"clog\"]\nmax_fault = 2\n");
    fails(&text, &[], "s.toml:14:1: fault_profile.max_fault: ", "did you mean \"max_faults\"?");
}

#[test]
fn set_a_fault_profile_field() {
    let text = with_profile("kinds = [\"clog\", \"checkpoint\"]\n");
    let profile = ok(&text, &["fault_profile.max_faults=5"]).spec.profile.expect("a profile");
    assert_eq!(profile.max_faults, 5);
    assert_eq!(profile.kinds, vec![FaultKind::Clog, FaultKind::Checkpoint]);
    let profile = ok(MIN, &["fault_profile.kinds=[\"wal-burst\"]", "fault_profile.window=[\"1s\", \"2s\"]"])
        .spec
        .profile
        .expect("a profile");
    assert_eq!((profile.kinds, profile.window_ms), (vec![FaultKind::WalBurst], (1_000, 2_000)));
    fails(
        &text,
        &["fault_profile.max_faults=50"],
        "--set fault_profile.max_faults=50: fault_profile.max_faults: ",
        "expected 0 to 20",
    );
    fails(
        MIN,
        &["fault_profile.max_faults=5"],
        "--set fault_profile.max_faults=5: fault_profile.kinds: ",
        "required field is missing",
    );
    let faults =
        ok(&with_fault("action = \"checkpoint\"\n"), &["fault[0].action=wal-burst", "fault[0].bytes=16MB"]).spec.faults;
    assert_eq!(faults[0].action, FaultAction::WalBurst { bytes: 16 << 20 });
}

// ---------------------------------------------------------------------------------------------
// `--set PATH=VALUE`.

#[test]
fn set_an_unknown_field() {
    fails(MIN, &["sink.aply=naive-upsert"], "--set sink.aply=naive-upsert: sink.aply: ", "did you mean \"apply\"?");
}

#[test]
fn set_a_bad_value() {
    fails(MIN, &["kafka.partitions=100"], "--set kafka.partitions=100: kafka.partitions: ", "expected 1 to 64");
    fails(MIN, &["sink.apply=bogus"], "--set sink.apply=bogus: sink.apply: ", "unknown value `bogus`");
    fails(MIN, &["seed=seven"], "--set seed=seven: seed: ", "expected an integer, found a string");
}

#[test]
fn set_a_malformed_path() {
    fails(MIN, &["sink..apply=x"], "--set sink..apply=x: sink..apply: ", "malformed path");
    fails(MIN, &["fault[x].at=1s"], "--set fault[x].at=1s: fault[x].at: ", "malformed path");
    fails(MIN, &["connector.\"snapshot.mode=x"], "--set connector.\"snapshot.mode=x: ", "");
}

#[test]
fn set_without_equals() {
    fails(MIN, &["sink.apply"], "--set sink.apply: sink.apply: ", "expected PATH=VALUE");
}

#[test]
fn set_index_past_the_end() {
    fails(MIN, &["fault[0].at=1s"], "--set fault[0].at=1s: fault[0]: ", "past the end");
    fails(COMPLETE, &["fault[3].at=1s"], "--set fault[3].at=1s: fault[3]: ", "fault has 3 entries");
}

#[test]
fn set_into_a_value_that_is_not_a_table() {
    fails(MIN, &["name.x=1"], "--set name.x=1: name: ", "is a string, not a table");
}

#[test]
fn set_fixes_an_invalid_file() {
    let text =
        min_with("\"plugin.name\" = \"pgoutput\"\n", "\"plugin.name\" = \"pgoutput\"\n\"snapshot.mode\" = \"never\"\n");
    assert!(load(&text, &[]).is_err());
    let loaded = ok(&text, &["connector.\"snapshot.mode\"=no_data"]);
    assert_eq!(loaded.spec.debezium.snapshot_mode, SnapshotMode::NoData);
    assert_eq!(loaded.spec.connector_properties["snapshot.mode"], "no_data");
}

#[test]
fn untouched_fields_keep_the_file_location() {
    let text =
        min_with("\"plugin.name\" = \"pgoutput\"\n", "\"plugin.name\" = \"pgoutput\"\n\"snapshot.mode\" = \"never\"\n");
    fails(&text, &["sink.apply=naive-upsert"], "s.toml:7:1: connector.\"snapshot.mode\": ", "DBZ-8171");
}

#[test]
fn set_overrides_apply_before_validation() {
    let sets = [
        "sink.apply=naive-upsert",
        "postgres.standby.replication_delay_ms=40",
        "failover.gate=fail-closed",
        "prediction.verdict=violated",
        "prediction.findings=[\"I8\"]",
        "connector.\"max.batch.size\"=100",
        "postgres.checkpoint_timeout=1h",
    ];
    let spec = ok(MIN, &sets).spec;
    assert_eq!(spec.sink.rule, ApplyRule::NaiveUpsert);
    assert_eq!(spec.postgres.standby, Some(40));
    assert_eq!(spec.gate, GatePolicy::FailClosed);
    assert_eq!(spec.prediction.findings, vec![Invariant::I8]);
    assert_eq!(spec.debezium.max_batch_size, 100);
    assert_eq!(spec.postgres.checkpoint_timeout_ms, 3_600_000);

    let spec = ok(COMPLETE, &["workload.script[1].insert=2000", "fault[0].restart_after_ms=1"]).spec;
    assert_eq!(
        spec.scripted[1].ops,
        vec![RowOp::Insert { table: TableId(1), key: 2000, status: Status::Submitted, amount_cents: 100_000 }]
    );
    assert_eq!(spec.faults[0].action, FaultAction::KillConnectWorker { restart_after_ms: Some(1) });
    fails(
        COMPLETE,
        &["workload.script[1].delete=9"],
        "--set workload.script[1].delete=9: workload.script[1]: ",
        "found insert and delete",
    );
}

#[test]
fn set_errors_on_combinations_blame_the_override() {
    fails(MIN, &["failover.gate=rebuild"], "--set failover.gate=rebuild: failover.gate: ", "needs a standby");
    let text = format!("{MIN}[[fault]]\nat = \"1s\"\naction = \"stop-connector\"\n");
    fails(
        &text,
        &["fault[0].action=fail-over-to-standby"],
        "--set fault[0].action=fail-over-to-standby: fault[0].action: ",
        "needs a standby",
    );
    fails(
        MIN,
        &["prediction.findings=[\"I7\"]"],
        "--set prediction.findings=[\"I7\"]: prediction.findings[0]: ",
        "not checked",
    );
}

// ---------------------------------------------------------------------------------------------
// No input panics.

/// One mutation of a text: delete a line, replace a character, insert a character, duplicate a
/// line, or cut the text short.
fn mutate(text: &str, kind: u8, at: usize, c: char) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let chars: Vec<char> = text.chars().collect();
    match kind % 5 {
        0 => {
            let skip = at % lines.len();
            lines.iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, line)| *line).collect::<Vec<_>>().join("\n")
        }
        1 => {
            let mut chars = chars;
            let i = at % chars.len();
            chars[i] = c;
            chars.into_iter().collect()
        }
        2 => {
            let mut chars = chars;
            chars.insert(at % (chars.len() + 1), c);
            chars.into_iter().collect()
        }
        3 => {
            let mut lines = lines;
            let i = at % lines.len();
            lines.insert(i, lines[i]);
            lines.join("\n")
        }
        _ => chars[..at % chars.len()].iter().collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>(), sets in proptest::collection::vec(any::<String>(), 0..3)) {
        let _ = load_str("fuzz.toml", &text, &sets);
    }

    #[test]
    fn toml_like_text_never_panics(text in "([a-z_.\"\\[\\]#= 0-9\n{},-]|\"[a-z.]*\"){0,200}") {
        let _ = load_str("fuzz.toml", &text, &[]);
    }

    #[test]
    fn mutated_valid_files_never_panic(
        mutations in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<char>()), 1..4),
        use_min in any::<bool>(),
    ) {
        let mut text = if use_min { MIN.to_owned() } else { COMPLETE.to_owned() };
        for (kind, at, c) in mutations {
            if text.is_empty() {
                break;
            }
            text = mutate(&text, kind, at, c);
        }
        let _ = load_str("fuzz.toml", &text, &[]);
    }

    #[test]
    fn arbitrary_sets_never_panic(
        path in "[a-z_.\"\\[\\]0-9=-]{0,30}",
        value in "[a-z0-9\\[\\]{}\"=., -]{0,20}",
    ) {
        let sets = [format!("{path}={value}"), path.clone()];
        let _ = load_str("fuzz.toml", COMPLETE, &sets[..1]);
        let _ = load_str("fuzz.toml", COMPLETE, &sets[1..]);
    }
}

// ---------------------------------------------------------------------------------------------
// [check]: the bound of the exhaustive lens.

fn with_check(lines: &str) -> String {
    format!("{MIN}[check]\n{lines}")
}

#[test]
fn a_check_bound_reads_into_the_spec() {
    let text = with_check(
        "rows = 3\ncrash = [\"connect\", \"postgres\"]\nperiodic_fires = 2\n\
         unreached_ok = [\"the acceptance boundary is reached\"]\n\
         [[check.script]]\nupdate = 2\n[[check.script]]\ndelete = 3\nlabel = \"any time\"\n",
    );
    let check = ok(&text, &[]).spec.check.expect("a bound");
    assert_eq!(check.rows, 3);
    assert_eq!(check.crash, vec![Node::Connect, Node::Pg1]);
    assert_eq!(check.crashes, 2, "crashes defaults to one per process named");
    assert_eq!(check.periodic_fires, 2);
    assert_eq!(check.unreached_ok, vec!["the acceptance boundary is reached".to_owned()]);
    assert_eq!(check.crash_while, Default::default(), "crashes at any time by default");
    let after = ok(&with_check("rows = 3\ncrash = [\"connect\"]\ncrash_while = \"after-streaming\"\n"), &[]);
    assert_eq!(after.spec.check.expect("a bound").crash_while, CrashWhile::AfterStreaming);
    assert!(!check.bgwriter_running_xacts, "the background writer's records are off by default");
    let bgwriter = ok(&with_check("rows = 3\nbgwriter_running_xacts = true\n"), &[]);
    assert!(bgwriter.spec.check.expect("a bound").bgwriter_running_xacts);
    let ops: Vec<&RowOp> = check.scripts.iter().flat_map(|txn| &txn.ops).collect();
    assert_eq!(
        ops,
        vec![
            &RowOp::Update { table: TableId(0), key: 2, status: Status::Approved },
            &RowOp::Delete { table: TableId(0), key: 3 }
        ]
    );
    assert!(ok(MIN, &[]).spec.check.is_none());
}

#[test]
fn a_bad_check_bound_is_named() {
    fails(&with_check("crash = [\"connect\"]\n"), &[], "s.toml:12:", "rows");
    fails(&with_check("rows = 0\n"), &[], "s.toml:13:", "check.rows");
    fails(&with_check("rows = 9\n"), &[], "s.toml:13:", "check.rows");
    fails(&with_check("rows = 3\ncrash = [\"zookeeper\"]\n"), &[], "s.toml:14:", "zookeeper");
    fails(&with_check("rows = 3\ncrash = [\"connect\", \"connect\"]\n"), &[], "s.toml:14:", "named twice");
    fails(&with_check("rows = 3\ncrash = [\"consumer\"]\n"), &[], "s.toml:14:", "add [consumer]");
    fails(&with_check("rows = 3\ncrashes = 1\n"), &[], "s.toml:14:", "name the processes that may crash");
    fails(&with_check("rows = 3\ncrash_while = \"after-streaming\"\n"), &[], "s.toml:14:", "needs crash = [...]");
    fails(&with_check("rows = 3\nbgwriter_running_xacts = 1\n"), &[], "s.toml:14:", "a boolean");
    fails(
        &with_check("rows = 3\nperiodic_fires = 0\nbgwriter_running_xacts = true\n"),
        &[],
        "s.toml:15:",
        "needs periodic_fires of 1 or more",
    );
    fails(
        &with_check("rows = 3\ncrash = [\"connect\"]\ncrash_while = \"later\"\n"),
        &[],
        "s.toml:15:",
        "after-streaming",
    );
    fails(
        &with_check("rows = 3\nunreached_ok = [\"never\"]\n"),
        &[],
        "s.toml:14:",
        "the acceptance boundary is reached",
    );
    fails(
        &with_check("rows = 3\n[[check.script]]\ndelete = 42\n"),
        &[],
        "s.toml:15:1: check.script[0].delete: ",
        "the bound loads keys 1 to 3 (rows = 3); 42 is not one of them",
    );
    fails(&with_check("rows = 3\n[[check.script]]\nat = \"1s\"\nupdate = 1\n"), &[], "s.toml:15:", "at");
    fails(&with_check("rows = 3\nseed = 1\n"), &[], "s.toml:14:", "seed");
}

// ---------------------------------------------------------------------------------------------
// [schedule]: a path through the bound that `handoff run` follows.

fn with_schedule(steps: &str) -> String {
    with_check(&format!("rows = 1\ncrash = [\"connect\"]\n[schedule]\nsteps = [{steps}]\n"))
}

#[test]
fn a_schedule_reads_into_the_spec() {
    let spec = ok(&with_schedule("\"deliver kafka -> connect\", \"crash connect\", \"restart connect\""), &[]).spec;
    let schedule = spec.schedule.expect("a schedule");
    assert_eq!(schedule.step_ms, 10, "one step every 10 ms unless told");
    assert_eq!(
        schedule.steps,
        vec![
            Action::Deliver { from: Node::Kafka, to: Node::Connect },
            Action::Crash { node: Node::Connect },
            Action::Restart { node: Node::Connect },
        ]
    );
}

#[test]
fn a_bad_schedule_is_named() {
    fails(&format!("{MIN}[schedule]\nsteps = [\"crash connect\"]\n"), &[], "s.toml:12:", "no [check]");
    fails(&with_schedule("\"teleport connect\""), &[], "s.toml:16:10: schedule.steps[0]: ", "is not a step");
    fails(&with_schedule("\"deliver kafka -> zookeeper\""), &[], "s.toml:16:", "not a process of the world");
    fails(&with_schedule("\"fire connect nap\""), &[], "s.toml:16:", "`nap` is not a timer");
    fails(&with_schedule(""), &[], "s.toml:16:", "at least one step");
    // A step the bound cannot take where the path puts it.
    fails(
        &with_schedule("\"deliver kafka -> connect\", \"restart connect\""),
        &[],
        "s.toml:16:38: schedule.steps[1]: ",
        "`restart connect` cannot be taken at step 1",
    );
    fails(&with_schedule("\"crash postgres\""), &[], "s.toml:16:", "not a process of the world");
    // The schedule is the whole story: no timed faults beside it.
    let text = format!("{}[[fault]]\nat = \"1s\"\naction = \"checkpoint\"\n", with_schedule("\"crash connect\""));
    fails(&text, &[], "s.toml:", "remove [[fault]]");
}

/// `[versions] pgjdbc`: the driver release, read as `(42, minor, patch)`; anything else is named.
#[test]
fn the_pgjdbc_version_is_read_and_bad_ones_are_named() {
    let with = |version: &str| format!("{MIN}[versions]\ndebezium = \"3.1\"\npgjdbc = \"{version}\"\n");
    let loaded = ok(&with("42.7.3"), &[]);
    assert_eq!(loaded.spec.debezium.pgjdbc, Some((42, 7, 3)));
    assert_eq!(loaded.spec.debezium.version, (3, 1));
    assert_eq!(ok(MIN, &[]).spec.debezium.pgjdbc, None, "the release's own driver by default");
    fails(&with("42.8.0"), &[], "s.toml:14:1: versions.pgjdbc:", "the model knows pgjdbc 42.0.0 to 42.7.x");
    fails(&with("latest"), &[], "s.toml:14:1: versions.pgjdbc:", "is not a pgjdbc release like \"42.7.3\"");
    // From 3.2 Debezium needs the driver's withAutomaticFlush, which 42.7.6 added.
    let on_3_2 = |version: &str| format!("{MIN}[versions]\ndebezium = \"3.2\"\npgjdbc = \"{version}\"\n");
    fails(&on_3_2("42.7.3"), &[], "s.toml:14:1: versions.pgjdbc:", "which pgjdbc has from 42.7.6");
    assert_eq!(ok(&on_3_2("42.7.6"), &[]).spec.debezium.pgjdbc, Some((42, 7, 6)));
}

// ---------------------------------------------------------------------------------------------
// Sessions and transactions (issue 18).

/// Asserts the error names `field` (`s.toml:LINE:COL: FIELD: …`) and contains `phrase`.
#[track_caller]
fn fails_at(text: &str, field: &str, phrase: &str) {
    match load(text, &[]) {
        Ok(_) => panic!("expected an error at {field}, but the scenario loaded"),
        Err(message) => {
            assert!(message.starts_with("s.toml:"), "{message}");
            assert!(message.contains(&format!(": {field}: ")), "expected field {field:?} in:\n{message}");
            assert!(message.contains(phrase), "expected {phrase:?} in:\n{message}");
        }
    }
}

/// `MIN` with a second table in another database and these script steps.
fn with_steps(steps: &str) -> String {
    format!("{MIN}[[table]]\nname = \"public.reports\"\ndatabase = \"analytics\"\n{steps}")
}

const INTERLEAVED: &str = r#"
[[workload.script]]
at = "1s"
session = "s1"
begin = true
isolation = "repeatable read"

[[workload.script]]
session = "s1"
insert = [10, 11]
copy = true

[[workload.script]]
at = "2s"
session = "s2"
begin = true

[[workload.script]]
session = "s2"
message = "outbox"
payload_bytes = 12

[[workload.script]]
session = "s1"
update = 10
status = "paid"
idle_ms = 5000

[[workload.script]]
session = "s2"
rollback = true

[[workload.script]]
session = "s1"
commit = true

[[workload.script]]
at = "3s"
message = "heartbeat"
transactional = false

[[workload.script]]
at = "4s"
delete = [10, 11]
"#;

#[test]
fn sessions_with_interleaved_transactions_load_as_written() {
    use handoff_models::components::app::StepKind;
    use handoff_models::core::protocol::Isolation;
    let spec = ok(&with_steps(INTERLEAVED), &[]).spec;
    assert_eq!(spec.tables[1].database.as_deref(), Some("analytics"));
    assert_eq!(spec.debezium.tables, [TableId(0)], "the connector does not capture another database's table");
    let steps: Vec<(Option<&str>, &StepKind, usize, u64)> = spec
        .scripted
        .iter()
        .map(|txn| (txn.step.session.as_deref(), &txn.step.kind, txn.ops.len(), txn.step.idle_ms))
        .collect();
    let message = |transactional, prefix: &str, payload_bytes| StepKind::Message {
        transactional,
        prefix: prefix.into(),
        payload_bytes,
    };
    assert_eq!(
        steps,
        [
            (Some("s1"), &StepKind::Begin { isolation: Isolation::RepeatableRead }, 0, 0),
            (Some("s1"), &StepKind::Copy, 2, 0),
            (Some("s2"), &StepKind::Begin { isolation: Isolation::ReadCommitted }, 0, 0),
            (Some("s2"), &message(true, "outbox", 12), 0, 0),
            (Some("s1"), &StepKind::Statement, 1, 5000),
            (Some("s2"), &StepKind::Rollback, 0, 0),
            (Some("s1"), &StepKind::Commit, 0, 0),
            (None, &message(false, "heartbeat", 0), 0, 0),
            (None, &StepKind::Statement, 2, 0),
        ]
    );
    // A session's later step without `at` runs when its session is ready.
    assert_eq!(spec.scripted[1].trigger, Trigger::At { at_ms: 0 });
    assert_eq!(spec.scripted[2].trigger, Trigger::At { at_ms: 2000 });
}

#[test]
fn the_example_of_the_format_document_loads() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/scenario-format.md")).unwrap();
    let start = doc.find("Two sessions interleaved, and a session idle").expect("the example");
    let block = &doc[start..];
    let block = &block[block.find("```toml\n").unwrap() + 8..];
    let block = &block[..block.find("```").unwrap()];
    let spec = ok(&format!("{MIN}{block}"), &[]).spec;
    assert_eq!(spec.scripted.len(), 10);
    assert_eq!(spec.scripted[9].step.idle_ms, 3_600_000);
}

#[test]
fn session_steps_that_make_no_sense_in_file_order_are_refused() {
    let step = |fields: &str| format!("\n[[workload.script]]\n{fields}\n");
    let begin = step("at = \"1s\"\nsession = \"s1\"\nbegin = true");
    // A statement of a session that never began.
    fails_at(
        &with_steps(&step("at = \"1s\"\nsession = \"s1\"\nupdate = 1")),
        "workload.script[0].update",
        "session \"s1\" has not begun a transaction here",
    );
    // A commit with nothing open, after a commit.
    fails_at(
        &with_steps(
            &(begin.clone() + &step("session = \"s1\"\ncommit = true") + &step("session = \"s1\"\ncommit = true")),
        ),
        "workload.script[2].commit",
        "has no transaction open here",
    );
    // An unknown session.
    fails_at(
        &with_steps(&step("at = \"1s\"\nsession = \"s9\"\nrollback = true")),
        "workload.script[0].rollback",
        "unknown session \"s9\"",
    );
    // BEGIN twice.
    fails_at(
        &with_steps(&(begin.clone() + &step("session = \"s1\"\nbegin = true"))),
        "workload.script[1].begin",
        "already in a transaction",
    );
    // BEGIN without a session.
    fails_at(&with_steps(&step("at = \"1s\"\nbegin = true")), "workload.script[0].begin", "needs session");
    // A session's first step needs its time.
    fails_at(
        &with_steps(&step("session = \"s1\"\nbegin = true")),
        "workload.script[0]",
        "at is required on the first step of session \"s1\"",
    );
    // An autocommit step needs its time, as always.
    fails_at(&with_steps(&step("insert = 5")), "workload.script[0]", "at is required");
    // The database on a later step.
    fails_at(
        &with_steps(&(begin.clone() + &step("session = \"s1\"\ndatabase = \"analytics\"\ncommit = true"))),
        "workload.script[1].database",
        "given on its first step",
    );
    // A statement on another database's table.
    fails_at(
        &with_steps(&(begin.clone() + &step("session = \"s1\"\ninsert = 1\ntable = \"public.reports\""))),
        "workload.script[1].table",
        "public.reports is in database \"analytics\", and session \"s1\" in the main database",
    );
    // Fields of another kind of step.
    fails_at(
        &with_steps(&step("at = \"1s\"\ndelete = 1\ncopy = true")),
        "workload.script[0].copy",
        "does not apply to delete",
    );
    fails_at(
        &with_steps(&(begin.clone() + &step("session = \"s1\"\ncommit = false"))),
        "workload.script[1].commit",
        "leave it out",
    );
    fails_at(&with_steps(&step("at = \"1s\"\ndelete = [1, 1]")), "workload.script[0].delete[1]", "named twice");
    fails_at(
        &with_steps(&step("at = \"1s\"\ninsert = 5\nidle_ms = 10")),
        "workload.script[0].idle_ms",
        "needs session",
    );
    // A bound has no time to idle.
    fails_at(
        &format!("{MIN}[check]\nrows = 2\n[[check.script]]\nsession = \"s1\"\nbegin = true\nidle_ms = 5\n"),
        "check.script[0].idle_ms",
        "time is abstract in a bound",
    );
    fails_at(
        &format!("{MIN}[check]\nrows = 2\n[[check.script]]\nsession = \"s1\"\ncommit = true\n"),
        "check.script[0].commit",
        "unknown session",
    );
    // The connector cannot capture another database's table.
    fails_at(
        &with_steps("").replace(
            "\"plugin.name\" = \"pgoutput\"",
            "\"plugin.name\" = \"pgoutput\"\n\"table.include.list\" = \"public.reports\"",
        ),
        "connector.\"table.include.list\"",
        "is in database \"analytics\"",
    );
}

#[test]
fn background_transactions_of_several_rows_and_their_concurrency_are_read_and_checked() {
    let text =
        format!("{MIN}[workload]\nend_ms = 10000\nupdates_per_second = 5\ntransaction_size = 3\nconcurrency = 2\n");
    let background = ok(&text, &[]).spec.background.expect("a background");
    assert_eq!((background.transaction_size, background.concurrency), (3, 2));
    fails_at(
        &format!("{MIN}[workload]\nend_ms = 10000\nupdates_per_second = 5\nconcurrency = 2\n"),
        "workload.concurrency",
        "needs transaction_size above 1",
    );
    fails_at(
        &format!("{MIN}[workload]\nend_ms = 10000\nupdates_per_second = 5\ntransaction_size = 0\n"),
        "workload.transaction_size",
        "out of range",
    );
}

/// The outbox's inputs: the outbox table, the `event` step, the transformation chain, the
/// consumer and its fault, each refused with its field named.
#[test]
fn outbox_inputs_are_checked_where_they_are_written() {
    let outbox = "[[table]]\nname = \"public.outbox\"\noutbox = { aggregatetype = \"claim\", delete = true }\n";
    let with_outbox = min_with("[connector]", &format!("{outbox}[connector]"))
        .replace("name = \"public.claims\"\n", "name = \"public.claims\"\nrows = 5\n");
    let loaded = ok(&with_outbox, &[]);
    let setup = loaded.spec.tables[1].outbox.as_ref().expect("an outbox table");
    assert_eq!((setup.aggregatetype.as_str(), setup.delete), ("claim", true));
    // An outbox starts empty, and is in the main database.
    fails_at(&with_outbox.replace("outbox = {", "rows = 3\noutbox = {"), "table[1].rows", "starts empty");
    fails_at(
        &with_outbox.replace("aggregatetype = \"claim\"", "aggregatetype = \"a b\""),
        "table[1].outbox.aggregatetype",
        "not an aggregate type",
    );
    fails_at(
        &with_outbox.replace("delete = true", "delete = true, dlete = 1"),
        "table[1].outbox.dlete",
        "unknown field",
    );
    // The `event` step needs an outbox table, and its `table` is the business table.
    let event = "[[workload.script]]\nat = \"1s\"\nevent = 3\n";
    fails_at(&format!("{MIN}{event}"), "workload.script[0].event", "needs an outbox table");
    let loaded = ok(&format!("{with_outbox}{event}"), &[]);
    assert_eq!(loaded.spec.scripted[0].ops.len(), 3, "update, event insert, event delete");
    fails_at(
        &format!("{with_outbox}{event}table = \"public.outbox\"\n"),
        "workload.script[0].table",
        "names an outbox table",
    );
    fails_at(
        &format!("{with_outbox}{event}amount_cents = 1\n"),
        "workload.script[0].amount_cents",
        "does not apply to event",
    );
    // The chain: every property belongs to a listed alias, every type is one the model runs.
    let chain = |lines: &str| with_outbox.replace("[sink]", &format!("{lines}[sink]"));
    let router =
        "\"transforms\" = \"outbox\"\n\"transforms.outbox.type\" = \"io.debezium.transforms.outbox.EventRouter\"\n";
    assert_eq!(ok(&chain(router), &[]).spec.routed_tables(), vec![handoff_models::core::ids::TableId(1)]);
    fails(&chain("\"transforms.router.type\" = \"x\"\n"), &[], "s.toml:", "`router` is not in `transforms`");
    fails(
        &chain("\"transforms\" = \"t\"\n\"transforms.t.type\" = \"org.apache.kafka.connect.transforms.Filter\"\n"),
        &[],
        "s.toml:",
        "not a transform the model runs",
    );
    fails(
        &chain(&format!("{router}\"transforms.outbox.route.by.feild\" = \"type\"\n")),
        &[],
        "s.toml:",
        "route.by.feild",
    );
    // The consumer reads an outbox's routed topics; `kill-consumer` needs it.
    fails(&format!("{MIN}[consumer]\ninbox = \"same-transaction\"\n"), &[], "s.toml:", "declare an outbox table");
    fails_at(&format!("{with_outbox}[consumer]\ninbox = \"sometimes\"\n"), "consumer.inbox", "same-transaction");
    fails_at(&format!("{with_outbox}[consumer]\n"), "consumer.inbox", "required");
    fails(&with_fault("action = \"kill-consumer\"\n"), &[], "s.toml:", "add [consumer]");
    fails(&format!("{with_outbox}[consumer]\ninbox = \"none\"\n"), &[], "s.toml:", "the connector routes none");
    let routed = chain(router);
    let consumer =
        ok(&format!("{routed}[consumer]\ninbox = \"none\"\n[[fault]]\nat = \"1s\"\naction = \"kill-consumer\"\n"), &[]);
    assert_eq!(consumer.spec.consumer.as_ref().map(|c| c.inbox.name()), Some("none"));
}

/// Two connectors in one worker: `[[connector]]` entries, each with its own name, slot,
/// publication and topic prefix; a connector after the first captures only what it routes; a
/// connector's fault names its connector when there are several.
#[test]
fn several_connectors_are_read_and_checked() {
    let tables = "[[table]]\nname = \"public.claims\"\nrows = 5\n[[table]]\nname = \"public.outbox\"\n\
                  outbox = { aggregatetype = \"claim\", delete = true }\n";
    let claims = "[[connector]]\nname = \"claims-connector\"\n\"topic.prefix\" = \"claims\"\n\"plugin.name\" = \
                  \"pgoutput\"\n\"table.include.list\" = \"public.claims\"\n";
    let outbox = "[[connector]]\nname = \"outbox-connector\"\n\"topic.prefix\" = \"outbox\"\n\"plugin.name\" = \
                  \"pgoutput\"\n\"slot.name\" = \"outbox_slot\"\n\"publication.name\" = \"outbox_publication\"\n\
                  \"publication.autocreate.mode\" = \"filtered\"\n\"snapshot.mode\" = \"no_data\"\n\
                  \"table.include.list\" = \"public.outbox\"\n\"transforms\" = \"outbox\"\n\
                  \"transforms.outbox.type\" = \"io.debezium.transforms.outbox.EventRouter\"\n";
    let rest = "[sink]\napply = \"version-guard\"\n[prediction]\nverdict = \"holds\"\nwhy = \"w\"\n";
    let text = format!("name = \"two\"\n{tables}{claims}{outbox}{rest}");
    let loaded = ok(&text, &[]);
    let spec = &loaded.spec;
    assert_eq!(spec.connector_count(), 2);
    assert_eq!(spec.debezium.name, "claims-connector");
    let second = &spec.more_connectors[0].debezium;
    assert_eq!(
        (second.name.as_str(), second.connector_index, second.publication_filtered),
        ("outbox-connector", 1, true)
    );
    assert_eq!(spec.sink_tables(), vec![TableId(0)]);
    assert_eq!(spec.routed_tables(), vec![TableId(1)]);
    assert_eq!(spec.routing_slots(), vec!["outbox_slot".to_string()]);
    // Written and read again, the same two connectors.
    let written = handoff_sim::scenario::to_toml(spec, loaded.seed).expect("written");
    assert_eq!(written.matches("[[connector]]").count(), 2, "{written}");

    // Each connector its own name, slot, publication and prefix.
    let second_named =
        |from: &str, to: &str| format!("name = \"two\"\n{tables}{claims}{}{rest}", outbox.replacen(from, to, 1));
    fails_at(
        &second_named("name = \"outbox-connector\"", "name = \"claims-connector\""),
        "connector[1].name",
        "connector[0] has the same name",
    );
    fails_at(
        &second_named("\"slot.name\" = \"outbox_slot\"", "\"slot.name\" = \"debezium\""),
        "connector[1].\"slot.name\"",
        "a slot serves one stream at a time",
    );
    fails_at(
        &second_named("\"publication.name\" = \"outbox_publication\"\n", ""),
        "connector[1].\"publication.name\"",
        "this one takes the default",
    );
    fails_at(
        &second_named("\"topic.prefix\" = \"outbox\"", "\"topic.prefix\" = \"claims\""),
        "connector[1].\"topic.prefix\"",
        "same topic.prefix",
    );
    // A connector after the first captures only tables its transforms route.
    fails_at(
        &second_named(
            "\"table.include.list\" = \"public.outbox\"",
            "\"table.include.list\" = \"public.outbox, public.claims\"",
        ),
        "connector[1].\"table.include.list\"",
        "captures public.claims, which its transforms do not route",
    );
    fails_at(
        &second_named(
            "\"publication.autocreate.mode\" = \"filtered\"",
            "\"publication.autocreate.mode\" = \"disabled\"",
        ),
        "connector[1].\"publication.autocreate.mode\"",
        "not modelled yet",
    );
    // At most MAX_CONNECTORS, at least one.
    let many: String = (0..5)
        .map(|i| {
            format!("[[connector]]\nname = \"c{i}\"\n\"topic.prefix\" = \"p{i}\"\n\"plugin.name\" = \"pgoutput\"\n")
        })
        .collect();
    fails(&format!("name = \"many\"\n{tables}{many}{rest}"), &[], "s.toml:", "too many connectors: 5");
    // A connector's fault names its connector when the worker runs several.
    let fault = |lines: &str| format!("{text}[[fault]]\nat = \"1s\"\n{lines}");
    fails(&fault("action = \"stop-connector\"\n"), &[], "s.toml:", "name the one action stop-connector acts on");
    fails_at(
        &fault("action = \"kill-connector-task\"\nconnector = \"nobody\"\n"),
        "fault[0].connector",
        "no connector is named `nobody` (the connectors: claims-connector, outbox-connector)",
    );
    fails_at(
        &fault("action = \"wal-burst\"\nbytes = \"1MB\"\nconnector = \"outbox-connector\"\n"),
        "fault[0].connector",
        "acts on no single connector",
    );
    let named = ok(&fault("action = \"rebuild-connector\"\nconnector = \"outbox-connector\"\n"), &[]);
    assert_eq!(named.spec.faults[0].connector, 1);
    let written = handoff_sim::scenario::to_toml(&named.spec, 1).expect("written");
    assert!(written.contains("connector = \"outbox-connector\""), "{written}");
    // `[connector]` stays the shorthand for one: a connector fault needs no name then.
    assert_eq!(ok(&with_fault("action = \"stop-connector\"\n"), &[]).spec.faults[0].connector, 0);
}

/// `[[message_outbox]]`, the table-free outbox: its fields, the `event` step that chooses it, the
/// background's rate, the decode transform in the chain, and the consumer it allows.
#[test]
fn message_outbox_inputs_are_checked_where_they_are_written() {
    use handoff_models::scenario::spec::StepKind;
    let outbox = "[[message_outbox]]\nprefix = \"outbox\"\naggregatetype = \"claim\"\n";
    let with_outbox = min_with("[connector]", &format!("{outbox}[connector]"))
        .replace("name = \"public.claims\"\n", "name = \"public.claims\"\nrows = 5\n");
    let loaded = ok(&with_outbox, &[]);
    let declared = &loaded.spec.message_outboxes[0];
    assert_eq!(
        (declared.prefix.as_str(), declared.aggregatetype.as_str(), declared.transactional),
        ("outbox", "claim", true)
    );
    // Its fields.
    let no_prefix = with_outbox.replace("prefix = \"outbox\"\n", "");
    fails_at(&no_prefix, "message_outbox[0].prefix", "required field is missing");
    fails_at(
        &with_outbox.replace("\"outbox\"\naggregatetype", "\"out box\"\naggregatetype"),
        "message_outbox[0].prefix",
        "not a message prefix",
    );
    fails_at(
        &with_outbox.replace("\"claim\"\n[connector]", "\"a b\"\n[connector]"),
        "message_outbox[0].aggregatetype",
        "not an aggregate type",
    );
    fails_at(
        &with_outbox.replace("aggregatetype", "transactional = \"yes\"\naggregatetype"),
        "message_outbox[0].transactional",
        "a boolean",
    );
    fails_at(
        &with_outbox.replace("aggregatetype", "aggregatetpye"),
        "message_outbox[0].aggregatetpye",
        "unknown field",
    );
    let twice = with_outbox.replace("[connector]", &format!("{outbox}[connector]"));
    fails_at(&twice, "message_outbox[1].prefix", "already the prefix of message_outbox[0]");
    let named_as_table = with_outbox.replace("prefix = \"outbox\"", "prefix = \"public.claims\"");
    fails_at(&named_as_table, "message_outbox[0].prefix", "the name of a [[table]] too");
    // The `event` step writes through it: the claim's update and the message, one step.
    let event = "[[workload.script]]\nat = \"1s\"\nevent = 3\nstatus = \"paid\"\n";
    let loaded = ok(&format!("{with_outbox}{event}"), &[]);
    let step = &loaded.spec.scripted[0];
    assert!(matches!(step.ops.as_slice(), [RowOp::Update { key: 3, status: Status::Paid, .. }]), "{:?}", step.ops);
    let StepKind::OutboxMessage { transactional: true, prefix, event: written, .. } = &step.step.kind else {
        panic!("{step:?}")
    };
    assert_eq!((prefix.as_str(), written.id, written.aggregate_id), ("outbox", 1, 3));
    // With an outbox table as well, the step names its outbox: a table or a prefix.
    let both = with_outbox.replace(
        "[[message_outbox]]",
        "[[table]]\nname = \"public.outbox_event\"\noutbox = { aggregatetype = \"claim\" }\n[[message_outbox]]",
    );
    fails_at(&format!("{both}{event}"), "workload.script[0].event", "several outboxes: name one with `outbox`");
    let named = ok(&format!("{both}{event}outbox = \"outbox\"\n{event}outbox = \"public.outbox_event\"\n"), &[]);
    assert!(matches!(&named.spec.scripted[0].step.kind, StepKind::OutboxMessage { event, .. } if event.id == 1));
    assert!(matches!(named.spec.scripted[1].ops.as_slice(), [_, RowOp::InsertEvent { id: 2, .. }]), "one numbering");
    fails_at(
        &format!("{both}{event}outbox = \"public.claims\"\n"),
        "workload.script[0].outbox",
        "or name a [[message_outbox]] by its prefix",
    );
    // In a session it joins the open transaction, which it needs.
    let session = "[[workload.script]]\nat = \"1s\"\nsession = \"s1\"\nevent = 3\n";
    fails_at(&format!("{with_outbox}{session}"), "workload.script[0].event", "has not begun a transaction");
    // The background's events go through it, when it is the only outbox.
    let rate = "[workload]\nstart_ms = 0\nend_ms = 10000\nevents_per_second = 1.0\n";
    assert_eq!(ok(&format!("{with_outbox}{rate}"), &[]).spec.background.map(|b| b.events_per_second), Some(1.0));
    fails_at(&format!("{both}{rate}"), "workload.events_per_second", "several outboxes");
    fails_at(&format!("{MIN}{rate}"), "workload.events_per_second", "needs an outbox table or a message outbox");
    // The decode transform runs in a chain; its options are checked.
    let chain = |lines: &str| with_outbox.replace("[sink]", &format!("{lines}[sink]"));
    let decode = "\"transforms\" = \"decode,outbox\"\n\
        \"transforms.decode.type\" = \"io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent\"\n\
        \"transforms.outbox.type\" = \"io.debezium.transforms.outbox.EventRouter\"\n";
    let routed = ok(&chain(decode), &[]);
    assert_eq!(routed.spec.transform_chain().expect("a chain").routed_topics, ["outbox.event.claim"]);
    fails(
        &chain(&format!("{decode}\"transforms.decode.fields.null.include\" = \"maybe\"\n")),
        &[],
        "s.toml:",
        "give true or false",
    );
    // A consumer reads its events' topic, routed or not: I9 says what a chain that routes none
    // loses.
    assert!(ok(&format!("{with_outbox}[consumer]\ninbox = \"same-transaction\"\n"), &[]).spec.consumer.is_some());
}

/// Compaction settings need `cleanup.policy = "compact"`; the ratio is Kafka's 0 to 1; the sink's
/// `behavior.on.null.values` is one of its two; the exactly-once interval is milliseconds.
#[test]
fn compaction_and_boundary_settings_are_checked() {
    let kafka = |body: &str| min_with("[sink]", &format!("[kafka]\n{body}\n[sink]"));
    fails(&kafka("\"delete.retention.ms\" = 1000"), &[], "s.toml:", "needs cleanup.policy = \"compact\"");
    fails(&kafka("\"cleanup.policy\" = \"compacted\""), &[], "s.toml:", "compact");
    fails(
        &kafka("\"cleanup.policy\" = \"compact\"\n\"min.cleanable.dirty.ratio\" = 1.5"),
        &[],
        "s.toml:",
        "expected 0 to 1",
    );
    assert!(load(&kafka("\"cleanup.policy\" = \"compact\"\n\"min.cleanable.dirty.ratio\" = 0.25"), &[]).is_ok());
    fails(
        &min_with("apply = \"version-guard\"", "apply = \"version-guard\"\n\"behavior.on.null.values\" = \"fail\""),
        &[],
        "s.toml:",
        "ignore",
    );
    fails(
        &min_with(
            "\"plugin.name\" = \"pgoutput\"",
            "\"plugin.name\" = \"pgoutput\"\n\"transaction.boundary.interval.ms\" = \"soon\"",
        ),
        &[],
        "s.toml:",
        "expected a number of milliseconds",
    );
}

/// The workers' group: `workers` is 1 to 3; group settings need a group and Kafka's limits; a
/// worker's fault names a worker the group has; a clean shutdown needs a group; the REST faults
/// and the runbook act on a group; the exhaustive lens takes two workers, not three.
#[test]
fn worker_group_settings_and_faults_are_checked() {
    let connect = |body: &str| min_with("[sink]", &format!("[connect]\n{body}\n[sink]"));
    fails(&connect("workers = 4"), &[], "s.toml:", "out of range");
    fails(
        &connect("\"session.timeout.ms\" = 20000"),
        &[],
        "s.toml:",
        "with one worker the model runs no group protocol",
    );
    fails(&connect("workers = 2\n\"session.timeout.ms\" = 5000"), &[], "s.toml:", "INVALID_SESSION_TIMEOUT");
    fails(
        &connect("workers = 2\n\"heartbeat.interval.ms\" = 10000"),
        &[],
        "s.toml:",
        "heartbeat.interval.ms must be lower than session.timeout.ms",
    );
    let group = ok(&connect("workers = 3\n\"scheduled.rebalance.max.delay.ms\" = 0"), &[]).spec;
    assert_eq!((group.connect.workers, group.connect.group.scheduled_rebalance_max_delay_ms), (3, 0));
    assert_eq!(group.connect.group.session_timeout_ms, 10_000, "Connect's default");
    let fault = |workers: u8, body: &str| {
        min_with("[sink]", &format!("[connect]\nworkers = {workers}\n[[fault]]\nat = \"10s\"\n{body}\n[sink]"))
    };
    fails(&fault(1, "action = \"stop-connect-worker\""), &[], "s.toml:", "set [connect] workers = 2 or 3");
    fails(&fault(2, "action = \"kill-connect-worker\"\nworker = 3"), &[], "s.toml:", "worker is 1 to 2");
    fails(
        &fault(1, "action = \"pause-connect-worker\"\nworker = 2\nduration_ms = 1000"),
        &[],
        "s.toml:",
        "one Connect worker",
    );
    fails(&fault(2, "action = \"pause-connect-worker\""), &[], "s.toml:", "duration_ms");
    // The REST faults act on a group: the call goes to a worker that is up, which forwards it
    // to the leader where Connect does.
    let stop = ok(&fault(2, "action = \"stop-connector\"\nresume_after_ms = 5000"), &[]).spec;
    assert_eq!(stop.faults[0].action, FaultAction::StopConnector { resume_after_ms: Some(5_000) });
    fails(
        &fault(2, "action = \"clog\"\nbetween = [\"connect-3\", \"kafka\"]\nduration_ms = 1000"),
        &[],
        "s.toml:",
        "no connect-3",
    );
    let paused = ok(&fault(3, "action = \"pause-connect-worker\"\nworker = 3\nduration_ms = 15000"), &[]).spec;
    assert_eq!(paused.faults[0].action, FaultAction::PauseConnectWorker { duration_ms: 15_000 });
    assert_eq!(paused.faults[0].worker, Some(2));
    let stop = ok(&fault(2, "action = \"stop-connect-worker\"\nrestart_after_ms = 5000"), &[]).spec;
    assert_eq!(stop.faults[0].worker, None, "without a worker: the one running the task");
    // The exhaustive lens takes a group of two, and refuses three, naming why.
    let bound = min_with(
        "[sink]",
        "[connect]\nworkers = 2\n[check]\nrows = 2\ncrash = [\"connect-2\"]\npause = [\"connect\"]\n[sink]",
    );
    let spec = ok(&bound, &[]).spec;
    let check = spec.check.as_ref().expect("a bound");
    assert_eq!(
        (check.crash.clone(), check.pause.clone(), check.pauses),
        (vec![Node::Connect2], vec![Node::Connect], 1)
    );
    assert!(handoff_sim::exhaustive::check::bound(&spec).is_ok());
    let bound = min_with("[sink]", "[connect]\nworkers = 3\n[check]\nrows = 2\n[sink]");
    let spec = ok(&bound, &[]).spec;
    let problem = handoff_sim::exhaustive::check::bound(&spec).expect_err("three workers have no bound");
    assert!(problem.contains("the exhaustive world runs two at most"), "{problem}");
    // The second worker in a bound needs the group; a pause names a worker.
    fails(
        &min_with("[sink]", "[check]\nrows = 2\ncrash = [\"connect-2\"]\n[sink]"),
        &[],
        "s.toml:",
        "[connect] workers = 2 adds it",
    );
    fails(&min_with("[sink]", "[check]\nrows = 2\npause = [\"kafka\"]\n[sink]"), &[], "s.toml:", "connect-2");
    fails(&min_with("[sink]", "[check]\nrows = 2\npauses = 1\n[sink]"), &[], "s.toml:", "needs pause = [...]");
    let rebuild =
        min_with("[sink]", "[connect]\nworkers = 2\n[check]\nrows = 2\noperations = [\"rebuild-connector\"]\n[sink]");
    assert!(handoff_sim::exhaustive::check::bound(&ok(&rebuild, &[]).spec).is_ok());
    fails(
        &min_with("[sink]", "[postgres]\nwal_sender_timeout = \"soon\"\n[sink]"),
        &[],
        "s.toml:",
        "is not a duration",
    );
}

/// `[[table]] primary_key`: `id` (the default), two columns with `group_rows`, or none (see
/// `tables_without_a_primary_key_say_what_is_wrong`); anything else is refused by name.
#[test]
fn table_primary_keys() {
    let table = "[[table]]\nname = \"public.claims\"\n";
    let with = |extra: &str| min_with(table, &format!("{table}{extra}"));
    let loaded = ok(&with("primary_key = [\"region_id\", \"hub_id\"]\ngroup_rows = 10\n"), &[]);
    let key = loaded.spec.tables[0].composite_key.as_ref().expect("a composite key");
    assert_eq!((key.columns[0].as_str(), key.columns[1].as_str(), key.group_rows), ("region_id", "hub_id", 10));
    assert_eq!(key.values(16), (2, 6));
    assert!(ok(&with("primary_key = [\"id\"]\n"), &[]).spec.tables[0].composite_key.is_none());
    fails(
        &with("primary_key = [\"region_id\", \"hub_id\"]\n"),
        &[],
        "s.toml:",
        "needs the rows per value of its first column",
    );
    fails(&with("group_rows = 10\n"), &[], "s.toml:", "group_rows goes with a two-column primary_key");
    fails(&with("primary_key = [\"region_id\"]\n"), &[], "s.toml:", "the model's single-column key is `id`");
    fails(&with("primary_key = []\n"), &[], "s.toml:", "set replica_identity = \"full\"");
    fails(&with("primary_key = [\"a\", \"b\", \"c\"]\ngroup_rows = 2\n"), &[], "s.toml:", "keys of one or two columns");
    fails(
        &with("primary_key = [\"region_id\", \"version\"]\ngroup_rows = 2\n"),
        &[],
        "s.toml:",
        "`version` in a two-column key",
    );
    fails(&with("primary_key = [\"region_id\", \"region_id\"]\ngroup_rows = 2\n"), &[], "s.toml:", "named twice");
    fails(&with("primary_key = [\"Region\", \"hub_id\"]\ngroup_rows = 2\n"), &[], "s.toml:", "is not a column name");
    fails(&with("primary_key = [\"region_id\", \"hub_id\"]\ngroup_rows = 0\n"), &[], "s.toml:", "group_rows");
}

/// A `connector_config` step (`PUT /connectors/<name>/config`): the one property that may change,
/// tables added and none removed, one worker, not in a bound, no session; each refusal names the
/// field.
#[test]
fn connector_config_steps_say_what_is_wrong() {
    let two_tables = min_with(
        "[connector]\n",
        "[[table]]\nname = \"public.hubs\"\n[connector]\n\"table.include.list\" = \"public.claims\"\n",
    );
    let step = |config: &str| format!("{two_tables}[[workload.script]]\nat = \"1s\"\nconnector_config = {config}\n");
    assert!(load(&step("{ \"table.include.list\" = \"public.claims,public.hubs\" }"), &[]).is_ok());
    fails_at(
        &step("{ \"snapshot.mode\" = \"never\" }"),
        "workload.script[0].connector_config.\"snapshot.mode\"",
        "only table.include.list can change while running",
    );
    fails_at(
        &step("{ \"table.include.list\" = \"public.hubs\" }"),
        "workload.script[0].connector_config.\"table.include.list\"",
        "leaves out public.claims",
    );
    fails_at(
        &step("{ \"table.include.list\" = \"public.claims,public.nope\" }"),
        "workload.script[0].connector_config.\"table.include.list\"",
        "`public.nope` is not a table of [[table]]",
    );
    fails_at(
        &format!(
            "{two_tables}[[workload.script]]\nat = \"1s\"\nsession = \"s1\"\nconnector_config = {{ \"table.include.list\" = \"public.claims,public.hubs\" }}\n"
        ),
        "workload.script[0].session",
        "a configuration update is a REST call",
    );
    let grouped =
        format!("{}[connect]\nworkers = 2\n", step("{ \"table.include.list\" = \"public.claims,public.hubs\" }"));
    fails_at(&grouped, "workload.script[0].connector_config", "in a Connect group");
    let bound = format!(
        "{two_tables}[check]\nrows = 2\n[[check.script]]\nconnector_config = {{ \"table.include.list\" = \"public.claims,public.hubs\" }}\n"
    );
    match load(&bound, &[]) {
        Ok(_) => panic!("a configuration update in a bound loaded"),
        Err(message) => assert!(message.contains("not modelled in a bound yet"), "{message}"),
    }
}

/// `[[table]] unique_column` / `null_row` and `message.key.columns` (DBZ-5071's setting): what
/// the model keys by is named; anything else is refused with the reason.
#[test]
fn message_key_columns_and_unique_columns_say_what_is_wrong() {
    let table = |fields: &str| {
        min_with("[[table]]\nname = \"public.claims\"\n", &format!("[[table]]\nname = \"public.claims\"\n{fields}"))
    };
    let unique = "replica_identity = \"full\"\nunique_column = \"external_id\"\nnull_row = 2\n";
    let keyed = |columns: &str| {
        let with = table(unique);
        with.replacen("[connector]\n", &format!("[connector]\n\"message.key.columns\" = \"{columns}\"\n"), 1)
    };
    let loaded = ok(&keyed("public.claims:external_id"), &[]);
    let keyed_by = &loaded.spec.debezium.message_key_columns;
    assert_eq!(keyed_by.len(), 1);
    assert_eq!((keyed_by[0].1.name.as_str(), keyed_by[0].1.null_row), ("external_id", 2));
    assert!(ok(&keyed("public.claims:id"), &[]).spec.debezium.message_key_columns.is_empty(), "id: the key");
    fails_at(&table("null_row = 2\n"), "table[0].null_row", "null_row goes with unique_column");
    fails_at(&table("unique_column = \"external_id\"\n"), "table[0].null_row", "required field is missing");
    fails_at(&table("unique_column = \"version\"\nnull_row = 1\n"), "table[0].unique_column", "row columns");
    fails_at(&table("unique_column = \"External\"\nnull_row = 1\n"), "table[0].unique_column", "not a column name");
    fails_at(&table("unique_column = \"external_id\"\nnull_row = 0\n"), "table[0].null_row", "out of range");
    fails_at(
        &keyed("public.claims:amount_cents"),
        "connector.\"message.key.columns\"",
        "`amount_cents` is not modelled as a key of public.claims",
    );
    fails_at(&keyed("public.claims:id,external_id"), "connector.\"message.key.columns\"", "one key column");
    fails_at(&keyed("public.nope:external_id"), "connector.\"message.key.columns\"", "`public.nope` is not a table");
    fails_at(&keyed("public\\\\.claims:external_id"), "connector.\"message.key.columns\"", "regular expressions");
    fails_at(&keyed("public.claims"), "connector.\"message.key.columns\"", "is not `<schema>.<table>:<column>`");
    fails_at(&keyed("public.claims:id;public.claims:external_id"), "connector.\"message.key.columns\"", "named twice");
    let composite = table("primary_key = [\"region_id\", \"hub_id\"]\ngroup_rows = 2\n").replacen(
        "[connector]\n",
        "[connector]\n\"message.key.columns\" = \"public.claims:id\"\n",
        1,
    );
    fails_at(&composite, "connector.\"message.key.columns\"", "two-column primary key");
    let default_identity = keyed("public.claims:external_id").replacen("replica_identity = \"full\"\n", "", 1);
    fails_at(&default_identity, "connector.\"message.key.columns\"", "REPLICA IDENTITY DEFAULT");
}

/// A table without a primary key (`primary_key = []`): accepted with `REPLICA IDENTITY FULL`;
/// its records have a null key unless `message.key.columns` names one, and such a table's topic
/// needs one partition and no compaction (neither null-key behaviour is modelled).
#[test]
fn tables_without_a_primary_key_say_what_is_wrong() {
    let table = |fields: &str| {
        min_with("[[table]]\nname = \"public.claims\"\n", &format!("[[table]]\nname = \"public.claims\"\n{fields}"))
    };
    let keyless = "replica_identity = \"full\"\nprimary_key = []\n";
    let loaded = ok(&table(keyless), &[]);
    assert!(loaded.spec.tables[0].keyless);
    assert_eq!(loaded.spec.debezium.null_key_tables, [loaded.spec.tables[0].id]);
    let keyed =
        table(keyless).replacen("[connector]\n", "[connector]\n\"message.key.columns\" = \"public.claims:id\"\n", 1);
    assert!(ok(&keyed, &[]).spec.debezium.null_key_tables.is_empty(), "message.key.columns gives it a key");
    fails_at(&table("primary_key = []\n"), "table[0].primary_key", "does not have a replica identity");
    fails_at(
        &table("replica_identity = \"full\"\nprimary_key = []\ngroup_rows = 2\n"),
        "table[0].group_rows",
        "not a table without one",
    );
    fails_at(&format!("{}\n[kafka]\npartitions = 3\n", table(keyless)), "kafka.partitions", "sticky partitioner");
    fails_at(
        &format!("{}\n[kafka]\n\"cleanup.policy\" = \"compact\"\n", table(keyless)),
        "kafka.\"cleanup.policy\"",
        "Compacted topic cannot accept message without key",
    );
    assert!(
        ok(&format!("{keyed}\n[kafka]\npartitions = 3\n"), &[]).spec.kafka.partitions == 3,
        "keyed: any partitions"
    );
}
