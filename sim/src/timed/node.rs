//! One modelled process as a madsim node: its connections, its timers, and the loop that feeds
//! its [`Component`] one input at a time.
//!
//! Connections are the run's simulated network ([`crate::timed::net`]), opened by the client side of
//! each protocol: a client connects to a server the first time it sends to it. A peer that dies
//! closes its connections; the messages it sent before are still delivered, then the component
//! hears `on_connection_lost`. A connection accepted from a peer that already had one means the
//! old one belongs to a dead incarnation: it is declared lost first, and anything still arriving
//! on it is dropped.
//!
//! Clients see the database as the service `postgres`: messages to it go to whichever server is
//! the primary now, and messages from either server arrive as from `postgres`.
//!
//! At one instant the loop takes what has arrived before the timers that are due, each in order.

use crate::timed::net::{Inbound, Polled};
use crate::timed::runner::RunState;
use handoff_models::core::component::{Component, Ctx, Outbox, Timer, TimerRequest};
use handoff_models::core::ids::Node;
use handoff_models::core::protocol::Msg;
use handoff_models::core::time::SimTime;
use madsim::time::TimeHandle;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::task::Poll;

/// The address madsim gives a physical node (its name in madsim's own logs).
pub fn ip(node: Node) -> IpAddr {
    let index = Node::PHYSICAL.iter().position(|n| *n == node).expect("a physical node") as u8;
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, index + 1))
}

/// The simulated time now, in microseconds.
pub fn now_us() -> u64 {
    TimeHandle::current().elapsed().as_micros() as u64
}

/// The simulated time now, in milliseconds.
pub fn now_ms() -> u64 {
    now_us() / 1_000
}

/// The per-node runtime around a component.
struct NodeLoop<C: Component + ?Sized> {
    node: Node,
    model: Arc<Mutex<C>>,
    shared: Arc<RunState>,
    /// The connection this process sends on, per peer.
    links: BTreeMap<Node, u64>,
    /// The connection this process takes messages from, per peer (a connection whose sends
    /// failed stays here until its loss is heard).
    connections: BTreeMap<Node, u64>,
    /// Armed timers and when they are due (microseconds).
    timers: BTreeMap<Timer, u64>,
    outbox: Outbox,
    /// The simulated clock.
    time: TimeHandle,
    /// The run follows a path ([`crate::timed::net::Following`]): its timers fire when the path says.
    following: bool,
}

/// Runs a component as the node's main task until the node is killed.
pub async fn run<C: Component + Send + ?Sized + 'static>(node: Node, model: Arc<Mutex<C>>, shared: Arc<RunState>) {
    let following = {
        let mut net = shared.net();
        net.bind(node);
        net.following().is_some()
    };
    let mut this = NodeLoop {
        node,
        model,
        shared,
        links: BTreeMap::new(),
        connections: BTreeMap::new(),
        timers: BTreeMap::new(),
        outbox: Outbox::default(),
        time: TimeHandle::current(),
        following,
    };
    this.step(|model, ctx| model.start(ctx)).await;
    // The network's queue arms one madsim timer per deadline (arrival or timer), and the
    // sender of an earlier arrival arms one for it: the loop is polled when something is due.
    loop {
        let next_timer = this.timers.values().min().copied();
        let woke = std::future::poll_fn(|cx| {
            let now = this.time.elapsed().as_micros() as u64;
            match this.shared.net().poll(node, now, next_timer, cx.waker()) {
                Polled::Closed => Poll::Ready(None),
                Polled::Ready(inbound) => Poll::Ready(Some(Woke::Inbound(inbound))),
                Polled::TimerDue => Poll::Ready(Some(Woke::Timers)),
                Polled::Pending => Poll::Pending,
            }
        })
        .await;
        // A stop-the-world pause: what woke the process waits, with everything after it, until
        // the pause ends.
        if woke.is_some()
            && let Some(until_us) = this.shared.paused_until(node)
        {
            let now_us = this.time.elapsed().as_micros() as u64;
            if until_us > now_us {
                madsim::time::sleep(std::time::Duration::from_micros(until_us - now_us)).await;
            }
        }
        match woke {
            // The process is down; madsim drops this task.
            None => return,
            Some(Woke::Timers) => this.fire_due_timers().await,
            Some(Woke::Inbound(inbound)) => this.handle(inbound).await,
        }
    }
}

/// What woke a node's loop.
enum Woke {
    Inbound(Inbound),
    /// A timer is due.
    Timers,
}

impl<C: Component + Send + ?Sized + 'static> NodeLoop<C> {
    /// The name a peer has for this node's component.
    fn logical(&self, peer: Node) -> Node {
        if self.node.is_database_client() && matches!(peer, Node::Pg1 | Node::Pg2) { Node::Postgres } else { peer }
    }

    async fn handle(&mut self, inbound: Inbound) {
        match inbound {
            Inbound::Msg { from, connection, msg } => {
                if self.connections.get(&from) != Some(&connection) {
                    return; // a dead incarnation's connection
                }
                let logical = self.logical(from);
                self.step(|model, ctx| model.on_message(ctx, logical, msg)).await;
            }
            Inbound::Lost { peer, connection } => {
                if self.connections.get(&peer) != Some(&connection) {
                    return;
                }
                self.connections.remove(&peer);
                if self.links.get(&peer) == Some(&connection) {
                    self.links.remove(&peer);
                }
                let logical = self.logical(peer);
                self.step(|model, ctx| model.on_connection_lost(ctx, logical)).await;
            }
            Inbound::Accepted { peer, connection } => {
                if let Some(old) = self.connections.get(&peer).copied() {
                    self.handle_lost_now(peer, old).await;
                }
                self.connections.insert(peer, connection);
                self.links.insert(peer, connection);
            }
            Inbound::Inject { from, msg } => {
                self.step(|model, ctx| model.on_message(ctx, from, msg)).await;
            }
        }
    }

    async fn handle_lost_now(&mut self, peer: Node, connection: u64) {
        Box::pin(self.handle(Inbound::Lost { peer, connection })).await;
    }

    async fn fire_due_timers(&mut self) {
        let now = self.time.elapsed().as_micros() as u64;
        let mut due: Vec<(u64, Timer)> =
            self.timers.iter().filter(|(_, at)| **at <= now).map(|(timer, at)| (*at, *timer)).collect();
        due.sort();
        for (_, timer) in due {
            // An earlier timer's step may have re-armed or cancelled this one.
            if self.timers.get(&timer).is_some_and(|at| *at <= now) {
                self.timers.remove(&timer);
                if self.following {
                    self.shared.net().timer_fired(self.node, timer, now);
                }
                self.step(|model, ctx| model.on_timer(ctx, timer)).await;
            }
        }
    }

    /// One step of the component, then everything it asked for.
    async fn step(&mut self, f: impl FnOnce(&mut C, &mut Ctx)) {
        let now_us = self.time.elapsed().as_micros() as u64;
        let now = now_us / 1_000;
        self.outbox.clear();
        {
            let mut model = self.model.lock().expect("model lock");
            let mut ctx = Ctx::new(SimTime(now), self.node, &mut self.outbox);
            f(&mut model, &mut ctx);
        }
        let outbox = std::mem::take(&mut self.outbox);
        for request in &outbox.timers {
            match *request {
                TimerRequest::Set { timer, after_ms } => {
                    // Saturating: a timer past the end of time never fires (settings are at most a
                    // day, so none is, in a loaded scenario).
                    let mut at_us = now.saturating_add(after_ms).saturating_mul(1_000);
                    if self.following {
                        at_us = self.shared.net().timer_at(self.node, timer, at_us, now_us);
                    }
                    self.timers.insert(timer, at_us);
                }
                TimerRequest::Cancel { timer } => {
                    self.timers.remove(&timer);
                }
            }
        }
        let halt = self.shared.record(self.node, SimTime(now), outbox.observations);
        if halt {
            // A fault takes this process at this very instant: what it was about to send never
            // leaves it, and it does nothing more.
            futures::future::pending::<()>().await;
        }
        for (to, msg) in outbox.sends {
            self.send(to, msg, now_us);
        }
    }

    fn send(&mut self, to: Node, msg: Msg, now: u64) {
        let physical = if to == Node::Postgres { self.shared.primary() } else { to };
        if to == Node::Postgres {
            // The client talks to the promoted server now: its connections to the old primary
            // are behind it (the task that used them has stopped, and a new one connects to the
            // server `postgres` names today). A lost-connection notice for one of them, held back
            // by a clog until after the promotion, is about a socket nobody reads any more; it
            // must not make the new task think its own connection broke (a task restart would
            // leave its walsender on the new primary active, holding the slot for good).
            let old = if physical == Node::Pg1 { Node::Pg2 } else { Node::Pg1 };
            if self.connections.remove(&old).is_some() {
                self.links.remove(&old);
            }
        }
        let mut net = self.shared.net();
        let connection = match self.links.get(&physical) {
            Some(connection) => *connection,
            None => {
                if !self.node.initiates(physical) {
                    return; // the client that would read this is gone
                }
                match net.connect(self.node, physical, now) {
                    Some(connection) => {
                        self.links.insert(physical, connection);
                        self.connections.insert(physical, connection);
                        connection
                    }
                    None => {
                        // Connection refused: the peer is down.
                        let connection = net.refused_connection();
                        self.connections.insert(physical, connection);
                        net.lost_now(self.node, physical, connection, now);
                        return;
                    }
                }
            }
        };
        if net.send(self.node, physical, connection, msg, now).is_err() {
            self.links.remove(&physical);
            net.lost_now(self.node, physical, connection, now);
        }
    }
}
