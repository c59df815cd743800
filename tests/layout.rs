//! The layout rules of the workspace, checked on the sources as text
//! (needs no cluster, no database; part of `make test-unit`):
//!
//! - **no circle between files**: within a crate, no two files import each
//!   other, directly or around a loop. A file that needs another's names
//!   sits below it; shared types go in a leaf module both import. A
//!   module using its parents (`super::…`, up to the crate root) is no
//!   edge: a folder's `mod.rs` and its parts are one module, and the
//!   parent's use of its parts is the edge that counts.
//! - **no shipped file over [`MAX_LINES`] lines**, its `#[cfg(test)]`
//!   items not counted (tables of data excepted, each with its reason in
//!   [`DATA_TABLES`]). The test kit, tests and benches are not shipped.
//!
//! Imports are read with `syn`: `use` items and every path in the code
//! that starts at `crate`, `self`, `super`, a child module, or a name a
//! `use` brought in; test-only items (`#[cfg(test)]`) are skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The most lines a shipped source file may have outside its tests.
const MAX_LINES: usize = 600;

/// Files allowed past [`MAX_LINES`]: rule tables of data, one entry a
/// rule, where splitting would only scatter one table.
const DATA_TABLES: &[(&str, &str)] = &[
    (
        "crates/core/src/secrets/rules/saas.rs",
        "the credential detector's SaaS token rules, one entry per vendor",
    ),
    (
        "crates/core/src/secrets/rules/cloud.rs",
        "the credential detector's cloud provider rules, one entry per provider",
    ),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Each crate's source folder, as (name, `src` dir): the workspace members,
/// the binary's library, and the test kit.
fn crates() -> Vec<(String, PathBuf)> {
    let root = root();
    let mut out = vec![
        ("handoff".to_owned(), root.join("src")),
        ("handoff-testkit".to_owned(), root.join("testkit/src")),
    ];
    let mut members: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/ is readable")
        .map(|e| e.expect("a crates/ entry").path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    members.sort();
    for dir in members {
        let name = dir
            .file_name()
            .expect("a name")
            .to_string_lossy()
            .into_owned();
        out.push((format!("handoff-{name}"), dir.join("src")));
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("an entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src`: `a/b.rs` and `a/b/mod.rs` are
/// `a::b`; `lib.rs` and `main.rs` are the root.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|l| l == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// What one file refers to: full module paths (from the crate root) of
/// the names it uses.
struct Refs<'a> {
    module: &'a [String],
    children: BTreeSet<String>,
    aliases: BTreeMap<String, Vec<String>>,
    paths: Vec<Vec<String>>,
}

impl Refs<'_> {
    /// `path` from the crate root, if it starts at this crate.
    fn absolute(&self, path: &[String]) -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        let mut base: Vec<String> = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.module.to_vec(),
            "super" => {
                let mut m = self.module.to_vec();
                m.pop();
                let mut rest = rest;
                while rest.first().is_some_and(|s| s == "super") {
                    m.pop();
                    rest = &rest[1..];
                }
                m.extend(rest.iter().cloned());
                return Some(m);
            }
            name if self.children.contains(name) => {
                let mut m = self.module.to_vec();
                m.push(name.to_owned());
                m
            }
            name => self.aliases.get(name)?.clone(),
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                let mut full = prefix.clone();
                if name != "self" {
                    full.push(name.clone());
                }
                let alias = if name == "self" {
                    prefix.last().cloned().unwrap_or_default()
                } else {
                    name
                };
                self.record_use(alias, full);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                if r.ident != "self" {
                    full.push(r.ident.to_string());
                }
                self.record_use(r.rename.to_string(), full);
            }
            syn::UseTree::Glob(_) => {
                if let Some(abs) = self.absolute(prefix) {
                    self.paths.push(abs);
                }
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn record_use(&mut self, alias: String, full: Vec<String>) {
        if let Some(abs) = self.absolute(&full) {
            self.paths.push(abs.clone());
            self.aliases.insert(alias, abs);
        }
    }
}

/// Collects the `use` items (first, so aliases are known) and the paths.
fn collect<'a>(module: &'a [String], file: &syn::File) -> Refs<'a> {
    let mut refs = Refs {
        module,
        children: BTreeSet::new(),
        aliases: BTreeMap::new(),
        paths: Vec::new(),
    };
    for item in &file.items {
        match item {
            syn::Item::Mod(m) if !is_cfg_test(&m.attrs) && m.content.is_none() => {
                refs.children.insert(m.ident.to_string());
            }
            _ => {}
        }
    }
    for item in &file.items {
        if let syn::Item::Use(u) = item
            && !is_cfg_test(&u.attrs)
        {
            refs.use_tree(&mut Vec::new(), &u.tree);
        }
    }
    struct Paths<'r, 'a>(&'r mut Refs<'a>);
    impl<'ast> Visit<'ast> for Paths<'_, '_> {
        fn visit_item_use(&mut self, _: &'ast syn::ItemUse) {}
        fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
            if !is_cfg_test(&m.attrs) {
                syn::visit::visit_item_mod(self, m);
            }
        }
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            if !is_cfg_test(&f.attrs) {
                syn::visit::visit_item_fn(self, f);
            }
        }
        fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
            if !is_cfg_test(&i.attrs) {
                syn::visit::visit_item_impl(self, i);
            }
        }
        fn visit_path(&mut self, p: &'ast syn::Path) {
            let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            if segs.len() > 1
                && let Some(abs) = self.0.absolute(&segs)
            {
                self.0.paths.push(abs);
            }
            syn::visit::visit_path(self, p);
        }
    }
    let mut visitor = Paths(&mut refs);
    for item in &file.items {
        if let syn::Item::Use(_) = item {
            continue;
        }
        visitor.visit_item(item);
    }
    refs
}

/// The file that defines `path`: the longest prefix that is a module.
fn file_of<'m>(
    modules: &'m BTreeMap<Vec<String>, PathBuf>,
    path: &[String],
) -> Option<&'m PathBuf> {
    (0..=path.len()).rev().find_map(|n| modules.get(&path[..n]))
}

/// Each file's imports of other files of the same crate, with the names.
type Graph = BTreeMap<PathBuf, BTreeMap<PathBuf, BTreeSet<String>>>;

fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .filter(|f| !f.ends_with("main.rs") || f.parent() != Some(src))
        .map(|f| (module_of(src, f), f.clone()))
        .collect();
    let mut graph = Graph::new();
    for file in &files {
        let text =
            std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let module = module_of(src, file);
        let refs = collect(&module, &parsed);
        let edges = graph.entry(file.clone()).or_default();
        for path in refs.paths {
            let Some(target) = file_of(&modules, &path) else {
                continue;
            };
            let target_module = module_of(src, target);
            // A module's use of its own ancestors (the folder it is part of).
            let ancestor = target_module.len() < module.len() && module.starts_with(&target_module);
            if target == file || ancestor {
                continue;
            }
            let name = path.last().cloned().unwrap_or_default();
            edges.entry(target.clone()).or_default().insert(name);
        }
    }
    graph
}

fn reaches(graph: &Graph, from: &Path) -> BTreeSet<PathBuf> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_path_buf()];
    while let Some(f) = stack.pop() {
        for next in graph.get(&f).into_iter().flat_map(|e| e.keys()) {
            if seen.insert(next.clone()) {
                stack.push(next.clone());
            }
        }
    }
    seen
}

/// Every circle (a set of files each reaching the others), described
/// with the imports that tie it.
fn circles(graph: &Graph) -> Vec<String> {
    let reach: BTreeMap<&PathBuf, BTreeSet<PathBuf>> =
        graph.keys().map(|f| (f, reaches(graph, f))).collect();
    let mut placed = BTreeSet::new();
    let mut out = Vec::new();
    for (file, reached) in &reach {
        if placed.contains(*file) || !reached.contains(*file) {
            continue;
        }
        let members: BTreeSet<PathBuf> = reached
            .iter()
            .filter(|other| reach.get(other).is_some_and(|r| r.contains(*file)))
            .cloned()
            .collect();
        let mut text = String::new();
        for m in &members {
            placed.insert(m.clone());
            for (to, names) in graph.get(m).into_iter().flatten() {
                if members.contains(to) {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    text.push_str(&format!(
                        "\n    {} -> {}: {}",
                        shown(m),
                        shown(to),
                        names.join(", ")
                    ));
                }
            }
        }
        out.push(format!("a circle of {} files:{text}", members.len()));
    }
    out
}

fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let mut found = Vec::new();
    for (name, src) in crates() {
        for circle in circles(&graph(&src)) {
            found.push(format!("{name}: {circle}"));
        }
    }
    assert!(
        found.is_empty(),
        "files that import each other (move what both need into a leaf module):\n{}",
        found.join("\n")
    );
}

/// Lines of `text` outside `#[cfg(test)]` items.
fn lines_outside_tests(text: &str, file: &syn::File) -> usize {
    let total = text.lines().count();
    let test_lines: usize = file
        .items
        .iter()
        .filter(|item| {
            let attrs = match item {
                syn::Item::Mod(m) => &m.attrs,
                syn::Item::Fn(f) => &f.attrs,
                syn::Item::Impl(i) => &i.attrs,
                syn::Item::Use(u) => &u.attrs,
                syn::Item::Struct(s) => &s.attrs,
                syn::Item::Const(c) => &c.attrs,
                _ => return false,
            };
            is_cfg_test(attrs)
        })
        .map(|item| {
            let span = syn::spanned::Spanned::span(item);
            span.end().line - span.start().line + 1
        })
        .sum();
    total - test_lines
}

#[test]
fn no_shipped_file_is_over_the_line_limit() {
    let mut over = Vec::new();
    for (name, src) in crates() {
        if name == "handoff-testkit" {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            let rel = shown(&file);
            if DATA_TABLES.iter().any(|(path, _)| *path == rel) {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
            let lines = lines_outside_tests(&text, &parsed);
            if lines > MAX_LINES {
                over.push(format!("{rel}: {lines} lines outside its tests"));
            }
        }
    }
    assert!(
        over.is_empty(),
        "shipped files over {MAX_LINES} lines (split them by concern):\n{}",
        over.join("\n")
    );
}

/// The checks themselves can fail: a made-up pair of files that import
/// each other is a circle, and a parent's use of its child is an edge
/// while the child's use of its parent is not.
#[test]
fn the_circle_check_sees_a_circle() {
    let dir = tempfile::tempdir().expect("a temporary dir");
    let src = dir.path();
    std::fs::create_dir_all(src.join("loops")).expect("mkdir");
    let write = |name: &str, text: &str| std::fs::write(src.join(name), text).expect("write");
    write("lib.rs", "mod a;\nmod b;\nmod loops;\nmod c;\n");
    write("a.rs", "use crate::b::Thing;\npub(crate) struct Other;\n");
    write(
        "b.rs",
        "pub(crate) struct Thing;\nfn f() -> crate::a::Other { crate::a::Other }\n",
    );
    write("c.rs", "use crate::loops::plan;\n");
    write(
        "loops/mod.rs",
        "mod plan;\nuse self::plan::run;\npub(crate) const N: u8 = 1;\n",
    );
    write("loops/plan.rs", "use super::N;\npub(crate) fn run() {}\n");
    let found = circles(&graph(src));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("a.rs -> ") && found[0].contains("b.rs -> "),
        "{found:?}"
    );
    assert!(
        found[0].contains("Other") && found[0].contains("Thing"),
        "{found:?}"
    );
}
