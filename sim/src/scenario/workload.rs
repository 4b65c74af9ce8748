//! `[workload]`: the background workload and the `[[workload.script]]` (and `[[check.script]]`)
//! transactions.

use super::fields::{Cx, Field, Horizon, Res, Section};
use super::sections::{Outboxes, table_id};
use super::toml_text::duration_text;
use super::tree::{Entry, Val};
use handoff_models::core::change::RowOp;
use handoff_models::core::ids::TableId;
use handoff_models::core::ids::{MessageEvent, Status};
use handoff_models::core::limits;
use handoff_models::core::protocol::Isolation;
use handoff_models::core::signal::SignalAction;
use handoff_models::scenario::spec::Background;
use handoff_models::scenario::spec::ScriptStep;
use handoff_models::scenario::spec::ScriptedTxn;
use handoff_models::scenario::spec::StepKind;
use handoff_models::scenario::spec::TableSetup;
use handoff_models::scenario::spec::Trigger;

pub(super) fn workload(
    cx: &Cx,
    s: &Section,
    outboxes: Outboxes,
    horizon: &Horizon,
) -> Res<(Option<Background>, Vec<ScriptedTxn>)> {
    let tables = outboxes.tables;
    let known = "start_ms end_ms inserts_per_second updates_per_second deletes_per_second events_per_second \
        transaction_size concurrency script";
    s.check_keys(cx, known, "field")?;
    let start_ms = s.opt("start_ms", 0, |field| cx.time_ms(field, 0, horizon))?;
    let end_ms = s.opt("end_ms", 0, |field| cx.time_ms(field, 0, horizon))?;
    let rate = |key: &str| s.opt(key, 0.0, |field| cx.rate(field));
    let (inserts_per_second, updates_per_second, deletes_per_second) =
        (rate("inserts_per_second")?, rate("updates_per_second")?, rate("deletes_per_second")?);
    let events_per_second = rate("events_per_second")?;
    let busy =
        inserts_per_second > 0.0 || updates_per_second > 0.0 || deletes_per_second > 0.0 || events_per_second > 0.0;
    if events_per_second > 0.0
        && let Some(field) = s.get("events_per_second")
    {
        let count = outboxes.count();
        if count != 1 {
            let problem = if count == 0 {
                "needs an outbox table or a message outbox: declare one with `outbox = { … }` in its [[table]], or \
                 a [[message_outbox]]"
            } else {
                "the scenario has several outboxes (tables and [[message_outbox]]): the background writes to one; \
                 script the others' events"
            };
            return cx.fail(&field, problem);
        }
        if tables.first().is_some_and(|table| table.outbox.is_some()) {
            return cx.fail(
                &field,
                "the first [[table]] is the business table the events announce; put the outbox after it",
            );
        }
    }
    if end_ms < start_ms || (busy && end_ms == start_ms) {
        let field = s.get("end_ms").or_else(|| s.get("start_ms"));
        let (at, path) = field.map_or_else(|| (s.at, s.field_path("end_ms")), |field| (field.at, field.path));
        let problem = if end_ms < start_ms {
            format!("end_ms ({end_ms}) is before start_ms ({start_ms})")
        } else {
            format!("the window is empty (start_ms = end_ms = {end_ms}); a rate above 0 needs end_ms > start_ms")
        };
        return Err(cx.err(at, &path, problem));
    }
    let transaction_size = s.opt("transaction_size", 1, |field| Ok(cx.int(field, 1, MAX_TRANSACTION_SIZE)? as u32))?;
    let concurrency = s.opt("concurrency", 1, |field| Ok(cx.int(field, 1, MAX_CONCURRENCY)? as u32))?;
    if events_per_second > 0.0
        && transaction_size > 1
        && let Some(field) = s.get("transaction_size")
    {
        return cx.fail(
            &field,
            "with events_per_second, the background writes one autocommit transaction per row (its events are \
             transactions of their own); grouped rows with events are not modelled yet",
        );
    }
    if concurrency > 1
        && transaction_size == 1
        && let Some(field) = s.get("concurrency")
    {
        return cx.fail(
            &field,
            "needs transaction_size above 1: transactions of one row each are one autocommit statement, never \
             open at the same time",
        );
    }
    let background = busy.then_some(Background {
        start_ms,
        end_ms,
        inserts_per_second,
        updates_per_second,
        deletes_per_second,
        events_per_second,
        transaction_size,
        concurrency,
    });
    let mut scripted = Vec::new();
    if let Some(field) = s.get("script") {
        let items = cx.items(&field, "an array of tables ([[workload.script]])")?;
        if let Some(item) = items.get(limits::MAX_TRANSACTIONS as usize) {
            let problem = format!(
                "too many scripted transactions: {}; expected 0 to {} transactions in a run",
                items.len(),
                limits::MAX_TRANSACTIONS
            );
            return cx.fail(item, problem);
        }
        for item in &items {
            scripted.push(script_entry(cx, item, outboxes, Some(horizon))?);
        }
        sessions_valid(cx, &items, &scripted, tables, true)?;
        script_steps_apply(cx, &items, &scripted, tables, background.as_ref())?;
        number_events(&mut scripted, 1);
    }
    // The background's transactions and the scripted ones: at most `MAX_TRANSACTIONS`.
    if let Some(background) = &background {
        let total = background.transactions().saturating_add(scripted.len() as u64);
        if total > limits::MAX_TRANSACTIONS {
            // Blame the rate that makes the most.
            let rates = [
                ("inserts_per_second", inserts_per_second),
                ("updates_per_second", updates_per_second),
                ("deletes_per_second", deletes_per_second),
                ("events_per_second", events_per_second),
            ];
            let ((key, rate), count) = rates
                .into_iter()
                .zip(background.transaction_counts())
                .max_by_key(|(_, count)| *count)
                .expect("four rates");
            let field = s.get(key).expect("the rate that makes transactions is given");
            let others = total - count;
            let seconds = (end_ms - start_ms) as f64 / 1000.0;
            let most = ((limits::MAX_TRANSACTIONS - others.min(limits::MAX_TRANSACTIONS)) as f64 / seconds).floor();
            let problem = format!(
                "{rate} per second makes {count} transactions in the window of {} (start_ms = {start_ms} to end_ms = \
                 {end_ms}){}; expected 0 to {} transactions in a run, background and scripted together: at most \
                 {most} per second here",
                duration_text(end_ms - start_ms),
                if others > 0 { format!(", {total} with the other rates and the script") } else { String::new() },
                limits::MAX_TRANSACTIONS,
            );
            return cx.fail(&field, problem);
        }
    }
    Ok((background, scripted))
}

/// Whether step `other` may run before step `this`: unless both run at absolute times and
/// `other`'s is later (a moment's time is known only in the run).
fn may_run_before(other: &ScriptedTxn, this: &ScriptedTxn) -> bool {
    match (other.trigger, this.trigger) {
        (Trigger::At { at_ms: other }, Trigger::At { at_ms: this }) => other <= this,
        _ => true,
    }
}

/// The most rows a background transaction changes, and the most open at once.
const MAX_TRANSACTION_SIZE: i64 = 10_000;
const MAX_CONCURRENCY: i64 = 100;

/// The `insert`, `update` or `delete` field of a script entry: where an error about its step
/// points.
pub(super) fn op_field<'t>(cx: &Cx, item: &Field<'t>) -> Res<Field<'t>> {
    let s = cx.section(item)?;
    match ["insert", "update", "delete", "event"].iter().find_map(|key| s.get(key)) {
        Some(field) => Ok(field),
        None => cx.fail(item, "changes no row"),
    }
}

/// Every `[[workload.script]]` step can apply in some run: an update or delete names a row that
/// exists at some point before it (loaded, inserted by a step that may run before it, or among
/// the keys the background workload inserts), and an insert names a key that is free at some
/// point before it (not loaded, or deleted by a step or the background). A step that can never
/// apply is refused here; one whose fate depends on the run (the background deleted its row)
/// is reported in the run's timeline when it does not apply.
fn script_steps_apply(
    cx: &Cx,
    items: &[Field],
    scripted: &[ScriptedTxn],
    tables: &[TableSetup],
    background: Option<&Background>,
) -> Res<()> {
    let first = tables.first().map(|table| table.id);
    for ((index, (item, txn)), op) in items
        .iter()
        .zip(scripted)
        .enumerate()
        .flat_map(|(index, step)| step.1.ops.iter().map(move |op| ((index, step), op)))
        // A signal step's row is numbered (and its table resolved) once the connectors are read:
        // key 0 until then, and a row of its own (`signal_steps`).
        .filter(|(_, op)| !outbox_op(op, tables) && op.target().1 != 0)
    {
        let (table, key) = op.target();
        let setup = &tables[usize::from(table.0)];
        let rows = i64::from(setup.rows);
        let loaded = key <= rows;
        // The background workload changes the first table: it inserts the keys after the loaded
        // ones, and deletes rows it believes live.
        let background = background.filter(|_| Some(table) == first);
        let [inserts, _, _, _] = background.map_or([0, 0, 0, 0], Background::transaction_counts);
        let background_inserts = key > rows && (key - rows) as u64 <= inserts;
        let background_deletes = background.is_some_and(|b| b.deletes_per_second > 0.0);
        let step_before = |wanted: fn(&RowOp) -> bool| {
            scripted.iter().enumerate().any(|(other, step)| {
                other != index
                    && may_run_before(step, txn)
                    && step.ops.iter().any(|op| wanted(op) && op_target(op) == (table, key))
            })
        };
        let name = &setup.name;
        let loaded_keys = match &setup.composite_key {
            _ if rows == 0 => "it loads no row".to_string(),
            Some(composite) => {
                format!("keys {} to {} are loaded", composite.values_text(1), composite.values_text(rows))
            }
            None => format!("keys 1 to {rows} are loaded"),
        };
        // The claims table's rows are claims; another table's, keys.
        let row = match &setup.composite_key {
            Some(composite) => format!("key {}", composite.text(key)),
            None if name == "public.claims" => format!("claim {key}"),
            None => format!("key {key}"),
        };
        let problem = match op {
            RowOp::Update { .. } | RowOp::Delete { .. }
                if !loaded && !background_inserts && !step_before(|op| matches!(op, RowOp::Insert { .. })) =>
            {
                let verb = if matches!(op, RowOp::Update { .. }) { "update" } else { "delete" };
                Some(format!(
                    "{row} is not a row of {name} ({loaded_keys}) and no step that may run before this one \
                     inserts it: the {verb} would change nothing"
                ))
            }
            RowOp::Insert { .. }
                if loaded && !background_deletes && !step_before(|op| matches!(op, RowOp::Delete { .. })) =>
            {
                Some(format!(
                    "{row} is already a row of {name} ({loaded_keys}) and no step that may run before this one \
                     deletes it: the insert would fail with a duplicate key"
                ))
            }
            _ => None,
        };
        if let Some(problem) = problem {
            return cx.fail(&op_field(cx, item)?, problem);
        }
    }
    Ok(())
}

/// The row an operation names.
pub(super) fn op_target(op: &RowOp) -> (TableId, i64) {
    op.target()
}

/// The fields a script entry may have (with `at` in `[[workload.script]]`).
const SCRIPT_FIELDS: &str = "insert update delete event outbox copy begin isolation commit rollback message \
    transactional payload_bytes status amount_cents table session database idle_ms label signal id data channel key topic \
    connector_config";

/// What a script entry does: exactly one of these.
const WHAT: [&str; 10] =
    ["insert", "update", "delete", "event", "signal", "begin", "commit", "rollback", "message", "connector_config"];

/// The signal types a `signal` step may write (`type` column); `schema-changes` is not modelled
/// yet.
const SIGNAL_TYPES: [&str; 5] = SignalAction::TYPES;

/// Where a `signal` step's table is resolved once the connectors are read: a placeholder.
pub(super) const SIGNAL_TABLE_PLACEHOLDER: TableId = TableId(u16::MAX);

/// A boolean field that must be `true` when given (`begin = true`).
fn flag(cx: &Cx, field: &Field) -> Res<()> {
    match field.item.val {
        Val::Bool(true) => Ok(()),
        Val::Bool(false) => cx.fail(field, "leave it out rather than set it to false"),
        _ => cx.wrong(field, "true"),
    }
}

/// A `[[workload.script]]` entry (`timed`: it may have an `at`, within the horizon), or a
/// `[[check.script]]` one (it may run at any point of the exhaustive lens, so it has none). A
/// step of a named session that gives no `at` runs as soon as its session is ready
/// (`At { at_ms: 0 }`); [`sessions_valid`] checks that a session's first step has one.
pub(super) fn script_entry(cx: &Cx, item: &Field, outboxes: Outboxes, timed: Option<&Horizon>) -> Res<ScriptedTxn> {
    let tables = outboxes.tables;
    let s = cx.section(item)?;
    let trigger = match timed {
        Some(horizon) => {
            s.check_keys(cx, &format!("at {SCRIPT_FIELDS}"), "field")?;
            s.opt("at", Trigger::At { at_ms: 0 }, |field| cx.trigger(field, horizon))?
        }
        None => {
            if let Some(field) = s.get("idle_ms") {
                return cx.fail(
                    &field,
                    "time is abstract in a bound: a session stays open between its steps for as long as an \
                     interleaving makes it, so a [[check.script]] step has no idle_ms",
                );
            }
            s.check_keys(cx, SCRIPT_FIELDS, "field")?;
            Trigger::At { at_ms: 0 }
        }
    };
    let whats: Vec<&Entry> = s.entries.iter().filter(|entry| WHAT.contains(&entry.key.as_str())).collect();
    let what = match whats.as_slice() {
        [] => {
            return Err(cx.err(
                s.at,
                &s.path,
                "one of insert, update, delete, event, signal, begin, commit, rollback, message or connector_config is \
                 required",
            ));
        }
        [what] => *what,
        [first, second, ..] => {
            let problem = format!(
                "exactly one of insert, update, delete, event, signal, begin, commit, rollback, message or \
                 connector_config is allowed; found {} and {}",
                first.key, second.key
            );
            return Err(cx.err(second.at(), &s.path, problem));
        }
    };
    let what_key = what.key.as_str();
    // Fields that apply to some steps only.
    let applies = |key: &str| match key {
        "status" => matches!(what_key, "insert" | "update" | "event"),
        "amount_cents" | "copy" => what_key == "insert",
        "table" => matches!(what_key, "insert" | "update" | "delete" | "event" | "signal"),
        "id" | "data" | "channel" | "key" | "topic" => what_key == "signal",
        "outbox" => what_key == "event",
        "isolation" => what_key == "begin",
        "transactional" | "payload_bytes" => what_key == "message",
        _ => true,
    };
    for key in [
        "status",
        "amount_cents",
        "copy",
        "table",
        "outbox",
        "isolation",
        "transactional",
        "payload_bytes",
        "id",
        "data",
        "channel",
        "key",
        "topic",
    ] {
        if let Some(field) = s.get(key).filter(|_| !applies(key)) {
            return cx.fail(&field, format!("does not apply to {what_key}"));
        }
    }
    let session = match s.get("session") {
        Some(field) => {
            let name = cx.string(&field)?;
            if name.trim().is_empty() || name.trim() != name {
                return cx.fail(&field, format!("`{name}` is not a session name: give a word like \"s1\""));
            }
            Some(name.to_owned())
        }
        None => None,
    };
    let needs_session = |what: &str| -> Res<()> {
        if session.is_none()
            && let Some(field) = s.get(what)
        {
            let problem = match what {
                "begin" | "commit" | "rollback" => {
                    "needs session = \"NAME\": a transaction block is held by a named session".to_string()
                }
                _ => "needs session = \"NAME\": a step without one is an autocommit statement of its own".to_string(),
            };
            return cx.fail(&field, problem);
        }
        Ok(())
    };
    for key in ["begin", "commit", "rollback", "database", "idle_ms"] {
        needs_session(key)?;
    }
    let database = s.opt("database", None, |field| {
        let name = cx.string(field)?;
        if name.is_empty() { cx.fail(field, "is empty: name a database") } else { Ok(Some(name.to_owned())) }
    })?;
    let idle_ms = match (s.get("idle_ms"), timed) {
        (Some(field), Some(horizon)) => cx.time_ms(&field, 1, horizon)?,
        _ => 0,
    };
    let statuses = [Status::Submitted, Status::Assessed, Status::Approved, Status::Paid, Status::Closed];
    let statuses = statuses.map(|status| (status.name(), status));
    let status = |default| s.opt("status", default, |field| cx.choice(field, &statuses));
    let mut ops = Vec::new();
    let kind = match what_key {
        "begin" => {
            flag(cx, &s.field(what))?;
            let levels = [("read committed", Isolation::ReadCommitted), ("repeatable read", Isolation::RepeatableRead)];
            StepKind::Begin {
                isolation: s.opt("isolation", Isolation::ReadCommitted, |field| cx.choice(field, &levels))?,
            }
        }
        "commit" => {
            flag(cx, &s.field(what))?;
            StepKind::Commit
        }
        "rollback" => {
            flag(cx, &s.field(what))?;
            StepKind::Rollback
        }
        "signal" => {
            // `INSERT INTO <signal table> (id, type, data) VALUES (…)`: the row is numbered, its
            // table resolved and its data read against the connectors once they are read
            // (`signal_steps` in `sections`).
            let field = s.field(what);
            let signal_type = cx.string(&field)?;
            if !SIGNAL_TYPES.contains(&signal_type) {
                let problem = match signal_type {
                    "schema-changes" => format!(
                        "`{signal_type}` is not modelled yet; execute-snapshot, stop-snapshot, pause-snapshot, \
                         resume-snapshot or log"
                    ),
                    other => format!(
                        "`{other}` is no signal type; execute-snapshot, stop-snapshot, pause-snapshot, \
                         resume-snapshot or log (schema-changes is not modelled yet)"
                    ),
                };
                return cx.fail(&field, problem);
            }
            if let Some(field) = s.get("session") {
                return cx.fail(&field, "a signal step is an autocommit INSERT of its own: leave out session");
            }
            match signal_type {
                "execute-snapshot" => {
                    s.need(cx, "data", "; the signal's data column, e.g. '{\"data-collections\": [\"public.hubs\"]}'")?;
                }
                "log" => {
                    s.need(
                        cx,
                        "data",
                        "; the signal's data column, e.g. '{\"message\": \"backfill of hubs begins\"}'",
                    )?;
                }
                _ => {} // stop, pause and resume read `{}` when the data column is empty
            }
            let channel_field = s.get("channel");
            let channel = match &channel_field {
                Some(channel) => cx.owned(channel)?,
                None => "source".to_owned(),
            };
            let at = channel_field.unwrap_or(field);
            match channel.as_str() {
                "source" => {
                    for key in ["key", "topic"] {
                        if let Some(field) = s.get(key) {
                            return cx.fail(&field, "applies to a Kafka signal only (channel = \"kafka\")");
                        }
                    }
                    let table = match s.get("table") {
                        Some(field) => table_id(cx, &field, cx.string(&field)?, tables)?,
                        None => SIGNAL_TABLE_PLACEHOLDER,
                    };
                    ops.push(RowOp::Insert { table, key: 0, status: Status::Submitted, amount_cents: 0 });
                    StepKind::Statement
                }
                "kafka" => {
                    if timed.is_none() {
                        return cx.fail(
                            &at,
                            "the Kafka signal channel is not modelled in a bound yet; signal through the signal \
                             table (channel = \"source\")",
                        );
                    }
                    if let Some(field) = s.get("table") {
                        return cx.fail(
                            &field,
                            "a Kafka signal is a record of the signal topic, not a row: name the topic with `topic`",
                        );
                    }
                    // The topic and the record's number on it are resolved with the connectors
                    // (`signal_steps`).
                    StepKind::KafkaSignal { topic: u16::MAX, number: 0 }
                }
                other => {
                    return cx.fail(&at, format!("`{other}` is no signal channel the model runs; source or kafka"));
                }
            }
        }
        "connector_config" => {
            // `PUT /connectors/<name>/config`: the new list is read against the connector once
            // it is read (`config_steps` in `sections`); the version is its place among them.
            let field = s.field(what);
            if timed.is_none() {
                return cx.fail(
                    &field,
                    "a configuration update is not modelled in a bound yet; give it in [[workload.script]]",
                );
            }
            if let Some(field) = s.get("session") {
                return cx
                    .fail(&field, "a configuration update is a REST call, not a database step: leave out session");
            }
            let config = cx.section(&field)?;
            config.check_keys(
                cx,
                "table.include.list",
                "property (only table.include.list can change while running)",
            )?;
            config.need(cx, "table.include.list", " (the tables the connector captures from then on)")?;
            StepKind::ConnectorConfig { version: 0 }
        }
        "message" => {
            let prefix = cx.owned(&s.field(what))?;
            let transactional = s.opt("transactional", true, |field| match field.item.val {
                Val::Bool(flag) => Ok(flag),
                _ => cx.wrong(field, "a boolean"),
            })?;
            let payload_bytes = s.opt("payload_bytes", 0, |field| Ok(cx.int(field, 0, MAX_PAYLOAD_BYTES)? as u64))?;
            StepKind::Message { transactional, prefix, payload_bytes }
        }
        "event" => {
            // The service's business change and its event, in one transaction: the outbox
            // pattern. The event's id is numbered once every step is read (`number_events`).
            let field = s.field(what);
            let key = cx.int(&field, 1, i64::from(u32::MAX))?;
            let table = match s.get("table") {
                Some(field) => table_id(cx, &field, cx.string(&field)?, tables)?,
                None => TableId(0),
            };
            if tables[usize::from(table.0)].outbox.is_some() {
                let at = s.get("table").unwrap_or(field);
                return cx.fail(&at, "names an outbox table: `table` is the business table whose row changes");
            }
            // The outbox it writes to: an outbox table, or a message outbox (by its prefix).
            let outbox_tables: Vec<&TableSetup> = tables.iter().filter(|table| table.outbox.is_some()).collect();
            let outbox = match s.get("outbox") {
                Some(field) => {
                    let name = cx.string(&field)?;
                    match outboxes.messages.iter().position(|outbox| outbox.prefix == name) {
                        Some(index) => Outbox::Message(index),
                        None => {
                            let id = table_id(cx, &field, name, tables)?;
                            if tables[usize::from(id.0)].outbox.is_none() {
                                return cx.fail(
                                    &field,
                                    "is no outbox table: declare it with `outbox = { … }` in its [[table]] (or name \
                                     a [[message_outbox]] by its prefix)",
                                );
                            }
                            Outbox::Table(&tables[usize::from(id.0)])
                        }
                    }
                }
                None => match (outbox_tables.as_slice(), outboxes.messages.len()) {
                    ([only], 0) => Outbox::Table(only),
                    ([], 1) => Outbox::Message(0),
                    ([], 0) => {
                        return cx.fail(
                            &field,
                            "needs an outbox table or a message outbox: declare one with `outbox = { … }` in its \
                             [[table]], or a [[message_outbox]]",
                        );
                    }
                    _ => {
                        return cx.fail(
                            &field,
                            "the scenario has several outboxes: name one with `outbox` (an outbox table's name, or a \
                             [[message_outbox]]'s prefix)",
                        );
                    }
                },
            };
            let status = status(Status::Approved)?;
            ops.push(RowOp::Update { table, key, status });
            match outbox {
                Outbox::Table(outbox) => {
                    ops.push(RowOp::InsertEvent {
                        table: outbox.id,
                        id: 0,
                        aggregate_id: key as u32,
                        event_type: status,
                    });
                    if outbox.outbox.as_ref().is_some_and(|outbox| outbox.delete) {
                        ops.push(RowOp::Delete { table: outbox.id, key: 0 });
                    }
                    StepKind::Statement
                }
                // Numbered with the others once every step is read (`number_events`).
                Outbox::Message(index) => outboxes.messages[index].step(MessageEvent {
                    outbox: index as u16,
                    id: 0,
                    aggregate_id: key as u32,
                    event_type: status,
                }),
            }
        }
        _ => {
            let field = s.field(what);
            let table = match s.get("table") {
                Some(field) => table_id(cx, &field, cx.string(&field)?, tables)?,
                None => TableId(0),
            };
            let composite =
                tables.iter().find(|setup| setup.id == table).and_then(|setup| setup.composite_key.as_ref());
            let keys = match &field.item.val {
                Val::Array(_) => {
                    let items = cx.items(&field, "a key or an array of keys")?;
                    if items.is_empty() {
                        return cx.fail(&field, "is empty: name at least one key");
                    }
                    if let Some(item) = items.get(MAX_STATEMENT_ROWS) {
                        return cx.fail(
                            item,
                            format!("too many rows: {}; a statement changes 1 to {MAX_STATEMENT_ROWS}", items.len()),
                        );
                    }
                    let mut keys: Vec<i64> = Vec::new();
                    for item in &items {
                        let key = script_key(cx, item, composite)?;
                        if keys.contains(&key) {
                            return cx.fail(item, format!("key {key} is named twice in one statement"));
                        }
                        keys.push(key);
                    }
                    keys
                }
                _ => vec![script_key(cx, &field, composite)?],
            };
            for key in keys {
                ops.push(match what_key {
                    "insert" => RowOp::Insert {
                        table,
                        key,
                        status: status(Status::Submitted)?,
                        amount_cents: s.opt("amount_cents", 100_000, |field| cx.u32(field, 0))?,
                    },
                    "update" => RowOp::Update { table, key, status: status(Status::Approved)? },
                    _ => RowOp::Delete { table, key },
                });
            }
            match s.get("copy") {
                Some(field) => {
                    flag(cx, &field)?;
                    StepKind::Copy
                }
                None => StepKind::Statement,
            }
        }
    };
    let label = s.opt("label", String::new(), |field| cx.owned(field))?;
    Ok(ScriptedTxn { trigger, ops, label, step: ScriptStep { kind, session, database, idle_ms } })
}

/// Numbers the service's events in file order, from `first` on: an `event` step's outbox insert
/// (and the delete of the same row, when its outbox table deletes in the same transaction) get
/// the next id. Returns the next free id.
pub(super) fn number_events(scripted: &mut [ScriptedTxn], first: i64) -> i64 {
    let mut next = first;
    for txn in scripted {
        if let StepKind::OutboxMessage { event, .. } = &mut txn.step.kind {
            event.id = next;
            next += 1;
            continue;
        }
        let mut id = None;
        for op in &mut txn.ops {
            match op {
                RowOp::InsertEvent { id: event, .. } => {
                    *event = next;
                    id = Some(next);
                    next += 1;
                }
                RowOp::Delete { key, .. } if *key == 0 => *key = id.unwrap_or(0),
                _ => {}
            }
        }
    }
    next
}

/// The outbox an `event` step writes to.
enum Outbox<'a> {
    Table(&'a TableSetup),
    /// A message outbox, by its place among the scenario's.
    Message(usize),
}

/// Whether an operation is the service's write to an outbox table (its event rows are numbered
/// by the service, never named by a step).
pub(super) fn outbox_op(op: &RowOp, tables: &[TableSetup]) -> bool {
    tables.get(usize::from(op_target(op).0.0)).is_some_and(|table| table.outbox.is_some())
}

/// The most rows one scripted statement changes.
const MAX_STATEMENT_ROWS: usize = 1000;
/// The largest logical message payload a step emits (1 GB, PostgreSQL's limit on a value).
const MAX_PAYLOAD_BYTES: i64 = 1 << 30;

/// The steps of the named sessions make sense in file order: a session's first step gives its
/// `at` (a `[[workload.script]]`) and its `database`, a transaction is begun before its
/// statements, `COMMIT` and `ROLLBACK` end one that is open, a statement touches only tables of
/// its session's database, and an autocommit step has its `at`.
pub(super) fn sessions_valid(
    cx: &Cx,
    items: &[Field],
    scripted: &[ScriptedTxn],
    tables: &[TableSetup],
    timed: bool,
) -> Res<()> {
    // Per session: where it was opened, its database, and whether a block is open.
    let mut sessions: Vec<(&str, usize, Option<&str>, bool)> = Vec::new();
    for (index, (item, txn)) in items.iter().zip(scripted).enumerate() {
        let s = cx.section(item)?;
        let Some(name) = txn.step.session.as_deref() else {
            if timed && s.get("at").is_none() {
                return Err(cx.err(s.at, &s.path, "at is required: when the step runs (a step without session = \"NAME\" is an autocommit statement of its own)"));
            }
            continue;
        };
        let what = WHAT.iter().find_map(|key| s.get(key)).expect("a step does something");
        let known = sessions.iter().position(|(session, ..)| *session == name);
        let place = match known {
            Some(place) => {
                if let Some(field) = s.get("database") {
                    let (_, opened, ..) = sessions[place];
                    return cx.fail(
                        &field,
                        format!(
                            "the database of session \"{name}\" is given on its first step ({}[{opened}]); a session \
                             stays in its database",
                            script_header(item)
                        ),
                    );
                }
                place
            }
            None => {
                if matches!(txn.step.kind, StepKind::Commit | StepKind::Rollback) {
                    return cx.fail(
                        &what,
                        format!(
                            "unknown session \"{name}\": no step before this one opens it (a session's first step \
                             is usually begin = true)"
                        ),
                    );
                }
                if timed && s.get("at").is_none() {
                    return Err(cx.err(
                        s.at,
                        &s.path,
                        format!("at is required on the first step of session \"{name}\": when it connects and runs"),
                    ));
                }
                sessions.push((name, index, txn.step.database.as_deref(), false));
                sessions.len() - 1
            }
        };
        let (_, _, database, open) = &mut sessions[place];
        match &txn.step.kind {
            StepKind::Begin { .. } if *open => {
                return cx.fail(
                    &what,
                    format!("session \"{name}\" is already in a transaction here: commit or rollback it first"),
                );
            }
            StepKind::Begin { .. } => *open = true,
            StepKind::Commit | StepKind::Rollback if !*open => {
                return cx.fail(
                    &what,
                    format!(
                        "session \"{name}\" has no transaction open here (no begin = true since its last commit or \
                         rollback): nothing to {}",
                        what.path.rsplit('.').next().unwrap_or("end")
                    ),
                );
            }
            StepKind::Commit | StepKind::Rollback => *open = false,
            StepKind::Message { transactional: false, .. } => {}
            _ if !*open => {
                return cx.fail(
                    &what,
                    format!(
                        "session \"{name}\" has not begun a transaction here: add a step with begin = true before \
                         this one (a statement outside a transaction is an autocommit step: leave out session)"
                    ),
                );
            }
            _ => {}
        }
        for op in &txn.ops {
            let (table, _) = op_target(op);
            let setup = &tables[usize::from(table.0)];
            if setup.database.as_deref() != *database {
                let field = s.get("table").unwrap_or(what);
                let of = |database: Option<&str>| {
                    database.map_or("the main database".to_string(), |d| format!("database \"{d}\""))
                };
                return cx.fail(
                    &field,
                    format!(
                        "{} is in {}, and session \"{name}\" in {}: a session writes the tables of its own database",
                        setup.name,
                        of(setup.database.as_deref()),
                        of(*database)
                    ),
                );
            }
        }
    }
    Ok(())
}

/// `workload.script` or `check.script`, from an entry's path.
fn script_header(item: &Field) -> String {
    item.path.split('[').next().unwrap_or("workload.script").to_owned()
}

/// A script step's key: a number (the row's `n`, its `id` on a one-column key), or on a table
/// with a two-column key its columns' values, `{ region_id = 2, hub_id = 6 }` (the row `n =
/// (region_id − 1) × group_rows + hub_id`, [`handoff_models::core::ids::CompositeKey`]).
fn script_key(cx: &Cx, field: &Field, composite: Option<&handoff_models::core::ids::CompositeKey>) -> Res<i64> {
    let Val::Table(_) = &field.item.val else { return cx.int(field, 1, i64::MAX) };
    let Some(composite) = composite else {
        return cx.wrong(field, "a key (the table's key is one column: a number)");
    };
    let section = cx.section(field)?;
    let [first, second] = &composite.columns;
    let mut values = [0i64; 2];
    for (value, column) in values.iter_mut().zip([first, second]) {
        let Some(part) = section.get(column) else {
            return cx
                .fail(field, format!("names no `{column}`: a key of this table is {{ {first} = …, {second} = … }}"));
        };
        *value = cx.int(&part, 1, i64::MAX)?;
    }
    if let Some(entry) = section.entries.iter().find(|entry| entry.key != *first && entry.key != *second) {
        return cx.fail(
            &section.field(entry),
            format!("`{}` is not a key column of this table; its key is ({first}, {second})", entry.key),
        );
    }
    let group_rows = i64::from(composite.group_rows);
    if values[1] > group_rows {
        return cx.fail(
            &section.get(second).expect("read above"),
            format!(
                "{second} = {} is above group_rows ({group_rows}): the model's rows have {second} 1 to {group_rows}",
                values[1]
            ),
        );
    }
    match composite.key(values[0], values[1]) {
        Some(n) => Ok(n),
        None => cx.fail(
            &section.get(first).expect("read above"),
            format!("{first} = {} is too large: the row's number would pass {}", values[0], i64::MAX),
        ),
    }
}
