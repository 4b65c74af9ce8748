//! Errors: what went wrong talking to the server.

use super::*;

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

pub(super) fn invalid_input(what: String) -> PgError {
    PgError::Io(io::Error::new(io::ErrorKind::InvalidInput, what))
}

pub(super) fn timed_out(what: &str, timeout: Duration) -> PgError {
    PgError::Io(io::Error::new(io::ErrorKind::TimedOut, format!("{what}: no answer within {} ms", timeout.as_millis())))
}
