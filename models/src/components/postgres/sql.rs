//! SQL sessions: transactions, snapshot scans and the slot functions.

use super::*;

impl Postgres {
    // ----- transactions -----

    pub(super) fn execute(&mut self, ctx: &mut Ctx, ops: &[RowOp]) -> SqlReply {
        if self.durable.role == Role::Standby {
            return SqlReply::Error("ERROR: cannot execute INSERT in a read-only transaction".into());
        }
        // Work out the changes against the current state first: an error aborts everything.
        let mut pending: Vec<(TableId, Key, ChangeKind)> = Vec::new();
        let mut staged: BTreeMap<(TableId, Key), Option<Row>> = BTreeMap::new();
        for op in ops {
            let (table, key) = match *op {
                RowOp::Insert { table, key, .. } | RowOp::Update { table, key, .. } | RowOp::Delete { table, key } => {
                    (table, key)
                }
            };
            let current = match staged.get(&(table, key)) {
                Some(row) => *row,
                None => self.table(table).current(key),
            };
            let identity = self.table(table).replica_identity;
            let kind = match *op {
                RowOp::Insert { status, amount_cents, .. } => {
                    if current.is_some() {
                        let name = &self.config.tables[usize::from(table.0)].name;
                        let relation = name.rsplit('.').next().unwrap_or(name);
                        return SqlReply::Error(format!(
                            "ERROR: duplicate key value violates unique constraint \"{relation}_pkey\" DETAIL: Key \
                             (id)=({key}) already exists."
                        ));
                    }
                    Some(ChangeKind::Insert { after: Row { version: 1, status, amount_cents } })
                }
                RowOp::Update { status, .. } => current.map(|old| ChangeKind::Update {
                    before: (identity == ReplicaIdentity::Full).then_some(old),
                    after: Row { version: old.version + 1, status, ..old },
                }),
                RowOp::Delete { .. } => {
                    current.map(|old| ChangeKind::Delete { before: (identity == ReplicaIdentity::Full).then_some(old) })
                }
            };
            if let Some(kind) = kind {
                staged.insert((table, key), kind.after());
                pending.push((table, key, kind));
            }
        }
        if pending.is_empty() {
            // No row changed: no xid was assigned and nothing is written.
            return SqlReply::NothingChanged { ops: ops.to_vec() };
        }
        let xid = self.durable.next_xid;
        self.durable.next_xid += 1;
        let mut changes = Vec::with_capacity(pending.len());
        let write_before = self.durable.wal.write_lsn();
        let mut first_lsn = None;
        for (table, key, kind) in pending {
            let len = match kind {
                ChangeKind::Insert { after } => record_size::heap_insert(after.tuple_data_bytes()),
                ChangeKind::Update { before, after } => {
                    record_size::heap_update(after.tuple_data_bytes(), before.map(|row| row.tuple_data_bytes()))
                }
                // Without a full replica identity only the 8-byte key is logged.
                ChangeKind::Delete { before } => {
                    record_size::heap_delete(before.map_or(8, |row| row.tuple_data_bytes()))
                }
            };
            let (lsn, _) = self.durable.wal.get_mut().insert_record(len);
            first_lsn.get_or_insert(lsn);
            changes.push(Change { lsn, table, key, kind });
        }
        let (commit_lsn, end_lsn) = self.durable.wal.get_mut().insert_record(record_size::COMMIT);
        self.durable.csn += 1;
        let csn = self.durable.csn;
        for change in &changes {
            self.durable.tables.get_mut()[usize::from(change.table.0)].apply(&change.kind, change.key, csn);
        }
        let txn = CopyOnWrite::new(CommittedTxn {
            xid,
            csn,
            first_lsn: first_lsn.unwrap_or(commit_lsn),
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

    // ----- SQL -----

    pub(super) fn sql(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        request: SqlRequest,
    ) -> Option<SqlReply> {
        // A one-statement transaction keeps nothing in its session (autocommit); other requests
        // open one.
        if !matches!(request, SqlRequest::Transaction { .. }) {
            self.volatile
                .sessions
                .entry((client, session))
                .or_insert_with(|| CopyOnWrite::new(Session::Sql { scan: None }));
        }
        Some(match request {
            SqlRequest::Transaction { ops } => self.execute(ctx, &ops),
            SqlRequest::CurrentWalLsn => {
                if self.durable.role == Role::Standby {
                    SqlReply::Error("ERROR: recovery is in progress".into())
                } else {
                    SqlReply::Lsn(self.current_wal_lsn())
                }
            }
            SqlRequest::SlotInfo { slot } => SqlReply::Slot(self.durable.slots.get(&slot).map(|s| self.slot_row(s))),
            SqlRequest::EnsurePublication { name } => {
                if self.durable.role == Role::Standby {
                    SqlReply::Error("ERROR: cannot execute CREATE PUBLICATION in a read-only transaction".into())
                } else {
                    if !self.durable.publications.contains_key(&name) {
                        self.durable.publications.get_mut().insert(name, None);
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
            SqlRequest::CreateSlot { slot, plugin, database } => {
                match self.create_slot(ctx, client, session, slot, plugin, database) {
                    ReplReply::SlotCreated { consistent_point, .. } => SqlReply::Lsn(consistent_point),
                    ReplReply::Error(error) => SqlReply::Error(error),
                    _ => SqlReply::Error("ERROR: unexpected".into()),
                }
            }
            SqlRequest::EmitMessage { transactional, prefix, payload_bytes } => {
                self.emit_message(ctx, transactional, &prefix, payload_bytes)
            }
            SqlRequest::SwitchWal => self.switch_wal(ctx),
            SqlRequest::GetChanges { slot, publication } => {
                self.logical_slot_changes(ctx, client, &slot, &publication, true)
            }
            SqlRequest::PeekChanges { slot, publication } => {
                self.logical_slot_changes(ctx, client, &slot, &publication, false)
            }
            SqlRequest::AdvanceSlot { slot, to } => self.replication_slot_advance(ctx, client, &slot, to),
            SqlRequest::ReplicationSlots => SqlReply::ReplicationSlots(self.replication_slots()),
            SqlRequest::TimelineInfo => SqlReply::Timeline {
                timeline: self.durable.timeline,
                in_recovery: self.durable.role == Role::Standby,
                switch_lsn: self.durable.switch_lsn,
                current_lsn: self.current_wal_lsn(),
            },
            SqlRequest::ScanTable { table, exported_snapshot, fetch_size } => {
                return self.start_scan(ctx, client, session, table, exported_snapshot, fetch_size);
            }
            SqlRequest::Close => {
                self.close_session(ctx, client, session);
                return None;
            }
            // Issue 18 (in progress): transaction blocks.
            SqlRequest::Begin { .. }
            | SqlRequest::Statement { .. }
            | SqlRequest::Commit
            | SqlRequest::Rollback
            | SqlRequest::Select { .. }
            | SqlRequest::ImportSnapshot { .. }
            | SqlRequest::CurrentSnapshot => SqlReply::Error("ERROR: not supported by the model yet".into()),
        })
    }

    pub(super) fn start_scan(
        &mut self,
        ctx: &mut Ctx,
        client: Node,
        session: SessionId,
        table: TableId,
        exported: Option<String>,
        fetch_size: u32,
    ) -> Option<SqlReply> {
        let (snapshot_csn, snapshot) = match exported {
            Some(name) => {
                let found = self.volatile.sessions.iter().find_map(|((owner, _), other)| match &**other {
                    Session::Replication { exported_snapshot: Some((exported, csn)), .. }
                        if *owner == client && *exported == name =>
                    {
                        Some(*csn)
                    }
                    _ => None,
                });
                match found {
                    Some(csn) => (csn, ScanSnapshot::Exported { name }),
                    None => return Some(SqlReply::Error(format!("ERROR: invalid snapshot identifier: \"{name}\""))),
                }
            }
            None => (self.durable.csn, ScanSnapshot::Statement),
        };
        let rows = self.table(table).scan(snapshot_csn);
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
        self.volatile.sessions.insert((client, session), CopyOnWrite::new(Session::Sql { scan: Some(scan) }));
        ctx.set_timer(Timer::ScanBatch { client }, delay);
        None
    }

    pub(super) fn batch_time_ms(&self, scan: &Scan) -> u64 {
        batch_time_ms(scan, self.config.scan_rows_per_second)
    }

    pub(super) fn next_scan_batch(&mut self, ctx: &mut Ctx, client: Node) {
        let found = self.volatile.sessions.iter_mut().find_map(|((owner, session), state)| match &**state {
            Session::Sql { scan: Some(_) } if *owner == client => match state.get_mut() {
                Session::Sql { scan: Some(scan) } => Some((*session, scan)),
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
            // The cursor is exhausted; the session stays open.
            self.volatile.sessions.insert((client, session), CopyOnWrite::new(Session::Sql { scan: None }));
        } else {
            ctx.set_timer(Timer::ScanBatch { client }, batch_time_ms(scan, self.config.scan_rows_per_second));
        }
        ctx.send(client, Msg::SqlReply { session, reply: SqlReply::Rows { table, rows, done } });
    }
}
