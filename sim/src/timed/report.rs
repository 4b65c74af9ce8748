//! What `handoff run` prints: a narrated timeline, the findings, the handoff record, whether the
//! prediction held, the trace hash — as text, or as one JSON object.

use crate::timed::runner::{RunLimit, RunResult};
pub use crate::timed::view::TimelineView;
use crate::verdict::{Lens, origin, predicted, prediction_line, verdict_lines};
use handoff_models::components::connect::ConnectorState;
use handoff_models::judge::checkers::Finding;
use handoff_models::judge::narrate::{self, Names};
use handoff_models::scenario::spec::{FaultAction, Invariant, Spec, Trigger};
use serde::Serialize;
use std::fmt::Write;

pub fn names(spec: &Spec) -> Names {
    Names::of(spec)
}

/// The narrated timeline, one line per event worth reading; a run cut by a limit ends with a
/// line that says so.
pub fn timeline(spec: &Spec, result: &RunResult) -> Vec<String> {
    let full = TimelineView { verbose: true, ..TimelineView::default() };
    timeline_view(spec, result, &full)
}

/// The timeline as `view` shows it (`--only`, `--key`, routine deliveries folded unless
/// `--verbose`).
pub fn timeline_view(spec: &Spec, result: &RunResult, view: &TimelineView) -> Vec<String> {
    let names = names(spec);
    let mut lines = super::view::lines(&result.trace, &names, view);
    if let Some(limit) = result.limit {
        let at = handoff_models::core::time::SimTime(result.sim_time_ms).to_string();
        lines.push(format!(
            "{at:<10} {:<9} RUN ENDED: it reached {limit} before its acceptance boundary, undecided",
            "harness"
        ));
    }
    lines
}

/// What to do about a limit the run reached.
fn limit_advice(limit: &RunLimit) -> String {
    match limit {
        RunLimit::Horizon { .. } => format!(
            "raise acceptance.horizon_ms (at most {}) to let it run longer",
            handoff_models::core::limits::MAX_HORIZON_MS
        ),
        RunLimit::TraceBudget { .. } => {
            "it grew past what a run may hold in memory: give it fewer rows, transactions or faults".into()
        }
    }
}

/// How a run failed closed, for its verdict: when, why, and what the sink held then.
fn failed_closed_text(result: &RunResult) -> String {
    let Some(stopped) = &result.failed_closed else { return String::new() };
    let sink = match &result.record {
        Some(record)
            if record.keys_missing.is_empty() && record.keys_differing.is_empty() && record.keys_extra.is_empty() =>
        {
            "the sink matched the source where the run ended".to_string()
        }
        Some(record) => format!(
            "the sink is {} key(s) missing / {} differing / {} extra where the run ended, short of its acceptance \
             boundary",
            record.keys_missing.len(),
            record.keys_differing.len(),
            record.keys_extra.len()
        ),
        None => "the run ended short of its acceptance boundary".to_string(),
    };
    format!("the pipeline failed closed at {} ({}) and {sink}", stopped.at, stopped.reason)
}

fn invariants(list: &[Invariant]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list.iter().map(|i| format!("{i} {}", i.name())).collect::<Vec<_>>().join(", ")
    }
}

/// The run's options, printed at its start.
pub fn header(spec: &Spec, scenario: &str, result: &RunResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "scenario  {} ({scenario})", spec.name);
    if let Some(line) = spec.description.lines().find(|l| !l.trim().is_empty()) {
        let _ = writeln!(out, "          {}", line.trim());
    }
    let _ = writeln!(out, "{}", prediction_line(&spec.prediction));
    // A scheduled run is the bound's world.
    let rows: u32 = match (&spec.schedule, &spec.check) {
        (Some(_), Some(check)) => check.rows * spec.tables.len() as u32,
        _ => spec.tables.iter().map(|t| t.rows).sum(),
    };
    let _ = writeln!(
        out,
        "seed      {}; PostgreSQL {}, snapshot.mode={}, offset.flush.interval.ms={}, {} partition(s), sink apply={}, {} rows",
        result.seed,
        spec.postgres.major_version,
        spec.debezium.snapshot_mode.name(),
        spec.connect.offset_flush_interval_ms,
        spec.kafka.partitions,
        spec.sink.rule.name(),
        rows
    );
    if spec.connect.workers > 1 {
        let _ = writeln!(
            out,
            "group     {} Connect workers (connect{}), scheduled.rebalance.max.delay.ms={}",
            spec.connect.workers,
            if spec.connect.workers == 2 { ", connect-2" } else { ", connect-2, connect-3" },
            spec.connect.group.scheduled_rebalance_max_delay_ms
        );
    }
    out.push_str(&not_modelled(spec));
    // In time order: a fault at a fixed time by its time, one at a moment (which the run reaches
    // when it reaches it) after them, each group in the schedule's order.
    let mut order: Vec<usize> = (0..result.schedule.len()).collect();
    order.sort_by_key(|index| match result.schedule[*index].trigger {
        Trigger::At { at_ms } => at_ms,
        _ => u64::MAX,
    });
    for index in order {
        let fault = &result.schedule[index];
        let origin = if index < spec.faults.len() { "" } else { "  (generated from the seed)" };
        // Whom it acts on, when the scenario has a choice: the connector, the worker.
        let connector = if spec.connector_count() > 1 && fault.action.acts_on_a_connector() {
            format!(" on connector {}", spec.connector(usize::from(fault.connector)).name)
        } else {
            String::new()
        };
        let worker = match fault.worker {
            Some(index) => format!(" on {}", handoff_models::core::ids::Node::WORKERS[usize::from(index)]),
            None if spec.connect.workers > 1
                && matches!(
                    fault.action,
                    FaultAction::KillConnectWorker { .. }
                        | FaultAction::StopConnectWorker { .. }
                        | FaultAction::PauseConnectWorker { .. }
                ) =>
            {
                " on the worker running the task".to_owned()
            }
            None => String::new(),
        };
        let _ = writeln!(out, "fault     {}{connector}{worker} at {}{origin}", fault.action, trigger(&fault.trigger));
    }
    if let Some(profile) = &spec.profile {
        let kinds: Vec<&str> = profile.kinds.iter().map(|kind| kind.name()).collect();
        let _ = writeln!(
            out,
            "profile   up to {} fault(s) from {} in {}..{}",
            profile.max_faults,
            kinds.join(", "),
            handoff_models::core::time::SimTime(profile.window_ms.0),
            handoff_models::core::time::SimTime(profile.window_ms.1)
        );
    }
    if let (Some(schedule), Some(check)) = (&spec.schedule, &spec.check) {
        let _ = writeln!(
            out,
            "schedule  {} steps through the [check] bound, one every {} ms; then the run goes on as usual",
            schedule.steps.len(),
            schedule.step_ms
        );
        for (index, txn) in check.scripts.iter().enumerate() {
            let label = if txn.label.is_empty() { "transaction" } else { &txn.label };
            let _ = writeln!(out, "script {index}  {label}");
        }
    }
    let names = names(spec);
    let mut sessions: Vec<&str> = Vec::new();
    for txn in &spec.scripted {
        let what = if !txn.label.is_empty() {
            txn.label.clone()
        } else if txn.ops.is_empty() {
            txn.step.kind.describe()
        } else {
            txn.ops.iter().map(|op| names.row_op(op)).collect::<Vec<_>>().join(", ")
        };
        let when = match txn.step.session.as_deref() {
            Some(session) if sessions.contains(&session) && txn.trigger == Trigger::At { at_ms: 0 } => {
                format!("when session {session} is ready")
            }
            Some(session) => {
                sessions.push(session);
                format!("at {} on session {session}", trigger(&txn.trigger))
            }
            None => format!("at {}", trigger(&txn.trigger)),
        };
        let _ = writeln!(out, "scripted  {what} {when}");
    }
    if let Some(background) = spec.background {
        let events = if background.events_per_second > 0.0 {
            format!(", {:.1} outbox events/s", background.events_per_second)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "workload  {:.1} inserts/s, {:.1} updates/s, {:.1} deletes/s{events} from {} ms to {} ms (from the seed)",
            background.inserts_per_second,
            background.updates_per_second,
            background.deletes_per_second,
            background.start_ms,
            background.end_ms
        );
    }
    out
}

/// The settings the scenario gives that the model does not simulate, one line per section and
/// reason (empty when there are none).
pub fn not_modelled(spec: &Spec) -> String {
    let mut groups: Vec<(&str, &str, Vec<&str>)> = Vec::new();
    for item in &spec.not_modelled {
        match groups.iter_mut().find(|(section, why, _)| *section == item.section && *why == item.why) {
            Some((_, _, settings)) => settings.push(&item.setting),
            None => groups.push((&item.section, &item.why, vec![&item.setting])),
        }
    }
    if groups.is_empty() {
        return String::new();
    }
    let mut out = "not modelled (accepted as given; they do not change this run)\n".to_owned();
    for (section, why, settings) in groups {
        let _ = writeln!(out, "          {section}: {}: {why}", settings.join(", "));
    }
    out
}

fn trigger(trigger: &Trigger) -> String {
    trigger.to_string()
}

/// Whether the run held its prediction, in lines: `prediction held: …`, `prediction NOT held: …`
/// and each thing not as predicted, or UNDECIDED.
pub fn verdict(spec: &Spec, result: &RunResult) -> Vec<String> {
    match &result.limit {
        Some(limit) => vec![format!("prediction UNDECIDED: the run reached {limit} first; {}", limit_advice(limit))],
        None => verdict_lines(&spec.prediction, &result.judgement, Lens::Run, &failed_closed_text(result)),
    }
}

/// The whole text report, its timeline as `view` shows it.
pub fn text(spec: &Spec, scenario: &str, result: &RunResult, view: &TimelineView) -> String {
    let mut out = header(spec, scenario, result);
    let _ = writeln!(out, "\ntimeline");
    for line in view.caption(spec) {
        let _ = writeln!(out, "  ({line})");
    }
    for line in timeline_view(spec, result, view) {
        let _ = writeln!(out, "  {line}");
    }
    let _ = writeln!(out, "\nfindings ({})", result.findings.len());
    if result.findings.is_empty() {
        let _ = writeln!(out, "  none: {} held", invariants(&Invariant::CHECKED));
    }
    for finding in &result.findings {
        let _ = writeln!(out, "  {finding}");
    }
    if let Some(stopped) = &result.failed_closed {
        let _ = writeln!(
            out,
            "  the pipeline FAILED CLOSED at {}: {} (the connector {} instead of going on; the boundary's checks were \
             not made)",
            stopped.at,
            stopped.reason,
            if stopped.status == ConnectorState::Failed { "failed" } else { "stopped" }
        );
    }
    for unfired in &result.unfired {
        let _ = writeln!(out, "  note: trigger never fired: {unfired}");
    }
    for note in &result.fault_notes {
        let _ = writeln!(out, "  note: fault {note}");
    }
    for step in scripted_not_applied(spec, result) {
        let _ = writeln!(out, "  note: at {}: {}", handoff_models::core::time::SimTime(step.at_ms), step.what);
    }
    if let Some(schedule) = &spec.schedule {
        if result.departures.is_empty() {
            let _ = writeln!(
                out,
                "
schedule  followed step for step ({} steps)",
                schedule.steps.len()
            );
        } else {
            let _ = writeln!(
                out,
                "
schedule  NOT FOLLOWED: the run departed from the path"
            );
            for departure in &result.departures {
                let _ = writeln!(out, "  {departure}");
            }
        }
    }
    if let Some(record) = &result.record {
        let _ = writeln!(out, "\nhandoff record");
        out.push_str(&record.render());
    }
    let prediction = &spec.prediction;
    let _ = writeln!(out);
    for line in verdict(spec, result) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "predicted   {}", predicted(prediction));
    let _ = writeln!(out, "from        {}", origin(prediction));
    for line in prediction.why.lines().filter(|l| !l.trim().is_empty()) {
        let _ = writeln!(out, "            {}", line.trim());
    }
    let _ = writeln!(
        out,
        "trace hash  {:016x} ({} events, {}.{:03}s simulated)",
        result.trace_hash,
        result.events,
        result.sim_time_ms / 1000,
        result.sim_time_ms % 1000
    );
    out
}

/// A scripted transaction that did not apply, as the run's trace says.
#[derive(Serialize)]
struct NotApplied {
    at_ms: u64,
    /// What did not apply, and why, in words.
    what: String,
    reason: String,
}

/// The scripted transactions that did not apply (a step that cannot apply at all is refused when
/// the scenario loads; these depended on the run).
fn scripted_not_applied(spec: &Spec, result: &RunResult) -> Vec<NotApplied> {
    let names = names(spec);
    result
        .trace
        .iter()
        .filter_map(|event| match &event.observation {
            handoff_models::core::observe::Observation::ScriptedNotApplied { reason, .. } => Some(NotApplied {
                at_ms: event.at.ms(),
                what: narrate::narrate(&event.observation, &names).unwrap_or_default(),
                reason: reason.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// A finding as every command's JSON gives it (docs/json.md, "A finding"): `run`, `replay`,
/// `drill`'s run and each of `sweep`'s run lines.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct JsonFinding {
    pub invariant: Invariant,
    pub name: String,
    pub key: Option<i64>,
    /// The table the key is a row of, and the key in its columns' words (`(region_id,
    /// order_id) = (5, 2)`; absent on the claims table of the default example).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_text: Option<String>,
    pub expected: String,
    pub seen: String,
    pub at_ms: u64,
    pub lsn: Option<String>,
    pub detail: String,
    pub occurrences: u32,
}

impl From<&Finding> for JsonFinding {
    fn from(finding: &Finding) -> Self {
        JsonFinding {
            invariant: finding.invariant,
            name: finding.name.clone(),
            key: finding.key,
            table: finding.table.clone(),
            key_text: finding.key_text.clone(),
            expected: finding.expected.clone(),
            seen: finding.seen.clone(),
            at_ms: finding.at.ms(),
            lsn: finding.lsn.map(|lsn| lsn.to_string()),
            detail: finding.detail.clone(),
            occurrences: finding.occurrences,
        }
    }
}

/// The JSON report: one object.
pub fn json(spec: &Spec, scenario: &str, result: &RunResult) -> serde_json::Value {
    let findings: Vec<JsonFinding> = result.findings.iter().map(JsonFinding::from).collect();
    let names = |list: &[Invariant]| list.iter().map(|i| i.to_string()).collect::<Vec<_>>();
    serde_json::json!({
        "schema_version": JSON_SCHEMA_VERSION,
        "scenario": scenario,
        "name": spec.name,
        "seed": result.seed,
        "trace_hash": format!("{:016x}", result.trace_hash),
        "findings": findings,
        "prediction": {
            "expected": {
                "verdict": spec.prediction.verdict.name(),
                "findings": names(&spec.prediction.findings),
                "allow": names(&spec.prediction.allow),
                "may_fail_closed": spec.prediction.may_fail_closed,
                "why": spec.prediction.why,
                "origin": spec.prediction.origin,
            },
            "held": result.prediction_held,
            "undecided": result.limit.is_some(),
            "invariants": result.judgement.invariants,
            "failing_closed": result.judgement.failing_closed,
        },
        "end": result.boundary.end,
        "failed_closed": result.failed_closed.as_ref().map(|stopped| serde_json::json!({
            "at_ms": stopped.at.ms(),
            "status": stopped.status,
            "reason": stopped.reason,
        })),
        "handoff_record": result.record,
        "stats": {
            "events": result.events,
            "sim_time_ms": result.sim_time_ms,
            "trace_items": result.trace_items,
            "horizon_ms": spec.acceptance.horizon_ms,
        },
        "limit": result.limit.map(|limit| match limit {
            RunLimit::Horizon { horizon_ms } => serde_json::json!({ "kind": "horizon", "horizon_ms": horizon_ms }),
            RunLimit::TraceBudget { items, budget } => {
                serde_json::json!({ "kind": "trace-budget", "trace_items": items, "budget": budget })
            }
        }),
        "unfired_triggers": result.unfired,
        "fault_notes": result.fault_notes,
        "not_modelled": spec.not_modelled,
        "scripted_not_applied": scripted_not_applied(spec, result),
        "schedule_departures": result.departures,
        "timeline": timeline_events(spec, result),
        "health": health(result),
    })
}

/// How many points the health series may have: a run longer than this many seconds is sampled
/// every few seconds instead of every second.
const HEALTH_POINTS: u64 = 2_000;

/// The interval of a run's health series: a second, or the first of 2, 5, 10, 30, 60, 300,
/// 600, 1,800, 3,600 seconds that keeps the series within [`HEALTH_POINTS`].
pub fn health_interval_ms(sim_time_ms: u64) -> u64 {
    [1u64, 2, 5, 10, 30, 60, 300, 600, 1_800, 3_600]
        .into_iter()
        .map(|seconds| seconds * 1_000)
        .find(|interval| sim_time_ms / interval < HEALTH_POINTS)
        .unwrap_or(3_600_000)
}

/// The health signals as time series (docs/json.md, "health"): every `interval_ms` of
/// simulated time and at the run's end, each connector's signals as they stood then (from the
/// positions the run sampled; the times since are computed at each point).
pub fn health(result: &RunResult) -> serde_json::Value {
    let interval_ms = health_interval_ms(result.sim_time_ms);
    let mut points = Vec::new();
    let mut next = 0usize;
    let mut at_ms = 0u64;
    loop {
        // The last sample at or before `at_ms`.
        while next < result.positions.len() && result.positions[next].at_ms <= at_ms {
            next += 1;
        }
        if let Some(sample) = next.checked_sub(1).map(|index| &result.positions[index]) {
            let connectors: Vec<serde_json::Value> = sample
                .connectors
                .iter()
                .map(|connector| {
                    let health = &connector.health;
                    serde_json::json!({
                        "name": health.connector,
                        "reachable": connector.reachable,
                        "connector_state": health.connector_state.name(),
                        "task_state": health.task_state.map(|state| state.name()),
                        "milliseconds_behind_source": health.milliseconds_behind_source(),
                        "milliseconds_since_last_event": health.milliseconds_since_last_event(at_ms),
                        "heartbeat_age_ms": health.heartbeat_age_ms(at_ms),
                        "slot": health.slot.as_ref().map(|slot| serde_json::json!({
                            "server": slot.server.name(),
                            "slot_name": slot.slot_name,
                            "active": slot.active,
                            "wal_status": slot.wal_status,
                            "retained_bytes": slot.retained_bytes,
                        })),
                    })
                })
                .collect();
            points.push(serde_json::json!({ "at_ms": at_ms, "connectors": connectors }));
        }
        if at_ms >= result.sim_time_ms {
            break;
        }
        at_ms = at_ms.saturating_add(interval_ms).min(result.sim_time_ms);
    }
    serde_json::json!({ "interval_ms": interval_ms, "samples": points })
}

pub use crate::JSON_SCHEMA_VERSION;

/// The timeline as objects, every narrated event (the text report's `--verbose` lines, unfolded):
/// `{"at_ms", "process", "kind", "text", "fields"}`, `kind` and `fields` the observation's own
/// (docs/json.md).
pub fn timeline_events(spec: &Spec, result: &RunResult) -> Vec<serde_json::Value> {
    let names = names(spec);
    result
        .trace
        .iter()
        .filter_map(|event| {
            let text = narrate::narrate(&event.observation, &names)?;
            let mut fields = serde_json::to_value(&event.observation).unwrap_or(serde_json::Value::Null);
            let kind = match &mut fields {
                serde_json::Value::Object(map) => map.remove("kind"),
                _ => None,
            }
            .unwrap_or(serde_json::Value::Null);
            Some(serde_json::json!({
                "at_ms": event.at.ms(),
                "process": event.node.name(),
                "kind": kind,
                "text": text,
                "fields": fields,
            }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{HEALTH_POINTS, health_interval_ms};

    #[test]
    fn the_health_series_keeps_within_its_points() {
        assert_eq!(health_interval_ms(59_064), 1_000);
        assert_eq!(health_interval_ms(1_999_999), 1_000);
        assert_eq!(health_interval_ms(2_000_000), 2_000);
        // The longest horizon, a day: a sample a minute.
        assert_eq!(health_interval_ms(86_400_000), 60_000);
        for end_ms in [0, 1, 999, 3_600_000, 86_400_000, u64::MAX / 2] {
            let interval = health_interval_ms(end_ms);
            assert!(end_ms / interval < HEALTH_POINTS || interval == 3_600_000, "{end_ms}: {interval}");
        }
    }
}
