//! Words a user reads (issue 16, items 9–13, 15, 17): the sink's `auto.offset.reset`, partitions
//! named by topic, a rebuild without a snapshot, script steps that cannot apply, pinned and shrunk
//! scenarios that load, and no Rust debug text in any report.
#![cfg(madsim)]

mod common;

use common::{claims, load, load_text, run};
use handoff_models::scenario::spec::Invariant;
use handoff_sim::scenario;
use handoff_sim::sweep::{regressions, shrink};
use handoff_sim::timed::report;
use std::path::PathBuf;
use std::process::Command;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("handoff-words-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn handoff(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_handoff")).args(args).output().expect("the handoff binary runs")
}

// ----- item 9: auto.offset.reset -----

/// A consumer that first looks at its topics after the connector published its snapshot: the
/// sink and Kafka clogged for the first 5 s.
fn late_consumer(reset: &str) -> String {
    claims(
        "late-consumer",
        50,
        "",
        &format!(
            "[sink]\napply = \"version-guard\"\n\"auto.offset.reset\" = \"{reset}\"\n\
             [[fault]]\nat = \"0s\"\naction = \"clog\"\nbetween = [\"sink\", \"kafka\"]\nduration_ms = 5000\n\
             [prediction]\nverdict = \"holds\"\nwhy = \"w\"\n"
        ),
    )
}

#[test]
fn a_consumer_group_defaults_to_latest_and_a_late_latest_consumer_skips_the_snapshot() {
    let default = load_text(&late_consumer("latest").replace("\"auto.offset.reset\" = \"latest\"\n", ""));
    assert_eq!(default.sink.auto_offset_reset.name(), "latest", "ConsumerConfig's default");
    let latest = run(&default, 1);
    assert!(latest.violated().contains(&Invariant::I1), "{:?}", latest.findings);
    let first = latest.findings.iter().find(|f| f.invariant == Invariant::I1).expect("an I1 finding");
    assert!(first.detail.contains("was published to Kafka"), "it arrived in Kafka, the consumer skipped it: {first}");
    let earliest = run(&load_text(&late_consumer("earliest")), 1);
    assert!(earliest.findings.is_empty(), "{:?}", earliest.findings);
}

#[test]
fn a_consumer_with_no_reset_policy_fails_and_says_so() {
    let spec = load_text(&late_consumer("none"));
    let result = run(&spec, 1);
    let timeline = report::timeline(&spec, &result);
    let failed = timeline.iter().find(|line| line.contains("consumer FAILED")).expect("the failure is narrated");
    assert!(failed.contains("NoOffsetForPartitionException") && failed.contains("claims.public.claims-0"), "{failed}");
    // It said it cannot go on: no I11, and the boundary says why it was not reached.
    assert!(!result.violated().contains(&Invariant::I11), "{:?}", result.findings);
    assert!(!result.boundary.reached);
    assert!(result.boundary.reason.contains("the sink's consumer FAILED"), "{}", result.boundary.reason);
}

/// The exhaustive lens: a consumer under `latest` that dies before its first commit (the bound
/// never fires the commit timer) skips, on restart, what was appended meanwhile.
#[test]
fn a_latest_consumer_that_dies_before_its_first_commit_skips_records_in_the_bound() {
    let dir = temp_dir("latest-bound");
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    for (reset, finds) in [("latest", true), ("earliest", false)] {
        let text = claims(
            "latest-bound",
            1,
            "\"snapshot.fetch.size\" = 1",
            &format!(
                "[sink]\napply = \"version-guard\"\n\"auto.offset.reset\" = \"{reset}\"\n\
                 [check]\nrows = 1\ncrash = [\"sink\"]\n[[check.script]]\nupdate = 1\n\
                 [prediction]\nverdict = \"violated\"\nfindings = [\"I1\"]\nwhy = \"w\"\n"
            ),
        );
        let path = dir.join(format!("{reset}.toml"));
        std::fs::write(&path, text).expect("written");
        let output = handoff(&["check", path.to_str().expect("utf-8"), "--json"]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let found = stdout.contains("\"name\":\"I1 no gap\",\"expectation\":\"always\",\"outcome\":\"counterexample\"");
        assert_eq!(found, finds, "{reset}: {stdout}{}", String::from_utf8_lossy(&output.stderr));
        if finds {
            // The story: the consumer dies before its first commit and starts again at the end.
            assert!(
                stdout.contains("sink crashed") && stdout.contains("consumer started at claims.public.claims-0@1"),
                "{stdout}"
            );
        }
    }
}

// ----- item 10: partitions named by topic -----

#[test]
fn partitions_are_named_by_topic_and_the_checkpoint_shows_the_data_topics() {
    // Heartbeats: a second topic with a partition 0.
    let (spec, seed) = load("claims-quiet-database-heartbeat-fix", &[]);
    let result = run(&spec, seed);
    let timeline = report::timeline(&spec, &result);
    let started = timeline.iter().find(|line| line.contains("consumer started at")).expect("narrated");
    assert!(
        started.contains("claims.public.claims-0@0") && started.contains("__debezium-heartbeat.claims-0@0"),
        "{started}"
    );
    for line in &timeline {
        assert!(!line.contains(" p0=") && !line.contains("[p0@"), "a partition without its topic: {line}");
    }
    let record = result.record.as_ref().expect("a record");
    let topics: Vec<String> = record.sink_checkpoint.iter().map(|entry| entry.topic.clone()).collect();
    assert!(!topics.is_empty() && topics.iter().all(|topic| topic == "claims.public.claims"), "{topics:?}");
    let partitions: Vec<u32> = record.sink_checkpoint.iter().map(|entry| entry.partition).collect();
    assert_eq!(partitions, (0..spec.kafka.partitions).collect::<Vec<_>>());
    assert!(record.sink_checkpoint.iter().all(|entry| entry.committed_offset.is_some()));
    let text = record.render();
    assert!(text.contains("sink checkpoint      claims.public.claims-0@"), "{text}");
}

// ----- item 11: a rebuild without a snapshot -----

#[test]
fn a_rebuild_under_no_data_says_it_takes_no_snapshot_and_the_record_flags_it() {
    let text = claims(
        "rebuild-no-data",
        20,
        "\"snapshot.mode\" = \"no_data\"",
        "[sink]\napply = \"version-guard\"\n[[fault]]\nat = \"5s\"\naction = \"rebuild-connector\"\n\
         [prediction]\nverdict = \"holds\"\nwhy = \"w\"\n",
    );
    let spec = load_text(&text);
    let result = run(&spec, 1);
    let timeline = report::timeline(&spec, &result).join("\n");
    assert!(!timeline.contains("new snapshot"), "no snapshot is taken, none is announced:\n{timeline}");
    assert!(
        timeline.contains("resume the connector on a new slot WITHOUT a snapshot (snapshot.mode=no_data)"),
        "{timeline}"
    );
    let record = result.record.as_ref().expect("a record");
    assert!(record.rebuild_without_snapshot);
    let rebuild = record.rebuild_from_new_snapshot.as_deref().expect("the rebuild is recorded");
    assert!(rebuild.starts_with("WITHOUT A SNAPSHOT") && rebuild.contains("cannot restore history"), "{rebuild}");
    // Under `initial` the same runbook takes a new snapshot, and the record says that.
    let initial = load_text(&text.replace("\"snapshot.mode\" = \"no_data\"", ""));
    let record = run(&initial, 1).record.expect("a record");
    assert!(!record.rebuild_without_snapshot);
    assert!(record.rebuild_from_new_snapshot.is_some_and(|text| text.starts_with("a new snapshot started at")));
}

// ----- item 13: pinned and shrunk scenarios load -----

#[test]
fn sweep_save_writes_seeds_that_load_on_a_scenario_without_a_standby() {
    // The README's naive-sink sweep: seeds 0, 6 and 21 drew a clog of pg1 <-> pg2.
    let (spec, _) = load("claims-restart-during-snapshot", &["sink.apply=naive-upsert"]);
    let dir = temp_dir("save");
    for seed in [0, 6, 21] {
        let path = regressions::save_seed(&spec, "claims-restart-during-snapshot.toml", seed, &dir)
            .unwrap_or_else(|error| panic!("seed {seed}: {error}"));
        let loaded = scenario::load(&path, &[]).unwrap_or_else(|error| panic!("seed {seed}: {error}"));
        assert!(loaded.spec.faults.iter().all(|fault| !format!("{}", fault.action).contains("pg2")));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_shrunk_scenario_loads() {
    let (spec, _) = load("claims-restart-during-snapshot", &["sink.apply=naive-upsert"]);
    let shrunk = shrink::shrink(&spec, 6, None, 40).expect("seed 6 has a finding");
    let text = scenario::to_toml(&shrunk.spec, shrunk.seed).expect("written");
    scenario::load_str("shrunk.toml", &text, &[]).unwrap_or_else(|error| panic!("{error}\n{text}"));
}

// ----- item 15: script steps that cannot apply -----

fn script_error(rows: u32, steps: &str) -> String {
    let text = claims(
        "steps",
        rows,
        "",
        &format!("[sink]\napply = \"version-guard\"\n{steps}[prediction]\nverdict = \"holds\"\nwhy = \"w\"\n"),
    );
    match scenario::load_str("s.toml", &text, &[]) {
        Ok(_) => String::new(),
        Err(error) => error.message,
    }
}

#[test]
fn a_script_step_that_can_never_apply_is_refused_when_the_scenario_loads() {
    let delete = script_error(200, "[[workload.script]]\nat = \"1s\"\ndelete = 500\n");
    assert!(delete.starts_with("s.toml:"), "{delete}");
    assert!(
        delete
            .contains("workload.script[0].delete: claim 500 is not a row of public.claims (keys 1 to 200 are loaded)"),
        "{delete}"
    );
    let update = script_error(0, "[[workload.script]]\nat = \"1s\"\nupdate = 1\n");
    assert!(
        update.contains("workload.script[0].update: claim 1 is not a row of public.claims (it loads no row)"),
        "{update}"
    );
    let insert = script_error(200, "[[workload.script]]\nat = \"1s\"\ninsert = 7\n");
    assert!(
        insert.contains("workload.script[0].insert: claim 7 is already a row") && insert.contains("duplicate key"),
        "{insert}"
    );
    // An insert at a later time does not make an earlier update possible.
    let later = script_error(
        10,
        "[[workload.script]]\nat = \"1s\"\nupdate = 11\n[[workload.script]]\nat = \"2s\"\ninsert = 11\n",
    );
    assert!(later.contains("workload.script[0].update: claim 11"), "{later}");
    // What may apply is taken: an insert first, then its update and delete; a delete, then an
    // insert of the same key; a key the background workload inserts.
    for steps in [
        "[[workload.script]]\nat = \"1s\"\ninsert = 11\n[[workload.script]]\nat = \"2s\"\nupdate = 11\n\
         [[workload.script]]\nat = \"3s\"\ndelete = 11\n",
        "[[workload.script]]\nat = \"1s\"\ndelete = 3\n[[workload.script]]\nat = \"2s\"\ninsert = 3\n",
        "[[workload.script]]\nat = \"snapshot-scan-started\"\nupdate = 11\n[[workload.script]]\nat = \"2s\"\ninsert = 11\n",
        "[workload]\nend_ms = 1000\ninserts_per_second = 5.0\n[[workload.script]]\nat = \"2s\"\ndelete = 13\n",
    ] {
        assert_eq!(script_error(10, steps), "", "{steps}");
    }
}

#[test]
fn a_check_script_step_that_can_never_apply_is_refused() {
    let check = |steps: &str| script_error(3, &format!("[check]\nrows = 2\n{steps}"));
    let update = check("[[check.script]]\nupdate = 3\n");
    assert!(update.contains("check.script[0].update: the bound loads keys 1 to 2"), "{update}");
    let insert = check("[[check.script]]\ninsert = 2\n");
    assert!(insert.contains("check.script[0].insert: the bound loads keys 1 to 2 (rows = 2); claim 2"), "{insert}");
    assert_eq!(check("[[check.script]]\ninsert = 2\n[[check.script]]\ndelete = 2\n"), "");
    assert_eq!(check("[[check.script]]\ninsert = 3\n"), "");
}

#[test]
fn a_script_step_that_does_not_apply_in_the_run_says_so_in_the_timeline_and_the_json() {
    // Loadable (claim 3 is loaded), but the first delete leaves the second nothing to delete.
    let text = claims(
        "steps",
        20,
        "",
        "[sink]\napply = \"version-guard\"\n[[workload.script]]\nat = \"2s\"\ndelete = 3\n\
         [[workload.script]]\nat = \"3s\"\ndelete = 3\nlabel = \"delete claim 3 again\"\n\
         [prediction]\nverdict = \"holds\"\nwhy = \"w\"\n",
    );
    let spec = load_text(&text);
    let result = run(&spec, 1);
    let timeline = report::timeline(&spec, &result);
    let line = timeline.iter().find(|line| line.contains("DID NOT APPLY")).expect("a timeline line");
    assert!(line.contains("(delete claim 3 from public.claims)") && line.contains("changed no row"), "{line}");
    let json = report::json(&spec, "s.toml", &result);
    let entries = json["scripted_not_applied"].as_array().expect("a JSON list");
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(entries[0]["at_ms"].as_u64().is_some_and(|at| at >= 3_000), "{entries:?}");
    assert!(report::text(&spec, "s.toml", &result, &report::TimelineView::default()).contains("note: at t=3."));
}

#[test]
fn a_check_script_step_that_does_not_apply_is_narrated_in_the_bound() {
    use handoff_models::exhaustive::world::{Action, World};
    let text = claims(
        "steps",
        1,
        "",
        "[sink]\napply = \"version-guard\"\n[check]\nrows = 1\n[[check.script]]\ndelete = 1\n\
         [[check.script]]\nupdate = 1\n[prediction]\nverdict = \"holds\"\nwhy = \"w\"\n",
    );
    let spec = load_text(&text);
    // The bound's world: its rows, its [[check.script]] transactions.
    let (world, bounds) = handoff_sim::exhaustive::check::bound(&spec).expect("a bound");
    // Delete claim 1, then update it; each answer arrives when the bound delivers it.
    let steps: Vec<Action> = ["run script 0", "deliver pg1 -> app", "run script 1", "deliver pg1 -> app"]
        .iter()
        .map(|step| step.parse().expect("a step"))
        .collect();
    let replayed = World::replay(&world, &bounds, &steps);
    let names = report::names(&world);
    let lines: Vec<String> = replayed
        .iter()
        .flat_map(|(_, events)| events.iter().filter_map(|event| handoff_models::judge::narrate::line(event, &names)))
        .collect();
    assert!(
        lines
            .iter()
            .any(|line| line
                .contains("scripted transaction (update claim 1 to approved in public.claims) DID NOT APPLY")),
        "{lines:#?}"
    );
}

// ----- item 17: no Rust debug text in reports -----

/// Text that reads as Rust's `{:?}` output: a struct's braces, an `Option`, a path, a CamelCase
/// name that is not a real system's.
fn debug_text(text: &str) -> Vec<String> {
    // Names of the real systems, and of functions and exceptions the models' comments name.
    const REAL: [&str; 14] = [
        "PostgreSQL",
        "PostgresConnector",
        "PSQLException",
        "ConnectException",
        "NoOffsetForPartitionException",
        "KeepLogSeg",
        "InvalidateObsoleteReplicationSlots",
        "CheckPointSegments",
        "ReplicationSlotsComputeRequiredLSN",
        "LogicalConfirmReceivedLocation",
        "JsonConverter",
        "CheckpointerMain",
        // Debezium's streaming metrics, as JMX names them (the health signals).
        "MilliSecondsBehindSource",
        "MilliSecondsSinceLastEvent",
    ];
    let mut hits = Vec::new();
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '(')) {
        let camel = word.chars().next().is_some_and(char::is_uppercase)
            && word.chars().skip(1).any(char::is_uppercase)
            && word.chars().any(char::is_lowercase)
            && !REAL.iter().any(|real| word.trim_end_matches(['(', ':']) == *real);
        if camel || word.starts_with("Some(") || word == "None" || word.contains("::") {
            hits.push(word.to_string());
        }
    }
    // `Name { field: …`
    let bytes: Vec<char> = text.chars().collect();
    for (index, c) in bytes.iter().enumerate() {
        if *c == '{' && index > 0 && bytes[index - 1] == ' ' {
            let after: String = bytes[index + 1..].iter().take(40).collect();
            let field: String = after.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !field.is_empty() && after.trim_start()[field.len()..].starts_with(':') {
                hits.push(format!("{{ {after}"));
            }
        }
    }
    hits
}

#[test]
fn the_debug_text_detector_finds_what_it_should() {
    assert!(!debug_text("trigger never fired: Fault(WalBurst { bytes: 47185920 }) waiting").is_empty());
    assert!(!debug_text("connector RUNNING, phase Some(CheckingLogPosition)").is_empty());
    assert!(!debug_text("a handoff_models::scenario::spec::Moment").is_empty());
    assert!(debug_text("PostgreSQL 15, {lsn=0/16B9558, lsn_proc=0/16B9558}, claims.public.claims-0@3").is_empty());
}

/// Walks a JSON value's strings.
fn json_strings(value: &serde_json::Value, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(text) => out.push(text.clone()),
        serde_json::Value::Array(items) => items.iter().for_each(|item| json_strings(item, out)),
        serde_json::Value::Object(map) => {
            for (key, item) in map {
                out.push(key.clone());
                json_strings(item, out);
            }
        }
        _ => {}
    }
}

#[test]
fn no_report_shows_rust_debug_text() {
    let dir = temp_dir("debug");
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    // A trigger that never fires (no standby, so no promotion), and a stuck run.
    let never = dir.join("never.toml");
    let never_text = claims(
        "never",
        20,
        "",
        "[sink]\napply = \"version-guard\"\n\"auto.offset.reset\" = \"earliest\"\n\
         [[fault]]\nat = \"promoted\"\naction = \"wal-burst\"\nbytes = \"45MB\"\n\
         [[workload.script]]\nat = \"promoted#2 + 1s\"\ndelete = 3\n\
         [prediction]\nverdict = \"holds\"\nwhy = \"w\"\n",
    );
    std::fs::write(&never, never_text).expect("written");
    let scenarios = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut runs: Vec<PathBuf> = vec![never.clone()];
    for name in [
        "claims-restart-during-snapshot",
        "claims-quiet-database",
        "claims-failover",
        "claims-failover-right-after-snapshot",
        "claims-slot-cap-recovery-runbook",
    ] {
        runs.push(scenarios.join(format!("{name}.toml")));
    }
    runs.push(scenarios.join("zoo/naive-sink.toml"));
    let mut outputs: Vec<(String, String)> = Vec::new();
    for path in &runs {
        let path = path.to_str().expect("utf-8");
        for json in [false, true] {
            let mut args = vec!["run", path];
            if json {
                args.push("--json");
            }
            let output = handoff(&args);
            outputs.push((format!("run {path} json={json}"), String::from_utf8_lossy(&output.stdout).into_owned()));
        }
    }
    let restart = scenarios.join("claims-restart-during-snapshot.toml");
    let restart = restart.to_str().expect("utf-8");
    for args in [
        vec!["sweep", restart, "--seeds", "8", "--jobs", "1", "--set", "sink.apply=naive-upsert"],
        vec!["sweep", restart, "--seeds", "8", "--jobs", "1", "--set", "sink.apply=naive-upsert", "--json"],
        vec!["check", scenarios.join("zoo/naive-sink.toml").to_str().expect("utf-8").to_owned().leak()],
        vec!["check", scenarios.join("zoo/naive-sink.toml").to_str().expect("utf-8").to_owned().leak(), "--json"],
    ] {
        let output = handoff(&args);
        outputs.push((args.join(" "), String::from_utf8_lossy(&output.stdout).into_owned()));
    }
    let mut found = Vec::new();
    for (what, output) in &outputs {
        assert!(!output.trim().is_empty(), "{what} printed nothing");
        let mut texts = Vec::new();
        for line in output.lines() {
            match serde_json::from_str::<serde_json::Value>(line) {
                Ok(value) if line.trim_start().starts_with('{') => json_strings(&value, &mut texts),
                _ => texts.push(line.to_string()),
            }
        }
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(output) {
            json_strings(&value, &mut texts);
        }
        for text in texts {
            let hits = debug_text(&text);
            if !hits.is_empty() {
                found.push(format!("{what}: {hits:?} in {text}"));
            }
        }
    }
    assert!(found.is_empty(), "debug text in reports:\n{}", found.join("\n"));
    // The never-firing trigger is told in words.
    let never_report = &outputs[0].1;
    assert!(
        never_report
            .contains("trigger never fired: wal-burst of 45MB in another database, waiting for the moment promoted"),
        "{never_report}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
