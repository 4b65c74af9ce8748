//! Issue 18, items 3 and 4 through the component's messages: slot creation waiting for running
//! transactions (E2a, E2b, E2c on PostgreSQL 15.18), its exported snapshot, and what READ
//! COMMITTED and REPEATABLE READ reads see.

use super::*;
use crate::core::component::Outbox;
use crate::core::ids::Status;
use crate::core::protocol::Isolation;
use crate::core::time::SimTime;

/// Table 0 `public.u` in the main database (where the slots are), table 1 `public.t` in `db2`.
const U: TableId = TableId(0);
const T_DB2: TableId = TableId(1);

fn server() -> Postgres {
    let section = PostgresSection::minimal();
    let tables = vec![
        TableSpec {
            id: U,
            name: "public.u".into(),
            replica_identity: ReplicaIdentity::Default,
            database: None,
            composite_key: None,
            unique_column: None,
        },
        TableSpec {
            id: T_DB2,
            name: "public.t".into(),
            replica_identity: ReplicaIdentity::Default,
            database: Some("db2".into()),
            composite_key: None,
            unique_column: None,
        },
    ];
    let run = ServerRun {
        bgwriter_running_xacts: false,
        walsender_keepalives: false,
        initial_wal_lsn: Lsn(0xEB7FD0),
        tables,
    };
    let mut pg = Postgres::new(Node::Pg1, Role::Primary, Fixed::new(PostgresConfig::new(&section, run)), &[]);
    let mut out = Outbox::default();
    pg.start(&mut Ctx::new(SimTime(0), Node::Pg1, &mut out));
    pg
}

fn send(pg: &mut Postgres, msg: Msg) -> Outbox {
    let mut out = Outbox::default();
    pg.on_message(&mut Ctx::new(SimTime(1), Node::Pg1, &mut out), Node::Connect, msg);
    out
}

fn sql(pg: &mut Postgres, session: SessionId, request: SqlRequest) -> Outbox {
    send(pg, Msg::Sql { session, request })
}

/// The reply to `session` among what a step sent, if any.
fn sql_reply(out: &Outbox, session: SessionId) -> Option<SqlReply> {
    out.sends.iter().find_map(|(_, msg)| match msg {
        Msg::SqlReply { session: s, reply } if *s == session => Some(reply.clone()),
        _ => None,
    })
}

fn repl_reply(out: &Outbox, session: SessionId) -> Option<ReplReply> {
    out.sends.iter().find_map(|(_, msg)| match msg {
        Msg::ReplReply { session: s, reply } if *s == session => Some(reply.clone()),
        _ => None,
    })
}

fn insert(table: TableId, key: Key) -> SqlRequest {
    SqlRequest::Statement {
        ops: vec![RowOp::Insert { table, key, status: Status::Submitted, amount_cents: 100 }],
        copy: false,
    }
}

/// `BEGIN; INSERT …` in `session`: the block's xid.
fn open_writing(pg: &mut Postgres, session: SessionId, table: TableId, key: Key) -> Xid {
    sql(pg, session, SqlRequest::Begin { isolation: Isolation::ReadCommitted });
    let xid = pg.durable.next_xid;
    let out = sql(pg, session, insert(table, key));
    assert!(matches!(sql_reply(&out, session), Some(SqlReply::StatementDone { .. })), "{:?}", out.sends);
    xid
}

/// `COMMIT` in `session`, the commit becoming visible (the timer): everything both steps sent.
fn commit(pg: &mut Postgres, session: SessionId) -> Outbox {
    let mut out = sql(pg, session, SqlRequest::Commit);
    let mut ctx = Ctx::new(SimTime(2), Node::Pg1, &mut out);
    pg.on_timer(&mut ctx, Timer::CommitVisible);
    out
}

/// The running-xacts records in the WAL from `from` on: (start, end, xids, next_xid).
fn running_xacts_from(pg: &Postgres, from: Lsn) -> Vec<(Lsn, Lsn, Vec<Xid>, Xid)> {
    pg.durable
        .wal
        .entries
        .iter()
        .filter_map(|entry| match entry {
            WalEntry::RunningXacts { start, end, xids, next_xid } if *start >= from => {
                Some((*start, *end, xids.clone(), *next_xid))
            }
            _ => None,
        })
        .collect()
}

fn select_keys(pg: &mut Postgres, session: SessionId, table: TableId) -> Vec<Key> {
    match sql_reply(&sql(pg, session, SqlRequest::Select { table }), session) {
        Some(SqlReply::Rows { rows, .. }) => rows.into_iter().map(|(key, _)| key).collect(),
        other => panic!("select: {other:?}"),
    }
}

fn current_snapshot(pg: &mut Postgres, session: SessionId) -> String {
    match sql_reply(&sql(pg, session, SqlRequest::CurrentSnapshot), session) {
        Some(SqlReply::Snapshot(snapshot)) => snapshot.to_string(),
        other => panic!("pg_current_snapshot: {other:?}"),
    }
}

/// E2a: X1 in ANOTHER database runs when `pg_create_logical_replication_slot` starts; X2 gets
/// its xid during the first wait, X3 during the second. The creation answers only when X2
/// ends, after three running-xacts records, with X3 still running; the slot then delivers X3
/// whole (its change before the consistent point included) and never X1 or X2.
#[test]
fn e2a_creation_waits_for_x1_in_another_database_then_x2_and_not_x3() {
    let mut pg = server();
    let x1 = open_writing(&mut pg, 1, T_DB2, 3);
    let first = pg.durable.wal.insert_lsn();
    let out =
        sql(&mut pg, 2, SqlRequest::CreateSlot { slot: "s2".into(), plugin: "test_decoding".into(), database: None });
    assert_eq!(sql_reply(&out, 2), None, "creation waits for X1");
    assert_eq!(running_xacts_from(&pg, first).len(), 1);
    assert_eq!(running_xacts_from(&pg, first)[0].2, vec![x1]);
    let x2 = open_writing(&mut pg, 3, U, 1);
    let out = commit(&mut pg, 1);
    assert_eq!(sql_reply(&out, 2), None, "now waits for X2");
    let records = running_xacts_from(&pg, first);
    assert_eq!(records.len(), 2, "a second record after the first wait");
    assert_eq!((records[1].2.clone(), records[1].3), (vec![x2], x2 + 1));
    let x3 = open_writing(&mut pg, 4, U, 2);
    let x3_change = pg.durable.wal.entries.iter().rev().find_map(|entry| match entry {
        WalEntry::Changes { xid, start, .. } if *xid == x3 => Some(*start),
        _ => None,
    });
    let out = commit(&mut pg, 3);
    let records = running_xacts_from(&pg, first);
    assert_eq!(records.len(), 3, "a third record after the second wait");
    assert_eq!(records[2].2, vec![x3], "X3 still runs at the consistent point");
    assert_eq!(sql_reply(&out, 2), Some(SqlReply::Lsn(records[2].1)), "created at the third record's end");
    let slot = pg.slot("s2").expect("created");
    assert_eq!(slot.current.restart_lsn, first, "restart_lsn is the first record");
    assert_eq!(slot.current.confirmed_flush, records[2].1);
    assert!(x3_change.expect("X3 wrote") < slot.current.confirmed_flush);
    commit(&mut pg, 4);
    sql(&mut pg, 9, SqlRequest::EnsurePublication { name: "p".into(), tables: None });
    let decoded =
        match sql_reply(&sql(&mut pg, 9, SqlRequest::PeekChanges { slot: "s2".into(), publication: "p".into() }), 9) {
            Some(SqlReply::Changes(decoded)) => decoded,
            other => panic!("peek: {other:?}"),
        };
    assert_eq!(decoded.iter().map(|txn| txn.xid).collect::<Vec<_>>(), vec![x3], "only X3, whole");
    assert_eq!(decoded[0].changes[0].lsn, x3_change.expect("X3 wrote"));
}

/// E2b: one running xid and nothing new during the wait: two records, the second one listing
/// nothing, and the creation answers when the xid ends.
#[test]
fn e2b_creation_after_one_wait_has_two_records() {
    let mut pg = server();
    let x = open_writing(&mut pg, 1, U, 1);
    let first = pg.durable.wal.insert_lsn();
    let out = send(
        &mut pg,
        Msg::Repl {
            session: 10,
            request: ReplRequest::CreateSlot { slot: "s3".into(), plugin: "pgoutput".into(), failover: false },
        },
    );
    assert_eq!(repl_reply(&out, 10), None);
    let out = commit(&mut pg, 1);
    let records = running_xacts_from(&pg, first);
    assert_eq!(records.iter().map(|r| r.2.clone()).collect::<Vec<_>>(), vec![vec![x], vec![]]);
    match repl_reply(&out, 10) {
        Some(ReplReply::SlotCreated { consistent_point, .. }) => assert_eq!(consistent_point, records[1].1),
        other => panic!("created: {other:?}"),
    }
}

/// Nothing running: one record, the slot at once, as before issue 18.
#[test]
fn nothing_running_creates_the_slot_at_once_with_one_record() {
    let mut pg = server();
    let first = pg.durable.wal.insert_lsn();
    let out = send(
        &mut pg,
        Msg::Repl {
            session: 10,
            request: ReplRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), failover: false },
        },
    );
    let records = running_xacts_from(&pg, first);
    assert_eq!(records.len(), 1);
    assert!(
        matches!(repl_reply(&out, 10), Some(ReplReply::SlotCreated { consistent_point, .. }) if consistent_point == records[0].1)
    );
}

/// E2c over the replication protocol, the exported snapshot kept open: A committed before, B
/// running at the start, D started and committed during the wait, C after the consistent
/// point. The snapshot is `x:x:` (x the next xid at the consistent point) and sees A, B and D,
/// not C; a READ COMMITTED import is refused; the connector's scan on it reads the same rows;
/// the slot delivers exactly C.
#[test]
fn e2c_the_exported_snapshot_sees_what_committed_before_the_consistent_point() {
    let mut pg = server();
    let autocommit = |pg: &mut Postgres, key: Key| {
        let out = sql(
            pg,
            5,
            SqlRequest::Transaction {
                ops: vec![RowOp::Insert { table: U, key, status: Status::Submitted, amount_cents: 100 }],
            },
        );
        assert!(matches!(sql_reply(&out, 5), Some(SqlReply::Committed { .. })));
    };
    autocommit(&mut pg, 20);
    open_writing(&mut pg, 1, U, 21);
    let out = send(
        &mut pg,
        Msg::Repl {
            session: 10,
            request: ReplRequest::CreateSlot { slot: "s4".into(), plugin: "pgoutput".into(), failover: false },
        },
    );
    assert_eq!(repl_reply(&out, 10), None);
    open_writing(&mut pg, 2, U, 22);
    assert_eq!(repl_reply(&commit(&mut pg, 1), 10), None, "waits for D, begun during the wait");
    let out = commit(&mut pg, 2);
    let next_xid = pg.durable.next_xid;
    let (consistent_point, name) = match repl_reply(&out, 10) {
        Some(ReplReply::SlotCreated { consistent_point, snapshot_name }) => (consistent_point, snapshot_name),
        other => panic!("created: {other:?}"),
    };
    autocommit(&mut pg, 23);
    // A fresh snapshot sees C.
    assert_eq!(current_snapshot(&mut pg, 6), format!("{}:{}:", next_xid + 1, next_xid + 1));
    sql(&mut pg, 7, SqlRequest::Begin { isolation: Isolation::RepeatableRead });
    assert_eq!(sql_reply(&sql(&mut pg, 7, SqlRequest::ImportSnapshot { name: name.clone() }), 7), Some(SqlReply::Ok));
    assert_eq!(current_snapshot(&mut pg, 7), format!("{next_xid}:{next_xid}:"));
    assert_eq!(select_keys(&mut pg, 7, U), vec![20, 21, 22], "A, B, D; not C");
    // READ COMMITTED cannot import.
    sql(&mut pg, 8, SqlRequest::Begin { isolation: Isolation::ReadCommitted });
    assert_eq!(
        sql_reply(&sql(&mut pg, 8, SqlRequest::ImportSnapshot { name: name.clone() }), 8),
        Some(SqlReply::Error(
            "ERROR: a snapshot-importing transaction must have isolation level SERIALIZABLE or REPEATABLE READ".into()
        ))
    );
    // The connector's snapshot scan on the exported snapshot.
    sql(
        &mut pg,
        11,
        SqlRequest::ScanTable { table: U, exported_snapshot: Some(name.clone()), fetch_size: 100, filter: None },
    );
    let mut out = Outbox::default();
    pg.on_timer(&mut Ctx::new(SimTime(3), Node::Pg1, &mut out), Timer::ScanBatch { client: Node::Connect });
    match sql_reply(&out, 11) {
        Some(SqlReply::Rows { rows, .. }) => {
            assert_eq!(rows.iter().map(|(key, _)| *key).collect::<Vec<_>>(), vec![20, 21, 22])
        }
        other => panic!("scan: {other:?}"),
    }
    // The slot delivers exactly C.
    sql(&mut pg, 9, SqlRequest::EnsurePublication { name: "p".into(), tables: None });
    let out = send(
        &mut pg,
        Msg::Repl {
            session: 10,
            request: ReplRequest::StartReplication {
                slot: "s4".into(),
                start: Lsn::INVALID,
                publication: "p".into(),
                messages: false,
            },
        },
    );
    let keys: Vec<Key> = out
        .sends
        .iter()
        .filter_map(|(_, msg)| match msg {
            Msg::ReplReply { reply: ReplReply::XLogData(txn), .. } => Some(txn.changes.iter().map(|c| c.key)),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(keys, vec![23]);
    assert!(consistent_point.is_valid());
    // The exported snapshot died with the session's next command.
    let out = sql(&mut pg, 12, SqlRequest::Begin { isolation: Isolation::RepeatableRead });
    assert_eq!(sql_reply(&out, 12), Some(SqlReply::Ok));
    assert_eq!(
        sql_reply(&sql(&mut pg, 12, SqlRequest::ImportSnapshot { name: name.clone() }), 12),
        Some(SqlReply::Error(format!("ERROR: invalid snapshot identifier: \"{name}\"")))
    );
}

/// READ COMMITTED takes a snapshot per statement, REPEATABLE READ one at its first statement:
/// after another session's commit, the RC block sees the new row and the RR block does not;
/// each sees its own uncommitted writes.
#[test]
fn read_committed_sees_a_concurrent_commit_and_repeatable_read_does_not() {
    let mut pg = server();
    sql(&mut pg, 1, SqlRequest::Begin { isolation: Isolation::RepeatableRead });
    sql(&mut pg, 2, SqlRequest::Begin { isolation: Isolation::ReadCommitted });
    assert_eq!(select_keys(&mut pg, 1, U), Vec::<Key>::new());
    assert_eq!(select_keys(&mut pg, 2, U), Vec::<Key>::new());
    let writer = open_writing(&mut pg, 3, U, 7);
    assert_eq!(current_snapshot(&mut pg, 2), format!("{writer}:{writer}:"), "the writer is the newest xid");
    commit(&mut pg, 3);
    assert_eq!(select_keys(&mut pg, 2, U), vec![7], "READ COMMITTED: a fresh snapshot");
    assert_eq!(select_keys(&mut pg, 1, U), Vec::<Key>::new(), "REPEATABLE READ: the first statement's");
    assert_eq!(current_snapshot(&mut pg, 1), format!("{writer}:{writer}:"));
    assert_eq!(current_snapshot(&mut pg, 2), format!("{}:{}:", writer + 1, writer + 1));
    sql(&mut pg, 1, insert(U, 8));
    assert_eq!(select_keys(&mut pg, 1, U), vec![8], "its own write, not the concurrent one");
}

/// The window between a commit record and its visibility: another session's READ COMMITTED
/// read does not see it yet and `pg_current_snapshot()` lists its xid as running; once visible
/// it is seen.
#[test]
fn a_commit_in_wal_but_not_yet_visible_is_running_for_new_snapshots() {
    let mut pg = server();
    let older = open_writing(&mut pg, 1, U, 1);
    let x = open_writing(&mut pg, 2, U, 2);
    let out = sql(&mut pg, 2, SqlRequest::Commit);
    assert_eq!(sql_reply(&out, 2), None, "COMMIT answers when visible");
    assert_eq!(current_snapshot(&mut pg, 3), format!("{older}:{older}:"), "{x} in the window counts as running");
    // An autocommit transaction in the window is visible at once, and moves xmax past `x`.
    let out = sql(
        &mut pg,
        4,
        SqlRequest::Transaction {
            ops: vec![RowOp::Insert { table: U, key: 3, status: Status::Submitted, amount_cents: 1 }],
        },
    );
    assert!(matches!(sql_reply(&out, 4), Some(SqlReply::Committed { .. })));
    assert_eq!(current_snapshot(&mut pg, 3), format!("{older}:{}:{older},{x}", x + 2));
    assert_eq!(select_keys(&mut pg, 3, U), vec![3], "the autocommit row, not the one in the window");
    let mut out = Outbox::default();
    pg.on_timer(&mut Ctx::new(SimTime(2), Node::Pg1, &mut out), Timer::CommitVisible);
    assert_eq!(select_keys(&mut pg, 3, U), vec![2, 3]);
}

/// WAL order, not the proc array: X3's commit record precedes the consistent point while X3 is
/// not yet visible (X2's rollback ends the last wait in that window). The exported snapshot
/// sees X3's row; a READ COMMITTED read at the same moment does not; the slot does not deliver
/// X3 (its commit precedes the consistent point).
#[test]
fn the_exported_snapshot_follows_commit_records_not_visibility() {
    let mut pg = server();
    open_writing(&mut pg, 1, T_DB2, 1);
    let out = send(
        &mut pg,
        Msg::Repl {
            session: 10,
            request: ReplRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), failover: false },
        },
    );
    assert_eq!(repl_reply(&out, 10), None);
    open_writing(&mut pg, 2, U, 2);
    assert_eq!(repl_reply(&commit(&mut pg, 1), 10), None);
    let x3 = open_writing(&mut pg, 3, U, 9);
    assert_eq!(sql_reply(&sql(&mut pg, 3, SqlRequest::Commit), 3), None, "X3 in the window");
    let out = sql(&mut pg, 2, SqlRequest::Rollback);
    let name = match repl_reply(&out, 10) {
        Some(ReplReply::SlotCreated { snapshot_name, .. }) => snapshot_name,
        other => panic!("created when X2 ended: {other:?}"),
    };
    let last = running_xacts_from(&pg, Lsn(0)).pop().expect("records");
    assert_eq!(last.2, vec![x3], "X3 is still in the proc array at the consistent point");
    sql(&mut pg, 7, SqlRequest::Begin { isolation: Isolation::RepeatableRead });
    sql(&mut pg, 7, SqlRequest::ImportSnapshot { name });
    assert_eq!(select_keys(&mut pg, 7, U), vec![9], "the exported snapshot sees X3");
    assert_eq!(current_snapshot(&mut pg, 7), format!("{x3}:{}:", x3 + 1));
    assert_eq!(select_keys(&mut pg, 8, U), Vec::<Key>::new(), "a fresh snapshot does not, yet");
    let mut out = Outbox::default();
    pg.on_timer(&mut Ctx::new(SimTime(2), Node::Pg1, &mut out), Timer::CommitVisible);
    assert_eq!(select_keys(&mut pg, 8, U), vec![9]);
    let slot = pg.slot("s").expect("created");
    let x3_commit = pg.durable.wal.entries.iter().find_map(|entry| match entry {
        WalEntry::Commit(txn) if txn.xid == x3 => Some(txn.commit_lsn),
        _ => None,
    });
    assert!(x3_commit.expect("committed") < slot.current.confirmed_flush, "never delivered by the slot");
}

/// A creation waiting for a block in another database, its session gone: the slot is never
/// created (an ephemeral slot is dropped), the name is free, and the block's end writes no
/// further record.
#[test]
fn a_creation_whose_session_ends_while_waiting_is_dropped() {
    let mut pg = server();
    open_writing(&mut pg, 1, T_DB2, 1);
    let out = sql(&mut pg, 2, SqlRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), database: None });
    assert_eq!(sql_reply(&out, 2), None);
    let out = sql(&mut pg, 3, SqlRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), database: None });
    assert_eq!(
        sql_reply(&out, 3),
        Some(SqlReply::Error("ERROR: replication slot \"s\" already exists".into())),
        "a slot being created has its name"
    );
    sql(&mut pg, 2, SqlRequest::Close);
    let records = running_xacts_from(&pg, Lsn(0)).len();
    commit(&mut pg, 1);
    assert_eq!(running_xacts_from(&pg, Lsn(0)).len(), records, "nobody waits any more");
    assert!(pg.slot("s").is_none());
    let out = sql(&mut pg, 3, SqlRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), database: None });
    assert!(matches!(sql_reply(&out, 3), Some(SqlReply::Lsn(_))), "created at once now");
}

/// `pg_create_logical_replication_slot` in a block that has written would wait for itself:
/// PostgreSQL refuses it (`CreateInitDecodingContext`), and so does the model.
#[test]
fn a_block_that_has_written_cannot_create_a_slot() {
    let mut pg = server();
    open_writing(&mut pg, 1, U, 1);
    let out = sql(&mut pg, 1, SqlRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), database: None });
    assert_eq!(
        sql_reply(&out, 1),
        Some(SqlReply::Error(
            "ERROR: cannot create logical replication slot in transaction that has performed writes".into()
        ))
    );
    assert!(pg.slot("s").is_none() && pg.volatile.creating.is_empty());
}

/// A crash while a creation waits: the ephemeral slot is gone after the restart.
#[test]
fn a_crash_drops_a_slot_being_created() {
    let mut pg = server();
    open_writing(&mut pg, 1, T_DB2, 1);
    let out = sql(&mut pg, 2, SqlRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), database: None });
    assert_eq!(sql_reply(&out, 2), None);
    pg.crash();
    let mut out = Outbox::default();
    pg.start(&mut Ctx::new(SimTime(2), Node::Pg1, &mut out));
    assert!(pg.slot("s").is_none());
    let out = sql(&mut pg, 3, SqlRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), database: None });
    assert!(matches!(sql_reply(&out, 3), Some(SqlReply::Lsn(_))), "nothing runs after the crash: created at once");
}

/// `pg_replication_slots`: the row of slot `name`.
fn slot_row(pg: &mut Postgres, name: &str) -> Option<ReplicationSlotRow> {
    match sql_reply(&sql(pg, 9, SqlRequest::ReplicationSlots), 9) {
        Some(SqlReply::ReplicationSlots(rows)) => rows.into_iter().find(|row| row.slot_name == name),
        other => panic!("pg_replication_slots: {other:?}"),
    }
}

/// `pg_logical_slot_get_changes(name, NULL, NULL)`: the xids delivered.
fn get_changes(pg: &mut Postgres, name: &str) -> Vec<Xid> {
    sql(pg, 9, SqlRequest::EnsurePublication { name: "p".into(), tables: None });
    match sql_reply(&sql(pg, 9, SqlRequest::GetChanges { slot: name.into(), publication: "p".into() }), 9) {
        Some(SqlReply::Changes(decoded)) => decoded.iter().map(|txn| txn.xid).collect(),
        other => panic!("get_changes: {other:?}"),
    }
}

/// E2a: while its creation waits, the slot is listed (`RS_EPHEMERAL`, acquired by the creating
/// session): active, `restart_lsn` the first record, `catalog_xmin` the oldest running xid, no
/// `confirmed_flush_lsn` yet; once created it has one and is no longer active.
#[test]
fn a_slot_being_created_is_listed_active_without_confirmed_flush() {
    let mut pg = server();
    let x1 = open_writing(&mut pg, 1, T_DB2, 3);
    let first = pg.durable.wal.insert_lsn();
    sql(&mut pg, 2, SqlRequest::CreateSlot { slot: "s2".into(), plugin: "test_decoding".into(), database: None });
    let row = slot_row(&mut pg, "s2").expect("listed while it waits");
    assert!(row.active);
    assert_eq!(row.restart_lsn, Some(first));
    assert_eq!(row.confirmed_flush_lsn, None);
    assert_eq!(row.catalog_xmin, Some(x1));
    let waiting_status = row.wal_status;
    commit(&mut pg, 1);
    let row = slot_row(&mut pg, "s2").expect("created");
    assert_eq!(row.wal_status, waiting_status, "the same wal_status as once created");
    assert!(!row.active);
    assert_eq!(row.restart_lsn, Some(first));
    assert!(row.confirmed_flush_lsn.is_some());
}

/// E2a, then decoding from the creation's `restart_lsn`: the decoder rebuilds the snapshot
/// through the creation's records (`SnapBuildFindSnapshot`), serialising none, so none proposes
/// a restart point: `restart_lsn` stays at the first record. The second record (FULL_SNAPSHOT)
/// proposes its `oldestRunningXid` X2; X3's change, collected in FULL_SNAPSHOT, has a base
/// snapshot with that xmin, so the consistent record proposes X2 too, not its own
/// `oldestRunningXid` X3 (`ReorderBufferGetOldestXmin`).
#[test]
fn decoding_from_the_creation_restart_lsn_rebuilds_the_snapshot() {
    let mut pg = server();
    open_writing(&mut pg, 1, T_DB2, 3);
    let first = pg.durable.wal.insert_lsn();
    sql(&mut pg, 2, SqlRequest::CreateSlot { slot: "s2".into(), plugin: "test_decoding".into(), database: None });
    let x2 = open_writing(&mut pg, 3, U, 1);
    commit(&mut pg, 1);
    let x3 = open_writing(&mut pg, 4, U, 2);
    commit(&mut pg, 3);
    assert!(pg.slot("s2").is_some(), "created, X3 still running");
    assert_eq!(get_changes(&mut pg, "s2"), Vec::<Xid>::new());
    let slot = pg.slot("s2").expect("created");
    assert_eq!((slot.current.restart_lsn, slot.catalog_xmin), (first, x2));
    commit(&mut pg, 4);
    assert_eq!(get_changes(&mut pg, "s2"), vec![x3]);
    let slot = pg.slot("s2").expect("created");
    assert_eq!((slot.current.restart_lsn, slot.catalog_xmin), (first, x2), "no later record: nothing moves");
}

/// E2c: the record that makes the creation consistent lists nothing running. Decoding from the
/// creation's `restart_lsn` proposes nothing there (`SnapBuildFindSnapshot` returns false), so
/// `catalog_xmin` is the second record's `oldestRunningXid` (D, begun during the wait), not the
/// consistent record's (C's xid), and `restart_lsn` stays at the first record.
#[test]
fn a_creation_consistent_with_nothing_running_proposes_nothing_when_decoded_again() {
    let mut pg = server();
    open_writing(&mut pg, 1, U, 21);
    let first = pg.durable.wal.insert_lsn();
    sql(&mut pg, 2, SqlRequest::CreateSlot { slot: "s4".into(), plugin: "test_decoding".into(), database: None });
    let d = open_writing(&mut pg, 3, U, 22);
    commit(&mut pg, 1);
    let out = commit(&mut pg, 3);
    assert!(matches!(sql_reply(&out, 2), Some(SqlReply::Lsn(_))), "created when D ends");
    let c = pg.durable.next_xid;
    sql(&mut pg, 5, insert(U, 23));
    let mut out = Outbox::default();
    pg.on_timer(&mut Ctx::new(SimTime(3), Node::Pg1, &mut out), Timer::CommitVisible);
    assert_eq!(get_changes(&mut pg, "s4"), vec![c]);
    let slot = pg.slot("s4").expect("created");
    assert_eq!((slot.current.restart_lsn, slot.catalog_xmin), (first, d));
}

/// `publication.autocreate.mode = filtered`: a publication `FOR TABLE` the include list sends
/// only those tables' changes (a transaction with none of them is not sent at all on PostgreSQL
/// 15), and ensuring it again with another list sets its tables (`ALTER PUBLICATION … SET
/// TABLE`) for the transactions that commit after it, not those before (decoding uses the
/// catalog as of each transaction); one `FOR ALL TABLES` sends both.
#[test]
fn a_filtered_publication_sends_only_its_tables() {
    let section = PostgresSection::minimal();
    let v = TableId(1);
    let tables = [(U, "public.u"), (v, "public.v")]
        .map(|(id, name)| TableSpec {
            id,
            name: name.into(),
            replica_identity: ReplicaIdentity::Default,
            database: None,
            composite_key: None,
            unique_column: None,
        })
        .to_vec();
    let run = ServerRun {
        bgwriter_running_xacts: false,
        walsender_keepalives: false,
        initial_wal_lsn: Lsn(0xEB7FD0),
        tables,
    };
    let mut pg = Postgres::new(Node::Pg1, Role::Primary, Fixed::new(PostgresConfig::new(&section, run)), &[]);
    let mut out = Outbox::default();
    pg.start(&mut Ctx::new(SimTime(0), Node::Pg1, &mut out));
    send(
        &mut pg,
        Msg::Repl {
            session: 10,
            request: ReplRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), failover: false },
        },
    );
    let on_u = open_writing(&mut pg, 1, U, 1);
    commit(&mut pg, 1);
    let on_v = open_writing(&mut pg, 2, v, 1);
    commit(&mut pg, 2);
    let peek = |pg: &mut Postgres, publication: &str| -> Vec<Xid> {
        match sql_reply(&sql(pg, 9, SqlRequest::PeekChanges { slot: "s".into(), publication: publication.into() }), 9) {
            Some(SqlReply::Changes(decoded)) => decoded.iter().map(|txn| txn.xid).collect(),
            other => panic!("peek: {other:?}"),
        }
    };
    sql(&mut pg, 9, SqlRequest::EnsurePublication { name: "only".into(), tables: Some(vec![v]) });
    sql(&mut pg, 9, SqlRequest::EnsurePublication { name: "all".into(), tables: None });
    assert_eq!(peek(&mut pg, "only"), vec![on_v]);
    assert_eq!(peek(&mut pg, "all"), vec![on_u, on_v]);
    sql(&mut pg, 9, SqlRequest::EnsurePublication { name: "only".into(), tables: Some(vec![U]) });
    // The transactions committed before the `SET` are decoded with the catalog as of their
    // commit: still public.v's only; those after it, with the new list.
    assert_eq!(peek(&mut pg, "only"), vec![on_v], "the SET does not reach back");
    let later_u = open_writing(&mut pg, 3, U, 2);
    commit(&mut pg, 3);
    let later_v = open_writing(&mut pg, 4, v, 2);
    commit(&mut pg, 4);
    assert_eq!(peek(&mut pg, "only"), vec![on_v, later_u], "set to the new list from the SET on");
    // FOR ALL TABLES leaves an existing publication as it is.
    sql(&mut pg, 9, SqlRequest::EnsurePublication { name: "only".into(), tables: None });
    assert_eq!(peek(&mut pg, "only"), vec![on_v, later_u]);
    assert_eq!(peek(&mut pg, "all"), vec![on_u, on_v, later_u, later_v]);
}
