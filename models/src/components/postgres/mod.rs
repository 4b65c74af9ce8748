//! A PostgreSQL server: WAL, transactions and MVCC, tables, publications, logical slots and
//! walsenders, crash and restart, a streaming standby and its promotion.
//!
//! Follows `reference/postgres-slots.md`:
//! - §1 LSNs and WAL positions ([`wal`]);
//! - §2–3 slot state and creation: `restart_lsn` at the insert pointer, a running-xacts record
//!   written there, consistency reached at once (no transaction is ever running when a slot is
//!   created, because transactions are atomic here), `confirmed_flush` at the end of that record
//!   (the consistent point), and an exported snapshot valid until the creating replication
//!   session runs its next command or goes away (§3.4);
//! - §4 what a slot emits: whole transactions, in commit order, whose commit record starts at or
//!   after `max(start, confirmed_flush)`, only their published changes, and nothing for a
//!   transaction without any (PostgreSQL ≥ 15 sends no empty transactions); a start below
//!   `confirmed_flush` is forwarded to it ([`slot`]);
//! - §5–6 how positions advance and what a crash keeps ([`slot`]);
//! - §7.3 timed checkpoints (running-xacts record, checkpoint record, save of dirty slots) and the
//!   background writer's running-xacts record every 15 s while important WAL is written; the
//!   checkpoint that ends crash recovery, at the restart after a crash (no running-xacts record).
//!
//! A standby receives the primary's WAL over a link, in batches at most `replication_delay_ms`
//! late, and replays it with the primary's positions. On PostgreSQL ≤ 16 it has no logical slots (17+: see failover slots below); promotion ends
//! recovery on a new timeline (§12 "Position of the promoted standby's slot").
//!
//! - §7.1–7.3, §8 WAL retention ([`retention`]): every checkpoint keeps WAL from `KeepLogSeg`
//!   (the slots' minimum `restart_lsn`, capped by `max_slot_wal_keep_size`, raised to
//!   `wal_keep_size`) and invalidates every slot behind that, terminating an active slot's
//!   walsender first; an invalidated slot shows `wal_status` `lost` and `restart_lsn` NULL, and
//!   `START_REPLICATION` on it fails. Finishing a segment `max_wal_size / 1.9` segments past the
//!   last redo runs a checkpoint at once (PostgreSQL requests it and the checkpointer starts
//!   it moments later). `wal_status` and these rules are calibrated against a real PostgreSQL
//!   15 by `handoff conform` (`conform/`), whose model side shares [`retention`], [`slot`] and
//!   [`wal`] with this server.
//!
//! - §5.1 keep-alives: a caught-up walsender sends one carrying the end of the WAL read, while
//!   the client's reported flush is behind it (sent only where the consumer acts on them:
//!   Debezium's `connector_and_driver`).
//! - §12 PostgreSQL 17 failover slots: a slot created with `failover`; the standby's slotsync
//!   worker (`sync_replication_slots`) copies the primary's failover slots with every WAL
//!   shipment, forward only and only to positions the standby has flushed, an invalidation
//!   included; the copies (`synced`) are usable once the standby is promoted. With
//!   `synchronized_standby_slots` the original primary's walsender for a failover slot sends
//!   nothing the standby has not reported flushed (the standby's feedback).
//!
//! Left out (another issue makes them exact): `pg_replication_slot_advance` and SQL get/peek
//! here (the conformance model has them), long-running transactions (slot creation waiting for
//! them, RXs listing running transactions), the slotsync worker's own polling interval (200 ms
//! to 30 s) and its "sync-ready" wait, the 17 shutdown save of `confirmed_flush` (the model's
//! only restart is an immediate one), `idle_replication_slot_timeout` (18).

pub mod retention;
pub mod slot;
pub mod table;
pub mod wal;

use crate::core::change::{Change, ChangeKind, ReplicaIdentity, RowOp};
use crate::core::component::{Component, Ctx, Timer};
use crate::core::ids::{Csn, Key, Node, Role, Row, TableId, Xid};
use crate::core::lsn::Lsn;
use crate::core::observe::{Observation, ScanSnapshot};
use crate::core::protocol::{
    Control, DecodedTxn, FailoverSlot, Msg, ReplReply, ReplRequest, SessionId, SlotRow, SqlReply, SqlRequest,
};
use crate::core::shared::{CopyOnWrite, Fixed};
use crate::core::wal::{CommittedTxn, WalEntry};
use retention::{Retention, WalAvailability};
use serde::{Deserialize, Serialize};
use slot::Slot;
use std::collections::{BTreeMap, BTreeSet};
use table::Table;
use wal::{Wal, record_size};

/// `LOG_SNAPSHOT_INTERVAL_MS` in `bgwriter.c`.
pub const LOG_SNAPSHOT_INTERVAL_MS: u64 = 15_000;

/// Server settings the model uses. Names are PostgreSQL's.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PostgresConfig {
    /// Major version (15–18); decides version differences.
    pub major_version: u32,
    /// `initdb --wal-segsize`, in bytes.
    pub wal_segment_size: u64,
    /// `checkpoint_timeout`.
    pub checkpoint_timeout_ms: u64,
    /// `max_wal_size` (MB): the WAL volume between checkpoints and the view's
    /// reserved/extended boundary.
    pub max_wal_size_mb: u64,
    /// `max_slot_wal_keep_size` (MB); `None` is -1, no cap.
    pub max_slot_wal_keep_size_mb: Option<u64>,
    /// `wal_keep_size` (MB).
    pub wal_keep_size_mb: u64,
    /// Whether the background writer logs running-xacts records (`LOG_SNAPSHOT_INTERVAL_MS`).
    /// The exhaustive lens turns it off to keep the state space small.
    pub bgwriter_running_xacts: bool,
    /// Whether walsenders send keep-alive messages (`WalSndKeepalive`) when caught up. The
    /// exhaustive lens turns them off.
    pub walsender_keepalives: bool,
    /// Testbed knob, not a PostgreSQL setting: how fast a snapshot `SELECT` returns rows.
    pub scan_rows_per_second: u64,
    /// Testbed knob: how late the primary's WAL reaches the standby (asynchronous replication).
    pub replication_delay_ms: u64,
    /// Whether this server streams WAL to a standby (`Pg2`).
    pub has_standby: bool,
    /// PostgreSQL 17+, the standby's `sync_replication_slots = on`: its slotsync worker copies
    /// the primary's failover slots.
    pub sync_replication_slots: bool,
    /// PostgreSQL 17+, the primary's `synchronized_standby_slots` lists the standby's physical
    /// slot: a failover slot's walsender sends nothing the standby has not flushed.
    pub synchronized_standby_slots: bool,
    /// Where the WAL of a fresh cluster continues (the position after `initdb` and the load).
    pub initial_wal_lsn: Lsn,
    pub tables: Vec<TableSpec>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TableSpec {
    pub id: TableId,
    /// Schema-qualified name, e.g. `public.claims`.
    pub name: String,
    pub replica_identity: ReplicaIdentity,
}

/// What survives a crash: WAL (flushed at every commit), the tables it recovers to, slot files,
/// catalogs.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Durable {
    pub role: Role,
    pub timeline: u32,
    /// Where this server's timeline branched from the old one (set by promotion).
    pub switch_lsn: Option<Lsn>,
    /// Shared between states until a step writes it (most requests only read it).
    pub wal: CopyOnWrite<Wal>,
    pub tables: CopyOnWrite<Vec<Table>>,
    pub next_xid: Xid,
    /// The last commit's sequence number.
    pub csn: Csn,
    pub slots: CopyOnWrite<BTreeMap<String, Slot>>,
    /// Publications: name → `None` for `FOR ALL TABLES`, or the table list.
    pub publications: CopyOnWrite<BTreeMap<String, Option<BTreeSet<TableId>>>>,
    /// Checkpoint bookkeeping: the WAL position of the last checkpoint record.
    pub last_checkpoint_lsn: Lsn,
    /// The last checkpoint's redo pointer (WAL-volume checkpoints count segments from it).
    pub last_checkpoint_redo: Lsn,
    /// The control file's state says the server is running (`DB_IN_PRODUCTION`): set at start,
    /// never cleared by a crash (the model has no clean shutdown), so a start that finds it set
    /// is a start after a crash, and the server goes through crash recovery (`StartupXLOG`).
    pub in_production: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Scan {
    table: TableId,
    rows: CopyOnWrite<Vec<(Key, Row)>>,
    position: usize,
    fetch_size: u32,
}

/// How long the next batch of a scan takes at `scan_rows_per_second`.
fn batch_time_ms(scan: &Scan, scan_rows_per_second: u64) -> u64 {
    let rows = (scan.rows.len() - scan.position).min(scan.fetch_size as usize) as u64;
    (rows * 1000).div_ceil(scan_rows_per_second.max(1))
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Walsender {
    slot: String,
    /// Decoding emits transactions whose commit starts at or after this.
    start: Lsn,
    publication: String,
    /// Next WAL entry to decode.
    next_entry: usize,
    /// The flush position the client last reported (`MyWalSnd->flush`).
    client_flush: Lsn,
    /// The `walEnd` of the last keep-alive sent.
    keepalive_sent: Lsn,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Session {
    Sql { scan: Option<Scan> },
    Replication { exported_snapshot: Option<(String, Csn)>, walsender: Option<Walsender> },
}

/// What a checkpoint is for: the kinds behave differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CheckpointKind {
    /// By `checkpoint_timeout` or WAL volume: skipped when nothing important was written.
    Requested,
    /// `CHECKPOINT`, or the one a promotion requests: never skipped.
    Forced,
    /// The end of crash recovery (`CHECKPOINT_END_OF_RECOVERY`): never skipped, and, a shutdown
    /// checkpoint, without a running-xacts record.
    EndOfRecovery,
}

/// Lost at a crash: sessions, walsenders, cursors, exported snapshots, in-memory slot positions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Volatile {
    up: bool,
    /// Each session shared between states until a step changes it.
    sessions: BTreeMap<(Node, SessionId), CopyOnWrite<Session>>,
    /// WAL entries already shipped to the standby.
    shipped_entries: usize,
    /// A delayed shipment to the standby is pending.
    ship_armed: bool,
    /// `wal.entries.len()` when the last running-xacts record was written by the bgwriter.
    entries_at_last_running_xacts: usize,
    exported_snapshots_created: u32,
    /// `XLogGetLastRemovedSegno()`: 0 until a checkpoint removes WAL after a start.
    last_removed_segment: u64,
    /// The standby's reported flush position (its physical slot's `restart_lsn`).
    standby_flushed: Lsn,
}

/// A PostgreSQL server (`Pg1` or `Pg2`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Postgres {
    pub node: Node,
    pub config: Fixed<PostgresConfig>,
    pub durable: Durable,
    volatile: Volatile,
}

impl Postgres {
    /// A server whose tables hold `initial_rows` (committed before the run, csn 0).
    pub fn new(
        node: Node,
        role: Role,
        config: Fixed<PostgresConfig>,
        initial_rows: &[(TableId, Key, Row)],
    ) -> Postgres {
        let tables: Vec<Table> = config
            .tables
            .iter()
            .map(|spec| {
                let mut rows = Vec::with_capacity(initial_rows.len());
                rows.extend(
                    initial_rows.iter().filter(|(table, _, _)| *table == spec.id).map(|(_, key, row)| (*key, *row)),
                );
                Table::loaded(spec.id, spec.replica_identity, rows)
            })
            .collect();
        let wal = Wal::new(config.wal_segment_size, config.initial_wal_lsn);
        Postgres {
            node,
            durable: Durable {
                role,
                timeline: 1,
                switch_lsn: None,
                last_checkpoint_lsn: wal.write_lsn(),
                last_checkpoint_redo: wal.write_lsn(),
                in_production: false,
                wal: CopyOnWrite::new(wal),
                tables: CopyOnWrite::new(tables),
                next_xid: 740,
                csn: 0,
                slots: CopyOnWrite::new(BTreeMap::new()),
                publications: CopyOnWrite::new(BTreeMap::new()),
            },
            config,
            volatile: Volatile::default(),
        }
    }

    pub fn is_up(&self) -> bool {
        self.volatile.up
    }

    pub fn is_primary(&self) -> bool {
        self.durable.role == Role::Primary
    }

    pub fn table(&self, table: TableId) -> &Table {
        &self.durable.tables[usize::from(table.0)]
    }

    pub fn slot(&self, name: &str) -> Option<&Slot> {
        self.durable.slots.get(name)
    }

    /// `pg_current_wal_lsn()`.
    pub fn current_wal_lsn(&self) -> Lsn {
        self.durable.wal.write_lsn()
    }

    /// `max_wal_size`, `max_slot_wal_keep_size`, `wal_keep_size` and the segment size.
    fn retention(&self) -> Retention {
        Retention {
            wal_segment_size_bytes: self.config.wal_segment_size,
            max_wal_size_mb: self.config.max_wal_size_mb,
            max_slot_wal_keep_size_mb: self.config.max_slot_wal_keep_size_mb,
            wal_keep_size_mb: self.config.wal_keep_size_mb,
            checkpoint_completion_target_permille: 900,
        }
    }

    /// The minimum `restart_lsn` over valid slots (`XLogGetReplicationSlotMinimumLSN`).
    fn slots_minimum(&self) -> Option<Lsn> {
        self.durable
            .slots
            .values()
            .filter(|slot| !slot.is_invalidated() && slot.current.restart_lsn.is_valid())
            .map(|slot| slot.current.restart_lsn)
            .min()
    }

    /// A row of `pg_replication_slots`, `wal_status` as the view computes it (reference §8).
    fn slot_row(&self, slot: &Slot) -> SlotRow {
        let state = if slot.is_invalidated() {
            WalAvailability::Removed
        } else {
            self.retention().wal_availability(
                slot.current.restart_lsn,
                self.current_wal_lsn(),
                self.slots_minimum(),
                self.volatile.last_removed_segment,
            )
        };
        let state = if state == WalAvailability::Removed && !slot.is_invalidated() && slot.active.is_some() {
            WalAvailability::Unreserved
        } else {
            state
        };
        SlotRow {
            slot_name: slot.name.clone(),
            plugin: slot.plugin.clone(),
            active: slot.active.is_some(),
            restart_lsn: (!slot.is_invalidated()).then_some(slot.current.restart_lsn),
            confirmed_flush_lsn: Some(slot.current.confirmed_flush),
            wal_status: Some(state.as_str().into()),
        }
    }

    // ----- transactions -----

    fn execute(&mut self, ctx: &mut Ctx, ops: &[RowOp]) -> SqlReply {
        if self.durable.role == Role::Standby {
            return SqlReply::Error("ERROR: cannot execute INSERT in a read-only transaction".into());
        }
        // Work out the changes against the current state first: an error aborts everything.
        let mut pending: Vec<(TableId, Key, ChangeKind)> = Vec::new();
        let mut staged: BTreeMap<(TableId, Key), Option<Row>> = BTreeMap::new();
        for op in ops {
            let (table, key) = match *op {
                RowOp::Insert { table, key, .. } | RowOp::Update { table, key, .. } | RowOp::Delete { table, key } => {
                    (table, key)
                }
            };
            let current = match staged.get(&(table, key)) {
                Some(row) => *row,
                None => self.table(table).current(key),
            };
            let identity = self.table(table).replica_identity;
            let kind = match *op {
                RowOp::Insert { status, amount_cents, .. } => {
                    if current.is_some() {
                        let name = &self.config.tables[usize::from(table.0)].name;
                        let relation = name.rsplit('.').next().unwrap_or(name);
                        return SqlReply::Error(format!(
                            "ERROR: duplicate key value violates unique constraint \"{relation}_pkey\" DETAIL: Key \
                             (id)=({key}) already exists."
                        ));
                    }
                    Some(ChangeKind::Insert { after: Row { version: 1, status, amount_cents } })
                }
                RowOp::Update { status, .. } => current.map(|old| ChangeKind::Update {
                    before: (identity == ReplicaIdentity::Full).then_some(old),
                    after: Row { version: old.version + 1, status, ..old },
                }),
                RowOp::Delete { .. } => {
                    current.map(|old| ChangeKind::Delete { before: (identity == ReplicaIdentity::Full).then_some(old) })
                }
            };
            if let Some(kind) = kind {
                staged.insert((table, key), kind.after());
                pending.push((table, key, kind));
            }
        }
        if pending.is_empty() {
            // No row changed: no xid was assigned and nothing is written.
            return SqlReply::NothingChanged { ops: ops.to_vec() };
        }
        let xid = self.durable.next_xid;
        self.durable.next_xid += 1;
        let mut changes = Vec::with_capacity(pending.len());
        let write_before = self.durable.wal.write_lsn();
        let mut first_lsn = None;
        for (table, key, kind) in pending {
            let len = match kind {
                ChangeKind::Insert { after } => record_size::heap_insert(after.tuple_data_bytes()),
                ChangeKind::Update { before, after } => {
                    record_size::heap_update(after.tuple_data_bytes(), before.map(|row| row.tuple_data_bytes()))
                }
                // Without a full replica identity only the 8-byte key is logged.
                ChangeKind::Delete { before } => {
                    record_size::heap_delete(before.map_or(8, |row| row.tuple_data_bytes()))
                }
            };
            let (lsn, _) = self.durable.wal.get_mut().insert_record(len);
            first_lsn.get_or_insert(lsn);
            changes.push(Change { lsn, table, key, kind });
        }
        let (commit_lsn, end_lsn) = self.durable.wal.get_mut().insert_record(record_size::COMMIT);
        self.durable.csn += 1;
        let csn = self.durable.csn;
        for change in &changes {
            self.durable.tables.get_mut()[usize::from(change.table.0)].apply(&change.kind, change.key, csn);
        }
        let txn = CopyOnWrite::new(CommittedTxn {
            xid,
            csn,
            first_lsn: first_lsn.unwrap_or(commit_lsn),
            commit_lsn,
            end_lsn,
            commit_time: ctx.now,
            timeline: self.durable.timeline,
            changes: changes.clone(),
        });
        self.durable.wal.get_mut().push(WalEntry::Txn(txn.clone()));
        ctx.observe(Observation::Committed { server: self.node, txn: crate::core::shared::ByContent(txn) });
        self.after_wal_append(ctx);
        self.after_segments_written(ctx, write_before);
        SqlReply::Committed { xid, commit_lsn, end_lsn, changes }
    }

    /// New WAL exists: walsenders decode it and the standby is sent it.
    fn after_wal_append(&mut self, ctx: &mut Ctx) {
        self.pump_walsenders(ctx);
        if self.config.has_standby && self.durable.role == Role::Primary {
            if self.config.replication_delay_ms == 0 {
                self.ship_wal(ctx);
            } else if !self.volatile.ship_armed {
                // WAL reaches the standby in batches, at most `replication_delay_ms` after it
                // was written.
                self.volatile.ship_armed = true;
                ctx.set_timer(Timer::ShipWal, self.config.replication_delay_ms);
            }
        }
    }

    /// Every walsender decodes what it may.
    fn pump_walsenders(&mut self, ctx: &mut Ctx) {
        let sessions: Vec<(Node, SessionId)> = self
            .volatile
            .sessions
            .iter()
            .filter(|(_, session)| matches!(***session, Session::Replication { walsender: Some(_), .. }))
            .map(|(id, _)| *id)
            .collect();
        for (client, session) in sessions {
            self.pump_walsender(ctx, client, session);
        }
    }

    fn ship_wal(&mut self, ctx: &mut Ctx) {
        let entries = &self.durable.wal.entries;
        if self.volatile.shipped_entries < entries.len() {
            let batch = entries[self.volatile.shipped_entries..].to_vec();
            self.volatile.shipped_entries = entries.len();
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

    /// The slotsync worker (PostgreSQL 17+, reference §12): a remote failover slot whose
    /// `confirmed_flush` this standby has flushed is created here (`synced`) or moved forward to
    /// the remote positions; one ahead of the standby's WAL is skipped; an invalidation is copied.
    fn sync_slots(&mut self, ctx: &mut Ctx, remote: Vec<FailoverSlot>) {
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

    fn write_running_xacts(&mut self, ctx: &mut Ctx) {
        let (start, end) = self.durable.wal.get_mut().insert_record(record_size::RUNNING_XACTS);
        self.durable.wal.get_mut().push(WalEntry::RunningXacts { start, end });
        self.volatile.entries_at_last_running_xacts = self.durable.wal.entries.len();
        self.after_wal_append(ctx);
    }

    /// Whether WAL other than running-xacts records was written since entry `since`.
    fn important_wal_since(&self, since: usize) -> bool {
        self.durable.wal.entries[since.min(self.durable.wal.entries.len())..].iter().any(WalEntry::is_important)
    }

    /// `CreateCheckPoint`: a timed one is skipped when no important WAL was written since the
    /// last one, a forced one (`CHECKPOINT`, promotion, end of crash recovery) always runs; then
    /// a running-xacts record (not at the end of crash recovery: `LogStandbySnapshot` runs for
    /// online checkpoints only), the checkpoint record, the save of every dirty slot, and WAL
    /// retention: the oldest segment to keep (`KeepLogSeg`), the invalidation of every slot
    /// behind it (the walsender of an active one terminated first) and the removal of older
    /// segments (reference §7.1–7.2).
    fn checkpoint(&mut self, ctx: &mut Ctx, kind: CheckpointKind) {
        let since = self.durable.wal.first_entry_at_or_after(self.durable.last_checkpoint_lsn);
        if kind == CheckpointKind::Requested && !self.important_wal_since(since) {
            return;
        }
        let redo = self.durable.wal.insert_lsn();
        if kind != CheckpointKind::EndOfRecovery {
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

    /// `InvalidateObsoleteReplicationSlots(oldest_segment)` (§7.2): every valid slot whose
    /// `restart_lsn` is before the segment is invalidated; an active one's walsender is
    /// terminated first (`FATAL: terminating connection due to administrator command`).
    fn invalidate_obsolete_slots(&mut self, ctx: &mut Ctx, oldest_segment: u64) -> bool {
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
    /// a checkpoint (`CHECKPOINT_CAUSE_XLOG`, §7.3). The model runs it at once.
    fn after_segments_written(&mut self, ctx: &mut Ctx, write_before: Lsn) {
        let retention = self.retention();
        let finished = retention.segment_of(self.durable.wal.write_lsn());
        if finished > retention.segment_of(write_before)
            && retention.checkpoint_needed(self.durable.last_checkpoint_redo, finished - 1)
        {
            self.checkpoint(ctx, CheckpointKind::Requested);
        }
    }

    // ----- replication -----

    fn create_slot(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        name: String,
        plugin: String,
    ) -> ReplReply {
        if self.durable.role == Role::Standby {
            return ReplReply::Error("ERROR: logical decoding cannot be used while in recovery".into());
        }
        if self.durable.slots.contains_key(&name) {
            return ReplReply::Error(format!("ERROR: replication slot \"{name}\" already exists"));
        }
        // ReplicationSlotReserveWal: restart_lsn is the insert pointer, and a running-xacts
        // record is logged right there. With no transaction running, the snapshot builder is
        // consistent at that record; confirmed_flush is its end.
        let restart_lsn = self.durable.wal.insert_lsn();
        let (start, consistent_point) = self.durable.wal.get_mut().insert_record(record_size::RUNNING_XACTS);
        debug_assert_eq!(start, restart_lsn);
        self.durable.wal.get_mut().push(WalEntry::RunningXacts { start, end: consistent_point });
        self.durable
            .slots
            .get_mut()
            .insert(name.clone(), Slot::new(name.clone(), plugin, restart_lsn, consistent_point));
        self.volatile.exported_snapshots_created += 1;
        let snapshot_name = format!(
            "{:08X}-{:08X}-{}",
            self.durable.next_xid % 4096,
            self.durable.csn + 2,
            self.volatile.exported_snapshots_created
        );
        if let Some(Session::Replication { exported_snapshot, .. }) =
            self.volatile.sessions.get_mut(&(client, session)).map(CopyOnWrite::get_mut)
        {
            *exported_snapshot = Some((snapshot_name.clone(), self.durable.csn));
        }
        ctx.observe(Observation::SlotCreated {
            server: self.node,
            slot: name,
            restart_lsn,
            consistent_point,
            snapshot_name: snapshot_name.clone(),
        });
        self.after_wal_append(ctx);
        ReplReply::SlotCreated { consistent_point, snapshot_name }
    }

    fn start_replication(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        slot_name: String,
        requested: Lsn,
        publication: String,
    ) -> Option<ReplReply> {
        if self.durable.role == Role::Standby {
            return Some(ReplReply::Error("ERROR: logical decoding cannot be used while in recovery".into()));
        }
        if !self.durable.publications.contains_key(&publication) {
            return Some(ReplReply::Error(format!("ERROR: publication \"{publication}\" does not exist")));
        }
        let Some(slot) = self.durable.slots.get_mut().get_mut(&slot_name) else {
            return Some(ReplReply::Error(format!("ERROR: replication slot \"{slot_name}\" does not exist")));
        };
        if let Some((holder, _)) = slot.active
            && slot.active != Some((client, session))
        {
            return Some(ReplReply::Error(format!(
                "ERROR: replication slot \"{slot_name}\" is active for PID of {holder}"
            )));
        }
        if slot.is_invalidated() {
            return Some(ReplReply::Error(format!(
                "ERROR: cannot read from logical replication slot \"{slot_name}\" DETAIL: This slot has been \
                 invalidated because it exceeded the maximum reserved size."
            )));
        }
        slot.active = Some((client, session));
        let start = slot.effective_start(requested);
        let restart_lsn = slot.current.restart_lsn;
        ctx.observe(Observation::StreamStarted {
            server: self.node,
            client,
            slot: slot_name.clone(),
            requested,
            confirmed_flush: slot.current.confirmed_flush,
            start,
            restart_lsn,
        });
        // Decoding always reads from restart_lsn.
        let next_entry = self.durable.wal.first_entry_at_or_after(restart_lsn);
        if let Some(Session::Replication { exported_snapshot, walsender }) =
            self.volatile.sessions.get_mut(&(client, session)).map(CopyOnWrite::get_mut)
        {
            // The exported snapshot dies with the session's next command.
            *exported_snapshot = None;
            *walsender = Some(Walsender {
                slot: slot_name,
                start,
                publication,
                next_entry,
                client_flush: Lsn::INVALID,
                keepalive_sent: Lsn::INVALID,
            });
        }
        ctx.send(client, Msg::ReplReply { session, reply: ReplReply::StreamingStarted });
        self.pump_walsender(ctx, client, session);
        None
    }

    /// Decodes WAL for one walsender up to the flush pointer and sends what it emits.
    fn pump_walsender(&mut self, ctx: &mut Ctx, client: Node, session: SessionId) {
        let entries = self.durable.wal.entries.len();
        let Some(shared) = self.volatile.sessions.get_mut(&(client, session)) else { return };
        if !matches!(&**shared, Session::Replication { walsender: Some(walsender), .. } if walsender.next_entry < entries)
        {
            return;
        }
        let Session::Replication { walsender: Some(walsender), .. } = shared.get_mut() else {
            return;
        };
        let entries = &self.durable.wal.entries;
        let published = &self.durable.publications;
        let Some(slot) = self.durable.slots.get(&walsender.slot) else {
            return;
        };
        // `synchronized_standby_slots` (§12): a failover slot's walsender waits for the standby
        // to flush what it would send. Only the original primary lists a standby.
        let wait_for_standby = self.config.synchronized_standby_slots && slot.failover && self.node == Node::Pg1;
        while walsender.next_entry < entries.len() {
            if wait_for_standby && entries[walsender.next_entry].end() > self.volatile.standby_flushed {
                return;
            }
            match &entries[walsender.next_entry] {
                WalEntry::Txn(txn) if txn.commit_lsn >= walsender.start => {
                    let publication = published.get(&walsender.publication).cloned().flatten();
                    let changes: Vec<Change> = txn
                        .changes
                        .iter()
                        .filter(|change| publication.as_ref().is_none_or(|tables| tables.contains(&change.table)))
                        .copied()
                        .collect();
                    if !changes.is_empty() {
                        ctx.send(
                            client,
                            Msg::ReplReply {
                                session,
                                reply: ReplReply::XLogData(DecodedTxn {
                                    xid: txn.xid,
                                    first_lsn: txn.first_lsn,
                                    commit_lsn: txn.commit_lsn,
                                    end_lsn: txn.end_lsn,
                                    commit_time: txn.commit_time,
                                    changes,
                                }),
                            },
                        );
                    }
                }
                WalEntry::RunningXacts { start, .. } => {
                    let slot = self.durable.slots.get_mut().get_mut(&walsender.slot).expect("the slot exists");
                    let result = slot.process_running_xacts(*start);
                    observe_restart_advance(ctx, self.node, slot, result);
                }
                _ => {}
            }
            walsender.next_entry += 1;
        }
        // Caught up (`WalSndWaitForWal`): while the client's reported flush is behind what was
        // sent, a keep-alive carries `sentPtr`, the end of the WAL read, other databases' WAL
        // included (reference §5.1). One per position here.
        let sent = self.durable.wal.write_lsn();
        if self.config.walsender_keepalives && walsender.client_flush < sent && walsender.keepalive_sent < sent {
            walsender.keepalive_sent = sent;
            ctx.send(client, Msg::ReplReply { session, reply: ReplReply::Keepalive { wal_end: sent } });
        }
    }

    fn status_update(&mut self, ctx: &mut Ctx, client: Node, session: SessionId, flush: Lsn) {
        let Some(shared) = self.volatile.sessions.get_mut(&(client, session)) else { return };
        let Session::Replication { walsender: Some(walsender), .. } = &**shared else { return };
        // Tracked only for keep-alives: writing it copies the session, on every status update.
        if self.config.walsender_keepalives
            && walsender.client_flush != flush
            && let Session::Replication { walsender: Some(walsender), .. } = shared.get_mut()
        {
            walsender.client_flush = flush;
        }
        let Session::Replication { walsender: Some(walsender), .. } = &**shared else { return };
        let Some(slot) = self.durable.slots.get_mut().get_mut(&walsender.slot) else {
            return;
        };
        let result = slot.confirm(flush);
        if let Some((from, to)) = result.moved {
            ctx.observe(Observation::SlotConfirmed {
                server: self.node,
                slot: slot.name.clone(),
                from,
                to,
                by: client,
            });
        }
        observe_restart_advance(ctx, self.node, slot, result);
    }

    fn close_session(&mut self, ctx: &mut Ctx, client: Node, session: SessionId) {
        if let Some(removed) = self.volatile.sessions.remove(&(client, session)) {
            match *removed {
                Session::Sql { scan: Some(_) } => ctx.cancel_timer(Timer::ScanBatch { client }),
                Session::Replication { walsender: Some(_), .. } => {
                    let released = |slot: &Slot| slot.active == Some((client, session));
                    if self.durable.slots.values().any(released) {
                        for slot in self.durable.slots.get_mut().values_mut().filter(|slot| released(slot)) {
                            slot.active = None;
                        }
                    }
                }
                _ => {}
            }
        }
    }

    // ----- SQL -----

    fn sql(&mut self, ctx: &mut Ctx, client: Node, session: SessionId, request: SqlRequest) -> Option<SqlReply> {
        // A one-statement transaction keeps nothing in its session (autocommit); other requests
        // open one.
        if !matches!(request, SqlRequest::Transaction { .. }) {
            self.volatile
                .sessions
                .entry((client, session))
                .or_insert_with(|| CopyOnWrite::new(Session::Sql { scan: None }));
        }
        Some(match request {
            SqlRequest::Transaction { ops } => self.execute(ctx, &ops),
            SqlRequest::CurrentWalLsn => {
                if self.durable.role == Role::Standby {
                    SqlReply::Error("ERROR: recovery is in progress".into())
                } else {
                    SqlReply::Lsn(self.current_wal_lsn())
                }
            }
            SqlRequest::SlotInfo { slot } => SqlReply::Slot(self.durable.slots.get(&slot).map(|s| self.slot_row(s))),
            SqlRequest::EnsurePublication { name } => {
                if self.durable.role == Role::Standby {
                    SqlReply::Error("ERROR: cannot execute CREATE PUBLICATION in a read-only transaction".into())
                } else {
                    if !self.durable.publications.contains_key(&name) {
                        self.durable.publications.get_mut().insert(name, None);
                    }
                    SqlReply::Ok
                }
            }
            SqlRequest::DropSlot { slot } => match self.durable.slots.get(&slot) {
                None => SqlReply::Error(format!("ERROR: replication slot \"{slot}\" does not exist")),
                Some(existing) if existing.active.is_some() => {
                    SqlReply::Error(format!("ERROR: replication slot \"{slot}\" is active"))
                }
                Some(_) => {
                    self.durable.slots.get_mut().remove(&slot);
                    ctx.observe(Observation::SlotDropped { server: self.node, slot });
                    SqlReply::Ok
                }
            },
            SqlRequest::CreateSlot { slot, plugin } => match self.create_slot(ctx, client, session, slot, plugin) {
                ReplReply::SlotCreated { consistent_point, .. } => SqlReply::Lsn(consistent_point),
                ReplReply::Error(error) => SqlReply::Error(error),
                _ => SqlReply::Error("ERROR: unexpected".into()),
            },
            SqlRequest::TimelineInfo => SqlReply::Timeline {
                timeline: self.durable.timeline,
                in_recovery: self.durable.role == Role::Standby,
                switch_lsn: self.durable.switch_lsn,
                current_lsn: self.current_wal_lsn(),
            },
            SqlRequest::ScanTable { table, exported_snapshot, fetch_size } => {
                return self.start_scan(ctx, client, session, table, exported_snapshot, fetch_size);
            }
            SqlRequest::Close => {
                self.close_session(ctx, client, session);
                return None;
            }
        })
    }

    fn start_scan(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        table: TableId,
        exported: Option<String>,
        fetch_size: u32,
    ) -> Option<SqlReply> {
        let (snapshot_csn, snapshot) = match exported {
            Some(name) => {
                let found = self.volatile.sessions.iter().find_map(|((owner, _), other)| match &**other {
                    Session::Replication { exported_snapshot: Some((exported, csn)), .. }
                        if *owner == client && *exported == name =>
                    {
                        Some(*csn)
                    }
                    _ => None,
                });
                match found {
                    Some(csn) => (csn, ScanSnapshot::Exported { name }),
                    None => return Some(SqlReply::Error(format!("ERROR: invalid snapshot identifier: \"{name}\""))),
                }
            }
            None => (self.durable.csn, ScanSnapshot::Statement),
        };
        let rows = self.table(table).scan(snapshot_csn);
        ctx.observe(Observation::ScanStarted {
            server: self.node,
            client,
            table,
            snapshot,
            snapshot_csn,
            wal_lsn: self.current_wal_lsn(),
            rows: rows.len(),
        });
        let scan = Scan { table, rows: CopyOnWrite::new(rows), position: 0, fetch_size: fetch_size.max(1) };
        let delay = self.batch_time_ms(&scan);
        self.volatile.sessions.insert((client, session), CopyOnWrite::new(Session::Sql { scan: Some(scan) }));
        ctx.set_timer(Timer::ScanBatch { client }, delay);
        None
    }

    fn batch_time_ms(&self, scan: &Scan) -> u64 {
        batch_time_ms(scan, self.config.scan_rows_per_second)
    }

    fn next_scan_batch(&mut self, ctx: &mut Ctx, client: Node) {
        let found = self.volatile.sessions.iter_mut().find_map(|((owner, session), state)| match &**state {
            Session::Sql { scan: Some(_) } if *owner == client => match state.get_mut() {
                Session::Sql { scan: Some(scan) } => Some((*session, scan)),
                _ => None,
            },
            _ => None,
        });
        let Some((session, scan)) = found else { return };
        let end = (scan.position + scan.fetch_size as usize).min(scan.rows.len());
        let rows = scan.rows[scan.position..end].to_vec();
        scan.position = end;
        let done = end == scan.rows.len();
        let table = scan.table;
        if done {
            // The cursor is exhausted; the session stays open.
            self.volatile.sessions.insert((client, session), CopyOnWrite::new(Session::Sql { scan: None }));
        } else {
            ctx.set_timer(Timer::ScanBatch { client }, batch_time_ms(scan, self.config.scan_rows_per_second));
        }
        ctx.send(client, Msg::SqlReply { session, reply: SqlReply::Rows { table, rows, done } });
    }

    // ----- standby -----

    fn receive_wal(&mut self, ctx: &mut Ctx, entries: Vec<WalEntry>) {
        if self.durable.role != Role::Standby {
            // A promoted server ignores its old primary.
            return;
        }
        for entry in entries {
            if entry.start() < self.durable.wal.write_lsn() {
                continue; // already replayed
            }
            if let WalEntry::Txn(txn) = &entry {
                for change in &txn.changes {
                    self.durable.tables.get_mut()[usize::from(change.table.0)].apply(&change.kind, change.key, txn.csn);
                }
                self.durable.csn = txn.csn;
                self.durable.next_xid = self.durable.next_xid.max(txn.xid + 1);
            }
            self.durable.wal.get_mut().replay(entry);
        }
        // The walreceiver's feedback: flushed up to here. Sent where the primary waits for it
        // (`synchronized_standby_slots`); runs without failover slots stay as they were.
        if self.config.synchronized_standby_slots {
            ctx.send(Node::Pg1, Msg::StandbyFlushed { lsn: self.durable.wal.write_lsn() });
        }
    }

    fn promote(&mut self, ctx: &mut Ctx) {
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

/// A restart candidate was installed: the slot was saved with these positions.
fn observe_restart_advance(ctx: &mut Ctx, server: Node, slot: &Slot, result: slot::Confirmed) {
    if let Some(restart_lsn) = result.restart_advanced_to {
        ctx.observe(Observation::SlotSaved {
            server,
            slot: slot.name.clone(),
            restart_lsn,
            confirmed_flush: slot.saved.confirmed_flush,
        });
    }
}

impl Component for Postgres {
    fn start(&mut self, ctx: &mut Ctx) {
        self.volatile = Volatile {
            up: true,
            shipped_entries: self.durable.wal.entries.len(),
            entries_at_last_running_xacts: self.durable.wal.entries.len(),
            ..Volatile::default()
        };
        // After a crash the standby is sent everything again; it skips what it has.
        if self.config.has_standby && self.durable.role == Role::Primary {
            self.volatile.shipped_entries = 0;
        }
        ctx.observe(Observation::ServerStarted {
            server: self.node,
            role: self.durable.role,
            slots: self.durable.slots.values().map(|slot| (slot.name.clone(), slot.current.confirmed_flush)).collect(),
        });
        // Crash recovery ends with a checkpoint: `StartupXLOG` → `PerformRecoveryXLogAction`
        // calls `RequestCheckpoint(CHECKPOINT_END_OF_RECOVERY | CHECKPOINT_IMMEDIATE |
        // CHECKPOINT_WAIT)` (src/backend/access/transam/xlog.c) before the server accepts
        // connections. Like every checkpoint it keeps WAL from `KeepLogSeg` and invalidates the
        // slots behind that (`InvalidateObsoleteReplicationSlots`): a slot past
        // `max_slot_wal_keep_size` is lost here, before any client can read from it. A standby
        // restarting stays in recovery and makes no such checkpoint.
        let crashed = self.durable.in_production;
        self.durable.in_production = true;
        if crashed && self.durable.role == Role::Primary {
            ctx.observe(Observation::CrashRecoveryEnded { server: self.node });
            self.checkpoint(ctx, CheckpointKind::EndOfRecovery);
        }
        if self.durable.role == Role::Primary {
            ctx.set_timer(Timer::Checkpoint, self.config.checkpoint_timeout_ms);
            if self.config.bgwriter_running_xacts {
                ctx.set_timer(Timer::BgwriterRunningXacts, LOG_SNAPSHOT_INTERVAL_MS);
            }
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx, from: Node, msg: Msg) {
        match msg {
            Msg::Sql { session, request } => {
                if let Some(reply) = self.sql(ctx, from, session, request) {
                    ctx.send(from, Msg::SqlReply { session, reply });
                }
            }
            Msg::Repl { session, request } => {
                self.volatile.sessions.entry((from, session)).or_insert_with(|| {
                    CopyOnWrite::new(Session::Replication { exported_snapshot: None, walsender: None })
                });
                let reply = match request {
                    ReplRequest::CreateSlot { slot, plugin, failover } => {
                        let reply = self.create_slot(ctx, from, session, slot.clone(), plugin);
                        if failover
                            && self.config.major_version >= 17
                            && let Some(created) = self.durable.slots.get_mut().get_mut(&slot)
                        {
                            created.failover = true;
                        }
                        Some(reply)
                    }
                    ReplRequest::StartReplication { slot, start, publication } => {
                        self.start_replication(ctx, from, session, slot, start, publication)
                    }
                    ReplRequest::StatusUpdate { flush } => {
                        self.status_update(ctx, from, session, flush);
                        None
                    }
                    ReplRequest::Close => {
                        self.close_session(ctx, from, session);
                        None
                    }
                };
                if let Some(reply) = reply {
                    ctx.send(from, Msg::ReplReply { session, reply });
                }
            }
            Msg::WalShip { entries } => self.receive_wal(ctx, entries),
            Msg::SlotSync { slots } => self.sync_slots(ctx, slots),
            Msg::StandbyFlushed { lsn }
                if self.durable.role == Role::Primary && lsn > self.volatile.standby_flushed =>
            {
                self.volatile.standby_flushed = lsn;
                self.pump_walsenders(ctx);
            }
            Msg::Control(Control::Promote) => self.promote(ctx),
            Msg::Control(Control::Checkpoint) if self.durable.role == Role::Primary => {
                self.checkpoint(ctx, CheckpointKind::Forced)
            }
            Msg::Control(Control::WalBurst { bytes }) if self.durable.role == Role::Primary => {
                let before = self.durable.wal.write_lsn();
                let (start, end) = self.durable.wal.get_mut().insert_record(bytes);
                self.durable.wal.get_mut().push(WalEntry::OtherDatabase { start, end });
                ctx.observe(Observation::WalWritten { server: self.node, bytes, end });
                self.after_wal_append(ctx);
                self.after_segments_written(ctx, before);
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx, timer: Timer) {
        match timer {
            Timer::ScanBatch { client } => self.next_scan_batch(ctx, client),
            Timer::ShipWal => {
                self.volatile.ship_armed = false;
                self.ship_wal(ctx);
            }
            Timer::BgwriterRunningXacts => {
                if self.important_wal_since(self.volatile.entries_at_last_running_xacts) {
                    self.write_running_xacts(ctx);
                }
                ctx.set_timer(Timer::BgwriterRunningXacts, LOG_SNAPSHOT_INTERVAL_MS);
            }
            Timer::Checkpoint => {
                self.checkpoint(ctx, CheckpointKind::Requested);
                ctx.set_timer(Timer::Checkpoint, self.config.checkpoint_timeout_ms);
            }
            _ => {}
        }
    }

    fn on_connection_lost(&mut self, ctx: &mut Ctx, peer: Node) {
        let sessions: Vec<(Node, SessionId)> =
            self.volatile.sessions.keys().filter(|(client, _)| *client == peer).copied().collect();
        for (client, session) in sessions {
            self.close_session(ctx, client, session);
        }
    }

    fn crash(&mut self) {
        for slot in self.durable.slots.get_mut().values_mut() {
            slot.crash();
        }
        self.volatile = Volatile::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::component::Outbox;
    use crate::core::time::SimTime;

    fn server(cap_mb: Option<u64>) -> Postgres {
        let config = PostgresConfig {
            major_version: 15,
            wal_segment_size: 16 << 20,
            checkpoint_timeout_ms: 300_000,
            max_wal_size_mb: 1024,
            max_slot_wal_keep_size_mb: cap_mb,
            wal_keep_size_mb: 0,
            bgwriter_running_xacts: false,
            walsender_keepalives: true,
            scan_rows_per_second: 1000,
            replication_delay_ms: 0,
            has_standby: false,
            sync_replication_slots: false,
            synchronized_standby_slots: false,
            initial_wal_lsn: Lsn(0x16B_3748),
            tables: Vec::new(),
        };
        let mut pg = Postgres::new(Node::Pg1, Role::Primary, Fixed::new(config), &[]);
        let mut out = Outbox::default();
        pg.start(&mut Ctx::new(SimTime(0), Node::Pg1, &mut out));
        pg
    }

    fn send(pg: &mut Postgres, msg: Msg) -> Outbox {
        let mut out = Outbox::default();
        pg.on_message(&mut Ctx::new(SimTime(1), Node::Pg1, &mut out), Node::Connect, msg);
        out
    }

    fn stream(pg: &mut Postgres, session: SessionId) -> Outbox {
        let repl = |request| Msg::Repl { session, request };
        send(pg, Msg::Sql { session: 100, request: SqlRequest::EnsurePublication { name: "p".into() } });
        send(pg, repl(ReplRequest::StartReplication { slot: "s".into(), start: Lsn::INVALID, publication: "p".into() }))
    }

    /// Issue 16 item 8: a slot past the cap but not yet invalidated (no checkpoint since the
    /// burst) is lost at the checkpoint that ends crash recovery, before any client can read
    /// from it; the first start of a server makes no such checkpoint.
    #[test]
    fn crash_recovery_ends_with_a_checkpoint_that_invalidates_a_slot_past_the_cap() {
        let mut pg = server(Some(64));
        send(
            &mut pg,
            Msg::Repl {
                session: 1,
                request: ReplRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), failover: false },
            },
        );
        // 256MB: past the 64MB cap, too little for a volume checkpoint (33 segments).
        let out = send(&mut pg, Msg::Control(Control::WalBurst { bytes: 256 << 20 }));
        assert!(out.observations.iter().all(|o| !matches!(o, Observation::Checkpoint { .. })), "no checkpoint yet");
        let row = pg.slot_row(pg.slot("s").expect("slot"));
        assert_eq!(row.wal_status.as_deref(), Some("unreserved"));

        pg.crash();
        let mut out = Outbox::default();
        pg.start(&mut Ctx::new(SimTime(2), Node::Pg1, &mut out));
        let ended = out.observations.iter().position(|o| matches!(o, Observation::CrashRecoveryEnded { .. }));
        let checkpoint = out.observations.iter().position(|o| matches!(o, Observation::Checkpoint { .. }));
        assert!(ended.is_some() && checkpoint > ended, "{:?}", out.observations);
        let invalidated = out.observations.iter().position(
            |o| matches!(o, Observation::SlotInvalidated { slot, walsender_terminated: false, .. } if slot == "s"),
        );
        assert!(checkpoint.is_some() && invalidated > checkpoint, "{:?}", out.observations);
        let row = pg.slot_row(pg.slot("s").expect("slot"));
        assert_eq!((row.wal_status.as_deref(), row.restart_lsn), (Some("lost"), None));

        // A fresh server's first start is no recovery: no checkpoint.
        let mut fresh = server(Some(64));
        let mut out = Outbox::default();
        fresh.crash();
        fresh.durable.in_production = false;
        fresh.start(&mut Ctx::new(SimTime(3), Node::Pg1, &mut out));
        assert!(out.observations.iter().all(|o| !matches!(o, Observation::Checkpoint { .. })));
    }

    /// Reference §7.2–7.3: a burst past `max_wal_size` runs a checkpoint; the cap invalidates
    /// the active slot behind it, its walsender terminated first; it is lost for good.
    #[test]
    fn a_burst_past_the_cap_invalidates_an_active_slot_at_its_checkpoint() {
        let mut pg = server(Some(1024));
        send(
            &mut pg,
            Msg::Repl {
                session: 1,
                request: ReplRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), failover: false },
            },
        );
        stream(&mut pg, 1);
        let row = pg.slot_row(pg.slot("s").expect("slot"));
        assert_eq!((row.wal_status.as_deref(), row.active), (Some("reserved"), true));

        let out = send(&mut pg, Msg::Control(Control::WalBurst { bytes: 1 << 30 }));
        assert!(out.observations.iter().all(|o| !matches!(o, Observation::SlotInvalidated { .. })), "within the cap");
        let out = send(&mut pg, Msg::Control(Control::WalBurst { bytes: 1 << 30 }));
        assert!(out.observations.iter().any(|o| matches!(o, Observation::Checkpoint { .. })), "a volume checkpoint");
        assert!(out.observations.iter().any(
            |o| matches!(o, Observation::SlotInvalidated { walsender_terminated: true, slot, .. } if slot == "s")
        ));
        assert!(out.sends.iter().any(|(to, msg)| *to == Node::Connect
            && matches!(msg, Msg::ReplReply { reply: ReplReply::Error(text), .. } if text.contains("administrator command"))));
        let row = pg.slot_row(pg.slot("s").expect("an invalidated slot stays"));
        assert_eq!((row.wal_status.as_deref(), row.restart_lsn, row.active), (Some("lost"), None, false));

        let out = stream(&mut pg, 2);
        assert!(out.sends.iter().any(|(_, msg)| matches!(msg,
            Msg::ReplReply { reply: ReplReply::Error(text), .. } if text.contains("cannot read from logical replication slot"))));
        pg.crash();
        let mut out = Outbox::default();
        pg.start(&mut Ctx::new(SimTime(2), Node::Pg1, &mut out));
        assert_eq!(pg.slot_row(pg.slot("s").expect("slot")).wal_status.as_deref(), Some("lost"), "permanent");
    }

    #[test]
    fn without_a_cap_a_slot_holds_any_amount_of_wal() {
        let mut pg = server(None);
        send(
            &mut pg,
            Msg::Repl {
                session: 1,
                request: ReplRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), failover: false },
            },
        );
        let out = send(&mut pg, Msg::Control(Control::WalBurst { bytes: 4 << 30 }));
        assert!(out.observations.iter().any(|o| matches!(o, Observation::Checkpoint { .. })));
        let row = pg.slot_row(pg.slot("s").expect("slot"));
        assert_eq!(row.wal_status.as_deref(), Some("extended"), "4GB behind, more than max_wal_size + 1 segment");
        assert!(row.restart_lsn.is_some());
    }

    /// Reference §12: with `synchronized_standby_slots`, a failover slot's walsender sends a
    /// transaction only once the standby has flushed it.
    #[test]
    fn a_failover_slot_waits_for_the_standby_with_synchronized_standby_slots() {
        let config = PostgresConfig {
            major_version: 17,
            has_standby: true,
            replication_delay_ms: 5_000,
            synchronized_standby_slots: true,
            tables: vec![TableSpec {
                id: TableId(0),
                name: "public.claims".into(),
                replica_identity: ReplicaIdentity::Full,
            }],
            ..(*server(None).config).clone()
        };
        let mut pg = Postgres::new(Node::Pg1, Role::Primary, Fixed::new(config), &[]);
        let mut out = Outbox::default();
        pg.start(&mut Ctx::new(SimTime(0), Node::Pg1, &mut out));
        let create = ReplRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), failover: true };
        send(&mut pg, Msg::Repl { session: 1, request: create });
        assert!(pg.slot("s").expect("slot").failover);
        stream(&mut pg, 1);
        let insert =
            RowOp::Insert { table: TableId(0), key: 7, status: crate::core::ids::Status::Submitted, amount_cents: 1 };
        let out = send(&mut pg, Msg::Sql { session: 2, request: SqlRequest::Transaction { ops: vec![insert] } });
        let streamed = |out: &Outbox| {
            out.sends.iter().any(|(to, msg)| {
                *to == Node::Connect && matches!(msg, Msg::ReplReply { reply: ReplReply::XLogData(_), .. })
            })
        };
        assert!(!streamed(&out), "the standby has not flushed it yet");
        let flushed = pg.current_wal_lsn();
        let out = send(&mut pg, Msg::StandbyFlushed { lsn: flushed });
        assert!(streamed(&out), "sent once the standby has it");
    }
}
