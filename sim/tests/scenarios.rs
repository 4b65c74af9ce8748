//! Every bundled scenario, at its own seed: the prediction holds, and the narrated timeline and
//! handoff record match the reviewed snapshot (any change in semantics shows as a diff).
#![cfg(madsim)]

mod common;

use handoff_sim::timed::report;

fn check(name: &str) {
    let (spec, seed) = common::load(name, &[]);
    check_spec(name, &spec, seed);
}

/// A bundled scenario's variant, at the scenario's seed: its own prediction holds, and its
/// snapshot is `NAME.VARIANT`.
fn check_variant(name: &str, variant: &str) {
    let choice = handoff_sim::scenario::Choice { variant: Some(variant.into()), ..Default::default() };
    let loaded = handoff_sim::scenario::load_with(&common::scenario_path(name), &choice)
        .unwrap_or_else(|error| panic!("{error}"));
    check_spec(&format!("{name}.{variant}"), &loaded.spec, loaded.seed);
}

fn check_spec(name: &str, spec: &handoff_models::scenario::spec::Spec, seed: u64) {
    let result = common::run(spec, seed);
    assert!(
        result.prediction_held,
        "{name}: prediction did not hold; violated {:?}\n{}",
        result.violated(),
        result.findings.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("\n")
    );
    let mut text = report::timeline(spec, &result).join("\n");
    text.push_str("\n\nfindings\n");
    for finding in &result.findings {
        text.push_str(&format!("  {finding}\n"));
    }
    text.push_str("\nhandoff record\n");
    text.push_str(&result.record.as_ref().expect("record").render());
    text.push_str(&format!("\ntrace hash {:016x}\n", result.trace_hash));
    insta::with_settings!({ snapshot_path => "../../snapshots", prepend_module_to_snapshot => false, omit_expression => true }, {
        insta::assert_snapshot!(name, text);
    });
}

#[test]
fn claims_restart_during_snapshot() {
    check("claims-restart-during-snapshot");
}

#[test]
fn claims_wall_clock_start() {
    check("claims-wall-clock-start");
}

#[test]
fn claims_failover() {
    check("claims-failover");
}

#[test]
fn claims_failover_right_after_snapshot() {
    check("claims-failover-right-after-snapshot");
}

#[test]
fn claims_slot_cap_stopped_connector() {
    check("claims-slot-cap-stopped-connector");
}

#[test]
fn claims_slot_cap_running_connector() {
    check("claims-slot-cap-running-connector");
}

#[test]
fn claims_slot_cap_recovery_runbook() {
    check("claims-slot-cap-recovery-runbook");
}

#[test]
fn claims_quiet_database() {
    check("claims-quiet-database");
}

#[test]
fn claims_quiet_database_heartbeat_fix() {
    check("claims-quiet-database-heartbeat-fix");
}

#[test]
fn claims_quiet_database_keepalive_fix() {
    check("claims-quiet-database-keepalive-fix");
}

#[test]
fn claims_failover_pg17_synchronized() {
    check("claims-failover-pg17-synchronized");
}

#[test]
fn claims_failover_pg17_unsynchronized() {
    check("claims-failover-pg17-unsynchronized");
}

#[test]
fn claims_task_failure_at_completion_marker() {
    check("claims-task-failure-at-completion-marker");
}

#[test]
fn claims_failover_recreate_slot_during_gate() {
    check("claims-failover-recreate-slot-during-gate");
}

#[test]
fn claims_failover_worker_down_at_promotion() {
    check("claims-failover-worker-down-at-promotion");
}

#[test]
fn claims_consumer_starts_late() {
    check("claims-consumer-starts-late");
}

#[test]
fn claims_failover_pg17_synchronized_restart() {
    check("claims-failover-pg17-synchronized-restart");
}

#[test]
fn claims_quiet_database_keepalive_fix_restart() {
    check("claims-quiet-database-keepalive-fix-restart");
}

#[test]
fn claims_slot_cap_crash_recovery() {
    check("claims-slot-cap-crash-recovery");
}

#[test]
fn claims_failover_pg17_synchronized_resnapshot() {
    check("claims-failover-pg17-synchronized-resnapshot");
}

#[test]
fn claims_quiet_database_heartbeat_fix_outage() {
    check("claims-quiet-database-heartbeat-fix-outage");
}

#[test]
fn claims_interleaved_transactions() {
    check("claims-interleaved-transactions");
}

#[test]
fn claims_quiet_database_idle_session() {
    check("claims-quiet-database-idle-session");
}

#[test]
fn claims_quiet_database_message_heartbeat_restart() {
    check("claims-quiet-database-message-heartbeat-restart");
}

#[test]
fn claims_commit_visibility_race() {
    check("claims-commit-visibility-race");
}

#[test]
fn claims_restart_mid_large_transaction() {
    check("claims-restart-mid-large-transaction");
}

#[test]
fn outbox_status_changes_connect_killed() {
    check("outbox-status-changes-connect-killed");
}

#[test]
fn outbox_connector_from_json() {
    check("outbox-connector-from-json");
}

#[test]
fn outbox_slot_cap_events_during_outage() {
    check("outbox-slot-cap-events-during-outage");
}

#[test]
fn outbox_router_without_predicate() {
    check("outbox-router-without-predicate");
}

#[test]
fn outbox_consumer_crash_inbox_rules() {
    check("outbox-consumer-crash-inbox-rules");
}

#[test]
fn outbox_steady_events() {
    check("outbox-steady-events");
}

#[test]
fn outbox_quiet_database_both_slots() {
    check("outbox-quiet-database-both-slots");
}

#[test]
fn outbox_hanging_transaction() {
    check("outbox-hanging-transaction");
}

#[test]
fn claims_compacted_topic_lagging_sink() {
    check("claims-compacted-topic-lagging-sink");
}

/// Every variant of every bundled scenario, at the scenario's seed, is as its own prediction says
/// (a variant of `fault_profile` settings only is a sweep's, judged by the release sweeps).
#[test]
fn every_variant_holds_its_prediction() {
    let mut ran = 0;
    for (name, path) in common::bundled().into_iter().filter(|(name, _)| !name.contains('/')) {
        let text = std::fs::read_to_string(&path).expect("the scenario file");
        let lines: Vec<&str> = text.lines().collect();
        for (index, line) in lines.iter().enumerate() {
            let Some(variant) = line.strip_prefix("[variants.").and_then(|rest| rest.strip_suffix(']')) else {
                continue;
            };
            if variant.contains('.') {
                continue; // `[variants.NAME.prediction]`
            }
            let settings = lines.get(index + 1).copied().unwrap_or_default();
            if settings.starts_with("set") && !settings.contains('=') {
                continue;
            }
            let sweep_only = settings
                .split(['{', ','])
                .filter(|part| part.contains('='))
                .all(|part| part.trim().trim_start_matches('"').starts_with("fault_profile"));
            if sweep_only {
                continue;
            }
            let choice =
                handoff_sim::scenario::Choice { sets: Vec::new(), variant: Some(variant.to_string()), expect: None };
            let loaded = handoff_sim::scenario::load_with(&path, &choice).unwrap_or_else(|e| panic!("{e}"));
            let result = common::run(&loaded.spec, loaded.seed);
            assert!(
                result.prediction_held,
                "{name} --variant {variant}: prediction did not hold; violated {:?}\n{}",
                result.violated(),
                result.findings.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("\n")
            );
            ran += 1;
        }
    }
    assert!(ran >= 10, "only {ran} variants ran");
}

#[test]
fn outbox_logical_messages() {
    check("outbox-logical-messages");
}

#[test]
fn outbox_logical_messages_decode_after_router() {
    check_variant("outbox-logical-messages", "decode-after-router");
}

#[test]
fn outbox_logical_messages_prefix_excluded() {
    check_variant("outbox-logical-messages", "prefix-excluded");
}

#[test]
fn outbox_logical_messages_non_transactional() {
    check_variant("outbox-logical-messages", "non-transactional");
}

#[test]
fn outbox_logical_messages_no_offset_stored() {
    check_variant("outbox-logical-messages", "no-offset-stored");
}

/// The scenario's connector with no decode transform at all. (A variant only sets properties, so
/// the bundled variant `decode-after-router` moves the transform after the router instead; the
/// router meets the message's own record in both.) Every committed event is left on
/// claims.message, and I9 says why; the claims still reach the index.
#[test]
fn outbox_logical_messages_without_the_decode_transform() {
    let text = std::fs::read_to_string(common::scenario_path("outbox-logical-messages")).expect("the scenario");
    let without: String = text
        .lines()
        .filter(|line| !line.starts_with("\"transforms.decode."))
        .map(|line| format!("{line}\n"))
        .collect::<String>()
        .replace("\"transforms\" = \"decode,outbox\"", "\"transforms\" = \"outbox\"");
    assert!(!without.contains("DecodeLogicalDecodingMessageContent\""), "the transform is gone");
    let loaded = handoff_sim::scenario::load_str("without-decode.toml", &without, &[]).expect("it loads");
    let result = common::run(&loaded.spec, loaded.seed);
    assert_eq!(result.violated(), [handoff_models::scenario::spec::Invariant::I9]);
    let record = result.record.as_ref().expect("a record");
    let outbox = record.outbox.as_ref().expect("the outbox line");
    assert_eq!((outbox.committed, outbox.routed, outbox.lost.len()), (13, 0, 13));
    assert_eq!(record.keys_missing, Vec::<i64>::new(), "the claims are unaffected");
    for finding in &result.findings {
        let text = finding.to_string();
        assert!(text.contains("only its message's record, on claims.message"), "{text}");
        assert!(text.contains("which is no change envelope, and passes such a record on unchanged"), "{text}");
    }
}

/// Drill 6: under exactly-once the kill's open transaction is aborted and event 3 committed once;
/// the record counts the aborted copy apart, and the read_committed consumer never handles it.
/// At read_uncommitted the same pipeline hands the consumer both copies.
#[test]
fn exactly_once_counts_the_aborted_copy_apart() {
    for (variant, handled) in [("exactly-once", 3), ("exactly-once-read-uncommitted", 4)] {
        let choice =
            handoff_sim::scenario::Choice { sets: Vec::new(), variant: Some(variant.to_string()), expect: None };
        let path = common::scenario_path("outbox-status-changes-connect-killed");
        let loaded = handoff_sim::scenario::load_with(&path, &choice).unwrap_or_else(|e| panic!("{e}"));
        let result = common::run(&loaded.spec, loaded.seed);
        let outbox = result.record.as_ref().and_then(|record| record.outbox.clone()).expect("the outbox line");
        assert_eq!((outbox.duplicate_records, outbox.uncommitted_records), (1, 1), "{variant}");
        let event = outbox.duplicated.iter().find(|count| count.event == 3).expect("event 3 twice");
        assert_eq!((event.records, event.uncommitted), (2, 1), "{variant}");
        assert_eq!(outbox.consumer.expect("a consumer").records_handled, handled, "{variant}");
    }
}

/// `transaction.boundary=interval`: one transaction spans the polls of an interval, so the worker's
/// kill aborts every event's record, not only the last one's, and the committed copies come one
/// interval after the restarted task began (each event still handled once by the read_committed
/// consumer); with `poll`, events 1 and 2 commit in their own transactions before the kill.
#[test]
fn an_interval_boundary_commits_once_per_interval() {
    use handoff_models::core::observe::Observation;
    for (variant, aborted, first_commit_after_ms) in [("exactly-once", 1, 0), ("exactly-once-interval", 3, 60_000)] {
        let choice =
            handoff_sim::scenario::Choice { sets: Vec::new(), variant: Some(variant.to_string()), expect: None };
        let path = common::scenario_path("outbox-status-changes-connect-killed");
        let loaded = handoff_sim::scenario::load_with(&path, &choice).unwrap_or_else(|e| panic!("{e}"));
        let result = common::run(&loaded.spec, loaded.seed);
        assert!(result.prediction_held, "{variant}");
        let ends: Vec<(u64, bool, usize)> = result
            .trace
            .iter()
            .filter_map(|event| match &event.observation {
                Observation::TransactionEnded { committed, records, .. } => Some((event.at.ms(), *committed, *records)),
                _ => None,
            })
            .collect();
        let aborted_records: usize = ends.iter().filter(|(_, committed, _)| !committed).map(|(.., n)| n).sum();
        assert_eq!(aborted_records, aborted, "{variant}: {ends:?}");
        let first_commit = ends.iter().find(|(_, committed, _)| *committed).expect("a commit").0;
        assert!(first_commit >= first_commit_after_ms, "{variant}: {ends:?}");
        let outbox = result.record.as_ref().and_then(|record| record.outbox.clone()).expect("the outbox line");
        assert_eq!(outbox.consumer.expect("a consumer").records_handled, 3, "{variant}");
    }
}

/// Under exactly-once the handoff record counts what each isolation level reads: the restart
/// drill's kill leaves one snapshot batch (claims 700 to 899) in an open transaction, which the
/// restarted task's `initTransactions()` aborts; a `read_uncommitted` consumer reads each of those
/// claims once more than a `read_committed` one. Without exactly-once there is no such line.
#[test]
fn the_record_counts_each_isolation_levels_events_per_key() {
    let load = |variant: Option<&str>| {
        let choice =
            handoff_sim::scenario::Choice { sets: Vec::new(), variant: variant.map(str::to_string), expect: None };
        let path = common::scenario_path("claims-restart-during-snapshot");
        let loaded = handoff_sim::scenario::load_with(&path, &choice).unwrap_or_else(|e| panic!("{e}"));
        common::run(&loaded.spec, loaded.seed)
    };
    let result = load(Some("exactly-once"));
    assert!(result.prediction_held);
    let isolation = result.record.as_ref().and_then(|record| record.isolation.clone()).expect("the isolation line");
    assert_eq!(isolation.read_uncommitted - isolation.read_committed, 200);
    assert_eq!(isolation.differing.len(), 200);
    assert!(
        isolation
            .differing
            .iter()
            .all(|key| (700..900).contains(&key.key) && key.read_committed + 1 == key.read_uncommitted)
    );
    assert!(load(None).record.expect("a record").isolation.is_none());
}

#[test]
fn hubs_backfill() {
    check("hubs-backfill");
}

#[test]
fn hubs_backfill_insert_delete() {
    check_variant("hubs-backfill", "insert-delete");
}

#[test]
fn hubs_added_while_running() {
    check("hubs-added-while-running");
}

#[test]
fn hubs_added_while_running_variants() {
    for variant in ["no-backfill", "signal-first", "filtered-publication"] {
        check_variant("hubs-added-while-running", variant);
    }
}

#[test]
fn hubs_backfill_signal_not_published() {
    check("hubs-backfill-signal-not-published");
}

#[test]
fn hubs_backfill_changes_in_window() {
    check("hubs-backfill-changes-in-window");
}

#[test]
fn hubs_backfill_restart() {
    check("hubs-backfill-restart");
}

#[test]
fn hubs_backfill_stop() {
    check("hubs-backfill-stop");
}

#[test]
fn hubs_backfill_stop_before_signal() {
    check_variant("hubs-backfill-stop", "stop-before-signal");
}

#[test]
fn hubs_backfill_conditions() {
    check("hubs-backfill-conditions");
}

#[test]
fn hubs_backfill_conditions_sql_exception() {
    check_variant("hubs-backfill-conditions", "sql-exception");
}

#[test]
fn hubs_backfill_kafka_signal() {
    check("hubs-backfill-kafka-signal");
}

#[test]
fn hubs_backfill_kafka_signal_wrong_key() {
    check_variant("hubs-backfill-kafka-signal", "wrong-key");
}

#[test]
fn hubs_backfill_kafka_signal_kafka_only() {
    check_variant("hubs-backfill-kafka-signal", "kafka-only");
}

#[test]
fn hubs_backfill_kafka_signal_worker_killed() {
    check_variant("hubs-backfill-kafka-signal", "worker-killed");
}

#[test]
fn hubs_backfill_kafka_signal_committed_then_killed() {
    check_variant("hubs-backfill-kafka-signal", "committed-then-killed");
}

#[test]
fn hubs_backfill_read_only() {
    check("hubs-backfill-read-only");
}

#[test]
fn hubs_backfill_read_only_open_transaction() {
    check_variant("hubs-backfill-read-only", "open-transaction");
}

#[test]
fn hubs_backfill_read_only_paused() {
    check_variant("hubs-backfill-read-only", "paused");
}

#[test]
fn hubs_backfill_pause() {
    check("hubs-backfill-pause");
}

#[test]
fn hubs_backfill_pause_flush_every_10s() {
    check_variant("hubs-backfill-pause", "flush-every-10s");
}

#[test]
fn hubs_backfill_blocking() {
    check("hubs-backfill-blocking");
}

#[test]
fn hubs_backfill_blocking_worker_killed() {
    check_variant("hubs-backfill-blocking", "worker-killed");
}

#[test]
fn hubs_backfill_blocking_failing_select() {
    check_variant("hubs-backfill-blocking", "failing-select");
}

#[test]
fn hubs_backfill_surrogate_key() {
    check("hubs-backfill-surrogate-key");
}

#[test]
fn hubs_backfill_surrogate_key_unique_column() {
    check_variant("hubs-backfill-surrogate-key", "unique-column");
}

#[test]
fn hubs_backfill_surrogate_key_missing_column() {
    check_variant("hubs-backfill-surrogate-key", "missing-column");
}

#[test]
fn hubs_backfill_visibility_race() {
    check("hubs-backfill-visibility-race");
}

#[test]
fn hubs_backfill_window_rule() {
    check("hubs-backfill-window-rule");
}

#[test]
fn two_workers_one_leaves() {
    check("two-workers-one-leaves");
}

#[test]
fn two_workers_leader_paused() {
    check("two-workers-leader-paused");
}

#[test]
fn hubs_backfill_composite_key() {
    check("hubs-backfill-composite-key");
}

#[test]
fn hubs_backfill_composite_key_debezium_1_7() {
    check_variant("hubs-backfill-composite-key", "debezium-1-7");
}

#[test]
fn hubs_backfill_nullable_key() {
    check("hubs-backfill-nullable-key");
}

#[test]
fn hubs_backfill_nullable_key_debezium_2_5() {
    check_variant("hubs-backfill-nullable-key", "debezium-2-5");
}

#[test]
fn hubs_backfill_keyless() {
    check("hubs-backfill-keyless");
}

#[test]
fn hubs_backfill_keyless_no_message_key() {
    check_variant("hubs-backfill-keyless", "no-message-key");
}

#[test]
fn hubs_backfill_keyless_surrogate_key() {
    check_variant("hubs-backfill-keyless", "surrogate-key");
}

#[test]
fn hubs_backfill_keyless_blocking() {
    check_variant("hubs-backfill-keyless", "blocking");
}

#[test]
fn hubs_backfill_read_only_visibility_race() {
    check("hubs-backfill-read-only-visibility-race");
}

#[test]
fn hubs_backfill_read_only_window_rule() {
    check("hubs-backfill-read-only-window-rule");
}

#[test]
fn orders_composite_key() {
    check("orders-composite-key");
}
