//! A pipeline's own configuration as input: `[connector] from = "FILE"` reads a Kafka Connect
//! REST object or a bare `config`, what the model does not simulate is accepted and listed as not
//! modelled, what it would get wrong is refused by name, and a typo in the file is an error naming
//! the file, the line, the property and the right name. `--set` takes Debezium's dotted names.

use handoff_models::components::connect::debezium::SnapshotMode;
use handoff_sim::scenario::{Loaded, load};
use std::path::{Path, PathBuf};

fn scenarios() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

/// A fresh directory for one test's files.
fn dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("handoff-connector-files-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

const SCENARIO: &str = r#"name = "from-file"
[[table]]
name = "public.claims"
[[table]]
name = "public.outbox_event"
outbox = { aggregatetype = "claim", delete = true }
[connector]
from = "connector.json"
[sink]
apply = "version-guard"
[prediction]
verdict = "holds"
why = "nothing goes wrong"
"#;

/// Loads `SCENARIO` (with `[connector]` as `section` says) next to `json`.
fn load_with(test: &str, section: &str, json: &str, sets: &[&str]) -> Result<Loaded, String> {
    let dir = dir(test);
    std::fs::write(dir.join("connector.json"), json).expect("write");
    let scenario = SCENARIO.replace("from = \"connector.json\"\n", section);
    std::fs::write(dir.join("s.toml"), scenario).expect("write");
    let sets: Vec<String> = sets.iter().map(|set| (*set).to_owned()).collect();
    load(&dir.join("s.toml"), &sets).map_err(|error| error.message)
}

fn json_fails(test: &str, json: &str, phrases: &[&str]) -> String {
    match load_with(test, "from = \"connector.json\"\n", json, &[]) {
        Ok(_) => panic!("expected an error, but the scenario loaded"),
        Err(message) => {
            for phrase in phrases {
                assert!(message.contains(phrase), "expected {phrase:?} in:\n{message}");
            }
            message
        }
    }
}

#[test]
fn the_game_day_outbox_connector_runs_unchanged() {
    let loaded = load(&scenarios().join("outbox-connector-from-json.toml"), &[]).expect("loads");
    let spec = &loaded.spec;
    // What decides the run comes from the file.
    assert_eq!(spec.debezium.name, "outbox-connector", "the REST object's name");
    assert_eq!(spec.debezium.snapshot_mode, SnapshotMode::NoData);
    assert_eq!(spec.debezium.slot_name, "outbox");
    assert_eq!(spec.debezium.publication_name, "outbox_publication");
    assert!(spec.debezium.publication_filtered);
    assert!(!spec.debezium.tombstones_on_delete);
    // What does not is accepted, and listed once each, with why.
    let listed: Vec<&str> = spec.not_modelled.iter().map(|item| item.setting.as_str()).collect();
    for setting in [
        "database.hostname",
        "database.password",
        "database.sslmode",
        "key.converter",
        "value.converter.schemas.enable",
        "topic.creation.default.replication.factor",
        "errors.log.enable",
        "tasks.max",
        "transforms.outbox.table.expand.json.payload",
    ] {
        assert_eq!(listed.iter().filter(|listed| **listed == setting).count(), 1, "{setting} in {listed:?}");
    }
    for decided in ["snapshot.mode", "slot.name", "transforms.outbox.type", "table.include.list"] {
        assert!(!listed.contains(&decided), "{decided} is modelled");
    }
    assert!(spec.not_modelled.iter().all(|item| item.section == "connector" && !item.why.is_empty()));
}

/// The report lists what is not modelled, and the record keeps no secret.
#[cfg(madsim)]
#[test]
fn the_report_lists_what_is_not_modelled_and_the_record_masks_the_password() {
    let loaded = load(&scenarios().join("outbox-connector-from-json.toml"), &[]).expect("loads");
    let spec = &loaded.spec;
    let result = handoff_sim::timed::runner::run(spec, loaded.seed);
    assert!(result.prediction_held, "the drill's prediction holds");
    let text = handoff_sim::timed::report::header(spec, "s", &result);
    assert!(text.contains("not modelled (accepted as given; they do not change this run)"), "{text}");
    assert!(text.contains("connector: key.converter, value.converter, value.converter.schemas.enable: serialisation"));
    let record = result.record.as_ref().expect("a record").render();
    assert!(record.contains("database.password=********"), "{record}");
    assert!(!record.contains("secrets/claims-db"), "{record}");
}

#[test]
fn a_bare_config_reads_as_the_rest_object_and_the_section_overrides_it() {
    let rest = std::fs::read_to_string(scenarios().join("connectors/outbox-connector.json")).expect("bundled");
    let value: serde_json::Value = serde_json::from_str(&rest).expect("json");
    let bare = serde_json::to_string_pretty(&value["config"]).expect("json");
    let from_rest = load_with("rest", "from = \"connector.json\"\n", &rest, &[]).expect("rest");
    let from_bare = load_with("bare", "from = \"connector.json\"\n", &bare, &[]).expect("bare");
    // The bare config has no name: the connector keeps the scenario's default name.
    assert_eq!(from_bare.spec.debezium.snapshot_mode, from_rest.spec.debezium.snapshot_mode);
    let sorted = |loaded: &Loaded| {
        let mut settings: Vec<String> = loaded.spec.not_modelled.iter().map(|item| item.setting.clone()).collect();
        settings.sort();
        settings
    };
    assert_eq!(sorted(&from_bare), sorted(&from_rest));
    assert_eq!(from_rest.spec.debezium.name, "outbox-connector");
    // The section's own keys win over the file's, and so do --set's (with Debezium's dotted names).
    let own =
        load_with("own", "from = \"connector.json\"\n\"snapshot.mode\" = \"initial\"\n", &rest, &[]).expect("own");
    assert_eq!(own.spec.debezium.snapshot_mode, SnapshotMode::Initial);
    let set =
        load_with("set", "from = \"connector.json\"\n", &rest, &["connector.snapshot.mode=initial"]).expect("set");
    assert_eq!(set.spec.debezium.snapshot_mode, SnapshotMode::Initial);
    let quoted =
        load_with("quoted", "from = \"connector.json\"\n", &rest, &["connector.\"snapshot.mode\"=initial"]).expect("q");
    assert_eq!(set.spec.debezium, quoted.spec.debezium, "the dotted and the quoted path are the same setting");
    assert_eq!(set.spec.connector_properties, quoted.spec.connector_properties);
}

#[test]
fn a_typo_in_the_file_names_the_file_line_property_and_the_right_name() {
    let rest = std::fs::read_to_string(scenarios().join("connectors/outbox-connector.json")).expect("bundled");
    let typo = rest.replace("\"snapshot.mode\"", "\"snapshot.mdoe\"");
    let line = typo.lines().position(|line| line.contains("snapshot.mdoe")).expect("in the file") + 1;
    let message = json_fails("typo", &typo, &["unknown connector property; did you mean \"snapshot.mode\"?"]);
    assert!(message.contains(&format!("connector.json:{line}:5: connector.\"snapshot.mdoe\":")), "{message}");
    // A value the model reads is checked where the file has it.
    let bad = rest.replace("\"slot.name\": \"outbox\"", "\"slot.name\": \"Outbox-Slot\"");
    let line = bad.lines().position(|line| line.contains("Outbox-Slot")).expect("in the file") + 1;
    let message = json_fails("value", &bad, &["is not a valid slot name"]);
    assert!(message.contains(&format!("connector.json:{line}:")), "{message}");
}

#[test]
fn what_the_model_would_get_wrong_is_refused_by_name() {
    let config = |extra: &str| {
        format!(
            "{{\"connector.class\": \"io.debezium.connector.postgresql.PostgresConnector\", \"topic.prefix\": \
             \"claims\", \"plugin.name\": \"pgoutput\"{extra}}}"
        )
    };
    assert!(load_with("plain", "from = \"connector.json\"\n", &config(""), &[]).is_ok());
    // At its default, a property the model fixes is accepted (and listed); away from it, refused.
    let default = load_with("default", "from = \"connector.json\"\n", &config(", \"skipped.operations\": \"t\""), &[])
        .expect("the default");
    assert_eq!(default.spec.not_modelled[0].setting, "skipped.operations");
    json_fails(
        "skipped",
        &config(", \"skipped.operations\": \"u\""),
        &["`u` is not modelled yet; only the default, `t`"],
    );
    json_fails("exclude", &config(", \"column.exclude.list\": \"public.claims.amount\""), &["not modelled yet"]);
    json_fails("mask", &config(", \"column.mask.with.12.chars\": \"public.claims.amount\""), &["not modelled yet"]);
    // Families of properties: converters' own settings, client overrides, topic-creation groups.
    let families = config(
        ", \"key.converter.schemas.enable\": false, \"producer.override.linger.ms\": 5, \"topic.creation.groups\": \
         \"compacted\", \"topic.creation.compacted.include\": \"claims.*\"",
    );
    let loaded = load_with("families", "from = \"connector.json\"\n", &families, &[]).expect("families");
    assert_eq!(loaded.spec.not_modelled.len(), 4);
}

#[test]
fn a_file_that_is_not_a_connector_configuration_says_what_is_wrong() {
    json_fails("json", "{\"name\": \"x\",\n \"config\": {\n", &["connector.json:3:", "invalid JSON"]);
    json_fails("array", "[1, 2]", &["connector.json:1:1: expected a JSON object"]);
    json_fails(
        "top",
        "{\"name\": \"x\", \"config\": {}, \"tasksmax\": 1}",
        &["`tasksmax` is not a key of Connect's connector object"],
    );
    json_fails(
        "names",
        "{\"name\": \"a\", \"config\": {\"name\": \"b\"}}",
        &["config.name `b` is not the connector's name `a`"],
    );
    json_fails(
        "value",
        "{\"topic.prefix\": \"claims\", \"plugin.name\": [\"pgoutput\"]}",
        &["`plugin.name`: a connector property is a string", "found an array"],
    );
    let missing = load_with("missing", "from = \"nowhere.json\"\n", "{}", &[]).expect_err("no file");
    assert!(missing.contains("s.toml:8:8: connector.from:"), "{missing}");
    assert!(missing.contains("nowhere.json`: cannot read"), "{missing}");
    let number = load_with("number", "from = 3\n", "{}", &[]).expect_err("not a path");
    assert!(number.contains("connector.from: expected a string (a file's path), found an integer"), "{number}");
}
