//! Which MCP tools a session gets (least privilege) and which servers a
//! `requiredMcpServers` pattern names.
//!
//! An agent with an explicit `tools` allowlist gets only the MCP tools it
//! lists — exact names, `mcp__server` for a whole server, or `*` globs such
//! as `mcp__github__*`; an agent without one gets every MCP tool. Then its
//! `disallowedTools` (same matching) and the settings' deny rules that
//! cover a whole tool remove tools.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::catalog::{AgentDef, base_name};
use crate::permissions::Rules;
use crate::tools::Tool;

use super::tool::McpTool;

/// Whether an allowlist or denylist entry covers the MCP tool `name`.
pub fn matches_entry(entry: &str, name: &str) -> bool {
    let e = base_name(entry);
    if e == "*" {
        return true;
    }
    if e.contains('*') {
        return wildcard(e, name);
    }
    e == name
        || (e.starts_with("mcp__") && e.matches("__").count() == 1 && {
            // `mcp__server` names every tool of that server.
            name.strip_prefix(e)
                .is_some_and(|rest| rest.starts_with("__"))
        })
}

/// `*` matches any run of characters; everything else is literal.
fn wildcard(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = match parts.split_first() {
        Some(x) => x,
        None => return text.is_empty(),
    };
    let Some(mut left) = text.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return left.is_empty();
    };
    for m in middle {
        match left.find(m) {
            Some(i) => left = &left[i + m.len()..],
            None => return false,
        }
    }
    left.ends_with(last)
}

/// Whether a `requiredMcpServers` pattern names `server`: a
/// case-insensitive substring match, as in Claude Code.
pub fn required_matches(pattern: &str, server: &str) -> bool {
    server.to_lowercase().contains(&pattern.to_lowercase())
}

/// The MCP tools a session may use, out of `all`, for the agent `def`
/// (`None`: the default main agent, which gets every tool), minus tools a
/// settings deny rule covers entirely.
pub fn session_mcp_tools(
    all: Vec<Arc<McpTool>>,
    def: Option<&AgentDef>,
    rules: &Rules,
    cwd: &Path,
) -> Vec<Arc<McpTool>> {
    all.into_iter()
        .filter(|t| {
            let name = t.name();
            let allowed = def
                .and_then(|d| d.tools.as_ref())
                .is_none_or(|allow| allow.iter().any(|e| matches_entry(e, name)));
            let disallowed =
                def.is_some_and(|d| d.disallowed_tools.iter().any(|e| matches_entry(e, name)));
            let denied = rules
                .deny
                .iter()
                .any(|r| r.matches(name, &Value::Null, cwd));
            allowed && !disallowed && !denied
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_match_exact_names_servers_and_globs() {
        let n = "mcp__github__create_issue";
        assert!(matches_entry("mcp__github__create_issue", n));
        assert!(matches_entry("mcp__github__*", n));
        assert!(matches_entry("mcp__*", n));
        assert!(matches_entry("mcp__github", n));
        assert!(matches_entry("mcp__*__create_*", n));
        assert!(matches_entry("*", n));
        assert!(!matches_entry("mcp__git", n));
        assert!(!matches_entry("mcp__gitlab__*", n));
        assert!(!matches_entry("Read", n));
        assert!(!matches_entry("mcp__github__create", n));
    }

    #[test]
    fn required_patterns_are_case_insensitive_substrings() {
        assert!(required_matches("GitHub", "my-github-server"));
        assert!(!required_matches("slack", "github"));
    }
}
