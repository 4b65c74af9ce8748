//! # handoff-sim
//!
//! The timed lens of `handoff`: scenario files, the madsim simulation that runs the models of
//! `handoff-models` as nodes with real timeouts and seeded faults, and the reports.

//! The simulation needs madsim's simulated runtime, which exists only when the crate is built
//! with `--cfg madsim` (set for the workspace in `.cargo/config.toml`). Without it, only the
//! scenario loader is built, and the `handoff` binary says what is missing.

pub mod budget;
pub mod check;
pub mod conform;
pub mod dfs;
#[cfg(madsim)]
pub mod explore;
#[cfg(madsim)]
pub mod net;
#[cfg(madsim)]
pub mod node;
#[cfg(madsim)]
pub mod regressions;
#[cfg(madsim)]
pub mod report;
#[cfg(madsim)]
pub mod runner;
pub mod scenario;
#[cfg(madsim)]
pub mod shrink;
pub mod verdict;
#[cfg(madsim)]
pub mod workers;
