//! Sweeps, shards, determinism self-checks and shrinking.
#![cfg(madsim)]

mod common;

use handoff_models::judge::verdict::Outcome;
use handoff_models::scenario::spec::Invariant::{I2, I3};
use handoff_sim::sweep::shrink;
use handoff_sim::sweep::{self, Sweep};
use handoff_sim::timed::runner;
use std::ops::ControlFlow;

fn plan(start: u64, seeds: u64, jobs: usize, shard: (u64, u64)) -> Sweep {
    Sweep { start, seeds, jobs, shard, check_determinism: false, progress: false }
}

#[test]
fn a_sweep_reports_the_same_runs_whatever_the_number_of_threads_and_checks_determinism() {
    let (spec, _) = common::load("claims-restart-during-snapshot", &["sink.apply=naive-upsert"]);
    let mut checked = plan(0, 300, 2, (1, 1));
    checked.check_determinism = true;
    let (two, runs_two) = sweep::sweep_collect(&spec, "x", &[], &checked);
    assert_eq!(two.nondeterministic_seed, None);
    let (one, runs_one) = sweep::sweep_collect(&spec, "x", &[], &plan(0, 300, 1, (1, 1)));
    assert_eq!(runs_one, runs_two, "per-seed results, hashes included, do not depend on --jobs");
    assert_eq!(one.findings, two.findings);
    assert_eq!(one.coverage, two.coverage);
    assert!(two.findings.contains_key(&I2));
}

/// A shard's `--json` output, as `handoff sweep` writes it.
fn shard_text(runs: &[sweep::SeedRun], summary: &sweep::Summary) -> String {
    let mut text = String::new();
    for run in runs {
        text.push_str(&sweep::SeedOutcome::Ran(run.clone()).json_line());
        text.push('\n');
    }
    text.push_str(
        &serde_json::json!({ "schema_version": handoff_sim::JSON_SCHEMA_VERSION, "summary": summary }).to_string(),
    );
    text.push('\n');
    text
}

fn merged(texts: &[(String, String)]) -> Result<sweep::Summary, String> {
    sweep::merge(texts.iter().map(|(file, text)| (file.clone(), text.as_bytes())).collect())
}

#[test]
fn shards_merge_into_the_whole_sweep() {
    let (spec, _) = common::load("claims-restart-during-snapshot", &["sink.apply=naive-upsert"]);
    let (whole, _) = sweep::sweep_collect(&spec, "scenario.toml", &[], &plan(10, 60, 2, (1, 1)));
    let mut texts = Vec::new();
    for k in 1..=3 {
        let (summary, runs) = sweep::sweep_collect(&spec, "scenario.toml", &[], &plan(10, 60, 1, (k, 3)));
        assert_eq!(summary.runs, 20);
        texts.push((format!("shard-{k}.jsonl"), shard_text(&runs, &summary)));
    }
    let merged_whole = merged(&texts).expect("merge");
    assert_eq!(merged_whole.runs, 60);
    assert_eq!(merged_whole.runs, whole.runs);
    assert_eq!(merged_whole.findings, whole.findings);
    assert_eq!(merged_whole.coverage, whole.coverage);
    assert_eq!((merged_whole.start, merged_whole.seeds), (10, 60));
    assert_eq!(merged_whole.shard, "1/3 + 2/3 + 3/3");
    // A missing shard is named; a shard given twice would count its seeds twice.
    assert_eq!(merged(&texts[..2]).expect("merge").shard, "1/3 + 2/3 (missing: 3/3)");
    let twice = [texts[0].clone(), texts[1].clone(), texts[0].clone()];
    let error = merged(&twice).expect_err("shard 1/3 twice");
    assert!(error.contains("shard-1.jsonl: shard 1/3 is also shard-1.jsonl: give each shard once"), "{error}");
}

#[test]
fn merge_refuses_inputs_that_are_not_whole_shards_of_one_sweep() {
    let (spec, _) = common::load("claims-restart-during-snapshot", &[]);
    let sweep = |scenario: &str, start: u64, seeds: u64, shard: (u64, u64)| {
        let (summary, runs) = sweep::sweep_collect(&spec, scenario, &[], &plan(start, seeds, 1, shard));
        (runs, summary)
    };
    let (runs, summary) = sweep("a.toml", 0, 6, (1, 2));
    let one = ("one.jsonl".to_string(), shard_text(&runs, &summary));
    let (runs_two, summary_two) = sweep("a.toml", 0, 6, (2, 2));
    let two = ("two.jsonl".to_string(), shard_text(&runs_two, &summary_two));
    assert_eq!(merged(&[one.clone(), two.clone()]).expect("merge").runs, 6);
    let error_of = |texts: &[(String, String)]| merged(texts).expect_err("refused");
    // Another scenario, another range, another number of shards.
    let (runs, summary) = sweep("b.toml", 0, 6, (2, 2));
    let error = error_of(&[one.clone(), ("b.jsonl".into(), shard_text(&runs, &summary))]);
    assert!(
        error.starts_with("b.jsonl:4: a sweep of b.toml with no --set, but one.jsonl is a sweep of a.toml"),
        "{error}"
    );
    let (runs, summary) = sweep("a.toml", 1, 6, (2, 2));
    let error = error_of(&[one.clone(), ("later.jsonl".into(), shard_text(&runs, &summary))]);
    assert!(
        error.contains("later.jsonl:4: shard 2/2 of --start 1 --seeds 6, but one.jsonl is shard 1/2 of --start 0"),
        "{error}"
    );
    let (runs, summary) = sweep("a.toml", 0, 6, (2, 3));
    let error = error_of(&[one.clone(), ("thirds.jsonl".into(), shard_text(&runs, &summary))]);
    assert!(error.contains("thirds.jsonl:3: shard 2/3 of --start 0 --seeds 6, but one.jsonl is shard 1/2"), "{error}");
    // A file without its summary (cut short), with a line after it, with lines left out or moved.
    let lines: Vec<&str> = one.1.lines().collect();
    // A line of another version of the JSON (docs/json.md), or of none.
    let old = lines[0].replace("\"schema_version\":1,", "");
    let error = error_of(&[("old.jsonl".into(), format!("{old}\n{}\n", lines[1..].join("\n")))]);
    assert!(error.starts_with("old.jsonl:1: no schema_version; this merge reads version 1"), "{error}");
    let error = error_of(&[("cut.jsonl".into(), lines[..3].join("\n"))]);
    assert!(error.starts_with("cut.jsonl: no summary line at the end"), "{error}");
    let error = error_of(&[("after.jsonl".into(), format!("{}{}\n", one.1, lines[0]))]);
    assert!(error.starts_with("after.jsonl:5: a line after the summary line (line 4)"), "{error}");
    let error = error_of(&[("short.jsonl".into(), [lines[0], lines[1], lines[3]].join("\n"))]);
    assert!(
        error.starts_with("short.jsonl: 2 seed line(s), but shard 1/2 of --start 0 --seeds 6 has 3 seeds"),
        "{error}"
    );
    let error = error_of(&[("gap.jsonl".into(), [lines[0], lines[2], lines[3]].join("\n"))]);
    assert!(error.starts_with("gap.jsonl: the lines' seeds (0, then every 4) are not those of shard 1/2"), "{error}");
    let error = error_of(&[("order.jsonl".into(), [lines[1], lines[0], lines[2], lines[3]].join("\n"))]);
    assert!(error.starts_with("order.jsonl:2: seed 0 after seed 2"), "{error}");
    let foreign = sweep::SeedOutcome::Ran(runs_two[2].clone()).json_line();
    let error = error_of(&[("mixed.jsonl".into(), [lines[0], lines[1], &foreign, lines[3]].join("\n"))]);
    assert!(error.starts_with("mixed.jsonl:3: seed 5 after seed 2: the seeds of a shard are evenly spaced"), "{error}");
    // A merged summary is not a shard.
    let merged_line = serde_json::json!({
        "schema_version": handoff_sim::JSON_SCHEMA_VERSION,
        "summary": merged(&[one.clone(), two.clone()]).expect("merge"),
    })
    .to_string();
    let error = error_of(&[("merged.jsonl".into(), merged_line)]);
    assert!(error.contains("merged.jsonl:1: shard \"1/2 + 2/2\" is not K/N"), "{error}");
    assert!(merged(&[("x".into(), "not json".into())]).expect_err("bad line").starts_with("x:1:"));
}

#[test]
fn a_sweep_plan_is_streamed_and_checked() {
    let whole = plan(0, u64::MAX, 2, (1, 1));
    assert_eq!(whole.check(), Ok(()));
    assert_eq!(whole.count(), u64::MAX);
    assert_eq!(whole.seed(u64::MAX - 1), u64::MAX - 1);
    assert_eq!(whole.seeds().take(3).collect::<Vec<_>>(), [0, 1, 2]);
    let shard = plan(100, 25, 1, (3, 10));
    assert_eq!(shard.seeds().collect::<Vec<_>>(), [102, 112, 122]);
    assert_eq!(plan(u64::MAX, 1, 1, (1, 1)).seeds().collect::<Vec<_>>(), [u64::MAX]);
    assert_eq!(plan(u64::MAX - 9, 10, 1, (10, 10)).seeds().collect::<Vec<_>>(), [u64::MAX]);
    for (refused, phrase) in [
        (plan(0, 0, 1, (1, 1)), "--seeds 0"),
        (plan(0, 3, 1, (5, 10)), "--shard 5/10 --seeds 3: shard 5 has no seed"),
        (plan(u64::MAX, 1000, 1, (1, 1)), "from this start, --seeds can be at most 1"),
        (plan(u64::MAX - 9, 11, 1, (1, 1)), "from this start, --seeds can be at most 10"),
        (plan(0, 10, 0, (1, 1)), "--jobs 0"),
    ] {
        let error = refused.check().expect_err("refused");
        assert!(error.contains(phrase), "{error}");
    }
}

#[test]
fn a_sweep_in_worker_processes_reports_what_a_sweep_in_this_process_does() {
    let sets = vec!["sink.apply=naive-upsert".to_string()];
    let path = common::scenario_path("claims-restart-during-snapshot");
    let spec = handoff_sim::scenario::load(&path, &sets).expect("loads").spec;
    let name = path.display().to_string();
    let workers = handoff_sim::sweep::workers::Workers {
        program: env!("CARGO_BIN_EXE_handoff").into(),
        scenario: path.clone(),
        run_timeout: std::time::Duration::from_secs(600),
    };
    let mut checked = plan(515, 40, 2, (1, 1));
    checked.check_determinism = true;
    let mut outcomes = Vec::new();
    let isolated = sweep::sweep_in_workers(&spec, &name, &sets, &checked, &workers, |outcome| {
        outcomes.push(outcome.clone());
        ControlFlow::Continue(())
    })
    .expect("the workers start");
    let (in_process, runs) = sweep::sweep_collect(&spec, &name, &sets, &plan(515, 40, 1, (1, 1)));
    let isolated_runs: Vec<sweep::SeedRun> = outcomes
        .into_iter()
        .filter_map(|outcome| match outcome {
            sweep::SeedOutcome::Ran(run) => Some(run),
            sweep::SeedOutcome::Crashed(_) => None,
        })
        .collect();
    assert_eq!(isolated_runs, runs, "the same runs, hashes included, in the same order, and no crash");
    let timeless = |summary: &sweep::Summary| {
        let mut summary = summary.clone();
        (summary.seconds, summary.runs_per_second) = (0.0, 0.0);
        summary
    };
    assert_eq!(timeless(&isolated), timeless(&in_process));
    assert!(isolated.findings.contains_key(&I3), "seed 525 is among them");
    // Breaking off (a closed output): the sweep stops taking seeds.
    let mut seen = 0;
    let everything = plan(0, u64::MAX, 2, (1, 1));
    let stopped = sweep::sweep_in_workers(&spec, &name, &sets, &everything, &workers, |_| {
        seen += 1;
        if seen == 3 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    })
    .expect("the workers start");
    assert_eq!(seen, 3);
    assert!(stopped.runs >= 3 && stopped.runs < 100, "{}", stopped.runs);
    // A worker that cannot start stops the sweep with an error, before any seed.
    let missing = handoff_sim::sweep::workers::Workers { program: "/nonexistent/handoff".into(), ..workers };
    let mut ran = 0;
    let error = sweep::sweep_in_workers(&spec, &name, &sets, &plan(0, 4, 2, (1, 1)), &missing, |_| {
        ran += 1;
        ControlFlow::Continue(())
    })
    .expect_err("no worker");
    assert_eq!(ran, 0);
    assert!(error.contains("cannot start a worker process (/nonexistent/handoff)"), "{error}");
}

#[test]
fn the_correct_design_shows_no_finding_and_the_naive_one_its_failure_modes() {
    let (epoch, _) = common::load("claims-restart-during-snapshot", &["sink.apply=snapshot-epoch"]);
    let (summary, _) = sweep::sweep_collect(&epoch, "x", &[], &plan(0, 200, 2, (1, 1)));
    assert!(summary.findings.is_empty(), "{:?}", summary.findings);
    // Judged against its variant's "holds": no run failed closed either.
    assert_eq!(summary.failed_closed, None);
    assert!(summary.as_expected());
    let (naive, _) = common::load("claims-restart-during-snapshot", &["sink.apply=naive-upsert"]);
    // Seeds 520..540 include 525, where a replay moves a claim back (I3).
    let (summary, _) = sweep::sweep_collect(&naive, "x", &[], &plan(520, 20, 2, (1, 1)));
    assert!(summary.findings.contains_key(&I2));
    assert!(summary.findings.contains_key(&I3), "a replay moves a claim back: {:?}", summary.findings);
    // The naive sink's variant allows I3 (seed-dependent): allowed, and violated.
    assert_eq!(summary.unexpected_runs, 0);
    assert_eq!(summary.judgement().of(I3), Some(Outcome::AllowedAndViolated));
    assert!(summary.as_expected());
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
