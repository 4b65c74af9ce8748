//! A table of the designer's own, with a two-column key (`orders-composite-key`: `public.orders`
//! keyed by `(region_id, order_id)`, its own database, topic prefix, slot and consumer group):
//! every output names its rows by the table and the key's columns, never as claims, and a script
//! step names a key by its columns' values. Through the binary, as a designer runs it.
#![cfg(madsim)]

use handoff_models::core::change::RowOp;
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

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

const SCENARIO: &str = "scenarios/orders-composite-key.toml";

/// No word of the claims example in an output about orders.
fn speaks_of_orders(what: &str, output: &str) {
    let lower = output.to_lowercase();
    if let Some(at) = lower.find("claim") {
        let start = output[..at].rfind('\n').map_or(0, |i| i + 1);
        let end = output[at..].find('\n').map_or(output.len(), |i| at + i);
        panic!("{what} speaks of claims: {}", &output[start..end]);
    }
}

#[test]
fn a_run_names_the_orders_and_their_key_columns() {
    let output = handoff(&["run", SCENARIO, "--verbose"]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "the prediction (I2) holds:\n{out}");
    speaks_of_orders("run --verbose", &out);
    for expected in [
        // The scripted steps, the timeline's commits, the finding, the record.
        "scripted  delete order (5, 2) while the snapshot scans",
        "delete row (5, 2) in public.orders",
        "update row (2, 7) -> v2 approved",
        "I2 no resurrection, key (region_id, order_id) = (5, 2) of public.orders (",
        "sink key rule        documents keyed per table (public.orders by (region_id, order_id))",
        "keys extra           public.orders (region_id, order_id): (5, 2), (27, 9)",
        "group \"orders-search-index\" committed shop.public.orders-0@",
        "slot \"orders_slot\" created",
    ] {
        assert!(out.contains(expected), "expected {expected:?} in:\n{out}");
    }

    let output = handoff(&["run", SCENARIO, "--json"]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    speaks_of_orders("run --json", &out);
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
    let finding = &json["findings"][0];
    assert_eq!(finding["invariant"], "I2", "{finding}");
    assert_eq!(finding["table"], "public.orders", "{finding}");
    assert_eq!(finding["key_text"], "(region_id, order_id) = (5, 2)", "{finding}");
    // The model's number for the row, `(5 − 1) × group_rows + 2`, stays the key.
    assert_eq!(finding["key"], 42, "{finding}");

    let output = handoff(&["run", SCENARIO, "--variant", "snapshot-epoch"]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "the variant holds:\n{out}");
    speaks_of_orders("run --variant snapshot-epoch", &out);
    assert!(
        out.contains("removed 2 document(s) it did not see (row (region_id, order_id) = (5, 2) of public.orders v1"),
        "{out}"
    );
}

#[test]
fn a_sweep_and_a_shrink_name_the_orders_too() {
    let output = handoff(&["sweep", SCENARIO, "--seeds", "6", "--jobs", "1"]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    speaks_of_orders("sweep", &out);

    let file = std::env::temp_dir().join(format!("handoff-your-tables-{}-shrunk.toml", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let output =
        handoff(&["shrink", SCENARIO, "--seed", "1", "--max-runs", "60", "--out", file.to_str().expect("utf-8")]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    speaks_of_orders("shrink", &out);
    let shrunk = std::fs::read_to_string(&file).expect("the shrunk scenario");
    speaks_of_orders("the shrunk scenario", &shrunk);
    // Its steps name their keys by the columns, and it replays to the same finding.
    assert!(shrunk.contains("delete = { region_id = "), "{shrunk}");
    let output = handoff(&["replay", file.to_str().expect("utf-8")]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(out.contains("I2 no resurrection, key (region_id, order_id) = ("), "{out}");
    let _ = std::fs::remove_file(&file);
}

const TABLES: &str = r#"name = "keys"
[[table]]
name = "public.orders"
rows = 100
replica_identity = "full"
primary_key = ["region_id", "order_id"]
group_rows = 10
[[table]]
name = "public.claims"
rows = 10
replica_identity = "full"
[connector]
"topic.prefix" = "shop"
"plugin.name" = "pgoutput"
"table.include.list" = "public.orders,public.claims"
[sink]
apply = "version-guard"
[prediction]
verdict = "holds"
why = "nothing goes wrong"
"#;

fn with_step(step: &str) -> Result<handoff_sim::scenario::Loaded, String> {
    let text = format!("{TABLES}[[workload.script]]\nat = \"5s\"\n{step}\n");
    handoff_sim::scenario::load_str("keys.toml", &text, &[]).map_err(|error| error.message)
}

#[test]
fn a_script_step_names_a_key_by_its_columns() {
    let loaded = with_step("table = \"public.orders\"\nupdate = { region_id = 2, order_id = 7 }").expect("it loads");
    let ops = &loaded.spec.scripted.last().expect("the step").ops;
    assert!(matches!(ops[..], [RowOp::Update { key: 17, .. }]), "(2, 7) is row 17 with 10 per region: {ops:?}");
    let loaded = with_step(
        "table = \"public.orders\"\ndelete = [{ region_id = 1, order_id = 1 }, { region_id = 10, order_id = 10 }]",
    )
    .expect("a statement of two keys loads");
    let ops = &loaded.spec.scripted.last().expect("the step").ops;
    assert!(matches!(ops[..], [RowOp::Delete { key: 1, .. }, RowOp::Delete { key: 100, .. }]), "{ops:?}");
    // The number still names the row.
    assert!(with_step("table = \"public.orders\"\nupdate = 17").is_ok());

    for (step, phrases) in [
        ("table = \"public.orders\"\nupdate = { region_id = 2 }", &["keys.toml:", "names no `order_id`"][..]),
        (
            "table = \"public.orders\"\nupdate = { region_id = 2, order_id = 11 }",
            &["order_id = 11 is above group_rows (10)"],
        ),
        ("table = \"public.orders\"\nupdate = { region_id = 2, order_id = 3, id = 1 }", &["`id` is not a key column"]),
        ("table = \"public.orders\"\nupdate = { region_id = 0, order_id = 3 }", &["region_id"]),
        ("table = \"public.claims\"\nupdate = { id = 3 }", &["the table's key is one column: a number"]),
        // A key that is no row: the same check as for a number, in the table's words.
        (
            "table = \"public.orders\"\nupdate = { region_id = 11, order_id = 1 }",
            &["key (region_id, order_id) = (11, 1) is not a row of public.orders (keys (1, 1) to (10, 10) are loaded)"],
        ),
    ] {
        match with_step(step) {
            Ok(_) => panic!("{step:?} loaded"),
            Err(message) => {
                for phrase in phrases {
                    assert!(message.contains(phrase), "expected {phrase:?} for {step:?} in:\n{message}");
                }
            }
        }
    }
}

#[test]
fn the_timeline_follows_a_key_given_by_its_columns() {
    let output = handoff(&["run", SCENARIO, "--key", "public.orders:(5, 2)"]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(out.contains("following key (region_id, order_id) = (5, 2) of public.orders (--key)"), "{out}");
    assert!(out.contains("delete row (5, 2) in public.orders"), "{out}");
    assert!(out.contains("key (5, 2)'s at shop.public.orders-"), "{out}");
    let timeline = &out[out.find("\ntimeline").expect("a timeline")..out.find("\nfindings").expect("findings")];
    assert!(!timeline.contains("row (2, 7)"), "another order's commit is left out:\n{timeline}");
    // The one table with a two-column key needs no name.
    let output = handoff(&["run", SCENARIO, "--key", "(5,2)"]);
    assert!(text(&output).contains("following key (region_id, order_id) = (5, 2) of public.orders"));

    for (key, phrase) in [
        ("(5, 11)", "no row of public.orders has (region_id, order_id) = (5, 11)"),
        ("5,2,3", "is not a key of public.orders; give its columns' values"),
        ("public.order:(5,2)", "did you mean `public.orders`?"),
    ] {
        let output = handoff(&["run", SCENARIO, "--key", key]);
        let out = text(&output);
        assert_eq!(output.status.code(), Some(2), "--key {key}: {out}");
        assert!(out.contains(phrase), "--key {key}: expected {phrase:?} in:\n{out}");
    }
}

#[test]
fn the_exhaustive_check_takes_the_orders_bound() {
    let output = handoff(&["check", SCENARIO]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    speaks_of_orders("check", &out);
    assert!(out.contains("I2 no resurrection                       COUNTEREXAMPLE  violated, as predicted"), "{out}");
    assert!(out.contains("delete row (1, 3) in public.orders"), "the counterexample's steps:\n{out}");
    let output = handoff(&["check", SCENARIO, "--variant", "snapshot-epoch"]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(out.contains("prediction held: no invariant was violated"), "{out}");
}
