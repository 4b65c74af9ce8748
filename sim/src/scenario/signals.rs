//! `signal` steps of `[[workload.script]]`: the rows a script inserts into a connector's signal
//! table (`signal.data.collection`), read once the connectors are, since the signal table and
//! the tables a signal names are theirs. Each step becomes `INSERT INTO <signal table> (id, type,
//! data) VALUES (…)`: its row numbered from 1 in file order per signal table (the row's key; its
//! `id` column is the step's `id`), and its `data` read as Debezium reads it
//! (`ExecuteSnapshot.getData`, `AbstractIncrementalSnapshotChangeEventSource
//! .expandAndDedupeDataCollectionIds`: each of `data-collections` a regular expression matched
//! against the whole name of every table the connector captures).

use super::fields::{Cx, Res, Section};
use super::workload::{SIGNAL_TABLE_PLACEHOLDER, op_field};
use handoff_models::components::connect::debezium::DebeziumConfig;
use handoff_models::core::change::RowOp;
use handoff_models::core::ids::{Status, TableId};
use handoff_models::core::signal::{Signal, SignalAction, SnapshotType};
use handoff_models::scenario::spec::{ScriptedTxn, TableSetup};
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
        let data_field = s.need(cx, "data", "")?;
        let data = cx.owned(&data_field)?;
        let (kind, patterns) = match parse_data(&data) {
            Ok(parsed) => parsed,
            Err(problem) => return cx.fail(&data_field, problem),
        };
        for connector in connectors.iter_mut().filter(|connector| connector.signal_table() == Some(table)) {
            let collections = match resolve(&patterns, &connector.tables, tables) {
                Ok(collections) => collections,
                Err(problem) => return cx.fail(&data_field, format!("{problem} (connector {})", connector.name)),
            };
            let action = SignalAction::ExecuteSnapshot { kind, collections };
            if let Some(signalling) = connector.signalling.as_mut() {
                signalling.signals.push(Signal { id: id.clone(), data: data.clone(), action });
            }
        }
    }
    Ok(())
}

/// `execute-snapshot`'s `data`: `{"data-collections": [...], "type": "incremental"}`.
fn parse_data(data: &str) -> Result<(SnapshotType, Vec<String>), String> {
    let value: serde_json::Value =
        serde_json::from_str(data).map_err(|error| format!("is not a JSON object: {error}"))?;
    let Some(object) = value.as_object() else {
        return Err("is not a JSON object: expected {\"data-collections\": [\"public.hubs\"]}".into());
    };
    for key in object.keys() {
        match key.as_str() {
            "data-collections" | "type" => {}
            "additional-conditions" | "additional-condition" | "surrogate-key" => {
                return Err(format!("`{key}` is not modelled yet"));
            }
            other => {
                return Err(format!(
                    "`{other}` is no key of execute-snapshot's data; data-collections, type, additional-conditions, \
                     surrogate-key"
                ));
            }
        }
    }
    let kind = match object.get("type").map(|kind| kind.as_str().map(str::to_ascii_lowercase)) {
        None => SnapshotType::Incremental,
        Some(Some(kind)) if kind == "incremental" => SnapshotType::Incremental,
        Some(Some(kind)) if kind == "blocking" => {
            return Err("type `blocking` is not modelled yet; only incremental".into());
        }
        Some(Some(kind)) => return Err(format!("type `{kind}` is no snapshot type; incremental or blocking")),
        Some(None) => return Err("type must be a string: \"incremental\" or \"blocking\"".into()),
    };
    let Some(collections) = object.get("data-collections") else {
        return Err("needs data-collections: the tables to snapshot, e.g. [\"public.hubs\"]".into());
    };
    let patterns: Option<Vec<String>> =
        collections.as_array().and_then(|items| items.iter().map(|item| item.as_str().map(str::to_owned)).collect());
    match patterns {
        Some(patterns) if !patterns.is_empty() && patterns.iter().all(|pattern| !pattern.trim().is_empty()) => {
            Ok((kind, patterns))
        }
        _ => Err("data-collections must be a non-empty array of table names (regular expressions)".into()),
    }
}

/// Each pattern matched against the whole name of every captured table, in the signal's order,
/// each table once (`expandAndDedupeDataCollectionIds`).
fn resolve(patterns: &[String], captured: &[TableId], tables: &[TableSetup]) -> Result<Vec<TableId>, String> {
    let mut resolved = Vec::new();
    for pattern in patterns {
        let regex = regex::Regex::new(&format!("^(?:{})$", pattern.trim()))
            .map_err(|error| format!("`{pattern}` is not a regular expression: {error}"))?;
        let matched: Vec<TableId> =
            captured.iter().copied().filter(|id| regex.is_match(&tables[usize::from(id.0)].name)).collect();
        if matched.is_empty() {
            return Err(format!(
                "`{pattern}` matches no table the connector captures (table.include.list); what Debezium does with a \
                 table it does not capture is not modelled"
            ));
        }
        for id in matched {
            if !resolved.contains(&id) {
                resolved.push(id);
            }
        }
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
