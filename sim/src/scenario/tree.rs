//! The tree: values that remember where they came from.

use toml::Spanned;
use toml::de::DeTable;
use toml::de::DeValue;

/// Where a value came from: a byte offset in the file, the index of a `--set` argument, or a
/// byte offset in a file a section reads with `from` (the index of the file, in the order read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum At {
    File(usize),
    Set(usize),
    Included(usize, usize),
}

#[derive(Clone, Debug)]
pub(super) enum Val {
    Str(String),
    /// `None`: an integer TOML accepts but that does not fit in an `i64`.
    Int(Option<i64>),
    /// The value and its text as written (a release like `3.7` is written as a float).
    Float(f64, String),
    Bool(bool),
    Datetime,
    Array(Vec<Item>),
    Table(Vec<Entry>),
}

impl Val {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Val::Str(_) => "a string",
            Val::Int(_) => "an integer",
            Val::Float(..) => "a float",
            Val::Bool(_) => "a boolean",
            Val::Datetime => "a datetime",
            Val::Array(_) => "an array",
            Val::Table(_) => "a table",
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Item {
    pub(super) val: Val,
    pub(super) at: At,
}

#[derive(Clone, Debug)]
pub(super) struct Entry {
    pub(super) key: String,
    pub(super) key_at: At,
    pub(super) item: Item,
}

impl Entry {
    /// Errors about an entry point at its key (the start of its line), unless `--set` wrote it.
    pub(super) fn at(&self) -> At {
        match self.item.at {
            At::Set(index) => At::Set(index),
            At::File(_) | At::Included(..) => self.key_at,
        }
    }
}

/// Copies a parsed value; `set` is the index of the `--set` argument it comes from, if any.
pub(super) fn convert(value: &Spanned<DeValue<'_>>, set: Option<usize>) -> Item {
    let at = set.map_or(At::File(value.span().start), At::Set);
    let val = match value.get_ref() {
        DeValue::String(text) => Val::Str(text.to_string()),
        DeValue::Integer(int) => Val::Int(i64::from_str_radix(int.as_str(), int.radix()).ok()),
        DeValue::Float(float) => Val::Float(float.as_str().parse().unwrap_or(f64::NAN), float.as_str().to_string()),
        DeValue::Boolean(flag) => Val::Bool(*flag),
        DeValue::Datetime(_) => Val::Datetime,
        DeValue::Array(items) => Val::Array(items.iter().map(|item| convert(item, set)).collect()),
        DeValue::Table(table) => Val::Table(convert_table(table, set)),
    };
    Item { val, at }
}

/// Copies a parsed table, its entries in the order of the text.
pub(super) fn convert_table(table: &DeTable<'_>, set: Option<usize>) -> Vec<Entry> {
    let mut entries: Vec<(usize, Entry)> = table
        .iter()
        .map(|(key, value)| {
            let start = key.span().start;
            let key_at = set.map_or(At::File(start), At::Set);
            (start, Entry { key: key.get_ref().to_string(), key_at, item: convert(value, set) })
        })
        .collect();
    entries.sort_by_key(|(start, _)| *start);
    entries.into_iter().map(|(_, entry)| entry).collect()
}
