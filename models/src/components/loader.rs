//! The wall-clock handoff some teams use instead of the connector's snapshot: a bulk loader reads
//! the table with a plain `SELECT` at a chosen time and publishes the rows to the change topic
//! as snapshot records, and the connector is started later with `snapshot.mode=no_data`
//! (a plain read before the slot exists leaves a gap: only the snapshot a logical slot exports at
//! its consistent point, `SnapBuildExportSnapshot` in PostgreSQL's
//! `src/backend/replication/logical/snapbuild.c`, joins the stream without one; PostgreSQL
//! documentation, "Logical Decoding Concepts", § Exported Snapshots).
//!
//! The loader reads `pg_current_wal_lsn()` just before its `SELECT` and stamps the records'
//! `source.lsn` with it, as a careful loader would; the `SELECT` itself runs in its own statement
//! snapshot (READ COMMITTED).

use crate::core::component::{Component, Ctx, Timer};
use crate::core::event::{ChangeEvent, Origin, SnapshotMarker, SourceOffset, SourceRecord, Topic};
use crate::core::ids::{Node, TableId};
use crate::core::lsn::Lsn;
use crate::core::observe::Observation;
use crate::core::protocol::{KafkaReply, KafkaRequest, Msg, SqlReply, SqlRequest};
use crate::core::shared::CopyOnWrite;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Loader {
    pub table: TableId,
    pub start_at_ms: u64,
    pub fetch_size: u32,
    lsn: Option<Lsn>,
    rows: Vec<SourceRecord>,
    /// The produce request, kept until acknowledged (sent again after a lost connection).
    producing: Option<CopyOnWrite<Vec<SourceRecord>>>,
    done: bool,
}

const SESSION: u64 = 1;

impl Loader {
    pub fn new(table: TableId, start_at_ms: u64, fetch_size: u32) -> Loader {
        Loader { table, start_at_ms, fetch_size, lsn: None, rows: Vec::new(), producing: None, done: false }
    }

    /// Whether the read is published.
    pub fn is_done(&self) -> bool {
        self.done
    }

    fn publish(&mut self, ctx: &mut Ctx) {
        if let Some(last) = self.rows.last_mut()
            && let Some(value) = last.value.as_mut()
        {
            value.source.snapshot = SnapshotMarker::Last;
        }
        let records = std::mem::take(&mut self.rows);
        ctx.observe(Observation::LoaderRead { rows: records.len(), lsn: self.lsn.unwrap_or_default() });
        let records = CopyOnWrite::new(records);
        self.producing = Some(records.clone());
        ctx.send(
            Node::Kafka,
            Msg::Kafka { request_id: 1, request: KafkaRequest::Produce { records, transaction: None } },
        );
    }
}

impl Component for Loader {
    fn start(&mut self, ctx: &mut Ctx) {
        if !self.done {
            ctx.set_timer(Timer::LoaderStart, self.start_at_ms.saturating_sub(ctx.now.ms()));
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx, _from: Node, msg: Msg) {
        match msg {
            Msg::SqlReply { reply: SqlReply::Lsn(lsn), .. } => {
                self.lsn = Some(lsn);
                let request = SqlRequest::ScanTable {
                    table: self.table,
                    exported_snapshot: None,
                    fetch_size: self.fetch_size,
                    filter: None,
                };
                ctx.send(Node::Postgres, Msg::Sql { session: SESSION, request });
            }
            Msg::SqlReply { reply: SqlReply::Rows { table, rows, done }, .. } => {
                let lsn = self.lsn.unwrap_or_default();
                for (key, row) in rows {
                    let marker = if self.rows.is_empty() { SnapshotMarker::First } else { SnapshotMarker::Middle };
                    self.rows.push(SourceRecord {
                        topic: Topic::Change(table),
                        key,
                        value: Some(ChangeEvent::snapshot_read(Origin::Loader, table, row, lsn, marker, ctx.now.ms())),
                        offset: SourceOffset::default(),
                        placement: None,
                    });
                }
                if done {
                    self.publish(ctx);
                    ctx.send(Node::Postgres, Msg::Sql { session: SESSION, request: SqlRequest::Close });
                }
            }
            Msg::KafkaReply { reply: KafkaReply::Produced { .. }, .. } => {
                self.producing = None;
                self.done = true;
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx, timer: Timer) {
        if timer == Timer::KafkaRetry
            && let Some(records) = self.producing.clone()
        {
            ctx.send(
                Node::Kafka,
                Msg::Kafka { request_id: 1, request: KafkaRequest::Produce { records, transaction: None } },
            );
            return;
        }
        if timer == Timer::LoaderStart && !self.done {
            ctx.send(Node::Postgres, Msg::Sql { session: SESSION, request: SqlRequest::CurrentWalLsn });
        }
    }

    fn on_connection_lost(&mut self, ctx: &mut Ctx, peer: Node) {
        if peer == Node::Kafka && self.producing.is_some() {
            ctx.set_timer(Timer::KafkaRetry, crate::core::protocol::KAFKA_RECONNECT_BACKOFF_MS);
        }
        if peer == Node::Postgres && !self.done && self.producing.is_none() {
            // The read failed half-way: start it again in a second.
            self.rows.clear();
            self.lsn = None;
            ctx.set_timer(Timer::LoaderStart, 1_000);
        }
    }

    fn crash(&mut self) {}
}
