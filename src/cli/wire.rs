//! The headless protocol: Claude Code's stream-json messages and the Agent
//! SDK's control protocol, as typed serde structs.
//!
//! These types are the contract with scripts and SDKs; they are mapped from
//! engine events by [`super::emit`] and never reuse the engine's own enums,
//! so a change inside the engine cannot change what a client reads.
//! Message content is carried in the Anthropic Messages API shape, which is
//! also what Claude Code sends.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::PermissionMode;
use crate::runtime::grants::{Destination, PermissionUpdate};

/// The Claude Code version cadre speaks the protocol of. The SDKs read it
/// from the `init` message (`claude_code_version`) and warn below 2.0.0.
pub const CLAUDE_CODE_VERSION: &str = "2.1.0";

/// cadre's own version.
pub const CADRE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// What `cadre --version` prints: the protocol version first (what tools
/// that parse `claude --version` look for), then cadre's own.
pub fn version_line() -> String {
    format!("{CLAUDE_CODE_VERSION} (Claude Code compatible; cadre {CADRE_VERSION})")
}

/// A fresh message uuid.
/// A task run's id: the time it opened (ns since the epoch, fixed width)
/// and a random tail, so that the runs of one task sort in the order they
/// opened, across processes too (a resumed task gets a new run).
pub fn new_run_id() -> String {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let tail: u32 = rand::random();
    format!("run_{ns:020}_{tail:08x}")
}

pub fn new_uuid() -> String {
    let a: u128 = rand::random();
    let h = format!("{a:032x}");
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}

// ---------------------------------------------------------------- output

/// One line of stream-json output.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Output {
    System(System),
    Assistant(AssistantOut),
    User(UserOut),
    /// A user message of stdin echoed back (`--replay-user-messages`).
    #[serde(rename = "user")]
    UserReplay(UserReplay),
    StreamEvent(StreamEventOut),
    Result(ResultOut),
    ControlRequest(ControlRequestOut),
    ControlResponse(ControlResponseOut),
    /// The answer to `initialize`.
    #[serde(rename = "control_response")]
    InitializeResponse(InitializeResponseOut),
    ToolProgress(ToolProgress),
    /// cadre's extras: types an SDK skips.
    SubagentStart(SubagentStart),
    SubagentProgress(SubagentProgress),
    SubagentEnd(SubagentEnd),
    Retrying(Retrying),
    Todos(Todos),
    /// `/clear`: the conversation starts afresh under a new session id.
    ConversationReset(ConversationReset),
    /// `--session-mirror`: transcript lines as they are written.
    TranscriptMirror(TranscriptMirror),
}

/// `conversation_reset`, as Claude Code sends it after `/clear`:
/// `session_id` is the old session's, `new_conversation_id` the new one's.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ConversationReset {
    pub new_conversation_id: String,
    pub uuid: String,
    pub trigger: String,
    pub timestamp: String,
    pub session_id: String,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "subtype", rename_all = "snake_case")]
pub enum System {
    Init(Box<Init>),
    /// A sub-agent started (Claude Code's `SDKTaskStartedMessage`).
    TaskStarted(TaskStarted),
    /// A sub-agent's state changed (here: it ended).
    TaskUpdated(TaskUpdated),
    /// A sub-agent ended (Claude Code's `SDKTaskNotificationMessage`).
    TaskNotification(TaskNotification),
    /// The session started or finished work (with
    /// `CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS` set, as Claude Code).
    SessionStateChanged(SessionStateChanged),
    /// `--include-partial-messages`: what the session is doing now
    /// (`requesting`: a model request is on its way).
    Status(Status),
    /// `--include-partial-messages`: an estimate of the thinking streamed
    /// so far in the open thinking block.
    ThinkingTokens(ThinkingTokens),
    /// The host renamed the session (`rename_session`).
    SessionTitleChanged(SessionTitleChanged),
}

/// `system`/`status`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Status {
    pub status: &'static str,
    pub session_id: String,
    pub uuid: String,
}

/// `system`/`thinking_tokens`: about four characters a token.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ThinkingTokens {
    pub estimated_tokens: u64,
    pub estimated_tokens_delta: u64,
    pub session_id: String,
    pub uuid: String,
}

/// `system`/`session_title_changed`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SessionTitleChanged {
    pub title: String,
    pub uuid: String,
    pub session_id: String,
}

/// `system`/`session_state_changed`: `running` when a prompt starts,
/// `idle` after its `result`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SessionStateChanged {
    pub state: &'static str,
    pub uuid: String,
    pub session_id: String,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TaskStarted {
    pub task_id: String,
    /// The id of this run of the task, the same on each of its task events.
    pub run_id: String,
    pub tool_use_id: String,
    pub description: String,
    pub subagent_type: String,
    /// `local_agent`: a sub-agent of this process.
    pub task_type: &'static str,
    /// The task the Agent call gave it.
    pub prompt: String,
    pub is_backgrounded: bool,
    /// How deep it runs: the main session's children are 1.
    pub spawn_depth: u32,
    pub uuid: String,
    pub session_id: String,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TaskUpdated {
    pub task_id: String,
    /// As on `task_started` (absent for a task this process did not start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The fields that changed.
    pub patch: TaskPatch,
    pub uuid: String,
    pub session_id: String,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TaskNotification {
    pub task_id: String,
    /// As on `task_started` (absent for a task this process did not start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub tool_use_id: Option<String>,
    /// `completed`, `failed` or `stopped`.
    pub status: String,
    /// Claude Code's file with the task's output; cadre keeps a
    /// sub-agent's output in its transcript, so this is empty (the SDKs
    /// need the field).
    pub output_file: String,
    /// The sub-agent's last text.
    pub summary: String,
    pub usage: TaskUsage,
    pub uuid: String,
    pub session_id: String,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TaskUsage {
    pub total_tokens: u64,
    pub tool_uses: u32,
    pub duration_ms: u64,
}

/// `system`/`init`: sent before each prompt's first message.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Init {
    pub cwd: String,
    pub session_id: String,
    pub tools: Vec<String>,
    pub mcp_servers: Vec<McpServerStatus>,
    pub model: String,
    #[serde(rename = "permissionMode")]
    pub permission_mode: String,
    pub slash_commands: Vec<String>,
    #[serde(rename = "apiKeySource")]
    pub api_key_source: String,
    pub claude_code_version: String,
    pub output_style: String,
    pub agents: Vec<String>,
    pub skills: Vec<String>,
    pub plugins: Vec<Value>,
    pub uuid: String,
    /// Where the process started (`cwd` may be a worktree since).
    pub original_cwd: String,
    /// Folders besides `cwd` the session may edit without a rule
    /// (`--add-dir`, `permissions.additionalDirectories`, grants).
    pub additional_directories: Vec<String>,
    /// cadre's extras.
    pub cadre_version: String,
    /// Where the model came from: `flag`, `agent`, `settings` or `managed`.
    pub model_source: String,
    /// The snapshot generation (hot reloads bump it).
    pub reload_generation: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct McpServerStatus {
    pub name: String,
    pub status: String,
}

/// An assistant message in the Messages API shape.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ApiMessage {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub role: &'static str,
    pub model: String,
    pub content: Value,
    pub stop_reason: Option<String>,
    pub stop_sequence: Option<String>,
    pub usage: WireUsage,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct AssistantOut {
    pub message: ApiMessage,
    /// The Agent tool call whose sub-agent sent it; `null` for the main session.
    pub parent_tool_use_id: Option<String>,
    pub session_id: String,
    pub uuid: String,
    /// When it was sent (RFC 3339, UTC).
    pub timestamp: String,
    /// Set on the message that reports a failed model request in place of
    /// an answer (Claude Code's API error message).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub api_error: Option<ApiErrorFields>,
}

/// What an assistant message reporting a failed model request carries, as
/// Claude Code sends it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ApiErrorFields {
    /// The SDKs' `AssistantMessageError`: `authentication_failed`,
    /// `billing_error`, `rate_limit`, `invalid_request`, `server_error`,
    /// `model_not_found`, `unknown`.
    pub error: &'static str,
    pub is_api_error_message: bool,
    pub api_error_status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_error_type: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct UserApiMessage {
    pub role: &'static str,
    pub content: Value,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct UserOut {
    pub message: UserApiMessage,
    pub parent_tool_use_id: Option<String>,
    pub session_id: String,
    pub uuid: String,
    /// When it was sent (RFC 3339, UTC).
    pub timestamp: String,
    /// A sub-agent's message: which one, of which type, doing what.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub subagent: Option<SubagentOf>,
    /// A message cadre added to the conversation itself (a reminder).
    #[serde(rename = "isSynthetic", skip_serializing_if = "std::ops::Not::not")]
    pub is_synthetic: bool,
    /// A message carrying one tool result: the result as data (the SDKs'
    /// typed tool results: Read's file, Bash's stdout, Edit's patch, …),
    /// or its text (`Error: …` for a failed call) where the tool has no
    /// typed form.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_use_result: Option<Value>,
    /// For each tool result in the message: how its call was decided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_result_meta: Option<Vec<ToolResultMeta>>,
}

/// An Agent call's result as data (Claude Code's `AgentOutput`), for a
/// sub-agent that ran in the foreground.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AgentToolResult {
    /// `completed`, `failed`, `stopped`.
    pub status: &'static str,
    pub prompt: String,
    pub agent_id: String,
    pub agent_type: String,
    /// The sub-agent's answer, as the tool result's blocks.
    pub content: Value,
    pub resolved_model: String,
    pub total_duration_ms: u64,
    pub total_tokens: u64,
    pub total_tool_use_count: u32,
    pub usage: ResultUsage,
}

/// How one tool call of a `user` message's results was decided (Claude
/// Code's `tool_result_meta`).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ToolResultMeta {
    /// The tool call's id.
    pub id: String,
    pub permission_decision: PermissionDecision,
    /// `permission-rule` for a call refused before it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_execution_kind: Option<&'static str>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PermissionDecision {
    /// `accept` or `reject`.
    pub decision: &'static str,
    /// `config` (rules, mode, flags), `hook`, `user_reject` (the host or
    /// the person), `user_accept`.
    pub source: &'static str,
    /// What in the configuration decided: `rule`, `mode`, `hook`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason_type: Option<&'static str>,
}

/// The sub-agent a message comes from (Claude Code's fields).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SubagentOf {
    pub agent_id: String,
    pub subagent_type: String,
    pub task_description: String,
}

/// A user message of stdin as Claude Code echoes it with
/// `--replay-user-messages`: the message as sent, under the client's own
/// `uuid` (a fresh one if it sent none), marked `isReplay`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct UserReplay {
    pub message: UserApiMessage,
    pub parent_tool_use_id: Option<String>,
    pub session_id: String,
    pub uuid: String,
    pub timestamp: String,
    #[serde(rename = "isReplay")]
    pub is_replay: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<Value>,
}

/// A partial message (`--include-partial-messages`): `event` is a Messages
/// API streaming event.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct StreamEventOut {
    pub uuid: String,
    pub session_id: String,
    pub event: StreamEvent,
    pub parent_tool_use_id: Option<String>,
    /// The id of the message it belongs to (its `assistant` message's
    /// `message.id`).
    pub api_message_id: String,
}

/// Token counts in the Messages API shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct WireUsage {
    pub input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub output_tokens: u64,
}

/// The result's `usage`: the prompt's token counts with Claude Code's
/// details of them (each summed from the API's own).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ResultUsage {
    #[serde(flatten)]
    pub tokens: WireUsage,
    pub output_tokens_details: OutputTokensDetails,
    pub server_tool_use: ServerToolUse,
    /// The last response's tier as the API said it; `standard` when it
    /// did not (as Claude Code).
    pub service_tier: &'static str,
    pub cache_creation: CacheCreation,
    /// Where the requests ran: cadre is not told, so empty (Claude Code's
    /// value when the API does not say).
    pub inference_geo: &'static str,
}

impl Default for ResultUsage {
    /// No tokens, on the standard tier.
    fn default() -> Self {
        ResultUsage {
            tokens: WireUsage::default(),
            output_tokens_details: OutputTokensDetails::default(),
            server_tool_use: ServerToolUse::default(),
            service_tier: "standard",
            cache_creation: CacheCreation::default(),
            inference_geo: "",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct OutputTokensDetails {
    pub thinking_tokens: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ServerToolUse {
    pub web_search_requests: u64,
    pub web_fetch_requests: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct CacheCreation {
    pub ephemeral_1h_input_tokens: u64,
    pub ephemeral_5m_input_tokens: u64,
}

/// One refused tool call (Claude Code's `SDKPermissionDenial`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PermissionDenial {
    pub tool_name: String,
    pub tool_use_id: String,
    pub tool_input: Value,
}

/// Per-model totals in the result (`modelUsage`), camelCase as Claude Code writes them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ModelUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub web_search_requests: u64,
    #[serde(rename = "costUSD")]
    pub cost_usd: f64,
    /// The model's context window as cadre measures it (`[compact]`).
    pub context_window: u64,
    /// The most output tokens cadre asks the model for.
    pub max_output_tokens: u64,
    pub thinking_tokens: u64,
    pub cache_creation_ephemeral5m_input_tokens: u64,
    pub cache_creation_ephemeral1h_input_tokens: u64,
    /// The model id without a date suffix.
    pub canonical_model: String,
    /// Who serves it: `firstParty` (the Anthropic API) or `openai` (an
    /// OpenAI-compatible server).
    pub provider: &'static str,
    /// `list` when the cost comes from a price table (cadre's holds list
    /// prices), `none` when no price is known for the model.
    pub cost_basis: &'static str,
}

/// Sub-agents of the session so far (the result's `subagent_stats`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SubagentStats {
    pub spawned: u64,
    pub requested: Requested,
    pub started_in_background: u64,
    pub max_depth: u64,
    pub spawned_by_subagents: u64,
    pub completed: u64,
    pub failed: u64,
    pub killed: Killed,
    pub refused: Refused,
    pub by_type: BTreeMap<String, u64>,
}

/// What the Agent calls asked for (`run_in_background`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Requested {
    pub background: u64,
    pub foreground: u64,
    pub unset: u64,
}

/// Sub-agents stopped before they ended: by their parent, the user, or
/// cadre itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Killed {
    pub parent: u64,
    pub user: u64,
    pub system: u64,
}

/// Agent calls refused before a sub-agent started.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Refused {
    pub depth_limit: u64,
    pub concurrency_limit: u64,
    pub budget: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ResultSubtype {
    Success,
    ErrorMaxTurns,
    ErrorDuringExecution,
    ErrorMaxBudgetUsd,
    /// `--json-schema`: the model's StructuredOutput calls kept failing.
    ErrorMaxStructuredOutputRetries,
}

/// The last message of each prompt's run.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ResultOut {
    pub subtype: ResultSubtype,
    pub is_error: bool,
    pub duration_ms: u64,
    pub duration_api_ms: u64,
    pub num_turns: u32,
    pub result: String,
    pub session_id: String,
    pub total_cost_usd: f64,
    pub usage: Box<ResultUsage>,
    #[serde(rename = "modelUsage")]
    pub model_usage: BTreeMap<String, ModelUsage>,
    /// What each model counted since the session's previous result (on
    /// a `success` result, as Claude Code).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_usage_since_last_result: Option<BTreeMap<String, ModelUsage>>,
    /// The tool calls refused during the prompt (by a rule, the mode, a
    /// hook, the host or the person).
    pub permission_denials: Vec<PermissionDenial>,
    /// This result's place among the session's results, from 0.
    pub result_index: u64,
    /// Prompts read and waiting behind this one.
    pub queued_turn_count: u64,
    pub subagent_stats: Box<SubagentStats>,
    /// Replies the model's safety systems stopped (Claude Code's count of
    /// `refusal` stop reasons); 0 when none.
    pub safety_stops: u64,
    /// `--include-partial-messages`: the ids of the model responses whose
    /// stream began during this prompt, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub begun_message_ids: Option<Vec<String>>,
    pub stop_reason: Option<String>,
    /// Why the run ended, in Claude Code's words (`completed`, `max_turns`,
    /// `api_error`, `prompt_too_long`, `aborted_streaming`, …); absent for
    /// ends of cadre's own (the repeated-call guard).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal_reason: Option<&'static str>,
    /// The HTTP status of the model request that failed, `null` otherwise.
    pub api_error_status: Option<u16>,
    /// The error `type` the API gave with that status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_error_type: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// `--json-schema`: the answer, fitting the schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<Value>,
    /// The built-in command this result answers (`clear`, `compact`),
    /// which sent nothing to the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_command: Option<String>,
    /// The prompt's origin as the host stamped it (`{"kind": "human"}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<HumanOrigin>,
    pub uuid: String,
}

/// A request from cadre to the client.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ControlRequestOut {
    pub request_id: String,
    pub request: ToClient,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "subtype", rename_all = "snake_case")]
pub enum ToClient {
    /// `--permission-prompt-tool stdio`: may this tool call run?
    CanUseTool {
        tool_name: String,
        /// The tool's name for a person (the tool's name).
        display_name: String,
        input: Value,
        /// What the call does, in a line: Bash's `description` or command,
        /// a file tool's path, else the question cadre would ask.
        description: String,
        /// The file or folder the call would change, when it names one.
        #[serde(skip_serializing_if = "Option::is_none")]
        blocked_path: Option<String>,
        permission_suggestions: Vec<PermissionSuggestion>,
        tool_use_id: String,
        /// Set for a sub-agent's call.
        #[serde(skip_serializing_if = "Option::is_none")]
        agent_id: Option<String>,
        decision_reason: String,
    },
    /// An MCP server asks the user for input (Claude Code's `elicitation`
    /// request); the answer is `{action, content?}`.
    Elicitation {
        mcp_server_name: String,
        message: String,
        mode: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        elicitation_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        requested_schema: Option<Value>,
    },
    /// A hook the client registered in `initialize`.
    HookCallback {
        callback_id: String,
        input: Value,
        tool_use_id: Option<String>,
    },
    /// A JSON-RPC message for one of the client's in-process MCP servers
    /// (`type: "sdk"` in `--mcp-config`); the answer carries `mcp_response`.
    McpMessage { server_name: String, message: Value },
}

/// cadre's answer to a client's request.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ControlResponseOut {
    pub response: ResponseBody,
}

/// `initialize`'s answer also lists the permission requests that wait for
/// the client (beside `request_id`, as Claude Code puts them).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct InitializeResponseOut {
    pub response: InitializeBody,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct InitializeBody {
    #[serde(flatten)]
    pub body: ResponseBody,
    pub pending_permission_requests: Vec<Value>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "subtype", rename_all = "snake_case")]
pub enum ResponseBody {
    Success {
        request_id: String,
        /// Absent for a bare acknowledgement, as Claude Code sends it.
        #[serde(skip_serializing_if = "ControlAnswer::is_ack")]
        response: ControlAnswer,
    },
    Error {
        request_id: String,
        error: String,
        /// `unsupported_request` for a subtype cadre does not know.
        #[serde(skip_serializing_if = "Option::is_none")]
        error_code: Option<&'static str>,
    },
}

impl ControlResponseOut {
    /// With the permission requests waiting (`initialize`).
    pub fn with_pending_permission_requests(self, pending: Vec<Value>) -> InitializeResponseOut {
        InitializeResponseOut {
            response: InitializeBody {
                body: self.response,
                pending_permission_requests: pending,
            },
        }
    }

    pub fn success(request_id: &str, response: impl Into<ControlAnswer>) -> Self {
        ControlResponseOut {
            response: ResponseBody::Success {
                request_id: request_id.to_string(),
                response: response.into(),
            },
        }
    }

    pub fn error(request_id: &str, error: impl Into<String>) -> Self {
        ControlResponseOut {
            response: ResponseBody::Error {
                request_id: request_id.to_string(),
                error: error.into(),
                error_code: None,
            },
        }
    }

    /// Claude Code's answer to a subtype it does not know.
    pub fn unsupported(request_id: &str, subtype: &str) -> Self {
        ControlResponseOut {
            response: ResponseBody::Error {
                request_id: request_id.to_string(),
                error: format!("Unsupported control request subtype: {subtype}"),
                error_code: Some("unsupported_request"),
            },
        }
    }
}

/// A running tool call reported progress (Claude Code's
/// `SDKToolProgressMessage`; cadre sends one per MCP progress
/// notification).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ToolProgress {
    pub tool_use_id: String,
    pub tool_name: String,
    /// The Agent call whose sub-agent made the call; `null` for the main
    /// session's calls.
    pub parent_tool_use_id: Option<String>,
    /// Seconds since the call started.
    pub elapsed_time_seconds: f64,
    pub uuid: String,
    pub session_id: String,
}

/// cadre extra: a sub-agent started.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SubagentStart {
    pub agent_id: String,
    pub parent_agent_id: String,
    pub agent_type: String,
    pub description: String,
    pub model: String,
    pub fork: bool,
    pub tool_use_id: String,
    pub session_id: String,
}

/// cadre extra: a sub-agent made a tool call.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SubagentProgress {
    pub agent_id: String,
    pub tool_uses: u32,
    pub duration_ms: u64,
    pub last_tool: String,
    pub session_id: String,
}

/// cadre extra: a sub-agent ended.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SubagentEnd {
    pub agent_id: String,
    pub status: String,
    pub tool_uses: u32,
    pub duration_ms: u64,
    pub total_tokens: u64,
    pub session_id: String,
}

/// cadre extra: a model request failed and will be retried.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Retrying {
    pub agent_id: String,
    pub attempt: u32,
    pub delay_ms: u64,
    pub reason: String,
    pub session_id: String,
}

/// cadre extra: a session's whole todo list after a TodoWrite call.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Todos {
    pub agent_id: String,
    #[cfg_attr(test, schemars(with = "Vec<Value>"))]
    pub todos: Vec<crate::runtime::todos::Todo>,
    pub session_id: String,
}

// ------------------------------------------------- partial messages

/// A Messages API streaming event, as a `stream_event` line carries it
/// (`--include-partial-messages`).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    MessageStart {
        message: StreamMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: StreamBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: StreamDelta,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        delta: StreamStop,
        usage: StreamOutputTokens,
    },
    MessageStop,
}

/// The message a `message_start` opens: empty, its usage not known yet.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct StreamMessage {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub role: &'static str,
    pub model: String,
    pub content: [Value; 0],
    pub stop_reason: Option<String>,
    pub stop_sequence: Option<String>,
    pub usage: WireUsage,
}

/// The block a `content_block_start` opens, empty.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamBlock {
    Text { text: String },
    Thinking { thinking: String, signature: String },
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamDelta {
    TextDelta { text: String },
    ThinkingDelta { thinking: String },
    SignatureDelta { signature: String },
}

/// `message_delta`'s `delta`: why the message stopped.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct StreamStop {
    pub stop_reason: &'static str,
    pub stop_sequence: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct StreamOutputTokens {
    pub output_tokens: u64,
}

// ------------------------------------------------- control answers

/// What a `success` control response carries: one shape per request.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum ControlAnswer {
    /// `initialize`.
    Initialize(Box<InitializeAnswer>),
    /// `mcp_status`.
    McpStatus(McpStatusAnswer),
    /// `get_context_usage`.
    ContextUsage(Box<ContextUsage>),
    /// `rewind_files`.
    Rewind(RewindAnswer),
    /// The requests answered with an empty object (`interrupt`,
    /// `set_permission_mode`, `set_model`, …).
    Done(Done),
    /// The answers of `cli::control`, each serialised from its own typed
    /// answer there.
    Other(Value),
    /// A bare acknowledgement: no `response` at all.
    Ack,
}

impl ControlAnswer {
    pub fn is_ack(&self) -> bool {
        matches!(self, ControlAnswer::Ack)
    }
}

impl From<Value> for ControlAnswer {
    fn from(v: Value) -> Self {
        match v {
            Value::Null => ControlAnswer::Ack,
            v => ControlAnswer::Other(v),
        }
    }
}

/// An empty answer: `{}`.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Done {}

impl From<Done> for ControlAnswer {
    fn from(d: Done) -> Self {
        ControlAnswer::Done(d)
    }
}

impl From<McpStatusAnswer> for ControlAnswer {
    fn from(a: McpStatusAnswer) -> Self {
        ControlAnswer::McpStatus(a)
    }
}

impl From<ContextUsage> for ControlAnswer {
    fn from(a: ContextUsage) -> Self {
        ControlAnswer::ContextUsage(Box::new(a))
    }
}

impl From<RewindAnswer> for ControlAnswer {
    fn from(a: RewindAnswer) -> Self {
        ControlAnswer::Rewind(a)
    }
}

impl From<InitializeAnswer> for ControlAnswer {
    fn from(a: InitializeAnswer) -> Self {
        ControlAnswer::Initialize(Box::new(a))
    }
}

/// `mcp_status`'s answer.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct McpStatusAnswer {
    #[serde(rename = "mcpServers")]
    pub mcp_servers: Vec<McpServerStatus>,
}

/// `rewind_files`' answer (the SDK's `RewindFilesResult`): a dry run's
/// preview, a rewind's links left alone, or why a dry run cannot rewind.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RewindAnswer {
    pub can_rewind: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files_changed: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insertions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped_links: Option<u64>,
}

/// `get_context_usage`'s answer: Claude Code's main figures.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContextUsage {
    pub categories: Vec<ContextCategory>,
    pub total_tokens: u64,
    pub max_tokens: u64,
    pub raw_max_tokens: u64,
    pub percentage: u64,
    pub model: String,
    pub auto_compact_threshold: u64,
    pub is_auto_compact_enabled: bool,
    /// Claude Code's breakdowns cadre does not count: always empty.
    pub memory_files: Vec<Value>,
    pub mcp_tools: Vec<Value>,
    pub agents: Vec<Value>,
    pub api_usage: Option<WireUsage>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ContextCategory {
    pub id: &'static str,
    pub name: &'static str,
    pub tokens: u64,
    pub color: &'static str,
    pub kind: &'static str,
}

/// `initialize`'s answer.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct InitializeAnswer {
    pub commands: Vec<CommandEntry>,
    pub output_style: String,
    pub available_output_styles: Vec<String>,
    pub models: Vec<ModelEntry>,
    pub agents: Vec<AgentEntry>,
    pub account: Account,
    pub pid: u32,
    pub claude_code_version: &'static str,
    pub current_permission_mode: String,
    /// No prompt has been read yet: `idle`.
    pub session_state: &'static str,
    /// None of Claude Code's optional protocol extensions.
    pub capabilities: Vec<String>,
    pub hook_on_failure_supported: bool,
    pub hooks_applied: bool,
}

/// A slash command `initialize` lists.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CommandEntry {
    pub name: String,
    pub description: String,
    pub argument_hint: String,
    /// Set on Claude Code's own (built-in) commands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub builtin: Option<bool>,
}

/// A model `initialize` offers.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ModelEntry {
    pub value: String,
    pub resolved_model: String,
    pub display_name: String,
    pub description: String,
    pub supports_effort: bool,
    pub supported_effort_levels: Vec<String>,
    pub supports_adaptive_thinking: bool,
    pub supports_fast_mode: bool,
    pub supports_auto_mode: bool,
    pub supports_thinking_off: bool,
}

/// An agent `initialize` lists.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct AgentEntry {
    pub name: String,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// `initialize`'s `account`: cadre has no login.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Account {
    pub token_source: &'static str,
    pub api_key_source: String,
    pub api_provider: &'static str,
}

// ------------------------------------------------- small shared parts

/// `system`/`task_updated`'s `patch`: the task ended.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TaskPatch {
    /// `completed`, `failed` or `stopped`.
    pub status: &'static str,
    /// Unix milliseconds.
    pub end_time: u64,
}

/// A prompt's origin as a result echoes it: only a host's
/// `{"kind": "human"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct HumanOrigin {
    pub kind: &'static str,
}

/// A permission update a `can_use_tool` request offers the client to
/// remember (Claude Code's `PermissionUpdate`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum PermissionSuggestion {
    AddRules {
        rules: Vec<RuleValue>,
        behavior: &'static str,
        destination: &'static str,
    },
    SetMode {
        mode: &'static str,
        destination: &'static str,
    },
    AddDirectories {
        directories: Vec<String>,
        destination: &'static str,
    },
}

/// A rule as Claude Code's permission updates name it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RuleValue {
    pub tool_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_content: Option<String>,
}

/// `transcript_mirror` (`--session-mirror`): transcript lines written to
/// `filePath`, each as it is on disk.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TranscriptMirror {
    #[serde(rename = "filePath")]
    pub file_path: String,
    #[cfg_attr(test, schemars(with = "Vec<Value>"))]
    pub entries: Vec<Box<serde_json::value::RawValue>>,
}

// ----------------------------------------------------------------- input

/// One line of stream-json input.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Input {
    User(UserIn),
    ControlRequest(ControlRequestIn),
    ControlResponse(ControlResponseIn),
    ControlCancelRequest { request_id: String },
    KeepAlive,
}

#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct UserIn {
    pub message: UserMessageIn,
    #[serde(default)]
    pub parent_tool_use_id: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
    /// `true` (the SDKs' `verbatimPrompts`): deliver the prompt as written,
    /// with no slash-command dispatch and no `@path` reads.
    #[serde(default)]
    pub client_composed: bool,
    /// The client's id for this message, echoed by `--replay-user-messages`.
    #[serde(default)]
    pub uuid: Option<String>,
    /// Who wrote the prompt (the SDKs' `origin`): echoed with the replay,
    /// and a host's `{"kind": "human"}` on the prompt's `result`, as Claude
    /// Code does.
    #[serde(default)]
    pub origin: Option<Value>,
}

impl UserIn {
    /// The origin to echo on the result: only a host's `{"kind": "human"}`
    /// (Claude Code 2.1.330 drops other kinds and any other fields).
    pub fn echoed_origin(&self) -> Option<HumanOrigin> {
        let human = self.origin.as_ref()?.get("kind")?.as_str()? == "human";
        human.then_some(HumanOrigin { kind: "human" })
    }
}

#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct UserMessageIn {
    #[serde(default)]
    pub role: Option<String>,
    /// A string, or content blocks in the Messages API shape.
    pub content: Value,
}

#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ControlRequestIn {
    pub request_id: String,
    pub request: FromClient,
}

/// A request from the client.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "subtype", rename_all = "snake_case")]
pub enum FromClient {
    Initialize {
        #[serde(default)]
        hooks: Option<BTreeMap<String, Vec<HookMatcherIn>>>,
        #[serde(default)]
        agents: Option<serde_json::Map<String, Value>>,
        /// Forward sub-agents' text and thinking blocks too (Claude Code
        /// sends only their tool calls and results by default).
        #[serde(default, rename = "forwardSubagentText")]
        forward_subagent_text: Option<bool>,
        /// Everything else the client asked for (named on stderr, since
        /// cadre does not apply it).
        #[serde(flatten)]
        rest: serde_json::Map<String, Value>,
    },
    Interrupt,
    SetPermissionMode {
        mode: String,
    },
    SetModel {
        #[serde(default)]
        model: Option<String>,
    },
    McpStatus,
    /// The thinking budget from the next prompt on (`null`: the
    /// configured one again; 0: off).
    SetMaxThinkingTokens {
        #[serde(default)]
        max_thinking_tokens: Option<u32>,
    },
    /// Stop a background task (a sub-agent) by its id; an unknown or
    /// finished one is no error, as in Claude Code.
    StopTask {
        task_id: String,
    },
    /// How full the main conversation's context window is.
    GetContextUsage,
    /// Puts the files the tools changed back as they were at a user
    /// message (`enable_file_checkpointing`).
    RewindFiles {
        #[serde(default)]
        user_message_id: Option<String>,
        /// Only ask whether a rewind could be done.
        #[serde(default)]
        dry_run: Option<bool>,
    },
    /// Anything else: answered with the answers of `control.rs` (settings,
    /// MCP servers, listings, usage), or with Claude Code's
    /// `unsupported_request` error naming it.
    #[serde(other)]
    Unsupported,
}

/// One hook matcher registered by the client.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct HookMatcherIn {
    #[serde(default)]
    pub matcher: Option<String>,
    #[serde(default, rename = "hookCallbackIds")]
    pub hook_callback_ids: Vec<String>,
    #[serde(default)]
    pub timeout: Option<f64>,
    /// `block` (or any value but `continue`): a callback that fails or
    /// does not answer blocks, as a hook exiting with 2 would.
    #[serde(default, rename = "onFailure")]
    pub on_failure: Option<String>,
}

/// The client's answer to one of cadre's requests.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ControlResponseIn {
    pub response: ResponseIn,
}

#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "subtype", rename_all = "snake_case")]
pub enum ResponseIn {
    Success {
        request_id: String,
        /// Read as the request it answers expects ([`read_answer`]).
        #[serde(default)]
        #[cfg_attr(test, schemars(with = "Option<ClientAnswerIn>"))]
        response: Value,
    },
    Error {
        request_id: String,
        #[serde(default)]
        error: String,
    },
}

impl ResponseIn {
    pub fn request_id(&self) -> &str {
        match self {
            ResponseIn::Success { request_id, .. } | ResponseIn::Error { request_id, .. } => {
                request_id
            }
        }
    }
}

/// The client's answer to a `can_use_tool` request (Claude Code's
/// `PermissionResult`), as it must be written. Anything else is not an
/// answer: the call is denied, with why (as Claude Code does).
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "behavior", rename_all = "snake_case")]
pub enum PermissionResultIn {
    Allow {
        /// The input to run the call with instead.
        #[serde(default, rename = "updatedInput")]
        updated_input: Option<Map<String, Value>>,
        /// Permission updates to keep (each read on its own: one that
        /// cannot be read is named on stderr and skipped).
        #[serde(default, rename = "updatedPermissions")]
        #[cfg_attr(test, schemars(with = "Option<Vec<PermissionUpdateIn>>"))]
        updated_permissions: Option<Vec<Value>>,
        #[serde(default, rename = "toolUseID")]
        tool_use_id: Option<String>,
    },
    Deny {
        /// Why, for the model.
        #[serde(default)]
        message: Option<String>,
        /// Stop the prompt's run too.
        #[serde(default)]
        interrupt: Option<bool>,
        #[serde(default, rename = "toolUseID")]
        tool_use_id: Option<String>,
    },
}

/// One permission update of an allow (Claude Code's `PermissionUpdate`),
/// for the schema; [`permission_update`] reads it.
#[cfg(test)]
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
#[allow(dead_code)]
pub enum PermissionUpdateIn {
    AddRules {
        rules: Vec<RuleIn>,
        behavior: String,
        destination: Option<String>,
    },
    ReplaceRules {
        rules: Vec<RuleIn>,
        behavior: String,
        destination: Option<String>,
    },
    RemoveRules {
        rules: Vec<RuleIn>,
        behavior: String,
        destination: Option<String>,
    },
    SetMode {
        mode: String,
        destination: Option<String>,
    },
    AddDirectories {
        directories: Vec<String>,
        destination: Option<String>,
    },
    RemoveDirectories {
        directories: Vec<String>,
        destination: Option<String>,
    },
}

#[cfg(test)]
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
pub struct RuleIn {
    tool_name: String,
    rule_content: Option<String>,
}

/// The client's answer to an `elicitation` request.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ElicitationResultIn {
    Accept {
        /// The form's values.
        #[serde(default)]
        content: Option<Map<String, Value>>,
    },
    Decline,
    Cancel,
}

/// The client's answer to a `hook_callback` request: a hook's JSON
/// output (Claude Code's `HookJSONOutput`), the fields cadre reads typed.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct HookOutputIn {
    #[serde(default, rename = "continue")]
    pub keep_going: Option<bool>,
    #[serde(default)]
    pub stop_reason: Option<String>,
    #[serde(default)]
    pub suppress_output: Option<bool>,
    #[serde(default)]
    pub system_message: Option<String>,
    /// `approve` or `block` (the older top-level decision).
    #[serde(default)]
    pub decision: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    /// The event's own fields (`hookEventName`, `permissionDecision`,
    /// `additionalContext`, …).
    #[serde(default)]
    pub hook_specific_output: Option<Map<String, Value>>,
    /// `async: true`: the callback goes on in the background.
    #[serde(default, rename = "async")]
    pub is_async: Option<bool>,
    #[serde(default)]
    pub async_timeout: Option<f64>,
}

/// The client's answer to an `mcp_message` request.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct McpAnswerIn {
    /// The JSON-RPC message the client's server answered.
    pub mcp_response: Value,
}

/// The answers a client sends back, whichever request they answer (the
/// schema of `control_response.response.response`; each is read as the
/// request it answers expects).
#[cfg(test)]
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum ClientAnswerIn {
    Permission(PermissionResultIn),
    Elicitation(ElicitationResultIn),
    Mcp(McpAnswerIn),
    Hook(HookOutputIn),
}

/// Reads the client's answer to a request of `kind` as `T`: a clear
/// error naming what does not fit.
pub fn read_answer<T: serde::de::DeserializeOwned>(kind: &str, v: Value) -> Result<T, String> {
    serde_json::from_value(v).map_err(|e| format!("the client's {kind} answer does not fit: {e}"))
}

/// A `can_use_tool` answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PermissionAnswer {
    pub allow: bool,
    /// A denial's message.
    pub message: Option<String>,
    /// The answer did not fit the protocol: why (the call is denied).
    pub invalid: Option<String>,
    /// A denial that also stops the prompt's run (`interrupt: true`).
    pub interrupt: bool,
    /// `updatedInput` of an allow.
    pub updated_input: Option<Value>,
    /// `updatedPermissions` of an allow, each with where it is kept.
    pub updates: Vec<(Destination, PermissionUpdate)>,
    /// Updates that could not be read, in words (for stderr).
    pub problems: Vec<String>,
}

/// Reads a `can_use_tool` answer (Claude Code's `PermissionResult`): an
/// answer that does not fit denies the call, saying why.
pub fn permission_answer(response: &Value) -> PermissionAnswer {
    let read = read_answer::<PermissionResultIn>("can_use_tool", response.clone());
    let (updated_input, updates) = match read {
        Err(why) => {
            return PermissionAnswer {
                invalid: Some(why),
                ..PermissionAnswer::default()
            };
        }
        Ok(PermissionResultIn::Deny {
            message, interrupt, ..
        }) => {
            return PermissionAnswer {
                message,
                interrupt: interrupt == Some(true),
                ..PermissionAnswer::default()
            };
        }
        Ok(PermissionResultIn::Allow {
            updated_input,
            updated_permissions,
            ..
        }) => (updated_input, updated_permissions.unwrap_or_default()),
    };
    let mut answer = PermissionAnswer {
        allow: true,
        updated_input: updated_input.map(Value::Object),
        ..PermissionAnswer::default()
    };
    for (i, u) in updates.iter().enumerate() {
        match permission_update(u) {
            Ok(d) => answer.updates.push(d),
            Err(e) => answer
                .problems
                .push(format!("updatedPermissions[{i}]: {e}")),
        }
    }
    answer
}

/// What a `can_use_tool` request offers the client to remember, as
/// Claude Code's permission updates: edits → `acceptEdits` for the session;
/// a shell command → allow its first word (`Bash(npm:*)`) in the local
/// settings (nothing when the first word is not a plain name); a host a
/// sandboxed command wants → allow the domain (`WebFetch(domain:HOST)`,
/// which the sandbox's network reads) in the local settings; any other
/// tool → allow it in the local settings.
pub fn permission_suggestions(tool: &str, input: &Value) -> Vec<PermissionSuggestion> {
    let allow = |tool_name: &str, rule_content: Option<String>| PermissionSuggestion::AddRules {
        rules: vec![RuleValue {
            tool_name: tool_name.to_string(),
            rule_content,
        }],
        behavior: "allow",
        destination: "localSettings",
    };
    match tool {
        "Edit" | "Write" | "MultiEdit" | "NotebookEdit" => vec![PermissionSuggestion::SetMode {
            mode: "acceptEdits",
            destination: "session",
        }],
        "Bash" => {
            let first = input
                .get("command")
                .and_then(Value::as_str)
                .and_then(|c| c.split_whitespace().next())
                .filter(|w| {
                    w.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
                });
            first
                .map(|w| allow("Bash", Some(format!("{w}:*"))))
                .into_iter()
                .collect()
        }
        crate::tools::sandbox::proxy::SANDBOX_NETWORK_ACCESS => input
            .get("host")
            .and_then(Value::as_str)
            .map(|host| allow("WebFetch", Some(format!("domain:{host}"))))
            .into_iter()
            .collect(),
        _ => vec![allow(tool, None)],
    }
}

/// What a `can_use_tool` request asks about one call.
pub struct PermissionAsk {
    pub tool: String,
    pub input: Value,
    pub tool_use_id: String,
    /// `main`, or the sub-agent's id.
    pub agent_id: String,
    /// Why the rules ask.
    pub reason: String,
    /// The question for a person.
    pub question: String,
    /// The folder the call is judged from.
    pub cwd: std::path::PathBuf,
}

/// Shell commands whose path arguments they change.
const CHANGING_COMMANDS: &[&str] = &[
    "rm", "rmdir", "mv", "cp", "mkdir", "touch", "chmod", "chown", "ln", "truncate",
];

/// The file or folder a call would change, when it names one: a file
/// tool's path; for a shell command that changes files (`rm`, `mv`, …) its
/// first path argument. Relative to `cwd`.
pub fn blocked_path(tool: &str, input: &Value, cwd: &std::path::Path) -> Option<String> {
    let named = match tool {
        "Edit" | "Write" | "MultiEdit" | "Read" => input.get("file_path")?.as_str()?,
        "NotebookEdit" => input.get("notebook_path")?.as_str()?,
        "Bash" => {
            let command = input.get("command")?.as_str()?;
            let mut words = command.split_whitespace();
            let first = words.next()?;
            if !CHANGING_COMMANDS.contains(&first)
                || command.contains(['|', ';', '&', '$', '`', '>', '<'])
            {
                return None;
            }
            words.find(|w| !w.starts_with('-'))?
        }
        _ => return None,
    };
    Some(cwd.join(named).display().to_string())
}

/// The `can_use_tool` request for a call: Claude Code's fields, the
/// suggestions to remember the answer, and (when the call names a path)
/// the suggestion to add its folder to the session's.
pub fn can_use_tool(ask: PermissionAsk) -> ToClient {
    let blocked = blocked_path(&ask.tool, &ask.input, &ask.cwd);
    let mut suggestions = permission_suggestions(&ask.tool, &ask.input);
    if let Some(folder) = blocked
        .as_deref()
        .and_then(|p| std::path::Path::new(p).parent())
    {
        suggestions.push(PermissionSuggestion::AddDirectories {
            directories: vec![folder.display().to_string()],
            destination: "session",
        });
    }
    let text = |k: &str| ask.input.get(k).and_then(Value::as_str).map(str::to_string);
    let description = match ask.tool.as_str() {
        "Bash" => text("description").or_else(|| text("command")),
        "Edit" | "Write" | "MultiEdit" | "Read" => text("file_path"),
        _ => None,
    }
    .unwrap_or(ask.question);
    ToClient::CanUseTool {
        display_name: ask.tool.clone(),
        tool_name: ask.tool,
        input: ask.input,
        description,
        blocked_path: blocked,
        permission_suggestions: suggestions,
        tool_use_id: ask.tool_use_id,
        agent_id: (ask.agent_id != "main").then_some(ask.agent_id),
        decision_reason: ask.reason,
    }
}

/// One entry of `updatedPermissions`.
fn permission_update(u: &Value) -> Result<(Destination, PermissionUpdate), String> {
    use crate::runtime::grants::Behavior;
    let field = |k: &str| u.get(k).and_then(Value::as_str);
    let destination = match field("destination") {
        None | Some("session" | "cliArg") => Destination::Session,
        Some("localSettings") => Destination::LocalSettings,
        Some("projectSettings") => Destination::ProjectSettings,
        Some("userSettings") => Destination::UserSettings,
        Some(other) => return Err(format!("unknown destination {other:?}")),
    };
    let behavior = || match field("behavior") {
        Some("allow") => Ok(Behavior::Allow),
        Some("ask") => Ok(Behavior::Ask),
        Some("deny") => Ok(Behavior::Deny),
        other => Err(format!(
            "behavior: expected allow, ask or deny, found {other:?}"
        )),
    };
    let rules = || -> Result<Vec<String>, String> {
        let list = u
            .get("rules")
            .and_then(Value::as_array)
            .ok_or("rules: expected a list")?;
        list.iter()
            .map(|r| {
                let tool = r
                    .get("toolName")
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                    .ok_or("rules: each needs a toolName")?;
                Ok(match r.get("ruleContent").and_then(Value::as_str) {
                    Some(c) if !c.is_empty() => format!("{tool}({c})"),
                    _ => tool.to_string(),
                })
            })
            .collect()
    };
    let dirs = || -> Result<Vec<std::path::PathBuf>, String> {
        u.get("directories")
            .and_then(Value::as_array)
            .ok_or("directories: expected a list")?
            .iter()
            .map(|d| {
                d.as_str()
                    .map(std::path::PathBuf::from)
                    .ok_or_else(|| "directories: expected strings".to_string())
            })
            .collect()
    };
    let update = match field("type") {
        Some("addRules") => PermissionUpdate::AddRules {
            behavior: behavior()?,
            rules: rules()?,
        },
        Some("replaceRules") => PermissionUpdate::ReplaceRules {
            behavior: behavior()?,
            rules: rules()?,
        },
        Some("removeRules") => PermissionUpdate::RemoveRules {
            behavior: behavior()?,
            rules: rules()?,
        },
        Some("setMode") => {
            let m = field("mode").ok_or("setMode: no mode")?;
            PermissionUpdate::SetMode(parse_mode(m)?)
        }
        Some("addDirectories") => PermissionUpdate::AddDirectories(dirs()?),
        Some("removeDirectories") => PermissionUpdate::RemoveDirectories(dirs()?),
        other => return Err(format!("unknown type {other:?}")),
    };
    Ok((destination, update))
}

/// The client's answer to an `elicitation` request: `accept` (with the
/// form's values), `decline` or `cancel`; an answer that does not fit is
/// an error (the caller declines, saying why).
pub fn elicitation_answer(response: &Value) -> Result<crate::mcp::ElicitAnswer, String> {
    use crate::mcp::{ElicitAction, ElicitAnswer};
    Ok(
        match read_answer::<ElicitationResultIn>("elicitation", response.clone())? {
            ElicitationResultIn::Accept { content } => ElicitAnswer {
                action: ElicitAction::Accept,
                content,
            },
            ElicitationResultIn::Decline => ElicitAnswer {
                action: ElicitAction::Decline,
                content: None,
            },
            ElicitationResultIn::Cancel => ElicitAnswer {
                action: ElicitAction::Cancel,
                content: None,
            },
        },
    )
}

/// A hook callback's answer: `Some(reason)` when it blocks the tool call
/// (`decision: block`, `permissionDecision: deny`, or `continue: false`).
pub fn hook_block(response: &Value) -> Option<String> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    if response.get("decision").and_then(Value::as_str) == Some("block") {
        return Some(text(response.get("reason")).unwrap_or_else(|| "blocked by a hook".into()));
    }
    if let Some(out) = response.get("hookSpecificOutput")
        && out.get("permissionDecision").and_then(Value::as_str) == Some("deny")
    {
        return Some(
            text(out.get("permissionDecisionReason")).unwrap_or_else(|| "denied by a hook".into()),
        );
    }
    if response.get("continue").and_then(Value::as_bool) == Some(false) {
        return Some(
            text(response.get("stopReason")).unwrap_or_else(|| "stopped by a hook".into()),
        );
    }
    None
}

/// Whether a hook matcher selects a tool: absent, empty or `*` match every
/// tool; otherwise a regular expression over the whole name (`Edit|Write`).
pub fn matcher_selects(matcher: Option<&str>, tool: &str) -> bool {
    match matcher.map(str::trim) {
        None | Some("" | "*") => true,
        Some(m) => match regex::Regex::new(&format!("^(?:{m})$")) {
            Ok(re) => re.is_match(tool),
            Err(_) => m == tool,
        },
    }
}

/// A permission mode as the flags and the protocol name it (`bubble`, a
/// fork's own mode, is not one a client may set).
pub fn parse_mode(s: &str) -> Result<PermissionMode, String> {
    match s.parse::<PermissionMode>()? {
        PermissionMode::Bubble => Err("`bubble` is internal to forks".into()),
        m => Ok(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn result_serialises_in_claude_codes_shape() {
        let r = Output::Result(ResultOut {
            subtype: ResultSubtype::ErrorMaxTurns,
            is_error: true,
            duration_ms: 12,
            duration_api_ms: 7,
            num_turns: 2,
            result: String::new(),
            session_id: "s".into(),
            total_cost_usd: 0.5,
            usage: Box::default(),
            model_usage: BTreeMap::new(),
            model_usage_since_last_result: None,
            permission_denials: vec![],
            result_index: 0,
            queued_turn_count: 0,
            subagent_stats: Box::default(),
            safety_stops: 0,
            begun_message_ids: None,
            stop_reason: None,
            terminal_reason: Some("max_turns"),
            api_error_status: None,
            api_error_type: None,
            errors: vec!["limit".into()],
            structured_output: None,
            local_command: None,
            origin: None,
            uuid: "u".into(),
        });
        insta::assert_json_snapshot!(r, @r#"
        {
          "type": "result",
          "subtype": "error_max_turns",
          "is_error": true,
          "duration_ms": 12,
          "duration_api_ms": 7,
          "num_turns": 2,
          "result": "",
          "session_id": "s",
          "total_cost_usd": 0.5,
          "usage": {
            "input_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 0,
            "output_tokens_details": {
              "thinking_tokens": 0
            },
            "server_tool_use": {
              "web_search_requests": 0,
              "web_fetch_requests": 0
            },
            "service_tier": "standard",
            "cache_creation": {
              "ephemeral_1h_input_tokens": 0,
              "ephemeral_5m_input_tokens": 0
            },
            "inference_geo": ""
          },
          "modelUsage": {},
          "permission_denials": [],
          "result_index": 0,
          "queued_turn_count": 0,
          "subagent_stats": {
            "spawned": 0,
            "requested": {
              "background": 0,
              "foreground": 0,
              "unset": 0
            },
            "started_in_background": 0,
            "max_depth": 0,
            "spawned_by_subagents": 0,
            "completed": 0,
            "failed": 0,
            "killed": {
              "parent": 0,
              "user": 0,
              "system": 0
            },
            "refused": {
              "depth_limit": 0,
              "concurrency_limit": 0,
              "budget": 0
            },
            "by_type": {}
          },
          "safety_stops": 0,
          "stop_reason": null,
          "terminal_reason": "max_turns",
          "api_error_status": null,
          "errors": [
            "limit"
          ],
          "uuid": "u"
        }
        "#);
    }

    #[test]
    fn control_messages_serialise_as_the_sdk_reads_them() {
        let req = Output::ControlRequest(ControlRequestOut {
            request_id: "r1".into(),
            request: ToClient::CanUseTool {
                tool_name: "Bash".into(),
                display_name: "Bash".into(),
                input: json!({"command": "ls"}),
                description: "ls".into(),
                blocked_path: None,
                permission_suggestions: vec![],
                tool_use_id: "t1".into(),
                agent_id: None,
                decision_reason: "ask rule".into(),
            },
        });
        insta::assert_json_snapshot!(req, @r#"
        {
          "type": "control_request",
          "request_id": "r1",
          "request": {
            "subtype": "can_use_tool",
            "tool_name": "Bash",
            "display_name": "Bash",
            "input": {
              "command": "ls"
            },
            "description": "ls",
            "permission_suggestions": [],
            "tool_use_id": "t1",
            "decision_reason": "ask rule"
          }
        }
        "#);
        let ok = Output::ControlResponse(ControlResponseOut::success("r2", Done {}));
        assert_eq!(
            serde_json::to_value(ok).unwrap(),
            json!({"type": "control_response", "response": {"subtype": "success", "request_id": "r2", "response": {}}})
        );
    }

    #[test]
    fn input_lines_parse() {
        let user: Input = serde_json::from_value(json!({
            "type": "user", "session_id": "",
            "message": {"role": "user", "content": "hi"}, "parent_tool_use_id": null
        }))
        .unwrap();
        assert!(matches!(user, Input::User(u) if u.message.content == json!("hi")));
        let init: Input = serde_json::from_value(json!({
            "type": "control_request", "request_id": "req_1",
            "request": {"subtype": "initialize", "hooks": {"PreToolUse": [
                {"matcher": "Bash", "hookCallbackIds": ["hook_0"]}]},
                "agents": {"x": {"description": "d", "prompt": "p"}}}
        }))
        .unwrap();
        let Input::ControlRequest(ControlRequestIn {
            request: FromClient::Initialize { hooks, agents, .. },
            ..
        }) = init
        else {
            panic!("not initialize")
        };
        assert_eq!(
            hooks.unwrap()["PreToolUse"][0].hook_callback_ids,
            ["hook_0"]
        );
        assert!(agents.unwrap().contains_key("x"));
        let other: Input = serde_json::from_value(json!({
            "type": "control_request", "request_id": "r", "request": {"subtype": "bogus_thing"}
        }))
        .unwrap();
        assert!(matches!(
            other,
            Input::ControlRequest(ControlRequestIn {
                request: FromClient::Unsupported,
                ..
            })
        ));
        let resp: Input = serde_json::from_value(json!({
            "type": "control_response",
            "response": {"subtype": "success", "request_id": "c1", "response": {"behavior": "deny", "message": "no"}}
        }))
        .unwrap();
        let Input::ControlResponse(r) = resp else {
            panic!("not a response")
        };
        assert_eq!(r.response.request_id(), "c1");
    }

    #[test]
    fn hook_answers_and_matchers() {
        assert_eq!(
            hook_block(
                &json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "deny", "permissionDecisionReason": "no rm"}})
            ),
            Some("no rm".into())
        );
        assert_eq!(
            hook_block(&json!({"decision": "block", "reason": "r"})),
            Some("r".into())
        );
        assert_eq!(hook_block(&json!({"continue": true})), None);
        assert_eq!(hook_block(&json!({})), None);
        assert!(matcher_selects(None, "Bash"));
        assert!(matcher_selects(Some("Edit|Write"), "Write"));
        assert!(!matcher_selects(Some("Edit|Write"), "WriteX"));
        assert!(!matcher_selects(Some("Bash"), "Read"));
        assert_eq!(
            permission_answer(&json!({"behavior": "deny", "message": "m"})),
            PermissionAnswer {
                allow: false,
                message: Some("m".into()),
                ..PermissionAnswer::default()
            }
        );
    }

    /// An answer that does not fit Claude Code's `PermissionResult` never
    /// allows: it is read as invalid, with why (the call is then denied,
    /// as Claude Code denies it).
    #[test]
    fn a_malformed_permission_answer_never_allows() {
        for bad in [
            json!({"behavior": "allow", "updatedInput": "rm -rf /"}),
            json!({"message": "no behavior"}),
            json!({"behavior": "perhaps"}),
            json!({"behavior": "deny", "message": 5}),
            json!("allow"),
            json!(null),
        ] {
            let a = permission_answer(&bad);
            assert!(!a.allow, "{bad}");
            let why = a.invalid.unwrap_or_else(|| panic!("{bad} read as valid"));
            assert!(
                why.starts_with("the client's can_use_tool answer does not fit"),
                "{why}"
            );
        }
        let allow = permission_answer(&json!({"behavior": "allow", "updatedInput": {"a": 1}}));
        assert!(allow.allow && allow.invalid.is_none());
        assert_eq!(allow.updated_input, Some(json!({"a": 1})));
        let stop =
            permission_answer(&json!({"behavior": "deny", "message": "m", "interrupt": true}));
        assert!(!stop.allow && stop.interrupt && stop.invalid.is_none());
        assert!(elicitation_answer(&json!({"action": "accept", "content": 3})).is_err());
        assert!(elicitation_answer(&json!({"action": "maybe"})).is_err());
        assert_eq!(
            elicitation_answer(&json!({"action": "cancel"})).map(|a| a.action),
            Ok(crate::mcp::ElicitAction::Cancel)
        );
    }

    #[test]
    fn suggestions_read_back_as_updates() {
        let s = permission_suggestions("Bash", &json!({"command": "npm test --watch"}));
        let a = permission_answer(&json!({"behavior": "allow", "updatedPermissions": s}));
        assert_eq!(
            a.updates,
            vec![(
                Destination::LocalSettings,
                PermissionUpdate::AddRules {
                    behavior: crate::runtime::grants::Behavior::Allow,
                    rules: vec!["Bash(npm:*)".into()]
                }
            )]
        );
        assert!(permission_suggestions("Bash", &json!({"command": "$(evil) x"})).is_empty());
        assert_eq!(
            permission_suggestions("Write", &json!({})),
            [PermissionSuggestion::SetMode {
                mode: "acceptEdits",
                destination: "session"
            }]
        );
    }

    #[test]
    fn permission_updates_are_read_as_the_sdks_send_them() {
        use crate::runtime::grants::Behavior;
        let a = permission_answer(&json!({
            "behavior": "allow",
            "updatedInput": {"command": "ls"},
            "updatedPermissions": [
                {"type": "addRules", "destination": "session", "behavior": "allow",
                 "rules": [{"toolName": "Bash", "ruleContent": "ls:*"}, {"toolName": "Read"}]},
                {"type": "setMode", "destination": "localSettings", "mode": "acceptEdits"},
                {"type": "addDirectories", "directories": ["/srv"]},
                {"type": "addRules", "behavior": "maybe", "rules": []},
                {"type": "teleport"}
            ]
        }));
        assert!(a.allow);
        assert_eq!(a.updated_input, Some(json!({"command": "ls"})));
        assert_eq!(
            a.updates,
            vec![
                (
                    Destination::Session,
                    PermissionUpdate::AddRules {
                        behavior: Behavior::Allow,
                        rules: vec!["Bash(ls:*)".into(), "Read".into()]
                    }
                ),
                (
                    Destination::LocalSettings,
                    PermissionUpdate::SetMode(crate::config::PermissionMode::AcceptEdits)
                ),
                (
                    Destination::Session,
                    PermissionUpdate::AddDirectories(vec!["/srv".into()])
                ),
            ]
        );
        assert_eq!(a.problems.len(), 2, "{:?}", a.problems);
        assert!(a.problems[0].starts_with("updatedPermissions[3]: behavior"));
    }

    #[test]
    fn version_line_starts_with_a_version_the_sdks_accept() {
        let line = version_line();
        let first = line.split_whitespace().next().unwrap();
        let parts: Vec<u32> = first.split('.').map(|p| p.parse().unwrap()).collect();
        assert!(parts >= vec![2, 0, 0], "{line}");
        assert!(line.contains(CADRE_VERSION));
        assert_eq!(new_uuid().len(), 36);
    }

    /// The JSON Schema of a wire type as `docs/schemas/` holds it: what
    /// schemars derives (as serde writes or reads the type), with two changes that make it say what cadre
    /// accepts and writes. Every `oneOf` is an `anyOf`: a line fits when
    /// it fits one of the shapes, and some overlap (a user message and its
    /// replay; a control response and `initialize`'s, which has one field
    /// more). The catch-all request (`#[serde(other)]`) takes any subtype.
    fn schema_of<T: schemars::JsonSchema>(written: bool) -> Value {
        fn walk(v: &mut Value) {
            match v {
                Value::Object(map) => {
                    if let Some(one) = map.remove("oneOf") {
                        map.insert("anyOf".into(), one);
                    }
                    let catch_all = map
                        .get("description")
                        .and_then(Value::as_str)
                        .is_some_and(|d| d.starts_with("Anything else: answered with"));
                    if catch_all
                        && let Some(subtype) =
                            map.get_mut("properties").and_then(|p| p.get_mut("subtype"))
                    {
                        *subtype = json!({"type": "string"});
                    }
                    map.values_mut().for_each(walk);
                }
                Value::Array(items) => items.iter_mut().for_each(walk),
                _ => {}
            }
        }
        // What cadre writes is described as serde writes it (a field
        // skipped when empty is optional); what it reads, as serde reads it.
        let mut settings = schemars::generate::SchemaSettings::draft2020_12();
        if written {
            settings = settings.for_serialize();
        }
        let schema = settings.into_generator().into_root_schema_for::<T>();
        let mut schema = serde_json::to_value(schema).unwrap();
        walk(&mut schema);
        schema
    }

    /// The JSON Schemas of what cadre writes on stdout and reads on stdin
    /// in headless mode, committed in `docs/schemas/`, are the ones the wire
    /// types give (`CADRE_WRITE_SCHEMAS=1` writes them).
    #[test]
    fn the_committed_wire_schemas_are_what_the_types_give() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schemas");
        let schemas = [
            ("stream-json-output.schema.json", schema_of::<Output>(true)),
            ("stream-json-input.schema.json", schema_of::<Input>(false)),
        ];
        let write = std::env::var_os("CADRE_WRITE_SCHEMAS").is_some();
        let mut stale = Vec::new();
        for (name, schema) in schemas {
            let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
            let path = dir.join(name);
            if write {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &text).unwrap();
            } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                stale.push(format!("docs/schemas/{name}"));
            }
        }
        assert!(
            stale.is_empty(),
            "{} differ from the wire types of src/cli/wire.rs; regenerate them with\n  \
             CADRE_WRITE_SCHEMAS=1 cargo nextest run --lib -E 'test(/committed_wire_schemas/)'\n\
             and commit them (docs/schemas/README.md)",
            stale.join(" and ")
        );
    }
}
