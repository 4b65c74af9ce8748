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
//!
//! The files: `target` (URLs), `error`, `socket` (the stream and the backend messages read from it),
//! `connection` (start-up, authentication, simple queries), `replication` (the `CopyBoth` stream),
//! `pgoutput` (the plugin's messages).

mod connection;
mod error;
mod pgoutput;
mod replication;
mod socket;
mod target;
#[cfg(test)]
mod tests;

pub use connection::Connection;
pub use error::PgError;
pub use pgoutput::{PgOutput, parse_pgoutput};
pub use replication::{ReplicationMessage, ReplicationStream};
pub use target::{Host, Target};

use connection::unexpected;
use error::{invalid_input, timed_out};
use socket::{Backend, Stream, be_u32, be_u64};

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
