//! Sweeps, shards, determinism self-checks and shrinking.
#![cfg(madsim)]

mod common;

use handoff_models::spec::Invariant::{I2, I3};
use handoff_sim::explore::{self, Sweep};
use handoff_sim::{runner, shrink};

fn plan(start: u64, seeds: u64, jobs: usize, shard: (u64, u64)) -> Sweep {
    Sweep { start, seeds, jobs, shard, check_determinism: false, progress: false }
}

#[test]
fn a_sweep_reports_the_same_runs_whatever_the_number_of_threads_and_checks_determinism() {
    let (spec, _) = common::load("claims-restart-during-snapshot", &["sink.apply=naive-upsert"]);
    let mut checked = plan(0, 300, 2, (1, 1));
    checked.check_determinism = true;
    let (two, runs_two) = explore::sweep_collect(&spec, "x", &[], &checked);
    assert_eq!(two.nondeterministic_seed, None);
    let (one, runs_one) = explore::sweep_collect(&spec, "x", &[], &plan(0, 300, 1, (1, 1)));
    assert_eq!(runs_one, runs_two, "per-seed results, hashes included, do not depend on --jobs");
    assert_eq!(one.findings, two.findings);
    assert_eq!(one.coverage, two.coverage);
    assert!(two.findings.contains_key(&I2));
}

#[test]
fn shards_merge_into_the_whole_sweep() {
    let (spec, _) = common::load("claims-restart-during-snapshot", &["sink.apply=naive-upsert"]);
    let (whole, _) = explore::sweep_collect(&spec, "scenario.toml", &[], &plan(10, 60, 2, (1, 1)));
    let mut texts = Vec::new();
    for k in 1..=3 {
        let (summary, runs) = explore::sweep_collect(&spec, "scenario.toml", &[], &plan(10, 60, 1, (k, 3)));
        assert_eq!(summary.runs, 20);
        let mut text = String::new();
        for run in &runs {
            text.push_str(&serde_json::to_string(run).expect("json"));
            text.push('\n');
        }
        text.push_str(&serde_json::json!({ "summary": summary }).to_string());
        texts.push((format!("shard-{k}.jsonl"), text));
    }
    // The first shard given twice counts once.
    texts.push(texts[0].clone());
    let inputs = texts.iter().map(|(file, text)| (file.clone(), text.as_bytes())).collect();
    let merged = explore::merge(inputs).expect("merge");
    assert_eq!(merged.runs, 60);
    assert_eq!(merged.runs, whole.runs);
    assert_eq!(merged.findings, whole.findings);
    assert_eq!(merged.coverage, whole.coverage);
    assert_eq!(merged.shard, "1/3 + 2/3 + 3/3 + 1/3");
}

#[test]
fn merge_refuses_sweeps_of_different_scenarios() {
    let line = |scenario: &str| {
        let summary = explore::Summary::new(scenario, &[], (1, 1));
        (format!("{scenario}.jsonl"), serde_json::json!({ "summary": summary }).to_string())
    };
    let inputs = |texts: &[(String, String)]| -> Vec<(String, std::io::Cursor<String>)> {
        texts.iter().map(|(file, text)| (file.clone(), std::io::Cursor::new(text.clone()))).collect()
    };
    let error = explore::merge(inputs(&[line("a.toml"), line("b.toml")])).expect_err("different scenarios");
    assert!(error.contains("only sweeps of one scenario merge"), "{error}");
    assert!(explore::merge(inputs(&[("x".into(), "not json".into())])).expect_err("bad line").starts_with("x:1:"));
}

#[test]
fn the_correct_design_shows_no_finding_and_the_naive_one_its_failure_modes() {
    let (epoch, _) = common::load("claims-restart-during-snapshot", &["sink.apply=snapshot-epoch"]);
    let (summary, _) = explore::sweep_collect(&epoch, "x", &[], &plan(0, 200, 2, (1, 1)));
    assert!(summary.findings.is_empty(), "{:?}", summary.findings);
    let (naive, _) = common::load("claims-restart-during-snapshot", &["sink.apply=naive-upsert"]);
    // Seeds 520..540 include 525, where a replay moves a claim back (I3).
    let (summary, _) = explore::sweep_collect(&naive, "x", &[], &plan(520, 20, 2, (1, 1)));
    assert!(summary.findings.contains_key(&I2));
    assert!(summary.findings.contains_key(&I3), "a replay moves a claim back: {:?}", summary.findings);
    assert!(summary.unexpected_runs > 0, "I3 is not in the scenario's prediction");
}

#[test]
fn a_shrunk_failure_is_small_and_replays_to_the_same_finding() {
    let (naive, _) = common::load("claims-restart-during-snapshot", &["sink.apply=naive-upsert"]);
    let shrunk = shrink::shrink(&naive, 525, Some(I3), 500).expect("seed 525 shows I3");
    assert!(shrunk.after.faults <= 4, "{}", shrunk.after);
    assert!(shrunk.after.transactions < shrunk.before.transactions, "{} -> {}", shrunk.before, shrunk.after);
    assert!(shrunk.after.rows <= shrunk.before.rows);
    // Written and read back, it replays to the same finding.
    let text = handoff_sim::scenario::to_toml(&shrunk.spec, shrunk.seed).expect("writes");
    let loaded = handoff_sim::scenario::load_str("shrunk.toml", &text, &[]).expect("reads");
    let replay = runner::run(&loaded.spec, loaded.seed);
    assert!(replay.prediction_held);
    assert_eq!(shrink::signature(&replay, Some(I3)), Some(shrunk.signature));
}
