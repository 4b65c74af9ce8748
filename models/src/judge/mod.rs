//! The judge: what decides whether a run formed one history. The acceptance check (has the
//! pipeline caught up), the oracle (the committed history), the checkers of the invariants, coverage marks, the handoff record, the narrator, the
//! verdict on a prediction, and the health signals an operator reads. It reads observations ([`crate::core::observe`]) and the scenario.

pub mod acceptance;
pub mod checkers;
pub mod coverage;
pub mod health;
pub mod narrate;
pub mod oracle;
pub mod record;
pub mod verdict;
