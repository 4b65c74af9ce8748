//! The one list of components: every process of a run, by node.
//!
//! Both lenses hold the processes here and drive them only through [`Processes::with_component`]
//! (start, messages, timers, lost connections, crash): the exhaustive lens
//! ([`crate::exhaustive::world`]) holds each component in a [`CopyOnWrite`] so that states share what
//! a step did not change; the timed lens holds each behind a lock its madsim node runs. How a
//! lens holds a component is a [`Holder`]; the list itself is written once, in this file.
//!
//! Registering a component (docs/architecture.md): a field of [`Processes`], its arm in
//! [`Processes::with_component`], [`Processes::handle`] and the conversions below, and its place
//! in [`Processes::ORDER`].

use crate::components::app::App;
use crate::components::connect::ConnectWorker;
use crate::components::consumer::InboxConsumer;
use crate::components::kafka::Kafka;
use crate::components::loader::Loader;
use crate::components::operator::Operator;
use crate::components::postgres::Postgres;
use crate::components::sink::SearchIndex;
use crate::core::component::Component;
use crate::core::ids::Node;
use crate::core::shared::{self, CopyOnWrite};

/// What a component is to the lenses: a state machine that can be copied, compared and hashed
/// (the exhaustive lens), and sent to the thread of a node (the timed lens).
pub trait Process: Component + Clone + std::fmt::Debug + Eq + std::hash::Hash + Send + 'static {}

impl<T: Component + Clone + std::fmt::Debug + Eq + std::hash::Hash + Send + 'static> Process for T {}

/// How a lens holds its components.
pub trait Holder {
    type Of<C: Process>: Clone + std::fmt::Debug;
    /// A handle on any of the held components, for a lens that hands them out (a madsim node).
    type Handle;
    fn hold<C: Process>(component: C) -> Self::Of<C>;
    fn with<C: Process, R>(held: &mut Self::Of<C>, f: impl FnOnce(&mut dyn Component) -> R) -> R;
    /// Reads a held component (the judge reads the processes of either lens this way).
    fn read<C: Process, R>(held: &Self::Of<C>, f: impl FnOnce(&C) -> R) -> R;
    fn handle<C: Process>(held: &Self::Of<C>) -> Self::Handle;
}

/// The components themselves (as [`crate::scenario::setup::build`] makes them).
#[derive(Clone, Copy, Debug)]
pub struct Plain;

impl Holder for Plain {
    type Of<C: Process> = C;
    type Handle = ();
    fn hold<C: Process>(component: C) -> C {
        component
    }
    fn with<C: Process, R>(held: &mut C, f: impl FnOnce(&mut dyn Component) -> R) -> R {
        f(held)
    }
    fn read<C: Process, R>(held: &C, f: impl FnOnce(&C) -> R) -> R {
        f(held)
    }
    fn handle<C: Process>(_: &C) {}
}

/// Copy on write, shared between the states of an exploration.
#[derive(Clone, Copy, Debug)]
pub struct CopyOnWriteHolder;

impl Holder for CopyOnWriteHolder {
    type Of<C: Process> = CopyOnWrite<C>;
    type Handle = ();
    fn hold<C: Process>(component: C) -> CopyOnWrite<C> {
        CopyOnWrite::new(component)
    }
    fn with<C: Process, R>(held: &mut CopyOnWrite<C>, f: impl FnOnce(&mut dyn Component) -> R) -> R {
        f(held.get_mut())
    }
    fn read<C: Process, R>(held: &CopyOnWrite<C>, f: impl FnOnce(&C) -> R) -> R {
        f(held)
    }
    fn handle<C: Process>(_: &CopyOnWrite<C>) {}
}

/// Every process of a run. `pg2` is there when the scenario has a standby, `loader` when its
/// handoff is a plain read.
pub struct Processes<H: Holder> {
    pub pg1: H::Of<Postgres>,
    pub pg2: Option<H::Of<Postgres>>,
    pub connect: H::Of<ConnectWorker>,
    pub kafka: H::Of<Kafka>,
    pub sink: H::Of<SearchIndex>,
    pub app: H::Of<App>,
    pub operator: H::Of<Operator>,
    pub loader: Option<H::Of<Loader>>,
    /// The outbox's consumer, when the scenario has one (`[consumer]`).
    pub consumer: Option<H::Of<InboxConsumer>>,
    /// The second and third Connect workers of a group (`[connect] workers`).
    pub connect2: Option<H::Of<ConnectWorker>>,
    pub connect3: Option<H::Of<ConnectWorker>>,
}

impl<H: Holder> Processes<H> {
    /// The processes in the order the exhaustive lens starts them: every physical node's.
    pub const ORDER: [Node; 11] = Node::PHYSICAL;

    /// Runs `f` on the component of `node`; `None` when the run has no such process (`pg2`
    /// without a standby, `loader` without a plain read, and `postgres`, which is a service name,
    /// not a process).
    pub fn with_component<R>(&mut self, node: Node, f: impl FnOnce(&mut dyn Component) -> R) -> Option<R> {
        match node {
            Node::Pg1 => Some(H::with(&mut self.pg1, f)),
            Node::Pg2 => self.pg2.as_mut().map(|pg2| H::with(pg2, f)),
            Node::Connect => Some(H::with(&mut self.connect, f)),
            Node::Kafka => Some(H::with(&mut self.kafka, f)),
            Node::Sink => Some(H::with(&mut self.sink, f)),
            Node::App => Some(H::with(&mut self.app, f)),
            Node::Operator => Some(H::with(&mut self.operator, f)),
            Node::Loader => self.loader.as_mut().map(|loader| H::with(loader, f)),
            Node::Consumer => self.consumer.as_mut().map(|consumer| H::with(consumer, f)),
            Node::Connect2 => self.connect2.as_mut().map(|worker| H::with(worker, f)),
            Node::Connect3 => self.connect3.as_mut().map(|worker| H::with(worker, f)),
            Node::Postgres => None,
        }
    }

    /// A handle on the component of `node` (see [`Processes::with_component`] for `None`).
    pub fn handle(&self, node: Node) -> Option<H::Handle> {
        match node {
            Node::Pg1 => Some(H::handle(&self.pg1)),
            Node::Pg2 => self.pg2.as_ref().map(H::handle),
            Node::Connect => Some(H::handle(&self.connect)),
            Node::Kafka => Some(H::handle(&self.kafka)),
            Node::Sink => Some(H::handle(&self.sink)),
            Node::App => Some(H::handle(&self.app)),
            Node::Operator => Some(H::handle(&self.operator)),
            Node::Loader => self.loader.as_ref().map(H::handle),
            Node::Consumer => self.consumer.as_ref().map(H::handle),
            Node::Connect2 => self.connect2.as_ref().map(H::handle),
            Node::Connect3 => self.connect3.as_ref().map(H::handle),
            Node::Postgres => None,
        }
    }

    /// Whether the run has the process `node`.
    pub fn has(&self, node: Node) -> bool {
        match node {
            Node::Pg2 => self.pg2.is_some(),
            Node::Loader => self.loader.is_some(),
            Node::Consumer => self.consumer.is_some(),
            Node::Connect2 => self.connect2.is_some(),
            Node::Connect3 => self.connect3.is_some(),
            Node::Postgres => false,
            _ => true,
        }
    }

    /// The Connect worker `worker` (a node of [`Node::WORKERS`]), if the run has it.
    pub fn worker(&self, worker: Node) -> Option<&H::Of<ConnectWorker>> {
        match worker {
            Node::Connect => Some(&self.connect),
            Node::Connect2 => self.connect2.as_ref(),
            Node::Connect3 => self.connect3.as_ref(),
            _ => None,
        }
    }

    /// The run's Connect workers, with their nodes, in order.
    pub fn workers(&self) -> impl Iterator<Item = (Node, &H::Of<ConnectWorker>)> + '_ {
        Node::WORKERS.into_iter().filter_map(|node| self.worker(node).map(|worker| (node, worker)))
    }

    /// The worker running connector `c`'s task: the first that does (two do while one is a
    /// zombie), or, when none does, the first worker (its view: unassigned, stopped).
    pub fn worker_of(&self, c: usize) -> &H::Of<ConnectWorker> {
        self.workers()
            .map(|(_, worker)| worker)
            .find(|worker| H::read(worker, |w| w.runs_task(c)))
            .unwrap_or(&self.connect)
    }

    /// Whether nothing waits in any worker's tasks.
    pub fn workers_drained(&self) -> bool {
        self.workers().all(|(_, worker)| H::read(worker, ConnectWorker::is_drained))
    }

    /// The processes the run has, in [`Processes::ORDER`].
    pub fn nodes(&self) -> impl Iterator<Item = Node> + '_ {
        Self::ORDER.into_iter().filter(|node| self.has(*node))
    }
}

impl Processes<Plain> {
    /// The same processes, held as a lens holds them.
    pub fn hold<H: Holder>(self) -> Processes<H> {
        Processes {
            pg1: H::hold(self.pg1),
            pg2: self.pg2.map(H::hold),
            connect: H::hold(self.connect),
            kafka: H::hold(self.kafka),
            sink: H::hold(self.sink),
            app: H::hold(self.app),
            operator: H::hold(self.operator),
            loader: self.loader.map(H::hold),
            consumer: self.consumer.map(H::hold),
            connect2: self.connect2.map(H::hold),
            connect3: self.connect3.map(H::hold),
        }
    }
}

impl<H: Holder> Clone for Processes<H> {
    fn clone(&self) -> Self {
        Processes {
            pg1: self.pg1.clone(),
            pg2: self.pg2.clone(),
            connect: self.connect.clone(),
            kafka: self.kafka.clone(),
            sink: self.sink.clone(),
            app: self.app.clone(),
            operator: self.operator.clone(),
            loader: self.loader.clone(),
            consumer: self.consumer.clone(),
            connect2: self.connect2.clone(),
            connect3: self.connect3.clone(),
        }
    }
}

impl<H: Holder> std::fmt::Debug for Processes<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Processes")
            .field("pg1", &self.pg1)
            .field("pg2", &self.pg2)
            .field("connect", &self.connect)
            .field("kafka", &self.kafka)
            .field("sink", &self.sink)
            .field("app", &self.app)
            .field("operator", &self.operator)
            .field("loader", &self.loader)
            .field("consumer", &self.consumer)
            .field("connect2", &self.connect2)
            .field("connect3", &self.connect3)
            .finish()
    }
}

impl PartialEq for Processes<CopyOnWriteHolder> {
    fn eq(&self, other: &Self) -> bool {
        self.pg1 == other.pg1
            && self.pg2 == other.pg2
            && self.connect == other.connect
            && self.kafka == other.kafka
            && self.sink == other.sink
            && self.app == other.app
            && self.operator == other.operator
            && self.loader == other.loader
            && self.consumer == other.consumer
            && self.connect2 == other.connect2
            && self.connect3 == other.connect3
    }
}

impl Eq for Processes<CopyOnWriteHolder> {}

impl std::hash::Hash for Processes<CopyOnWriteHolder> {
    fn hash<S: std::hash::Hasher>(&self, state: &mut S) {
        self.pg1.hash(state);
        // The exhaustive world has no standby: hashing nothing for it keeps its fingerprints.
        if let Some(pg2) = &self.pg2 {
            pg2.hash(state);
        }
        self.connect.hash(state);
        self.kafka.hash(state);
        self.sink.hash(state);
        self.app.hash(state);
        self.operator.hash(state);
        self.loader.hash(state);
        // Hashed only when there is one: a world without keeps its fingerprints.
        if let Some(consumer) = &self.consumer {
            consumer.hash(state);
        }
        // Likewise the group's other workers.
        for worker in [&self.connect2, &self.connect3].into_iter().flatten() {
            worker.hash(state);
        }
    }
}

/// The copies made while rehoming states ([`CopyOnWrite::rehome`]), one table per component.
#[derive(Default)]
pub struct Copies {
    pg: shared::Copies<Postgres>,
    connect: shared::Copies<ConnectWorker>,
    kafka: shared::Copies<Kafka>,
    sink: shared::Copies<SearchIndex>,
    app: shared::Copies<App>,
    operator: shared::Copies<Operator>,
    loader: shared::Copies<Loader>,
    consumer: shared::Copies<InboxConsumer>,
}

impl Processes<CopyOnWriteHolder> {
    /// Gives this state components of its own, shared with the other states rehomed with the
    /// same `copies`.
    pub fn rehome(&mut self, copies: &mut Copies) {
        self.pg1.rehome(&mut copies.pg);
        if let Some(pg2) = &mut self.pg2 {
            pg2.rehome(&mut copies.pg);
        }
        self.connect.rehome(&mut copies.connect);
        self.kafka.rehome(&mut copies.kafka);
        self.sink.rehome(&mut copies.sink);
        self.app.rehome(&mut copies.app);
        self.operator.rehome(&mut copies.operator);
        if let Some(loader) = &mut self.loader {
            loader.rehome(&mut copies.loader);
        }
        if let Some(consumer) = &mut self.consumer {
            consumer.rehome(&mut copies.consumer);
        }
        for worker in [&mut self.connect2, &mut self.connect3].into_iter().flatten() {
            worker.rehome(&mut copies.connect);
        }
    }
}
