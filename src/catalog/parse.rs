//! Agent files to definitions: picks the format by extension, turns the
//! text into a raw [`Node`] tree (YAML frontmatter, YAML or TOML) and hands
//! it to the resolver. Also parses `--agents JSON`. Frontmatter that is not
//! valid YAML is retried once with every top-level plain value quoted, as
//! Claude Code does. This module does not read the file system.

use std::borrow::Cow;
use std::path::Path;

use super::def::{AgentDef, Source};
use super::frontmatter::split_frontmatter;
use super::resolve::{Ctx, DocKind, resolve};
use crate::diagnostic::{Diagnostic, Pos};
use crate::raw::{Key, Kind, Node, parse_toml, parse_yaml};

/// What the caller wants checked beyond the file itself.
#[derive(Debug, Clone, Copy, Default)]
pub struct ParseOptions<'a> {
    /// When non-empty, `tools`/`disallowedTools` entries whose base name is
    /// not in this list (and not `mcp__…`) are warned about.
    pub known_tools: &'a [String],
}

/// Parses one agent file. `None` when the file defines no loadable agent.
pub fn parse_agent_file(
    path: &Path,
    text: &str,
    source: Source,
) -> (Option<AgentDef>, Vec<Diagnostic>) {
    parse_agent_file_with(path, text, source, ParseOptions::default())
}

/// [`parse_agent_file`] with options.
pub fn parse_agent_file_with(
    path: &Path,
    text: &str,
    source: Source,
    opts: ParseOptions<'_>,
) -> (Option<AgentDef>, Vec<Diagnostic>) {
    let (def, diags) = parse_agent_text(path, text, source, opts);
    let def = def.map(|mut d| {
        d.path = Some(path.to_path_buf());
        d
    });
    (def, diags)
}

/// [`parse_agent_file_with`], leaving the definition's `path` unset: the
/// loader moves the path it already owns in instead of copying it.
pub(super) fn parse_agent_text(
    path: &Path,
    text: &str,
    source: Source,
    opts: ParseOptions<'_>,
) -> (Option<AgentDef>, Vec<Diagnostic>) {
    // CRLF files load exactly like LF ones: normalise once, here.
    let text: Cow<'_, str> = if text.contains('\r') {
        Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(text)
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let is = |e: &str| ext.eq_ignore_ascii_case(e);
    let mut ctx = Ctx {
        path,
        shift: 0,
        known_tools: opts.known_tools,
        diags: Vec::new(),
    };
    let def = if is("md") || is("markdown") {
        parse_markdown(text, source, &mut ctx)
    } else if is("yaml") || is("yml") {
        match parse_yaml(text) {
            Ok(doc) => resolve(&doc, DocKind::Data, source, &mut ctx),
            Err(e) => {
                ctx.error(e.pos, format!("invalid YAML: {}", e.message));
                None
            }
        }
    } else if is("toml") {
        match parse_toml(text) {
            Ok(doc) => resolve(&doc, DocKind::Data, source, &mut ctx),
            Err(e) => {
                ctx.error(e.pos, format!("invalid TOML: {}", e.message));
                None
            }
        }
    } else {
        ctx.diags.push(Diagnostic::error(
            Some(path),
            None,
            "not an agent file: expected a .md, .yaml, .yml or .toml extension",
        ));
        None
    };
    (def, ctx.diags)
}

fn parse_markdown(text: &str, source: Source, ctx: &mut Ctx<'_>) -> Option<AgentDef> {
    let fm = match split_frontmatter(text) {
        Ok(fm) => fm,
        Err(e) if e.starts_with("no frontmatter") => {
            ctx.warn(Pos::START, "no frontmatter; skipped");
            return None;
        }
        Err(e) => {
            ctx.error(Pos::START, e);
            return None;
        }
    };
    ctx.shift = fm.yaml_line - 1;
    // A top-level plain value holding `: ` is never valid YAML, so such a
    // file (common in published agents) goes straight to the quoted retry;
    // the original is parsed again only to report its error.
    // As Claude Code (2.1.214 on) does, a simple `key: value` whose value
    // holds a YAML comment (`#` first, or after a blank) is quoted before
    // the first parse, so `Our app just hit #1 on…` is not cut at ` #`.
    let primary: Cow<'_, str> = if fm.yaml.contains('#') {
        Cow::Owned(quote_hash_values(fm.yaml))
    } else {
        Cow::Borrowed(fm.yaml)
    };
    let first = if needs_quoting(&primary) {
        None
    } else {
        Some(parse_yaml(&primary))
    };
    let doc = match first {
        Some(Ok(doc)) => doc,
        _ => match parse_yaml(&quote_plain_values(fm.yaml)) {
            Ok(doc) => doc,
            Err(retry) => {
                let err = match first {
                    Some(Err(e)) => e,
                    _ => parse_yaml(fm.yaml).err().unwrap_or(retry),
                };
                ctx.error(
                    err.pos,
                    format!("invalid YAML frontmatter: {}", err.message),
                );
                return None;
            }
        },
    };
    resolve(&doc, DocKind::Markdown { body: fm.body }, source, ctx)
}

/// Rewrites YAML so that every top-level `key: plain value` holds a
/// single-quoted string instead (a ` #` in it is text, not a comment),
/// including a plain value continued on indented lines. Lines and the columns of keys are unchanged, so
/// positions in the retried document still point at the right place.
pub(super) fn quote_plain_values(yaml: &str) -> String {
    let lines: Vec<&str> = yaml.split('\n').collect();
    let mut out = String::with_capacity(yaml.len() + 16);
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let Some((key, value_start)) = top_level_plain(line) else {
            out.push_str(line);
            push_newline(&mut out, i, lines.len());
            i += 1;
            continue;
        };
        // Continuation lines: indented, or blank followed by indented.
        let mut last = i;
        let mut j = i + 1;
        while j < lines.len() {
            let l = lines[j];
            if l.starts_with([' ', '\t'])
                && !l.trim().is_empty()
                && !l.trim_start().starts_with('#')
            {
                last = j;
            } else if !l.trim().is_empty() {
                break;
            }
            j += 1;
        }
        // The whole rest of the line is the value, ` #` included: Claude
        // Code's retry quotes it all (`#` is one of the characters that make
        // it quote), so `Our app just hit #1 on…` keeps its `#1 on…`.
        let first_value = &line[value_start..];
        out.push_str(key);
        out.push('\'');
        if last == i {
            out.push_str(&first_value.trim_end().replace('\'', "''"));
            out.push('\'');
        } else {
            out.push_str(&first_value.replace('\'', "''"));
            for (k, l) in lines.iter().enumerate().take(last + 1).skip(i + 1) {
                out.push('\n');
                if k == last {
                    out.push_str(&l.trim_end().replace('\'', "''"));
                    out.push('\'');
                } else {
                    out.push_str(&l.replace('\'', "''"));
                }
            }
        }
        push_newline(&mut out, last, lines.len());
        i = last + 1;
    }
    out
}

/// Quotes (single quotes, positions kept) the value of every line of the
/// form `key: value` (key of letters, `_` and `-` at column 1) whose
/// unquoted value starts with `#` or has a `#` after a blank: YAML would
/// read the rest as a comment. Other lines are left as they are.
pub(super) fn quote_hash_values(yaml: &str) -> String {
    let mut out = String::with_capacity(yaml.len() + 16);
    for (i, line) in yaml.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let key_len = line
            .bytes()
            .take_while(|b| b.is_ascii_alphabetic() || *b == b'_' || *b == b'-')
            .count();
        let rest = &line[key_len..];
        let value = rest
            .strip_prefix(':')
            .filter(|r| r.starts_with([' ', '\t']))
            .map(|r| r.trim_start_matches([' ', '\t']))
            .unwrap_or("");
        let (value, cr) = match value.strip_suffix('\r') {
            Some(v) => (v, "\r"),
            None => (value, ""),
        };
        let quoted = (value.starts_with('"') && value.ends_with('"') && value.len() > 1)
            || (value.starts_with('\'') && value.ends_with('\'') && value.len() > 1);
        let has_comment = value.starts_with('#')
            || value
                .as_bytes()
                .windows(2)
                .any(|w| (w[0] == b' ' || w[0] == b'\t') && w[1] == b'#');
        if key_len == 0 || value.is_empty() || quoted || !has_comment {
            out.push_str(line);
            continue;
        }
        let start = line.len() - cr.len() - value.len();
        out.push_str(&line[..start]);
        out.push('\'');
        out.push_str(&value.replace('\'', "''"));
        out.push('\'');
        out.push_str(cr);
    }
    out
}

/// True when some top-level plain value contains `: ` (outside a trailing
/// comment), which plain YAML scalars may not.
fn needs_quoting(yaml: &str) -> bool {
    yaml.lines().any(|line| {
        top_level_plain(line)
            .is_some_and(|(_, start)| split_comment(&line[start..]).0.contains(": "))
    })
}

fn push_newline(out: &mut String, index: usize, count: usize) {
    if index + 1 < count {
        out.push('\n');
    }
}

/// `key: value` at column 1 with a plain (unquoted, non-block, non-flow)
/// value: returns the text up to the value, and where the value starts.
fn top_level_plain(line: &str) -> Option<(&str, usize)> {
    if line.starts_with([' ', '\t', '#', '-']) {
        return None;
    }
    let colon = line.find(": ")?;
    let key = &line[..colon];
    if key.is_empty() || key.starts_with(['"', '\'', '[', '{', '?']) {
        return None;
    }
    let after = &line[colon + 1..];
    let value_start = colon + 1 + (after.len() - after.trim_start().len());
    let value = line[value_start..].trim_end();
    if value.is_empty() || value.starts_with(['"', '\'', '[', '{', '|', '>', '&', '*', '!', '#']) {
        return None;
    }
    Some((&line[..value_start], value_start))
}

/// A plain value and a trailing ` # comment`, if any.
fn split_comment(value: &str) -> (&str, &str) {
    match value.find(" #") {
        Some(i) => (&value[..i], &value[i..]),
        None => (value, ""),
    }
}

/// The path shown in diagnostics about `--agents`.
const CLI_PATH: &str = "--agents";

/// Parses `--agents JSON`: an object of name → definition. One bad entry
/// drops only that entry.
pub fn parse_cli_agents(json: &str) -> (Vec<AgentDef>, Vec<Diagnostic>) {
    parse_cli_agents_with(json, ParseOptions::default())
}

/// [`parse_cli_agents`] with options.
pub fn parse_cli_agents_with(
    json: &str,
    opts: ParseOptions<'_>,
) -> (Vec<AgentDef>, Vec<Diagnostic>) {
    let path = Path::new(CLI_PATH);
    let mut ctx = Ctx {
        path,
        shift: 0,
        known_tools: opts.known_tools,
        diags: Vec::new(),
    };
    let value: serde_json::Value = match serde_json::from_str(json) {
        Ok(v) => v,
        Err(e) => {
            let pos = Pos::new(e.line().max(1), e.column().max(1));
            ctx.error(pos, format!("invalid JSON: {e}"));
            return (Vec::new(), ctx.diags);
        }
    };
    // JSON is YAML, and the YAML reader remembers positions; fall back to
    // the JSON value (positions at the start) if it disagrees.
    let doc = parse_yaml(json).unwrap_or_else(|_| node_of_json(&value));
    let Kind::Map(entries) = &doc.kind else {
        ctx.error(doc.pos, "expected a JSON object of agent name → definition");
        return (Vec::new(), ctx.diags);
    };
    let mut defs = Vec::new();
    for (key, entry) in entries {
        let kind = DocKind::Cli {
            name: key.name.trim(),
            name_pos: key.pos,
        };
        if let Some(def) = resolve(entry, kind, Source::Cli, &mut ctx) {
            defs.push(def);
        }
    }
    (defs, ctx.diags)
}

fn node_of_json(v: &serde_json::Value) -> Node {
    use serde_json::Value as J;
    let kind = match v {
        J::Null => Kind::Null,
        J::Bool(b) => Kind::Bool(*b),
        J::Number(n) => n
            .as_i64()
            .map_or_else(|| Kind::Float(n.as_f64().unwrap_or(0.0)), Kind::Int),
        J::String(s) => Kind::Str(s.clone()),
        J::Array(a) => Kind::Seq(a.iter().map(node_of_json).collect()),
        J::Object(o) => Kind::Map(
            o.iter()
                .map(|(k, v)| {
                    (
                        Key {
                            name: k.clone(),
                            pos: Pos::START,
                        },
                        node_of_json(v),
                    )
                })
                .collect(),
        ),
    };
    Node::new(Pos::START, kind)
}
