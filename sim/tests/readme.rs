//! Every command of the README's `sh` blocks exits as the README says (issue 16, item 14): each
//! `cargo run --release -- ARGS` (or `handoff ARGS`) line runs the test build of `handoff` with
//! ARGS, in a scratch directory where `scenarios/` and `conform/` are the repository's (so what
//! a command writes, `out/`, `seed-525.toml`, lands there), in the README's order. Each must exit
//! 0 — the README shows no command that fails — and its trailing `# comment` is checked too:
//! `holds` means no invariant violated, an invariant (`I2`) must be among those violated as
//! predicted, `fails closed` means the pipeline failed closed, as predicted.
//!
//! Left out, each for a reason the test names: `cargo test` and `cargo xtask` (not `handoff`), a
//! line that needs the shell (`$K`, `>`, a glob: the sharded sweep; `merge` is tested in
//! sweeps.rs and cli.rs), `--serve` (serves until stopped), `--against` (needs a PostgreSQL
//! server: conform_pg15.rs), and the larger bound's `--max-states 400000000` (3 GB in a release
//! build). A sweep runs at most 200 of its seeds here (the test build is slower).
#![cfg(madsim)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The most seeds a README sweep runs here.
const SEEDS_MAX: u64 = 200;

/// One README command: its words (after `cargo run --release --` or `handoff`), its trailing
/// comment, and where it is.
struct Example {
    line: usize,
    words: Vec<String>,
    comment: String,
}

/// Splits a shell line into words: single and double quotes, no expansion (a line that needs the
/// shell is recognised by the caller).
fn words(text: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut started) = (Vec::new(), String::new(), None, false);
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                started = false;
            }
            (None, c) => word.push(c),
        }
    }
    if started || !word.is_empty() {
        words.push(word);
    }
    words
}

/// The trailing comment: a `#` outside quotes after whitespace.
fn split_comment(text: &str) -> (&str, &str) {
    let mut quote = None;
    let mut previous = ' ';
    for (at, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') if previous.is_whitespace() => return (&text[..at], text[at + 1..].trim()),
            _ => {}
        }
        previous = c;
    }
    (text, "")
}

/// The README's `sh` commands, continuation lines joined; `Err` for a line left out, and why.
fn examples(readme: &str) -> Vec<Result<Example, String>> {
    let mut found = Vec::new();
    let mut in_sh = false;
    let mut pending: Option<(usize, String)> = None;
    for (index, line) in readme.lines().enumerate() {
        let number = index + 1;
        if line.trim_start().starts_with("```") {
            in_sh = line.trim() == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let (start, text) = match pending.take() {
            Some((start, before)) => (start, format!("{before} {}", line.trim())),
            None => (number, line.trim().to_string()),
        };
        if let Some(stripped) = text.strip_suffix('\\') {
            pending = Some((start, stripped.trim_end().to_string()));
            continue;
        }
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let (command, comment) = split_comment(&text);
        let command = command.trim().to_string();
        let comment = comment.to_string();
        let rest = if let Some(rest) = command.strip_prefix("cargo run --release -- ") {
            rest
        } else if let Some(rest) = command.strip_prefix("handoff ") {
            rest
        } else {
            found.push(Err(format!("README.md:{start}: `{command}` is not a handoff command")));
            continue;
        };
        let skip = if rest.contains('$') || rest.contains('>') || rest.contains('*') {
            Some("needs the shell")
        } else if rest.contains("--serve") {
            Some("serves until stopped")
        } else if rest.contains("--against") {
            Some("needs a PostgreSQL server")
        } else if rest.contains("--max-states 400000000") {
            Some("the larger bound takes 3 GB")
        } else {
            None
        };
        match skip {
            Some(why) => found.push(Err(format!("README.md:{start}: `{command}`: {why}"))),
            None => found.push(Ok(Example { line: start, words: words(rest), comment })),
        }
    }
    found
}

/// A scratch directory with the repository's scenarios and workloads.
fn workspace() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::env::temp_dir().join(format!("handoff-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    for folder in ["scenarios", "conform"] {
        std::os::unix::fs::symlink(root.join(folder).canonicalize().expect("the folder"), dir.join(folder))
            .expect("a link");
    }
    dir
}

#[test]
fn every_readme_command_exits_as_the_readme_says() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).expect("README");
    let all = examples(&readme);
    let left_out: Vec<&String> = all.iter().filter_map(|example| example.as_ref().err()).collect();
    let examples: Vec<&Example> = all.iter().filter_map(|example| example.as_ref().ok()).collect();
    assert!(examples.len() >= 14, "the README's examples were not found: {} ({left_out:?})", examples.len());
    let dir = workspace();
    for example in examples {
        let mut words = example.words.clone();
        if words.first().is_some_and(|command| command == "sweep")
            && let Some(at) = words.iter().position(|word| word == "--seeds")
            && let Some(seeds) = words.get_mut(at + 1)
        {
            let count: u64 = seeds.parse().expect("a number of seeds");
            *seeds = count.min(SEEDS_MAX).to_string();
        }
        let output = Command::new(env!("CARGO_BIN_EXE_handoff"))
            .args(&words)
            .current_dir(&dir)
            .output()
            .expect("the handoff binary runs");
        let text = String::from_utf8_lossy(&output.stdout);
        let context = format!(
            "README.md:{}: handoff {}\n{text}{}",
            example.line,
            words.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(output.status.code(), Some(0), "{context}");
        let comment = example.comment.as_str();
        let json = words.iter().any(|word| word == "--json");
        if json {
            let report: serde_json::Value = serde_json::from_str(&text).expect("one JSON object");
            assert_eq!(report["prediction"]["held"], true, "{context}");
        } else if ["run", "check", "sweep", "replay"].contains(&words[0].as_str()) {
            assert!(text.contains("\nprediction held: "), "{context}");
        }
        if comment.starts_with("holds") {
            assert!(text.contains("\nprediction held: no invariant was violated"), "{context}");
        }
        if comment.contains("fails closed") {
            assert!(text.contains("\nprediction held: the pipeline failed closed"), "{context}");
        }
        for invariant in comment
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|word| word.len() >= 2 && word.starts_with('I') && word[1..].chars().all(|c| c.is_ascii_digit()))
        {
            let held = text.lines().find(|line| line.starts_with("prediction held: ")).unwrap_or_default();
            assert!(held.contains(&format!("{invariant} ")) && held.contains("violated, as predicted"), "{context}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_readme_parser_reads_comments_quotes_and_continuations() {
    let readme = "text\n```sh\ncargo run --release -- run a.toml --set 'x=\"a b\"'   # I2, and # more\n\
                  # a comment\nhandoff check b.toml \\\n  --set c=1\ncargo test\n```\n```\nhandoff run not-sh.toml\n```\n";
    let found = examples(readme);
    assert_eq!(found.len(), 3);
    let first = found[0].as_ref().expect("a command");
    assert_eq!(
        (first.line, first.words.clone()),
        (3, vec!["run".into(), "a.toml".into(), "--set".into(), "x=\"a b\"".into()])
    );
    assert_eq!(first.comment, "I2, and # more");
    let second = found[1].as_ref().expect("a command");
    assert_eq!((second.line, second.words.join(" ")), (5, "check b.toml --set c=1".to_string()));
    assert!(found[2].as_ref().is_err_and(|why| why.contains("`cargo test` is not a handoff command")));
}
