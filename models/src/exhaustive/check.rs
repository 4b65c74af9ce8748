//! The exhaustive lens: the [`World`] as a `stateright::Model`.
//!
//! Every interleaving of message deliveries, timer firings, scripted transactions and crashes
//! within the bounds is explored; `always` properties are the checked invariants, `sometimes`
//! properties show that the bound reaches the situations it is about (a bound that never
//! reaches a restart during a snapshot proves nothing about one).

use crate::exhaustive::world::{Action, Bounds, World};
use crate::judge::narrate::{self, Names};
use crate::scenario::spec::{Invariant, Spec};
use stateright::{Model, Property};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A scenario's world under bounds.
#[derive(Clone, Debug)]
pub struct HandoffModel {
    pub spec: Spec,
    pub bounds: Bounds,
    /// Once raised, no state offers a step: how a command stops stateright's checkers, which
    /// take no stop signal of their own, when it reaches one of its limits (`handoff check`'s
    /// memory budget). `None` for a model that is never stopped.
    pub halt: Option<Arc<AtomicBool>>,
}

impl HandoffModel {
    pub fn new(spec: Spec, bounds: Bounds) -> HandoffModel {
        HandoffModel { spec, bounds, halt: None }
    }

    /// The same model, stopped when `halt` is raised.
    pub fn halted_by(self, halt: Arc<AtomicBool>) -> HandoffModel {
        HandoffModel { halt: Some(halt), ..self }
    }
}

/// The `sometimes` properties: situations a bound should reach, or it proves nothing about them.
pub const SOMETIMES: [&str; 2] = [RESTARTED_DURING_SNAPSHOT, ACCEPTANCE_REACHED];
const RESTARTED_DURING_SNAPSHOT: &str = "a crash hits an incomplete snapshot";
const ACCEPTANCE_REACHED: &str = "the acceptance boundary is reached";
/// The `sometimes` property that is not a goal of the bound but an outcome the prediction
/// judges: some path ends with the pipeline stopped short of its boundary, saying why (the
/// connector's task FAILED, the connector STOPPED, the sink's consumer FAILED) — what a timed run
/// calls failing closed. `holds` forbids it, `fails-closed` requires it, `violated` allows it
/// ([`crate::judge::verdict::judge`]).
pub const FAILS_CLOSED: &str = "the pipeline fails closed";

fn holds(state: &World, invariant: Invariant) -> bool {
    !state.violates(invariant)
}

impl Model for HandoffModel {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        vec![World::new(&self.spec, &self.bounds)]
    }

    fn actions(&self, state: &World, actions: &mut Vec<Action>) {
        if self.halt.as_ref().is_some_and(|halt| halt.load(Ordering::Relaxed)) {
            return;
        }
        state.actions(&self.bounds, actions);
    }

    fn next_state(&self, state: &World, action: Action) -> Option<World> {
        let mut next = state.clone();
        next.step(&action);
        Some(next)
    }

    fn format_action(&self, action: &Action) -> String {
        action.to_string()
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always("I1 no gap", |_, s| holds(s, Invariant::I1)),
            Property::always("I2 no resurrection", |_, s| holds(s, Invariant::I2)),
            Property::always("I3 monotonic apply", |_, s| holds(s, Invariant::I3)),
            Property::always("I4 one history", |_, s| holds(s, Invariant::I4)),
            Property::always("I5 ack <= durable", |_, s| holds(s, Invariant::I5)),
            Property::always("I6 fail closed", |_, s| holds(s, Invariant::I6)),
        ];
        // The outbox's invariants, in a bound with outbox events (routed outbox tables, message
        // outboxes) and, for I10, their consumer.
        if !self.spec.event_outboxes().is_empty() {
            properties.push(Property::always("I9 outbox complete", |_, s| holds(s, Invariant::I9)));
            if self.spec.consumer.is_some() {
                properties.push(Property::always("I10 duplicates absorbed", |_, s| holds(s, Invariant::I10)));
            }
        }
        properties.extend([
            Property::sometimes(RESTARTED_DURING_SNAPSHOT, |_, s: &World| s.restarted_during_snapshot),
            Property::sometimes(ACCEPTANCE_REACHED, |_, s: &World| s.at_acceptance_boundary()),
            Property::sometimes(FAILS_CLOSED, |_, s: &World| s.stopped_short()),
        ]);
        properties
    }
}

/// A path through the bound, step by step, as the simulation's narrator tells it.
pub fn narrate_path(model: &HandoffModel, actions: &[Action]) -> String {
    let names = Names::of(&model.spec);
    let mut out = String::new();
    for (action, events) in World::replay(&model.spec, &model.bounds, actions) {
        out.push_str(&format!("> {action}\n"));
        for event in events {
            if let Some(text) = narrate::narrate(&event.observation, &names) {
                out.push_str(&format!("    {:<9} {text}\n", event.node.name()));
            }
        }
    }
    out
}
