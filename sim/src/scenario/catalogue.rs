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
//! `topic.creation.` groups of KIP-158, the client overrides of KIP-458).

/// What a property is to the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Accepted; no effect on the run, for this reason.
    NotModelled(&'static str),
    /// Accepted at this default (listed as not modelled, for this reason); any other value is
    /// refused: it would change what the model simulates.
    DefaultOnly(&'static str, &'static str),
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
    ("topic.delimiter", Kind::DefaultOnly(".", TOPIC_NAMES)),
    ("topic.transaction", Kind::DefaultOnly("transaction", TOPIC_NAMES)),
    ("topic.naming.strategy", Kind::DefaultOnly("io.debezium.schema.SchemaTopicNamingStrategy", TOPIC_NAMES)),
    ("snapshot.delay.ms streaming.delay.ms", Kind::DefaultOnly("0", TIMING)),
    ("status.update.interval.ms", Kind::DefaultOnly("10000", REPLICATION)),
    ("xmin.fetch.interval.ms", Kind::DefaultOnly("0", REPLICATION)),
    ("slot.max.retries", Kind::DefaultOnly("6", REPLICATION)),
    ("slot.retry.delay.ms", Kind::DefaultOnly("10000", REPLICATION)),
    ("slot.stream.params", Kind::DefaultOnly("", REPLICATION)),
    ("flush.lsn.source", Kind::DefaultOnly("true", REPLICATION)),
    ("publish.via.partition.root", Kind::DefaultOnly("false", "partitioned tables, which the model does not have")),
    ("skipped.operations", Kind::DefaultOnly("t", "which change events are emitted: the model emits them all")),
    ("event.processing.failure.handling.mode", Kind::DefaultOnly("fail", ERRORS)),
    ("schema.refresh.mode", Kind::DefaultOnly("columns_diff", "schema changes, which are not modelled yet")),
    (
        "incremental.snapshot.allow.schema.changes",
        Kind::DefaultOnly("false", "schema changes, which are not modelled yet"),
    ),
    ("snapshot.query.mode", Kind::DefaultOnly("select_all", SNAPSHOT_TUNING)),
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
];

/// What `key` is to the model, if the catalogue knows it. `converters` lists custom converters
/// (`converters = "isbn"`): their own `<name>.` properties are the converter's.
pub(super) fn connector_kind(key: &str, converters: &[&str]) -> Option<Kind> {
    if let Some((_, kind)) = NAMES.iter().find(|(names, _)| names.split_whitespace().any(|name| name == key)) {
        return Some(*kind);
    }
    if let Some((_, kind)) = PREFIXES.iter().find(|(prefix, _)| key.starts_with(prefix) && key.len() > prefix.len()) {
        return Some(*kind);
    }
    // `column.mask.with.12.chars`, `column.truncate.to.20.chars`, `column.mask.hash.SHA-256.with.salt.x`.
    for family in ["column.mask.with.", "column.truncate.to.", "column.mask.hash."] {
        if key.starts_with(family) {
            return Some(Kind::Refused("it changes column values, and is not modelled yet"));
        }
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
