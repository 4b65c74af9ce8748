//! What a conformance run observes after each step, on either side, and how two sides compare.
//!
//! Each side reports raw rows of `pg_replication_slots` (the model computes its own the way the
//! view does) and the step's outcome. Comparison never looks at LSNs themselves, which differ
//! between the model and a server by the WAL the model does not write byte for byte (full-page
//! images, the exact tuple sizes): it compares, per slot, `wal_status`, the distance in segments
//! from the slot's restart segment to the current one, the sign of `safe_wal_size`, whether
//! `restart_lsn` and `confirmed_flush` moved since the previous step, whether the slot is active,
//! and per step, the transactions delivered and the error class.

use super::workload::Compared;
use handoff_models::core::lsn::Lsn;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// One row of `pg_replication_slots`, as either side sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRow {
    pub name: String,
    /// `None` is SQL NULL.
    pub wal_status: Option<String>,
    pub restart_lsn: Option<Lsn>,
    pub confirmed_flush: Option<Lsn>,
    pub safe_wal_size: Option<i64>,
    pub active: bool,
    /// `catalog_xmin` (`None` is NULL).
    #[serde(default)]
    pub catalog_xmin: Option<u32>,
}

/// The server's state after a step: the write pointer, the insert pointer and every slot, by
/// name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerView {
    pub current_lsn: Lsn,
    /// `pg_current_wal_insert_lsn()`: where the next record goes.
    #[serde(default)]
    pub insert_lsn: Lsn,
    pub slots: Vec<SlotRow>,
}

/// What positions and xids are shown relative to on one side: the WAL each step wrote (from
/// the insert pointer before it to the insert pointer after it) and the xids of the workload's
/// named transactions.
#[derive(Clone, Debug, Default)]
pub struct Landmarks {
    /// Per step (1-based number), the insert pointer before and after it.
    pub steps: Vec<(usize, Lsn, Lsn)>,
    /// Workload transaction names by xid.
    pub xids: BTreeMap<u32, String>,
}

/// The size of a WAL page and of its short and long headers (`XLogPageHeaderData`,
/// `XLogLongPageHeaderData`).
const WAL_PAGE_BYTES: u64 = 8192;

impl Landmarks {
    /// Where a record that starts at `lsn` (`restart_lsn`) was written: `step N` when step N
    /// wrote it, `before step 1`, or `after step N` for WAL written between steps (by a
    /// background process).
    pub fn place_start(&self, lsn: Lsn) -> String {
        if let Some((number, _, _)) =
            self.steps.iter().find(|(_, before, after)| before < after && *before <= lsn && lsn < *after)
        {
            return format!("step {number}");
        }
        self.between(lsn)
    }

    /// Where a record that ends at `lsn` (`confirmed_flush_lsn`, a consistent point) was written:
    /// `end of step N` when it is the last record step N wrote, `in step N` when step N wrote
    /// more after it, or as [`Landmarks::place_start`] says between steps.
    pub fn place_end(&self, lsn: Lsn) -> String {
        if let Some((number, _, after)) =
            self.steps.iter().find(|(_, before, after)| before < after && *before < lsn && lsn <= *after)
        {
            // A record ending at a page boundary ends where the next page's header begins.
            let at_end = lsn == *after;
            return if at_end { format!("end of step {number}") } else { format!("in step {number}") };
        }
        self.between(lsn)
    }

    fn between(&self, lsn: Lsn) -> String {
        let written = || self.steps.iter().filter(|(_, before, after)| before < after);
        match written().rfind(|(_, _, after)| *after <= lsn) {
            Some((number, _, after)) if page_header_end(*after) >= lsn => format!("end of step {number}"),
            Some((number, _, _)) => format!("after step {number}"),
            None => "before step 1".to_string(),
        }
    }

    /// An xid as the workload's transaction of that xid, or by the named transactions around it.
    pub fn place_xid(&self, xid: u32) -> String {
        if let Some(name) = self.xids.get(&xid) {
            return name.clone();
        }
        let below = self.xids.range(..xid).next_back().map(|(_, name)| name);
        let above = self.xids.range(xid..).next().map(|(_, name)| name);
        match (below, above) {
            (Some(below), Some(above)) => format!("after {below}, before {above}"),
            (Some(below), None) => format!("after {below}"),
            (None, Some(above)) => format!("before {above}"),
            (None, None) => "before any named transaction".to_string(),
        }
    }

    /// `pg_current_snapshot()`'s `xmin:xmax:xip` with each xid placed.
    pub fn place_snapshot(&self, xmin: u32, xmax: u32, xip: &[u32]) -> String {
        let xip: Vec<String> = xip.iter().map(|xid| self.place_xid(*xid)).collect();
        format!("xmin {}; xmax {}; running [{}]", self.place_xid(xmin), self.place_xid(xmax), xip.join(", "))
    }
}

/// Where the first record after a page boundary at `lsn` starts (past the page header); `lsn`
/// itself when it is not at a boundary.
fn page_header_end(lsn: Lsn) -> Lsn {
    if !lsn.0.is_multiple_of(WAL_PAGE_BYTES) {
        return lsn;
    }
    // A segment's first page has the long header; segments are at least 1 MB.
    if lsn.0.is_multiple_of(1 << 20) { Lsn(lsn.0 + 40) } else { Lsn(lsn.0 + 24) }
}

/// What a get, peek or stream delivered, before the transactions are named (a stream receives
/// a transaction before the `COMMIT` that names it returns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// A transaction and, in order, its changes and transactional messages
    /// ([`change_text`], [`message_text`]).
    Transaction { xid: u32, contents: Vec<String> },
    /// A non-transactional message, between transactions.
    Message { text: String },
}

/// A row change inside a delivered transaction: `insert 3`.
pub fn change_text(kind: &str, id: &str) -> String {
    format!("{kind} {id}")
}

/// A logical message as delivered: prefix and size (the model carries no content).
pub fn message_text(transactional: bool, prefix: &str, bytes: u64) -> String {
    if transactional {
        format!("message {prefix} {bytes}B")
    } else {
        format!("non-transactional message {prefix} {bytes}B")
    }
}

/// The report's text of what was delivered: a transaction by its workload name, followed by
/// its contents in brackets when it is one of `detailed` (the transactions of sessions, whose
/// rows the workload names); an unnamed one as `xid N`.
pub fn delivered_text(deliveries: &[Delivery], names: &BTreeMap<u32, String>, detailed: &[u32]) -> Vec<String> {
    deliveries
        .iter()
        .map(|delivery| match delivery {
            Delivery::Transaction { xid, contents } => {
                let name = names.get(xid).cloned().unwrap_or_else(|| format!("xid {xid}"));
                if detailed.contains(xid) { format!("{name} [{}]", contents.join("; ")) } else { name }
            }
            Delivery::Message { text } => text.clone(),
        })
        .collect()
}

/// The class of an error a step got: the comparison is on the class, not on the wording.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// `replication slot "s" does not exist` (42704).
    SlotMissing,
    /// `replication slot "s" already exists` (42710).
    SlotExists,
    /// `replication slot "s" is active for PID n` (55006).
    SlotActive,
    /// The slot was invalidated: "can no longer get changes", "cannot read from logical
    /// replication slot", "cannot be advanced" (55000).
    SlotInvalidated,
    /// `cannot advance replication slot to X, minimum is Y`.
    BelowMinimum,
    /// `invalid target WAL LSN`.
    InvalidLsn,
    /// Anything else, with the server's SQLSTATE and message.
    Other(String),
}

impl ErrorClass {
    /// The class of an error by its message, as either side words it (`ERROR: replication slot
    /// "s" does not exist`, …); unknown wording is `Other`, with the message.
    pub fn from_message(message: &str) -> ErrorClass {
        if message.contains("replication slot") && message.contains("does not exist") {
            ErrorClass::SlotMissing
        } else if message.contains("replication slot") && message.contains("already exists") {
            ErrorClass::SlotExists
        } else if message.contains("is active for PID") || message.ends_with("is active") {
            ErrorClass::SlotActive
        } else if message.contains("can no longer get changes")
            || message.contains("cannot read from logical replication slot")
            || message.contains("cannot be advanced")
        {
            ErrorClass::SlotInvalidated
        } else if message.contains("minimum is") {
            ErrorClass::BelowMinimum
        } else if message.contains("invalid target WAL LSN") {
            ErrorClass::InvalidLsn
        } else {
            ErrorClass::Other(message.to_string())
        }
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorClass::SlotMissing => write!(f, "slot does not exist"),
            ErrorClass::SlotExists => write!(f, "slot already exists"),
            ErrorClass::SlotActive => write!(f, "slot is active"),
            ErrorClass::SlotInvalidated => write!(f, "slot invalidated"),
            ErrorClass::BelowMinimum => write!(f, "below the minimum (confirmed_flush)"),
            ErrorClass::InvalidLsn => write!(f, "invalid target LSN"),
            ErrorClass::Other(text) => write!(f, "{text}"),
        }
    }
}

/// What a step did, besides changing slots.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// Transactions a get, peek or stream delivered, by workload name, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorClass>,
    /// For a stream that ended (`stream`, `stop_stream`): whether the server ended it first
    /// (its walsender was terminated, or the server restarted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_by_server: Option<bool>,
    /// The ids a `select` saw, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<Vec<i64>>,
    /// `pg_current_snapshot()`, its xids placed among the workload's transactions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// Slot creations started on sessions of their own, after the step: `s2 waiting` while
    /// one still waits, `s2 created` (or `s2 failed: …`) at the step it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creations: Option<Vec<String>>,
}

/// The sign of `safe_wal_size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sign {
    Negative,
    Zero,
    Positive,
}

/// What is compared for one slot after one step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotFacts {
    pub exists: bool,
    pub wal_status: Option<String>,
    /// `seg(current) - seg(restart_lsn)`.
    pub segments_behind: Option<u64>,
    /// `None` is NULL.
    pub safe_wal_size: Option<Sign>,
    /// Since the previous step; `None` when the slot did not exist before or has no position.
    pub restart_lsn_moved: Option<bool>,
    pub confirmed_flush_moved: Option<bool>,
    pub active: bool,
    /// `restart_lsn` placed among the steps ([`Landmarks::place_start`]), when compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_lsn_at: Option<String>,
    /// `confirmed_flush_lsn` placed among the steps ([`Landmarks::place_end`]), when compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmed_flush_at: Option<String>,
    /// `catalog_xmin` placed among the workload's transactions, when compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_xmin: Option<String>,
}

impl SlotFacts {
    /// The facts about slot `name` in `view`, given the view after the previous step.
    pub fn derive(name: &str, view: &ServerView, previous: Option<&ServerView>, segment_size: u64) -> SlotFacts {
        let row = view.slots.iter().find(|row| row.name == name);
        let before = previous.and_then(|previous| previous.slots.iter().find(|row| row.name == name));
        let Some(row) = row else {
            return SlotFacts {
                exists: false,
                wal_status: None,
                segments_behind: None,
                safe_wal_size: None,
                restart_lsn_moved: None,
                confirmed_flush_moved: None,
                active: false,
                restart_lsn_at: None,
                confirmed_flush_at: None,
                catalog_xmin: None,
            };
        };
        let moved = |now: Option<Lsn>, then: Option<Option<Lsn>>| match (now, then) {
            (Some(now), Some(Some(then))) => Some(now != then),
            (None, Some(Some(_))) => Some(true),
            _ => None,
        };
        SlotFacts {
            exists: true,
            wal_status: row.wal_status.clone(),
            segments_behind: row
                .restart_lsn
                .map(|restart| (view.current_lsn.0 / segment_size).saturating_sub(restart.0 / segment_size)),
            safe_wal_size: row.safe_wal_size.map(|size| match size {
                ..0 => Sign::Negative,
                0 => Sign::Zero,
                _ => Sign::Positive,
            }),
            restart_lsn_moved: moved(row.restart_lsn, before.map(|before| before.restart_lsn)),
            confirmed_flush_moved: moved(row.confirmed_flush, before.map(|before| before.confirmed_flush)),
            active: row.active,
            restart_lsn_at: None,
            confirmed_flush_at: None,
            catalog_xmin: None,
        }
    }

    /// Adds the facts `compared` asks for, placed by `landmarks` (NULL shows as `NULL`).
    pub fn locate(mut self, name: &str, view: &ServerView, landmarks: &Landmarks, compared: &[Compared]) -> SlotFacts {
        let Some(row) = view.slots.iter().find(|row| row.name == name) else { return self };
        for fact in compared {
            match fact {
                Compared::RestartLsn => {
                    self.restart_lsn_at =
                        Some(row.restart_lsn.map_or("NULL".to_string(), |lsn| landmarks.place_start(lsn)));
                }
                Compared::ConfirmedFlush => {
                    self.confirmed_flush_at =
                        Some(row.confirmed_flush.map_or("NULL".to_string(), |lsn| landmarks.place_end(lsn)));
                }
                Compared::CatalogXmin => {
                    self.catalog_xmin =
                        Some(row.catalog_xmin.map_or("NULL".to_string(), |xid| landmarks.place_xid(xid)));
                }
            }
        }
        self
    }

    /// The fields on which two sides' facts differ, by name.
    pub fn differences(&self, other: &SlotFacts) -> Vec<&'static str> {
        let mut fields = Vec::new();
        if self.exists != other.exists {
            fields.push("exists");
        }
        if self.wal_status != other.wal_status {
            fields.push("wal_status");
        }
        if self.segments_behind != other.segments_behind {
            fields.push("segments_behind");
        }
        if self.safe_wal_size != other.safe_wal_size {
            fields.push("safe_wal_size");
        }
        if self.restart_lsn_moved != other.restart_lsn_moved {
            fields.push("restart_lsn_moved");
        }
        if self.confirmed_flush_moved != other.confirmed_flush_moved {
            fields.push("confirmed_flush_moved");
        }
        if self.active != other.active {
            fields.push("active");
        }
        if self.restart_lsn_at != other.restart_lsn_at {
            fields.push("restart_lsn_at");
        }
        if self.confirmed_flush_at != other.confirmed_flush_at {
            fields.push("confirmed_flush_at");
        }
        if self.catalog_xmin != other.catalog_xmin {
            fields.push("catalog_xmin");
        }
        fields
    }
}

impl fmt::Display for SlotFacts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.exists {
            return write!(f, "(no slot)");
        }
        let moved = |moved: Option<bool>| match moved {
            Some(true) => "moved",
            Some(false) => "same",
            None => "-",
        };
        write!(
            f,
            "{:<10} {:>6} {:>4} {:>7} {:>9} {:>6}",
            self.wal_status.as_deref().unwrap_or("NULL"),
            self.segments_behind.map_or("-".to_string(), |segments| format!("+{segments}")),
            match self.safe_wal_size {
                None => "NULL",
                Some(Sign::Negative) => "<0",
                Some(Sign::Zero) => "0",
                Some(Sign::Positive) => ">0",
            },
            moved(self.restart_lsn_moved),
            moved(self.confirmed_flush_moved),
            if self.active { "active" } else { "" },
        )?;
        if let Some(at) = &self.restart_lsn_at {
            write!(f, "  restart_lsn {at}")?;
        }
        if let Some(at) = &self.confirmed_flush_at {
            write!(f, "  confirmed_flush {at}")?;
        }
        if let Some(xid) = &self.catalog_xmin {
            write!(f, "  catalog_xmin {xid}")?;
        }
        Ok(())
    }
}

/// The header matching [`SlotFacts`]'s display.
pub const FACTS_HEADER: &str = "wal_status segs   safe restart confirmed active";

#[cfg(test)]
mod tests {
    use super::*;

    fn row(restart: Option<u64>, confirmed: u64, safe: Option<i64>) -> SlotRow {
        SlotRow {
            name: "s1".into(),
            wal_status: Some("reserved".into()),
            restart_lsn: restart.map(Lsn),
            confirmed_flush: Some(Lsn(confirmed)),
            safe_wal_size: safe,
            active: false,
            catalog_xmin: None,
        }
    }

    #[test]
    fn positions_are_placed_by_the_step_that_wrote_them() {
        let landmarks = Landmarks {
            // Step 2 wrote nothing; step 4's WAL starts at a page boundary, after a gap
            // written between steps 3 and 4.
            steps: vec![
                (1, Lsn(0x1000), Lsn(0x1100)),
                (2, Lsn(0x1100), Lsn(0x1100)),
                (3, Lsn(0x1100), Lsn(0x1200)),
                (4, Lsn(0x2000), Lsn(0x2300)),
            ],
            xids: BTreeMap::from([(740, "a".to_string()), (745, "b".to_string())]),
        };
        assert_eq!(landmarks.place_start(Lsn(0x0800)), "before step 1");
        assert_eq!(landmarks.place_start(Lsn(0x1000)), "step 1");
        assert_eq!(landmarks.place_start(Lsn(0x1100)), "step 3", "step 2 wrote nothing");
        assert_eq!(landmarks.place_start(Lsn(0x1800)), "after step 3");
        assert_eq!(landmarks.place_start(Lsn(0x2018)), "step 4", "the first record after a page header");
        assert_eq!(landmarks.place_end(Lsn(0x1100)), "end of step 1");
        assert_eq!(landmarks.place_end(Lsn(0x1180)), "in step 3");
        assert_eq!(landmarks.place_end(Lsn(0x1200)), "end of step 3");
        assert_eq!(landmarks.place_end(Lsn(0x2300)), "end of step 4");
        assert_eq!(landmarks.place_end(Lsn(0x2400)), "after step 4");
        assert_eq!(landmarks.place_xid(745), "b");
        assert_eq!(landmarks.place_xid(742), "after a, before b");
        assert_eq!(landmarks.place_xid(746), "after b");
        assert_eq!(landmarks.place_xid(700), "before a");
        assert_eq!(landmarks.place_snapshot(742, 746, &[745]), "xmin after a, before b; xmax after b; running [b]");
    }

    #[test]
    fn deliveries_name_transactions_and_detail_those_of_sessions() {
        let deliveries = [
            Delivery::Transaction { xid: 7, contents: vec![change_text("insert", "1"), message_text(true, "p", 8)] },
            Delivery::Message { text: message_text(false, "q", 3) },
            Delivery::Transaction { xid: 8, contents: vec![change_text("delete", "1")] },
            Delivery::Transaction { xid: 9, contents: Vec::new() },
        ];
        let names = BTreeMap::from([(7, "t1".to_string()), (8, "big".to_string())]);
        assert_eq!(
            delivered_text(&deliveries, &names, &[7]),
            ["t1 [insert 1; message p 8B]", "non-transactional message q 3B", "big", "xid 9"]
        );
    }

    #[test]
    fn facts_compare_segments_and_moves_not_positions() {
        let before = ServerView {
            current_lsn: Lsn(0x0E0_0000),
            insert_lsn: Lsn(0x0E0_0000),
            slots: vec![row(Some(0x0E0_0028), 0x0E0_0060, Some(1))],
        };
        let after = ServerView {
            current_lsn: Lsn(0x130_0000),
            insert_lsn: Lsn(0x130_0000),
            slots: vec![row(Some(0x0E0_0028), 0x0F0_0000, Some(0))],
        };
        let facts = SlotFacts::derive("s1", &after, Some(&before), 1 << 20);
        assert_eq!(facts.segments_behind, Some(5));
        assert_eq!(facts.safe_wal_size, Some(Sign::Zero));
        assert_eq!(facts.restart_lsn_moved, Some(false));
        assert_eq!(facts.confirmed_flush_moved, Some(true));
        // The same facts from positions shifted by a few hundred bytes.
        let shifted = ServerView {
            current_lsn: Lsn(0x130_0000),
            insert_lsn: Lsn(0x130_0000),
            slots: vec![row(Some(0x0E0_0400), 0x0F0_0100, Some(0))],
        };
        let before_shifted = ServerView {
            current_lsn: Lsn(0x0E0_0000),
            insert_lsn: Lsn(0x0E0_0000),
            slots: vec![row(Some(0x0E0_0400), 0x0E0_0400, Some(1))],
        };
        assert!(facts.differences(&SlotFacts::derive("s1", &shifted, Some(&before_shifted), 1 << 20)).is_empty());
        // A slot invalidated since: restart_lsn went to NULL, which is a move.
        let lost = ServerView {
            current_lsn: Lsn(0x130_0000),
            insert_lsn: Lsn(0x130_0000),
            slots: vec![row(None, 0x0F0_0000, None)],
        };
        let facts = SlotFacts::derive("s1", &lost, Some(&after), 1 << 20);
        assert_eq!(facts.restart_lsn_moved, Some(true));
        assert_eq!(facts.segments_behind, None);
    }
}
