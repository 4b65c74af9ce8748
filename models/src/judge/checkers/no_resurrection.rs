//! I2 no resurrection: at the acceptance boundary a key whose last source operation is a delete
//! is absent from the sink; and once a delete is applied, no older version reappears.
//!
//! Verifies, during the run: after the sink applied a delete of a document (or a snapshot epoch
//! removed it), an apply that makes it live again with a version not newer than the deleted one. At
//! the boundary (when reached): every document whose surviving source history ends in a delete is
//! not live in the sink; the finding names the delete's commit, so the reader can see why it never
//! arrived (a snapshot cannot retract anything, and a restarted one reads at a later position:
//! Debezium's `RelationalSnapshotChangeEventSource.doExecute`).
//!
//! Does not verify: documents that never existed in the surviving source (phantoms are I4).

use super::{Boundary, Evidence, Finding, describe_doc};
use crate::core::observe::{Apply, Doc, Observation, SinkAction};
use crate::core::time::SimTime;
use crate::judge::oracle::DocId;
use crate::scenario::spec::Invariant;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NoResurrection {
    /// Documents whose delete the sink applied: the deleted version (if known) and when.
    deleted: BTreeMap<DocId, (Option<u32>, SimTime)>,
}

impl NoResurrection {
    pub fn observe(&mut self, evidence: &Evidence, at: SimTime, observation: &Observation, found: &mut Vec<Finding>) {
        match observation {
            Observation::SinkApplied { applies } => {
                for apply in applies {
                    self.apply(evidence, at, apply, found);
                }
            }
            Observation::SinkReconciled { removed, .. } => {
                for (table, key, row) in removed {
                    self.deleted.insert((*table, *key), (Some(row.version), at));
                }
            }
            _ => {}
        }
    }

    fn apply(&mut self, evidence: &Evidence, at: SimTime, apply: &Apply, found: &mut Vec<Finding>) {
        let Apply { record, action, before, after } = apply;
        let Some(event) = record.value else {
            // A tombstone the sink deletes by (`behavior.on.null.values=delete`).
            if let (SinkAction::Deleted, crate::core::event::Topic::Change(table), Some(Doc::Live(row))) =
                (action, record.tp.topic, before)
            {
                self.deleted.insert((table, record.key), (Some(row.version), at));
            }
            return;
        };
        let id = (event.source.table, record.key);
        match (action, after) {
            (SinkAction::Deleted, _) => {
                let version = event.before.map(|row| row.version).or(match before {
                    Some(Doc::Live(row)) => Some(row.version),
                    _ => None,
                });
                self.deleted.insert(id, (version, at));
            }
            (SinkAction::Upserted, Some(Doc::Live(row))) => {
                if let Some((deleted_version, deleted_at)) = self.deleted.get(&id).copied() {
                    if deleted_version.is_none_or(|deleted| row.version <= deleted) {
                        found.push(
                            Finding::new(Invariant::I2, Some(record.key), at)
                                .on_record(record)
                                .expected(format!(
                                    "stays deleted (delete of {} applied at {deleted_at})",
                                    deleted_version.map_or("it".to_string(), |v| format!("version {v}"))
                                ))
                                .seen(format!("version {} reappeared from {}", row.version, evidence.record_at(record)))
                                .lsn(event.source.lsn),
                        );
                    } else {
                        self.deleted.remove(&id);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The boundary half: deleted in the source, live in the sink.
pub fn check_boundary(
    evidence: &Evidence,
    boundary: &Boundary,
    compacted: &std::collections::BTreeMap<DocId, super::tombstones_seen::RemovedDeletes>,
    found: &mut Vec<Finding>,
) {
    for (id, versions) in evidence.oracle.histories() {
        if !evidence.captured.contains(&id.0) {
            continue;
        }
        let Some(last) = versions.last() else { continue };
        if last.row.is_some() {
            continue;
        }
        let doc = boundary.sink.get(&id);
        if let Some(Doc::Live(_)) = doc {
            let deleted_version = versions.iter().rev().find_map(|v| v.row).map(|r| r.version);
            found.push(
                Finding::new(Invariant::I2, Some(id.1), boundary.at)
                    .on(id.0)
                    .expected(format!(
                        "absent (deleted{} at {} by the commit at {})",
                        deleted_version.map_or(String::new(), |v| format!(" after version {v}")),
                        last.at,
                        last.commit_lsn
                    ))
                    .seen(describe_doc(doc))
                    .lsn(last.commit_lsn)
                    .detail(match compacted.get(&id) {
                        Some(_) => "the delete was published to Kafka, and the log cleaner removed it from the \
                                    compacted topic before the sink read it (I12)"
                            .to_string(),
                        None => resurrection_reason(evidence, id, last),
                    }),
            );
        }
    }
}

/// Why the delete never reached the sink, as far as Kafka's content tells: whether the delete's
/// change record is in Kafka, whether a later complete snapshot omits the row, and where the
/// connector's first stream started.
fn resurrection_reason(evidence: &Evidence, id: DocId, delete: &crate::judge::oracle::Version) -> String {
    let delete_lsn = delete.commit_lsn;
    let streamed =
        evidence.oracle.changes_of(delete.csn, id).any(|change| evidence.published.has_change(change.lsn, id, None));
    if streamed {
        return "the delete was published to Kafka, but the sink does not keep it: a later record made the row live \
                again"
            .into();
    }
    let later_snapshot = evidence
        .published
        .attempts
        .iter()
        .any(|attempt| attempt.complete && attempt.lsn > delete_lsn && !attempt.rows.contains_key(&id));
    let before_stream = match evidence.first_stream_start {
        Some((_, start)) if delete_lsn < start => format!(" (it committed before the stream's start at {start})"),
        Some(_) => " (it committed after the stream's start, which did not publish it)".into(),
        None => " (no stream ever started)".into(),
    };
    if later_snapshot {
        format!(
            "the delete was never streamed{before_stream} and the later snapshot that omits the row cannot retract it"
        )
    } else {
        format!("the delete was never published{before_stream}")
    }
}
