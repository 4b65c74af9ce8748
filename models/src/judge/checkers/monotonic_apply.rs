//! I3 monotonic apply: the sink never moves a key back to an older version.
//!
//! Verifies: every apply that replaces a live document with a live row of a lower version. A
//! naive sink does this whenever a replay (a restarted connector or consumer, a repeated
//! snapshot) delivers an older row after a newer one.
//!
//! Does not verify: deleted documents coming back (that is I2), versions from a lost timeline
//! (I4).

use super::{Evidence, Finding};
use crate::core::observe::{Apply, Doc, Observation, SinkAction};
use crate::core::time::SimTime;
use crate::scenario::spec::Invariant;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MonotonicApply;

impl MonotonicApply {
    pub fn observe(&mut self, evidence: &Evidence, at: SimTime, observation: &Observation, found: &mut Vec<Finding>) {
        let Observation::SinkApplied { applies } = observation else { return };
        for apply in applies {
            Self::apply(evidence, at, apply, found);
        }
    }

    fn apply(evidence: &Evidence, at: SimTime, apply: &Apply, found: &mut Vec<Finding>) {
        let Apply { record, action: SinkAction::Upserted, before: Some(Doc::Live(old)), after: Some(Doc::Live(new)) } =
            apply
        else {
            return;
        };
        if new.version < old.version {
            let origin = record
                .value
                .map(|event| {
                    let kind = if event.source.snapshot.is_snapshot() { "snapshot row" } else { "change" };
                    format!("a replayed {kind} (op={}, source.lsn {})", event.op.code(), event.source.lsn)
                })
                .unwrap_or_default();
            found.push(
                Finding::new(Invariant::I3, Some(record.key), at)
                    .on_record(record)
                    .expected(format!("version >= {}", old.version))
                    .seen(format!("moved back from version {} to {}", old.version, new.version))
                    .detail(format!("{origin} at {} overwrote a newer row", evidence.record_at(record))),
            );
        }
    }
}
