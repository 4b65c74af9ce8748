//! The world's small sets and maps, kept dense: a state is cloned, hashed and dropped once per
//! successor, and these were `BTreeMap`s and `BTreeSet`s, each an allocation to clone and a tree
//! to walk. Each iterates in the order of its keys (`Node`, then `Timer`), as the trees did, so
//! the world offers its actions in the same order.

use super::NODES;
use crate::core::component::{TaskTimer, Timer};
use crate::core::ids::Node;
use crate::core::limits::MAX_CONNECTORS;
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
        Node::Connect2 => 8,
        other => panic!("{other} is not part of the exhaustive world"),
    }
}

/// The world's Connect workers (a group of two at most).
pub(super) const WORKERS: [Node; 2] = [Node::Connect, Node::Connect2];

/// A world worker's place in `WORKERS`.
fn worker(node: Node) -> usize {
    match node {
        Node::Connect => 0,
        Node::Connect2 => 1,
        other => panic!("{other} is not a Connect worker of the exhaustive world"),
    }
}

/// The timers every process has a place for after its scan batches: the plain ones, with the
/// first connector's task timers and the group's timers where `Timer`'s order puts them (so a
/// world with one connector and one worker offers its actions in the order it always did).
const PER_NODE: [Timer; 28] = [
    Timer::BgwriterRunningXacts,
    Timer::Checkpoint,
    Timer::ShipWal,
    Timer::first_task(TaskTimer::PollReturns),
    Timer::first_task(TaskTimer::OffsetFlush),
    Timer::first_task(TaskTimer::OffsetFlushTimeout),
    Timer::first_task(TaskTimer::StopTimeout),
    Timer::first_task(TaskTimer::TaskRestart),
    Timer::first_task(TaskTimer::SlotInfoRetry),
    Timer::first_task(TaskTimer::Heartbeat),
    Timer::first_task(TaskTimer::SignalPoll),
    Timer::first_task(TaskTimer::StreamIdle),
    Timer::SinkCommit,
    Timer::KafkaRetry,
    Timer::Workload,
    Timer::LoaderStart,
    Timer::OperatorRetry,
    Timer::CommitVisible,
    Timer::WalWriter,
    Timer::IdleInTransactionTimeout,
    Timer::ConsumerWork,
    Timer::TransactionAbortSweep,
    Timer::LogCleaner,
    Timer::GroupCoordinator,
    Timer::GroupSession { member: Node::Connect },
    Timer::GroupSession { member: Node::Connect2 },
    Timer::GroupHeartbeat,
    Timer::GroupRejoin,
];

const _: () = assert!(PER_NODE.len() == Timer::PLAIN.len() + TaskTimer::ALL.len() + WORKERS.len());

/// Timers per process: a scan batch per client, then `PER_NODE`.
const TIMERS_PER_NODE: usize = SLOTS + PER_NODE.len();

/// The task timers of the connectors after the first, only the Connect workers': after every
/// process's others, per worker one set of [`TaskTimer::ALL`] per connector.
const TASK_TIMERS_AT: usize = SLOTS * TIMERS_PER_NODE;
const TASK_TIMERS_PER_WORKER: usize = (MAX_CONNECTORS - 1) * TaskTimer::ALL.len();
const TASK_TIMERS: usize = WORKERS.len() * TASK_TIMERS_PER_WORKER;

/// Where the plain timers after the first connector's task timers begin (`PER_NODE`'s order).
const AFTER_TASK_TIMERS: usize = SLOTS + 3 + TaskTimer::ALL.len();

fn timer_index(timer: Timer) -> usize {
    match timer {
        Timer::ScanBatch { client } => slot(client),
        Timer::BgwriterRunningXacts => SLOTS,
        Timer::Checkpoint => SLOTS + 1,
        Timer::ShipWal => SLOTS + 2,
        Timer::Task { connector: 0, timer } => SLOTS + 3 + timer.index(),
        Timer::SinkCommit => AFTER_TASK_TIMERS,
        Timer::KafkaRetry => AFTER_TASK_TIMERS + 1,
        Timer::Workload => AFTER_TASK_TIMERS + 2,
        Timer::LoaderStart => AFTER_TASK_TIMERS + 3,
        Timer::OperatorRetry => AFTER_TASK_TIMERS + 4,
        Timer::CommitVisible => AFTER_TASK_TIMERS + 5,
        Timer::WalWriter => AFTER_TASK_TIMERS + 6,
        Timer::IdleInTransactionTimeout => AFTER_TASK_TIMERS + 7,
        Timer::ConsumerWork => AFTER_TASK_TIMERS + 8,
        Timer::TransactionAbortSweep => AFTER_TASK_TIMERS + 9,
        Timer::LogCleaner => AFTER_TASK_TIMERS + 10,
        Timer::GroupCoordinator => AFTER_TASK_TIMERS + 11,
        Timer::GroupSession { member } => AFTER_TASK_TIMERS + 12 + worker(member),
        Timer::GroupHeartbeat => AFTER_TASK_TIMERS + 14,
        Timer::GroupRejoin => AFTER_TASK_TIMERS + 15,
        Timer::Task { .. } => unreachable!("another connector's task timer has a place of its own"),
    }
}

fn timer_at(index: usize) -> Timer {
    if index < SLOTS { Timer::ScanBatch { client: NODES[index] } } else { PER_NODE[index - SLOTS] }
}

/// How many words the armed timers take.
const TIMER_WORDS: usize = (TASK_TIMERS_AT + TASK_TIMERS).div_ceil(64);

/// The armed timers, as bits ordered by (process, timer), then the workers' other connectors'
/// task timers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Timers([u64; TIMER_WORDS]);

impl Timers {
    fn bit(node: Node, timer: Timer) -> usize {
        match timer {
            Timer::Task { connector, timer } if connector > 0 => {
                TASK_TIMERS_AT
                    + worker(node) * TASK_TIMERS_PER_WORKER
                    + usize::from(connector - 1) * TaskTimer::ALL.len()
                    + timer.index()
            }
            _ => slot(node) * TIMERS_PER_NODE + timer_index(timer),
        }
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
        let own = (0..TIMERS_PER_NODE).map(|timer| slot(node) * TIMERS_PER_NODE + timer);
        let tasks = WORKERS
            .contains(&node)
            .then(|| {
                let at = TASK_TIMERS_AT + worker(node) * TASK_TIMERS_PER_WORKER;
                at..at + TASK_TIMERS_PER_WORKER
            })
            .into_iter()
            .flatten();
        for bit in own.chain(tasks) {
            self.0[bit / 64] &= !(1 << (bit % 64));
        }
    }

    /// In (process, timer) order; the workers' other task timers come after every process's
    /// others (an order of its own, kept from one state to the next).
    pub fn iter(&self) -> impl Iterator<Item = (Node, Timer)> + '_ {
        bits(&self.0).map(|bit| {
            if bit >= TASK_TIMERS_AT {
                let index = bit - TASK_TIMERS_AT;
                let node = WORKERS[index / TASK_TIMERS_PER_WORKER];
                let index = index % TASK_TIMERS_PER_WORKER;
                let connector = (index / TaskTimer::ALL.len()) as u8 + 1;
                (node, Timer::Task { connector, timer: TaskTimer::ALL[index % TaskTimer::ALL.len()] })
            } else {
                (NODES[bit / TIMERS_PER_NODE], timer_at(bit % TIMERS_PER_NODE))
            }
        })
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
pub(super) struct Nodes(u16);

const _: () = assert!(SLOTS <= 16);

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
pub(super) struct Pairs(u128);

const _: () = assert!(SLOTS * SLOTS <= 128);

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

/// How many times each periodic timer has fired, per process (and per connector for the
/// Connect worker's task timers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Fired {
    plain: [[u8; PERIODIC.len()]; SLOTS],
    /// Per worker, per connector.
    tasks: [[[u8; PERIODIC_TASK.len()]; MAX_CONNECTORS]; WORKERS.len()],
}

impl std::hash::Hash for Fired {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write(self.plain.as_flattened());
        state.write(self.tasks.as_flattened().as_flattened());
    }
}

/// The timers a bound counts (see `is_periodic`), but the tasks'.
pub(super) const PERIODIC: [Timer; 5] =
    [Timer::BgwriterRunningXacts, Timer::Checkpoint, Timer::KafkaRetry, Timer::OperatorRetry, Timer::LogCleaner];

/// The task timers a bound counts, per connector.
pub(super) const PERIODIC_TASK: [TaskTimer; 4] =
    [TaskTimer::OffsetFlush, TaskTimer::TaskRestart, TaskTimer::SlotInfoRetry, TaskTimer::Heartbeat];

impl Fired {
    fn cell(&mut self, node: Node, timer: Timer) -> Option<&mut u8> {
        match timer {
            Timer::Task { connector, timer } => {
                let kind = PERIODIC_TASK.iter().position(|periodic| *periodic == timer)?;
                Some(&mut self.tasks[worker(node)][usize::from(connector)][kind])
            }
            _ => {
                let kind = PERIODIC.iter().position(|periodic| *periodic == timer)?;
                Some(&mut self.plain[slot(node)][kind])
            }
        }
    }

    pub fn get(&self, node: Node, timer: Timer) -> u8 {
        let mut copy = *self;
        copy.cell(node, timer).map_or(0, |cell| *cell)
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

    /// Whether something is on its way from `from` to `to`.
    pub fn carries(&self, from: Node, to: Node) -> bool {
        let link = Links::link(from, to);
        let at = self.items.partition_point(|(other, _)| *other < link);
        self.items.get(at).is_some_and(|(other, _)| *other == link)
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
            for timer in PER_NODE {
                all.push((node, timer));
            }
        }
        let mut sorted = all.clone();
        sorted.sort();
        // The other connectors' task timers come last, by worker, connector, then kind.
        for worker in WORKERS {
            for connector in 1..MAX_CONNECTORS as u8 {
                for timer in TaskTimer::ALL {
                    all.push((worker, Timer::Task { connector, timer }));
                    sorted.push((worker, Timer::Task { connector, timer }));
                }
            }
        }
        let mut timers = Timers::default();
        for (node, timer) in all.iter().rev() {
            timers.insert(*node, *timer);
        }
        let listed: Vec<_> = timers.iter().collect();
        assert_eq!(listed, sorted);
        assert_eq!(listed.len(), SLOTS * TIMERS_PER_NODE + TASK_TIMERS);
        assert!(timers.remove(Node::Connect, Timer::task(1, TaskTimer::OffsetFlush)));
        assert!(!timers.remove(Node::Connect, Timer::task(1, TaskTimer::OffsetFlush)));
        assert!(timers.remove(Node::Connect, Timer::first_task(TaskTimer::OffsetFlush)));
        timers.clear_node(Node::Kafka);
        assert!(timers.iter().all(|(node, _)| node != Node::Kafka));
        assert_eq!(timers.iter().count(), SLOTS * TIMERS_PER_NODE + TASK_TIMERS - 2 - TIMERS_PER_NODE);
        // A Connect worker's crash clears its task timers too.
        timers.clear_node(Node::Connect);
        assert!(timers.iter().all(|(node, _)| node != Node::Connect));
        assert!(timers.remove(Node::Connect2, Timer::task(3, TaskTimer::Heartbeat)));
        assert!(timers.remove(Node::Connect2, Timer::GroupSession { member: Node::Connect }));
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
    fn periodic_timers_are_counted_per_process_and_per_connector() {
        let mut fired = Fired::default();
        fired.count(Node::Connect, Timer::first_task(TaskTimer::OffsetFlush));
        fired.count(Node::Connect, Timer::first_task(TaskTimer::OffsetFlush));
        fired.count(Node::Connect, Timer::first_task(TaskTimer::PollReturns));
        fired.count(Node::Connect, Timer::task(1, TaskTimer::OffsetFlush));
        fired.count(Node::Connect2, Timer::task(1, TaskTimer::OffsetFlush));
        fired.count(Node::Connect2, Timer::task(1, TaskTimer::OffsetFlush));
        fired.count(Node::Connect2, Timer::KafkaRetry);
        fired.count(Node::Connect, Timer::KafkaRetry);
        assert_eq!(fired.get(Node::Connect, Timer::first_task(TaskTimer::OffsetFlush)), 2);
        assert_eq!(fired.get(Node::Connect, Timer::task(1, TaskTimer::OffsetFlush)), 1);
        assert_eq!(fired.get(Node::Connect2, Timer::task(1, TaskTimer::OffsetFlush)), 2);
        assert_eq!(fired.get(Node::Connect2, Timer::KafkaRetry), 1);
        assert_eq!(fired.get(Node::Connect, Timer::task(2, TaskTimer::OffsetFlush)), 0);
        assert_eq!(fired.get(Node::Connect, Timer::first_task(TaskTimer::PollReturns)), 0);
        assert_eq!(fired.get(Node::Connect, Timer::KafkaRetry), 1);
        assert_eq!(fired.get(Node::Kafka, Timer::KafkaRetry), 0);
    }
}
