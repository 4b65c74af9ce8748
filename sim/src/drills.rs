//! The drills catalogue: the lessons a learner runs, each a question, its setup in a paragraph,
//! the scenario that answers it and what to change next. The claims runbook of DOMAIN.md, the
//! game-day drills and the bug zoo (`scenarios/zoo/`, read from its files). `handoff drill NAME`
//! asks for a prediction first, runs the scenario against it, and says where the prediction was
//! right and wrong from the model's findings and the scenario's own reasoning.

use std::path::{Path, PathBuf};

/// Where a lesson comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// The claims runbook: restart test, failover gate, rebuild rule, audit record.
    Runbook,
    /// The game-day drills.
    GameDay,
    /// A hazard of the real systems and its fixed twin.
    Zoo,
}

impl Group {
    pub fn title(self) -> &'static str {
        match self {
            Group::Runbook => "The claims runbook",
            Group::GameDay => "The game-day drills",
            Group::Zoo => "The bug zoo (each entry's `-fixed` twin is the same bound with the fix)",
        }
    }
}

/// One lesson.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lesson {
    /// What `handoff drill NAME` takes.
    pub name: String,
    pub group: Group,
    pub title: String,
    pub question: String,
    /// The setup in one paragraph: the scenario's own description (and what the lesson's variant
    /// changes).
    pub setup: String,
    /// The scenario, relative to `scenarios/`.
    pub scenario: String,
    /// The variant of it the lesson runs, if any.
    pub variant: Option<String>,
    /// What to change next, and what follows.
    pub next: String,
    /// Where the recorded real-world observation and the model disagree: which sources the model
    /// follows, and why.
    pub sources: Option<String>,
    /// Not modelled yet: why the lesson cannot run (it is listed so that nobody thinks it forgotten).
    pub not_modelled: Option<String>,
}

struct Fixed {
    name: &'static str,
    group: Group,
    title: &'static str,
    question: &'static str,
    /// What the lesson's variant changes (the scenario's description gives the rest).
    setup: &'static str,
    scenario: &'static str,
    variant: Option<&'static str>,
    next: &'static str,
    sources: Option<&'static str>,
    not_modelled: Option<&'static str>,
}

const FIXED: &[Fixed] = &[
    Fixed {
        name: "restart-test",
        group: Group::Runbook,
        title: "The restart test",
        question: "An update and a delete land while the snapshot scans, and the Connect worker dies right before \
                   the snapshot's completion is recorded. After the restart, does the search index match the \
                   source: no claim missing, none resurrected?",
        setup: "",
        scenario: "claims-restart-during-snapshot.toml",
        variant: None,
        next: "Change the sink's rule: `--variant snapshot-epoch` (a rule that knows snapshot epochs), `--variant \
               naive-upsert` (last write wins, what most sinks do by default). Then `--set kafka.partitions=1`: \
               does ordering alone save the version guard?",
        sources: None,
        not_modelled: None,
    },
    Fixed {
        name: "failover-gate",
        group: Group::Runbook,
        title: "The failover gate",
        question: "PostgreSQL fails over to its standby. Before the connector may publish again, the gate compares \
                   its stored offset with the new primary's slot. What does the gate decide, and does the index \
                   stay one history?",
        setup: "",
        scenario: "claims-failover.toml",
        variant: None,
        next: "Turn the gate off (`--variant no-gate`): what does the connector do by itself? Then a sink with \
               only a version guard (`--variant version-guard`), and a standby that lags (`--variant \
               lagging-standby`). On PostgreSQL 17 with failover slots: claims-failover-pg17-synchronized.toml.",
        sources: None,
        not_modelled: None,
    },
    Fixed {
        name: "rebuild-rule",
        group: Group::Runbook,
        title: "The rebuild rule",
        question: "The slot was lost to max_slot_wal_keep_size while the connector was stopped. The runbook says: \
                   stop, delete the offsets, drop the lost slot, resume, and never skip silently to the current \
                   log. Does the rebuilt pipeline end as one history?",
        setup: "",
        scenario: "claims-slot-cap-recovery-runbook.toml",
        variant: None,
        next: "Without the runbook (claims-slot-cap-stopped-connector.toml): what does the resumed connector do \
               with a lost slot? With two workers (`--variant two-workers`).",
        sources: None,
        not_modelled: None,
    },
    Fixed {
        name: "audit-record",
        group: Group::Runbook,
        title: "The audit record",
        question: "A stream started at a wall-clock time after a plain read: do the row counts at the acceptance \
                   boundary prove the index right, or can a count match hide wrong rows?",
        setup: "",
        scenario: "claims-wall-clock-start.toml",
        variant: None,
        next: "Read the handoff record's `keys missing`, `keys differing` and `sampled hashes` lines against `row \
               counts`. Then the supported handoff point: the connector's own snapshot \
               (claims-restart-during-snapshot.toml).",
        sources: None,
        not_modelled: None,
    },
    Fixed {
        name: "outbox",
        group: Group::GameDay,
        title: "Drill 1: retire the dual write (transactional outbox)",
        question: "Three status changes, each with its outbox event; Connect is killed inside the offset-flush \
                   window and restarts. What does the consumer see, and what does it do?",
        setup: "",
        scenario: "outbox-status-changes-connect-killed.toml",
        variant: None,
        next: "Drop the inbox (`--variant no-inbox`). Run the same drill from the team's own files \
               (outbox-connector-from-json.toml), and an EventRouter without a predicate \
               (outbox-router-without-predicate.toml).",
        sources: Some(
            "The game-day article says an EventRouter needs a predicate because heartbeat and transaction \
             records would break it. Debezium's code passes such records through unchanged \
             (EventRouterDelegate.apply: records that are not change envelopes are returned as they are); what \
             breaks it is any other captured table's change record (\"Unable to find payload field\"). The model \
             follows the code: outbox-router-without-predicate fails on a claims record, not on a heartbeat.",
        ),
        not_modelled: None,
    },
    Fixed {
        name: "backfill",
        group: Group::GameDay,
        title: "Drill 2: backfill a table nobody captured (incremental snapshot)",
        question: "A 40-row hubs table is added to the capture and backfilled by a signal row with chunks of 16. \
                   How many chunks and watermark windows does it take, and what lands on which topics?",
        setup: "",
        scenario: "hubs-backfill.toml",
        variant: None,
        next: "The signal table left out of the publication (hubs-backfill-signal-not-published.toml); changes \
               inside a window (hubs-backfill-changes-in-window.toml); a restart mid-backfill \
               (hubs-backfill-restart.toml); a blocking snapshot (hubs-backfill-blocking.toml).",
        sources: None,
        not_modelled: None,
    },
    Fixed {
        name: "quiet-database",
        group: Group::GameDay,
        title: "Drill 3: let a quiet database fill the disk (slot retention)",
        question: "The captured tables are quiet while another database on the server writes WAL. Does a RUNNING \
                   connector keep its slot clean?",
        setup: "",
        scenario: "claims-quiet-database.toml",
        variant: None,
        next: "The fixes: a heartbeat.action.query into a published table (claims-quiet-database-heartbeat-fix.toml), \
               lsn.flush.mode=connector_and_driver (claims-quiet-database-keepalive-fix.toml); then the cap with \
               the connector stopped (claims-slot-cap-stopped-connector.toml) and both slots \
               (outbox-quiet-database-both-slots.toml).",
        sources: Some(
            "The article notes that snapshot.mode=when_needed does not drop an invalidated slot; Debezium's code \
             confirms it (the slot exists, so no new snapshot is chosen; the connector retries the lost slot up \
             to 900 times). The model follows the code.",
        ),
        not_modelled: None,
    },
    Fixed {
        name: "schema-change",
        group: Group::GameDay,
        title: "Drill 4: break a schema (registry compatibility)",
        question: "Avro through a schema registry with a BACKWARD rule: add a nullable column, then rename a NOT \
                   NULL column. Which connector fails, which silently carries nulls?",
        setup: "Schema changes, converters and a schema registry.",
        scenario: "",
        variant: None,
        next: "",
        sources: None,
        not_modelled: Some(
            "Schema changes, Avro and schema registries are not modelled yet: the model's rows have fixed columns \
             and its converters are not simulated. This lesson waits for them.",
        ),
    },
    Fixed {
        name: "worker-killed",
        group: Group::GameDay,
        title: "Drill 5: kill a Connect worker",
        question: "Two workers, one task each. How long until a task runs again after a clean leave, after a \
                   vanished worker, and when the leader is the one lost?",
        setup: "",
        scenario: "two-workers-one-leaves.toml",
        variant: None,
        next: "A vanished worker (`--variant vanished`), one that comes back (`--variant vanished-and-back`), the \
               leader lost (`--variant leader-lost`) or leaving (`--variant leader-leaves`), no delay (`--variant \
               no-delay`).",
        sources: Some(
            "The drill's recorded observation is that a worker that leaves cleanly hands its tasks over at once. \
             Kafka's IncrementalCooperativeAssignor does that only when the leaver was the leader (a new leader \
             has no previous assignment, so the tasks are new and assigned straight away): a clean leave of a \
             non-leader leaves the same lost tasks as a crash, which wait scheduled.rebalance.max.delay.ms. The \
             model follows the assignor's code; the observation fits a leader leaving.",
        ),
        not_modelled: None,
    },
    Fixed {
        name: "exactly-once",
        group: Group::GameDay,
        title: "Drill 6: turn on exactly-once",
        question: "Workers with exactly.once.source.support=enabled, a read_committed consumer without an inbox; \
                   Connect killed after Kafka acknowledged the third event but before its transaction committed. \
                   How many events does the consumer see?",
        setup: "The variant: each poll is one Kafka transaction holding its records and its offsets; the \
                consumer reads committed records only and has no inbox.",
        scenario: "outbox-status-changes-connect-killed.toml",
        variant: Some("exactly-once"),
        next: "A consumer that reads uncommitted records (`--variant exactly-once-read-uncommitted`) and \
               transaction.boundary=interval (`--variant exactly-once-interval`). What exactly-once does not \
               remove: snapshot duplicates (claims-restart-during-snapshot.toml `--variant exactly-once`), a \
               hanging transaction (outbox-hanging-transaction.toml).",
        sources: None,
        not_modelled: None,
    },
    Fixed {
        name: "health-signals",
        group: Group::GameDay,
        title: "Drill 7: read the health signals",
        question: "A connector can be RUNNING while delivering nothing. The backfill signal is inserted into a \
                   signal table that is not in the publication: what happens, and what would tell you?",
        setup: "",
        scenario: "hubs-backfill-signal-not-published.toml",
        variant: None,
        next: "Read the signals a dashboard shows, over time: `handoff run SCENARIO --html report.html` (its \
               Health signals chart) or `--json` (`health`). Here they look well: events keep coming, so \
               nothing on a dashboard says the backfill never started. Other ways to be RUNNING and idle: a \
               quiet database (claims-quiet-database.toml: MilliSecondsBehindSource stays at its last event's \
               few milliseconds while MilliSecondsSinceLastEvent climbs; after the slot is lost the restarted \
               task reads -1, unknown), a lost slot retried for half an hour \
               (claims-slot-cap-stopped-connector.toml), a message heartbeat that keeps the heartbeat fresh \
               and moves no event (claims-quiet-database-message-heartbeat-restart.toml).",
        sources: None,
        not_modelled: None,
    },
];

/// The `scenarios/` directory: under the working directory, or else the one this binary was
/// built from.
pub fn scenarios_dir() -> PathBuf {
    let here = PathBuf::from("scenarios");
    if here.join("zoo").is_dir() {
        return here;
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

/// Every lesson: the runbook's and the game day's, then the zoo's (from `dir/zoo`, in name order).
pub fn lessons(dir: &Path) -> Vec<Lesson> {
    let mut lessons: Vec<Lesson> = FIXED
        .iter()
        .map(|fixed| Lesson {
            name: fixed.name.to_owned(),
            group: fixed.group,
            title: fixed.title.to_owned(),
            question: fixed.question.to_owned(),
            setup: match description(&dir.join(fixed.scenario)) {
                Some(description) if fixed.setup.is_empty() => description,
                Some(description) => format!("{description} {}", fixed.setup),
                None => fixed.setup.to_owned(),
            },
            scenario: fixed.scenario.to_owned(),
            variant: fixed.variant.map(str::to_owned),
            next: fixed.next.to_owned(),
            sources: fixed.sources.map(str::to_owned),
            not_modelled: fixed.not_modelled.map(str::to_owned),
        })
        .collect();
    lessons.extend(zoo(dir));
    lessons
}

/// A scenario file's `description`, on one line.
fn description(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let table: toml::Table = toml::from_str(&text).ok()?;
    Some(table.get("description")?.as_str()?.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// The zoo's entries (not their `-fixed` twins): the question from the entry's description, the
/// twin as what to run next.
fn zoo(dir: &Path) -> Vec<Lesson> {
    let Ok(entries) = std::fs::read_dir(dir.join("zoo")) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter_map(|file| file.strip_suffix(".toml").map(str::to_owned))
        .filter(|name| !name.ends_with("-fixed"))
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|name| {
            let description = description(&dir.join("zoo").join(format!("{name}.toml")))?;
            // `Zoo: <what it is> (<sources>). <more>`, or `Zoo: <issue> (<sources>). <what it is>. …`:
            // the title is what it is, after the issue's name.
            let setup = description.trim_start_matches("Zoo:").trim().to_owned();
            let head_end = setup.find(" (").unwrap_or(setup.len());
            let head = &setup[..head_end];
            let is_issue = head.contains('#') || head.contains("DBZ-");
            let title = match setup[head_end..].split_once(". ") {
                Some((_, after)) if is_issue => format!("{head}: {}", first_sentence(after, 90)),
                _ => first_sentence(head, 90),
            };
            let twin = format!("zoo/{name}-fixed.toml");
            let has_twin = dir.join(&twin).is_file();
            Some(Lesson {
                question: "What goes wrong, and which invariant says so?".to_owned(),
                title,
                setup,
                scenario: format!("zoo/{name}.toml"),
                variant: None,
                next: if has_twin {
                    format!("Its fixed twin, the same bound with the fix: `{} run scenarios/{twin}`.", crate::program())
                } else {
                    "Explore its [check] bound: `handoff check` on the same file.".to_owned()
                },
                sources: None,
                not_modelled: None,
                group: Group::Zoo,
                name,
            })
        })
        .collect()
}

/// The catalogue, in words: each group's lessons with their title, and the question of each
/// lesson of the runbook and the game day.
pub fn catalogue(lessons: &[Lesson]) -> String {
    let mut out = String::new();
    for group in [Group::Runbook, Group::GameDay, Group::Zoo] {
        out.push_str(&format!(
            "{}
",
            group.title()
        ));
        let of_group: Vec<&Lesson> = lessons.iter().filter(|lesson| lesson.group == group).collect();
        let width = of_group.iter().map(|lesson| lesson.name.chars().count()).max().unwrap_or(0);
        for lesson in of_group {
            let status = if lesson.not_modelled.is_some() { "  (not modelled yet)" } else { "" };
            if group == Group::Zoo {
                // Long names: the title on the next line.
                out.push_str(&format!("  {}\n      {}\n", lesson.name, lesson.title));
                continue;
            }
            out.push_str(&format!("  {:<width$}  {}{status}\n", lesson.name, lesson.title));
            {
                for line in wrap(&lesson.question, 96) {
                    out.push_str(&format!("  {:<width$}    {line}\n", ""));
                }
            }
        }
        out.push('\n');
    }
    out.push_str(
        "Run one with `handoff drill NAME`: it asks for your prediction first (or give it: `--predict holds`, \
         `--predict I2,I4`, `--predict fails-closed`), runs the scenario and says where you were right and wrong.\n",
    );
    out
}

/// `text` in lines of at most `width` characters (a longer word on its own line).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The first sentence of `text` (up to `. ` or `? `), or its first `width` characters and an
/// ellipsis.
fn first_sentence(text: &str, width: usize) -> String {
    let end = [text.find(". "), text.find("? ").map(|at| at + 1)].into_iter().flatten().min().unwrap_or(text.len());
    let first = text[..end].trim();
    if first.chars().count() <= width {
        first.to_owned()
    } else {
        format!("{}…", first.chars().take(width).collect::<String>())
    }
}

/// The lesson named `name`, or a message with the closest name.
pub fn find<'l>(lessons: &'l [Lesson], name: &str) -> Result<&'l Lesson, String> {
    if let Some(lesson) = lessons.iter().find(|lesson| lesson.name == name) {
        return Ok(lesson);
    }
    let names: Vec<&str> = lessons.iter().map(|lesson| lesson.name.as_str()).collect();
    let hint = match crate::scenario::closest(name, &names) {
        Some(close) => format!("did you mean {close}?"),
        None => "`handoff drills` lists them".to_owned(),
    };
    Err(format!("drill `{name}`: no such lesson; {hint}"))
}

/// The lesson before the run: its question, setup and scenario.
pub fn introduce(lesson: &Lesson) -> String {
    let mut out = format!("{}\n\n", lesson.title);
    for (label, text) in [("question", &lesson.question), ("setup", &lesson.setup)] {
        for (index, line) in wrap(text, 100).iter().enumerate() {
            out.push_str(&format!("{:<10}{line}\n", if index == 0 { label } else { "" }));
        }
    }
    let variant = lesson.variant.as_ref().map_or(String::new(), |variant| format!(" --variant {variant}"));
    out.push_str(&format!("scenario  scenarios/{}{variant}\n", lesson.scenario));
    out
}

/// The prompt for a prediction: the forms, and every invariant the model checks.
pub fn prompt() -> String {
    use handoff_models::scenario::spec::Invariant;
    let invariants: Vec<String> = Invariant::CHECKED.iter().map(|i| format!("{i} {}", i.name())).collect();
    format!(
        "Your prediction: holds, fails-closed, or the invariants you expect violated, like I2,I4 ({})",
        invariants.join(", ")
    )
}

/// After the run: the learner's prediction against what the model did, the findings, the
/// scenario's reasoning (when its own prediction held at this seed), what to change next and the
/// sources the model follows where the recorded observation differs.
#[cfg(madsim)]
pub fn explain(
    lesson: &Lesson,
    learner: &handoff_models::scenario::spec::Spec,
    model: &handoff_models::scenario::spec::Spec,
    result: &crate::timed::runner::RunResult,
    model_held: bool,
    replay: &str,
) -> String {
    use crate::verdict::predicted;
    let mut out = String::new();
    out.push_str(&format!("\nyour prediction  {}\n", predicted(&learner.prediction)));
    let violated = result.violated();
    let happened = match (&result.limit, &result.failed_closed, violated.is_empty()) {
        (Some(limit), _, _) => format!("undecided: the run reached {limit} first"),
        (None, Some(stopped), true) => {
            format!("failed closed at {}, no invariant violated: {}", stopped.at, stopped.reason)
        }
        (None, stopped, false) => format!(
            "violated {}{}",
            violated.iter().map(|i| format!("{i} {}", i.name())).collect::<Vec<_>>().join(", "),
            stopped.as_ref().map_or(String::new(), |stopped| format!("; then failed closed at {}", stopped.at))
        ),
        (None, None, true) => "held: no invariant violated, and the pipeline caught up".to_owned(),
    };
    out.push_str(&format!("the model        {happened}\n\n"));
    for line in crate::timed::report::verdict(learner, result) {
        out.push_str(&format!("{}\n", line.replacen("prediction", "your prediction", 1)));
    }
    if !result.findings.is_empty() {
        out.push_str("\nwhat the model found (the first of each invariant)\n");
        let mut seen = Vec::new();
        for finding in &result.findings {
            if !seen.contains(&finding.invariant) {
                seen.push(finding.invariant);
                out.push_str(&format!("  {finding}\n"));
            }
        }
    }
    out.push_str("\nwhy\n");
    if model_held {
        for line in model.prediction.why.lines() {
            out.push_str(&format!("  {line}\n"));
        }
    } else {
        out.push_str(&format!(
            "  The scenario's own prediction ({}) did not hold at this seed: its reasoning is for the scenario's \
             seed. Read the findings above, or run it at its own seed.\n",
            predicted(&model.prediction)
        ));
    }
    out.push('\n');
    for (label, text) in [("next", Some(&lesson.next)), ("sources", lesson.sources.as_ref())] {
        for (index, line) in text.map(|text| wrap(text, 100)).unwrap_or_default().iter().enumerate() {
            out.push_str(&format!("{:<9}{line}\n", if index == 0 { label } else { "" }));
        }
    }
    out.push_str(&format!("replay   {replay}\n"));
    out
}
