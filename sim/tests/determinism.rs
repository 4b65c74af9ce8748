//! Determinism is the product: the same scenario and seed give the same trace, bit for bit, in a
//! fresh runtime each time; different seeds give different runs.
#![cfg(madsim)]

mod common;

use std::collections::BTreeSet;

#[test]
fn the_same_seed_gives_the_same_trace_hash() {
    for name in common::SCENARIOS {
        let (spec, seed) = common::load(name, &[]);
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
