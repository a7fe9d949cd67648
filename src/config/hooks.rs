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

use std::collections::BTreeMap;

use regex::Regex;
use serde::{Deserialize, Serialize, Serializer};

use crate::diagnostic::Pos;
use crate::raw::{Kind, Node};

/// Declares every hook event Claude Code has, in its order: the
/// `HookEvent` enum, its names, and `HookSettings` with one list per event
/// (so the two cannot drift apart).
macro_rules! hook_events {
    ($($(#[$doc:meta])* $variant:ident $name:literal => $field:ident,)*) => {
        /// Every hook event of Claude Code 2.1.332 (34). Which of them cadre
        /// fires, and when, is in `docs/hooks.md`; the others are accepted
        /// and never fire.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
        pub enum HookEvent {
            $($(#[$doc])* $variant,)*
        }

        impl HookEvent {
            pub const ALL: &'static [HookEvent] = &[$(HookEvent::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(HookEvent::$variant => $name,)*
                }
            }

            /// The settings' hooks of this event, as written.
            pub fn in_settings(self, settings: &HookSettings) -> &[HookConfig] {
                match self {
                    $(HookEvent::$variant => &settings.$field,)*
                }
            }
        }

        /// `[[hooks.EVENT]]` tables, one list per event, in the order written.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct HookSettings {
            $(
                #[serde(rename = $name)]
                pub $field: Vec<HookConfig>,
            )*
        }
    };
}

hook_events! {
    PreToolUse "PreToolUse" => pre_tool_use,
    /// After a tool ran and succeeded.
    PostToolUse "PostToolUse" => post_tool_use,
    /// After a tool ran and failed (its result is an error).
    PostToolUseFailure "PostToolUseFailure" => post_tool_use_failure,
    PostToolBatch "PostToolBatch" => post_tool_batch,
    Notification "Notification" => notification,
    UserPromptSubmit "UserPromptSubmit" => user_prompt_submit,
    UserPromptExpansion "UserPromptExpansion" => user_prompt_expansion,
    SessionStart "SessionStart" => session_start,
    SessionEnd "SessionEnd" => session_end,
    /// The main session would end its turn (a sub-agent's is `SubagentStop`).
    Stop "Stop" => stop,
    StopFailure "StopFailure" => stop_failure,
    SubagentStart "SubagentStart" => subagent_start,
    SubagentStop "SubagentStop" => subagent_stop,
    /// Before a compaction; the matcher is tested against its trigger
    /// (`auto` or `manual`).
    PreCompact "PreCompact" => pre_compact,
    PostCompact "PostCompact" => post_compact,
    PreModelSwitch "PreModelSwitch" => pre_model_switch,
    PostModelSwitch "PostModelSwitch" => post_model_switch,
    /// A tool call is about to be put to the user (or the SDK client).
    PermissionRequest "PermissionRequest" => permission_request,
    PermissionDenied "PermissionDenied" => permission_denied,
    Setup "Setup" => setup,
    /// A teammate ended its turn and is about to idle; the matcher is
    /// tested against its name. Exit 2 keeps it working, with stderr as
    /// its next message.
    TeammateIdle "TeammateIdle" => teammate_idle,
    /// A task was added to a team's list; matcher: the team's name.
    TaskCreated "TaskCreated" => task_created,
    /// A team task became completed; matcher: the team's name.
    TaskCompleted "TaskCompleted" => task_completed,
    Elicitation "Elicitation" => elicitation,
    ElicitationResult "ElicitationResult" => elicitation_result,
    ConfigChange "ConfigChange" => config_change,
    WorktreeCreate "WorktreeCreate" => worktree_create,
    WorktreeRemove "WorktreeRemove" => worktree_remove,
    InstructionsLoaded "InstructionsLoaded" => instructions_loaded,
    CwdChanged "CwdChanged" => cwd_changed,
    FileChanged "FileChanged" => file_changed,
    DirectoryAdded "DirectoryAdded" => directory_added,
    MessageDisplay "MessageDisplay" => message_display,
    /// Before a skill's or command's `!` shell line runs.
    PreSkillShellCommand "PreSkillShellCommand" => pre_skill_shell_command,
}

impl HookEvent {
    /// An event name as written in frontmatter (`Stop` = `SubagentStop`).
    pub fn from_frontmatter(name: &str) -> Option<Self> {
        match name {
            "Stop" => Some(HookEvent::SubagentStop),
            other => Self::from_name(other),
        }
    }

    /// Whether the event's hooks are chosen by their matcher; for these
    /// events Claude Code ignores a matcher, and so does cadre.
    pub fn has_matcher(self) -> bool {
        !matches!(
            self,
            HookEvent::UserPromptSubmit
                | HookEvent::Stop
                | HookEvent::PostToolBatch
                | HookEvent::WorktreeCreate
                | HookEvent::WorktreeRemove
                | HookEvent::CwdChanged
                | HookEvent::MessageDisplay
        )
    }

    /// An event by its name.
    pub fn from_name(name: &str) -> Option<Self> {
        HookEvent::ALL.iter().copied().find(|e| e.as_str() == name)
    }
}

/// What runs when a hook fires.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookType {
    /// A shell command, or a program with `args`.
    #[default]
    Command,
    /// A POST of the hook's input to `url`.
    Http,
    /// A request to a small model that answers `{ok, reason}`.
    Prompt,
    /// A small read-only sub-agent that inspects the project and answers
    /// `{ok, reason}`.
    Agent,
}

impl HookType {
    /// Its name as written in the settings' `type`.
    pub fn as_str(&self) -> &'static str {
        match self {
            HookType::Command => "command",
            HookType::Http => "http",
            HookType::Prompt => "prompt",
            HookType::Agent => "agent",
        }
    }

    fn is_command(&self) -> bool {
        *self == HookType::Command
    }
}

/// One hook, as settings write it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookConfig {
    /// A regex that must match the whole agent type (Subagent events) or
    /// tool name (tool events); absent, empty or `*` matches everything.
    #[serde(default)]
    pub matcher: Option<String>,
    /// `command` (the default), `http` or `prompt`.
    #[serde(default, rename = "type", skip_serializing_if = "HookType::is_command")]
    pub kind: HookType,
    /// Without `args`: a shell command, run with `bash -c` in the session's
    /// working directory. With `args`: the program to run, directly.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// The program's arguments: `command` is then run as it is, with these
    /// arguments, and no shell reads either (Claude Code's exec form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// An `http` hook's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// An `http` hook's headers; `$NAME` / `${NAME}` in a value is replaced
    /// only for names in `allowed_env_vars`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_env_vars: Vec<String>,
    /// A `prompt` hook's prompt (`$ARGUMENTS` is the hook's input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// A `prompt` hook's model (an alias or an id); the small model when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The hook is stopped after this long.
    #[serde(default = "default_hook_timeout_ms")]
    pub timeout_ms: u64,
    /// Runs in the background: the event does not wait for it, and what it
    /// prints or exits with decides nothing.
    #[serde(default, rename = "async", skip_serializing_if = "is_false")]
    pub run_async: bool,
    /// The plugin folder of a plugin's hook (`hooks/hooks.json`): the hook
    /// gets it as `CLAUDE_PLUGIN_ROOT`, and `${CLAUDE_PLUGIN_ROOT}` in its
    /// command and arguments is replaced by it. Set only by the plugin
    /// loader; no settings file can write it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_root: Option<std::path::PathBuf>,
    /// The plugin's data folder (`CLAUDE_PLUGIN_DATA`, and
    /// `${CLAUDE_PLUGIN_DATA}` in its command and arguments), created when
    /// the hook first runs. Set only by the plugin loader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_data: Option<std::path::PathBuf>,
}

impl HookConfig {
    /// A command hook with everything else at its default.
    pub fn command(command: &str) -> HookConfig {
        HookConfig {
            matcher: None,
            kind: HookType::Command,
            command: command.to_string(),
            args: None,
            url: None,
            headers: BTreeMap::new(),
            allowed_env_vars: Vec::new(),
            prompt: None,
            model: None,
            timeout_ms: DEFAULT_HOOK_TIMEOUT_MS,
            run_async: false,
            plugin_root: None,
            plugin_data: None,
        }
    }

    /// What the hook is known by: its command, URL or prompt.
    pub fn label(&self) -> &str {
        match self.kind {
            HookType::Command => &self.command,
            HookType::Http => self.url.as_deref().unwrap_or_default(),
            HookType::Prompt | HookType::Agent => self.prompt.as_deref().unwrap_or_default(),
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One minute, as Claude Code.
pub const DEFAULT_HOOK_TIMEOUT_MS: u64 = 60_000;

/// A prompt hook's default, as Claude Code's.
pub const DEFAULT_PROMPT_HOOK_TIMEOUT_MS: u64 = 30_000;

/// An agent hook's default, as Claude Code's.
pub const DEFAULT_AGENT_HOOK_TIMEOUT_MS: u64 = 60_000;

fn default_hook_timeout_ms() -> u64 {
    DEFAULT_HOOK_TIMEOUT_MS
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
    #[serde(skip)]
    pub matcher: Matcher,
    /// The hook as written (its `matcher` is the text of `matcher`).
    #[serde(flatten)]
    pub config: HookConfig,
}

impl Hook {
    /// Resolves one hook as written; `Err` when its matcher is invalid.
    pub fn new(event: HookEvent, config: &HookConfig) -> Result<Hook, String> {
        let matcher = Matcher::new(config.matcher.as_deref())?;
        let mut config = config.clone();
        config.matcher = matcher.text().map(str::to_string);
        Ok(Hook {
            event,
            matcher,
            config,
        })
    }

    /// The hook as settings write it (what the runner takes).
    pub fn config(&self) -> HookConfig {
        self.config.clone()
    }
}

/// The keys every hook entry may have in Claude Code's settings.
const COMMON_KEYS: &[&str] = &["type", "timeout", "async", "statusMessage"];

/// The keys of each type of hook, besides [`COMMON_KEYS`].
fn type_keys(kind: HookType) -> &'static [&'static str] {
    match kind {
        HookType::Command => &["command", "args", "shell"],
        HookType::Http => &["url", "headers", "allowedEnvVars"],
        HookType::Prompt | HookType::Agent => &["prompt", "model"],
    }
}

/// The keys cadre's own forms add: the flat form's `matcher` and
/// `timeout_ms` (milliseconds), and `allowed_env_vars` (snake case).
const CADRE_KEYS: &[&str] = &["matcher", "timeout_ms", "allowed_env_vars"];

/// Claude Code's keys of a hook that cadre does not implement: an entry
/// that uses one is not run at all, rather than run without it.
const UNIMPLEMENTED_KEYS: &[&str] = &["if", "once", "asyncRewake"];

/// One hook entry as written, read strictly.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// A hook cadre runs (`command`, `http` or `prompt`), with every key
    /// read (`matcher` left `None`: the caller knows where the matcher is
    /// written).
    Hook(Box<HookConfig>),
    /// A hook of a type cadre does not run (`mcp_tool`), written
    /// at `pos`.
    OtherType { kind: String, pos: Pos },
}

/// What a caller says of an entry of a type cadre does not run.
pub fn other_type_note(kind: &str) -> String {
    format!(
        "hook type {kind:?} is not supported; cadre runs `command`, `http`, `prompt` and \
         `agent` hooks; this hook is not run"
    )
}

/// Reads one hook entry — a `command` hook `{type?, command, args?,
/// shell?}`, an `http` hook `{type, url, headers?, allowedEnvVars?}` or a
/// `prompt` hook `{type, prompt, model?}`, each with `timeout?`, `async?`
/// and `statusMessage?`, and in cadre's own forms (`cadre_form`: its
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
    let kind = match v.get("type") {
        None => HookType::Command,
        Some(t) => match t.as_str() {
            Some("command") => HookType::Command,
            Some("http") => HookType::Http,
            Some("prompt") => HookType::Prompt,
            Some("agent") => HookType::Agent,
            Some(other) => {
                return Ok(Entry::OtherType {
                    kind: other.to_string(),
                    pos: t.pos,
                });
            }
            None => {
                return Err(vec![(
                    t.pos,
                    format!("`type`: expected a string, found {}", t.type_name()),
                )]);
            }
        },
    };
    let mut problems = Vec::new();
    let mut config = HookConfig::command("");
    config.kind = kind;
    config.timeout_ms = match kind {
        HookType::Command => DEFAULT_HOOK_TIMEOUT_MS,
        HookType::Agent => DEFAULT_AGENT_HOOK_TIMEOUT_MS,
        HookType::Http | HookType::Prompt => DEFAULT_PROMPT_HOOK_TIMEOUT_MS,
    };
    let mut timeout_ms = None;
    let mut unknown = Vec::new();
    let own = type_keys(kind);
    for (key, value) in entries {
        let name = key.name.as_str();
        let known = COMMON_KEYS.contains(&name)
            || own.contains(&name)
            || (cadre_form && CADRE_KEYS.contains(&name));
        if !known {
            if UNIMPLEMENTED_KEYS.contains(&name) {
                problems.push((
                    key.pos,
                    format!("`{name}` is a Claude Code hook setting cadre does not implement"),
                ));
            } else {
                unknown.push(key);
            }
            continue;
        }
        match name {
            "type" => {}
            "command" => match value.as_str().map(str::trim) {
                Some(c) if !c.is_empty() => config.command = c.to_string(),
                _ => problems.push(wrong(value, "command", "a command (a non-empty string)")),
            },
            "args" => match strings(value) {
                Some(list) => config.args = Some(list),
                None => problems.push(wrong(value, "args", "a list of strings")),
            },
            "url" => match value.as_str().map(str::trim) {
                Some(u) if u.starts_with("http://") || u.starts_with("https://") => {
                    config.url = Some(u.to_string());
                }
                _ => problems.push(wrong(value, "url", "an http:// or https:// URL")),
            },
            "headers" => match &value.kind {
                Kind::Map(pairs) if pairs.iter().all(|(_, v)| v.as_str().is_some()) => {
                    config.headers = pairs
                        .iter()
                        .filter_map(|(k, v)| Some((k.name.clone(), v.as_str()?.to_string())))
                        .collect();
                }
                _ => problems.push(wrong(value, "headers", "a mapping of strings")),
            },
            "allowedEnvVars" | "allowed_env_vars" => match strings(value) {
                Some(list) => config.allowed_env_vars = list,
                None => problems.push(wrong(value, name, "a list of variable names")),
            },
            "prompt" => match value.as_str().map(str::trim) {
                Some(p) if !p.is_empty() => config.prompt = Some(p.to_string()),
                _ => problems.push(wrong(value, "prompt", "a non-empty string")),
            },
            "model" => match value.as_str().map(str::trim) {
                Some(m) if !m.is_empty() => config.model = Some(m.to_string()),
                _ => problems.push(wrong(value, "model", "a model name")),
            },
            "timeout" => match positive(value) {
                Some(s) => timeout_ms = Some((s * 1000.0).min(u64::MAX as f64) as u64),
                None => problems.push(wrong(value, "timeout", "a positive number of seconds")),
            },
            "matcher" => match value.scalar_text() {
                Some(m) => config.matcher = Some(m),
                None => problems.push(wrong(value, "matcher", "a string")),
            },
            "timeout_ms" => match positive(value) {
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
            _ => unknown.push(key),
        }
    }
    let type_name = match kind {
        HookType::Command => "command",
        HookType::Http => "http",
        HookType::Prompt => "prompt",
        HookType::Agent => "agent",
    };
    for key in unknown {
        let extra = if cadre_form { CADRE_KEYS } else { &[] };
        let mut known: Vec<&str> = COMMON_KEYS
            .iter()
            .chain(own)
            .chain(extra)
            .copied()
            .collect();
        known.sort_unstable();
        problems.push((
            key.pos,
            format!(
                "unknown key `{}`; a{} {type_name} hook has {}",
                key.name,
                if matches!(kind, HookType::Http | HookType::Agent) {
                    "n"
                } else {
                    ""
                },
                known.join(", ")
            ),
        ));
    }
    let needs = match kind {
        HookType::Command => "command",
        HookType::Http => "url",
        HookType::Prompt | HookType::Agent => "prompt",
    };
    if v.get(needs).is_none() {
        problems.push((
            v.pos,
            format!(
                "a{} {type_name} hook needs a `{needs}`",
                if matches!(kind, HookType::Http | HookType::Agent) {
                    "n"
                } else {
                    ""
                }
            ),
        ));
    }
    if !problems.is_empty() {
        problems.sort_by_key(|(pos, _)| (pos.line, pos.column));
        return Err(problems);
    }
    if let Some(ms) = timeout_ms {
        config.timeout_ms = ms;
    }
    Ok(Entry::Hook(Box::new(config)))
}

/// A list of strings.
fn strings(v: &Node) -> Option<Vec<String>> {
    match &v.kind {
        Kind::Seq(items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string))
            .collect(),
        _ => None,
    }
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
        for &event in HookEvent::ALL {
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
        let all = !event.has_matcher();
        self.0
            .iter()
            .filter(move |h| h.event == event && (all || h.matcher.matches(target)))
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

    fn entry(json: &str) -> Result<Entry, Vec<(Pos, String)>> {
        read_entry(&crate::raw::parse_yaml(json).unwrap(), false)
    }

    #[test]
    fn http_and_prompt_entries_are_read_with_their_own_keys() {
        let Ok(Entry::Hook(h)) = entry(
            r#"{"type": "http", "url": "https://h.example/x", "headers": {"A": "$T"}, "allowedEnvVars": ["T"], "timeout": 2}"#,
        ) else {
            panic!()
        };
        assert_eq!(h.kind, HookType::Http);
        assert_eq!(h.url.as_deref(), Some("https://h.example/x"));
        assert_eq!(h.headers["A"], "$T");
        assert_eq!(h.allowed_env_vars, ["T"]);
        assert_eq!(h.timeout_ms, 2000);
        assert_eq!(h.label(), "https://h.example/x");
        let Ok(Entry::Hook(p)) = entry(r#"{"type": "prompt", "prompt": "ok? $ARGUMENTS"}"#) else {
            panic!()
        };
        assert_eq!(
            (p.kind, p.timeout_ms),
            (HookType::Prompt, DEFAULT_PROMPT_HOOK_TIMEOUT_MS)
        );
        // A command's key on an http hook, a URL that is not one, no URL.
        let why = |j: &str| {
            entry(j)
                .unwrap_err()
                .into_iter()
                .map(|(_, w)| w)
                .collect::<Vec<_>>()
        };
        assert!(
            why(r#"{"type": "http", "url": "https://x", "command": "y"}"#)[0]
                .starts_with("unknown key `command`; an http hook has")
        );
        assert!(
            why(r#"{"type": "http", "url": "ftp://x"}"#)[0].contains("an http:// or https:// URL")
        );
        assert_eq!(
            why(r#"{"type": "prompt"}"#),
            ["a prompt hook needs a `prompt`"]
        );
        let Ok(Entry::Hook(a)) = entry(r#"{"type": "agent", "prompt": "x", "model": "sonnet"}"#)
        else {
            panic!()
        };
        assert_eq!(
            (a.kind, a.timeout_ms, a.model.as_deref()),
            (
                HookType::Agent,
                DEFAULT_AGENT_HOOK_TIMEOUT_MS,
                Some("sonnet")
            )
        );
        assert_eq!(
            why(r#"{"type": "agent"}"#),
            ["an agent hook needs a `prompt`"]
        );
        assert!(matches!(
            entry(r#"{"type": "mcp_tool", "server": "x"}"#),
            Ok(Entry::OtherType { ref kind, .. }) if kind == "mcp_tool"
        ));
        // Round trip through the settings' shape.
        let v = serde_json::to_value(&h).unwrap();
        assert_eq!(v["type"], "http");
        assert_eq!(serde_json::from_value::<HookConfig>(v).unwrap(), *h);
    }

    #[test]
    fn settings_hooks_resolve_and_bad_matchers_are_left_out() {
        let hook = |m: &str, c: &str| HookConfig {
            matcher: Some(m.into()),
            timeout_ms: 1,
            ..HookConfig::command(c)
        };
        let settings = HookSettings {
            pre_tool_use: vec![hook("Bash", "a"), hook("[", "b")],
            pre_compact: vec![hook("(", "c"), hook("auto", "d")],
            ..HookSettings::default()
        };
        let (hooks, bad) = Hooks::from_settings(&settings);
        let names: Vec<&str> = hooks.0.iter().map(|h| h.config.command.as_str()).collect();
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
            .map(|h| h.config.command.as_str())
            .collect();
        assert_eq!(sel, ["d"]);
    }
}
