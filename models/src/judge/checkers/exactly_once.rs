//! Exactly-once publication, judged as I10 (duplicates absorbed) when the Connect workers run
//! exactly-once source tasks (`exactly.once.source.support=enabled`; reference kafka-connect.md
//! §2.3–§2.5).
//!
//! Under exactly-once a poll's records and its offsets commit in one Kafka transaction, and a
//! restarted task resumes from the offsets of the last committed transaction (read as a
//! `read_committed` consumer reads them): what a dead instance left open is aborted, never
//! committed, and produced again. So the pipeline declares no replay window for committed
//! records: a change record of a source transaction appears at most once among the *committed*
//! records of its topic. Records of open or aborted transactions do not count (a `read_committed`
//! consumer never sees them; a `read_uncommitted` one does, and the handoff record counts them).
//!
//! Excluded, because exactly-once does not remove them (§2.4 "What EOS does not cover"):
//! snapshot reads (`op=r`: a re-snapshot produces them again as new records with new offsets),
//! heartbeats, and tombstones (a tombstone carries only its key). Verifies nothing when
//! exactly-once is off.

use super::{Evidence, Finding};
use crate::core::event::{KafkaRecord, Op, Topic};
use crate::core::lsn::Lsn;
use crate::core::observe::Observation;
use crate::core::time::SimTime;
use crate::scenario::spec::Invariant;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What makes a change record the same record again: its topic, key, operation, table and
/// source position.
type Identity = (Topic, i64, Op, u16, Lsn);

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ExactlyOnce {
    /// Whether the workers run exactly-once source tasks.
    pub enabled: bool,
    /// Records of open transactions, by producer id: judged when the transaction ends.
    open: super::published::HeldByTransaction<KafkaRecord>,
    /// Committed change records, each with where it first was.
    committed: BTreeMap<Identity, KafkaRecord>,
    /// Committed snapshot reads that repeat an earlier committed one (excluded from the check).
    pub snapshot_repeats: u64,
    snapshot_reads: BTreeSet<(Topic, i64, u32)>,
}

fn identity(record: &KafkaRecord) -> Option<Identity> {
    let event = record.value?;
    if record.tp.topic.is_heartbeat() || event.op == Op::Read {
        return None;
    }
    Some((record.tp.topic, record.key, event.op, event.source.table.0, event.source.lsn))
}

impl ExactlyOnce {
    /// Whether an observation can change this checker.
    pub fn observes(&self, observation: &Observation) -> bool {
        self.enabled && matches!(observation, Observation::Appended { .. } | Observation::TransactionEnded { .. })
    }

    pub fn observe(&mut self, evidence: &Evidence, at: SimTime, observation: &Observation, found: &mut Vec<Finding>) {
        if !self.enabled {
            return;
        }
        match observation {
            Observation::Appended { records, transaction: Some(producer) } => {
                self.open.hold(*producer, records.iter().copied());
            }
            Observation::Appended { records, transaction: None } => self.commit(evidence, at, records, found),
            Observation::TransactionEnded { producer_id, committed, .. } => {
                let records = self.open.end(*producer_id);
                if *committed {
                    self.commit(evidence, at, &records, found);
                }
            }
            _ => {}
        }
    }

    fn commit(&mut self, evidence: &Evidence, at: SimTime, records: &[KafkaRecord], found: &mut Vec<Finding>) {
        for record in records {
            if let Some(event) = record.value
                && event.op == Op::Read
            {
                let version = event.after.map_or(0, |row| row.version);
                if !self.snapshot_reads.insert((record.tp.topic, record.key, version)) {
                    self.snapshot_repeats += 1;
                }
                continue;
            }
            let Some(identity) = identity(record) else { continue };
            match self.committed.get(&identity).copied() {
                None => {
                    self.committed.insert(identity, *record);
                }
                Some(first) => {
                    let event = record.value.expect("a change record has a value");
                    found.push(
                        Finding::new(Invariant::I10, Some(record.key), at)
                            .expected("each committed change record once among the committed records (exactly-once)")
                            .seen(format!(
                                "op={} of source.lsn {} committed again at {}, first at {}",
                                event.op.code(),
                                event.source.lsn,
                                evidence.record_at(record),
                                evidence.record_at(&first)
                            ))
                            .detail(
                                "under exactly.once.source.support=enabled a record and its offset commit together, \
                                 so no restart should produce a committed record twice",
                            ),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::core::event::{ChangeEvent, KafkaRecord, Op, Origin, SnapshotMarker, SourceInfo, Topic, TopicPartition};
    use crate::core::ids::{Node, TableId};
    use crate::core::lsn::Lsn;
    use crate::core::observe::{Observation, TraceEvent, TransactionEnd};
    use crate::core::time::SimTime;
    use crate::judge::checkers::Checkers;
    use crate::judge::oracle::Oracle;
    use crate::scenario::spec::Invariant;

    fn record(offset: u64) -> KafkaRecord {
        let source = SourceInfo {
            connector: Origin::Postgresql,
            table: TableId(0),
            lsn: Lsn(0x200),
            tx_id: None,
            snapshot: SnapshotMarker::Streamed,
            ts_ms: 0,
        };
        KafkaRecord {
            tp: TopicPartition { topic: Topic::Change(TableId(0)), partition: 0 },
            offset,
            key: 1,
            value: Some(ChangeEvent { op: Op::Delete, before: None, after: None, source }),
        }
    }

    fn feed(checkers: &mut Checkers, at_ms: u64, observation: Observation) {
        checkers.observe(&TraceEvent { at: SimTime(at_ms), node: Node::Kafka, observation });
    }

    fn appended(offset: u64) -> Observation {
        Observation::Appended { records: vec![record(offset)], transaction: Some(0) }
    }

    fn ended(committed: bool) -> Observation {
        Observation::TransactionEnded {
            transactional_id: "t-0".into(),
            producer_id: 0,
            committed,
            cause: if committed { TransactionEnd::Requested } else { TransactionEnd::Fenced },
            records: 1,
        }
    }

    #[test]
    fn only_a_record_committed_twice_is_a_finding_and_only_under_exactly_once() {
        for enabled in [true, false] {
            let mut checkers = Checkers::new(Oracle::new(&[]), vec![TableId(0)]).exactly_once(enabled);
            // Appended, then aborted (the instance died), then appended again and committed.
            feed(&mut checkers, 1, appended(0));
            feed(&mut checkers, 2, ended(false));
            feed(&mut checkers, 3, appended(2));
            feed(&mut checkers, 4, ended(true));
            assert!(!checkers.violated(Invariant::I10), "an aborted copy is no duplicate");
            // Committed a second time.
            feed(&mut checkers, 5, appended(4));
            feed(&mut checkers, 6, ended(true));
            assert_eq!(checkers.violated(Invariant::I10), enabled);
        }
    }
}
