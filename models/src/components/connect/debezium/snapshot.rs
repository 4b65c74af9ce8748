//! The snapshot phase (`RelationalSnapshotChangeEventSource.doExecute`,
//! `PostgresSnapshotChangeEventSource`): whether to snapshot, its two cases, the table scans and the
//! held-back last record.

use super::*;

impl DebeziumTask {
    pub(super) fn decide_snapshot(&mut self, ctx: &mut Ctx) -> TaskEvent {
        let stored = self.stored;
        let (snapshot, reason) = match (self.config.snapshot_mode, stored) {
            (SnapshotMode::NoData, _) => (false, "snapshot.mode=no_data never snapshots data".to_string()),
            (SnapshotMode::Always, _) => (true, "snapshot.mode=always snapshots at every start".to_string()),
            (mode, None) => (true, format!("snapshot.mode={}: no stored offset", mode.name())),
            (mode, Some(offset))
                if offset.snapshot == Some(SnapshotKind::Blocking) && self.stored_initial_snapshot_running(&offset) =>
            {
                (
                    true,
                    format!(
                        "snapshot.mode={}: previous snapshot was cancelled before completion; a new snapshot will be taken \
                     (the stored offset is an interrupted blocking snapshot's: before 3.0.2 it stores snapshot=true, \
                     which loads as an initial snapshot in progress, DBZ-7903)",
                        mode.name()
                    ),
                )
            }
            (mode, Some(offset)) if self.stored_initial_snapshot_running(&offset) => (
                true,
                format!(
                    "snapshot.mode={}: previous snapshot was cancelled before completion; a new snapshot will be taken",
                    mode.name()
                ),
            ),
            (mode, Some(offset)) if self.blocking_not_resumed(&offset) => (
                false,
                format!(
                    "snapshot.mode={}: stored offset with snapshot=BLOCKING, not completed: a blocking snapshot is \
                     never resumed (no code path reads it); streaming goes on from the stored offset, and the rows \
                     it had not emitted are never read",
                    mode.name()
                ),
            ),
            (mode, Some(_)) => (false, format!("snapshot.mode={}: stored offset, snapshot completed", mode.name())),
        };
        ctx.observe(Observation::SnapshotDecided { snapshot, reason });
        if !snapshot {
            return self.start_streaming(ctx);
        }
        match self.slot_created.as_deref() {
            Some((consistent_point, _)) => self.begin_snapshot(ctx, SnapshotCase::SlotCreatedNow, *consistent_point),
            None => {
                self.phase = Phase::SnapshotReadingLsn;
                self.sql(ctx, SqlRequest::CurrentWalLsn);
                TaskEvent::None
            }
        }
    }

    pub(super) fn begin_snapshot(&mut self, ctx: &mut Ctx, case: SnapshotCase, lsn: Lsn) -> TaskEvent {
        self.snapshot_attempts += 1;
        let attempt = self.snapshot_attempts;
        // A fresh offset context: no lsn_proc, no lsn_commit.
        self.offset = SourceOffset { lsn: Some(lsn), snapshot: Some(SnapshotKind::Initial), ..SourceOffset::default() };
        self.snapshot = Some(SnapshotRun { attempt, case, lsn, buffered: None, rows: 0 });
        ctx.observe(Observation::SnapshotStarted { attempt, case, lsn });
        if self.config.snapshot_tables().is_empty() {
            self.complete_snapshot(ctx);
            return TaskEvent::None;
        }
        self.scan_table(ctx, 0);
        TaskEvent::None
    }

    pub(super) fn scan_table(&mut self, ctx: &mut Ctx, table_index: usize) {
        self.phase = Phase::SnapshotScanning { table_index };
        let exported_snapshot = match self.snapshot.as_ref().map(|run| run.case) {
            Some(SnapshotCase::SlotCreatedNow) => self.slot_created.as_deref().map(|(_, name)| name.clone()),
            _ => None,
        };
        let table = self.config.snapshot_tables()[table_index];
        let fetch_size = self.config.snapshot_fetch_size;
        self.sql(ctx, SqlRequest::ScanTable { table, exported_snapshot, fetch_size, filter: None });
    }

    pub(super) fn emit_snapshot_row(&mut self, ctx: &mut Ctx, table: TableId, key: Key, row: Row) {
        let Some(run) = self.snapshot.as_mut() else { return };
        let marker = if run.rows == 0 { SnapshotMarker::First } else { SnapshotMarker::Middle };
        run.rows += 1;
        let record = SourceRecord {
            topic: Topic::Change(table),
            key,
            value: Some(ChangeEvent::snapshot_read(Origin::Postgresql, table, row, run.lsn, marker, ctx.now.ms())),
            offset: self.offset,
            placement: None,
        };
        if let Some(previous) = run.buffered.replace(record) {
            self.queue.get_mut().push(previous);
        }
    }

    pub(super) fn complete_snapshot(&mut self, ctx: &mut Ctx) {
        let Some(mut run) = self.snapshot.take() else { return };
        self.offset.last_snapshot_record = true;
        self.offset.snapshot_completed = true;
        if let Some(mut last) = run.buffered.take() {
            if let Some(value) = last.value.as_mut() {
                value.source.snapshot = SnapshotMarker::Last;
            }
            last.offset = self.offset;
            self.queue.get_mut().push(last);
        }
        ctx.observe(Observation::SnapshotCompleted { attempt: run.attempt, rows: run.rows, lsn: run.lsn });
        self.start_streaming(ctx);
    }
}
