//! One connection to an MCP server through the official Rust SDK (`rmcp`):
//! a child process spoken to over stdio, or a streamable-HTTP endpoint.
//! Connecting lists the server's tools once; closing ends the session and,
//! for stdio, the process.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResponse, JsonObject};
use rmcp::service::{Peer, RunningService, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::Value;

use crate::config::McpServerConfig;

/// How long connecting (start, handshake, tool list) may take before the
/// server counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a server could not be used.
#[derive(Debug, Clone, thiserror::Error, miette::Diagnostic)]
pub enum McpError {
    #[error("cannot start `{command}`: {message}")]
    Spawn { command: String, message: String },
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
    #[error("transport type `{0}` is not supported (use `stdio` or `http`)")]
    UnsupportedType(String),
    #[error(
        "the legacy SSE transport (`type: \"sse\"`) is not supported; \
         most servers also serve streamable HTTP (often at `/mcp`): use `type: \"http\"` with that URL"
    )]
    Sse,
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
    stderr: tokio::process::ChildStderr,
    tail: Arc<StderrTail>,
    command: String,
) -> tokio::task::JoinHandle<()> {
    use tokio::io::AsyncBufReadExt;
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(server = %command, "stderr: {line}");
            tail.push(&line);
        }
    })
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
    service: Mutex<Option<RunningService<RoleClient, ()>>>,
    pub tools: Vec<ServerTool>,
    /// The server process, for stdio servers.
    pub pid: Option<u32>,
    /// What a stdio server wrote on stderr lately.
    pub stderr: Arc<StderrTail>,
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
    pub async fn connect(config: &McpServerConfig, cwd: &Path) -> Result<Connection, ConnectError> {
        let tail = Arc::new(StderrTail::default());
        let mut reader = None;
        let result = tokio::time::timeout(
            CONNECT_TIMEOUT,
            Self::connect_inner(config, cwd, &tail, &mut reader),
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
        tail: &Arc<StderrTail>,
        reader: &mut Option<tokio::task::JoinHandle<()>>,
    ) -> Result<Connection, McpError> {
        match config.kind.as_deref() {
            None | Some("stdio" | "http" | "streamable-http") => {}
            Some("sse") => return Err(McpError::Sse),
            Some(kind) => return Err(McpError::UnsupportedType(kind.to_string())),
        }
        let (service, pid) = match (&config.command, &config.url) {
            (Some(command), _) => {
                let mut cmd = tokio::process::Command::new(command);
                config.child_env.clone().unwrap_or_default().apply(&mut cmd);
                cmd.args(&config.args)
                    .envs(&config.env)
                    .current_dir(cwd)
                    .kill_on_drop(true);
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| McpError::Spawn {
                        command: command.clone(),
                        message: e.to_string(),
                    })?;
                if let Some(stderr) = stderr {
                    *reader = Some(read_stderr(stderr, Arc::clone(tail), command.clone()));
                }
                let pid = transport.id();
                let service =
                    ().serve(transport)
                        .await
                        .map_err(|e| McpError::Handshake(e.to_string()))?;
                (service, pid)
            }
            (None, Some(url)) => {
                let mut headers = HashMap::new();
                for (k, v) in &config.headers {
                    let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                        .map_err(|_| McpError::Header(k.clone()))?;
                    let value = reqwest::header::HeaderValue::from_str(v)
                        .map_err(|_| McpError::Header(k.clone()))?;
                    headers.insert(name, value);
                }
                let client = reqwest::Client::builder()
                    .build()
                    .map_err(|e| McpError::Http(e.to_string()))?;
                let transport = StreamableHttpClientTransport::with_client(
                    client,
                    StreamableHttpClientTransportConfig::with_uri(url.as_str())
                        .custom_headers(headers),
                );
                let service =
                    ().serve(transport)
                        .await
                        .map_err(|e| McpError::Handshake(e.to_string()))?;
                (service, None)
            }
            (None, None) => return Err(McpError::NoTransport),
        };
        let peer = service.peer().clone();
        let listed = peer
            .list_all_tools()
            .await
            .map_err(|e| McpError::ListTools(e.to_string()))?;
        let tools = listed
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
            .collect();
        Ok(Connection {
            peer,
            service: Mutex::new(Some(service)),
            tools,
            pid,
            stderr: Arc::clone(tail),
        })
    }

    /// Calls one tool. `Ok` is the result text and whether the server
    /// marked it as an error; `Err` is a protocol or transport failure.
    pub async fn call(&self, tool: &str, input: Value) -> Result<(String, bool), String> {
        let mut params = CallToolRequestParams::new(tool.to_string());
        if let Value::Object(map) = input {
            params = params.with_arguments(JsonObject::from_iter(map));
        }
        match self.peer.call_tool_once(params).await {
            Ok(CallToolResponse::Complete(result)) => {
                let is_error = result.is_error.unwrap_or(false);
                let mut parts: Vec<String> = result
                    .content
                    .iter()
                    .filter_map(|c| serde_json::to_value(c).ok())
                    .map(|c| content_text(&c))
                    .collect();
                if parts.is_empty()
                    && let Some(s) = &result.structured_content
                {
                    parts.push(s.to_string());
                }
                Ok((parts.join("\n"), is_error))
            }
            Ok(_) => Err("the server asked for more input, which cadre does not support".into()),
            Err(e) => Err(e.to_string()),
        }
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

/// One content block as text: text as is, other kinds as a short marker.
fn content_text(c: &Value) -> String {
    let field = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
    match field("type") {
        "text" => field("text").to_string(),
        "image" | "audio" => format!("[{}: {}]", field("type"), field("mimeType")),
        "resource" => {
            let r = c.get("resource").cloned().unwrap_or(Value::Null);
            match r.get("text").and_then(Value::as_str) {
                Some(t) => t.to_string(),
                None => format!(
                    "[resource: {}]",
                    r.get("uri").and_then(Value::as_str).unwrap_or("")
                ),
            }
        }
        "resource_link" => format!("[resource link: {}]", field("uri")),
        _ => c.to_string(),
    }
}
