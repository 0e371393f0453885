//! No import circle between the top-level modules of any crate of the workspace (the
//! program here, the actors crate and the core): every `super::NAME` and `crate::NAME`
//! outside a comment is an edge from the module it is in to module NAME (a braced list,
//! `super::{a, b}`, gives one edge per item). A module is `src/NAME.rs` with everything
//! under `src/NAME/`; there `super::` names the module's own parts, not the crate, except
//! in `src/NAME/mod.rs`. The crate root (`lib.rs`), which declares every module, is not a
//! node; `main.rs` only calls it.
//!
//! A circle fails the test with the modules on it, in import order.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module name → the sibling modules it imports.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The files under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read a module folder") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// Module name → its text, for the crate whose sources are in `src`.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut mods: BTreeMap<String, String> = BTreeMap::new();
    for e in std::fs::read_dir(src).expect("read src/") {
        let p = e.expect("dir entry").path();
        let Some(name) = p.file_stem().and_then(|n| n.to_str()).map(str::to_string) else {
            continue;
        };
        if p.is_dir() {
            for f in rust_files(&p) {
                let text = std::fs::read_to_string(&f).expect("read a module");
                // Below the module's own mod.rs, `super::` stays inside the module.
                let text = if f == p.join("mod.rs") {
                    text
                } else {
                    text.replace("super::", "parent_::")
                };
                mods.entry(name.clone()).or_default().push_str(&text);
            }
        } else if p.extension().is_some_and(|x| x == "rs") && name != "lib" && name != "main" {
            let text = std::fs::read_to_string(&p).expect("read a module");
            mods.entry(name).or_default().push_str(&text);
        }
    }
    mods
}

/// The first identifier of each item after `super::`/`crate::` at `rest`.
fn targets(rest: &str) -> Vec<&str> {
    fn ident(s: &str) -> &str {
        let end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        &s[..end]
    }
    match rest.strip_prefix('{') {
        Some(list) => {
            let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
            for (i, c) in list.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.push(ident(list[start..i].trim_start()));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(ident(list[start..i].trim_start()));
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            out
        }
        None => vec![ident(rest)],
    }
}

fn graph(mods: &BTreeMap<String, String>) -> Graph {
    let mut g = Graph::new();
    for (name, text) in mods {
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let edges = g.entry(name.clone()).or_default();
        for prefix in ["super::", "crate::"] {
            for (at, _) in code.match_indices(prefix) {
                for t in targets(&code[at + prefix.len()..]) {
                    if t != name && mods.contains_key(t) {
                        edges.insert(t.to_string());
                    }
                }
            }
        }
    }
    g
}

/// A circle in `g`, if there is one (depth-first search, white/grey/black).
fn circle(g: &Graph) -> Option<Vec<String>> {
    fn visit<'a>(
        g: &'a Graph,
        node: &'a str,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| *n == node) {
            let mut c: Vec<String> = path[at..].iter().map(|n| n.to_string()).collect();
            c.push(node.to_string());
            return Some(c);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node);
        for next in g.get(node).into_iter().flatten() {
            if let Some(c) = visit(g, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node);
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|n| visit(g, n, &mut Vec::new(), &mut done))
}

fn assert_no_circle(crate_dir: &Path, at_least: usize) {
    let src = crate_dir.join("src");
    let mods = modules(&src);
    assert!(
        mods.len() >= at_least,
        "read {} modules from {}",
        mods.len(),
        src.display()
    );
    let g = graph(&mods);
    if let Some(c) = circle(&g) {
        panic!("import circle in {}: {}", src.display(), c.join(" -> "));
    }
}

#[test]
fn no_import_circle_between_modules() {
    assert_no_circle(Path::new(env!("CARGO_MANIFEST_DIR")), 20);
}

#[test]
fn no_import_circle_in_the_library_crates() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    assert_no_circle(&workspace.join("actors"), 12);
    assert_no_circle(&workspace.join("net"), 5);
    assert_no_circle(&workspace.join("redis"), 4);
    assert_no_circle(&workspace, 15);
}

/// The checker itself finds a circle, through a braced list and across three modules,
/// and ignores comments and the module's own name.
#[test]
fn a_circle_is_found() {
    let mods: BTreeMap<String, String> = [
        ("a", "use super::{b::X, c};\n// use super::d;\n"),
        ("b", "fn f() { super::c::g() }\nuse crate::b::Y;\n"),
        ("c", "use super::a::Z;\n"),
        ("d", "use super::a::Z;\n"),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_string(), t.to_string()))
    .collect();
    let g = graph(&mods);
    assert_eq!(g["a"], BTreeSet::from(["b".to_string(), "c".to_string()]));
    assert_eq!(g["b"], BTreeSet::from(["c".to_string()]));
    assert_eq!(
        circle(&g),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    let acyclic: Graph = [("a", vec!["b"]), ("b", vec![]), ("c", vec!["a", "b"])]
        .into_iter()
        .map(|(n, e)| (n.to_string(), e.into_iter().map(String::from).collect()))
        .collect();
    assert_eq!(circle(&acyclic), None);
}
