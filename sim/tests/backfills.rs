//! Incremental snapshots (reference debezium-postgres.md §6): the game-day backfill's chunks,
//! windows and topics, the signal table out of the publication, the window rule, and a restart
//! mid-backfill, each asserted from what the run did (the records in Kafka, the handoff record).
#![cfg(madsim)]

mod common;

use handoff_models::core::event::{SnapshotMarker, Topic};
use handoff_models::core::ids::TableId;
use handoff_models::core::observe::Observation;
use handoff_models::scenario::spec::Invariant;
use handoff_sim::timed::runner::RunResult;

const CLAIMS: TableId = TableId(0);
const HUBS: TableId = TableId(1);
const SIGNALS: TableId = TableId(2);

fn run(name: &str, sets: &[&str]) -> RunResult {
    let (spec, seed) = common::load(name, sets);
    common::run(&spec, seed)
}

/// A bundled scenario's variant, run at the scenario's seed.
fn run_variant(name: &str, variant: &str) -> RunResult {
    let choice = handoff_sim::scenario::Choice { variant: Some(variant.into()), ..Default::default() };
    let loaded = handoff_sim::scenario::load_with(&common::scenario_path(name), &choice)
        .unwrap_or_else(|error| panic!("{error}"));
    common::run(&loaded.spec, loaded.seed)
}

/// The bundled scenario `name`'s text with its first `from` (which it must hold) replaced by `to`.
fn edited(name: &str, from: &str, to: &str) -> String {
    let text = std::fs::read_to_string(common::scenario_path(name)).expect("the file");
    assert!(text.contains(from));
    text.replacen(from, to, 1)
}

/// What `pick` takes from each trace event, in trace order.
fn observed<T>(result: &RunResult, pick: impl Fn(&Observation) -> Option<T>) -> Vec<T> {
    result.trace.iter().filter_map(|event| pick(&event.observation)).collect()
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
    let resumed = observed(&result, |o| match o {
        Observation::IncrementalSnapshotResumed { after, .. } => Some(*after),
        _ => None,
    });
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

/// The hubs keys that reached Kafka, each once, in order.
/// The keys of the `op=r` records on the hubs topic, in the order they were appended.
fn hub_reads(result: &RunResult) -> Vec<i64> {
    appended(result, HUBS).iter().filter(|(op, ..)| *op == 'r').map(|(_, key, _)| *key).collect()
}

fn hubs_in_kafka(result: &RunResult) -> Vec<i64> {
    let mut keys: Vec<i64> = appended(result, HUBS).iter().map(|(_, key, _)| *key).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// `stop-snapshot` (reference debezium-postgres.md §6.3): the request waits for the next
/// `readChunk`, so the window it arrived in is still emitted, and the rows after it never are.
#[test]
fn a_stop_takes_effect_after_the_current_window_and_the_rest_is_never_read() {
    let result = run("hubs-backfill-stop", &[]);
    assert!(result.prediction_held, "{:?}", result.findings);
    assert_eq!(hubs_in_kafka(&result), (1..=32).collect::<Vec<_>>());
    let missing: Vec<i64> =
        result.findings.iter().filter(|f| f.invariant == Invariant::I1).filter_map(|f| f.key).collect();
    assert_eq!(missing, (33..=40).collect::<Vec<_>>());
    // The stop was read inside window 2, and processed once that window closed.
    let order = observed(&result, |o| match o {
        Observation::SignalExecuted { signal_type, .. } if signal_type == "stop-snapshot" => Some("stop read"),
        Observation::WindowClosed { emitted, .. } if *emitted > 0 => Some("window emitted"),
        Observation::IncrementalSnapshotStopped { running: true, current: true, .. } => Some("stopped"),
        _ => None,
    });
    assert_eq!(order, ["window emitted", "stop read", "window emitted", "stopped"]);
    let backfill = &result.record.as_ref().expect("a record").backfills[0];
    assert_eq!((backfill.status.as_deref(), backfill.chunks, backfill.rows_read), (Some("STOPPED"), 2, 32));
}

/// A stop sent while no snapshot runs waits in the context and stops the next one before it
/// reads anything.
#[test]
fn a_stop_with_no_snapshot_running_stops_the_next_one() {
    let result = run_variant("hubs-backfill-stop", "stop-before-signal");
    assert!(result.prediction_held, "{:?}", result.findings);
    assert!(hubs_in_kafka(&result).is_empty());
    assert!(!result.trace.iter().any(|e| matches!(e.observation, Observation::ChunkRead { .. })));
    assert_eq!(result.findings.iter().filter(|f| f.invariant == Invariant::I1).count(), 40);
}

/// `pause-snapshot` is an in-memory flag: `readChunk` obeys it, a task restart forgets it, and
/// a `resume-snapshot` with nothing paused does nothing.
#[test]
fn a_pause_holds_until_a_restart_forgets_it() {
    let result = run("hubs-backfill-pause", &[]);
    assert!(result.prediction_held, "{:?}", result.findings);
    let paused_after = observed(&result, |o| match o {
        Observation::IncrementalSnapshotPaused { after, .. } => Some(*after),
        _ => None,
    });
    assert_eq!(paused_after, [Some(32)]);
    let resumed = observed(&result, |o| match o {
        Observation::IncrementalSnapshotResumed { after, .. } => Some(*after),
        _ => None,
    });
    assert_eq!(resumed, [Some(32)], "init reads after the stored key although the snapshot was paused");
    let resume_outcome = result.trace.iter().find_map(|e| match &e.observation {
        Observation::SignalExecuted { signal_type, outcome, .. } if signal_type == "resume-snapshot" => Some(outcome),
        _ => None,
    });
    assert!(resume_outcome.is_some_and(|outcome| outcome.contains("no incremental snapshot runs")));
    assert_eq!(hubs_in_kafka(&result), (1..=40).collect::<Vec<_>>());
    let backfill = &result.record.as_ref().expect("a record").backfills[0];
    assert_eq!((backfill.pauses, backfill.pauses_undone_by_restart, backfill.duplicates_delivered), (1, 1, 0));
    assert!(backfill.sentence().contains("1 undone by a restart"), "{}", backfill.sentence());
}

/// Without a restart, a pause lasts until `resume-snapshot`, which reads the next chunk at once.
#[test]
fn resume_snapshot_reads_the_next_chunk_at_once() {
    let result = run("hubs-backfill-pause", &["fault=[]"]);
    let chunks: Vec<(f64, Option<i64>)> = result
        .trace
        .iter()
        .filter_map(|e| match e.observation {
            Observation::ChunkRead { after, .. } => Some((e.at.0 as f64 / 1000.0, after)),
            _ => None,
        })
        .collect();
    let after: Vec<Option<i64>> = chunks.iter().map(|(_, after)| *after).collect();
    assert_eq!(after, [None, Some(16), Some(32), Some(40)]);
    assert!(chunks[1].0 < 21.0 && chunks[2].0 >= 70.0, "nothing read between the pause and t=70s: {chunks:?}");
    assert!(result.findings.is_empty(), "{:?}", result.findings);
    let backfill = &result.record.as_ref().expect("a record").backfills[0];
    assert_eq!((backfill.pauses, backfill.pauses_undone_by_restart, backfill.paused), (1, 0, false));
}

/// `additional-conditions` (reference debezium-postgres.md §6.4): the filter narrows the
/// maximum-key and chunk queries, and the offsets keep it with the collection, so the task that
/// resumes a filtered backfill after a kill reads on with the same filter.
#[test]
fn a_filtered_backfill_keeps_its_filter_across_a_restart() {
    let filtered = edited(
        "hubs-backfill-restart",
        "data = '{\"data-collections\": [\"public.hubs\"], \"type\": \"incremental\"}'",
        "data = '{\"data-collections\": [\"public.hubs\"], \"additional-conditions\": [{\"data-collection\": \
         \"public.h.*\", \"filter\": \"id > 1000\"}]}'",
    );
    let loaded = handoff_sim::scenario::load_str("filtered.toml", &filtered, &[]).expect("a scenario");
    let result = common::run(&loaded.spec, loaded.seed);
    let resumed =
        result.trace.iter().position(|e| matches!(e.observation, Observation::IncrementalSnapshotResumed { .. }));
    let resumed = resumed.expect("the kill at window 60 comes mid-backfill (63 chunks of 16)");
    let after_restart = result.trace[resumed..].iter().find_map(|e| match &e.observation {
        Observation::ChunkRead { after, filter, .. } => Some((*after, filter.0)),
        _ => None,
    });
    let (after, filter) = after_restart.expect("a chunk after the restart");
    assert!(after.is_some_and(|key| key > 1000), "{after:?}");
    assert_eq!(filter.map(|f| f.to_string()).as_deref(), Some("id > 1000"), "the stored offset kept the filter");
    assert_eq!(hubs_in_kafka(&result), (1001..=2000).collect::<Vec<_>>());
    let missing = result.findings.iter().filter(|f| f.invariant == Invariant::I1).count();
    assert_eq!(missing, 1000, "hubs 1-1000: the filter left them out");
}

/// The loader refuses what the model does not do yet, naming it.
#[test]
fn signals_the_model_does_not_run_yet_are_refused_by_name() {
    let path = common::scenario_path("hubs-backfill");
    let text = std::fs::read_to_string(&path).expect("the file");
    for (from, to, expected) in [
        (
            "\"type\": \"incremental\"",
            "\"type\": \"blocking\", \"additional-conditions\": [{\"data-collection\": \"public.hubs\", \"filter\": \"id > 1\"}]",
            "SELECT * FROM <table> [WHERE <filter>] [ORDER BY id]",
        ),
        (
            "\"type\": \"incremental\"",
            "\"type\": \"blocking\", \"additional-conditions\": [{\"data-collection\": \"public.hubs\", \"filter\": \"SELECT failing query\"}]",
            "to make PostgreSQL refuse it, compare a column the table lacks",
        ),
        (
            "\"type\": \"incremental\"",
            "\"type\": \"blocking\", \"additional-conditions\": [{\"data-collection\": \"public.hubs\", \"filter\": \"SELECT * FROM public.hubs ORDER BY id DESC\"}]",
            "ORDER BY id DESC is not modelled",
        ),
        (
            "\"type\": \"incremental\"",
            "\"type\": \"blocking\", \"additional-conditions\": [{\"data-collection\": \"public.hubs\", \"filter\": \"SELECT * FROM public.claims WHERE id > 3\"}]",
            "reads FROM public.claims",
        ),
        (
            "\"type\": \"incremental\"",
            "\"type\": \"blocking\", \"additional-conditions\": [{\"data-collection\": \"public.hubs\", \"filter\": \"select * from public.hubs where id > ten\"}]",
            "its WHERE `id > ten`: id is compared with an integer",
        ),
        ("signal = \"execute-snapshot\"", "signal = \"schema-changes\"", "`schema-changes` is not modelled yet"),
        (
            "signal = \"execute-snapshot\"",
            "signal = \"pause-snapshot\"",
            "`data-collections` is no key of pause-snapshot's data",
        ),
        ("signal = \"execute-snapshot\"", "signal = \"log\"", "`data-collections` is no key of log's data"),
        ("[\"public.hubs\"]", "[\"public.nothing\"]", "matches no table the connector captures"),
        ("\"type\": \"incremental\"", "\"surrogate-key\": \"status\"", "chunking by a text column is not modelled"),
        (
            "\"type\": \"incremental\"",
            "\"type\": \"blocking\", \"surrogate-key\": \"version\"",
            "surrogate-key has no effect on a blocking snapshot",
        ),
        ("\"type\": \"incremental\"", "\"surrogate-key\": 3", "surrogate-key must be one column name"),
        (
            "\"type\": \"incremental\"",
            "\"additional-conditions\": [{\"data-collection\": \"public.claims\", \"filter\": \"id > 1\"}]",
            "matches none of the signal's data-collections",
        ),
        (
            "\"type\": \"incremental\"",
            "\"additional-conditions\": [{\"data-collection\": \"public.hubs\", \"filter\": \"3 > region\"}]",
            "is no comparison the model reads",
        ),
        ("\"type\": \"incremental\"", "\"additional-condition\": \"id > 1\"", "Debezium removed in 2.x"),
        (
            "\"incremental.snapshot.chunk.size\" = 16",
            "\"signal.enabled.channels\" = \"source,file\"",
            "file channel is not modelled yet",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let changed = text.replacen(from, to, 1);
        let error = handoff_sim::scenario::load_str("changed.toml", &changed, &[]).expect_err(to).to_string();
        assert!(error.contains(expected), "{to}: {error}");
    }
    let old_release = text.replacen("\"type\": \"incremental\"", "\"type\": \"blocking\"", 1).replacen(
        "[postgres]",
        "[versions]\ndebezium = \"2.3\"\n\n[postgres]",
        1,
    );
    let error = handoff_sim::scenario::load_str("old.toml", &old_release, &[]).expect_err("2.3").to_string();
    assert!(error.contains("blocking snapshots exist from Debezium 2.4"), "{error}");
    let plain_insert = text.replace(
        "[prediction]",
        "[[workload.script]]\nat = \"30s\"\ninsert = 7\ntable = \"public.debezium_signal\"\n\n[prediction]",
    );
    let error =
        handoff_sim::scenario::load_str("plain.toml", &plain_insert, &[]).expect_err("plain insert").to_string();
    assert!(error.contains("write a signal with a `signal` step"), "{error}");
}

/// The commit-visibility race (reference debezium-postgres.md §6.2): `handoff check` explores the
/// bound completely and finds the resurrection (I2) and the stale read (I4); the shortest path is
/// the scenario's `[schedule]`, and the timed lens following it sees the chunk query miss the
/// delete (in the WAL before the open watermark, not yet visible) and emit hub 2 after its delete.
#[test]
fn the_visibility_race_resurrects_a_row_the_window_should_have_dropped() {
    use handoff_sim::exhaustive::check::{self, Outcome};
    let (spec, seed) = common::load("hubs-backfill-visibility-race", &[]);
    let report = check::check(&spec, "hubs-backfill-visibility-race", common::WHOLE_BOUND).expect("a bound");
    assert!(report.complete, "the bound is explored completely");
    assert_eq!((report.states, report.unique_states), VISIBILITY_RACE_BOUND, "the bound's size");
    assert!(report.as_expected(), "{}", check::text(&report));
    let schedule = spec.schedule.as_ref().expect("the race's path");
    for invariant in [Invariant::I2, Invariant::I4] {
        let found = report.properties.iter().find(|p| p.invariant == Some(invariant)).expect("checked");
        assert_eq!(found.outcome, Outcome::Counterexample, "{invariant}");
        assert_eq!(
            found.path, schedule.steps,
            "{invariant}: the shortest path changed; its story now:\n{}",
            found.story
        );
    }
    let result = common::run(&spec, seed);
    assert!(result.departures.is_empty(), "{:?}", result.departures);
    assert!(result.prediction_held, "{:?}", result.violated());
    // The delete of hub 2 (table 0 here) commits before the open watermark and is missed by the
    // maximum-key query and the chunk query both; the chunk reads 2 rows and emits both.
    let hubs = TableId(0);
    let missed = result
        .trace
        .iter()
        .filter(
            |event| matches!(event.observation, Observation::ReadMissedCommit { table, key: 2, .. } if table == hubs),
        )
        .count();
    assert_eq!(missed, 2, "the maximum-key query and the chunk query miss the delete");
    let records = appended(&result, hubs);
    let delete = records.iter().position(|record| record.0 == 'd' && record.1 == 2).expect("hub 2's delete streamed");
    let read = records.iter().position(|record| record.0 == 'r' && record.1 == 2).expect("hub 2 read by the chunk");
    assert!(delete < read, "the stale read follows the delete in Kafka: {records:?}");
    assert!(result.coverage.contains(&handoff_models::judge::coverage::Mark::ReadMissedCommit));
}

/// The race's twin: the same path on a server whose commits are visible with their commit record
/// (`commit_visibility = "with-commit-record"`) reads no deleted row, and the bound holds every
/// invariant: the window rule is sound when commit order is visibility order. (With one Connect
/// crash more, the issue's bound, 21.8 million unique states, is the release command in the
/// scenario's header.)
#[test]
fn the_window_rule_holds_when_commits_are_visible_with_their_record() {
    use handoff_sim::exhaustive::check::{self, Outcome};
    let (spec, seed) = common::load("hubs-backfill-window-rule", &[]);
    let result = common::run(&spec, seed);
    assert!(result.departures.is_empty(), "{:?}", result.departures);
    assert!(result.prediction_held, "{:?}", result.violated());
    let hubs = TableId(0);
    assert!(!result.trace.iter().any(|event| matches!(event.observation, Observation::ReadMissedCommit { .. })));
    let reads: Vec<i64> =
        appended(&result, hubs).iter().filter(|record| record.0 == 'r').map(|record| record.1).collect();
    assert_eq!(reads, [1], "the chunk query sees the delete: only hub 1 is read");
    let report = check::check(&spec, "hubs-backfill-window-rule", common::WHOLE_BOUND).expect("a bound");
    assert!(report.complete, "the bound is explored completely");
    assert_eq!((report.states, report.unique_states), WINDOW_RULE_BOUND, "the bound's size");
    assert!(report.properties.iter().all(|p| p.outcome != Outcome::Counterexample), "{}", check::text(&report));
    assert!(report.as_expected(), "{}", check::text(&report));
}

/// (generated, unique) states of the two bounds, breadth first.
const VISIBILITY_RACE_BOUND: (usize, usize) = (184_069, 62_498);
const WINDOW_RULE_BOUND: (usize, usize) = (1_802_317, 609_408);

/// A bound's signals follow the workload's in their table's numbering (a row's key is its place
/// in the connector's list of signals), the signal table loads no rows in a bound, a plain write
/// to it is refused there as in a workload, and `commit_visibility` names its choices.
#[test]
fn a_bound_signals_after_the_workload_and_names_its_commit_visibility() {
    use handoff_models::core::change::RowOp;
    let path = common::scenario_path("hubs-backfill-visibility-race");
    let text = std::fs::read_to_string(&path).expect("the file");
    let schedule = text.find("\n[schedule]\n").expect("a schedule");
    let bound_only = &text[..schedule];
    let with_workload = bound_only.replace(
        "[prediction]",
        "[workload]\nstart_ms = 0\nend_ms = 10000\n\n[[workload.script]]\nat = \"5s\"\nsignal = \"execute-snapshot\"\n\
         id = \"first\"\ndata = '{\"data-collections\": [\"public.hubs\"]}'\n\n[prediction]",
    );
    let spec = handoff_sim::scenario::load_str("both.toml", &with_workload, &[]).expect("loads").spec;
    let signals = &spec.debezium.signalling.as_ref().expect("signalling").signals;
    let ids: Vec<&str> = signals.iter().map(|signal| signal.id.as_str()).collect();
    assert_eq!(ids, ["first", "backfill-hubs"]);
    let signal_table = spec.debezium.signal_table().expect("a signal table");
    let insert_key = |ops: &[RowOp]| match ops {
        [RowOp::Insert { table, key, .. }] if *table == signal_table => Some(*key),
        _ => None,
    };
    assert_eq!(spec.scripted.iter().filter_map(|txn| insert_key(&txn.ops)).collect::<Vec<_>>(), [1]);
    let check = spec.check.as_ref().expect("a bound");
    assert_eq!(check.scripts.iter().filter_map(|txn| insert_key(&txn.ops)).collect::<Vec<_>>(), [2]);
    let (world, _) = handoff_sim::exhaustive::check::bound(&spec).expect("a bound");
    assert_eq!(world.tables[usize::from(signal_table.0)].rows, 0, "the signal table loads no rows");
    assert_eq!(world.tables[0].rows, 2);

    let plain = bound_only.replace(
        "[[check.script]]\nsignal = \"execute-snapshot\"",
        "[[check.script]]\ninsert = 9\ntable = \"public.debezium_signal\"\n\n[[check.script]]\nsignal = \"execute-snapshot\"",
    );
    let error = handoff_sim::scenario::load_str("plain.toml", &plain, &[]).expect_err("plain insert").to_string();
    assert!(error.contains("write a signal with a `signal` step"), "{error}");
    let atomic = bound_only.replace("[check]\n", "[check]\ncommit_visibility = \"atomic\"\n");
    let error = handoff_sim::scenario::load_str("atomic.toml", &atomic, &[]).expect_err("no such choice").to_string();
    assert!(error.contains("commit_visibility") && error.contains("with-commit-record"), "{error}");
}

/// A blocking snapshot (reference debezium-postgres.md §6.6): the signal's own record first,
/// then the table read while the stream waits, then the stream from where it paused — with
/// the change committed after the signal published again after the rows read.
#[test]
fn a_blocking_snapshot_pauses_the_stream_and_replays_what_followed_the_signal() {
    let result = run("hubs-backfill-blocking", &[]);
    assert!(result.prediction_held, "{:?}", result.findings);
    let hubs = appended(&result, HUBS);
    let reads: Vec<i64> = hubs.iter().filter(|(op, _, _)| *op == 'r').map(|(_, key, _)| *key).collect();
    assert_eq!(reads, (1..=40).collect::<Vec<_>>(), "in key order, every hub once");
    assert!(hubs.iter().filter(|(op, ..)| *op == 'r').all(|(_, _, marker)| *marker == Some(SnapshotMarker::Blocking)));
    // Hub 7's close, committed after the signal, is read by the snapshot and streamed after it.
    let last_read = hubs.iter().rposition(|(op, ..)| *op == 'r').expect("reads");
    let close = hubs.iter().position(|(op, key, _)| *op == 'u' && *key == 7).expect("hub 7's close streamed");
    assert!(close > last_read, "the stream resumes after the snapshot: {hubs:?}");
    // The signal's own record precedes the snapshot rows.
    let order = observed(&result, |o| match o {
        Observation::Appended { records, .. } if records.iter().any(|r| r.tp.topic == Topic::Change(SIGNALS)) => {
            Some("signal record")
        }
        Observation::Appended { records, .. } if records.iter().any(|r| r.tp.topic == Topic::Change(HUBS)) => {
            Some("hubs")
        }
        _ => None,
    });
    assert_eq!(order.first(), Some(&"signal record"), "{order:?}");
    let record = result.record.as_ref().expect("a record");
    let blocking = &record.blocking_snapshots[0];
    assert_eq!((blocking.status.as_deref(), blocking.records_published), (Some("COMPLETED"), 40));
    assert!(record.backfills.is_empty(), "no incremental snapshot ran");
}

/// A worker killed in the middle of a blocking snapshot: nothing resumes it, the rows it had
/// not emitted are never read.
#[test]
fn a_blocking_snapshot_interrupted_by_a_crash_is_not_resumed() {
    let result = run_variant("hubs-backfill-blocking", "worker-killed");
    assert!(result.prediction_held, "{:?}", result.findings);
    assert_eq!(
        observed(&result, |o| matches!(o, Observation::BlockingSnapshotStarted { .. }).then_some(())).len(),
        1,
        "started once, never again"
    );
    let missing: Vec<i64> =
        result.findings.iter().filter(|f| f.invariant == Invariant::I1).filter_map(|f| f.key).collect();
    assert_eq!(missing, (20..=40).collect::<Vec<_>>());
    let blocking = &result.record.as_ref().expect("a record").blocking_snapshots[0];
    assert_eq!((blocking.status.as_deref(), blocking.records_published), (Some("INTERRUPTED"), 19));
}

/// DBZ-7903 in the timed lens: a stored offset with `snapshot=BLOCKING` makes a 2.7 start run
/// the initial snapshot again, a 3.0 start stream on.
#[test]
fn a_stored_blocking_offset_is_an_initial_snapshot_before_3_0_only() {
    for (version, rerun) in [("2.7", true), ("3.0", false)] {
        let result = run(
            "hubs-backfill-blocking",
            &[
                &format!("versions.debezium=\"{version}\""),
                // After the flush that stored a blocking row's offset (t=22.134s), before the next.
                "fault=[{at=\"22200ms\", action=\"kill-connect-worker\", restart_after_ms=5000}]",
            ],
        );
        let decisions = observed(&result, |o| match o {
            Observation::SnapshotDecided { snapshot, reason } => Some((*snapshot, reason.contains("DBZ-7903"))),
            _ => None,
        });
        assert_eq!(decisions.len(), 2, "{version}: two starts");
        assert_eq!(decisions[1], (rerun, rerun), "{version}");
        let blocking = &result.record.as_ref().expect("a record").blocking_snapshots[0];
        assert_eq!(blocking.rerun_as_initial, rerun, "{version}");
    }
}

/// `surrogate-key` (reference debezium-postgres.md §6.4): chunks ordered and bounded by a column
/// whose values repeat skip every row sharing the last value a chunk read; the backfill still
/// ends SUCCEEDED, and I4 says which rows it never read.
#[test]
fn a_repeated_surrogate_key_skips_the_rows_that_share_a_chunks_last_value() {
    let result = run("hubs-backfill-surrogate-key", &[]);
    assert!(result.prediction_held, "{:?}", result.findings);
    let backfill = &result.record.as_ref().expect("a record").backfills[0];
    assert_eq!((backfill.chunks, backfill.windows, backfill.rows_read), (1, 2, 16));
    assert_eq!(backfill.status.as_deref(), Some("SUCCEEDED"));
    assert_eq!(hubs_in_kafka(&result), (1..=16).collect::<Vec<_>>());
    let i4: Vec<_> = result.findings.iter().filter(|f| f.invariant == Invariant::I4).collect();
    assert_eq!(i4.len(), 1, "one finding for the table: {i4:?}");
    assert_eq!(i4[0].key, Some(17));
    let i1: Vec<i64> = result.findings.iter().filter(|f| f.invariant == Invariant::I1).filter_map(|f| f.key).collect();
    assert_eq!(i1, (17..=40).collect::<Vec<_>>());
    // The chunk queries bound by version: the second reads (version) > (1) AND (version) <= (1).
    let chunks = observed(&result, |o| match o {
        Observation::ChunkRead { after, last, maximum_key, order, .. } => {
            Some((*after, *last, *maximum_key, order.name()))
        }
        _ => None,
    });
    assert_eq!(chunks, [(None, Some(1), 1, "version"), (Some(1), None, 1, "version")]);
}

/// A column whose values differ reads every row, in its order; the offsets keep its value.
#[test]
fn a_unique_surrogate_key_reads_every_row_in_its_order() {
    let result = run_variant("hubs-backfill-surrogate-key", "unique-column");
    assert!(result.prediction_held, "{:?}", result.findings);
    let mut amounts = Vec::new();
    let mut keys = Vec::new();
    for event in &result.trace {
        let Observation::Appended { records, .. } = &event.observation else { continue };
        for record in records.iter().filter(|record| record.tp.topic == Topic::Change(HUBS)) {
            let row = record.value.and_then(|value| value.after).expect("a read");
            amounts.push(row.amount_cents);
            keys.push(record.key);
        }
    }
    assert_eq!(keys.len(), 40);
    keys.sort_unstable();
    assert_eq!(keys, (1..=40).collect::<Vec<_>>());
    // Kafka's partitions interleave the chunks; within a chunk the reads came in amount order,
    // and the chunks' bounds are amounts.
    let chunks = observed(&result, |o| match o {
        Observation::ChunkRead { after, last, rows, .. } => Some((*after, *last, *rows)),
        _ => None,
    });
    assert_eq!(chunks.len(), 4);
    assert_eq!(chunks[1].0, chunks[0].1, "chunk 2 starts after chunk 1's last amount");
    assert!(chunks[0].1.expect("an amount") >= 10_000, "{chunks:?}");
    assert_eq!(chunks.iter().map(|c| c.2).collect::<Vec<_>>(), [16, 16, 8, 0]);
}

/// After a restart mid-backfill, `init` reads on after the stored surrogate value: the restart
/// drill of hubs-backfill-restart (2,000 hubs) with `surrogate-key` amount_cents.
#[test]
fn a_restart_reads_on_after_the_stored_surrogate_value() {
    let text = edited(
        "hubs-backfill-restart",
        "\"type\": \"incremental\"}",
        "\"type\": \"incremental\", \"surrogate-key\": \"amount_cents\"}",
    );
    let loaded = handoff_sim::scenario::load_str("restart.toml", &text, &[]).expect("loads");
    let result = common::run(&loaded.spec, loaded.seed);
    let resumed = observed(&result, |o| match o {
        Observation::IncrementalSnapshotResumed { after, .. } => Some(*after),
        _ => None,
    });
    let [Some(after)] = resumed.as_slice() else { panic!("resumed once after a stored amount: {resumed:?}") };
    assert!(*after >= 10_000, "an amount, not a key: {after}");
    let bounds = observed(&result, |o| match o {
        Observation::ChunkRead { after, order, .. } => Some((*after, order.name())),
        _ => None,
    });
    assert!(bounds.contains(&(Some(*after), "amount_cents")), "a chunk reads after the stored amount");
    assert!(result.findings.is_empty(), "{:?}", result.findings);
    assert_eq!(hubs_in_kafka(&result), (1..=2000).collect::<Vec<_>>());
}

/// DBZ-7797: a `surrogate-key` the table lacks throws in `readChunk` after the open watermark.
/// In a signal's action the exception is caught and the snapshot is stuck; in `init` at the
/// next start it fails the task.
#[test]
fn a_missing_surrogate_key_leaves_the_snapshot_stuck_and_fails_the_next_start() {
    let result = run_variant("hubs-backfill-surrogate-key", "missing-column");
    assert!(result.prediction_held, "{:?}", result.findings);
    let missing = observed(&result, |o| match o {
        Observation::SurrogateKeyMissing { column, at_start, .. } => Some((column.clone(), *at_start)),
        _ => None,
    });
    assert_eq!(missing, [("hub_code".to_string(), false)]);
    assert!(observed(&result, |o| matches!(o, Observation::ChunkRead { .. }).then_some(())).is_empty());
    assert!(hubs_in_kafka(&result).is_empty());
    let backfill = &result.record.as_ref().expect("a record").backfills[0];
    assert!(backfill.sentence().contains("NOT finished (readChunk threw"), "{}", backfill.sentence());

    let path = common::scenario_path("hubs-backfill-surrogate-key");
    let text = std::fs::read_to_string(&path).expect("the file");
    let text = text
        .replacen(
            "\"incremental\", \"surrogate-key\": \"version\"",
            "\"incremental\", \"surrogate-key\": \"hub_code\"",
            1,
        )
        .replacen(
            "[fault_profile]",
            "[[fault]]\nat = \"45s\"\naction = \"kill-connect-worker\"\nrestart_after_ms = 5000\n\n[fault_profile]",
            1,
        );
    let text = text.replacen("max_faults = 3", "max_faults = 0", 1);
    let loaded = handoff_sim::scenario::load_str("restart.toml", &text, &[]).expect("loads");
    let result = common::run(&loaded.spec, loaded.seed);
    let missing = observed(&result, |o| match o {
        Observation::SurrogateKeyMissing { at_start, .. } => Some(*at_start),
        _ => None,
    });
    assert_eq!(missing, [false, true], "the signal's action, then init at the restart");
    let failed = observed(&result, |o| match o {
        Observation::TaskFailed { reason } => Some(reason.clone()),
        _ => None,
    });
    assert!(failed.iter().any(|reason| reason.contains("Surrogate key \"hub_code\"")), "{failed:?}");
}

/// `surrogate-key` arrived in Debezium 2.2 (DBZ-6023).
#[test]
fn surrogate_key_needs_debezium_2_2() {
    let path = common::scenario_path("hubs-backfill-surrogate-key");
    let text = std::fs::read_to_string(&path).expect("the file");
    let old = text.replacen("[postgres]", "[versions]\ndebezium = \"2.1\"\n\n[postgres]", 1);
    let error = handoff_sim::scenario::load_str("old.toml", &old, &[]).expect_err("refused").to_string();
    assert!(error.contains("exists from Debezium 2.2"), "{error}");
}

/// A blocking snapshot's `additional-conditions` is the table's SELECT statement: its WHERE
/// filters the scan, as `snapshot.select.statement.overrides` does.
#[test]
fn a_blocking_statement_filters_the_scan() {
    let result = run(
        "hubs-backfill-blocking",
        &[
            r#"workload.script=[{at="20s", signal="execute-snapshot", data="{\"data-collections\": [\"public.hubs\"], \"type\": \"blocking\", \"additional-conditions\": [{\"data-collection\": \"public.hubs\", \"filter\": \"SELECT * FROM public.hubs WHERE id > 30 ORDER BY id ASC;\"}]}"}]"#,
        ],
    );
    let reads = hub_reads(&result);
    assert_eq!(reads, (31..=40).collect::<Vec<_>>());
    let missing: Vec<i64> =
        result.findings.iter().filter(|f| f.invariant == Invariant::I1).filter_map(|f| f.key).collect();
    assert_eq!(missing, (1..=30).collect::<Vec<_>>(), "by request, as an incremental filter is");
    let blocking = &result.record.as_ref().expect("a record").blocking_snapshots[0];
    assert_eq!((blocking.status.as_deref(), blocking.records_published), (Some("COMPLETED"), 10));
}

/// DBZ-8335: the second table's statement fails; the first table's held-back last row is never
/// emitted, and nothing else carries it.
#[test]
fn a_failed_blocking_snapshot_never_emits_its_held_back_row() {
    let result = run_variant("hubs-backfill-blocking", "failing-select");
    assert!(result.prediction_held, "{:?}", result.findings);
    let reads = hub_reads(&result);
    assert_eq!(reads, (1..=39).collect::<Vec<_>>(), "every hub but the held-back last");
    let failures = observed(&result, |o| match o {
        Observation::BlockingSnapshotFailed { reason, rows, held } => Some((reason.clone(), *rows, *held)),
        _ => None,
    });
    assert_eq!(failures.len(), 1);
    assert!(failures[0].0.contains("ERROR: column \"region\" does not exist"), "{}", failures[0].0);
    assert_eq!((failures[0].1, failures[0].2), (40, Some((HUBS, 40))));
    let missing: Vec<(Invariant, Option<i64>)> = result.findings.iter().map(|f| (f.invariant, f.key)).collect();
    assert_eq!(missing, vec![(Invariant::I1, Some(40))]);
    let blocking = &result.record.as_ref().expect("a record").blocking_snapshots[0];
    assert_eq!(
        (blocking.status.as_deref(), blocking.records_published, blocking.never_emitted.as_deref()),
        (Some("FAILED"), 39, Some("public.hubs row 40"))
    );
}

/// An incremental filter PostgreSQL refuses (reference §6.3, `warnAndSkip`): the table ends
/// `SQL_EXCEPTION` with nothing read and the snapshot goes on with the next one.
#[test]
fn a_refused_filter_skips_its_table_and_the_snapshot_goes_on() {
    let result = run_variant("hubs-backfill-conditions", "sql-exception");
    assert!(result.prediction_held, "{:?}", result.findings);
    let scanned = observed(&result, |o| match o {
        Observation::IncrementalTableScanned { table, status, rows, reason } => {
            Some((*table, status.name(), *rows, reason.contains("column \"region\" does not exist")))
        }
        _ => None,
    });
    assert_eq!(scanned, vec![(HUBS, "SQL_EXCEPTION", 0, true), (CLAIMS, "SUCCEEDED", 200, false)]);
    assert!(appended(&result, HUBS).is_empty(), "no hub is read or changed");
    let missing: Vec<i64> =
        result.findings.iter().filter(|f| f.invariant == Invariant::I1).filter_map(|f| f.key).collect();
    assert_eq!(missing, (1..=40).collect::<Vec<_>>());
    let backfills = &result.record.as_ref().expect("a record").backfills;
    let lines: Vec<(&str, Option<&str>, u64)> =
        backfills.iter().map(|b| (b.table.as_str(), b.status.as_deref(), b.rows_read)).collect();
    assert_eq!(lines, vec![("public.hubs", Some("SQL_EXCEPTION"), 0), ("public.claims", Some("SUCCEEDED"), 200)]);
}

fn i1_keys(result: &RunResult) -> Vec<i64> {
    result.findings.iter().filter(|f| f.invariant == Invariant::I1).filter_map(|f| f.key).collect()
}

/// The Kafka signal channel (reference debezium-postgres.md §6.1): the record is read at the
/// SignalProcessor's next poll, and the first `readChunk` runs on its thread while the stream
/// goes on, so the stream can open the window before the chunk query answers.
#[test]
fn a_kafka_signal_runs_at_the_next_poll_and_its_first_chunk_beside_the_stream() {
    let result = run("hubs-backfill-kafka-signal", &[]);
    assert!(result.prediction_held, "{:?}", result.findings);
    let executed: Vec<(u64, Option<u16>)> = result
        .trace
        .iter()
        .filter_map(|event| match &event.observation {
            Observation::SignalExecuted { via, .. } => Some((event.at.ms(), via.0)),
            _ => None,
        })
        .collect();
    assert_eq!(executed, vec![(21_510, Some(0))], "the poll after the record at t=20.006s, from topic 0");
    let order = observed(&result, |o| match o {
        Observation::WindowOpened { .. } => Some("opened"),
        Observation::ChunkRead { .. } => Some("read"),
        _ => None,
    });
    assert_eq!(&order[..2], &["opened", "read"], "the stream opened the first window before its chunk answered");
    let reads = appended(&result, HUBS).iter().filter(|(op, ..)| *op == 'r').count();
    assert_eq!(reads, 40);
    let commits = observed(&result, |o| match o {
        Observation::GroupCommitted { group, positions } if group == "kafka-signal" => Some(positions[0].1),
        _ => None,
    });
    assert_eq!(commits, vec![1], "one auto-commit, past the signal");
}

/// A key other than the connector's `topic.prefix` is logged and dropped.
#[test]
fn a_kafka_signal_keyed_by_the_connector_name_is_dropped() {
    let result = run_variant("hubs-backfill-kafka-signal", "wrong-key");
    assert!(result.prediction_held, "{:?}", result.findings);
    let skipped = observed(&result, |o| match o {
        Observation::KafkaSignalSkipped { key, prefix, offset, .. } => Some((key.clone(), prefix.clone(), *offset)),
        _ => None,
    });
    assert_eq!(skipped, vec![("claims-connector".to_owned(), "claims".to_owned(), 0)]);
    assert!(
        observed(&result, |o| matches!(o, Observation::IncrementalSnapshotStarted { .. }).then_some(())).is_empty()
    );
    assert_eq!(i1_keys(&result), (1..=40).collect::<Vec<_>>());
}

/// Without the source channel the watermarks are plain rows: the first window never closes.
#[test]
fn without_the_source_channel_no_window_opens_or_closes() {
    let result = run_variant("hubs-backfill-kafka-signal", "kafka-only");
    assert!(result.prediction_held, "{:?}", result.findings);
    let not_read = observed(&result, |o| match o {
        Observation::SignalRowNotRead { watermark, .. } => Some(watermark.is_some()),
        _ => None,
    });
    assert_eq!(not_read, vec![true, true], "the first chunk's open and close watermarks");
    assert!(observed(&result, |o| matches!(o, Observation::WindowOpened { .. }).then_some(())).is_empty());
    assert_eq!(i1_keys(&result), (1..=40).collect::<Vec<_>>());
    let backfill = &result.record.as_ref().expect("a record").backfills[0];
    assert_eq!((backfill.status.as_deref(), backfill.chunks, backfill.records_published), (None, 1, 0));
}

/// After a crash the consumer starts at what its group committed: a signal not yet committed is
/// read again, one committed before the snapshot's context was stored is lost.
#[test]
fn a_restart_reads_a_kafka_signal_again_only_if_it_was_not_committed() {
    let starts = |result: &RunResult| {
        observed(result, |o| match o {
            Observation::KafkaSignalConsumerStarted { position, committed, .. } => Some((*position, *committed)),
            _ => None,
        })
    };
    let executed =
        |result: &RunResult| observed(result, |o| matches!(o, Observation::SignalExecuted { .. }).then_some(())).len();
    let again = run_variant("hubs-backfill-kafka-signal", "worker-killed");
    assert!(again.prediction_held, "{:?}", again.findings);
    assert_eq!(starts(&again), vec![(0, false), (0, false)]);
    assert_eq!(executed(&again), 2, "read and run again after the restart");
    let lost = run_variant("hubs-backfill-kafka-signal", "committed-then-killed");
    assert!(lost.prediction_held, "{:?}", lost.findings);
    assert_eq!(starts(&lost), vec![(0, false), (1, true)]);
    assert_eq!(executed(&lost), 1, "committed: never read again");
    assert_eq!(i1_keys(&lost), (12..=40).collect::<Vec<_>>());
}

/// What the Kafka channel's settings and steps refuse, by name.
#[test]
fn the_kafka_signal_channel_refuses_what_it_cannot_run() {
    let path = common::scenario_path("hubs-backfill-kafka-signal");
    let text = std::fs::read_to_string(&path).expect("the file");
    for (from, to, expected) in [
        ("\"signal.kafka.bootstrap.servers\" = \"kafka:9092\"", "", "signal.kafka.bootstrap.servers"),
        ("\"source,kafka\"", "\"source,jmx\"", "the jmx channel is not modelled yet"),
        ("\"source,kafka\"", "\"source\"", "has no effect: signal.enabled.channels does not have kafka"),
        ("channel = \"kafka\"", "channel = \"kafka\"\ntopic = \"other-signal\"", "no connector reads signal topic"),
        ("channel = \"kafka\"", "channel = \"mail\"", "is no signal channel the model runs"),
        ("channel = \"kafka\"", "channel = \"kafka\"\ntable = \"public.debezium_signal\"", "not a row"),
        ("channel = \"kafka\"", "key = \"claims\"", "applies to a Kafka signal only"),
    ] {
        assert!(text.contains(from), "{from}");
        let changed = text.replacen(from, to, 1);
        let error = handoff_sim::scenario::load_str("changed.toml", &changed, &[]).expect_err(to).to_string();
        assert!(error.contains(expected), "{to}: {error}");
    }
    let bound = text.replacen(
        "[prediction]",
        "[check]\nrows = 2\n\n[[check.script]]\nsignal = \"execute-snapshot\"\nchannel = \"kafka\"\n\
         data = '{\"data-collections\": [\"public.hubs\"]}'\n\n[prediction]",
        1,
    );
    let error = handoff_sim::scenario::load_str("bound.toml", &bound, &[]).expect_err("a bound").to_string();
    assert!(error.contains("not modelled in a bound yet"), "{error}");
}

/// `read.only=true` (reference §6.5): no watermark row is written; each chunk is read between two
/// `pg_current_snapshot()` calls, and the idle iterations of the streaming loop, with the last
/// event's xid at or below the high watermark's xmin, close the windows and read on while the
/// watermarks stay the same.
#[test]
fn a_read_only_snapshot_reads_between_pg_current_snapshot_calls_and_writes_nothing() {
    let result = run("hubs-backfill-read-only", &[]);
    assert!(result.prediction_held, "{:?}", result.findings);
    assert!(appended(&result, SIGNALS).is_empty(), "no watermark rows: nothing on the signal table's topic");
    let reads = hub_reads(&result);
    assert_eq!(reads, (1..=40).collect::<Vec<_>>());
    let watermarks = observed(&result, |o| match o {
        Observation::SnapshotWatermark { high, xids, .. } => Some((*high, xids.to_string())),
        _ => None,
    });
    assert_eq!(watermarks.len(), 8, "a low and a high watermark for each of 4 readChunk calls: {watermarks:?}");
    assert!(watermarks.iter().all(|(_, xids)| xids == "748:748:"), "{watermarks:?}");
    let rules = observed(&result, |o| match o {
        Observation::ReadOnlyWindow { event, rule, xid, .. } => Some((*event, *rule, *xid)),
        _ => None,
    });
    use handoff_models::core::signal::{ReadOnlyEvent, ReadOnlyRule};
    assert_eq!(rules, vec![(ReadOnlyEvent::Idle, ReadOnlyRule::Visible, Some(747)); 3]);
    let record = result.record.as_ref().expect("a record");
    let [backfill] = record.backfills.as_slice() else { panic!("one backfill: {:?}", record.backfills) };
    assert_eq!((backfill.chunks, backfill.windows, backfill.rows_read, backfill.records_published), (3, 3, 40, 40));
}

/// A transaction left open holds the high watermark's xmin down: nothing closes the first window
/// until it commits; its change of hub 5 then removes hub 5 from the buffer.
#[test]
fn a_transaction_left_open_holds_a_read_only_window_until_it_commits() {
    let result = run_variant("hubs-backfill-read-only", "open-transaction");
    assert!(result.prediction_held, "{:?}", result.findings);
    let closes: Vec<(u64, u32, u32)> = result
        .trace
        .iter()
        .filter_map(|event| match &event.observation {
            Observation::WindowClosed { emitted, deduplicated, .. } => Some((event.at.ms(), *emitted, *deduplicated)),
            _ => None,
        })
        .collect();
    assert_eq!(closes.first().map(|c| (c.1, c.2)), Some((15, 1)), "{closes:?}");
    assert!(closes[0].0 >= 40_000, "the first window closes only at the COMMIT of t=40s: {closes:?}");
    let reads = hub_reads(&result);
    assert!(!reads.contains(&5) && reads.len() == 39, "hub 5 comes as the streamed update only: {reads:?}");
}

/// `pause-snapshot` on a read-only snapshot: the paused `readChunk` sets no watermark, and the
/// next idle iteration's `watermarksChanged` dereferences the null previous one.
#[test]
fn pausing_a_read_only_snapshot_fails_the_task_at_the_next_idle_iteration() {
    let result = run_variant("hubs-backfill-read-only", "paused");
    assert!(result.prediction_held, "{:?}", result.findings);
    let failures = observed(&result, |o| match o {
        Observation::TaskFailed { reason } => Some(reason.clone()),
        _ => None,
    });
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("NullPointerException") && failures[0].contains("previousLowWatermark"));
}

#[test]
fn read_only_refuses_what_it_cannot_run() {
    let path = common::scenario_path("hubs-backfill-read-only");
    let text = std::fs::read_to_string(&path).expect("the file");
    for (from, to, expected) in [
        ("\"signal.data.collection\" = \"public.debezium_signal\"", "", "true needs signal.data.collection"),
        (
            "\"read.only\" = true",
            "\"read.only\" = true\n\"incremental.snapshot.watermarking.strategy\" = \"insert_delete\"",
            "has no effect with read.only = true",
        ),
        ("\"read.only\" = true", "\"read.only\" = 3", "read.only"),
    ] {
        assert!(text.contains(from), "{from}");
        let changed = text.replacen(from, to, 1);
        let error = handoff_sim::scenario::load_str("changed.toml", &changed, &[]).expect_err(to).to_string();
        assert!(error.contains(expected), "{to}: {error}");
    }
    // A bound takes read-only snapshots (hubs-backfill-read-only-visibility-race).
    let bound = text.replacen("[prediction]", "[check]\nrows = 2\n\n[prediction]", 1);
    let loaded = handoff_sim::scenario::load_str("bound.toml", &bound, &[]).expect("a read-only bound");
    assert!(loaded.spec.check.is_some());
}

/// A two-column key (`[[table]] primary_key = ["region_id", "hub_id"]`, ten hubs per region):
/// the first chunk has no bounds, the next ones bound the two columns as one row value, so the
/// chunks end at (2, 6), (4, 2) and (4, 10) and every hub is read. On Debezium 1.7 (DBZ-3860)
/// the bounds compare each column on its own: chunk 2 reads 14 rows up to (4, 10), chunk 3 none,
/// and hubs (3, 1)–(3, 5) and (4, 1)–(4, 5) are never read, which I4 and I1 name.
#[test]
fn a_composite_key_is_chunked_by_row_values_and_before_1_8_column_by_column() {
    let chunks = |result: &RunResult| {
        observed(result, |o| match o {
            Observation::ChunkRead { after, last, rows, .. } => Some((*after, *last, *rows)),
            _ => None,
        })
    };
    let (spec, seed) = common::load("hubs-backfill-composite-key", &[]);
    let result = common::run(&spec, seed);
    let timeline = |result: &RunResult| handoff_sim::timed::report::timeline(&spec, result);
    assert!(result.prediction_held, "{:?}", result.findings);
    // Keys are n = (region_id - 1) * 10 + hub_id: (2, 6) is 16, (4, 2) is 32, (4, 10) is 40.
    assert_eq!(
        chunks(&result),
        [(None, Some(16), 16), (Some(16), Some(32), 16), (Some(32), Some(40), 8), (Some(40), None, 0)]
    );
    assert_eq!(hubs_in_kafka(&result), (1..=40).collect::<Vec<_>>());
    let first =
        timeline(&result).into_iter().find(|line| line.contains("chunk query on public.hubs")).expect("a chunk line");
    assert!(first.contains("with no WHERE (the first chunk has no bounds)"), "{first}");
    assert!(first.contains("up to key (region_id, hub_id) = (2, 6)"), "{first}");

    let choice = handoff_sim::scenario::Choice { variant: Some("debezium-1-7".into()), ..Default::default() };
    let loaded = handoff_sim::scenario::load_with(&common::scenario_path("hubs-backfill-composite-key"), &choice)
        .unwrap_or_else(|error| panic!("{error}"));
    let old = common::run(&loaded.spec, loaded.seed);
    assert!(old.prediction_held, "{:?}", old.findings);
    assert_eq!(chunks(&old), [(None, Some(16), 16), (Some(16), Some(40), 14), (Some(40), None, 0)]);
    let never: Vec<i64> = (21..=25).chain(31..=35).collect();
    let read: Vec<i64> = (1..=40).filter(|key| !never.contains(key)).collect();
    assert_eq!(hubs_in_kafka(&old), read);
    let missing: Vec<i64> =
        old.findings.iter().filter(|f| f.invariant == Invariant::I1).filter_map(|f| f.key).collect();
    assert_eq!(missing, never);
    let [i4] = old.findings.iter().filter(|f| f.invariant == Invariant::I4).collect::<Vec<_>>()[..] else {
        panic!("one I4: {:?}", old.findings)
    };
    assert!(i4.seen.contains("10 row(s)") && i4.seen.contains("(3, 1), (3, 2)"), "{}", i4.seen);
    assert!(i4.detail.contains("DBZ-3860"), "{}", i4.detail);
    let line = handoff_sim::timed::report::timeline(&loaded.spec, &old)
        .into_iter()
        .find(|line| line.contains("region_id >= 2 AND hub_id >= 6"))
        .expect("chunk 2");
    assert!(line.contains("each key column compared on its own"), "{line}");
}

/// A nullable unique key (`message.key.columns = "public.hubs:external_id"`, NULL in hub 17):
/// `ORDER BY external_id` puts hub 17 last and makes it the maximum key; Debezium 2.6 counts NULL
/// as the largest value, so the chunks end at 16, 33 and NULL and every hub is read. On 2.5
/// (DBZ-5071) chunk 2 is bounded by `NOT (external_id > NULL)`, reads nothing, and hubs 17 to 40
/// are never read, which I4 and I1 name.
#[test]
fn a_nullable_key_column_is_chunked_with_null_last_and_before_2_6_stops_at_the_null() {
    use handoff_models::core::ids::UniqueColumn;
    let null = UniqueColumn::NULL;
    let chunks = |result: &RunResult| {
        observed(result, |o| match o {
            Observation::ChunkRead { after, last, rows, maximum_key, .. } => Some((*after, *last, *rows, *maximum_key)),
            _ => None,
        })
    };
    let (spec, seed) = common::load("hubs-backfill-nullable-key", &[]);
    let result = common::run(&spec, seed);
    assert!(result.prediction_held, "{:?}", result.findings);
    assert_eq!(
        chunks(&result),
        [
            (None, Some(16), 16, null),
            (Some(16), Some(33), 16, null),
            (Some(33), Some(null), 8, null),
            (Some(null), None, 0, null)
        ]
    );
    assert_eq!(hubs_in_kafka(&result), (1..=40).collect::<Vec<_>>());
    let lines = handoff_sim::timed::report::timeline(&spec, &result);
    let line = lines.iter().find(|line| line.contains("up to key (external_id) = (NULL)")).expect("chunk 3");
    assert!(line.contains("WHERE (external_id > 33 OR external_id IS NULL) AND NOT (1 = 0)"), "{line}");
    assert!(lines.iter().any(|line| line.contains("WHERE 1 = 0 AND NOT (1 = 0)")), "chunk 4 after NULL");

    let choice = handoff_sim::scenario::Choice { variant: Some("debezium-2-5".into()), ..Default::default() };
    let loaded = handoff_sim::scenario::load_with(&common::scenario_path("hubs-backfill-nullable-key"), &choice)
        .unwrap_or_else(|error| panic!("{error}"));
    let old = common::run(&loaded.spec, loaded.seed);
    assert!(old.prediction_held, "{:?}", old.findings);
    assert_eq!(chunks(&old), [(None, Some(16), 16, null), (Some(16), None, 0, null)]);
    assert_eq!(hubs_in_kafka(&old), (1..=16).collect::<Vec<_>>());
    let missing: Vec<i64> =
        old.findings.iter().filter(|f| f.invariant == Invariant::I1).filter_map(|f| f.key).collect();
    assert_eq!(missing, (17..=40).collect::<Vec<_>>());
    let [i4] = old.findings.iter().filter(|f| f.invariant == Invariant::I4).collect::<Vec<_>>()[..] else {
        panic!("one I4: {:?}", old.findings)
    };
    assert!(i4.seen.contains("24 row(s)"), "{}", i4.seen);
    assert!(i4.detail.contains("DBZ-5071"), "{}", i4.detail);
    let line = handoff_sim::timed::report::timeline(&loaded.spec, &old)
        .into_iter()
        .find(|line| line.contains("external_id > 16 AND NOT (external_id > NULL)"))
        .expect("chunk 2");
    assert!(line.contains("no row: the table is done"), "{line}");
}

/// A table without a primary key: `message.key.columns` on `id` chunks it as a key would; with
/// no key at all `isTableInvalid` skips it (`NO_PRIMARY_KEY`) before any query; a `surrogate-key`
/// chunks it, but the window buffer keeps every row under the one null message key, so each
/// window emits its chunk's last row; a blocking snapshot needs no key.
#[test]
fn a_table_without_a_key_is_skipped_or_keyed_by_message_key_columns() {
    let load = |variant: Option<&str>| {
        let choice = handoff_sim::scenario::Choice { variant: variant.map(str::to_string), ..Default::default() };
        let loaded = handoff_sim::scenario::load_with(&common::scenario_path("hubs-backfill-keyless"), &choice)
            .unwrap_or_else(|error| panic!("{error}"));
        let result = common::run(&loaded.spec, loaded.seed);
        assert!(result.prediction_held, "{variant:?}: {:?}", result.findings);
        (loaded.spec, result)
    };
    let statuses = |result: &RunResult| {
        observed(result, |o| match o {
            Observation::IncrementalTableScanned { status, rows, .. } => Some((status.name(), *rows)),
            _ => None,
        })
    };
    let emitted = |result: &RunResult| {
        observed(result, |o| match o {
            Observation::WindowClosed { emitted, .. } => Some(*emitted),
            _ => None,
        })
    };
    let i1 = |result: &RunResult| -> Vec<i64> {
        result.findings.iter().filter(|f| f.invariant == Invariant::I1).filter_map(|f| f.key).collect()
    };

    let (_, keyed) = load(None);
    assert_eq!(statuses(&keyed), [("SUCCEEDED", 40)]);
    assert_eq!(emitted(&keyed), [16, 16, 8, 0]);
    assert_eq!(hubs_in_kafka(&keyed), (1..=40).collect::<Vec<_>>());

    let (spec, skipped) = load(Some("no-message-key"));
    assert_eq!(statuses(&skipped), [("NO_PRIMARY_KEY", 0)]);
    assert!(observed(&skipped, |o| matches!(o, Observation::ChunkRead { .. }).then_some(())).is_empty());
    assert_eq!(emitted(&skipped), [0], "one window, closed empty");
    assert_eq!(i1(&skipped), (1..=40).filter(|hub| *hub != 7).collect::<Vec<_>>());
    let lines = handoff_sim::timed::report::timeline(&spec, &skipped);
    assert!(lines.iter().any(|line| line.contains("ended (NO_PRIMARY_KEY): 0 row(s) read; skipped")), "timeline");

    let (spec, surrogate) = load(Some("surrogate-key"));
    assert_eq!(statuses(&surrogate), [("SUCCEEDED", 40)]);
    assert_eq!(emitted(&surrogate), [1, 1, 1, 0]);
    assert_eq!(hubs_in_kafka(&surrogate), [16, 32, 40]);
    let missing: Vec<i64> = (1..=40).filter(|hub| ![16, 32, 40].contains(hub)).collect();
    assert_eq!(i1(&surrogate), missing);
    let [i4] = surrogate.findings.iter().filter(|f| f.invariant == Invariant::I4).collect::<Vec<_>>()[..] else {
        panic!("one I4: {:?}", surrogate.findings)
    };
    assert!(i4.seen.contains("37 row(s)"), "{}", i4.seen);
    assert!(i4.detail.contains("null message key") || i4.detail.contains("key is null"), "{}", i4.detail);
    let lines = handoff_sim::timed::report::timeline(&spec, &surrogate);
    assert_eq!(lines.iter().filter(|line| line.contains("share the one null message key")).count(), 3);

    let (_, blocking) = load(Some("blocking"));
    assert!(statuses(&blocking).is_empty(), "no incremental snapshot");
    assert_eq!(hubs_in_kafka(&blocking), (1..=40).collect::<Vec<_>>());
}

/// Incremental snapshots exist from Debezium 1.6; `additional-conditions` on a table with a
/// two-column key is not modelled yet. Both are refused by name.
#[test]
fn backfills_the_model_does_not_have_are_refused() {
    let path = common::scenario_path("hubs-backfill");
    let refused = handoff_sim::scenario::load(&path, &["versions.debezium=1.5".to_string()]).expect_err("1.5");
    assert!(refused.message.contains("incremental snapshots exist from Debezium 1.6"), "{}", refused.message);
    let text = edited(
        "hubs-backfill-composite-key",
        "\"type\": \"incremental\"}",
        "\"type\": \"incremental\", \"additional-conditions\": [{\"data-collection\": \"public.hubs\", \"filter\": \"version = 1\"}]}",
    );
    let refused = handoff_sim::scenario::load_str("composite.toml", &text, &[]).expect_err("refused");
    assert!(
        refused.message.contains("a table with a two-column primary key, are not modelled yet"),
        "{}",
        refused.message
    );
}

/// The read-only design against the same race (reference debezium-postgres.md §6.5): the delete is
/// streamed before the chunk's low watermark while `pg_current_snapshot()` still lists its xid as
/// running, the chunk query misses it, and the window (moved by the xids of changes streamed after
/// the low watermark) never sees it: hub 2's stale row follows its delete (I2, I4). The shortest
/// path is the scenario's `[schedule]`. The twin, on a server whose commits are visible with
/// their commit record, holds every invariant, with a Connect crash anywhere too.
#[test]
fn the_read_only_windows_have_the_same_visibility_race_and_hold_without_it() {
    use handoff_sim::exhaustive::check::{self, Outcome};
    let (spec, seed) = common::load("hubs-backfill-read-only-visibility-race", &[]);
    let report = check::check(&spec, "hubs-backfill-read-only-visibility-race", common::WHOLE_BOUND).expect("a bound");
    assert!(report.complete, "the bound is explored completely");
    assert_eq!((report.states, report.unique_states), (120_819, 32_762), "the bound's size");
    assert!(report.as_expected(), "{}", check::text(&report));
    let schedule = spec.schedule.as_ref().expect("the race's path");
    for invariant in [Invariant::I2, Invariant::I4] {
        let found = report.properties.iter().find(|p| p.invariant == Some(invariant)).expect("checked");
        assert_eq!(found.outcome, Outcome::Counterexample, "{invariant}");
        assert_eq!(found.path, schedule.steps, "{invariant}: the shortest path changed:\n{}", found.story);
    }
    let result = common::run(&spec, seed);
    assert!(result.departures.is_empty(), "{:?}", result.departures);
    assert!(result.prediction_held, "{:?}", result.violated());
    let hubs = TableId(0);
    let low = observed(&result, |o| match o {
        Observation::SnapshotWatermark { xids, .. } => Some(xids.to_string()),
        _ => None,
    });
    assert_eq!(low.first().map(String::as_str), Some("740:742:740"), "xid 740 still running at the low watermark");
    let records = appended(&result, hubs);
    let delete = records.iter().position(|record| record.0 == 'd' && record.1 == 2).expect("hub 2's delete streamed");
    let read = records.iter().position(|record| record.0 == 'r' && record.1 == 2).expect("hub 2 read by the chunk");
    assert!(delete < read, "the stale read follows the delete in Kafka: {records:?}");

    let (twin, seed) = common::load("hubs-backfill-read-only-window-rule", &[]);
    let result = common::run(&twin, seed);
    assert!(result.departures.is_empty(), "{:?}", result.departures);
    assert!(result.prediction_held, "{:?}", result.violated());
    let reads: Vec<i64> =
        appended(&result, hubs).iter().filter(|record| record.0 == 'r').map(|record| record.1).collect();
    assert_eq!(reads, [1], "the chunk query sees the delete: only hub 1 is read");
    for (sets, size) in [(vec![], (56_651, 16_342)), (vec!["check.crash=[\"connect\"]"], (352_016, 102_214))] {
        let (spec, _) = common::load("hubs-backfill-read-only-window-rule", &sets);
        let report = check::check(&spec, "hubs-backfill-read-only-window-rule", common::WHOLE_BOUND).expect("a bound");
        assert!(report.complete, "the bound is explored completely");
        assert_eq!((report.states, report.unique_states), size, "{sets:?}: the bound's size");
        assert!(report.properties.iter().all(|p| p.outcome != Outcome::Counterexample), "{}", check::text(&report));
    }
}

/// A table added to `table.include.list` while the pipeline runs (`PUT
/// /connectors/<name>/config`, here while the connector is stopped): the resumed task captures it
/// from its stored offset on, so hub 5's update (after the offset, before the update) streams and
/// hub 3's (before the offset) never does; only the backfill brings the rows nobody changed. With a
/// filtered publication the `ALTER PUBLICATION` at the new task's start does not reach back: hub
/// 5's update is not streamed, though the new task replays from before it.
#[test]
fn a_table_added_while_running_streams_from_then_on_and_needs_its_backfill() {
    let hub_updates = |result: &RunResult| -> Vec<i64> {
        appended(result, HUBS).iter().filter(|(op, ..)| *op == 'u').map(|(_, key, _)| *key).collect()
    };
    let result = run("hubs-added-while-running", &[]);
    let reconfigured = observed(&result, |observation| match observation {
        Observation::ConnectorReconfigured { version, tables } => Some((*version, tables.clone())),
        _ => None,
    });
    assert_eq!(reconfigured, vec![(1, vec![CLAIMS, HUBS, SIGNALS])]);
    assert_eq!(hub_updates(&result), vec![5, 7], "hub 3's update precedes the stored offset");
    assert_eq!(appended(&result, HUBS).iter().filter(|(op, ..)| *op == 'r').count(), 40);
    assert!(result.findings.is_empty(), "{:?}", result.findings);

    let filtered = run_variant("hubs-added-while-running", "filtered-publication");
    assert_eq!(hub_updates(&filtered), vec![7], "the SET does not publish what committed before it");
    assert!(filtered.findings.is_empty(), "{:?}", filtered.findings);

    for variant in ["no-backfill", "signal-first"] {
        let result = run_variant("hubs-added-while-running", variant);
        let missing: Vec<i64> = result
            .findings
            .iter()
            .filter(|finding| finding.invariant == Invariant::I1)
            .filter_map(|finding| finding.key)
            .collect();
        assert_eq!(missing.len(), 37, "{variant}: every hub but 5 and 7 (streamed) and 9 (deleted)");
        assert!(missing.contains(&3) && ![5, 7, 9].iter().any(|key| missing.contains(key)), "{variant}: {missing:?}");
    }
}

/// A blocking snapshot signalled for a table the connector does not capture yet reads nothing:
/// the snapshot's tables pass the connector's table filter; the record says no table was read.
#[test]
fn a_blocking_snapshot_of_a_table_not_captured_yet_reads_nothing() {
    let signal = "at = \"20s\"\nsignal = \"execute-snapshot\"\nid = \"ad-hoc-1\"\n\
                  data = '{\"data-collections\": [\"public.hubs\"], \"type\": \"incremental\"}'";
    let early = "at = \"6s\"\nsignal = \"execute-snapshot\"\nid = \"ad-hoc-1\"\n\
                 data = '{\"data-collections\": [\"public.hubs\"], \"type\": \"blocking\"}'";
    let text = edited("hubs-added-while-running", signal, early);
    let loaded = handoff_sim::scenario::load_str("early.toml", &text, &[]).expect("loads");
    let result = common::run(&loaded.spec, loaded.seed);
    let started = observed(&result, |o| match o {
        Observation::BlockingSnapshotStarted { tables, .. } => Some(tables.clone()),
        _ => None,
    });
    assert_eq!(started, vec![Vec::new()], "public.hubs left out");
    assert_eq!(appended(&result, HUBS).iter().filter(|(op, ..)| *op == 'r').count(), 0);
    let record = result.record.as_ref().expect("a record");
    assert!(record.blocking_snapshots[0].sentence().starts_with("no table"), "{:?}", record.blocking_snapshots);
}
