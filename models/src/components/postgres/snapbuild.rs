//! The snapshot builder of a logical slot being created: how its decoder, reading the WAL from
//! the slot's `restart_lsn`, reaches a consistent point, which transactions it waits for on the
//! way, and the snapshot it exports (`src/backend/replication/logical/snapbuild.c`:
//! `SnapBuildFindSnapshot`, `SnapBuildWaitSnapshot`, `SnapBuildProcessRunningXacts`,
//! `SnapBuildCommitTxn`, `SnapBuildInitialSnapshot`; `DecodingContextFindStartpoint`,
//! `src/backend/replication/logical/logical.c`). PostgreSQL 15.18 and 18.6 read the same.
//!
//! A pure state machine: its inputs are the records the creating decoder reads, the
//! running-xacts records (`xl_running_xacts`: `nextXid`, the listed top-level xids, their
//! minimum `oldestRunningXid`) and the commit records; its outputs are the xids to wait for
//! (`XactLockTableWait` on each, then `LogStandbySnapshot` writes a new running-xacts record),
//! the consistent point, and the exported snapshot. The server (`walsender.rs`) feeds it and
//! keeps the creating session waiting.
//!
//! The states, at each running-xacts record `R` read while not consistent:
//!
//! | from | condition at `R`, in this order | to | then |
//! |---|---|---|---|
//! | any | `R.oldestRunningXid == R.nextXid` (nothing running) | CONSISTENT | `xmin = xmax = nextXid`: "There are no running transactions." |
//! | START | otherwise | BUILDING_SNAPSHOT | `next_phase_at = R.nextXid`; wait for `R`'s xids ("found initial starting point"), log a new record |
//! | BUILDING_SNAPSHOT | `next_phase_at <= R.oldestRunningXid` | FULL_SNAPSHOT | `next_phase_at = R.nextXid`; wait for `R`'s xids ("found initial consistent point"), log a new record |
//! | FULL_SNAPSHOT | `next_phase_at <= R.oldestRunningXid` | CONSISTENT | "There are no old transactions anymore." |
//!
//! So creation waits for the transactions running at its first record (of every database: the
//! proc array is the cluster's), then for those that got an xid while it waited, and for no
//! transaction that got its xid after the record that moved it to FULL_SNAPSHOT: those it decodes
//! whole, their changes before the consistent point included. A transaction without an xid never
//! matters.
//!
//! The exported snapshot is `xmin` / `xmax` as the builder kept them, with every xid in
//! `[xmin, xmax)` whose commit the decoder did not see listed as running: exactly the
//! transactions whose commit record precedes the consistent point are visible, in WAL order,
//! whatever the proc array says about them (a transaction between its commit record and
//! `ProcArrayEndTransaction` is visible to it).
//!
//! Left out, with the reason:
//! - the `initial_xmin_horizon` check ("xmin horizon too low"): the horizon is the oldest running
//!   xid when the slot reserves WAL, and the first record is written right after, so no record
//!   this decoder reads is below it;
//! - restoring a serialized snapshot (`SnapBuildRestore`, path b): allowed only without a full
//!   snapshot (`pg_create_logical_replication_slot`, `NOEXPORT_SNAPSHOT`) and only when another
//!   decoder serialized one at exactly the record read; the model serializes none;
//! - subtransactions (their xids enter `committed` with the top-level one) and "initial slot
//!   snapshot too large" (more running xids than `GetMaxSnapshotXidCount()`).

use crate::core::ids::Xid;
use crate::core::lsn::Lsn;
use crate::core::protocol::SnapshotXids;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// `SnapBuildState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SnapBuildState {
    /// No running-xacts record read yet.
    Start,
    /// Waiting for the transactions running at the first record to end.
    BuildingSnapshot,
    /// Transactions with an xid at or after `next_phase_at` are decoded whole; waiting for the
    /// older ones to end.
    FullSnapshot,
    Consistent,
}

impl SnapBuildState {
    /// The server log's words for reaching this state.
    pub fn found(self) -> &'static str {
        match self {
            SnapBuildState::Start => "nothing yet",
            SnapBuildState::BuildingSnapshot => "initial starting point",
            SnapBuildState::FullSnapshot => "initial consistent point",
            SnapBuildState::Consistent => "consistent point",
        }
    }
}

/// An `xl_running_xacts` record as the decoder reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunningXacts<'a> {
    pub start: Lsn,
    pub end: Lsn,
    /// `nextXid`: the next xid to be assigned, exact at the record.
    pub next_xid: Xid,
    /// The top-level xids running when it was written, of every database.
    pub xids: &'a [Xid],
}

impl RunningXacts<'_> {
    /// `oldestRunningXid`: the smallest listed xid, or `nextXid` when none runs.
    pub fn oldest_running_xid(&self) -> Xid {
        self.xids.iter().copied().min().unwrap_or(self.next_xid).min(self.next_xid)
    }
}

/// What reading one running-xacts record leads to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// Nothing changed: read on.
    ReadOn,
    /// A new phase (`BuildingSnapshot` or `FullSnapshot`): wait for each of `xids` to end
    /// (`XactLockTableWait`), then log a new running-xacts record and read on.
    Wait { phase: SnapBuildState, xids: Vec<Xid> },
    /// The consistent point: "There are no running transactions." when `nothing_running`, else
    /// "There are no old transactions anymore.".
    Consistent { nothing_running: bool },
}

/// The builder (`struct SnapBuild`), for one slot's creation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SnapBuilder {
    pub state: SnapBuildState,
    /// The xid from which transactions are decoded whole (`next_phase_at`); 0 when invalid.
    pub next_phase_at: Xid,
    /// Every xid below is finished (`builder->xmin`).
    pub xmin: Xid,
    /// Every xid at or above is running (`builder->xmax`): one past the newest commit tracked.
    pub xmax: Xid,
    /// Xids whose commit record the decoder read while building a full snapshot
    /// (`builder->committed`), purged below `xmin`.
    pub committed: BTreeSet<Xid>,
    /// Only commits starting at or after this are ever replayed.
    pub start_decoding_at: Lsn,
    /// Every commit is tracked, for an exported or used snapshot (`building_full_snapshot`:
    /// `CREATE_REPLICATION_SLOT … EXPORT_SNAPSHOT`); `pg_create_logical_replication_slot`
    /// builds none.
    pub building_full_snapshot: bool,
}

impl SnapBuilder {
    pub fn new(building_full_snapshot: bool) -> SnapBuilder {
        SnapBuilder {
            state: SnapBuildState::Start,
            next_phase_at: 0,
            xmin: 0,
            xmax: 0,
            committed: BTreeSet::new(),
            start_decoding_at: Lsn::INVALID,
            building_full_snapshot,
        }
    }

    pub fn is_consistent(&self) -> bool {
        self.state == SnapBuildState::Consistent
    }

    /// `SnapBuildProcessRunningXacts` while not consistent: `SnapBuildFindSnapshot`, then, unless
    /// that ended the processing, `builder->xmin = oldestRunningXid` and the purge of older
    /// committed xids.
    pub fn process_running_xacts(&mut self, record: RunningXacts<'_>) -> Found {
        if self.is_consistent() {
            return Found::ReadOn;
        }
        let oldest = record.oldest_running_xid();
        let found = if oldest == record.next_xid {
            // a) Nothing runs: consistent at once, and everything after this record decodes.
            if !self.start_decoding_at.is_valid() || self.start_decoding_at <= record.start {
                self.start_decoding_at = Lsn(record.start.0 + 1);
            }
            self.xmin = record.next_xid;
            self.xmax = record.next_xid;
            self.state = SnapBuildState::Consistent;
            self.next_phase_at = 0;
            return Found::Consistent { nothing_running: true };
        } else if self.state == SnapBuildState::Start {
            // c) START → BUILDING_SNAPSHOT: xmin/xmax are what they will be once the running
            // transactions end.
            self.state = SnapBuildState::BuildingSnapshot;
            self.next_phase_at = record.next_xid;
            self.xmin = record.next_xid;
            self.xmax = record.next_xid;
            Found::Wait { phase: SnapBuildState::BuildingSnapshot, xids: record.xids.to_vec() }
        } else if self.state == SnapBuildState::BuildingSnapshot && self.next_phase_at <= oldest {
            self.state = SnapBuildState::FullSnapshot;
            self.next_phase_at = record.next_xid;
            Found::Wait { phase: SnapBuildState::FullSnapshot, xids: record.xids.to_vec() }
        } else if self.state == SnapBuildState::FullSnapshot && self.next_phase_at <= oldest {
            self.state = SnapBuildState::Consistent;
            self.next_phase_at = 0;
            Found::Consistent { nothing_running: false }
        } else {
            Found::ReadOn
        };
        self.xmin = oldest;
        self.committed.retain(|xid| *xid >= oldest);
        found
    }

    /// `SnapBuildCommitTxn` for a commit record starting at `commit_lsn`, read while not
    /// consistent: it is never replayed; building a full snapshot, it is tracked as committed
    /// unless it is older than the phase (START, or BUILDING_SNAPSHOT below `next_phase_at`:
    /// such a transaction ends below the final `xmin`, visible by its commit status alone).
    pub fn commit(&mut self, xid: Xid, commit_lsn: Lsn) {
        if self.is_consistent() {
            return;
        }
        if self.start_decoding_at <= commit_lsn {
            self.start_decoding_at = Lsn(commit_lsn.0 + 1);
        }
        let too_old = self.state == SnapBuildState::Start
            || (self.state == SnapBuildState::BuildingSnapshot && xid < self.next_phase_at);
        if too_old || !self.building_full_snapshot {
            return;
        }
        self.committed.insert(xid);
        if xid >= self.xmax {
            self.xmax = xid + 1;
        }
    }

    /// `SnapBuildProcessChange`: whether a change of `xid` read now is collected for decoding
    /// (FULL_SNAPSHOT from `next_phase_at` on, and everything once consistent).
    pub fn collects_changes_of(&self, xid: Xid) -> bool {
        match self.state {
            SnapBuildState::Consistent => true,
            SnapBuildState::FullSnapshot => xid >= self.next_phase_at,
            SnapBuildState::Start | SnapBuildState::BuildingSnapshot => false,
        }
    }

    /// `SnapBuildInitialSnapshot`: the snapshot a consistent builder exports, its xip every xid
    /// of `[xmin, xmax)` not tracked as committed. `None` before the consistent point or without
    /// a full snapshot.
    pub fn initial_snapshot(&self) -> Option<SnapshotXids> {
        if !self.is_consistent() || !self.building_full_snapshot {
            return None;
        }
        let xip = (self.xmin..self.xmax).filter(|xid| !self.committed.contains(xid)).collect();
        Some(SnapshotXids { xmin: self.xmin, xmax: self.xmax, xip })
    }
}

/// A slot being created: its builder and what its decoder waits for.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SlotCreation {
    pub builder: SnapBuilder,
    /// Where WAL was reserved: the first running-xacts record's start (`ReplicationSlotReserveWal`).
    pub restart_lsn: Lsn,
    /// The xids whose end the decoder waits for (`SnapBuildWaitSnapshot`), in the phase it
    /// entered; empty while it reads.
    pub waiting_for: BTreeSet<Xid>,
    /// The end of the record that made the builder consistent: the slot's `confirmed_flush`.
    pub consistent_point: Option<Lsn>,
}

/// What the decoder of a slot being created does after one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Read the next record.
    ReadOn,
    /// Blocked until the xids of [`SlotCreation::waiting_for`] end.
    Waiting { phase: SnapBuildState },
    /// The waits of a new phase were over at once (every xid had ended): log a new
    /// running-xacts record now, then read on.
    LogRunningXacts { phase: SnapBuildState },
    /// Consistent: the slot is created.
    Consistent,
}

impl SlotCreation {
    pub fn new(restart_lsn: Lsn, building_full_snapshot: bool) -> SlotCreation {
        SlotCreation {
            builder: SnapBuilder::new(building_full_snapshot),
            restart_lsn,
            waiting_for: BTreeSet::new(),
            consistent_point: None,
        }
    }

    /// Reads one running-xacts record; `running` says whether an xid is still running in the
    /// proc array (a wait on an ended one returns at once).
    pub fn read_running_xacts(&mut self, record: RunningXacts<'_>, running: impl Fn(Xid) -> bool) -> Progress {
        debug_assert!(self.waiting_for.is_empty(), "a waiting decoder reads nothing");
        match self.builder.process_running_xacts(record) {
            Found::ReadOn => Progress::ReadOn,
            Found::Consistent { .. } => {
                self.consistent_point = Some(record.end);
                Progress::Consistent
            }
            Found::Wait { phase, xids } => {
                self.waiting_for = xids.into_iter().filter(|xid| running(*xid)).collect();
                if self.waiting_for.is_empty() {
                    Progress::LogRunningXacts { phase }
                } else {
                    Progress::Waiting { phase }
                }
            }
        }
    }

    /// Reads one commit record.
    pub fn read_commit(&mut self, xid: Xid, commit_lsn: Lsn) {
        self.builder.commit(xid, commit_lsn);
    }

    /// `xid` ended (committed or aborted, and left the proc array: its lock is released). True
    /// when that ends the wait: the decoder logs a new running-xacts record and reads on.
    pub fn transaction_ended(&mut self, xid: Xid) -> bool {
        self.waiting_for.remove(&xid) && self.waiting_for.is_empty()
    }

    pub fn is_waiting(&self) -> bool {
        !self.waiting_for.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rx(start: u64, next_xid: Xid, xids: &[Xid]) -> RunningXacts<'_> {
        RunningXacts { start: Lsn(start), end: Lsn(start + 0x38), next_xid, xids }
    }

    /// The proc array of the tests: the xids still running.
    struct Running(BTreeSet<Xid>);

    impl Running {
        fn of(xids: &[Xid]) -> Running {
            Running(xids.iter().copied().collect())
        }

        fn is(&self) -> impl Fn(Xid) -> bool + '_ {
            |xid| self.0.contains(&xid)
        }

        /// `xid` commits: it leaves the proc array, and the creation learns it.
        fn end(&mut self, creation: &mut SlotCreation, xid: Xid) -> bool {
            self.0.remove(&xid);
            creation.transaction_ended(xid)
        }
    }

    /// E2a on PostgreSQL 15.18: X1 (744, another database) runs when creation starts; X2 (745)
    /// gets its xid during the first wait; X3 (746) during the second. Creation waits for X1,
    /// logs a second record, waits for X2, logs a third, and is consistent with X3 still
    /// running: it decodes X3 whole.
    #[test]
    fn e2a_three_records_wait_for_x1_then_x2_and_not_for_x3() {
        let mut running = Running::of(&[744]);
        let mut creation = SlotCreation::new(Lsn(0xEB9D98), true);
        let progress = creation.read_running_xacts(rx(0xEB9D98, 745, &[744]), running.is());
        assert_eq!(progress, Progress::Waiting { phase: SnapBuildState::BuildingSnapshot });
        assert_eq!(creation.waiting_for, BTreeSet::from([744]));
        // X2 gets xid 745 during the wait: the wait is for 744 only.
        running.0.insert(745);
        assert!(running.end(&mut creation, 744), "X1's end ends the first wait");
        creation.read_commit(744, Lsn(0xEB9EB0));
        let progress = creation.read_running_xacts(rx(0xEB9EE0, 746, &[745]), running.is());
        assert_eq!(progress, Progress::Waiting { phase: SnapBuildState::FullSnapshot });
        assert_eq!(creation.waiting_for, BTreeSet::from([745]));
        assert_eq!(creation.builder.next_phase_at, 746);
        // X3 gets 746 during the second wait and writes; its change is collected.
        running.0.insert(746);
        assert!(creation.builder.collects_changes_of(746));
        assert!(!creation.builder.collects_changes_of(745));
        assert!(running.end(&mut creation, 745), "X2's end ends the second wait");
        creation.read_commit(745, Lsn(0xEB9F98));
        let progress = creation.read_running_xacts(rx(0xEB9FC8, 747, &[746]), running.is());
        assert_eq!(progress, Progress::Consistent, "no wait for X3");
        assert_eq!(creation.consistent_point, Some(Lsn(0xEB9FC8 + 0x38)));
        assert!(creation.builder.start_decoding_at > Lsn(0xEB9F98), "X2 is never replayed");
        // Exported (had it been asked for): X2 tracked, X3 at xmax, so invisible.
        let snapshot = creation.builder.initial_snapshot().expect("consistent");
        assert_eq!(snapshot.to_string(), "746:746:");
    }

    /// E2b: one running xid, nothing new during the wait: two records, the second one with
    /// nothing running ("There are no running transactions", no initial consistent point).
    #[test]
    fn e2b_two_records_when_nothing_starts_during_the_wait() {
        let mut running = Running::of(&[748]);
        let mut creation = SlotCreation::new(Lsn(0xEBA230), true);
        let progress = creation.read_running_xacts(rx(0xEBA230, 749, &[748]), running.is());
        assert_eq!(progress, Progress::Waiting { phase: SnapBuildState::BuildingSnapshot });
        assert!(running.end(&mut creation, 748));
        creation.read_commit(748, Lsn(0xEBA260));
        let progress = creation.read_running_xacts(rx(0xEBA298, 749, &[]), running.is());
        assert_eq!(progress, Progress::Consistent);
        assert_eq!(creation.builder.state, SnapBuildState::Consistent);
        assert_eq!(creation.builder.initial_snapshot().expect("consistent").to_string(), "749:749:");
    }

    /// Nothing running: the first record is the consistent point.
    #[test]
    fn nothing_running_is_consistent_at_the_first_record() {
        let mut creation = SlotCreation::new(Lsn(0x100), true);
        let progress = creation.read_running_xacts(rx(0x100, 740, &[]), |_| false);
        assert_eq!(progress, Progress::Consistent);
        assert_eq!(creation.consistent_point, Some(Lsn(0x138)));
        assert_eq!(creation.builder.start_decoding_at, Lsn(0x101));
        assert_eq!(creation.builder.initial_snapshot().expect("consistent").to_string(), "740:740:");
    }

    /// E2c: B (751) runs at the start, D (752) starts and commits during the wait; the exported
    /// snapshot is `753:753:` and sees both; C (753), after it, is not in it.
    #[test]
    fn e2c_the_exported_snapshot_sees_what_committed_during_the_waits() {
        let mut running = Running::of(&[751]);
        let mut creation = SlotCreation::new(Lsn(0xEBA548), true);
        creation.read_running_xacts(rx(0xEBA548, 752, &[751]), running.is());
        running.0.insert(752);
        assert!(running.end(&mut creation, 751));
        creation.read_commit(751, Lsn(0xEBA600));
        let progress = creation.read_running_xacts(rx(0xEBA658, 753, &[752]), running.is());
        assert_eq!(progress, Progress::Waiting { phase: SnapBuildState::FullSnapshot });
        assert!(running.end(&mut creation, 752));
        creation.read_commit(752, Lsn(0xEBA690));
        assert_eq!(creation.builder.committed, BTreeSet::from([752]));
        let progress = creation.read_running_xacts(rx(0xEBA6C0, 753, &[]), running.is());
        assert_eq!(progress, Progress::Consistent);
        assert_eq!(creation.consistent_point, Some(Lsn(0xEBA6F8)));
        assert_eq!(creation.builder.initial_snapshot().expect("consistent").to_string(), "753:753:");
    }

    /// WAL order, not the proc array: X3 (746) writes its commit record before the third record
    /// but is still in the proc array when it is written (listed as running). The builder read
    /// its commit, so the exported snapshot sees it.
    #[test]
    fn a_commit_record_before_the_consistent_point_is_visible_even_if_still_listed_running() {
        let mut running = Running::of(&[744]);
        let mut creation = SlotCreation::new(Lsn(0x1000), true);
        creation.read_running_xacts(rx(0x1000, 745, &[744]), running.is());
        running.0.insert(745);
        assert!(running.end(&mut creation, 744));
        creation.read_running_xacts(rx(0x1100, 746, &[745]), running.is());
        running.0.insert(746);
        // X3's commit record is written; it has not left the proc array yet.
        creation.read_commit(746, Lsn(0x1180));
        assert!(running.end(&mut creation, 745));
        creation.read_commit(745, Lsn(0x11C0));
        let progress = creation.read_running_xacts(rx(0x1200, 747, &[746]), running.is());
        assert_eq!(progress, Progress::Consistent);
        let snapshot = creation.builder.initial_snapshot().expect("consistent");
        assert_eq!(snapshot.to_string(), "746:747:");
        assert!(!snapshot.xip.contains(&746), "X3 committed before the consistent point: visible");
    }

    /// A record read during a wait that lists the waited xid moves nothing (the background
    /// writer's, or a checkpoint's, written while the decoder was blocked).
    #[test]
    fn an_intermediate_record_listing_an_old_xid_moves_nothing() {
        let mut creation = SlotCreation::new(Lsn(0x1000), true);
        creation.read_running_xacts(rx(0x1000, 745, &[744]), |_| true);
        assert!(creation.transaction_ended(744));
        // Written during the wait, read after it.
        let progress = creation.read_running_xacts(rx(0x1040, 746, &[744, 745]), |xid| xid == 745);
        assert_eq!(progress, Progress::ReadOn);
        assert_eq!(creation.builder.state, SnapBuildState::BuildingSnapshot);
    }

    /// A new phase whose xids all ended before the decoder read the record logs a new record at
    /// once; a commit older than the phase is not tracked.
    #[test]
    fn a_phase_whose_xids_have_ended_logs_a_new_record_at_once() {
        let mut creation = SlotCreation::new(Lsn(0x1000), true);
        let progress = creation.read_running_xacts(rx(0x1000, 745, &[744]), |_| false);
        assert_eq!(progress, Progress::LogRunningXacts { phase: SnapBuildState::BuildingSnapshot });
        creation.read_commit(744, Lsn(0x1040));
        assert!(creation.builder.committed.is_empty(), "744 < next_phase_at: known finished by xmin");
    }

    /// `pg_create_logical_replication_slot` builds no full snapshot: it exports nothing and
    /// tracks no commit.
    #[test]
    fn without_a_full_snapshot_nothing_is_exported() {
        let mut creation = SlotCreation::new(Lsn(0x1000), false);
        creation.read_running_xacts(rx(0x1000, 745, &[744]), |_| false);
        creation.read_running_xacts(rx(0x1040, 746, &[745]), |_| false);
        creation.read_commit(745, Lsn(0x1080));
        assert!(creation.builder.committed.is_empty());
        creation.read_running_xacts(rx(0x10C0, 746, &[]), |_| false);
        assert!(creation.builder.is_consistent());
        assert_eq!(creation.builder.initial_snapshot(), None);
    }
}
