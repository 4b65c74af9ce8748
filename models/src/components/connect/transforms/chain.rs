//! A connector's transformation chain as Kafka Connect builds and runs it
//! (`ConnectorConfig.transformationStages`, `TransformationChain.apply`, `TransformationStage`):
//! the aliases of `transforms` in order, each `transforms.<alias>.type` with its own options, and
//! optionally a predicate (`transforms.<alias>.predicate` naming an alias of `predicates`,
//! `transforms.<alias>.negate`) that decides per record whether the stage applies
//! (`predicate.test(record) != negate`; without a predicate it always does).
//!
//! The transforms the model runs: Debezium's outbox `EventRouter` (reference
//! debezium-postgres.md §7.1) and `DecodeLogicalDecodingMessageContent` (§7.2,
//! [`super::decode_message`]), which turns a logical decoding message's record into a change
//! envelope the router can route (the table-free outbox: chained before the router). Predicates:
//! Kafka Connect's `TopicNameMatches` (`pattern`, the whole topic name,
//! `Pattern.matcher(topic).matches()`) and `RecordIsTombstone`. Any other type is refused by name
//! rather than ignored.
//!
//! The model's records are compact ([`SourceRecord`]); the chain sees each as the `ConnectRecord`
//! Debezium builds ([`TransformChain::connect_record`]: the change envelope with its `before`,
//! `after`, `source`, `op` and `ts_ms`, the key struct, the heartbeat's and the message's own
//! schemas, a message's `content` rendered from the outbox event it carries), and what it returns
//! decides the record's fate: dropped, failed, or produced to the topic it names, with the key
//! bytes it computed choosing the partition.

use super::decode_message::{DecodeLogicalDecodingMessageContent, MESSAGE_VALUE_SCHEMA};
use super::event_router::EventRouter;
use super::{ConnectRecord, Struct, Transformed, Value};
use crate::core::event::{Op, Placement, SourceRecord, Topic, message_key, murmur2};
use crate::core::ids::{MessageEvent, Row, Status, TableId, event_uuid};
use std::collections::BTreeMap;

const STATUSES: [Status; 5] = [Status::Submitted, Status::Assessed, Status::Approved, Status::Paid, Status::Closed];

/// Kafka Connect's names of the transforms and predicates the model knows.
pub const EVENT_ROUTER: &str = "io.debezium.transforms.outbox.EventRouter";
pub const DECODE_MESSAGE: &str = "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent";
/// Transforms that change nothing the model follows (the record's key, topic, whether it is
/// sent, and the row's columns): headers and schema metadata. The chain runs them as the identity
/// and the scenario lists them as not modelled. `HeaderFrom` only with `operation=copy` (`move`
/// removes the field from the value).
pub const PASS_THROUGH: [&str; 7] = [
    "org.apache.kafka.connect.transforms.InsertHeader",
    "org.apache.kafka.connect.transforms.DropHeaders",
    "org.apache.kafka.connect.transforms.HeaderFrom$Key",
    "org.apache.kafka.connect.transforms.HeaderFrom$Value",
    "org.apache.kafka.connect.transforms.SetSchemaMetadata$Key",
    "org.apache.kafka.connect.transforms.SetSchemaMetadata$Value",
    "io.debezium.transforms.ExtractChangedRecordState",
];
pub const TOPIC_NAME_MATCHES: &str = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches";
pub const RECORD_IS_TOMBSTONE: &str = "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone";

/// What the chain needs to know of the scenario to build the records Debezium builds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct ChainContext {
    /// `topic.prefix`.
    pub topic_prefix: String,
    /// Every table by id: its schema-qualified name, and the aggregate type of an outbox table.
    pub tables: Vec<(String, Option<String>)>,
    /// The place of the connector's `[[connector]]` entry: its heartbeat and message topics are
    /// its own ([`Topic::heartbeat`]).
    #[serde(default)]
    pub connector: u8,
    /// The message outboxes (`[[message_outbox]]`), in order: each one's prefix and aggregate
    /// type (a message's content is rendered from them and its event).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub message_outboxes: Vec<(String, String)>,
    /// The other logical messages the scenario writes, by prefix: the size of their content
    /// (the first writer's), and whether it is `now()::varchar` (the connector's heartbeat).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plain_messages: Vec<PlainMessage>,
}

/// A logical message that carries no outbox event, as far as the chain renders its content: the
/// model keeps its size, not its bytes (a scripted `repeat('x', n)`, a heartbeat's `now()`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct PlainMessage {
    pub prefix: String,
    pub payload_bytes: u64,
    /// `now()::varchar` (a heartbeat action query's): rendered as the time it was written.
    pub now: bool,
}

/// The most bytes of a plain message's content the chain renders: a transform reads whether the
/// content is JSON, and says what it is when it is not.
const PLAIN_CONTENT_BYTES: u64 = 64;

impl PlainMessage {
    /// Its content as the record carries it: `repeat('x', n)` (at most
    /// [`PLAIN_CONTENT_BYTES`] of it), or `now()::varchar` at `ts_ms`.
    fn content(&self, ts_ms: u64) -> Vec<u8> {
        if self.now {
            return now_text(ts_ms).into_bytes();
        }
        vec![b'x'; self.payload_bytes.min(PLAIN_CONTENT_BYTES) as usize]
    }
}

/// `now()::varchar` at simulated `ms`, counted from PostgreSQL's epoch (2000-01-01 00:00:00
/// UTC): `2000-01-01 00:01:02.345000+00`.
fn now_text(ms: u64) -> String {
    // Days since 1970-01-01 (2000-01-01 is day 10,957), to a civil date (Howard Hinnant's
    // `civil_from_days`).
    let days = ms / 86_400_000 + 10_957;
    let in_day = ms % 86_400_000;
    let shifted = days + 719_468;
    let (era, day_of_era) = (shifted / 146_097, shifted % 146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:06}+00",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000 * 1000
    )
}

impl ChainContext {
    /// `<topic.prefix>.<schema>.<table>`.
    pub fn change_topic(&self, table: TableId) -> String {
        let name = self.tables.get(usize::from(table.0)).map_or("?", |(name, _)| name.as_str());
        format!("{}.{name}", self.topic_prefix)
    }

    fn topic_name(&self, topic: Topic) -> String {
        match topic {
            Topic::Change(table) => self.change_topic(table),
            Topic::Heartbeat | Topic::HeartbeatOf(_) => format!("__debezium-heartbeat.{}", self.topic_prefix),
            Topic::Message | Topic::MessageOf(_) => format!("{}.message", self.topic_prefix),
            Topic::Routed(_) | Topic::Signal(_) => String::new(),
        }
    }
}

#[derive(Clone, Debug)]
enum Predicate {
    TopicNameMatches(regex::Regex),
    RecordIsTombstone,
}

impl Predicate {
    fn test(&self, record: &ConnectRecord) -> bool {
        match self {
            Predicate::TopicNameMatches(pattern) => pattern.is_match(&record.topic),
            Predicate::RecordIsTombstone => record.value == Value::Null,
        }
    }
}

/// A transform the model runs.
#[derive(Clone, Debug)]
enum Transform {
    EventRouter(Box<EventRouter>),
    DecodeMessage(DecodeLogicalDecodingMessageContent),
    /// One of [`PASS_THROUGH`]: the identity here.
    PassThrough(&'static str),
}

impl Transform {
    /// Its type, as `transforms.<alias>.type` names it.
    fn type_name(&self) -> &'static str {
        match self {
            Transform::EventRouter(_) => EVENT_ROUTER,
            Transform::DecodeMessage(_) => DECODE_MESSAGE,
            Transform::PassThrough(class) => class,
        }
    }

    fn apply(&self, record: &ConnectRecord) -> Result<Transformed, String> {
        match self {
            Transform::EventRouter(router) => router.apply(record),
            Transform::DecodeMessage(decode) => decode.apply(record).map(Transformed::Record),
            Transform::PassThrough(_) => Ok(Transformed::Record(record.clone())),
        }
    }
}

#[derive(Clone, Debug)]
struct Stage {
    alias: String,
    transform: Transform,
    predicate: Option<(Predicate, bool)>,
}

impl Stage {
    /// Whether the stage applies to the record: `predicate.test(record) != negate`, and always
    /// without a predicate (`TransformationStage.apply`).
    fn applies_to(&self, record: &ConnectRecord) -> bool {
        self.predicate.as_ref().is_none_or(|(predicate, negate)| predicate.test(record) != *negate)
    }
}

/// What the chain made of one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Produced to `topic` (by name), placed as `placement` (`None`: the record's own key, as
    /// without transforms).
    Send { topic: String, placement: Option<Placement> },
    /// Dropped by a transform (Connect still acknowledges its offset).
    Dropped(String),
}

/// The configured chain. Equal chains are equal configurations.
#[derive(Clone, Debug)]
pub struct TransformChain {
    /// The `transforms` and `predicates` properties as configured.
    pub properties: BTreeMap<String, String>,
    pub context: ChainContext,
    stages: Vec<Stage>,
    /// The topics the chain routes records to, in the order they were found: a routed record's
    /// topic is [`Topic::Routed`] with its index here.
    pub routed_topics: Vec<String>,
    /// The routed topics of the whole run (every connector's, [`Topic::Routed`] indexes this
    /// list); empty: the chain's own.
    pub run_routed_topics: Vec<String>,
}

impl PartialEq for TransformChain {
    fn eq(&self, other: &TransformChain) -> bool {
        self.properties == other.properties && self.context == other.context
    }
}

impl Eq for TransformChain {}

impl std::hash::Hash for TransformChain {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.properties.hash(state);
        self.context.hash(state);
    }
}

/// A chain is written as its configuration, and read by configuring it again.
impl serde::Serialize for TransformChain {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (&self.properties, &self.context).serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for TransformChain {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (properties, context) = <(BTreeMap<String, String>, ChainContext)>::deserialize(deserializer)?;
        TransformChain::configure(&properties, context)
            .map_err(|error| serde::de::Error::custom(format!("{}: {}", error.property, error.problem)))
    }
}

/// Whether a connector property belongs to the transformation chain.
pub fn is_chain_property(key: &str) -> bool {
    key == "transforms" || key == "predicates" || key.starts_with("transforms.") || key.starts_with("predicates.")
}

/// A configuration error: the property it is about, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainError {
    pub property: String,
    pub problem: String,
}

fn error<T>(property: &str, problem: impl Into<String>) -> Result<T, ChainError> {
    Err(ChainError { property: property.to_owned(), problem: problem.into() })
}

/// A comma-separated list as Connect reads one (`ConfigDef.Type.LIST`: trimmed, empty entries
/// dropped).
fn list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|alias| !alias.is_empty()).map(str::to_owned).collect()
}

impl TransformChain {
    /// No transforms: records go as the connector made them.
    pub fn none(context: ChainContext) -> TransformChain {
        TransformChain {
            properties: BTreeMap::new(),
            context,
            stages: Vec::new(),
            routed_topics: Vec::new(),
            run_routed_topics: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// Builds the chain from the connector's `transforms`, `transforms.*`, `predicates` and
    /// `predicates.*` properties. Every property must be used: an alias not listed, an option the
    /// transform does not define, a type the model does not run, are errors naming the property.
    pub fn configure(
        properties: &BTreeMap<String, String>,
        context: ChainContext,
    ) -> Result<TransformChain, ChainError> {
        let aliases = properties.get("transforms").map(|text| list(text)).unwrap_or_default();
        let predicate_aliases = properties.get("predicates").map(|text| list(text)).unwrap_or_default();
        for key in properties.keys() {
            let (family, aliases) = if key.starts_with("transforms.") {
                ("transforms", &aliases)
            } else if key.starts_with("predicates.") {
                ("predicates", &predicate_aliases)
            } else {
                continue;
            };
            let alias = key[family.len() + 1..].split('.').next().unwrap_or_default();
            if !aliases.iter().any(|listed| listed == alias) {
                return error(key, format!("`{alias}` is not in `{family}`; list it there or remove the property"));
            }
        }
        let mut predicates: BTreeMap<String, Predicate> = BTreeMap::new();
        for alias in &predicate_aliases {
            let prefix = format!("predicates.{alias}.");
            let type_key = format!("{prefix}type");
            let Some(kind) = properties.get(&type_key) else {
                return error(&type_key, "is missing: every predicate needs its type");
            };
            let predicate = match kind.trim() {
                TOPIC_NAME_MATCHES => {
                    let pattern_key = format!("{prefix}pattern");
                    let Some(pattern) = properties.get(&pattern_key) else {
                        return error(&pattern_key, "is missing: TopicNameMatches needs a pattern");
                    };
                    match regex::Regex::new(&format!("^(?:{pattern})$")) {
                        Ok(regex) => Predicate::TopicNameMatches(regex),
                        Err(_) => {
                            return error(
                                &pattern_key,
                                format!("`{pattern}` is not a regular expression the model can run"),
                            );
                        }
                    }
                }
                RECORD_IS_TOMBSTONE => Predicate::RecordIsTombstone,
                other => {
                    return error(
                        &type_key,
                        format!(
                            "`{other}` is not a predicate the model runs; it runs {TOPIC_NAME_MATCHES} and \
                             {RECORD_IS_TOMBSTONE}"
                        ),
                    );
                }
            };
            for key in properties.keys().filter(|key| key.starts_with(&prefix)) {
                let option = &key[prefix.len()..];
                let allowed = match predicate {
                    Predicate::TopicNameMatches(_) => ["type", "pattern"].contains(&option),
                    Predicate::RecordIsTombstone => option == "type",
                };
                if !allowed {
                    return error(key, "is not an option of this predicate");
                }
            }
            predicates.insert(alias.clone(), predicate);
        }
        let mut stages = Vec::new();
        for alias in &aliases {
            let prefix = format!("transforms.{alias}.");
            let type_key = format!("{prefix}type");
            let Some(kind) = properties.get(&type_key) else {
                return error(&type_key, "is missing: every transform needs its type");
            };
            let kind = kind.trim();
            if let Some(class) = PASS_THROUGH.iter().find(|class| **class == kind) {
                let operation =
                    properties.get(&format!("{prefix}operation")).map(|value| value.trim().to_ascii_lowercase());
                if class.contains("HeaderFrom") && operation.as_deref() != Some("copy") {
                    return error(
                        &format!("{prefix}operation"),
                        "HeaderFrom with operation=move removes the field from the record, which is not modelled; \
                         operation=copy is",
                    );
                }
                let predicate = match properties.get(&format!("{prefix}predicate")) {
                    Some(name) => match predicates.get(name.trim()) {
                        Some(predicate) => {
                            let negate = properties.get(&format!("{prefix}negate"));
                            Some((
                                predicate.clone(),
                                negate.is_some_and(|value| value.trim().eq_ignore_ascii_case("true")),
                            ))
                        }
                        None => {
                            return error(
                                &format!("{prefix}predicate"),
                                format!("`{}` is not in `predicates`", name.trim()),
                            );
                        }
                    },
                    None => None,
                };
                stages.push(Stage { alias: alias.clone(), transform: Transform::PassThrough(class), predicate });
                continue;
            }
            if ![EVENT_ROUTER, DECODE_MESSAGE].contains(&kind) {
                return error(
                    &type_key,
                    format!(
                        "`{kind}` is not a transform the model runs; it runs {EVENT_ROUTER} and {DECODE_MESSAGE}, and \
                         as the identity (not modelled) {}",
                        PASS_THROUGH.join(", ")
                    ),
                );
            }
            let mut options = BTreeMap::new();
            let mut predicate_alias = None;
            let mut negate = None;
            for (key, value) in properties.iter().filter(|(key, _)| key.starts_with(&prefix)) {
                match &key[prefix.len()..] {
                    "type" => {}
                    "predicate" => predicate_alias = Some((key, value.trim().to_owned())),
                    "negate" => match value.trim().to_ascii_lowercase().as_str() {
                        "true" => negate = Some((key, true)),
                        "false" => negate = Some((key, false)),
                        _ => return error(key, format!("expected true or false, found `{value}`")),
                    },
                    option => {
                        options.insert(option.to_owned(), value.clone());
                    }
                }
            }
            let transform = if kind == EVENT_ROUTER {
                Transform::EventRouter(Box::new(
                    EventRouter::configure(&options).or_else(|problem| error(&type_key, problem))?,
                ))
            } else {
                Transform::DecodeMessage(
                    DecodeLogicalDecodingMessageContent::configure(&options)
                        .or_else(|problem| error(&type_key, problem))?,
                )
            };
            let predicate = match predicate_alias {
                Some((key, name)) => match predicates.get(&name) {
                    Some(predicate) => Some((predicate.clone(), negate.is_some_and(|(_, flag)| flag))),
                    None => return error(key, format!("`{name}` is not in `predicates`")),
                },
                None => {
                    if let Some((key, _)) = negate {
                        return error(key, "needs a predicate (`negate` inverts one)");
                    }
                    None
                }
            };
            stages.push(Stage { alias: alias.clone(), transform, predicate });
        }
        let mut chain = TransformChain {
            properties: properties.clone(),
            context,
            stages,
            routed_topics: Vec::new(),
            run_routed_topics: Vec::new(),
        };
        chain.routed_topics = chain.probe_routed_topics();
        Ok(chain)
    }

    /// An insert into `table` as the connector streams it: an event row of an outbox table (of
    /// type `status`), a claims row otherwise.
    fn probe(&self, table: TableId, status: Status) -> SourceRecord {
        let outbox = self.context.tables.get(usize::from(table.0)).is_some_and(|(_, outbox)| outbox.is_some());
        let row = if outbox { Row::event(1, status) } else { Row::new(1, status, 100) };
        let event = crate::core::event::ChangeEvent {
            op: Op::Create,
            before: None,
            after: Some(row),
            source: crate::core::event::SourceInfo {
                connector: crate::core::event::Origin::Postgresql,
                table,
                lsn: crate::core::lsn::Lsn(0),
                tx_id: None,
                snapshot: crate::core::event::SnapshotMarker::Streamed,
                ts_ms: 0,
            },
        };
        SourceRecord {
            topic: Topic::Change(table),
            key: 1,
            value: Some(event),
            offset: Default::default(),
            placement: None,
        }
    }

    /// A message of message outbox `outbox` as the connector streams it: an event of type
    /// `status` in its content.
    fn probe_message(&self, outbox: u16, status: Status) -> SourceRecord {
        let event = MessageEvent { outbox, id: 1, aggregate_id: 1, event_type: status };
        let prefix = self.context.message_outboxes.get(usize::from(outbox)).map_or("", |(prefix, _)| prefix.as_str());
        SourceRecord {
            topic: Topic::message(self.context.connector),
            key: event.id,
            value: Some(crate::core::event::ChangeEvent {
                op: Op::Message,
                before: None,
                after: Some(event.row()),
                source: crate::core::event::SourceInfo {
                    connector: crate::core::event::Origin::Postgresql,
                    table: TableId::message_outbox(outbox),
                    lsn: crate::core::lsn::Lsn(0),
                    tx_id: None,
                    snapshot: crate::core::event::SnapshotMarker::Streamed,
                    ts_ms: 0,
                },
            }),
            offset: Default::default(),
            placement: Some(crate::core::event::key_placement(message_key(prefix))),
        }
    }

    /// The probes of the service's events: every outbox table's and every message outbox's
    /// event of every type.
    fn probes(&self) -> Vec<SourceRecord> {
        let tables = self.context.tables.iter().enumerate().filter(|(_, (_, outbox))| outbox.is_some());
        let tables = tables.flat_map(|(index, _)| STATUSES.map(|status| self.probe(TableId(index as u16), status)));
        let messages = (0..self.context.message_outboxes.len())
            .flat_map(|outbox| STATUSES.map(|status| self.probe_message(outbox as u16, status)));
        tables.chain(messages).collect()
    }

    /// The topics the chain can route the service's events to: every outbox table's and every
    /// message outbox's event of every type, put through the chain, landing on a topic that is
    /// none of the connector's own.
    fn probe_routed_topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = Vec::new();
        for probe in self.probes() {
            if let Ok(Fate::Send { topic, .. }) = self.apply(&probe)
                && self.own_topic(&topic).is_none()
                && !topics.contains(&topic)
            {
                topics.push(topic);
            }
        }
        topics
    }

    /// Whether the chain routes the events of message outbox `outbox` (its messages' records) to
    /// a topic of their own; if not, what becomes of them, in words (I9 says it of an event never
    /// routed): the stages that applied to the record, and where it went.
    pub fn message_routing(&self, outbox: u16) -> Result<(), String> {
        let probe = self.probe_message(outbox, Status::Approved);
        let mut current = self.connect_record(&probe);
        let mut passed_router_as_message = false;
        let mut applied = Vec::new();
        for stage in &self.stages {
            if !stage.applies_to(&current) {
                continue;
            }
            let is_message = matches!(&current.value, Value::Struct(value) if value.schema_name.as_deref() == Some(MESSAGE_VALUE_SCHEMA));
            passed_router_as_message |= is_message && matches!(stage.transform, Transform::EventRouter(_));
            applied.push(format!("`{}`", stage.alias));
            match stage.transform.apply(&current) {
                Ok(Transformed::Record(next)) => current = next,
                Ok(Transformed::Dropped(why)) => {
                    return Err(format!("transform `{}` drops its record ({why})", stage.alias));
                }
                Err(problem) => return Err(format!("transform `{}` fails on its record: {problem}", stage.alias)),
            }
        }
        if self.own_topic(&current.topic).is_none() {
            return Ok(());
        }
        let topic = &current.topic;
        Err(if passed_router_as_message {
            format!(
                "the EventRouter saw the message's own record (op=m, value {MESSAGE_VALUE_SCHEMA}), which is no change \
                 envelope, and passes such a record on unchanged (EventRouterDelegate.apply), so it stayed on \
                 {topic}; DecodeLogicalDecodingMessageContent, run before the router, turns the message into an \
                 insert it routes (reference debezium-postgres.md §7.2)"
            )
        } else if applied.is_empty() {
            format!("no transform of the connector applies to the message's record: it stays on {topic}")
        } else {
            format!("the connector's transforms ({}) leave the message's record on {topic}", applied.join(", "))
        })
    }

    /// Whether the chain routes `table`'s inserts away from its change topic (an outbox table
    /// under the `EventRouter`): its changes are then no documents for the sink, they are events.
    pub fn routes(&self, table: TableId) -> bool {
        if let Some(outbox) = table.as_message_outbox() {
            return self.message_routing(outbox).is_ok();
        }
        STATUSES.iter().any(|status| {
            matches!(self.apply(&self.probe(table, *status)), Ok(Fate::Send { topic, .. }) if self.own_topic(&topic).is_none())
        })
    }

    /// A topic of the connector's own, by name.
    fn own_topic(&self, name: &str) -> Option<Topic> {
        let connector = self.context.connector;
        let mut own = vec![Topic::heartbeat(connector), Topic::message(connector)];
        own.extend((0..self.context.tables.len()).map(|index| Topic::Change(TableId(index as u16))));
        own.into_iter().find(|topic| self.context.topic_name(*topic) == name)
    }

    /// The model's topic of a name the chain produced to: one of the connector's own, or a routed
    /// one.
    pub fn topic(&self, name: &str) -> Option<Topic> {
        self.own_topic(name).or_else(|| {
            let run = if self.run_routed_topics.is_empty() { &self.routed_topics } else { &self.run_routed_topics };
            run.iter().position(|topic| topic == name).map(|index| Topic::Routed(index as u16))
        })
    }

    /// The `ConnectRecord` Debezium hands to Connect for a record (the parts a transform reads).
    pub fn connect_record(&self, record: &SourceRecord) -> ConnectRecord {
        let topic = self.context.topic_name(record.topic);
        let (key, value) = match (record.topic, &record.value) {
            (Topic::Heartbeat | Topic::HeartbeatOf(_), _) => (
                Value::Struct(
                    Struct::new(Some("io.debezium.connector.common.ServerNameKey"))
                        .with("serverName", Value::Text(self.context.topic_prefix.clone())),
                ),
                Value::Struct(Struct::new(Some("io.debezium.connector.common.Heartbeat")).with("ts_ms", Value::Int(0))),
            ),
            (Topic::Message | Topic::MessageOf(_), value) => {
                let (prefix, content) = self.message_of(record);
                let prefix = prefix.map_or(Value::Null, Value::Text);
                (
                    Value::Struct(
                        Struct::new(Some("io.debezium.connector.postgresql.MessageKey")).with("prefix", prefix.clone()),
                    ),
                    match value {
                        Some(event) => Value::Struct(
                            Struct::new(Some(MESSAGE_VALUE_SCHEMA))
                                .with("op", Value::Text("m".into()))
                                .with("ts_ms", Value::Int(event.source.ts_ms as i64))
                                .with(
                                    "source",
                                    Value::Struct(Struct::new(Some("io.debezium.connector.postgresql.Source"))),
                                )
                                .with(
                                    "message",
                                    Value::Struct(
                                        Struct::new(Some("io.debezium.connector.postgresql.Message"))
                                            .with("prefix", prefix)
                                            .with("content", Value::Bytes(content)),
                                    ),
                                ),
                        ),
                        None => Value::Null,
                    },
                )
            }
            (Topic::Change(table), value) => {
                let outbox = self.context.tables.get(usize::from(table.0)).and_then(|(_, outbox)| outbox.clone());
                let key_struct = Struct::new(Some(&format!("{topic}.Key"))).with(
                    "id",
                    if outbox.is_some() { Value::Text(event_uuid(record.key)) } else { Value::Int(record.key) },
                );
                let value = match value {
                    None => Value::Null,
                    Some(event) => {
                        let columns = |row: Option<Row>| match row {
                            None => Value::Null,
                            Some(row) => Value::Struct(row_struct(&topic, record.key, row, outbox.as_deref())),
                        };
                        Value::Struct(
                            Struct::new(Some(&format!("{topic}.Envelope")))
                                .with("before", columns(event.before))
                                .with("after", columns(event.after))
                                .with(
                                    "source",
                                    Value::Struct(Struct::new(Some("io.debezium.connector.postgresql.Source"))),
                                )
                                .with("op", Value::Text(event.op.code().to_string()))
                                .with("ts_ms", Value::Int(event.source.ts_ms as i64)),
                        )
                    }
                };
                (Value::Struct(key_struct), value)
            }
            (Topic::Routed(_) | Topic::Signal(_), _) => (Value::Null, Value::Null),
        };
        ConnectRecord { topic, partition: None, key, value, timestamp_ms: None, headers: Vec::new() }
    }

    /// A logical message record's prefix and content (`LogicalDecodingMessageMonitor`'s
    /// `message.prefix`, `message.content`): a message outbox's, its content the event's JSON
    /// ([`MessageEvent::content`]); another message's, found by its key among the scenario's
    /// plain messages, its content as [`PlainMessage::content`] renders it (nothing when the
    /// scenario does not say).
    fn message_of(&self, record: &SourceRecord) -> (Option<String>, Vec<u8>) {
        let Some(event) = record.value else { return (None, Vec::new()) };
        if let (Some(after), Some(outbox)) = (event.after, event.source.table.as_message_outbox())
            && let Some((prefix, aggregatetype)) = self.context.message_outboxes.get(usize::from(outbox))
        {
            let event =
                MessageEvent { outbox, id: record.key, aggregate_id: after.aggregate_id, event_type: after.status };
            return (Some(prefix.clone()), event.content(aggregatetype).into_bytes());
        }
        match self.context.plain_messages.iter().find(|plain| message_key(&plain.prefix) == record.key) {
            Some(plain) => (Some(plain.prefix.clone()), plain.content(event.source.ts_ms)),
            None => (None, Vec::new()),
        }
    }

    /// The chain applied to one record (`TransformationChain.apply`): each stage in order, where
    /// its predicate lets it; a drop ends the chain; an error is the exception that fails the task
    /// (`errors.tolerance = none`).
    pub fn apply(&self, record: &SourceRecord) -> Result<Fate, String> {
        let mut current = self.connect_record(record);
        let original_topic = current.topic.clone();
        let original_key = current.key.clone();
        for stage in &self.stages {
            if !stage.applies_to(&current) {
                continue;
            }
            match stage.transform.apply(&current) {
                Ok(Transformed::Record(next)) => current = next,
                Ok(Transformed::Dropped(why)) => return Ok(Fate::Dropped(why)),
                Err(problem) => {
                    return Err(format!("transform `{}` ({}): {problem}", stage.alias, stage.transform.type_name()));
                }
            }
        }
        let placement = match current.partition {
            Some(partition) => Some(Placement::Partition(partition.max(0) as u32)),
            // Unchanged: where the record goes without transforms (by its own key, or where the
            // connector placed it).
            None if current.topic == original_topic && current.key == original_key => record.placement,
            // A null key: the sticky partitioner's choice, which the model makes partition 0.
            None if current.key == Value::Null => Some(Placement::Partition(0)),
            None => Some(Placement::KeyHash((murmur2(json_key(&current.key).as_bytes()) & 0x7fff_ffff) as u32)),
        };
        Ok(Fate::Send { topic: current.topic, placement })
    }
}

/// A row as the table's value struct: the outbox article's columns for an outbox row, the claims
/// columns otherwise.
fn row_struct(topic: &str, key: i64, row: Row, aggregatetype: Option<&str>) -> Struct {
    let schema = format!("{topic}.Value");
    match aggregatetype {
        Some(aggregatetype) => Struct::new(Some(&schema))
            .with("id", Value::Text(event_uuid(key)))
            .with("aggregatetype", Value::Text(aggregatetype.to_owned()))
            .with("aggregateid", Value::Text(row.aggregate_id.to_string()))
            .with("type", Value::Text(row.event_type()))
            .with("payload", Value::Text(row.payload_json())),
        None => Struct::new(Some(&schema))
            .with("id", Value::Int(key))
            .with("version", Value::Int(i64::from(row.version)))
            .with("status", Value::Text(row.status.name().into()))
            .with("amount_cents", Value::Int(i64::from(row.amount_cents))),
    }
}

/// A key as the JSON converter writes it without schemas (what the default partitioner hashes).
fn json_key(key: &Value) -> String {
    match key {
        Value::Null => "null".into(),
        Value::Bool(flag) => flag.to_string(),
        Value::Int(number) => number.to_string(),
        Value::Text(text) => format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\"")),
        Value::Bytes(bytes) => format!("\"{}\"", bytes.len()),
        Value::Struct(value) => {
            let fields: Vec<String> =
                value.fields.iter().map(|(name, field)| format!("\"{name}\":{}", json_key(field))).collect();
            format!("{{{}}}", fields.join(","))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::{ChangeEvent, Origin, SnapshotMarker, SourceInfo};
    use crate::core::lsn::Lsn;

    const CLAIMS: TableId = TableId(0);
    const OUTBOX: TableId = TableId(1);

    fn context() -> ChainContext {
        ChainContext {
            topic_prefix: "claims".into(),
            tables: vec![("public.claims".into(), None), ("public.outbox".into(), Some("claim".into()))],
            ..ChainContext::default()
        }
    }

    fn chain(properties: &[(&str, &str)]) -> Result<TransformChain, ChainError> {
        let properties = properties.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect();
        TransformChain::configure(&properties, context())
    }

    const ROUTER: [(&str, &str); 2] = [("transforms", "outbox"), ("transforms.outbox.type", EVENT_ROUTER)];

    fn record(table: TableId, key: i64, op: Op, row: Option<Row>) -> SourceRecord {
        let (before, after) = if op == Op::Delete { (row, None) } else { (None, row) };
        let source = SourceInfo {
            connector: Origin::Postgresql,
            table,
            lsn: Lsn(0x100),
            tx_id: Some(740),
            snapshot: SnapshotMarker::Streamed,
            ts_ms: 10,
        };
        SourceRecord {
            topic: Topic::Change(table),
            key,
            value: Some(ChangeEvent { op, before, after, source }),
            offset: Default::default(),
            placement: None,
        }
    }

    #[test]
    fn an_outbox_insert_is_routed_by_aggregatetype_and_keyed_by_aggregateid() {
        let chain = chain(&ROUTER).unwrap();
        assert_eq!(chain.routed_topics, vec!["outbox.event.claim".to_string()]);
        let fate = chain.apply(&record(OUTBOX, 7, Op::Create, Some(Row::event(3, Status::Approved)))).unwrap();
        // The key is `aggregateid`, a text column: the JSON converter writes "3".
        let hash = (murmur2(b"\"3\"") & 0x7fff_ffff) as u32;
        assert_eq!(fate, Fate::Send { topic: "outbox.event.claim".into(), placement: Some(Placement::KeyHash(hash)) });
        assert_eq!(chain.topic("outbox.event.claim"), Some(Topic::Routed(0)));
        assert!(chain.routes(OUTBOX));
        assert!(!chain.routes(CLAIMS), "a claims row has no payload column: it fails, it is not routed");
    }

    #[test]
    fn deletes_are_dropped_and_a_snapshot_read_is_routed_like_an_insert() {
        let chain = chain(&ROUTER).unwrap();
        let delete = chain.apply(&record(OUTBOX, 7, Op::Delete, Some(Row::event(3, Status::Approved)))).unwrap();
        assert!(matches!(delete, Fate::Dropped(why) if why.starts_with("Delete message")));
        let read = chain.apply(&record(OUTBOX, 7, Op::Read, Some(Row::event(3, Status::Approved)))).unwrap();
        assert!(matches!(read, Fate::Send { topic, .. } if topic == "outbox.event.claim"));
    }

    #[test]
    fn without_a_predicate_another_captured_table_fails_the_router_and_with_one_it_passes() {
        let claims = record(CLAIMS, 5, Op::Create, Some(Row::new(1, Status::Submitted, 100)));
        let error = chain(&ROUTER).unwrap().apply(&claims).unwrap_err();
        assert!(error.contains("Unable to find payload field payload"), "{error}");
        // An update of another table is not even looked at: `u` is dropped with a warning
        // (`table.op.invalid.behavior = warn`), silently lost to that table's readers.
        let update = record(CLAIMS, 5, Op::Update, Some(Row::new(2, Status::Approved, 100)));
        assert!(
            matches!(chain(&ROUTER).unwrap().apply(&update).unwrap(), Fate::Dropped(why) if why.contains("Unexpected update"))
        );
        let guarded = chain(&[
            ROUTER[0],
            ROUTER[1],
            ("transforms.outbox.predicate", "isOutbox"),
            ("predicates", "isOutbox"),
            ("predicates.isOutbox.type", TOPIC_NAME_MATCHES),
            ("predicates.isOutbox.pattern", "claims\\.public\\.outbox"),
        ])
        .unwrap();
        assert_eq!(
            guarded.apply(&claims).unwrap(),
            Fate::Send { topic: "claims.public.claims".into(), placement: None }
        );
        assert_eq!(
            guarded.apply(&update).unwrap(),
            Fate::Send { topic: "claims.public.claims".into(), placement: None }
        );
        assert!(guarded.routes(OUTBOX));
        // Negated, the stage applies to every topic but the outbox's.
        let negated = chain(&[
            ROUTER[0],
            ROUTER[1],
            ("transforms.outbox.predicate", "isOutbox"),
            ("transforms.outbox.negate", "true"),
            ("predicates", "isOutbox"),
            ("predicates.isOutbox.type", TOPIC_NAME_MATCHES),
            ("predicates.isOutbox.pattern", "claims\\.public\\.outbox"),
        ])
        .unwrap();
        assert!(!negated.routes(OUTBOX));
    }

    #[test]
    fn heartbeats_and_tombstones_are_as_the_router_treats_them() {
        let chain = chain(&ROUTER).unwrap();
        let heartbeat =
            SourceRecord { topic: Topic::Heartbeat, key: 0, value: None, offset: Default::default(), placement: None };
        assert_eq!(
            chain.apply(&heartbeat).unwrap(),
            Fate::Send { topic: "__debezium-heartbeat.claims".into(), placement: None }
        );
        let tombstone = SourceRecord { value: None, ..record(OUTBOX, 7, Op::Delete, None) };
        assert!(matches!(chain.apply(&tombstone).unwrap(), Fate::Dropped(why) if why.starts_with("Tombstone")));
    }

    #[test]
    fn a_chain_that_connect_would_refuse_is_refused_naming_the_property() {
        let refused = |properties: &[(&str, &str)]| chain(properties).unwrap_err();
        assert_eq!(refused(&[("transforms", "outbox")]).property, "transforms.outbox.type");
        assert_eq!(refused(&[("transforms.router.type", EVENT_ROUTER)]).property, "transforms.router.type");
        let unknown =
            refused(&[("transforms", "x"), ("transforms.x.type", "org.apache.kafka.connect.transforms.Filter")]);
        assert!(unknown.problem.contains("not a transform the model runs"), "{}", unknown.problem);
        let decode = refused(&[("transforms", "d"), ("transforms.d.type", DECODE_MESSAGE), ("transforms.d.x", "1")]);
        assert_eq!(decode.property, "transforms.d.type");
        assert!(decode.problem.contains("`x` is not an option of DecodeLogicalDecodingMessageContent"));
        let option = refused(&[ROUTER[0], ROUTER[1], ("transforms.outbox.route.by.feild", "type")]);
        assert!(option.problem.contains("route.by.feild"), "{}", option.problem);
        let negate = refused(&[ROUTER[0], ROUTER[1], ("transforms.outbox.negate", "true")]);
        assert_eq!(negate.property, "transforms.outbox.negate");
        let predicate = refused(&[ROUTER[0], ROUTER[1], ("transforms.outbox.predicate", "isOutbox")]);
        assert_eq!(predicate.property, "transforms.outbox.predicate");
    }

    #[test]
    fn routing_by_event_type_gives_a_topic_per_type() {
        let chain = chain(&[ROUTER[0], ROUTER[1], ("transforms.outbox.route.by.field", "type")]).unwrap();
        assert_eq!(chain.routed_topics.len(), 5);
        assert!(chain.routed_topics.contains(&"outbox.event.ClaimApproved".to_string()));
    }

    // ----- logical decoding messages: the table-free outbox (reference §7.2) -----

    const DECODE: [(&str, &str); 2] = [("transforms.decode.type", DECODE_MESSAGE), ("transforms", "decode,outbox")];

    fn message_context() -> ChainContext {
        ChainContext {
            message_outboxes: vec![("outbox".into(), "claim".into())],
            plain_messages: vec![PlainMessage { prefix: "heartbeat".into(), payload_bytes: 29, now: true }],
            ..context()
        }
    }

    fn message_chain(properties: &[(&str, &str)]) -> TransformChain {
        let properties = properties.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect();
        TransformChain::configure(&properties, message_context()).expect("configures")
    }

    /// The record Debezium's streaming makes of a message carrying event `id` of claim 7.
    fn event_message(id: i64) -> SourceRecord {
        let event = MessageEvent { outbox: 0, id, aggregate_id: 7, event_type: Status::Approved };
        let mut record = message_chain(&[]).probe_message(0, Status::Approved);
        record.key = event.id;
        record.value.as_mut().expect("a value").after = Some(event.row());
        record
    }

    #[test]
    fn a_message_record_is_built_as_debezium_builds_it_with_its_content_the_events_json() {
        let record = message_chain(&[]).connect_record(&event_message(5));
        assert_eq!(record.topic, "claims.message");
        let Value::Struct(key) = &record.key else { panic!("a key struct") };
        assert_eq!(key.field("prefix"), Some(&Value::Text("outbox".into())), "keyed by its prefix");
        let Value::Struct(value) = &record.value else { panic!("a value struct") };
        assert_eq!(value.schema_name.as_deref(), Some(MESSAGE_VALUE_SCHEMA));
        assert_eq!(value.field("op"), Some(&Value::Text("m".into())));
        let Some(Value::Struct(message)) = value.field("message") else { panic!("the message block") };
        assert_eq!(message.field("prefix"), Some(&Value::Text("outbox".into())));
        let Some(Value::Bytes(content)) = message.field("content") else { panic!("content bytes") };
        let json: serde_json::Value = serde_json::from_slice(content).expect("JSON");
        assert_eq!(json["id"], event_uuid(5));
        assert_eq!(json["aggregateid"], "7");
        assert_eq!(json["type"], "ClaimApproved");
        assert_eq!(json["payload"]["status"], "approved");
    }

    /// Decode before the router: the record becomes an insert the router routes by the decoded
    /// `aggregatetype`, keyed by the decoded `aggregateid`: the same topic and partition as the
    /// table outbox's row of the same event.
    #[test]
    fn decoded_before_the_router_a_message_is_routed_as_an_outbox_row_is() {
        let chain = message_chain(&[DECODE[0], DECODE[1], ROUTER[1]]);
        assert_eq!(chain.routed_topics, vec!["outbox.event.claim".to_string()], "its events' topic is known");
        assert_eq!(chain.message_routing(0), Ok(()));
        assert!(chain.routes(TableId::message_outbox(0)));
        let fate = chain.apply(&event_message(5)).expect("routed");
        let row = chain.apply(&record(OUTBOX, 5, Op::Create, Some(Row::event(7, Status::Approved)))).expect("routed");
        assert_eq!(fate, row);
        let hash = (murmur2(b"\"7\"") & 0x7fff_ffff) as u32;
        assert_eq!(fate, Fate::Send { topic: "outbox.event.claim".into(), placement: Some(Placement::KeyHash(hash)) });
    }

    /// Without decode (or with it after the router) the router sees the message's own record:
    /// no change envelope, so it passes it on unchanged; the record stays on the message topic,
    /// where its prefix places it, and the chain routes none of the outbox's events.
    #[test]
    fn without_decode_before_it_the_router_passes_a_message_on_unchanged() {
        for order in ["outbox", "outbox,decode"] {
            let mut properties = vec![("transforms", order), ROUTER[1]];
            if order.contains("decode") {
                properties.push(DECODE[0]);
            }
            let chain = message_chain(&properties);
            let record = event_message(5);
            assert_eq!(
                chain.apply(&record),
                Ok(Fate::Send {
                    topic: "claims.message".into(),
                    placement: if order == "outbox" { record.placement } else { Some(Placement::Partition(0)) },
                }),
                "{order}: decode after the router clears the key (the sticky partitioner's partition)"
            );
            assert!(!chain.routes(TableId::message_outbox(0)), "{order}");
            assert!(chain.routes(OUTBOX), "{order}: the outbox table's rows are envelopes, routed");
            let why = chain.message_routing(0).expect_err("not routed");
            assert!(why.contains("no change") && why.contains("EventRouterDelegate.apply"), "{why}");
        }
        let why = message_chain(&[("transforms", "decode"), DECODE[0]]).message_routing(0).expect_err("not routed");
        assert!(why.contains("(`decode`) leave the message's record on claims.message"), "{why}");
        assert!(message_chain(&[]).message_routing(0).expect_err("no chain").contains("no transform"));
    }

    /// Decode without a predicate meets every record: a change passes, but a message that is
    /// no JSON (a heartbeat's `now()::varchar`) and a tombstone fail the task, as upstream.
    #[test]
    fn decode_fails_on_a_plain_message_and_on_a_tombstone() {
        let chain = message_chain(&[("transforms", "decode"), DECODE[0]]);
        let change = record(CLAIMS, 5, Op::Update, Some(Row::new(2, Status::Approved, 100)));
        assert_eq!(chain.apply(&change), Ok(Fate::Send { topic: "claims.public.claims".into(), placement: None }));
        let mut heartbeat = event_message(5);
        heartbeat.key = message_key("heartbeat");
        heartbeat.placement = None;
        let value = heartbeat.value.as_mut().expect("a value");
        value.after = None;
        value.source.table = TableId::default();
        value.source.ts_ms = 61_200;
        let error = chain.apply(&heartbeat).expect_err("no JSON");
        assert!(error.starts_with(&format!("transform `decode` ({DECODE_MESSAGE})")), "{error}");
        assert!(error.contains("JSON string '2000-01-01 00:01:01.200000+00'"), "{error}");
        let tombstone = SourceRecord { value: None, ..record(CLAIMS, 5, Op::Delete, None) };
        assert!(chain.apply(&tombstone).expect_err("no value schema").contains("NullPointerException"));
    }

    #[test]
    fn now_is_written_as_postgresql_writes_a_timestamp_from_its_epoch() {
        assert_eq!(now_text(0), "2000-01-01 00:00:00.000000+00");
        assert_eq!(now_text(86_400_000 * 59 + 3_723_004), "2000-02-29 01:02:03.004000+00", "2000 is a leap year");
        assert_eq!(now_text(86_400_000 * 366), "2001-01-01 00:00:00.000000+00");
    }
}
