//! Model providers: the Anthropic Messages API and OpenAI-compatible chat
//! completions, both streaming, with retries.
//!
//! A provider turns a [`ModelRequest`] into one [`ModelResponse`], calling
//! back with stream events as they arrive. Retryable failures (429, 500,
//! 502, 503, 529, connection errors, a stream cut mid-message) are retried
//! with exponential backoff and jitter, honouring `retry-after`; others fail
//! at once with the provider's message. The API key never appears in an
//! error. This module knows nothing of tools or agents.
//!
//! Events emitted during an attempt that later fails are not taken back: a
//! listener sees `Retrying` and then the deltas of the next attempt from
//! the start, so a display should reset on `Retrying`.

mod anthropic;
mod openai;
mod problem;
mod retry;
pub(crate) mod sse;
mod text_tools;
pub mod tls;

use std::fmt;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use bytes::Bytes;

use futures_util::Stream;

use crate::config::{ProviderKind, ProviderSettings, ToolCallFallback};
use crate::message::{ModelRequest, ModelResponse, Sampling, ToolDefinition};
pub use problem::{ProviderProblem, ServerSaid};
use retry::Failure;
pub use sse::StreamLimits;

/// Something that happened while a response streamed in.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    TextDelta(String),
    ThinkingDelta(String),
    /// A piece of the signature of the thinking block streaming now.
    SignatureDelta(String),
    ToolUseStart {
        id: String,
        name: String,
    },
    /// An attempt failed and another will follow after `delay_ms`.
    Retrying {
        attempt: u32,
        delay_ms: u64,
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderErrorKind {
    /// The server answered with this HTTP status.
    Status(u16),
    /// Could not connect, or the connection failed.
    Network,
    /// No answer, or nothing on the stream, within
    /// `provider.idle_timeout_ms`.
    Timeout,
    /// The stream was cut, or ended before the message did; or the server
    /// reported an error inside it (then `server` says which).
    Stream,
    /// The answer is not what the API sends: not an event stream,
    /// malformed, not UTF-8, or past a size cap.
    BadResponse,
    /// The provider is misconfigured (no key, bad URL).
    Config,
}

/// A request that failed for good (after any retries).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ProviderError {
    pub kind: ProviderErrorKind,
    /// cadre's account of the failure, for people (the CLI, logs).
    pub message: String,
    /// What the server itself said, when it sent an error (its type and
    /// message); the model is told this, never `message`.
    pub server: Option<ServerSaid>,
}

impl ProviderError {
    pub fn new(kind: ProviderErrorKind, message: impl Into<String>) -> ProviderError {
        ProviderError {
            kind,
            message: message.into(),
            server: None,
        }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A configured provider. Cheap to clone (the HTTP client is shared).
#[derive(Clone)]
pub struct Provider {
    settings: ProviderSettings,
    /// The full URL requests go to, or why there is none.
    endpoint: Result<String, String>,
    api_key: Option<String>,
    key_env: String,
    client: reqwest::Client,
    /// Recent body heads (see [`BodyHeads`]), shared by the clones.
    heads: Arc<Mutex<BodyHeads>>,
}

/// The heads of the last few Anthropic request bodies (everything before
/// `messages`: see `anthropic::request_head`), by the model, settings,
/// system prompt and tools they were written from. The children started by
/// one turn send the same system prompt and tool definitions, so their
/// bodies share one head: written once, held once while the requests are
/// in flight, and byte-identical by construction.
#[derive(Default)]
struct BodyHeads {
    recent: Vec<BodyHead>,
}

struct BodyHead {
    /// Compared by address, then by text.
    system: Arc<str>,
    /// Compared by address (held, so the address is not reused).
    tools: Arc<[ToolDefinition]>,
    model: String,
    max_tokens: u32,
    sampling: Sampling,
    head: Bytes,
}

/// How many idle connections to the provider are kept for reuse: more than
/// a session and the children it waits for use at once in the common case
/// (over HTTP/2 one connection carries them all).
const IDLE_CONNECTIONS: usize = 32;

/// How many heads [`BodyHeads`] keeps (the main session, its children of
/// a few types).
const BODY_HEADS: usize = 8;

impl BodyHeads {
    fn get(&self, req: &ModelRequest) -> Option<Bytes> {
        self.recent
            .iter()
            .find(|h| {
                (Arc::ptr_eq(&h.system, &req.system) || h.system == req.system)
                    // Only the same `Arc`: two equal `Value`s may keep their
                    // keys in another order, and so have other bytes.
                    && Arc::ptr_eq(&h.tools, &req.tools)
                    && h.model == req.model
                    && h.max_tokens == req.max_tokens
                    && h.sampling == req.sampling
            })
            .map(|h| h.head.clone())
    }

    fn put(&mut self, req: &ModelRequest, head: Bytes) {
        if self.recent.len() >= BODY_HEADS {
            self.recent.remove(0);
        }
        self.recent.push(BodyHead {
            system: Arc::clone(&req.system),
            tools: Arc::clone(&req.tools),
            model: req.model.clone(),
            max_tokens: req.max_tokens,
            sampling: req.sampling.clone(),
            head,
        });
    }
}

/// A request body sent as its parts (a shared head, then this request's
/// own messages) without joining them; its length is known, so it goes
/// out with a `content-length` like a body in one piece.
struct PartsBody {
    parts: [Bytes; 2],
    next: usize,
}

impl http_body::Body for PartsBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        while let Some(part) = this.parts.get_mut(this.next) {
            this.next += 1;
            let part = std::mem::take(part);
            if !part.is_empty() {
                return std::task::Poll::Ready(Some(Ok(http_body::Frame::data(part))));
            }
        }
        std::task::Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.parts.iter().skip(self.next).all(Bytes::is_empty)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let len: usize = self.parts.iter().skip(self.next).map(Bytes::len).sum();
        http_body::SizeHint::with_exact(u64::try_from(len).unwrap_or(u64::MAX))
    }
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provider")
            .field("kind", &self.settings.kind)
            .field("endpoint", &self.endpoint)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

/// Installs the process-wide rustls crypto provider (ring) once.
pub fn install_tls_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Another part of the process may have installed one already; fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

fn env_get<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// `{base}/v1/{path}`, without a doubled slash or a doubled `/v1`.
fn join_endpoint(base: &str, path: &str) -> Result<String, String> {
    let base = base.trim().trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(format!(
            "provider base URL `{base}` must start with http:// or https://"
        ));
    }
    if base.ends_with("/v1") {
        Ok(format!("{base}/{path}"))
    } else {
        Ok(format!("{base}/v1/{path}"))
    }
}

/// Replaces every occurrence of the key in `text`.
fn scrub(text: &str, key: Option<&str>) -> String {
    match key {
        Some(k) if k.len() >= 4 => text.replace(k, "[redacted]"),
        _ => text.to_string(),
    }
}

/// An error and its causes, on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// How long `apiKeyHelper` may run, and how much of its output is read.
const HELPER_TIMEOUT: Duration = Duration::from_secs(30);
const HELPER_MAX_BYTES: u64 = 64 * 1024;
/// How long a helper's key is reused before the helper runs again
/// (Claude Code's default, 5 minutes).
const HELPER_TTL: Duration = Duration::from_secs(300);

/// The key `apiKeyHelper` prints: its output's first line, trimmed. The
/// command runs with `bash -c`, bounded in time and output, and its key is
/// reused for [`HELPER_TTL`] within this process.
fn helper_key(helper: &str) -> Result<String, ProviderError> {
    use std::io::Read;
    use std::sync::Mutex;
    static CACHE: Mutex<Option<(String, std::time::Instant, String)>> = Mutex::new(None);
    if let Ok(c) = CACHE.lock()
        && let Some((h, at, key)) = c.as_ref()
        && h == helper
        && at.elapsed() < HELPER_TTL
    {
        return Ok(key.clone());
    }
    let fail = |why: String| {
        ProviderError::new(
            ProviderErrorKind::Config,
            format!("apiKeyHelper `{helper}`: {why}"),
        )
    };
    let mut child = std::process::Command::new("bash")
        .args(["-c", helper])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| fail(format!("cannot start: {e}")))?;
    let Some(out) = child.stdout.take() else {
        return Err(fail("no output".into()));
    };
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.take(HELPER_MAX_BYTES).read_to_string(&mut text);
        text
    });
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if started.elapsed() > HELPER_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail(format!(
                    "no answer within {}s",
                    HELPER_TIMEOUT.as_secs()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(fail(e.to_string())),
        }
    };
    let text = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(fail(format!("exited with {status}")));
    }
    let key = text.lines().next().unwrap_or_default().trim().to_string();
    if key.is_empty() {
        return Err(fail("printed no key".into()));
    }
    if let Ok(mut c) = CACHE.lock() {
        *c = Some((helper.to_string(), std::time::Instant::now(), key.clone()));
    }
    Ok(key)
}

/// The variable that holds the provider's API key: `provider.api_key_env`,
/// else `ANTHROPIC_API_KEY` or `OPENAI_API_KEY` by kind.
pub fn key_env(settings: &ProviderSettings) -> String {
    settings.api_key_env.clone().unwrap_or_else(|| {
        match settings.kind {
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
            ProviderKind::Openai => "OPENAI_API_KEY",
        }
        .to_string()
    })
}

/// Who serves the model, in Claude Code's words (`apiProvider`):
/// `firstParty` for the Anthropic API, `openai` for an OpenAI-compatible
/// server.
pub fn api_provider(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Anthropic => "firstParty",
        ProviderKind::Openai => "openai",
    }
}

impl Provider {
    /// Builds the provider from settings and the process environment
    /// (`ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`, `OPENAI_BASE_URL`,
    /// `OPENAI_API_KEY`, or the variable named by `api_key_env`).
    ///
    /// Configuration problems (no key, no base URL) are reported by `send`,
    /// so a provider can always render request bodies.
    pub fn new(
        settings: &ProviderSettings,
        env: &[(String, String)],
    ) -> Result<Provider, ProviderError> {
        let endpoint = match settings.kind {
            ProviderKind::Anthropic => {
                let base = settings
                    .base_url
                    .clone()
                    .or_else(|| env_get(env, "ANTHROPIC_BASE_URL").map(str::to_string))
                    .unwrap_or_else(|| "https://api.anthropic.com".to_string());
                join_endpoint(&base, "messages")
            }
            ProviderKind::Openai => {
                let base = settings
                    .base_url
                    .clone()
                    .or_else(|| env_get(env, "OPENAI_BASE_URL").map(str::to_string));
                match base {
                    Some(base) => join_endpoint(&base, "chat/completions"),
                    None => Err(
                        "provider.base_url is required for provider.kind = \"openai\" \
                                 (for example http://127.0.0.1:8080 for llama-server)"
                            .to_string(),
                    ),
                }
            }
        };
        let key_env = key_env(settings);
        let api_key = match (env_get(env, &key_env), &settings.api_key_helper) {
            (Some(k), _) => Some(k.to_string()),
            (None, Some(helper)) => Some(helper_key(helper)?),
            (None, None) => None,
        };
        let client = tls::client_builder()
            .connect_timeout(Duration::from_millis(settings.connect_timeout_ms.max(1)))
            // Idle connections kept for reuse. Without a bound, a turn that
            // started a thousand children keeps a thousand connections (and
            // their buffers) open until the process ends, which then closes
            // them one by one.
            .pool_max_idle_per_host(IDLE_CONNECTIONS)
            .build()
            .map_err(|e| {
                ProviderError::new(
                    ProviderErrorKind::Config,
                    format!("cannot build the HTTP client: {}", error_chain(&e)),
                )
            })?;
        Ok(Provider {
            settings: settings.clone(),
            endpoint,
            api_key,
            key_env,
            client,
            heads: Arc::default(),
        })
    }

    /// The URL requests are posted to, or why there is none.
    pub fn endpoint(&self) -> Result<&str, ProviderError> {
        self.endpoint
            .as_deref()
            .map_err(|m| ProviderError::new(ProviderErrorKind::Config, m.clone()))
    }

    /// The exact bytes that `send` puts in the request body.
    pub fn request_body(&self, req: &ModelRequest) -> Vec<u8> {
        match self.settings.kind {
            ProviderKind::Anthropic => anthropic::request_body(req),
            ProviderKind::Openai => openai::request_body(req),
        }
    }

    /// The request body as `send` sends it: [`Provider::request_body`]'s
    /// bytes, in two parts for Anthropic (the head, shared with the other
    /// requests that have the same system prompt and tools, then the
    /// messages).
    fn body_parts(&self, req: &ModelRequest) -> [Bytes; 2] {
        if self.settings.kind != ProviderKind::Anthropic || !req.server_tools.is_empty() {
            return [Bytes::from(self.request_body(req)), Bytes::new()];
        }
        let lock = || {
            // A panic while holding the lock leaves a usable cache behind.
            self.heads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        let cached = lock().get(req);
        let head = match cached {
            Some(head) => head,
            None => {
                let head = Bytes::from(anthropic::request_head(req));
                lock().put(req, head.clone());
                head
            }
        };
        let mut tail = Vec::new();
        anthropic::write_messages(req, &mut tail);
        [head, Bytes::from(tail)]
    }

    /// Sends the request, streaming; retries as described above.
    pub async fn send(
        &self,
        req: &ModelRequest,
        on_event: &(dyn Fn(StreamEvent) + Send + Sync),
    ) -> Result<ModelResponse, ProviderError> {
        let key = self.api_key.as_deref();
        let scrubbed = |event: StreamEvent| match event {
            StreamEvent::Retrying {
                attempt,
                delay_ms,
                reason,
            } => on_event(StreamEvent::Retrying {
                attempt,
                delay_ms,
                reason: scrub(&reason, key),
            }),
            other => on_event(other),
        };
        let mut response =
            self.send_unscrubbed(req, &scrubbed)
                .await
                .map_err(|e| ProviderError {
                    kind: e.kind,
                    message: scrub(&e.message, key),
                    server: e.server.map(|s| ServerSaid {
                        error_type: s.error_type,
                        message: scrub(&s.message, key),
                    }),
                })?;
        self.apply_fallback(req, &mut response);
        Ok(response)
    }

    /// Recovers a tool call written as text, when
    /// `provider.tool_call_fallback` asks for it (see [`text_tools`]).
    fn apply_fallback(&self, req: &ModelRequest, response: &mut ModelResponse) {
        match self.settings.tool_call_fallback {
            None => {}
            Some(ToolCallFallback::JsonText) => {
                let offered: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
                // One conversion per reply, so the history length makes the
                // id unique within the conversation.
                let id = format!("toolu_text_{}", req.messages.len());
                text_tools::convert(response, &offered, &id);
            }
        }
    }

    async fn send_unscrubbed(
        &self,
        req: &ModelRequest,
        on_event: &(dyn Fn(StreamEvent) + Send + Sync),
    ) -> Result<ModelResponse, ProviderError> {
        let endpoint = self.endpoint()?;
        if self.settings.kind == ProviderKind::Anthropic && self.api_key.is_none() {
            return Err(ProviderError::new(
                ProviderErrorKind::Config,
                format!(
                    "no Anthropic API key: set the environment variable {} (or name another \
                     variable in provider.api_key_env). No key? Run a local model instead: \
                     in cadre's repository, `scripts/local-model install && scripts/local-model \
                     start`, then use its config/local.toml from any folder (`--config \
                     /full/path/to/cadre/config/local.toml`, or copy it to \
                     ~/.config/cadre/cadre.toml without its builtin_dir line); see \
                     docs/local-model.md",
                    self.key_env
                ),
            ));
        }
        let body = self.body_parts(req);
        // One budget for the whole request: attempts and the waits between them.
        let started = std::time::Instant::now();
        let budget = Duration::from_millis(self.settings.retry_budget_ms);
        let mut retries = 0u32;
        loop {
            match self.attempt(endpoint, &body, on_event).await {
                Ok(response) => return Ok(response),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Retry {
                    mut error,
                    retry_after,
                }) => {
                    let delay = retry_after.unwrap_or_else(|| {
                        retry::backoff(
                            retries,
                            self.settings.retry_base_ms,
                            self.settings.retry_max_ms,
                        )
                    });
                    let over_budget = started.elapsed() + delay > budget;
                    if retries >= self.settings.max_retries || over_budget {
                        let attempts = retries + 1;
                        let secs = started.elapsed().as_secs_f64();
                        let why = if retries >= self.settings.max_retries {
                            format!("provider.max_retries is {}", self.settings.max_retries)
                        } else {
                            format!(
                                "another wait of {} ms would pass provider.retry_budget_ms ({} ms)",
                                delay.as_millis(),
                                budget.as_millis()
                            )
                        };
                        error.message.push_str(&format!(
                            " (gave up after {attempts} attempt{} in {secs:.1} s; {why})",
                            if attempts == 1 { "" } else { "s" }
                        ));
                        return Err(error);
                    }
                    retries += 1;
                    on_event(StreamEvent::Retrying {
                        attempt: retries,
                        delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        reason: error.message,
                    });
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// One HTTP request and its stream.
    async fn attempt(
        &self,
        endpoint: &str,
        body: &[Bytes; 2],
        on_event: &(dyn Fn(StreamEvent) + Send + Sync),
    ) -> Result<ModelResponse, Failure> {
        let idle = Duration::from_millis(self.settings.idle_timeout_ms.max(1));
        let mut request = self
            .client
            .post(endpoint)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream")
            .body(reqwest::Body::wrap(PartsBody {
                parts: body.clone(),
                next: 0,
            }));
        request = match self.settings.kind {
            ProviderKind::Anthropic => request
                .header("x-api-key", self.api_key.as_deref().unwrap_or_default())
                .header("anthropic-version", "2023-06-01"),
            ProviderKind::Openai => match &self.api_key {
                Some(key) => request.bearer_auth(key),
                None => request,
            },
        };
        let response = match tokio::time::timeout(idle, request.send()).await {
            Err(_) => {
                return Err(Failure::retry(
                    ProviderErrorKind::Timeout,
                    format!("no response from {endpoint} within {} ms", idle.as_millis()),
                ));
            }
            Ok(Err(e)) if e.is_builder() => {
                return Err(Failure::fatal(
                    ProviderErrorKind::Config,
                    format!("bad request: {}", error_chain(&e)),
                ));
            }
            Ok(Err(e)) => {
                return Err(Failure::retry(
                    ProviderErrorKind::Network,
                    format!("request to {endpoint} failed: {}", error_chain(&e)),
                ));
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        let limits = sse::StreamLimits::from_settings(&self.settings);
        if !response.status().is_success() {
            let retry_after = retry::retry_after(response.headers());
            let text = sse::read_error_body(response.bytes_stream(), limits.error_body, idle).await;
            let message = match self.settings.kind {
                ProviderKind::Anthropic => anthropic::describe_error(status, &text),
                ProviderKind::Openai => openai::describe_error(status, &text),
            };
            let error = ProviderError {
                kind: ProviderErrorKind::Status(status),
                message,
                server: ServerSaid::from_body(&text),
            };
            return Err(if retry::is_retryable_status(status) {
                Failure::Retry { error, retry_after }
            } else {
                Failure::Fatal(error)
            });
        }
        let info = sse::BodyInfo {
            content_type: response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
        };
        let stream = response.bytes_stream();
        match self.settings.kind {
            ProviderKind::Anthropic => {
                sse::drive(
                    anthropic::NAME,
                    stream,
                    &info,
                    &limits,
                    Some(idle),
                    anthropic::AnthropicAssembler::default(),
                    on_event,
                )
                .await
            }
            ProviderKind::Openai => {
                sse::drive(
                    openai::NAME,
                    stream,
                    &info,
                    &limits,
                    Some(idle),
                    openai::OpenAiAssembler::default(),
                    on_event,
                )
                .await
            }
        }
    }
}

/// Assembles a response from a raw SSE byte stream of the given protocol,
/// without HTTP, timeouts or retries: what `send` does with a response
/// body, within the default [`StreamLimits`]. Useful for replaying recorded
/// streams and for testing.
pub async fn decode_stream<S, B, E>(
    kind: ProviderKind,
    stream: S,
    on_event: &(dyn Fn(StreamEvent) + Send + Sync),
) -> Result<ModelResponse, ProviderError>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: fmt::Display,
{
    decode_stream_within(kind, &StreamLimits::default(), stream, on_event).await
}

/// [`decode_stream`] within the given limits.
pub async fn decode_stream_within<S, B, E>(
    kind: ProviderKind,
    limits: &StreamLimits,
    stream: S,
    on_event: &(dyn Fn(StreamEvent) + Send + Sync),
) -> Result<ModelResponse, ProviderError>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: fmt::Display,
{
    let info = sse::BodyInfo {
        content_type: Some("text/event-stream".to_string()),
    };
    let result = match kind {
        ProviderKind::Anthropic => {
            sse::drive(
                anthropic::NAME,
                stream,
                &info,
                limits,
                None,
                anthropic::AnthropicAssembler::default(),
                on_event,
            )
            .await
        }
        ProviderKind::Openai => {
            sse::drive(
                openai::NAME,
                stream,
                &info,
                limits,
                None,
                openai::OpenAiAssembler::default(),
                on_event,
            )
            .await
        }
    };
    result.map_err(|f| match f {
        Failure::Fatal(e) | Failure::Retry { error: e, .. } => e,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_do_not_double_slashes_or_v1() {
        assert_eq!(
            join_endpoint("http://h:1/", "messages").unwrap(),
            "http://h:1/v1/messages"
        );
        assert_eq!(
            join_endpoint("http://h:1/v1", "chat/completions").unwrap(),
            "http://h:1/v1/chat/completions"
        );
        assert!(join_endpoint("h:1", "messages").is_err());
    }

    #[test]
    fn scrub_removes_every_copy_of_the_key() {
        assert_eq!(
            scrub("a sk-XYZ b sk-XYZ", Some("sk-XYZ")),
            "a [redacted] b [redacted]"
        );
        assert_eq!(scrub("abc", None), "abc");
    }

    #[test]
    fn send_is_a_send_future() {
        fn assert_send<T: Send>(_: &T) {}
        let p = Provider::new(&ProviderSettings::default(), &[]).unwrap();
        let req = ModelRequest {
            model: "m".into(),
            system: "".into(),
            tools: Vec::new().into(),
            messages: Vec::new(),
            max_tokens: 1,
            sampling: Default::default(),
            server_tools: Vec::new(),
        };
        let on_event = |_: StreamEvent| {};
        let fut = p.send(&req, &on_event);
        assert_send(&fut);
    }

    /// Requests with the same system prompt and tools (the same `Arc`s, as
    /// the children of one turn have) share one body head, and every body
    /// sent in parts has exactly the bytes of `request_body`.
    #[test]
    fn bodies_with_the_same_system_and_tools_share_one_head() {
        let p = Provider::new(&ProviderSettings::default(), &[]).unwrap();
        let tools: Arc<[ToolDefinition]> = vec![ToolDefinition {
            name: "Read".into(),
            description: "Reads a file.".into(),
            input_schema: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }]
        .into();
        let request = |system: &Arc<str>, tools: &Arc<[ToolDefinition]>, text: &str| ModelRequest {
            model: "m".into(),
            system: Arc::clone(system),
            tools: Arc::clone(tools),
            messages: vec![Arc::new(crate::message::Message::user_text(text))],
            max_tokens: 16,
            sampling: Default::default(),
            server_tools: Vec::new(),
        };
        let system: Arc<str> = "You are a sub-agent.".into();
        let a = request(&system, &tools, "job 1");
        let b = request(&system, &tools, "job 2");
        let [head_a, tail_a] = p.body_parts(&a);
        let [head_b, tail_b] = p.body_parts(&b);
        assert_eq!(head_a.as_ptr(), head_b.as_ptr(), "one head for both");
        assert_ne!(tail_a, tail_b);
        for (req, head, tail) in [(&a, &head_a, &tail_a), (&b, &head_b, &tail_b)] {
            assert_eq!([&head[..], &tail[..]].concat(), p.request_body(req));
        }
        // The same text in another allocation shares the head too; other
        // tools get another head.
        let other_system: Arc<str> = "You are a sub-agent.".into();
        let c = request(&other_system, &tools, "job 3");
        let [head_c, tail_c] = p.body_parts(&c);
        assert_eq!(head_c.as_ptr(), head_a.as_ptr());
        assert_eq!([&head_c[..], &tail_c[..]].concat(), p.request_body(&c));
        let fewer: Arc<[ToolDefinition]> = Vec::new().into();
        let d = request(&system, &fewer, "job 4");
        let [head_d, tail_d] = p.body_parts(&d);
        assert_ne!(head_d, head_a);
        assert_eq!([&head_d[..], &tail_d[..]].concat(), p.request_body(&d));
    }

    #[test]
    fn debug_hides_the_key() {
        let env = vec![(
            "ANTHROPIC_API_KEY".to_string(),
            "sk-test-SECRET".to_string(),
        )];
        let p = Provider::new(&ProviderSettings::default(), &env).unwrap();
        assert!(!format!("{p:?}").contains("SECRET"));
    }
}
