//! The real server's side of a conformance run: each workload step as the SQL or replication
//! command it names, against a PostgreSQL server reached by URL.
//!
//! Before the first step the run prepares the server (the databases, the `handoff_conform`
//! table and publication in each, the workload's settings by `ALTER SYSTEM` and a reload) and
//! brings it to a known state: a WAL switch, a checkpoint, and a wait for the background
//! writer's next running-xacts record, so that the last checkpoint and the last RX are just
//! behind the first step, as the model assumes. After every step it waits until the
//! checkpointer is idle and every open stream has read to the end of WAL, so that what it reads
//! from `pg_replication_slots` is the step's result and not a checkpoint half done.
//!
//! At the end it drops the slots it created and resets the settings it changed. It refuses to
//! start when a slot the workload creates already exists.

use super::observe::{
    Delivery, ErrorClass, Landmarks, Outcome, ServerView, SlotRow, change_text, delivered_text, message_text,
};
use super::pgserver::PgCtl;
use super::pgwire::{Connection, PgError, PgOutput, ReplicationMessage, Target, parse_pgoutput};
use super::workload::{
    Confirm, MESSAGE_PREFIX, PUBLICATION, Position, RestartMode, StatementKind, Step, TABLE, Workload, format_size,
    message_payload_bytes,
};
use handoff_models::core::lsn::Lsn;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How to restart the server for `restart` steps: its data directory, and pg_ctl.
pub struct RestartWith {
    pub data_dir: PathBuf,
    pub pg_ctl: PgCtl,
}

/// The settings a workload sets, by name, as `ALTER SYSTEM` takes them.
fn settings(workload: &Workload) -> Vec<(&'static str, String)> {
    let server = &workload.server;
    vec![
        ("max_wal_size", format!("{}MB", server.max_wal_size_mb)),
        ("max_slot_wal_keep_size", server.max_slot_wal_keep_size_mb.map_or("-1".to_string(), |mb| format!("{mb}MB"))),
        ("wal_keep_size", format!("{}MB", server.wal_keep_size_mb)),
        ("checkpoint_timeout", format!("{}s", server.checkpoint_timeout_s)),
    ]
}

/// A stream consumer running on its own thread.
struct StreamHandle {
    stop: Arc<AtomicBool>,
    /// The furthest WAL position the server said it had sent (data or keep-alive).
    received: Arc<AtomicU64>,
    thread: JoinHandle<StreamResult>,
}

struct StreamResult {
    delivered: Vec<Delivery>,
    ended_by_server: bool,
    error: Option<String>,
}

/// A workload session: a connection of its own.
struct Session {
    connection: Connection,
    /// Inside a transaction block: its workload name, if it has one.
    block: Option<Option<String>>,
    /// The block's xid once it has one.
    xid: Option<u32>,
    /// The slot creation this session runs, while it has not been reported finished.
    creation: Option<Creation>,
}

/// A slot creation sent on its own session and not waited for.
struct Creation {
    slot: String,
    /// The backend's pid, to see in `pg_locks` whether it waits.
    pid: String,
    exports: bool,
}

/// How a slot creation stands after a step.
enum CreationState {
    Waiting,
    Created,
    Failed(ErrorClass),
}

/// A connection to the real server.
pub struct RealServer {
    target: Target,
    restart: Option<RestartWith>,
    connections: BTreeMap<String, Connection>,
    /// Workload transaction names by xid.
    names: Arc<Mutex<BTreeMap<u32, String>>>,
    /// The xids of the transactions of sessions, delivered with their contents.
    detailed: Vec<u32>,
    sessions: BTreeMap<String, Session>,
    /// The snapshot each `export_snapshot` creation exported, by slot.
    exported: BTreeMap<String, String>,
    next_id: BTreeMap<String, u64>,
    streams: BTreeMap<String, StreamHandle>,
    /// Slots created by this run (dropped at the end).
    created_slots: Vec<String>,
    slots: Vec<String>,
    /// The database each slot was created in.
    slot_databases: BTreeMap<String, String>,
    changed_settings: Vec<&'static str>,
}

fn io(error: PgError) -> String {
    error.to_string()
}

impl RealServer {
    /// Connects and prepares the server for `workload`. Returns the server and the insert LSN
    /// at which the workload starts.
    pub fn prepare(
        target: Target,
        restart: Option<RestartWith>,
        workload: &Workload,
    ) -> Result<(RealServer, Lsn), String> {
        let needs_restart = workload.steps.iter().any(|step| matches!(step, Step::Restart { .. }));
        if needs_restart && restart.is_none() {
            return Err("the workload has `restart` steps: give --pgdata (the server's data directory) so that \
                        conform can restart the server with pg_ctl"
                .to_string());
        }
        let mut admin = Connection::connect(&target, false).map_err(io)?;
        let show = |connection: &mut Connection, name: &str| -> Result<String, String> {
            connection.query_one(&format!("SHOW {name}")).map_err(io)?.ok_or_else(|| format!("SHOW {name} gave NULL"))
        };
        let wal_level = show(&mut admin, "wal_level")?;
        if wal_level != "logical" {
            return Err(format!("the server's wal_level is {wal_level}; logical decoding needs wal_level = logical"));
        }
        let version: u32 =
            show(&mut admin, "server_version_num")?.parse().map_err(|_| "server_version_num is not a number")?;
        if version / 10_000 != 15 {
            return Err(format!(
                "the server is PostgreSQL {}; the model conforms to PostgreSQL 15 (its view, its errors)",
                version / 10_000
            ));
        }
        let segment_size = show(&mut admin, "wal_segment_size")?;
        let wanted = format_size(workload.server.wal_segment_size_bytes);
        if segment_size != wanted {
            return Err(format!(
                "the server's wal_segment_size is {segment_size}, the workload's is {wanted} \
                 (a cluster's segment size is fixed by initdb --wal-segsize)"
            ));
        }
        let slots = workload.slots();
        for slot in &slots {
            let exists = admin
                .query_one(&format!("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}'"))
                .map_err(io)?;
            if exists.as_deref() != Some("0") {
                return Err(format!(
                    "a replication slot named {slot} already exists on the server; conform creates its own \
                     slots and would not touch it (drop it, or rename the workload's)"
                ));
            }
        }
        for database in &workload.databases {
            let exists = admin
                .query_one(&format!("SELECT count(*) FROM pg_database WHERE datname = '{database}'"))
                .map_err(io)?;
            if exists.as_deref() == Some("0") {
                admin.simple_query(&format!("CREATE DATABASE {database}")).map_err(io)?;
            }
        }
        let mut changed_settings = Vec::new();
        for (name, value) in settings(workload) {
            admin.simple_query(&format!("ALTER SYSTEM SET {name} = '{value}'")).map_err(io)?;
            changed_settings.push(name);
        }
        admin.simple_query("SELECT pg_reload_conf()").map_err(io)?;
        let mut server = RealServer {
            target,
            restart,
            connections: BTreeMap::new(),
            names: Arc::new(Mutex::new(BTreeMap::new())),
            detailed: Vec::new(),
            sessions: BTreeMap::new(),
            exported: BTreeMap::new(),
            next_id: BTreeMap::new(),
            streams: BTreeMap::new(),
            created_slots: Vec::new(),
            slots,
            slot_databases: BTreeMap::new(),
            changed_settings,
        };
        for database in &workload.databases {
            let connection = server.connection(database)?;
            connection
                .simple_query(&format!("CREATE TABLE IF NOT EXISTS {TABLE} (id bigint PRIMARY KEY, v integer)"))
                .map_err(io)?;
            connection.simple_query(&format!("TRUNCATE {TABLE}")).map_err(io)?;
            let publications = connection
                .query_one(&format!("SELECT count(*) FROM pg_publication WHERE pubname = '{PUBLICATION}'"))
                .map_err(io)?;
            if publications.as_deref() == Some("0") {
                connection.simple_query(&format!("CREATE PUBLICATION {PUBLICATION} FOR TABLE {TABLE}")).map_err(io)?;
            }
        }
        // The reload reaches every process at its next command or wake-up.
        let deadline = Instant::now() + Duration::from_secs(10);
        for (name, value) in settings(workload) {
            loop {
                let mut fresh = Connection::connect(&server.target, false).map_err(io)?;
                let shown = show(&mut fresh, name)?;
                if same_setting(&shown, &value) {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(format!("the server still shows {name} = {shown} after a reload, not {value}"));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let start = server.settle_start()?;
        Ok((server, start))
    }

    /// A WAL switch, a checkpoint, and the background writer's next RX; returns the insert LSN.
    fn settle_start(&mut self) -> Result<Lsn, String> {
        let connection = self.admin()?;
        connection.simple_query("SELECT pg_switch_wal()").map_err(io)?;
        connection.simple_query("CHECKPOINT").map_err(io)?;
        let insert = |connection: &mut Connection| -> Result<Lsn, String> {
            let text = connection.query_one("SELECT pg_current_wal_insert_lsn()").map_err(io)?.unwrap_or_default();
            Lsn::parse(&text).ok_or_else(|| format!("`{text}` is not an LSN"))
        };
        let after_checkpoint = insert(connection)?;
        // The checkpoint record is important WAL, so the background writer writes an RX within
        // LOG_SNAPSHOT_INTERVAL_MS (15 s) plus its hibernation (up to 10 s).
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let now = insert(connection)?;
            if now != after_checkpoint {
                // Let a second record (there should be none) show before starting.
                std::thread::sleep(Duration::from_millis(300));
                return insert(connection);
            }
            if Instant::now() > deadline {
                return Err("the background writer wrote no running-xacts record within 40 s of a checkpoint".into());
            }
        }
    }

    fn admin(&mut self) -> Result<&mut Connection, String> {
        let database = self.target.dbname.clone();
        self.connection(&database)
    }

    fn connection(&mut self, database: &str) -> Result<&mut Connection, String> {
        if !self.connections.contains_key(database) {
            let connection = Connection::connect(&self.target.with_dbname(database), false)
                .map_err(|e| format!("cannot connect to database {database}: {e}"))?;
            self.connections.insert(database.to_string(), connection);
        }
        Ok(self.connections.get_mut(database).expect("inserted"))
    }

    /// Runs one step. A failure to talk to the server is an `Err`; an error the server gives a
    /// step is part of the outcome.
    pub fn apply(&mut self, step: &Step) -> Result<Outcome, String> {
        let outcome = match step {
            Step::CreateSlot { slot, database, session: Some(session), export_snapshot } => {
                self.start_creation(slot, database, session, *export_snapshot)?
            }
            Step::CreateSlot { slot, database, session: None, .. } => {
                let result = self
                    .connection(database)?
                    .simple_query(&format!("SELECT * FROM pg_create_logical_replication_slot('{slot}', 'pgoutput')"));
                if result.is_ok() {
                    self.created_slots.push(slot.clone());
                    self.slot_databases.insert(slot.clone(), database.clone());
                }
                sql_outcome(result.map(|_| ()))?
            }
            Step::Write { bytes, database } => {
                let payload = message_payload_bytes(*bytes);
                let connection = self.connection(database)?;
                connection
                    .simple_query(&format!(
                        "BEGIN; SELECT pg_logical_emit_message(true, '{MESSAGE_PREFIX}', repeat('x', {payload})); COMMIT"
                    ))
                    .map_err(io)?;
                Outcome::default()
            }
            Step::Transaction { name, database, inserts, updates, deletes } => {
                let first = *self.next_id.get(database).unwrap_or(&0) + 1;
                self.next_id.insert(database.clone(), first - 1 + u64::from(*inserts));
                let connection = self.connection(database)?;
                connection.simple_query("BEGIN").map_err(io)?;
                if *inserts > 0 {
                    let last = first + u64::from(*inserts) - 1;
                    connection
                        .simple_query(&format!(
                            "INSERT INTO {TABLE} (id, v) SELECT g, 0 FROM generate_series({first}, {last}) g"
                        ))
                        .map_err(io)?;
                }
                if *updates > 0 {
                    connection
                        .simple_query(&format!(
                            "UPDATE {TABLE} SET v = v + 1 WHERE id IN (SELECT id FROM {TABLE} ORDER BY id LIMIT {updates})"
                        ))
                        .map_err(io)?;
                }
                if *deletes > 0 {
                    connection
                        .simple_query(&format!(
                            "DELETE FROM {TABLE} WHERE id IN (SELECT id FROM {TABLE} ORDER BY id LIMIT {deletes})"
                        ))
                        .map_err(io)?;
                }
                let xid = connection.query_one("SELECT pg_current_xact_id()::text").map_err(io)?.unwrap_or_default();
                connection.simple_query("COMMIT").map_err(io)?;
                // An xid8 is epoch << 32 | xid; pgoutput sends the 32-bit xid.
                let xid = xid.parse::<u64>().map_err(|_| format!("pg_current_xact_id() gave `{xid}`"))? as u32;
                self.names.lock().expect("not poisoned").insert(xid, name.clone());
                Outcome::default()
            }
            Step::Checkpoint => {
                self.admin()?.simple_query("CHECKPOINT").map_err(io)?;
                Outcome::default()
            }
            Step::SwitchWal => {
                self.admin()?.simple_query("SELECT pg_switch_wal()").map_err(io)?;
                Outcome::default()
            }
            Step::AdvanceSlot { slot, to } => {
                let target = self.position(slot, *to)?;
                // A logical slot is advanced from its own database.
                let database = self.slot_database(slot);
                let result = self
                    .connection(&database)?
                    .simple_query(&format!("SELECT * FROM pg_replication_slot_advance('{slot}', '{target}')"));
                sql_outcome(result.map(|_| ()))?
            }
            Step::GetChanges { slot } | Step::PeekChanges { slot } => {
                let function = if matches!(step, Step::GetChanges { .. }) { "get" } else { "peek" };
                let database = self.slot_database(slot);
                let result = self.connection(&database)?.simple_query(&format!(
                    "SELECT data FROM pg_logical_slot_{function}_binary_changes('{slot}', NULL, NULL, \
                     'proto_version', '1', 'publication_names', '{PUBLICATION}')"
                ));
                match result {
                    Ok(rows) => {
                        let mut decoder = Decoder::default();
                        for row in &rows {
                            let data = row.first().cloned().flatten().unwrap_or_default();
                            let bytes = hex_bytea(&data).ok_or_else(|| format!("`{data}` is not a bytea"))?;
                            decoder.feed(parse_pgoutput(&bytes).map_err(io)?);
                        }
                        Outcome { delivered: Some(self.named(&decoder.delivered)), ..Outcome::default() }
                    }
                    Err(error) => sql_outcome(Err(error))?,
                }
            }
            Step::Stream { slot, seconds, confirm, start, messages } => {
                let started = self.start_stream(slot, *confirm, *start, *messages)?;
                if started.error.is_some() {
                    return Ok(started);
                }
                std::thread::sleep(Duration::from_secs(*seconds));
                self.stop_stream(slot)?
            }
            Step::StartStream { slot, confirm, start, messages } => {
                self.start_stream(slot, *confirm, *start, *messages)?
            }
            Step::StopStream { slot } => self.stop_stream(slot)?,
            Step::DropSlot { slot } => {
                let result = self.admin()?.simple_query(&format!("SELECT pg_drop_replication_slot('{slot}')"));
                if result.is_ok() {
                    self.created_slots.retain(|created| created != slot);
                }
                sql_outcome(result.map(|_| ()))?
            }
            Step::Restart { mode } => {
                let restart = self.restart.as_ref().ok_or("a restart step needs --pgdata")?;
                // The connections die with the server.
                self.connections.clear();
                restart
                    .pg_ctl
                    .restart(&restart.data_dir, if *mode == RestartMode::Fast { "fast" } else { "immediate" })?;
                Outcome::default()
            }
            Step::Sleep { seconds } | Step::Idle { seconds, .. } => {
                std::thread::sleep(Duration::from_secs(*seconds));
                Outcome::default()
            }
            Step::Open { session, database } => {
                let mut connection = Connection::connect(&self.target.with_dbname(database), false)
                    .map_err(|e| format!("cannot connect to database {database}: {e}"))?;
                // A multi-row UPDATE or DELETE visits its rows by the primary key index, in
                // ascending id order (a btree scan sorts an `IN` list), as the model does.
                connection.simple_query("SET enable_seqscan = off; SET enable_bitmapscan = off").map_err(io)?;
                self.sessions.insert(session.clone(), Session { connection, block: None, xid: None, creation: None });
                Outcome::default()
            }
            Step::Begin { session, txn, isolation } => {
                let result = self
                    .session(session)?
                    .connection
                    .simple_query(&format!("BEGIN ISOLATION LEVEL {}", isolation.name()));
                if result.is_ok() {
                    let session = self.session(session)?;
                    session.block = Some(txn.clone());
                    session.xid = None;
                }
                sql_outcome(result.map(|_| ()))?
            }
            Step::Statement { session, kind, ids, txn } => {
                let list: Vec<String> = ids.iter().map(i64::to_string).collect();
                let sql = match kind {
                    StatementKind::Insert => {
                        let values: Vec<String> = ids.iter().map(|id| format!("({id}, 0)")).collect();
                        format!("INSERT INTO {TABLE} (id, v) VALUES {}", values.join(", "))
                    }
                    StatementKind::Update => format!("UPDATE {TABLE} SET v = v + 1 WHERE id IN ({})", list.join(", ")),
                    StatementKind::Delete => format!("DELETE FROM {TABLE} WHERE id IN ({})", list.join(", ")),
                };
                self.write(session, &sql, txn.as_deref())?
            }
            Step::Message { session, transactional, prefix, content, txn } => {
                let sql = format!(
                    "SELECT pg_logical_emit_message({transactional}, '{prefix}', '{}')",
                    content.replace('\'', "''")
                );
                let in_block = self.session(session)?.block.is_some();
                let outcome = self.write(session, &sql, txn.as_deref())?;
                if !*transactional && !in_block {
                    // A non-transactional message is not flushed when written (`LogLogicalMessage`
                    // without `flush`, PostgreSQL 15). Outside a block its implicit transaction
                    // commits asynchronously (`XLogSetAsyncXactLSN`), so the WAL writer flushes it
                    // within wal_writer_delay: wait for it, as after an ABORT record. (Inside a
                    // block nothing asks for that flush; the block's COMMIT does it.)
                    let after = self
                        .session(session)?
                        .connection
                        .query_one("SELECT pg_current_wal_insert_lsn()::text")
                        .map_err(io)?;
                    self.wait_for_flush(after.as_deref().unwrap_or_default())?;
                }
                outcome
            }
            Step::Commit { session } | Step::Rollback { session } => {
                let rollback = matches!(step, Step::Rollback { .. });
                let connection = &mut self.session(session)?.connection;
                let result = connection.simple_query(if rollback { "ROLLBACK" } else { "COMMIT" });
                let after = connection.query_one("SELECT pg_current_wal_insert_lsn()::text").map_err(io)?;
                let session = self.session(session)?;
                session.block = None;
                if rollback && session.xid.take().is_some() {
                    // An ABORT record is flushed by the WAL writer within wal_writer_delay, not
                    // at once (`XLogSetAsyncXactLSN`); decoding reads only flushed WAL. Wait for
                    // it, so the steps after see the server as it is a moment later.
                    self.wait_for_flush(after.as_deref().unwrap_or_default())?;
                }
                sql_outcome(result.map(|_| ()))?
            }
            Step::ImportSnapshot { session, slot } => {
                let name = self.exported.get(slot).cloned();
                let Some(name) = name else {
                    return Ok(Outcome {
                        error: Some(ErrorClass::Other(format!("the creation of {slot} exported no snapshot"))),
                        ..Outcome::default()
                    });
                };
                let session = self.session(session)?;
                session.block = Some(None);
                let result = session
                    .connection
                    .simple_query(&format!("BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT '{name}'"));
                sql_outcome(result.map(|_| ()))?
            }
            Step::Select { session } => {
                let result =
                    self.session(session)?.connection.simple_query(&format!("SELECT id FROM {TABLE} ORDER BY id"));
                match result {
                    Ok(rows) => {
                        let ids = rows
                            .iter()
                            .map(|row| {
                                let id = row.first().cloned().flatten().unwrap_or_default();
                                id.parse::<i64>().map_err(|_| format!("`{id}` is not an id"))
                            })
                            .collect::<Result<Vec<i64>, String>>()?;
                        Outcome { rows: Some(ids), ..Outcome::default() }
                    }
                    Err(error) => sql_outcome(Err(error))?,
                }
            }
            Step::CurrentSnapshot { session } => {
                let result = self.session(session)?.connection.query_one("SELECT pg_current_snapshot()::text");
                match result {
                    Ok(text) => {
                        let text = text.unwrap_or_default();
                        let (xmin, xmax, xip) =
                            parse_snapshot(&text).ok_or_else(|| format!("`{text}` is not a snapshot"))?;
                        let landmarks = Landmarks { steps: Vec::new(), xids: self.xids() };
                        Outcome { snapshot: Some(landmarks.place_snapshot(xmin, xmax, &xip)), ..Outcome::default() }
                    }
                    Err(error) => sql_outcome(Err(error))?,
                }
            }
            Step::Close { session } => {
                self.sessions.remove(session);
                Outcome::default()
            }
        };
        let creations = self.settle()?;
        Ok(Outcome { creations, ..outcome })
    }

    fn session(&mut self, name: &str) -> Result<&mut Session, String> {
        self.sessions.get_mut(name).ok_or_else(|| format!("session {name} is not open"))
    }

    /// A write in a session: inside its block (whose xid, once it has one, gets the block's
    /// name), or autocommit as the transaction `txn` (the statement and the query of its xid in
    /// one implicit transaction, which writes the same WAL as the statement alone).
    fn write(&mut self, name: &str, sql: &str, txn: Option<&str>) -> Result<Outcome, String> {
        let session = self.session(name)?;
        let in_block = session.block.is_some();
        let result = session.connection.simple_query(&format!("{sql}; SELECT pg_current_xact_id_if_assigned()::text"));
        let rows = match result {
            Ok(rows) => rows,
            Err(error) => return sql_outcome(Err(error)),
        };
        let xid = rows.first().and_then(|row| row.first().cloned().flatten());
        let Some(xid) = xid else { return Ok(Outcome::default()) };
        // An xid8 is epoch << 32 | xid; the server's 32-bit xid is its low half.
        let xid = xid.parse::<u64>().map_err(|_| format!("pg_current_xact_id_if_assigned() gave `{xid}`"))? as u32;
        let block_name = session.block.clone().flatten();
        if in_block {
            session.xid = Some(xid);
        }
        if let Some(name) = txn.map(str::to_string).or(block_name) {
            self.names.lock().expect("not poisoned").insert(xid, name);
            if !self.detailed.contains(&xid) {
                self.detailed.push(xid);
            }
        }
        Ok(Outcome::default())
    }

    /// Waits (up to 10 s) until the server has flushed its WAL to `lsn`.
    fn wait_for_flush(&mut self, lsn: &str) -> Result<(), String> {
        if Lsn::parse(lsn).is_none() {
            return Err(format!("`{lsn}` is not an LSN"));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let flushed = self
                .admin()?
                .query_one(&format!("SELECT pg_current_wal_flush_lsn() >= '{lsn}'::pg_lsn"))
                .map_err(io)?;
            if flushed.as_deref() == Some("t") {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("the server had not flushed its WAL to {lsn} (an ABORT record) after 10 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends a slot creation on a new session of its own and does not wait for it.
    fn start_creation(&mut self, slot: &str, database: &str, session: &str, exports: bool) -> Result<Outcome, String> {
        let mut connection = Connection::connect(&self.target.with_dbname(database), exports)
            .map_err(|e| format!("cannot connect to database {database}: {e}"))?;
        let pid = connection.query_one("SELECT pg_backend_pid()::text").map_err(io)?.unwrap_or_default();
        let command = if exports {
            format!("CREATE_REPLICATION_SLOT {slot} LOGICAL pgoutput EXPORT_SNAPSHOT")
        } else {
            format!("SELECT * FROM pg_create_logical_replication_slot('{slot}', 'pgoutput')")
        };
        connection.send_query(&command).map_err(io)?;
        self.created_slots.push(slot.to_string());
        self.slot_databases.insert(slot.to_string(), database.to_string());
        let creation = Some(Creation { slot: slot.to_string(), pid, exports });
        self.sessions.insert(session.to_string(), Session { connection, block: None, xid: None, creation });
        Ok(Outcome::default())
    }

    /// Where each slot creation stands: finished, or waiting for a transaction (an ungranted
    /// lock on a transaction id in `pg_locks`). Between the two it is on its way (writing a
    /// running-xacts record, taking the next lock): asked again until it is one or the other.
    fn creations(&mut self) -> Result<Option<Vec<String>>, String> {
        let names: Vec<String> = self
            .sessions
            .iter()
            .filter(|(_, session)| session.creation.is_some())
            .map(|(name, _)| name.clone())
            .collect();
        if names.is_empty() {
            return Ok(None);
        }
        let mut report = Vec::new();
        for name in names {
            let deadline = Instant::now() + Duration::from_secs(30);
            let state = loop {
                let session = self.sessions.get_mut(&name).expect("listed");
                let creation = session.creation.as_ref().expect("listed");
                let (pid, slot, exports) = (creation.pid.clone(), creation.slot.clone(), creation.exports);
                match session.connection.poll_result(Duration::from_millis(20)) {
                    Ok(Some(rows)) => {
                        if exports {
                            // slot_name, consistent_point, snapshot_name, output_plugin.
                            let snapshot = rows.first().and_then(|row| row.get(2).cloned().flatten());
                            let snapshot = snapshot.ok_or("CREATE_REPLICATION_SLOT returned no snapshot name")?;
                            self.exported.insert(slot, snapshot);
                        }
                        break CreationState::Created;
                    }
                    Ok(None) => {}
                    Err(error) => match classify(&error) {
                        Some(class) => break CreationState::Failed(class),
                        None => return Err(format!("creating slot {slot}: {error}")),
                    },
                }
                let waiting = self
                    .admin()?
                    .query_one(&format!(
                        "SELECT count(*) FROM pg_locks WHERE pid = {pid} AND locktype = 'transactionid' AND NOT granted"
                    ))
                    .map_err(io)?;
                if waiting.as_deref() != Some("0") {
                    break CreationState::Waiting;
                }
                if Instant::now() > deadline {
                    return Err(format!("the creation of slot {slot} neither finished nor waited within 30 s"));
                }
            };
            let session = self.sessions.get_mut(&name).expect("listed");
            let slot = session.creation.as_ref().expect("listed").slot.clone();
            report.push(match state {
                CreationState::Waiting => format!("{slot} waiting"),
                CreationState::Created => {
                    session.creation = None;
                    format!("{slot} created")
                }
                CreationState::Failed(class) => {
                    session.creation = None;
                    format!("{slot} failed: {class}")
                }
            });
        }
        Ok(Some(report))
    }

    /// Workload transaction names by xid.
    pub fn xids(&self) -> BTreeMap<u32, String> {
        self.names.lock().expect("not poisoned").clone()
    }

    fn slot_database(&self, slot: &str) -> String {
        self.slot_databases.get(slot).cloned().unwrap_or_else(|| self.target.dbname.clone())
    }

    fn named(&self, deliveries: &[Delivery]) -> Vec<String> {
        delivered_text(deliveries, &self.names.lock().expect("not poisoned"), &self.detailed)
    }

    /// A symbolic position resolved against this server's slot.
    fn position(&mut self, slot: &str, position: Position) -> Result<String, String> {
        let column = match position {
            Position::Zero => return Ok("0/0".to_string()),
            Position::Current => return Ok(self.current_lsn()?.to_string()),
            Position::RestartLsn => "restart_lsn",
            Position::ConfirmedFlush => "confirmed_flush_lsn",
        };
        let value = self
            .admin()?
            .query_one(&format!("SELECT {column}::text FROM pg_replication_slots WHERE slot_name = '{slot}'"))
            .map_err(io)?;
        // A missing slot or a NULL position: 0/0, which the server refuses as the model does.
        Ok(value.unwrap_or_else(|| "0/0".to_string()))
    }

    fn current_lsn(&mut self) -> Result<Lsn, String> {
        let text = self.admin()?.query_one("SELECT pg_current_wal_lsn()::text").map_err(io)?.unwrap_or_default();
        Lsn::parse(&text).ok_or_else(|| format!("`{text}` is not an LSN"))
    }

    fn start_stream(
        &mut self,
        slot: &str,
        confirm: Confirm,
        start: Position,
        messages: bool,
    ) -> Result<Outcome, String> {
        let start = self.position(slot, start)?;
        let target = self.target.with_dbname(&self.slot_database(slot));
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU64::new(0));
        let (started_tx, started_rx) = mpsc::channel::<Result<(), PgError>>();
        let slot_name = slot.to_string();
        let thread = {
            let stop = stop.clone();
            let received = received.clone();
            std::thread::spawn(move || {
                consume(Consumer { target, slot: slot_name, start, confirm, messages }, stop, received, started_tx)
            })
        };
        match started_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                let _ = thread.join();
                return sql_outcome(Err(error));
            }
            Err(_) => return Err(format!("START_REPLICATION on slot {slot} did not answer within 30 s")),
        }
        self.streams.insert(slot.to_string(), StreamHandle { stop, received, thread });
        Ok(Outcome::default())
    }

    fn stop_stream(&mut self, slot: &str) -> Result<Outcome, String> {
        let Some(handle) = self.streams.remove(slot) else {
            return Ok(Outcome {
                error: Some(ErrorClass::Other(format!("no stream is open on slot {slot}"))),
                ..Outcome::default()
            });
        };
        handle.stop.store(true, Ordering::SeqCst);
        let result = handle.thread.join().map_err(|_| format!("the consumer of slot {slot} panicked"))?;
        if let Some(error) = result.error {
            return Err(format!("the consumer of slot {slot} failed: {error}"));
        }
        // The walsender releases the slot as it leaves; wait for that before the next step.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let active = self
                .admin()?
                .query_one(&format!("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}' AND active"))
                .map_err(io)?;
            if active.as_deref() != Some("1") {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Outcome {
            delivered: Some(self.named(&result.delivered)),
            ended_by_server: Some(result.ended_by_server),
            ..Outcome::default()
        })
    }

    /// Waits until the checkpointer is idle, every open stream has heard of the end of WAL and
    /// every slot creation has finished or waits for a transaction; returns where the creations
    /// stand.
    fn settle(&mut self) -> Result<Option<Vec<String>>, String> {
        let creations = self.creations()?;
        std::thread::sleep(Duration::from_millis(50));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let state = self
                .admin()?
                .query_one(
                    "SELECT coalesce(wait_event, 'running') FROM pg_stat_activity WHERE backend_type = 'checkpointer'",
                )
                .map_err(io)?;
            if state.as_deref() == Some("CheckpointerMain") {
                break;
            }
            if Instant::now() > deadline {
                let state = state.as_deref().unwrap_or("no checkpointer process");
                return Err(format!("the checkpointer was still busy ({state}) after 60 s"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if !self.streams.is_empty() {
            let end = self.current_lsn()?;
            let deadline = Instant::now() + Duration::from_secs(10);
            for handle in self.streams.values() {
                while handle.received.load(Ordering::SeqCst) < end.0 && !handle.thread.is_finished() {
                    if Instant::now() > deadline {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            // The consumer's confirmation reaches the slot with the walsender's next read.
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(creations)
    }

    /// `pg_replication_slots` for the workload's slots, and the write pointer.
    pub fn view(&mut self) -> Result<ServerView, String> {
        let current = self.current_lsn()?;
        let text = self.admin()?.query_one("SELECT pg_current_wal_insert_lsn()::text").map_err(io)?.unwrap_or_default();
        let insert_lsn = Lsn::parse(&text).ok_or_else(|| format!("`{text}` is not an LSN"))?;
        let names: Vec<String> = self.slots.iter().map(|slot| format!("'{slot}'")).collect();
        let rows = self
            .admin()?
            .simple_query(&format!(
                "SELECT slot_name::text, wal_status, restart_lsn::text, confirmed_flush_lsn::text, safe_wal_size::text, \
                 active::text, catalog_xmin::text FROM pg_replication_slots WHERE slot_name IN ({}) ORDER BY slot_name",
                if names.is_empty() { "NULL".to_string() } else { names.join(", ") }
            ))
            .map_err(io)?;
        let lsn = |value: &Option<String>| value.as_deref().and_then(Lsn::parse);
        let slots = rows
            .iter()
            .map(|row| {
                let column = |index: usize| row.get(index).cloned().flatten();
                SlotRow {
                    name: column(0).unwrap_or_default(),
                    wal_status: column(1),
                    restart_lsn: lsn(&column(2)),
                    confirmed_flush: lsn(&column(3)),
                    safe_wal_size: column(4).and_then(|size| size.parse().ok()),
                    active: column(5).as_deref() == Some("true"),
                    catalog_xmin: column(6).and_then(|xid| xid.parse().ok()),
                }
            })
            .collect();
        Ok(ServerView { current_lsn: current, insert_lsn, slots })
    }

    /// Stops streams, drops the slots this run created, resets the settings it changed.
    pub fn finish(mut self) -> Result<(), String> {
        for handle in std::mem::take(&mut self.streams).into_values() {
            handle.stop.store(true, Ordering::SeqCst);
            let _ = handle.thread.join();
        }
        let created = std::mem::take(&mut self.created_slots);
        for slot in created {
            let _ = self.admin()?.simple_query(&format!("SELECT pg_drop_replication_slot('{slot}')"));
        }
        let changed = std::mem::take(&mut self.changed_settings);
        for name in changed {
            self.admin()?.simple_query(&format!("ALTER SYSTEM RESET {name}")).map_err(io)?;
        }
        self.admin()?.simple_query("SELECT pg_reload_conf()").map_err(io)?;
        Ok(())
    }
}

/// Whether `SHOW`'s rendering of a setting is the value set (`4MB` vs `4MB`, `1d` vs `86400s`).
fn same_setting(shown: &str, value: &str) -> bool {
    if shown == value {
        return true;
    }
    let size = |text: &str| super::workload::parse_size_bytes(text).ok();
    let time = |text: &str| super::workload::parse_seconds(text).ok();
    (size(shown).is_some() && size(shown) == size(value)) || (time(shown).is_some() && time(shown) == time(value))
}

/// An error the server gave a step, as the step's outcome; a broken connection stays an error.
fn sql_outcome(result: Result<(), PgError>) -> Result<Outcome, String> {
    match result {
        Ok(()) => Ok(Outcome::default()),
        Err(error) => match classify(&error) {
            Some(class) => Ok(Outcome { error: Some(class), ..Outcome::default() }),
            None => Err(error.to_string()),
        },
    }
}

/// The class of a server error (`None` for I/O and protocol failures).
pub fn classify(error: &PgError) -> Option<ErrorClass> {
    let PgError::Server { code, message, .. } = error else {
        return None;
    };
    Some(match code.as_str() {
        "42704" => ErrorClass::SlotMissing,
        "42710" => ErrorClass::SlotExists,
        "55006" => ErrorClass::SlotActive,
        _ => match ErrorClass::from_message(message) {
            ErrorClass::Other(_) => ErrorClass::Other(format!("{code} {message}")),
            class => class,
        },
    })
}

/// What pgoutput sent, as deliveries: transactions with their contents, and the
/// non-transactional messages between them.
#[derive(Default)]
struct Decoder {
    delivered: Vec<Delivery>,
    /// The transaction begun and not yet committed: its xid and contents.
    open: Option<(u32, Vec<String>)>,
}

impl Decoder {
    fn feed(&mut self, message: PgOutput) {
        match message {
            PgOutput::Begin { xid, .. } => self.open = Some((xid, Vec::new())),
            PgOutput::Change { kind, first_column } => {
                let kind = match kind {
                    b'I' => "insert",
                    b'U' => "update",
                    _ => "delete",
                };
                if let Some((_, contents)) = self.open.as_mut() {
                    contents.push(change_text(kind, first_column.as_deref().unwrap_or("NULL")));
                }
            }
            PgOutput::Message { transactional, prefix, content, .. } => {
                let text = message_text(transactional, &prefix, content.len() as u64);
                match self.open.as_mut() {
                    Some((_, contents)) if transactional => contents.push(text),
                    _ => self.delivered.push(Delivery::Message { text }),
                }
            }
            PgOutput::Commit { .. } => {
                if let Some((xid, contents)) = self.open.take() {
                    self.delivered.push(Delivery::Transaction { xid, contents });
                }
            }
            PgOutput::Other(_) => {}
        }
    }
}

/// A bytea's text output (`\x0a1b…`) as bytes.
fn hex_bytea(text: &str) -> Option<Vec<u8>> {
    let hex = text.strip_prefix("\\x")?;
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len()).step_by(2).map(|at| u8::from_str_radix(hex.get(at..at + 2)?, 16).ok()).collect()
}

/// `pg_current_snapshot()`'s text, `xmin:xmax:xip1,xip2`, as 32-bit xids.
fn parse_snapshot(text: &str) -> Option<(u32, u32, Vec<u32>)> {
    let mut parts = text.split(':');
    let xid = |text: &str| text.parse::<u64>().ok().map(|xid| xid as u32);
    let xmin = xid(parts.next()?)?;
    let xmax = xid(parts.next()?)?;
    let xip = parts.next()?;
    let xip = if xip.is_empty() { Vec::new() } else { xip.split(',').map(xid).collect::<Option<Vec<u32>>>()? };
    Some((xmin, xmax, xip))
}

/// What a consumer thread streams and how it confirms.
struct Consumer {
    target: Target,
    slot: String,
    start: String,
    confirm: Confirm,
    /// pgoutput's `messages` option.
    messages: bool,
}

/// The consumer thread: `START_REPLICATION`, then read, confirm as told, until stopped or
/// ended by the server.
fn consume(
    consumer: Consumer,
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
    started: mpsc::Sender<Result<(), PgError>>,
) -> StreamResult {
    let Consumer { target, slot, start, confirm, messages } = consumer;
    let mut result = StreamResult { delivered: Vec::new(), ended_by_server: false, error: None };
    let mut decoder = Decoder::default();
    let connection = match Connection::connect(&target, true) {
        Ok(connection) => connection,
        Err(error) => {
            let _ = started.send(Err(error));
            return result;
        }
    };
    let mut options = vec![("proto_version", "1"), ("publication_names", PUBLICATION)];
    if messages {
        options.push(("messages", "true"));
    }
    let mut stream = match connection.start_replication(&slot, &start, &options) {
        Ok(stream) => stream,
        Err(error) => {
            let _ = started.send(Err(error));
            return result;
        }
    };
    let _ = started.send(Ok(()));
    // pgjdbc's state: the last flush sent explicitly, the flush to report, the start of the
    // last data message.
    let mut explicit_flush = 0u64;
    let mut flush = 0u64;
    let mut last_data_start = 0u64;
    let mut written = 0u64;
    while !stop.load(Ordering::SeqCst) {
        match stream.recv(Duration::from_millis(100)) {
            Ok(None) => {}
            Ok(Some(ReplicationMessage::XLogData { wal_start, wal_end, data })) => {
                received.fetch_max(wal_end.max(wal_start), Ordering::SeqCst);
                written = written.max(wal_start);
                last_data_start = wal_start;
                let message = parse_pgoutput(&data);
                if let Ok(message) = &message {
                    decoder.feed(message.clone());
                    let known = result.delivered.len();
                    result.delivered.extend(decoder.delivered[known..].iter().cloned());
                }
                match message {
                    Ok(PgOutput::Commit { end_lsn, .. }) => {
                        if confirm != Confirm::None {
                            explicit_flush = end_lsn;
                            flush = flush.max(end_lsn);
                            if stream.send_status(written, flush, flush, false).is_err() {
                                // The server closed the stream under us.
                                result.ended_by_server = true;
                                return result;
                            }
                        }
                    }
                    Ok(_) => {}
                    Err(error) => {
                        result.error = Some(error.to_string());
                        return result;
                    }
                }
            }
            Ok(Some(ReplicationMessage::Keepalive { wal_end, reply_requested })) => {
                received.fetch_max(wal_end, Ordering::SeqCst);
                // Received (written) is not confirmed (flushed): reporting it moves no slot, and
                // it lets a fast shutdown finish without waiting for wal_sender_timeout.
                written = written.max(wal_end);
                let mut send = reply_requested;
                if confirm == Confirm::Keepalive
                    && explicit_flush >= last_data_start
                    && wal_end > explicit_flush
                    && wal_end > flush
                {
                    flush = wal_end;
                    send = true;
                }
                if send && stream.send_status(written.max(flush), flush, flush, false).is_err() {
                    result.ended_by_server = true;
                    return result;
                }
            }
            Err(_) => {
                result.ended_by_server = true;
                return result;
            }
        }
    }
    let _ = stream.stop();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_bytea_and_snapshots_as_postgresql_prints_them() {
        assert_eq!(hex_bytea("\\x42000a"), Some(vec![0x42, 0x00, 0x0a]));
        assert_eq!(hex_bytea("\\x4"), None);
        assert_eq!(hex_bytea("42"), None);
        assert_eq!(parse_snapshot("753:753:"), Some((753, 753, Vec::new())));
        // xid8 values carry the epoch in their high half.
        assert_eq!(parse_snapshot("4294968049:4294968052:4294968050,4294968051"), Some((753, 756, vec![754, 755])));
        assert_eq!(parse_snapshot("753:753"), None);
    }

    /// A session's transactions are delivered with their contents; a message is inside its
    /// transaction when transactional, between transactions otherwise.
    #[test]
    fn the_decoder_groups_what_pgoutput_sends() {
        let mut decoder = Decoder::default();
        for message in [
            PgOutput::Message { transactional: false, lsn: 1, prefix: "y".into(), content: vec![0; 3] },
            PgOutput::Begin { final_lsn: 9, xid: 764 },
            PgOutput::Other(b'R'),
            PgOutput::Change { kind: b'I', first_column: Some("170".into()) },
            PgOutput::Message { transactional: true, lsn: 5, prefix: "x".into(), content: vec![0; 8] },
            PgOutput::Change { kind: b'D', first_column: Some("171".into()) },
            PgOutput::Commit { commit_lsn: 9, end_lsn: 10 },
        ] {
            decoder.feed(message);
        }
        assert_eq!(
            decoder.delivered,
            [
                Delivery::Message { text: "non-transactional message y 3B".into() },
                Delivery::Transaction {
                    xid: 764,
                    contents: vec!["insert 170".into(), "message x 8B".into(), "delete 171".into()]
                },
            ]
        );
    }
}
