//! The `pgoutput` plugin's messages, as far as the tester reads them.

use super::*;

/// A message of the `pgoutput` plugin (protocol version 1), as far as the tester reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PgOutput {
    /// `B`: a transaction begins; `final_lsn` is the LSN of its commit record.
    Begin { final_lsn: u64, xid: u32 },
    /// `C`: a transaction commits; `end_lsn` is the end of its commit record, the position to
    /// confirm once the transaction is processed.
    Commit { commit_lsn: u64, end_lsn: u64 },
    /// `I`, `U`, `D`: a row change, with the text of the first column of the tuple it carries
    /// (the new tuple of an insert or update, the key or old tuple of a delete); `None` when
    /// that column is NULL or an unchanged TOAST value.
    Change { kind: u8, first_column: Option<String> },
    /// `M`: a logical decoding message (with the `messages` option).
    Message { transactional: bool, lsn: u64, prefix: String, content: Vec<u8> },
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
        // 'I' relid 'N' tuple; 'U' relid ['K'|'O' tuple] 'N' tuple; 'D' relid 'K'|'O' tuple.
        Some(&kind @ (b'I' | b'U' | b'D')) => {
            let mut at = 5;
            let mut marker = *data.get(at).ok_or_else(|| cut_short("row change"))?;
            if kind == b'U' && matches!(marker, b'K' | b'O') {
                at = skip_tuple(data, at + 1).ok_or_else(|| cut_short("Update"))?;
                marker = *data.get(at).ok_or_else(|| cut_short("Update"))?;
            }
            if !matches!(marker, b'N' | b'K' | b'O') {
                return Err(PgError::Protocol(format!(
                    "pgoutput `{}`: unknown tuple marker {marker}",
                    char::from(kind)
                )));
            }
            let first_column = first_column(data, at + 1).ok_or_else(|| cut_short("row change"))?;
            Ok(PgOutput::Change { kind, first_column })
        }
        // 'M', Int8 flags (1: transactional), Int64 lsn, String prefix, Int32 length, Byte_n.
        Some(b'M') => {
            let flags = *data.get(1).ok_or_else(|| cut_short("Message"))?;
            let lsn = be_u64(data, 2).ok_or_else(|| cut_short("Message"))?;
            let rest = data.get(10..).ok_or_else(|| cut_short("Message"))?;
            let end = rest.iter().position(|&byte| byte == 0).ok_or_else(|| cut_short("Message"))?;
            let prefix = String::from_utf8_lossy(&rest[..end]).into_owned();
            let length = be_u32(rest, end + 1).ok_or_else(|| cut_short("Message"))? as usize;
            let content = rest.get(end + 5..end + 5 + length).ok_or_else(|| cut_short("Message"))?.to_vec();
            Ok(PgOutput::Message { transactional: flags & 1 == 1, lsn, prefix, content })
        }
        Some(&tag) => Ok(PgOutput::Other(tag)),
        None => Err(PgError::Protocol("empty pgoutput message".to_string())),
    }
}

/// The position after the TupleData at `at` (Int16 columns, each `n`, `u`, or `t`/`b` Int32
/// length and bytes).
fn skip_tuple(data: &[u8], at: usize) -> Option<usize> {
    let columns = u16::from_be_bytes(data.get(at..at + 2)?.try_into().ok()?);
    let mut at = at + 2;
    for _ in 0..columns {
        match data.get(at)? {
            b'n' | b'u' => at += 1,
            b't' | b'b' => at += 5 + be_u32(data, at + 1)? as usize,
            _ => return None,
        }
    }
    (at <= data.len()).then_some(at)
}

/// The text of the first column of the TupleData at `at`.
fn first_column(data: &[u8], at: usize) -> Option<Option<String>> {
    let columns = u16::from_be_bytes(data.get(at..at + 2)?.try_into().ok()?);
    if columns == 0 {
        return Some(None);
    }
    match data.get(at + 2)? {
        b'n' | b'u' => Some(None),
        b't' | b'b' => {
            let length = be_u32(data, at + 3)? as usize;
            let bytes = data.get(at + 7..at + 7 + length)?;
            Some(Some(String::from_utf8_lossy(bytes).into_owned()))
        }
        _ => None,
    }
}
