//! One connection to an MCP server through the official Rust SDK (`rmcp`):
//! a child process spoken to over stdio, a streamable-HTTP endpoint, or a
//! legacy HTTP+SSE server through cadre's own transport ([`super::sse`]).
//! Connecting lists the server's tools once; closing ends the session and,
//! for stdio, the process.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[allow(deprecated)]
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, Implementation, JsonObject, ListRootsResult, Root,
};
use rmcp::service::{Peer, RequestContext, RunningService, ServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::Value;

use super::progress::in_order;
use super::stdio::{StdioServer, client_transport};
use crate::tools::outcome::McpPart;

use crate::config::McpServerConfig;

/// How long connecting (start, handshake, tool list) may take before the
/// server counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a server could not be used.
#[derive(Debug, Clone, thiserror::Error, miette::Diagnostic)]
pub enum McpError {
    #[error("cannot start `{command}`: {message}")]
    Spawn {
        command: String,
        message: String,
        /// The command was not found (`ENOENT`).
        not_found: bool,
    },
    #[error("invalid header `{0}`")]
    Header(String),
    #[error("cannot build the HTTP client: {0}")]
    Http(String),
    #[error("handshake failed: {0}")]
    Handshake(String),
    #[error("listing tools failed: {0}")]
    ListTools(String),
    #[error("timed out after {0} s while connecting")]
    Timeout(u64),
    #[error("the configuration has neither `command` nor `url`")]
    NoTransport,
    #[error(
        "an SDK server (`type: \"sdk\"`) lives in the Agent SDK program that started cadre; \
         none is connected (it needs `--input-format stream-json`)"
    )]
    NoSdkClient,
    #[error("transport type `{0}` is not supported (use `stdio`, `http` or `sse`)")]
    UnsupportedType(String),
    #[error(
        "the server asks for OAuth authorization ({challenge}): sign in with \
         `cadre mcp login {server}`, or get a token another way and give it in `headers` \
         (`Authorization = \"Bearer …\"`)"
    )]
    OAuth { server: String, challenge: String },
    #[error("{0}")]
    Token(String),
    /// The legacy HTTP+SSE transport's stream could not be opened.
    #[error("cannot open the SSE stream: {0}")]
    SseConnect(String),
    /// The legacy HTTP+SSE server named no usable message endpoint.
    #[error("the SSE server's `endpoint` event: {0}")]
    SseEndpoint(String),
}

/// How a connection attempt or a connection ended, for telemetry.
pub(super) enum Outcome<'a> {
    Connected,
    Failed(&'a ConnectError),
    /// A connected server ended the connection on its own.
    Gone,
}

/// One `claude_code.mcp_server_connection` event for the server `name`:
/// `duration_ms` is the time since `since` (the attempt's start, or for
/// [`Outcome::Gone`] the moment it connected).
pub(super) fn note_connection(
    name: &str,
    config: &McpServerConfig,
    since: std::time::Instant,
    outcome: Outcome<'_>,
) {
    use crate::config::observed::{McpConnection, Observed, note};
    let transport = match (&config.kind, &config.command) {
        (Some(kind), _) => kind.clone(),
        (None, Some(_)) => "stdio".to_string(),
        (None, None) => "http".to_string(),
    };
    let failed = match outcome {
        Outcome::Failed(e) => Some(e),
        Outcome::Connected | Outcome::Gone => None,
    };
    note(Observed::McpConnection(McpConnection {
        server: name.to_string(),
        transport,
        error: failed.map(|e| e.error.to_string()),
        error_code: failed.map(|e| e.error.code()),
        scope: config.scope,
        disconnected: matches!(outcome, Outcome::Gone),
        plugin_source: config.plugin.clone(),
        duration_ms: u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX),
        at: std::time::SystemTime::now(),
    }));
}

impl McpError {
    /// A short code for why a connection failed, the same whatever the
    /// words (telemetry's `error_code`, sent without the details switch as
    /// Claude Code sends its own): `ENOENT` and `CONNECT_TIMEOUT` as Claude
    /// Code names them, the others cadre's.
    pub fn code(&self) -> &'static str {
        match self {
            McpError::Spawn {
                not_found: true, ..
            } => "ENOENT",
            McpError::Spawn { .. } => "SPAWN_FAILED",
            McpError::Header(_) => "INVALID_HEADER",
            McpError::Http(_) => "HTTP_CLIENT",
            McpError::Handshake(_) => "HANDSHAKE_FAILED",
            McpError::ListTools(_) => "LIST_TOOLS_FAILED",
            McpError::Timeout(_) => "CONNECT_TIMEOUT",
            McpError::NoTransport => "NO_TRANSPORT",
            McpError::NoSdkClient => "NO_SDK_CLIENT",
            McpError::UnsupportedType(_) => "UNSUPPORTED_TRANSPORT",
            McpError::OAuth { .. } => "AUTH_REQUIRED",
            McpError::Token(_) => "TOKEN_FAILED",
            McpError::SseConnect(_) => "SSE_CONNECT_FAILED",
            McpError::SseEndpoint(_) => "SSE_ENDPOINT",
        }
    }
}

/// Why a tool call got no result. The model is told it as data (`kind`,
/// and `detail`: rmcp's or the server's own words) worded by the
/// `error_mcp_call` template; `Display` is for people.
#[derive(Debug, Clone, thiserror::Error, serde::Serialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum CallError {
    /// The transport or the protocol failed (rmcp's words).
    #[error("{0}")]
    Protocol(String),
    #[error("the server answered the tool call with something else")]
    UnexpectedAnswer,
    #[error(
        "the server runs this tool as an MCP task of a newer protocol revision (SEP-2663), \
         which cadre does not support yet"
    )]
    NewerTask,
    #[error("the server asked for more input, which cadre does not support")]
    MoreInput,
    #[error("{method} failed: {error}")]
    Request { method: String, error: String },
    #[error("the server runs `{0}` only as an MCP task, but did not start one when asked")]
    NoTask(String),
    #[error("the MCP task failed: {0}")]
    TaskFailed(String),
    #[error("the server cancelled the MCP task")]
    TaskCancelled,
    #[error("the MCP task's result is not a tool result")]
    TaskResult,
    /// The server's answer was longer than cadre takes from a server.
    #[error(
        "its answer was {bytes} bytes, longer than the limit of {limit} bytes for one MCP \
         message, and was dropped"
    )]
    MessageTooLong { bytes: u64, limit: u64 },
}

/// A failed request as the model is told it: the answer cadre put in
/// place of an over-long one is named as such, the rest in rmcp's words.
fn call_error(e: rmcp::ServiceError) -> CallError {
    if let rmcp::ServiceError::McpError(data) = &e
        && let Some((bytes, limit)) = super::stdio::too_long(data)
    {
        return CallError::MessageTooLong { bytes, limit };
    }
    CallError::Protocol(e.to_string())
}

/// Why connecting failed, with the last lines the server wrote on stderr
/// (stdio servers only; empty otherwise).
#[derive(Debug, Clone)]
pub struct ConnectError {
    pub error: McpError,
    pub stderr: Vec<String>,
}

/// How many of a server's last stderr lines are kept, and how long each
/// may be (longer lines are cut).
const STDERR_LINES: usize = 20;
const STDERR_LINE_CHARS: usize = 400;
/// What is read of one stderr line at most (the rest is skipped unread
/// into memory): enough for [`STDERR_LINE_CHARS`] characters of any width.
const STDERR_LINE_BYTES: usize = 4 * STDERR_LINE_CHARS;

/// The last lines a stdio server wrote on stderr. The server's stderr is
/// read continuously (so a chatty server never blocks on a full pipe);
/// each line is also logged at debug level.
#[derive(Debug, Default)]
pub struct StderrTail {
    lines: Mutex<VecDeque<String>>,
}

impl StderrTail {
    fn push(&self, line: &str) {
        let mut line: String = line.trim_end().to_string();
        if let Some((cut, _)) = line.char_indices().nth(STDERR_LINE_CHARS) {
            line.truncate(cut);
            line.push('…');
        }
        let mut lines = self
            .lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }
}

/// Reads `stderr` line by line into `tail` until it closes.
fn read_stderr(
    stderr: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    tail: Arc<StderrTail>,
    command: String,
) -> tokio::task::JoinHandle<()> {
    use crate::raw::lines::{Line, next_line};
    tokio::spawn(async move {
        let mut reader = tokio::io::BufReader::new(stderr);
        let mut buf = Vec::new();
        loop {
            // A line longer than the cap keeps only its head: a server
            // that writes without a newline costs no memory.
            let mut head = Vec::new();
            let keep = |bytes: &[u8]| {
                let room = STDERR_LINE_BYTES.saturating_sub(head.len());
                head.extend_from_slice(&bytes[..bytes.len().min(room)]);
            };
            let line = match next_line(&mut reader, &mut buf, STDERR_LINE_BYTES, keep).await {
                Ok(Some(Line::Whole)) => String::from_utf8_lossy(&buf).into_owned(),
                Ok(Some(Line::TooLong(_))) => String::from_utf8_lossy(&head).into_owned(),
                Ok(None) | Err(_) => break,
            };
            tracing::debug!(server = %command, "stderr: {line}");
            tail.push(&line);
        }
    })
}

/// What cadre tells a server about itself, and how it answers the
/// server's requests: `roots` (the folders cadre works in), elicitation
/// (put to the user when an elicitor is set, declined otherwise), and
/// sampling when a sampler is set.
#[derive(Clone)]
pub struct Client {
    /// The server's configured name, for messages.
    pub server: String,
    /// The working directory, then the added directories.
    pub roots: Vec<std::path::PathBuf>,
    /// Answers `sampling/createMessage` (only with `mcp.sampling` on).
    pub sampler: Option<super::Sampler>,
    /// Puts a server's requests for input to the user; `None` declines them.
    pub elicitor: Option<super::Elicitor>,
    /// Asked before the elicitor (they may answer instead) and after it
    /// (they may change the answer).
    pub elicit_hooks: Option<super::ElicitHooks>,
    /// Routes the server's progress notifications to the call that asked
    /// for them (by progress token).
    pub progress: super::progress::Progress,
    /// Called when the server says its tool list changed.
    pub on_tools_changed: Option<Arc<dyn Fn() + Send + Sync>>,
    /// Reaches in-process servers of an SDK client (`type: "sdk"`).
    pub local: Option<LocalConnector>,
}

/// Opens a byte stream to an in-process server by name (newline-delimited
/// JSON-RPC, as over stdio); `None` when there is no such server. An SDK
/// client's servers are reached this way: the other end of the stream is
/// carried over the control protocol by the `cli`.
pub type LocalConnector = Arc<dyn Fn(&str) -> Option<tokio::io::DuplexStream> + Send + Sync>;

// Roots are deprecated by a newer protocol revision (SEP-2577) that cadre's
// servers do not speak yet; they still ask for them.
#[allow(deprecated)]
impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        // (rmcp's capability builder exists only with its server feature.)
        let mut caps = ClientCapabilities::default();
        caps.roots = Some(Default::default());
        // Form requests always (declined where nobody can answer); URL
        // requests only where someone can open the page.
        let mut elicitation = rmcp::model::ElicitationCapability::default();
        elicitation.form = Some(Default::default());
        if self.elicitor.is_some() {
            elicitation.url = Some(Default::default());
        }
        caps.elicitation = Some(elicitation);
        if self.sampler.is_some() {
            caps.sampling = Some(Default::default());
        }
        ClientConfig::new(
            caps,
            Implementation::new("cadre", env!("CARGO_PKG_VERSION")),
        )
    }

    // (Progress notifications are not handled here, on a task of their
    // own, but by the transport as they arrive: see `super::progress`.)

    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        if let Some(f) = &self.on_tools_changed {
            f();
        }
    }

    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, ErrorData> {
        let Some(sampler) = &self.sampler else {
            return Err(ErrorData::invalid_request(
                "sampling is off in cadre (mcp.sampling = false)",
                None,
            ));
        };
        let messages = super::sampling::to_messages(&params)
            .map_err(|e| ErrorData::invalid_params(e, None))?;
        let sample = super::Sample {
            server: self.server.clone(),
            system: params.system_prompt.clone(),
            messages,
            max_tokens: params.max_tokens,
        };
        let answer = sampler(sample).await.map_err(|e| match e {
            // The MCP specification's code for a request the user rejected.
            super::SampleError::Refused(why) => {
                ErrorData::new(rmcp::model::ErrorCode(-1), why, None)
            }
            super::SampleError::Failed(why) => ErrorData::internal_error(why, None),
        })?;
        let mut result = rmcp::model::CreateMessageResult::new(
            rmcp::model::SamplingMessage::assistant_text(answer.text),
            answer.model,
        );
        result.stop_reason = answer.stop_reason;
        Ok(result)
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let roots = self
            .roots
            .iter()
            .filter_map(|p| {
                let uri = reqwest::Url::from_directory_path(p).ok()?;
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                let mut root = Root::new(uri.as_str().trim_end_matches('/'));
                root.name = name;
                Some(root)
            })
            .collect();
        Ok(ListRootsResult::new(roots))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let mut ask = super::Elicitation {
            server: self.server.clone(),
            message: String::new(),
            mode: "form",
            requested_schema: None,
            url: None,
            elicitation_id: None,
        };
        match &request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => {
                ask.message.clone_from(message);
                ask.requested_schema = serde_json::to_value(requested_schema).ok();
            }
            ElicitRequestParams::UrlElicitationParams {
                message,
                url,
                elicitation_id,
                ..
            } => {
                ask.message.clone_from(message);
                ask.mode = "url";
                ask.url = Some(url.clone());
                ask.elicitation_id = Some(elicitation_id.clone());
            }
            _ => {}
        }
        if let Some(hooks) = &self.elicit_hooks
            && let Some(answer) = (hooks.before)(ask.clone()).await
        {
            return Ok(elicit_result(answer));
        }
        let answer = match &self.elicitor {
            Some(elicitor) => elicitor(ask.clone()).await,
            None => {
                tracing::warn!(
                    "MCP server `{}` asked for input ({:?}); declined: this session cannot ask \
                     anyone (it is not interactive)",
                    self.server,
                    ask.message
                );
                super::ElicitAnswer::declined()
            }
        };
        let answer = match &self.elicit_hooks {
            Some(hooks) => (hooks.after)(ask, answer).await,
            None => answer,
        };
        Ok(elicit_result(answer))
    }
}

/// The protocol's form of an answer (values only with `accept`).
fn elicit_result(answer: super::ElicitAnswer) -> ElicitResult {
    let mut result = ElicitResult::new(match answer.action {
        super::ElicitAction::Accept => ElicitationAction::Accept,
        super::ElicitAction::Decline => ElicitationAction::Decline,
        super::ElicitAction::Cancel => ElicitationAction::Cancel,
    });
    if answer.action == super::ElicitAction::Accept {
        result.content = answer.content.map(Value::Object);
    }
    result
}

/// A tool as the server describes it.
#[derive(Debug, Clone)]
pub struct ServerTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub read_only: bool,
}

/// A live session with one server.
pub struct Connection {
    peer: Peer<RoleClient>,
    /// Taken by [`Connection::close`]; dropping it also ends the session.
    service: Mutex<Option<RunningService<RoleClient, Client>>>,
    pub tools: Vec<ServerTool>,
    /// The server process, for stdio servers.
    pub pid: Option<u32>,
    /// What a stdio server wrote on stderr lately.
    pub stderr: Arc<StderrTail>,
    /// The server declared the `resources` capability.
    pub resources: bool,
    /// Where the server's progress notifications go.
    progress: super::progress::Progress,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.server)
            .field("roots", &self.roots)
            .field("sampling", &self.sampler.is_some())
            .finish()
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("tools", &self.tools.len())
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Starts or reaches the server, completes the handshake and lists its
    /// tools. Stdio servers run in `cwd`.
    /// A stdio server's stderr is kept (its last lines) and returned
    /// with a failure.
    pub async fn connect(
        config: &McpServerConfig,
        cwd: &Path,
        handler: Client,
    ) -> Result<Connection, ConnectError> {
        let tail = Arc::new(StderrTail::default());
        let mut reader = None;
        let result = tokio::time::timeout(
            CONNECT_TIMEOUT,
            Self::connect_inner(config, cwd, handler, &tail, &mut reader),
        )
        .await;
        let error = match result {
            Ok(Ok(conn)) => return Ok(conn),
            Ok(Err(e)) => e,
            Err(_) => McpError::Timeout(CONNECT_TIMEOUT.as_secs()),
        };
        // The transport (and with it the process) is gone by now; give the
        // reader a moment to take the last lines the server wrote.
        if let Some(reader) = reader {
            let _ = tokio::time::timeout(Duration::from_secs(1), reader).await;
        }
        Err(ConnectError {
            error,
            stderr: tail.lines(),
        })
    }

    async fn connect_inner(
        config: &McpServerConfig,
        cwd: &Path,
        handler: Client,
        tail: &Arc<StderrTail>,
        reader: &mut Option<tokio::task::JoinHandle<()>>,
    ) -> Result<Connection, McpError> {
        let progress = handler.progress.clone();
        match config.kind.as_deref() {
            None | Some("stdio" | "http" | "streamable-http" | "sdk" | "sse") => {}
            Some(kind) => return Err(McpError::UnsupportedType(kind.to_string())),
        }
        let sdk = config.kind.as_deref() == Some("sdk");
        // A server that had connected and ends the connection on its own
        // is a `disconnected` event; one that fails before is a failed
        // connection, reported by the caller.
        let connected = Arc::new(std::sync::OnceLock::new());
        let gone = {
            let connected = Arc::clone(&connected);
            let (server, config) = (handler.server.clone(), config.clone());
            move || {
                if let Some(at) = connected.get() {
                    note_connection(&server, &config, *at, Outcome::Gone);
                }
            }
        };
        let (service, pid) = match (&config.command, &config.url) {
            _ if sdk => {
                let stream = handler
                    .local
                    .as_ref()
                    .and_then(|open| open(&handler.server))
                    .ok_or(McpError::NoSdkClient)?;
                let (read, write) = tokio::io::split(stream);
                let transport = client_transport(&handler.server, read, write);
                let service = handler
                    .serve(in_order(transport, progress.clone()).when_gone(gone))
                    .await
                    .map_err(|e| McpError::Handshake(e.to_string()))?;
                (service, None)
            }
            (Some(command), _) => {
                let mut cmd = tokio::process::Command::new(command);
                config.child_env.clone().unwrap_or_default().apply(&mut cmd);
                cmd.args(&config.args).envs(&config.env).current_dir(cwd);
                let (transport, stderr) =
                    StdioServer::spawn(cmd, &handler.server).map_err(|e| McpError::Spawn {
                        command: command.clone(),
                        message: e.to_string(),
                        not_found: e.kind() == std::io::ErrorKind::NotFound,
                    })?;
                if let Some(stderr) = stderr {
                    *reader = Some(read_stderr(stderr, Arc::clone(tail), command.clone()));
                }
                let pid = transport.id();
                let service = handler
                    .serve(in_order(transport, progress.clone()).when_gone(gone))
                    .await
                    .map_err(|e| McpError::Handshake(e.to_string()))?;
                (service, pid)
            }
            (None, Some(url)) if config.kind.as_deref() == Some("sse") => {
                let client = crate::provider::tls::client_builder()
                    .build()
                    .map_err(|e| McpError::Http(e.to_string()))?;
                let auth = super::oauth::authorized_client(&handler.server, url, client)
                    .await
                    .map_err(McpError::Token)?;
                let headers = header_map(config)?.into_iter().collect();
                let transport =
                    super::sse::SseTransport::connect(&handler.server, url, headers, auth).await?;
                let service = handler
                    .serve(in_order(transport, progress.clone()).when_gone(gone))
                    .await
                    .map_err(|e| McpError::Handshake(e.to_string()))?;
                (service, None)
            }
            (None, Some(url)) => {
                let headers = header_map(config)?;
                let client = crate::provider::tls::client_builder()
                    .build()
                    .map_err(|e| McpError::Http(e.to_string()))?;
                let transport_config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(headers);
                // A 401/403 challenge means the server wants an OAuth token
                // (one `cadre mcp login` stored, or a missing one).
                let server = handler.server.clone();
                let oauth_error = |e: rmcp::service::ClientInitializeError| match e.auth_challenge()
                {
                    Some(c) => McpError::OAuth {
                        server: server.clone(),
                        challenge: format!("WWW-Authenticate: {c}"),
                    },
                    None if e.is_authorization_required() => McpError::OAuth {
                        server: server.clone(),
                        challenge: "HTTP 401".into(),
                    },
                    None => McpError::Handshake(e.to_string()),
                };
                let service = match super::oauth::authorized_client(&server, url, client.clone())
                    .await
                    .map_err(McpError::Token)?
                {
                    Some(auth) => handler
                        .serve(
                            in_order(
                                StreamableHttpClientTransport::with_client(auth, transport_config),
                                progress.clone(),
                            )
                            .when_gone(gone),
                        )
                        .await
                        .map_err(oauth_error)?,
                    None => handler
                        .serve(
                            in_order(
                                StreamableHttpClientTransport::with_client(
                                    client,
                                    transport_config,
                                ),
                                progress.clone(),
                            )
                            .when_gone(gone),
                        )
                        .await
                        .map_err(oauth_error)?,
                };
                (service, None)
            }
            (None, None) => return Err(McpError::NoTransport),
        };
        let peer = service.peer().clone();
        let resources = peer
            .peer_info()
            .is_some_and(|i| i.capabilities.resources.is_some());
        let tools = fetch_tools(&peer).await?;
        let _ = connected.set(std::time::Instant::now());
        Ok(Connection {
            peer,
            service: Mutex::new(Some(service)),
            tools,
            pid,
            stderr: Arc::clone(tail),
            resources,
            progress,
        })
    }

    /// Calls one tool. `Ok` is the result (text, images, whether the server
    /// marked it as an error); `Err` is a protocol or transport failure.
    /// With `progress`, the call carries a progress token and each of the
    /// server's progress notifications for it becomes a line
    /// (`3/5: MESSAGE`). Dropping the future cancels the call: the server
    /// gets `notifications/cancelled`.
    pub async fn call(
        &self,
        tool: &str,
        input: Value,
        progress: Option<&crate::tools::ProgressFn>,
    ) -> Result<CallOutput, CallError> {
        let out = self.call_plain(tool, input.clone(), progress).await?;
        // A tool that runs only as an MCP task (taskSupport "required")
        // answers a plain call with this error; call it again as a task.
        // (rmcp drops the tool's `execution` field from the listing, so the
        // answer is the only sign.)
        let needs_task = out.parts.iter().any(
            |p| matches!(p, McpPart::Text { text } if text.contains("requires task augmentation")),
        );
        if out.is_error && needs_task {
            return super::task::call_as_task(&self.peer, tool, input, progress).await;
        }
        Ok(out)
    }

    async fn call_plain(
        &self,
        tool: &str,
        input: Value,
        progress: Option<&crate::tools::ProgressFn>,
    ) -> Result<CallOutput, CallError> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Value::Object(map) = input {
            params = params.with_arguments(JsonObject::from_iter(map));
        }
        // rmcp gives every request a progress token of its own; progress
        // notifications are matched to this call by it (those that come
        // before it subscribes are kept for it, `super::progress`).
        let handle = self
            .peer
            .send_request_with_option(
                rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
                    params,
                )),
                rmcp::service::PeerRequestOptions::no_options(),
            )
            .await
            .map_err(|e| CallError::Protocol(e.to_string()))?;
        let mut updates = match progress {
            Some(_) => Some(self.progress.subscribe(handle.progress_token.clone())),
            None => {
                self.progress.ignore(&handle.progress_token);
                None
            }
        };
        let mut guard = CancelOnDrop {
            peer: self.peer.clone(),
            id: Some(handle.id.clone()),
        };
        let call = handle.await_response();
        tokio::pin!(call);
        let response = loop {
            let next = async {
                match updates.as_mut() {
                    Some(u) => u.next().await,
                    None => std::future::pending().await,
                }
            };
            // Progress first: a report sent just before the answer is
            // already in `updates` when the answer comes (the transport
            // dispatched it as it read it, `super::progress`), and is shown
            // rather than lost to the answer.
            tokio::select! {
                biased;
                Some(p) = next => {
                    if let Some(report) = progress {
                        report(progress_line(&p));
                    }
                }
                r = &mut call => break r,
            }
        };
        guard.id = None;
        let response = response.map(|r| match r {
            rmcp::model::ServerResult::CallToolResult(r) => Ok(CallToolResponse::Complete(r)),
            rmcp::model::ServerResult::InputRequiredResult(r) => {
                Ok(CallToolResponse::InputRequired(r))
            }
            rmcp::model::ServerResult::CreateTaskResult(r) => Ok(CallToolResponse::Task(r)),
            _ => Err(CallError::UnexpectedAnswer),
        });
        let response = match response {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => return Err(e),
            Err(e) => Err(e),
        };
        match response {
            Ok(CallToolResponse::Complete(result)) => Ok(call_output(&result)),
            Ok(CallToolResponse::Task(_)) => Err(CallError::NewerTask),
            Ok(_) => Err(CallError::MoreInput),
            Err(e) => Err(call_error(e)),
        }
    }

    /// Lists the server's tools again (after it said they changed).
    pub async fn fetch_tools(&self) -> Result<Vec<ServerTool>, McpError> {
        fetch_tools(&self.peer).await
    }

    /// Whether the server declared the `prompts` capability.
    pub fn has_prompts(&self) -> bool {
        self.peer
            .peer_info()
            .is_some_and(|i| i.capabilities.prompts.is_some())
    }

    /// Every prompt the server lists, as MCP JSON objects (`name`,
    /// `description`, `arguments`).
    pub async fn list_prompts(&self) -> Result<Vec<Value>, String> {
        let listed = self
            .peer
            .list_all_prompts()
            .await
            .map_err(|e| e.to_string())?;
        Ok(listed
            .iter()
            .filter_map(|p| serde_json::to_value(p).ok())
            .collect())
    }

    /// One prompt's messages, as MCP JSON objects (`role`, `content`).
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> Result<Vec<Value>, String> {
        let mut params = rmcp::model::GetPromptRequestParams::new(name);
        if !arguments.is_empty() {
            params = params.with_arguments(JsonObject::from_iter(arguments));
        }
        let result = self
            .peer
            .get_prompt(params)
            .await
            .map_err(|e| e.to_string())?;
        Ok(result
            .messages
            .iter()
            .filter_map(|m| serde_json::to_value(m).ok())
            .collect())
    }

    /// Every resource the server lists (all pages), as MCP JSON objects
    /// (`uri`, `name`, `mimeType`, `description`, …).
    pub async fn list_resources(&self) -> Result<Vec<Value>, String> {
        let listed = self
            .peer
            .list_all_resources()
            .await
            .map_err(|e| e.to_string())?;
        Ok(listed
            .iter()
            .filter_map(|r| serde_json::to_value(r).ok())
            .collect())
    }

    /// Reads one resource: its contents as the model gets them (text, and
    /// images as image sources; other binaries as a line naming them).
    pub async fn read_resource(&self, uri: &str) -> Result<CallOutput, String> {
        let result = self
            .peer
            .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
            .await
            .map_err(|e| e.to_string())?;
        let mut out = CallOutput::default();
        let mut parts = Vec::new();
        for c in &result.contents {
            let Ok(v) = serde_json::to_value(c) else {
                continue;
            };
            match content_part(&serde_json::json!({"type": "resource", "resource": v})) {
                Part::Text(t) => parts.push(t),
                Part::Image(source) => out.images.push(source),
            }
        }
        out.parts = parts;
        Ok(out)
    }

    /// Reads one resource: its contents as the server sent them (for a
    /// host that renders them, not for a model).
    pub async fn read_resource_contents(&self, uri: &str) -> Result<Vec<Value>, String> {
        let result = self
            .peer
            .read_resource(rmcp::model::ReadResourceRequestParams::new(uri))
            .await
            .map_err(|e| e.to_string())?;
        Ok(result
            .contents
            .iter()
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect())
    }

    /// Ends the session; a stdio server's process is closed (and killed if
    /// it does not exit). Later calls fail.
    pub async fn close(&self) {
        let service = self.service.lock().ok().and_then(|mut s| s.take());
        if let Some(s) = service {
            let _ = s.cancel().await;
        }
    }
}

/// A server's configured `headers`, checked.
fn header_map(
    config: &McpServerConfig,
) -> Result<HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>, McpError> {
    let mut headers = HashMap::new();
    for (k, v) in &config.headers {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| McpError::Header(k.clone()))?;
        let value =
            reqwest::header::HeaderValue::from_str(v).map_err(|_| McpError::Header(k.clone()))?;
        headers.insert(name, value);
    }
    Ok(headers)
}

async fn fetch_tools(peer: &Peer<RoleClient>) -> Result<Vec<ServerTool>, McpError> {
    let listed = match peer.list_all_tools().await {
        Ok(listed) => listed,
        // A server with no tools may not answer `tools/list` at all (the
        // ACP adapter's own in-process server, when the editor lends it no
        // file or terminal access): no tools, not a failed server, as
        // Claude Code reads it.
        Err(rmcp::ServiceError::McpError(e))
            if e.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND =>
        {
            Vec::new()
        }
        Err(e) => return Err(McpError::ListTools(e.to_string())),
    };
    Ok(listed
        .into_iter()
        .map(|t| ServerTool {
            name: t.name.to_string(),
            description: t.description.map(|d| d.to_string()).unwrap_or_default(),
            input_schema: Value::Object((*t.input_schema).clone()),
            read_only: t
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false),
        })
        .collect())
}

/// One MCP content block (a prompt message's) as cadre content: text,
/// an image block, or what the `mcp_result` template makes of the rest
/// (resource links, binaries not shown).
pub(super) fn content_block(
    c: &Value,
    templates: &crate::templates::Templates,
) -> crate::message::ContentBlock {
    match content_part(c) {
        Part::Text(McpPart::Text { text }) => crate::message::ContentBlock::text(text),
        Part::Text(other) => crate::message::ContentBlock::text(
            templates.show(&crate::tools::outcome::McpResult { parts: vec![other] }),
        ),
        Part::Image(source) => crate::message::ContentBlock::Image { source },
    }
}

/// A tool result as the model gets it.
pub(super) fn call_output(result: &rmcp::model::CallToolResult) -> CallOutput {
    let mut out = CallOutput {
        is_error: result.is_error.unwrap_or(false),
        ..CallOutput::default()
    };
    let mut parts: Vec<McpPart> = Vec::new();
    for c in result
        .content
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok())
    {
        match content_part(&c) {
            Part::Text(t) => parts.push(t),
            Part::Image(source) => out.images.push(source),
        }
    }
    if parts.is_empty()
        && out.images.is_empty()
        && let Some(s) = &result.structured_content
    {
        parts.push(McpPart::Text {
            text: s.to_string(),
        });
    }
    out.parts = parts;
    out
}

/// Sends `notifications/cancelled` for a tool call whose future was
/// dropped before its answer came (the turn was cancelled).
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<rmcp::model::RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        rt.spawn(async move {
            let notification = rmcp::model::CancelledNotification::new(
                rmcp::model::CancelledNotificationParam::new(
                    Some(id),
                    Some("cancelled by the user".into()),
                ),
            );
            let _ = peer.send_notification(notification.into()).await;
        });
    }
}

/// One progress notification as a line: `3/5: MESSAGE`, `3: MESSAGE`
/// without a total, or the numbers alone.
fn progress_line(p: &rmcp::model::ProgressNotificationParam) -> String {
    let num = |x: f64| {
        if x.fract() == 0.0 && x.abs() < 1e15 {
            format!("{x:.0}")
        } else {
            format!("{x:.1}")
        }
    };
    let mut line = num(p.progress);
    if let Some(t) = p.total {
        line.push('/');
        line.push_str(&num(t));
    }
    if let Some(m) = p.message.as_deref().filter(|m| !m.is_empty()) {
        line.push_str(": ");
        line.extend(m.chars().take(200));
    }
    line
}

/// What a tool call returned, as the model gets it.
#[derive(Debug, Default, Clone)]
pub struct CallOutput {
    /// The text blocks, and everything shown as text (one per line).
    pub parts: Vec<McpPart>,
    /// Images as Anthropic `source` objects (`{"type": "base64",
    /// "media_type", "data"}`), in the order the server sent them.
    pub images: Vec<Value>,
    pub is_error: bool,
}

enum Part {
    Text(McpPart),
    Image(Value),
}

/// The image types a model accepts as image blocks.
const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The largest image (base64 characters) sent as an image block: the
/// Anthropic API's 5 MB per image, base64-encoded.
const MAX_IMAGE_BASE64: usize = 5 * 1024 * 1024 / 3 * 4;

/// An image as an image block when the model can take it, else a marker.
fn image_part(mime: &str, data: &str, uri: Option<String>) -> Part {
    if IMAGE_TYPES.contains(&mime) && data.len() <= MAX_IMAGE_BASE64 && !data.is_empty() {
        Part::Image(serde_json::json!({"type": "base64", "media_type": mime, "data": data}))
    } else {
        Part::Text(McpPart::Image {
            uri,
            mime: mime.to_string(),
            bytes: data.len(),
        })
    }
}

/// One MCP content block for the model: text as is; images (and embedded
/// image resources) as image blocks; embedded text resources as their
/// text; resource links and other binary content as a line of text that
/// names them (worded by the `mcp_result` template).
fn content_part(c: &Value) -> Part {
    let field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match field(c, "type").as_str() {
        "text" => Part::Text(McpPart::Text {
            text: field(c, "text"),
        }),
        "image" => image_part(&field(c, "mimeType"), &field(c, "data"), None),
        "audio" => Part::Text(McpPart::Audio {
            mime: field(c, "mimeType"),
        }),
        "resource" => {
            let r = c.get("resource").cloned().unwrap_or(Value::Null);
            let uri = field(&r, "uri");
            if let Some(t) = r.get("text").and_then(Value::as_str) {
                return Part::Text(McpPart::Text {
                    text: t.to_string(),
                });
            }
            let mime = field(&r, "mimeType");
            let blob = field(&r, "blob");
            if mime.starts_with("image/") {
                return image_part(&mime, &blob, Some(uri));
            }
            Part::Text(McpPart::Binary {
                uri,
                mime,
                bytes: blob.len(),
            })
        }
        "resource_link" => Part::Text(McpPart::Link {
            name: field(c, "name"),
            uri: field(c, "uri"),
            mime: field(c, "mimeType"),
            description: field(c, "description"),
        }),
        _ => Part::Text(McpPart::Text {
            text: c.to_string(),
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    /// An over-long stderr line is kept as its head (cut, marked) and the
    /// lines after it are read as usual; what is held of a line is capped
    /// by `next_line` (its own tests), whatever the server writes.
    #[tokio::test]
    async fn an_endless_stderr_line_keeps_its_head_and_the_next_lines() {
        let long = tokio::io::repeat(b'a').take(50 * 1024 * 1024);
        let rest: &'static [u8] = b"\nnext\n";
        let tail = Arc::new(StderrTail {
            lines: Mutex::new(VecDeque::new()),
        });
        read_stderr(long.chain(rest), Arc::clone(&tail), "noisy".into())
            .await
            .unwrap();
        let lines = tail.lines();
        assert_eq!(
            lines.len(),
            2,
            "{:?}",
            lines.iter().map(String::len).collect::<Vec<_>>()
        );
        assert_eq!(lines[0], format!("{}…", "a".repeat(STDERR_LINE_CHARS)));
        assert_eq!(lines[1], "next");
    }
}
