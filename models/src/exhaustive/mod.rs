//! The exhaustive lens: the components composed into one state ([`world`]) and the
//! `stateright::Model` over it ([`check`]).

pub mod check;
pub mod world;
