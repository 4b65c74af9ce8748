//! `from = "FILE"`: a section's settings from the file a pipeline already has. `[connector]` (and
//! each `[[connector]]`) reads a Kafka Connect REST object (`{"name": …, "config": {…}}`, as
//! `POST /connectors` takes it and `GET /connectors/{name}` returns it) or a bare `config`
//! object (as `PUT /connectors/{name}/config` takes it).
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
const SECTIONS: [&str; 1] = ["connector"];

/// The largest included file: a connector configuration is a few kilobytes.
const MAX_INCLUDED_BYTES: u64 = 1 << 20;

/// Replaces every `from` of the sections that take one by the file's settings, the section's
/// own keys over them. `base`: the scenario file's directory.
pub(super) fn expand(cx: &Cx, root: &mut Item, base: &Path, included: &mut Vec<Included>) -> Res<()> {
    let Val::Table(entries) = &mut root.val else { return Ok(()) };
    for entry in entries.iter_mut().filter(|entry| SECTIONS.contains(&entry.key.as_str())) {
        let key = entry.key.clone();
        match &mut entry.item.val {
            Val::Table(section) => expand_section(cx, &key, section, base, included)?,
            Val::Array(items) => {
                for (index, item) in items.iter_mut().enumerate() {
                    if let Val::Table(section) = &mut item.val {
                        expand_section(cx, &format!("{key}[{index}]"), section, base, included)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn expand_section(cx: &Cx, path: &str, section: &mut Vec<Entry>, base: &Path, included: &mut Vec<Included>) -> Res<()> {
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
    let entries = connector_json(&shown, &text, index)?;
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
    let fail = |offset: usize, problem: String| {
        let (line, column) = line_col(text, offset);
        ScenarioError { message: format!("{name}:{line}:{column}: {problem}") }
    };
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
