//! One modelled process as a madsim node: its network links, its timers, and the loop that feeds
//! its [`Component`] one input at a time.
//!
//! Links are madsim's reliable connections (FIFO, with the simulated latency of madsim's network
//! configuration), opened by the client side of each protocol: a client connects to a server the
//! first time it sends to it. A peer that dies closes its links; the messages it sent before are
//! still delivered, then the component hears `on_connection_lost`. A link accepted from a peer
//! that already had one means the old one belongs to a dead incarnation: it is declared lost
//! first, and anything still arriving on it is dropped.
//!
//! Clients see the database as the service `postgres`: messages to it go to whichever server is
//! the primary now, and messages from either server arrive as from `postgres`.

use crate::runner::Shared;
use futures::StreamExt;
use futures::channel::mpsc;
use handoff_models::component::{Component, Ctx, Outbox, Timer, TimerRequest};
use handoff_models::ids::Node;
use handoff_models::protocol::Msg;
use handoff_models::time::SimTime;
use madsim::net::{Endpoint, Receiver, Sender};
use madsim::time::TimeHandle;
use std::collections::BTreeMap;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

/// The port every node listens on.
const PORT: u16 = 5000;

/// The address of a physical node.
pub fn address(node: Node) -> SocketAddr {
    SocketAddr::new(ip(node), PORT)
}

pub fn ip(node: Node) -> IpAddr {
    let index = Node::PHYSICAL.iter().position(|n| *n == node).expect("a physical node") as u8;
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, index + 1))
}

fn node_of(ip_address: IpAddr) -> Option<Node> {
    Node::PHYSICAL.iter().copied().find(|node| ip(*node) == ip_address)
}

/// Whether `from` opens the link to `to` (it is a client of `to`).
fn initiates(from: Node, to: Node) -> bool {
    match to {
        Node::Pg1 | Node::Pg2 | Node::Kafka => from != to,
        Node::Connect => from == Node::Operator,
        _ => false,
    }
}

fn is_client_of_database(node: Node) -> bool {
    matches!(node, Node::Connect | Node::App | Node::Operator | Node::Loader)
}

/// The simulated time now, in milliseconds.
pub fn now_ms() -> u64 {
    TimeHandle::current().elapsed().as_millis() as u64
}

/// What reaches a node's loop.
pub enum Inbound {
    Msg {
        from: Node,
        generation: u64,
        msg: Msg,
    },
    Lost {
        peer: Node,
        generation: u64,
    },
    Accepted {
        peer: Node,
        sender: Sender,
        receiver: Receiver,
    },
    /// From the harness: delivered as if sent by `from`.
    Inject {
        from: Node,
        msg: Msg,
    },
}

struct Link {
    sender: Sender,
    generation: u64,
}

/// The per-node runtime around a component.
struct NodeLoop<C: Component> {
    node: Node,
    model: Arc<Mutex<C>>,
    shared: Arc<Shared>,
    endpoint: Endpoint,
    inbox_tx: mpsc::UnboundedSender<Inbound>,
    links: BTreeMap<Node, Link>,
    generations: BTreeMap<Node, u64>,
    timers: BTreeMap<Timer, u64>,
    outbox: Outbox,
}

/// Runs a component as the node's main task until the node is killed.
pub async fn run<C: Component + Send + 'static>(node: Node, model: Arc<Mutex<C>>, shared: Arc<Shared>) {
    let endpoint = Endpoint::bind(address(node)).await.expect("node address is free");
    let (inbox_tx, mut inbox_rx) = mpsc::unbounded();
    shared.register_inbox(node, inbox_tx.clone());
    let accept_endpoint = endpoint.clone();
    let accept_tx = inbox_tx.clone();
    madsim::task::spawn_local(async move {
        while let Ok((sender, receiver, from)) = accept_endpoint.accept1().await {
            if let Some(peer) = node_of(from.ip()) {
                let _ = accept_tx.unbounded_send(Inbound::Accepted { peer, sender, receiver });
            }
        }
    });
    let mut this = NodeLoop {
        node,
        model,
        shared,
        endpoint,
        inbox_tx,
        links: BTreeMap::new(),
        generations: BTreeMap::new(),
        timers: BTreeMap::new(),
        outbox: Outbox::default(),
    };
    this.step(|model, ctx| model.start(ctx)).await;
    // One madsim timer per deadline: a `Sleep` registers a timer each time it is polled, so it
    // is polled only when the earliest deadline changes; that timer wakes this task when due.
    let mut armed: Option<(u64, Pin<Box<madsim::time::Sleep>>)> = None;
    loop {
        let next = this.timers.values().min().copied();
        let woke = std::future::poll_fn(|cx| {
            if let Poll::Ready(inbound) = inbox_rx.poll_next_unpin(cx) {
                return Poll::Ready(Woke::Inbound(inbound));
            }

            let Some(at) = next else { return Poll::Pending };
            if now_ms() >= at {
                return Poll::Ready(Woke::Timers);
            }
            if armed.as_ref().is_none_or(|(deadline, _)| *deadline != at) {
                let mut sleep = Box::pin(madsim::time::sleep(Duration::from_millis(at - now_ms())));
                if sleep.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Woke::Timers);
                }
                armed = Some((at, sleep));
            }
            Poll::Pending
        })
        .await;
        match woke {
            Woke::Timers => this.fire_due_timers().await,
            Woke::Inbound(None) => return,
            Woke::Inbound(Some(inbound)) => this.handle(inbound).await,
        }
    }
}

/// What woke a node's loop.
enum Woke {
    Inbound(Option<Inbound>),
    Timers,
}

impl<C: Component + Send + 'static> NodeLoop<C> {
    /// The name a peer has for this node's component.
    fn logical(&self, peer: Node) -> Node {
        if is_client_of_database(self.node) && matches!(peer, Node::Pg1 | Node::Pg2) { Node::Postgres } else { peer }
    }

    async fn handle(&mut self, inbound: Inbound) {
        match inbound {
            Inbound::Msg { from, generation, msg } => {
                if self.generations.get(&from) != Some(&generation) {
                    return; // a dead incarnation's link
                }
                let logical = self.logical(from);
                self.step(|model, ctx| model.on_message(ctx, logical, msg)).await;
            }
            Inbound::Lost { peer, generation } => {
                if self.generations.get(&peer) != Some(&generation) {
                    return;
                }
                self.generations.remove(&peer);
                self.links.remove(&peer);
                let logical = self.logical(peer);
                self.step(|model, ctx| model.on_connection_lost(ctx, logical)).await;
            }
            Inbound::Accepted { peer, sender, receiver } => {
                if let Some(old) = self.generations.get(&peer).copied() {
                    self.handle_lost_now(peer, old).await;
                }
                self.add_link(peer, sender, receiver);
            }
            Inbound::Inject { from, msg } => {
                self.step(|model, ctx| model.on_message(ctx, from, msg)).await;
            }
        }
    }

    async fn handle_lost_now(&mut self, peer: Node, generation: u64) {
        Box::pin(self.handle(Inbound::Lost { peer, generation })).await;
    }

    fn add_link(&mut self, peer: Node, sender: Sender, mut receiver: Receiver) {
        let generation = self.shared.next_generation();
        self.generations.insert(peer, generation);
        self.links.insert(peer, Link { sender, generation });
        let inbox = self.inbox_tx.clone();
        madsim::task::spawn_local(async move {
            while let Ok(payload) = receiver.recv().await {
                let Ok(msg) = payload.downcast::<Msg>() else { continue };
                if inbox.unbounded_send(Inbound::Msg { from: peer, generation, msg: *msg }).is_err() {
                    return;
                }
            }
            let _ = inbox.unbounded_send(Inbound::Lost { peer, generation });
        });
    }

    async fn fire_due_timers(&mut self) {
        let now = now_ms();
        let mut due: Vec<(u64, Timer)> =
            self.timers.iter().filter(|(_, at)| **at <= now).map(|(timer, at)| (*at, *timer)).collect();
        due.sort();
        for (_, timer) in due {
            // An earlier timer's step may have re-armed or cancelled this one.
            if self.timers.get(&timer).is_some_and(|at| *at <= now) {
                self.timers.remove(&timer);
                self.step(|model, ctx| model.on_timer(ctx, timer)).await;
            }
        }
    }

    /// One step of the component, then everything it asked for.
    async fn step(&mut self, f: impl FnOnce(&mut C, &mut Ctx)) {
        let now = now_ms();
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
                    self.timers.insert(timer, now + after_ms);
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
            self.send(to, msg).await;
        }
    }

    async fn send(&mut self, to: Node, msg: Msg) {
        let physical = if to == Node::Postgres { self.shared.primary() } else { to };
        if !self.links.contains_key(&physical) {
            if !initiates(self.node, physical) {
                return; // the client that would read this is gone
            }
            match self.endpoint.connect1(address(physical)).await {
                Ok((sender, receiver)) => self.add_link(physical, sender, receiver),
                Err(_) => {
                    // Connection refused: the peer is down.
                    let generation = self.shared.next_generation();
                    self.generations.insert(physical, generation);
                    let _ = self.inbox_tx.unbounded_send(Inbound::Lost { peer: physical, generation });
                    return;
                }
            }
        }
        let link = self.links.get(&physical).expect("link exists");
        if link.sender.send(Box::new(msg)).await.is_err() {
            let generation = link.generation;
            self.links.remove(&physical);
            let _ = self.inbox_tx.unbounded_send(Inbound::Lost { peer: physical, generation });
        }
    }
}
