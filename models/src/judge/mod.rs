//! The judge: what decides whether a run formed one history. The acceptance check (has the
//! pipeline caught up), the oracle (the committed history), the checkers of the invariants, coverage marks, the handoff record, the narrator and the
//! verdict on a prediction. It reads observations ([`crate::core::observe`]) and the scenario.

pub mod acceptance;
pub mod checkers;
pub mod coverage;
pub mod narrate;
pub mod oracle;
pub mod record;
pub mod verdict;
