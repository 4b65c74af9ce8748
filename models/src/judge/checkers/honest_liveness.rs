//! I11 honest liveness: a pipeline that cannot go on says so. A connector that reports RUNNING
//! while the pipeline does not catch up within `acceptance.timeout_ms` is a finding; one that
//! says FAILED or STOPPED (or is not running at all) is honest, and so is a sink consumer that
//! FAILED (`auto.offset.reset=none` with no committed offset: it says it cannot go on).
//!
//! Verifies, once, where a timed run ended: that it reached its acceptance boundary, or that the
//! connector did not report RUNNING, or that the sink's consumer failed. Does not verify: a run
//! cut by a limit (undecided: a pipeline still at work then is no finding; the caller does not
//! ask), the exhaustive lens's states (a bound has no timeout), or whether RUNNING was said
//! before the end.

use super::Finding;
use crate::components::connect::ConnectorState;
use crate::core::time::SimTime;
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
    if H::read(&processes.connect, |connect| connect.status()) != ConnectorState::Running {
        return None;
    }
    Some(
        Finding::new(Invariant::I11, None, ended.at)
            .expected(format!(
                "the pipeline catches up within acceptance.timeout_ms={}, or the connector says it cannot",
                ended.timeout_ms
            ))
            .seen(format!("the connector reports RUNNING; {}", ended.reason)),
    )
}
