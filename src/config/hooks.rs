//! Hooks, resolved: the events cadre fires, matchers compiled once, and
//! the hook lists of settings and of agent files in the one form the
//! runtime uses.
//!
//! Settings keep their hooks as written (`HookSettings`, for `config show`
//! and the layers); an agent file's frontmatter `hooks` is read by the
//! catalog. Each hook entry, wherever it is written, is read by
//! [`read_entry`] here, strictly: an entry with an unknown key or a value
//! of the wrong type is reported at its position and never run. Both are
//! resolved here, when the snapshot is built: a matcher that is not a valid
//! regular expression is reported there, with its position, and the hook is
//! left out. Nothing re-parses them per call.

use regex::Regex;
use serde::{Serialize, Serializer};

use super::settings::{DEFAULT_HOOK_TIMEOUT_MS, HookConfig, HookSettings};
use crate::diagnostic::Pos;
use crate::raw::{Kind, Node};

/// The events cadre fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum HookEvent {
    SubagentStart,
    SubagentStop,
    PreToolUse,
    /// After a tool ran and succeeded.
    PostToolUse,
    /// After a tool ran and failed (its result is an error).
    PostToolUseFailure,
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
    pub const ALL: [HookEvent; 9] = [
        HookEvent::SubagentStart,
        HookEvent::SubagentStop,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PostToolUseFailure,
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
            HookEvent::PostToolUseFailure => "PostToolUseFailure",
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
            HookEvent::PostToolUseFailure => &settings.post_tool_use_failure,
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
    /// A shell command, or with `args` the program to run directly.
    pub command: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    pub timeout_ms: u64,
    /// Runs in the background; the event does not wait for it.
    #[serde(rename = "async")]
    pub run_async: bool,
}

impl Hook {
    /// Resolves one hook as written; `Err` when its matcher is invalid.
    pub fn new(event: HookEvent, config: &HookConfig) -> Result<Hook, String> {
        Ok(Hook {
            event,
            matcher: Matcher::new(config.matcher.as_deref())?,
            command: config.command.clone(),
            args: config.args.clone(),
            timeout_ms: config.timeout_ms,
            run_async: config.run_async,
        })
    }

    /// The hook as settings write it (what the runner takes).
    pub fn config(&self) -> HookConfig {
        HookConfig {
            matcher: self.matcher.text().map(str::to_string),
            command: self.command.clone(),
            args: self.args.clone(),
            timeout_ms: self.timeout_ms,
            run_async: self.run_async,
        }
    }
}

/// The keys of a command hook entry in Claude Code's settings.
const ENTRY_KEYS: &[&str] = &[
    "type",
    "command",
    "args",
    "timeout",
    "async",
    "shell",
    "statusMessage",
];

/// The keys cadre's own forms add: the flat form's `matcher` and
/// `timeout_ms` (milliseconds).
const CADRE_KEYS: &[&str] = &["matcher", "timeout_ms"];

/// Claude Code's keys of a command hook that cadre does not implement: an
/// entry that uses one is not run at all, rather than run without it.
const UNIMPLEMENTED_KEYS: &[&str] = &["if", "once", "asyncRewake"];

/// One hook entry as written, read strictly.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// A command hook with every key read (`matcher` left `None`: the
    /// caller knows where the matcher is written).
    Command(HookConfig),
    /// A hook of another `type` (`http`, `prompt`, `agent`, …), written at
    /// `pos`; cadre runs only command hooks.
    OtherType { kind: String, pos: Pos },
}

/// Reads one hook entry — `{type?, command, args?, timeout?, async?,
/// shell?, statusMessage?}`, and in cadre's own forms (`cadre_form`: its
/// settings files and agent frontmatter) also `matcher` and `timeout_ms` —
/// and checks every key. Any problem is returned with its position, and
/// then the entry must not run: a hook never runs with a part of it dropped
/// (a dropped `args` turns `bash script.sh` into a bare `bash` that executes
/// its JSON input).
pub fn read_entry(v: &Node, cadre_form: bool) -> Result<Entry, Vec<(Pos, String)>> {
    let Kind::Map(entries) = &v.kind else {
        return Err(vec![(
            v.pos,
            format!("expected a hook mapping, found {}", v.type_name()),
        )]);
    };
    if let Some(kind) = v.get("type") {
        match kind.as_str() {
            Some("command") => {}
            Some(other) => {
                return Ok(Entry::OtherType {
                    kind: other.to_string(),
                    pos: kind.pos,
                });
            }
            None => {
                return Err(vec![(
                    kind.pos,
                    format!("`type`: expected a string, found {}", kind.type_name()),
                )]);
            }
        }
    }
    let mut problems = Vec::new();
    let mut config = HookConfig {
        matcher: None,
        command: String::new(),
        args: None,
        timeout_ms: DEFAULT_HOOK_TIMEOUT_MS,
        run_async: false,
    };
    let mut timeout_ms = None;
    let mut unknown = Vec::new();
    for (key, value) in entries {
        match key.name.as_str() {
            "type" => {}
            "command" => match value.as_str().map(str::trim) {
                Some(c) if !c.is_empty() => config.command = c.to_string(),
                _ => problems.push(wrong(value, "command", "a command (a non-empty string)")),
            },
            "args" => match &value.kind {
                Kind::Seq(items) if items.iter().all(|i| i.as_str().is_some()) => {
                    config.args = Some(
                        items
                            .iter()
                            .filter_map(|i| i.as_str().map(str::to_string))
                            .collect(),
                    );
                }
                _ => problems.push(wrong(value, "args", "a list of strings")),
            },
            "timeout" => match positive(value) {
                Some(s) => timeout_ms = Some((s * 1000.0).min(u64::MAX as f64) as u64),
                None => problems.push(wrong(value, "timeout", "a positive number of seconds")),
            },
            "matcher" if cadre_form => match value.scalar_text() {
                Some(m) => config.matcher = Some(m),
                None => problems.push(wrong(value, "matcher", "a string")),
            },
            "timeout_ms" if cadre_form => match positive(value) {
                Some(ms) if ms.fract() == 0.0 => timeout_ms = Some(ms.min(u64::MAX as f64) as u64),
                _ => problems.push(wrong(
                    value,
                    "timeout_ms",
                    "a positive whole number of milliseconds",
                )),
            },
            "async" => match value.kind {
                Kind::Bool(b) => config.run_async = b,
                _ => problems.push(wrong(value, "async", "true or false")),
            },
            "shell" => match value.as_str() {
                Some("bash") => {}
                Some(other) => problems.push((
                    value.pos,
                    format!("`shell`: {other:?} is not supported; cadre runs hooks with bash"),
                )),
                None => problems.push(wrong(value, "shell", "a string")),
            },
            "statusMessage" => {
                if value.as_str().is_none() {
                    problems.push(wrong(value, "statusMessage", "a string"));
                }
            }
            k if UNIMPLEMENTED_KEYS.contains(&k) => problems.push((
                key.pos,
                format!("`{k}` is a Claude Code hook setting cadre does not implement"),
            )),
            _ => unknown.push(key),
        }
    }
    for key in unknown {
        let extra = if cadre_form { CADRE_KEYS } else { &[] };
        let mut known: Vec<&str> = ENTRY_KEYS.iter().chain(extra).copied().collect();
        known.sort_unstable();
        problems.push((
            key.pos,
            format!(
                "unknown key `{}`; a command hook has {}",
                key.name,
                known.join(", ")
            ),
        ));
    }
    if v.get("command").is_none() {
        problems.push((v.pos, "a hook needs a `command`".to_string()));
    }
    if !problems.is_empty() {
        problems.sort_by_key(|(pos, _)| (pos.line, pos.column));
        return Err(problems);
    }
    if let Some(ms) = timeout_ms {
        config.timeout_ms = ms;
    }
    Ok(Entry::Command(config))
}

/// Checks a matcher group `{matcher?, hooks: [...]}` as strictly as an
/// entry: a key other than these two, or a `matcher` that is not a string,
/// is a problem, and then none of the group's hooks may run (a group read
/// without its matcher would fire its hooks for everything).
pub fn group_problems(group: &Node) -> Vec<(Pos, String)> {
    let mut problems = Vec::new();
    for (key, value) in group.entries() {
        match key.name.as_str() {
            "hooks" => {}
            "matcher" => {
                if !value.is_null() && value.scalar_text().is_none() {
                    problems.push(wrong(value, "matcher", "a string"));
                }
            }
            other => problems.push((
                key.pos,
                format!("unknown key `{other}`; a matcher group has matcher, hooks"),
            )),
        }
    }
    problems
}

/// A positive, finite number, written as one or as a string of one.
fn positive(v: &Node) -> Option<f64> {
    let n = match &v.kind {
        Kind::Int(i) => *i as f64,
        Kind::Float(f) => *f,
        Kind::Str(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    (n > 0.0 && n.is_finite()).then_some(n)
}

fn wrong(node: &Node, key: &str, expected: &str) -> (Pos, String) {
    (
        node.pos,
        format!("`{key}`: expected {expected}, found {}", node.type_name()),
    )
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
            args: None,
            timeout_ms: 1,
            run_async: false,
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
