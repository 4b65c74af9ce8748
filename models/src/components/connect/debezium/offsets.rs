//! Source offsets: what Kafka acknowledged, and the confirmation of the slot from the offsets
//! Connect stored (`PostgresConnectorTask.performCommit`, `PostgresStreamingChangeEventSource.commitOffset`).

use super::*;

impl DebeziumTask {
    /// Whether this release confirms the slot from offsets re-read from the offset store
    /// (2.7 and later, DBZ-7816); before, from the offsets acknowledged in memory.
    pub fn confirms_from_offset_store(&self) -> bool {
        self.config.version >= (2, 7)
    }

    /// `commitRecord(record, metadata)`: Kafka acknowledged a record. A no-op since 2.7; from 1.1
    /// to 2.6, it remembered the record's offset for the next `commit()`; before 1.1 it did not
    /// exist (`poll()` remembered the last record it returned, DBZ-1766).
    pub fn commit_record(&mut self, offset: SourceOffset) {
        if !self.confirms_from_offset_store() && !self.confirms_last_polled() {
            self.last_acked = Some(offset);
        }
    }

    /// Whether `commit()` confirms the last record `poll()` returned, produced or not (before 1.1:
    /// `PostgresConnectorTask.poll()` set `lastOffset`; DBZ-1766, fixed in 1.1.0.Beta2 by tracking
    /// `commitRecord` instead).
    pub fn confirms_last_polled(&self) -> bool {
        self.config.version < (1, 1)
    }

    /// The offset `commit()` confirms before 2.7.
    pub fn last_acked(&self) -> Option<SourceOffset> {
        self.last_acked
    }

    /// `performCommit()`: confirm `lsn_commit ?? lsn_proc` of the offset Connect hands over (re-read
    /// from the offset store since 2.7; from 1.1 to 2.6, the last one Kafka acknowledged, in
    /// memory; before 1.1, the last one `poll()` returned) to the slot, only while streaming.
    pub fn commit_offset(&mut self, ctx: &mut Ctx, stored: Option<SourceOffset>) {
        if let Some(flush) = self.commit_moves(stored) {
            self.last_flushed = flush;
            if self.confirms_last_polled() {
                ctx.observe(Observation::LsnFlushedLastPolled { lsn: flush });
            } else {
                let from_offset_store = self.confirms_from_offset_store();
                ctx.observe(Observation::LsnFlushed { lsn: flush, from_offset_store });
            }
            self.repl(ctx, ReplRequest::StatusUpdate { flush });
        }
    }

    /// Where `commit_offset` would confirm the slot to, if it would send a confirmation at all.
    pub fn commit_moves(&self, stored: Option<SourceOffset>) -> Option<Lsn> {
        // `lsnFlushingAllowed` (2.0, DBZ-5031): not during the restart's search, not before a
        // message arrived on the current stream; before 2.0 any stream confirms.
        let allowed = self.lsn_flushing_allowed || !self.rules().flushing_after_first_message;
        if !self.is_streaming() || !allowed || self.config.lsn_flush_mode == LsnFlushMode::Manual {
            return None;
        }
        let lsn = stored.and_then(|offset| offset.lsn_to_confirm())?;
        Some(lsn).filter(|lsn| *lsn > self.last_flushed)
    }
}
