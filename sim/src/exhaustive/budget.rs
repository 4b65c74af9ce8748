//! The limits of one `handoff check` command, shared by every phase of it: the exploration of the
//! bound and the searches for the shortest counterexamples.
//!
//! - the deadline (`--timeout`): the command returns within [`TIMEOUT_MARGIN_MS`] of it;
//! - the states it may generate (`--max-states`), counted over all phases;
//! - the memory it may hold (`--max-memory`; by default half of the machine's memory, or of its
//!   cgroup's limit if that is lower, [`default_max_memory`]).
//!
//! Each phase asks [`Budget::exhausted`] or [`Budget::spend`] regularly — every few hundred
//! states, never on every state — and stops cleanly once a limit is reached: the first limit
//! reached is the one the report names. The deadline and the state count are checked by the
//! asking thread itself. The memory is measured by one watchdog thread
//! ([`Budget::watching`]), which reads the process's resident memory from `/proc/self/statm` —
//! every [`WATCH_INTERVAL_MS`] near the mark, less often while far below it — and stops the
//! command once it reaches [`STOP_PERCENT`] % of the budget: the rest is headroom for what is
//! allocated between two readings and while the phases wind down (docs/performance.md has the
//! measured overshoot).

use handoff_models::core::units::{self, UnitError};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often the watchdog reads the process's resident memory near the mark it stops at.
pub const WATCH_INTERVAL_MS: u64 = 10;

/// How often it reads it at the least, however far below the mark.
const WATCH_INTERVAL_MAX_MS: u64 = 100;

/// The growth the watchdog's pace allows for: it waits no longer than the process would take to
/// reach the mark growing this fast (2 GB/s; the fastest measured, the counterexample search on
/// the README's larger bound, grew 1.5 GB/s over 10 ms and 0.5 GB/s over 100 ms).
const GROWTH_BYTES_PER_MS: u64 = 2 << 20;

/// The share of the memory budget at which the command stops (the rest is headroom).
pub const STOP_PERCENT: u64 = 90;

/// How long after its deadline a command may still take to wind down and print its report
/// (what the documentation promises; the measured time is far less, docs/performance.md).
pub const TIMEOUT_MARGIN_MS: u64 = 1_000;

/// The longest `--timeout`, in seconds (a year).
pub const MAX_TIMEOUT_SECONDS: u64 = 365 * 24 * 3_600;

/// The smallest `--max-memory`: its 10 % of headroom, 12.8 MB, is above the largest overshoot
/// measured past the mark (6.7 MB, docs/performance.md).
pub const MIN_MEMORY_BYTES: u64 = 128 << 20;

/// Why a check stopped short of the whole bound, or of the shortest counterexample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limit {
    /// `--timeout`.
    Timeout,
    /// `--max-states`.
    MaxStates,
    /// `--max-memory`.
    MaxMemory,
    /// `--max-depth` (paths end there; the exploration itself runs to its end).
    MaxDepth,
    /// `--strategy random`: random walks sample the bound and never explore it completely.
    Sampled,
}

impl Limit {
    fn code(self) -> u8 {
        match self {
            Limit::Timeout => 1,
            Limit::MaxStates => 2,
            Limit::MaxMemory => 3,
            Limit::MaxDepth => 4,
            Limit::Sampled => 5,
        }
    }

    fn of_code(code: u8) -> Option<Limit> {
        [Limit::Timeout, Limit::MaxStates, Limit::MaxMemory, Limit::MaxDepth, Limit::Sampled]
            .into_iter()
            .find(|limit| limit.code() == code)
    }
}

/// A command's limits, and the first one it reached.
pub struct Budget {
    started: Instant,
    timeout: Option<Duration>,
    deadline: Option<Instant>,
    max_states: usize,
    states: AtomicUsize,
    max_memory_bytes: Option<u64>,
    /// The first limit reached (0: none yet).
    reached: AtomicU8,
    /// Raised with the first limit reached: what stateright's checkers see (the model offers no
    /// more steps once it is up, `HandoffModel::halt`).
    halt: Arc<AtomicBool>,
    /// Whether the halt was lifted for good (a checker that has stopped rebuilds its paths
    /// through the model's steps); under a lock, so that a late stop cannot raise it again.
    halt_lifted: Mutex<bool>,
    /// The most resident memory the watchdog read.
    peak_bytes: AtomicU64,
}

impl Budget {
    /// A budget that starts now.
    pub fn new(timeout: Option<Duration>, max_states: usize, max_memory_bytes: Option<u64>) -> Budget {
        let started = Instant::now();
        Budget {
            started,
            timeout,
            deadline: timeout.and_then(|timeout| started.checked_add(timeout)),
            max_states,
            states: AtomicUsize::new(0),
            max_memory_bytes,
            reached: AtomicU8::new(0),
            halt: Arc::new(AtomicBool::new(false)),
            halt_lifted: Mutex::new(false),
            peak_bytes: AtomicU64::new(0),
        }
    }

    /// No limit at all.
    pub fn unlimited() -> Budget {
        Budget::new(None, usize::MAX, None)
    }

    pub fn max_states(&self) -> usize {
        self.max_states
    }

    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    pub fn max_memory_bytes(&self) -> Option<u64> {
        self.max_memory_bytes
    }

    /// The time left before the deadline (`None`: no deadline).
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()))
    }

    /// The flag stateright's checkers are stopped with.
    pub fn halt(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.halt)
    }

    /// The first limit reached, if any (a relaxed read: cheap enough for every few hundred
    /// states).
    pub fn reached(&self) -> Option<Limit> {
        Limit::of_code(self.reached.load(Ordering::Relaxed))
    }

    /// Records that a limit was reached (the first one recorded is kept), and stops everything.
    pub fn stop(&self, limit: Limit) {
        let _ = self.reached.compare_exchange(0, limit.code(), Ordering::Relaxed, Ordering::Relaxed);
        if !self.halt.load(Ordering::Relaxed) {
            let lifted = self.halt_lifted.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if !*lifted {
                self.halt.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Lowers the halt for good, once the checkers it stops have stopped: the model offers its
    /// steps again (stateright rebuilds the paths it found through them). The limit reached
    /// stays recorded.
    pub fn lift_halt(&self) {
        let mut lifted = self.halt_lifted.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *lifted = true;
        self.halt.store(false, Ordering::Relaxed);
    }

    /// The limit the command has reached, if any: checks the deadline.
    pub fn exhausted(&self) -> Option<Limit> {
        if let Some(limit) = self.reached() {
            return Some(limit);
        }
        if self.deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            self.stop(Limit::Timeout);
        }
        self.reached()
    }

    /// Counts states generated, and says whether the command must stop.
    pub fn spend(&self, states: usize) -> Option<Limit> {
        let total = self.states.fetch_add(states, Ordering::Relaxed).saturating_add(states);
        if total >= self.max_states {
            self.stop(Limit::MaxStates);
        }
        self.exhausted()
    }

    /// The states generated so far, over every phase.
    pub fn spent(&self) -> usize {
        self.states.load(Ordering::Relaxed)
    }

    /// The process's peak resident memory: the kernel's high-water mark where it says it, else
    /// the most the watchdog read.
    pub fn peak_bytes(&self) -> Option<u64> {
        peak_resident_bytes().or_else(|| Some(self.peak_bytes.load(Ordering::Relaxed)).filter(|peak| *peak > 0))
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Runs `body` with the watchdog measuring the process's memory (when there is a memory
    /// budget), and stops the watchdog when `body` returns or unwinds.
    pub fn watching<T>(&self, body: impl FnOnce() -> T) -> T {
        let Some(max_bytes) = self.max_memory_bytes else { return body() };
        let done = (Mutex::new(false), Condvar::new());
        /// Tells the watchdog to stop, however `body` ends.
        struct Finish<'a>(&'a (Mutex<bool>, Condvar));
        impl Drop for Finish<'_> {
            fn drop(&mut self) {
                let (flag, wake) = self.0;
                *flag.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = true;
                wake.notify_all();
            }
        }
        std::thread::scope(|scope| {
            scope.spawn(|| self.watch(max_bytes, &done));
            let _finish = Finish(&done);
            body()
        })
    }

    fn watch(&self, max_bytes: u64, done: &(Mutex<bool>, Condvar)) {
        let Some(mut resident) = Resident::open() else { return };
        let stop_at = max_bytes / 100 * STOP_PERCENT;
        let (flag, wake) = done;
        let mut finished = flag.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while !*finished {
            let mut wait_ms = WATCH_INTERVAL_MS;
            if let Some(bytes) = resident.bytes() {
                self.peak_bytes.fetch_max(bytes, Ordering::Relaxed);
                if bytes >= stop_at {
                    self.stop(Limit::MaxMemory);
                }
                wait_ms = (stop_at.saturating_sub(bytes) / GROWTH_BYTES_PER_MS)
                    .clamp(WATCH_INTERVAL_MS, WATCH_INTERVAL_MAX_MS);
            }
            // The deadline too, for phases that only look at the flag (stateright's checkers).
            self.exhausted();
            finished = wake
                .wait_timeout(finished, Duration::from_millis(wait_ms))
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }
}

/// The process's resident memory, read from `/proc/self/statm` (its second field, in pages).
struct Resident {
    file: std::fs::File,
    page_bytes: u64,
    text: Vec<u8>,
}

impl Resident {
    fn open() -> Option<Resident> {
        let file = std::fs::File::open("/proc/self/statm").ok()?;
        Some(Resident { file, page_bytes: page_bytes()?, text: vec![0; 256] })
    }

    fn bytes(&mut self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let read = self.file.read_at(&mut self.text, 0).ok()?;
        let text = std::str::from_utf8(&self.text[..read]).ok()?;
        let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
        pages.checked_mul(self.page_bytes)
    }
}

/// The size of a memory page, from the kernel's auxiliary vector (`AT_PAGESZ`).
fn page_bytes() -> Option<u64> {
    const AT_PAGESZ: u64 = 6;
    let auxv = std::fs::read("/proc/self/auxv").ok()?;
    auxv.chunks_exact(16).find_map(|pair| {
        let key = u64::from_ne_bytes(pair[..8].try_into().ok()?);
        let value = u64::from_ne_bytes(pair[8..].try_into().ok()?);
        (key == AT_PAGESZ).then_some(value)
    })
}

/// Whether this system shows the process's resident memory (Linux's `/proc`): a memory budget
/// needs it.
pub fn can_measure_memory() -> bool {
    Resident::open().is_some_and(|mut resident| resident.bytes().is_some())
}

/// The kernel's record of the process's peak resident memory (`VmHWM`).
fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    kilobytes_field(&status, "VmHWM:")
}

/// A `NAME:  1234 kB` line's value, in bytes.
fn kilobytes_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|line| line.starts_with(name))?;
    let kilobytes: u64 = line[name.len()..].split_whitespace().next()?.parse().ok()?;
    kilobytes.checked_mul(1024)
}

/// The memory this machine gives the process: its memory (`MemTotal`), or its cgroup's limit if
/// that is lower.
pub fn machine_memory_bytes() -> Option<u64> {
    let total = kilobytes_field(&std::fs::read_to_string("/proc/meminfo").ok()?, "MemTotal:")?;
    Some(cgroup_limit_bytes().map_or(total, |limit| limit.min(total)))
}

/// The default `--max-memory`: half of what the machine gives the process.
pub fn default_max_memory() -> Option<u64> {
    machine_memory_bytes().map(|bytes| bytes / 2)
}

/// The lowest memory limit of the process's cgroup and its ancestors (cgroup v2's `memory.max`,
/// or v1's `memory.limit_in_bytes`).
fn cgroup_limit_bytes() -> Option<u64> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut lowest: Option<u64> = None;
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let (root, file) = match controllers {
            "" => ("/sys/fs/cgroup".to_owned(), "memory.max"),
            list if list.split(',').any(|name| name == "memory") => {
                ("/sys/fs/cgroup/memory".to_owned(), "memory.limit_in_bytes")
            }
            _ => continue,
        };
        let mut dir = std::path::PathBuf::from(format!("{root}{}", path.trim_end_matches('/')));
        loop {
            if let Ok(text) = std::fs::read_to_string(dir.join(file))
                && let Ok(bytes) = text.trim().parse::<u64>()
            {
                lowest = Some(lowest.map_or(bytes, |lowest| lowest.min(bytes)));
            }
            if dir.as_os_str().len() <= root.len() || !dir.pop() {
                break;
            }
        }
    }
    lowest
}

/// `--max-memory`: `512MB`, `8GB`, `1536kB`, or plain bytes (PostgreSQL's memory units).
pub fn parse_memory(text: &str) -> Result<u64, String> {
    units::parse(text, &units::SIZE_UNITS, Some(1)).map_err(|error| match error {
        UnitError::TooLarge => format!("--max-memory {text}: too large"),
        UnitError::NotANumber | UnitError::UnknownUnit(_) => {
            format!("--max-memory {text}: expected a size like 512MB or 8GB (B, kB, MB, GB, TB) or bytes")
        }
    })
}

/// `3.1GB`, `11.7GB`, `200MB`, `512kB`: a size for people, one decimal below 100 units.
pub fn size_text(bytes: u64) -> String {
    let Some((unit, scale)) = units::SIZE_UNITS.iter().rev().find(|(_, scale)| bytes >= *scale) else {
        return "0B".into();
    };
    let value = bytes as f64 / *scale as f64;
    if value >= 100.0 || bytes.is_multiple_of(*scale) {
        format!("{value:.0}{unit}")
    } else {
        format!("{value:.1}{unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_postgresql_writes_them() {
        assert_eq!(parse_memory("200MB"), Ok(200 << 20));
        assert_eq!(parse_memory("8GB"), Ok(8 << 30));
        assert_eq!(parse_memory("1536kB"), Ok(1536 << 10));
        assert_eq!(parse_memory("123456789"), Ok(123_456_789));
        for bad in ["", "8gb", "8 GiB", "MB", "-1GB", "1.5GB"] {
            let error = parse_memory(bad).expect_err(bad);
            assert!(error.contains("--max-memory") && error.contains("MB"), "{bad}: {error}");
        }
        assert!(parse_memory("99999999999TB").expect_err("overflow").contains("too large"));
        assert_eq!(size_text(3_154_168 << 10), "3.0GB");
        assert_eq!(size_text(200 << 20), "200MB");
        assert_eq!(size_text(1536 << 20), "1.5GB");
        assert_eq!(size_text(12_000_000_000), "11.2GB");
        assert_eq!(size_text(120_000_000), "114MB");
        assert_eq!(size_text(0), "0B");
    }

    #[test]
    fn the_first_limit_reached_is_the_one_kept() {
        let budget = Budget::new(None, 1_000, None);
        assert_eq!(budget.spend(999), None);
        assert!(!budget.halt().load(Ordering::Relaxed));
        assert_eq!(budget.spend(1), Some(Limit::MaxStates));
        budget.stop(Limit::MaxMemory);
        assert_eq!(budget.exhausted(), Some(Limit::MaxStates));
        assert!(budget.halt().load(Ordering::Relaxed));
        budget.lift_halt();
        budget.stop(Limit::Timeout);
        assert!(!budget.halt().load(Ordering::Relaxed), "a lifted halt stays down");
        assert_eq!(budget.reached(), Some(Limit::MaxStates));
        let late = Budget::new(Some(Duration::from_millis(1)), usize::MAX, None);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(late.exhausted(), Some(Limit::Timeout));
        assert_eq!(late.remaining(), Some(Duration::ZERO));
    }

    #[test]
    fn the_watchdog_stops_the_command_at_its_memory_budget() {
        if !can_measure_memory() {
            return;
        }
        // A budget below what the process already holds: the watchdog stops it at its first
        // reading, and the body is left to see it.
        let budget = Budget::new(None, usize::MAX, Some(1 << 20));
        let seen = budget.watching(|| {
            let started = Instant::now();
            while budget.reached().is_none() && started.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(1));
            }
            budget.reached()
        });
        assert_eq!(seen, Some(Limit::MaxMemory));
        assert!(budget.peak_bytes().is_some_and(|peak| peak > 1 << 20));
        // A generous one is never reached.
        let budget = Budget::new(None, usize::MAX, machine_memory_bytes());
        budget.watching(|| std::thread::sleep(Duration::from_millis(3 * WATCH_INTERVAL_MS)));
        assert_eq!(budget.reached(), None);
        assert!(default_max_memory().is_some_and(|bytes| bytes >= MIN_MEMORY_BYTES));
    }
}
