//! SQL sessions: transactions, snapshot scans and the slot functions.

use super::xact::ChunkRange;
use super::*;

impl Postgres {
    // ----- transactions -----

    /// An autocommit transaction, atomic: its change records and its commit in one step, one
    /// [`WalEntry::Txn`] (see `xact.rs` for transaction blocks).
    pub(super) fn execute(&mut self, ctx: &mut Ctx, ops: &[RowOp], copy: bool) -> SqlReply {
        if self.durable.role == Role::Standby {
            return SqlReply::Error("ERROR: cannot execute INSERT in a read-only transaction".into());
        }
        // Work out the changes against the current state first: an error aborts everything.
        let pending = match self.plan(ops, &BTreeMap::new(), None) {
            Ok(pending) => pending,
            Err(error) => return SqlReply::Error(error),
        };
        if pending.is_empty() {
            // No row changed: no xid was assigned and nothing is written.
            return SqlReply::NothingChanged { ops: ops.to_vec() };
        }
        let xid = self.durable.next_xid;
        self.durable.next_xid += 1;
        let write_before = self.durable.wal.write_lsn();
        let changes: Vec<Change> = if copy {
            self.insert_change_records(pending, true).into_iter().flat_map(|(_, _, changes)| changes).collect()
        } else {
            let mut changes = Vec::with_capacity(pending.len());
            for (table, key, kind) in pending {
                let (lsn, _) = self.durable.wal.get_mut().insert_record(xact::change_record_len(&kind));
                changes.push(Change { lsn, table, key, kind });
            }
            changes
        };
        let first_lsn = changes[0].lsn;
        let (commit_lsn, end_lsn) = self.durable.wal.get_mut().insert_record(record_size::COMMIT);
        self.durable.csn += 1;
        let csn = self.durable.csn;
        for change in &changes {
            self.durable.tables.get_mut()[usize::from(change.table.0)].apply(&change.kind, change.key, csn);
        }
        let txn = CopyOnWrite::new(CommittedTxn {
            xid,
            csn,
            first_lsn,
            commit_lsn,
            end_lsn,
            commit_time: ctx.now,
            timeline: self.durable.timeline,
            changes: changes.clone(),
        });
        self.durable.wal.get_mut().push(WalEntry::Txn(txn.clone()));
        ctx.observe(Observation::Committed { server: self.node, txn: crate::core::shared::ByContent(txn) });
        self.after_wal_append(ctx);
        self.after_segments_written(ctx, write_before);
        SqlReply::Committed { xid, commit_lsn, end_lsn, changes }
    }

    /// The autocommit [`SqlRequest::OutboxMessage`], atomic: the statement's change records,
    /// the message record and the commit record in one step (`BEGIN; UPDATE …; SELECT
    /// pg_logical_emit_message(…); COMMIT` with nothing in between), as a transaction block
    /// writes them ([`WalEntry::Changes`], [`WalEntry::Message`], [`WalEntry::Commit`], decoded
    /// through the reorder buffer). The xid comes from the first changed row or a transactional
    /// message; a non-transactional message carries it if there is one (as in a block). A
    /// transaction with no changed row commits without a csn (nothing becomes visible), as a
    /// transactional `pg_logical_emit_message` alone does; a non-transactional message with no
    /// changed row is the message alone, not flushed.
    pub(super) fn execute_outbox_message(
        &mut self,
        ctx: &mut Ctx,
        ops: &[RowOp],
        transactional: bool,
        prefix: String,
        payload_bytes: u64,
        event: crate::core::ids::MessageEvent,
    ) -> SqlReply {
        if self.durable.role == Role::Standby {
            return SqlReply::Error("ERROR: cannot execute UPDATE in a read-only transaction".into());
        }
        let pending = match self.plan(ops, &BTreeMap::new(), None) {
            Ok(pending) => pending,
            Err(error) => return SqlReply::Error(error),
        };
        let write_before = self.durable.wal.write_lsn();
        let xid = (!pending.is_empty() || transactional).then(|| {
            self.durable.next_xid += 1;
            self.durable.next_xid - 1
        });
        let mut changes = Vec::with_capacity(pending.len());
        for (start, end, record) in self.insert_change_records(pending, false) {
            changes.extend_from_slice(&record);
            let xid = xid.expect("a changed row has an xid");
            self.durable.wal.get_mut().push(WalEntry::Changes { xid, start, end, changes: record });
        }
        let content = MessageContent::Event(event);
        // Its transaction commits in this step: the commit's observation says so when it
        // changed a row, and a transactional message alone is committed with its message.
        let committed = transactional && changes.is_empty();
        let message =
            super::functions::LoggedMessage { xid, transactional, prefix, payload_bytes, database: None, content };
        let (start, message_end) = self.log_message(ctx, message, committed);
        let Some(xid) = xid else {
            // A non-transactional message alone: no transaction to commit.
            self.arm_wal_writer(ctx);
            self.after_wal_append(ctx);
            self.after_segments_written(ctx, write_before);
            return SqlReply::Lsn(message_end);
        };
        let (commit_lsn, end_lsn) = self.durable.wal.get_mut().insert_record(record_size::COMMIT);
        if !changes.is_empty() {
            self.durable.csn += 1;
        }
        let csn = self.durable.csn;
        for change in &changes {
            self.durable.tables.get_mut()[usize::from(change.table.0)].apply(&change.kind, change.key, csn);
        }
        let txn = CopyOnWrite::new(CommittedTxn {
            xid,
            csn,
            first_lsn: changes.first().map_or(start, |change| change.lsn),
            commit_lsn,
            end_lsn,
            commit_time: ctx.now,
            timeline: self.durable.timeline,
            changes: changes.clone(),
        });
        self.durable.wal.get_mut().push(WalEntry::Commit(txn.clone()));
        self.after_wal_append(ctx);
        self.after_segments_written(ctx, write_before);
        if changes.is_empty() {
            return SqlReply::Lsn(message_end);
        }
        ctx.observe(Observation::Committed { server: self.node, txn: crate::core::shared::ByContent(txn) });
        SqlReply::Committed { xid, commit_lsn, end_lsn, changes }
    }

    // ----- SQL -----

    pub(super) fn sql(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        request: SqlRequest,
    ) -> Option<SqlReply> {
        // A one-statement transaction keeps nothing in its session (autocommit), nor does an
        // outbox message outside a block; other requests open one.
        let autocommit = match request {
            SqlRequest::Transaction { .. } => true,
            SqlRequest::OutboxMessage { .. } => !self.in_block(client, session),
            _ => false,
        };
        if !autocommit {
            self.volatile
                .sessions
                .entry((client, session))
                .or_insert_with(|| CopyOnWrite::new(Session::Sql { scan: None, block: None, parked: None }));
        }
        Some(match request {
            SqlRequest::Transaction { .. } => return self.autocommit(ctx, client, session, request),
            SqlRequest::Begin { isolation } => self.begin(client, session, isolation),
            SqlRequest::Statement { ops, copy } => return self.statement(ctx, client, session, ops, copy),
            SqlRequest::Commit => return self.commit(ctx, client, session),
            SqlRequest::Rollback => self.rollback(ctx, client, session),
            SqlRequest::Select { table } => self.select(client, session, table),
            SqlRequest::SelectRange { table, after, upto, limit, descending, filter, order_by, per_column, nulls } => {
                let range = ChunkRange { after, upto, order_by, per_column, nulls };
                let reply = self.select_range(client, session, table, range, (limit, descending), filter.as_deref());
                self.observe_missed_commits(ctx, client, session, range, (limit, descending), &reply);
                reply
            }
            SqlRequest::CurrentWalLsn => {
                if self.durable.role == Role::Standby {
                    SqlReply::Error("ERROR: recovery is in progress".into())
                } else {
                    SqlReply::Lsn(self.current_wal_lsn())
                }
            }
            SqlRequest::SlotInfo { slot } => SqlReply::Slot(self.durable.slots.get(&slot).map(|s| self.slot_row(s))),
            SqlRequest::EnsurePublication { name, tables } => {
                if self.durable.role == Role::Standby {
                    SqlReply::Error("ERROR: cannot execute CREATE PUBLICATION in a read-only transaction".into())
                } else {
                    match tables {
                        // FOR ALL TABLES when it does not exist; an existing one as it is.
                        None => {
                            if !self.durable.publications.contains_key(&name) {
                                self.durable.publications.get_mut().insert(name, Publication::created(None));
                            }
                        }
                        // FOR TABLE …, or ALTER PUBLICATION … SET TABLE ….
                        Some(tables) => {
                            let set: std::collections::BTreeSet<TableId> = tables.into_iter().collect();
                            let at = self.durable.wal.insert_lsn();
                            match self.durable.publications.get(&name) {
                                None => {
                                    self.durable.publications.get_mut().insert(name, Publication::created(Some(set)));
                                }
                                Some(existing) if existing.current() != Some(&set) => {
                                    if let Some(publication) = self.durable.publications.get_mut().get_mut(&name) {
                                        publication.set(at, set);
                                    }
                                }
                                Some(_) => {}
                            }
                        }
                    }
                    SqlReply::Ok
                }
            }
            SqlRequest::DropSlot { slot } => match self.durable.slots.get(&slot) {
                None => SqlReply::Error(format!("ERROR: replication slot \"{slot}\" does not exist")),
                Some(existing) if existing.active.is_some() => {
                    SqlReply::Error(format!("ERROR: replication slot \"{slot}\" is active"))
                }
                Some(_) => {
                    self.durable.slots.get_mut().remove(&slot);
                    ctx.observe(Observation::SlotDropped { server: self.node, slot });
                    SqlReply::Ok
                }
            },
            SqlRequest::CreateSlot { .. } if self.block(client, session).is_some_and(|block| block.xid.is_some()) => {
                // `CreateInitDecodingContext`: the creation would wait for its own xid.
                SqlReply::Error(
                    "ERROR: cannot create logical replication slot in transaction that has performed writes".into(),
                )
            }
            SqlRequest::CreateSlot { slot, plugin, database } => {
                let via = creation::CreateVia::Sql;
                return self
                    .create_slot(ctx, client, session, slot, plugin, database, via)
                    .map(creation::creation_sql_reply);
            }
            SqlRequest::EmitMessage { transactional, prefix, payload_bytes } => {
                let message = super::functions::LogicalMessage {
                    transactional,
                    prefix,
                    payload_bytes,
                    content: MessageContent::Opaque,
                };
                if self.in_block(client, session) {
                    self.block_message(ctx, client, session, message)
                } else {
                    self.emit_message(ctx, message)
                }
            }
            outbox @ SqlRequest::OutboxMessage { .. } => return self.outbox_message(ctx, client, session, outbox),
            SqlRequest::SwitchWal => self.switch_wal(ctx),
            SqlRequest::GetChanges { slot, publication } => self.slot_txns(ctx, client, &slot, &publication, true),
            SqlRequest::PeekChanges { slot, publication } => self.slot_txns(ctx, client, &slot, &publication, false),
            SqlRequest::SlotChanges { slot, publication, consume, messages } => {
                match self.logical_slot_changes(ctx, client, &slot, &publication, consume, messages) {
                    Ok(emitted) => SqlReply::Decoded(emitted),
                    Err(error) => error,
                }
            }
            SqlRequest::AdvanceSlot { slot, to } => self.replication_slot_advance(ctx, client, &slot, to),
            SqlRequest::ReplicationSlots => SqlReply::ReplicationSlots(self.replication_slots()),
            SqlRequest::TimelineInfo => SqlReply::Timeline {
                timeline: self.durable.timeline,
                in_recovery: self.durable.role == Role::Standby,
                switch_lsn: self.durable.switch_lsn,
                current_lsn: self.current_wal_lsn(),
            },
            SqlRequest::ScanTable { table, exported_snapshot, fetch_size, filter } => {
                if let Some(error) = filter.as_deref().and_then(super::xact::undefined_column_error) {
                    return Some(error);
                }
                return self.start_scan(ctx, client, session, table, (exported_snapshot, filter), fetch_size);
            }
            SqlRequest::Close => {
                self.close_session(ctx, client, session);
                return None;
            }
            SqlRequest::ImportSnapshot { name } => self.import_snapshot(client, session, &name),
            SqlRequest::CurrentSnapshot => match self.statement_snapshot(client, session) {
                Ok(snapshot) => SqlReply::Snapshot(snapshot.xids),
                Err(error) => SqlReply::Error(error),
            },
        })
    }

    pub(super) fn start_scan(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        table: TableId,
        (exported, filter): (Option<String>, Option<Box<crate::core::signal::RowFilter>>),
        fetch_size: u32,
    ) -> Option<SqlReply> {
        let (seen, snapshot) = match exported {
            Some(name) => {
                let found = self.volatile.sessions.iter().find_map(|((owner, _), other)| match &**other {
                    Session::Replication { exported_snapshot: Some(exported), .. }
                        if *owner == client && exported.name == name =>
                    {
                        Some(exported.snapshot.seen.clone())
                    }
                    _ => None,
                });
                match found {
                    Some(seen) => (seen, ScanSnapshot::Exported { name }),
                    None => return Some(SqlReply::Error(format!("ERROR: invalid snapshot identifier: \"{name}\""))),
                }
            }
            None => (self.take_snapshot(None).seen, ScanSnapshot::Statement),
        };
        let mut rows =
            if seen.except.is_empty() { self.table(table).scan(seen.upto) } else { self.table(table).scan_seen(&seen) };
        if let Some(filter) = filter {
            rows.retain(|(key, row)| filter.matches(*key, row));
        }
        // The observation's csn is the run's commits the snapshot sees from the first on: all of
        // them up to `upto`, but for a commit not yet visible.
        let snapshot_csn = seen.prefix();
        ctx.observe(Observation::ScanStarted {
            server: self.node,
            client,
            table,
            snapshot,
            snapshot_csn,
            wal_lsn: self.current_wal_lsn(),
            rows: rows.len(),
        });
        let scan = Scan { table, rows: CopyOnWrite::new(rows), position: 0, fetch_size: fetch_size.max(1) };
        let delay = self.batch_time_ms(&scan);
        // A client process with another scan under way (a Connect worker whose two connectors
        // snapshot at once) shares its batches' timer: its scans are served one after the other.
        self.set_scan(client, session, Some(scan));
        ctx.set_timer(Timer::ScanBatch { client }, delay);
        None
    }

    /// A session of `client` with a scan under way (the first, by session).
    pub(super) fn scanning_session(&self, client: Node) -> Option<SessionId> {
        self.volatile.sessions.iter().find_map(|((owner, session), state)| match &**state {
            Session::Sql { scan: Some(_), .. } if *owner == client => Some(*session),
            _ => None,
        })
    }

    /// `pg_logical_slot_get_changes` / `peek_changes` without pgoutput's `messages` option:
    /// the transactions.
    fn slot_txns(&mut self, ctx: &mut Ctx, client: Node, slot: &str, publication: &str, consume: bool) -> SqlReply {
        match self.logical_slot_changes(ctx, client, slot, publication, consume, false) {
            Ok(emitted) => SqlReply::Changes(
                emitted
                    .into_iter()
                    .filter_map(|item| match item {
                        ReplReply::XLogData(txn) => Some(txn),
                        _ => None,
                    })
                    .collect(),
            ),
            Err(error) => error,
        }
    }

    /// The session's cursor (the session keeps its transaction block).
    fn set_scan(&mut self, client: Node, session: SessionId, new: Option<Scan>) {
        let shared = self
            .volatile
            .sessions
            .entry((client, session))
            .or_insert_with(|| CopyOnWrite::new(Session::Sql { scan: None, block: None, parked: None }));
        if let Session::Sql { scan, .. } = shared.get_mut() {
            *scan = new;
        } else {
            *shared = CopyOnWrite::new(Session::Sql { scan: new, block: None, parked: None });
        }
    }

    pub(super) fn batch_time_ms(&self, scan: &Scan) -> u64 {
        batch_time_ms(scan, self.config.scan_rows_per_second)
    }

    pub(super) fn next_scan_batch(&mut self, ctx: &mut Ctx, client: Node) {
        let found = self.volatile.sessions.iter_mut().find_map(|((owner, session), state)| match &**state {
            Session::Sql { scan: Some(_), .. } if *owner == client => match state.get_mut() {
                Session::Sql { scan: Some(scan), .. } => Some((*session, scan)),
                _ => None,
            },
            _ => None,
        });
        let Some((session, scan)) = found else { return };
        let end = (scan.position + scan.fetch_size as usize).min(scan.rows.len());
        let rows = scan.rows[scan.position..end].to_vec();
        scan.position = end;
        let done = end == scan.rows.len();
        let table = scan.table;
        if done {
            // The cursor is exhausted; the session stays open. Another scan of the client, if
            // any, has its turn.
            self.set_scan(client, session, None);
            let next =
                self.scanning_session(client).and_then(|next| match self.volatile.sessions.get(&(client, next)) {
                    Some(state) => match &**state {
                        Session::Sql { scan: Some(scan), .. } => {
                            Some(batch_time_ms(scan, self.config.scan_rows_per_second))
                        }
                        _ => None,
                    },
                    None => None,
                });
            if let Some(delay) = next {
                ctx.set_timer(Timer::ScanBatch { client }, delay);
            }
        } else {
            ctx.set_timer(Timer::ScanBatch { client }, batch_time_ms(scan, self.config.scan_rows_per_second));
        }
        ctx.send(client, Msg::SqlReply { session, reply: SqlReply::Rows { table, rows, done } });
    }
}
