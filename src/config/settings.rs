//! The resolved settings: what the engine reads after every layer merged.
//!
//! Field defaults live here (`Default` impls) and in the embedded defaults
//! file (`config/defaults.toml`, flag declarations and model aliases). The
//! struct mirrors the file; `load` does the layering.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::flags::{FlagDecl, FlagValue};
use super::hooks::HookSettings;
use super::mode::{Mode, PermissionMode};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Unknown keys are errors instead of warnings.
    pub strict: bool,
    /// `normal` or `coordinator`.
    pub mode: Mode,
    /// What each mode changes, by mode name (`[modes.coordinator]`).
    pub modes: BTreeMap<String, ModeSettings>,
    pub provider: ProviderSettings,
    /// Model aliases: name → full model id.
    pub models: BTreeMap<String, String>,
    pub agents: AgentSettings,
    /// Flag values: name → on/off.
    pub features: BTreeMap<String, FlagValue>,
    /// Flag declarations: name → description, default, gates.
    pub flags: BTreeMap<String, FlagDecl>,
    pub permissions: PermissionSettings,
    pub reload: ReloadSettings,
    pub transcripts: TranscriptSettings,
    /// Summarising a long conversation to stay within the model's window.
    pub compact: CompactSettings,
    /// Commands run at points of a session's life (SPEC §12).
    pub hooks: HookSettings,
    /// MCP servers by name (see `docs/mcp.md`); entries here win over a
    /// project's `.mcp.json` on name clashes.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// How sessions use the MCP servers.
    pub mcp: McpSettings,
    /// Variables given to the commands cadre starts (Bash, hooks, MCP
    /// servers), on top of cadre's own environment (Claude Code's `env`).
    pub env: BTreeMap<String, String>,
    /// Provider keys that children receive anyway. By default Bash, hooks
    /// and MCP servers get the environment without `ANTHROPIC_API_KEY`,
    /// `OPENAI_API_KEY` and `provider.api_key_env`.
    pub pass_env: Vec<String>,
    /// Start every server of a project's `.mcp.json` (Claude Code's
    /// `enableAllProjectMcpServers`).
    pub enable_all_project_mcp_servers: bool,
    /// When not empty (and not `enable_all_project_mcp_servers`), only these
    /// `.mcp.json` servers start (`enabledMcpjsonServers`).
    pub enabled_mcpjson_servers: Vec<String>,
    /// `.mcp.json` servers that never start (`disabledMcpjsonServers`).
    pub disabled_mcpjson_servers: Vec<String>,
    /// The Bash tool's timeouts.
    pub bash: BashSettings,
    /// The WebFetch tool's limits and its small model.
    pub web_fetch: WebFetchSettings,
    /// Where the WebSearch tool searches.
    pub web_search: WebSearchSettings,
    /// The reasoning-effort levels each model accepts, by model id or id
    /// prefix (the longest wins); a model no key matches gets no effort.
    pub effort_levels: BTreeMap<String, Vec<String>>,
    /// Prices by model id (or id prefix), for `total_cost_usd` and
    /// `--max-budget-usd`.
    pub prices: BTreeMap<String, ModelPrice>,
    /// Where background sub-agents run: this process, or a worker fleet
    /// on NATS JetStream (`docs/distributed.md`).
    pub distributed: DistributedSettings,
    /// A command whose first line of output is chat's status line (Claude
    /// Code's `statusLine` of type `command`); see docs/chat.md.
    pub status_line: Option<StatusLineSetting>,
    /// The output style of the main session (Claude Code's `outputStyle`):
    /// a built-in style's name, a style file's, or `default`. See
    /// docs/output-styles.md.
    pub output_style: Option<String>,
    /// The operating-system sandbox of Bash commands and command hooks
    /// (Claude Code's `sandbox`; docs/sandbox.md).
    pub sandbox: super::sandbox::SandboxSettings,
    /// Claude Code's plugins: which are enabled, the marketplaces they
    /// come from, and the folders `--plugin-dir` names (docs/plugins.md).
    pub plugins: PluginSettings,
    /// No hook of the settings or of a plugin runs, and chat shows no
    /// status line (Claude Code's `disableAllHooks`).
    pub disable_all_hooks: bool,
    /// The highest reasoning effort any request asks for (Claude Code's
    /// `maxEffortLevel`): a higher one is lowered to it.
    pub max_effort_level: Option<String>,
    /// When not empty, the only models a session may use (Claude Code's
    /// `availableModels`): ids, aliases, or a family word such as `sonnet`.
    pub available_models: Vec<String>,
    /// Models no session may use (Claude Code's `deniedModels`), written
    /// as `available_models` is.
    pub denied_models: Vec<String>,
    /// `!` lines of skills and commands are never run (Claude Code's
    /// `disableSkillShellExecution`).
    pub disable_skill_shell_execution: bool,
    /// Globs (or absolute paths) of user, project and local `CLAUDE.md`
    /// files not to read (Claude Code's `claudeMdExcludes`).
    pub claude_md_excludes: Vec<String>,
}

/// `[plugins]`: Claude Code's `enabledPlugins` and `extraKnownMarketplaces`,
/// and `--plugin-dir`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PluginSettings {
    /// `NAME@MARKETPLACE` → enabled (`enabledPlugins`); a higher layer's
    /// `false` turns off a lower layer's plugin.
    pub enabled: BTreeMap<String, bool>,
    /// Marketplaces by name, each `{"source": {...}}` as Claude Code writes
    /// it (`extraKnownMarketplaces`).
    pub marketplaces: BTreeMap<String, serde_json::Value>,
    /// Plugin folders loaded for this run (`--plugin-dir`).
    pub dirs: Vec<PathBuf>,
}

/// `[modes.NAME]`: what a mode changes. Coordinator mode is data: the
/// agent its main session runs as (its prompt and tools) is named here.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModeSettings {
    /// The agent the main session runs as in this mode, unless `--agent`
    /// names another.
    pub main_agent: Option<String>,
}

/// Every reasoning-effort level cadre knows, lowest first (OpenAI's
/// `minimal` through Anthropic's `max`).
pub const EFFORT_LEVELS: &[&str] = &["minimal", "low", "medium", "high", "xhigh", "max"];

impl Settings {
    /// Why `model` may not be used (`deniedModels`, `availableModels`),
    /// or `None` when it may. An entry matches a model by its id, by an
    /// alias of `[models]` naming that id, or as a family word contained
    /// in the id (`sonnet` matches `claude-sonnet-4-5`).
    pub fn model_refusal(&self, model: &str) -> Option<String> {
        let m = model.trim().to_ascii_lowercase();
        let matches = |entry: &String| {
            let e = entry.trim().to_ascii_lowercase();
            !e.is_empty()
                && (e == m
                    || self
                        .models
                        .get(entry.trim())
                        .is_some_and(|id| id.eq_ignore_ascii_case(&m))
                    || m.contains(&e))
        };
        if let Some(d) = self.denied_models.iter().find(|d| matches(d)) {
            return Some(format!("model `{model}` is denied by deniedModels (`{d}`)"));
        }
        if !self.available_models.is_empty() && !self.available_models.iter().any(matches) {
            return Some(format!(
                "model `{model}` is not in availableModels ({})",
                self.available_models.join(", ")
            ));
        }
        None
    }

    /// The agent the main session runs as in the current mode, if the mode
    /// names one.
    pub fn mode_main_agent(&self) -> Option<&str> {
        self.modes.get(self.mode.as_str())?.main_agent.as_deref()
    }
}

/// `[bash]`: the Bash tool's timeouts (Claude Code's
/// `BASH_DEFAULT_TIMEOUT_MS` and `BASH_MAX_TIMEOUT_MS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BashSettings {
    /// The timeout of a call that gives none, in milliseconds.
    pub default_timeout_ms: u64,
    /// The largest timeout a call may ask for, in milliseconds.
    pub max_timeout_ms: u64,
    /// How many characters of a command's output the model reads; the
    /// middle of a longer output is cut (Claude Code's
    /// `bashOutputMaxChars`, clamped to 4,000–128,000 as there).
    pub max_output_chars: usize,
}

impl Default for BashSettings {
    fn default() -> Self {
        BashSettings {
            default_timeout_ms: 120_000,
            max_timeout_ms: 600_000,
            max_output_chars: 30_000,
        }
    }
}

/// `[web_fetch]`: how the WebFetch tool fetches and reads pages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WebFetchSettings {
    /// The largest response body read, in bytes.
    pub max_bytes: u64,
    /// Wall time one fetch (all its redirects) may take, in milliseconds.
    pub timeout_ms: u64,
    /// How long a fetched page is reused, in milliseconds (0: never).
    pub cache_ttl_ms: u64,
    /// Markdown longer than this many characters is cut before the model reads it.
    pub max_markdown_chars: usize,
    /// Put the page through `model` with the call's `prompt`; off: return the Markdown.
    pub summarize: bool,
    /// The model (an alias or a full id) that reads the page.
    pub model: String,
    /// The largest answer of that model, in tokens.
    pub max_tokens: u32,
}

impl Default for WebFetchSettings {
    fn default() -> Self {
        WebFetchSettings {
            max_bytes: 10 * 1024 * 1024,
            timeout_ms: 60_000,
            cache_ttl_ms: 15 * 60 * 1000,
            max_markdown_chars: 100_000,
            summarize: true,
            model: "haiku".to_string(),
            max_tokens: 4096,
        }
    }
}

/// One step of `agents.first_search`; the steps run in this order,
/// whatever the order of the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchStep {
    /// The files the prompt names are read (at most three in all).
    ReadNamedFiles,
    /// The folders the prompt names have their files listed.
    ListNamedFolders,
    /// Files whose name without its extension is a word of the prompt are
    /// listed; read when only one matches and nothing else was read.
    FindNamedFiles,
}

/// Which service answers WebSearch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchBackend {
    /// Anthropic's server-side search on the Anthropic provider, else
    /// SearXNG when `searxng_url` is set.
    #[default]
    Auto,
    /// Anthropic's server-side web search tool (Anthropic provider only).
    Anthropic,
    /// A SearXNG instance's JSON API at `searxng_url`.
    Searxng,
}

/// `[web_search]`: where the WebSearch tool searches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WebSearchSettings {
    pub backend: SearchBackend,
    /// The SearXNG instance (e.g. `http://127.0.0.1:8888`); its JSON
    /// format must be enabled.
    pub searxng_url: String,
    /// The type of Anthropic's server tool sent in the request.
    pub anthropic_tool: String,
    /// The model that runs the Anthropic search (alias or id); empty: the
    /// calling agent's model.
    pub model: String,
    /// Searches the model may run for one call (Anthropic's `max_uses`).
    pub max_uses: u32,
    /// The largest answer of that model, in tokens.
    pub max_tokens: u32,
    /// Results kept from a SearXNG answer.
    pub max_results: usize,
    /// Wall time of one search, in milliseconds.
    pub timeout_ms: u64,
}

impl Default for WebSearchSettings {
    fn default() -> Self {
        WebSearchSettings {
            backend: SearchBackend::Auto,
            searxng_url: String::new(),
            anthropic_tool: "web_search_20250305".to_string(),
            model: String::new(),
            max_uses: 8,
            max_tokens: 4096,
            max_results: 10,
            timeout_ms: 60_000,
        }
    }
}

/// What a model costs, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelPrice {
    pub input: f64,
    pub output: f64,
    /// Reading the prompt cache.
    pub cache_read: f64,
    /// Writing the prompt cache.
    pub cache_write: f64,
    /// Server-side web searches, in US dollars per thousand.
    pub web_search: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            strict: false,
            mode: Mode::Normal,
            modes: BTreeMap::new(),
            provider: ProviderSettings::default(),
            models: BTreeMap::new(),
            agents: AgentSettings::default(),
            features: BTreeMap::new(),
            flags: BTreeMap::new(),
            permissions: PermissionSettings::default(),
            reload: ReloadSettings::default(),
            transcripts: TranscriptSettings::default(),
            compact: CompactSettings::default(),
            hooks: HookSettings::default(),
            plugins: PluginSettings::default(),
            disable_all_hooks: false,
            max_effort_level: None,
            available_models: Vec::new(),
            denied_models: Vec::new(),
            disable_skill_shell_execution: false,
            claude_md_excludes: Vec::new(),
            mcp_servers: BTreeMap::new(),
            mcp: McpSettings::default(),
            env: BTreeMap::new(),
            pass_env: Vec::new(),
            enable_all_project_mcp_servers: false,
            enabled_mcpjson_servers: Vec::new(),
            disabled_mcpjson_servers: Vec::new(),
            bash: BashSettings::default(),
            web_fetch: WebFetchSettings::default(),
            web_search: WebSearchSettings::default(),
            effort_levels: BTreeMap::new(),
            prices: BTreeMap::new(),
            distributed: DistributedSettings::default(),
            output_style: None,
            status_line: None,
            sandbox: Default::default(),
        }
    }
}

/// `[distributed]`: which backend runs background sub-agents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskBackendKind {
    /// In this process (the default).
    #[default]
    Local,
    /// Published to a NATS JetStream work queue, run by `cadre worker`s.
    Nats,
}

/// `[distributed]`: the worker fleet. The server, credentials and stream
/// names decide where a project's tasks (and their prompts) go, so a
/// project's own settings set them only in a trusted folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DistributedSettings {
    pub backend: TaskBackendKind,
    /// The NATS server (`nats://host:4222`, `tls://…`).
    pub url: String,
    /// A NATS credentials file (`.creds`: a user JWT and its nkey seed).
    pub credentials: Option<PathBuf>,
    /// The work-queue stream the task plans are published to.
    pub tasks_stream: String,
    /// The stream of completion notices (one per task).
    pub notices_stream: String,
    /// The key-value bucket holding each task's state.
    pub state_bucket: String,
    /// The first token of every subject cadre uses.
    pub subject_prefix: String,
    /// The pool a background spawn is published to and `cadre worker`
    /// pulls from when `--pool` is not given.
    pub pool: String,
    /// How long a worker's lease on a task lasts without a heartbeat (sent
    /// every quarter of it); a task whose worker stops renewing it goes to
    /// another worker. The default, 8 s, is three missed heartbeats.
    pub lease_ms: u64,
    /// How long to wait for the server when connecting.
    pub connect_timeout_ms: u64,
    /// How long notices and task states are kept, in seconds.
    pub retention_s: u64,
    /// Workers see the parent's session folder and repository (one host,
    /// or a network filesystem) instead of getting transcripts and commits
    /// through the broker: a child without a worktree then edits the
    /// parent's own files.
    pub shared_folder: bool,
    /// The stream holding every remote child's transcript lines, one
    /// subject per child.
    pub lines_stream: String,
    /// The object store bucket of git bundles: the commits worktree
    /// children start from, and the branches they end with.
    pub git_bucket: String,
}

impl Default for DistributedSettings {
    fn default() -> Self {
        DistributedSettings {
            backend: TaskBackendKind::Local,
            url: "nats://127.0.0.1:4222".to_string(),
            credentials: None,
            tasks_stream: "CADRE_TASKS".to_string(),
            notices_stream: "CADRE_NOTICES".to_string(),
            state_bucket: "cadre_tasks".to_string(),
            subject_prefix: "cadre".to_string(),
            pool: "default".to_string(),
            lease_ms: 8_000,
            connect_timeout_ms: 5_000,
            retention_s: 7 * 24 * 3600,
            shared_folder: false,
            lines_stream: "CADRE_LINES".to_string(),
            git_bucket: "cadre_git".to_string(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    #[default]
    Anthropic,
    Openai,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProviderSettings {
    pub kind: ProviderKind,
    /// Server root, without `/v1/...`. Default: `ANTHROPIC_BASE_URL` or
    /// Anthropic's API for `anthropic`; required for `openai`.
    pub base_url: Option<String>,
    /// The main session's model (an alias from `[models]` or a full id).
    pub model: String,
    /// Name of the environment variable that holds the API key.
    /// Default: `ANTHROPIC_API_KEY` or `OPENAI_API_KEY` by kind.
    pub api_key_env: Option<String>,
    /// A shell command whose output is the API key (Claude Code's
    /// `apiKeyHelper`), used when the key's variable is not set. Read from
    /// the user's, the command line's and managed settings only.
    pub api_key_helper: Option<String>,
    pub max_tokens: u32,
    pub temperature: Option<f64>,
    /// Extended thinking budget in tokens (Anthropic only).
    pub thinking_budget: Option<u32>,
    /// Connect timeout for one attempt, in milliseconds.
    pub connect_timeout_ms: u64,
    /// A stream that sends nothing for this long is treated as cut.
    pub idle_timeout_ms: u64,
    /// Retries after the first attempt for retryable failures.
    pub max_retries: u32,
    /// First backoff delay; doubles each retry, with jitter, up to `retry_max_ms`.
    pub retry_base_ms: u64,
    pub retry_max_ms: u64,
    /// Wall time one request may take across all its attempts and the
    /// waits between them; no retry starts that would end past it.
    pub retry_budget_ms: u64,
    /// The largest server-sent event accepted, in bytes.
    pub max_event_bytes: u64,
    /// The largest assembled message (text, thinking, tool input), in bytes.
    pub max_message_bytes: u64,
    /// The largest response body read, in bytes.
    pub max_response_bytes: u64,
    /// The most of an error response's body that is read, in bytes.
    pub max_error_body_bytes: u64,
    /// How many times an answer cut at `max_tokens` is continued with a
    /// "resume" message before the session stops with `max_tokens`.
    pub max_tokens_recoveries: u32,
    /// How to recover tool calls a model writes as text instead of native
    /// calls; `None` (the default) leaves text alone.
    pub tool_call_fallback: Option<ToolCallFallback>,
}

/// A way of reading tool calls out of a reply's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolCallFallback {
    /// A JSON object `{"name": ..., "arguments": {...}}` naming an offered
    /// tool, bare or in a code fence, becomes a tool call.
    #[serde(rename = "json-text")]
    JsonText,
}

impl Default for ProviderSettings {
    fn default() -> Self {
        ProviderSettings {
            kind: ProviderKind::Anthropic,
            base_url: None,
            model: "sonnet".to_string(),
            api_key_env: None,
            api_key_helper: None,
            max_tokens: 8192,
            temperature: None,
            thinking_budget: None,
            connect_timeout_ms: 10_000,
            idle_timeout_ms: 120_000,
            max_retries: 4,
            retry_base_ms: 500,
            retry_max_ms: 30_000,
            retry_budget_ms: 300_000,
            max_event_bytes: 16 * 1024 * 1024,
            max_message_bytes: 32 * 1024 * 1024,
            max_response_bytes: 256 * 1024 * 1024,
            max_error_body_bytes: 64 * 1024,
            max_tokens_recoveries: 3,
            tool_call_fallback: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentSettings {
    /// A folder laid out like the shipped `agents/` (agent files,
    /// `templates/`, `tools/`) whose files replace the embedded built-ins.
    pub builtin_dir: Option<PathBuf>,
    /// Extra project agent folders.
    pub dirs: Vec<PathBuf>,
    /// Extra user agent folders (besides `~/.claude/agents`).
    pub user_dirs: Vec<PathBuf>,
    pub plugin_dirs: Vec<PathBuf>,
    pub managed_dirs: Vec<PathBuf>,
    /// Read `~/.claude/agents`.
    pub load_user_home: bool,
    /// Read `.claude/agents` in the working directory and its ancestors.
    pub load_project_claude: bool,
    /// How deep sub-agents may nest when a definition opts in to `Agent`.
    pub max_depth: u32,
    pub default_max_turns: u32,
    /// A foreground child still running after this long moves to the
    /// background; 0 = never.
    pub auto_background_ms: u64,
    pub max_concurrent: usize,
    /// How long a spawn waits for a still-connecting server named by the
    /// agent's `requiredMcpServers`.
    pub required_mcp_wait_ms: u64,
    /// How often that wait checks the servers again.
    pub required_mcp_poll_ms: u64,
    /// A background task with no model or tool progress for this long ends
    /// `failed`; 0 = never.
    pub stall_timeout_ms: u64,
    /// A sub-agent running longer than this ends `failed`; 0 = never.
    pub task_timeout_ms: u64,
    /// How long `cadre run` waits for background children after the main
    /// agent's last answer before ending them `failed`; 0 = no ceiling.
    pub run_wait_ceiling_ms: u64,
    /// An agent idle with notifications to answer, while more of its
    /// background children still run, first waits until this long passes
    /// with no further notification (at most ten times this in all), so
    /// that children ending together are answered in one request; 0 =
    /// answer at once.
    pub notification_gap_ms: u64,
    /// A sub-agent that has used this many tokens (input, cache, output,
    /// over all its requests) ends `failed` before its next request; 0 = no
    /// budget.
    pub task_token_budget: u64,
    /// How many turns in a row an agent may make the same call (same tool,
    /// same input); the next identical call is not run and the model is
    /// told to use the result it has. 0 = no limit.
    pub repeated_call_limit: u32,
    /// An agent about to stop is sent back once to read the files its
    /// prompt names that it has not read and to check the paths its answer
    /// names that do not exist; what is still missing is said after the
    /// answer (docs/local-model.md). Off by default.
    pub check_answers: bool,
    /// Searches made for an agent before its first request of each prompt
    /// (docs/local-model.md): the files the prompt names are read, the
    /// folders it names listed, the files named like its words found.
    /// Empty (none) by default.
    pub first_search: Vec<SearchStep>,
    /// Where agent teams keep their folders (docs/teams.md), relative to
    /// the working directory.
    pub teams_dir: PathBuf,
    /// The session (the main agent, every sub-agent and every compaction of
    /// this process) stops before its next request once its model
    /// responses have counted this many tokens in all; 0 = no budget.
    pub session_token_budget: u64,
}

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings {
            builtin_dir: None,
            dirs: Vec::new(),
            user_dirs: Vec::new(),
            plugin_dirs: Vec::new(),
            managed_dirs: Vec::new(),
            load_user_home: true,
            load_project_claude: true,
            max_depth: 3,
            default_max_turns: 100,
            auto_background_ms: 120_000,
            max_concurrent: 20,
            required_mcp_wait_ms: 30_000,
            required_mcp_poll_ms: 500,
            stall_timeout_ms: 600_000,
            task_timeout_ms: 0,
            run_wait_ceiling_ms: 0,
            notification_gap_ms: 10,
            task_token_budget: 0,
            repeated_call_limit: 0,
            check_answers: false,
            first_search: Vec::new(),
            teams_dir: PathBuf::from(".cadre/teams"),
            session_token_budget: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct McpSettings {
    /// How long the first request of `cadre run` waits for servers that
    /// are still connecting (`chat` does not wait).
    pub startup_timeout_ms: u64,
    /// Whether servers may ask the session's model for a completion
    /// (`sampling/createMessage`), and with whose approval.
    pub sampling: SamplingPolicy,
}

/// `mcp.sampling`: `false` (the capability is not offered), `true` or
/// `"ask"` (each request is approved like a tool call that asks: by the
/// user in `chat`, by the SDK client's `can_use_tool`, by the
/// `bypassPermissions` mode; refused where nobody can approve), or
/// `"allow"` (answered without asking).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SamplingPolicy {
    #[default]
    Off,
    Ask,
    Allow,
}

impl Serialize for SamplingPolicy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SamplingPolicy::Off => s.serialize_bool(false),
            SamplingPolicy::Ask => s.serialize_str("ask"),
            SamplingPolicy::Allow => s.serialize_str("allow"),
        }
    }
}

impl<'de> Deserialize<'de> for SamplingPolicy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = SamplingPolicy;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("false, true, \"ask\" or \"allow\"")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<SamplingPolicy, E> {
                Ok(if v {
                    SamplingPolicy::Ask
                } else {
                    SamplingPolicy::Off
                })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<SamplingPolicy, E> {
                match v {
                    "off" => Ok(SamplingPolicy::Off),
                    "ask" => Ok(SamplingPolicy::Ask),
                    "allow" => Ok(SamplingPolicy::Allow),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl Default for McpSettings {
    fn default() -> Self {
        McpSettings {
            startup_timeout_ms: 30_000,
            sampling: SamplingPolicy::Off,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PermissionSettings {
    pub default_mode: PermissionMode,
    pub allow: Vec<String>,
    pub ask: Vec<String>,
    pub deny: Vec<String>,
    #[serde(default, alias = "additionalDirectories")]
    pub additional_directories: Vec<std::path::PathBuf>,
}

impl Default for PermissionSettings {
    fn default() -> Self {
        PermissionSettings {
            default_mode: PermissionMode::Default,
            allow: Vec::new(),
            ask: Vec::new(),
            deny: Vec::new(),
            additional_directories: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReloadSettings {
    /// Changes closer together than this form one reload.
    pub debounce_ms: u64,
}

impl Default for ReloadSettings {
    fn default() -> Self {
        ReloadSettings { debounce_ms: 50 }
    }
}

/// When and how a session's history is compacted (docs/sessions.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompactSettings {
    /// Compact when the estimated context passes the threshold.
    pub auto: bool,
    /// The fraction of the model's window at which to compact (0 to 1).
    pub threshold: f64,
    /// Context windows in tokens, by model id or id prefix (the longest
    /// matching key wins).
    pub windows: BTreeMap<String, u64>,
    /// The window of a model no key matches.
    pub default_window: u64,
    /// When set, automatic compaction measures against this many tokens
    /// instead of the model's window (whichever is smaller); Claude Code's
    /// `autoCompactWindow`. An agent's frontmatter can set its own.
    #[serde(alias = "autoCompactWindow", skip_serializing_if = "Option::is_none")]
    pub auto_compact_window: Option<u64>,
}

impl Default for CompactSettings {
    fn default() -> Self {
        CompactSettings {
            auto: true,
            threshold: 0.8,
            windows: BTreeMap::new(),
            default_window: 200_000,
            auto_compact_window: None,
        }
    }
}

impl CompactSettings {
    /// The context window of `model`: the longest key that is a prefix of
    /// it, else `default_window`.
    pub fn window(&self, model: &str) -> u64 {
        self.windows
            .iter()
            .filter(|(k, _)| model.starts_with(k.as_str()))
            .max_by_key(|(k, _)| k.len())
            .map_or(self.default_window, |(_, w)| *w)
    }

    /// The estimated context size, in tokens, past which to compact.
    pub fn limit(&self, model: &str) -> u64 {
        self.limit_for(model, None, None)
    }

    /// [`CompactSettings::limit`] for an agent whose frontmatter may set its
    /// own `autoCompactWindow` (`window`) and `compactThreshold`
    /// (`threshold`); each replaces the setting of the same meaning. The
    /// window is never more than the model's.
    pub fn limit_for(&self, model: &str, window: Option<u64>, threshold: Option<f64>) -> u64 {
        let t = threshold.unwrap_or(self.threshold);
        let t = if t.is_finite() {
            t.clamp(0.0, 1.0)
        } else {
            1.0
        };
        let model_window = self.window(model);
        let window = window
            .or(self.auto_compact_window)
            .map_or(model_window, |w| w.min(model_window));
        // Windows are far below 2^52: the float holds them exactly.
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let limit = (window as f64 * t) as u64;
        limit
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TranscriptSettings {
    pub enabled: bool,
    /// Relative to the working directory; empty (the default): the user's
    /// folder for this project, `~/.claude/projects/<project key>/`.
    /// After loading it is always the folder itself (absolute).
    pub dir: PathBuf,
    /// Session folders older than this many days are removed when a
    /// session starts (Claude Code's `cleanupPeriodDays`); `None` keeps all.
    pub cleanup_period_days: Option<u32>,
}

impl Default for TranscriptSettings {
    fn default() -> Self {
        TranscriptSettings {
            enabled: true,
            dir: PathBuf::new(),
            cleanup_period_days: None,
        }
    }
}

/// One MCP server: a command run with stdio (`command`, `args`, `env`), or
/// an HTTP endpoint (`url`, `headers`): streamable HTTP, or the legacy
/// HTTP+SSE transport with `type = "sse"`. `type` (`stdio`, `http`, `sse`)
/// is otherwise implied by the fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct McpServerConfig {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub headers: BTreeMap<String, String>,
    /// The environment around `env` for a stdio server (set from settings
    /// when the snapshot is built; the default removes provider keys).
    #[serde(skip)]
    pub child_env: Option<std::sync::Arc<ChildEnv>>,
    /// Where the server was configured, in Claude Code's words (its
    /// `server_scope`): `project` (`.mcp.json`, the project's settings),
    /// `user`, `local`, `managed`, `dynamic` (the command line, a plugin),
    /// `agent` (an agent file's own). Set when the snapshot is built.
    #[serde(skip)]
    pub scope: Option<&'static str>,
    /// The plugin that brought it, `NAME@MARKETPLACE` (`NAME@inline` for
    /// `--plugin-dir`).
    #[serde(skip)]
    pub plugin: Option<String>,
}

impl McpServerConfig {
    /// One server entry as written (in `.mcp.json` or an agent file's
    /// inline `mcpServers`), checked: a `command` (stdio) or a `url`
    /// (streamable HTTP), not both, and a `type` that agrees.
    pub fn from_json(v: &serde_json::Value) -> Result<McpServerConfig, String> {
        let c: McpServerConfig = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
        match (c.kind.as_deref(), &c.command, &c.url) {
            (Some("stdio"), None, Some(_)) => {
                return Err("has `type: \"stdio\"` but a `url` instead of a `command`".into());
            }
            (Some(t @ ("http" | "sse" | "streamable-http")), Some(_), None) => {
                return Err(format!(
                    "has `type: \"{t}\"` but a `command` instead of a `url`"
                ));
            }
            _ => {}
        }
        match (&c.command, &c.url) {
            (Some(_), None) | (None, Some(_)) => Ok(c),
            (Some(_), Some(_)) => Err("has both `command` and `url`".into()),
            (None, None) => Err("needs a `command` (stdio) or a `url` (streamable HTTP)".into()),
        }
    }
}

/// Keys under which any name is allowed (user-chosen names).
pub(crate) const OPEN_TABLES: &[&str] = &[
    "models",
    "modes",
    "features",
    "flags",
    "mcp_servers",
    "env",
    "prices",
    "effort_levels",
];

/// Provider keys no child process receives unless a setting passes them on.
pub const SCRUBBED_ENV: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
];

/// The environment of a process cadre starts (Bash, a hook, an MCP
/// server): cadre's own environment without `remove`, plus `set`. The
/// default removes the well-known provider keys and sets nothing, so a
/// caller that forgets to pass settings still keeps the keys in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildEnv {
    pub remove: Vec<String>,
    pub set: BTreeMap<String, String>,
}

impl Default for ChildEnv {
    fn default() -> Self {
        ChildEnv {
            remove: SCRUBBED_ENV.iter().map(|s| s.to_string()).collect(),
            set: BTreeMap::new(),
        }
    }
}

impl ChildEnv {
    /// Applies the environment to a command about to start.
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        for k in &self.remove {
            cmd.env_remove(k);
        }
        cmd.envs(&self.set);
    }
}

impl Settings {
    /// What children get: the provider keys (`ANTHROPIC_API_KEY`,
    /// `OPENAI_API_KEY`, `provider.api_key_env`) removed unless named in
    /// `pass_env`, then the variables of `env`.
    pub fn child_env(&self) -> ChildEnv {
        let mut remove: Vec<String> = SCRUBBED_ENV.iter().map(|s| s.to_string()).collect();
        if let Some(k) = &self.provider.api_key_env
            && !remove.contains(k)
        {
            remove.push(k.clone());
        }
        remove.retain(|k| !self.pass_env.contains(k));
        ChildEnv {
            remove,
            set: self.env.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compaction_limit_takes_the_smaller_window_and_the_agents_own_values() {
        let mut c = CompactSettings::default();
        c.windows.insert("claude-".into(), 200_000);
        assert_eq!(c.limit("claude-x"), 160_000);
        c.auto_compact_window = Some(100_000);
        assert_eq!(c.limit("claude-x"), 80_000);
        // Never more than the model's window.
        c.auto_compact_window = Some(1_000_000);
        assert_eq!(c.limit("claude-x"), 160_000);
        // An agent's frontmatter wins over both settings.
        assert_eq!(c.limit_for("claude-x", Some(10_000), Some(0.5)), 5_000);
        assert_eq!(c.limit_for("claude-x", None, Some(0.5)), 100_000);
    }
}

/// Claude Code's `statusLine`: a shell command run with the session's
/// state as JSON on its stdin; the first line it prints is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusLineSetting {
    pub command: String,
}
