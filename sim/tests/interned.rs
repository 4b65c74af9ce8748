//! The configurations interned for `Fixed` values live as long as the process (a plain reference
//! is what makes copying a component free of reference counts). So the table may grow only with
//! the distinct configurations a process sets up, never with its runs: a sweep of many seeds, a
//! scenario set up again and again, a bound explored twice intern nothing after the first time.
//! (One test in its own binary: the table is the process's, and tests beside it would add to it.)
#![cfg(madsim)]

mod common;

use handoff_models::core::shared::interned_values;

#[test]
fn runs_of_a_configuration_already_set_up_intern_nothing_more() {
    let (spec, _) = common::load("claims-failover-pg17-synchronized", &[]);
    let (other, _) = common::load("claims-quiet-database-keepalive-fix", &[]);
    // The first run of each sets its configurations up.
    common::run(&spec, 1);
    common::run(&other, 1);
    let after_first_runs = interned_values();
    assert!(after_first_runs > 0, "configurations are interned");
    for seed in 2..=40 {
        common::run(&spec, seed);
        common::run(&other, seed);
    }
    // Loading the file again builds an equal spec: the same configurations.
    let (again, _) = common::load("claims-failover-pg17-synchronized", &[]);
    common::run(&again, 41);
    assert_eq!(interned_values(), after_first_runs, "80 more runs of the same two configurations grew the table");
    // A different configuration interns what differs, once.
    let (changed, _) =
        common::load("claims-failover-pg17-synchronized", &["connect.\"offset.flush.interval.ms\"=20000"]);
    common::run(&changed, 1);
    let with_the_change = interned_values();
    assert!(with_the_change > after_first_runs, "a changed Connect configuration is a new value");
    assert!(
        with_the_change - after_first_runs <= 2,
        "only what changed is new: {}",
        with_the_change - after_first_runs
    );
    common::run(&changed, 2);
    assert_eq!(interned_values(), with_the_change);
}
