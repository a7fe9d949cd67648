//! System prompts: the main session's and a sub-agent's, each followed by
//! the environment block. All text comes from templates.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::catalog::{AgentDef, Prompt};
use crate::snapshot::Snapshot;
use crate::templates::{Context, RenderError};

/// What prompt templates may refer to. Rendering is a function of this,
/// the agent's definition and the snapshot alone (no helper reads the
/// clock or a file), which is what lets a session reuse a prompt rendered
/// from an equal context ([`PartialEq`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PromptContext {
    pub cwd: String,
    pub platform: String,
    pub date: String,
    pub git_branch: Option<String>,
    pub model: String,
    pub agent_name: String,
    /// The tools the session offers, by name.
    pub tools: Vec<String>,
    /// Whether `Agent` is among them.
    pub has_agent_tool: bool,
    /// A folder the session's agents share for notes (`SESSION/scratchpad`),
    /// when the session writes transcripts. Created when a prompt names it.
    pub scratchpad: Option<String>,
    /// The agent's own memory folder (`memory:` in its file), read once
    /// when the session started.
    #[serde(skip)]
    pub agent_memory: Option<crate::catalog::agent_memory::AgentMemory>,
    /// The main session's output style (`output_style`), when not the
    /// default: its prompt closes the main system prompt.
    pub output_style: Option<ActiveStyle>,
    /// Whether the main prompt keeps its coding instructions (no style, or
    /// a style with `keep-coding-instructions`).
    pub coding_instructions: bool,
}

/// The output style a main session answers in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ActiveStyle {
    pub name: String,
    pub keep_coding_instructions: bool,
    /// The style's prompt (a built-in's rendered from its template).
    pub prompt: String,
}

impl ActiveStyle {
    /// The style the settings choose, if any (`default` and an unknown
    /// name are none; the snapshot warned about the latter).
    pub fn of(snap: &Snapshot) -> Option<ActiveStyle> {
        let name = snap.settings().output_style.as_deref()?;
        let style = snap.output_styles.find(name)?;
        let prompt = if style.source == crate::catalog::styles::StyleSource::Builtin {
            snap.templates.show(&super::texts::OutputStyleBuiltin {
                style: style.name.clone(),
            })
        } else {
            style.prompt.clone()
        };
        Some(ActiveStyle {
            name: style.name.clone(),
            keep_coding_instructions: style.keep_coding_instructions,
            prompt,
        })
    }
}

/// The agent-memory block of a system prompt, or nothing.
fn agent_memory_block(snap: &Snapshot, ctx: &PromptContext) -> Result<String, RenderError> {
    let Some(m) = &ctx.agent_memory else {
        return Ok(String::new());
    };
    snap.templates.render(&super::texts::AgentMemoryBlock {
        scope: m.scope.clone(),
        dir: m.dir.display().to_string(),
        content: m.content.clone(),
        truncated: m.truncated,
        max_lines: crate::catalog::agent_memory::MAX_LINES as u64,
    })
}

impl PromptContext {
    pub fn new(cwd: &Path, model: &str, agent_name: &str) -> Self {
        PromptContext {
            cwd: cwd.display().to_string(),
            platform: std::env::consts::OS.to_string(),
            date: today(),
            git_branch: git_branch(cwd),
            model: model.to_string(),
            agent_name: agent_name.to_string(),
            tools: Vec::new(),
            has_agent_tool: false,
            scratchpad: None,
            agent_memory: None,
            output_style: None,
            coding_instructions: true,
        }
    }

    /// The same context, answering in `style`.
    pub fn with_style(mut self, style: Option<ActiveStyle>) -> Self {
        self.coding_instructions = style.as_ref().is_none_or(|s| s.keep_coding_instructions);
        self.output_style = style;
        self
    }

    /// The same context, naming the shared scratchpad folder.
    pub fn with_scratchpad(mut self, dir: Option<&Path>) -> Self {
        self.scratchpad = dir.map(|d| d.display().to_string());
        self
    }

    /// The same context, naming the tools the session offers.
    pub fn with_tools(mut self, tools: &[String]) -> Self {
        self.has_agent_tool = tools.iter().any(|t| t == crate::agent_tool::AGENT_TOOL);
        self.tools = tools.to_vec();
        self
    }
}

/// A [`PromptContext`] given to one of the prompt templates it serves: the
/// wrappers below make each of them a typed context of its own.
macro_rules! prompt_templates {
    ($($(#[$m:meta])* $name:ident => $tmpl:literal;)*) => {$(
        $(#[$m])*
        #[derive(Debug, Clone, Serialize)]
        #[serde(transparent)]
        pub struct $name(pub PromptContext);

        impl Context for $name {
            const TEMPLATE: &'static str = $tmpl;
            fn sample() -> Self {
                $name(PromptContext::sample())
            }
        }
    )*

    /// Every prompt template's sample, as (template, verbatim, sample).
    #[cfg(test)]
    pub(crate) fn samples() -> Vec<(&'static str, bool, serde_json::Value)> {
        vec![$(
            ($tmpl, false, serde_json::to_value($name::sample()).unwrap_or_default()),
        )*]
    }
    };
}

prompt_templates! {
    /// The main session's prompt when no agent is named.
    MainSystem => "main_system";
    /// The environment block after every system prompt.
    Environment => "environment";
    /// The notes after a sub-agent's own prompt.
    SubagentNotes => "subagent_notes";
    /// How to write tool calls as text (`provider.tool_call_fallback`).
    TextToolCalls => "text_tool_calls";
}

impl PromptContext {
    /// Sample values, for the test that renders every template.
    pub fn sample() -> Self {
        PromptContext {
            cwd: "/repo".into(),
            platform: "linux".into(),
            date: "2026-11-25".into(),
            git_branch: Some("main".into()),
            model: "claude-sonnet-4-5".into(),
            agent_name: "general-purpose".into(),
            tools: vec!["Agent".into(), "Read".into()],
            has_agent_tool: true,
            scratchpad: Some("/home/me/.claude/projects/-repo/S/scratchpad".into()),
            agent_memory: None,
            output_style: Some(ActiveStyle {
                name: "Pirate".into(),
                keep_coding_instructions: false,
                prompt: "Arr!".into(),
            }),
            coding_instructions: false,
        }
    }
}

/// Today's date in the local time zone, `YYYY-MM-DD`. The zone is read once
/// per process, from `/etc/localtime` itself when `TZ` is unset: jiff's own
/// detection names the zone through the time-zone database, and opening
/// that database lists its whole folder (hundreds of files) — for a date.
fn today() -> String {
    use std::io::Read;
    static ZONE: std::sync::OnceLock<jiff::tz::TimeZone> = std::sync::OnceLock::new();
    let zone = ZONE.get_or_init(|| {
        let mut bytes = Vec::new();
        // A TZif file is a few kilobytes; anything larger is not one.
        let read = std::fs::File::open("/etc/localtime")
            .and_then(|f| f.take(1 << 20).read_to_end(&mut bytes));
        match read {
            Ok(_) if std::env::var_os("TZ").is_none() => {
                jiff::tz::TimeZone::tzif("localtime", &bytes)
                    .unwrap_or_else(|_| jiff::tz::TimeZone::system())
            }
            _ => jiff::tz::TimeZone::system(),
        }
    });
    // Worked out at most once a second: a turn may start a thousand
    // children, each with an environment block.
    static LAST: std::sync::Mutex<Option<(i64, String)>> = std::sync::Mutex::new(None);
    let now = jiff::Timestamp::now();
    let second = now.as_second();
    if let Ok(last) = LAST.lock()
        && let Some((at, date)) = &*last
        && *at == second
    {
        return date.clone();
    }
    let date = now.to_zoned(zone.clone()).strftime("%Y-%m-%d").to_string();
    if let Ok(mut last) = LAST.lock() {
        *last = Some((second, date.clone()));
    }
    date
}

/// With `provider.tool_call_fallback = "json-text"` (models that write tool
/// calls as text), the instructions for writing them, from the
/// `text_tool_calls` template; otherwise nothing.
fn text_tool_call_block(snap: &Snapshot, ctx: &PromptContext) -> Result<String, RenderError> {
    if snap.settings().provider.tool_call_fallback.is_none() || ctx.tools.is_empty() {
        return Ok(String::new());
    }
    snap.templates.render(&TextToolCalls(ctx.clone()))
}

/// The main session's system prompt: the agent's body (for `--agent`) or
/// the `main_system` template, then the environment block, then (with no
/// agent named) the output style's block, as Claude Code places it.
pub fn main_system_prompt(
    snap: &Snapshot,
    def: Option<&AgentDef>,
    ctx: &PromptContext,
) -> Result<String, RenderError> {
    let (head, style) = match def {
        Some(d) => (agent_body(snap, d, ctx)?, String::new()),
        None => (
            snap.templates.render(&MainSystem(ctx.clone()))?,
            match &ctx.output_style {
                Some(s) => snap.templates.render(&super::texts::OutputStyleBlock {
                    name: s.name.clone(),
                    prompt: s.prompt.clone(),
                })?,
                None => String::new(),
            },
        ),
    };
    let memory = agent_memory_block(snap, ctx)?;
    let env = snap.templates.render(&Environment(ctx.clone()))?;
    let calls = text_tool_call_block(snap, ctx)?;
    Ok(join_blocks(&[
        head.trim(),
        memory.trim(),
        env.trim(),
        style.trim(),
        calls.trim(),
    ]))
}

/// The main system prompt with its head given as written (the command
/// line's `--system-prompt`): the environment block and the text tool-call
/// block still follow.
pub fn main_system_prompt_with_head(
    snap: &Snapshot,
    head: &str,
    ctx: &PromptContext,
) -> Result<String, RenderError> {
    let env = snap.templates.render(&Environment(ctx.clone()))?;
    let calls = text_tool_call_block(snap, ctx)?;
    Ok(join_blocks(&[head.trim(), env.trim(), calls.trim()]))
}

/// A sub-agent's system prompt: its body rendered as a template, the notes
/// for sub-agents, then the environment block.
pub fn subagent_system_prompt(
    snap: &Snapshot,
    def: &AgentDef,
    ctx: &PromptContext,
) -> Result<String, RenderError> {
    let body = agent_body(snap, def, ctx)?;
    let memory = agent_memory_block(snap, ctx)?;
    let notes = snap.templates.render(&SubagentNotes(ctx.clone()))?;
    let env = snap.templates.render(&Environment(ctx.clone()))?;
    let calls = text_tool_call_block(snap, ctx)?;
    Ok(join_blocks(&[
        body.trim(),
        memory.trim(),
        notes.trim(),
        env.trim(),
        calls.trim(),
    ]))
}

/// An agent's own prompt. An inline body that is not a valid template (a
/// published agent file may quote `{{ }}` from another tool) is used as
/// written rather than failing the spawn; one whose partials recurse fails
/// the spawn with an error naming the agent's file.
fn agent_body(snap: &Snapshot, def: &AgentDef, ctx: &PromptContext) -> Result<String, RenderError> {
    match &def.prompt {
        Prompt::Inline(text) => {
            // A body whose partials recurse cannot be used as written
            // either: it fails this spawn (and only this one).
            let label = format!("agent {}", def.name);
            if let Err(message) = snap.templates.check_partials_of(&label, text) {
                let file = def
                    .path
                    .as_ref()
                    .map_or_else(|| "(no file)".to_string(), |p| p.display().to_string());
                return Err(RenderError {
                    name: format!("agent {} in {file}", def.name),
                    message,
                });
            }
            Ok(snap
                .templates
                .render_text(&label, text, ctx)
                .unwrap_or_else(|_| text.clone()))
        }
        // A template the agent's file names, over the main prompt's context.
        Prompt::Template(name) => snap.templates.render_as(name, &MainSystem(ctx.clone())),
    }
}

/// One memory file as the `project_memory` template sees it.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryEntry {
    pub path: String,
    /// Where it comes from: `managed`, `user`, `project`, `imported` (by
    /// the project's instructions) or `local`.
    pub kind: &'static str,
    pub content: String,
}

/// The context of the `project_memory` template.
#[derive(Debug, Clone, Serialize)]
pub struct MemoryContext {
    pub files: Vec<MemoryEntry>,
}

impl Context for MemoryContext {
    const TEMPLATE: &'static str = "project_memory";
    fn sample() -> Self {
        let entry = |path: &str, kind| MemoryEntry {
            path: path.into(),
            kind,
            content: "Run the tests before committing.".into(),
        };
        MemoryContext {
            files: vec![
                entry("/etc/claude-code/CLAUDE.md", "managed"),
                entry("/home/u/.claude/CLAUDE.md", "user"),
                entry("/repo/CLAUDE.md", "project"),
                entry("/repo/docs/style.md", "imported"),
                entry("/repo/CLAUDE.local.md", "local"),
            ],
        }
    }
}

/// The project-memory block (the `project_memory` template over every
/// memory file), or `None` when there is no memory. It goes at the start of
/// a session's first user message, not into the system prompt, so the
/// system prompt — the first part of the cached prefix — stays the same
/// whatever memory a project has.
pub fn memory_block(snap: &Snapshot) -> Option<String> {
    use crate::catalog::MemoryScope;
    if snap.memory.is_empty() {
        return None;
    }
    let files = snap
        .memory
        .files
        .iter()
        .filter(|f| !f.content.trim().is_empty())
        .map(|f| MemoryEntry {
            path: f.path.display().to_string(),
            kind: match (f.scope, f.imported_from.is_some()) {
                (MemoryScope::Managed, _) => "managed",
                (MemoryScope::User, _) => "user",
                (MemoryScope::Project, false) => "project",
                (MemoryScope::Project, true) => "imported",
                (MemoryScope::Local, _) => "local",
            },
            content: f.content.trim_end().to_string(),
        })
        .collect();
    Some(snap.templates.show(&MemoryContext { files }))
}

/// Whether a session running as `def` gets project memory: the main
/// session and named sub-agents do; the built-in Explore and Plan do not
/// (as in Claude Code, which keeps them lean).
pub fn gets_memory(def: Option<&AgentDef>) -> bool {
    def.is_none_or(|d| {
        !(d.source == crate::catalog::Source::Builtin
            && crate::catalog::ONE_SHOT_AGENTS.contains(&d.name.as_str()))
    })
}

fn join_blocks(blocks: &[&str]) -> String {
    blocks
        .iter()
        .filter(|b| !b.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The most read of `.git/HEAD` or a `.git` file: a ref name or a path.
const GIT_FILE_BYTES: u64 = 64 * 1024;

/// The current branch, read from `.git/HEAD` (no process started); `None`
/// outside a repository. A detached HEAD shows as its short hash.
pub fn git_branch(cwd: &Path) -> Option<String> {
    let git = git_dir(cwd)?;
    // Bounded: an unpacked archive may hold any `.git` (a HEAD linked to a
    // device or a FIFO is refused, not read).
    let head = crate::raw::read_text(&git.join("HEAD"), GIT_FILE_BYTES).ok()?;
    let head = head.trim();
    match head.strip_prefix("ref: ") {
        Some(r) => Some(r.strip_prefix("refs/heads/").unwrap_or(r).to_string()),
        None => Some(head.chars().take(8).collect()),
    }
}

fn git_dir(cwd: &Path) -> Option<PathBuf> {
    // Found once per folder and process: a turn may start a thousand
    // children in the same folder, and outside a repository each search
    // is two failed lookups per ancestor. A repository created later in
    // the session shows from the next process on (as a branch does in
    // Claude Code, which reads it once per session); the branch itself is
    // read from HEAD every time.
    static FOUND: std::sync::LazyLock<
        std::sync::Mutex<std::collections::HashMap<PathBuf, Option<PathBuf>>>,
    > = std::sync::LazyLock::new(Default::default);
    if let Ok(found) = FOUND.lock()
        && let Some(dir) = found.get(cwd)
    {
        return dir.clone();
    }
    let dir = find_git_dir(cwd);
    if let Ok(mut found) = FOUND.lock() {
        found.insert(cwd.to_path_buf(), dir.clone());
    }
    dir
}

fn find_git_dir(cwd: &Path) -> Option<PathBuf> {
    for dir in cwd.ancestors() {
        let dot_git = dir.join(".git");
        if dot_git.is_dir() {
            return Some(dot_git);
        }
        if dot_git.is_file() {
            // A worktree or submodule: `gitdir: PATH`.
            let text = crate::raw::read_text(&dot_git, GIT_FILE_BYTES).ok()?;
            let target = text.trim().strip_prefix("gitdir:")?.trim();
            let p = Path::new(target);
            return Some(if p.is_absolute() {
                p.to_path_buf()
            } else {
                dir.join(p)
            });
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The repository is found once per folder; the branch is read from
    /// HEAD every time, so a checkout mid-session shows in the next prompt.
    #[test]
    fn a_branch_switch_shows_while_the_repository_is_found_once() {
        let repo = tempfile::tempdir().unwrap();
        let sub = repo.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::create_dir(repo.path().join(".git")).unwrap();
        let head = repo.path().join(".git/HEAD");
        std::fs::write(&head, "ref: refs/heads/main\n").unwrap();
        assert_eq!(git_branch(&sub).as_deref(), Some("main"));
        std::fs::write(&head, "ref: refs/heads/feature/x\n").unwrap();
        assert_eq!(git_branch(&sub).as_deref(), Some("feature/x"));
        std::fs::write(&head, "0123456789abcdef\n").unwrap();
        assert_eq!(git_branch(&sub).as_deref(), Some("01234567"));
        // A worktree's `.git` file names its folder.
        let wt = tempfile::tempdir().unwrap();
        std::fs::write(
            wt.path().join(".git"),
            format!("gitdir: {}\n", repo.path().join(".git").display()),
        )
        .unwrap();
        assert_eq!(git_branch(wt.path()).as_deref(), Some("01234567"));
    }

    /// A HEAD that is a link to a device is refused, not read without end.
    #[test]
    fn a_head_linked_to_a_device_is_no_branch() {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir(repo.path().join(".git")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", repo.path().join(".git/HEAD")).unwrap();
        assert_eq!(git_branch(repo.path()), None);
    }
}
