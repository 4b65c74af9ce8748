//! Verdicts (issue 16): one decision for every lens (`run`, `sweep`, `check`, `merge`), allowed
//! invariants as "may be violated", predicted invariants that no run shows, runs that fail
//! closed, and the prediction a changed design is judged against (variants, `--expect`).
#![cfg(madsim)]

mod common;

use handoff_models::scenario::spec::{Invariant, PredictionOrigin, Verdict};
use handoff_sim::scenario::{self, Choice};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn handoff(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_handoff")).args(args).output().expect("the handoff binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// The text with each run of spaces made one (the tables pad their columns).
fn squeezed(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if !(c == ' ' && out.ends_with(' ')) {
            out.push(c);
        }
    }
    out
}

fn scenario(name: &str) -> String {
    common::scenario_path(name).display().to_string()
}

/// A scratch directory of this test process.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("handoff-verdicts-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// The outcome the JSON gives one invariant (`prediction.invariants` of a run, `judgement` of a
/// check, `verdict` of a sweep's summary).
fn outcome(list: &serde_json::Value, invariant: &str) -> String {
    list.as_array()
        .expect("a list of invariants")
        .iter()
        .find(|entry| entry["invariant"] == invariant)
        .map_or_else(|| "absent".to_string(), |entry| entry["outcome"].as_str().expect("an outcome").to_string())
}

/// Runs two shards of a sweep with `--json` and merges them.
fn merged(dir: &Path, args: &[&str]) -> Output {
    let mut files = Vec::new();
    for shard in ["1/2", "2/2"] {
        let output = handoff(&[args, &["--shard", shard, "--jobs", "1", "--json"]].concat());
        let file = dir.join(format!("shard-{}.jsonl", &shard[..1]));
        std::fs::write(&file, &output.stdout).expect("write a shard");
        files.push(file.display().to_string());
    }
    handoff(&["merge", &files[0], &files[1]])
}

// ---------------------------------------------------------------------------------------------
// Items 1 and 18: `allow` means "may be violated", in every lens, said plainly.

/// `scenarios/regressions/i6-with-allowed-invariants.toml` predicts I6 and allows I1, I2, I4 and
/// I11: its run violates I11 (allowed) besides I6, its bound I2 (allowed) besides I6, and neither
/// violates I1 or I4. Before issue 16, `check` failed it ("holds — the prediction says it is
/// violated" for I1 and I4, exit 1).
#[test]
fn allowed_invariants_may_or_may_not_be_violated_in_every_lens() {
    let path = common::scenario_path("regressions/i6-with-allowed-invariants").display().to_string();
    // run
    let output = handoff(&["run", &path]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(text.contains("\nprediction held: I6 fail closed was violated, as predicted\n"), "{text}");
    assert!(
        text.contains(
            "\nallowed to be violated: I1 no gap (not violated), I2 no resurrection (not violated), I4 one history \
             (not violated), I11 honest liveness (violated)\n"
        ),
        "{text}"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&handoff(&["run", &path, "--json"]).stdout).expect("one JSON object");
    let invariants = &report["prediction"]["invariants"];
    assert_eq!(outcome(invariants, "I6"), "violated-as-predicted");
    assert_eq!(outcome(invariants, "I11"), "allowed-and-violated");
    assert_eq!(outcome(invariants, "I1"), "allowed-not-violated");
    assert_eq!(outcome(invariants, "I3"), "absent");
    assert_eq!(report["prediction"]["held"], true);
    // check: only some of the allowed invariants have a counterexample.
    let output = handoff(&["check", &path, "--threads", "2"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(squeezed(&text).contains("I1 no gap holds allowed, not violated\n"), "{text}");
    assert!(squeezed(&text).contains("I2 no resurrection COUNTEREXAMPLE allowed, and violated\n"), "{text}");
    assert!(squeezed(&text).contains("I6 fail closed COUNTEREXAMPLE violated, as predicted\n"));
    assert!(squeezed(&text).contains("I11 honest liveness not checked by this lens"), "{text}");
    assert!(text.contains("\nprediction held: I6 fail closed was violated, as predicted\n"), "{text}");
    let report: serde_json::Value =
        serde_json::from_slice(&handoff(&["check", &path, "--threads", "2", "--json"]).stdout).expect("JSON");
    assert_eq!(report["verdict"], "as-predicted");
    assert_eq!(outcome(&report["judgement"]["invariants"], "I2"), "allowed-and-violated");
    assert_eq!(outcome(&report["judgement"]["invariants"], "I4"), "allowed-not-violated");
    assert_eq!(report["not_checked"], serde_json::json!(["I11"]));
    // sweep, and merge of its shards
    let output = handoff(&["sweep", &path, "--seeds", "4", "--jobs", "2"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(squeezed(&text).contains("I11 honest liveness 4 runs first seed 0 allowed, and violated"), "{text}");
    assert!(squeezed(&text).contains("I1 no gap 0 runs allowed, not violated"), "{text}");
    assert!(text.contains("\nprediction held: I6 fail closed was violated, as predicted\n"), "{text}");
    let dir = scratch("allowed");
    let output = merged(&dir, &["sweep", &path, "--seeds", "4"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(squeezed(&text).contains("I11 honest liveness 4 runs first seed 0 allowed, and violated"), "{text}");
    assert!(text.contains("\nprediction held: I6 fail closed was violated, as predicted\n"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// Item 2: a predicted invariant that no run of a sweep violates.

#[test]
fn a_sweep_in_which_no_run_shows_a_predicted_invariant_says_so_and_exits_1() {
    let path = scenario("claims-restart-during-snapshot");
    // The scenario's prediction, edited: I1 must be violated (no run does), I2 may be.
    let edit = ["--set", "prediction.findings=[\"I1\"]", "--set", "prediction.allow=[\"I2\"]"];
    let run = handoff(&[&["run", path.as_str()][..], &edit].concat());
    assert_eq!(run.status.code(), Some(1), "run says it too");
    let output = handoff(&[&["sweep", path.as_str(), "--seeds", "6", "--jobs", "2"][..], &edit].concat());
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(squeezed(&text).contains(" I1 no gap 0 runs PREDICTED BUT NEVER SEEN\n"), "{text}");
    assert!(text.contains("\nprediction NOT held: predicted I1 no gap to be violated, but no run violated it\n"));
    assert!(text.contains("no run(s) with a finding the prediction does not cover"), "{text}");
    let json = handoff(&[&["sweep", path.as_str(), "--seeds", "6", "--jobs", "2", "--json"][..], &edit].concat());
    let last = stdout(&json).lines().last().expect("a summary line").to_string();
    let summary: serde_json::Value = serde_json::from_str(&last).expect("JSON");
    assert_eq!(summary["summary"]["verdict"]["held"], false);
    assert_eq!(outcome(&summary["summary"]["verdict"]["invariants"], "I1"), "predicted-but-never-seen");
    assert_eq!(outcome(&summary["summary"]["verdict"]["invariants"], "I2"), "allowed-and-violated");
    let dir = scratch("never-seen");
    let output = merged(&dir, &[&["sweep", path.as_str(), "--seeds", "6"][..], &edit].concat());
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(squeezed(&text).contains(" I1 no gap 0 runs PREDICTED BUT NEVER SEEN\n"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------------
// Item 16: a pipeline that fails closed short of its boundary.

#[test]
fn a_run_that_fails_closed_says_so_and_does_not_hold_a_holds_prediction() {
    let path = scenario("claims-failover");
    // Judged against "holds": the connector failed closed (correctly), but the pipeline never
    // caught up. Before issue 16 this printed `findings (0)` and exited 0.
    let output = handoff(&["run", &path, "--set", "failover.gate=off", "--expect", "holds"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "\nprediction NOT held: the pipeline failed closed at t=85.027s (the connector task FAILED: The connector \
             is trying to read change stream starting at the stored offset"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "and the sink is 36 key(s) missing / 38 differing / 1 extra where the run ended, short of its acceptance \
             boundary; no invariant was violated; the prediction says the pipeline catches up\n"
        ),
        "{text}"
    );
    assert!(text.contains("  the pipeline FAILED CLOSED at t=85.027s: the connector task FAILED"), "{text}");
    // The variant that predicts it.
    let output = handoff(&["run", &path, "--set", "failover.gate=off", "--json"]);
    assert_eq!(output.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["failed_closed"]["status"], "FAILED");
    assert_eq!(report["failed_closed"]["at_ms"], 85_027);
    assert_eq!(report["prediction"]["failing_closed"], "violated-as-predicted");
    assert_eq!(report["prediction"]["expected"]["verdict"], "fails-closed");
    assert_eq!(report["prediction"]["expected"]["origin"]["from"], "variant");
    // A pipeline that catches up does not fail closed as predicted.
    let output = handoff(&["run", &path, "--expect", "fails-closed"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "\nprediction NOT held: predicted the pipeline to fail closed, but it caught up with the source\n"
        ),
        "{text}"
    );
}

#[test]
fn a_sweep_counts_the_runs_that_fail_closed_and_judges_them() {
    let path = scenario("claims-failover");
    let output = handoff(&["sweep", &path, "--variant", "no-gate", "--seeds", "3", "--jobs", "2"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(squeezed(&text).contains(" FAILED CLOSED 3 runs first seed 0 failed closed, as predicted"));
    assert!(text.contains("--seed 0 --variant no-gate"), "the replay names the variant: {text}");
    let output = handoff(&["sweep", &path, "--variant", "no-gate", "--expect", "holds", "--seeds", "3", "--jobs", "2"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    assert!(text.contains("UNEXPECTED: the prediction says the pipeline catches up"), "{text}");
    assert!(text.contains("3 run(s) with a finding the prediction does not cover"), "{text}");
    assert!(
        text.contains(
            "\nprediction NOT held: 3 run(s) failed closed (first seed 0); no invariant was violated; the prediction \
             says the pipeline catches up\n"
        ),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// Item 14: which prediction a changed design is judged against.

fn load(name: &str, choice: Choice) -> Result<handoff_models::scenario::spec::Prediction, String> {
    scenario::load_with(&common::scenario_path(name), &choice)
        .map(|loaded| loaded.spec.prediction)
        .map_err(|e| e.message)
}

fn sets(sets: &[&str]) -> Choice {
    Choice::sets(&sets.iter().map(|set| set.to_string()).collect::<Vec<_>>())
}

#[test]
fn a_set_that_changes_the_design_takes_the_matching_variant_or_says_there_is_no_prediction() {
    let name = "claims-restart-during-snapshot";
    // The file's design, or changed only where its prediction still applies.
    for choice in [sets(&[]), sets(&["fault_profile.max_faults=1", "acceptance.horizon_ms=600000", "check.crashes=1"])]
    {
        let prediction = load(name, choice).expect("loads");
        assert_eq!((prediction.verdict, prediction.origin), (Verdict::Violated, PredictionOrigin::File));
    }
    // Exactly a variant's settings, given by --set (either spelling of the value) or by name.
    for choice in [sets(&["sink.apply=snapshot-epoch"]), sets(&["sink.apply=\"snapshot-epoch\""])] {
        let prediction = load(name, choice).expect("loads");
        assert_eq!(prediction.verdict, Verdict::Holds);
        assert_eq!(prediction.origin, PredictionOrigin::Variant { name: "snapshot-epoch".into(), chosen: false });
    }
    let chosen = Choice { variant: Some("naive-upsert".into()), ..Choice::default() };
    let prediction = load(name, chosen).expect("loads");
    assert_eq!((prediction.findings, prediction.allow), (vec![Invariant::I2], vec![Invariant::I3]));
    // A variant and one more change: no prediction, judged against holds, said plainly.
    let more = Choice { sets: vec!["kafka.partitions=1".into()], variant: Some("naive-upsert".into()), expect: None };
    let prediction = load(name, more).expect("loads");
    assert_eq!(prediction.verdict, Verdict::Holds);
    assert_eq!(
        prediction.origin,
        PredictionOrigin::Unpredicted {
            variant: Some("naive-upsert".into()),
            sets: vec!["--set kafka.partitions=1".into()]
        }
    );
    // --expect wins, and a --set of the prediction edits the file's.
    let expect = Choice { expect: Some("I2, I3?".into()), ..sets(&["sink.apply=snapshot-epoch"]) };
    let prediction = load(name, expect).expect("loads");
    assert_eq!(
        (prediction.verdict, prediction.findings, prediction.allow),
        (Verdict::Violated, vec![Invariant::I2], vec![Invariant::I3])
    );
    let edited = load(name, sets(&["sink.apply=snapshot-epoch", "prediction.findings=[\"I3\"]"])).expect("loads");
    assert_eq!((edited.findings, edited.origin), (vec![Invariant::I3], PredictionOrigin::File));
    // The run says so in its header and its verdict.
    let output = handoff(&["run", &scenario(name), "--set", "connector.\"snapshot.fetch.size\"=10"]);
    let text = stdout(&output);
    assert_eq!(output.status.code(), Some(1), "{text}");
    let no_prediction = "NO PREDICTION for this changed design (--set connector.\"snapshot.fetch.size\"=10): judged \
                         against holds; pass --expect or --variant";
    assert!(text.contains(&format!("\npredicted {no_prediction}\n")), "{text}");
    assert!(text.contains(&format!("\nfrom        {no_prediction}\n")), "{text}");
    assert!(text.contains("\nprediction NOT held: I2 no resurrection was violated, which the prediction neither"));
}

#[test]
fn bad_variants_and_expectations_are_refused_naming_what_is_wrong() {
    let name = "claims-restart-during-snapshot";
    let unknown = load(name, Choice { variant: Some("epoch".into()), ..Choice::default() }).expect_err("unknown");
    assert!(
        unknown.ends_with(
            "has no variant `epoch`; its variants are snapshot-epoch, naive-upsert, three-workers, exactly-once"
        ),
        "{unknown}"
    );
    for (text, problem) in [
        ("I2,I99", "unknown item `I99`"),
        ("holds,I2", "holds says no invariant is violated, but I2 must be"),
        ("I7", "I7 (marker after data) is not checked by this version"),
        ("I2,I2?", "I2 is given twice"),
        ("I3?", "no verdict and no invariant that must be violated"),
        ("", "an empty item"),
    ] {
        let error = load(name, Choice { expect: Some(text.into()), ..Choice::default() }).expect_err(text);
        assert!(error.starts_with(&format!("--expect {text}: ")) && error.contains(problem), "{error}");
    }
    // In a file: a variant of the prediction's own settings, two variants alike, an empty one.
    let base = std::fs::read_to_string(common::scenario_path(name)).expect("readable");
    for (variant, problem) in [
        ("[variants.v]\nset = { \"check.rows\" = 2 }\n", "variants.v.set: a variant changes the design"),
        ("[variants.v]\nset = { sink.apply = \"naive-upsert\" }\n", "the same settings as variant `naive-upsert`"),
        ("[variants.v]\nset = {}\n", "variants.v.set: names no setting"),
        ("[variants.v]\nset = { \"sink.apply\" = \"x\" }\n", "variants.v.prediction: required field is missing"),
    ] {
        let text = format!("{base}\n{variant}[variants.v.prediction]\nverdict = \"holds\"\nwhy = \"w\"\n");
        let text = if problem.contains("required field") { format!("{base}\n{variant}") } else { text };
        let error = scenario::load_str("s.toml", &text, &[]).expect_err(variant).message;
        assert!(error.starts_with("s.toml:") && error.contains(problem), "{variant}: {error}");
    }
}

#[test]
fn a_variant_of_the_fault_profile_only_is_the_same_design_under_other_faults() {
    // claims-failover's all-faults variant: chosen with --variant, it carries its own prediction
    // (the hazards every fault kind exposes, and failing closed, allowed); a plain --set of the
    // same profile keeps the scenario's own prediction.
    let path = common::scenario_path("claims-failover");
    let chosen = scenario::load_with(&path, &Choice { variant: Some("all-faults".into()), ..Choice::default() })
        .expect("the variant loads");
    let prediction = &chosen.spec.prediction;
    assert!(prediction.may_fail_closed);
    assert!(prediction.allow.contains(&Invariant::I4));
    assert_eq!(prediction.origin, PredictionOrigin::Variant { name: "all-faults".into(), chosen: true });
    let kinds = chosen.spec.profile.as_ref().expect("a profile").kinds.len();
    // Every kind, the failover included, but `advance-slot`, which `--all-faults` leaves out (an
    // operator discarding what a slot holds, not a fault a design must survive), `kill-consumer`
    // (this scenario has no outbox consumer), `hang-transaction` (no transactions: its workers
    // are not exactly-once) and `stop-connect-worker` (one worker, no group to leave).
    use handoff_models::scenario::spec::FaultKind;
    let every = FaultKind::ALL
        .iter()
        .filter(|kind| {
            !matches!(
                kind,
                FaultKind::AdvanceSlot
                    | FaultKind::KillConsumer
                    | FaultKind::HangTransaction
                    | FaultKind::StopConnectWorker
            )
        })
        .count();
    assert_eq!(kinds, every, "every kind, the failover included");
    let plain = scenario::load(&path, &[scenario::every_fault_kind(&chosen.spec)]).expect("loads");
    assert_eq!(plain.spec.prediction.origin, PredictionOrigin::File);
    assert!(!plain.spec.prediction.may_fail_closed);
}
