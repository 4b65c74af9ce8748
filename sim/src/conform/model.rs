//! The model's side of a conformance run: the simulation's own PostgreSQL component
//! ([`Postgres`]), driven step by step through its messages the way the lenses drive it.
//!
//! A thin adapter turns each workload step into the SQL and replication requests the real side
//! sends ([`SqlRequest`], [`ReplRequest`], [`Control`]), delivers them with
//! [`Component::on_message`] at the current simulated time, keeps the timers the component arms
//! and fires them in time order when a step lets time pass (`sleep`, `stream`), and plays the
//! stream consumer: it reads what the walsender sends and confirms as the workload says —
//! commits (Debezium's `lsn.flush.mode=connector`), keep-alives by pgjdbc's rule
//! (`V3PGReplicationStream.processKeepAliveMessage`), or nothing. A `restart` is a clean shutdown ([`Control::Shutdown`]) or none,
//! then [`Component::crash`] and [`Component::start`], as the lenses restart a process.
//!
//! Each workload database holds its own `handoff_conform` table; the server is PostgreSQL 15
//! with the workload's settings, WAL continuing where the real server's did.

use super::observe::{
    Delivery, ErrorClass, Landmarks, Outcome, ServerView, SlotRow, change_text, delivered_text, message_text,
};
use super::workload::{
    Confirm, MESSAGE_PREFIX, PUBLICATION, Position, RestartMode, StatementKind, Step, TABLE, Workload,
    message_payload_bytes,
};
use handoff_models::components::postgres::{Postgres, PostgresConfig, PostgresSection, ServerRun, TableSpec};
use handoff_models::core::change::{ReplicaIdentity, RowOp};
use handoff_models::core::component::{Component, Ctx, Outbox, Timer, TimerRequest};
use handoff_models::core::ids::Role;
use handoff_models::core::ids::{Key, Node, Status, TableId, Xid};
use handoff_models::core::lsn::Lsn;
use handoff_models::core::protocol::{
    Control, DecodedTxn, Isolation, Msg, ReplReply, ReplRequest, SessionId, SqlReply, SqlRequest,
};
use handoff_models::core::shared::Fixed;
use handoff_models::core::time::SimTime;
use std::collections::{BTreeMap, VecDeque};

/// The node the adapter speaks as: every client of the server.
const CLIENT: Node = Node::Connect;
/// `wal_writer_delay` (PostgreSQL's default): how long an ABORT record may wait to be flushed.
const WAL_WRITER_DELAY_MS: u64 = 200;
/// The SQL session every SQL step runs in.
const SQL_SESSION: SessionId = 1;

/// The rows of one database's table: the next key to insert and the live keys, in order.
#[derive(Default)]
struct Rows {
    last_key: Key,
    live: Vec<Key>,
}

/// An open `START_REPLICATION` session, as its consumer sees it.
struct Stream {
    session: SessionId,
    confirm: Confirm,
    /// `CopyBothResponse` arrived.
    started: bool,
    /// What it received (named once the step is over: a transaction streams before its
    /// `COMMIT` returns to the session that ran it).
    delivered: Vec<Delivery>,
    /// pgoutput's `messages` option.
    messages: bool,
    /// pgjdbc's state: the last flush confirmed explicitly, the flush reported, and the LSN of
    /// the last data message (a COMMIT's is the end of its commit record).
    explicit_flush: Lsn,
    flush: Lsn,
    last_data_start: Lsn,
}

/// A workload session: a session number of its own.
struct ModelSession {
    id: SessionId,
    database: String,
    /// Inside a transaction block: its workload name, if it has one.
    block: Option<Option<String>>,
    /// The block's xid once it has one.
    xid: Option<Xid>,
    /// The slot creation this session runs, while it has not been reported finished:
    /// the slot, and whether it exports a snapshot (a replication session).
    creation: Option<(String, bool)>,
    /// A replication session (closed with `ReplRequest::Close`).
    replication: bool,
}

/// The simulated server and its clients.
pub struct ModelSide {
    pg: Postgres,
    now_ms: u64,
    /// Armed timers and when they fire.
    timers: BTreeMap<Timer, u64>,
    next_session: SessionId,
    /// Each workload database's table.
    tables: BTreeMap<String, TableId>,
    /// The workload's first database: the model's main one.
    main_database: String,
    rows: BTreeMap<TableId, Rows>,
    /// Workload transaction names by xid.
    names: BTreeMap<Xid, String>,
    /// The xids of the transactions of sessions, delivered with their contents.
    detailed: Vec<Xid>,
    streams: BTreeMap<String, Stream>,
    /// Streams the server ended (walsender terminated, server restarted) that the workload has
    /// not stopped yet, with what they had delivered.
    ended: BTreeMap<String, Vec<Delivery>>,
    /// The workload's sessions by name.
    sessions: BTreeMap<String, ModelSession>,
    /// Replies to SQL requests not yet taken, by session.
    sql_replies: BTreeMap<SessionId, VecDeque<SqlReply>>,
    /// Replies on replication sessions that stream nothing (slot creations), by session.
    repl_replies: BTreeMap<SessionId, VecDeque<ReplReply>>,
    /// The snapshot each `export_snapshot` creation exported, by slot.
    exported: BTreeMap<String, String>,
    /// A replication error that answered a `START_REPLICATION`.
    start_error: Option<String>,
}

impl ModelSide {
    /// A freshly started server for `workload` whose WAL continues at `start` (the position a
    /// real server was at when the workload began, or a little into a segment).
    pub fn new(workload: &Workload, start: Lsn) -> ModelSide {
        let settings = &workload.server;
        let tables: BTreeMap<String, TableId> = workload
            .databases
            .iter()
            .enumerate()
            .map(|(index, database)| (database.clone(), TableId(index as u16)))
            .collect();
        let section = PostgresSection {
            major_version: 15,
            wal_segment_size: settings.wal_segment_size_bytes,
            checkpoint_timeout_ms: settings.checkpoint_timeout_s * 1000,
            max_wal_size_mb: settings.max_wal_size_mb,
            max_slot_wal_keep_size_mb: settings.max_slot_wal_keep_size_mb,
            wal_keep_size_mb: settings.wal_keep_size_mb,
            scan_rows_per_second: 1000,
            standby: None,
            sync_replication_slots: false,
            synchronized_standby_slots: false,
            idle_in_transaction_session_timeout_ms: 0,
            wal_sender_timeout_ms: handoff_models::components::postgres::WAL_SENDER_TIMEOUT_MS,
            publications: Vec::new(),
        };
        let run = ServerRun {
            bgwriter_running_xacts: true,
            walsender_keepalives: true,
            initial_wal_lsn: if start.is_valid() { start } else { Lsn(settings.wal_segment_size_bytes) },
            // Indexed by table id, which is the database's place in the workload's list.
            tables: workload
                .databases
                .iter()
                .enumerate()
                .map(|(index, database)| TableSpec {
                    id: TableId(index as u16),
                    name: format!("public.{TABLE}"),
                    replica_identity: ReplicaIdentity::Default,
                    database: model_database(&workload.databases[0], database),
                    composite_key: None,
                    unique_column: None,
                })
                .collect(),
        };
        let config = PostgresConfig::new(&section, run);
        let mut side = ModelSide {
            pg: Postgres::new(Node::Pg1, Role::Primary, Fixed::new(config), &[]),
            now_ms: 0,
            timers: BTreeMap::new(),
            next_session: SQL_SESSION + 1,
            tables,
            main_database: workload.databases[0].clone(),
            rows: BTreeMap::new(),
            names: BTreeMap::new(),
            detailed: Vec::new(),
            streams: BTreeMap::new(),
            ended: BTreeMap::new(),
            sessions: BTreeMap::new(),
            sql_replies: BTreeMap::new(),
            repl_replies: BTreeMap::new(),
            exported: BTreeMap::new(),
            start_error: None,
        };
        side.call(|pg, ctx| pg.start(ctx));
        // `CREATE PUBLICATION handoff_conform`, as the real side's preparation does.
        side.sql(SqlRequest::EnsurePublication { name: PUBLICATION.to_string(), tables: None });
        side
    }

    // ---- Driving the component ----------------------------------------------------------

    /// Runs one input of the component at the current time, applies the timers it asks for,
    /// and returns what it sent.
    fn input(&mut self, input: impl FnOnce(&mut Postgres, &mut Ctx)) -> Vec<(Node, Msg)> {
        let mut out = Outbox::default();
        input(&mut self.pg, &mut Ctx::new(SimTime(self.now_ms), Node::Pg1, &mut out));
        for request in out.timers {
            match request {
                TimerRequest::Set { timer, after_ms } => {
                    self.timers.insert(timer, self.now_ms + after_ms);
                }
                TimerRequest::Cancel { timer } => {
                    self.timers.remove(&timer);
                }
            }
        }
        out.sends
    }

    /// Runs one input and every exchange it starts with the stream consumers (data, keep-alives,
    /// their confirmations); keeps the replies to SQL requests and slot creations by session.
    fn call(&mut self, input: impl FnOnce(&mut Postgres, &mut Ctx)) {
        let mut pending: VecDeque<(Node, Msg)> = self.input(input).into();
        while let Some((to, msg)) = pending.pop_front() {
            if to != CLIENT {
                continue;
            }
            match msg {
                Msg::SqlReply { session, reply } => self.sql_replies.entry(session).or_default().push_back(reply),
                Msg::ReplReply { session, reply } => {
                    if !self.streams.values().any(|stream| stream.session == session) {
                        self.repl_replies.entry(session).or_default().push_back(reply);
                        continue;
                    }
                    if let Some(flush) = self.consume(session, reply) {
                        let request = Msg::Repl { session, request: ReplRequest::StatusUpdate { flush } };
                        pending.extend(self.input(|pg, ctx| pg.on_message(ctx, CLIENT, request)));
                    }
                }
                _ => {}
            }
        }
    }

    /// One SQL request on `session`; its reply, or `None` while the server has not answered (a
    /// request that waits).
    fn sql_on(&mut self, session: SessionId, request: SqlRequest) -> Option<SqlReply> {
        let msg = Msg::Sql { session, request };
        self.call(|pg, ctx| pg.on_message(ctx, CLIENT, msg));
        // What the server does in the same instant (a commit becoming visible and answering).
        self.advance_time(0);
        self.sql_replies.get_mut(&session).and_then(VecDeque::pop_front)
    }

    /// One SQL request on the adapter's own session; its reply.
    fn sql(&mut self, request: SqlRequest) -> SqlReply {
        self.sql_on(SQL_SESSION, request).unwrap_or_else(|| SqlReply::Error("the server did not answer".into()))
    }

    /// One SQL request on a workload session; its reply.
    fn sql_in(&mut self, session: &str, request: SqlRequest) -> SqlReply {
        let Some(id) = self.sessions.get(session).map(|session| session.id) else {
            return SqlReply::Error(format!("session {session} is not open"));
        };
        self.sql_on(id, request).unwrap_or_else(|| SqlReply::Error("the server did not answer".into()))
    }

    /// The consumer of a stream reads one message; returns the flush position to confirm.
    fn consume(&mut self, session: SessionId, reply: ReplReply) -> Option<Lsn> {
        let slot = self.streams.iter().find(|(_, stream)| stream.session == session).map(|(slot, _)| slot.clone())?;
        let stream = self.streams.get_mut(&slot).expect("found");
        match reply {
            ReplReply::StreamingStarted => {
                stream.started = true;
                None
            }
            ReplReply::Error(text) => {
                let stream = self.streams.remove(&slot).expect("found");
                if stream.started {
                    self.ended.insert(slot, stream.delivered);
                } else {
                    self.start_error = Some(text);
                }
                None
            }
            ReplReply::Message(message) => {
                if stream.messages {
                    let text = message_text(message.transactional, &message.prefix, message.payload_bytes);
                    stream.delivered.push(Delivery::Message { text });
                }
                None
            }
            ReplReply::XLogData(txn) => {
                stream.delivered.push(delivery(&txn, stream.messages));
                stream.last_data_start = txn.end_lsn;
                if stream.confirm == Confirm::None {
                    return None;
                }
                stream.explicit_flush = txn.end_lsn;
                stream.flush = stream.flush.max(txn.end_lsn);
                Some(stream.flush)
            }
            ReplReply::Keepalive { wal_end } => {
                let confirms = stream.confirm == Confirm::Keepalive
                    && stream.explicit_flush >= stream.last_data_start
                    && wal_end > stream.explicit_flush
                    && wal_end > stream.flush;
                if !confirms {
                    return None;
                }
                stream.flush = wal_end;
                Some(wal_end)
            }
            ReplReply::SlotCreated { .. } => None,
        }
    }

    /// Lets `duration_ms` pass, firing the armed timers in time order.
    fn advance_time(&mut self, duration_ms: u64) {
        let target = self.now_ms + duration_ms;
        while let Some((timer, due)) = self
            .timers
            .iter()
            .map(|(timer, due)| (*timer, *due))
            .filter(|(_, due)| *due <= target)
            .min_by_key(|(timer, due)| (*due, *timer))
        {
            self.timers.remove(&timer);
            self.now_ms = self.now_ms.max(due);
            self.call(|pg, ctx| pg.on_timer(ctx, timer));
        }
        self.now_ms = target;
    }

    // ---- Steps --------------------------------------------------------------------------

    /// Runs one step.
    pub fn apply(&mut self, step: &Step) -> Outcome {
        let outcome = match step {
            Step::CreateSlot { slot, database, session: None, .. } => outcome(self.sql(SqlRequest::CreateSlot {
                slot: slot.clone(),
                plugin: "pgoutput".into(),
                database: self.model_database(database),
            })),
            Step::CreateSlot { slot, database, session: Some(session), export_snapshot } => {
                self.start_creation(slot, database, session, *export_snapshot);
                Outcome::default()
            }
            Step::Write { bytes, database: _ } => outcome(self.sql(SqlRequest::EmitMessage {
                transactional: true,
                prefix: MESSAGE_PREFIX.to_string(),
                payload_bytes: message_payload_bytes(*bytes),
            })),
            Step::Transaction { name, database, inserts, updates, deletes } => {
                self.transaction(name, database, *inserts, *updates, *deletes)
            }
            Step::Checkpoint => {
                self.call(|pg, ctx| pg.on_message(ctx, CLIENT, Msg::Control(Control::Checkpoint)));
                Outcome::default()
            }
            Step::SwitchWal => outcome(self.sql(SqlRequest::SwitchWal)),
            Step::AdvanceSlot { slot, to } => {
                let to = self.position(slot, *to);
                outcome(self.sql(SqlRequest::AdvanceSlot { slot: slot.clone(), to }))
            }
            Step::GetChanges { slot } | Step::PeekChanges { slot } => {
                let request = SqlRequest::SlotChanges {
                    slot: slot.clone(),
                    publication: PUBLICATION.to_string(),
                    consume: matches!(step, Step::GetChanges { .. }),
                    messages: false,
                };
                match self.sql(request) {
                    SqlReply::Decoded(emitted) => {
                        let deliveries: Vec<Delivery> = emitted
                            .iter()
                            .filter_map(|reply| match reply {
                                ReplReply::XLogData(txn) => Some(delivery(txn, false)),
                                ReplReply::Message(message) => Some(Delivery::Message {
                                    text: message_text(message.transactional, &message.prefix, message.payload_bytes),
                                }),
                                _ => None,
                            })
                            .collect();
                        Outcome { delivered: Some(self.named(&deliveries)), ..Outcome::default() }
                    }
                    other => outcome(other),
                }
            }
            Step::Stream { slot, seconds, confirm, start, messages } => {
                let started = self.start_stream(slot, *confirm, *start, *messages);
                if started.error.is_some() {
                    return started;
                }
                self.advance_time(seconds * 1000);
                self.stop_stream(slot)
            }
            Step::StartStream { slot, confirm, start, messages } => {
                self.start_stream(slot, *confirm, *start, *messages)
            }
            Step::StopStream { slot } => self.stop_stream(slot),
            Step::DropSlot { slot } => outcome(self.sql(SqlRequest::DropSlot { slot: slot.clone() })),
            Step::Restart { mode } => {
                self.restart(*mode);
                Outcome::default()
            }
            Step::Sleep { seconds } | Step::Idle { seconds, .. } => {
                self.advance_time(seconds * 1000);
                Outcome::default()
            }
            Step::Open { session, database } => {
                let id = self.new_session();
                self.sessions.insert(
                    session.clone(),
                    ModelSession {
                        id,
                        database: database.clone(),
                        block: None,
                        xid: None,
                        creation: None,
                        replication: false,
                    },
                );
                Outcome::default()
            }
            Step::Begin { session, txn, isolation } => {
                let reply = self.sql_in(session, SqlRequest::Begin { isolation: *isolation });
                if !matches!(reply, SqlReply::Error(_))
                    && let Some(session) = self.sessions.get_mut(session)
                {
                    session.block = Some(txn.clone());
                    session.xid = None;
                }
                outcome(reply)
            }
            Step::Statement { session, kind, ids, txn } => {
                let Some(table) = self.sessions.get(session).and_then(|s| self.tables.get(&s.database)).copied() else {
                    return error(ErrorClass::Other(format!("session {session} is not open")));
                };
                let mut ids = ids.clone();
                if *kind != StatementKind::Insert {
                    // `… WHERE id IN (…)` by the primary key index: ascending ids.
                    ids.sort_unstable();
                }
                let ops = ids
                    .iter()
                    .map(|&key| match kind {
                        StatementKind::Insert => {
                            RowOp::Insert { table, key, status: Status::Submitted, amount_cents: 0 }
                        }
                        StatementKind::Update => RowOp::Update { table, key, status: Status::Assessed },
                        StatementKind::Delete => RowOp::Delete { table, key },
                    })
                    .collect();
                self.write(session, SqlRequest::Statement { ops, copy: false }, txn.as_deref())
            }
            Step::Message { session, transactional, prefix, content, txn } => {
                let request = SqlRequest::EmitMessage {
                    transactional: *transactional,
                    prefix: prefix.clone(),
                    payload_bytes: content.len() as u64,
                };
                let in_block = self.sessions.get(session.as_str()).is_some_and(|s| s.block.is_some());
                let outcome = self.write(session, request, txn.as_deref());
                if !*transactional && !in_block {
                    // The real side waits for the WAL writer to flush the message.
                    self.advance_time(WAL_WRITER_DELAY_MS);
                }
                outcome
            }
            Step::Commit { session } | Step::Rollback { session } => {
                let request =
                    if matches!(step, Step::Commit { .. }) { SqlRequest::Commit } else { SqlRequest::Rollback };
                let reply = self.sql_in(session, request);
                if matches!(reply, SqlReply::RolledBack { xid: Some(_) }) {
                    // The real side waits for the WAL writer to flush the ABORT record
                    // (`XLogSetAsyncXactLSN`): let its delay pass here too.
                    self.advance_time(WAL_WRITER_DELAY_MS);
                }
                if let Some(session) = self.sessions.get_mut(session) {
                    session.block = None;
                    session.xid = None;
                }
                outcome(reply)
            }
            Step::ImportSnapshot { session, slot } => {
                let Some(name) = self.exported.get(slot).cloned() else {
                    return error(ErrorClass::Other(format!("the creation of {slot} exported no snapshot")));
                };
                let begun = self.sql_in(session, SqlRequest::Begin { isolation: Isolation::RepeatableRead });
                if let Some(session) = self.sessions.get_mut(session) {
                    session.block = Some(None);
                }
                if matches!(begun, SqlReply::Error(_)) {
                    return outcome(begun);
                }
                outcome(self.sql_in(session, SqlRequest::ImportSnapshot { name }))
            }
            Step::Select { session } => {
                let Some(table) = self.sessions.get(session).and_then(|s| self.tables.get(&s.database)).copied() else {
                    return error(ErrorClass::Other(format!("session {session} is not open")));
                };
                match self.sql_in(session, SqlRequest::Select { table }) {
                    SqlReply::Rows { rows, .. } => {
                        Outcome { rows: Some(rows.iter().map(|(key, _)| *key).collect()), ..Outcome::default() }
                    }
                    other => outcome(other),
                }
            }
            Step::CurrentSnapshot { session } => match self.sql_in(session, SqlRequest::CurrentSnapshot) {
                SqlReply::Snapshot(snapshot) => {
                    let landmarks = Landmarks { steps: Vec::new(), xids: self.xids() };
                    let text = landmarks.place_snapshot(snapshot.xmin, snapshot.xmax, &snapshot.xip);
                    Outcome { snapshot: Some(text), ..Outcome::default() }
                }
                other => outcome(other),
            },
            Step::Close { session } => {
                if let Some(closed) = self.sessions.remove(session) {
                    let id = closed.id;
                    if closed.replication {
                        self.call(|pg, ctx| {
                            pg.on_message(ctx, CLIENT, Msg::Repl { session: id, request: ReplRequest::Close })
                        });
                    } else {
                        self.call(|pg, ctx| {
                            pg.on_message(ctx, CLIENT, Msg::Sql { session: id, request: SqlRequest::Close })
                        });
                    }
                }
                Outcome::default()
            }
        };
        Outcome { creations: self.creations(), ..outcome }
    }

    fn new_session(&mut self) -> SessionId {
        let id = self.next_session;
        self.next_session += 1;
        id
    }

    /// A write in a session: inside its block (whose xid, once it has one, gets the block's
    /// name), or autocommit as the transaction `txn`. The xid a write assigns is the server's
    /// next xid before it (`pg_current_xact_id_if_assigned()` on the real side).
    fn write(&mut self, session: &str, request: SqlRequest, txn: Option<&str>) -> Outcome {
        let Some(state) = self.sessions.get(session) else {
            return error(ErrorClass::Other(format!("session {session} is not open")));
        };
        let (in_block, had_xid, block_name) = (state.block.is_some(), state.xid, state.block.clone().flatten());
        let next_xid = self.pg.durable.next_xid;
        let reply = self.sql_in(session, request);
        let assigned = match &reply {
            SqlReply::Committed { xid, .. } => Some(*xid),
            _ if had_xid.is_none() && self.pg.durable.next_xid != next_xid => Some(next_xid),
            _ => None,
        };
        if let Some(xid) = assigned {
            if in_block && let Some(state) = self.sessions.get_mut(session) {
                state.xid = Some(xid);
            }
            if let Some(name) = txn.map(str::to_string).or(block_name) {
                self.names.insert(xid, name);
                if !self.detailed.contains(&xid) {
                    self.detailed.push(xid);
                }
            }
        }
        outcome(reply)
    }

    /// Sends a slot creation on a new session of its own; its reply comes when it is done.
    fn start_creation(&mut self, slot: &str, database: &str, session: &str, exports: bool) {
        let id = self.new_session();
        self.sessions.insert(
            session.to_string(),
            ModelSession {
                id,
                database: database.to_string(),
                block: None,
                xid: None,
                creation: Some((slot.to_string(), exports)),
                replication: exports,
            },
        );
        let msg = if exports {
            // A replication connection's slot belongs to the database it connected to.
            let request =
                ReplRequest::CreateSlot { slot: slot.to_string(), plugin: "pgoutput".into(), failover: false };
            Msg::Repl { session: id, request }
        } else {
            let request = SqlRequest::CreateSlot {
                slot: slot.to_string(),
                plugin: "pgoutput".into(),
                database: self.model_database(database),
            };
            Msg::Sql { session: id, request }
        };
        self.call(|pg, ctx| pg.on_message(ctx, CLIENT, msg));
    }

    /// A workload database as the model names it: the first, the server's main one, is `None`.
    fn model_database(&self, database: &str) -> Option<String> {
        model_database(&self.main_database, database)
    }

    /// Where each slot creation stands after a step: `waiting` until its reply came.
    fn creations(&mut self) -> Option<Vec<String>> {
        let mut report = Vec::new();
        let mut exported = Vec::new();
        for session in self.sessions.values_mut() {
            let Some((slot, exports)) = session.creation.clone() else { continue };
            let result = if exports {
                self.repl_replies.get_mut(&session.id).and_then(VecDeque::pop_front).map(|reply| match reply {
                    ReplReply::SlotCreated { snapshot_name, .. } => {
                        exported.push((slot.clone(), snapshot_name));
                        Ok(())
                    }
                    ReplReply::Error(text) => Err(ErrorClass::from_message(&text)),
                    _ => Err(ErrorClass::Other("an unexpected reply to CREATE_REPLICATION_SLOT".into())),
                })
            } else {
                self.sql_replies.get_mut(&session.id).and_then(VecDeque::pop_front).map(|reply| match reply {
                    SqlReply::Error(text) => Err(ErrorClass::from_message(&text)),
                    _ => Ok(()),
                })
            };
            report.push(match result {
                None => format!("{slot} waiting"),
                Some(Ok(())) => {
                    session.creation = None;
                    format!("{slot} created")
                }
                Some(Err(class)) => {
                    session.creation = None;
                    format!("{slot} failed: {class}")
                }
            });
        }
        self.exported.extend(exported);
        (!report.is_empty()).then_some(report)
    }

    /// Workload transaction names by xid.
    pub fn xids(&self) -> BTreeMap<u32, String> {
        self.names.clone()
    }

    /// `BEGIN`, inserts of new keys, updates and deletes of the lowest live keys
    /// (`… WHERE id IN (SELECT id … ORDER BY id LIMIT n)`), `COMMIT`.
    fn transaction(&mut self, name: &str, database: &str, inserts: u32, updates: u32, deletes: u32) -> Outcome {
        let Some(&table) = self.tables.get(database) else {
            return error(ErrorClass::Other(format!("database {database} does not exist")));
        };
        let rows = self.rows.entry(table).or_default();
        let mut ops = Vec::new();
        let mut live = rows.live.clone();
        let mut last_key = rows.last_key;
        for _ in 0..inserts {
            last_key += 1;
            live.push(last_key);
            ops.push(RowOp::Insert { table, key: last_key, status: Status::Submitted, amount_cents: 0 });
        }
        for key in live.iter().take(updates as usize) {
            ops.push(RowOp::Update { table, key: *key, status: Status::Assessed });
        }
        let deleted: Vec<Key> = live.iter().take(deletes as usize).copied().collect();
        for key in &deleted {
            ops.push(RowOp::Delete { table, key: *key });
        }
        live.retain(|key| !deleted.contains(key));
        match self.sql(SqlRequest::Transaction { ops }) {
            SqlReply::Committed { xid, .. } => {
                self.names.insert(xid, name.to_string());
                let rows = self.rows.entry(table).or_default();
                rows.live = live;
                rows.last_key = last_key;
                Outcome::default()
            }
            SqlReply::NothingChanged { .. } => Outcome::default(),
            other => outcome(other),
        }
    }

    /// What was delivered, named.
    fn named(&self, deliveries: &[Delivery]) -> Vec<String> {
        delivered_text(deliveries, &self.names, &self.detailed)
    }

    /// A symbolic position resolved against this server's slot; a missing slot or a NULL
    /// position is 0/0, as on the real side.
    fn position(&mut self, slot: &str, position: Position) -> Lsn {
        match position {
            Position::Zero => Lsn::INVALID,
            Position::Current => self.current_lsn(),
            Position::RestartLsn | Position::ConfirmedFlush => {
                let row = self.view().slots.into_iter().find(|row| row.name == slot);
                let lsn = row.and_then(|row| match position {
                    Position::RestartLsn => row.restart_lsn,
                    _ => row.confirmed_flush,
                });
                lsn.unwrap_or(Lsn::INVALID)
            }
        }
    }

    fn start_stream(&mut self, slot: &str, confirm: Confirm, start: Position, messages: bool) -> Outcome {
        let start = self.position(slot, start);
        if self.streams.contains_key(slot) {
            // The consumer has one connection per slot; a second START_REPLICATION would find
            // the slot active. The real side's consumer thread is replaced the same way.
            return error(ErrorClass::SlotActive);
        }
        let session = self.next_session;
        self.next_session += 1;
        self.streams.insert(
            slot.to_string(),
            Stream {
                session,
                confirm,
                started: false,
                delivered: Vec::new(),
                messages,
                explicit_flush: Lsn::INVALID,
                flush: Lsn::INVALID,
                last_data_start: Lsn::INVALID,
            },
        );
        self.ended.remove(slot);
        self.start_error = None;
        let request = ReplRequest::StartReplication {
            slot: slot.to_string(),
            start,
            publication: PUBLICATION.to_string(),
            messages,
        };
        self.call(|pg, ctx| pg.on_message(ctx, CLIENT, Msg::Repl { session, request }));
        match self.start_error.take() {
            Some(text) => error(ErrorClass::from_message(&text)),
            None => Outcome::default(),
        }
    }

    fn stop_stream(&mut self, slot: &str) -> Outcome {
        if let Some(stream) = self.streams.remove(slot) {
            let session = stream.session;
            self.call(|pg, ctx| pg.on_message(ctx, CLIENT, Msg::Repl { session, request: ReplRequest::Close }));
            return Outcome {
                delivered: Some(self.named(&stream.delivered)),
                ended_by_server: Some(false),
                ..Outcome::default()
            };
        }
        if let Some(delivered) = self.ended.remove(slot) {
            return Outcome {
                delivered: Some(self.named(&delivered)),
                ended_by_server: Some(true),
                ..Outcome::default()
            };
        }
        error(ErrorClass::Other(format!("no stream is open on slot {slot}")))
    }

    /// `pg_ctl restart -m fast` (a clean shutdown first) or `-m immediate` (a crash): the
    /// process dies, its timers with it, and starts again.
    fn restart(&mut self, mode: RestartMode) {
        if mode == RestartMode::Fast {
            self.call(|pg, ctx| pg.on_message(ctx, CLIENT, Msg::Control(Control::Shutdown)));
        }
        self.pg.crash();
        self.timers.clear();
        // Walsenders end with the server; their consumers see the connection close.
        for (slot, stream) in std::mem::take(&mut self.streams) {
            self.ended.insert(slot, stream.delivered);
        }
        self.call(|pg, ctx| pg.start(ctx));
    }

    // ---- What the server shows ----------------------------------------------------------

    /// `pg_current_wal_lsn()`.
    fn current_lsn(&mut self) -> Lsn {
        match self.sql(SqlRequest::CurrentWalLsn) {
            SqlReply::Lsn(lsn) => lsn,
            _ => Lsn::INVALID,
        }
    }

    /// `pg_replication_slots` and the write pointer.
    pub fn view(&mut self) -> ServerView {
        let current_lsn = self.current_lsn();
        let slots = match self.sql(SqlRequest::ReplicationSlots) {
            SqlReply::ReplicationSlots(rows) => rows
                .into_iter()
                .map(|row| SlotRow {
                    name: row.slot_name,
                    wal_status: row.wal_status,
                    restart_lsn: row.restart_lsn,
                    confirmed_flush: row.confirmed_flush_lsn,
                    safe_wal_size: row.safe_wal_size,
                    active: row.active,
                    catalog_xmin: row.catalog_xmin,
                })
                .collect(),
            _ => Vec::new(),
        };
        ServerView { current_lsn, insert_lsn: self.pg.durable.wal.insert_lsn(), slots }
    }
}

/// A workload database as the model names it: the first, the server's main one, is `None` (a
/// logical message outside a block that wrote is the main database's, as the model has no
/// database per session).
fn model_database(main_database: &str, database: &str) -> Option<String> {
    (main_database != database).then(|| database.to_string())
}

/// A decoded transaction as delivered: its changes and, with `messages`, its transactional
/// messages, in WAL order (a message is stamped with the end of its record, a change with the
/// start of its own: a message and the change after it share an LSN, the message first).
fn delivery(txn: &DecodedTxn, messages: bool) -> Delivery {
    let mut contents: Vec<(Lsn, u8, String)> = txn
        .changes
        .iter()
        .map(|change| (change.lsn, 1, change_text(change.kind.name(), &change.key.to_string())))
        .collect();
    if messages {
        contents.extend(txn.messages.iter().map(|message| {
            (message.lsn, 0, message_text(message.transactional, &message.prefix, message.payload_bytes))
        }));
    }
    contents.sort_by_key(|(lsn, order, _)| (*lsn, *order));
    Delivery::Transaction { xid: txn.xid, contents: contents.into_iter().map(|(_, _, text)| text).collect() }
}

/// A step's outcome from an SQL reply: an error by its class, anything else a success.
fn outcome(reply: SqlReply) -> Outcome {
    match reply {
        SqlReply::Error(text) => error(ErrorClass::from_message(&text)),
        _ => Outcome::default(),
    }
}

fn error(class: ErrorClass) -> Outcome {
    Outcome { error: Some(class), ..Outcome::default() }
}
