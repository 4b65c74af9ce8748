//! Slot creation: `CREATE_REPLICATION_SLOT … LOGICAL` on a replication connection and
//! `pg_create_logical_replication_slot` in SQL (`CreateReplicationSlot`, `walsender.c`;
//! `pg_create_logical_replication_slot`, `slotfuncs.c`).
//!
//! The slot reserves WAL at the insert pointer and logs a running-xacts record right there
//! (`ReplicationSlotReserveWal`, `slot.c`): that record's start is the slot's `restart_lsn`. Then
//! its decoder reads the WAL from it until the snapshot builder is consistent
//! (`DecodingContextFindStartpoint`, `logical.c`; the builder is [`super::snapbuild`]). With no
//! transaction running the first record is the consistent point and the slot exists at once.
//! Otherwise the creation waits for the listed transactions (of every database) to end
//! (`XactLockTableWait`, released once the transaction has left the proc array), logs a new
//! record, and reads on; the creating session gets no answer until the builder is consistent.
//! The slot's `confirmed_flush` is then the end of the consistent record; a replication
//! connection's session keeps the exported snapshot (`SnapBuildExportSnapshot`) until its next
//! command.
//!
//! While it waits the slot is ephemeral (`RS_EPHEMERAL`): it has its name and holds its WAL, and
//! the end of its session or a crash drops it (`ReplicationSlotRelease`, `ReplicationSlotCleanup`).
//!
//! While it waits `pg_replication_slots` lists it, active, with its `restart_lsn` and
//! `catalog_xmin` and no `confirmed_flush_lsn` (`functions.rs`). Once consistent the slot
//! remembers where ([`Slot::creation_consistent_at`]): a later decoder reading from its
//! `restart_lsn` rebuilds the snapshot through the same records (`decode.rs`).
//!
//! Left out: a slot being created holds no `catalog_xmin` against vacuum until it exists; the record logged after a wait is flushed at once, like
//! every running-xacts record here (PostgreSQL only asks the WAL writer to flush it,
//! `LogCurrentRunningXacts` → `XLogSetAsyncXactLSN`, so the decoder reading it may wait up to
//! `wal_writer_delay` more); a creation ends in the step the last waited transaction ends (the
//! decoder's wake-up, its record and its reading take no time).

use super::snapbuild::{Progress, RunningXacts, SlotCreation};
use super::snapshot::{Exported, SeenCommits, Snapshot};
use super::*;

/// How a slot creation was asked for, so how it is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) enum CreateVia {
    /// `CREATE_REPLICATION_SLOT … LOGICAL …` (its default exports a snapshot): answered with
    /// [`ReplReply::SlotCreated`]; PostgreSQL 17+ `(FAILOVER)`.
    Replication { failover: bool },
    /// `pg_create_logical_replication_slot`: answered with the consistent point; builds no
    /// full snapshot and exports none.
    Sql,
}

/// A slot being created whose decoder has not reached the consistent point.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(super) struct Creating {
    pub client: Node,
    pub session: SessionId,
    pub via: CreateVia,
    pub plugin: String,
    pub database: Option<String>,
    /// `GetOldestSafeDecodingTransactionId` when WAL was reserved.
    pub catalog_xmin: Xid,
    pub creation: SlotCreation,
    /// The next WAL entry its decoder reads.
    pub next_entry: usize,
}

impl Postgres {
    /// Creates slot `name` for the session: `None` while its decoder waits (the answer comes
    /// when it is consistent).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn create_slot(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        name: String,
        plugin: String,
        database: Option<String>,
        via: CreateVia,
    ) -> Option<ReplReply> {
        if self.durable.role == Role::Standby {
            return Some(ReplReply::Error("ERROR: logical decoding cannot be used while in recovery".into()));
        }
        if self.durable.slots.contains_key(&name) || self.volatile.creating.contains_key(&name) {
            return Some(ReplReply::Error(format!("ERROR: replication slot \"{name}\" already exists")));
        }
        // `ReplicationSlotReserveWal`: restart_lsn is the insert pointer, and a running-xacts
        // record is logged right there.
        let restart_lsn = self.durable.wal.insert_lsn();
        let next_entry = self.durable.wal.entries.len();
        let xids = self.insert_running_xacts();
        debug_assert_eq!(self.durable.wal.entries[next_entry].start(), restart_lsn);
        // `GetOldestSafeDecodingTransactionId`: the oldest running xid, or the oldest
        // `catalog_xmin` of the other slots if older.
        let oldest_running = xids.first().copied().unwrap_or(self.durable.next_xid);
        let catalog_xmin = self
            .durable
            .slots
            .values()
            .filter(|slot| slot.catalog_xmin != 0)
            .map(|slot| slot.catalog_xmin)
            .fold(oldest_running, Xid::min);
        let creating = Creating {
            client,
            session,
            via,
            plugin,
            database,
            catalog_xmin,
            creation: SlotCreation::new(restart_lsn, matches!(via, CreateVia::Replication { .. })),
            next_entry,
        };
        self.volatile.creating.insert(name.clone(), creating);
        let reply = self.read_for_creation(ctx, &name);
        self.after_wal_append(ctx);
        reply
    }

    /// `LogStandbySnapshot` for a slot being created: a running-xacts record of the xids in the
    /// proc array (returned). Unlike the background writer's, it does not restart the writer's
    /// 15 s clock. The caller runs [`Postgres::after_wal_append`].
    fn insert_running_xacts(&mut self) -> Vec<Xid> {
        let xids = self.running_xids();
        let (start, end) = self.durable.wal.get_mut().insert_record(record_size::running_xacts(xids.len()));
        let next_xid = self.durable.next_xid;
        self.durable.wal.get_mut().push(WalEntry::RunningXacts { start, end, xids: xids.clone(), next_xid });
        xids
    }

    /// The decoder of slot `name` reads the WAL on from where it stopped, until it waits or is
    /// consistent; then the slot exists and this is the answer.
    fn read_for_creation(&mut self, ctx: &mut Ctx, name: &str) -> Option<ReplReply> {
        loop {
            let index = self.volatile.creating.get(name)?.next_entry;
            // Each wait ends with a record of its own, which decides the next phase: the decoder
            // never reaches the end of the WAL without waiting or being consistent.
            let entry = self.durable.wal.entries.get(index)?;
            let progress = match entry {
                WalEntry::Txn(txn) | WalEntry::Commit(txn) => {
                    let (xid, commit_lsn) = (txn.xid, txn.commit_lsn);
                    self.volatile.creating.get_mut(name)?.creation.read_commit(xid, commit_lsn);
                    Progress::ReadOn
                }
                WalEntry::RunningXacts { start, end, xids, next_xid } => {
                    let record = RunningXacts { start: *start, end: *end, next_xid: *next_xid, xids };
                    let running = self.running_xids();
                    let creating = self.volatile.creating.get_mut(name)?;
                    let progress =
                        creating.creation.read_running_xacts(record, |xid| running.binary_search(&xid).is_ok());
                    if let Progress::Waiting { phase } = progress {
                        ctx.observe(Observation::SlotCreationWaiting {
                            server: self.node,
                            slot: name.to_string(),
                            found: phase.found().to_string(),
                            at: *start,
                            xids: creating.creation.waiting_for.iter().copied().collect(),
                        });
                    }
                    progress
                }
                _ => Progress::ReadOn,
            };
            self.volatile.creating.get_mut(name)?.next_entry += 1;
            match progress {
                Progress::ReadOn => {}
                Progress::Waiting { .. } => return None,
                Progress::LogRunningXacts { .. } => {
                    self.insert_running_xacts();
                }
                Progress::Consistent => {
                    let consistent_at = self.durable.wal.entries[index].start();
                    return Some(self.slot_created(ctx, name, consistent_at));
                }
            }
        }
    }

    /// The builder of slot `name` is consistent: the slot exists, the session gets the exported
    /// snapshot (a replication connection), and this is the answer.
    fn slot_created(&mut self, ctx: &mut Ctx, name: &str, consistent_at: Lsn) -> ReplReply {
        let creating = self.volatile.creating.remove(name).expect("being created");
        let restart_lsn = creating.creation.restart_lsn;
        let consistent_point = creating.creation.consistent_point.expect("consistent");
        let mut slot = Slot::new(name.to_string(), creating.plugin, restart_lsn, consistent_point);
        slot.database = creating.database;
        slot.catalog_xmin = creating.catalog_xmin;
        slot.saved_catalog_xmin = creating.catalog_xmin;
        slot.creation_consistent_at = Some(consistent_at);
        if let CreateVia::Replication { failover: true } = creating.via
            && self.config.major_version >= 17
        {
            slot.failover = true;
        }
        self.durable.slots.get_mut().insert(name.to_string(), slot);
        self.volatile.exported_snapshots_created += 1;
        let snapshot_name = format!(
            "{:08X}-{:08X}-{}",
            self.durable.next_xid % 4096,
            self.durable.csn + 2,
            self.volatile.exported_snapshots_created
        );
        // `SnapBuildInitialSnapshot`: the transactions whose commit record precedes the
        // consistent point, which is the last record written: every commit so far.
        if let Some(xids) = creating.creation.builder.initial_snapshot()
            && let Some(Session::Replication { exported_snapshot, .. }) =
                self.volatile.sessions.get_mut(&(creating.client, creating.session)).map(CopyOnWrite::get_mut)
        {
            let snapshot = Snapshot { xids, seen: SeenCommits::upto(self.durable.csn) };
            *exported_snapshot = Some(Exported { name: snapshot_name.clone(), snapshot });
        }
        ctx.observe(Observation::SlotCreated {
            server: self.node,
            slot: name.to_string(),
            restart_lsn,
            consistent_point,
            snapshot_name: snapshot_name.clone(),
        });
        ReplReply::SlotCreated { consistent_point, snapshot_name }
    }

    /// `xid` ended (committed and visible, or aborted) and released its lock: every slot
    /// creation whose wait this ends logs a new running-xacts record and reads on; those that
    /// become consistent are answered.
    pub(super) fn creations_transaction_ended(&mut self, ctx: &mut Ctx, xid: Xid) {
        if self.volatile.creating.is_empty() {
            return;
        }
        let woken: Vec<String> = self
            .volatile
            .creating
            .iter_mut()
            .filter_map(|(name, creating)| creating.creation.transaction_ended(xid).then(|| name.clone()))
            .collect();
        if woken.is_empty() {
            return;
        }
        let write_before = self.durable.wal.write_lsn();
        for name in woken {
            let Some(creating) = self.volatile.creating.get(&name) else { continue };
            let (client, session, via) = (creating.client, creating.session, creating.via);
            self.insert_running_xacts();
            if let Some(reply) = self.read_for_creation(ctx, &name) {
                let msg = match via {
                    CreateVia::Replication { .. } => Msg::ReplReply { session, reply },
                    CreateVia::Sql => Msg::SqlReply { session, reply: creation_sql_reply(reply) },
                };
                ctx.send(client, msg);
            }
        }
        self.after_wal_append(ctx);
        self.after_segments_written(ctx, write_before);
    }

    /// The session of a slot being created ended: the ephemeral slot is dropped.
    pub(super) fn drop_creation_of(&mut self, client: Node, session: SessionId) {
        if !self.volatile.creating.is_empty() {
            self.volatile.creating.retain(|_, creating| (creating.client, creating.session) != (client, session));
        }
    }
}

/// What `pg_create_logical_replication_slot` answers for a creation's outcome: the consistent
/// point (its `lsn` column), or the error.
pub(super) fn creation_sql_reply(reply: ReplReply) -> SqlReply {
    match reply {
        ReplReply::SlotCreated { consistent_point, .. } => SqlReply::Lsn(consistent_point),
        ReplReply::Error(error) => SqlReply::Error(error),
        _ => SqlReply::Error("ERROR: unexpected".into()),
    }
}
