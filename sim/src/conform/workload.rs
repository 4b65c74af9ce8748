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
use handoff_models::core::protocol::Isolation;
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
    /// The slot facts compared besides the default ones (`compare = [...]`).
    pub compare: Vec<Compared>,
}

/// A slot fact a workload asks to compare besides the default ones, whose positions and xids
/// are shown relative to the workload's own steps and transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compared {
    /// `restart_lsn` as the step that wrote the WAL record it points to.
    RestartLsn,
    /// `confirmed_flush_lsn` as the step that wrote the WAL record it is the end of.
    ConfirmedFlush,
    /// `catalog_xmin` relative to the workload's named transactions.
    CatalogXmin,
}

/// What a session's DML statement does to the rows `ids` of `handoff_conform`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatementKind {
    /// `INSERT INTO handoff_conform (id, v) VALUES (id1, 0), (id2, 0), …`, in the order given.
    Insert,
    /// `UPDATE handoff_conform SET v = v + 1 WHERE id IN (…)`, rows in ascending id order.
    Update,
    /// `DELETE FROM handoff_conform WHERE id IN (…)`, rows in ascending id order.
    Delete,
}

impl StatementKind {
    pub fn name(self) -> &'static str {
        match self {
            StatementKind::Insert => "insert",
            StatementKind::Update => "update",
            StatementKind::Delete => "delete",
        }
    }
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
    /// `pg_create_logical_replication_slot(slot, 'pgoutput')` in `database`. With `session`, on
    /// a connection of its own of that name, not waited for: the creation may wait for running
    /// transactions across later steps, and every step reports whether it still waits. With
    /// `export_snapshot` (needs `session`), `CREATE_REPLICATION_SLOT slot LOGICAL pgoutput
    /// EXPORT_SNAPSHOT` on a replication connection, which keeps the snapshot for
    /// `import_snapshot` until the session is closed.
    CreateSlot {
        slot: String,
        database: String,
        session: Option<String>,
        export_snapshot: bool,
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
    /// `START_REPLICATION` for `seconds`, confirming as `confirm` says; with `messages`,
    /// pgoutput's `messages` option (logical decoding messages are sent too).
    Stream {
        slot: String,
        seconds: u64,
        confirm: Confirm,
        start: Position,
        messages: bool,
    },
    /// A stream that stays open across the following steps until `stop_stream`.
    StartStream {
        slot: String,
        confirm: Confirm,
        start: Position,
        messages: bool,
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
    /// Opens `session`: a connection of its own to `database`.
    Open {
        session: String,
        database: String,
    },
    /// `BEGIN ISOLATION LEVEL …`; `txn` names the transaction if it gets an xid.
    Begin {
        session: String,
        txn: Option<String>,
        isolation: Isolation,
    },
    /// One DML statement in the session: inside its transaction block, or autocommit as the
    /// transaction `txn`.
    Statement {
        session: String,
        kind: StatementKind,
        ids: Vec<i64>,
        txn: Option<String>,
    },
    /// `SELECT pg_logical_emit_message(transactional, prefix, content)` in the session.
    Message {
        session: String,
        transactional: bool,
        prefix: String,
        content: String,
        txn: Option<String>,
    },
    Commit {
        session: String,
    },
    Rollback {
        session: String,
    },
    /// A pause of `seconds` with the session idle (in its transaction, if one is open).
    Idle {
        session: String,
        seconds: u64,
    },
    /// `BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT '…'` with the snapshot
    /// the creation of `slot` exported.
    ImportSnapshot {
        session: String,
        slot: String,
    },
    /// `SELECT id FROM handoff_conform ORDER BY id` in the session.
    Select {
        session: String,
    },
    /// `SELECT pg_current_snapshot()` in the session.
    CurrentSnapshot {
        session: String,
    },
    /// Closes the session's connection (an open transaction is rolled back, an exported
    /// snapshot ends).
    Close {
        session: String,
    },
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::CreateSlot { slot, database, session, export_snapshot } => {
                write!(f, "create_slot {slot} in {database}")?;
                if let Some(session) = session {
                    write!(f, " on session {session}")?;
                }
                if *export_snapshot {
                    write!(f, ", exporting its snapshot")?;
                }
                Ok(())
            }
            Step::Write { bytes, database } => write!(f, "write {} in {database}", format_size(*bytes)),
            Step::Transaction { name, database, inserts, updates, deletes } => {
                write!(f, "transaction {name} in {database} ({inserts} inserts, {updates} updates, {deletes} deletes)")
            }
            Step::Checkpoint => write!(f, "checkpoint"),
            Step::SwitchWal => write!(f, "switch_wal"),
            Step::AdvanceSlot { slot, to } => write!(f, "advance_slot {slot} to {}", position_name(*to)),
            Step::GetChanges { slot } => write!(f, "get_changes {slot}"),
            Step::PeekChanges { slot } => write!(f, "peek_changes {slot}"),
            Step::Stream { slot, seconds, confirm, start, messages } => write!(
                f,
                "stream {slot} for {seconds}s from {}, confirming {}{}",
                position_name(*start),
                confirm_name(*confirm),
                if *messages { ", with messages" } else { "" }
            ),
            Step::StartStream { slot, confirm, start, messages } => write!(
                f,
                "start_stream {slot} from {}, confirming {}{}",
                position_name(*start),
                confirm_name(*confirm),
                if *messages { ", with messages" } else { "" }
            ),
            Step::StopStream { slot } => write!(f, "stop_stream {slot}"),
            Step::DropSlot { slot } => write!(f, "drop_slot {slot}"),
            Step::Restart { mode } => {
                write!(f, "restart {}", if *mode == RestartMode::Fast { "fast" } else { "immediate" })
            }
            Step::Sleep { seconds } => write!(f, "sleep {seconds}s"),
            Step::Open { session, database } => write!(f, "{session}: open in {database}"),
            Step::Begin { session, txn, isolation } => {
                write!(f, "{session}: BEGIN ISOLATION LEVEL {}", isolation.name())?;
                match txn {
                    Some(txn) => write!(f, " ({txn})"),
                    None => Ok(()),
                }
            }
            Step::Statement { session, kind, ids, txn } => {
                let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
                write!(f, "{session}: {} {}", kind.name(), ids.join(", "))?;
                match txn {
                    Some(txn) => write!(f, " (autocommit {txn})"),
                    None => Ok(()),
                }
            }
            Step::Message { session, transactional, prefix, content, txn } => {
                write!(
                    f,
                    "{session}: {} message {prefix} '{content}'",
                    if *transactional { "transactional" } else { "non-transactional" }
                )?;
                match txn {
                    Some(txn) => write!(f, " (autocommit {txn})"),
                    None => Ok(()),
                }
            }
            Step::Commit { session } => write!(f, "{session}: COMMIT"),
            Step::Rollback { session } => write!(f, "{session}: ROLLBACK"),
            Step::Idle { session, seconds } => write!(f, "{session}: idle {seconds}s"),
            Step::ImportSnapshot { session, slot } => {
                write!(f, "{session}: BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT of {slot}")
            }
            Step::Select { session } => write!(f, "{session}: SELECT id"),
            Step::CurrentSnapshot { session } => write!(f, "{session}: SELECT pg_current_snapshot()"),
            Step::Close { session } => write!(f, "{session}: close"),
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
    #[serde(default)]
    compare: Vec<Compared>,
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
        session: Option<String>,
        #[serde(default)]
        export_snapshot: bool,
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
        #[serde(default)]
        messages: bool,
    },
    StartStream {
        slot: String,
        confirm: Confirm,
        #[serde(default = "zero")]
        start: Position,
        #[serde(default)]
        messages: bool,
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
    Open {
        session: String,
        database: Option<String>,
    },
    Begin {
        session: String,
        txn: Option<String>,
        #[serde(default)]
        isolation: Isolation,
    },
    Insert {
        session: String,
        ids: Vec<i64>,
        txn: Option<String>,
    },
    Update {
        session: String,
        ids: Vec<i64>,
        txn: Option<String>,
    },
    Delete {
        session: String,
        ids: Vec<i64>,
        txn: Option<String>,
    },
    Message {
        session: String,
        transactional: bool,
        prefix: String,
        content: String,
        txn: Option<String>,
    },
    Commit {
        session: String,
    },
    Rollback {
        session: String,
    },
    Idle {
        session: String,
        seconds: u64,
    },
    ImportSnapshot {
        session: String,
        slot: String,
    },
    Select {
        session: String,
    },
    Snapshot {
        session: String,
    },
    Close {
        session: String,
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
                FileStep::CreateSlot { slot, database: db, session, export_snapshot } => {
                    check_identifier(&format!("step {number}: slot"), &slot)?;
                    if export_snapshot && session.is_none() {
                        return Err(format!(
                            "step {number}: create_slot {slot}: export_snapshot needs a session (the replication \
                             connection that keeps the snapshot)"
                        ));
                    }
                    Step::CreateSlot { slot, database: database(number, db)?, session, export_snapshot }
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
                FileStep::Stream { slot, seconds, confirm, start, messages } => {
                    if !(1..=600).contains(&seconds) {
                        return Err(format!("step {number}: stream.seconds must be from 1 to 600, not {seconds}"));
                    }
                    Step::Stream { slot, seconds, confirm, start, messages }
                }
                FileStep::StartStream { slot, confirm, start, messages } => {
                    Step::StartStream { slot, confirm, start, messages }
                }
                FileStep::StopStream { slot } => Step::StopStream { slot },
                FileStep::DropSlot { slot } => Step::DropSlot { slot },
                FileStep::Restart { mode } => Step::Restart { mode },
                FileStep::Sleep { seconds } => {
                    if !(1..=3600).contains(&seconds) {
                        return Err(format!("step {number}: sleep.seconds must be from 1 to 3600, not {seconds}"));
                    }
                    Step::Sleep { seconds }
                }
                FileStep::Open { session, database: db } => Step::Open { session, database: database(number, db)? },
                FileStep::Begin { session, txn, isolation } => Step::Begin { session, txn, isolation },
                FileStep::Insert { session, ids, txn } => {
                    Step::Statement { session, kind: StatementKind::Insert, ids, txn }
                }
                FileStep::Update { session, ids, txn } => {
                    Step::Statement { session, kind: StatementKind::Update, ids, txn }
                }
                FileStep::Delete { session, ids, txn } => {
                    Step::Statement { session, kind: StatementKind::Delete, ids, txn }
                }
                FileStep::Message { session, transactional, prefix, content, txn } => {
                    check_identifier(&format!("step {number}: message.prefix"), &prefix)?;
                    let most = MAX_MESSAGE_CONTENT_BYTES;
                    if content.len() > most || content.chars().any(|c| c.is_control()) {
                        return Err(format!(
                            "step {number}: message.content must be 0 to {most} bytes of printable text, not {} bytes",
                            content.len()
                        ));
                    }
                    Step::Message { session, transactional, prefix, content, txn }
                }
                FileStep::Commit { session } => Step::Commit { session },
                FileStep::Rollback { session } => Step::Rollback { session },
                FileStep::Idle { session, seconds } => {
                    if !(1..=3600).contains(&seconds) {
                        return Err(format!("step {number}: idle.seconds must be from 1 to 3600, not {seconds}"));
                    }
                    Step::Idle { session, seconds }
                }
                FileStep::ImportSnapshot { session, slot } => Step::ImportSnapshot { session, slot },
                FileStep::Select { session } => Step::Select { session },
                FileStep::Snapshot { session } => Step::CurrentSnapshot { session },
                FileStep::Close { session } => Step::Close { session },
            };
            if let Step::Statement { ids, .. } = &step {
                let most = MAX_STATEMENT_ROWS;
                if ids.is_empty() || ids.len() > most {
                    return Err(format!("step {number}: a statement names {} ids; expected 1 to {most}", ids.len()));
                }
                if let Some(id) = ids.iter().find(|id| **id < 1) {
                    return Err(format!("step {number}: id {id} is out of range; ids are from 1"));
                }
                let distinct: std::collections::BTreeSet<i64> = ids.iter().copied().collect();
                if distinct.len() != ids.len() {
                    return Err(format!("step {number}: a statement names an id twice"));
                }
                all_changes += ids.len() as u64;
            }
            steps.push(step);
        }
        let mut names = std::collections::BTreeSet::new();
        for (index, step) in steps.iter().enumerate() {
            let name = match step {
                Step::Transaction { name, .. } => Some(name),
                Step::Begin { txn, .. } | Step::Statement { txn, .. } | Step::Message { txn, .. } => txn.as_ref(),
                _ => None,
            };
            if let Some(name) = name {
                check_identifier(&format!("step {}: transaction name", index + 1), name)?;
                if !names.insert(name.clone()) {
                    return Err(format!("step {}: transaction name `{name}` is used twice", index + 1));
                }
            }
        }
        check_sessions(&steps)?;
        let mut compare = file.compare.clone();
        compare.sort();
        compare.dedup();
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
            compare,
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

/// The most rows a session's statement names.
pub const MAX_STATEMENT_ROWS: usize = 1000;
/// The longest logical message content a step emits.
pub const MAX_MESSAGE_CONTENT_BYTES: usize = 1000;

/// What the steps know of a session.
struct SessionState {
    /// `Some(name)` inside a transaction block (`None` inside: the block has no name).
    block: Option<Option<String>>,
    /// Opened by a `create_slot`: it runs nothing else.
    creates_slot: bool,
}

/// Sessions are opened before use, a block is begun before it commits, a write inside a block
/// has a transaction name, and so on: checked before anything runs, step by step.
fn check_sessions(steps: &[Step]) -> Result<(), String> {
    use std::collections::BTreeMap;
    let mut sessions: BTreeMap<&str, SessionState> = BTreeMap::new();
    let mut exported: Vec<&str> = Vec::new();
    for (index, step) in steps.iter().enumerate() {
        let number = index + 1;
        let session_of = |sessions: &BTreeMap<&str, SessionState>, session: &str| -> Result<(), String> {
            match sessions.get(session) {
                None => Err(format!("step {number}: session `{session}` is not open (open it with an `open` step)")),
                Some(state) if state.creates_slot => Err(format!(
                    "step {number}: session `{session}` creates a slot; it runs nothing else (open another session)"
                )),
                Some(_) => Ok(()),
            }
        };
        match step {
            Step::Open { session, .. } | Step::CreateSlot { session: Some(session), .. } => {
                check_identifier(&format!("step {number}: session"), session)?;
                if sessions.contains_key(session.as_str()) {
                    return Err(format!("step {number}: session `{session}` is already open"));
                }
                let creates_slot = matches!(step, Step::CreateSlot { .. });
                sessions.insert(session, SessionState { block: None, creates_slot });
                if let Step::CreateSlot { slot, export_snapshot: true, .. } = step {
                    exported.push(slot);
                }
            }
            Step::Begin { session, txn, .. } => {
                session_of(&sessions, session)?;
                let state = sessions.get_mut(session.as_str()).expect("checked");
                if state.block.is_some() {
                    return Err(format!("step {number}: session `{session}` is already in a transaction block"));
                }
                state.block = Some(txn.clone());
            }
            Step::ImportSnapshot { session, slot } => {
                session_of(&sessions, session)?;
                if !exported.contains(&slot.as_str()) {
                    return Err(format!(
                        "step {number}: no earlier create_slot of {slot} exports a snapshot (give it export_snapshot = true)"
                    ));
                }
                let state = sessions.get_mut(session.as_str()).expect("checked");
                if state.block.is_some() {
                    return Err(format!("step {number}: session `{session}` is already in a transaction block"));
                }
                state.block = Some(None);
            }
            Step::Statement { session, txn, .. } | Step::Message { session, txn, .. } => {
                session_of(&sessions, session)?;
                let state = &sessions[session.as_str()];
                let writes_xid = !matches!(step, Step::Message { transactional: false, .. });
                match (&state.block, txn) {
                    (Some(_), Some(txn)) => {
                        return Err(format!(
                            "step {number}: `{txn}`: a statement inside a transaction block belongs to the block's \
                             transaction (name it at its begin)"
                        ));
                    }
                    (Some(None), None) if writes_xid => {
                        return Err(format!(
                            "step {number}: session `{session}` writes in a transaction block that has no name (give \
                             its begin a txn)"
                        ));
                    }
                    (None, None) if writes_xid => {
                        return Err(format!("step {number}: an autocommit write needs a txn name"));
                    }
                    (None, Some(txn)) if !writes_xid => {
                        return Err(format!(
                            "step {number}: `{txn}`: a non-transactional message outside a block has no transaction"
                        ));
                    }
                    _ => {}
                }
            }
            Step::Commit { session } | Step::Rollback { session } => {
                session_of(&sessions, session)?;
                let state = sessions.get_mut(session.as_str()).expect("checked");
                if state.block.take().is_none() {
                    return Err(format!("step {number}: session `{session}` has no transaction block to end"));
                }
            }
            Step::Idle { session, .. } | Step::Select { session } | Step::CurrentSnapshot { session } => {
                session_of(&sessions, session)?;
            }
            Step::Close { session } if sessions.remove(session.as_str()).is_none() => {
                return Err(format!("step {number}: session `{session}` is not open"));
            }
            _ => {}
        }
    }
    Ok(())
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
            Step::Stream {
                slot: "s1".into(),
                seconds: 2,
                confirm: Confirm::Keepalive,
                start: Position::Zero,
                messages: false
            }
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
    fn session_steps_parse() {
        let workload = Workload::parse(
            "name = \"w\"\ndatabases = [\"handoff\", \"other\"]\ncompare = [\"catalog_xmin\", \"restart_lsn\"]\n\
             [[step]]\nopen = { session = \"o\", database = \"other\" }\n\
             [[step]]\nbegin = { session = \"o\", txn = \"x1\", isolation = \"repeatable_read\" }\n\
             [[step]]\ndelete = { session = \"o\", ids = [3, 1] }\n\
             [[step]]\nmessage = { session = \"o\", transactional = false, prefix = \"p\", content = \"it's\" }\n\
             [[step]]\ncreate_slot = { slot = \"s\", session = \"c\", export_snapshot = true }\n\
             [[step]]\ncommit = { session = \"o\" }\n\
             [[step]]\ninsert = { session = \"o\", ids = [5], txn = \"auto\" }\n\
             [[step]]\nimport_snapshot = { session = \"o\", slot = \"s\" }\n\
             [[step]]\nsnapshot = { session = \"o\" }\n",
            "w.toml",
        )
        .unwrap();
        assert_eq!(workload.compare, [Compared::RestartLsn, Compared::CatalogXmin]);
        assert_eq!(
            workload.steps[1],
            Step::Begin { session: "o".into(), txn: Some("x1".into()), isolation: Isolation::RepeatableRead }
        );
        assert_eq!(
            workload.steps[2],
            Step::Statement { session: "o".into(), kind: StatementKind::Delete, ids: vec![3, 1], txn: None }
        );
        assert_eq!(
            workload.steps[4],
            Step::CreateSlot {
                slot: "s".into(),
                database: "handoff".into(),
                session: Some("c".into()),
                export_snapshot: true
            }
        );
        assert_eq!(workload.steps[8], Step::CurrentSnapshot { session: "o".into() });
        assert_eq!(workload.slots(), ["s"]);
    }

    #[test]
    fn sessions_are_used_as_postgresql_allows() {
        let error = |steps: &str| Workload::parse(&format!("name = \"w\"\n{steps}"), "w.toml").unwrap_err();
        let open = "[[step]]\nopen = { session = \"a\" }\n";
        let begin = "[[step]]\nbegin = { session = \"a\", txn = \"t\" }\n";
        let unopened = error("[[step]]\nbegin = { session = \"a\" }\n");
        assert!(unopened.contains("step 1: session `a` is not open"), "{unopened}");
        let commit = error(&format!("{open}[[step]]\ncommit = {{ session = \"a\" }}\n"));
        assert!(commit.contains("step 2: session `a` has no transaction block to end"), "{commit}");
        let twice = error(&format!("{open}{begin}[[step]]\nbegin = {{ session = \"a\" }}\n"));
        assert!(twice.contains("step 3: session `a` is already in a transaction block"), "{twice}");
        let autocommit = error(&format!("{open}[[step]]\ninsert = {{ session = \"a\", ids = [1] }}\n"));
        assert!(autocommit.contains("step 2: an autocommit write needs a txn name"), "{autocommit}");
        let inside = error(&format!("{open}{begin}[[step]]\ninsert = {{ session = \"a\", ids = [1], txn = \"u\" }}\n"));
        assert!(inside.contains("step 3: `u`: a statement inside a transaction block"), "{inside}");
        let unnamed = error(&format!(
            "{open}[[step]]\nbegin = {{ session = \"a\" }}\n[[step]]\nupdate = {{ session = \"a\", ids = [1] }}\n"
        ));
        assert!(unnamed.contains("step 3: session `a` writes in a transaction block that has no name"), "{unnamed}");
        let reused = error(&format!("{open}{begin}[[step]]\ncommit = {{ session = \"a\" }}\n{begin}"));
        assert!(reused.contains("step 4: transaction name `t` is used twice"), "{reused}");
        let export = error("[[step]]\ncreate_slot = { slot = \"s\", export_snapshot = true }\n");
        assert!(export.contains("step 1: create_slot s: export_snapshot needs a session"), "{export}");
        let import = error(&format!(
            "{open}[[step]]\ncreate_slot = {{ slot = \"s\", session = \"c\" }}\n\
             [[step]]\nimport_snapshot = {{ session = \"a\", slot = \"s\" }}\n"
        ));
        assert!(import.contains("step 3: no earlier create_slot of s exports a snapshot"), "{import}");
        let creator = error(
            "[[step]]\ncreate_slot = { slot = \"s\", session = \"c\" }\n[[step]]\nselect = { session = \"c\" }\n",
        );
        assert!(creator.contains("step 2: session `c` creates a slot; it runs nothing else"), "{creator}");
        let ids = error(&format!("{open}[[step]]\ndelete = {{ session = \"a\", ids = [2, 2], txn = \"t\" }}\n"));
        assert!(ids.contains("step 2: a statement names an id twice"), "{ids}");
        let zero = error(&format!("{open}[[step]]\ndelete = {{ session = \"a\", ids = [0], txn = \"t\" }}\n"));
        assert!(zero.contains("step 2: id 0 is out of range; ids are from 1"), "{zero}");
        let none = error(&format!("{open}[[step]]\ndelete = {{ session = \"a\", ids = [], txn = \"t\" }}\n"));
        assert!(none.contains("step 2: a statement names 0 ids; expected 1 to 1000"), "{none}");
        let prefix = error(&format!(
            "{open}[[step]]\nmessage = {{ session = \"a\", transactional = false, prefix = \"P'\", content = \"\" }}\n"
        ));
        assert!(prefix.contains("step 2: message.prefix `P'` must be a lower-case identifier"), "{prefix}");
        let compare = error("compare = [\"xmin\"]\n");
        assert!(compare.contains("xmin"), "{compare}");
    }

    #[test]
    fn sizes_and_times_read_like_postgresql_conf() {
        assert_eq!(parse_size_bytes("512kB"), Ok(512 * 1024));
        assert_eq!(parse_seconds("1d"), Ok(86_400));
        assert_eq!(parse_seconds("5min"), Ok(300));
        assert_eq!(format_size(3 << 20), "3MB");
    }
}
