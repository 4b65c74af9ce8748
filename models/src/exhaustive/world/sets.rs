//! The world's small sets and maps, kept dense: a state is cloned, hashed and dropped once per
//! successor, and these were `BTreeMap`s and `BTreeSet`s, each an allocation to clone and a tree
//! to walk. Each iterates in the order of its keys (`Node`, then `Timer`), as the trees did, so
//! the world offers its actions in the same order.

use super::NODES;
use crate::core::component::Timer;
use crate::core::ids::Node;
use crate::core::shared::CopyOnWrite;
use crate::exhaustive::world::Wire;

/// How many processes the world has (`NODES`, in `Node`'s order).
pub(super) const SLOTS: usize = NODES.len();

/// A world process's place in `NODES`.
pub(super) fn slot(node: Node) -> usize {
    match node {
        Node::Pg1 => 0,
        Node::Connect => 1,
        Node::Kafka => 2,
        Node::Sink => 3,
        Node::App => 4,
        Node::Operator => 5,
        Node::Loader => 6,
        Node::Consumer => 7,
        other => panic!("{other} is not part of the exhaustive world"),
    }
}

/// Timers per process: a scan batch per client, then the plain ones.
const TIMERS_PER_NODE: usize = SLOTS + Timer::PLAIN.len();

fn timer_index(timer: Timer) -> usize {
    match timer {
        Timer::ScanBatch { client } => slot(client),
        Timer::BgwriterRunningXacts => SLOTS,
        Timer::Checkpoint => SLOTS + 1,
        Timer::ShipWal => SLOTS + 2,
        Timer::PollReturns => SLOTS + 3,
        Timer::OffsetFlush => SLOTS + 4,
        Timer::OffsetFlushTimeout => SLOTS + 5,
        Timer::StopTimeout => SLOTS + 6,
        Timer::TaskRestart => SLOTS + 7,
        Timer::SlotInfoRetry => SLOTS + 8,
        Timer::Heartbeat => SLOTS + 9,
        Timer::SinkCommit => SLOTS + 10,
        Timer::KafkaRetry => SLOTS + 11,
        Timer::Workload => SLOTS + 12,
        Timer::LoaderStart => SLOTS + 13,
        Timer::OperatorRetry => SLOTS + 14,
        Timer::CommitVisible => SLOTS + 15,
        Timer::WalWriter => SLOTS + 16,
        Timer::IdleInTransactionTimeout => SLOTS + 17,
        Timer::ConsumerWork => SLOTS + 18,
    }
}

fn timer_at(index: usize) -> Timer {
    if index < SLOTS { Timer::ScanBatch { client: NODES[index] } } else { Timer::PLAIN[index - SLOTS] }
}

/// The armed timers, as bits ordered by (process, timer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Timers([u64; 4]);

const _: () = assert!(SLOTS * TIMERS_PER_NODE <= 4 * 64);

impl Timers {
    fn bit(node: Node, timer: Timer) -> usize {
        slot(node) * TIMERS_PER_NODE + timer_index(timer)
    }

    pub fn insert(&mut self, node: Node, timer: Timer) {
        let bit = Timers::bit(node, timer);
        self.0[bit / 64] |= 1 << (bit % 64);
    }

    /// Whether it was armed.
    pub fn remove(&mut self, node: Node, timer: Timer) -> bool {
        let bit = Timers::bit(node, timer);
        let was = self.0[bit / 64] & (1 << (bit % 64)) != 0;
        self.0[bit / 64] &= !(1 << (bit % 64));
        was
    }

    pub fn clear_node(&mut self, node: Node) {
        for timer in 0..TIMERS_PER_NODE {
            let bit = slot(node) * TIMERS_PER_NODE + timer;
            self.0[bit / 64] &= !(1 << (bit % 64));
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (Node, Timer)> + '_ {
        bits(&self.0).map(|bit| (NODES[bit / TIMERS_PER_NODE], timer_at(bit % TIMERS_PER_NODE)))
    }
}

/// The set bits of words, lowest first.
fn bits(words: &[u64]) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(|(index, word)| bits_of(*word).map(move |bit| index * 64 + bit))
}

/// The set bits of a word, lowest first.
fn bits_of(word: u64) -> impl Iterator<Item = usize> {
    let mut rest = word;
    std::iter::from_fn(move || {
        if rest == 0 {
            return None;
        }
        let bit = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        Some(bit)
    })
}

/// A set of world processes, as bits in `NODES`' order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Nodes(u8);

impl Nodes {
    pub fn contains(&self, node: Node) -> bool {
        self.0 & (1 << slot(node)) != 0
    }

    pub fn insert(&mut self, node: Node) {
        self.0 |= 1 << slot(node);
    }

    /// Whether it was in the set.
    pub fn remove(&mut self, node: Node) -> bool {
        let was = self.contains(node);
        self.0 &= !(1 << slot(node));
        was
    }

    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = Node> + '_ {
        bits_of(u64::from(self.0)).map(|bit| NODES[bit])
    }
}

/// Pairs of processes that have talked, as bits over (lower, higher) in `NODES`' order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Pairs(u64);

const _: () = assert!(SLOTS * SLOTS <= 64);

impl Pairs {
    fn bit(a: Node, b: Node) -> usize {
        let (low, high) = (slot(a).min(slot(b)), slot(a).max(slot(b)));
        low * SLOTS + high
    }

    pub fn insert(&mut self, a: Node, b: Node) {
        self.0 |= 1 << Pairs::bit(a, b);
    }

    pub fn remove(&mut self, a: Node, b: Node) {
        self.0 &= !(1 << Pairs::bit(a, b));
    }

    /// The processes `node` has talked to, in `NODES`' order.
    pub fn peers(&self, node: Node) -> Vec<Node> {
        NODES.into_iter().filter(|peer| *peer != node && self.0 & (1 << Pairs::bit(node, *peer)) != 0).collect()
    }
}

/// A set of small numbers (scripted transactions by index, operations), as bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Indices(u64);

impl Indices {
    /// The most a set holds.
    pub const CAPACITY: usize = 64;

    pub fn upto(count: usize) -> Indices {
        assert!(count <= Indices::CAPACITY, "at most {} scripted transactions in a bound", Indices::CAPACITY);
        Indices(if count == 64 { u64::MAX } else { (1u64 << count) - 1 })
    }

    pub fn insert(&mut self, index: usize) {
        self.0 |= 1 << index;
    }

    pub fn remove(&mut self, index: usize) -> bool {
        let was = index < Indices::CAPACITY && self.0 & (1 << index) != 0;
        if was {
            self.0 &= !(1 << index);
        }
        was
    }

    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        bits_of(self.0)
    }
}

/// How many times each periodic timer has fired, per process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Fired([[u8; PERIODIC.len()]; SLOTS]);

impl std::hash::Hash for Fired {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write(self.0.as_flattened());
    }
}

/// The timers a bound counts (see `is_periodic`).
pub(super) const PERIODIC: [Timer; 8] = [
    Timer::BgwriterRunningXacts,
    Timer::Checkpoint,
    Timer::OffsetFlush,
    Timer::TaskRestart,
    Timer::SlotInfoRetry,
    Timer::Heartbeat,
    Timer::KafkaRetry,
    Timer::OperatorRetry,
];

impl Fired {
    fn cell(&mut self, node: Node, timer: Timer) -> Option<&mut u8> {
        let kind = PERIODIC.iter().position(|periodic| *periodic == timer)?;
        Some(&mut self.0[slot(node)][kind])
    }

    pub fn get(&self, node: Node, timer: Timer) -> u8 {
        PERIODIC.iter().position(|periodic| *periodic == timer).map_or(0, |kind| self.0[slot(node)][kind])
    }

    pub fn count(&mut self, node: Node, timer: Timer) {
        if let Some(cell) = self.cell(node, timer) {
            *cell = cell.saturating_add(1);
        }
    }
}

/// What is on its way, per link `from → to`: every message in flight in one short list, by
/// link and, within a link, oldest first. Few messages are in flight at once, so a step that
/// pops or pushes changes this world's own list in place (a world's clone copies the list's
/// pointers, not its messages), and each message is shared and hashed once.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Links {
    /// The messages, each with its link (`from * SLOTS + to`).
    items: Vec<(u8, CopyOnWrite<Wire>)>,
}

impl Clone for Links {
    /// A copy with room for two more messages: a successor state usually sends one.
    fn clone(&self) -> Links {
        let mut items = Vec::with_capacity(self.items.len() + 2);
        items.extend_from_slice(&self.items);
        Links { items }
    }
}

impl std::hash::Hash for Links {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_usize(self.items.len());
        for (link, wire) in &self.items {
            state.write_u8(*link);
            wire.hash(state);
        }
    }
}

impl Links {
    /// Gives the messages in flight copies of their own (see [`CopyOnWrite::rehome`]).
    pub fn rehome(&mut self, copies: &mut crate::core::shared::Copies<Wire>) {
        for (_, wire) in &mut self.items {
            wire.rehome(copies);
        }
    }

    fn link(from: Node, to: Node) -> u8 {
        (slot(from) * SLOTS + slot(to)) as u8
    }

    pub fn push(&mut self, from: Node, to: Node, wire: Wire) {
        let link = Links::link(from, to);
        let at = self.items.partition_point(|(other, _)| *other <= link);
        self.items.insert(at, (link, CopyOnWrite::new(wire)));
    }

    /// The oldest item on a link.
    pub fn pop(&mut self, from: Node, to: Node) -> Option<Wire> {
        let link = Links::link(from, to);
        let at = self.items.partition_point(|(other, _)| *other < link);
        if self.items.get(at).is_none_or(|(other, _)| *other != link) {
            return None;
        }
        Some(self.items.remove(at).1.into_inner())
    }

    /// Drops what is on its way to `to`.
    pub fn clear_to(&mut self, to: Node) {
        let to = slot(to);
        self.items.retain(|(link, _)| usize::from(*link) % SLOTS != to);
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The links with something on them, in (from, to) order, with how many items each carries.
    pub fn iter(&self) -> impl Iterator<Item = (Node, Node, usize)> + '_ {
        let mut rest = &self.items[..];
        std::iter::from_fn(move || {
            let (link, _) = rest.first()?;
            let count = rest.partition_point(|(other, _)| other == link);
            rest = &rest[count..];
            let link = usize::from(*link);
            Some((NODES[link / SLOTS], NODES[link % SLOTS], count))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_iterate_in_the_order_of_node_then_timer() {
        let mut all = Vec::new();
        for node in NODES {
            for client in NODES {
                all.push((node, Timer::ScanBatch { client }));
            }
            for timer in Timer::PLAIN {
                all.push((node, timer));
            }
        }
        let mut timers = Timers::default();
        for (node, timer) in all.iter().rev() {
            timers.insert(*node, *timer);
        }
        let listed: Vec<_> = timers.iter().collect();
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(listed, sorted);
        assert_eq!(listed.len(), SLOTS * TIMERS_PER_NODE);
        assert!(timers.remove(Node::Connect, Timer::OffsetFlush));
        assert!(!timers.remove(Node::Connect, Timer::OffsetFlush));
        timers.clear_node(Node::Kafka);
        assert!(timers.iter().all(|(node, _)| node != Node::Kafka));
        assert_eq!(timers.iter().count(), SLOTS * TIMERS_PER_NODE - 1 - TIMERS_PER_NODE);
    }

    #[test]
    fn sets_keep_node_order_and_pairs_are_unordered() {
        let mut down = Nodes::default();
        down.insert(Node::Loader);
        down.insert(Node::Pg1);
        down.insert(Node::Kafka);
        assert_eq!(down.iter().collect::<Vec<_>>(), vec![Node::Pg1, Node::Kafka, Node::Loader]);
        assert!(down.remove(Node::Kafka) && !down.remove(Node::Kafka));
        let mut pairs = Pairs::default();
        pairs.insert(Node::Sink, Node::Kafka);
        pairs.insert(Node::Connect, Node::Sink);
        assert_eq!(pairs.peers(Node::Sink), vec![Node::Connect, Node::Kafka]);
        pairs.remove(Node::Kafka, Node::Sink);
        assert_eq!(pairs.peers(Node::Sink), vec![Node::Connect]);
        let mut scripts = Indices::upto(3);
        assert!(scripts.remove(1) && !scripts.remove(1) && !scripts.remove(64));
        assert_eq!(scripts.iter().collect::<Vec<_>>(), vec![0, 2]);
    }

    #[test]
    fn links_empty_themselves_and_list_in_order() {
        let mut links = Links::default();
        links.push(Node::Kafka, Node::Sink, Wire::Lost);
        links.push(Node::Connect, Node::Kafka, Wire::Lost);
        links.push(Node::Connect, Node::Kafka, Wire::Lost);
        let listed: Vec<_> = links.iter().collect();
        assert_eq!(listed, vec![(Node::Connect, Node::Kafka, 2), (Node::Kafka, Node::Sink, 1)]);
        assert_eq!(links.pop(Node::Kafka, Node::Sink), Some(Wire::Lost));
        assert_eq!(links.pop(Node::Kafka, Node::Sink), None);
        links.clear_to(Node::Kafka);
        assert!(links.is_empty());
    }

    #[test]
    fn periodic_timers_are_counted_per_process() {
        let mut fired = Fired::default();
        fired.count(Node::Connect, Timer::OffsetFlush);
        fired.count(Node::Connect, Timer::OffsetFlush);
        fired.count(Node::Connect, Timer::PollReturns);
        assert_eq!(fired.get(Node::Connect, Timer::OffsetFlush), 2);
        assert_eq!(fired.get(Node::Kafka, Timer::OffsetFlush), 0);
        assert_eq!(fired.get(Node::Connect, Timer::PollReturns), 0);
    }
}
