//! `handoff conform`: run a workload of server steps on the simulation's PostgreSQL component
//! and, given a server, on the server too, and compare them step by step.
//!
//! The parts: the workload file ([`workload`]), the model's side ([`model`]: the `Postgres`
//! component the simulation runs, driven through its messages), the real side ([`real`], over
//! the wire protocol client [`pgwire`], against a server of the user's or a throwaway one from
//! [`pgserver`]), and what both sides observe and how they compare ([`observe`]).
//!
//! After each step both sides report `pg_replication_slots` and the step's outcome; the
//! comparison is on what does not depend on exact byte positions (see
//! [`observe`]). A run's result is the number of disagreements; the
//! command exits 1 when there is any.

pub mod model;
pub mod observe;
pub mod pgserver;
pub mod pgwire;
pub mod real;
pub mod workload;

use handoff_models::core::lsn::Lsn;
use model::ModelSide;
use observe::{FACTS_HEADER, Landmarks, Outcome, ServerView, SlotFacts};
use pgwire::Target;
use real::{RealServer, RestartWith};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use workload::{Compared, Workload};

/// One side's result of a step.
#[derive(Clone, Debug, Serialize)]
pub struct Side {
    pub outcome: Outcome,
    pub view: ServerView,
    /// Per slot of the workload, in the workload's order.
    pub facts: BTreeMap<String, SlotFacts>,
}

#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    /// 1-based, as in error messages about the workload.
    pub number: usize,
    pub step: String,
    pub model: Side,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<Side>,
    /// `slot.field` or `delivered` / `error` / `ended_by_server`.
    pub disagreements: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub workload: String,
    pub description: String,
    /// The server compared with, without its password.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub against: Option<String>,
    /// Where the model's WAL began (the server's insert position after preparation).
    pub start_lsn: Lsn,
    pub slots: Vec<String>,
    pub steps: Vec<StepReport>,
    pub disagreements: usize,
}

/// The server to compare with.
pub struct Against {
    pub target: Target,
    pub restart: Option<RestartWith>,
}

/// What one side shows of the workload's slots after a step, positions and xids placed by the
/// side's own `landmarks`.
struct Facts<'a> {
    slots: &'a [String],
    segment_size: u64,
    compared: &'a [Compared],
}

impl Facts<'_> {
    fn of(
        &self,
        view: &ServerView,
        previous: Option<&ServerView>,
        landmarks: &Landmarks,
    ) -> BTreeMap<String, SlotFacts> {
        self.slots
            .iter()
            .map(|slot| {
                let facts = SlotFacts::derive(slot, view, previous, self.segment_size);
                (slot.clone(), facts.locate(slot, view, landmarks, self.compared))
            })
            .collect()
    }
}

/// Runs `workload` on the model, and on the server when one is given.
pub fn run(workload: &Workload, against: Option<Against>) -> Result<Report, String> {
    let segment_size = workload.server.wal_segment_size_bytes;
    let slots = workload.slots();
    let (mut real, start, against_name) = match against {
        Some(Against { target, restart }) => {
            let name = target.to_string();
            let (real, start) = RealServer::prepare(target, restart, workload)?;
            (Some(real), start, Some(name))
        }
        None => (None, Lsn(segment_size + 40), None),
    };
    let mut model = ModelSide::new(workload, start);
    let mut previous_model = model.view();
    let mut previous_real = match real.as_mut() {
        Some(real) => Some(real.view()?),
        None => None,
    };
    let facts = Facts { slots: &slots, segment_size, compared: &workload.compare };
    let (mut model_landmarks, mut real_landmarks) = (Landmarks::default(), Landmarks::default());
    let mut steps = Vec::new();
    let result = (|| -> Result<(), String> {
        for (index, step) in workload.steps.iter().enumerate() {
            let model_outcome = model.apply(step);
            let model_view = model.view();
            model_landmarks.steps.push((index + 1, previous_model.insert_lsn, model_view.insert_lsn));
            model_landmarks.xids = model.xids();
            let model_side = Side {
                facts: facts.of(&model_view, Some(&previous_model), &model_landmarks),
                outcome: model_outcome,
                view: model_view.clone(),
            };
            previous_model = model_view;
            let server_side = match real.as_mut() {
                Some(real) => {
                    let outcome = real.apply(step).map_err(|e| format!("step {} ({step}): {e}", index + 1))?;
                    let view = real.view()?;
                    let before = previous_real.as_ref().map_or(view.insert_lsn, |previous| previous.insert_lsn);
                    real_landmarks.steps.push((index + 1, before, view.insert_lsn));
                    real_landmarks.xids = real.xids();
                    let side = Side {
                        facts: facts.of(&view, previous_real.as_ref(), &real_landmarks),
                        outcome,
                        view: view.clone(),
                    };
                    previous_real = Some(view);
                    Some(side)
                }
                None => None,
            };
            let disagreements = server_side.as_ref().map_or_else(Vec::new, |server| compare(&model_side, server));
            steps.push(StepReport {
                number: index + 1,
                step: step.to_string(),
                model: model_side,
                server: server_side,
                disagreements,
            });
        }
        Ok(())
    })();
    if let Some(real) = real {
        let finished = real.finish();
        result?;
        finished?;
    } else {
        result?;
    }
    let disagreements = steps.iter().map(|step| step.disagreements.len()).sum();
    Ok(Report {
        workload: workload.name.clone(),
        description: workload.description.clone(),
        against: against_name,
        start_lsn: start,
        slots,
        steps,
        disagreements,
    })
}

fn compare(model: &Side, server: &Side) -> Vec<String> {
    let mut differences = Vec::new();
    for (slot, facts) in &model.facts {
        if let Some(other) = server.facts.get(slot) {
            differences.extend(facts.differences(other).into_iter().map(|field| format!("{slot}.{field}")));
        }
    }
    if model.outcome.delivered != server.outcome.delivered {
        differences.push("delivered".to_string());
    }
    if model.outcome.error != server.outcome.error {
        differences.push("error".to_string());
    }
    if model.outcome.ended_by_server != server.outcome.ended_by_server {
        differences.push("ended_by_server".to_string());
    }
    if model.outcome.rows != server.outcome.rows {
        differences.push("rows".to_string());
    }
    if model.outcome.snapshot != server.outcome.snapshot {
        differences.push("snapshot".to_string());
    }
    if model.outcome.creations != server.outcome.creations {
        differences.push("creations".to_string());
    }
    differences
}

fn outcome_text(outcome: &Outcome) -> String {
    let mut parts = Vec::new();
    if let Some(delivered) = &outcome.delivered {
        parts.push(format!("delivered [{}]", delivered.join(", ")));
    }
    if let Some(ended) = outcome.ended_by_server {
        parts.push(if ended { "ended by the server".to_string() } else { "stopped by the consumer".to_string() });
    }
    if let Some(error) = &outcome.error {
        parts.push(format!("error: {error}"));
    }
    if let Some(rows) = &outcome.rows {
        let ids: Vec<String> = rows.iter().map(i64::to_string).collect();
        parts.push(format!("rows [{}]", ids.join(", ")));
    }
    if let Some(snapshot) = &outcome.snapshot {
        parts.push(format!("snapshot {snapshot}"));
    }
    if let Some(creations) = &outcome.creations {
        parts.push(format!("creating [{}]", creations.join(", ")));
    }
    parts.join("; ")
}

/// The side-by-side text report.
pub fn render_text(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "workload {}", report.workload);
    if !report.description.is_empty() {
        let _ = writeln!(out, "  {}", report.description);
    }
    match &report.against {
        Some(against) => {
            let _ = writeln!(out, "against {against} (model WAL from {})", report.start_lsn);
        }
        None => {
            let _ = writeln!(out, "model only (give --against postgres://… to compare with a server)");
        }
    }
    let side_width = if report.against.is_some() { 7 } else { 0 };
    for step in &report.steps {
        let _ = writeln!(out);
        let _ = writeln!(out, "{:>3}. {}", step.number, step.step);
        if !report.slots.is_empty() {
            let _ = writeln!(out, "     {:<12} {:<side_width$} {FACTS_HEADER}", "slot", "");
        }
        let sides: Vec<(&str, &Side)> = match &step.server {
            Some(server) => vec![("model", &step.model), ("server", server)],
            None => vec![("", &step.model)],
        };
        for slot in &report.slots {
            for (index, (name, side)) in sides.iter().enumerate() {
                let label = if index == 0 { slot.as_str() } else { "" };
                let _ = writeln!(out, "     {label:<12} {name:<side_width$} {}", side.facts[slot]);
            }
        }
        for (name, side) in &sides {
            let text = outcome_text(&side.outcome);
            if !text.is_empty() {
                let _ = writeln!(out, "     {:<12} {name:<side_width$} {text}", "");
            }
        }
        if !step.disagreements.is_empty() {
            let _ = writeln!(out, "     DISAGREE: {}", step.disagreements.join(", "));
        }
    }
    let _ = writeln!(out);
    if report.against.is_some() {
        let _ = writeln!(out, "disagreements: {} in {} steps", report.disagreements, report.steps.len());
    } else {
        let _ = writeln!(out, "{} steps on the model", report.steps.len());
    }
    out
}
