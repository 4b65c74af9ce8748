//! Single message transforms (SMTs): what Kafka Connect applies to each record a source task
//! returns, in the order of the connector's `transforms` list, before the record is converted and
//! produced (`TransformationChain.apply`, Kafka Connect). A transform returns the record, another
//! record, or nothing (the record is dropped); an exception fails the task, as any error in the
//! chain does under `errors.tolerance=none`.
//!
//! Records here are Kafka Connect's data as a transform sees it ([`ConnectRecord`], [`Value`],
//! [`Struct`]): a transform reads fields by the names its configuration gives, so the records a
//! connector builds are handed over in that shape.
//!
//! The worker runs a connector's [`chain::TransformChain`] on every record `poll()` returns: the
//! outbox's [`event_router::EventRouter`] and
//! [`decode_message::DecodeLogicalDecodingMessageContent`], which makes a logical decoding
//! message's record (a message outbox's event) one the router routes.

pub mod chain;
pub mod decode_message;
pub mod event_router;

/// A value of Kafka Connect's data API, as far as the model's records carry one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Text(String),
    Bytes(Vec<u8>),
    Struct(Struct),
}

impl Value {
    /// The value as Java's `toString()` writes it (what a check like "an empty payload" reads).
    pub fn java_string(&self) -> String {
        match self {
            Value::Null => "null".into(),
            Value::Bool(flag) => flag.to_string(),
            Value::Int(number) => number.to_string(),
            Value::Text(text) => text.clone(),
            Value::Bytes(bytes) => format!("[B@{:x}", bytes.len()),
            Value::Struct(value) => {
                let fields: Vec<String> =
                    value.fields.iter().map(|(name, field)| format!("{name}={}", field.java_string())).collect();
                format!("Struct{{{}}}", fields.join(","))
            }
        }
    }
}

/// A `Struct`: named fields in its schema's order; the schema's name, where it has one
/// (`….Envelope` for a Debezium change event).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Struct {
    pub schema_name: Option<String>,
    pub fields: Vec<(String, Value)>,
}

impl Struct {
    pub fn new(schema_name: Option<&str>) -> Struct {
        Struct { schema_name: schema_name.map(str::to_owned), fields: Vec::new() }
    }

    /// Adds a field (the builder style Connect's `put` has).
    pub fn with(mut self, name: &str, value: Value) -> Struct {
        self.put(name, value);
        self
    }

    pub fn put(&mut self, name: &str, value: Value) {
        match self.fields.iter_mut().find(|(field, _)| field == name) {
            Some((_, slot)) => *slot = value,
            None => self.fields.push((name.to_owned(), value)),
        }
    }

    /// The field's value; `None` when the schema has no such field (`Schema.field` is null).
    pub fn field(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(field, _)| field == name).map(|(_, value)| value)
    }

    /// `Struct.get(name)`: a field the schema lacks is a `DataException`.
    pub fn get(&self, name: &str) -> Result<&Value, String> {
        self.field(name)
            .ok_or_else(|| format!("org.apache.kafka.connect.errors.DataException: {name} is not a valid field name"))
    }
}

/// A record between the task and the producer (`SourceRecord`, a `ConnectRecord`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectRecord {
    pub topic: String,
    /// `None`: the producer's partitioner decides (from the key).
    pub partition: Option<i64>,
    pub key: Value,
    /// `Value::Null` is a tombstone.
    pub value: Value,
    pub timestamp_ms: Option<i64>,
    /// Headers in the order they were added (Connect's `Headers` keeps duplicates in order).
    pub headers: Vec<(String, Value)>,
}

/// What a transform made of a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transformed {
    /// The record goes on (changed or not).
    Record(ConnectRecord),
    /// The record is dropped, and why (what the transform logs, if it logs it).
    Dropped(String),
}
