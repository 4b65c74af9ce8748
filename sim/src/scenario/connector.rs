//! `[connector]`: the Debezium PostgreSQL connector's properties.

use super::catalogue::{NotModelledList, classify, connector_kind, connector_names};
use super::fields::{Cx, Field, Horizon, Res, Section, out_of_range, setting_out_of_range, unknown_value};
use super::sections::table_id;
use super::toml_text::duration_text;
use super::tree::Entry;
use super::tree::Val;
use handoff_models::components::connect::ConnectConfig;
use handoff_models::components::connect::debezium::DebeziumConfig;
use handoff_models::components::connect::debezium::LsnFlushMode;
use handoff_models::components::connect::debezium::OffsetMismatchStrategy;
use handoff_models::components::connect::debezium::SnapshotMode;
use handoff_models::components::connect::debezium::{HeartbeatMessage, MessagePrefixFilter};
use handoff_models::components::connect::debezium::{KafkaChannel, Signalling, WatermarkingStrategy};
use handoff_models::components::connect::transforms::chain::{
    ChainContext, PASS_THROUGH, TransformChain, is_chain_property,
};
use handoff_models::core::ids::TableId;
use handoff_models::core::limits;
use handoff_models::scenario::spec::TableSetup;
use std::collections::BTreeMap;

/// The Debezium properties the model uses.
const MODELLED: &str = "name connector.class topic.prefix plugin.name slot.name publication.name \
    publication.autocreate.mode snapshot.mode snapshot.fetch.size max.batch.size max.queue.size poll.interval.ms \
    retriable.restart.connector.wait.ms tombstones.on.delete table.include.list offset.mismatch.strategy \
    lsn.flush.mode heartbeat.interval.ms heartbeat.action.query slot.failover slot.drop.on.stop \
    provide.transaction.metadata internal.slot.seek.to.known.offset.on.start message.prefix.include.list \
    message.prefix.exclude.list exactly.once.support transaction.boundary transaction.boundary.interval.ms \
    signal.data.collection signal.enabled.channels incremental.snapshot.chunk.size \
    incremental.snapshot.watermarking.strategy snapshot.include.collection.list read.only signal.kafka.topic \
    signal.kafka.bootstrap.servers signal.kafka.groupId signal.poll.interval.ms signal.consumer.auto.commit.interval.ms \
    message.key.columns";

/// Debezium's internal property for the slot seek at start (`Field.createInternal` prefixes
/// `internal.`; `PostgresConnectorConfig.SLOT_SEEK_TO_KNOWN_OFFSET`).
pub(super) const SLOT_SEEK: &str = "internal.slot.seek.to.known.offset.on.start";

pub(super) const CONNECTOR_CLASS: &str = "io.debezium.connector.postgresql.PostgresConnector";
const DECODERBUFS: &str = "Debezium's default, decoderbufs, is not modelled";

/// A connector property as a string (strings, integers and booleans are accepted).
fn prop_text(cx: &Cx, field: &Field) -> Res<String> {
    match &field.item.val {
        Val::Str(text) => Ok(text.clone()),
        Val::Int(Some(value)) => Ok(value.to_string()),
        Val::Int(None) => cx.fail(field, "the integer is out of range"),
        Val::Bool(flag) => Ok(flag.to_string()),
        _ => cx.wrong(field, "a string, integer or boolean"),
    }
}

/// An integer property's value: `60000` or `"60000"` (`None`: an integer too large for an
/// `i64`).
fn prop_value(cx: &Cx, field: &Field) -> Res<Option<i64>> {
    match &field.item.val {
        Val::Int(value) => Ok(*value),
        Val::Str(text) => {
            let text = text.trim();
            match text.parse() {
                Ok(value) => Ok(Some(value)),
                Err(_) if is_integer(text) => Ok(None),
                Err(_) => cx.fail(field, format!("expected an integer, found `{text}`")),
            }
        }
        _ => cx.wrong(field, "an integer"),
    }
}

/// Whether `text` is a whole number (of any size): digits, after a minus sign or not.
fn is_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())
}

/// An integer property from `low` to `high`.
fn prop_int(cx: &Cx, field: &Field, low: i64, high: i64) -> Res<i64> {
    match prop_value(cx, field)? {
        Some(value) if (low..=high).contains(&value) => Ok(value),
        value => cx.fail(field, out_of_range(value, low, high)),
    }
}

/// A timer property in milliseconds, from `low` to a day (as [`Cx::setting_ms`]).
fn prop_setting_ms(cx: &Cx, field: &Field, low: u64) -> Res<u64> {
    match prop_value(cx, field)? {
        Some(value) if (low as i64..=limits::MAX_SETTING_MS as i64).contains(&value) => Ok(value as u64),
        value => cx.fail(field, setting_out_of_range(value, low)),
    }
}

/// A boolean property: `true` or `"true"`.
pub(super) fn prop_bool(cx: &Cx, field: &Field) -> Res<bool> {
    match &field.item.val {
        Val::Bool(flag) => Ok(*flag),
        Val::Str(text) if text.trim().eq_ignore_ascii_case("true") => Ok(true),
        Val::Str(text) if text.trim().eq_ignore_ascii_case("false") => Ok(false),
        Val::Str(text) => cx.fail(field, format!("expected true or false, found `{text}`")),
        _ => cx.wrong(field, "a boolean"),
    }
}

/// Every key must be a property the model knows, or one of the transformation chain's (checked
/// as a chain): one it simulates, or one of the [`catalogue`](super::catalogue) (returned, each
/// with its value and why it has no effect, unless it is refused there). Anything else is a typo:
/// refused with the closest known name.
fn check_properties(cx: &Cx, s: &Section) -> Res<NotModelledList> {
    let converters: Vec<String> = match s.get("converters") {
        Some(field) => prop_text(cx, &field)?.split(',').map(|name| name.trim().to_owned()).collect(),
        None => Vec::new(),
    };
    let converters: Vec<&str> = converters.iter().map(String::as_str).filter(|name| !name.is_empty()).collect();
    let mut not_modelled = Vec::new();
    // The outbox router's JSON expansion changes the value's shape only (`EventRouter`); the
    // pass-through transforms (headers, schema metadata) change nothing the model follows.
    let pass_through: Vec<String> = s
        .entries
        .iter()
        .filter(|entry| entry.key.starts_with("transforms.") && entry.key.ends_with(".type"))
        .filter(|entry| {
            PASS_THROUGH.iter().any(|class| prop_text(cx, &s.field(entry)).is_ok_and(|t| t.trim() == *class))
        })
        .map(|entry| entry.key.trim_end_matches("type").to_owned())
        .collect();
    for entry in s.entries.iter().filter(|entry| is_chain_property(&entry.key)) {
        if entry.key.ends_with(".table.expand.json.payload") && prop_bool(cx, &s.field(entry)).unwrap_or(false) {
            not_modelled.push((entry.key.clone(), "true".to_owned(), EXPANDED_PAYLOAD));
        } else if pass_through.iter().any(|prefix| entry.key.starts_with(prefix.as_str())) {
            not_modelled.push((entry.key.clone(), prop_text(cx, &s.field(entry))?, PASS_THROUGH_WHY));
        }
    }
    let entries: Vec<Entry> = s.entries.iter().filter(|entry| !is_chain_property(&entry.key)).cloned().collect();
    let rest = Section { path: s.path.clone(), entries: &entries, at: s.at };
    let modelled: Vec<&str> = MODELLED.split_whitespace().collect();
    let known: Vec<&str> = modelled.iter().copied().chain(connector_names()).collect();
    let (_, more) =
        classify(cx, &rest, &modelled, &known, "connector property", |key| connector_kind(key, &converters))?;
    not_modelled.extend(more);
    Ok(not_modelled)
}

/// The connector's `transforms` and `predicates`: configured as Connect would, an error naming the
/// property it is about.
fn transform_chain(
    cx: &Cx,
    s: &Section,
    properties: &BTreeMap<String, String>,
    topic_prefix: &str,
    tables: &[TableSetup],
) -> Res<()> {
    let chain: BTreeMap<String, String> =
        properties.iter().filter(|(key, _)| is_chain_property(key)).map(|(k, v)| (k.clone(), v.clone())).collect();
    if chain.is_empty() {
        return Ok(());
    }
    let context = ChainContext {
        topic_prefix: topic_prefix.to_owned(),
        tables: tables
            .iter()
            .map(|table| (table.name.clone(), table.outbox.as_ref().map(|outbox| outbox.aggregatetype.clone())))
            .collect(),
        // What the chain makes of the messages does not decide whether it configures.
        ..ChainContext::default()
    };
    match TransformChain::configure(&chain, context) {
        Ok(_) => Ok(()),
        Err(error) => match s.get(&error.property) {
            Some(field) => cx.fail(&field, error.problem),
            None => Err(cx.err(s.at, &super::fields::join(&s.path, &error.property), error.problem)),
        },
    }
}

const PASS_THROUGH_WHY: &str = "a transform of headers or schema metadata: it changes no key, topic or column the model \
    follows, and runs as the identity";
const EXPANDED_PAYLOAD: &str =
    "the outbox payload expanded from JSON into a struct: the value's shape, not its key, topic or headers";

pub(super) fn connector(
    cx: &Cx,
    s: &Section,
    tables: &[TableSetup],
    horizon: &Horizon,
) -> Res<(DebeziumConfig, BTreeMap<String, String>, NotModelledList)> {
    if let Some(field) = s.get(&SLOT_SEEK["internal.".len()..]) {
        return cx.fail(
            &field,
            format!(
                "Debezium reads this internal property as {SLOT_SEEK} (it ignores the name without the prefix); write \
                 that"
            ),
        );
    }
    // The transformation chain's properties (`transforms`, `transforms.<alias>.*`, `predicates`,
    // `predicates.<alias>.*`) are checked as a chain below.
    let not_modelled = check_properties(cx, s)?;
    let text = |key: &str, default: &str| s.opt(key, default.to_owned(), |field| prop_text(cx, field));
    let milliseconds = |key: &str, default: u64, low: u64| s.opt(key, default, |field| prop_setting_ms(cx, field, low));
    let small = |key: &str, default: i64| {
        s.opt(key, default, |field| prop_int(cx, field, 1, i64::from(u32::MAX))).map(|value| value as u32)
    };
    let flag = |key: &str, default: bool| s.opt(key, default, |field| prop_bool(cx, field));
    let non_empty = |key: &str, default: &str| {
        let value = text(key, default)?;
        match s.get(key) {
            Some(field) if value.trim().is_empty() => cx.fail(&field, "must not be empty"),
            _ => Ok(value),
        }
    };

    let name = non_empty("name", "claims-connector")?;
    if let Some(field) = s.get("connector.class")
        && prop_text(cx, &field)? != CONNECTOR_CLASS
    {
        return cx.fail(
            &field,
            format!("`{}` is not the PostgreSQL connector; expected {CONNECTOR_CLASS}", prop_text(cx, &field)?),
        );
    }
    let prefix_field = s.need(cx, "topic.prefix", "; topics are <topic.prefix>.<schema>.<table>")?;
    let topic_prefix = prop_text(cx, &prefix_field)?;
    if topic_prefix.is_empty() || !topic_prefix.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
        return cx.fail(
            &prefix_field,
            format!("`{topic_prefix}` is not a valid topic prefix (letters, digits, `.`, `_`, `-`)"),
        );
    }
    let plugin_field = s.need(cx, "plugin.name", &format!("; set it to pgoutput ({DECODERBUFS})"))?;
    let plugin_name = prop_text(cx, &plugin_field)?.trim().to_ascii_lowercase();
    if plugin_name != "pgoutput" {
        return cx.fail(&plugin_field, format!("`{plugin_name}` is not modelled; only pgoutput ({DECODERBUFS})"));
    }
    let slot_name = non_empty("slot.name", "debezium")?;
    if slot_name.len() > 63 || !slot_name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        let field = s.need(cx, "slot.name", "")?;
        return cx.fail(
            &field,
            format!("`{slot_name}` is not a valid slot name (lower-case letters, digits and `_`, at most 63)"),
        );
    }
    let publication_name = non_empty("publication.name", "dbz_publication")?;
    let publication_filtered = s.opt("publication.autocreate.mode", false, |field| {
        match prop_text(cx, field)?.trim().to_ascii_lowercase().as_str() {
            "all_tables" => Ok(false),
            "filtered" => Ok(true),
            "disabled" | "no_tables" => cx.fail(
                field,
                "is not modelled yet; all_tables (FOR ALL TABLES) or filtered (FOR TABLE the table.include.list)",
            ),
            other => cx.fail(
                field,
                format!("`{other}` is not a publication.autocreate.mode; all_tables, filtered, disabled or no_tables"),
            ),
        }
    })?;
    let snapshot_mode = s.opt("snapshot.mode", SnapshotMode::Initial, |field| snapshot_mode(cx, field))?;
    let snapshot_fetch_size = small("snapshot.fetch.size", 10_240)?;
    let max_batch_size = small("max.batch.size", 2_048)?;
    let max_queue_size = small("max.queue.size", 8_192)?;
    if max_queue_size <= max_batch_size
        && let Some(field) = s.get("max.queue.size").or_else(|| s.get("max.batch.size"))
    {
        return cx.fail(
            &field,
            format!("max.queue.size ({max_queue_size}) must be larger than max.batch.size ({max_batch_size})"),
        );
    }
    let poll_interval_ms = milliseconds("poll.interval.ms", 500, 1)?;
    let retriable_restart_connector_wait_ms = milliseconds("retriable.restart.connector.wait.ms", 10_000, 1)?;
    let tombstones_on_delete = flag("tombstones.on.delete", true)?;
    let all_tables = tables;
    let mut tables = include_list(cx, s, tables)?;
    let snapshot_tables = snapshot_include_list(cx, s, all_tables, &tables)?;
    let signalling = signalling(cx, s, all_tables, &mut tables, &topic_prefix)?;
    let (message_key_columns, keyed) = message_key_columns(cx, s, all_tables)?;
    let null_key_tables =
        all_tables.iter().filter(|table| table.keyless && !keyed.contains(&table.id)).map(|table| table.id).collect();
    let offset_mismatch_strategy = choose(
        cx,
        s,
        "offset.mismatch.strategy",
        &OffsetMismatchStrategy::ALL,
        OffsetMismatchStrategy::name,
        OffsetMismatchStrategy::NoValidation,
    )?;
    let slot_seek_to_known_offset_on_start = flag(SLOT_SEEK, false)?;
    let lsn_flush_mode =
        choose(cx, s, "lsn.flush.mode", &LsnFlushMode::ALL, LsnFlushMode::name, LsnFlushMode::Connector)?;
    let heartbeat_interval_ms = milliseconds("heartbeat.interval.ms", 0, 0)?;
    // Every heartbeat is a record in Kafka and an event of the trace: at most `MAX_HEARTBEATS`
    // over the horizon.
    if let Some(field) = s.get("heartbeat.interval.ms")
        && heartbeat_interval_ms > 0
        && horizon.ms / heartbeat_interval_ms > limits::MAX_HEARTBEATS
    {
        let shortest = horizon.ms.div_ceil(limits::MAX_HEARTBEATS);
        return cx.fail(
            &field,
            format!(
                "{heartbeat_interval_ms} ms makes {} heartbeats within {}, {}; expected 0 (off) or {shortest} to {}: at \
                 most {} heartbeats in a run",
                horizon.ms / heartbeat_interval_ms,
                duration_text(horizon.ms),
                horizon.describe(),
                limits::MAX_SETTING_MS,
                limits::MAX_HEARTBEATS
            ),
        );
    }
    let slot_failover = flag("slot.failover", false)?;
    // The action query is a logical decoding message (`SELECT pg_logical_emit_message(…)`), or
    // is modelled as an upsert into a table of the scenario, which the query must name
    // (`INSERT INTO public.heartbeat … ON CONFLICT … DO UPDATE …`).
    let heartbeat_action_message = match s.get("heartbeat.action.query") {
        None => None,
        Some(field) => match heartbeat_message(&prop_text(cx, &field)?) {
            Ok(message) => message,
            Err(problem) => return cx.fail(&field, problem),
        },
    };
    let heartbeat_action_table = match s.get("heartbeat.action.query") {
        None => None,
        Some(_) if heartbeat_action_message.is_some() => None,
        Some(field) => {
            let query = prop_text(cx, &field)?;
            let named: Vec<&TableSetup> =
                all_tables.iter().filter(|table| query.contains(table.name.as_str())).collect();
            match named.as_slice() {
                [table] if table.rows >= 1 => Some(table.id),
                [table] => {
                    return cx
                        .fail(&field, format!("the heartbeat table {} needs its row: give it rows = 1", table.name));
                }
                _ => {
                    return cx.fail(
                        &field,
                        "the model runs the heartbeat query as an upsert of row 1 of a table of the scenario: name \
                         exactly one [[table]] in it, e.g. INSERT INTO public.heartbeat ...",
                    );
                }
            }
        }
    };
    if (heartbeat_action_table.is_some() || heartbeat_action_message.is_some()) && heartbeat_interval_ms == 0 {
        let field = s.get("heartbeat.action.query").expect("present");
        return cx.fail(&field, "heartbeat.action.query runs only with heartbeat.interval.ms above 0");
    }
    for key in ["slot.drop.on.stop", "provide.transaction.metadata"] {
        if let Some(field) = s.get(key)
            && prop_bool(cx, &field)?
        {
            return cx.fail(&field, "true is not modelled yet; only false");
        }
    }
    let message_prefixes = message_prefix_filter(cx, s)?;
    let mut properties = BTreeMap::new();
    for entry in s.entries {
        properties.insert(entry.key.clone(), prop_text(cx, &s.field(entry))?);
    }
    transform_chain(cx, s, &properties, &topic_prefix, all_tables)?;
    let debezium = DebeziumConfig {
        version: (3, 7),
        pgjdbc: None,
        name,
        // Set by the caller, which knows the entry's place.
        connector_index: 0,
        topic_prefix,
        slot_name,
        plugin_name,
        publication_name,
        publication_filtered,
        snapshot_mode,
        snapshot_fetch_size,
        max_batch_size,
        poll_interval_ms,
        retriable_restart_connector_wait_ms,
        tombstones_on_delete,
        log_position_check_enable: true,
        offset_mismatch_strategy,
        slot_seek_to_known_offset_on_start,
        lsn_flush_mode,
        heartbeat_interval_ms,
        heartbeat_action_table,
        heartbeat_action_message,
        message_prefixes,
        slot_failover,
        tables,
        snapshot_tables,
        signalling,
        later_tables: Vec::new(),
        message_key_columns,
        null_key_tables,
    };
    Ok((debezium, properties, not_modelled))
}

/// The tables `message.key.columns` keys by their nullable unique column, with the column.
type MessageKeyColumns = Vec<(TableId, handoff_models::core::ids::UniqueColumn)>;

/// `message.key.columns` (`<schema>.<table>:<column>[,<column>]`, entries separated by `;`,
/// `KeyMapper.getInstance`): the columns a table's record keys are made of instead of its
/// primary key, which its incremental snapshot's chunks are ordered and bounded by too
/// (`AbstractChunkQueryBuilder.getQueryColumns`). The model keys a table by its primary key
/// (`id`, a no-op), by `id` on a table without a primary key (which then has a key, DBZ-4107),
/// or by its nullable unique column (`[[table]] unique_column`); a regular expression for the
/// table, other columns and several columns are not modelled. Also returns every table named.
fn message_key_columns(cx: &Cx, s: &Section, all_tables: &[TableSetup]) -> Res<(MessageKeyColumns, Vec<TableId>)> {
    let Some(field) = s.get("message.key.columns") else { return Ok((Vec::new(), Vec::new())) };
    let text = prop_text(cx, &field)?;
    let mut keyed = Vec::new();
    let mut named = Vec::new();
    for entry in text.split(';').map(str::trim).filter(|entry| !entry.is_empty()) {
        let Some((table, columns)) = entry.split_once(':') else {
            return cx.fail(
                &field,
                format!("`{entry}` is not `<schema>.<table>:<column>`, like \"public.hubs:external_id\""),
            );
        };
        let table = table.trim();
        if table.chars().any(|c| "*+?()[]|\\^$".contains(c)) {
            return cx.fail(&field, format!("`{table}`: regular expressions are not modelled yet; name the table"));
        }
        let id = table_id(cx, &field, table, all_tables)?;
        let setup = &all_tables[usize::from(id.0)];
        let columns: Vec<&str> = columns.split(',').map(str::trim).collect();
        let unique = setup.unique_column.as_ref();
        let id_column = if setup.keyless { "its column `id`" } else { "its primary key `id`" };
        let of_table = match unique {
            Some(unique) => format!("{id_column} or its unique column `{}`", unique.name),
            None => format!("{id_column} (the table declares no unique_column)"),
        };
        let column = match columns.as_slice() {
            [column] => *column,
            _ => {
                return cx.fail(&field, format!("`{entry}`: one key column per table is modelled; name {of_table}"));
            }
        };
        if named.contains(&id) {
            return cx.fail(&field, format!("`{table}` is named twice"));
        }
        named.push(id);
        if setup.composite_key.is_some() {
            return cx.fail(
                &field,
                format!(
                    "`{entry}`: {table} has a two-column primary key; message.key.columns on it is not modelled yet"
                ),
            );
        }
        if column == "id" {
            continue;
        }
        let Some(unique) = unique.filter(|unique| unique.name == column) else {
            return cx
                .fail(&field, format!("`{entry}`: `{column}` is not modelled as a key of {table}; name {of_table}"));
        };
        if setup.replica_identity != handoff_models::core::change::ReplicaIdentity::Full {
            return cx.fail(
                &field,
                format!(
                    "`{entry}`: {table} has REPLICA IDENTITY DEFAULT, so a DELETE's old row carries only `id` and its \
                     record key's `{column}` would be NULL; that is not modelled: set replica_identity = \"full\" \
                     on the table"
                ),
            );
        }
        keyed.push((id, unique.clone()));
    }
    Ok((keyed, named))
}

/// An enumerated connector property: one of `all`, by its Debezium name.
fn choose<T: Copy>(cx: &Cx, s: &Section, key: &str, all: &[T], name: fn(T) -> &'static str, default: T) -> Res<T> {
    s.opt(key, default, |field| {
        let text = prop_text(cx, field)?;
        match all.iter().copied().find(|value| name(*value) == text.trim()) {
            Some(value) => Ok(value),
            None => cx.fail(field, unknown_value(&text, all.iter().map(|value| name(*value)))),
        }
    })
}

fn snapshot_mode(cx: &Cx, field: &Field) -> Res<SnapshotMode> {
    let modes = [SnapshotMode::Initial, SnapshotMode::NoData, SnapshotMode::WhenNeeded, SnapshotMode::Always];
    let text = prop_text(cx, field)?;
    let lower = text.trim().to_ascii_lowercase();
    if let Some(mode) = modes.into_iter().find(|mode| mode.name() == lower) {
        return Ok(mode);
    }
    let names = modes.map(SnapshotMode::name).join(", ");
    match lower.as_str() {
        // Before 3.3 `never` is `no_data` under its old name (the release is checked once
        // `[versions]` is read: `snapshot_mode_release`).
        "never" => Ok(SnapshotMode::NoData),
        "initial_only" | "configuration_based" | "custom" => {
            cx.fail(field, format!("`{text}` is not modelled yet; expected one of {names}"))
        }
        _ => cx.fail(field, format!("unknown value `{text}`; expected one of {names}")),
    }
}

/// `snapshot.include.collection.list`: the tables of the `table.include.list` the initial
/// snapshot reads (Debezium takes regular expressions; the model takes the names).
fn snapshot_include_list(
    cx: &Cx,
    s: &Section,
    all_tables: &[TableSetup],
    captured: &[TableId],
) -> Res<Option<Vec<TableId>>> {
    let Some(field) = s.get("snapshot.include.collection.list") else { return Ok(None) };
    let mut ids = Vec::new();
    for name in prop_text(cx, &field)?.split(',').map(str::trim).filter(|name| !name.is_empty()) {
        let id = table_id(cx, &field, name, all_tables)?;
        if !captured.contains(&id) {
            return cx
                .fail(&field, format!("`{name}` is not in table.include.list: a snapshot reads only captured tables"));
        }
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    // In the order of the captured tables, as the snapshot reads them.
    Ok(Some(captured.iter().copied().filter(|id| ids.contains(id)).collect()))
}

/// `signal.data.collection` and the incremental snapshot's properties (reference
/// debezium-postgres.md §6): the signal table joins the captured tables, as Debezium adds it to
/// its table filter (`RelationalTableFilters`), so that a filtered publication has it too. The
/// scripted signals are added once the script is read.
fn signalling(
    cx: &Cx,
    s: &Section,
    all_tables: &[TableSetup],
    tables: &mut Vec<TableId>,
    topic_prefix: &str,
) -> Res<Option<Signalling>> {
    // `read.only` (default false): the read-only incremental snapshot (PostgreSQL 13 or later,
    // `pg_current_snapshot()`; every version the model has).
    let read_only = s.opt("read.only", false, |field| prop_bool(cx, field))?;
    // `signal.enabled.channels` (default `source`).
    let (mut source_channel, mut kafka_channel) = (true, false);
    if let Some(field) = s.get("signal.enabled.channels") {
        source_channel = false;
        for channel in prop_text(cx, &field)?.split(',').map(|channel| channel.trim().to_ascii_lowercase()) {
            match channel.as_str() {
                "source" => source_channel = true,
                "kafka" => kafka_channel = true,
                "" => {}
                "jmx" | "file" | "in-process" => {
                    return cx.fail(&field, format!("the {channel} channel is not modelled yet; source or kafka"));
                }
                other => {
                    return cx.fail(
                        &field,
                        format!("`{other}` is no signal channel; source, kafka, jmx, file or in-process"),
                    );
                }
            }
        }
    }
    let Some(field) = s.get("signal.data.collection") else {
        if read_only && let Some(field) = s.get("read.only") {
            return cx.fail(
                &field,
                "true needs signal.data.collection in the model: the signals the scenario scripts are kept by a \
                 signal table (Debezium's read-only mode writes nothing to it; with signal.enabled.channels = \
                 kafka it is never read)",
            );
        }
        for key in [
            "incremental.snapshot.chunk.size",
            "incremental.snapshot.watermarking.strategy",
            "signal.enabled.channels",
            "signal.kafka.topic",
            "signal.kafka.bootstrap.servers",
            "signal.kafka.groupId",
            "signal.poll.interval.ms",
            "signal.consumer.auto.commit.interval.ms",
        ] {
            if let Some(field) = s.get(key) {
                return cx.fail(
                    &field,
                    "has no effect without signal.data.collection: the model reads signals from a signal table only",
                );
            }
        }
        return Ok(None);
    };
    let name = prop_text(cx, &field)?;
    let table = table_id(cx, &field, name.trim(), all_tables)?;
    let setup = &all_tables[usize::from(table.0)];
    if let Some(database) = &setup.database {
        return cx.fail(
            &field,
            format!("`{name}` is in database \"{database}\"; the signal table must be in the connector's database"),
        );
    }
    if setup.outbox.is_some() {
        return cx.fail(&field, format!("`{name}` is an outbox table; the signal table is a table of its own"));
    }
    if !tables.contains(&table) {
        tables.push(table);
    }
    let chunk_size = s.opt("incremental.snapshot.chunk.size", 1024, |field| prop_int(cx, field, 1, 1_000_000))? as u32;
    let watermarking = choose(
        cx,
        s,
        "incremental.snapshot.watermarking.strategy",
        &WatermarkingStrategy::ALL,
        WatermarkingStrategy::name,
        WatermarkingStrategy::InsertInsert,
    )?;
    let kafka = if kafka_channel {
        // `KafkaSignalChannel`: the bootstrap servers are required (`Field::isRequired`); the
        // topic defaults to `<topic.prefix>-signal`, the group to `kafka-signal`.
        s.need(
            cx,
            "signal.kafka.bootstrap.servers",
            " with the kafka signal channel (KafkaSignalChannel requires it)",
        )?;
        let topic_name = match s.get("signal.kafka.topic") {
            Some(field) => {
                let name = prop_text(cx, &field)?;
                if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
                    return cx
                        .fail(&field, format!("`{name}` is not a valid topic name (letters, digits, `.`, `_`, `-`)"));
                }
                name
            }
            None => format!("{topic_prefix}-signal"),
        };
        let group_id = match s.get("signal.kafka.groupId") {
            Some(field) => prop_text(cx, &field)?,
            None => "kafka-signal".to_owned(),
        };
        let poll_interval_ms =
            s.opt("signal.poll.interval.ms", 5000, |field| prop_int(cx, field, 1, 3_600_000))? as u64;
        let auto_commit_interval_ms =
            s.opt("signal.consumer.auto.commit.interval.ms", 5000, |field| prop_int(cx, field, 0, 3_600_000))? as u64;
        Some(KafkaChannel {
            topic: 0,
            topic_name,
            group_id,
            poll_interval_ms,
            auto_commit_interval_ms,
            signals: Vec::new(),
        })
    } else {
        for key in [
            "signal.kafka.topic",
            "signal.kafka.bootstrap.servers",
            "signal.kafka.groupId",
            "signal.consumer.auto.commit.interval.ms",
        ] {
            if let Some(field) = s.get(key) {
                return cx.fail(&field, "has no effect: signal.enabled.channels does not have kafka");
            }
        }
        None
    };
    if let Some(field) = s.get("signal.poll.interval.ms")
        && kafka.is_none()
    {
        return cx.fail(
            &field,
            "has no effect: the source channel is read from the stream, only the kafka channel is polled",
        );
    }
    if read_only && let Some(field) = s.get("incremental.snapshot.watermarking.strategy") {
        return cx.fail(
            &field,
            "has no effect with read.only = true: the read-only snapshot writes no watermark rows \
             (its watermarks are pg_current_snapshot())",
        );
    }
    Ok(Some(Signalling { table, chunk_size, watermarking, signals: Vec::new(), source_channel, kafka, read_only }))
}

/// `table.include.list`: names of `[[table]]`, in snapshot order; all tables by default.
pub(super) fn include_list(cx: &Cx, s: &Section, tables: &[TableSetup]) -> Res<Vec<TableId>> {
    // The connector reads the main database (`database.dbname`): tables of another are not its.
    let Some(field) = s.get("table.include.list") else {
        return Ok(tables.iter().filter(|table| table.database.is_none()).map(|table| table.id).collect());
    };
    let mut ids = Vec::new();
    for name in prop_text(cx, &field)?.split(',').map(str::trim) {
        if name.is_empty() {
            return cx.fail(&field, "an empty table name in the list");
        }
        let id = table_id(cx, &field, name, tables)?;
        if let Some(database) = &tables[usize::from(id.0)].database {
            return cx.fail(
                &field,
                format!(
                    "`{name}` is in database \"{database}\"; the connector reads the main database (a slot decodes \
                     its own database only)"
                ),
            );
        }
        if ids.contains(&id) {
            return cx.fail(&field, format!("`{name}` is listed twice"));
        }
        ids.push(id);
    }
    Ok(ids)
}

/// The content `now()::varchar` writes: `2026-12-01 22:11:20.123456+00`.
const NOW_TEXT_BYTES: u64 = 29;

/// A `heartbeat.action.query` that emits a logical decoding message, parsed: `Ok(None)` when
/// it does not call `pg_logical_emit_message` (a table write), `Err` with the problem when it
/// does in a form the model does not take. The form taken is
/// `SELECT pg_logical_emit_message(transactional, 'prefix', content)`, with `true` or `false`,
/// a string literal, and for the content a string literal or `now()::varchar` (`::text`).
fn heartbeat_message(query: &str) -> Result<Option<HeartbeatMessage>, String> {
    const FUNCTION: &str = "pg_logical_emit_message";
    let lower = query.to_ascii_lowercase();
    if !lower.contains(FUNCTION) {
        return Ok(None);
    }
    let form = format!(
        "the model runs a message heartbeat of the form SELECT {FUNCTION}(false, 'heartbeat', now()::varchar): \
         transactional true or false, the prefix a string literal, the content a string literal or now()::varchar"
    );
    let text = query.trim().trim_end_matches(';').trim_end();
    let rest = match text.get(..6) {
        Some(select) if select.eq_ignore_ascii_case("select") => text[6..].trim_start(),
        _ => return Err(format!("`{query}` is not a SELECT of {FUNCTION}; {form}")),
    };
    let call = match rest.get(..FUNCTION.len()) {
        Some(name) if name.eq_ignore_ascii_case(FUNCTION) => rest[FUNCTION.len()..].trim_start(),
        _ => return Err(format!("`{query}` selects more than {FUNCTION}(…); {form}")),
    };
    let Some(inner) = call.strip_prefix('(').and_then(|call| call.strip_suffix(')')) else {
        return Err(format!("`{query}`: expected {FUNCTION}(…) and nothing after it; {form}"));
    };
    let arguments = split_arguments(inner).ok_or_else(|| format!("`{query}`: an unterminated string literal"))?;
    let [transactional, prefix, content] = arguments.as_slice() else {
        return Err(format!(
            "`{query}` passes {} argument(s) to {FUNCTION}; expected 3 (transactional, prefix, content; the flush \
             argument of PostgreSQL 17 is not modelled)",
            arguments.len()
        ));
    };
    let transactional = match transactional.to_ascii_lowercase().as_str() {
        "true" => true,
        "false" => false,
        other => return Err(format!("transactional `{other}` in `{query}`: expected true or false")),
    };
    let Some(prefix) = string_literal(prefix) else {
        return Err(format!("the prefix `{prefix}` in `{query}` is not a string literal; {form}"));
    };
    let payload_bytes = match string_literal(content) {
        Some(literal) => literal.len() as u64,
        None => match content.to_ascii_lowercase().replace(' ', "").as_str() {
            "now()::varchar" | "now()::text" | "now()::charactervarying" => NOW_TEXT_BYTES,
            _ => return Err(format!("the content `{content}` in `{query}` is not modelled; {form}")),
        },
    };
    Ok(Some(HeartbeatMessage { transactional, prefix, payload_bytes }))
}

/// The arguments of a call, split at the commas outside string literals and parentheses,
/// trimmed; `None` for an unterminated literal.
fn split_arguments(inner: &str) -> Option<Vec<String>> {
    let mut arguments = Vec::new();
    let (mut current, mut depth, mut quoted) = (String::new(), 0u32, false);
    for c in inner.chars() {
        match c {
            '\'' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted => depth = depth.saturating_sub(1),
            ',' if !quoted && depth == 0 => {
                arguments.push(current.trim().to_string());
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if quoted {
        return None;
    }
    arguments.push(current.trim().to_string());
    Some(arguments)
}

/// The text of a SQL string literal (`'it''s'` is `it's`), or `None` if `text` is not one.
fn string_literal(text: &str) -> Option<String> {
    let inner = text.strip_prefix('\'')?.strip_suffix('\'')?;
    // A lone quote inside: two literals or an expression, not one literal.
    (!inner.replace("''", "").contains('\'')).then(|| inner.replace("''", "'"))
}

/// `message.prefix.include.list` / `message.prefix.exclude.list` (`LogicalDecodingMessageFilter`):
/// comma-separated prefixes, one of the two lists at most.
fn message_prefix_filter(cx: &Cx, s: &Section) -> Res<MessagePrefixFilter> {
    const INCLUDE: &str = "message.prefix.include.list";
    const EXCLUDE: &str = "message.prefix.exclude.list";
    let list = |key: &str| -> Res<Option<Vec<String>>> {
        let Some(field) = s.get(key) else { return Ok(None) };
        let mut prefixes = Vec::new();
        for prefix in prop_text(cx, &field)?.split(',').map(str::trim) {
            if prefix.is_empty() {
                return cx.fail(&field, "an empty prefix in the list");
            }
            if prefix.contains(['*', '+', '?', '[', ']', '(', ')', '{', '}', '|', '^', '$', '\\']) {
                return cx.fail(
                    &field,
                    format!(
                        "`{prefix}`: Debezium reads the list as regular expressions; the model takes prefixes by name \
                         only (a dot matches itself)"
                    ),
                );
            }
            prefixes.push(prefix.to_string());
        }
        Ok(Some(prefixes))
    };
    match (list(INCLUDE)?, list(EXCLUDE)?) {
        (Some(_), Some(_)) => {
            let field = s.get(EXCLUDE).expect("present");
            cx.fail(&field, format!("{INCLUDE} and {EXCLUDE} cannot both be set; give one of them"))
        }
        (Some(prefixes), None) => Ok(MessagePrefixFilter::Include(prefixes)),
        (None, Some(prefixes)) => Ok(MessagePrefixFilter::Exclude(prefixes)),
        (None, None) => Ok(MessagePrefixFilter::All),
    }
}

/// Connect's exactly-once properties of a source connector (KIP-618; reference kafka-connect.md
/// §2.1), checked as the herder validates them (`DistributedHerder.validateSourceConnectorConfig`).
pub(super) fn exactly_once_properties(cx: &Cx, s: &Section, connect: &ConnectConfig) -> Res<()> {
    if let Some(field) = s.get("exactly.once.support") {
        match prop_text(cx, &field)?.as_str() {
            "requested" => {}
            "required" if connect.exactly_once() => {}
            // `validateSourceConnectorExactlyOnceSupport`: `required` needs the worker's support.
            "required" => {
                return cx.fail(
                    &field,
                    "Connect refuses the connector: exactly.once.support=required needs workers with \
                     exactly.once.source.support=enabled ([connect])",
                );
            }
            other => return cx.fail(&field, unknown_value(other, ["requested", "required"].into_iter())),
        }
    }
    if let Some(field) = s.get("transaction.boundary") {
        match prop_text(cx, &field)?.as_str() {
            "poll" => {}
            // `SourceConnector.canDefineTransactionBoundaries` is UNSUPPORTED for Debezium's
            // PostgreSQL connector: Connect refuses the configuration.
            "connector" => {
                return cx.fail(
                    &field,
                    "Debezium's PostgreSQL connector does not define transaction boundaries: Connect refuses \
                     transaction.boundary=connector for it (Debezium supports poll only)",
                );
            }
            "interval" => {}
            other => return cx.fail(&field, unknown_value(other, ["poll", "interval", "connector"].into_iter())),
        }
    }
    if let Some(field) = s.get("transaction.boundary.interval.ms") {
        let interval = prop_text(cx, &field)?;
        // `SourceConnectorConfig`: a non-negative long, with no effect unless the boundary is
        // `interval`.
        if interval.trim().parse::<u64>().is_err() {
            return cx.fail(&field, "expected a number of milliseconds, 0 or more");
        }
    }
    Ok(())
}

#[cfg(test)]
mod message_tests {
    use super::{HeartbeatMessage, NOW_TEXT_BYTES, heartbeat_message};

    #[test]
    fn the_recommended_message_heartbeat_is_parsed() {
        let parsed = heartbeat_message("SELECT pg_logical_emit_message(false, 'heartbeat', now()::varchar)");
        let expected =
            HeartbeatMessage { transactional: false, prefix: "heartbeat".into(), payload_bytes: NOW_TEXT_BYTES };
        assert_eq!(parsed, Ok(Some(expected)));
        let parsed = heartbeat_message("select PG_LOGICAL_EMIT_MESSAGE( true , 'it''s', 'abc');");
        let expected = HeartbeatMessage { transactional: true, prefix: "it's".into(), payload_bytes: 3 };
        assert_eq!(parsed, Ok(Some(expected)));
        assert_eq!(heartbeat_message("INSERT INTO public.heartbeat (id) VALUES (1)"), Ok(None));
    }

    #[test]
    fn unsupported_message_forms_are_refused_with_the_form_taken() {
        for (query, problem) in [
            ("SELECT pg_logical_emit_message(false, 'hb', now()::varchar, true)", "passes 4 argument(s)"),
            ("SELECT pg_logical_emit_message(maybe, 'hb', 'x')", "transactional `maybe`"),
            ("SELECT pg_logical_emit_message(false, hb, 'x')", "the prefix `hb`"),
            ("SELECT pg_logical_emit_message(false, 'hb', md5(random()::text))", "the content `md5(random()::text)`"),
            ("SELECT 1, pg_logical_emit_message(false, 'hb', 'x')", "selects more than"),
            ("SELECT pg_logical_emit_message(false, 'hb, 'x')", "unterminated"),
        ] {
            let error = heartbeat_message(query).expect_err(query);
            assert!(error.contains(problem), "{query}: {error}");
        }
    }
}
