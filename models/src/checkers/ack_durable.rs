//! I5 ack ≤ durable: the position acknowledged upstream (the slot's `confirmed_flush`) never
//! passes what is durable downstream.
//!
//! Verifies: every time a client's confirmation moves a slot's `confirmed_flush` to L, the
//! connector's offset as the offsets topic holds it at that moment (`lsn_commit ?? lsn_proc`)
//! is at least L. Connect stores an offset only for a contiguous prefix of acknowledged records,
//! so the stored offset is the durable downstream position; a slot confirmed past it can forward
//! a restarted stream over records that never reached Kafka (reference `debezium-postgres.md`
//! §2.4, §9 rows 1–2: DBZ-1766, DBZ-7816).
//!
//! Does not verify: that the records below the stored offset are really in Kafka (Connect's own
//! contract, modelled faithfully, so not doubted here); positions set at slot creation (nothing
//! was acknowledged then); confirmations by other clients than the connector.

use super::{Evidence, Finding};
use crate::ids::Node;
use crate::observe::Observation;
use crate::spec::Invariant;
use crate::time::SimTime;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AckDurable;

impl AckDurable {
    pub fn observe(&mut self, evidence: &Evidence, at: SimTime, observation: &Observation, found: &mut Vec<Finding>) {
        let Observation::SlotConfirmed { slot, to, by: Node::Connect, .. } = observation else { return };
        let durable = evidence.stored_offset.and_then(|offset| offset.lsn_to_confirm());
        if durable.is_none_or(|durable| *to > durable) {
            found.push(
                Finding::new(Invariant::I5, None, at)
                    .expected(match durable {
                        Some(durable) => format!("confirmed_flush <= {durable}, the offset stored in Kafka"),
                        None => "no confirmation before an offset is stored in Kafka".into(),
                    })
                    .seen(format!("slot \"{slot}\" confirmed_flush moved to {to}"))
                    .lsn(*to)
                    .detail("a restart would be forwarded past records that are not durable downstream"),
            );
        }
    }
}
