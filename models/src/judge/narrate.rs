//! The narrator: one line of plain language per observation worth reading, in the user's terms —
//! simulated time as `t=61.200s`, LSNs as `0/16B3748`, the real setting that mattered. The same
//! narrator reads a simulation trace and a model-checking counterexample (the story `handoff
//! check` prints for each one, `exhaustive::check`).

use crate::core::change::ChangeKind;
use crate::core::event::{KafkaRecord, Topic, TopicPartition};
use crate::core::ids::Role;
use crate::core::ids::{Key, Row, TableId};
use crate::core::observe::{GateVerdict, Observation, ScanSnapshot, SinkAction, SnapshotCase, TraceEvent};
use crate::core::protocol::ConnectorState;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Names the narrator needs: tables and the topic prefix.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Names {
    pub tables: Vec<String>,
    pub topic_prefix: String,
    /// The outbox tables (`[[table]] outbox`): their rows are the service's events.
    pub outboxes: Vec<TableId>,
    /// The topics the connectors' transforms route records to ([`Topic::Routed`]).
    pub routed: Vec<String>,
    /// Every connector's name and `topic.prefix`, in `[[connector]]` order.
    #[serde(default)]
    pub connectors: Vec<(String, String)>,
    /// The `topic.prefix` of each table's change topic, by table id, where another connector than
    /// the first captures it (empty: every table's is `topic_prefix`).
    #[serde(default)]
    pub change_prefixes: Vec<String>,
    /// The connector whose observation is being told (its lines carry its name).
    #[serde(default)]
    pub speaking_for: u8,
    /// The message outboxes' prefixes, in order (`[[message_outbox]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub message_outboxes: Vec<String>,
    /// The signal tables (`signal.data.collection`): the `id` and `type` of the rows the
    /// script inserts, by key − 1, and why no connector reads them, when none can.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signal_tables: Vec<SignalTableNames>,
    /// The Kafka signal channels' topics ([`Topic::Signal`]), and the signals on each, by the
    /// record's key − 1: `(id, type, record key)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signal_topics: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kafka_signals: Vec<Vec<(String, String, String)>>,
    /// A connector runs read-only incremental snapshots (`read.only=true`): windows move by xid.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// The tables with a two-column primary key (`[[table]] primary_key`): their keys are told
    /// as the columns' values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub composite_keys: Vec<(TableId, crate::core::ids::CompositeKey)>,
    /// The connectors' chunk queries bound each key column on its own (`[versions] debezium`
    /// before 1.8, DBZ-3860).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_column_chunks: bool,
    /// The tables a connector's `message.key.columns` keys by their nullable unique column, and
    /// the column's name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub message_key_columns: Vec<(TableId, String)>,
    /// The tables whose records have a null key (no primary key, no `message.key.columns`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub null_key_tables: Vec<TableId>,
}

/// A signal table as the timeline names its rows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct SignalTableNames {
    pub table: TableId,
    /// `(id, type)` of each scripted signal row, by key − 1.
    pub signals: Vec<(String, String)>,
    /// Why its connector never decodes its rows (it is outside the connector's publication).
    pub unread: Option<String>,
}

impl Names {
    /// A table's name; a message outbox's ([`TableId::message_outbox`]) is its prefix.
    pub fn table(&self, table: TableId) -> &str {
        if let Some(outbox) = table.as_message_outbox() {
            return self.message_outboxes.get(usize::from(outbox)).map_or("?", String::as_str);
        }
        self.tables.get(usize::from(table.0)).map_or("?", String::as_str)
    }

    /// The names of a scenario's tables and topics.
    pub fn of(spec: &crate::scenario::spec::Spec) -> Names {
        Names {
            tables: spec.tables.iter().map(|table| table.name.clone()).collect(),
            topic_prefix: spec.debezium.topic_prefix.clone(),
            outboxes: spec.tables.iter().filter(|table| table.outbox.is_some()).map(|table| table.id).collect(),
            routed: spec.routed_topic_names(),
            signal_topics: spec.signal_topics.iter().map(|topic| topic.name.clone()).collect(),
            kafka_signals: spec
                .signal_topics
                .iter()
                .map(|topic| {
                    topic.signals.iter().map(|s| (s.id.clone(), s.signal_type.clone(), s.key.clone())).collect()
                })
                .collect(),
            connectors: spec.connectors().map(|d| (d.name.clone(), d.topic_prefix.clone())).collect(),
            change_prefixes: if spec.connector_count() == 1 {
                Vec::new()
            } else {
                spec.tables
                    .iter()
                    .map(|table| {
                        let capturing = spec.connectors().find(|d| d.tables.contains(&table.id));
                        capturing.unwrap_or(&spec.debezium).topic_prefix.clone()
                    })
                    .collect()
            },
            speaking_for: 0,
            message_outboxes: spec.message_outboxes.iter().map(|outbox| outbox.prefix.clone()).collect(),
            signal_tables: spec
                .connectors()
                .filter_map(|d| d.signalling.as_ref().map(|signalling| (d, signalling)))
                .map(|(d, signalling)| {
                    let signals = signalling
                        .signals
                        .iter()
                        .map(|signal| (signal.id.clone(), signal.action.signal_type().to_string()))
                        .collect();
                    let unread = spec.unpublished_signal_table(d).map(|publication| {
                        format!(
                            "{} is not in publication {publication} (created before the run without it; \
                             publication.autocreate.mode=all_tables uses an existing publication as it is): no \
                             walsender decodes its rows, so the connector never reads this signal",
                            spec.tables.get(usize::from(signalling.table.0)).map_or("?", |t| t.name.as_str())
                        )
                    });
                    SignalTableNames { table: signalling.table, signals, unread }
                })
                .collect(),
            read_only: spec.connectors().any(|d| d.signalling.as_ref().is_some_and(|signalling| signalling.read_only)),
            composite_keys: spec
                .tables
                .iter()
                .filter_map(|table| table.composite_key.clone().map(|key| (table.id, key)))
                .collect(),
            per_column_chunks: spec.debezium.chunk_bounds_per_column(),
            message_key_columns: spec
                .connectors()
                .flat_map(|d| d.message_key_columns.iter().map(|(table, column)| (*table, column.name.clone())))
                .collect(),
            null_key_tables: spec.debezium.null_key_tables.clone(),
        }
    }

    /// Whether the first connector gives `table`'s records a null key.
    pub fn null_key(&self, table: TableId) -> bool {
        self.null_key_tables.contains(&table)
    }

    /// A chunk position of `table` (the last key a chunk read or a snapshot row sent): `NULL`
    /// on a nullable key column, else the number.
    pub fn position(&self, table: TableId, position: crate::core::ids::Key) -> String {
        match self.message_key_column(table) {
            Some(_) => crate::core::ids::UniqueColumn::text(position),
            None => position.to_string(),
        }
    }

    /// The nullable unique column `message.key.columns` keys `table` by, if one does.
    pub fn message_key_column(&self, table: TableId) -> Option<&str> {
        self.message_key_columns.iter().find(|(id, _)| *id == table).map(|(_, column)| column.as_str())
    }

    /// The two-column key of `table`, if it has one.
    pub fn composite_key(&self, table: TableId) -> Option<&crate::core::ids::CompositeKey> {
        self.composite_keys.iter().find(|(id, _)| *id == table).map(|(_, key)| key)
    }

    /// Whether `table` is the default example's claims table (`public.claims`, keyed by `id`):
    /// its rows are told as claims (`update claim 7`), any other table's as rows of it.
    pub fn claims(&self, table: TableId) -> bool {
        self.table(table) == "public.claims" && self.composite_key(table).is_none()
    }

    /// A finding's key as `table` names it: `(region_id, hub_id) = (3, 1)` on a two-column key,
    /// else the number; `None` on the claims table ([`Names::claims`]), whose findings say `key 7`.
    pub fn key_label(&self, table: TableId, key: crate::core::ids::Key) -> Option<String> {
        if self.claims(table) || table.as_message_outbox().is_some() {
            return None;
        }
        Some(match self.composite_key(table) {
            Some(composite) => composite.text(key),
            None => self.position(table, key),
        })
    }

    /// A key with its table, for a sentence that says `key …`: `7` on the claims table, else
    /// `7 of public.orders` or `(region_id, hub_id) = (3, 1) of public.hubs`.
    pub fn key_of(&self, table: TableId, key: crate::core::ids::Key) -> String {
        match self.key_label(table, key) {
            Some(label) => format!("{label} of {}", self.table(table)),
            None => key.to_string(),
        }
    }

    /// A row of `table` in words: `claim 7` on the claims table, else `row 7` or `row (2, 6)`
    /// (a two-column key's values), without the table's name.
    pub fn row(&self, table: TableId, key: crate::core::ids::Key) -> String {
        if self.claims(table) {
            return format!("claim {key}");
        }
        format!("row {}", self.key_values(table, key))
    }

    /// A row of `table` with its table: `claim 7` on the claims table, else `row 7 of
    /// public.orders` or `row (region_id, hub_id) = (2, 6) of public.hubs`.
    pub fn row_of(&self, table: TableId, key: crate::core::ids::Key) -> String {
        if self.claims(table) {
            return format!("claim {key}");
        }
        match self.composite_key(table) {
            Some(composite) => format!("row {} of {}", composite.text(key), self.table(table)),
            None => format!("row {key} of {}", self.table(table)),
        }
    }

    /// A key of `table` as its columns' values: `(2, 6)` on a two-column key, else the number.
    pub fn key_values(&self, table: TableId, key: crate::core::ids::Key) -> String {
        self.composite_key(table).map_or_else(|| key.to_string(), |composite| composite.values_text(key))
    }

    /// A row of a signal table in words (`'ad-hoc-1' (execute-snapshot)`, `'…-open'
    /// (snapshot-window-open)`), if `table` is one.
    fn signal_row(&self, table: TableId, key: crate::core::ids::Key) -> Option<(String, Option<&str>)> {
        let names = self.signal_tables.iter().find(|names| names.table == table)?;
        Some(match crate::core::signal::watermark_of(key) {
            Some((chunk, watermark)) => {
                (format!("'{chunk}-{}' ({})", watermark.suffix(), watermark.signal_type()), None)
            }
            None => {
                let row = match usize::try_from(key - 1).ok().and_then(|index| names.signals.get(index)) {
                    Some((id, signal_type)) => format!("'{id}' ({signal_type})"),
                    None => format!("row {key}"),
                };
                (row, names.unread.as_deref())
            }
        })
    }

    /// A connector's name, by its place.
    pub fn connector(&self, connector: u8) -> String {
        self.connectors
            .get(usize::from(connector))
            .map_or_else(|| format!("connector {}", u32::from(connector) + 1), |(name, _)| name.clone())
    }

    /// The names as connector `connector` sees them (its topic prefix).
    fn of_connector(&self, connector: u8) -> Names {
        let mut names = self.clone();
        if let Some((_, prefix)) = self.connectors.get(usize::from(connector)) {
            names.topic_prefix.clone_from(prefix);
        }
        names.speaking_for = connector;
        names
    }

    pub fn topic(&self, topic: Topic) -> String {
        match topic {
            Topic::Change(table) => {
                let prefix = self.change_prefixes.get(usize::from(table.0)).unwrap_or(&self.topic_prefix);
                format!("{prefix}.{}", self.table(table))
            }
            Topic::Heartbeat => format!("__debezium-heartbeat.{}", self.topic_prefix),
            Topic::Message => format!("{}.message", self.topic_prefix),
            Topic::HeartbeatOf(c) => format!("__debezium-heartbeat.{}", self.prefix_of(c)),
            Topic::MessageOf(c) => format!("{}.message", self.prefix_of(c)),
            Topic::Routed(index) => {
                self.routed.get(usize::from(index)).cloned().unwrap_or_else(|| format!("routed topic {index}"))
            }
            Topic::Signal(index) => {
                self.signal_topics.get(usize::from(index)).cloned().unwrap_or_else(|| format!("signal topic {index}"))
            }
        }
    }

    fn prefix_of(&self, connector: u8) -> &str {
        self.connectors.get(usize::from(connector)).map_or("?", |(_, prefix)| prefix.as_str())
    }

    /// A row operation in words: `delete claim 500 from public.claims`.
    pub fn row_op(&self, op: &crate::core::change::RowOp) -> String {
        use crate::core::change::RowOp;
        match *op {
            RowOp::Insert { table, key, status, .. } => {
                format!("insert {} ({}) into {}", self.row(table, key), status.name(), self.table(table))
            }
            RowOp::Update { table, key, status } => {
                format!("update {} to {} in {}", self.row(table, key), status.name(), self.table(table))
            }
            RowOp::Delete { table, key } => format!("delete {} from {}", self.row(table, key), self.table(table)),
            RowOp::InsertEvent { table, id, aggregate_id, event_type } => format!(
                "insert outbox event {id} ({} of claim {aggregate_id}) into {}",
                Row::event(aggregate_id, event_type).event_type(),
                self.table(table)
            ),
        }
    }

    /// A partition as Kafka names it (`TopicPartition.toString()`): `claims.public.claims-0`.
    pub fn partition(&self, tp: TopicPartition) -> String {
        format!("{}-{}", self.topic(tp.topic), tp.partition)
    }

    /// Positions in partitions, each named: `claims.public.claims-0@13 claims.public.claims-1@7`.
    pub fn positions(&self, positions: &[(TopicPartition, u64)]) -> String {
        if positions.is_empty() {
            return "no partition".into();
        }
        positions
            .iter()
            .map(|(tp, position)| format!("{}@{position}", self.partition(*tp)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// `t=12.345s  connect   text`, or `None` for observations not narrated one by one. (A time of
/// 1000 s or more widens its column by a character or two.)
pub fn line(event: &TraceEvent, names: &Names) -> Option<String> {
    let text = narrate(&event.observation, names)?;
    Some(format!("{:<10} {:<9} {}", event.at.to_string(), event.node.name(), text))
}

fn change_text(kind: &ChangeKind, row: &str) -> String {
    match kind {
        ChangeKind::Insert { after } => format!("insert {row} ({after})"),
        ChangeKind::Update { after, .. } => format!("update {row} -> {after}"),
        ChangeKind::Delete { .. } => format!("delete {row}"),
    }
}

/// The offsets records went to, per partition, each named: `claims.public.claims-0@13..15`.
pub fn partitions_summary(records: &[KafkaRecord], names: &Names) -> String {
    let mut ranges: BTreeMap<TopicPartition, (u64, u64)> = BTreeMap::new();
    for record in records {
        let range = ranges.entry(record.tp).or_insert((record.offset, record.offset));
        range.0 = range.0.min(record.offset);
        range.1 = range.1.max(record.offset);
    }
    ranges
        .iter()
        .map(|(tp, (low, high))| {
            let partition = names.partition(*tp);
            if low == high { format!("{partition}@{low}") } else { format!("{partition}@{low}..{high}") }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn narrate(observation: &Observation, names: &Names) -> Option<String> {
    Some(match observation {
        Observation::OfConnector { connector, observation } => {
            let text = narrate(observation, &names.of_connector(*connector))?;
            format!("[{}] {text}", names.connector(*connector))
        }
        Observation::Committed { txn, .. } => {
            let mut text = format!("xid {} committed at {}: ", txn.xid, txn.commit_lsn);
            let shown: Vec<String> = txn
                .changes
                .iter()
                .take(3)
                .map(|c| {
                    // A claim of the claims table is told as one (`update claim 7 -> …`); a row of
                    // another table with its key's values and its table (`update row (2, 6) -> …
                    // in public.hubs`), an outbox row as its event.
                    if let Some((signal, unread)) = names.signal_row(c.table, c.key) {
                        let verb = match c.kind {
                            crate::core::change::ChangeKind::Delete { .. } => "delete",
                            _ => "insert",
                        };
                        let why = unread.map(|why| format!(": {why}")).unwrap_or_default();
                        return format!("{verb} signal {signal} in {}{why}", names.table(c.table));
                    }
                    let event = matches!(&c.kind, ChangeKind::Insert { after } if after.is_event())
                        || (names.outboxes.contains(&c.table) && matches!(c.kind, ChangeKind::Delete { .. }));
                    if event {
                        let text = change_text(&c.kind, &format!("outbox event {}", c.key));
                        return if names.claims(c.table) {
                            text
                        } else {
                            format!("{text} in {}", names.table(c.table))
                        };
                    }
                    let text = change_text(&c.kind, &names.row(c.table, c.key));
                    if names.claims(c.table) { text } else { format!("{text} in {}", names.table(c.table)) }
                })
                .collect();
            text.push_str(&shown.join(", "));
            if txn.changes.len() > 3 {
                let _ = write!(text, " and {} more", txn.changes.len() - 3);
            }
            text
        }
        Observation::SlotCreated { slot, restart_lsn, consistent_point, snapshot_name, .. } => format!(
            "slot \"{slot}\" created: restart_lsn {restart_lsn}, consistent point {consistent_point}, exported snapshot {snapshot_name}"
        ),
        Observation::SlotDropped { slot, .. } => format!("slot \"{slot}\" dropped"),
        Observation::ScanStarted { client, table, snapshot, snapshot_csn, wal_lsn, rows, .. } => format!(
            "SELECT * FROM {} for {client}: {}, sees the first {snapshot_csn} commit(s) of the run (WAL at {wal_lsn}); {rows} rows",
            names.table(*table),
            match snapshot {
                ScanSnapshot::Exported { name } => format!("REPEATABLE READ on exported snapshot {name}"),
                ScanSnapshot::Statement => "READ COMMITTED, its own statement snapshot".into(),
            }
        ),
        Observation::StreamStarted { slot, client, requested, confirmed_flush, start, restart_lsn, .. } => {
            let mut text = format!(
                "START_REPLICATION SLOT \"{slot}\" LOGICAL {requested} from {client}: confirmed_flush {confirmed_flush}, reading WAL from {restart_lsn}"
            );
            if start > requested && requested.is_valid() {
                let _ = write!(text, "; {requested} has been already streamed, forwarding to {start}");
            } else {
                let _ = write!(text, "; streaming transactions committing at or after {start}");
            }
            text
        }
        Observation::SlotConfirmed { slot, from, to, by, .. } => {
            format!("slot \"{slot}\" confirmed_flush {from} -> {to} (feedback from {by}; in memory, not saved)")
        }
        Observation::SlotSaved { slot, restart_lsn, confirmed_flush, .. } => {
            format!("slot \"{slot}\" saved to disk: restart_lsn {restart_lsn}, confirmed_flush {confirmed_flush}")
        }
        Observation::Checkpoint { lsn, .. } => format!("checkpoint at {lsn}"),
        Observation::SlotSought { slot, target, refused: None } => {
            format!(
                "Debezium seeks slot \"{slot}\" to {target}, where its offset resumes (pg_replication_slot_advance)"
            )
        }
        Observation::SlotSought { slot, target, refused: Some(error) } => format!(
            "Debezium's seek of slot \"{slot}\" to {target}, where its offset resumes, was refused ({error}): the slot is ahead; \
             this release only logs it and streams on (DBZ-6191)"
        ),
        Observation::WalPositionFound { resume, reconnect_at } => format!(
            "the restart's search found the resume position {resume}; reconnecting at lsn_proc {reconnect_at}, filtering the replay up to it"
        ),
        Observation::CrashRecoveryEnded { .. } => {
            "crash recovery done; the end-of-recovery checkpoint runs before connections are accepted".into()
        }
        Observation::CommitWritten { xid, commit_lsn, .. } => {
            format!("transaction {xid}: commit record at {commit_lsn} in WAL; not yet visible")
        }
        Observation::MessageWritten { lsn, transactional, xid, prefix, database, content, .. } => {
            let kind = if *transactional { "transactional" } else { "non-transactional" };
            let mut text = format!("logical message '{prefix}' ({kind}) written, ending at {lsn}");
            if let Some(event) = content.event() {
                let _ = write!(
                    text,
                    ", carrying outbox event {} ({} of claim {})",
                    event.id,
                    event.row().event_type(),
                    event.aggregate_id
                );
            }
            if let Some(xid) = xid.filter(|_| *transactional) {
                let _ = write!(text, ", in transaction {xid}");
            }
            if let Some(database) = database {
                let _ = write!(text, ", in database \"{database}\"");
            }
            text
        }
        Observation::SessionTerminated { client, xid, idle_ms, .. } => {
            let what = match xid {
                Some(xid) => format!("its transaction {xid} aborted"),
                None => "its transaction had written nothing".to_string(),
            };
            format!(
                "terminated a session of {client} idle in transaction for {} (idle_in_transaction_session_timeout): \
                 {what}",
                crate::core::units::duration_text(*idle_ms)
            )
        }
        Observation::WalSenderTimedOut { client, slot, timeout_ms, .. } => format!(
            "terminated the walsender of {client} on slot \"{slot}\": no reply for {} (wal_sender_timeout); the \
             slot is free",
            crate::core::units::duration_text(*timeout_ms)
        ),
        Observation::SlotCreationWaiting { slot, found, at, xids, .. } => {
            let xids: Vec<String> = xids.iter().map(|xid| xid.to_string()).collect();
            format!(
                "slot \"{slot}\" being created: found {found} at {at}; waiting for transaction(s) {} to end",
                xids.join(", ")
            )
        }
        Observation::SlotInvalidated { slot, restart_lsn, oldest_kept, walsender_terminated, .. } => {
            let mut text = format!(
                "invalidating slot \"{slot}\" because its restart_lsn {restart_lsn} exceeds max_slot_wal_keep_size \
                 (WAL kept from {oldest_kept}); wal_status lost"
            );
            if *walsender_terminated {
                text.push_str("; its walsender was terminated first");
            }
            text
        }
        Observation::Heartbeat { lsn, action_query } => {
            let mut text = match lsn {
                Some(lsn) => format!("heartbeat record with the current offset ({lsn})"),
                None => "heartbeat (no offset yet, no record)".to_string(),
            };
            if *action_query {
                text.push_str("; heartbeat.action.query run");
            }
            text
        }
        Observation::KeepaliveConfirmed { lsn } => format!(
            "the JDBC driver confirmed keep-alive {lsn} to the slot on its own (pgjdbc automatic flush; not in the stored offset)"
        ),
        Observation::SlotSynced { slot, restart_lsn, confirmed_flush, .. } => {
            format!("slotsync: synced slot \"{slot}\" at restart_lsn {restart_lsn}, confirmed_flush {confirmed_flush}")
        }
        Observation::SlotInfoRetry { attempt } => format!(
            "slot info attempt {attempt} of 900: restart_lsn is NULL (\"concurrent tx probably blocks taking snapshot\"); \
             trying again in 2 s, the task still RUNNING"
        ),
        Observation::WalWritten { bytes, end, .. } => {
            format!("{} of WAL written in another database, up to {end}", crate::core::units::size_text(*bytes))
        }
        Observation::ServerStarted { role, slots, .. } => {
            let mut text = format!("server started as {}", if *role == Role::Primary { "primary" } else { "standby" });
            for (slot, confirmed) in slots {
                let _ = write!(text, "; slot \"{slot}\" confirmed_flush {confirmed} (as saved on disk)");
            }
            text
        }
        Observation::Promoted { timeline, switch_lsn, slots, .. } => format!(
            "promoted to primary: timeline {timeline} starts at {switch_lsn}; logical slots here: {}",
            if slots.is_empty() { "none".to_string() } else { slots.join(", ") }
        ),
        Observation::WorkerStarted { target_state } => {
            if *target_state == ConnectorState::Running {
                format!("worker started; connector target state {target_state}")
            } else {
                format!(
                    "worker started; connector target state {target_state} (read back from the config topic): no task starts"
                )
            }
        }
        Observation::TaskStarted { offset } => match offset {
            Some(offset) => format!("task started; stored offset {offset}"),
            None => "task started; no stored offset".into(),
        },
        Observation::LogPositionChecked { available, detail } => {
            format!("log-position check: {} ({detail})", if *available { "available" } else { "NOT available" })
        }
        Observation::SlotRead { row } => match row {
            Some(row) => format!(
                "slot \"{}\" exists: restart_lsn {}, confirmed_flush {}",
                row.slot_name,
                row.restart_lsn.map_or("NULL".into(), |lsn| lsn.to_string()),
                row.confirmed_flush_lsn.map_or("NULL".into(), |lsn| lsn.to_string())
            ),
            None => "slot does not exist".into(),
        },
        Observation::SnapshotDecided { snapshot, reason } => {
            format!("{}: {reason}", if *snapshot { "snapshot" } else { "no snapshot" })
        }
        Observation::SnapshotStarted { case, lsn, .. } => match case {
            SnapshotCase::SlotCreatedNow => format!(
                "snapshot started (case A, slot created by this start): reading the exported snapshot at the consistent point {lsn}"
            ),
            SnapshotCase::SlotExisted => format!(
                "snapshot started (case B, slot already existed): READ COMMITTED reads; streaming will start at pg_current_wal_lsn() = {lsn}"
            ),
        },
        Observation::SnapshotCompleted { rows, .. } => {
            format!("snapshot read {rows} rows; its last record carries snapshot_completed=true")
        }
        Observation::StreamingRequested { start, skip_processed_upto } => match skip_processed_upto {
            Some(upto) => format!("streaming from lsn_proc {start}, skipping replayed changes up to {upto}"),
            None if start.is_valid() => format!("streaming from {start}"),
            None => "streaming from the slot's position".into(),
        },
        Observation::Transformed { routed, dropped, first_drop } => {
            let mut parts = Vec::new();
            if *routed > 0 {
                parts.push(format!("{routed} routed to {}", names.routed.join(", ")));
            }
            if *dropped > 0 {
                let why = first_drop.as_ref().map(|why| format!(" (first: {why})")).unwrap_or_default();
                parts.push(format!("{dropped} dropped, their offsets acknowledged{why}"));
            }
            format!("transforms: {}", parts.join("; "))
        }
        Observation::Polled { summary } => {
            let mut parts = Vec::new();
            if summary.snapshot_rows > 0 {
                parts.push(format!("{} snapshot row(s)", summary.snapshot_rows));
            }
            if summary.changes > 0 {
                let keys: Vec<String> = summary
                    .first_changes
                    .iter()
                    // A logical message's key is its prefix, as a number: not worth a reader's eye.
                    .map(|(op, table, key)| match crate::core::signal::watermark_of(*key) {
                        _ if *op == 'm' => "m (a logical message)".to_string(),
                        // A watermark row of an incremental snapshot: its type, not its key.
                        Some((_, watermark)) => format!("{op} {}", watermark.signal_type()),
                        // A two-column key as its values: `u (5, 2)`.
                        None => {
                            format!("{op} {}", table.map_or_else(|| key.to_string(), |t| names.key_values(t, *key)))
                        }
                    })
                    .collect();
                let more = if summary.changes > summary.first_changes.len() { ", …" } else { "" };
                parts.push(format!("{} change(s): {}{more}", summary.changes, keys.join(", ")));
            }
            if summary.tombstones > 0 {
                parts.push(format!("{} tombstone(s)", summary.tombstones));
            }
            let heartbeats =
                summary.records.saturating_sub(summary.snapshot_rows + summary.changes + summary.tombstones);
            if heartbeats > 0 {
                parts.push(format!("{heartbeats} heartbeat record(s)"));
            }
            if summary.last_snapshot_record {
                parts.push("the last snapshot record".into());
            }
            format!("poll() returned {} record(s): {}", summary.records, parts.join("; "))
        }
        Observation::ProduceAcked { count, completion_marker, .. } => format!(
            "Kafka acknowledged {count} record(s){}",
            if *completion_marker {
                ", including the snapshot completion marker (not yet in the offsets topic)"
            } else {
                ""
            }
        ),
        Observation::OffsetsCommitted { offset } => match offset {
            Some(offset) => format!("offset flush stored {offset}"),
            None => "offset flush: nothing new to store".into(),
        },
        Observation::OffsetFlushFailed { reason } => format!("offset flush failed: {reason}"),
        Observation::LsnFlushed { lsn, from_offset_store: true } => {
            format!("confirmed {lsn} to the slot (from the offset re-read from Kafka)")
        }
        Observation::LsnFlushed { lsn, from_offset_store: false } => format!(
            "confirmed {lsn} to the slot (from the offsets Kafka acknowledged, in memory: before Debezium 2.7, DBZ-7816)"
        ),
        Observation::LsnFlushedLastPolled { lsn } => format!(
            "confirmed {lsn} to the slot (from the last record poll() returned, produced or not: before Debezium 1.1, DBZ-1766)"
        ),
        Observation::TaskFailed { reason } => format!("task FAILED: {reason}"),
        Observation::TaskRestarting { reason, after_ms } => {
            format!("retriable error ({reason}); restarting in {}.{:03}s", after_ms / 1000, after_ms % 1000)
        }
        Observation::TaskStopped { graceful } => {
            if !*graceful {
                "task FAILED after its final offset commit; it waits for a restart (POST /connectors/<name>/tasks/0/restart)"
                    .into()
            } else {
                "task stopped gracefully (final offsets committed)".into()
            }
        }
        Observation::ConnectorReconfigured { version, tables } => {
            let tables: Vec<&str> = tables.iter().map(|table| names.table(*table)).collect();
            format!(
                "connector configuration {version} applied (PUT /connectors/<name>/config): it captures {}; a \
                 running task is stopped (its final offset commit) and started again with it, a stopped connector \
                 takes it when resumed",
                tables.join(", ")
            )
        }
        Observation::FailedTaskReplaced => "task FAILED after its final offset commit; the restart (or, after a \
                                             stop, the resume) requested while it was stopping starts a new task now"
            .into(),
        Observation::TaskFailing { committing } => {
            if *committing {
                "task threw an exception: its send loop ends; Connect awaits the records in flight (up to \
                 offset.flush.timeout.ms) and commits the offsets Kafka acknowledged (finalOffsetCommit)"
                    .into()
            } else {
                "task threw an exception while starting: nothing submitted, nothing to commit".into()
            }
        }
        Observation::RestUnanswered { request, retry_after_ms } => format!(
            "{request}: no Connect worker answers (connection refused); calling again every {}.{:03}s until one does",
            retry_after_ms / 1000,
            retry_after_ms % 1000
        ),
        Observation::RestAnswered { request } => format!("{request}: answered by the Connect worker"),
        Observation::RestForwarded { request, to } => format!("forwarded {request} to {to}"),
        Observation::ConnectConfigWritten { running, tasks } => format!(
            "config topic: the connector's target state is {}, with {tasks} task configuration(s); every worker \
             reads it",
            if *running { "STARTED" } else { "STOPPED" }
        ),
        Observation::RestFailed { request, error, retry_after_ms } => format!(
            "{request} failed: {error}; calling again in {}",
            crate::core::units::duration_text(*retry_after_ms)
        ),
        Observation::SignalExecuted { id, signal_type, data, outcome, via } => {
            let data = if data.trim().is_empty() { "no data" } else { data.as_str() };
            match via.0 {
                None => {
                    format!("signal '{id}' ({signal_type}, {data}) read from the signal table on the stream: {outcome}")
                }
                Some(topic) => format!(
                    "signal '{id}' ({signal_type}, {data}) read from Kafka topic {} by the signal processor: {outcome}",
                    names.topic(crate::core::event::Topic::Signal(topic))
                ),
            }
        }
        Observation::AdditionalConditions { table, filter } => format!(
            "additional-conditions for {}: its maximum-key and chunk queries carry AND ({filter}); rows that do not \
             match are never read (streaming is unaffected)",
            names.table(*table)
        ),
        Observation::IncrementalSnapshotPaused { table, after } => format!(
            "incremental snapshot paused: readChunk writes no watermark and reads nothing; {} waits {} until \
             resume-snapshot or a task restart",
            names.table(*table),
            match after {
                Some(key) => format!("after key {}", names.position(*table, *key)),
                None => "before its first chunk".into(),
            }
        ),
        Observation::IncrementalSnapshotUnpaused { table } => {
            format!(
                "incremental snapshot resumed by resume-snapshot: the next chunk of {} is read now",
                names.table(*table)
            )
        }
        Observation::IncrementalSnapshotStopped { running: false, unmatched, .. } => format!(
            "readChunk found a stop request but no incremental snapshot running: stop ignored{}",
            if unmatched.is_empty() { String::new() } else { format!(" (it named {})", unmatched.join(", ")) }
        ),
        Observation::IncrementalSnapshotStopped { stopped, current, not_queued, unmatched, left, .. } => {
            let list = |tables: &[crate::core::ids::TableId]| {
                tables.iter().map(|table| names.table(*table)).collect::<Vec<_>>().join(", ")
            };
            let mut sentence = if stopped.is_empty() {
                "stop request processed at the start of readChunk: no table of the snapshot was named".to_string()
            } else {
                format!(
                    "stop request processed at the start of readChunk: {} removed from the incremental snapshot",
                    list(stopped)
                )
            };
            if *current {
                sentence.push_str("; the current table's rows not yet read are never emitted");
            }
            if !not_queued.is_empty() {
                sentence.push_str(&format!("; could not remove {}: not part of the snapshot", list(not_queued)));
            }
            if !unmatched.is_empty() {
                sentence
                    .push_str(&format!("; could not remove {}: no captured table has that name", unmatched.join(", ")));
            }
            sentence.push_str(&match left.as_slice() {
                [] => "; no table left".to_string(),
                left => format!("; still to read: {}", list(left)),
            });
            sentence
        }
        Observation::IncrementalSnapshotStarted { tables } => format!(
            "incremental snapshot started for {}: chunk by chunk, between watermarks, while the stream runs",
            tables.iter().map(|table| names.table(*table)).collect::<Vec<_>>().join(", ")
        ),
        Observation::IncrementalSnapshotResumed { table, after } => format!(
            "the stored offset says an incremental snapshot was running: reading {} again {} with a fresh chunk id \
             (the window buffer was in memory)",
            names.table(*table),
            match after {
                Some(key) => {
                    format!(
                        "after key {}, the last snapshot row the stored offset names,",
                        names.position(*table, *key)
                    )
                }
                None => "from its first key (the stored offset names no snapshot row of it)".into(),
            }
        ),
        Observation::ChunkRead { table, chunk, after, last, rows, maximum_key, filter, order, nulls } => {
            let composite = names.composite_key(*table).filter(|_| order.is_primary_key());
            let nullable = names.message_key_column(*table).filter(|_| !nulls.is_none());
            let column = match (composite, nullable) {
                (Some(key), _) => key.columns_text(),
                (None, Some(name)) => format!("({name})"),
                (None, None) => format!("({})", order.name()),
            };
            let value = |key: Key| match composite {
                Some(composite) => composite.values_text(key),
                None if nullable.is_some() => format!("({})", crate::core::ids::UniqueColumn::text(key)),
                None => format!("({key})"),
            };
            let mut conditions: Vec<String> = Vec::new();
            let bounds = match (after, composite) {
                (Some(after), None) if let Some(name) = nullable => null_bounds(name, *nulls, *after, *maximum_key),
                (Some(after), Some(key)) if names.per_column_chunks => {
                    let [first, second] = &key.columns;
                    let ((a1, a2), (u1, u2)) = (key.values(*after), key.values(*maximum_key));
                    format!(
                        "{first} >= {a1} AND {second} >= {a2} AND NOT ({first} = {a1} AND {second} = {a2}) AND \
                         {first} <= {u1} AND {second} <= {u2} (each key column compared on its own: Debezium \
                         before 1.8, DBZ-3860)"
                    )
                }
                (Some(after), _) => {
                    format!("{column} > {} AND {column} <= {}", value(*after), value(*maximum_key))
                }
                (None, _) => String::new(),
            };
            conditions.extend((!bounds.is_empty()).then_some(bounds));
            if let Some(filter) = &filter.0 {
                conditions.push(format!("({filter})"));
            }
            let mut range = if conditions.is_empty() {
                "with no WHERE (the first chunk has no bounds)".to_string()
            } else {
                format!("WHERE {}", conditions.join(" AND "))
            };
            if !order.is_primary_key() {
                range.push_str(&format!(" ORDER BY {} (surrogate-key)", order.name()));
            }
            if let Some(name) = nullable {
                range.push_str(&format!(" ORDER BY {name} (message.key.columns; NULL sorts last)"));
            }
            let read = match last {
                Some(last) if composite.is_some() || nullable.is_some() => {
                    format!("{rows} row(s) up to key {column} = {} into the window buffer", value(*last))
                }
                Some(last) if order.is_primary_key() => {
                    format!("{rows} row(s) up to key {last} into the window buffer")
                }
                Some(last) => format!("{rows} row(s) up to {} {last} into the window buffer", order.name()),
                None => "no row: the table is done".into(),
            };
            let read = if names.null_key(*table) && *rows > 1 {
                format!(
                    "{read}, where all {rows} share the one null message key (the table has no primary key): each \
                     replaces the one before, and only the last stays"
                )
            } else {
                read
            };
            if names.read_only {
                format!(
                    "read-only incremental snapshot, chunk {chunk}: chunk query on {} {range}: {read}; high \
                     watermark next",
                    names.table(*table)
                )
            } else {
                format!(
                    "incremental snapshot: open watermark '{chunk}-open' written; chunk query on {} {range}: \
                     {read}; close watermark next",
                    names.table(*table)
                )
            }
        }
        Observation::SignalRowNotRead { key, watermark } => match watermark {
            Some(chunk) => format!(
                "watermark row of chunk {chunk} read on the stream as a plain record: signal.enabled.channels has no \
                 source channel, and the window events are source-channel signals, so no window opens or closes \
                 (signalling.adoc: Kafka signals for incremental snapshots need the source channel enabled)"
            ),
            None => format!(
                "signal table row {key} read on the stream as a plain record: signal.enabled.channels has no source \
                 channel, so it is not executed"
            ),
        },
        Observation::KafkaSignalConsumerStarted { topic, group, position, committed } => format!(
            "Kafka signal channel: consumer of {}-0 (group \"{group}\") starts at offset {position} ({})",
            names.topic(crate::core::event::Topic::Signal(*topic)),
            if *committed { "the group's committed position" } else { "nothing committed: auto.offset.reset=earliest" }
        ),
        Observation::KafkaSignalSkipped { topic, offset, key, prefix } => format!(
            "Kafka signal at {}-0@{offset} skipped: Signal key '{key}' doesn't match the connector's name '{prefix}' \
             (KafkaSignalChannel compares the record key with topic.prefix)",
            names.topic(crate::core::event::Topic::Signal(*topic))
        ),
        Observation::SurrogateKeyMissing { table, column, at_start } => format!(
            "incremental snapshot: readChunk wrote the open watermark, then threw IllegalArgumentException: Surrogate \
             key \"{column}\" doesn't exist in table \"{}\" (DBZ-7797); {}",
            names.table(*table),
            if *at_start {
                "this is init at the task's start, so the task fails, and will at every start while the offsets \
                 carry the snapshot"
            } else {
                "the execute-snapshot action failed (a warning in the log) and streaming goes on: no close watermark \
                 will come, the snapshot stays running in the offsets with the table queued, and later snapshots \
                 only queue behind it"
            }
        ),
        Observation::SnapshotWatermark { chunk, high, xids } => format!(
            "read-only incremental snapshot, chunk {chunk}: {} watermark pg_current_snapshot() = {xids} ({})",
            if *high { "high" } else { "low" },
            if *high {
                "after the chunk query"
            } else {
                "before the chunk query; the window opens at the first change of an xid at or above its xmin"
            }
        ),
        Observation::ReadOnlyWindow { chunk, xid, event, rule } => {
            let xid = xid.map_or_else(|| "no xid".to_string(), |xid| format!("xid {xid}"));
            let chunk = chunk.map_or_else(String::new, |chunk| format!(" of chunk {chunk}"));
            let event = match event {
                crate::core::signal::ReadOnlyEvent::Idle => format!("{}, with the last event's", event.describe()),
                _ => format!("{} of", event.describe()),
            };
            use crate::core::signal::ReadOnlyRule;
            match rule {
                ReadOnlyRule::Opened => format!(
                    "window{chunk} opened by {event} {xid}, at or above the low watermark's xmin (streamed \
                     changes of the table now remove their keys from the buffer)"
                ),
                ReadOnlyRule::PastHighWatermark => format!(
                    "window{chunk} closed by {event} {xid}, above both watermarks' xmax: the buffer is emitted \
                     before this change's record, and the next chunk read"
                ),
                ReadOnlyRule::NotOpen => format!(
                    "{event} {xid}, below the low watermark's xmin, finds the window{chunk} not open: the buffer \
                     is emitted at once, before this change's record, and the next chunk read"
                ),
                ReadOnlyRule::HighXmaxCommitted => format!(
                    "{event} {xid}, the high watermark's xmax (maxInProgressTransactionCommitted): window{chunk} \
                     closed, the buffer emitted, the next chunk read"
                ),
                ReadOnlyRule::Visible => format!(
                    "{event} {xid}, at or below the high watermark's xmin (isTransactionVisible): window{chunk} \
                     closed, the buffer emitted, the next chunk read, and again while the watermarks stay the same"
                ),
            }
        }
        Observation::WindowOpened { chunk } => {
            format!(
                "stream reached '{chunk}-open': window opened (streamed events now remove their keys from the buffer)"
            )
        }
        Observation::WindowClosed { table, chunk, emitted, deduplicated } => format!(
            "{} {emitted} buffered row(s) emitted as op=r (source.snapshot=incremental){}{}",
            if names.read_only {
                format!("read-only window of chunk {chunk} closed:")
            } else {
                format!("stream reached chunk {chunk}'s close: window closed;")
            },
            match deduplicated {
                0 => String::new(),
                n => format!(
                    ", {n} dropped because a streamed {} of the same key came inside the window",
                    if names.read_only { "change" } else { "event" }
                ),
            },
            table.map(|table| format!(" ({})", names.table(table))).unwrap_or_default()
        ),
        Observation::WatermarkIgnored { chunk, watermark } => format!(
            "watermark '{chunk}-{}' is not the current chunk's (written before a restart): ignored",
            watermark.suffix()
        ),
        Observation::IncrementalTableScanned { table, status, rows, reason } => format!(
            "incremental snapshot of {} ended ({}): {rows} row(s) read{}",
            names.table(*table),
            status.name(),
            if reason.is_empty() { String::new() } else { format!("; {reason}") }
        ),
        Observation::IncrementalSnapshotCompleted => "incremental snapshot completed: no table left to read".into(),
        Observation::BlockingSnapshotStarted { tables, lsn } if tables.is_empty() => format!(
            "streaming paused for a blocking snapshot with no table to read (none it named is captured); it \
             completes at once and streaming resumes at lsn {lsn}"
        ),
        Observation::BlockingSnapshotStarted { tables, lsn } => format!(
            "streaming paused for a blocking snapshot of {} (the records carry the streaming offset at the pause, \
             lsn {lsn}, with snapshot=BLOCKING; each table read by a SELECT now, READ COMMITTED)",
            tables.iter().map(|table| names.table(*table)).collect::<Vec<_>>().join(", ")
        ),
        Observation::BlockingSnapshotCompleted { rows } => format!(
            "blocking snapshot completed: {}; streaming resumes where it paused (changes committed since the signal \
             come again after the rows read)",
            if *rows == 0 {
                "no row read, so none is re-emitted with the completion".to_string()
            } else {
                format!("{rows} row(s) read, the last one re-emitted with the completion")
            }
        ),
        Observation::BlockingSnapshotFailed { reason, rows, held } => format!(
            "blocking snapshot failed ({reason}): Error while executing requested blocking snapshot; {rows} row(s) \
             read{}; the offset keeps snapshot=BLOCKING; streaming resumes",
            match held {
                Some((table, key)) =>
                    format!(", the held-back last one ({} row {key}) never emitted (DBZ-8335)", names.table(*table)),
                None => String::new(),
            }
        ),
        Observation::ReadMissedCommit { client, table, xid, key, rows } => {
            let more = if *rows > 1 { format!(" and {} more", rows - 1) } else { String::new() };
            format!(
                "SELECT on {} for {client} does not see xid {xid}, which changed row {key}{more}: its commit record is \
                 in the WAL, but it is not yet visible (ProcArrayEndTransaction still to come), so the query reads \
                 the row as it was before",
                names.table(*table)
            )
        }
        Observation::Appended { records, transaction: None } => {
            format!("appended {} record(s) at {}", records.len(), partitions_summary(records, names))
        }
        Observation::Appended { records, transaction: Some(producer_id) } => format!(
            "appended {} record(s) at {} in producer {producer_id}'s open transaction (read_committed consumers \
             wait for its end)",
            records.len(),
            partitions_summary(records, names)
        ),
        Observation::TransactionEnded { transactional_id, producer_id, committed, cause, records } => {
            let what = if *committed { "committed" } else { "aborted" };
            let why = match cause {
                crate::core::observe::TransactionEnd::Requested => String::new(),
                crate::core::observe::TransactionEnd::Fenced => {
                    " by the coordinator: a new instance of the transactional.id called initTransactions() and \
                     fenced the old one"
                        .into()
                }
                crate::core::observe::TransactionEnd::AdminAbort => {
                    " by an operator (kafka-transactions.sh abort): it was hanging, open on its partitions and \
                     unknown to the coordinator"
                        .into()
                }
                crate::core::observe::TransactionEnd::TimedOut => {
                    " by the coordinator: open longer than its transaction.timeout.ms, the producer fenced".into()
                }
            };
            let whose = if transactional_id.is_empty() {
                "hanging transaction".to_string()
            } else {
                format!("transaction of {transactional_id}")
            };
            format!("{whose} (producer {producer_id}) {what}{why}: {records} record(s), markers written")
        }
        Observation::Compacted { tp, removed, deletes, horizons } => {
            let mut words =
                format!("log cleaner cleaned {}-{}: {removed} record(s) removed", names.topic(tp.topic), tp.partition);
            let gone: Vec<String> = deletes
                .iter()
                .take(5)
                .map(|(offset, key, tombstone)| {
                    let what = if *tombstone { "tombstone" } else { "op=d" };
                    let row = match tp.topic {
                        Topic::Change(table) => names.row(table, *key),
                        _ => format!("key {key}"),
                    };
                    format!("{row}'s {what} (offset {offset})")
                })
                .collect();
            if !gone.is_empty() {
                let more = deletes.len() - gone.len();
                words.push_str(&format!(
                    ", among them {}{}",
                    gone.join(", "),
                    if more > 0 { format!(" and {more} more") } else { String::new() }
                ));
            }
            if !horizons.is_empty() {
                let first = horizons.iter().map(|(_, _, at)| *at).min().expect("not empty");
                words.push_str(&format!(
                    "; {} tombstone(s) kept until their delete horizon (delete.retention.ms after this cleaning, {first})",
                    horizons.len()
                ));
            }
            words
        }
        Observation::GroupRebalanced { generation, leader, members } => format!(
            "group rebalanced: generation {generation}, leader {leader}, members {}",
            members.iter().map(|node| node.name()).collect::<Vec<_>>().join(", ")
        ),
        Observation::GroupMemberRemoved { worker, reason } => {
            format!("group coordinator removed {worker}: {reason}")
        }
        Observation::GroupAssignmentsComputed { generation, assignments, delayed, duplicated, delay_ms } => {
            let list =
                |connectors: &[u8]| connectors.iter().map(|c| names.connector(*c)).collect::<Vec<_>>().join(", ");
            let mut parts: Vec<String> = assignments
                .iter()
                .filter(|(_, assigned, revoked)| !assigned.is_empty() || !revoked.is_empty())
                .map(|(node, assigned, revoked)| match (assigned.is_empty(), revoked.is_empty()) {
                    (false, true) => format!("{node} starts {}", list(assigned)),
                    (true, false) => format!("{node} stops {}", list(revoked)),
                    _ => format!("{node} starts {} and stops {}", list(assigned), list(revoked)),
                })
                .collect();
            if !duplicated.is_empty() {
                parts.push(format!("{} ran on two workers: revoked from both", list(duplicated)));
            }
            if !delayed.is_empty() {
                parts.push(format!(
                    "{} lost, left unassigned until the scheduled rebalance in {} (scheduled.rebalance.max.delay.ms)",
                    list(delayed),
                    crate::core::time::seconds_text(*delay_ms)
                ));
            }
            if parts.is_empty() {
                parts.push("nothing moves".into());
            }
            format!("group leader assigned generation {generation}: {}", parts.join("; "))
        }
        Observation::GroupAssigned { generation, assigned, revoked, delay_ms } => {
            if assigned.is_empty() && revoked.is_empty() && *delay_ms == 0 {
                return None;
            }
            let list =
                |connectors: &[u8]| connectors.iter().map(|c| names.connector(*c)).collect::<Vec<_>>().join(", ");
            let mut parts = Vec::new();
            if !assigned.is_empty() {
                parts.push(format!("starts the task of {}", list(assigned)));
            }
            if !revoked.is_empty() {
                parts.push(format!("stops the task of {}", list(revoked)));
            }
            if *delay_ms > 0 {
                parts.push(format!("joins again in {}", crate::core::time::seconds_text(*delay_ms)));
            }
            format!("assignment of generation {generation}: {}", parts.join(", "))
        }
        Observation::GroupSelfRevoked { connectors } => format!(
            "no answer from the group coordinator for session.timeout.ms and a heartbeat interval: the worker stops \
             its own tasks ({}) so as not to run them outside the group",
            connectors.iter().map(|c| names.connector(*c)).collect::<Vec<_>>().join(", ")
        ),
        Observation::WorkerLeft => "shut down cleanly: left the group, the process ends".into(),
        Observation::PausedPastTimeouts => "pauses past session.timeout.ms and wal_sender_timeout (a stop-the-world \
                                             pause): its peers take it for gone; it goes on where it was"
            .into(),
        Observation::SourceOffsetStored { connector, offset } => match offset {
            Some(_) => return None,
            None => format!("offsets of connector \"{connector}\" deleted (tombstone in the offsets topic)"),
        },
        Observation::GroupCommitted { group, positions } => {
            format!("group \"{group}\" committed {}", names.positions(positions))
        }
        Observation::SinkStarted { positions } => format!("consumer started at {}", names.positions(positions)),
        Observation::ConsumerStarted { positions } => {
            format!("outbox consumer started at {}", names.positions(positions))
        }
        Observation::ConsumerFailed { reason } => format!("outbox consumer FAILED: {reason}"),
        Observation::EventHandled { tp, offset, event, aggregate_id, event_type, handled } => {
            let what = format!(
                "event {} ({} of claim {aggregate_id}) at {}@{offset}",
                event.1,
                crate::core::ids::Row::event(*aggregate_id, *event_type).event_type(),
                names.partition(*tp)
            );
            match handled {
                crate::core::observe::Handled::Applied { times: 1 } => {
                    format!("{what}: side effect applied")
                }
                crate::core::observe::Handled::Applied { times } => {
                    format!("{what}: side effect applied AGAIN ({times} times now)")
                }
                crate::core::observe::Handled::Absorbed => {
                    format!("{what}: already in processed_event, absorbed (nothing applied)")
                }
                crate::core::observe::Handled::InboxRecorded => {
                    format!(
                        "{what}: inserted into processed_event (committed); the side effect is the next transaction"
                    )
                }
                crate::core::observe::Handled::OffsetCommitted => {
                    format!("{what}: offset past it committed before handling it")
                }
            }
        }
        Observation::SinkApplied { applies } => {
            let count = |wanted: &[SinkAction]| applies.iter().filter(|a| wanted.contains(&a.action)).count();
            let applied = count(&[SinkAction::Upserted, SinkAction::Deleted]);
            let rejected = count(&[SinkAction::RejectedStale]);
            let ignored = count(&[SinkAction::Ignored]);
            let mut text = format!("applied {applied} record(s)");
            if rejected > 0 {
                let _ = write!(text, ", refused {rejected} stale");
            }
            if ignored > 0 {
                let _ = write!(text, ", ignored {ignored}");
            }
            text
        }
        Observation::SinkReconciled { epoch_lsn, removed } => {
            let shown: Vec<String> = removed
                .iter()
                .take(5)
                .map(|(table, key, row)| format!("{} v{}", names.row_of(*table, *key), row.version))
                .collect();
            format!(
                "snapshot epoch {epoch_lsn} complete: removed {} document(s) it did not see{}",
                removed.len(),
                if shown.is_empty() { String::new() } else { format!(" ({})", shown.join(", ")) }
            )
        }
        Observation::AppTxnFailed { reason } => format!("transaction failed: {reason}"),
        Observation::Crashed { process } => format!("FAULT: {process} crashed (what it held in memory is lost)"),
        Observation::SinkFailed { reason, partitions } => format!(
            "consumer FAILED, it reads nothing more: {reason}: [{}]",
            partitions.iter().map(|tp| names.partition(*tp)).collect::<Vec<_>>().join(", ")
        ),
        Observation::ScriptedNotApplied { ops, reason } => {
            let ops: Vec<String> = ops.iter().map(|op| names.row_op(op)).collect();
            if ops.is_empty() {
                format!("a scripted transaction DID NOT APPLY: {reason}")
            } else {
                format!("scripted transaction ({}) DID NOT APPLY: {reason}", ops.join(", "))
            }
        }
        Observation::LoaderRead { rows, lsn } => {
            format!(
                "plain SELECT read {rows} rows (pg_current_wal_lsn() was {lsn}); publishing them as snapshot records"
            )
        }
        Observation::GateChecked { saved_offset, slot, timeline, switch_lsn, verdict, detail, .. } => format!(
            "failover gate: saved offset {}; slot on the new primary: {}; timeline {timeline}{} -> {}: {detail}",
            saved_offset.as_ref().map_or("none".into(), |o| o.to_string()),
            slot.as_ref().map_or("none".into(), |s| format!(
                "confirmed_flush {}",
                s.confirmed_flush_lsn.map_or("NULL".into(), |l| l.to_string())
            )),
            switch_lsn.map_or(String::new(), |lsn| format!(" from {lsn}")),
            match verdict {
                GateVerdict::Available => "resume",
                GateVerdict::Rebuild => "rebuild",
                GateVerdict::FailClosed => "fail closed",
            }
        ),
        Observation::OperatorAction { action } => action.clone(),
        // With several connectors, the first connector's faults name it too.
        Observation::Fault { action }
            if names.connectors.len() > 1 && names.speaking_for == 0 && action.acts_on_a_connector() =>
        {
            format!("FAULT: {action} on {}", names.connector(0))
        }
        Observation::Fault { action } => format!("FAULT: {action}"),
        Observation::FaultRefused { action, reason } => format!("FAULT REFUSED: {action}: {reason}"),
        Observation::OperatorWaits { procedure, behind } => {
            format!("{procedure} waits its turn: {behind} is under way; it runs when that ends")
        }
        Observation::OperatorResumesWaiting { procedure } => format!("{procedure} runs now (it waited its turn)"),
        Observation::Restarted { .. } => "process restarted".into(),
        Observation::Moment { name } => format!("moment reached: {name}"),
    })
}

/// A bounded chunk query's `WHERE` on a nullable key column `name` (DBZ-5071), after the position
/// `after` up to `maximum`: Debezium 2.6's null-aware bounds, or the plain comparisons before.
fn null_bounds(name: &str, nulls: crate::core::signal::ChunkNulls, after: Key, maximum: Key) -> String {
    use crate::core::ids::UniqueColumn;
    use crate::core::signal::ChunkNulls;
    let above = |value: Key| {
        if value == UniqueColumn::NULL { "1 = 0".to_string() } else { format!("({name} > {value} OR {name} IS NULL)") }
    };
    match nulls {
        ChunkNulls::Unaware => {
            let mut text =
                format!("{name} > {} AND NOT ({name} > {})", UniqueColumn::text(after), UniqueColumn::text(maximum));
            if after == UniqueColumn::NULL || maximum == UniqueColumn::NULL {
                text.push_str(
                    " (a comparison with NULL is unknown, so no row passes it: Debezium before 2.6 binds the NULL as \
                     any value, DBZ-5071)",
                );
            }
            text
        }
        _ => {
            let upto = if maximum == UniqueColumn::NULL {
                "NOT (1 = 0)".to_string()
            } else {
                format!("NOT {}", above(maximum))
            };
            format!("{} AND {upto} (NULL counted as the largest value: Debezium 2.6 and later, DBZ-5071)", above(after))
        }
    }
}
