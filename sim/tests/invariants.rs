//! Each checked invariant has a run that breaks it, through a mechanism of the real systems' code,
//! and the designs that avoid the mechanism keep it.
#![cfg(madsim)]

mod common;

use handoff_models::scenario::spec::Invariant::{self, I1, I2, I3, I4, I5, I6, I8};

fn violated(name: &str, sets: &[&str]) -> Vec<Invariant> {
    let (spec, seed) = common::load(name, sets);
    common::violated(&common::run(&spec, seed))
}

fn finding_about(name: &str, sets: &[&str], invariant: Invariant) -> handoff_models::judge::checkers::Finding {
    let (spec, seed) = common::load(name, sets);
    let result = common::run(&spec, seed);
    result.findings.into_iter().find(|f| f.invariant == invariant).unwrap_or_else(|| panic!("no {invariant} finding"))
}

#[test]
fn i1_a_plain_read_before_the_slot_exists_leaves_a_gap() {
    let finding = finding_about("claims-wall-clock-start", &[], I1);
    // The read and the slot left the change out of Kafka altogether.
    assert!(finding.detail.contains("never reached Kafka"), "{finding}");
    assert!(
        violated("claims-wall-clock-start", &["sink.apply=snapshot-epoch"]).contains(&I1),
        "no sink rule repairs it"
    );
}

#[test]
fn i2_a_restart_during_the_snapshot_resurrects_a_deleted_claim() {
    let finding = finding_about("claims-restart-during-snapshot", &[], I2);
    assert_eq!(finding.key, Some(42));
    assert!(finding.detail.contains("cannot retract"), "{finding}");
    assert_eq!(violated("claims-restart-during-snapshot", &["sink.apply=naive-upsert"]), vec![I2]);
    assert_eq!(violated("claims-restart-during-snapshot", &["sink.apply=snapshot-epoch"]), vec![]);
}

#[test]
fn i2_does_not_happen_when_the_worker_dies_after_the_delete_was_streamed() {
    // Killed once the completion marker is acknowledged, the delete (streamed right after the
    // snapshot) is in the same batch and already in Kafka: the version guard keeps it.
    assert_eq!(violated("claims-restart-during-snapshot", &["fault[0].at=snapshot-completion-marker-acked"]), vec![]);
}

#[test]
fn i3_a_naive_sink_moves_a_claim_back_when_changes_are_replayed() {
    let rest = r#"
        [sink]
        apply = "naive-upsert"
        [[workload.script]]
        at = "62s"
        update = 7
        [[workload.script]]
        at = "64s"
        update = 7
        status = "paid"
        [[fault]]
        at = "70s"
        action = "kill-connect-worker"
        restart_after_ms = 5000
        [prediction]
        verdict = "violated"
        findings = ["I3"]
        why = "the two updates were acknowledged after the last offset flush and are replayed"
    "#;
    let text = common::claims("replay after a hard kill", 100, "", rest);
    let spec = common::load_text(&text);
    let result = common::run(&spec, 1);
    assert_eq!(result.violated(), vec![I3], "{:?}", result.findings);
    assert_eq!(result.findings[0].key, Some(7));
    let mut guarded = spec.clone();
    guarded.sink.rule = handoff_models::components::sink::ApplyRule::VersionGuard;
    assert_eq!(common::run(&guarded, 1).violated(), vec![], "the version guard refuses the replayed rows");
}

#[test]
fn i4_the_stream_does_not_cover_the_commits_after_a_plain_read() {
    let finding = finding_about("claims-wall-clock-start", &[], I4);
    assert!(finding.seen.contains("never published"), "{finding}");
    // Started before the read, the stream covers everything after it (an overlap, no gap).
    assert_eq!(violated("claims-wall-clock-start", &["connect.start_at_ms=1000", "workload.script[0].at=2s"]), vec![]);
}

#[test]
fn i4_a_lagging_standby_makes_phantoms_of_what_the_connector_already_published() {
    let (spec, seed) = common::load("claims-failover", &["postgres.standby.replication_delay_ms=5000"]);
    let result = common::run(&spec, seed);
    assert_eq!(result.violated(), vec![I4], "{:?}", result.findings);
    assert!(result.findings.iter().any(|f| f.seen.contains("phantom update")), "{:?}", result.findings);
    assert!(
        !result.record.as_ref().expect("record").keys_differing.is_empty(),
        "a phantom update outlives the rebuild"
    );
}

#[test]
fn i5_debezium_before_2_7_confirms_the_slot_past_the_stored_offset() {
    let text = r#"
        name = "DBZ-7816"
        [versions]
        debezium = "2.6"
        [[table]]
        name = "public.claims"
        rows = 100
        replica_identity = "full"
        [connector]
        "topic.prefix" = "claims"
        "plugin.name" = "pgoutput"
        [sink]
        apply = "version-guard"
        [workload]
        end_ms = 90000
        updates_per_second = 10
        [prediction]
        verdict = "violated"
        findings = ["I5"]
        why = "commit() confirms the offsets acknowledged in memory"
    "#;
    let spec = common::load_text(text);
    let result = common::run(&spec, 1);
    assert_eq!(result.violated(), vec![I5], "{:?}", result.findings);
    let mut fixed = spec.clone();
    fixed.debezium.version = (2, 7);
    assert_eq!(common::run(&fixed, 1).violated(), vec![], "2.7 confirms only what the offset store holds");
}

#[test]
fn i6_and_i8_a_recreated_slot_right_after_a_snapshot_is_trusted() {
    assert_eq!(violated("claims-failover-right-after-snapshot", &[]), vec![I1, I4, I6, I8]);
    let i6 = finding_about("claims-failover-right-after-snapshot", &[], I6);
    assert!(i6.detail.contains("forwarded"), "{i6}");
    // A gate sees the slot's confirmed_flush past the saved offset and rebuilds.
    assert_eq!(violated("claims-failover-right-after-snapshot", &["failover.gate=rebuild"]), vec![]);
}

#[test]
fn the_connector_fails_closed_when_the_slot_is_missing_after_a_failover() {
    let (spec, seed) = common::load("claims-failover", &["failover.gate=off"]);
    let result = common::run(&spec, seed);
    assert_eq!(result.violated(), vec![]);
    assert!(!result.boundary.reached);
    assert!(result.boundary.reason.contains("FAILED"), "{}", result.boundary.reason);
}

#[test]
fn the_failover_gate_rebuilds_and_a_version_guard_alone_keeps_a_deleted_claim() {
    assert_eq!(violated("claims-failover", &[]), vec![]);
    assert_eq!(violated("claims-failover", &["sink.apply=version-guard"]), vec![I2]);
}

#[test]
fn the_restart_test_outcome_follows_the_sink_rule_on_every_seed() {
    let (guard, _) = common::load("claims-restart-during-snapshot", &[]);
    let (epoch, _) = common::load("claims-restart-during-snapshot", &["sink.apply=snapshot-epoch"]);
    for seed in 1..=40 {
        assert_eq!(common::run(&guard, seed).violated(), vec![I2], "seed {seed}");
        assert_eq!(common::run(&epoch, seed).violated(), vec![], "seed {seed}");
    }
}

/// Issue 16 item 5: after a clean PostgreSQL 17 failover, a restart resumes from a position the
/// connector read on the new timeline, past the switch point: a valid resume point (PostgreSQL
/// reads it from the new timeline's WAL), not an unavailable one.
#[test]
fn i8_a_restart_after_a_clean_pg17_failover_resumes_on_the_new_timeline() {
    use handoff_models::core::ids::Node;
    use handoff_models::core::observe::Observation;
    let (spec, seed) = common::load("claims-failover-pg17-synchronized-restart", &[]);
    let result = common::run(&spec, seed);
    assert_eq!(result.violated(), vec![], "{:?}", result.findings);
    // The run must really test the rule: a stream on the promoted server that asked for a
    // position past the switch point.
    let switch = result
        .trace
        .iter()
        .find_map(|event| match &event.observation {
            Observation::Promoted { switch_lsn, .. } => Some(*switch_lsn),
            _ => None,
        })
        .expect("a promotion");
    let past_switch = result.trace.iter().any(|event| {
        matches!(&event.observation,
            Observation::StreamStarted { server: Node::Pg2, client: Node::Connect, requested, .. } if *requested > switch)
    });
    assert!(past_switch, "no restart asked for a position past the switch point {switch}");
    // A position read on the old timeline past the switch point is still unavailable: without
    // synchronized_standby_slots, and with offsets flushed every second, the connector stores a
    // position of the old primary's lost tail, and a gate-less resume from it is the I8 finding.
    let sets = ["failover.gate=off", r#"connect."offset.flush.interval.ms"=1000"#];
    let i8 = finding_about("claims-failover-pg17-unsynchronized", &sets, I8);
    assert!(i8.detail.contains("read on timeline 1"), "{i8}");
}

/// Issue 16 item 6: the driver's keep-alive confirmations move the slot far past the stored
/// offset over no captured change: no I5. The cost shows at a restart, as Debezium's start-up
/// check failing the task under `snapshot.mode=initial` (honestly: no I6, no I11), not as I5.
#[test]
fn i5_keepalive_confirmations_past_the_stored_offset_put_nothing_at_risk() {
    use handoff_models::core::observe::Observation;
    let (spec, seed) = common::load("claims-quiet-database-keepalive-fix", &[]);
    let result = common::run(&spec, seed);
    assert_eq!(result.violated(), vec![], "{:?}", result.findings);
    // The run must really confirm past the stored offset.
    let mut stored = None;
    let mut past = 0;
    for event in &result.trace {
        match &event.observation {
            Observation::SourceOffsetStored { offset, .. } => stored = offset.and_then(|o| o.lsn_to_confirm()),
            Observation::SlotConfirmed { to, .. } if stored.is_some_and(|stored| *to > stored) => past += 1,
            _ => {}
        }
    }
    assert!(past >= 10, "only {past} confirmation(s) past the stored offset");

    let (spec, seed) = common::load("claims-quiet-database-keepalive-fix-restart", &[]);
    let result = common::run(&spec, seed);
    assert_eq!(result.violated(), vec![], "{:?}", result.findings);
    assert!(!result.boundary.reached);
    assert!(result.boundary.reason.contains("no longer available"), "{}", result.boundary.reason);
}

/// DBZ-7533 / pgjdbc#3138 (reference debezium-postgres.md §9 row 10): Debezium before 3.2 leaves
/// the driver's automatic flush at its default, so a 42.7.0-42.7.5 driver on the classpath
/// confirms keep-alives under the default `lsn.flush.mode=connector` as `connector_and_driver`
/// does (the walsender sends them to it); the 42.6.1 driver 3.1 ships does not.
#[test]
fn a_42_7_driver_under_debezium_3_1_confirms_keepalives() {
    use handoff_models::core::observe::Observation;
    let confirmations = |pgjdbc: &str| {
        let sets = [
            "connector.\"lsn.flush.mode\"=connector".to_owned(),
            "versions.debezium=\"3.1\"".to_owned(),
            format!("versions.pgjdbc=\"{pgjdbc}\""),
        ];
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let (spec, seed) = common::load("claims-quiet-database-keepalive-fix", &sets);
        let result = common::run(&spec, seed);
        let count = result
            .trace
            .iter()
            .filter(|event| matches!(event.observation, Observation::KeepaliveConfirmed { .. }))
            .count();
        (count, result.violated())
    };
    let (count, violated) = confirmations("42.7.3");
    assert!(count >= 5, "a 42.7.3 driver confirms the keep-alives after each burst: {count}");
    assert_eq!(violated, vec![], "as with connector_and_driver: the slot follows the WAL over no captured change");
    // Without the driver's confirmations the quiet slot falls behind the WAL bursts, as the
    // scenario's keep-alive fix is there to prevent (what that costs is the scenario's story).
    assert_eq!(confirmations("42.6.1").0, 0, "the shipped 42.6.1 driver never confirms a keep-alive");
}

/// Row 10 with a restart: a 42.7.3 driver under Debezium 3.1, or under 1.9 (before the locator
/// fixes of 2.0), confirms the keep-alives of the other database's WAL; the slot's restart_lsn
/// follows past the stored lsn_proc, and the restarted task's log-position check fails it under
/// `snapshot.mode=initial`: closed and honest (no I1, no I6, no I11). 1.9 shows only DBZ-7816's
/// I5, its own bug. From 3.2 (with the 42.7.6 driver it needs) the driver confirms nothing and
/// the check passes.
#[test]
fn a_42_7_driver_before_3_2_makes_a_restart_fail_closed_and_loses_nothing() {
    let restarted = |debezium: &str| {
        let pgjdbc = if debezium == "3.2" { "42.7.6" } else { "42.7.3" };
        let sets = [
            "connector.\"lsn.flush.mode\"=connector".to_owned(),
            format!("versions.debezium=\"{debezium}\""),
            format!("versions.pgjdbc=\"{pgjdbc}\""),
        ];
        let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
        let (spec, seed) = common::load("claims-quiet-database-keepalive-fix-restart", &sets);
        common::run(&spec, seed)
    };
    for (debezium, violated) in [("3.1", vec![]), ("1.9", vec![I5])] {
        let result = restarted(debezium);
        assert_eq!(result.violated(), violated, "{debezium}: {:?}", result.findings);
        assert!(!result.boundary.reached, "{debezium}");
        assert!(result.boundary.reason.contains("no longer available"), "{debezium}: {}", result.boundary.reason);
    }
    let result = restarted("3.2");
    assert!(!result.boundary.reason.contains("no longer available"), "3.2: {}", result.boundary.reason);
}

/// I10's accounting in the handoff record: the sink reads duplicates and says what its rule made
/// of them. A restart during the snapshot takes a second snapshot that reads every row the first
/// delivered (snapshot re-reads, absorbed by the version guard, and by a naive sink too: the same
/// row written again); the zoo's naive sink applies a replayed change over a newer version (not
/// absorbed); a run with no restart reads no duplicate.
#[test]
fn the_handoff_record_counts_the_duplicates_the_sink_read() {
    let record = |name: &str, sets: &[&str]| {
        let (spec, seed) = common::load(name, sets);
        common::run(&spec, seed).record.expect("a record").duplicates
    };
    let resnapshot = record("claims-restart-during-snapshot", &[]);
    assert!(resnapshot.snapshot_rereads > 100, "{resnapshot:?}");
    assert_eq!(resnapshot.delivered, resnapshot.snapshot_rereads + resnapshot.replayed_changes);
    assert_eq!(resnapshot.absorbed, resnapshot.delivered, "the version guard absorbs them all");
    assert_eq!(resnapshot.per_key.iter().map(|key| key.delivered).sum::<usize>(), resnapshot.delivered);
    let naive = record("claims-restart-during-snapshot", &["sink.apply=naive-upsert"]);
    assert_eq!(naive.absorbed, naive.delivered, "the same rows written again change nothing");
    let (spec, seed) =
        common::load_path(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/zoo/naive-sink.toml"));
    let applied_again = common::run(&spec, seed).record.expect("a record").duplicates;
    assert_eq!((applied_again.delivered, applied_again.absorbed), (1, 0), "{applied_again:?}");
    assert!(applied_again.sentence().contains("APPLIED AGAIN over what the sink held (key(s) 1)"));
    let quiet = record("claims-quiet-database", &[]);
    assert_eq!(quiet, handoff_models::judge::record::Duplicates::default());
    assert_eq!(quiet.sentence(), "none delivered");
}
