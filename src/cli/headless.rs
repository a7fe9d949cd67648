//! `cadre -p`: Claude Code's top-level flags and its headless mode, in
//! text, json or stream-json, with stream-json input and the Agent SDK's
//! control protocol (see `docs/headless.md`).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use clap::{Args, ValueEnum};
use serde_json::{Map, Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::emit::{Emitter, Print, send, wire_usage};
use super::output::{OutputFormat, Progress, print_answer, print_line};
use super::run::{self, Extras, Mode, Prepared, SessionArgs, parse_mode};
use super::wire::{self, FromClient, Input, Output, ResultOut, ResultSubtype, ToClient};
use super::{CliError, GlobalArgs};
use crate::config::PermissionMode;
use crate::message::{ContentBlock, Message, Usage};
use crate::provider::{ProviderError, ProviderErrorKind};
use crate::raw::lines::Line;
use crate::runtime::{self, EventSink, Outcome, RunError, Session, StopKind};

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
}

impl HeadlessArgs {
    /// Whether these flags ask for a headless run: `-p`, a prompt, or the
    /// SDK's `--output-format`/`--input-format` without `-p`.
    pub fn selected(&self) -> bool {
        self.print || self.output_format.is_some() || self.input_format.is_some()
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

/// Reads a flag value that is a JSON string or the path of a JSON file.
fn json_arg(flag: &str, value: &str) -> Result<Value, CliError> {
    let t = value.trim();
    let (text, origin) = if t.starts_with('{') {
        (t.to_string(), format!("{flag} (inline JSON)"))
    } else {
        let text = std::fs::read_to_string(t)
            .map_err(|e| CliError::Usage(format!("{flag} {t}: cannot read: {e}")))?;
        (text, format!("{flag} {t}"))
    };
    serde_json::from_str(&text).map_err(|e| {
        CliError::Usage(format!(
            "{origin}:{}:{}: not valid JSON: {e}",
            e.line(),
            e.column()
        ))
    })
}

fn note(g: &GlobalArgs, text: &str) {
    if !g.quiet {
        eprintln!("cadre: {text}");
    }
}

/// What the flags turn into before the session starts.
struct Plan {
    session: SessionArgs,
    extras: Extras,
    output: OutputFormat,
    input: InputFormat,
    stdio_permissions: bool,
    /// In-process MCP servers of the SDK client.
    sdk_servers: Vec<String>,
    /// `--json-schema`, compiled.
    structured: Option<runtime::structured::StructuredSpec>,
}

fn plan(g: &GlobalArgs, h: &HeadlessArgs) -> Result<Plan, CliError> {
    if h.resume.as_deref() == Some("") {
        return Err(CliError::Usage(
            "--resume needs a session id here (cadre has no session picker); \
             `cadre sessions list` shows them, or use --continue for the latest"
                .into(),
        ));
    }
    if h.fork_session && h.resume.is_none() && !h.continue_session {
        return Err(CliError::Usage(
            "--fork-session goes with --resume ID or --continue".into(),
        ));
    }
    if h.resume_drops_turn.is_some() && h.resume_session_at.is_none() {
        return Err(CliError::Usage(
            "--resume-drops-turn requires --resume-session-at".into(),
        ));
    }
    if h.resume_session_at.is_some() && h.resume.is_none() && !h.continue_session {
        return Err(CliError::Usage(
            "--resume-session-at goes with --resume ID".into(),
        ));
    }
    let output = h.output_format.unwrap_or(OutputFormat::Text);
    let input = h.input_format.unwrap_or(InputFormat::Text);
    if input == InputFormat::StreamJson && output != OutputFormat::StreamJson {
        return Err(CliError::Usage(
            "--input-format stream-json requires --output-format stream-json".into(),
        ));
    }
    if h.max_input_line_bytes.is_some() && input != InputFormat::StreamJson {
        return Err(CliError::Usage(
            "--max-input-line-bytes goes with --input-format stream-json".into(),
        ));
    }
    if h.include_partial_messages && output != OutputFormat::StreamJson {
        return Err(CliError::Usage(
            "--include-partial-messages requires --output-format stream-json".into(),
        ));
    }
    if let Some(b) = h.max_budget_usd
        && !(b.is_finite() && b > 0.0)
    {
        return Err(CliError::Usage(format!(
            "--max-budget-usd {b}: expected a positive amount of dollars"
        )));
    }
    let mut unsupported = Vec::new();
    if h.fallback_model.is_some() {
        unsupported.push("--fallback-model (cadre has no fallback model; ignored)");
    }
    if h.include_hook_events {
        unsupported.push("--include-hook-events (hook events are not reported; ignored)");
    }
    if !h.betas.is_empty() {
        unsupported.push("--betas (ignored)");
    }
    if h.thinking_display.is_some() {
        unsupported.push("--thinking-display (cadre sends no display choice; ignored)");
    }
    if h.session_mirror {
        // The SDKs' session store: every transcript line (and sub-agent
        // meta file) also goes to stdout as a `transcript_mirror` frame,
        // after it is on disk.
        runtime::transcript::set_mirror(Box::new(|path, lines| {
            let entries: Vec<&str> = std::str::from_utf8(lines)
                .unwrap_or_default()
                .lines()
                .filter(|l| !l.is_empty())
                .collect();
            let path = serde_json::to_string(&path.display().to_string()).unwrap_or_default();
            super::output::print_line(&format!(
                "{{\"type\":\"transcript_mirror\",\"filePath\":{path},\"entries\":[{}]}}",
                entries.join(",")
            ));
        }));
    }
    if let Some(v) = &h.replay_user_messages {
        if !v.is_empty() {
            return Err(CliError::Usage(format!(
                "--replay-user-messages takes no value, found {v:?}"
            )));
        }
        if input != InputFormat::StreamJson {
            return Err(CliError::Usage(
                "--replay-user-messages requires --input-format stream-json and --output-format stream-json"
                    .into(),
            ));
        }
    }
    for u in unsupported {
        note(g, &format!("not supported: {u}"));
    }

    let mut extras = Extras::default();
    let mut session = SessionArgs {
        agent: h.agent.clone(),
        model: h.model.clone(),
        max_turns: h.max_turns,
        permission_mode: h.permission_mode,
        add_dirs: h.add_dir.clone(),
        resume: h.resume.clone(),
        continue_latest: h.continue_session,
        fork_session: h.fork_session,
        resume_session_at: h.resume_session_at.clone(),
        resume_drops_turn: h.resume_drops_turn.clone(),
        team: None,
    };
    if h.dangerously_skip_permissions {
        session.permission_mode = Some(PermissionMode::BypassPermissions);
    }
    extras.allow.extend(split_rules(&h.allowed_tools));
    let deny = split_rules(&h.disallowed_tools);
    extras.remove_tools = deny.iter().filter(|r| !r.contains('(')).cloned().collect();
    extras.deny.extend(deny);
    if !h.tools.is_empty() {
        let names = split_rules(&h.tools);
        if !(names.len() == 1 && names[0] == "default") {
            extras.tools = Some(names);
        }
    }
    let read = |flag: &str, p: &PathBuf| {
        std::fs::read_to_string(p)
            .map_err(|e| CliError::Usage(format!("{flag} {}: cannot read: {e}", p.display())))
    };
    extras.main_prompt.replace = match (&h.system_prompt, &h.system_prompt_file) {
        (Some(_), Some(_)) => {
            return Err(CliError::Usage(
                "give --system-prompt or --system-prompt-file, not both".into(),
            ));
        }
        (Some(t), None) => Some(t.clone()),
        (None, Some(p)) => Some(read("--system-prompt-file", p)?),
        (None, None) => None,
    };
    let mut append = Vec::new();
    if let Some(t) = &h.append_system_prompt {
        append.push(t.clone());
    }
    if let Some(p) = &h.append_system_prompt_file {
        append.push(read("--append-system-prompt-file", p)?);
    }
    if !append.is_empty() {
        extras.main_prompt.append = Some(append.join("\n\n"));
    }
    if let Some(id) = &h.session_id {
        // As Claude Code: a UUID, and not one a session already has.
        if !runtime::resume::is_uuid(id) {
            return Err(CliError::Usage(format!(
                "--session-id {id:?}: invalid session ID. Must be a valid UUID."
            )));
        }
        extras.session_id = Some(id.clone());
    }
    let mut sdk_servers = Vec::new();
    let mut strict_names = Vec::new();
    if !h.mcp_config.is_empty() {
        let mut servers = Map::new();
        for c in &h.mcp_config {
            let v = json_arg("--mcp-config", c)?;
            let Some(list) = v.get("mcpServers").and_then(Value::as_object) else {
                return Err(CliError::Usage(format!(
                    "--mcp-config {c}: expected an object with `mcpServers`"
                )));
            };
            for (name, server) in list {
                if server.get("type").and_then(Value::as_str) == Some("sdk") {
                    if input != InputFormat::StreamJson {
                        note(
                            g,
                            &format!(
                                "not supported: SDK MCP server `{name}` without --input-format stream-json (no client to reach it); its tools are not offered"
                            ),
                        );
                        continue;
                    }
                    sdk_servers.push(name.clone());
                    servers.insert(name.clone(), json!({"type": "sdk"}));
                    continue;
                }
                servers.insert(name.clone(), server.clone());
            }
        }
        strict_names = servers.keys().cloned().collect();
        if !servers.is_empty() {
            extras.env.push((
                "CADRE_MCP_SERVERS".into(),
                Value::Object(servers).to_string(),
            ));
        }
    }
    if h.strict_mcp_config {
        extras.mcp_only = Some(strict_names);
    }
    // Thinking is one setting, provider.thinking_budget (0: off); these
    // flags set it above every other layer.
    let budget = match (h.thinking.as_deref(), h.max_thinking_tokens) {
        (Some("disabled"), _) => Some(0),
        (_, Some(n)) => Some(n),
        // As Claude Code on a model without adaptive thinking: the most
        // the answer leaves room for (cut to max_tokens - 1 when sent).
        (Some(_), None) => Some(u32::MAX),
        (None, None) => None,
    };
    if let Some(b) = budget {
        extras
            .env
            .push(("CADRE_PROVIDER__THINKING_BUDGET".into(), b.to_string()));
    }
    let stdio_permissions = match h.permission_prompt_tool.as_deref() {
        None => false,
        Some("stdio") if input == InputFormat::StreamJson => true,
        Some("stdio") => {
            return Err(CliError::Usage(
                "--permission-prompt-tool stdio needs --input-format stream-json (the answers come on stdin)"
                    .into(),
            ));
        }
        Some(other) => {
            note(
                g,
                &format!(
                    "not supported: --permission-prompt-tool {other} (only `stdio`); questions are denied"
                ),
            );
            false
        }
    };
    let structured = match &h.json_schema {
        None => None,
        Some(text) => {
            let schema: Value = serde_json::from_str(text).map_err(|e| {
                CliError::Usage(format!(
                    "--json-schema:{}:{}: not JSON: {e}",
                    e.line(),
                    e.column()
                ))
            })?;
            Some(
                runtime::structured::StructuredSpec::new(schema).map_err(|e| {
                    CliError::Usage(format!("--json-schema: not a JSON Schema: {e}"))
                })?,
            )
        }
    };
    Ok(Plan {
        session,
        extras,
        output,
        input,
        stdio_permissions,
        sdk_servers,
        structured,
    })
}

/// Requests cadre sends to the client and the answers it waits for.
#[derive(Default)]
struct Control {
    pending: Mutex<HashMap<String, oneshot::Sender<Result<Value, String>>>>,
    next: AtomicU64,
    /// The client's input ended: nothing can answer a request any more
    /// (a SessionEnd callback, say), so none is sent.
    closed: std::sync::atomic::AtomicBool,
}

impl Control {
    /// Sends a request and waits for its answer (`Err` when the client
    /// answered with an error or went away).
    async fn ask(&self, request: ToClient) -> Result<Value, String> {
        self.start(request).await
    }

    /// Sends a request now; the answer comes through the returned future.
    fn start(
        &self,
        request: ToClient,
    ) -> impl std::future::Future<Output = Result<Value, String>> + Send + 'static {
        let id = format!(
            "cadre_req_{}",
            self.next.fetch_add(1, Ordering::Relaxed) + 1
        );
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            // Checked under the lock `close` takes: a request is either
            // refused here or dropped there, never left waiting.
            if !self.closed.load(Ordering::Relaxed) {
                p.insert(id.clone(), tx);
            }
        }
        send(&Output::ControlRequest(wire::ControlRequestOut {
            request_id: id,
            request,
        }));
        async move {
            rx.await
                .unwrap_or_else(|_| Err("the client closed its input".into()))
        }
    }

    fn answer(&self, response: wire::ResponseIn) {
        let tx = self
            .pending
            .lock()
            .ok()
            .and_then(|mut p| p.remove(response.request_id()));
        if let Some(tx) = tx {
            let _ = tx.send(match response {
                wire::ResponseIn::Success { response, .. } => Ok(response),
                wire::ResponseIn::Error { error, .. } => Err(error),
            });
        }
    }

    /// The client is gone: every waiting request fails.
    fn close(&self) {
        if let Ok(mut p) = self.pending.lock() {
            self.closed.store(true, Ordering::Relaxed);
            p.clear();
        }
    }
}

/// The prompts read from stdin and not yet answered, each with the token
/// that cancels it. An interrupt cancels every prompt read before it —
/// the one running and any still queued — so what it stops depends only on
/// the order of the lines on stdin, never on how far the session loop got.
#[derive(Default)]
struct Prompts {
    open: Mutex<Vec<(u64, CancellationToken)>>,
    next: AtomicU64,
    /// Prompts not started yet, by the uuid their client gave them
    /// (`cancel_async_message`); a withdrawn one is dropped unrun.
    waiting: Mutex<Vec<(u64, String)>>,
    withdrawn: Mutex<Vec<u64>>,
}

impl Prompts {
    /// A prompt was read: its id and its token.
    fn admit(&self) -> (u64, CancellationToken) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        if let Ok(mut open) = self.open.lock() {
            open.push((id, token.clone()));
        }
        (id, token)
    }

    /// Prompt `id` came with `uuid`: it can be withdrawn until it starts.
    fn name(&self, id: u64, uuid: Option<&str>) {
        if let (Some(u), Ok(mut w)) = (uuid, self.waiting.lock()) {
            w.push((id, u.to_string()));
        }
    }

    /// Withdraws the waiting prompt with this uuid; whether there was one.
    fn withdraw(&self, uuid: &str) -> bool {
        let Ok(mut w) = self.waiting.lock() else {
            return false;
        };
        let Some(at) = w.iter().position(|(_, u)| u == uuid) else {
            return false;
        };
        let (id, _) = w.remove(at);
        if let Ok(mut d) = self.withdrawn.lock() {
            d.push(id);
        }
        true
    }

    /// Prompt `id` is about to run: `false` when it was withdrawn (it is
    /// then done, unrun).
    fn start(&self, id: u64) -> bool {
        if let Ok(mut w) = self.waiting.lock() {
            w.retain(|(i, _)| *i != id);
        }
        let withdrawn = self.withdrawn.lock().is_ok_and(|mut d| {
            let was = d.contains(&id);
            d.retain(|i| *i != id);
            was
        });
        if withdrawn {
            self.done(id);
        }
        !withdrawn
    }

    /// The prompt has its result.
    fn done(&self, id: u64) {
        if let Ok(mut open) = self.open.lock() {
            open.retain(|(i, _)| *i != id);
        }
    }

    /// Prompts read and not yet answered.
    fn queued(&self) -> u64 {
        self.open.lock().map_or(0, |open| open.len() as u64)
    }

    /// Cancels every open prompt; how many there were.
    fn interrupt(&self) -> usize {
        match self.open.lock() {
            Ok(open) => {
                for (_, t) in open.iter() {
                    t.cancel();
                }
                open.len()
            }
            Err(_) => 0,
        }
    }
}

/// A prompt from stdin with the token an interrupt cancels it by.
struct Prompt {
    message: Message,
    id: u64,
    cancel: CancellationToken,
    /// `client_composed`: sent as written, never a slash command.
    verbatim: bool,
    /// With `--replay-user-messages`: the message as the client sent it.
    echo: Option<Echo>,
    /// Echoed on the prompt's result (`origin`).
    origin: Option<Value>,
    /// The client's id for the message (its checkpoint's name).
    uuid: Option<String>,
}

/// A user message of stdin, kept to be echoed back (`--replay-user-messages`).
struct Echo {
    message: Value,
    parent_tool_use_id: Option<String>,
    origin: Option<Value>,
}

/// What the stdin reader hands the session loop.
enum Incoming {
    User(Prompt),
    Initialize {
        request_id: String,
        hooks: BTreeMap<String, Vec<wire::HookMatcherIn>>,
        agents: Option<Map<String, Value>>,
        forward_subagent_text: bool,
    },
    SetMode(PermissionMode),
    SetModel(Option<String>),
    /// `set_max_thinking_tokens`: the budget from the next prompt on.
    SetThinking(Option<u32>),
    /// Line `line` of stdin was longer than the cap and was skipped.
    TooLong {
        line: u64,
        bytes: u64,
    },
    /// A control request answered in `control.rs` that came before the
    /// session was set up.
    Control(String, Vec<u8>, super::control::Ctx),
    /// stdin ended (or could not be read).
    End,
}

/// A user message from stdin as a conversation message.
fn user_message(u: wire::UserIn) -> Result<Message, String> {
    if let Some(role) = u.message.role.as_deref()
        && role != "user"
    {
        return Err(format!("expected role \"user\", found {role:?}"));
    }
    match u.message.content {
        Value::String(s) => Ok(Message::user(vec![ContentBlock::text(s)])),
        v @ Value::Array(_) => serde_json::from_value::<Vec<ContentBlock>>(v)
            .map(Message::user)
            .map_err(|e| format!("content blocks: {e}")),
        other => Err(format!(
            "content must be a string or an array of blocks, found {other}"
        )),
    }
}

/// Reads stdin lines until it ends: answers control responses and
/// interrupts at once, passes the rest on in order. No line longer than
/// `max` bytes is held: it is skipped to its newline and reported. With
/// `replay`, each user message is kept as sent, to be echoed.
#[allow(clippy::too_many_arguments)]
fn spawn_reader<R>(
    mut input: R,
    max: u64,
    replay: bool,
    tx: mpsc::UnboundedSender<Incoming>,
    control: Arc<Control>,
    prompts: Arc<Prompts>,
    engine: Arc<std::sync::OnceLock<Arc<runtime::Engine>>>,
    emitter: Emitter,
) where
    R: tokio::io::AsyncBufRead + Unpin + Send + 'static,
{
    let started = std::time::Instant::now();
    tokio::spawn(async move {
        let cap = usize::try_from(max).unwrap_or(usize::MAX);
        let mut line = Vec::new();
        let mut n = 0u64;
        loop {
            match crate::raw::lines::next_line(&mut input, &mut line, cap, |_| {}).await {
                Ok(Some(Line::Whole)) => {}
                Ok(Some(Line::TooLong(bytes))) => {
                    n += 1;
                    eprintln!(
                        "cadre: stdin:{n}: a line of {bytes} bytes, longer than the limit of \
                         {max} bytes (--max-input-line-bytes); skipped"
                    );
                    let _ = tx.send(Incoming::TooLong { line: n, bytes });
                    continue;
                }
                Ok(None) => break,
                Err(e) => {
                    eprintln!("cadre: cannot read stdin: {e}");
                    break;
                }
            }
            n += 1;
            if line.trim_ascii().is_empty() {
                continue;
            }
            let input: Input = match serde_json::from_slice(&line) {
                Ok(i) => i,
                Err(e) => {
                    eprintln!(
                        "cadre: stdin:{n}:{}: not a stream-json message: {e}",
                        e.column()
                    );
                    continue;
                }
            };
            match input {
                Input::User(u) => {
                    let verbatim = u.client_composed;
                    let uuid = u.uuid.clone();
                    let echo = replay.then(|| Echo {
                        message: json!({"role": "user", "content": u.message.content.clone()}),
                        parent_tool_use_id: u.parent_tool_use_id.clone(),
                        origin: u.origin.clone(),
                    });
                    let origin = u.echoed_origin();
                    match user_message(u) {
                        Ok(message) => {
                            let (id, cancel) = prompts.admit();
                            prompts.name(id, uuid.as_deref());
                            let _ = tx.send(Incoming::User(Prompt {
                                message,
                                id,
                                cancel,
                                verbatim,
                                echo,
                                origin,
                                uuid,
                            }));
                        }
                        Err(e) => eprintln!("cadre: stdin:{n}: user message: {e}"),
                    }
                }
                Input::ControlResponse(r) => control.answer(r.response),
                Input::ControlCancelRequest { .. } | Input::KeepAlive => {}
                Input::ControlRequest(req) => {
                    let id = req.request_id;
                    let mcp = engine.get().map(|e| &e.mcp);
                    let reply = match req.request {
                        FromClient::Initialize {
                            hooks,
                            agents,
                            forward_subagent_text,
                            rest,
                        } => {
                            let ignored: Vec<&str> = rest
                                .iter()
                                .filter(|(_, v)| !v.is_null())
                                .map(|(k, _)| k.as_str())
                                .collect();
                            if !ignored.is_empty() {
                                eprintln!(
                                    "cadre: not supported in initialize: {} (ignored)",
                                    ignored.join(", ")
                                );
                            }
                            let _ = tx.send(Incoming::Initialize {
                                request_id: id,
                                hooks: hooks.unwrap_or_default(),
                                agents,
                                forward_subagent_text: forward_subagent_text.unwrap_or(false),
                            });
                            None
                        }
                        FromClient::Interrupt => {
                            // Acknowledged first, so the answer precedes the
                            // `result` of the prompt it stops.
                            send(&Output::ControlResponse(wire::ControlResponseOut::success(
                                &id,
                                json!({}),
                            )));
                            let n = prompts.interrupt();
                            tracing::debug!("interrupt: {n} prompt(s) cancelled");
                            None
                        }
                        FromClient::SetPermissionMode { mode } => Some(match parse_mode(&mode) {
                            Ok(m) => {
                                let _ = tx.send(Incoming::SetMode(m));
                                wire::ControlResponseOut::success(&id, json!({}))
                            }
                            Err(e) => wire::ControlResponseOut::error(&id, e),
                        }),
                        FromClient::SetModel { model } => {
                            // `default` (the first of `initialize`'s models):
                            // the configured model, as `null`.
                            let model = model.filter(|m| m != "default");
                            let _ = tx.send(Incoming::SetModel(model));
                            Some(wire::ControlResponseOut::success(&id, json!({})))
                        }
                        FromClient::SetMaxThinkingTokens {
                            max_thinking_tokens,
                        } => {
                            let _ = tx.send(Incoming::SetThinking(max_thinking_tokens));
                            Some(wire::ControlResponseOut::success(&id, json!({})))
                        }
                        FromClient::McpStatus => Some(wire::ControlResponseOut::success(
                            &id,
                            json!({"mcpServers": mcp.map(|m| server_statuses(m)).unwrap_or_default()}),
                        )),
                        FromClient::StopTask { task_id } => {
                            if let Some(task) = engine.get().and_then(|e| e.tasks.get(&task_id)) {
                                task.cancel.cancel();
                            }
                            Some(wire::ControlResponseOut::success(&id, json!({})))
                        }
                        FromClient::GetContextUsage => Some(wire::ControlResponseOut::success(
                            &id,
                            context_usage(engine.get(), &emitter),
                        )),
                        // Claude Code's answers: a failed dry run is a
                        // success saying why; a failed rewind an error.
                        FromClient::RewindFiles {
                            user_message_id,
                            dry_run,
                        } => {
                            let dry_run = dry_run == Some(true);
                            let done = match engine.get().and_then(|e| e.file_history.as_ref()) {
                                None => Err("File rewinding is not enabled.".to_string()),
                                Some(h) => {
                                    h.rewind(user_message_id.as_deref().unwrap_or(""), dry_run)
                                }
                            };
                            Some(match done {
                                Ok(r) => wire::ControlResponseOut::success(&id, r.answer(dry_run)),
                                Err(why) if dry_run => wire::ControlResponseOut::success(
                                    &id,
                                    json!({"canRewind": false, "error": why}),
                                ),
                                Err(why) => wire::ControlResponseOut::error(&id, why),
                            })
                        }
                        FromClient::Unsupported => {
                            let ctx = super::control::Ctx {
                                engine: engine.get().cloned(),
                                emitter: emitter.clone(),
                                withdraw: {
                                    let p = Arc::clone(&prompts);
                                    Arc::new(move |uuid: &str| p.withdraw(uuid))
                                },
                                started,
                            };
                            if ctx.engine.is_none() && super::control::needs_session(&line) {
                                // Answered once the session is set up (which
                                // this starts, as `initialize` does).
                                let _ = tx.send(Incoming::Control(id, line.clone(), ctx));
                            } else {
                                super::control::respond(id, line.clone(), ctx).await;
                            }
                            None
                        }
                    };
                    if let Some(r) = reply {
                        send(&Output::ControlResponse(r));
                    }
                }
            }
        }
        tracing::debug!("stdin ended after {n} lines");
        control.close();
        let _ = tx.send(Incoming::End);
    });
}

/// The answer to `get_context_usage`: Claude Code's main figures for the
/// main conversation, counted from its last response (what it read and
/// wrote), against the model's window and the auto-compact threshold.
fn context_usage(engine: Option<&Arc<runtime::Engine>>, emitter: &Emitter) -> Value {
    let (model, last) = emitter.main_context();
    let used = last.map_or(0, |u| u.total());
    let (window, limit, auto) = engine.map_or((0, 0, false), |e| {
        let snap = e.snapshot.load();
        let c = &snap.settings().compact;
        (c.window(&model), c.limit_for(&model, None, None), c.auto)
    });
    let free = window.saturating_sub(used);
    let percentage = used.saturating_mul(100).checked_div(window).unwrap_or(0);
    json!({
        "categories": [
            {"id": "messages", "name": "Messages", "tokens": used, "color": "purple", "kind": "used"},
            {"id": "free_space", "name": "Free space", "tokens": free, "color": "promptBorder", "kind": "free"},
        ],
        "totalTokens": used,
        "maxTokens": window,
        "rawMaxTokens": window,
        "percentage": percentage,
        "model": model,
        "autoCompactThreshold": limit,
        "isAutoCompactEnabled": auto,
        "memoryFiles": [],
        "mcpTools": [],
        "agents": [],
        "apiUsage": last.map(|u| wire_usage(&u)),
    })
}

/// The hook events whose callbacks cadre calls (Claude Code's names;
/// `Stop` is the main session's stop).
const CLIENT_HOOK_EVENTS: [&str; 25] = [
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Stop",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "SessionStart",
    "SessionEnd",
    "Notification",
    "PermissionRequest",
    "PermissionDenied",
    "PreModelSwitch",
    "PostModelSwitch",
    "PreSkillShellCommand",
    "StopFailure",
    "ConfigChange",
    "InstructionsLoaded",
    "WorktreeCreate",
    "WorktreeRemove",
    "PostToolBatch",
    "Elicitation",
    "ElicitationResult",
];

/// Calls the client's callbacks registered for `event` whose matcher
/// selects `target`, in order; the answers of those that answered in time.
async fn call_client_hooks(
    control: &Control,
    matchers: &[wire::HookMatcherIn],
    event: &str,
    target: &str,
    input: &Value,
) -> Vec<Value> {
    let mut out = Vec::new();
    let tool_use_id = input
        .get("tool_use_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    for m in matchers {
        if !wire::matcher_selects(m.matcher.as_deref(), target) {
            continue;
        }
        // The SDKs give a timeout in seconds; Claude Code's default is 60.
        let secs = m
            .timeout
            .filter(|t| t.is_finite() && *t > 0.0)
            .unwrap_or(60.0)
            .min(86_400.0);
        for id in &m.hook_callback_ids {
            let ask = control.ask(ToClient::HookCallback {
                callback_id: id.clone(),
                input: input.clone(),
                tool_use_id: tool_use_id.clone(),
            });
            let failure =
                match tokio::time::timeout(std::time::Duration::from_secs_f64(secs), ask).await {
                    Ok(Ok(v)) => {
                        out.push(v);
                        continue;
                    }
                    Ok(Err(e)) => format!("{event} hook callback {id} failed: {e}"),
                    Err(_) => format!("{event} hook callback {id} gave no answer within {secs} s"),
                };
            if m.on_failure.as_deref().is_some_and(|f| f != "continue") {
                eprintln!("cadre: {failure}; it blocks (onFailure)");
                out.push(json!({"decision": "block", "reason": failure}));
            } else {
                eprintln!("cadre: {failure}; going on without it");
            }
        }
    }
    out
}

/// The client's hook callbacks as the engine calls them.
fn client_hooks(
    control: Arc<Control>,
    hooks: BTreeMap<String, Vec<wire::HookMatcherIn>>,
) -> runtime::ClientHooks {
    let hooks = Arc::new(hooks);
    runtime::ClientHooks {
        events: hooks.keys().cloned().collect(),
        call: Arc::new(move |event: &'static str, target: String, input: Value| {
            let control = Arc::clone(&control);
            let hooks = Arc::clone(&hooks);
            Box::pin(async move {
                let Some(matchers) = hooks.get(event) else {
                    return Vec::new();
                };
                call_client_hooks(&control, matchers, event, &target, &input).await
            })
        }),
    }
}

/// Reaches the client's in-process MCP servers named `names`: each
/// connection is a stream whose JSON-RPC lines travel as `mcp_message`
/// control requests, the client's `mcp_response` coming back as a line.
fn sdk_connector(control: Arc<Control>, names: Vec<String>) -> crate::mcp::LocalConnector {
    Arc::new(move |name: &str| {
        if !names.iter().any(|n| n == name) {
            return None;
        }
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        spawn_sdk_bridge(Arc::clone(&control), name.to_string(), theirs);
        Some(ours)
    })
}

fn spawn_sdk_bridge(control: Arc<Control>, server: String, stream: tokio::io::DuplexStream) {
    use tokio::io::AsyncWriteExt;
    let (read, mut write) = tokio::io::split(stream);
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            if write.write_all(line.as_bytes()).await.is_err() {
                break;
            }
        }
    });
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                tracing::warn!("SDK MCP server {server}: a line that is not JSON was dropped");
                continue;
            };
            let id = message.get("id").cloned();
            let is_request = id.is_some() && message.get("method").is_some();
            // Sent in the order written, answered whenever the client can.
            let answer = control.start(ToClient::McpMessage {
                server_name: server.clone(),
                message,
            });
            let tx = tx.clone();
            tokio::spawn(async move {
                let answer = answer.await;
                if !is_request {
                    return;
                }
                let error = |text: String| json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": text}});
                let response = match answer {
                    Ok(v) => v
                        .get("mcp_response")
                        .cloned()
                        .unwrap_or_else(|| error("the client's answer has no mcp_response".into())),
                    Err(e) => error(e),
                };
                let _ = tx.send(format!("{response}\n"));
            });
        }
    });
}

/// `can_use_tool` through the client.
fn client_asker(control: Arc<Control>) -> runtime::Asker {
    Arc::new(move |ask: runtime::AskRequest| {
        let control = Arc::clone(&control);
        Box::pin(async move {
            let answer = control
                .ask(ToClient::CanUseTool {
                    permission_suggestions: wire::permission_suggestions(&ask.tool, &ask.input),
                    tool_name: ask.tool,
                    input: ask.input,
                    tool_use_id: ask.tool_use_id,
                    agent_id: (ask.agent_id != "main").then_some(ask.agent_id),
                    decision_reason: ask.reason,
                })
                .await;
            match answer {
                Ok(v) => {
                    let a = wire::permission_answer(&v);
                    for p in &a.problems {
                        eprintln!("cadre: can_use_tool answer: {p}; that update is ignored");
                    }
                    let updates = super::remember::keep(a.updates);
                    runtime::AskAnswer {
                        allow: a.allow,
                        message: a.message,
                        updated_input: a.updated_input,
                        updates,
                    }
                }
                Err(e) => {
                    eprintln!("cadre: can_use_tool failed, the call is denied: {e}");
                    false.into()
                }
            }
        })
    })
}

/// MCP servers' requests for input, forwarded to the client as
/// `elicitation` control requests; a failed request declines.
fn client_elicitor(control: Arc<Control>) -> crate::mcp::Elicitor {
    Arc::new(move |ask: crate::mcp::Elicitation| {
        let control = Arc::clone(&control);
        Box::pin(async move {
            let server = ask.server.clone();
            let answer = control
                .ask(ToClient::Elicitation {
                    mcp_server_name: ask.server,
                    message: ask.message,
                    mode: ask.mode.to_string(),
                    url: ask.url,
                    elicitation_id: ask.elicitation_id,
                    requested_schema: ask.requested_schema,
                })
                .await;
            match answer {
                Ok(v) => wire::elicitation_answer(&v),
                Err(e) => {
                    eprintln!(
                        "cadre: the elicitation request of MCP server `{server}` failed, declined: {e}"
                    );
                    crate::mcp::ElicitAnswer::declined()
                }
            }
        })
    })
}

/// AskUserQuestion through the client's `can_use_tool`, as Claude Code's
/// SDK does it: the client shows the questions and allows the call with
/// `updatedInput.answers` (question → answer); a denial is a refusal.
fn client_questioner(control: Arc<Control>) -> runtime::ask_user::Questioner {
    use runtime::ask_user::Unanswered;
    Arc::new(move |q: runtime::ask_user::QuestionRequest| {
        let control = Arc::clone(&control);
        Box::pin(async move {
            let answer = control
                .ask(ToClient::CanUseTool {
                    tool_name: runtime::ask_user::ASK_USER_QUESTION.to_string(),
                    input: q.input,
                    permission_suggestions: Vec::new(),
                    tool_use_id: q.tool_use_id,
                    agent_id: (q.agent_id != "main").then_some(q.agent_id),
                    decision_reason: "the model asks the user questions".to_string(),
                })
                .await
                .map_err(|e| Unanswered::Failed {
                    error: e.to_string(),
                })?;
            let read = wire::permission_answer(&answer);
            if !read.allow {
                return Err(Unanswered::Declined {
                    message: read.message,
                });
            }
            read.updated_input
                .as_ref()
                .and_then(runtime::ask_user::answers_from_input)
                .ok_or(Unanswered::NoAnswers)
        })
    })
}

/// Merges agents from `initialize` into the `--agents` JSON.
fn merge_agents(g: &mut GlobalArgs, agents: Map<String, Value>) {
    let mut all = match g.agents.as_deref().map(serde_json::from_str::<Value>) {
        Some(Ok(Value::Object(m))) => m,
        _ => Map::new(),
    };
    all.extend(agents);
    g.agents = Some(Value::Object(all).to_string());
}

/// The numbers a result reports for one prompt.
pub(super) struct PromptStart {
    started: Instant,
    api_ms: u64,
    usage: Usage,
}

impl PromptStart {
    pub(super) fn now(emitter: &Emitter) -> Self {
        let a = emitter.accounts();
        PromptStart {
            started: Instant::now(),
            api_ms: a.api_ms,
            usage: a.usage,
        }
    }
}

/// The `result` that answers a stdin line longer than the cap: a prompt
/// that failed before it started (cadre could not know what the line was).
fn too_long_result(
    emitter: &Emitter,
    session_id: &str,
    line: u64,
    bytes: u64,
    max: u64,
) -> ResultOut {
    let start = PromptStart::now(emitter);
    let mut result = result_of(emitter, session_id, &start, &Err(RunError::Cancelled), 0);
    let why = format!(
        "stdin line {line} ({bytes} bytes) is longer than the limit of {max} bytes \
         (--max-input-line-bytes); it was skipped unread"
    );
    result.result.clone_from(&why);
    result.errors = vec![why];
    result
}

/// The `result` of one prompt's run.
///
/// `turns` is how many model turns of this prompt completed, for a run
/// that failed (a failed model request counts as one more, as in Claude
/// Code).
pub(super) fn result_of(
    emitter: &Emitter,
    session_id: &str,
    start: &PromptStart,
    outcome: &Result<Outcome, RunError>,
    turns: u32,
) -> ResultOut {
    let a = emitter.accounts();
    let usage = a.usage.since(&start.usage);
    let (result_index, model_usage_since_last_result, subagent_stats) = emitter.next_result();
    let (subtype, result, num_turns, stop_reason, errors) = match outcome {
        // `--json-schema`: the answer is the structured output, as JSON.
        Ok(o) if o.structured_output.is_some() => (
            ResultSubtype::Success,
            o.structured_output
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_default(),
            o.turns,
            Some("tool_use".to_string()),
            vec![],
        ),
        Ok(o) if o.structured_failure.is_some() => (
            ResultSubtype::ErrorMaxStructuredOutputRetries,
            String::new(),
            o.turns,
            Some("tool_use".to_string()),
            o.structured_failure.iter().cloned().collect(),
        ),
        Ok(o) => {
            let text = o.final_text.clone().unwrap_or_default().join("\n");
            // A run that answered nothing never reports success.
            match o.stop {
                StopKind::MaxTurns => (
                    ResultSubtype::ErrorMaxTurns,
                    text,
                    o.turns,
                    None,
                    vec![format!("Reached maximum number of turns ({})", o.turns)],
                ),
                StopKind::RepeatedCalls => (
                    ResultSubtype::ErrorDuringExecution,
                    text,
                    o.turns,
                    None,
                    vec![run::repeated_calls_error(o.turns)],
                ),
                StopKind::EndTurn | StopKind::MaxTokens if text.trim().is_empty() => (
                    ResultSubtype::ErrorDuringExecution,
                    text,
                    o.turns,
                    Some(o.stop.as_str().to_string()),
                    vec![run::empty_answer(o.stop.as_str(), o.turns)],
                ),
                StopKind::EndTurn | StopKind::MaxTokens => (
                    ResultSubtype::Success,
                    text,
                    o.turns,
                    Some(o.stop.as_str().to_string()),
                    vec![],
                ),
            }
        }
        Err(RunError::Cancelled) if a.over_budget => (
            ResultSubtype::ErrorMaxBudgetUsd,
            String::new(),
            0,
            None,
            vec![format!("Reached the maximum budget: spent ${:.4}", a.cost)],
        ),
        Err(RunError::Cancelled) => (
            ResultSubtype::ErrorDuringExecution,
            String::new(),
            0,
            None,
            vec!["interrupted".to_string()],
        ),
        // A failed model request: Claude Code's `success` with `is_error`
        // and the API's status.
        Err(RunError::Provider(p)) if api_error(p).is_some() => (
            ResultSubtype::Success,
            p.to_string(),
            turns.saturating_add(1),
            Some("stop_sequence".to_string()),
            vec![],
        ),
        Err(e) => (
            ResultSubtype::ErrorDuringExecution,
            e.to_string(),
            0,
            None,
            vec![e.to_string()],
        ),
    };
    let failed = match outcome {
        Err(RunError::Provider(p)) => api_error(p),
        _ => None,
    };
    let terminal_reason = match outcome {
        Ok(o) if o.structured_failure.is_some() => Some("structured_output_retry_exhausted"),
        Ok(o) => match o.stop {
            StopKind::MaxTurns => Some("max_turns"),
            StopKind::RepeatedCalls => None,
            StopKind::EndTurn | StopKind::MaxTokens => Some("completed"),
        },
        Err(RunError::Cancelled) if a.over_budget => Some("budget_exhausted"),
        Err(RunError::Cancelled) => Some("aborted_streaming"),
        Err(RunError::Provider(p)) if runtime::is_context_overflow(p) => Some("prompt_too_long"),
        Err(RunError::Provider(_)) if failed.is_some() => Some("api_error"),
        Err(_) => None,
    };
    ResultOut {
        is_error: subtype != ResultSubtype::Success || failed.is_some(),
        subtype,
        duration_ms: u64::try_from(start.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        duration_api_ms: a.api_ms.saturating_sub(start.api_ms),
        num_turns,
        result,
        session_id: session_id.to_string(),
        total_cost_usd: a.cost,
        usage: Box::new(super::emit::result_usage(&usage)),
        model_usage: a.model_usage,
        model_usage_since_last_result: model_usage_since_last_result
            .filter(|_| subtype == ResultSubtype::Success),
        permission_denials: emitter.take_denials(),
        result_index,
        queued_turn_count: 0,
        subagent_stats: Box::new(subagent_stats),
        stop_reason,
        terminal_reason,
        api_error_status: failed.as_ref().and_then(|f| f.api_error_status),
        api_error_type: failed.and_then(|f| f.api_error_type),
        errors,
        structured_output: outcome
            .as_ref()
            .ok()
            .and_then(|o| o.structured_output.clone()),
        local_command: None,
        origin: None,
        uuid: wire::new_uuid(),
    }
}

/// How Claude Code reports a model request that failed for good (after
/// any retries): the SDKs' error category, the status and the API's error
/// type. `None` for failures before any request could be sent (no key, a
/// bad URL), which are cadre's configuration errors.
pub(super) fn api_error(p: &ProviderError) -> Option<wire::ApiErrorFields> {
    let status = match p.kind {
        ProviderErrorKind::Config => return None,
        ProviderErrorKind::Status(s) => Some(s),
        _ => None,
    };
    let error = match status {
        Some(401 | 403) => "authentication_failed",
        Some(402) => "billing_error",
        Some(404) => "model_not_found",
        Some(429) => "rate_limit",
        Some(400 | 413 | 422) => "invalid_request",
        Some(s) if s >= 500 => "server_error",
        _ => "unknown",
    };
    Some(wire::ApiErrorFields {
        error,
        is_api_error_message: true,
        api_error_status: status,
        api_error_type: p.server.as_ref().and_then(|s| s.error_type.clone()),
    })
}

/// The assistant message Claude Code sends in place of an answer when a
/// model request failed: its text is the result's.
fn api_error_message(session_id: &str, text: &str, fields: wire::ApiErrorFields) -> Output {
    Output::Assistant(wire::AssistantOut {
        message: wire::ApiMessage {
            id: wire::new_uuid(),
            kind: "message",
            role: "assistant",
            model: "<synthetic>".into(),
            content: json!([{"type": "text", "text": text}]),
            stop_reason: Some("stop_sequence".into()),
            stop_sequence: Some(String::new()),
            usage: wire::WireUsage::default(),
        },
        parent_tool_use_id: None,
        session_id: session_id.to_string(),
        uuid: wire::new_uuid(),
        timestamp: crate::clock::now_rfc3339(),
        api_error: Some(fields),
    })
}

/// The `result` of a prompt that sent nothing to the model: a built-in
/// command (`local_command`), or a command that stopped before (a refused
/// shell line); `text` is what the user is told.
pub(super) fn local_result(
    emitter: &Emitter,
    session_id: &str,
    start: &PromptStart,
    text: String,
    command: Option<&str>,
) -> ResultOut {
    let mut result = result_of(emitter, session_id, start, &Err(RunError::Cancelled), 0);
    result.subtype = ResultSubtype::Success;
    result.is_error = false;
    result.errors.clear();
    result.result = text;
    result.local_command = command.map(str::to_string);
    result.terminal_reason = Some("completed");
    result
}

/// The MCP servers and their states, as `init` and `mcp_status` report them.
pub(super) fn server_statuses(mcp: &crate::mcp::McpManager) -> Vec<wire::McpServerStatus> {
    mcp.states()
        .into_iter()
        .map(|(name, s)| wire::McpServerStatus {
            name,
            status: match s {
                crate::mcp::ServerState::Connecting => "pending",
                crate::mcp::ServerState::Ready => "connected",
                crate::mcp::ServerState::Failed => "failed",
            }
            .into(),
        })
        .collect()
}

/// The `system`/`init` message for the session as it is now.
fn init_message(engine: &runtime::Engine, model_source: &str, session: &Session) -> Output {
    let snap = engine.snapshot.load_full();
    let spec = session.spec();
    let kind = snap.session_kind(spec.kind.interactive);
    let mut tools = spec.tool_names.clone();
    tools.extend(
        engine
            .mcp
            .tools(&["main"])
            .iter()
            .map(|t| crate::tools::Tool::name(&**t).to_string()),
    );
    let mcp_servers = server_statuses(&engine.mcp);
    Output::System(wire::System::Init(Box::new(wire::Init {
        cwd: spec.cwd.display().to_string(),
        session_id: engine.session_id.clone(),
        tools,
        mcp_servers,
        model: spec.model.clone(),
        permission_mode: spec.mode.as_str().to_string(),
        slash_commands: runtime::commands::slash_commands(&snap),
        api_key_source: "none".into(),
        claude_code_version: wire::CLAUDE_CODE_VERSION.into(),
        output_style: snap.chosen_output_style(),
        agents: snap
            .visible_agents(kind)
            .iter()
            .map(|d| d.name.clone())
            .collect(),
        skills: snap
            .skills
            .skills
            .values()
            .filter(|s| s.kind == crate::catalog::SkillKind::Skill)
            .map(|s| s.name.clone())
            .collect(),
        plugins: snap.config.plugins.iter().map(|p| p.init_entry()).collect(),
        uuid: wire::new_uuid(),
        original_cwd: std::env::current_dir()
            .unwrap_or_else(|_| spec.cwd.clone())
            .display()
            .to_string(),
        additional_directories: engine
            .added_dirs(&snap, &spec.cwd)
            .iter()
            .map(|d| d.display().to_string())
            .collect(),
        cadre_version: wire::CADRE_VERSION.into(),
        model_source: model_source.into(),
        reload_generation: snap.generation,
    })))
}

/// `initialize`'s `commands`: the skills and commands of the catalog, then
/// the built-ins (`builtin: true`, as Claude Code marks its own).
pub(super) fn command_list(snap: &crate::snapshot::Snapshot) -> Vec<Value> {
    let entries = snap.skills.skills.values().map(|s| {
        json!({
            "name": s.name,
            "description": s.description,
            "argumentHint": s.argument_hint.clone().unwrap_or_default(),
        })
    });
    let builtins = runtime::commands::BUILTINS.iter().map(|(name, hint, what)| {
        json!({"name": name, "description": what, "argumentHint": hint, "builtin": true})
    });
    entries.chain(builtins).collect()
}

/// `initialize`'s `agents`: those the main session may call, with their
/// description and, when set, their model.
fn agent_list(engine: &runtime::Engine, session: &Session) -> Vec<Value> {
    let snap = engine.snapshot.load();
    let kind = snap.session_kind(session.spec().kind.interactive);
    snap.visible_agents(kind)
        .iter()
        .map(|d| {
            let mut a = json!({"name": d.name, "description": d.description});
            if let Some(m) = &d.model {
                a["model"] = json!(m);
            }
            a
        })
        .collect()
}

/// `initialize`'s `account`: cadre has no login; the provider's key
/// variable, when it is set.
fn account(engine: &runtime::Engine) -> Value {
    let snap = engine.snapshot.load();
    let provider = &snap.settings().provider;
    let key_env = crate::provider::key_env(provider);
    let has_key = engine
        .env
        .iter()
        .any(|(k, v)| *k == key_env && !v.is_empty());
    json!({
        "tokenSource": "none",
        "apiKeySource": if has_key { key_env.as_str() } else { "none" },
        "apiProvider": crate::provider::api_provider(provider.kind),
    })
}

/// `system`/`session_state_changed`.
fn session_state(session_id: &str, state: &'static str) -> Output {
    Output::System(wire::System::SessionStateChanged(
        wire::SessionStateChanged {
            state,
            uuid: wire::new_uuid(),
            session_id: session_id.to_string(),
        },
    ))
}

/// `initialize`'s `models`, in Claude Code's shape: `default` (the
/// configured model) first, then each alias of `[models]`. None offers
/// Claude Code's `auto` permission mode (`supportsAutoMode`), which cadre
/// runs as `default`; effort levels are those of `effort_levels`.
pub(super) fn model_list(snap: &crate::snapshot::Snapshot) -> Vec<Value> {
    let settings = snap.settings();
    let entry = |value: &str, model: &str, name: &str, description: String| {
        let levels = crate::agent_tool::accepted_effort_levels(model, &settings.effort_levels)
            .unwrap_or_default();
        json!({
            "value": value,
            "resolvedModel": model,
            "displayName": name,
            "description": description,
            "supportsEffort": !levels.is_empty(),
            "supportedEffortLevels": levels,
            "supportsAdaptiveThinking": false,
            "supportsFastMode": false,
            "supportsAutoMode": false,
            "supportsThinkingOff": true,
        })
    };
    let main = snap.resolve_alias(&settings.provider.model);
    let mut out = vec![entry(
        "default",
        main,
        "Default",
        format!("The configured model ({main})"),
    )];
    for (alias, model) in &settings.models {
        out.push(entry(alias, model, alias, model.clone()));
    }
    out
}

/// Runs one prompt with interrupts, the budget and Ctrl-C wired to its cancel.
async fn run_prompt(
    session: &mut Session,
    emitter: &Emitter,
    cancel: CancellationToken,
) -> Result<Outcome, RunError> {
    session.set_cancel(cancel.clone());
    session.begin_prompt();
    if emitter.accounts().over_budget {
        cancel.cancel();
    }
    let r = tokio::select! {
        r = session.run() => r,
        _ = super::signals::interrupted() => {
            cancel.cancel();
            Err(RunError::Cancelled)
        }
    };
    emitter.set_current(None);
    if matches!(r, Err(RunError::Cancelled)) {
        session.repair_after_cancel();
    }
    r
}

/// `cadre -p …` and the SDKs' invocation.
pub async fn headless(g: &GlobalArgs, h: HeadlessArgs) -> Result<(), CliError> {
    let mut g = g.clone();
    let plan = plan(&g, &h)?;
    let print = match plan.output {
        OutputFormat::StreamJson if h.include_partial_messages => Print::Partials,
        OutputFormat::StreamJson => Print::Messages,
        _ => Print::Nothing,
    };
    let emitter = Emitter::new(
        print,
        String::new(),
        String::new(),
        BTreeMap::new(),
        h.max_budget_usd,
    );
    let control = Arc::new(Control::default());
    let prompts = Arc::new(Prompts::default());
    // Set once the session is set up, for `mcp_status`.
    let live_engine = Arc::new(std::sync::OnceLock::new());
    let mut extras = plan.extras;
    let mut session_args = plan.session;

    // Text input: one prompt. Stream input: the reader, then initialize
    // (if the client sends it) before the first user message.
    let mut rx = None;
    let mut first: Option<Prompt> = None;
    let mut hooks: BTreeMap<String, Vec<wire::HookMatcherIn>> = BTreeMap::new();
    let mut init_reply: Option<String> = None;
    // `set_max_thinking_tokens` read before the session was set up.
    let mut thinking: Option<Option<u32>> = None;
    // Over-long lines read before the session was set up.
    let mut skipped: Vec<(u64, u64)> = Vec::new();
    // Control requests read before the session was set up.
    let mut early_control = Vec::new();
    match plan.input {
        InputFormat::Text => {
            let text = match h.prompt.clone() {
                Some(p) => p,
                None => run::read_stdin_prompt("after -p")?,
            };
            let (id, cancel) = prompts.admit();
            first = Some(Prompt {
                message: Message::user_text(text),
                id,
                cancel,
                verbatim: false,
                echo: None,
                origin: None,
                uuid: None,
            });
        }
        InputFormat::StreamJson => {
            if h.prompt.is_some() {
                return Err(CliError::Usage(
                    "with --input-format stream-json the prompts come on stdin, not as an argument"
                        .into(),
                ));
            }
            let (tx, r) = mpsc::unbounded_channel();
            spawn_reader(
                tokio::io::BufReader::new(tokio::io::stdin()),
                h.max_input_line_bytes.unwrap_or(MAX_INPUT_LINE_BYTES),
                h.replay_user_messages.is_some(),
                tx,
                Arc::clone(&control),
                Arc::clone(&prompts),
                Arc::clone(&live_engine),
                emitter.clone(),
            );
            let mut r = r;
            loop {
                match r.recv().await {
                    Some(Incoming::Initialize {
                        request_id,
                        hooks: hk,
                        agents,
                        forward_subagent_text,
                    }) => {
                        if let Some(a) = agents {
                            merge_agents(&mut g, a);
                        }
                        emitter.forward_subagent_text(forward_subagent_text);
                        hooks = hk;
                        init_reply = Some(request_id);
                        // Answered once the session is set up (or failed to be).
                        break;
                    }
                    Some(Incoming::User(m)) => {
                        first = Some(m);
                        break;
                    }
                    Some(Incoming::Control(id, line, ctx)) => {
                        early_control.push((id, line, ctx));
                        break;
                    }
                    Some(Incoming::SetMode(m)) => session_args.permission_mode = Some(m),
                    Some(Incoming::SetModel(m)) => session_args.model = m,
                    Some(Incoming::SetThinking(t)) => thinking = Some(t),
                    // Answered once the session is set up, in order.
                    Some(Incoming::TooLong { line, bytes }) => skipped.push((line, bytes)),
                    Some(Incoming::End) | None => break,
                }
            }
            rx = Some(r);
        }
    }
    let unsupported_hooks: Vec<String> = hooks
        .keys()
        .filter(|e| !CLIENT_HOOK_EVENTS.contains(&e.as_str()))
        .cloned()
        .collect();
    if !unsupported_hooks.is_empty() {
        note(
            &g,
            &format!(
                "not supported: SDK hook callbacks for {} (cadre has no such event; they are never called)",
                unsupported_hooks.join(", ")
            ),
        );
    }
    let session_id = extras
        .session_id
        .clone()
        .unwrap_or_else(run::new_session_id);
    extras.session_id = Some(session_id.clone());
    if !hooks.is_empty() {
        extras.client_hooks = Some(client_hooks(Arc::clone(&control), hooks));
    }
    if !plan.sdk_servers.is_empty() {
        extras.mcp_local = Some(sdk_connector(
            Arc::clone(&control),
            plan.sdk_servers.clone(),
        ));
    }
    let asker = plan
        .stdio_permissions
        .then(|| client_asker(Arc::clone(&control)));
    if plan.input == InputFormat::StreamJson {
        extras.elicitor = Some(client_elicitor(Arc::clone(&control)));
    }
    if plan.stdio_permissions {
        extras.questioner = Some(client_questioner(Arc::clone(&control)));
    }
    // The SDKs' `enable_file_checkpointing`.
    extras.file_checkpoints = std::env::var("CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING")
        .is_ok_and(|v| matches!(v.trim(), "1" | "true"));
    let progress = (plan.output == OutputFormat::Text).then(|| Progress::new(false, g.quiet));
    let events: EventSink = match &progress {
        Some(p) => {
            let bars = p.sink();
            let accounts = emitter.sink();
            Arc::new(move |e: &runtime::EngineEvent| {
                accounts(e);
                bars(e);
            })
        }
        None => emitter.sink(),
    };
    let mode = || Mode {
        interactive: false,
        write_transcripts: true,
        wait_for_background: true,
        connect_mcp: true,
    };
    // What `/clear` sets a new session up with.
    let (clear_events, clear_asker, clear_extras) =
        (Arc::clone(&events), asker.clone(), extras.clone());
    let prepared = run::prepare_with(&g, &session_args, mode(), events, asker, extras);
    let prepared = match prepared {
        Ok(p) => p,
        Err(e) => {
            // A session that cannot be resumed (unknown id, a truncating
            // resume refused) ends the process before any answer, as
            // Claude Code checks it before it reads stdin: the SDKs raise
            // their process error with the reason from stderr.
            // (The process ends now: the reader of stdin would keep it
            // waiting for a client that waits for the answer.)
            if init_reply.is_some() && session_args.resuming() {
                let start = PromptStart::now(&emitter);
                let failed = Err(RunError::Limit(e.to_string()));
                let id = run::new_session_id();
                send(&Output::Result(result_of(
                    &emitter, &id, &start, &failed, 0,
                )));
                eprintln!("error: {e}");
                std::process::exit(1);
            }
            if let Some(id) = &init_reply {
                send(&Output::ControlResponse(wire::ControlResponseOut::error(
                    id,
                    e.to_string(),
                )));
            }
            return Err(e);
        }
    };
    let mut _reload = prepared.watch();
    let _ = live_engine.set(Arc::clone(&prepared.engine));
    // A resumed session keeps its own id.
    emitter.configure(
        &prepared.engine.session_id,
        &prepared.session.spec().model,
        prepared.engine.snapshot.load().settings(),
    );
    if let Some(id) = &init_reply {
        send(&Output::InitializeResponse(wire::ControlResponseOut::success(
            id,
            json!({
                "commands": command_list(&prepared.engine.snapshot.load()),
                "output_style": prepared.engine.snapshot.load().chosen_output_style(),
                "available_output_styles": prepared.engine.snapshot.load().output_styles.names(),
                "models": model_list(&prepared.engine.snapshot.load()),
                "agents": agent_list(&prepared.engine, &prepared.session),
                "account": account(&prepared.engine),
                "pid": std::process::id(),
                "claude_code_version": wire::CLAUDE_CODE_VERSION,
                "current_permission_mode": prepared.session.spec().mode.as_str(),
                // No prompt has been read yet.
                "session_state": "idle",
                // None of Claude Code's optional protocol extensions.
                "capabilities": [],
                "hook_on_failure_supported": true,
                "hooks_applied": true,
            }),
        )
        // cadre answers `initialize` before it runs anything: no permission
        // request can be waiting yet.
        .with_pending_permission_requests(Vec::new())));
    }
    let Prepared {
        mut session,
        mut engine,
        mut def,
        model_source,
        ..
    } = prepared;
    if let Some(spec) = plan.structured.clone() {
        session.set_structured_output(spec);
    }
    if let Some(effort) = &h.effort {
        session.set_effort(effort.clone());
    }
    if let Some(t) = thinking {
        session.set_thinking_budget(t);
    }
    // As in `run`: the first request offers the MCP tools of every server
    // that came up within mcp.startup_timeout_ms.
    let startup =
        std::time::Duration::from_millis(engine.snapshot.load().settings().mcp.startup_timeout_ms);
    run::wait_for_servers(&engine, progress.as_deref(), startup).await;
    for (id, line, mut ctx) in early_control {
        ctx.engine = Some(Arc::clone(&engine));
        super::control::respond(id, line, ctx).await;
    }
    // A resumed conversation already has its first message (and memory).
    let mut is_first = !session_args.resuming();
    let source = if session_args.resuming() {
        "resume"
    } else {
        "startup"
    };
    let mut start_context = session.session_start_hooks(source).await;
    let mut last_error = false;
    let mut last_failed = false;
    let mut last_text = String::new();
    let mut last_result: Option<ResultOut> = None;
    let max_line = h.max_input_line_bytes.unwrap_or(MAX_INPUT_LINE_BYTES);
    // Claude Code's `session_state_changed` messages, which clients such as
    // the ACP adapters ask for with this variable and wait on.
    let state_events = plan.output == OutputFormat::StreamJson
        && std::env::var("CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS")
            .is_ok_and(|v| matches!(v.trim(), "1" | "true"));
    for (line, bytes) in skipped {
        let result = too_long_result(&emitter, &engine.session_id, line, bytes, max_line);
        send(&Output::Result(result.clone()));
        last_error = true;
        last_result = Some(result);
    }
    loop {
        let prompt = match first.take() {
            Some(m) => m,
            None => match rx.as_mut() {
                None => break,
                Some(r) => match r.recv().await {
                    Some(Incoming::User(p)) => p,
                    Some(Incoming::SetMode(m)) => {
                        session.set_mode(m);
                        // The client's latest word wins over an earlier
                        // permission update's mode.
                        if let Ok(mut g) = engine.grants.lock() {
                            g.mode = None;
                        }
                        continue;
                    }
                    Some(Incoming::SetThinking(t)) => {
                        session.set_thinking_budget(t);
                        continue;
                    }
                    Some(Incoming::SetModel(m)) => {
                        let snap = engine.snapshot.load_full();
                        let requested = m.unwrap_or_else(|| snap.settings().provider.model.clone());
                        let model = snap.resolve_alias(&requested).to_string();
                        if let Err(why) = session.pre_model_switch_hooks(&requested, "sdk").await {
                            note(
                                &g,
                                &format!("the model stays {}: {why}", session.spec().model),
                            );
                            continue;
                        }
                        let from = session.spec().model.clone();
                        emitter.set_main_model(&model);
                        session.set_model(model);
                        session.post_model_switch_hooks(&from, "sdk").await;
                        continue;
                    }
                    Some(Incoming::Initialize { request_id, .. }) => {
                        send(&Output::ControlResponse(wire::ControlResponseOut::error(
                            &request_id,
                            "already initialized",
                        )));
                        continue;
                    }
                    Some(Incoming::Control(id, line, mut ctx)) => {
                        ctx.engine = Some(Arc::clone(&engine));
                        super::control::respond(id, line, ctx).await;
                        continue;
                    }
                    Some(Incoming::TooLong { line, bytes }) => {
                        let result =
                            too_long_result(&emitter, &engine.session_id, line, bytes, max_line);
                        send(&Output::Result(result.clone()));
                        last_error = true;
                        last_result = Some(result);
                        continue;
                    }
                    Some(Incoming::End) | None => break,
                },
            },
        };
        // Withdrawn while it waited (`cancel_async_message`).
        if !prompts.start(prompt.id) {
            continue;
        }
        let Prompt {
            message,
            id: prompt_id,
            cancel,
            verbatim,
            echo,
            origin,
            uuid: client_uuid,
        } = prompt;
        let was_first = is_first;
        let prompt_text = message
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect::<Vec<_>>()
            .join("\n");
        // The budget stop cancels the prompt running; an interrupt has had
        // this token since the prompt was read.
        emitter.set_current(Some(cancel.clone()));
        // A mode set by a permission update becomes the session's own
        // (reported in `init`, inherited by sub-agents).
        let granted = engine.grants.lock().ok().and_then(|mut g| g.mode.take());
        if let Some(m) = granted {
            session.set_mode(m);
        }
        if state_events {
            send(&session_state(&engine.session_id, "running"));
        }
        if emitter.prints() {
            send(&init_message(&engine, model_source, &session));
        }
        // The message's id: the client's, or a new one; `rewind_files`
        // names a checkpoint by it.
        let message_uuid = client_uuid.unwrap_or_else(wire::new_uuid);
        if let Some(history) = &engine.file_history {
            history.begin(&message_uuid);
        }
        if let Some(e) = echo
            && plan.output == OutputFormat::StreamJson
        {
            send(&Output::UserReplay(wire::UserReplay {
                message: e.message,
                parent_tool_use_id: e.parent_tool_use_id,
                session_id: engine.session_id.clone(),
                uuid: message_uuid.clone(),
                timestamp: crate::clock::now_rfc3339(),
                is_replay: true,
                origin: e.origin,
            }));
        }
        let start = PromptStart::now(&emitter);
        // UserPromptSubmit sees the prompt as typed, before a slash
        // command is expanded.
        let mut contexts = Vec::new();
        let mut blocked = None;
        // UserPromptSubmit: the settings' hooks and the client's callbacks.
        match session.user_prompt_hooks(&prompt_text).await {
            Ok(c) => contexts = c,
            Err(reason) => blocked = Some(reason),
        }
        // Slash commands: a built-in is carried out here, a skill or
        // command is expanded (its shell lines run now), anything else is
        // sent as it is.
        let mut local: Option<(String, Option<&str>)> = None;
        let mut active = None;
        let mut content = Vec::new();
        if verbatim && blocked.is_none() {
            content = message.content;
        } else if blocked.is_none() {
            match session.prompted(message.content).await {
                runtime::commands::Prompted::Send {
                    blocks,
                    skill,
                    notes,
                } => {
                    for n in &notes {
                        note(&g, n);
                    }
                    content = blocks;
                    active = skill;
                }
                runtime::commands::Prompted::Local(text) => local = Some((text, None)),
                runtime::commands::Prompted::Builtin("clear", _) => {
                    let old = engine.session_id.clone();
                    session.session_end_hooks("clear").await;
                    engine.shutdown(std::time::Duration::from_secs(5)).await;
                    session
                        .transcript()
                        .record("end", json!({"status": "completed", "cleared": true}));
                    let fresh = SessionArgs {
                        resume: None,
                        continue_latest: false,
                        fork_session: false,
                        ..session_args.clone()
                    };
                    let new_id = run::new_session_id();
                    let mut extras = clear_extras.clone();
                    extras.session_id = Some(new_id.clone());
                    let prepared = run::prepare_with(
                        &g,
                        &fresh,
                        mode(),
                        Arc::clone(&clear_events),
                        clear_asker.clone(),
                        extras,
                    )?;
                    _reload = prepared.watch();
                    emitter.configure(
                        &prepared.engine.session_id,
                        &prepared.session.spec().model,
                        prepared.engine.snapshot.load().settings(),
                    );
                    session = prepared.session;
                    engine = prepared.engine;
                    def = prepared.def;
                    run::wait_for_servers(&engine, progress.as_deref(), startup).await;
                    is_first = true;
                    start_context = session.session_start_hooks("clear").await;
                    if emitter.prints() {
                        let id = wire::new_uuid();
                        send(&Output::ConversationReset(wire::ConversationReset {
                            new_conversation_id: new_id,
                            uuid: id,
                            trigger: "clear".into(),
                            timestamp: crate::clock::now_rfc3339(),
                            session_id: old,
                        }));
                        send(&init_message(&engine, model_source, &session));
                    }
                    local = Some((String::new(), Some("clear")));
                }
                runtime::commands::Prompted::Builtin("compact", instructions) => {
                    let text = run::compact_now(&mut session, &engine, &instructions).await;
                    local = Some((text, Some("compact")));
                }
                runtime::commands::Prompted::Builtin(name, _) => {
                    local = Some((run::help_text(&engine, name, false).await, Some(name)));
                }
            }
        }
        if let Some((text, command)) = local {
            prompts.done(prompt_id);
            let mut result = local_result(&emitter, &engine.session_id, &start, text, command);
            result.origin = origin;
            result.queued_turn_count = prompts.queued();
            last_error = false;
            last_failed = false;
            last_text = result.result.clone();
            if plan.output == OutputFormat::StreamJson {
                send(&Output::Result(result.clone()));
            }
            if state_events {
                send(&session_state(&engine.session_id, "idle"));
            }
            last_result = Some(result);
            continue;
        }
        let mut message = if is_first {
            run::first_message_with(&engine, def.as_deref(), content)
        } else {
            Message::user(content)
        };
        is_first = false;
        message.content.extend(contexts);
        // SessionStart's context joins the first prompt that is sent.
        message.content.append(&mut start_context);
        let outcome = match &blocked {
            // A blocked prompt never joins the conversation (the next one
            // is the first, if this was).
            Some(_) => {
                is_first = was_first;
                Err(RunError::Cancelled)
            }
            None => {
                session.push_user_with(message, active);
                run_prompt(&mut session, &emitter, cancel).await
            }
        };
        prompts.done(prompt_id);
        let mut result = result_of(
            &emitter,
            &engine.session_id,
            &start,
            &outcome,
            session.turns_this_prompt(),
        );
        result.origin = origin;
        result.queued_turn_count = prompts.queued();
        if let Some(reason) = blocked {
            result.errors = vec![format!(
                "UserPromptSubmit hook blocked the prompt: {reason}"
            )];
            result.result = reason;
        }
        last_error = result.is_error;
        last_text = result.result.clone();
        if plan.output == OutputFormat::StreamJson {
            if let Err(RunError::Provider(p)) = &outcome
                && let Some(fields) = api_error(p)
            {
                send(&api_error_message(
                    &engine.session_id,
                    &result.result,
                    fields,
                ));
            }
            send(&Output::Result(result.clone()));
        }
        if state_events {
            send(&session_state(&engine.session_id, "idle"));
        }
        if let Err(e) = &outcome
            && !matches!(e, RunError::Cancelled)
        {
            eprintln!("error: {e}");
        }
        let over = result.subtype == ResultSubtype::ErrorMaxBudgetUsd;
        // A run that ended without an answer says why.
        if outcome.is_ok() && result.is_error {
            for e in &result.errors {
                eprintln!("error: {e}");
            }
        }
        last_failed = outcome.is_err();
        if over {
            note(&g, "stopped: the session reached --max-budget-usd");
        }
        let config_problem =
            matches!(&outcome, Err(RunError::Provider(p)) if p.kind == ProviderErrorKind::Config);
        last_result = Some(result);
        if over || (config_problem && plan.input == InputFormat::Text) {
            break;
        }
    }
    session.session_end_hooks("other").await;
    // The session is over: children still running end with it.
    engine.shutdown(std::time::Duration::from_secs(5)).await;
    match plan.output {
        OutputFormat::Text => {
            if let Some(r) = &last_result {
                // A failure's text went to stderr; an answer, even a
                // partial one, goes to stdout. A failed model request's
                // text goes to stdout too, as Claude Code prints it there.
                if last_failed {
                    if matches!(r.terminal_reason, Some("api_error" | "prompt_too_long")) {
                        print_line(&r.result);
                    }
                    return Err(CliError::Exit(1));
                }
                if !r.is_error || !last_text.trim().is_empty() {
                    print_answer(&last_text);
                }
            }
        }
        OutputFormat::Json => {
            if let Some(r) = &last_result {
                print_line(&serde_json::to_string(&Output::Result(r.clone())).unwrap_or_default());
            }
        }
        OutputFormat::StreamJson => {}
    }
    if last_error {
        return Err(CliError::Exit(1));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::mpsc;

    use super::{Control, Incoming, Prompts, spawn_reader, split_rules};

    const USER: &str = r#"{"type":"user","message":{"role":"user","content":"hi"}}"#;
    const INTERRUPT: &str =
        r#"{"type":"control_request","request_id":"i","request":{"subtype":"interrupt"}}"#;

    /// What the session loop would see of `input`: for each prompt,
    /// whether it is cancelled once stdin has been read to its end.
    async fn cancelled_prompts(input: String) -> Vec<bool> {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let prompts = Arc::new(Prompts::default());
        spawn_reader(
            std::io::Cursor::new(input.into_bytes()),
            super::MAX_INPUT_LINE_BYTES,
            false,
            tx,
            Arc::new(Control::default()),
            Arc::clone(&prompts),
            Arc::new(std::sync::OnceLock::new()),
            super::Emitter::new(
                super::Print::Nothing,
                String::new(),
                String::new(),
                std::collections::BTreeMap::new(),
                None,
            ),
        );
        let mut seen = Vec::new();
        let mut tokens = Vec::new();
        while let Some(i) = rx.recv().await {
            match i {
                Incoming::User(p) => tokens.push(p.cancel),
                Incoming::End => break,
                _ => {}
            }
        }
        for t in tokens {
            seen.push(t.is_cancelled());
        }
        seen
    }

    /// The session loop takes a prompt from the channel some time after
    /// the reader read it; an interrupt read in between must still stop it
    /// (it used to find no prompt running and be lost).
    #[tokio::test]
    async fn an_interrupt_stops_every_prompt_read_before_it_however_late_the_loop() {
        let input = format!("{USER}\n{INTERRUPT}\n{USER}\n");
        assert_eq!(cancelled_prompts(input).await, [true, false]);
        let input = format!("{INTERRUPT}\n{USER}\n{USER}\n{INTERRUPT}\n");
        assert_eq!(cancelled_prompts(input).await, [true, true]);
    }

    #[test]
    fn a_finished_prompt_is_not_cancelled_again() {
        let p = Prompts::default();
        let (a, ta) = p.admit();
        let (_, tb) = p.admit();
        p.done(a);
        assert_eq!(p.interrupt(), 1);
        assert!(!ta.is_cancelled());
        assert!(tb.is_cancelled());
    }

    #[test]
    fn rules_split_on_commas_and_spaces_outside_parentheses() {
        assert_eq!(
            split_rules(&["Read,Bash(git log:*) Edit".into(), "Grep".into()]),
            ["Read", "Bash(git log:*)", "Edit", "Grep"]
        );
        assert!(split_rules(&[String::new()]).is_empty());
    }
}
