//! `handoff shrink`: from a failing seed, a smaller scenario that still fails the same way.
//!
//! The run is first pinned: its generated faults and its generated background transactions
//! become an explicit schedule, so that every element can be removed on its own. Then, keeping
//! the seed (madsim's latencies are part of the failure) and re-running after each step:
//! 1. delta debugging (ddmin) over the faults and the transactions: remove halves, quarters, …,
//!    single elements, keeping every removal after which the failure remains;
//! 2. fewer rows: the smallest table that still fails, by bisection, with the changed rows'
//!    keys moved in proportion so that they keep their place relative to the scan;
//! 3. earlier faults: each fault's time halved (or its delay after a moment dropped) while the
//!    failure remains.
//!
//! Every candidate is a scenario the loader reads back (`scenario::to_toml` succeeds on it): a
//! shrunk scenario always loads.
//!
//! "The same failure" is the target finding's signature: its invariant, its shape (a missing
//! document or a stale one, a resurrection at the boundary or during the run, a phantom or a
//! hole in the stream, …) and the kind of history its key had in the source (loaded, inserted,
//! updated, deleted), not the key itself, which changes as rows go.

use crate::sweep::regressions;
use crate::timed::runner::{self, RunResult};
use handoff_models::core::change::{ChangeKind, RowOp};
use handoff_models::core::ids::{Key, Status};
use handoff_models::core::observe::Observation;
use handoff_models::judge::checkers::Finding;
use handoff_models::scenario::spec::{Fault, Invariant, ScriptedTxn, Spec, StepKind, Trigger};
use std::fmt;

/// What must stay true of a shrunk run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub invariant: Invariant,
    pub shape: String,
    pub key_history: String,
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.invariant, self.invariant.name())?;
        if !self.shape.is_empty() {
            write!(f, " ({})", self.shape)?;
        }
        if !self.key_history.is_empty() {
            write!(f, ", key history {}", self.key_history)?;
        }
        Ok(())
    }
}

/// Sizes of a scenario, before and after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    pub faults: usize,
    pub transactions: usize,
    pub rows: u32,
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} fault(s), {} transaction(s), {} row(s)", self.faults, self.transactions, self.rows)
    }
}

pub struct Shrunk {
    pub signature: Signature,
    pub before: Size,
    pub after: Size,
    pub spec: Spec,
    pub seed: u64,
    pub runs: usize,
}

fn shape(finding: &Finding) -> &'static str {
    match finding.invariant {
        Invariant::I1 if finding.seen == "absent" => "a document missing",
        Invariant::I1 => "a stale document",
        Invariant::I2 if finding.expected.starts_with("absent") => "a deleted document live at the boundary",
        Invariant::I2 => "a deleted document brought back during the run",
        Invariant::I4 if finding.seen.contains("phantom") => "a phantom change",
        Invariant::I4 if finding.seen.contains("never published") => "commits neither snapshotted nor streamed",
        Invariant::I4 => "a snapshot not at one position",
        _ => "",
    }
}

/// The kind of history a key had: `L` loaded, `I` inserted, `U` updated (repeats folded), `D`
/// deleted.
fn key_history(result: &RunResult, key: Option<Key>) -> String {
    let Some(key) = key else { return String::new() };
    // A key loaded before the run shows as L when its first change is not an insert.
    let mut history = String::new();
    let mut first = true;
    for event in &result.trace {
        let Observation::Committed { txn, .. } = &event.observation else { continue };
        for change in txn.changes.iter().filter(|change| change.key == key) {
            let letter = match change.kind {
                ChangeKind::Insert { .. } => 'I',
                ChangeKind::Update { .. } => 'U',
                ChangeKind::Delete { .. } => 'D',
            };
            if first && letter != 'I' {
                history.push('L');
            }
            first = false;
            if !(letter == 'U' && history.ends_with('U')) {
                history.push(letter);
            }
        }
    }
    if history.is_empty() { "L".into() } else { history }
}

/// The signature of a run's first finding (in invariant order) of `invariant` if given.
pub fn signature(result: &RunResult, invariant: Option<Invariant>) -> Option<Signature> {
    let finding = result
        .findings
        .iter()
        .filter(|finding| invariant.is_none_or(|wanted| finding.invariant == wanted))
        .min_by_key(|finding| finding.invariant)?;
    Some(Signature {
        invariant: finding.invariant,
        shape: shape(finding).to_string(),
        key_history: key_history(result, finding.key),
    })
}

/// Whether a candidate still fails the same way. A candidate the loader would refuse (a step
/// left updating a row whose insert was dropped, a fault the system cannot take) is no
/// candidate: every shrunk scenario loads.
fn fails_the_same(spec: &Spec, seed: u64, target: &Signature, runs: &mut usize) -> bool {
    if crate::scenario::to_toml(spec, seed).is_err() {
        return false;
    }
    *runs += 1;
    let result = runner::run(spec, seed);
    result.findings.iter().any(|finding| {
        finding.invariant == target.invariant
            && shape(finding) == target.shape
            && key_history(&result, finding.key) == target.key_history
    })
}

fn size(spec: &Spec) -> Size {
    Size {
        faults: spec.faults.len(),
        transactions: spec.scripted.len(),
        rows: spec.tables.iter().map(|table| table.rows).sum(),
    }
}

/// One element the shrinker may drop.
#[derive(Clone, Debug)]
enum Element {
    Fault(Fault),
    Txn(ScriptedTxn),
}

fn with_elements(spec: &Spec, elements: &[Element]) -> Spec {
    let mut next = spec.clone();
    next.faults = elements.iter().filter_map(|e| if let Element::Fault(f) = e { Some(*f) } else { None }).collect();
    next.scripted = coherent_sessions(
        elements.iter().filter_map(|e| if let Element::Txn(t) = e { Some(t.clone()) } else { None }).collect(),
    );
    next
}

/// The steps left once some are dropped, without those of a named session that no longer make
/// sense in order (a statement, `COMMIT` or `ROLLBACK` whose `BEGIN` was dropped, a `BEGIN` whose
/// `COMMIT` was dropped before the next `BEGIN`): what the loader would refuse. A session keeps
/// its database on its first step left.
fn coherent_sessions(steps: Vec<ScriptedTxn>) -> Vec<ScriptedTxn> {
    // Per session: its database, whether a step of it is kept yet, and whether a block is open.
    let mut sessions: Vec<(String, Option<String>, bool, bool)> = Vec::new();
    for step in &steps {
        if let Some(name) = &step.step.session
            && !sessions.iter().any(|(session, ..)| session == name)
        {
            sessions.push((name.clone(), step.step.database.clone(), false, false));
        }
    }
    let mut kept = Vec::with_capacity(steps.len());
    for mut step in steps {
        let Some(name) = step.step.session.clone() else {
            kept.push(step);
            continue;
        };
        let (_, database, started, open) = sessions.iter_mut().find(|(session, ..)| *session == name).expect("listed");
        let keep = match &step.step.kind {
            StepKind::Begin { .. } => !*open,
            StepKind::Commit | StepKind::Rollback => *open,
            StepKind::Message { transactional: false, .. } => true,
            _ => *open,
        };
        if !keep {
            continue;
        }
        match step.step.kind {
            StepKind::Begin { .. } => *open = true,
            StepKind::Commit | StepKind::Rollback => *open = false,
            _ => {}
        }
        step.step.database = if *started { None } else { database.clone() };
        *started = true;
        kept.push(step);
    }
    kept
}

/// The first table cut to `rows` rows. The transactions' keys that name loaded rows move with
/// it, in proportion, so that a change keeps its place relative to the snapshot scan (a change
/// to row 731 of 1,000 becomes a change to row 3 of 4); keys of inserted rows stay as they are.
fn with_rows(spec: &Spec, rows: u32) -> Spec {
    let mut next = spec.clone();
    let Some(table) = next.tables.first_mut() else { return next };
    let (old, id) = (Key::from(table.rows), table.id);
    table.rows = rows;
    if old == 0 {
        return next;
    }
    let scale = |key: Key| if key <= old { ((key - 1) * Key::from(rows) / old + 1).max(1) } else { key };
    let names = handoff_models::judge::narrate::Names::of(spec);
    for txn in &mut next.scripted {
        let mut moved = false;
        for op in &mut txn.ops {
            let key = match op {
                RowOp::Insert { table, key, .. } | RowOp::Update { table, key, .. } | RowOp::Delete { table, key }
                    if *table == id =>
                {
                    key
                }
                _ => continue,
            };
            let scaled = scale(*key);
            moved |= scaled != *key;
            *key = scaled;
        }
        if moved {
            txn.label = label(&names, &txn.step.kind, &txn.ops);
        }
    }
    next
}

/// A step's label, in the timeline's words: `update claim 7 to approved`, `delete row (2, 6) of
/// public.hubs`.
fn label(names: &handoff_models::judge::narrate::Names, kind: &StepKind, ops: &[RowOp]) -> String {
    if let StepKind::OutboxMessage { event, .. } = kind {
        return format!("claim {} to {} with its outbox message", event.aggregate_id, status_name(event.event_type));
    }
    if let Some(RowOp::InsertEvent { aggregate_id, event_type, .. }) =
        ops.iter().find(|op| matches!(op, RowOp::InsertEvent { .. }))
    {
        return format!("claim {aggregate_id} to {} with its outbox event", status_name(*event_type));
    }
    match ops.first() {
        Some(RowOp::Insert { table, key, .. }) => format!("insert {}", names.row_of(*table, *key)),
        Some(RowOp::Update { table, key, status }) => {
            format!("update {} to {}", names.row_of(*table, *key), status_name(*status))
        }
        Some(RowOp::Delete { table, key }) => format!("delete {}", names.row_of(*table, *key)),
        Some(RowOp::InsertEvent { id, .. }) => format!("insert outbox event {id}"),
        None => "empty".into(),
    }
}

/// The run's generated background transactions as explicit scripted ones at their times.
fn pin_workload(spec: &Spec, seed: u64) -> Spec {
    let mut pinned = spec.clone();
    let workload = handoff_models::scenario::workload::workload(spec, seed);
    let names = handoff_models::judge::narrate::Names::of(spec);
    for txn in &workload.timed {
        // A background session's step stays a step of that session.
        let step = handoff_models::scenario::spec::ScriptStep {
            kind: txn.kind.clone(),
            session: txn.session.map(|session| workload.sessions[session as usize].name.clone()),
            database: None,
            idle_ms: txn.idle_ms,
        };
        pinned.scripted.push(ScriptedTxn {
            trigger: Trigger::At { at_ms: txn.at_ms.unwrap_or(0) },
            ops: txn.ops.clone(),
            label: label(&names, &txn.kind, &txn.ops),
            step,
        });
    }
    pinned.background = None;
    pinned
}

fn status_name(status: Status) -> &'static str {
    status.name()
}

/// ddmin: the smallest sublist (1-minimal) for which `keeps` holds.
fn ddmin(mut items: Vec<Element>, mut keeps: impl FnMut(&[Element]) -> bool) -> Vec<Element> {
    let mut chunks = 2usize;
    while items.len() >= 2 {
        let size = items.len().div_ceil(chunks);
        let mut reduced = false;
        for start in (0..items.len()).step_by(size) {
            let complement: Vec<Element> = items
                .iter()
                .enumerate()
                .filter(|(i, _)| *i < start || *i >= start + size)
                .map(|(_, e)| e.clone())
                .collect();
            if keeps(&complement) {
                items = complement;
                chunks = (chunks - 1).max(2);
                reduced = true;
                break;
            }
        }
        if !reduced {
            if chunks >= items.len() {
                break;
            }
            chunks = (chunks * 2).min(items.len());
        }
    }
    if items.len() == 1 && keeps(&[]) {
        items.clear();
    }
    items
}

/// Shrinks a failing seed of a scenario, keeping its first finding (of `invariant`, if given).
/// `max_runs` bounds the work.
pub fn shrink(spec: &Spec, seed: u64, invariant: Option<Invariant>, max_runs: usize) -> Result<Shrunk, String> {
    let first = runner::run(spec, seed);
    let target = signature(&first, invariant).ok_or_else(|| match invariant {
        Some(invariant) => format!("seed {seed} of {} has no {invariant} finding to shrink", spec.name),
        None => format!("seed {seed} of {} has no finding to shrink", spec.name),
    })?;
    let mut runs = 1;
    // Pin the generated faults and transactions.
    let mut current = pin_workload(&regressions::pin(spec, &first, "handoff shrink"), seed);
    let before = Size {
        faults: first.schedule.len(),
        transactions: current.scripted.len(),
        rows: spec.tables.iter().map(|t| t.rows).sum(),
    };
    // A scenario that cannot be written is no candidate (`fails_the_same`): say so, not that the
    // pinned run differs.
    if let Err(error) = crate::scenario::to_toml(&current, seed) {
        return Err(format!(
            "seed {seed}: the run with its schedule made explicit cannot be written as a scenario: {error}"
        ));
    }
    if !fails_the_same(&current, seed, &target, &mut runs) {
        return Err(format!(
            "seed {seed}: the run with its schedule made explicit no longer shows {target}; this is a bug in pinning"
        ));
    }

    // 1. Delta debugging over the faults and the transactions.
    let elements: Vec<Element> = current
        .faults
        .iter()
        .map(|f| Element::Fault(*f))
        .chain(current.scripted.iter().cloned().map(Element::Txn))
        .collect();
    let base = current.clone();
    let kept = ddmin(elements, |candidate| {
        runs < max_runs && fails_the_same(&with_elements(&base, candidate), seed, &target, &mut runs)
    });
    current = with_elements(&base, &kept);

    // 2. Fewer rows, by bisection: the smallest count that still fails.
    if let Some(table) = current.tables.first().cloned() {
        let (mut low, mut high) = (0u32, table.rows);
        while low + 1 < high && runs < max_runs {
            let middle = low + (high - low) / 2;
            let candidate = with_rows(&current, middle);
            if fails_the_same(&candidate, seed, &target, &mut runs) {
                high = middle;
            } else {
                low = middle;
            }
        }
        current = with_rows(&current, high);
    }

    // 3. Earlier faults.
    for index in 0..current.faults.len() {
        loop {
            if runs >= max_runs {
                break;
            }
            let mut candidate = current.clone();
            let trigger = &mut candidate.faults[index].trigger;
            match trigger {
                Trigger::At { at_ms } if *at_ms > 0 => *at_ms /= 2,
                Trigger::After { plus_ms, .. } if *plus_ms > 0 => *plus_ms = 0,
                _ => break,
            }
            if fails_the_same(&candidate, seed, &target, &mut runs) {
                current = candidate;
            } else {
                break;
            }
        }
    }

    let last = runner::run(&current, seed);
    runs += 1;
    let mut shrunk = regressions::pin(&current, &last, &format!("`handoff shrink` of {}", spec.name));
    shrunk.name = format!("{}-seed-{seed}-{}-shrunk", spec.name, target.invariant.to_string().to_lowercase());
    shrunk.description = format!(
        "Shrunk by `handoff shrink` from seed {seed} of {}: the smallest schedule and workload found that still \
         show {target}.",
        spec.name
    );
    Ok(Shrunk { signature: target, before, after: size(&shrunk), spec: shrunk, seed, runs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_models::core::ids::TableId;
    use handoff_models::core::protocol::Isolation;
    use handoff_models::scenario::spec::{ScriptStep, StepKind};

    fn on(session: &str, kind: StepKind, database: Option<&str>) -> ScriptedTxn {
        let ops = match kind {
            StepKind::Statement => vec![RowOp::Delete { table: TableId(0), key: 1 }],
            _ => Vec::new(),
        };
        ScriptedTxn {
            trigger: Trigger::At { at_ms: 0 },
            ops,
            label: String::new(),
            step: ScriptStep { kind, session: Some(session.into()), database: database.map(Into::into), idle_ms: 0 },
        }
    }

    #[test]
    fn dropping_a_begin_drops_its_statements_and_commit_and_the_database_moves_to_the_first_step_left() {
        let begin = || StepKind::Begin { isolation: Isolation::ReadCommitted };
        // The first BEGIN (with the database) was dropped by the shrinker.
        let left = vec![
            on("s", StepKind::Statement, None),
            on("s", StepKind::Commit, None),
            on("s", begin(), None),
            on("s", StepKind::Statement, None),
            on("s", begin(), None),
            on("s", StepKind::Commit, None),
        ];
        let kept =
            coherent_sessions(std::iter::once(on("s", StepKind::Rollback, Some("analytics"))).chain(left).collect());
        let kinds: Vec<&StepKind> = kept.iter().map(|step| &step.step.kind).collect();
        assert_eq!(kinds, [&begin(), &StepKind::Statement, &StepKind::Commit]);
        assert_eq!(kept[0].step.database.as_deref(), Some("analytics"));
        assert!(kept[1..].iter().all(|step| step.step.database.is_none()));
    }
}
