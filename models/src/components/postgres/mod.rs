//! A PostgreSQL server: WAL, transactions and MVCC, tables, publications, logical slots and
//! walsenders, the SQL slot functions, checkpoints and WAL retention, crash, clean shutdown and
//! restart, a streaming standby and its promotion. PostgreSQL 15 unless a version is named.
//!
//! The parts, by file:
//! - [`wal`]: LSNs with the real page layout and record sizes (`XLogInsertRecord`,
//!   `src/backend/access/transam/xlog.c`), and the decoded entries a reader needs.
//! - [`slot`]: how `confirmed_flush` and `restart_lsn` move and what survives a crash
//!   (`LogicalConfirmReceivedLocation`, `LogicalIncreaseRestartDecodingForSlot`,
//!   `src/backend/replication/logical/logical.c`; `SaveSlotToPath`, `slot.c`).
//! - [`retention`]: `KeepLogSeg`, `wal_status` and `safe_wal_size` (`xlog.c`, `slotfuncs.c`).
//! - `sql`: autocommit transactions (one step each, one [`WalEntry::Txn`]), snapshot scans, the
//!   SQL requests.
//! - `xact`: transaction blocks in sessions (`BEGIN`, statements, `COMMIT`, `ROLLBACK`): lazy
//!   xids, one WAL record per changed row written at statement time, row locks and their waits,
//!   the commit record then, a step later, visibility; the proc array (running xids) that
//!   running-xacts records list (`xact.c`, `procarray.c`).
//! - `decode`: the reorder buffer and what pgoutput emits for a slot: whole transactions of the
//!   slot's database, in commit order, whose commit record starts at or after
//!   `max(start, confirmed_flush)`, only their published changes, nothing for a transaction
//!   without any (PostgreSQL ≥ 15 sends no empty transactions); logical messages; the
//!   `restart_lsn` and `catalog_xmin` candidates of each running-xacts record.
//! - `functions`: `pg_logical_slot_get_changes` / `peek_changes`, `pg_replication_slot_advance`,
//!   `pg_replication_slots`, `pg_logical_emit_message`, `pg_switch_wal`.
//! - [`snapbuild`]: the snapshot builder of a slot being created (`snapbuild.c`): the phases to
//!   the consistent point, the transactions each one waits for, the exported snapshot.
//! - [`snapshot`]: MVCC snapshots as `pg_current_snapshot()` prints them (`GetSnapshotData`) and
//!   as the tables are read (the commits they see); `SET TRANSACTION SNAPSHOT`.
//! - `creation`: slot creation (`restart_lsn` at the insert pointer, a running-xacts record
//!   there, the creating session waiting while transactions it must outlive run, a record after
//!   each wait, `confirmed_flush` at the end of the consistent one, an exported snapshot valid
//!   until the creating session's next command: `ReplicationSlotReserveWal`, `slot.c`;
//!   `DecodingContextFindStartpoint`, `logical.c`).
//! - `walsender`: `START_REPLICATION` (reading from `restart_lsn`, a start below
//!   `confirmed_flush` forwarded to it: `CreateDecodingContext`), keep-alives carrying the end of
//!   the WAL read while the client's reported flush is behind it (`WalSndWaitForWal`,
//!   `walsender.c`; sent only where the consumer acts on them: Debezium's
//!   `connector_and_driver`), status updates.
//! - `checkpoint`: timed, requested (`CHECKPOINT`, WAL volume: finishing a segment
//!   `max_wal_size / 1.9` segments past the last redo runs one at once), end-of-recovery and
//!   shutdown checkpoints (`CreateCheckPoint`, `xlog.c`): a running-xacts record (online ones
//!   only), the checkpoint record, the save of dirty slots, then WAL retention — the oldest
//!   segment to keep (`KeepLogSeg`: the slots' minimum `restart_lsn`, capped by
//!   `max_slot_wal_keep_size`, raised to `wal_keep_size`), the invalidation of every slot behind
//!   it, an active slot's walsender terminated first (`InvalidateObsoleteReplicationSlots`,
//!   `slot.c`); the background writer's running-xacts record every 15 s while important WAL is
//!   written (`BackgroundWriterMain`, `src/backend/postmaster/bgwriter.c`); the clean shutdown.
//! - `standby`: a standby receives the primary's WAL in batches at most `replication_delay_ms`
//!   late and replays it with the primary's positions; promotion ends recovery on a new
//!   timeline. On PostgreSQL ≤ 16 a standby has no logical slots; 17's failover slots: the
//!   standby's slotsync worker (`sync_replication_slots`, `src/backend/replication/logical/
//!   slotsync.c`) copies the primary's failover slots with every WAL shipment, forward only and
//!   only to positions the standby has flushed, an invalidation included; with
//!   `synchronized_standby_slots` the original primary's walsender for a failover slot sends
//!   nothing the standby has not reported flushed.
//!
//! `handoff conform` drives this component through its messages against a real PostgreSQL 15
//! (the workloads in `conform/`), step by step, and finds no disagreement.
//!
//! Left out (another issue makes them exact): the background writer's running-xacts record
//! 15 s after every start whatever was written (its first tick here writes one only after
//! important WAL), the slotsync worker's own polling interval (200 ms to 30 s) and its
//! "sync-ready" wait, the 17 shutdown save of `confirmed_flush`, the decoding check that a SQL
//! session is in the slot's database, `idle_replication_slot_timeout` (18).

mod checkpoint;
mod creation;
mod decode;
mod functions;
mod idle;
pub mod retention;
pub mod slot;
pub mod snapbuild;
pub mod snapshot;
mod sql;
mod standby;
pub mod table;
pub mod wal;
mod walsender;
mod xact;

use crate::core::change::{Change, ChangeKind, ReplicaIdentity, RowOp};
use crate::core::component::{Component, Ctx, Timer};
use crate::core::ids::{Csn, Key, MessageContent, Node, Role, Row, TableId, Xid};
use crate::core::lsn::Lsn;
use crate::core::observe::{Observation, ScanSnapshot};
use crate::core::protocol::{
    Control, DecodedTxn, FailoverSlot, Msg, ReplReply, ReplRequest, ReplicationSlotRow, SessionId, SlotRow, SqlReply,
    SqlRequest,
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

/// `wal_writer_delay` (its default): how long the WAL writer sleeps between flushes.
pub const WAL_WRITER_DELAY_MS: u64 = 200;

/// A scenario's `[postgres]` section: the cluster's settings as the scenario gives them. Names are
/// PostgreSQL's. A server's [`PostgresConfig`] is these plus what the run adds: the tables, where
/// the WAL starts, the switches a lens turns off, and the standby seen from one server.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PostgresSection {
    /// Major version (15–18).
    pub major_version: u32,
    /// `initdb --wal-segsize`, in bytes.
    pub wal_segment_size: u64,
    /// `checkpoint_timeout`.
    pub checkpoint_timeout_ms: u64,
    /// `max_wal_size`, `max_slot_wal_keep_size` (`None`: -1) and `wal_keep_size`, in MB.
    pub max_wal_size_mb: u64,
    pub max_slot_wal_keep_size_mb: Option<u64>,
    pub wal_keep_size_mb: u64,
    /// Testbed knob: how fast a snapshot `SELECT` returns rows.
    pub scan_rows_per_second: u64,
    /// `Some(replication_delay_ms)` when there is a standby (`[postgres.standby]`).
    pub standby: Option<u64>,
    /// PostgreSQL 17+: the standby's `sync_replication_slots`, and whether the primary's
    /// `synchronized_standby_slots` lists the standby's physical slot.
    pub sync_replication_slots: bool,
    pub synchronized_standby_slots: bool,
    /// `idle_in_transaction_session_timeout` (0: off, PostgreSQL's default).
    pub idle_in_transaction_session_timeout_ms: u64,
    /// `wal_sender_timeout` (default 60 s; 0: off): a walsender whose client has not replied
    /// for this long ends. The model's clients reply as pgjdbc does (a status update every
    /// `status.update.interval.ms`, 10 s, and at once to a keep-alive asking for one), so only
    /// a client that is paused or cut off from the server stays silent that long; the lenses
    /// end such a walsender ([`Control::WalSenderTimeout`]) rather than exchanging the replies.
    #[serde(default = "default_wal_sender_timeout_ms")]
    pub wal_sender_timeout_ms: u64,
    /// Publications that exist before the run (`[[publication]]`: `CREATE PUBLICATION name FOR
    /// TABLE …`, run by a DBA), by name, with their tables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub publications: Vec<(String, Vec<TableId>)>,
}

/// `wal_sender_timeout`'s default (`guc_tables.c`: 60 s).
pub const WAL_SENDER_TIMEOUT_MS: u64 = 60_000;

fn default_wal_sender_timeout_ms() -> u64 {
    WAL_SENDER_TIMEOUT_MS
}

impl PostgresSection {
    /// PostgreSQL 15 with its default settings (16MB segments, `checkpoint_timeout=5min`,
    /// `max_wal_size=1GB`, no slot cap, no standby, no idle timeout) and snapshot scans of 1,000
    /// rows a second: the small server of the models' tests and of the minimal spec.
    pub fn minimal() -> PostgresSection {
        PostgresSection {
            major_version: 15,
            wal_segment_size: 16 << 20,
            checkpoint_timeout_ms: 300_000,
            max_wal_size_mb: 1024,
            max_slot_wal_keep_size_mb: None,
            wal_keep_size_mb: 0,
            scan_rows_per_second: 1000,
            standby: None,
            sync_replication_slots: false,
            synchronized_standby_slots: false,
            idle_in_transaction_session_timeout_ms: 0,
            wal_sender_timeout_ms: WAL_SENDER_TIMEOUT_MS,
            publications: Vec::new(),
        }
    }
}

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
    /// `idle_in_transaction_session_timeout` in ms (0: off): a session idle in a transaction
    /// block this long is terminated, and its transaction aborted.
    pub idle_in_transaction_session_timeout_ms: u64,
    /// `wal_sender_timeout` in ms (0: off); see [`PostgresSection::wal_sender_timeout_ms`].
    pub wal_sender_timeout_ms: u64,
    /// See [`PostgresSection::publications`].
    pub publications: Vec<(String, Vec<TableId>)>,
}

/// What a run adds to the scenario's `[postgres]` settings to make a server's configuration.
#[derive(Clone, Debug)]
pub struct ServerRun {
    /// See [`PostgresConfig::bgwriter_running_xacts`].
    pub bgwriter_running_xacts: bool,
    /// See [`PostgresConfig::walsender_keepalives`].
    pub walsender_keepalives: bool,
    pub initial_wal_lsn: Lsn,
    pub tables: Vec<TableSpec>,
}

impl PostgresConfig {
    /// A server's configuration: the scenario's settings plus what the run adds (the standby as
    /// one server sees it: whether there is one, and how late WAL reaches it).
    pub fn new(section: &PostgresSection, run: ServerRun) -> PostgresConfig {
        PostgresConfig {
            major_version: section.major_version,
            wal_segment_size: section.wal_segment_size,
            checkpoint_timeout_ms: section.checkpoint_timeout_ms,
            max_wal_size_mb: section.max_wal_size_mb,
            max_slot_wal_keep_size_mb: section.max_slot_wal_keep_size_mb,
            wal_keep_size_mb: section.wal_keep_size_mb,
            bgwriter_running_xacts: run.bgwriter_running_xacts,
            walsender_keepalives: run.walsender_keepalives,
            scan_rows_per_second: section.scan_rows_per_second,
            replication_delay_ms: section.standby.unwrap_or(0),
            has_standby: section.standby.is_some(),
            sync_replication_slots: section.sync_replication_slots,
            synchronized_standby_slots: section.synchronized_standby_slots,
            initial_wal_lsn: run.initial_wal_lsn,
            tables: run.tables,
            idle_in_transaction_session_timeout_ms: section.idle_in_transaction_session_timeout_ms,
            wal_sender_timeout_ms: section.wal_sender_timeout_ms,
            publications: section.publications.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TableSpec {
    pub id: TableId,
    /// Schema-qualified name, e.g. `public.claims`.
    pub name: String,
    pub replica_identity: ReplicaIdentity,
    /// The database the table is in; `None` is the server's main database. A transaction is in
    /// its tables' database, and a slot decodes only its own database's transactions.
    #[serde(default)]
    pub database: Option<String>,
    /// Its two-column primary key ([`crate::core::ids::CompositeKey`]); `None`: `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composite_key: Option<crate::core::ids::CompositeKey>,
    /// A nullable column with a unique index `NULLS NOT DISTINCT`
    /// ([`crate::core::ids::UniqueColumn`]); `None`: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_column: Option<crate::core::ids::UniqueColumn>,
}

/// What survives a crash: WAL (flushed at every commit), the tables it recovers to, slot files,
/// catalogs.
/// A publication and its membership over the WAL: `None` for `FOR ALL TABLES`, or its table
/// list, each from the WAL position at which it was set. pgoutput decides whether a change is
/// published with the catalog as of the change's transaction (the historic snapshot decoding
/// replays under, `get_rel_sync_entry` → `GetRelationPublications`), not with today's catalog: an
/// `ALTER PUBLICATION … SET TABLE` publishes a table's changes committed after it, never those
/// before, even when a slot decodes them after the `ALTER` ran.
///
/// Simplifications: the `ALTER` writes no WAL of its own here (its catalog transaction's commit
/// record is not modelled); a set membership takes effect for the transactions that commit at or
/// after the insert position at which it ran. PostgreSQL before 15.13 could decode a transaction
/// that was in progress across a weak-lock DDL such as `ALTER PUBLICATION` with the stale catalog
/// (release-15.sgml, 15.13, "Avoid data loss when DDL operations that don't take a strong lock
/// …"); not modelled. A transaction from before the publication existed is decoded with its first
/// membership (PostgreSQL ≤ 17 fails such a decode with "publication … does not exist"; Debezium
/// creates its publication before its slot, so it does not meet it).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Publication {
    /// `(from, membership)` in WAL order; the last is today's.
    versions: Vec<(Lsn, Option<BTreeSet<TableId>>)>,
}

impl Publication {
    /// `CREATE PUBLICATION`. Its first membership decodes every transaction before the first
    /// `SET` (those before the creation too, as above), so where it was created is not kept: two
    /// servers that differ only by it are the same state to the exhaustive lens.
    pub fn created(tables: Option<BTreeSet<TableId>>) -> Publication {
        Publication { versions: vec![(Lsn::INVALID, tables)] }
    }

    /// Today's membership.
    pub fn current(&self) -> Option<&BTreeSet<TableId>> {
        self.versions.last().and_then(|(_, tables)| tables.as_ref())
    }

    /// `ALTER PUBLICATION … SET TABLE` at `at` (the insert position then), when it changes the
    /// membership.
    pub fn set(&mut self, at: Lsn, tables: BTreeSet<TableId>) {
        if self.versions.last().is_some_and(|(_, current)| current.as_ref() != Some(&tables)) {
            self.versions.push((at, Some(tables)));
        }
    }

    /// Whether a change of `table` in the transaction that commits at `commit_lsn` is published.
    pub fn publishes(&self, table: TableId, commit_lsn: Lsn) -> bool {
        let version = self.versions.iter().rev().find(|(from, _)| *from <= commit_lsn);
        version.is_none_or(|(_, tables)| tables.as_ref().is_none_or(|tables| tables.contains(&table)))
    }
}

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
    /// Publications by name, each with its membership over the WAL ([`Publication`]).
    pub publications: CopyOnWrite<BTreeMap<String, Publication>>,
    /// Checkpoint bookkeeping: the WAL position of the last checkpoint record.
    pub last_checkpoint_lsn: Lsn,
    /// The last checkpoint's redo pointer (WAL-volume checkpoints count segments from it).
    pub last_checkpoint_redo: Lsn,
    /// The control file's state says the server is running (`DB_IN_PRODUCTION`): set at start,
    /// cleared only by a clean shutdown ([`Control::Shutdown`]), never by a crash, so a start
    /// that finds it set is a start after a crash, and the server goes through crash recovery
    /// (`StartupXLOG`).
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
    /// pgoutput's `messages` option.
    messages: bool,
    /// Where decoding began reading (the slot's `restart_lsn` at `START_REPLICATION`).
    read_from: Lsn,
    /// The open transactions decoded so far.
    buffer: decode::ReorderBuffer,
    /// Next WAL entry to decode.
    next_entry: usize,
    /// The flush position the client last reported (`MyWalSnd->flush`).
    client_flush: Lsn,
    /// The `walEnd` of the last keep-alive sent.
    keepalive_sent: Lsn,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Session {
    /// A SQL session: its cursor, its transaction block, the statement waiting for a row lock.
    Sql {
        scan: Option<Scan>,
        block: Option<Box<xact::Block>>,
        parked: Option<Box<xact::Parked>>,
    },
    Replication {
        exported_snapshot: Option<snapshot::Exported>,
        walsender: Option<Walsender>,
    },
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
    /// At a clean shutdown (`CHECKPOINT_IS_SHUTDOWN`): never skipped, without a running-xacts
    /// record.
    Shutdown,
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
    /// How many sessions have a transaction block open.
    open_blocks: usize,
    /// Row locks of open transactions (and of committed ones not yet visible): row → xid.
    row_locks: BTreeMap<(TableId, Key), Xid>,
    /// Sessions whose statement waits for a row lock, in the order they began waiting.
    lock_waits: Vec<(Node, SessionId)>,
    /// Blocks whose commit record is written, not yet visible, in commit order.
    committing: Vec<xact::Committing>,
    /// The WAL writer's flush is pending.
    wal_writer_armed: bool,
    /// Slots being created whose decoder waits for transactions to end, by name.
    creating: BTreeMap<String, creation::Creating>,
    /// Sessions idle in a transaction block, with the time `idle_in_transaction_session_timeout`
    /// ends them (only with the timeout on).
    idle_in_transaction: BTreeMap<(Node, SessionId), u64>,
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
                publications: CopyOnWrite::new(
                    config
                        .publications
                        .iter()
                        .map(|(name, tables)| {
                            (name.clone(), Publication::created(Some(tables.iter().copied().collect())))
                        })
                        .collect(),
                ),
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

    /// The end of the last committed transaction that changed one of `tables`: what a consumer of
    /// those tables must have processed to have caught up.
    pub fn last_commit_touching(&self, tables: &[TableId]) -> Option<Lsn> {
        self.durable.wal.entries.iter().rev().find_map(|entry| {
            entry.committed().filter(|txn| txn.changes.iter().any(|c| tables.contains(&c.table))).map(|txn| txn.end_lsn)
        })
    }

    /// The end of the last captured event in this server's WAL: a commit touching one of
    /// `tables`, or a logical message of the main database whose prefix `captures_message`
    /// takes (non-transactional: its record's end; transactional: its transaction's commit end,
    /// once committed). What a connector must have processed to be caught up. Scans back only
    /// to the last captured commit, as [`Postgres::last_commit_touching`] does.
    pub fn last_captured_event(&self, tables: &[TableId], captures_message: impl Fn(&str) -> bool) -> Option<Lsn> {
        let entries = &self.durable.wal.entries;
        entries.iter().enumerate().rev().find_map(|(index, entry)| match entry {
            WalEntry::Message(message) if message.database.is_none() && captures_message(&message.prefix) => {
                if !message.transactional {
                    return Some(message.end);
                }
                // Decoded at its transaction's commit, if that comes.
                entries[index + 1..].iter().find_map(|later| {
                    later.committed().filter(|txn| Some(txn.xid) == message.xid).map(|txn| txn.end_lsn)
                })
            }
            _ => entry
                .committed()
                .filter(|txn| txn.changes.iter().any(|c| tables.contains(&c.table)))
                .map(|txn| txn.end_lsn),
        })
    }

    /// `pg_current_wal_lsn()`: the write pointer, which is the flush pointer here (records not
    /// flushed are not written either).
    pub fn current_wal_lsn(&self) -> Lsn {
        self.durable.wal.flush_lsn()
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
        let created = self
            .durable
            .slots
            .values()
            .filter(|slot| !slot.is_invalidated() && slot.current.restart_lsn.is_valid())
            .map(|slot| slot.current.restart_lsn);
        // A slot being created has reserved its WAL too.
        let creating = self.volatile.creating.values().map(|creating| creating.creation.restart_lsn);
        created.chain(creating).min()
    }

    /// A slot's `wal_status` as `pg_get_replication_slots` computes it (`pg_get_replication_slots`): `lost`
    /// once invalidated; a removed segment under a live walsender shows as `unreserved`.
    fn wal_status(&self, slot: &Slot) -> WalAvailability {
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
        if state == WalAvailability::Removed && !slot.is_invalidated() && slot.active.is_some() {
            WalAvailability::Unreserved
        } else {
            state
        }
    }

    /// `SELECT * FROM pg_replication_slots`: every slot (and one being created), by name, as
    /// the view computes its columns (`pg_get_replication_slots`, `slotfuncs.c`). It changes
    /// nothing: the timed lens samples it for the report's positions.
    pub fn pg_replication_slots(&self) -> Vec<ReplicationSlotRow> {
        self.replication_slots()
    }

    /// A row of `pg_replication_slots`, `wal_status` as the view computes it.
    fn slot_row(&self, slot: &Slot) -> SlotRow {
        let state = self.wal_status(slot);
        SlotRow {
            slot_name: slot.name.clone(),
            plugin: slot.plugin.clone(),
            active: slot.active.is_some(),
            restart_lsn: (!slot.is_invalidated()).then_some(slot.current.restart_lsn),
            confirmed_flush_lsn: Some(slot.current.confirmed_flush),
            wal_status: Some(state.as_str().into()),
        }
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
                let idle_timeout = self.config.idle_in_transaction_session_timeout_ms > 0;
                if idle_timeout {
                    // A message from the client cancels the session's idle timer.
                    self.volatile.idle_in_transaction.remove(&(from, session));
                }
                if let Some(reply) = self.sql(ctx, from, session, request) {
                    ctx.send(from, Msg::SqlReply { session, reply });
                    if idle_timeout {
                        self.idle_in_transaction_from(ctx, from, session);
                    }
                }
            }
            Msg::Repl { session, request } => {
                self.volatile.sessions.entry((from, session)).or_insert_with(|| {
                    CopyOnWrite::new(Session::Replication { exported_snapshot: None, walsender: None })
                });
                let reply = match request {
                    ReplRequest::CreateSlot { slot, plugin, failover } => {
                        let via = creation::CreateVia::Replication { failover };
                        self.create_slot(ctx, from, session, slot, plugin, None, via)
                    }
                    ReplRequest::StartReplication { slot, start, publication, messages } => self.start_replication(
                        ctx,
                        from,
                        session,
                        slot,
                        start,
                        walsender::Output { publication, messages },
                    ),
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
            Msg::Control(Control::Shutdown) => self.shutdown(ctx),
            Msg::Control(Control::WalSenderTimeout { client }) => self.wal_sender_timeout(ctx, client),
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
            Timer::CommitVisible => self.commits_visible(ctx),
            Timer::WalWriter => self.wal_writer(ctx),
            Timer::IdleInTransactionTimeout => self.idle_in_transaction_timeout(ctx),
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
        // What was not flushed is lost.
        if self.durable.wal.flush_lsn() < self.durable.wal.write_lsn() {
            self.durable.wal.get_mut().lose_unflushed();
        }
        for slot in self.durable.slots.get_mut().values_mut() {
            slot.crash();
        }
        self.volatile = Volatile::default();
    }
}

#[cfg(test)]
mod creation_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod xact_tests;
