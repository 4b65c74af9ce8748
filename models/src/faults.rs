//! Fault schedules generated from a seed (swarm testing, DESIGN.md §2.3).
//!
//! A schedule is data: a list of [`Fault`]s, each a trigger and an action. [`generate`] draws
//! one from a [`FaultProfile`] with its own ChaCha8 stream of the run's seed: first which kinds
//! are on, then how many faults, then each fault. Every generated fault heals itself — a killed
//! process restarts, a stopped connector resumes, a clog clears, a failover promotes — so after
//! the fault phase the pipeline has every chance to catch up, and one that does not is a liveness
//! finding (I11), not an artefact of the schedule.

use crate::ids::Node;
use crate::spec::{Fault, FaultAction, FaultKind, FaultProfile, Moment, Spec, Trigger};
use crate::workload::{Draw, stream};

/// Links a clog can stall: (client, server) pairs that carry the pipeline's traffic.
const CLOGGABLE: [(Node, Node); 4] =
    [(Node::Connect, Node::Postgres), (Node::Connect, Node::Kafka), (Node::Sink, Node::Kafka), (Node::Pg1, Node::Pg2)];

/// The faults of a run: the explicit schedule, then the profile's draw for this seed.
pub fn schedule(spec: &Spec, seed: u64) -> Vec<Fault> {
    let mut faults = spec.faults.clone();
    if let Some(profile) = &spec.profile {
        faults.extend(generate(profile, spec.standby.is_some(), seed));
    }
    faults
}

/// Draws a schedule from a profile.
pub fn generate(profile: &FaultProfile, standby: bool, seed: u64) -> Vec<Fault> {
    let mut draw = Draw::new(seed, stream::FAULTS);
    let allowed: Vec<FaultKind> =
        profile.kinds.iter().copied().filter(|kind| standby || !matches!(kind, FaultKind::FailOverToStandby)).collect();
    if allowed.is_empty() {
        return Vec::new();
    }
    // Swarm testing: which kinds are on in this run.
    let mut on: Vec<FaultKind> = allowed.iter().copied().filter(|_| draw.below(2) == 1).collect();
    if on.is_empty() {
        on.push(allowed[draw.below(allowed.len() as u64) as usize]);
    }
    let count = draw.below(u64::from(profile.max_faults) + 1);
    let mut faults = Vec::new();
    let mut failed_over = false;
    for _ in 0..count {
        let kind = on[draw.below(on.len() as u64) as usize];
        if kind == FaultKind::FailOverToStandby {
            if failed_over {
                continue; // one failover per run: the old primary does not come back
            }
            failed_over = true;
        }
        let trigger = if !profile.moments.is_empty() && draw.below(2) == 1 {
            let moment: Moment = profile.moments[draw.below(profile.moments.len() as u64) as usize];
            let plus_ms = if draw.below(2) == 1 { 0 } else { draw.between(1, 2_000) };
            Trigger::After { moment, occurrence: 1, plus_ms }
        } else {
            let (start, end) = profile.window_ms;
            Trigger::At { at_ms: draw.between(start, end.max(start)) }
        };
        let action = match kind {
            FaultKind::KillConnectWorker => {
                FaultAction::KillConnectWorker { restart_after_ms: Some(draw.between(1_000, 30_000)) }
            }
            FaultKind::KillConnectorTask => {
                FaultAction::KillConnectorTask { restart_after_ms: Some(draw.between(1_000, 30_000)) }
            }
            FaultKind::StopConnector => {
                FaultAction::StopConnector { resume_after_ms: Some(draw.between(1_000, 30_000)) }
            }
            FaultKind::CrashPostgres => FaultAction::CrashPostgres { restart_after_ms: draw.between(1_000, 20_000) },
            FaultKind::FailOverToStandby => {
                FaultAction::FailOverToStandby { promote_after_ms: draw.between(1_000, 10_000) }
            }
            FaultKind::RecreateSlot => FaultAction::RecreateSlot,
            FaultKind::RebuildConnector => FaultAction::RebuildConnector,
            FaultKind::Clog => FaultAction::Clog {
                between: CLOGGABLE[draw.below(CLOGGABLE.len() as u64) as usize],
                duration_ms: draw.between(100, 20_000),
            },
            FaultKind::WalBurst => FaultAction::WalBurst { bytes: draw.between(1, 64) << 20 },
            FaultKind::Checkpoint => FaultAction::Checkpoint,
        };
        faults.push(Fault { trigger, action });
    }
    faults
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> FaultProfile {
        FaultProfile {
            kinds: FaultKind::ALL.to_vec(),
            max_faults: 4,
            window_ms: (0, 60_000),
            moments: vec![Moment::SnapshotCompleted, Moment::ChangeAcked],
        }
    }

    #[test]
    fn the_same_seed_draws_the_same_schedule_and_seeds_differ() {
        assert_eq!(generate(&profile(), true, 7), generate(&profile(), true, 7));
        // A fifth of the seeds draw no fault at all; every other schedule is one of a kind.
        let drawn: Vec<Vec<Fault>> =
            (0..50).map(|seed| generate(&profile(), true, seed)).filter(|faults| !faults.is_empty()).collect();
        let distinct: std::collections::BTreeSet<String> = drawn.iter().map(|faults| format!("{faults:?}")).collect();
        assert!(drawn.len() > 30, "{}", drawn.len());
        assert_eq!(distinct.len(), drawn.len());
    }

    #[test]
    fn schedules_respect_the_profile() {
        for seed in 0..500 {
            let faults = generate(&profile(), false, seed);
            assert!(faults.len() <= 4);
            for fault in &faults {
                assert!(!matches!(fault.action, FaultAction::FailOverToStandby { .. }), "no standby, no failover");
                if let Trigger::At { at_ms } = fault.trigger {
                    assert!(at_ms <= 60_000);
                }
            }
        }
        let with_standby = (0..500).flat_map(|seed| generate(&profile(), true, seed));
        let failovers = with_standby.filter(|f| matches!(f.action, FaultAction::FailOverToStandby { .. })).count();
        assert!(failovers > 0);
    }

    #[test]
    fn swarm_testing_turns_kinds_off() {
        // Over many seeds, some schedules use a single kind although several are allowed.
        let single_kind = (0..300)
            .map(|seed| generate(&profile(), true, seed))
            .filter(|faults| faults.len() >= 3)
            .filter(|faults| faults.iter().all(|f| FaultKind::of(&f.action) == FaultKind::of(&faults[0].action)))
            .count();
        assert!(single_kind > 0);
    }
}
