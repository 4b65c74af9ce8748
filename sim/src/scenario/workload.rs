//! `[workload]`: the background workload and the `[[workload.script]]` (and `[[check.script]]`)
//! transactions.

use super::fields::{Cx, Field, Horizon, Res, Section};
use super::sections::table_id;
use super::toml_text::duration_text;
use super::tree::Entry;
use handoff_models::core::change::RowOp;
use handoff_models::core::ids::Status;
use handoff_models::core::ids::TableId;
use handoff_models::core::limits;
use handoff_models::scenario::spec::Background;
use handoff_models::scenario::spec::ScriptedTxn;
use handoff_models::scenario::spec::TableSetup;
use handoff_models::scenario::spec::Trigger;

pub(super) fn workload(
    cx: &Cx,
    s: &Section,
    tables: &[TableSetup],
    horizon: &Horizon,
) -> Res<(Option<Background>, Vec<ScriptedTxn>)> {
    let known = "start_ms end_ms inserts_per_second updates_per_second deletes_per_second script";
    s.check_keys(cx, known, "field")?;
    let start_ms = s.opt("start_ms", 0, |field| cx.time_ms(field, 0, horizon))?;
    let end_ms = s.opt("end_ms", 0, |field| cx.time_ms(field, 0, horizon))?;
    let rate = |key: &str| s.opt(key, 0.0, |field| cx.rate(field));
    let (inserts_per_second, updates_per_second, deletes_per_second) =
        (rate("inserts_per_second")?, rate("updates_per_second")?, rate("deletes_per_second")?);
    let busy = inserts_per_second > 0.0 || updates_per_second > 0.0 || deletes_per_second > 0.0;
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
    let background =
        busy.then_some(Background { start_ms, end_ms, inserts_per_second, updates_per_second, deletes_per_second });
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
            scripted.push(script_entry(cx, item, tables, Some(horizon))?);
        }
        script_steps_apply(cx, &items, &scripted, tables, background.as_ref())?;
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
            ];
            let ((key, rate), count) = rates
                .into_iter()
                .zip(background.transaction_counts())
                .max_by_key(|(_, count)| *count)
                .expect("three rates");
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

/// The `insert`, `update` or `delete` field of a script entry: where an error about its step
/// points.
pub(super) fn op_field<'t>(cx: &Cx, item: &Field<'t>) -> Res<Field<'t>> {
    let s = cx.section(item)?;
    Ok(s.get("insert").or_else(|| s.get("update")).or_else(|| s.get("delete")).expect("a step has an operation"))
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
    for (index, (item, txn)) in items.iter().zip(scripted).enumerate() {
        let Some(op) = txn.ops.first() else { continue };
        let (table, key) = match *op {
            RowOp::Insert { table, key, .. } | RowOp::Update { table, key, .. } | RowOp::Delete { table, key } => {
                (table, key)
            }
        };
        let setup = &tables[usize::from(table.0)];
        let rows = i64::from(setup.rows);
        let loaded = key <= rows;
        // The background workload changes the first table: it inserts the keys after the loaded
        // ones, and deletes rows it believes live.
        let background = background.filter(|_| Some(table) == first);
        let [inserts, _, _] = background.map_or([0, 0, 0], Background::transaction_counts);
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
        let loaded_keys =
            if rows == 0 { "it loads no row".to_string() } else { format!("keys 1 to {rows} are loaded") };
        let problem = match op {
            RowOp::Update { .. } | RowOp::Delete { .. }
                if !loaded && !background_inserts && !step_before(|op| matches!(op, RowOp::Insert { .. })) =>
            {
                let verb = if matches!(op, RowOp::Update { .. }) { "update" } else { "delete" };
                Some(format!(
                    "claim {key} is not a row of {name} ({loaded_keys}) and no step that may run before this one \
                     inserts it: the {verb} would change nothing"
                ))
            }
            RowOp::Insert { .. }
                if loaded && !background_deletes && !step_before(|op| matches!(op, RowOp::Delete { .. })) =>
            {
                Some(format!(
                    "claim {key} is already a row of {name} ({loaded_keys}) and no step that may run before this one \
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
    match *op {
        RowOp::Insert { table, key, .. } | RowOp::Update { table, key, .. } | RowOp::Delete { table, key } => {
            (table, key)
        }
    }
}

/// A `[[workload.script]]` entry (`timed`: it has an `at`, within the horizon), or a
/// `[[check.script]]` one (it may run at any point of the exhaustive lens, so it has none).
pub(super) fn script_entry(cx: &Cx, item: &Field, tables: &[TableSetup], timed: Option<&Horizon>) -> Res<ScriptedTxn> {
    let s = cx.section(item)?;
    let trigger = match timed {
        Some(horizon) => {
            s.check_keys(cx, "at insert update delete status amount_cents table label", "field")?;
            s.req(cx, "at", |field| cx.trigger(field, horizon))?
        }
        None => {
            s.check_keys(cx, "insert update delete status amount_cents table label", "field")?;
            Trigger::At { at_ms: 0 }
        }
    };
    let ops: Vec<&Entry> =
        s.entries.iter().filter(|entry| ["insert", "update", "delete"].contains(&entry.key.as_str())).collect();
    let op = match ops.as_slice() {
        [] => return Err(cx.err(s.at, &s.path, "one of insert, update or delete is required")),
        [op] => *op,
        [first, second, ..] => {
            let problem =
                format!("exactly one of insert, update or delete is allowed; found {} and {}", first.key, second.key);
            return Err(cx.err(second.at(), &s.path, problem));
        }
    };
    let key = cx.int(&s.field(op), 1, i64::MAX)?;
    let table = match s.get("table") {
        Some(field) => table_id(cx, &field, cx.string(&field)?, tables)?,
        None => TableId(0),
    };
    let statuses = [Status::Submitted, Status::Assessed, Status::Approved, Status::Paid, Status::Closed];
    let statuses = statuses.map(|status| (status.name(), status));
    let status = |default| s.opt("status", default, |field| cx.choice(field, &statuses));
    for (key, applies) in [("status", op.key != "delete"), ("amount_cents", op.key == "insert")] {
        if let Some(field) = s.get(key).filter(|_| !applies) {
            return cx.fail(&field, format!("does not apply to {}", op.key));
        }
    }
    let row_op = match op.key.as_str() {
        "insert" => RowOp::Insert {
            table,
            key,
            status: status(Status::Submitted)?,
            amount_cents: s.opt("amount_cents", 100_000, |field| cx.u32(field, 0))?,
        },
        "update" => RowOp::Update { table, key, status: status(Status::Approved)? },
        _ => RowOp::Delete { table, key },
    };
    let label = s.opt("label", String::new(), |field| cx.owned(field))?;
    Ok(ScriptedTxn { trigger, ops: vec![row_op], label })
}
