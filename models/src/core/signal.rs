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

/// What moved a read-only incremental snapshot's window (`read.only=true`, reference
/// debezium-postgres.md §6.5): the streamed event whose transaction id was compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadOnlyEvent {
    /// A change of a captured table (`processMessage`, before its record is emitted).
    Change,
    /// A COMMIT (`processTransactionCommittedEvent`).
    Commit,
    /// An iteration of the streaming loop that found no message
    /// (`dispatchHeartbeatEventAlsoToIncrementalSnapshot` → `processHeartbeat`), with the offset's
    /// `txId`, the last event's.
    Idle,
}

impl ReadOnlyEvent {
    pub fn describe(self) -> &'static str {
        match self {
            ReadOnlyEvent::Change => "a change",
            ReadOnlyEvent::Commit => "the COMMIT",
            ReadOnlyEvent::Idle => "an idle iteration of the streaming loop",
        }
    }
}

/// Which comparison of `PostgresReadOnlyIncrementalSnapshotContext` /
/// `PostgresReadOnlyIncrementalSnapshotChangeEventSource` acted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadOnlyRule {
    /// `updateWindowState`: xid ≥ the low watermark's xmin: the window opens.
    Opened,
    /// `updateWindowState`: xid > max(high xmax, low xmax): the window closes.
    PastHighWatermark,
    /// `processMessage`: the window is not open (xid below the low watermark's xmin, or no
    /// watermark): the buffer is emitted and the next chunk read at once.
    NotOpen,
    /// `maxInProgressTransactionCommitted`: the xid is the high watermark's xmax.
    HighXmaxCommitted,
    /// `isTransactionVisible`: xid ≤ the high watermark's xmin (or no low watermark).
    Visible,
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

/// A column an `additional-conditions` filter may name: the model's table columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum FilterColumn {
    Id,
    Version,
    Status,
    AmountCents,
}

impl FilterColumn {
    pub const ALL: [FilterColumn; 4] =
        [FilterColumn::Id, FilterColumn::Version, FilterColumn::Status, FilterColumn::AmountCents];

    /// The column's value in the row `key`, `row` (a status by its place in [`Status::ALL`]).
    ///
    /// [`Status::ALL`]: crate::core::ids::Status::ALL
    pub fn value(self, key: Key, row: &crate::core::ids::Row) -> i64 {
        match self {
            FilterColumn::Id => key,
            FilterColumn::Version => i64::from(row.version),
            FilterColumn::Status => row.status as i64,
            FilterColumn::AmountCents => i64::from(row.amount_cents),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FilterColumn::Id => "id",
            FilterColumn::Version => "version",
            FilterColumn::Status => "status",
            FilterColumn::AmountCents => "amount_cents",
        }
    }
}

/// A comparison of a filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Comparison {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Comparison {
    /// The operators, longest first (for reading).
    const OPERATORS: [(&'static str, Comparison); 7] = [
        ("<>", Comparison::Ne),
        ("!=", Comparison::Ne),
        ("<=", Comparison::Le),
        (">=", Comparison::Ge),
        ("=", Comparison::Eq),
        ("<", Comparison::Lt),
        (">", Comparison::Gt),
    ];

    pub fn sql(self) -> &'static str {
        match self {
            Comparison::Eq => "=",
            Comparison::Ne => "<>",
            Comparison::Lt => "<",
            Comparison::Le => "<=",
            Comparison::Gt => ">",
            Comparison::Ge => ">=",
        }
    }

    fn holds(self, left: i64, right: i64) -> bool {
        match self {
            Comparison::Eq => left == right,
            Comparison::Ne => left != right,
            Comparison::Lt => left < right,
            Comparison::Le => left <= right,
            Comparison::Gt => left > right,
            Comparison::Ge => left >= right,
        }
    }
}

/// One comparison of a column with a constant (`status` as its state's place in
/// [`crate::core::ids::Status`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Condition {
    pub column: FilterColumn,
    pub op: Comparison,
    pub value: i64,
}

/// An `additional-conditions` filter (reference debezium-postgres.md §6.4,
/// `AbstractChunkQueryBuilder.buildChunkQuery`/`buildMaxPrimaryKeyQuery`): appended with
/// `AND (…)` to the maximum-key and chunk queries, so rows that do not match are never read;
/// streaming is unaffected. The model reads the SQL a filter is usually written in over its own
/// columns: comparisons of `id`, `version`, `amount_cents` with integers and of `status` with a
/// quoted state (`=` or `<>`), joined by `AND`, at most [`RowFilter::MAX_CONDITIONS`].
///
/// A comparison of a name that is no column of the model's tables is kept as
/// [`RowFilter::undefined`]: Debezium does not look into the filter, so PostgreSQL is the one to
/// refuse it, at the query (`ERROR: column "region" does not exist`): for an incremental
/// snapshot `warnAndSkip` (the table skipped with `SQL_EXCEPTION`, reference §6.3), for a
/// blocking one the snapshot's failure (DBZ-8335's held-back row, §6.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RowFilter {
    conditions: [Option<Condition>; RowFilter::MAX_CONDITIONS],
    #[serde(default, skip_serializing_if = "UndefinedColumn::is_none")]
    undefined: UndefinedColumn,
}

/// The first name a filter compares that is no column of the model's tables, kept inline (the
/// filter is `Copy`); hashed only when there is one, so that the trace hashes of filters without
/// one did not change when it came.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct UndefinedColumn(Option<(u8, [u8; UndefinedColumn::MAX_BYTES])>);

impl UndefinedColumn {
    /// The longest name kept (PostgreSQL's identifiers go to 63 bytes; the model's tables have
    /// four columns, so a longer undefined name tells nothing more).
    pub const MAX_BYTES: usize = 31;

    pub fn is_none(&self) -> bool {
        self.0.is_none()
    }

    fn new(name: &str) -> Option<UndefinedColumn> {
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes.len() > UndefinedColumn::MAX_BYTES {
            return None;
        }
        let mut inline = [0; UndefinedColumn::MAX_BYTES];
        inline[..bytes.len()].copy_from_slice(bytes);
        Some(UndefinedColumn(Some((bytes.len() as u8, inline))))
    }

    /// The name, if there is one.
    pub fn name(&self) -> Option<&str> {
        let (len, bytes) = self.0.as_ref()?;
        std::str::from_utf8(&bytes[..usize::from(*len)]).ok()
    }
}

impl std::hash::Hash for UndefinedColumn {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        if let Some(name) = &self.0 {
            name.hash(state);
        }
    }
}

/// Whether `text` is an SQL identifier as a filter would name a column: a letter or `_`, then
/// letters, digits or `_` (unquoted; the caller took the quotes off).
fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl RowFilter {
    pub const MAX_CONDITIONS: usize = 4;

    /// The name the filter compares that the model's tables lack, if any: PostgreSQL answers
    /// a query with this filter `ERROR: column "<name>" does not exist`.
    pub fn undefined_column(&self) -> Option<&str> {
        self.undefined.name()
    }

    /// Whether the row `key`, `row` matches.
    pub fn matches(&self, key: crate::core::ids::Key, row: &crate::core::ids::Row) -> bool {
        self.conditions
            .iter()
            .flatten()
            .all(|condition| condition.op.holds(condition.column.value(key, row), condition.value))
    }

    /// Reads `status = 'approved' AND id > 10`.
    pub fn parse(text: &str) -> Result<RowFilter, String> {
        use crate::core::ids::Status;
        let mut conditions = [None; RowFilter::MAX_CONDITIONS];
        let mut undefined = UndefinedColumn::default();
        let parts: Vec<&str> = split_and(text);
        if parts.len() > RowFilter::MAX_CONDITIONS {
            return Err(format!(
                "has {} conditions; the model reads at most {}",
                parts.len(),
                RowFilter::MAX_CONDITIONS
            ));
        }
        for (slot, part) in conditions.iter_mut().zip(parts) {
            let part = part.trim().trim_start_matches('(').trim_end_matches(')').trim();
            let Some((at, op_text, op)) = Comparison::OPERATORS
                .iter()
                .filter_map(|(text, op)| part.find(text).map(|at| (at, *text, *op)))
                .min_by_key(|(at, text, _)| (*at, std::cmp::Reverse(text.len())))
            else {
                return Err(format!("`{part}` is no comparison: write e.g. status = 'approved' or id > 10"));
            };
            let column_text = part[..at].trim().trim_matches('"').to_ascii_lowercase();
            let value_text = part[at + op_text.len()..].trim();
            let Some(column) = FilterColumn::ALL.into_iter().find(|column| column.name() == column_text) else {
                // A name the tables lack: accepted, as Debezium passes the filter on unread;
                // PostgreSQL refuses the query. Anything else is no comparison the model reads.
                if !is_identifier(&column_text) || value_text.is_empty() {
                    return Err(format!(
                        "`{part}` is no comparison the model reads: a column (id, version, status or amount_cents), \
                         an operator and a value"
                    ));
                }
                if undefined.is_none() {
                    undefined = UndefinedColumn::new(&column_text).ok_or_else(|| {
                        format!("`{column_text}` is no column of the model's tables, and longer than the {} bytes the model keeps of such a name", UndefinedColumn::MAX_BYTES)
                    })?;
                }
                continue;
            };
            let value = if column == FilterColumn::Status {
                if !matches!(op, Comparison::Eq | Comparison::Ne) {
                    return Err(format!("`{part}`: status is compared with = or <> only"));
                }
                let name = value_text
                    .strip_prefix('\'')
                    .and_then(|v| v.strip_suffix('\''))
                    .ok_or_else(|| format!("`{part}`: a status is a quoted word, e.g. 'approved'"))?;
                match Status::ALL.iter().find(|status| status.name() == name) {
                    Some(status) => *status as i64,
                    None => {
                        return Err(format!("`{name}` is no status; submitted, assessed, approved, paid or closed"));
                    }
                }
            } else {
                value_text.parse::<i64>().map_err(|_| format!("`{part}`: {column_text} is compared with an integer"))?
            };
            *slot = Some(Condition { column, op, value });
        }
        if conditions.iter().all(Option::is_none) && undefined.is_none() {
            return Err("is empty: write e.g. status = 'approved'".into());
        }
        Ok(RowFilter { conditions, undefined })
    }
}

/// A chunk query's filter as a trace event carries it: hashed only when there is one, so that
/// the trace hashes of backfills without `additional-conditions` did not change when filters
/// came.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QueryFilter(pub Option<RowFilter>);

impl QueryFilter {
    pub fn is_none(&self) -> bool {
        self.0.is_none()
    }
}

impl std::hash::Hash for QueryFilter {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        if let Some(filter) = &self.0 {
            filter.hash(state);
        }
    }
}

/// `a AND b and c`: the parts between the word AND, any case.
fn split_and(text: &str) -> Vec<&str> {
    let lower = text.to_ascii_lowercase();
    let mut parts = Vec::new();
    let mut start = 0;
    let mut search = 0;
    while let Some(found) = lower[search..].find(" and ") {
        let at = search + found;
        parts.push(&text[start..at]);
        start = at + 5;
        search = start;
    }
    parts.push(&text[start..]);
    parts
}

/// The filter as SQL, for the timeline.
impl fmt::Display for RowFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::core::ids::Status;
        for (i, condition) in self.conditions.iter().flatten().enumerate() {
            if i > 0 {
                write!(f, " AND ")?;
            }
            write!(f, "{} {} ", condition.column.name(), condition.op.sql())?;
            if condition.column == FilterColumn::Status {
                let name =
                    usize::try_from(condition.value).ok().and_then(|i| Status::ALL.get(i)).map_or("?", |s| s.name());
                write!(f, "'{name}'")?;
            } else {
                write!(f, "{}", condition.value)?;
            }
        }
        if let Some(name) = self.undefined.name() {
            let and = if self.conditions.iter().any(Option::is_some) { " AND " } else { "" };
            write!(f, "{and}{name} … (no such column)")?;
        }
        Ok(())
    }
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
    /// tables the connector captures, in the order the signal names them, and the
    /// `additional-conditions` filter of each table that has one (the first whose
    /// `data-collection` matches it, `AbstractIncrementalSnapshotContext.buildDataCollection`).
    /// `surrogate_key`: the signal's `surrogate-key`, for every table it names.
    ExecuteSnapshot {
        kind: SnapshotType,
        collections: Vec<TableId>,
        conditions: Vec<(TableId, RowFilter)>,
        surrogate_key: Option<SurrogateKey>,
    },
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

/// An `execute-snapshot`'s `surrogate-key` (reference debezium-postgres.md §6.4,
/// `AbstractChunkQueryBuilder.getQueryColumns`): the one column the chunk queries order and
/// bound by instead of the primary key; the buffer and the records still go by the message key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SurrogateKey {
    /// A column of the model's tables that chunks can order by.
    Column(FilterColumn),
    /// A name that is no column of the table: `getQueryColumns` throws when `readChunk` reaches
    /// the table (DBZ-7797's message).
    Missing(String),
}

/// The column a chunk query orders by, as the timeline shows it: None is the primary key `id`.
/// Hashed only when set, so that traces without a surrogate key keep their hashes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChunkOrder(pub Option<FilterColumn>);

impl ChunkOrder {
    pub fn is_primary_key(&self) -> bool {
        self.0.is_none()
    }

    /// The column's name.
    pub fn name(&self) -> &'static str {
        self.0.map_or("id", FilterColumn::name)
    }
}

impl std::hash::Hash for ChunkOrder {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        if let Some(column) = self.0 {
            column.hash(state);
        }
    }
}

/// How a chunk query's bounds treat NULL in its key column (reference debezium-postgres.md §9
/// row 14, DBZ-5071). Only a key column that can be NULL (`message.key.columns` naming a table's
/// [`UniqueColumn`](crate::core::ids::UniqueColumn)) has any. Hashed only when there is one, so
/// that traces without one keep their hashes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChunkNulls {
    /// The key columns are NOT NULL.
    #[default]
    None,
    /// Debezium 2.6 and later (`AbstractChunkQueryBuilder.addLowerBound` with `nullsSortLast`
    /// true on PostgreSQL): after a non-NULL `?`, `(k > ? OR k IS NULL)`; after NULL, `1 = 0`;
    /// the upper bound is `NOT` of the same: NULL is the largest value.
    NullAware,
    /// Before 2.6: `k > ?` and `NOT (k > ?)` whatever `?` is; a comparison with NULL is unknown,
    /// so a row whose column is NULL is never in a bounded chunk, and a NULL maximum key (the
    /// first row of `ORDER BY k DESC`) leaves every bounded chunk empty.
    Unaware,
}

impl ChunkNulls {
    pub fn is_none(&self) -> bool {
        *self == ChunkNulls::None
    }
}

impl std::hash::Hash for ChunkNulls {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        if !self.is_none() {
            (*self as u8).hash(state);
        }
    }
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
    /// `UNKNOWN_SCHEMA`: the connector has no schema for the table (`isTableInvalid`): it does
    /// not capture it (`table.include.list`), so the schema refresh finds nothing either
    /// (`retrieveAndRefreshSchema`, then `warnAndSkip`); the snapshot goes on with the next one.
    UnknownSchema,
    /// `NO_PRIMARY_KEY`: `getQueryColumns` found no column to chunk the table by (no primary
    /// key, no `message.key.columns`, no `surrogate-key`): `isTableInvalid` skips it with
    /// `warnAndSkip` before any query, and the snapshot goes on with the next one.
    NoPrimaryKey,
}

impl ScanStatus {
    pub fn name(self) -> &'static str {
        match self {
            ScanStatus::Succeeded => "SUCCEEDED",
            ScanStatus::Empty => "EMPTY",
            ScanStatus::SqlException => "SQL_EXCEPTION",
            ScanStatus::UnknownSchema => "UNKNOWN_SCHEMA",
            ScanStatus::NoPrimaryKey => "NO_PRIMARY_KEY",
        }
    }
}

/// The channel a signal came by: `None`, the source channel (a row of the signal table read on
/// the stream, executed in the streaming thread); `Some(topic)`, the Kafka channel's topic
/// ([`crate::core::event::Topic::Signal`]), executed on the SignalProcessor's thread. Hashed only
/// for Kafka, so that the trace hashes of source signals did not change when the channel came.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SignalVia(pub Option<u16>);

impl SignalVia {
    pub const SOURCE: SignalVia = SignalVia(None);

    pub fn is_source(&self) -> bool {
        self.0.is_none()
    }
}

impl std::hash::Hash for SignalVia {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        if let Some(topic) = self.0 {
            topic.hash(state);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_reads_comparisons_joined_by_and_and_says_what_it_cannot_read() {
        use crate::core::ids::{Row, Status};
        let filter = RowFilter::parse("status = 'approved' AND (id > 10) and amount_cents <= 5000").expect("a filter");
        assert_eq!(filter.to_string(), "status = 'approved' AND id > 10 AND amount_cents <= 5000");
        let row = |status, amount_cents| Row { version: 1, status, amount_cents, aggregate_id: 0 };
        assert!(filter.matches(11, &row(Status::Approved, 5000)));
        assert!(!filter.matches(10, &row(Status::Approved, 10)), "id > 10");
        assert!(!filter.matches(11, &row(Status::Paid, 10)), "status");
        assert!(!filter.matches(11, &row(Status::Approved, 5001)), "amount_cents");
        assert!(RowFilter::parse("id <> 3").expect("a filter").matches(4, &row(Status::Submitted, 0)));
        for (text, problem) in [
            ("", "is no comparison"),
            ("1region = 'north'", "no comparison the model reads"),
            ("region = ", "no comparison the model reads"),
            ("status > 'approved'", "compared with = or <> only"),
            ("status = 'lost'", "`lost` is no status"),
            ("id > ten", "compared with an integer"),
            ("id > 1 AND id > 2 AND id > 3 AND id > 4 AND id > 5", "at most 4"),
        ] {
            let error = RowFilter::parse(text).expect_err(text);
            assert!(error.contains(problem), "{text}: {error}");
        }
    }

    #[test]
    fn a_name_the_tables_lack_is_kept_for_postgresql_to_refuse() {
        let filter = RowFilter::parse("status = 'approved' AND region = 'north' AND zone > 2").expect("a filter");
        assert_eq!(filter.undefined_column(), Some("region"), "the first such name");
        assert_eq!(filter.to_string(), "status = 'approved' AND region … (no such column)");
        let only = RowFilter::parse("region = 'north'").expect("a filter");
        assert_eq!((only.undefined_column(), only.to_string().as_str()), (Some("region"), "region … (no such column)"));
        assert_eq!(RowFilter::parse("id > 3").expect("a filter").undefined_column(), None);
        // Every prefix and suffix of a filter, on every character boundary: an answer, never a panic.
        let full = "status = 'approved' AND (région >= 2) and id <> 7 AND zone = 'nord'";
        for (at, _) in full.char_indices() {
            let _ = RowFilter::parse(&full[..at]);
            let _ = RowFilter::parse(&full[at..]);
        }
        let long = format!("{} = 1", "x".repeat(UndefinedColumn::MAX_BYTES + 1));
        assert!(RowFilter::parse(&long).expect_err("too long").contains("longer than"));
        // Hashed only when there is one: a filter without keeps the hash it had.
        let hash = |value: &dyn Fn(&mut std::collections::hash_map::DefaultHasher)| {
            use std::hash::Hasher;
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            value(&mut hasher);
            hasher.finish()
        };
        use std::hash::Hash;
        let plain = RowFilter::parse("id > 3").expect("a filter");
        assert_eq!(hash(&|h| plain.hash(h)), hash(&|h| plain.conditions.hash(h)));
    }

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
