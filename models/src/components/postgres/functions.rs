//! The server's SQL functions on slots and WAL, and what logical decoding emits for a slot:
//!
//! - `pg_logical_slot_get_changes` / `pg_logical_slot_peek_changes`
//!   (`pg_logical_slot_get_changes_guts`, `src/backend/replication/logical/logicalfuncs.c`):
//!   decoding from `restart_lsn` to the flush pointer, emitting whole transactions whose commit
//!   starts at or after `confirmed_flush` (there is no start argument); get then confirms the
//!   end of what it read (`LogicalConfirmReceivedLocation(ctx->reader->EndRecPtr)`) and marks
//!   the slot dirty, which saves it at the next checkpoint only; peek confirms nothing. Both run
//!   the snapshot builder, so both can move `restart_lsn` through running-xacts records already
//!   confirmed (`SnapBuildProcessRunningXacts`, `snapbuild.c`).
//! - `pg_replication_slot_advance` (`src/backend/replication/slotfuncs.c`): the target is
//!   clamped to the flush pointer, refused below `confirmed_flush`; decoding runs in fast-forward
//!   mode from `restart_lsn` until a record ends at or after the target
//!   (`pg_logical_replication_slot_advance`), then the target is confirmed and the slot marked
//!   dirty.
//! - `pg_replication_slots` (`pg_get_replication_slots`): `wal_status` and `safe_wal_size` as
//!   the view computes them (`GetWALAvailability`, `xlog.c`).
//! - `pg_logical_emit_message` (`LogLogicalMessage`, `src/backend/replication/logical/message.c`)
//!   and `pg_switch_wal` (`RequestXLogSwitch`, `src/backend/access/transam/xlog.c`).
//!
//! The SQL session is taken to be in the slot's database (PostgreSQL refuses decoding a slot
//! from another database: "replication slot … was not created in this database").

use super::decode::{DecodeContext, Decoded, ReorderBuffer};
use super::*;

/// A logical message's WAL record as [`Postgres::log_message`] writes it.
pub(super) struct LoggedMessage {
    pub xid: Option<Xid>,
    pub transactional: bool,
    pub prefix: String,
    pub payload_bytes: u64,
    pub database: Option<String>,
    pub content: MessageContent,
}

/// A `pg_logical_emit_message(transactional, prefix, content)` call: `payload_bytes` of
/// content, which is an outbox event or bytes the model does not keep.
pub(super) struct LogicalMessage {
    pub transactional: bool,
    pub prefix: String,
    pub payload_bytes: u64,
    pub content: MessageContent,
}

/// The prefix-less error of a slot that cannot be acquired (`ReplicationSlotAcquire`).
fn acquire_error(slot: Option<&Slot>, name: &str) -> Option<String> {
    match slot {
        None => Some(format!("ERROR: replication slot \"{name}\" does not exist")),
        Some(slot) => {
            slot.active.map(|(holder, _)| format!("ERROR: replication slot \"{name}\" is active for PID of {holder}"))
        }
    }
}

impl Postgres {
    /// `pg_logical_slot_get_changes` (`consume`) or `pg_logical_slot_peek_changes`, with
    /// pgoutput's `messages` option or without: what was emitted, in order (whole transactions
    /// as [`ReplReply::XLogData`], non-transactional messages as [`ReplReply::Message`]), or the
    /// error.
    pub(super) fn logical_slot_changes(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        name: &str,
        publication: &str,
        consume: bool,
        messages: bool,
    ) -> Result<Vec<ReplReply>, SqlReply> {
        if self.durable.role == Role::Standby {
            return Err(SqlReply::Error("ERROR: logical decoding cannot be used while in recovery".into()));
        }
        if let Some(error) = acquire_error(self.durable.slots.get(name), name) {
            return Err(SqlReply::Error(error));
        }
        if self.durable.slots.get(name).is_some_and(Slot::is_invalidated) {
            // PostgreSQL 15's `CreateDecodingContext`.
            return Err(SqlReply::Error(format!(
                "ERROR: can no longer get changes from replication slot \"{name}\" DETAIL: This slot has been \
                 invalidated because it exceeded the maximum reserved size."
            )));
        }
        if !self.durable.publications.contains_key(publication) {
            return Err(SqlReply::Error(format!("ERROR: publication \"{publication}\" does not exist")));
        }
        // Decoding reads up to the flush pointer (`end_of_wal = GetFlushRecPtr()`).
        let end_of_wal = self.durable.wal.flush_lsn();
        let slot = &self.durable.slots[name];
        let read_from = slot.current.restart_lsn;
        let first = self.durable.wal.first_entry_at_or_after(read_from);
        let cx = DecodeContext {
            config: &self.config,
            publications: &self.durable.publications,
            publication,
            slot_database: slot.database.as_deref(),
            start: slot.effective_start(Lsn::INVALID),
            messages,
            wal: &self.durable.wal,
            read_from,
            creation_consistent_at: slot.creation_consistent_at,
        };
        let mut buffer = ReorderBuffer::default();
        let mut emitted = Vec::new();
        let mut running_xacts = Vec::new();
        for entry in self.durable.wal.entries[first..].iter().take_while(|entry| entry.end() <= end_of_wal) {
            match buffer.decode(&cx, entry) {
                Decoded::Txn(txn) => emitted.push(ReplReply::XLogData(txn)),
                Decoded::Message(message) => emitted.push(ReplReply::Message(message)),
                Decoded::RunningXacts { rx, restart, catalog_xmin } => running_xacts.push((rx, restart, catalog_xmin)),
                Decoded::Nothing => {}
            }
        }
        let slot = self.durable.slots.get_mut().get_mut(name).expect("acquired");
        for (rx, restart, catalog_xmin) in running_xacts {
            let result = slot.process_running_xacts(rx, restart, catalog_xmin);
            observe_restart_advance(ctx, self.node, slot, result);
        }
        if consume {
            let result = slot.confirm(end_of_wal);
            if let Some((from, to)) = result.moved {
                ctx.observe(Observation::SlotConfirmed {
                    server: self.node,
                    slot: name.to_string(),
                    from,
                    to,
                    by: client,
                });
            }
            observe_restart_advance(ctx, self.node, slot, result);
            slot.dirty = true;
        }
        Ok(emitted)
    }

    /// `pg_replication_slot_advance(slot, to)`, its checks in PostgreSQL 15's order: the target,
    /// acquiring the slot (refused while a walsender holds it), its reservation, the minimum
    /// (`confirmed_flush` of a logical slot: a slot never moves backwards), then, on a standby,
    /// `CreateDecodingContext`'s refusal (`CheckLogicalDecodingRequirements`).
    pub(super) fn replication_slot_advance(&mut self, ctx: &mut Ctx, client: Node, name: &str, to: Lsn) -> SqlReply {
        if !to.is_valid() {
            return SqlReply::Error("ERROR: invalid target WAL LSN".into());
        }
        if let Some(error) = acquire_error(self.durable.slots.get(name), name) {
            return SqlReply::Error(error);
        }
        let slot = &self.durable.slots[name];
        if slot.is_invalidated() || !slot.current.restart_lsn.is_valid() {
            return SqlReply::Error(format!(
                "ERROR: replication slot \"{name}\" cannot be advanced DETAIL: This slot has never previously \
                 reserved WAL, or it has been invalidated."
            ));
        }
        let target = to.min(self.durable.wal.flush_lsn());
        let minimum = slot.current.confirmed_flush;
        if target < minimum {
            return SqlReply::Error(format!(
                "ERROR: cannot advance replication slot to {target}, minimum is {minimum}"
            ));
        }
        if self.durable.role == Role::Standby {
            return SqlReply::Error("ERROR: logical decoding cannot be used while in recovery".into());
        }
        // Fast-forward decoding: read records while the end of the last one read is before the
        // target.
        let read_from = slot.current.restart_lsn;
        let first = self.durable.wal.first_entry_at_or_after(read_from);
        let cx = DecodeContext {
            config: &self.config,
            publications: &self.durable.publications,
            publication: "",
            slot_database: slot.database.as_deref(),
            start: slot.effective_start(Lsn::INVALID),
            messages: false,
            wal: &self.durable.wal,
            read_from,
            creation_consistent_at: slot.creation_consistent_at,
        };
        // Fast-forward decoding still builds the reorder buffer's transactions (nothing is
        // emitted): the running-xacts records propose the same candidates.
        let mut buffer = ReorderBuffer::default();
        let mut running_xacts = Vec::new();
        for entry in &self.durable.wal.entries[first..] {
            if let Decoded::RunningXacts { rx, restart, catalog_xmin } = buffer.decode(&cx, entry) {
                running_xacts.push((rx, restart, catalog_xmin));
            }
            if entry.end() >= target {
                break;
            }
        }
        let slot = self.durable.slots.get_mut().get_mut(name).expect("acquired");
        for (rx, restart, catalog_xmin) in running_xacts {
            let result = slot.process_running_xacts(rx, restart, catalog_xmin);
            observe_restart_advance(ctx, self.node, slot, result);
        }
        let result = slot.confirm(target);
        if let Some((from, to)) = result.moved {
            ctx.observe(Observation::SlotConfirmed { server: self.node, slot: name.to_string(), from, to, by: client });
        }
        observe_restart_advance(ctx, self.node, slot, result);
        slot.dirty = true;
        SqlReply::Lsn(slot.current.confirmed_flush)
    }

    /// `pg_replication_slots`, every slot, by name; a slot being created is listed while its
    /// creation waits (`RS_EPHEMERAL`, acquired by the creating session: active; its
    /// `restart_lsn` reserved, its `catalog_xmin` set, `confirmed_flush_lsn` NULL until
    /// `DecodingContextFindStartpoint` sets it; `pg_get_replication_slots`, `slotfuncs.c`).
    pub(super) fn replication_slots(&self) -> Vec<ReplicationSlotRow> {
        let current = self.current_wal_lsn();
        let creating = self.volatile.creating.iter().map(|(name, creating)| {
            let restart_lsn = creating.creation.restart_lsn;
            // Active: WAL already removed reads `unreserved`, as for an acquired slot.
            let state = match self.retention().wal_availability(
                restart_lsn,
                current,
                self.slots_minimum(),
                self.volatile.last_removed_segment,
            ) {
                WalAvailability::Removed => WalAvailability::Unreserved,
                state => state,
            };
            ReplicationSlotRow {
                slot_name: name.clone(),
                plugin: creating.plugin.clone(),
                database: creating.database.clone(),
                active: true,
                restart_lsn: Some(restart_lsn),
                confirmed_flush_lsn: None,
                wal_status: Some(state.as_str().into()),
                safe_wal_size: self.retention().safe_wal_size(restart_lsn, current),
                catalog_xmin: (creating.catalog_xmin != 0).then_some(creating.catalog_xmin),
            }
        });
        let mut rows: Vec<ReplicationSlotRow> = self
            .durable
            .slots
            .values()
            .map(|slot| {
                let state = self.wal_status(slot);
                ReplicationSlotRow {
                    slot_name: slot.name.clone(),
                    plugin: slot.plugin.clone(),
                    database: slot.database.clone(),
                    active: slot.active.is_some(),
                    restart_lsn: (!slot.is_invalidated()).then_some(slot.current.restart_lsn),
                    confirmed_flush_lsn: Some(slot.current.confirmed_flush),
                    wal_status: Some(state.as_str().into()),
                    safe_wal_size: if state == WalAvailability::Removed {
                        None
                    } else {
                        self.retention().safe_wal_size(slot.current.restart_lsn, current)
                    },
                    catalog_xmin: (slot.catalog_xmin != 0).then_some(slot.catalog_xmin),
                }
            })
            .chain(creating)
            .collect();
        rows.sort_by(|a, b| a.slot_name.cmp(&b.slot_name));
        rows
    }

    /// `pg_logical_emit_message(transactional, prefix, content)` with `payload_bytes` of
    /// content, outside a transaction block: a transactional one is a transaction of its own
    /// (an xid, the message record, a commit record); a non-transactional one has no xid. (In a
    /// block: `xact.rs`.)
    /// Writes a logical message's WAL record, unflushed (`LogLogicalMessage`), and reports it;
    /// `committed`: its transaction commits with it. Returns the record's start and end.
    pub(super) fn log_message(&mut self, ctx: &mut Ctx, message: LoggedMessage, committed: bool) -> (Lsn, Lsn) {
        let LoggedMessage { xid, transactional, prefix, payload_bytes, database, content } = message;
        let size = record_size::logical_message(prefix.len() as u64, payload_bytes);
        let (start, end) = self.durable.wal.get_mut().insert_record_unflushed(size);
        ctx.observe(Observation::MessageWritten {
            server: self.node,
            lsn: end,
            transactional,
            xid,
            prefix: prefix.clone(),
            database: database.clone(),
            committed,
            content,
        });
        self.durable.wal.get_mut().push(WalEntry::Message(Box::new(crate::core::wal::MessageRecord {
            xid,
            transactional,
            prefix,
            payload_bytes,
            database,
            start,
            end,
            content,
        })));
        (start, end)
    }

    pub(super) fn emit_message(&mut self, ctx: &mut Ctx, message: LogicalMessage) -> SqlReply {
        let LogicalMessage { transactional, prefix, payload_bytes, content } = message;
        if self.durable.role == Role::Standby {
            return SqlReply::Error("ERROR: cannot execute pg_logical_emit_message() during recovery".into());
        }
        let before = self.durable.wal.write_lsn();
        // A non-transactional message is not flushed (`LogLogicalMessage`); a transactional one
        // is, by its commit.
        let xid = transactional.then_some(self.durable.next_xid);
        let (start, message_end) = self.log_message(
            ctx,
            LoggedMessage { xid, transactional, prefix, payload_bytes, database: None, content },
            transactional,
        );
        if let Some(xid) = xid {
            self.durable.next_xid += 1;
            let (commit_lsn, end_lsn) = self.durable.wal.get_mut().insert_record(record_size::COMMIT);
            self.durable.wal.get_mut().push(WalEntry::Commit(CopyOnWrite::new(CommittedTxn {
                xid,
                csn: self.durable.csn,
                first_lsn: start,
                commit_lsn,
                end_lsn,
                commit_time: ctx.now,
                timeline: self.durable.timeline,
                changes: Vec::new(),
            })));
        }
        self.arm_wal_writer(ctx);
        self.after_wal_append(ctx);
        self.after_segments_written(ctx, before);
        // `LogLogicalMessage` returns the end of the message record.
        SqlReply::Lsn(message_end)
    }

    /// `pg_switch_wal()`: nothing is written when the insert position is at a segment's start.
    pub(super) fn switch_wal(&mut self, ctx: &mut Ctx) -> SqlReply {
        if self.durable.role == Role::Standby {
            return SqlReply::Error("ERROR: recovery is in progress".into());
        }
        let before = self.durable.wal.write_lsn();
        if let Some((start, end)) = self.durable.wal.get_mut().switch_segment() {
            self.durable.wal.get_mut().push(WalEntry::Switch { start, end });
            self.after_wal_append(ctx);
            self.after_segments_written(ctx, before);
        }
        SqlReply::Lsn(self.durable.wal.write_lsn())
    }
}
