//! Conformance of the PostgreSQL model with a real server: scripted server steps
//! ([`workload`]), the model's side of a run ([`server`]), and what both sides observe and how
//! they compare ([`observe`]). The `handoff conform` command runs a workload on the model and,
//! against a real server, on both, and reports every step on which they differ.

pub mod observe;
pub mod server;
pub mod workload;
