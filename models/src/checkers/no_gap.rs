//! I1 no gap: every change committed after the snapshot point reaches the sink, possibly
//! superseded by a later change of the same key.
//!
//! Verifies, at the acceptance boundary (when the pipeline is running and caught up): every
//! document live in the surviving source history is live in the sink with exactly the source's
//! row. A missing or older document means a change never arrived; the finding names the first
//! commit of that key the sink does not reflect. The same version with other content means the
//! sink holds a version from a history the source no longer has.
//!
//! Does not verify: deleted documents (I2); documents newer in the sink than in the source
//! (phantoms, I4); anything when the boundary was not reached (the pipeline stopped or failed
//! closed: the tail it did not deliver is not a gap).

use super::{Boundary, Evidence, Finding, describe_doc};
use crate::observe::Doc;
use crate::spec::Invariant;

pub fn check(evidence: &Evidence, boundary: &Boundary, found: &mut Vec<Finding>) {
    for table in evidence.captured.iter() {
        // Both sides are in key order: walk them together. (By index: a `Peekable`'s empty
        // `Option<Option<_>>` leaves bytes unwritten that the compiled loop tests before it
        // tests the discriminant, which valgrind reports; docs/memory-safety.md.)
        let sink = boundary.sink.table(*table);
        let mut at = 0;
        for (key, row) in evidence.oracle.live(*table) {
            let id = (*table, key);
            while sink.get(at).is_some_and(|((_, other), _)| *other < key) {
                at += 1;
            }
            let doc = sink.get(at).filter(|((_, other), _)| *other == key).map(|(_, doc)| doc);
            let sink_version = match doc {
                Some(Doc::Live(seen)) if *seen == row => continue,
                Some(Doc::Live(seen)) => Some(seen.version),
                Some(Doc::Tombstone(version)) => *version,
                None => None,
            };
            if sink_version.is_some_and(|version| version > row.version) {
                continue; // newer than the source: reported by I4
            }
            let versions = evidence.oracle.versions(id);
            let removed_live_row = matches!(doc, Some(Doc::Tombstone(_))) && sink_version == Some(row.version);
            let same_version_other_content = !removed_live_row && sink_version == Some(row.version);
            let first_missing = if same_version_other_content || removed_live_row {
                versions.last()
            } else if let Some(seen) = sink_version {
                versions.iter().find(|version| version.row.is_some_and(|r| r.version > seen))
            } else {
                // The first version of the document's latest life.
                let start = versions.iter().rposition(|version| version.row.is_none()).map_or(0, |i| i + 1);
                versions.get(start)
            };
            let mut finding = Finding::new(Invariant::I1, Some(key), boundary.at)
                .expected(format!("version {} ({})", row.version, row.status.name()))
                .seen(describe_doc(doc));
            if let Some(version) = first_missing {
                finding = finding.lsn(version.commit_lsn).detail(if removed_live_row {
                    "the sink removed the row (a delete or a reconciliation) although the source still has it"
                        .to_string()
                } else if same_version_other_content {
                    "same version, other content: the sink holds a row from a history the source no longer has"
                        .to_string()
                } else if version.csn == 0 {
                    "the row as loaded before the run never reached the sink".to_string()
                } else {
                    format!("first change missing from the sink committed at {} ({})", version.at, version.commit_lsn)
                });
            }
            found.push(finding);
        }
    }
}
