//! What the model knows about properties it does not simulate: a real connector configuration
//! (a Connect REST `{name, config}` object) carries converters, connection and security
//! settings, topic creation and client overrides alongside the properties that decide the
//! handoff. Those are accepted and listed once in the report as *not modelled*, with why; a
//! property that would change what the model simulates, set away from its default, is refused
//! by name; a name nobody knows is a typo, refused with the closest known name.
//!
//! Names from Debezium's `Field.create(…)` definitions (`PostgresConnectorConfig`,
//! `CommonConnectorConfig`, `RelationalDatabaseConnectorConfig`, `JdbcConfiguration`, 3.7) and
//! Kafka Connect's `ConnectorConfig`/`SourceConnectorConfig` (connector-level settings, the
//! `topic.creation.` groups of KIP-158, the client overrides of KIP-458); the Connect worker's
//! from Kafka's `WorkerConfig`, `DistributedConfig` and `CommonClientConfigs`; PostgreSQL's from
//! `pg_settings` (`postgresql15-settings.txt`) and the release notes of 16 and 17.

use super::fields::{Cx, Res, Section, closest};
use super::tree::{Entry, Val};

/// Settings accepted without effect: each with its value as given and why.
pub(super) type NotModelledList = Vec<(String, String, &'static str)>;

/// A setting's value as text (strings, integers, floats as written, booleans).
pub(super) fn value_text(val: &Val) -> Option<String> {
    match val {
        Val::Str(text) => Some(text.clone()),
        Val::Int(Some(value)) => Some(value.to_string()),
        Val::Float(_, text) => Some(text.clone()),
        Val::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// Sorts a section's entries: the `modelled` ones are returned for the section's own reader;
/// the ones `kind` says are not modelled are returned with their values and why; one `kind`
/// refuses, or at a value it does not accept, is an error naming it; any other is a typo,
/// refused with the closest of `known` (`what`: "connector property", …).
pub(super) fn classify(
    cx: &Cx,
    s: &Section,
    modelled: &[&str],
    known: &[&str],
    what: &str,
    kind: impl Fn(&str) -> Option<Kind>,
) -> Res<(Vec<Entry>, NotModelledList)> {
    let mut keep = Vec::new();
    let mut not_modelled = Vec::new();
    for entry in s.entries {
        let key = entry.key.as_str();
        if modelled.contains(&key) {
            keep.push(entry.clone());
            continue;
        }
        let field = s.field(entry);
        let value = || match value_text(&entry.item.val) {
            Some(text) => Ok(text),
            None => cx.wrong(&field, "a string, number or boolean"),
        };
        match kind(key) {
            Some(Kind::NotModelled(why)) => not_modelled.push((key.to_owned(), value()?, why)),
            Some(Kind::Only(accepted, why)) => {
                let value = value()?;
                if accepted.iter().any(|one| value.trim().eq_ignore_ascii_case(one)) {
                    not_modelled.push((key.to_owned(), value, why));
                } else {
                    let listed: Vec<String> = accepted
                        .iter()
                        .map(|one| if one.is_empty() { "empty".to_owned() } else { format!("`{one}`") })
                        .collect();
                    return cx.fail(
                        &field,
                        format!("`{}` is not modelled yet; only {} ({why})", value.trim(), listed.join(" or ")),
                    );
                }
            }
            Some(Kind::Refused(why)) => return cx.fail(&field, format!("not modelled yet: {why}")),
            None => {
                let hint = match closest(key, known) {
                    Some(name) => format!("did you mean \"{name}\"?"),
                    None => "see docs/scenario-format.md for the ones this testbed knows".to_owned(),
                };
                return cx.fail(&field, format!("unknown {what}; {hint}"));
            }
        }
    }
    Ok((keep, not_modelled))
}

/// What a property is to the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Accepted; no effect on the run, for this reason.
    NotModelled(&'static str),
    /// Accepted at one of these values (listed as not modelled, for this reason); any other
    /// value is refused: it would change what the model simulates.
    Only(&'static [&'static str], &'static str),
    /// Refused whatever its value: it changes what the model simulates (this says how).
    Refused(&'static str),
}

const CONNECTION: &str = "the connection to PostgreSQL: the model has its own server and connects to it";
const SERIALISATION: &str = "serialisation: the model carries rows and keys, not their bytes";
const REPRESENTATION: &str = "how column values are represented in records: the model compares rows by key and version";
const TOPIC_CREATION: &str =
    "topic creation: the model's topics are created as [kafka] says (partitions, cleanup.policy)";
const CLIENT_OVERRIDES: &str = "a client override: the model's producer, consumer and admin client have fixed settings";
const ERRORS: &str =
    "error handling for records that fail conversion or a transformation: no record fails so in the model";
const MONITORING: &str = "monitoring (metrics, notifications, lineage): the model reports through its own timeline";
const ONE_TASK: &str = "the PostgreSQL connector runs one task whatever tasks.max says";
const SNAPSHOT_TUNING: &str = "snapshot tuning: the model's snapshot reads each table in one SELECT on the exported \
                               snapshot, in the order of table.include.list";
const SCHEMA_LIST: &str = "the model's tables are named in [[table]]; table.include.list decides what is captured";
const RESTART: &str = "what Connect does when the configuration changes: the model's configuration does not change";
const TOPIC_NAMES: &str = "the topic names the model uses are Debezium's defaults (<topic.prefix>.<schema>.<table>)";
const TIMING: &str = "a delay the model does not have";
const REPLICATION: &str = "the replication connection's behaviour, which the model fixes at the default";

/// Exact names, `(names separated by spaces, kind)`.
const NAMES: &[(&str, Kind)] = &[
    (
        "database.hostname database.port database.user database.password database.dbname database.sslmode \
         database.sslcert database.sslkey database.sslpassword database.sslrootcert database.sslfactory \
         database.tcpKeepAlive database.initial.statements database.query.timeout.ms database.connection.timeout.ms \
         connection.validation.timeout.ms database.connection.factory.class",
        Kind::NotModelled(CONNECTION),
    ),
    ("key.converter value.converter header.converter", Kind::NotModelled(SERIALISATION)),
    (
        "decimal.handling.mode time.precision.mode binary.handling.mode hstore.handling.mode interval.handling.mode \
         money.fraction.digits include.unknown.datatypes column.propagate.source.type datatype.propagate.source.type \
         field.name.adjustment.mode schema.name.adjustment.mode unavailable.value.placeholder include.schema.comments \
         include.schema.changes sourceinfo.struct.maker extended.headers.enabled converters",
        Kind::NotModelled(REPRESENTATION),
    ),
    ("topic.creation.groups topic.creation.enable", Kind::NotModelled(TOPIC_CREATION)),
    (
        "errors.tolerance errors.log.enable errors.log.include.messages errors.retry.timeout errors.retry.delay.max.ms \
         errors.max.retries errors.retry.delay.initial.ms event.converting.failure.handling.mode",
        Kind::NotModelled(ERRORS),
    ),
    (
        "custom.metric.tags statistics.metrics.enabled notification.enabled.channels notification.sink.topic.name \
         internal.advanced.metrics.enable",
        Kind::NotModelled(MONITORING),
    ),
    ("tasks.max tasks.max.enforce", Kind::NotModelled(ONE_TASK)),
    (
        "snapshot.isolation.mode snapshot.locking.mode snapshot.lock.timeout.ms snapshot.max.threads \
         snapshot.max.threads.multiplier snapshot.tables.order.by.row.count query.fetch.size max.queue.size.in.bytes \
         signal.kafka.poll.timeout.ms snapshot.locking.mode.custom.name legacy.snapshot.max.threads",
        Kind::NotModelled(SNAPSHOT_TUNING),
    ),
    ("schema.include.list", Kind::NotModelled(SCHEMA_LIST)),
    ("config.action.reload", Kind::NotModelled(RESTART)),
    ("topic.heartbeat.prefix heartbeat.topics.prefix topic.cache.size", Kind::NotModelled(TOPIC_NAMES)),
    ("topic.delimiter", Kind::Only(&["."], TOPIC_NAMES)),
    ("topic.transaction", Kind::Only(&["transaction"], TOPIC_NAMES)),
    ("topic.naming.strategy", Kind::Only(&["io.debezium.schema.SchemaTopicNamingStrategy"], TOPIC_NAMES)),
    ("snapshot.delay.ms streaming.delay.ms", Kind::Only(&["0"], TIMING)),
    ("status.update.interval.ms", Kind::Only(&["10000"], REPLICATION)),
    ("xmin.fetch.interval.ms", Kind::Only(&["0"], REPLICATION)),
    ("slot.max.retries", Kind::Only(&["6"], REPLICATION)),
    ("slot.retry.delay.ms", Kind::Only(&["10000"], REPLICATION)),
    ("slot.stream.params", Kind::Only(&[""], REPLICATION)),
    ("flush.lsn.source", Kind::Only(&["true"], REPLICATION)),
    ("publish.via.partition.root", Kind::Only(&["false"], "partitioned tables, which the model does not have")),
    ("skipped.operations", Kind::Only(&["t"], "which change events are emitted: the model emits them all")),
    ("event.processing.failure.handling.mode", Kind::Only(&["fail"], ERRORS)),
    ("schema.refresh.mode", Kind::Only(&["columns_diff"], "schema changes, which are not modelled yet")),
    ("incremental.snapshot.allow.schema.changes", Kind::Only(&["false"], "schema changes, which are not modelled yet")),
    ("snapshot.query.mode", Kind::Only(&["select_all"], SNAPSHOT_TUNING)),
    (
        "database.server.name",
        Kind::Refused(
            "Debezium 2.0 renamed it topic.prefix (the topics' prefix), the name the model reads for every release: write topic.prefix instead",
        ),
    ),
    (
        "table.whitelist schema.whitelist column.whitelist table.blacklist schema.blacklist column.blacklist",
        Kind::Refused(
            "Debezium 2.0 removed the whitelist and blacklist names: write table.include.list, schema.include.list, \
             … (the exclude lists are not modelled yet)",
        ),
    ),
    (
        "table.exclude.list column.include.list column.exclude.list snapshot.select.statement.overrides \
         replica.identity.autoset.values database.include.list database.exclude.list schema.exclude.list \
         column.mask.hash column.truncate.to post.processors snapshot.mode.custom.name snapshot.query.mode.custom.name \
         lsn.flush.timeout.ms lsn.flush.timeout.action offsets.storage.topic",
        Kind::Refused("it changes what the connector captures or how, and is not modelled yet"),
    ),
];

/// Name prefixes (each ends in `.`): a family of properties, `(prefix, kind)`.
const PREFIXES: &[(&str, Kind)] = &[
    ("key.converter.", Kind::NotModelled(SERIALISATION)),
    ("value.converter.", Kind::NotModelled(SERIALISATION)),
    ("header.converter.", Kind::NotModelled(SERIALISATION)),
    ("topic.creation.", Kind::NotModelled(TOPIC_CREATION)),
    ("producer.override.", Kind::NotModelled(CLIENT_OVERRIDES)),
    ("consumer.override.", Kind::NotModelled(CLIENT_OVERRIDES)),
    ("admin.override.", Kind::NotModelled(CLIENT_OVERRIDES)),
    ("driver.", Kind::NotModelled(CONNECTION)),
    ("openlineage.", Kind::NotModelled(MONITORING)),
    ("notification.", Kind::NotModelled(MONITORING)),
    ("errors.deadletterqueue.", Kind::NotModelled(ERRORS)),
    // `column.mask.with.12.chars`, `column.truncate.to.20.chars`, `column.mask.hash.SHA-256.with.salt.x`.
    ("column.mask.with.", Kind::Refused(COLUMN_VALUES)),
    ("column.truncate.to.", Kind::Refused(COLUMN_VALUES)),
    ("column.mask.hash.", Kind::Refused(COLUMN_VALUES)),
];

const COLUMN_VALUES: &str = "it changes column values, and is not modelled yet";

/// The kind of `key` in a catalogue: an exact name first, then a family by its prefix.
fn lookup(names: &[(&str, Kind)], prefixes: &[(&str, Kind)], key: &str) -> Option<Kind> {
    let named = names.iter().find(|(names, _)| names.split_whitespace().any(|name| name == key));
    let family = || prefixes.iter().find(|(prefix, _)| key.starts_with(prefix) && key.len() > prefix.len());
    named.or_else(family).map(|(_, kind)| *kind)
}

/// What `key` is to the model, if the catalogue knows it. `converters` lists custom converters
/// (`converters = "isbn"`): their own `<name>.` properties are the converter's.
pub(super) fn connector_kind(key: &str, converters: &[&str]) -> Option<Kind> {
    if let Some(kind) = lookup(NAMES, PREFIXES, key) {
        return Some(kind);
    }
    if converters.iter().any(|name| key.strip_prefix(name).is_some_and(|rest| rest.starts_with('.'))) {
        return Some(Kind::NotModelled(REPRESENTATION));
    }
    None
}

/// Every exact name of the catalogue (for suggestions).
pub(super) fn connector_names() -> impl Iterator<Item = &'static str> {
    NAMES.iter().flat_map(|(names, _)| names.split_whitespace())
}

// ---------------------------------------------------------------------------------------------
// The Connect worker (`connect-distributed.properties`).

const WORKER_CLIENT: &str =
    "the worker's connection to Kafka: the model's worker talks to its broker directly, with no network settings";
const INTERNAL_TOPICS: &str =
    "Connect's internal topics: the model keeps the offsets, configurations and statuses itself";
const PLUGINS: &str = "plugin loading: the model has the connector and transforms built in";
const REST: &str = "the REST API: the model's operator acts on the worker directly";
const CONFIG_PROVIDERS: &str = "configuration providers: the model reads every value as given";
const WORKER_SECURITY: &str = "security: the model's processes trust each other";
const CONFIG_TOPIC: &str = "reading the config topic: the model's workers read it without delay";
const TOPIC_TRACKING: &str = "the active-topics tracking of the REST API";

const WORKER_NAMES: &[(&str, Kind)] = &[
    (
        "bootstrap.servers client.dns.lookup client.id client.rack connections.max.idle.ms metadata.max.age.ms \
         metadata.recovery.strategy receive.buffer.bytes send.buffer.bytes reconnect.backoff.ms \
         reconnect.backoff.max.ms request.timeout.ms retry.backoff.ms retry.backoff.max.ms \
         socket.connection.setup.timeout.ms socket.connection.setup.timeout.max.ms default.api.timeout.ms \
         enable.metrics.push",
        Kind::NotModelled(WORKER_CLIENT),
    ),
    ("key.converter value.converter header.converter", Kind::NotModelled(SERIALISATION)),
    (
        "offset.storage.topic offset.storage.partitions offset.storage.replication.factor config.storage.topic \
         config.storage.replication.factor status.storage.topic status.storage.partitions \
         status.storage.replication.factor offset.storage.file.filename",
        Kind::NotModelled(INTERNAL_TOPICS),
    ),
    ("plugin.path plugin.discovery", Kind::NotModelled(PLUGINS)),
    (
        "listeners admin.listeners rest.advertised.host.name rest.advertised.port rest.advertised.listener \
         rest.host.name rest.port access.control.allow.origin access.control.allow.methods \
         response.http.headers.config rest.extension.classes",
        Kind::NotModelled(REST),
    ),
    ("config.providers", Kind::NotModelled(CONFIG_PROVIDERS)),
    (
        "metric.reporters metrics.num.samples metrics.recording.level metrics.sample.window.ms",
        Kind::NotModelled(MONITORING),
    ),
    (
        "inter.worker.key.generation.algorithm inter.worker.key.size inter.worker.key.ttl.ms \
         inter.worker.signature.algorithm inter.worker.verification.algorithms security.protocol",
        Kind::NotModelled(WORKER_SECURITY),
    ),
    ("connector.client.config.override.policy", Kind::NotModelled(CLIENT_OVERRIDES)),
    ("topic.creation.enable", Kind::NotModelled(TOPIC_CREATION)),
    ("topic.tracking.enable topic.tracking.allow.reset", Kind::NotModelled(TOPIC_TRACKING)),
    ("worker.sync.timeout.ms worker.unsync.backoff.ms", Kind::NotModelled(CONFIG_TOPIC)),
    (
        "connect.protocol",
        Kind::Only(
            &["sessioned", "compatible"],
            "the model's workers rebalance incrementally (KIP-415); eager is not modelled",
        ),
    ),
    ("group.instance.id", Kind::Refused("static group membership is not modelled")),
];

const WORKER_PREFIXES: &[(&str, Kind)] = &[
    ("key.converter.", Kind::NotModelled(SERIALISATION)),
    ("value.converter.", Kind::NotModelled(SERIALISATION)),
    ("header.converter.", Kind::NotModelled(SERIALISATION)),
    ("config.providers.", Kind::NotModelled(CONFIG_PROVIDERS)),
    ("producer.", Kind::NotModelled(CLIENT_OVERRIDES)),
    ("consumer.", Kind::NotModelled(CLIENT_OVERRIDES)),
    ("admin.", Kind::NotModelled(CLIENT_OVERRIDES)),
    ("ssl.", Kind::NotModelled(WORKER_SECURITY)),
    ("sasl.", Kind::NotModelled(WORKER_SECURITY)),
    ("listeners.", Kind::NotModelled(REST)),
    ("admin.listeners.", Kind::NotModelled(REST)),
];

/// What a Connect worker property is to the model, if the catalogue knows it.
pub(super) fn worker_kind(key: &str) -> Option<Kind> {
    lookup(WORKER_NAMES, WORKER_PREFIXES, key)
}

/// Every exact worker property name of the catalogue (for suggestions).
pub(super) fn worker_names() -> impl Iterator<Item = &'static str> {
    WORKER_NAMES.iter().flat_map(|(names, _)| names.split_whitespace())
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL (`postgresql.conf`).

/// `name context` per line (`#` comments): PostgreSQL 15's settings.
const POSTGRESQL15: &str = include_str!("postgresql15-settings.txt");

/// Settings added in PostgreSQL 16 and 17 (release notes, "Server Configuration"), with the
/// release that added them.
const ADDED: &[(&str, u32)] = &[
    ("createrole_self_grant", 16),
    ("debug_io_direct", 16),
    ("debug_logical_replication_streaming", 16),
    ("debug_parallel_query", 16),
    ("enable_presorted_aggregate", 16),
    ("gss_accept_delegation", 16),
    ("icu_validation_level", 16),
    ("max_parallel_apply_workers_per_subscription", 16),
    ("reserved_connections", 16),
    ("scram_iterations", 16),
    ("send_abort_for_crash", 16),
    ("send_abort_for_kill", 16),
    ("vacuum_buffer_usage_limit", 16),
    ("allow_alter_system", 17),
    ("commit_timestamp_buffers", 17),
    ("enable_group_by_reordering", 17),
    ("event_triggers", 17),
    ("io_combine_limit", 17),
    ("max_notify_queue_pages", 17),
    ("multixact_member_buffers", 17),
    ("multixact_offset_buffers", 17),
    ("notify_buffers", 17),
    ("serializable_buffers", 17),
    ("subtransaction_buffers", 17),
    ("summarize_wal", 17),
    ("sync_replication_slots", 17),
    ("synchronized_standby_slots", 17),
    ("trace_connection_negotiation", 17),
    ("transaction_buffers", 17),
    ("transaction_timeout", 17),
    ("wal_summary_keep_time", 17),
];

const SERVER: &str = "a server setting outside what the model simulates (memory, planner, logging, connections, \
                      maintenance, locale)";
const CAPACITY: &str =
    "capacity: the model's server has room for every slot, walsender and connection the scenario uses";
const DECODING_MEMORY: &str = "decoding memory: a large transaction spilled to disk decodes to the same changes";
const STANDBY_SIDE: &str = "a standby's own setting: the model's standby is [postgres.standby]";
const WAL_TUNING: &str = "WAL and checkpoint pacing, durability and record sizes: the model's WAL advances by its own \
                          record sizes, every commit flushed before it is acknowledged";
const ARCHIVING: &str = "WAL archiving: the model keeps WAL for slots, wal_keep_size and max_wal_size only";
const EXTENSION: &str = "an extension's setting";

const POSTGRES_NAMES: &[(&str, Kind)] = &[
    (
        "wal_level",
        Kind::Only(&["logical"], "logical decoding needs wal_level = logical, which the model's server runs with"),
    ),
    (
        "synchronous_standby_names",
        Kind::Only(
            &[""],
            "synchronous replication is not modelled yet: the standby replays after replication_delay_ms",
        ),
    ),
    (
        "max_replication_slots max_wal_senders max_connections max_worker_processes max_logical_replication_workers",
        Kind::NotModelled(CAPACITY),
    ),
    ("logical_decoding_work_mem", Kind::NotModelled(DECODING_MEMORY)),
    (
        "hot_standby hot_standby_feedback primary_conninfo primary_slot_name recovery_min_apply_delay \
         max_standby_streaming_delay max_standby_archive_delay wal_receiver_timeout wal_receiver_status_interval \
         sync_replication_slots",
        Kind::NotModelled(STANDBY_SIDE),
    ),
    (
        "min_wal_size checkpoint_completion_target checkpoint_warning checkpoint_flush_after wal_buffers \
         wal_writer_delay wal_writer_flush_after commit_delay commit_siblings fsync synchronous_commit \
         full_page_writes wal_compression wal_log_hints wal_init_zero wal_recycle wal_sync_method \
         wal_skip_threshold",
        Kind::NotModelled(WAL_TUNING),
    ),
    ("archive_mode archive_command archive_library archive_timeout", Kind::NotModelled(ARCHIVING)),
    (
        "statement_timeout idle_session_timeout",
        Kind::Only(&["0"], "a timeout that cancels a snapshot's query or an idle session is not modelled yet"),
    ),
    ("old_snapshot_threshold", Kind::Only(&["-1"], "\"snapshot too old\" is not modelled")),
];

/// What a `postgresql.conf` setting is to the model on PostgreSQL `version`, if the server has it.
pub(super) fn postgres_kind(key: &str, version: u32) -> Option<Kind> {
    let lower = key.to_ascii_lowercase();
    if let Some(kind) = lookup(POSTGRES_NAMES, &[], &lower) {
        return Some(kind);
    }
    if lower.contains('.') {
        return Some(Kind::NotModelled(EXTENSION));
    }
    if let Some((_, added)) = ADDED.iter().find(|(name, _)| *name == lower) {
        return if version >= *added {
            Some(Kind::NotModelled(SERVER))
        } else {
            Some(Kind::Refused(match added {
                16 => {
                    "PostgreSQL 16 added it; this server is older (PostgreSQL refuses it: unrecognized configuration parameter)"
                }
                _ => {
                    "PostgreSQL 17 added it; this server is older (PostgreSQL refuses it: unrecognized configuration parameter)"
                }
            }))
        };
    }
    let context = POSTGRESQL15
        .lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| line.split_once(' ').filter(|(name, _)| name.eq_ignore_ascii_case(&lower)).map(|(_, c)| c))?;
    if context == "internal" {
        return Some(Kind::Refused(
            "a read-only setting, fixed when the server was built or initialised (initdb); PostgreSQL cannot change it",
        ));
    }
    Some(Kind::NotModelled(SERVER))
}

/// Every setting name PostgreSQL `version` has (for suggestions).
pub(super) fn postgres_names(version: u32) -> Vec<&'static str> {
    POSTGRESQL15
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split(' ').next())
        .chain(ADDED.iter().filter(|(_, added)| version >= *added).map(|(name, _)| *name))
        .collect()
}
