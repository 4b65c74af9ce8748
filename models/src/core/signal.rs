//! Debezium's signals (reference debezium-postgres.md §6.1, Debezium's
//! `io.debezium.pipeline.signal`): the rows of the signal table (`signal.data.collection`, columns
//! `id`, `type`, `data`), what each asks, and the watermark rows the incremental snapshot writes
//! there itself (`SignalBasedIncrementalSnapshotChangeEventSource.emitWindowOpen` /
//! `emitWindowClose`).
//!
//! A signal row is a row of the signal table like any other for PostgreSQL, the WAL and Kafka.
//! Its `type` and `data` columns are kept by its key: a row the scenario's script inserts is
//! numbered from 1 in file order, and its content is the scenario's ([`Signal`], which the
//! connector reads from its configuration by that number, as it would parse the `data` column);
//! a watermark row's key carries its chunk and its kind ([`watermark_key`]), as its `id`
//! (`<chunk id>-open`, `<chunk id>-close`) does in Debezium.

use crate::core::ids::{Key, TableId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Where the keys of watermark rows begin: past every key a script may give a signal.
pub const WATERMARK_KEYS: Key = 1 << 50;

/// A chunk's id (`AbstractIncrementalSnapshotContext.currentChunkId`: `UUID.randomUUID()` per
/// chunk). The model draws it from the task's start and a counter, so that it never repeats in a
/// run, as a random UUID does not: the worker (its place in a group), the task's start (counted
/// by the worker across crashes), and the chunk's number in that start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChunkId(pub u64);

impl ChunkId {
    /// Bits of the chunk's number within its start.
    const NUMBER_BITS: u32 = 20;
    /// Bits of the start's number.
    const START_BITS: u32 = 24;

    pub fn new(worker: usize, start: u32, number: u32) -> ChunkId {
        let start = u64::from(start) & ((1 << ChunkId::START_BITS) - 1);
        let number = u64::from(number) & ((1 << ChunkId::NUMBER_BITS) - 1);
        ChunkId(
            ((worker as u64) << (ChunkId::START_BITS + ChunkId::NUMBER_BITS))
                | (start << ChunkId::NUMBER_BITS)
                | number,
        )
    }
}

/// Printed as a UUID, as Debezium's ids are, with the model's numbers in its groups.
impl fmt::Display for ChunkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let worker = self.0 >> (ChunkId::START_BITS + ChunkId::NUMBER_BITS);
        let start = (self.0 >> ChunkId::NUMBER_BITS) & ((1 << ChunkId::START_BITS) - 1);
        let number = self.0 & ((1 << ChunkId::NUMBER_BITS) - 1);
        write!(f, "{:08x}-{:04x}-4000-8000-{:012x}", start, worker, number)
    }
}

/// A watermark row's kind: `snapshot-window-open` or `snapshot-window-close`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Watermark {
    Open,
    Close,
}

impl Watermark {
    /// The row's `type` column.
    pub fn signal_type(self) -> &'static str {
        match self {
            Watermark::Open => "snapshot-window-open",
            Watermark::Close => "snapshot-window-close",
        }
    }

    /// The suffix of the row's `id`.
    pub fn suffix(self) -> &'static str {
        match self {
            Watermark::Open => "open",
            Watermark::Close => "close",
        }
    }
}

/// The key of chunk `chunk`'s watermark row of kind `kind`.
pub fn watermark_key(chunk: ChunkId, kind: Watermark) -> Key {
    WATERMARK_KEYS + ((chunk.0 as Key) << 1) + Key::from(kind == Watermark::Close)
}

/// The chunk and kind of a watermark row, by its key (None: a scripted signal's key).
pub fn watermark_of(key: Key) -> Option<(ChunkId, Watermark)> {
    let offset = key.checked_sub(WATERMARK_KEYS).filter(|offset| *offset >= 0)?;
    let kind = if offset & 1 == 1 { Watermark::Close } else { Watermark::Open };
    Some((ChunkId((offset >> 1) as u64), kind))
}

/// `execute-snapshot`'s `data.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotType {
    Incremental,
    Blocking,
}

impl SnapshotType {
    pub fn name(self) -> &'static str {
        match self {
            SnapshotType::Incremental => "incremental",
            SnapshotType::Blocking => "blocking",
        }
    }
}

/// What a signal asks (its `type`, and what its `data` says).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SignalAction {
    /// `execute-snapshot` (`ExecuteSnapshot`): `data-collections`, already matched against the
    /// tables the connector captures, in the order the signal names them.
    ExecuteSnapshot { kind: SnapshotType, collections: Vec<TableId> },
    /// `stop-snapshot` (`StopSnapshot.arrived` → `requestStopSnapshot`): for `incremental`, a stop
    /// request the snapshot context keeps until the next `readChunk` begins
    /// (`checkAndProcessStopFlag`); Debezium has no case for `blocking`. `tables`: None when
    /// `data-collections` is missing or empty (the whole snapshot, `.*`); else the captured
    /// tables its patterns match, in order, and the patterns that match none (`unmatched`,
    /// which Debezium keeps as literal names and cannot remove).
    StopSnapshot { kind: SnapshotType, tables: Option<Vec<TableId>>, unmatched: Vec<String> },
    /// `pause-snapshot` (`PauseIncrementalSnapshot` → `pauseSnapshot`): an in-memory flag.
    PauseSnapshot,
    /// `resume-snapshot` (`ResumeIncrementalSnapshot` → `resumeSnapshot`): clears it and reads
    /// the next chunk.
    ResumeSnapshot,
    /// `log` (`Log.arrived`): the `message` written to the connector's log.
    Log { message: String },
}

impl SignalAction {
    /// The row's `type` column.
    pub fn signal_type(&self) -> &'static str {
        match self {
            SignalAction::ExecuteSnapshot { .. } => "execute-snapshot",
            SignalAction::StopSnapshot { .. } => "stop-snapshot",
            SignalAction::PauseSnapshot => "pause-snapshot",
            SignalAction::ResumeSnapshot => "resume-snapshot",
            SignalAction::Log { .. } => "log",
        }
    }

    /// The `type` columns the model reads, in the documentation's order.
    pub const TYPES: [&'static str; 5] =
        ["execute-snapshot", "stop-snapshot", "pause-snapshot", "resume-snapshot", "log"];
}

/// A signal the scenario's script writes: its `id` column as the author wrote it, and what it asks.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Signal {
    /// The `id` column (`"ad-hoc-1"`).
    pub id: String,
    /// The `data` column as the author wrote it (for the timeline).
    pub data: String,
    pub action: SignalAction,
}

/// How a table of an incremental snapshot ended (`TableScanCompletionStatus`, the
/// `TABLE_SCAN_COMPLETED` notification's `status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScanStatus {
    /// `SUCCEEDED`: a chunk query returned no row.
    Succeeded,
    /// `EMPTY`: the maximum-key query found no row.
    Empty,
    /// `SQL_EXCEPTION`: a query or a watermark write failed: the table is skipped
    /// (`warnAndSkip`) and the snapshot goes on with the next one.
    SqlException,
}

impl ScanStatus {
    pub fn name(self) -> &'static str {
        match self {
            ScanStatus::Succeeded => "SUCCEEDED",
            ScanStatus::Empty => "EMPTY",
            ScanStatus::SqlException => "SQL_EXCEPTION",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermark_keys_round_trip_and_never_meet_a_scripted_signal() {
        for chunk in [ChunkId::new(0, 1, 1), ChunkId::new(2, 7, 99), ChunkId::new(1, (1 << 24) - 1, (1 << 20) - 1)] {
            for kind in [Watermark::Open, Watermark::Close] {
                let key = watermark_key(chunk, kind);
                assert!(key >= WATERMARK_KEYS);
                assert_eq!(watermark_of(key), Some((chunk, kind)));
            }
        }
        assert_eq!(watermark_of(1), None);
        assert_eq!(watermark_of(WATERMARK_KEYS - 1), None);
        assert_ne!(ChunkId::new(0, 1, 2), ChunkId::new(1, 1, 2), "two workers never draw the same id");
        assert_eq!(ChunkId::new(1, 3, 2).to_string(), "00000003-0001-4000-8000-000000000002");
    }
}
