//! The limits of a run: how long it may last in simulated time, and how much it may hold.
//!
//! A run holds its whole history in memory: PostgreSQL's tables and WAL, Kafka's logs, the
//! sink's documents, the oracle's history and, for `handoff run`, the trace. Each limit below is
//! chosen so that the largest run a scenario can ask for stays within about 2 GB, so that a sweep
//! runs several seeds side by side on a 24 GB machine; docs/scenario-format.md ("Limits") gives
//! the table and the measurements behind it.
//!
//! The loader refuses a scenario that asks for more, naming the field and the bound. What a run
//! does cannot all be foreseen from its file (a fault replays records, a rebuild snapshots the
//! tables again), so two limits also hold while it runs: its horizon (simulated time) and its
//! trace budget ([`trace_items`](crate::core::observe::Observation::trace_items)). A run that reaches
//! either ends there and says so; it never passes one silently.

/// The horizon when `[acceptance] horizon_ms` is not given: one hour of simulated time. The
/// bundled scenarios end within 15 minutes; a slot-cap drill runs about 12.
pub const DEFAULT_HORIZON_MS: u64 = 3_600_000;

/// The shortest horizon a scenario may give.
pub const MIN_HORIZON_MS: u64 = 1_000;

/// The longest horizon: one day of simulated time (an idle pipeline simulates a day in about a
/// fifth of a second; Debezium's 900 slot-read retries, 2 s apart, take half an hour).
pub const MAX_HORIZON_MS: u64 = 86_400_000;

/// The longest a timer setting (`poll.interval.ms`, `offset.flush.interval.ms`, …) may be: a
/// timer longer than the longest horizon never fires, and every time then stays far from the
/// integers' range (microseconds included).
pub const MAX_SETTING_MS: u64 = MAX_HORIZON_MS;

/// Rows loaded before the run, all tables together.
pub const MAX_ROWS: u64 = 1_000_000;

/// Connectors one Connect worker runs (`[[connector]]` entries): each has its task, slot,
/// publication and offsets. Four is more than the drills need (a main connector and an outbox
/// connector); the exhaustive lens gives each its own task timers.
pub const MAX_CONNECTORS: usize = 4;

/// Tables of a scenario (each has up to 64 partitions in Kafka).
pub const MAX_TABLES: usize = 1_000;

/// Transactions the application runs: the background workload's (rate × window) and the
/// scripted ones together.
pub const MAX_TRANSACTIONS: u64 = 1_000_000;

/// Heartbeat records over the horizon (`horizon / heartbeat.interval.ms`).
pub const MAX_HEARTBEATS: u64 = 1_000_000;

/// The trace budget, in trace items: one per event, plus one per Kafka record, row change, sink
/// apply, removed document or position the event carries
/// ([`Observation::trace_items`](crate::core::observe::Observation::trace_items)). Everything a run
/// holds came through its trace, so its memory grows with this count: 250 to 470 bytes of peak
/// memory per item were measured, so a run stays within about 2 GB.
pub const MAX_TRACE_ITEMS: u64 = 4_000_000;

/// A conformance transaction's changes (`inserts + updates + deletes`).
pub const MAX_CONFORM_TRANSACTION_CHANGES: u64 = 100_000;

/// A conformance workload's changes, all transactions together.
pub const MAX_CONFORM_WORKLOAD_CHANGES: u64 = 1_000_000;
