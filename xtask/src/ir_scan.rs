//! The scan for the shape LLVM miscompiles (docs/miscompilation.md).
//!
//! LLVM's x86 instruction selector folds `select %c, (load %p), (load %q)` into
//! `load (select %c, %p, %q)` without freezing `%c` (llvm/llvm-project#208611, fixed upstream by
//! #208683, not in the toolchain this project pins). When `%c` is poison the fold turns "a value
//! nobody uses" into "a load from a poison address": immediate undefined behaviour. Rust code
//! makes exactly that condition when it reads an `Option`'s discriminant from bytes another
//! variant left uninitialised: rustc marks the discriminant as 0 or 1 (`trunc nuw ... to i1`),
//! LLVM hoists the read above the test that would have skipped it, and the selector then uses
//! the raw word as an index (`shl $4; mov 0x30(%rax,%rsi)`): a wild address.
//!
//! Flagged: a `select i1 %c` between two loads of one object (fields at offsets from the same
//! base pointer) whose condition is `trunc nuw` of a loaded value that carries no `!noundef` (so
//! it may have been read from bytes no variant wrote). A load with `!noundef` was read where the
//! program itself reads it, which makes a poison condition undefined behaviour of the program, not
//! of the compiler; those are counted, not flagged.
//!
//! Counted, not flagged: the same condition choosing between loads of two objects (the selector
//! can only pick one of two real addresses with a conditional move), conditions made by `icmp`
//! (lowered with `setcc`, so the index is 0 or 1), selects of values that are not both loads.

use std::collections::BTreeMap;

/// One flagged (or merely counted) select.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    pub function: String,
    pub line: usize,
    pub select: String,
    pub condition: String,
    pub source: String,
    /// The condition's loaded value carries `!noundef`.
    pub noundef: bool,
    /// The two loads read one object (the same base pointer, at offsets): only then can the
    /// selector turn the condition into an index and the address go wild; loads of two objects
    /// are chosen with a conditional move between two real addresses.
    pub same_object: bool,
}

/// What one IR file holds of the shape.
#[derive(Debug, Default)]
pub struct Scan {
    pub functions: usize,
    pub selects_of_loads: usize,
    pub sites: Vec<Site>,
}

impl Scan {
    /// The sites LLVM can compile into a load from a wild address.
    pub fn hazards(&self) -> impl Iterator<Item = &Site> {
        self.sites.iter().filter(|site| !site.noundef && site.same_object)
    }
}

/// Scans the text of one `.ll` file.
pub fn scan(text: &str) -> Scan {
    let mut scan = Scan::default();
    let lines: Vec<&str> = text.lines().collect();
    let mut at = 0;
    while at < lines.len() {
        let Some(define) = lines[at].strip_prefix("define ") else {
            at += 1;
            continue;
        };
        let body_start = at + 1;
        let body_end = (body_start..lines.len()).find(|&index| lines[index].starts_with('}')).unwrap_or(lines.len());
        scan.functions += 1;
        let function = function_name(define).map(demangle).unwrap_or_default();
        scan_function(&mut scan, &function, &lines, body_start, body_end);
        at = body_end + 1;
    }
    scan
}

/// Scans one function's body, `lines[start..end]` (a phi may name a value defined below it, so
/// every definition is read first).
fn scan_function(scan: &mut Scan, function: &str, lines: &[&str], start: usize, end: usize) {
    let definitions: BTreeMap<&str, &str> = lines[start..end].iter().filter_map(|line| assignment(line)).collect();
    for (index, line) in lines.iter().enumerate().take(end).skip(start) {
        let Some((name, definition)) = assignment(line) else { continue };
        let Some(operands) = definition.strip_prefix("select i1 ") else { continue };
        let operands = split_operands(operands);
        let [condition, first, second, ..] = operands.as_slice() else { continue };
        let value = |operand: &str| operand.rsplit(' ').next().unwrap_or("").to_owned();
        let is_load = |operand: &str| definitions.get(value(operand).as_str()).is_some_and(|d| d.starts_with("load "));
        if !is_load(first) || !is_load(second) {
            continue;
        }
        scan.selects_of_loads += 1;
        let Some(truncation) = definitions.get(condition.trim()) else { continue };
        let Some(source) = truncated_value(truncation) else { continue };
        let Some(defined) = definitions.get(source) else { continue };
        // The truncated value is a load, or a phi of values some of which are loads (the load
        // hoisted into the blocks before): every such load must promise `!noundef`.
        let loads: Vec<&str> = if defined.starts_with("load ") {
            vec![defined]
        } else if defined.starts_with("phi ") {
            phi_values(defined)
                .filter_map(|value| definitions.get(value).copied())
                .filter(|d| d.starts_with("load "))
                .collect()
        } else {
            Vec::new()
        };
        if loads.is_empty() {
            continue;
        }
        let object = |operand: &str| {
            definitions
                .get(value(operand).as_str())
                .and_then(|load| loaded_pointer(load))
                .map(|p| root(&definitions, p))
        };
        scan.sites.push(Site {
            function: function.to_owned(),
            line: index + 1,
            select: format!("{name} = {}", strip_metadata(definition)),
            condition: format!("{} = {}", condition.trim(), strip_metadata(truncation)),
            source: format!("{source} = {}", strip_metadata(defined)),
            noundef: loads.iter().all(|load| load.contains("!noundef")),
            same_object: object(first).is_some_and(|a| Some(a) == object(second)),
        });
    }
}

/// The pointer a `load T, ptr %p, ...` reads.
fn loaded_pointer(load: &str) -> Option<&str> {
    let operands = split_operands(load.strip_prefix("load ")?);
    operands.get(1)?.strip_prefix("ptr ").map(str::trim)
}

/// The object a pointer points into: through `getelementptr`s to their base (a few levels).
fn root<'a>(definitions: &BTreeMap<&'a str, &'a str>, pointer: &'a str) -> &'a str {
    let mut pointer = pointer;
    for _ in 0..8 {
        let Some(gep) = definitions.get(pointer).and_then(|d| d.strip_prefix("getelementptr ")) else { break };
        let Some(base) = split_operands(gep).get(1).and_then(|operand| operand.strip_prefix("ptr ")) else { break };
        pointer = base.trim();
    }
    pointer
}

/// `  %x = rest` → (`%x`, `rest`).
fn assignment(line: &str) -> Option<(&str, &str)> {
    let line = line.trim_start();
    if !line.starts_with('%') {
        return None;
    }
    let (name, rest) = line.split_once(" = ")?;
    Some((name, rest))
}

/// The values of `phi i64 [ %a, %bb1 ], [ %b, %bb2 ]`.
fn phi_values(definition: &str) -> impl Iterator<Item = &str> {
    definition.split('[').skip(1).filter_map(|incoming| incoming.split(',').next()).map(str::trim)
}

/// `trunc nuw i64 %v to i1` → `%v`, only for a truncation to `i1` that promises no lost bits.
fn truncated_value(definition: &str) -> Option<&str> {
    let rest = definition.strip_prefix("trunc ")?;
    let words: Vec<&str> = rest.split_whitespace().collect();
    let to = words.iter().position(|word| *word == "to")?;
    let flags = &words[..to.checked_sub(2)?];
    let nuw = flags.contains(&"nuw");
    let to_i1 = words.get(to + 1).is_some_and(|ty| ty.trim_end_matches(',') == "i1");
    (nuw && to_i1).then(|| words[to - 1])
}

/// Splits `%c, i64 %a, i64 %b, !dbg !7` at the commas outside brackets and quotes.
fn split_operands(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut quoted, mut start) = (Vec::new(), 0i32, false, 0);
    for (at, c) in text.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '{' | '[' | '(' | '<' if !quoted => depth += 1,
            '}' | ']' | ')' | '>' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                parts.push(text[start..at].trim());
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts
}

/// The instruction without its trailing metadata (`, !dbg !12`), for the report.
fn strip_metadata(definition: &str) -> &str {
    match definition.find(", !") {
        Some(at) => &definition[..at],
        None => definition,
    }
}

/// The symbol of a `define` line: `... @"name"(` or `... @name(`.
fn function_name(define: &str) -> Option<&str> {
    let at = define.find('@')?;
    let rest = &define[at + 1..];
    if let Some(quoted) = rest.strip_prefix('"') {
        return quoted.split('"').next();
    }
    rest.split('(').next()
}

/// Rust's legacy symbol mangling back to a path (`_ZN14handoff_models5event...17h…E`), without
/// the hash; anything else unchanged.
pub fn demangle(symbol: &str) -> String {
    let Some(mut rest) = symbol.strip_prefix("_ZN") else { return symbol.to_owned() };
    let mut segments = Vec::new();
    while let Some(digits) = rest.find(|c: char| !c.is_ascii_digit()).filter(|&at| at > 0) {
        let Ok(length) = rest[..digits].parse::<usize>() else { break };
        let Some(segment) = rest.get(digits..digits + length) else { break };
        // A segment that starts with an escape is prefixed with `_` (`_$LT$`).
        segments.push(segment.strip_prefix('_').filter(|tail| tail.starts_with('$')).unwrap_or(segment));
        rest = &rest[digits + length..];
    }
    if segments.last().is_some_and(|last| last.len() == 17 && last.starts_with('h')) {
        segments.pop();
    }
    let path = segments.join("::");
    let mut out = String::with_capacity(path.len());
    let mut chars = path.as_str();
    while !chars.is_empty() {
        if let Some(rest) = chars.strip_prefix('$')
            && let Some(end) = rest.find('$')
        {
            let code = &rest[..end];
            let text = match code {
                "LT" => Some("<".to_owned()),
                "GT" => Some(">".to_owned()),
                "RF" => Some("&".to_owned()),
                "BP" => Some("*".to_owned()),
                "LP" => Some("(".to_owned()),
                "RP" => Some(")".to_owned()),
                "C" => Some(",".to_owned()),
                "SP" => Some("@".to_owned()),
                _ => code
                    .strip_prefix('u')
                    .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                    .and_then(char::from_u32)
                    .map(String::from),
            };
            if let Some(text) = text {
                out.push_str(&text);
                chars = &rest[end + 1..];
                continue;
            }
        }
        if let Some(rest) = chars.strip_prefix("..") {
            out.push_str("::");
            chars = rest;
            continue;
        }
        let c = chars.chars().next().expect("not empty");
        out.push(c);
        chars = &chars[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The function that crashed `handoff run`, as LLVM 22 left it (abridged).
    const CRASHED: &str = r#"
define void @_ZN14handoff_models8checkers8Checkers7observe17hc85e47378174a16bE(ptr %self) {
bb2.i:
  %a = getelementptr inbounds nuw i8, ptr %self, i64 56
  %b = getelementptr inbounds nuw i8, ptr %self, i64 64
  %c = getelementptr inbounds nuw i8, ptr %self, i64 48
  %_10.sroa.6.0.copyload.i = load i64, ptr %a, align 8, !dbg !113776, !alias.scope !113756
  %_10.sroa.7.0.copyload.i = load i64, ptr %b, align 8, !dbg !113776
  %_10.sroa.5.0.copyload.i = load i64, ptr %c, align 8, !dbg !113782
  %13 = trunc nuw i64 %_10.sroa.6.0.copyload.i to i1, !dbg !113782
  %spec.select12.i = select i1 %13, i64 %_10.sroa.7.0.copyload.i, i64 %_10.sroa.5.0.copyload.i, !dbg !113782
  ret void
}
define void @safe(ptr %p) {
  %0 = load i64, ptr %p, align 8, !range !1855, !noundef !13
  %a = load i64, ptr %q, align 8
  %b = load i64, ptr %r, align 8
  %4 = trunc nuw i64 %0 to i1
  %s = select i1 %4, i64 %a, i64 %b
  %x = load i64, ptr %p, align 8
  %5 = icmp eq i64 %x, 1
  %t = select i1 %5, i64 %a, i64 %b
  %6 = trunc nuw i64 %x to i1
  %u = select i1 %6, i64 %a, i64 7
  %y = load i64, ptr %p, align 8
  %7 = trunc nuw i64 %y to i1
  %v = select i1 %7, i64 %a, i64 %b
  ret void
}
"#;

    #[test]
    fn flags_the_crash_site_and_only_it() {
        let scan = scan(CRASHED);
        assert_eq!(scan.functions, 2);
        assert_eq!(scan.selects_of_loads, 4);
        let hazards: Vec<&Site> = scan.hazards().collect();
        assert_eq!(hazards.len(), 1, "{hazards:#?}");
        assert_eq!(hazards[0].function, "handoff_models::checkers::Checkers::observe");
        assert_eq!(hazards[0].line, 11);
        assert!(hazards[0].condition.starts_with("%13 = trunc nuw i64 %_10.sroa.6.0.copyload.i to i1"));
        assert!(hazards[0].same_object);
        // Counted, not flagged: a condition read where the program reads it (`!noundef`), and one
        // that may be unwritten choosing between loads of two objects.
        assert_eq!(scan.sites.len(), 3);
        assert!(scan.sites[1].noundef && !scan.sites[1].same_object);
        assert!(!scan.sites[2].noundef && !scan.sites[2].same_object);
    }

    #[test]
    fn demangles_legacy_symbols() {
        assert_eq!(
            demangle("_ZN14handoff_models5event12SourceOffset14lsn_to_confirm17h0123456789abcdefE"),
            "handoff_models::event::SourceOffset::lsn_to_confirm"
        );
        assert_eq!(
            demangle(
                "_ZN95_$LT$handoff_models..connect..ConnectWorker$u20$as$u20$handoff_models..component..Component$GT$10on_message17h0123456789abcdefE"
            ),
            "<handoff_models::connect::ConnectWorker as handoff_models::component::Component>::on_message"
        );
        assert_eq!(demangle("main"), "main");
    }

    #[test]
    fn splits_operands_outside_brackets() {
        assert_eq!(
            split_operands("%c, { i64, i64 } %a, { i64, i64 } %b, !dbg !7"),
            vec!["%c", "{ i64, i64 } %a", "{ i64, i64 } %b", "!dbg !7"]
        );
        assert_eq!(truncated_value("trunc nuw nsw i64 %v to i1"), Some("%v"));
        assert_eq!(truncated_value("trunc i64 %v to i1"), None);
        assert_eq!(truncated_value("trunc nuw i64 %v to i8"), None);
    }
}
