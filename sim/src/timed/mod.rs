//! The timed lens: one run of a scenario under madsim ([`runner`]), each modelled process a
//! madsim node ([`node`]) on the run's simulated network ([`net`]), and what `handoff run`
//! prints ([`report`]; as a page, [`html`]).

pub mod html;
pub mod net;
pub mod node;
pub mod report;
pub mod runner;
pub mod view;
