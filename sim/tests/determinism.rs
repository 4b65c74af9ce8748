//! Determinism is the product: the same scenario and seed give the same trace, bit for bit, in a
//! fresh runtime each time; different seeds give different runs.
#![cfg(madsim)]

mod common;

use std::collections::BTreeSet;

#[test]
fn the_same_seed_gives_the_same_trace_hash() {
    for (name, path) in common::bundled() {
        let (spec, seed) = common::load_path(&path);
        let first = common::run(&spec, seed);
        let second = common::run(&spec, seed);
        assert_eq!(first.trace_hash, second.trace_hash, "{name}");
        assert_eq!(first.trace, second.trace, "{name}");
        assert_eq!(first.findings, second.findings, "{name}");
    }
}

#[test]
fn different_seeds_give_different_runs() {
    let (spec, _) = common::load("claims-restart-during-snapshot", &[]);
    let hashes: BTreeSet<u64> = (1..=6).map(|seed| common::run(&spec, seed).trace_hash).collect();
    assert_eq!(hashes.len(), 6, "six seeds, six traces");
}

#[test]
fn a_run_does_not_depend_on_what_ran_before_it_in_the_process() {
    let (spec, seed) = common::load("claims-failover", &[]);
    let alone = common::run(&spec, seed).trace_hash;
    let (other, other_seed) = common::load("claims-wall-clock-start", &[]);
    let _ = common::run(&other, other_seed);
    assert_eq!(common::run(&spec, seed).trace_hash, alone);
    let threaded = std::thread::spawn(move || common::run(&spec, seed).trace_hash).join().expect("thread");
    assert_eq!(threaded, alone, "a run on another thread is the same run");
}

#[test]
fn a_sweep_run_finds_and_hashes_what_a_full_run_does_without_keeping_the_trace() {
    use handoff_sim::timed::runner::{self, RunOptions};
    for (name, path) in common::bundled() {
        let (spec, seed) = common::load_path(&path);
        let full = runner::run_with(&spec, seed, RunOptions::FULL);
        let sweep = runner::run_with(&spec, seed, RunOptions::SWEEP);
        assert_eq!(runner::trace_hash(&full.trace), full.trace_hash, "{name}: the hash is the trace's");
        assert_eq!(sweep.trace_hash, full.trace_hash, "{name}");
        assert_eq!(sweep.findings, full.findings, "{name}");
        assert_eq!(sweep.coverage, full.coverage, "{name}");
        assert!(sweep.trace.is_empty() && sweep.record.is_none());
        assert_eq!(sweep.events, full.trace.len());
    }
}

#[test]
fn the_determinism_tests_cover_every_bundled_scenario() {
    // Every scenario file under `scenarios/`, in whatever folder: a folder added later and not
    // listed in `BUNDLED_FOLDERS` would leave its scenarios out of the tests above.
    fn walk(dir: &std::path::Path, found: &mut BTreeSet<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("a readable folder") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|ext| ext == "toml") {
                found.insert(path);
            }
        }
    }
    let mut on_disk = BTreeSet::new();
    walk(&std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios"), &mut on_disk);
    let covered: BTreeSet<std::path::PathBuf> = common::bundled().into_iter().map(|(_, path)| path).collect();
    let left_out: Vec<_> = on_disk.difference(&covered).map(|path| path.display().to_string()).collect();
    assert!(left_out.is_empty(), "scenarios the determinism tests skip: {left_out:?}");
}
