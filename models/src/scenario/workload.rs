//! The run's data, generated from its seed with ChaCha8: the rows loaded before the run and the
//! application's transactions. Same spec and seed, same workload, on every machine.
//!
//! Background transactions change one row each (unless `transaction_size` groups rows into
//! transactions, see [`transactions`]): inserts of new claims (keys after the loaded ones, in
//! time order), status updates and deletes of claims the generator believes live at that time. A scripted transaction may delete a claim the background later updates; that update then
//! changes nothing, as `UPDATE … WHERE id = …` would.

use crate::components::app::{SessionSteps, StepKind, StepRef, Workload, WorkloadTxn};
use crate::core::change::RowOp;
use crate::core::ids::{Key, MessageEvent, Row, Status, TableId};
use crate::core::protocol::Isolation;
use crate::scenario::spec::{Background, Spec, TableSetup};
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{Rng, SeedableRng};
use std::collections::BTreeSet;

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
            rows.push((table.id, key, Row::new(1, Status::Submitted, amount_cents)));
        }
    }
    rows
}

/// The application's transactions.
pub fn workload(spec: &Spec, seed: u64) -> Workload {
    let mut sessions: Vec<SessionSteps> = Vec::new();
    let mut scripted = Vec::with_capacity(spec.scripted.len());
    for (index, txn) in spec.scripted.iter().enumerate() {
        let session = txn.step.session.as_ref().map(|name| {
            let place = sessions.iter().position(|session| session.name == *name).unwrap_or_else(|| {
                sessions.push(SessionSteps { name: name.clone(), steps: Vec::new() });
                sessions.len() - 1
            });
            sessions[place].steps.push(StepRef::Scripted(index as u32));
            place as u32
        });
        scripted.push(WorkloadTxn {
            at_ms: None,
            ops: txn.ops.clone(),
            kind: txn.step.kind.clone(),
            session,
            idle_ms: txn.step.idle_ms,
        });
    }
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
        if background.transaction_size <= 1 {
            one_row_transactions(spec, table, &mut draw, &events, &mut timed);
        } else {
            transactions(table, &background, &mut draw, &events, &mut timed, &mut sessions);
        }
    }
    Workload { timed, scripted, sessions }
}

/// Each row its own autocommit transaction (the generator as it has always been).
fn one_row_transactions(
    spec: &Spec,
    table: &TableSetup,
    draw: &mut Draw,
    events: &[(u64, u8)],
    timed: &mut Vec<WorkloadTxn>,
) {
    // Live keys in a vector: a draw is an index, a delete a swap-remove.
    let mut live: Vec<Key> = spec.initial_keys(table.id).collect();
    let mut next_key = Key::from(table.rows) + 1;
    // The background's outbox events are numbered after the scripted ones.
    let mut next_event = 1 + spec.scripted.iter().map(scripted_events).sum::<usize>() as Key;
    for &(at_ms, kind) in events {
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
                RowOp::Update { table: table.id, key, status: draw_status(draw) }
            }
            2 => {
                let key = live.swap_remove(draw.below(live.len() as u64) as usize);
                RowOp::Delete { table: table.id, key }
            }
            _ => {
                // The service's status change with its outbox event, in one transaction: an
                // outbox table's row, or a message outbox's message (the loader allows one
                // outbox with `events_per_second`).
                let key = live[draw.below(live.len() as u64) as usize];
                let status = draw_status(draw);
                let id = next_event;
                next_event += 1;
                let update = RowOp::Update { table: table.id, key, status };
                if let Some(outbox) = spec.tables.iter().find(|table| table.outbox.is_some()) {
                    let mut ops = vec![
                        update,
                        RowOp::InsertEvent { table: outbox.id, id, aggregate_id: key as u32, event_type: status },
                    ];
                    if outbox.outbox.as_ref().is_some_and(|outbox| outbox.delete) {
                        ops.push(RowOp::Delete { table: outbox.id, key: id });
                    }
                    timed.push(WorkloadTxn::autocommit(Some(at_ms), ops));
                } else if let Some(outbox) = spec.message_outboxes.first() {
                    let event = MessageEvent { outbox: 0, id, aggregate_id: key as u32, event_type: status };
                    let kind = outbox.step(event);
                    timed.push(WorkloadTxn { kind, ..WorkloadTxn::autocommit(Some(at_ms), vec![update]) });
                }
                continue;
            }
        };
        timed.push(WorkloadTxn::autocommit(Some(at_ms), vec![op]));
    }
}

/// How many outbox events a scripted step writes: an `event` step's outbox row, or its message.
pub fn scripted_events(txn: &crate::scenario::spec::ScriptedTxn) -> usize {
    let rows = txn.ops.iter().filter(|op| matches!(op, RowOp::InsertEvent { .. })).count();
    rows + usize::from(matches!(txn.step.kind, StepKind::OutboxMessage { .. }))
}

fn draw_status(draw: &mut Draw) -> Status {
    [Status::Assessed, Status::Approved, Status::Paid, Status::Closed][draw.below(4) as usize]
}

/// Transactions of `transaction_size` rows, `concurrency` of them open at once: the rows are
/// dealt in time order to the sessions `background-1`, `background-2`, … in turn; a session's
/// transaction begins with its first row's statement and commits right after its last. An
/// update or a delete draws among the committed live rows that no other open transaction has
/// locked (so that no statement waits on another session's row lock), an insert's row becomes
/// live for the others when its transaction commits.
fn transactions(
    table: &TableSetup,
    background: &Background,
    draw: &mut Draw,
    events: &[(u64, u8)],
    timed: &mut Vec<WorkloadTxn>,
    sessions: &mut Vec<SessionSteps>,
) {
    let size = background.transaction_size as usize;
    let concurrency = background.concurrency.max(1) as usize;
    let first = sessions.len();
    for number in 1..=concurrency {
        sessions.push(SessionSteps { name: format!("background-{number}"), steps: Vec::new() });
    }
    // Committed live keys; per session, the rows its open transaction holds and its inserts.
    let mut live: Vec<Key> = (1..=Key::from(table.rows)).collect();
    let mut locked: Vec<BTreeSet<Key>> = vec![BTreeSet::new(); concurrency];
    let mut inserted: Vec<Vec<Key>> = vec![Vec::new(); concurrency];
    let mut statements = vec![0usize; concurrency];
    let mut next_key = Key::from(table.rows) + 1;
    let mut push = |timed: &mut Vec<WorkloadTxn>, session: usize, at_ms: u64, kind: StepKind, ops: Vec<RowOp>| {
        sessions[first + session].steps.push(StepRef::Timed(timed.len() as u32));
        timed.push(WorkloadTxn { at_ms: Some(at_ms), ops, kind, session: Some((first + session) as u32), idle_ms: 0 });
    };
    let count = events.len();
    for (number, &(at_ms, kind)) in events.iter().enumerate() {
        let session = number % concurrency;
        let op = match kind {
            0 => {
                let key = next_key;
                next_key += 1;
                inserted[session].push(key);
                let amount_cents = draw.between(10_000, 5_000_000) as u32;
                Some(RowOp::Insert { table: table.id, key, status: Status::Submitted, amount_cents })
            }
            // Outbox events come one per autocommit transaction only (the loader refuses
            // `events_per_second` with `transaction_size` above 1).
            3 => None,
            _ => {
                // Draw again while the row is another open transaction's (they hold few rows).
                let held =
                    |key: &Key| locked.iter().enumerate().any(|(other, keys)| other != session && keys.contains(key));
                let free = (0..16).filter(|_| !live.is_empty()).find_map(|_| {
                    let place = draw.below(live.len() as u64) as usize;
                    (!held(&live[place])).then_some(place)
                });
                if let Some(place) = free {
                    let key = live[place];
                    locked[session].insert(key);
                    Some(if kind == 1 {
                        RowOp::Update { table: table.id, key, status: draw_status(draw) }
                    } else {
                        live.swap_remove(place);
                        RowOp::Delete { table: table.id, key }
                    })
                } else {
                    None
                }
            }
        };
        let Some(op) = op else { continue };
        if statements[session] == 0 {
            push(timed, session, at_ms, StepKind::Begin { isolation: Isolation::ReadCommitted }, Vec::new());
        }
        push(timed, session, at_ms, StepKind::Statement, vec![op]);
        statements[session] += 1;
        // The session's last row of the window commits too.
        let last = (number + concurrency..count).step_by(concurrency).next().is_none();
        if statements[session] == size || last {
            push(timed, session, at_ms, StepKind::Commit, Vec::new());
            statements[session] = 0;
            locked[session].clear();
            live.append(&mut inserted[session]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::sink::ApplyRule;
    use crate::scenario::spec::claims_minimal;
    use std::collections::BTreeMap;

    fn spec(transaction_size: u32, concurrency: u32) -> Spec {
        let mut spec = claims_minimal(50, ApplyRule::VersionGuard);
        spec.background = Some(Background {
            start_ms: 0,
            end_ms: 20_000,
            inserts_per_second: 2.0,
            updates_per_second: 3.0,
            deletes_per_second: 1.0,
            events_per_second: 0.0,
            transaction_size,
            concurrency,
        });
        spec
    }

    #[test]
    fn one_row_transactions_are_autocommit_steps_as_before() {
        let workload = workload(&spec(1, 1), 7);
        assert!(workload.sessions.is_empty());
        assert_eq!(workload.timed.len(), 120);
        assert!(
            workload
                .timed
                .iter()
                .all(|txn| txn.session.is_none() && txn.kind == StepKind::Statement && txn.ops.len() == 1)
        );
    }

    #[test]
    fn transactions_of_several_rows_interleave_and_no_row_is_held_by_two_open_transactions() {
        let workload = workload(&spec(3, 2), 7);
        assert_eq!(
            workload.sessions.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["background-1", "background-2"]
        );
        // Walk the steps in time order as the app runs them: per session, BEGIN, up to three
        // statements, COMMIT; the two sessions' open transactions overlap.
        let mut open: BTreeMap<u32, Vec<(TableId, Key)>> = BTreeMap::new();
        let mut statements = 0;
        let mut overlapped = false;
        let mut last_at = 0;
        for txn in &workload.timed {
            let session = txn.session.expect("a session's step");
            assert!(txn.at_ms.unwrap() >= last_at, "in time order");
            last_at = txn.at_ms.unwrap();
            match txn.kind {
                StepKind::Begin { .. } => {
                    assert!(open.insert(session, Vec::new()).is_none(), "BEGIN with a transaction open");
                    overlapped |= open.len() > 1;
                }
                StepKind::Statement => {
                    assert!(open.contains_key(&session), "a statement inside a transaction");
                    for op in &txn.ops {
                        let row = op.target();
                        for (other, held) in &open {
                            assert!(*other == session || !held.contains(&row), "{row:?} held by two open transactions");
                        }
                        open.get_mut(&session).unwrap().push(row);
                    }
                    assert!(open[&session].len() <= 3, "at most transaction_size rows");
                    statements += 1;
                }
                StepKind::Commit => {
                    assert!(!open.remove(&session).expect("a COMMIT of an open transaction").is_empty());
                }
                ref other => panic!("{other:?}"),
            }
        }
        assert!(open.is_empty(), "every transaction commits");
        assert!(overlapped, "the two sessions' transactions are open at once");
        assert!(statements >= 110, "{statements} rows of 120 (a draw may find every row held)");
        // Each session's step list is its timed steps in order.
        let listed: usize = workload.sessions.iter().map(|session| session.steps.len()).sum();
        assert_eq!(listed, workload.timed.len());
    }

    /// With a message outbox, the background's events are outbox messages: the claim's update
    /// as the step's statement, the event numbered after the scripted ones, its content's size
    /// the message's.
    #[test]
    fn background_events_go_through_a_message_outbox() {
        use crate::scenario::spec::{MessageOutbox, ScriptedTxn, Trigger};
        let mut spec = spec(1, 1);
        spec.background = Some(Background {
            inserts_per_second: 0.0,
            updates_per_second: 0.0,
            deletes_per_second: 0.0,
            events_per_second: 1.0,
            ..spec.background.expect("a background")
        });
        spec.message_outboxes =
            vec![MessageOutbox { prefix: "outbox".into(), aggregatetype: "claim".into(), transactional: false }];
        let scripted_event = MessageEvent { outbox: 0, id: 1, aggregate_id: 3, event_type: Status::Paid };
        spec.scripted = vec![ScriptedTxn {
            step: crate::scenario::spec::ScriptStep {
                kind: spec.message_outboxes[0].step(scripted_event),
                ..Default::default()
            },
            ..ScriptedTxn::autocommit(
                Trigger::At { at_ms: 0 },
                vec![RowOp::Update { table: TableId(0), key: 3, status: Status::Paid }],
                "",
            )
        }];
        let workload = workload(&spec, 7);
        assert_eq!(workload.timed.len(), 20);
        for (number, txn) in workload.timed.iter().enumerate() {
            let StepKind::OutboxMessage { transactional, prefix, payload_bytes, event } = &txn.kind else {
                panic!("{txn:?}")
            };
            assert!(!transactional && prefix == "outbox");
            assert_eq!(event.id, 2 + number as Key, "numbered after the scripted event");
            assert_eq!(*payload_bytes, event.content("claim").len() as u64);
            assert!(
                matches!(txn.ops.as_slice(), [RowOp::Update { key, status, .. }] if *key == Key::from(event.aggregate_id) && *status == event.event_type)
            );
        }
    }
}
