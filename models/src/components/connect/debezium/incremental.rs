//! Signals and the incremental snapshot (DBLog), reference debezium-postgres.md §6.1–§6.3, as
//! Debezium's code runs them:
//!
//! - The source channel (`SourceSignalChannel`, `EventDispatcher.dispatchDataChangeEvent`): an
//!   INSERT into the signal table (`signal.data.collection`), read from the WAL like any captured
//!   change, is executed in the streaming thread *before* the row's own record is emitted; with
//!   `insert_delete` watermarking a DELETE of a signal row is read as a window's close
//!   (`SignalRecord.buildSignalRecordFromChangeEventSource`). A signal table outside the
//!   publication is never decoded, so nothing happens.
//! - `execute-snapshot` (`AbstractIncrementalSnapshotChangeEventSource
//!   .addDataCollectionNamesToSnapshot`): the tables are queued; if no snapshot was running,
//!   `readChunk` runs at once.
//! - `readChunk`, literally: a new chunk id; the open watermark (`INSERT INTO <signal table>
//!   VALUES ('<chunk>-open', 'snapshot-window-open', …)`, committed); for a table without a
//!   maximum key yet, `SELECT … ORDER BY id DESC LIMIT 1` (none: the table is empty, done, next);
//!   the chunk query `SELECT … WHERE (id) > (chunkEnd) AND (id) <= (maximumKey) ORDER BY id LIMIT
//!   incremental.snapshot.chunk.size` into the window buffer (no row: the table is done, next);
//!   the close watermark (`insert_insert`: a `-close` row; `insert_delete`: the `-open` row
//!   deleted), also when no table is left. The streaming thread waits for all of it: replication
//!   messages that arrive meanwhile are read afterwards, in order.
//! - The streaming side (`SignalBasedIncrementalSnapshotChangeEventSource.processMessage`,
//!   `deduplicateWindow`, `closeWindow`, `sendWindowEvents`): the open watermark of the current
//!   chunk opens the window; while it is open, every streamed event (insert, update or delete) of
//!   the current table removes its key from the buffer; the close watermark emits what is left as
//!   `op=r` records (`source.snapshot=incremental`), each moving `incremental_snapshot_primary_key`,
//!   then runs `readChunk` for the next chunk. A watermark of another chunk id is ignored.
//! - Restart (`init`, `AbstractIncrementalSnapshotContext.init`/`store`): the offset of every
//!   record carries the context (collections, last key sent, maximum key); a task starting from an
//!   offset with a running snapshot reads a chunk after the stored key, with a fresh chunk id,
//!   before its stream starts. The buffer and the open window are not stored.
//!
//! - Stop, pause and resume (reference §6.3; `StopSnapshot.arrived`,
//!   `AbstractIncrementalSnapshotChangeEventSource.requestStopSnapshot`/`checkAndProcessStopFlag`/
//!   `pauseSnapshot`/`resumeSnapshot`): `stop-snapshot` only queues a request in the snapshot
//!   context; it takes effect when the next `readChunk` begins, after the current window was
//!   emitted: the named tables leave the queue, the current one is done and the next begins;
//!   rows never read are never emitted. The request is not drained before then: sent while no
//!   snapshot runs, it stops the next one at its first chunk. Only `incremental` has a case.
//!   `pause-snapshot` sets an in-memory flag that `readChunk` obeys (no watermark, no chunk) and
//!   `resume-snapshot` clears it and reads the next chunk at once. Neither the flag nor a
//!   pending stop is in the offsets: a task restart forgets both, and `init` reads on.
//! - `log`: the message goes to the connector's log (`Log.arrived`).
//! - `additional-conditions` (reference §6.4, `AbstractChunkQueryBuilder`): a table's filter is
//!   appended with `AND (…)` to its maximum-key and chunk queries; rows that do not match are
//!   never read, streaming is unaffected. The offset keeps it with its collection (the model: the
//!   signal that queued it), so a restart reads on with the same filter.
//!
//! - `surrogate-key` (reference §6.4, `AbstractChunkQueryBuilder.getQueryColumns`, DBZ-6023):
//!   the maximum-key and chunk queries order and bound by the signal's column instead of the
//!   key; `maximumKey`, `chunkEndPosition` and `lastEventKeySent` are that column's values
//!   (`keyFromRow` over the query columns), the buffer keeps the query's order and still
//!   deduplicates by the message key. A column whose values repeat skips the rows that share
//!   the last value a chunk read (strict `>` lower bound). A name the table lacks throws
//!   `IllegalArgumentException` after the open watermark (DBZ-7797, `isTableInvalid`): see
//!   `DebeziumTask::surrogate_key_missing`.
//!
//! Blocking snapshots are `blocking`'s, the Kafka signal channel `kafka_signal`'s (a signal that
//! comes by it runs here too, with [`SignalVia`] saying so: its first `readChunk` does not hold
//! the stream, and without the source channel no watermark is read), the read-only snapshot's
//! watermarks and window rule `read_only`'s (this `readChunk` asks `pg_current_snapshot()` there
//! instead of writing watermark rows).
//!
//! The chunk key (`getQueryColumns`): the `surrogate-key`, else the key columns of the key
//! mapper, the primary key or the nullable unique column `message.key.columns` names
//! ([`crate::core::ids::UniqueColumn`]). On a two-column key, Debezium before 1.8 bounds each
//! column on its own (DBZ-3860, `ChunkRange::contains`); on a nullable column, Debezium before 2.6
//! compares a NULL bound as any value, which no row passes (DBZ-5071, [`ChunkNulls`]).
//!
//! A table without a primary key that `message.key.columns` does not key
//! ([`super::config::DebeziumConfig::null_key_tables`]; reference §6.3, "tables without a primary
//! key … are skipped"): with no `surrogate-key` either, `getQueryColumns` is empty and
//! `isTableInvalid` skips the table with `warnAndSkip` (`NO_PRIMARY_KEY`) before any query. With
//! a `surrogate-key` it is chunked, but `readChunk` puts each row in the window under
//! `tableSchema.keyFromColumnData(row)`, null without a key schema (`TableSchema`'s generator
//! returns null), so the `LinkedHashMap` keeps one entry, the chunk's last row; and a streamed
//! event's null key is no `Struct`, so `deduplicateWindow` removes nothing. Read from
//! `AbstractIncrementalSnapshotChangeEventSource` (`readChunk`, `deduplicateWindow`); the
//! reference says only that deduplication uses the message key.

use super::*;
use crate::components::connect::debezium::config::WatermarkingStrategy;
use crate::components::connect::debezium::streaming::{PgOutput, PgOutputs};
use crate::core::event::IncrementalOffset;
use crate::core::signal::{
    ChunkId, ChunkNulls, ChunkOrder, FilterColumn, QueryFilter, ScanStatus, SignalAction, SignalVia, SnapshotType,
    SurrogateKey, Watermark, watermark_key, watermark_of,
};
use std::collections::BTreeMap;

/// Where `readChunk` is: the request it waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) enum ChunkStep {
    /// The open watermark's INSERT.
    OpenWatermark,
    /// `SELECT … ORDER BY id DESC LIMIT 1`.
    MaximumKey,
    /// The chunk query.
    Chunk,
    /// The close watermark's INSERT (or, `insert_delete`, the open row's DELETE).
    CloseWatermark,
}

/// The incremental snapshot's context (`AbstractIncrementalSnapshotContext`) and window buffer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) struct IncrementalSnapshot {
    /// `snapshotDataCollection`: the collections still to read, the current one first. Empty:
    /// the snapshot is not running (its last close watermark may still be on its way).
    /// Each with the scripted signal that queued it (its row's key; 0: none), whose data holds
    /// the table's `additional-conditions`.
    queue: Vec<(TableId, u8)>,
    /// `maximumKey` of the current table. Like the two below, a value of the column the chunk
    /// queries order by (`keyFromRow` over `getQueryColumns`): the key `id`, or the
    /// `surrogate-key`'s column.
    maximum_key: Option<Key>,
    /// `chunkEndPosition`: the last row the previous chunk read.
    chunk_end: Option<Key>,
    /// `lastEventKeySent`: the last snapshot row emitted.
    last_key_sent: Option<Key>,
    /// `currentChunkId`.
    pub(super) chunk: Option<ChunkId>,
    /// `windowOpened`.
    pub(super) window_opened: bool,
    /// The window buffer: the chunk's rows in the chunk query's order (`LinkedHashMap` by message
    /// key), here by (the ordering column's value, key): key order without a surrogate key.
    pub(super) window: BTreeMap<(Key, Key), Row>,
    /// Rows removed from the buffer by streamed events in the current window.
    pub(super) deduplicated: u32,
    /// Rows read of the current table so far (`totalRowsScanned`).
    rows_scanned: u64,
    /// The request `readChunk` waits for; None when the streaming thread is not in it.
    pub(super) reading: Option<ChunkStep>,
    /// `paused` (`pause-snapshot`): an `AtomicBoolean` of the context, never stored.
    paused: bool,
    /// The read-only snapshot's `pg_current_snapshot()` watermarks (`read.only=true`; never
    /// stored).
    #[serde(default, skip_serializing_if = "super::read_only::PgWatermarks::is_empty")]
    pub(super) marks: super::read_only::PgWatermarks,
}

/// A `stop-snapshot` request waiting for the next `readChunk` (`dataCollectionsToStop`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) struct StopRequest {
    /// `.*`: every collection.
    all: bool,
    /// The captured tables the requests' patterns matched, in order, each once.
    tables: Vec<TableId>,
    /// Patterns that matched no captured table (kept as literal names: never removable).
    unmatched: Vec<String>,
}

impl IncrementalSnapshot {
    fn new(queue: Vec<(TableId, u8)>) -> IncrementalSnapshot {
        IncrementalSnapshot {
            queue,
            maximum_key: None,
            chunk_end: None,
            last_key_sent: None,
            chunk: None,
            window_opened: false,
            window: BTreeMap::new(),
            deduplicated: 0,
            rows_scanned: 0,
            reading: None,
            paused: false,
            marks: Default::default(),
        }
    }

    pub(super) fn running(&self) -> bool {
        !self.queue.is_empty()
    }

    pub(super) fn current(&self) -> Option<TableId> {
        self.queue.first().map(|(table, _)| *table)
    }

    /// The tables still to read, the current one first.
    fn tables(&self) -> Vec<TableId> {
        self.queue.iter().map(|(table, _)| *table).collect()
    }

    /// `store`: what the offset of the next record carries.
    fn stored(&self) -> Option<IncrementalOffset> {
        self.running().then(|| IncrementalOffset::of_queue(&self.queue, self.last_key_sent, self.maximum_key))
    }

    /// `nextDataCollection` with `resetChunk`.
    fn next_collection(&mut self) {
        if !self.queue.is_empty() {
            self.queue.remove(0);
        }
        self.maximum_key = None;
        self.chunk_end = None;
        self.last_key_sent = None;
        self.rows_scanned = 0;
    }
}

/// The stream while the streaming thread is in `readChunk`: what to take up again when it
/// returns.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) struct Stalled {
    /// The reply whose message `index` (a signal row, a watermark) sent the thread into
    /// `readChunk`: that message's own record is emitted when it returns, then the rest.
    resume: Option<(ReplReply, usize)>,
    /// Replies that arrived meanwhile, in order.
    later: Vec<ReplReply>,
    /// `init` at the task's start: the stream starts when the read returns.
    then_stream: bool,
    /// The message at `resume`'s index has not been read yet (a blocking snapshot's pause,
    /// taken before the loop reads its next message): it is read in full when the stream
    /// resumes, not only its record emitted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    unread: bool,
}

impl Stalled {
    fn new(then_stream: bool) -> Stalled {
        Stalled { resume: None, later: Vec::new(), then_stream, unread: false }
    }

    /// The stream paused for a blocking snapshot.
    pub(super) fn paused() -> Stalled {
        Stalled { unread: true, ..Stalled::new(false) }
    }
}

impl DebeziumTask {
    /// Whether an incremental snapshot is running or its last window has not closed yet.
    pub fn is_backfilling(&self) -> bool {
        self.incremental.is_some()
    }

    /// Whether the streaming thread is in `readChunk` (the stream is not being read).
    pub fn in_read_chunk(&self) -> bool {
        self.stalled.is_some()
    }

    /// The offset's incremental context follows the in-memory one.
    pub(super) fn sync_incremental_offset(&mut self) {
        self.offset.incremental = self.incremental.as_ref().and_then(|snapshot| snapshot.stored());
    }

    fn next_chunk_id(&mut self) -> ChunkId {
        self.chunks_drawn += 1;
        ChunkId::new(self.chunk_origin.0, self.chunk_origin.1, self.chunks_drawn)
    }

    /// `init` (`AbstractIncrementalSnapshotChangeEventSource.init`), before the stream starts:
    /// with a running snapshot in the offset, read a chunk after the stored key. Returns true when
    /// the read began (the stream starts when it returns).
    pub(super) fn init_incremental(&mut self, ctx: &mut Ctx) -> bool {
        if self.incremental.is_some() || self.stalled.is_some() {
            return false;
        }
        let Some(stored) = self.offset.incremental else { return false };
        if self.config.signalling.is_none() || stored.collections().is_empty() {
            return false;
        }
        let queue = stored.collections().iter().copied().zip(stored.signals().iter().copied()).collect();
        let mut snapshot = IncrementalSnapshot::new(queue);
        snapshot.chunk_end = stored.primary_key();
        snapshot.maximum_key = stored.maximum_key();
        ctx.observe(Observation::IncrementalSnapshotResumed {
            table: stored.collections()[0],
            after: snapshot.chunk_end,
        });
        self.incremental = Some(Box::new(snapshot));
        self.sync_incremental_offset();
        self.stalled = Some(Box::new(Stalled::new(true)));
        self.read_chunk(ctx);
        self.stalled.is_some()
    }

    /// A captured change of the signal table, read on the stream before its record is emitted:
    /// a signal to execute, or a watermark. Returns true when the streaming thread went into
    /// `readChunk` (the stream waits for it).
    pub(super) fn on_signal_row(&mut self, ctx: &mut Ctx, change: &Change) -> bool {
        let Some(signalling) = self.config.signalling.as_ref() else { return false };
        if change.table != signalling.table {
            return false;
        }
        if !signalling.source_channel {
            // `signal.enabled.channels` without `source`: `EventDispatcher` has no source
            // channel, so neither a signal row nor a watermark is read as a signal; the row is a
            // record like any other. A window opened by a watermark never closes.
            if matches!(change.kind, ChangeKind::Insert { .. }) {
                ctx.observe(Observation::SignalRowNotRead {
                    key: change.key,
                    watermark: watermark_of(change.key).map(|(chunk, _)| chunk),
                });
            }
            return false;
        }
        let insert_delete = signalling.watermarking == WatermarkingStrategy::InsertDelete;
        let (insert, delete) =
            (matches!(change.kind, ChangeKind::Insert { .. }), matches!(change.kind, ChangeKind::Delete { .. }));
        match (watermark_of(change.key), insert, delete && insert_delete) {
            (Some((chunk, Watermark::Open)), true, _) => {
                self.open_window(ctx, chunk);
                false
            }
            // `insert_delete`: the open row's DELETE is the close.
            (Some((chunk, Watermark::Open)), _, true) | (Some((chunk, Watermark::Close)), true, _) => {
                self.close_window(ctx, chunk)
            }
            (None, true, _) => self.execute_signal(ctx, change.key, SignalVia::SOURCE),
            _ => false,
        }
    }

    /// Whether `message` is a source signal's row (an INSERT into the signal table that is no
    /// watermark), which the streaming thread executes under the signal processor's semaphore.
    pub(super) fn is_source_signal(&self, messages: &PgOutputs, message: &PgOutput) -> bool {
        let (Some(signalling), PgOutput::Change { index, .. }) = (self.config.signalling.as_ref(), message) else {
            return false;
        };
        let Some(change) = messages.txn().and_then(|txn| txn.changes.get(*index)) else { return false };
        signalling.source_channel
            && change.table == signalling.table
            && matches!(change.kind, ChangeKind::Insert { .. })
            && watermark_of(change.key).is_none()
    }

    /// A scripted signal: its row read on the stream (`SignalProcessor.processSourceSignal`, in
    /// the streaming thread), or a Kafka channel's record (`SignalProcessor.process`, on the
    /// signal processor's thread: a `readChunk` it starts does not hold the stream). `key`: the
    /// signal's place + 1 in the connector's list. Returns whether the stream now waits.
    pub(super) fn execute_signal(&mut self, ctx: &mut Ctx, key: Key, via: SignalVia) -> bool {
        let thread = if via.is_source() { "in the streaming thread" } else { "on the signal processor's thread" };
        let Some(signal) = self
            .config
            .signalling
            .as_ref()
            .and_then(|signalling| usize::try_from(key - 1).ok().and_then(|index| signalling.signals.get(index)))
            .cloned()
        else {
            return false;
        };
        let outcome = |outcome: String| Observation::SignalExecuted {
            id: signal.id.clone(),
            signal_type: signal.action.signal_type().into(),
            data: signal.data.clone(),
            outcome,
            via,
        };
        match &signal.action {
            SignalAction::ExecuteSnapshot { .. } => {}
            SignalAction::StopSnapshot { kind: SnapshotType::Blocking, .. } => {
                ctx.observe(outcome(
                    "nothing happens: StopSnapshot.arrived has a case for incremental snapshots only".into(),
                ));
                return false;
            }
            SignalAction::StopSnapshot { kind: SnapshotType::Incremental, tables, unmatched } => {
                let request = self.stop_request.get_or_insert_with(Default::default);
                match tables {
                    None => request.all = true,
                    Some(tables) => {
                        for table in tables {
                            if !request.tables.contains(table) {
                                request.tables.push(*table);
                            }
                        }
                    }
                }
                for name in unmatched {
                    if !request.unmatched.contains(name) {
                        request.unmatched.push(name.clone());
                    }
                }
                let running = self.incremental.as_ref().is_some_and(|snapshot| snapshot.running());
                ctx.observe(outcome(if running {
                    "stop requested: it takes effect when the next chunk would be read (checkAndProcessStopFlag at \
                     the start of readChunk), after the current window is emitted; the request is in memory only"
                        .into()
                } else {
                    "stop requested, but no incremental snapshot runs: the request waits in the snapshot context \
                     until the next readChunk, the first chunk of the next snapshot signalled (in memory only)"
                        .into()
                }));
                return false;
            }
            SignalAction::PauseSnapshot => {
                let effect = match self.incremental.as_mut() {
                    Some(snapshot) if snapshot.running() && !snapshot.paused => {
                        snapshot.paused = true;
                        "the incremental snapshot pauses: the current window is still emitted, then no chunk is \
                         read until resume-snapshot (the pause is an in-memory flag, not in the offsets: a task \
                         restart resumes the snapshot)"
                    }
                    Some(snapshot) if snapshot.running() => "nothing happens: the snapshot is already paused",
                    _ => "nothing happens: no incremental snapshot runs",
                };
                ctx.observe(outcome(effect.into()));
                return false;
            }
            SignalAction::ResumeSnapshot => {
                let table = match self.incremental.as_mut() {
                    Some(snapshot) if snapshot.running() && snapshot.paused => {
                        snapshot.paused = false;
                        snapshot.current()
                    }
                    Some(snapshot) if snapshot.running() => {
                        ctx.observe(outcome("nothing happens: the snapshot is not paused".into()));
                        return false;
                    }
                    _ => {
                        ctx.observe(outcome("nothing happens: no incremental snapshot runs".into()));
                        return false;
                    }
                };
                ctx.observe(outcome(format!("the pause is cleared: readChunk runs now, {thread}")));
                if let Some(table) = table {
                    ctx.observe(Observation::IncrementalSnapshotUnpaused { table });
                }
                if via.is_source() {
                    self.stalled = Some(Box::new(Stalled::new(false)));
                }
                self.read_chunk(ctx);
                return self.stalled.is_some();
            }
            SignalAction::Log { message } => {
                ctx.observe(outcome(format!("written to the connector's log: \"{message}\"")));
                return false;
            }
        }
        let SignalAction::ExecuteSnapshot { kind, collections, .. } = &signal.action else { return false };
        // The row's key is the signal's place in the list, from 1; the model keeps 255 of them.
        let origin = u8::try_from(key).unwrap_or(0);
        let collections: Vec<(TableId, u8)> = collections.iter().map(|table| (*table, origin)).collect();
        if *kind == SnapshotType::Blocking {
            // The snapshot's tables pass the connector's table filter
            // (`RelationalSnapshotChangeEventSource.determineCapturedTables`): a table it does not
            // capture now (a later configuration adds it) is left out.
            let captured = |(table, _): &&(TableId, u8)| self.config.tables.contains(table);
            let tables: Vec<(TableId, u8)> = collections.iter().filter(captured).copied().collect();
            let left_out = collections.len() - tables.len();
            let mut outcome_text = if self.blocking.is_some() || self.blocking_request.is_some() {
                "another blocking snapshot is requested before streaming paused: its tables are read in the \
                 same pause, after the first one's (the executor runs one snapshot after the other)"
                    .to_string()
            } else {
                "a blocking snapshot is requested (doBlockingSnapshot): streaming pauses before the next message"
                    .to_string()
            };
            if left_out > 0 {
                outcome_text.push_str(&format!(
                    "; {left_out} of its table(s) left out: the connector does not capture them (table.include.list), \
                     and the snapshot reads only tables its filter includes"
                ));
            }
            ctx.observe(outcome(outcome_text));
            match self.blocking_request.as_mut() {
                Some(queued) => queued.extend(tables),
                None => self.request_blocking_snapshot(tables),
            }
            return false;
        }
        let running = self.incremental.as_ref().is_some_and(|snapshot| snapshot.running());
        let queued = self.incremental.as_ref().filter(|_| running).map_or(0, |snapshot| snapshot.queue.len());
        // The model's offset holds at most `MAX_COLLECTIONS` collections (Debezium's has no
        // limit): the loader keeps one signal within it, but a signal replayed while a resumed
        // snapshot runs can queue past it. Said, never dropped in silence.
        let dropped = (queued + collections.len()).saturating_sub(IncrementalOffset::MAX_COLLECTIONS);
        let mut text = if running {
            format!("{} table(s) queued behind the running incremental snapshot", collections.len())
        } else {
            format!("an incremental snapshot starts: readChunk runs now, {thread}")
        };
        if dropped > 0 {
            text.push_str(&format!(
                "; the model keeps at most {} tables queued (Debezium has no such limit): the last {dropped} are \
                 not queued, a limit of the model",
                IncrementalOffset::MAX_COLLECTIONS
            ));
        }
        ctx.observe(outcome(text));
        match self.incremental.as_mut() {
            Some(snapshot) if running => {
                snapshot.queue.extend(collections);
                snapshot.queue.truncate(IncrementalOffset::MAX_COLLECTIONS);
                self.sync_incremental_offset();
                false
            }
            _ => {
                let mut snapshot = IncrementalSnapshot::new(collections);
                snapshot.queue.truncate(IncrementalOffset::MAX_COLLECTIONS);
                ctx.observe(Observation::IncrementalSnapshotStarted { tables: snapshot.tables() });
                self.incremental = Some(Box::new(snapshot));
                self.sync_incremental_offset();
                if via.is_source() {
                    self.stalled = Some(Box::new(Stalled::new(false)));
                }
                self.read_chunk(ctx);
                self.stalled.is_some()
            }
        }
    }

    /// `openWindow`: only the current chunk's watermark opens the window.
    fn open_window(&mut self, ctx: &mut Ctx, chunk: ChunkId) {
        let Some(snapshot) = self.incremental.as_mut() else { return };
        if snapshot.chunk != Some(chunk) {
            ctx.observe(Observation::WatermarkIgnored { chunk, watermark: Watermark::Open });
            return;
        }
        snapshot.window_opened = true;
        ctx.observe(Observation::WindowOpened { chunk });
    }

    /// `closeWindow`: the current chunk's close emits the buffer (`sendWindowEvents`) and reads
    /// the next chunk. Returns true when the streaming thread went into `readChunk`.
    fn close_window(&mut self, ctx: &mut Ctx, chunk: ChunkId) -> bool {
        let Some(snapshot) = self.incremental.as_mut() else { return false };
        if snapshot.chunk != Some(chunk) {
            ctx.observe(Observation::WatermarkIgnored { chunk, watermark: Watermark::Close });
            return false;
        }
        snapshot.window_opened = false;
        self.send_window_events(ctx, true)
    }

    /// `sendWindowEvents`, then `readChunk` in the streaming thread (which waits for it, unless it
    /// already does). `window_read`: the window had watermarks (a read-only snapshot's paused
    /// `readChunk` leaves none, and an empty send then closes no window). Returns true when the
    /// stream waits.
    pub(super) fn send_window_events(&mut self, ctx: &mut Ctx, window_read: bool) -> bool {
        let Some(snapshot) = self.incremental.as_mut() else { return false };
        let table = snapshot.current();
        let rows = std::mem::take(&mut snapshot.window);
        let deduplicated = std::mem::take(&mut snapshot.deduplicated);
        let chunk = snapshot.chunk;
        let emitted = rows.len() as u32;
        for (position, row) in rows {
            self.send_snapshot_event(ctx, table, position, row);
        }
        if let Some(chunk) = chunk
            && (window_read || emitted > 0)
        {
            ctx.observe(Observation::WindowClosed { table, chunk, emitted, deduplicated });
        }
        if self.stalled.is_none() {
            self.stalled = Some(Box::new(Stalled::new(false)));
        }
        self.read_chunk(ctx);
        self.stalled.is_some()
    }

    /// `sendEvent`: one buffered row as an `op=r` record, `incremental_snapshot_primary_key`
    /// moved to it (its value of the ordering column, `position`); `source.lsn` is where the
    /// stream is.
    fn send_snapshot_event(&mut self, ctx: &mut Ctx, table: Option<TableId>, (position, key): (Key, Key), row: Row) {
        let Some(table) = table else { return };
        if let Some(snapshot) = self.incremental.as_mut() {
            snapshot.last_key_sent = Some(position);
        }
        self.sync_incremental_offset();
        let lsn = self.offset.lsn.unwrap_or(Lsn::INVALID);
        let value =
            ChangeEvent::snapshot_read(Origin::Postgresql, table, row, lsn, SnapshotMarker::Incremental, ctx.now.ms());
        self.queue.get_mut().push(SourceRecord {
            topic: Topic::Change(table),
            key,
            value: Some(value),
            offset: self.offset,
            placement: None,
        });
    }

    /// `processMessage` → `deduplicateWindow`: a streamed event of the current table while the
    /// window is open removes its key from the buffer.
    pub(super) fn deduplicate(&mut self, table: TableId, key: Key) {
        // A null message key is no `Struct`: `deduplicateWindow` removes nothing for it.
        if self.config.null_key(table) {
            return;
        }
        let Some(snapshot) = self.incremental.as_mut() else { return };
        if !snapshot.window_opened || snapshot.window.is_empty() || snapshot.current() != Some(table) {
            return;
        }
        // Without a surrogate key the position is the key itself; with one, look the key up.
        let removed = snapshot.window.remove(&(key, key)).is_some() || {
            let position = snapshot.window.keys().find(|(_, buffered)| *buffered == key).copied();
            position.is_some_and(|position| snapshot.window.remove(&position).is_some())
        };
        if removed {
            snapshot.deduplicated += 1;
        }
    }

    /// `readChunk`: a pending stop first, then a new chunk id and its open watermark (the rest
    /// follows the replies); a paused snapshot reads nothing.
    fn read_chunk(&mut self, ctx: &mut Ctx) {
        self.process_stop_request(ctx);
        let Some(snapshot) = self.incremental.as_mut() else {
            self.end_read_chunk(ctx);
            return;
        };
        if !snapshot.running() {
            // "Skipping read chunk because snapshot is not running".
            self.incremental = None;
            self.sync_incremental_offset();
            ctx.observe(Observation::IncrementalSnapshotCompleted);
            self.end_read_chunk(ctx);
            return;
        }
        if snapshot.paused {
            // "Incremental snapshot was paused."
            if let Some(table) = snapshot.current() {
                ctx.observe(Observation::IncrementalSnapshotPaused { table, after: snapshot.chunk_end });
            }
            self.end_read_chunk(ctx);
            return;
        }
        let chunk = self.next_chunk_id();
        if let Some(snapshot) = self.incremental.as_mut() {
            snapshot.chunk = Some(chunk);
            snapshot.window_opened = false;
            snapshot.reading = Some(ChunkStep::OpenWatermark);
        }
        if self.is_read_only() {
            // `emitWindowOpen`: the low watermark.
            self.sql(ctx, SqlRequest::CurrentSnapshot);
            return;
        }
        self.write_watermark(ctx, chunk, Watermark::Open);
    }

    /// `checkAndProcessStopFlag`: the tables a stop names leave the queue (the current one last:
    /// it is done, `tableScanCompleted`, and the next one begins, `nextDataCollection`).
    fn process_stop_request(&mut self, ctx: &mut Ctx) {
        let Some(request) = self.stop_request.take() else { return };
        let Some(snapshot) = self.incremental.as_mut().filter(|snapshot| snapshot.running()) else {
            // "No active incremental snapshot, stop ignored".
            ctx.observe(Observation::IncrementalSnapshotStopped {
                running: false,
                stopped: Vec::new(),
                current: false,
                not_queued: Vec::new(),
                unmatched: request.unmatched,
                left: Vec::new(),
            });
            return;
        };
        let current = snapshot.current();
        let named: Vec<TableId> = if request.all { snapshot.tables() } else { request.tables };
        let mut stopped = Vec::new();
        let mut not_queued = Vec::new();
        let mut stop_current = false;
        for table in named {
            if Some(table) == current {
                stop_current = true;
            } else if let Some(at) = snapshot.queue.iter().position(|(queued, _)| *queued == table) {
                snapshot.queue.remove(at);
                stopped.push(table);
            } else {
                not_queued.push(table);
            }
        }
        if stop_current && let Some(table) = current {
            stopped.push(table);
            snapshot.window.clear();
            snapshot.next_collection();
        }
        let left = snapshot.tables();
        self.sync_incremental_offset();
        ctx.observe(Observation::IncrementalSnapshotStopped {
            running: true,
            stopped,
            current: stop_current,
            not_queued,
            unmatched: request.unmatched,
            left,
        });
    }

    fn write_watermark(&mut self, ctx: &mut Ctx, chunk: ChunkId, watermark: Watermark) {
        let Some(signalling) = self.config.signalling.as_ref() else { return };
        let table = signalling.table;
        let op = match (watermark, signalling.watermarking) {
            (Watermark::Close, WatermarkingStrategy::InsertDelete) => {
                RowOp::Delete { table, key: watermark_key(chunk, Watermark::Open) }
            }
            _ => RowOp::Insert {
                table,
                key: watermark_key(chunk, watermark),
                status: crate::core::ids::Status::Submitted,
                amount_cents: 0,
            },
        };
        self.sql(ctx, SqlRequest::Transaction { ops: vec![op] });
    }

    /// The column the current table's chunks order by (`getQueryColumns`): the signal's
    /// `surrogate-key`, else the primary key. Err: the `surrogate-key` names no column of the table.
    fn chunk_order(&self) -> Result<ChunkOrder, String> {
        match self.surrogate_key() {
            None | Some(SurrogateKey::Column(FilterColumn::Id)) => Ok(ChunkOrder(None)),
            Some(SurrogateKey::Column(column)) => Ok(ChunkOrder(Some(*column))),
            Some(SurrogateKey::Missing(name)) => Err(name.clone()),
        }
    }

    /// The `surrogate-key` of the signal that queued the current table.
    fn surrogate_key(&self) -> Option<&SurrogateKey> {
        let origin = self.incremental.as_ref().and_then(|snapshot| snapshot.queue.first()).map_or(0, |q| q.1);
        self.config.signalling.as_ref().and_then(|signalling| signalling.surrogate_key(origin))
    }

    /// How the chunk queries of `table` ordered by `order` treat NULL: only a key that
    /// `message.key.columns` makes the table's nullable unique column has one (a `surrogate-key`
    /// comes first in `getQueryColumns`).
    fn chunk_nulls(&self, table: TableId, order: ChunkOrder) -> ChunkNulls {
        match self.config.message_key_column(table) {
            Some(_) if order.is_primary_key() => self.config.chunk_nulls(),
            _ => ChunkNulls::None,
        }
    }

    /// A row's chunk position (`keyFromRow` over `getQueryColumns`): the ordering column's value,
    /// the key's by default, the nullable unique column's when `message.key.columns` names it.
    fn chunk_position(&self, table: TableId, order: ChunkOrder, (key, row): (Key, &Row)) -> Key {
        match order.0 {
            Some(column) => column.value(key, row),
            None => self.config.message_key_column(table).map_or(key, |unique| unique.position(key)),
        }
    }

    /// The loop of `readChunk` after the open watermark: the current table's maximum key, then
    /// its chunk; a done or empty table moves to the next; none left: the close watermark.
    fn read_next(&mut self, ctx: &mut Ctx) -> TaskEvent {
        let Some(snapshot) = self.incremental.as_mut() else { return TaskEvent::None };
        let Some(table) = snapshot.current() else {
            self.close_read(ctx);
            return TaskEvent::None;
        };
        // `isTableInvalid`: a table the connector does not capture now has no schema (a signal
        // naming a table before a configuration update adds it to table.include.list).
        if snapshot.maximum_key.is_none() && !self.config.tables.contains(&table) {
            let reason = "Schema not found for the table: the connector does not capture it (table.include.list), \
                          and the schema refresh finds none (retrieveAndRefreshSchema); skipped"
                .into();
            self.table_done(ctx, ScanStatus::UnknownSchema, reason);
            return self.read_next(ctx);
        }
        let limit = self.config.signalling.as_ref().map_or(1024, |signalling| signalling.chunk_size);
        let origin = snapshot.queue.first().map_or(0, |(_, origin)| *origin);
        let filter =
            self.config.signalling.as_ref().and_then(|signalling| signalling.filter(table, origin)).map(Box::new);
        let order_by = match self.chunk_order() {
            Ok(order) => order,
            Err(column) => return self.surrogate_key_missing(ctx, table, column),
        };
        // `isTableInvalid`: no query column (no primary key, no `message.key.columns`, no
        // `surrogate-key`): skipped before any query.
        if self.config.null_key(table) && self.surrogate_key().is_none() {
            let reason = "skipped because the table has no primary keys: isTableInvalid found no column to chunk it \
                          by (no primary key, no message.key.columns, no surrogate-key)"
                .to_string();
            self.table_done(ctx, ScanStatus::NoPrimaryKey, reason);
            return self.read_next(ctx);
        }
        let per_column = self.config.chunk_bounds_per_column();
        let nulls = self.chunk_nulls(table, order_by);
        let Some(snapshot) = self.incremental.as_mut() else { return TaskEvent::None };
        let request = match snapshot.maximum_key {
            None => {
                if let Some(filter) = filter.as_deref() {
                    ctx.observe(Observation::AdditionalConditions { table, filter: *filter });
                }
                snapshot.reading = Some(ChunkStep::MaximumKey);
                SqlRequest::SelectRange {
                    table,
                    after: None,
                    upto: None,
                    limit: 1,
                    descending: true,
                    filter,
                    order_by,
                    per_column,
                    nulls,
                }
            }
            Some(maximum) => {
                snapshot.reading = Some(ChunkStep::Chunk);
                // `buildChunkQuery`: bounds only when `isNonInitialChunk` (a chunk end is known);
                // the first chunk is `ORDER BY … LIMIT n` alone.
                let after = snapshot.chunk_end;
                SqlRequest::SelectRange {
                    table,
                    after,
                    upto: after.map(|_| maximum),
                    limit,
                    descending: false,
                    filter,
                    order_by,
                    per_column,
                    nulls,
                }
            }
        };
        self.sql(ctx, request);
        TaskEvent::None
    }

    /// `isTableInvalid` → `getQueryColumns` throws `IllegalArgumentException` (DBZ-7797): the
    /// `surrogate-key` names no column of the current table. After the open watermark, before any
    /// query. No `SQLException`, so no `warnAndSkip`: the exception leaves `readChunk` with the
    /// table still queued and no close watermark written. Run for a signal, `SignalProcessor
    /// .processSignal` catches it ("Action … failed", a warning) and streaming goes on: the open
    /// watermark opens a window nothing closes, the snapshot stays running in the offsets, and a
    /// later `execute-snapshot` only queues behind it. Run by `init` at the task's start, it fails
    /// the task: every start, as long as the offsets carry the snapshot.
    fn surrogate_key_missing(&mut self, ctx: &mut Ctx, table: TableId, column: String) -> TaskEvent {
        let at_start = self.stalled.as_ref().is_some_and(|stalled| stalled.then_stream);
        ctx.observe(Observation::SurrogateKeyMissing { table, column: column.clone(), at_start });
        if let Some(snapshot) = self.incremental.as_mut() {
            snapshot.reading = None;
        }
        if at_start {
            return self.fail(
                ctx,
                format!(
                    "java.lang.IllegalArgumentException: Surrogate key \"{column}\" doesn't exist in the table of the \
                     incremental snapshot the offsets carry (readChunk in init, at the task's start)"
                ),
            );
        }
        self.end_read_chunk(ctx);
        TaskEvent::None
    }

    /// The close watermark, also when no table is left (`emitWindowClose` after the loop).
    fn close_read(&mut self, ctx: &mut Ctx) {
        let Some(snapshot) = self.incremental.as_mut() else { return };
        let Some(chunk) = snapshot.chunk else { return };
        snapshot.reading = Some(ChunkStep::CloseWatermark);
        if self.is_read_only() {
            // `emitWindowClose`: the high watermark.
            self.sql(ctx, SqlRequest::CurrentSnapshot);
            return;
        }
        self.write_watermark(ctx, chunk, Watermark::Close);
    }

    /// A table is done (`notifyTableScanCompleted`, `nextDataCollection`).
    fn table_done(&mut self, ctx: &mut Ctx, status: ScanStatus, reason: String) {
        let Some(snapshot) = self.incremental.as_mut() else { return };
        if let Some(table) = snapshot.current() {
            ctx.observe(Observation::IncrementalTableScanned { table, status, rows: snapshot.rows_scanned, reason });
        }
        snapshot.next_collection();
        self.sync_incremental_offset();
    }

    /// Whether `readChunk` waits for a reply on the JDBC connection (every reply there is its).
    pub(super) fn awaits_chunk_reply(&self) -> bool {
        self.incremental.as_ref().is_some_and(|snapshot| snapshot.reading.is_some())
    }

    /// A reply on the JDBC connection while `readChunk` runs ([`Self::awaits_chunk_reply`]).
    pub(super) fn on_chunk_reply(&mut self, ctx: &mut Ctx, reply: SqlReply) -> TaskEvent {
        let Some(step) = self.incremental.as_ref().and_then(|snapshot| snapshot.reading) else {
            return TaskEvent::None;
        };
        if let SqlReply::Error(error) = reply {
            // `warnAndSkip`: the table is skipped, the snapshot goes on with the next one. A failed
            // watermark write leaves `readChunk` at once (the outer catch): no close is written,
            // so no window closes and nothing reads the next chunk until the task restarts.
            let table = self.incremental.as_ref().and_then(|snapshot| snapshot.current());
            let what = match step {
                ChunkStep::OpenWatermark | ChunkStep::CloseWatermark => {
                    "SQL error while executing incremental snapshot"
                }
                ChunkStep::MaximumKey => "Failed to read maximum key",
                ChunkStep::Chunk => "Snapshotting of the table failed",
            };
            let reason = format!("{what} ({error}); skipping and continuing streaming");
            if table.is_some() {
                self.table_done(ctx, ScanStatus::SqlException, reason);
            }
            match step {
                ChunkStep::MaximumKey | ChunkStep::Chunk => return self.read_next(ctx),
                ChunkStep::OpenWatermark | ChunkStep::CloseWatermark => {
                    if let Some(snapshot) = self.incremental.as_mut() {
                        snapshot.reading = None;
                    }
                    self.end_read_chunk(ctx);
                }
            }
            return TaskEvent::None;
        }
        if let SqlReply::Snapshot(xids) = &reply {
            self.set_pg_watermark(ctx, step == ChunkStep::CloseWatermark, xids.clone());
        }
        match (step, reply) {
            (ChunkStep::OpenWatermark, _) => return self.read_next(ctx),
            (ChunkStep::MaximumKey, SqlReply::Rows { table, rows, .. }) => match rows.first() {
                None => {
                    self.table_done(ctx, ScanStatus::Empty, "the table is empty".into());
                    return self.read_next(ctx);
                }
                Some((key, row)) => {
                    let order = self.chunk_order().unwrap_or_default();
                    let maximum = self.chunk_position(table, order, (*key, row));
                    if let Some(snapshot) = self.incremental.as_mut() {
                        snapshot.maximum_key = Some(maximum);
                    }
                    self.sync_incremental_offset();
                    return self.read_next(ctx);
                }
            },
            (ChunkStep::Chunk, SqlReply::Rows { table, rows, .. }) => {
                let origin = self.incremental.as_ref().and_then(|snapshot| snapshot.queue.first()).map_or(0, |q| q.1);
                let filter = QueryFilter(
                    self.config.signalling.as_ref().and_then(|signalling| signalling.filter(table, origin)),
                );
                let order = self.chunk_order().unwrap_or_default();
                let nulls = self.chunk_nulls(table, order);
                let positioned: Vec<((Key, Key), Row)> = rows
                    .into_iter()
                    .map(|(key, row)| ((self.chunk_position(table, order, (key, &row)), key), row))
                    .collect();
                let Some(snapshot) = self.incremental.as_mut() else { return TaskEvent::None };
                let after = snapshot.chunk_end;
                let count = positioned.len() as u32;
                let last = positioned.last().map(|((position, _), _)| *position);
                snapshot.rows_scanned += u64::from(count);
                if self.config.null_key(table) {
                    // `window.put(tableSchema.keyFromColumnData(row), row)`: without a key schema
                    // every row's message key is null, and the `LinkedHashMap` keeps one entry
                    // under it, each row replacing the one before: the chunk's last row.
                    snapshot.window.extend(positioned.into_iter().last());
                } else {
                    snapshot.window.extend(positioned);
                }
                if let Some(chunk) = snapshot.chunk {
                    ctx.observe(Observation::ChunkRead {
                        table,
                        chunk,
                        after,
                        last,
                        rows: count,
                        maximum_key: snapshot.maximum_key.unwrap_or(0),
                        filter,
                        order,
                        nulls,
                    });
                }
                match last {
                    Some(last) => {
                        snapshot.chunk_end = Some(last);
                        self.close_read(ctx);
                    }
                    None => {
                        self.table_done(ctx, ScanStatus::Succeeded, String::new());
                        return self.read_next(ctx);
                    }
                }
            }
            (ChunkStep::CloseWatermark, _) => {
                if let Some(snapshot) = self.incremental.as_mut() {
                    snapshot.reading = None;
                }
                self.end_read_chunk(ctx);
            }
            _ => {}
        }
        TaskEvent::None
    }

    /// `readChunk` returned: the streaming thread takes up the stream where it left it (a
    /// read-only snapshot's loop may read on first, [`Self::read_only_chunk_returned`]).
    pub(super) fn end_read_chunk(&mut self, ctx: &mut Ctx) {
        if self.incremental.as_ref().is_some_and(|snapshot| snapshot.reading.is_some()) {
            return;
        }
        if self.is_read_only() && self.read_only_chunk_returned(ctx) {
            return;
        }
        self.end_stall(ctx);
    }

    /// The streaming thread takes up the stream where it left it (after `readChunk`, or a
    /// blocking snapshot).
    pub(super) fn end_stall(&mut self, ctx: &mut Ctx) {
        let Some(stalled) = self.stalled.take() else { return };
        let Stalled { resume, later, then_stream, unread } = *stalled;
        if then_stream {
            self.start_streaming(ctx);
        }
        if let Some((reply, index)) = resume {
            self.resume_stream(ctx, reply, index, unread);
        }
        for reply in later {
            if self.stalled.is_some() {
                if let Some(stalled) = self.stalled.as_mut() {
                    stalled.later.push(reply);
                }
                continue;
            }
            self.on_repl_reply(ctx, reply);
        }
    }

    /// The streaming thread went into `readChunk` at message `index` of `reply`: keep the reply
    /// to take up again.
    pub(super) fn stall_at(&mut self, reply: ReplReply, index: usize) {
        if let Some(stalled) = self.stalled.as_mut() {
            stalled.resume = Some((reply, index));
        }
    }

    /// Replies that arrive while the streaming thread is in `readChunk` wait for it.
    pub(super) fn hold_while_stalled(&mut self, reply: ReplReply) -> Option<ReplReply> {
        match self.stalled.as_mut() {
            Some(stalled)
                if matches!(reply, ReplReply::XLogData(_) | ReplReply::Message(_) | ReplReply::Keepalive { .. }) =>
            {
                stalled.later.push(reply);
                None
            }
            _ => Some(reply),
        }
    }
}
