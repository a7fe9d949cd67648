//! The runtime: sessions and the query loop, sub-agent spawning, tool
//! execution, transcripts.
//!
//! An [`Engine`] holds what every session of one process shares: the
//! current snapshot (swapped by hot reload), the provider, the tool
//! implementations, the event sink and the transcript folder. A
//! [`Session`] is one agent's conversation and loop; an Agent tool call
//! starts a child session. This module does not parse files.

mod answer_check;
pub mod ask_user;
pub mod backend;
mod command_notes;
pub mod commands;
mod compact;
pub mod display_hooks;
pub mod elicit_hooks;
mod exec;
pub mod file_history;
pub mod file_hooks;
mod first_search;
pub mod grants;
mod hook_agent;
pub mod hooks;
pub mod instructions;
mod listing;
pub mod main_plan;
mod manage;
mod mcp;
pub mod plan;
pub mod plan_record;
mod problem;
mod prompt;
mod repeats;
pub mod restore;
pub mod resume;
pub mod sampling;
mod session;
pub mod session_dirs;
pub mod spawn;
pub mod structured;
pub mod tasks;
mod team;
mod team_texts;
pub mod texts;
pub mod todos;
pub mod transcript;
pub mod worktree;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use futures_util::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;

use crate::message::{Message, Usage};
use crate::provider::Provider;
use crate::snapshot::Snapshot;
use crate::tools::Tool;

pub use compact::{Trigger as CompactTrigger, is_context_overflow};
pub use listing::Listing;
pub use problem::{QueueFailed, QueueProblem, RunProblem};
pub use prompt::{
    PromptContext, gets_memory, git_branch, main_system_prompt, memory_block,
    subagent_system_prompt,
};
pub use session::{
    Frozen, Outcome, RunError, Session, SessionSpec, Stats, StopKind, TeamSeat, last_text,
    render_tools, render_tools_for,
};

/// Something that happened in any session of the engine, for output
/// (stream-json, progress lines). `agent_id` is `main` for the main session.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EngineEvent {
    TextDelta {
        agent_id: String,
        text: String,
    },
    /// A piece of a thinking block as it streams.
    ThinkingDelta {
        agent_id: String,
        thinking: String,
    },
    /// A piece of a thinking block's signature.
    SignatureDelta {
        agent_id: String,
        signature: String,
    },
    /// A message was appended to a session's history.
    Message {
        agent_id: String,
        message: Arc<Message>,
        /// The `uuid` of its line in the transcript (none when transcripts
        /// are off): the stream's `assistant` message carries it, as
        /// Claude Code's does, for `--resume-session-at`.
        uuid: Option<String>,
        /// A user message the engine added itself (a reminder), not a
        /// person's prompt nor a tool's results (Claude Code's
        /// `isSynthetic`).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        synthetic: bool,
    },
    ToolUse {
        agent_id: String,
        tool_use_id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        agent_id: String,
        tool_use_id: String,
        is_error: bool,
        /// The first line of the error text, for failed calls.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The result as data, for programs (`tools::typed`): the tools
        /// that have one, when they succeeded.
        #[serde(skip_serializing_if = "Option::is_none")]
        typed: Option<Value>,
    },
    /// A running tool call reported progress (an MCP server's
    /// `notifications/progress`), as a short line.
    ToolProgress {
        agent_id: String,
        tool_use_id: String,
        message: String,
    },
    SubagentStart {
        agent_id: String,
        parent_agent_id: String,
        agent_type: String,
        description: String,
        model: String,
        fork: bool,
        /// The parent's Agent tool call that started it.
        tool_use_id: String,
        /// The definition's `color`, for its progress line.
        #[serde(skip_serializing_if = "Option::is_none")]
        color: Option<crate::catalog::Color>,
        /// The task the Agent call gave it.
        #[serde(default)]
        prompt: String,
        /// It runs in the background (the parent goes on without it).
        #[serde(default)]
        background: bool,
        /// How deep it runs: the main session's children are 1.
        #[serde(default)]
        depth: u32,
    },
    SubagentProgress {
        agent_id: String,
        tool_uses: u32,
        duration_ms: u64,
        last_tool: String,
    },
    SubagentEnd {
        agent_id: String,
        status: String,
        tool_uses: u32,
        duration_ms: u64,
        total_tokens: u64,
    },
    Retrying {
        agent_id: String,
        attempt: u32,
        delay_ms: u64,
        reason: String,
    },
    /// A session's todo list after a TodoWrite call (the whole list).
    Todos {
        agent_id: String,
        todos: Vec<todos::Todo>,
    },
    /// A model response arrived (emitted before its message): what it
    /// counted and how long the request took, for cost accounting.
    ModelResponse {
        agent_id: String,
        model: String,
        /// The model's safety systems stopped the reply (stop reason
        /// `refusal`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        refused: bool,
        usage: Usage,
        api_ms: u64,
    },
    /// A model request failed for good (after the provider's retries).
    ApiError {
        agent_id: String,
        model: String,
        /// cadre's account of the failure (never the request or a key).
        error: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        status_code: Option<u16>,
        duration_ms: u64,
    },
    /// A person's prompt was added to the main session: its own text,
    /// without the project memory or notifications that join it.
    UserPrompt {
        agent_id: String,
        text: String,
        /// The prompt's id, as hook inputs carry it (`prompt_id`).
        prompt_id: String,
    },
    /// The main session's run for a prompt ended (answered, stopped,
    /// failed or cancelled).
    TurnEnd {
        agent_id: String,
    },
    /// The permission decision about one tool call, with where it came
    /// from in Claude Code's words: `config` (rules, mode, a memory
    /// folder, a skill's tools), `hook`, `user_temporary`,
    /// `user_permanent` (an answer that added rules) or `user_reject`.
    ToolDecision {
        agent_id: String,
        tool_use_id: String,
        tool: String,
        accept: bool,
        source: &'static str,
        /// What in the configuration decided, in Claude Code's words:
        /// `rule`, `mode`, `hook`; none for a person's answer.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason_type: Option<&'static str>,
    },
    /// One hook ran (a command, an `http` POST, a `prompt` question, or
    /// an SDK client's callbacks of one event), for telemetry's span of
    /// it. Emitted when it ended, with how long it took.
    HookRun {
        agent_id: String,
        /// The tool call the hook is about, as its input names it
        /// (PreToolUse, PostToolUse, PostToolUseFailure,
        /// PermissionRequest).
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_use_id: Option<String>,
        /// Claude Code's name of the event (`PreToolUse`, `Stop`, …).
        event: &'static str,
        /// `command`, `http`, `prompt` or `callback`.
        hook_type: &'static str,
        /// The command, URL or prompt as configured (empty for callbacks).
        hook: String,
        /// `allow` (it let things go on), `block` (exit 2, a `deny`, a
        /// `decision: "block"`, `continue: false`) or `error` (another
        /// exit, a timeout, a failure to run).
        outcome: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// What went wrong, for an `error`: `exit_code`, `signal`,
        /// `timeout`, `output_too_long`, or why it could not run.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// An `async` hook: nothing waited for it and it decided nothing.
        run_async: bool,
        duration_ms: u64,
    },
    /// The hooks of one event start (`ended: None`) or ended, with how
    /// each of those that were waited for went: telemetry's
    /// `hook_execution_start` and `hook_execution_complete`.
    HookEvent {
        agent_id: String,
        event: &'static str,
        hooks: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        ended: Option<HookTally>,
    },
    /// A compaction of a session's history ended (`success`) or gave up.
    Compacted {
        agent_id: String,
        /// `manual` or `auto`.
        trigger: &'static str,
        success: bool,
        duration_ms: u64,
        /// The history's estimated size before, and after when it was
        /// replaced.
        pre_tokens: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        post_tokens: Option<u64>,
        /// Why it gave up: `empty_summary`, `cancelled`, `request_failed`.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<&'static str>,
    },
    /// A session's permission mode changed.
    ModeChanged {
        agent_id: String,
        from: &'static str,
        to: &'static str,
        /// What changed it: `sdk` (a client's `set_permission_mode`) or
        /// `plan_approval` (a teammate's plan was approved).
        trigger: &'static str,
    },
    /// A skill was started: by the Skill tool, or by a person's slash
    /// command.
    SkillActivated {
        agent_id: String,
        name: String,
        /// `tool` or `slash_command`.
        trigger: &'static str,
        /// Where it was read from: `project`, `user`, `plugin`, `builtin`, ….
        source: &'static str,
    },
}

/// How the hooks of one event went that were waited for.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct HookTally {
    pub success: u32,
    pub blocking: u32,
    pub non_blocking_error: u32,
    pub duration_ms: u64,
}

impl EngineEvent {
    /// The session whose work the event shows; `None` for the events that
    /// count what it cost (a model response, a failed request).
    fn shown_agent(&self) -> Option<&str> {
        use EngineEvent as E;
        match self {
            E::ModelResponse { .. } | E::ApiError { .. } => None,
            E::TextDelta { agent_id, .. }
            | E::ThinkingDelta { agent_id, .. }
            | E::SignatureDelta { agent_id, .. }
            | E::Message { agent_id, .. }
            | E::ToolUse { agent_id, .. }
            | E::ToolResult { agent_id, .. }
            | E::ToolProgress { agent_id, .. }
            | E::SubagentStart { agent_id, .. }
            | E::SubagentProgress { agent_id, .. }
            | E::SubagentEnd { agent_id, .. }
            | E::Retrying { agent_id, .. }
            | E::Todos { agent_id, .. }
            | E::UserPrompt { agent_id, .. }
            | E::TurnEnd { agent_id }
            | E::ToolDecision { agent_id, .. }
            | E::HookRun { agent_id, .. }
            | E::HookEvent { agent_id, .. }
            | E::Compacted { agent_id, .. }
            | E::ModeChanged { agent_id, .. }
            | E::SkillActivated { agent_id, .. } => Some(agent_id),
        }
    }
}

/// Receives every engine event.
pub type EventSink = Arc<dyn Fn(&EngineEvent) + Send + Sync>;

/// A permission question about one tool call.
#[derive(Debug, Clone)]
pub struct AskRequest {
    /// The question as a sentence, for a person.
    pub question: String,
    pub agent_id: String,
    pub tool_use_id: String,
    pub tool: String,
    pub input: Value,
    /// Why the rules ask.
    pub reason: String,
}

/// The answer to a permission question.
#[derive(Debug, Clone, Default)]
pub struct AskAnswer {
    pub allow: bool,
    /// Why not, in the asker's words (an SDK client's denial message).
    pub message: Option<String>,
    /// The asker's answer could not be read (why, for the model): the
    /// call is denied, and nobody declined it.
    pub unreadable: Option<String>,
    /// The input to run the tool with instead (an SDK client's
    /// `updatedInput`); validated and checked against the rules again.
    pub updated_input: Option<Value>,
    /// Permission changes for the rest of the session, applied before the
    /// call goes on.
    pub updates: Vec<grants::PermissionUpdate>,
}

impl From<bool> for AskAnswer {
    fn from(allow: bool) -> Self {
        AskAnswer {
            allow,
            ..AskAnswer::default()
        }
    }
}

/// Answers a permission question (interactive sessions, or an SDK client's
/// `can_use_tool` callback).
pub type Asker = Arc<dyn Fn(AskRequest) -> BoxFuture<'static, AskAnswer> + Send + Sync>;

/// Hook callbacks an SDK client registered: called with the event name
/// (`PreToolUse`, `PostToolUse`, `Stop`, …), the matcher target (a tool
/// name, an agent type, a compaction trigger, or empty) and the hook input;
/// answers with the JSON output of every callback that applies, in order.
pub type ClientHookCall =
    Arc<dyn Fn(&'static str, String, Value) -> BoxFuture<'static, Vec<Value>> + Send + Sync>;

/// An SDK client's hook callbacks, run with the configured hooks of the
/// same event.
#[derive(Clone)]
pub struct ClientHooks {
    /// The events the client registered callbacks for.
    pub events: Vec<String>,
    pub call: ClientHookCall,
}

impl ClientHooks {
    pub fn wants(&self, event: &str) -> bool {
        self.events.iter().any(|e| e == event)
    }
}

/// Changes to the main session's system prompt from the command line
/// (`--system-prompt`, `--append-system-prompt`); sub-agents are unaffected.
#[derive(Debug, Clone, Default)]
pub struct MainPrompt {
    /// Replaces the main prompt's head (the environment block stays).
    pub replace: Option<String>,
    /// Appended after everything else.
    pub append: Option<String>,
}

/// What all sessions of one process share.
pub struct Engine {
    /// The current snapshot; a turn loads it once at its start.
    pub snapshot: Arc<ArcSwap<Snapshot>>,
    pub provider: Provider,
    /// Tool implementations by name (the Agent tool is handled here).
    pub tools: BTreeMap<String, Arc<dyn Tool>>,
    /// The process environment (for `HOME`).
    pub env: Vec<(String, String)>,
    /// The model override for sub-agents and teammates
    /// ([`crate::config::subagent_model`]), read from `env` once.
    pub subagent_model: Option<String>,
    pub session_id: String,
    /// The session's folder (`transcripts.dir/SESSION`, by default under
    /// `~/.claude/projects/<project key>/`), or `None` when transcripts are off.
    pub session_dir: Option<PathBuf>,
    pub events: EventSink,
    /// Asks the user; `None` in non-interactive sessions (an ask is a denial).
    pub asker: Option<Asker>,
    /// Puts AskUserQuestion's questions to the user; `None`: nobody can
    /// answer, and the model is told to decide on its own.
    pub questioner: Option<ask_user::Questioner>,
    /// Every sub-agent of this process, and the sessions' mailboxes.
    pub tasks: tasks::TaskRegistry,
    /// MCP connections: shared servers and agents' inline servers.
    pub mcp: Arc<crate::mcp::McpManager>,
    /// Edits to the main session's system prompt.
    pub main_prompt: MainPrompt,
    /// An SDK client's hook callbacks.
    pub client_hooks: Option<ClientHooks>,
    /// `--add-dir` folders: besides the working directory and
    /// `permissions.additional_directories`, where edits need no rule.
    pub add_dirs: Vec<PathBuf>,
    /// The main session's permission mode as it is now (it changes with
    /// `set_permission_mode`), for approvals outside a tool call (MCP
    /// sampling).
    pub main_mode: Mutex<crate::config::PermissionMode>,
    /// Tokens counted by every model response of this process's session
    /// (main agent, sub-agents, compactions), for
    /// `agents.session_token_budget`.
    session_tokens: std::sync::atomic::AtomicU64,
    /// Permission updates for the rest of the session (an SDK client's).
    pub grants: Mutex<grants::Grants>,
    validators: Mutex<HashMap<(u64, String), Arc<jsonschema::Validator>>>,
    /// Built-in tool definitions rendered for one snapshot generation, by
    /// what they depend on: every session that sees the same tools (the
    /// 1,000 children of one turn) shares one copy, and so sends the same
    /// bytes.
    tool_defs: Mutex<session::ToolDefCache>,
    /// [`Engine::available_tools`] for the newest snapshot generation that
    /// asked (every Agent call asks; a turn may make a thousand).
    available: Mutex<Option<(u64, Arc<[String]>)>>,
    /// Cancels every teammate of this process (at its end).
    pub team_cancel: tokio_util::sync::CancellationToken,
    /// The teammates' tasks, awaited at shutdown.
    pub(crate) team_handles: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Where background children run when not in this process
    /// (`[distributed] backend`); `None`: here.
    pub backend: Option<Arc<dyn backend::TaskBackend>>,
    /// Rebuilds the snapshot now when something under the given folders
    /// changed since it was read (what the file watcher does a moment
    /// later), for a turn about to use what they hold. Set by the CLI,
    /// which knows what the snapshot is built from; `None`: never.
    pub catch_up: Option<CatchUp>,
    /// Applies an SDK host's settings for the rest of the session
    /// (`apply_flag_settings`; `None`: none, only rebuild) and rebuilds the
    /// snapshot now; why not, when the settings do not load (they are then
    /// dropped). Set by the CLI; `None`: never.
    pub apply_settings: Option<ApplySettings>,
    /// Sessions whose events nobody outside sees (an `agent` hook's
    /// sub-agent): only their cost is reported.
    quiet: Mutex<std::collections::HashSet<String>>,
    /// File checkpoints for `rewind_files` (an SDK's
    /// `enable_file_checkpointing`); `None`: none are kept.
    pub file_history: Option<Arc<file_history::FileHistory>>,
    /// The id of the user's prompt being answered (hook inputs'
    /// `prompt_id`, telemetry's `prompt.id`).
    prompt_id: Mutex<Option<String>>,
    /// The FileChanged watcher's inbox for more paths (the `watchPaths`
    /// hooks answer); `None`: nothing is watched for hooks.
    pub(crate) watch_more: Mutex<Option<tokio::sync::mpsc::UnboundedSender<Vec<PathBuf>>>>,
}

/// See [`Engine::catch_up`].
pub type CatchUp = Arc<dyn Fn(&[PathBuf]) + Send + Sync>;

/// See [`Engine::apply_settings`].
pub type ApplySettings = Arc<
    dyn Fn(Option<serde_json::Map<String, serde_json::Value>>) -> Result<(), String> + Send + Sync,
>;

impl Engine {
    pub fn new(
        snapshot: Arc<ArcSwap<Snapshot>>,
        provider: Provider,
        tools: Vec<Arc<dyn Tool>>,
        env: Vec<(String, String)>,
        session_dir: Option<PathBuf>,
        session_id: String,
        events: EventSink,
        asker: Option<Asker>,
    ) -> Self {
        let max_concurrent = snapshot.load().settings().agents.max_concurrent;
        // The settings' `env` applies over the process's, as in Claude
        // Code (the last value of a variable counts).
        let with_settings: Vec<(String, String)> = env
            .iter()
            .cloned()
            .chain(snapshot.load().settings().env.clone())
            .collect();
        let subagent_model = crate::config::subagent_model(&with_settings);
        Engine {
            tasks: tasks::TaskRegistry::new(max_concurrent),
            snapshot,
            provider,
            tools: tools
                .into_iter()
                .map(|t| (t.name().to_string(), t))
                .collect(),
            subagent_model,
            env,
            session_id,
            session_dir,
            events,
            asker,
            questioner: None,
            mcp: crate::mcp::McpManager::new(),
            main_prompt: MainPrompt::default(),
            client_hooks: None,
            add_dirs: Vec::new(),
            main_mode: Mutex::new(crate::config::PermissionMode::Default),
            session_tokens: std::sync::atomic::AtomicU64::new(0),
            grants: Mutex::new(grants::Grants::default()),
            validators: Mutex::new(HashMap::new()),
            tool_defs: Mutex::default(),
            available: Mutex::new(None),
            team_cancel: tokio_util::sync::CancellationToken::new(),
            team_handles: Mutex::new(Vec::new()),
            backend: None,
            catch_up: None,
            apply_settings: None,
            quiet: Mutex::default(),
            file_history: None,
            prompt_id: Mutex::new(None),
            watch_more: Mutex::new(None),
        }
    }

    pub fn emit(&self, event: EngineEvent) {
        if let Some(id) = event.shown_agent()
            && self
                .quiet
                .lock()
                .is_ok_and(|q| !q.is_empty() && q.contains(id))
        {
            return;
        }
        (self.events)(&event);
    }

    /// From now on only the cost of `agent_id`'s requests is reported, not
    /// its messages, tool calls or progress (until [`Engine::unquiet`]).
    pub(crate) fn quiet(&self, agent_id: &str) {
        if let Ok(mut q) = self.quiet.lock() {
            q.insert(agent_id.to_string());
        }
    }

    pub(crate) fn unquiet(&self, agent_id: &str) {
        if let Ok(mut q) = self.quiet.lock() {
            q.remove(agent_id);
        }
    }

    /// A new prompt of the user's starts: its fresh id.
    pub fn new_prompt_id(&self) -> String {
        let id = transcript::new_uuid();
        if let Ok(mut p) = self.prompt_id.lock() {
            *p = Some(id.clone());
        }
        id
    }

    /// Hooks answered `watchPaths` (relative ones are `cwd`'s): the
    /// FileChanged watcher, when one runs, watches them too.
    pub fn watch_more(&self, cwd: &Path, paths: &[String]) {
        if paths.is_empty() {
            return;
        }
        if let Ok(tx) = self.watch_more.lock()
            && let Some(tx) = tx.as_ref()
        {
            let _ = tx.send(paths.iter().map(|p| cwd.join(p)).collect());
        }
    }

    /// The id of the prompt being answered, if one is.
    pub fn prompt_id(&self) -> Option<String> {
        self.prompt_id.lock().ok().and_then(|p| p.clone())
    }

    /// The folders besides the working directory `cwd` where edits need
    /// no rule: the settings', `--add-dir`'s and the session's own.
    pub fn added_dirs(&self, snap: &Snapshot, cwd: &Path) -> Vec<PathBuf> {
        let session_dirs = match self.grants.lock() {
            Ok(g) => g.add_dirs.clone(),
            Err(_) => Vec::new(),
        };
        snap.settings()
            .permissions
            .additional_directories
            .iter()
            .chain(&self.add_dirs)
            .chain(&session_dirs)
            .map(|d| cwd.join(d))
            .collect()
    }

    /// A model response arrived for `agent_id`: counts its tokens against
    /// the session's budget and emits [`EngineEvent::ModelResponse`].
    /// `refused`: the model's safety systems stopped the reply (stop
    /// reason `refusal`).
    pub fn model_response(
        &self,
        agent_id: &str,
        model: &str,
        usage: Usage,
        api_ms: u64,
        refused: bool,
    ) {
        self.session_tokens
            .fetch_add(usage.total(), std::sync::atomic::Ordering::SeqCst);
        self.emit(EngineEvent::ModelResponse {
            agent_id: agent_id.to_string(),
            model: model.to_string(),
            refused,
            usage,
            api_ms,
        });
    }

    /// A model request of `agent_id` failed for good: emits
    /// [`EngineEvent::ApiError`] (for telemetry; the model is told the
    /// typed problem, never this text).
    pub fn api_error(
        &self,
        agent_id: &str,
        model: &str,
        failure: &crate::provider::ProviderError,
        duration_ms: u64,
    ) {
        self.emit(EngineEvent::ApiError {
            agent_id: agent_id.to_string(),
            model: model.to_string(),
            error: failure.message.clone(),
            status_code: match failure.kind {
                crate::provider::ProviderErrorKind::Status(code) => Some(code),
                _ => None,
            },
            duration_ms,
        });
    }

    /// Tokens of every model response of this session so far (this process).
    pub fn session_tokens(&self) -> u64 {
        self.session_tokens
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn env_var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Process end: stops every running task (each records `killed` in its
    /// meta file and transcript, and its Bash process groups are killed),
    /// waiting up to `grace` for them, then closes every MCP server.
    pub async fn shutdown(&self, grace: std::time::Duration) {
        // Teammates end too (each marks itself ended in its team's folder).
        self.team_cancel.cancel();
        let handles: Vec<_> = std::mem::take(
            &mut *self
                .team_handles
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let _ = tokio::time::timeout(grace, futures_util::future::join_all(handles)).await;
        self.tasks.kill_all(grace).await;
        self.mcp.shutdown().await;
    }

    /// Every tool this engine can run, sorted by name.
    pub fn available_tools(&self, snap: &Snapshot) -> Arc<[String]> {
        let mut cached = self
            .available
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((generation, names)) = &*cached
            && *generation == snap.generation
        {
            return Arc::clone(names);
        }
        let names: Arc<[String]> =
            Arc::from(available_tools(snap, self.tools.keys().map(String::as_str)));
        if cached.as_ref().is_none_or(|(g, _)| *g < snap.generation) {
            *cached = Some((snap.generation, Arc::clone(&names)));
        }
        names
    }

    /// What this engine offers agents (see [`tool_offer`]).
    pub fn tool_offer(&self, snap: &Snapshot) -> crate::agent_tool::ToolOffer {
        tool_offer(snap, self.tools.keys().map(String::as_str))
    }
}

/// Tools the runtime itself implements: starting and managing sub-agents.
pub const RUNTIME_TOOLS: &[&str] = &[
    crate::agent_tool::AGENT_TOOL,
    "SendMessage",
    "TaskOutput",
    "TaskStop",
    todos::TODO_WRITE,
    todos::SKILL,
    "TaskCreate",
    "TaskList",
    "TaskGet",
    "TaskUpdate",
    "TeamCreate",
    "TeamDelete",
    ask_user::ASK_USER_QUESTION,
];

/// The tools that both have a spec and can run (the implemented ones and
/// the Agent tool), sorted by name, minus those a deny rule names as a
/// whole (`deny = ["Edit"]`): a tool no call of which could run is not
/// offered to any agent.
pub fn available_tools<'a>(
    snap: &Snapshot,
    implemented: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let implemented: Vec<&str> = implemented.into_iter().collect();
    let rules: &crate::permissions::Rules = &snap.rules;
    let mut names: Vec<String> = snap
        .tools
        .names()
        .filter(|n| implemented.contains(n) || RUNTIME_TOOLS.contains(n))
        .filter(|n| tool_exists(snap, n))
        .filter(|n| rules.denies_whole_tool(n).is_none())
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

/// Whether a tool's `when` (if any) holds now: the team tools exist only
/// while AGENT_TEAMS is on.
fn tool_exists(snap: &Snapshot, name: &str) -> bool {
    snap.tools
        .get(name)
        .and_then(|s| s.when.as_ref())
        .is_none_or(|c| snap.holds(c, snap.session_kind(false)))
}

/// What this engine offers agents, for [`crate::agent_tool::withheld_tools`]
/// and the Agent tool's per-agent tool line.
pub fn tool_offer<'a>(
    snap: &Snapshot,
    implemented: impl IntoIterator<Item = &'a str>,
) -> crate::agent_tool::ToolOffer {
    let implemented: Vec<&str> = implemented.into_iter().collect();
    let rules: &crate::permissions::Rules = &snap.rules;
    // MCP resource tools exist too, given while a server offers resources.
    let known: Vec<String> = snap
        .tools
        .names()
        .filter(|n| {
            implemented.contains(n)
                || RUNTIME_TOOLS.contains(n)
                || crate::mcp::RESOURCE_TOOLS.contains(n)
        })
        .map(str::to_string)
        .collect();
    let denied = known
        .iter()
        .filter_map(|n| Some((n.clone(), rules.denies_whole_tool(n)?.to_string())))
        .collect();
    let interactive_only = known
        .iter()
        .filter(|n| snap.tools.get(n).is_some_and(|s| s.interactive_only))
        .cloned()
        .collect();
    crate::agent_tool::ToolOffer {
        known,
        denied,
        interactive_only,
        mcp_servers: snap.mcp_servers.keys().cloned().collect(),
        max_depth: snap.settings().agents.max_depth,
    }
}

/// The main session's tools: everything available, minus interactive-only
/// tools outside interactive sessions, then the `--agent` definition's
/// allowlist and denylist (by base name).
pub fn main_tool_pool(
    available: &[String],
    snap: &Snapshot,
    kind: crate::config::SessionKind,
    def: Option<&crate::catalog::AgentDef>,
) -> Vec<String> {
    use crate::catalog::base_name;
    available
        .iter()
        .filter(|n| kind.interactive || snap.tools.get(n).is_none_or(|s| !s.interactive_only))
        .filter(|n| {
            def.and_then(|d| {
                let memory =
                    d.memory.is_some() && crate::agent_tool::MEMORY_TOOLS.contains(&n.as_str());
                d.tools.as_ref().filter(|_| !memory)
            })
            .is_none_or(|allow| allow.iter().any(|s| base_name(s) == n.as_str()))
        })
        .filter(|n| {
            def.is_none_or(|d| {
                !d.disallowed_tools
                    .iter()
                    .any(|s| base_name(s) == n.as_str())
            })
        })
        .cloned()
        .collect()
}

/// A fresh id: `a` followed by 16 hex digits.
pub fn new_agent_id() -> String {
    format!("a{:016x}", rand::random::<u64>())
}

/// Usage as one number for results: the last request's input (including
/// cache reads and writes) plus every output token.
pub fn total_tokens(last: &Usage, cumulative: &Usage) -> u64 {
    last.input_tokens
        + last.cache_creation_input_tokens
        + last.cache_read_input_tokens
        + cumulative.output_tokens
}

/// The samples of every template context the runtime owns, as
/// (template, verbatim, values).
#[cfg(test)]
pub(crate) fn template_samples() -> Vec<(&'static str, bool, serde_json::Value)> {
    let mut all = texts::samples();
    all.extend(prompt::samples());
    all.extend(team_texts::samples());
    all.extend(instructions::samples());
    all.push(crate::templates::sample_of::<prompt::MemoryContext>());
    all
}
