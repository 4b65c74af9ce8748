//! The REST operations of reference kafka-connect.md §5.4 on a worker of a group
//! (`DistributedHerder`, `ConnectorsResource`).
//!
//! - `PUT …/stop` and `DELETE …/offsets` only the leader serves (`NotLeaderException`): any
//!   other worker forwards them to it (`RestClient.httpRequest` to the leader's URL from the last
//!   assignment) and relays the answer. The leader's stop writes the connector's empty task
//!   configuration and its target state STOPPED to the config topic (`stopConnector`); its offset
//!   reset checks the config topic says STOPPED and 0 tasks (`modifyConnectorOffsetsChecks`),
//!   then writes the tombstone.
//! - `PUT …/resume` is served by any worker: it writes the target state STARTED
//!   (`AbstractHerder.resumeConnector`).
//! - `POST …/tasks/0/restart` is served by the worker the task is assigned to; another worker
//!   forwards it to the leader, which forwards it to that worker (`NotAssignedException` with
//!   `member.ownerUrl`).
//! - `GET …/status` is served by any worker from the status topic, which each worker writes for
//!   the connectors it holds (`KafkaStatusBackingStore.putSafe`).
//! - A call that comes while the worker is in a rebalance waits for it (the herder's tick is in
//!   `member.ensureActive()`; its request queue is served after).
//!
//! Every worker's config consumer reads each config record ([`Msg::ConnectConfig`]). A record
//! that changes a connector's tasks makes every worker join again (`onTaskConfigUpdate` sets
//! `needsReconfigRebalance`), and a worker running a task whose connector is now STOPPED stops it
//! at once (`processTaskConfigUpdatesWithIncrementalCooperative`, `stopReconfiguredTasks`). A
//! connector resumed with no task configuration gets one from the worker holding it (the
//! connector instance generates task configs, `reconfigureConnectorTasksWithRetry`; the real
//! worker sends them to the leader to write, the model's writes them itself), and after the
//! rebalance that follows, the worker holding it starts its task.
//!
//! Simplified: a connector's instance and its task go together (see [`super::group`]); the
//! restart requests of KIP-745 (`POST …/restart?includeTasks`) and zombie fencing before an
//! offset reset under exactly-once are not modelled; a REST call has no timeout (the real
//! one's is 90 s).

use super::{ConnectWorker, Pending, TargetState};
use crate::components::connect::group::MemberState;
use crate::core::component::Ctx;
use crate::core::ids::Node;
use crate::core::observe::Observation;
use crate::core::protocol::{
    ConfigWrite, ConnectorConfigRecord, ConnectorState, KafkaRequest, Msg, RestReply, RestRequest,
};

/// Who a REST call's answer goes to: the caller, and its forwarding id if a worker forwarded it.
pub(super) type Caller = (Node, Option<u32>);

/// A REST call waiting for a rebalance to end: its caller, connector, request and hops.
pub(super) type Waiting = (Caller, u8, RestRequest, u8);

/// Answers a REST call.
pub(super) fn answer(ctx: &mut Ctx, (to, id): Caller, reply: RestReply) {
    match id {
        Some(id) => ctx.send(to, Msg::RestForwardReply { id, reply }),
        None => ctx.send(to, Msg::RestReply { reply }),
    }
}

/// What `GET …/status` says from the status topic's `state` and the config topic's `config`:
/// a connector whose target state is STOPPED while the worker holding it has not yet reported
/// it stopped reads as STOPPING (its stop is under way, or its worker is gone and the connector
/// waits to be reassigned); one resumed but still reported STOPPED reads as UNASSIGNED.
pub(super) fn reported(state: ConnectorState, config: ConnectorConfigRecord) -> ConnectorState {
    match (config.running, state) {
        (false, ConnectorState::Stopped) => ConnectorState::Stopped,
        (false, _) => ConnectorState::Stopping,
        (true, ConnectorState::Stopped) => ConnectorState::Unassigned,
        (true, state) => state,
    }
}

impl ConnectWorker {
    /// A REST call on connector `connector` reaches this worker of a group, after `hops`
    /// forwards.
    pub(super) fn group_rest(&mut self, ctx: &mut Ctx, caller: Caller, connector: u8, request: RestRequest, hops: u8) {
        let c = usize::from(connector);
        if c >= self.connectors.len() {
            return answer(ctx, caller, RestReply::Error("Connector not found".into()));
        }
        let member = self.member();
        if member.state != MemberState::Stable {
            self.volatile.rest_waiting.push((caller, connector, request, hops));
            return;
        }
        let leader = member.leader;
        let leads = leader == Some(ctx.me);
        let owner = member.owners.iter().find(|(of, _)| *of == connector).map(|(_, node)| *node);
        match request {
            RestRequest::Status => self.volatile.request(
                ctx,
                c,
                Pending::StatusRead { reply_to: caller },
                KafkaRequest::ReadConnectStatus { connector },
            ),
            RestRequest::Resume => self.write_config(ctx, c, ConfigWrite::TargetState(true), Some(caller)),
            RestRequest::Stop if leads => self.write_config(ctx, c, ConfigWrite::Stop, Some(caller)),
            RestRequest::DeleteOffsets if leads => {
                let connector = &self.connectors[c];
                if connector.target_state != TargetState::Stopped || connector.config_tasks != 0 {
                    let name = &connector.debezium.name;
                    let text = format!(
                        "Connectors must be in the STOPPED state before their offsets can be modified. This can be \
                         done for the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' \
                         endpoint"
                    );
                    return answer(ctx, caller, RestReply::Error(text));
                }
                let name = connector.debezium.name.clone();
                self.volatile.request(
                    ctx,
                    c,
                    Pending::DeleteOffsets { reply_to: caller },
                    KafkaRequest::WriteSourceOffset { connector: name, offset: None },
                );
            }
            RestRequest::RestartTask if self.connectors[c].assigned => {
                self.for_connector(ctx, c, |worker, ctx| worker.restart_task(ctx, c));
                answer(ctx, caller, RestReply::Ok);
            }
            // The scenario reader refuses `connector_config` steps with a group; a call that
            // came anyway is answered, not dropped.
            RestRequest::PutConfig { .. } if leads => answer(
                ctx,
                caller,
                RestReply::Error("PUT /connectors/<name>/config is not modelled in a Connect group yet".into()),
            ),
            // Another worker's to serve: forwarded, at most twice (`HerderRequestHandler`).
            _ if hops >= 2 => answer(
                ctx,
                caller,
                RestReply::Error(
                    "Cannot complete request because of a conflicting operation (e.g. worker rebalance)".into(),
                ),
            ),
            RestRequest::RestartTask if leads => match owner {
                Some(node) if node != ctx.me => self.forward(ctx, node, caller, (connector, request), hops),
                _ => answer(
                    ctx,
                    caller,
                    RestReply::Error("Cannot restart task since it is not assigned to any worker".into()),
                ),
            },
            request => match leader {
                Some(node) if node != ctx.me => self.forward(ctx, node, caller, (connector, request), hops),
                _ => answer(
                    ctx,
                    caller,
                    RestReply::Error(
                        "Cannot complete request momentarily due to no known leader URL, likely because a rebalance \
                         was underway."
                            .into(),
                    ),
                ),
            },
        }
    }

    /// Forwards a REST call to worker `to` and awaits its answer.
    fn forward(&mut self, ctx: &mut Ctx, to: Node, caller: Caller, (connector, request): (u8, RestRequest), hops: u8) {
        let id = self.volatile.next_forward;
        self.volatile.next_forward += 1;
        self.volatile.forwards.push((id, to, caller));
        let name = self.connectors[usize::from(connector)].debezium.name.clone();
        ctx.observe(Observation::RestForwarded { request: request.call(&name), to });
        ctx.send(to, Msg::RestForward { id, connector, request, hops: hops + 1 });
    }

    /// The answer to a call it forwarded: relayed to its caller.
    pub(super) fn forwarded_answer(&mut self, ctx: &mut Ctx, id: u32, reply: RestReply) {
        let Some(index) = self.volatile.forwards.iter().position(|(of, ..)| *of == id) else { return };
        let (_, _, caller) = self.volatile.forwards.remove(index);
        answer(ctx, caller, reply);
    }

    /// The connection to `peer` is lost: the calls forwarded to it fail (the caller tries again).
    pub(super) fn forwards_lost(&mut self, ctx: &mut Ctx, peer: Node) {
        let (lost, kept): (Vec<_>, Vec<_>) = self.volatile.forwards.drain(..).partition(|(_, to, _)| *to == peer);
        self.volatile.forwards = kept;
        for (_, to, caller) in lost {
            answer(ctx, caller, RestReply::Error(format!("Error trying to forward REST request: {to} is unreachable")));
        }
    }

    fn write_config(&mut self, ctx: &mut Ctx, c: usize, write: ConfigWrite, reply_to: Option<Caller>) {
        let connector = c as u8;
        self.volatile.request(
            ctx,
            c,
            Pending::ConfigWrite { reply_to },
            KafkaRequest::WriteConnectConfig { connector, write },
        );
    }

    /// Its config consumer reads a record of the config topic.
    pub(super) fn on_config_record(&mut self, ctx: &mut Ctx, connector: u8, record: ConnectorConfigRecord) {
        let c = usize::from(connector);
        if c >= self.connectors.len() {
            return;
        }
        let tasks_before = self.connectors[c].config_tasks;
        self.apply_config(c, record);
        if !record.running {
            // `stopReconfiguredTasks`: its task stops now, and does not start again.
            self.for_connector(ctx, c, |worker, ctx| worker.graceful_stop(ctx, c));
        }
        if tasks_before != record.tasks {
            let member = self.member();
            if member.state == MemberState::Stable {
                self.join(ctx);
            } else {
                member.reconfig_rejoin = true;
            }
        }
        self.generate_task_configs(ctx);
    }

    fn apply_config(&mut self, c: usize, record: ConnectorConfigRecord) {
        let connector = &mut self.connectors[c];
        connector.target_state = if record.running { TargetState::Running } else { TargetState::Stopped };
        connector.config_tasks = record.tasks;
        if record.tasks == 0 {
            // The task configurations are gone (a stop): a FAILED task goes with them, and the
            // task a resume configures again is a new one.
            connector.task_died = false;
            connector.failure = None;
        }
    }

    /// Reads the config topic as the leader's assignment says it was.
    pub(super) fn read_config(&mut self, config: &[ConnectorConfigRecord]) {
        for (c, record) in config.iter().enumerate().take(self.connectors.len()) {
            self.apply_config(c, *record);
        }
    }

    /// After a rebalance completed: the tasks of the connectors it holds run as the config topic
    /// says, a rebalance a config record asked for starts, and the REST calls that waited are
    /// served.
    pub(super) fn after_rebalance(&mut self, ctx: &mut Ctx) {
        for c in 0..self.connectors.len() {
            let connector = &self.connectors[c];
            if !connector.assigned {
                continue;
            }
            let configured = connector.target_state == TargetState::Running && connector.config_tasks > 0;
            if configured && connector.task.is_none() && !connector.task_died {
                self.for_connector(ctx, c, |worker, ctx| worker.start_task(ctx, c));
            } else if connector.target_state == TargetState::Stopped && connector.task.is_some() {
                self.for_connector(ctx, c, |worker, ctx| worker.graceful_stop(ctx, c));
            }
        }
        if std::mem::take(&mut self.member().reconfig_rejoin) {
            self.join(ctx);
            return;
        }
        self.generate_task_configs(ctx);
        for (caller, connector, request, hops) in std::mem::take(&mut self.volatile.rest_waiting) {
            self.group_rest(ctx, caller, connector, request, hops);
        }
    }

    /// A connector it holds is STARTED with no task configuration (resumed after a stop): its
    /// connector instance generates one.
    fn generate_task_configs(&mut self, ctx: &mut Ctx) {
        if self.member().state != MemberState::Stable {
            return;
        }
        for c in 0..self.connectors.len() {
            let connector = &self.connectors[c];
            let wanted =
                connector.assigned && connector.target_state == TargetState::Running && connector.config_tasks == 0;
            if wanted && !self.volatile.awaits(c, |pending| matches!(pending, Pending::ConfigWrite { reply_to: None }))
            {
                self.write_config(ctx, c, ConfigWrite::TaskConfigs(1), None);
            }
        }
    }

    /// Writes to the status topic the state of each connector it holds, when it changed; a
    /// connector it no longer holds, once its task has stopped, as UNASSIGNED.
    pub(super) fn write_statuses(&mut self, ctx: &mut Ctx) {
        if !self.config.status_readers {
            return;
        }
        let generation = self.member().completed_generation;
        self.volatile.written_status.resize(self.connectors.len(), None);
        for c in 0..self.connectors.len() {
            let connector = &self.connectors[c];
            let written = self.volatile.written_status[c];
            let state = if connector.assigned || connector.task.is_some() {
                connector.status()
            } else if written.is_some_and(|state| state != ConnectorState::Unassigned) {
                ConnectorState::Unassigned
            } else {
                continue;
            };
            if written != Some(state) {
                self.volatile.written_status[c] = Some(state);
                let request = KafkaRequest::WriteConnectStatus { connector: c as u8, state, generation };
                ctx.send(Node::Kafka, Msg::Kafka { request_id: 0, request });
            }
        }
    }
}
