//! Writing a scenario.

use super::connector::CONNECTOR_CLASS;
use super::load::load_str;
use super::toml_text::{
    basic_string, duration_text, float_text, size_text, toml_key, toml_string, toml_strings, trigger_text,
};
use handoff_models::components::operator::GatePolicy;
use handoff_models::core::change::ReplicaIdentity;
use handoff_models::core::change::RowOp;
use handoff_models::core::ids::Node;
use handoff_models::core::ids::TableId;
use handoff_models::scenario::schedule::CrashWhile;
use handoff_models::scenario::spec::CheckBound;
use handoff_models::scenario::spec::FaultAction;
use handoff_models::scenario::spec::FaultKind;
use handoff_models::scenario::spec::HandoffMethod;
use handoff_models::scenario::spec::Invariant;
use handoff_models::scenario::spec::ScriptedTxn;
use handoff_models::scenario::spec::Spec;
use handoff_models::scenario::spec::StepKind;
use handoff_models::scenario::spec::Trigger;
use std::fmt::Display;

/// Writes `spec` as a scenario file (docs/scenario-format.md) that [`load_str`] reads back to
/// the same `Spec`, with `seed` as its seed: for `handoff shrink` and for saving failing seeds.
///
/// Sections come in the order the bundled scenarios use, and every value the `Spec` holds is
/// written explicitly, so the file does not depend on the format's defaults. The connector's
/// modelled properties are written from `spec.debezium` (keeping the text of
/// `spec.connector_properties` where it means the same value), and every other property from
/// `spec.connector_properties` as given.
///
/// An error names what the format cannot express: a scripted statement with no row, or rows
/// changed in different ways (another verb, table, status or amount), a table that is not in `spec.tables`, or any value the loader would reject or
/// read differently (the written text is read back and compared before it is returned).
pub fn to_toml(spec: &Spec, seed: u64) -> Result<String, String> {
    if i64::try_from(seed).is_err() {
        return Err(format!("seed {seed} does not fit in a TOML integer; at most {}", i64::MAX));
    }
    let mut w = Writer::default();
    write_top(&mut w, spec, seed);
    write_versions(&mut w, spec);
    write_postgres(&mut w, spec);
    write_tables(&mut w, spec);
    write_connector(&mut w, spec)?;
    write_connect(&mut w, spec);
    write_kafka(&mut w, spec);
    write_sink(&mut w, spec);
    write_consumer(&mut w, spec);
    write_workload(&mut w, spec)?;
    write_faults(&mut w, spec);
    write_fault_profile(&mut w, spec);
    write_handoff(&mut w, spec);
    write_failover(&mut w, spec);
    write_acceptance(&mut w, spec);
    write_prediction(&mut w, spec);
    write_check(&mut w, spec)?;
    write_schedule(&mut w, spec);
    check_read_back(&w.text, spec, seed)?;
    Ok(w.text)
}

/// The text of a scenario file, a line at a time.
#[derive(Default)]
struct Writer {
    text: String,
}

impl Writer {
    /// `[header]`, after a blank line.
    fn table(&mut self, header: &str) {
        self.blank_line();
        self.text.push_str(&format!("[{header}]\n"));
    }

    /// `[[header]]`: one more entry of an array of tables.
    fn entry(&mut self, header: &str) {
        self.blank_line();
        self.text.push_str(&format!("[[{header}]]\n"));
    }

    /// `key = value`; `value` is TOML already.
    fn field(&mut self, key: &str, value: impl Display) {
        self.text.push_str(&format!("{} = {value}\n", toml_key(key)));
    }

    fn blank_line(&mut self) {
        if !self.text.is_empty() {
            self.text.push('\n');
        }
    }
}

fn write_top(w: &mut Writer, spec: &Spec, seed: u64) {
    w.field("name", toml_string(&spec.name));
    w.field("description", toml_string(&spec.description));
    w.field("seed", seed);
}

fn write_versions(w: &mut Writer, spec: &Spec) {
    let (major, minor) = spec.debezium.version;
    if (major, minor) != (3, 7) || spec.debezium.pgjdbc.is_some() {
        w.table("versions");
    }
    if (major, minor) != (3, 7) {
        w.field("debezium", toml_string(&format!("{major}.{minor}")));
    }
    if let Some((major, minor, patch)) = spec.debezium.pgjdbc {
        w.field("pgjdbc", toml_string(&format!("{major}.{minor}.{patch}")));
    }
}

fn write_postgres(w: &mut Writer, spec: &Spec) {
    w.table("postgres");
    w.field("version", spec.postgres.major_version);
    w.field("wal_segment_size", toml_string(&size_text(spec.postgres.wal_segment_size)));
    w.field("checkpoint_timeout", toml_string(&duration_text(spec.postgres.checkpoint_timeout_ms)));
    if spec.postgres.max_wal_size_mb != 1024 {
        w.field("max_wal_size", toml_string(&size_text(spec.postgres.max_wal_size_mb << 20)));
    }
    if let Some(cap_mb) = spec.postgres.max_slot_wal_keep_size_mb {
        w.field("max_slot_wal_keep_size", toml_string(&size_text(cap_mb << 20)));
    }
    if spec.postgres.wal_keep_size_mb != 0 {
        w.field("wal_keep_size", toml_string(&size_text(spec.postgres.wal_keep_size_mb << 20)));
    }
    if spec.postgres.synchronized_standby_slots {
        w.field("synchronized_standby_slots", toml_string("standby_slot"));
    }
    w.field("scan_rows_per_second", spec.postgres.scan_rows_per_second);
    if spec.postgres.idle_in_transaction_session_timeout_ms != 0 {
        w.field(
            "idle_in_transaction_session_timeout",
            toml_string(&duration_text(spec.postgres.idle_in_transaction_session_timeout_ms)),
        );
    }
    if spec.postgres.wal_sender_timeout_ms != handoff_models::components::postgres::WAL_SENDER_TIMEOUT_MS {
        w.field("wal_sender_timeout", toml_string(&duration_text(spec.postgres.wal_sender_timeout_ms)));
    }
    write_not_modelled(w, spec, "postgres");
    if let Some(replication_delay_ms) = spec.postgres.standby {
        w.table("postgres.standby");
        w.field("replication_delay_ms", replication_delay_ms);
        if spec.postgres.sync_replication_slots {
            w.field("sync_replication_slots", true);
        }
    }
}

fn write_tables(w: &mut Writer, spec: &Spec) {
    for table in &spec.tables {
        w.entry("table");
        w.field("name", toml_string(&table.name));
        w.field("rows", table.rows);
        let identity = match table.replica_identity {
            ReplicaIdentity::Default => "default",
            ReplicaIdentity::Full => "full",
        };
        w.field("replica_identity", toml_string(identity));
        if let Some(database) = &table.database {
            w.field("database", toml_string(database));
        }
        if table.keyless {
            w.field("primary_key", "[]");
        }
        if let Some(key) = &table.composite_key {
            w.field("primary_key", format!("[{}, {}]", toml_string(&key.columns[0]), toml_string(&key.columns[1])));
            w.field("group_rows", key.group_rows);
        }
        if let Some(unique) = &table.unique_column {
            w.field("unique_column", toml_string(&unique.name));
            w.field("null_row", unique.null_row);
        }
        if let Some(outbox) = &table.outbox {
            let text =
                format!("{{ aggregatetype = {}, delete = {} }}", toml_string(&outbox.aggregatetype), outbox.delete);
            w.field("outbox", text);
        }
    }
    for (name, tables) in &spec.postgres.publications {
        w.entry("publication");
        w.field("name", toml_string(name));
        let names: Vec<String> = tables
            .iter()
            .filter_map(|table| spec.tables.get(usize::from(table.0)))
            .map(|table| toml_string(&table.name))
            .collect();
        w.field("tables", format!("[{}]", names.join(", ")));
    }
    for outbox in &spec.message_outboxes {
        w.entry("message_outbox");
        w.field("prefix", toml_string(&outbox.prefix));
        w.field("aggregatetype", toml_string(&outbox.aggregatetype));
        w.field("transactional", outbox.transactional);
    }
}

/// Whether the scenario has more than one outbox (tables and message outboxes): an `event` step
/// then names its own.
fn several_outboxes(spec: &Spec) -> bool {
    spec.tables.iter().filter(|table| table.outbox.is_some()).count() + spec.message_outboxes.len() > 1
}

/// A table's name from its id.
fn table_name_of(spec: &Spec, table: TableId, whose: &str) -> Result<String, String> {
    match spec.tables.get(usize::from(table.0)) {
        Some(setup) => Ok(setup.name.clone()),
        None => Err(format!("{whose} names table {} but the scenario has {} tables", table.0, spec.tables.len())),
    }
}

/// A modelled connector property as the `Spec` holds it.
enum Modelled {
    /// A text the loader takes as written.
    Text(String),
    /// A text the loader trims and lower-cases.
    Lower(String),
    Int(u64),
    Bool(bool),
    /// `table.include.list`: names separated by commas.
    Tables(Vec<String>),
}

impl Modelled {
    /// Whether `text`, as the scenario gave it, means this value to the loader.
    fn means(&self, text: &str) -> bool {
        match self {
            Modelled::Text(value) => text == value,
            Modelled::Lower(value) => text.trim().to_ascii_lowercase() == *value,
            Modelled::Int(value) => text.trim().parse::<i64>().ok().and_then(|n| u64::try_from(n).ok()) == Some(*value),
            Modelled::Bool(value) => text.trim().eq_ignore_ascii_case(if *value { "true" } else { "false" }),
            Modelled::Tables(names) => text.split(',').map(str::trim).eq(names.iter().map(String::as_str)),
        }
    }

    /// The value as TOML.
    fn toml(&self) -> String {
        match self {
            Modelled::Text(value) | Modelled::Lower(value) => toml_string(value),
            Modelled::Int(value) => value.to_string(),
            Modelled::Bool(value) => value.to_string(),
            Modelled::Tables(names) => toml_string(&names.join(",")),
        }
    }
}

/// Debezium's default `max.queue.size`.
const DEFAULT_MAX_QUEUE_SIZE: u32 = 8_192;

fn write_connector(w: &mut Writer, spec: &Spec) -> Result<(), String> {
    for c in 0..spec.connector_count() {
        write_one_connector(w, spec, c)?;
    }
    Ok(())
}

/// `[connector]`, or with several connectors one `[[connector]]` entry each.
fn write_one_connector(w: &mut Writer, spec: &Spec, c: usize) -> Result<(), String> {
    let d = spec.connector(c);
    let properties = spec.connector_properties_of(c);
    // The signal table joins the captured tables at the end when the list does not name it (the
    // reader adds it, as Debezium's table filter does): written without it, it reads the same.
    let listed = match (d.tables.split_last(), d.signal_table()) {
        (Some((last, rest)), Some(signal)) if *last == signal => rest,
        _ => &d.tables[..],
    };
    let tables =
        listed.iter().map(|table| table_name_of(spec, *table, "table.include.list")).collect::<Result<_, _>>()?;
    let mut modelled = vec![
        ("name", Modelled::Text(d.name.clone())),
        ("connector.class", Modelled::Text(CONNECTOR_CLASS.to_owned())),
        ("topic.prefix", Modelled::Text(d.topic_prefix.clone())),
        ("plugin.name", Modelled::Lower(d.plugin_name.clone())),
        ("slot.name", Modelled::Text(d.slot_name.clone())),
        ("publication.name", Modelled::Text(d.publication_name.clone())),
        ("snapshot.mode", Modelled::Lower(d.snapshot_mode.name().to_owned())),
        ("snapshot.fetch.size", Modelled::Int(u64::from(d.snapshot_fetch_size))),
        ("max.batch.size", Modelled::Int(u64::from(d.max_batch_size))),
        ("poll.interval.ms", Modelled::Int(d.poll_interval_ms)),
        ("retriable.restart.connector.wait.ms", Modelled::Int(d.retriable_restart_connector_wait_ms)),
        ("tombstones.on.delete", Modelled::Bool(d.tombstones_on_delete)),
        ("table.include.list", Modelled::Tables(tables)),
    ];
    if d.publication_filtered {
        modelled.push(("publication.autocreate.mode", Modelled::Lower("filtered".to_owned())));
    }
    // The default queue must stay larger than the batch.
    if d.max_batch_size >= DEFAULT_MAX_QUEUE_SIZE && !properties.contains_key("max.queue.size") {
        modelled.push(("max.queue.size", Modelled::Int(u64::from(d.max_batch_size.saturating_mul(4)))));
    }
    if spec.connector_count() == 1 {
        w.table("connector");
    } else {
        w.entry("connector");
    }
    for (key, value) in &modelled {
        match properties.get(*key) {
            Some(text) if value.means(text) => w.field(key, property_value(text)),
            _ => w.field(key, value.toml()),
        }
    }
    for (key, text) in properties {
        if !modelled.iter().any(|(written, _)| written == key) {
            w.field(key, property_value(text));
        }
    }
    Ok(())
}

/// A connector property's text as TOML: an integer or a boolean when it is one, else a string.
fn property_value(text: &str) -> String {
    let integer = text.parse::<i64>().is_ok_and(|value| value.to_string() == text);
    if integer || text == "true" || text == "false" { text.to_owned() } else { toml_string(text) }
}

fn write_connect(w: &mut Writer, spec: &Spec) {
    w.table("connect");
    w.field("offset.flush.interval.ms", spec.connect.offset_flush_interval_ms);
    w.field("offset.flush.timeout.ms", spec.connect.offset_flush_timeout_ms);
    w.field("exactly.once.source.support", toml_string(spec.connect.exactly_once_source_support.name()));
    w.field("group.id", toml_string(&spec.connect.group_id));
    w.field("producer.transaction.timeout.ms", spec.connect.transaction_timeout_ms);
    w.field("start_at_ms", spec.connector_start_ms);
    if spec.connect.workers > 1 {
        let group = &spec.connect.group;
        w.field("workers", spec.connect.workers);
        w.field("session.timeout.ms", group.session_timeout_ms);
        w.field("heartbeat.interval.ms", group.heartbeat_interval_ms);
        w.field("rebalance.timeout.ms", group.rebalance_timeout_ms);
        w.field("scheduled.rebalance.max.delay.ms", group.scheduled_rebalance_max_delay_ms);
        w.field("task.shutdown.graceful.timeout.ms", group.task_shutdown_graceful_timeout_ms);
    }
    write_not_modelled(w, spec, "connect");
}

/// The settings of a section the model does not simulate, as given (the connectors' are among
/// their properties).
fn write_not_modelled(w: &mut Writer, spec: &Spec, section: &str) {
    for item in spec.not_modelled.iter().filter(|item| item.section == section) {
        w.field(&item.setting, toml_string(&item.value));
    }
}

fn write_kafka(w: &mut Writer, spec: &Spec) {
    w.table("kafka");
    w.field("partitions", spec.kafka.partitions);
    w.field(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        spec.kafka.transaction_abort_sweep_interval_ms,
    );
    w.field("group.initial.rebalance.delay.ms", spec.kafka.group_initial_rebalance_delay_ms);
    if let Some(compaction) = spec.kafka.compaction {
        w.field("cleanup.policy", toml_string("compact"));
        w.field("delete.retention.ms", compaction.delete_retention_ms);
        w.field("min.compaction.lag.ms", compaction.min_compaction_lag_ms);
        w.field("segment.ms", compaction.segment_ms);
        w.field(
            "min.cleanable.dirty.ratio",
            float_text(f64::from(compaction.min_cleanable_dirty_ratio_per_mille) / 1000.0),
        );
        w.field("log.cleaner.backoff.ms", compaction.log_cleaner_backoff_ms);
    }
}

fn write_sink(w: &mut Writer, spec: &Spec) {
    w.table("sink");
    w.field("apply", toml_string(spec.sink.rule.name()));
    w.field("group.id", toml_string(&spec.sink.group));
    w.field("auto.commit.interval.ms", spec.sink.auto_commit_interval_ms);
    w.field("max.poll.records", spec.sink.max_poll_records);
    w.field("auto.offset.reset", toml_string(spec.sink.auto_offset_reset.name()));
    w.field("isolation.level", toml_string(spec.sink.isolation_level.name()));
    w.field("behavior.on.null.values", toml_string(spec.sink.null_values.name()));
}

fn write_consumer(w: &mut Writer, spec: &Spec) {
    let Some(consumer) = &spec.consumer else { return };
    w.table("consumer");
    w.field("inbox", toml_string(consumer.inbox.name()));
    w.field("group.id", toml_string(&consumer.group));
    w.field("enable.auto.commit", consumer.enable_auto_commit);
    w.field("auto.commit.interval.ms", consumer.auto_commit_interval_ms);
    w.field("max.poll.records", consumer.max_poll_records);
    w.field("auto.offset.reset", toml_string(consumer.auto_offset_reset.name()));
    w.field("processing_ms", consumer.processing_ms);
    w.field("isolation.level", toml_string(consumer.isolation_level.name()));
}

fn write_workload(w: &mut Writer, spec: &Spec) -> Result<(), String> {
    if let Some(background) = &spec.background {
        w.table("workload");
        w.field("start_ms", background.start_ms);
        w.field("end_ms", background.end_ms);
        w.field("inserts_per_second", float_text(background.inserts_per_second));
        w.field("updates_per_second", float_text(background.updates_per_second));
        w.field("deletes_per_second", float_text(background.deletes_per_second));
        if background.events_per_second > 0.0 {
            w.field("events_per_second", float_text(background.events_per_second));
        }
        if background.transaction_size != 1 || background.concurrency != 1 {
            w.field("transaction_size", background.transaction_size);
            w.field("concurrency", background.concurrency);
        }
    }
    let mut sessions = Vec::new();
    for (index, txn) in spec.scripted.iter().enumerate() {
        write_script(w, spec, "workload.script", index, txn, &mut sessions)?;
    }
    Ok(())
}

/// One `[[workload.script]]` entry (with its `at`) or `[[check.script]]` one (without).
fn write_script(
    w: &mut Writer,
    spec: &Spec,
    header: &str,
    index: usize,
    txn: &ScriptedTxn,
    sessions: &mut Vec<String>,
) -> Result<(), String> {
    let whose = format!("{} entry {index} ({})", header.replace('.', " "), basic_string(&txn.label));
    let step = &txn.step;
    let statement = matches!(step.kind, StepKind::Statement | StepKind::Copy | StepKind::OutboxMessage { .. });
    if statement && txn.ops.is_empty() {
        return Err(format!("{whose} is a statement that changes no row; the format names at least one key"));
    }
    if !statement && !txn.ops.is_empty() {
        return Err(format!("{whose} is {} with rows; only a statement has rows", step.kind.describe()));
    }
    let first_of_session = match &step.session {
        Some(name) if !sessions.contains(name) => {
            sessions.push(name.clone());
            true
        }
        Some(_) => false,
        None => true,
    };
    w.entry(header);
    // A session's later step without a time runs when its session is ready: no `at`.
    if header == "workload.script" && (first_of_session || txn.trigger != Trigger::At { at_ms: 0 }) {
        w.field("at", toml_string(&trigger_text(&txn.trigger)));
    }
    if let Some(session) = &step.session {
        w.field("session", toml_string(session));
    }
    if let Some(database) = &step.database {
        w.field("database", toml_string(database));
    }
    match &step.kind {
        StepKind::Begin { isolation } => {
            w.field("begin", true);
            w.field("isolation", toml_string(&isolation.name().to_lowercase()));
        }
        StepKind::Commit => w.field("commit", true),
        StepKind::Rollback => w.field("rollback", true),
        StepKind::Message { transactional, prefix, payload_bytes } => {
            w.field("message", toml_string(prefix));
            w.field("transactional", transactional);
            w.field("payload_bytes", payload_bytes);
        }
        StepKind::OutboxMessage { prefix, event, .. } => {
            // An `event` step through a message outbox: its business update, and the message.
            let (Some(RowOp::Update { table, status, .. }), 1) = (txn.ops.first(), txn.ops.len()) else {
                return Err(format!(
                    "{whose} writes an outbox message without the one business update an `event` step makes"
                ));
            };
            let Some(outbox) = spec.message_outboxes.get(usize::from(event.outbox)) else {
                return Err(format!(
                    "{whose} names message outbox {} but the scenario has {}",
                    event.outbox,
                    spec.message_outboxes.len()
                ));
            };
            if outbox.prefix != *prefix || *status != event.event_type {
                return Err(format!("{whose} is an outbox message that its message outbox and update do not describe"));
            }
            w.field("event", event.aggregate_id);
            w.field("status", toml_string(status.name()));
            if *table != TableId(0) {
                w.field("table", toml_string(&table_name_of(spec, *table, &whose)?));
            }
            if several_outboxes(spec) {
                w.field("outbox", toml_string(prefix));
            }
        }
        StepKind::Statement => write_statement(w, spec, &whose, &txn.ops)?,
        StepKind::KafkaSignal { topic, number } => {
            let Some(on) = spec.signal_topics.get(usize::from(*topic)) else {
                return Err(format!("{whose} produces to signal topic {topic}, which the scenario does not have"));
            };
            let Some(signal) =
                usize::try_from(*number).ok().and_then(|n| n.checked_sub(1)).and_then(|i| on.signals.get(i))
            else {
                return Err(format!(
                    "{whose} produces signal record {number} to {}, which no signal step wrote",
                    on.name
                ));
            };
            w.field("signal", toml_string(&signal.signal_type));
            w.field("channel", toml_string("kafka"));
            w.field("id", toml_string(&signal.id));
            if !signal.data.is_empty() {
                w.field("data", toml_string(&signal.data));
            }
            w.field("key", toml_string(&signal.key));
            w.field("topic", toml_string(&on.name));
        }
        StepKind::ConnectorConfig { version } => {
            let d = &spec.debezium;
            let Some(captured) = usize::from(*version).checked_sub(1).and_then(|v| d.later_tables.get(v)) else {
                return Err(format!(
                    "{whose} puts connector configuration {version}, which the scenario does not have"
                ));
            };
            // As the connector's own list: the signal table at the end is the reader's.
            let listed = match (captured.split_last(), d.signal_table()) {
                (Some((last, rest)), Some(signal)) if *last == signal => rest,
                _ => &captured[..],
            };
            let names = listed
                .iter()
                .map(|table| table_name_of(spec, *table, "connector_config"))
                .collect::<Result<Vec<_>, _>>()?;
            w.field("connector_config", format!("{{ \"table.include.list\" = {} }}", toml_string(&names.join(","))));
        }
        StepKind::Copy => {
            if txn.ops.iter().any(|op| !matches!(op, RowOp::Insert { .. })) {
                return Err(format!("{whose} is a COPY of other rows than inserts; a COPY only inserts"));
            }
            write_statement(w, spec, &whose, &txn.ops)?;
            w.field("copy", true);
        }
    }
    if step.idle_ms > 0 {
        w.field("idle_ms", step.idle_ms);
    }
    if !txn.label.is_empty() {
        w.field("label", toml_string(&txn.label));
    }
    Ok(())
}

/// The rows of one statement: one verb, one table, one status and amount, the keys.
fn write_statement(w: &mut Writer, spec: &Spec, whose: &str, ops: &[RowOp]) -> Result<(), String> {
    // A `signal` step: its row in a connector's signal table, its content the connector's.
    if let [RowOp::Insert { table, key, .. }] = ops
        && let Some(signalling) = (0..spec.connector_count())
            .filter_map(|c| spec.connector(c).signalling.as_ref())
            .find(|signalling| signalling.table == *table)
    {
        let Some(signal) = usize::try_from(key - 1).ok().and_then(|index| signalling.signals.get(index)) else {
            return Err(format!("{whose} inserts row {key} into the signal table, which no signal step wrote"));
        };
        w.field("signal", toml_string(signal.action.signal_type()));
        w.field("id", toml_string(&signal.id));
        if !signal.data.is_empty() {
            w.field("data", toml_string(&signal.data));
        }
        w.field("table", toml_string(&table_name_of(spec, *table, whose)?));
        return Ok(());
    }
    if let Some(RowOp::InsertEvent { table: outbox, aggregate_id, event_type, .. }) =
        ops.iter().find(|op| matches!(op, RowOp::InsertEvent { .. }))
    {
        // An `event` step: the business update, the outbox insert, and the delete when the
        // outbox table asks for it.
        let Some(RowOp::Update { table, .. }) = ops.first() else {
            return Err(format!("{whose} inserts an outbox event without the business update an `event` step makes"));
        };
        w.field("event", aggregate_id);
        w.field("status", toml_string(event_type.name()));
        if *table != TableId(0) {
            w.field("table", toml_string(&table_name_of(spec, *table, whose)?));
        }
        if several_outboxes(spec) {
            w.field("outbox", toml_string(&table_name_of(spec, *outbox, whose)?));
        }
        return Ok(());
    }
    let first = ops[0];
    let same = |op: &RowOp| match (first, *op) {
        (
            RowOp::Insert { table, status, amount_cents, .. },
            RowOp::Insert { table: t, status: s, amount_cents: a, .. },
        ) => table == t && status == s && amount_cents == a,
        (RowOp::Update { table, status, .. }, RowOp::Update { table: t, status: s, .. }) => table == t && status == s,
        (RowOp::Delete { table, .. }, RowOp::Delete { table: t, .. }) => table == t,
        _ => false,
    };
    if !ops.iter().all(same) {
        return Err(format!(
            "{whose} changes rows in different ways (verbs, tables, statuses or amounts); the format has one statement per \
             entry: one verb on one table, with one status and amount"
        ));
    }
    // A two-column key is written as its columns' values, `{ region_id = 1, order_id = 9 }`.
    let first_table = match first {
        RowOp::Insert { table, .. } | RowOp::Update { table, .. } | RowOp::Delete { table, .. } => Some(table),
        RowOp::InsertEvent { .. } => None,
    };
    let composite = first_table
        .and_then(|table| spec.tables.iter().find(|setup| setup.id == table))
        .and_then(|setup| setup.composite_key.as_ref());
    let key_text = |key: i64| match composite {
        Some(composite) => {
            let (k1, k2) = composite.values(key);
            format!("{{ {} = {k1}, {} = {k2} }}", composite.columns[0], composite.columns[1])
        }
        None => key.to_string(),
    };
    let keys: Vec<i64> = ops.iter().map(op_key).collect();
    let keys = if let [key] = keys.as_slice() {
        key_text(*key)
    } else {
        format!("[{}]", keys.iter().map(|key| key_text(*key)).collect::<Vec<_>>().join(", "))
    };
    let table = match first {
        RowOp::Insert { table, status, amount_cents, .. } => {
            w.field("insert", &keys);
            w.field("status", toml_string(status.name()));
            w.field("amount_cents", amount_cents);
            table
        }
        RowOp::Update { table, status, .. } => {
            w.field("update", &keys);
            w.field("status", toml_string(status.name()));
            table
        }
        RowOp::Delete { table, .. } => {
            w.field("delete", &keys);
            table
        }
        RowOp::InsertEvent { .. } => return Err(format!("{whose} inserts an outbox event outside an `event` step")),
    };
    if table != TableId(0) {
        w.field("table", toml_string(&table_name_of(spec, table, whose)?));
    }
    Ok(())
}

fn op_key(op: &RowOp) -> i64 {
    op.target().1
}

fn write_check(w: &mut Writer, spec: &Spec) -> Result<(), String> {
    let Some(check) = &spec.check else { return Ok(()) };
    w.table("check");
    w.field("rows", check.rows);
    let name = |node: &Node| CheckBound::CRASHABLE.iter().find(|(_, n)| n == node).map(|(name, _)| *name);
    let crash: Option<Vec<&str>> = check.crash.iter().map(name).collect();
    let crash = crash.ok_or_else(|| {
        let named: Vec<&str> = check.crash.iter().map(|node| node.name()).collect();
        let crashable: Vec<&str> = CheckBound::CRASHABLE.iter().map(|(name, _)| *name).collect();
        format!(
            "[check] crash names a process a bound cannot crash: {}; it can crash {}",
            named.join(", "),
            crashable.join(", ")
        )
    })?;
    w.field("crash", toml_strings(crash));
    w.field("crashes", check.crashes);
    if !check.pause.is_empty() {
        w.field("pause", toml_strings(check.pause.iter().map(|node| node.name())));
        w.field("pauses", check.pauses);
    }
    if check.crash_while != CrashWhile::AnyTime {
        w.field("crash_while", toml_string(check.crash_while.name()));
    }
    if check.script_while != handoff_models::scenario::schedule::ScriptWhile::AnyTime {
        w.field("script_while", toml_string(check.script_while.name()));
    }
    if check.commit_visibility != handoff_models::scenario::schedule::CommitVisibility::Lags {
        w.field("commit_visibility", toml_string(check.commit_visibility.name()));
    }
    w.field("periodic_fires", check.periodic_fires);
    if check.bgwriter_running_xacts {
        w.field("bgwriter_running_xacts", true);
    }
    if !check.operations.is_empty() {
        w.field("operations", toml_strings(check.operations.iter().map(|operation| operation.name())));
        w.field("operate_while", toml_string(check.operate_while.name()));
    }
    if !check.unreached_ok.is_empty() {
        w.field("unreached_ok", toml_strings(check.unreached_ok.iter().map(String::as_str)));
    }
    let mut sessions = Vec::new();
    for (index, txn) in check.scripts.iter().enumerate() {
        write_script(w, spec, "check.script", index, txn, &mut sessions)?;
    }
    Ok(())
}

fn write_schedule(w: &mut Writer, spec: &Spec) {
    let Some(schedule) = &spec.schedule else { return };
    w.table("schedule");
    w.field("step_ms", schedule.step_ms);
    w.text.push_str("steps = [\n");
    for step in &schedule.steps {
        w.text.push_str(&format!("    {},\n", toml_string(&step.to_string())));
    }
    w.text.push_str("]\n");
}

fn write_faults(w: &mut Writer, spec: &Spec) {
    for fault in &spec.faults {
        w.entry("fault");
        w.field("at", toml_string(&trigger_text(&fault.trigger)));
        w.field("action", toml_string(FaultKind::of(&fault.action).name()));
        if spec.connector_count() > 1
            && fault.connector < spec.connector_count() as u8
            && fault.action.acts_on_a_connector()
        {
            w.field("connector", toml_string(&spec.connector(usize::from(fault.connector)).name));
        }
        if let Some(worker) = fault.worker {
            w.field("worker", u32::from(worker) + 1);
        }
        match fault.action {
            FaultAction::KillConnectWorker { restart_after_ms }
            | FaultAction::KillConnectorTask { restart_after_ms }
            | FaultAction::KillConsumer { restart_after_ms }
            | FaultAction::StopConnectWorker { restart_after_ms } => {
                if let Some(ms) = restart_after_ms {
                    w.field("restart_after_ms", ms);
                }
            }
            FaultAction::StopConnector { resume_after_ms } => {
                if let Some(ms) = resume_after_ms {
                    w.field("resume_after_ms", ms);
                }
            }
            FaultAction::CrashPostgres { restart_after_ms } => w.field("restart_after_ms", restart_after_ms),
            FaultAction::FailOverToStandby { promote_after_ms } => w.field("promote_after_ms", promote_after_ms),
            FaultAction::Clog { between: (a, b), duration_ms } => {
                w.field("between", toml_strings([a.name(), b.name()]));
                w.field("duration_ms", duration_ms);
            }
            FaultAction::WalBurst { bytes } => w.field("bytes", toml_string(&size_text(bytes))),
            FaultAction::RecreateSlot | FaultAction::RebuildConnector | FaultAction::Checkpoint => {}
            FaultAction::AdvanceSlot { to_lsn } => {
                if let Some(lsn) = to_lsn {
                    w.field("to_lsn", toml_string(&lsn.to_string()));
                }
            }
            FaultAction::HangTransaction { abort_after_ms } => {
                if let Some(ms) = abort_after_ms {
                    w.field("abort_after_ms", ms);
                }
            }
            FaultAction::PauseConnectWorker { duration_ms } => w.field("duration_ms", duration_ms),
        }
    }
}

fn write_fault_profile(w: &mut Writer, spec: &Spec) {
    let Some(profile) = &spec.profile else { return };
    w.table("fault_profile");
    w.field("kinds", toml_strings(profile.kinds.iter().map(|kind| kind.name())));
    w.field("max_faults", profile.max_faults);
    let (start, end) = profile.window_ms;
    w.field("window", toml_strings([duration_text(start), duration_text(end)]));
    w.field("moments", toml_strings(profile.moments.iter().map(|moment| moment.name())));
}

fn write_handoff(w: &mut Writer, spec: &Spec) {
    if let HandoffMethod::PlainRead { read_at_ms } = spec.handoff {
        w.table("handoff");
        w.field("method", toml_string("plain-read"));
        w.field("read_at_ms", read_at_ms);
    }
}

fn write_failover(w: &mut Writer, spec: &Spec) {
    let gate = match spec.gate {
        GatePolicy::Off => return,
        GatePolicy::Rebuild => "rebuild",
        GatePolicy::FailClosed => "fail-closed",
    };
    w.table("failover");
    w.field("gate", toml_string(gate));
}

fn write_acceptance(w: &mut Writer, spec: &Spec) {
    w.table("acceptance");
    w.field("timeout_ms", spec.acceptance.timeout_ms);
    w.field("sample_size", spec.acceptance.sample_size);
    w.field("horizon_ms", spec.acceptance.horizon_ms);
}

fn write_prediction(w: &mut Writer, spec: &Spec) {
    let prediction = &spec.prediction;
    w.table("prediction");
    w.field("verdict", toml_string(prediction.verdict.name()));
    w.field("findings", toml_strings(prediction.findings.iter().map(Invariant::to_string)));
    if !prediction.allow.is_empty() || prediction.may_fail_closed {
        let fails_closed = prediction.may_fail_closed.then(|| "fails-closed".to_string());
        w.field("allow", toml_strings(prediction.allow.iter().map(Invariant::to_string).chain(fails_closed)));
    }
    w.field("why", toml_string(&prediction.why));
}

/// Reads the written text back: it must load, to the same `Spec` (but for the connector
/// properties, which gain the modelled ones) and seed.
fn check_read_back(text: &str, spec: &Spec, seed: u64) -> Result<(), String> {
    let loaded = load_str("(written)", text, &[])
        .map_err(|error| format!("the scenario written for `{}` does not load: {error}", spec.name))?;
    if loaded.seed != seed {
        return Err(format!(
            "the scenario written for `{}` reads back with seed {}, not {seed}",
            spec.name, loaded.seed
        ));
    }
    let mut read = loaded.spec;
    read.connector_properties.clone_from(&spec.connector_properties);
    for (read, written) in read.more_connectors.iter_mut().zip(&spec.more_connectors) {
        read.properties.clone_from(&written.properties);
    }
    // The properties not modelled are the same, listed in the order written (sorted by name).
    let sorted = |list: &[handoff_models::scenario::spec::NotModelled]| {
        let mut list = list.to_vec();
        list.sort_by(|a, b| (&a.section, &a.setting).cmp(&(&b.section, &b.setting)));
        list
    };
    if sorted(&read.not_modelled) == sorted(&spec.not_modelled) {
        read.not_modelled.clone_from(&spec.not_modelled);
    }
    // The written file's prediction is its own, whatever the run's came from.
    read.prediction.origin.clone_from(&spec.prediction.origin);
    if read != *spec {
        let (written, read) = (format!("{spec:#?}"), format!("{read:#?}"));
        let difference = written.lines().zip(read.lines()).find(|(a, b)| a != b);
        let (a, b) = difference.map_or(("", ""), |(a, b)| (a.trim(), b.trim()));
        return Err(format!("the scenario written for `{}` reads back differently: `{a}` as `{b}`", spec.name));
    }
    Ok(())
}
