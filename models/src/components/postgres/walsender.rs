//! Replication sessions: walsenders and what they decode (slot creation is `creation.rs`).

use super::decode::{DecodeContext, Decoded};
use super::*;

/// What the client of a walsender ended by `wal_sender_timeout` reads.
pub const WAL_SENDER_TIMEOUT_ERROR: &str = "FATAL: terminating walsender process due to replication timeout";

/// What a walsender's output plugin is asked to send: pgoutput's `publication_names` and
/// `messages` options.
pub(super) struct Output {
    pub publication: String,
    pub messages: bool,
}

impl Postgres {
    /// Every walsender decodes what it may.
    pub(super) fn pump_walsenders(&mut self, ctx: &mut Ctx) {
        let sessions: Vec<(Node, SessionId)> = self
            .volatile
            .sessions
            .iter()
            .filter(|(_, session)| matches!(***session, Session::Replication { walsender: Some(_), .. }))
            .map(|(id, _)| *id)
            .collect();
        for (client, session) in sessions {
            self.pump_walsender(ctx, client, session);
        }
    }

    // ----- replication -----

    pub(super) fn start_replication(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        slot_name: String,
        requested: Lsn,
        output: Output,
    ) -> Option<ReplReply> {
        let Output { publication, messages } = output;
        if self.durable.role == Role::Standby {
            return Some(ReplReply::Error("ERROR: logical decoding cannot be used while in recovery".into()));
        }
        if !self.durable.publications.contains_key(&publication) {
            return Some(ReplReply::Error(format!("ERROR: publication \"{publication}\" does not exist")));
        }
        let Some(slot) = self.durable.slots.get_mut().get_mut(&slot_name) else {
            return Some(ReplReply::Error(format!("ERROR: replication slot \"{slot_name}\" does not exist")));
        };
        if let Some((holder, _)) = slot.active
            && slot.active != Some((client, session))
        {
            return Some(ReplReply::Error(format!(
                "ERROR: replication slot \"{slot_name}\" is active for PID of {holder}"
            )));
        }
        if slot.is_invalidated() {
            return Some(ReplReply::Error(format!(
                "ERROR: cannot read from logical replication slot \"{slot_name}\" DETAIL: This slot has been \
                 invalidated because it exceeded the maximum reserved size."
            )));
        }
        slot.active = Some((client, session));
        let start = slot.effective_start(requested);
        let restart_lsn = slot.current.restart_lsn;
        ctx.observe(Observation::StreamStarted {
            server: self.node,
            client,
            slot: slot_name.clone(),
            requested,
            confirmed_flush: slot.current.confirmed_flush,
            start,
            restart_lsn,
        });
        // Decoding always reads from restart_lsn.
        let next_entry = self.durable.wal.first_entry_at_or_after(restart_lsn);
        if let Some(Session::Replication { exported_snapshot, walsender }) =
            self.volatile.sessions.get_mut(&(client, session)).map(CopyOnWrite::get_mut)
        {
            // The exported snapshot dies with the session's next command.
            *exported_snapshot = None;
            *walsender = Some(Walsender {
                slot: slot_name,
                start,
                publication,
                messages,
                read_from: restart_lsn,
                buffer: Default::default(),
                next_entry,
                client_flush: Lsn::INVALID,
                keepalive_sent: Lsn::INVALID,
            });
        }
        ctx.send(client, Msg::ReplReply { session, reply: ReplReply::StreamingStarted });
        self.pump_walsender(ctx, client, session);
        None
    }

    /// Decodes WAL for one walsender up to the flush pointer and sends what it emits.
    pub(super) fn pump_walsender(&mut self, ctx: &mut Ctx, client: Node, session: SessionId) {
        let entries = self.durable.wal.entries.len();
        let Some(shared) = self.volatile.sessions.get_mut(&(client, session)) else { return };
        if !matches!(&**shared, Session::Replication { walsender: Some(walsender), .. } if walsender.next_entry < entries)
        {
            return;
        }
        let Session::Replication { walsender: Some(walsender), .. } = shared.get_mut() else {
            return;
        };
        let entries = &self.durable.wal.entries;
        let Some(slot) = self.durable.slots.get(&walsender.slot) else {
            return;
        };
        // `synchronized_standby_slots` (`WalSndWaitForStandbyConfirmation`, `walsender.c`): a failover slot's walsender waits for the standby
        // to flush what it would send. Only the original primary lists a standby.
        let wait_for_standby = self.config.synchronized_standby_slots && slot.failover && self.node == Node::Pg1;
        let slot_database = slot.database.clone();
        let cx = DecodeContext {
            config: &self.config,
            publications: &self.durable.publications,
            publication: &walsender.publication,
            slot_database: slot_database.as_deref(),
            start: walsender.start,
            messages: walsender.messages,
            wal: &self.durable.wal,
            read_from: walsender.read_from,
            creation_consistent_at: slot.creation_consistent_at,
        };
        // `WalSndWaitForWal`: a logical walsender reads up to the flush pointer.
        let flushed = self.durable.wal.flush_lsn();
        while walsender.next_entry < entries.len() {
            if entries[walsender.next_entry].end() > flushed {
                break;
            }
            if wait_for_standby && entries[walsender.next_entry].end() > self.volatile.standby_flushed {
                return;
            }
            match walsender.buffer.decode(&cx, &entries[walsender.next_entry]) {
                Decoded::Txn(decoded) => {
                    ctx.send(client, Msg::ReplReply { session, reply: ReplReply::XLogData(decoded) });
                }
                Decoded::Message(message) => {
                    ctx.send(client, Msg::ReplReply { session, reply: ReplReply::Message(message) });
                }
                Decoded::RunningXacts { rx, restart, catalog_xmin } => {
                    let slot = self.durable.slots.get_mut().get_mut(&walsender.slot).expect("the slot exists");
                    let result = slot.process_running_xacts(rx, restart, catalog_xmin);
                    observe_restart_advance(ctx, self.node, slot, result);
                }
                Decoded::Nothing => {}
            }
            walsender.next_entry += 1;
        }
        // Caught up (`WalSndWaitForWal`): while the client's reported flush is behind what was
        // sent, a keep-alive carries `sentPtr`, the end of the WAL read, other databases' WAL
        // included (`WalSndKeepalive`, `walsender.c`). One per position here.
        let sent = flushed;
        if self.config.walsender_keepalives && walsender.client_flush < sent && walsender.keepalive_sent < sent {
            walsender.keepalive_sent = sent;
            ctx.send(client, Msg::ReplReply { session, reply: ReplReply::Keepalive { wal_end: sent } });
        }
    }

    /// `WalSndCheckTimeOut` (`walsender.c`): a walsender whose client has not replied for
    /// `wal_sender_timeout` exits with "terminating walsender process due to replication
    /// timeout"; its slot is released (`ReplicationSlotRelease` at exit). The client reads the
    /// connection's end as an error on its stream. Nothing happens when the timeout is off or
    /// the client has no walsender streaming here.
    pub(super) fn wal_sender_timeout(&mut self, ctx: &mut Ctx, client: Node) {
        let timeout_ms = self.config.wal_sender_timeout_ms;
        if timeout_ms == 0 {
            return;
        }
        let streaming: Vec<(SessionId, String)> = self
            .volatile
            .sessions
            .iter()
            .filter(|((owner, _), _)| *owner == client)
            .filter_map(|((_, session), state)| match &**state {
                Session::Replication { walsender: Some(walsender), .. } => Some((*session, walsender.slot.clone())),
                _ => None,
            })
            .collect();
        for (session, slot) in streaming {
            ctx.observe(Observation::WalSenderTimedOut { server: self.node, client, slot, timeout_ms });
            self.close_session(ctx, client, session);
            ctx.send(client, Msg::ReplReply { session, reply: ReplReply::Error(WAL_SENDER_TIMEOUT_ERROR.into()) });
        }
    }

    pub(super) fn status_update(&mut self, ctx: &mut Ctx, client: Node, session: SessionId, flush: Lsn) {
        let Some(shared) = self.volatile.sessions.get_mut(&(client, session)) else { return };
        let Session::Replication { walsender: Some(walsender), .. } = &**shared else { return };
        // Tracked only for keep-alives: writing it copies the session, on every status update.
        if self.config.walsender_keepalives
            && walsender.client_flush != flush
            && let Session::Replication { walsender: Some(walsender), .. } = shared.get_mut()
        {
            walsender.client_flush = flush;
        }
        let Session::Replication { walsender: Some(walsender), .. } = &**shared else { return };
        let Some(slot) = self.durable.slots.get_mut().get_mut(&walsender.slot) else {
            return;
        };
        let result = slot.confirm(flush);
        if let Some((from, to)) = result.moved {
            ctx.observe(Observation::SlotConfirmed {
                server: self.node,
                slot: slot.name.clone(),
                from,
                to,
                by: client,
            });
        }
        observe_restart_advance(ctx, self.node, slot, result);
    }

    pub(super) fn close_session(&mut self, ctx: &mut Ctx, client: Node, session: SessionId) {
        self.drop_creation_of(client, session);
        self.end_session_block(ctx, client, session);
        if let Some(removed) = self.volatile.sessions.remove(&(client, session)) {
            match *removed {
                Session::Sql { scan: Some(_), .. } => {
                    ctx.cancel_timer(Timer::ScanBatch { client });
                    // Another scan of the client waiting its turn has it now.
                    if let Some(next) = self.scanning_session(client)
                        && let Some(state) = self.volatile.sessions.get(&(client, next))
                        && let Session::Sql { scan: Some(scan), .. } = &**state
                    {
                        ctx.set_timer(Timer::ScanBatch { client }, self.batch_time_ms(scan));
                    }
                }
                Session::Replication { walsender: Some(_), .. } => {
                    let released = |slot: &Slot| slot.active == Some((client, session));
                    if self.durable.slots.values().any(released) {
                        for slot in self.durable.slots.get_mut().values_mut().filter(|slot| released(slot)) {
                            slot.active = None;
                        }
                    }
                }
                _ => {}
            }
        }
    }
}
