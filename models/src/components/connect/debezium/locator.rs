//! `WalPositionLocator` (`PGC/connection/WalPositionLocator.java`), ported literally from Debezium
//! 3.7, with the rules earlier releases lacked as flags of [`LocatorRules`], derived from the
//! configured release.
//!
//! After a restart with `lsn_proc` stored, the streaming source
//! (`PostgresStreamingChangeEventSource.execute`) runs a **search phase** on a first stream: every
//! message goes to [`WalPositionLocator::resume_from_lsn`], nothing is dispatched, until it names
//! the LSN to resume from. Then it reconnects, streams again from the stored `lsn_proc` with
//! **filtering** on: [`WalPositionLocator::skip_message`] drops every message until the resume LSN
//! arrives (BEGIN and COMMIT are processed whatever it says,
//! `PgOutputMessageDecoder.shouldMessageBeSkipped`).
//!
//! The releases before 1.3 had no locator (DBZ-2338 brought it in 1.3.0.Beta1): the stream was
//! requested at the stored `lsn` and every message at or below it was skipped
//! (`AbstractMessageDecoder.shouldMessageBeSkipped` with `skipFirstFlushRecord`); see
//! [`LocatorRules::legacy_skip`].

use crate::core::event::MessageType;
use crate::core::lsn::Lsn;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The locator's rules that changed between releases, each on from the release that brought it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LocatorRules {
    /// Before 1.3 (DBZ-2338, `39623aa799`): no locator and no `lsn_commit`; the stream starts at
    /// the stored `lsn` and skips every message at or below it; `lsn_proc` is confirmed.
    pub legacy_skip: bool,
    /// 2.0 (DBZ-5031, `04c474bac7`): `lsnFlushingAllowed`: the slot is confirmed only after a
    /// message arrived in the main loop of the current stream, never during the search phase.
    pub flushing_after_first_message: bool,
    /// 2.0 (DBZ-5597, `1d423d7f09`): the filter fails the task on a valid LSN it did not see while
    /// searching (before, it filtered until the exact resume LSN came, if ever).
    pub fail_on_unseen_lsn: bool,
    /// 2.2 (DBZ-5915 `b03b4cdd19`, DBZ-6204 `3b5740f1a8`): `messageType` is stored, and when the
    /// stored LSN is seen again after a BEGIN while the stored event was a BEGIN, a COMMIT or of
    /// unknown type, the search resumes at that BEGIN.
    pub resume_at_begin_on_shared_lsn: bool,
    /// 3.6 (debezium/dbz#1379, `6459f29c7f`): a stored non-transactional MESSAGE (its LSN the
    /// stored commit LSN) resumes at the first LSN received.
    pub message_resumes_at_first_lsn: bool,
    /// 3.7 (debezium/dbz#1554, `a51931d924`): `lsn_events_processed` is stored, and the search
    /// skips that many events at the stored LSN.
    pub counts_events_per_lsn: bool,
    /// 3.7 (debezium/dbz#76, `7109bcc0f8`): a non-COMMIT arriving at the LSN of a stored COMMIT
    /// is a false match: resume at the first LSN received.
    pub commit_false_match_guard: bool,
    /// 1.9 (DBZ-3942, `38cd6907ae` in 2.0.0.Alpha3, backported to 1.9.4; 1.9 is modelled as its
    /// last patch release): an offset is loaded with its `lsn_commit`, or, where it has none (no
    /// COMMIT processed when it was taken), `lsn_proc` (`PostgresOffsetContext.Loader.load`), so
    /// the search is never without a commit LSN when `lsn_proc` is stored.
    pub commit_lsn_defaults_to_processed: bool,
    /// 1.3 to 1.8 (and 1.9.0 to 1.9.3; DBZ-3942): `Loader.load` reads the commit LSN from the
    /// `lsn_proc` key (`lastCommitLsn = Lsn.valueOf(readOptionalLong(offset,
    /// LAST_COMPLETELY_PROCESSED_LSN_KEY))`), so the search takes the stored `lsn_proc` for the
    /// last commit whatever `lsn_commit` says.
    pub commit_lsn_read_from_processed_key: bool,
}

impl LocatorRules {
    /// The rules of a Debezium release `(major, minor)`.
    pub fn of(version: (u32, u32)) -> LocatorRules {
        LocatorRules {
            legacy_skip: version < (1, 3),
            flushing_after_first_message: version >= (2, 0),
            fail_on_unseen_lsn: version >= (2, 0),
            resume_at_begin_on_shared_lsn: version >= (2, 2),
            message_resumes_at_first_lsn: version >= (3, 6),
            counts_events_per_lsn: version >= (3, 7),
            commit_false_match_guard: version >= (3, 7),
            commit_lsn_defaults_to_processed: version >= (1, 9),
            commit_lsn_read_from_processed_key: ((1, 3)..(1, 9)).contains(&version),
        }
    }
}

/// `WalPositionLocator`: finds where to resume after a restart, then filters the replay.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WalPositionLocator {
    rules: LocatorRules,
    last_commit_stored_lsn: Option<Lsn>,
    last_event_stored_lsn: Option<Lsn>,
    last_processed_message_type: Option<MessageType>,
    last_event_stored_lsn_events_processed: u32,
    tx_start_lsn: Option<Lsn>,
    lsn_after_last_event_stored_lsn: Option<Lsn>,
    first_lsn_received: Option<Lsn>,
    pass_messages: bool,
    start_streaming_lsn: Option<Lsn>,
    store_lsn_after_last_event_stored_lsn: bool,
    lsn_seen: BTreeSet<Lsn>,
    current_lsn_event_count: u32,
    start_streaming_events_to_skip: u32,
}

/// The message `skip_message` refused (DBZ-5597): its text as Debezium throws it.
pub fn unseen_lsn_error(lsn: Lsn, seen: &BTreeSet<Lsn>) -> String {
    let seen: Vec<String> = seen.iter().map(|lsn| lsn.to_string()).collect();
    format!(
        "io.debezium.DebeziumException: Message with LSN '{lsn}' not present among LSNs seen in the location phase \
         '[{}]'. This is unexpected and can lead to an infinite loop or a data loss.",
        seen.join(", ")
    )
}

impl WalPositionLocator {
    /// `new WalPositionLocator(lastCommitStoredLsn, lastEventStoredLsn, lastProcessedMessageType,
    /// lsnEventsProcessed)`: a stored offset to search for. The type and the count are ignored by
    /// the releases that did not store them.
    pub fn new(
        rules: LocatorRules,
        last_commit_stored_lsn: Option<Lsn>,
        last_event_stored_lsn: Option<Lsn>,
        last_processed_message_type: Option<MessageType>,
        lsn_events_processed: u32,
    ) -> WalPositionLocator {
        WalPositionLocator {
            rules,
            last_commit_stored_lsn,
            last_event_stored_lsn,
            last_processed_message_type: last_processed_message_type
                .filter(|_| rules.resume_at_begin_on_shared_lsn || rules.commit_false_match_guard),
            last_event_stored_lsn_events_processed: if rules.counts_events_per_lsn { lsn_events_processed } else { 0 },
            tx_start_lsn: None,
            lsn_after_last_event_stored_lsn: None,
            first_lsn_received: None,
            pass_messages: true,
            start_streaming_lsn: None,
            store_lsn_after_last_event_stored_lsn: false,
            lsn_seen: BTreeSet::new(),
            current_lsn_event_count: 0,
            start_streaming_events_to_skip: 0,
        }
    }

    /// `new WalPositionLocator()`: nothing to search for ("WAL position will not be searched").
    pub fn none(rules: LocatorRules) -> WalPositionLocator {
        WalPositionLocator::new(rules, None, None, None, 0)
    }

    /// `searchingEnabled()`: a stored event LSN to look for.
    pub fn searching_enabled(&self) -> bool {
        self.last_event_stored_lsn.is_some()
    }

    /// `getLastEventStoredLsn()`: where the filtering stream is requested.
    pub fn last_event_stored_lsn(&self) -> Option<Lsn> {
        self.last_event_stored_lsn
    }

    /// The LSN the search settled on (`startStreamingLsn`).
    pub fn start_streaming_lsn(&self) -> Option<Lsn> {
        self.start_streaming_lsn
    }

    /// Whether the filter is on (`!passMessages`).
    pub fn filtering(&self) -> bool {
        !self.pass_messages
    }

    /// `enableFiltering()`.
    pub fn enable_filtering(&mut self) {
        self.pass_messages = false;
    }

    /// `resumeFromLsn(currentLsn, message)`: one message of the search phase; `Some` LSN once the
    /// resume point is known.
    pub fn resume_from_lsn(&mut self, current_lsn: Lsn, operation: MessageType) -> Option<Lsn> {
        if self.rules.fail_on_unseen_lsn {
            self.lsn_seen.insert(current_lsn);
        }
        if self.first_lsn_received.is_none() {
            self.first_lsn_received = Some(current_lsn);
        }
        let first_lsn_received = self.first_lsn_received;
        if self.store_lsn_after_last_event_stored_lsn {
            // Event that immediately follows the last event seen: we can resume streaming from it.
            if Some(current_lsn) == self.last_event_stored_lsn {
                // Several events can share the LSN (COPY, batched inserts): count them to find the
                // precise resume point (dbz#1554).
                self.current_lsn_event_count += 1;
                let processed = self.last_event_stored_lsn_events_processed;
                if processed > 1 && self.current_lsn_event_count <= processed {
                    return None;
                }
                // Past every processed event at this LSN, and more remain: resume at this LSN,
                // skipping the processed ones while filtering.
                if processed > 1 {
                    self.start_streaming_lsn = self.last_event_stored_lsn;
                    self.start_streaming_events_to_skip = processed;
                    return self.start_streaming_lsn;
                }
                // BEGIN and the first message after it share the LSN (DBZ-5915), or the previous
                // COMMIT does too (DBZ-6204): start from the BEGIN.
                if self.rules.resume_at_begin_on_shared_lsn
                    && self.tx_start_lsn.is_some()
                    && matches!(
                        self.last_processed_message_type,
                        None | Some(MessageType::Begin) | Some(MessageType::Commit)
                    )
                {
                    self.start_streaming_lsn = self.tx_start_lsn;
                    return self.start_streaming_lsn;
                }
                return None;
            }
            self.lsn_after_last_event_stored_lsn = Some(current_lsn);
            self.store_lsn_after_last_event_stored_lsn = false;
            self.start_streaming_lsn = self.lsn_after_last_event_stored_lsn;
            return self.start_streaming_lsn;
        }
        if Some(current_lsn) == self.last_event_stored_lsn {
            // dbz#76: a COMMIT's end LSN can equal the next transaction's first change LSN; a
            // non-COMMIT at the LSN of a stored COMMIT belongs to the next, unprocessed transaction.
            if self.rules.commit_false_match_guard
                && self.last_processed_message_type == Some(MessageType::Commit)
                && operation != MessageType::Commit
                && self.last_commit_stored_lsn.is_some()
                && self.last_commit_stored_lsn == self.last_event_stored_lsn
            {
                self.start_streaming_lsn = first_lsn_received;
                return self.start_streaming_lsn;
            }
            self.store_lsn_after_last_event_stored_lsn = true;
            self.current_lsn_event_count = 1;
            if self.last_event_stored_lsn_events_processed > 1 {
                return None;
            }
        }
        let Some(last_commit_stored_lsn) = self.last_commit_stored_lsn else {
            self.start_streaming_lsn = first_lsn_received;
            return self.start_streaming_lsn;
        };
        // dbz#1379: a stored non-transactional MESSAGE (lsn_commit = lsn_proc = its LSN) was
        // processed and committed: resume from the first LSN received.
        if self.rules.message_resumes_at_first_lsn
            && self.last_processed_message_type == Some(MessageType::Message)
            && self.last_event_stored_lsn == Some(last_commit_stored_lsn)
        {
            self.start_streaming_lsn = first_lsn_received;
            return self.start_streaming_lsn;
        }
        match operation {
            MessageType::Begin => self.tx_start_lsn = Some(current_lsn),
            MessageType::Commit if current_lsn > last_commit_stored_lsn => {
                // In order of preference: the LSN after the stored event, the BEGIN of this
                // (unprocessed) transaction, the very first LSN received.
                self.start_streaming_lsn =
                    self.lsn_after_last_event_stored_lsn.or(self.tx_start_lsn).or(first_lsn_received);
                return self.start_streaming_lsn;
            }
            _ => {}
        }
        None
    }

    /// `skipMessage(lsn)`: whether the filtering stream drops the message at `lsn`; an error (the
    /// task fails) for a valid LSN the search never saw (DBZ-5597).
    pub fn skip_message(&mut self, lsn: Lsn) -> Result<bool, String> {
        if self.pass_messages {
            return Ok(false);
        }
        if self.start_streaming_lsn.is_none() || self.start_streaming_lsn == Some(lsn) {
            if self.start_streaming_events_to_skip > 0 {
                self.start_streaming_events_to_skip -= 1;
                return Ok(true);
            }
            self.pass_messages = true;
            // "Empty the Map as it might be large and is no longer needed".
            self.lsn_seen.clear();
            return Ok(false);
        }
        if self.rules.fail_on_unseen_lsn && lsn.is_valid() && !self.lsn_seen.contains(&lsn) {
            return Err(unseen_lsn_error(lsn, &self.lsn_seen));
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use MessageType::{Begin, Commit, Insert, Message};

    const V37: LocatorRules = LocatorRules {
        commit_lsn_defaults_to_processed: true,
        commit_lsn_read_from_processed_key: false,
        legacy_skip: false,
        flushing_after_first_message: true,
        fail_on_unseen_lsn: true,
        resume_at_begin_on_shared_lsn: true,
        message_resumes_at_first_lsn: true,
        counts_events_per_lsn: true,
        commit_false_match_guard: true,
    };

    fn rules(version: (u32, u32)) -> LocatorRules {
        LocatorRules::of(version)
    }

    /// Runs the search over `stream` and returns the resume LSN and how many messages it read.
    fn search(locator: &mut WalPositionLocator, stream: &[(u64, MessageType)]) -> Option<(Lsn, usize)> {
        for (read, (lsn, op)) in stream.iter().enumerate() {
            if let Some(resume) = locator.resume_from_lsn(Lsn(*lsn), *op) {
                return Some((resume, read + 1));
            }
        }
        None
    }

    /// The filtering phase over the replayed `stream`: the messages that pass (BEGIN and COMMIT
    /// always do, as `PgOutputMessageDecoder.shouldMessageBeSkipped` keeps them).
    fn filter(
        locator: &mut WalPositionLocator,
        stream: &[(u64, MessageType)],
    ) -> Result<Vec<(u64, MessageType)>, String> {
        locator.enable_filtering();
        let mut passed = Vec::new();
        for (lsn, op) in stream {
            let skip = locator.skip_message(Lsn(*lsn))?;
            if !skip || matches!(op, Begin | Commit) {
                passed.push((*lsn, *op));
            }
        }
        Ok(passed)
    }

    fn dml(passed: &[(u64, MessageType)]) -> Vec<u64> {
        passed.iter().filter(|(_, op)| op.is_dml() || *op == Message).map(|(lsn, _)| *lsn).collect()
    }

    #[test]
    fn the_rules_follow_the_releases_that_brought_them() {
        assert_eq!(rules((3, 7)), V37);
        assert!(rules((1, 2)).legacy_skip && !rules((1, 3)).legacy_skip);
        assert!(rules((1, 3)).commit_lsn_read_from_processed_key && rules((1, 8)).commit_lsn_read_from_processed_key);
        assert!(!rules((1, 9)).commit_lsn_read_from_processed_key && rules((1, 9)).commit_lsn_defaults_to_processed);
        assert!(!rules((1, 9)).fail_on_unseen_lsn && rules((2, 0)).fail_on_unseen_lsn);
        assert!(!rules((1, 9)).flushing_after_first_message && rules((2, 0)).flushing_after_first_message);
        assert!(!rules((2, 1)).resume_at_begin_on_shared_lsn && rules((2, 2)).resume_at_begin_on_shared_lsn);
        assert!(!rules((3, 5)).message_resumes_at_first_lsn && rules((3, 6)).message_resumes_at_first_lsn);
        assert!(!rules((3, 6)).counts_events_per_lsn && rules((3, 7)).counts_events_per_lsn);
        assert!(!rules((3, 6)).commit_false_match_guard && rules((3, 7)).commit_false_match_guard);
    }

    /// §5.3 item 6: a stored DML inside T; T is re-sent whole; resume at the change after it.
    #[test]
    fn a_mid_transaction_restart_resumes_after_the_stored_change() {
        let stream = [(100, Begin), (100, Insert), (200, Insert), (300, Insert), (340, Commit)];
        let mut locator = WalPositionLocator::new(V37, Some(Lsn(60)), Some(Lsn(200)), Some(Insert), 1);
        assert!(locator.searching_enabled());
        assert_eq!(search(&mut locator, &stream), Some((Lsn(300), 4)));
        assert_eq!(dml(&filter(&mut locator, &stream).unwrap()), [300]);
    }

    /// No stored commit LSN: resume at the first LSN received.
    #[test]
    fn without_a_stored_commit_the_first_lsn_received_resumes() {
        let mut locator = WalPositionLocator::new(V37, None, Some(Lsn(500)), Some(Insert), 1);
        assert_eq!(search(&mut locator, &[(600, Begin), (600, Insert)]), Some((Lsn(600), 1)));
        assert!(!WalPositionLocator::none(V37).searching_enabled());
    }

    /// The stored event not among the replayed ones: the first COMMIT past the stored commit ends
    /// the search at that transaction's BEGIN.
    #[test]
    fn a_commit_past_the_stored_commit_resumes_at_its_begin() {
        let stream = [(700, Begin), (700, Insert), (740, Commit)];
        let mut locator = WalPositionLocator::new(V37, Some(Lsn(500)), Some(Lsn(500)), Some(Commit), 0);
        assert_eq!(search(&mut locator, &stream), Some((Lsn(700), 3)));
        assert_eq!(dml(&filter(&mut locator, &stream).unwrap()), [700]);
    }

    /// DBZ-5915 (row 4): the stored event is a BEGIN whose LSN (the previous commit's end, the
    /// stored `lsn_proc`) the first change shares. Before 2.2 the change was taken as processed.
    #[test]
    fn dbz_5915_a_change_sharing_the_stored_begins_lsn() {
        let stream = [(500, Begin), (500, Insert), (600, Insert), (640, Commit)];
        let resumed = |version| {
            let mut locator = WalPositionLocator::new(rules(version), Some(Lsn(500)), Some(Lsn(500)), Some(Begin), 0);
            let found = search(&mut locator, &stream);
            (found, dml(&filter(&mut locator, &stream).unwrap()))
        };
        assert_eq!(resumed((2, 2)), (Some((Lsn(500), 2)), vec![500, 600]), "2.2 resumes at the BEGIN");
        assert_eq!(resumed((2, 1)), (Some((Lsn(600), 3)), vec![600]), "2.1 loses the change at 500");
    }

    /// DBZ-6204 (row 5): previous COMMIT, next BEGIN and INSERT at one LSN, the COMMIT stored.
    #[test]
    fn dbz_6204_commit_begin_and_insert_at_one_lsn() {
        let stream = [(500, Begin), (500, Insert), (600, Insert), (640, Commit)];
        for (version, expected) in [((2, 1), vec![600]), ((2, 2), vec![500, 600]), ((3, 6), vec![500, 600])] {
            let mut locator = WalPositionLocator::new(rules(version), Some(Lsn(500)), Some(Lsn(500)), Some(Commit), 0);
            search(&mut locator, &stream).expect("found");
            assert_eq!(dml(&filter(&mut locator, &stream).unwrap()), expected, "Debezium {version:?}");
        }
    }

    /// dbz#76 (row 6): the stored COMMIT's end equals a change of the next emitted transaction,
    /// an older one that began before it (interleaved): its earlier changes come first, and the
    /// search, seeing the stored LSN on a change, takes everything up to it as processed.
    #[test]
    fn dbz_76_a_change_at_the_stored_commits_end_in_an_interleaved_transaction() {
        // T_A began before T_B, which committed ending at 500; T_A's changes at 300 and 500.
        let stream = [(300, Begin), (300, Insert), (500, Insert), (540, Commit)];
        let replay = |version| {
            let mut locator = WalPositionLocator::new(rules(version), Some(Lsn(500)), Some(Lsn(500)), Some(Commit), 0);
            search(&mut locator, &stream).expect("found");
            dml(&filter(&mut locator, &stream).unwrap())
        };
        assert_eq!(replay((3, 7)), [300, 500], "3.7: a false match, resume at the first LSN received");
        assert_eq!(replay((3, 6)), Vec::<u64>::new(), "3.6: the change at 300 and the one at 500 are lost");
    }

    /// dbz#1554 (row 7): three COPY rows at one LSN, two processed before the crash.
    #[test]
    fn dbz_1554_events_sharing_an_lsn_are_counted() {
        let stream = [(400, Begin), (400, Insert), (400, Insert), (400, Insert), (500, Insert), (540, Commit)];
        let replay = |version, processed| {
            let mut locator =
                WalPositionLocator::new(rules(version), Some(Lsn(300)), Some(Lsn(400)), Some(Insert), processed);
            search(&mut locator, &stream).expect("found");
            dml(&filter(&mut locator, &stream).unwrap())
        };
        // 3.7 resumes at 400 skipping two events; but the filter counts the BEGIN at 400 as one
        // of them (`skipMessage` runs for BEGIN too), so the second row is replayed: a duplicate.
        assert_eq!(replay((3, 7), 2), [400, 400, 500], "3.7 replays the second and third rows");
        assert_eq!(replay((3, 6), 2), [500], "3.6: the third row at 400 is lost");
        // One processed: the count is used only above 1, and the next different LSN resumes, as
        // before 3.7: the second and third rows are lost in 3.7 too.
        assert_eq!(replay((3, 7), 1), [500], "one processed: the next different LSN, as before");
    }

    /// dbz#1379 (row 8): the stored event is a non-transactional message (lsn_commit = lsn_proc =
    /// its LSN); only messages follow, and none is a COMMIT: before 3.6 the search never ends.
    #[test]
    fn dbz_1379_a_stored_message_resumes_at_the_first_lsn() {
        let stream = [(600, Message), (700, Message)];
        let mut fixed = WalPositionLocator::new(rules((3, 6)), Some(Lsn(500)), Some(Lsn(500)), Some(Message), 0);
        assert_eq!(search(&mut fixed, &stream), Some((Lsn(600), 1)));
        assert_eq!(dml(&filter(&mut fixed, &stream).unwrap()), [600, 700]);
        let mut buggy = WalPositionLocator::new(rules((3, 5)), Some(Lsn(500)), Some(Lsn(500)), Some(Message), 0);
        assert_eq!(search(&mut buggy, &stream), None, "3.5 waits for a COMMIT that never comes");
    }

    /// DBZ-5031 / DBZ-5597 (row 3): the reopened stream never delivers the resume LSN (the slot
    /// was confirmed past it meanwhile). Before 2.0 every later message is filtered; since 2.0 the
    /// first unseen LSN fails the task.
    #[test]
    fn dbz_5031_5597_an_unseen_lsn_on_the_filtering_stream() {
        let searched = [(100, Begin), (100, Insert), (200, Insert), (240, Commit)];
        let reopened = [(300, Begin), (300, Insert), (340, Commit)];
        let mut buggy = WalPositionLocator::new(rules((1, 9)), Some(Lsn(60)), Some(Lsn(100)), None, 0);
        assert_eq!(search(&mut buggy, &searched).map(|(lsn, _)| lsn), Some(Lsn(200)));
        assert_eq!(dml(&filter(&mut buggy, &reopened).unwrap()), Vec::<u64>::new(), "1.9 filters it all");
        assert!(buggy.filtering(), "and keeps filtering");
        let mut fixed = WalPositionLocator::new(rules((2, 0)), Some(Lsn(60)), Some(Lsn(100)), None, 0);
        search(&mut fixed, &searched);
        let error = filter(&mut fixed, &reopened).unwrap_err();
        assert!(error.contains("Message with LSN '0/12C' not present among LSNs seen"), "{error}");
    }
}
