//! The core layer: the names every model shares and the sans-IO contract.
//!
//! Everything else builds on this layer and nothing here imports from the layers above it:
//! a component ([`crate::components`]) may use only these modules (`models/tests/layers.rs`
//! keeps it so).

pub mod change;
pub mod component;
pub mod event;
pub mod fault;
pub mod ids;
pub mod keymap;
pub mod limits;
pub mod lsn;
pub mod observe;
pub mod protocol;
pub mod shared;
pub mod signal;
pub mod time;
pub mod units;
pub mod wal;
