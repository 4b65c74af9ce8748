//! The simulated network of one run: connections between processes, each message delayed by a
//! latency drawn from the run's seed, FIFO per direction, closed when a process dies.
//!
//! What it models is what the processes of a CDC pipeline use: TCP connections (the replication
//! protocol, the Kafka protocol, REST). A client opens a connection to a server the first time it
//! sends to it; a server that is down refuses it. Every message takes 1–10 ms (uniform, drawn in
//! microseconds from the run's seed, stream [`stream::NETWORK`]), and never overtakes an earlier
//! message in the same direction. When a process dies, what it had already sent still arrives,
//! then its peers hear that the connection is lost; what was on its way to it is gone, and a peer
//! that sends on the dead connection hears at once that it is lost. A clog holds every message
//! between two processes, both ways, until it heals; then they leave in order, each with a fresh
//! latency (TCP's retransmission back-off is not modelled).
//!
//! Delivery is a timed queue per process, read by the process's loop ([`crate::timed::node`]) under
//! madsim's clock. A process sleeps until its earliest arrival or timer; a send that brings an
//! earlier arrival sets a madsim timer that wakes the process when the message arrives (not when
//! it is sent), so a message costs one wake-up. Like every madsim sleep, a wake-up comes at least
//! 1 ms after it is asked for. (The first version of the timed
//! lens used madsim's own connections; they cost a relay task, a timer and a dozen hash lookups
//! per message, about a quarter of a run. docs/performance.md has the numbers.)
//!
//! [`stream::NETWORK`]: handoff_models::scenario::workload::stream::NETWORK

use handoff_models::core::component::Timer;
use handoff_models::core::ids::Node;
use handoff_models::core::protocol::Msg;
use handoff_models::exhaustive::world::Timing;
use handoff_models::scenario::workload::{Draw, stream};
use madsim::time::TimeHandle;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Waker};
use std::time::Duration;

/// The least and the most a message takes, in microseconds (madsim's default `send_latency`).
pub const LATENCY_MIN_US: u64 = 1_000;
pub const LATENCY_MAX_US: u64 = 9_999;

/// What reaches a process's loop.
#[derive(Debug)]
pub enum Inbound {
    /// A message on connection `connection`.
    Msg { from: Node, connection: u64, msg: Msg },
    /// The connection to `peer` is gone (the peer died, or refused to connect).
    Lost { peer: Node, connection: u64 },
    /// A client opened a connection to this process.
    Accepted { peer: Node, connection: u64 },
    /// From the harness: delivered at once, as if sent by `from`.
    Inject { from: Node, msg: Msg },
}

/// A process's arrivals.
#[derive(Default)]
struct Queue {
    /// By arrival time (microseconds), then by when they were sent; mostly appended at the end.
    arrivals: VecDeque<(u64, u64, Inbound)>,
    /// The process's loop, to wake when something is due.
    waker: Option<Waker>,
    /// When madsim timers set for the loop fire (microseconds), earliest first.
    armed_us: BTreeSet<u64>,
}

impl Queue {
    fn insert(&mut self, at_us: u64, sequence: u64, inbound: Inbound) {
        let position = self
            .arrivals
            .iter()
            .rposition(|(other_us, other, _)| (*other_us, *other) < (at_us, sequence))
            .map_or(0, |index| index + 1);
        self.arrivals.insert(position, (at_us, sequence, inbound));
    }

    /// When the loop is next woken by a timer already set, forgetting those that have fired.
    fn next_wake(&mut self, now_us: u64) -> Option<u64> {
        while let Some(first) = self.armed_us.first().copied() {
            if first > now_us {
                return Some(first);
            }
            self.armed_us.pop_first();
        }
        None
    }

    /// Sets a madsim timer that wakes the loop at `at_us` (unless one is set for then, or the
    /// loop has not looked at its queue yet: it will, and arm its own).
    fn arm(&mut self, clock: &TimeHandle, now_us: u64, at_us: u64) {
        let Some(waker) = &self.waker else { return };
        // madsim wakes no sooner than 1 ms after it is asked.
        let fires_us = at_us.max(now_us + 1_000);
        if self.armed_us.insert(fires_us) {
            arm(clock, waker, now_us, fires_us);
        }
    }
}

/// One direction between two processes.
#[derive(Default)]
struct Direction {
    /// When the last message sent this way arrives: a later one never arrives before it.
    last_arrival_us: u64,
    /// What waits for a clog to heal, in order.
    held: VecDeque<(Node, Inbound)>,
}

struct Connection {
    client: Node,
    server: Node,
}

/// A send on a connection that is closed.
#[derive(Debug, PartialEq, Eq)]
pub struct Closed;

/// What a process's loop finds when it looks at its queue.
pub enum Polled {
    /// The process is down: its loop ends.
    Closed,
    /// The next arrival, due now.
    Ready(Inbound),
    /// No arrival is due, but a timer is.
    TimerDue,
    /// Nothing is due; the loop is woken when something is.
    Pending,
}

/// Items sent one way so far, and the path's step delivering each (`None`: never delivered).
type Sent = (usize, Vec<Option<usize>>);

/// A path the network follows: a scenario's `[schedule]`, step `k` at `(k + 1) × step_ms`.
///
/// The exhaustive world's links are FIFO queues, and [`Timing`] says at which step each item
/// on a link is delivered; here the n-th message (or lost-connection notice) sent from one
/// process to a client arrives at the time of the step that delivers it in the path, and what
/// the path never delivers arrives after the schedule has ended. A request to a server
/// (PostgreSQL, Kafka) is taken at once, as the world takes it. A timer fires at the time of
/// the step that fires it, and not before the schedule has ended otherwise. Anything the run
/// does that the path did not (a message the path never sent, a step whose message was sent
/// too late, a timer that did not fire when the path fired it) is a departure: the report says
/// the run did not follow its schedule.
pub struct Following {
    step_us: u64,
    end_us: u64,
    /// Per direction: how many items were sent, and the step delivering each.
    deliveries: BTreeMap<(Node, Node), Sent>,
    /// Per timer: the steps that fire it, the next first.
    firings: BTreeMap<(Node, Timer), VecDeque<usize>>,
    departures: Vec<String>,
}

impl Following {
    pub fn new(timing: &Timing, step_ms: u64, steps: usize) -> Following {
        Following {
            step_us: step_ms * 1_000,
            end_us: (steps as u64 + 1) * step_ms * 1_000,
            deliveries: timing.deliveries.iter().map(|(link, items)| (*link, (0, items.clone()))).collect(),
            firings: timing.firings.iter().map(|(timer, steps)| (*timer, steps.iter().copied().collect())).collect(),
            departures: Vec::new(),
        }
    }

    /// When step `step` is taken (microseconds).
    pub fn step_us(&self, step: usize) -> u64 {
        (step as u64 + 1) * self.step_us
    }

    /// When an item sent now from `from` to `to` arrives, if the path decides it.
    fn arrival_us(&mut self, from: Node, to: Node, now_us: u64, latency_us: u64) -> Option<u64> {
        if now_us >= self.end_us {
            return None;
        }
        if to.is_server() {
            return Some(now_us + 1);
        }
        let after_end = self.end_us + latency_us;
        let step_us = self.step_us;
        let (sent, items) = self.deliveries.entry((from, to)).or_default();
        let index = *sent;
        *sent += 1;
        match items.get(index) {
            Some(Some(step)) => {
                let at_us = (*step as u64 + 1) * step_us;
                if at_us <= now_us {
                    let step = *step;
                    self.departures.push(format!(
                        "step {step} delivers message {} from {from} to {to}, which was sent only at {} ms",
                        index + 1,
                        now_us / 1_000
                    ));
                    return Some(now_us + latency_us);
                }
                Some(at_us)
            }
            // Dropped with its receiver, or still in flight when the path ends.
            Some(None) => Some(after_end),
            None => {
                self.departures.push(format!(
                    "{from} sent {to} message {} at {} ms; the path has {} on that link",
                    index + 1,
                    now_us / 1_000,
                    items.len()
                ));
                Some(after_end)
            }
        }
    }

    /// What the run did not do that the path did.
    pub fn departures(&self) -> Vec<String> {
        let mut departures = self.departures.clone();
        for ((from, to), (sent, items)) in &self.deliveries {
            if let Some((index, Some(step))) = items.iter().enumerate().skip(*sent).find(|(_, step)| step.is_some()) {
                departures.push(format!(
                    "step {step} delivers message {} from {from} to {to}, which was never sent",
                    index + 1
                ));
            }
        }
        for ((node, timer), steps) in &self.firings {
            if let Some(step) = steps.front() {
                departures.push(format!("step {step} fires {node}'s timer {}, which did not fire then", timer.name()));
            }
        }
        departures
    }
}

/// The network of one run.
pub struct Net {
    /// madsim's clock; without it (unit tests) a process is woken at once by every arrival.
    clock: Option<TimeHandle>,
    draw: Draw,
    /// Orders arrivals at the same microsecond by when they were sent.
    sequence: u64,
    next_connection: u64,
    /// Processes that are up, by node (a process that is down has no queue: connecting to it is
    /// refused).
    queues: [Option<Queue>; NODES],
    /// Open connections.
    connections: BTreeMap<u64, Connection>,
    /// By sending node, then receiving node.
    directions: [[Direction; NODES]; NODES],
    clogged: [[bool; NODES]; NODES],
    /// The path the run follows, if it has a `[schedule]`.
    following: Option<Following>,
}

/// How many nodes there are (`Node` as an index).
const NODES: usize = 12;
const _: () = assert!(Node::Connect3 as usize + 1 == NODES, "NODES counts every Node");

fn index(node: Node) -> usize {
    node as usize
}

impl Net {
    /// The network of a run under madsim's clock.
    pub fn new(seed: u64, clock: TimeHandle) -> Net {
        Net { clock: Some(clock), ..Net::unclocked(seed) }
    }

    /// A network without a clock: for reading queues by hand.
    pub fn unclocked(seed: u64) -> Net {
        Net {
            clock: None,
            draw: Draw::new(seed, stream::NETWORK),
            sequence: 0,
            next_connection: 0,
            queues: Default::default(),
            connections: BTreeMap::new(),
            directions: Default::default(),
            clogged: [[false; NODES]; NODES],
            following: None,
        }
    }

    /// The run follows a path.
    pub fn follow(&mut self, following: Following) {
        self.following = Some(following);
    }

    pub fn following(&self) -> Option<&Following> {
        self.following.as_ref()
    }

    /// When a timer armed now for `natural_us` fires: at the next step of the path that fires
    /// it, else not before the path has ended.
    pub fn timer_at(&mut self, node: Node, timer: Timer, natural_us: u64, now_us: u64) -> u64 {
        let Some(following) = self.following.as_mut() else { return natural_us };
        if now_us >= following.end_us {
            return natural_us;
        }
        match following.firings.get(&(node, timer)).and_then(VecDeque::front) {
            Some(step) => following.step_us(*step),
            None => natural_us.max(following.end_us),
        }
    }

    /// A timer fires at `now_us`: the path's firing it stands for is done.
    pub fn timer_fired(&mut self, node: Node, timer: Timer, now_us: u64) {
        let Some(following) = self.following.as_mut() else { return };
        if now_us >= following.end_us + following.step_us {
            return;
        }
        // madsim may wake a loop a few microseconds after a deadline.
        let due = following.firings.get(&(node, timer)).and_then(VecDeque::front).map(|step| following.step_us(*step));
        if due.is_some_and(|due| due <= now_us)
            && let Some(steps) = following.firings.get_mut(&(node, timer))
        {
            steps.pop_front();
        }
    }

    /// A process is up and listening.
    pub fn bind(&mut self, node: Node) {
        self.queues[index(node)] = Some(Queue::default());
    }

    /// A process died at `now_us`: what was on its way to it is gone, its peers hear that their
    /// connections to it are lost once what it sent has arrived.
    pub fn unbind(&mut self, node: Node, now_us: u64) {
        // What was on its way to it goes with its queue.
        if let Some(waker) = self.queues[index(node)].take().and_then(|queue| queue.waker) {
            waker.wake();
        }
        let closed: Vec<(u64, Node)> = self
            .connections
            .iter()
            .filter_map(|(id, c)| {
                if c.client == node {
                    Some((*id, c.server))
                } else if c.server == node {
                    Some((*id, c.client))
                } else {
                    None
                }
            })
            .collect();
        for (connection, peer) in closed {
            self.connections.remove(&connection);
            if self.queues[index(peer)].is_some() {
                self.transmit(node, peer, Inbound::Lost { peer: node, connection }, now_us, 0);
            }
        }
    }

    /// Ends every process's loop (the run is over).
    pub fn close_all(&mut self) {
        for queue in self.queues.iter_mut().filter_map(Option::take) {
            if let Some(waker) = queue.waker {
                waker.wake();
            }
        }
        self.connections.clear();
    }

    /// `client` opens a connection to `server`; `None` when `server` is down (refused).
    pub fn connect(&mut self, client: Node, server: Node, now_us: u64) -> Option<u64> {
        self.queues[index(server)].as_ref()?;
        self.next_connection += 1;
        let connection = self.next_connection;
        self.connections.insert(connection, Connection { client, server });
        // Opening takes no time of its own here, but a clog holds it like any message.
        self.transmit(client, server, Inbound::Accepted { peer: client, connection }, now_us, 0);
        Some(connection)
    }

    /// Sends on an open connection; `Err` when the connection is closed (the peer died).
    pub fn send(&mut self, from: Node, to: Node, connection: u64, msg: Msg, now_us: u64) -> Result<(), Closed> {
        if !self.connections.contains_key(&connection) {
            return Err(Closed);
        }
        let latency_us = self.draw.between(LATENCY_MIN_US, LATENCY_MAX_US);
        self.transmit(from, to, Inbound::Msg { from, connection, msg }, now_us, latency_us);
        Ok(())
    }

    /// The harness hands a message to a process; returns it when the process is down (boxed:
    /// the rare path carries the large message).
    pub fn inject(&mut self, node: Node, from: Node, msg: Msg, now_us: u64) -> Result<(), Box<Msg>> {
        if self.queues[index(node)].is_none() {
            return Err(Box::new(msg));
        }
        self.arrive(node, now_us, now_us, Inbound::Inject { from, msg });
        Ok(())
    }

    /// A process learns at once that a connection it tried to use is lost.
    /// (On a path, the notice is the next item from `peer` to `node`, as in the world, where a
    /// refused connection puts a lost-connection notice on the link from the server.)
    pub fn lost_now(&mut self, node: Node, peer: Node, connection: u64, now_us: u64) {
        let at_us =
            self.following.as_mut().and_then(|following| following.arrival_us(peer, node, now_us, 0)).unwrap_or(now_us);
        self.arrive(node, now_us, at_us, Inbound::Lost { peer, connection });
    }

    /// A new connection number, for a connection refused before it was ever open.
    pub fn refused_connection(&mut self) -> u64 {
        self.next_connection += 1;
        self.next_connection
    }

    /// When the next arrival of a process is due (microseconds).
    pub fn next_arrival(&self, node: Node) -> Option<u64> {
        self.queues[index(node)].as_ref()?.arrivals.front().map(|(at_us, _, _)| *at_us)
    }

    /// Clogs the network between two processes, both ways.
    pub fn clog(&mut self, a: Node, b: Node) {
        self.clogged[index(a)][index(b)] = true;
        self.clogged[index(b)][index(a)] = true;
    }

    /// Heals a clog: what it held leaves now, in order, each with a fresh latency.
    pub fn unclog(&mut self, a: Node, b: Node, now_us: u64) {
        for (from, to) in [(a, b), (b, a)] {
            self.clogged[index(from)][index(to)] = false;
            let held = std::mem::take(&mut self.directions[index(from)][index(to)].held);
            for (to, inbound) in held {
                let latency_us = match inbound {
                    Inbound::Msg { .. } => self.draw.between(LATENCY_MIN_US, LATENCY_MAX_US),
                    _ => 0,
                };
                self.transmit(from, to, inbound, now_us, latency_us);
            }
        }
    }

    /// Puts something on its way from `from` to `to`: held by a clog, or arriving after
    /// `latency_us` and not before what was sent this way earlier.
    fn transmit(&mut self, from: Node, to: Node, inbound: Inbound, now_us: u64, latency_us: u64) {
        let direction = &mut self.directions[index(from)][index(to)];
        if self.clogged[index(from)][index(to)] {
            direction.held.push_back((to, inbound));
            return;
        }
        let scheduled = match (&mut self.following, &inbound) {
            (Some(following), Inbound::Msg { .. } | Inbound::Lost { .. }) => {
                following.arrival_us(from, to, now_us, latency_us)
            }
            _ => None,
        };
        let direction = &mut self.directions[index(from)][index(to)];
        // A path's deliveries are in order on each link already.
        let at_us = scheduled.unwrap_or_else(|| (now_us + latency_us).max(direction.last_arrival_us));
        direction.last_arrival_us = direction.last_arrival_us.max(at_us);
        self.arrive(to, now_us, at_us, inbound);
    }

    fn arrive(&mut self, to: Node, now_us: u64, at_us: u64, inbound: Inbound) {
        let Some(queue) = self.queues[index(to)].as_mut() else { return };
        self.sequence += 1;
        queue.insert(at_us, self.sequence, inbound);
        // A loop woken no later than this arrival reads it then.
        if queue.next_wake(now_us).is_some_and(|wake| wake <= at_us) {
            return;
        }
        match &self.clock {
            Some(clock) if at_us > now_us && queue.waker.is_some() => queue.arm(clock, now_us, at_us),
            _ => {
                if let Some(waker) = queue.waker.take() {
                    waker.wake();
                }
            }
        }
    }

    /// A process's loop looks at its queue at `now_us`, its earliest timer due at `timer_us`:
    /// the next arrival if it is due; else whether the timer is; else it is woken when
    /// something is.
    pub fn poll(&mut self, node: Node, now_us: u64, timer_us: Option<u64>, waker: &Waker) -> Polled {
        let Some(queue) = self.queues[index(node)].as_mut() else { return Polled::Closed };
        let next_arrival = match queue.arrivals.front() {
            Some((at_us, _, _)) if *at_us <= now_us => {
                let (_, _, inbound) = queue.arrivals.pop_front().expect("an arrival is due");
                return Polled::Ready(inbound);
            }
            next => next.map(|(at_us, _, _)| *at_us),
        };
        let next = match (next_arrival, timer_us) {
            (Some(a), Some(t)) => Some(a.min(t)),
            (a, t) => a.or(t),
        };
        if next.is_some_and(|next| next <= now_us) {
            return Polled::TimerDue;
        }
        if !queue.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            queue.waker = Some(waker.clone());
        }
        if let (Some(next), Some(clock)) = (next, &self.clock)
            && queue.next_wake(now_us).is_none_or(|wake| next < wake)
        {
            queue.arm(clock, now_us, next);
        }
        Polled::Pending
    }
}

/// Sets a madsim timer that wakes `waker` at `at_us` (madsim's clock reads `now_us`).
fn arm(clock: &TimeHandle, waker: &Waker, now_us: u64, at_us: u64) {
    let mut sleep = clock.sleep(Duration::from_micros(at_us - now_us));
    // Polling registers the timer; it fires whether or not the sleep is kept.
    if Pin::new(&mut sleep).poll(&mut Context::from_waker(waker)).is_ready() {
        waker.wake_by_ref();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handoff_models::core::protocol::Control;
    use std::task::Waker;

    fn msg(n: u64) -> Msg {
        Msg::Control(Control::WalBurst { bytes: n })
    }

    /// Everything that arrives at `node`, with when, reading the queue as the node's loop does.
    fn drain(net: &mut Net, node: Node, from_us: u64) -> Vec<(u64, String)> {
        let mut now = from_us;
        let mut seen = Vec::new();
        loop {
            match net.poll(node, now, None, Waker::noop()) {
                Polled::Ready(inbound) => seen.push((now, describe(&inbound))),
                Polled::TimerDue => unreachable!("no timers here"),
                Polled::Pending | Polled::Closed => match net.next_arrival(node) {
                    Some(next) => now = next,
                    None => return seen,
                },
            }
        }
    }

    fn describe(inbound: &Inbound) -> String {
        match inbound {
            Inbound::Msg { msg: Msg::Control(Control::WalBurst { bytes }), connection, .. } => {
                format!("msg {bytes} on {connection}")
            }
            Inbound::Msg { .. } => "msg".into(),
            Inbound::Lost { peer, connection } => format!("lost {} on {connection}", peer.name()),
            Inbound::Accepted { peer, connection } => format!("accepted {} on {connection}", peer.name()),
            Inbound::Inject { .. } => "inject".into(),
        }
    }

    fn up(nodes: &[Node]) -> Net {
        let mut net = Net::unclocked(7);
        for node in nodes {
            net.bind(*node);
        }
        net
    }

    #[test]
    fn a_process_that_is_down_refuses_a_connection() {
        let mut net = up(&[Node::Connect]);
        assert_eq!(net.connect(Node::Connect, Node::Kafka, 0), None);
        net.bind(Node::Kafka);
        let connection = net.connect(Node::Connect, Node::Kafka, 0).expect("kafka is up");
        assert_eq!(drain(&mut net, Node::Kafka, 0), vec![(0, format!("accepted connect on {connection}"))]);
    }

    #[test]
    fn messages_take_one_to_ten_milliseconds_and_never_overtake_each_other() {
        let mut net = up(&[Node::Connect, Node::Kafka]);
        let connection = net.connect(Node::Connect, Node::Kafka, 0).expect("up");
        for n in 0..200 {
            net.send(Node::Connect, Node::Kafka, connection, msg(n), n * 100).expect("open");
        }
        let seen = drain(&mut net, Node::Kafka, 0);
        assert_eq!(seen.len(), 201);
        let mut latest = 0;
        for (n, (at, what)) in seen[1..].iter().enumerate() {
            assert_eq!(*what, format!("msg {n} on {connection}"), "in the order sent");
            let sent = n as u64 * 100;
            assert!(*at >= sent + LATENCY_MIN_US, "message {n} sent at {sent} µs arrived at {at}");
            assert!(*at >= latest, "message {n} overtook an earlier one");
            latest = *at;
        }
        // FIFO pushes some arrivals past their own latency, but not past the one before them.
        let own_latency_kept =
            seen[1..].iter().enumerate().filter(|(n, (at, _))| *at <= *n as u64 * 100 + LATENCY_MAX_US);
        assert!(own_latency_kept.count() > 100);
    }

    #[test]
    fn a_dead_process_s_messages_arrive_then_its_peers_hear_the_connection_is_lost() {
        let mut net = up(&[Node::Connect, Node::Kafka]);
        let connection = net.connect(Node::Connect, Node::Kafka, 0).expect("up");
        net.send(Node::Connect, Node::Kafka, connection, msg(1), 0).expect("open");
        net.send(Node::Kafka, Node::Connect, connection, msg(2), 0).expect("open");
        net.unbind(Node::Connect, 10);
        let seen = drain(&mut net, Node::Kafka, 0);
        let what: Vec<&str> = seen.iter().map(|(_, w)| w.as_str()).collect();
        assert_eq!(what, vec!["accepted connect on 1", "msg 1 on 1", "lost connect on 1"]);
        assert!(seen[2].0 >= seen[1].0);
        // What was on its way to the dead process is gone with it, and the connection is closed.
        assert!(matches!(net.poll(Node::Connect, u64::MAX, None, Waker::noop()), Polled::Closed));
        assert_eq!(net.send(Node::Kafka, Node::Connect, connection, msg(3), 20), Err(Closed));
        // Restarted, it is a new incarnation: nothing of the old connection reaches it.
        net.bind(Node::Connect);
        assert_eq!(drain(&mut net, Node::Connect, 0), vec![]);
    }

    #[test]
    fn a_clog_holds_everything_both_ways_until_it_heals_then_it_leaves_in_order() {
        let mut net = up(&[Node::Connect, Node::Kafka]);
        let connection = net.connect(Node::Connect, Node::Kafka, 0).expect("up");
        net.clog(Node::Kafka, Node::Connect);
        for n in 0..5 {
            net.send(Node::Connect, Node::Kafka, connection, msg(n), 1_000).expect("open");
            net.send(Node::Kafka, Node::Connect, connection, msg(10 + n), 1_000).expect("open");
        }
        net.unbind(Node::Connect, 2_000);
        assert_eq!(drain(&mut net, Node::Kafka, 0), vec![(0, "accepted connect on 1".into())]);
        net.unclog(Node::Connect, Node::Kafka, 50_000);
        let seen = drain(&mut net, Node::Kafka, 0);
        let what: Vec<&str> = seen.iter().map(|(_, w)| w.as_str()).collect();
        assert_eq!(
            what,
            vec!["msg 0 on 1", "msg 1 on 1", "msg 2 on 1", "msg 3 on 1", "msg 4 on 1", "lost connect on 1"]
        );
        assert!(seen.iter().all(|(at, _)| *at >= 50_000), "{seen:?}");
    }

    #[test]
    fn the_same_seed_draws_the_same_latencies() {
        let arrivals = |seed| {
            let mut net = Net::unclocked(seed);
            net.bind(Node::Connect);
            net.bind(Node::Kafka);
            let connection = net.connect(Node::Connect, Node::Kafka, 0).expect("up");
            for n in 0..20 {
                net.send(Node::Connect, Node::Kafka, connection, msg(n), n * 20_000).expect("open");
            }
            drain(&mut net, Node::Kafka, 0)
        };
        assert_eq!(arrivals(1), arrivals(1));
        assert_ne!(arrivals(1), arrivals(2));
    }

    #[test]
    fn on_a_path_each_message_arrives_at_its_step_and_what_the_path_lacks_is_a_departure() {
        use handoff_models::exhaustive::world::Timing;
        // The path: pg1's first message to connect arrives at step 2, its second is dropped,
        // connect's offset-flush timer fires at step 3; steps are 10 ms apart, 5 steps.
        let timing = Timing {
            deliveries: [((Node::Pg1, Node::Connect), vec![Some(2), None])].into_iter().collect(),
            firings: [(
                (Node::Connect, Timer::first_task(handoff_models::core::component::TaskTimer::OffsetFlush)),
                vec![3],
            )]
            .into_iter()
            .collect(),
            ..Timing::default()
        };
        let mut net = up(&[Node::Pg1, Node::Connect]);
        net.follow(Following::new(&timing, 10, 5));
        let c = net.connect(Node::Connect, Node::Pg1, 0).expect("pg1 is up");
        net.send(Node::Connect, Node::Pg1, c, msg(1), 1_000).expect("open");
        net.send(Node::Pg1, Node::Connect, c, msg(2), 2_000).expect("open");
        net.send(Node::Pg1, Node::Connect, c, msg(3), 2_000).expect("open");
        net.send(Node::Pg1, Node::Connect, c, msg(4), 2_000).expect("open");
        // A request to a server is taken at once; a client's arrivals are the path's.
        assert_eq!(
            drain(&mut net, Node::Pg1, 0),
            vec![(0, format!("accepted connect on {c}")), (1_001, format!("msg 1 on {c}"))]
        );
        let arrivals = drain(&mut net, Node::Connect, 0);
        assert_eq!(arrivals[0], (30_000, format!("msg 2 on {c}")), "step 2 is at 30 ms");
        assert!(arrivals[1].0 > 60_000 && arrivals[2].0 > 60_000, "the rest after the path's end: {arrivals:?}");
        // Timers: the path's firing, and nothing before the end otherwise.
        assert_eq!(
            net.timer_at(
                Node::Connect,
                Timer::first_task(handoff_models::core::component::TaskTimer::OffsetFlush),
                60_000_000,
                2_000
            ),
            40_000
        );
        assert_eq!(
            net.timer_at(
                Node::Connect,
                Timer::first_task(handoff_models::core::component::TaskTimer::PollReturns),
                500,
                2_000
            ),
            60_000
        );
        let departures = net.following().expect("following").departures();
        assert_eq!(
            departures,
            vec![
                "pg1 sent connect message 3 at 2 ms; the path has 2 on that link".to_string(),
                "step 3 fires connect's timer offset-flush, which did not fire then".to_string(),
            ]
        );
        net.timer_fired(
            Node::Connect,
            Timer::first_task(handoff_models::core::component::TaskTimer::OffsetFlush),
            40_003,
        );
        assert_eq!(net.following().expect("following").departures().len(), 1, "the firing came");
    }
}
