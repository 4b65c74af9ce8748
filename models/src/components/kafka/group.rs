//! The group coordinator of the Connect workers' group (reference kafka-connect.md §5.1), as
//! Kafka's `GroupCoordinator` runs a classic group: JoinGroup, SyncGroup, Heartbeat and
//! LeaveGroup, generations and a leader, sessions that expire.
//!
//! - **Join** (`GroupCoordinator.handleJoinGroup`): a join to a Stable (or CompletingRebalance)
//!   group starts a rebalance (PreparingRebalance); the others learn it from their next heartbeat
//!   (`REBALANCE_IN_PROGRESS`) and join again. The join phase completes when every member has
//!   joined, or at the largest `rebalance.timeout.ms`, when those that did not are removed
//!   (`onCompleteJoin`). The first join of an empty group waits
//!   `group.initial.rebalance.delay.ms` (`InitialDelayedJoin`), extended by as much for each
//!   member joining meanwhile, up to the rebalance timeout.
//! - **Completing the join**: a new generation; the leader stays if it rejoined, otherwise the
//!   first member to have joined leads; every member gets the generation, and the leader every
//!   member's metadata.
//! - **Sync** (`handleSyncGroup`): the leader's SyncGroup carries the assignments; members that
//!   sent theirs first wait for it; the group is then Stable.
//! - **Sessions** (`completeAndScheduleNextHeartbeatExpiration`): each heartbeat (and a completed
//!   join) gives a member `session.timeout.ms` more; a member that hears nothing for that long is
//!   removed (`onExpireHeartbeat`), which starts a rebalance, as a LeaveGroup does at once.
//!
//! The coordinator also keeps the Connect cluster's two internal topics the REST operations of
//! §5.4 go through ([`ConnectTopics`]): the config topic (each connector's target state and task
//! count; every worker's config consumer reads each record, [`Msg::ConnectConfig`]) and the
//! status topic (each connector's state as the worker running it last wrote it).
//!
//! Simplified: a new member gets its id with its first JoinGroup (the real coordinator answers
//! `MEMBER_ID_REQUIRED` and the member sends it again, one more round trip); no static
//! membership; only the Connect group.

use crate::core::component::{Ctx, Timer};
use crate::core::ids::Node;
use crate::core::observe::Observation;
use crate::core::protocol::{ConfigWrite, ConnectorConfigRecord, ConnectorState, GroupAssignment, GroupReply, Msg};
use crate::core::time::SimTime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The broker's `group.initial.rebalance.delay.ms` (default 3 000).
pub const GROUP_INITIAL_REBALANCE_DELAY_MS: u64 = 3_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GroupState {
    Empty,
    /// Waiting for the members to join, until `deadline`; `initial`: the delayed first join.
    PreparingRebalance {
        deadline: SimTime,
        initial: bool,
    },
    /// Waiting for the leader's assignments.
    CompletingRebalance,
    Stable,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Member {
    /// The worker process.
    pub node: Node,
    /// Its metadata: the connectors whose task it runs.
    pub owned: Vec<u8>,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    /// When its session expires unless it is heard from.
    pub expires_at: SimTime,
    /// In the join phase: when it joined (`None`: not yet).
    pub joined: Option<u64>,
    /// It sent SyncGroup for the current generation and waits for the leader's.
    pub awaiting_sync: bool,
}

/// The Connect group's coordinator (durable: the broker keeps group metadata in
/// `__consumer_offsets`; sessions start afresh when it starts).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GroupCoordinator {
    pub state: GroupState,
    pub generation: u32,
    pub leader: Option<u32>,
    pub members: BTreeMap<u32, Member>,
    next_member: u32,
    /// The order of joins in the current join phase.
    join_sequence: u64,
    /// The leader's assignments for the current generation.
    assignments: BTreeMap<u32, GroupAssignment>,
    initial_rebalance_delay_ms: u64,
    /// The workers whose session timer is armed, as bits by their place in `Node::WORKERS`.
    sessions_armed: u8,
    /// The config and status topics of the Connect cluster.
    pub topics: ConnectTopics,
}

/// The Connect cluster's config and status topics (compacted, durable), by connector.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConnectTopics {
    /// The config topic: each connector's latest target state and task count.
    pub config: Vec<ConnectorConfigRecord>,
    /// The status topic: each connector's state as a worker last wrote it, with the
    /// generation it wrote it in (`putSafe` keeps a write only if that is not older).
    pub status: Vec<(ConnectorState, u32)>,
    /// The workers whose config consumers read the config topic (`Node::WORKERS`' first ones).
    pub workers: u8,
}

impl ConnectTopics {
    /// The topics of `workers` workers running connectors whose configuration is `config`:
    /// nothing has a status yet (UNASSIGNED).
    pub fn new(config: Vec<ConnectorConfigRecord>, workers: u8) -> ConnectTopics {
        let status = vec![(ConnectorState::Unassigned, 0); config.len()];
        ConnectTopics { config, status, workers }
    }

    /// A worker writes a config record: every worker's config consumer reads it.
    pub fn write_config(&mut self, ctx: &mut Ctx, connector: u8, write: ConfigWrite) {
        let Some(entry) = self.config.get_mut(usize::from(connector)) else { return };
        match write {
            ConfigWrite::TargetState(running) => entry.running = running,
            ConfigWrite::TaskConfigs(tasks) => entry.tasks = tasks,
            ConfigWrite::Stop => *entry = ConnectorConfigRecord { running: false, tasks: 0 },
        }
        let record = *entry;
        let written = Observation::ConnectConfigWritten { running: record.running, tasks: record.tasks };
        ctx.observe(Observation::of_connector(connector, written));
        for worker in Node::WORKERS.iter().take(usize::from(self.workers)) {
            ctx.send(*worker, Msg::ConnectConfig { connector, record });
        }
    }

    /// A worker writes a connector's state (`putSafe`: an older generation's write is dropped).
    pub fn write_status(&mut self, connector: u8, state: ConnectorState, generation: u32) {
        if let Some(entry) = self.status.get_mut(usize::from(connector))
            && generation >= entry.1
        {
            *entry = (state, generation);
        }
    }
}

impl GroupCoordinator {
    pub fn new(initial_rebalance_delay_ms: u64) -> GroupCoordinator {
        GroupCoordinator {
            state: GroupState::Empty,
            generation: 0,
            leader: None,
            members: BTreeMap::new(),
            next_member: 1,
            join_sequence: 0,
            assignments: BTreeMap::new(),
            initial_rebalance_delay_ms,
            sessions_armed: 0,
            topics: ConnectTopics::default(),
        }
    }

    /// The broker starts: every member's session starts again, and a join phase in progress
    /// goes on to its deadline.
    pub fn start(&mut self, ctx: &mut Ctx) {
        for member in self.members.values_mut() {
            member.expires_at = ctx.now.plus_ms(member.session_timeout_ms);
        }
        self.arm(ctx);
    }

    pub fn join(
        &mut self,
        ctx: &mut Ctx,
        from: Node,
        member: Option<u32>,
        owned: Vec<u8>,
        (session_timeout_ms, rebalance_timeout_ms): (u64, u64),
    ) {
        let id = match member {
            Some(id) if self.members.contains_key(&id) => id,
            Some(_) => {
                ctx.send(from, Msg::GroupReply(GroupReply::UnknownMember));
                return;
            }
            None => {
                let id = self.next_member;
                self.next_member += 1;
                id
            }
        };
        self.join_sequence += 1;
        let sequence = self.join_sequence;
        let entry = self.members.entry(id).or_insert(Member {
            node: from,
            owned: Vec::new(),
            session_timeout_ms,
            rebalance_timeout_ms,
            expires_at: ctx.now.plus_ms(session_timeout_ms),
            joined: None,
            awaiting_sync: false,
        });
        entry.owned = owned;
        entry.joined = Some(sequence);
        entry.awaiting_sync = false;
        entry.expires_at = ctx.now.plus_ms(session_timeout_ms);
        match self.state {
            GroupState::Empty => {
                let deadline = ctx.now.plus_ms(self.initial_rebalance_delay_ms);
                self.state = GroupState::PreparingRebalance { deadline, initial: true };
            }
            GroupState::PreparingRebalance { deadline, initial: true } => {
                // `InitialDelayedJoin`: each new member extends the wait, up to the rebalance
                // timeout.
                let limit = self.max_rebalance_timeout_ms();
                let first = deadline.ms().saturating_sub(self.initial_rebalance_delay_ms);
                let extended = (ctx.now.ms() + self.initial_rebalance_delay_ms).min(first + limit);
                self.state =
                    GroupState::PreparingRebalance { deadline: SimTime(extended.max(deadline.ms())), initial: true };
            }
            GroupState::PreparingRebalance { .. } => {}
            GroupState::CompletingRebalance | GroupState::Stable => self.prepare_rebalance(ctx),
        }
        self.maybe_complete_join(ctx);
        self.arm(ctx);
    }

    fn max_rebalance_timeout_ms(&self) -> u64 {
        self.members.values().map(|member| member.rebalance_timeout_ms).max().unwrap_or(0)
    }

    /// A rebalance starts: every member must join again.
    fn prepare_rebalance(&mut self, ctx: &mut Ctx) {
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.leader = None;
            return;
        }
        let deadline = ctx.now.plus_ms(self.max_rebalance_timeout_ms());
        self.state = GroupState::PreparingRebalance { deadline, initial: false };
        self.assignments.clear();
        for member in self.members.values_mut() {
            member.awaiting_sync = false;
        }
    }

    /// The join phase completes when everyone has joined (the delayed first join waits for its
    /// deadline).
    fn maybe_complete_join(&mut self, ctx: &mut Ctx) {
        let GroupState::PreparingRebalance { deadline, initial } = self.state else { return };
        let everyone = self.members.values().all(|member| member.joined.is_some());
        if (everyone && !initial) || ctx.now >= deadline {
            self.complete_join(ctx);
        }
    }

    fn complete_join(&mut self, ctx: &mut Ctx) {
        // Those that did not join in time are out.
        let late: Vec<u32> = self.members.iter().filter(|(_, m)| m.joined.is_none()).map(|(id, _)| *id).collect();
        for id in late {
            let member = self.members.remove(&id).expect("member");
            ctx.observe(Observation::GroupMemberRemoved {
                worker: member.node,
                reason: format!("it did not join within rebalance.timeout.ms={}", member.rebalance_timeout_ms),
            });
        }
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.leader = None;
            return;
        }
        self.generation += 1;
        if self.leader.is_none_or(|leader| !self.members.contains_key(&leader)) {
            self.leader = self.members.iter().min_by_key(|(_, m)| m.joined).map(|(id, _)| *id);
        }
        let leader = self.leader.expect("a member leads");
        let metadata: Vec<(u32, Node, Vec<u8>)> =
            self.members.iter().map(|(id, m)| (*id, m.node, m.owned.clone())).collect();
        for (id, member) in &mut self.members {
            member.joined = None;
            member.expires_at = ctx.now.plus_ms(member.session_timeout_ms);
            let members = if *id == leader { metadata.clone() } else { Vec::new() };
            ctx.send(
                member.node,
                Msg::GroupReply(GroupReply::Joined { member: *id, generation: self.generation, leader, members }),
            );
        }
        ctx.observe(Observation::GroupRebalanced {
            generation: self.generation,
            leader: self.members[&leader].node,
            members: self.members.values().map(|member| member.node).collect(),
        });
        self.state = GroupState::CompletingRebalance;
        self.assignments.clear();
    }

    pub fn sync(
        &mut self,
        ctx: &mut Ctx,
        from: Node,
        (member, generation): (u32, u32),
        assignments: Option<Vec<(u32, GroupAssignment)>>,
    ) {
        if !self.members.contains_key(&member) {
            ctx.send(from, Msg::GroupReply(GroupReply::UnknownMember));
            return;
        }
        if generation != self.generation || matches!(self.state, GroupState::PreparingRebalance { .. }) {
            ctx.send(from, Msg::GroupReply(GroupReply::Rejoin));
            return;
        }
        match self.state {
            GroupState::CompletingRebalance => {
                if Some(member) == self.leader
                    && let Some(assignments) = assignments
                {
                    self.assignments = assignments.into_iter().collect();
                    self.state = GroupState::Stable;
                    let waiting: Vec<u32> = self
                        .members
                        .iter()
                        .filter(|(id, m)| m.awaiting_sync || **id == member)
                        .map(|(id, _)| *id)
                        .collect();
                    for id in waiting {
                        self.send_assignment(ctx, id);
                    }
                } else if let Some(entry) = self.members.get_mut(&member) {
                    entry.awaiting_sync = true;
                }
            }
            GroupState::Stable => self.send_assignment(ctx, member),
            _ => {}
        }
    }

    fn send_assignment(&mut self, ctx: &mut Ctx, id: u32) {
        let Some(member) = self.members.get_mut(&id) else { return };
        member.awaiting_sync = false;
        let node = member.node;
        let assignment = self.assignments.get(&id).cloned().unwrap_or_default();
        let leader = self.leader.and_then(|leader| self.members.get(&leader)).map_or(node, |leader| leader.node);
        let config = self.topics.config.clone();
        ctx.send(node, Msg::GroupReply(GroupReply::Synced { generation: self.generation, assignment, leader, config }));
    }

    pub fn heartbeat(&mut self, ctx: &mut Ctx, from: Node, member: u32, generation: u32) {
        let Some(entry) = self.members.get_mut(&member) else {
            ctx.send(from, Msg::GroupReply(GroupReply::UnknownMember));
            return;
        };
        entry.expires_at = ctx.now.plus_ms(entry.session_timeout_ms);
        let reply = if generation != self.generation || matches!(self.state, GroupState::PreparingRebalance { .. }) {
            GroupReply::Rejoin
        } else {
            GroupReply::Heartbeat
        };
        ctx.send(from, Msg::GroupReply(reply));
        self.arm(ctx);
    }

    pub fn leave(&mut self, ctx: &mut Ctx, member: u32) {
        let Some(left) = self.members.remove(&member) else { return };
        ctx.observe(Observation::GroupMemberRemoved { worker: left.node, reason: "it left the group".into() });
        self.member_gone(ctx);
    }

    fn member_gone(&mut self, ctx: &mut Ctx) {
        match self.state {
            GroupState::PreparingRebalance { .. } => self.maybe_complete_join(ctx),
            _ => self.prepare_rebalance(ctx),
        }
        self.arm(ctx);
    }

    /// Whether the current join phase may end at its deadline in a world where time does not
    /// pass (see the exhaustive world): the delayed first join, or a rebalance whose members that
    /// have not joined are all on workers that are `down`.
    pub fn deadline_may_pass(&self, down: impl Fn(Node) -> bool) -> bool {
        match self.state {
            GroupState::PreparingRebalance { initial: true, .. } => true,
            GroupState::PreparingRebalance { initial: false, .. } => self
                .members
                .iter()
                .filter(|(_, member)| member.joined.is_none())
                .all(|(id, member)| down(member.node) || self.superseded(*id, member.node)),
            _ => false,
        }
    }

    /// Whether member `id` of worker `node` belongs to an earlier run of that worker: the
    /// worker has joined again since, as a newer member (it crashed or was killed and started
    /// again before the old member's session ran out). Nothing will be heard from it.
    pub fn superseded(&self, id: u32, node: Node) -> bool {
        self.members.iter().any(|(other, member)| member.node == node && *other > id)
    }

    /// Whether worker `node` has a member from an earlier run ([`GroupCoordinator::superseded`]).
    pub fn has_superseded(&self, node: Node) -> bool {
        self.members.values().filter(|member| member.node == node).count() > 1
    }

    /// Whether a heartbeat from `member` of `generation` would be answered with anything but
    /// "carry on" (a rebalance to join, or an unknown member): the heartbeats that change
    /// something where time does not pass.
    pub fn heartbeat_tells(&self, member: u32, generation: u32) -> bool {
        !self.members.contains_key(&member)
            || generation != self.generation
            || matches!(self.state, GroupState::PreparingRebalance { .. })
    }

    /// The join phase's deadline has come (its timer fired): those that did not join are out,
    /// and the phase completes. A fired timer is its deadline, whatever the clock says: the
    /// exhaustive world, where time does not pass, fires it to say the deadline came.
    pub fn on_phase_deadline(&mut self, ctx: &mut Ctx) {
        if matches!(self.state, GroupState::PreparingRebalance { .. }) {
            self.complete_join(ctx);
        }
        self.arm(ctx);
    }

    /// The session of the member on worker `node` has expired (its timer fired, or, following
    /// an exhaustive path, a pause that outlasted it): the member is removed and the group
    /// rebalances (`onExpireHeartbeat`). A member that has joined the current join phase has no
    /// session running (`completeAndScheduleNextHeartbeatExpiration` is not scheduled while its
    /// join waits).
    pub fn on_session_expired(&mut self, ctx: &mut Ctx, node: Node) {
        // The worker's earliest session (a worker that restarted quickly may have a member from
        // before, not yet expired, and a new one): one member per firing.
        let preparing = matches!(self.state, GroupState::PreparingRebalance { .. });
        let expired = self
            .members
            .iter()
            .filter(|(_, m)| m.node == node && !(preparing && m.joined.is_some()))
            .min_by_key(|(id, m)| (m.expires_at, **id))
            .map(|(id, _)| *id);
        let Some(id) = expired else {
            self.arm(ctx);
            return;
        };
        let member = self.members.remove(&id).expect("member");
        ctx.observe(Observation::GroupMemberRemoved {
            worker: member.node,
            reason: format!("no heartbeat within session.timeout.ms={}", member.session_timeout_ms),
        });
        self.member_gone(ctx);
    }

    /// A timer per member for its session (`Timer::GroupSession`), one for the join phase's
    /// deadline (`Timer::GroupCoordinator`); a worker with no member here has its timer
    /// cancelled.
    fn arm(&mut self, ctx: &mut Ctx) {
        let preparing = matches!(self.state, GroupState::PreparingRebalance { .. });
        for (index, worker) in Node::WORKERS.into_iter().enumerate() {
            let session = self
                .members
                .values()
                .filter(|m| m.node == worker && !(preparing && m.joined.is_some()))
                .map(|m| m.expires_at)
                .min();
            let timer = Timer::GroupSession { member: worker };
            let bit = 1 << index;
            match session {
                Some(at) => {
                    ctx.set_timer(timer, at.ms().saturating_sub(ctx.now.ms()));
                    self.sessions_armed |= bit;
                }
                None if self.sessions_armed & bit != 0 => {
                    ctx.cancel_timer(timer);
                    self.sessions_armed &= !bit;
                }
                None => {}
            }
        }
        match self.state {
            GroupState::PreparingRebalance { deadline, .. } => {
                ctx.set_timer(Timer::GroupCoordinator, deadline.ms().saturating_sub(ctx.now.ms()))
            }
            _ => ctx.cancel_timer(Timer::GroupCoordinator),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::component::{Outbox, TimerRequest};

    const TIMEOUTS: (u64, u64) = (10_000, 60_000);

    fn at(ms: u64, f: impl FnOnce(&mut Ctx)) -> Outbox {
        let mut out = Outbox::default();
        f(&mut Ctx::new(SimTime(ms), Node::Kafka, &mut out));
        out
    }

    fn replies(out: &Outbox) -> Vec<(Node, GroupReply)> {
        out.sends
            .iter()
            .filter_map(|(to, msg)| match msg {
                Msg::GroupReply(reply) => Some((*to, reply.clone())),
                _ => None,
            })
            .collect()
    }

    fn armed(out: &Outbox, timer: Timer) -> Option<u64> {
        out.timers.iter().rev().find_map(|request| match request {
            TimerRequest::Set { timer: set, after_ms } if *set == timer => Some(*after_ms),
            _ => None,
        })
    }

    /// Two workers join an empty group a second apart and sync: generation 1, led by the first.
    fn stable_pair() -> GroupCoordinator {
        let mut group = GroupCoordinator::new(GROUP_INITIAL_REBALANCE_DELAY_MS);
        let out = at(0, |ctx| group.join(ctx, Node::Connect, None, vec![], TIMEOUTS));
        assert_eq!(
            armed(&out, Timer::GroupCoordinator),
            Some(3_000),
            "the first join of an empty group waits the initial delay"
        );
        assert_eq!(armed(&out, Timer::GroupSession { member: Node::Connect }), None, "no session while its join waits");
        assert!(replies(&out).is_empty());
        let out = at(1_000, |ctx| group.join(ctx, Node::Connect2, None, vec![], TIMEOUTS));
        assert_eq!(armed(&out, Timer::GroupCoordinator), Some(3_000), "a member joining meanwhile extends the wait");
        let out = at(4_000, |ctx| group.on_phase_deadline(ctx));
        assert_eq!(armed(&out, Timer::GroupSession { member: Node::Connect2 }), Some(10_000));
        let joined = replies(&out);
        assert_eq!(joined.len(), 2);
        assert!(
            matches!(&joined[0], (Node::Connect, GroupReply::Joined { member: 1, generation: 1, leader: 1, members }) if members.len() == 2)
        );
        assert!(
            matches!(&joined[1], (Node::Connect2, GroupReply::Joined { leader: 1, members, .. }) if members.is_empty())
        );
        // The follower's sync waits for the leader's.
        let out = at(4_010, |ctx| group.sync(ctx, Node::Connect2, (2, 1), None));
        assert!(replies(&out).is_empty());
        let assignments = vec![
            (1, GroupAssignment { assigned: vec![0], ..Default::default() }),
            (2, GroupAssignment { assigned: vec![1], ..Default::default() }),
        ];
        let out = at(4_020, |ctx| group.sync(ctx, Node::Connect, (1, 1), Some(assignments)));
        let synced = replies(&out);
        assert_eq!(synced.len(), 2);
        assert!(synced.contains(&(
            Node::Connect2,
            GroupReply::Synced {
                generation: 1,
                assignment: GroupAssignment { assigned: vec![1], ..Default::default() },
                leader: Node::Connect,
                config: Vec::new(),
            }
        )));
        assert_eq!(group.state, GroupState::Stable);
        group
    }

    #[test]
    fn a_vanished_member_is_removed_when_its_session_expires_and_the_others_rejoin() {
        let mut group = stable_pair();
        // Worker 1 keeps heartbeating; worker 2 goes silent after its last heartbeat at 6 s.
        at(6_000, |ctx| group.heartbeat(ctx, Node::Connect2, 2, 1));
        for t in [7_000, 10_000, 13_000] {
            let out = at(t, |ctx| group.heartbeat(ctx, Node::Connect, 1, 1));
            assert_eq!(replies(&out), vec![(Node::Connect, GroupReply::Heartbeat)]);
        }
        let out = at(16_000, |ctx| group.on_session_expired(ctx, Node::Connect2));
        assert!(
            out.observations
                .iter()
                .any(|o| matches!(o, Observation::GroupMemberRemoved { worker: Node::Connect2, .. }))
        );
        assert!(matches!(group.state, GroupState::PreparingRebalance { .. }));
        // The survivor hears of the rebalance at its next heartbeat, joins, and the join completes
        // at once: everyone left has joined.
        let out = at(16_500, |ctx| group.heartbeat(ctx, Node::Connect, 1, 1));
        assert_eq!(replies(&out), vec![(Node::Connect, GroupReply::Rejoin)]);
        let out = at(16_510, |ctx| group.join(ctx, Node::Connect, Some(1), vec![0], TIMEOUTS));
        assert!(matches!(&replies(&out)[..], [(Node::Connect, GroupReply::Joined { generation: 2, leader: 1, .. })]));
        // The removed member is unknown now.
        let out = at(17_000, |ctx| group.heartbeat(ctx, Node::Connect2, 2, 1));
        assert_eq!(replies(&out), vec![(Node::Connect2, GroupReply::UnknownMember)]);
    }

    #[test]
    fn a_leave_starts_a_rebalance_at_once_and_a_lost_leader_is_replaced() {
        let mut group = stable_pair();
        let out = at(10_000, |ctx| group.leave(ctx, 1));
        assert!(
            out.observations.iter().any(|o| matches!(o, Observation::GroupMemberRemoved { worker: Node::Connect, .. }))
        );
        assert!(matches!(group.state, GroupState::PreparingRebalance { .. }));
        let out = at(11_000, |ctx| group.join(ctx, Node::Connect2, Some(2), vec![1], TIMEOUTS));
        assert!(
            matches!(&replies(&out)[..], [(Node::Connect2, GroupReply::Joined { generation: 2, leader: 2, members, .. })] if members == &vec![(2, Node::Connect2, vec![1])])
        );
    }

    #[test]
    fn a_member_that_does_not_rejoin_in_time_is_dropped_at_the_rebalance_timeout() {
        let mut group = stable_pair();
        // A third worker joins: a rebalance. Worker 2 is silent from 20 s on and never joins:
        // its session (10 s) ends the wait before the rebalance timeout (60 s) would.
        at(20_000, |ctx| group.heartbeat(ctx, Node::Connect2, 2, 1));
        at(20_000, |ctx| group.heartbeat(ctx, Node::Connect, 1, 1));
        at(21_000, |ctx| group.join(ctx, Node::Connect3, None, vec![], TIMEOUTS));
        at(22_000, |ctx| group.join(ctx, Node::Connect, Some(1), vec![0], TIMEOUTS));
        let out = at(30_000, |ctx| group.on_session_expired(ctx, Node::Connect2));
        assert!(
            out.observations
                .iter()
                .any(|o| matches!(o, Observation::GroupMemberRemoved { worker: Node::Connect2, .. }))
        );
        let joined = replies(&out);
        assert_eq!(joined.len(), 2, "the join completes with the members that joined: {joined:?}");
    }

    /// Each member's session has its timer; a worker that restarted before its old member's
    /// session ran out has two members, and each firing removes one (the older session first).
    /// A worker whose member is gone has its timer cancelled.
    #[test]
    fn a_session_timer_per_worker_removes_one_member_at_a_time() {
        let mut group = stable_pair();
        // connect-2 restarts at 5 s and joins as a new member (3) while member 2 is still in.
        let out = at(5_000, |ctx| group.join(ctx, Node::Connect2, None, vec![], TIMEOUTS));
        assert!(replies(&out).is_empty(), "member 1 has not rejoined yet");
        assert_eq!(group.members.len(), 3);
        // The join phase waits for member 1 (it joined nothing yet) and for member 2, whose
        // session ends first: it goes, member 3 stays.
        let out = at(14_020, |ctx| group.on_session_expired(ctx, Node::Connect2));
        assert!(
            out.observations
                .iter()
                .any(|o| matches!(o, Observation::GroupMemberRemoved { worker: Node::Connect2, .. }))
        );
        assert!(group.members.contains_key(&3) && !group.members.contains_key(&2));
        let out = at(14_500, |ctx| group.join(ctx, Node::Connect, Some(1), vec![0], TIMEOUTS));
        assert_eq!(replies(&out).len(), 2, "everyone left has joined: {:?}", replies(&out));
        // Member 1 leaves: its session timer is cancelled, connect-2's stays.
        let out = at(15_000, |ctx| group.leave(ctx, 1));
        assert!(out.timers.contains(&TimerRequest::Cancel { timer: Timer::GroupSession { member: Node::Connect } }));
        assert!(!out.timers.contains(&TimerRequest::Cancel { timer: Timer::GroupSession { member: Node::Connect2 } }));
        // A fired phase deadline completes the join, whatever the clock says: member 3 has not
        // joined this rebalance, and is out.
        let out = at(15_001, |ctx| group.on_phase_deadline(ctx));
        assert!(out.observations.iter().any(|o| matches!(o, Observation::GroupMemberRemoved { worker: Node::Connect2, reason } if reason.contains("rebalance.timeout.ms"))));
        assert_eq!(group.state, GroupState::Empty);
    }

    #[test]
    fn every_worker_reads_a_config_record_and_an_older_generation_does_not_overwrite_a_status() {
        let running = ConnectorConfigRecord { running: true, tasks: 1 };
        let mut topics = ConnectTopics::new(vec![running, running], 2);
        // A stop: no task, STOPPED; both workers' config consumers read it.
        let out = at(1_000, |ctx| topics.write_config(ctx, 1, ConfigWrite::Stop));
        let stopped = ConnectorConfigRecord { running: false, tasks: 0 };
        let record = Msg::ConnectConfig { connector: 1, record: stopped };
        assert_eq!(out.sends, vec![(Node::Connect, record.clone()), (Node::Connect2, record)]);
        // A resume writes the target state alone: the task count stays until a worker writes it.
        at(2_000, |ctx| topics.write_config(ctx, 1, ConfigWrite::TargetState(true)));
        assert_eq!(topics.config[1], ConnectorConfigRecord { running: true, tasks: 0 });
        at(2_010, |ctx| topics.write_config(ctx, 1, ConfigWrite::TaskConfigs(1)));
        assert_eq!(topics.config, vec![running, running]);
        // `putSafe`: a write from an older generation (a zombie's) is dropped.
        topics.write_status(0, ConnectorState::Running, 3);
        topics.write_status(0, ConnectorState::Unassigned, 2);
        assert_eq!(topics.status[0], (ConnectorState::Running, 3));
        topics.write_status(0, ConnectorState::Stopped, 3);
        assert_eq!(topics.status[0], (ConnectorState::Stopped, 3));
    }

    #[test]
    fn a_member_from_an_earlier_run_of_a_worker_is_superseded_by_its_new_one() {
        let mut group = stable_pair();
        assert!(!group.has_superseded(Node::Connect));
        // Connect was killed and started again before its session ran out: it joins anew.
        at(7_000, |ctx| group.join(ctx, Node::Connect, None, Vec::new(), TIMEOUTS));
        assert!(group.has_superseded(Node::Connect));
        assert!(group.superseded(1, Node::Connect));
        assert!(!group.has_superseded(Node::Connect2));
    }
}
