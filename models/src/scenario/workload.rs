//! The run's data, generated from its seed with ChaCha8: the rows loaded before the run and the
//! application's transactions. Same spec and seed, same workload, on every machine.
//!
//! Background transactions change one row each: inserts of new claims (keys after the loaded
//! ones, in time order), status updates and deletes of claims the generator believes live at that
//! time. A scripted transaction may delete a claim the background later updates; that update then
//! changes nothing, as `UPDATE … WHERE id = …` would.

use crate::components::app::{Workload, WorkloadTxn};
use crate::core::change::RowOp;
use crate::core::ids::{Key, Row, Status, TableId};
use crate::scenario::spec::Spec;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};

/// A seeded random source with the few draws the generators need.
pub struct Draw(ChaCha8Rng);

impl Draw {
    /// A stream for one purpose: the same seed gives independent streams per `stream`.
    pub fn new(seed: u64, stream: u64) -> Draw {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        Draw(rng)
    }

    /// Uniform in `0..n` (n > 0), without modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let value = self.0.next_u64();
            if value < zone {
                return value % n;
            }
        }
    }

    /// Uniform in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high - low + 1)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Random streams, one per purpose.
pub mod stream {
    pub const INITIAL_ROWS: u64 = 1;
    pub const BACKGROUND: u64 = 2;
    pub const SAMPLE: u64 = 3;
    pub const FAULTS: u64 = 4;
    /// The network's latencies (the timed lens).
    pub const NETWORK: u64 = 5;
}

/// The rows loaded before the run.
pub fn initial_rows(spec: &Spec, seed: u64) -> Vec<(TableId, Key, Row)> {
    let mut draw = Draw::new(seed, stream::INITIAL_ROWS);
    let mut rows = Vec::new();
    for table in &spec.tables {
        for key in spec.initial_keys(table.id) {
            let amount_cents = draw.between(10_000, 5_000_000) as u32;
            rows.push((table.id, key, Row { version: 1, status: Status::Submitted, amount_cents }));
        }
    }
    rows
}

/// The application's transactions.
pub fn workload(spec: &Spec, seed: u64) -> Workload {
    let scripted = spec.scripted.iter().map(|txn| WorkloadTxn { at_ms: None, ops: txn.ops.clone() }).collect();
    let mut timed = Vec::new();
    if let Some(background) = spec.background
        && let Some(table) = spec.tables.first()
    {
        let mut draw = Draw::new(seed, stream::BACKGROUND);
        let span = background.end_ms.saturating_sub(background.start_ms);
        let mut events: Vec<(u64, u8)> = Vec::new();
        for (kind, count) in (0u8..).zip(background.transaction_counts()) {
            for _ in 0..count {
                events.push((background.start_ms + draw.below(span.max(1)), kind));
            }
        }
        events.sort_unstable();
        // Live keys in a vector: a draw is an index, a delete a swap-remove.
        let mut live: Vec<Key> = spec.initial_keys(table.id).collect();
        let mut next_key = Key::from(table.rows) + 1;
        for (at_ms, kind) in events {
            let op = match kind {
                0 => {
                    let key = next_key;
                    next_key += 1;
                    live.push(key);
                    let amount_cents = draw.between(10_000, 5_000_000) as u32;
                    RowOp::Insert { table: table.id, key, status: Status::Submitted, amount_cents }
                }
                _ if live.is_empty() => continue,
                1 => {
                    let key = live[draw.below(live.len() as u64) as usize];
                    let status =
                        [Status::Assessed, Status::Approved, Status::Paid, Status::Closed][draw.below(4) as usize];
                    RowOp::Update { table: table.id, key, status }
                }
                _ => {
                    let key = live.swap_remove(draw.below(live.len() as u64) as usize);
                    RowOp::Delete { table: table.id, key }
                }
            };
            timed.push(WorkloadTxn { at_ms: Some(at_ms), ops: vec![op] });
        }
    }
    Workload { timed, scripted }
}
