//! The flags of the commands that run a main session: `cadre run`,
//! `chat` and `render` (`SessionArgs` and theirs), Claude Code's top-level
//! flags of headless mode (`HeadlessArgs`), and the prompt read from an
//! argument or stdin. Parsing only: nothing here starts a session.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::CliError;
use super::output::{OutputFormat, SessionArg};
use super::wire::parse_mode;
use crate::config::PermissionMode;

#[derive(Debug, Clone, Default, Args)]
pub struct SessionArgs {
    /// Run as this agent (its prompt, tools and model) instead of the default main agent.
    #[arg(long, value_name = "NAME")]
    pub(super) agent: Option<String>,
    /// Model for the main session (an alias from [models] or a full id).
    #[arg(long, value_name = "MODEL")]
    pub(super) model: Option<String>,
    /// Stop after this many model turns.
    #[arg(long, value_name = "N")]
    pub(super) max_turns: Option<u32>,
    /// Permission mode of the main session.
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub(super) permission_mode: Option<PermissionMode>,
    /// A folder besides the working directory where edits need no rule;
    /// repeatable.
    #[arg(long = "add-dir", value_name = "DIR")]
    pub(super) add_dirs: Vec<PathBuf>,
    /// Continue session ID (see `cadre sessions list`) from its transcript.
    #[arg(long, value_name = "ID", conflicts_with = "continue_latest")]
    pub(super) resume: Option<String>,
    /// Continue the latest session of this project.
    #[arg(short = 'c', long = "continue")]
    pub(super) continue_latest: bool,
    /// With --resume or --continue: write to a new session (a copy) and
    /// leave the original as it was.
    #[arg(long)]
    pub(super) fork_session: bool,
    /// With --resume and --fork-session: continue from this message (its
    /// `uuid` in the transcript, as the stream's messages carry it),
    /// leaving out what came after it (Claude Code's truncating resume).
    #[arg(long, value_name = "UUID", requires = "fork_session")]
    pub(super) resume_session_at: Option<String>,
    /// With --resume-session-at: the `uuid` of the prompt of the turn this
    /// leaves out; the resume is refused unless what is left out is that
    /// one turn.
    #[arg(long, value_name = "UUID", requires = "resume_session_at")]
    pub(super) resume_drops_turn: Option<String>,
    /// With AGENT_TEAMS on: lead the team NAME (its folder under
    /// `agents.teams_dir`, shared with any other session that names it).
    /// Without it the team is named after the session.
    #[arg(long, value_name = "NAME")]
    pub(super) team: Option<String>,
}

impl SessionArgs {
    pub(super) fn resuming(&self) -> bool {
        self.resume.is_some() || self.continue_latest
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The task. Read from stdin when absent.
    pub(super) prompt: Option<String>,
    #[command(flatten)]
    pub(super) session: SessionArgs,
    #[arg(long, value_enum, default_value = "text")]
    pub(super) output_format: OutputFormat,
    /// Treat this run as interactive for flag gates (it still never prompts).
    #[arg(long = "session", value_enum, default_value = "non-interactive")]
    pub(super) kind: SessionArg,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub(super) session: SessionArgs,
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The task (stdin when absent).
    pub(super) prompt: Option<String>,
    #[command(flatten)]
    pub(super) session: SessionArgs,
    #[arg(long = "session", value_enum, default_value = "non-interactive")]
    pub(super) kind: SessionArg,
}

pub(super) fn read_prompt(prompt: Option<String>) -> Result<String, CliError> {
    match prompt {
        Some(p) => Ok(p),
        None => read_stdin_prompt("as an argument"),
    }
}

/// The longest prompt read from stdin (far beyond any model's window; a
/// bound, so that an endless stdin cannot take all memory).
pub(super) const MAX_STDIN_PROMPT_BYTES: u64 = 64 * 1024 * 1024;

/// The prompt from stdin (not from a terminal; not empty; at most
/// [`MAX_STDIN_PROMPT_BYTES`]). `where_else` completes "give one … or on
/// stdin" in the error.
pub(super) fn read_stdin_prompt(where_else: &str) -> Result<String, CliError> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(CliError::Usage(format!(
            "no prompt: give one {where_else} or on stdin"
        )));
    }
    let mut text = String::new();
    stdin
        .lock()
        .take(MAX_STDIN_PROMPT_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| CliError::Usage(format!("cannot read stdin: {e}")))?;
    if text.len() as u64 > MAX_STDIN_PROMPT_BYTES {
        return Err(CliError::Usage(format!(
            "the prompt on stdin is longer than {MAX_STDIN_PROMPT_BYTES} bytes; not read"
        )));
    }
    if text.trim().is_empty() {
        return Err(CliError::Usage("no prompt: stdin was empty".into()));
    }
    Ok(text)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InputFormat {
    /// The prompt as text (argument or stdin).
    Text,
    /// User messages and control requests, one JSON object per line on stdin.
    StreamJson,
}

/// Claude Code's flags, on the top-level command (see `docs/headless.md`).
#[derive(Debug, Clone, Default, PartialEq, Args)]
#[command(next_help_heading = "Headless mode (Claude Code's flags)")]
pub struct HeadlessArgs {
    /// The prompt (`-p "task"`); read from stdin when absent.
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,
    /// Print the answer and exit (headless mode).
    #[arg(short = 'p', long = "print")]
    pub print: bool,
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub output_format: Option<OutputFormat>,
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub input_format: Option<InputFormat>,
    /// With stream-json input: the longest line read from stdin, in bytes
    /// (default 64 MiB). A longer line is skipped and answered with an
    /// error `result`; the session goes on.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_input_line_bytes: Option<u64>,
    /// With stream-json output: also `stream_event` partial messages.
    #[arg(long)]
    pub include_partial_messages: bool,
    /// Model for the main session (an alias from [models] or a full id).
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Not supported yet: said on stderr and ignored.
    #[arg(long, value_name = "MODEL")]
    pub fallback_model: Option<String>,
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub permission_mode: Option<PermissionMode>,
    /// Same as `--permission-mode bypassPermissions`.
    #[arg(long)]
    pub dangerously_skip_permissions: bool,
    /// Permission rules to allow (`Read`, `Bash(git:*)`); comma or space separated.
    #[arg(long = "allowedTools", visible_alias = "allowed-tools", num_args = 1.., value_name = "RULES")]
    pub allowed_tools: Vec<String>,
    /// Permission rules to deny; a bare tool name also removes the tool.
    #[arg(long = "disallowedTools", visible_alias = "disallowed-tools", num_args = 1.., value_name = "RULES")]
    pub disallowed_tools: Vec<String>,
    /// Only these built-in tools (`""` for none, `default` for all).
    #[arg(long, num_args = 1.., value_name = "TOOLS")]
    pub tools: Vec<String>,
    /// Replace the main system prompt (the environment block stays).
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,
    #[arg(long, value_name = "FILE")]
    pub system_prompt_file: Option<PathBuf>,
    /// Append to the main system prompt.
    #[arg(long, value_name = "TEXT")]
    pub append_system_prompt: Option<String>,
    #[arg(long, value_name = "FILE")]
    pub append_system_prompt_file: Option<PathBuf>,
    /// MCP servers from files or JSON strings (`{"mcpServers": {...}}`).
    #[arg(long, num_args = 1.., value_name = "FILE|JSON")]
    pub mcp_config: Vec<String>,
    /// Only the servers of --mcp-config.
    #[arg(long)]
    pub strict_mcp_config: bool,
    /// More directories the tools may use.
    #[arg(long, num_args = 1.., value_name = "DIR")]
    pub add_dir: Vec<PathBuf>,
    /// Run as this agent.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Resume the session with this id (see `cadre sessions list`).
    #[arg(short = 'r', long, num_args = 0..=1, default_missing_value = "", value_name = "ID")]
    pub resume: Option<String>,
    /// Continue the latest session of this project.
    #[arg(short = 'c', long = "continue")]
    pub continue_session: bool,
    /// Use this session id.
    #[arg(long, value_name = "ID")]
    pub session_id: Option<String>,
    /// With --resume or --continue: go on in a copy under a new session id.
    #[arg(long)]
    pub fork_session: bool,
    /// Stop the session once its model calls have cost this much (US dollars).
    #[arg(long, value_name = "USD")]
    pub max_budget_usd: Option<f64>,
    /// `stdio`: ask the SDK client (its `can_use_tool`) when a rule says ask.
    #[arg(long, value_name = "TOOL")]
    pub permission_prompt_tool: Option<String>,
    /// Accepted for the SDKs; not supported yet (said on stderr).
    #[arg(long, hide = true)]
    pub include_hook_events: bool,
    #[arg(long, hide = true, num_args = 1..)]
    pub betas: Vec<String>,
    /// Extended thinking with this budget in tokens (0: off); wins over
    /// `MAX_THINKING_TOKENS` and `provider.thinking_budget`.
    #[arg(long, value_name = "N")]
    pub max_thinking_tokens: Option<u32>,
    /// `enabled`/`adaptive`: think (with the budget given, else
    /// max_tokens - 1); `disabled`: do not.
    #[arg(long, value_name = "MODE", value_parser = ["enabled", "adaptive", "disabled"])]
    pub thinking: Option<String>,
    /// Accepted for the SDKs; not supported (said on stderr).
    #[arg(long, hide = true)]
    pub thinking_display: Option<String>,
    /// The main session's reasoning effort (`low`, `medium`, `high`,
    /// `xhigh`, `max`), sent where the model takes it.
    #[arg(long, value_name = "LEVEL")]
    pub effort: Option<String>,
    /// Structured output: the answer is a StructuredOutput tool call whose
    /// input fits this JSON Schema (the result's `structured_output`).
    #[arg(long, value_name = "SCHEMA")]
    pub json_schema: Option<String>,
    /// The SDKs' session store (`session_store`): every transcript line is
    /// also written to stdout as a `transcript_mirror` frame.
    #[arg(long, hide = true)]
    pub session_mirror: bool,
    /// The SDKs' truncating resume (with --fork-session): continue from
    /// this message, leaving out what came after it.
    #[arg(long, hide = true, value_name = "UUID")]
    pub resume_session_at: Option<String>,
    #[arg(long, hide = true, value_name = "UUID")]
    pub resume_drops_turn: Option<String>,
    /// Echo each user message read from stdin back on stdout, as Claude
    /// Code does (stream-json in and out). Takes an empty value too: the ACP
    /// adapters pass `--replay-user-messages ""`.
    #[arg(long, hide = true, num_args = 0..=1, default_missing_value = "", value_name = "")]
    pub replay_user_messages: Option<String>,
    /// Claude Code's `--init`: run the Setup hooks (`trigger` `init`)
    /// before the session starts, then go on (hidden, as in Claude Code).
    #[arg(long, hide = true)]
    pub init: bool,
    /// Run the Setup hooks (`init`) and the SessionStart hooks, then exit
    /// without reading a prompt.
    #[arg(long, hide = true)]
    pub init_only: bool,
    /// Run the Setup hooks with `trigger` `maintenance`, then go on.
    #[arg(long, hide = true)]
    pub maintenance: bool,
}

impl HeadlessArgs {
    /// Whether these flags ask for a headless run: `-p`, a prompt, or the
    /// SDK's `--output-format`/`--input-format` without `-p`.
    pub fn selected(&self) -> bool {
        self.print || self.output_format.is_some() || self.input_format.is_some() || self.init_only
    }

    /// The Setup hooks' trigger these flags ask for: `init` (`--init`,
    /// `--init-only`, which wins as in Claude Code) or `maintenance`.
    pub fn setup_trigger(&self) -> Option<&'static str> {
        if self.init_only || self.init {
            Some("init")
        } else if self.maintenance {
            Some("maintenance")
        } else {
            None
        }
    }

    /// Whether any of these flags was given.
    pub fn any(&self) -> bool {
        *self != HeadlessArgs::default()
    }
}

/// The longest stdin line read with stream-json input unless
/// `--max-input-line-bytes` says otherwise.
pub const MAX_INPUT_LINE_BYTES: u64 = 64 * 1024 * 1024;

/// Splits rule lists as Claude Code does: commas and spaces separate,
/// except inside parentheses (`Bash(git log:*)` is one rule).
pub fn split_rules(values: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for v in values {
        let mut depth = 0i32;
        let mut cur = String::new();
        for ch in v.chars() {
            match ch {
                '(' => {
                    depth += 1;
                    cur.push(ch);
                }
                ')' => {
                    depth -= 1;
                    cur.push(ch);
                }
                ',' | ' ' | '\t' | '\n' if depth <= 0 => {
                    if !cur.trim().is_empty() {
                        out.push(cur.trim().to_string());
                    }
                    cur.clear();
                }
                _ => cur.push(ch),
            }
        }
        if !cur.trim().is_empty() {
            out.push(cur.trim().to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::split_rules;

    #[test]
    fn rules_split_on_commas_and_spaces_outside_parentheses() {
        assert_eq!(
            split_rules(&["Read,Bash(git log:*) Edit".into(), "Grep".into()]),
            ["Read", "Bash(git log:*)", "Edit", "Grep"]
        );
        assert!(split_rules(&[String::new()]).is_empty());
    }
}
