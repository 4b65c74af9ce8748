//! Whether a prediction held: the one decision `handoff run`, `sweep`, `check` and `merge` all
//! make, here once.
//!
//! A [`Prediction`] names the invariants that **must** be violated (`findings`) and those that
//! **may** be (`allow`); every other checked invariant must hold. Its verdict also says how the
//! run ends: `holds` and `violated` expect the pipeline to reach its acceptance boundary caught
//! up (a `violated` design may also stop short: that is allowed), `fails-closed` expects it to stop
//! safely short of it — the connector FAILED or STOPPED, and nothing it delivered wrong.
//!
//! A lens observes the invariants violated (for a sweep: the union over its runs) and, where it
//! can tell, whether the pipeline failed closed (for a sweep: whether any run did; for a bound:
//! whether any path does). [`judge`] gives
//! each invariant involved one [`Outcome`], and failing closed one too, judged like an invariant:
//! required by `fails-closed`, allowed by `violated`, forbidden by `holds`. The prediction held
//! when no outcome is [`Outcome::PredictedButNeverSeen`] or [`Outcome::Unexpected`].
//!
//! What it does not decide: whether a run cut by a limit decides anything (it does not: the
//! lenses say UNDECIDED before they judge), and which invariants a lens can check at all (the
//! exhaustive lens leaves out those it has no property for).

use crate::scenario::spec::{Invariant, Prediction, Verdict};
use serde::{Deserialize, Serialize};

/// What became of one predicted, allowed or violated invariant (or of failing closed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Must be violated, and was.
    ViolatedAsPredicted,
    /// May be violated, and was.
    AllowedAndViolated,
    /// May be violated, and was not.
    AllowedNotViolated,
    /// Must be violated, and was not (in a sweep: by no run).
    PredictedButNeverSeen,
    /// Violated, and the prediction neither requires nor allows it.
    Unexpected,
}

impl Outcome {
    /// Whether this outcome agrees with the prediction.
    pub fn as_predicted(self) -> bool {
        !matches!(self, Outcome::PredictedButNeverSeen | Outcome::Unexpected)
    }

    /// Whether the invariant (or failing closed) was seen.
    pub fn seen(self) -> bool {
        matches!(self, Outcome::ViolatedAsPredicted | Outcome::AllowedAndViolated | Outcome::Unexpected)
    }

    /// How a report says it of an invariant: `violated, as predicted`, `PREDICTED BUT NEVER SEEN`.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::ViolatedAsPredicted => "violated, as predicted",
            Outcome::AllowedAndViolated => "allowed, and violated",
            Outcome::AllowedNotViolated => "allowed, not violated",
            Outcome::PredictedButNeverSeen => "PREDICTED BUT NEVER SEEN",
            Outcome::Unexpected => "UNEXPECTED: the prediction neither requires nor allows it",
        }
    }
}

/// One invariant's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judged {
    pub invariant: Invariant,
    pub outcome: Outcome,
}

/// A prediction set against what a lens observed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Judgement {
    /// Every invariant the prediction names or the lens saw violated, in invariant order.
    pub invariants: Vec<Judged>,
    /// Failing closed, judged like an invariant; `None` when there is nothing to say (neither
    /// predicted nor seen) or the lens cannot tell (a bound cut short before any path failed
    /// closed).
    pub failing_closed: Option<Outcome>,
}

impl Judgement {
    /// Whether the observations are what the prediction says.
    pub fn held(&self) -> bool {
        self.outcomes().all(Outcome::as_predicted)
    }

    fn outcomes(&self) -> impl Iterator<Item = Outcome> + '_ {
        self.invariants.iter().map(|judged| judged.outcome).chain(self.failing_closed)
    }

    /// The invariants with this outcome.
    pub fn with(&self, outcome: Outcome) -> impl Iterator<Item = Invariant> + '_ {
        self.invariants.iter().filter(move |judged| judged.outcome == outcome).map(|judged| judged.invariant)
    }

    /// The outcome of one invariant, if the judgement names it.
    pub fn of(&self, invariant: Invariant) -> Option<Outcome> {
        self.invariants.iter().find(|judged| judged.invariant == invariant).map(|judged| judged.outcome)
    }

    /// Whether anything was seen that the prediction does not cover (an unexpected invariant, or
    /// failing closed under `holds`): what makes one run of a sweep count as unexpected.
    pub fn has_unexpected(&self) -> bool {
        self.outcomes().any(|outcome| outcome == Outcome::Unexpected)
    }
}

/// Sets the prediction against the invariants violated (in any order, repeats allowed) and,
/// where the lens can tell, whether the pipeline failed closed.
pub fn judge(prediction: &Prediction, violated: &[Invariant], failed_closed: Option<bool>) -> Judgement {
    let mut invariants: Vec<Judged> = Vec::new();
    for invariant in Invariant::ALL {
        let seen = violated.contains(&invariant);
        let outcome = if prediction.findings.contains(&invariant) {
            Some(if seen { Outcome::ViolatedAsPredicted } else { Outcome::PredictedButNeverSeen })
        } else if prediction.allow.contains(&invariant) {
            Some(if seen { Outcome::AllowedAndViolated } else { Outcome::AllowedNotViolated })
        } else {
            seen.then_some(Outcome::Unexpected)
        };
        if let Some(outcome) = outcome {
            invariants.push(Judged { invariant, outcome });
        }
    }
    let failing_closed = match (prediction.verdict, failed_closed) {
        (_, None) | (Verdict::Holds | Verdict::Violated, Some(false)) => None,
        (Verdict::FailsClosed, Some(true)) => Some(Outcome::ViolatedAsPredicted),
        (Verdict::FailsClosed, Some(false)) => Some(Outcome::PredictedButNeverSeen),
        (Verdict::Violated, Some(true)) => Some(Outcome::AllowedAndViolated),
        (Verdict::Holds, Some(true)) if prediction.may_fail_closed => Some(Outcome::AllowedAndViolated),
        (Verdict::Holds, Some(true)) => Some(Outcome::Unexpected),
    };
    Judgement { invariants, failing_closed }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::spec::PredictionOrigin;
    use Invariant::*;

    fn prediction(verdict: Verdict, findings: &[Invariant], allow: &[Invariant]) -> Prediction {
        Prediction {
            verdict,
            findings: findings.to_vec(),
            allow: allow.to_vec(),
            may_fail_closed: false,
            why: String::new(),
            origin: PredictionOrigin::File,
        }
    }

    #[test]
    fn allowed_invariants_may_be_violated_or_not() {
        let predicted = prediction(Verdict::Violated, &[I6], &[I1, I2, I4]);
        // Only some of the allowed ones violated: held.
        let judged = judge(&predicted, &[I6, I2], Some(false));
        assert!(judged.held(), "{judged:?}");
        assert_eq!(
            judged.invariants.iter().map(|judged| (judged.invariant, judged.outcome)).collect::<Vec<_>>(),
            vec![
                (I1, Outcome::AllowedNotViolated),
                (I2, Outcome::AllowedAndViolated),
                (I4, Outcome::AllowedNotViolated),
                (I6, Outcome::ViolatedAsPredicted)
            ]
        );
        // None of them violated: held all the same.
        assert!(judge(&predicted, &[I6], None).held());
        // The required one missing: not held, whatever the allowed ones did.
        let judged = judge(&predicted, &[I1, I2, I4], None);
        assert!(!judged.held());
        assert_eq!(judged.with(Outcome::PredictedButNeverSeen).collect::<Vec<_>>(), vec![I6]);
        // One neither required nor allowed: not held.
        let judged = judge(&predicted, &[I6, I3, I3], None);
        assert_eq!(judged.of(I3), Some(Outcome::Unexpected));
        assert!(!judged.held() && judged.has_unexpected());
    }

    #[test]
    fn holds_allows_only_what_it_lists() {
        let predicted = prediction(Verdict::Holds, &[], &[I11]);
        assert!(judge(&predicted, &[], Some(false)).held());
        assert!(judge(&predicted, &[I11], Some(false)).held());
        assert!(!judge(&predicted, &[I2], Some(false)).held());
    }

    #[test]
    fn failing_closed_is_judged_like_an_invariant() {
        let holds = prediction(Verdict::Holds, &[], &[]);
        let judged = judge(&holds, &[], Some(true));
        assert_eq!(judged.failing_closed, Some(Outcome::Unexpected));
        assert!(!judged.held() && judged.has_unexpected());
        let fails_closed = prediction(Verdict::FailsClosed, &[], &[I11]);
        assert!(judge(&fails_closed, &[], Some(true)).held());
        let caught_up = judge(&fails_closed, &[], Some(false));
        assert_eq!(caught_up.failing_closed, Some(Outcome::PredictedButNeverSeen));
        assert!(!caught_up.held() && !caught_up.has_unexpected());
        assert!(!judge(&fails_closed, &[I2], Some(true)).held());
        // A violated design may stop short too.
        let violated = prediction(Verdict::Violated, &[I2], &[]);
        assert_eq!(judge(&violated, &[I2], Some(true)).failing_closed, Some(Outcome::AllowedAndViolated));
        assert!(judge(&violated, &[I2], Some(true)).held());
        // A design that holds may be allowed to stop short, and then a run that fails closed is fine.
        let may = Prediction { may_fail_closed: true, ..holds.clone() };
        assert_eq!(judge(&may, &[], Some(true)).failing_closed, Some(Outcome::AllowedAndViolated));
        assert!(judge(&may, &[], Some(true)).held() && judge(&may, &[], Some(false)).held());
        assert!(!judge(&may, &[I2], Some(true)).held(), "an invariant is still not allowed");
        // A lens that cannot tell says nothing about it.
        assert_eq!(judge(&fails_closed, &[], None).failing_closed, None);
        assert!(judge(&fails_closed, &[], None).held());
    }
}
