//! Replication: a logical replication stream in `CopyBoth` mode.

use super::*;

/// A logical replication stream (the connection in `CopyBoth` mode), from
/// [`Connection::start_replication`].
pub struct ReplicationStream {
    pub(super) connection: Connection,
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
pub(super) fn parse_replication_message(data: &[u8]) -> Result<ReplicationMessage, PgError> {
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
