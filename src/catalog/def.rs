//! The resolved agent definition the engine uses.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::config::{Condition, PermissionMode};

/// Where a definition came from, lowest precedence first: a later source
/// replaces an agent of the same name from an earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Builtin,
    Plugin,
    User,
    Project,
    Cli,
    Managed,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Builtin => "builtin",
            Source::Plugin => "plugin",
            Source::User => "user",
            Source::Project => "project",
            Source::Cli => "cli",
            Source::Managed => "managed",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    Worktree,
}

/// The colours an agent may be shown in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Color {
    Red,
    Blue,
    Green,
    Yellow,
    Purple,
    Orange,
    Pink,
    Cyan,
}

impl Color {
    pub const NAMES: &'static [&'static str] = &[
        "red", "blue", "green", "yellow", "purple", "orange", "pink", "cyan",
    ];

    pub fn parse(s: &str) -> Option<Color> {
        Some(match s {
            "red" => Color::Red,
            "blue" => Color::Blue,
            "green" => Color::Green,
            "yellow" => Color::Yellow,
            "purple" => Color::Purple,
            "orange" => Color::Orange,
            "pink" => Color::Pink,
            "cyan" => Color::Cyan,
            _ => return None,
        })
    }
}

/// One entry of an agent's `mcpServers`.
/// An agent's `effort` as written: a level name, or an integer (kept and
/// shown; only a level is ever sent to a model). Serialised as it was
/// written: a string or a number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum EffortSetting {
    Level(String),
    Number(i64),
}

impl EffortSetting {
    /// The level name, when it is one.
    pub fn level(&self) -> Option<&str> {
        match self {
            EffortSetting::Level(l) => Some(l),
            EffortSetting::Number(_) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentMcpServer {
    /// A configured (shared) server, by name.
    Named(String),
    /// A server the agent file defines itself; it lives as long as the
    /// agent's session.
    Inline {
        name: String,
        config: crate::config::McpServerConfig,
    },
}

impl AgentMcpServer {
    /// The server's name (the `SERVER` of `mcp__SERVER__TOOL`).
    pub fn name(&self) -> &str {
        match self {
            AgentMcpServer::Named(n) | AgentMcpServer::Inline { name: n, .. } => n,
        }
    }

    pub fn is_inline(&self) -> bool {
        matches!(self, AgentMcpServer::Inline { .. })
    }
}

/// As written: a name, or `{name: config}`.
impl Serialize for AgentMcpServer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            AgentMcpServer::Named(n) => s.serialize_str(n),
            AgentMcpServer::Inline { name, config } => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry(name, config)?;
                m.end()
            }
        }
    }
}

/// Where the system prompt comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Prompt {
    /// The body of a `.md` file, or `prompt` in YAML/TOML: rendered as a
    /// template when the agent is spawned.
    Inline(String),
    /// `prompt_template`: the name of a template in the registry.
    Template(String),
}

/// One agent, as the engine uses it. Field names follow Claude Code's
/// frontmatter; see `docs/agent-files.md` for each field's parsing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentDef {
    pub name: String,
    pub description: String,
    pub source: Source,
    /// The file it was read from; `None` for embedded built-ins and `--agents`.
    pub path: Option<PathBuf>,
    /// Allowlist as written, after tokenising. `None` = all tools.
    pub tools: Option<Vec<String>>,
    pub disallowed_tools: Vec<String>,
    /// `inherit`, an alias or a full id; `None` means inherit.
    pub model: Option<String>,
    pub permission_mode: Option<PermissionMode>,
    pub max_turns: Option<u32>,
    pub background: bool,
    pub isolation: Option<Isolation>,
    pub color: Option<Color>,
    /// Per-agent hooks, resolved when the file was read (bad entries were
    /// reported and left out).
    pub hooks: Option<crate::config::Hooks>,
    /// `mcpServers`: shared servers by name and inline definitions,
    /// resolved when the file was read (bad entries reported, left out).
    pub mcp_servers: Vec<AgentMcpServer>,
    pub required_mcp_servers: Vec<String>,
    pub skills: Vec<String>,
    pub memory: Option<String>,
    pub effort: Option<EffortSetting>,
    pub initial_prompt: Option<String>,
    /// `autoCompactWindow`: the window, in tokens, its automatic compaction
    /// measures against (at most the model's).
    pub auto_compact_window: Option<u64>,
    /// `compactThreshold`: the fraction of that window at which it compacts.
    pub compact_threshold: Option<f64>,
    /// The agent exists only while this condition holds.
    pub when: Option<Condition>,
    pub prompt: Prompt,
    /// True only for `fork`: never listed, never selectable by type.
    pub synthetic: bool,
}

impl AgentDef {
    /// A definition with only the required fields set.
    pub fn new(name: impl Into<String>, description: impl Into<String>, source: Source) -> Self {
        AgentDef {
            name: name.into(),
            description: description.into(),
            source,
            path: None,
            tools: None,
            disallowed_tools: Vec::new(),
            model: None,
            permission_mode: None,
            max_turns: None,
            background: false,
            isolation: None,
            color: None,
            hooks: None,
            mcp_servers: Vec::new(),
            required_mcp_servers: Vec::new(),
            skills: Vec::new(),
            memory: None,
            effort: None,
            initial_prompt: None,
            auto_compact_window: None,
            compact_threshold: None,
            when: None,
            prompt: Prompt::Inline(String::new()),
            synthetic: false,
        }
    }
}
