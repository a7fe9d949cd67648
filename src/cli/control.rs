//! The SDKs' control requests beyond the session's own (initialize,
//! interrupt, modes, models, rewinds): settings, MCP servers, listings,
//! usage and the queue, each answered in Claude Code's shape (checked
//! against Claude Code by `tests/suite/conformance.rs`, scenario
//! `control-queries`). What cadre cannot do gets Claude Code's error shape
//! and a row in `docs/claude-code-differences.md`.
//!
//! Trust: the host started this process and could have given any of these
//! settings on its command line (`--settings`), so what it applies joins
//! the `flag` layer; managed settings stay above it and still win, and a
//! repository's files gain nothing from it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::emit::Emitter;
use super::wire::ControlResponseOut;
use crate::config::{LayerFile, Scope};
use crate::runtime::Engine;
use crate::runtime::transcript::Transcript;

/// A control request answered here (parsed from the line again when
/// `wire::FromClient` does not know its subtype).
#[derive(Debug, Deserialize)]
pub(super) struct RequestLine {
    request: Request,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "subtype", rename_all = "snake_case")]
enum Request {
    GetSettings,
    /// Merged into the `flag` layer for the rest of the session.
    ApplyFlagSettings {
        #[serde(default)]
        settings: Map<String, Value>,
    },
    /// Writes the local (`outputStyle`) or user (`effortLevel`) settings file.
    UpdateSettings {
        source: String,
        #[serde(default)]
        settings: Map<String, Value>,
    },
    McpReconnect {
        #[serde(rename = "serverName")]
        server_name: String,
    },
    McpToggle {
        #[serde(rename = "serverName")]
        server_name: String,
        #[serde(default)]
        enabled: Option<bool>,
    },
    /// The host's own servers (Claude Code's `dynamic` scope).
    McpSetServers {
        #[serde(default)]
        servers: Map<String, Value>,
    },
    McpCall {
        tool: String,
        #[serde(default)]
        arguments: Option<Value>,
    },
    McpReadResource {
        #[serde(rename = "serverName")]
        server_name: String,
        uri: String,
    },
    BackgroundTasks {
        #[serde(default)]
        tool_use_id: Option<String>,
    },
    GetTaskOutput {
        #[allow(dead_code)]
        task_id: String,
    },
    ListPermissionRules,
    GetHooksListing,
    ReloadSkills,
    ReloadPlugins,
    ListModels,
    GetUsage,
    GetSessionCost,
    CancelAsyncMessage {
        message_uuid: String,
    },
    SeedReadState {
        #[allow(dead_code)]
        path: String,
    },
    /// Paths under the working directory for an `@` mention.
    FileSuggestions {
        query: String,
    },
    GetBinaryVersion,
    /// A file of the project or its added folders, bounded.
    ReadFile {
        path: String,
        #[serde(default)]
        max_bytes: Option<u64>,
        #[serde(default)]
        encoding: Option<String>,
    },
    /// Another repository's folder joins the session's folders.
    RegisterRepoRoot {
        directory: String,
    },
    ReloadOutputStyles,
    /// The session's title, where the SDKs' session list reads it.
    RenameSession {
        title: String,
        #[serde(default)]
        session_id: Option<String>,
    },
    /// Whether anybody watches the output: cadre holds no lines back, so
    /// nothing changes.
    SetHasSubscribers {
        #[allow(dead_code)]
        #[serde(default)]
        has_subscribers: Option<bool>,
    },
    /// Anything else: Claude Code's `unsupported_request` error.
    #[serde(other)]
    Unknown,
}

/// Whether the request on `line` may wait on an MCP server (answered
/// while later lines are read).
fn waits(line: &[u8]) -> bool {
    serde_json::from_slice::<RequestLine>(line).is_ok_and(|r| {
        matches!(
            r.request,
            Request::McpReconnect { .. }
                | Request::McpToggle { .. }
                | Request::McpSetServers { .. }
                | Request::McpCall { .. }
                | Request::McpReadResource { .. }
        )
    })
}

/// Whether the request on `line` writes to the main session's transcript
/// (answered by the session loop, between prompts).
pub(super) fn needs_transcript(line: &[u8]) -> bool {
    serde_json::from_slice::<RequestLine>(line)
        .is_ok_and(|r| matches!(r.request, Request::RenameSession { .. }))
}

/// Whether the request on `line` is one answered here about the session
/// (not one no program knows).
pub(super) fn needs_session(line: &[u8]) -> bool {
    serde_json::from_slice::<RequestLine>(line)
        .is_ok_and(|r| !matches!(r.request, Request::Unknown))
}

/// What an answer may look at.
#[derive(Clone)]
pub(super) struct Ctx {
    pub engine: Option<Arc<Engine>>,
    pub emitter: Emitter,
    /// Withdraws a queued prompt by the uuid its client gave it; whether
    /// one was still waiting.
    pub withdraw: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    /// When the process started (`get_usage`'s wall time).
    pub started: std::time::Instant,
    /// The main session's transcript (set by the session loop).
    pub transcript: Option<Arc<Transcript>>,
}

/// Answers request `id` (stdin line `line`) on stdout: those that may wait
/// on an MCP server meanwhile (later lines are read), the rest before the
/// next line.
pub(super) async fn respond(id: String, line: Vec<u8>, ctx: Ctx) {
    let slow = waits(&line);
    let run = async move {
        let r = answer(&id, &line, &ctx).await;
        super::emit::send(&super::wire::Output::ControlResponse(r));
    };
    if slow {
        tokio::spawn(run);
    } else {
        run.await;
    }
}

/// The answer to request `id` on stdin line `line` (whose subtype the
/// session loop does not handle).
async fn answer(id: &str, line: &[u8], ctx: &Ctx) -> ControlResponseOut {
    let subtype = || {
        serde_json::from_slice::<Value>(line)
            .ok()
            .and_then(|v| v["request"]["subtype"].as_str().map(str::to_string))
            .unwrap_or_else(|| "?".into())
    };
    let request = match serde_json::from_slice::<RequestLine>(line) {
        Ok(r) => r.request,
        Err(e) => return ControlResponseOut::error(id, format!("{}: {e}", subtype())),
    };
    if matches!(request, Request::Unknown) {
        return ControlResponseOut::unsupported(id, &subtype());
    }
    let Some(engine) = &ctx.engine else {
        return ControlResponseOut::error(id, "the session is not set up yet");
    };
    match reply(request, engine, ctx).await {
        Ok(Some(v)) => ControlResponseOut::success(id, v),
        Ok(None) => ControlResponseOut::success(id, Value::Null),
        Err(why) => ControlResponseOut::error(id, why),
    }
}

/// A typed answer as the response's JSON.
fn to_value(answer: impl Serialize) -> Result<Option<Value>, String> {
    serde_json::to_value(answer)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// An empty object (`{}`), as Claude Code answers some requests.
#[derive(Serialize)]
struct Empty {}

async fn reply(request: Request, engine: &Arc<Engine>, ctx: &Ctx) -> Result<Option<Value>, String> {
    match request {
        Request::GetSettings => to_value(settings_answer(engine, ctx)),
        Request::ApplyFlagSettings { settings } => {
            apply(engine, Some(settings))?;
            Ok(None)
        }
        Request::UpdateSettings { source, settings } => {
            update_settings(engine, &source, settings)?;
            to_value(Empty {})
        }
        Request::McpReconnect { server_name } => {
            known_server(engine, &server_name)?;
            if engine.mcp.is_disabled(&server_name) {
                return Err(format!("Server is disabled: {server_name}"));
            }
            engine.mcp.reconnect(&server_name);
            settle(engine).await;
            match engine.mcp.failure(&server_name) {
                Some(why) => Err(why),
                None => to_value(Empty {}),
            }
        }
        Request::McpToggle {
            server_name,
            enabled,
        } => {
            known_server(engine, &server_name)?;
            let on = enabled.unwrap_or(true);
            engine.mcp.set_enabled(&server_name, on);
            if on {
                settle(engine).await;
            }
            to_value(Empty {})
        }
        Request::McpSetServers { servers } => to_value(set_servers(engine, servers).await),
        Request::McpCall { tool, arguments } => mcp_call(engine, &tool, arguments).await,
        Request::McpReadResource { server_name, uri } => {
            read_resource(engine, &server_name, &uri).await
        }
        // cadre runs no tool call it could move to the background: every
        // Bash command and sub-agent it backgrounds was started so.
        // With a tool call named, Claude Code says whether it moved it.
        Request::BackgroundTasks { tool_use_id: None } => to_value(Empty {}),
        Request::BackgroundTasks {
            tool_use_id: Some(_),
        } => to_value(Backgrounded {
            backgrounded: false,
        }),
        // cadre keeps no output of shell commands in the background
        // (Claude Code's answer for an id it does not know).
        Request::GetTaskOutput { .. } => Err(
            "get_task_output: no shell or Monitor task with that task_id in this session".into(),
        ),
        Request::ListPermissionRules => to_value(RulesAnswer {
            state: rules_state(engine),
        }),
        Request::GetHooksListing => to_value(hooks_listing(engine)),
        Request::ReloadSkills => {
            apply(engine, None)?;
            to_value(SkillsAnswer {
                skills: super::listings::command_list(&engine.snapshot.load())
                    .into_iter()
                    .filter(|c| c.builtin.is_none())
                    .collect(),
            })
        }
        Request::ReloadPlugins => {
            apply(engine, None)?;
            to_value(plugins_answer(engine))
        }
        Request::ListModels => to_value(ModelsAnswer {
            models: super::listings::model_list(&engine.snapshot.load()),
        }),
        Request::GetUsage => to_value(usage_answer(ctx)),
        Request::GetSessionCost => to_value(CostAnswer {
            text: cost_text(ctx),
        }),
        Request::CancelAsyncMessage { message_uuid } => to_value(Cancelled {
            cancelled: (ctx.withdraw)(&message_uuid),
        }),
        // cadre's Edit and Write check a file's state themselves, with no
        // record of earlier reads to seed.
        Request::SeedReadState { .. } => Ok(None),
        Request::FileSuggestions { query } => to_value(file_suggestions(engine, &query)),
        Request::GetBinaryVersion => to_value(BinaryVersion {
            version: env!("CARGO_PKG_VERSION"),
        }),
        Request::ReadFile {
            path,
            max_bytes,
            encoding,
        } => to_value(read_file(engine, &path, max_bytes, encoding.as_deref())?),
        Request::RegisterRepoRoot { directory } => {
            register_repo_root(engine, &directory)?;
            to_value(Empty {})
        }
        Request::ReloadOutputStyles => {
            apply(engine, None)?;
            to_value(OutputStyles {
                available_output_styles: engine.snapshot.load().output_styles.names(),
            })
        }
        Request::RenameSession { title, session_id } => {
            rename_session(engine, ctx, &title, session_id.as_deref())?;
            Ok(None)
        }
        Request::SetHasSubscribers { .. } => Ok(None),
        Request::Unknown => Err("unsupported".into()),
    }
}

/// Applies the host's settings (or only rebuilds) through the engine.
fn apply(engine: &Engine, patch: Option<Map<String, Value>>) -> Result<(), String> {
    match &engine.apply_settings {
        Some(f) => f(patch),
        None => Err("this session cannot change its settings".into()),
    }
}

/// Waits (boundedly) for MCP servers that are connecting.
async fn settle(engine: &Engine) {
    let limit =
        std::time::Duration::from_millis(engine.snapshot.load().settings().mcp.startup_timeout_ms);
    engine.mcp.wait_settled(limit, |_| {}).await;
}

fn known_server(engine: &Engine, name: &str) -> Result<(), String> {
    if engine.mcp.knows(name) {
        Ok(())
    } else {
        Err(format!("Server not found: {name}"))
    }
}

// ------------------------------------------------------------ settings

#[derive(Serialize)]
struct SettingsAnswer {
    /// The layers' settings files merged, as Claude Code's settings.
    effective: Map<String, Value>,
    sources: Vec<SettingsSource>,
    applied: Applied,
}

#[derive(Serialize)]
struct SettingsSource {
    source: &'static str,
    settings: Map<String, Value>,
}

/// What the session runs with.
#[derive(Serialize)]
struct Applied {
    model: String,
    effort: Option<String>,
}

/// Claude Code's name for a layer's source.
fn source_name(scope: Scope) -> &'static str {
    match scope {
        Scope::User => "userSettings",
        Scope::Project => "projectSettings",
        Scope::Local => "localSettings",
        Scope::Flag => "flagSettings",
        Scope::Managed => "policySettings",
        Scope::Cli => "cliArg",
        Scope::Env => "env",
        Scope::Default => "default",
    }
}

/// The JSON object of one Claude Code settings layer that was read.
fn layer_json(f: &LayerFile) -> Option<Map<String, Value>> {
    if f.format != crate::config::layers::Format::Claude || !f.read {
        return None;
    }
    let text = match &f.inline {
        Some(t) => t.clone(),
        None => crate::raw::read_text(&f.path, crate::config::MAX_SETTINGS_BYTES).ok()?,
    };
    match serde_json::from_str(text.trim_start_matches('\u{feff}')) {
        Ok(Value::Object(m)) => Some(m),
        _ => None,
    }
}

/// Objects merge key by key; anything else is replaced; lists of the
/// permission rules are joined (as the layers join them).
fn deep_merge(acc: &mut Map<String, Value>, layer: &Map<String, Value>) {
    for (k, v) in layer {
        match (acc.get_mut(k), v) {
            (Some(Value::Object(a)), Value::Object(b)) => deep_merge(a, b),
            (Some(Value::Array(a)), Value::Array(b)) => {
                for item in b {
                    if !a.contains(item) {
                        a.push(item.clone());
                    }
                }
            }
            _ => {
                acc.insert(k.clone(), v.clone());
            }
        }
    }
}

fn settings_answer(engine: &Engine, ctx: &Ctx) -> SettingsAnswer {
    let snap = engine.snapshot.load();
    let sources: Vec<SettingsSource> = snap
        .config
        .files
        .iter()
        .filter_map(|f| {
            layer_json(f).map(|settings| SettingsSource {
                source: source_name(f.scope),
                settings,
            })
        })
        .collect();
    let mut effective = Map::new();
    for s in &sources {
        deep_merge(&mut effective, &s.settings);
    }
    SettingsAnswer {
        effective,
        sources,
        applied: Applied {
            model: ctx.emitter.main_context().0,
            effort: None,
        },
    }
}

/// `update_settings`: Claude Code's allow-list (the local file's
/// `outputStyle`, the user's `effortLevel`), string values only.
fn update_settings(
    engine: &Engine,
    source: &str,
    settings: Map<String, Value>,
) -> Result<(), String> {
    let snap = engine.snapshot.load_full();
    let (scope, allowed) = match source {
        "localSettings" => (Scope::Local, "outputStyle"),
        "userSettings" => (Scope::User, "effortLevel"),
        other => return Err(format!("update_settings: unsupported source {other}")),
    };
    let refused: Vec<&str> = settings
        .keys()
        .map(String::as_str)
        .filter(|k| *k != allowed)
        .collect();
    if !refused.is_empty() {
        return Err(format!(
            "update_settings keys not allowed: {}",
            refused.join(", ")
        ));
    }
    if let Some((k, _)) = settings.iter().find(|(_, v)| !v.is_string()) {
        return Err(format!("update_settings: {k} must be a string"));
    }
    let path: PathBuf = snap
        .config
        .files
        .iter()
        .find(|f| f.scope == scope && f.format == crate::config::layers::Format::Claude)
        .map(|f| f.path.clone())
        .ok_or_else(|| {
            format!("update_settings: {source} is not read in this session (--setting-sources)")
        })?;
    crate::config::edit::edit_json_settings(&path, |o| {
        for (k, v) in settings {
            o.insert(k, v);
        }
    })?;
    apply(engine, None)
}

// ----------------------------------------------------------------- MCP

#[derive(Serialize)]
struct SetServersAnswer {
    added: Vec<String>,
    removed: Vec<String>,
    /// Server name → why it could not be started.
    errors: BTreeMap<String, String>,
}

async fn set_servers(engine: &Engine, servers: Map<String, Value>) -> SetServersAnswer {
    let mut errors = BTreeMap::new();
    let mut configs = BTreeMap::new();
    for (name, v) in servers {
        if v.get("type").and_then(Value::as_str) == Some("sdk") {
            errors.insert(
                name,
                "cadre connects an SDK server only when it is given at start".into(),
            );
            continue;
        }
        match crate::config::McpServerConfig::from_json(&v) {
            Ok(c) => {
                configs.insert(name, c);
            }
            Err(why) => {
                errors.insert(name, why);
            }
        }
    }
    let (added, removed) = engine.mcp.set_host_servers(configs);
    settle(engine).await;
    for name in &added {
        if let Some(why) = engine.mcp.failure(name) {
            errors.insert(name.clone(), why);
        }
    }
    SetServersAnswer {
        added,
        removed,
        errors,
    }
}

/// An MCP tool's result as the MCP `CallToolResult`.
#[derive(Serialize)]
struct CallAnswer {
    content: Vec<Value>,
    #[serde(rename = "isError", skip_serializing_if = "std::ops::Not::not")]
    is_error: bool,
}

#[derive(Serialize)]
struct TextBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct ImageBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    data: &'a str,
    #[serde(rename = "mimeType")]
    mime_type: &'a str,
}

/// `mcp_call`: the tool called with no model turn and no permission check
/// (the control channel is the host's own, as in Claude Code).
async fn mcp_call(
    engine: &Engine,
    tool: &str,
    arguments: Option<Value>,
) -> Result<Option<Value>, String> {
    let found = engine
        .mcp
        .ready_servers()
        .into_iter()
        .find_map(|(name, conn)| {
            let t = conn
                .tools
                .iter()
                .find(|t| crate::mcp::tool_name(&name, &t.name) == tool)?
                .name
                .clone();
            Some((conn, t))
        });
    let Some((conn, server_tool)) = found else {
        let wanted = tool
            .strip_prefix("mcp__")
            .and_then(|t| t.split("__").next())
            .unwrap_or(tool);
        return Err(format!("MCP server not connected: {wanted}"));
    };
    let out = conn
        .call(
            &server_tool,
            arguments.unwrap_or_else(|| Value::Object(Map::new())),
            None,
        )
        .await
        .map_err(|e| e.to_string())?;
    let mut content = Vec::new();
    for p in &out.parts {
        let block = match p {
            crate::tools::outcome::McpPart::Text { text } => {
                serde_json::to_value(TextBlock { kind: "text", text })
            }
            // What the model would be told in its place.
            other => serde_json::to_value(other),
        };
        content.push(block.map_err(|e| e.to_string())?);
    }
    for img in &out.images {
        let data = img["data"].as_str().unwrap_or_default();
        let mime = img["media_type"].as_str().unwrap_or_default();
        content.push(
            serde_json::to_value(ImageBlock {
                kind: "image",
                data,
                mime_type: mime,
            })
            .map_err(|e| e.to_string())?,
        );
    }
    to_value(CallAnswer {
        content,
        is_error: out.is_error,
    })
}

#[derive(Serialize)]
struct ResourceAnswer {
    contents: Vec<Value>,
}

/// `mcp_read_resource`: a `ui://` resource of a connected server, as the
/// server sent it.
async fn read_resource(engine: &Engine, server: &str, uri: &str) -> Result<Option<Value>, String> {
    if !uri.starts_with("ui://") {
        return Err("mcp_read_resource: uri must use the ui:// scheme".into());
    }
    if !engine.mcp.knows(server) {
        return Err(format!("Server not found: {server}"));
    }
    let conn = engine
        .mcp
        .connection(server)
        .ok_or_else(|| format!("MCP server not connected: {server}"))?;
    let contents = conn.read_resource_contents(uri).await?;
    to_value(ResourceAnswer { contents })
}

// ------------------------------------------------------------- listings

#[derive(Serialize)]
struct Backgrounded {
    backgrounded: bool,
}

#[derive(Serialize)]
struct RulesAnswer {
    state: RulesState,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RulesState {
    rules: Vec<RuleRow>,
    workspace_directories: Vec<String>,
    original_cwd: String,
    managed_only: bool,
}

#[derive(Serialize)]
struct RuleRow {
    behavior: &'static str,
    source: &'static str,
    rule: String,
    /// How `/permissions` words the rule; absent where Claude Code has no
    /// words for it (a path or domain pattern).
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<RuleWords>,
    /// `persistent`: written in a settings file the session may edit;
    /// `readonly`: from managed settings, the command line or the host.
    editability: &'static str,
}

/// A rule in words: `prefix`, then `emphasis` set apart, then `suffix`.
#[derive(Serialize, Debug, PartialEq)]
struct RuleWords {
    prefix: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    emphasis: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    suffix: Option<String>,
}

/// Claude Code's words for a whole-tool rule and Bash's command rules.
fn rule_words(rule: &str) -> Option<RuleWords> {
    let words = |prefix: &str, emphasis: Option<&str>, suffix: Option<&str>| RuleWords {
        prefix: prefix.into(),
        emphasis: emphasis.map(str::to_string),
        suffix: suffix.map(str::to_string),
    };
    let Some((tool, rest)) = rule.split_once('(') else {
        return Some(if rule == "Bash" {
            words("Any Bash command", None, None)
        } else {
            words("Any use of the ", Some(rule), Some(" tool"))
        });
    };
    let inner = rest.strip_suffix(')')?;
    if tool != "Bash" {
        return None;
    }
    let prefix = inner
        .strip_suffix(":*")
        .or_else(|| inner.strip_suffix(" *"))
        .filter(|p| !p.contains('*'));
    Some(match prefix {
        Some(p) => words("Any Bash command starting with ", Some(p), None),
        None => words("The Bash command ", Some(inner), None),
    })
}

fn rules_state(engine: &Engine) -> RulesState {
    let snap = engine.snapshot.load();
    let settings = snap.settings();
    let p = &settings.permissions;
    let origins = &snap.config.origins;
    let mut rules = Vec::new();
    for (behavior, list, key) in [
        ("allow", &p.allow, "permissions.allow"),
        ("ask", &p.ask, "permissions.ask"),
        ("deny", &p.deny, "permissions.deny"),
    ] {
        for rule in list {
            let scope = origins.of_item(key, rule).map_or(Scope::Cli, |o| o.scope);
            rules.push(RuleRow {
                behavior,
                source: source_name(scope),
                description: rule_words(rule),
                rule: rule.clone(),
                editability: if matches!(scope, Scope::User | Scope::Project | Scope::Local) {
                    "persistent"
                } else {
                    "readonly"
                },
            });
        }
    }
    // The session's own grants (a host's permission updates).
    if let Ok(g) = engine.grants.lock() {
        for (behavior, list) in g.own() {
            for rule in list {
                rules.push(RuleRow {
                    behavior: behavior.as_str(),
                    source: "session",
                    description: rule_words(rule),
                    rule: rule.clone(),
                    editability: "readonly",
                });
            }
        }
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    RulesState {
        rules,
        workspace_directories: engine
            .added_dirs(&snap, &cwd)
            .iter()
            .map(|d| d.display().to_string())
            .collect(),
        original_cwd: cwd.display().to_string(),
        managed_only: false,
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HooksListing {
    events: Vec<EventRow>,
    hooks: Vec<HookRow>,
    event_catalog: Vec<CatalogRow>,
    policy: HookPolicy,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EventRow {
    name: &'static str,
    summary: &'static str,
    supports_matcher: bool,
    hook_count: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CatalogRow {
    name: &'static str,
    summary: &'static str,
    supports_matcher: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HookRow {
    event: &'static str,
    matcher: String,
    source: &'static str,
    source_label: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
    display_text: String,
    command_text: String,
    content_label: &'static str,
    /// Seconds, when the hook sets its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<u64>,
    /// The entry as settings write it, for a host's edit form (not for a
    /// plugin's hook).
    #[serde(skip_serializing_if = "Option::is_none")]
    editable: Option<Editable>,
}

#[derive(Serialize)]
struct Editable {
    matcher: String,
    config: WrittenHook,
}

/// One hook in Claude Code's settings form.
#[derive(Serialize)]
struct WrittenHook {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout: Option<u64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HookPolicy {
    disabled_by_policy: bool,
    managed_only: bool,
    plugin_only: bool,
    all_disabled: bool,
    policy_hook_count: usize,
}

/// Claude Code's hook events in its lifecycle order, with its `/hooks`
/// summaries and whether a matcher applies.
const EVENT_CATALOG: &[(&str, &str, bool)] = &[
    ("PreToolUse", "Before tool execution", true),
    ("PostToolUse", "After tool execution", true),
    ("PostToolUseFailure", "After tool execution fails", true),
    (
        "PostToolBatch",
        "After a batch of tool calls resolves",
        false,
    ),
    (
        "PermissionDenied",
        "After auto mode denies a tool call",
        true,
    ),
    ("Notification", "When notifications are sent", true),
    ("UserPromptSubmit", "When the user submits a prompt", false),
    ("SessionStart", "When a new session is started", true),
    ("Stop", "Right before Claude concludes its response", false),
    (
        "StopFailure",
        "When the turn ends due to an API error",
        true,
    ),
    (
        "SubagentStart",
        "When a subagent (Agent tool call) is started",
        true,
    ),
    (
        "SubagentStop",
        "Right before a subagent (Agent tool call) concludes its response",
        true,
    ),
    ("PreCompact", "Before conversation compaction", true),
    ("PostCompact", "After conversation compaction", true),
    ("PreModelSwitch", "Before the model is switched", true),
    ("PostModelSwitch", "After the model is switched", true),
    ("SessionEnd", "When a session is ending", true),
    (
        "PermissionRequest",
        "When a permission dialog is displayed",
        true,
    ),
    (
        "Elicitation",
        "When an MCP server requests user input",
        true,
    ),
    (
        "ElicitationResult",
        "After the user answers an MCP elicitation",
        true,
    ),
    ("ConfigChange", "When configuration files change", true),
    (
        "InstructionsLoaded",
        "When instruction files are loaded",
        true,
    ),
    ("WorktreeCreate", "When a worktree is created", false),
    ("WorktreeRemove", "When a worktree is removed", false),
];

fn hooks_listing(engine: &Engine) -> HooksListing {
    let snap = engine.snapshot.load();
    let mut hooks = Vec::new();
    let mut events = Vec::new();
    for &(name, summary, supports_matcher) in EVENT_CATALOG {
        let of_event: Vec<&crate::config::Hook> = snap
            .hooks
            .0
            .iter()
            .filter(|h| h.event.as_str() == name)
            .collect();
        if of_event.is_empty() {
            continue;
        }
        events.push(EventRow {
            name,
            summary,
            supports_matcher,
            hook_count: of_event.len(),
        });
        for h in of_event {
            let c = &h.config;
            let (kind, text, label) = match c.kind {
                crate::config::HookType::Command => ("command", c.command.clone(), "Command"),
                crate::config::HookType::Http => ("http", c.url.clone().unwrap_or_default(), "URL"),
                crate::config::HookType::Prompt => {
                    ("prompt", c.prompt.clone().unwrap_or_default(), "Prompt")
                }
                crate::config::HookType::Agent => {
                    ("agent", c.prompt.clone().unwrap_or_default(), "Prompt")
                }
            };
            let (source, source_label) = if c.plugin_root.is_some() {
                ("pluginHook", "Plugin")
            } else {
                ("settings", "Settings")
            };
            let timeout = (c.timeout_ms != crate::config::DEFAULT_HOOK_TIMEOUT_MS)
                .then_some(c.timeout_ms / 1000);
            let matcher = h.matcher.text().unwrap_or_default().to_string();
            let editable = c.plugin_root.is_none().then(|| Editable {
                matcher: matcher.clone(),
                config: WrittenHook {
                    kind,
                    command: (kind == "command").then(|| text.clone()),
                    url: (kind == "http").then(|| text.clone()),
                    prompt: matches!(kind, "prompt" | "agent").then(|| text.clone()),
                    timeout,
                },
            });
            hooks.push(HookRow {
                event: name,
                matcher,
                source,
                source_label,
                kind,
                display_text: text.clone(),
                command_text: text,
                content_label: label,
                timeout,
                editable,
            });
        }
    }
    HooksListing {
        events,
        hooks,
        event_catalog: EVENT_CATALOG
            .iter()
            .map(|&(name, summary, supports_matcher)| CatalogRow {
                name,
                summary,
                supports_matcher,
            })
            .collect(),
        policy: HookPolicy {
            disabled_by_policy: false,
            managed_only: false,
            plugin_only: false,
            all_disabled: false,
            policy_hook_count: 0,
        },
    }
}

#[derive(Serialize)]
struct SkillsAnswer {
    skills: Vec<super::wire::CommandEntry>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PluginsAnswer {
    commands: Vec<super::wire::CommandEntry>,
    agents: Vec<AgentRow>,
    plugins: Vec<PluginRow>,
    mcp_servers: Vec<super::wire::McpServerStatus>,
    #[serde(rename = "error_count")]
    error_count: usize,
}

#[derive(Serialize)]
struct AgentRow {
    name: String,
    description: String,
}

#[derive(Serialize)]
struct PluginRow {
    name: String,
    path: String,
    source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
}

fn plugins_answer(engine: &Engine) -> PluginsAnswer {
    let snap = engine.snapshot.load();
    let kind = snap.session_kind(false);
    PluginsAnswer {
        commands: super::listings::command_list(&snap),
        agents: snap
            .visible_agents(kind)
            .iter()
            .map(|d| AgentRow {
                name: d.name.clone(),
                description: d.description.clone(),
            })
            .collect(),
        plugins: snap
            .config
            .plugins
            .iter()
            .map(|p| PluginRow {
                name: p.name.clone(),
                path: p.path.display().to_string(),
                source: p.source.clone(),
                version: p.version.clone(),
            })
            .collect(),
        mcp_servers: super::listings::server_statuses(&engine.mcp),
        error_count: snap
            .diagnostics
            .iter()
            .filter(|d| d.severity == crate::diagnostic::Severity::Error)
            .count(),
    }
}

#[derive(Serialize)]
struct ModelsAnswer {
    models: Vec<super::wire::ModelEntry>,
}

// ---------------------------------------------------------------- usage

#[derive(Serialize)]
struct UsageAnswer {
    session: SessionUsage,
    /// No claude.ai plan: cadre runs on API keys.
    subscription_type: Option<String>,
    rate_limits_available: bool,
    rate_limits: Option<Value>,
    behaviors: Option<Value>,
}

#[derive(Serialize)]
struct SessionUsage {
    total_cost_usd: f64,
    total_api_duration_ms: u64,
    total_duration_ms: u64,
    total_lines_added: u64,
    total_lines_removed: u64,
    model_usage: BTreeMap<String, super::wire::ModelUsage>,
}

fn usage_answer(ctx: &Ctx) -> UsageAnswer {
    let a = ctx.emitter.accounts();
    UsageAnswer {
        session: SessionUsage {
            total_cost_usd: a.cost,
            total_api_duration_ms: a.api_ms,
            total_duration_ms: u64::try_from(ctx.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            total_lines_added: 0,
            total_lines_removed: 0,
            model_usage: a.model_usage,
        },
        subscription_type: None,
        rate_limits_available: false,
        rate_limits: None,
        behaviors: None,
    }
}

#[derive(Serialize)]
struct CostAnswer {
    text: String,
}

/// `/cost`'s text, in Claude Code's layout.
fn cost_text(ctx: &Ctx) -> String {
    let a = ctx.emitter.accounts();
    let secs = |ms: u64| format!("{}s", ms / 1000);
    let wall = u64::try_from(ctx.started.elapsed().as_millis()).unwrap_or(u64::MAX);
    format!(
        "Estimated cost:        ${:.4}\n\
         Total duration (API):  {}\n\
         Total duration (wall): {}\n\
         Total code changes:    0 lines added, 0 lines removed\n\
         Usage:                 {} input, {} output, {} cache read, {} cache write",
        a.cost,
        secs(a.api_ms),
        secs(wall),
        a.usage.input_tokens,
        a.usage.output_tokens,
        a.usage.cache_read_input_tokens,
        a.usage.cache_creation_input_tokens,
    )
}

#[derive(Serialize)]
struct Cancelled {
    cancelled: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_of_later_layers_join_and_objects_merge() {
        let mut acc = serde_json::from_str::<Map<String, Value>>(
            r#"{"permissions": {"allow": ["Read"], "defaultMode": "default"}, "model": "a"}"#,
        )
        .unwrap();
        let layer = serde_json::from_str::<Map<String, Value>>(
            r#"{"permissions": {"allow": ["Bash", "Read"], "defaultMode": "plan"}, "model": "b"}"#,
        )
        .unwrap();
        deep_merge(&mut acc, &layer);
        assert_eq!(
            Value::Object(acc),
            serde_json::json!({"permissions": {"allow": ["Read", "Bash"], "defaultMode": "plan"}, "model": "b"})
        );
    }

    #[test]
    fn rules_are_worded_as_claude_code_words_them() {
        let w = |r: &str| serde_json::to_value(rule_words(r)).unwrap();
        assert_eq!(w("Bash"), serde_json::json!({"prefix": "Any Bash command"}));
        assert_eq!(
            w("Bash(git:*)"),
            serde_json::json!({"prefix": "Any Bash command starting with ", "emphasis": "git"})
        );
        assert_eq!(
            w("Bash(ls *)"),
            serde_json::json!({"prefix": "Any Bash command starting with ", "emphasis": "ls"})
        );
        assert_eq!(
            w("Bash(npm test)"),
            serde_json::json!({"prefix": "The Bash command ", "emphasis": "npm test"})
        );
        assert_eq!(
            w("mcp__x__y"),
            serde_json::json!({"prefix": "Any use of the ", "emphasis": "mcp__x__y", "suffix": " tool"})
        );
        assert_eq!(w("Read(./src/**)"), Value::Null);
        assert_eq!(w("WebFetch(domain:example.com)"), Value::Null);
    }

    #[test]
    fn a_path_is_not_needed_for_a_layer_given_inline() {
        let f = LayerFile {
            scope: Scope::Flag,
            path: PathBuf::from("apply_flag_settings"),
            format: crate::config::layers::Format::Claude,
            read: true,
            inline: Some(r#"{"model": "x"}"#.into()),
        };
        assert_eq!(layer_json(&f).unwrap()["model"], "x");
    }
}

/// The session's working directory (the process's: the SDKs start cadre
/// in it).
fn cwd() -> Result<PathBuf, String> {
    std::env::current_dir().map_err(|e| format!("the working directory: {e}"))
}

#[derive(Serialize)]
struct BinaryVersion {
    version: &'static str,
}

#[derive(Serialize)]
struct OutputStyles {
    available_output_styles: Vec<String>,
}

#[derive(Serialize)]
struct Suggestions {
    suggestions: Vec<Suggestion>,
    cwd: String,
}

#[derive(Serialize)]
struct Suggestion {
    path: String,
}

/// Entries looked at for one `file_suggestions` request.
const SUGGESTION_WALK_LIMIT: usize = 20_000;
/// Suggestions returned.
const SUGGESTIONS: usize = 15;

/// Files and folders under the working directory whose path holds
/// `query` (case aside), shortest first; ignored files (`.gitignore`) and
/// what the rules forbid reading left out.
fn file_suggestions(engine: &Engine, query: &str) -> Suggestions {
    let Ok(root) = cwd() else {
        return Suggestions {
            suggestions: Vec::new(),
            cwd: String::new(),
        };
    };
    let snap = engine.snapshot.load();
    let wanted = query.trim_start_matches('@').to_lowercase();
    let mut found: Vec<String> = ignore::WalkBuilder::new(&root)
        .hidden(false)
        .require_git(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build()
        .flatten()
        .take(SUGGESTION_WALK_LIMIT)
        .filter(|e| e.depth() > 0 && !snap.rules.hides("Read", e.path(), &root))
        .filter_map(|e| {
            let rel = e.path().strip_prefix(&root).ok()?.display().to_string();
            let dir = e.file_type().is_some_and(|t| t.is_dir());
            rel.to_lowercase()
                .contains(&wanted)
                .then(|| if dir { format!("{rel}/") } else { rel })
        })
        .collect();
    found.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    found.truncate(SUGGESTIONS);
    Suggestions {
        suggestions: found.into_iter().map(|path| Suggestion { path }).collect(),
        cwd: root.display().to_string(),
    }
}

#[derive(Serialize)]
struct FileContents {
    contents: String,
    #[serde(rename = "absPath")]
    abs_path: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    encoding: Option<&'static str>,
    /// utf-8 only: bytes that were not UTF-8 were replaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    lossy: Option<bool>,
    requested_path: String,
}

/// `read_file`'s default bound, as Claude Code's (1 MB).
const READ_FILE_DEFAULT_BYTES: u64 = 1 << 20;
/// The most one `read_file` reads, whatever it asks.
const READ_FILE_MAX_BYTES: u64 = 16 << 20;

/// A file inside the working directory or an added folder (links
/// resolved first), not hidden by the rules, read up to `max_bytes`.
fn read_file(
    engine: &Engine,
    path: &str,
    max_bytes: Option<u64>,
    encoding: Option<&str>,
) -> Result<FileContents, String> {
    use std::io::Read as _;
    let base64 = match encoding {
        None | Some("utf-8") => false,
        Some("base64") => true,
        Some(other) => return Err(format!("read_file: unknown encoding {other:?}")),
    };
    let root = cwd()?;
    let snap = engine.snapshot.load();
    let denied = || format!("read denied: {path}");
    let real = std::fs::canonicalize(root.join(path)).map_err(|e| format!("{path}: {e}"))?;
    let inside = std::iter::once(root.clone())
        .chain(engine.added_dirs(&snap, &root))
        .filter_map(|d| std::fs::canonicalize(d).ok())
        .any(|d| real.starts_with(d));
    if !inside || snap.rules.hides("Read", &real, &root) {
        return Err(denied());
    }
    if !std::fs::metadata(&real).is_ok_and(|m| m.is_file()) {
        return Err(format!("read_file: {path} is not a file"));
    }
    let max = max_bytes
        .unwrap_or(READ_FILE_DEFAULT_BYTES)
        .min(READ_FILE_MAX_BYTES);
    let file = std::fs::File::open(&real).map_err(|e| format!("{path}: {e}"))?;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{path}: {e}"))?;
    let truncated = bytes.len() as u64 > max;
    bytes.truncate(usize::try_from(max).unwrap_or(usize::MAX));
    let (contents, encoding, lossy) = if base64 {
        use base64::Engine as _;
        let text = base64::engine::general_purpose::STANDARD.encode(&bytes);
        (text, Some("base64"), None)
    } else {
        match String::from_utf8(bytes) {
            Ok(text) => (text, None, Some(false)),
            Err(e) => (
                String::from_utf8_lossy(e.as_bytes()).into_owned(),
                None,
                Some(true),
            ),
        }
    };
    Ok(FileContents {
        contents,
        abs_path: real.display().to_string(),
        truncated,
        encoding,
        lossy,
        requested_path: path.to_string(),
    })
}

/// Adds another repository's folder to the session's folders (as an
/// `addDirectories` permission update for the session does). The working
/// directory itself is refused with Claude Code's words.
fn register_repo_root(engine: &Engine, directory: &str) -> Result<(), String> {
    let root = cwd()?;
    let dir = std::fs::canonicalize(root.join(directory))
        .map_err(|e| format!("register_repo_root: {directory}: {e}"))?;
    if std::fs::canonicalize(&root).is_ok_and(|r| r == dir) {
        return Err(format!(
            "register_repo_root: {directory} is the session's working directory, which is \
             already registered; pass the cloned repo's own directory instead"
        ));
    }
    if !dir.is_dir() {
        return Err(format!("register_repo_root: {directory} is not a folder"));
    }
    let mut grants = engine
        .grants
        .lock()
        .map_err(|_| "register_repo_root: the session's grants are unavailable".to_string())?;
    grants.apply(&crate::runtime::grants::PermissionUpdate::AddDirectories(
        vec![dir],
    ));
    Ok(())
}

/// Claude Code's transcript line naming a session (what the SDKs'
/// `list_sessions` shows as its title).
#[derive(Serialize)]
struct CustomTitle<'a> {
    #[serde(rename = "customTitle")]
    custom_title: &'a str,
    #[serde(rename = "sessionId")]
    session_id: &'a str,
}

/// Names the session: a `custom-title` line in its transcript, and
/// `system`/`session_title_changed` on stdout.
fn rename_session(
    engine: &Engine,
    ctx: &Ctx,
    title: &str,
    session_id: Option<&str>,
) -> Result<(), String> {
    let title = title.trim();
    if title.is_empty() {
        return Err("rename_session: the title is empty".into());
    }
    if session_id.is_some_and(|id| id != engine.session_id) {
        return Err(format!(
            "rename_session: the session is now {}, not the one named",
            engine.session_id
        ));
    }
    let Some(transcript) = &ctx.transcript else {
        return Err("rename_session: the session has no transcript".into());
    };
    transcript.record_line(
        "custom-title",
        &CustomTitle {
            custom_title: title,
            session_id: &engine.session_id,
        },
    );
    super::emit::send(&super::wire::Output::System(
        super::wire::System::SessionTitleChanged(super::wire::SessionTitleChanged {
            title: title.to_string(),
            uuid: super::wire::new_uuid(),
            session_id: engine.session_id.clone(),
        }),
    ));
    Ok(())
}
