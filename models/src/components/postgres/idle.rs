//! `idle_in_transaction_session_timeout` (`tcop/postgres.c` `PostgresMain`, `ProcessInterrupts`):
//! the timer starts when a backend reports ready-for-query while in a transaction block, idle or
//! failed ("idle in transaction (aborted)"), and the client's next message cancels it. When it
//! expires the backend exits with `FATAL: terminating connection due to idle-in-transaction
//! timeout` (SQLSTATE 25P03); exiting aborts its transaction (`ShutdownPostgres` →
//! `AbortOutOfAnyTransaction`), which writes an ABORT record if it had an xid, so the next
//! running-xacts record no longer lists it and the slots it held back are released.

use super::*;

/// What the client of a terminated session reads.
pub const IDLE_IN_TRANSACTION_TIMEOUT_ERROR: &str = "FATAL: terminating connection due to idle-in-transaction timeout";

impl Postgres {
    /// The server answered `session` and it is now waiting for its client: in a transaction
    /// block, its idle timer starts.
    pub(super) fn idle_in_transaction_from(&mut self, ctx: &mut Ctx, client: Node, session: SessionId) {
        let timeout_ms = self.config.idle_in_transaction_session_timeout_ms;
        if timeout_ms == 0 || !self.in_block(client, session) {
            return;
        }
        let deadline = ctx.now.ms() + timeout_ms;
        let earliest = self.volatile.idle_in_transaction.values().min().copied();
        self.volatile.idle_in_transaction.insert((client, session), deadline);
        if earliest.is_none_or(|earliest| deadline < earliest) {
            ctx.set_timer(Timer::IdleInTransactionTimeout, timeout_ms);
        }
    }

    /// The timer fired: every session whose idle time is up is terminated, and the timer is set
    /// for the next one.
    pub(super) fn idle_in_transaction_timeout(&mut self, ctx: &mut Ctx) {
        let now = ctx.now.ms();
        let timeout_ms = self.config.idle_in_transaction_session_timeout_ms;
        let expired: Vec<(Node, SessionId)> =
            self.volatile.idle_in_transaction.iter().filter(|(_, at)| **at <= now).map(|(id, _)| *id).collect();
        for (client, session) in expired {
            self.volatile.idle_in_transaction.remove(&(client, session));
            let xid = self.block(client, session).and_then(|block| block.xid);
            ctx.observe(Observation::SessionTerminated { server: self.node, client, xid, idle_ms: timeout_ms });
            self.close_session(ctx, client, session);
            ctx.send(
                client,
                Msg::SqlReply { session, reply: SqlReply::Error(IDLE_IN_TRANSACTION_TIMEOUT_ERROR.into()) },
            );
        }
        if let Some(next) = self.volatile.idle_in_transaction.values().min() {
            ctx.set_timer(Timer::IdleInTransactionTimeout, next.saturating_sub(now));
        }
    }
}
