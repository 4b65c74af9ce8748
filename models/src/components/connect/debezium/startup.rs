//! Start-up (`PostgresConnectorTask.start`): the stored offset, the log-position check, the slot
//! read with its 900-attempt loop, the publication and the slot's creation.

use super::*;

impl DebeziumTask {
    /// `PostgresConnectorTask.start()` with the offset Connect loaded.
    pub fn start(&mut self, ctx: &mut Ctx, stored: Option<SourceOffset>) -> TaskEvent {
        self.stored = stored;
        self.offset = stored.unwrap_or_default();
        self.starting_slot = None;
        self.slot_created = None;
        self.snapshot = None;
        self.clear_queue();
        self.locator = None;
        self.searching = false;
        self.legacy_skip_upto = None;
        self.last_completely_processed_lsn = None;
        self.previous_dml_lsn = None;
        self.last_commit_handled = None;
        self.lsn_flushing_allowed = false;
        self.last_flushed = Lsn::INVALID;
        self.slot_info_attempts = 0;
        self.last_data_start = Lsn::INVALID;
        self.driver_flushed = Lsn::INVALID;
        self.incremental = None;
        self.stalled = None;
        self.stalled_index = None;
        self.blocking_request = None;
        self.blocking = None;
        // `start()` builds the coordinator and its metrics afresh (`PostgresConnectorTask.start`,
        // `DefaultChangeEventSourceMetricsFactory`): after a retriable error too, every metric
        // is -1 again until the next event.
        self.meter = Meter::default();
        ctx.observe(Observation::TaskStarted { offset: stored });
        if let Some(offset) = stored
            && self.stored_initial_snapshot_running(&offset)
            && self.config.snapshot_mode == SnapshotMode::NoData
        {
            return self.fail(
                ctx,
                "The connector previously stopped while taking a snapshot, but now the connector is configured \
                 to never allow snapshots. Reconfigure the connector to use snapshots initially or when needed."
                    .into(),
            );
        }
        let check = self.config.log_position_check_enable
            && self.config.offset_mismatch_strategy.checks_log_position()
            && stored.is_some_and(|offset| !self.stored_initial_snapshot_running(&offset));
        self.phase = if check { Phase::CheckingLogPosition } else { Phase::ReadingSlot };
        let slot = self.config.slot_name.clone();
        self.sql(ctx, SqlRequest::SlotInfo { slot });
        TaskEvent::None
    }

    pub(super) fn on_sql_reply(&mut self, ctx: &mut Ctx, reply: SqlReply) -> TaskEvent {
        if self.awaits_chunk_reply() {
            return self.on_chunk_reply(ctx, reply);
        }
        if self.blocking.is_some() {
            return self.on_blocking_reply(ctx, reply);
        }
        if let Phase::SeekingSlot { target, start } = self.phase {
            return self.on_seek_reply(ctx, target, start, reply);
        }
        if let SqlReply::Error(error) = &reply {
            return self.retriable(ctx, format!("org.postgresql.util.PSQLException: {error}"));
        }
        if let (Phase::CheckingLogPosition | Phase::ReadingSlot, SqlReply::Slot(Some(row))) = (&self.phase, &reply)
            && (row.restart_lsn.is_none() || row.confirmed_flush_lsn.is_none())
        {
            return self.slot_info_not_valid(ctx);
        }
        match (&self.phase, reply) {
            (Phase::CheckingLogPosition, SqlReply::Slot(row)) => {
                let stored = self.stored.unwrap_or_default();
                let (available, detail) = match &row {
                    None => (false, format!("slot \"{}\" does not exist", self.config.slot_name)),
                    Some(slot) => match (stored.lsn_proc, slot.restart_lsn) {
                        (None, _) => (true, "no lsn_proc stored: nothing to compare".into()),
                        (Some(lsn_proc), Some(restart)) if restart <= lsn_proc => {
                            (true, format!("restart_lsn {restart} <= lsn_proc {lsn_proc}"))
                        }
                        (Some(lsn_proc), restart) => (
                            false,
                            format!(
                                "restart_lsn {} > lsn_proc {lsn_proc}",
                                restart.map_or("NULL".to_string(), |lsn| lsn.to_string())
                            ),
                        ),
                    },
                };
                ctx.observe(Observation::LogPositionChecked { available, detail });
                if !available {
                    if self.config.snapshot_mode == SnapshotMode::WhenNeeded {
                        // The stored offset is dropped so that a new snapshot runs.
                        self.stored = None;
                        self.offset = SourceOffset::default();
                    } else {
                        return self.fail(
                            ctx,
                            "The connector is trying to read change stream starting at the stored offset, but this \
                             is no longer available on the server. Reconfigure the connector to use a snapshot mode \
                             when needed."
                                .into(),
                        );
                    }
                }
                // Start-up's slot read (`getSlotState`) reads the slot again; the row just read is
                // the same one.
                self.on_slot_read(ctx, row)
            }
            (Phase::ReadingSlot, SqlReply::Slot(row)) => self.on_slot_read(ctx, row),
            (Phase::EnsuringPublication, SqlReply::Ok) => {
                if self.starting_slot.is_none() {
                    self.phase = Phase::CreatingSlot;
                    let (slot, plugin) = (self.config.slot_name.clone(), self.config.plugin_name.clone());
                    let failover = self.config.slot_failover;
                    self.repl(ctx, ReplRequest::CreateSlot { slot, plugin, failover });
                    TaskEvent::None
                } else {
                    self.decide_snapshot(ctx)
                }
            }
            (Phase::SnapshotReadingLsn, SqlReply::Lsn(lsn)) => self.begin_snapshot(ctx, SnapshotCase::SlotExisted, lsn),
            (Phase::SnapshotScanning { table_index }, SqlReply::Rows { table, rows, done }) => {
                let table_index = *table_index;
                self.queue.get_mut().reserve(rows.len());
                for (key, row) in rows {
                    self.emit_snapshot_row(ctx, table, key, row);
                }
                if done {
                    if table_index + 1 < self.config.snapshot_tables().len() {
                        self.scan_table(ctx, table_index + 1);
                    } else {
                        self.complete_snapshot(ctx);
                    }
                }
                TaskEvent::None
            }
            _ => TaskEvent::None,
        }
    }

    /// `PostgresConnection.fetchReplicationSlotInfo`: a slot row whose `restart_lsn` (or
    /// flush position) is NULL — an invalidated slot's — is "not yet valid": read it again in
    /// 2 s, up to 900 times (about 30 minutes, whatever `slot.max.retries` says), while the task
    /// reports RUNNING; then fail.
    fn slot_info_not_valid(&mut self, ctx: &mut Ctx) -> TaskEvent {
        self.slot_info_attempts += 1;
        if self.slot_info_attempts >= MAX_ATTEMPTS_FOR_OBTAINING_REPLICATION_SLOT {
            return self.fail(
                ctx,
                "org.apache.kafka.connect.errors.ConnectException: Unable to obtain valid replication slot. Make sure \
                 there are no long-running transactions running in parallel as they may hinder the allocation of the \
                 replication slot when starting this connector"
                    .into(),
            );
        }
        // Narrated at the first attempt and every 100th, not all 900.
        if self.slot_info_attempts == 1 || self.slot_info_attempts.is_multiple_of(100) {
            ctx.observe(Observation::SlotInfoRetry { attempt: self.slot_info_attempts });
        }
        TaskEvent::ReadSlotAgainAfter(PAUSE_BETWEEN_REPLICATION_SLOT_RETRIEVAL_ATTEMPTS_MS)
    }

    /// The pause of the 900-attempt loop ended: read the slot row again.
    pub fn on_slot_info_retry(&mut self, ctx: &mut Ctx) -> TaskEvent {
        if matches!(self.phase, Phase::CheckingLogPosition | Phase::ReadingSlot) {
            let slot = self.config.slot_name.clone();
            self.sql(ctx, SqlRequest::SlotInfo { slot });
        }
        TaskEvent::None
    }

    fn on_slot_read(&mut self, ctx: &mut Ctx, row: Option<SlotRow>) -> TaskEvent {
        ctx.observe(Observation::SlotRead { row: row.clone() });
        self.starting_slot = row.map(CopyOnWrite::new);
        self.phase = Phase::EnsuringPublication;
        let name = self.config.publication_name.clone();
        let tables = self.config.publication_filtered.then(|| self.config.tables.clone());
        self.sql(ctx, SqlRequest::EnsurePublication { name, tables });
        TaskEvent::None
    }
}
