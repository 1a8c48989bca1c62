//! The catalog's import rules, checked on its source: every `crate::`,
//! `super::` and `self::` path in `catalog/src` (in `use` items, code,
//! attributes such as `#[utoipa::path(...)]`, serde's `with = "..."`
//! strings and macro calls; `#[cfg(test)]` items and doc comments aside)
//! is an import from the module that writes it to the module it names.
//!
//! Two rules, the README's Architecture section in code:
//!
//! - **Layers.** Every top-level module belongs to one layer of
//!   [`LAYERS`]; an import may point to its own layer or one below, never
//!   up. Features import each other only along [`FEATURE_EDGES`].
//! - **No circles.** Inside every module, its children (files, folders,
//!   inline modules) import each other without a circle, so each can be read
//!   and changed on its own. A child importing its parent's own items, or a
//!   parent its children, is how a folder is built, not a circle.
//!
//! A new top-level module must be given a layer here, or the test fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// The catalog's layers, lowest first.
const LAYERS: &[(&str, &[&str])] = &[
    ("plumbing", &["http", "duration", "auth", "store"]),
    (
        "features",
        &["providers", "offers", "buying", "osb", "feed", "webui"],
    ),
    ("backends", &["backends"]),
    (
        "top",
        &[
            "config", "metrics", "openapi", "routes", "ops", "demo", "server",
        ],
    ),
];

/// The imports allowed between features (importer, imported): buying
/// sells offers of providers, the Open Service Broker API is a way to buy,
/// the feed carries offers, the web UI reads which ways to buy are on.
/// Any other is a feature reaching sideways.
const FEATURE_EDGES: &[(&str, &str)] = &[
    ("offers", "providers"),
    ("buying", "offers"),
    ("buying", "providers"),
    ("osb", "buying"),
    ("osb", "offers"),
    ("osb", "providers"),
    ("feed", "offers"),
    ("webui", "buying"),
    ("webui", "osb"),
];

/// A module, as its path from the crate root (`[]` is the root).
type Module = Vec<String>;

/// One import: who, whom, and the file it is written in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Import {
    from: Module,
    to: Module,
    file: String,
}

/// The module a source file defines, from its path under `src/`.
fn module_of(rel: &str) -> Module {
    let rel = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().split_whitespace().eq(["test"]))
    })
}

/// Collects the relative paths written in one file (and its inline
/// modules), each as the module it is written in plus the path's words.
struct Collector {
    /// The module the visitor is in (inline `mod x { }` pushes `x`).
    module: Module,
    /// Every module seen, inline ones included.
    modules: BTreeSet<Module>,
    found: Vec<(Module, Vec<String>)>,
}

impl Collector {
    fn path(&mut self, words: Vec<String>) {
        if matches!(
            words.first().map(String::as_str),
            Some("crate" | "super" | "self")
        ) {
            self.found.push((self.module.clone(), words));
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut words = prefix.clone();
                if n.ident != "self" {
                    words.push(n.ident.to_string());
                }
                self.path(words);
            }
            syn::UseTree::Rename(r) => {
                let mut words = prefix.clone();
                words.push(r.ident.to_string());
                self.path(words);
            }
            syn::UseTree::Glob(_) => self.path(prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    /// Paths inside unparsed tokens (attribute arguments, macro calls):
    /// `a :: b :: c` sequences, and string literals that hold a path
    /// (serde's `with = "crate::..."`).
    fn tokens(&mut self, tokens: TokenStream) {
        let mut words: Vec<String> = Vec::new();
        let mut colons = 0;
        for tt in tokens {
            match tt {
                TokenTree::Ident(i) => {
                    if colons != 2 {
                        self.flush(&mut words);
                    }
                    words.push(i.to_string());
                    colons = 0;
                    continue;
                }
                TokenTree::Punct(p) if p.as_char() == ':' => {
                    colons += 1;
                    continue;
                }
                TokenTree::Punct(_) => {}
                TokenTree::Group(g) => {
                    self.flush(&mut words);
                    self.tokens(g.stream());
                }
                TokenTree::Literal(l) => {
                    let s = l.to_string();
                    let inner = s.trim_matches('"');
                    if s.starts_with('"')
                        && inner.contains("::")
                        && inner
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                    {
                        self.path(inner.split("::").map(str::to_string).collect());
                    }
                }
            }
            self.flush(&mut words);
            colons = 0;
        }
        self.flush(&mut words);
    }

    fn flush(&mut self, words: &mut Vec<String>) {
        if !words.is_empty() {
            self.path(std::mem::take(words));
        }
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            _ => &[],
        };
        if !is_cfg_test(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.module.push(m.ident.to_string());
        self.modules.insert(self.module.clone());
        syn::visit::visit_item_mod(self, m);
        self.module.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.path(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }

    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if a.path().is_ident("doc") {
            return;
        }
        if let syn::Meta::List(l) = &a.meta {
            self.tokens(l.tokens.clone());
        }
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
    }
}

/// Every import between the crate's modules in `files` (path under `src/`,
/// source). A path is resolved to the longest known module it starts with.
fn imports(files: &[(String, String)]) -> Result<(BTreeSet<Module>, Vec<Import>), String> {
    let mut modules = BTreeSet::new();
    let mut found = Vec::new();
    for (rel, text) in files {
        let file = syn::parse_file(text).map_err(|e| format!("{rel}: {e}"))?;
        let module = module_of(rel);
        let mut c = Collector {
            module: module.clone(),
            modules: BTreeSet::from([module]),
            found: Vec::new(),
        };
        c.visit_file(&file);
        modules.extend(c.modules);
        found.extend(c.found.into_iter().map(|(m, w)| (rel.clone(), m, w)));
    }
    let mut out = BTreeSet::new();
    for (file, from, words) in found {
        let mut at: Module = Vec::new();
        let mut here = from.clone();
        let mut rest = words.as_slice();
        match rest.first().map(String::as_str) {
            Some("crate") => rest = &rest[1..],
            _ => {
                while let Some(w) = rest.first() {
                    match w.as_str() {
                        "self" => {}
                        "super" => {
                            here.pop();
                        }
                        _ => break,
                    }
                    rest = &rest[1..];
                }
                at = here;
            }
        }
        for w in rest {
            at.push(w.clone());
            if !modules.contains(&at) {
                at.pop();
                break;
            }
        }
        out.insert(Import { from, to: at, file });
    }
    Ok((modules, out.into_iter().collect()))
}

fn layer_of(top: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, ms)| ms.contains(&top))
}

/// Imports that point up the layers, or sideways between features other
/// than along [`FEATURE_EDGES`]; and top-level modules without a layer.
fn upward(modules: &BTreeSet<Module>, imports: &[Import]) -> Vec<String> {
    let mut out = Vec::new();
    for m in modules.iter().filter(|m| m.len() == 1) {
        if layer_of(&m[0]).is_none() {
            out.push(format!("`{}` has no layer in LAYERS", m[0]));
        }
    }
    for i in imports {
        let (Some(a), Some(b)) = (i.from.first(), i.to.first()) else {
            continue;
        };
        if a == b {
            continue;
        }
        let (Some(la), Some(lb)) = (layer_of(a), layer_of(b)) else {
            continue;
        };
        let features = layer_of("providers");
        let sideways =
            la == lb && Some(la) == features && !FEATURE_EDGES.contains(&(a.as_str(), b.as_str()));
        if lb > la || sideways {
            out.push(format!(
                "{}: `{a}` ({}) imports `{b}` ({})",
                i.file, LAYERS[la].0, LAYERS[lb].0
            ));
        }
    }
    out
}

/// For each module, the circles among its children.
fn circles(imports: &[Import]) -> Vec<String> {
    // parent → (child → children it imports, with a file that does).
    let mut graphs: BTreeMap<Module, BTreeMap<String, BTreeMap<String, String>>> = BTreeMap::new();
    for i in imports {
        let common = i.from.iter().zip(&i.to).take_while(|(a, b)| a == b).count();
        if common == i.from.len() || common == i.to.len() {
            continue;
        }
        graphs
            .entry(i.from[..common].to_vec())
            .or_default()
            .entry(i.from[common].clone())
            .or_default()
            .entry(i.to[common].clone())
            .or_insert_with(|| i.file.clone());
    }
    let mut out = Vec::new();
    for (parent, graph) in &graphs {
        for comp in strongly_connected(graph) {
            let place = if parent.is_empty() {
                "the crate root".to_string()
            } else {
                parent.join("::")
            };
            let arrows: Vec<String> = comp
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|(b, _)| comp.contains(*b))
                        .map(move |(b, f)| format!("{a} -> {b} ({f})"))
                })
                .collect();
            out.push(format!("circle in {place}: {}", arrows.join(", ")));
        }
    }
    out
}

/// Tarjan's algorithm: the components of more than one node.
fn strongly_connected(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<BTreeSet<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flat_map(|m| m.keys()) {
            if !s.index.contains_key(w.as_str()) {
                visit(s, w);
                let lw = s.low[w.as_str()];
                let lv = s.low[v];
                s.low.insert(v, lv.min(lw));
            } else if s.on.contains(w.as_str()) {
                let iw = s.index[w.as_str()];
                let lv = s.low[v];
                s.low.insert(v, lv.min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// Every problem in `files`: upward imports, then circles.
fn check(files: &[(String, String)]) -> Vec<String> {
    match imports(files) {
        Ok((modules, imports)) => {
            let mut out = upward(&modules, &imports);
            out.extend(circles(&imports));
            out
        }
        Err(e) => vec![e],
    }
}

/// The library's source files (the binary's `main.rs` is its own crate).
fn read_src(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            read_src(&path, root, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root)
                .map_err(std::io::Error::other)?
                .to_string_lossy()
                .replace('\\', "/");
            if rel != "main.rs" {
                out.push((rel, std::fs::read_to_string(&path)?));
            }
        }
    }
    Ok(())
}

#[test]
fn catalog_imports_point_down_without_circles() -> std::io::Result<()> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_src(&src, &src, &mut files)?;
    files.sort();
    let problems = check(&files);
    assert!(
        problems.is_empty(),
        "imports that break the catalog's layers (see catalog/tests/layers.rs):\n{}",
        problems.join("\n")
    );
    Ok(())
}

#[cfg(test)]
mod checker {
    use super::*;

    fn files(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn a_circle_between_a_features_files_is_found() {
        let problems = check(&files(&[
            ("lib.rs", "pub mod buying;"),
            ("buying/mod.rs", "pub mod a; pub mod b; pub struct State;"),
            // Through an attribute and a serde string, as utoipa and serde write them.
            (
                "buying/a.rs",
                "#[utoipa::path(body = super::b::View)] pub fn f() {}",
            ),
            (
                "buying/b.rs",
                "use super::State; #[serde(with = \"crate::buying::a\")] pub struct View;",
            ),
        ]));
        assert_eq!(
            problems,
            ["circle in buying: a -> b (buying/a.rs), b -> a (buying/b.rs)"]
        );
    }

    #[test]
    fn an_upward_import_is_found() {
        let problems = check(&files(&[
            ("lib.rs", "pub mod http; pub mod offers; pub mod feed;"),
            ("http/mod.rs", "use crate::{offers::{Offer}};"),
            (
                "offers/mod.rs",
                "pub struct Offer; fn f() { crate::feed::g() }",
            ),
            ("feed/mod.rs", "use crate::offers::Offer; pub fn g() {}"),
        ]));
        assert_eq!(
            problems,
            [
                "http/mod.rs: `http` (plumbing) imports `offers` (features)",
                "offers/mod.rs: `offers` (features) imports `feed` (features)",
                "circle in the crate root: feed -> offers (feed/mod.rs), offers -> feed (offers/mod.rs)",
            ]
        );
    }

    #[test]
    fn tests_docs_and_parents_are_not_imports() {
        let problems = check(&files(&[
            ("lib.rs", "pub mod http; pub mod offers;"),
            (
                "http/mod.rs",
                "//! See [`crate::offers`].\n#[cfg(test)] mod tests { use crate::offers::Offer; }",
            ),
            ("offers/mod.rs", "pub mod a; pub struct Offer; use a::X;"),
            ("offers/a.rs", "use super::Offer; pub struct X;"),
        ]));
        assert!(problems.is_empty(), "{problems:?}");
    }

    #[test]
    fn an_unplaced_module_is_found() {
        let problems = check(&files(&[("lib.rs", "pub mod extra;"), ("extra.rs", "")]));
        assert_eq!(problems, ["`extra` has no layer in LAYERS"]);
    }
}
