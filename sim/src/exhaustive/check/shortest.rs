//! The shortest counterexample of a property: a breadth-first search, level by level, on every
//! thread, within the command's budget.

use super::*;

/// What a search for the shortest path to a property's discovery came to.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Search {
    Found(Vec<Action>),
    /// The whole bound searched, and no state shows the property.
    Missing,
    /// A limit of the command stopped the search.
    CutShort(Limit),
}

/// The shortest path to a property's discovery: breadth-first, level by level. A level's
/// states are expanded in chunks, by every thread, and the successors are merged chunk by chunk
/// in the level's order (parent by parent, action by action), the first to reach a state
/// keeping it; the first state of the merge that shows the property ends the search. So the
/// path is the same whatever the number of threads, and it is the first one breadth-first
/// search meets. The search counts the states it generates into the command's budget and asks
/// it after every chunk: a limit reached stops it.
pub(super) fn shortest(model: &HandoffModel, property: &'static str, threads: usize, budget: &Budget) -> Search {
    let Some(found) = model.properties().into_iter().find(|candidate| candidate.name == property) else {
        return Search::Missing;
    };
    let discovered = move |state: &World| match found.expectation {
        Expectation::Sometimes => (found.condition)(model, state),
        Expectation::Always | Expectation::Eventually => !(found.condition)(model, state),
    };
    let mut visited = Fingerprints::default();
    let mut level = Vec::new();
    for state in model.init_states() {
        if discovered(&state) {
            return Search::Found(Vec::new());
        }
        if visited.insert(state.fingerprint()) {
            level.push(state);
        }
    }
    // Per level after the first: each state's parent (its index in the level before) and the
    // action that led to it.
    let mut parents: Vec<Vec<(usize, Action)>> = Vec::new();
    let mut outcome = Search::Missing;
    while !level.is_empty() {
        let Level { next, links, hit, new, cut } = search_level(model, level, &visited, threads, &discovered, budget);
        if let Some(limit) = cut {
            outcome = Search::CutShort(limit);
            level = next;
            break;
        }
        parents.push(links);
        visited.extend(&new);
        if let Some(mut index) = hit {
            let mut path = Vec::new();
            for links in parents.iter().rev() {
                let (parent, action) = &links[index];
                path.push(action.clone());
                index = *parent;
            }
            path.reverse();
            outcome = Search::Found(path);
            level = next;
            break;
        }
        level = next;
    }
    // What the search holds is large: let it go on its own time.
    std::thread::spawn(move || drop((level, visited, parents)));
    outcome
}

/// A successor met while expanding a level.
struct Successor {
    parent: usize,
    action: Action,
    fingerprint: u64,
    state: World,
    discovered: bool,
}

/// A level's states, expanded chunk by chunk (the search stops at the first state that shows the
/// property, or at a limit of the budget).
fn search_level(
    model: &HandoffModel,
    level: Vec<World>,
    visited: &Fingerprints,
    threads: usize,
    discovered: &(impl Fn(&World) -> bool + Sync),
    budget: &Budget,
) -> Level {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    const CHUNK: usize = 256;
    let width = level.len();
    let mut chunks = Vec::new();
    let mut rest = level.into_iter();
    for first in (0..width).step_by(CHUNK) {
        chunks.push(Mutex::new(Some((first, rest.by_ref().take(CHUNK).collect::<Vec<World>>()))));
    }
    let results: Vec<Mutex<Option<Vec<Successor>>>> = (0..chunks.len()).map(|_| Mutex::new(None)).collect();
    let next_chunk = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    // Expands the next chunk nobody has taken; false when none is left, or the budget is spent.
    let expand_one = |actions: &mut Vec<Action>| -> bool {
        if budget.exhausted().is_some() {
            return false;
        }
        let index = next_chunk.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = chunks.get(index) else { return false };
        let Some((first, states)) = slot.lock().expect("a chunk's lock").take() else { return true };
        let mut seen = Fingerprints::default();
        let mut out = Vec::new();
        let mut generated = 0;
        for (offset, state) in states.into_iter().enumerate() {
            actions.clear();
            model.actions(&state, actions);
            for action in actions.drain(..) {
                let Some(next) = model.next_state(&state, action.clone()) else { continue };
                generated += 1;
                let fingerprint = next.fingerprint();
                if visited.contains(fingerprint) || !seen.insert(fingerprint) {
                    continue;
                }
                let discovered = discovered(&next);
                out.push(Successor { parent: first + offset, action, fingerprint, state: next, discovered });
            }
        }
        budget.spend(generated);
        *results[index].lock().expect("a result's lock") = Some(out);
        true
    };
    let mut next = Vec::with_capacity(width + width / 2);
    let mut links = Vec::with_capacity(width + width / 2);
    let mut new = Fingerprints::default();
    let mut hit = None;
    let mut cut = None;
    let mut leftovers = Vec::new();
    std::thread::scope(|scope| {
        for _ in 1..threads.max(1) {
            scope.spawn(|| {
                let mut actions = Vec::new();
                loop {
                    if stop.load(Ordering::Relaxed) || !expand_one(&mut actions) {
                        break;
                    }
                }
            });
        }
        // This thread merges the chunks in order as they are ready, and expands while the next
        // one is not.
        let mut actions = Vec::new();
        let mut merge_at = 0;
        while merge_at < results.len() {
            if let Some(limit) = budget.exhausted() {
                cut = Some(limit);
                stop.store(true, Ordering::Relaxed);
                break;
            }
            let Some(successors) = results[merge_at].lock().expect("a result's lock").take() else {
                if !expand_one(&mut actions) {
                    std::thread::yield_now();
                }
                continue;
            };
            merge_at += 1;
            let mut successors = successors.into_iter();
            for successor in successors.by_ref() {
                if new.insert(successor.fingerprint) {
                    links.push((successor.parent, successor.action));
                    next.push(successor.state);
                    if successor.discovered {
                        hit = Some(next.len() - 1);
                        break;
                    }
                } else {
                    leftovers.push(successor.state);
                }
            }
            if hit.is_some() {
                stop.store(true, Ordering::Relaxed);
                leftovers.extend(successors.map(|successor| successor.state));
                break;
            }
        }
    });
    // Duplicates and what a stop left unmerged: dropped on their own time.
    let unmerged: Vec<_> = results.into_iter().filter_map(|result| result.into_inner().ok().flatten()).collect();
    let untaken: Vec<_> = chunks.into_iter().filter_map(|chunk| chunk.into_inner().ok().flatten()).collect();
    std::thread::spawn(move || drop((leftovers, unmerged, untaken)));
    Level { next, links, hit, new, cut }
}

/// What a level of the search comes to.
struct Level {
    /// The next level's states.
    next: Vec<World>,
    /// Each of them: its parent's index in this level, and the step from it.
    links: Vec<(usize, Action)>,
    /// The first of them that shows the property.
    hit: Option<usize>,
    /// The fingerprints this level met first.
    new: Fingerprints,
    /// The limit that stopped the level before its end.
    cut: Option<Limit>,
}
