//! System prompts: the main session's and a sub-agent's, each followed by
//! the environment block. All text comes from templates.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::catalog::{AgentDef, Prompt};
use crate::snapshot::Snapshot;
use crate::templates::RenderError;

/// What prompt templates may refer to.
#[derive(Debug, Clone, Serialize)]
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
}

impl PromptContext {
    pub fn new(cwd: &Path, model: &str, agent_name: &str) -> Self {
        PromptContext {
            cwd: cwd.display().to_string(),
            platform: std::env::consts::OS.to_string(),
            date: jiff::Zoned::now().strftime("%Y-%m-%d").to_string(),
            git_branch: git_branch(cwd),
            model: model.to_string(),
            agent_name: agent_name.to_string(),
            tools: Vec::new(),
            has_agent_tool: false,
        }
    }

    /// The same context, naming the tools the session offers.
    pub fn with_tools(mut self, tools: &[String]) -> Self {
        self.has_agent_tool = tools.iter().any(|t| t == crate::agent_tool::AGENT_TOOL);
        self.tools = tools.to_vec();
        self
    }
}

/// With `provider.tool_call_fallback = "json-text"` (models that write tool
/// calls as text), the instructions for writing them, from the
/// `text_tool_calls` template; otherwise nothing.
fn text_tool_call_block(snap: &Snapshot, ctx: &PromptContext) -> Result<String, RenderError> {
    if snap.settings().provider.tool_call_fallback.is_none() || ctx.tools.is_empty() {
        return Ok(String::new());
    }
    snap.templates.render("text_tool_calls", ctx)
}

/// The main session's system prompt: the agent's body (for `--agent`) or
/// the `main_system` template, then the environment block.
pub fn main_system_prompt(
    snap: &Snapshot,
    def: Option<&AgentDef>,
    ctx: &PromptContext,
) -> Result<String, RenderError> {
    let head = match def {
        Some(d) => agent_body(snap, d, ctx)?,
        None => snap.templates.render("main_system", ctx)?,
    };
    let env = snap.templates.render("environment", ctx)?;
    let calls = text_tool_call_block(snap, ctx)?;
    Ok(join_blocks(&[head.trim(), env.trim(), calls.trim()]))
}

/// The main system prompt with its head given as written (the command
/// line's `--system-prompt`): the environment block and the text tool-call
/// block still follow.
pub fn main_system_prompt_with_head(
    snap: &Snapshot,
    head: &str,
    ctx: &PromptContext,
) -> Result<String, RenderError> {
    let env = snap.templates.render("environment", ctx)?;
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
    let notes = snap.templates.render("subagent_notes", ctx)?;
    let env = snap.templates.render("environment", ctx)?;
    let calls = text_tool_call_block(snap, ctx)?;
    Ok(join_blocks(&[
        body.trim(),
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
            if let Err(message) = snap.templates.check_partials(text) {
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
                .render_text(&format!("agent {}", def.name), text, ctx)
                .unwrap_or_else(|_| text.clone()))
        }
        Prompt::Template(name) => snap.templates.render(name, ctx),
    }
}

/// One memory file as the `project_memory` template sees it.
#[derive(Debug, Clone, Serialize)]
struct MemoryEntry {
    path: String,
    /// What kind of file it is, in words (`project instructions, …`).
    description: &'static str,
    content: String,
}

#[derive(Debug, Clone, Serialize)]
struct MemoryContext {
    files: Vec<MemoryEntry>,
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
            description: match (f.scope, f.imported_from.is_some()) {
                (MemoryScope::Managed, _) => "instructions from the administrator, for every user",
                (MemoryScope::User, _) => "the user's own instructions for every project",
                (MemoryScope::Project, false) => "project instructions, checked into the codebase",
                (MemoryScope::Project, true) => "imported by the project instructions",
                (MemoryScope::Local, _) => {
                    "the user's own instructions for this project, not checked in"
                }
            },
            content: f.content.trim_end().to_string(),
        })
        .collect();
    Some(
        snap.templates
            .text("project_memory", &MemoryContext { files }),
    )
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

/// The current branch, read from `.git/HEAD` (no process started); `None`
/// outside a repository. A detached HEAD shows as its short hash.
pub fn git_branch(cwd: &Path) -> Option<String> {
    let git = git_dir(cwd)?;
    let head = fs_err::read_to_string(git.join("HEAD")).ok()?;
    let head = head.trim();
    match head.strip_prefix("ref: ") {
        Some(r) => Some(r.strip_prefix("refs/heads/").unwrap_or(r).to_string()),
        None => Some(head.chars().take(8).collect()),
    }
}

fn git_dir(cwd: &Path) -> Option<PathBuf> {
    for dir in cwd.ancestors() {
        let dot_git = dir.join(".git");
        if dot_git.is_dir() {
            return Some(dot_git);
        }
        if dot_git.is_file() {
            // A worktree or submodule: `gitdir: PATH`.
            let text = fs_err::read_to_string(&dot_git).ok()?;
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
