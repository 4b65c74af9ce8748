//! Depth-first exploration of a bound on every thread: what `handoff check` runs by default.
//!
//! The model is the same `stateright::Model` that stateright's checkers explore (`--strategy
//! bfs` and `random` use them, and `--serve` its Explorer); this explorer walks it with less
//! shared state between threads. stateright's depth-first checker asks a shared map, under a
//! lock, whether each property already has a discovery, for every property of every state, and
//! keeps each pending state's path as a vector of its own; with the world's eight properties, two
//! threads explored only 1.2 to 1.4 times as many states a second as one (docs/performance.md).
//! Here each thread keeps its own stack and its own record of what it found; the threads share
//! only the set of fingerprints seen (in 64 separately locked parts) and the work one thread
//! hands to another that has none.
//!
//! What it reports means what stateright's reports mean: states generated (every successor
//! built, and the initial states), unique states (fingerprints seen), the maximum depth (the
//! initial states are at depth 1), and which properties were discovered: an `always` property
//! that some state breaks, a `sometimes` property that some state shows, each with the path to
//! the first state a thread found it in (real, not the shortest). A property is not evaluated
//! again in a thread once that thread has discovered it.
//!
//! The path to the state being expanded is each thread's trail: the index of the initial state
//! and of each action taken, one a depth. A state on a stack carries its depth and the index of
//! the action that led to it, and its parent is the trail's state one depth up (a depth-first
//! stack holds only children of the states on the trail), so the trail costs a truncate and a
//! push a state; a thread handing states to another hands the trail above them along.

use crate::exhaustive::budget::Budget;
use handoff_models::exhaustive::check::HandoffModel;
use handoff_models::exhaustive::world::{Action, Copies, World};
use stateright::{Expectation, Model};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

/// When to stop short of the whole bound.
#[derive(Clone, Copy)]
pub struct Limits<'a> {
    /// States at this depth are not expanded.
    pub max_depth: Option<usize>,
    /// The command's deadline, states and memory: the exploration stops once one is reached.
    pub budget: &'a Budget,
}

/// What an exploration found, whichever explorer made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explored {
    pub states: usize,
    pub unique_states: usize,
    pub max_depth: usize,
    /// The properties discovered, by name, each with a path to a state that shows it.
    pub discoveries: BTreeMap<&'static str, Vec<Action>>,
    /// Stopped by the budget (`false` from stateright's checkers, which do not say).
    pub cut_short: bool,
}

impl Explored {
    /// What one of stateright's checkers found.
    pub fn of(checker: impl stateright::Checker<HandoffModel>) -> Explored {
        Explored {
            states: checker.state_count(),
            unique_states: checker.unique_state_count(),
            max_depth: checker.max_depth(),
            discoveries: checker.discoveries().into_iter().map(|(name, path)| (name, path.into_actions())).collect(),
            cut_short: false,
        }
    }
}

/// The fingerprints seen, in parts locked separately (a part is chosen by middle bits of the
/// fingerprint).
struct Visited {
    parts: Vec<Part>,
    /// Per part, where its slots are and their mask, as last published under its lock: read
    /// without the lock only to prefetch (a stale pair names a wrong place, which a prefetch
    /// ignores).
    hints: Vec<(AtomicUsize, AtomicUsize)>,
}

/// A part of the visited set on cache lines of its own (two threads inserting into neighbouring
/// parts would otherwise take turns owning the line that holds both locks).
#[repr(align(128))]
struct Part(Mutex<Table>);

impl Visited {
    const PARTS: usize = 64;

    fn new() -> Visited {
        Visited {
            parts: (0..Visited::PARTS).map(|_| Part(Mutex::new(Table::default()))).collect(),
            hints: (0..Visited::PARTS).map(|_| (AtomicUsize::new(0), AtomicUsize::new(0))).collect(),
        }
    }

    fn part(fingerprint: u64) -> usize {
        (fingerprint >> 32) as usize % Visited::PARTS
    }

    /// Whether the fingerprint is new.
    fn insert(&self, fingerprint: u64) -> bool {
        let part = Visited::part(fingerprint);
        let mut table = self.parts[part].0.lock().expect("a part of the visited set");
        let new = table.insert(fingerprint);
        let (base, mask) = &self.hints[part];
        if base.load(Ordering::Relaxed) != table.slots.as_ptr() as usize {
            base.store(table.slots.as_ptr() as usize, Ordering::Relaxed);
            mask.store(table.slots.len().saturating_sub(1), Ordering::Relaxed);
        }
        new
    }

    /// Asks the processor to bring the fingerprint's place into the cache, so that inserting it
    /// a little later does not wait for memory (the table outgrows the caches; without this an
    /// insert's one read was most of the explorer's own time).
    fn prefetch(&self, fingerprint: u64) {
        let (base, mask) = &self.hints[Visited::part(fingerprint)];
        let base = base.load(Ordering::Relaxed);
        if base == 0 {
            return;
        }
        let at = fingerprint.max(1) as usize & mask.load(Ordering::Relaxed);
        #[cfg(target_arch = "x86_64")]
        {
            let place = (base as *const u64).wrapping_add(at);
            // SAFETY: SSE is part of every x86_64 processor, and a prefetch is a hint that reads
            // nothing and never faults, whatever the address.
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(place.cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    }

    fn len(&self) -> usize {
        self.parts.iter().map(|part| part.0.lock().expect("a part of the visited set").len()).sum()
    }
}

/// A set of fingerprints in one array, open addressing with linear probing: an insert reads one
/// place in memory, where a general hash set reads its control bytes and then its entries. Zero
/// marks a free slot, so the fingerprint 0 is kept as 1 (a collision chance of 2^-64 more).
#[derive(Default)]
pub struct Table {
    slots: Vec<u64>,
    len: usize,
}

impl Table {
    /// How many fingerprints it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether it holds the fingerprint.
    pub fn contains(&self, fingerprint: u64) -> bool {
        if self.slots.is_empty() {
            return false;
        }
        let key = fingerprint.max(1);
        let mask = self.slots.len() - 1;
        let mut at = key as usize & mask;
        loop {
            match self.slots[at] {
                0 => return false,
                present if present == key => return true,
                _ => at = (at + 1) & mask,
            }
        }
    }

    /// Whether the fingerprint is new (it is kept).
    pub fn insert(&mut self, fingerprint: u64) -> bool {
        let key = fingerprint.max(1);
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut at = key as usize & mask;
        loop {
            match self.slots[at] {
                0 => {
                    self.slots[at] = key;
                    self.len += 1;
                    return true;
                }
                present if present == key => return false,
                _ => at = (at + 1) & mask,
            }
        }
    }

    /// Adds every fingerprint of another table.
    pub fn extend(&mut self, other: &Table) {
        for key in other.slots.iter().filter(|key| **key != 0) {
            self.insert(*key);
        }
    }

    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(1024);
        let old = std::mem::replace(&mut self.slots, vec![0; size]);
        let mask = self.slots.len() - 1;
        for key in old.into_iter().filter(|key| *key != 0) {
            let mut at = key as usize & mask;
            while self.slots[at] != 0 {
                at = (at + 1) & mask;
            }
            self.slots[at] = key;
        }
    }
}

/// A state waiting to be expanded: its depth (the initial states are at 1), and the index of the
/// action that led to it among its parent's actions (of the initial state, for one).
type Job = (World, u32, u32);

/// A thread's path to the state it expands: the index of the initial state, then of each action.
type Trail = Vec<u32>;

/// Work handed between threads: states, and the trail their parents are on.
struct Pool {
    jobs: Vec<(Vec<Job>, Trail)>,
    /// Threads waiting for work.
    idle: usize,
    done: bool,
}

struct Exploration<'a> {
    model: &'a HandoffModel,
    threads: usize,
    limits: Limits<'a>,
    visited: Visited,
    states: AtomicUsize,
    max_depth: AtomicUsize,
    /// Threads waiting for work, and work in the pool (hints, read without the pool's lock).
    hungry: AtomicUsize,
    offered: AtomicUsize,
    stop: AtomicBool,
    cut_short: AtomicBool,
    pool: Mutex<Pool>,
    wake: Condvar,
    /// Each property discovered, with the shortest trail to it any thread found.
    discoveries: Mutex<BTreeMap<&'static str, Trail>>,
}

impl Exploration<'_> {
    /// Work for a thread that has none; `None` when the exploration is over.
    fn take(&self) -> Option<(Vec<Job>, Trail)> {
        let mut pool = self.pool.lock().expect("the pool");
        pool.idle += 1;
        self.hungry.fetch_add(1, Ordering::Relaxed);
        let job = loop {
            if pool.done {
                break None;
            }
            if let Some(job) = pool.jobs.pop() {
                self.offered.fetch_sub(1, Ordering::Relaxed);
                break Some(job);
            }
            if pool.idle == self.threads || self.stop.load(Ordering::Relaxed) {
                pool.done = true;
                self.wake.notify_all();
                break None;
            }
            pool = self.wake.wait(pool).expect("the pool");
        };
        pool.idle -= 1;
        self.hungry.fetch_sub(1, Ordering::Relaxed);
        job
    }

    /// Hands the older half of a stack (the states nearest the start, with the most below them)
    /// to a thread that has no work, with the part of the trail their parents are on (a stack's
    /// depths only grow from bottom to top, and a state's parent is on the trail one depth up).
    fn share(&self, stack: &mut Vec<Job>, trail: &[u32]) {
        let half: Vec<Job> = stack.drain(..stack.len() / 2).collect();
        let deepest = half.last().map_or(1, |(_, depth, _)| *depth as usize);
        let above = trail[..deepest - 1].to_vec();
        self.offered.fetch_add(1, Ordering::Relaxed);
        self.pool.lock().expect("the pool").jobs.push((half, above));
        self.wake.notify_one();
    }
}

/// Explores the model's bound depth-first on `threads` threads.
pub fn explore(model: &HandoffModel, threads: usize, limits: Limits) -> Explored {
    let threads = threads.max(1);
    let shared = Exploration {
        model,
        threads,
        limits,
        visited: Visited::new(),
        states: AtomicUsize::new(0),
        max_depth: AtomicUsize::new(0),
        hungry: AtomicUsize::new(0),
        offered: AtomicUsize::new(1),
        stop: AtomicBool::new(false),
        cut_short: AtomicBool::new(false),
        pool: Mutex::new(Pool { jobs: Vec::new(), idle: 0, done: false }),
        wake: Condvar::new(),
        discoveries: Mutex::new(BTreeMap::new()),
    };
    let mut first = Vec::new();
    for (index, state) in model.init_states().into_iter().enumerate() {
        shared.states.fetch_add(1, Ordering::Relaxed);
        if shared.visited.insert(state.fingerprint()) {
            first.push((state, 1, index as u32));
        }
    }
    limits.budget.spend(shared.states.load(Ordering::Relaxed));
    shared.pool.lock().expect("the pool").jobs.push((first, Trail::new()));
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(|| work(&shared));
        }
        work(&shared);
    });
    let discoveries = shared.discoveries.into_inner().expect("the discoveries");
    let discoveries = discoveries.into_iter().map(|(name, trail)| (name, path_of(model, &trail))).collect();
    Explored {
        states: shared.states.into_inner(),
        unique_states: shared.visited.len(),
        max_depth: shared.max_depth.into_inner(),
        discoveries,
        cut_short: shared.cut_short.into_inner(),
    }
}

/// The actions a trail takes.
fn path_of(model: &HandoffModel, trail: &[u32]) -> Vec<Action> {
    let Some((first, choices)) = trail.split_first() else { return Vec::new() };
    let Some(mut state) = model.init_states().into_iter().nth(*first as usize) else { return Vec::new() };
    let mut actions = Vec::new();
    let mut path = Vec::with_capacity(choices.len());
    for choice in choices {
        actions.clear();
        model.actions(&state, &mut actions);
        let Some(action) = actions.get(*choice as usize) else { break };
        let Some(next) = model.next_state(&state, action.clone()) else { break };
        path.push(action.clone());
        state = next;
    }
    path
}

/// One thread's share of the exploration.
fn work(shared: &Exploration) {
    let model = shared.model;
    let properties = model.properties();
    let mut found = vec![false; properties.len()];
    let mut trails: Vec<Option<Trail>> = vec![None; properties.len()];
    let mut stack: Vec<Job> = Vec::new();
    let mut trail = Trail::new();
    let mut actions: Vec<Action> = Vec::new();
    let mut generated = 0usize;
    let mut deepest = 0usize;
    let mut since_check = 0usize;
    loop {
        let Some((state, depth, choice)) = stack.pop() else {
            match shared.take() {
                Some((mut job, above)) => {
                    // States taken over from another thread get parts of their own, so that
                    // the two threads do not share reference counts from here on.
                    let mut copies = Copies::default();
                    for (state, _, _) in &mut job {
                        state.rehome(&mut copies);
                    }
                    stack = job;
                    trail = above;
                    continue;
                }
                None => break,
            }
        };
        // Its parent is the trail's state one depth up.
        let depth = depth as usize;
        trail.truncate(depth - 1);
        trail.push(choice);
        deepest = deepest.max(depth);
        if shared.limits.max_depth.is_some_and(|limit| depth >= limit) {
            continue;
        }
        for (index, property) in properties.iter().enumerate() {
            if found[index] {
                continue;
            }
            let holds = (property.condition)(model, &state);
            found[index] = match property.expectation {
                Expectation::Sometimes => holds,
                Expectation::Always | Expectation::Eventually => !holds,
            };
            if found[index] {
                trails[index] = Some(trail.clone());
            }
        }
        actions.clear();
        model.actions(&state, &mut actions);
        // Each successor goes on the stack at once, and its fingerprint is inserted after the
        // next successor is built, so that its place in the table is fetched meanwhile; a
        // successor seen before comes off the top of the stack again (the order of the stack is
        // that of inserting at once).
        let mut waiting: Option<u64> = None;
        let below = depth as u32 + 1;
        for (index, action) in actions.drain(..).enumerate() {
            let Some(next) = model.next_state(&state, action) else { continue };
            generated += 1;
            let fingerprint = next.fingerprint();
            shared.visited.prefetch(fingerprint);
            if let Some(previous) = waiting.replace(fingerprint)
                && !shared.visited.insert(previous)
            {
                stack.pop();
            }
            stack.push((next, below, index as u32));
        }
        if let Some(previous) = waiting
            && !shared.visited.insert(previous)
        {
            stack.pop();
        }
        since_check += 1;
        if since_check >= 256 {
            since_check = 0;
            shared.states.fetch_add(generated, Ordering::Relaxed);
            let reached = shared.limits.budget.spend(generated);
            generated = 0;
            if reached.is_some() {
                shared.cut_short.store(true, Ordering::Relaxed);
                shared.stop.store(true, Ordering::Relaxed);
            }
            if shared.stop.load(Ordering::Relaxed) {
                break;
            }
        }
        if stack.len() >= 2 && shared.hungry.load(Ordering::Relaxed) > shared.offered.load(Ordering::Relaxed) {
            shared.share(&mut stack, &trail);
        }
    }
    // Stopping: let the others know, and leave the rest.
    if shared.stop.load(Ordering::Relaxed) {
        let mut pool = shared.pool.lock().expect("the pool");
        pool.done = true;
        shared.wake.notify_all();
    }
    shared.states.fetch_add(generated, Ordering::Relaxed);
    shared.limits.budget.spend(generated);
    shared.max_depth.fetch_max(deepest, Ordering::Relaxed);
    let mut discoveries = shared.discoveries.lock().expect("the discoveries");
    for (property, trail) in properties.iter().zip(trails) {
        let Some(trail) = trail else { continue };
        // The shortest trail any thread found, the first in order among equals: the same
        // threads' findings always give the same path.
        let better = |kept: &Trail| (trail.len(), &trail) < (kept.len(), kept);
        if discoveries.get(property.name).is_none_or(better) {
            discoveries.insert(property.name, trail);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stateright::Checker;

    fn model(name: &str) -> HandoffModel {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios").join(name);
        let spec = crate::scenario::load(&path, &[]).expect("a bundled scenario").spec;
        let (world, bounds) = crate::exhaustive::check::bound(&spec).expect("a bound");
        HandoffModel::new(world, bounds)
    }

    fn whole(budget: &Budget) -> Limits<'_> {
        Limits { max_depth: None, budget }
    }

    /// What an exploration found, but where: the counts and the names of the properties.
    fn counts(explored: &Explored) -> (usize, usize, Vec<&'static str>, bool) {
        (explored.states, explored.unique_states, explored.discoveries.keys().copied().collect(), explored.cut_short)
    }

    #[test]
    fn it_finds_what_stateright_finds() {
        for name in ["zoo/naive-sink.toml", "zoo/dbz-7816-slot-confirmed-before-offsets-stored.toml"] {
            let model = model(name);
            let expected = counts(&Explored::of(model.clone().checker().threads(1).spawn_bfs().join()));
            for threads in [1, 2, 3] {
                let ours = explore(&model, threads, whole(&Budget::unlimited()));
                assert_eq!(counts(&ours), expected, "{name}, {threads} thread(s)");
                assert!(ours.max_depth > 10, "{name}: {ours:?}");
            }
        }
    }

    #[test]
    fn each_discovery_comes_with_a_real_path_to_it() {
        let model = model("zoo/naive-sink.toml");
        let properties = model.properties();
        for threads in [1, 2, 3] {
            let explored = explore(&model, threads, whole(&Budget::unlimited()));
            assert!(explored.discoveries.contains_key("I3 monotonic apply"), "{explored:?}");
            for (name, path) in &explored.discoveries {
                // Replayed from the start, the path ends in a state that shows the property
                // (breaks an `always`, or shows a `sometimes`), and every step is one the state
                // before it offers.
                let property = properties.iter().find(|p| p.name == *name).expect("a property of the model");
                let mut state = model.init_states().remove(0);
                let mut actions = Vec::new();
                for action in path {
                    actions.clear();
                    model.actions(&state, &mut actions);
                    assert!(actions.contains(action), "{name}, {threads} thread(s): {action} is not offered");
                    state = model.next_state(&state, action.clone()).expect("a step");
                }
                let holds = (property.condition)(&model, &state);
                let shows = if property.expectation == Expectation::Sometimes { holds } else { !holds };
                assert!(shows, "{name}, {threads} thread(s): the path's last state does not show it");
            }
        }
        // One thread explores in one order: the same path every time.
        let once = explore(&model, 1, whole(&Budget::unlimited())).discoveries;
        assert_eq!(explore(&model, 1, whole(&Budget::unlimited())).discoveries, once);
    }

    #[test]
    fn the_table_keeps_each_fingerprint_once() {
        let mut table = Table::default();
        let keys: Vec<u64> = (0..10_000u64).map(|n| n.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        assert!(keys.iter().all(|key| table.insert(*key)), "new keys are new");
        assert!(keys.iter().all(|key| !table.insert(*key)), "and seen once they are in");
        assert!(keys.iter().all(|key| table.contains(*key)) && !table.contains(3) && !Table::default().contains(3));
        assert_eq!(table.len, keys.len());
        // Keys that share their low bits probe past each other.
        let mut crowded = Table::default();
        assert!((1..=3000u64).all(|n| crowded.insert(n << 40)));
        assert!((1..=3000u64).all(|n| !crowded.insert(n << 40)));
    }

    #[test]
    fn it_stops_where_it_is_told() {
        let model = model("zoo/naive-sink.toml");
        let budget = Budget::new(None, 1_000, None);
        let cut = explore(&model, 2, whole(&budget));
        assert!(cut.cut_short && cut.states >= 1_000 && cut.states < 57_273, "{}", cut.states);
        assert_eq!(budget.reached(), Some(crate::exhaustive::budget::Limit::MaxStates));
        assert_eq!(budget.spent(), cut.states, "the budget counts what the exploration generated");
        let budget = Budget::new(Some(std::time::Duration::from_millis(1)), usize::MAX, None);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let late = explore(&model, 2, whole(&budget));
        assert!(late.cut_short && late.states < 57_273, "{}", late.states);
        assert_eq!(budget.reached(), Some(crate::exhaustive::budget::Limit::Timeout));
        let shallow = explore(&model, 2, Limits { max_depth: Some(5), budget: &Budget::unlimited() });
        assert!(!shallow.cut_short && shallow.max_depth == 5, "{shallow:?}");
        assert!(shallow.unique_states < 1_000, "{shallow:?}");
    }
}
