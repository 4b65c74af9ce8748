//! A Connect worker as a member of the workers' group (reference kafka-connect.md §5), and the
//! leader's incremental cooperative assignor (KIP-415).
//!
//! Membership (`WorkerCoordinator`, `AbstractCoordinator`): a worker joins with the connectors
//! whose task it runs as its metadata, the leader computes the assignment, every member syncs and
//! gets its part: what to start, what to stop, and a delay after which it joins again. Tasks not
//! revoked keep running through a rebalance (cooperative); a revoked task is stopped gracefully
//! and the member joins again once its revoked tasks have stopped (`onRevoked` awaits them, up to
//! `task.shutdown.graceful.timeout.ms`). Heartbeats every `heartbeat.interval.ms` in a stable
//! group; `REBALANCE_IN_PROGRESS` or `ILLEGAL_GENERATION` make it join again with its current
//! tasks, `UNKNOWN_MEMBER_ID` as a new member — still running its tasks (`onJoinPrepare` keeps
//! the assignment under the cooperative protocol: a worker paused past its session comes back as
//! a zombie, and the leader revokes the task from every holder, KAFKA-9841). A worker that has
//! heard nothing from the coordinator for `session.timeout.ms` marks it unknown
//! (`HeartbeatThread`) and, still without one `heartbeat.interval.ms` later, stops its own tasks
//! (KAFKA-9184, `WorkerCoordinator.poll`).
//!
//! The assignor (`IncrementalCooperativeAssignor.performTaskAssignment` and
//! `handleLostAssignments`) keeps in the leader's memory only its previous assignment, previous
//! members, the scheduled rebalance and its delay; a new leader, or one whose previous
//! generation is not the last completed one (KAFKA-9848), starts from nothing, so a lost task is
//! then `created` and assigned at once.
//!
//! Simplified: a connector's instance and its one task are assigned together (the Debezium
//! PostgreSQL connector runs one task; where its connector instance runs matters only for task
//! configurations, which the model does not regenerate); the backoff between consecutive
//! load-balancing revocations (KAFKA-12495) and a revocation that did not take effect
//! (`previousRevocation`) are not modelled.

use crate::core::protocol::GroupAssignment;
use crate::core::time::SimTime;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The worker's group settings (`DistributedConfig`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GroupConfig {
    /// `session.timeout.ms` (default 10 000).
    pub session_timeout_ms: u64,
    /// `heartbeat.interval.ms` (default 3 000).
    pub heartbeat_interval_ms: u64,
    /// `rebalance.timeout.ms` (default 60 000).
    pub rebalance_timeout_ms: u64,
    /// `scheduled.rebalance.max.delay.ms` (default 300 000).
    pub scheduled_rebalance_max_delay_ms: u64,
    /// `task.shutdown.graceful.timeout.ms` (default 5 000).
    pub task_shutdown_graceful_timeout_ms: u64,
}

impl Default for GroupConfig {
    fn default() -> GroupConfig {
        GroupConfig {
            session_timeout_ms: 10_000,
            heartbeat_interval_ms: 3_000,
            rebalance_timeout_ms: 60_000,
            scheduled_rebalance_max_delay_ms: 300_000,
            task_shutdown_graceful_timeout_ms: 5_000,
        }
    }
}

/// Where the member is in the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MemberState {
    /// JoinGroup sent, waiting for the join to complete.
    Joining,
    /// SyncGroup sent, waiting for its assignment.
    Syncing,
    Stable,
    /// A clean shutdown: its tasks are stopping; then LeaveGroup, and the process ends.
    ShuttingDown,
    /// It left the group and does nothing more until it is started again.
    Left,
}

/// The member's state (volatile: a restarted worker joins as a new member).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GroupMember {
    pub state: MemberState,
    pub id: Option<u32>,
    pub generation: u32,
    /// The last generation whose assignment it received (`lastCompletedGenerationId`).
    pub completed_generation: u32,
    /// When it last heard from the coordinator.
    pub last_heard: SimTime,
    /// Since when it has taken the coordinator for unknown.
    pub coordinator_unknown_since: Option<SimTime>,
    /// A request was lost with its connection: the next heartbeat tick sends the join again.
    pub request_lost: bool,
    /// It joins again once the tasks revoked from it have stopped.
    pub rejoin_after_revocation: bool,
    /// Its rejoin timer is the scheduled rebalance's (`delay_ms` of its last assignment).
    pub rejoin_for_delay: bool,
    /// The leader's assignor (in this worker's memory only).
    pub assignor: Assignor,
    /// The leader's process, from the last assignment (`ExtendedAssignment.leaderUrl`).
    pub leader: Option<crate::core::ids::Node>,
    /// As the leader: which worker holds each connector after its last assignment (where a
    /// task's restart is forwarded, `member.ownerUrl`).
    pub owners: Vec<(u8, crate::core::ids::Node)>,
    /// A config record changed a connector's tasks during a rebalance: it joins again once the
    /// rebalance completes (`needsReconfigRebalance`).
    pub reconfig_rejoin: bool,
}

/// A worker about to join: no id, no generation, nothing assigned.
impl Default for GroupMember {
    fn default() -> GroupMember {
        GroupMember {
            state: MemberState::Joining,
            id: None,
            generation: 0,
            completed_generation: 0,
            last_heard: SimTime::ZERO,
            coordinator_unknown_since: None,
            request_lost: false,
            rejoin_after_revocation: false,
            rejoin_for_delay: false,
            assignor: Assignor::default(),
            leader: None,
            owners: Vec::new(),
            reconfig_rejoin: false,
        }
    }
}

/// `IncrementalCooperativeAssignor`'s memory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Assignor {
    /// The tasks (connectors) of the previous assignment, lost ones included.
    pub previous: BTreeSet<u8>,
    pub previous_generation: Option<u32>,
    pub previous_members: BTreeSet<u32>,
    /// When lost tasks are reassigned (`scheduledRebalance`; `None` is 0).
    pub scheduled_rebalance: Option<SimTime>,
    pub delay_ms: u64,
    /// Members with nothing assigned when the loss was found (`candidateWorkersForReassignment`).
    pub candidates: BTreeSet<u32>,
    /// This worker's rejoin for the scheduled rebalance has fired: the delay is over. (Under a
    /// clock the rejoin fires at `scheduled_rebalance`, so this says what the clock says; in the
    /// exhaustive world, where time does not pass, only this says it.)
    pub delay_over: bool,
}

/// One round's result: each member's assignment, and what the leader narrates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Round {
    pub assignments: Vec<(u32, GroupAssignment)>,
    /// Lost tasks held back until the scheduled rebalance.
    pub delayed: Vec<u8>,
    /// Tasks found running on more than one member.
    pub duplicated: Vec<u8>,
    /// What each member holds once its assignment is applied (where a task's restart goes).
    pub holdings: BTreeMap<u32, BTreeSet<u8>>,
}

impl Assignor {
    /// `performTaskAssignment` at `now` for generation `generation`: `configured` are the
    /// connectors that should run, `members` each member's current tasks, `completed` the
    /// leader's last completed generation.
    pub fn assign(
        &mut self,
        now: SimTime,
        (generation, completed): (u32, u32),
        configured: &BTreeSet<u8>,
        members: &[(u32, Vec<u8>)],
        max_delay_ms: u64,
    ) -> Round {
        if self.previous_generation != Some(completed) {
            // A new leader, or a round it did not complete: its view of the past is void.
            self.previous.clear();
        }
        let mut holders: BTreeMap<u8, Vec<u32>> = BTreeMap::new();
        for (id, owned) in members {
            for task in owned {
                holders.entry(*task).or_default().push(*id);
            }
        }
        let active: BTreeSet<u8> = holders.keys().copied().collect();
        let deleted: BTreeSet<u8> = self.previous.difference(configured).copied().collect();
        let duplicated: BTreeSet<u8> =
            holders.iter().filter(|(_, holders)| holders.len() > 1).map(|(task, _)| *task).collect();
        let lost: BTreeSet<u8> =
            self.previous.iter().filter(|t| !active.contains(t) && !deleted.contains(t)).copied().collect();
        let created: BTreeSet<u8> =
            configured.iter().filter(|t| !self.previous.contains(t) && !active.contains(t)).copied().collect();
        // What each member keeps: its tasks less deleted and duplicated ones (and any no longer
        // configured).
        let mut revoked: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
        let mut next: BTreeMap<u32, BTreeSet<u8>> = BTreeMap::new();
        for (id, owned) in members {
            let keep = next.entry(*id).or_default();
            for task in owned {
                if deleted.contains(task) || duplicated.contains(task) || !configured.contains(task) {
                    revoked.entry(*id).or_default().push(*task);
                } else {
                    keep.insert(*task);
                }
            }
        }
        let current: BTreeMap<u32, BTreeSet<u8>> = next.clone();
        // handleLostAssignments
        let mut to_assign: BTreeSet<u8> = created;
        let mut delayed = Vec::new();
        let member_ids: BTreeSet<u32> = members.iter().map(|(id, _)| *id).collect();
        if lost.is_empty() {
            self.reset_delay();
        } else if self.scheduled_rebalance.is_none() && self.previous_members.is_subset(&member_ids) {
            // Nobody left: the lost tasks missed an assignment; reassign them as new.
            to_assign.extend(lost.iter().copied());
        } else if max_delay_ms == 0 {
            to_assign.extend(lost.iter().copied());
        } else if self.scheduled_rebalance.is_some_and(|at| now >= at || self.delay_over) {
            let candidates: Vec<u32> = self.candidates.iter().filter(|id| next.contains_key(id)).copied().collect();
            if candidates.is_empty() {
                to_assign.extend(lost.iter().copied());
            } else {
                for (i, task) in lost.iter().enumerate() {
                    next.get_mut(&candidates[i % candidates.len()]).expect("candidate").insert(*task);
                }
            }
            self.reset_delay();
        } else {
            self.candidates.extend(next.iter().filter(|(_, tasks)| tasks.is_empty()).map(|(id, _)| *id));
            match self.scheduled_rebalance {
                Some(at) if now < at => self.delay_ms = at.ms() - now.ms(),
                _ => self.delay_ms = max_delay_ms,
            }
            self.scheduled_rebalance = Some(now.plus_ms(self.delay_ms));
            delayed = lost.iter().copied().collect();
        }
        // Load-balancing revocations, never while a delayed rebalance is active.
        if self.delay_ms == 0 && !next.is_empty() {
            let total = next.values().map(BTreeSet::len).sum::<usize>() + to_assign.len();
            let ceiling = total.div_ceil(next.len());
            for (id, tasks) in next.iter_mut() {
                while tasks.len() > ceiling {
                    let task = *tasks.iter().next_back().expect("non-empty");
                    tasks.remove(&task);
                    revoked.entry(*id).or_default().push(task);
                }
            }
        }
        // assignTasks: each to the least loaded member.
        for task in to_assign {
            let (_, tasks) = next.iter_mut().min_by_key(|(id, tasks)| (tasks.len(), **id)).expect("a member");
            tasks.insert(task);
        }
        let revoked_all: BTreeSet<u8> = revoked.values().flatten().copied().collect();
        self.previous = next.values().flatten().copied().filter(|t| !revoked_all.contains(t)).collect();
        self.previous.extend(lost.iter().copied().filter(|t| delayed.contains(t)));
        self.previous_generation = Some(generation);
        self.previous_members = member_ids;
        let assignments = next
            .iter()
            .map(|(id, tasks)| {
                let had = current.get(id).cloned().unwrap_or_default();
                GroupAssignment {
                    assigned: tasks.difference(&had).copied().collect(),
                    revoked: revoked.get(id).cloned().unwrap_or_default(),
                    delay_ms: self.delay_ms,
                }
            })
            .zip(next.keys())
            .map(|(assignment, id)| (*id, assignment))
            .collect();
        Round { assignments, delayed, duplicated: duplicated.into_iter().collect(), holdings: next }
    }

    fn reset_delay(&mut self) {
        self.delay_over = false;
        self.candidates.clear();
        self.scheduled_rebalance = None;
        self.delay_ms = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configured(tasks: &[u8]) -> BTreeSet<u8> {
        tasks.iter().copied().collect()
    }

    #[test]
    fn new_tasks_are_spread_and_a_lost_task_waits_for_the_delay() {
        let mut assignor = Assignor::default();
        let round = assignor.assign(SimTime(0), (1, 0), &configured(&[0, 1]), &[(1, vec![]), (2, vec![])], 300_000);
        assert_eq!(round.assignments[0].1.assigned, vec![0]);
        assert_eq!(round.assignments[1].1.assigned, vec![1]);
        // Member 2 vanishes: its task is lost and held back for scheduled.rebalance.max.delay.ms.
        let round = assignor.assign(SimTime(20_000), (2, 1), &configured(&[0, 1]), &[(1, vec![0])], 300_000);
        assert_eq!(round.delayed, vec![1]);
        assert_eq!(
            round.assignments,
            vec![(1, GroupAssignment { assigned: vec![], revoked: vec![], delay_ms: 300_000 })]
        );
        // A rebalance before the deadline recomputes the delay as the time left.
        let round = assignor.assign(SimTime(120_000), (3, 2), &configured(&[0, 1]), &[(1, vec![0])], 300_000);
        assert_eq!(round.assignments[0].1.delay_ms, 200_000);
        // At the deadline, with no candidate (member 1 was not empty), the lost task is new.
        let round = assignor.assign(SimTime(320_000), (4, 3), &configured(&[0, 1]), &[(1, vec![0])], 300_000);
        assert_eq!(round.assignments, vec![(1, GroupAssignment { assigned: vec![1], revoked: vec![], delay_ms: 0 })]);
    }

    #[test]
    fn a_worker_back_before_the_deadline_gets_its_task_at_the_deadline() {
        let mut assignor = Assignor::default();
        assignor.assign(SimTime(0), (1, 0), &configured(&[0, 1]), &[(1, vec![]), (2, vec![])], 300_000);
        assignor.assign(SimTime(20_000), (2, 1), &configured(&[0, 1]), &[(1, vec![0])], 300_000);
        // Member 3 (the restarted worker) joins empty: a candidate, nothing yet.
        let round =
            assignor.assign(SimTime(40_000), (3, 2), &configured(&[0, 1]), &[(1, vec![0]), (3, vec![])], 300_000);
        assert!(round.assignments.iter().all(|(_, a)| a.assigned.is_empty() && a.delay_ms == 280_000));
        let round =
            assignor.assign(SimTime(320_000), (4, 3), &configured(&[0, 1]), &[(1, vec![0]), (3, vec![])], 300_000);
        assert_eq!(round.assignments[1], (3, GroupAssignment { assigned: vec![1], revoked: vec![], delay_ms: 0 }));
    }

    #[test]
    fn a_new_leader_knows_no_previous_assignment_and_assigns_lost_tasks_at_once() {
        let mut assignor = Assignor::default();
        // The leader that assigned generation 1 is gone: this worker leads from generation 2
        // with no memory of it, so task 0 is created, not lost.
        let round = assignor.assign(SimTime(20_000), (2, 1), &configured(&[0, 1]), &[(2, vec![1])], 300_000);
        assert_eq!(round.assignments, vec![(2, GroupAssignment { assigned: vec![0], revoked: vec![], delay_ms: 0 })]);
    }

    #[test]
    fn a_task_running_twice_is_revoked_from_both_and_assigned_in_the_next_round() {
        let mut assignor = Assignor::default();
        assignor.assign(SimTime(0), (1, 0), &configured(&[0]), &[(1, vec![])], 300_000);
        let round = assignor.assign(SimTime(10_000), (2, 1), &configured(&[0]), &[(1, vec![0]), (2, vec![0])], 300_000);
        assert_eq!(round.duplicated, vec![0]);
        assert!(round.assignments.iter().all(|(_, a)| a.revoked == vec![0] && a.assigned.is_empty()));
        let round = assignor.assign(SimTime(11_000), (3, 2), &configured(&[0]), &[(1, vec![]), (2, vec![])], 300_000);
        assert_eq!(round.assignments[0].1.assigned, vec![0]);
    }

    #[test]
    fn an_unbalanced_group_revokes_first_and_assigns_in_the_follow_up_round() {
        let mut assignor = Assignor::default();
        assignor.assign(SimTime(0), (1, 0), &configured(&[0, 1]), &[(1, vec![])], 300_000);
        let round =
            assignor.assign(SimTime(10_000), (2, 1), &configured(&[0, 1]), &[(1, vec![0, 1]), (2, vec![])], 300_000);
        assert_eq!(round.assignments[0].1.revoked, vec![1]);
        assert!(round.assignments[1].1.assigned.is_empty());
        let round =
            assignor.assign(SimTime(11_000), (3, 2), &configured(&[0, 1]), &[(1, vec![0]), (2, vec![])], 300_000);
        assert_eq!(round.assignments[1].1.assigned, vec![1]);
    }
}
