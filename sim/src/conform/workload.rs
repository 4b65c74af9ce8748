//! The conformance workload file: server settings and scripted server steps (TOML).
//!
//! ```toml
//! name = "cap-exceeded-then-checkpoint"
//! description = "An inactive slot falls 5 segments behind a 4MB cap; the next checkpoint invalidates it."
//!
//! [server]
//! wal_segment_size = "1MB"
//! max_slot_wal_keep_size = "4MB"
//!
//! [[step]]
//! create_slot = { slot = "s1" }
//! [[step]]
//! write = { size = "5MB" }
//! [[step]]
//! checkpoint = {}
//! ```
//!
//! The format is described in full in `docs/conform-format.md`. Sizes and times are written the
//! way `postgresql.conf` writes them (`"4MB"`, `"1d"`); every mistake is reported with the
//! field, the step number and what would be accepted. A workload's transactions are held to what
//! the model holds in memory ([`handoff_models::core::limits`]).

use handoff_models::core::limits;
use handoff_models::core::units::{self, UnitError};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The database a workload uses when a step names none; created by `initdb`-like setup on the
/// server side.
pub const DEFAULT_DATABASE: &str = "handoff";
/// The table transactions write, in every database.
pub const TABLE: &str = "handoff_conform";
/// The publication decoding uses (`FOR TABLE handoff_conform`).
pub const PUBLICATION: &str = "handoff_conform";
/// The prefix of the logical messages a `write` step emits.
pub const MESSAGE_PREFIX: &str = "handoff";

/// The payload of the message that makes a `write` of `bytes`: the message record and its
/// commit take about `bytes` of WAL.
pub fn message_payload_bytes(bytes: u64) -> u64 {
    bytes.saturating_sub(128).max(1)
}

/// A parsed, validated workload.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Workload {
    pub name: String,
    pub description: String,
    pub server: ServerSettings,
    /// The databases the workload uses (the default one first).
    pub databases: Vec<String>,
    pub steps: Vec<Step>,
}

/// Server settings, in PostgreSQL's units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ServerSettings {
    pub wal_segment_size_bytes: u64,
    pub max_wal_size_mb: u64,
    /// `None` is `-1`.
    pub max_slot_wal_keep_size_mb: Option<u64>,
    pub wal_keep_size_mb: u64,
    pub checkpoint_timeout_s: u64,
}

/// How a streaming consumer confirms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confirm {
    /// Confirms the end LSN of each commit it receives (Debezium's `lsn.flush.mode=connector`).
    Commits,
    /// Confirms commits and, by pgjdbc's rule, each keep-alive's LSN when nothing it received is
    /// unconfirmed (`connector_and_driver`, pg_recvlogical).
    Keepalive,
    /// Never confirms (`lsn.flush.mode=manual`).
    None,
}

/// Where a stream asks to start, or where an advance goes; resolved on each side against that
/// side's own positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Position {
    /// `0/0`: the slot's `confirmed_flush`.
    #[serde(rename = "0/0")]
    Zero,
    /// The slot's `restart_lsn` (below `confirmed_flush`).
    RestartLsn,
    /// The slot's `confirmed_flush`.
    ConfirmedFlush,
    /// `pg_current_wal_lsn()` (above `confirmed_flush` when anything was written since).
    Current,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestartMode {
    /// `pg_ctl stop -m fast`: a shutdown checkpoint, then a start.
    Fast,
    /// `pg_ctl stop -m immediate`: no checkpoint; crash recovery at start.
    Immediate,
}

/// One scripted step.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// `pg_create_logical_replication_slot(slot, 'pgoutput')` in `database`.
    CreateSlot {
        slot: String,
        database: String,
    },
    /// `bytes` of WAL in `database` (a transactional logical message no slot emits).
    Write {
        bytes: u64,
        database: String,
    },
    /// A transaction on `handoff_conform` in `database`.
    Transaction {
        name: String,
        database: String,
        inserts: u32,
        updates: u32,
        deletes: u32,
    },
    /// `CHECKPOINT`.
    Checkpoint,
    /// `pg_switch_wal()`.
    SwitchWal,
    /// `pg_replication_slot_advance(slot, to)`.
    AdvanceSlot {
        slot: String,
        to: Position,
    },
    /// `pg_logical_slot_get_binary_changes(slot, NULL, NULL, …)`.
    GetChanges {
        slot: String,
    },
    /// `pg_logical_slot_peek_binary_changes(slot, NULL, NULL, …)`.
    PeekChanges {
        slot: String,
    },
    /// `START_REPLICATION` for `seconds`, confirming as `confirm` says.
    Stream {
        slot: String,
        seconds: u64,
        confirm: Confirm,
        start: Position,
    },
    /// A stream that stays open across the following steps until `stop_stream`.
    StartStream {
        slot: String,
        confirm: Confirm,
        start: Position,
    },
    StopStream {
        slot: String,
    },
    /// `pg_drop_replication_slot(slot)`.
    DropSlot {
        slot: String,
    },
    Restart {
        mode: RestartMode,
    },
    Sleep {
        seconds: u64,
    },
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::CreateSlot { slot, database } => write!(f, "create_slot {slot} in {database}"),
            Step::Write { bytes, database } => write!(f, "write {} in {database}", format_size(*bytes)),
            Step::Transaction { name, database, inserts, updates, deletes } => {
                write!(f, "transaction {name} in {database} ({inserts} inserts, {updates} updates, {deletes} deletes)")
            }
            Step::Checkpoint => write!(f, "checkpoint"),
            Step::SwitchWal => write!(f, "switch_wal"),
            Step::AdvanceSlot { slot, to } => write!(f, "advance_slot {slot} to {}", position_name(*to)),
            Step::GetChanges { slot } => write!(f, "get_changes {slot}"),
            Step::PeekChanges { slot } => write!(f, "peek_changes {slot}"),
            Step::Stream { slot, seconds, confirm, start } => write!(
                f,
                "stream {slot} for {seconds}s from {}, confirming {}",
                position_name(*start),
                confirm_name(*confirm)
            ),
            Step::StartStream { slot, confirm, start } => {
                write!(f, "start_stream {slot} from {}, confirming {}", position_name(*start), confirm_name(*confirm))
            }
            Step::StopStream { slot } => write!(f, "stop_stream {slot}"),
            Step::DropSlot { slot } => write!(f, "drop_slot {slot}"),
            Step::Restart { mode } => {
                write!(f, "restart {}", if *mode == RestartMode::Fast { "fast" } else { "immediate" })
            }
            Step::Sleep { seconds } => write!(f, "sleep {seconds}s"),
        }
    }
}

pub fn position_name(position: Position) -> &'static str {
    match position {
        Position::Zero => "0/0",
        Position::RestartLsn => "restart_lsn",
        Position::ConfirmedFlush => "confirmed_flush",
        Position::Current => "current",
    }
}

pub fn confirm_name(confirm: Confirm) -> &'static str {
    match confirm {
        Confirm::Commits => "commits",
        Confirm::Keepalive => "keepalive",
        Confirm::None => "none",
    }
}

/// `1048576` → `1MB`, the way `SHOW` prints sizes.
pub fn format_size(bytes: u64) -> String {
    units::size_text(bytes)
}

// ---- The file as written -------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    server: FileServer,
    #[serde(default)]
    databases: Vec<String>,
    #[serde(default, rename = "step")]
    steps: Vec<FileStep>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileServer {
    wal_segment_size: Option<String>,
    max_wal_size: Option<String>,
    max_slot_wal_keep_size: Option<String>,
    wal_keep_size: Option<String>,
    checkpoint_timeout: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum FileStep {
    CreateSlot {
        slot: String,
        database: Option<String>,
    },
    Write {
        size: String,
        database: Option<String>,
    },
    Transaction {
        name: String,
        database: Option<String>,
        #[serde(default)]
        inserts: u32,
        #[serde(default)]
        updates: u32,
        #[serde(default)]
        deletes: u32,
    },
    Checkpoint {},
    SwitchWal {},
    AdvanceSlot {
        slot: String,
        to: Position,
    },
    GetChanges {
        slot: String,
    },
    PeekChanges {
        slot: String,
    },
    Stream {
        slot: String,
        seconds: u64,
        confirm: Confirm,
        #[serde(default = "zero")]
        start: Position,
    },
    StartStream {
        slot: String,
        confirm: Confirm,
        #[serde(default = "zero")]
        start: Position,
    },
    StopStream {
        slot: String,
    },
    DropSlot {
        slot: String,
    },
    Restart {
        mode: RestartMode,
    },
    Sleep {
        seconds: u64,
    },
}

fn zero() -> Position {
    Position::Zero
}

/// Parses a size the way `postgresql.conf` does: a number with `B`, `kB`, `MB`, `GB` or `TB`
/// (a bare number is bytes here).
pub fn parse_size_bytes(text: &str) -> Result<u64, String> {
    units::parse(text, &units::SIZE_UNITS, Some(1)).map_err(|error| match error {
        UnitError::NotANumber => format!("`{text}` is not a size like \"4MB\""),
        UnitError::UnknownUnit(unit) => {
            format!("`{text}`: unknown unit `{unit}` (use B, kB, MB, GB or TB, as postgresql.conf does)")
        }
        UnitError::TooLarge => format!("`{text}` is too large"),
    })
}

/// Parses a time the way `postgresql.conf` does: a number with `s`, `min`, `h` or `d` (a bare
/// number is seconds).
pub fn parse_seconds(text: &str) -> Result<u64, String> {
    units::parse(text, &units::TIME_UNITS_S, Some(1)).map_err(|error| match error {
        UnitError::NotANumber => format!("`{text}` is not a time like \"300s\""),
        UnitError::UnknownUnit(unit) => format!("`{text}`: unknown unit `{unit}` (use s, min, h or d)"),
        UnitError::TooLarge => format!("`{text}` is too large"),
    })
}

fn megabytes(field: &str, text: &str) -> Result<u64, String> {
    let bytes = parse_size_bytes(text).map_err(|e| format!("server.{field}: {e}"))?;
    if !bytes.is_multiple_of(1 << 20) {
        return Err(format!("server.{field}: `{text}` is not a whole number of megabytes"));
    }
    Ok(bytes >> 20)
}

impl Workload {
    /// Parses and validates a workload file's text; `origin` names it in messages.
    pub fn parse(text: &str, origin: &str) -> Result<Workload, String> {
        let file: File = toml::from_str(text).map_err(|e| format!("{origin}: {e}"))?;
        Workload::from_file(file).map_err(|e| format!("{origin}: {e}"))
    }

    fn from_file(file: File) -> Result<Workload, String> {
        let server = &file.server;
        let wal_segment_size_bytes = match &server.wal_segment_size {
            Some(text) => parse_size_bytes(text).map_err(|e| format!("server.wal_segment_size: {e}"))?,
            None => 16 << 20,
        };
        if !wal_segment_size_bytes.is_power_of_two() || !((1 << 20)..=(1 << 30)).contains(&wal_segment_size_bytes) {
            return Err(format!(
                "server.wal_segment_size: {} is not a power of two from 1MB to 1GB (initdb --wal-segsize)",
                format_size(wal_segment_size_bytes)
            ));
        }
        let segment_mb = wal_segment_size_bytes >> 20;
        let max_wal_size_mb = match &server.max_wal_size {
            Some(text) => megabytes("max_wal_size", text)?,
            None => 1024,
        };
        if max_wal_size_mb < 2 * segment_mb {
            return Err(format!(
                "server.max_wal_size: {}MB is below its minimum of two segments ({}MB)",
                max_wal_size_mb,
                2 * segment_mb
            ));
        }
        let max_slot_wal_keep_size_mb = match server.max_slot_wal_keep_size.as_deref().map(str::trim) {
            None | Some("-1") => None,
            Some(text) => Some(megabytes("max_slot_wal_keep_size", text)?),
        };
        let wal_keep_size_mb = match &server.wal_keep_size {
            Some(text) => megabytes("wal_keep_size", text)?,
            None => 0,
        };
        let checkpoint_timeout_s = match &server.checkpoint_timeout {
            Some(text) => parse_seconds(text).map_err(|e| format!("server.checkpoint_timeout: {e}"))?,
            None => 300,
        };
        if !(30..=86_400).contains(&checkpoint_timeout_s) {
            return Err(format!(
                "server.checkpoint_timeout: {checkpoint_timeout_s}s is outside PostgreSQL's range of 30s to 1d"
            ));
        }
        let mut databases = file.databases.clone();
        if databases.is_empty() {
            databases.push(DEFAULT_DATABASE.to_string());
        }
        for database in &databases {
            check_identifier("databases", database)?;
        }
        let default_database = databases[0].clone();
        let database = |step: usize, name: Option<String>| -> Result<String, String> {
            let name = name.unwrap_or_else(|| default_database.clone());
            if !databases.contains(&name) {
                return Err(format!("step {step}: database `{name}` is not in `databases` ({})", databases.join(", ")));
            }
            Ok(name)
        };
        let mut steps = Vec::new();
        let mut all_changes = 0u64;
        for (index, step) in file.steps.into_iter().enumerate() {
            let number = index + 1;
            let step = match step {
                FileStep::CreateSlot { slot, database: db } => {
                    check_identifier(&format!("step {number}: slot"), &slot)?;
                    Step::CreateSlot { slot, database: database(number, db)? }
                }
                FileStep::Write { size, database: db } => {
                    let bytes = parse_size_bytes(&size).map_err(|e| format!("step {number}: write.size: {e}"))?;
                    if !(1..=(1 << 30)).contains(&bytes) {
                        return Err(format!("step {number}: write.size must be from 1B to 1GB, not `{size}`"));
                    }
                    Step::Write { bytes, database: database(number, db)? }
                }
                FileStep::Transaction { name, database: db, inserts, updates, deletes } => {
                    check_identifier(&format!("step {number}: transaction name"), &name)?;
                    let changes = u64::from(inserts) + u64::from(updates) + u64::from(deletes);
                    if changes == 0 {
                        return Err(format!(
                            "step {number}: transaction {name} changes nothing (give inserts, updates or deletes)"
                        ));
                    }
                    let most = limits::MAX_CONFORM_TRANSACTION_CHANGES;
                    if changes > most {
                        return Err(format!(
                            "step {number}: transaction {name}: inserts + updates + deletes = {changes} is out of range; \
                             expected 1 to {most} changes in a transaction"
                        ));
                    }
                    all_changes += changes;
                    let most = limits::MAX_CONFORM_WORKLOAD_CHANGES;
                    if all_changes > most {
                        return Err(format!(
                            "step {number}: transaction {name} brings the workload to {all_changes} changes; expected 1 \
                             to {most} changes in all its transactions"
                        ));
                    }
                    Step::Transaction { name, database: database(number, db)?, inserts, updates, deletes }
                }
                FileStep::Checkpoint {} => Step::Checkpoint,
                FileStep::SwitchWal {} => Step::SwitchWal,
                FileStep::AdvanceSlot { slot, to } => Step::AdvanceSlot { slot, to },
                FileStep::GetChanges { slot } => Step::GetChanges { slot },
                FileStep::PeekChanges { slot } => Step::PeekChanges { slot },
                FileStep::Stream { slot, seconds, confirm, start } => {
                    if !(1..=600).contains(&seconds) {
                        return Err(format!("step {number}: stream.seconds must be from 1 to 600, not {seconds}"));
                    }
                    Step::Stream { slot, seconds, confirm, start }
                }
                FileStep::StartStream { slot, confirm, start } => Step::StartStream { slot, confirm, start },
                FileStep::StopStream { slot } => Step::StopStream { slot },
                FileStep::DropSlot { slot } => Step::DropSlot { slot },
                FileStep::Restart { mode } => Step::Restart { mode },
                FileStep::Sleep { seconds } => {
                    if !(1..=3600).contains(&seconds) {
                        return Err(format!("step {number}: sleep.seconds must be from 1 to 3600, not {seconds}"));
                    }
                    Step::Sleep { seconds }
                }
            };
            steps.push(step);
        }
        let mut names = std::collections::BTreeSet::new();
        for (index, step) in steps.iter().enumerate() {
            if let Step::Transaction { name, .. } = step
                && !names.insert(name.clone())
            {
                return Err(format!("step {}: transaction name `{name}` is used twice", index + 1));
            }
        }
        Ok(Workload {
            name: file.name,
            description: file.description,
            server: ServerSettings {
                wal_segment_size_bytes,
                max_wal_size_mb,
                max_slot_wal_keep_size_mb,
                wal_keep_size_mb,
                checkpoint_timeout_s,
            },
            databases,
            steps,
        })
    }

    /// The names of the slots the workload creates, in order of first creation.
    pub fn slots(&self) -> Vec<String> {
        let mut slots = Vec::new();
        for step in &self.steps {
            if let Step::CreateSlot { slot, .. } = step
                && !slots.contains(slot)
            {
                slots.push(slot.clone());
            }
        }
        slots
    }
}

/// Slot, database and transaction names go into SQL and replication commands unquoted, so they
/// are plain lower-case identifiers.
fn check_identifier(what: &str, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.starts_with(|c: char| c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(format!("{what} `{name}` must be a lower-case identifier (a-z, 0-9, _; at most 63 characters)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_parses_with_defaults() {
        let workload = Workload::parse(
            "name = \"w\"\n[server]\nwal_segment_size = \"1MB\"\nmax_slot_wal_keep_size = \"4MB\"\n\
             [[step]]\ncreate_slot = { slot = \"s1\" }\n[[step]]\nwrite = { size = \"5MB\" }\n\
             [[step]]\ncheckpoint = {}\n[[step]]\nstream = { slot = \"s1\", seconds = 2, confirm = \"keepalive\" }\n",
            "w.toml",
        )
        .unwrap();
        assert_eq!(workload.server.wal_segment_size_bytes, 1 << 20);
        assert_eq!(workload.server.max_slot_wal_keep_size_mb, Some(4));
        assert_eq!(workload.server.max_wal_size_mb, 1024);
        assert_eq!(workload.steps[1], Step::Write { bytes: 5 << 20, database: "handoff".into() });
        assert_eq!(
            workload.steps[3],
            Step::Stream { slot: "s1".into(), seconds: 2, confirm: Confirm::Keepalive, start: Position::Zero }
        );
    }

    #[test]
    fn mistakes_name_the_field_and_the_step() {
        let error = |text: &str| Workload::parse(text, "w.toml").unwrap_err();
        assert!(error("name = \"w\"\n[server]\nwal_segment_size = \"3MB\"\n").contains("power of two"));
        assert!(error("name = \"w\"\n[server]\nmax_wal_size = \"4 parsecs\"\n").contains("unknown unit `parsecs`"));
        let step = error("name = \"w\"\n[[step]]\nwrite = { size = \"1MB\", database = \"elsewhere\" }\n");
        assert!(step.contains("step 1: database `elsewhere`"), "{step}");
        let unknown = error("name = \"w\"\n[[step]]\nvacuum = {}\n");
        assert!(unknown.contains("vacuum"), "{unknown}");
        let confirm = error("name = \"w\"\n[[step]]\nstream = { slot = \"s\", seconds = 1, confirm = \"always\" }\n");
        assert!(confirm.contains("always"), "{confirm}");
    }

    #[test]
    fn transactions_are_held_to_what_the_model_holds() {
        let error = |text: &str| Workload::parse(text, "w.toml").unwrap_err();
        let transaction = |name: &str, inserts: u64| {
            format!("[[step]]\ntransaction = {{ name = \"{name}\", inserts = {inserts} }}\n")
        };
        let huge = error(&format!("name = \"w\"\n{}", transaction("t", u64::from(u32::MAX))));
        assert!(
            huge.contains("step 1: transaction t: inserts + updates + deletes = 4294967295 is out of range"),
            "{huge}"
        );
        assert!(huge.contains("expected 1 to 100000 changes in a transaction"), "{huge}");
        // Three counts near u32::MAX add up without wrapping around.
        let sum = error(
            "name = \"w\"\n[[step]]\ntransaction = { name = \"t\", inserts = 4294967295, updates = 4294967295, \
                         deletes = 2 }\n",
        );
        assert!(sum.contains("= 8589934592 is out of range"), "{sum}");
        let steps: String = (0..11).map(|n| transaction(&format!("t{n}"), 100_000)).collect();
        let all = error(&format!("name = \"w\"\n{steps}"));
        assert!(
            all.contains("step 11: transaction t10 brings the workload to 1100000 changes; expected 1 to 1000000"),
            "{all}"
        );
        let most: String = (0..10).map(|n| transaction(&format!("t{n}"), 100_000)).collect();
        assert!(Workload::parse(&format!("name = \"w\"\n{most}"), "w.toml").is_ok());
    }

    #[test]
    fn sizes_and_times_read_like_postgresql_conf() {
        assert_eq!(parse_size_bytes("512kB"), Ok(512 * 1024));
        assert_eq!(parse_seconds("1d"), Ok(86_400));
        assert_eq!(parse_seconds("5min"), Ok(300));
        assert_eq!(format_size(3 << 20), "3MB");
    }
}
