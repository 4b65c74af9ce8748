//! `handoff run SCENARIO --html FILE`: the run as one self-contained page.
//!
//! The page is the run's data (a JSON object in a `<script type="application/json">` element) and
//! the code that draws it (`html/report.js`, `html/report.css`, included in the binary): swimlanes
//! per process over simulated time, the positions that matter on one LSN axis (each server's WAL
//! insert pointer, each slot's `restart_lsn` and `confirmed_flush`, each connector's stored
//! offset, Kafka's end and last stable offsets, the sink's applied positions and its checkpoint,
//! the last four as the newest source LSN below them), each slot's retained WAL against `max_slot_wal_keep_size` with
//! its `wal_status`, the connectors' states, the faults and operator actions marked on every
//! chart, every finding linked to its moment and key, one key followed across every process, and
//! every line of the timeline. Nothing is fetched: no network, no fonts, no libraries.
//!
//! The element ids and classes the browser test looks for (`sim/tests/html_report.rs`) are the
//! page's contract: `verdict`, `findings` (`a.finding`), `swimlanes` (`g.lane`), `.fault-marker`,
//! `lsn-axis` (`data-series`), `retained-wal` (`.cap`), `follow-key`, `key-events`, `timeline`
//! (`tr#event-N`), and `body[data-rendered=ok]` once the script has drawn everything.

use crate::timed::report::{self, TimelineView};
use crate::timed::runner::RunResult;
use crate::timed::runner::positions::PositionSample;
use crate::timed::view::{self, KeyFilter};
use handoff_models::core::ids::{Key, Node, TableId};
use handoff_models::core::observe::{Observation, TraceEvent};
use handoff_models::judge::narrate::{self, Names};
use handoff_models::scenario::spec::Spec;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// How many keys the page offers to follow: the findings' keys and `--key` first, then the keys
/// the run's transactions changed, in the order they first changed.
const MAX_FOLLOWED_KEYS: usize = 400;

/// The page for `result`, `followed` the key to follow first (`--key`; otherwise the first
/// finding's key, or the first key a transaction changed).
pub fn page(spec: &Spec, scenario: &str, result: &RunResult, followed: Option<KeyFilter>) -> String {
    let data = data(spec, scenario, result, followed);
    // `</` would end the script element: JSON allows `<\/` for it.
    let data = serde_json::to_string(&data).unwrap_or_default().replace("</", "<\\/");
    let title = escape(&format!("handoff: {} (seed {})", spec.name, result.seed));
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{title}</title>\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<style>\n{css}</style>\n</head>\n\
         <body>\n<noscript>This report draws its charts with JavaScript; the text report is at the end of the \
         page.</noscript>\n<main id=\"report\"></main>\n<script type=\"application/json\" id=\"run-data\">{data}</script>\n\
         <script>\n{js}</script>\n</body>\n</html>\n",
        css = include_str!("html/report.css"),
        js = include_str!("html/report.js"),
    )
}

/// Whether `--html PATH` can be written, asked before the run: its folder exists and it is not
/// a folder itself.
pub fn check_writable(path: &std::path::Path) -> Result<(), String> {
    if path.is_dir() {
        return Err(format!("--html {}: is a folder; give a file name like report.html", path.display()));
    }
    let parent = path.parent().filter(|parent| !parent.as_os_str().is_empty());
    if let Some(parent) = parent
        && !parent.is_dir()
    {
        return Err(format!("--html {}: the folder {} does not exist", path.display(), parent.display()));
    }
    Ok(())
}

/// Text made safe for HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// What kind of mark an event is on the swimlanes.
fn category(observation: &Observation) -> &'static str {
    match observation {
        Observation::Fault { .. } | Observation::Crashed { .. } => "fault",
        Observation::OperatorAction { .. } => "operator",
        Observation::OfConnector { observation, .. } => category(observation),
        routine if view::is_routine(routine) => "routine",
        Observation::TaskFailed { .. } | Observation::SlotInvalidated { .. } | Observation::SinkFailed { .. } => {
            "failure"
        }
        _ => "event",
    }
}

/// A key as the page names it: its label (`claim 42`, `row (5, 2) of public.orders`) and its id,
/// what `#key=` and `--key` take (`42`, `public.orders:(5,2)`; the table is left out when the
/// scenario has one table).
fn key_entry(spec: &Spec, names: &Names, table: TableId, key: Key) -> (String, String) {
    let values = names.key_values(table, key).replace(' ', "");
    let id = if spec.tables.len() <= 1 { values } else { format!("{}:{values}", names.table(table)) };
    (id, names.row_of(table, key))
}

fn data(spec: &Spec, scenario: &str, result: &RunResult, followed: Option<KeyFilter>) -> Value {
    let names = Names::of(spec);
    // Every narrated event, with its place in the trace.
    let narrated: Vec<(&TraceEvent, String)> = result
        .trace
        .iter()
        .filter_map(|event| narrate::narrate(&event.observation, &names).map(|text| (event, text)))
        .collect();
    let events: Vec<Value> = narrated
        .iter()
        .map(|(event, text)| {
            json!({
                "at_ms": event.at.ms(),
                "process": event.node.name(),
                "category": category(&event.observation),
                "text": text,
            })
        })
        .collect();
    let processes: Vec<&str> = Node::ALL
        .iter()
        .filter(|node| narrated.iter().any(|(event, _)| event.node == **node))
        .map(|node| node.name())
        .collect();

    // The keys to follow: the findings', `--key`, then those the transactions changed.
    let mut candidates: Vec<(TableId, Key)> = Vec::new();
    let push = |candidates: &mut Vec<(TableId, Key)>, table: TableId, key: Key| {
        if !candidates.contains(&(table, key)) && candidates.len() < MAX_FOLLOWED_KEYS {
            candidates.push((table, key));
        }
    };
    let finding_key = |finding: &handoff_models::judge::checkers::Finding| {
        let table = finding.table_id.or_else(|| spec.tables.first().map(|t| t.id))?;
        Some((table, finding.key?))
    };
    for finding in &result.findings {
        if let Some((table, key)) = finding_key(finding) {
            push(&mut candidates, table, key);
        }
    }
    let followed = followed.and_then(|filter| {
        let table = filter.table.or_else(|| spec.tables.first().map(|t| t.id))?;
        push(&mut candidates, table, filter.key);
        Some((table, filter.key))
    });
    let mut seen = BTreeSet::new();
    for (event, _) in &narrated {
        if let Observation::Committed { txn, .. } = &event.observation {
            for change in &txn.changes {
                if seen.insert((change.table, change.key)) {
                    push(&mut candidates, change.table, change.key);
                }
            }
        }
    }
    let keys: Vec<Value> = candidates
        .iter()
        .map(|&(table, key)| {
            let mut follower = view::Follower::new(KeyFilter { table: Some(table), key });
            let indices: Vec<usize> = narrated
                .iter()
                .enumerate()
                .filter(|(_, (event, _))| follower.involves(&event.observation))
                .map(|(index, _)| index)
                .collect();
            let (id, label) = key_entry(spec, &names, table, key);
            json!({ "id": id, "label": label, "events": indices })
        })
        .collect();
    let followed =
        followed.or_else(|| candidates.first().copied()).map(|(table, key)| key_entry(spec, &names, table, key).0);

    let findings: Vec<Value> = result
        .findings
        .iter()
        .map(|finding| {
            let at_ms = finding.at.ms();
            let key = finding_key(finding);
            // Its moment: the last event at or before it that names its key, else the last event
            // at or before it.
            let before = narrated.iter().enumerate().filter(|(_, (event, _))| event.at.ms() <= at_ms);
            let of_key = key.and_then(|(table, key)| {
                let filter = KeyFilter { table: Some(table), key };
                before.clone().rfind(|(_, (event, _))| view::involves(&event.observation, &filter))
            });
            let event = of_key.or_else(|| before.clone().next_back()).map(|(index, _)| index);
            json!({
                "invariant": finding.invariant.to_string(),
                "name": finding.name,
                "text": finding.to_string(),
                "at_ms": at_ms,
                "lsn": finding.lsn.map(|lsn| lsn.0),
                "key": key.map(|(table, key)| key_entry(spec, &names, table, key).0),
                "event": event,
            })
        })
        .collect();

    let faults: Vec<Value> = narrated
        .iter()
        .enumerate()
        .filter(|(_, (event, _))| matches!(category(&event.observation), "fault" | "operator"))
        .map(|(index, (event, text))| {
            json!({
                "at_ms": event.at.ms(),
                "event": index,
                "operator": category(&event.observation) == "operator",
                "text": text,
            })
        })
        .collect();

    // Invalidated slots: the retained WAL chart shows what each held when it was invalidated
    // (between two samples, the burst and the checkpoint that invalidates happen at once).
    let invalidations: Vec<Value> = narrated
        .iter()
        .enumerate()
        .filter_map(|(index, (event, text))| match &event.observation {
            Observation::SlotInvalidated { server, slot, restart_lsn, oldest_kept, .. } => Some(json!({
                "at_ms": event.at.ms(),
                "event": index,
                "server": server.name(),
                "slot_name": slot,
                "restart_lsn": restart_lsn.0,
                "oldest_kept_lsn": oldest_kept.0,
                "text": text,
            })),
            _ => None,
        })
        .collect();

    let text_view = TimelineView::default();
    json!({
        "scenario": scenario,
        "name": spec.name,
        "description": spec.description.lines().find(|line| !line.trim().is_empty()).unwrap_or("").trim(),
        "seed": result.seed,
        "trace_hash": format!("{:016x}", result.trace_hash),
        "end_ms": result.sim_time_ms,
        "held": result.prediction_held,
        "undecided": result.limit.is_some(),
        "verdict": report::verdict(spec, result),
        "why": spec.prediction.why.trim(),
        "processes": processes,
        "events": events,
        "findings": findings,
        "faults": faults,
        "invalidations": invalidations,
        "keys": keys,
        "followed": followed,
        "positions": result.positions.iter().map(sample).collect::<Vec<Value>>(),
        "text_report": report::text(spec, scenario, result, &text_view),
    })
}

/// A position sample as the page's data: LSNs as numbers (the page prints them as PostgreSQL
/// does).
fn sample(sample: &PositionSample) -> Value {
    let lsn = |lsn: Option<handoff_models::core::lsn::Lsn>| lsn.map(|lsn| lsn.0);
    json!({
        "at_ms": sample.at_ms,
        "servers": sample.servers.iter().map(|server| json!({
            "server": server.server.name(),
            "up": server.up,
            "primary": server.primary,
            "wal_insert_lsn": server.wal_insert_lsn.0,
            "max_slot_wal_keep_size_bytes": server.max_slot_wal_keep_size_bytes,
            "slots": server.slots.iter().map(|slot| json!({
                "slot_name": slot.slot_name,
                "active": slot.active,
                "restart_lsn": lsn(slot.restart_lsn),
                "confirmed_flush_lsn": lsn(slot.confirmed_flush_lsn),
                "wal_status": slot.wal_status,
                "retained_bytes": slot.retained_bytes,
                "safe_wal_size_bytes": slot.safe_wal_size_bytes,
            })).collect::<Vec<Value>>(),
        })).collect::<Vec<Value>>(),
        "connectors": sample.connectors.iter().map(|connector| json!({
            "name": connector.health.connector,
            "stored_lsn": lsn(connector.stored_lsn),
            "reachable": connector.reachable,
            "connector_state": connector.health.connector_state.name(),
            "task_state": connector.health.task_state.map(|state| state.name()),
            "lag_ms": connector.health.meter.and_then(|meter| meter.lag_behind_source_ms),
            "last_event_ms": connector.health.meter.and_then(|meter| meter.last_event_ms),
            "last_heartbeat_ms": connector.health.last_heartbeat_ms,
            "heartbeat_interval_ms": connector.health.heartbeat_interval_ms,
        })).collect::<Vec<Value>>(),
        "kafka": {
            "end_offsets": sample.kafka.end_offsets,
            "last_stable_offsets": sample.kafka.last_stable_offsets,
            "end_lsn": lsn(sample.kafka.end_lsn),
            "stable_lsn": lsn(sample.kafka.stable_lsn),
        },
        "sink_checkpoint_lsn": lsn(sample.sink_checkpoint_lsn),
        "sink_committed_offsets": sample.sink_committed_offsets,
        "sink_applied_lsn": lsn(sample.sink_applied_lsn),
    })
}
