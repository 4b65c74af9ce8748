//! The replication stream (`PostgresStreamingChangeEventSource.execute`): its start, the restart
//! filter (`WalPositionLocator`), the decoded transactions, heartbeats and pgjdbc's keep-alive rule.

use super::*;

impl DebeziumTask {
    pub(super) fn start_streaming(&mut self, ctx: &mut Ctx) -> TaskEvent {
        // `init` of the incremental snapshot runs before the stream (`ChangeEventSourceCoordinator
        // .initStreamEvents`): a running one reads its next chunk first.
        if self.init_incremental(ctx) {
            return TaskEvent::None;
        }
        let rules = self.rules();
        // Requested start (`PostgresStreamingChangeEventSource.execute`): lsn_proc if stored, else
        // lsn, else the slot's own position (0/0). Before 1.3 (no locator): the stored lsn.
        let start = if rules.legacy_skip { self.offset.lsn } else { self.offset.resume_lsn() }.unwrap_or(Lsn::INVALID);
        // The search phase runs only when lsn_proc is stored (`hasCompletelyProcessedPosition`,
        // DBZ-7806: not right after a snapshot).
        // The commit LSN the offset loads with (`PostgresOffsetContext.Loader.load`): since 1.9.4 a
        // stored offset without `lsn_commit` (no COMMIT processed yet when it was taken) loads
        // with `lsn_commit = lsn_proc` (DBZ-3942), so the search skips the stored transaction's
        // changes up to the stored one rather than replaying it from the first LSN received;
        // from 1.3 to 1.9.3, `load` read the `lsn_proc` key for it, whatever `lsn_commit` held.
        let commit_lsn = match self.offset.lsn_proc {
            Some(lsn_proc) if rules.commit_lsn_read_from_processed_key => Some(lsn_proc),
            Some(lsn_proc) if rules.commit_lsn_defaults_to_processed => self.offset.lsn_commit.or(Some(lsn_proc)),
            _ => self.offset.lsn_commit,
        };
        self.locator = match self.offset.lsn_proc {
            Some(lsn_proc) if !rules.legacy_skip => Some(Box::new(WalPositionLocator::new(
                rules,
                commit_lsn,
                Some(lsn_proc),
                self.offset.message_type,
                self.offset.lsn_events_processed,
            ))),
            _ => None,
        };
        self.searching = self.locator.is_some();
        // Before 1.3 every message at or below the requested start is skipped, for the whole
        // stream (`AbstractMessageDecoder.shouldMessageBeSkipped`, `skipFirstFlushRecord`).
        self.legacy_skip_upto = if rules.legacy_skip { self.offset.lsn } else { None };
        self.last_completely_processed_lsn = Some(start).filter(|lsn| lsn.is_valid());
        self.previous_dml_lsn = None;
        // Streaming offsets carry no snapshot keys.
        self.offset.snapshot = None;
        self.offset.last_snapshot_record = false;
        self.offset.snapshot_completed = false;
        self.lsn_flushing_allowed = false;
        let skip_processed_upto = self.locator.as_ref().and_then(|locator| locator.last_event_stored_lsn());
        ctx.observe(Observation::StreamingRequested {
            start,
            skip_processed_upto: skip_processed_upto.or(self.legacy_skip_upto),
        });
        if let Some(target) = self.slot_seek_target(start) {
            self.phase = Phase::SeekingSlot { target, start };
            let slot = self.config.slot_name.clone();
            self.sql(ctx, SqlRequest::AdvanceSlot { slot, to: target });
            return TaskEvent::None;
        }
        self.request_stream(ctx, start);
        TaskEvent::None
    }

    /// Where `startStreaming(offset, walPosition)` seeks the slot before `START_REPLICATION`, if
    /// it does ([`DebeziumConfig::slot_seek`]): `walPosition.getLastCommitStoredLsn() ??
    /// getLastEventStoredLsn()`, the locator made of the stored `lsn_commit` and `lsn_proc ?? lsn`
    /// (`PostgresStreamingChangeEventSource.execute`; none without a stored position). 3.6+
    /// seeks only when `offset > defaultStartingPos` (`isReplicationSlotBehindOffsetStore`), the
    /// default start being the slot this start created (its consistent point) or the slot's
    /// `confirmed_flush_lsn` (`initReplicationSlot`), the offset already replaced by it where
    /// `trust_greater_lsn` trusts a slot ahead (`shouldIgnoreExistingOffsetPosition`).
    fn slot_seek_target(&self, start: Lsn) -> Option<Lsn> {
        let seek = self.config.slot_seek();
        if seek == SlotSeek::Never || !start.is_valid() {
            return None;
        }
        let target = self.offset.lsn_commit.unwrap_or(start);
        if seek == SlotSeek::WhenSlotBehind {
            let default_start = match (&self.slot_created, &self.starting_slot) {
                (Some(created), _) => created.0,
                (None, Some(slot)) => slot.confirmed_flush_lsn.or(slot.restart_lsn).unwrap_or(Lsn::INVALID),
                (None, None) => return None,
            };
            let offset = if start < default_start && !self.config.offset_mismatch_strategy.checks_log_position() {
                default_start
            } else {
                start
            };
            if offset <= default_start {
                return None;
            }
        }
        Some(target)
    }

    /// The seek's answer: the stream starts; or PostgreSQL refused because the slot is ahead
    /// of the target, which fails the task ("Cannot seek to the last known offset …",
    /// `advanceReplicationSlot`), or in 2.2 to 2.4 is only logged (DBZ-6191). Another error is
    /// a `PSQLException` wrapped: retriable.
    pub(super) fn on_seek_reply(&mut self, ctx: &mut Ctx, target: Lsn, start: Lsn, reply: SqlReply) -> TaskEvent {
        let refused = match reply {
            SqlReply::Error(error) if error.contains("cannot advance replication slot to") => Some(error),
            SqlReply::Error(error) => {
                return self.retriable(ctx, format!("org.postgresql.util.PSQLException: {error}"));
            }
            _ => None,
        };
        let fails = refused.is_some() && self.config.slot_seek_refusal_fails();
        if fails {
            let error = refused.unwrap_or_default();
            return self.fail(
                ctx,
                format!(
                    "io.debezium.DebeziumException: Cannot seek to the last known offset '{target}' on replication slot \
                     '{}'. Error from server: {error}",
                    self.config.slot_name
                ),
            );
        }
        ctx.observe(Observation::SlotSought { slot: self.config.slot_name.clone(), target, refused });
        self.request_stream(ctx, start);
        TaskEvent::None
    }

    /// `startStreaming(lsn, walPosition)`: `START_REPLICATION` on the replication connection.
    pub(super) fn request_stream(&mut self, ctx: &mut Ctx, start: Lsn) {
        self.phase = Phase::StartingStream;
        // Every `START_REPLICATION` gets a new `V3PGReplicationStream`, whose positions start at
        // `INVALID_LSN`: until its first XLogData the keep-alive rule's guard holds (0 >= 0), on
        // the search stream and on the filtering stream alike. Kept as it was where the driver
        // confirms nothing, so those bounds keep their states.
        if self.config.driver_confirms_keepalives() {
            self.last_data_start = Lsn::INVALID;
            self.driver_flushed = Lsn::INVALID;
        }
        let (slot, publication) = (self.config.slot_name.clone(), self.config.publication_name.clone());
        // `messages=true` on PostgreSQL ≥ 14 (`PgOutputMessageDecoder.defaultOptions`); every
        // modelled server is 15 or later.
        self.repl(ctx, ReplRequest::StartReplication { slot, start, publication, messages: true });
    }

    /// The search found the resume LSN (`execute` after `searchWalPosition`): filtering on, the
    /// replication connection reconnected (`replicationConnection.reconnect()`), and the stream
    /// requested again at the stored `lsn_proc` (`getLastEventStoredLsn`).
    fn reconnect_filtering(&mut self, ctx: &mut Ctx, resume: Lsn) {
        self.searching = false;
        let Some(locator) = self.locator.as_mut() else { return };
        locator.enable_filtering();
        let reconnect_at = locator.last_event_stored_lsn().unwrap_or(Lsn::INVALID);
        ctx.observe(Observation::WalPositionFound { resume, reconnect_at });
        if let Some(session) = self.replication.take() {
            ctx.send(Node::Postgres, Msg::Repl { session, request: ReplRequest::Close });
        }
        self.request_stream(ctx, reconnect_at);
    }

    pub(super) fn on_repl_reply(&mut self, ctx: &mut Ctx, reply: ReplReply) -> TaskEvent {
        let reply = if self.in_read_chunk() && self.phase == Phase::Streaming {
            match self.hold_while_stalled(reply) {
                Some(reply) => reply,
                None => return TaskEvent::None,
            }
        } else {
            reply
        };
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
                let event = self.on_stream_messages(ctx, &PgOutputs::of_txn(&txn));
                if let Some(index) = self.stalled_index.take() {
                    self.stall_at(ReplReply::XLogData(txn), index);
                }
                event
            }
            (Phase::Streaming, ReplReply::Message(message)) => {
                let event = self.on_stream_messages(ctx, &PgOutputs::message(&message));
                if let Some(index) = self.stalled_index.take() {
                    self.stall_at(ReplReply::Message(message), index);
                }
                event
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
        // The streaming thread sends heartbeats; in `readChunk` it sends none.
        if !self.is_streaming() || self.in_read_chunk() {
            return false;
        }
        if self.offset.lsn_to_confirm().is_some() {
            let record = SourceRecord {
                topic: Topic::heartbeat(self.config.connector_index),
                key: 0,
                value: None,
                offset: self.offset,
                placement: None,
            };
            self.queue.get_mut().push(record);
        }
        if let Some(table) = self.config.heartbeat_action_table {
            let session = self.heartbeat_session();
            let ops = vec![RowOp::Update { table, key: 1, status: crate::core::ids::Status::Assessed }];
            ctx.send(Node::Postgres, Msg::Sql { session, request: SqlRequest::Transaction { ops } });
        }
        // `SELECT pg_logical_emit_message(…)`: a message the slot decodes whatever the
        // publication says (a non-transactional one at once, without a transaction).
        if let Some(message) = self.config.heartbeat_action_message.clone() {
            let session = self.heartbeat_session();
            let request = SqlRequest::EmitMessage {
                transactional: message.transactional,
                prefix: message.prefix,
                payload_bytes: message.payload_bytes,
            };
            ctx.send(Node::Postgres, Msg::Sql { session, request });
        }
        let lsn = self.offset.lsn_to_confirm();
        let action_query =
            self.config.heartbeat_action_table.is_some() || self.config.heartbeat_action_message.is_some();
        ctx.observe(Observation::Heartbeat { lsn, action_query });
        true
    }

    /// pgjdbc's keep-alive rule (`V3PGReplicationStream.processKeepAliveMessage`, pgjdbc ≥ 42.7.0),
    /// on with `lsn.flush.mode=connector_and_driver`, and with a 42.7.0–42.7.5 driver under
    /// Debezium before 3.2 (`DebeziumConfig::driver_confirms_keepalives`): when the last LSN Debezium confirmed
    /// explicitly is at or past the start of the last data message, a keep-alive LSN beyond both
    /// the explicit and the driver's flush position is confirmed. It moves the slot past
    /// Debezium's stored offset: Debezium never stores the keep-alive LSN.
    fn on_keepalive(&mut self, ctx: &mut Ctx, wal_end: Lsn) {
        if !self.config.driver_confirms_keepalives() {
            return;
        }
        if self.last_flushed >= self.last_data_start && wal_end > self.last_flushed && wal_end > self.driver_flushed {
            self.driver_flushed = wal_end;
            ctx.observe(Observation::KeepaliveConfirmed { lsn: wal_end });
            self.repl(ctx, ReplRequest::StatusUpdate { flush: wal_end });
        }
    }

    /// The messages of one XLogData reply, read one by one (`ReplicationStream.readPending`): in
    /// the search phase each goes to the locator; on the filtering stream each passes its filter
    /// (`PgOutputMessageDecoder.shouldMessageBeSkipped`: BEGIN and COMMIT are processed whatever
    /// it says); the rest is processed (`processReplicationMessages`).
    fn on_stream_messages(&mut self, ctx: &mut Ctx, messages: &PgOutputs) -> TaskEvent {
        let txn = messages.txn();
        if self.searching {
            for index in 0..messages.len() {
                let message = messages.get(index);
                // pgjdbc's `lastReceiveLSN` moves with every XLogData, read or searched.
                self.last_data_start = message.lsn();
                let found = match self.locator.as_mut() {
                    Some(locator) => locator.resume_from_lsn(message.lsn(), message.operation(txn)),
                    None => None,
                };
                if let Some(resume) = found {
                    // The rest of this stream is dropped with the connection.
                    self.reconnect_filtering(ctx, resume);
                    return TaskEvent::None;
                }
            }
            return TaskEvent::None;
        }
        // `processMessages`: a message received allows LSN flushing (DBZ-5031).
        self.lsn_flushing_allowed = true;
        self.process_messages_from(ctx, messages, 0)
    }

    /// The messages of one reply from `from` on, past the search phase. A message that sends
    /// the streaming thread into `readChunk` (a signal, a window's close) stops the loop:
    /// `stalled_index` says where, and the rest is read when the read returns.
    fn process_messages_from(&mut self, ctx: &mut Ctx, messages: &PgOutputs, from: usize) -> TaskEvent {
        for index in from..messages.len() {
            // A blocking snapshot's pause, noticed before the next message is read.
            if self.blocking_request.is_some() && self.blocking_pause_requested(ctx) {
                self.stalled_index = Some(index);
                return TaskEvent::None;
            }
            let message = messages.get(index);
            // A source signal while a Kafka signal's `readChunk` runs on the signal processor's
            // thread: `processSourceSignal` waits for the semaphore that `process` holds.
            // The same holds a read-only snapshot's window events back (the model's simplification:
            // Debezium's two threads touch the window unguarded there).
            if self.stalled.is_none()
                && self.awaits_chunk_reply()
                && (self.is_source_signal(messages, &message) || self.read_only_window_event(messages, &message))
            {
                self.stalled = Some(Box::new(super::incremental::Stalled::paused()));
                self.stalled_index = Some(index);
                return TaskEvent::None;
            }
            // pgjdbc's `lastReceiveLSN`, read by its keep-alive rule.
            self.last_data_start = message.lsn();
            if let Some(locator) = self.locator.as_mut() {
                let skip = match locator.skip_message(message.lsn()) {
                    Ok(skip) => skip,
                    Err(reason) => return self.fail(ctx, reason),
                };
                if !locator.filtering() {
                    self.locator = None;
                }
                if skip && !matches!(message, PgOutput::Begin { .. } | PgOutput::Commit { .. }) {
                    continue;
                }
            }
            if let Some(upto) = self.legacy_skip_upto
                && message.lsn() <= upto
            {
                continue;
            }
            if self.process_message(ctx, messages, message) {
                self.stalled_index = Some(index);
                return TaskEvent::None;
            }
        }
        TaskEvent::None
    }

    /// `readChunk` returned to the streaming thread, which left `reply` at message `index`:
    /// that message's own record, then the rest of the reply.
    pub(super) fn resume_stream(&mut self, ctx: &mut Ctx, reply: ReplReply, index: usize, unread: bool) {
        if let ReplReply::Message(message) = &reply {
            // Only a blocking snapshot's pause stops the loop at a message of its own.
            if unread {
                self.process_messages_from(ctx, &PgOutputs::message(message), index);
            }
            if let Some(stalled_at) = self.stalled_index.take() {
                self.stall_at(reply, stalled_at);
            }
            return;
        }
        let ReplReply::XLogData(txn) = &reply else { return };
        {
            let messages = PgOutputs::of_txn(txn);
            if unread {
                self.process_messages_from(ctx, &messages, index);
            } else {
                if let PgOutput::Change { index: change, .. } = messages.get(index) {
                    self.dispatch_change(ctx, txn, &txn.changes[change]);
                }
                self.process_messages_from(ctx, &messages, index + 1);
            }
        }
        if let Some(stalled_at) = self.stalled_index.take() {
            self.stall_at(reply, stalled_at);
        }
    }

    /// `processReplicationMessages` for one message (reference §5.2): `lastCompletelyProcessedLsn`
    /// moves on a message that is the last at its LSN (a DML, a COMMIT, a non-transactional
    /// message; not a BEGIN or a transactional message); every message updates the position
    /// (`updateWalPosition`); a COMMIT or a non-transactional message is a commit
    /// (`commitMessage`: `lsn_commit = lsn_proc = its LSN`, the per-LSN count reset).
    fn process_message(&mut self, ctx: &mut Ctx, messages: &PgOutputs, message: PgOutput) -> bool {
        let txn = messages.txn();
        let rules = self.rules();
        let lsn = message.lsn();
        if message.is_last_event_for_lsn() {
            self.last_completely_processed_lsn = Some(lsn);
        }
        let xid = txn.map(|txn| txn.xid);
        // A non-transactional message carries no commit time: the offset keeps the last one.
        let commit_time_usec = txn.map_or(self.offset.ts_usec, |txn| txn.commit_time.ms() * 1000);
        match message {
            PgOutput::Begin { .. } if rules.legacy_skip => {
                // Before 1.3 the pgoutput decoder passed neither BEGIN nor COMMIT on
                // (`PgOutputMessageDecoder.shouldMessageBeSkipped`, 1.0): no commit position.
            }
            PgOutput::Commit { .. } if rules.legacy_skip => {
                // Nor a COMMIT; but the task has read it, and with it its transaction.
                self.last_commit_handled = Some(lsn);
            }
            PgOutput::Begin { .. } => {
                self.update_wal_position(lsn, xid, commit_time_usec, MessageType::Begin);
            }
            PgOutput::Commit { .. } => {
                self.update_wal_position(lsn, xid, commit_time_usec, MessageType::Commit);
                self.commit_message(lsn);
                // `dispatchTransactionCommittedEvent` → the read-only snapshot's
                // `processTransactionCommittedEvent`.
                if self.incremental.is_some()
                    && self.is_read_only()
                    && self.read_only_transaction_change(ctx, xid, crate::core::signal::ReadOnlyEvent::Commit)
                {
                    return true;
                }
            }
            PgOutput::Message { transactional, index, .. } => {
                let tx_id = if transactional { xid } else { None };
                self.update_wal_position(lsn, tx_id, commit_time_usec, MessageType::Message);
                if !transactional {
                    self.commit_message(lsn);
                }
                if let Some(decoded) = messages.decoded_message(index) {
                    self.dispatch_message(decoded, tx_id, commit_time_usec / 1000);
                }
            }
            PgOutput::Change { index, .. } => {
                let Some(txn) = txn else { return false };
                let change = &txn.changes[index];
                let message_type = match change.kind {
                    ChangeKind::Insert { .. } => MessageType::Insert,
                    ChangeKind::Update { .. } => MessageType::Update,
                    ChangeKind::Delete { .. } => MessageType::Delete,
                };
                if rules.counts_events_per_lsn {
                    // `incrementLsnEventsProcessed`.
                    if self.previous_dml_lsn == Some(lsn) {
                        self.offset.lsn_events_processed += 1;
                    } else {
                        self.offset.lsn_events_processed = 1;
                        self.previous_dml_lsn = Some(lsn);
                    }
                }
                self.update_wal_position(lsn, xid, commit_time_usec, message_type);
                if self.config.tables.contains(&change.table) {
                    // A signal is executed before its row's record (`dispatchDataChangeEvent`).
                    if self.config.signalling.is_some() && self.on_signal_row(ctx, change) {
                        return true;
                    }
                    // The read-only snapshot's `processMessage`, before the record.
                    if self.incremental.is_some()
                        && self.is_read_only()
                        && self.read_only_message(ctx, txn.xid, change.table, change.key)
                    {
                        return true;
                    }
                    self.dispatch_change(ctx, txn, change);
                } else {
                    // A filtered table moves the offset and emits nothing, but it is an event
                    // seen (`EventDispatcher.dispatchDataChangeEvent` → `onFilteredEvent`).
                    self.meter.0.on_filtered_event(ctx.now.ms());
                }
            }
        }
        false
    }

    /// `PostgresOffsetContext.updateWalPosition`: `lsn`, `lsn_proc` (the last completely
    /// processed LSN), `txId`, the commit time and `messageType`.
    fn update_wal_position(&mut self, lsn: Lsn, tx_id: Option<Xid>, ts_usec: u64, message_type: MessageType) {
        self.offset.lsn = Some(lsn);
        self.offset.lsn_proc = self.last_completely_processed_lsn;
        self.offset.tx_id = tx_id;
        self.offset.ts_usec = ts_usec;
        self.offset.message_type = Some(message_type);
    }

    /// `commitMessage` with `resetLsnEventsProcessed`: `lsn_commit = lsn_proc = lsn`.
    fn commit_message(&mut self, lsn: Lsn) {
        self.offset.lsn_events_processed = 0;
        self.last_completely_processed_lsn = Some(lsn);
        self.offset.lsn_proc = Some(lsn);
        self.offset.lsn_commit = Some(lsn);
    }

    /// `dispatchLogicalDecodingMessage` (`PostgresStreamingChangeEventSource`, with
    /// `LogicalDecodingMessageFilter`): a message whose prefix `message.prefix.include.list` /
    /// `message.prefix.exclude.list` let through becomes an `op=m` record on
    /// `<topic.prefix>.message`, keyed by its prefix, with the offset after the message (a
    /// non-transactional one already committed). Reference debezium-postgres.md §5.2, §7.2.
    ///
    /// A message carrying an outbox event (the table-free outbox) is the same record; the model
    /// keeps what its content says as an outbox row's change does: the event's number as the
    /// record's `key`, the event as `after`, its message outbox as `source.table`
    /// ([`TableId::message_outbox`]); its Kafka key is still the prefix, which places it
    /// ([`key_placement`]), and the transformation chain renders its content from the event.
    ///
    /// Neither a captured nor a filtered message touches the streaming metrics:
    /// `PostgresEventDispatcher.dispatchLogicalDecodingMessage` hands it to
    /// `LogicalDecodingMessageMonitor`, which enqueues its record and calls no event listener, so
    /// a connector carrying only messages reads `MilliSecondsSinceLastEvent` growing.
    fn dispatch_message(&mut self, message: &DecodedMessage, tx_id: Option<Xid>, ts_ms: u64) {
        if !self.config.message_prefixes.captures(&message.prefix) {
            return;
        }
        let event = message.content.event();
        let value = ChangeEvent {
            op: Op::Message,
            before: None,
            after: event.map(|event| event.row()),
            source: SourceInfo {
                connector: Origin::Postgresql,
                // A message belongs to no table; the record's topic says what it is.
                table: event.map_or(TableId::default(), |event| TableId::message_outbox(event.outbox)),
                lsn: message.lsn,
                tx_id,
                snapshot: SnapshotMarker::Streamed,
                ts_ms,
            },
        };
        let prefix_key = message_key(&message.prefix);
        let (key, placement) = match event {
            None => (prefix_key, None),
            Some(event) => (event.id, Some(key_placement(prefix_key))),
        };
        self.queue.get_mut().push(SourceRecord {
            topic: Topic::message(self.config.connector_index),
            key,
            value: Some(value),
            offset: self.offset,
            placement,
        });
    }

    /// `dispatchDataChangeEvent`: the change record (and a tombstone after a delete).
    fn dispatch_change(&mut self, ctx: &Ctx, txn: &DecodedTxn, change: &Change) {
        // `onEvent`: the streaming metrics (the source timestamp is the commit time).
        self.meter.0.on_event(ctx.now.ms(), txn.commit_time.ms());
        // `processMessage`: the incremental snapshot's window deduplication (the read-only
        // snapshot's `processMessage` has run already, [`Self::read_only_message`]).
        if self.incremental.is_some() && !self.is_read_only() {
            self.deduplicate(change.table, change.key);
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
        self.queue.get_mut().push(SourceRecord {
            topic,
            key: change.key,
            value: Some(value),
            offset: self.offset,
            placement: None,
        });
        if op == Op::Delete && self.config.tombstones_on_delete {
            self.queue.get_mut().push(SourceRecord {
                topic,
                key: change.key,
                value: None,
                offset: self.offset,
                placement: None,
            });
        }
    }

    /// Processes one decoded transaction as if streamed with no locator (the unit tests' helper).
    #[cfg(test)]
    pub(super) fn process_transaction(&mut self, txn: DecodedTxn) {
        let mut out = crate::core::component::Outbox::default();
        let mut ctx = Ctx::new(crate::core::time::SimTime(0), Node::Connect, &mut out);
        self.on_stream_messages(&mut ctx, &PgOutputs::of_txn(&txn));
        self.stalled_index = None;
    }

    /// The last LSN the task has completely processed on its current stream: its offset's, or,
    /// before 1.3 (whose offset is never at a commit's end), the last COMMIT it read if later.
    /// A stream that has read nothing yet with no position stored (no snapshot) has processed
    /// nothing: 0/0, the position it asked for.
    pub fn processed_upto(&self) -> Option<Lsn> {
        if !self.is_streaming() || self.in_read_chunk() {
            return None;
        }
        let offset = self.offset.lsn_proc.or(self.offset.lsn);
        Some(match (offset, self.last_commit_handled) {
            (Some(offset), Some(commit)) => offset.max(commit),
            (offset, commit) => offset.or(commit).unwrap_or(Lsn::INVALID),
        })
    }
}

/// One pgoutput message of the stream, as the task reads it (`ReplicationMessage`), with the LSN
/// of its XLogData header (reference postgres-transactions.md §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PgOutput {
    /// `B`: PostgreSQL 15+ pgoutput sends it lazily, stamped with the LSN of the first change or
    /// transactional message sent (`pgoutput_send_begin` inside `change_cb_wrapper`).
    Begin { lsn: Lsn },
    /// `I`/`U`/`D`: change `index` of the transaction, at its record's start.
    Change { lsn: Lsn, index: usize },
    /// `M`: a logical decoding message, at the end of its record; `index` is its place among
    /// its transaction's messages (0 for a non-transactional one, which comes alone).
    Message { lsn: Lsn, transactional: bool, index: usize },
    /// `C`: at the commit record's end (`end_lsn`).
    Commit { lsn: Lsn },
}

impl PgOutput {
    pub(super) fn lsn(&self) -> Lsn {
        match *self {
            PgOutput::Begin { lsn }
            | PgOutput::Change { lsn, .. }
            | PgOutput::Message { lsn, .. }
            | PgOutput::Commit { lsn } => lsn,
        }
    }

    /// `getOperation()`.
    pub(super) fn operation(&self, txn: Option<&DecodedTxn>) -> MessageType {
        match *self {
            PgOutput::Begin { .. } => MessageType::Begin,
            PgOutput::Commit { .. } => MessageType::Commit,
            PgOutput::Message { .. } => MessageType::Message,
            PgOutput::Change { index, .. } => match txn.map(|txn| &txn.changes[index].kind) {
                Some(ChangeKind::Update { .. }) => MessageType::Update,
                Some(ChangeKind::Delete { .. }) => MessageType::Delete,
                _ => MessageType::Insert,
            },
        }
    }

    /// `isLastEventForLsn()`: true for a DML (`PgOutputReplicationMessage`), a COMMIT
    /// (`TransactionMessage`) and a non-transactional message (`LogicalDecodingMessage`).
    pub(super) fn is_last_event_for_lsn(&self) -> bool {
        match *self {
            PgOutput::Begin { .. } => false,
            PgOutput::Change { .. } | PgOutput::Commit { .. } => true,
            PgOutput::Message { transactional, .. } => !transactional,
        }
    }
}

/// The pgoutput message sequence of one XLogData reply, read by index: BEGIN at the first sent
/// item's LSN, the changes and transactional messages in WAL order (a message is stamped with
/// its record's end, so it precedes a change starting at or after that LSN), COMMIT at `end_lsn`;
/// or one non-transactional message. Built without allocating for a transaction without
/// messages, the usual case.
pub(super) struct PgOutputs<'a> {
    txn: Option<&'a DecodedTxn>,
    /// Changes and transactional messages merged, when the transaction has messages.
    merged: Option<Vec<PgOutput>>,
    single: Option<&'a DecodedMessage>,
}

impl<'a> PgOutputs<'a> {
    pub(super) fn of_txn(txn: &'a DecodedTxn) -> PgOutputs<'a> {
        let merged =
            txn.messages.iter().any(|m| m.transactional).then(|| {
                let mut items: Vec<(Lsn, u8, PgOutput)> =
                    txn.changes
                        .iter()
                        .enumerate()
                        .map(|(index, change)| (change.lsn, 1, PgOutput::Change { lsn: change.lsn, index }))
                        .chain(
                            txn.messages.iter().enumerate().filter(|(_, m)| m.transactional).map(|(index, m)| {
                                (m.lsn, 0, PgOutput::Message { lsn: m.lsn, transactional: true, index })
                            }),
                        )
                        .collect();
                items.sort_by_key(|(lsn, order, _)| (*lsn, *order));
                items.into_iter().map(|(_, _, message)| message).collect()
            });
        PgOutputs { txn: Some(txn), merged, single: None }
    }

    pub(super) fn message(message: &'a DecodedMessage) -> PgOutputs<'a> {
        PgOutputs { txn: None, merged: None, single: Some(message) }
    }

    /// The decoded message a [`PgOutput::Message`] of these outputs stands for.
    pub(super) fn decoded_message(&self, index: usize) -> Option<&'a DecodedMessage> {
        match (self.single, self.txn) {
            (Some(message), _) => Some(message),
            (None, Some(txn)) => txn.messages.get(index),
            (None, None) => None,
        }
    }

    fn items(&self) -> usize {
        match (&self.merged, self.txn) {
            (Some(merged), _) => merged.len(),
            (None, Some(txn)) => txn.changes.len(),
            (None, None) => 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        match (self.single, self.items()) {
            (Some(_), _) => 1,
            (None, 0) => 0,
            (None, items) => items + 2,
        }
    }

    fn item(&self, index: usize) -> PgOutput {
        match (&self.merged, self.txn) {
            (Some(merged), _) => merged[index],
            (None, Some(txn)) => PgOutput::Change { lsn: txn.changes[index].lsn, index },
            (None, None) => unreachable!("a single message has no items"),
        }
    }

    pub(super) fn get(&self, index: usize) -> PgOutput {
        if let Some(single) = self.single {
            return PgOutput::Message { lsn: single.lsn, transactional: false, index: 0 };
        }
        let items = self.items();
        match index {
            0 => PgOutput::Begin { lsn: self.item(0).lsn() },
            index if index <= items => self.item(index - 1),
            _ => PgOutput::Commit { lsn: self.txn.map_or(Lsn::INVALID, |txn| txn.end_lsn) },
        }
    }

    pub(super) fn txn(&self) -> Option<&'a DecodedTxn> {
        self.txn
    }
}
