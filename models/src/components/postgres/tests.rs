use super::*;
use crate::core::component::Outbox;
use crate::core::time::SimTime;

fn server(cap_mb: Option<u64>) -> Postgres {
    let section = PostgresSection { max_slot_wal_keep_size_mb: cap_mb, ..PostgresSection::minimal() };
    let run = ServerRun {
        bgwriter_running_xacts: false,
        walsender_keepalives: true,
        initial_wal_lsn: Lsn(0x16B_3748),
        tables: Vec::new(),
    };
    let config = PostgresConfig::new(&section, run);
    let mut pg = Postgres::new(Node::Pg1, Role::Primary, Fixed::new(config), &[]);
    let mut out = Outbox::default();
    pg.start(&mut Ctx::new(SimTime(0), Node::Pg1, &mut out));
    pg
}

fn send(pg: &mut Postgres, msg: Msg) -> Outbox {
    let mut out = Outbox::default();
    pg.on_message(&mut Ctx::new(SimTime(1), Node::Pg1, &mut out), Node::Connect, msg);
    out
}

fn stream(pg: &mut Postgres, session: SessionId) -> Outbox {
    let repl = |request| Msg::Repl { session, request };
    send(pg, Msg::Sql { session: 100, request: SqlRequest::EnsurePublication { name: "p".into(), tables: None } });
    send(
        pg,
        repl(ReplRequest::StartReplication {
            slot: "s".into(),
            start: Lsn::INVALID,
            publication: "p".into(),
            messages: false,
        }),
    )
}

/// Issue 16 item 8: a slot past the cap but not yet invalidated (no checkpoint since the
/// burst) is lost at the checkpoint that ends crash recovery, before any client can read
/// from it; the first start of a server makes no such checkpoint.
#[test]
fn crash_recovery_ends_with_a_checkpoint_that_invalidates_a_slot_past_the_cap() {
    let mut pg = server(Some(64));
    send(
        &mut pg,
        Msg::Repl {
            session: 1,
            request: ReplRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), failover: false },
        },
    );
    // 256MB: past the 64MB cap, too little for a volume checkpoint (33 segments).
    let out = send(&mut pg, Msg::Control(Control::WalBurst { bytes: 256 << 20 }));
    assert!(out.observations.iter().all(|o| !matches!(o, Observation::Checkpoint { .. })), "no checkpoint yet");
    let row = pg.slot_row(pg.slot("s").expect("slot"));
    assert_eq!(row.wal_status.as_deref(), Some("unreserved"));

    pg.crash();
    let mut out = Outbox::default();
    pg.start(&mut Ctx::new(SimTime(2), Node::Pg1, &mut out));
    let ended = out.observations.iter().position(|o| matches!(o, Observation::CrashRecoveryEnded { .. }));
    let checkpoint = out.observations.iter().position(|o| matches!(o, Observation::Checkpoint { .. }));
    assert!(ended.is_some() && checkpoint > ended, "{:?}", out.observations);
    let invalidated = out.observations.iter().position(
        |o| matches!(o, Observation::SlotInvalidated { slot, walsender_terminated: false, .. } if slot == "s"),
    );
    assert!(checkpoint.is_some() && invalidated > checkpoint, "{:?}", out.observations);
    let row = pg.slot_row(pg.slot("s").expect("slot"));
    assert_eq!((row.wal_status.as_deref(), row.restart_lsn), (Some("lost"), None));

    // A fresh server's first start is no recovery: no checkpoint.
    let mut fresh = server(Some(64));
    let mut out = Outbox::default();
    fresh.crash();
    fresh.durable.in_production = false;
    fresh.start(&mut Ctx::new(SimTime(3), Node::Pg1, &mut out));
    assert!(out.observations.iter().all(|o| !matches!(o, Observation::Checkpoint { .. })));
}

/// `CreateCheckPoint` and `InvalidateObsoleteReplicationSlots`: a burst past `max_wal_size` runs a checkpoint; the cap invalidates
/// the active slot behind it, its walsender terminated first; it is lost for good.
#[test]
fn a_burst_past_the_cap_invalidates_an_active_slot_at_its_checkpoint() {
    let mut pg = server(Some(1024));
    send(
        &mut pg,
        Msg::Repl {
            session: 1,
            request: ReplRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), failover: false },
        },
    );
    stream(&mut pg, 1);
    let row = pg.slot_row(pg.slot("s").expect("slot"));
    assert_eq!((row.wal_status.as_deref(), row.active), (Some("reserved"), true));

    let out = send(&mut pg, Msg::Control(Control::WalBurst { bytes: 1 << 30 }));
    assert!(out.observations.iter().all(|o| !matches!(o, Observation::SlotInvalidated { .. })), "within the cap");
    let out = send(&mut pg, Msg::Control(Control::WalBurst { bytes: 1 << 30 }));
    assert!(out.observations.iter().any(|o| matches!(o, Observation::Checkpoint { .. })), "a volume checkpoint");
    assert!(
        out.observations
            .iter()
            .any(|o| matches!(o, Observation::SlotInvalidated { walsender_terminated: true, slot, .. } if slot == "s"))
    );
    assert!(out.sends.iter().any(|(to, msg)| *to == Node::Connect
        && matches!(msg, Msg::ReplReply { reply: ReplReply::Error(text), .. } if text.contains("administrator command"))));
    let row = pg.slot_row(pg.slot("s").expect("an invalidated slot stays"));
    assert_eq!((row.wal_status.as_deref(), row.restart_lsn, row.active), (Some("lost"), None, false));

    let out = stream(&mut pg, 2);
    assert!(out.sends.iter().any(|(_, msg)| matches!(msg,
        Msg::ReplReply { reply: ReplReply::Error(text), .. } if text.contains("cannot read from logical replication slot"))));
    pg.crash();
    let mut out = Outbox::default();
    pg.start(&mut Ctx::new(SimTime(2), Node::Pg1, &mut out));
    assert_eq!(pg.slot_row(pg.slot("s").expect("slot")).wal_status.as_deref(), Some("lost"), "permanent");
}

#[test]
fn without_a_cap_a_slot_holds_any_amount_of_wal() {
    let mut pg = server(None);
    send(
        &mut pg,
        Msg::Repl {
            session: 1,
            request: ReplRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), failover: false },
        },
    );
    let out = send(&mut pg, Msg::Control(Control::WalBurst { bytes: 4 << 30 }));
    assert!(out.observations.iter().any(|o| matches!(o, Observation::Checkpoint { .. })));
    let row = pg.slot_row(pg.slot("s").expect("slot"));
    assert_eq!(row.wal_status.as_deref(), Some("extended"), "4GB behind, more than max_wal_size + 1 segment");
    assert!(row.restart_lsn.is_some());
}

/// `StandbySlotsHaveCaughtup` (`slot.c`, PostgreSQL 17): with `synchronized_standby_slots`, a failover slot's walsender sends a
/// transaction only once the standby has flushed it.
#[test]
fn a_failover_slot_waits_for_the_standby_with_synchronized_standby_slots() {
    let config = PostgresConfig {
        major_version: 17,
        has_standby: true,
        replication_delay_ms: 5_000,
        synchronized_standby_slots: true,
        tables: vec![TableSpec {
            id: TableId(0),
            name: "public.claims".into(),
            replica_identity: ReplicaIdentity::Full,
            database: None,
            composite_key: None,
            unique_column: None,
        }],
        ..(*server(None).config).clone()
    };
    let mut pg = Postgres::new(Node::Pg1, Role::Primary, Fixed::new(config), &[]);
    let mut out = Outbox::default();
    pg.start(&mut Ctx::new(SimTime(0), Node::Pg1, &mut out));
    let create = ReplRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), failover: true };
    send(&mut pg, Msg::Repl { session: 1, request: create });
    assert!(pg.slot("s").expect("slot").failover);
    stream(&mut pg, 1);
    let insert =
        RowOp::Insert { table: TableId(0), key: 7, status: crate::core::ids::Status::Submitted, amount_cents: 1 };
    let out = send(&mut pg, Msg::Sql { session: 2, request: SqlRequest::Transaction { ops: vec![insert] } });
    let streamed = |out: &Outbox| {
        out.sends.iter().any(|(to, msg)| {
            *to == Node::Connect && matches!(msg, Msg::ReplReply { reply: ReplReply::XLogData(_), .. })
        })
    };
    assert!(!streamed(&out), "the standby has not flushed it yet");
    let flushed = pg.current_wal_lsn();
    let out = send(&mut pg, Msg::StandbyFlushed { lsn: flushed });
    assert!(streamed(&out), "sent once the standby has it");
}

/// `DecodeTXNNeedSkip`: a slot decodes only its own database's transactions; get consumes and
/// marks the slot dirty, so a clean shutdown's checkpoint saves it and nothing is sent again after
/// the restart, where a crash would have taken the position back.
#[test]
fn a_slot_decodes_its_own_database_and_a_clean_shutdown_saves_what_get_consumed() {
    let table = |id: u16, database: Option<&str>| TableSpec {
        id: TableId(id),
        name: "public.t".into(),
        replica_identity: ReplicaIdentity::Default,
        database: database.map(str::to_string),
        composite_key: None,
        unique_column: None,
    };
    let config =
        PostgresConfig { tables: vec![table(0, None), table(1, Some("other"))], ..(*server(None).config).clone() };
    let mut pg = Postgres::new(Node::Pg1, Role::Primary, Fixed::new(config), &[]);
    pg.start(&mut Ctx::new(SimTime(0), Node::Pg1, &mut Outbox::default()));
    let sql = |pg: &mut Postgres, request| {
        let out = send(pg, Msg::Sql { session: 1, request });
        match out.sends.into_iter().next() {
            Some((_, Msg::SqlReply { reply, .. })) => reply,
            other => panic!("no SQL reply: {other:?}"),
        }
    };
    sql(&mut pg, SqlRequest::EnsurePublication { name: "p".into(), tables: None });
    let create = SqlRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), database: Some("other".into()) };
    assert!(matches!(sql(&mut pg, create), SqlReply::Lsn(_)));
    let insert = |table: u16, key: Key| SqlRequest::Transaction {
        ops: vec![RowOp::Insert {
            table: TableId(table),
            key,
            status: crate::core::ids::Status::Submitted,
            amount_cents: 1,
        }],
    };
    sql(&mut pg, insert(0, 1));
    let SqlReply::Committed { xid: other_xid, .. } = sql(&mut pg, insert(1, 1)) else { panic!("committed") };
    let get = || SqlRequest::GetChanges { slot: "s".into(), publication: "p".into() };
    let peek = SqlRequest::PeekChanges { slot: "s".into(), publication: "p".into() };
    let xids = |reply: SqlReply| match reply {
        SqlReply::Changes(txns) => txns.iter().map(|txn| txn.xid).collect::<Vec<_>>(),
        other => panic!("changes: {other:?}"),
    };
    assert_eq!(xids(sql(&mut pg, peek)), [other_xid], "only the other database's transaction");
    assert_eq!(xids(sql(&mut pg, get())), [other_xid]);
    assert!(xids(sql(&mut pg, get())).is_empty(), "consumed");

    send(&mut pg, Msg::Control(Control::Shutdown));
    pg.crash();
    let mut out = Outbox::default();
    pg.start(&mut Ctx::new(SimTime(2), Node::Pg1, &mut out));
    assert!(
        out.observations.iter().all(|o| !matches!(o, Observation::CrashRecoveryEnded { .. })),
        "a clean shutdown is no crash"
    );
    assert!(xids(sql(&mut pg, get())).is_empty(), "the shutdown checkpoint saved the dirty slot");

    // The same after a crash: the position get moved is taken back.
    sql(&mut pg, insert(1, 2));
    assert_eq!(xids(sql(&mut pg, get())).len(), 1);
    pg.crash();
    pg.start(&mut Ctx::new(SimTime(3), Node::Pg1, &mut Outbox::default()));
    assert_eq!(xids(sql(&mut pg, get())).len(), 1, "a crash keeps only what a checkpoint saved");
}

/// `pg_replication_slot_advance`: refused below `confirmed_flush`; moves `restart_lsn` only to a
/// running-xacts record it passes, never to the target itself.
#[test]
fn advance_moves_restart_lsn_only_to_a_running_xacts_record() {
    let mut pg = server(None);
    let sql = |pg: &mut Postgres, request| match send(pg, Msg::Sql { session: 1, request }).sends.into_iter().next() {
        Some((_, Msg::SqlReply { reply, .. })) => reply,
        other => panic!("no SQL reply: {other:?}"),
    };
    let create = SqlRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), database: None };
    let SqlReply::Lsn(consistent_point) = sql(&mut pg, create) else { panic!("created") };
    let created = pg.slot("s").expect("slot").current;
    let below = SqlRequest::AdvanceSlot { slot: "s".into(), to: Lsn(consistent_point.0 - 8) };
    assert!(matches!(sql(&mut pg, below), SqlReply::Error(text) if text.contains("minimum is")));
    sql(&mut pg, SqlRequest::EmitMessage { transactional: true, prefix: "x".into(), payload_bytes: 1 << 20 });
    send(&mut pg, Msg::Control(Control::Checkpoint));
    let rx = pg.durable.wal.entries.iter().rev().find_map(|entry| match entry {
        WalEntry::RunningXacts { start, .. } => Some(*start),
        _ => None,
    });
    let current = pg.current_wal_lsn();
    assert!(
        matches!(sql(&mut pg, SqlRequest::AdvanceSlot { slot: "s".into(), to: current }), SqlReply::Lsn(at) if at == current)
    );
    let advanced = pg.slot("s").expect("slot");
    assert_eq!(advanced.current.confirmed_flush, current);
    assert_eq!(Some(advanced.current.restart_lsn), rx, "the checkpoint's running-xacts record");
    assert!(advanced.current.restart_lsn > created.restart_lsn && advanced.dirty);
}

/// `pg_replication_slot_advance` on a slot a walsender holds is refused by `ReplicationSlotAcquire`
/// ("replication slot … is active for PID …") and moves nothing; once the stream ends it is
/// accepted, and a target past the WAL end is clamped to the flush pointer (what an operator's
/// `pg_replication_slot_advance(slot, pg_current_wal_lsn())` gets).
#[test]
fn advance_is_refused_while_a_walsender_holds_the_slot() {
    let mut pg = server(None);
    let sql = |pg: &mut Postgres, request| match send(pg, Msg::Sql { session: 1, request }).sends.into_iter().next() {
        Some((_, Msg::SqlReply { reply, .. })) => reply,
        other => panic!("no SQL reply: {other:?}"),
    };
    let create = SqlRequest::CreateSlot { slot: "s".into(), plugin: "pgoutput".into(), database: None };
    let SqlReply::Lsn(consistent_point) = sql(&mut pg, create) else { panic!("created") };
    sql(&mut pg, SqlRequest::EmitMessage { transactional: true, prefix: "x".into(), payload_bytes: 1_000 });
    stream(&mut pg, 7);
    assert!(pg.slot("s").expect("slot").active.is_some(), "the walsender holds the slot");
    let to_end = SqlRequest::AdvanceSlot { slot: "s".into(), to: Lsn(u64::MAX) };
    let refused = sql(&mut pg, to_end.clone());
    assert!(matches!(&refused, SqlReply::Error(text) if text.contains("\"s\" is active")), "{refused:?}");
    assert_eq!(pg.slot("s").expect("slot").current.confirmed_flush, consistent_point, "nothing moved");
    send(&mut pg, Msg::Repl { session: 7, request: ReplRequest::Close });
    let flushed = pg.durable.wal.flush_lsn();
    assert!(flushed > consistent_point);
    assert!(matches!(sql(&mut pg, to_end), SqlReply::Lsn(at) if at == flushed), "clamped to the flush pointer");
    assert_eq!(pg.slot("s").expect("slot").current.confirmed_flush, flushed);
}
