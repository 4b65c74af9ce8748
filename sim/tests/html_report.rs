//! The HTML report (`handoff run SCENARIO --html FILE`) in a real browser: Chromium, headless,
//! loads the written page from disk, runs its script, and prints the DOM the script left; the
//! tests read that DOM with plain string searches and fail on any uncaught script error or
//! `console.error`.
//!
//! These tests need a Chromium: `HANDOFF_CHROMIUM` if set, otherwise `chromium`,
//! `chromium-browser` or `google-chrome` on PATH. When none is there they install the Debian
//! package `chromium` with `apt-get` (as root, or through `sudo -n`); where that is impossible they
//! fail, saying so: they are never skipped.
//!
//! What Chromium prints, and what the harness makes of it (Debian's chromium 148):
//! * `--dump-dom` prints the serialised DOM on stdout once the page has loaded and the
//!   `--virtual-time-budget` has run out (timers run in virtual time, so 5 s of it pass in well
//!   under a second of real time, and a `setInterval` does not keep it waiting).
//! * `--enable-logging=stderr --v=0` puts every console message and every uncaught error on
//!   stderr as a log record `[PID:TID:MMDD/HHMMSS.micros:INFO:CONSOLE:LINE] "MESSAGE", source:
//!   URL (LINE)`; a message with newlines goes on over the following lines. Uncaught errors read
//!   `"Uncaught Error: boom"`, `"Uncaught TypeError: ..."`, `"Uncaught SyntaxError: ..."`,
//!   `"Uncaught (in promise) ..."`. A page's console messages are all logged at INFO whatever
//!   their level (`console.log` and `console.error` look the same), so the harness renders a copy
//!   of the page whose first script tags `console.error` (and failed `console.assert`) messages
//!   with [`CONSOLE_ERROR`]; that script removes itself, so the DOM is the page's own.
//! * Everything else on stderr is Chromium's own noise on a machine without a desktop: D-Bus
//!   connection errors, a GPU-process sandbox warning, Debian's launcher complaining about
//!   `/dev/shm` mounted twice. None of it is a console record, so none of it counts.
#![cfg(madsim)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The names tried on PATH, in order, when `HANDOFF_CHROMIUM` is not set.
const CHROMIUM_NAMES: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

/// How long one page may take before the browser is killed and the test fails.
const RENDER_TIMEOUT: Duration = Duration::from_secs(60);

/// What the harness's first script puts before a `console.error` message.
const CONSOLE_ERROR: &str = "handoff-test console.error:";

/// The harness's first script (see the module's doc).
const CONSOLE_ERROR_TAGGER: &str = "<script>(function () {\
var error = console.error, slice = Array.prototype.slice;\
console.error = function () { var args = slice.call(arguments); \
args.unshift(\"handoff-test console.error:\"); return error.apply(console, args); };\
console.assert = function (condition) { if (!condition) { \
console.error.apply(console, [\"Assertion failed:\"].concat(slice.call(arguments, 1))); } };\
document.currentScript.remove();\
})();</script>";

/// `name` if it is a runnable file, or the first runnable file of that name on PATH.
fn on_path(name: &str) -> Option<PathBuf> {
    let given = Path::new(name);
    if given.components().count() > 1 {
        return runnable(given).then(|| given.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(name)).find(|path| runnable(path))
}

#[cfg(unix)]
fn runnable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn runnable(path: &Path) -> bool {
    path.is_file()
}

/// The Chromium to run, or what is missing and what was tried. `HANDOFF_CHROMIUM` must name a
/// runnable file (or a program on PATH) when it is set: it is not passed over silently.
fn find_chromium() -> Result<PathBuf, String> {
    if let Some(wanted) = std::env::var_os("HANDOFF_CHROMIUM").filter(|value| !value.is_empty()) {
        let wanted = wanted.to_string_lossy().to_string();
        return on_path(&wanted).ok_or_else(|| format!("HANDOFF_CHROMIUM={wanted} is not a program that can run"));
    }
    CHROMIUM_NAMES
        .iter()
        .find_map(|name| on_path(name))
        .ok_or_else(|| format!("no Chromium: none of {} is on PATH", CHROMIUM_NAMES.join(", ")))
}

/// Finds Chromium, installing the Debian package `chromium` first if it is missing (once per test
/// process; `apt-get update` only when the install fails without it). An error says what is
/// missing and what was tried.
fn chromium() -> Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let missing = match find_chromium() {
                Ok(path) => return Ok(path),
                Err(missing) if std::env::var_os("HANDOFF_CHROMIUM").is_some_and(|value| !value.is_empty()) => {
                    return Err(missing);
                }
                Err(missing) => missing,
            };
            let root = Command::new("id").arg("-u").output().is_ok_and(|out| out.stdout.starts_with(b"0\n"));
            let apt = |args: &[&str]| {
                let mut command = if root { Command::new("apt-get") } else { Command::new("sudo") };
                if !root {
                    command.args(["-n", "apt-get"]);
                }
                command.args(args).env("DEBIAN_FRONTEND", "noninteractive").stdin(Stdio::null()).output()
            };
            let how = if root { "apt-get" } else { "sudo -n apt-get" };
            eprintln!("html_report: {missing}; installing the Debian package chromium with {how}");
            let install = ["install", "-y", "-qq", "chromium"];
            let mut installed =
                apt(&install).map_err(|error| format!("{missing}; and {how} could not run: {error}"))?;
            if !installed.status.success() {
                eprintln!("html_report: `{how} install chromium` failed; running `{how} update` first");
                let updated =
                    apt(&["update", "-qq"]).map_err(|error| format!("{missing}; and {how} could not run: {error}"))?;
                if !updated.status.success() {
                    return Err(format!(
                        "{missing}; and `{how} update` failed: {}",
                        String::from_utf8_lossy(&updated.stderr).trim()
                    ));
                }
                installed = apt(&install).map_err(|error| format!("{missing}; and {how} could not run: {error}"))?;
            }
            if !installed.status.success() {
                return Err(format!(
                    "{missing}; and `{how} install chromium` failed: {}",
                    String::from_utf8_lossy(&installed.stderr).trim()
                ));
            }
            find_chromium().map_err(|still| format!("{still}, even after `{how} install chromium` succeeded"))
        })
        .clone()
}

/// A directory of its own under the system's temporary directory, removed when dropped (however
/// the test ends).
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let path = std::env::temp_dir().join(format!(
            "handoff-{what}-{}-{}-{nanos}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        TempDir(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A page after the browser ran its scripts.
struct Rendered {
    /// The serialised DOM (`--dump-dom`).
    dom: String,
    /// The uncaught script errors and `console.error` messages, in the order they were logged,
    /// each as `MESSAGE, source: URL (LINE)`.
    script_errors: Vec<String>,
}

/// `path` as a `file://` URL.
fn file_url(path: &Path) -> String {
    let mut url = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            url.push(byte as char);
        } else {
            url.push_str(&format!("%{byte:02X}"));
        }
    }
    url
}

/// `html` with the console tagger as its first script: right after `<head>`, or after the
/// doctype, or at the start; and a byte order mark, so the page stays UTF-8 however far the
/// tagger pushes its `<meta charset>`.
fn with_console_tagger(html: &str) -> String {
    let lower = html.to_ascii_lowercase();
    let after_doctype = || {
        let start = lower.len() - lower.trim_start().len();
        let end = lower[start..].find('>')?;
        lower[start..].starts_with("<!doctype").then_some(start + end + 1)
    };
    let at = lower.find("<head>").map(|at| at + "<head>".len()).or_else(after_doctype).unwrap_or(0);
    format!("\u{feff}{}{CONSOLE_ERROR_TAGGER}{}", &html[..at], &html[at..])
}

/// Loads `html_path` (with `fragment`, like `#key=42`, or "") in headless Chromium and returns the
/// DOM once its scripts ran, with the script errors the browser logged. Each call has a fresh
/// profile in a temporary directory, removed afterwards. Panics, saying why, when there is no
/// Chromium, when it fails, or when it takes longer than a minute.
fn render(html_path: &Path, fragment: &str) -> Rendered {
    let chromium = chromium().unwrap_or_else(|missing| panic!("the browser tests need Chromium: {missing}"));
    let html = std::fs::read_to_string(html_path).unwrap_or_else(|error| panic!("{}: {error}", html_path.display()));
    let dir = TempDir::new("chromium");
    let page = dir.path().join(html_path.file_name().unwrap_or("page.html".as_ref()));
    std::fs::write(&page, with_console_tagger(&html)).unwrap_or_else(|error| panic!("{}: {error}", page.display()));
    let fragment = match fragment {
        "" => String::new(),
        _ if fragment.starts_with('#') => fragment.to_string(),
        _ => format!("#{fragment}"),
    };
    let url = format!("{}{fragment}", file_url(&page));
    let stdout_path = dir.path().join("stdout");
    let stderr_path = dir.path().join("stderr");
    let create =
        |path: &Path| std::fs::File::create(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let mut command = Command::new(&chromium);
    command
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check"])
        .arg(format!("--user-data-dir={}", dir.path().join("profile").display()))
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom", "--virtual-time-budget=5000"])
        .arg(&url)
        // Chromium keeps crash reports and caches under the home directory whatever the profile.
        .env("HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .stdin(Stdio::null())
        .stdout(create(&stdout_path))
        .stderr(create(&stderr_path));
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let started = Instant::now();
    let mut child = command.spawn().unwrap_or_else(|error| panic!("cannot run {}: {error}", chromium.display()));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap_or_else(|error| panic!("waiting for Chromium: {error}")) {
            break status;
        }
        if started.elapsed() > RENDER_TIMEOUT {
            // The browser and its helpers are one process group, the browser's own.
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "Chromium did not finish {url} within {} s; it was killed. Its stderr:\n{}",
                RENDER_TIMEOUT.as_secs(),
                tail(&std::fs::read_to_string(&stderr_path).unwrap_or_default(), 40)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let dom = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(
        status.success() && !dom.trim().is_empty(),
        "Chromium on {url}: {status}, {} bytes of DOM; its stderr:\n{}",
        dom.len(),
        tail(&stderr, 40)
    );
    Rendered { dom, script_errors: script_errors(&stderr) }
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The header of a Chromium log record, `[PID:TID:MMDD/HHMMSS.micros:SEVERITY:FILE:LINE] `, split
/// off `line`: the header's fields and the rest of the line. None for a line that does not start
/// a record (a continuation of a multi-line message, or noise from the launcher).
fn log_record(line: &str) -> Option<(Vec<&str>, &str)> {
    let (header, rest) = line.strip_prefix('[')?.split_once("] ")?;
    let fields: Vec<&str> = header.split(':').collect();
    let numeric = |field: &str| !field.is_empty() && field.bytes().all(|byte| byte.is_ascii_digit());
    let timestamp = fields.get(2)?;
    let well_formed = fields.len() >= 5
        && numeric(fields[0])
        && numeric(fields[1])
        && timestamp.split_once('/').is_some_and(|(date, time)| numeric(date) && time.contains('.'))
        && fields[3].bytes().all(|byte| byte.is_ascii_uppercase() || byte.is_ascii_digit());
    well_formed.then_some((fields, rest))
}

/// The console records on `stderr` that report an uncaught script error or a `console.error`
/// (tagged by [`CONSOLE_ERROR_TAGGER`]), each as `MESSAGE, source: URL (LINE)`.
fn script_errors(stderr: &str) -> Vec<String> {
    // Each record with the lines that continue it.
    let mut records: Vec<(bool, String)> = Vec::new();
    for line in stderr.lines() {
        match log_record(line) {
            // `CONSOLE:3` in Chromium 148; `CONSOLE(3)` in older releases.
            Some((fields, rest)) => records.push((fields[4].starts_with("CONSOLE"), rest.to_string())),
            None => {
                if let Some((_, text)) = records.last_mut() {
                    text.push('\n');
                    text.push_str(line);
                }
            }
        }
    }
    records
        .into_iter()
        .filter(|(console, _)| *console)
        .map(|(_, text)| text)
        .filter(|text| {
            let message = text.strip_prefix('"').unwrap_or(text);
            message.starts_with("Uncaught ") || message.starts_with(CONSOLE_ERROR)
        })
        .map(|text| match text.strip_prefix('"').and_then(|quoted| quoted.rsplit_once("\", source: ")) {
            Some((message, source)) => format!("{message}, source: {source}"),
            None => text,
        })
        .collect()
}

/// Runs the `handoff` binary in the repository's root.
fn handoff(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_handoff"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("the handoff binary runs")
}

// ---- Reading the DOM with string searches.

/// A start tag: its name, its attributes (values with `&quot;` and `&amp;` undone) and where it
/// starts and ends in the text.
#[derive(Debug)]
struct Tag {
    name: String,
    attributes: Vec<(String, String)>,
    start: usize,
    end: usize,
}

impl Tag {
    fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes.iter().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    fn has_class(&self, class: &str) -> bool {
        self.attribute("class").is_some_and(|classes| classes.split_whitespace().any(|one| one == class))
    }
}

/// Every start tag in `html`, in order (as serialised by the browser: double-quoted values).
fn tags(html: &str) -> Vec<Tag> {
    let bytes = html.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(offset) = html[at..].find('<') {
        let start = at + offset;
        let mut i = start + 1;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'-' || bytes[i] == b':') {
            i += 1;
        }
        if i == start + 1 || !bytes[start + 1].is_ascii_alphabetic() {
            at = start + 1;
            continue;
        }
        let name = html[start + 1..i].to_ascii_lowercase();
        let mut attributes = Vec::new();
        loop {
            while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b'/') {
                i += 1;
            }
            if i >= bytes.len() || bytes[i] == b'>' {
                break;
            }
            let key_start = i;
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() && !b"=>/".contains(&bytes[i]) {
                i += 1;
            }
            let key = html[key_start..i].to_ascii_lowercase();
            let mut value = String::new();
            if i < bytes.len() && bytes[i] == b'=' {
                i += 1;
                if i < bytes.len() && (bytes[i] == b'"' || bytes[i] == b'\'') {
                    let quote = bytes[i];
                    let value_start = i + 1;
                    i = value_start;
                    while i < bytes.len() && bytes[i] != quote {
                        i += 1;
                    }
                    value = html[value_start..i.min(bytes.len())].to_string();
                    i += 1;
                } else {
                    let value_start = i;
                    while i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b'>' {
                        i += 1;
                    }
                    value = html[value_start..i].to_string();
                }
            }
            let value = value.replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
            attributes.push((key, value));
        }
        let end = (i + 1).min(bytes.len());
        found.push(Tag { name, attributes, start, end });
        at = end;
    }
    found
}

/// `dom` with the contents of its `<script>` and `<style>` elements left out: the page's code and
/// data (which may well spell `<tr id="event-` in a string) are not what it rendered.
fn markup(dom: &str) -> String {
    let lower = dom.to_ascii_lowercase();
    let mut out = String::with_capacity(dom.len());
    let mut at = 0;
    loop {
        let next =
            ["<script", "<style"].iter().filter_map(|open| lower[at..].find(open).map(|i| (at + i, *open))).min();
        let Some((start, open)) = next else { break };
        let Some(content) = lower[start..].find('>').map(|end| start + end + 1) else { break };
        out.push_str(&dom[at..content]);
        match lower[content..].find(&format!("</{}", &open[1..])) {
            Some(end) => at = content + end,
            None => return out,
        }
    }
    out.push_str(&dom[at..]);
    out
}

/// The element whose start tag is `tag` in `html`, up to its matching end tag (or to the end of
/// the text when it has none).
fn outer<'a>(html: &'a str, tag: &Tag) -> &'a str {
    const VOID: [&str; 13] =
        ["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"];
    if VOID.contains(&tag.name.as_str()) || html[tag.start..tag.end].ends_with("/>") {
        return &html[tag.start..tag.end];
    }
    let lower = html[tag.end..].to_ascii_lowercase();
    // The next `<name` or `</name` at or after `from` that is followed by a space, `>` or `/`.
    let find = |prefix: &str, mut from: usize| -> Option<usize> {
        loop {
            let found = from + lower[from..].find(prefix)?;
            let after = found + prefix.len();
            if lower[after..].starts_with(|c: char| c.is_ascii_whitespace() || c == '>' || c == '/') {
                return Some(found);
            }
            from = after;
        }
    };
    let (open, close) = (format!("<{}", tag.name), format!("</{}", tag.name));
    let mut depth = 1;
    let mut at = 0;
    while depth > 0 {
        let Some(next_close) = find(&close, at) else { return &html[tag.start..] };
        match find(&open, at) {
            Some(next_open) if next_open < next_close => {
                depth += 1;
                at = next_open + open.len();
            }
            _ => {
                depth -= 1;
                at = next_close + close.len();
            }
        }
    }
    let end = lower[at..].find('>').map_or(lower.len(), |found| at + found + 1);
    &html[tag.start..tag.end + end]
}

/// Asserts that `axis` (the `#lsn-axis` element) has an element with each of the `wanted`
/// `data-series`: the one named, or one starting with what precedes a `*`.
fn has_series(axis: &str, wanted: &[&str]) {
    let series: Vec<String> =
        tags(axis).iter().filter_map(|tag| tag.attribute("data-series").map(str::to_string)).collect();
    for wanted in wanted {
        let found = match wanted.strip_suffix('*') {
            Some(prefix) => series.iter().any(|one| one.starts_with(prefix)),
            None => series.iter().any(|one| one == wanted),
        };
        assert!(found, "no data-series {wanted:?} in #lsn-axis; the series: {series:?}");
    }
}

/// At most `limit` characters of `text`, for an assertion message.
fn clip(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((at, _)) => format!("{}… ({} more bytes)", &text[..at], text.len() - at),
        None => text.to_string(),
    }
}

/// The ids in `html`, for a message saying what was there instead.
fn ids(html: &str) -> String {
    let ids: Vec<String> = tags(html)
        .iter()
        .filter_map(|tag| tag.attribute("id").map(|id| format!("{}#{id}", tag.name)))
        .filter(|id| !id.contains("#event-"))
        .take(60)
        .collect();
    ids.join(" ")
}

/// The element with id `id` in `html` (the DOM without scripts), with its start tag; panics,
/// listing the ids there are, when it is missing.
fn by_id<'a>(html: &'a str, id: &str) -> (Tag, &'a str) {
    let tag = tags(html)
        .into_iter()
        .find(|tag| tag.attribute("id") == Some(id))
        .unwrap_or_else(|| panic!("no element with id `{id}`; the ids there are: {}", ids(html)));
    let element = outer(html, &tag);
    (tag, element)
}

// ---- The harness itself.

#[test]
fn browser_reports_script_errors() {
    let dir = TempDir::new("html-harness");
    let broken = dir.path().join("broken.html");
    std::fs::write(
        &broken,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>broken</title></head><body>\n\
         <p>✓ static</p>\n\
         <script>console.log(\"just a log line\"); console.warn(\"just a warning\");</script>\n\
         <script>throw new Error(\"boom\")</script>\n\
         <script>console.error(\"something is off\", 7)</script>\n\
         <script>setTimeout(function () { null.field; }, 100)</script>\n\
         <script>document.body.setAttribute(\"data-rendered\", \"ok\")</script>\n\
         </body></html>\n",
    )
    .expect("the broken page is written");
    let rendered = render(&broken, "");
    let errors = &rendered.script_errors;
    assert_eq!(errors.len(), 3, "three script errors: {errors:#?}");
    assert!(errors[0].starts_with("Uncaught Error: boom, source: file://"), "{errors:#?}");
    assert!(errors[0].ends_with("broken.html (5)"), "the error's source and line: {errors:#?}");
    assert!(errors[1].starts_with(&format!("{CONSOLE_ERROR} something is off 7")), "{errors:#?}");
    assert!(errors[2].starts_with("Uncaught TypeError: Cannot read properties of null"), "{errors:#?}");
    assert!(!errors.iter().any(|error| error.contains("just a")), "console.log and console.warn are no errors");
    // The scripts after the throw still ran, the tagger left no trace, and UTF-8 stayed UTF-8.
    assert!(rendered.dom.contains("data-rendered=\"ok\""), "{}", clip(&rendered.dom, 2000));
    assert!(!rendered.dom.contains("handoff-test"), "{}", clip(&rendered.dom, 2000));
    assert!(rendered.dom.contains("✓ static"), "{}", clip(&rendered.dom, 2000));

    let clean = dir.path().join("clean page.html");
    std::fs::write(
        &clean,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><title>clean</title></head><body><ul id=\"list\"></ul>\n\
         <script>\n\
         var item = document.createElement(\"li\");\n\
         item.className = \"added\";\n\
         item.setAttribute(\"data-hash\", location.hash);\n\
         item.textContent = \"added by the script\";\n\
         document.getElementById(\"list\").appendChild(item);\n\
         console.log(\"a log line is not an error\");\n\
         </script></body></html>\n",
    )
    .expect("the clean page is written");
    let rendered = render(&clean, "#key=42");
    assert!(rendered.script_errors.is_empty(), "{:#?}", rendered.script_errors);
    let html = markup(&rendered.dom);
    let (_, list) = by_id(&html, "list");
    let items: Vec<Tag> = tags(list).into_iter().filter(|tag| tag.name == "li").collect();
    assert_eq!(items.len(), 1, "{list}");
    assert!(items[0].has_class("added"), "{list}");
    assert_eq!(items[0].attribute("data-hash"), Some("#key=42"), "the fragment reaches the page: {list}");
    // The script's own text is not markup.
    assert!(!html.contains("createElement"), "{}", clip(&html, 2000));
}

#[test]
fn script_errors_ignore_chromium_noise() {
    let stderr = "/usr/bin/chromium: 9: [: 25276203008: unexpected operator\n\
        [5057:5084:1205/180713.578567:ERROR:dbus/bus.cc:405] Failed to connect to the bus: Failed to connect to socket /run/dbus/system_bus_socket: No such file or directory\n\
        [5099:5099:1205/180713.597951:WARNING:sandbox/policy/linux/sandbox_linux.cc:404] InitializeSandbox() called with multiple threads in process gpu-process.\n\
        [5057:5057:1205/180713.924621:INFO:CONSOLE:2] \"hello from log\", source: file:///tmp/x.html (2)\n\
        [5057:5057:1205/180713.924681:INFO:CONSOLE:3] \"Uncaught Error: line one\n\
        line two\", source: file:///tmp/x.html (3)\n\
        [5057:5057:1205/180713.929540:INFO:CONSOLE(6)] \"Uncaught (in promise) TypeError: rejected\", source: file:///tmp/x.html (6)\n\
        [5057:5057:1205/180713.929540:INFO:CONSOLE:1] \"handoff-test console.error: bad\", source: file:///tmp/x.html (1)\n";
    assert_eq!(
        script_errors(stderr),
        [
            "Uncaught Error: line one\nline two, source: file:///tmp/x.html (3)",
            "Uncaught (in promise) TypeError: rejected, source: file:///tmp/x.html (6)",
            "handoff-test console.error: bad, source: file:///tmp/x.html (1)",
        ]
    );
}

// ---- The report.

/// `handoff run SCENARIO --html FILE` into a temporary directory: the directory (keep it alive
/// while the file is used), the file, and the run's output.
fn report(scenario: &str) -> (TempDir, PathBuf, Output) {
    let dir = TempDir::new("html-report");
    let out = dir.path().join("report.html");
    let out_arg = out.display().to_string();
    let args = ["run", scenario, "--html", &out_arg];
    let output = handoff(&args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "handoff {}: {}\nstderr:\n{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(out.is_file(), "handoff {} wrote no {}", args.join(" "), out.display());
    (dir, out, output)
}

/// A page that rendered without a script error and says so on its body; its markup.
fn rendered_markup(page: &Path, fragment: &str) -> String {
    let rendered = render(page, fragment);
    assert!(
        rendered.script_errors.is_empty(),
        "{} (fragment {fragment:?}) has script errors:\n{}",
        page.display(),
        rendered.script_errors.join("\n")
    );
    let html = markup(&rendered.dom);
    let body = tags(&html).into_iter().find(|tag| tag.name == "body").expect("a <body> in the DOM");
    assert_eq!(
        body.attribute("data-rendered"),
        Some("ok"),
        "the script did not finish drawing (<body data-rendered=\"ok\">); the body starts: {}",
        clip(&html[body.start..], 1500)
    );
    html
}

/// The offences against "self-contained" in `html`: a URL to fetch from the network, a stylesheet
/// link, a script from a file.
fn fetches(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    for tag in tags(html) {
        for (key, value) in &tag.attributes {
            let value = value.trim().to_ascii_lowercase();
            let remote = value.starts_with("http://") || value.starts_with("https://") || value.starts_with("//");
            if (key == "src" || key == "href" || key == "xlink:href") && remote {
                found.push(format!("<{} {key}=\"{value}\">", tag.name));
            }
        }
        if tag.name == "link" && tag.attribute("rel").is_some_and(|rel| rel.to_ascii_lowercase().contains("stylesheet"))
        {
            found.push(format!("a <link rel=stylesheet> to {:?}", tag.attribute("href")));
        }
        if tag.name == "script" && tag.attribute("src").is_some() {
            found.push(format!("a <script src={:?}>", tag.attribute("src")));
        }
    }
    for needle in ["url(http", "url(\"http", "url('http", "@import"] {
        if html.contains(needle) {
            found.push(format!("`{needle}` in the page"));
        }
    }
    found
}

#[test]
fn the_report_of_a_restart_during_the_snapshot_has_every_part() {
    let (_dir, page, output) = report("scenarios/claims-restart-during-snapshot.toml");
    let text = String::from_utf8_lossy(&output.stdout);
    for section in ["timeline", "findings (1)", "prediction held: I2 no resurrection was violated, as predicted"] {
        assert!(text.contains(section), "--html keeps the text report on stdout; missing {section:?}:\n{text}");
    }

    let file = std::fs::read_to_string(&page).expect("the report is UTF-8");
    let offences = fetches(&markup(&file));
    assert!(offences.is_empty(), "the page is not self-contained: {offences:#?}");

    let html = rendered_markup(&page, "");
    let offences = fetches(&html);
    assert!(offences.is_empty(), "the rendered page fetches: {offences:#?}");
    let all = tags(&html);

    by_id(&html, "verdict");

    // Findings link to their moment and their key.
    let (_, findings) = by_id(&html, "findings");
    let links: Vec<Tag> =
        tags(findings).into_iter().filter(|tag| tag.name == "a" && tag.has_class("finding")).collect();
    assert!(!links.is_empty(), "no <a class=\"finding\"> in #findings: {}", clip(findings, 3000));
    for link in &links {
        let href = link.attribute("href").unwrap_or_default();
        assert!(href.starts_with("#event-"), "a finding links to {href:?}, not #event-N: {}", clip(findings, 3000));
        assert!(link.attribute("data-key").is_some(), "a finding without data-key: {}", clip(findings, 3000));
        let target = &href[1..];
        assert!(
            all.iter().any(|tag| tag.attribute("id") == Some(target)),
            "a finding links to #{target}, which is no element's id"
        );
    }

    // Swimlanes, one per process, with the faults marked.
    let (svg, lanes) = by_id(&html, "swimlanes");
    assert_eq!(svg.name, "svg", "#swimlanes is an <svg>, not a <{}>", svg.name);
    let processes: Vec<String> = tags(lanes)
        .iter()
        .filter(|tag| tag.name == "g" && tag.has_class("lane"))
        .filter_map(|tag| tag.attribute("data-process").map(str::to_string))
        .collect();
    for process in ["pg1", "connect", "kafka", "sink"] {
        assert!(
            processes.iter().any(|one| one == process),
            "no <g class=\"lane\" data-process=\"{process}\">; the lanes: {processes:?}"
        );
    }
    assert!(
        all.iter().any(|tag| tag.has_class("fault-marker")),
        "no element with class fault-marker; the ids: {}",
        ids(&html)
    );

    // The positions on one LSN axis.
    let (svg, axis) = by_id(&html, "lsn-axis");
    assert_eq!(svg.name, "svg", "#lsn-axis is an <svg>, not a <{}>", svg.name);
    // No stored offset here: this run never flushes one (offset.flush.interval.ms=60000, and the
    // worker dies first), which is its point; the invalidated slot's run below has one.
    has_series(axis, &["wal-insert:pg1", "restart-lsn:pg1:*", "confirmed-flush:pg1:*", "kafka-end", "sink-checkpoint"]);
    // The legend says so rather than leave it out.
    assert!(
        html.contains("stored-offset:claims-connector: never set"),
        "the legend does not say the stored offset was never set; the ids: {}",
        ids(&html)
    );
    let (svg, _) = by_id(&html, "retained-wal");
    assert_eq!(svg.name, "svg", "#retained-wal is an <svg>, not a <{}>", svg.name);

    // The health signals: the streaming metrics and the states.
    let (svg, health) = by_id(&html, "health");
    assert_eq!(svg.name, "svg", "#health is an <svg>, not a <{}>", svg.name);
    has_series(
        health,
        &["milliseconds-behind-source:claims-connector", "milliseconds-since-last-event:claims-connector"],
    );
    for field in ["connector_state", "task_state"] {
        assert!(
            tags(health).iter().any(|tag| tag.has_class("state-band") && tag.attribute("data-state") == Some(field)),
            "#health draws no {field} band: {}",
            clip(health, 2000)
        );
    }
    assert!(
        html.contains("heartbeat-age:claims-connector: no heartbeat record"),
        "the legend does not say there was no heartbeat; the ids: {}",
        ids(&html)
    );

    // One key followed across every process.
    let (select, _) = by_id(&html, "follow-key");
    assert_eq!(select.name, "select", "#follow-key is a <select>, not a <{}>", select.name);
    let (_, key_events) = by_id(&html, "key-events");
    assert!(tags(key_events).iter().any(|tag| tag.name == "li"), "#key-events has no <li>: {}", clip(key_events, 2000));

    // Every line of the timeline.
    let (table, timeline) = by_id(&html, "timeline");
    assert_eq!(table.name, "table", "#timeline is a <table>, not a <{}>", table.name);
    let rows = tags(timeline)
        .iter()
        .filter(|tag| tag.name == "tr" && tag.attribute("id").is_some_and(|id| id.starts_with("event-")))
        .count();
    assert!(rows > 0, "no <tr id=\"event-N\"> in #timeline: {}", clip(timeline, 2000));
}

#[test]
fn a_fragment_follows_a_key() {
    let (_dir, page, _) = report("scenarios/claims-restart-during-snapshot.toml");
    let html = rendered_markup(&page, "#key=42");
    let (tag, key_events) = by_id(&html, "key-events");
    assert_eq!(tag.attribute("data-key"), Some("42"), "#key=42 does not follow key 42: {}", clip(key_events, 1500));
    assert!(
        tags(key_events).iter().any(|tag| tag.name == "li"),
        "#key-events has no <li> for key 42: {}",
        clip(key_events, 2000)
    );
}

#[test]
fn the_report_of_an_invalidated_slot_shows_the_cap() {
    // The connector stays stopped while a 2 GB burst passes max_slot_wal_keep_size (1 GB): the
    // burst's checkpoint invalidates the slot at t=50s (wal_status lost).
    let (_dir, page, output) = report("scenarios/claims-slot-cap-stopped-connector.toml");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("wal_status lost"), "the run no longer invalidates its slot:\n{text}");
    let html = rendered_markup(&page, "");
    let (_, axis) = by_id(&html, "lsn-axis");
    // The connector flushes its offset every 10 s until it is stopped at t=40s.
    has_series(axis, &["stored-offset:*", "restart-lsn:pg1:*", "confirmed-flush:pg1:*"]);
    let (_, retained) = by_id(&html, "retained-wal");
    assert!(
        tags(retained).iter().any(|tag| tag.has_class("cap")),
        "#retained-wal draws no max_slot_wal_keep_size (an element with class cap): {}",
        clip(retained, 3000)
    );
    assert!(
        html.contains("lost"),
        "the rendered page (its scripts left out) never says `lost`; the ids: {}",
        ids(&html)
    );
}

#[test]
fn html_into_a_missing_directory_is_bad_input() {
    let dir = TempDir::new("html-missing");
    let out = dir.path().join("no-such-directory").join("report.html");
    let out_arg = out.display().to_string();
    let output = handoff(&["run", "scenarios/claims-restart-during-snapshot.toml", "--html", &out_arg]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{}; stderr:\n{stderr}", output.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let parent = out.parent().expect("a parent").display().to_string();
    assert!(
        stderr.contains(&out_arg) || stderr.contains(&parent),
        "stderr names neither {out_arg} nor {parent}:\n{stderr}"
    );
    assert!(!out.exists());
}

#[test]
fn the_followed_key_shows_why_the_finding_happened() {
    // Claim 42 is the I2 finding's key: the page follows it by default, and its events are the
    // story of the finding: read by the first snapshot, deleted, never read again by the second.
    let (_dir, page, _) = report("scenarios/claims-restart-during-snapshot.toml");
    let html = rendered_markup(&page, "");
    let (tag, key_events) = by_id(&html, "key-events");
    assert_eq!(tag.attribute("data-key"), Some("42"), "the finding's key is not followed: {}", clip(key_events, 1500));
    for line in ["delete claim 42", "REPEATABLE READ on exported snapshot", "READ COMMITTED"] {
        assert!(key_events.contains(line), "claim 42's events do not include {line:?}: {}", clip(key_events, 3000));
    }
    // Its finding marker sits on the charts.
    assert!(
        tags(&html).iter().any(|tag| tag.has_class("finding-marker")),
        "no finding-marker on the charts; the ids: {}",
        ids(&html)
    );
    // The LSN axis is labelled as PostgreSQL prints LSNs.
    let (_, axis) = by_id(&html, "lsn-axis");
    assert!(axis.contains(">0/16B"), "the LSN axis has no label like 0/16B3748: {}", clip(axis, 2000));
}

#[test]
fn the_invalidated_slot_is_marked_with_what_it_held() {
    // The 2 GB burst is what the slot held when the checkpoint invalidated it: above the 1 GB cap.
    let (_dir, page, _) = report("scenarios/claims-slot-cap-stopped-connector.toml");
    let html = rendered_markup(&page, "");
    let (_, retained) = by_id(&html, "retained-wal");
    let marker = tags(retained).into_iter().find(|tag| tag.has_class("invalidation-marker"));
    let marker = marker.unwrap_or_else(|| panic!("no invalidation-marker in #retained-wal: {}", clip(retained, 3000)));
    let text = outer(retained, &marker);
    assert!(
        text.contains("pg1:debezium lost: held 2.0"),
        "the marker does not say what the slot held: {}",
        clip(text, 1500)
    );
}

#[test]
fn writing_the_page_does_not_change_the_run() {
    let plain = handoff(&["run", "scenarios/claims-slot-cap-stopped-connector.toml"]);
    let (_dir, _, with_html) = report("scenarios/claims-slot-cap-stopped-connector.toml");
    let hash = |output: &Output| {
        String::from_utf8_lossy(&output.stdout).lines().find(|line| line.starts_with("trace hash")).map(str::to_string)
    };
    assert!(hash(&plain).is_some(), "no trace hash line:\n{}", String::from_utf8_lossy(&plain.stdout));
    assert_eq!(hash(&plain), hash(&with_html), "--html changed the run");
}

/// The sampled positions keep PostgreSQL's and Kafka's own orderings: a slot's `restart_lsn` is
/// at most its `confirmed_flush_lsn` (PostgreSQL keeps WAL from before the position it confirms),
/// both at most the server's WAL insert pointer, the last stable offsets at most the end offsets,
/// the sink's committed positions at most the end offsets; and a run that caught up ends with the
/// sink's consumer at the end of the change topics (its acceptance boundary; its group commits
/// later, on its own interval).
/// The scenario files of `scenarios/` (not its sub-folders), in name order.
fn scenario_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios"));
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("scenarios/")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn the_sampled_positions_keep_their_order() {
    use handoff_sim::timed::runner;
    let paths = scenario_files();
    assert!(paths.len() > 10, "the bundled scenarios: {paths:?}");
    for path in paths {
        let name = path.file_stem().expect("a name").to_string_lossy().to_string();
        let loaded = handoff_sim::scenario::load(&path, &[]).unwrap_or_else(|e| panic!("{e}"));
        let result = runner::run(&loaded.spec, loaded.seed);
        assert!(result.positions.len() > 2, "{name}: {} samples", result.positions.len());
        assert!(result.positions.windows(2).all(|w| w[0].at_ms < w[1].at_ms), "{name}: samples out of time order");
        assert_eq!(result.positions.last().map(|s| s.at_ms), Some(result.sim_time_ms), "{name}: no sample at the end");
        for sample in &result.positions {
            for server in sample.servers.iter().filter(|server| server.up) {
                for slot in &server.slots {
                    if let (Some(restart), Some(confirmed)) = (slot.restart_lsn, slot.confirmed_flush_lsn) {
                        assert!(restart <= confirmed, "{name} at {}: {slot:?}", sample.at_ms);
                    }
                    if let Some(confirmed) = slot.confirmed_flush_lsn {
                        assert!(
                            confirmed <= server.wal_insert_lsn,
                            "{name} at {}: {slot:?} past {}",
                            sample.at_ms,
                            server.wal_insert_lsn
                        );
                    }
                }
            }
            assert!(sample.kafka.last_stable_offsets <= sample.kafka.end_offsets, "{name} at {}", sample.at_ms);
            // In offsets, not LSNs: after a promotion the new primary's LSNs may be below what
            // the old one had streamed, so a later record can carry a lower LSN.
            assert!(sample.sink_committed_offsets <= sample.kafka.end_offsets, "{name} at {}", sample.at_ms);
        }
        if result.boundary.reached {
            let last = result.positions.last().expect("a sample");
            assert_eq!(
                last.sink_applied_lsn, last.kafka.end_lsn,
                "{name}: caught up, the sink has applied to Kafka's end"
            );
        }
    }
}

/// Every scenario of `scenarios/` (the zoo and the regressions have the same shapes) renders
/// without a script error: every fault kind, failovers, invalidated slots, the outbox, Connect
/// groups, exactly-once, backfills.
#[test]
fn every_bundled_scenario_renders() {
    let paths = scenario_files();
    let out = TempDir::new("html-every");
    let page = out.path().join("report.html");
    let page_arg = page.display().to_string();
    for path in paths {
        let scenario = path.display().to_string();
        let output = handoff(&["run", &scenario, "--html", &page_arg]);
        assert!(
            matches!(output.status.code(), Some(0 | 1)),
            "handoff run {scenario} --html: {}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let html = rendered_markup(&page, "");
        by_id(&html, "lsn-axis");
    }
}
