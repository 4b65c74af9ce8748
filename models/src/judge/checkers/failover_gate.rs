//! I8 failover gate: after a promotion the saved offset must be available on the new source's
//! slot before more events are published.
//!
//! Verifies: after a promotion, if the connector streams from the promoted server without a new
//! snapshot having started and without a gate having found the saved offset available, while its
//! saved offset is still a position it read before the promotion (on the old timeline), then the
//! slot it streams from must have existed at promotion, with `confirmed_flush ≤ saved`, and the
//! saved position must lie in the new timeline's history: at or before the switch point, where the
//! old timeline ends (the PostgreSQL 17 documentation, "Logical Replication Failover"; the history
//! as [`super::Timelines`] describes it). Otherwise the first change it publishes from that stream
//! is the finding.
//!
//! Does not verify: streams started once the saved offset is a position read on the new
//! timeline. The connector has then crossed the failover: a position of the new timeline, past
//! the switch point or not, is a valid resume point (PostgreSQL reads it from the new timeline's
//! WAL), and a later restart is an ordinary one, whose losses are I6's. Nor whether the rebuild
//! that replaced the stream is complete (I4), nor phantoms from the old primary's lost tail (I4).

use super::{Evidence, Finding};
use crate::core::event::Op;
use crate::core::ids::Node;
use crate::core::lsn::Lsn;
use crate::core::observe::{GateVerdict, Observation};
use crate::core::time::SimTime;
use crate::scenario::spec::Invariant;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Promotion {
    server: Node,
    at: SimTime,
    switch_lsn: Lsn,
    slots: Vec<String>,
    rebuilt: bool,
    gate_passed: bool,
    /// Set when a stream started from an unavailable position: why.
    unavailable: Option<String>,
    reported: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FailoverGate {
    promotion: Option<Promotion>,
}

impl FailoverGate {
    pub fn observe(&mut self, evidence: &Evidence, at: SimTime, observation: &Observation, found: &mut Vec<Finding>) {
        if let Observation::Promoted { server, switch_lsn, slots, .. } = observation {
            self.promotion = Some(Promotion {
                server: *server,
                at,
                switch_lsn: *switch_lsn,
                slots: slots.clone(),
                rebuilt: false,
                gate_passed: false,
                unavailable: None,
                reported: false,
            });
            return;
        }
        let Some(promotion) = self.promotion.as_mut() else { return };
        match observation {
            Observation::SnapshotStarted { .. } => promotion.rebuilt = true,
            Observation::GateChecked { verdict: GateVerdict::Available, .. } => promotion.gate_passed = true,
            Observation::StreamStarted {
                server,
                client: Node::Connect | Node::Connect2 | Node::Connect3,
                slot,
                confirmed_flush,
                ..
            } if *server == promotion.server && !promotion.rebuilt && !promotion.gate_passed => {
                let saved = evidence.stored_offset.and_then(|offset| offset.resume_lsn());
                if saved.is_some() && !evidence.timelines.stored_before_promotion() {
                    // Read on the new timeline: the failover is behind the connector.
                    promotion.unavailable = None;
                    return;
                }
                let timelines = &evidence.timelines;
                let reason = match saved {
                    None => Some("no saved offset".to_string()),
                    Some(_) if !promotion.slots.contains(slot) => Some(format!(
                        "slot \"{slot}\" did not exist on {} at promotion (PostgreSQL ≤ 16 has no failover slots): it was created afterwards",
                        promotion.server
                    )),
                    Some(saved) if *confirmed_flush > saved => {
                        Some(format!("the slot's confirmed_flush {confirmed_flush} is past the saved offset {saved}"))
                    }
                    Some(saved) if !timelines.in_history(timelines.stored(), saved) => Some(format!(
                        "the saved offset {saved}, read on timeline {}, is past the switch point {} where that timeline ends in timeline {}'s history",
                        timelines.stored(),
                        promotion.switch_lsn,
                        timelines.current()
                    )),
                    Some(_) => None,
                };
                promotion.unavailable = reason
                    .map(|reason| format!("{reason}; saved offset {}", saved.map_or("none".into(), |s| s.to_string())));
            }
            Observation::Appended { records, .. } if !promotion.reported => {
                let Some(reason) = promotion.unavailable.clone() else { return };
                let first = records.iter().find(|record| {
                    record.value.is_some_and(|event| !event.source.snapshot.is_snapshot() && event.op != Op::Read)
                });
                if let Some(record) = first {
                    promotion.reported = true;
                    found.push(
                        Finding::new(Invariant::I8, Some(record.key), at).on_record(record)
                            .expected(format!(
                                "after the promotion of {} at {}, no event published before the saved offset is found available on its slot",
                                promotion.server, promotion.at
                            ))
                            .seen(format!("published a change from {} at {}", promotion.server, evidence.record_at(record)))
                            .lsn(record.value.map(|event| event.source.lsn).unwrap_or_default())
                            .detail(reason),
                    );
                }
            }
            _ => {}
        }
    }
}
