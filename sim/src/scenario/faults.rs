//! `[[fault]]` and `[fault_profile]`: the faults of a run, given or drawn per seed.

use super::fields::{Cx, Field, Horizon, Res, Section};
use super::toml_text::duration_text;
use super::tree::Val;
use super::units::{DURATION_UNITS, duration_ms, unknown_moment, with_unit};
use handoff_models::core::ids::Node;
use handoff_models::core::lsn::Lsn;
use handoff_models::scenario::faults::System;
use handoff_models::scenario::spec::Fault;
use handoff_models::scenario::spec::FaultAction;
use handoff_models::scenario::spec::FaultKind;
use handoff_models::scenario::spec::FaultProfile;
use handoff_models::scenario::spec::Moment;
use handoff_models::scenario::spec::Spec;

/// `connectors`: the names of the run's connectors, in `[[connector]]` order.
pub(super) fn faults(
    cx: &Cx,
    root: &Section,
    system: System,
    connectors: &[String],
    horizon: &Horizon,
) -> Res<Vec<Fault>> {
    let Some(field) = root.get("fault") else { return Ok(Vec::new()) };
    cx.items(&field, "an array of tables ([[fault]])")?
        .iter()
        .map(|item| fault(cx, item, system, connectors, horizon))
        .collect()
}

/// The actions that act on one connector (its REST API, its task, its slot).
fn acts_on_a_connector(kind: FaultKind) -> bool {
    matches!(
        kind,
        FaultKind::StopConnector
            | FaultKind::KillConnectorTask
            | FaultKind::RecreateSlot
            | FaultKind::RebuildConnector
            | FaultKind::AdvanceSlot
    )
}

/// The fields of `[[fault]]` besides `at` and `action`.
const FAULT_FIELDS: [&str; 9] = [
    "restart_after_ms",
    "worker",
    "resume_after_ms",
    "promote_after_ms",
    "between",
    "duration_ms",
    "bytes",
    "to_lsn",
    "abort_after_ms",
];

/// The fields an action takes, besides `at` and `action`.
fn fault_fields(kind: FaultKind) -> &'static [&'static str] {
    match kind {
        FaultKind::KillConnectWorker | FaultKind::StopConnectWorker => &["restart_after_ms", "worker"],
        FaultKind::PauseConnectWorker => &["duration_ms", "worker"],
        FaultKind::KillConnectorTask | FaultKind::CrashPostgres | FaultKind::KillConsumer => &["restart_after_ms"],
        FaultKind::StopConnector => &["resume_after_ms"],
        FaultKind::FailOverToStandby => &["promote_after_ms"],
        FaultKind::Clog => &["between", "duration_ms"],
        FaultKind::WalBurst => &["bytes"],
        FaultKind::AdvanceSlot => &["to_lsn"],
        FaultKind::HangTransaction => &["abort_after_ms"],
        FaultKind::RecreateSlot | FaultKind::RebuildConnector | FaultKind::Checkpoint => &[],
    }
}

fn fault(cx: &Cx, item: &Field, system: System, connectors: &[String], horizon: &Horizon) -> Res<Fault> {
    let s = cx.section(item)?;
    s.check_keys(cx, &format!("at action connector {}", FAULT_FIELDS.join(" ")), "field")?;
    let trigger = s.req(cx, "at", |field| cx.trigger(field, horizon))?;
    let action_field = s.need(cx, "action", "")?;
    let kind = cx.choice(&action_field, &FaultKind::ALL.map(|kind| (kind.name(), kind)))?;
    let action = kind.name();
    let takes = fault_fields(kind);
    for key in FAULT_FIELDS.into_iter().filter(|key| !takes.contains(key)) {
        if let Some(field) = s.get(key) {
            let takes = if takes.is_empty() { "no other field".to_owned() } else { takes.join(" and ") };
            return cx.fail(&field, format!("does not apply to action {action} (it takes {takes})"));
        }
    }
    if let Some(problem) = missing_process(kind, system) {
        return cx.fail(&action_field, problem);
    }
    // Which connector: named when the worker runs several.
    let connector = match s.get("connector") {
        Some(field) if !acts_on_a_connector(kind) => {
            return cx.fail(&field, format!("does not apply to action {action}, which acts on no single connector"));
        }
        Some(field) => {
            let name = cx.owned(&field)?;
            match connectors.iter().position(|known| *known == name) {
                Some(index) => index as u8,
                None => {
                    return cx.fail(
                        &field,
                        format!("no connector is named `{name}` (the connectors: {})", connectors.join(", ")),
                    );
                }
            }
        }
        None if acts_on_a_connector(kind) && connectors.len() > 1 => {
            return cx.fail(
                &action_field,
                format!(
                    "the worker runs {} connectors: name the one action {action} acts on with connector = \"…\" ({})",
                    connectors.len(),
                    connectors.join(", ")
                ),
            );
        }
        None => 0,
    };
    let needed = |key: &str| s.need(cx, key, &format!(" (required by action {action})"));
    // Delays are times of the run: within its horizon.
    let optional = |key: &str| s.get(key).map(|field| cx.time_ms(&field, 0, horizon)).transpose();
    let required = |key: &str| needed(key).and_then(|field| cx.time_ms(&field, 0, horizon));
    let action = match kind {
        FaultKind::KillConnectWorker => {
            FaultAction::KillConnectWorker { restart_after_ms: optional("restart_after_ms")? }
        }
        FaultKind::KillConnectorTask => {
            FaultAction::KillConnectorTask { restart_after_ms: optional("restart_after_ms")? }
        }
        FaultKind::StopConnector => FaultAction::StopConnector { resume_after_ms: optional("resume_after_ms")? },
        FaultKind::CrashPostgres => FaultAction::CrashPostgres { restart_after_ms: required("restart_after_ms")? },
        FaultKind::FailOverToStandby => {
            FaultAction::FailOverToStandby { promote_after_ms: required("promote_after_ms")? }
        }
        FaultKind::RecreateSlot => FaultAction::RecreateSlot,
        FaultKind::RebuildConnector => FaultAction::RebuildConnector,
        FaultKind::Clog => FaultAction::Clog {
            between: clog_between(cx, &needed("between")?, system)?,
            duration_ms: needed("duration_ms").and_then(|field| cx.time_ms(&field, 1, horizon))?,
        },
        FaultKind::WalBurst => FaultAction::WalBurst { bytes: wal_burst_bytes(cx, &needed("bytes")?)? },
        FaultKind::Checkpoint => FaultAction::Checkpoint,
        FaultKind::AdvanceSlot => {
            FaultAction::AdvanceSlot { to_lsn: s.get("to_lsn").map(|field| advance_target(cx, &field)).transpose()? }
        }
        FaultKind::KillConsumer => FaultAction::KillConsumer { restart_after_ms: optional("restart_after_ms")? },
        FaultKind::HangTransaction => FaultAction::HangTransaction { abort_after_ms: optional("abort_after_ms")? },
        FaultKind::StopConnectWorker => {
            FaultAction::StopConnectWorker { restart_after_ms: optional("restart_after_ms")? }
        }
        FaultKind::PauseConnectWorker => FaultAction::PauseConnectWorker {
            duration_ms: needed("duration_ms").and_then(|field| cx.time_ms(&field, 1, horizon))?,
        },
    };
    // Which worker: `worker = 2` is `connect-2` (1 to the group's size; `connect` by default).
    let worker = match s.get("worker") {
        Some(field) => match field.item.val {
            Val::Int(Some(value)) if (1..=i64::from(system.workers)).contains(&value) => Some((value - 1) as u8),
            Val::Int(_) => {
                let workers = system.workers;
                return cx.fail(
                    &field,
                    if workers == 1 {
                        "the scenario has one Connect worker (worker = 1); a group has [connect] workers = 2 or 3"
                            .to_owned()
                    } else {
                        format!("the group has {workers} workers: worker is 1 to {workers}")
                    },
                );
            }
            _ => return cx.wrong(&field, "an integer"),
        },
        None => None,
    };
    Ok(Fault { trigger, action, connector, worker })
}

/// `between = ["connect", "postgres"]`: two distinct processes.
/// Why a fault kind cannot act on the scenario's system, if it cannot.
fn missing_process(kind: FaultKind, system: System) -> Option<&'static str> {
    match kind {
        FaultKind::FailOverToStandby if !system.standby => {
            Some("fail-over-to-standby needs a standby: add [postgres.standby]")
        }
        FaultKind::KillConsumer if !system.consumer => {
            Some("kill-consumer needs the outbox's consumer: add [consumer]")
        }
        FaultKind::HangTransaction if !system.transactions => Some(
            "hang-transaction needs transactions: the workers' exactly.once.source.support = \"enabled\" ([connect])",
        ),
        FaultKind::StopConnectWorker if system.workers < 2 => Some(
            "stop-connect-worker is a group member's clean shutdown (it leaves the group): set [connect] workers = 2 \
             or 3",
        ),
        _ => None,
    }
}

fn clog_between(cx: &Cx, field: &Field, system: System) -> Res<(Node, Node)> {
    let items = cx.items(field, "an array of two process names, like [\"connect\", \"postgres\"]")?;
    let [first, second] = items.as_slice() else {
        let count = items.len();
        return cx.fail(field, format!("expected two process names, found {count}; like [\"connect\", \"postgres\"]"));
    };
    // A clog can name any process: the database service and the machines.
    let nodes = Node::ALL.map(|node| (node.name(), node));
    let (a, b) = (cx.choice(first, &nodes)?, cx.choice(second, &nodes)?);
    if a == b {
        return cx.fail(second, format!("a clog is between two different processes; `{a}` is named twice"));
    }
    if let Some(item) =
        [(first, a), (second, b)].into_iter().find(|(_, node)| *node == Node::Consumer && !system.consumer)
    {
        return cx.fail(item.0, "the scenario has no outbox consumer: add [consumer]");
    }
    if let Some(item) = [(first, a), (second, b)].into_iter().find(|(_, node)| *node == Node::Pg2 && !system.standby) {
        return cx.fail(item.0, "pg2 is the standby: add [postgres.standby]");
    }
    if let Some((item, node)) = [(first, a), (second, b)]
        .into_iter()
        .find(|(_, node)| node.worker_index().is_some_and(|index| index >= usize::from(system.workers)))
    {
        return cx.fail(
            item,
            format!("the scenario has no {node}: the group has {} worker(s) ([connect] workers)", system.workers),
        );
    }
    Ok((a, b))
}

/// `to_lsn = "0/1A2B3C8"`: the target of a hand-advanced slot, a valid LSN as PostgreSQL writes
/// it (`pg_replication_slot_advance` refuses 0/0: "invalid target WAL LSN").
fn advance_target(cx: &Cx, field: &Field) -> Res<Lsn> {
    let text = cx.string(field)?;
    match Lsn::parse(text.trim()) {
        Some(lsn) if lsn.is_valid() => Ok(lsn),
        Some(_) => cx.fail(
            field,
            "0/0 is not a target PostgreSQL accepts (invalid target WAL LSN); omit to_lsn to advance to the WAL end",
        ),
        None => cx.fail(field, format!("`{text}` is not an LSN; expected two hexadecimal numbers like \"0/1A2B3C8\"")),
    }
}

/// The most WAL a burst may write.
const MAX_WAL_BURST: u64 = 64 << 30;

/// `bytes = "64MB"`: 1 byte to 64GB.
fn wal_burst_bytes(cx: &Cx, field: &Field) -> Res<u64> {
    let text = cx.string(field)?;
    let Some(bytes) = with_unit(text, &handoff_models::core::units::SIZE_UNITS) else {
        return cx.fail(
            field,
            format!("`{text}` is not a size; expected a number and a unit (B, kB, MB, GB), like \"64MB\""),
        );
    };
    if !(1..=MAX_WAL_BURST).contains(&bytes) {
        return cx.fail(field, format!("`{text}` is out of range; expected 1B to 64GB"));
    }
    Ok(bytes)
}

/// `[fault_profile]`: faults generated per seed (swarm testing).
pub(super) fn fault_profile(cx: &Cx, s: &Section, system: System, horizon: &Horizon) -> Res<FaultProfile> {
    s.check_keys(cx, "kinds max_faults window moments", "field")?;
    let kinds_field = s.need(cx, "kinds", "; name the fault actions the seed may draw, like [\"clog\"]")?;
    let kinds = listed_once(cx, &kinds_field, "an array of fault actions, like [\"clog\"]", |item| {
        let kind = cx.choice(item, &FaultKind::ALL.map(|kind| (kind.name(), kind)))?;
        if let Some(problem) = missing_process(kind, system) {
            return cx.fail(item, problem);
        }
        Ok(kind)
    })?;
    if kinds.is_empty() {
        return cx.fail(&kinds_field, "must name at least one fault action");
    }
    let max_faults = s.opt("max_faults", 3, |field| cx.int(field, 0, 20).map(|value| value as u32))?;
    // The default window is the first minute, or the whole run if its horizon is shorter.
    let window_ms = s.opt("window", (0, horizon.ms.min(60_000)), |field| window(cx, field, horizon))?;
    let moments = s.opt("moments", Vec::new(), |field| {
        listed_once(cx, field, "an array of moments, like [\"snapshot-completed\"]", |item| {
            let text = cx.string(item)?;
            match Moment::parse(text) {
                Some(moment) => Ok(moment),
                None => cx.fail(item, unknown_moment(text)),
            }
        })
    })?;
    Ok(FaultProfile { kinds, max_faults, window_ms, moments })
}

/// The elements of an array, each read by `read` and none twice.
fn listed_once<T: PartialEq>(cx: &Cx, field: &Field, expected: &str, read: impl Fn(&Field) -> Res<T>) -> Res<Vec<T>> {
    let mut values = Vec::new();
    for item in cx.items(field, expected)? {
        let value = read(&item)?;
        if values.contains(&value) {
            return cx.fail(&item, format!("`{}` is listed twice", cx.string(&item)?));
        }
        values.push(value);
    }
    Ok(values)
}

/// `window = ["0s", "60s"]`: two times within the horizon, the start not after the end.
fn window(cx: &Cx, field: &Field, horizon: &Horizon) -> Res<(u64, u64)> {
    let items = cx.items(field, "an array of two times, like [\"0s\", \"60s\"]")?;
    let [start, end] = items.as_slice() else {
        return cx.fail(field, format!("expected two times, found {}; like [\"0s\", \"60s\"]", items.len()));
    };
    let time = |item: &Field| {
        let text = cx.string(item)?;
        match duration_ms(text) {
            Some(ms) if ms <= horizon.ms => Ok(ms),
            Some(_) => cx.fail(
                item,
                format!(
                    "`{text}` is out of range; expected 0s to {}, {}",
                    duration_text(horizon.ms),
                    horizon.describe()
                ),
            ),
            None => cx.fail(item, format!("`{text}` is not a time; expected a number and a unit ({DURATION_UNITS})")),
        }
    };
    let (start_ms, end_ms) = (time(start)?, time(end)?);
    if start_ms > end_ms {
        let (from, to) = (cx.string(start)?, cx.string(end)?);
        return cx.fail(field, format!("the start ({from}) is after the end ({to})"));
    }
    Ok((start_ms, end_ms))
}

/// The `--set` that lets a profile draw every fault kind the scenario's system can take
/// (`sweep --all-faults`): all of them, less `fail-over-to-standby` without a standby and
/// `kill-consumer` without the outbox's consumer.
pub fn every_fault_kind(spec: &Spec) -> String {
    every_fault_kind_with(System::of(spec))
}

/// As [`every_fault_kind`], for a system with or without a standby and a consumer. With the
/// default system (no standby, no consumer, no transactions), the kinds every system takes, one
/// worker or a group: what a probe can load anywhere.
pub fn every_fault_kind_with(system: System) -> String {
    use handoff_models::scenario::spec::FaultKind;
    let applies = |kind: FaultKind| {
        if system == System::default() {
            [1, 3]
                .into_iter()
                .all(|workers| handoff_models::scenario::faults::applies(kind, System { workers, ..System::default() }))
        } else {
            handoff_models::scenario::faults::applies(kind, system)
        }
    };
    let kinds: Vec<String> = FaultKind::ALL
        .iter()
        .filter(|kind| applies(**kind))
        // A slot advanced by hand discards what it skips by the operator's choice: not a fault a
        // design is asked to survive, so `--all-faults` leaves it out (a profile may name it).
        .filter(|kind| **kind != FaultKind::AdvanceSlot)
        .map(|kind| format!("\"{}\"", kind.name()))
        .collect();
    format!("fault_profile.kinds=[{}]", kinds.join(", "))
}
