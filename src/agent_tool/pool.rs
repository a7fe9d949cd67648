//! A child's tool pool and the one-line summary the Agent tool shows.

use crate::catalog::{AgentDef, agent_spec_types, base_name};

use super::AGENT_TOOL;

/// Tools that start or manage sub-agents: a child gets them only when it
/// may nest (it lists `Agent` and is shallower than `max_depth`).
pub const NESTING_TOOLS: &[&str] = &[AGENT_TOOL, "SendMessage", "TaskOutput", "TaskStop"];

/// The tools a child gets, in the order of `available`:
/// 1. everything available, minus tools no sub-agent gets: `interactive_only`
///    ones, and `Agent` unless the definition lists it explicitly and the
///    child (at `depth`, the main session being 0) is shallower than
///    `max_depth`;
/// 2. the allowlist (`tools`), matched by base name; absent → all;
/// 3. the denylist (`disallowedTools`), matched by base name.
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
        .filter(|name| !NESTING_TOOLS.contains(&name.as_str()) || nesting_allowed)
        .filter(|name| match &def.tools {
            None => true,
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

/// `Read, Grep` (allowlist minus denylist), `None`, `All tools except A, B`,
/// or `All tools`.
pub fn tools_summary(def: &AgentDef) -> String {
    let denied: Vec<&str> = def.disallowed_tools.iter().map(|s| base_name(s)).collect();
    match &def.tools {
        Some(allow) => {
            let mut names: Vec<&str> = Vec::new();
            for s in allow {
                let b = base_name(s);
                if !denied.contains(&b) && !names.contains(&b) {
                    names.push(b);
                }
            }
            if names.is_empty() {
                "None".to_string()
            } else {
                names.join(", ")
            }
        }
        None if denied.is_empty() => "All tools".to_string(),
        None => {
            let mut uniq: Vec<&str> = Vec::new();
            for d in denied {
                if !uniq.contains(&d) {
                    uniq.push(d);
                }
            }
            format!("All tools except {}", uniq.join(", "))
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

    #[test]
    fn summaries() {
        assert_eq!(tools_summary(&def(None, &[])), "All tools");
        assert_eq!(
            tools_summary(&def(None, &["Agent", "Edit", "Write"])),
            "All tools except Agent, Edit, Write"
        );
        assert_eq!(
            tools_summary(&def(Some(&["Read", "Bash(git:*)", "Grep"]), &["Grep"])),
            "Read, Bash"
        );
        assert_eq!(tools_summary(&def(Some(&[]), &[])), "None");
    }
}
