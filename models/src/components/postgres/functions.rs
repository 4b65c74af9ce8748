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

use super::*;

/// What pgoutput emits for one committed transaction on a slot of `slot_database` decoding for
/// `publication`: the published changes, or nothing when the transaction is in another database
/// (`DecodeTXNNeedSkip`, `src/backend/replication/logical/decode.c`) or changed no published
/// table (PostgreSQL ≥ 15 sends no empty transactions). A publication that does not exist
/// publishes every table here, as the walsender checks it at start.
pub(super) fn decode_txn(
    config: &PostgresConfig,
    publications: &BTreeMap<String, Option<BTreeSet<TableId>>>,
    publication: &str,
    slot_database: Option<&str>,
    txn: &CommittedTxn,
) -> Option<DecodedTxn> {
    let database =
        txn.changes.first().and_then(|change| config.tables[usize::from(change.table.0)].database.as_deref());
    if database != slot_database {
        return None;
    }
    let published = publications.get(publication).cloned().flatten();
    let changes: Vec<Change> = txn
        .changes
        .iter()
        .filter(|change| published.as_ref().is_none_or(|tables| tables.contains(&change.table)))
        .copied()
        .collect();
    if changes.is_empty() {
        return None;
    }
    Some(DecodedTxn {
        xid: txn.xid,
        first_lsn: txn.first_lsn,
        commit_lsn: txn.commit_lsn,
        end_lsn: txn.end_lsn,
        commit_time: txn.commit_time,
        changes,
        messages: Vec::new(),
    })
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
    /// `pg_logical_slot_get_changes` (`consume`) or `pg_logical_slot_peek_changes`.
    pub(super) fn logical_slot_changes(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        name: &str,
        publication: &str,
        consume: bool,
    ) -> SqlReply {
        if self.durable.role == Role::Standby {
            return SqlReply::Error("ERROR: logical decoding cannot be used while in recovery".into());
        }
        if let Some(error) = acquire_error(self.durable.slots.get(name), name) {
            return SqlReply::Error(error);
        }
        if self.durable.slots.get(name).is_some_and(Slot::is_invalidated) {
            // PostgreSQL 15's `CreateDecodingContext`.
            return SqlReply::Error(format!(
                "ERROR: can no longer get changes from replication slot \"{name}\" DETAIL: This slot has been \
                 invalidated because it exceeded the maximum reserved size."
            ));
        }
        if !self.durable.publications.contains_key(publication) {
            return SqlReply::Error(format!("ERROR: publication \"{publication}\" does not exist"));
        }
        // Decoding reads up to the flush pointer (`end_of_wal = GetFlushRecPtr()`), which is the
        // end of WAL here.
        let end_of_wal = self.durable.wal.write_lsn();
        let slot = &self.durable.slots[name];
        let first = self.durable.wal.first_entry_at_or_after(slot.current.restart_lsn);
        let start = slot.effective_start(Lsn::INVALID);
        let database = slot.database.clone();
        let mut emitted = Vec::new();
        let mut running_xacts = Vec::new();
        for entry in &self.durable.wal.entries[first..] {
            match entry {
                WalEntry::Txn(txn) if txn.commit_lsn >= start => {
                    emitted.extend(decode_txn(
                        &self.config,
                        &self.durable.publications,
                        publication,
                        database.as_deref(),
                        txn,
                    ));
                }
                WalEntry::RunningXacts { start, .. } => running_xacts.push(*start),
                _ => {}
            }
        }
        let slot = self.durable.slots.get_mut().get_mut(name).expect("acquired");
        for rx in running_xacts {
            let result = slot.process_running_xacts(rx);
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
        SqlReply::Changes(emitted)
    }

    /// `pg_replication_slot_advance(slot, to)`, its checks in PostgreSQL's order: the target,
    /// acquiring the slot, its reservation, the minimum.
    pub(super) fn replication_slot_advance(&mut self, ctx: &mut Ctx, client: Node, name: &str, to: Lsn) -> SqlReply {
        if !to.is_valid() {
            return SqlReply::Error("ERROR: invalid target WAL LSN".into());
        }
        if self.durable.role == Role::Standby {
            return SqlReply::Error("ERROR: logical decoding cannot be used while in recovery".into());
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
        let target = to.min(self.durable.wal.write_lsn());
        let minimum = slot.current.confirmed_flush;
        if target < minimum {
            return SqlReply::Error(format!(
                "ERROR: cannot advance replication slot to {target}, minimum is {minimum}"
            ));
        }
        // Fast-forward decoding: read records while the end of the last one read is before the
        // target.
        let first = self.durable.wal.first_entry_at_or_after(slot.current.restart_lsn);
        let mut running_xacts = Vec::new();
        for entry in &self.durable.wal.entries[first..] {
            if let WalEntry::RunningXacts { start, .. } = entry {
                running_xacts.push(*start);
            }
            if entry.end() >= target {
                break;
            }
        }
        let slot = self.durable.slots.get_mut().get_mut(name).expect("acquired");
        for rx in running_xacts {
            let result = slot.process_running_xacts(rx);
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

    /// `pg_replication_slots`, every slot.
    pub(super) fn replication_slots(&self) -> Vec<ReplicationSlotRow> {
        let current = self.current_wal_lsn();
        self.durable
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
                }
            })
            .collect()
    }

    /// `pg_logical_emit_message(transactional, prefix, content)` with `payload_bytes` of
    /// content; a transactional one inside `BEGIN … COMMIT` gets an xid and a commit record.
    pub(super) fn emit_message(
        &mut self,
        ctx: &mut Ctx,
        transactional: bool,
        prefix: &str,
        payload_bytes: u64,
    ) -> SqlReply {
        if self.durable.role == Role::Standby {
            return SqlReply::Error("ERROR: cannot execute pg_logical_emit_message() during recovery".into());
        }
        let before = self.durable.wal.write_lsn();
        let size = record_size::logical_message(prefix.len() as u64, payload_bytes);
        let (start, message_end) = self.durable.wal.get_mut().insert_record(size);
        let end = if transactional {
            self.durable.next_xid += 1;
            self.durable.wal.get_mut().insert_record(record_size::COMMIT).1
        } else {
            message_end
        };
        self.durable.wal.get_mut().push(WalEntry::LogicalMessage { start, end });
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
