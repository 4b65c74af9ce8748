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
    let listed: Vec<&str> =
        spec.not_modelled.iter().filter(|item| item.section == "connector").map(|item| item.setting.as_str()).collect();
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
    assert!(spec.not_modelled.iter().all(|item| !item.why.is_empty()));
    // The secret's value is not kept.
    let password = spec.not_modelled.iter().find(|item| item.setting == "database.password").expect("listed");
    assert_eq!(password.value, "********");
    // The workers' properties and the server's settings come from their files too.
    assert_eq!(spec.connect.offset_flush_interval_ms, 60_000);
    assert_eq!(spec.connect.group_id, "connect-cluster");
    assert_eq!(spec.postgres.max_slot_wal_keep_size_mb, Some(10 << 10));
    assert_eq!(spec.postgres.checkpoint_timeout_ms, 300_000);
    assert_eq!(spec.postgres.wal_sender_timeout_ms, 60_000);
    let in_section = |section: &str| -> Vec<&str> {
        spec.not_modelled.iter().filter(|item| item.section == section).map(|item| item.setting.as_str()).collect()
    };
    assert_eq!(
        in_section("postgres"),
        ["listen_addresses", "shared_buffers", "wal_level", "max_wal_senders", "max_replication_slots"]
    );
    assert!(in_section("connect").contains(&"bootstrap.servers") && in_section("connect").contains(&"plugin.path"));
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
    let rest = std::fs::read_to_string(scenarios().join("pipeline/outbox-connector.json")).expect("bundled");
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
fn a_set_of_what_is_not_modelled_keeps_the_prediction() {
    use handoff_models::scenario::spec::PredictionOrigin;
    let path = scenarios().join("outbox-connector-from-json.toml");
    let sets =
        |sets: &[&str]| load(&path, &sets.iter().map(|set| (*set).to_owned()).collect::<Vec<_>>()).expect("loads");
    let same = sets(&["connector.tasks.max=2", "connect.plugin.path=/opt/other", "postgres.shared_buffers=4GB"]);
    assert_eq!(same.spec.prediction.origin, PredictionOrigin::File, "the design the model runs is the file's");
    let changed = sets(&["connector.tasks.max=2", "connector.snapshot.mode=initial"]);
    match &changed.spec.prediction.origin {
        PredictionOrigin::Unpredicted { sets, .. } => assert_eq!(sets, &["--set connector.snapshot.mode=initial"]),
        other => panic!("expected no prediction for a changed design, got {other:?}"),
    }
}

#[test]
fn a_typo_in_the_file_names_the_file_line_property_and_the_right_name() {
    let rest = std::fs::read_to_string(scenarios().join("pipeline/outbox-connector.json")).expect("bundled");
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
    json_fails("skipped", &config(", \"skipped.operations\": \"u\""), &["`u` is not modelled yet; only `t`"]);
    json_fails("exclude", &config(", \"column.exclude.list\": \"public.claims.amount\""), &["not modelled yet"]);
    // A 1.x configuration's names say what replaced them.
    json_fails("server-name", &config(", \"database.server.name\": \"claims\""), &["write topic.prefix instead"]);
    json_fails("whitelist", &config(", \"table.whitelist\": \"public.claims\""), &["write table.include.list"]);
    json_fails("mask", &config(", \"column.mask.with.12.chars\": \"public.claims.amount\""), &["not modelled yet"]);
    // Families of properties: converters' own settings, client overrides, topic-creation groups.
    let families = config(
        ", \"key.converter.schemas.enable\": false, \"producer.override.linger.ms\": 5, \"topic.creation.groups\": \
         \"compacted\", \"topic.creation.compacted.include\": \"claims.*\"",
    );
    let loaded = load_with("families", "from = \"connector.json\"\n", &families, &[]).expect("families");
    assert_eq!(loaded.spec.not_modelled.len(), 4);
    // A transform of headers runs as the identity and is listed; one that changes records is refused.
    let headers = config(
        ", \"table.include.list\": \"public.claims\", \"transforms\": \"src,ids\", \"transforms.src.type\":          \"org.apache.kafka.connect.transforms.InsertHeader\", \"transforms.src.header\": \"source\",          \"transforms.src.value.literal\": \"claims-db\", \"transforms.ids.type\":          \"org.apache.kafka.connect.transforms.HeaderFrom$Value\", \"transforms.ids.fields\": \"id\",          \"transforms.ids.headers\": \"claim-id\", \"transforms.ids.operation\": \"copy\"",
    );
    let loaded = load_with("headers", "from = \"connector.json\"\n", &headers, &[]).expect("headers");
    let listed: Vec<&str> = loaded.spec.not_modelled.iter().map(|item| item.setting.as_str()).collect();
    assert_eq!(listed.len(), 7, "{listed:?}");
    assert!(listed.contains(&"transforms.src.type") && listed.contains(&"transforms.ids.operation"));
    json_fails("move", &headers.replace("\"copy\"", "\"move\""), &["operation=move removes the field"]);
    json_fails(
        "unwrap",
        &config(
            ", \"transforms\": \"unwrap\", \"transforms.unwrap.type\": \"io.debezium.transforms.ExtractNewRecordState\"",
        ),
        &["`io.debezium.transforms.ExtractNewRecordState` is not a transform the model runs"],
    );
}

/// `SCENARIO` with `[connect] from` and `[postgres] from` next to these files (the connector as
/// given in the scenario).
fn load_files(test: &str, properties: &str, conf: &str, sets: &[&str]) -> Result<Loaded, String> {
    let dir = dir(test);
    std::fs::write(dir.join("worker.properties"), properties).expect("write");
    std::fs::write(dir.join("postgresql.conf"), conf).expect("write");
    let scenario = SCENARIO.replace(
        "from = \"connector.json\"\n",
        "\"topic.prefix\" = \"claims\"\n\"plugin.name\" = \"pgoutput\"\n[connect]\nfrom = \"worker.properties\"\n[postgres]\nfrom = \"postgresql.conf\"\n",
    );
    std::fs::write(dir.join("s.toml"), scenario).expect("write");
    let sets: Vec<String> = sets.iter().map(|set| (*set).to_owned()).collect();
    load(&dir.join("s.toml"), &sets).map_err(|error| error.message)
}

#[track_caller]
fn files_fail(test: &str, properties: &str, conf: &str, phrases: &[&str]) {
    match load_files(test, properties, conf, &[]) {
        Ok(_) => panic!("expected an error, but the scenario loaded"),
        Err(message) => {
            for phrase in phrases {
                assert!(message.contains(phrase), "expected {phrase:?} in:\n{message}");
            }
        }
    }
}

#[test]
fn a_worker_properties_file_reads_as_java_reads_it() {
    let properties = "# comment\n! also a comment\n  bootstrap.servers = kafka:9092\noffset.flush.interval.ms:15000\n\
                      offset.flush.timeout.ms 7000\ngroup.id=0042\nexactly.once.source.support=\\\n    enabled\n\
                      plugin.path=/opt/a\\u0020b\noffset.flush.interval.ms=20000\nssl.keystore.password=hunter2\n";
    let loaded = load_files("worker", properties, "", &[]).expect("loads");
    let connect = &loaded.spec.connect;
    assert_eq!(connect.offset_flush_interval_ms, 20_000, "the last of a key wins");
    assert_eq!(connect.offset_flush_timeout_ms, 7_000, "whitespace separates too");
    assert_eq!(connect.group_id, "0042", "a group id stays a name");
    assert_eq!(connect.exactly_once_source_support.name(), "enabled", "a continued line");
    let value = |setting: &str| {
        loaded.spec.not_modelled.iter().find(|item| item.setting == setting).map(|item| item.value.clone())
    };
    assert_eq!(value("plugin.path").as_deref(), Some("/opt/a b"), "\\u escapes");
    assert_eq!(value("bootstrap.servers").as_deref(), Some("kafka:9092"));
    assert_eq!(value("ssl.keystore.password").as_deref(), Some("********"));
    // The scenario's own keys win, and --set with dotted names.
    let set = load_files("worker-set", properties, "", &["connect.offset.flush.interval.ms=1000"]).expect("set");
    assert_eq!(set.spec.connect.offset_flush_interval_ms, 1_000);
    // Typos, values, refusals and the scenario's own keys, each at their line.
    files_fail(
        "worker-typo",
        "bootstrap.servers=k:9092\noffset.flush.intervl.ms=1000\n",
        "",
        &[
            "worker.properties:2:1: connect.\"offset.flush.intervl.ms\": unknown Connect worker property; did you mean \"offset.flush.interval.ms\"?",
        ],
    );
    files_fail(
        "worker-value",
        "offset.flush.interval.ms=soon\n",
        "",
        &["worker.properties:1:1:", "expected an integer"],
    );
    files_fail(
        "worker-eager",
        "connect.protocol=eager\n",
        "",
        &["`eager` is not modelled yet; only `sessioned` or `compatible`"],
    );
    files_fail("worker-static", "group.instance.id=w1\n", "", &["static group membership is not modelled"]);
    files_fail("worker-own", "workers=3\n", "", &["`workers` is the scenario's, not a Connect worker property"]);
    files_fail("worker-escape", "plugin.path=\\u12\n", "", &["malformed \\uXXXX escape"]);
}

#[test]
fn a_postgresql_conf_fragment_reads_as_postgres_reads_it() {
    let conf = "# replication\nWAL_LEVEL = logical\nmax_slot_wal_keep_size 2048   # bare: megabytes\n\
                checkpoint_timeout=600 # seconds\nwal_sender_timeout = '30s'\nlisten_addresses = '*'\n\
                search_path = '\"$user\", public'\nauto_explain.log_min_duration = 250\nmax_wal_size = 2GB\n\
                max_wal_size = 4GB\nidle_in_transaction_session_timeout = 60000\n";
    let loaded = load_files("conf", "", conf, &[]).expect("loads");
    let postgres = &loaded.spec.postgres;
    assert_eq!(postgres.max_slot_wal_keep_size_mb, Some(2048), "a bare number in the base unit, MB");
    assert_eq!(postgres.checkpoint_timeout_ms, 600_000, "a bare number in seconds");
    assert_eq!(postgres.wal_sender_timeout_ms, 30_000);
    assert_eq!(postgres.max_wal_size_mb, 4096, "the last of a setting wins");
    assert_eq!(postgres.idle_in_transaction_session_timeout_ms, 60_000, "a bare number in milliseconds");
    let listed: Vec<(&str, &str)> =
        loaded.spec.not_modelled.iter().map(|item| (item.setting.as_str(), item.value.as_str())).collect();
    assert_eq!(
        listed,
        [
            ("wal_level", "logical"),
            ("listen_addresses", "*"),
            ("search_path", "\"$user\", public"),
            ("auto_explain.log_min_duration", "250")
        ]
    );
    files_fail(
        "conf-typo",
        "",
        "wal_level = logical\nmax_slot_wal_keep_sise = 64MB\n",
        &[
            "postgresql.conf:2:1: postgres.max_slot_wal_keep_sise: unknown PostgreSQL setting; did you mean \"max_slot_wal_keep_size\"?",
        ],
    );
    files_fail(
        "conf-level",
        "",
        "wal_level = replica\n",
        &["postgresql.conf:1:1:", "`replica` is not modelled yet; only `logical`"],
    );
    files_fail(
        "conf-sync",
        "",
        "synchronous_standby_names = 'standby1'\n",
        &["synchronous replication is not modelled yet"],
    );
    files_fail("conf-internal", "", "block_size = 16384\n", &["a read-only setting"]);
    files_fail("conf-segment", "", "wal_segment_size = 64MB\n", &["fixed at initdb (--wal-segsize)"]);
    files_fail("conf-include", "", "include 'replication.conf'\n", &["`include` is not followed here"]);
    files_fail("conf-quote", "", "listen_addresses = '*\n", &["unterminated quoted string"]);
    files_fail("conf-syntax", "", "shared_buffers = 2 GB\n", &["syntax error: `GB` after the value of shared_buffers"]);
    files_fail("conf-newer", "", "summarize_wal = on\n", &["PostgreSQL 17 added it; this server is older"]);
    let newer = load_files("conf-17", "", "summarize_wal = on\n", &["postgres.version=17"]).expect("17 has it");
    assert_eq!(newer.spec.not_modelled[0].setting, "summarize_wal");
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

mod never_panics {
    use super::*;
    use proptest::prelude::*;

    /// Text a file might hold: JSON, properties and postgresql.conf punctuation, unicode
    /// whitespace, quotes, escapes and line breaks.
    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just("{".to_owned()),
                Just("}".to_owned()),
                Just("\"config\"".to_owned()),
                Just("\"name\": \"x\"".to_owned()),
                Just("\"snapshot.mode\"".to_owned()),
                Just(":".to_owned()),
                Just("=".to_owned()),
                Just(",".to_owned()),
                Just("'".to_owned()),
                Just("\\".to_owned()),
                Just("\\u00".to_owned()),
                Just("#".to_owned()),
                Just("!".to_owned()),
                Just("\n".to_owned()),
                Just("\r\n".to_owned()),
                Just("\u{a0}".to_owned()),
                Just(" ".to_owned()),
                Just("max_wal_size".to_owned()),
                Just("offset.flush.interval.ms".to_owned()),
                Just("64MB".to_owned()),
                Just("é".to_owned()),
                "[a-z._]{1,8}",
                "[0-9]{1,6}",
            ],
            0..40,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

        #[test]
        fn any_file_loads_or_says_what_is_wrong(json in text(), properties in text(), conf in text()) {
            // Loads or fails with a message naming a file; never panics.
            let _ = load_with("fuzz-json", "from = \"connector.json\"\n", &json, &[]);
            if let Err(message) = load_files("fuzz-files", &properties, &conf, &[]) {
                prop_assert!(message.contains(".properties:") || message.contains(".conf:") || message.contains(".toml:"), "{}", message);
            }
        }
    }
}

/// A pass-through transform is the identity: the run is the same event for event.
#[cfg(madsim)]
#[test]
fn a_header_transform_leaves_the_run_as_it_was() {
    let path = scenarios().join("claims-restart-during-snapshot.toml");
    let plain = load(&path, &[]).expect("loads");
    let sets: Vec<String> = [
        "connector.transforms=src",
        "connector.transforms.src.type=org.apache.kafka.connect.transforms.InsertHeader",
        "connector.transforms.src.header=source",
        "connector.transforms.src.value.literal=claims-db",
    ]
    .map(str::to_owned)
    .to_vec();
    let with_header = load(&path, &sets).expect("loads");
    assert_eq!(with_header.spec.not_modelled.iter().filter(|item| item.setting.starts_with("transforms.")).count(), 3);
    let a = handoff_sim::timed::runner::run(&plain.spec, plain.seed);
    let b = handoff_sim::timed::runner::run(&with_header.spec, plain.seed);
    assert_eq!(a.trace_hash, b.trace_hash);
    assert!(a.prediction_held && b.violated() == a.violated());
}
