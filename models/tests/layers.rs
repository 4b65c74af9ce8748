//! The layers of the models crate, kept: `models/src` is five folders, each a layer, and a module
//! may use only the layers below its own (docs/architecture.md):
//!
//! | layer        | may use                                   |
//! |--------------|-------------------------------------------|
//! | `core`       | `core`                                    |
//! | `components` | `core`, and its own component             |
//! | `scenario`   | `core`, `components`                      |
//! | `judge`      | `core`, `components`, `scenario`          |
//! | `exhaustive` | every layer                               |
//!
//! and no two modules use each other, directly or through others. A "module" here is a unit of
//! the crate: a file of `core`, `scenario` or `judge`, a component (a file or folder under
//! `components`, with everything inside it: the Debezium connector is part of Connect), the
//! `checkers` folder, the `world` folder. Cycles inside one unit (a folder's files using each
//! other) are allowed; between units they are not.
//!
//! The sources are parsed (syn): every path that starts with `crate::`, `super::` or `self::`
//! counts, in `use` declarations, types, expressions, patterns and macro bodies. Test modules
//! (`#[cfg(test)]`, inline or in a file of their own) are left out: a component's tests may build
//! it from a scenario.

use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

const LAYERS: [&str; 5] = ["core", "components", "scenario", "judge", "exhaustive"];

/// A module's path inside the crate (`["components", "postgres", "wal"]`).
type ModPath = Vec<String>;

/// The module path of a source file (`src/components/postgres/mod.rs` → components::postgres).
fn module_of(src: &Path, file: &Path) -> ModPath {
    let relative = file.strip_prefix(src).expect("inside src");
    let mut parts: Vec<String> = relative.iter().map(|part| part.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

/// Every `.rs` file under `dir`, in name order.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).expect("readable").map(|entry| entry.expect("an entry").path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}

/// The unit a module belongs to: `core::ids`, `components::postgres`, `judge::checkers`; the
/// crate root is its own unit.
fn unit_of(module: &[String]) -> String {
    module.iter().take(2).cloned().collect::<Vec<_>>().join("::")
}

fn layer_of(unit: &str) -> Option<usize> {
    let first = unit.split("::").next().unwrap_or("");
    LAYERS.iter().position(|layer| *layer == first)
}

/// Collects the module paths a file refers to.
struct Uses<'a> {
    here: &'a [String],
    found: Vec<ModPath>,
    /// Test modules declared here (`#[cfg(test)] mod NAME`).
    test_modules: Vec<ModPath>,
}

impl Uses<'_> {
    /// Resolves a path's leading segments to an absolute module path (without `crate`).
    fn resolve(&self, segments: &[String]) -> Option<ModPath> {
        let first = segments.first()?;
        match first.as_str() {
            "crate" => Some(segments[1..].to_vec()),
            "self" => {
                let mut path = self.here.to_vec();
                path.extend_from_slice(&segments[1..]);
                Some(path)
            }
            "super" => {
                let mut path = self.here.to_vec();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    path.pop();
                    rest = &rest[1..];
                }
                path.extend_from_slice(rest);
                Some(path)
            }
            _ => None,
        }
    }

    fn record(&mut self, segments: &[String]) {
        if let Some(path) = self.resolve(segments) {
            self.found.push(path);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                prefix.push(name.ident.to_string());
                self.record(prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(rename) => {
                prefix.push(rename.ident.to_string());
                self.record(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.record(prefix),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    /// Paths inside a macro's tokens (`matches!(x, crate::a::B)`, `format!(…, super::f())`).
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut index = 0;
        while index < trees.len() {
            match &trees[index] {
                TokenTree::Group(group) => self.tokens(group.stream()),
                TokenTree::Ident(ident) if ["crate", "super", "self"].contains(&ident.to_string().as_str()) => {
                    let mut segments = vec![ident.to_string()];
                    let mut next = index + 1;
                    while next + 2 < trees.len() + 1 {
                        let is_colons = matches!((&trees.get(next), &trees.get(next + 1)),
                            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == ':' && b.as_char() == ':');
                        match (is_colons, trees.get(next + 2)) {
                            (true, Some(TokenTree::Ident(segment))) => {
                                segments.push(segment.to_string());
                                next += 3;
                            }
                            _ => break,
                        }
                    }
                    if segments.len() > 1 {
                        self.record(&segments);
                    }
                    index = next - 1;
                }
                _ => {}
            }
            index += 1;
        }
    }
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg") && attr.meta.require_list().is_ok_and(|list| list.tokens.to_string() == "test")
    })
}

impl<'ast> Visit<'ast> for Uses<'_> {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|segment| segment.ident.to_string()).collect();
        self.record(&segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if is_cfg_test(&item.attrs) {
            // `#[cfg(test)] mod tests;`: the file is test code too.
            let mut path = self.here.to_vec();
            path.push(item.ident.to_string());
            self.test_modules.push(path);
        } else {
            syn::visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if !is_cfg_test(&item.attrs) {
            syn::visit::visit_item_fn(self, item);
        }
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if !is_cfg_test(&item.attrs) {
            syn::visit::visit_item_impl(self, item);
        }
    }
}

/// The crate's modules, and per unit the units it uses (with one file and path as evidence).
struct Graph {
    modules: BTreeSet<ModPath>,
    edges: BTreeMap<String, BTreeMap<String, String>>,
}

/// Builds the graph from (module path, source text) pairs.
fn graph(files: &[(ModPath, String, String)]) -> Result<Graph, String> {
    let modules: BTreeSet<ModPath> = files.iter().map(|(module, _, _)| module.clone()).collect();
    let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut parsed = Vec::new();
    let mut test_modules: Vec<ModPath> = Vec::new();
    for (module, name, text) in files {
        let ast = syn::parse_file(text).map_err(|error| format!("{name}: {error}"))?;
        let mut uses = Uses { here: module, found: Vec::new(), test_modules: Vec::new() };
        uses.visit_file(&ast);
        test_modules.append(&mut uses.test_modules);
        parsed.push((module, name, uses.found));
    }
    for (module, name, found) in parsed {
        if test_modules.iter().any(|test| module.starts_with(test)) {
            continue; // a test module in its own file
        }
        let from = unit_of(module);
        for path in found {
            // The longest prefix that is a module of the crate.
            let Some(target) = (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| modules.contains(p)) else {
                continue;
            };
            let to = unit_of(&target);
            if to != from && !to.is_empty() {
                edges
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| format!("{name}: {}", path.join("::")));
            }
        }
        edges.entry(from).or_default();
    }
    Ok(Graph { modules, edges })
}

/// Every use that breaks the layering, as a sentence.
fn layering_breaks(graph: &Graph) -> Vec<String> {
    let mut breaks = Vec::new();
    for (from, targets) in &graph.edges {
        let Some(from_layer) = layer_of(from) else { continue };
        for (to, evidence) in targets {
            let to_layer = layer_of(to);
            let allowed = match (LAYERS[from_layer], to_layer) {
                (_, None) => from_layer == LAYERS.len() - 1 || from.is_empty(),
                ("components", Some(layer)) => LAYERS[layer] == "core",
                (_, Some(layer)) => layer <= from_layer,
            };
            if !allowed {
                breaks.push(format!("{from} (layer {}) uses {to} ({evidence})", LAYERS[from_layer]));
            }
        }
    }
    breaks
}

/// A cycle between units, if there is one (as `a -> b -> a`).
fn cycle(graph: &Graph) -> Option<String> {
    fn visit(unit: &str, graph: &Graph, state: &mut BTreeMap<String, u8>, stack: &mut Vec<String>) -> Option<String> {
        state.insert(unit.to_string(), 1);
        stack.push(unit.to_string());
        for next in graph.edges.get(unit).into_iter().flat_map(|targets| targets.keys()) {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = stack.iter().position(|u| u == next).expect("on the stack");
                    let mut path = stack[start..].to_vec();
                    path.push(next.clone());
                    let evidence: Vec<String> =
                        path.windows(2).map(|pair| graph.edges[&pair[0]][&pair[1]].clone()).collect();
                    return Some(format!("{} (because {})", path.join(" -> "), evidence.join("; ")));
                }
                0 => {
                    if let Some(found) = visit(next, graph, state, stack) {
                        return Some(found);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(unit.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for unit in graph.edges.keys() {
        if state.get(unit.as_str()).copied().unwrap_or(0) == 0 {
            let mut stack = Vec::new();
            if let Some(found) = visit(unit, graph, &mut state, &mut stack) {
                return Some(found);
            }
        }
    }
    None
}

fn crate_graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files: Vec<(ModPath, String, String)> = sources(&src)
        .into_iter()
        .map(|file| {
            let name = file.strip_prefix(env!("CARGO_MANIFEST_DIR")).expect("in the crate").display().to_string();
            (module_of(&src, &file), name, std::fs::read_to_string(&file).expect("readable"))
        })
        .collect();
    graph(&files).expect("the sources parse")
}

#[test]
fn the_source_tree_is_the_five_layers() {
    let graph = crate_graph();
    let top: BTreeSet<String> =
        graph.modules.iter().filter(|module| module.len() == 1).map(|module| module[0].clone()).collect();
    let expected: BTreeSet<String> = LAYERS.iter().map(|layer| layer.to_string()).collect();
    assert_eq!(top, expected, "models/src holds the layers as folders and nothing else beside lib.rs");
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let breaks = layering_breaks(&crate_graph());
    assert!(breaks.is_empty(), "the layering is broken:\n  {}", breaks.join("\n  "));
}

#[test]
fn no_two_modules_use_each_other() {
    let graph = crate_graph();
    assert!(graph.edges.len() > 20, "the graph covers the crate ({} units)", graph.edges.len());
    if let Some(found) = cycle(&graph) {
        panic!("an import cycle: {found}");
    }
}

/// The checks catch what they are for (on a made-up crate).
#[test]
fn a_component_using_the_scenario_and_a_cycle_are_caught() {
    let file = |module: &str, text: &str| {
        let path: ModPath = module.split("::").filter(|s| !s.is_empty()).map(String::from).collect();
        (path, format!("src/{module}.rs"), text.to_string())
    };
    let files = vec![
        file("", ""),
        file("core", ""),
        file("core::ids", "pub struct Node;"),
        file("core::observe", "use crate::core::ids::Node; pub fn f() { let _ = crate::core::event::E; }"),
        file("core::event", "pub struct E; fn g() { matches!(1, _ if super::observe::f() == ()); }"),
        file("components", ""),
        file("components::sink", "use crate::core::ids::Node; fn f(s: crate::scenario::spec::Spec) {}"),
        file("components::kafka", "use crate::core::{ids::Node, event::E}; #[cfg(test)] mod tests;"),
        file("scenario", ""),
        file("scenario::spec", "pub struct Spec; #[cfg(test)] mod tests { use crate::judge::x; }"),
        file("components::kafka::tests", "use crate::scenario::spec::Spec;"),
    ];
    let graph = graph(&files).expect("parses");
    let breaks = layering_breaks(&graph);
    assert_eq!(breaks.len(), 1, "{breaks:?}");
    assert!(breaks[0].starts_with("components::sink (layer components) uses scenario::spec"), "{breaks:?}");
    let found = cycle(&graph).expect("observe and event use each other (one through a macro)");
    assert!(
        found.contains("core::event -> core::observe") || found.contains("core::observe -> core::event"),
        "{found}"
    );
}
