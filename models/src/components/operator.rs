//! The operator's failover gate: after a failover, compare the connector's saved offset with the
//! new source's slot before it may publish more events (the checks of the PostgreSQL 17
//! documentation, "Logical Replication Failover": the slot is there, synced and valid, and its
//! `confirmed_flush_lsn` is not past what the consumer holds).
//!
//! After a promotion, before the connector may publish again: stop it (so its last offsets are
//! committed), read its saved offset and the new primary's slot and timeline, and decide. The
//! saved offset is available iff the slot exists with `confirmed_flush ≤ saved ≤ current WAL`,
//! the saved position is on the new timeline's history (`≤` the switch point), and the saved
//! snapshot was complete. Available → resume. Otherwise, by policy: rebuild (delete the offsets,
//! drop an unusable slot, resume so that a new snapshot runs on a new slot) or fail closed (stay
//! stopped and say why).

use crate::core::component::{Component, Ctx, Timer};
use crate::core::event::SourceOffset;
use crate::core::ids::Node;
use crate::core::lsn::Lsn;
use crate::core::observe::{GateVerdict, Observation};
use crate::core::protocol::ConnectorState;
use crate::core::protocol::{
    Control, KafkaReply, KafkaRequest, Msg, RestReply, RestRequest, SlotRow, SqlReply, SqlRequest,
};
use serde::{Deserialize, Serialize};

/// What the gate does when the saved offset is not available on the new source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GatePolicy {
    /// No gate: the connector finds its own way (its start-up check, its snapshot mode).
    Off,
    Rebuild,
    FailClosed,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Step {
    Idle,
    Stopping,
    AwaitingStopped,
    ReadingOffset,
    ReadingSlot,
    ReadingTimeline,
    DeletingOffsets,
    DroppingSlot,
    Resuming,
    Done,
    /// The slot-recreation procedure: dropping, then creating.
    RecreateDropping,
    RecreateCreating,
    /// The slot advanced by hand: waiting for `pg_replication_slot_advance` to answer.
    Advancing,
    /// `PUT /connectors/<name>/config` sent: waiting for its answer.
    Reconfiguring,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Operator {
    pub policy: GatePolicy,
    /// Every connector the operator may act on, by the index of its `[[connector]]` entry: its
    /// name, its slot, and whether resuming it with no offsets takes a new snapshot.
    pub targets: Vec<OperatorTarget>,
    /// The connector the current procedure acts on (the failover gate: the first).
    target: u8,
    pub connector: String,
    pub slot_name: String,
    step: Step,
    saved: Option<SourceOffset>,
    slot: Option<SlotRow>,
    next_session: u64,
    /// The request of the current step, sent again if its connection is lost.
    last: Option<(Node, Msg)>,
    /// The recovery runbook is running (no gate decision: the offsets go, the slot goes).
    rebuilding: bool,
    /// Procedures that arrived while another one ran, in order: each runs when the one before
    /// it ends (a person at the console finishes one procedure before starting the next).
    waiting: Vec<Control>,
    /// The REST call under way was refused (the worker was down) and is being retried.
    rest_refused: bool,
    /// Whether the connector, resumed with no offsets, takes a new snapshot (every
    /// `snapshot.mode` but `no_data`): what a rebuild's resume says it does.
    pub rebuild_snapshots: bool,
    /// How many times the runbook's slot drop was refused because the slot is active.
    drop_refusals: u32,
    /// How many Connect workers serve the REST API (`[connect] workers`): a call refused by one
    /// (it is down) goes to the next, as through a load balancer in front of the group.
    pub workers: u8,
    /// The worker its REST calls go to now.
    rest_worker: Node,
}

/// A connector as the operator knows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OperatorTarget {
    pub name: String,
    pub slot_name: String,
    /// Every `snapshot.mode` but `no_data`: resumed with no offsets, it snapshots again.
    pub rebuild_snapshots: bool,
}

/// How many times (one a second) the runbook tries a slot drop PostgreSQL refuses because the slot
/// is active: `wal_sender_timeout`'s default, 60 s, ends an orphaned walsender by then.
const DROP_RETRIES: u32 = 60;

/// Polling interval for the connector's status while it stops.
const STATUS_POLL_MS: u64 = 500;

/// How soon the operator's REST client calls again after a refused connection.
pub const REST_RETRY_MS: u64 = 100;

/// How soon the operator makes a REST call again after it failed with an error.
const REST_ERROR_RETRY_MS: u64 = 1_000;

impl Operator {
    pub fn new(policy: GatePolicy, connector: String, slot_name: String) -> Operator {
        let first = OperatorTarget { name: connector.clone(), slot_name: slot_name.clone(), rebuild_snapshots: true };
        Operator {
            policy,
            targets: vec![first],
            target: 0,
            connector,
            slot_name,
            step: Step::Idle,
            saved: None,
            slot: None,
            next_session: 1,
            last: None,
            rebuilding: false,
            waiting: Vec::new(),
            rest_refused: false,
            rebuild_snapshots: true,
            drop_refusals: 0,
            workers: 1,
            rest_worker: Node::Connect,
        }
    }

    /// A procedure, for people.
    fn procedure(control: &Control) -> &'static str {
        match control {
            Control::FailoverHappened => "the failover gate",
            Control::Rebuild { .. } => "rebuild-connector (the recovery runbook)",
            Control::RecreateSlot { .. } => "recreate-slot",
            Control::AdvanceSlot { .. } => "advance-slot",
            Control::UpdateConfig { .. } => "the configuration update",
            _ => "an operator's action",
        }
    }

    /// The procedure under way, for people.
    fn current_procedure(&self) -> &'static str {
        match self.step {
            Step::RecreateDropping | Step::RecreateCreating => "recreate-slot",
            Step::Advancing => "advance-slot",
            Step::Reconfiguring => "the configuration update",
            _ if self.rebuilding => "rebuild-connector (the recovery runbook)",
            _ => "the failover gate",
        }
    }

    /// The procedure under way has ended: the next one waiting, if any, runs now.
    fn finish(&mut self, ctx: &mut Ctx) {
        self.step = Step::Done;
        self.rebuilding = false;
        if !self.waiting.is_empty() {
            let next = self.waiting.remove(0);
            ctx.observe(Observation::OperatorResumesWaiting { procedure: Operator::procedure(&next).into() });
            self.on_message(ctx, Node::Operator, Msg::Control(next));
        }
    }

    /// What resuming a rebuilt connector does: a new snapshot on a new slot, or, under
    /// `snapshot.mode=no_data`, streaming from the new slot with nothing to restore the history.
    fn rebuild_resume_text(&self) -> &'static str {
        if self.rebuild_snapshots {
            "rebuild: resume the connector (a new snapshot on a new slot)"
        } else {
            "rebuild: resume the connector on a new slot WITHOUT a snapshot (snapshot.mode=no_data): it streams from the \
             new slot on, and nothing restores what was committed before it"
        }
    }

    /// Whether a procedure (the gate, the runbook, a slot recreation) is under way: the
    /// connector it stopped is about to be resumed.
    pub fn is_busy(&self) -> bool {
        !matches!(self.step, Step::Idle | Step::Done)
    }

    fn send(&mut self, ctx: &mut Ctx, to: Node, msg: Msg) {
        self.last = Some((to, msg.clone()));
        ctx.send(to, msg);
    }

    fn rest(&mut self, ctx: &mut Ctx, request: RestRequest) {
        let worker = self.rest_worker;
        self.send(ctx, worker, Msg::Rest { connector: self.target, request });
    }

    /// A REST call failed with `error`: a person reads the error and makes the call again in a
    /// second (a group's worker refuses an offset reset until the stop has reached the leader,
    /// a forwarded call fails when the leader is gone).
    fn rest_failed(&mut self, ctx: &mut Ctx, error: String) {
        let Some((_, Msg::Rest { request, .. })) = &self.last else { return };
        ctx.observe(Observation::RestFailed {
            request: request.call(&self.connector),
            error,
            retry_after_ms: REST_ERROR_RETRY_MS,
        });
        ctx.set_timer(Timer::OperatorRetry, REST_ERROR_RETRY_MS);
    }

    /// The procedure starting now acts on connector `connector`.
    fn aim(&mut self, connector: u8) {
        if let Some(target) = self.targets.get(usize::from(connector)) {
            self.target = connector;
            self.connector.clone_from(&target.name);
            self.slot_name.clone_from(&target.slot_name);
            self.rebuild_snapshots = target.rebuild_snapshots;
        }
    }

    fn sql(&mut self, ctx: &mut Ctx, request: SqlRequest) {
        let session = self.next_session;
        self.next_session += 1;
        self.send(ctx, Node::Postgres, Msg::Sql { session, request });
    }

    fn action(&self, ctx: &mut Ctx, action: &str) {
        ctx.observe(Observation::OperatorAction { action: action.into() });
    }

    fn decide(&mut self, ctx: &mut Ctx, timeline: u32, switch_lsn: Option<Lsn>, current_lsn: Lsn) {
        let saved = self.saved;
        let resume = saved.and_then(|offset| offset.resume_lsn());
        let unavailable = match (saved, resume, &self.slot) {
            (None, _, _) => Some("no saved offset".to_string()),
            (Some(offset), _, _) if offset.initial_snapshot_running() => {
                Some("the saved offset is inside an incomplete snapshot".into())
            }
            (_, None, _) => Some("the saved offset has no position".into()),
            (_, _, None) => Some(format!("slot \"{}\" does not exist on the new primary", self.slot_name)),
            (_, Some(resume), Some(slot)) => {
                let confirmed = slot.confirmed_flush_lsn.unwrap_or_default();
                if slot.restart_lsn.is_none() {
                    Some(format!("slot \"{}\" is invalidated", self.slot_name))
                } else if confirmed > resume {
                    Some(format!("slot confirmed_flush {confirmed} is past the saved offset {resume}"))
                } else if resume > current_lsn {
                    Some(format!("saved offset {resume} is past the new primary's WAL end {current_lsn}"))
                } else if switch_lsn.is_some_and(|switch| resume > switch) {
                    Some(format!(
                        "saved offset {resume} is past the timeline {timeline} switch point {}",
                        switch_lsn.unwrap_or_default()
                    ))
                } else {
                    None
                }
            }
        };
        let verdict = match (&unavailable, self.policy) {
            (None, _) => GateVerdict::Available,
            (Some(_), GatePolicy::FailClosed) => GateVerdict::FailClosed,
            (Some(_), _) => GateVerdict::Rebuild,
        };
        let detail = unavailable.unwrap_or_else(|| "saved offset is available on the new primary's slot".into());
        ctx.observe(Observation::GateChecked {
            saved_offset: saved.map(Box::new),
            slot: self.slot.clone().map(Box::new),
            timeline,
            switch_lsn,
            current_lsn,
            verdict,
            detail,
        });
        match verdict {
            GateVerdict::Available => {
                self.step = Step::Resuming;
                self.action(ctx, "resume the connector");
                self.rest(ctx, RestRequest::Resume);
            }
            GateVerdict::Rebuild => {
                self.step = Step::DeletingOffsets;
                self.action(ctx, "rebuild: delete the connector's offsets");
                self.rest(ctx, RestRequest::DeleteOffsets);
            }
            GateVerdict::FailClosed => {
                self.action(ctx, "fail closed: the connector stays stopped");
                self.finish(ctx);
            }
        }
    }
}

impl Component for Operator {
    fn start(&mut self, _ctx: &mut Ctx) {}

    fn on_message(&mut self, ctx: &mut Ctx, _from: Node, msg: Msg) {
        if let Msg::Control(
            control @ (Control::RecreateSlot { .. }
            | Control::Rebuild { .. }
            | Control::FailoverHappened
            | Control::AdvanceSlot { .. }
            | Control::UpdateConfig { .. }),
        ) = &msg
            && self.is_busy()
        {
            if *control == Control::FailoverHappened && self.policy == GatePolicy::Off {
                return; // no gate to run
            }
            ctx.observe(Observation::OperatorWaits {
                procedure: Operator::procedure(control).into(),
                behind: self.current_procedure().into(),
            });
            self.waiting.push(control.clone());
            return;
        }
        if self.rest_refused
            && matches!(msg, Msg::RestReply { .. })
            && let Some((_, Msg::Rest { request, .. })) = &self.last
        {
            self.rest_refused = false;
            ctx.observe(Observation::RestAnswered { request: request.call(&self.connector) });
        }
        match (self.step.clone(), msg) {
            (Step::Idle | Step::Done, Msg::Control(Control::RecreateSlot { connector })) => {
                self.aim(connector);
                self.step = Step::RecreateDropping;
                self.action(ctx, &format!("drop slot \"{}\" if it exists", self.slot_name));
                let slot = self.slot_name.clone();
                self.sql(ctx, SqlRequest::DropSlot { slot });
            }
            // `pg_drop_replication_slot` fails on a slot a walsender still holds
            // (`ReplicationSlotAcquire`: "replication slot ... is active for PID ..."). The runbook
            // stopped the connector, so the walsender is an orphan whose client is gone behind a
            // broken network: the operator tries again every second, for as long as
            // `wal_sender_timeout` (60 s) gives such a walsender, then goes on as the runbook says.
            (Step::DroppingSlot, Msg::SqlReply { reply: SqlReply::Error(error), .. })
                if error.contains("is active") && self.drop_refusals < DROP_RETRIES =>
            {
                if self.drop_refusals == 0 {
                    self.action(
                        ctx,
                        &format!("drop slot \"{}\" failed: {error}; trying again every second", self.slot_name),
                    );
                }
                self.drop_refusals += 1;
                ctx.set_timer(Timer::OperatorRetry, 1_000);
            }
            (Step::RecreateDropping, Msg::SqlReply { .. }) => {
                self.step = Step::RecreateCreating;
                self.action(
                    ctx,
                    &format!("create slot \"{}\" with pg_create_logical_replication_slot", self.slot_name),
                );
                let slot = self.slot_name.clone();
                self.sql(ctx, SqlRequest::CreateSlot { slot, plugin: "pgoutput".into(), database: None });
            }
            (Step::RecreateCreating, Msg::SqlReply { .. }) => self.finish(ctx),
            // `pg_replication_slot_advance` by hand, on a session of its own. PostgreSQL refuses it
            // while a walsender holds the slot ("replication slot ... is active for PID ...",
            // `ReplicationSlotAcquire`) and below `confirmed_flush` ("cannot advance replication
            // slot to ..., minimum is ...", `slotfuncs.c`): the operator reports the refusal and the
            // procedure ends there (a person stops the connector first and tries again).
            (Step::Idle | Step::Done, Msg::Control(Control::AdvanceSlot { connector, to })) => {
                self.aim(connector);
                self.step = Step::Advancing;
                let slot = self.slot_name.clone();
                let target = match to {
                    Some(lsn) => lsn.to_string(),
                    None => "pg_current_wal_lsn()".to_string(),
                };
                self.action(
                    ctx,
                    &format!("advance slot \"{slot}\" by hand: SELECT pg_replication_slot_advance('{slot}', {target})"),
                );
                // `pg_current_wal_lsn()` is evaluated in the same statement; the function clamps
                // its target to the flush pointer (`GetFlushRecPtr`), so the highest LSN stands
                // for it.
                self.sql(ctx, SqlRequest::AdvanceSlot { slot, to: to.unwrap_or(Lsn(u64::MAX)) });
            }
            (Step::Advancing, Msg::SqlReply { reply, .. }) => {
                let text = match reply {
                    SqlReply::Lsn(at) => format!("slot \"{}\" advanced: confirmed_flush_lsn is {at}", self.slot_name),
                    SqlReply::Error(error) => format!("advancing slot \"{}\" failed: {error}", self.slot_name),
                    _ => format!("slot \"{}\" advanced", self.slot_name),
                };
                self.action(ctx, &text);
                self.finish(ctx);
            }
            // A deployment puts the connector's new configuration (a scripted `connector_config`
            // step); a refused or failed call is made again, as for every REST call.
            (Step::Idle | Step::Done, Msg::Control(Control::UpdateConfig { connector, version })) => {
                self.aim(connector);
                self.step = Step::Reconfiguring;
                self.action(
                    ctx,
                    &format!(
                        "PUT /connectors/{}/config: configuration {version} (a new table.include.list)",
                        self.connector
                    ),
                );
                self.rest(ctx, RestRequest::PutConfig { version });
            }
            (Step::Reconfiguring, Msg::RestReply { reply: RestReply::Ok }) => self.finish(ctx),
            (Step::Reconfiguring, Msg::RestReply { reply: RestReply::Error(error) }) => {
                self.rest_failed(ctx, error);
            }
            (Step::Idle | Step::Done, Msg::Control(Control::Rebuild { connector })) => {
                self.aim(connector);
                self.rebuilding = true;
                self.step = Step::Stopping;
                self.action(ctx, "runbook: stop the connector");
                self.rest(ctx, RestRequest::Stop);
            }
            (Step::Idle | Step::Done, Msg::Control(Control::FailoverHappened)) => {
                if self.policy == GatePolicy::Off {
                    return;
                }
                self.aim(0);
                self.step = Step::Stopping;
                self.action(ctx, "failover gate: stop the connector");
                self.rest(ctx, RestRequest::Stop);
            }
            (Step::DeletingOffsets, Msg::RestReply { reply: RestReply::Error(error) }) => {
                // Not STOPPED (someone resumed it, or the stop has not reached the leader):
                // stop it again, wait for STOPPED, then delete.
                self.rest_failed(ctx, error);
                self.action(ctx, "the offsets cannot be deleted yet: stop the connector again first");
                self.step = Step::Stopping;
                let worker = self.rest_worker;
                self.last = Some((worker, Msg::Rest { connector: self.target, request: RestRequest::Stop }));
            }
            (Step::Stopping | Step::Resuming, Msg::RestReply { reply: RestReply::Error(error) }) => {
                self.rest_failed(ctx, error);
            }
            (Step::AwaitingStopped, Msg::RestReply { reply: RestReply::Error(error) }) => {
                self.rest_failed(ctx, error);
            }
            // An answer belongs to its call (an HTTP response to its request): OK to a stop, an
            // offset reset or a resume, a status to a status call. Any other is a late answer to
            // an earlier call (a worker answering after the operator had called another) and
            // changes nothing.
            (Step::Stopping, Msg::RestReply { reply: RestReply::Ok }) => {
                self.step = Step::AwaitingStopped;
                self.rest(ctx, RestRequest::Status);
            }
            (Step::AwaitingStopped, Msg::RestReply { reply: RestReply::Status { state } }) => {
                if state == ConnectorState::Stopped && self.rebuilding {
                    self.step = Step::DeletingOffsets;
                    self.action(ctx, "runbook: delete the connector's offsets");
                    self.rest(ctx, RestRequest::DeleteOffsets);
                } else if state == ConnectorState::Stopped {
                    self.step = Step::ReadingOffset;
                    let connector = self.connector.clone();
                    self.send(
                        ctx,
                        Node::Kafka,
                        Msg::Kafka { request_id: 1, request: KafkaRequest::ReadSourceOffset { connector } },
                    );
                } else if state == ConnectorState::Running {
                    // Someone resumed the connector after this procedure's stop (a second
                    // operator, a deployment tool): its target state is RUNNING again, and it
                    // would never come to STOPPED. Stop it again, as a person watching would.
                    self.step = Step::Stopping;
                    self.action(ctx, "the connector is RUNNING again (resumed by someone else): stop it again");
                    self.rest(ctx, RestRequest::Stop);
                } else {
                    ctx.set_timer(Timer::OperatorRetry, STATUS_POLL_MS);
                }
            }
            (Step::ReadingOffset, Msg::KafkaReply { reply: KafkaReply::SourceOffset(saved), .. }) => {
                self.saved = saved;
                self.step = Step::ReadingSlot;
                let slot = self.slot_name.clone();
                self.sql(ctx, SqlRequest::SlotInfo { slot });
            }
            (Step::ReadingSlot, Msg::SqlReply { reply: SqlReply::Slot(row), .. }) => {
                self.slot = row;
                self.step = Step::ReadingTimeline;
                self.sql(ctx, SqlRequest::TimelineInfo);
            }
            (
                Step::ReadingTimeline,
                Msg::SqlReply { reply: SqlReply::Timeline { timeline, switch_lsn, current_lsn, .. }, .. },
            ) => {
                self.decide(ctx, timeline, switch_lsn, current_lsn);
            }
            (Step::DeletingOffsets, Msg::RestReply { reply: RestReply::Ok }) => {
                if self.slot.is_some() || self.rebuilding {
                    self.step = Step::DroppingSlot;
                    self.action(ctx, "rebuild: drop the unusable slot");
                    let slot = self.slot_name.clone();
                    self.sql(ctx, SqlRequest::DropSlot { slot });
                } else {
                    self.step = Step::Resuming;
                    self.action(ctx, self.rebuild_resume_text());
                    self.rest(ctx, RestRequest::Resume);
                }
            }
            (Step::DroppingSlot, Msg::SqlReply { reply, .. }) => {
                if let SqlReply::Error(error) = reply
                    && self.drop_refusals > 0
                {
                    self.action(ctx, &format!("gave up dropping slot \"{}\" after 60 s: {error}", self.slot_name));
                }
                self.drop_refusals = 0;
                self.step = Step::Resuming;
                self.action(ctx, self.rebuild_resume_text());
                self.rest(ctx, RestRequest::Resume);
            }
            (Step::Resuming, Msg::RestReply { reply: RestReply::Ok }) => self.finish(ctx),
            (_, Msg::SqlReply { session, .. }) => {
                ctx.send(Node::Postgres, Msg::Sql { session, request: SqlRequest::Close });
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx, timer: Timer) {
        if timer != Timer::OperatorRetry {
            return;
        }
        if self.step == Step::AwaitingStopped {
            self.rest(ctx, RestRequest::Status);
        } else if !matches!(self.step, Step::Idle | Step::Done)
            && let Some((to, msg)) = self.last.clone()
        {
            ctx.send(to, msg);
        }
    }

    fn on_connection_lost(&mut self, ctx: &mut Ctx, peer: Node) {
        if matches!(self.step, Step::Idle | Step::Done) {
            return;
        }
        match &self.last {
            // A REST call to a worker that is down is refused at once (the REST server is gone
            // with the process); the operator's client tries again shortly, so the call lands as
            // soon as the restarted worker listens: before its task's first poll returns
            // (`poll.interval.ms` after the task starts).
            Some((worker, Msg::Rest { request, connector })) if peer == *worker && worker.is_connect_worker() => {
                if !self.rest_refused {
                    self.rest_refused = true;
                    ctx.observe(Observation::RestUnanswered {
                        request: request.call(&self.connector),
                        retry_after_ms: REST_RETRY_MS,
                    });
                }
                // In a group, the next worker takes the call.
                let next = peer.worker_index().map_or(0, |index| (index + 1) % usize::from(self.workers.max(1)));
                self.rest_worker = Node::WORKERS[next];
                self.last = Some((self.rest_worker, Msg::Rest { connector: *connector, request: request.clone() }));
                ctx.set_timer(Timer::OperatorRetry, REST_RETRY_MS);
            }
            // Another step whose request was lost is tried again in a second.
            Some((to, _)) if *to == peer => ctx.set_timer(Timer::OperatorRetry, 1_000),
            _ => {}
        }
    }

    fn crash(&mut self) {}
}
