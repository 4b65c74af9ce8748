//! The claims application: runs the workload's transactions against the database service.
//!
//! The workload is data, generated from the run's seed before the run starts (`workload.rs`):
//! timed transactions run at their simulated time, scripted ones when the harness says a moment
//! has come ("while the snapshot scans"). Each transaction is one autocommit statement on a
//! session of its own, as from a pool of connections. A transaction that fails (the server is
//! down, or read-only) is not retried.
//!
//! A scripted transaction that does not apply is said, never dropped silently: one that changes
//! no row (its key does not exist when it runs), fails (a duplicate key, a read-only server), or
//! gets no answer (the connection to the database was lost) is reported with
//! [`Observation::ScriptedNotApplied`]. (Its session says it is scripted, not which one: two
//! scripted transactions with the same statement stay interchangeable for the exhaustive lens.)
//! A background transaction that changes nothing is the workload's own business (it may update a
//! claim a scripted delete removed).

use crate::core::change::RowOp;
use crate::core::component::{Component, Ctx, Timer};
use crate::core::ids::Node;
use crate::core::observe::Observation;
use crate::core::protocol::{Control, Msg, SessionId, SqlReply, SqlRequest};
use crate::core::shared::CopyOnWrite;
use serde::{Deserialize, Serialize};

/// One application transaction.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WorkloadTxn {
    /// When it runs (simulated ms); `None` for a scripted transaction run on a moment.
    pub at_ms: Option<u64>,
    pub ops: Vec<RowOp>,
}

/// The application's transactions: `timed` in time order, `scripted` by index.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Workload {
    pub timed: Vec<WorkloadTxn>,
    pub scripted: Vec<WorkloadTxn>,
}

/// The session of a scripted transaction has this bit set.
const SCRIPTED: SessionId = 1 << 62;

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct App {
    pub workload: CopyOnWrite<Workload>,
    next_timed: usize,
    next_session: u64,
    /// Scripted transactions sent and not answered yet.
    scripted_unanswered: u32,
}

impl App {
    pub fn new(workload: CopyOnWrite<Workload>) -> App {
        App { workload, next_timed: 0, next_session: 1, scripted_unanswered: 0 }
    }

    /// Whether every timed transaction has been sent.
    pub fn timed_done(&self) -> bool {
        self.next_timed >= self.workload.timed.len()
    }

    fn run(&mut self, ctx: &mut Ctx, txn: &WorkloadTxn) {
        let session = self.next_session | if txn.at_ms.is_none() { SCRIPTED } else { 0 };
        self.next_session += 1;
        ctx.send(Node::Postgres, Msg::Sql { session, request: SqlRequest::Transaction { ops: txn.ops.clone() } });
    }

    fn arm_next(&mut self, ctx: &mut Ctx) {
        if let Some(txn) = self.workload.timed.get(self.next_timed) {
            let at = txn.at_ms.unwrap_or(0);
            ctx.set_timer(Timer::Workload, at.saturating_sub(ctx.now.ms()));
        }
    }
}

impl Component for App {
    fn start(&mut self, ctx: &mut Ctx) {
        self.arm_next(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx, _from: Node, msg: Msg) {
        match msg {
            Msg::SqlReply { session, reply } if session & SCRIPTED != 0 => {
                self.scripted_unanswered = self.scripted_unanswered.saturating_sub(1);
                match reply {
                    SqlReply::NothingChanged { ops } => ctx.observe(Observation::ScriptedNotApplied {
                        ops,
                        reason: "it changed no row: no row with that key exists when it runs".into(),
                    }),
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
                    self.scripted_unanswered += 1;
                    self.run(ctx, txn);
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
            self.run(ctx, txn);
        }
        self.arm_next(ctx);
    }

    fn on_connection_lost(&mut self, ctx: &mut Ctx, peer: Node) {
        if matches!(peer, Node::Postgres | Node::Pg1 | Node::Pg2) && self.scripted_unanswered > 0 {
            let unanswered = std::mem::take(&mut self.scripted_unanswered);
            ctx.observe(Observation::ScriptedNotApplied {
                ops: Vec::new(),
                reason: format!(
                    "{unanswered} scripted transaction(s) got no answer: the connection to the database was lost \
                     (whether each committed shows in the timeline)"
                ),
            });
        }
    }

    fn crash(&mut self) {}
}
