//! Connections: start-up, authentication (password, MD5, SCRAM-SHA-256) and simple queries.

use super::*;

/// A connection to a PostgreSQL server, ready for queries.
pub struct Connection {
    stream: Stream,
    /// Received bytes not yet taken as whole messages.
    read_buf: BytesMut,
    /// Whether the server is waiting for a command (the last one finished with
    /// `ReadyForQuery`). After a timeout or a broken message the connection is unusable.
    pub(super) ready: bool,
    timeout: Duration,
    /// Describes the target for error messages.
    pub(super) name: String,
    /// What arrived so far of the answer to a query sent with [`Connection::send_query`].
    pending: Option<PendingQuery>,
}

/// The answer to a query, as far as it has arrived.
#[derive(Default)]
struct PendingQuery {
    rows: Vec<Vec<Option<String>>>,
    failure: Option<PgError>,
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
            pending: None,
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
        self.send_query(sql)?;
        match self.poll_result(self.timeout)? {
            Some(rows) => Ok(rows),
            None => Err(timed_out(&format!("running a query on {}", self.name), self.timeout)),
        }
    }

    /// Sends SQL with the simple-query protocol without waiting for the answer: read it with
    /// [`poll_result`](Self::poll_result). Until the answer is read, the connection runs nothing
    /// else (for a command that may wait on locks, such as a slot creation).
    pub fn send_query(&mut self, sql: &str) -> Result<(), PgError> {
        self.check_ready()?;
        let mut buf = BytesMut::new();
        frontend::query(sql, &mut buf).map_err(|error| invalid_input(format!("query: {error}")))?;
        self.ready = false;
        self.pending = Some(PendingQuery::default());
        self.send(&buf)
    }

    /// Reads the answer to [`send_query`](Self::send_query) for up to `timeout`: the rows of
    /// its last statement that returned rows, as [`simple_query`](Self::simple_query) gives
    /// them, or `Ok(None)` if the server has not finished yet (what it sent so far is kept).
    pub fn poll_result(&mut self, timeout: Duration) -> Result<Option<Vec<Vec<Option<String>>>>, PgError> {
        let Some(mut pending) = self.pending.take() else {
            return Err(PgError::Protocol(format!("no query is waiting for an answer on {}", self.name)));
        };
        let deadline = Instant::now() + timeout;
        loop {
            let frame = match self.read_frame(deadline) {
                Ok(Some(frame)) => frame,
                Ok(None) => {
                    self.pending = Some(pending);
                    return Ok(None);
                }
                // After a FATAL error the server closes the connection: report the error.
                Err(error) => return Err(pending.failure.unwrap_or(error)),
            };
            match Backend::decode(frame)? {
                Backend::Message(Message::ReadyForQuery(_)) => break,
                Backend::Message(Message::RowDescription(_)) => pending.rows.clear(),
                Backend::DataRow(row) => pending.rows.push(row),
                Backend::Error(error) => pending.failure = Some(error),
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
        match pending.failure {
            Some(error) => Err(error),
            None => Ok(Some(pending.rows)),
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

    pub(super) fn send(&mut self, bytes: &[u8]) -> Result<(), PgError> {
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
    pub(super) fn read_frame(&mut self, deadline: Instant) -> Result<Option<BytesMut>, PgError> {
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

pub(super) fn unexpected(message: &Backend, doing: &str) -> PgError {
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
pub(super) fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `'value'`, with `'` doubled.
pub(super) fn quote_literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}
