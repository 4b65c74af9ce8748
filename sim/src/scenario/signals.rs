//! `signal` steps of `[[workload.script]]`: the rows a script inserts into a connector's signal
//! table (`signal.data.collection`), read once the connectors are, since the signal table and
//! the tables a signal names are theirs. Each step becomes `INSERT INTO <signal table> (id, type,
//! data) VALUES (…)`: its row numbered from 1 in file order per signal table (the row's key; its
//! `id` column is the step's `id`), and its `data` read as Debezium reads it
//! (`ExecuteSnapshot.getData`, `AbstractIncrementalSnapshotChangeEventSource
//! .expandAndDedupeDataCollectionIds`: each of `data-collections` a regular expression matched
//! against the whole name of every table the connector captures). `stop-snapshot` takes the same
//! `additional-conditions` gives a table a filter (`RowFilter`: comparisons of the model's columns
//! joined by AND), the first condition whose `data-collection` matches it. `stop-snapshot` takes
//! the same patterns (none or an empty array: the whole snapshot; a pattern matching no captured table is
//! kept, as Debezium keeps it, and said when the stop is processed); `pause-snapshot` and
//! `resume-snapshot` read no data (an empty column is `{}`); `log` needs a `message`.

use super::fields::Field;
use super::fields::{Cx, Res, Section};
use super::workload::{SIGNAL_TABLE_PLACEHOLDER, op_field};
use handoff_models::components::app::StepKind;
use handoff_models::components::connect::debezium::DebeziumConfig;
use handoff_models::components::connect::debezium::KafkaSignalEntry;
use handoff_models::core::change::RowOp;
use handoff_models::core::ids::{Status, TableId};
use handoff_models::core::signal::{FilterColumn, RowFilter, Signal, SignalAction, SnapshotType, SurrogateKey};
use handoff_models::scenario::spec::{KafkaSignalStep, ScriptedTxn, SignalTopic, TableSetup};
use std::collections::BTreeMap;

/// The `signal` steps of `section`, `[workload]` or `[check]`: `section` is `[workload]` or `[check]` (its `script` steps are `scripted`); `numbers` counts
/// the rows per signal table across both, so that a bound's signals follow the workload's in
/// each connector's list of signals (a row's key is its place there).
pub(super) fn signal_steps(
    cx: &Cx,
    section: &Section,
    scripted: &mut [ScriptedTxn],
    tables: &[TableSetup],
    connectors: &mut [&mut DebeziumConfig],
    numbers: &mut BTreeMap<TableId, i64>,
    kafka: &mut KafkaSignals,
) -> Res<()> {
    let Some(field) = section.get("script") else { return Ok(()) };
    let items = cx.items(&field, "an array of tables")?;
    let mut signal_tables: Vec<TableId> = connectors.iter().filter_map(|connector| connector.signal_table()).collect();
    signal_tables.dedup();
    for (item, txn) in items.iter().zip(scripted.iter_mut()) {
        let s = cx.section(item)?;
        let Some(signal) = s.get("signal") else {
            if txn.ops.iter().any(|op| signal_tables.contains(&op.target().0)) {
                return cx.fail(
                    &op_field(cx, item)?,
                    "writes to the signal table (signal.data.collection): write a signal with a `signal` step",
                );
            }
            continue;
        };
        if matches!(txn.step.kind, StepKind::KafkaSignal { .. }) {
            kafka_step(cx, &s, signal, txn, tables, connectors, kafka)?;
            continue;
        }
        let table = match txn.ops.first().map(|op| op.target().0) {
            Some(SIGNAL_TABLE_PLACEHOLDER) | None => match signal_tables.as_slice() {
                [only] => *only,
                [] => return cx.fail(&signal, "no connector has a signal table: set signal.data.collection"),
                _ => return cx.fail(&signal, "the connectors have several signal tables: name one with `table`"),
            },
            Some(table) if signal_tables.contains(&table) => table,
            Some(_) => {
                let at = s.get("table").unwrap_or(signal);
                return cx.fail(&at, "is no connector's signal table (signal.data.collection)");
            }
        };
        let number = numbers.entry(table).or_insert(0);
        *number += 1;
        txn.ops = vec![RowOp::Insert { table, key: *number, status: Status::Submitted, amount_cents: 0 }];
        let id = s.opt("id", format!("signal-{number}"), |field| cx.owned(field))?;
        let (data, at, request) = step_request(cx, &s, signal)?;
        for connector in connectors.iter_mut().filter(|connector| connector.signal_table() == Some(table)) {
            let action = action_for(cx, &at, &request, connector, tables, *number)?;
            if let Some(signalling) = connector.signalling.as_mut() {
                signalling.signals.push(Signal { id: id.clone(), data: data.clone(), action });
            }
        }
    }
    Ok(())
}

/// A signal's request against connector `connector`'s tables and release: the action it runs.
/// `number`: the signal's row (or record) number, which keeps its conditions (255 at most).
fn action_for(
    cx: &Cx,
    at: &Field,
    request: &Request,
    connector: &DebeziumConfig,
    tables: &[TableSetup],
    number: i64,
) -> Res<SignalAction> {
    let action = match request {
        Request::Execute(kind, patterns, filters, surrogate) => {
            if connector.version < (1, 6) {
                let (major, minor) = connector.version;
                return cx.fail(
                    at,
                    format!(
                        "`execute-snapshot`: incremental snapshots exist from Debezium 1.6; [versions] debezium = \
                         \"{major}.{minor}\" has none"
                    ),
                );
            }
            if *kind == SnapshotType::Blocking && connector.version < (2, 4) {
                let (major, minor) = connector.version;
                return cx.fail(
                    at,
                    format!(
                        "type `blocking`: ad-hoc blocking snapshots exist from Debezium 2.4; [versions] \
                         debezium = \"{major}.{minor}\" has incremental ones only"
                    ),
                );
            }
            if surrogate.is_some() && connector.version < (2, 2) {
                let (major, minor) = connector.version;
                return cx.fail(
                    at,
                    format!(
                        "`surrogate-key` exists from Debezium 2.2 (DBZ-6023); [versions] debezium = \
                         \"{major}.{minor}\" chunks by the primary key only"
                    ),
                );
            }
            // Against every table the connector captures at some point of the run: a table a
            // later `connector_config` adds is expanded once it is captured; a signal executed
            // before that skips it ([`handoff_models::components::connect::debezium`]).
            let collections = match resolve(patterns, &connector.ever_captured(), tables) {
                Ok(collections) => collections,
                Err(problem) => return cx.fail(at, format!("{problem} (connector {})", connector.name)),
            };
            let conditions = match conditions_of(filters, &collections, tables) {
                Ok(conditions) => conditions,
                Err(problem) => return cx.fail(at, format!("{problem} (connector {})", connector.name)),
            };
            if (!conditions.is_empty() || surrogate.is_some())
                && let Some(table) =
                    collections.iter().map(|id| &tables[usize::from(id.0)]).find(|table| table.composite_key.is_some())
            {
                return cx.fail(
                    at,
                    format!(
                        "additional-conditions and surrogate-key on {}, a table with a two-column primary key, are \
                         not modelled yet",
                        table.name
                    ),
                );
            }
            if (!conditions.is_empty() || surrogate.is_some()) && number > i64::from(u8::MAX) {
                return cx.fail(
                    at,
                    format!(
                        "is signal row {number} of its table; the model keeps additional-conditions and \
                         surrogate-key for the first {} signals only",
                        u8::MAX
                    ),
                );
            }
            let surrogate_key = surrogate.clone();
            SignalAction::ExecuteSnapshot { kind: *kind, collections, conditions, surrogate_key }
        }
        Request::Stop(kind, patterns) => match patterns {
            None => SignalAction::StopSnapshot { kind: *kind, tables: None, unmatched: Vec::new() },
            Some(patterns) => match expand(patterns, &connector.tables, tables) {
                Ok((matched, unmatched)) => {
                    SignalAction::StopSnapshot { kind: *kind, tables: Some(matched), unmatched }
                }
                Err(problem) => return cx.fail(at, problem),
            },
        },
        Request::Pause => SignalAction::PauseSnapshot,
        Request::Resume => SignalAction::ResumeSnapshot,
        Request::Log(message) => SignalAction::Log { message: message.clone() },
    };
    Ok(action)
}

/// A `signal` step's `data` column, where its errors point, and what it asks. The step's `data`
/// field, or where to point when it has none (stop, pause and resume read `{}` from an empty data
/// column, `SignalProcessor.processSignal`).
fn step_request<'t>(cx: &Cx, s: &Section<'t>, signal: Field<'t>) -> Res<(String, Field<'t>, Request)> {
    let signal_type = cx.owned(&signal)?;
    let data = match s.get("data") {
        Some(field) => cx.owned(&field)?,
        None => String::new(),
    };
    let at = s.get("data").unwrap_or(signal);
    match parse_request(&signal_type, &data) {
        Ok(request) => Ok((data, at, request)),
        Err(problem) => cx.fail(&at, problem),
    }
}

/// What a signal's `type` and `data` ask, before its table patterns meet a connector's tables.
enum Request {
    /// The type, the `data-collections` patterns, the `additional-conditions` as
    /// (`data-collection` pattern, filter) pairs, and the `surrogate-key`.
    Execute(SnapshotType, Vec<String>, Conditions, Option<SurrogateKey>),
    /// `data-collections` missing or empty: None (the whole snapshot).
    Stop(SnapshotType, Option<Vec<String>>),
    Pause,
    Resume,
    Log(String),
}

fn parse_request(signal_type: &str, data: &str) -> Result<Request, String> {
    match signal_type {
        "execute-snapshot" => parse_data(data)
            .map(|(kind, patterns, filters, surrogate)| Request::Execute(kind, patterns, filters, surrogate)),
        "stop-snapshot" => {
            let object = object_of(data, "{\"data-collections\": [\"public.hubs\"], \"type\": \"incremental\"}")?;
            only_keys(&object, signal_type, &["data-collections", "type"])?;
            let kind = snapshot_type(&object)?;
            let patterns = match object.get("data-collections") {
                None => None,
                Some(collections) => {
                    let patterns = collections.as_array().and_then(|items| {
                        items.iter().map(|item| item.as_str().map(str::to_owned)).collect::<Option<Vec<String>>>()
                    });
                    match patterns {
                        Some(patterns) if patterns.iter().all(|pattern| !pattern.trim().is_empty()) => {
                            // `StopSnapshot.getDataCollections`: an empty array is the whole snapshot.
                            (!patterns.is_empty()).then_some(patterns)
                        }
                        _ => {
                            return Err("data-collections must be an array of table names (regular expressions)".into());
                        }
                    }
                }
            };
            Ok(Request::Stop(kind, patterns))
        }
        "pause-snapshot" | "resume-snapshot" => {
            let object = object_of(data, "{\"type\": \"incremental\"}")?;
            only_keys(&object, signal_type, &["type"])?;
            if snapshot_type(&object)? != SnapshotType::Incremental {
                return Err(format!(
                    "{signal_type} acts on incremental snapshots only; leave out type or say incremental"
                ));
            }
            Ok(if signal_type == "pause-snapshot" { Request::Pause } else { Request::Resume })
        }
        "log" => {
            let object = object_of(data, "{\"message\": \"backfill of hubs begins\"}")?;
            only_keys(&object, signal_type, &["message"])?;
            match object.get("message").and_then(|message| message.as_str()) {
                Some(message) if !message.trim().is_empty() => Ok(Request::Log(message.to_owned())),
                _ => Err("needs message: the text the connector logs, e.g. {\"message\": \"backfill begins\"}".into()),
            }
        }
        other => Err(format!("`{other}` is no signal type the model reads")),
    }
}

/// `data` as a JSON object; an empty column reads as `{}`.
fn object_of(data: &str, example: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    if data.trim().is_empty() {
        return Ok(serde_json::Map::new());
    }
    match serde_json::from_str::<serde_json::Value>(data) {
        Ok(serde_json::Value::Object(object)) => Ok(object),
        Ok(_) => Err(format!("is not a JSON object: expected {example}")),
        Err(error) => Err(format!("is not a JSON object: {error}")),
    }
}

fn only_keys(
    object: &serde_json::Map<String, serde_json::Value>,
    signal_type: &str,
    keys: &[&str],
) -> Result<(), String> {
    match object.keys().find(|key| !keys.contains(&key.as_str())) {
        Some(other) => Err(format!("`{other}` is no key of {signal_type}'s data; {}", keys.join(", "))),
        None => Ok(()),
    }
}

/// `data.type`: `incremental` when missing (`AbstractSnapshotSignal.getSnapshotType`).
fn snapshot_type(object: &serde_json::Map<String, serde_json::Value>) -> Result<SnapshotType, String> {
    match object.get("type").map(|kind| kind.as_str().map(str::to_ascii_lowercase)) {
        None => Ok(SnapshotType::Incremental),
        Some(Some(kind)) if kind == "incremental" => Ok(SnapshotType::Incremental),
        Some(Some(kind)) if kind == "blocking" => Ok(SnapshotType::Blocking),
        Some(Some(kind)) => Err(format!("type `{kind}` is no snapshot type; incremental or blocking")),
        Some(None) => Err("type must be a string: \"incremental\" or \"blocking\"".into()),
    }
}

/// Patterns against the captured tables (`expandAndDedupeDataCollectionIds`; a stop's at
/// `checkAndProcessStopFlag`): the tables matched, each once, and the patterns that match none
/// (Debezium keeps them as names and cannot remove them).
fn expand(
    patterns: &[String],
    captured: &[TableId],
    tables: &[TableSetup],
) -> Result<(Vec<TableId>, Vec<String>), String> {
    let mut matched = Vec::new();
    let mut unmatched = Vec::new();
    for pattern in patterns {
        let regex = regex::Regex::new(&format!("^(?:{})$", pattern.trim()))
            .map_err(|error| format!("`{pattern}` is not a regular expression: {error}"))?;
        let found: Vec<TableId> =
            captured.iter().copied().filter(|id| regex.is_match(&tables[usize::from(id.0)].name)).collect();
        if found.is_empty() {
            unmatched.push(pattern.trim().to_owned());
        }
        for id in found {
            if !matched.contains(&id) {
                matched.push(id);
            }
        }
    }
    Ok((matched, unmatched))
}

/// One of `additional-conditions`: its `data-collection` pattern, its filter (None: a blocking
/// snapshot's statement without `WHERE`, the whole table), and for a blocking snapshot the table
/// its statement reads (`FROM`).
struct ConditionText {
    pattern: String,
    filter: Option<RowFilter>,
    from: Option<String>,
}

type Conditions = Vec<ConditionText>;

/// `additional-conditions`: `[{"data-collection": "public.hubs", "filter": "status = 'approved'"}]`
/// for an incremental snapshot; for a blocking one each `filter` is the table's whole SELECT
/// statement (`"SELECT * FROM public.hubs WHERE status = 'approved'"`,
/// `con-connector-blocking-snapshot.adoc`; the snapshot runs it instead of its own, as
/// `snapshot.select.statement.overrides` does).
fn parse_conditions(value: &serde_json::Value, kind: SnapshotType) -> Result<Conditions, String> {
    const EXAMPLE: &str = "[{\"data-collection\": \"public.hubs\", \"filter\": \"status = 'approved'\"}]";
    let Some(items) = value.as_array() else {
        return Err(format!("additional-conditions must be an array, e.g. {EXAMPLE}"));
    };
    let mut conditions = Vec::new();
    for item in items {
        let Some(object) = item.as_object() else {
            return Err(format!("each of additional-conditions is an object, e.g. {EXAMPLE}"));
        };
        if let Some(other) = object.keys().find(|key| !matches!(key.as_str(), "data-collection" | "filter")) {
            return Err(format!("`{other}` is no key of an additional condition; data-collection, filter"));
        }
        let text = |key: &str| object.get(key).and_then(|value| value.as_str()).filter(|text| !text.trim().is_empty());
        let (Some(collection), Some(filter)) = (text("data-collection"), text("filter")) else {
            return Err(format!("an additional condition needs data-collection and filter, e.g. {EXAMPLE}"));
        };
        let pattern = collection.trim().to_owned();
        if kind == SnapshotType::Blocking {
            let (from, filter) = select_statement(filter)?;
            conditions.push(ConditionText { pattern, filter, from: Some(from) });
        } else {
            let filter = RowFilter::parse(filter)
                .map_err(|problem| format!("additional-conditions filter `{filter}` {problem}"))?;
            conditions.push(ConditionText { pattern, filter: Some(filter), from: None });
        }
    }
    Ok(conditions)
}

/// Each collection's filter: the first additional condition whose `data-collection` (a regular
/// expression) matches the table's whole name (`AbstractIncrementalSnapshotContext
/// .buildDataCollection`). A condition that matches none of the collections would be ignored:
/// refused, naming it.
fn conditions_of(
    conditions: &[ConditionText],
    collections: &[TableId],
    tables: &[TableSetup],
) -> Result<Vec<(TableId, RowFilter)>, String> {
    let mut regexes = Vec::new();
    for condition in conditions {
        let pattern = &condition.pattern;
        let regex = regex::Regex::new(&format!("^(?:{pattern})$"))
            .map_err(|error| format!("additional-conditions: `{pattern}` is not a regular expression: {error}"))?;
        if !collections.iter().any(|id| regex.is_match(&tables[usize::from(id.0)].name)) {
            return Err(format!(
                "additional-conditions: `{pattern}` matches none of the signal's data-collections, so Debezium would \
                 ignore its filter"
            ));
        }
        regexes.push(regex);
    }
    let mut filters = Vec::new();
    for id in collections {
        let name = &tables[usize::from(id.0)].name;
        let Some((_, condition)) = regexes.iter().zip(conditions).find(|(regex, _)| regex.is_match(name)) else {
            continue;
        };
        if let Some(from) = &condition.from
            && from != name
        {
            return Err(format!(
                "additional-conditions: the statement for `{name}` reads FROM {from}; the model runs a blocking \
                 snapshot's statement on the table it stands for only"
            ));
        }
        if let Some(filter) = condition.filter {
            filters.push((*id, filter));
        }
    }
    Ok(filters)
}

/// A blocking snapshot's `additional-conditions` statement, as the model reads it:
/// `SELECT * FROM <table> [WHERE <filter>] [ORDER BY id [ASC]]` (any case, a `;` at the end
/// allowed): the table and the filter. The scan reads in key order, so an `ORDER BY` of anything
/// else is refused, and so is any other statement: PostgreSQL would run or refuse what the
/// model cannot read. A statement PostgreSQL refuses is written as a `WHERE` on a column the
/// table lacks.
fn select_statement(text: &str) -> Result<(String, Option<RowFilter>), String> {
    const FORM: &str = "the model reads a blocking snapshot's condition as SELECT * FROM <table> [WHERE <filter>] \
                        [ORDER BY id]; to make PostgreSQL refuse it, compare a column the table lacks, e.g. WHERE \
                        region = 'north'";
    // Words as PostgreSQL's lexer separates them: any run of white space is one space.
    let statement = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let statement = statement.trim_end_matches(';').trim_end();
    let lower = statement.to_ascii_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    if words.len() < 4 || words[..3] != ["select", "*", "from"] {
        return Err(format!("additional-conditions statement `{text}`: {FORM}"));
    }
    // The original text after `FROM`, split at WHERE and ORDER BY (found in the lower-case copy).
    let after_from = lower.find(" from ").map(|at| at + 6).unwrap_or(lower.len());
    let rest = &statement[after_from..];
    let rest_lower = &lower[after_from..];
    let order_at = rest_lower.find(" order by ");
    let where_at = rest_lower.find(" where ");
    let table_end = [where_at, order_at].into_iter().flatten().min().unwrap_or(rest.len());
    let table = rest[..table_end].trim().to_owned();
    if table.is_empty() || table.contains(char::is_whitespace) {
        return Err(format!("additional-conditions statement `{text}`: {FORM}"));
    }
    if let Some(order_at) = order_at {
        let order: Vec<&str> = rest_lower[order_at + 10..].split_whitespace().collect();
        if !matches!(order.as_slice(), ["id"] | ["id", "asc"]) || where_at.is_some_and(|at| at > order_at) {
            return Err(format!(
                "additional-conditions statement `{text}`: ORDER BY {} is not modelled: the model's scan reads in \
                 key order (ORDER BY id)",
                rest[order_at + 10..].trim()
            ));
        }
    }
    let filter = match where_at {
        None => None,
        Some(where_at) => {
            // `WHERE ORDER BY id`: the two share the space between them, so the filter is empty.
            let end = order_at.unwrap_or(rest.len());
            let filter = rest.get(where_at + 7..end).unwrap_or("").trim();
            Some(
                RowFilter::parse(filter)
                    .map_err(|problem| format!("additional-conditions statement `{text}`: its WHERE {problem}"))?,
            )
        }
    };
    Ok((table, filter))
}

/// `execute-snapshot`'s `data`: `{"data-collections": [...], "type": "incremental"}`.
fn parse_data(data: &str) -> Result<(SnapshotType, Vec<String>, Conditions, Option<SurrogateKey>), String> {
    let object = object_of(data, "{\"data-collections\": [\"public.hubs\"]}")?;
    for key in object.keys() {
        match key.as_str() {
            "data-collections" | "type" | "additional-conditions" | "surrogate-key" => {}
            "additional-condition" => {
                return Err("`additional-condition` (one string) is the form Debezium removed in 2.x; write \
                     additional-conditions: [{\"data-collection\": \"public.hubs\", \"filter\": \"...\"}]"
                    .into());
            }
            other => {
                return Err(format!(
                    "`{other}` is no key of execute-snapshot's data; data-collections, type, additional-conditions, \
                     surrogate-key"
                ));
            }
        }
    }
    let kind = snapshot_type(&object)?;
    let surrogate = match object.get("surrogate-key") {
        None => None,
        Some(value) => Some(surrogate_key(value, kind)?),
    };
    let Some(collections) = object.get("data-collections") else {
        return Err("needs data-collections: the tables to snapshot, e.g. [\"public.hubs\"]".into());
    };
    let patterns: Option<Vec<String>> =
        collections.as_array().and_then(|items| items.iter().map(|item| item.as_str().map(str::to_owned)).collect());
    let conditions = match object.get("additional-conditions") {
        Some(value) => parse_conditions(value, kind)?,
        None => Vec::new(),
    };
    match patterns {
        Some(patterns) if !patterns.is_empty() && patterns.iter().all(|pattern| !pattern.trim().is_empty()) => {
            Ok((kind, patterns, conditions, surrogate))
        }
        _ => Err("data-collections must be a non-empty array of table names (regular expressions)".into()),
    }
}

/// `surrogate-key` (reference debezium-postgres.md §6.4): one column name, for every table the
/// signal names. A column of the model's tables that chunks can order by (`id`, `version`,
/// `amount_cents`), or a name no table has: Debezium accepts the signal and throws when
/// `readChunk` reaches the table (DBZ-7797), which the model runs.
fn surrogate_key(value: &serde_json::Value, kind: SnapshotType) -> Result<SurrogateKey, String> {
    let Some(name) = value.as_str().map(str::trim).filter(|name| !name.is_empty()) else {
        return Err("surrogate-key must be one column name, e.g. \"version\"".into());
    };
    if kind == SnapshotType::Blocking {
        return Err("surrogate-key has no effect on a blocking snapshot, which reads whole tables (Debezium ignores \
                    it); leave it out or use type `incremental`"
            .into());
    }
    match FilterColumn::ALL.iter().find(|column| column.name() == name) {
        Some(FilterColumn::Status) => Err("surrogate-key `status`: chunking by a text column is not modelled; the \
                                           model orders chunks by id, version or amount_cents"
            .into()),
        Some(column) => Ok(SurrogateKey::Column(*column)),
        None => Ok(SurrogateKey::Missing(name.to_owned())),
    }
}

/// Each pattern matched against the whole name of every captured table, in the signal's order,
/// each table once (`expandAndDedupeDataCollectionIds`).
fn resolve(patterns: &[String], captured: &[TableId], tables: &[TableSetup]) -> Result<Vec<TableId>, String> {
    let (resolved, unmatched) = expand(patterns, captured, tables)?;
    if let Some(pattern) = unmatched.first() {
        return Err(format!(
            "`{pattern}` matches no table the connector captures (table.include.list); what Debezium does with a \
             table it does not capture is not modelled"
        ));
    }
    if resolved.len() > handoff_models::core::event::IncrementalOffset::MAX_COLLECTIONS {
        return Err(format!(
            "names {} tables; the model queues at most {} per incremental snapshot",
            resolved.len(),
            handoff_models::core::event::IncrementalOffset::MAX_COLLECTIONS
        ));
    }
    Ok(resolved)
}

/// The Kafka signal channels' topics and the signals the script produces to them: each
/// connector's share is added to its list of signals after every source signal (whose row keys
/// are their places there), by [`KafkaSignals::finish`].
#[derive(Default)]
pub(super) struct KafkaSignals {
    pub(super) topics: Vec<SignalTopic>,
    /// (connector, topic, record key, the signal as that connector reads it: None when the key
    /// is another connector's).
    pending: Vec<(usize, u16, String, Option<Signal>)>,
}

impl KafkaSignals {
    /// The signal topics of `connectors`, each numbered in order of first appearance.
    pub(super) fn of(connectors: &mut [&mut DebeziumConfig]) -> KafkaSignals {
        let mut topics: Vec<SignalTopic> = Vec::new();
        for connector in connectors.iter_mut() {
            let Some(kafka) = connector.signalling.as_mut().and_then(|signalling| signalling.kafka.as_mut()) else {
                continue;
            };
            let index = match topics.iter().position(|topic| topic.name == kafka.topic_name) {
                Some(index) => index,
                None => {
                    topics.push(SignalTopic { name: kafka.topic_name.clone(), signals: Vec::new() });
                    topics.len() - 1
                }
            };
            kafka.topic = index as u16;
        }
        KafkaSignals { topics, pending: Vec::new() }
    }

    /// Each connector's Kafka signals after its source signals; each record of its topic
    /// pointing at its signal, or at none when its key is another connector's.
    pub(super) fn finish(self, cx: &Cx, at: &Section, connectors: &mut [&mut DebeziumConfig]) -> Res<Vec<SignalTopic>> {
        for (c, _topic, key, signal) in self.pending {
            let Some(signalling) = connectors[c].signalling.as_mut() else { continue };
            let origin = match signal {
                None => 0,
                Some(signal) => {
                    signalling.signals.push(signal);
                    match u8::try_from(signalling.signals.len()) {
                        Ok(origin) => origin,
                        Err(_) => {
                            let problem = format!(
                                "connector {} has more than {} signals; the model keeps that many",
                                connectors[c].name,
                                u8::MAX
                            );
                            return Err(cx.err(at.at, "script", problem));
                        }
                    }
                }
            };
            if let Some(kafka) = connectors[c].signalling.as_mut().and_then(|signalling| signalling.kafka.as_mut()) {
                kafka.signals.push(KafkaSignalEntry { key, origin });
            }
        }
        Ok(self.topics)
    }
}

/// A `signal` step with `channel = "kafka"`: a record produced to a signal topic (`topic`, by
/// default the only one), keyed `key` (by default the `topic.prefix` of the first connector
/// reading the topic). Each connector on the topic whose `topic.prefix` is the key reads its
/// data as a source signal's; the others will log and drop it.
fn kafka_step(
    cx: &Cx,
    s: &Section,
    signal: Field,
    txn: &mut ScriptedTxn,
    tables: &[TableSetup],
    connectors: &mut [&mut DebeziumConfig],
    kafka: &mut KafkaSignals,
) -> Res<()> {
    let topic = match s.get("topic") {
        Some(field) => {
            let name = cx.owned(&field)?;
            match kafka.topics.iter().position(|topic| topic.name == name) {
                Some(index) => index,
                None => {
                    let known: Vec<&str> = kafka.topics.iter().map(|topic| topic.name.as_str()).collect();
                    return cx.fail(
                        &field,
                        format!(
                            "no connector reads signal topic `{name}`{}",
                            if known.is_empty() {
                                String::new()
                            } else {
                                format!(" (signal.kafka.topic: {})", known.join(", "))
                            }
                        ),
                    );
                }
            }
        }
        None => match kafka.topics.len() {
            1 => 0,
            0 => {
                return cx.fail(
                    &signal,
                    "no connector has the kafka signal channel: set signal.enabled.channels = \"source,kafka\"",
                );
            }
            _ => return cx.fail(&signal, "the connectors read several signal topics: name one with `topic`"),
        },
    };
    let readers: Vec<usize> = (0..connectors.len())
        .filter(|c| {
            connectors[*c]
                .signalling
                .as_ref()
                .and_then(|s| s.kafka.as_ref())
                .is_some_and(|k| usize::from(k.topic) == topic)
        })
        .collect();
    let key = match s.get("key") {
        Some(field) => cx.owned(&field)?,
        None => connectors[readers[0]].topic_prefix.clone(),
    };
    let number = kafka.topics[topic].signals.len() + 1;
    let id = s.opt("id", format!("kafka-signal-{number}"), |field| cx.owned(field))?;
    let signal_type = cx.owned(&signal)?;
    let (data, at, request) = step_request(cx, s, signal)?;
    for c in readers {
        let read = if connectors[c].topic_prefix == key {
            let action = action_for(cx, &at, &request, connectors[c], tables, number as i64)?;
            Some(Signal { id: id.clone(), data: data.clone(), action })
        } else {
            None
        };
        kafka.pending.push((c, topic as u16, key.clone(), read));
    }
    kafka.topics[topic].signals.push(KafkaSignalStep { key, id, signal_type, data });
    txn.ops.clear();
    txn.step.kind = StepKind::KafkaSignal { topic: topic as u16, number: number as u32 };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocking_statement_reads_its_table_and_where_and_refuses_the_rest_without_a_panic() {
        let (table, filter) = select_statement("select *\n from  public.hubs\twhere id > 3 ORDER BY id asc ;").unwrap();
        assert_eq!((table.as_str(), filter.map(|f| f.to_string())), ("public.hubs", Some("id > 3".to_owned())));
        assert_eq!(select_statement("SELECT * FROM public.hubs").unwrap(), ("public.hubs".to_owned(), None));
        let missing = select_statement("SELECT * FROM public.claims WHERE region = 'north'").unwrap().1.unwrap();
        assert_eq!(missing.undefined_column(), Some("region"));
        for (text, problem) in [
            ("SELECT * FROM public.hubs WHERE ORDER BY id", "its WHERE"),
            ("SELECT * FROM public.hubs WHERE", "the model reads a blocking snapshot's condition as"),
            ("SELECT * FROM public.hubs ORDER BY id DESC", "ORDER BY id DESC is not modelled"),
            ("SELECT * FROM public.hubs ORDER BY id WHERE id > 1", "is not modelled"),
            ("SELECT id FROM public.hubs", "the model reads"),
            ("SELECT failing query", "compare a column the table lacks"),
            ("SELECT * FROM public.hubs WHERE région = 1", "is no comparison the model reads"),
        ] {
            let error = select_statement(text).expect_err(text);
            assert!(error.contains(problem), "{text}: {error}");
        }
        // Every prefix of a statement, on every character boundary: an answer, never a panic.
        let full = "SELECT * FROM public.hubs WHERE status = 'approved' AND région > 2 ORDER BY id ASC;";
        for (at, _) in full.char_indices() {
            let _ = select_statement(&full[..at]);
            let _ = select_statement(&full[at..]);
        }
    }
}
