//! # handoff-sim
//!
//! The timed lens of `handoff`: scenario files, the madsim simulation that runs the models of
//! `handoff-models` as nodes with real timeouts and seeded faults, and the reports.

pub mod node;
pub mod report;
pub mod runner;
pub mod scenario;
