//! The replication stream (`PostgresStreamingChangeEventSource.execute`): its start, the restart
//! filter (`WalPositionLocator`), the decoded transactions, heartbeats and pgjdbc's keep-alive rule.

use super::*;

impl DebeziumTask {
    pub(super) fn start_streaming(&mut self, ctx: &mut Ctx) -> TaskEvent {
        // Requested start: lsn_proc if stored, else lsn, else the slot's own position (0/0).
        let start = self.offset.resume_lsn().unwrap_or(Lsn::INVALID);
        // The search for already-processed events runs only when lsn_proc is stored.
        self.skip_upto = self.offset.lsn_proc;
        // `WalPositionLocator`'s false-match guard (debezium-connector-postgres#76, in 3.7): when
        // the stored event was a COMMIT (`messageType`), a DML arriving at its LSN is new: the
        // next WAL record starts where the commit record ends, so the next transaction's first
        // change can carry the stored lsn_proc. Before, the locator took it for a replay.
        self.skip_stored_commit = self.config.version >= (3, 7)
            && self.offset.lsn_proc.is_some()
            && self.offset.message_type == Some(MessageType::Commit);
        // Streaming offsets carry no snapshot keys.
        self.offset.snapshot = None;
        self.offset.last_snapshot_record = false;
        self.offset.snapshot_completed = false;
        self.lsn_flushing_allowed = false;
        self.phase = Phase::StartingStream;
        ctx.observe(Observation::StreamingRequested { start, skip_processed_upto: self.skip_upto });
        let (slot, publication) = (self.config.slot_name.clone(), self.config.publication_name.clone());
        // `messages=true` on PostgreSQL ≥ 14 (`PgOutputMessageDecoder.defaultOptions`); every
        // modelled server is 15 or later.
        self.repl(ctx, ReplRequest::StartReplication { slot, start, publication, messages: true });
        TaskEvent::None
    }

    pub(super) fn on_repl_reply(&mut self, ctx: &mut Ctx, reply: ReplReply) -> TaskEvent {
        match (&self.phase, reply) {
            (_, ReplReply::Error(error)) => self.retriable(ctx, format!("org.postgresql.util.PSQLException: {error}")),
            (Phase::CreatingSlot, ReplReply::SlotCreated { consistent_point, snapshot_name }) => {
                self.slot_created = Some(CopyOnWrite::new((consistent_point, snapshot_name)));
                self.decide_snapshot(ctx)
            }
            (Phase::StartingStream, ReplReply::StreamingStarted) => {
                self.phase = Phase::Streaming;
                match self.config.effective_heartbeat_interval_ms() {
                    0 => TaskEvent::None,
                    interval_ms => TaskEvent::HeartbeatEvery(interval_ms),
                }
            }
            (Phase::Streaming, ReplReply::XLogData(txn)) => {
                self.lsn_flushing_allowed = true;
                self.last_data_start = txn.end_lsn;
                self.process_transaction(txn);
                TaskEvent::None
            }
            (Phase::Streaming, ReplReply::Keepalive { wal_end }) => {
                self.on_keepalive(ctx, wal_end);
                TaskEvent::None
            }
            _ => TaskEvent::None,
        }
    }

    /// A heartbeat (`io.debezium.heartbeat.HeartbeatImpl`): a record on the heartbeat topic
    /// carrying the current offset, so that Connect stores it (and the slot is confirmed to it)
    /// though no change record was produced; and the `heartbeat.action.query`, on a connection of
    /// its own, whose write in a published table gives a quiet database a commit to process.
    pub fn on_heartbeat(&mut self, ctx: &mut Ctx) -> bool {
        if !self.is_streaming() {
            return false;
        }
        if self.offset.lsn_to_confirm().is_some() {
            let record = SourceRecord { topic: Topic::Heartbeat, key: 0, value: None, offset: self.offset };
            self.queue.get_mut().push(record);
        }
        if let Some(table) = self.config.heartbeat_action_table {
            let session = match self.heartbeat_session {
                Some(session) => session,
                None => {
                    let session = self.new_session();
                    self.heartbeat_session = Some(session);
                    session
                }
            };
            let ops = vec![RowOp::Update { table, key: 1, status: crate::core::ids::Status::Assessed }];
            ctx.send(Node::Postgres, Msg::Sql { session, request: SqlRequest::Transaction { ops } });
        }
        let lsn = self.offset.lsn_to_confirm();
        ctx.observe(Observation::Heartbeat { lsn, action_query: self.config.heartbeat_action_table.is_some() });
        true
    }

    /// pgjdbc's keep-alive rule (`V3PGReplicationStream.processKeepAliveMessage`, pgjdbc ≥ 42.7.0),
    /// on with `lsn.flush.mode=connector_and_driver`: when the last LSN Debezium confirmed
    /// explicitly is at or past the start of the last data message, a keep-alive LSN beyond both
    /// the explicit and the driver's flush position is confirmed. It moves the slot past
    /// Debezium's stored offset: Debezium never stores the keep-alive LSN.
    fn on_keepalive(&mut self, ctx: &mut Ctx, wal_end: Lsn) {
        if self.config.lsn_flush_mode != LsnFlushMode::ConnectorAndDriver {
            return;
        }
        if self.last_flushed >= self.last_data_start && wal_end > self.last_flushed && wal_end > self.driver_flushed {
            self.driver_flushed = wal_end;
            ctx.observe(Observation::KeepaliveConfirmed { lsn: wal_end });
            self.repl(ctx, ReplRequest::StatusUpdate { flush: wal_end });
        }
    }

    /// `processReplicationMessages` for one transaction: BEGIN, each change, COMMIT.
    pub(super) fn process_transaction(&mut self, txn: DecodedTxn) {
        // BEGIN: position only.
        self.offset.tx_id = Some(txn.xid);
        for change in &txn.changes {
            let replayed = |upto: Lsn| change.lsn < upto || (change.lsn == upto && !self.skip_stored_commit);
            if self.skip_upto.is_some_and(replayed) {
                // Already processed before the restart: filtered out by the position locator.
                continue;
            }
            self.skip_upto = None;
            self.offset.lsn = Some(change.lsn);
            self.offset.lsn_proc = Some(change.lsn);
            self.offset.ts_usec = txn.commit_time.ms() * 1000;
            self.offset.message_type = Some(match change.kind {
                ChangeKind::Insert { .. } => MessageType::Insert,
                ChangeKind::Update { .. } => MessageType::Update,
                ChangeKind::Delete { .. } => MessageType::Delete,
            });
            if !self.config.tables.contains(&change.table) {
                continue; // a filtered table moves the offset but emits nothing
            }
            let (op, before, after) = match change.kind {
                ChangeKind::Insert { after } => (Op::Create, None, Some(after)),
                ChangeKind::Update { before, after } => (Op::Update, before, Some(after)),
                ChangeKind::Delete { before } => (Op::Delete, before, None),
            };
            let value = ChangeEvent {
                op,
                before,
                after,
                source: SourceInfo {
                    connector: Origin::Postgresql,
                    table: change.table,
                    lsn: change.lsn,
                    tx_id: Some(txn.xid),
                    snapshot: SnapshotMarker::Streamed,
                    ts_ms: txn.commit_time.ms(),
                },
            };
            let topic = Topic::Change(change.table);
            self.queue.get_mut().push(SourceRecord { topic, key: change.key, value: Some(value), offset: self.offset });
            if op == Op::Delete && self.config.tombstones_on_delete {
                self.queue.get_mut().push(SourceRecord { topic, key: change.key, value: None, offset: self.offset });
            }
        }
        // COMMIT: lsn_commit = lsn_proc = the commit's end.
        self.skip_upto = self.skip_upto.filter(|upto| *upto > txn.end_lsn);
        self.offset.lsn = Some(txn.end_lsn);
        self.offset.lsn_proc = Some(txn.end_lsn);
        self.offset.lsn_commit = Some(txn.end_lsn);
        self.offset.message_type = Some(MessageType::Commit);
    }

    /// The last LSN the task has completely processed on its current stream.
    pub fn processed_upto(&self) -> Option<Lsn> {
        if self.is_streaming() { self.offset.lsn_proc.or(self.offset.lsn) } else { None }
    }
}
