//! The write-ahead log: byte LSNs with real page layout, real record sizes, and the decoded view
//! of what was written (`xlog.c`, `src/include/access/xlog_internal.h`).
//!
//! Positions are assigned the way `XLogInsertRecord` assigns them: a running count of usable
//! bytes (`CurrBytePos`), each record taking `MAXALIGN(len)` of them, converted to an LSN by
//! `XLogBytePosToRecPtr` / `XLogBytePosToEndRecPtr`, which skip the 24-byte page header of every
//! 8 kB page and the 40-byte long header at the start of every segment. So the distance between
//! two LSNs is the WAL volume between them, headers included, as on a real server.
//!
//! What is kept is not the bytes but the decoded entries a reader needs: committed transactions
//! with their changes, running-xacts records (the only points a logical slot's `restart_lsn` can
//! move to), checkpoints, WAL from databases nobody captures, and the end of recovery.
//!
//! Flushing: a commit record is flushed with everything before it (`XLogFlush` in
//! `RecordTransactionCommit`); a transaction block's change records and messages, an ABORT
//! record and a non-transactional message outside a transaction are not, until the next
//! flushing record or the WAL writer (`wal_writer_delay` later). Decoding reads to the flush
//! pointer. The model counts every other record as flushed when inserted (running-xacts records
//! included, which PostgreSQL does not flush either), and writing and flushing as one.
//!
//! Left out (another issue makes them exact): full-page images after a checkpoint, index
//! records, segment recycling and removal.

use crate::core::lsn::Lsn;
use crate::core::wal::WalEntry;
use serde::{Deserialize, Serialize};

/// `XLOG_BLCKSZ`: WAL page size.
pub const XLOG_BLCKSZ: u64 = 8192;
/// `SizeOfXLogShortPHD`.
const SIZE_OF_SHORT_PAGE_HEADER: u64 = 24;
/// `SizeOfXLogLongPHD`: the first page of every segment.
const SIZE_OF_LONG_PAGE_HEADER: u64 = 40;
/// `MAXIMUM_ALIGNOF` on 64-bit platforms.
const MAXIMUM_ALIGNOF: u64 = 8;

/// Record sizes (`len (rec/tot)` as `pg_waldump` prints them) for the records the model writes.
pub mod record_size {
    /// `XLogRecord` header.
    pub const HEADER: u64 = 24;
    /// One block reference: `XLogRecordBlockHeader` + `RelFileLocator` + `BlockNumber`.
    const BLOCK_REF: u64 = 4 + 12 + 4;
    /// `XLogRecordDataHeaderShort`.
    const MAIN_DATA_HEADER: u64 = 2;
    /// `xl_heap_header`, followed by the tuple from `t_bits` on (one byte before the data).
    const TUPLE_HEADER: u64 = 5 + 1;

    /// `Heap/INSERT`: `xl_heap_insert` (3 bytes) and the new tuple.
    pub fn heap_insert(tuple_data_bytes: u64) -> u64 {
        HEADER + BLOCK_REF + MAIN_DATA_HEADER + 3 + TUPLE_HEADER + tuple_data_bytes
    }

    /// `Heap/UPDATE` (or `HOT_UPDATE`): `xl_heap_update` (14 bytes), the new tuple, and with
    /// `REPLICA IDENTITY FULL` the old tuple (logged because `wal_level=logical`).
    pub fn heap_update(new_tuple_bytes: u64, old_tuple_bytes: Option<u64>) -> u64 {
        HEADER
            + BLOCK_REF
            + MAIN_DATA_HEADER
            + 14
            + TUPLE_HEADER
            + new_tuple_bytes
            + old_tuple_bytes.map_or(0, |bytes| TUPLE_HEADER + bytes)
    }

    /// `Heap/DELETE`: `xl_heap_delete` (8 bytes) and the old key or, with `REPLICA IDENTITY
    /// FULL`, the old tuple.
    pub fn heap_delete(old_tuple_bytes: u64) -> u64 {
        HEADER + BLOCK_REF + MAIN_DATA_HEADER + 8 + TUPLE_HEADER + old_tuple_bytes
    }

    /// `Heap2/MULTI_INSERT` of a `COPY` (`heap_multi_insert`): `xl_heap_multi_insert` (3
    /// bytes and a 2-byte offset per tuple), then per tuple an `xl_multi_insert_tuple` (7 bytes)
    /// and its data from `t_bits` on, each short-aligned.
    pub fn heap_multi_insert(tuple_data_bytes: &[u64]) -> u64 {
        let tuples: u64 = tuple_data_bytes.iter().map(|bytes| (7 + 1 + bytes).div_ceil(2) * 2).sum();
        HEADER + BLOCK_REF + MAIN_DATA_HEADER + 3 + 2 * tuple_data_bytes.len() as u64 + tuples
    }

    /// `Transaction/COMMIT` with a commit timestamp.
    pub const COMMIT: u64 = 34;
    /// `Transaction/ABORT` of a top-level transaction (34 bytes on PostgreSQL 15).
    pub const ABORT: u64 = 34;
    /// `Standby/RUNNING_XACTS` with no running transactions.
    pub const RUNNING_XACTS: u64 = 50;

    /// `Standby/RUNNING_XACTS` listing `xids` running transactions (4 bytes each).
    pub fn running_xacts(xids: usize) -> u64 {
        RUNNING_XACTS + 4 * xids as u64
    }
    /// `XLOG/CHECKPOINT_ONLINE`.
    pub const CHECKPOINT_ONLINE: u64 = 114;
    /// `XLOG/END_OF_RECOVERY`.
    pub const END_OF_RECOVERY: u64 = 42;

    /// `LogicalMessage/MESSAGE` (`LogLogicalMessage`, `src/backend/replication/logical/message.c`):
    /// the header, the main data header (a long one past 255 bytes), `xl_logical_message` (24
    /// bytes up to the message), the prefix with its NUL, the payload.
    pub fn logical_message(prefix_bytes: u64, payload_bytes: u64) -> u64 {
        let data = 24 + prefix_bytes + 1 + payload_bytes;
        HEADER + if data > 255 { 5 } else { MAIN_DATA_HEADER } + data
    }
}

/// The WAL of one server.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Wal {
    pub segment_size: u64,
    /// `CurrBytePos`: usable bytes inserted so far.
    current_byte_pos: u64,
    pub entries: Vec<WalEntry>,
    /// `Some(lsn)`: the records from `lsn` on are inserted but not flushed yet (only records
    /// inserted with [`Wal::insert_record_unflushed`]; every other insertion flushes everything
    /// before it).
    #[serde(default)]
    unflushed_from: Option<Lsn>,
}

impl Wal {
    /// A WAL whose next record starts at (or just after the page header at) `start`.
    pub fn new(segment_size: u64, start: Lsn) -> Wal {
        let mut wal = Wal { segment_size, current_byte_pos: 0, entries: Vec::new(), unflushed_from: None };
        wal.current_byte_pos = wal.rec_ptr_to_byte_pos(start);
        wal
    }

    fn usable_bytes_in_page() -> u64 {
        XLOG_BLCKSZ - SIZE_OF_SHORT_PAGE_HEADER
    }

    fn usable_bytes_in_segment(&self) -> u64 {
        (self.segment_size / XLOG_BLCKSZ) * Self::usable_bytes_in_page()
            - (SIZE_OF_LONG_PAGE_HEADER - SIZE_OF_SHORT_PAGE_HEADER)
    }

    /// `XLogBytePosToRecPtr`: where a record starting at `byte_pos` begins.
    pub fn byte_pos_to_rec_ptr(&self, byte_pos: u64) -> Lsn {
        self.byte_pos_to_lsn(byte_pos, false)
    }

    /// `XLogBytePosToEndRecPtr`: where a record ending at `byte_pos` ends (a page boundary stays
    /// a page boundary instead of moving past the next header).
    pub fn byte_pos_to_end_rec_ptr(&self, byte_pos: u64) -> Lsn {
        self.byte_pos_to_lsn(byte_pos, true)
    }

    fn byte_pos_to_lsn(&self, byte_pos: u64, end: bool) -> Lsn {
        let usable_in_segment = self.usable_bytes_in_segment();
        let full_segments = byte_pos / usable_in_segment;
        let mut bytes_left = byte_pos % usable_in_segment;
        let segment_offset = if bytes_left < XLOG_BLCKSZ - SIZE_OF_LONG_PAGE_HEADER {
            if end && bytes_left == 0 { 0 } else { bytes_left + SIZE_OF_LONG_PAGE_HEADER }
        } else {
            bytes_left -= XLOG_BLCKSZ - SIZE_OF_LONG_PAGE_HEADER;
            let full_pages = bytes_left / Self::usable_bytes_in_page();
            bytes_left %= Self::usable_bytes_in_page();
            let header = if end && bytes_left == 0 { 0 } else { SIZE_OF_SHORT_PAGE_HEADER };
            XLOG_BLCKSZ + full_pages * XLOG_BLCKSZ + bytes_left + header
        };
        Lsn(full_segments * self.segment_size + segment_offset)
    }

    /// `XLogRecPtrToBytePos`.
    pub fn rec_ptr_to_byte_pos(&self, lsn: Lsn) -> u64 {
        let full_segments = lsn.0 / self.segment_size;
        let segment_offset = lsn.0 % self.segment_size;
        let full_pages = segment_offset / XLOG_BLCKSZ;
        let offset = lsn.0 % XLOG_BLCKSZ;
        let base = full_segments * self.usable_bytes_in_segment();
        if full_pages == 0 {
            base + offset.saturating_sub(SIZE_OF_LONG_PAGE_HEADER)
        } else {
            base + (XLOG_BLCKSZ - SIZE_OF_LONG_PAGE_HEADER)
                + (full_pages - 1) * Self::usable_bytes_in_page()
                + offset.saturating_sub(SIZE_OF_SHORT_PAGE_HEADER)
        }
    }

    /// Reserves space for a record of `len` bytes and returns its start and end LSNs. The record,
    /// and everything before it, counts as flushed: a commit's `XLogFlush`, or a record the
    /// model does not tell apart from one.
    pub fn insert_record(&mut self, len: u64) -> (Lsn, Lsn) {
        self.unflushed_from = None;
        self.reserve(len)
    }

    /// Reserves space for a record that is not flushed when it is inserted: a transaction block's
    /// change records and messages, an ABORT record (`RecordTransactionAbort` only sets the
    /// asynchronous flush request, `XLogSetAsyncXactLSN`), a non-transactional logical message
    /// outside a transaction (`LogLogicalMessage`, `xact.c`, `message.c`). The WAL writer, or
    /// the next flushing record, flushes it.
    pub fn insert_record_unflushed(&mut self, len: u64) -> (Lsn, Lsn) {
        if self.unflushed_from.is_none() {
            self.unflushed_from = Some(self.write_lsn());
        }
        self.reserve(len)
    }

    /// `XLogFlush` of everything inserted: whether there was anything to flush.
    pub fn flush(&mut self) -> bool {
        self.unflushed_from.take().is_some()
    }

    /// The flush pointer (`GetFlushRecPtr`): the end of the last flushed record. What decoding
    /// reads up to.
    pub fn flush_lsn(&self) -> Lsn {
        self.unflushed_from.unwrap_or_else(|| self.write_lsn())
    }

    /// A crash loses what was not flushed: the entries ending after the flush pointer, and
    /// their positions, which the next records take again.
    pub fn lose_unflushed(&mut self) {
        if let Some(from) = self.unflushed_from.take() {
            let kept = self.entries.partition_point(|entry| entry.end() <= from);
            self.entries.truncate(kept);
            self.current_byte_pos = self.rec_ptr_to_byte_pos(from);
        }
    }

    fn reserve(&mut self, len: u64) -> (Lsn, Lsn) {
        let start = self.byte_pos_to_rec_ptr(self.current_byte_pos);
        self.current_byte_pos += len.div_ceil(MAXIMUM_ALIGNOF) * MAXIMUM_ALIGNOF;
        let end = self.byte_pos_to_end_rec_ptr(self.current_byte_pos);
        (start, end)
    }

    /// `pg_switch_wal()`: an `XLOG_SWITCH` record (a bare header), after which the rest of the
    /// segment counts as used and the write pointer is the next segment's start (`RequestXLogSwitch`, `xlog.c`).
    /// Nothing is written when the insert position is already at a segment's start. Returns the
    /// switch record's start and end when it switched.
    pub fn switch_segment(&mut self) -> Option<(Lsn, Lsn)> {
        let usable = self.usable_bytes_in_segment();
        if self.current_byte_pos.is_multiple_of(usable) {
            return None;
        }
        let (start, _) = self.insert_record(record_size::HEADER);
        self.current_byte_pos = self.current_byte_pos.div_ceil(usable) * usable;
        Some((start, self.write_lsn()))
    }

    /// `pg_current_wal_insert_lsn()`: where the next record will start.
    pub fn insert_lsn(&self) -> Lsn {
        self.byte_pos_to_rec_ptr(self.current_byte_pos)
    }

    /// `pg_current_wal_lsn()`: the write pointer, the end of the last record written. The model
    /// writes and flushes every record at once, so this is also the flush pointer.
    pub fn write_lsn(&self) -> Lsn {
        self.byte_pos_to_end_rec_ptr(self.current_byte_pos)
    }

    /// Appends a decoded entry whose records were inserted with [`Wal::insert_record`].
    pub fn push(&mut self, entry: WalEntry) {
        debug_assert!(self.entries.last().is_none_or(|last| last.end() <= entry.start()));
        self.entries.push(entry);
    }

    /// Appends an entry copied from another server's WAL (a standby replaying its primary's
    /// WAL): the positions are the primary's.
    pub fn replay(&mut self, entry: WalEntry) {
        self.current_byte_pos = self.rec_ptr_to_byte_pos(entry.end());
        self.entries.push(entry);
    }

    /// Index of the first entry starting at or after `lsn`.
    pub fn first_entry_at_or_after(&self, lsn: Lsn) -> usize {
        self.entries.partition_point(|entry| entry.start() < lsn)
    }

    /// `seg(lsn)`.
    pub fn segment_of(&self, lsn: Lsn) -> u64 {
        lsn.0 / self.segment_size
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SEGMENT_16MB: u64 = 16 * 1024 * 1024;

    #[test]
    fn a_record_at_a_segment_start_begins_after_the_long_header() {
        let mut wal = Wal::new(SEGMENT_16MB, Lsn(SEGMENT_16MB));
        let (start, end) = wal.insert_record(record_size::COMMIT);
        assert_eq!(start, Lsn(SEGMENT_16MB + 40));
        assert_eq!(end, Lsn(SEGMENT_16MB + 40 + 40), "34 bytes take MAXALIGN(34) = 40");
    }

    #[test]
    fn a_record_crossing_a_page_pays_for_the_next_page_header() {
        let mut wal = Wal::new(SEGMENT_16MB, Lsn(SEGMENT_16MB + XLOG_BLCKSZ - 16));
        let (start, end) = wal.insert_record(48);
        assert_eq!(start, Lsn(SEGMENT_16MB + XLOG_BLCKSZ - 16));
        assert_eq!(end, Lsn(SEGMENT_16MB + XLOG_BLCKSZ + 24 + 32));
    }

    #[test]
    fn an_end_on_a_page_boundary_stays_there_and_the_next_start_skips_the_header() {
        let mut wal = Wal::new(SEGMENT_16MB, Lsn(SEGMENT_16MB + XLOG_BLCKSZ - 16));
        let (_, end) = wal.insert_record(16);
        assert_eq!(end, Lsn(SEGMENT_16MB + XLOG_BLCKSZ));
        assert_eq!(wal.write_lsn(), end);
        assert_eq!(wal.insert_lsn(), Lsn(SEGMENT_16MB + XLOG_BLCKSZ + 24));
    }

    #[test]
    fn a_switch_ends_the_segment_and_a_second_switch_does_nothing() {
        let mut wal = Wal::new(SEGMENT_16MB, Lsn(SEGMENT_16MB + 0x1234));
        let (start, end) = wal.switch_segment().expect("a switch");
        assert_eq!(start, Lsn(SEGMENT_16MB + 0x1234));
        assert_eq!(end, Lsn(2 * SEGMENT_16MB));
        assert_eq!(wal.write_lsn(), Lsn(2 * SEGMENT_16MB));
        assert_eq!(wal.switch_segment(), None);
        assert_eq!(wal.insert_lsn(), Lsn(2 * SEGMENT_16MB + 40));
    }

    proptest! {
        #[test]
        fn byte_positions_round_trip(byte_pos in 0u64..(1 << 40)) {
            let wal = Wal::new(SEGMENT_16MB, Lsn(SEGMENT_16MB));
            let lsn = wal.byte_pos_to_rec_ptr(byte_pos);
            prop_assert_eq!(wal.rec_ptr_to_byte_pos(lsn), byte_pos);
            prop_assert!(lsn.0 % XLOG_BLCKSZ >= 24, "a record never starts inside a page header");
        }

        #[test]
        fn records_never_overlap_and_grow_by_at_least_their_size(sizes in proptest::collection::vec(24u64..20_000, 1..50)) {
            let mut wal = Wal::new(SEGMENT_16MB, Lsn(0x16B3748));
            let mut previous_end = Lsn(0);
            for size in sizes {
                let (start, end) = wal.insert_record(size);
                prop_assert!(start >= previous_end);
                prop_assert!(end.0 - start.0 >= size);
                previous_end = end;
            }
        }
    }
}
