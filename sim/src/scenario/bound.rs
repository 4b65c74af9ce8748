//! `[check]` and `[schedule]`: the bound of `handoff check`, and a path through it for `handoff run`.

use super::fields::{Cx, Field, Horizon, Res, Section};
use super::sections::Outboxes;
use super::workload::{op_field, op_target, script_entry};
use handoff_models::core::change::RowOp;
use handoff_models::core::ids::Node;
use handoff_models::core::time::SimTime;
use handoff_models::exhaustive::world::Operation;
use handoff_models::exhaustive::world::{CommitVisibility, CrashWhile, OperateWhile, ScriptWhile};
use handoff_models::scenario::spec::CheckBound;
use handoff_models::scenario::spec::Schedule;
use handoff_models::scenario::spec::ScriptedTxn;

/// `[check]`: the bound of `handoff check`.
pub(super) fn check(
    cx: &Cx,
    s: &Section,
    outboxes: Outboxes,
    system: handoff_models::scenario::faults::System,
) -> Res<CheckBound> {
    let tables = outboxes.tables;
    let consumer = system.consumer;
    s.check_keys(
        cx,
        "rows crash crashes crash_while pause pauses periodic_fires bgwriter_running_xacts operations \
         operate_while script script_while commit_visibility unreached_ok",
        "field",
    )?;
    // Processes named once each, from `names`; the second worker only with a group of two (the
    // world runs two at most), the consumer only with one.
    let processes = |field: &Field, what: &str, names: &[(&'static str, Node)]| -> Res<Vec<Node>> {
        let mut nodes = Vec::new();
        for item in cx.items(field, what)? {
            let node = cx.choice(&item, names)?;
            if node == Node::Consumer && !consumer {
                return cx.fail(&item, "the scenario has no outbox consumer: add [consumer]");
            }
            if node == Node::Connect2 && system.workers < 2 {
                return cx.fail(
                    &item,
                    "names the second Connect worker; the scenario has one ([connect] workers = 2 adds it)",
                );
            }
            if nodes.contains(&node) {
                return cx.fail(&item, "is named twice");
            }
            nodes.push(node);
        }
        Ok(nodes)
    };
    let rows = s.req(cx, "rows", |field| cx.int(field, 1, i64::from(MAX_CHECK_ROWS)))? as u32;
    let crash = s.opt("crash", Vec::new(), |field| {
        processes(field, "an array of process names, like [\"connect\", \"postgres\"]", &CheckBound::CRASHABLE)
    })?;
    let pause = s.opt("pause", Vec::new(), |field| {
        processes(field, "an array of Connect workers, like [\"connect\", \"connect-2\"]", &CheckBound::PAUSABLE)
    })?;
    let pauses = s.opt("pauses", pause.len().min(1) as u8, |field| Ok(cx.int(field, 0, 2)? as u8))?;
    if pauses > 0
        && pause.is_empty()
        && let Some(field) = s.get("pauses")
    {
        return cx.fail(&field, "needs pause = [...]: name the Connect workers that may pause");
    }
    let crashes = s.opt("crashes", crash.len() as u8, |field| Ok(cx.int(field, 0, 4)? as u8))?;
    if crashes > 0
        && crash.is_empty()
        && let Some(field) = s.get("crashes")
    {
        return cx.fail(&field, "needs crash = [...]: name the processes that may crash");
    }
    let periodic_fires = s.opt("periodic_fires", 1, |field| Ok(cx.int(field, 0, 3)? as u8))?;
    let bgwriter_running_xacts = s.opt("bgwriter_running_xacts", false, |field| cx.boolean(field))?;
    if bgwriter_running_xacts
        && periodic_fires == 0
        && let Some(field) = s.get("bgwriter_running_xacts")
    {
        return cx.fail(&field, "needs periodic_fires of 1 or more: with 0 the background writer's timer never fires");
    }
    let mut scripts = Vec::new();
    if let Some(field) = s.get("script") {
        let items = cx.items(&field, "an array of tables ([[check.script]])")?;
        let all: Vec<ScriptedTxn> =
            items.iter().map(|item| script_entry(cx, item, outboxes, None)).collect::<Res<_>>()?;
        super::workload::sessions_valid(cx, &items, &all, tables, false)?;
        for item in items {
            let txn = script_entry(cx, &item, outboxes, None)?;
            // The bound's transactions may run in any order: an insert of a loaded key applies
            // only after a step deletes it.
            // A `signal` step's row is numbered once the connectors are read (`signal_steps`).
            let signal = cx.section(&item)?.get("signal").is_some();
            for op in txn.ops.iter().filter(|op| !signal && !super::workload::outbox_op(op, tables)) {
                if let RowOp::Insert { table, key, .. } = op
                    && *key <= i64::from(rows)
                    && !all.iter().any(|step| {
                        step.ops.iter().any(|op| matches!(op, RowOp::Delete { .. }) && op_target(op) == (*table, *key))
                    })
                {
                    return cx.fail(
                        &op_field(cx, &item)?,
                        format!(
                            "the bound loads keys 1 to {rows} (rows = {rows}); claim {key} is one of them and no \
                         [[check.script]] step deletes it: the insert would always fail with a duplicate key"
                        ),
                    );
                }
                if let RowOp::Update { key, .. } | RowOp::Delete { key, .. } = op
                    && *key > i64::from(rows)
                {
                    let op = super::workload::op_field(cx, &item)?;
                    return cx.fail(
                        &op,
                        format!("the bound loads keys 1 to {rows} (rows = {rows}); {key} is not one of them"),
                    );
                }
            }
            scripts.push(txn);
        }
        super::workload::number_events(&mut scripts, 1);
    }
    let unreached_ok = s.opt("unreached_ok", Vec::new(), |field| {
        let names = handoff_models::exhaustive::check::SOMETIMES.map(|name| (name, name));
        cx.items(field, "an array of `sometimes` property names")?
            .iter()
            .map(|item| cx.choice(item, &names).map(str::to_owned))
            .collect()
    })?;
    let operations = s.opt("operations", Vec::new(), |field| {
        let names = Operation::ALL.map(|operation| (operation.name(), operation));
        let mut operations = Vec::new();
        for item in cx.items(field, "an array of operations, like [\"recreate-slot\"]")? {
            let operation = cx.choice(&item, &names)?;
            if operations.contains(&operation) {
                return cx.fail(&item, "is named twice");
            }
            operations.push(operation);
        }
        Ok(operations)
    })?;
    let operate_while = s.opt("operate_while", OperateWhile::AnyTime, |field| {
        let names = OperateWhile::ALL.map(|when| (when.name(), when));
        cx.choice(field, &names)
    })?;
    if operate_while != OperateWhile::AnyTime
        && operations.is_empty()
        && let Some(field) = s.get("operate_while")
    {
        return cx.fail(&field, "needs operations = [...]: name what the operator may do");
    }
    let crash_while = s.opt("crash_while", CrashWhile::AnyTime, |field| {
        let names = CrashWhile::ALL.map(|when| (when.name(), when));
        cx.choice(field, &names)
    })?;
    if crash_while != CrashWhile::AnyTime
        && crash.is_empty()
        && let Some(field) = s.get("crash_while")
    {
        return cx.fail(&field, "needs crash = [...]: name the processes that may crash");
    }
    let script_while = s.opt("script_while", ScriptWhile::AnyTime, |field| {
        let names = ScriptWhile::ALL.map(|when| (when.name(), when));
        cx.choice(field, &names)
    })?;
    let commit_visibility = s.opt("commit_visibility", CommitVisibility::Lags, |field| {
        let names = CommitVisibility::ALL.map(|when| (when.name(), when));
        cx.choice(field, &names)
    })?;
    Ok(CheckBound {
        script_while,
        commit_visibility,
        rows,
        scripts,
        crash,
        crashes,
        pause,
        pauses,
        periodic_fires,
        operations,
        operate_while,
        crash_while,
        bgwriter_running_xacts,
        unreached_ok,
    })
}

/// `[schedule]`: a path through the `[check]` bound for `handoff run` to follow.
pub(super) fn schedule<'t>(
    cx: &Cx,
    root: &Section<'t>,
    s: &Section<'t>,
    horizon: &Horizon,
) -> Res<(Schedule, Vec<Field<'t>>)> {
    s.check_keys(cx, "step_ms steps", "field")?;
    if root.get("check").is_none() {
        return Err(cx.err(
            s.at,
            "schedule",
            "a schedule is a path through the [check] bound; the scenario has no [check]",
        ));
    }
    // The schedule is the run's whole story: the timed faults and workload would be ignored.
    for (key, what) in [("fault", "[[fault]]"), ("fault_profile", "[fault_profile]"), ("workload", "[workload]")] {
        if let Some(field) = root.get(key) {
            return cx.fail(
                &field,
                format!(
                    "a scenario with a [schedule] takes its crashes and transactions from the schedule and \
                     [[check.script]]; remove {what}"
                ),
            );
        }
    }
    let step_ms = s.opt("step_ms", 10, |field| Ok(cx.int(field, 2, 60_000)? as u64))?;
    let field = s.need(cx, "steps", ": the path, e.g. steps = [\"deliver pg1 -> connect\", \"crash connect\"]")?;
    let items = cx.items(&field, "an array of steps, like [\"deliver pg1 -> connect\", \"crash connect\"]")?;
    if items.is_empty() {
        return cx.fail(&field, "is empty: a schedule has at least one step");
    }
    // Step k is taken at (k + 1) × step_ms, and the schedule ends a step after the last one.
    let end_ms = (items.len() as u64 + 1).saturating_mul(step_ms);
    if end_ms > horizon.ms {
        let most = (horizon.ms / step_ms).saturating_sub(1);
        let expected = if most == 0 {
            format!("no step of {step_ms} ms fits: lower step_ms")
        } else {
            format!("expected 1 to {most} steps")
        };
        return cx.fail(
            &field,
            format!(
                "{} steps of {step_ms} ms end at {}, past {}; {expected}",
                items.len(),
                SimTime(end_ms),
                horizon.describe()
            ),
        );
    }
    let mut steps = Vec::with_capacity(items.len());
    for item in &items {
        let text = cx.string(item)?;
        steps.push(text.parse().or_else(|problem: String| cx.fail(item, problem))?);
    }
    Ok((Schedule { step_ms, steps }, items))
}

/// The most rows a bound may load per table (the state space grows fast with rows).
const MAX_CHECK_ROWS: u32 = 8;
