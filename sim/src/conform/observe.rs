//! What a conformance run observes after each step, on either side, and how two sides compare.
//!
//! Each side reports raw rows of `pg_replication_slots` (the model computes its own the way the
//! view does) and the step's outcome. Comparison never looks at LSNs themselves, which differ
//! between the model and a server by the WAL the model does not write byte for byte (full-page
//! images, the exact tuple sizes): it compares, per slot, `wal_status`, the distance in segments
//! from the slot's restart segment to the current one, the sign of `safe_wal_size`, whether
//! `restart_lsn` and `confirmed_flush` moved since the previous step, whether the slot is active,
//! and per step, the transactions delivered and the error class.

use handoff_models::core::lsn::Lsn;
use serde::{Deserialize, Serialize};
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
}

/// The server's state after a step: the write pointer and every slot, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerView {
    pub current_lsn: Lsn,
    pub slots: Vec<SlotRow>,
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
        }
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
        )
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
        }
    }

    #[test]
    fn facts_compare_segments_and_moves_not_positions() {
        let before =
            ServerView { current_lsn: Lsn(0x0E0_0000), slots: vec![row(Some(0x0E0_0028), 0x0E0_0060, Some(1))] };
        let after =
            ServerView { current_lsn: Lsn(0x130_0000), slots: vec![row(Some(0x0E0_0028), 0x0F0_0000, Some(0))] };
        let facts = SlotFacts::derive("s1", &after, Some(&before), 1 << 20);
        assert_eq!(facts.segments_behind, Some(5));
        assert_eq!(facts.safe_wal_size, Some(Sign::Zero));
        assert_eq!(facts.restart_lsn_moved, Some(false));
        assert_eq!(facts.confirmed_flush_moved, Some(true));
        // The same facts from positions shifted by a few hundred bytes.
        let shifted =
            ServerView { current_lsn: Lsn(0x130_0000), slots: vec![row(Some(0x0E0_0400), 0x0F0_0100, Some(0))] };
        let before_shifted =
            ServerView { current_lsn: Lsn(0x0E0_0000), slots: vec![row(Some(0x0E0_0400), 0x0E0_0400, Some(1))] };
        assert!(facts.differences(&SlotFacts::derive("s1", &shifted, Some(&before_shifted), 1 << 20)).is_empty());
        // A slot invalidated since: restart_lsn went to NULL, which is a move.
        let lost = ServerView { current_lsn: Lsn(0x130_0000), slots: vec![row(None, 0x0F0_0000, None)] };
        let facts = SlotFacts::derive("s1", &lost, Some(&after), 1 << 20);
        assert_eq!(facts.restart_lsn_moved, Some(true));
        assert_eq!(facts.segments_behind, None);
    }
}
