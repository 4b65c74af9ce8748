//! The timeline as `handoff run` shows it: one process or a few (`--only`), one key followed
//! across every process (`--key`), and the routine delivery of records folded into one line per
//! run of them unless `--verbose` asks for every line.
//!
//! A routine delivery is what every streamed change goes through and nobody needs to read four
//! times per change: `poll()` returning streamed changes, Kafka appending them (no transaction),
//! the sink applying them (every record upserted or deleted, none refused or ignored), Kafka
//! acknowledging them (no snapshot completion marker among them), and the sink's group committing
//! its positions. A line that says something else (a snapshot row, a refusal, a fault, a commit in
//! PostgreSQL) ends the run and is never folded.

use handoff_models::core::event::{KafkaRecord, Topic};
use handoff_models::core::ids::{Key, Node, TableId};
use handoff_models::core::observe::{Observation, SinkAction, TraceEvent};
use handoff_models::core::signal::ChunkId;
use handoff_models::judge::narrate::{self, Names};
use handoff_models::scenario::spec::Spec;

/// `--key`: a key of one table, or of any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyFilter {
    pub table: Option<TableId>,
    pub key: Key,
}

/// How the timeline is shown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimelineView {
    /// `--only`: the processes shown; empty: every one.
    pub only: Vec<Node>,
    /// `--key`: the key followed.
    pub key: Option<KeyFilter>,
    /// `--verbose`: routine deliveries unfolded.
    pub verbose: bool,
}

impl TimelineView {
    /// The view the flags ask for, or what is wrong with them.
    pub fn parse(spec: &Spec, only: Option<&str>, key: Option<&str>, verbose: bool) -> Result<TimelineView, String> {
        let known = || Node::ALL.iter().map(|node| node.name()).collect::<Vec<_>>().join(", ");
        let mut nodes = Vec::new();
        if let Some(list) = only {
            for name in list.split(',').map(str::trim) {
                if name.is_empty() {
                    return Err(format!("--only {list}: an empty process name; give names like pg1,connect"));
                }
                let Some(node) = Node::ALL.iter().copied().find(|node| node.name() == name) else {
                    let names: Vec<&str> = Node::ALL.iter().map(|node| node.name()).collect();
                    let hint = match crate::scenario::closest(name, &names) {
                        Some(close) => format!("did you mean `{close}`? "),
                        None => String::new(),
                    };
                    return Err(format!(
                        "--only {list}: `{name}` is not a process; {hint}the processes are {}",
                        known()
                    ));
                };
                if !nodes.contains(&node) {
                    nodes.push(node);
                }
            }
        }
        let key = key.map(|text| key_filter(spec, text)).transpose()?;
        Ok(TimelineView { only: nodes, key, verbose })
    }

    /// What the view leaves out, said once above the timeline; empty for the full view.
    pub fn caption(&self, spec: &Spec) -> Vec<String> {
        let mut lines = Vec::new();
        if !self.only.is_empty() {
            let names: Vec<&str> = self.only.iter().map(|node| node.name()).collect();
            lines.push(format!("only the lines of {} (--only)", names.join(", ")));
        }
        if let Some(filter) = &self.key {
            let setup = filter.table.and_then(|table| spec.tables.get(usize::from(table.0)));
            let table = setup.map_or_else(|| "any table".to_string(), |t| t.name.clone());
            let key = match setup.and_then(|t| t.composite_key.as_ref()) {
                Some(composite) => composite.text(filter.key),
                None => filter.key.to_string(),
            };
            lines.push(format!(
                "following key {key} of {table} (--key): the commits that change it, the reads and records that carry \
                 it, the sink's applies of it, and every fault; a poll() line shows when the changes it names \
                 include the key (it names the first four), and the appended line always does"
            ));
        }
        if !self.verbose {
            lines.push(
                "routine deliveries folded, one line per run of them: poll, append, apply, acknowledge, group \
                 commit; --verbose shows every line"
                    .to_string(),
            );
        }
        lines
    }
}

/// `7` or `public.hubs:7`; on a table with a two-column key also its columns' values,
/// `public.orders:(5,2)` or `(5, 2)` (the one table with a two-column key).
fn key_filter(spec: &Spec, text: &str) -> Result<KeyFilter, String> {
    let (table, key) = match text.split_once(':') {
        Some((table, key)) => (Some(table.trim()), key.trim()),
        None => (None, text.trim()),
    };
    let table = match table {
        None => None,
        Some(name) => match spec.tables.iter().find(|t| t.name == name) {
            Some(table) => Some(table.id),
            None => {
                let names: Vec<&str> = spec.tables.iter().map(|t| t.name.as_str()).collect();
                let hint = match crate::scenario::closest(name, &names) {
                    Some(close) => format!("did you mean `{close}`? "),
                    None => String::new(),
                };
                return Err(format!(
                    "--key {text}: `{name}` is not a table of the scenario; {hint}its tables are {}",
                    names.join(", ")
                ));
            }
        },
    };
    if key.contains(',') {
        let composites: Vec<_> = spec
            .tables
            .iter()
            .filter(|t| table.is_none_or(|wanted| wanted == t.id))
            .filter_map(|t| t.composite_key.as_ref().map(|composite| (t, composite)))
            .collect();
        let (setup, composite) = match composites.as_slice() {
            [one] => *one,
            [] => {
                return Err(format!(
                    "--key {text}: {} no two-column key; give a number like 7",
                    match table {
                        Some(_) => "that table has",
                        None => "the scenario's tables have",
                    }
                ));
            }
            _ => {
                return Err(format!(
                    "--key {text}: several tables have a two-column key; name one, like {}:{key}",
                    composites[0].0.name
                ));
            }
        };
        let values: Vec<&str> = key.trim_start_matches('(').trim_end_matches(')').split(',').map(str::trim).collect();
        let parsed: Vec<Option<i64>> = values.iter().map(|value| value.parse::<i64>().ok()).collect();
        let [Some(first), Some(second)] = parsed[..] else {
            return Err(format!(
                "--key {text}: `{key}` is not a key of {}; give its columns' values, like (2, 6) for {}",
                setup.name,
                composite.columns_text()
            ));
        };
        let group_rows = i64::from(composite.group_rows);
        let Some(row) = composite.key(first, second) else {
            return Err(format!(
                "--key {text}: no row of {} has {} = ({first}, {second}): {} is from 1 and {} from 1 to {group_rows} \
                 (group_rows)",
                setup.name,
                composite.columns_text(),
                composite.columns[0],
                composite.columns[1]
            ));
        };
        return Ok(KeyFilter { table: Some(setup.id), key: row });
    }
    let Ok(key) = key.parse::<Key>() else {
        return Err(format!(
            "--key {text}: `{key}` is not a key; give a number like 7, or a table and a key like public.hubs:7 \
             (on a two-column key its values, like public.hubs:(2,6))"
        ));
    };
    Ok(KeyFilter { table, key })
}

/// The timeline lines `view` shows, in time order.
pub fn lines(events: &[TraceEvent], names: &Names, view: &TimelineView) -> Vec<String> {
    let mut out = Vec::new();
    let mut fold = Fold { key: view.key, ..Fold::default() };
    let mut follower = view.key.map(Follower::new);
    for event in events {
        if !view.only.is_empty() && !view.only.contains(&event.node) {
            continue;
        }
        if let Some(follower) = &mut follower
            && !follower.involves(&event.observation)
            && !is_fault(&event.observation)
        {
            continue;
        }
        let Some(line) = narrate::line(event, names) else { continue };
        if !view.verbose && fold.takes(event, names) {
            fold.lines.push(line);
            continue;
        }
        fold.flush(names, &mut out);
        out.push(line);
    }
    fold.flush(names, &mut out);
    out
}

/// One key followed along a trace, in order: what [`involves`] says of each event, and the
/// windows of the incremental-snapshot chunks that read the key (`WindowOpened`,
/// `WindowClosed`), which name their chunk, not their keys.
#[derive(Clone, Debug)]
pub(crate) struct Follower {
    filter: KeyFilter,
    chunks: std::collections::BTreeSet<ChunkId>,
}

impl Follower {
    pub(crate) fn new(filter: KeyFilter) -> Follower {
        Follower { filter, chunks: std::collections::BTreeSet::new() }
    }

    /// Whether the next event of the trace names the key.
    pub(crate) fn involves(&mut self, observation: &Observation) -> bool {
        match observation {
            Observation::ChunkRead { chunk, .. } if involves(observation, &self.filter) => {
                self.chunks.insert(*chunk);
                true
            }
            Observation::WindowOpened { chunk } | Observation::WindowClosed { chunk, .. } => {
                self.chunks.contains(chunk)
            }
            Observation::OfConnector { observation, .. } => self.involves(observation),
            _ => involves(observation, &self.filter),
        }
    }
}

/// Whether `record` carries the followed key.
fn carries(record: &KafkaRecord, filter: &KeyFilter) -> bool {
    match record.tp.topic {
        Topic::Change(table) => record.key == filter.key && filter.table.is_none_or(|wanted| wanted == table),
        _ => false,
    }
}

fn is_fault(observation: &Observation) -> bool {
    matches!(observation, Observation::Fault { .. } | Observation::Crashed { .. })
}

/// Whether `observation` names the key.
pub(crate) fn involves(observation: &Observation, filter: &KeyFilter) -> bool {
    let is = |table: TableId, key: Key| key == filter.key && filter.table.is_none_or(|wanted| wanted == table);
    let record = |record: &KafkaRecord| carries(record, filter);
    match observation {
        Observation::Committed { txn, .. } => txn.changes.iter().any(|change| is(change.table, change.key)),
        Observation::ScanStarted { table, .. } => filter.table.is_none_or(|wanted| wanted == *table),
        Observation::Polled { summary } => summary.first_changes.iter().any(|(_, table, key)| match table {
            Some(table) => is(*table, *key),
            None => *key == filter.key,
        }),
        Observation::Appended { records, .. } => records.iter().any(record),
        Observation::SinkApplied { applies } => applies.iter().any(|apply| record(&apply.record)),
        Observation::SinkReconciled { removed, .. } => removed.iter().any(|(table, key, _)| is(*table, *key)),
        Observation::ScriptedNotApplied { ops, .. } => ops.iter().any(|op| {
            let (table, key) = op.target();
            is(table, key)
        }),
        Observation::ChunkRead { table, after, last, order, nulls, .. } => {
            if filter.table.is_some_and(|wanted| wanted != *table) {
                return false;
            }
            // Positions are keys when the chunks go by the key itself.
            if order.is_primary_key() && nulls.is_none() {
                after.is_none_or(|after| filter.key > after) && last.is_some_and(|last| filter.key <= last)
            } else {
                true
            }
        }
        _ => false,
    }
}

/// Whether `observation` is a routine delivery (the module's comment): `poll()` returning
/// streamed changes only, Kafka appending outside a transaction, the sink upserting or deleting
/// every record, Kafka acknowledging without the snapshot completion marker, the sink's group
/// committing. The text timeline folds them; the HTML report draws them grey.
pub(crate) fn is_routine(observation: &Observation) -> bool {
    match observation {
        Observation::Polled { summary } => {
            summary.snapshot_rows == 0
                && summary.tombstones == 0
                && !summary.last_snapshot_record
                && summary.changes == summary.records
        }
        Observation::Appended { transaction, .. } => transaction.is_none(),
        Observation::SinkApplied { applies } => {
            applies.iter().all(|apply| matches!(apply.action, SinkAction::Upserted | SinkAction::Deleted))
        }
        Observation::ProduceAcked { completion_marker, .. } => !completion_marker,
        Observation::GroupCommitted { .. } => true,
        _ => false,
    }
}

/// A run of routine delivery lines being folded.
#[derive(Default)]
struct Fold {
    /// `--key`: the followed key's own records are named.
    key: Option<KeyFilter>,
    lines: Vec<String>,
    first: Option<String>,
    polls: usize,
    polled: usize,
    changes: Vec<String>,
    more_changes: usize,
    appended: Vec<KafkaRecord>,
    applied: usize,
    acknowledged: usize,
    group_commits: usize,
    last_at: String,
}

impl Fold {
    /// Takes `event` into the run when it is a routine delivery.
    fn takes(&mut self, event: &TraceEvent, names: &Names) -> bool {
        if !is_routine(&event.observation) {
            return false;
        }
        match &event.observation {
            Observation::Polled { summary } => {
                self.polls += 1;
                self.polled += summary.records;
                for (op, table, key) in &summary.first_changes {
                    let key = table.map_or_else(|| key.to_string(), |table| names.key_values(table, *key));
                    self.changes.push(format!("{op} {key}"));
                }
                self.more_changes += summary.changes.saturating_sub(summary.first_changes.len());
            }
            Observation::Appended { records, .. } => self.appended.extend(records.iter().copied()),
            Observation::SinkApplied { applies } => self.applied += applies.len(),
            Observation::ProduceAcked { count, .. } => self.acknowledged += count,
            Observation::GroupCommitted { .. } => self.group_commits += 1,
            _ => return false,
        }
        let at = event.at.to_string();
        if self.first.is_none() {
            self.first = Some(at.clone());
        }
        self.last_at = at;
        true
    }

    /// Ends the run: one line for it (a single line as it is).
    fn flush(&mut self, names: &Names, out: &mut Vec<String>) {
        let fold = std::mem::replace(self, Fold { key: self.key, ..Fold::default() });
        match fold.lines.len() {
            0 => return,
            1 => {
                out.extend(fold.lines);
                return;
            }
            _ => {}
        }
        let mut parts = Vec::new();
        if fold.polls > 0 {
            let mut shown = fold.changes.join(", ");
            if fold.more_changes > 0 {
                shown.push_str(&format!(" and {} more", fold.more_changes));
            }
            parts.push(format!("poll() returned {} record(s) ({shown})", fold.polled));
        }
        if !fold.appended.is_empty() {
            parts.push(format!(
                "Kafka appended {} record(s) at {}",
                fold.appended.len(),
                narrate::partitions_summary(&fold.appended, names)
            ));
            if let Some(filter) = &fold.key {
                let own: Vec<KafkaRecord> =
                    fold.appended.iter().filter(|record| carries(record, filter)).copied().collect();
                if !own.is_empty() {
                    let key = match filter.table {
                        Some(table) => names.key_values(table, filter.key),
                        None => filter.key.to_string(),
                    };
                    parts.push(format!("key {key}'s at {}", narrate::partitions_summary(&own, names)));
                }
            }
        }
        if fold.applied > 0 {
            parts.push(format!("the sink applied {}", fold.applied));
        }
        if fold.acknowledged > 0 {
            parts.push(format!("Kafka acknowledged {}", fold.acknowledged));
        }
        if fold.group_commits > 0 {
            parts.push(format!("the sink's group committed {} time(s)", fold.group_commits));
        }
        let first = fold.first.unwrap_or_default();
        out.push(format!(
            "{first:<10} {:<9} {}; {} lines folded, to {}",
            "delivery",
            parts.join(", "),
            fold.lines.len(),
            fold.last_at
        ));
    }
}
