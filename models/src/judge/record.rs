//! The handoff record: the audit record a run ends with, at its acceptance boundary (the README's
//! "What a run prints").
//!
//! Source tables and schema revision; the connector configuration; the snapshot completion marker
//! and its source log position; the sink's key rule and checkpoint; the restart test's outcome;
//! the failover gate's outcome; whether a rebuild from a new snapshot was taken; and the
//! reconciliation of the source (the bounded query `SELECT id, version, status, amount FROM …` at
//! the boundary) against the sink: row counts, keys missing and extra, keys whose content
//! differs, and sampled content hashes — a count match can hide wrong rows.

use crate::core::event::{SourceOffset, Topic, TopicPartition};
use crate::core::fault::FaultAction;
use crate::core::ids::{Key, Row, TableId};
use crate::core::lsn::Lsn;
use crate::core::observe::{Doc, GateVerdict, Observation, TraceEvent};
use crate::core::time::SimTime;
use crate::judge::checkers::{Boundary, RunEnd};
use crate::judge::oracle::Oracle;
use crate::scenario::spec::Spec;
use crate::scenario::workload::{Draw, stream};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotMarkerRecord {
    /// When the connector finished reading its last snapshot.
    pub completed_at: SimTime,
    /// That snapshot's log position (`lsn` of its offsets).
    pub lsn: Lsn,
    /// What became of the completion marker: stored by an offset flush, superseded before any
    /// flush by a streaming offset (Debezium keeps the marker only in the last snapshot record's
    /// offset), or never stored.
    pub marker: String,
    /// The same, typed.
    pub marker_outcome: MarkerOutcome,
}

/// What became of a snapshot's completion marker (`{"kind": "stored", "at_ms": 10001}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum MarkerOutcome {
    /// No offset flush after the snapshot completed.
    NotStored,
    /// An offset flush stored `snapshot_completed=true`.
    Stored { at_ms: u64 },
    /// The first offset stored after it was already a streaming offset (`offset`).
    Superseded { at_ms: u64, offset: String },
}

impl MarkerOutcome {
    /// The record's sentence.
    pub fn sentence(&self) -> String {
        match self {
            MarkerOutcome::NotStored => "not stored: no offset flush after it".into(),
            MarkerOutcome::Stored { at_ms } => format!("snapshot_completed=true stored at {}", SimTime(*at_ms)),
            MarkerOutcome::Superseded { at_ms, offset } => format!(
                "completed; the first offset stored after it, at {}, is already a streaming offset ({offset})",
                SimTime(*at_ms)
            ),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartTest {
    pub snapshot_attempts: u32,
    /// A kill or stop hit while a snapshot was not yet recorded complete.
    pub restarted_during_snapshot: bool,
    pub outcome: String,
    /// The outcome, typed.
    pub result: RestartResult,
}

/// The restart test's outcome (`{"kind": "failed", "keys_missing": 1, ...}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RestartResult {
    /// No restart hit an incomplete snapshot.
    NotRun,
    /// A restart hit one, but the run did not reach its acceptance boundary.
    Undecided,
    /// The index matches the bounded source query.
    Passed,
    /// It does not: so many keys missing, extra (resurrected) and differing.
    Failed { keys_missing: usize, keys_extra: usize, keys_differing: usize },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailoverGateRecord {
    pub promoted_at: SimTime,
    pub switch_lsn: Lsn,
    /// The saved offset and the new source's slot position as the gate compared them.
    pub saved_offset: Option<String>,
    pub new_source_slot: Option<String>,
    pub outcome: String,
    /// The outcome, typed.
    pub result: GateResult,
}

/// The failover gate's outcome (`{"kind": "rebuilt-from-new-snapshot"}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum GateResult {
    /// No gate ran: the connector decided by itself.
    NoGate,
    /// The resume position was available: the connector resumed.
    Resumed,
    /// Unavailable: rebuilt from a new snapshot.
    RebuiltFromNewSnapshot,
    /// Unavailable: rebuilt on a new slot without a snapshot (`snapshot.mode=no_data`).
    RebuiltWithoutSnapshot,
    /// Unavailable: the gate failed closed.
    FailedClosed,
}

/// A rebuild the run took (`{"kind": "new-snapshot", "at_ms": 61000, "after": {"kind":
/// "failover"}}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Rebuild {
    /// A new snapshot started at `at_ms` after `after`.
    NewSnapshot { at_ms: u64, after: RebuildCause },
    /// `by` resumed the connector on a new slot at `at_ms` without a snapshot: what was committed
    /// before the new slot is in no snapshot and no stream.
    WithoutSnapshot { at_ms: u64, by: RebuildCause },
    /// `snapshot.mode=when_needed` found the stored position unavailable at `at_ms` and
    /// re-snapshots.
    WhenNeeded { at_ms: u64 },
}

/// What a rebuild followed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RebuildCause {
    /// The `rebuild-connector` runbook, run at `at_ms`.
    Runbook { at_ms: u64 },
    /// The failover (its gate, or the connector by itself).
    Failover,
}

impl RebuildCause {
    fn words(&self) -> String {
        match self {
            RebuildCause::Runbook { at_ms } => format!("the rebuild-connector runbook at {}", SimTime(*at_ms)),
            RebuildCause::Failover => "the failover".into(),
        }
    }
}

/// The sink group's committed position in one partition of a data topic it reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointEntry {
    /// The topic, as Kafka names it (`claims.public.claims`).
    pub topic: String,
    pub partition: u32,
    /// The committed offset: the next record the group reads; `None` when it committed none.
    pub committed_offset: Option<u64>,
}

/// The duplicates the sink read (I10's accounting): a change record whose content — its table,
/// key, operation and row version — the sink had read before, from any partition and offset. A
/// restart replays what was published after the stored offset, and a snapshot taken again reads
/// rows the stream or an earlier snapshot delivered; each such record is a duplicate delivered.
/// It is absorbed when the sink's rule leaves the document as it was (the version guard refuses
/// it, a delete finds nothing to delete, or the upsert writes what was there); one that changes
/// the document was applied again, over something newer (what a naive sink does, I3).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Duplicates {
    pub delivered: usize,
    pub absorbed: usize,
    /// Of those delivered: streamed changes (`c`, `u`, `d`) read again, and snapshot reads (`r`)
    /// of a row version read before.
    pub replayed_changes: usize,
    pub snapshot_rereads: usize,
    /// Per key, in key order (keys with duplicates only).
    pub per_key: Vec<KeyDuplicates>,
}

/// The configurations the first connector's worker applied during the run, in words: when, and
/// what it captures from then on (a table it adds streams from the next task's start; its rows
/// from before come only by a backfill).
fn configuration_updates(spec: &Spec, trace: &[TraceEvent]) -> Vec<String> {
    let names = crate::judge::narrate::Names::of(spec);
    trace
        .iter()
        .filter_map(|event| match &event.observation {
            Observation::ConnectorReconfigured { version, tables } => {
                let signal = spec.debezium.signal_table();
                let listed: Vec<&str> =
                    tables.iter().filter(|table| Some(**table) != signal).map(|table| names.table(*table)).collect();
                Some(format!("{} applied configuration {version}: table.include.list={}", event.at, listed.join(",")))
            }
            _ => None,
        })
        .collect()
}

/// The scripted signals that were committed and that no connector executed, in words.
fn signals_not_read(spec: &Spec, trace: &[TraceEvent]) -> Vec<String> {
    let mut sentences = Vec::new();
    for debezium in spec.connectors() {
        let Some(signalling) = debezium.signalling.as_ref() else { continue };
        let executed: Vec<&str> = trace
            .iter()
            .filter_map(|event| match &event.observation {
                Observation::SignalExecuted { id, .. } => Some(id.as_str()),
                Observation::OfConnector { observation, .. } => match observation.as_ref() {
                    Observation::SignalExecuted { id, .. } => Some(id.as_str()),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        for event in trace {
            let Observation::Committed { txn, .. } = &event.observation else { continue };
            for change in txn.changes.iter().filter(|change| change.table == signalling.table) {
                let Some(signal) = usize::try_from(change.key - 1).ok().and_then(|index| signalling.signals.get(index))
                else {
                    continue;
                };
                if crate::core::signal::watermark_of(change.key).is_some() || executed.contains(&signal.id.as_str()) {
                    continue;
                }
                let why = match spec.unpublished_signal_table(debezium) {
                    Some(publication) => format!(
                        "the signal table is not in publication {publication}, so no walsender decodes its rows"
                    ),
                    None => "the connector had not read it by the end of the run".to_string(),
                };
                sentences.push(format!(
                    "'{}' ({}) committed at {} ({}) was never executed by {}: {why}",
                    signal.id,
                    signal.action.signal_type(),
                    event.at,
                    txn.commit_lsn,
                    debezium.name
                ));
            }
        }
    }
    sentences
}

/// One table an incremental snapshot read (reference debezium-postgres.md §6.2): its chunks
/// (chunk queries that returned rows), its watermark windows (closed, the final empty read's
/// included), the rows its chunk queries read, the rows streamed events removed from a window
/// (deduplicated), the `op=r` records Kafka holds of it, and of those, the records of a key
/// published before (duplicates delivered: a chunk read again after a restart).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackfillRecord {
    pub table: String,
    /// When its first chunk was read.
    pub started_at: SimTime,
    /// `TABLE_SCAN_COMPLETED`'s status (`SUCCEEDED`, `EMPTY`, `SQL_EXCEPTION`), and when; `None`:
    /// not finished by the end of the run.
    pub status: Option<String>,
    pub finished_at: Option<SimTime>,
    pub chunks: u32,
    pub windows: u32,
    pub rows_read: u64,
    pub rows_deduplicated: u64,
    pub records_published: u64,
    pub duplicates_delivered: u64,
    /// Task starts that took the snapshot up again from the stored offset.
    pub resumed: u32,
    /// Times `readChunk` found the snapshot paused on this table (`pause-snapshot`), of those the
    /// pauses a task restart undid (the flag is not in the offsets), and whether it was paused
    /// when the run ended.
    pub pauses: u32,
    pub pauses_undone_by_restart: u32,
    pub paused: bool,
    /// Why `readChunk` could not read the table, when it threw instead (a `surrogate-key` the
    /// table does not have, DBZ-7797).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

impl BackfillRecord {
    fn new(table: String, at: SimTime) -> BackfillRecord {
        BackfillRecord {
            table,
            started_at: at,
            status: None,
            finished_at: None,
            chunks: 0,
            windows: 0,
            rows_read: 0,
            rows_deduplicated: 0,
            records_published: 0,
            duplicates_delivered: 0,
            resumed: 0,
            pauses: 0,
            pauses_undone_by_restart: 0,
            paused: false,
            failed: None,
        }
    }

    /// The backfills a trace shows, in the order they began.
    pub fn of(trace: &[TraceEvent], tables: &[crate::scenario::spec::TableSetup]) -> Vec<BackfillRecord> {
        use crate::core::event::SnapshotMarker;
        use crate::core::ids::TableId;
        let mut order: Vec<TableId> = Vec::new();
        let mut records: BTreeMap<TableId, BackfillRecord> = BTreeMap::new();
        let mut chunk_tables: BTreeMap<crate::core::signal::ChunkId, TableId> = BTreeMap::new();
        let mut published: BTreeMap<(TableId, Key), u64> = BTreeMap::new();
        let name = |table: TableId| table_name(tables, table);
        fn entry<'r>(
            records: &'r mut BTreeMap<TableId, BackfillRecord>,
            order: &mut Vec<TableId>,
            (table, name): (TableId, String),
            at: SimTime,
        ) -> &'r mut BackfillRecord {
            if !order.contains(&table) {
                order.push(table);
            }
            records.entry(table).or_insert_with(|| BackfillRecord::new(name, at))
        }
        for event in trace {
            match &event.observation {
                Observation::ChunkRead { table, chunk, rows, .. } => {
                    chunk_tables.insert(*chunk, *table);
                    let backfill = entry(&mut records, &mut order, (*table, name(*table)), event.at);
                    if *rows > 0 {
                        backfill.chunks += 1;
                    }
                    backfill.rows_read += u64::from(*rows);
                }
                Observation::WindowClosed { chunk, deduplicated, .. } => {
                    if let Some(table) = chunk_tables.get(chunk) {
                        let backfill = entry(&mut records, &mut order, (*table, name(*table)), event.at);
                        backfill.windows += 1;
                        backfill.rows_deduplicated += u64::from(*deduplicated);
                    }
                }
                Observation::IncrementalTableScanned { table, status, .. } => {
                    let backfill = entry(&mut records, &mut order, (*table, name(*table)), event.at);
                    backfill.status = Some(status.name().to_string());
                    backfill.finished_at = Some(event.at);
                }
                Observation::SurrogateKeyMissing { table, column, at_start } => {
                    let backfill = entry(&mut records, &mut order, (*table, name(*table)), event.at);
                    backfill.failed = Some(format!(
                        "readChunk threw: surrogate-key `{column}` is no column of the table (DBZ-7797); {}",
                        if *at_start {
                            "the task failed at its start"
                        } else {
                            "the snapshot stays queued with a window nothing closes"
                        }
                    ));
                }
                Observation::IncrementalSnapshotResumed { table, .. } => {
                    let backfill = entry(&mut records, &mut order, (*table, name(*table)), event.at);
                    backfill.resumed += 1;
                    backfill.status = None;
                    backfill.finished_at = None;
                }
                Observation::TaskStarted { .. } => {
                    // A new task has a new snapshot context: the pause flag is gone.
                    for backfill in records.values_mut().filter(|backfill| backfill.paused) {
                        backfill.paused = false;
                        backfill.pauses_undone_by_restart += 1;
                    }
                }
                Observation::IncrementalSnapshotStarted { tables } => {
                    // A table signalled again: its backfill goes on in the same line.
                    for table in tables {
                        if let Some(backfill) = records.get_mut(table) {
                            backfill.status = None;
                            backfill.finished_at = None;
                        }
                    }
                }
                Observation::IncrementalSnapshotPaused { table, .. } => {
                    let backfill = entry(&mut records, &mut order, (*table, name(*table)), event.at);
                    backfill.pauses += 1;
                    backfill.paused = true;
                }
                Observation::IncrementalSnapshotUnpaused { table } => {
                    let backfill = entry(&mut records, &mut order, (*table, name(*table)), event.at);
                    backfill.paused = false;
                }
                Observation::IncrementalSnapshotStopped { running: true, stopped, .. } => {
                    // A table the stop removed before its first chunk has no backfill to report.
                    for table in stopped {
                        if let Some(backfill) = records.get_mut(table) {
                            backfill.status = Some("STOPPED".into());
                            backfill.finished_at = Some(event.at);
                            backfill.paused = false;
                        }
                    }
                }
                Observation::Appended { records: appended, .. } => {
                    for kafka_record in appended.iter() {
                        let Some(value) = kafka_record.value else { continue };
                        if value.source.snapshot != SnapshotMarker::Incremental {
                            continue;
                        }
                        let count = published.entry((value.source.table, kafka_record.key)).or_insert(0);
                        *count += 1;
                        let backfill =
                            entry(&mut records, &mut order, (value.source.table, name(value.source.table)), event.at);
                        backfill.records_published += 1;
                        if *count > 1 {
                            backfill.duplicates_delivered += 1;
                        }
                    }
                }
                _ => {}
            }
        }
        order.iter().filter_map(|table| records.remove(table)).collect()
    }

    /// The record's line: `public.hubs: SUCCEEDED at t=20.178s; 3 chunk(s), …`.
    pub fn sentence(&self) -> String {
        let status = match (&self.status, self.finished_at, &self.failed) {
            (Some(status), Some(at), _) => format!("{status} at {at}"),
            (_, _, Some(failed)) => format!("NOT finished ({failed})"),
            _ => "NOT finished".to_string(),
        };
        let mut resumed = match self.resumed {
            0 => String::new(),
            n => format!(", resumed after {n} restart(s)"),
        };
        if self.pauses > 0 {
            resumed.push_str(&format!(", paused {} time(s)", self.pauses));
            if self.pauses_undone_by_restart > 0 {
                resumed.push_str(&format!(
                    " ({} undone by a restart: the pause is not in the offsets)",
                    self.pauses_undone_by_restart
                ));
            }
            if self.paused {
                resumed.push_str(", paused at the end");
            }
        }
        format!(
            "{}: incremental snapshot from {}, {status}{resumed}; {} chunk(s) in {} window(s), {} row(s) read, {} \
             deduplicated in a window, {} op=r record(s) published, {} duplicate(s) delivered (rows this backfill \
             had published already, read again)",
            self.table,
            self.started_at,
            self.chunks,
            self.windows,
            self.rows_read,
            self.rows_deduplicated,
            self.records_published,
            self.duplicates_delivered
        )
    }
}

/// A table's name from the scenario's tables (its number when it has none).
fn table_name(tables: &[crate::scenario::spec::TableSetup], table: crate::core::ids::TableId) -> String {
    tables.get(usize::from(table.0)).map_or_else(|| table.0.to_string(), |t| t.name.clone())
}

/// One blocking snapshot (reference debezium-postgres.md §6.6): the tables it read, when
/// streaming paused for it, how it ended, and the `op=r` records Kafka holds of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockingSnapshotRecord {
    pub tables: Vec<String>,
    pub started_at: SimTime,
    /// `COMPLETED`, `FAILED` (caught: streaming resumed), `INTERRUPTED` (the task stopped under
    /// it; never resumed), or `None`: still running when the run ended.
    pub status: Option<String>,
    pub finished_at: Option<SimTime>,
    pub records_published: u64,
    /// The held-back last row a failure never emitted (DBZ-8335), as `table row key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub never_emitted: Option<String>,
    /// The start after the interruption re-ran the initial snapshot (before 3.0.2, DBZ-7903).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rerun_as_initial: bool,
}

impl BlockingSnapshotRecord {
    /// The blocking snapshots a trace shows, in the order they began.
    pub fn of(trace: &[TraceEvent], tables: &[crate::scenario::spec::TableSetup]) -> Vec<BlockingSnapshotRecord> {
        use crate::core::event::SnapshotMarker;
        let name = |table: crate::core::ids::TableId| table_name(tables, table);
        let mut found: Vec<BlockingSnapshotRecord> = Vec::new();
        let mut interrupted: Option<usize> = None;
        for event in trace {
            let running = found.last_mut().filter(|record| record.status.is_none());
            match &event.observation {
                Observation::BlockingSnapshotStarted { tables, .. } => found.push(BlockingSnapshotRecord {
                    tables: tables.iter().map(|table| name(*table)).collect(),
                    started_at: event.at,
                    status: None,
                    finished_at: None,
                    records_published: 0,
                    never_emitted: None,
                    rerun_as_initial: false,
                }),
                Observation::BlockingSnapshotCompleted { .. } => {
                    if let Some(record) = running {
                        record.status = Some("COMPLETED".into());
                        record.finished_at = Some(event.at);
                    }
                }
                Observation::BlockingSnapshotFailed { held, .. } => {
                    if let Some(record) = running {
                        record.status = Some("FAILED".into());
                        record.finished_at = Some(event.at);
                        record.never_emitted = held.map(|(table, key)| format!("{} row {key}", name(table)));
                    }
                }
                Observation::TaskStarted { .. } => {
                    interrupted = None;
                    if let Some(record) = running {
                        record.status = Some("INTERRUPTED".into());
                        record.finished_at = Some(event.at);
                        interrupted = Some(found.len() - 1);
                    }
                }
                Observation::SnapshotDecided { snapshot: true, reason } if reason.contains("DBZ-7903") => {
                    if let Some(index) = interrupted.take() {
                        found[index].rerun_as_initial = true;
                    } else if let Some(record) = found.last_mut() {
                        record.rerun_as_initial = true;
                    }
                }
                Observation::Appended { records: appended, .. } => {
                    let count = appended
                        .iter()
                        .filter(|record| record.value.is_some_and(|v| v.source.snapshot == SnapshotMarker::Blocking))
                        .count() as u64;
                    if count > 0
                        && let Some(record) = found.last_mut()
                    {
                        record.records_published += count;
                    }
                }
                _ => {}
            }
        }
        found
    }

    /// The record's line.
    pub fn sentence(&self) -> String {
        let status = match (self.status.as_deref(), self.finished_at) {
            (Some("INTERRUPTED"), Some(at)) => format!(
                "INTERRUPTED by a task restart at {at}, not resumed (the rows it had not emitted are never read{})",
                if self.rerun_as_initial { "; the restart re-ran the initial snapshot instead, DBZ-7903" } else { "" }
            ),
            (Some(status), Some(at)) => format!("{status} at {at}"),
            _ => "NOT finished".into(),
        };
        let lost = match &self.never_emitted {
            Some(row) => format!("; its held-back last row ({row}) never emitted (DBZ-8335)"),
            None => String::new(),
        };
        let tables = if self.tables.is_empty() {
            "no table (none it named is captured)".to_string()
        } else {
            self.tables.join(", ")
        };
        format!(
            "{tables}: blocking snapshot from {}, {status}; {} op=r record(s) published{lost}",
            self.started_at, self.records_published
        )
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyDuplicates {
    pub key: Key,
    pub delivered: usize,
    pub absorbed: usize,
}

impl Duplicates {
    /// Counts the duplicates among the sink's applies, in trace order.
    pub fn of(trace: &[TraceEvent]) -> Duplicates {
        use crate::core::event::Op;
        use crate::core::observe::SinkAction;
        use std::collections::BTreeSet;
        let mut seen: BTreeSet<(crate::core::ids::TableId, Key, bool, Option<u32>)> = BTreeSet::new();
        let mut duplicates = Duplicates::default();
        let mut per_key: BTreeMap<Key, KeyDuplicates> = BTreeMap::new();
        for event in trace {
            let Observation::SinkApplied { applies } = &event.observation else { continue };
            for apply in applies {
                let (Topic::Change(table), Some(value)) = (apply.record.tp.topic, apply.record.value) else {
                    continue;
                };
                let delete = value.op == Op::Delete;
                let version = if delete { value.before } else { value.after }.map(|row| row.version);
                if seen.insert((table, apply.record.key, delete, version)) {
                    continue;
                }
                let absorbed = matches!(apply.action, SinkAction::RejectedStale | SinkAction::Ignored)
                    || apply.before == apply.after;
                duplicates.delivered += 1;
                duplicates.absorbed += usize::from(absorbed);
                if value.op == Op::Read {
                    duplicates.snapshot_rereads += 1;
                } else {
                    duplicates.replayed_changes += 1;
                }
                let key = per_key.entry(apply.record.key).or_insert(KeyDuplicates {
                    key: apply.record.key,
                    delivered: 0,
                    absorbed: 0,
                });
                key.delivered += 1;
                key.absorbed += usize::from(absorbed);
            }
        }
        duplicates.per_key = per_key.into_values().collect();
        duplicates
    }

    /// The record's sentence: `12 delivered on 8 key(s) (9 replayed changes, 3 snapshot
    /// re-reads); all absorbed`.
    pub fn sentence(&self) -> String {
        if self.delivered == 0 {
            return "none delivered".into();
        }
        let not_absorbed: Vec<String> =
            self.per_key.iter().filter(|key| key.absorbed < key.delivered).map(|key| key.key.to_string()).collect();
        let fate = if not_absorbed.is_empty() {
            "all absorbed by the sink's rule".to_string()
        } else {
            let shown: Vec<String> = not_absorbed.iter().take(12).cloned().collect();
            format!(
                "{} absorbed, {} APPLIED AGAIN over what the sink held (key(s) {}{})",
                self.absorbed,
                self.delivered - self.absorbed,
                shown.join(", "),
                if not_absorbed.len() > 12 { format!(" … ({} in all)", not_absorbed.len()) } else { String::new() }
            )
        };
        format!(
            "{} delivered on {} key(s) ({} replayed change(s), {} snapshot re-read(s)); {fate}",
            self.delivered,
            self.per_key.len(),
            self.replayed_changes,
            self.snapshot_rereads
        )
    }
}

/// With a group of workers: where each connector's task ran, and for how long it ran nowhere
/// (drill 5's question: how long until a task runs again).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskPlacement {
    pub connector: String,
    /// Each stretch of the task on one worker: the worker, from, and until (`None`: to the end).
    pub runs: Vec<TaskRun>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRun {
    pub worker: crate::core::ids::Node,
    pub from: SimTime,
    pub until: Option<SimTime>,
}

impl TaskPlacement {
    /// Reads the trace: a task starts on a worker (`TaskStarted`; Debezium's in-process restarts
    /// continue the run), and ends when it stops there (`TaskStopped`) or the worker dies or
    /// leaves.
    pub fn of(trace: &[TraceEvent], connectors: &[String]) -> Vec<TaskPlacement> {
        let mut placements: Vec<TaskPlacement> =
            connectors.iter().map(|name| TaskPlacement { connector: name.clone(), runs: Vec::new() }).collect();
        let end_on = |placement: &mut TaskPlacement, worker, at| {
            for run in placement.runs.iter_mut().filter(|run| run.worker == worker && run.until.is_none()) {
                run.until = Some(at);
            }
        };
        for event in trace.iter().filter(|event| event.node.is_connect_worker()) {
            let (c, observation) = match &event.observation {
                Observation::OfConnector { connector, observation } => (usize::from(*connector), &**observation),
                observation => (0, observation),
            };
            match observation {
                Observation::TaskStarted { .. } => {
                    if let Some(placement) = placements.get_mut(c)
                        && !placement.runs.iter().any(|run| run.worker == event.node && run.until.is_none())
                    {
                        placement.runs.push(TaskRun { worker: event.node, from: event.at, until: None });
                    }
                }
                Observation::TaskStopped { .. } | Observation::FailedTaskReplaced => {
                    if let Some(placement) = placements.get_mut(c) {
                        end_on(placement, event.node, event.at);
                    }
                }
                Observation::Fault { action: FaultAction::KillConnectWorker { .. } }
                | Observation::Crashed { .. }
                | Observation::WorkerLeft => {
                    for placement in &mut placements {
                        end_on(placement, event.node, event.at);
                    }
                }
                _ => {}
            }
        }
        placements
    }

    /// `outbox-connector: connect-2 t=4.028s to t=30.029s, unassigned 303.042 s, connect from t=333.071s`.
    pub fn sentence(&self) -> String {
        let mut parts = Vec::new();
        let mut last_end: Option<SimTime> = None;
        for run in &self.runs {
            let overlapping = last_end.is_some_and(|end| run.from < end);
            if let Some(end) = last_end.filter(|end| run.from > *end) {
                parts.push(format!("nowhere for {}", crate::core::time::seconds_text(run.from.ms() - end.ms())));
            }
            let stretch = match run.until {
                Some(until) => format!("{} {} to {}", run.worker, run.from, until),
                None => format!("{} from {}", run.worker, run.from),
            };
            parts.push(if overlapping { format!("meanwhile {stretch} (two workers ran it at once)") } else { stretch });
            last_end = match (last_end, run.until) {
                (_, None) => Some(SimTime(u64::MAX)),
                (Some(end), Some(until)) => Some(end.max(until)),
                (None, Some(until)) => Some(until),
            };
        }
        if parts.is_empty() {
            parts.push("never ran".into());
        }
        format!("{}: {}", self.connector, parts.join(", "))
    }
}

/// Under exactly-once, what each `isolation.level` reads of the change topics: a
/// `read_uncommitted` consumer is given every change event appended, a `read_committed` one only
/// those of committed transactions (and non-transactional ones); records of aborted transactions,
/// and of transactions still open at the end, are the difference (reference kafka-connect.md
/// §3.2). Change events only: tombstones and heartbeats are left out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsolationCounts {
    pub read_committed: usize,
    pub read_uncommitted: usize,
    /// Keys where the two differ, in key order: the change events each level reads of the key.
    pub differing: Vec<KeyIsolation>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyIsolation {
    pub key: Key,
    /// The row in words: `claim 7`, `row 7 of public.orders`.
    #[serde(default)]
    pub row: String,
    pub read_committed: usize,
    pub read_uncommitted: usize,
}

/// Keys of the reconciliation as their tables name them: the numbers alone when they are all the
/// claims table's (`42, 269`), else per table with its key's columns (`public.hubs
/// (region_id, hub_id): (3, 1), (3, 2); public.claims: 7`); the first 12, then how many in all.
fn keys_text(names: &crate::judge::narrate::Names, ids: &[(TableId, Key)]) -> String {
    const SHOWN: usize = 12;
    let mut groups: Vec<(TableId, Vec<String>)> = Vec::new();
    for (table, key) in ids.iter().take(SHOWN) {
        let value = names.key_values(*table, *key);
        match groups.iter_mut().find(|(of, _)| of == table) {
            Some((_, values)) => values.push(value),
            None => groups.push((*table, vec![value])),
        }
    }
    let text = match groups.as_slice() {
        [(table, values)] if names.claims(*table) => values.join(", "),
        _ => groups
            .iter()
            .map(|(table, values)| {
                let columns =
                    names.composite_key(*table).map(|key| format!(" {}", key.columns_text())).unwrap_or_default();
                format!("{}{columns}: {}", names.table(*table), values.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; "),
    };
    if ids.len() > SHOWN { format!("{text} … ({} in all)", ids.len()) } else { text }
}

impl IsolationCounts {
    /// Counts the change events of the trace's appends by the fate of their transaction.
    pub fn of(trace: &[TraceEvent], names: &crate::judge::narrate::Names) -> IsolationCounts {
        let mut per_key: BTreeMap<(TableId, Key), (usize, usize)> = BTreeMap::new();
        let mut open = crate::judge::checkers::published::HeldByTransaction::<(TableId, Key)>::default();
        for event in trace {
            match &event.observation {
                Observation::Appended { records, transaction } => {
                    let keys = records.iter().filter(|record| record.value.is_some()).filter_map(|record| match record
                        .tp
                        .topic
                    {
                        Topic::Change(table) => Some((table, record.key)),
                        _ => None,
                    });
                    match transaction {
                        None => keys.for_each(|key| {
                            let counts = per_key.entry(key).or_default();
                            counts.0 += 1;
                            counts.1 += 1;
                        }),
                        Some(producer) => open.hold(*producer, keys),
                    }
                }
                Observation::TransactionEnded { producer_id, committed, .. } => {
                    for key in open.end(*producer_id) {
                        let counts = per_key.entry(key).or_default();
                        counts.0 += usize::from(*committed);
                        counts.1 += 1;
                    }
                }
                _ => {}
            }
        }
        // Still open at the end: only a read_uncommitted consumer has them.
        for key in open.into_held() {
            per_key.entry(key).or_default().1 += 1;
        }
        IsolationCounts {
            read_committed: per_key.values().map(|counts| counts.0).sum(),
            read_uncommitted: per_key.values().map(|counts| counts.1).sum(),
            differing: per_key
                .into_iter()
                .filter(|(_, (committed, all))| committed != all)
                .map(|((table, key), (read_committed, read_uncommitted))| KeyIsolation {
                    key,
                    row: names.row_of(table, key),
                    read_committed,
                    read_uncommitted,
                })
                .collect(),
        }
    }

    /// The record's sentence: `read_committed 12 change event(s), read_uncommitted 14; key 7: 3 / 4`.
    pub fn sentence(&self) -> String {
        let mut text = format!(
            "read_committed reads {} change event(s), read_uncommitted {}",
            self.read_committed, self.read_uncommitted
        );
        if self.differing.is_empty() {
            text.push_str(" (no aborted or open transaction held one)");
        } else {
            let shown: Vec<String> = self
                .differing
                .iter()
                .take(12)
                .map(|key| format!("{} {} / {}", key.row, key.read_committed, key.read_uncommitted))
                .collect();
            let more = self.differing.len().saturating_sub(shown.len());
            text.push_str(&format!(
                "; per key (read_committed / read_uncommitted): {}{}",
                shown.join(", "),
                if more > 0 { format!(" … ({} keys in all)", self.differing.len()) } else { String::new() }
            ));
        }
        text
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampledHash {
    pub key: Key,
    pub source: Option<String>,
    pub sink: Option<String>,
    pub matches: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandoffRecord {
    pub source_tables: Vec<String>,
    pub schema_revision: u32,
    pub connector_configuration: BTreeMap<String, String>,
    pub snapshot_completion_marker: Option<SnapshotMarkerRecord>,
    pub sink_key_rule: String,
    /// The sink group's committed offsets in every partition of the data topics it reads (the
    /// change topics; the heartbeat topic carries no document and is left out).
    pub sink_checkpoint: Vec<CheckpointEntry>,
    /// The duplicates the sink read, and what its rule made of them.
    pub duplicates: Duplicates,
    /// Each table an incremental snapshot read (a backfill), in the order they began.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backfills: Vec<BackfillRecord>,
    /// Each blocking snapshot, in the order they began.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocking_snapshots: Vec<BlockingSnapshotRecord>,
    /// Signals the script wrote that no connector executed, each with why, for people.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals_not_read: Vec<String>,
    /// Each configuration a Connect worker applied while the run went on (`PUT
    /// /connectors/<name>/config`): when, and the captured tables from then on, for people.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configuration_updates: Vec<String>,
    /// Under exactly-once: the change events each `isolation.level` reads, per key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub isolation: Option<IsolationCounts>,
    /// With a group of workers: where each connector's task ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub task_placement: Vec<TaskPlacement>,
    /// The outbox reconciliation, when the connector routes outbox events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outbox: Option<OutboxRecord>,
    /// The worker's other connectors (`[[connector]]` entries after the first), each with its
    /// configuration, its last stored offset and what happened to its slot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_connectors: Vec<OtherConnectorRecord>,
    pub restart_test: Option<RestartTest>,
    pub failover_gate: Option<FailoverGateRecord>,
    pub rebuild_from_new_snapshot: Option<String>,
    /// The rebuild, typed.
    pub rebuild: Option<Rebuild>,
    /// A rebuild (the runbook's `rebuild-connector`, or the failover gate's) resumed the
    /// connector on a new slot without a snapshot (`snapshot.mode=no_data`): it cannot restore
    /// what was committed before the new slot.
    pub rebuild_without_snapshot: bool,
    pub acceptance_at: SimTime,
    pub acceptance_reached: bool,
    pub acceptance_note: String,
    /// How the run ended, typed (`acceptance_note` says it in words).
    pub acceptance_end: RunEnd,
    pub source_row_count: usize,
    pub sink_row_count: usize,
    pub keys_missing: Vec<Key>,
    pub keys_extra: Vec<Key>,
    pub keys_differing: Vec<Key>,
    /// The same keys as their tables name them, what the record prints: `42, 269` on the
    /// claims table alone, else per table, `public.orders (region_id, order_id): (5, 2), (27,
    /// 9)`; the first 12, and how many in all.
    #[serde(default)]
    pub rows_missing: String,
    #[serde(default)]
    pub rows_extra: String,
    #[serde(default)]
    pub rows_differing: String,
    pub sampled_hashes: Vec<SampledHash>,
    pub sampled_hashes_match: bool,
    pub counts_match: bool,
}

/// What the record is made from.
pub struct RecordInputs<'a> {
    pub spec: &'a Spec,
    pub seed: u64,
    pub trace: &'a [TraceEvent],
    pub oracle: &'a Oracle,
    pub boundary: &'a Boundary,
    /// The sink group's committed offsets, as Kafka holds them.
    pub sink_checkpoint: BTreeMap<TopicPartition, u64>,
    /// The run's findings (the outbox reconciliation names the events I9 found lost).
    pub findings: &'a [crate::judge::checkers::Finding],
}

/// What the index's documents are keyed by, in the record's words: `claim ID` for the claims
/// table alone (the runbook's example), else each indexed table with its key columns (the record
/// key Debezium gives it: its primary key, the `message.key.columns` column, or none).
fn sink_key(spec: &Spec) -> Option<String> {
    let tables: Vec<&crate::scenario::spec::TableSetup> =
        spec.sink_tables().into_iter().filter_map(|id| spec.tables.iter().find(|table| table.id == id)).collect();
    let plain = |table: &crate::scenario::spec::TableSetup| {
        table.composite_key.is_none() && table.unique_column.is_none() && !table.keyless
    };
    if let [table] = tables.as_slice()
        && table.name == "public.claims"
        && plain(table)
    {
        return Some("claim ID".to_owned());
    }
    if tables.is_empty() {
        return None;
    }
    let keys: Vec<String> = tables
        .iter()
        .map(|table| {
            let key = if let Some(composite) = &table.composite_key {
                format!("({})", composite.columns.join(", "))
            } else if let Some(unique) = &table.unique_column {
                format!("{} (message.key.columns)", unique.name)
            } else if table.keyless && spec.debezium.null_key_tables.contains(&table.id) {
                "id from the row: its records have no key".to_owned()
            } else if table.keyless {
                "id (message.key.columns)".to_owned()
            } else {
                "id".to_owned()
            };
            format!("{} by {key}", table.name)
        })
        .collect();
    Some(format!("documents keyed per table ({})", keys.join("; ")))
}

/// Whether Debezium masks a property's value when it logs a configuration
/// (`Configuration.PASSWORD_PATTERN`, case-insensitive: names ending in `secret`, `password`,
/// `sasl.jaas.config`, `credentials.json`, `connectionstring`, `connection.string`, or holding
/// `basic.auth.user.info` or `registry.auth.client-secret`). The record and the report show such
/// a value as `********`.
pub fn is_secret(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    let ends = ["secret", "password", "sasl.jaas.config", "credentials.json", "connectionstring", "connection.string"];
    ends.iter().any(|end| lower.ends_with(end))
        || lower.contains("basic.auth.user.info")
        || lower.contains("registry.auth.client-secret")
}

/// The record keeps no secret (see [`is_secret`]).
fn mask_passwords(configuration: &mut BTreeMap<String, String>) {
    for (key, value) in configuration.iter_mut() {
        if is_secret(key) {
            *value = "********".to_owned();
        }
    }
}

/// Another connector of the worker, as the run left it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtherConnectorRecord {
    pub name: String,
    pub configuration: BTreeMap<String, String>,
    /// Its last offset in the offsets topic, as Debezium writes it (`None`: none, or deleted).
    pub stored_offset: Option<String>,
    /// Its slot at the end: `valid`, or when and why it was lost or dropped.
    pub slot: String,
}

impl OtherConnectorRecord {
    fn of(inputs: &RecordInputs, c: usize) -> OtherConnectorRecord {
        let spec = inputs.spec;
        let debezium = spec.connector(c);
        let mut configuration = spec.connector_properties_of(c).clone();
        let defaults = [
            ("snapshot.mode", debezium.snapshot_mode.name().to_string()),
            ("slot.name", debezium.slot_name.clone()),
            ("publication.name", debezium.publication_name.clone()),
            ("topic.prefix", debezium.topic_prefix.clone()),
        ];
        for (key, value) in defaults {
            configuration.entry(key.to_string()).or_insert(value);
        }
        mask_passwords(&mut configuration);
        let mut stored_offset = None;
        let mut slot = "valid".to_string();
        for event in inputs.trace {
            match &event.observation {
                Observation::SourceOffsetStored { connector, offset } if *connector == debezium.name => {
                    stored_offset = offset.map(|offset| offset.to_string());
                }
                Observation::SlotInvalidated { slot: name, .. } if *name == debezium.slot_name => {
                    slot = format!("lost at {} (max_slot_wal_keep_size)", event.at);
                }
                Observation::SlotDropped { slot: name, .. } if *name == debezium.slot_name => {
                    slot = format!("dropped at {}", event.at);
                }
                Observation::SlotCreated { slot: name, .. } if *name == debezium.slot_name && slot != "valid" => {
                    slot = format!("{slot}; created again at {}", event.at);
                }
                _ => {}
            }
        }
        OtherConnectorRecord { name: debezium.name.clone(), configuration, stored_offset, slot }
    }
}

/// The outbox reconciliation: the service's events against what reached their routed topics.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxRecord {
    /// The routed topics.
    pub topics: Vec<String>,
    /// Events whose transaction committed (in the surviving history).
    pub committed: usize,
    /// Of those, the events written as logical decoding messages (a message outbox's).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub as_messages: usize,
    /// Events on their routed topic.
    pub routed: usize,
    /// Records of events appended more than once (a replay after a restart, a snapshot routing
    /// a row again): duplicates a consumer must absorb.
    pub duplicate_records: usize,
    /// Routed records of Kafka transactions that were aborted or are still open (exactly-once
    /// source tasks): a `read_uncommitted` consumer is given them, a `read_committed` one never.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub uncommitted_records: usize,
    /// Events that can never arrive (I9's findings), by id.
    pub lost: Vec<Key>,
    /// Events not routed by the end that can still arrive (the pipeline stopped short; their row
    /// is in the table, or their WAL is still held), by id.
    pub not_delivered: Vec<Key>,
    /// What the outbox's consumer did, when the scenario has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer: Option<ConsumerRecord>,
    /// Per event delivered more than once (on its topic or to the consumer): its counts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub duplicated: Vec<EventCounts>,
}

/// One outbox event's duplicates: how many records of it reached its topic, how many
/// deliveries the consumer handled, absorbed, and how many side effects it applied.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventCounts {
    pub event: Key,
    pub records: u32,
    /// Of its records, those of aborted or still open transactions (a `read_committed` consumer
    /// sees `records - uncommitted`).
    #[serde(default)]
    pub uncommitted: u32,
    pub handled: u32,
    pub absorbed: u32,
    pub applied: u32,
}

/// The outbox's consumer in the reconciliation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerRecord {
    /// Its inbox rule (`[consumer] inbox`), in words.
    pub rule: String,
    /// Routed records it handled (each delivery, duplicates included).
    pub records_handled: usize,
    /// Events whose side effect was applied at least once.
    pub events_applied: usize,
    /// Deliveries its inbox absorbed (the event id was in `processed_event`).
    pub duplicates_absorbed: usize,
    /// Side effects applied again for an event that had one (by event id, with the count).
    pub applied_again: Vec<(Key, u32)>,
    /// Routed events whose side effect was never applied, by id.
    pub never_applied: Vec<Key>,
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

impl OutboxRecord {
    fn of(inputs: &RecordInputs) -> Option<OutboxRecord> {
        let spec = inputs.spec;
        let outboxes = spec.event_outboxes();
        if outboxes.is_empty() {
            return None;
        }
        let mut record = OutboxRecord {
            topics: crate::judge::narrate::Names::of(spec).routed,
            lost: inputs
                .findings
                .iter()
                .filter(|finding| finding.invariant == crate::scenario::spec::Invariant::I9)
                .filter_map(|finding| finding.key)
                .collect(),
            ..OutboxRecord::default()
        };
        let mut appended: BTreeMap<(crate::core::ids::TableId, Key), usize> = BTreeMap::new();
        // Routed records of each open transaction, by producer id: committed or not at its end.
        let mut open: BTreeMap<u32, Vec<(crate::core::ids::TableId, Key)>> = BTreeMap::new();
        let mut uncommitted: BTreeMap<(crate::core::ids::TableId, Key), u32> = BTreeMap::new();
        for event in inputs.trace {
            match &event.observation {
                Observation::Appended { records, transaction } => {
                    for kafka in records {
                        if let (Topic::Routed(_), Some(value)) = (kafka.tp.topic, kafka.value) {
                            let id = (value.source.table, kafka.key);
                            *appended.entry(id).or_default() += 1;
                            if let Some(producer) = transaction {
                                open.entry(*producer).or_default().push(id);
                            }
                        }
                    }
                }
                Observation::TransactionEnded { producer_id, committed, .. } => {
                    for id in open.remove(producer_id).unwrap_or_default() {
                        if !committed {
                            *uncommitted.entry(id).or_default() += 1;
                        }
                    }
                }
                _ => {}
            }
        }
        // Still open at the end: not committed either.
        for id in open.into_values().flatten() {
            *uncommitted.entry(id).or_default() += 1;
        }
        record.duplicate_records = appended.values().map(|count| count - 1).sum();
        record.uncommitted_records = uncommitted.values().map(|count| *count as usize).sum();
        let mut counts: BTreeMap<(crate::core::ids::TableId, Key), EventCounts> = appended
            .iter()
            .map(|(id, records)| {
                let event = EventCounts {
                    event: id.1,
                    records: *records as u32,
                    uncommitted: uncommitted.get(id).copied().unwrap_or(0),
                    ..EventCounts::default()
                };
                (*id, event)
            })
            .collect();
        if let Some(consumer) = &spec.consumer {
            let mut effects: BTreeMap<(crate::core::ids::TableId, Key), u32> = BTreeMap::new();
            let mut summary =
                ConsumerRecord { rule: consumer.inbox.describe().to_string(), ..ConsumerRecord::default() };
            for event in inputs.trace {
                let Observation::EventHandled { event, handled, .. } = &event.observation else { continue };
                let count =
                    counts.entry(*event).or_insert_with(|| EventCounts { event: event.1, ..EventCounts::default() });
                match handled {
                    crate::core::observe::Handled::Applied { times } => {
                        summary.records_handled += 1;
                        effects.insert(*event, *times);
                        count.handled += 1;
                        count.applied = *times;
                    }
                    crate::core::observe::Handled::Absorbed => {
                        summary.records_handled += 1;
                        summary.duplicates_absorbed += 1;
                        count.handled += 1;
                        count.absorbed += 1;
                    }
                    crate::core::observe::Handled::InboxRecorded | crate::core::observe::Handled::OffsetCommitted => {}
                }
            }
            summary.events_applied = effects.len();
            summary.applied_again =
                effects.iter().filter(|(_, times)| **times > 1).map(|((_, key), times)| (*key, *times)).collect();
            summary.never_applied =
                appended.keys().filter(|id| !effects.contains_key(id)).map(|(_, key)| *key).collect();
            record.consumer = Some(summary);
        }
        record.duplicated = counts.into_values().filter(|count| count.records > 1 || count.handled > 1).collect();
        for event in crate::judge::checkers::outbox_complete::events_of(inputs.oracle, &outboxes) {
            record.committed += 1;
            if matches!(event.written, crate::judge::checkers::outbox_complete::Written::Message { .. }) {
                record.as_messages += 1;
            }
            if appended.contains_key(&event.id) {
                record.routed += 1;
            } else if !record.lost.contains(&event.id.1) {
                record.not_delivered.push(event.id.1);
            }
        }
        Some(record)
    }

    /// The record's sentence.
    pub fn sentence(&self) -> String {
        let ids = |keys: &[Key]| keys.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        let messages = if self.as_messages > 0 {
            format!(" ({} written as logical decoding messages)", self.as_messages)
        } else {
            String::new()
        };
        let mut text = format!(
            "{} committed{messages}, {} routed to {}",
            self.committed,
            self.routed,
            if self.topics.is_empty() { "no topic".into() } else { self.topics.join(", ") }
        );
        match (self.duplicate_records, self.uncommitted_records) {
            (0, 0) => {}
            (duplicates, 0) => {
                let _ = write!(text, " ({duplicates} duplicate record(s))");
            }
            (duplicates, uncommitted) => {
                let _ = write!(
                    text,
                    " ({duplicates} duplicate record(s); {uncommitted} record(s) in aborted or open transactions, which \
                     a read_committed consumer never sees)"
                );
            }
        }
        if !self.lost.is_empty() {
            let _ = write!(text, "; {} LOST for good (event(s) {})", self.lost.len(), ids(&self.lost));
        }
        if !self.not_delivered.is_empty() {
            let _ = write!(
                text,
                "; {} not delivered yet (event(s) {}: still recoverable)",
                self.not_delivered.len(),
                ids(&self.not_delivered)
            );
        }
        match &self.consumer {
            None => text.push_str("; no consumer in the scenario"),
            Some(consumer) => {
                let _ = write!(
                    text,
                    "\n                       consumer ({}): {} record(s) handled, {} event(s) applied, {} duplicate(s) \
                     absorbed",
                    consumer.rule, consumer.records_handled, consumer.events_applied, consumer.duplicates_absorbed
                );
                if !consumer.applied_again.is_empty() {
                    let again: Vec<String> =
                        consumer.applied_again.iter().map(|(key, times)| format!("{key} ({times} times)")).collect();
                    let _ = write!(text, "; side effect APPLIED AGAIN for event(s) {}", again.join(", "));
                }
                if !consumer.never_applied.is_empty() {
                    let _ = write!(text, "; side effect NEVER applied for event(s) {}", ids(&consumer.never_applied));
                }
            }
        }
        if !self.duplicated.is_empty() {
            const SHOWN: usize = 8;
            let shown: Vec<String> = self
                .duplicated
                .iter()
                .take(SHOWN)
                .map(|count| {
                    let mut words = format!("event {}: {} record(s)", count.event, count.records);
                    if count.uncommitted > 0 {
                        let _ = write!(words, " ({} committed)", count.records - count.uncommitted);
                    }
                    if self.consumer.is_some() {
                        let _ = write!(
                            words,
                            ", {} handled, {} absorbed, side effect applied {}",
                            count.handled,
                            count.absorbed,
                            match count.applied {
                                0 => "never".to_string(),
                                1 => "once".to_string(),
                                times => format!("{times} times"),
                            }
                        );
                    }
                    words
                })
                .collect();
            let more = self.duplicated.len().saturating_sub(SHOWN);
            let _ = write!(
                text,
                "\n                       delivered more than once: {}{}",
                shown.join("; "),
                if more > 0 { format!("; and {more} more") } else { String::new() }
            );
        }
        text
    }
}

impl HandoffRecord {
    pub fn build(inputs: &RecordInputs) -> HandoffRecord {
        let spec = inputs.spec;
        let mut connector_configuration = spec.connector_properties.clone();
        let defaults = [
            ("snapshot.mode", spec.debezium.snapshot_mode.name().to_string()),
            ("slot.name", spec.debezium.slot_name.clone()),
            ("publication.name", spec.debezium.publication_name.clone()),
            ("topic.prefix", spec.debezium.topic_prefix.clone()),
            ("offset.flush.interval.ms", spec.connect.offset_flush_interval_ms.to_string()),
        ];
        for (key, value) in defaults {
            connector_configuration.entry(key.to_string()).or_insert(value);
        }
        mask_passwords(&mut connector_configuration);

        // Source vs sink at the boundary, per captured table: documents by (table, key), so that
        // tables sharing keys are compared each with its own (the lists name the keys).
        let mut source: BTreeMap<(crate::core::ids::TableId, Key), Row> = BTreeMap::new();
        let mut sink: BTreeMap<(crate::core::ids::TableId, Key), Row> = BTreeMap::new();
        for table in &spec.sink_tables() {
            source.extend(inputs.oracle.live(*table).map(|(key, row)| ((*table, key), row)));
            for (id, doc) in inputs.boundary.sink.table(*table) {
                if let Doc::Live(row) = doc {
                    sink.insert(*id, *row);
                }
            }
        }
        let missing: Vec<_> = source.keys().filter(|id| !sink.contains_key(id)).copied().collect();
        let extra: Vec<_> = sink.keys().filter(|id| !source.contains_key(id)).copied().collect();
        let differing: Vec<_> = source
            .iter()
            .filter(|(id, row)| sink.get(id).is_some_and(|seen| seen != *row))
            .map(|(id, _)| *id)
            .collect();
        let names = crate::judge::narrate::Names::of(spec);
        let named = |ids: &[(crate::core::ids::TableId, Key)]| keys_text(&names, ids);
        let (rows_missing, rows_extra, rows_differing) = (named(&missing), named(&extra), named(&differing));
        let keys_missing: Vec<Key> = missing.iter().map(|id| id.1).collect();
        let keys_extra: Vec<Key> = extra.iter().map(|id| id.1).collect();
        let keys_differing: Vec<Key> = differing.iter().map(|id| id.1).collect();
        let mut draw = Draw::new(inputs.seed, stream::SAMPLE);
        let candidates: Vec<(crate::core::ids::TableId, Key)> = source.keys().copied().collect();
        let mut sampled_keys: Vec<(crate::core::ids::TableId, Key)> = Vec::new();
        let wanted = (spec.acceptance.sample_size as usize).min(candidates.len());
        while sampled_keys.len() < wanted {
            let key = candidates[draw.below(candidates.len() as u64) as usize];
            if !sampled_keys.contains(&key) {
                sampled_keys.push(key);
            }
        }
        sampled_keys.sort_unstable();
        let hash = |key: Key, row: Option<&Row>| row.map(|row| format!("{:016x}", row.content_hash(key)));
        let sampled_hashes: Vec<SampledHash> = sampled_keys
            .iter()
            .map(|id| {
                let (s, k) = (hash(id.1, source.get(id)), hash(id.1, sink.get(id)));
                SampledHash { key: id.1, matches: s == k, source: s, sink: k }
            })
            .collect();

        // The trace's story: marker, restarts, failover, rebuild.
        let mut snapshot_completion_marker = None;
        let mut snapshot_attempts = 0;
        let mut snapshot_open = false;
        let mut restarted_during_snapshot = false;
        let mut failover_gate: Option<FailoverGateRecord> = None;
        let mut rebuild: Option<(String, Rebuild)> = None;
        let mut rebuild_without_snapshot = false;
        // A rebuild under way (what it is, for the record) until the connector decides whether
        // it snapshots.
        let mut rebuilding: Option<RebuildCause> = None;
        let mut promoted = false;
        for event in inputs.trace {
            match &event.observation {
                Observation::SnapshotStarted { .. } => {
                    snapshot_attempts += 1;
                    snapshot_open = true;
                    let after = match rebuilding.take() {
                        Some(cause) => Some(cause),
                        None if promoted && rebuild.is_none() => Some(RebuildCause::Failover),
                        None => None,
                    };
                    if let Some(after) = after {
                        rebuild = Some((
                            format!("a new snapshot started at {} after {}", event.at, after.words()),
                            Rebuild::NewSnapshot { at_ms: event.at.ms(), after },
                        ));
                    }
                }
                Observation::SnapshotDecided { snapshot: false, reason } => {
                    if let Some(by) = rebuilding.take() {
                        rebuild_without_snapshot = true;
                        rebuild = Some((
                            format!(
                                "WITHOUT A SNAPSHOT: {} resumed the connector on a new slot at {} ({reason}); a \
                                 rebuild that cannot restore history: what was committed before the new slot is in no \
                                 snapshot and no stream",
                                by.words(),
                                event.at
                            ),
                            Rebuild::WithoutSnapshot { at_ms: event.at.ms(), by },
                        ));
                    }
                }
                Observation::SnapshotCompleted { lsn, .. } => {
                    snapshot_completion_marker = Some(SnapshotMarkerRecord {
                        completed_at: event.at,
                        lsn: *lsn,
                        marker: MarkerOutcome::NotStored.sentence(),
                        marker_outcome: MarkerOutcome::NotStored,
                    });
                }
                Observation::SourceOffsetStored { offset: Some(offset), .. } => {
                    if let Some(marker) = snapshot_completion_marker.as_mut()
                        && marker.marker_outcome == MarkerOutcome::NotStored
                    {
                        let at_ms = event.at.ms();
                        let outcome = if offset.snapshot_completed {
                            Some(MarkerOutcome::Stored { at_ms })
                        } else if offset.snapshot.is_none() {
                            Some(MarkerOutcome::Superseded { at_ms, offset: offset.to_string() })
                        } else {
                            None
                        };
                        if let Some(outcome) = outcome {
                            marker.marker = outcome.sentence();
                            marker.marker_outcome = outcome;
                        }
                    }
                    if offset.snapshot.is_none() || offset.snapshot_completed {
                        snapshot_open = false;
                    }
                }
                Observation::Fault { action } => match action {
                    FaultAction::KillConnectWorker { .. } | FaultAction::StopConnector { .. } if snapshot_open => {
                        restarted_during_snapshot = true;
                    }
                    FaultAction::RebuildConnector => {
                        rebuilding = Some(RebuildCause::Runbook { at_ms: event.at.ms() });
                    }
                    FaultAction::FailOverToStandby { .. } => {}
                    _ => {}
                },
                Observation::Promoted { switch_lsn, .. } => {
                    promoted = true;
                    failover_gate = Some(FailoverGateRecord {
                        promoted_at: event.at,
                        switch_lsn: *switch_lsn,
                        saved_offset: None,
                        new_source_slot: None,
                        outcome: "no gate ran: the connector decided by itself".into(),
                        result: GateResult::NoGate,
                    });
                }
                Observation::GateChecked { saved_offset, slot, verdict, detail, .. } => {
                    if *verdict == GateVerdict::Rebuild {
                        rebuilding = Some(RebuildCause::Failover);
                    }
                    if let Some(gate) = failover_gate.as_mut() {
                        gate.saved_offset = saved_offset.as_deref().map(SourceOffset::to_string);
                        gate.new_source_slot = Some(match slot {
                            Some(slot) => format!(
                                "slot \"{}\" confirmed_flush {}",
                                slot.slot_name,
                                slot.confirmed_flush_lsn.map_or("NULL".into(), |lsn| lsn.to_string())
                            ),
                            None => "no slot".into(),
                        });
                        (gate.outcome, gate.result) = match verdict {
                            GateVerdict::Available => (format!("passed: {detail}; resumed"), GateResult::Resumed),
                            GateVerdict::Rebuild
                                if spec.debezium.snapshot_mode
                                    == crate::components::connect::debezium::SnapshotMode::NoData =>
                            {
                                (
                                    format!(
                                        "unavailable: {detail}; rebuilt on a new slot WITHOUT a snapshot (snapshot.mode=no_data)"
                                    ),
                                    GateResult::RebuiltWithoutSnapshot,
                                )
                            }
                            GateVerdict::Rebuild => (
                                format!("unavailable: {detail}; rebuilt from a new snapshot"),
                                GateResult::RebuiltFromNewSnapshot,
                            ),
                            GateVerdict::FailClosed => {
                                (format!("unavailable: {detail}; failed closed"), GateResult::FailedClosed)
                            }
                        };
                    }
                }
                Observation::LogPositionChecked { available: false, detail }
                    if rebuild.is_none()
                        && spec.debezium.snapshot_mode
                            == crate::components::connect::debezium::SnapshotMode::WhenNeeded =>
                {
                    rebuild = Some((
                        format!("snapshot.mode=when_needed re-snapshots at {}: {detail}", event.at),
                        Rebuild::WhenNeeded { at_ms: event.at.ms() },
                    ));
                }
                _ => {}
            }
        }
        let reconciliation_ok = keys_missing.is_empty() && keys_extra.is_empty() && keys_differing.is_empty();
        let restart_test = (snapshot_attempts > 0).then(|| {
            let (outcome, result) = match (restarted_during_snapshot, inputs.boundary.reached, reconciliation_ok) {
                (false, _, _) => ("not run: no restart hit an incomplete snapshot".into(), RestartResult::NotRun),
                (true, false, _) => (
                    format!("undecided: acceptance not reached ({})", inputs.boundary.reason),
                    RestartResult::Undecided,
                ),
                (true, true, true) => {
                    ("passed: the index matches the bounded source query".into(), RestartResult::Passed)
                }
                (true, true, false) => (
                    format!(
                        "failed: {} missing, {} resurrected or extra, {} differing",
                        keys_missing.len(),
                        keys_extra.len(),
                        keys_differing.len()
                    ),
                    RestartResult::Failed {
                        keys_missing: keys_missing.len(),
                        keys_extra: keys_extra.len(),
                        keys_differing: keys_differing.len(),
                    },
                ),
            };
            RestartTest { snapshot_attempts, restarted_during_snapshot, outcome, result }
        });
        let (rebuild_from_new_snapshot, rebuild) = rebuild.unzip();
        HandoffRecord {
            source_tables: spec.tables.iter().map(|t| t.name.clone()).collect(),
            schema_revision: 1,
            connector_configuration,
            snapshot_completion_marker,
            sink_key_rule: match sink_key(spec) {
                Some(key) => spec.sink.rule.key_rule(&key),
                None => format!("none: no captured table reaches the index (its rule: {})", spec.sink.rule.name()),
            },
            sink_checkpoint: checkpoint(spec, &inputs.sink_checkpoint),
            duplicates: Duplicates::of(inputs.trace),
            backfills: BackfillRecord::of(inputs.trace, &spec.tables),
            blocking_snapshots: BlockingSnapshotRecord::of(inputs.trace, &spec.tables),
            signals_not_read: signals_not_read(spec, inputs.trace),
            configuration_updates: configuration_updates(spec, inputs.trace),
            isolation: spec
                .connect
                .exactly_once()
                .then(|| IsolationCounts::of(inputs.trace, &crate::judge::narrate::Names::of(spec))),
            task_placement: if spec.connect.workers > 1 {
                let names: Vec<String> = (0..spec.connector_count()).map(|c| spec.connector(c).name.clone()).collect();
                TaskPlacement::of(inputs.trace, &names)
            } else {
                Vec::new()
            },
            outbox: OutboxRecord::of(inputs),
            other_connectors: (1..spec.connector_count()).map(|c| OtherConnectorRecord::of(inputs, c)).collect(),
            restart_test,
            failover_gate,
            rebuild_from_new_snapshot,
            rebuild,
            rebuild_without_snapshot,
            acceptance_at: inputs.boundary.at,
            acceptance_reached: inputs.boundary.reached,
            acceptance_note: inputs.boundary.reason.clone(),
            acceptance_end: inputs.boundary.end.clone(),
            source_row_count: source.len(),
            sink_row_count: sink.len(),
            counts_match: source.len() == sink.len(),
            sampled_hashes_match: sampled_hashes.iter().all(|s| s.matches),
            sampled_hashes,
            keys_missing,
            keys_extra,
            keys_differing,
            rows_missing,
            rows_extra,
            rows_differing,
        }
    }

    /// The record as text.
    pub fn render(&self) -> String {
        let checkpoint: Vec<String> = self
            .sink_checkpoint
            .iter()
            .map(|entry| match entry.committed_offset {
                Some(offset) => format!("{}-{}@{offset}", entry.topic, entry.partition),
                None => format!("{}-{} nothing committed", entry.topic, entry.partition),
            })
            .collect();
        let mut out = String::new();
        let keys = |keys: &[Key], named: &str| -> String {
            if keys.is_empty() {
                "none".into()
            } else if !named.is_empty() {
                named.to_owned()
            } else {
                let shown: Vec<String> = keys.iter().take(12).map(Key::to_string).collect();
                format!(
                    "{}{}",
                    shown.join(", "),
                    if keys.len() > 12 { format!(" … ({} in all)", keys.len()) } else { String::new() }
                )
            }
        };
        let _ = writeln!(
            out,
            "  source tables        {} (schema revision {})",
            self.source_tables.join(", "),
            self.schema_revision
        );
        let config: Vec<String> = self.connector_configuration.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(out, "  connector            {}", config.join(" "));
        for other in &self.other_connectors {
            let config: Vec<String> = other.configuration.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(out, "  connector            {}", config.join(" "));
            let stored = other.stored_offset.as_deref().unwrap_or("none");
            let _ = writeln!(out, "                       {}: stored offset {stored}; slot {}", other.name, other.slot);
        }
        match &self.snapshot_completion_marker {
            Some(marker) => {
                let _ = writeln!(
                    out,
                    "  snapshot             last completed at {} at source position {}; marker {}",
                    marker.completed_at, marker.lsn, marker.marker
                );
            }
            None => {
                let _ = writeln!(out, "  snapshot             none completed");
            }
        }
        let _ = writeln!(out, "  sink key rule        {}", self.sink_key_rule);
        let _ = writeln!(
            out,
            "  sink checkpoint      {}",
            if checkpoint.is_empty() { "no data topic".into() } else { checkpoint.join(", ") }
        );
        let _ = writeln!(out, "  duplicates           {}", self.duplicates.sentence());
        if let Some(isolation) = self.isolation.as_ref().filter(|isolation| isolation.read_uncommitted > 0) {
            let _ = writeln!(out, "  isolation levels     {}", isolation.sentence());
        }
        for (index, placement) in self.task_placement.iter().enumerate() {
            let label = if index == 0 { "task placement" } else { "" };
            let _ = writeln!(out, "  {label:<20} {}", placement.sentence());
        }
        if let Some(outbox) = &self.outbox {
            let _ = writeln!(out, "  outbox events        {}", outbox.sentence());
        }
        for (index, update) in self.configuration_updates.iter().enumerate() {
            let label = if index == 0 { "configuration" } else { "" };
            let _ = writeln!(out, "  {label:<20} {update}");
        }
        for (index, signal) in self.signals_not_read.iter().enumerate() {
            let label = if index == 0 { "signals not read" } else { "" };
            let _ = writeln!(out, "  {label:<20} {signal}");
        }
        for (index, backfill) in self.backfills.iter().enumerate() {
            let label = if index == 0 { "backfill" } else { "" };
            let _ = writeln!(out, "  {label:<20} {}", backfill.sentence());
        }
        for (index, blocking) in self.blocking_snapshots.iter().enumerate() {
            let label = if index == 0 { "blocking snapshot" } else { "" };
            let _ = writeln!(out, "  {label:<20} {}", blocking.sentence());
        }
        if let Some(test) = &self.restart_test {
            let _ = writeln!(
                out,
                "  restart test         {} ({} snapshot attempt(s))",
                test.outcome, test.snapshot_attempts
            );
        }
        if let Some(gate) = &self.failover_gate {
            let _ = writeln!(
                out,
                "  failover gate        promoted at {}, timeline switch at {}: {}",
                gate.promoted_at, gate.switch_lsn, gate.outcome
            );
            if let Some(saved) = &gate.saved_offset {
                let _ = writeln!(
                    out,
                    "                       saved offset {saved}; new source {}",
                    gate.new_source_slot.clone().unwrap_or_default()
                );
            }
        }
        let _ = writeln!(
            out,
            "  rebuild              {}",
            self.rebuild_from_new_snapshot.clone().unwrap_or_else(|| "none".into())
        );
        let _ = writeln!(
            out,
            "  acceptance boundary  {} ({})",
            self.acceptance_at,
            if self.acceptance_reached {
                "pipeline caught up".to_string()
            } else {
                format!("NOT reached: {}", self.acceptance_note)
            }
        );
        let _ = writeln!(out, "  row counts           source {} / sink {}", self.source_row_count, self.sink_row_count);
        let _ = writeln!(out, "  keys missing         {}", keys(&self.keys_missing, &self.rows_missing));
        let _ = writeln!(out, "  keys extra           {}", keys(&self.keys_extra, &self.rows_extra));
        let _ = writeln!(out, "  keys differing       {}", keys(&self.keys_differing, &self.rows_differing));
        let mismatched: Vec<String> =
            self.sampled_hashes.iter().filter(|s| !s.matches).map(|s| s.key.to_string()).collect();
        let _ = writeln!(
            out,
            "  sampled hashes       {} of {} match{}",
            self.sampled_hashes.iter().filter(|s| s.matches).count(),
            self.sampled_hashes.len(),
            if mismatched.is_empty() { String::new() } else { format!(" (differ: {})", mismatched.join(", ")) }
        );
        out
    }
}

/// The checkpoint of every partition of the data topics the sink reads: the change topic of each
/// captured table (each has `[kafka] partitions` partitions), in `table.include.list` order.
fn checkpoint(spec: &Spec, committed: &BTreeMap<TopicPartition, u64>) -> Vec<CheckpointEntry> {
    let names = crate::judge::narrate::Names::of(spec);
    let mut entries = Vec::new();
    for table in &spec.sink_tables() {
        let topic = Topic::Change(*table);
        for partition in 0..spec.kafka.partitions {
            let tp = TopicPartition { topic, partition };
            entries.push(CheckpointEntry {
                topic: names.topic(topic),
                partition,
                committed_offset: committed.get(&tp).copied(),
            });
        }
    }
    entries
}
