//! Logical replication slots: where decoding starts, how positions advance, and what survives a
//! restart (`src/backend/replication/slot.c`, `src/backend/replication/logical/logical.c`,
//! `snapbuild.c`).
//!
//! - `confirmed_flush` moves only forward, only on consumer confirmation
//!   (`LogicalConfirmReceivedLocation`), and a move by walsender feedback alone never marks the
//!   slot dirty: it reaches disk only with another save (`ReplicationSlotSave`, `SaveSlotToPath`). After a crash the slot comes back
//!   with its last saved positions, so the stream repeats.
//! - `restart_lsn` moves only to running-xacts (RX) positions seen while decoding, with one
//!   pending candidate that applies once `confirmed_flush` reaches the RX (`LogicalIncreaseRestartDecodingForSlot`, `logical.c`); installing it
//!   saves the slot.
//! - Decoding emits exactly the transactions whose commit record starts at or after
//!   `max(requested start, confirmed_flush)`; a start below `confirmed_flush` is forwarded to it
//!   (`CreateDecodingContext`, `logical.c`).
//!
//! - Invalidation (PostgreSQL 15's `invalidated_at`): a checkpoint invalidates a slot that passed
//!   `max_slot_wal_keep_size` ([`Slot::invalidate`]); `restart_lsn` becomes invalid for good, a
//!   crash keeps it so, and every use of the slot then fails. The checkpoint that decides it, and
//!   `wal_status`, are the server's (`retention.rs` and the checkpoint in `mod.rs`).
//! - PostgreSQL 17 failover slots: a slot carries `failover` (created with `FAILOVER`) and
//!   `synced` (a standby's copy made by the slotsync worker, still set after promotion); the
//!   server does the copying.
//!
//! - `catalog_xmin` moves the same way, with its own pending candidate
//!   (`LogicalIncreaseXminForSlot`, `logical.c`): the decoder proposes, at each RX, the oldest
//!   base snapshot's xmin of its open transactions, else the RX's `oldestRunningXid`; it
//!   applies once `confirmed_flush` reaches the RX. A restart candidate is the RX itself when
//!   the decoder holds no open transaction, else the last RX the decoder had serialised before
//!   the oldest open transaction's first record (`SnapBuildProcessRunningXacts`,
//!   `snapbuild.c`; the decoder's side is `decode.rs`).
//!
//! Left out here (another issue makes it exact): the PostgreSQL 17 shutdown save.

use crate::core::ids::{Node, Xid};
use crate::core::lsn::Lsn;
use crate::core::protocol::SessionId;
use serde::{Deserialize, Serialize};

/// The positions of a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SlotPositions {
    pub restart_lsn: Lsn,
    pub confirmed_flush: Lsn,
}

/// A pending `catalog_xmin` advance: applies once `confirmed_flush >= valid_at`
/// (`candidate_xmin_lsn`, `candidate_catalog_xmin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct XminCandidate {
    pub valid_at: Lsn,
    pub catalog_xmin: Xid,
}

/// A pending `restart_lsn` advance: applies once `confirmed_flush >= valid_at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RestartCandidate {
    pub valid_at: Lsn,
    pub restart_lsn: Lsn,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Slot {
    pub name: String,
    pub plugin: String,
    /// The database the slot was created in (`ReplicationSlotPersistentData.database`): it
    /// decodes only that database's transactions. `None` is the server's main database.
    #[serde(default)]
    pub database: Option<String>,
    /// What `pg_replslot/<name>/state` holds.
    pub saved: SlotPositions,
    /// The in-memory positions.
    pub current: SlotPositions,
    pub candidate: Option<RestartCandidate>,
    /// `catalog_xmin` (saved with the positions: `ReplicationSlotPersistentData.catalog_xmin`),
    /// the oldest xid whose catalog rows decoding may still need; 0 is invalid.
    #[serde(default)]
    pub catalog_xmin: Xid,
    #[serde(default)]
    pub saved_catalog_xmin: Xid,
    #[serde(default)]
    pub xmin_candidate: Option<XminCandidate>,
    /// The start of the running-xacts record that made its creation consistent: a decoder
    /// reading from before it (from the creation's `restart_lsn`) rebuilds the snapshot through
    /// the same records and serialises none of them (`SnapBuildFindSnapshot`,
    /// `SnapBuildProcessRunningXacts`, `snapbuild.c`). `None`: not known (a slot made otherwise).
    #[serde(default)]
    pub creation_consistent_at: Option<Lsn>,
    /// The session that has acquired the slot (`active_pid`).
    pub active: Option<(Node, SessionId)>,
    /// Marked dirty by SQL get/advance; saved at the next checkpoint.
    pub dirty: bool,
    /// PostgreSQL 15's `invalidated_at`: the `restart_lsn` the slot had when a checkpoint
    /// invalidated it for exceeding `max_slot_wal_keep_size` (`InvalidatePossiblyObsoleteSlot`, `slot.c`). Permanent; saved.
    #[serde(default)]
    pub invalidated_at: Option<Lsn>,
    /// PostgreSQL 17+: synchronized to standbys (`failover`), and, on a standby, a copy made by
    /// the slotsync worker (`synced`; it stays true after promotion, as a provenance flag).
    #[serde(default)]
    pub failover: bool,
    #[serde(default)]
    pub synced: bool,
}

/// What a confirmation did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Confirmed {
    /// `confirmed_flush` moved from → to.
    pub moved: Option<(Lsn, Lsn)>,
    /// A restart candidate was installed (and the slot saved).
    pub restart_advanced_to: Option<Lsn>,
}

impl Slot {
    /// A slot created with its reservation at `restart_lsn` and consistent at `consistent_point`;
    /// saved at creation.
    pub fn new(name: String, plugin: String, restart_lsn: Lsn, consistent_point: Lsn) -> Slot {
        let positions = SlotPositions { restart_lsn, confirmed_flush: consistent_point };
        Slot {
            name,
            plugin,
            database: None,
            saved: positions,
            current: positions,
            candidate: None,
            catalog_xmin: 0,
            saved_catalog_xmin: 0,
            xmin_candidate: None,
            creation_consistent_at: None,
            active: None,
            dirty: false,
            invalidated_at: None,
            failover: false,
            synced: false,
        }
    }

    /// `LogicalConfirmReceivedLocation(lsn)`.
    pub fn confirm(&mut self, lsn: Lsn) -> Confirmed {
        let mut result = Confirmed::default();
        if lsn > self.current.confirmed_flush {
            result.moved = Some((self.current.confirmed_flush, lsn));
            self.current.confirmed_flush = lsn;
        }
        let mut save = false;
        if let Some(candidate) = self.xmin_candidate
            && candidate.valid_at <= self.current.confirmed_flush
            && candidate.catalog_xmin != self.catalog_xmin
        {
            self.xmin_candidate = None;
            self.catalog_xmin = candidate.catalog_xmin;
            save = true;
        }
        if let Some(candidate) = self.candidate
            && candidate.valid_at <= self.current.confirmed_flush
        {
            self.candidate = None;
            if candidate.restart_lsn > self.current.restart_lsn {
                self.current.restart_lsn = candidate.restart_lsn;
                result.restart_advanced_to = Some(candidate.restart_lsn);
            }
            save = true;
        }
        if save {
            // The candidates are saved to disk before they are used.
            self.save();
        }
        result
    }

    /// Decoding processed a running-xacts record starting at `rx`: the decoder proposes
    /// `restart` (`LogicalIncreaseRestartDecodingForSlot(rx, restart)`; `None`: nothing, the
    /// decoder had serialised no RX before the oldest open transaction, or none at all) and
    /// `catalog_xmin` (`LogicalIncreaseXminForSlot(rx, xmin)`; `None`: nothing, the RX made a
    /// rebuilding decoder consistent with nothing running). Each has one pending candidate; one
    /// already confirmed past applies at once.
    pub fn process_running_xacts(&mut self, rx: Lsn, restart: Option<Lsn>, catalog_xmin: Option<Xid>) -> Confirmed {
        let mut apply = false;
        if let Some(catalog_xmin) = catalog_xmin
            && catalog_xmin > self.catalog_xmin
        {
            if rx <= self.current.confirmed_flush {
                self.xmin_candidate = Some(XminCandidate { valid_at: rx, catalog_xmin });
                apply = true;
            } else if self.xmin_candidate.is_none() {
                self.xmin_candidate = Some(XminCandidate { valid_at: rx, catalog_xmin });
            }
        }
        if let Some(restart_lsn) = restart
            && restart_lsn > self.current.restart_lsn
        {
            if rx <= self.current.confirmed_flush {
                self.candidate = Some(RestartCandidate { valid_at: rx, restart_lsn });
                apply = true;
            } else if self.candidate.is_none() {
                self.candidate = Some(RestartCandidate { valid_at: rx, restart_lsn });
            }
            // Otherwise dropped: only one candidate is pending at a time.
        }
        if apply { self.confirm(self.current.confirmed_flush) } else { Confirmed::default() }
    }

    /// Invalidated (`wal_status` `lost`): every use fails, and it holds no WAL.
    pub fn is_invalidated(&self) -> bool {
        self.invalidated_at.is_some()
    }

    /// `InvalidateObsoleteReplicationSlots` on this slot: `restart_lsn` becomes invalid,
    /// `confirmed_flush` stays, and the slot is saved (`InvalidatePossiblyObsoleteSlot`, `slot.c`).
    pub fn invalidate(&mut self) {
        self.invalidated_at = Some(self.current.restart_lsn);
        self.current.restart_lsn = Lsn::INVALID;
        self.candidate = None;
        self.save();
    }

    /// `SaveSlotToPath`.
    pub fn save(&mut self) {
        self.saved = self.current;
        self.saved_catalog_xmin = self.catalog_xmin;
        self.dirty = false;
    }

    /// The server crashed: the slot comes back from its file.
    pub fn crash(&mut self) {
        self.current = self.saved;
        if self.invalidated_at.is_some() {
            self.current.restart_lsn = Lsn::INVALID;
        }
        self.candidate = None;
        self.catalog_xmin = self.saved_catalog_xmin;
        self.xmin_candidate = None;
        self.active = None;
        self.dirty = false;
    }

    /// Where decoding for a requested start begins emitting: a start below `confirmed_flush`
    /// (or 0/0) is forwarded to it.
    pub fn effective_start(&self, requested: Lsn) -> Lsn {
        requested.max(self.current.confirmed_flush)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot() -> Slot {
        Slot::new("debezium".into(), "pgoutput".into(), Lsn(100), Lsn(150))
    }

    #[test]
    fn feedback_alone_is_not_saved_and_a_crash_takes_it_back() {
        let mut slot = slot();
        assert_eq!(slot.confirm(Lsn(400)).moved, Some((Lsn(150), Lsn(400))));
        slot.crash();
        assert_eq!(slot.current.confirmed_flush, Lsn(150));
    }

    #[test]
    fn confirmed_flush_never_goes_back_in_memory() {
        let mut slot = slot();
        slot.confirm(Lsn(400));
        assert_eq!(slot.confirm(Lsn(300)).moved, None);
        assert_eq!(slot.current.confirmed_flush, Lsn(400));
    }

    #[test]
    fn a_restart_candidate_applies_once_confirmed_and_saves_the_slot() {
        let mut slot = slot();
        assert_eq!(slot.process_running_xacts(Lsn(200), Some(Lsn(200)), None), Confirmed::default());
        // A second RX while the first candidate is pending is dropped.
        slot.process_running_xacts(Lsn(300), Some(Lsn(300)), None);
        let confirmed = slot.confirm(Lsn(250));
        assert_eq!(confirmed.restart_advanced_to, Some(Lsn(200)));
        assert_eq!(slot.saved, SlotPositions { restart_lsn: Lsn(200), confirmed_flush: Lsn(250) });
        slot.crash();
        assert_eq!(slot.current.confirmed_flush, Lsn(250));
        assert_eq!(slot.current.restart_lsn, Lsn(200));
    }

    #[test]
    fn a_start_below_confirmed_flush_is_forwarded() {
        let slot = slot();
        assert_eq!(slot.effective_start(Lsn::INVALID), Lsn(150));
        assert_eq!(slot.effective_start(Lsn(120)), Lsn(150));
        assert_eq!(slot.effective_start(Lsn(180)), Lsn(180));
    }
}
