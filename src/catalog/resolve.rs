//! Resolving a raw agent document (a [`Node`] tree from YAML frontmatter,
//! a YAML or TOML file, or one `--agents` entry) into an [`AgentDef`].
//!
//! Every field's parsing lives here, once for all formats. Bad optional
//! values are dropped one by one with a warning that names the position and
//! what was expected; a missing `name` or `description` keeps the agent out.
//! This module does not read files or know about sources' precedence.

use std::path::Path;

use super::FORK_AGENT;
use super::def::{AgentDef, AgentMcpServer, Color, EffortSetting, Isolation, Prompt, Source};
use super::tokens::{base_name, canonical_tool_spec, tokenize_tools};
use crate::config::{Condition, McpServerConfig, PermissionMode};
use crate::diagnostic::{Diagnostic, Pos};
use crate::raw::{Kind, Node};

/// Which kind of document is being resolved; decides how a missing name
/// and the prompt are handled.
pub(super) enum DocKind<'a> {
    /// A `.md` file: the prompt is the body.
    Markdown { body: &'a str },
    /// A `.yaml`/`.yml`/`.toml` file.
    Data,
    /// One `--agents` entry; its name is the object key.
    Cli { name: &'a str, name_pos: Pos },
}

/// The fields an agent document may hold.
const FIELDS: &[&str] = &[
    "name",
    "description",
    "tools",
    "disallowedTools",
    "model",
    "permissionMode",
    "maxTurns",
    "background",
    "isolation",
    "color",
    "hooks",
    "mcpServers",
    "requiredMcpServers",
    "skills",
    "memory",
    "effort",
    "initialPrompt",
    "autoCompactWindow",
    "compactThreshold",
    "compact_threshold",
    "when",
    "prompt",
    "prompt_template",
];

const MEMORY: &[&str] = &["user", "project", "local"];
const EFFORT: &[&str] = &["low", "medium", "high", "xhigh", "max"];

/// Where diagnostics go and how positions map to the file.
pub(super) struct Ctx<'a> {
    pub path: &'a Path,
    /// Lines to add to every position (frontmatter starts below line 1).
    pub shift: usize,
    /// When non-empty, tool names whose base name is not here are warned about.
    pub known_tools: &'a [String],
    pub diags: Vec<Diagnostic>,
}

impl Ctx<'_> {
    fn at(&self, pos: Pos) -> Pos {
        pos.shifted(self.shift)
    }

    pub fn warn(&mut self, pos: Pos, message: impl Into<String>) {
        let d = Diagnostic::warning(Some(self.path), Some(self.at(pos)), message);
        self.diags.push(d);
    }

    pub fn error(&mut self, pos: Pos, message: impl Into<String>) {
        let d = Diagnostic::error(Some(self.path), Some(self.at(pos)), message);
        self.diags.push(d);
    }
}

/// Resolves one document. `None` when the agent cannot be loaded; the
/// reason is in `ctx.diags`.
pub(super) fn resolve(
    doc: &Node,
    kind: DocKind<'_>,
    source: Source,
    ctx: &mut Ctx<'_>,
) -> Option<AgentDef> {
    if !matches!(doc.kind, Kind::Map(_)) {
        ctx.error(
            doc.pos,
            format!(
                "expected a mapping of agent fields, found {}",
                doc.type_name()
            ),
        );
        return None;
    }

    let name = match &kind {
        DocKind::Cli { name, name_pos } => {
            if let Some((k, _)) = doc.entry("name") {
                ctx.warn(
                    k.pos,
                    "name: ignored in --agents; the object key is the name",
                );
            }
            check_name(name, *name_pos, ctx)?
        }
        DocKind::Markdown { .. } | DocKind::Data => match doc.entry("name") {
            None => {
                let msg = "no `name` field; skipped (an agent file needs name and description)";
                if matches!(kind, DocKind::Markdown { .. }) {
                    ctx.warn(doc.pos, msg);
                } else {
                    ctx.error(doc.pos, msg);
                }
                return None;
            }
            Some((_, v)) => match v.scalar_text() {
                Some(n) => check_name(n.trim(), v.pos, ctx)?,
                None => {
                    ctx.error(
                        v.pos,
                        format!("name: expected a string, found {}", v.type_name()),
                    );
                    return None;
                }
            },
        },
    };
    if name == FORK_AGENT && source != Source::Builtin {
        let pos = doc.get("name").map_or(doc.pos, |n| n.pos);
        ctx.error(pos, "name: `fork` is reserved for the built-in fork agent");
        return None;
    }

    let description = match doc.get("description") {
        None => {
            ctx.error(
                doc.pos,
                format!("agent `{name}` has no `description` field; not loaded"),
            );
            return None;
        }
        Some(v) => match v.scalar_text() {
            Some(d) if !d.trim().is_empty() => {
                if d.contains('\\') {
                    d.replace("\\n", "\n").trim().to_string()
                } else if d.trim().len() == d.len() {
                    d
                } else {
                    d.trim().to_string()
                }
            }
            Some(_) => {
                ctx.error(
                    v.pos,
                    format!("description: agent `{name}` has an empty description; not loaded"),
                );
                return None;
            }
            None => {
                ctx.error(
                    v.pos,
                    format!(
                        "description: expected a string, found {}; not loaded",
                        v.type_name()
                    ),
                );
                return None;
            }
        },
    };

    let mut def = AgentDef::new(name, description, source);
    let mut prompt: Option<(Pos, String)> = None;
    let mut template: Option<(Pos, String)> = None;

    for (key, value) in doc.entries() {
        let v = value;
        match key.name.as_str() {
            "name" | "description" => {}
            "tools" => {
                if let Some(t) = tool_list(v, "tools", ctx) {
                    def.tools = if t.iter().any(|s| s == "*") { None } else { Some(t) };
                }
            }
            "disallowedTools" => {
                if let Some(t) = tool_list(v, "disallowedTools", ctx) {
                    if t.iter().any(|s| s == "*") {
                        ctx.warn(v.pos, "disallowedTools: `*` disallows nothing (as in Claude Code); list tool names");
                    } else {
                        def.disallowed_tools = t;
                    }
                }
            }
            "model" => match v.scalar_text().map(|s| s.trim().to_string()) {
                Some(m) if !m.is_empty() => def.model = Some(m),
                _ => ctx.warn(v.pos, expected("model", "a model name, alias or `inherit`", v)),
            },
            "permissionMode" => match v.as_str().map(str::trim) {
                Some("bubble") => ctx.warn(v.pos, "permissionMode: `bubble` is internal to forks; ignored"),
                Some(s) if PermissionMode::USER_NAMES.contains(&s) => def.permission_mode = s.parse().ok(),
                _ => ctx.warn(v.pos, expected("permissionMode", &one_of(PermissionMode::USER_NAMES), v)),
            },
            "maxTurns" => {
                let n = match &v.kind {
                    Kind::Int(i) => u32::try_from(*i).ok(),
                    Kind::Str(s) => s.trim().parse::<u32>().ok(),
                    _ => None,
                };
                match n {
                    Some(n) if n > 0 => def.max_turns = Some(n),
                    _ => ctx.warn(v.pos, expected("maxTurns", "a positive integer", v)),
                }
            }
            "background" => match &v.kind {
                Kind::Bool(b) => def.background = *b,
                Kind::Str(s) if s.trim() == "true" => def.background = true,
                Kind::Str(s) if s.trim() == "false" => def.background = false,
                _ => ctx.warn(v.pos, expected("background", "true or false", v)),
            },
            "isolation" => match v.as_str().map(str::trim) {
                Some("worktree") => def.isolation = Some(Isolation::Worktree),
                _ => ctx.warn(v.pos, expected("isolation", "`worktree`", v)),
            },
            "color" => match v.as_str().and_then(|s| Color::parse(s.trim())) {
                Some(c) => def.color = Some(c),
                None => ctx.warn(v.pos, expected("color", &one_of(Color::NAMES), v)),
            },
            "hooks" => match &v.kind {
                Kind::Map(_) => def.hooks = Some(super::hooks::frontmatter_hooks(v, ctx)),
                _ => ctx.warn(
                    v.pos,
                    format!(
                        "hooks: expected a mapping of event names to hooks, found {}; all of this agent's hooks are dropped",
                        v.type_name()
                    ),
                ),
            },
            "mcpServers" => def.mcp_servers = mcp_servers(v, ctx),
            "requiredMcpServers" => def.required_mcp_servers = string_list(v, "requiredMcpServers", ctx),
            "skills" => {
                if let Some(s) = tool_list(v, "skills", ctx) {
                    def.skills = s;
                }
            }
            "memory" => match v.as_str().map(str::trim) {
                Some(m) if MEMORY.contains(&m) => def.memory = Some(m.to_string()),
                _ => ctx.warn(v.pos, expected("memory", &one_of(MEMORY), v)),
            },
            "effort" => match &v.kind {
                Kind::Int(i) => def.effort = Some(EffortSetting::Number(*i)),
                Kind::Str(s) if EFFORT.contains(&s.trim()) => {
                    def.effort = Some(EffortSetting::Level(s.trim().to_string()));
                }
                Kind::Str(s) if s.trim().parse::<i64>().is_ok() => {
                    def.effort = s.trim().parse::<i64>().ok().map(EffortSetting::Number);
                }
                _ => ctx.warn(v.pos, expected("effort", &format!("{} or an integer", one_of(EFFORT)), v)),
            },
            "autoCompactWindow" => {
                let n = match &v.kind {
                    Kind::Int(i) => u64::try_from(*i).ok(),
                    Kind::Str(s) => s.trim().parse::<u64>().ok(),
                    _ => None,
                };
                match n {
                    Some(n) if n > 0 => def.auto_compact_window = Some(n),
                    _ => ctx.warn(v.pos, expected("autoCompactWindow", "a positive number of tokens", v)),
                }
            }
            "compactThreshold" | "compact_threshold" => {
                #[allow(clippy::cast_precision_loss)] // small integers only: 0 or 1
                let f = match &v.kind {
                    Kind::Float(f) => Some(*f),
                    Kind::Int(i) => Some(*i as f64),
                    Kind::Str(s) => s.trim().parse::<f64>().ok(),
                    _ => None,
                };
                match f {
                    Some(f) if f > 0.0 && f <= 1.0 => def.compact_threshold = Some(f),
                    _ => ctx.warn(v.pos, expected(&key.name, "a fraction of the window, above 0 and at most 1", v)),
                }
            }
            "initialPrompt" => match v.as_str() {
                Some(s) if !s.trim().is_empty() => def.initial_prompt = Some(s.to_string()),
                _ => ctx.warn(v.pos, expected("initialPrompt", "a non-empty string", v)),
            },
            "when" => {
                let parsed = match &v.kind {
                    Kind::Str(s) => Some(Condition::parse(s)),
                    Kind::Seq(items) => {
                        let texts: Option<Vec<String>> = items.iter().map(|i| i.as_str().map(str::to_string)).collect();
                        texts.map(|t| Condition::from_list(&t))
                    }
                    _ => None,
                };
                match parsed {
                    Some(Ok(c)) => def.when = Some(c),
                    Some(Err(e)) => ctx.warn(v.pos, format!("when: {e}; the condition is dropped")),
                    None => ctx.warn(v.pos, expected("when", "a flag condition string or a list of them", v)),
                }
            }
            "prompt" => match (&kind, v.as_str()) {
                (DocKind::Markdown { .. }, _) => {
                    ctx.warn(key.pos, "prompt: ignored in a .md file; the body is the system prompt");
                }
                (_, Some(s)) => prompt = Some((v.pos, s.to_string())),
                (_, None) => ctx.warn(v.pos, expected("prompt", "a string", v)),
            },
            "prompt_template" => match v.as_str().map(str::trim) {
                Some(s) if !s.is_empty() => template = Some((v.pos, s.to_string())),
                _ => ctx.warn(v.pos, expected("prompt_template", "a template name", v)),
            },
            other => {
                let norm = |s: &str| s.replace(['_', '-'], "").to_ascii_lowercase();
                let hint = FIELDS.iter().find(|f| norm(f) == norm(other));
                let msg = match hint {
                    Some(h) => format!("unknown field `{other}` (did you mean `{h}`?); ignored"),
                    None => format!("unknown field `{other}`; ignored"),
                };
                ctx.warn(key.pos, msg);
            }
        }
    }

    def.prompt = match kind {
        DocKind::Markdown { body } => match template {
            Some((pos, t)) => {
                if !body.trim().is_empty() {
                    ctx.warn(pos, "prompt_template: set, so the file's body is ignored");
                }
                Prompt::Template(t)
            }
            None => Prompt::Inline(body.trim().to_string()),
        },
        DocKind::Data | DocKind::Cli { .. } => match (prompt, template) {
            (Some((_, p)), Some((pos, _))) => {
                ctx.warn(pos, "prompt_template: ignored because `prompt` is also set");
                Prompt::Inline(p.trim().to_string())
            }
            (Some((_, p)), None) => Prompt::Inline(p.trim().to_string()),
            (None, Some((_, t))) => Prompt::Template(t),
            (None, None) => {
                if matches!(kind, DocKind::Cli { .. }) {
                    ctx.error(
                        doc.pos,
                        format!("agent `{}` has no `prompt`; not loaded", def.name),
                    );
                    return None;
                }
                ctx.warn(
                    doc.pos,
                    "no `prompt` or `prompt_template`; the agent has an empty system prompt",
                );
                Prompt::Inline(String::new())
            }
        },
    };
    if let DocKind::Cli { .. } = kind
        && let Prompt::Inline(p) = &def.prompt
        && p.is_empty()
    {
        ctx.error(
            doc.pos,
            format!("agent `{}` has an empty `prompt`; not loaded", def.name),
        );
        return None;
    }
    Some(def)
}

fn check_name(name: &str, pos: Pos, ctx: &mut Ctx<'_>) -> Option<String> {
    if name.is_empty() {
        ctx.error(pos, "name: expected a non-empty agent name");
        return None;
    }
    if name.chars().any(|c| c.is_control()) {
        ctx.error(
            pos,
            "name: an agent name may not contain control characters",
        );
        return None;
    }
    Some(name.to_string())
}

fn one_of(names: &[&str]) -> String {
    format!("one of {}", names.join(", "))
}

fn found(v: &Node) -> String {
    match &v.kind {
        Kind::Str(s) => format!("{s:?}"),
        Kind::Int(i) => i.to_string(),
        Kind::Bool(b) => b.to_string(),
        _ => v.type_name().to_string(),
    }
}

fn expected(field: &str, what: &str, v: &Node) -> String {
    format!("{field}: expected {what}, found {}; ignored", found(v))
}

/// `tools`, `disallowedTools`, `skills`: `None` when the value is dropped.
/// Null, `""` and `[]` give an empty list.
fn tool_list(v: &Node, field: &str, ctx: &mut Ctx<'_>) -> Option<Vec<String>> {
    let mut out: Vec<(Pos, String)> = Vec::new();
    match &v.kind {
        Kind::Null => {}
        Kind::Str(s) => out.extend(tokenize_tools(s).into_iter().map(|t| (v.pos, t))),
        Kind::Seq(items) => {
            for item in items {
                match item.scalar_text() {
                    Some(s) => out.extend(tokenize_tools(&s).into_iter().map(|t| (item.pos, t))),
                    None => ctx.warn(
                        item.pos,
                        format!(
                            "{field}: expected a tool name, found {}; ignored",
                            item.type_name()
                        ),
                    ),
                }
            }
        }
        _ => {
            ctx.warn(
                v.pos,
                format!(
                    "{field}: expected a string or a list of strings, found {}; ignored",
                    v.type_name()
                ),
            );
            return None;
        }
    }
    if field != "skills" {
        for (_, t) in out.iter_mut() {
            *t = canonical_tool_spec(t);
        }
    }
    if field != "skills" && !ctx.known_tools.is_empty() {
        for (pos, t) in &out {
            let base = base_name(t);
            if t != "*" && !base.starts_with("mcp__") && !ctx.known_tools.iter().any(|k| k == base)
            {
                let msg = if field == "tools" {
                    format!("{field}: unknown tool `{base}`; the agent runs without it")
                } else {
                    format!("{field}: unknown tool `{base}`")
                };
                ctx.warn(*pos, msg);
            }
        }
    }
    Some(out.into_iter().map(|(_, t)| t).collect())
}

/// A list of strings; a single string counts as a one-item list.
fn string_list(v: &Node, field: &str, ctx: &mut Ctx<'_>) -> Vec<String> {
    match &v.kind {
        Kind::Null => Vec::new(),
        Kind::Str(s) if !s.trim().is_empty() => vec![s.trim().to_string()],
        Kind::Seq(items) => items
            .iter()
            .filter_map(|i| match i.as_str().map(str::trim) {
                Some(s) if !s.is_empty() => Some(s.to_string()),
                _ => {
                    ctx.warn(i.pos, expected(field, "a non-empty string", i));
                    None
                }
            })
            .collect(),
        _ => {
            ctx.warn(v.pos, expected(field, "a list of strings", v));
            Vec::new()
        }
    }
}

/// `mcpServers`: a list of server names or `{name: config}` mappings; an
/// inline definition is checked here, once, and a bad one is left out with
/// an error at its position.
fn mcp_servers(v: &Node, ctx: &mut Ctx<'_>) -> Vec<AgentMcpServer> {
    let Kind::Seq(items) = &v.kind else {
        if !v.is_null() {
            ctx.warn(
                v.pos,
                expected(
                    "mcpServers",
                    "a list of server names or {name: config} mappings",
                    v,
                ),
            );
        }
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in items {
        match &item.kind {
            Kind::Str(s) if !s.trim().is_empty() => {
                out.push(AgentMcpServer::Named(s.trim().to_string()));
            }
            Kind::Map(entries) if entries.len() == 1 && matches!(entries[0].1.kind, Kind::Map(_)) => {
                let (key, config) = &entries[0];
                match McpServerConfig::from_json(&config.to_json()) {
                    Ok(config) => out.push(AgentMcpServer::Inline {
                        name: key.name.clone(),
                        config,
                    }),
                    Err(why) => ctx.error(
                        key.pos,
                        format!("mcpServers.{}: {why}; this server is left out", key.name),
                    ),
                }
            }
            _ => ctx.warn(
                item.pos,
                format!(
                    "mcpServers: expected a server name or a single {{name: config}} mapping, found {}; this entry is dropped",
                    found(item)
                ),
            ),
        }
    }
    out
}
