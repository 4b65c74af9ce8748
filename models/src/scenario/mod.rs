//! Scenario data: what a run is made of. The validated scenario ([`spec`]), the system it builds
//! ([`setup`]), the application's workload ([`workload`]), the fault schedule ([`faults`]) and
//! the steps of an exhaustive path ([`schedule`]).

pub mod faults;
pub mod processes;
pub mod schedule;
pub mod setup;
pub mod spec;
pub mod workload;
