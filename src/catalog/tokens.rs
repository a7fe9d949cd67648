//! The tools tokenizer: turns `tools: Read, Bash(git log:*) Grep` into
//! tool specs. Commas and white space separate specs, except inside
//! parentheses, where a permission pattern may contain both. It knows
//! nothing about which tools exist.

/// Splits a tools string on commas and white space outside parentheses.
///
/// `Read, Bash(git log:*)` → `["Read", "Bash(git log:*)"]`. An unbalanced
/// `)` is kept as text; an unclosed `(` keeps the rest of the string in one
/// token. Empty tokens are dropped.
pub fn tokenize_tools(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => {
                depth += 1;
                current.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            c if depth == 0 && (c == ',' || c.is_whitespace()) => {
                if !current.is_empty() {
                    tokens.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

/// Older tool names still found in agent files and settings, and the tool
/// each now means: `Task` was renamed `Agent`; `MultiEdit` (several edits
/// of one file) was removed in favour of `Edit`; `LS` (list a folder) was
/// retired in favour of `Glob`; `NotebookRead` was merged into `Read`.
/// Claude Code renames only `Task`: it drops the other three as unknown
/// names, so an agent listing `Read, LS` there ends up without a way to
/// list folders. cadre gives their successors instead (docs/tools.md).
pub const LEGACY_TOOL_NAMES: &[(&str, &str)] = &[
    ("Task", "Agent"),
    ("MultiEdit", "Edit"),
    ("LS", "Glob"),
    ("NotebookRead", "Read"),
];

/// The current name for a tool name (itself when it is not a legacy one).
pub fn canonical_tool_name(name: &str) -> &str {
    LEGACY_TOOL_NAMES
        .iter()
        .find(|(old, _)| *old == name)
        .map_or(name, |(_, new)| new)
}

/// Claude Code's old name for a tool, as its current one: `Task` and
/// `Task(x)` are `Agent` and `Agent(x)`; `MultiEdit` is `Edit`, `LS` is
/// `Glob` (see [`LEGACY_TOOL_NAMES`]).
pub fn canonical_tool_spec(spec: &str) -> String {
    let spec = spec.trim();
    let base = base_name(spec);
    let new = canonical_tool_name(base);
    if new != base {
        return format!("{new}{}", &spec[base.len()..]);
    }
    spec.to_string()
}

/// The agent types an `Agent(A, B)` spec allows: `Agent(Explore, Plan)` →
/// `[Explore, Plan]`; `None` for any other spec (a bare `Agent` allows all).
pub fn agent_spec_types(spec: &str) -> Option<Vec<String>> {
    let spec = spec.trim();
    if base_name(spec) != "Agent" {
        return None;
    }
    let inner = spec.get(spec.find('(')? + 1..)?.strip_suffix(')')?;
    Some(
        inner
            .split([',', ' ', '\t'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    )
}

/// The part of a tool spec before `(`: `Bash(git log:*)` → `Bash`.
pub fn base_name(spec: &str) -> &str {
    let spec = spec.trim();
    match spec.find('(') {
        Some(i) => spec[..i].trim_end(),
        None => spec,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn task_is_agent_and_agent_lists_types() {
        assert_eq!(canonical_tool_spec("Task"), "Agent");
        assert_eq!(canonical_tool_spec("Task(Explore)"), "Agent(Explore)");
        assert_eq!(canonical_tool_spec("Tasks"), "Tasks");
        assert_eq!(canonical_tool_spec("MultiEdit"), "Edit");
        assert_eq!(canonical_tool_spec("MultiEdit(src/**)"), "Edit(src/**)");
        assert_eq!(canonical_tool_spec(" LS "), "Glob");
        assert_eq!(canonical_tool_spec("LSX"), "LSX");
        assert_eq!(canonical_tool_spec("NotebookRead"), "Read");
        assert_eq!(
            agent_spec_types("Agent(Explore, Plan)"),
            Some(vec!["Explore".to_string(), "Plan".to_string()])
        );
        assert_eq!(agent_spec_types("Agent"), None);
        assert_eq!(agent_spec_types("Bash(x)"), None);
    }

    #[test]
    fn splits_on_commas_and_spaces() {
        assert_eq!(
            tokenize_tools("Read, Grep,Glob  Bash"),
            ["Read", "Grep", "Glob", "Bash"]
        );
        assert_eq!(tokenize_tools("\tRead\n,\n"), ["Read"]);
        assert!(tokenize_tools("").is_empty());
        assert!(tokenize_tools(" , ,, ").is_empty());
    }

    #[test]
    fn parentheses_keep_patterns_whole() {
        assert_eq!(
            tokenize_tools("Bash(git log:*), Bash(npm run test:*) Read"),
            ["Bash(git log:*)", "Bash(npm run test:*)", "Read"]
        );
        assert_eq!(
            tokenize_tools("Bash(a (b, c) d), X"),
            ["Bash(a (b, c) d)", "X"]
        );
        // Unclosed: the rest stays together.
        assert_eq!(
            tokenize_tools("Read Bash(git log, x"),
            ["Read", "Bash(git log, x"]
        );
        // Stray closer is plain text.
        assert_eq!(tokenize_tools("a) b"), ["a)", "b"]);
    }

    #[test]
    fn base_names() {
        assert_eq!(base_name("Bash(git log:*)"), "Bash");
        assert_eq!(base_name(" Read "), "Read");
        assert_eq!(base_name("mcp__srv__tool"), "mcp__srv__tool");
        assert_eq!(base_name("(x)"), "");
    }

    proptest! {
        #[test]
        fn tokenizer_never_panics_and_tokens_are_clean(s in any::<String>()) {
            for t in tokenize_tools(&s) {
                prop_assert!(!t.is_empty());
                let _ = base_name(&t);
            }
        }

        #[test]
        fn tokenizer_on_tool_like_text(s in "[A-Za-z(): ,*_-]{0,60}") {
            let tokens = tokenize_tools(&s);
            for t in &tokens {
                prop_assert!(!t.starts_with(',') && !t.starts_with(' '));
            }
        }
    }
}
