//! Transaction blocks, their WAL records and their decoding (issue 18 items 1 and 2), against
//! the PostgreSQL 15 observations they model (reference postgres-transactions.md §0.3 traces).

use super::*;
use crate::core::component::{Outbox, TimerRequest};
use crate::core::ids::Status;
use crate::core::protocol::{DecodedMessage, Isolation};
use crate::core::time::SimTime;

/// Table 0 `public.t` in the main database, table 1 `public.t` in `db2`.
const T: TableId = TableId(0);
const OTHER_DB: TableId = TableId(1);
/// The connector's replication session.
const STREAM: SessionId = 1;

struct Harness {
    pg: Postgres,
    now_ms: u64,
    /// Every message sent, with the step's observations.
    sent: Vec<(Node, Msg)>,
    observations: Vec<Observation>,
    commit_visible_armed: bool,
}

fn insert(table: TableId, key: Key) -> RowOp {
    RowOp::Insert { table, key, status: Status::Submitted, amount_cents: 100 }
}

fn update(table: TableId, key: Key, status: Status) -> RowOp {
    RowOp::Update { table, key, status }
}

impl Harness {
    fn new() -> Harness {
        Harness::with_idle_timeout(0)
    }

    /// A server with `idle_in_transaction_session_timeout` set (0: off).
    fn with_idle_timeout(idle_in_transaction_session_timeout_ms: u64) -> Harness {
        let section = PostgresSection { idle_in_transaction_session_timeout_ms, ..PostgresSection::minimal() };
        let table = |id: u16, database: Option<&str>| TableSpec {
            id: TableId(id),
            name: "public.t".into(),
            replica_identity: ReplicaIdentity::Full,
            database: database.map(str::to_string),
            composite_key: None,
            unique_column: None,
        };
        let run = ServerRun {
            bgwriter_running_xacts: false,
            walsender_keepalives: false,
            initial_wal_lsn: Lsn(0x16B_3748),
            tables: vec![table(0, None), table(1, Some("db2"))],
        };
        let config = PostgresConfig::new(&section, run);
        let mut pg = Postgres::new(Node::Pg1, Role::Primary, Fixed::new(config), &[]);
        let mut out = Outbox::default();
        pg.start(&mut Ctx::new(SimTime(0), Node::Pg1, &mut out));
        Harness { pg, now_ms: 1, sent: Vec::new(), observations: Vec::new(), commit_visible_armed: false }
    }

    fn absorb(&mut self, out: Outbox) {
        for timer in &out.timers {
            match *timer {
                TimerRequest::Set { timer: Timer::CommitVisible, .. } => self.commit_visible_armed = true,
                TimerRequest::Cancel { timer: Timer::CommitVisible } => self.commit_visible_armed = false,
                _ => {}
            }
        }
        self.sent.extend(out.sends);
        self.observations.extend(out.observations);
    }

    /// Delivers a message from `from` and returns the replies `from` got in this step.
    fn send(&mut self, from: Node, msg: Msg) -> Vec<Msg> {
        let mut out = Outbox::default();
        self.now_ms += 1;
        self.pg.on_message(&mut Ctx::new(SimTime(self.now_ms), Node::Pg1, &mut out), from, msg);
        let replies = out.sends.iter().filter(|(to, _)| *to == from).map(|(_, msg)| msg.clone()).collect();
        self.absorb(out);
        replies
    }

    /// A SQL request of `client`'s session `session`; its reply in this step, if any.
    fn sql(&mut self, client: Node, session: SessionId, request: SqlRequest) -> Option<SqlReply> {
        self.send(client, Msg::Sql { session, request }).into_iter().find_map(|msg| match msg {
            Msg::SqlReply { session: s, reply } if s == session => Some(reply),
            _ => None,
        })
    }

    /// The commit-visible timer fires (it is armed with no delay).
    fn commits_visible(&mut self) -> Vec<(Node, Msg)> {
        assert!(self.commit_visible_armed, "a commit is waiting to become visible");
        self.commit_visible_armed = false;
        let mut out = Outbox::default();
        self.now_ms += 1;
        self.pg.on_timer(&mut Ctx::new(SimTime(self.now_ms), Node::Pg1, &mut out), Timer::CommitVisible);
        let sends = out.sends.clone();
        self.absorb(out);
        sends
    }

    /// The WAL writer flushes (`wal_writer_delay` after the first unflushed record).
    fn wal_writer(&mut self) {
        let mut out = Outbox::default();
        self.now_ms += WAL_WRITER_DELAY_MS;
        self.pg.on_timer(&mut Ctx::new(SimTime(self.now_ms), Node::Pg1, &mut out), Timer::WalWriter);
        self.absorb(out);
    }

    /// `COMMIT`, then the commit becoming visible: the reply.
    fn commit(&mut self, client: Node, session: SessionId) -> SqlReply {
        if let Some(reply) = self.sql(client, session, SqlRequest::Commit) {
            return reply;
        }
        self.commits_visible()
            .into_iter()
            .find_map(|(to, msg)| match msg {
                Msg::SqlReply { session: s, reply } if to == client && s == session => Some(reply),
                _ => None,
            })
            .expect("COMMIT answered once visible")
    }

    fn begin(&mut self, client: Node, session: SessionId, isolation: Isolation) {
        assert_eq!(self.sql(client, session, SqlRequest::Begin { isolation }), Some(SqlReply::Ok));
    }

    fn statement(&mut self, client: Node, session: SessionId, ops: Vec<RowOp>) -> Option<SqlReply> {
        self.sql(client, session, SqlRequest::Statement { ops, copy: false })
    }

    fn changes_of(reply: Option<SqlReply>) -> Vec<Change> {
        match reply {
            Some(SqlReply::StatementDone { changes }) => changes,
            other => panic!("expected a statement's changes, got {other:?}"),
        }
    }

    fn create_slot_and_stream(&mut self, messages: bool) {
        self.send(
            Node::Connect,
            Msg::Repl {
                session: STREAM,
                request: ReplRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), failover: false },
            },
        );
        self.sql(Node::Connect, 100, SqlRequest::EnsurePublication { name: "p".into(), tables: None });
        self.send(
            Node::Connect,
            Msg::Repl {
                session: STREAM,
                request: ReplRequest::StartReplication {
                    slot: "s".into(),
                    start: Lsn::INVALID,
                    publication: "p".into(),
                    messages,
                },
            },
        );
    }

    /// What the walsender streamed so far: transactions and non-transactional messages.
    fn streamed(&self) -> Vec<ReplReply> {
        self.sent
            .iter()
            .filter_map(|(to, msg)| match msg {
                Msg::ReplReply { session: STREAM, reply: reply @ (ReplReply::XLogData(_) | ReplReply::Message(_)) }
                    if *to == Node::Connect =>
                {
                    Some(reply.clone())
                }
                _ => None,
            })
            .collect()
    }

    fn streamed_txns(&self) -> Vec<DecodedTxn> {
        self.streamed()
            .into_iter()
            .filter_map(|reply| match reply {
                ReplReply::XLogData(txn) => Some(txn),
                _ => None,
            })
            .collect()
    }

    /// The connector confirms everything written so far.
    fn confirm_all(&mut self) {
        let flush = self.pg.current_wal_lsn();
        self.send(Node::Connect, Msg::Repl { session: STREAM, request: ReplRequest::StatusUpdate { flush } });
    }

    fn checkpoint(&mut self) -> Lsn {
        self.send(Node::Operator, Msg::Control(Control::Checkpoint));
        self.pg
            .durable
            .wal
            .entries
            .iter()
            .rev()
            .find_map(|entry| match entry {
                WalEntry::RunningXacts { start, .. } => Some(*start),
                _ => None,
            })
            .expect("a checkpoint writes a running-xacts record")
    }

    fn slot(&self) -> &Slot {
        self.pg.slot("s").expect("the slot")
    }
}

/// Trace T1 / E3: A begins and inserts, B begins, inserts and commits, A inserts and commits.
/// The stream delivers B, then A, each whole, in commit order; A's first change is older than
/// B's commit, and A's second change starts exactly where B's commit record ends.
#[test]
fn interleaved_blocks_are_delivered_whole_in_commit_order() {
    let mut h = Harness::new();
    h.create_slot_and_stream(true);
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    let a1 = Harness::changes_of(h.statement(Node::App, 1, vec![insert(T, 100)]));
    h.begin(Node::App, 2, Isolation::ReadCommitted);
    let b1 = Harness::changes_of(h.statement(Node::App, 2, vec![insert(T, 101)]));
    let SqlReply::Committed { end_lsn: b_end, xid: b_xid, .. } = h.commit(Node::App, 2) else { panic!("B commits") };
    assert_eq!(h.streamed_txns().len(), 1, "B is delivered at its commit, A is still open");
    let a2 = Harness::changes_of(h.statement(Node::App, 1, vec![insert(T, 102)]));
    let SqlReply::Committed { xid: a_xid, commit_lsn: a_commit, .. } = h.commit(Node::App, 1) else {
        panic!("A commits")
    };

    let txns = h.streamed_txns();
    assert_eq!(txns.iter().map(|txn| txn.xid).collect::<Vec<_>>(), vec![b_xid, a_xid], "commit order");
    assert!(a_xid < b_xid, "A got its xid first");
    assert_eq!(txns[0].changes, b1);
    assert_eq!(txns[1].changes, [a1[0], a2[0]], "A whole, its changes in LSN order");
    assert_eq!(txns[1].first_lsn, a1[0].lsn, "BEGIN carries A's first change's LSN");
    assert!(a1[0].lsn < b_end, "A's first change is older than B's commit");
    assert_eq!(a2[0].lsn, b_end, "A's second change starts where B's commit record ends");
    assert_eq!(txns[1].commit_lsn, a_commit);
    // The oracle sees both, each at its commit record.
    let committed: Vec<Xid> = h
        .observations
        .iter()
        .filter_map(|o| match o {
            Observation::Committed { txn, .. } => Some(txn.xid),
            _ => None,
        })
        .collect();
    assert_eq!(committed, vec![b_xid, a_xid]);
}

/// E4: a rolled-back block writes an ABORT record and is never delivered; one without an xid
/// writes nothing.
#[test]
fn a_rolled_back_block_is_never_delivered() {
    let mut h = Harness::new();
    h.create_slot_and_stream(true);
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    let changes = Harness::changes_of(h.statement(Node::App, 1, vec![insert(T, 1), insert(T, 2)]));
    assert_eq!(changes.len(), 2);
    assert!(changes[0].lsn < changes[1].lsn, "each row its own record");
    let reply = h.sql(Node::App, 1, SqlRequest::Rollback);
    let Some(SqlReply::RolledBack { xid: Some(xid) }) = reply else { panic!("rolled back with its xid: {reply:?}") };
    assert!(matches!(h.pg.durable.wal.entries.last(), Some(WalEntry::Abort { xid: aborted, .. }) if *aborted == xid));
    h.sql(Node::App, 2, SqlRequest::Transaction { ops: vec![insert(T, 3)] });
    let txns = h.streamed_txns();
    assert_eq!(txns.len(), 1, "only the autocommit insert: {txns:?}");
    assert_eq!(txns[0].changes[0].key, 3);
    assert_eq!(h.pg.table(T).current(1), None, "the rolled-back row never existed");

    // A block that wrote nothing: no xid, no record.
    let entries = h.pg.durable.wal.entries.len();
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    assert_eq!(Harness::changes_of(h.statement(Node::App, 1, vec![update(T, 999, Status::Approved)])), Vec::new());
    assert_eq!(h.sql(Node::App, 1, SqlRequest::Rollback), Some(SqlReply::RolledBack { xid: None }));
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    assert_eq!(h.sql(Node::App, 1, SqlRequest::Commit), Some(SqlReply::Ok), "COMMIT of a block that wrote nothing");
    assert_eq!(h.pg.durable.wal.entries.len(), entries, "nothing written");
}

/// E1 / E1c: an open block in ANOTHER database pins the slot's `restart_lsn` at the last
/// running-xacts record before its first record, and its `catalog_xmin` at its xid, while this
/// database's commits are delivered and confirmed; its end alone moves nothing, the next
/// running-xacts record does once confirmed. A rollback releases like a commit.
#[test]
fn an_open_block_in_another_database_pins_restart_lsn_until_the_next_running_xacts() {
    for ends_with_commit in [true, false] {
        let mut h = Harness::new();
        h.create_slot_and_stream(false);
        let before = h.checkpoint();
        h.confirm_all();
        assert_eq!(h.slot().current.restart_lsn, before, "nothing running: the RX becomes restart_lsn");

        h.begin(Node::App, 7, Isolation::ReadCommitted);
        let first = Harness::changes_of(h.statement(Node::App, 7, vec![insert(OTHER_DB, 1)]));
        let other_xid = h.pg.running_xids()[0];
        assert!(first[0].lsn > before);
        for key in 10..13 {
            h.sql(Node::App, 1, SqlRequest::Transaction { ops: vec![insert(T, key)] });
            let rx = h.checkpoint();
            let WalEntry::RunningXacts { xids, .. } =
                &h.pg.durable.wal.entries[h.pg.durable.wal.first_entry_at_or_after(rx)]
            else {
                panic!("an RX")
            };
            assert_eq!(xids, &vec![other_xid], "the RX lists the other database's xid");
            h.confirm_all();
            assert_eq!(h.slot().current.restart_lsn, before, "pinned at the last RX before its first record");
            assert_eq!(h.slot().catalog_xmin, other_xid, "catalog_xmin pinned at its xid");
            assert_eq!(h.slot().current.confirmed_flush, h.pg.current_wal_lsn(), "confirmation goes on");
        }
        assert_eq!(h.streamed_txns().len(), 3, "this database's commits are delivered");

        if ends_with_commit {
            h.commit(Node::App, 7);
        } else {
            h.sql(Node::App, 7, SqlRequest::Rollback);
        }
        h.confirm_all();
        assert_eq!(h.slot().current.restart_lsn, before, "its end alone moves nothing");
        let released = h.checkpoint();
        h.confirm_all();
        assert_eq!(h.slot().current.restart_lsn, released, "the next RX releases it");
        assert_eq!(h.slot().catalog_xmin, h.pg.durable.next_xid);
        assert_eq!(h.streamed_txns().len(), 3, "the other database's transaction is not delivered");
        let rows = h.pg.replication_slots();
        assert_eq!(rows[0].catalog_xmin, Some(h.pg.durable.next_xid));
    }
}

/// E1b: an open block without an xid (a REPEATABLE READ reader) holds nothing back.
#[test]
fn a_block_without_an_xid_pins_nothing() {
    let mut h = Harness::new();
    h.create_slot_and_stream(false);
    h.begin(Node::App, 7, Isolation::RepeatableRead);
    assert!(matches!(h.sql(Node::App, 7, SqlRequest::Select { table: OTHER_DB }), Some(SqlReply::Rows { .. })));
    h.sql(Node::App, 1, SqlRequest::Transaction { ops: vec![insert(T, 1)] });
    let rx = h.checkpoint();
    h.confirm_all();
    assert!(h.pg.running_xids().is_empty());
    assert_eq!(h.slot().current.restart_lsn, rx);
    assert_eq!(h.slot().catalog_xmin, h.pg.durable.next_xid);
}

/// E5: a transactional message is delivered inside its transaction between its changes; a
/// non-transactional one is sent at once, before the BEGIN of the transaction open around
/// it, and even if that transaction rolls back. Both carry the end of their record.
#[test]
fn logical_messages_transactional_in_their_transaction_the_others_at_once() {
    let mut h = Harness::new();
    h.create_slot_and_stream(true);
    let emit = |transactional: bool, prefix: &str| SqlRequest::EmitMessage {
        transactional,
        prefix: prefix.into(),
        payload_bytes: 8,
    };
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    let c1 = Harness::changes_of(h.statement(Node::App, 1, vec![insert(T, 170)]));
    let Some(SqlReply::Lsn(tx_lsn)) = h.sql(Node::App, 1, emit(true, "m")) else { panic!("an LSN") };
    let Some(SqlReply::Lsn(nontx_lsn)) = h.sql(Node::App, 1, emit(false, "n")) else { panic!("an LSN") };
    let c2 = Harness::changes_of(h.statement(Node::App, 1, vec![insert(T, 171)]));
    assert_eq!(c2[0].lsn, nontx_lsn, "a message's LSN is its record's end: the next record's start");
    assert!(h.streamed().is_empty(), "nothing of the block is flushed yet");
    h.wal_writer();
    assert_eq!(h.streamed().len(), 1, "the non-transactional message is sent once decoded");
    h.commit(Node::App, 1);

    let streamed = h.streamed();
    let ReplReply::Message(DecodedMessage { lsn, transactional: false, .. }) = &streamed[0] else {
        panic!("first the non-transactional message: {streamed:?}")
    };
    assert_eq!(*lsn, nontx_lsn);
    let ReplReply::XLogData(txn) = &streamed[1] else { panic!("then the transaction") };
    assert_eq!(txn.changes, [c1[0], c2[0]]);
    assert_eq!(
        txn.messages,
        vec![DecodedMessage {
            lsn: tx_lsn,
            transactional: true,
            prefix: "m".into(),
            payload_bytes: 8,
            content: Default::default()
        }]
    );
    assert_eq!(txn.first_lsn, c1[0].lsn);

    // A rolled-back block: its transactional message vanishes, its non-transactional one was
    // already sent.
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    h.statement(Node::App, 1, vec![insert(T, 180)]);
    h.sql(Node::App, 1, emit(true, "gone"));
    h.sql(Node::App, 1, emit(false, "kept"));
    h.sql(Node::App, 1, SqlRequest::Rollback);
    h.wal_writer();
    let streamed = h.streamed();
    assert_eq!(streamed.len(), 3);
    assert!(matches!(&streamed[2], ReplReply::Message(message) if message.prefix == "kept"));

    // The SQL peek with `messages` emits the same, in the same order; without the option only
    // the transaction, without its message.
    let peek = |h: &mut Harness, messages: bool| {
        h.sql(
            Node::App,
            5,
            SqlRequest::SlotChanges { slot: "s".into(), publication: "p".into(), consume: false, messages },
        )
    };
    h.send(Node::Connect, Msg::Repl { session: STREAM, request: ReplRequest::Close });
    assert_eq!(peek(&mut h, true), Some(SqlReply::Decoded(h.streamed())));
    let Some(SqlReply::Decoded(plain)) = peek(&mut h, false) else { panic!("decoded") };
    assert!(matches!(&plain[..], [ReplReply::XLogData(txn)] if txn.messages.is_empty() && txn.changes.len() == 2));

    // Without the `messages` option nothing of them is sent.
    let mut quiet = Harness::new();
    quiet.create_slot_and_stream(false);
    quiet.sql(Node::App, 1, emit(false, "n"));
    quiet.sql(Node::App, 1, emit(true, "t"));
    quiet.wal_writer();
    assert!(quiet.streamed().is_empty(), "{:?}", quiet.streamed());
}

/// T2 step 2: a `COPY`'s inserts are one `MULTI_INSERT` record: every row carries its start.
#[test]
fn a_copy_statement_writes_one_record_for_its_rows() {
    let mut h = Harness::new();
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    let reply =
        h.sql(Node::App, 1, SqlRequest::Statement { ops: vec![insert(T, 1), insert(T, 2), insert(T, 3)], copy: true });
    let changes = Harness::changes_of(reply);
    assert_eq!(changes.len(), 3);
    assert!(changes.iter().all(|change| change.lsn == changes[0].lsn));
    let SqlReply::Committed { changes: committed, .. } = h.commit(Node::App, 1) else { panic!("commits") };
    assert_eq!(committed, changes);
}

/// A statement touching a row another open block changed waits for it; under READ COMMITTED
/// it then runs against the new version (`EvalPlanQual`), under REPEATABLE READ it fails with
/// a serialization error and the block only rolls back.
#[test]
fn a_row_lock_waits_then_read_committed_rereads_and_repeatable_read_fails() {
    for isolation in [Isolation::ReadCommitted, Isolation::RepeatableRead] {
        let mut h = Harness::new();
        h.sql(Node::App, 9, SqlRequest::Transaction { ops: vec![insert(T, 1)] });
        h.begin(Node::App, 1, Isolation::ReadCommitted);
        h.statement(Node::App, 1, vec![update(T, 1, Status::Approved)]);
        h.begin(Node::App, 2, isolation);
        // The waiter's own statement before the wait: REPEATABLE READ takes its snapshot here.
        h.statement(Node::App, 2, vec![insert(T, 50)]);
        assert_eq!(h.statement(Node::App, 2, vec![update(T, 1, Status::Closed)]), None, "it waits");
        // An autocommit statement on the same row waits too.
        assert_eq!(h.sql(Node::App, 3, SqlRequest::Transaction { ops: vec![update(T, 1, Status::Paid)] }), None);
        h.sql(Node::App, 1, SqlRequest::Commit);
        let sends = h.commits_visible();
        let reply_to = |session: SessionId| {
            sends.iter().find_map(|(_, msg)| match msg {
                Msg::SqlReply { session: s, reply } if *s == session => Some(reply.clone()),
                _ => None,
            })
        };
        assert!(matches!(reply_to(1), Some(SqlReply::Committed { .. })));
        match isolation {
            Isolation::ReadCommitted => {
                let Some(SqlReply::StatementDone { changes }) = reply_to(2) else { panic!("{:?}", reply_to(2)) };
                let ChangeKind::Update { before, after } = changes[0].kind else { panic!("an update") };
                assert_eq!(before.map(|row| row.status), Some(Status::Approved), "the new version");
                assert_eq!(after.version, 3);
                assert_eq!(reply_to(3), None, "the autocommit statement now waits for session 2");
                let SqlReply::Committed { .. } = h.commit(Node::App, 2) else { panic!("commits") };
                assert_eq!(h.pg.table(T).current(1).map(|row| row.status), Some(Status::Paid));
            }
            Isolation::RepeatableRead => {
                assert_eq!(
                    reply_to(2),
                    Some(SqlReply::Error("ERROR: could not serialize access due to concurrent update".into()))
                );
                assert!(matches!(reply_to(3), Some(SqlReply::Committed { .. })), "the failed block released its locks");
                assert!(matches!(
                    h.statement(Node::App, 2, vec![insert(T, 60)]),
                    Some(SqlReply::Error(text)) if text.contains("current transaction is aborted")
                ));
                assert!(matches!(h.sql(Node::App, 2, SqlRequest::Commit), Some(SqlReply::RolledBack { .. })));
                assert_eq!(h.pg.table(T).current(50), None, "the failed block's insert is gone");
                assert!(
                    matches!(
                        h.pg.durable.wal.entries.iter().rev().find(|e| matches!(e, WalEntry::Abort { .. })),
                        Some(WalEntry::Abort { .. })
                    ),
                    "the error wrote the ABORT record"
                );
            }
        }
    }
}

/// A duplicate key inside a block fails the block at once.
#[test]
fn a_duplicate_key_fails_the_block() {
    let mut h = Harness::new();
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    h.statement(Node::App, 1, vec![insert(T, 1)]);
    assert!(
        matches!(h.statement(Node::App, 1, vec![insert(T, 1)]), Some(SqlReply::Error(text)) if text.contains("duplicate key"))
    );
    assert!(h.pg.running_xids().is_empty(), "the error released the xid");
    assert!(matches!(h.sql(Node::App, 1, SqlRequest::Commit), Some(SqlReply::RolledBack { xid: Some(_) })));
    assert_eq!(h.pg.table(T).current(1), None);
}

/// Between a commit record and its visibility a new snapshot does not see the transaction (it
/// is decodable already); a crash there keeps it: the commit record is durable.
#[test]
fn a_commit_is_in_wal_before_it_is_visible_and_a_crash_between_keeps_it() {
    for crash in [false, true] {
        let mut h = Harness::new();
        h.create_slot_and_stream(false);
        h.begin(Node::App, 1, Isolation::ReadCommitted);
        h.statement(Node::App, 1, vec![insert(T, 1)]);
        assert_eq!(h.sql(Node::App, 1, SqlRequest::Commit), None, "COMMIT answers once visible");
        assert!(h.observations.iter().any(|o| o.moment() == Some(crate::core::fault::Moment::CommitInWal)));
        assert_eq!(h.streamed_txns().len(), 1, "decodable at once");
        let Some(SqlReply::Rows { rows, .. }) = h.sql(Node::App, 2, SqlRequest::Select { table: T }) else {
            panic!("rows")
        };
        assert!(rows.is_empty(), "not yet visible");
        if crash {
            h.pg.crash();
            let mut out = Outbox::default();
            h.pg.start(&mut Ctx::new(SimTime(100), Node::Pg1, &mut out));
        } else {
            h.commits_visible();
        }
        let Some(SqlReply::Rows { rows, .. }) = h.sql(Node::App, 2, SqlRequest::Select { table: T }) else {
            panic!("rows")
        };
        assert_eq!(rows.len(), 1, "visible (crash: {crash})");
    }
}

/// A crash aborts every open block: no ABORT record, the rows never existed, and the decoder
/// drops the transaction at the first running-xacts record without it (`ReorderBufferAbortOld`
/// runs after the restart candidate is taken, `standby_decode`), so it pins `restart_lsn` for
/// that record still and not for the next.
#[test]
fn a_crash_aborts_every_open_block() {
    let mut h = Harness::new();
    h.create_slot_and_stream(false);
    let before = h.checkpoint();
    h.confirm_all();
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    h.statement(Node::App, 1, vec![insert(T, 1)]);
    h.wal_writer();
    let flushed = h.pg.durable.wal.entries.len();
    h.statement(Node::App, 1, vec![insert(T, 2)]);
    h.pg.crash();
    assert_eq!(h.pg.durable.wal.entries.len(), flushed, "the record not flushed is lost, the flushed one kept");
    let mut out = Outbox::default();
    h.pg.start(&mut Ctx::new(SimTime(100), Node::Pg1, &mut out));
    assert!(h.pg.running_xids().is_empty());
    assert!(!h.pg.durable.wal.entries.iter().any(|e| matches!(e, WalEntry::Abort { .. })), "no ABORT record");
    assert_eq!(h.sql(Node::App, 1, SqlRequest::Commit), Some(SqlReply::Ok), "the session is gone: no block");
    assert_eq!(h.pg.table(T).current(1), None);
    h.create_stream_again();
    h.checkpoint();
    h.confirm_all();
    assert_eq!(h.slot().current.restart_lsn, before, "proposed before the crashed transaction was dropped");
    let rx = h.checkpoint();
    h.confirm_all();
    assert_eq!(h.slot().current.restart_lsn, rx, "the crashed transaction holds nothing any more");
}

/// Closing a session aborts its block (an ABORT record: the backend exits through
/// `AbortOutOfAnyTransaction`).
#[test]
fn closing_a_session_aborts_its_block() {
    let mut h = Harness::new();
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    h.statement(Node::App, 1, vec![insert(T, 1)]);
    let xid = h.pg.running_xids()[0];
    h.sql(Node::App, 1, SqlRequest::Close);
    assert!(matches!(h.pg.durable.wal.entries.last(), Some(WalEntry::Abort { xid: aborted, .. }) if *aborted == xid));
    assert!(h.pg.running_xids().is_empty());
    assert!(h.pg.volatile.row_locks.is_empty());
}

impl Harness {
    fn create_stream_again(&mut self) {
        self.stream_from(Node::Connect);
    }

    /// `client` asks for the slot's stream; the replies it got.
    fn stream_from(&mut self, client: Node) -> Vec<Msg> {
        self.send(
            client,
            Msg::Repl {
                session: STREAM,
                request: ReplRequest::StartReplication {
                    slot: "s".into(),
                    start: Lsn::INVALID,
                    publication: "p".into(),
                    messages: false,
                },
            },
        )
    }
}

/// Two blocks waiting for each other: the one that closes the cycle fails with a deadlock, its
/// block aborts, and the other one's statement runs.
#[test]
fn a_deadlock_fails_the_block_that_closes_the_cycle_and_frees_the_other() {
    let mut h = Harness::new();
    h.sql(Node::App, 9, SqlRequest::Transaction { ops: vec![insert(T, 1), insert(T, 2)] });
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    h.begin(Node::App, 2, Isolation::ReadCommitted);
    h.statement(Node::App, 1, vec![update(T, 1, Status::Assessed)]);
    h.statement(Node::App, 2, vec![update(T, 2, Status::Assessed)]);
    assert_eq!(h.statement(Node::App, 1, vec![update(T, 2, Status::Approved)]), None, "1 waits for 2");
    let sent_before = h.sent.len();
    let reply = h.statement(Node::App, 2, vec![update(T, 1, Status::Approved)]);
    assert!(matches!(reply, Some(SqlReply::Error(text)) if text.starts_with("ERROR: deadlock detected")));
    let woken = h.sent[sent_before..].iter().find_map(|(to, msg)| match msg {
        Msg::SqlReply { session: 1, reply } if *to == Node::App => Some(reply.clone()),
        _ => None,
    });
    assert!(matches!(&woken, Some(SqlReply::StatementDone { changes }) if changes.len() == 1), "{woken:?}");
    let SqlReply::Committed { changes, .. } = h.commit(Node::App, 1) else { panic!("1 commits") };
    assert_eq!(changes.len(), 2);
    assert_eq!(h.pg.table(T).current(2).map(|row| row.status), Some(Status::Approved));
}

/// A block that wrote only a transactional message commits (an xid, a commit record) without
/// hiding anything from new snapshots while it becomes visible.
#[test]
fn a_message_only_block_commits_and_hides_nothing() {
    let mut h = Harness::new();
    h.sql(Node::App, 9, SqlRequest::Transaction { ops: vec![insert(T, 1)] });
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    h.sql(Node::App, 1, SqlRequest::EmitMessage { transactional: true, prefix: "m".into(), payload_bytes: 4 });
    assert_eq!(h.pg.running_xids().len(), 1, "the message assigned an xid");
    assert_eq!(h.sql(Node::App, 1, SqlRequest::Commit), None);
    assert!(matches!(h.pg.durable.wal.entries.last(), Some(WalEntry::Commit(txn)) if txn.changes.is_empty()));
    let Some(SqlReply::Rows { rows, .. }) = h.sql(Node::App, 2, SqlRequest::Select { table: T }) else {
        panic!("rows")
    };
    assert_eq!(rows.len(), 1, "the earlier commit stays visible");
    assert!(matches!(h.commit_visible_reply(1), SqlReply::Committed { changes, .. } if changes.is_empty()));
}

impl Harness {
    fn commit_visible_reply(&mut self, session: SessionId) -> SqlReply {
        self.commits_visible()
            .into_iter()
            .find_map(|(_, msg)| match msg {
                Msg::SqlReply { session: s, reply } if s == session => Some(reply),
                _ => None,
            })
            .expect("answered")
    }
}

/// Trace T4: a reconnect re-delivers, whole, a transaction that began before the start and
/// commits after it (its change below the start included); one whose commit starts exactly at
/// the start is delivered; one committed between `confirmed_flush` and a higher start is
/// skipped.
#[test]
fn a_restart_redelivers_an_old_open_transaction_whole() {
    let mut h = Harness::new();
    h.create_slot_and_stream(false);
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    let a1 = Harness::changes_of(h.statement(Node::App, 1, vec![insert(T, 1)]));
    h.sql(Node::App, 2, SqlRequest::Transaction { ops: vec![insert(T, 2)] });
    let b_end = h.streamed_txns()[0].end_lsn;
    let a2 = Harness::changes_of(h.statement(Node::App, 1, vec![insert(T, 3)]));
    assert_eq!(a2[0].lsn, b_end);
    h.sql(Node::App, 3, SqlRequest::Transaction { ops: vec![insert(T, 4)] });
    let c_end = h.streamed_txns()[1].end_lsn;
    let SqlReply::Committed { xid: a_xid, commit_lsn: a_commit, .. } = h.commit(Node::App, 1) else {
        panic!("A commits")
    };
    assert_eq!(a_commit, c_end, "A's commit record follows C's");
    let first_run: Vec<Xid> = h.streamed_txns().iter().map(|txn| txn.xid).collect();
    assert_eq!(first_run.len(), 3);
    assert_eq!(first_run[2], a_xid, "B, C, A");
    // The consumer confirms B's end only, and reconnects there.
    h.send(Node::Connect, Msg::Repl { session: STREAM, request: ReplRequest::StatusUpdate { flush: b_end } });
    for (start, expected) in [(b_end, vec![first_run[1], a_xid]), (c_end, vec![a_xid])] {
        h.send(Node::Connect, Msg::Repl { session: STREAM, request: ReplRequest::Close });
        h.sent.clear();
        h.send(
            Node::Connect,
            Msg::Repl {
                session: STREAM,
                request: ReplRequest::StartReplication {
                    slot: "s".into(),
                    start,
                    publication: "p".into(),
                    messages: false,
                },
            },
        );
        let txns = h.streamed_txns();
        assert_eq!(txns.iter().map(|txn| txn.xid).collect::<Vec<_>>(), expected, "from {start}");
        let a = txns.last().expect("A");
        assert_eq!(a.changes, [a1[0], a2[0]], "A whole, its change below the start included");
        assert!(a.first_lsn < start);
    }
}

/// §4.1: a running-xacts record written between a commit record and the commit's visibility
/// still lists the xid (it is in the proc array until `ProcArrayEndTransaction`), though its
/// commit record is earlier in WAL; the moment is named `commit-in-wal`.
#[test]
fn a_running_xacts_record_in_the_commit_window_lists_the_committed_xid() {
    let mut h = Harness::new();
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    h.statement(Node::App, 1, vec![insert(T, 1)]);
    let xid = h.pg.running_xids()[0];
    assert_eq!(h.sql(Node::App, 1, SqlRequest::Commit), None);
    let rx = h.checkpoint();
    let wal = &h.pg.durable.wal;
    let WalEntry::RunningXacts { xids, next_xid, .. } = &wal.entries[wal.first_entry_at_or_after(rx)] else {
        panic!("an RX")
    };
    assert_eq!((xids.clone(), *next_xid), (vec![xid], xid + 1));
    assert!(wal.entries.iter().any(|e| matches!(e, WalEntry::Commit(txn) if txn.xid == xid && txn.end_lsn <= rx)));
    h.commits_visible();
    assert!(h.pg.running_xids().is_empty());
    assert_eq!(crate::core::fault::Moment::parse("commit-in-wal"), Some(crate::core::fault::Moment::CommitInWal));
}

/// A `COPY` outside a block is an autocommit transaction of one step: one `Txn` entry whose
/// rows share the `MULTI_INSERT` record's LSN.
#[test]
fn an_autocommit_copy_is_one_step_with_one_record_for_its_rows() {
    let mut h = Harness::new();
    let reply = h.sql(Node::App, 1, SqlRequest::Statement { ops: vec![insert(T, 1), insert(T, 2)], copy: true });
    let Some(SqlReply::Committed { changes, .. }) = reply else { panic!("committed: {reply:?}") };
    assert_eq!(changes[0].lsn, changes[1].lsn);
    assert!(matches!(h.pg.durable.wal.entries.last(), Some(WalEntry::Txn(_))));
    assert!(!h.commit_visible_armed, "no visibility window for an autocommit transaction");
}

/// Facts §0: an ABORT record is not flushed when written (`RecordTransactionAbort`): a
/// `pg_logical_slot_get_changes` right after a ROLLBACK reads to the flush pointer, the start of
/// the ABORT record, and confirms that; the WAL writer flushes it `wal_writer_delay` later. A
/// COMMIT flushes everything before it.
#[test]
fn an_abort_record_is_flushed_by_the_wal_writer_and_a_commit_flushes_at_once() {
    let mut h = Harness::new();
    h.sql(Node::Connect, 1, SqlRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), database: None });
    h.sql(Node::Connect, 100, SqlRequest::EnsurePublication { name: "p".into(), tables: None });
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    h.statement(Node::App, 1, vec![insert(T, 1)]);
    h.sql(Node::App, 1, SqlRequest::Rollback);
    let WalEntry::Abort { start: abort_start, end: abort_end, .. } = *h.pg.durable.wal.entries.last().expect("ABORT")
    else {
        panic!("an ABORT record last")
    };
    let get =
        |h: &mut Harness| h.sql(Node::Connect, 1, SqlRequest::GetChanges { slot: "s".into(), publication: "p".into() });
    assert_eq!(get(&mut h), Some(SqlReply::Changes(Vec::new())));
    let flushed = h.slot().current.confirmed_flush;
    assert!(flushed <= abort_start, "confirmed to the flush pointer, before the ABORT record");
    assert_eq!(h.pg.current_wal_lsn(), flushed);
    h.wal_writer();
    get(&mut h);
    assert_eq!(h.slot().current.confirmed_flush, abort_end, "flushed by the WAL writer");

    h.begin(Node::App, 1, Isolation::ReadCommitted);
    h.statement(Node::App, 1, vec![insert(T, 2)]);
    let SqlReply::Committed { end_lsn, .. } = h.commit(Node::App, 1) else { panic!("commits") };
    assert_eq!(h.pg.current_wal_lsn(), end_lsn, "the commit flushed its records and itself");
}

// ----- idle_in_transaction_session_timeout -----

/// Fires the idle-in-transaction timer at `at_ms`: what the server sent, and the timer it set
/// next (its delay), if any.
fn idle_timer_fires(h: &mut Harness, at_ms: u64) -> (Vec<(Node, Msg)>, Option<u64>) {
    let mut out = Outbox::default();
    h.now_ms = at_ms;
    h.pg.on_timer(&mut Ctx::new(SimTime(at_ms), Node::Pg1, &mut out), Timer::IdleInTransactionTimeout);
    let sends = out.sends.clone();
    let next = out.timers.iter().find_map(|timer| match *timer {
        TimerRequest::Set { timer: Timer::IdleInTransactionTimeout, after_ms } => Some(after_ms),
        _ => None,
    });
    h.absorb(out);
    (sends, next)
}

#[test]
fn an_idle_in_transaction_session_is_terminated_and_its_transaction_aborted() {
    let mut h = Harness::with_idle_timeout(30_000);
    // A session of db2 writes and goes idle in its transaction at t=3 ms.
    h.begin(Node::App, 7, Isolation::ReadCommitted);
    assert!(!Harness::changes_of(h.statement(Node::App, 7, vec![insert(OTHER_DB, 1)])).is_empty());
    let idle_since = h.now_ms;
    let xid = h.pg.running_xids()[0];
    // Before the timeout: nothing happens to it (and a message from it restarts its clock).
    let (sends, next) = idle_timer_fires(&mut h, idle_since + 29_999);
    assert!(sends.is_empty(), "terminated early: {sends:?}");
    assert_eq!(next, Some(1), "the timer is set again for the session's deadline");
    assert_eq!(h.pg.running_xids(), vec![xid]);
    // At the timeout: FATAL to the client, the block aborted with an ABORT record.
    let (sends, next) = idle_timer_fires(&mut h, idle_since + 30_000);
    assert_eq!(next, None);
    assert!(
        sends.iter().any(|(to, msg)| *to == Node::App
            && matches!(msg, Msg::SqlReply { session: 7, reply: SqlReply::Error(text) } if text.contains("idle-in-transaction timeout"))),
        "the client reads the FATAL error: {sends:?}"
    );
    assert!(h.pg.running_xids().is_empty(), "its xid is no longer running");
    assert!(
        h.pg.durable
            .wal
            .entries
            .iter()
            .any(|entry| matches!(entry, WalEntry::Abort { xid: aborted, .. } if *aborted == xid)),
        "the backend's exit writes the ABORT record"
    );
    assert!(
        h.observations.iter().any(|o| matches!(o, Observation::SessionTerminated { xid: Some(x), .. } if *x == xid))
    );
    // The row never existed.
    assert_eq!(h.pg.table(OTHER_DB).current(1), None);
}

#[test]
fn a_session_that_keeps_talking_or_has_no_block_is_not_terminated() {
    let mut h = Harness::with_idle_timeout(30_000);
    h.begin(Node::App, 7, Isolation::ReadCommitted);
    h.statement(Node::App, 7, vec![insert(T, 1)]);
    // An autocommit session is idle, but not in a transaction: no timer for it.
    h.statement(Node::App, 8, vec![insert(T, 2)]);
    // Session 7 speaks again at 20 s: its clock restarts.
    h.now_ms = 20_000;
    h.statement(Node::App, 7, vec![insert(T, 3)]);
    let (sends, next) = idle_timer_fires(&mut h, 30_010);
    assert!(sends.is_empty(), "{sends:?}");
    assert_eq!(next, Some(20_001 + 30_000 - 30_010), "set for the restarted deadline");
    // Without the setting there is no timer at all.
    let mut off = Harness::new();
    off.begin(Node::App, 7, Isolation::ReadCommitted);
    let mut out = Outbox::default();
    off.pg.on_message(
        &mut Ctx::new(SimTime(5), Node::Pg1, &mut out),
        Node::App,
        Msg::Sql { session: 7, request: SqlRequest::Statement { ops: vec![insert(T, 1)], copy: false } },
    );
    assert!(!out.timers.iter().any(|t| matches!(t, TimerRequest::Set { timer: Timer::IdleInTransactionTimeout, .. })));
}

/// The table-free outbox's write ([`SqlRequest::OutboxMessage`]): the business update and the
/// event's message in one transaction.
fn outbox_message(key: Key, transactional: bool, id: Key) -> SqlRequest {
    let event =
        crate::core::ids::MessageEvent { outbox: 0, id, aggregate_id: key as u32, event_type: Status::Approved };
    SqlRequest::OutboxMessage {
        ops: vec![update(T, key, Status::Approved)],
        transactional,
        prefix: "outbox".into(),
        payload_bytes: event.content("claim").len() as u64,
        event,
    }
}

/// Autocommit, it is one step: the change record, the message and the commit, decoded as one
/// transaction that carries the message with its event, in LSN order after the change; the
/// commit is reported with its change and the message as written with its content.
#[test]
fn an_outbox_message_commits_with_its_update_and_decodes_as_one_transaction() {
    let mut h = Harness::new();
    h.sql(Node::App, 9, SqlRequest::Transaction { ops: vec![insert(T, 7)] });
    h.create_slot_and_stream(true);
    h.observations.clear();
    let Some(SqlReply::Committed { changes, .. }) = h.sql(Node::App, 10, outbox_message(7, true, 1)) else {
        panic!("committed in one step")
    };
    assert_eq!(changes.len(), 1);
    assert!(!h.pg.volatile.sessions.contains_key(&(Node::App, 10)), "an autocommit step keeps no session");
    let [txn] = h.streamed_txns().try_into().expect("one transaction");
    assert_eq!(txn.changes, changes);
    let [message] = txn.messages.as_slice() else { panic!("its message: {txn:?}") };
    assert!(message.transactional && message.prefix == "outbox");
    assert!(message.lsn > changes[0].lsn, "after the update, as written");
    let event = message.content.event().expect("the event travels with the message");
    assert_eq!((event.id, event.aggregate_id), (1, 7));
    assert!(matches!(
        h.observations.as_slice(),
        [Observation::MessageWritten { committed: false, content, .. }, Observation::Committed { .. }]
            if content.event() == Some(event)
    ));
    assert_eq!(h.pg.table(T).current(7).map(|row| row.status), Some(Status::Approved));
}

/// In a block, a transactional event rolls back with its update; a non-transactional one was
/// decoded and sent at once, and stays sent.
#[test]
fn an_outbox_message_in_a_block_follows_the_block_only_when_transactional() {
    let mut h = Harness::new();
    h.sql(Node::App, 9, SqlRequest::Transaction { ops: vec![insert(T, 7)] });
    h.create_slot_and_stream(true);
    for transactional in [true, false] {
        h.begin(Node::App, 1, Isolation::ReadCommitted);
        let reply = h.sql(Node::App, 1, outbox_message(7, transactional, 2));
        assert!(matches!(reply, Some(SqlReply::Lsn(_))), "{reply:?}");
        h.sql(Node::App, 1, SqlRequest::Rollback);
        h.wal_writer();
    }
    let streamed = h.streamed();
    assert_eq!(streamed.len(), 1, "only the non-transactional event: {streamed:?}");
    assert!(
        matches!(&streamed[0], ReplReply::Message(message) if !message.transactional && message.content.event().is_some())
    );
    assert_eq!(h.pg.table(T).current(7).map(|row| row.version), Some(1), "both updates rolled back");
}

/// Its update waits for a row lock like any statement, and the whole transaction (update and
/// message) runs when the lock is released.
#[test]
fn an_outbox_message_waits_for_its_rows_lock_and_then_runs_whole() {
    let mut h = Harness::new();
    h.sql(Node::App, 9, SqlRequest::Transaction { ops: vec![insert(T, 7)] });
    h.create_slot_and_stream(true);
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    h.statement(Node::App, 1, vec![update(T, 7, Status::Paid)]);
    assert_eq!(h.sql(Node::App, 10, outbox_message(7, true, 3)), None, "it waits for the block's lock");
    assert!(h.streamed().is_empty());
    h.commit(Node::App, 1);
    let woken = h.sent.iter().rev().find_map(|(_, msg)| match msg {
        Msg::SqlReply { session: 10, reply } => Some(reply.clone()),
        _ => None,
    });
    assert!(matches!(woken, Some(SqlReply::Committed { .. })), "{woken:?}");
    let txns = h.streamed_txns();
    assert_eq!(txns.len(), 2);
    assert_eq!(txns[1].messages.len(), 1, "the message came with its update once the lock was free");
    assert_eq!(h.pg.table(T).current(7).map(|row| row.version), Some(3));
}

/// `wal_sender_timeout`: the walsender of a client that has not replied ends, its slot is free
/// for another client, and the client reads the end as an error on its stream; a client with no
/// walsender, or a server with the timeout off, keeps everything as it is.
#[test]
fn a_silent_client_loses_its_walsender_and_the_slot_is_free() {
    let mut h = Harness::new();
    h.create_slot_and_stream(false);
    assert!(h.slot().active.is_some());
    // Another worker's stream on the same slot is refused while the walsender lives.
    let refused = h.stream_from(Node::Connect2);
    assert!(matches!(&refused[..], [Msg::ReplReply { reply: ReplReply::Error(e), .. }] if e.contains("is active")));
    // A client that streams nothing: nothing happens.
    assert!(h.send(Node::Sink, Msg::Control(Control::WalSenderTimeout { client: Node::Sink })).is_empty());
    assert!(h.slot().active.is_some());
    let replies = h.send(Node::Pg1, Msg::Control(Control::WalSenderTimeout { client: Node::Connect }));
    assert!(replies.is_empty(), "the error goes to the client, not to whoever said the time was up");
    assert!(h.sent.iter().any(|(to, msg)| *to == Node::Connect
        && matches!(msg, Msg::ReplReply { session: STREAM, reply: ReplReply::Error(e) } if e == super::walsender::WAL_SENDER_TIMEOUT_ERROR)));
    assert!(
        h.observations
            .iter()
            .any(|o| matches!(o, Observation::WalSenderTimedOut { client: Node::Connect, timeout_ms: 60_000, .. }))
    );
    assert!(h.slot().active.is_none(), "the slot is released");
    let accepted = h.stream_from(Node::Connect2);
    assert!(!accepted.iter().any(|msg| matches!(msg, Msg::ReplReply { reply: ReplReply::Error(_), .. })));
    assert!(matches!(h.slot().active, Some((Node::Connect2, _))));
    // With the timeout off (0), a silent client keeps its walsender.
    h.pg.config = Fixed::new(PostgresConfig { wal_sender_timeout_ms: 0, ..(*h.pg.config).clone() });
    h.send(Node::Pg1, Msg::Control(Control::WalSenderTimeout { client: Node::Connect2 }));
    assert!(matches!(h.slot().active, Some((Node::Connect2, _))));
}

/// A range query on `T` without a filter, by the key.
fn range(after: Option<Key>, upto: Option<Key>, limit: u32, descending: bool) -> SqlRequest {
    range_by(Default::default(), false, (after, upto, limit, descending))
}

/// A range query on `T` without a filter, ordered and bounded by `order_by`, `per_column` as
/// Debezium before 1.8 bounds a two-column key.
fn range_by(
    order_by: crate::core::signal::ChunkOrder,
    per_column: bool,
    (after, upto, limit, descending): (Option<Key>, Option<Key>, u32, bool),
) -> SqlRequest {
    SqlRequest::SelectRange {
        table: T,
        after,
        upto,
        limit,
        descending,
        filter: None,
        order_by,
        per_column,
        nulls: Default::default(),
    }
}

/// The incremental snapshot's queries (`SqlRequest::SelectRange`): a chunk `(id) > after AND
/// (id) <= upto ORDER BY id LIMIT n`, and the largest key `ORDER BY id DESC LIMIT 1`, on a fresh
/// statement snapshot: a commit not yet visible is not read.
#[test]
fn a_chunk_query_reads_its_key_range_and_the_largest_key_query_the_last_row() {
    let mut h = Harness::new();
    for key in 1..=5 {
        h.sql(Node::App, 10 + key as u64, SqlRequest::Transaction { ops: vec![insert(T, key)] });
    }
    let keys = |reply: Option<SqlReply>| match reply {
        Some(SqlReply::Rows { rows, .. }) => rows.into_iter().map(|(key, _)| key).collect::<Vec<_>>(),
        other => panic!("rows: {other:?}"),
    };
    assert_eq!(keys(h.sql(Node::App, 2, range(Some(1), Some(4), 2, false))), [2, 3]);
    assert_eq!(keys(h.sql(Node::App, 2, range(Some(3), Some(4), 2, false))), [4], "fewer than the chunk size");
    assert_eq!(keys(h.sql(Node::App, 2, range(Some(4), Some(4), 2, false))), Vec::<i64>::new(), "done");
    assert_eq!(keys(h.sql(Node::App, 2, range(None, None, 1, true))), [5]);
    // A commit in the WAL but not yet visible is not in the chunk.
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    h.statement(Node::App, 1, vec![insert(T, 6)]);
    assert_eq!(h.sql(Node::App, 1, SqlRequest::Commit), None);
    assert_eq!(keys(h.sql(Node::App, 2, range(None, None, 1, true))), [5], "key 6 committed, not yet visible");
    h.commits_visible();
    assert_eq!(keys(h.sql(Node::App, 2, range(None, None, 1, true))), [6]);
}

/// With a `surrogate-key` the chunk query orders and bounds by that column (`ORDER BY version`),
/// rows with equal values in key order; the bounds are its values, so rows that share the last
/// value a chunk read are past the next chunk's strict lower bound.
#[test]
fn a_chunk_query_by_a_surrogate_column_orders_and_bounds_by_its_values() {
    use crate::core::signal::{ChunkOrder, FilterColumn};
    let mut h = Harness::new();
    for key in 1..=5 {
        h.sql(Node::App, 10 + key as u64, SqlRequest::Transaction { ops: vec![insert(T, key)] });
    }
    // Keys 2 and 4 move to version 2.
    for key in [2, 4] {
        h.sql(Node::App, 20 + key as u64, SqlRequest::Transaction { ops: vec![update(T, key, Status::Assessed)] });
    }
    let by_version = |after, upto, limit, descending| {
        range_by(ChunkOrder(Some(FilterColumn::Version)), false, (after, upto, limit, descending))
    };
    let keys = |reply: Option<SqlReply>| match reply {
        Some(SqlReply::Rows { rows, .. }) => rows.into_iter().map(|(key, row)| (key, row.version)).collect::<Vec<_>>(),
        other => panic!("rows: {other:?}"),
    };
    assert_eq!(keys(h.sql(Node::App, 2, by_version(None, None, 1, true))), [(4, 2)], "the largest version");
    assert_eq!(keys(h.sql(Node::App, 2, by_version(None, Some(2), 2, false))), [(1, 1), (3, 1)]);
    // After version 1, key 5 (version 1 too) is never read: only the version-2 rows are.
    assert_eq!(keys(h.sql(Node::App, 2, by_version(Some(1), Some(2), 2, false))), [(2, 2), (4, 2)]);
    assert_eq!(keys(h.sql(Node::App, 2, by_version(Some(2), Some(2), 2, false))), Vec::<(Key, u32)>::new());
}

/// A range query that runs while a transaction that changed rows it covers has its commit record
/// in the WAL and is not yet visible says so (`ReadMissedCommit`: the visibility race's
/// precondition); rows past a chunk cut short by its limit are not covered, nor is a transaction
/// once visible.
#[test]
fn a_range_query_says_which_commit_not_yet_visible_it_missed() {
    let mut h = Harness::new();
    for key in 1..=5 {
        h.sql(Node::App, 10 + key as u64, SqlRequest::Transaction { ops: vec![insert(T, key)] });
    }
    h.begin(Node::App, 1, Isolation::ReadCommitted);
    let xid = h.pg.durable.next_xid;
    h.statement(Node::App, 1, vec![RowOp::Delete { table: T, key: 4 }, RowOp::Delete { table: T, key: 5 }]);
    assert_eq!(h.sql(Node::App, 1, SqlRequest::Commit), None);
    let missed = |h: &mut Harness, request| {
        h.observations.clear();
        h.sql(Node::Connect, 2, request);
        h.observations
            .iter()
            .filter_map(|observation| match observation {
                Observation::ReadMissedCommit { client: Node::Connect, table: T, xid, key, rows } => {
                    Some((*xid, *key, *rows))
                }
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(missed(&mut h, range(None, Some(5), 5, false)), [(xid, 4, 2)], "keys 4 and 5, read as before");
    assert_eq!(missed(&mut h, range(None, Some(5), 3, false)), [], "the chunk ends at key 3");
    assert_eq!(missed(&mut h, range(None, None, 1, true)), [(xid, 5, 1)], "the largest key, 5, is one of them");
    h.commits_visible();
    assert_eq!(missed(&mut h, range(None, Some(5), 5, false)), [], "visible now");
}

/// On a two-column key (`region_id`, `hub_id`, two rows per region: keys 1-3 are (1, 1), (1, 2),
/// (2, 1)) the row-value bounds read after (1, 2) up to (2, 1) the row (2, 1); Debezium before
/// 1.8 compares each column on its own (DBZ-3860), `hub_id >= 2 AND … AND hub_id <= 1`, and reads
/// nothing, so (2, 1) is never snapshotted. Without bounds (a first chunk) both read in key order.
#[test]
fn a_per_column_chunk_range_on_a_two_column_key_skips_rows() {
    let mut h = Harness::new();
    let mut config = (*h.pg.config).clone();
    config.tables[usize::from(T.0)].composite_key =
        Some(crate::core::ids::CompositeKey { columns: ["region_id".into(), "hub_id".into()], group_rows: 2 });
    h.pg.config = Fixed::new(config);
    for key in 1..=3 {
        h.sql(Node::App, 10 + key as u64, SqlRequest::Transaction { ops: vec![insert(T, key)] });
    }
    let keys = |reply: Option<SqlReply>| match reply {
        Some(SqlReply::Rows { rows, .. }) => rows.into_iter().map(|(key, _)| key).collect::<Vec<_>>(),
        other => panic!("rows: {other:?}"),
    };
    let per_column = |after, upto, limit| range_by(Default::default(), true, (after, upto, limit, false));
    assert_eq!(keys(h.sql(Node::App, 2, range(Some(2), Some(3), 2, false))), [3], "row values");
    assert_eq!(keys(h.sql(Node::App, 2, per_column(Some(2), Some(3), 2))), Vec::<Key>::new(), "column by column");
    assert_eq!(keys(h.sql(Node::App, 2, per_column(None, None, 2))), [1, 2], "a first chunk");
    // After (1, 1) up to (2, 1): hub_id >= 1 AND NOT (1, 1) AND region_id <= 2 AND hub_id <= 1
    // leaves (2, 1) alone; (1, 2) is past the upper bound's hub_id.
    assert_eq!(keys(h.sql(Node::App, 2, per_column(Some(1), Some(3), 2))), [3]);
}

/// A nullable unique column (`external_id`: the row's id, NULL in row 2) as the chunk key
/// (`message.key.columns`): `ORDER BY external_id` puts the NULL row last and `DESC` first. With
/// Debezium 2.6's null-aware bounds NULL is the largest value: after 1 up to NULL reads 3 and then
/// the NULL row, after NULL nothing. With the plain comparisons before 2.6 (DBZ-5071) a NULL bound
/// leaves every row out, and so does a NULL value: after 1 up to NULL reads nothing, after 1 up to
/// 3 reads 3 but never the NULL row.
#[test]
fn a_chunk_range_on_a_nullable_key_column_compares_null_as_the_release_does() {
    use crate::core::ids::UniqueColumn;
    use crate::core::signal::ChunkNulls;
    let mut h = Harness::new();
    let mut config = (*h.pg.config).clone();
    config.tables[usize::from(T.0)].unique_column = Some(UniqueColumn { name: "external_id".into(), null_row: 2 });
    h.pg.config = Fixed::new(config);
    for key in 1..=3 {
        h.sql(Node::App, 10 + key as u64, SqlRequest::Transaction { ops: vec![insert(T, key)] });
    }
    let keys = |reply: Option<SqlReply>| match reply {
        Some(SqlReply::Rows { rows, .. }) => rows.into_iter().map(|(key, _)| key).collect::<Vec<_>>(),
        other => panic!("rows: {other:?}"),
    };
    let null = UniqueColumn::NULL;
    let by = |nulls, (after, upto, limit, descending): (Option<Key>, Option<Key>, u32, bool)| SqlRequest::SelectRange {
        table: T,
        after,
        upto,
        limit,
        descending,
        filter: None,
        order_by: Default::default(),
        per_column: false,
        nulls,
    };
    for nulls in [ChunkNulls::NullAware, ChunkNulls::Unaware] {
        assert_eq!(keys(h.sql(Node::App, 2, by(nulls, (None, None, 3, false)))), [1, 3, 2], "{nulls:?}: NULLs last");
        assert_eq!(keys(h.sql(Node::App, 2, by(nulls, (None, None, 1, true)))), [2], "{nulls:?}: the maximum key");
    }
    let aware = |after, upto| by(ChunkNulls::NullAware, (Some(after), Some(upto), 5, false));
    assert_eq!(keys(h.sql(Node::App, 2, aware(1, null))), [3, 2], "(k > 1 OR k IS NULL) AND NOT (1 = 0)");
    assert_eq!(keys(h.sql(Node::App, 2, aware(1, 3))), [3], "NOT (k > 3 OR k IS NULL)");
    assert_eq!(keys(h.sql(Node::App, 2, aware(null, null))), Vec::<Key>::new(), "1 = 0");
    let unaware = |after, upto| by(ChunkNulls::Unaware, (Some(after), Some(upto), 5, false));
    assert_eq!(keys(h.sql(Node::App, 2, unaware(1, null))), Vec::<Key>::new(), "NOT (k > NULL) is unknown");
    assert_eq!(keys(h.sql(Node::App, 2, unaware(1, 3))), [3], "NULL > 1 is unknown: the NULL row is left out");
    // Keyed by the primary key, the same table has no NULL: the query is by `id`.
    assert_eq!(keys(h.sql(Node::App, 2, range(Some(1), Some(3), 5, false))), [2, 3]);
}
