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
