//! A child's tool pool and the one-line summary the Agent tool shows.

use serde::Serialize;

use super::texts::ToolsColumn;
use crate::catalog::{AgentDef, agent_spec_types, base_name};

use super::AGENT_TOOL;

/// Tools that start or manage sub-agents: a child gets them only when it
/// may nest (it lists `Agent` and is shallower than `max_depth`).
pub const NESTING_TOOLS: &[&str] = &[AGENT_TOOL, "SendMessage", "TaskOutput", "TaskStop"];

/// Tools only a team's lead (the main session) gets: making and removing
/// its team.
pub const LEAD_TOOLS: &[&str] = &["TeamCreate", "TeamDelete"];

/// The tools a child gets, in the order of `available`:
/// 1. everything available, minus tools no sub-agent gets: `interactive_only`
///    ones, [`LEAD_TOOLS`], and `Agent` unless the definition lists it explicitly and the
///    child (at `depth`, the main session being 0) is shallower than
///    `max_depth`;
/// 2. the allowlist (`tools`), matched by base name; absent → all;
/// 3. the denylist (`disallowedTools`), matched by base name.
///
/// An agent with `memory:` gets [`MEMORY_TOOLS`] whatever its allowlist
/// says (it manages its memory folder with them); the denylist still wins.
pub fn tool_pool(
    available: &[String],
    is_interactive_only: impl Fn(&str) -> bool,
    def: &AgentDef,
    depth: u32,
    max_depth: u32,
) -> Vec<String> {
    let lists_agent = def
        .tools
        .as_ref()
        .is_some_and(|t| t.iter().any(|s| base_name(s) == AGENT_TOOL));
    let nesting_allowed = lists_agent && depth < max_depth;
    available
        .iter()
        .filter(|name| !is_interactive_only(name))
        .filter(|name| !LEAD_TOOLS.contains(&name.as_str()))
        .filter(|name| !NESTING_TOOLS.contains(&name.as_str()) || nesting_allowed)
        .filter(|name| match &def.tools {
            None => true,
            Some(_) if def.memory.is_some() && MEMORY_TOOLS.contains(&name.as_str()) => true,
            Some(allow) => allow.iter().any(|s| base_name(s) == name.as_str()),
        })
        .filter(|name| {
            !def.disallowed_tools
                .iter()
                .any(|s| base_name(s) == name.as_str())
        })
        .cloned()
        .collect()
}

/// The tools an agent with `memory:` always gets.
pub const MEMORY_TOOLS: &[&str] = &["Read", "Write", "Edit"];

/// The agent types a session running as `def` may spawn, when its `tools`
/// name them (`Agent(Explore, Plan)`); `None` when it may spawn any (a bare
/// `Agent`, or no `Agent(…)` entry). Several entries add up.
pub fn spawnable_types(def: &AgentDef) -> Option<Vec<String>> {
    let tools = def.tools.as_ref()?;
    if tools.iter().any(|t| t.trim() == AGENT_TOOL) {
        return None;
    }
    let mut out: Option<Vec<String>> = None;
    for t in tools {
        if let Some(types) = agent_spec_types(t) {
            out.get_or_insert_with(Vec::new).extend(types);
        }
    }
    out
}

/// The type an Agent call without `subagent_type` starts, given the types
/// the caller may start (in listing order): `general-purpose` when it is
/// among them, otherwise the first (a coordinator limited to
/// `Agent(worker)` starts a worker).
pub fn default_type<'a>(listed: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let listed: Vec<&str> = listed.into_iter().collect();
    listed
        .iter()
        .find(|t| **t == crate::catalog::GENERAL_PURPOSE)
        .or_else(|| listed.first())
        .copied()
}

/// What the engine offers, for explaining why an agent does not get a
/// tool its `tools` names.
#[derive(Debug, Clone, Default)]
pub struct ToolOffer {
    /// Tools that have a spec and can run, before deny rules.
    pub known: Vec<String>,
    /// Tools a deny rule names as a whole, each with that rule.
    pub denied: Vec<(String, String)>,
    /// Tools only an interactive main session gets.
    pub interactive_only: Vec<String>,
    /// The shared MCP servers' names.
    pub mcp_servers: Vec<String>,
    /// `agents.max_depth`.
    pub max_depth: u32,
}

/// Why a tool an agent asks for is not in its pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Withheld {
    /// No tool of this name exists in this engine.
    Unknown,
    /// A deny rule in the settings names the whole tool.
    Denied { rule: String },
    /// The agent's own `disallowedTools` names it.
    Disallowed,
    /// Only an interactive main session gets it.
    InteractiveOnly,
    /// A sub-agent tool, given only to a child shallower than `max_depth`.
    Depth { max_depth: u32 },
    /// Only a team's lead (the main session) gets it.
    LeadOnly,
    /// An MCP tool whose server is neither shared nor the agent's own.
    McpServerMissing { server: String },
}

impl std::fmt::Display for Withheld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Withheld::Unknown => f.write_str("unknown tool"),
            Withheld::Denied { rule } => write!(f, "denied by the permission rule `{rule}`"),
            Withheld::Disallowed => f.write_str("listed in disallowedTools"),
            Withheld::InteractiveOnly => f.write_str("only an interactive main session gets it"),
            Withheld::LeadOnly => f.write_str("only the main session, a team's lead, gets it"),
            Withheld::Depth { max_depth } => {
                write!(
                    f,
                    "sub-agent tools need `Agent` in the list and a depth below agents.max_depth = {max_depth}"
                )
            }
            Withheld::McpServerMissing { server } => {
                write!(f, "MCP server `{server}` is not configured")
            }
        }
    }
}

/// One tool an agent's `tools` names that it will not get, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WithheldTool {
    pub tool: String,
    #[serde(flatten)]
    pub why: Withheld,
}

/// Each tool `def`'s allowlist names that a child at `depth` will not get,
/// in the order written, once each; the first reason that applies wins
/// (unknown, MCP server missing, denied, disallowed, interactive-only,
/// lead-only, depth). MCP tools of a configured server are assumed to exist: which
/// tools a server has is known only once it runs.
pub fn withheld_tools(def: &AgentDef, offer: &ToolOffer, depth: u32) -> Vec<WithheldTool> {
    let Some(allow) = &def.tools else {
        return Vec::new();
    };
    let lists_agent = allow.iter().any(|s| base_name(s) == AGENT_TOOL);
    let mut out: Vec<WithheldTool> = Vec::new();
    for spec in allow {
        let name = base_name(spec);
        if name == "*" || out.iter().any(|w| w.tool == name) {
            continue;
        }
        let why = if let Some(rest) = name.strip_prefix("mcp__") {
            let server = rest.split("__").next().unwrap_or(rest);
            let own = def.mcp_servers.iter().any(|s| s.name() == server);
            if own || offer.mcp_servers.iter().any(|s| s == server) {
                None
            } else {
                Some(Withheld::McpServerMissing {
                    server: server.to_string(),
                })
            }
        } else if !offer.known.iter().any(|k| k == name) {
            Some(Withheld::Unknown)
        } else if let Some((_, rule)) = offer.denied.iter().find(|(t, _)| t == name) {
            Some(Withheld::Denied { rule: rule.clone() })
        } else if def.disallowed_tools.iter().any(|s| base_name(s) == name) {
            Some(Withheld::Disallowed)
        } else if offer.interactive_only.iter().any(|t| t == name) {
            Some(Withheld::InteractiveOnly)
        } else if LEAD_TOOLS.contains(&name) {
            Some(Withheld::LeadOnly)
        } else if NESTING_TOOLS.contains(&name) && !(lists_agent && depth < offer.max_depth) {
            Some(Withheld::Depth {
                max_depth: offer.max_depth,
            })
        } else {
            None
        };
        if let Some(why) = why {
            out.push(WithheldTool {
                tool: name.to_string(),
                why,
            });
        }
    }
    out
}

/// `Read, Grep` (allowlist minus denylist), none, all tools except some,
/// or all tools. With an `offer`, the allowlist shows only the tools the
/// agent really gets as a child of the main session.
pub fn tools_summary(def: &AgentDef, offer: Option<&ToolOffer>) -> ToolsColumn {
    let denied: Vec<&str> = def.disallowed_tools.iter().map(|s| base_name(s)).collect();
    let withheld = offer.map(|o| withheld_tools(def, o, 1)).unwrap_or_default();
    match &def.tools {
        Some(allow) => {
            let mut names: Vec<String> = Vec::new();
            for s in allow {
                let b = base_name(s);
                if !denied.contains(&b)
                    && !names.iter().any(|n| n == b)
                    && !withheld.iter().any(|w| w.tool == b)
                {
                    names.push(b.to_string());
                }
            }
            if names.is_empty() {
                ToolsColumn::NoTools
            } else {
                ToolsColumn::Only { tools: names }
            }
        }
        None if denied.is_empty() => ToolsColumn::All,
        None => {
            let mut uniq: Vec<String> = Vec::new();
            for d in denied {
                if !uniq.iter().any(|u| u == d) {
                    uniq.push(d.to_string());
                }
            }
            ToolsColumn::AllExcept { tools: uniq }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Source;

    fn all() -> Vec<String> {
        [
            "Agent", "AskUser", "Bash", "Edit", "Glob", "Grep", "Read", "Write",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    fn def(tools: Option<&[&str]>, deny: &[&str]) -> AgentDef {
        let mut d = AgentDef::new("x", "d", Source::Project);
        d.tools = tools.map(|t| t.iter().map(|s| s.to_string()).collect());
        d.disallowed_tools = deny.iter().map(|s| s.to_string()).collect();
        d
    }

    fn pool(d: &AgentDef, depth: u32) -> Vec<String> {
        tool_pool(&all(), |n| n == "AskUser", d, depth, 3)
    }

    #[test]
    fn no_allowlist_means_everything_but_agent_and_interactive_tools() {
        assert_eq!(
            pool(&def(None, &[]), 1),
            ["Bash", "Edit", "Glob", "Grep", "Read", "Write"]
        );
    }

    #[test]
    fn allowlist_and_denylist_match_base_names() {
        let d = def(
            Some(&["Read", "Bash(git log:*)", "Grep", "Nope"]),
            &["Grep"],
        );
        assert_eq!(pool(&d, 1), ["Bash", "Read"]);
        let d = def(None, &["Bash(rm:*)", "Write"]);
        assert_eq!(pool(&d, 1), ["Edit", "Glob", "Grep", "Read"]);
        assert!(
            pool(&def(Some(&[]), &[]), 1).is_empty(),
            "an empty allowlist is no tools"
        );
    }

    #[test]
    fn nesting_is_opt_in_and_bounded_by_depth() {
        let d = def(Some(&["Agent", "Read"]), &[]);
        assert_eq!(pool(&d, 1), ["Agent", "Read"]);
        assert_eq!(pool(&d, 3), ["Read"]);
        let d = def(Some(&["Agent(Explore)", "AskUser"]), &[]);
        assert_eq!(pool(&d, 2), ["Agent"]);
    }

    fn tools_summary_plain(d: &AgentDef) -> String {
        words(tools_summary(d, None))
    }

    /// The column as the embedded `agent_tools` template words it.
    fn words(c: ToolsColumn) -> String {
        c.words(&crate::templates::Templates::load(None).0)
    }

    fn offer() -> ToolOffer {
        let mut known = all();
        known.push("SendMessage".into());
        ToolOffer {
            known,
            denied: vec![("Write".into(), "Write".into())],
            interactive_only: vec!["AskUser".into()],
            mcp_servers: vec!["git".into()],
            max_depth: 2,
        }
    }

    #[test]
    fn withheld_tools_say_why() {
        let mut d = def(
            Some(&[
                "WebFetch",
                "Read",
                "Write",
                "Bash(git:*)",
                "AskUser",
                "SendMessage",
                "mcp__git__log",
                "mcp__jira__find",
                "WebFetch",
            ]),
            &["Bash"],
        );
        let got = withheld_tools(&d, &offer(), 1);
        let want = vec![
            WithheldTool {
                tool: "WebFetch".into(),
                why: Withheld::Unknown,
            },
            WithheldTool {
                tool: "Write".into(),
                why: Withheld::Denied {
                    rule: "Write".into(),
                },
            },
            WithheldTool {
                tool: "Bash".into(),
                why: Withheld::Disallowed,
            },
            WithheldTool {
                tool: "AskUser".into(),
                why: Withheld::InteractiveOnly,
            },
            WithheldTool {
                tool: "SendMessage".into(),
                why: Withheld::Depth { max_depth: 2 },
            },
            WithheldTool {
                tool: "mcp__jira__find".into(),
                why: Withheld::McpServerMissing {
                    server: "jira".into(),
                },
            },
        ];
        assert_eq!(got, want);
        // The agent's own inline server counts.
        d.mcp_servers = vec![crate::catalog::AgentMcpServer::Inline {
            name: "jira".into(),
            config: crate::config::McpServerConfig {
                command: Some("x".into()),
                ..Default::default()
            },
        }];
        assert!(
            !withheld_tools(&d, &offer(), 1)
                .iter()
                .any(|w| w.tool.starts_with("mcp__"))
        );
        assert_eq!(
            serde_json::to_value(&want[1]).unwrap(),
            serde_json::json!({"tool": "Write", "reason": "denied", "rule": "Write"})
        );
        assert_eq!(
            words(tools_summary(&d, Some(&offer()))),
            "Read, mcp__git__log, mcp__jira__find"
        );
        let only_missing = def(Some(&["WebFetch", "WebSearch"]), &[]);
        assert_eq!(words(tools_summary(&only_missing, Some(&offer()))), "None");
        assert_eq!(
            words(tools_summary(&only_missing, None)),
            "WebFetch, WebSearch"
        );
    }

    #[test]
    fn summaries() {
        assert_eq!(tools_summary_plain(&def(None, &[])), "All tools");
        assert_eq!(
            tools_summary_plain(&def(None, &["Agent", "Edit", "Write"])),
            "All tools except Agent, Edit, Write"
        );
        assert_eq!(
            tools_summary_plain(&def(Some(&["Read", "Bash(git:*)", "Grep"]), &["Grep"])),
            "Read, Bash"
        );
        assert_eq!(tools_summary_plain(&def(Some(&[]), &[])), "None");
    }
}
