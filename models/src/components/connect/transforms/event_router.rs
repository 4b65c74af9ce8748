//! Debezium's outbox `EventRouter` (`io.debezium.transforms.outbox.EventRouter`, its logic in
//! `EventRouterDelegate.apply`, its options in `EventRouterConfigDefinition`), followed by Kafka
//! Connect's `RegexRouter` on the routed topic, as the delegate chains them.
//!
//! Per record, in the delegate's order (reference debezium-postgres.md §7.1):
//! 1. a tombstone (no value) is dropped;
//! 2. a record that is not a Debezium change envelope (its value schema's name does not end in
//!    `.Envelope`: a heartbeat, a transaction-metadata or schema-change record, a logical decoding
//!    message) passes **unchanged**;
//! 3. `op=d` is dropped;
//! 4. `op=u` goes by `table.op.invalid.behavior`: `warn` (the default) and `error` log and drop it,
//!    `fatal` throws;
//! 5. anything else — `c`, and `r`, so a snapshot of the outbox table republishes every row still
//!    in it — is routed: the payload column must exist ("Unable to find payload field …"), the
//!    timestamp is the column `table.field.event.timestamp` names or else the envelope's `ts_ms`,
//!    the event-id column must exist and becomes the header `id`, the additional fields go to the
//!    value, a header or the partition, the value is the payload (wrapped in a struct with
//!    `payload` when an additional field is placed in the envelope; a tombstone for an empty
//!    payload with `route.tombstone.on.empty.payload`), the key is the `table.field.event.key`
//!    column, and the topic is the `route.by.field` column's value rewritten by `RegexRouter`
//!    (`route.topic.regex` must match the whole value; the replacement's `${routedByValue}` is the
//!    default regex's group). A change record of any *other* captured table is an envelope too,
//!    and fails at the payload check: hence the predicate a real configuration puts on the SMT.
//!
//! `table.expand.json.payload = true` is accepted and not modelled: it changes the value's shape,
//! not what is routed where (the report lists it). Options the model refuses rather than
//! ignores: additional-field entries with spaces around them (upstream splits
//! the list on `,` and `:` without trimming, so a space becomes part of the column name).
//! `table.field.event.type` and `table.field.event.schema.version` are read and have no effect on
//! a record's content here, as upstream reads `type` only through additional fields and the schema
//! version only into the value schema's version.

use super::{ConnectRecord, Struct, Transformed, Value};
use std::collections::BTreeMap;

/// `table.op.invalid.behavior`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvalidOperationBehavior {
    /// `warn`: log a warning, drop the record.
    Warn,
    /// `error`: log an error, drop the record.
    Error,
    /// `fatal`: throw (the task fails).
    Fatal,
}

/// Where an additional column goes (`table.fields.additional.placement`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Header,
    Envelope,
    Partition,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdditionalField {
    pub placement: Placement,
    pub field: String,
    pub alias: String,
}

/// The transform, configured.
#[derive(Clone, Debug)]
pub struct EventRouter {
    pub field_event_id: String,
    pub field_event_key: String,
    pub field_event_type: String,
    pub field_event_timestamp: Option<String>,
    pub field_payload: String,
    pub field_schema_version: Option<String>,
    pub additional_fields: Vec<AdditionalField>,
    pub additional_error_on_missing: bool,
    pub route_by_field: String,
    pub route_tombstone_on_empty_payload: bool,
    pub invalid_operation: InvalidOperationBehavior,
    router: RegexRouter,
}

/// The options `EventRouterConfigDefinition` defines, with their defaults.
pub const OPTIONS: [(&str, Option<&str>); 15] = [
    ("table.field.event.id", Some("id")),
    ("table.field.event.key", Some("aggregateid")),
    ("table.field.event.type", Some("type")),
    ("table.field.event.payload", Some("payload")),
    ("table.field.event.timestamp", None),
    ("table.fields.additional.placement", None),
    ("table.fields.additional.error.on.missing", Some("true")),
    ("table.field.event.schema.version", None),
    ("route.by.field", Some("aggregatetype")),
    ("route.topic.regex", Some("(?<routedByValue>.*)")),
    ("route.topic.replacement", Some("outbox.event.${routedByValue}")),
    ("route.tombstone.on.empty.payload", Some("false")),
    ("table.op.invalid.behavior", Some("warn")),
    ("table.expand.json.payload", Some("false")),
    ("table.json.payload.null.behavior", Some("ignore")),
];

impl EventRouter {
    /// The transform with its defaults.
    pub fn with_defaults() -> EventRouter {
        EventRouter::configure(&BTreeMap::new()).expect("the defaults are valid")
    }

    /// Configures the transform from its options (the connector's `transforms.<alias>.<option>`
    /// properties, without the prefix, and without Connect's own `type`, `predicate` and
    /// `negate`). An option it does not define, or a value it would reject, is an error naming it.
    pub fn configure(options: &BTreeMap<String, String>) -> Result<EventRouter, String> {
        for name in options.keys() {
            if !OPTIONS.iter().any(|(option, _)| option == name) {
                let known: Vec<&str> = OPTIONS.iter().map(|(option, _)| *option).collect();
                return Err(format!("`{name}` is not an option of EventRouter; it has {}", known.join(", ")));
            }
        }
        let get = |name: &str| -> Option<String> {
            options.get(name).cloned().or_else(|| {
                OPTIONS.iter().find(|(option, _)| *option == name).and_then(|(_, default)| default.map(str::to_owned))
            })
        };
        let text = |name: &str| get(name).expect("an option with a default");
        let boolean = |name: &str| -> Result<bool, String> {
            let value = text(name);
            match value.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(format!("`{name}` = `{value}`: give true or false")),
            }
        };
        let invalid_operation = {
            let value = text("table.op.invalid.behavior");
            match value.trim().to_ascii_lowercase().as_str() {
                "warn" => InvalidOperationBehavior::Warn,
                "error" => InvalidOperationBehavior::Error,
                "fatal" => InvalidOperationBehavior::Fatal,
                _ => return Err(format!("`table.op.invalid.behavior` = `{value}`: give warn, error or fatal")),
            }
        };
        let null_behavior = text("table.json.payload.null.behavior");
        if !matches!(null_behavior.trim().to_ascii_lowercase().as_str(), "ignore" | "optional_bytes") {
            return Err(format!(
                "`table.json.payload.null.behavior` = `{null_behavior}`: give ignore or optional_bytes"
            ));
        }
        // Expanding the JSON payload into a struct changes the value's shape only (its schema and
        // how a converter writes it), not its key, topic, headers or whether it is sent: the
        // model keeps the payload as the row holds it, and the scenario lists the option as not
        // modelled.
        boolean("table.expand.json.payload")?;
        let additional_fields = match get("table.fields.additional.placement") {
            None => Vec::new(),
            Some(list) => list.split(',').map(additional_field).collect::<Result<_, _>>()?,
        };
        let router = RegexRouter::new(&text("route.topic.regex"), &text("route.topic.replacement"))?;
        Ok(EventRouter {
            field_event_id: text("table.field.event.id"),
            field_event_key: text("table.field.event.key"),
            field_event_type: text("table.field.event.type"),
            field_event_timestamp: get("table.field.event.timestamp"),
            field_payload: text("table.field.event.payload"),
            field_schema_version: get("table.field.event.schema.version"),
            additional_error_on_missing: boolean("table.fields.additional.error.on.missing")?,
            additional_fields,
            route_by_field: text("route.by.field"),
            route_tombstone_on_empty_payload: boolean("route.tombstone.on.empty.payload")?,
            invalid_operation,
            router,
        })
    }

    /// Whether the value only carries the payload (no additional field is placed in the
    /// envelope), as upstream decides it once at configuration.
    pub fn only_payload_in_value(&self) -> bool {
        self.additional_fields.iter().all(|field| field.placement != Placement::Envelope)
    }

    /// The transform applied to one record: the record routed, passed on, or dropped; an error is
    /// the exception that fails the task.
    pub fn apply(&self, record: &ConnectRecord) -> Result<Transformed, String> {
        // 1. Tombstones are ignored.
        if record.value == Value::Null {
            return Ok(Transformed::Dropped(format!(
                "Tombstone message ignored. Message key: \"{}\"",
                record.key.java_string()
            )));
        }
        // 2. Records that are not a change envelope pass unchanged.
        let envelope = match &record.value {
            Value::Struct(value) if value.schema_name.as_deref().is_some_and(|name| name.ends_with(".Envelope")) => {
                value
            }
            _ => return Ok(Transformed::Record(record.clone())),
        };
        let op = match envelope.field("op") {
            Some(Value::Text(op)) => op.as_str(),
            _ => "",
        };
        // 3. Deletes are skipped.
        if op == "d" {
            return Ok(Transformed::Dropped(format!("Delete message {} ignored", record.key.java_string())));
        }
        // 4. Updates are unexpected.
        if op == "u" {
            let key = record.key.java_string();
            return match self.invalid_operation {
                InvalidOperationBehavior::Warn | InvalidOperationBehavior::Error => {
                    Ok(Transformed::Dropped(format!("Unexpected update message received {key} and ignored")))
                }
                InvalidOperationBehavior::Fatal => {
                    Err(format!("java.lang.IllegalStateException: Unexpected update message received {key}, fail."))
                }
            };
        }
        // 5. The event: the `after` struct.
        let event = match envelope.field("after") {
            Some(Value::Struct(after)) => after,
            other => {
                return Err(format!(
                    "org.apache.kafka.connect.errors.DataException: Only Struct objects supported for [Read Outbox \
                     Event], found: {}",
                    other.map_or("null".into(), Value::java_string)
                ));
            }
        };
        let connect = |message: String| format!("org.apache.kafka.connect.errors.ConnectException: {message}");
        let Some(payload) = event.field(&self.field_payload) else {
            return Err(connect(format!("Unable to find payload field {} in event", self.field_payload)));
        };
        let envelope_ts_ms = match envelope.field("ts_ms") {
            Some(Value::Int(ms)) => Some(*ms),
            _ => None,
        };
        let timestamp_ms = match &self.field_event_timestamp {
            None => envelope_ts_ms,
            Some(column) => match event.field(column) {
                None => return Err(connect(format!("Unable to find timestamp field {column} in event"))),
                // The model's timestamp columns are `Timestamp`s: milliseconds.
                Some(Value::Int(ms)) => Some(*ms),
                Some(_) => envelope_ts_ms,
            },
        };
        let Some(event_id) = event.field(&self.field_event_id) else {
            return Err(connect(format!("Unable to find event-id field {} in event", self.field_event_id)));
        };
        let mut headers = record.headers.clone();
        headers.push(("id".into(), event_id.clone()));
        let mut wrapped = Struct::new(None).with("payload", payload.clone());
        let mut partition = None;
        for additional in &self.additional_fields {
            if !self.additional_error_on_missing && event.field(&additional.field).is_none() {
                continue;
            }
            let value = event.get(&additional.field)?.clone();
            match additional.placement {
                Placement::Envelope => wrapped.put(&additional.alias, value),
                Placement::Header => headers.push((additional.alias.clone(), value)),
                Placement::Partition => match value {
                    Value::Int(number) => partition = Some(number),
                    Value::Null => partition = None,
                    other => {
                        return Err(format!(
                            "org.apache.kafka.connect.errors.DataException: Field '{}' is not of type INT32: {}",
                            additional.field,
                            other.java_string()
                        ));
                    }
                },
            }
        }
        let empty = *payload == Value::Null || payload.java_string().trim().is_empty();
        let value = if empty && self.route_tombstone_on_empty_payload {
            Value::Null
        } else if self.only_payload_in_value() {
            payload.clone()
        } else {
            Value::Struct(wrapped)
        };
        let key = event.get(&self.field_event_key)?.clone();
        let routed_by = match event.get(&self.route_by_field)? {
            Value::Text(text) => text.clone(),
            Value::Null => {
                return Err(format!(
                    "java.lang.NullPointerException: the route.by.field column {} is null, and RegexRouter cannot \
                     match a null topic",
                    self.route_by_field
                ));
            }
            other => {
                return Err(format!(
                    "org.apache.kafka.connect.errors.DataException: Field '{}' is not of type STRING: {}",
                    self.route_by_field,
                    other.java_string()
                ));
            }
        };
        Ok(Transformed::Record(ConnectRecord {
            topic: self.router.route(&routed_by),
            partition,
            key,
            value,
            timestamp_ms,
            headers,
        }))
    }
}

/// One entry of `table.fields.additional.placement`: `column:placement[:alias]`.
fn additional_field(entry: &str) -> Result<AdditionalField, String> {
    let parts: Vec<&str> = entry.split(':').collect();
    let bad = |why: &str| format!("`table.fields.additional.placement` entry `{entry}`: {why}");
    if entry != entry.trim() || parts.iter().any(|part| part.is_empty() || *part != part.trim()) {
        return Err(bad(
            "no spaces and no empty parts: upstream splits the list on `,` and `:` without trimming, so a space \
             would become part of the column name",
        ));
    }
    let placement = match parts.get(1).map(|part| part.to_ascii_lowercase()).as_deref() {
        Some("header") => Placement::Header,
        Some("envelope") => Placement::Envelope,
        Some("partition") => Placement::Partition,
        _ => {
            return Err(bad(
                "give column:placement or column:placement:alias, placement header, envelope or partition",
            ));
        }
    };
    if parts.len() > 3 {
        return Err(bad("give column:placement or column:placement:alias"));
    }
    let field = parts[0].to_owned();
    let alias = parts.get(2).map_or_else(|| field.clone(), |alias| (*alias).to_owned());
    Ok(AdditionalField { placement, field, alias })
}

/// Kafka Connect's `RegexRouter`: when the regex matches the whole topic (`Matcher.matches`),
/// the topic becomes the replacement (`Matcher.replaceFirst`), its group references expanded;
/// otherwise the topic is left as it is.
#[derive(Clone, Debug)]
struct RegexRouter {
    regex: regex::Regex,
    /// The replacement in the `regex` crate's syntax.
    replacement: String,
}

impl RegexRouter {
    fn new(regex_text: &str, replacement: &str) -> Result<RegexRouter, String> {
        // `matches()` needs the whole input: anchor it.
        let regex = regex::Regex::new(&format!("^(?:{regex_text})$")).map_err(|error| {
            format!(
                "`route.topic.regex` = `{regex_text}`: not a regular expression the model can run ({}); Java's \
                 lookaround and back-references are not supported",
                error.to_string().lines().last().unwrap_or_default().trim()
            )
        })?;
        Ok(RegexRouter { replacement: java_replacement(replacement, &regex)?, regex })
    }

    fn route(&self, topic: &str) -> String {
        match self.regex.captures(topic) {
            Some(captures) => {
                let mut routed = String::new();
                captures.expand(&self.replacement, &mut routed);
                routed
            }
            None => topic.to_owned(),
        }
    }
}

/// A `java.util.regex` replacement (`$1`, `${name}`, `\` escaping the next character) in the
/// `regex` crate's syntax (`${1}`, `${name}`, `$$`); what Java would refuse is refused.
fn java_replacement(replacement: &str, regex: &regex::Regex) -> Result<String, String> {
    let bad = |why: String| format!("`route.topic.replacement` = `{replacement}`: {why}");
    let mut out = String::new();
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => return Err(bad("character to be escaped is missing".into())),
            },
            '$' => match chars.peek() {
                Some('{') => {
                    chars.next();
                    let name: String = chars.by_ref().take_while(|c| *c != '}').collect();
                    if !regex.capture_names().flatten().any(|group| group == name) {
                        return Err(bad(format!("no group with name {{{name}}} in route.topic.regex")));
                    }
                    out.push_str(&format!("${{{name}}}"));
                }
                Some(digit) if digit.is_ascii_digit() => {
                    let number: String = std::iter::from_fn(|| chars.next_if(char::is_ascii_digit)).collect();
                    // The anchoring wrapper adds no group: numbers are the user's.
                    if number.parse::<usize>().map_or(true, |group| group >= regex.captures_len()) {
                        return Err(bad(format!("no group {number} in route.topic.regex")));
                    }
                    out.push_str(&format!("${{{number}}}"));
                }
                _ => {
                    return Err(
                        bad("Illegal group reference: `$` must be followed by a group number or {name}".into()),
                    );
                }
            },
            other => out.push(other),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(key, value)| ((*key).to_owned(), (*value).to_owned())).collect()
    }

    /// An outbox row as Debezium's change event carries it in `after`.
    fn outbox_row(aggregatetype: &str, payload: Value) -> Struct {
        Struct::new(Some("claims.public.outbox_event.Value"))
            .with("id", Value::Text("8b1e0f2a-0000-4000-8000-000000000007".into()))
            .with("aggregatetype", Value::Text(aggregatetype.into()))
            .with("aggregateid", Value::Text("42".into()))
            .with("type", Value::Text("ClaimApproved".into()))
            .with("payload", payload)
    }

    fn change(op: &str, after: Option<Struct>) -> ConnectRecord {
        let envelope = Struct::new(Some("claims.public.outbox_event.Envelope"))
            .with("before", Value::Null)
            .with("after", after.map_or(Value::Null, Value::Struct))
            .with("op", Value::Text(op.into()))
            .with("ts_ms", Value::Int(1_700_000_000_000));
        ConnectRecord {
            topic: "claims.public.outbox_event".into(),
            partition: None,
            key: Value::Text("Struct{id=8b1e0f2a-0000-4000-8000-000000000007}".into()),
            value: Value::Struct(envelope),
            timestamp_ms: None,
            headers: Vec::new(),
        }
    }

    fn routed(router: &EventRouter, record: &ConnectRecord) -> ConnectRecord {
        match router.apply(record) {
            Ok(Transformed::Record(record)) => record,
            other => panic!("expected a routed record, got {other:?}"),
        }
    }

    fn dropped(router: &EventRouter, record: &ConnectRecord) -> String {
        match router.apply(record) {
            Ok(Transformed::Dropped(why)) => why,
            other => panic!("expected the record dropped, got {other:?}"),
        }
    }

    #[test]
    fn an_insert_is_routed_by_its_aggregate_type_with_the_defaults() {
        let router = EventRouter::with_defaults();
        let record =
            routed(&router, &change("c", Some(outbox_row("claim", Value::Text("{\"status\":\"approved\"}".into())))));
        assert_eq!(record.topic, "outbox.event.claim");
        assert_eq!(record.key, Value::Text("42".into()), "the key is aggregateid");
        assert_eq!(record.headers, vec![("id".into(), Value::Text("8b1e0f2a-0000-4000-8000-000000000007".into()))]);
        assert_eq!(
            record.value,
            Value::Text("{\"status\":\"approved\"}".into()),
            "no envelope field: the payload alone"
        );
        assert_eq!(record.timestamp_ms, Some(1_700_000_000_000), "the envelope's ts_ms");
        assert_eq!(record.partition, None);
    }

    /// The configuration of the outbox drill: topic `<prefix>.<aggregatetype>.events`, the event
    /// type as the header `eventType`.
    #[test]
    fn the_drills_configuration_names_the_topic_and_adds_the_event_type_header() {
        let router = EventRouter::configure(&options(&[
            ("route.topic.replacement", "claims.${routedByValue}.events"),
            ("table.fields.additional.placement", "type:header:eventType"),
        ]))
        .expect("valid");
        let record = routed(&router, &change("c", Some(outbox_row("claim", Value::Text("{}".into())))));
        assert_eq!(record.topic, "claims.claim.events");
        assert_eq!(record.headers[1], ("eventType".into(), Value::Text("ClaimApproved".into())));
        // A snapshot read of the table is routed too: a re-snapshot republishes every row still there.
        assert_eq!(
            routed(&router, &change("r", Some(outbox_row("claim", Value::Text("{}".into()))))).topic,
            "claims.claim.events"
        );
    }

    #[test]
    fn the_checks_come_in_the_delegates_order() {
        let router = EventRouter::with_defaults();
        // 1. A tombstone is dropped.
        let mut tombstone = change("c", None);
        tombstone.value = Value::Null;
        assert!(dropped(&router, &tombstone).starts_with("Tombstone message ignored"));
        // 2. A record that is no change envelope passes unchanged: a heartbeat, a message.
        let heartbeat = ConnectRecord {
            topic: "__debezium-heartbeat.claims".into(),
            value: Value::Struct(
                Struct::new(Some("io.debezium.connector.common.Heartbeat")).with("ts_ms", Value::Int(1)),
            ),
            ..change("c", None)
        };
        assert_eq!(router.apply(&heartbeat), Ok(Transformed::Record(heartbeat.clone())));
        // 3. A delete is dropped, whatever its row.
        assert!(dropped(&router, &change("d", None)).starts_with("Delete message"));
        // 4. An update is dropped by default, and fails the task with `fatal`.
        let update = change("u", Some(outbox_row("claim", Value::Text("{}".into()))));
        assert!(dropped(&router, &update).starts_with("Unexpected update message received"));
        let error = EventRouter::configure(&options(&[("table.op.invalid.behavior", "error")])).expect("valid");
        assert!(dropped(&error, &update).ends_with("and ignored"));
        let fatal = EventRouter::configure(&options(&[("table.op.invalid.behavior", "FATAL")])).expect("valid");
        let failure = fatal.apply(&update).expect_err("fatal throws");
        assert!(
            failure.starts_with("java.lang.IllegalStateException: Unexpected update message received"),
            "{failure}"
        );
    }

    /// A change of another captured table is an envelope too: without a predicate it fails the
    /// task at the payload check.
    #[test]
    fn another_tables_change_fails_without_a_predicate() {
        let claim = Struct::new(Some("claims.public.claims.Value"))
            .with("id", Value::Int(42))
            .with("status", Value::Text("approved".into()));
        let failure = EventRouter::with_defaults().apply(&change("c", Some(claim))).expect_err("no payload column");
        assert_eq!(
            failure,
            "org.apache.kafka.connect.errors.ConnectException: Unable to find payload field payload in event"
        );
    }

    #[test]
    fn the_value_and_partition_follow_the_additional_fields() {
        let router = EventRouter::configure(&options(&[(
            "table.fields.additional.placement",
            "type:envelope:eventType,aggregateid:partition",
        )]));
        // aggregateid is text here: a partition needs an INT32.
        let failure = router.expect("valid").apply(&change("c", Some(outbox_row("claim", Value::Text("{}".into())))));
        assert!(failure.expect_err("text partition").contains("is not of type INT32"));
        let router =
            EventRouter::configure(&options(&[("table.fields.additional.placement", "type:envelope:eventType")]))
                .expect("valid");
        assert!(!router.only_payload_in_value());
        let record = routed(&router, &change("c", Some(outbox_row("claim", Value::Text("{}".into())))));
        assert_eq!(
            record.value,
            Value::Struct(
                Struct::new(None)
                    .with("payload", Value::Text("{}".into()))
                    .with("eventType", Value::Text("ClaimApproved".into()))
            )
        );
        // A missing column fails by default and is skipped when told.
        let missing =
            EventRouter::configure(&options(&[("table.fields.additional.placement", "tenant:header")])).expect("valid");
        let failure =
            missing.apply(&change("c", Some(outbox_row("claim", Value::Text("{}".into()))))).expect_err("missing");
        assert!(failure.ends_with("tenant is not a valid field name"), "{failure}");
        let lenient = EventRouter::configure(&options(&[
            ("table.fields.additional.placement", "tenant:header"),
            ("table.fields.additional.error.on.missing", "false"),
        ]))
        .expect("valid");
        assert_eq!(
            routed(&lenient, &change("c", Some(outbox_row("claim", Value::Text("{}".into()))))).headers.len(),
            1
        );
    }

    #[test]
    fn an_empty_payload_is_a_tombstone_only_when_asked() {
        let empty = change("c", Some(outbox_row("claim", Value::Null)));
        assert_eq!(routed(&EventRouter::with_defaults(), &empty).value, Value::Null, "the null payload itself");
        let blank = change("c", Some(outbox_row("claim", Value::Text("  ".into()))));
        assert_eq!(routed(&EventRouter::with_defaults(), &blank).value, Value::Text("  ".into()));
        let tombstones =
            EventRouter::configure(&options(&[("route.tombstone.on.empty.payload", "true")])).expect("valid");
        let record = routed(&tombstones, &blank);
        assert_eq!((record.value, record.key), (Value::Null, Value::Text("42".into())));
    }

    #[test]
    fn the_topic_is_rewritten_only_where_the_regex_matches_it_whole() {
        let router = EventRouter::configure(&options(&[
            ("route.topic.regex", "(claim|policy)"),
            ("route.topic.replacement", "events.$1"),
        ]))
        .expect("valid");
        assert_eq!(routed(&router, &change("c", Some(outbox_row("claim", Value::Null)))).topic, "events.claim");
        assert_eq!(
            routed(&router, &change("c", Some(outbox_row("claims", Value::Null)))).topic,
            "claims",
            "no whole match"
        );
        let escaped =
            EventRouter::configure(&options(&[("route.topic.replacement", "\\$${routedByValue}")])).expect("valid");
        assert_eq!(routed(&escaped, &change("c", Some(outbox_row("claim", Value::Null)))).topic, "$claim");
    }

    #[test]
    fn bad_options_are_named() {
        let fails = |pairs: &[(&str, &str)], phrase: &str| {
            let error = EventRouter::configure(&options(pairs)).expect_err("refused");
            assert!(error.contains(phrase), "{error}");
        };
        fails(&[("route.topic", "x")], "`route.topic` is not an option of EventRouter");
        fails(&[("table.op.invalid.behavior", "ignore")], "give warn, error or fatal");
        fails(&[("route.tombstone.on.empty.payload", "yes")], "give true or false");
        fails(&[("table.expand.json.payload", "yes")], "give true or false");
        assert!(EventRouter::configure(&options(&[("table.expand.json.payload", "true")])).is_ok());
        fails(&[("table.fields.additional.placement", "type:headers")], "placement header, envelope or partition");
        fails(&[("table.fields.additional.placement", "id:header, type:header")], "no spaces");
        fails(&[("route.topic.regex", "(?<=x)y")], "not a regular expression the model can run");
        fails(&[("route.topic.replacement", "outbox.${aggregate}")], "no group with name {aggregate}");
        fails(&[("route.topic.replacement", "outbox.$x")], "Illegal group reference");
        fails(&[("route.topic.replacement", "outbox.$2")], "no group 2");
        fails(&[("table.json.payload.null.behavior", "keep")], "give ignore or optional_bytes");
    }
}
