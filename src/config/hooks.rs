//! Hooks, resolved: the events cadre fires, matchers compiled once, and
//! the hook lists of settings and of agent files in the one form the
//! runtime uses.
//!
//! Settings keep their hooks as written (`HookSettings`, for `config show`
//! and the layers); an agent file's frontmatter `hooks` is read by the
//! catalog. Both are resolved here, when the snapshot is built: a matcher
//! that is not a valid regular expression is reported there, with its
//! position, and the hook is left out. Nothing re-parses them per call.

use regex::Regex;
use serde::{Serialize, Serializer};

use super::settings::{HookConfig, HookSettings};

/// The events cadre fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum HookEvent {
    SubagentStart,
    SubagentStop,
    PreToolUse,
    PostToolUse,
    /// Before a compaction; the matcher is tested against its trigger
    /// (`auto` or `manual`).
    PreCompact,
    /// A teammate ended its turn and is about to idle; the matcher is
    /// tested against its name. Exit 2 keeps it working, with stderr as
    /// its next message.
    TeammateIdle,
    /// A task was added to a team's list; matcher: the team's name.
    TaskCreated,
    /// A team task became completed; matcher: the team's name.
    TaskCompleted,
}

impl HookEvent {
    pub const ALL: [HookEvent; 8] = [
        HookEvent::SubagentStart,
        HookEvent::SubagentStop,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PreCompact,
        HookEvent::TeammateIdle,
        HookEvent::TaskCreated,
        HookEvent::TaskCompleted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::TeammateIdle => "TeammateIdle",
            HookEvent::TaskCreated => "TaskCreated",
            HookEvent::TaskCompleted => "TaskCompleted",
        }
    }

    /// An event name as written in frontmatter (`Stop` = `SubagentStop`).
    pub fn from_frontmatter(name: &str) -> Option<Self> {
        match name {
            "Stop" => Some(HookEvent::SubagentStop),
            other => HookEvent::ALL.into_iter().find(|e| e.as_str() == other),
        }
    }

    /// The settings' hooks of this event, as written.
    pub fn in_settings(self, settings: &HookSettings) -> &[HookConfig] {
        match self {
            HookEvent::SubagentStart => &settings.subagent_start,
            HookEvent::SubagentStop => &settings.subagent_stop,
            HookEvent::PreToolUse => &settings.pre_tool_use,
            HookEvent::PostToolUse => &settings.post_tool_use,
            HookEvent::PreCompact => &settings.pre_compact,
            HookEvent::TeammateIdle => &settings.teammate_idle,
            HookEvent::TaskCreated => &settings.task_created,
            HookEvent::TaskCompleted => &settings.task_completed,
        }
    }
}

/// A hook's matcher, compiled. Absent, empty or `*` selects everything;
/// otherwise a regular expression that must match the whole target (an
/// agent type, a tool name, a compaction trigger).
#[derive(Debug, Clone)]
pub struct Matcher {
    text: Option<String>,
    re: Option<Regex>,
}

impl Matcher {
    /// Compiles a matcher; the error says why it is not a valid regex.
    pub fn new(text: Option<&str>) -> Result<Matcher, String> {
        let text = text.map(str::trim).filter(|m| !m.is_empty());
        let re = match text {
            None | Some("*") => None,
            Some(m) => Some(Regex::new(&format!("^(?:{m})$")).map_err(|e| {
                let why = e.to_string();
                let last = why.lines().last().unwrap_or("invalid").trim().to_string();
                format!("matcher {m:?} is not a valid regular expression ({last})")
            })?),
        };
        Ok(Matcher {
            text: text.map(str::to_string),
            re,
        })
    }

    pub fn matches(&self, target: &str) -> bool {
        self.re.as_ref().is_none_or(|re| re.is_match(target))
    }

    /// The matcher as written (trimmed); `None` when absent or empty.
    pub fn text(&self) -> Option<&str> {
        self.text.as_deref()
    }
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Serialize for Matcher {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.text.serialize(s)
    }
}

/// One resolved hook.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hook {
    pub event: HookEvent,
    pub matcher: Matcher,
    /// Run with `sh -c` in the session's working directory.
    pub command: String,
    pub timeout_ms: u64,
}

impl Hook {
    /// Resolves one hook as written; `Err` when its matcher is invalid.
    pub fn new(event: HookEvent, config: &HookConfig) -> Result<Hook, String> {
        Ok(Hook {
            event,
            matcher: Matcher::new(config.matcher.as_deref())?,
            command: config.command.clone(),
            timeout_ms: config.timeout_ms,
        })
    }

    /// The hook as settings write it (what the runner takes).
    pub fn config(&self) -> HookConfig {
        HookConfig {
            matcher: self.matcher.text().map(str::to_string),
            command: self.command.clone(),
            timeout_ms: self.timeout_ms,
        }
    }
}

/// A list of resolved hooks, in the order written.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Hooks(pub Vec<Hook>);

impl Hooks {
    /// The settings' hooks, resolved. Each hook whose matcher is invalid is
    /// left out and returned with the reason, for a diagnostic.
    pub fn from_settings(
        settings: &HookSettings,
    ) -> (Hooks, Vec<(HookEvent, &HookConfig, String)>) {
        let mut out = Vec::new();
        let mut bad = Vec::new();
        for event in HookEvent::ALL {
            for config in event.in_settings(settings) {
                match Hook::new(event, config) {
                    Ok(h) => out.push(h),
                    Err(why) => bad.push((event, config, why)),
                }
            }
        }
        (Hooks(out), bad)
    }

    /// The hooks of `event` whose matcher selects `target`, in order.
    pub fn select<'a>(
        &'a self,
        event: HookEvent,
        target: &'a str,
    ) -> impl Iterator<Item = &'a Hook> + 'a {
        self.0
            .iter()
            .filter(move |h| h.event == event && h.matcher.matches(target))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn matcher_rules() {
        let m = |t: Option<&str>, target: &str| Matcher::new(t).unwrap().matches(target);
        assert!(m(None, "Bash"));
        assert!(m(Some(""), "Bash"));
        assert!(m(Some(" * "), "Bash"));
        assert!(m(Some("Bash"), "Bash"));
        assert!(!m(Some("Bash"), "BashOutput"), "whole name only");
        assert!(!m(Some("Write"), "TodoWrite"));
        assert!(m(Some("Edit|Write"), "Write"));
        assert!(m(Some("mcp__fs__.*"), "mcp__fs__read"));
        assert!(!m(Some("mcp__fs__.*"), "mcp__git__log"));
        let err = Matcher::new(Some("(unclosed")).unwrap_err();
        assert!(
            err.starts_with("matcher \"(unclosed\" is not a valid"),
            "{err}"
        );
    }

    #[test]
    fn settings_hooks_resolve_and_bad_matchers_are_left_out() {
        let hook = |m: &str, c: &str| HookConfig {
            matcher: Some(m.into()),
            command: c.into(),
            timeout_ms: 1,
        };
        let settings = HookSettings {
            pre_tool_use: vec![hook("Bash", "a"), hook("[", "b")],
            pre_compact: vec![hook("(", "c"), hook("auto", "d")],
            ..HookSettings::default()
        };
        let (hooks, bad) = Hooks::from_settings(&settings);
        let names: Vec<&str> = hooks.0.iter().map(|h| h.command.as_str()).collect();
        assert_eq!(names, ["a", "d"]);
        let bad: Vec<(HookEvent, &str)> = bad
            .iter()
            .map(|(e, c, _)| (*e, c.command.as_str()))
            .collect();
        assert_eq!(
            bad,
            [(HookEvent::PreToolUse, "b"), (HookEvent::PreCompact, "c")]
        );
        let sel: Vec<&str> = hooks
            .select(HookEvent::PreCompact, "auto")
            .map(|h| h.command.as_str())
            .collect();
        assert_eq!(sel, ["d"]);
    }
}
