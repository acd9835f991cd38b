//! The shape of the source tree, checked: no module cycles among sibling modules, no
//! hand-written source file over 800 lines, no hand-written function over 150 lines,
//! and no file that points readers into a directory outside the repository.
//!
//! A module "uses" a sibling when its code (tests and comments left out) names it
//! through `crate::` or `super::`. Two siblings that use each other, directly or around a loop, are a cycle:
//! neither can be read, tested or replaced without the other.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Files that are generated or hold tests, not hand-written program logic.
const EXEMPT_FROM_LENGTH: &[&str] = &["src/tokenize/tables.rs"];
const MAX_LINES: usize = 800;

/// The most lines a hand-written function may span, from its `fn` line to its closing
/// brace (test modules left out).
const MAX_FN_LINES: usize = 150;

/// The workspace root (this package is `cli/`).
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The source folders of the workspace's packages: the library, the command line, the
/// Python bindings.
const PACKAGE_SOURCES: &[&str] = &["src", "cli/src", "python/src"];

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

/// The modules of one package's source folder, by path.
fn source_modules(package: &str) -> BTreeMap<Vec<String>, String> {
    let src = repo().join(package);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .iter()
        .map(|f| (module_path(&src, f), std::fs::read_to_string(f).unwrap()))
        .collect()
}

#[test]
fn no_module_cycles() {
    for package in PACKAGE_SOURCES {
        let found = cycles(&sibling_edges(&source_modules(package)));
        assert!(found.is_empty(), "module cycles in {package}: {found:?}");
    }
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

/// The library is a package of its own, without the command line: no `cli` feature (its one
/// feature, `internals`, opens the stages to the command line and its tests), none
/// of the command line's crates among its dependencies, and the test command checks that
/// it builds alone. (That the command line uses only the library's public API is the
/// compiler's to hold: it is another package.)
#[test]
fn the_library_builds_without_the_command_line() {
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let deps = manifest
        .split("\n[dependencies]\n")
        .nth(1)
        .expect("the library's [dependencies]")
        .split("\n[")
        .next()
        .unwrap();
    for name in ["anyhow", "clap", "indicatif", "mimalloc"] {
        assert!(
            !deps.lines().any(|l| l.starts_with(&format!("{name} "))),
            "the library depends on {name}"
        );
    }
    // One feature only, `internals` (the stages, for the command line, its tests, the
    // fuzz targets and the benchmarks), and not a default one.
    let features = manifest
        .split("\n[features]\n")
        .nth(1)
        .map(|t| t.split("\n[").next().unwrap())
        .unwrap_or("");
    let declared: Vec<&str> = features
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    assert_eq!(
        declared,
        ["internals = []"],
        "the library has features other than `internals`"
    );
    let test = std::fs::read_to_string(repo().join("scripts/test.sh")).unwrap();
    assert!(
        test.lines()
            .any(|l| l.starts_with("cargo check -p bertqa ")),
        "scripts/test.sh no longer checks the library alone"
    );
}

/// A `pub` item that nothing outside the crate can reach is `pub(crate)`: the lint
/// `unreachable_pub` says so, and the test script's clippy run (`-D warnings`) fails on
/// it. This keeps both in place.
#[test]
fn unreachable_pub_items_fail_the_build() {
    let lib = std::fs::read_to_string(repo().join("src/lib.rs")).unwrap();
    assert!(
        lib.contains("#![warn(unreachable_pub)]"),
        "src/lib.rs lost the lint"
    );
    let test = std::fs::read_to_string(repo().join("scripts/test.sh")).unwrap();
    assert!(
        test.lines()
            .any(|l| l.starts_with("cargo clippy") && l.contains("-D warnings")),
        "scripts/test.sh no longer runs clippy with -D warnings"
    );
}

/// The hand-written program files of every package (tests and generated files left out): each
/// path relative to the repository, and its text.
fn hand_written_sources() -> Vec<(String, String)> {
    let root = repo();
    let mut files = Vec::new();
    for package in PACKAGE_SOURCES {
        rust_files(&root.join(package), &mut files);
    }
    files
        .iter()
        .filter_map(|f| {
            let src = PACKAGE_SOURCES
                .iter()
                .map(|p| root.join(p))
                .find(|p| f.starts_with(p))
                .unwrap();
            let rel = f
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let module = module_path(&src, f);
            let skip = EXEMPT_FROM_LENGTH.contains(&rel.as_str()) || is_test_file(&module);
            (!skip).then(|| (rel, std::fs::read_to_string(f).unwrap()))
        })
        .collect()
}

#[test]
fn no_source_file_over_800_lines() {
    let mut long = Vec::new();
    for (rel, text) in hand_written_sources() {
        let lines = text.lines().count();
        if lines > MAX_LINES {
            long.push(format!("{rel}: {lines} lines"));
        }
    }
    assert!(long.is_empty(), "files over {MAX_LINES} lines: {long:?}");
}

/// `text` with every comment, string literal and character literal blanked out (their
/// newlines kept, so lines still count), leaving the braces of the code alone.
fn blank_literals(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let blank = |from: usize, to: usize, out: &mut Vec<u8>| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        let after_ident = i > 0 && ident(b[i - 1]);
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |n| i + n);
            blank(i, end, &mut out);
            i = end;
        } else if rest.starts_with(b"/*") {
            // Block comments nest.
            let (mut depth, mut j) = (0usize, i);
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(i, j, &mut out);
            i = j;
        } else if !after_ident && raw_string_start(rest).is_some() {
            let (open, hashes) = raw_string_start(rest).unwrap();
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let body = i + open;
            let end = b[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |n| body + n + close.len());
            blank(i, end, &mut out);
            i = end;
        } else if rest[0] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(i, j + 1, &mut out);
            i = j + 1;
        } else if rest[0] == b'\'' && (!after_ident || byte_prefix(b, i)) {
            // A character literal ('{', '\'', '\u{7b}', b'"'), or a lifetime or label
            // ('a).
            let end = if rest.get(1) == Some(&b'\\') {
                rest.iter().skip(2).position(|&c| c == b'\'').map(|n| n + 3)
            } else {
                let width = std::str::from_utf8(&rest[1..rest.len().min(5)])
                    .map_or(1, |t| t.chars().next().map_or(1, char::len_utf8));
                (rest.get(1 + width) == Some(&b'\'')).then_some(2 + width)
            };
            let end = end.unwrap_or(1);
            blank(i, i + end, &mut out);
            i += end;
        } else {
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the `'` at `at` follows a `b` that starts a byte literal (`b'{'`).
fn byte_prefix(b: &[u8], at: usize) -> bool {
    at > 0
        && b[at - 1] == b'b'
        && (at < 2 || !(b[at - 2].is_ascii_alphanumeric() || b[at - 2] == b'_'))
}

/// At a raw string literal (`r"…"`, `r#"…"#`, `br"…"`, `cr"…"`): the length of its
/// opening and its number of `#`.
fn raw_string_start(text: &[u8]) -> Option<(usize, usize)> {
    let prefix = match text {
        [b'r', ..] => 1,
        [b'b' | b'c', b'r', ..] => 2,
        _ => return None,
    };
    let hashes = text[prefix..].iter().take_while(|&&c| c == b'#').count();
    (text.get(prefix + hashes) == Some(&b'"')).then_some((prefix + hashes + 1, hashes))
}

/// The functions of a file's code (literals and comments blanked, see
/// [`blank_literals`]) that have a body, as (name, lines from the `fn` line to the
/// closing brace), leaving out `#[cfg(test)]` modules.
fn function_lengths(code: &str) -> Vec<(String, usize)> {
    let b = code.as_bytes();
    let line_of = |at: usize| b[..at].iter().filter(|&&c| c == b'\n').count();
    // The closing brace matching the opening one at `open`.
    let close = |open: usize| {
        let mut depth = 0usize;
        for (j, &c) in b.iter().enumerate().skip(open) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return j;
                    }
                }
                _ => {}
            }
        }
        b.len() - 1
    };
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let word_at = |at: usize, word: &str| {
        code[at..].starts_with(word)
            && (at == 0 || !ident(b[at - 1]))
            && b.get(at + word.len())
                .is_some_and(|c| c.is_ascii_whitespace())
    };
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if code[i..].starts_with("#[cfg(test)]") {
            // A test module is skipped whole.
            let item = i + "#[cfg(test)]".len();
            let next = code[item..].trim_start();
            let next = next.strip_prefix("pub(crate)").unwrap_or(next).trim_start();
            let next = next.strip_prefix("pub(super)").unwrap_or(next).trim_start();
            if next.starts_with("mod ") {
                let at = b.len() - next.len();
                match code[at..].find(['{', ';']) {
                    Some(n) if b[at + n] == b'{' => i = close(at + n) + 1,
                    _ => i = item,
                }
                continue;
            }
            i = item;
        } else if word_at(i, "fn") {
            let name_at = i + 2 + code[i + 2..].len() - code[i + 2..].trim_start().len();
            let name: String = code[name_at..]
                .chars()
                .take_while(|&c| c.is_alphanumeric() || c == '_')
                .collect();
            // A declaration without a body ends at `;` before any `{`.
            if let Some(n) = code[i..].find(['{', ';']).filter(|&n| b[i + n] == b'{') {
                let end = close(i + n);
                found.push((name, line_of(end) - line_of(i) + 1));
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    found
}

#[test]
fn no_function_over_150_lines() {
    let mut long = Vec::new();
    for (rel, text) in hand_written_sources() {
        let code = blank_literals(&text);
        for (name, lines) in function_lengths(&code) {
            if lines > MAX_FN_LINES {
                long.push(format!("{rel}: fn {name}: {lines} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines: {long:#?}"
    );
}

#[test]
fn the_length_check_counts_functions_whatever_their_literals_hold() {
    let text = r####"
fn short() {
    let open = '{';
    let s = "}}} \" {";
    let r = r#"{ "}" {"#;
    let b = br"}";
    let quote = b'"';
    let escaped = '\'';
    let unicode = '\u{7d}';
    // } a comment
    /* } /* nested { */ } */
}

fn generic<'a, T: 'a>(x: &'a T) -> &'a T {
    'outer: loop {
        break 'outer;
    }
    x
}

trait Declared {
    fn declared(&self);
}

#[cfg(test)]
mod tests {
    fn skipped() {
    }
}

fn last() {}
"####;
    let found = function_lengths(&blank_literals(text));
    let found: Vec<(&str, usize)> = found.iter().map(|(n, l)| (n.as_str(), *l)).collect();
    assert_eq!(found, [("short", 11), ("generic", 6), ("last", 1)]);
    let long = format!("fn long() {{\n{}}}\n", "    let x = \"{\";\n".repeat(200));
    assert_eq!(
        function_lengths(&blank_literals(&long)),
        [("long".to_owned(), 202)]
    );
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
        .filter(|l| !l.starts_with("cli/tests/it/architecture.rs:"))
        .collect();
    assert!(hits.is_empty(), "files pointing into ../shared: {hits:#?}");
}
