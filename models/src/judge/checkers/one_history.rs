//! I4 one history: the snapshot rows equal the source at one log position S, and the stream
//! covers every commit after S.
//!
//! Verifies, on what Kafka holds (the change topics as a consumer could read them):
//! - the accepted snapshot — the last complete snapshot attempt, whoever published it — equals the
//!   surviving source at one commit position S: every row it holds was the document's row at S, and
//!   every document live at S is in it (the exported snapshot of `CREATE_REPLICATION_SLOT`,
//!   `SnapBuildExportSnapshot` in `src/backend/replication/logical/snapbuild.c`, plus the commits
//!   after its consistent point is the source's state, with no gap and no overlap);
//! - every surviving commit after S on a captured table, up to the last one the stream
//!   published, was published as streamed changes (a wall-clock start, a slot created after the
//!   read, a stream that started past S all leave a hole here);
//! - every published streamed change is a change of the surviving history (a change from a
//!   primary's lost tail after a failover is a phantom);
//! - at the boundary (when reached), no sink document is newer than the source or unknown to it.
//!
//! - every row an incremental snapshot published (`source.snapshot=incremental`: a table's
//!   history may start at its backfill, chunk by chunk) is a row of the source history, and no
//!   older than any streamed change of its key that Kafka held before it (DBLog's promise,
//!   reference debezium-postgres.md §6.2: a change committed before a chunk's open watermark is
//!   in its `SELECT`, a change inside the window removes the row from the buffer). A stale read
//!   is what the commit-visibility race behind the watermarks produces; after a streamed delete
//!   it is a resurrection. A blocking snapshot's rows are judged the same way: read at the current
//!   time while the stream waits, they are not a snapshot at the position their `source.lsn`
//!   names (the pause), and never the accepted snapshot.
//!
//! Does not verify: earlier, incomplete snapshot attempts (superseded; whether their rows
//! survive in the sink is I2's question); a tail the stream has not published yet (not a hole:
//! I1 at the boundary, I11 later).

use super::{Boundary, Evidence, Finding};
use crate::core::change::ChangeKind;
use crate::core::ids::Csn;
use crate::core::lsn::Lsn;
use crate::core::observe::{Doc, Observation};
use crate::core::time::SimTime;
use crate::judge::oracle::DocId;
use crate::scenario::spec::Invariant;

pub fn check(evidence: &Evidence, boundary: &Boundary, found: &mut Vec<Finding>) {
    phantoms(evidence, found);
    incremental_reads(evidence, found);
    if boundary.reached {
        completed_backfills(evidence, found);
    }
    let Some(position) = handoff_position(evidence, boundary, found) else { return };
    coverage(evidence, position, found);
    if boundary.reached {
        sink_phantoms(evidence, boundary, found);
    }
}

/// Where the accepted history starts: the accepted snapshot's position, or, without a
/// snapshot, the first stream start.
struct Position {
    csn: Csn,
    describe: String,
    /// The accepted snapshot's tables and its `source.lsn` (where its stream starts): a
    /// captured table it did not read (`snapshot.include.collection.list`) has no state at S,
    /// its history starts at the stream (or at its backfill), so only its commits from there on
    /// must be streamed. None: every captured table from S.
    read: Option<(std::collections::BTreeSet<crate::core::ids::TableId>, Lsn)>,
}

fn position_lsn(evidence: &Evidence, csn: Csn) -> Option<Lsn> {
    evidence.oracle.commit_by_csn(csn).map(|commit| commit.txn.end_lsn)
}

fn describe_csn(evidence: &Evidence, csn: Csn) -> String {
    match position_lsn(evidence, csn) {
        Some(lsn) => format!("{lsn} (after commit {csn})"),
        None => "the state before the run".into(),
    }
}

fn handoff_position(evidence: &Evidence, boundary: &Boundary, found: &mut Vec<Finding>) -> Option<Position> {
    let oracle = &evidence.oracle;
    let Some((index, attempt)) = evidence.published.accepted() else {
        let (_, start) = evidence.first_stream_start?;
        let csn =
            oracle.surviving().filter(|commit| commit.txn.commit_lsn < start).map(|c| c.txn.csn).max().unwrap_or(0);
        return Some(Position { csn, describe: format!("the first stream start {start}"), read: None });
    };
    let label = format!("snapshot attempt {} (source.lsn {}, {} rows)", index + 1, attempt.lsn, attempt.rows.len());
    // Every row pins S to the interval in which the document held it. The snapshot's rows and
    // the oracle's histories are both in document order: one walk pairs them, and keeps the
    // histories of the documents the snapshot does not hold for the second step.
    let mut lower: Csn = 0;
    let mut upper: Csn = Csn::MAX;
    let (mut lower_key, mut upper_key) = (None, None);
    let mut histories = oracle.histories().peekable();
    let mut absent: Vec<(DocId, &[crate::judge::oracle::Version])> = Vec::new();
    let mut keep_absent = |id: DocId, versions| {
        if attempt.tables.contains(&id.0) {
            absent.push((id, versions));
        }
    };
    for (id, row) in &attempt.rows {
        while let Some((other, versions)) = histories.next_if(|(other, _)| other < id) {
            keep_absent(other, versions);
        }
        let versions = histories.next_if(|(other, _)| other == id).map_or(&[][..], |(_, versions)| versions);
        match crate::judge::oracle::interval_of(versions, *row) {
            None => {
                found.push(
                    Finding::new(Invariant::I4, Some(id.1), attempt.first_at)
                        .on(id.0)
                        .expected(format!("{label} holds rows of the source history"))
                        .seen(format!(
                            "version {} ({}) is no row the surviving source ever had",
                            row.version,
                            row.status.name()
                        ))
                        .lsn(attempt.lsn),
                );
                return None;
            }
            Some((from, until)) => {
                if from > lower {
                    lower = from;
                    lower_key = Some(*id);
                }
                if until < upper {
                    upper = until;
                    upper_key = Some(*id);
                }
            }
        }
    }
    for (other, versions) in histories {
        keep_absent(other, versions);
    }
    if lower >= upper {
        found.push(inconsistent(evidence, &label, attempt.first_at, lower_key, upper_key, lower, upper));
        return None;
    }
    // Documents the snapshot does not hold must be absent at S.
    let mut csn = lower;
    loop {
        let mut moved = false;
        for (id, versions) in &absent {
            for (from, until) in crate::judge::oracle::live_intervals(versions) {
                if from <= csn && csn < until {
                    if until >= upper {
                        found.push(
                            Finding::new(Invariant::I4, Some(id.1), attempt.first_at).on(id.0)
                                .expected(format!("{label} equals the source at one position"))
                                .seen(format!(
                                    "the row is missing although it was live at every position the other rows allow ({} .. {})",
                                    describe_csn(evidence, lower),
                                    describe_csn(evidence, upper.saturating_sub(1))
                                ))
                                .lsn(attempt.lsn),
                        );
                        return None;
                    }
                    csn = until;
                    moved = true;
                }
            }
        }
        if !moved {
            break;
        }
    }
    let _ = boundary;
    Some(Position {
        csn,
        describe: format!("{label}, the source at {}", describe_csn(evidence, csn)),
        read: Some((attempt.tables.clone(), attempt.lsn)),
    })
}

fn inconsistent(
    evidence: &Evidence,
    label: &str,
    at: SimTime,
    lower_key: Option<DocId>,
    upper_key: Option<DocId>,
    lower: Csn,
    upper: Csn,
) -> Finding {
    let finding = Finding::new(Invariant::I4, lower_key.map(|id| id.1), at);
    let finding = match lower_key {
        Some(id) => finding.on(id.0),
        None => finding,
    };
    finding.expected(format!("{label} equals the source at one position")).seen(format!(
        "key {} holds a row from {} or later, key {} a row replaced by {}",
        lower_key.map_or("?".into(), |id| evidence.names.key_of(id.0, id.1)),
        describe_csn(evidence, lower),
        upper_key.map_or("?".into(), |id| evidence.names.key_of(id.0, id.1)),
        describe_csn(evidence, upper)
    ))
}

fn coverage(evidence: &Evidence, position: Position, found: &mut Vec<Finding>) {
    let oracle = &evidence.oracle;
    // The stream's reach: the last surviving commit it published a change of.
    let reach = evidence
        .published
        .changes
        .iter()
        .filter_map(|((lsn, id), change)| oracle.find_change(*lsn, *id, change.after))
        .filter(|commit| !commit.lost)
        .map(|commit| commit.txn.csn)
        .max();
    let Some(reach) = reach else { return };
    let mut missing = Vec::new();
    for commit in oracle.surviving().filter(|commit| commit.txn.csn > position.csn && commit.txn.csn <= reach) {
        let unpublished: Vec<_> = commit
            .txn
            .changes
            .iter()
            .filter(|change| evidence.expects(change.table, commit.txn.commit_lsn))
            .filter(|change| match &position.read {
                Some((tables, stream_start)) => {
                    tables.contains(&change.table) || commit.txn.commit_lsn >= *stream_start
                }
                None => true,
            })
            .filter(|change| {
                !evidence.published.has_change(change.lsn, (change.table, change.key), change.kind.after())
            })
            .collect();
        if !unpublished.is_empty() {
            missing.push((commit, unpublished));
        }
    }
    let Some((first, changes)) = missing.first() else { return };
    let last = missing.last().map(|(commit, _)| commit).expect("non-empty");
    let keys: Vec<String> = missing
        .iter()
        .flat_map(|(_, changes)| changes.iter().map(|c| format!("{} {}", c.kind.name(), c.key)))
        .take(6)
        .collect();
    found.push(
        Finding::new(Invariant::I4, Some(changes[0].key), first.at)
            .on(changes[0].table)
            .expected(format!("every commit after {} streamed", position.describe))
            .seen(format!(
                "{} commit(s) from {} to {} never published ({}{})",
                missing.len(),
                first.txn.commit_lsn,
                last.txn.commit_lsn,
                keys.join(", "),
                if missing.len() > 6 { ", …" } else { "" }
            ))
            .lsn(first.txn.commit_lsn)
            .detail(hole_detail(evidence, &position, first.txn.commit_lsn)),
    );
}

/// What the hole's place says: before the first change the stream published (the stream started
/// past the handoff position), or between published changes (the stream skipped them). Either
/// way they are after the handoff position: in no snapshot and no stream.
fn hole_detail(evidence: &Evidence, position: &Position, first_missing: Lsn) -> String {
    let first_streamed = evidence
        .published
        .changes
        .iter()
        .filter_map(|((lsn, id), change)| evidence.oracle.find_change(*lsn, *id, change.after))
        .filter(|commit| !commit.lost)
        .map(|commit| commit.txn.commit_lsn)
        .min();
    match first_streamed {
        Some(first) if first > first_missing => format!(
            "the stream's first published change committed at {first}, after them: it started past {}, so these \
             changes are in neither the snapshot nor the stream",
            position.describe
        ),
        _ => "the stream published changes before and after them but not these: it skipped them, and they are in \
              neither the snapshot nor the stream"
            .into(),
    }
}

fn phantoms(evidence: &Evidence, found: &mut Vec<Finding>) {
    for ((lsn, id), change) in &evidence.published.changes {
        if !evidence.captured.contains(&id.0) {
            continue;
        }
        match evidence.oracle.find_change(*lsn, *id, change.after) {
            Some(commit) if !commit.lost => {}
            Some(commit) => found.push(
                Finding::new(Invariant::I4, Some(id.1), change.at)
                    .on(id.0)
                    .expected("published changes belong to the surviving source history")
                    .seen(format!(
                        "a phantom {} committed on {} at {} ({lsn}) and lost in the failover",
                        commit.txn.changes.iter().find(|c| c.lsn == *lsn).map_or("change", |c| c.kind.name()),
                        commit.server,
                        commit.at
                    ))
                    .lsn(*lsn),
            ),
            None => found.push(
                Finding::new(Invariant::I4, Some(id.1), change.at)
                    .on(id.0)
                    .expected("published changes belong to the source history")
                    .seen(format!("a change at {lsn} that no commit made"))
                    .lsn(*lsn),
            ),
        }
    }
}

/// The first connector's incremental snapshot table scans, from its task's observations: per
/// table, its last scan. Kept small (the exhaustive lens hashes it with every state): where a
/// scan began is its first chunk's open watermark, a commit the source history holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct BackfillScans {
    tables: std::collections::BTreeMap<crate::core::ids::TableId, TableScan>,
}

/// One table's last incremental scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
struct TableScan {
    /// The chunk whose open watermark began it (a scan read on after a restart keeps it).
    first_chunk: crate::core::signal::ChunkId,
    /// Its chunk queries' `additional-conditions` and ordering column.
    filter: crate::core::signal::QueryFilter,
    order: crate::core::signal::ChunkOrder,
    /// How its bounds treated a NULL key (a nullable `message.key.columns` column).
    #[serde(default, skip_serializing_if = "crate::core::signal::ChunkNulls::is_none")]
    nulls: crate::core::signal::ChunkNulls,
    /// Ended `SUCCEEDED`.
    succeeded: bool,
}

impl BackfillScans {
    /// One observation of the first connector's task.
    pub fn observe(&mut self, observation: &Observation) {
        match observation {
            // A new snapshot: its tables' scans begin again.
            Observation::IncrementalSnapshotStarted { tables } => {
                self.tables.retain(|table, _| !tables.contains(table));
            }
            Observation::ChunkRead { table, chunk, filter, order, nulls, .. } => {
                let scan = self.tables.entry(*table).or_insert(TableScan {
                    first_chunk: *chunk,
                    filter: *filter,
                    order: *order,
                    nulls: *nulls,
                    succeeded: false,
                });
                // A scan read again (a restart reading on from the stored key) is not complete
                // until it ends again.
                scan.succeeded = false;
                (scan.filter, scan.order, scan.nulls) = (*filter, *order, *nulls);
            }
            Observation::IncrementalTableScanned { table, status, .. } => {
                if *status == crate::core::signal::ScanStatus::Succeeded
                    && let Some(scan) = self.tables.get_mut(table)
                {
                    scan.succeeded = true;
                } else {
                    self.tables.remove(table);
                }
            }
            // A task without offsets (a rebuild, deleted offsets) begins a new history: what the
            // previous one's backfills read, or lost with their unsent records, binds it no more.
            Observation::TaskStarted { offset: None } => self.tables.clear(),
            _ => {}
        }
    }
}

/// A backfill that completed (`SUCCEEDED`) promises its table's rows: every row the table held
/// unchanged from its first chunk's open watermark to the end of the history, and that matches
/// its `additional-conditions`, is in Kafka as a snapshot read or as the streamed change
/// that made it (a table's history starts at its backfill). Judged at the boundary, when what
/// the connector emitted has reached Kafka; one finding per table. (Any read of the row by an
/// incremental or a blocking snapshot counts, an earlier one's too: the check can miss, never
/// invent.) Debezium's chunks,
/// ordered and bounded by a unique key, cover the table; a `surrogate-key` column with repeated
/// values does not (the next chunk starts strictly after the last value read, reference
/// debezium-postgres.md §6.4).
fn completed_backfills(evidence: &Evidence, found: &mut Vec<Finding>) {
    use crate::core::signal::{Watermark, watermark_key};
    for (table, scan) in &evidence.backfill_scans.tables {
        if !scan.succeeded {
            continue;
        }
        let open = watermark_key(scan.first_chunk, Watermark::Open);
        let Some(opened) = evidence.oracle.surviving().find(|commit| {
            commit
                .txn
                .changes
                .iter()
                .any(|change| change.key == open && matches!(change.kind, ChangeKind::Insert { .. }))
        }) else {
            continue;
        };
        let (start, at) = (opened.txn.csn, opened.at);
        let end = evidence.oracle.last_csn;
        let mut streamed: std::collections::BTreeMap<crate::core::ids::Key, Vec<crate::core::ids::Row>> =
            Default::default();
        for ((_, (of, key)), change) in &evidence.published.changes {
            if of == table
                && let Some(row) = change.after
            {
                streamed.entry(*key).or_default().push(row);
            }
        }
        let read: std::collections::BTreeSet<crate::core::ids::Key> =
            evidence.published.incremental.iter().filter(|read| read.id.0 == *table).map(|read| read.id.1).collect();
        let mut missing = Vec::new();
        for ((of, key), _) in evidence.oracle.histories() {
            if of != *table || read.contains(&key) {
                continue;
            }
            let (Some(before), Some(after)) =
                (evidence.oracle.row_at((of, key), start), evidence.oracle.row_at((of, key), end))
            else {
                continue;
            };
            let matches = scan.filter.0.is_none_or(|filter| filter.matches(key, &after));
            if before == after && matches && !streamed.get(&key).is_some_and(|rows| rows.contains(&after)) {
                missing.push(key);
            }
        }
        let Some(first) = missing.first() else { continue };
        let name = evidence.names.table(*table);
        let shown: Vec<String> = missing.iter().take(8).map(|key| evidence.names.key_values(*table, *key)).collect();
        let more = if missing.len() > 8 { format!(" and {} more", missing.len() - 8) } else { String::new() };
        let composite = evidence
            .names
            .composite_key(*table)
            .filter(|_| evidence.names.per_column_chunks && scan.order.is_primary_key());
        let why = if let Some(key) = composite {
            let [first, second] = &key.columns;
            format!(
                "its chunk queries compared each key column on its own, as Debezium did before 1.8 (DBZ-3860, fixed in \
                 1.8.0.Alpha1): after a chunk ending at ({first}, {second}) = (a, b) the next reads {first} >= a AND \
                 {second} >= b, so a row with a larger {first} but a smaller {second} is never read, and the upper \
                 bound {first} <= m1 AND {second} <= m2 leaves out rows whose {second} is above the maximum key's \
                 (reference debezium-postgres.md §9 row 13)"
            )
        } else if scan.nulls == crate::core::signal::ChunkNulls::Unaware
            && let Some(column) = evidence.names.message_key_column(*table)
        {
            format!(
                "its chunks were ordered and bounded by {column} (message.key.columns), a nullable column, with \
                 the comparisons Debezium made before 2.6 (DBZ-5071, fixed in 2.6.0.Beta1): the maximum key, the \
                 first row of ORDER BY {column} DESC, is the NULL row (PostgreSQL sorts NULLs first descending), \
                 and every chunk after the first is bounded by NOT ({column} > NULL), which is unknown for every \
                 row, so it reads nothing and the table counts as done after its first chunk (reference \
                 debezium-postgres.md §9 row 14)"
            )
        } else if evidence.names.null_key(*table) {
            format!(
                "the table has no primary key and message.key.columns gives it none, so its records' key is null; \
                 the chunks, ordered and bounded by the surrogate-key `{}`, read every row, but the window buffer \
                 (a LinkedHashMap by message key: readChunk puts each row under tableSchema.keyFromColumnData(row), \
                 null here) holds one entry, each row replacing the one before, so each window emits only its \
                 chunk's last row (AbstractIncrementalSnapshotChangeEventSource.readChunk, read from the code; \
                 a streamed change deduplicates nothing either, deduplicateWindow removing Struct keys only)",
                scan.order.name()
            )
        } else if scan.order.is_primary_key() {
            "the chunks did not cover the table's keys".to_string()
        } else {
            format!(
                "its chunks were ordered and bounded by the surrogate-key `{}`, whose values repeat: each chunk \
                 query starts strictly after the last value the previous chunk read, so rows sharing that value \
                 beyond the chunk's limit are never read (reference debezium-postgres.md §6.4)",
                scan.order.name()
            )
        };
        found.push(
            Finding::new(Invariant::I4, Some(*first), at)
                .on(*table)
                .expected(
                    "a backfill that completed holds every row of its table (a table's history may start at its \
                     backfill, not after a hole in it)",
                )
                .seen(format!(
                    "the incremental snapshot of {name} ended SUCCEEDED, yet {} row(s) no change touched since it \
                     began are in no record: key(s) {}{more}",
                    missing.len(),
                    shown.join(", ")
                ))
                .lsn(opened.txn.commit_lsn)
                .detail(why),
        );
    }
}

/// A streamed change of a document: its append sequence, its LSN, its commit's csn and end, and
/// whether it deleted.
type StreamedOf = (u64, Lsn, Csn, Lsn, &'static str);

/// Incremental snapshot reads against the source history and the changes streamed before them
/// (see the module's comment). One finding per document.
fn incremental_reads(evidence: &Evidence, found: &mut Vec<Finding>) {
    let reads = &evidence.published.incremental;
    if reads.is_empty() {
        return;
    }
    let docs: std::collections::BTreeSet<DocId> = reads.iter().map(|read| read.id).collect();
    // The streamed changes of those documents, with the commit each belongs to.
    let mut streamed: std::collections::BTreeMap<DocId, Vec<StreamedOf>> = Default::default();
    for ((lsn, id), change) in &evidence.published.changes {
        if !docs.contains(id) {
            continue;
        }
        if let Some(commit) = evidence.oracle.find_change(*lsn, *id, change.after).filter(|commit| !commit.lost) {
            let kind = if change.after.is_none() { "delete" } else { "change" };
            streamed.entry(*id).or_default().push((change.seq, *lsn, commit.txn.csn, commit.txn.commit_lsn, kind));
        }
    }
    let mut reported = std::collections::BTreeSet::new();
    for read in reads {
        if reported.contains(&read.id) {
            continue;
        }
        let versions = evidence.oracle.versions(read.id);
        let which = if read.blocking { "blocking" } else { "incremental" };
        let Some((_, until)) = crate::judge::oracle::interval_of(versions, read.row) else {
            reported.insert(read.id);
            found.push(
                Finding::new(Invariant::I4, Some(read.id.1), read.at)
                    .on(read.id.0)
                    .expected(format!("{which} snapshot rows are rows of the source history"))
                    .seen(format!(
                        "version {} ({}) read by the {which} snapshot is no row the surviving source ever had",
                        read.row.version,
                        read.row.status.name()
                    ))
                    .lsn(read.lsn),
            );
            continue;
        };
        let newer = streamed
            .get(&read.id)
            .into_iter()
            .flatten()
            .filter(|(seq, _, csn, _, _)| *seq < read.seq && *csn >= until)
            .min_by_key(|(_, _, csn, _, _)| *csn);
        if let Some((_, lsn, _, commit_lsn, kind)) = newer {
            reported.insert(read.id);
            let detail = if read.blocking {
                format!(
                    "the change's commit ({commit_lsn}) was streamed before the blocking snapshot paused the stream, \
                     yet its SELECT did not see it"
                )
            } else if evidence.names.read_only {
                format!(
                    "the change's commit ({commit_lsn}) was streamed before the chunk's low watermark, yet the \
                     chunk's SELECT did not see it: its transaction was in the WAL but not yet visible, still \
                     running in pg_current_snapshot() (the read-only window deduplicates only the changes streamed \
                     after the low watermark); nothing in the window removed the stale row"
                )
            } else {
                format!(
                    "the change's commit ({commit_lsn}) was streamed before the chunk's window opened, yet the \
                     chunk's SELECT did not see it: its transaction was in the WAL before the open watermark but \
                     not yet visible (the watermarks assume commit order is visibility order); nothing in the \
                     window removed the stale row"
                )
            };
            found.push(
                Finding::new(Invariant::I4, Some(read.id.1), read.at)
                    .on(read.id.0)
                    .expected(format!(
                        "a{} {which} snapshot row is never older than a change of its key streamed before it",
                        if read.blocking { "" } else { "n" }
                    ))
                    .seen(format!(
                        "the {which} snapshot emitted version {} ({}) after the stream had published the {kind} \
                         at {lsn} that replaced it{}",
                        read.row.version,
                        read.row.status.name(),
                        if *kind == "delete" { ": the deleted row comes back" } else { "" }
                    ))
                    .lsn(*lsn)
                    .detail(detail),
            );
        }
    }
}

fn sink_phantoms(evidence: &Evidence, boundary: &Boundary, found: &mut Vec<Finding>) {
    for (id, doc) in boundary.sink.iter() {
        let Doc::Live(row) = doc else { continue };
        if !evidence.captured.contains(&id.0) {
            continue;
        }
        let known = evidence.oracle.versions(*id).iter().any(|version| version.row == Some(*row));
        if !known {
            let source = evidence.oracle.current(*id);
            found.push(
                Finding::new(Invariant::I4, Some(id.1), boundary.at)
                    .on(id.0)
                    .expected(match source {
                        Some(source) => format!("version {} as in the source", source.version),
                        None => "absent: the source never had this row".into(),
                    })
                    .seen(format!(
                        "version {} ({}), a row the surviving source never had",
                        row.version,
                        row.status.name()
                    )),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::components::sink::DocList;
    use crate::core::change::{Change, ChangeKind};
    use crate::core::event::{ChangeEvent, KafkaRecord, Op, Origin, SnapshotMarker, SourceInfo, Topic, TopicPartition};
    use crate::core::ids::{Node, Row, Status, TableId};
    use crate::core::lsn::Lsn;
    use crate::core::observe::{Doc, Observation, TraceEvent};
    use crate::core::shared::{ByContent, CopyOnWrite};
    use crate::core::time::SimTime;
    use crate::core::wal::CommittedTxn;
    use crate::judge::checkers::{Boundary, Checkers, RunEnd};
    use crate::judge::oracle::Oracle;
    use crate::scenario::spec::Invariant;

    const HUBS: TableId = TableId(0);

    fn row(version: u32) -> Row {
        Row::new(version, Status::Submitted, 1)
    }

    fn record(offset: u64, op: Op, after: Option<Row>, lsn: u64, snapshot: SnapshotMarker) -> KafkaRecord {
        KafkaRecord {
            tp: TopicPartition { topic: Topic::Change(HUBS), partition: 0 },
            offset,
            key: 1,
            value: Some(ChangeEvent {
                op,
                before: None,
                after,
                source: SourceInfo {
                    connector: Origin::Postgresql,
                    table: HUBS,
                    lsn: Lsn(lsn),
                    tx_id: None,
                    snapshot,
                    ts_ms: 0,
                },
            }),
        }
    }

    /// Hub 1, loaded at version 1, deleted (change at 0/200). The stream publishes the delete;
    /// then an incremental snapshot's read of version 1 comes (`stale`), or came before it.
    fn i4_of(stale: bool) -> Vec<String> {
        let mut checkers = Checkers::new(Oracle::new(&[(HUBS, 1, row(1))]), vec![HUBS]);
        let txn = CommittedTxn {
            xid: 740,
            csn: 1,
            first_lsn: Lsn(0x200),
            commit_lsn: Lsn(0x210),
            end_lsn: Lsn(0x220),
            commit_time: SimTime(1_000),
            timeline: 1,
            changes: vec![Change { lsn: Lsn(0x200), table: HUBS, key: 1, kind: ChangeKind::Delete { before: None } }],
        };
        let at = |ms| SimTime(ms);
        checkers.observe(&TraceEvent {
            at: at(1_000),
            node: Node::Pg1,
            observation: Observation::Committed { server: Node::Pg1, txn: ByContent(CopyOnWrite::new(txn)) },
        });
        let delete = record(0, Op::Delete, None, 0x200, SnapshotMarker::Streamed);
        let read = record(1, Op::Read, Some(row(1)), 0x300, SnapshotMarker::Incremental);
        let order = if stale { [delete, read] } else { [read, delete] };
        for (index, record) in order.into_iter().enumerate() {
            checkers.observe(&TraceEvent {
                at: at(2_000 + index as u64),
                node: Node::Kafka,
                observation: Observation::Appended { records: vec![record], transaction: None },
            });
        }
        let sink: DocList = vec![((HUBS, 1), Doc::Tombstone(Some(1)))].into();
        checkers.finish(&Boundary { at: at(9_000), reached: true, reason: String::new(), end: RunEnd::CaughtUp, sink });
        checkers.findings().iter().filter(|f| f.invariant == Invariant::I4).map(|f| f.to_string()).collect()
    }

    /// DBLog's promise (reference debezium-postgres.md §6.2): an incremental snapshot row is never
    /// older than a change of its key streamed before it. A read of a deleted row after the
    /// streamed delete is a resurrection (what the commit-visibility race produces); the same read
    /// before the delete is history in order.
    #[test]
    fn an_incremental_read_older_than_a_change_streamed_before_it_is_an_i4_finding() {
        let found = i4_of(true);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("the deleted row comes back"), "{}", found[0]);
        assert!(found[0].contains("not yet visible"), "{}", found[0]);
        assert!(i4_of(false).is_empty());
    }
}
