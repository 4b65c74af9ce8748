//! The read-only incremental snapshot (`read.only=true`, reference debezium-postgres.md §6.5), as
//! Debezium's `PostgresReadOnlyIncrementalSnapshotChangeEventSource` and
//! `PostgresReadOnlyIncrementalSnapshotContext` run it. It writes nothing: the chunk loop of §6.2
//! (`readChunk`, the buffer, `sendWindowEvents`, restart from the stored key) is the one in
//! `incremental`, with these differences:
//!
//! - The watermarks are `SELECT * FROM pg_current_snapshot()` (`PgSnapshot`, `xmin:xmax:xip`):
//!   the low one before the chunk query (`emitWindowOpen`), the high one after it
//!   (`emitWindowClose`). No watermark row, so nothing on the signal table's topic.
//! - The window moves by transaction ids, not by rows read on the stream
//!   (`updateWindowState`, in `processMessage`, before a change's record is emitted): it opens at
//!   the first change whose xid is at least the low watermark's xmin, and closes at one whose xid
//!   is above both watermarks' xmax. A change that finds the window not open (its xid below the
//!   low xmin) emits the buffer and reads the next chunk at once; while it is open a change of the
//!   current table removes its key from the buffer, as in §6.2.
//! - On every COMMIT (`processTransactionCommittedEvent`) and on every iteration of the streaming
//!   loop that found no message (`processHeartbeat`, through
//!   `dispatchHeartbeatEventAlsoToIncrementalSnapshot`, with the offset's `txId`, the last
//!   event's): if the xid is the high watermark's xmax the window closes (emit, next chunk);
//!   otherwise, while the xid is at most the high watermark's xmin, it closes, emits and reads the
//!   next chunk, until the watermarks change (`readUntilNewTransactionChange`). A database with
//!   no traffic finishes the snapshot in the idle iterations; a transaction left open (an idle
//!   session in a transaction) holds the high watermark's xmin down and stalls the window until
//!   it ends.
//! - Ordering is by xid, not by commit order: an approximation (reference §6.5 [I]).
//!
//! Inferred from the code and modelled as it reads (reference §6.5 says none of it):
//! - `watermarksChanged` calls `previousLowWatermark.equals(…)` (then `previousHighWatermark`)
//!   without a null check, and `isTransactionVisible` reads the high watermark when only a low
//!   one is set. Entering the loop with no low watermark (a paused snapshot: `readChunk` returns
//!   before `emitWindowOpen`; or a watermark query that failed) or with no high one (a
//!   `surrogate-key` the table lacks, DBZ-7797, leaves `readChunk` after the low one) throws a
//!   `NullPointerException` in the streaming thread at the next COMMIT or idle iteration: the
//!   task fails. A restart resumes the snapshot (pause is not stored).
//!
//! Simplifications, said where they act:
//! - `init`'s `forceNewTransactionId` (`SELECT * FROM pg_current_xact_id()` on a primary) is not
//!   modelled: the model's watermarks have the xmax the server had without it.
//! - A `readChunk` that a Kafka signal runs on the signal processor's thread races the streaming
//!   thread's window code in Debezium (both touch the buffer unguarded); the model lets the
//!   stream's changes and commits wait for it, as source signals wait for the semaphore.
//! - Debezium's loop has idle iterations between any two messages that do not arrive together;
//!   the model has one every `poll.interval.ms` while the snapshot runs (the loop sleeps that long
//!   after five empty reads, `pauseNoMessage`), none between replies.

use super::*;
use crate::components::connect::debezium::streaming::{PgOutput, PgOutputs};
use crate::core::protocol::SnapshotXids;
use crate::core::signal::{ReadOnlyEvent, ReadOnlyRule};

/// `PostgresReadOnlyIncrementalSnapshotContext`'s watermarks, in memory only.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) struct PgWatermarks {
    low: Option<SnapshotXids>,
    high: Option<SnapshotXids>,
    previous_low: Option<SnapshotXids>,
    previous_high: Option<SnapshotXids>,
    /// `readUntilNewTransactionChange`'s loop, while the `readChunk` it called runs: the xid it
    /// compares and what brought it.
    looping: Option<(Option<Xid>, ReadOnlyEvent)>,
}

impl PgWatermarks {
    pub(super) fn is_empty(&self) -> bool {
        *self == PgWatermarks::default()
    }

    /// `closeWindow`'s watermark part: the current ones become the previous ones.
    fn close(&mut self) {
        self.previous_high = self.high.take();
        self.previous_low = self.low.take();
    }

    /// `watermarksChanged`; Err: the `NullPointerException` of a previous watermark not set.
    fn changed(&self) -> Result<bool, &'static str> {
        let Some(previous_low) = &self.previous_low else {
            return Err("Cannot invoke \"io.debezium.connector.postgresql.PgSnapshot.equals(Object)\" because \
                        \"this.previousLowWatermark\" is null");
        };
        if Some(previous_low) != self.low.as_ref() {
            return Ok(true);
        }
        let Some(previous_high) = &self.previous_high else {
            return Err("Cannot invoke \"io.debezium.connector.postgresql.PgSnapshot.equals(Object)\" because \
                        \"this.previousHighWatermark\" is null");
        };
        Ok(Some(previous_high) != self.high.as_ref())
    }

    /// `isTransactionVisible`; Err: the `NullPointerException` of a missing high watermark or
    /// xid.
    fn visible(&self, xid: Option<Xid>) -> Result<bool, &'static str> {
        if self.low.is_none() {
            return Ok(true);
        }
        let Some(high) = &self.high else {
            return Err(
                "Cannot invoke \"io.debezium.connector.postgresql.PgSnapshot.getXMin()\" because \"this.highWatermark\" \
                 is null",
            );
        };
        let Some(xid) = xid else {
            return Err("Cannot invoke \"java.lang.Long.compareTo(java.lang.Long)\" because \"eventTxId\" is null");
        };
        Ok(xid <= high.xmin)
    }
}

impl DebeziumTask {
    /// `read.only=true`.
    pub(super) fn is_read_only(&self) -> bool {
        self.config.signalling.as_ref().is_some_and(|signalling| signalling.read_only)
    }

    /// Whether the streaming loop's idle iterations have work: a read-only snapshot runs.
    pub fn wants_idle_iterations(&self) -> bool {
        self.is_read_only()
            && self.is_streaming()
            && self.incremental.as_ref().is_some_and(|snapshot| snapshot.running())
    }

    /// A `pg_current_snapshot()` watermark arrived (`setLowWatermark` / `setHighWatermark`).
    pub(super) fn set_pg_watermark(&mut self, ctx: &mut Ctx, high: bool, xids: SnapshotXids) {
        let Some(snapshot) = self.incremental.as_mut() else { return };
        let Some(chunk) = snapshot.chunk else { return };
        ctx.observe(Observation::SnapshotWatermark { chunk, high, xids: xids.clone() });
        if high {
            snapshot.marks.high = Some(xids);
        } else {
            snapshot.marks.low = Some(xids);
        }
    }

    /// Whether `message` is one the read-only window code reads (a change of a captured table or
    /// a COMMIT) while a snapshot runs.
    pub(super) fn read_only_window_event(&self, messages: &PgOutputs, message: &PgOutput) -> bool {
        if !self.is_read_only() || self.incremental.is_none() {
            return false;
        }
        match message {
            PgOutput::Commit { .. } => true,
            PgOutput::Change { index, .. } => messages
                .txn()
                .and_then(|txn| txn.changes.get(*index))
                .is_some_and(|change| self.config.tables.contains(&change.table)),
            _ => false,
        }
    }

    /// `processMessage` of the read-only source for a change of transaction `xid` of a captured
    /// table, before its record: `updateWindowState`, then either the buffer emitted and the next
    /// chunk read (the window not open), or the window's deduplication. Returns true when the
    /// streaming thread went into `readChunk` (the record waits for it).
    pub(super) fn read_only_message(&mut self, ctx: &mut Ctx, xid: Xid, table: TableId, key: Key) -> bool {
        let Some(snapshot) = self.incremental.as_mut() else { return false };
        let chunk = snapshot.chunk;
        let window = |rule| Observation::ReadOnlyWindow { chunk, xid: Some(xid), event: ReadOnlyEvent::Change, rule };
        if !snapshot.window_opened
            && let Some(low) = &snapshot.marks.low
            && xid >= low.xmin
        {
            snapshot.window_opened = true;
            ctx.observe(window(ReadOnlyRule::Opened));
        }
        if snapshot.window_opened
            && let (Some(high), Some(low)) = (&snapshot.marks.high, &snapshot.marks.low)
            && xid > high.xmax.max(low.xmax)
        {
            snapshot.window_opened = false;
            snapshot.marks.close();
            ctx.observe(window(ReadOnlyRule::PastHighWatermark));
            return self.send_window_events(ctx, true);
        }
        if snapshot.running() && !snapshot.window_opened {
            // No watermark (a paused snapshot): an empty `sendWindowEvents`, no window.
            let window_read = snapshot.marks.low.is_some();
            if window_read {
                ctx.observe(window(ReadOnlyRule::NotOpen));
            }
            return self.send_window_events(ctx, window_read);
        }
        self.deduplicate(table, key);
        false
    }

    /// `readUntilNewTransactionChange` (a COMMIT, or an idle iteration with the offset's
    /// `txId`). Returns true when the streaming thread went into `readChunk`.
    pub(super) fn read_only_transaction_change(
        &mut self,
        ctx: &mut Ctx,
        xid: Option<Xid>,
        event: ReadOnlyEvent,
    ) -> bool {
        let Some(snapshot) = self.incremental.as_mut() else { return false };
        if !snapshot.running() {
            return false;
        }
        if let (Some(high), Some(xid)) = (&snapshot.marks.high, xid)
            && high.xmax == xid
        {
            snapshot.window_opened = false;
            snapshot.marks.close();
            ctx.observe(Observation::ReadOnlyWindow {
                chunk: snapshot.chunk,
                xid: Some(xid),
                event,
                rule: ReadOnlyRule::HighXmaxCommitted,
            });
            return self.send_window_events(ctx, true);
        }
        self.read_only_loop(ctx, xid, event)
    }

    /// One turn of `readUntilNewTransactionChange`'s `while`: with the snapshot running and the
    /// xid visible, close, emit and read the next chunk (the loop goes on when it returns,
    /// [`Self::read_only_chunk_returned`]).
    fn read_only_loop(&mut self, ctx: &mut Ctx, xid: Option<Xid>, event: ReadOnlyEvent) -> bool {
        let Some(snapshot) = self.incremental.as_mut() else { return false };
        if !snapshot.running() {
            return false;
        }
        match snapshot.marks.visible(xid) {
            Ok(false) => false,
            Ok(true) => {
                let window_read = snapshot.marks.low.is_some();
                snapshot.window_opened = false;
                snapshot.marks.close();
                snapshot.marks.looping = Some((xid, event));
                if window_read {
                    let chunk = snapshot.chunk;
                    ctx.observe(Observation::ReadOnlyWindow { chunk, xid, event, rule: ReadOnlyRule::Visible });
                }
                self.send_window_events(ctx, window_read)
            }
            Err(field) => {
                self.null_pointer(ctx, field, "isTransactionVisible");
                false
            }
        }
    }

    /// `readChunk` returned in the read-only source: `readUntilNewTransactionChange`'s loop goes
    /// on unless the watermarks changed; a snapshot with no table left is done
    /// (`postIncrementalSnapshotCompleted`: its last window had nothing). Returns true when
    /// another `readChunk` began.
    pub(super) fn read_only_chunk_returned(&mut self, ctx: &mut Ctx) -> bool {
        let Some(snapshot) = self.incremental.as_mut() else { return false };
        if let Some((xid, event)) = snapshot.marks.looping.take() {
            match snapshot.marks.changed() {
                Err(field) => {
                    self.null_pointer(ctx, field, "watermarksChanged");
                    return true;
                }
                Ok(true) => {}
                Ok(false) => {
                    if self.read_only_loop(ctx, xid, event) {
                        return true;
                    }
                }
            }
        }
        if self.incremental.as_ref().is_some_and(|snapshot| !snapshot.running() && snapshot.reading.is_none()) {
            self.incremental = None;
            self.sync_incremental_offset();
            ctx.observe(Observation::IncrementalSnapshotCompleted);
        }
        false
    }

    /// An iteration of the streaming loop that found no message (`processHeartbeat`).
    pub fn on_stream_idle(&mut self, ctx: &mut Ctx) {
        if !self.wants_idle_iterations() || self.stalled.is_some() || self.awaits_chunk_reply() {
            return;
        }
        let xid = self.offset.tx_id;
        self.read_only_transaction_change(ctx, xid, ReadOnlyEvent::Idle);
    }

    /// A `NullPointerException` in the streaming thread: the task fails.
    fn null_pointer(&mut self, ctx: &mut Ctx, message: &str, method: &str) {
        let _ = self.fail(
            ctx,
            format!(
                "java.lang.NullPointerException: {message} (PostgresReadOnlyIncrementalSnapshotContext.{method}, in the \
                 streaming thread)"
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::PgWatermarks;
    use crate::core::protocol::SnapshotXids;

    fn xids(xmin: u32, xmax: u32, xip: &[u32]) -> Option<SnapshotXids> {
        Some(SnapshotXids { xmin, xmax, xip: xip.to_vec() })
    }

    /// `isTransactionVisible`: no low watermark, every xid; else at or below the high xmin; a low
    /// without a high, or no xid, is the code's `NullPointerException`.
    #[test]
    fn visibility_follows_the_high_watermarks_xmin() {
        let mut marks = PgWatermarks::default();
        assert_eq!(marks.visible(Some(900)), Ok(true), "no low watermark: visible");
        marks.low = xids(749, 751, &[749]);
        assert!(marks.visible(Some(750)).is_err_and(|npe| npe.contains("this.highWatermark")));
        marks.high = xids(749, 751, &[749]);
        assert_eq!((marks.visible(Some(749)), marks.visible(Some(750))), (Ok(true), Ok(false)));
        assert!(marks.visible(None).is_err_and(|npe| npe.contains("eventTxId")));
    }

    /// `watermarksChanged` after `closeWindow`: the previous ones against the new; a previous one
    /// not set is the code's `NullPointerException` (the low checked first, the high only when the
    /// lows are equal).
    #[test]
    fn watermarks_changed_compares_with_the_previous_ones() {
        let mut marks = PgWatermarks { low: xids(748, 748, &[]), high: xids(748, 748, &[]), ..Default::default() };
        marks.close();
        assert_eq!((marks.low.clone(), marks.high.clone()), (None, None));
        marks.low = xids(748, 748, &[]);
        marks.high = xids(748, 748, &[]);
        assert_eq!(marks.changed(), Ok(false), "the same snapshot twice: the loop reads on");
        marks.high = xids(748, 750, &[748]);
        assert_eq!(marks.changed(), Ok(true));
        marks.close();
        marks.close();
        assert!(marks.changed().is_err_and(|npe| npe.contains("this.previousLowWatermark")));
        let lows_equal = PgWatermarks { low: xids(1, 1, &[]), previous_low: xids(1, 1, &[]), ..Default::default() };
        assert!(lows_equal.changed().is_err_and(|npe| npe.contains("this.previousHighWatermark")));
    }
}
