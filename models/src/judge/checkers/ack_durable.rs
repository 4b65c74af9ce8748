//! I5 ack ≤ durable: the position acknowledged upstream (the slot's `confirmed_flush`) never
//! passes a change that is not durable downstream.
//!
//! Verifies: every time a client's confirmation moves a slot's `confirmed_flush` to L, no committed
//! change of a captured table lies between the connector's durable position and L without being
//! durable downstream. The durable position D is where a restart resumes: the offset the offsets
//! topic holds at that moment (`lsn_proc ?? lsn`; Connect stores an offset only for a contiguous
//! prefix of acknowledged records); without a stored offset, 0/0. The server forwards a request
//! below `confirmed_flush` to it, skipping every transaction whose commit record starts in [D, L)
//! (`CreateDecodingContext`, PostgreSQL's `logical.c`). A change there is durable downstream if
//! Kafka holds it as a streamed change, or a complete published snapshot read it (its commit starts
//! before the snapshot's position); any other would never be published (DBZ-1766, DBZ-7816;
//! Debezium's `PostgresConnectorTask.performCommit`).
//!
//! The connector's own confirmations are held to more: Debezium confirms what Connect has stored
//! (`lsn_commit ?? lsn_proc` of the stored offset, re-read from the offset store since 2.7), and a
//! confirmation of its own past that offset is a finding even when the changes in between are in
//! Kafka. It confirms from producer callbacks, which Kafka delivers in order only within one
//! partition: a later record can be acknowledged while an earlier one, for another partition, is
//! still in flight, and a crash then loses it (Kafka's `SourceTask.commitRecord` javadoc;
//! DBZ-7816). The model's Kafka acknowledges a batch whole and in order, so its content alone would
//! call such a confirmation safe; Connect's contract does not.
//!
//! The JDBC driver's keep-alive confirmations are held to the changes alone. pgjdbc confirms a
//! keep-alive's LSN only when the last flush Debezium sent covers the last data message received
//! (`lsn.flush.mode = connector_and_driver`, pgjdbc's
//! `V3PGReplicationStream.processKeepAliveMessage`): every change below it was received and
//! confirmed by Debezium before, so none lies past the stored offset, and such a confirmation,
//! however far past the offset, is no violation. What it does cost shows at the next start (the
//! slot's `restart_lsn` may pass the stored `lsn_proc`, and the start-up log-position check then
//! fails the task under `snapshot.mode=initial`): I6 or I11, not I5.
//!
//! Does not verify: that the records below the stored offset are really in Kafka (Connect's own
//! contract, modelled faithfully, so not doubted here); positions set at slot creation (nothing
//! was acknowledged then); confirmations by other clients than the connector; changes of tables
//! the connector does not capture (never published, so never at risk; the publication holds every
//! table, Debezium filters by `table.include.list`).

use super::{Evidence, Finding};
use crate::core::ids::Node;
use crate::core::lsn::Lsn;
use crate::core::observe::Observation;
use crate::core::time::SimTime;
use crate::scenario::spec::Invariant;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AckDurable {
    /// The LSNs the JDBC driver confirmed on keep-alives that have not yet reached the slot, in
    /// order (always empty without `connector_and_driver`): a confirmation to one of them is the
    /// driver's, not the connector's.
    driver_pending: Vec<Lsn>,
}

impl AckDurable {
    pub fn observe(&mut self, evidence: &Evidence, at: SimTime, observation: &Observation, found: &mut Vec<Finding>) {
        if let Observation::KeepaliveConfirmed { lsn } = observation {
            self.driver_pending.push(*lsn);
            return;
        }
        let Observation::SlotConfirmed { slot, to, by: by @ (Node::Connect | Node::Connect2 | Node::Connect3), .. } =
            observation
        else {
            return;
        };
        // Status updates arrive in order: the driver's confirmations up to this one have arrived
        // (or were overtaken by a larger flush and moved nothing).
        let by_driver = self.driver_pending.contains(to);
        if !self.driver_pending.is_empty() {
            self.driver_pending.retain(|pending| pending > to);
        }
        // With no offset in the offsets topic at all, the connector confirms nothing (it confirms
        // from the stored offset, or, before 2.7, only after a flush stored one): a confirmation
        // arriving then was sent before the offsets were deleted (a rebuild's runbook, over a
        // slow link), from an offset stored at the time. The changes it passes are judged alone.
        if !by_driver && evidence.stored_offset.is_some() {
            let stored = evidence.stored_offset.and_then(|offset| offset.lsn_to_confirm());
            if stored.is_none_or(|stored| *to > stored) {
                found.push(
                    Finding::new(Invariant::I5, None, at)
                        .expected(match stored {
                            Some(stored) => format!("the connector confirms at most {stored}, the offset stored in Kafka"),
                            None => "no confirmation by the connector while the offset stored in Kafka names no position to confirm (no lsn_commit, no lsn_proc)".into(),
                        })
                        .seen(format!("the connector moved slot \"{slot}\" confirmed_flush to {to}"))
                        .lsn(*to)
                        .detail(if *by == Node::Connect {
                            "it confirmed records Connect has not stored an offset for: Kafka acknowledges partitions independently, so one of them may not be durable, and a restart would be forwarded past it".to_owned()
                        } else {
                            format!(
                                "{by} confirmed what it had stored, but the offsets topic holds an older offset of the connector now: \
                                 with a group of workers, another instance of the task (a zombie, or the one that replaced it) wrote \
                                 its offsets after {by} did, and the stored offset went backwards beneath the slot (reference \
                                 kafka-connect.md §5.1); a restart resumes from it"
                            )
                        }),
                );
                return;
            }
        }
        self.changes_at_risk(evidence, at, slot, *to, found);
    }

    /// The committed changes a restart would be forwarded past that are not durable downstream.
    fn changes_at_risk(&self, evidence: &Evidence, at: SimTime, slot: &str, to: Lsn, found: &mut Vec<Finding>) {
        // A restart that will snapshot is forwarded past nothing: with no completed snapshot in
        // the stored offset, `initial` (and `when_needed`, `always`) reads every committed row
        // again, at the present (case B: `PostgresConnectorTask.start`, then the snapshotter's
        // `shouldSnapshotData`). A driver keep-alive confirmed while a re-snapshot's rows are on
        // their way to Kafka puts nothing at risk.
        if evidence.restart_snapshots
            && evidence.stored_offset.is_none_or(|offset| !offset.snapshot_is_completed() && offset.lsn_proc.is_none())
        {
            return;
        }
        let durable = evidence.stored_offset.and_then(|offset| offset.resume_lsn());
        let from = durable.unwrap_or(Lsn::INVALID);
        if to <= from {
            return;
        }
        // Surviving commits are in commit order, their commit LSNs increasing along the surviving
        // history: walk back from the newest while they start at or after D.
        let snapshot_position = evidence.published.accepted().map(|(_, attempt)| attempt.lsn);
        let mut at_risk = None;
        let mut count = 0usize;
        for commit in evidence.oracle.commits.iter().rev().filter(|commit| !commit.lost) {
            if commit.txn.commit_lsn < from {
                break;
            }
            if commit.txn.commit_lsn >= to || snapshot_position.is_some_and(|read_at| commit.txn.commit_lsn < read_at) {
                continue;
            }
            let missing = commit.txn.changes.iter().find(|change| {
                evidence.expects(change.table, commit.txn.commit_lsn)
                    && !evidence.published.has_change(change.lsn, (change.table, change.key), change.kind.after())
            });
            if let Some(change) = missing {
                count += 1;
                at_risk = Some((commit, change));
            }
        }
        let Some((commit, change)) = at_risk else { return };
        found.push(
            Finding::new(Invariant::I5, Some(change.key), at).on(change.table)
                .expected(match durable {
                    Some(durable) => format!(
                        "confirmed_flush passes no change that is not in Kafka: none from {durable}, where the offset stored in Kafka resumes"
                    ),
                    None => "no confirmation past a change that is not in Kafka, before an offset is stored".into(),
                })
                .seen(format!(
                    "slot \"{slot}\" confirmed_flush moved to {to} past {count} commit(s) not in Kafka, the first: the {} of key {} committed at {}",
                    change.kind.name(),
                    change.key,
                    commit.txn.commit_lsn
                ))
                .lsn(to)
                .detail("a restart would be forwarded past these changes: they would never be published"),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::core::change::{Change, ChangeKind};
    use crate::core::event::SourceOffset;
    use crate::core::ids::{Node, Row, Status, TableId};
    use crate::core::lsn::Lsn;
    use crate::core::observe::{Observation, TraceEvent};
    use crate::core::shared::{ByContent, CopyOnWrite};
    use crate::core::time::SimTime;
    use crate::core::wal::CommittedTxn;
    use crate::judge::checkers::Checkers;
    use crate::judge::oracle::Oracle;
    use crate::scenario::spec::Invariant;

    const CLAIMS: TableId = TableId(0);
    const OTHER: TableId = TableId(1);

    fn feed(checkers: &mut Checkers, at_ms: u64, observation: Observation) {
        checkers.observe(&TraceEvent { at: SimTime(at_ms), node: Node::Pg1, observation });
    }

    /// A one-row insert of `key` into `table`, its change at `lsn`, its commit record right after.
    fn insert(table: TableId, key: i64, csn: u64, lsn: u64) -> Observation {
        let after = Row::new(1, Status::Submitted, 100);
        let txn = CommittedTxn {
            xid: 700 + csn as u32,
            csn,
            first_lsn: Lsn(lsn),
            commit_lsn: Lsn(lsn + 0x40),
            end_lsn: Lsn(lsn + 0x70),
            commit_time: SimTime::ZERO,
            timeline: 1,
            changes: vec![Change { lsn: Lsn(lsn), table, key, kind: ChangeKind::Insert { after } }],
        };
        Observation::Committed { server: Node::Pg1, txn: ByContent(CopyOnWrite::new(txn)) }
    }

    fn stored_at(lsn: u64) -> Observation {
        let position = Some(Lsn(lsn));
        Observation::SourceOffsetStored {
            connector: "claims-connector".into(),
            offset: Some(SourceOffset {
                lsn: position,
                lsn_proc: position,
                lsn_commit: position,
                ..Default::default()
            }),
        }
    }

    fn confirmed(from: u64, to: u64) -> Observation {
        Observation::SlotConfirmed {
            server: Node::Pg1,
            slot: "debezium".into(),
            from: Lsn(from),
            to: Lsn(to),
            by: Node::Connect,
        }
    }

    fn i5(checkers: &Checkers) -> Vec<String> {
        checkers.findings().iter().filter(|f| f.invariant == Invariant::I5).map(|f| f.to_string()).collect()
    }

    /// A keep-alive confirmation far past the stored offset, over WAL of another database and of
    /// an uncaptured table only: no change is at risk, no I5 (before, every one was I5).
    #[test]
    fn a_keepalive_past_the_stored_offset_over_no_captured_change_is_no_violation() {
        let mut checkers = Checkers::new(Oracle::new(&[]), vec![CLAIMS]);
        feed(&mut checkers, 1, stored_at(0x1000));
        feed(&mut checkers, 2, insert(OTHER, 1, 1, 0x2000));
        feed(&mut checkers, 3, Observation::KeepaliveConfirmed { lsn: Lsn(0x9000_0000) });
        feed(&mut checkers, 4, confirmed(0x1000, 0x9000_0000));
        assert_eq!(i5(&checkers), Vec::<String>::new());
    }

    /// The same keep-alive with a captured insert in between that never reached Kafka: I5, about
    /// that insert.
    #[test]
    fn a_keepalive_past_a_captured_change_not_in_kafka_is_a_violation() {
        let mut checkers = Checkers::new(Oracle::new(&[]), vec![CLAIMS]);
        feed(&mut checkers, 1, stored_at(0x1000));
        feed(&mut checkers, 2, insert(CLAIMS, 7, 1, 0x2000));
        feed(&mut checkers, 3, Observation::KeepaliveConfirmed { lsn: Lsn(0x9000_0000) });
        feed(&mut checkers, 4, confirmed(0x1000, 0x9000_0000));
        let found = i5(&checkers);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("key 7"), "{found:?}");
        // A confirmation that stops before the change's commit record puts nothing at risk.
        let mut short = Checkers::new(Oracle::new(&[]), vec![CLAIMS]);
        feed(&mut short, 1, stored_at(0x1000));
        feed(&mut short, 2, insert(CLAIMS, 7, 1, 0x2000));
        feed(&mut short, 3, Observation::KeepaliveConfirmed { lsn: Lsn(0x2040) });
        feed(&mut short, 4, confirmed(0x1000, 0x2040));
        assert_eq!(i5(&short), Vec::<String>::new());
    }

    /// A keep-alive confirmed while no offset is stored (a re-snapshot's rows on their way to
    /// Kafka): under `snapshot.mode=initial` a restart snapshots again and reads the insert, so
    /// nothing is at risk; under `no_data` it would stream from the slot, past the insert: I5.
    #[test]
    fn a_keepalive_before_any_offset_is_stored_is_at_risk_only_where_a_restart_does_not_snapshot() {
        use crate::components::connect::debezium::SnapshotMode;
        for (mode, violations) in [(SnapshotMode::Initial, 0), (SnapshotMode::NoData, 1)] {
            let mut checkers = Checkers::new(Oracle::new(&[]), vec![CLAIMS]).snapshot_mode(mode);
            feed(&mut checkers, 1, insert(CLAIMS, 7, 1, 0x2000));
            feed(&mut checkers, 2, Observation::KeepaliveConfirmed { lsn: Lsn(0x3000) });
            feed(&mut checkers, 3, confirmed(0x1000, 0x3000));
            assert_eq!(i5(&checkers).len(), violations, "{}", mode.name());
        }
    }

    /// The connector's own confirmation past its stored offset is I5 even with nothing at risk in
    /// the model's Kafka (DBZ-7816: real Kafka acknowledges partitions independently).
    #[test]
    fn the_connectors_own_confirmation_past_the_stored_offset_is_a_violation() {
        let mut checkers = Checkers::new(Oracle::new(&[]), vec![CLAIMS]);
        feed(&mut checkers, 1, stored_at(0x1000));
        feed(&mut checkers, 2, confirmed(0x1000, 0x1800));
        assert_eq!(i5(&checkers).len(), 1);
        // Up to the stored offset: none.
        let mut within = Checkers::new(Oracle::new(&[]), vec![CLAIMS]);
        feed(&mut within, 1, stored_at(0x1000));
        feed(&mut within, 2, confirmed(0x800, 0x1000));
        assert_eq!(i5(&within), Vec::<String>::new());
    }

    /// A confirmation of the stored offset that arrives after a rebuild deleted the offsets (a
    /// slow link) is no violation: it was sent while the offset was stored.
    #[test]
    fn a_late_confirmation_after_the_offsets_were_deleted_is_no_violation() {
        let mut checkers = Checkers::new(Oracle::new(&[]), vec![CLAIMS]);
        feed(&mut checkers, 1, stored_at(0x1000));
        feed(&mut checkers, 2, Observation::SourceOffsetStored { connector: "claims-connector".into(), offset: None });
        feed(&mut checkers, 3, confirmed(0x800, 0x1000));
        assert_eq!(i5(&checkers), Vec::<String>::new());
    }
}
