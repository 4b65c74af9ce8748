//! Incremental snapshots (reference debezium-postgres.md §6): the game-day backfill's chunks,
//! windows and topics, the signal table out of the publication, the window rule, and a restart
//! mid-backfill, each asserted from what the run did (the records in Kafka, the handoff record).
#![cfg(madsim)]

mod common;

use handoff_models::core::event::{SnapshotMarker, Topic};
use handoff_models::core::ids::TableId;
use handoff_models::core::observe::Observation;
use handoff_sim::timed::runner::RunResult;

const HUBS: TableId = TableId(1);
const SIGNALS: TableId = TableId(2);

fn run(name: &str, sets: &[&str]) -> RunResult {
    let (spec, seed) = common::load(name, sets);
    common::run(&spec, seed)
}

/// The records appended to a table's change topic: (op code, key, source.snapshot).
fn appended(result: &RunResult, table: TableId) -> Vec<(char, i64, Option<SnapshotMarker>)> {
    let mut records = Vec::new();
    for event in &result.trace {
        let Observation::Appended { records: appended, .. } = &event.observation else { continue };
        for record in appended.iter().filter(|record| record.tp.topic == Topic::Change(table)) {
            records.push(match record.value {
                Some(value) => (value.op.code(), record.key, Some(value.source.snapshot)),
                None => ('-', record.key, None),
            });
        }
    }
    records
}

#[test]
fn the_game_day_backfill_reads_three_chunks_in_four_windows() {
    let result = run("hubs-backfill", &[]);
    assert!(result.prediction_held, "{:?}", result.findings);
    let record = result.record.as_ref().expect("a record");
    let [backfill] = record.backfills.as_slice() else { panic!("one backfill: {:?}", record.backfills) };
    assert_eq!(backfill.table, "public.hubs");
    assert_eq!((backfill.chunks, backfill.windows, backfill.rows_read), (3, 4, 40));
    assert_eq!((backfill.rows_deduplicated, backfill.records_published, backfill.duplicates_delivered), (0, 40, 0));
    assert_eq!(backfill.status.as_deref(), Some("SUCCEEDED"));
    // 40 op=r records of public.hubs, keys 1 to 40 in chunk order, each `incremental`.
    let hubs = appended(&result, HUBS);
    assert_eq!(hubs.iter().map(|(_, key, _)| *key).collect::<Vec<_>>(), (1..=40).collect::<Vec<_>>());
    assert!(hubs.iter().all(|(op, _, snapshot)| *op == 'r' && *snapshot == Some(SnapshotMarker::Incremental)));
    // The signal topic: the signal's own insert, then 4 open and 4 close watermark inserts.
    let signals = appended(&result, SIGNALS);
    assert_eq!(signals.len(), 9, "{signals:?}");
    assert!(signals.iter().all(|(op, _, _)| *op == 'c'));
    assert_eq!(signals[0].1, 1, "the signal row's record comes first");
    // Each window opens on its own chunk's watermark: four opened, four closed.
    let opened = result.trace.iter().filter(|e| matches!(e.observation, Observation::WindowOpened { .. })).count();
    assert_eq!(opened, 4);
    assert!(result.coverage.contains(&handoff_models::judge::coverage::Mark::WindowClosed));
}

#[test]
fn the_insert_delete_strategy_closes_windows_by_deleting_the_open_row() {
    let result = run("hubs-backfill", &["connector.\"incremental.snapshot.watermarking.strategy\"=insert_delete"]);
    assert!(result.prediction_held, "{:?}", result.findings);
    let signals = appended(&result, SIGNALS);
    let ops: String = signals.iter().map(|(op, _, _)| *op).collect();
    assert_eq!(ops, "ccd-cd-cd-cd-", "the signal, then each window's open insert and its delete with a tombstone");
    assert_eq!(appended(&result, HUBS).len(), 40);
}

#[test]
fn a_signal_table_outside_the_publication_is_never_read() {
    let result = run("hubs-backfill-signal-not-published", &[]);
    assert!(result.prediction_held, "{:?}", result.findings);
    assert!(appended(&result, HUBS).is_empty() && appended(&result, SIGNALS).is_empty());
    assert!(!result.trace.iter().any(|e| matches!(e.observation, Observation::SignalExecuted { .. })));
    let record = result.record.as_ref().expect("a record");
    assert!(record.backfills.is_empty());
    assert_eq!(record.signals_not_read.len(), 1);
    assert!(record.signals_not_read[0].contains("not in publication dbz_publication"), "{:?}", record.signals_not_read);
    // Every hub is missing from the index, and named with its table.
    let missing: Vec<_> = result.findings.iter().filter(|f| f.to_string().contains("of public.hubs")).collect();
    assert_eq!(missing.len(), 40);
}

#[test]
fn changes_inside_a_window_drop_their_rows_from_the_chunk() {
    let result = run("hubs-backfill-changes-in-window", &[]);
    assert!(result.prediction_held, "{:?}", result.findings);
    let hubs = appended(&result, HUBS);
    let reads: Vec<i64> = hubs.iter().filter(|(op, _, _)| *op == 'r').map(|(_, key, _)| *key).collect();
    assert_eq!(reads.len(), 38);
    assert!(!reads.contains(&20) && !reads.contains(&25), "rows changed inside the window are not read");
    assert!(hubs.contains(&('u', 20, Some(SnapshotMarker::Streamed))));
    assert!(hubs.contains(&('d', 25, Some(SnapshotMarker::Streamed))));
    let backfill = &result.record.as_ref().expect("a record").backfills[0];
    assert_eq!(backfill.rows_deduplicated, 2);
    assert!(result.coverage.contains(&handoff_models::judge::coverage::Mark::WindowDeduplicated));
}

#[test]
fn a_restart_mid_backfill_reads_again_after_the_stored_key_with_no_gap() {
    let result = run("hubs-backfill-restart", &[]);
    assert!(result.prediction_held, "{:?}", result.findings);
    let resumed: Vec<Option<i64>> = result
        .trace
        .iter()
        .filter_map(|e| match e.observation {
            Observation::IncrementalSnapshotResumed { after, .. } => Some(after),
            _ => None,
        })
        .collect();
    assert_eq!(resumed, [Some(512)]);
    let ignored = result.trace.iter().filter(|e| matches!(e.observation, Observation::WatermarkIgnored { .. })).count();
    assert!(ignored > 0, "the earlier start's watermarks are ignored");
    let backfill = &result.record.as_ref().expect("a record").backfills[0];
    assert_eq!(backfill.resumed, 1);
    assert_eq!(backfill.duplicates_delivered, 224, "hubs 513 to 736 again");
    // Every hub reached Kafka at least once.
    let mut keys: Vec<i64> = appended(&result, HUBS).iter().map(|(_, key, _)| *key).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys, (1..=2000).collect::<Vec<_>>());
}

/// The loader refuses what the model does not do yet, naming it.
#[test]
fn signals_the_model_does_not_run_yet_are_refused_by_name() {
    let path = common::scenario_path("hubs-backfill");
    let text = std::fs::read_to_string(&path).expect("the file");
    for (from, to, expected) in [
        ("\"type\": \"incremental\"", "\"type\": \"blocking\"", "type `blocking` is not modelled yet"),
        ("signal = \"execute-snapshot\"", "signal = \"stop-snapshot\"", "`stop-snapshot` is not modelled yet"),
        ("[\"public.hubs\"]", "[\"public.nothing\"]", "matches no table the connector captures"),
        ("\"type\": \"incremental\"", "\"surrogate-key\": \"id\"", "`surrogate-key` is not modelled yet"),
        (
            "\"incremental.snapshot.chunk.size\" = 16",
            "\"signal.enabled.channels\" = \"source,kafka\"",
            "kafka channel is not modelled yet",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let changed = text.replacen(from, to, 1);
        let error = handoff_sim::scenario::load_str("changed.toml", &changed, &[]).expect_err(to).to_string();
        assert!(error.contains(expected), "{to}: {error}");
    }
    let plain_insert = text.replace(
        "[prediction]",
        "[[workload.script]]\nat = \"30s\"\ninsert = 7\ntable = \"public.debezium_signal\"\n\n[prediction]",
    );
    let error =
        handoff_sim::scenario::load_str("plain.toml", &plain_insert, &[]).expect_err("plain insert").to_string();
    assert!(error.contains("write a signal with a `signal` step"), "{error}");
}
