//! A fast path for the YAML that agent files and their frontmatter nearly
//! always hold: a flat mapping of `key: value` lines whose values are plain
//! one-line scalars that can only be strings or small integers, quoted
//! one-line strings, literal blocks (`|`, `|-`) or block lists of such
//! scalars. Anything else (comments, flow collections, anchors, tags,
//! tabs, continuation lines, values YAML may read as booleans, nulls or
//! floats, …) returns `None`, and the full parser reads the document.
//!
//! The tree it builds is the one [`super::parse_yaml`] builds with the
//! full parser, positions included; the tests compare both on every
//! document shape accepted here.

use super::{Key, Kind, Node};
use crate::diagnostic::Pos;

/// More top-level keys than this go to the full parser (the duplicate
/// check here is quadratic).
const MAX_ENTRIES: usize = 64;

/// The document as a tree, or `None` when it is not in the simple subset.
pub(crate) fn parse(text: &str) -> Option<Node> {
    // Tabs, carriage returns and control characters have rules of their
    // own (or are errors); so do the Unicode line and byte-order marks.
    if text.bytes().any(|b| (b < b' ' && b != b'\n') || b == 0x7f) {
        return None;
    }
    if !text.is_ascii()
        && text.chars().any(|c| {
            matches!(
                c,
                '\u{80}'
                    ..='\u{9f}' | '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
            )
        })
    {
        return None;
    }
    let lines = split_lines(text);
    let mut entries: Vec<(Key, Node)> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if is_blank(line) {
            i += 1;
            continue;
        }
        let key_len = key_len(line);
        if key_len == 0 {
            return None;
        }
        let name = &line[..key_len];
        let rest = line[key_len..].strip_prefix(':')?;
        if entries.len() >= MAX_ENTRIES || entries.iter().any(|(k, _)| k.name == name) {
            return None;
        }
        let key = Key {
            name: name.to_string(),
            pos: Pos::new(i + 1, 1),
        };
        if is_blank(rest) {
            // `key:` then a block list.
            let (node, next) = block_list(&lines, i + 1)?;
            entries.push((key, node));
            i = next;
            continue;
        }
        let value = rest.strip_prefix(' ')?.trim_start_matches(' ');
        let col = line.len() - value.len() + 1;
        let value = value.trim_end_matches(' ');
        let at = Pos::new(i + 1, col);
        let node = match value.as_bytes()[0] {
            b'|' => {
                let (s, at, next) = literal(&lines, i + 1, &value[1..])?;
                entries.push((key, Node::new(at, Kind::Str(s))));
                i = next;
                continue;
            }
            b'"' | b'\'' => Node::new(at, Kind::Str(quoted(value)?)),
            _ => Node::new(at, plain(value)?),
        };
        // A plain or quoted value continued on the next lines is not simple.
        let next = next_content(&lines, i + 1);
        if next < lines.len() && lines[next].starts_with(' ') {
            return None;
        }
        entries.push((key, node));
        i += 1;
    }
    let pos = entries.first().map_or(Pos::START, |(k, _)| k.pos);
    Some(Node::new(pos, Kind::Map(entries)))
}

/// `text.split('\n')`, collected into a list sized once (the lines are
/// found with `memchr`).
fn split_lines(text: &str) -> Vec<&str> {
    let breaks = memchr::memchr_iter(b'\n', text.as_bytes());
    let mut lines = Vec::with_capacity(breaks.count() + 1);
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', text.as_bytes()) {
        lines.push(&text[start..end]);
        start = end + 1;
    }
    lines.push(&text[start..]);
    lines
}

fn is_blank(line: &str) -> bool {
    line.bytes().all(|b| b == b' ')
}

/// The first line at or after `from` that is not blank.
fn next_content(lines: &[&str], from: usize) -> usize {
    (from..lines.len())
        .find(|&j| !is_blank(lines[j]))
        .unwrap_or(lines.len())
}

/// Length of a key of letters, digits, `_` and `-` that starts with a
/// letter or `_`, at the start of `line`.
fn key_len(line: &str) -> usize {
    let b = line.as_bytes();
    if !b
        .first()
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')
    {
        return 0;
    }
    b.iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_' || **c == b'-')
        .count()
}

/// A plain scalar that is certainly a string or a small non-negative
/// integer; `None` for anything YAML might read otherwise.
fn plain(v: &str) -> Option<Kind> {
    let first = *v.as_bytes().first()?;
    if v.contains(" #") || v.contains(": ") || v.ends_with(':') {
        return None;
    }
    if first.is_ascii_digit() {
        let digits = v.bytes().all(|c| c.is_ascii_digit());
        if !digits || v.len() > 18 || (first == b'0' && v.len() > 1) {
            return None;
        }
        return v.parse().ok().map(Kind::Int);
    }
    if !first.is_ascii_alphabetic() {
        return None;
    }
    const WORDS: &[&str] = &[
        "true", "false", "yes", "no", "y", "n", "on", "off", "null", "nan", "inf", "infinity",
    ];
    if v.len() <= 8 && WORDS.iter().any(|w| v.eq_ignore_ascii_case(w)) {
        return None;
    }
    Some(Kind::Str(v.to_string()))
}

/// A one-line quoted string without escapes.
fn quoted(v: &str) -> Option<String> {
    let q = v.as_bytes()[0];
    if v.len() < 2 || v.as_bytes()[v.len() - 1] != q {
        return None;
    }
    let inner = &v[1..v.len() - 1];
    if q == b'"' {
        return (!inner.contains(['"', '\\'])).then(|| inner.to_string());
    }
    (!inner.replace("''", "").contains('\'')).then(|| inner.replace("''", "'"))
}

/// `key:` followed by `- item` lines at one indentation. Returns the list
/// and the index of the line after it.
fn block_list(lines: &[&str], from: usize) -> Option<(Node, usize)> {
    let first = next_content(lines, from);
    let line = lines.get(first)?;
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent == 0 {
        return None;
    }
    let mut items = Vec::new();
    let mut j = first;
    let mut seq_pos = None;
    while j < lines.len() {
        let line = lines[j];
        if is_blank(line) {
            j += 1;
            continue;
        }
        let this = line.len() - line.trim_start_matches(' ').len();
        if this == 0 {
            break;
        }
        if this != indent {
            return None;
        }
        let item = line[indent..].strip_prefix("- ")?;
        let value = item.trim_start_matches(' ');
        let col = line.len() - value.len() + 1;
        let value = value.trim_end_matches(' ');
        let at = Pos::new(j + 1, col);
        seq_pos.get_or_insert(Pos::new(j + 1, indent + 1));
        let kind = match *value.as_bytes().first()? {
            b'"' | b'\'' => Kind::Str(quoted(value)?),
            _ => plain(value)?,
        };
        items.push(Node::new(at, kind));
        j += 1;
    }
    Some((Node::new(seq_pos?, Kind::Seq(items)), j))
}

/// A literal block after `key: |` (header `""` or `"-"`): the text, where
/// it starts (its first line, as the full parser says) and the index of
/// the line after it.
fn literal(lines: &[&str], from: usize, header: &str) -> Option<(String, Pos, usize)> {
    let strip = match header {
        "" => false,
        "-" => true,
        _ => return None,
    };
    // Leading empty lines are kept by YAML; not simple.
    let first = from;
    let head = lines.get(first)?;
    let indent = head.len() - head.trim_start_matches(' ').len();
    if indent == 0 || is_blank(head) {
        return None;
    }
    let mut j = from;
    let mut last = first;
    while j < lines.len() {
        let line = lines[j];
        if line.is_empty() {
            j += 1;
            continue;
        }
        let this = line.len() - line.trim_start_matches(' ').len();
        if this == line.len() {
            // Spaces only: their meaning depends on the indentation.
            return None;
        }
        if this < indent {
            break;
        }
        last = j;
        j += 1;
    }
    // Without a line break after the last line, clipping keeps none.
    if last + 1 >= lines.len() {
        return None;
    }
    let size: usize = lines[first..=last].iter().map(|l| l.len() + 1).sum();
    let mut out = String::with_capacity(size);
    for (k, line) in lines.iter().enumerate().take(last + 1).skip(first) {
        if k > first {
            out.push('\n');
        }
        out.push_str(line.get(indent..).unwrap_or(""));
    }
    if !strip {
        out.push('\n');
    }
    Some((out, Pos::new(first + 1, indent + 1), last + 1))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The full parser's tree, without the fast path.
    fn full(text: &str) -> Option<Node> {
        crate::raw::parse_yaml_full(text).ok()
    }

    /// Where the fast path accepts a document, its tree equals the full
    /// parser's; returns whether it accepted.
    fn check(text: &str) -> bool {
        match parse(text) {
            Some(fast) => {
                assert_eq!(Some(fast), full(text), "document:\n{text}");
                true
            }
            None => false,
        }
    }

    #[test]
    fn the_usual_shapes_take_the_fast_path_and_match() {
        let body = "You are careful.\nRead the code.\n\n  Indented line.\nLast.\n";
        let docs = [
            "name: a\ndescription: 'Use when: the task is big. Handles it.'\n".to_string(),
            "name: agent7\ndescription: Use it\ntools: Read, Grep, Glob, Bash(git log:*)\nmodel: sonnet\ncolor: blue\n".to_string(),
            "name: agent1\ndescription: \"Agent 1\"\ntools:\n  - Read\n  - Grep\nmaxTurns: 20\nprompt: |\n  You are.\n  Next.\n".to_string(),
            format!("name: x\nprompt: |\n{}\nother: 'it''s'\n", body.lines().map(|l| if l.is_empty() { String::new() } else { format!("    {l}") }).collect::<Vec<_>>().join("\n")),
            "name: x\nprompt: |-\n  a\n\n  b\n\n\nz: 1\n".to_string(),
            "name: x\n\n\ntools:\n\n  - Read\n  -   Write\nmaxTurns: 0\n".to_string(),
            "name: café ünïcode — ok\ndescription: 'x: y # z'\n".to_string(),
            "a_b-c: v\n_x: \"q\"\n".to_string(),
        ];
        for d in &docs {
            assert!(check(d), "not on the fast path:\n{d}");
        }
    }

    #[test]
    fn anything_else_goes_to_the_full_parser() {
        let docs = [
            "name: a # comment\n",
            "# comment\nname: a\n",
            "name: yes\n",
            "name: Null\n",
            "name: ~\n",
            "n: 012\n",
            "n: 1.5\n",
            "n: -3\n",
            "n: 99999999999999999999\n",
            "name: a\n  continued\n",
            "name:\n",
            "name:\n  nested: map\n",
            "tools: [Read, Grep]\n",
            "name: &a x\n",
            "name: !tag x\n",
            "name: \"esc\\n\"\n",
            "name: a\nname: b\n",
            "name: a\tb\n",
            "name: a\r\n",
            "prompt: |\n  no final newline",
            "prompt: |+\n  keep\n",
            "prompt: |\n\n  leading empty\n",
            "prompt: >\n  folded\n",
            "prompt: |\n  a\n   \n  b\n",
            "description: ends with colon:\n",
            "key : spaced\n",
            "---\nname: a\n",
            "tools:\n  - a\n   - b\n",
            "tools:\n  - a: b\n",
        ];
        for d in docs {
            assert!(!check(d), "fast path took:\n{d}");
        }
    }

    #[test]
    fn every_corpus_frontmatter_agrees() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/corpus/wshobson-agents");
        let mut stack = vec![dir];
        let (mut seen, mut fast) = (0, 0);
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|e| e == "md") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    if let Ok(fm) = crate::catalog::split_frontmatter(&text) {
                        seen += 1;
                        fast += usize::from(check(fm.yaml));
                    }
                }
            }
        }
        assert!(seen > 100, "{seen}");
        eprintln!("{fast} of {seen} corpus frontmatters on the fast path");
    }

    fn line() -> impl Strategy<Value = String> {
        let key = prop::sample::select(vec![
            "name",
            "description",
            "tools",
            "model",
            "x-y",
            "_k",
            "name",
        ]);
        let value = prop::sample::select(vec![
            "a",
            "Read, Grep",
            "yes",
            "No",
            "12",
            "012",
            "0",
            "-1",
            "1.5",
            "~",
            "null",
            "x: y",
            "x #y",
            "x#y",
            "'q''s'",
            "'bad'x'",
            "\"dq\"",
            "\"d\\q\"",
            "|",
            "|-",
            "|+",
            ">",
            "[a]",
            "{a: b}",
            "&a x",
            "*a",
            "!t x",
            "ok:",
            "a:b",
            "é",
            "",
        ]);
        let cont = prop::sample::select(vec![
            "",
            "  - Read",
            "  - 'x'",
            "  - 3",
            "  text",
            "    deeper",
            "",
            "  ",
            "#c",
            "- x",
        ]);
        (key, value, prop::collection::vec(cont, 0..4)).prop_map(|(k, v, c)| {
            let mut s = if v.is_empty() {
                format!("{k}:")
            } else {
                format!("{k}: {v}")
            };
            for l in c {
                s.push('\n');
                s.push_str(l);
            }
            s
        })
    }

    proptest! {
        #[test]
        fn the_fast_path_never_disagrees(lines in prop::collection::vec(line(), 1..6), nl in any::<bool>()) {
            let mut text = lines.join("\n");
            if nl {
                text.push('\n');
            }
            if let Some(fast) = parse(&text) {
                prop_assert_eq!(Some(fast), full(&text), "document:\n{}", text);
            }
        }
    }
}
