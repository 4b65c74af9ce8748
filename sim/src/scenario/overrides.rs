//! `--set PATH=VALUE`: paths, and putting a value at one in the tree.

use super::fields::{Cx, Res, join};
use super::tree::{At, Entry, Item, Val, convert};
use toml::de::DeValue;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Step {
    Key(String),
    Index(usize),
}

const MAX_SET_DEPTH: usize = 32;

/// Applies one `--set`; returns its path and value.
pub(super) fn apply_set(cx: &Cx, root: &mut Item, index: usize, arg: &str) -> Res<(Vec<Step>, Item)> {
    let at = At::Set(index);
    let Some((path, value)) = arg.split_once('=') else {
        return Err(cx.err(at, arg.trim(), "expected PATH=VALUE, e.g. sink.apply=naive-upsert"));
    };
    let path = path.trim();
    let field = if path.is_empty() { "\"\"" } else { path };
    let steps = parse_path(path).map_err(|problem| cx.err(at, field, format!("malformed path: {problem}")))?;
    let value = match DeValue::parse(value.trim()) {
        Ok(parsed) => convert(&parsed, Some(index)),
        Err(_) => Item { val: Val::Str(value.to_owned()), at },
    };
    set_in(root, &steps, value.clone()).map_err(|(field, problem)| cx.err(at, &field, problem))?;
    Ok((steps, value))
}

/// `a.b."c.d"[0].e`: keys (bare, or quoted without escapes), each followed by any number of `[n]`.
pub(super) fn parse_path(path: &str) -> Result<Vec<Step>, String> {
    let chars: Vec<char> = path.chars().collect();
    let mut steps = Vec::new();
    let mut i = 0;
    loop {
        let key: String = match chars.get(i) {
            Some(&quote @ ('"' | '\'')) => {
                let Some(length) = chars[i + 1..].iter().position(|c| *c == quote) else {
                    return Err("unterminated quoted key".into());
                };
                i += length + 2;
                chars[i - length - 1..i - 1].iter().collect()
            }
            Some(&c) if is_bare(c) => {
                let length = chars[i..].iter().take_while(|c| is_bare(**c)).count();
                i += length;
                chars[i - length..i].iter().collect()
            }
            Some(c) => return Err(format!("expected a key at character {}, found `{c}`", i + 1)),
            None => return Err("expected a key".into()),
        };
        steps.push(Step::Key(key));
        while chars.get(i) == Some(&'[') {
            let digits: String = chars[i + 1..].iter().take_while(|c| c.is_ascii_digit()).collect();
            i += digits.len() + 2;
            match digits.parse() {
                Ok(index) if chars.get(i - 1) == Some(&']') => steps.push(Step::Index(index)),
                _ => return Err("an index is a whole number in brackets, like [0]".into()),
            }
        }
        if steps.len() > MAX_SET_DEPTH {
            return Err(format!("more than {MAX_SET_DEPTH} steps"));
        }
        match chars.get(i) {
            None => return Ok(flat_names(steps)),
            Some('.') => i += 1,
            Some(c) => return Err(format!("unexpected `{c}` at character {}", i + 1)),
        }
    }
}

/// The sections whose keys are the real systems' dotted property names, and that hold no
/// sub-tables: a path into one names a property with its dots, as Debezium and Kafka write it
/// (`connector.snapshot.mode` is `connector."snapshot.mode"`, `connector[1].slot.name` is
/// `connector[1]."slot.name"`).
const FLAT_SECTIONS: [&str; 5] = ["connector", "connect", "kafka", "sink", "consumer"];

fn flat_names(steps: Vec<Step>) -> Vec<Step> {
    let section = matches!(steps.first(), Some(Step::Key(key)) if FLAT_SECTIONS.contains(&key.as_str()));
    let start = 1 + usize::from(matches!(steps.get(1), Some(Step::Index(_))));
    let rest = steps.get(start..).unwrap_or_default();
    if !section || rest.len() < 2 || !rest.iter().all(|step| matches!(step, Step::Key(_))) {
        return steps;
    }
    let name = rest
        .iter()
        .map(|step| match step {
            Step::Key(key) => key.as_str(),
            Step::Index(_) => "",
        })
        .collect::<Vec<_>>()
        .join(".");
    let mut joined = steps[..start].to_vec();
    joined.push(Step::Key(name));
    joined
}

pub(super) fn is_bare(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Puts `value` at `steps` under `root`, creating missing tables. An error names the path
/// where the walk stopped, and the problem.
pub(super) fn set_in(root: &mut Item, steps: &[Step], value: Item) -> Result<(), (String, String)> {
    let (mut item, mut path) = (root, String::new());
    for (n, step) in steps.iter().enumerate() {
        let kind = item.val.kind();
        item = match (step, &mut item.val) {
            (Step::Key(key), Val::Table(entries)) => {
                path = join(&path, key);
                let position = entries.iter().position(|entry| entry.key == *key);
                let position = match (position, steps.get(n + 1)) {
                    (Some(position), _) => position,
                    (None, Some(Step::Index(index))) => {
                        return Err((
                            format!("{path}[{index}]"),
                            format!("index {index} is past the end: {path} has no entries"),
                        ));
                    }
                    (None, _) => {
                        let table = Item { val: Val::Table(Vec::new()), at: value.at };
                        entries.push(Entry { key: key.clone(), key_at: value.at, item: table });
                        entries.len() - 1
                    }
                };
                &mut entries[position].item
            }
            (Step::Index(index), Val::Array(items)) => {
                let count = items.len();
                let Some(element) = items.get_mut(*index) else {
                    return Err((
                        format!("{path}[{index}]"),
                        format!(
                            "index {index} is past the end: {path} has {count} {}",
                            if count == 1 { "entry" } else { "entries" }
                        ),
                    ));
                };
                path = format!("{path}[{index}]");
                element
            }
            (Step::Key(_), _) => return Err((path, format!("is {kind}, not a table"))),
            (Step::Index(_), _) => return Err((path, format!("is {kind}, not an array"))),
        };
    }
    *item = value;
    Ok(())
}
