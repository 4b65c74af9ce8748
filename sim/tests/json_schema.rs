//! The JSON of every command against its documentation (`docs/json.md`): each object a command
//! prints has exactly the documented fields (every field it prints is documented; every field
//! documented as *always* is there), findings are the same object everywhere, timeline events are
//! objects, and every top-level object carries `schema_version` 1. Through the binary.
#![cfg(madsim)]

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn handoff(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_handoff"))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

/// The documented objects: name → (field → always).
fn documented() -> BTreeMap<String, BTreeMap<String, bool>> {
    let text = std::fs::read_to_string(root().join("docs/json.md")).expect("docs/json.md");
    let mut objects: BTreeMap<String, BTreeMap<String, bool>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("### Object `") {
            let name = heading.split('`').next().expect("a name").to_owned();
            objects.insert(name.clone(), BTreeMap::new());
            current = Some(name);
            continue;
        }
        if line.starts_with("## ") || line.starts_with("### ") {
            current = None;
            continue;
        }
        let Some(name) = &current else { continue };
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 || !cells[1].starts_with('`') {
            continue;
        }
        let field = cells[1].trim_matches('`').to_owned();
        let always = match cells[2] {
            "always" => true,
            "optional" => false,
            other => panic!("docs/json.md, object {name}, field {field}: `{other}` is neither always nor optional"),
        };
        objects.get_mut(name).expect("the object").insert(field, always);
    }
    objects
}

/// `value` is the documented object `name`, both ways.
fn conforms(docs: &BTreeMap<String, BTreeMap<String, bool>>, name: &str, value: &Value, what: &str) {
    let fields = docs.get(name).unwrap_or_else(|| panic!("docs/json.md documents no object `{name}`"));
    let object = value.as_object().unwrap_or_else(|| panic!("{what}: not an object: {value}"));
    let printed: BTreeSet<&str> = object.keys().map(String::as_str).collect();
    for key in &printed {
        assert!(fields.contains_key(*key), "{what}: field `{key}` is not documented in docs/json.md's object `{name}`");
    }
    for (field, always) in fields {
        if *always {
            assert!(printed.contains(field.as_str()), "{what}: documented field `{field}` of `{name}` is missing");
        }
    }
}

fn json_of(output: &Output, what: &str) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!("{what}: not one JSON object ({error}): {}", String::from_utf8_lossy(&output.stdout))
    })
}

fn versioned(value: &Value, what: &str) {
    assert_eq!(value["schema_version"], 1, "{what}: schema_version");
}

/// A run report, its findings, its timeline events and its record.
fn run_report(docs: &BTreeMap<String, BTreeMap<String, bool>>, report: &Value, what: &str) {
    versioned(report, what);
    conforms(docs, "run", report, what);
    for finding in report["findings"].as_array().expect("findings") {
        conforms(docs, "finding", finding, &format!("{what}: a finding"));
    }
    let timeline = report["timeline"].as_array().expect("a timeline");
    assert!(!timeline.is_empty(), "{what}: an empty timeline");
    for event in timeline {
        conforms(docs, "timeline-event", event, &format!("{what}: a timeline event"));
        assert!(event["text"].as_str().is_some_and(|text| !text.is_empty()), "{what}: {event}");
        assert!(event["kind"].as_str().is_some_and(|kind| !kind.is_empty()), "{what}: {event}");
        assert!(event["fields"].is_object(), "{what}: {event}");
    }
    conforms(docs, "handoff_record", &report["handoff_record"], &format!("{what}: the handoff record"));
    let samples = report["health"]["samples"].as_array().expect("health samples");
    assert!(report["health"]["interval_ms"].as_u64().is_some_and(|ms| ms >= 1000), "{what}: {}", report["health"]);
    assert!(!samples.is_empty(), "{what}: no health samples");
    for sample in samples {
        conforms(docs, "health-sample", sample, &format!("{what}: a health sample"));
        for connector in sample["connectors"].as_array().expect("connectors") {
            conforms(docs, "health-connector", connector, &format!("{what}: a health sample's connector"));
        }
    }
}

#[test]
fn run_replay_and_drill_print_the_documented_objects() {
    let docs = documented();
    for (args, code) in [
        (vec!["run", "scenarios/claims-restart-during-snapshot.toml", "--json"], 0),
        (vec!["run", "scenarios/orders-composite-key.toml", "--json"], 0),
        // An outbox with exactly-once: the record's outbox and isolation fields.
        (vec!["run", "scenarios/outbox-hanging-transaction.toml", "--json"], 0),
        (vec!["run", "scenarios/hubs-backfill.toml", "--json"], 0),
        (vec!["run", "scenarios/two-workers-one-leaves.toml", "--json"], 0),
        (vec!["replay", "scenarios/regressions/claims-restart-during-snapshot-seed-0-i2-shrunk.toml", "--json"], 0),
    ] {
        let what = args.join(" ");
        let output = handoff(&args);
        assert_eq!(output.status.code(), Some(code), "{what}: {}", String::from_utf8_lossy(&output.stderr));
        run_report(&docs, &json_of(&output, &what), &what);
    }
    // The timeline's events are the text's lines: the same words, in the same order.
    let json = json_of(&handoff(&["run", "scenarios/claims-restart-during-snapshot.toml", "--json"]), "run");
    let text = String::from_utf8_lossy(
        &handoff(&["run", "scenarios/claims-restart-during-snapshot.toml", "--verbose"]).stdout,
    )
    .to_string();
    let first = &json["timeline"][0];
    assert_eq!((first["at_ms"].as_u64(), first["process"].as_str()), (Some(0), Some("pg1")));
    for event in json["timeline"].as_array().expect("events").iter().take(40) {
        let text_of = event["text"].as_str().expect("text");
        assert!(text.contains(text_of), "the text timeline lacks `{text_of}`");
    }
    let committed = json["timeline"].as_array().expect("events").iter().find(|event| event["kind"] == "committed");
    assert!(committed.is_some_and(|event| event["fields"]["txn"].is_object()), "a committed event's fields");

    let output = handoff(&["drill", "restart-test", "--predict", "I2", "--json"]);
    assert_eq!(output.status.code(), Some(0));
    let drill = json_of(&output, "drill");
    versioned(&drill, "drill");
    conforms(&docs, "drill", &drill, "drill");
    run_report(&docs, &drill["run"], "drill's run");
}

#[test]
fn sweep_and_merge_print_the_documented_lines() {
    let docs = documented();
    let scenario = "scenarios/claims-restart-during-snapshot.toml";
    let dir = std::env::temp_dir().join(format!("handoff-json-schema-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory");
    let mut files = Vec::new();
    for shard in ["1/2", "2/2"] {
        let output = handoff(&[
            "sweep",
            scenario,
            "--seeds",
            "6",
            "--jobs",
            "1",
            "--shard",
            shard,
            "--set",
            "sink.apply=naive-upsert",
            "--json",
        ]);
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        let lines: Vec<Value> = stdout.lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect();
        assert_eq!(lines.len(), 4, "{stdout}");
        let (summary, runs) = lines.split_last().expect("lines");
        for line in runs {
            versioned(line, "a sweep line");
            let name = if line.get("crashed").is_some() { "sweep-crash" } else { "sweep-run" };
            conforms(&docs, name, line, "a sweep line");
            for finding in line["findings"].as_array().expect("findings") {
                conforms(&docs, "finding", finding, "a sweep line's finding");
            }
        }
        versioned(summary, "the sweep summary");
        conforms(&docs, "sweep-summary", summary, "the sweep summary");
        let file = dir.join(format!("shard-{}.jsonl", &shard[..1]));
        std::fs::write(&file, &stdout).expect("write");
        files.push(file.display().to_string());
    }
    // The naive sink's runs have findings: the same objects as `run`'s.
    let shard = std::fs::read_to_string(&files[0]).expect("read");
    assert!(shard.contains("\"findings\":[{\"invariant\":\"I2\""), "{shard}");
    let mut args = vec!["merge", "--json"];
    args.extend(files.iter().map(String::as_str));
    let output = handoff(&args);
    let merged = json_of(&output, "merge");
    versioned(&merged, "merge");
    conforms(&docs, "sweep-summary", &merged, "merge");
    assert_eq!(merged["summary"]["runs"], 6);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_and_conform_print_the_documented_objects() {
    let docs = documented();
    let output = handoff(&["check", "scenarios/claims-restart-during-snapshot.toml", "--json"]);
    assert_eq!(output.status.code(), Some(0));
    let check = json_of(&output, "check");
    versioned(&check, "check");
    conforms(&docs, "check", &check, "check");
    let output = handoff(&["conform", "conform/heartbeats.toml", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let conform = json_of(&output, "conform");
    versioned(&conform, "conform");
    conforms(&docs, "conform", &conform, "conform");
}

/// Every object the document names is one a test above checks, and every command with `--json`
/// is in the document's table.
#[test]
fn the_document_covers_every_command() {
    let docs = documented();
    let names: BTreeSet<&str> = docs.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = [
        "run",
        "finding",
        "timeline-event",
        "health-sample",
        "health-connector",
        "handoff_record",
        "drill",
        "sweep-run",
        "sweep-crash",
        "sweep-summary",
        "check",
        "conform",
    ]
    .into_iter()
    .collect();
    assert_eq!(names, expected);
    let text = std::fs::read_to_string(root().join("docs/json.md")).expect("docs/json.md");
    for command in [
        "`run SCENARIO --json`",
        "`replay FILE --json`",
        "`drill NAME --json`",
        "`sweep SCENARIO --json`",
        "`merge FILES --json`",
        "`check SCENARIO --json`",
        "`conform WORKLOAD --json`",
    ] {
        assert!(text.contains(command), "docs/json.md does not list {command}");
    }
}
