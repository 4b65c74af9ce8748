//! The acceptance check, for both lenses: has the pipeline caught up with the source (the
//! acceptance boundary, DESIGN.md §4), has it stopped short and said so, or is it still at work?
//!
//! The pipeline has caught up when the connector is RUNNING with nothing queued, unsent or
//! unacknowledged, has processed every captured commit of the primary's WAL, and the sink has
//! read to the end of every partition with no snapshot epoch waiting to close. It has stopped
//! short when the connector's task is FAILED, the connector STOPPED, or the sink's consumer
//! FAILED: those processes say they cannot go on.
//!
//! Each lens gives what it alone knows as [`Circumstances`]: the exhaustive lens
//! ([`crate::exhaustive::world`]) the messages in flight, the scripted transactions not yet run,
//! the processes down and the loader's read; the timed lens (the madsim runner) the operator's
//! procedure under way, whether the Connect worker's node is up, and where the server began
//! decoding for the connector's latest stream.

use crate::components::connect::ConnectorState;
use crate::components::connect::debezium::Phase;
use crate::core::lsn::Lsn;
use crate::judge::checkers::{Evidence, RunEnd};
use crate::scenario::processes::{Holder, Processes};

/// What a lens knows beside its processes.
pub struct Circumstances<'a, LastCommit: FnOnce() -> Option<Lsn>> {
    /// The lens holds the run for something of its own: still at work, whatever the processes
    /// say (the exhaustive lens: a message in flight, a scripted transaction not yet run, a
    /// process down, the loader's read unfinished; the timed lens: an operator's procedure under
    /// way, which stops the connector on its way to resuming it).
    pub held: bool,
    /// Whether the Connect worker's process is up.
    pub connect_up: bool,
    /// Where the server began decoding for the connector's latest stream, when the lens tracks
    /// it: a request below the slot's `confirmed_flush` is forwarded to it.
    pub stream_start: Option<Lsn>,
    /// The checkers' evidence: which commits reached Kafka.
    pub evidence: &'a Evidence,
    /// The end of the last captured commit in the primary's WAL (asked only when the rest of
    /// the pipeline is settled).
    pub last_captured_commit: LastCommit,
}

/// Where a run stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acceptance {
    /// Still at work: the run goes on (or, past its timeout, has not caught up).
    Pending,
    /// Caught up ([`RunEnd::CaughtUp`]) or stopped short, saying why.
    Ended(RunEnd),
}

impl Acceptance {
    pub fn ended(self) -> Option<RunEnd> {
        match self {
            Acceptance::Pending => None,
            Acceptance::Ended(end) => Some(end),
        }
    }
}

/// Whether the run is at its acceptance boundary, has stopped short of it, or goes on.
pub fn decide<H: Holder, L: FnOnce() -> Option<Lsn>>(
    processes: &Processes<H>,
    circumstances: Circumstances<'_, L>,
) -> Acceptance {
    let Circumstances { held, connect_up, stream_start, evidence, last_captured_commit } = circumstances;
    if held {
        return Acceptance::Pending;
    }
    // A consumer that failed says so: the pipeline stopped, loudly.
    if let Some(failure) = H::read(&processes.sink, |sink| sink.failed().map(str::to_string)) {
        return Acceptance::Ended(RunEnd::SinkFailed { failure });
    }
    let connect = H::read(&processes.connect, |connect| {
        let status = connect.status();
        let failure = match connect.debezium_phase() {
            Some(Phase::Failed { reason }) if status == ConnectorState::Failed => reason.clone(),
            _ => String::new(),
        };
        (status, failure, connect.is_drained(), connect.processed_upto())
    });
    let (status, failure, drained, processed) = connect;
    match status {
        ConnectorState::Failed => return Acceptance::Ended(RunEnd::TaskFailed { failure }),
        ConnectorState::Stopped => return Acceptance::Ended(RunEnd::ConnectorStopped),
        _ => {}
    }
    if !connect_up || status != ConnectorState::Running || !drained {
        return Acceptance::Pending;
    }
    let Some(mut processed) = processed else { return Acceptance::Pending };
    // What the connector has processed, or, when its stream was forwarded past its offset (a
    // recreated slot's confirmed_flush) over commits that are all in Kafka already, where
    // decoding began: nothing before it is still to come. (Commits it skipped that never
    // reached Kafka leave the pipeline short: RUNNING and never catching up, I11.)
    if let Some(start) = stream_start
        && start > processed
        && published_between(evidence, processed, start)
    {
        processed = start;
    }
    if last_captured_commit().is_some_and(|last| processed < last) {
        return Acceptance::Pending;
    }
    let ends = H::read(&processes.kafka, |kafka| kafka.log_end_offsets());
    let caught_up = H::read(&processes.sink, |sink| {
        ends.iter().all(|(tp, end)| sink.positions().get(tp).is_some_and(|position| position >= end))
            && !sink.has_closing_epochs()
    });
    if caught_up { Acceptance::Ended(RunEnd::CaughtUp) } else { Acceptance::Pending }
}

/// Whether every captured change committed in `[from, to)` is in Kafka already.
fn published_between(evidence: &Evidence, from: Lsn, to: Lsn) -> bool {
    evidence.oracle.commits.iter().filter(|commit| !commit.lost).all(|commit| {
        commit.txn.commit_lsn < from
            || commit.txn.commit_lsn >= to
            || commit.txn.changes.iter().all(|change| {
                !evidence.captured.contains(&change.table)
                    || evidence.published.has_change(change.lsn, (change.table, change.key), change.kind.after())
            })
    })
}
