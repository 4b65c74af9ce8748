//! # handoff-models
//!
//! Sans-IO models of a change-data-capture pipeline — PostgreSQL (WAL, MVCC, logical slots,
//! standby), the Debezium PostgreSQL connector, Kafka Connect, Kafka, and a search-index sink —
//! plus the oracle and the checkers that decide whether the connector's snapshot and its change
//! stream formed **one history**.
//!
//! Every model is a [`core::component::Component`]: a deterministic state machine driven by
//! messages, timers and lost connections, answering with messages, timer requests and
//! [`core::observe::Observation`]s. Nothing here reads a clock or draws a random number; the
//! lenses do that. The `handoff-sim` crate runs the models as madsim nodes with real timeouts;
//! [`exhaustive::check`] composes them into one `stateright::Model` and explores every
//! interleaving within a bound.
//!
//! The crate is five layers, each a folder, each using only those before it
//! (`models/tests/layers.rs` keeps it so): [`core`] (the names every model shares and the sans-IO
//! contract), [`components`] (one modelled process each), [`scenario`] (what a run is made of,
//! and the one list of its processes), [`judge`] (the oracle, the checkers, coverage, the handoff
//! record, the narrator) and [`exhaustive`] (the stateright lens).
//!
//! The life of one change, by module: a client ([`components::app`]) commits it on the server
//! ([`components::postgres`]), whose walsender decodes it from the slot's position (where a slot
//! starts emitting and how its positions move: [`components::postgres::slot`]); the connector
//! turns it into a record ([`components::connect::debezium`]), Connect polls, produces and flushes
//! offsets ([`components::connect`]), Kafka appends it ([`components::kafka`]), the sink applies
//! it ([`components::sink`]), and the checkers compare the sink with the committed history
//! ([`judge::oracle`], [`judge::checkers`]).
//!
//! An exhaustive check in a few lines: two claims, an update and a delete that may run at any
//! point, one crash of the Connect worker. A naive sink (last write wins, deletes forget) ends up
//! with a deleted claim, and the shortest way there is the restart-during-snapshot mechanism of
//! Debezium's restart of an incomplete snapshot (`RelationalSnapshotChangeEventSource.doExecute`
//! redoes it from scratch, at a later position, and cannot retract a row deleted in between):
//!
//! ```
//! use handoff_models::exhaustive::check::HandoffModel;
//! use handoff_models::core::component::{TaskTimer, Timer};
//! use handoff_models::core::ids::Node;
//! use handoff_models::components::sink::ApplyRule;
//! use handoff_models::scenario::spec::claims_minimal;
//! use handoff_models::exhaustive::world::{Action, Bounds};
//! use stateright::{Checker, HasDiscoveries, Model};
//!
//! let bounds = Bounds {
//!     crashable: vec![Node::Connect],
//!     crashes: 1,
//!     pausable: Vec::new(),
//!     pauses: 0,
//!     periodic_fires: 1,
//!     disabled_timers: vec![Timer::Checkpoint, Timer::SinkCommit, Timer::first_task(TaskTimer::OffsetFlushTimeout)],
//!     operations: Vec::new(),
//!     operate_while: Default::default(),
//!     crash_while: Default::default(),
//!     script_while: Default::default(),
//!     commit_visibility: Default::default(),
//!     bgwriter_running_xacts: false,
//!     reductions: true,
//! };
//! let model = HandoffModel::new(claims_minimal(2, ApplyRule::NaiveUpsert), bounds);
//! let checker = model.checker().finish_when(HasDiscoveries::AnyFailures).spawn_bfs().join();
//! let path = checker.discovery("I2 no resurrection").expect("a resurrection");
//! let actions = path.into_actions();
//! assert!(actions.contains(&Action::Crash { node: Node::Connect }));
//! assert!(actions.contains(&Action::RunScripted { index: 1 })); // delete claim 2
//! assert!(checker.discovery("I5 ack <= durable").is_none());
//! ```

pub mod components;
pub mod core;
pub mod exhaustive;
pub mod judge;
pub mod scenario;
