//! The connector properties the model uses (`PostgresConnectorConfig`) and their enums.

use crate::core::ids::TableId;
use serde::{Deserialize, Serialize};

/// `MAX_ATTEMPTS_FOR_OBTAINING_REPLICATION_SLOT` (`PostgresConnection`).
pub const MAX_ATTEMPTS_FOR_OBTAINING_REPLICATION_SLOT: u32 = 900;
/// `PAUSE_BETWEEN_REPLICATION_SLOT_RETRIEVAL_ATTEMPTS`: 2 s.
pub const PAUSE_BETWEEN_REPLICATION_SLOT_RETRIEVAL_ATTEMPTS_MS: u64 = 2_000;

/// `snapshot.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotMode {
    Initial,
    NoData,
    WhenNeeded,
    Always,
}

impl SnapshotMode {
    pub fn name(self) -> &'static str {
        match self {
            SnapshotMode::Initial => "initial",
            SnapshotMode::NoData => "no_data",
            SnapshotMode::WhenNeeded => "when_needed",
            SnapshotMode::Always => "always",
        }
    }
}

/// `offset.mismatch.strategy` (3.4, DBZ-9688;
/// `PostgresConnectorConfig.OffsetSlotMismatchStrategy`): how the stored offset and the slot's
/// position are reconciled at start-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OffsetMismatchStrategy {
    NoValidation,
    TrustOffset,
    TrustSlot,
    TrustGreaterLsn,
}

impl OffsetMismatchStrategy {
    pub const ALL: [OffsetMismatchStrategy; 4] = [
        OffsetMismatchStrategy::NoValidation,
        OffsetMismatchStrategy::TrustOffset,
        OffsetMismatchStrategy::TrustSlot,
        OffsetMismatchStrategy::TrustGreaterLsn,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OffsetMismatchStrategy::NoValidation => "no_validation",
            OffsetMismatchStrategy::TrustOffset => "trust_offset",
            OffsetMismatchStrategy::TrustSlot => "trust_slot",
            OffsetMismatchStrategy::TrustGreaterLsn => "trust_greater_lsn",
        }
    }

    /// `trust_slot` and `trust_greater_lsn` skip the log-position check
    /// (`PostgresConnection.validateLogPosition`).
    pub fn checks_log_position(self) -> bool {
        matches!(self, OffsetMismatchStrategy::NoValidation | OffsetMismatchStrategy::TrustOffset)
    }
}

/// `lsn.flush.mode` (3.4, DBZ-9641; `PostgresConnectorConfig.LsnFlushMode`): who confirms positions
/// to the slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LsnFlushMode {
    /// Debezium confirms its stored offsets; the driver's keep-alive confirmation is off.
    Connector,
    /// Nothing confirms: the slot moves only when something outside advances it.
    Manual,
    /// Debezium confirms its stored offsets, and pgjdbc confirms keep-alive LSNs by its rule.
    ConnectorAndDriver,
}

/// Debezium's fallback for `connector_and_driver` without heartbeats
/// (`applyLsnFlushModeHeartbeatFallback`): 10 minutes.
pub const LSN_FLUSH_MODE_HEARTBEAT_FALLBACK_MS: u64 = 600_000;

impl DebeziumConfig {
    /// Configuration version `version` (0: this one; `v` captures `later_tables[v - 1]`).
    pub fn reconfigured(&self, version: u8) -> DebeziumConfig {
        let mut config = self.clone();
        if let Some(tables) = usize::from(version).checked_sub(1).and_then(|v| self.later_tables.get(v)) {
            config.tables.clone_from(tables);
        }
        config
    }

    /// Every table some configuration version captures: this one's, then the ones later
    /// versions add, in order.
    pub fn ever_captured(&self) -> Vec<TableId> {
        let mut tables = self.tables.clone();
        for table in self.later_tables.iter().flatten() {
            if !tables.contains(table) {
                tables.push(*table);
            }
        }
        tables
    }
    /// Whether the incremental snapshot's chunk queries bound a composite key column by column
    /// (`addKeyColumnsToCondition`), as before 1.8, rather than as one row value (DBZ-3860,
    /// fixed in 1.8.0.Alpha1).
    pub fn chunk_bounds_per_column(&self) -> bool {
        self.version < (1, 8)
    }

    /// How the incremental snapshot's chunk bounds treat a NULL in a nullable key column
    /// (`message.key.columns`): as the largest value from 2.6 (DBZ-5071, fixed in 2.6.0.Beta1,
    /// `AbstractChunkQueryBuilder.addLowerBound` with `PostgresConnection.nullsSortLast`), by
    /// plain comparisons before.
    pub fn chunk_nulls(&self) -> crate::core::signal::ChunkNulls {
        if self.version < (2, 6) {
            crate::core::signal::ChunkNulls::Unaware
        } else {
            crate::core::signal::ChunkNulls::NullAware
        }
    }

    /// The nullable unique column `message.key.columns` keys `table` by, if it does.
    pub fn message_key_column(&self, table: TableId) -> Option<&crate::core::ids::UniqueColumn> {
        self.message_key_columns.iter().find(|(of, _)| *of == table).map(|(_, column)| column)
    }

    /// Whether `table`'s records have a null key: no primary key, and no `message.key.columns`.
    pub fn null_key(&self, table: TableId) -> bool {
        self.null_key_tables.contains(&table)
    }

    /// Whether pgjdbc confirms keep-alive LSNs by its rule (`V3PGReplicationStream`
    /// `processKeepAliveMessage`): a 42.7.0 or later driver does by default; from 3.2 Debezium
    /// sets `withAutomaticFlush(false)` unless `lsn.flush.mode=connector_and_driver`
    /// (`PostgresReplicationConnection.startPgReplicationStream`, DBZ-7533, DBZ-9641).
    pub fn driver_confirms_keepalives(&self) -> bool {
        let shipped = if self.version >= (3, 2) { (42, 7, 6) } else { (42, 6, 1) };
        let auto_flush_capable = self.pgjdbc.unwrap_or(shipped) >= (42, 7, 0);
        let switched_on = self.version < (3, 2) || self.lsn_flush_mode == LsnFlushMode::ConnectorAndDriver;
        auto_flush_capable && switched_on
    }

    /// Whether the acceptance boundary waits for a logical message with `prefix`: one this
    /// connector captures (`message.prefix.include.list` / `exclude.list`), and not its own
    /// message heartbeat's, which never stops.
    pub fn awaits_message(&self, prefix: &str) -> bool {
        self.message_prefixes.captures(prefix)
            && self.heartbeat_action_message.as_ref().is_none_or(|message| message.prefix != prefix)
    }

    /// The heartbeat interval in effect: `connector_and_driver` with `heartbeat.interval.ms=0`
    /// forces 600 000 ms (`PostgresConnectorConfig.applyLsnFlushModeHeartbeatFallback`).
    pub fn effective_heartbeat_interval_ms(&self) -> u64 {
        if self.heartbeat_interval_ms == 0 && self.lsn_flush_mode == LsnFlushMode::ConnectorAndDriver {
            LSN_FLUSH_MODE_HEARTBEAT_FALLBACK_MS
        } else {
            self.heartbeat_interval_ms
        }
    }
}

/// Whether a stream start with a stored offset first seeks the slot to it
/// (`PostgresReplicationConnection.startStreaming` → `advanceReplicationSlot`, before 3.6
/// `validateSlotIsInExpectedState`: `SELECT pg_replication_slot_advance(slot, lsn_commit ??
/// lsn)`), by release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotSeek {
    /// No seek (before 2.1; from 2.5 unless enabled; never with `lsn.flush.mode=manual`,
    /// `isFlushLsnOnSource`).
    Never,
    /// At every stream start with a stored position, wherever the slot is.
    Always,
    /// 3.6+ (dbz#1863): only when the slot is behind the requested position
    /// (`isReplicationSlotBehindOffsetStore`): a slot ahead is not sought, so nothing refuses.
    WhenSlotBehind,
}

impl DebeziumConfig {
    /// The seek of the configured release (DBZ-5739, DBZ-7015, DBZ-9688, dbz#1863):
    /// - before 2.1 there is none;
    /// - 2.1 to 2.4 seek at every start: DBZ-5739 made it mandatory before 2.1.0.Alpha2 shipped
    ///   (the first commit's opt-in property was removed again, "Make validation mandatory");
    /// - 2.5 to 3.3 only with `internal.slot.seek.to.known.offset.on.start=true` (DBZ-7015 made it
    ///   opt-in, default false);
    /// - 3.4 and 3.5 with `offset.mismatch.strategy` `trust_offset` or `trust_greater_lsn`
    ///   (`slotSeekToKnownOffsetOnStart` ⇔ `shouldSeekSlotToOffset`);
    /// - 3.6 on, the same strategies, and only when the slot is behind (dbz#1863).
    pub fn slot_seek(&self) -> SlotSeek {
        if self.lsn_flush_mode == LsnFlushMode::Manual {
            return SlotSeek::Never;
        }
        let strategy_seeks = matches!(
            self.offset_mismatch_strategy,
            OffsetMismatchStrategy::TrustOffset | OffsetMismatchStrategy::TrustGreaterLsn
        );
        match self.version {
            version if version < (2, 1) => SlotSeek::Never,
            version if version < (2, 5) => SlotSeek::Always,
            version if version < (3, 4) && self.slot_seek_to_known_offset_on_start => SlotSeek::Always,
            version if version < (3, 4) => SlotSeek::Never,
            version if version < (3, 6) && strategy_seeks => SlotSeek::Always,
            _ if strategy_seeks => SlotSeek::WhenSlotBehind,
            _ => SlotSeek::Never,
        }
    }

    /// Whether PostgreSQL's refusal of the seek ("cannot advance replication slot to …") fails
    /// the task. DBZ-6191 (2.2.0.CR1, backported to 2.1.3) let the `FAIL` case of
    /// `event.processing.failure.handling.mode` fall through to `WARN`, so 2.2 to 2.4 log it and
    /// stream on; DBZ-7015 (2.5) restored the failure. 2.1 is taken as 2.1.0 to 2.1.2.
    pub fn slot_seek_refusal_fails(&self) -> bool {
        !((2, 2)..(2, 5)).contains(&self.version)
    }
}

impl LsnFlushMode {
    pub const ALL: [LsnFlushMode; 3] =
        [LsnFlushMode::Connector, LsnFlushMode::Manual, LsnFlushMode::ConnectorAndDriver];

    pub fn name(self) -> &'static str {
        match self {
            LsnFlushMode::Connector => "connector",
            LsnFlushMode::Manual => "manual",
            LsnFlushMode::ConnectorAndDriver => "connector_and_driver",
        }
    }
}

/// The connector properties the model uses, with Debezium's defaults.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DebeziumConfig {
    /// The Debezium release, `(major, minor)`. Before 2.7 the slot is confirmed from the offsets
    /// acknowledged in memory (`commitRecord` → `commit()`), not re-read from the offset store:
    /// DBZ-7816 (fixed in 2.7.0.Alpha2 by `PostgresConnectorTask.performCommit` re-reading the
    /// offsets).
    pub version: (u32, u32),
    /// The pgjdbc driver on the classpath, `(major, minor, patch)`; None: the one the Debezium
    /// release ships (`version.postgresql.driver`: 42.6.x up to 3.1, 42.7.6 or later from 3.2).
    /// pgjdbc 42.7.0 made the keep-alive auto-confirmation the default (pgjdbc#3138); Debezium
    /// switches it off explicitly only from 3.2 (DBZ-7533), except with `connector_and_driver`.
    pub pgjdbc: Option<(u32, u32, u32)>,
    /// `name` of the connector (the offsets-topic key).
    pub name: String,
    /// The place of its `[[connector]]` entry (0: the first): its heartbeat and message topics
    /// are its own ([`crate::core::event::Topic::heartbeat`]).
    #[serde(default)]
    pub connector_index: u8,
    /// `topic.prefix`.
    pub topic_prefix: String,
    /// `slot.name` (default `debezium`).
    pub slot_name: String,
    /// `plugin.name` (the model supports `pgoutput`).
    pub plugin_name: String,
    /// `publication.name` (default `dbz_publication`).
    pub publication_name: String,
    /// `publication.autocreate.mode = filtered`: the publication is `FOR TABLE` the
    /// `table.include.list` (created so, or set so on every start:
    /// `PostgresReplicationConnection.initPublication`, `createOrUpdatePublicationModeFilterted`);
    /// otherwise `all_tables`, `FOR ALL TABLES` when it is created.
    #[serde(default)]
    pub publication_filtered: bool,
    /// `snapshot.mode` (default `initial`).
    pub snapshot_mode: SnapshotMode,
    /// `snapshot.fetch.size` (default 10 240).
    pub snapshot_fetch_size: u32,
    /// `max.batch.size` (default 2 048).
    pub max_batch_size: u32,
    /// `poll.interval.ms` (default 500).
    pub poll_interval_ms: u64,
    /// `retriable.restart.connector.wait.ms` (default 10 000).
    pub retriable_restart_connector_wait_ms: u64,
    /// `tombstones.on.delete` (default true).
    pub tombstones_on_delete: bool,
    /// Internal `log.position.check.enable` (default true).
    pub log_position_check_enable: bool,
    /// `offset.mismatch.strategy` (default `no_validation`).
    pub offset_mismatch_strategy: OffsetMismatchStrategy,
    /// Internal `internal.slot.seek.to.known.offset.on.start` (default false; 2.5 to 3.3,
    /// DBZ-7015; from 3.4 a deprecated alias the scenario reader resolves into
    /// `offset_mismatch_strategy`: true → `trust_offset`).
    pub slot_seek_to_known_offset_on_start: bool,
    /// `lsn.flush.mode` (default `connector`).
    pub lsn_flush_mode: LsnFlushMode,
    /// `heartbeat.interval.ms` (default 0: off).
    pub heartbeat_interval_ms: u64,
    /// `slot.failover` (PostgreSQL 17+, default false): create the slot as a failover slot.
    pub slot_failover: bool,
    /// `heartbeat.action.query`, modelled as an update of row 1 of this table (an upsert into a
    /// heartbeat table in the publication).
    pub heartbeat_action_table: Option<TableId>,
    /// `heartbeat.action.query` when it emits a logical decoding message
    /// (`SELECT pg_logical_emit_message(false, 'heartbeat', now()::varchar)`, the form advised
    /// for quiet databases): the message it writes on every heartbeat.
    pub heartbeat_action_message: Option<HeartbeatMessage>,
    /// `message.prefix.include.list` / `message.prefix.exclude.list`: which logical decoding
    /// messages become records (`LogicalDecodingMessageFilter`).
    pub message_prefixes: MessagePrefixFilter,
    /// The captured tables (`table.include.list`, and the signal table, which Debezium adds to
    /// the filter: `RelationalTableFilters`), in snapshot order.
    pub tables: Vec<TableId>,
    /// `snapshot.include.collection.list`: the captured tables the initial snapshot reads, in
    /// snapshot order; `None`: every captured table. A table left out is streamed but never
    /// read: its rows from before the stream reach Kafka only through an incremental snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_tables: Option<Vec<TableId>>,
    /// Signals and incremental snapshots (`signal.data.collection` and the incremental
    /// snapshot's properties); `None` without a signal table: no signal is ever read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signalling: Option<Signalling>,
    /// The captured tables of the configurations the script puts later (`PUT
    /// /connectors/<name>/config` steps changing `table.include.list`): configuration version
    /// `v` (from 1) captures `later_tables[v - 1]` (the signal table among them, as above);
    /// version 0 is this one. Every other property stays as it is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub later_tables: Vec<Vec<TableId>>,
    /// `message.key.columns` naming a table's nullable unique column
    /// ([`crate::core::ids::UniqueColumn`]): the table's records are keyed by it, and its
    /// incremental snapshot orders and bounds its chunks by it (`getQueryColumns` through the key
    /// mapper). The column's values are the table's (one NULL row), kept here because the task
    /// reads them in the rows its chunk queries return.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub message_key_columns: Vec<(TableId, crate::core::ids::UniqueColumn)>,
    /// Tables without a primary key that `message.key.columns` gives no key: their records have a
    /// null key (`TableSchemaBuilder.create` builds no key schema, so `TableSchema
    /// .keyFromColumnData` returns null), and `getQueryColumns` finds no column to chunk them by
    /// unless a signal names a `surrogate-key`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub null_key_tables: Vec<TableId>,
}

/// `incremental.snapshot.watermarking.strategy` (`SignalBasedIncrementalSnapshotChangeEventSource
/// .getWatermarkWindowCloser`): how a chunk's window is closed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WatermarkingStrategy {
    /// `insert_insert` (default): a `snapshot-window-close` row is inserted.
    #[default]
    InsertInsert,
    /// `insert_delete`: the `-open` row is deleted, and its DELETE event is the close.
    InsertDelete,
}

impl WatermarkingStrategy {
    pub const ALL: [WatermarkingStrategy; 2] = [WatermarkingStrategy::InsertInsert, WatermarkingStrategy::InsertDelete];

    pub fn name(self) -> &'static str {
        match self {
            WatermarkingStrategy::InsertInsert => "insert_insert",
            WatermarkingStrategy::InsertDelete => "insert_delete",
        }
    }
}

/// The signal table and the incremental snapshot's settings (reference debezium-postgres.md §6).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Signalling {
    /// `signal.data.collection`: the signal table (a captured table).
    pub table: TableId,
    /// `incremental.snapshot.chunk.size` (default 1 024).
    pub chunk_size: u32,
    /// `incremental.snapshot.watermarking.strategy` (default `insert_insert`).
    pub watermarking: WatermarkingStrategy,
    /// What the scenario's scripted signal rows say, by key − 1 (their `type` and `data`
    /// columns; see [`crate::core::signal`]), then the Kafka channel's signals this connector
    /// reads ([`KafkaChannel::signals`] point here).
    pub signals: Vec<crate::core::signal::Signal>,
    /// `signal.enabled.channels` has `source` (the default): signal rows read from the WAL are
    /// executed, and the watermark rows open and close windows (they are source-channel
    /// signals, `OpenIncrementalSnapshotWindow`/`CloseIncrementalSnapshotWindow`).
    #[serde(default = "yes")]
    pub source_channel: bool,
    /// `signal.enabled.channels` has `kafka`: the channel's settings and the signals on its topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka: Option<KafkaChannel>,
    /// `read.only` (default false): the read-only incremental snapshot (reference
    /// debezium-postgres.md §6.5; `PostgresReadOnlyIncrementalSnapshotChangeEventSource`):
    /// `pg_current_snapshot()` watermarks instead of watermark rows, windows opened and closed
    /// by the xids of streamed events, commits and idle iterations of the streaming loop.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

fn yes() -> bool {
    true
}

/// The Kafka signal channel (reference debezium-postgres.md §6.1, Debezium's
/// `KafkaSignalChannel` and `SignalProcessor`): a consumer of partition 0 of
/// `signal.kafka.topic` (`assign`, not `subscribe`), in group `signal.kafka.groupId` with the
/// consumer defaults the channel sets (`enable.auto.commit=true`, `auto.offset.reset=earliest`),
/// polled by the SignalProcessor's own thread every `signal.poll.interval.ms`. A record whose key
/// is not the connector's `topic.prefix` is logged and dropped. No position is stored in the
/// connector's offsets (DBZ-7856 removed the last one): a new task starts where the group
/// committed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KafkaChannel {
    /// The topic's place among the scenario's signal topics ([`crate::core::event::Topic::Signal`]).
    pub topic: u16,
    /// `signal.kafka.topic` (default `<topic.prefix>-signal`).
    pub topic_name: String,
    /// `signal.kafka.groupId` (default `kafka-signal`).
    pub group_id: String,
    /// `signal.poll.interval.ms` (default 5,000).
    pub poll_interval_ms: u64,
    /// `signal.consumer.auto.commit.interval.ms` (the consumer's `auto.commit.interval.ms`,
    /// default 5,000): `poll()` commits the positions it returned before, at most this often.
    pub auto_commit_interval_ms: u64,
    /// The signals produced to the topic, by the record's key − 1 (their number on the topic in
    /// the scenario's order): the record's key string and, where it is this connector's
    /// `topic.prefix`, the signal's place + 1 in [`Signalling::signals`] (0: another connector's).
    pub signals: Vec<KafkaSignalEntry>,
}

/// One signal record of a Kafka signal topic as a connector reads it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KafkaSignalEntry {
    /// The record's key (`kafka-console-producer --property parse.key=true`).
    pub key: String,
    /// The signal's place + 1 in [`Signalling::signals`]; 0 when the key is not this connector's.
    pub origin: u8,
}

impl Signalling {
    /// The `additional-conditions` filter of `table` in the `execute-snapshot` whose row has key
    /// `signal` (0: none known).
    pub fn filter(&self, table: TableId, signal: u8) -> Option<crate::core::signal::RowFilter> {
        let signal = self.signals.get(usize::from(signal).checked_sub(1)?)?;
        match &signal.action {
            crate::core::signal::SignalAction::ExecuteSnapshot { conditions, .. } => {
                conditions.iter().find(|(of, _)| *of == table).map(|(_, filter)| *filter)
            }
            _ => None,
        }
    }

    /// The `surrogate-key` of the `execute-snapshot` whose row has key `signal` (0: none known).
    pub fn surrogate_key(&self, signal: u8) -> Option<&crate::core::signal::SurrogateKey> {
        let signal = self.signals.get(usize::from(signal).checked_sub(1)?)?;
        match &signal.action {
            crate::core::signal::SignalAction::ExecuteSnapshot { surrogate_key, .. } => surrogate_key.as_ref(),
            _ => None,
        }
    }
}

impl DebeziumConfig {
    /// The tables the initial snapshot reads, in order.
    pub fn snapshot_tables(&self) -> &[TableId] {
        self.snapshot_tables.as_deref().unwrap_or(&self.tables)
    }

    /// The signal table, if one is configured.
    pub fn signal_table(&self) -> Option<TableId> {
        self.signalling.as_ref().map(|signalling| signalling.table)
    }
}

/// The logical decoding message a `heartbeat.action.query` of the form
/// `SELECT pg_logical_emit_message(transactional, 'prefix', content)` writes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HeartbeatMessage {
    pub transactional: bool,
    pub prefix: String,
    /// The content's size (`now()::varchar` is 29 bytes: `2026-12-01 22:11:20.123456+00`).
    pub payload_bytes: u64,
}

/// `LogicalDecodingMessageFilter`: a message becomes a record on `<topic.prefix>.message` when
/// its prefix is in `message.prefix.include.list`, or, with an exclude list, not in it; with
/// neither, every message does. (Debezium matches the lists as regular expressions against the
/// whole prefix; the model takes prefixes by name.)
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MessagePrefixFilter {
    #[default]
    All,
    Include(Vec<String>),
    Exclude(Vec<String>),
}

impl MessagePrefixFilter {
    /// `LogicalDecodingMessageFilter.isIncluded(prefix)`.
    pub fn captures(&self, prefix: &str) -> bool {
        match self {
            MessagePrefixFilter::All => true,
            MessagePrefixFilter::Include(prefixes) => prefixes.iter().any(|p| p == prefix),
            MessagePrefixFilter::Exclude(prefixes) => !prefixes.iter().any(|p| p == prefix),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(version: (u32, u32)) -> DebeziumConfig {
        DebeziumConfig {
            version,
            pgjdbc: None,
            name: "claims-connector".into(),
            connector_index: 0,
            topic_prefix: "claims".into(),
            slot_name: "debezium".into(),
            plugin_name: "pgoutput".into(),
            publication_name: "dbz_publication".into(),
            publication_filtered: false,
            snapshot_mode: SnapshotMode::Initial,
            snapshot_fetch_size: 10_240,
            max_batch_size: 2_048,
            poll_interval_ms: 500,
            retriable_restart_connector_wait_ms: 10_000,
            tombstones_on_delete: true,
            log_position_check_enable: true,
            offset_mismatch_strategy: OffsetMismatchStrategy::NoValidation,
            slot_seek_to_known_offset_on_start: false,
            lsn_flush_mode: LsnFlushMode::Connector,
            heartbeat_interval_ms: 0,
            slot_failover: false,
            heartbeat_action_table: None,
            heartbeat_action_message: None,
            message_prefixes: MessagePrefixFilter::All,
            tables: Vec::new(),
            snapshot_tables: None,
            signalling: None,
            later_tables: Vec::new(),
            message_key_columns: Vec::new(),
            null_key_tables: Vec::new(),
        }
    }

    /// The seek by release: none before 2.1, mandatory 2.1 to 2.4, opt-in 2.5 to 3.3, by strategy
    /// from 3.4, and from 3.6 only while the slot is behind; never without LSN flushing.
    #[test]
    fn the_slot_seek_of_each_release() {
        assert_eq!(config((2, 0)).slot_seek(), SlotSeek::Never);
        assert_eq!(config((2, 1)).slot_seek(), SlotSeek::Always);
        assert_eq!(config((2, 4)).slot_seek(), SlotSeek::Always);
        assert_eq!(config((2, 5)).slot_seek(), SlotSeek::Never);
        let opted = DebeziumConfig { slot_seek_to_known_offset_on_start: true, ..config((3, 3)) };
        assert_eq!(opted.slot_seek(), SlotSeek::Always);
        let trust = |version| DebeziumConfig {
            offset_mismatch_strategy: OffsetMismatchStrategy::TrustOffset,
            ..config(version)
        };
        assert_eq!(trust((3, 5)).slot_seek(), SlotSeek::Always);
        assert_eq!(trust((3, 6)).slot_seek(), SlotSeek::WhenSlotBehind);
        let slot = DebeziumConfig { offset_mismatch_strategy: OffsetMismatchStrategy::TrustSlot, ..config((3, 6)) };
        assert_eq!(slot.slot_seek(), SlotSeek::Never);
        let manual = DebeziumConfig { lsn_flush_mode: LsnFlushMode::Manual, ..config((2, 1)) };
        assert_eq!(manual.slot_seek(), SlotSeek::Never);
        // DBZ-6191: 2.2 to 2.4 only log a refused seek.
        assert!(config((2, 1)).slot_seek_refusal_fails());
        assert!(!config((2, 2)).slot_seek_refusal_fails() && !config((2, 4)).slot_seek_refusal_fails());
        assert!(config((2, 5)).slot_seek_refusal_fails());
    }
}
