//! The seed database: every scenario under `scenarios/regressions/` replays to its recorded
//! finding, and its narrated trace matches the reviewed snapshot.
#![cfg(madsim)]

use handoff_sim::scenario;
use handoff_sim::timed::{report, runner};
use std::path::PathBuf;

#[test]
fn every_saved_regression_replays_to_its_finding() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/regressions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("scenarios/regressions exists")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the seed database is empty");
    for path in files {
        let loaded = scenario::load(&path, &[]).unwrap_or_else(|error| panic!("{error}"));
        let result = runner::run(&loaded.spec, loaded.seed);
        let name = path.file_stem().expect("stem").to_string_lossy().to_string();
        assert!(
            result.prediction_held,
            "{name}: the regression no longer fails as recorded; violated {:?}",
            result.violated()
        );
        let mut text = report::timeline(&loaded.spec, &result).join("\n");
        text.push_str("\n\nfindings\n");
        for finding in &result.findings {
            text.push_str(&format!("  {finding}\n"));
        }
        text.push_str(&format!("\ntrace hash {:016x}\n", result.trace_hash));
        insta::with_settings!({ snapshot_path => "../../snapshots/regressions", prepend_module_to_snapshot => false, omit_expression => true }, {
            insta::assert_snapshot!(name, text);
        });
    }
}
