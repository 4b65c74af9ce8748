//! Fault schedules generated from a seed (swarm testing: Groce et al., "Swarm
//! Testing", ISSTA 2012).
//!
//! A schedule is data: a list of [`Fault`]s, each a trigger and an action. [`generate`] draws
//! one from a [`FaultProfile`] with its own ChaCha8 stream of the run's seed: first which kinds
//! are on, then how many faults, then each fault. Every generated fault heals itself — a killed
//! process restarts, a stopped connector resumes, a clog clears, a failover promotes — so after
//! the fault phase the pipeline has every chance to catch up, and one that does not is a liveness
//! finding (I11), not an artefact of the schedule.
//!
//! A generated fault stays within the run's horizon: its time, its delay after a moment and its
//! healing delay are drawn as always and then held to the horizon, so that a profile never
//! asks for what the loader refuses in a `[[fault]]` (docs/scenario-format.md, "Limits").

use crate::core::fault::{FaultAction, Moment, Trigger};
use crate::core::ids::Node;
use crate::scenario::spec::{Fault, FaultKind, FaultProfile, Spec};
use crate::scenario::workload::{Draw, stream};

/// Links a clog can stall: (client, server) pairs that carry the pipeline's traffic. The last
/// one, primary to standby, exists only with a standby: [`cloggable`] leaves it out without one.
const CLOGGABLE: [(Node, Node); 4] =
    [(Node::Connect, Node::Postgres), (Node::Connect, Node::Kafka), (Node::Sink, Node::Kafka), (Node::Pg1, Node::Pg2)];

/// The links a clog can stall in a system with (or without) a standby, and with (or without) the
/// outbox's consumer: a drawn fault names only processes the scenario has, so that a pinned
/// schedule loads as a `[[fault]]` list. (Without a standby the draw is among the first three
/// links; with one it is the same draw as before; the consumer's link to Kafka comes last.)
fn cloggable(system: System) -> Vec<(Node, Node)> {
    let mut links = if system.standby { CLOGGABLE.to_vec() } else { CLOGGABLE[..3].to_vec() };
    if system.consumer {
        links.push((Node::Consumer, Node::Kafka));
    }
    // A group's other workers: each to Kafka (its coordinator and its producers) and to the
    // database.
    for worker in Node::WORKERS.into_iter().take(usize::from(system.workers)).skip(1) {
        links.extend([(worker, Node::Kafka), (worker, Node::Postgres)]);
    }
    links
}

/// What a scenario's system has beyond its fixed processes, as far as faults care.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct System {
    /// A standby to promote (`[postgres.standby]`).
    pub standby: bool,
    /// The outbox's consumer (`[consumer]`).
    pub consumer: bool,
    /// Transactional producers: the workers run exactly-once source tasks.
    pub transactions: bool,
    /// How many Connect workers form the group (`[connect] workers`, 1 to 3).
    pub workers: u8,
}

impl System {
    pub fn of(spec: &Spec) -> System {
        System {
            standby: spec.postgres.standby.is_some(),
            consumer: spec.consumer.is_some(),
            transactions: spec.connect.exactly_once(),
            workers: spec.connect.workers,
        }
    }
}

/// Whether a fault kind can act on the scenario's system: a failover needs a standby to promote.
pub fn applies(kind: FaultKind, system: System) -> bool {
    match kind {
        FaultKind::FailOverToStandby => system.standby,
        FaultKind::KillConsumer => system.consumer,
        FaultKind::HangTransaction => system.transactions,
        // A clean shutdown is a group member's.
        FaultKind::StopConnectWorker => system.workers > 1,
        _ => true,
    }
}

/// The faults of a run: the explicit schedule, then the profile's draw for this seed.
pub fn schedule(spec: &Spec, seed: u64) -> Vec<Fault> {
    let mut faults = spec.faults.clone();
    if let Some(profile) = &spec.profile {
        faults.extend(generate(profile, System::of(spec), spec.acceptance.horizon_ms, seed));
    }
    faults
}

/// Draws a schedule from a profile, every time and delay at most `horizon_ms`.
pub fn generate(profile: &FaultProfile, system: System, horizon_ms: u64, seed: u64) -> Vec<Fault> {
    let mut draw = Draw::new(seed, stream::FAULTS);
    let allowed: Vec<FaultKind> = profile.kinds.iter().copied().filter(|kind| applies(*kind, system)).collect();
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
            Trigger::After { moment, occurrence: 1, plus_ms: plus_ms.min(horizon_ms) }
        } else {
            let (start, end) = profile.window_ms;
            Trigger::At { at_ms: delay(&mut draw, start, end.max(start), horizon_ms) }
        };
        let action = match kind {
            FaultKind::KillConnectWorker => {
                FaultAction::KillConnectWorker { restart_after_ms: Some(delay(&mut draw, 1_000, 30_000, horizon_ms)) }
            }
            FaultKind::KillConnectorTask => {
                FaultAction::KillConnectorTask { restart_after_ms: Some(delay(&mut draw, 1_000, 30_000, horizon_ms)) }
            }
            FaultKind::StopConnector => {
                FaultAction::StopConnector { resume_after_ms: Some(delay(&mut draw, 1_000, 30_000, horizon_ms)) }
            }
            FaultKind::CrashPostgres => {
                FaultAction::CrashPostgres { restart_after_ms: delay(&mut draw, 1_000, 20_000, horizon_ms) }
            }
            FaultKind::FailOverToStandby => {
                FaultAction::FailOverToStandby { promote_after_ms: delay(&mut draw, 1_000, 10_000, horizon_ms) }
            }
            FaultKind::RecreateSlot => FaultAction::RecreateSlot,
            FaultKind::RebuildConnector => FaultAction::RebuildConnector,
            FaultKind::Clog => FaultAction::Clog {
                between: {
                    let links = cloggable(system);
                    links[draw.below(links.len() as u64) as usize]
                },
                duration_ms: delay(&mut draw, 100, 20_000, horizon_ms),
            },
            FaultKind::WalBurst => FaultAction::WalBurst { bytes: draw.between(1, 64) << 20 },
            FaultKind::Checkpoint => FaultAction::Checkpoint,
            FaultKind::AdvanceSlot => FaultAction::AdvanceSlot { to_lsn: None },
            FaultKind::HangTransaction => {
                FaultAction::HangTransaction { abort_after_ms: Some(delay(&mut draw, 1_000, 60_000, horizon_ms)) }
            }
            FaultKind::KillConsumer => {
                FaultAction::KillConsumer { restart_after_ms: Some(delay(&mut draw, 1_000, 30_000, horizon_ms)) }
            }
            FaultKind::StopConnectWorker => {
                FaultAction::StopConnectWorker { restart_after_ms: Some(delay(&mut draw, 1_000, 30_000, horizon_ms)) }
            }
            // From a short stall to past wal_sender_timeout (60 s): a zombie whose walsender ends.
            FaultKind::PauseConnectWorker => {
                FaultAction::PauseConnectWorker { duration_ms: delay(&mut draw, 1_000, 90_000, horizon_ms) }
            }
        };
        let on_a_worker =
            matches!(kind, FaultKind::KillConnectWorker | FaultKind::StopConnectWorker | FaultKind::PauseConnectWorker);
        // Which worker, in a group (drawn only then: a one-worker scenario's draws are unchanged).
        let worker = (on_a_worker && system.workers > 1).then(|| draw.below(u64::from(system.workers)) as u8);
        faults.push(Fault { trigger, action, connector: 0, worker });
    }
    faults
}

/// A time or delay uniform in `low..=high`, held to the horizon (drawn first, so that the
/// horizon changes no other draw).
fn delay(draw: &mut Draw, low: u64, high: u64, horizon_ms: u64) -> u64 {
    draw.between(low, high).min(horizon_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HORIZON_MS: u64 = crate::core::limits::DEFAULT_HORIZON_MS;

    fn sys(standby: bool) -> System {
        System { standby, consumer: false, transactions: false, workers: 1 }
    }

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
        assert_eq!(generate(&profile(), sys(true), HORIZON_MS, 7), generate(&profile(), sys(true), HORIZON_MS, 7));
        // A fifth of the seeds draw no fault at all; every other schedule is one of a kind.
        let drawn: Vec<Vec<Fault>> = (0..50)
            .map(|seed| generate(&profile(), sys(true), HORIZON_MS, seed))
            .filter(|faults| !faults.is_empty())
            .collect();
        let distinct: std::collections::BTreeSet<String> = drawn.iter().map(|faults| format!("{faults:?}")).collect();
        assert!(drawn.len() > 30, "{}", drawn.len());
        assert_eq!(distinct.len(), drawn.len());
    }

    #[test]
    fn schedules_respect_the_profile() {
        for seed in 0..500 {
            let faults = generate(&profile(), sys(false), HORIZON_MS, seed);
            assert!(faults.len() <= 4);
            for fault in &faults {
                assert!(!matches!(fault.action, FaultAction::FailOverToStandby { .. }), "no standby, no failover");
                if let Trigger::At { at_ms } = fault.trigger {
                    assert!(at_ms <= 60_000);
                }
            }
        }
        let with_standby = (0..500).flat_map(|seed| generate(&profile(), sys(true), HORIZON_MS, seed));
        let failovers = with_standby.filter(|f| matches!(f.action, FaultAction::FailOverToStandby { .. })).count();
        assert!(failovers > 0);
    }

    #[test]
    fn a_clog_names_the_standby_only_when_there_is_one() {
        let standby_link = |faults: Vec<Fault>| {
            faults
                .iter()
                .filter(|f| matches!(f.action, FaultAction::Clog { between: (Node::Pg1, Node::Pg2), .. }))
                .count()
        };
        let clogs = |standby| {
            (0..500)
                .flat_map(|seed| generate(&profile(), sys(standby), HORIZON_MS, seed))
                .filter(|f| matches!(f.action, FaultAction::Clog { .. }))
                .count()
        };
        let without: usize =
            (0..500).map(|seed| standby_link(generate(&profile(), sys(false), HORIZON_MS, seed))).sum();
        let with: usize = (0..500).map(|seed| standby_link(generate(&profile(), sys(true), HORIZON_MS, seed))).sum();
        assert_eq!(without, 0, "no standby, no pg1 <-> pg2");
        assert!(with > 0 && clogs(false) > 0, "{with}");
    }

    #[test]
    fn generated_faults_stay_within_a_short_horizon() {
        // A 5 s horizon: the window, the moments' delays and the healing delays (drawn up to
        // 30 s) are all held to it, and the draw is otherwise the same.
        let profile = FaultProfile { window_ms: (0, 5_000), ..profile() };
        let mut held = 0;
        for seed in 0..300 {
            let short = generate(&profile, sys(true), 5_000, seed);
            let long = generate(&profile, sys(true), HORIZON_MS, seed);
            assert_eq!(short.len(), long.len());
            for (fault, unheld) in short.iter().zip(&long) {
                assert_eq!(FaultKind::of(&fault.action), FaultKind::of(&unheld.action));
                let times = [Some(fault.trigger.ms()), fault.action.delay_ms()];
                assert!(times.iter().flatten().all(|ms| *ms <= 5_000), "{fault:?}");
                held += usize::from(fault != unheld);
            }
        }
        assert!(held > 0, "some delays were drawn above 5 s and held to the horizon");
    }

    #[test]
    fn swarm_testing_turns_kinds_off() {
        // Over many seeds, some schedules use a single kind although several are allowed.
        let single_kind = (0..300)
            .map(|seed| generate(&profile(), sys(true), HORIZON_MS, seed))
            .filter(|faults| faults.len() >= 3)
            .filter(|faults| faults.iter().all(|f| FaultKind::of(&f.action) == FaultKind::of(&faults[0].action)))
            .count();
        assert!(single_kind > 0);
    }
}
