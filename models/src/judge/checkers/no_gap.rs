//! I1 no gap: every change committed after the snapshot point reaches the sink, possibly
//! superseded by a later change of the same key.
//!
//! Verifies, at the acceptance boundary (when the pipeline is running and caught up): every
//! document live in the surviving source history is live in the sink with exactly the source's
//! row. A missing or older document means the sink lacks a change; the finding names the first
//! commit of that key the sink does not reflect, and says what the evidence shows of it: that
//! Kafka never held it, or that Kafka held it (and, when the sink moved the key back to an older
//! version during the run, that an older row overwrote it: I3's finding). The same version with
//! other content means the sink holds a version from a history the source no longer has.
//!
//! Logical decoding messages are captured events too (`pg_logical_emit_message`; Debezium's
//! `op=m` records on `<topic.prefix>.message`, `PostgresStreamingChangeEventSource`,
//! `LogicalDecodingMessageFilter`): no sink reads them, so their destination is Kafka. Verifies,
//! at the same boundary, that every message of the main database whose prefix the connector's
//! `message.prefix.include.list` / `exclude.list` takes, durable in the source history (its
//! transaction committed; a non-transactional one flushed by a later commit) and written after
//! the connector's first stream began, is on that topic. A message the history keeps and Kafka
//! never held is a gap as a lost change is (dbz#1379: messages after a restart never captured).
//!
//! Does not verify: deleted documents (I2); documents newer in the sink than in the source
//! (phantoms, I4); anything when the boundary was not reached (the pipeline stopped or failed
//! closed: the tail it did not deliver is not a gap); a non-transactional message no later
//! commit flushed (a crash could have lost it: `LogLogicalMessage` does not flush), a message
//! of a transaction block that changed no row, or of a primary a promotion left behind; a
//! message carrying an outbox event (a message outbox's): its destination is its routed topic,
//! and I9 checks it there.

use super::{Boundary, Evidence, Finding, describe_doc};
use crate::core::event::Topic;
use crate::core::ids::Row;
use crate::core::observe::Doc;
use crate::judge::oracle::OracleMessage;
use crate::judge::oracle::{DocId, Version};
use crate::scenario::spec::Invariant;

pub fn check(evidence: &Evidence, boundary: &Boundary, prior: &[Finding], found: &mut Vec<Finding>) {
    for table in evidence.captured.iter() {
        // Both sides are in key order: walk them together. (By index: a `Peekable`'s empty
        // `Option<Option<_>>` leaves bytes unwritten that the compiled loop tests before it
        // tests the discriminant, which valgrind reports; docs/memory-safety.md.)
        let sink = boundary.sink.table(*table);
        let mut at = 0;
        for (key, row) in evidence.oracle.live(*table) {
            let id = (*table, key);
            while sink.get(at).is_some_and(|((_, other), _)| *other < key) {
                at += 1;
            }
            let doc = sink.get(at).filter(|((_, other), _)| *other == key).map(|(_, doc)| doc);
            let sink_version = match doc {
                Some(Doc::Live(seen)) if *seen == row => continue,
                Some(Doc::Live(seen)) => Some(seen.version),
                Some(Doc::Tombstone(version)) => *version,
                None => None,
            };
            if sink_version.is_some_and(|version| version > row.version) {
                continue; // newer than the source: reported by I4
            }
            let versions = evidence.oracle.versions(id);
            let removed_live_row = matches!(doc, Some(Doc::Tombstone(_))) && sink_version == Some(row.version);
            let same_version_other_content = !removed_live_row && sink_version == Some(row.version);
            let first_missing = if same_version_other_content || removed_live_row {
                versions.last()
            } else if let Some(seen) = sink_version {
                versions.iter().find(|version| version.row.is_some_and(|r| r.version > seen))
            } else {
                // The first version of the document's latest life.
                let start = versions.iter().rposition(|version| version.row.is_none()).map_or(0, |i| i + 1);
                versions.get(start)
            };
            // The finding's key names the table (`key 7 of public.orders`) unless it is the claims
            // table of the default example.
            let mut finding = Finding::new(Invariant::I1, Some(key), boundary.at)
                .on(*table)
                .expected(format!("version {} ({})", row.version, row.status.name()))
                .seen(describe_doc(doc));
            if let Some(version) = first_missing {
                let detail = if removed_live_row {
                    "the sink removed the row (a delete or a reconciliation) although the source still has it"
                        .to_string()
                } else if same_version_other_content {
                    "same version, other content: the sink holds a row from a history the source no longer has"
                        .to_string()
                } else {
                    why_missing(evidence, id, version, prior)
                };
                // A row loaded before the run has no commit position.
                if version.csn != 0 {
                    finding = finding.lsn(version.commit_lsn);
                }
                finding = finding.detail(detail);
            }
            found.push(finding);
        }
    }
}

/// The messages the history keeps that Kafka never held (see the module's comment).
pub fn check_messages(evidence: &Evidence, boundary: &Boundary, found: &mut Vec<Finding>) {
    let Some((_, stream_start)) = evidence.first_stream_start else { return };
    // An outbox event's message is I9's (its record is routed away from the message topic).
    let kept = |message: &&OracleMessage| !message.lost && message.durable_at.is_some() && message.event.is_none();
    // The connector's own heartbeat messages never stop: the boundary waits for none of them,
    // only for the captured commits and the other messages. A heartbeat message before the last
    // of those was due all the same; one after it may still be on its way.
    let awaited_upto = evidence
        .oracle
        .messages
        .iter()
        .filter(kept)
        .filter(|message| evidence.awaits_message(&message.prefix))
        .map(|message| message.lsn)
        .chain(
            evidence
                .oracle
                .surviving()
                .filter(|commit| commit.txn.changes.iter().any(|change| evidence.captured.contains(&change.table)))
                .map(|commit| commit.txn.commit_lsn),
        )
        .max();
    for message in evidence.oracle.messages.iter().filter(kept) {
        let awaited = evidence.awaits_message(&message.prefix) || awaited_upto.is_some_and(|upto| message.lsn < upto);
        if !awaited
            || message.lsn <= stream_start
            || !evidence.message_prefixes.captures(&message.prefix)
            || evidence.published.messages.contains_key(&message.lsn)
        {
            continue;
        }
        let kind = if message.transactional { "transactional" } else { "non-transactional" };
        found.push(
            Finding::new(Invariant::I1, None, boundary.at)
                .expected(format!(
                    "the {kind} logical message '{}' written at {} ({}) on {}",
                    message.prefix,
                    message.at,
                    message.lsn,
                    evidence.names.topic(Topic::Message)
                ))
                .seen("Kafka never held it")
                .lsn(message.lsn)
                .detail(
                    "the connector processed the WAL past it (the pipeline caught up) without publishing an op=m \
                     record for it: the message is lost",
                ),
        );
    }
}

/// Why the sink lacks `version` of a document, as far as the evidence tells: whether Kafka ever
/// held it (as a streamed change, or a snapshot row), and whether the sink moved this document
/// back to an older version during the run (an I3 finding). A version Kafka held was delivered
/// to a consumer that could read it; what became of it in the sink is said only as far as a
/// finding shows it.
fn why_missing(evidence: &Evidence, id: DocId, version: &Version, prior: &[Finding]) -> String {
    let committed = if version.csn == 0 {
        "the row as loaded before the run".to_string()
    } else {
        format!("the change committed at {} ({})", version.at, version.commit_lsn)
    };
    let Some(row) = version.row else {
        return format!("{committed} is not in the sink");
    };
    let published = published_at(evidence, id, version, row);
    let moved_back = prior.iter().any(|finding| finding.invariant == Invariant::I3 && finding.key == Some(id.1));
    match (published, moved_back) {
        (None, _) => format!("{committed} never reached Kafka: no streamed change and no snapshot row carries it"),
        (Some(published), true) => format!(
            "{committed} was published to Kafka ({published}), and the sink later moved this key back to an older \
             version (I3): an older row overwrote it"
        ),
        (Some(published), false) => format!(
            "{committed} was published to Kafka ({published}), but the sink does not hold it: its consumer never \
             applied it, or a later record replaced it"
        ),
    }
}

/// Where Kafka first held this version of the document: as a streamed change (the change
/// record of its commit), or as a row of a snapshot attempt.
fn published_at(evidence: &Evidence, id: DocId, version: &Version, row: Row) -> Option<String> {
    let streamed = evidence
        .oracle
        .changes_of(version.csn, id)
        .find_map(|change| evidence.published.changes.get(&(change.lsn, id)).filter(|c| c.after == Some(row)));
    if let Some(change) = streamed {
        return Some(format!("a streamed change at {}", change.at));
    }
    let snapshot = evidence.published.attempts.iter().find(|attempt| attempt.rows.get(&id) == Some(&row))?;
    Some(format!(
        "a snapshot row of the snapshot at source.lsn {}, first published at {}",
        snapshot.lsn, snapshot.first_at
    ))
}

#[cfg(test)]
mod tests {
    use crate::components::sink::DocList;
    use crate::core::change::{Change, ChangeKind};
    use crate::core::event::{ChangeEvent, KafkaRecord, Op, Origin, SnapshotMarker, SourceInfo, Topic, TopicPartition};
    use crate::core::ids::{Node, Row, Status, TableId};
    use crate::core::lsn::Lsn;
    use crate::core::observe::{Apply, Doc, Observation, SinkAction, TraceEvent};
    use crate::core::shared::{ByContent, CopyOnWrite};
    use crate::core::time::SimTime;
    use crate::core::wal::CommittedTxn;
    use crate::judge::checkers::{Boundary, Checkers, Finding, RunEnd};
    use crate::judge::oracle::Oracle;
    use crate::scenario::spec::Invariant;

    const TABLE: TableId = TableId(0);

    fn row(version: u32) -> Row {
        Row::new(version, Status::Submitted, 1)
    }

    fn event(at_ms: u64, observation: Observation) -> TraceEvent {
        TraceEvent { at: SimTime(at_ms), node: Node::Pg1, observation }
    }

    /// Claim 1 loaded at version 1, updated to version 2 (change record at 0/200, commit at
    /// 0/210); `published`: the change reached Kafka; `moved_back`: the sink applied version 2,
    /// then an older record put version 1 back. The sink ends with version 1 either way.
    fn i1_detail(published: bool, moved_back: bool) -> String {
        let mut checkers = Checkers::new(Oracle::new(&[(TABLE, 1, row(1))]), vec![TABLE]);
        let txn = CommittedTxn {
            xid: 740,
            csn: 1,
            first_lsn: Lsn(0x200),
            commit_lsn: Lsn(0x210),
            end_lsn: Lsn(0x220),
            commit_time: SimTime(1_000),
            timeline: 1,
            changes: vec![Change {
                lsn: Lsn(0x200),
                table: TABLE,
                key: 1,
                kind: ChangeKind::Update { before: Some(row(1)), after: row(2) },
            }],
        };
        checkers.observe(&event(
            1_000,
            Observation::Committed { server: Node::Pg1, txn: ByContent(CopyOnWrite::new(txn)) },
        ));
        let record = |offset, version, snapshot| KafkaRecord {
            tp: TopicPartition { topic: Topic::Change(TABLE), partition: 0 },
            offset,
            key: 1,
            value: Some(ChangeEvent {
                op: if snapshot == SnapshotMarker::Streamed { Op::Update } else { Op::Read },
                before: None,
                after: Some(row(version)),
                source: SourceInfo {
                    connector: Origin::Postgresql,
                    table: TABLE,
                    lsn: Lsn(if version == 2 { 0x200 } else { 0x100 }),
                    tx_id: None,
                    snapshot,
                    ts_ms: 0,
                },
            }),
        };
        let update = record(0, 2, SnapshotMarker::Streamed);
        if published {
            checkers.observe(&event(2_000, Observation::Appended { records: vec![update], transaction: None }));
        }
        if moved_back {
            let replay = record(1, 1, SnapshotMarker::Last);
            let applies = vec![
                Apply {
                    record: update,
                    action: SinkAction::Upserted,
                    before: Some(Doc::Live(row(1))),
                    after: Some(Doc::Live(row(2))),
                },
                Apply {
                    record: replay,
                    action: SinkAction::Upserted,
                    before: Some(Doc::Live(row(2))),
                    after: Some(Doc::Live(row(1))),
                },
            ];
            checkers.observe(&event(3_000, Observation::SinkApplied { applies }));
        }
        let sink: DocList = vec![((TABLE, 1), Doc::Live(row(1)))].into();
        checkers.finish(&Boundary {
            at: SimTime(9_000),
            reached: true,
            reason: String::new(),
            end: RunEnd::CaughtUp,
            sink,
        });
        let i1: Vec<&Finding> = checkers.findings().iter().filter(|f| f.invariant == Invariant::I1).collect();
        assert_eq!(i1.len(), 1, "{:?}", checkers.findings());
        assert_eq!(checkers.violated(Invariant::I3), moved_back);
        i1[0].detail.clone()
    }

    #[test]
    fn a_gap_says_whether_kafka_ever_held_the_change_and_whether_an_older_row_overwrote_it() {
        // Overwritten by an older row after it arrived: I3's story, told as such.
        let overwritten = i1_detail(true, true);
        assert!(overwritten.contains("was published to Kafka (a streamed change at t=2.000s)"), "{overwritten}");
        assert!(overwritten.contains("moved this key back to an older version (I3)"), "{overwritten}");
        assert!(!overwritten.contains("missing"), "{overwritten}");
        // In Kafka, never in the sink: said without guessing why.
        let unapplied = i1_detail(true, false);
        assert!(unapplied.contains("was published to Kafka") && !unapplied.contains("I3"), "{unapplied}");
        // Never in Kafka.
        let unpublished = i1_detail(false, false);
        assert!(unpublished.contains("never reached Kafka"), "{unpublished}");
        assert!(unpublished.starts_with("the change committed at t=1.000s (0/210)"), "{unpublished}");
    }

    /// The messages' I1 (debezium/dbz#1379): the findings about logical messages of a run in
    /// which a non-transactional message 'audit' is written at 0/300, then (`crash`) PostgreSQL
    /// crashes and recovers, then a claim update commits at 0/400, which flushes the WAL before
    /// it; `published`: the message's record reached claims.message.
    fn message_findings(published: bool, crash: bool, excluded: bool) -> Vec<Finding> {
        use crate::components::connect::debezium::{DebeziumConfig, MessagePrefixFilter};
        let mut debezium: DebeziumConfig =
            crate::scenario::spec::claims_minimal(1, crate::components::sink::ApplyRule::VersionGuard).debezium;
        if excluded {
            debezium.message_prefixes = MessagePrefixFilter::Exclude(vec!["audit".into()]);
        }
        let mut checkers = Checkers::new(Oracle::new(&[(TABLE, 1, row(1))]), vec![TABLE]).messages(&debezium);
        checkers.observe(&event(
            0,
            Observation::StreamStarted {
                server: Node::Pg1,
                client: Node::Connect,
                slot: "debezium".into(),
                requested: Lsn(0x100),
                confirmed_flush: Lsn(0x100),
                start: Lsn(0x100),
                restart_lsn: Lsn(0x100),
            },
        ));
        checkers.observe(&event(
            1_000,
            Observation::MessageWritten {
                server: Node::Pg1,
                lsn: Lsn(0x300),
                transactional: false,
                xid: None,
                prefix: "audit".into(),
                database: None,
                committed: false,
                content: Default::default(),
            },
        ));
        if crash {
            checkers.observe(&event(1_500, Observation::CrashRecoveryEnded { server: Node::Pg1 }));
        }
        let txn = CommittedTxn {
            xid: 741,
            csn: 1,
            first_lsn: Lsn(0x380),
            commit_lsn: Lsn(0x400),
            end_lsn: Lsn(0x420),
            commit_time: SimTime(2_000),
            timeline: 1,
            changes: vec![Change {
                lsn: Lsn(0x380),
                table: TABLE,
                key: 1,
                kind: ChangeKind::Update { before: Some(row(1)), after: row(2) },
            }],
        };
        checkers.observe(&event(
            2_000,
            Observation::Committed { server: Node::Pg1, txn: ByContent(CopyOnWrite::new(txn)) },
        ));
        if published {
            let record = KafkaRecord {
                tp: TopicPartition { topic: Topic::Message, partition: 0 },
                offset: 0,
                key: crate::core::event::message_key("audit"),
                value: Some(ChangeEvent {
                    op: Op::Message,
                    before: None,
                    after: None,
                    source: SourceInfo {
                        connector: Origin::Postgresql,
                        table: TableId::default(),
                        lsn: Lsn(0x300),
                        tx_id: None,
                        snapshot: SnapshotMarker::Streamed,
                        ts_ms: 1_000,
                    },
                }),
            };
            checkers.observe(&event(2_500, Observation::Appended { records: vec![record], transaction: None }));
        }
        let sink: DocList = vec![((TABLE, 1), Doc::Live(row(2)))].into();
        checkers.finish(&Boundary {
            at: SimTime(9_000),
            reached: true,
            reason: String::new(),
            end: RunEnd::CaughtUp,
            sink,
        });
        checkers.findings().iter().filter(|f| f.invariant == Invariant::I1 && f.key.is_none()).cloned().collect()
    }

    #[test]
    fn a_durable_message_kafka_never_held_is_a_gap() {
        let lost = message_findings(false, false, false);
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert_eq!(lost[0].lsn, Some(Lsn(0x300)));
        assert!(lost[0].expected.contains("logical message 'audit'"), "{}", lost[0].expected);
        assert!(message_findings(true, false, false).is_empty(), "published: no gap");
        assert!(message_findings(false, true, false).is_empty(), "a crash before the flush may have lost it");
        assert!(message_findings(false, false, true).is_empty(), "message.prefix.exclude.list names it");
    }
}
