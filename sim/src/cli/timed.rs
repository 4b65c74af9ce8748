//! The commands that run the timed lens (`run`, `replay`, `sweep`, its worker, `shrink`, `merge`):
//! what each does once its arguments are read.

use crate::{Plan, bad_input};
use handoff_models::scenario::spec::Spec;
use handoff_sim::sweep::workers::{self, Workers};
use handoff_sim::sweep::{self, Summary, Sweep};
use handoff_sim::timed::{report, runner};
use std::io::IsTerminal;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub fn run(spec: &Spec, name: &str, seed: u64, json: bool, timeline: &crate::TimelineFlags) -> ExitCode {
    let view =
        match report::TimelineView::parse(spec, timeline.only.as_deref(), timeline.key.as_deref(), timeline.verbose) {
            Ok(view) => view,
            Err(error) => return bad_input(&error),
        };
    if let Some(path) = &timeline.html
        && let Err(error) = handoff_sim::timed::html::check_writable(path)
    {
        return bad_input(&error);
    }
    let result = runner::run(spec, seed);
    if let Some(path) = &timeline.html
        && let Err(error) = std::fs::write(path, handoff_sim::timed::html::page(spec, name, &result, view.key))
    {
        return bad_input(&format!("--html {}: cannot write the report: {error}", path.display()));
    }
    if json {
        out!(format!("{}\n", report::json(spec, name, &result)));
    } else {
        out!(report::text(spec, name, &result, &view));
    }
    if result.prediction_held && result.departures.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

pub fn sweep(spec: &Spec, path: &Path, sets: &[String], plan: Plan) -> ExitCode {
    let name = path.display().to_string();
    let sweep = Sweep {
        start: plan.start,
        seeds: plan.seeds,
        jobs: plan.jobs,
        shard: plan.shard,
        check_determinism: plan.check_determinism,
        progress: !plan.json && std::io::stderr().is_terminal(),
    };
    if let Err(error) = sweep.check() {
        return bad_input(&error);
    }
    let program = match worker_program() {
        Ok(program) => program,
        Err(error) => return bad_input(&error),
    };
    let workers = Workers { program, scenario: path.to_path_buf(), run_timeout: plan.run_timeout };
    let json = plan.json;
    let mut closed = None;
    let swept = sweep::sweep_in_workers(spec, &name, sets, &sweep, &workers, |outcome| {
        if json && let Err(code) = crate::print_out(&format!("{}\n", outcome.json_line())) {
            closed = Some(code);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    if let Some(code) = closed {
        return code;
    }
    let summary = match swept {
        Ok(summary) => summary,
        Err(error) => return bad_input(&error),
    };
    if json {
        out!(format!("{}\n", serde_json::json!({ "schema_version": report::JSON_SCHEMA_VERSION, "summary": summary })));
    } else {
        out!(summary.render(spec));
    }
    if let Some(dir) = &plan.save {
        let saved = workers::save_first_failures(&workers, spec, &name, sets, &summary, dir, |path| {
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "saved {}", path.display());
        });
        if let Err(error) = saved {
            return bad_input(&error);
        }
    }
    exit_code(&summary)
}

/// The binary a worker process runs: this one, by its path (`std::env::current_exe`). Not
/// `/proc/self/exe` itself: under valgrind (`cargo xtask valgrind-sweep`) that names
/// valgrind's own tool, while the path is the client's. A binary rebuilt during the sweep
/// cannot mix in: Linux refuses to overwrite a running executable, and a replaced one leaves
/// this path ending in " (deleted)", which is refused here.
fn worker_program() -> Result<PathBuf, String> {
    let this = std::env::current_exe()
        .map_err(|error| format!("cannot find the handoff binary to start worker processes with: {error}"))?;
    if !this.is_file() {
        return Err(format!(
            "{}: the handoff binary was replaced or removed since this command started; run it again",
            this.display()
        ));
    }
    Ok(this)
}

pub fn sweep_worker(spec: &Spec, name: &str, save: Option<&Path>) -> ExitCode {
    match workers::serve(spec, name, save, std::io::stdin().lock(), std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => bad_input(&error),
    }
}

/// 1 when a run had a finding the prediction does not cover, a seed crashed, or determinism broke.
fn exit_code(summary: &Summary) -> ExitCode {
    if summary.as_expected() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

pub fn shrink(
    spec: &Spec,
    seed: u64,
    invariant: Option<handoff_models::scenario::spec::Invariant>,
    out: Option<PathBuf>,
    max_runs: usize,
) -> ExitCode {
    let shrunk = match handoff_sim::sweep::shrink::shrink(spec, seed, invariant, max_runs) {
        Ok(shrunk) => shrunk,
        Err(error) => return bad_input(&error),
    };
    let path = out.unwrap_or_else(|| PathBuf::from("scenarios/regressions").join(format!("{}.toml", shrunk.spec.name)));
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty())
        && let Err(error) = std::fs::create_dir_all(dir)
    {
        return bad_input(&format!("{}: cannot create: {error}", dir.display()));
    }
    if let Err(error) = handoff_sim::sweep::regressions::write(&shrunk.spec, seed, &path) {
        return bad_input(&error);
    }
    out!(format!(
        "finding   {}\nbefore    {}\nafter     {}\nruns      {}\nwrote     {}\nreplay    {} replay {}\n",
        shrunk.signature,
        shrunk.before,
        shrunk.after,
        shrunk.runs,
        path.display(),
        handoff_sim::program(),
        path.display()
    ));
    ExitCode::SUCCESS
}

pub fn merge(inputs: Vec<(String, std::io::BufReader<std::fs::File>)>, json: bool) -> ExitCode {
    let summary = match sweep::merge(inputs) {
        Ok(merged) => merged,
        Err(error) => return bad_input(&error),
    };
    let choice = handoff_sim::scenario::Choice {
        sets: summary.sets.clone(),
        variant: match &summary.prediction.origin {
            handoff_models::scenario::spec::PredictionOrigin::Variant { name, chosen: true }
            | handoff_models::scenario::spec::PredictionOrigin::Expect { variant: Some(name), .. }
            | handoff_models::scenario::spec::PredictionOrigin::Unpredicted { variant: Some(name), .. } => {
                Some(name.clone())
            }
            _ => None,
        },
        expect: match &summary.prediction.origin {
            handoff_models::scenario::spec::PredictionOrigin::Expect { text, .. } => Some(text.clone()),
            _ => None,
        },
    };
    let spec = match handoff_sim::scenario::load_with(std::path::Path::new(&summary.scenario), &choice) {
        Ok(loaded) => loaded.spec,
        Err(error) => return bad_input(&format!("the merged sweep's scenario: {error}")),
    };
    if json {
        out!(format!("{}\n", serde_json::json!({ "schema_version": report::JSON_SCHEMA_VERSION, "summary": summary })));
    } else {
        out!(summary.render(&spec));
    }
    exit_code(&summary)
}

/// `handoff drill NAME`: the lesson, the learner's prediction, the run against it, and where the
/// prediction was right and wrong. Exit 0 when the prediction matches what the model did.
pub fn drill(
    lesson: &handoff_sim::drills::Lesson,
    dir: &Path,
    predict: Option<String>,
    seed: Option<u64>,
    json: bool,
) -> ExitCode {
    use handoff_sim::drills;
    use handoff_sim::scenario::{self, Choice};
    if let Some(why) = &lesson.not_modelled {
        return bad_input(&format!("drill {}: {why}", lesson.name));
    }
    let path = dir.join(&lesson.scenario);
    let load = |expect: Option<String>| {
        let choice = Choice { sets: Vec::new(), variant: lesson.variant.clone(), expect };
        scenario::load_with(&path, &choice).map_err(|error| error.to_string().replacen("--expect", "--predict", 1))
    };
    let model = match load(None) {
        Ok(loaded) => loaded,
        Err(error) => return bad_input(&error),
    };
    // A prediction given is checked before anything is shown; one asked for after the lesson.
    let ask = predict.is_none();
    if ask && !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return bad_input(&format!(
            "drill {}: give your prediction with --predict (holds, fails-closed, or the invariants you expect \
             violated, like I2,I4): standard input is not a terminal to ask on",
            lesson.name
        ));
    }
    let mut learner = match predict.clone().map(|text| load(Some(text))).transpose() {
        Ok(learner) => learner,
        Err(error) => return bad_input(&error),
    };
    if !json {
        out!(drills::introduce(lesson));
    }
    let prediction = match predict {
        Some(text) => text,
        None => {
            use std::io::Write;
            let mut line = String::new();
            loop {
                let _ = write!(std::io::stderr(), "\n{}\n> ", drills::prompt());
                let _ = std::io::stderr().flush();
                line.clear();
                match std::io::stdin().read_line(&mut line) {
                    Ok(0) | Err(_) => return bad_input("no prediction given (end of input)"),
                    Ok(_) if line.trim().is_empty() => continue,
                    Ok(_) => match load(Some(line.trim().to_owned())) {
                        Ok(loaded) => {
                            learner = Some(loaded);
                            break;
                        }
                        // Asked again, with what was wrong.
                        Err(error) => {
                            let _ = writeln!(std::io::stderr(), "{error}");
                        }
                    },
                }
            }
            line.trim().to_owned()
        }
    };
    let Some(learner) = learner else { return bad_input("no prediction given") };
    let seed = seed.unwrap_or(model.seed);
    let result = runner::run(&learner.spec, seed);
    let model_judgement = runner::judge(&model.spec, &result.findings, result.failed_closed.is_some());
    let model_held = result.limit.is_none() && model_judgement.held();
    let variant = lesson.variant.as_ref().map_or(String::new(), |variant| format!(" --variant {variant}"));
    let replay = format!("{} run {}{variant} --seed {seed}", handoff_sim::program(), path.display());
    if json {
        let run = report::json(&learner.spec, &path.display().to_string(), &result);
        out!(format!(
            "{}\n",
            serde_json::json!({
                "schema_version": report::JSON_SCHEMA_VERSION,
                "drill": lesson.name,
                "prediction": prediction,
                "prediction_held": result.prediction_held,
                "scenario_prediction_held": model_held,
                "run": run,
            })
        ));
    } else {
        out!(drills::explain(lesson, &learner.spec, &model.spec, &result, model_held, &replay));
    }
    if result.prediction_held { ExitCode::SUCCESS } else { ExitCode::from(1) }
}
