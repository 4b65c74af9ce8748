//! `from = "FILE"`: a section's settings from the file a pipeline already has. `[connector]` (and
//! each `[[connector]]`) reads a Kafka Connect REST object (`{"name": …, "config": {…}}`, as
//! `POST /connectors` takes it and `GET /connectors/{name}` returns it) or a bare `config`
//! object (as `PUT /connectors/{name}/config` takes it); `[connect]` a worker's `.properties`
//! (`connect-distributed.properties`, read as `java.util.Properties.load` reads it); `[postgres]`
//! a `postgresql.conf` fragment (read as PostgreSQL's `guc-file.l` reads it).
//!
//! The file's settings come first; the section's own keys (and `--set`s on them) override them,
//! so a scenario can take a real configuration unchanged and change one property. Every value
//! read remembers where it came from ([`At::Included`]): errors about it name the included file,
//! its line and column.
//!
//! Paths are relative to the scenario file's directory.

use super::ScenarioError;
use super::fields::{Cx, Res, line_col};
use super::tree::{At, Entry, Item, Val};
use std::path::Path;

/// A file a scenario reads settings from: its name as messages show it, and its text.
#[derive(Clone, Debug)]
pub(super) struct Included {
    pub(super) name: String,
    pub(super) text: String,
}

/// The sections that take `from`.
const SECTIONS: [&str; 3] = ["connector", "connect", "postgres"];

/// The `[postgres]` keys that are the scenario's, not PostgreSQL's: a `postgresql.conf` cannot
/// give them.
const SCENARIO_POSTGRES_KEYS: [&str; 3] = ["version", "scan_rows_per_second", "standby"];

/// The `[connect]` keys that are the scenario's, not a worker property.
const SCENARIO_CONNECT_KEYS: [&str; 2] = ["workers", "start_at_ms"];

/// The largest included file: a connector configuration is a few kilobytes.
const MAX_INCLUDED_BYTES: u64 = 1 << 20;

/// Replaces every `from` of the sections that take one by the file's settings, the section's
/// own keys over them. `base`: the scenario file's directory.
pub(super) fn expand(cx: &Cx, root: &mut Item, base: &Path, included: &mut Vec<Included>) -> Res<()> {
    let Val::Table(entries) = &mut root.val else { return Ok(()) };
    for entry in entries.iter_mut().filter(|entry| SECTIONS.contains(&entry.key.as_str())) {
        let key = entry.key.clone();
        match &mut entry.item.val {
            Val::Table(section) => expand_section(cx, &key, &key, section, base, included)?,
            Val::Array(items) => {
                for (index, item) in items.iter_mut().enumerate() {
                    if let Val::Table(section) = &mut item.val {
                        expand_section(cx, &key, &format!("{key}[{index}]"), section, base, included)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn expand_section(
    cx: &Cx,
    kind: &str,
    path: &str,
    section: &mut Vec<Entry>,
    base: &Path,
    included: &mut Vec<Included>,
) -> Res<()> {
    let Some(position) = section.iter().position(|entry| entry.key == "from") else { return Ok(()) };
    let from = section.remove(position);
    let field = format!("{path}.from");
    let Val::Str(name) = &from.item.val else {
        return Err(cx.err(
            from.at(),
            &field,
            format!("expected a string (a file's path), found {}", from.item.val.kind()),
        ));
    };
    let file = base.join(name);
    let shown = file.display().to_string();
    let text = read(&file).map_err(|problem| cx.err(from.item.at, &field, format!("`{shown}`: {problem}")))?;
    let index = included.len();
    let entries = match kind {
        "connector" => connector_json(&shown, &text, index)?,
        "connect" => worker_properties(&shown, &text, index)?,
        _ => postgresql_conf(&shown, &text, index)?,
    };
    included.push(Included { name: shown, text });
    // The file's settings, then the section's own (which win).
    let own = std::mem::take(section);
    section.extend(entries.into_iter().filter(|entry| own.iter().all(|mine| mine.key != entry.key)));
    section.extend(own);
    Ok(())
}

fn read(file: &Path) -> Result<String, String> {
    let metadata = std::fs::metadata(file).map_err(|error| format!("cannot read: {error}"))?;
    if !metadata.is_file() {
        return Err("is not a file".into());
    }
    if metadata.len() > MAX_INCLUDED_BYTES {
        return Err(format!("{} bytes; a settings file here holds at most {MAX_INCLUDED_BYTES}", metadata.len()));
    }
    super::load::read_text(file).map_err(|message| {
        // `read_text` names the file itself; keep what follows.
        message.split_once(": ").map_or(message.clone(), |(_, rest)| rest.to_owned())
    })
}

/// A connector's properties from a Connect REST object or a bare `config` object.
fn connector_json(name: &str, text: &str, index: usize) -> Res<Vec<Entry>> {
    let fail = |offset: usize, problem: String| error_at(name, text, offset, problem);
    let value: serde_json::Value = serde_json::from_str(text).map_err(|error| ScenarioError {
        message: format!("{name}:{}:{}: invalid JSON: {error}", error.line(), error.column()),
    })?;
    let serde_json::Value::Object(top) = value else {
        return Err(fail(
            0,
            "expected a JSON object: Connect's {\"name\": …, \"config\": {…}} or the config object itself".into(),
        ));
    };
    // `{"name", "config"}` (and `tasks`, `type` as `GET /connectors/{name}` adds them), or bare.
    let (config, config_at, top_name) = match top.get("config") {
        Some(serde_json::Value::Object(config)) => {
            if let Some(key) = top.keys().find(|key| !["name", "config", "tasks", "type"].contains(&key.as_str())) {
                return Err(fail(
                    key_offset(text, key, 0).unwrap_or(0),
                    format!(
                        "`{key}` is not a key of Connect's connector object; it has name and config (and tasks and \
                         type when read back)"
                    ),
                ));
            }
            let name = match top.get("name") {
                None => None,
                Some(serde_json::Value::String(name)) => Some(name.clone()),
                Some(_) => {
                    return Err(fail(key_offset(text, "name", 0).unwrap_or(0), "`name` must be a string".into()));
                }
            };
            (config.clone(), key_offset(text, "config", 0).unwrap_or(0), name)
        }
        Some(_) => {
            return Err(fail(
                key_offset(text, "config", 0).unwrap_or(0),
                "`config` must be an object of connector properties".into(),
            ));
        }
        None => (top, 0, None),
    };
    let mut entries = Vec::new();
    if let (Some(top_name), Some(serde_json::Value::String(inner))) = (&top_name, config.get("name"))
        && inner != top_name
    {
        return Err(fail(
            key_offset(text, "name", config_at).unwrap_or(config_at),
            format!(
                "config.name `{inner}` is not the connector's name `{top_name}`; Connect refuses a configuration whose \
                 name differs"
            ),
        ));
    }
    if let Some(top_name) = top_name
        && !config.contains_key("name")
    {
        let at = At::Included(index, key_offset(text, "name", 0).unwrap_or(0));
        entries.push(Entry { key: "name".into(), key_at: at, item: Item { val: Val::Str(top_name), at } });
    }
    for (key, value) in &config {
        let key_at = key_offset(text, key, config_at).unwrap_or(config_at);
        let value_at = value_offset(text, key_at).unwrap_or(key_at);
        let val = match value {
            serde_json::Value::String(text) => Val::Str(text.clone()),
            serde_json::Value::Bool(flag) => Val::Bool(*flag),
            serde_json::Value::Number(number) => match number.as_i64() {
                Some(int) => Val::Int(Some(int)),
                None => Val::Str(number.to_string()),
            },
            other => {
                let kind = match other {
                    serde_json::Value::Null => "null",
                    serde_json::Value::Array(_) => "an array",
                    _ => "an object",
                };
                return Err(fail(
                    value_at,
                    format!(
                        "`{key}`: a connector property is a string (Connect's config is a map of strings), found {kind}"
                    ),
                ));
            }
        };
        entries.push(Entry {
            key: key.clone(),
            key_at: At::Included(index, key_at),
            item: Item { val, at: At::Included(index, value_at) },
        });
    }
    // In the order of the file.
    entries.sort_by_key(|entry| match entry.key_at {
        At::Included(_, offset) => offset,
        _ => 0,
    });
    Ok(entries)
}

/// Where the member `"key":` is in `text`, at or after `from` (the byte offset of its opening
/// quote). serde_json keeps no positions; a key written with escapes is not found (the caller
/// then points at the object).
fn key_offset(text: &str, key: &str, from: usize) -> Option<usize> {
    let quoted = serde_json::to_string(key).ok()?;
    let mut start = from;
    while let Some(found) = text.get(start..)?.find(&quoted) {
        let at = start + found;
        let after = text[at + quoted.len()..].trim_start();
        if after.starts_with(':') {
            return Some(at);
        }
        start = at + quoted.len();
    }
    None
}

/// Where the value of the member whose key is at `key_at` starts.
fn value_offset(text: &str, key_at: usize) -> Option<usize> {
    let colon = key_at + text.get(key_at..)?.find(':')?;
    let rest = &text[colon + 1..];
    Some(colon + 1 + (rest.len() - rest.trim_start().len()))
}

/// An error at a byte offset of an included file.
fn error_at(name: &str, text: &str, offset: usize, problem: impl std::fmt::Display) -> ScenarioError {
    let (line, column) = line_col(text, offset);
    ScenarioError { message: format!("{name}:{line}:{column}: {problem}") }
}

/// Keeps the last of each key, as both formats do (a later line overrides an earlier one).
fn last_of_each(entries: Vec<Entry>) -> Vec<Entry> {
    let mut kept: Vec<Entry> = Vec::new();
    for entry in entries {
        kept.retain(|earlier| earlier.key != entry.key);
        kept.push(entry);
    }
    kept
}

/// A Connect worker's properties (`java.util.Properties.load`): a logical line is a key, a
/// separator (`=`, `:` or whitespace, with whitespace around it) and the rest as the value; `#`
/// and `!` start a comment line; a line ending in an odd number of backslashes continues on the
/// next (whose leading whitespace is dropped); `\t`, `\n`, `\r`, `\f`, `\uXXXX` are escapes and
/// any other escaped character stands for itself. A value that is a whole number is read as an
/// integer (the `[connect]` settings are), but `group.id`, which is a name.
fn worker_properties(name: &str, text: &str, index: usize) -> Res<Vec<Entry>> {
    let mut entries = Vec::new();
    let mut lines = LogicalLines { text, at: 0 };
    while let Some((start, chars)) = lines.next_line() {
        let mut i = chars.iter().position(|(_, c)| !c.is_whitespace()).unwrap_or(chars.len());
        if i == chars.len() || matches!(chars[i].1, '#' | '!') {
            continue;
        }
        let key_at = chars[i].0;
        let mut key = String::new();
        let mut escaped = false;
        while i < chars.len() {
            let c = chars[i].1;
            if escaped {
                key.push(c);
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '=' || c == ':' || c.is_whitespace() {
                break;
            } else {
                key.push(c);
            }
            i += 1;
        }
        while i < chars.len() && chars[i].1.is_whitespace() {
            i += 1;
        }
        if i < chars.len() && matches!(chars[i].1, '=' | ':') {
            i += 1;
            while i < chars.len() && chars[i].1.is_whitespace() {
                i += 1;
            }
        }
        let value_at = chars.get(i).map_or(start, |(offset, _)| *offset);
        let raw: String = chars[i..].iter().map(|(_, c)| *c).collect();
        let value = unescape(&raw).map_err(|problem| error_at(name, text, value_at, problem))?;
        if key.is_empty() {
            return Err(error_at(name, text, key_at, "a property line with no key"));
        }
        if SCENARIO_CONNECT_KEYS.contains(&key.as_str()) {
            return Err(error_at(
                name,
                text,
                key_at,
                format!("`{key}` is the scenario's, not a Connect worker property; give it in [connect]"),
            ));
        }
        let val = match value.parse::<i64>() {
            Ok(int) if key != "group.id" && !value.starts_with('+') => Val::Int(Some(int)),
            _ => Val::Str(value),
        };
        entries.push(Entry {
            key,
            key_at: At::Included(index, key_at),
            item: Item { val, at: At::Included(index, value_at) },
        });
    }
    Ok(last_of_each(entries))
}

/// `\t`, `\n`, `\r`, `\f`, `\uXXXX`; any other escaped character stands for itself.
fn unescape(raw: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = u32::from_str_radix(&hex, 16).ok().filter(|_| hex.len() == 4);
                match code.and_then(char::from_u32) {
                    Some(decoded) => out.push(decoded),
                    None => return Err(format!("`\\u{hex}` is a malformed \\uXXXX escape")),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

/// The logical lines of a `.properties` text: each with the byte offset where it starts, and its
/// characters with their offsets (continuations joined, the backslash that joins them and the
/// next line's leading whitespace dropped).
struct LogicalLines<'a> {
    text: &'a str,
    at: usize,
}

impl LogicalLines<'_> {
    fn next_line(&mut self) -> Option<(usize, Vec<(usize, char)>)> {
        if self.at >= self.text.len() {
            return None;
        }
        let start = self.at;
        let mut chars = Vec::new();
        let mut skip_leading = false;
        loop {
            let rest = &self.text[self.at..];
            let end = rest.find(['\n', '\r']).unwrap_or(rest.len());
            let line = &rest[..end];
            let offset = self.at;
            self.at += end;
            // The line break: \r\n, \n or \r.
            if self.text[self.at..].starts_with("\r\n") {
                self.at += 2;
            } else if self.at < self.text.len() {
                self.at += 1;
            }
            let mut line_chars: Vec<(usize, char)> = line.char_indices().map(|(i, c)| (offset + i, c)).collect();
            if skip_leading {
                let first = line_chars.iter().position(|(_, c)| !c.is_whitespace()).unwrap_or(line_chars.len());
                line_chars.drain(..first);
            }
            let is_comment = chars.is_empty()
                && line_chars.iter().find(|(_, c)| !c.is_whitespace()).is_some_and(|(_, c)| matches!(c, '#' | '!'));
            let backslashes = line_chars.iter().rev().take_while(|(_, c)| *c == '\\').count();
            if !is_comment && backslashes % 2 == 1 && self.at < self.text.len() {
                line_chars.pop();
                chars.extend(line_chars);
                skip_leading = true;
                continue;
            }
            chars.extend(line_chars);
            return Some((start, chars));
        }
    }
}

/// A `postgresql.conf` fragment (PostgreSQL's `guc-file.l`): one setting per line, `name = value`
/// or `name value`; `#` starts a comment (outside a quoted value); a value is a single-quoted
/// string (`''` or `\'` for a quote) or a run of characters up to whitespace or `#`. Names are
/// case-insensitive; a bare number is in the setting's base unit (`max_wal_size = 1024` is
/// 1024MB), which is written out for the settings the model reads. `include` directives are
/// refused: the model reads one file.
fn postgresql_conf(name: &str, text: &str, index: usize) -> Res<Vec<Entry>> {
    let mut entries = Vec::new();
    let mut offset = 0;
    for raw in text.split_inclusive('\n') {
        let line_at = offset;
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        let Some(start) = line.find(|c: char| !c.is_whitespace()) else { continue };
        if line[start..].starts_with('#') {
            continue;
        }
        let key_len = line[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(line.len() - start);
        let key = line[start..start + key_len].to_ascii_lowercase();
        let key_at = line_at + start;
        if key.is_empty() {
            return Err(error_at(name, text, key_at, "expected a setting's name"));
        }
        let mut i = start + key_len;
        let skip_space = |i: &mut usize| {
            while let Some(c) = line[*i..].chars().next().filter(|c| c.is_whitespace()) {
                *i += c.len_utf8();
            }
        };
        skip_space(&mut i);
        if line[i..].starts_with('=') {
            i += 1;
            skip_space(&mut i);
        }
        let value_at = line_at + i;
        let value = if line[i..].starts_with('\'') {
            let mut value = String::new();
            let mut chars = line[i + 1..].char_indices();
            let mut closed = None;
            while let Some((j, c)) = chars.next() {
                match c {
                    '\'' if line[i + 1 + j + 1..].starts_with('\'') => {
                        value.push('\'');
                        chars.next();
                    }
                    '\'' => {
                        closed = Some(i + 1 + j + 1);
                        break;
                    }
                    '\\' => {
                        if let Some((_, next)) = chars.next() {
                            value.push(match next {
                                'n' => '\n',
                                't' => '\t',
                                'r' => '\r',
                                other => other,
                            });
                        }
                    }
                    other => value.push(other),
                }
            }
            let Some(end) = closed else {
                return Err(error_at(name, text, value_at, "unterminated quoted string"));
            };
            i = end;
            value
        } else {
            let len = line[i..].find(|c: char| c.is_whitespace() || c == '#').unwrap_or(line.len() - i);
            let value = line[i..i + len].to_owned();
            i += len;
            value
        };
        skip_space(&mut i);
        if !line[i..].is_empty() && !line[i..].starts_with('#') {
            return Err(error_at(
                name,
                text,
                line_at + i,
                format!("syntax error: `{}` after the value of {key} (quote a value with spaces)", &line[i..]),
            ));
        }
        if value.is_empty() && !line[value_at - line_at..].starts_with('\'') {
            return Err(error_at(name, text, value_at, format!("{key} has no value")));
        }
        if matches!(key.as_str(), "include" | "include_if_exists" | "include_dir") {
            return Err(error_at(
                name,
                text,
                key_at,
                format!("`{key}` is not followed here; put the included file's settings in this one"),
            ));
        }
        if key == "wal_segment_size" {
            return Err(error_at(
                name,
                text,
                key_at,
                "wal_segment_size is fixed at initdb (--wal-segsize); PostgreSQL cannot set it in postgresql.conf: give \
                 it in [postgres] wal_segment_size",
            ));
        }
        if SCENARIO_POSTGRES_KEYS.contains(&key.as_str()) {
            return Err(error_at(
                name,
                text,
                key_at,
                format!("`{key}` is the scenario's, not a PostgreSQL setting; give it in [postgres]"),
            ));
        }
        let value = with_base_unit(&key, value);
        entries.push(Entry {
            key,
            key_at: At::Included(index, key_at),
            item: Item { val: Val::Str(value), at: At::Included(index, value_at) },
        });
    }
    Ok(last_of_each(entries))
}

/// The base units of the settings the model reads (`guc_tables.c`: `GUC_UNIT_S`, `GUC_UNIT_MB`,
/// `GUC_UNIT_MS`), written after a bare number so that `[postgres]` reads it as PostgreSQL does.
fn with_base_unit(key: &str, value: String) -> String {
    let unit = match key {
        "checkpoint_timeout" => "s",
        "max_wal_size" | "max_slot_wal_keep_size" | "wal_keep_size" => "MB",
        "idle_in_transaction_session_timeout" | "wal_sender_timeout" => "ms",
        _ => return value,
    };
    let bare = value.parse::<i64>().is_ok();
    if bare && !matches!(value.as_str(), "0" | "-1") { format!("{value}{unit}") } else { value }
}
