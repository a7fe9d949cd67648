//! What the user, not the model, is told about slash commands: the table
//! of built-in commands (for `/help` and the headless `slash_commands`)
//! and the notes said on stderr while a command is expanded. The texts
//! the model gets are templates (`runtime::texts`).

use std::fmt;
use std::path::PathBuf;

/// The built-in commands: (name, argument hint, what it does). `chat`'s
/// `/help`, the headless `slash_commands` and docs/commands.md follow it.
pub const BUILTINS: &[(&str, &str, &str)] = &[
    (
        "clear",
        "",
        "start a new conversation (a new session id); the old one stays on disk",
    ),
    (
        "compact",
        "[instructions]",
        "summarise the conversation now, optionally saying what to keep",
    ),
    (
        "help",
        "",
        "list the built-in commands, your commands and skills, and MCP prompts",
    ),
    ("mcp", "", "list the MCP prompts of the ready servers"),
];

/// The built-ins of `cadre chat` only (a person at a terminal), with
/// Claude Code's names: (name, argument hint, what it does).
pub const CHAT_BUILTINS: &[(&str, &str, &str)] = &[
    (
        "agents",
        "",
        "the agents you can start, with their model and tools",
    ),
    (
        "config",
        "",
        "the settings in force and where each comes from",
    ),
    (
        "context",
        "",
        "how much of the model's context window the conversation fills",
    ),
    (
        "cost",
        "",
        "tokens, cache-read share and cost so far, per agent (also /usage)",
    ),
    (
        "add-dir",
        "PATH",
        "let the tools use another folder for this session (as --add-dir)",
    ),
    ("exit", "", "leave the chat (as Ctrl-D)"),
    ("memory", "", "the memory files and rules loaded"),
    (
        "model",
        "[name]",
        "show the model, or switch this conversation to NAME",
    ),
    (
        "resume",
        "[N|session-id]",
        "list this project's recent sessions, or continue one of them here",
    ),
    (
        "permissions",
        "[allow|ask|deny|remove RULE]",
        "the permission rules in force and where each comes from; add or remove one for this session",
    ),
];

/// A note for the user about one expansion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// A shell line of a repository's entry in an untrusted folder.
    ShellNotRun {
        what: &'static str,
        name: String,
        command: String,
        path: PathBuf,
    },
    /// A `!` line of an entry, not run: `disableSkillShellExecution`.
    ShellDisabled {
        what: &'static str,
        name: String,
        command: String,
    },
    /// An `@path` outside the project.
    Outside { path: String },
    /// An `@path` the Read call refused or could not read.
    NotRead { path: String, why: String },
    /// `/mcp__…` naming no ready server's prompt.
    NoMcpPrompt { name: String },
    /// `/name` typed for a skill with `user-invocable: false` (Claude
    /// Code's answer, word for word).
    NotUserInvocable { name: String },
    /// A command of `cadre chat` only, typed in a headless session.
    ChatOnly { name: &'static str },
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::ShellNotRun {
                what,
                name,
                command,
                path,
            } => write!(
                f,
                "{what} `{name}`: !`{command}` not run: {} is in a folder you have not trusted (cadre trust)",
                path.display()
            ),
            Note::ShellDisabled {
                what,
                name,
                command,
            } => write!(
                f,
                "{what} `{name}`: !`{command}` not run: disableSkillShellExecution is set"
            ),
            Note::Outside { path } => write!(f, "@{path}: not read, it lies outside the project"),
            Note::NotRead { path, why } => write!(f, "@{path}: not read: {why}"),
            Note::NoMcpPrompt { name } => write!(
                f,
                "no MCP prompt `/{name}` (a ready server's prompts: type /mcp)"
            ),
            Note::NotUserInvocable { name } => write!(
                f,
                "This skill can only be invoked by Claude, not directly by users. Ask Claude to use the \"{name}\" skill for you."
            ),
            // Claude Code's words for its interactive-only commands.
            Note::ChatOnly { name } => write!(f, "/{name} isn't available in this environment."),
        }
    }
}

/// The `description` of the Bash call a shell line makes (shown when the
/// call is asked about).
pub fn shell_call_description(name: &str) -> String {
    format!("!` line of /{name}")
}
