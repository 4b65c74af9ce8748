//! I11 honest liveness: a pipeline that cannot go on says so. A connector that reports RUNNING
//! while the pipeline does not catch up within `acceptance.timeout_ms` is a finding; one that
//! says FAILED or STOPPED (or is not running at all) is honest, and so is a sink consumer that
//! FAILED (`auto.offset.reset=none` with no committed offset: it says it cannot go on).
//!
//! The finding cites the health signals where the run ended ([`HealthSignals`]): the
//! streaming metrics, the heartbeat's age, the slot's `wal_status` and retention, the states.
//!
//! Verifies, once, where a timed run ended: that it reached its acceptance boundary, or that the
//! connector did not report RUNNING, or that the sink's consumer failed. Does not verify: a run
//! cut by a limit (undecided: a pipeline still at work then is no finding; the caller does not
//! ask), the exhaustive lens's states (a bound has no timeout), or whether RUNNING was said
//! before the end.

use super::Finding;
use crate::components::connect::ConnectorState;
use crate::core::time::SimTime;
use crate::judge::health::HealthSignals;
use crate::scenario::processes::{Holder, Processes};
use crate::scenario::spec::Invariant;

/// Where a run ended, as the check needs it.
pub struct RunEnded<'a> {
    /// Whether it reached its acceptance boundary.
    pub reached: bool,
    /// Why it ended there, in the boundary's words.
    pub reason: &'a str,
    pub at: SimTime,
    /// `acceptance.timeout_ms`.
    pub timeout_ms: u64,
}

/// The I11 finding of a run that ended as `ended` with `processes` as they were then.
pub fn check<H: Holder>(processes: &Processes<H>, ended: &RunEnded) -> Option<Finding> {
    if ended.reached {
        return None;
    }
    // A failed consumer said it cannot go on (`auto.offset.reset=none`): honest, not stuck.
    if H::read(&processes.sink, |sink| sink.failed().is_some()) {
        return None;
    }
    if H::read(processes.worker_of(0), |connect| connect.status()) != ConnectorState::Running {
        return None;
    }
    // What a dashboard showed then: the signals that tell RUNNING-and-idle from RUNNING-and-well.
    let connectors = H::read(&processes.connect, |connect| connect.connectors.len());
    let signals: Vec<String> = (0..connectors)
        .map(|c| {
            let signals = HealthSignals::read(processes, c);
            let said = signals.describe(ended.at.ms());
            if connectors > 1 { format!("({}) {said}", signals.connector) } else { said }
        })
        .collect();
    Some(
        Finding::new(Invariant::I11, None, ended.at)
            .expected(format!(
                "the pipeline catches up within acceptance.timeout_ms={}, or the connector says it cannot",
                ended.timeout_ms
            ))
            .seen(format!("the connector reports RUNNING; {}", ended.reason))
            .detail(format!("the health signals then: {}", signals.join("; "))),
    )
}

#[cfg(test)]
mod tests {
    use super::{RunEnded, check};
    use crate::components::connect::ConnectorState;
    use crate::components::sink::ApplyRule;
    use crate::core::component::{Component, Ctx, Outbox};
    use crate::core::ids::Node;
    use crate::core::protocol::{Control, Msg};
    use crate::core::time::SimTime;
    use crate::scenario::processes::{Plain, Processes};
    use crate::scenario::setup::{self, Options};
    use crate::scenario::spec::{Invariant, claims_minimal};

    const STUCK: &str = "the pipeline did not catch up within acceptance.timeout_ms=600000 after the last fault or \
                         transaction at t=1.000s (connector RUNNING, its task is starting)";

    /// The processes with the Connect worker started: its task RUNNING, nothing caught up.
    fn running() -> Processes<Plain> {
        let spec = claims_minimal(2, ApplyRule::SnapshotEpoch);
        let mut processes =
            setup::build(&spec, 0, Options { bgwriter_running_xacts: false, walsender_keepalives: false }).processes;
        let mut outbox = Outbox::default();
        processes.connect.start(&mut Ctx::new(SimTime::ZERO, Node::Connect, &mut outbox));
        assert_eq!(processes.connect.status(), ConnectorState::Running);
        processes
    }

    fn stuck(reached: bool) -> RunEnded<'static> {
        RunEnded { reached, reason: STUCK, at: SimTime(601_000), timeout_ms: 600_000 }
    }

    #[test]
    fn a_running_connector_that_never_catches_up_is_i11() {
        let finding = check(&running(), &stuck(false)).expect("an I11 finding");
        assert_eq!(finding.invariant, Invariant::I11);
        assert_eq!(finding.at, SimTime(601_000));
        assert_eq!(
            finding.expected,
            "the pipeline catches up within acceptance.timeout_ms=600000, or the connector says it cannot"
        );
        assert_eq!(finding.seen, format!("the connector reports RUNNING; {STUCK}"));
        // It cites what a dashboard showed: a task that has dispatched nothing yet, no slot yet.
        assert_eq!(
            finding.detail,
            "the health signals then: connector RUNNING, task RUNNING; MilliSecondsBehindSource -1 (unknown: no \
             event since the task started); MilliSecondsSinceLastEvent -1; no heartbeat (heartbeat.interval.ms=0); \
             no slot of the connector's on the primary"
        );
    }

    #[test]
    fn a_failed_connector_is_honest() {
        let mut processes = running();
        let mut outbox = Outbox::default();
        let mut ctx = Ctx::new(SimTime::ZERO, Node::Connect, &mut outbox);
        processes.connect.on_message(&mut ctx, Node::Operator, Msg::Control(Control::KillTask { connector: 0 }));
        assert_eq!(processes.connect.status(), ConnectorState::Failed);
        assert_eq!(check(&processes, &stuck(false)), None);
    }

    #[test]
    fn a_run_that_reached_its_boundary_has_nothing_to_say() {
        assert_eq!(check(&running(), &stuck(true)), None);
    }
}
