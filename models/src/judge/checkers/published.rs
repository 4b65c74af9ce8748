//! What Kafka durably holds, indexed for the checkers: streamed change records by change LSN and
//! document, and snapshot attempts.
//!
//! A snapshot attempt is recognised from the records alone, as a consumer could: a record with
//! `source.snapshot=first` opens one; the following snapshot records with the same
//! `source.connector` and `source.lsn` belong to it; `source.snapshot=last` completes it.

use crate::core::event::{KafkaRecord, Op, Origin, SnapshotMarker, Topic};
use crate::core::ids::{Row, TableId};
use crate::core::lsn::Lsn;
use crate::core::time::SimTime;
use crate::judge::oracle::DocId;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Items held per producer id until their Kafka transaction ends: a `read_committed` consumer is
/// given a transaction's records only once it commits, never when it aborts.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HeldByTransaction<T>(Vec<(u32, Vec<T>)>);

impl<T> Default for HeldByTransaction<T> {
    fn default() -> HeldByTransaction<T> {
        HeldByTransaction(Vec::new())
    }
}

impl<T> HeldByTransaction<T> {
    /// Holds `items`, written in producer `producer`'s open transaction.
    pub fn hold(&mut self, producer: u32, items: impl IntoIterator<Item = T>) {
        match self.0.iter_mut().find(|(of, _)| *of == producer) {
            Some((_, held)) => held.extend(items),
            None => self.0.push((producer, items.into_iter().collect())),
        }
    }

    /// What producer `producer`'s transaction held, now that it has ended (empty if nothing).
    pub fn end(&mut self, producer: u32) -> Vec<T> {
        match self.0.iter().position(|(of, _)| *of == producer) {
            Some(index) => self.0.remove(index).1,
            None => Vec::new(),
        }
    }

    /// What transactions still open hold.
    pub fn into_held(self) -> impl Iterator<Item = T> {
        self.0.into_iter().flat_map(|(_, held)| held)
    }
}

/// One snapshot attempt as published.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Attempt {
    pub origin: Origin,
    /// Its `source.lsn`.
    pub lsn: Lsn,
    pub rows: AttemptRows,
    pub tables: BTreeSet<TableId>,
    pub complete: bool,
    pub first_at: SimTime,
    /// Append sequence of its last record so far.
    pub last_seq: u64,
}

/// The rows of a snapshot attempt by document, the last record of each document winning.
/// A sorted vector: a snapshot publishes its rows in scan (key) order, so nearly every insert is
/// a push at the end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AttemptRows(Vec<(DocId, Row)>);

impl AttemptRows {
    pub fn insert(&mut self, id: DocId, row: Row) {
        match self.0.last() {
            Some((last, _)) if *last >= id => match self.0.binary_search_by(|(other, _)| other.cmp(&id)) {
                Ok(index) => self.0[index].1 = row,
                Err(index) => self.0.insert(index, (id, row)),
            },
            _ => self.0.push((id, row)),
        }
    }

    pub fn contains_key(&self, id: &DocId) -> bool {
        self.0.binary_search_by(|(other, _)| other.cmp(id)).is_ok()
    }

    pub fn get(&self, id: &DocId) -> Option<&Row> {
        self.0.binary_search_by(|(other, _)| other.cmp(id)).ok().map(|index| &self.0[index].1)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The rows in document order.
    pub fn iter(&self) -> impl Iterator<Item = (&DocId, &Row)> + '_ {
        self.0.iter().map(|(id, row)| (id, row))
    }
}

impl<'a> IntoIterator for &'a AttemptRows {
    type Item = (&'a DocId, &'a Row);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (DocId, Row)>, fn(&'a (DocId, Row)) -> (&'a DocId, &'a Row)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(id, row)| (id, row))
    }
}

/// A streamed change as published.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PublishedChange {
    pub op: Op,
    pub after: Option<Row>,
    /// When it was first appended.
    pub at: SimTime,
    pub seq: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Published {
    seq: u64,
    /// Streamed Debezium changes by (change LSN, document); the first append of each.
    pub changes: BTreeMap<(Lsn, DocId), PublishedChange>,
    pub attempts: Vec<Attempt>,
    /// Logical decoding messages on `<topic.prefix>.message` (`op=m`), by the message's LSN
    /// (`source.lsn`): when the first record of each was appended.
    pub messages: BTreeMap<Lsn, SimTime>,
    /// Outbox events routed to their topics (the `EventRouter`'s), by outbox row: a record of a
    /// Kafka transaction counts once the transaction commits (what a `read_committed` consumer
    /// can ever read of it); an aborted one's never.
    pub routed: BTreeMap<DocId, RoutedEvent>,
    /// Routed records of open transactions.
    routed_open: HeldByTransaction<DocId>,
    /// Incremental snapshot reads (`source.snapshot=incremental`), in append order.
    pub incremental: Vec<IncrementalRead>,
}

/// One `op=r` record of an incremental or a blocking snapshot as appended: a row read while
/// the stream runs (or waits), not part of a snapshot at one source position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IncrementalRead {
    pub id: DocId,
    pub row: Row,
    /// Its `source.lsn`: where the stream was when its window closed (a blocking snapshot's:
    /// where streaming paused).
    pub lsn: Lsn,
    pub at: SimTime,
    pub seq: u64,
    /// A blocking snapshot's row.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blocking: bool,
}

/// An outbox event on its routed topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RoutedEvent {
    /// When its first record was appended.
    pub first_at: SimTime,
    /// When its latest record was appended, and the append sequence then (the exhaustive lens
    /// has no time: the sequence orders its appends and the replay windows).
    pub last_at: SimTime,
    pub last_seq: u64,
    /// How many records of it were appended (more than one: a replay, or a snapshot read that
    /// routed the row again).
    pub records: u32,
}

impl Published {
    /// How many records have been appended so far (the sequence of the latest).
    pub fn sequence(&self) -> u64 {
        self.seq
    }

    /// Records appended, in a Kafka transaction of producer `transaction` or outside one.
    pub fn append(&mut self, at: SimTime, records: &[KafkaRecord], transaction: Option<u32>) {
        // Records of one append mostly belong to one attempt and one table: the attempt found
        // for the previous record is tried first.
        let mut current: Option<(usize, TableId)> = None;
        for record in records {
            self.seq += 1;
            let Some(event) = record.value else { continue };
            if record.tp.topic == Topic::Message {
                self.messages.entry(event.source.lsn).or_insert(at);
                continue;
            }
            // Another connector's messages are not the pipeline's (I1 judges the first's).
            if let Topic::MessageOf(_) = record.tp.topic {
                continue;
            }
            if let Topic::Routed(_) = record.tp.topic {
                let id = (event.source.table, record.key);
                match transaction {
                    None => self.route(at, id),
                    Some(producer) => self.routed_open.hold(producer, [id]),
                }
                continue;
            }
            let id = (event.source.table, record.key);
            if event.source.snapshot == SnapshotMarker::Streamed {
                self.changes.entry((event.source.lsn, id)).or_insert(PublishedChange {
                    op: event.op,
                    after: event.after,
                    at,
                    seq: self.seq,
                });
                continue;
            }
            let Some(row) = event.after else { continue };
            if matches!(event.source.snapshot, SnapshotMarker::Incremental | SnapshotMarker::Blocking) {
                let blocking = event.source.snapshot == SnapshotMarker::Blocking;
                self.incremental.push(IncrementalRead { id, row, lsn: event.source.lsn, at, seq: self.seq, blocking });
                continue;
            }
            let (origin, lsn) = (event.source.connector, event.source.lsn);
            let same = |attempt: &Attempt| attempt.origin == origin && attempt.lsn == lsn && !attempt.complete;
            let open = match current {
                Some((index, _)) if same(&self.attempts[index]) => Some(index),
                _ => self.attempts.iter().rposition(same),
            };
            let index = match (event.source.snapshot, open) {
                (SnapshotMarker::First, _) | (_, None) => {
                    self.attempts.push(Attempt {
                        origin,
                        lsn,
                        rows: AttemptRows::default(),
                        tables: BTreeSet::new(),
                        complete: false,
                        first_at: at,
                        last_seq: self.seq,
                    });
                    self.attempts.len() - 1
                }
                (_, Some(index)) => index,
            };
            let attempt = &mut self.attempts[index];
            attempt.rows.insert(id, row);
            if current != Some((index, id.0)) {
                attempt.tables.insert(id.0);
                current = Some((index, id.0));
            }
            attempt.last_seq = self.seq;
            if event.source.snapshot.is_last() {
                attempt.complete = true;
            }
        }
    }

    fn route(&mut self, at: SimTime, id: DocId) {
        let routed =
            self.routed.entry(id).or_insert(RoutedEvent { first_at: at, last_at: at, last_seq: 0, records: 0 });
        routed.records += 1;
        routed.last_at = at;
        routed.last_seq = self.seq;
    }

    /// A Kafka transaction of producer `producer` ended: its routed records count if it committed.
    pub fn transaction_ended(&mut self, at: SimTime, producer: u32, committed: bool) {
        let ids = self.routed_open.end(producer);
        if committed {
            for id in ids {
                self.route(at, id);
            }
        }
    }

    /// Whether the streamed change (LSN, document, row after) is in Kafka.
    pub fn has_change(&self, lsn: Lsn, id: DocId, after: Option<Row>) -> bool {
        self.changes.get(&(lsn, id)).is_some_and(|change| change.after == after)
    }

    /// The last complete snapshot attempt, in append order.
    pub fn accepted(&self) -> Option<(usize, &Attempt)> {
        self.attempts.iter().enumerate().filter(|(_, attempt)| attempt.complete).max_by_key(|(_, a)| a.last_seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::Status;

    #[test]
    fn attempt_rows_behave_as_a_map_whatever_the_order() {
        let row = |version| Row::new(version, Status::Submitted, 1);
        let mut rows = AttemptRows::default();
        let mut map = BTreeMap::new();
        // In order, a repeat (a producer retry), then out of order.
        for (key, version) in [(1, 1), (2, 1), (5, 1), (5, 2), (3, 1), (1, 3), (9, 1), (0, 1)] {
            rows.insert((TableId(0), key), row(version));
            map.insert((TableId(0), key), row(version));
        }
        assert_eq!(rows.iter().map(|(id, row)| (*id, *row)).collect::<Vec<_>>(), map.into_iter().collect::<Vec<_>>());
        assert!(rows.contains_key(&(TableId(0), 3)) && !rows.contains_key(&(TableId(0), 4)));
        assert_eq!(rows.len(), 6);
    }
}
