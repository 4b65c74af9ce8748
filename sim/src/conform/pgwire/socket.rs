//! The socket and the backend messages read from it.

use super::*;

/// A TCP or unix socket.
pub(super) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub(super) fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(stream) => stream.set_read_timeout(timeout),
            Stream::Unix(stream) => stream.set_read_timeout(timeout),
        }
    }

    pub(super) fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
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
pub(super) enum Backend {
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
    pub(super) fn decode(mut frame: BytesMut) -> Result<Backend, PgError> {
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
pub(super) fn error_fields(body: &[u8]) -> Result<PgError, PgError> {
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
pub(super) fn data_row(body: &[u8]) -> Result<Vec<Option<String>>, PgError> {
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

pub(super) fn be_u64(data: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(data.get(at..at + 8)?.try_into().ok()?))
}

pub(super) fn be_u32(data: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?))
}
