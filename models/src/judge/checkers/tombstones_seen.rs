//! I12 tombstones seen: a consumer (re)reading a compacted topic sees every delete it needs, or is
//! told it cannot.
//!
//! On a compacted change topic (`cleanup.policy=compact`; reference kafka-connect.md §6) the log
//! cleaner removes a key's older records once a newer one is cleanable: Debezium's `op=d` event
//! goes at the first cleaning after the tombstone that follows it, and the tombstone itself
//! `delete.retention.ms` after the cleaning that first saw it (KIP-534's delete horizon;
//! `LogCleaner`'s `shouldRetainRecord`). A consumer that starts from the beginning after both are
//! gone is right: it sees neither the row nor its delete. A consumer that already holds the row
//! (it read an earlier version) and reaches the delete's offsets only after the cleaner removed
//! them never deletes it: the row stays, a resurrection Kafka never tells it about. Kafka's own
//! bound (TopicConfig, `delete.retention.ms`): a consumer must read to the end within
//! `delete.retention.ms` to see every delete. Which removal loses the delete depends on the
//! sink: one that ignores tombstones (`behavior.on.null.values=ignore`) deletes only on the `op=d`
//! event, so the first cleaning after the delete already loses it for a lagging sink.
//!
//! Verifies, at the acceptance boundary: every document live in the sink whose source history ends
//! in a delete and one of whose delete records the cleaner removed. The finding names the key, the
//! removed records and what the sink needed. Verifies nothing where no topic is compacted.

use super::{Boundary, Evidence, Finding};
use crate::components::sink::NullValues;
use crate::core::event::TopicPartition;
use crate::core::observe::{Doc, Observation};
use crate::core::time::SimTime;
use crate::judge::oracle::DocId;
use crate::scenario::spec::Invariant;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The delete records of one document the cleaner removed: each with when, where and at which
/// offset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RemovedDeletes {
    pub op_d: Option<(SimTime, TopicPartition, u64)>,
    pub tombstone: Option<(SimTime, TopicPartition, u64)>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TombstonesSeen {
    /// The compacted topics' `delete.retention.ms`, when they are compacted.
    pub delete_retention_ms: Option<u64>,
    /// The sink's `behavior.on.null.values`.
    pub null_values: NullValues,
    /// Delete records the cleaner removed before the sink had read them, by document.
    pub removed: BTreeMap<DocId, RemovedDeletes>,
    /// How far the sink has read each partition: past the highest offset it was given.
    read_upto: BTreeMap<TopicPartition, u64>,
}

impl TombstonesSeen {
    pub fn observes(&self, observation: &Observation) -> bool {
        self.delete_retention_ms.is_some()
            && matches!(observation, Observation::Compacted { .. } | Observation::SinkApplied { .. })
    }

    pub fn observe(&mut self, at: SimTime, observation: &Observation) {
        if let Observation::SinkApplied { applies } = observation {
            for apply in applies {
                let upto = self.read_upto.entry(apply.record.tp).or_default();
                *upto = (*upto).max(apply.record.offset + 1);
            }
            return;
        }
        let Observation::Compacted { tp, deletes, .. } = observation else { return };
        let crate::core::event::Topic::Change(table) = tp.topic else { return };
        let read_upto = self.read_upto.get(tp).copied().unwrap_or(0);
        // What the sink read before the cleaner removed it, it saw.
        for (offset, key, tombstone) in deletes.iter().filter(|(offset, ..)| *offset >= read_upto) {
            let removed = self.removed.entry((table, *key)).or_default();
            let slot = if *tombstone { &mut removed.tombstone } else { &mut removed.op_d };
            slot.get_or_insert((at, *tp, *offset));
        }
    }

    /// The boundary check (see the module's documentation).
    pub fn check(&self, evidence: &Evidence, boundary: &Boundary, found: &mut Vec<Finding>) {
        let Some(retention_ms) = self.delete_retention_ms else { return };
        for (id, removed) in &self.removed {
            let Some(Doc::Live(row)) = boundary.sink.get(id) else { continue };
            let Some(last) = evidence.oracle.versions(*id).last() else { continue };
            if last.row.is_some() {
                continue;
            }
            let at = |(at, tp, offset): (SimTime, TopicPartition, u64)| {
                format!("{}@{offset} at {at}", evidence.names.partition(tp))
            };
            let mut gone = Vec::new();
            if let Some(op_d) = removed.op_d {
                gone.push(format!("its op=d event ({})", at(op_d)));
            }
            if let Some(tombstone) = removed.tombstone {
                gone.push(format!("its tombstone ({})", at(tombstone)));
            }
            let why = match (self.null_values, removed.tombstone) {
                (NullValues::Ignore, _) => format!(
                    "the sink ignores tombstones (behavior.on.null.values=ignore), so only the op=d event deletes for \
                     it, and the cleaner removes that at its first cleaning after the tombstone: a sink that had read \
                     an earlier version and was behind then never deletes the row, whatever delete.retention.ms \
                     ({retention_ms} ms) says. Delete on tombstones (behavior.on.null.values=delete) and keep the \
                     sink's lag below delete.retention.ms, or set min.compaction.lag.ms above the sink's longest \
                     lag, or rebuild the index into an empty one"
                ),
                (NullValues::Delete, Some(_)) => format!(
                    "the sink deletes on tombstones, but it reached the tombstone's offset only after the cleaner had \
                     removed it, delete.retention.ms ({retention_ms} ms) after the cleaning that first saw it: a \
                     consumer must read to the end within delete.retention.ms to see every delete (Kafka's TopicConfig)"
                ),
                (NullValues::Delete, None) => "the sink deletes on tombstones, but it never applied this one".into(),
            };
            found.push(
                Finding::new(Invariant::I12, Some(id.1), boundary.at)
                    .on(id.0)
                    .expected(format!(
                        "the delete of {} (committed at {}) seen by the sink",
                        evidence.names.row_of(id.0, id.1),
                        last.at
                    ))
                    .seen(format!(
                        "the log cleaner removed {} before the sink read it; the sink still holds version {}",
                        gone.join(" and "),
                        row.version
                    ))
                    .lsn(last.commit_lsn)
                    .detail(why),
            );
        }
    }
}
