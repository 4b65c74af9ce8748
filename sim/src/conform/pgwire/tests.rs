use super::connection::{quote_identifier, quote_literal};
use super::replication::parse_replication_message;
use super::socket::{data_row, error_fields};
use super::*;

fn tcp(host: &str, port: u16, user: &str, password: Option<&str>, dbname: &str) -> Target {
    Target {
        host: Host::Tcp(host.to_string()),
        port,
        user: user.to_string(),
        password: password.map(str::to_string),
        dbname: dbname.to_string(),
    }
}

#[test]
fn parses_tcp_urls() {
    assert_eq!(Target::parse("postgres://u:p@db.example:6543/app"), Ok(tcp("db.example", 6543, "u", Some("p"), "app")));
    assert_eq!(Target::parse("postgresql://h"), Ok(tcp("h", 5432, "postgres", None, "postgres")));
    assert_eq!(Target::parse("postgres://"), Ok(tcp("localhost", 5432, "postgres", None, "postgres")));
    assert_eq!(Target::parse("postgres://bob@h/"), Ok(tcp("h", 5432, "bob", None, "bob")));
    assert_eq!(Target::parse("postgres://[::1]:7/d"), Ok(tcp("::1", 7, "postgres", None, "d")));
    assert_eq!(Target::parse("postgres://h/d?sslmode=disable&port=9"), Ok(tcp("h", 9, "postgres", None, "d")));
}

#[test]
fn decodes_percent_escapes() {
    let target = Target::parse("postgres://al%20ice:p%40ss%3Aw%2Fd@h/my%2Fdb").expect("parses");
    assert_eq!(target, tcp("h", 5432, "al ice", Some("p@ss:w/d"), "my/db"));
    // An unescaped `@` in the password: the last `@` ends the user part.
    assert_eq!(Target::parse("postgres://u:a@b@h/d"), Ok(tcp("h", 5432, "u", Some("a@b"), "d")));
    assert_eq!(Target::parse("postgres://u:%C3%A9@h/d"), Ok(tcp("h", 5432, "u", Some("é"), "d")));
}

#[test]
fn parses_unix_socket_urls() {
    let by_host = Target::parse("postgres://handoff@%2Ftmp%2Fhandoff-pg-1-0:20001/postgres").expect("parses");
    assert_eq!(by_host.host, Host::Unix(PathBuf::from("/tmp/handoff-pg-1-0")));
    assert_eq!((by_host.port, by_host.user.as_str(), by_host.dbname.as_str()), (20001, "handoff", "postgres"));
    let by_query = Target::parse("postgres://handoff@:20001/postgres?host=/tmp/handoff-pg-1-0").expect("parses");
    assert_eq!(by_query, by_host);
    let by_query = Target::parse("postgres:///db?host=%2Fvar%2Frun%2Fpostgresql").expect("parses");
    assert_eq!(by_query.host, Host::Unix(PathBuf::from("/var/run/postgresql")));
    assert_eq!(by_query.dbname, "db");
}

#[test]
fn display_round_trips_without_the_password() {
    for url in
        ["postgres://u:secret@h:1/d", "postgres://handoff@%2Ftmp%2Fa%20b:20001/x%2Fy", "postgres://u@[::1]:5432/d"]
    {
        let target = Target::parse(url).expect("parses");
        let shown = target.to_string();
        assert!(!shown.contains("secret"), "{shown}");
        assert_eq!(
            Target::parse(&shown).map(|t| Target { password: None, ..t }),
            Ok(Target { password: None, ..target })
        );
    }
    assert_eq!(Target::parse("postgres://u:pw@h/d").expect("parses").to_string(), "postgres://u@h:5432/d");
    let target = Target::parse("postgres://u:pw@h/d").expect("parses");
    assert_eq!(target.with_dbname("other").dbname, "other");
    assert!(!format!("{target:?}").contains("pw"));
}

#[test]
fn rejects_bad_urls() {
    let error = |url: &str| Target::parse(url).expect_err(url);
    assert_eq!(error("postgres//x"), "`postgres//x` is not a postgres:// URL");
    assert_eq!(error("mysql://x"), "`mysql://x` is not a postgres:// URL");
    assert_eq!(error("postgres://h:abc/d"), "port `abc` in `postgres://h:abc/d` is not a number from 1 to 65535");
    assert_eq!(error("postgres://h:0/d"), "port `0` in `postgres://h:0/d` is not a number from 1 to 65535");
    assert_eq!(error("postgres://h:70000"), "port `70000` in `postgres://h:70000` is not a number from 1 to 65535");
    assert_eq!(
        error("postgres://h/d?sslmode=require"),
        "sslmode=require in `postgres://h/d?sslmode=require`: TLS is not supported"
    );
    assert_eq!(
        error("postgres://h/d?connect_timeout=3"),
        "unknown query parameter `connect_timeout` in `postgres://h/d?connect_timeout=3`"
    );
    assert_eq!(error("postgres://h/d?host"), "query parameter `host` in `postgres://h/d?host` has no value");
    assert_eq!(error("postgres://[::1/d"), "host `[::1` in `postgres://[::1/d` lacks its `]`");
    assert!(error("postgres://u%2/d").contains("`%` not followed by two hex digits"));
    assert!(error("postgres://u%FF@h/d").contains("does not decode to UTF-8"));
    // The password never appears in a message.
    let message = error("postgres://u:hunter2@h:x/d");
    assert!(message.contains("postgres://u:***@h:x/d") && !message.contains("hunter2"), "{message}");
    let message = error("postgres://u@h/d?password=hunter2&x=1");
    assert!(!message.contains("hunter2"), "{message}");
}

#[test]
fn parses_pgoutput_messages() {
    let mut begin = vec![b'B'];
    begin.extend(0x1_0000_0020u64.to_be_bytes());
    begin.extend(123u64.to_be_bytes());
    begin.extend(747u32.to_be_bytes());
    assert_eq!(parse_pgoutput(&begin).ok(), Some(PgOutput::Begin { final_lsn: 0x1_0000_0020, xid: 747 }));
    let mut commit = vec![b'C', 0];
    commit.extend(0x20u64.to_be_bytes());
    commit.extend(0x48u64.to_be_bytes());
    commit.extend(123u64.to_be_bytes());
    assert_eq!(parse_pgoutput(&commit).ok(), Some(PgOutput::Commit { commit_lsn: 0x20, end_lsn: 0x48 }));
    assert_eq!(parse_pgoutput(b"R\0\0\0\x01").ok(), Some(PgOutput::Other(b'R')));
    assert!(parse_pgoutput(&begin[..20]).is_err());
    assert!(parse_pgoutput(&commit[..25]).is_err());
    assert!(parse_pgoutput(&[]).is_err());
}

#[test]
fn parses_replication_messages() {
    let mut data = vec![b'w'];
    data.extend(5u64.to_be_bytes());
    data.extend(9u64.to_be_bytes());
    data.extend(0u64.to_be_bytes());
    data.extend(b"xyz");
    assert_eq!(
        parse_replication_message(&data).ok(),
        Some(ReplicationMessage::XLogData { wal_start: 5, wal_end: 9, data: b"xyz".to_vec() })
    );
    let mut keepalive = vec![b'k'];
    keepalive.extend(7u64.to_be_bytes());
    keepalive.extend(0u64.to_be_bytes());
    keepalive.push(1);
    assert_eq!(
        parse_replication_message(&keepalive).ok(),
        Some(ReplicationMessage::Keepalive { wal_end: 7, reply_requested: true })
    );
    assert!(parse_replication_message(&keepalive[..17]).is_err());
    assert!(parse_replication_message(&data[..24]).is_err());
    assert!(parse_replication_message(b"?").is_err());
}

#[test]
fn reads_error_fields_and_rows() {
    let body = b"SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0\0";
    let error = error_fields(body).expect("parses");
    assert_eq!(error.code(), Some("57P01"));
    assert!(error.is_disconnect());
    assert_eq!(error.to_string(), "FATAL 57P01: terminating connection due to administrator command");
    assert!(error_fields(b"Mno end").is_err());
    let mut row = 2u16.to_be_bytes().to_vec();
    row.extend(2i32.to_be_bytes());
    row.extend(b"hi");
    row.extend((-1i32).to_be_bytes());
    assert_eq!(data_row(&row).ok(), Some(vec![Some("hi".to_string()), None]));
    assert!(data_row(&row[..5]).is_err());
}

#[test]
fn quotes_replication_options() {
    assert_eq!(quote_identifier("a\"b"), "\"a\"\"b\"");
    assert_eq!(quote_literal("it's"), "'it''s'");
}

/// Row changes carry the first column of the tuple pgoutput sends; an update's old key tuple is
/// skipped; messages carry their flags, prefix and content.
#[test]
fn reads_pgoutput_changes_and_messages() {
    // TupleData: Int16 columns, then per column 'n' | 'u' | 't' Int32 length, bytes.
    fn tuple(columns: &[Option<&str>]) -> Vec<u8> {
        let mut data = (columns.len() as u16).to_be_bytes().to_vec();
        for column in columns {
            match column {
                None => data.push(b'n'),
                Some(text) => {
                    data.push(b't');
                    data.extend((text.len() as u32).to_be_bytes());
                    data.extend(text.as_bytes());
                }
            }
        }
        data
    }
    let change = |kind: u8, parts: &[(u8, Vec<u8>)]| {
        let mut data = vec![kind];
        data.extend(16439u32.to_be_bytes());
        for (marker, tuple) in parts {
            data.push(*marker);
            data.extend(tuple);
        }
        parse_pgoutput(&data).expect("parses")
    };
    let insert = change(b'I', &[(b'N', tuple(&[Some("101"), Some("0")]))]);
    assert_eq!(insert, PgOutput::Change { kind: b'I', first_column: Some("101".into()) });
    let update = change(b'U', &[(b'K', tuple(&[Some("7")])), (b'N', tuple(&[Some("8"), None]))]);
    assert_eq!(update, PgOutput::Change { kind: b'U', first_column: Some("8".into()) });
    let delete = change(b'D', &[(b'K', tuple(&[Some("131"), None]))]);
    assert_eq!(delete, PgOutput::Change { kind: b'D', first_column: Some("131".into()) });
    let mut message = vec![b'M', 1];
    message.extend(0x00EB_B000_u64.to_be_bytes());
    message.extend(b"p\0");
    message.extend(8u32.to_be_bytes());
    message.extend(b"x-commit");
    assert_eq!(
        parse_pgoutput(&message).expect("parses"),
        PgOutput::Message { transactional: true, lsn: 0x00EB_B000, prefix: "p".into(), content: b"x-commit".to_vec() }
    );
    message.truncate(message.len() - 1);
    assert!(parse_pgoutput(&message).is_err(), "a message cut short is an error");
    let mut bad = vec![b'I'];
    bad.extend(1u32.to_be_bytes());
    bad.push(b'X');
    assert!(parse_pgoutput(&bad).is_err(), "an unknown tuple marker is an error");
}
