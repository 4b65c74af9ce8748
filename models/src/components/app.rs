//! The claims application: runs the workload's transactions against the database service.
//!
//! The workload is data, generated from the run's seed before the run starts (`workload.rs`):
//! timed steps run at their simulated time, scripted ones when the harness says a moment has
//! come ("while the snapshot scans"). A step without a named session is one autocommit statement
//! on a session of its own, as from a pool of connections (a one-row one is today's
//! `BEGIN; …; COMMIT` as one request, [`SqlRequest::Transaction`]). A step of a named session
//! (`BEGIN`, a statement, `COMMIT`, `ROLLBACK`, a logical message) goes on that session's own
//! connection, one request at a time: the session's next step waits for the reply (a statement
//! may wait on a row lock), for its trigger, and for the idle time its previous step asked for
//! (`idle_ms`: a session idle in transaction). A step that fails (the server is down, or
//! read-only) is not retried.
//!
//! A scripted step that does not apply is said, never dropped silently: one that changes no row
//! (its key does not exist when it runs), fails (a duplicate key, a read-only server, a statement
//! of a block that an earlier error failed, a `COMMIT` that PostgreSQL turned into a rollback), or
//! gets no answer (the connection to the database was lost; then the session's open transaction
//! is lost too, and its later steps up to the next `BEGIN` are reported, not sent) is reported
//! with [`Observation::ScriptedNotApplied`]. (An autocommit step's session says it is scripted,
//! not which one: two scripted transactions with the same statement stay interchangeable for the
//! exhaustive lens.) A background transaction that changes nothing is the workload's own business
//! (it may update a claim a scripted delete removed).

use crate::core::change::RowOp;
use crate::core::component::{Component, Ctx, Timer};
use crate::core::ids::{MessageEvent, Node};
use crate::core::observe::Observation;
use crate::core::protocol::{Control, Isolation, Msg, SessionId, SqlReply, SqlRequest};
use crate::core::shared::CopyOnWrite;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// What one workload step asks of PostgreSQL.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StepKind {
    /// One DML statement changing the step's rows (`INSERT … VALUES (…),(…)`, `UPDATE … WHERE id
    /// IN (…)`; with `copy`, `COPY FROM`'s multi-insert).
    #[default]
    Statement,
    /// `COPY … FROM STDIN`: the step's inserts as one multi-insert.
    Copy,
    /// `BEGIN ISOLATION LEVEL …`.
    Begin {
        isolation: Isolation,
    },
    Commit,
    Rollback,
    /// `SELECT pg_logical_emit_message(transactional, prefix, repeat('x', payload_bytes))`.
    Message {
        transactional: bool,
        prefix: String,
        payload_bytes: u64,
    },
    /// The service's outbox write through a logical decoding message (a message outbox's
    /// `event` step): the step's statement (the claim's `UPDATE`) and
    /// `pg_logical_emit_message(transactional, prefix, content)` with the event as its
    /// `payload_bytes` of content, in one transaction ([`SqlRequest::OutboxMessage`]): a
    /// transaction of its own, or in its session's open block.
    OutboxMessage {
        transactional: bool,
        prefix: String,
        payload_bytes: u64,
        event: MessageEvent,
    },
    /// A signal produced to a Kafka signal channel's topic (`kafka-console-producer` on the
    /// operator's host, `acks=all`): record `number` (its key in the model; the key string and
    /// the signal are the scenario's, [`crate::scenario::spec::SignalTopic`]) to partition 0 of
    /// signal topic `topic`. No database work.
    KafkaSignal {
        topic: u16,
        number: u32,
    },
    /// A deployment puts the first connector's configuration version `version` (`PUT
    /// /connectors/<name>/config` with a new `table.include.list`): the operator's REST client
    /// makes the call. No database work.
    ConnectorConfig {
        version: u8,
    },
}

impl StepKind {
    /// The step in SQL's words, for the timeline.
    pub fn describe(&self) -> String {
        match self {
            StepKind::Statement => "a statement".into(),
            StepKind::Copy => "a COPY".into(),
            StepKind::Begin { isolation } => format!("BEGIN ISOLATION LEVEL {}", isolation.name()),
            StepKind::Commit => "COMMIT".into(),
            StepKind::Rollback => "ROLLBACK".into(),
            StepKind::Message { transactional, prefix, payload_bytes } => {
                format!("pg_logical_emit_message({transactional}, '{prefix}', {payload_bytes} bytes)")
            }
            StepKind::OutboxMessage { transactional, prefix, event, .. } => format!(
                "the claim's update and pg_logical_emit_message({transactional}, '{prefix}', outbox event {} ({} of \
                 claim {}))",
                event.id,
                event.row().event_type(),
                event.aggregate_id
            ),
            StepKind::KafkaSignal { number, .. } => format!("Kafka signal record {number}"),
            StepKind::ConnectorConfig { version } => format!("PUT /connectors/<name>/config (configuration {version})"),
        }
    }

    /// Whether the step belongs to the session's open transaction block (it is lost with it).
    fn in_block(&self) -> bool {
        match self {
            StepKind::Statement | StepKind::Copy | StepKind::Commit | StepKind::Rollback => true,
            // Its statement is the block's, whatever the message is.
            StepKind::OutboxMessage { .. } => true,
            StepKind::Message { transactional, .. } => *transactional,
            StepKind::Begin { .. } | StepKind::KafkaSignal { .. } | StepKind::ConnectorConfig { .. } => false,
        }
    }
}

/// One application step.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WorkloadTxn {
    /// When it runs (simulated ms); `None` for a scripted step run on a moment.
    pub at_ms: Option<u64>,
    pub ops: Vec<RowOp>,
    /// What it asks: a statement by default.
    pub kind: StepKind,
    /// The named session it runs in (its place in [`Workload::sessions`]); `None`: a session of
    /// its own, autocommit.
    pub session: Option<u32>,
    /// After its reply, its session stays idle this long before its next step (idle in
    /// transaction when a block is open).
    pub idle_ms: u64,
}

impl WorkloadTxn {
    /// Today's step: one autocommit transaction of `ops` on a session of its own.
    pub fn autocommit(at_ms: Option<u64>, ops: Vec<RowOp>) -> WorkloadTxn {
        WorkloadTxn { at_ms, ops, kind: StepKind::Statement, session: None, idle_ms: 0 }
    }
}

/// A step of a named session: a timed step or a scripted one, by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StepRef {
    Timed(u32),
    Scripted(u32),
}

/// A named session: its name (for the timeline) and its steps, in the order they run.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionSteps {
    pub name: String,
    pub steps: Vec<StepRef>,
}

/// The application's steps: `timed` in time order, `scripted` by index, and the named sessions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Workload {
    pub timed: Vec<WorkloadTxn>,
    pub scripted: Vec<WorkloadTxn>,
    pub sessions: Vec<SessionSteps>,
}

impl Workload {
    fn step(&self, step: StepRef) -> &WorkloadTxn {
        match step {
            StepRef::Timed(index) => &self.timed[index as usize],
            StepRef::Scripted(index) => &self.scripted[index as usize],
        }
    }
}

/// The session of a scripted autocommit transaction has this bit set.
const SCRIPTED: SessionId = 1 << 62;
/// The session of a named session has this bit set, and its place in `Workload::sessions`.
const NAMED: SessionId = 1 << 61;

/// Where a named session is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct SessionState {
    /// Its next step, by its place in the session's steps.
    next: u32,
    /// The step whose reply it waits for.
    awaiting: Option<StepRef>,
    /// Idle until then (simulated ms).
    idle_until_ms: u64,
    /// A `BEGIN` was sent and no `COMMIT` or `ROLLBACK` since.
    in_block: bool,
    /// The connection was lost with a block open: the block's steps up to the next `BEGIN` are
    /// not sent.
    block_lost: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct App {
    pub workload: CopyOnWrite<Workload>,
    next_timed: usize,
    next_session: u64,
    /// Scripted autocommit transactions sent and not answered yet.
    scripted_unanswered: u32,
    /// The named sessions (empty without any).
    sessions: Vec<SessionState>,
    /// Scripted steps of named sessions whose trigger has come and that have not run yet.
    due: BTreeSet<u32>,
}

impl App {
    pub fn new(workload: CopyOnWrite<Workload>) -> App {
        let sessions = vec![SessionState::default(); workload.sessions.len()];
        App { workload, next_timed: 0, next_session: 1, scripted_unanswered: 0, sessions, due: BTreeSet::new() }
    }

    /// Whether every timed step has been sent and no session has a step it is waiting to send
    /// (one whose trigger has come, a timed one) or an answer it is waiting for.
    pub fn timed_done(&self) -> bool {
        self.next_timed >= self.workload.timed.len()
            && self.sessions.iter().zip(&self.workload.sessions).all(|(state, session)| {
                state.awaiting.is_none()
                    && match session.steps.get(state.next as usize) {
                        None => true,
                        Some(StepRef::Timed(_)) => false,
                        Some(StepRef::Scripted(index)) => !self.due.contains(index),
                    }
            })
    }

    /// Whether scripted step `index` can run now: an autocommit step always; a step of a named
    /// session when it is the session's next one and the session waits for nothing (what the
    /// exhaustive lens asks before it offers the step).
    pub fn may_run_scripted(&self, index: usize, now_ms: u64) -> bool {
        let Some(step) = self.workload.scripted.get(index) else { return false };
        let Some(session) = step.session else { return true };
        let state = &self.sessions[session as usize];
        state.awaiting.is_none()
            && state.idle_until_ms <= now_ms
            && self.workload.sessions[session as usize].steps.get(state.next as usize)
                == Some(&StepRef::Scripted(index as u32))
    }

    fn run(&mut self, ctx: &mut Ctx, txn: &WorkloadTxn) {
        if let StepKind::KafkaSignal { topic, number } = txn.kind {
            self.produce_signal(ctx, topic, number);
            return;
        }
        if let StepKind::ConnectorConfig { .. } = txn.kind {
            // The operator's REST call (the harness hands it to the operator): nothing here.
            return;
        }
        let session = self.next_session | if txn.at_ms.is_none() { SCRIPTED } else { 0 };
        self.next_session += 1;
        let request = match (&txn.kind, txn.ops.len()) {
            (StepKind::Statement, 1) => SqlRequest::Transaction { ops: txn.ops.clone() },
            (kind, _) => request(kind, &txn.ops),
        };
        ctx.send(Node::Postgres, Msg::Sql { session, request });
    }

    /// A Kafka signal step: one record to partition 0 of the signal topic.
    fn produce_signal(&mut self, ctx: &mut Ctx, topic: u16, number: u32) {
        use crate::core::event::{Placement, SourceRecord, Topic};
        let record = SourceRecord {
            topic: Topic::Signal(topic),
            key: crate::core::ids::Key::from(number),
            value: None,
            offset: crate::core::event::SourceOffset::default(),
            placement: Some(Placement::Partition(0)),
        };
        self.next_session += 1;
        let request = crate::core::protocol::KafkaRequest::Produce {
            records: crate::core::shared::CopyOnWrite::new(vec![record]),
            transaction: None,
        };
        ctx.send(Node::Kafka, Msg::Kafka { request_id: self.next_session, request });
    }

    /// Runs the steps of named session `session` that can run now, in order.
    fn advance(&mut self, ctx: &mut Ctx, session: usize) {
        let workload = self.workload.clone();
        let now = ctx.now.ms();
        loop {
            let state = &mut self.sessions[session];
            if state.awaiting.is_some() || state.idle_until_ms > now {
                return;
            }
            let Some(&step_ref) = workload.sessions[session].steps.get(state.next as usize) else { return };
            let due = match step_ref {
                StepRef::Timed(index) => workload.timed[index as usize].at_ms.unwrap_or(0) <= now,
                StepRef::Scripted(index) => self.due.remove(&index),
            };
            if !due {
                return;
            }
            let state = &mut self.sessions[session];
            state.next += 1;
            let step = workload.step(step_ref);
            if state.block_lost && step.kind.in_block() {
                if matches!(step.kind, StepKind::Commit | StepKind::Rollback) {
                    state.block_lost = false;
                    state.in_block = false;
                }
                if matches!(step_ref, StepRef::Scripted(_)) {
                    let reason = format!(
                        "{}: its transaction was lost with the connection to the database",
                        describe(&workload, session, &step.kind)
                    );
                    ctx.observe(Observation::ScriptedNotApplied { ops: step.ops.clone(), reason });
                }
                continue;
            }
            match step.kind {
                StepKind::Begin { .. } => {
                    state.in_block = true;
                    state.block_lost = false;
                }
                StepKind::Commit | StepKind::Rollback => state.in_block = false,
                _ => {}
            }
            state.awaiting = Some(step_ref);
            let request = request(&step.kind, &step.ops);
            ctx.send(Node::Postgres, Msg::Sql { session: NAMED | session as SessionId, request });
        }
    }

    /// A reply to named session `session`.
    fn answered(&mut self, ctx: &mut Ctx, session: usize, reply: SqlReply) {
        let Some(state) = self.sessions.get_mut(session) else { return };
        let Some(step_ref) = state.awaiting.take() else { return };
        let workload = self.workload.clone();
        let step = workload.step(step_ref);
        state.idle_until_ms = ctx.now.ms().saturating_add(step.idle_ms);
        const NO_ROW: &str = "it changed no row: no row with that key exists when it runs";
        // What did not apply, and whether it failed (rather than found no row).
        let not_applied = match (&step.kind, reply) {
            (_, SqlReply::Error(reason)) => Some((reason, true)),
            (StepKind::Statement | StepKind::Copy, SqlReply::StatementDone { changes }) if changes.is_empty() => {
                Some((NO_ROW.into(), false))
            }
            (StepKind::Statement | StepKind::Copy, SqlReply::NothingChanged { .. }) => Some((NO_ROW.into(), false)),
            (StepKind::Commit, SqlReply::RolledBack { .. }) => {
                Some(("PostgreSQL rolled the transaction back: an earlier statement of it had failed".into(), true))
            }
            _ => None,
        };
        if let Some((reason, failed)) = not_applied {
            let reason = format!("{}: {reason}", describe(&workload, session, &step.kind));
            match step_ref {
                StepRef::Scripted(_) => {
                    ctx.observe(Observation::ScriptedNotApplied { ops: step.ops.clone(), reason });
                }
                // A background statement that finds no row is the workload's own business.
                StepRef::Timed(_) if !failed => {}
                StepRef::Timed(_) => ctx.observe(Observation::AppTxnFailed { reason }),
            }
        }
        self.advance(ctx, session);
    }

    fn arm_next(&mut self, ctx: &mut Ctx) {
        let now = ctx.now.ms();
        let timed = &self.workload.timed;
        let mut next = timed[self.next_timed.min(timed.len())..]
            .iter()
            .find(|txn| txn.session.is_none())
            .map(|txn| txn.at_ms.unwrap_or(0));
        for (state, session) in self.sessions.iter().zip(&self.workload.sessions) {
            if state.awaiting.is_some() {
                continue;
            }
            let at = match session.steps.get(state.next as usize) {
                Some(StepRef::Timed(index)) => timed[*index as usize].at_ms.unwrap_or(0),
                Some(StepRef::Scripted(index)) if self.due.contains(index) => 0,
                _ => continue,
            };
            let at = at.max(state.idle_until_ms);
            next = Some(next.map_or(at, |next| next.min(at)));
        }
        if let Some(at) = next {
            ctx.set_timer(Timer::Workload, at.saturating_sub(now));
        }
    }
}

/// The request of a step.
fn request(kind: &StepKind, ops: &[RowOp]) -> SqlRequest {
    match kind {
        StepKind::Statement => SqlRequest::Statement { ops: ops.to_vec(), copy: false },
        StepKind::Copy => SqlRequest::Statement { ops: ops.to_vec(), copy: true },
        StepKind::Begin { isolation } => SqlRequest::Begin { isolation: *isolation },
        StepKind::Commit => SqlRequest::Commit,
        StepKind::Rollback => SqlRequest::Rollback,
        StepKind::Message { transactional, prefix, payload_bytes } => SqlRequest::EmitMessage {
            transactional: *transactional,
            prefix: prefix.clone(),
            payload_bytes: *payload_bytes,
        },
        StepKind::OutboxMessage { transactional, prefix, payload_bytes, event } => SqlRequest::OutboxMessage {
            ops: ops.to_vec(),
            transactional: *transactional,
            prefix: prefix.clone(),
            payload_bytes: *payload_bytes,
            event: *event,
        },
        // Never a session's (the scenario reader refuses it there): no database work.
        StepKind::KafkaSignal { .. } | StepKind::ConnectorConfig { .. } => {
            SqlRequest::Statement { ops: Vec::new(), copy: false }
        }
    }
}

/// "session s1, COMMIT": a step of a named session, for the timeline.
fn describe(workload: &Workload, session: usize, kind: &StepKind) -> String {
    format!("session {}, {}", workload.sessions[session].name, kind.describe())
}

impl Component for App {
    fn start(&mut self, ctx: &mut Ctx) {
        self.arm_next(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx, _from: Node, msg: Msg) {
        match msg {
            Msg::SqlReply { session, reply } if session & NAMED != 0 => {
                self.answered(ctx, (session & !NAMED) as usize, reply);
                self.arm_next(ctx);
            }
            Msg::SqlReply { session, reply } if session & SCRIPTED != 0 => {
                self.scripted_unanswered = self.scripted_unanswered.saturating_sub(1);
                match reply {
                    SqlReply::NothingChanged { ops } => ctx.observe(Observation::ScriptedNotApplied {
                        ops,
                        reason: "it changed no row: no row with that key exists when it runs".into(),
                    }),
                    SqlReply::StatementDone { changes } if changes.is_empty() => {
                        ctx.observe(Observation::ScriptedNotApplied {
                            ops: Vec::new(),
                            reason: "it changed no row: no row with that key exists when it runs".into(),
                        })
                    }
                    SqlReply::Error(reason) => ctx.observe(Observation::ScriptedNotApplied { ops: Vec::new(), reason }),
                    _ => {}
                }
            }
            Msg::SqlReply { reply: SqlReply::Error(reason), .. } => {
                ctx.observe(Observation::AppTxnFailed { reason });
            }
            Msg::Control(Control::RunScripted { index }) => {
                let workload = self.workload.clone();
                if let Some(txn) = workload.scripted.get(index) {
                    match txn.session {
                        None => {
                            if !matches!(txn.kind, StepKind::KafkaSignal { .. } | StepKind::ConnectorConfig { .. }) {
                                self.scripted_unanswered += 1;
                            }
                            self.run(ctx, txn);
                        }
                        Some(session) => {
                            self.due.insert(index as u32);
                            self.advance(ctx, session as usize);
                            self.arm_next(ctx);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx, timer: Timer) {
        if timer != Timer::Workload {
            return;
        }
        let workload = self.workload.clone();
        while let Some(txn) = workload.timed.get(self.next_timed) {
            if txn.at_ms.unwrap_or(0) > ctx.now.ms() {
                break;
            }
            self.next_timed += 1;
            if txn.session.is_none() {
                self.run(ctx, txn);
            }
        }
        for session in 0..self.sessions.len() {
            self.advance(ctx, session);
        }
        self.arm_next(ctx);
    }

    fn on_connection_lost(&mut self, ctx: &mut Ctx, peer: Node) {
        if !matches!(peer, Node::Postgres | Node::Pg1 | Node::Pg2) {
            return;
        }
        if self.scripted_unanswered > 0 {
            let unanswered = std::mem::take(&mut self.scripted_unanswered);
            ctx.observe(Observation::ScriptedNotApplied {
                ops: Vec::new(),
                reason: format!(
                    "{unanswered} scripted transaction(s) got no answer: the connection to the database was lost \
                     (whether each committed shows in the timeline)"
                ),
            });
        }
        if self.sessions.is_empty() {
            return;
        }
        let workload = self.workload.clone();
        for session in 0..self.sessions.len() {
            let state = &mut self.sessions[session];
            if state.in_block {
                state.block_lost = true;
                state.in_block = false;
            }
            if let Some(step_ref) = state.awaiting.take()
                && matches!(step_ref, StepRef::Scripted(_))
            {
                let step = workload.step(step_ref);
                let reason = format!(
                    "{}: it got no answer, the connection to the database was lost",
                    describe(&workload, session, &step.kind)
                );
                ctx.observe(Observation::ScriptedNotApplied { ops: step.ops.clone(), reason });
            }
            self.advance(ctx, session);
        }
        self.arm_next(ctx);
    }

    fn crash(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::change::Change;
    use crate::core::component::Outbox;
    use crate::core::ids::{Status, TableId};
    use crate::core::lsn::Lsn;
    use crate::core::time::SimTime;

    const TABLE: TableId = TableId(0);

    fn step(session: u32, kind: StepKind, ops: Vec<RowOp>) -> WorkloadTxn {
        WorkloadTxn { at_ms: None, ops, kind, session: Some(session), idle_ms: 0 }
    }

    fn update(key: i64) -> Vec<RowOp> {
        vec![RowOp::Update { table: TABLE, key, status: Status::Paid }]
    }

    /// Two sessions, `BEGIN`, two updates and `COMMIT` each; `s2`'s steps interleaved with `s1`'s.
    fn two_sessions() -> App {
        let begin = StepKind::Begin { isolation: Isolation::ReadCommitted };
        let scripted = vec![
            step(0, begin.clone(), Vec::new()),
            step(0, StepKind::Statement, update(1)),
            step(1, begin, Vec::new()),
            step(0, StepKind::Statement, update(2)),
            step(1, StepKind::Statement, update(3)),
            step(0, StepKind::Commit, Vec::new()),
            step(1, StepKind::Rollback, Vec::new()),
        ];
        let steps = |indices: &[u32]| indices.iter().map(|index| StepRef::Scripted(*index)).collect();
        let sessions = vec![
            SessionSteps { name: "s1".into(), steps: steps(&[0, 1, 3, 5]) },
            SessionSteps { name: "s2".into(), steps: steps(&[2, 4, 6]) },
        ];
        App::new(CopyOnWrite::new(Workload { timed: Vec::new(), scripted, sessions }))
    }

    /// Runs one step of the app at `now_ms` and returns what it asked.
    fn act(app: &mut App, now_ms: u64, f: impl FnOnce(&mut App, &mut Ctx)) -> Outbox {
        let mut outbox = Outbox::default();
        let mut ctx = Ctx::new(SimTime(now_ms), Node::App, &mut outbox);
        f(app, &mut ctx);
        outbox
    }

    fn run(app: &mut App, index: usize) -> Vec<(SessionId, SqlRequest)> {
        sent(act(app, 0, |app, ctx| app.on_message(ctx, Node::App, Msg::Control(Control::RunScripted { index }))))
    }

    fn reply(app: &mut App, session: SessionId, reply: SqlReply) -> Outbox {
        act(app, 0, |app, ctx| app.on_message(ctx, Node::Postgres, Msg::SqlReply { session, reply }))
    }

    fn sent(outbox: Outbox) -> Vec<(SessionId, SqlRequest)> {
        outbox
            .sends
            .into_iter()
            .map(|(to, msg)| match (to, msg) {
                (Node::Postgres, Msg::Sql { session, request }) => (session, request),
                other => panic!("the app sent {other:?}"),
            })
            .collect()
    }

    fn done(changes: usize) -> SqlReply {
        let change = Change {
            lsn: Lsn(1),
            table: TABLE,
            key: 1,
            kind: crate::core::change::ChangeKind::Delete { before: None },
        };
        SqlReply::StatementDone { changes: vec![change; changes] }
    }

    #[test]
    fn a_session_sends_one_request_at_a_time_in_its_order_and_sessions_interleave() {
        let mut app = two_sessions();
        let (s1, s2) = (NAMED, NAMED | 1);
        assert_eq!(run(&mut app, 0), [(s1, SqlRequest::Begin { isolation: Isolation::ReadCommitted })]);
        // s1's next step waits for the BEGIN's reply: the exhaustive lens does not offer it, and
        // a trigger that comes early only marks it due.
        assert!(!app.may_run_scripted(1, 0));
        assert!(app.may_run_scripted(2, 0), "the other session is free");
        assert!(run(&mut app, 1).is_empty(), "it waits for the reply");
        assert!(!app.timed_done(), "a due step is still to be sent");
        assert_eq!(
            sent(reply(&mut app, s1, SqlReply::Ok)),
            [(s1, SqlRequest::Statement { ops: update(1), copy: false })],
            "the reply lets the due statement go"
        );
        assert_eq!(run(&mut app, 2), [(s2, SqlRequest::Begin { isolation: Isolation::ReadCommitted })]);
        // A statement of a session that has not reached it is not offered.
        assert!(!app.may_run_scripted(5, 0));
        assert!(sent(reply(&mut app, s1, done(1))).is_empty());
        assert!(app.may_run_scripted(3, 0));
        assert_eq!(run(&mut app, 3), [(s1, SqlRequest::Statement { ops: update(2), copy: false })]);
        assert!(sent(reply(&mut app, s2, SqlReply::Ok)).is_empty());
        assert_eq!(run(&mut app, 4), [(s2, SqlRequest::Statement { ops: update(3), copy: false })]);
        assert!(sent(reply(&mut app, s1, done(1))).is_empty());
        assert_eq!(run(&mut app, 5), [(s1, SqlRequest::Commit)]);
        assert!(sent(reply(&mut app, s2, done(1))).is_empty());
        assert_eq!(run(&mut app, 6), [(s2, SqlRequest::Rollback)]);
        assert!(!app.timed_done(), "the rollback's answer is awaited");
        reply(&mut app, s2, SqlReply::RolledBack { xid: None });
        assert!(!app.timed_done(), "the commit's answer is awaited");
        reply(&mut app, s1, SqlReply::Ok);
        assert!(app.timed_done());
    }

    #[test]
    fn a_failed_statement_and_a_commit_turned_rollback_are_reported_not_dropped() {
        let mut app = two_sessions();
        run(&mut app, 0);
        reply(&mut app, NAMED, SqlReply::Ok);
        run(&mut app, 1);
        let out = reply(&mut app, NAMED, SqlReply::Error("ERROR: duplicate key".into()));
        match out.observations.as_slice() {
            [Observation::ScriptedNotApplied { ops, reason }] => {
                assert_eq!(ops, &update(1));
                assert!(reason.contains("session s1") && reason.contains("duplicate key"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        run(&mut app, 3);
        reply(&mut app, NAMED, SqlReply::Error("ERROR: current transaction is aborted".into()));
        run(&mut app, 5);
        let out = reply(&mut app, NAMED, SqlReply::RolledBack { xid: Some(7) });
        match out.observations.as_slice() {
            [Observation::ScriptedNotApplied { reason, .. }] => {
                assert!(reason.contains("COMMIT") && reason.contains("rolled the transaction back"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        // A statement that changes no row.
        let out = {
            let mut app = two_sessions();
            run(&mut app, 0);
            reply(&mut app, NAMED, SqlReply::Ok);
            run(&mut app, 1);
            reply(&mut app, NAMED, done(0))
        };
        assert!(
            matches!(out.observations.as_slice(), [Observation::ScriptedNotApplied { reason, .. }] if reason.contains("changed no row"))
        );
    }

    #[test]
    fn a_lost_connection_loses_the_open_transaction_and_its_later_steps_are_reported_not_sent() {
        let mut app = two_sessions();
        run(&mut app, 0);
        reply(&mut app, NAMED, SqlReply::Ok);
        run(&mut app, 1);
        let out = act(&mut app, 0, |app, ctx| app.on_connection_lost(ctx, Node::Postgres));
        assert!(
            matches!(out.observations.as_slice(), [Observation::ScriptedNotApplied { reason, .. }] if reason.contains("got no answer"))
        );
        // The block is gone: its next statement and its COMMIT are not sent (autocommit would
        // be another meaning), each is reported.
        let out = act(&mut app, 0, |app, ctx| {
            app.on_message(ctx, Node::App, Msg::Control(Control::RunScripted { index: 3 }))
        });
        assert!(out.sends.is_empty());
        assert!(
            matches!(out.observations.as_slice(), [Observation::ScriptedNotApplied { reason, .. }] if reason.contains("lost with the connection"))
        );
        let out = act(&mut app, 0, |app, ctx| {
            app.on_message(ctx, Node::App, Msg::Control(Control::RunScripted { index: 5 }))
        });
        assert!(out.sends.is_empty());
        assert_eq!(out.observations.len(), 1);
        // The other session had not begun: its BEGIN goes.
        assert_eq!(run(&mut app, 2), [(NAMED | 1, SqlRequest::Begin { isolation: Isolation::ReadCommitted })]);
    }

    #[test]
    fn an_idle_step_holds_its_session_and_the_workload_timer_wakes_it() {
        let mut app = two_sessions();
        let mut workload = (*app.workload).clone();
        workload.scripted[1].idle_ms = 600_000;
        app = App::new(CopyOnWrite::new(workload));
        run(&mut app, 0);
        reply(&mut app, NAMED, SqlReply::Ok);
        run(&mut app, 1);
        let out = reply(&mut app, NAMED, done(1));
        assert!(out.sends.is_empty());
        // Due now, sent only once the idle time has passed.
        let out = act(&mut app, 1_000, |app, ctx| {
            app.on_message(ctx, Node::App, Msg::Control(Control::RunScripted { index: 3 }))
        });
        assert!(out.sends.is_empty());
        assert!(
            out.timers
                .contains(&crate::core::component::TimerRequest::Set { timer: Timer::Workload, after_ms: 599_000 }),
            "{:?}",
            out.timers
        );
        assert!(!app.may_run_scripted(3, 1_000));
        let out = act(&mut app, 600_000, |app, ctx| app.on_timer(ctx, Timer::Workload));
        assert_eq!(sent(out), [(NAMED, SqlRequest::Statement { ops: update(2), copy: false })]);
    }

    #[test]
    fn a_one_row_autocommit_step_is_still_one_transaction_request() {
        let mut app = App::new(CopyOnWrite::new(Workload {
            timed: Vec::new(),
            scripted: vec![
                WorkloadTxn::autocommit(None, update(1)),
                WorkloadTxn { kind: StepKind::Copy, ..WorkloadTxn::autocommit(None, update(2)) },
            ],
            sessions: Vec::new(),
        }));
        assert!(matches!(run(&mut app, 0).as_slice(), [(_, SqlRequest::Transaction { ops })] if *ops == update(1)));
        assert!(matches!(run(&mut app, 1).as_slice(), [(_, SqlRequest::Statement { copy: true, .. })]));
    }
}
