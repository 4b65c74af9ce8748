//! Names shared by every model: nodes, keys, rows, tables, transaction ids.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A process in the modelled system. Each one is a madsim node in the timed lens.
///
/// `Postgres` is not a machine: it is the service name clients connect to (`database.hostname`),
/// which the lens resolves to whichever of `Pg1` / `Pg2` is the primary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Node {
    /// The first PostgreSQL server, the primary at the start of a run.
    Pg1,
    /// The second PostgreSQL server, a streaming standby of `Pg1` until it is promoted.
    Pg2,
    /// The database service name: whichever server is the primary.
    Postgres,
    /// The Kafka Connect worker running the Debezium PostgreSQL source task.
    Connect,
    /// The Kafka cluster (modelled as one durable broker: `acks=all` with enough replicas).
    Kafka,
    /// The sink: a search index fed by a Kafka consumer group.
    Sink,
    /// The claims application writing to the database.
    App,
    /// The operator: runs the failover gate and REST calls.
    Operator,
    /// A plain `SELECT` bulk loader (the wall-clock handoff some teams use instead of the
    /// connector's snapshot).
    Loader,
    /// The outbox's consumer: a consumer group member reading the routed event topics, with its
    /// own database (inbox and side effects).
    Consumer,
    /// The second Kafka Connect worker of the group (`[connect] workers = 2` or `3`).
    Connect2,
    /// The third Kafka Connect worker of the group (`[connect] workers = 3`).
    Connect3,
}

impl Node {
    pub const PHYSICAL: [Node; 11] = [
        Node::Pg1,
        Node::Pg2,
        Node::Connect,
        Node::Kafka,
        Node::Sink,
        Node::App,
        Node::Operator,
        Node::Loader,
        Node::Consumer,
        Node::Connect2,
        Node::Connect3,
    ];

    /// Every process a scenario or a timeline names: the database service, then the machines.
    pub const ALL: [Node; 12] = [
        Node::Postgres,
        Node::Pg1,
        Node::Pg2,
        Node::Connect,
        Node::Kafka,
        Node::Sink,
        Node::App,
        Node::Operator,
        Node::Loader,
        Node::Consumer,
        Node::Connect2,
        Node::Connect3,
    ];

    /// The Kafka Connect workers of a group, in order: `connect` is the first (and the only one
    /// of a scenario with one worker).
    pub const WORKERS: [Node; 3] = [Node::Connect, Node::Connect2, Node::Connect3];

    /// A Kafka Connect worker.
    pub fn is_connect_worker(self) -> bool {
        matches!(self, Node::Connect | Node::Connect2 | Node::Connect3)
    }

    /// The worker's place in [`Node::WORKERS`] (0 for `connect`).
    pub fn worker_index(self) -> Option<usize> {
        Node::WORKERS.iter().position(|worker| *worker == self)
    }

    /// A server: it answers requests and never opens a connection to its clients (PostgreSQL,
    /// Kafka).
    pub fn is_server(self) -> bool {
        matches!(self, Node::Pg1 | Node::Pg2 | Node::Kafka)
    }

    /// Whether `self` opens the connection to `to` (it is a client of `to`): every process
    /// connects to the servers, and the operator to the Connect worker's REST API.
    pub fn initiates(self, to: Node) -> bool {
        (to.is_server() && self != to)
            || (to.is_connect_worker() && (self == Node::Operator || (self.is_connect_worker() && self != to)))
    }

    /// A client of the database, which it names by the service name `postgres`.
    pub fn is_database_client(self) -> bool {
        matches!(self, Node::Connect | Node::Connect2 | Node::Connect3 | Node::App | Node::Operator | Node::Loader)
    }

    pub fn name(self) -> &'static str {
        match self {
            Node::Pg1 => "pg1",
            Node::Pg2 => "pg2",
            Node::Postgres => "postgres",
            Node::Connect => "connect",
            Node::Kafka => "kafka",
            Node::Sink => "sink",
            Node::App => "app",
            Node::Operator => "operator",
            Node::Loader => "loader",
            Node::Consumer => "consumer",
            Node::Connect2 => "connect-2",
            Node::Connect3 => "connect-3",
        }
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A primary-key value (claim ID).
pub type Key = i64;

/// A PostgreSQL transaction id.
pub type Xid = u32;

/// Commit sequence number: the n-th commit on the source. 0 is the state before the run.
/// MVCC snapshots are expressed as "sees commits with csn ≤ n".
pub type Csn = u64;

/// A table, by index into the scenario's table list (`public.claims` is usually 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TableId(pub u16);

impl TableId {
    /// Where the ids of the message outboxes begin (`[[message_outbox]]`). A message outbox has
    /// no table, but its events are named as an outbox table's rows are, `(outbox, event id)`:
    /// the `n`-th message outbox is `TableId(MESSAGE_OUTBOXES + n)`, past every table's id (a
    /// scenario has at most 1,000 tables, [`crate::core::limits::MAX_TABLES`]). Such an id
    /// never indexes the tables: it appears only as the `source.table` of a message record
    /// that carries an outbox event, and in the events' names ([`MessageEvent::id_in_outbox`]).
    pub const MESSAGE_OUTBOXES: u16 = 0xF000;

    /// The id of the `index`-th message outbox.
    pub fn message_outbox(index: u16) -> TableId {
        TableId(TableId::MESSAGE_OUTBOXES + index)
    }

    /// The place of a message outbox among the scenario's, if this id is one's.
    pub fn as_message_outbox(self) -> Option<u16> {
        self.0.checked_sub(TableId::MESSAGE_OUTBOXES)
    }
}

/// A table's two-column primary key (`[[table]] primary_key = ["region_id", "hub_id"]`,
/// `group_rows`), for tables whose key is not the model's single `id` column. The model keeps one
/// [`Key`] per row, `n >= 1`, and derives the two columns' values from it:
/// `((n - 1) / group_rows + 1, (n - 1) % group_rows + 1)`. So `group_rows` rows share each value
/// of the first column, and the order of `(k1, k2)` (PostgreSQL's row-value order, `ORDER BY k1,
/// k2`) is the order of `n`: every query and record ordered or compared by the whole key is one
/// on `n`. What differs is a predicate that compares the columns one by one (Debezium's chunk
/// query before 1.8, DBZ-3860).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CompositeKey {
    pub columns: [String; 2],
    pub group_rows: u32,
}

impl CompositeKey {
    /// The two columns' values of the row whose key is `key`.
    pub fn values(&self, key: Key) -> (i64, i64) {
        let rows = i64::from(self.group_rows.max(1));
        let n = key.saturating_sub(1);
        (n.div_euclid(rows) + 1, n.rem_euclid(rows) + 1)
    }

    /// The row whose columns' values are `(first, second)`, the inverse of [`CompositeKey::values`]:
    /// `None` when `first` is below 1, `second` is not 1 to `group_rows`, or the row's number
    /// would pass `i64::MAX`.
    pub fn key(&self, first: i64, second: i64) -> Option<Key> {
        let rows = i64::from(self.group_rows.max(1));
        if first < 1 || !(1..=rows).contains(&second) {
            return None;
        }
        (first - 1).checked_mul(rows)?.checked_add(second)
    }

    /// `(region_id, hub_id) = (2, 6)`.
    pub fn text(&self, key: Key) -> String {
        format!("{} = {}", self.columns_text(), self.values_text(key))
    }

    /// `(region_id, hub_id)`.
    pub fn columns_text(&self) -> String {
        format!("({}, {})", self.columns[0], self.columns[1])
    }

    /// `(2, 6)`.
    pub fn values_text(&self, key: Key) -> String {
        let (first, second) = self.values(key);
        format!("({first}, {second})")
    }
}

/// A nullable column with a unique index beside the table's key (`[[table]] unique_column`,
/// `null_row`): `CREATE UNIQUE INDEX … (external_id) NULLS NOT DISTINCT` (PostgreSQL 15), so at
/// most one row holds NULL. The model keeps one [`Key`] per row and derives the column from it:
/// the row's `id`, except row `null_row`, whose value is NULL. A connector whose
/// `message.key.columns` names the column keys that table's records, and orders and bounds its
/// incremental snapshot's chunks, by it (`AbstractChunkQueryBuilder.getQueryColumns` through the
/// key mapper), where the NULL is what Debezium before 2.6 got wrong (DBZ-5071).
///
/// In a chunk position the NULL is [`UniqueColumn::NULL`], past every key: PostgreSQL sorts
/// NULLs last in ascending order and first in descending order, and Debezium 2.6's bounds treat
/// NULL as the largest value (`nullsSortLast`), so every query that orders or compares by the
/// column the null-aware way is one on that value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct UniqueColumn {
    pub name: String,
    pub null_row: Key,
}

impl UniqueColumn {
    /// The chunk position of NULL.
    pub const NULL: Key = Key::MAX;

    /// The column's value in row `key` as a chunk position.
    pub fn position(&self, key: Key) -> Key {
        UniqueColumn::position_in(self.null_row, key)
    }

    /// Row `key`'s position in a table whose NULL row is `null_row`.
    pub fn position_in(null_row: Key, key: Key) -> Key {
        if key == null_row { UniqueColumn::NULL } else { key }
    }

    /// A chunk position as SQL shows it: `7`, `NULL`.
    pub fn text(position: Key) -> String {
        if position == UniqueColumn::NULL { "NULL".into() } else { position.to_string() }
    }
}

/// Claim status, the business column that changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Submitted,
    Assessed,
    Approved,
    Paid,
    Closed,
}

impl Status {
    /// Every status, in declaration order (a status's place here is `status as usize`).
    pub const ALL: [Status; 5] = [Status::Submitted, Status::Assessed, Status::Approved, Status::Paid, Status::Closed];

    pub fn next(self) -> Status {
        match self {
            Status::Submitted => Status::Assessed,
            Status::Assessed => Status::Approved,
            Status::Approved => Status::Paid,
            Status::Paid | Status::Closed => Status::Closed,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Status::Submitted => "submitted",
            Status::Assessed => "assessed",
            Status::Approved => "approved",
            Status::Paid => "paid",
            Status::Closed => "closed",
        }
    }
}

/// The non-key columns of a row: `version` (incremented by every update, the sink's guard) and
/// the business content.
///
/// An outbox table's row (`[[table]] outbox`, the transactional outbox's event row: `id`,
/// `aggregatetype`, `aggregateid`, `type`, `payload`) is a row of this shape too: its key is the
/// event's `id`, `aggregate_id` its `aggregateid` (the business row it announces), `status` its
/// `type` (the status the business row changed to), `version` 1 (event rows are inserted, never
/// updated). `aggregatetype` is the outbox table's, and `payload` is derived from the rest
/// ([`Row::payload_json`]). `aggregate_id` is 0 in every other table's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Row {
    pub version: u32,
    pub status: Status,
    pub amount_cents: u32,
    /// `aggregateid` of an outbox row; 0 in any other table.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub aggregate_id: u32,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// The derived hash, field by field, with `aggregate_id` only when it is set: rows of tables that
/// are no outbox hash as they did before the column existed, so every trace hash without an
/// outbox is unchanged.
impl std::hash::Hash for Row {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.version.hash(state);
        self.status.hash(state);
        self.amount_cents.hash(state);
        if self.aggregate_id != 0 {
            self.aggregate_id.hash(state);
        }
    }
}

impl Row {
    /// A row of a business table.
    pub fn new(version: u32, status: Status, amount_cents: u32) -> Row {
        Row { version, status, amount_cents, aggregate_id: 0 }
    }

    /// An outbox row announcing that business row `aggregate_id` changed to `event_type`.
    pub fn event(aggregate_id: u32, event_type: Status) -> Row {
        Row { version: 1, status: event_type, amount_cents: 0, aggregate_id }
    }

    /// Whether it is an outbox table's event row.
    pub fn is_event(&self) -> bool {
        self.aggregate_id != 0
    }

    /// An event row's `type` column: `ClaimApproved`.
    pub fn event_type(&self) -> String {
        let name = self.status.name();
        let mut chars = name.chars();
        let capitalised: String = chars.next().map(|c| c.to_ascii_uppercase()).into_iter().chain(chars).collect();
        format!("Claim{capitalised}")
    }

    /// An event row's `payload` column (jsonb): what the service announces.
    pub fn payload_json(&self) -> String {
        format!("{{\"claim\": {}, \"status\": \"{}\"}}", self.aggregate_id, self.status.name())
    }

    /// A content hash for sampled comparisons (FNV-1a over the columns, stable across builds).
    pub fn content_hash(&self, key: Key) -> u64 {
        let mut hash = Fnv::new();
        hash.write(&key.to_le_bytes());
        hash.write(&self.version.to_le_bytes());
        hash.write(&[self.status as u8]);
        hash.write(&self.amount_cents.to_le_bytes());
        if self.aggregate_id != 0 {
            hash.write(&self.aggregate_id.to_le_bytes());
        }
        hash.finish()
    }

    /// Bytes of the row's column data in a heap tuple (bigint id, int version, a short text
    /// status, a numeric amount; an outbox row: a uuid, a short aggregatetype, a bigint
    /// aggregateid, its type and its jsonb payload), used to size WAL records.
    pub fn tuple_data_bytes(&self) -> u64 {
        if self.is_event() {
            return 16 + 6 + 8 + 1 + self.event_type().len() as u64 + 4 + self.payload_json().len() as u64;
        }
        8 + 4 + 1 + self.status.name().len() as u64 + 8
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_event() {
            return write!(f, "{} of claim {}", self.event_type(), self.aggregate_id);
        }
        write!(f, "v{} {} {}.{:02}", self.version, self.status.name(), self.amount_cents / 100, self.amount_cents % 100)
    }
}

/// An outbox event's `id` (a uuid column), printed from the event's number: the service numbers
/// its events from 1, and a version-4-shaped uuid carries the number in its last group.
pub fn event_uuid(id: Key) -> String {
    format!("00000000-0000-4000-8000-{:012x}", id)
}

/// An outbox event the service writes as a logical decoding message instead of a table row (the
/// table-free outbox, `[[message_outbox]]`): `pg_logical_emit_message(transactional, prefix,
/// content)` in the business change's transaction, its content the JSON object an outbox row
/// would hold ([`MessageEvent::content`]). Kept as these few numbers on the message (the WAL,
/// the decoded message and the connector's record carry it), and rendered as text only where
/// the bytes are read: the size of the WAL record, and the record a transform reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MessageEvent {
    /// The message outbox's place among the scenario's `[[message_outbox]]` declarations.
    pub outbox: u16,
    /// The event's number (its `id` is [`event_uuid`] of it): the service numbers every event,
    /// of a table outbox or a message outbox, in one sequence from 1.
    pub id: Key,
    /// `aggregateid`: the business row it announces.
    pub aggregate_id: u32,
    /// `type`: the status the business row changed to.
    pub event_type: Status,
}

impl MessageEvent {
    /// The event as an outbox row would hold it ([`Row::event`]): what a consumer reads of it.
    pub fn row(&self) -> Row {
        Row::event(self.aggregate_id, self.event_type)
    }

    /// The event's name, as an outbox table's row is named: `(outbox, id)`.
    pub fn id_in_outbox(&self) -> (TableId, Key) {
        (TableId::message_outbox(self.outbox), self.id)
    }

    /// The message's content: the JSON object the service writes, with the outbox row's column
    /// names and the table outbox's payload, `{"id": "<uuid>", "aggregatetype": "claim",
    /// "aggregateid": "7", "type": "ClaimApproved", "payload": {"claim": 7, "status":
    /// "approved"}}` (`aggregateid` as text, as the outbox table's column).
    pub fn content(&self, aggregatetype: &str) -> String {
        let row = self.row();
        format!(
            "{{\"id\": \"{}\", \"aggregatetype\": \"{aggregatetype}\", \"aggregateid\": \"{}\", \"type\": \"{}\", \
             \"payload\": {}}}",
            event_uuid(self.id),
            self.aggregate_id,
            row.event_type(),
            row.payload_json()
        )
    }
}

/// What a logical decoding message carries: bytes the model does not keep (a heartbeat's
/// `now()::varchar`, a scripted `repeat('x', payload_bytes)`: only their size matters), or an
/// outbox event. Hashed only when it is an event, so that every run without one hashes (and its
/// trace hash reads) as before the content existed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum MessageContent {
    #[default]
    Opaque,
    Event(MessageEvent),
}

impl MessageContent {
    pub fn is_opaque(&self) -> bool {
        *self == MessageContent::Opaque
    }

    /// The outbox event it carries, if any.
    pub fn event(&self) -> Option<MessageEvent> {
        match self {
            MessageContent::Opaque => None,
            MessageContent::Event(event) => Some(*event),
        }
    }
}

impl std::hash::Hash for MessageContent {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        if let MessageContent::Event(event) = self {
            event.hash(state);
        }
    }
}

/// 64-bit FNV-1a: a tiny stable hash for trace hashes and content hashes. The standard
/// library's hashers are not guaranteed stable across Rust releases, and a trace hash must be.
#[derive(Clone, Debug)]
pub struct Fnv(u64);

impl Fnv {
    pub fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    pub fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub fn finish(&self) -> u64 {
        self.0
    }
}

impl Fnv {
    /// FNV-1a's step applied to a whole word at once: integers (most of what a trace holds)
    /// cost one multiplication instead of eight.
    fn write_word(&mut self, word: u64) {
        self.0 ^= word;
        self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

/// As a `Hasher` (for trace hashes), integers are mixed a word at a time; byte strings byte by
/// byte. Stable across builds and runs on one platform.
impl std::hash::Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.write_word(u64::from_le_bytes(chunk.try_into().expect("eight bytes")));
        }
        Fnv::write(self, chunks.remainder());
    }

    fn write_u8(&mut self, value: u8) {
        self.write_word(u64::from(value));
    }

    fn write_u16(&mut self, value: u16) {
        self.write_word(u64::from(value));
    }

    fn write_u32(&mut self, value: u32) {
        self.write_word(u64::from(value));
    }

    fn write_u64(&mut self, value: u64) {
        self.write_word(value);
    }

    fn write_usize(&mut self, value: usize) {
        self.write_word(value as u64);
    }

    fn write_i64(&mut self, value: i64) {
        self.write_word(value as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl Default for Fnv {
    fn default() -> Self {
        Fnv::new()
    }
}

/// A PostgreSQL server's role in its cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Role {
    Primary,
    Standby,
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_composite_key_and_its_row_number_are_inverses() {
        let key = super::CompositeKey { columns: ["region_id".into(), "order_id".into()], group_rows: 10 };
        for n in [1, 10, 11, 42, 1_000] {
            let (first, second) = key.values(n);
            assert_eq!(key.key(first, second), Some(n));
        }
        assert_eq!(key.key(0, 1), None);
        assert_eq!(key.key(1, 11), None);
        assert_eq!(key.key(i64::MAX, 1), None, "past i64::MAX");
    }

    use super::*;
    use std::hash::Hash;

    #[test]
    fn a_message_events_content_is_the_outbox_rows_columns_as_json() {
        let event = MessageEvent { outbox: 2, id: 12, aggregate_id: 7, event_type: Status::Paid };
        let json: serde_json::Value = serde_json::from_str(&event.content("policy")).expect("JSON");
        assert_eq!(json["id"], event_uuid(12));
        assert_eq!(json["aggregatetype"], "policy");
        assert_eq!(json["aggregateid"], "7", "text, as the outbox table's column");
        assert_eq!(json["type"], event.row().event_type());
        let payload: serde_json::Value = serde_json::from_str(&event.row().payload_json()).expect("JSON");
        assert_eq!(json["payload"], payload, "the table outbox's payload");
        assert_eq!(event.id_in_outbox(), (TableId::message_outbox(2), 12));
        assert_eq!(TableId::message_outbox(2).as_message_outbox(), Some(2));
        assert_eq!(TableId(999).as_message_outbox(), None, "a table's id is no message outbox's");
    }

    /// A message without an event hashes as before the content existed (trace hashes stay).
    #[test]
    fn opaque_content_hashes_nothing_and_an_event_hashes() {
        let hash = |content: MessageContent| {
            let mut hasher = Fnv::new();
            content.hash(&mut hasher);
            hasher.finish()
        };
        assert_eq!(hash(MessageContent::Opaque), Fnv::new().finish());
        let event = MessageEvent { outbox: 0, id: 1, aggregate_id: 7, event_type: Status::Approved };
        assert_ne!(hash(MessageContent::Event(event)), Fnv::new().finish());
        assert_ne!(hash(MessageContent::Event(event)), hash(MessageContent::Event(MessageEvent { id: 2, ..event })));
    }
}
