//! Sessions and transactions end to end (issue 18): named sessions run by the application in
//! the timed lens against the PostgreSQL model's transaction blocks.
#![cfg(madsim)]

mod common;

use handoff_models::core::ids::{Status, TableId};
use handoff_models::core::observe::{Doc, Observation};
use handoff_sim::timed::runner::RunResult;

/// `steps` after a claims table of 10 rows, a report table in another database, a connector
/// starting at once with a snapshot, and a version-guard sink.
fn scenario(steps: &str) -> String {
    common::claims(
        "sessions",
        10,
        "\"snapshot.mode\" = \"initial\"",
        &format!(
            "[[table]]\nname = \"public.reports\"\ndatabase = \"analytics\"\n[sink]\napply = \"version-guard\"\n\
             \"auto.offset.reset\" = \"earliest\"\n[prediction]\nverdict = \"holds\"\nwhy = \"sessions\"\n{steps}"
        ),
    )
}

/// Per commit, in commit order: when, and the (table, key) rows it changed.
fn commits(result: &RunResult) -> Vec<(u64, Vec<(u16, i64)>)> {
    result
        .trace
        .iter()
        .filter_map(|event| match &event.observation {
            Observation::Committed { txn, .. } => {
                Some((event.at.ms(), txn.changes.iter().map(|change| (change.table.0, change.key)).collect()))
            }
            _ => None,
        })
        .collect()
}

/// The keys of the claims table that reached Kafka.
fn published(result: &RunResult) -> Vec<i64> {
    let mut keys: Vec<i64> = result
        .trace
        .iter()
        .filter_map(|event| match &event.observation {
            Observation::Appended { records, .. } => Some(records.iter().map(|record| record.key).collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

fn not_applied(result: &RunResult) -> Vec<String> {
    result
        .trace
        .iter()
        .filter_map(|event| match &event.observation {
            Observation::ScriptedNotApplied { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn two_interleaved_sessions_commit_both_in_commit_order_and_the_sink_has_both() {
    let text = scenario(
        r#"
[[workload.script]]
at = "3s"
session = "a"
begin = true

[[workload.script]]
session = "a"
insert = 11

[[workload.script]]
at = "3100ms"
session = "b"
begin = true

[[workload.script]]
session = "b"
update = [1, 2]
status = "paid"

[[workload.script]]
at = "3200ms"
session = "a"
delete = 3

[[workload.script]]
at = "3300ms"
session = "b"
commit = true

[[workload.script]]
at = "3400ms"
session = "a"
commit = true
"#,
    );
    let spec = common::load_text(&text);
    let result = common::run(&spec, 1);
    assert!(not_applied(&result).is_empty(), "{:?}", not_applied(&result));
    let commits = commits(&result);
    // b began after a and commits first: the commit order is not the order they began.
    assert_eq!(
        commits.iter().map(|(_, rows)| rows.clone()).collect::<Vec<_>>(),
        [vec![(0, 1), (0, 2)], vec![(0, 11), (0, 3)]],
        "{commits:?}"
    );
    assert!(commits[0].0 >= 3_300 && commits[1].0 >= 3_400, "each commits at its COMMIT: {commits:?}");
    let sink = &result.boundary.sink;
    assert!(matches!(sink.get(&(TableId(0), 11)), Some(Doc::Live(_))), "a's insert reached the sink");
    assert!(matches!(sink.get(&(TableId(0), 3)), Some(Doc::Tombstone(_))), "a's delete reached the sink");
    assert!(matches!(sink.get(&(TableId(0), 1)), Some(Doc::Live(row)) if row.status == Status::Paid), "b's update");
    assert!(result.prediction_held, "{:?}", result.violated());
}

#[test]
fn a_rolled_back_transaction_never_reaches_kafka_or_the_sink() {
    let text = scenario(
        r#"
[[workload.script]]
at = "3s"
session = "a"
begin = true

[[workload.script]]
session = "a"
insert = [11, 12]

[[workload.script]]
session = "a"
delete = 4

[[workload.script]]
session = "a"
rollback = true

[[workload.script]]
at = "4s"
insert = 13
"#,
    );
    let spec = common::load_text(&text);
    let result = common::run(&spec, 1);
    let commits = commits(&result);
    assert_eq!(commits.iter().map(|(_, rows)| rows.clone()).collect::<Vec<_>>(), [vec![(0, 13)]], "{commits:?}");
    let published = published(&result);
    assert!(published.contains(&13), "the autocommit insert after it is published: {published:?}");
    assert!(!published.contains(&11) && !published.contains(&12), "{published:?}");
    let sink = &result.boundary.sink;
    assert!(sink.get(&(TableId(0), 11)).is_none(), "the rolled-back insert is not in the sink");
    assert!(matches!(sink.get(&(TableId(0), 4)), Some(Doc::Live(_))), "the rolled-back delete did not delete");
    assert!(result.prediction_held, "{:?}", result.violated());
}

#[test]
fn a_session_idle_in_transaction_commits_only_after_its_idle_time_while_others_go_on() {
    let text = scenario(
        r#"
[[workload.script]]
at = "2s"
session = "forgotten"
database = "analytics"
begin = true

[[workload.script]]
session = "forgotten"
insert = 1
table = "public.reports"
idle_ms = 20000

[[workload.script]]
session = "forgotten"
commit = true

[[workload.script]]
at = "5s"
update = 5
"#,
    );
    let spec = common::load_text(&text);
    let result = common::run(&spec, 1);
    let commits = commits(&result);
    assert_eq!(commits.len(), 2, "{commits:?}");
    let (update_at, update_rows) = &commits[0];
    assert_eq!(update_rows, &[(0, 5)], "the other session's update commits while the transaction idles");
    assert!((5_000..6_000).contains(update_at), "{commits:?}");
    let (report_at, report_rows) = &commits[1];
    assert_eq!(report_rows, &[(1, 1)]);
    assert!(*report_at >= 22_000, "the COMMIT waited for the idle time: {commits:?}");
    assert!(result.boundary.sink.get(&(TableId(1), 1)).is_none(), "another database's table is not captured");
}
