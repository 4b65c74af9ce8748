//! The model's side of a conformance run: one PostgreSQL 15 primary, driven step by step.
//!
//! It is built from the same parts the timed simulation's server uses — [`Wal`] for positions
//! with the real page layout, [`Slot`] for how `confirmed_flush` and `restart_lsn` move and what
//! a restart keeps, [`Retention`] for `KeepLogSeg`, `wal_status` and `safe_wal_size` — plus the
//! server's timers and checkpoints, following `reference/postgres-slots.md`:
//!
//! - §3.1 creation: `restart_lsn` at the insert pointer, a running-xacts record (RX) there,
//!   `confirmed_flush` at its end; saved at once.
//! - §4.1–4.2 decoding reads from `restart_lsn` and emits whole transactions of the slot's
//!   database with published changes whose commit starts at or after `max(start,
//!   confirmed_flush)`; `get` confirms the end of what it read and marks the slot dirty; `peek`
//!   confirms nothing; both run the snapshot builder, so both can move `restart_lsn` through RXs
//!   already confirmed.
//! - §5.1 a stream's consumer confirms commits, keep-alives by pgjdbc's rule (debezium reference
//!   §5.5), or nothing; the walsender sends a keep-alive carrying the end of what it read when it
//!   has caught up.
//! - §5.2 `restart_lsn` moves only to RXs, one candidate pending at a time; §5.3 advance.
//! - §6 durability: feedback alone never dirties a slot; dirty slots are saved at checkpoints; a
//!   restart brings back the saved positions (PostgreSQL 15: even after a clean shutdown).
//! - §7.1–7.3 checkpoints by hand, by `checkpoint_timeout` (skipped when no important WAL was
//!   written since the last) and by WAL volume (`CheckPointSegments`); WAL removal and slot
//!   invalidation only there; the walsender of an active slot terminated first.
//! - §5.2 the background writer's RX: 15 s after its last one, if important WAL was written
//!   since its last one (and always once, 15 s after startup).
//! - §8 the view's `wal_status` and `safe_wal_size`.
//!
//! Transactions are atomic here (a step commits what it begins), so no RX ever lists a running
//! transaction. WAL sizes follow the records the server writes for each step (a transactional
//! logical message for `write`; heap, index and commit records for a transaction), without full
//! page images: a few kilobytes per checkpoint cycle, which the workloads keep away from segment
//! boundaries.

use super::observe::{ErrorClass, Outcome, ServerView, SlotRow};
use super::workload::{Confirm, Position, RestartMode, ServerSettings, Step};
use crate::components::postgres::LOG_SNAPSHOT_INTERVAL_MS;
use crate::components::postgres::retention::{Retention, WalAvailability};
use crate::components::postgres::slot::Slot;
use crate::components::postgres::wal::{Wal, record_size};
use crate::core::lsn::Lsn;
use std::collections::BTreeMap;

/// A decoded WAL record, as far as decoding and retention care.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Record {
    Txn {
        name: String,
        database: String,
        commit: Lsn,
        end: Lsn,
        published: bool,
        start: Lsn,
    },
    RunningXacts {
        start: Lsn,
    },
    /// Everything else (messages, checkpoints, switches): read and passed over.
    Other {
        start: Lsn,
    },
}

impl Record {
    fn start(&self) -> Lsn {
        match self {
            Record::Txn { start, .. } | Record::RunningXacts { start } | Record::Other { start } => *start,
        }
    }
}

#[derive(Clone, Debug)]
struct ModelSlot {
    slot: Slot,
    database: String,
}

/// An open `START_REPLICATION` session.
#[derive(Clone, Debug)]
struct Stream {
    confirm: Confirm,
    /// Commits before this are skipped.
    start: Lsn,
    /// The next record the walsender reads.
    next_record: usize,
    delivered: Vec<String>,
    /// The last explicitly confirmed LSN and the start of the last data message (pgjdbc's
    /// keep-alive rule).
    explicit_flush: Lsn,
    last_data_start: Lsn,
}

/// The checkpoint kinds that behave differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CheckpointKind {
    /// `CHECKPOINT`: forced, never skipped.
    Explicit,
    /// By `checkpoint_timeout` or WAL volume: skipped when nothing important was written.
    Requested,
    /// At a clean shutdown or the end of crash recovery: no RX.
    Shutdown,
}

/// Per-database row bookkeeping for transactions (ids of live rows).
#[derive(Clone, Debug, Default)]
struct Rows {
    next_id: u64,
    live: Vec<u64>,
}

/// The model server.
pub struct ModelServer {
    retention: Retention,
    checkpoint_timeout_ms: u64,
    wal: Wal,
    records: Vec<Record>,
    slots: BTreeMap<String, ModelSlot>,
    streams: BTreeMap<String, Stream>,
    rows: BTreeMap<String, Rows>,
    now_ms: u64,
    last_removed_segment: u64,
    oldest_existing_segment: u64,
    last_checkpoint_redo: Lsn,
    last_checkpoint_record: Lsn,
    last_checkpoint_time_ms: u64,
    last_important: Lsn,
    last_important_time_ms: u64,
    /// The background writer's last RX: when, and where it ended (invalid after a start).
    bgwriter_rx_time_ms: u64,
    bgwriter_rx_end: Lsn,
    /// A WAL-volume checkpoint was requested and runs at the end of the step.
    checkpoint_requested: bool,
    /// Streams the server ended (walsender terminated, server restarted) that the workload has
    /// not stopped yet, with what they had delivered.
    ended_by_server: Vec<String>,
    ended_delivered: BTreeMap<String, Vec<String>>,
}

impl ModelServer {
    /// A freshly started server whose WAL continues at `start` (the position a real server was
    /// at when the workload began, or the start of a segment). Its last checkpoint and its
    /// background writer's last RX are taken to be just behind `start`, as after the setup a
    /// conformance run does.
    pub fn new(settings: &ServerSettings, start: Lsn) -> ModelServer {
        let retention = Retention {
            wal_segment_size_bytes: settings.wal_segment_size_bytes,
            max_wal_size_mb: settings.max_wal_size_mb,
            max_slot_wal_keep_size_mb: settings.max_slot_wal_keep_size_mb,
            wal_keep_size_mb: settings.wal_keep_size_mb,
            checkpoint_completion_target_permille: 900,
        };
        let start = if start.is_valid() { start } else { Lsn(settings.wal_segment_size_bytes) };
        let wal = Wal::new(settings.wal_segment_size_bytes, start);
        let segment = retention.segment_of(start);
        let insert = wal.insert_lsn();
        ModelServer {
            retention,
            checkpoint_timeout_ms: settings.checkpoint_timeout_s * 1000,
            wal,
            records: Vec::new(),
            slots: BTreeMap::new(),
            streams: BTreeMap::new(),
            rows: BTreeMap::new(),
            now_ms: 0,
            last_removed_segment: 0,
            oldest_existing_segment: segment,
            last_checkpoint_redo: insert,
            last_checkpoint_record: Lsn::INVALID,
            last_checkpoint_time_ms: 0,
            // Nothing important since the last checkpoint and the background writer's last RX.
            last_important: Lsn::INVALID,
            last_important_time_ms: 0,
            bgwriter_rx_time_ms: 0,
            bgwriter_rx_end: insert,
            checkpoint_requested: false,
            ended_by_server: Vec::new(),
            ended_delivered: BTreeMap::new(),
        }
    }

    /// Runs one step.
    pub fn apply(&mut self, step: &Step) -> Outcome {
        let outcome = match step {
            Step::CreateSlot { slot, database } => self.create_slot(slot, database),
            Step::Write { bytes, database } => {
                self.write_message(*bytes, database);
                Outcome::default()
            }
            Step::Transaction { name, database, inserts, updates, deletes } => {
                self.transaction(name, database, *inserts, *updates, *deletes);
                Outcome::default()
            }
            Step::Checkpoint => {
                self.checkpoint(CheckpointKind::Explicit);
                Outcome::default()
            }
            Step::SwitchWal => {
                let before = self.wal.write_lsn();
                if let Some((start, _)) = self.wal.switch_segment() {
                    self.push(Record::Other { start }, true);
                    self.segments_finished(before);
                }
                Outcome::default()
            }
            Step::AdvanceSlot { slot, to } => self.advance(slot, *to),
            Step::GetChanges { slot } => self.sql_changes(slot, true),
            Step::PeekChanges { slot } => self.sql_changes(slot, false),
            Step::Stream { slot, seconds, confirm, start } => {
                let started = self.start_stream(slot, *confirm, *start);
                if started.error.is_some() {
                    return started;
                }
                self.advance_time(seconds * 1000);
                self.stop_stream(slot)
            }
            Step::StartStream { slot, confirm, start } => self.start_stream(slot, *confirm, *start),
            Step::StopStream { slot } => self.stop_stream(slot),
            Step::DropSlot { slot } => self.drop_slot(slot),
            Step::Restart { mode } => {
                self.restart(*mode);
                Outcome::default()
            }
            Step::Sleep { seconds } => {
                self.advance_time(seconds * 1000);
                Outcome::default()
            }
        };
        if self.checkpoint_requested {
            self.checkpoint_requested = false;
            self.checkpoint(CheckpointKind::Requested);
        }
        self.pump_streams();
        outcome
    }

    /// `pg_current_wal_lsn()`.
    pub fn current_lsn(&self) -> Lsn {
        self.wal.write_lsn()
    }

    /// `pg_replication_slots`, as the view computes it.
    pub fn view(&self) -> ServerView {
        let current = self.wal.write_lsn();
        let minimum = self.slots_minimum();
        let slots = self
            .slots
            .iter()
            .map(|(name, model)| {
                let slot = &model.slot;
                let active = self.streams.contains_key(name);
                let state = if slot.is_invalidated() {
                    WalAvailability::Removed
                } else {
                    self.retention.wal_availability(
                        slot.current.restart_lsn,
                        current,
                        minimum,
                        self.last_removed_segment,
                    )
                };
                // A removed segment under a live walsender shows as unreserved (§8).
                let state = if state == WalAvailability::Removed && !slot.is_invalidated() && active {
                    WalAvailability::Unreserved
                } else {
                    state
                };
                SlotRow {
                    name: name.clone(),
                    wal_status: Some(state.as_str().to_string()),
                    restart_lsn: (!slot.is_invalidated()).then_some(slot.current.restart_lsn),
                    confirmed_flush: Some(slot.current.confirmed_flush),
                    safe_wal_size: if state == WalAvailability::Removed {
                        None
                    } else {
                        self.retention.safe_wal_size(slot.current.restart_lsn, current)
                    },
                    active,
                }
            })
            .collect();
        ServerView { current_lsn: current, slots }
    }

    // ---- WAL ---------------------------------------------------------------------------------

    fn push(&mut self, record: Record, important: bool) {
        if important {
            self.last_important = record.start();
            self.last_important_time_ms = self.now_ms;
        }
        self.records.push(record);
    }

    /// Volume checkpoints: finishing a segment far enough past the last redo requests one
    /// (`XLogWrite` → `XLogCheckpointNeeded`).
    fn segments_finished(&mut self, write_before: Lsn) {
        let first = self.retention.segment_of(write_before);
        let last = self.retention.segment_of(self.wal.write_lsn());
        for finished in first..last {
            if self.retention.checkpoint_needed(self.last_checkpoint_redo, finished) {
                self.checkpoint_requested = true;
            }
        }
    }

    /// `BEGIN; SELECT pg_logical_emit_message(true, 'handoff', repeat('x', n)); COMMIT;` with
    /// `n` chosen so the two records take about `bytes`.
    fn write_message(&mut self, bytes: u64, _database: &str) {
        let before = self.wal.write_lsn();
        let payload = message_payload_bytes(bytes);
        let (start, _) = self.wal.insert_record(message_record_bytes(payload));
        self.wal.insert_record(record_size::COMMIT);
        self.push(Record::Other { start }, true);
        self.segments_finished(before);
    }

    /// Inserts, updates and deletes on `handoff_conform`, then the commit.
    fn transaction(&mut self, name: &str, database: &str, inserts: u32, updates: u32, deletes: u32) {
        let before = self.wal.write_lsn();
        let rows = self.rows.entry(database.to_string()).or_default();
        let mut sizes = Vec::new();
        for _ in 0..inserts {
            rows.next_id += 1;
            rows.live.push(rows.next_id);
            sizes.push(record_size::heap_insert(TUPLE_DATA_BYTES));
            sizes.push(BTREE_INSERT_BYTES);
        }
        let updates = (updates as usize).min(rows.live.len());
        for _ in 0..updates {
            sizes.push(record_size::heap_update(TUPLE_DATA_BYTES, None));
        }
        let deletes = (deletes as usize).min(rows.live.len());
        for _ in 0..deletes {
            rows.live.remove(0);
            sizes.push(record_size::heap_delete(KEY_DATA_BYTES));
        }
        let published = inserts as usize + updates + deletes > 0;
        let mut first = None;
        for size in sizes {
            let (start, _) = self.wal.insert_record(size);
            first.get_or_insert(start);
        }
        let (commit, end) = self.wal.insert_record(record_size::COMMIT);
        let start = first.unwrap_or(commit);
        self.push(
            Record::Txn { name: name.to_string(), database: database.to_string(), commit, end, published, start },
            true,
        );
        self.segments_finished(before);
    }

    /// `LogStandbySnapshot()`.
    fn running_xacts(&mut self) -> (Lsn, Lsn) {
        let (start, end) = self.wal.insert_record(record_size::RUNNING_XACTS);
        self.push(Record::RunningXacts { start }, false);
        (start, end)
    }

    fn slots_minimum(&self) -> Option<Lsn> {
        self.slots
            .values()
            .filter(|model| !model.slot.is_invalidated())
            .map(|model| model.slot.current.restart_lsn)
            .filter(|lsn| lsn.is_valid())
            .min()
    }

    /// `CreateCheckPoint`: save dirty slots, RX (not at shutdown), the checkpoint record, then
    /// `KeepLogSeg`, invalidation and removal (§7.1–7.2).
    fn checkpoint(&mut self, kind: CheckpointKind) {
        self.last_checkpoint_time_ms = self.now_ms;
        if kind == CheckpointKind::Requested && self.last_important <= self.last_checkpoint_record {
            return;
        }
        let redo = self.wal.insert_lsn();
        for model in self.slots.values_mut() {
            if model.slot.dirty {
                model.slot.save();
            }
        }
        if kind != CheckpointKind::Shutdown {
            self.running_xacts();
        }
        let (start, end) = self.wal.insert_record(record_size::CHECKPOINT_ONLINE);
        self.push(Record::Other { start }, true);
        self.last_checkpoint_redo = redo;
        self.last_checkpoint_record = start;
        let redo_segment = self.retention.segment_of(redo);
        let mut keep = self.retention.keep_log_seg(end, self.slots_minimum(), redo_segment);
        if self.invalidate_obsolete(keep) {
            keep = self.retention.keep_log_seg(end, self.slots_minimum(), redo_segment);
        }
        if keep > self.oldest_existing_segment {
            self.last_removed_segment = self.last_removed_segment.max(keep - 1);
            self.oldest_existing_segment = keep;
        }
    }

    /// `InvalidateObsoleteReplicationSlots(oldest_segment)`.
    fn invalidate_obsolete(&mut self, oldest_segment: u64) -> bool {
        let oldest = self.retention.segment_start(oldest_segment);
        let obsolete: Vec<String> = self
            .slots
            .iter()
            .filter(|(_, model)| {
                !model.slot.is_invalidated()
                    && model.slot.current.restart_lsn.is_valid()
                    && model.slot.current.restart_lsn < oldest
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in &obsolete {
            // The checkpointer terminates the walsender of an active slot and waits for it.
            if let Some(stream) = self.streams.remove(name) {
                self.ended_delivered.insert(name.clone(), stream.delivered);
                self.ended_by_server.push(name.clone());
            }
            if let Some(model) = self.slots.get_mut(name) {
                model.slot.invalidate();
            }
        }
        !obsolete.is_empty()
    }

    // ---- Time ----------------------------------------------------------------------------

    /// Lets `duration_ms` pass: timed checkpoints and the background writer's RXs, in time
    /// order, with open streams following the WAL.
    fn advance_time(&mut self, duration_ms: u64) {
        let target = self.now_ms + duration_ms;
        loop {
            self.pump_streams();
            let checkpoint_at = self.last_checkpoint_time_ms + self.checkpoint_timeout_ms;
            let rx_at = (!self.bgwriter_rx_end.is_valid() || self.last_important >= self.bgwriter_rx_end)
                .then(|| (self.bgwriter_rx_time_ms + LOG_SNAPSHOT_INTERVAL_MS).max(self.last_important_time_ms));
            let next = match rx_at {
                Some(rx_at) if rx_at <= checkpoint_at => (rx_at, false),
                _ => (checkpoint_at, true),
            };
            if next.0 > target {
                break;
            }
            self.now_ms = self.now_ms.max(next.0);
            if next.1 {
                self.checkpoint(CheckpointKind::Requested);
            } else {
                let (_, end) = self.running_xacts();
                self.bgwriter_rx_time_ms = self.now_ms;
                self.bgwriter_rx_end = end;
            }
        }
        self.now_ms = target;
        self.pump_streams();
    }

    // ---- Slots ----------------------------------------------------------------------------

    fn create_slot(&mut self, name: &str, database: &str) -> Outcome {
        if self.slots.contains_key(name) {
            return error(ErrorClass::SlotExists);
        }
        let restart = self.wal.insert_lsn();
        let (_, end) = self.running_xacts();
        let slot = Slot::new(name.to_string(), "pgoutput".to_string(), restart, end);
        self.slots.insert(name.to_string(), ModelSlot { slot, database: database.to_string() });
        Outcome::default()
    }

    fn drop_slot(&mut self, name: &str) -> Outcome {
        if !self.slots.contains_key(name) {
            return error(ErrorClass::SlotMissing);
        }
        if self.streams.contains_key(name) {
            return error(ErrorClass::SlotActive);
        }
        self.slots.remove(name);
        Outcome::default()
    }

    /// Checks a slot can be acquired for decoding.
    fn acquire(&self, name: &str) -> Result<(), ErrorClass> {
        let model = self.slots.get(name).ok_or(ErrorClass::SlotMissing)?;
        if self.streams.contains_key(name) {
            return Err(ErrorClass::SlotActive);
        }
        if model.slot.is_invalidated() {
            return Err(ErrorClass::SlotInvalidated);
        }
        Ok(())
    }

    /// Index of the first record at or after `lsn`.
    fn first_record_at(&self, lsn: Lsn) -> usize {
        self.records.partition_point(|record| record.start() < lsn)
    }

    /// `pg_logical_slot_get_changes` (`confirm`) or `peek_changes`: decodes from
    /// `restart_lsn` to the flush pointer.
    fn sql_changes(&mut self, name: &str, confirm: bool) -> Outcome {
        if let Err(class) = self.acquire(name) {
            return error(class);
        }
        let end_of_wal = self.wal.write_lsn();
        let first = self.first_record_at(self.slots[name].slot.current.restart_lsn);
        let records = self.records[first..].to_vec();
        let model = self.slots.get_mut(name).expect("acquired");
        let start = model.slot.effective_start(Lsn::INVALID);
        let mut delivered = Vec::new();
        for record in &records {
            match record {
                Record::RunningXacts { start } => {
                    model.slot.process_running_xacts(*start);
                }
                Record::Txn { name, database, commit, published, .. } => {
                    if *commit >= start && *database == model.database && *published {
                        delivered.push(name.clone());
                    }
                }
                Record::Other { .. } => {}
            }
        }
        if confirm {
            model.slot.confirm(end_of_wal);
            model.slot.dirty = true;
        }
        Outcome { delivered: Some(delivered), ..Outcome::default() }
    }

    /// `pg_replication_slot_advance`: fast-forward decoding from `restart_lsn` until a record
    /// ends at or after the target, then confirm the target (clamped to the flush pointer).
    fn advance(&mut self, name: &str, to: Position) -> Outcome {
        // `pg_replication_slot_advance`'s order of checks: the target, acquiring the slot, the
        // slot's reservation, the minimum.
        let flush = self.wal.write_lsn();
        let target = match (to, self.slots.get(name)) {
            (Position::Zero, _) => Lsn::INVALID,
            (Position::Current, _) => flush,
            (_, None) => return error(ErrorClass::SlotMissing),
            (Position::RestartLsn, Some(model)) => model.slot.current.restart_lsn,
            (Position::ConfirmedFlush, Some(model)) => model.slot.current.confirmed_flush,
        };
        if !target.is_valid() {
            return error(ErrorClass::InvalidLsn);
        }
        let Some(model) = self.slots.get(name) else {
            return error(ErrorClass::SlotMissing);
        };
        if self.streams.contains_key(name) {
            return error(ErrorClass::SlotActive);
        }
        if model.slot.is_invalidated() {
            return error(ErrorClass::SlotInvalidated);
        }
        let target = target.min(flush);
        if target < model.slot.current.confirmed_flush {
            return error(ErrorClass::BelowMinimum);
        }
        let first = self.first_record_at(model.slot.current.restart_lsn);
        let records: Vec<Record> = self.records[first..].to_vec();
        let ends = self.record_ends(first);
        let model = self.slots.get_mut(name).expect("checked");
        for (record, end) in records.iter().zip(ends) {
            if let Record::RunningXacts { start } = record {
                model.slot.process_running_xacts(*start);
            }
            if end >= target {
                break;
            }
        }
        model.slot.confirm(target);
        model.slot.dirty = true;
        Outcome::default()
    }

    /// The end of each record from index `first` on (the next record's start, or the end of
    /// WAL for the last).
    fn record_ends(&self, first: usize) -> Vec<Lsn> {
        (first..self.records.len())
            .map(|index| self.records.get(index + 1).map_or(self.wal.write_lsn(), |next| next.start()))
            .collect()
    }

    fn start_stream(&mut self, name: &str, confirm: Confirm, start: Position) -> Outcome {
        if let Err(class) = self.acquire(name) {
            return error(class);
        }
        let slot = &self.slots[name].slot;
        let requested = match start {
            Position::Zero => Lsn::INVALID,
            Position::RestartLsn => slot.current.restart_lsn,
            Position::ConfirmedFlush => slot.current.confirmed_flush,
            Position::Current => self.wal.write_lsn(),
        };
        let stream = Stream {
            confirm,
            start: slot.effective_start(requested),
            next_record: self.first_record_at(slot.current.restart_lsn),
            delivered: Vec::new(),
            explicit_flush: Lsn::INVALID,
            last_data_start: Lsn::INVALID,
        };
        self.streams.insert(name.to_string(), stream);
        self.ended_by_server.retain(|ended| ended != name);
        self.pump_streams();
        Outcome::default()
    }

    fn stop_stream(&mut self, name: &str) -> Outcome {
        if let Some(stream) = self.streams.remove(name) {
            return Outcome { delivered: Some(stream.delivered), ended_by_server: Some(false), error: None };
        }
        if let Some(index) = self.ended_by_server.iter().position(|ended| ended == name) {
            self.ended_by_server.remove(index);
            let delivered = self.ended_delivered.remove(name).unwrap_or_default();
            return Outcome { delivered: Some(delivered), ended_by_server: Some(true), error: None };
        }
        error(ErrorClass::Other(format!("no stream is open on slot {name}")))
    }

    /// Every open walsender reads what was written, delivers, takes confirmations, and sends a
    /// keep-alive once caught up.
    fn pump_streams(&mut self) {
        let names: Vec<String> = self.streams.keys().cloned().collect();
        for name in names {
            let mut stream = self.streams.remove(&name).expect("listed");
            let model = self.slots.get_mut(&name).expect("a stream's slot exists");
            while let Some(record) = self.records.get(stream.next_record) {
                stream.next_record += 1;
                match record {
                    Record::RunningXacts { start } => {
                        model.slot.process_running_xacts(*start);
                    }
                    Record::Txn { name: txn, database, commit, end, published, .. } => {
                        if *commit >= stream.start && *database == model.database && *published {
                            stream.delivered.push(txn.clone());
                            // The COMMIT message is stamped with the end of the commit record.
                            stream.last_data_start = *end;
                            if stream.confirm != Confirm::None {
                                model.slot.confirm(*end);
                                stream.explicit_flush = *end;
                            }
                        }
                    }
                    Record::Other { .. } => {}
                }
            }
            // Caught up: a keep-alive with the end of what was read.
            let sent = self.wal.write_lsn();
            if stream.confirm == Confirm::Keepalive
                && stream.explicit_flush >= stream.last_data_start
                && sent > stream.explicit_flush
                && sent > model.slot.current.confirmed_flush
            {
                model.slot.confirm(sent);
            }
            self.streams.insert(name, stream);
        }
    }

    // ---- Restart ----------------------------------------------------------------------------

    fn restart(&mut self, mode: RestartMode) {
        // Walsenders end with the server; their consumers see the connection close.
        let names: Vec<String> = self.streams.keys().cloned().collect();
        for name in names {
            let stream = self.streams.remove(&name).expect("listed");
            self.ended_delivered.insert(name.clone(), stream.delivered);
            self.ended_by_server.push(name);
        }
        if mode == RestartMode::Fast {
            self.checkpoint(CheckpointKind::Shutdown);
        }
        for model in self.slots.values_mut() {
            model.slot.crash();
        }
        if mode == RestartMode::Immediate {
            // Crash recovery ends with a checkpoint (PostgreSQL 15: `CHECKPOINT_END_OF_RECOVERY`).
            self.checkpoint(CheckpointKind::Shutdown);
        }
        self.last_removed_segment = 0;
        self.last_checkpoint_time_ms = self.now_ms;
        // The background writer starts afresh: an RX 15 s later whatever was written.
        self.bgwriter_rx_time_ms = self.now_ms;
        self.bgwriter_rx_end = Lsn::INVALID;
    }
}

fn error(class: ErrorClass) -> Outcome {
    Outcome { error: Some(class), ..Outcome::default() }
}

/// `handoff_conform (id bigint, v integer)`: a tuple's data.
const TUPLE_DATA_BYTES: u64 = 8 + 4;
const KEY_DATA_BYTES: u64 = 8;
/// `Btree/INSERT_LEAF` for a bigint key.
const BTREE_INSERT_BYTES: u64 = 64;

/// The message prefix the server side writes.
pub const MESSAGE_PREFIX: &str = "handoff";

/// The payload of the message that makes a `write` of `bytes` (its record and commit).
pub fn message_payload_bytes(bytes: u64) -> u64 {
    bytes.saturating_sub(128).max(1)
}

/// `Logical message` record: header, data header, `xl_logical_message`, prefix with its NUL,
/// payload.
fn message_record_bytes(payload: u64) -> u64 {
    let data = 24 + MESSAGE_PREFIX.len() as u64 + 1 + payload;
    record_size::HEADER + if data > 255 { 5 } else { 2 } + data
}
