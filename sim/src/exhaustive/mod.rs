//! The exhaustive lens: `handoff check` on a scenario's `[check]` bound ([`check`]), the
//! depth-first explorer it runs by default ([`dfs`]), and the limits of one command ([`budget`]).

pub mod budget;
pub mod check;
pub mod dfs;
