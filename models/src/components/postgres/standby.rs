//! The standby: WAL shipping, slot synchronization, promotion.

use super::*;

impl Postgres {
    pub(super) fn ship_wal(&mut self, ctx: &mut Ctx) {
        // Physical replication sends what is flushed.
        let flushed = self.durable.wal.flush_lsn();
        let entries = &self.durable.wal.entries;
        let end = entries.partition_point(|entry| entry.end() <= flushed).max(self.volatile.shipped_entries);
        if self.volatile.shipped_entries < end {
            let batch = entries[self.volatile.shipped_entries..end].to_vec();
            self.volatile.shipped_entries = end;
            ctx.send(Node::Pg2, Msg::WalShip { entries: batch });
            // The standby's slotsync worker reads the failover slots' positions; the model lets
            // it read them with every shipment (the real worker polls every 200 ms to 30 s).
            let slots: Vec<FailoverSlot> = self
                .durable
                .slots
                .values()
                .filter(|slot| slot.failover)
                .map(|slot| FailoverSlot {
                    name: slot.name.clone(),
                    plugin: slot.plugin.clone(),
                    restart_lsn: slot.current.restart_lsn,
                    confirmed_flush: slot.current.confirmed_flush,
                    invalidated: slot.is_invalidated(),
                })
                .collect();
            if !slots.is_empty() {
                ctx.send(Node::Pg2, Msg::SlotSync { slots });
            }
        }
    }

    /// The slotsync worker (PostgreSQL 17+, `synchronize_slots`, `slotsync.c`): a remote failover slot whose
    /// `confirmed_flush` this standby has flushed is created here (`synced`) or moved forward to
    /// the remote positions; one ahead of the standby's WAL is skipped; an invalidation is copied.
    pub(super) fn sync_slots(&mut self, ctx: &mut Ctx, remote: Vec<FailoverSlot>) {
        if self.durable.role != Role::Standby || !self.config.sync_replication_slots {
            return;
        }
        let flushed = self.durable.wal.write_lsn();
        for remote in remote {
            let local = self.durable.slots.get(&remote.name);
            if remote.invalidated {
                if local.is_some_and(|slot| !slot.is_invalidated()) {
                    self.durable.slots.get_mut().get_mut(&remote.name).expect("present").invalidate();
                }
                continue;
            }
            if remote.confirmed_flush > flushed {
                continue; // "skipping slot synchronization": the standby is behind
            }
            let moves = local.is_none_or(|slot| {
                remote.confirmed_flush > slot.current.confirmed_flush || remote.restart_lsn > slot.current.restart_lsn
            });
            if !moves {
                continue;
            }
            let slots = self.durable.slots.get_mut();
            let slot = slots.entry(remote.name.clone()).or_insert_with(|| {
                let mut slot =
                    Slot::new(remote.name.clone(), remote.plugin.clone(), remote.restart_lsn, remote.confirmed_flush);
                slot.failover = true;
                slot.synced = true;
                slot
            });
            slot.current.restart_lsn = slot.current.restart_lsn.max(remote.restart_lsn);
            slot.current.confirmed_flush = slot.current.confirmed_flush.max(remote.confirmed_flush);
            slot.save();
            ctx.observe(Observation::SlotSynced {
                server: self.node,
                slot: remote.name,
                restart_lsn: slot.current.restart_lsn,
                confirmed_flush: slot.current.confirmed_flush,
            });
        }
    }

    // ----- standby -----

    pub(super) fn receive_wal(&mut self, ctx: &mut Ctx, entries: Vec<WalEntry>) {
        if self.durable.role != Role::Standby {
            // A promoted server ignores its old primary.
            return;
        }
        for entry in entries {
            if entry.start() < self.durable.wal.write_lsn() {
                continue; // already replayed
            }
            match &entry {
                WalEntry::Txn(txn) | WalEntry::Commit(txn) => {
                    for change in &txn.changes {
                        self.durable.tables.get_mut()[usize::from(change.table.0)].apply(
                            &change.kind,
                            change.key,
                            txn.csn,
                        );
                    }
                    self.durable.csn = txn.csn;
                    self.durable.next_xid = self.durable.next_xid.max(txn.xid + 1);
                }
                WalEntry::Changes { xid, .. } | WalEntry::Abort { xid, .. } => {
                    self.durable.next_xid = self.durable.next_xid.max(xid + 1);
                }
                WalEntry::Message(message) => {
                    if let Some(xid) = message.xid {
                        self.durable.next_xid = self.durable.next_xid.max(xid + 1);
                    }
                }
                WalEntry::RunningXacts { next_xid, .. } => {
                    self.durable.next_xid = self.durable.next_xid.max(*next_xid);
                }
                _ => {}
            }
            self.durable.wal.get_mut().replay(entry);
        }
        // The walreceiver's feedback: flushed up to here. Sent where the primary waits for it
        // (`synchronized_standby_slots`); runs without failover slots stay as they were.
        if self.config.synchronized_standby_slots {
            ctx.send(Node::Pg1, Msg::StandbyFlushed { lsn: self.durable.wal.write_lsn() });
        }
    }

    pub(super) fn promote(&mut self, ctx: &mut Ctx) {
        if self.durable.role != Role::Standby {
            return;
        }
        let switch_lsn = self.durable.wal.write_lsn();
        self.durable.role = Role::Primary;
        self.durable.timeline += 1;
        self.durable.switch_lsn = Some(switch_lsn);
        let (start, end) = self.durable.wal.get_mut().insert_record(record_size::END_OF_RECOVERY);
        self.durable.wal.get_mut().push(WalEntry::EndOfRecovery { start, end, timeline: self.durable.timeline });
        ctx.observe(Observation::Promoted {
            server: self.node,
            timeline: self.durable.timeline,
            switch_lsn,
            csn: self.durable.csn,
            slots: self.durable.slots.keys().cloned().collect(),
        });
        // The checkpoint a promotion requests once it has written its end-of-recovery record
        // (an online one: the server is already accepting writes).
        self.checkpoint(ctx, CheckpointKind::Forced);
        ctx.set_timer(Timer::Checkpoint, self.config.checkpoint_timeout_ms);
        if self.config.bgwriter_running_xacts {
            ctx.set_timer(Timer::BgwriterRunningXacts, LOG_SNAPSHOT_INTERVAL_MS);
        }
    }
}
