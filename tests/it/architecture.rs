//! The shape of the source tree, checked: no module cycles among sibling modules, no
//! hand-written source file over 800 lines, and no file that points readers into a
//! directory outside the repository.
//!
//! A module "uses" a sibling when its code (tests and comments left out) names it
//! through `crate::` or `super::`. Two siblings that use each other, directly or around a loop, are a cycle:
//! neither can be read, tested or replaced without the other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Files that are generated or hold tests, not hand-written program logic.
const EXEMPT_FROM_LENGTH: &[&str] = &["src/tokenize/tables.rs"];
const MAX_LINES: usize = 800;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/a/b.rs` and `src/a/b/mod.rs` → `["a", "b"]`; the crate roots → `[]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn is_test_file(module: &[String]) -> bool {
    module.last().is_some_and(|m| m == "tests")
}

/// The code of a file without comments (a doc link is not a dependency) and without its
/// `#[cfg(test)] mod tests { … }` block (by convention the last item of a file).
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The identifier path that starts at `text` (`a::b::c`), split.
fn path_at(text: &str) -> Vec<String> {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(text.len());
    text[..end]
        .split("::")
        .take_while(|s| {
            !s.is_empty() && s.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        })
        .map(str::to_owned)
        .collect()
}

fn sibling_edges(modules: &BTreeMap<Vec<String>, String>) -> BTreeSet<(Vec<String>, Vec<String>)> {
    let exists = |m: &[String]| modules.keys().any(|k| k.starts_with(m));
    let mut edges = BTreeSet::new();
    for (module, text) in modules {
        if is_test_file(module) {
            continue;
        }
        let code = code_of(text);
        let code = code.as_str();
        for (i, _) in code.match_indices("crate::") {
            let target = path_at(&code[i + "crate::".len()..]);
            if let Some(d) = (0..module.len().min(target.len())).find(|&d| module[d] != target[d]) {
                let (a, b) = (module[..=d].to_vec(), target[..=d].to_vec());
                if exists(&b) {
                    edges.insert((a, b));
                }
            }
        }
        for (i, _) in code.match_indices("super::") {
            let Some(name) = path_at(&code[i + "super::".len()..]).into_iter().next() else {
                continue;
            };
            let Some((_, parent)) = module.split_last() else {
                continue;
            };
            let mut b = parent.to_vec();
            b.push(name);
            if &b != module && exists(&b) {
                edges.insert((module.clone(), b));
            }
        }
    }
    edges
}

/// Strongly connected components of more than one module (Tarjan's algorithm).
fn cycles(edges: &BTreeSet<(Vec<String>, Vec<String>)>) -> Vec<Vec<String>> {
    let mut adjacency: BTreeMap<&Vec<String>, Vec<&Vec<String>>> = BTreeMap::new();
    for (a, b) in edges {
        adjacency.entry(a).or_default().push(b);
        adjacency.entry(b).or_default();
    }
    struct State<'a> {
        index: BTreeMap<&'a Vec<String>, (usize, usize)>,
        stack: Vec<&'a Vec<String>>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(
        v: &'a Vec<String>,
        adjacency: &BTreeMap<&'a Vec<String>, Vec<&'a Vec<String>>>,
        s: &mut State<'a>,
    ) {
        s.index.insert(v, (s.next, s.next));
        s.next += 1;
        s.stack.push(v);
        for &w in &adjacency[v] {
            if !s.index.contains_key(w) {
                visit(w, adjacency, s);
                let low = s.index[v].1.min(s.index[w].1);
                s.index.get_mut(v).unwrap().1 = low;
            } else if s.stack.contains(&w) {
                let low = s.index[v].1.min(s.index[w].0);
                s.index.get_mut(v).unwrap().1 = low;
            }
        }
        if s.index[v].0 == s.index[v].1 {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                component.push(w.join("::"));
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in adjacency.keys() {
        if !state.index.contains_key(*v) {
            visit(v, &adjacency, &mut state);
        }
    }
    state.found
}

fn source_modules() -> BTreeMap<Vec<String>, String> {
    let src = repo().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .iter()
        .map(|f| (module_path(&src, f), std::fs::read_to_string(f).unwrap()))
        .collect()
}

#[test]
fn no_module_cycles() {
    let found = cycles(&sibling_edges(&source_modules()));
    assert!(found.is_empty(), "module cycles: {found:?}");
}

#[test]
fn the_cycle_check_sees_a_cycle() {
    let modules: BTreeMap<Vec<String>, String> = [
        (vec!["a".into()], "use crate::b::Thing;".to_owned()),
        (vec!["b".into()], "use crate::a::Other;".to_owned()),
        (vec!["c".into()], "use crate::a::Other;".to_owned()),
        (vec!["c".into(), "x".into()], "use super::y::Z;".to_owned()),
        (vec!["c".into(), "y".into()], "use super::x::W;".to_owned()),
    ]
    .into();
    let found = cycles(&sibling_edges(&modules));
    assert_eq!(
        found,
        vec![
            vec!["a".to_owned(), "b".to_owned()],
            vec!["c::x".to_owned(), "c::y".to_owned()]
        ]
    );
}

#[test]
fn no_source_file_over_800_lines() {
    let root = repo();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut long = Vec::new();
    for f in files {
        let rel = f
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let module = module_path(&root.join("src"), &f);
        if EXEMPT_FROM_LENGTH.contains(&rel.as_str()) || is_test_file(&module) {
            continue;
        }
        let lines = std::fs::read_to_string(&f).unwrap().lines().count();
        if lines > MAX_LINES {
            long.push(format!("{rel}: {lines} lines"));
        }
    }
    assert!(long.is_empty(), "files over {MAX_LINES} lines: {long:?}");
}

#[test]
fn no_tracked_file_points_outside_the_repository() {
    let out = std::process::Command::new("git")
        .args([
            "grep",
            "-n",
            "-I",
            "-E",
            r"\.\./shared|shared/(spec|protocol|reference|data)/",
        ])
        .current_dir(repo())
        .output()
        .expect("git grep");
    let hits = String::from_utf8_lossy(&out.stdout);
    let hits: Vec<&str> = hits
        .lines()
        .filter(|l| !l.starts_with("tests/it/architecture.rs:"))
        .collect();
    assert!(hits.is_empty(), "files pointing into ../shared: {hits:#?}");
}
