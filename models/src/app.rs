//! The claims application: runs the workload's transactions against the database service.
//!
//! The workload is data, generated from the run's seed before the run starts (`workload.rs`):
//! timed transactions run at their simulated time, scripted ones when the harness says a moment
//! has come ("while the snapshot scans"). Each transaction is one autocommit statement on a
//! session of its own, as from a pool of connections. A transaction that fails (the server is
//! down, or read-only) is not retried.

use crate::component::{Component, Ctx, Timer};
use crate::ids::Node;
use crate::observe::Observation;
use crate::postgres::table::RowOp;
use crate::protocol::{Control, Msg, SqlReply, SqlRequest};
use crate::shared::Shared;
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

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct App {
    pub workload: Shared<Workload>,
    next_timed: usize,
    next_session: u64,
}

impl App {
    pub fn new(workload: Shared<Workload>) -> App {
        App { workload, next_timed: 0, next_session: 1 }
    }

    /// Whether every timed transaction has been sent.
    pub fn timed_done(&self) -> bool {
        self.next_timed >= self.workload.timed.len()
    }

    fn run(&mut self, ctx: &mut Ctx, txn: &WorkloadTxn) {
        let session = self.next_session;
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
            Msg::SqlReply { reply: SqlReply::Error(reason), .. } => {
                ctx.observe(Observation::AppTxnFailed { reason });
            }
            Msg::Control(Control::RunScripted { index }) => {
                let workload = self.workload.clone();
                if let Some(txn) = workload.scripted.get(index) {
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

    fn on_connection_lost(&mut self, _ctx: &mut Ctx, _peer: Node) {}

    fn crash(&mut self) {}
}
