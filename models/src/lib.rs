//! # handoff-models
//!
//! Sans-IO models of a change-data-capture pipeline — PostgreSQL (WAL, MVCC, logical slots,
//! standby), the Debezium PostgreSQL connector, Kafka Connect, Kafka, and a search-index sink —
//! plus the oracle and the checkers that decide whether the connector's snapshot and its change
//! stream formed **one history**.
//!
//! Every model is a [`component::Component`]: a deterministic state machine driven by messages,
//! timers and lost connections, answering with messages, timer requests and
//! [`observe::Observation`]s. Nothing here reads a clock or draws a random number; the lenses do
//! that. The `handoff-sim` crate runs the models as madsim nodes with real timeouts; [`check`]
//! composes them into one `stateright::Model` and explores every interleaving within a bound.
//!
//! The life of one change, by module: a client commits ([`postgres`]), the walsender decodes it
//! ([`postgres::slot`]), the connector turns it into a record ([`debezium`]), Connect polls,
//! produces and flushes offsets ([`connect`]), Kafka appends it ([`kafka`]), the sink applies it
//! ([`sink`]), and the checkers compare the sink with the committed history ([`oracle`],
//! [`checkers`]).

pub mod app;
pub mod check;
pub mod checkers;
pub mod component;
pub mod connect;
pub mod debezium;
pub mod event;
pub mod ids;
pub mod kafka;
pub mod loader;
pub mod lsn;
pub mod narrate;
pub mod observe;
pub mod operator;
pub mod oracle;
pub mod postgres;
pub mod protocol;
pub mod record;
pub mod setup;
pub mod sink;
pub mod spec;
pub mod time;
pub mod workload;
pub mod world;
