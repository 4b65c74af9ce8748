//! The drills catalogue (`handoff drills`, `handoff drill NAME`): every lesson is listed, and for
//! every lesson that runs, the scenario's own prediction given as the learner's is right (exit 0,
//! with the findings and the scenario's reasoning) and a wrong one is wrong (exit 1, saying what
//! the model did instead). Through the binary, as a learner runs it.
#![cfg(madsim)]

use handoff_models::scenario::spec::{Prediction, Verdict};
use handoff_sim::drills::{self, Group, Lesson};
use handoff_sim::scenario::{self, Choice};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

fn handoff(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_handoff"))
        .args(args)
        .current_dir(dir().join(".."))
        .stdin(Stdio::null())
        .output()
        .expect("the binary runs")
}

fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// A prediction as `--predict` takes it.
fn predict_text(prediction: &Prediction) -> String {
    let mut items: Vec<String> = match prediction.verdict {
        Verdict::Holds => vec!["holds".into()],
        Verdict::FailsClosed => vec!["fails-closed".into()],
        Verdict::Violated => prediction.findings.iter().map(|i| i.to_string()).collect(),
    };
    items.extend(prediction.allow.iter().map(|i| format!("{i}?")));
    if prediction.may_fail_closed && prediction.verdict != Verdict::FailsClosed {
        items.push("fails-closed?".into());
    }
    items.join(",")
}

/// A prediction the scenario's run does not hold: `holds` for one that violates something, an
/// invariant it does not violate otherwise.
fn wrong(prediction: &Prediction) -> String {
    match prediction.verdict {
        Verdict::Violated | Verdict::FailsClosed => "holds".into(),
        Verdict::Holds if !prediction.allow.contains(&handoff_models::scenario::spec::Invariant::I1) => "I1".into(),
        Verdict::Holds => "I12".into(),
    }
}

/// For each lesson of `group` that runs: right and wrong predictions.
fn lessons_of(group: Group) {
    let lessons = drills::lessons(&dir());
    let of_group: Vec<&Lesson> = lessons.iter().filter(|lesson| lesson.group == group).collect();
    assert!(!of_group.is_empty());
    for lesson in of_group {
        if let Some(why) = &lesson.not_modelled {
            let output = handoff(&["drill", &lesson.name, "--predict", "holds"]);
            assert_eq!(output.status.code(), Some(2), "{}", lesson.name);
            assert!(text(&output).contains(why.as_str()), "{}: {}", lesson.name, text(&output));
            continue;
        }
        let choice = Choice { sets: Vec::new(), variant: lesson.variant.clone(), expect: None };
        let loaded = scenario::load_with(&dir().join(&lesson.scenario), &choice)
            .unwrap_or_else(|error| panic!("{}: {error}", lesson.name));
        let right = predict_text(&loaded.spec.prediction);
        let output = handoff(&["drill", &lesson.name, "--predict", &right]);
        let said = text(&output);
        assert_eq!(output.status.code(), Some(0), "{} --predict {right}:\n{said}", lesson.name);
        assert!(said.contains("your prediction held"), "{}:\n{said}", lesson.name);
        assert!(said.contains(&lesson.question.split_whitespace().take(4).collect::<Vec<_>>().join(" ")));
        // The scenario's reasoning, and what to change next.
        let first_why = loaded.spec.prediction.why.lines().next().unwrap_or_default().trim();
        assert!(said.contains(first_why), "{}: the scenario's reasoning:\n{said}", lesson.name);
        assert!(said.contains("next "), "{}", lesson.name);
        for invariant in &loaded.spec.prediction.findings {
            assert!(said.contains(&format!("  {invariant} ")), "{}: the finding of {invariant}:\n{said}", lesson.name);
        }
        let wrong = wrong(&loaded.spec.prediction);
        let output = handoff(&["drill", &lesson.name, "--predict", &wrong, "--json"]);
        assert_eq!(output.status.code(), Some(1), "{} --predict {wrong}: {}", lesson.name, text(&output));
        let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON object");
        assert_eq!(json["drill"], lesson.name.as_str());
        assert_eq!(json["prediction"], wrong.as_str());
        assert_eq!(json["prediction_held"], false);
        assert_eq!(json["scenario_prediction_held"], true, "{}: the scenario's own prediction", lesson.name);
        assert_eq!(json["run"]["prediction"]["held"], false);
    }
}

#[test]
fn the_runbooks_lessons() {
    lessons_of(Group::Runbook);
}

#[test]
fn the_game_days_lessons() {
    lessons_of(Group::GameDay);
}

#[test]
fn the_zoos_lessons() {
    lessons_of(Group::Zoo);
}

#[test]
fn drills_lists_every_lesson() {
    let output = handoff(&["drills"]);
    assert_eq!(output.status.code(), Some(0));
    let listed = text(&output);
    let lessons = drills::lessons(&dir());
    for name in ["restart-test", "failover-gate", "rebuild-rule", "audit-record"] {
        assert!(lessons.iter().any(|lesson| lesson.name == name && lesson.group == Group::Runbook), "{name}");
    }
    assert_eq!(lessons.iter().filter(|lesson| lesson.group == Group::GameDay).count(), 7, "the seven drills");
    let zoo_entries = std::fs::read_dir(dir().join("zoo"))
        .expect("the zoo")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|file| file.ends_with(".toml") && !file.ends_with("-fixed.toml"))
        .count();
    assert_eq!(lessons.iter().filter(|lesson| lesson.group == Group::Zoo).count(), zoo_entries);
    for lesson in &lessons {
        assert!(listed.contains(&format!("  {} ", lesson.name)) || listed.contains(&format!("  {}\n", lesson.name)));
        assert!(!lesson.title.is_empty() && !lesson.question.is_empty(), "{}", lesson.name);
        if lesson.not_modelled.is_none() {
            assert!(dir().join(&lesson.scenario).is_file(), "{}: {}", lesson.name, lesson.scenario);
            assert!(!lesson.setup.is_empty() && !lesson.next.is_empty(), "{}", lesson.name);
        }
    }
    assert!(listed.contains("schema-change") && listed.contains("(not modelled yet)"));
}

#[test]
fn a_drill_says_what_is_wrong_with_its_input() {
    let cases: [(&[&str], &str); 4] = [
        (&["drill", "restart-tset", "--predict", "holds"], "no such lesson; did you mean restart-test?"),
        (&["drill", "restart-test", "--predict", "I22"], "--predict I22: unknown item `I22`"),
        (&["drill", "restart-test"], "give your prediction with --predict"),
        (&["drill", "schema-change", "--predict", "holds"], "not modelled yet"),
    ];
    for (args, phrase) in cases {
        let output = handoff(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(text(&output).contains(phrase), "{args:?}: {}", text(&output));
        assert!(output.stdout.is_empty(), "{args:?}: nothing shown before the error");
    }
}
