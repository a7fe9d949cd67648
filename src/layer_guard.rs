//! The guard of the module layers (a test only).
//!
//! `docs/architecture.md` draws the top-level modules as rows of a table,
//! highest layer first. These tests read that table and every non-test
//! source file, and fail on a `crate::` path that points at a module in the
//! same row or a higher one (an upward import, which is what makes cycles),
//! on a module missing from the table, and on a new circle of sibling files
//! inside one module. Test code (`#[cfg(test)]` modules, test-only files)
//! may import anything.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

/// Circles of sibling files inside one module that are still there, each
/// with the reason; a new circle fails, and so does a listed one that is
/// gone (remove it here). Names are the module and its files, sorted.
const KNOWN_FILE_CIRCLES: &[(&str, &[&str], &str)] = &[
    (
        "catalog",
        &["builtin", "load"],
        "the built-in agents are loaded by the catalog's loader, which asks \
         builtin for the embedded files; to split: the embedded file list \
         as a leaf",
    ),
    (
        "catalog",
        &["hooks", "resolve"],
        "frontmatter hooks are resolved with the agent's other fields; \
         to split: the shared field helpers as a leaf",
    ),
    (
        "cli",
        &["control", "emit", "headless", "run", "wire"],
        "headless mode, the run command and the protocol types still \
         share helpers both ways (control's answers use the wire's \
         response, the emitter's accounts and headless's listings, and \
         headless dispatches to control); to split by concern (parsing, \
         session preparation, emitters, wire types)",
    ),
    (
        "config",
        &["env", "files", "load"],
        "the layer loader and the layer readers call each other; to split: \
         the layer list as a leaf",
    ),
    (
        "fleet",
        &["state", "wire"],
        "the fenced task state and the messages that carry it share types",
    ),
    (
        "mcp",
        &["client", "sse", "task"],
        "the client's connection types are used by the SSE transport and \
         task polling, which the client starts",
    ),
    (
        "runtime",
        &[
            "ask_user",
            "compact",
            "listing",
            "problem",
            "prompt",
            "resume",
            "session",
            "tasks",
            "texts",
            "todos",
            "transcript",
            "worktree",
        ],
        "the session and the texts it renders still refer to each other's \
         types; to split: the texts' domain types below the texts",
    ),
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The layer table of docs/architecture.md: module → row (0 = lowest).
fn layers() -> BTreeMap<String, usize> {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let row = Regex::new(r"^\|\s*(\d+)\s*\|\s*`(\w+)`\s*\|").unwrap();
    let mut out = BTreeMap::new();
    for line in doc.lines() {
        if let Some(c) = row.captures(line) {
            let layer: usize = c[1].parse().unwrap();
            let module = c[2].to_string();
            assert!(
                out.insert(module.clone(), layer).is_none(),
                "docs/architecture.md lists `{module}` twice"
            );
        }
    }
    assert!(
        out.len() > 10,
        "no layer table found in docs/architecture.md"
    );
    out
}

/// One source file: path relative to `src/`, text with test code blanked
/// (line numbers kept).
struct Source {
    rel: String,
    text: String,
}

/// Every non-test `.rs` file under `src/`.
fn sources() -> Vec<Source> {
    let src = src_dir();
    let mut files = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    // Files declared as `#[cfg(test)] mod NAME;` are test code (at the
    // file a `#[path = "…"]` names, relative to the declaring file's folder).
    let test_decl = Regex::new(r"#\[cfg\(test\)\]\s*((?:#\[[^\]]*\]\s*)*)mod\s+(\w+)\s*;").unwrap();
    let path_attr = Regex::new(r#"#\[path\s*=\s*"([^"]+)"\]"#).unwrap();
    let mut test_files = BTreeSet::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let dir = if path
            .file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs")
        {
            path.parent().unwrap().to_path_buf()
        } else {
            path.with_extension("")
        };
        for c in test_decl.captures_iter(&text) {
            if let Some(p) = path_attr.captures(&c[1]) {
                test_files.insert(path.parent().unwrap().join(&p[1]));
                continue;
            }
            test_files.insert(dir.join(format!("{}.rs", &c[2])));
            test_files.insert(dir.join(&c[2]).join("mod.rs"));
        }
    }
    files
        .into_iter()
        .filter(|p| !test_files.contains(p))
        .map(|p| Source {
            rel: p.strip_prefix(&src).unwrap().to_string_lossy().into_owned(),
            text: code_only(&std::fs::read_to_string(&p).unwrap()),
        })
        .collect()
}

/// `text` with comments, string and char literals and `#[cfg(test)]`
/// modules replaced by spaces (line breaks kept, so lines still count).
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out: Vec<char> = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut Vec<char>, s: &[char]| {
        out.extend(s.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    while i < b.len() {
        let rest = &b[i..];
        let starts = |p: &str| p.chars().enumerate().all(|(k, c)| rest.get(k) == Some(&c));
        if starts("//") {
            let end = rest.iter().position(|&c| c == '\n').unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if starts("/*") {
            let mut depth = 0;
            let mut k = 0;
            while k < rest.len() {
                if rest[k] == '/' && rest.get(k + 1) == Some(&'*') {
                    depth += 1;
                    k += 2;
                } else if rest[k] == '*' && rest.get(k + 1) == Some(&'/') {
                    depth -= 1;
                    k += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    k += 1;
                }
            }
            blank(&mut out, &rest[..k]);
            i += k;
        } else if let Some(len) = raw_string_len(rest, i == 0 || !ident(b[i - 1])) {
            blank(&mut out, &rest[..len]);
            i += len;
        } else if rest[0] == '"' {
            let mut k = 1;
            while k < rest.len() && rest[k] != '"' {
                k += if rest[k] == '\\' { 2 } else { 1 };
            }
            let k = (k + 1).min(rest.len());
            blank(&mut out, &rest[..k]);
            i += k;
        } else if rest[0] == '\'' && char_literal_len(rest).is_some() {
            let k = char_literal_len(rest).unwrap();
            blank(&mut out, &rest[..k]);
            i += k;
        } else {
            out.push(rest[0]);
            i += 1;
        }
    }
    let code: String = out.into_iter().collect();
    blank_test_modules(&code)
}

fn ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Length of a raw string literal (`r"…"`, `r#"…"#`, `br"…"`) at the start.
fn raw_string_len(s: &[char], boundary: bool) -> Option<usize> {
    if !boundary {
        return None;
    }
    let mut k = usize::from(s.first() == Some(&'b'));
    if s.get(k) != Some(&'r') {
        return None;
    }
    k += 1;
    let hashes = s[k..].iter().take_while(|&&c| c == '#').count();
    k += hashes;
    if s.get(k) != Some(&'"') {
        return None;
    }
    k += 1;
    while k < s.len() {
        if s[k] == '"'
            && s[k + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return Some(k + 1 + hashes);
        }
        k += 1;
    }
    Some(s.len())
}

/// Length of a char literal (`'a'`, `'\n'`, `'\u{1F600}'`) at the start;
/// `None` for a lifetime.
fn char_literal_len(s: &[char]) -> Option<usize> {
    if s.get(1) == Some(&'\\') {
        let end = s.iter().skip(3).position(|&c| c == '\'')? + 3;
        (end < 13).then_some(end + 1)
    } else {
        (s.get(2) == Some(&'\'')).then_some(3)
    }
}

/// `code` with every `#[cfg(test)] … mod NAME { … }` block blanked.
fn blank_test_modules(code: &str) -> String {
    let head = Regex::new(
        r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{",
    )
    .unwrap();
    let mut out = String::with_capacity(code.len());
    let mut at = 0;
    for m in head.find_iter(code) {
        if m.start() < at {
            continue;
        }
        out.push_str(&code[at..m.start()]);
        let mut depth = 1;
        let mut end = m.end();
        for (k, c) in code[m.end()..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                end = m.end() + k + 1;
                break;
            }
            end = code.len();
        }
        out.extend(
            code[m.start()..end]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' }),
        );
        at = end;
    }
    out.push_str(&code[at..]);
    out
}

/// The top-level module a file belongs to.
fn top_module(rel: &str) -> &str {
    rel.split('/').next().unwrap().trim_end_matches(".rs")
}

/// Every `crate::NAME` a file's code names, with its line: plain paths and
/// the first names of `use crate::{a::…, b}` groups.
fn crate_paths(text: &str) -> Vec<(usize, String, String)> {
    let path = Regex::new(r"\bcrate::(\w+)((?:::\w+)*)").unwrap();
    let group = Regex::new(r"\buse\s+crate::\{").unwrap();
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let mut out = Vec::new();
    for c in path.captures_iter(text) {
        let at = c.get(0).unwrap().start();
        out.push((line_of(at), c[1].to_string(), c[0].to_string()));
    }
    for m in group.find_iter(text) {
        // Top-level entries of the group: split on commas at depth 1.
        let mut depth = 1;
        let mut start = m.end();
        for (k, ch) in text[m.end()..].char_indices() {
            let at = m.end() + k;
            match ch {
                '{' => depth += 1,
                '}' | ',' if depth == 1 => {
                    let entry = text[start..at].trim();
                    let name: String = entry.chars().take_while(|&c| ident(c)).collect();
                    if !name.is_empty() {
                        out.push((line_of(start), name.clone(), format!("crate::{entry}")));
                    }
                    start = at + 1;
                    if ch == '}' {
                        break;
                    }
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
    }
    out
}

#[test]
fn top_level_modules_import_only_lower_layers() {
    let layers = layers();
    let sources = sources();
    let modules: BTreeSet<&str> = sources
        .iter()
        .map(|s| top_module(&s.rel))
        .filter(|m| !matches!(*m, "lib" | "main"))
        .collect();
    let missing: Vec<_> = modules
        .iter()
        .filter(|m| !layers.contains_key(**m))
        .collect();
    assert!(
        missing.is_empty(),
        "top-level modules missing from the layer table of docs/architecture.md: {missing:?}"
    );
    let gone: Vec<_> = layers
        .keys()
        .filter(|m| !modules.contains(m.as_str()))
        .collect();
    assert!(
        gone.is_empty(),
        "docs/architecture.md lists modules that src/ does not have: {gone:?}"
    );
    let mut upward = Vec::new();
    for s in &sources {
        let from = top_module(&s.rel);
        let Some(&own) = layers.get(from) else {
            continue;
        };
        for (line, to, path) in crate_paths(&s.text) {
            let Some(&theirs) = layers.get(to.as_str()) else {
                continue;
            };
            if to != from && theirs >= own {
                upward.push(format!(
                    "src/{}:{line}: `{path}`: {from} (layer {own}) imports {to} (layer {theirs})",
                    s.rel
                ));
            }
        }
    }
    upward.sort();
    upward.dedup();
    assert!(
        upward.is_empty(),
        "imports that point up or sideways (docs/architecture.md):\n{}",
        upward.join("\n")
    );
}

#[test]
fn sibling_files_inside_a_module_form_no_new_circle() {
    let sources = sources();
    let mut by_module: BTreeMap<&str, Vec<&Source>> = BTreeMap::new();
    for s in &sources {
        if s.rel.contains('/') {
            by_module.entry(top_module(&s.rel)).or_default().push(s);
        }
    }
    let reexport = Regex::new(r"pub(?:\([^)]*\))?\s+use\s+(\w+)::(\{[^}]*\}|\w+)").unwrap();
    let word = Regex::new(r"\w+").unwrap();
    let mut found: BTreeSet<(String, Vec<String>)> = BTreeSet::new();
    for (module, files) in by_module {
        // Direct children only: `module/NAME.rs`.
        let name_of = |s: &Source| -> Option<String> {
            let rest = s.rel.strip_prefix(&format!("{module}/"))?;
            (!rest.contains('/') && rest != "mod.rs")
                .then(|| rest.trim_end_matches(".rs").to_string())
        };
        let siblings: BTreeSet<String> = files.iter().filter_map(|s| name_of(s)).collect();
        // Names `mod.rs` re-exports from a sibling count as that sibling.
        let mut owner: BTreeMap<String, String> = BTreeMap::new();
        if let Some(face) = files.iter().find(|s| s.rel == format!("{module}/mod.rs")) {
            for c in reexport.captures_iter(&face.text) {
                if siblings.contains(&c[1]) {
                    for w in word.find_iter(&c[2]) {
                        owner
                            .entry(w.as_str().to_string())
                            .or_insert_with(|| c[1].to_string());
                    }
                }
            }
        }
        let refs = Regex::new(&format!(r"\b(?:super|crate::{module})::(\w+)")).unwrap();
        let groups = Regex::new(&format!(
            r"\buse\s+(?:super|crate::{module})::\{{([^;]*)\}}"
        ))
        .unwrap();
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for s in &files {
            let Some(me) = name_of(s) else { continue };
            let mut names: BTreeSet<String> = refs
                .captures_iter(&s.text)
                .map(|c| c[1].to_string())
                .collect();
            for g in groups.captures_iter(&s.text) {
                names.extend(word.find_iter(&g[1]).map(|w| w.as_str().to_string()));
            }
            let edges = graph.entry(me.clone()).or_default();
            for n in names {
                let target = if siblings.contains(&n) {
                    Some(n)
                } else {
                    owner.get(&n).cloned()
                };
                if let Some(t) = target.filter(|t| *t != me) {
                    edges.insert(t);
                }
            }
        }
        for circle in strongly_connected(&graph) {
            found.insert((module.to_string(), circle));
        }
    }
    let known: BTreeSet<(String, Vec<String>)> = KNOWN_FILE_CIRCLES
        .iter()
        .map(|(m, files, _)| (m.to_string(), files.iter().map(|f| f.to_string()).collect()))
        .collect();
    let new: Vec<_> = found.difference(&known).collect();
    let fixed: Vec<_> = known.difference(&found).collect();
    assert!(
        new.is_empty(),
        "new circles of files inside a module (split them, or list one in \
         KNOWN_FILE_CIRCLES with the reason): {new:?}"
    );
    assert!(
        fixed.is_empty(),
        "circles listed in KNOWN_FILE_CIRCLES that are gone: remove them: {fixed:?}"
    );
}

/// The strongly connected components of more than one node, each sorted.
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Kosaraju: order by finish time, then walk the reversed graph.
    fn finish(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        seen: &mut BTreeSet<String>,
        order: &mut Vec<String>,
    ) {
        if !seen.insert(n.to_string()) {
            return;
        }
        for m in g.get(n).into_iter().flatten() {
            finish(m, g, seen, order);
        }
        order.push(n.to_string());
    }
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    for n in graph.keys() {
        finish(n, graph, &mut seen, &mut order);
    }
    let mut reversed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, bs) in graph {
        for b in bs {
            reversed.entry(b.clone()).or_default().insert(a.clone());
        }
    }
    let mut assigned = BTreeSet::new();
    let mut out = Vec::new();
    for n in order.iter().rev() {
        if assigned.contains(n) {
            continue;
        }
        let mut comp = Vec::new();
        let mut stack = vec![n.clone()];
        while let Some(x) = stack.pop() {
            if !assigned.insert(x.clone()) {
                continue;
            }
            comp.push(x.clone());
            stack.extend(reversed.get(&x).into_iter().flatten().cloned());
        }
        if comp.len() > 1 {
            comp.sort();
            out.push(comp);
        }
    }
    out
}

#[test]
fn the_guard_sees_through_comments_strings_and_test_modules() {
    let text = "use crate::a::X;\nlet q = '\\'';\n// crate::b\nlet s = \"crate::c\";\nlet r = r#\"crate::d\"#;\n\
                #[cfg(test)]\nmod tests {\n    use crate::e;\n}\nuse crate::{f::Y, g};\n";
    let names: Vec<String> = crate_paths(&code_only(text))
        .into_iter()
        .map(|(_, n, _)| n)
        .collect();
    assert_eq!(names, ["a", "f", "g"]);
    let lines: Vec<usize> = crate_paths(&code_only(text))
        .into_iter()
        .map(|(l, _, _)| l)
        .collect();
    assert_eq!(lines, [1, 10, 10]);
}
