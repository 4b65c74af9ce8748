//! Ad-hoc blocking snapshots (reference debezium-postgres.md §6.6), as Debezium's code runs them:
//!
//! - `execute-snapshot` with `type: blocking` (`ExecuteSnapshot.arrived` →
//!   `ChangeEventSourceCoordinator.doBlockingSnapshot`): the signal only sets `paused` from the
//!   blocking-snapshot executor; the streaming loop (`PostgresStreamingChangeEventSource
//!   .processMessages`) notices it before it reads its next message (`context.isPaused()` →
//!   `streamingPaused`, `waitSnapshotCompletion`). The model pauses at the earliest such point:
//!   right after the signal row's own record. Messages that arrive meanwhile are read after the
//!   snapshot, in order.
//! - The snapshot (`RelationalSnapshotChangeEventSource.doExecute` with an on-demand
//!   `SnapshottingTask`, `getBlockingSnapshottingTask`): step 4 ("determining snapshot offset") is
//!   skipped, so every record carries the live streaming offset at the pause, marked
//!   `snapshot=BLOCKING` (`CommonOffsetContext.preSnapshotStart(onDemand)`); the tables the signal
//!   names are read one by one by `SELECT`s at the current time (no isolation is set unless the
//!   slot was created by this task start, `PostgresSnapshotChangeEventSource.connectionCreated`:
//!   READ COMMITTED, each `SELECT` its own snapshot); the last record is held back and
//!   re-emitted with the completion (`BufferingSnapshotChangeRecordReceiver`); then
//!   `postSnapshotCompletion` clears the snapshot keys and streaming resumes where it paused. So
//!   changes committed between the signal and a table's read come again on the stream after the
//!   snapshot: duplicates around the signal, older than the rows read.
//! - A failure inside the snapshot is caught (`doBlockingSnapshot`: "Error while executing
//!   requested blocking snapshot."): the held-back last row is never emitted (DBZ-8335, still
//!   asserted by `aFailedBlockingSnapshotShouldNotCauseInitialSnapshotOnRestart`), the offset
//!   keeps `snapshot=BLOCKING`, and streaming resumes. A table's `additional-conditions` is its
//!   whole SELECT statement (`con-connector-blocking-snapshot.adoc`; the model reads `SELECT *
//!   FROM <table> [WHERE …] [ORDER BY id]`): its WHERE goes with `SqlRequest::ScanTable`, and one
//!   naming a column the table lacks is PostgreSQL's error, the snapshot's failure (as the test's
//!   `"SELECT failing query"` is).
//! - A task restart never resumes a blocking snapshot (no code path reads a stored `BLOCKING`):
//!   streaming goes on from the stored offset, and the rows the snapshot had not emitted are
//!   never read. Before 3.0.2 (DBZ-7903; `[versions] debezium` before 3.0, a minor release being
//!   modelled as its last patch) the offset stored `snapshot` as a boolean, which a start loads
//!   as an INITIAL snapshot in progress: the restart re-runs the initial snapshot from scratch.
//!
//! Not modelled: statements other than that form (the scenario reader refuses them), the
//! configured isolation when the slot was created by this task start (a serializable read-only
//! transaction: one snapshot for every table instead of one per table; per key the same), and the race by which the
//! streaming thread may read a few more messages before it notices the pause.

use super::*;

/// The blocking snapshot while it runs (the streaming thread waits for it).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) struct BlockingSnapshot {
    /// The tables to read, in the signal's order, each with the key of the signal that named it
    /// (its `additional-conditions`), and the one being read.
    tables: Vec<(TableId, u8)>,
    index: usize,
    /// The held-back last record (`BufferingSnapshotChangeRecordReceiver`).
    buffered: Option<SourceRecord>,
    rows: u32,
}

impl DebeziumTask {
    /// Whether a blocking snapshot runs (streaming is paused for it).
    pub fn in_blocking_snapshot(&self) -> bool {
        self.blocking.is_some()
    }

    /// Whether a start reads `offset` as an INITIAL snapshot in progress (`isInitialSnapshotRunning`;
    /// before 3.0.2 any snapshot in progress, a blocking one's included: DBZ-7903).
    pub(super) fn stored_initial_snapshot_running(&self, offset: &SourceOffset) -> bool {
        if self.config.version < (3, 0) {
            offset.snapshot.is_some_and(|kind| kind != SnapshotKind::Incremental) && !offset.snapshot_is_completed()
        } else {
            offset.initial_snapshot_running()
        }
    }

    /// Why a start with `offset` stored takes no new snapshot although its offset names one:
    /// a blocking snapshot's, never resumed.
    pub(super) fn blocking_not_resumed(&self, offset: &SourceOffset) -> bool {
        offset.snapshot == Some(SnapshotKind::Blocking)
            && !offset.snapshot_is_completed()
            && !self.stored_initial_snapshot_running(offset)
    }

    /// `execute-snapshot` with `type: blocking`: the pause is requested; the streaming loop
    /// honours it before its next message ([`Self::blocking_pause_requested`]).
    pub(super) fn request_blocking_snapshot(&mut self, tables: Vec<(TableId, u8)>) {
        self.blocking_request = Some(tables);
    }

    /// The streaming loop's check before each message: a requested pause begins the snapshot.
    /// Returns true when the stream now waits.
    pub(super) fn blocking_pause_requested(&mut self, ctx: &mut Ctx) -> bool {
        let Some(tables) = self.blocking_request.take() else { return false };
        // `preSnapshotStart(onDemand)`: the live offset context becomes the snapshot's.
        self.offset.snapshot = Some(SnapshotKind::Blocking);
        self.offset.last_snapshot_record = false;
        self.offset.snapshot_completed = false;
        ctx.observe(Observation::BlockingSnapshotStarted {
            tables: tables.iter().map(|(table, _)| *table).collect(),
            lsn: self.offset.lsn.unwrap_or(Lsn::INVALID),
        });
        self.stalled = Some(Box::new(incremental::Stalled::paused()));
        self.blocking = Some(Box::new(BlockingSnapshot { tables, index: 0, buffered: None, rows: 0 }));
        self.scan_blocking_table(ctx);
        self.stalled.is_some()
    }

    fn scan_blocking_table(&mut self, ctx: &mut Ctx) {
        let Some(blocking) = self.blocking.as_ref() else { return };
        match blocking.tables.get(blocking.index) {
            Some((table, origin)) => {
                let (table, fetch_size) = (*table, self.config.snapshot_fetch_size);
                // `additional-conditions`: the table's SELECT statement, its WHERE as the filter.
                let filter = self
                    .config
                    .signalling
                    .as_ref()
                    .and_then(|signalling| signalling.filter(table, *origin))
                    .map(Box::new);
                self.sql(ctx, SqlRequest::ScanTable { table, exported_snapshot: None, fetch_size, filter });
            }
            None => self.complete_blocking(ctx),
        }
    }

    /// A reply on the JDBC connection while the blocking snapshot runs.
    pub(super) fn on_blocking_reply(&mut self, ctx: &mut Ctx, reply: SqlReply) -> TaskEvent {
        match reply {
            SqlReply::Rows { table, rows, done } => {
                for (key, row) in rows {
                    self.emit_blocking_row(ctx, table, key, row);
                }
                if done {
                    if let Some(blocking) = self.blocking.as_mut() {
                        blocking.index += 1;
                    }
                    self.scan_blocking_table(ctx);
                }
            }
            SqlReply::Error(error) => self.fail_blocking(ctx, format!("org.postgresql.util.PSQLException: {error}")),
            _ => {}
        }
        TaskEvent::None
    }

    fn emit_blocking_row(&mut self, ctx: &mut Ctx, table: TableId, key: Key, row: Row) {
        let offset = self.offset;
        let Some(blocking) = self.blocking.as_mut() else { return };
        blocking.rows += 1;
        let lsn = offset.lsn.unwrap_or(Lsn::INVALID);
        let record = SourceRecord {
            topic: Topic::Change(table),
            key,
            value: Some(ChangeEvent::snapshot_read(
                Origin::Postgresql,
                table,
                row,
                lsn,
                SnapshotMarker::Blocking,
                ctx.now.ms(),
            )),
            offset,
            placement: None,
        };
        if let Some(previous) = blocking.buffered.replace(record) {
            self.queue.get_mut().push(previous);
        }
    }

    /// `preSnapshotCompletion`, `completeSnapshot` (the held-back record with the completion),
    /// `postSnapshotCompletion` (the snapshot keys cleared), then streaming resumes.
    fn complete_blocking(&mut self, ctx: &mut Ctx) {
        let Some(blocking) = self.blocking.take() else { return };
        self.offset.last_snapshot_record = true;
        self.offset.snapshot_completed = true;
        if let Some(mut last) = blocking.buffered {
            last.offset = self.offset;
            self.queue.get_mut().push(last);
        }
        self.offset.snapshot = None;
        self.offset.last_snapshot_record = false;
        self.offset.snapshot_completed = false;
        ctx.observe(Observation::BlockingSnapshotCompleted { rows: blocking.rows });
        self.end_stall(ctx);
    }

    /// The snapshot failed: caught, the held-back row dropped (DBZ-8335), the offset left with
    /// `snapshot=BLOCKING`; streaming resumes.
    fn fail_blocking(&mut self, ctx: &mut Ctx, reason: String) {
        let Some(blocking) = self.blocking.take() else { return };
        let held = blocking.buffered.map(|record| (record.value.map_or(TableId(0), |v| v.source.table), record.key));
        ctx.observe(Observation::BlockingSnapshotFailed { reason, rows: blocking.rows, held });
        self.end_stall(ctx);
    }
}
