//! The sections: the whole file, and the sections of the pipeline's processes (`[postgres]`,
//! `[[table]]`, `[connect]`, `[kafka]`, `[sink]`, `[handoff]`, `[failover]`, `[acceptance]`).

use super::Loaded;
use super::bound::{check, schedule};
use super::catalogue::{NotModelledList, classify, postgres_kind, postgres_names, worker_kind, worker_names};
use super::connector::{connector, prop_bool};
use super::faults::{fault_profile, faults};
use super::fields::{Cx, Field, Horizon, Res, Section, out_of_range};
use super::prediction::prediction;
use super::toml_text::{duration_text, size_text};
use super::tree::Val;
use super::units::{DURATION_UNITS, duration_ms, with_unit};
use super::workload::workload;
use handoff_models::components::connect::debezium::{DebeziumConfig, OffsetMismatchStrategy};
use handoff_models::components::connect::{ConnectConfig, ExactlyOnceSourceSupport};
use handoff_models::components::consumer::{ConsumerConfig, InboxRule};
use handoff_models::components::kafka::{Compaction, KafkaSection, TRANSACTION_ABORT_SWEEP_INTERVAL_MS};
use handoff_models::components::operator::GatePolicy;
use handoff_models::components::postgres::PostgresSection;
use handoff_models::components::sink::ApplyRule;
use handoff_models::components::sink::{NullValues, SinkConfig};
use handoff_models::core::change::ReplicaIdentity;
use handoff_models::core::ids::UniqueColumn;
use handoff_models::core::ids::{CompositeKey, TableId};
use handoff_models::core::limits;
use handoff_models::core::protocol::{IsolationLevel, OffsetReset};
use handoff_models::judge::record::is_secret;
use handoff_models::scenario::faults::System;
use handoff_models::scenario::spec::Acceptance;
use handoff_models::scenario::spec::HandoffMethod;
use handoff_models::scenario::spec::Spec;
use handoff_models::scenario::spec::{ConnectorSection, MessageOutbox, NotModelled, OutboxTable, TableSetup};
use std::collections::BTreeMap;

pub(super) fn scenario(cx: &Cx, root: &Section) -> Res<Loaded> {
    let known = "name description seed versions postgres table publication message_outbox connector connect kafka sink \
        workload fault fault_profile handoff failover acceptance prediction check schedule variants consumer";
    root.check_keys(cx, known, "field")?;
    let name = root.req(cx, "name", |field| cx.owned(field))?;
    let description = root.opt("description", String::new(), |field| cx.owned(field))?;
    let seed = root.opt("seed", 1, |field| cx.u64(field))?;
    // The horizon first: the times of every other section are held to it.
    let (acceptance, horizon) = acceptance(cx, &root.sub(cx, "acceptance")?)?;
    let (mut postgres, postgres_not_modelled) = postgres(cx, &root.sub(cx, "postgres")?)?;
    let tables = tables(cx, root)?;
    postgres.publications = publications(cx, root, &tables)?;
    let message_outboxes = message_outboxes(cx, root, &tables)?;
    // `[connector]`, or `[[connector]]` entries: one connector each, run by the same worker.
    let sections = connector_sections(cx, root)?;
    let releases = versions(cx, &root.sub(cx, "versions")?)?;
    let mut connectors: Vec<(DebeziumConfig, BTreeMap<String, String>)> = Vec::new();
    let mut not_modelled: Vec<NotModelled> = Vec::new();
    for (index, section) in sections.iter().enumerate() {
        let (mut debezium, properties, unused) = connector(cx, section, &tables, &horizon)?;
        let where_ = if sections.len() > 1 { format!("connector {}", debezium.name) } else { "connector".to_owned() };
        not_modelled.extend(listed(&where_, unused));
        debezium.connector_index = index as u8;
        if debezium.slot_failover
            && postgres.major_version < 17
            && let Some(field) = section.get("slot.failover")
        {
            return cx.fail(&field, "slot.failover needs PostgreSQL 17 or later ([postgres] version = 17)");
        }
        (debezium.version, debezium.pgjdbc) = releases;
        slot_seek_release(cx, section, &mut debezium)?;
        snapshot_mode_release(cx, section, &debezium)?;
        distinct_from_earlier(cx, section, &debezium, &connectors)?;
        connectors.push((debezium, properties));
    }
    let mut connectors = connectors.into_iter();
    let (debezium, connector_properties) = connectors.next().expect("one connector at least");
    let more_connectors: Vec<ConnectorSection> =
        connectors.map(|(debezium, properties)| ConnectorSection { debezium, properties }).collect();
    let connector_names: Vec<String> = std::iter::once(debezium.name.clone())
        .chain(more_connectors.iter().map(|more| more.debezium.name.clone()))
        .collect();
    let (connect, connector_start_ms, connect_not_modelled) = connect(cx, &root.sub(cx, "connect")?, &horizon)?;
    not_modelled.extend(listed("postgres", postgres_not_modelled));
    not_modelled.extend(listed("connect", connect_not_modelled));
    for section in &sections {
        super::connector::exactly_once_properties(cx, section, &connect)?;
    }
    let kafka = kafka(cx, &root.sub(cx, "kafka")?)?;
    let sink = sink(cx, &root.sub(cx, "sink")?)?;
    let outboxes = Outboxes { tables: &tables, messages: &message_outboxes };
    let (background, mut scripted) = workload(cx, &root.sub(cx, "workload")?, outboxes, &horizon)?;
    let mut debezium = debezium;
    let mut more_connectors = more_connectors;
    let workload_section = root.sub(cx, "workload")?;
    config_steps(
        cx,
        &workload_section,
        &mut scripted,
        &tables,
        &mut debezium,
        (more_connectors.len(), connect.workers),
    )?;
    let connectors = std::iter::once(&debezium).chain(more_connectors.iter().map(|more| &more.debezium));
    null_key_topics(cx, &root.sub(cx, "kafka")?, &kafka, &tables, connectors)?;
    let mut signal_rows = std::collections::BTreeMap::new();
    let mut all = every_connector(&mut debezium, &mut more_connectors);
    let mut kafka_signals = super::signals::KafkaSignals::of(&mut all);
    super::signals::signal_steps(
        cx,
        &workload_section,
        &mut scripted,
        &tables,
        &mut all,
        &mut signal_rows,
        &mut kafka_signals,
    )?;
    let consumer = match root.get("consumer") {
        Some(field) => Some(consumer(cx, &cx.section(&field)?, outboxes)?),
        None => None,
    };
    let system = System {
        standby: postgres.standby.is_some(),
        consumer: consumer.is_some(),
        transactions: connect.exactly_once(),
        workers: connect.workers,
    };
    let faults = faults(cx, root, system, &connector_names, &horizon)?;
    let profile = match root.get("fault_profile") {
        Some(field) => Some(fault_profile(cx, &cx.section(&field)?, system, &horizon)?),
        None => None,
    };
    let handoff = handoff(cx, &root.sub(cx, "handoff")?, &horizon)?;
    let gate = failover(cx, &root.sub(cx, "failover")?, postgres.standby.is_some())?;
    let prediction = prediction(cx, root)?;
    let check = match root.get("check") {
        Some(field) => {
            let section = cx.section(&field)?;
            let mut check = check(cx, &section, outboxes, system)?;
            let mut all = every_connector(&mut debezium, &mut more_connectors);
            super::signals::signal_steps(
                cx,
                &section,
                &mut check.scripts,
                &tables,
                &mut all,
                &mut signal_rows,
                &mut kafka_signals,
            )?;
            Some(check)
        }
        None => None,
    };
    let signal_topics = {
        let mut all = every_connector(&mut debezium, &mut more_connectors);
        kafka_signals.finish(cx, &workload_section, &mut all)?
    };
    let schedule = match root.get("schedule") {
        Some(field) => Some(schedule(cx, root, &cx.section(&field)?, &horizon)?),
        None => None,
    };
    let spec = Spec {
        name,
        description,
        postgres,
        tables,
        debezium,
        connector_properties,
        connector_start_ms,
        connect,
        kafka,
        sink,
        background,
        scripted,
        faults,
        profile,
        handoff,
        gate,
        acceptance,
        prediction,
        check,
        schedule: schedule.as_ref().map(|(schedule, _)| schedule.clone()),
        consumer,
        more_connectors,
        message_outboxes,
        signal_topics,
        not_modelled,
    };
    if let Some((schedule, items)) = &schedule {
        // The path must be one the bound can take, step by step.
        let (world, bounds) =
            crate::exhaustive::check::bound(&spec).map_err(|problem| cx.err(root.at, "schedule", problem))?;
        if let Err((index, problem)) =
            handoff_models::exhaustive::world::World::timing(&world, &bounds, &schedule.steps)
        {
            return cx.fail(&items[index.min(items.len() - 1)], problem);
        }
    }
    for (index, section) in sections.iter().enumerate().skip(1) {
        outbox_connector_only(cx, section, &spec, index)?;
    }
    // A message outbox's events are the connector's to route whatever its transforms are (a
    // chain that does not route them loses them: I9 says so); an outbox table's only under a
    // router.
    if spec.consumer.is_some()
        && spec.routed_tables().is_empty()
        && spec.message_outboxes.is_empty()
        && let Some(field) = root.get("consumer")
    {
        return cx.fail(
            &field,
            "the consumer reads the outbox's routed event topics, and the connector routes none: capture the outbox \
             table and add the outbox EventRouter to \"transforms\"",
        );
    }
    Ok(Loaded { spec, seed })
}

/// The connector sections: `[connector]` (one, or none: every default), or the `[[connector]]`
/// entries (1 to `MAX_CONNECTORS`).
/// A section's settings not modelled, as the spec lists them. A secret's value is not kept (a
/// regression file written from the run holds the mask).
fn listed(section: &str, list: NotModelledList) -> impl Iterator<Item = NotModelled> + '_ {
    list.into_iter().map(move |(setting, value, why)| NotModelled {
        section: section.to_owned(),
        value: if is_secret(&setting) { "********".to_owned() } else { value },
        setting,
        why: why.to_owned(),
    })
}

fn connector_sections<'t>(cx: &Cx, root: &Section<'t>) -> Res<Vec<Section<'t>>> {
    let Some(field) = root.get("connector") else { return Ok(vec![root.sub(cx, "connector")?]) };
    if !matches!(field.item.val, Val::Array(_)) {
        return Ok(vec![cx.section(&field)?]);
    }
    let items = cx.items(&field, "[connector] or [[connector]] entries")?;
    if items.is_empty() {
        return cx.fail(&field, "at least one [[connector]] is required");
    }
    if let Some(item) = items.get(limits::MAX_CONNECTORS) {
        let problem = format!(
            "too many connectors: {}; one Connect worker runs 1 to {} here",
            items.len(),
            limits::MAX_CONNECTORS
        );
        return cx.fail(item, problem);
    }
    items.iter().map(|item| cx.section(item)).collect()
}

/// Two connectors of one worker need their own name (the offsets-topic key and the REST path),
/// slot, publication and `topic.prefix` (their heartbeat and message topics).
fn distinct_from_earlier(
    cx: &Cx,
    s: &Section,
    debezium: &DebeziumConfig,
    earlier: &[(DebeziumConfig, BTreeMap<String, String>)],
) -> Res<()> {
    for (index, (other, _)) in earlier.iter().enumerate() {
        let clash = [
            ("name", debezium.name == other.name, "its offsets and its REST path would be the other's"),
            ("slot.name", debezium.slot_name == other.slot_name, "a slot serves one stream at a time: the second connector's START_REPLICATION would be refused, the slot being active"),
            ("publication.name", debezium.publication_name == other.publication_name, "each connector creates and alters its own publication for its table.include.list"),
            ("topic.prefix", debezium.topic_prefix == other.topic_prefix, "their change, heartbeat and message topics would be one"),
        ]
        .into_iter()
        .find(|(_, same, _)| *same);
        if let Some((key, _, why)) = clash {
            let problem = format!("connector[{index}] has the same {key}: give each connector its own ({why})");
            return match s.get(key) {
                Some(field) => cx.fail(&field, problem),
                None => Err(cx.err(
                    s.at,
                    &super::fields::join(&s.path, key),
                    format!("{problem}; this one takes the default"),
                )),
            };
        }
    }
    Ok(())
}

/// A connector after the first is an outbox connector: every table it captures is routed by
/// its transforms. The sink reads the first connector's change topics, and I1–I8 judge the
/// first connector; a second connector's change topics would have no reader and no judge.
fn outbox_connector_only(cx: &Cx, s: &Section, spec: &Spec, index: usize) -> Res<()> {
    let debezium = spec.connector(index);
    let chain = spec.transform_chain_of(index).ok();
    let unrouted: Vec<&str> = debezium
        .tables
        .iter()
        .filter(|table| !chain.as_ref().is_some_and(|chain| !chain.is_empty() && chain.routes(**table)))
        .map(|table| spec.tables[usize::from(table.0)].name.as_str())
        .collect();
    if unrouted.is_empty() {
        return Ok(());
    }
    let problem = format!(
        "this connector captures {}, which its transforms do not route: a connector after the first is an outbox \
         connector (capture only outbox tables, with the EventRouter); the sink and the invariants I1-I8 follow the first \
         connector, so capture other tables there",
        unrouted.join(", ")
    );
    match s.get("table.include.list") {
        Some(field) => cx.fail(&field, problem),
        None => Err(cx.err(s.at, &super::fields::join(&s.path, "table.include.list"), problem)),
    }
}

/// `internal.slot.seek.to.known.offset.on.start` by release: it exists from 2.5 (DBZ-7015; in 2.1
/// to 2.4 the seek is not optional, before 2.1 there is none); from 3.4 it is a deprecated alias
/// read only when `offset.mismatch.strategy` is not set (true → `trust_offset`, false →
/// `no_validation`, `PostgresConnectorConfig.resolveOffsetSlotMismatchStrategy`).
fn slot_seek_release(cx: &Cx, s: &Section, debezium: &mut DebeziumConfig) -> Res<()> {
    let Some(field) = s.get(super::connector::SLOT_SEEK) else { return Ok(()) };
    let (major, minor) = debezium.version;
    if debezium.version < (2, 5) {
        let instead = if debezium.version < (2, 1) {
            "before 2.1 there is no seek at all (DBZ-5739 added it)"
        } else {
            "2.1 to 2.4 seek the slot at every start, with no property to turn it on or off (DBZ-5739)"
        };
        return cx.fail(
            &field,
            format!(
                "{} exists from Debezium 2.5 (DBZ-7015); [versions] debezium = \"{major}.{minor}\" does not have it: \
                 {instead}",
                super::connector::SLOT_SEEK
            ),
        );
    }
    if debezium.version >= (3, 4) && s.get("offset.mismatch.strategy").is_none() {
        debezium.offset_mismatch_strategy = if debezium.slot_seek_to_known_offset_on_start {
            OffsetMismatchStrategy::TrustOffset
        } else {
            OffsetMismatchStrategy::NoValidation
        };
    }
    Ok(())
}

/// `snapshot.mode = "never"` by release: until 3.2 the old name of `no_data` ("never perform a
/// snapshot; stream from the stored offset, or from where the slot was created"); 3.3 removed it
/// (DBZ-8171, `PostgresConnectorConfig.SnapshotMode`).
fn snapshot_mode_release(cx: &Cx, s: &Section, debezium: &DebeziumConfig) -> Res<()> {
    let Some(field) = s.get("snapshot.mode") else { return Ok(()) };
    let never = matches!(&field.item.val, Val::Str(text) if text.trim().eq_ignore_ascii_case("never"));
    if never && debezium.version >= (3, 3) {
        let (major, minor) = debezium.version;
        return cx.fail(
            &field,
            format!(
                "`never` was removed in Debezium 3.3 (DBZ-8171); it was an alias of `no_data`: use no_data \
                 (or [versions] debezium before 3.3, here \"{major}.{minor}\")"
            ),
        );
    }
    Ok(())
}

/// Debezium's `(major, minor)` and, if given, the pgjdbc driver's `(major, minor, patch)`.
type Versions = ((u32, u32), Option<(u32, u32, u32)>);

/// `[versions]`: the releases whose behaviour differs in the model.
fn versions(cx: &Cx, s: &Section) -> Res<Versions> {
    s.check_keys(cx, "debezium pgjdbc", "field")?;
    let debezium = s.opt("debezium", (3, 7), |field| {
        // `3.7` unquoted (as `--set versions.debezium=3.7` gives it) is a float: use its text.
        let text = match &field.item.val {
            Val::Float(_, raw) => raw.as_str(),
            _ => cx.string(field)?,
        };
        let parsed = text.split_once('.').and_then(|(major, minor)| {
            let minor = minor.split('.').next()?;
            Some((major.trim().parse::<u32>().ok()?, minor.trim().parse::<u32>().ok()?))
        });
        match parsed {
            Some(version) if ((1, 0)..=(3, 7)).contains(&version) => Ok(version),
            Some(_) => cx.fail(field, format!("`{text}`: the model knows Debezium 1.0 to 3.7")),
            None => cx.fail(field, format!("`{text}` is not a release like \"3.7\" or \"2.6\"")),
        }
    })?;
    let pgjdbc = match s.get("pgjdbc") {
        None => None,
        Some(field) => {
            let text = cx.string(&field)?;
            let parts: Vec<Option<u32>> = text.split('.').map(|part| part.trim().parse::<u32>().ok()).collect();
            match parts.as_slice() {
                [Some(42), Some(minor), Some(patch)] if *minor <= 7 => Some((42, *minor, *patch)),
                [Some(_), Some(_), Some(_)] => {
                    return cx.fail(&field, format!("`{text}`: the model knows pgjdbc 42.0.0 to 42.7.x"));
                }
                _ => return cx.fail(&field, format!("`{text}` is not a pgjdbc release like \"42.7.3\"")),
            }
        }
    };
    // From 3.2 Debezium builds its replication stream with `withAutomaticFlush(false)`
    // (`PostgresReplicationConnection.startPgReplicationStream`, DBZ-7533), which pgjdbc has from
    // 42.7.6 (pgjdbc#3403): an older driver cannot run it.
    if let (Some(driver @ (_, minor, patch)), Some(field)) = (pgjdbc, s.get("pgjdbc"))
        && debezium >= (3, 2)
        && driver < (42, 7, 6)
    {
        return cx.fail(
            &field,
            format!(
                "`42.{minor}.{patch}` under Debezium {}.{}: from 3.2 Debezium calls the replication stream builder's \
                 withAutomaticFlush(false), which pgjdbc has from 42.7.6 (DBZ-7533, pgjdbc#3403); give 42.7.6 or later, \
                 or leave pgjdbc out for the release's own driver",
                debezium.0, debezium.1
            ),
        );
    }
    Ok((debezium, pgjdbc))
}

/// The `[postgres]` keys the model reads; any other PostgreSQL setting is accepted as not
/// modelled, or refused, as the catalogue says.
const POSTGRES_KEYS: &str = "version wal_segment_size checkpoint_timeout max_wal_size max_slot_wal_keep_size \
    wal_keep_size synchronized_standby_slots scan_rows_per_second standby idle_in_transaction_session_timeout \
    wal_sender_timeout";

fn postgres(cx: &Cx, s: &Section) -> Res<(PostgresSection, NotModelledList)> {
    let version = s.opt("version", 15, |field| match cx.int(field, 15, 18)? {
        18 => cx.fail(
            field,
            "PostgreSQL 18 is not modelled yet (idle_replication_slot_timeout, its view and error changes); use 15, 16 \
             or 17",
        ),
        version => Ok(version as u32),
    })?;
    let modelled: Vec<&str> = POSTGRES_KEYS.split_whitespace().collect();
    let known: Vec<&str> = modelled.iter().copied().chain(postgres_names(version)).collect();
    let (entries, not_modelled) =
        classify(cx, s, &modelled, &known, "PostgreSQL setting", |key| postgres_kind(key, version))?;
    let s = &Section { path: s.path.clone(), entries: &entries, at: s.at };
    let wal_segment_size = s.opt("wal_segment_size", 16 << 20, |field| {
        let text = cx.string(field)?;
        let Some(bytes) = with_unit(text, &handoff_models::core::units::SIZE_UNITS) else {
            return cx.fail(
                field,
                format!("`{text}` is not a size; expected a power of two from 1MB to 1GB, like \"16MB\""),
            );
        };
        if !bytes.is_power_of_two() || !(1 << 20..=1 << 30).contains(&bytes) {
            return cx.fail(field, format!("`{text}` is out of range; expected a power of two from 1MB to 1GB"));
        }
        Ok(bytes)
    })?;
    let checkpoint_timeout_ms = s.opt("checkpoint_timeout", 300_000, |field| {
        let text = cx.string(field)?;
        let Some(ms) = duration_ms(text) else {
            return cx.fail(
                field,
                format!("`{text}` is not a duration; expected a number and a unit ({DURATION_UNITS}), like \"5min\""),
            );
        };
        if !(30_000..=86_400_000).contains(&ms) {
            return cx.fail(field, format!("`{text}` is out of range; expected 30s to 1d"));
        }
        Ok(ms)
    })?;
    // Sizes in whole megabytes, as PostgreSQL keeps them (`GUC_UNIT_MB`), up to its own maximum.
    let megabytes = |field: &Field, minimum_bytes: u64| -> Res<u64> {
        let text = cx.string(field)?;
        let range = format!("{} to {}", size_text(minimum_bytes), size_text(MAX_SETTING_MB << 20));
        match with_unit(text, &handoff_models::core::units::SIZE_UNITS) {
            Some(bytes) if !(minimum_bytes..=MAX_SETTING_MB << 20).contains(&bytes) => {
                cx.fail(field, format!("`{text}` is out of range; expected {range}"))
            }
            Some(bytes) if bytes % (1 << 20) == 0 => Ok(bytes >> 20),
            Some(_) => cx.fail(field, format!("`{text}` must be whole megabytes, {range}")),
            None => cx.fail(field, format!("`{text}` is not a size like \"4MB\" or \"1GB\"")),
        }
    };
    let max_wal_size_mb = s.opt("max_wal_size", 1024, |field| megabytes(field, 2 * wal_segment_size))?;
    let max_slot_wal_keep_size_mb = s.opt("max_slot_wal_keep_size", None, |field| {
        if cx.string(field)? == "-1" { Ok(None) } else { megabytes(field, 0).map(Some) }
    })?;
    let wal_keep_size_mb =
        s.opt("wal_keep_size", 0, |field| if cx.string(field)? == "0" { Ok(0) } else { megabytes(field, 0) })?;
    let scan_rows_per_second =
        s.opt("scan_rows_per_second", 20_000, |field| cx.int(field, 1, MAX_SCAN_ROWS_PER_SECOND))? as u64;
    let mut sync_replication_slots = false;
    let standby = match s.get("standby") {
        None => None,
        Some(field) => {
            let standby = cx.section(&field)?;
            standby.check_keys(cx, "replication_delay_ms sync_replication_slots", "field")?;
            if let Some(field) = standby.get("sync_replication_slots") {
                sync_replication_slots = prop_bool(cx, &field)?;
                if sync_replication_slots && version < 17 {
                    return cx.fail(&field, "sync_replication_slots needs PostgreSQL 17 or later (version = 17)");
                }
            }
            Some(standby.opt("replication_delay_ms", 0, |field| cx.setting_ms(field, 0))?)
        }
    };
    // The primary's `synchronized_standby_slots`: the standby's physical slot, by name.
    let synchronized_standby_slots = match s.get("synchronized_standby_slots") {
        None => false,
        Some(field) => {
            let names = cx.string(&field)?.trim();
            if version < 17 {
                return cx.fail(&field, "synchronized_standby_slots needs PostgreSQL 17 or later (version = 17)");
            }
            if standby.is_none() {
                return cx.fail(&field, "synchronized_standby_slots names a standby's slot: add [postgres.standby]");
            }
            !names.is_empty()
        }
    };
    // `idle_in_transaction_session_timeout` and `wal_sender_timeout`: PostgreSQL units, a bare
    // number is milliseconds (their `GUC_UNIT_MS`), 0 is off; at most `INT_MAX` ms as in
    // `guc_tables.c`.
    let idle_in_transaction_session_timeout_ms =
        s.opt("idle_in_transaction_session_timeout", 0, |field| timeout_ms(cx, field, "5min"))?;
    let wal_sender_timeout_ms =
        s.opt("wal_sender_timeout", handoff_models::components::postgres::WAL_SENDER_TIMEOUT_MS, |field| {
            timeout_ms(cx, field, "60s")
        })?;
    let section = PostgresSection {
        major_version: version,
        wal_segment_size,
        checkpoint_timeout_ms,
        max_wal_size_mb,
        max_slot_wal_keep_size_mb,
        wal_keep_size_mb,
        scan_rows_per_second,
        standby,
        sync_replication_slots,
        synchronized_standby_slots,
        idle_in_transaction_session_timeout_ms,
        wal_sender_timeout_ms,
        publications: Vec::new(),
    };
    Ok((section, not_modelled))
}

/// `[[publication]]`: publications a DBA created before the run (`CREATE PUBLICATION name FOR
/// TABLE …`). A connector with `publication.autocreate.mode=all_tables` uses an existing
/// publication as it is (`PostgresReplicationConnection.initPublication`); `filtered` sets its
/// tables at every start.
fn publications(cx: &Cx, root: &Section, tables: &[TableSetup]) -> Res<Vec<(String, Vec<TableId>)>> {
    let Some(field) = root.get("publication") else { return Ok(Vec::new()) };
    let mut publications: Vec<(String, Vec<TableId>)> = Vec::new();
    for item in cx.items(&field, "an array of tables ([[publication]])")? {
        let s = cx.section(&item)?;
        s.check_keys(cx, "name tables", "field")?;
        let name_field = s.need(cx, "name", "; the publication's name, e.g. \"dbz_publication\"")?;
        let name = cx.owned(&name_field)?;
        if name.trim().is_empty() {
            return cx.fail(&name_field, "must not be empty");
        }
        if publications.iter().any(|(other, _)| *other == name) {
            return cx.fail(&name_field, format!("publication `{name}` is declared twice"));
        }
        let tables_field = s.need(cx, "tables", "; the tables it publishes, e.g. [\"public.claims\"]")?;
        let mut ids = Vec::new();
        for table in cx.items(&tables_field, "an array of table names")? {
            let id = table_id(cx, &table, cx.string(&table)?, tables)?;
            if tables[usize::from(id.0)].database.is_some() {
                return cx.fail(&table, "is in another database; a publication is a database's own");
            }
            if ids.contains(&id) {
                return cx.fail(&table, "is listed twice");
            }
            ids.push(id);
        }
        publications.push((name, ids));
    }
    Ok(publications)
}

/// A PostgreSQL timeout setting in milliseconds (`GUC_UNIT_MS`): a bare number is milliseconds,
/// a string a number and a unit, `0` is off; at most `INT_MAX` ms.
fn timeout_ms(cx: &Cx, field: &Field, example: &str) -> Res<u64> {
    let ms = match field.item.val {
        Val::Int(Some(ms)) => u64::try_from(ms).ok(),
        Val::Int(None) => None,
        _ => {
            let text = cx.string(field)?;
            if text.trim() == "0" { Some(0) } else { duration_ms(text) }
        }
    };
    match ms {
        Some(ms) if ms <= i32::MAX as u64 => Ok(ms),
        Some(_) => cx.fail(field, "is out of range; expected 0 (off) to 2147483647ms (about 24 days)"),
        None => cx.fail(
            field,
            format!(
                "is not a duration; expected 0 (off) or a number and a unit ({DURATION_UNITS}), like \"{example}\""
            ),
        ),
    }
}

/// The largest `max_wal_size`, `max_slot_wal_keep_size` and `wal_keep_size`: PostgreSQL's own
/// maximum for a size in megabytes (`MAX_KILOBYTES`, `INT_MAX`).
const MAX_SETTING_MB: u64 = i32::MAX as u64;

/// The fastest snapshot `SELECT`: a billion rows a second, a million-row table in a millisecond.
const MAX_SCAN_ROWS_PER_SECOND: i64 = 1_000_000_000;

/// `[[table]] outbox = { aggregatetype = "claim", delete = false }`.
fn outbox_table(cx: &Cx, field: &Field) -> Res<OutboxTable> {
    let s = cx.section(field)?;
    s.check_keys(cx, "aggregatetype delete", "field")?;
    let aggregatetype = s.opt("aggregatetype", "claim".to_owned(), |field| aggregatetype(cx, field))?;
    let delete = s.opt("delete", false, |field| cx.boolean(field))?;
    Ok(OutboxTable { aggregatetype, delete })
}

/// The scenario's outboxes, as the sections after `[[table]]` and `[[message_outbox]]` read
/// them: the tables (an outbox table among them) and the message outboxes.
#[derive(Clone, Copy)]
pub(super) struct Outboxes<'a> {
    pub(super) tables: &'a [TableSetup],
    pub(super) messages: &'a [MessageOutbox],
}

impl Outboxes<'_> {
    /// How many outboxes the service writes to: outbox tables and message outboxes.
    pub(super) fn count(&self) -> usize {
        self.tables.iter().filter(|table| table.outbox.is_some()).count() + self.messages.len()
    }
}

/// The most message outboxes a scenario declares.
const MAX_MESSAGE_OUTBOXES: usize = 100;

/// `[[message_outbox]]`: the service's outboxes that are logical decoding messages, in order.
fn message_outboxes(cx: &Cx, root: &Section, tables: &[TableSetup]) -> Res<Vec<MessageOutbox>> {
    let Some(field) = root.get("message_outbox") else { return Ok(Vec::new()) };
    let items = cx.items(&field, "an array of tables ([[message_outbox]])")?;
    if let Some(item) = items.get(MAX_MESSAGE_OUTBOXES) {
        let problem = format!("too many message outboxes: {}; expected 0 to {MAX_MESSAGE_OUTBOXES}", items.len());
        return cx.fail(item, problem);
    }
    let mut outboxes: Vec<MessageOutbox> = Vec::new();
    for item in &items {
        let s = cx.section(item)?;
        s.check_keys(cx, "prefix aggregatetype transactional", "field")?;
        let prefix_field = s.need(cx, "prefix", "; the prefix of its messages, like \"outbox\"")?;
        let prefix = cx.string(&prefix_field)?;
        if prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
            return cx.fail(
                &prefix_field,
                format!("`{prefix}` is not a message prefix like \"outbox\" (letters, digits, `_`, `-`, `.`)"),
            );
        }
        if let Some(previous) = outboxes.iter().position(|outbox| outbox.prefix == prefix) {
            return cx.fail(&prefix_field, format!("`{prefix}` is already the prefix of message_outbox[{previous}]"));
        }
        if tables.iter().any(|table| table.name == prefix) {
            return cx.fail(
                &prefix_field,
                format!(
                    "`{prefix}` is the name of a [[table]] too: an `event` step's `outbox` names a table or a prefix, \
                     so give the message outbox another prefix"
                ),
            );
        }
        let aggregatetype = s.opt("aggregatetype", "claim".to_owned(), |field| aggregatetype(cx, field))?;
        let transactional = s.opt("transactional", true, |field| cx.boolean(field))?;
        outboxes.push(MessageOutbox { prefix: prefix.to_owned(), aggregatetype, transactional });
    }
    Ok(outboxes)
}

/// An `aggregatetype`: letters, digits, `_`, `-`, `.` (it becomes part of a topic name).
fn aggregatetype(cx: &Cx, field: &Field) -> Res<String> {
    let text = cx.string(field)?;
    if text.is_empty() || !text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')) {
        return cx
            .fail(field, format!("`{text}` is not an aggregate type like \"claim\" (letters, digits, `_`, `-`, `.`)"));
    }
    Ok(text.to_owned())
}

fn tables(cx: &Cx, root: &Section) -> Res<Vec<TableSetup>> {
    let field = root.need(cx, "table", "; add at least one [[table]]")?;
    let items = cx.items(&field, "an array of tables ([[table]])")?;
    if items.is_empty() {
        return cx.fail(&field, "at least one [[table]] is required");
    }
    if let Some(item) = items.get(limits::MAX_TABLES) {
        let problem = format!("too many tables: {}; expected 1 to {}", items.len(), limits::MAX_TABLES);
        return cx.fail(item, problem);
    }
    let mut tables: Vec<TableSetup> = Vec::new();
    let mut all_rows = 0;
    for (index, item) in items.iter().enumerate() {
        let s = cx.section(item)?;
        s.check_keys(
            cx,
            "name rows replica_identity database outbox primary_key group_rows unique_column null_row",
            "field",
        )?;
        let name_field = s.need(cx, "name", "")?;
        let name = table_name(cx, &name_field)?;
        if let Some(previous) = tables.iter().position(|table| table.name == name) {
            return cx.fail(&name_field, format!("`{name}` is already table[{previous}]"));
        }
        let id = TableId(index as u16);
        // All tables together hold at most `MAX_ROWS` rows.
        let left = limits::MAX_ROWS - all_rows;
        let rows = s.opt("rows", 0, |field| match field.item.val {
            Val::Int(Some(value)) if (0..=left as i64).contains(&value) => Ok(value as u32),
            Val::Int(value) => {
                let before =
                    if all_rows > 0 { format!(", {all_rows} of them in the tables before") } else { String::new() };
                let limit = limits::MAX_ROWS;
                cx.fail(
                    field,
                    format!("{}: at most {limit} rows in all tables{before}", out_of_range(value, 0, left as i64)),
                )
            }
            _ => cx.wrong(field, "an integer"),
        })?;
        all_rows += u64::from(rows);
        let identities = [("default", ReplicaIdentity::Default), ("full", ReplicaIdentity::Full)];
        let replica_identity =
            s.opt("replica_identity", ReplicaIdentity::Default, |field| cx.choice(field, &identities))?;
        let database = s.opt("database", None, |field| {
            let name = cx.string(field)?;
            let identifier = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if identifier {
                Ok(Some(name.to_owned()))
            } else {
                cx.fail(field, format!("`{name}` is not a database name like \"analytics\""))
            }
        })?;
        let outbox = s.opt("outbox", None, |field| outbox_table(cx, field).map(Some))?;
        if outbox.is_some() && rows > 0 {
            let field = s.need(cx, "rows", "")?;
            return cx.fail(
                &field,
                "an outbox table starts empty: its rows are the service's events, written by the workload (leave \
                 out `rows`)",
            );
        }
        if outbox.is_some()
            && let Some(field) = s.get("database")
        {
            return cx.fail(
                &field,
                "an outbox table is in the service's own database, the main one (the outbox pattern writes the \
                 event in the business change's transaction)",
            );
        }
        let (composite_key, keyless) = match table_key(cx, &s, outbox.is_some(), replica_identity)? {
            TableKey::Id => (None, false),
            TableKey::Composite(key) => (Some(key), false),
            TableKey::None => (None, true),
        };
        let unique_column = unique_column(cx, &s, outbox.is_some(), composite_key.is_some())?;
        tables.push(TableSetup {
            id,
            name,
            rows,
            replica_identity,
            database,
            outbox,
            composite_key,
            unique_column,
            keyless,
        });
    }
    Ok(tables)
}

/// A captured table whose records have a null key (no primary key, no `message.key.columns`):
/// its change topic must have one partition and no compaction. Kafka's producer spreads
/// null-keyed records over the partitions (`BuiltInPartitioner`'s sticky partition, KIP-480 and
/// KIP-794), and a compacted topic refuses them ("Compacted topic cannot accept message without
/// key", `LogValidator.validateKey`, which fails the producer and the task); neither is modelled.
fn null_key_topics<'c>(
    cx: &Cx,
    s: &Section,
    kafka: &KafkaSection,
    tables: &[TableSetup],
    connectors: impl Iterator<Item = &'c DebeziumConfig>,
) -> Res<()> {
    for connector in connectors {
        let captured = connector.ever_captured();
        let Some(table) = connector.null_key_tables.iter().find(|table| captured.contains(table)) else { continue };
        let name = &tables[usize::from(table.0)].name;
        let why =
            format!("{name} has no primary key and message.key.columns gives it none, so its records have a null key");
        if kafka.partitions > 1
            && let Some(field) = s.get("partitions")
        {
            return cx.fail(
                &field,
                format!(
                    "{why}; Kafka's producer spreads null-keyed records over a topic's partitions (the sticky \
                     partitioner), which is not modelled: use one partition, or key the table with \
                     message.key.columns = \"{name}:id\""
                ),
            );
        }
        if kafka.compaction.is_some()
            && let Some(field) = s.get("cleanup.policy")
        {
            return cx.fail(
                &field,
                format!(
                    "{why}; a compacted topic refuses records without a key (\"Compacted topic cannot accept \
                     message without key\"), which fails the task; that is not modelled: key the table with \
                     message.key.columns = \"{name}:id\""
                ),
            );
        }
    }
    Ok(())
}

/// A table's primary key as `[[table]] primary_key` declares it.
enum TableKey {
    /// `id` (left out, or `["id"]`).
    Id,
    /// Two columns, with `group_rows`.
    Composite(CompositeKey),
    /// `[]`: no primary key.
    None,
}

/// `[[table]] primary_key` and `group_rows`.
fn table_key(cx: &Cx, s: &Section, outbox: bool, identity: ReplicaIdentity) -> Res<TableKey> {
    let Some(field) = s.get("primary_key") else {
        if let Some(group) = s.get("group_rows") {
            return cx.fail(
                &group,
                "group_rows goes with a two-column primary_key (the rows per value of its first column)",
            );
        }
        return Ok(TableKey::Id);
    };
    let items = cx.items(&field, "an array of column names, like [\"region_id\", \"hub_id\"]")?;
    let mut columns = Vec::new();
    for item in &items {
        let column = cx.string(item)?.to_owned();
        let identifier = column.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && column.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !identifier {
            return cx.fail(item, format!("`{column}` is not a column name like \"region_id\""));
        }
        if columns.contains(&column) {
            return cx.fail(item, format!("`{column}` is named twice"));
        }
        columns.push(column);
    }
    let names: Vec<&str> = columns.iter().map(String::as_str).collect();
    let columns: [&str; 2] = match names.as_slice() {
        [] => {
            if let Some(group) = s.get("group_rows") {
                return cx.fail(&group, "group_rows goes with a two-column primary_key, not a table without one");
            }
            if outbox {
                return cx.fail(&field, "an outbox table's key is its `id` (a uuid): leave out primary_key");
            }
            if identity != ReplicaIdentity::Full {
                // `CheckCmdReplicaIdentity` (src/backend/executor/execReplication.c): a table
                // without a replica identity in a publication that publishes updates and deletes
                // refuses them.
                return cx.fail(
                    &field,
                    "a table without a primary key has no replica identity under REPLICA IDENTITY DEFAULT, and \
                     PostgreSQL refuses its UPDATE and DELETE while a publication publishes them (\"cannot update \
                     table ... because it does not have a replica identity and publishes updates\"); that error is \
                     not modelled: set replica_identity = \"full\" on the table",
                );
            }
            return Ok(TableKey::None);
        }
        ["id"] => {
            if let Some(group) = s.get("group_rows") {
                return cx.fail(&group, "group_rows goes with a two-column primary_key, not [\"id\"]");
            }
            return Ok(TableKey::Id);
        }
        [other] => {
            return cx.fail(
                &field,
                format!(
                    "`{other}`: the model's single-column key is `id`; name two columns for a composite key, or leave \
                     primary_key out"
                ),
            );
        }
        [first, second] => [*first, *second],
        _ => return cx.fail(&field, format!("{} columns: keys of one or two columns are modelled", names.len())),
    };
    let row_columns = handoff_models::core::signal::FilterColumn::ALL.map(|column| column.name());
    if let Some(row_column) = columns.iter().find(|column| row_columns.contains(column)) {
        return cx.fail(
            &field,
            format!(
                "`{row_column}` in a two-column key is not modelled yet: the model's rows have the columns id (the \
                 whole key), version, status and amount_cents; name the key's columns otherwise, like region_id"
            ),
        );
    }
    if outbox {
        return cx.fail(&field, "an outbox table's key is its `id` (a uuid): leave out primary_key");
    }
    let group = s.need(cx, "group_rows", "; a two-column key needs the rows per value of its first column")?;
    let group_rows = match group.item.val {
        Val::Int(Some(value)) if (1..=limits::MAX_ROWS as i64).contains(&value) => value as u32,
        Val::Int(value) => return cx.fail(&group, out_of_range(value, 1, limits::MAX_ROWS as i64)),
        _ => return cx.wrong(&group, "an integer"),
    };
    Ok(TableKey::Composite(CompositeKey { columns: columns.map(str::to_owned), group_rows }))
}

/// `[[table]] unique_column` and `null_row`: a nullable column with a unique index, whose value
/// is the row's `id` but in row `null_row`, where it is NULL.
fn unique_column(cx: &Cx, s: &Section, outbox: bool, composite: bool) -> Res<Option<UniqueColumn>> {
    let Some(field) = s.get("unique_column") else {
        if let Some(row) = s.get("null_row") {
            return cx.fail(&row, "null_row goes with unique_column (the row whose unique column is NULL)");
        }
        return Ok(None);
    };
    let name = cx.string(&field)?.to_owned();
    let identifier = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !identifier {
        return cx.fail(&field, format!("`{name}` is not a column name like \"external_id\""));
    }
    let row_columns = handoff_models::core::signal::FilterColumn::ALL.map(|column| column.name());
    if row_columns.contains(&name.as_str()) {
        return cx.fail(
            &field,
            format!(
                "`{name}` is one of the model's row columns (id, version, status, amount_cents), none of them \
                 nullable; name the unique column otherwise, like external_id"
            ),
        );
    }
    if outbox {
        return cx.fail(&field, "a unique column on an outbox table is not modelled");
    }
    if composite {
        return cx.fail(&field, "a unique column on a table with a two-column primary_key is not modelled yet");
    }
    let row =
        s.need(cx, "null_row", "; the row whose unique column is NULL (its value is the row's id in every other)")?;
    let null_row = match row.item.val {
        Val::Int(Some(value)) if (1..=limits::MAX_ROWS as i64).contains(&value) => value,
        Val::Int(value) => return cx.fail(&row, out_of_range(value, 1, limits::MAX_ROWS as i64)),
        _ => return cx.wrong(&row, "an integer"),
    };
    Ok(Some(UniqueColumn { name, null_row }))
}

/// `schema.table`.
fn table_name(cx: &Cx, field: &Field) -> Res<String> {
    let name = cx.string(field)?;
    let identifier = |part: &str| {
        part.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    };
    match name.split_once('.') {
        Some((schema, table)) if identifier(schema) && identifier(table) => Ok(name.to_owned()),
        _ => cx.fail(field, format!("`{name}` is not a schema-qualified table name like \"public.claims\"")),
    }
}

pub(super) fn table_id(cx: &Cx, field: &Field, name: &str, tables: &[TableSetup]) -> Res<TableId> {
    match tables.iter().find(|table| table.name == name) {
        Some(table) => Ok(table.id),
        None => {
            let names: Vec<&str> = tables.iter().map(|table| table.name.as_str()).collect();
            cx.fail(field, format!("`{name}` is not a table of [[table]]; the tables are {}", names.join(", ")))
        }
    }
}

/// The `[connect]` keys the model reads; any other Connect worker property is accepted as not
/// modelled, or refused, as the catalogue says.
const CONNECT_KEYS: &str = "offset.flush.interval.ms offset.flush.timeout.ms exactly.once.source.support group.id \
    producer.transaction.timeout.ms start_at_ms workers session.timeout.ms heartbeat.interval.ms \
    rebalance.timeout.ms scheduled.rebalance.max.delay.ms task.shutdown.graceful.timeout.ms";

fn connect(cx: &Cx, s: &Section, horizon: &Horizon) -> Res<(ConnectConfig, u64, NotModelledList)> {
    let modelled: Vec<&str> = CONNECT_KEYS.split_whitespace().collect();
    let known: Vec<&str> = modelled.iter().copied().chain(worker_names()).collect();
    let (entries, not_modelled) = classify(cx, s, &modelled, &known, "Connect worker property", worker_kind)?;
    let s = &Section { path: s.path.clone(), entries: &entries, at: s.at };
    let setting = |key: &str, default: u64| s.opt(key, default, |field| cx.setting_ms(field, 1));
    let mut config =
        ConnectConfig::new(setting("offset.flush.interval.ms", 60_000)?, setting("offset.flush.timeout.ms", 5_000)?);
    let supports = ExactlyOnceSourceSupport::ALL.map(|support| (support.name(), support));
    config.exactly_once_source_support =
        s.opt("exactly.once.source.support", ExactlyOnceSourceSupport::Disabled, |field| cx.choice(field, &supports))?;
    config.group_id = s.opt("group.id", config.group_id.clone(), |field| match cx.string(field)? {
        "" => cx.fail(field, "must not be empty"),
        group => Ok(group.to_owned()),
    })?;
    config.transaction_timeout_ms = setting("producer.transaction.timeout.ms", config.transaction_timeout_ms)?;
    // The broker refuses a producer's timeout above its `transaction.max.timeout.ms` (900 000)
    // with INVALID_TRANSACTION_TIMEOUT: `initTransactions()` fails.
    if config.transaction_timeout_ms > 900_000
        && let Some(field) = s.get("producer.transaction.timeout.ms")
    {
        return cx.fail(
            &field,
            "above the broker's transaction.max.timeout.ms (900000): InitProducerId fails with \
             INVALID_TRANSACTION_TIMEOUT",
        );
    }
    config.workers = s.opt("workers", 1, |field| cx.int(field, 1, 3).map(|value| value as u8))?;
    const GROUP: [&str; 5] = [
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "rebalance.timeout.ms",
        "scheduled.rebalance.max.delay.ms",
        "task.shutdown.graceful.timeout.ms",
    ];
    if config.workers == 1 {
        if let Some(field) = GROUP.iter().find_map(|key| s.get(key)) {
            return cx.fail(
                &field,
                "a group setting: with one worker the model runs no group protocol; set workers = 2 or 3",
            );
        }
    } else {
        let group = &mut config.group;
        // The broker refuses a session timeout outside group.min.session.timeout.ms (6 000) and
        // group.max.session.timeout.ms (1 800 000) with INVALID_SESSION_TIMEOUT.
        group.session_timeout_ms =
            s.opt("session.timeout.ms", group.session_timeout_ms, |field| match field.item.val {
                Val::Int(Some(value)) if (6_000..=1_800_000).contains(&value) => Ok(value as u64),
                Val::Int(_) => cx.fail(
                    field,
                    "outside the broker's group.min.session.timeout.ms (6000) and group.max.session.timeout.ms \
                     (1800000): JoinGroup fails with INVALID_SESSION_TIMEOUT",
                ),
                _ => cx.wrong(field, "an integer"),
            })?;
        group.heartbeat_interval_ms = setting("heartbeat.interval.ms", group.heartbeat_interval_ms)?;
        if group.heartbeat_interval_ms >= group.session_timeout_ms
            && let Some(field) = s.get("heartbeat.interval.ms").or_else(|| s.get("session.timeout.ms"))
        {
            return cx.fail(
                &field,
                "heartbeat.interval.ms must be lower than session.timeout.ms (the worker refuses to start)",
            );
        }
        group.rebalance_timeout_ms = setting("rebalance.timeout.ms", group.rebalance_timeout_ms)?;
        group.scheduled_rebalance_max_delay_ms =
            s.opt("scheduled.rebalance.max.delay.ms", group.scheduled_rebalance_max_delay_ms, |field| {
                cx.setting_ms(field, 0)
            })?;
        group.task_shutdown_graceful_timeout_ms =
            setting("task.shutdown.graceful.timeout.ms", group.task_shutdown_graceful_timeout_ms)?;
    }
    let start_at_ms = s.opt("start_at_ms", 0, |field| cx.time_ms(field, 0, horizon))?;
    Ok((config, start_at_ms, not_modelled))
}

fn kafka(cx: &Cx, s: &Section) -> Res<KafkaSection> {
    const SWEEP: &str = "transaction.abort.timed.out.transaction.cleanup.interval.ms";
    const COMPACTION: [&str; 5] = [
        "delete.retention.ms",
        "min.compaction.lag.ms",
        "segment.ms",
        "min.cleanable.dirty.ratio",
        "log.cleaner.backoff.ms",
    ];
    s.check_keys(
        cx,
        &format!("partitions {SWEEP} cleanup.policy group.initial.rebalance.delay.ms {}", COMPACTION.join(" ")),
        "field",
    )?;
    let group_initial_rebalance_delay_ms = s.opt(
        "group.initial.rebalance.delay.ms",
        handoff_models::components::kafka::group::GROUP_INITIAL_REBALANCE_DELAY_MS,
        |field| cx.setting_ms(field, 0),
    )?;
    let partitions = s.opt("partitions", 1, |field| cx.int(field, 1, 64).map(|value| value as u32))?;
    let transaction_abort_sweep_interval_ms =
        s.opt(SWEEP, TRANSACTION_ABORT_SWEEP_INTERVAL_MS, |field| cx.setting_ms(field, 1))?;
    let compact = s.opt("cleanup.policy", false, |field| cx.choice(field, &[("delete", false), ("compact", true)]))?;
    if !compact {
        if let Some(field) = COMPACTION.iter().find_map(|key| s.get(key)) {
            return cx.fail(&field, "a compaction setting: it needs cleanup.policy = \"compact\"");
        }
        return Ok(KafkaSection {
            partitions,
            transaction_abort_sweep_interval_ms,
            compaction: None,
            group_initial_rebalance_delay_ms,
        });
    }
    let default = Compaction::DEFAULT;
    let delete_retention_ms =
        s.opt("delete.retention.ms", default.delete_retention_ms, |field| cx.setting_ms(field, 0))?;
    let min_compaction_lag_ms =
        s.opt("min.compaction.lag.ms", default.min_compaction_lag_ms, |field| cx.setting_ms(field, 0))?;
    // A segment's age is compared, never waited for: any length is a setting.
    let segment_ms = s.opt("segment.ms", default.segment_ms, |field| cx.int(field, 1, i64::MAX).map(|v| v as u64))?;
    let min_cleanable_dirty_ratio_per_mille =
        s.opt("min.cleanable.dirty.ratio", default.min_cleanable_dirty_ratio_per_mille, |field| {
            let value = match field.item.val {
                Val::Float(value, _) => value,
                Val::Int(Some(value)) => value as f64,
                _ => return cx.wrong(field, "a number"),
            };
            if !(0.0..=1.0).contains(&value) {
                return cx.fail(field, format!("{value} is out of range; expected 0 to 1 (Kafka's range)"));
            }
            Ok((value * 1000.0).round() as u32)
        })?;
    let log_cleaner_backoff_ms =
        s.opt("log.cleaner.backoff.ms", default.log_cleaner_backoff_ms, |field| cx.setting_ms(field, 1))?;
    let compaction = Compaction {
        delete_retention_ms,
        min_compaction_lag_ms,
        segment_ms,
        min_cleanable_dirty_ratio_per_mille,
        log_cleaner_backoff_ms,
    };
    Ok(KafkaSection {
        partitions,
        transaction_abort_sweep_interval_ms,
        compaction: Some(compaction),
        group_initial_rebalance_delay_ms,
    })
}

/// `isolation.level` of a consumer (default `read_uncommitted`).
fn isolation_level(cx: &Cx, s: &Section) -> Res<IsolationLevel> {
    let levels = IsolationLevel::ALL.map(|level| (level.name(), level));
    s.opt("isolation.level", IsolationLevel::ReadUncommitted, |field| cx.choice(field, &levels))
}

fn sink(cx: &Cx, s: &Section) -> Res<SinkConfig> {
    s.check_keys(
        cx,
        "apply group.id auto.commit.interval.ms max.poll.records auto.offset.reset isolation.level \
         behavior.on.null.values",
        "field",
    )?;
    let rules = [ApplyRule::VersionGuard, ApplyRule::NaiveUpsert, ApplyRule::SnapshotEpoch];
    let rules = rules.map(|rule| (rule.name(), rule));
    let rule = s.req(cx, "apply", |field| cx.choice(field, &rules))?;
    let group = s.opt("group.id", "claims-search-index".to_owned(), |field| match cx.string(field)? {
        "" => cx.fail(field, "must not be empty"),
        group => Ok(group.to_owned()),
    })?;
    let auto_commit_interval_ms = s.opt("auto.commit.interval.ms", 5_000, |field| cx.setting_ms(field, 1))?;
    let max_poll_records = s.opt("max.poll.records", 500, |field| cx.u32(field, 1))?;
    // The sink is a plain consumer group: `ConsumerConfig`'s default, `latest`.
    let resets = OffsetReset::ALL.map(|reset| (reset.name(), reset));
    let auto_offset_reset =
        s.opt("auto.offset.reset", OffsetReset::CONSUMER_DEFAULT, |field| cx.choice(field, &resets))?;
    let isolation_level = isolation_level(cx, s)?;
    let behaviours = NullValues::ALL.map(|behaviour| (behaviour.name(), behaviour));
    let null_values = s.opt("behavior.on.null.values", NullValues::Ignore, |field| {
        if matches!(&field.item.val, Val::Str(text) if text == "fail") {
            // The Elasticsearch sink's default since 11.0.0: the task dies on the first tombstone.
            return cx.fail(field, "fail (the task dies on the first tombstone) is not modelled yet; ignore or delete");
        }
        cx.choice(field, &behaviours)
    })?;
    Ok(SinkConfig {
        rule,
        group,
        auto_commit_interval_ms,
        max_poll_records,
        auto_offset_reset,
        isolation_level,
        null_values,
    })
}

/// `[consumer]`: the outbox's consumer.
fn consumer(cx: &Cx, s: &Section, outboxes: Outboxes) -> Res<ConsumerConfig> {
    s.check_keys(
        cx,
        "inbox group.id enable.auto.commit auto.commit.interval.ms max.poll.records auto.offset.reset processing_ms \
         isolation.level",
        "field",
    )?;
    if outboxes.count() == 0 {
        return Err(cx.err(
            s.at,
            &s.path,
            "a consumer reads the outbox's routed events: declare an outbox table ([[table]] outbox = { … }) or a \
             [[message_outbox]]",
        ));
    }
    let rules = InboxRule::ALL.map(|rule| (rule.name(), rule));
    let inbox = s.req(cx, "inbox", |field| cx.choice(field, &rules))?;
    let group = s.opt("group.id", "outbox-consumer".to_owned(), |field| match cx.string(field)? {
        "" => cx.fail(field, "must not be empty"),
        group => Ok(group.to_owned()),
    })?;
    let enable_auto_commit = s.opt("enable.auto.commit", false, |field| cx.boolean(field))?;
    let auto_commit_interval_ms = s.opt("auto.commit.interval.ms", 5_000, |field| cx.setting_ms(field, 1))?;
    let max_poll_records = s.opt("max.poll.records", 500, |field| cx.u32(field, 1))?;
    let resets = OffsetReset::ALL.map(|reset| (reset.name(), reset));
    let auto_offset_reset = s.opt("auto.offset.reset", OffsetReset::Earliest, |field| cx.choice(field, &resets))?;
    let processing_ms = s.opt("processing_ms", 10, |field| cx.setting_ms(field, 1))?;
    if inbox == InboxRule::OffsetBeforeEffect
        && enable_auto_commit
        && let Some(field) = s.get("enable.auto.commit")
    {
        return cx.fail(
            &field,
            "inbox = \"offset-before-effect\" commits each offset itself, before the event: leave auto commit off",
        );
    }
    Ok(ConsumerConfig {
        inbox,
        group,
        enable_auto_commit,
        auto_commit_interval_ms,
        max_poll_records,
        auto_offset_reset,
        processing_ms,
        isolation_level: isolation_level(cx, s)?,
    })
}

fn handoff(cx: &Cx, s: &Section, horizon: &Horizon) -> Res<HandoffMethod> {
    s.check_keys(cx, "method read_at_ms", "field")?;
    let methods = [("connector-snapshot", false), ("plain-read", true)];
    let method = s.get("method");
    let plain = method.as_ref().map_or(Ok(false), |field| cx.choice(field, &methods))?;
    match (plain, s.get("read_at_ms"), method) {
        (true, Some(field), _) => Ok(HandoffMethod::PlainRead { read_at_ms: cx.time_ms(&field, 0, horizon)? }),
        (true, None, Some(method)) => {
            Err(cx.err(method.at, &s.field_path("read_at_ms"), "required with method = \"plain-read\""))
        }
        (false, Some(field), _) => {
            cx.fail(&field, "applies only to method = \"plain-read\" (the method is connector-snapshot)")
        }
        _ => Ok(HandoffMethod::ConnectorSnapshot),
    }
}

fn failover(cx: &Cx, s: &Section, standby: bool) -> Res<GatePolicy> {
    s.check_keys(cx, "gate", "field")?;
    let gates = [("off", GatePolicy::Off), ("rebuild", GatePolicy::Rebuild), ("fail-closed", GatePolicy::FailClosed)];
    let Some(field) = s.get("gate") else { return Ok(GatePolicy::Off) };
    let gate = cx.choice(&field, &gates)?;
    if gate != GatePolicy::Off && !standby {
        return cx.fail(
            &field,
            format!("gate `{}` needs a standby to fail over to: add [postgres.standby]", cx.string(&field)?),
        );
    }
    Ok(gate)
}

fn acceptance(cx: &Cx, s: &Section) -> Res<(Acceptance, Horizon)> {
    s.check_keys(cx, "timeout_ms sample_size horizon_ms", "field")?;
    let (low, high) = (limits::MIN_HORIZON_MS as i64, limits::MAX_HORIZON_MS as i64);
    let horizon_ms = s.opt("horizon_ms", limits::DEFAULT_HORIZON_MS, |field| match field.item.val {
        Val::Int(Some(value)) if (low..=high).contains(&value) => Ok(value as u64),
        Val::Int(value) => cx.fail(
            field,
            format!(
                "{} ({} to {})",
                out_of_range(value, low, high),
                duration_text(low as u64),
                duration_text(high as u64)
            ),
        ),
        _ => cx.wrong(field, "an integer"),
    })?;
    let acceptance = Acceptance {
        timeout_ms: s.opt("timeout_ms", 600_000, |field| cx.int(field, 0, high).map(|value| value as u64))?,
        sample_size: s.opt("sample_size", 20, |field| cx.u32(field, 0))?,
        horizon_ms,
    };
    Ok((acceptance, Horizon { ms: horizon_ms, given: s.get("horizon_ms").is_some() }))
}

/// The first connector and the `[[connector]]`s after it, each to be changed (a signal step's
/// signals go to every connector reading its table).
/// The `connector_config` steps of `[workload]` (`PUT /connectors/<name>/config` with a new
/// `table.include.list`), in file order: step `n` puts configuration version `n`, whose captured
/// tables are read here as the connector's own list is (the signal table joins them as Debezium's
/// table filter adds it). The first connector's only; with one Connect worker; tables added, none
/// removed. `others`: how many connectors follow the first, and the group's workers.
fn config_steps(
    cx: &Cx,
    section: &Section,
    scripted: &mut [handoff_models::scenario::spec::ScriptedTxn],
    tables: &[TableSetup],
    debezium: &mut DebeziumConfig,
    (others, workers): (usize, u8),
) -> Res<()> {
    use handoff_models::components::app::StepKind;
    let Some(field) = section.get("script") else { return Ok(()) };
    let items = cx.items(&field, "an array of tables")?;
    for (item, txn) in items.iter().zip(scripted.iter_mut()) {
        let StepKind::ConnectorConfig { version } = &mut txn.step.kind else { continue };
        let s = cx.section(item)?;
        let at = s.need(cx, "connector_config", "")?;
        if others > 0 {
            return cx.fail(&at, "a configuration update with several [[connector]] entries is not modelled yet");
        }
        if workers > 1 {
            return cx.fail(
                &at,
                "a configuration update in a Connect group ([connect] workers > 1) is not modelled yet; it runs with \
                 one worker",
            );
        }
        let config = cx.section(&at)?;
        let list_field = config.need(cx, "table.include.list", "")?;
        let mut list = super::connector::include_list(cx, &config, tables)?;
        if let Some(signal) = debezium.signal_table()
            && !list.contains(&signal)
        {
            list.push(signal);
        }
        let previous = debezium.later_tables.last().unwrap_or(&debezium.tables);
        if let Some(removed) = previous.iter().find(|table| !list.contains(table)) {
            let name = &tables[usize::from(removed.0)].name;
            return cx.fail(
                &list_field,
                format!(
                    "leaves out {name}, which the connector captures before this step: removing a table while the \
                     pipeline runs is not modelled yet (only adding one)"
                ),
            );
        }
        if debezium.later_tables.len() >= usize::from(u8::MAX) {
            return cx.fail(&at, format!("more than {} configuration updates", u8::MAX));
        }
        debezium.later_tables.push(list);
        *version = debezium.later_tables.len() as u8;
    }
    Ok(())
}

fn every_connector<'c>(
    debezium: &'c mut DebeziumConfig,
    more: &'c mut [ConnectorSection],
) -> Vec<&'c mut DebeziumConfig> {
    std::iter::once(debezium).chain(more.iter_mut().map(|more| &mut more.debezium)).collect()
}
