//! Debezium's `DecodeLogicalDecodingMessageContent`
//! (`io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent`,
//! reference debezium-postgres.md §7.2): it turns the record of a logical decoding message
//! (`pg_logical_emit_message`, `op=m`) into one the outbox `EventRouter` can route.
//!
//! Per record, as `apply` does it:
//! - a record whose value schema is not the message schema passes unchanged — but a record with
//!   no value schema at all (a tombstone) throws, since upstream reads `valueSchema().name()`
//!   without a null check;
//! - the message's `content` must be bytes holding a JSON object (text starting with `{` or `[`
//!   that Jackson parses; anything else is a `DebeziumException`), decoded into a struct — with the
//!   null fields only under `fields.null.include = true`;
//! - the value becomes an envelope (its schema name the message schema's plus `.Envelope`) with
//!   the original fields but `message`, `op` rewritten to `c`, and the decoded struct as `after`;
//!   the key (the message's prefix) is cleared.
//!
//! Chained before `EventRouter`, the decoded fields are the outbox columns: the routed key is then
//! the decoded `aggregateid` (reference §7.2).

use super::{ConnectRecord, Struct, Value};
use std::collections::BTreeMap;

/// The value schema of a logical decoding message's record
/// (`PostgresSchemaFactory.POSTGRES_LOGICAL_DECODING_MESSAGE_MONITOR_VALUE_SCHEMA_NAME`).
pub const MESSAGE_VALUE_SCHEMA: &str = "io.debezium.connector.postgresql.MessageValue";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeLogicalDecodingMessageContent {
    /// `fields.null.include` (default false).
    pub fields_null_include: bool,
}

impl DecodeLogicalDecodingMessageContent {
    /// Configures it from its options (without Connect's `type`, `predicate`, `negate`).
    pub fn configure(options: &BTreeMap<String, String>) -> Result<DecodeLogicalDecodingMessageContent, String> {
        let mut fields_null_include = false;
        for (name, value) in options {
            match name.as_str() {
                "fields.null.include" => {
                    fields_null_include = match value.trim().to_ascii_lowercase().as_str() {
                        "true" => true,
                        "false" => false,
                        _ => return Err(format!("`fields.null.include` = `{value}`: give true or false")),
                    }
                }
                _ => {
                    return Err(format!(
                        "`{name}` is not an option of DecodeLogicalDecodingMessageContent; it has fields.null.include"
                    ));
                }
            }
        }
        Ok(DecodeLogicalDecodingMessageContent { fields_null_include })
    }

    /// The transform applied to one record; an error is the exception that fails the task.
    pub fn apply(&self, record: &ConnectRecord) -> Result<ConnectRecord, String> {
        let value = match &record.value {
            Value::Struct(value) => value,
            // No value schema: `record.valueSchema().name()` throws.
            Value::Null => {
                return Err("java.lang.NullPointerException: the record has no value schema (a tombstone): \
                            DecodeLogicalDecodingMessageContent reads its name unchecked"
                    .into());
            }
            _ => return Ok(record.clone()),
        };
        if value.schema_name.as_deref() != Some(MESSAGE_VALUE_SCHEMA) {
            return Ok(record.clone());
        }
        let message = match value.get("message")? {
            Value::Struct(message) => message,
            other => {
                return Err(format!(
                    "org.apache.kafka.connect.errors.DataException: Only Struct objects supported for [Retrieve \
                     content of a logical decoding message], found: {}",
                    other.java_string()
                ));
            }
        };
        let content = match message.get("content")? {
            Value::Bytes(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            _ => {
                return Err(
                    "io.debezium.DebeziumException: The content of a logical decoding message is non-binary".into()
                );
            }
        };
        let after = self.decode(&content)?;
        let mut envelope = Struct::new(Some(&format!("{MESSAGE_VALUE_SCHEMA}.Envelope")));
        for (name, field) in &value.fields {
            match name.as_str() {
                "message" => {}
                "op" => envelope.put("op", Value::Text("c".into())),
                _ => envelope.put(name, field.clone()),
            }
        }
        if envelope.field("op").is_none() {
            envelope.put("op", Value::Text("c".into()));
        }
        envelope.put("after", Value::Struct(after));
        Ok(ConnectRecord { key: Value::Null, value: Value::Struct(envelope), ..record.clone() })
    }

    /// The content's JSON as a struct (`JsonSchemaData.toConnectData`).
    fn decode(&self, content: &str) -> Result<Struct, String> {
        if !(content.starts_with('{') || content.starts_with('[')) {
            return Err(format!(
                "io.debezium.DebeziumException: Unable to parse logical decoding message content JSON string '{content}'"
            ));
        }
        let json: serde_json::Value = serde_json::from_str(content).map_err(|error| {
            format!("io.debezium.DebeziumException: com.fasterxml.jackson.core.JsonParseException: {error}")
        })?;
        if json.is_array() {
            return Err(
                "java.lang.ClassCastException: a JSON array is not a Struct: the content must be a JSON object".into(),
            );
        }
        match self.value_of(&json)? {
            Value::Struct(decoded) => Ok(decoded),
            other => Err(format!("the content is not a JSON object: {}", other.java_string())),
        }
    }

    fn value_of(&self, json: &serde_json::Value) -> Result<Value, String> {
        Ok(match json {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(flag) => Value::Bool(*flag),
            serde_json::Value::Number(number) => match number.as_i64() {
                Some(integer) => Value::Int(integer),
                None => return Err(format!("the model carries whole numbers only; the content has {number}")),
            },
            serde_json::Value::String(text) => Value::Text(text.clone()),
            serde_json::Value::Array(_) => {
                return Err(format!("the model carries no arrays in a message's content; it has {json}"));
            }
            serde_json::Value::Object(fields) => {
                let mut decoded = Struct::new(None);
                for (name, field) in fields {
                    if field.is_null() && !self.fields_null_include {
                        continue;
                    }
                    decoded.put(name, self.value_of(field)?);
                }
                Value::Struct(decoded)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::Transformed;
    use super::super::event_router::EventRouter;
    use super::*;

    fn message_record(content: &[u8]) -> ConnectRecord {
        let message = Struct::new(Some("io.debezium.connector.postgresql.Message"))
            .with("prefix", Value::Text("outbox".into()))
            .with("content", Value::Bytes(content.to_vec()));
        let value = Struct::new(Some(MESSAGE_VALUE_SCHEMA))
            .with("op", Value::Text("m".into()))
            .with("ts_ms", Value::Int(1_700_000_000_000))
            .with("message", Value::Struct(message));
        ConnectRecord {
            topic: "claims.message".into(),
            partition: None,
            key: Value::Struct(Struct::new(None).with("prefix", Value::Text("outbox".into()))),
            value: Value::Struct(value),
            timestamp_ms: None,
            headers: Vec::new(),
        }
    }

    const EVENT: &[u8] =
        br#"{"id":"e-7","aggregatetype":"claim","aggregateid":"42","type":"ClaimApproved","payload":"{}","note":null}"#;

    #[test]
    fn a_message_becomes_an_insert_the_event_router_routes() {
        let decode = DecodeLogicalDecodingMessageContent::configure(&BTreeMap::new()).expect("defaults");
        let decoded = decode.apply(&message_record(EVENT)).expect("decoded");
        assert_eq!(decoded.key, Value::Null, "the prefix key is cleared");
        let Value::Struct(envelope) = &decoded.value else { panic!("a struct") };
        assert_eq!(envelope.schema_name.as_deref(), Some("io.debezium.connector.postgresql.MessageValue.Envelope"));
        assert_eq!(envelope.field("op"), Some(&Value::Text("c".into())));
        assert!(envelope.field("message").is_none());
        let Some(Value::Struct(after)) = envelope.field("after") else { panic!("after") };
        assert!(after.field("note").is_none(), "null fields left out by default");
        let routed = match EventRouter::with_defaults().apply(&decoded) {
            Ok(Transformed::Record(record)) => record,
            other => panic!("{other:?}"),
        };
        assert_eq!((routed.topic.as_str(), &routed.key), ("outbox.event.claim", &Value::Text("42".into())));
        let with_nulls =
            DecodeLogicalDecodingMessageContent { fields_null_include: true }.apply(&message_record(EVENT));
        let Value::Struct(envelope) = with_nulls.expect("decoded").value else { panic!("a struct") };
        let Some(Value::Struct(after)) = envelope.field("after") else { panic!("after") };
        assert_eq!(after.field("note"), Some(&Value::Null));
    }

    #[test]
    fn other_records_pass_and_bad_content_fails() {
        let decode = DecodeLogicalDecodingMessageContent::configure(&BTreeMap::new()).expect("defaults");
        let change = ConnectRecord {
            value: Value::Struct(Struct::new(Some("claims.public.claims.Envelope"))),
            ..message_record(EVENT)
        };
        assert_eq!(decode.apply(&change), Ok(change.clone()));
        let tombstone = ConnectRecord { value: Value::Null, ..change };
        assert!(decode.apply(&tombstone).expect_err("no schema").starts_with("java.lang.NullPointerException"));
        let text = decode.apply(&message_record(b"heartbeat 2024-01-01")).expect_err("not JSON");
        assert!(text.contains("Unable to parse logical decoding message content JSON string 'heartbeat"), "{text}");
        assert!(decode.apply(&message_record(b"[1, 2]")).expect_err("an array").contains("ClassCastException"));
        assert!(decode.apply(&message_record(b"{\"a\": ")).expect_err("broken").contains("JsonParseException"));
        let error = DecodeLogicalDecodingMessageContent::configure(
            &[("fields.null.include".to_owned(), "maybe".to_owned())].into_iter().collect(),
        )
        .expect_err("refused");
        assert!(error.contains("give true or false"));
    }
}
