//! Checkpoints, WAL retention and the background writer.

use super::*;

impl Postgres {
    pub(super) fn write_running_xacts(&mut self, ctx: &mut Ctx) {
        let xids = self.running_xids();
        let (start, end) = self.durable.wal.get_mut().insert_record(record_size::running_xacts(xids.len()));
        self.durable.wal.get_mut().push(WalEntry::RunningXacts { start, end, xids, next_xid: self.durable.next_xid });
        self.volatile.entries_at_last_running_xacts = self.durable.wal.entries.len();
        self.after_wal_append(ctx);
    }

    /// Whether WAL other than running-xacts records was written since entry `since`.
    pub(super) fn important_wal_since(&self, since: usize) -> bool {
        self.durable.wal.entries[since.min(self.durable.wal.entries.len())..].iter().any(WalEntry::is_important)
    }

    /// `CreateCheckPoint`: a timed one is skipped when no important WAL was written since the
    /// last one, a forced one (`CHECKPOINT`, promotion, end of crash recovery) always runs; then
    /// a running-xacts record (not at the end of crash recovery: `LogStandbySnapshot` runs for
    /// online checkpoints only), the checkpoint record, the save of every dirty slot, and WAL
    /// retention: the oldest segment to keep (`KeepLogSeg`), the invalidation of every slot
    /// behind it (the walsender of an active one terminated first) and the removal of older
    /// segments (`CreateCheckPoint`, `src/backend/access/transam/xlog.c`).
    pub(super) fn checkpoint(&mut self, ctx: &mut Ctx, kind: CheckpointKind) {
        let since = self.durable.wal.first_entry_at_or_after(self.durable.last_checkpoint_lsn);
        if kind == CheckpointKind::Requested && !self.important_wal_since(since) {
            return;
        }
        let redo = self.durable.wal.insert_lsn();
        if !matches!(kind, CheckpointKind::EndOfRecovery | CheckpointKind::Shutdown) {
            self.write_running_xacts(ctx);
        }
        let (start, end) = self.durable.wal.get_mut().insert_record(record_size::CHECKPOINT_ONLINE);
        self.durable.wal.get_mut().push(WalEntry::Checkpoint { start, end });
        self.durable.last_checkpoint_lsn = start;
        self.durable.last_checkpoint_redo = redo;
        if self.durable.slots.values().any(|slot| slot.dirty) {
            for slot in self.durable.slots.get_mut().values_mut() {
                if slot.dirty {
                    slot.save();
                }
            }
        }
        ctx.observe(Observation::Checkpoint { server: self.node, lsn: start });
        let retention = self.retention();
        let redo_segment = retention.segment_of(redo);
        let mut keep = retention.keep_log_seg(end, self.slots_minimum(), redo_segment);
        if self.invalidate_obsolete_slots(ctx, keep) {
            keep = retention.keep_log_seg(end, self.slots_minimum(), redo_segment);
        }
        if keep > 0 {
            self.volatile.last_removed_segment = self.volatile.last_removed_segment.max(keep - 1);
        }
        self.after_wal_append(ctx);
    }

    /// `InvalidateObsoleteReplicationSlots(oldest_segment)` (`slot.c`): every valid slot whose
    /// `restart_lsn` is before the segment is invalidated; an active one's walsender is
    /// terminated first (`FATAL: terminating connection due to administrator command`).
    pub(super) fn invalidate_obsolete_slots(&mut self, ctx: &mut Ctx, oldest_segment: u64) -> bool {
        let oldest = self.retention().segment_start(oldest_segment);
        let obsolete: Vec<String> = self
            .durable
            .slots
            .values()
            .filter(|slot| !slot.is_invalidated() && slot.current.restart_lsn < oldest)
            .map(|slot| slot.name.clone())
            .collect();
        for name in &obsolete {
            let active = self.durable.slots.get(name).and_then(|slot| slot.active);
            if let Some((client, session)) = active {
                self.close_session(ctx, client, session);
                ctx.send(
                    client,
                    Msg::ReplReply {
                        session,
                        reply: ReplReply::Error("FATAL: terminating connection due to administrator command".into()),
                    },
                );
            }
            let slot = self.durable.slots.get_mut().get_mut(name).expect("listed");
            let restart_lsn = slot.current.restart_lsn;
            slot.invalidate();
            ctx.observe(Observation::SlotInvalidated {
                server: self.node,
                slot: name.clone(),
                restart_lsn,
                oldest_kept: oldest,
                walsender_terminated: active.is_some(),
            });
        }
        !obsolete.is_empty()
    }

    /// `XLogWrite` finishing segments: one far enough past the last checkpoint's redo requests
    /// a checkpoint (`CHECKPOINT_CAUSE_XLOG`, `XLogWrite` in `xlog.c`). The model runs it at once.
    pub(super) fn after_segments_written(&mut self, ctx: &mut Ctx, write_before: Lsn) {
        let retention = self.retention();
        let finished = retention.segment_of(self.durable.wal.write_lsn());
        if finished > retention.segment_of(write_before)
            && retention.checkpoint_needed(self.durable.last_checkpoint_redo, finished - 1)
        {
            self.checkpoint(ctx, CheckpointKind::Requested);
        }
    }

    /// `pg_ctl stop -m fast`: every session ends (a walsender's client sees the server close
    /// the connection; an open transaction block aborts, `AbortOutOfAnyTransaction`), the checkpointer writes the shutdown checkpoint (`CreateCheckPoint`
    /// with `CHECKPOINT_IS_SHUTDOWN`: never skipped, no running-xacts record, dirty slots saved,
    /// WAL retention as at every checkpoint), and the control file says `DB_SHUTDOWNED`, so the
    /// next start is no crash recovery. On PostgreSQL ≤ 16 a position moved by walsender
    /// feedback alone is not dirty and is lost even here (`CheckPointReplicationSlots`, `slot.c`). The model ends the
    /// walsenders before the checkpoint; PostgreSQL lets them send what remains after it
    /// (`WalSndDone`), which moves no slot.
    pub(super) fn shutdown(&mut self, ctx: &mut Ctx) {
        if !self.volatile.up {
            return;
        }
        // Every backend is told to exit at once: a statement waiting for a row lock ends with its
        // backend instead of running when the holder's block aborts.
        self.volatile.lock_waits.clear();
        let sessions: Vec<(Node, SessionId)> = self.volatile.sessions.keys().copied().collect();
        for (client, session) in sessions {
            let walsender = matches!(
                self.volatile.sessions.get(&(client, session)).map(|shared| &**shared),
                Some(Session::Replication { walsender: Some(_), .. })
            );
            self.close_session(ctx, client, session);
            if walsender {
                ctx.send(
                    client,
                    Msg::ReplReply {
                        session,
                        reply: ReplReply::Error("FATAL: terminating connection due to administrator command".into()),
                    },
                );
            }
        }
        if self.durable.role == Role::Primary {
            self.checkpoint(ctx, CheckpointKind::Shutdown);
        }
        self.durable.in_production = false;
        self.volatile.up = false;
    }
}
