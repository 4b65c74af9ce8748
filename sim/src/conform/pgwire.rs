//! A small synchronous PostgreSQL client for the conformance tester: connect (trust, password,
//! MD5 or SCRAM-SHA-256; no TLS), run simple queries, and stream a logical replication slot.
//!
//! Messages are encoded with `postgres_protocol::message::frontend` and parsed with
//! `postgres_protocol::message::backend::Message::parse`; the few backend messages whose
//! contents that crate only exposes through `fallible_iterator` (errors, notices, data rows,
//! the SASL mechanism list) or does not know (`CopyBothResponse`) are read here directly.
//!
//! Reads go through one buffer per connection and are bounded by socket read timeouts: a read
//! that times out leaves a partly received message in the buffer, to be completed by the next
//! read, so [`ReplicationStream::recv`] can poll without losing data.

use bytes::{BufMut, BytesMut};
use handoff_models::core::lsn::Lsn;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, SCRAM_SHA_256, ScramSha256};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long connecting, authenticating and each simple query may take before the call fails
/// with a timed-out [`PgError::Io`] (see [`Connection::set_timeout`]).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How long [`ReplicationStream::stop`] waits for the server to end the stream.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest backend message accepted (PostgreSQL's own limit on a field is 1 GB).
const MAX_MESSAGE_LEN: usize = 1 << 30;

// ---------------------------------------------------------------------------------------------
// Targets: postgres:// URLs.

/// Where to connect: parsed from a `postgres://user:password@host:port/dbname` URL.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    /// The server's host name or address, or the directory of its unix socket.
    pub host: Host,
    /// The TCP port, which also names the unix socket file (`.s.PGSQL.<port>`).
    pub port: u16,
    /// The role to log in as.
    pub user: String,
    /// The password, if the URL has one (only asked for when the server wants it).
    pub password: Option<String>,
    /// The database to connect to.
    pub dbname: String,
}

/// Where the server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// A TCP host name or address.
    Tcp(String),
    /// A directory holding the unix socket file `.s.PGSQL.<port>`.
    Unix(PathBuf),
}

impl Target {
    /// Parses a `postgres://` or `postgresql://` URL:
    /// `postgres://[user[:password]@][host][:port][/dbname][?param=value&...]`.
    ///
    /// User, password, host, dbname and parameter values are percent-decoded. A host that
    /// starts with `/` (written `%2F...` in the host part, or given as `?host=/dir`) is the
    /// directory of a unix socket, whose file is `<dir>/.s.PGSQL.<port>`; an IPv6 address is
    /// written in brackets. Defaults: host `localhost`, port 5432, user `postgres`, dbname the
    /// user. The query parameters `host`, `port`, `user`, `password` and `dbname` override the
    /// parts of the URL; `sslmode=disable` is accepted (TLS is not supported, so any other
    /// `sslmode` is an error), and any other parameter is an error.
    ///
    /// Errors name the problem and quote the URL with its password hidden.
    pub fn parse(url: &str) -> Result<Target, String> {
        let shown = redact(url);
        let rest = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
            .ok_or_else(|| format!("`{shown}` is not a postgres:// URL"))?;
        let (rest, query) = match rest.split_once('?') {
            Some((rest, query)) => (rest, query),
            None => (rest, ""),
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((userinfo, hostport)) => (userinfo, hostport),
            None => ("", authority),
        };
        let decode = |text: &str, what: &str| percent_decode(text).map_err(|why| format!("{what} in `{shown}`: {why}"));
        let (mut user, mut password) = match userinfo.split_once(':') {
            Some((user, password)) => (decode(user, "user")?, Some(decode(password, "password")?)),
            None => (decode(userinfo, "user")?, None),
        };
        let (host, port) = if let Some(bracketed) = hostport.strip_prefix('[') {
            let (host, after) =
                bracketed.split_once(']').ok_or_else(|| format!("host `{hostport}` in `{shown}` lacks its `]`"))?;
            match after.strip_prefix(':') {
                Some(port) => (host, port),
                None if after.is_empty() => (host, ""),
                None => return Err(format!("unexpected `{after}` after the host in `{shown}`")),
            }
        } else {
            hostport.rsplit_once(':').unwrap_or((hostport, ""))
        };
        let mut host = decode(host, "host")?;
        let mut port = parse_port(port, &shown)?;
        let mut dbname = decode(path, "dbname")?;
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) =
                pair.split_once('=').ok_or_else(|| format!("query parameter `{pair}` in `{shown}` has no value"))?;
            let value = decode(value, name)?;
            match name {
                "host" => host = value,
                "port" => port = parse_port(&value, &shown)?,
                "user" => user = value,
                "password" => password = Some(value),
                "dbname" => dbname = value,
                "sslmode" if value == "disable" => {}
                "sslmode" => return Err(format!("sslmode={value} in `{shown}`: TLS is not supported")),
                _ => return Err(format!("unknown query parameter `{name}` in `{shown}`")),
            }
        }
        let host = if host.is_empty() {
            Host::Tcp("localhost".to_string())
        } else if host.starts_with('/') {
            Host::Unix(PathBuf::from(host))
        } else {
            Host::Tcp(host)
        };
        if user.is_empty() {
            user = "postgres".to_string();
        }
        if dbname.is_empty() {
            dbname = user.clone();
        }
        Ok(Target { host, port, user, password, dbname })
    }

    /// The same server and role, another database.
    pub fn with_dbname(&self, dbname: &str) -> Target {
        Target { dbname: dbname.to_string(), ..self.clone() }
    }
}

/// The URL, without the password: `postgres://user@host:port/dbname`, a unix socket directory
/// percent-encoded as the host (`%2Ftmp%2Fdir`). [`Target::parse`] reads it back.
impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = match &self.host {
            Host::Tcp(host) if host.contains(':') => format!("[{host}]"),
            Host::Tcp(host) => percent_encode(host),
            Host::Unix(dir) => percent_encode(&dir.to_string_lossy()),
        };
        let (user, dbname) = (percent_encode(&self.user), percent_encode(&self.dbname));
        write!(f, "postgres://{user}@{host}:{}/{dbname}", self.port)
    }
}

/// As [`Display`](fmt::Display), with the password (if any) shown as `***`.
impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let password = if self.password.is_some() { " (password ***)" } else { "" };
        write!(f, "Target({self}{password})")
    }
}

fn parse_port(port: &str, shown: &str) -> Result<u16, String> {
    if port.is_empty() {
        return Ok(5432);
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("port `{port}` in `{shown}` is not a number from 1 to 65535")),
        Ok(port) => Ok(port),
    }
}

/// Decodes `%XX` escapes; the result must be UTF-8.
fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        if byte != b'%' {
            out.push(byte);
            at += 1;
            continue;
        }
        let escape = bytes.get(at + 1..at + 3).filter(|hex| hex.iter().all(u8::is_ascii_hexdigit));
        let value = escape
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok())
            .ok_or_else(|| format!("`%` not followed by two hex digits in `{text}`"))?;
        out.push(value);
        at += 3;
    }
    String::from_utf8(out).map_err(|_| format!("`{text}` does not decode to UTF-8"))
}

/// Encodes everything but the URL's unreserved characters.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The URL with the password of its user part and of a `password=` parameter replaced by `***`,
/// for error messages.
fn redact(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    let mut shown = match head.split_once("://") {
        Some((scheme, rest)) => {
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            match authority.rsplit_once('@') {
                Some((userinfo, hostport)) if userinfo.contains(':') => {
                    let user = userinfo.split(':').next().unwrap_or_default();
                    format!("{scheme}://{user}:***@{hostport}{path}")
                }
                _ => head.to_string(),
            }
        }
        None => head.to_string(),
    };
    if let Some(query) = query {
        let pairs: Vec<&str> =
            query.split('&').map(|pair| if pair.starts_with("password=") { "password=***" } else { pair }).collect();
        shown.push('?');
        shown.push_str(&pairs.join("&"));
    }
    shown
}

// ---------------------------------------------------------------------------------------------
// Errors.

/// What went wrong talking to the server.
#[derive(Debug)]
pub enum PgError {
    /// Connecting, reading or writing failed, or a call timed out (kind
    /// [`io::ErrorKind::TimedOut`]), or an argument was unusable (kind
    /// [`io::ErrorKind::InvalidInput`]).
    Io(io::Error),
    /// The server answered with an `ErrorResponse`.
    Server {
        /// `ERROR`, `FATAL` or `PANIC` (the non-localized severity).
        severity: String,
        /// The SQLSTATE, such as `42P01` or `57P01` (terminated by an administrator command).
        code: String,
        /// The primary message.
        message: String,
        /// The `DETAIL` field, if the server sent one.
        detail: Option<String>,
    },
    /// The server closed the connection, or ended the replication stream, without an error.
    Closed(String),
    /// The server sent something this client does not understand.
    Protocol(String),
}

impl PgError {
    /// The SQLSTATE of a [`PgError::Server`] error.
    pub fn code(&self) -> Option<&str> {
        match self {
            PgError::Server { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether the error means the server ended the session: it closed the connection or the
    /// stream ([`PgError::Closed`]), the connection was reset or broken, or the server sent a
    /// `FATAL` or `PANIC` error (such as 57P01, "terminating connection due to administrator
    /// command", when the server shuts down or a backend is terminated).
    pub fn is_disconnect(&self) -> bool {
        match self {
            PgError::Closed(_) => true,
            PgError::Io(error) => matches!(
                error.kind(),
                io::ErrorKind::ConnectionReset
                    | io::ErrorKind::ConnectionAborted
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::UnexpectedEof
            ),
            PgError::Server { severity, .. } => severity == "FATAL" || severity == "PANIC",
            PgError::Protocol(_) => false,
        }
    }
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PgError::Io(error) => write!(f, "{error}"),
            PgError::Server { severity, code, message, detail } => {
                write!(f, "{severity} {code}: {message}")?;
                match detail {
                    Some(detail) => write!(f, " ({detail})"),
                    None => Ok(()),
                }
            }
            PgError::Closed(what) => f.write_str(what),
            PgError::Protocol(what) => write!(f, "protocol error: {what}"),
        }
    }
}

impl std::error::Error for PgError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PgError::Io(error) => Some(error),
            _ => None,
        }
    }
}

impl From<io::Error> for PgError {
    fn from(error: io::Error) -> PgError {
        PgError::Io(error)
    }
}

fn invalid_input(what: String) -> PgError {
    PgError::Io(io::Error::new(io::ErrorKind::InvalidInput, what))
}

fn timed_out(what: &str, timeout: Duration) -> PgError {
    PgError::Io(io::Error::new(io::ErrorKind::TimedOut, format!("{what}: no answer within {} ms", timeout.as_millis())))
}

// ---------------------------------------------------------------------------------------------
// The socket and the backend messages read from it.

/// A TCP or unix socket.
enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(stream) => stream.set_read_timeout(timeout),
            Stream::Unix(stream) => stream.set_read_timeout(timeout),
        }
    }

    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(stream) => stream.set_write_timeout(timeout),
            Stream::Unix(stream) => stream.set_write_timeout(timeout),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(stream) => stream.read(buf),
            Stream::Unix(stream) => stream.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(stream) => stream.write(buf),
            Stream::Unix(stream) => stream.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(stream) => stream.flush(),
            Stream::Unix(stream) => stream.flush(),
        }
    }
}

/// A backend message: parsed by `postgres_protocol`, or one of those read here.
enum Backend {
    Message(Message),
    /// `ErrorResponse`, as the error it becomes.
    Error(PgError),
    /// `NoticeResponse` (ignored).
    Notice,
    /// `DataRow`: text values, `None` for NULL.
    DataRow(Vec<Option<String>>),
    /// `CopyBothResponse` (the replication stream has begun).
    CopyBoth,
    /// `AuthenticationSASL`: the mechanisms the server offers.
    Sasl(Vec<String>),
}

impl Backend {
    /// Decodes one whole message (tag, length and body).
    fn decode(mut frame: BytesMut) -> Result<Backend, PgError> {
        let tag = frame.first().copied().unwrap_or_default();
        let body = frame.get(5..).unwrap_or_default();
        match tag {
            b'E' => return Ok(Backend::Error(error_fields(body)?)),
            b'N' => return Ok(Backend::Notice),
            b'D' => return Ok(Backend::DataRow(data_row(body)?)),
            b'W' => return Ok(Backend::CopyBoth),
            b'R' if body.get(..4) == Some(&10u32.to_be_bytes()[..]) => {
                let names = body.get(4..).unwrap_or_default().split(|&byte| byte == 0);
                let names =
                    names.filter(|name| !name.is_empty()).map(|name| String::from_utf8_lossy(name).into_owned());
                return Ok(Backend::Sasl(names.collect()));
            }
            _ => {}
        }
        match Message::parse(&mut frame) {
            Ok(Some(message)) => Ok(Backend::Message(message)),
            Ok(None) => Err(PgError::Protocol(format!("message `{}` is cut short", char::from(tag)))),
            Err(error) => Err(PgError::Protocol(format!("message `{}`: {error}", char::from(tag)))),
        }
    }
}

/// The fields of an `ErrorResponse`: (type byte, NUL-terminated text)*, then a NUL.
fn error_fields(body: &[u8]) -> Result<PgError, PgError> {
    let (mut severity, mut localized, mut code, mut message, mut detail) = (None, None, None, None, None);
    let mut rest = body;
    while let Some((&kind, after)) = rest.split_first() {
        if kind == 0 {
            break;
        }
        let end = after.iter().position(|&byte| byte == 0).ok_or_else(|| {
            PgError::Protocol(format!("ErrorResponse field `{}` is not NUL-terminated", char::from(kind)))
        })?;
        let value = String::from_utf8_lossy(&after[..end]).into_owned();
        match kind {
            b'V' => severity = Some(value),
            b'S' => localized = Some(value),
            b'C' => code = Some(value),
            b'M' => message = Some(value),
            b'D' => detail = Some(value),
            _ => {}
        }
        rest = &after[end + 1..];
    }
    Ok(PgError::Server {
        severity: severity.or(localized).unwrap_or_else(|| "ERROR".to_string()),
        code: code.unwrap_or_default(),
        message: message.unwrap_or_default(),
        detail,
    })
}

/// The values of a `DataRow`: Int16 count, then per column Int32 length (-1 for NULL) and bytes.
fn data_row(body: &[u8]) -> Result<Vec<Option<String>>, PgError> {
    let cut_short = || PgError::Protocol("DataRow is cut short".to_string());
    let count = body.get(..2).ok_or_else(cut_short)?;
    let count = u16::from_be_bytes([count[0], count[1]]);
    let mut rest = &body[2..];
    let mut values = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        let len = rest.get(..4).ok_or_else(cut_short)?;
        let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
        rest = &rest[4..];
        let Ok(len) = usize::try_from(len) else {
            values.push(None);
            continue;
        };
        let value = rest.get(..len).ok_or_else(cut_short)?;
        let value = String::from_utf8(value.to_vec())
            .map_err(|_| PgError::Protocol("a DataRow value is not UTF-8".to_string()))?;
        values.push(Some(value));
        rest = &rest[len..];
    }
    Ok(values)
}

fn be_u64(data: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(data.get(at..at + 8)?.try_into().ok()?))
}

fn be_u32(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?))
}

// ---------------------------------------------------------------------------------------------
// Connections.

/// A connection to a PostgreSQL server, ready for queries.
pub struct Connection {
    stream: Stream,
    /// Received bytes not yet taken as whole messages.
    read_buf: BytesMut,
    /// Whether the server is waiting for a command (the last one finished with
    /// `ReadyForQuery`). After a timeout or a broken message the connection is unusable.
    ready: bool,
    timeout: Duration,
    /// Describes the target for error messages.
    name: String,
}

impl Connection {
    /// Connects, starts up (protocol 3.0) with the target's user and database,
    /// `application_name` `handoff conform`, `client_encoding` `UTF8`, and, when `replication`
    /// is true, `replication=database` (a logical replication connection, which also runs SQL),
    /// then authenticates (trust, cleartext password, MD5 or SCRAM-SHA-256 without channel
    /// binding; no TLS) and waits for the server to be ready. Each step is bounded by
    /// [`DEFAULT_TIMEOUT`].
    ///
    /// A server that refuses the connection answers with a [`PgError::Server`], for instance
    /// `57P03` while it starts up or shuts down, `3D000` for a missing database.
    pub fn connect(target: &Target, replication: bool) -> Result<Connection, PgError> {
        let name = target.to_string();
        let stream =
            open(target).map_err(|error| io::Error::new(error.kind(), format!("cannot connect to {name}: {error}")))?;
        stream.set_write_timeout(Some(DEFAULT_TIMEOUT))?;
        let mut connection = Connection {
            stream,
            read_buf: BytesMut::with_capacity(8192),
            ready: false,
            timeout: DEFAULT_TIMEOUT,
            name,
        };
        let mut parameters = vec![
            ("user", target.user.as_str()),
            ("database", target.dbname.as_str()),
            ("application_name", "handoff conform"),
            ("client_encoding", "UTF8"),
        ];
        if replication {
            parameters.push(("replication", "database"));
        }
        let mut buf = BytesMut::new();
        frontend::startup_message(parameters, &mut buf)?;
        connection.send(&buf)?;
        connection.authenticate(target)?;
        let deadline = Instant::now() + connection.timeout;
        loop {
            match connection.next(deadline, "starting up")? {
                Backend::Message(Message::ReadyForQuery(_)) => break,
                Backend::Error(error) => return Err(error),
                Backend::Notice
                | Backend::Message(Message::ParameterStatus(_))
                | Backend::Message(Message::BackendKeyData(_)) => {}
                other => return Err(unexpected(&other, "starting up")),
            }
        }
        connection.ready = true;
        Ok(connection)
    }

    /// Sets how long each later [`simple_query`](Self::simple_query) and
    /// [`start_replication`](Self::start_replication) may wait for the server (default [`DEFAULT_TIMEOUT`]). A query that times out fails
    /// with a timed-out [`PgError::Io`] and leaves the connection unusable.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Runs SQL (one or more statements) with the simple-query protocol and returns the rows of
    /// the last statement that returned rows (empty if none did), each a vector of text values,
    /// `None` for NULL.
    ///
    /// An `ErrorResponse` becomes a [`PgError::Server`]; the answer is read to its end first, so
    /// the connection stays usable (unless the error was `FATAL`). Any other error leaves the
    /// connection unusable: later calls fail.
    pub fn simple_query(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, PgError> {
        self.check_ready()?;
        let mut buf = BytesMut::new();
        frontend::query(sql, &mut buf).map_err(|error| invalid_input(format!("query: {error}")))?;
        self.ready = false;
        self.send(&buf)?;
        let deadline = Instant::now() + self.timeout;
        let mut rows = Vec::new();
        let mut failure = None;
        loop {
            let message = match self.next(deadline, "running a query") {
                Ok(message) => message,
                // After a FATAL error the server closes the connection: report the error.
                Err(error) => return Err(failure.unwrap_or(error)),
            };
            match message {
                Backend::Message(Message::ReadyForQuery(_)) => break,
                Backend::Message(Message::RowDescription(_)) => rows.clear(),
                Backend::DataRow(row) => rows.push(row),
                Backend::Error(error) => failure = Some(error),
                Backend::Message(Message::CopyInResponse(_)) => {
                    let mut buf = BytesMut::new();
                    frontend::copy_fail("COPY FROM STDIN is not supported by this client", &mut buf)?;
                    self.send(&buf)?;
                }
                Backend::Notice
                | Backend::Message(
                    Message::CommandComplete(_)
                    | Message::EmptyQueryResponse
                    | Message::ParameterStatus(_)
                    | Message::NotificationResponse(_)
                    | Message::CopyOutResponse(_)
                    | Message::CopyData(_)
                    | Message::CopyDone,
                ) => {}
                other => return Err(unexpected(&other, "running a query")),
            }
        }
        self.ready = true;
        match failure {
            Some(error) => Err(error),
            None => Ok(rows),
        }
    }

    /// The first value of the first row of [`simple_query`](Self::simple_query)'s answer;
    /// `None` if there is no row or the value is NULL.
    pub fn query_one(&mut self, sql: &str) -> Result<Option<String>, PgError> {
        let rows = self.simple_query(sql)?;
        Ok(rows.into_iter().next().and_then(|row| row.into_iter().next()).flatten())
    }

    /// On a replication connection (see [`connect`](Self::connect)), starts streaming a logical
    /// slot: sends `START_REPLICATION SLOT "<slot>" LOGICAL <start> ("name" 'value', ...)`,
    /// where `start` is an LSN written as PostgreSQL does (`0/0` for the slot's confirmed
    /// position), and waits for the server's `CopyBothResponse`.
    pub fn start_replication(
        mut self,
        slot: &str,
        start: &str,
        options: &[(&str, &str)],
    ) -> Result<ReplicationStream, PgError> {
        self.check_ready()?;
        let lsn = Lsn::parse(start).ok_or_else(|| invalid_input(format!("`{start}` is not an LSN like 0/16B3748")))?;
        let mut command = format!("START_REPLICATION SLOT {} LOGICAL {lsn}", quote_identifier(slot));
        if !options.is_empty() {
            let options: Vec<String> = options
                .iter()
                .map(|(name, value)| format!("{} {}", quote_identifier(name), quote_literal(value)))
                .collect();
            command.push_str(&format!(" ({})", options.join(", ")));
        }
        let mut buf = BytesMut::new();
        frontend::query(&command, &mut buf).map_err(|error| invalid_input(format!("{command}: {error}")))?;
        self.ready = false;
        self.send(&buf)?;
        let deadline = Instant::now() + self.timeout;
        let mut failure = None;
        loop {
            let message = match self.next(deadline, "starting replication") {
                Ok(message) => message,
                Err(error) => return Err(failure.unwrap_or(error)),
            };
            match message {
                Backend::CopyBoth if failure.is_none() => return Ok(ReplicationStream { connection: self }),
                Backend::Error(error) => failure = Some(error),
                Backend::Message(Message::ReadyForQuery(_)) => {
                    self.ready = true;
                    return Err(failure.unwrap_or_else(|| {
                        PgError::Protocol("START_REPLICATION finished without streaming".to_string())
                    }));
                }
                Backend::Notice | Backend::Message(Message::ParameterStatus(_)) => {}
                other => return Err(unexpected(&other, "starting replication")),
            }
        }
    }

    fn check_ready(&self) -> Result<(), PgError> {
        if self.ready {
            Ok(())
        } else {
            Err(PgError::Protocol(format!("the connection to {} is unusable after an earlier error", self.name)))
        }
    }

    /// Answers the server's authentication requests until `AuthenticationOk`.
    fn authenticate(&mut self, target: &Target) -> Result<(), PgError> {
        let deadline = Instant::now() + self.timeout;
        let password = || {
            target
                .password
                .as_deref()
                .map(str::as_bytes)
                .ok_or_else(|| PgError::Protocol(format!("the server asks for a password and {target} has none")))
        };
        let mut buf = BytesMut::new();
        match self.next(deadline, "authenticating")? {
            Backend::Message(Message::AuthenticationOk) => return Ok(()),
            Backend::Message(Message::AuthenticationCleartextPassword) => {
                frontend::password_message(password()?, &mut buf)?;
            }
            Backend::Message(Message::AuthenticationMd5Password(body)) => {
                let hash = md5_hash(target.user.as_bytes(), password()?, body.salt());
                frontend::password_message(hash.as_bytes(), &mut buf)?;
            }
            Backend::Sasl(mechanisms) => {
                if !mechanisms.iter().any(|mechanism| mechanism == SCRAM_SHA_256) {
                    return Err(PgError::Protocol(format!(
                        "the server offers SASL {}, not {SCRAM_SHA_256}",
                        mechanisms.join(", ")
                    )));
                }
                let mut scram = ScramSha256::new(password()?, ChannelBinding::unsupported());
                frontend::sasl_initial_response(SCRAM_SHA_256, scram.message(), &mut buf)?;
                self.send(&buf)?;
                buf.clear();
                match self.next(deadline, "authenticating")? {
                    Backend::Message(Message::AuthenticationSaslContinue(body)) => {
                        scram.update(body.data()).map_err(|error| PgError::Protocol(format!("SCRAM: {error}")))?;
                    }
                    Backend::Error(error) => return Err(error),
                    other => return Err(unexpected(&other, "authenticating")),
                }
                frontend::sasl_response(scram.message(), &mut buf)?;
                self.send(&buf)?;
                buf.clear();
                match self.next(deadline, "authenticating")? {
                    Backend::Message(Message::AuthenticationSaslFinal(body)) => {
                        scram.finish(body.data()).map_err(|error| PgError::Protocol(format!("SCRAM: {error}")))?;
                    }
                    Backend::Error(error) => return Err(error),
                    other => return Err(unexpected(&other, "authenticating")),
                }
            }
            Backend::Error(error) => return Err(error),
            other => {
                return Err(unexpected(&other, "authenticating (only trust, password, md5 and SCRAM are supported)"));
            }
        }
        if !buf.is_empty() {
            self.send(&buf)?;
        }
        match self.next(deadline, "authenticating")? {
            Backend::Message(Message::AuthenticationOk) => Ok(()),
            Backend::Error(error) => Err(error),
            other => Err(unexpected(&other, "authenticating")),
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), PgError> {
        self.stream.write_all(bytes)?;
        Ok(())
    }

    /// The next message, failing with a timeout error at `deadline`.
    fn next(&mut self, deadline: Instant, doing: &str) -> Result<Backend, PgError> {
        match self.read_frame(deadline)? {
            Some(frame) => Backend::decode(frame),
            None => Err(timed_out(&format!("{doing} on {}", self.name), self.timeout)),
        }
    }

    /// The next whole message (tag, length and body), or `None` at `deadline`. Bytes of a
    /// message not yet complete stay in the buffer for the next call.
    fn read_frame(&mut self, deadline: Instant) -> Result<Option<BytesMut>, PgError> {
        loop {
            if let Some(header) = self.read_buf.get(..5) {
                let len = usize::try_from(be_u32(header, 1).unwrap_or_default()).unwrap_or(usize::MAX);
                if !(4..=MAX_MESSAGE_LEN).contains(&len) {
                    return Err(PgError::Protocol(format!("message `{}` has length {len}", char::from(header[0]))));
                }
                if self.read_buf.len() > len {
                    return Ok(Some(self.read_buf.split_to(len + 1)));
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.stream.set_read_timeout(Some(left))?;
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(PgError::Closed(format!("{} closed the connection", self.name))),
                Ok(read) => self.read_buf.put_slice(&chunk[..read]),
                Err(error) if matches!(error.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error.into()),
            }
        }
    }
}

/// Says goodbye (`Terminate`), best effort, waiting at most a second.
impl Drop for Connection {
    fn drop(&mut self) {
        let mut buf = BytesMut::new();
        frontend::terminate(&mut buf);
        let _ = self.stream.set_write_timeout(Some(Duration::from_secs(1)));
        let _ = self.stream.write_all(&buf);
    }
}

fn open(target: &Target) -> io::Result<Stream> {
    match &target.host {
        Host::Unix(dir) => Ok(Stream::Unix(UnixStream::connect(dir.join(format!(".s.PGSQL.{}", target.port)))?)),
        Host::Tcp(host) => {
            let mut last = io::Error::new(io::ErrorKind::NotFound, "the host name has no address");
            for address in (host.as_str(), target.port).to_socket_addrs()? {
                match TcpStream::connect_timeout(&address, DEFAULT_TIMEOUT) {
                    Ok(stream) => {
                        stream.set_nodelay(true)?;
                        return Ok(Stream::Tcp(stream));
                    }
                    Err(error) => last = error,
                }
            }
            Err(last)
        }
    }
}

fn unexpected(message: &Backend, doing: &str) -> PgError {
    let what = match message {
        Backend::Message(Message::ReadyForQuery(_)) => "ReadyForQuery",
        Backend::Message(Message::CopyData(_)) => "CopyData",
        Backend::Message(Message::CopyDone) => "CopyDone",
        Backend::Message(Message::CommandComplete(_)) => "CommandComplete",
        Backend::Message(Message::AuthenticationOk) => "AuthenticationOk",
        Backend::Message(Message::AuthenticationGss | Message::AuthenticationGssContinue(_)) => "GSSAPI authentication",
        Backend::Message(Message::AuthenticationSspi) => "SSPI authentication",
        Backend::Message(Message::AuthenticationKerberosV5) => "Kerberos authentication",
        Backend::Message(Message::AuthenticationScmCredential) => "SCM credential authentication",
        Backend::Message(_) => "a message",
        Backend::Error(_) => "ErrorResponse",
        Backend::Notice => "NoticeResponse",
        Backend::DataRow(_) => "DataRow",
        Backend::CopyBoth => "CopyBothResponse",
        Backend::Sasl(_) => "AuthenticationSASL",
    };
    PgError::Protocol(format!("unexpected {what} while {doing}"))
}

/// `"name"`, with `"` doubled.
fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `'value'`, with `'` doubled.
fn quote_literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

// ---------------------------------------------------------------------------------------------
// Replication.

/// A logical replication stream (the connection in `CopyBoth` mode), from
/// [`Connection::start_replication`].
pub struct ReplicationStream {
    connection: Connection,
}

/// A message of the replication stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicationMessage {
    /// `w` XLogData: the WAL position the data starts at, the server's WAL end, and the output
    /// plugin's message (see [`parse_pgoutput`]).
    XLogData { wal_start: u64, wal_end: u64, data: Vec<u8> },
    /// `k` primary keepalive: the server's WAL end, and whether it wants a status update now.
    Keepalive { wal_end: u64, reply_requested: bool },
}

impl ReplicationStream {
    /// Waits up to `timeout` for the next message; `Ok(None)` if none came.
    ///
    /// When the server ends the stream the result is an error: a [`PgError::Server`] such as
    /// `FATAL 57P01` ("terminating connection due to administrator command"), or
    /// [`PgError::Closed`] if it closed the connection or ended the copy without an error;
    /// [`PgError::is_disconnect`] is true for all of these.
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<ReplicationMessage>, PgError> {
        let deadline = Instant::now() + timeout;
        loop {
            let Some(frame) = self.connection.read_frame(deadline)? else { return Ok(None) };
            match Backend::decode(frame)? {
                Backend::Message(Message::CopyData(body)) => return parse_replication_message(body.data()).map(Some),
                Backend::Error(error) => return Err(error),
                Backend::Notice | Backend::Message(Message::ParameterStatus(_)) => {}
                Backend::Message(Message::CopyDone) => {
                    return Err(PgError::Closed(format!("{} ended the replication stream", self.connection.name)));
                }
                Backend::Message(Message::CommandComplete(_) | Message::ReadyForQuery(_)) => {
                    return Err(PgError::Closed(format!("{} ended the replication command", self.connection.name)));
                }
                other => return Err(unexpected(&other, "streaming")),
            }
        }
    }

    /// Sends a standby status update (`r`): the positions written, flushed (what the slot may
    /// confirm) and applied, and whether the server should answer with a keepalive at once.
    /// The clock field is sent as 0 (the server only reports it).
    pub fn send_status(&mut self, write: u64, flush: u64, apply: u64, reply_requested: bool) -> Result<(), PgError> {
        let mut update = BytesMut::with_capacity(34);
        update.put_u8(b'r');
        update.put_u64(write);
        update.put_u64(flush);
        update.put_u64(apply);
        update.put_u64(0);
        update.put_u8(u8::from(reply_requested));
        let mut buf = BytesMut::new();
        frontend::CopyData::new(&update[..])?.write(&mut buf);
        self.connection.send(&buf)
    }

    /// Ends the stream: sends `CopyDone`, reads (and drops) what the server still sends until
    /// it finishes the command (`ReadyForQuery`) or closes the connection, then says goodbye.
    /// Gives up after a few seconds with a timed-out [`PgError::Io`]; a server that is already
    /// gone is not an error, but an `ErrorResponse` is.
    pub fn stop(mut self) -> Result<(), PgError> {
        let mut buf = BytesMut::new();
        frontend::copy_done(&mut buf);
        match self.connection.send(&buf) {
            Err(error) if error.is_disconnect() => return Ok(()),
            result => result?,
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            let frame = match self.connection.read_frame(deadline) {
                Ok(Some(frame)) => frame,
                Ok(None) => {
                    return Err(timed_out(&format!("stopping the stream of {}", self.connection.name), STOP_TIMEOUT));
                }
                Err(error) if error.is_disconnect() => return Ok(()),
                Err(error) => return Err(error),
            };
            match Backend::decode(frame)? {
                Backend::Message(Message::ReadyForQuery(_)) => {
                    self.connection.ready = true;
                    return Ok(());
                }
                Backend::Error(error) => return Err(error),
                _ => {}
            }
        }
    }
}

/// Reads the contents of a replication `CopyData`.
fn parse_replication_message(data: &[u8]) -> Result<ReplicationMessage, PgError> {
    let cut_short = |what: &str| PgError::Protocol(format!("{what} message of {} bytes is cut short", data.len()));
    match data.first() {
        // 'w', Int64 walStart, Int64 walEnd, Int64 sendTime, Byte_n data.
        Some(b'w') => Ok(ReplicationMessage::XLogData {
            wal_start: be_u64(data, 1).ok_or_else(|| cut_short("XLogData"))?,
            wal_end: be_u64(data, 9).ok_or_else(|| cut_short("XLogData"))?,
            data: data.get(25..).ok_or_else(|| cut_short("XLogData"))?.to_vec(),
        }),
        // 'k', Int64 walEnd, Int64 sendTime, Byte1 replyRequested.
        Some(b'k') => Ok(ReplicationMessage::Keepalive {
            wal_end: be_u64(data, 1).ok_or_else(|| cut_short("keepalive"))?,
            reply_requested: *data.get(17).ok_or_else(|| cut_short("keepalive"))? != 0,
        }),
        Some(&tag) => Err(PgError::Protocol(format!("unknown replication message `{}`", char::from(tag)))),
        None => Err(PgError::Protocol("empty replication message".to_string())),
    }
}

// ---------------------------------------------------------------------------------------------
// pgoutput.

/// A message of the `pgoutput` plugin (protocol version 1), as far as the tester reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PgOutput {
    /// `B`: a transaction begins; `final_lsn` is the LSN of its commit record.
    Begin { final_lsn: u64, xid: u32 },
    /// `C`: a transaction commits; `end_lsn` is the end of its commit record, the position to
    /// confirm once the transaction is processed.
    Commit { commit_lsn: u64, end_lsn: u64 },
    /// Any other message, by its tag (`R` relation, `I` insert, `U` update, `D` delete, ...).
    Other(u8),
}

/// Reads a `pgoutput` message (the data of [`ReplicationMessage::XLogData`]).
pub fn parse_pgoutput(data: &[u8]) -> Result<PgOutput, PgError> {
    let cut_short = |what: &str| PgError::Protocol(format!("pgoutput {what} of {} bytes is cut short", data.len()));
    match data.first() {
        // 'B', Int64 final LSN, Int64 commit timestamp, Int32 xid.
        Some(b'B') => Ok(PgOutput::Begin {
            final_lsn: be_u64(data, 1).ok_or_else(|| cut_short("Begin"))?,
            xid: be_u32(data, 17).ok_or_else(|| cut_short("Begin"))?,
        }),
        // 'C', Int8 flags, Int64 commit LSN, Int64 end LSN, Int64 commit timestamp.
        Some(b'C') => {
            if data.len() < 26 {
                return Err(cut_short("Commit"));
            }
            Ok(PgOutput::Commit {
                commit_lsn: be_u64(data, 2).ok_or_else(|| cut_short("Commit"))?,
                end_lsn: be_u64(data, 10).ok_or_else(|| cut_short("Commit"))?,
            })
        }
        Some(&tag) => Ok(PgOutput::Other(tag)),
        None => Err(PgError::Protocol("empty pgoutput message".to_string())),
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(
            Target::parse("postgres://u:p@db.example:6543/app"),
            Ok(tcp("db.example", 6543, "u", Some("p"), "app"))
        );
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
}
