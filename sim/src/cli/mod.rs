//! The `handoff` binary's subcommand handlers that need the simulation: `timed` in a build with
//! madsim, `no_madsim` (each says what is missing) in one without. `main.rs` reads the
//! arguments, loads the scenario and hands it to `commands`.

#[cfg(not(madsim))]
pub mod no_madsim;
#[cfg(madsim)]
pub mod timed;

#[cfg(not(madsim))]
pub use no_madsim as commands;
#[cfg(madsim)]
pub use timed as commands;
