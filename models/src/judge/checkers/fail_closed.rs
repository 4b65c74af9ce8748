//! I6 fail closed: if the resume position is unavailable (slot dropped, recreated, invalidated,
//! WAL removed), the pipeline stops or rebuilds explicitly; it never skips silently to a later
//! position.
//!
//! Verifies, at every replication stream start of the connector: the commits the server will never
//! send although the connector asked for them — those whose commit starts in `[requested, start)`
//! when decoding was forwarded to the slot's `confirmed_flush` (`CreateDecodingContext` in
//! PostgreSQL's `src/backend/replication/logical/logical.c`), and, on a promoted server asked for a
//! position read on the old timeline past that timeline's switch point, the new timeline's commits
//! below the requested position (the same forwarding, on a timeline the stored position is not on)
//! — are already in Kafka. Any that is not was skipped silently. A position read on the new
//! timeline is in its history wherever it lies (see [`super::Timelines`]).
//!
//! Does not verify: a stream start without a requested position (0/0, a fresh start: the
//! handoff is I4's question); positions past a switch point once a snapshot has started on the
//! promoted server (a rebuild: its positions are the new timeline's); a stop or a rebuild (those
//! are the correct outcomes; whether a stopped pipeline says so is I11's question).

use super::{Evidence, Finding};
use crate::core::ids::Node;
use crate::core::lsn::Lsn;
use crate::core::observe::Observation;
use crate::core::time::SimTime;
use crate::scenario::spec::Invariant;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FailClosed {
    /// Promoted servers: their switch points, and whether a snapshot has started since (a
    /// rebuild: the connector's history starts again at that snapshot).
    switch_points: BTreeMap<Node, (Lsn, bool)>,
}

impl FailClosed {
    pub fn observe(&mut self, evidence: &Evidence, at: SimTime, observation: &Observation, found: &mut Vec<Finding>) {
        match observation {
            Observation::Promoted { server, switch_lsn, .. } => {
                self.switch_points.insert(*server, (*switch_lsn, false));
            }
            Observation::SnapshotStarted { .. } => {
                for (_, rebuilt) in self.switch_points.values_mut() {
                    *rebuilt = true;
                }
            }
            Observation::StreamStarted {
                server,
                client: Node::Connect | Node::Connect2 | Node::Connect3,
                slot,
                requested,
                start,
                confirmed_flush,
                ..
            } => {
                if !requested.is_valid() {
                    return;
                }
                let mut skipped_from = None;
                if start > requested {
                    skipped_from = Some((
                        *requested,
                        format!(
                            "decoding forwarded from the requested {requested} to confirmed_flush {confirmed_flush}"
                        ),
                    ));
                }
                // The requested position is the stored offset's, read on the timeline the
                // evidence records; any other request is taken as read before the promotion.
                let stored = evidence.stored_offset.and_then(|offset| offset.resume_lsn());
                let requested_on =
                    if stored == Some(*requested) { evidence.timelines.stored() } else { super::FIRST_TIMELINE };
                if let Some((switch, false)) = self.switch_points.get(server)
                    && !evidence.timelines.in_history(requested_on, *requested)
                {
                    skipped_from = Some((
                        *switch,
                        format!(
                            "the requested {requested} is past timeline switch point {switch}: the new timeline's commits below it are skipped"
                        ),
                    ));
                }
                let Some((from, why)) = skipped_from else { return };
                let skipped: Vec<_> = evidence
                    .oracle
                    .surviving()
                    .filter(|commit| commit.txn.commit_lsn >= from && commit.txn.commit_lsn < *start)
                    .filter(|commit| {
                        commit.txn.changes.iter().any(|change| {
                            evidence.expects(change.table, commit.txn.commit_lsn)
                                && !evidence.published.has_change(
                                    change.lsn,
                                    (change.table, change.key),
                                    change.kind.after(),
                                )
                        })
                    })
                    .collect();
                let Some(first) = skipped.first() else { return };
                let change = first.txn.changes.iter().find(|c| evidence.expects(c.table, first.txn.commit_lsn));
                let finding = Finding::new(Invariant::I6, change.map(|c| c.key), at);
                found.push(
                    match change {
                        Some(change) => finding.on(change.table),
                        None => finding,
                    }
                    .expected(format!(
                        "the connector stops or rebuilds: its position {requested} is not available on slot \"{slot}\""
                    ))
                    .seen(format!(
                        "streaming went on from {start}; {} commit(s) from {} were skipped silently",
                        skipped.len(),
                        first.txn.commit_lsn
                    ))
                    .lsn(*requested)
                    .detail(why),
                );
            }
            _ => {}
        }
    }
}
