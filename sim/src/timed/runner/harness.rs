//! The harness of one run: the supervisor outside the modelled system that starts the nodes,
//! injects the faults and scripted transactions when their triggers come, and ends the run at
//! the acceptance boundary (see the parent module).

use super::*;

/// What a harness step is, for people (a step left when the run ended).
fn describe_step(spec: &Spec, step: &HarnessStep) -> String {
    match step {
        HarnessStep::StartConnect => "the Connect worker's start".into(),
        HarnessStep::Action(action) => describe_action(spec, action),
        HarnessStep::Restart(node) => format!("the restart of {node}"),
        HarnessStep::Promote => "the standby's promotion".into(),
        HarnessStep::Inject { to, .. } => format!("a request to {to}"),
        HarnessStep::Unclog(a, b) => format!("the end of the clog {a} <-> {b}"),
        HarnessStep::Crash(node) => format!("crash {node}"),
        HarnessStep::ScheduleEnd => "the end of the schedule".into(),
        HarnessStep::Respawn(node) => format!("the start of {node} after its clean shutdown"),
        HarnessStep::StartWorker(node) => format!("the start of {node}"),
        HarnessStep::PauseEnds(node) => format!("the end of {node}'s pause"),
        HarnessStep::PathPause(node) => format!("pause {node}"),
    }
}

fn describe_action(spec: &Spec, action: &Action) -> String {
    match action {
        Action::Fault(fault, 0, None) => fault.to_string(),
        Action::Fault(fault, 0, Some(worker)) => format!("{fault} on {}", Node::WORKERS[usize::from(*worker)]),
        Action::Fault(fault, connector, _) => {
            format!("{fault} on connector {}", spec.connector(usize::from(*connector)).name)
        }
        Action::Scripted(index) => match spec.scripted.get(*index).map(|txn| txn.label.as_str()) {
            Some(label) if !label.is_empty() => format!("scripted transaction {index} ({label})"),
            _ => format!("scripted transaction {index}"),
        },
    }
}

pub(super) async fn harness(spec: Spec, seed: u64, options: RunOptions) -> Outcome {
    // A scenario with a `[schedule]` runs its bound's world (as `handoff check` builds it, from
    // seed 0 and with the lens's options: the bgwriter's running-xacts records only where the
    // bound has them) and follows the path.
    let (spec, path, build_seed, build_options) = match &spec.schedule {
        Some(schedule) => {
            let (world, bounds) =
                crate::exhaustive::check::bound(&spec).expect("a scheduled scenario has a [check] bound");
            let timing = World::timing(&world, &bounds, &schedule.steps).expect("the loader checked the path");
            (world, Some((schedule.clone(), timing)), 0, World::options(&bounds))
        }
        None => (spec, None, seed, Options::default()),
    };
    let System { processes, initial_rows, connect_start_ms } = setup::build(&spec, build_seed, build_options);
    let schedule = faults::schedule(&spec, seed);
    let models: Models = processes.hold();
    let (commands_tx, mut commands_rx) = mpsc::unbounded();
    // Absolute triggers are scheduled now; moment triggers wait in the shared state.
    let mut scheduled: BTreeMap<(u64, u64), HarnessStep> = BTreeMap::new();
    let mut pending = Vec::new();
    let mut sequence = 0u64;
    let triggers = schedule
        .iter()
        .map(|fault| (fault.trigger, Action::Fault(fault.action, fault.connector, fault.worker)))
        .chain(spec.scripted.iter().enumerate().map(|(index, txn)| (txn.trigger, Action::Scripted(index))))
        .filter(|_| path.is_none());
    for (trigger, action) in triggers {
        match trigger {
            Trigger::At { at_ms } => {
                sequence += 1;
                scheduled.insert((at_ms, sequence), HarnessStep::Action(action));
            }
            Trigger::After { moment, occurrence, plus_ms } => {
                pending.push(PendingTrigger { moment, occurrence, plus_ms, action });
            }
        }
    }
    let recorder = Recorder::new(
        options.keep_trace.then(|| Vec::with_capacity(4096)),
        Checkers::new(Oracle::new(&initial_rows), spec.sink_tables())
            .outbox(&spec)
            .named(handoff_models::judge::narrate::Names::of(&spec))
            .snapshot_mode(spec.debezium.snapshot_mode)
            .messages(&spec.debezium)
            .added_tables(&spec.debezium)
            .exactly_once(spec.connect.exactly_once())
            .compaction(spec.kafka.compaction, spec.sink.null_values),
        options.max_trace_items,
    );
    let mut net = Net::new(seed, madsim::time::TimeHandle::current());
    if let Some((schedule, timing)) = &path {
        net.follow(Following::new(timing, schedule.step_ms, schedule.steps.len()));
    }
    let shared = Arc::new(RunState {
        recorder: Mutex::new(recorder),
        primary: Mutex::new(Node::Pg1),
        net: Mutex::new(net),
        moments: Mutex::new(MomentState { counts: BTreeMap::new(), pending }),
        commands: commands_tx,
        paused: Mutex::new(BTreeMap::new()),
    });
    let handle = madsim::runtime::Handle::current();
    let mut nodes = BTreeMap::new();
    // The servers first; on a path, the clients start a millisecond after the servers, so that
    // none of them finds a server not yet listening (in the world, every process is there from
    // the start). The Connect worker starts at `connector_start_ms`.
    let at_start =
        [Node::Kafka, Node::Pg1, Node::Pg2, Node::Sink, Node::App, Node::Operator, Node::Loader, Node::Consumer]
            .into_iter()
            .filter(|node| path.is_none() || !matches!(node, Node::Sink | Node::App | Node::Consumer));
    for node in at_start {
        if let Some(model) = models.handle(node) {
            nodes.insert(node, spawn_node(&handle, node, model, shared.clone()));
        }
    }
    let mut harness = Harness {
        spec: &spec,
        models: &models,
        shared: shared.clone(),
        handle,
        nodes,
        down: BTreeSet::new(),
        scheduled,
        sequence,
        following: path.is_some(),
        positions: options.keep_trace.then(Vec::new),
    };
    // The world starts every process at once.
    let connect_start_ms = if path.is_some() { 1 } else { connect_start_ms };
    harness.schedule(connect_start_ms, HarnessStep::StartConnect);
    if let Some((schedule, timing)) = &path {
        for (index, step) in schedule.steps.iter().enumerate() {
            let at_ms = (index as u64 + 1).saturating_mul(schedule.step_ms);
            match *step {
                WorldAction::RunScripted { index } => {
                    harness.schedule(at_ms, HarnessStep::Action(Action::Scripted(index)))
                }
                WorldAction::Crash { node } => harness.schedule(at_ms, HarnessStep::Crash(node)),
                WorldAction::Restart { node } => harness.schedule(at_ms, HarnessStep::Restart(node)),
                WorldAction::Pause { node } => harness.schedule(at_ms, HarnessStep::PathPause(node)),
                WorldAction::Operate { operation } => {
                    harness.schedule(at_ms, HarnessStep::Action(Action::Fault(operation.fault(), 0, None)))
                }
                // The network and the nodes' timers follow these.
                WorldAction::Deliver { .. } | WorldAction::Fire { .. } => {}
            }
        }
        // After the path: what it left down comes back, what it did not run runs, and the run
        // goes on as usual.
        let end_ms = (schedule.steps.len() as u64 + 1).saturating_mul(schedule.step_ms);
        harness.schedule(end_ms, HarnessStep::ScheduleEnd);
        for node in &timing.down_at_end {
            harness.schedule(end_ms, HarnessStep::Restart(*node));
        }
        for index in &timing.scripts_not_run {
            harness.schedule(end_ms, HarnessStep::Action(Action::Scripted(*index)));
        }
    }

    let horizon_ms = spec.acceptance.horizon_ms;
    let mut last_activity_ms = 0u64;
    let (reached, reason, limit) = loop {
        // Run what is due.
        let now = now_ms();
        while let Some((&(at_ms, seq), _)) = harness.scheduled.iter().next() {
            if at_ms > now {
                break;
            }
            let step = harness.scheduled.remove(&(at_ms, seq)).expect("present");
            harness.run_step(step, now);
            last_activity_ms = now;
        }
        harness.sample_positions(now, false);
        let workload_done = models.app.lock().expect("app").timed_done()
            && models.loader.as_ref().is_none_or(|loader| loader.lock().expect("loader").is_done());
        // The processes act on what the harness just did before anything is judged.
        if workload_done && harness.scheduled.is_empty() && now > last_activity_ms {
            if let Some((reached, reason)) = harness.acceptance() {
                break (reached, reason, None);
            }
            if now.saturating_sub(last_activity_ms) > spec.acceptance.timeout_ms {
                break (false, harness.stuck_reason(spec.acceptance.timeout_ms, last_activity_ms), None);
            }
        } else {
            last_activity_ms = last_activity_ms.max(now);
        }
        if now >= horizon_ms {
            let limit = RunLimit::Horizon { horizon_ms };
            break (false, harness.limit_reason(limit), Some(limit));
        }
        // Wait for the next scheduled step, a command from a node, the next check, or the horizon.
        let next_check = now.saturating_add(ACCEPTANCE_CHECK_INTERVAL_MS).min(horizon_ms);
        let wake_at = harness.scheduled.keys().next().map_or(next_check, |(at, _)| (*at).min(next_check));
        let sleep = sleep_until_ms(wake_at);
        futures::pin_mut!(sleep);
        match select(commands_rx.next(), sleep).await {
            Either::Left((Some(Command::Run { at_ms, action }), _)) => {
                harness.sequence += 1;
                harness.scheduled.insert((at_ms, harness.sequence), HarnessStep::Action(action));
            }
            Either::Left((Some(Command::OverBudget), _)) => {
                let recorder = shared.recorder.lock().expect("recorder");
                let limit = RunLimit::TraceBudget { items: recorder.items, budget: recorder.max_items };
                drop(recorder);
                break (false, harness.limit_reason(limit), Some(limit));
            }
            Either::Left((Some(Command::Exit(node)), _)) => harness.kill(node),
            Either::Left((None, _)) | Either::Right(_) => {}
        }
    };
    let at = SimTime(now_ms());
    harness.sample_positions(at.ms(), true);
    let positions = harness.positions.take().unwrap_or_default();
    let sink_docs = models.sink.lock().expect("sink").docs.to_list();
    let sink_checkpoint = {
        let kafka = models.kafka.lock().expect("kafka");
        kafka
            .groups
            .get(&spec.sink.group)
            .map(|committed| committed.iter().map(|(tp, offset)| (*tp, *offset)).collect())
            .unwrap_or_default()
    };
    let unfired = shared
        .moments
        .lock()
        .expect("moments")
        .pending
        .iter()
        .map(|trigger| {
            let occurrence =
                if trigger.occurrence > 1 { format!("occurrence {} of ", trigger.occurrence) } else { String::new() };
            format!(
                "{}, waiting for {occurrence}the moment {}, which never came",
                describe_action(&spec, &trigger.action),
                trigger.moment.name()
            )
        })
        .chain(harness.scheduled.iter().map(|((at_ms, _), step)| {
            format!("{} due at {}, after the run ended", describe_step(&spec, step), SimTime(*at_ms))
        }))
        .collect();
    // A run cut by a limit is undecided: a pipeline still at work then is no liveness finding.
    let liveness = match limit {
        Some(_) => None,
        None => harness.liveness_finding(reached, &reason, at, spec.acceptance.timeout_ms),
    };
    let failed_closed = (!reached && limit.is_none() && liveness.is_none()).then(|| FailedClosed {
        at,
        status: models.worker_of(0).lock().expect("connect").status(),
        reason: reason.clone(),
    });
    // How the run ended, typed: the acceptance check on the state the run ended in (nothing ran
    // since the loop decided), or the limit it reached.
    let end = match limit {
        Some(_) => RunEnd::Limit,
        None => harness
            .decision()
            .ended()
            .unwrap_or_else(|| RunEnd::TimedOut { connector: models.worker_of(0).lock().expect("connect").status() }),
    };
    debug_assert_eq!(end.reached(), reached, "the typed end says what the loop decided");
    let departures = shared.net().following().map(Following::departures).unwrap_or_default();
    harness.tear_down().await;
    drop(harness);
    let recorder = {
        let mut recorder = shared.recorder.lock().expect("recorder");
        std::mem::replace(&mut *recorder, Recorder::new(None, Checkers::new(Oracle::new(&[]), Vec::new()), 0))
    };
    Outcome {
        recorder,
        schedule,
        boundary: Boundary { at, reached, reason, end, sink: sink_docs },
        limit,
        liveness,
        failed_closed,
        sink_checkpoint,
        unfired,
        departures,
        positions,
    }
}

/// What the harness runs at a scheduled time.
#[derive(Clone, Debug)]
enum HarnessStep {
    StartConnect,
    Action(Action),
    Restart(Node),
    Promote,
    Inject {
        to: Node,
        from: Node,
        msg: Msg,
    },
    Unclog(Node, Node),
    /// A path's crash (the exhaustive world's `crash NODE`).
    Crash(Node),
    /// A path has been followed to its end.
    ScheduleEnd,
    /// A worker that shut down cleanly is started again (its process ended when it left).
    Respawn(Node),
    /// A group's second or third worker starts.
    StartWorker(Node),
    /// A process's stop-the-world pause ends.
    PauseEnds(Node),
    /// A path's pause of a Connect worker (the exhaustive world's `pause NODE`): its peers act
    /// as they do once the pause has outlasted the worker's session and `wal_sender_timeout`.
    PathPause(Node),
}

/// How long after the first worker of a group the second starts, and after it the third.
const WORKER_START_INTERVAL_MS: u64 = 1_000;

struct Harness<'a> {
    spec: &'a Spec,
    models: &'a Models,
    shared: Arc<RunState>,
    handle: madsim::runtime::Handle,
    nodes: BTreeMap<Node, madsim::runtime::NodeHandle>,
    /// Processes killed and not yet restarted.
    down: std::collections::BTreeSet<Node>,
    scheduled: BTreeMap<(u64, u64), HarnessStep>,
    sequence: u64,
    /// The run follows a `[schedule]`.
    following: bool,
    /// The positions sampled so far, when the run keeps its trace ([`positions`]).
    positions: Option<Vec<PositionSample>>,
}

impl Harness<'_> {
    fn schedule(&mut self, at_ms: u64, step: HarnessStep) {
        self.sequence += 1;
        self.scheduled.insert((at_ms, self.sequence), step);
    }

    fn observe(&self, node: Node, observation: Observation) {
        self.shared.push(SimTime(now_ms()), node, observation);
    }

    /// Clogs (or unclogs) the network between two physical processes, both ways.
    fn clog(&mut self, a: Node, b: Node, clogged: bool) {
        if !self.nodes.contains_key(&a) || !self.nodes.contains_key(&b) {
            return;
        }
        if clogged { self.shared.net().clog(a, b) } else { self.shared.net().unclog(a, b, now_us()) }
    }

    /// Ends the run's processes so that nothing of the run outlives it. madsim drops a killed
    /// node's tasks when they are next woken; the network wakes every node loop as it closes.
    async fn tear_down(&mut self) {
        for handle in self.nodes.values() {
            self.handle.kill(handle.id());
        }
        self.shared.net().close_all();
        madsim::time::sleep(Duration::from_millis(1)).await;
    }

    /// Kills a running process (a no-op for one that is down or not started).
    fn kill(&mut self, node: Node) {
        let Some(handle) = self.nodes.get(&node) else { return };
        if !self.down.insert(node) {
            return;
        }
        self.handle.kill(handle.id());
        self.shared.unpause(node);
        // Its connections and what was on its way to it go with it; the restarted process
        // listens again when it runs.
        self.shared.net().unbind(node, now_us());
        if let Some(model) = self.models.handle(node) {
            model.lock().expect("a component's lock").crash();
        }
    }

    /// A worker silent to PostgreSQL for `silent_ms` from `now` (paused, or cut off by a clog):
    /// once `wal_sender_timeout` has passed without its status updates, its walsender ends.
    /// (pgjdbc sends one every `status.update.interval.ms`, 10 s, while it runs; the model's
    /// client does not send them, so the harness ends the walsender of a silent one instead.)
    fn wal_sender_timeout(&mut self, client: Node, silent_ms: u64, now: u64) {
        let timeout_ms = self.spec.postgres.wal_sender_timeout_ms;
        if timeout_ms == 0 || silent_ms <= timeout_ms {
            return;
        }
        let primary = self.shared.primary();
        let msg = Msg::Control(Control::WalSenderTimeout { client });
        self.schedule(now.saturating_add(timeout_ms), HarnessStep::Inject { to: primary, from: primary, msg });
    }

    /// The worker a REST call reaches: the first of the group that is up and has not shut down
    /// (`connect` when none is).
    fn rest_worker(&self) -> Node {
        self.models
            .workers()
            .map(|(node, _)| node)
            .find(|node| {
                self.nodes.contains_key(node)
                    && !self.down.contains(node)
                    && !self.models.worker(*node).is_some_and(|model| model.lock().expect("worker").has_left())
            })
            .unwrap_or(Node::Connect)
    }

    fn run_step(&mut self, step: HarnessStep, now: u64) {
        match step {
            HarnessStep::StartConnect => {
                // Following a path, every process starts at once, as in the world, but the second
                // worker a millisecond after the first: the world starts the first first, and it
                // leads.
                let late = if self.following {
                    &[Node::Sink, Node::App, Node::Consumer, Node::Connect][..]
                } else {
                    &[Node::Connect]
                };
                for &node in late {
                    if let Some(model) = self.models.handle(node) {
                        self.nodes.insert(node, spawn_node(&self.handle, node, model, self.shared.clone()));
                    }
                }
                // A group's other workers start one after another, a second apart: the first
                // worker is the group's first leader (the first member to join).
                let interval_ms = if self.following { 1 } else { WORKER_START_INTERVAL_MS };
                for (index, &node) in Node::WORKERS.iter().enumerate().skip(1) {
                    if self.models.worker(node).is_some() {
                        self.schedule(now.saturating_add(index as u64 * interval_ms), HarnessStep::StartWorker(node));
                    }
                }
            }
            HarnessStep::StartWorker(node) => {
                if let Some(model) = self.models.handle(node) {
                    self.nodes.insert(node, spawn_node(&self.handle, node, model, self.shared.clone()));
                }
            }
            HarnessStep::Restart(node) => {
                // Only a process that is down restarts (two overlapping crashes restart it once).
                if self.down.remove(&node)
                    && let Some(handle) = self.nodes.get(&node)
                {
                    self.handle.restart(handle.id());
                    self.observe(node, Observation::Restarted { process: node });
                }
            }
            HarnessStep::Promote => {
                self.shared.inject(Node::Pg2, Node::Operator, Msg::Control(Control::Promote));
                // The service name moves to the new primary; the gate hears of the failover.
                *self.shared.primary.lock().expect("primary") = Node::Pg2;
                self.schedule(
                    now,
                    HarnessStep::Inject {
                        to: Node::Operator,
                        from: Node::Operator,
                        msg: Msg::Control(Control::FailoverHappened),
                    },
                );
            }
            HarnessStep::Inject { to, from, msg } => {
                // A REST call goes to a group's worker that is up (a load balancer in front of
                // the group's REST API).
                let to =
                    if matches!(msg, Msg::Rest { .. }) && to.is_connect_worker() { self.rest_worker() } else { to };
                // A request to a process that is down or still starting (a REST call to a dead
                // worker) is refused: the operator tries again a second later while the process
                // is coming back, so every healed fault heals; one that stays down loses it.
                let refused = if self.down.contains(&to) { Some(msg) } else { self.shared.inject(to, from, msg) };
                let coming_back = !self.down.contains(&to)
                    || self.scheduled.values().any(|step| matches!(step, HarnessStep::Restart(node) if *node == to));
                if let Some(msg) = refused
                    && coming_back
                {
                    self.schedule(now.saturating_add(REQUEST_RETRY_MS), HarnessStep::Inject { to, from, msg });
                }
            }
            HarnessStep::Unclog(a, b) => self.clog(a, b, false),
            HarnessStep::Crash(node) => {
                if self.nodes.contains_key(&node) && !self.down.contains(&node) {
                    // The same observation the exhaustive world makes of a crash.
                    self.observe(node, Observation::crash_of(node));
                    self.kill(node);
                }
            }
            HarnessStep::ScheduleEnd | HarnessStep::PauseEnds(_) => {}
            HarnessStep::PathPause(node) => {
                if self.nodes.contains_key(&node) && !self.down.contains(&node) {
                    // The same observation, and the same requests, as the world's pause.
                    self.observe(node, Observation::PausedPastTimeouts);
                    let expired = Msg::Control(Control::GroupSessionOutlasted { worker: node });
                    self.shared.inject(Node::Kafka, Node::Kafka, expired);
                    let timeout = Msg::Control(Control::WalSenderTimeout { client: node });
                    self.shared.inject(self.shared.primary(), self.shared.primary(), timeout);
                }
            }
            HarnessStep::Respawn(node) => {
                if !self.down.contains(&node) {
                    self.kill(node);
                }
                if self.down.remove(&node)
                    && let Some(handle) = self.nodes.get(&node)
                {
                    self.handle.restart(handle.id());
                    self.observe(node, Observation::Restarted { process: node });
                }
            }
            HarnessStep::Action(Action::Scripted(index))
                if let Some(handoff_models::components::app::StepKind::ConnectorConfig { version }) =
                    self.spec.scripted.get(index).map(|txn| &txn.step.kind) =>
            {
                // A configuration update is the operator's REST call, not the application's.
                let update = Control::UpdateConfig { connector: 0, version: *version };
                self.shared.inject(Node::Operator, Node::Operator, Msg::Control(update));
            }
            HarnessStep::Action(Action::Scripted(index)) => {
                // At the very start the application may not be listening yet (a session's later
                // step without an `at` is due at 0): try again a millisecond later.
                if self.shared.inject(Node::App, Node::App, Msg::Control(Control::RunScripted { index })).is_some() {
                    self.schedule(now.saturating_add(1), HarnessStep::Action(Action::Scripted(index)));
                }
            }
            HarnessStep::Action(Action::Fault(fault, connector, worker)) => {
                // A worker's fault without a worker: the worker running the first connector's task
                // now (with one worker, or none running it, `connect`).
                // A task's kill: the worker running that connector's task.
                let task_of = if matches!(fault, FaultAction::KillConnectorTask { .. }) { connector } else { 0 };
                let worker = match worker {
                    Some(index) => Node::WORKERS[usize::from(index)],
                    None => self
                        .models
                        .workers()
                        .find(|(_, model)| model.lock().expect("worker").runs_task(usize::from(task_of)))
                        .map_or(Node::Connect, |(node, _)| node),
                };
                // What the harness observes of a connector's fault is that connector's.
                let tag = |observation: Observation| Observation::of_connector(connector, observation);
                let target = match fault {
                    FaultAction::KillConnectWorker { .. }
                    | FaultAction::StopConnectWorker { .. }
                    | FaultAction::PauseConnectWorker { .. } => worker,
                    // A REST call: to a worker that is up (in a group, any serves it).
                    FaultAction::StopConnector { .. } => self.rest_worker(),
                    FaultAction::KillConnectorTask { .. } => worker,
                    FaultAction::RecreateSlot | FaultAction::RebuildConnector | FaultAction::AdvanceSlot { .. } => {
                        Node::Operator
                    }
                    FaultAction::CrashPostgres { .. }
                    | FaultAction::FailOverToStandby { .. }
                    | FaultAction::WalBurst { .. }
                    | FaultAction::Checkpoint => self.shared.primary(),
                    FaultAction::Clog { between: (a, _), .. } => a,
                    FaultAction::KillConsumer { .. } => Node::Consumer,
                    FaultAction::HangTransaction { .. } => Node::Kafka,
                };
                // Kills and requests (REST calls, the task kill) need their process up.
                let needs_process = matches!(
                    fault,
                    FaultAction::KillConnectWorker { .. }
                        | FaultAction::StopConnectWorker { .. }
                        | FaultAction::PauseConnectWorker { .. }
                        | FaultAction::KillConsumer { .. }
                        | FaultAction::CrashPostgres { .. }
                        | FaultAction::FailOverToStandby { .. }
                        | FaultAction::StopConnector { .. }
                        | FaultAction::KillConnectorTask { .. }
                );
                let absent = !self.nodes.contains_key(&target) || self.down.contains(&target);
                let left = target.is_connect_worker()
                    && self.models.worker(target).is_some_and(|model| model.lock().expect("worker").has_left());
                let refused = if target.is_connect_worker() && !self.nodes.contains_key(&target) {
                    Some("the Connect worker has not started yet")
                } else if left {
                    Some("the Connect worker has shut down and is not running")
                } else if needs_process && absent {
                    Some(match (fault, target) {
                        (FaultAction::StopConnector { .. }, _) => {
                            "the Connect worker is down: the REST call is refused (connection refused)"
                        }
                        (FaultAction::KillConnectorTask { .. }, _) => "the Connect worker is down: no task runs",
                        (_, node) if node.is_connect_worker() => "the Connect worker is already down",
                        (_, Node::Consumer) if !self.nodes.contains_key(&Node::Consumer) => {
                            "the scenario has no outbox consumer"
                        }
                        (_, Node::Consumer) => "the outbox consumer is already down",
                        _ => "the primary is already down",
                    })
                } else if matches!(fault, FaultAction::FailOverToStandby { .. })
                    && !(target == Node::Pg1 && self.models.pg2.is_some())
                {
                    Some(if self.models.pg2.is_some() {
                        "no standby is left to promote: pg2 has been the primary since an earlier failover, and the \
                         old primary does not come back"
                    } else {
                        "there is no standby to promote: add [postgres.standby]"
                    })
                } else if let FaultAction::Clog { between: (a, b), .. } = fault
                    && [a, b].iter().any(|node| *node != Node::Postgres && !self.nodes.contains_key(node))
                {
                    Some("one of the two processes is not part of this system")
                } else {
                    None
                };
                if let Some(reason) = refused {
                    self.observe(target, tag(Observation::FaultRefused { action: fault, reason: reason.into() }));
                    return;
                }
                self.observe(target, tag(Observation::Fault { action: fault }));
                match fault {
                    FaultAction::KillConsumer { restart_after_ms } => {
                        self.kill(Node::Consumer);
                        if let Some(after) = restart_after_ms {
                            self.schedule(now.saturating_add(after), HarnessStep::Restart(Node::Consumer));
                        }
                    }
                    FaultAction::KillConnectWorker { restart_after_ms } => {
                        if self.nodes.contains_key(&target) {
                            self.kill(target);
                            if let Some(after) = restart_after_ms {
                                self.schedule(now.saturating_add(after), HarnessStep::Restart(target));
                            }
                        }
                    }
                    FaultAction::StopConnectWorker { restart_after_ms } => {
                        self.shared.inject(target, Node::Operator, Msg::Control(Control::ShutdownWorker));
                        if let Some(after) = restart_after_ms {
                            self.schedule(now.saturating_add(after), HarnessStep::Respawn(target));
                        }
                    }
                    FaultAction::PauseConnectWorker { duration_ms } => {
                        self.shared.pause(target, now_us().saturating_add(duration_ms.saturating_mul(1_000)));
                        self.wal_sender_timeout(target, duration_ms, now);
                        // The run is not judged while the process is paused: what reached it
                        // waits, its end of the story is still to come.
                        self.schedule(now.saturating_add(duration_ms), HarnessStep::PauseEnds(target));
                    }
                    FaultAction::StopConnector { resume_after_ms } => {
                        self.shared.inject(target, Node::Operator, Msg::Rest { connector, request: RestRequest::Stop });
                        if let Some(after) = resume_after_ms {
                            self.schedule(
                                now.saturating_add(after),
                                HarnessStep::Inject {
                                    to: Node::Connect,
                                    from: Node::Operator,
                                    msg: Msg::Rest { connector, request: RestRequest::Resume },
                                },
                            );
                        }
                    }
                    FaultAction::CrashPostgres { restart_after_ms } => {
                        self.kill(target);
                        self.schedule(now.saturating_add(restart_after_ms), HarnessStep::Restart(target));
                    }
                    FaultAction::RecreateSlot => {
                        self.shared.inject(
                            Node::Operator,
                            Node::Operator,
                            Msg::Control(Control::RecreateSlot { connector }),
                        );
                    }
                    FaultAction::RebuildConnector => {
                        self.shared.inject(
                            Node::Operator,
                            Node::Operator,
                            Msg::Control(Control::Rebuild { connector }),
                        );
                    }
                    FaultAction::AdvanceSlot { to_lsn } => {
                        self.shared.inject(
                            Node::Operator,
                            Node::Operator,
                            Msg::Control(Control::AdvanceSlot { connector, to: to_lsn }),
                        );
                    }
                    FaultAction::KillConnectorTask { restart_after_ms } => {
                        self.shared.inject(target, Node::Operator, Msg::Control(Control::KillTask { connector }));
                        if let Some(after) = restart_after_ms {
                            self.schedule(
                                now.saturating_add(after),
                                HarnessStep::Inject {
                                    to: Node::Connect,
                                    from: Node::Operator,
                                    msg: Msg::Rest { connector, request: RestRequest::RestartTask },
                                },
                            );
                        }
                    }
                    FaultAction::WalBurst { bytes } => {
                        self.shared.inject(target, Node::Operator, Msg::Control(Control::WalBurst { bytes }));
                    }
                    FaultAction::HangTransaction { abort_after_ms } => {
                        self.shared.inject(target, Node::Operator, Msg::Control(Control::HangTransaction));
                        if let Some(after) = abort_after_ms {
                            let abort = Msg::Control(Control::AbortHangingTransactions);
                            let step = HarnessStep::Inject { to: Node::Kafka, from: Node::Operator, msg: abort };
                            self.schedule(now.saturating_add(after), step);
                        }
                    }
                    FaultAction::Checkpoint => {
                        self.shared.inject(target, Node::Operator, Msg::Control(Control::Checkpoint));
                    }
                    FaultAction::Clog { between: (a, b), duration_ms } => {
                        let physical = |node: Node| if node == Node::Postgres { self.shared.primary() } else { node };
                        let (a, b) = (physical(a), physical(b));
                        self.clog(a, b, true);
                        self.schedule(now.saturating_add(duration_ms), HarnessStep::Unclog(a, b));
                        for (server, client) in [(a, b), (b, a)] {
                            if matches!(server, Node::Pg1 | Node::Pg2) && client.is_connect_worker() {
                                self.wal_sender_timeout(client, duration_ms, now);
                            }
                        }
                    }
                    FaultAction::FailOverToStandby { promote_after_ms } => {
                        if target == Node::Pg1 && self.models.pg2.is_some() {
                            self.kill(Node::Pg1);
                            self.schedule(now.saturating_add(promote_after_ms), HarnessStep::Promote);
                        }
                    }
                }
            }
        }
    }

    /// Samples the positions at `now`: kept when something moved since the last sample (a
    /// quiet stretch is one sample, however long), or when it is the run's `last`; one sample per
    /// millisecond (a later one replaces it).
    fn sample_positions(&mut self, now: u64, last: bool) {
        let Some(samples) = self.positions.as_mut() else { return };
        let sample =
            positions::sample(self.spec, self.models, now, self.shared.primary(), |node| self.down.contains(&node));
        if samples.last().is_some_and(|previous| previous.at_ms == now) {
            samples.pop();
        }
        let unchanged = samples.last().is_some_and(|previous| previous.same_positions(&sample));
        if !unchanged || last {
            samples.push(sample);
        }
    }

    /// The primary's last event connector `connector` captures: a commit that touched a table
    /// it captures, or a logical message it captures.
    fn last_captured_commit(&self, connector: usize) -> Option<Lsn> {
        let primary = match self.shared.primary() {
            Node::Pg2 => self.models.pg2.as_ref().expect("pg2 exists").clone(),
            _ => self.models.pg1.clone(),
        };
        let debezium = self.spec.connector(connector);
        primary.lock().expect("pg").last_captured_event(&debezium.tables, |prefix| debezium.awaits_message(prefix))
    }

    /// `Some((reached, reason))` when the run can end.
    fn acceptance(&self) -> Option<(bool, String)> {
        let end = self.decision().ended()?;
        Some((end.reached(), end.reason().unwrap_or_default()))
    }

    /// Where the run stands ([`acceptance::decide`]), with what this lens knows: an operator's
    /// procedure stops the connector on its way to resuming it; the worker's node may be down;
    /// the connector's stream may have been forwarded past its offset.
    fn decision(&self) -> acceptance::Acceptance {
        let held = self.models.operator.lock().expect("operator").is_busy();
        let recorder = self.shared.recorder.lock().expect("recorder");
        acceptance::decide(
            self.models,
            acceptance::Circumstances {
                held,
                connect_up: self.nodes.contains_key(&Node::Connect),
                stream_start: recorder.stream_start,
                evidence: &recorder.checkers.evidence,
                last_captured_commit: |connector| self.last_captured_commit(connector),
            },
        )
    }

    /// Why the run ended at a limit, in the words of the boundary's reason.
    fn limit_reason(&self, limit: RunLimit) -> String {
        let status = self.models.worker_of(0).lock().expect("connect").status();
        format!(
            "the run reached {limit} before its acceptance boundary (connector {status}); the boundary's checks \
             were not made"
        )
    }

    fn stuck_reason(&self, timeout_ms: u64, last_activity_ms: u64) -> String {
        // Each connector as the worker running its task sees it (in a group, any worker).
        let workers: Vec<handoff_models::components::connect::ConnectWorker> = (0..self.spec.connector_count())
            .map(|c| self.models.worker_of(c).lock().expect("connect").clone())
            .collect();
        let state = |connector: &handoff_models::components::connect::Connector| {
            format!(
                "{}, {}",
                connector.status(),
                connector
                    .debezium_phase()
                    .map_or_else(|| "no task running".into(), |phase| format!("its task is {}", phase.describe()))
            )
        };
        // With several connectors, each by name, and whether it processed what it captures.
        let states = if workers.len() == 1 {
            format!("connector {}", state(&workers[0].connectors[0]))
        } else {
            let words: Vec<String> = workers
                .iter()
                .enumerate()
                .map(|(c, worker)| {
                    let connector = &worker.connectors[c];
                    let behind = match (self.last_captured_commit(c), connector.processed_upto()) {
                        (Some(last), Some(processed)) if processed < last => {
                            format!("; it has not processed the commit at {last} it captures")
                        }
                        (Some(last), None) => format!("; it has not processed the commit at {last} it captures"),
                        _ => String::new(),
                    };
                    format!("{} {}{behind}", connector.debezium.name, state(connector))
                })
                .collect();
            format!("connectors: {}", words.join("; "))
        };
        let hanging: Vec<String> = {
            let kafka = self.models.kafka.lock().expect("kafka");
            let names = handoff_models::judge::narrate::Names::of(self.spec);
            kafka
                .hanging_transactions()
                .into_iter()
                .map(|(tp, first)| format!("{}@{first}", names.partition(tp)))
                .collect()
        };
        let hanging = if hanging.is_empty() {
            String::new()
        } else {
            format!(
                "; a hanging transaction (open on its partition, unknown to the transaction coordinator) holds \
                 the last stable offset at {}: read_committed consumers wait there, and nothing reports an error",
                hanging.join(", ")
            )
        };
        format!(
            "the pipeline did not catch up within acceptance.timeout_ms={timeout_ms} after the last fault or \
             transaction at {} ({states}){hanging}",
            SimTime(last_activity_ms),
        )
    }

    /// I11 honest liveness ([`honest_liveness`]).
    fn liveness_finding(&self, reached: bool, reason: &str, at: SimTime, timeout_ms: u64) -> Option<Finding> {
        honest_liveness::check(self.models, &honest_liveness::RunEnded { reached, reason, at, timeout_ms })
    }
}
