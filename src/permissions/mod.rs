//! Permission rules and decisions (SPEC §17). Rules use Claude Code's
//! syntax and are parsed once, when settings load; [`decide`] then answers
//! allow, ask or deny for one tool call from the rules and the session's
//! permission mode. It does not prompt anyone, run hooks or know which agent
//! is calling: the caller turns an `Ask` into a prompt, a denial, or (in
//! `bubble` mode) a question for the parent session.
//!
//! Rule kinds, as written in settings:
//! - `Tool`: every use of that tool (`Read`, `Bash`, `mcp__fs__read`).
//! - `mcp__server__*` (or `mcp__server`): every tool of one MCP server;
//!   `mcp__*` every MCP tool.
//! - `Bash(prefix:*)` / `Bash(prefix *)`: commands starting with `prefix` as
//!   a whole word; `Bash(cmd)`: exactly that command.
//! - `Tool(glob)` for path tools: `Read`, `Write`, `Edit`, `Glob`, `Grep`.
//! - `Agent(T)` / `Task(T)`: spawning agents of type `T`.

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use serde_json::Value;

use crate::config::{PermissionMode, PermissionSettings};

/// What the permission check says about one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Ask the user; `reason` names the rule or mode that asked.
    Ask {
        reason: String,
    },
    /// Refused; `reason` names the rule or mode that refused.
    Deny {
        reason: String,
    },
}

/// Tools allowed by every mode when no rule matches: they only read, or they
/// manage agents (whose own calls are checked in their own sessions).
pub const READ_AND_AGENT_TOOLS: &[&str] = &[
    "Read",
    "Glob",
    "Grep",
    "Agent",
    "SendMessage",
    "TaskOutput",
    "TaskStop",
];

/// Tools that change files, allowed without asking in `acceptEdits`.
pub const EDIT_TOOLS: &[&str] = &["Write", "Edit"];

/// One parsed rule. Two rules are equal when their text is.
#[derive(Debug, Clone)]
pub struct Rule {
    text: String,
    kind: RuleKind,
}

#[derive(Debug, Clone)]
enum RuleKind {
    /// Every call of the named tool.
    Tool(String),
    /// Every tool whose name starts with this (MCP servers).
    ToolPrefix(String),
    /// Bash commands starting with this prefix as a whole word.
    BashPrefix(String),
    /// Exactly this Bash command.
    BashExact(String),
    /// Path tools whose target path matches.
    Path {
        tools: &'static [&'static str],
        glob: GlobMatcher,
        anchor: Anchor,
    },
    /// Agent calls for this agent type.
    AgentType(String),
}

/// What a path rule's glob is relative to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Anchor {
    /// The session's working directory.
    Cwd,
    /// The file system root (the glob is absolute).
    Root,
}

impl PartialEq for Rule {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Rule {}

impl Rule {
    /// Parses one rule; the error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Rule, String> {
        let kind =
            parse_kind(text.trim()).map_err(|why| format!("permission rule '{text}': {why}"))?;
        Ok(Rule {
            text: text.to_string(),
            kind,
        })
    }

    /// The rule as written in settings.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the rule covers this call. For Bash, a rule covers a command
    /// when it covers any of its simple commands (`a && b`, `a | b`, ...):
    /// the right reading for deny and ask rules. Allow rules are applied
    /// more strictly by [`decide`].
    pub fn matches(&self, tool: &str, input: &Value, cwd: &Path) -> bool {
        let tool = canonical_tool(tool);
        match &self.kind {
            RuleKind::Tool(name) => name == tool,
            RuleKind::ToolPrefix(prefix) => tool.starts_with(prefix.as_str()),
            RuleKind::BashPrefix(_) | RuleKind::BashExact(_) => {
                tool == "Bash"
                    && bash_command(input).is_some_and(|cmd| {
                        self.matches_simple_command(cmd.trim())
                            || split_commands(cmd)
                                .iter()
                                .any(|c| self.matches_simple_command(c))
                    })
            }
            RuleKind::Path {
                tools,
                glob,
                anchor,
            } => {
                tools.contains(&tool)
                    && target_path(tool, input, cwd)
                        .is_some_and(|p| path_matches(glob, anchor, &p, cwd))
            }
            // Agent-type rules are applied by the Agent tool after routing
            // (SPEC §6): a fork ignores `subagent_type`, and a denied type
            // gets its own message. See `Rules::denied_agent_type`.
            RuleKind::AgentType(_) => false,
        }
    }

    /// Whether the rule allows every use of Bash.
    fn is_whole_bash(&self) -> bool {
        matches!(&self.kind, RuleKind::Tool(name) if name == "Bash")
    }

    fn matches_simple_command(&self, cmd: &str) -> bool {
        match &self.kind {
            RuleKind::BashExact(exact) => cmd == exact,
            RuleKind::BashPrefix(prefix) => {
                cmd == prefix
                    || cmd.strip_prefix(prefix.as_str()).is_some_and(|rest| {
                        prefix.ends_with(char::is_whitespace)
                            || rest.starts_with(char::is_whitespace)
                    })
            }
            _ => false,
        }
    }
}

/// `Task` is the older name of the Agent tool.
fn canonical_tool(tool: &str) -> &str {
    if tool == "Task" { "Agent" } else { tool }
}

fn valid_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn parse_kind(text: &str) -> Result<RuleKind, String> {
    if text.is_empty() {
        return Err("empty rule".to_string());
    }
    let Some(open) = text.find('(') else {
        if let Some(prefix) = text.strip_suffix('*') {
            if !prefix.starts_with("mcp__") || prefix.contains('*') {
                return Err(
                    "a trailing `*` is only allowed on MCP names (`mcp__server__*`)".to_string(),
                );
            }
            return Ok(RuleKind::ToolPrefix(prefix.to_string()));
        }
        if text.contains(')') || !valid_tool_name(text) {
            return Err("expected a tool name, `Tool(specifier)`, or `mcp__server__*`".to_string());
        }
        // `mcp__server` names a whole server.
        if let Some(rest) = text.strip_prefix("mcp__")
            && !rest.is_empty()
            && !rest.contains("__")
        {
            return Ok(RuleKind::ToolPrefix(format!("{text}__")));
        }
        return Ok(RuleKind::Tool(canonical_tool(text).to_string()));
    };
    let tool = &text[..open];
    let Some(spec) = text[open + 1..].strip_suffix(')') else {
        return Err("missing closing `)`".to_string());
    };
    if !valid_tool_name(tool) {
        return Err(format!("{tool:?} is not a tool name"));
    }
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(format!("empty specifier; write `{tool}` to mean every use"));
    }
    match canonical_tool(tool) {
        "Bash" => {
            if let Some(prefix) = spec.strip_suffix(":*").or_else(|| spec.strip_suffix(" *")) {
                let prefix = prefix.trim_end();
                if prefix.is_empty() {
                    return Err(
                        "empty command prefix; write `Bash` to mean every command".to_string()
                    );
                }
                Ok(RuleKind::BashPrefix(prefix.to_string()))
            } else {
                Ok(RuleKind::BashExact(spec.to_string()))
            }
        }
        "Agent" => {
            if spec
                .chars()
                .any(|c| c.is_whitespace() || c == '(' || c == ')')
            {
                return Err(format!("{spec:?} is not an agent type"));
            }
            Ok(RuleKind::AgentType(spec.to_string()))
        }
        "Read" | "Write" | "Edit" | "Glob" | "Grep" => {
            let tools: &'static [&'static str] = match tool {
                // As in Claude Code: Read rules cover every tool that reads
                // files, Edit rules every tool that changes them.
                "Read" => &["Read", "Glob", "Grep"],
                "Edit" => &["Edit", "Write"],
                "Write" => &["Write"],
                "Glob" => &["Glob"],
                _ => &["Grep"],
            };
            let (pattern, anchor) = if let Some(rest) = spec.strip_prefix("~/") {
                let home = dirs::home_dir().ok_or("`~` used but there is no home directory")?;
                (home.join(rest).display().to_string(), Anchor::Root)
            } else if let Some(rest) = spec.strip_prefix("//") {
                (format!("/{rest}"), Anchor::Root)
            } else if spec.starts_with('/') {
                (spec.to_string(), Anchor::Root)
            } else {
                (
                    spec.strip_prefix("./").unwrap_or(spec).to_string(),
                    Anchor::Cwd,
                )
            };
            let glob = GlobBuilder::new(&pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| format!("invalid glob: {e}"))?
                .compile_matcher();
            Ok(RuleKind::Path {
                tools,
                glob,
                anchor,
            })
        }
        other => Err(format!(
            "{other} takes no specifier (only Bash, Read, Write, Edit, Glob, Grep and Agent do)"
        )),
    }
}

fn bash_command(input: &Value) -> Option<&str> {
    input.get("command").and_then(Value::as_str)
}

/// The path a path tool acts on, made absolute and free of `.`/`..`.
fn target_path(tool: &str, input: &Value, cwd: &Path) -> Option<PathBuf> {
    let key = if matches!(tool, "Glob" | "Grep") {
        "path"
    } else {
        "file_path"
    };
    let raw = match input.get(key) {
        Some(Value::String(s)) => s.as_str(),
        // Glob and Grep search the working directory by default.
        None | Some(Value::Null) if key == "path" => ".",
        _ => return None,
    };
    Some(normalize(&cwd.join(raw)))
}

/// Removes `.` and resolves `..` without touching the file system, so
/// `src/../secrets/key` is judged as `secrets/key`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn path_matches(glob: &GlobMatcher, anchor: &Anchor, path: &Path, cwd: &Path) -> bool {
    match anchor {
        Anchor::Root => glob.is_match(path),
        Anchor::Cwd => match path.strip_prefix(normalize(cwd)) {
            Ok(rel) if rel.as_os_str().is_empty() => glob.is_match("."),
            Ok(rel) => glob.is_match(rel),
            Err(_) => false,
        },
    }
}

/// Splits a shell command into its simple commands at `;`, `&`, `&&`, `|`,
/// `||` and newlines outside quotes. Not a shell parser: enough to keep a
/// rule about `rm` from missing `ls && rm -rf x`.
fn split_commands(cmd: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in cmd.chars() {
        if escaped {
            cur.push(c);
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => {
                quote = None;
                cur.push(c);
            }
            (Some(_), _) => {
                if c == '\\' && quote == Some('"') {
                    escaped = true;
                }
                cur.push(c);
            }
            (None, '\\') => {
                escaped = true;
                cur.push(c);
            }
            (None, '\'' | '"') => {
                quote = Some(c);
                cur.push(c);
            }
            (None, ';' | '&' | '|' | '\n' | '(' | ')') => {
                parts.push(std::mem::take(&mut cur));
            }
            (None, _) => cur.push(c),
        }
    }
    parts.push(cur);
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Whether a command runs other commands in ways [`split_commands`] cannot
/// see (command or process substitution); allow rules never cover those.
fn has_substitution(cmd: &str) -> bool {
    cmd.contains("$(") || cmd.contains('`') || cmd.contains("<(") || cmd.contains(">(")
}

/// The parsed allow/ask/deny rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    pub allow: Vec<Rule>,
    pub ask: Vec<Rule>,
    pub deny: Vec<Rule>,
}

impl Rules {
    /// Parses the rules of the settings; malformed rules are logged and
    /// skipped. Use [`Rules::parse`] to report them instead.
    pub fn from_settings(p: &PermissionSettings) -> Self {
        let (rules, errors) = Rules::parse(p);
        for e in errors {
            tracing::warn!("{e}; the rule is ignored");
        }
        rules
    }

    /// Parses the rules of the settings, returning the well-formed rules and
    /// one message for each malformed rule (which is left out).
    pub fn parse(p: &PermissionSettings) -> (Rules, Vec<String>) {
        Rules::parse_lists(&p.allow, &p.ask, &p.deny)
    }

    /// [`Rules::parse`] over plain lists of rule texts.
    pub fn parse_lists<S: AsRef<str>>(allow: &[S], ask: &[S], deny: &[S]) -> (Rules, Vec<String>) {
        let mut errors = Vec::new();
        let mut list = |texts: &[S], what: &str| -> Vec<Rule> {
            texts
                .iter()
                .filter_map(|t| {
                    Rule::parse(t.as_ref())
                        .map_err(|e| errors.push(format!("{what}: {e}")))
                        .ok()
                })
                .collect()
        };
        let rules = Rules {
            allow: list(allow, "allow"),
            ask: list(ask, "ask"),
            deny: list(deny, "deny"),
        };
        (rules, errors)
    }

    /// The deny rule `Agent(T)` (or `Task(T)`) that forbids spawning `agent_type`.
    /// A bare `Agent` (or `Task`) deny rule forbids every type.
    pub fn denied_agent_type(&self, agent_type: &str) -> Option<&str> {
        self.deny
            .iter()
            .find(|r| match &r.kind {
                RuleKind::AgentType(t) => t == agent_type,
                RuleKind::Tool(name) => name == "Agent",
                _ => false,
            })
            .map(Rule::text)
    }

    /// Whether the allow rules cover the call. A Bash command is allowed by
    /// rules only when each of its simple commands is covered by some allow
    /// rule and it hides no command substitution, so `Bash(git status:*)`
    /// does not let `git status && rm -rf x` through.
    fn allows(&self, tool: &str, input: &Value, cwd: &Path) -> bool {
        if canonical_tool(tool) != "Bash" {
            return self.allow.iter().any(|r| r.matches(tool, input, cwd));
        }
        if self.allow.iter().any(Rule::is_whole_bash) {
            return true;
        }
        let Some(cmd) = bash_command(input) else {
            return false;
        };
        if has_substitution(cmd) {
            return false;
        }
        let parts = split_commands(cmd);
        !parts.is_empty()
            && parts
                .iter()
                .all(|p| self.allow.iter().any(|r| r.matches_simple_command(p)))
    }
}

/// Decides one call in the order of SPEC §17 (hooks have already run):
/// a matching deny rule, then ask rule, then allow rule; otherwise the mode.
pub fn decide(
    rules: &Rules,
    mode: PermissionMode,
    tool: &str,
    input: &Value,
    cwd: &Path,
) -> Decision {
    if let Some(rule) = rules.deny.iter().find(|r| r.matches(tool, input, cwd)) {
        return Decision::Deny {
            reason: format!("deny rule '{}'", rule.text),
        };
    }
    if let Some(rule) = rules.ask.iter().find(|r| r.matches(tool, input, cwd)) {
        return if mode == PermissionMode::DontAsk {
            Decision::Deny {
                reason: format!(
                    "ask rule '{}' in permission mode 'dontAsk', which denies instead of asking",
                    rule.text
                ),
            }
        } else {
            Decision::Ask {
                reason: format!("ask rule '{}'", rule.text),
            }
        };
    }
    if rules.allows(tool, input, cwd) {
        return Decision::Allow;
    }
    let tool = canonical_tool(tool);
    let by_mode = format!("permission mode '{}'", mode.as_str());
    if READ_AND_AGENT_TOOLS.contains(&tool) {
        return Decision::Allow;
    }
    match mode {
        PermissionMode::Plan | PermissionMode::DontAsk => Decision::Deny { reason: by_mode },
        PermissionMode::BypassPermissions => Decision::Allow,
        PermissionMode::AcceptEdits if EDIT_TOOLS.contains(&tool) => Decision::Allow,
        PermissionMode::AcceptEdits | PermissionMode::Default | PermissionMode::Bubble => {
            Decision::Ask { reason: by_mode }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
