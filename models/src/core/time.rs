//! Simulated time. Models never read a clock: the lens passes the current simulated time in.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Milliseconds of simulated time since the start of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SimTime(pub u64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);

    pub fn ms(self) -> u64 {
        self.0
    }

    pub fn plus_ms(self, duration_ms: u64) -> SimTime {
        SimTime(self.0.saturating_add(duration_ms))
    }

    pub fn since(self, earlier: SimTime) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for SimTime {
    /// `t=61.200s`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={}.{:03}s", self.0 / 1000, self.0 % 1000)
    }
}

/// A duration in seconds, with milliseconds when it has them: `300 s`, `303.042 s`.
pub fn seconds_text(ms: u64) -> String {
    if ms.is_multiple_of(1000) { format!("{} s", ms / 1000) } else { format!("{}.{:03} s", ms / 1000, ms % 1000) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_seconds_with_milliseconds() {
        assert_eq!(SimTime(61_200).to_string(), "t=61.200s");
        assert_eq!(SimTime(5).to_string(), "t=0.005s");
    }
}
