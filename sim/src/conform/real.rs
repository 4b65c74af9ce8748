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

use super::observe::{ErrorClass, Outcome, ServerView, SlotRow};
use super::pgserver::PgCtl;
use super::pgwire::{Connection, PgError, PgOutput, ReplicationMessage, Target, parse_pgoutput};
use super::workload::{
    Confirm, MESSAGE_PREFIX, PUBLICATION, Position, RestartMode, Step, TABLE, Workload, format_size,
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
    delivered_xids: Vec<u32>,
    ended_by_server: bool,
    error: Option<String>,
}

/// A connection to the real server.
pub struct RealServer {
    target: Target,
    restart: Option<RestartWith>,
    connections: BTreeMap<String, Connection>,
    /// Transaction ids by workload name.
    names: Arc<Mutex<BTreeMap<u32, String>>>,
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
            Step::CreateSlot { slot, database } => {
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
                    "SELECT xid::text FROM pg_logical_slot_{function}_binary_changes('{slot}', NULL, NULL, \
                     'proto_version', '1', 'publication_names', '{PUBLICATION}') WHERE get_byte(data, 0) = 66"
                ));
                match result {
                    Ok(rows) => {
                        let xids: Vec<u32> = rows
                            .iter()
                            .filter_map(|row| row.first().cloned().flatten())
                            .filter_map(|xid| xid.parse().ok())
                            .collect();
                        Outcome { delivered: Some(self.named(&xids)), ..Outcome::default() }
                    }
                    Err(error) => sql_outcome(Err(error))?,
                }
            }
            Step::Stream { slot, seconds, confirm, start } => {
                let started = self.start_stream(slot, *confirm, *start)?;
                if started.error.is_some() {
                    return Ok(started);
                }
                std::thread::sleep(Duration::from_secs(*seconds));
                self.stop_stream(slot)?
            }
            Step::StartStream { slot, confirm, start } => self.start_stream(slot, *confirm, *start)?,
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
            Step::Sleep { seconds } => {
                std::thread::sleep(Duration::from_secs(*seconds));
                Outcome::default()
            }
        };
        self.settle()?;
        Ok(outcome)
    }

    fn slot_database(&self, slot: &str) -> String {
        self.slot_databases.get(slot).cloned().unwrap_or_else(|| self.target.dbname.clone())
    }

    fn named(&self, xids: &[u32]) -> Vec<String> {
        let names = self.names.lock().expect("not poisoned");
        xids.iter().map(|xid| names.get(xid).cloned().unwrap_or_else(|| format!("xid {xid}"))).collect()
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

    fn start_stream(&mut self, slot: &str, confirm: Confirm, start: Position) -> Result<Outcome, String> {
        let start = self.position(slot, start)?;
        let target = self.target.with_dbname(&self.slot_database(slot));
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU64::new(0));
        let (started_tx, started_rx) = mpsc::channel::<Result<(), PgError>>();
        let slot_name = slot.to_string();
        let thread = {
            let stop = stop.clone();
            let received = received.clone();
            std::thread::spawn(move || consume(target, slot_name, start, confirm, stop, received, started_tx))
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
            delivered: Some(self.named(&result.delivered_xids)),
            ended_by_server: Some(result.ended_by_server),
            error: None,
        })
    }

    /// Waits until the checkpointer is idle and every open stream has heard of the end of WAL.
    fn settle(&mut self) -> Result<(), String> {
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
        Ok(())
    }

    /// `pg_replication_slots` for the workload's slots, and the write pointer.
    pub fn view(&mut self) -> Result<ServerView, String> {
        let current = self.current_lsn()?;
        let names: Vec<String> = self.slots.iter().map(|slot| format!("'{slot}'")).collect();
        let rows = self
            .admin()?
            .simple_query(&format!(
                "SELECT slot_name::text, wal_status, restart_lsn::text, confirmed_flush_lsn::text, safe_wal_size::text, \
                 active::text FROM pg_replication_slots WHERE slot_name IN ({}) ORDER BY slot_name",
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
                }
            })
            .collect();
        Ok(ServerView { current_lsn: current, slots })
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

/// The consumer thread: `START_REPLICATION`, then read, confirm as told, until stopped or
/// ended by the server.
fn consume(
    target: Target,
    slot: String,
    start: String,
    confirm: Confirm,
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
    started: mpsc::Sender<Result<(), PgError>>,
) -> StreamResult {
    let mut result = StreamResult { delivered_xids: Vec::new(), ended_by_server: false, error: None };
    let connection = match Connection::connect(&target, true) {
        Ok(connection) => connection,
        Err(error) => {
            let _ = started.send(Err(error));
            return result;
        }
    };
    let options = [("proto_version", "1"), ("publication_names", PUBLICATION)];
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
                match parse_pgoutput(&data) {
                    Ok(PgOutput::Begin { xid, .. }) => result.delivered_xids.push(xid),
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
                    Ok(PgOutput::Other(_)) => {}
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
