//! The legacy HTTP+SSE transport of MCP (protocol revision 2024-11-05,
//! `type: "sse"`), which rmcp has no client for, as an rmcp [`Transport`]
//! so that everything above it (tools, resources, prompts, sampling,
//! elicitation, progress, cancellation, tasks) works as over stdio.
//!
//! The client opens one long-lived `GET` with `Accept: text/event-stream`.
//! The server's first event, `endpoint`, names the URL to `POST` each
//! JSON-RPC message to (relative to the stream's URL; one on another
//! origin is refused, so a server cannot send cadre's headers and token
//! elsewhere). Everything the server says, answers included, arrives as
//! `message` events on the stream.
//!
//! Every read is bounded: events (and so lines) by [`MAX_EVENT_BYTES`],
//! decoded by the provider's linear-time SSE [`Decoder`]; an error body by
//! [`MAX_ERROR_BODY`]. When the stream ends or fails, each request still
//! waiting for its answer gets an error that says why, and the session
//! ends. Dropping the transport closes the stream.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};
use rmcp::RoleClient;
use rmcp::model::{ClientJsonRpcMessage, ErrorCode, ErrorData, RequestId, ServerJsonRpcMessage};
use rmcp::transport::{AuthClient, Transport};

use super::McpError;
use crate::provider::sse::{DecodeError, Decoder, Event};

/// The largest event (one JSON-RPC message, or one line) the stream may
/// send: room for a tool result carrying a 5 MB image, base64-encoded,
/// several times over.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// How much of an error response's body is read, for the message.
const MAX_ERROR_BODY: usize = 1000;

/// How long one message's `POST` may take (a server answers it at once,
/// `202 Accepted`; the answer itself comes on the stream).
const POST_TIMEOUT: Duration = Duration::from_secs(60);

/// How many redirects (each to the same origin) the stream may take.
const MAX_REDIRECTS: usize = 5;

/// Why a message could not be posted to the server.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("cannot encode the message: {0}")]
    Encode(String),
    #[error("the stored OAuth token: {0}")]
    Token(String),
    #[error("posting to {url} failed: {error}")]
    Post { url: String, error: String },
    #[error("the server refused the message (HTTP {status}): {body}")]
    Refused { status: u16, body: String },
}

/// An open HTTP+SSE session with one server.
pub struct SseTransport {
    server: String,
    http: reqwest::Client,
    headers: HeaderMap,
    auth: Option<Arc<AuthClient<reqwest::Client>>>,
    /// Where messages are posted (the `endpoint` event's URL).
    endpoint: Url,
    /// The event stream; `None` once it ended or was closed.
    stream: Option<reqwest::Response>,
    decoder: Decoder,
    events: VecDeque<Event>,
    /// Requests sent and not answered yet.
    pending: HashSet<RequestId>,
    /// Errors for the requests left waiting when the stream ended.
    orphans: VecDeque<ServerJsonRpcMessage>,
}

impl std::fmt::Debug for SseTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SseTransport")
            .field("server", &self.server)
            .field("endpoint", &self.endpoint.as_str())
            .finish_non_exhaustive()
    }
}

/// A client that follows redirects only within `origin` (a redirect
/// elsewhere would take the configured headers along).
fn http_client() -> Result<reqwest::Client, McpError> {
    let policy = reqwest::redirect::Policy::custom(|attempt| {
        let same = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if same && attempt.previous().len() <= MAX_REDIRECTS {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    crate::provider::tls::client_builder()
        .redirect(policy)
        .build()
        .map_err(|e| McpError::Http(e.to_string()))
}

/// The `Authorization` header for a stored OAuth token (refreshed by
/// rmcp when it is about to expire).
async fn bearer(auth: Option<&AuthClient<reqwest::Client>>) -> Result<Option<HeaderValue>, String> {
    let Some(auth) = auth else {
        return Ok(None);
    };
    let token = auth.get_access_token().await.map_err(|e| e.to_string())?;
    HeaderValue::from_str(&format!("Bearer {token}"))
        .map(Some)
        .map_err(|_| "the token is not a valid header value".to_string())
}

impl SseTransport {
    /// Opens the event stream at `url` and waits for the server to name
    /// its message endpoint.
    pub async fn connect(
        server: &str,
        url: &str,
        headers: HeaderMap,
        auth: Option<AuthClient<reqwest::Client>>,
    ) -> Result<SseTransport, McpError> {
        let url = Url::parse(url).map_err(|e| McpError::SseConnect(format!("`{url}`: {e}")))?;
        let http = http_client()?;
        let auth = auth.map(Arc::new);
        let token = bearer(auth.as_deref())
            .await
            .map_err(|e| McpError::Token(format!("the stored OAuth token: {e}")))?;
        let mut request = http
            .get(url.clone())
            .headers(headers.clone())
            .header(header::ACCEPT, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache");
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| McpError::SseConnect(format!("GET {url}: {e}")))?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            let challenge = response
                .headers()
                .get(header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map_or_else(
                    || format!("HTTP {}", status.as_u16()),
                    |c| format!("WWW-Authenticate: {c}"),
                );
            return Err(McpError::OAuth {
                server: server.to_string(),
                challenge,
            });
        }
        if !status.is_success() {
            let body = error_body(response).await;
            return Err(McpError::SseConnect(format!(
                "GET {url} answered HTTP {}{body}",
                status.as_u16()
            )));
        }
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let is_sse = content_type
            .split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"));
        if !is_sse {
            let body = error_body(response).await;
            return Err(McpError::SseConnect(format!(
                "GET {url} answered with content-type `{content_type}`, not an event \
                 stream{body} (is this a streamable-HTTP server? then use `type: \"http\"`)"
            )));
        }
        let mut transport = SseTransport {
            server: server.to_string(),
            http,
            headers,
            auth,
            endpoint: url.clone(),
            stream: Some(response),
            decoder: Decoder::new(MAX_EVENT_BYTES),
            events: VecDeque::new(),
            pending: HashSet::new(),
            orphans: VecDeque::new(),
        };
        transport.endpoint = transport.await_endpoint(&url).await?;
        Ok(transport)
    }

    /// Reads events until `endpoint`, which must name a URL on the
    /// stream's origin. Events before it are kept for [`Transport::receive`].
    async fn await_endpoint(&mut self, base: &Url) -> Result<Url, McpError> {
        let mut early = VecDeque::new();
        loop {
            while let Some(event) = self.events.pop_front() {
                if event.name != "endpoint" {
                    early.push_back(event);
                    continue;
                }
                let target = event.data.trim();
                let endpoint = base.join(target).map_err(|e| {
                    McpError::SseEndpoint(format!("`{}` is not a URL: {e}", clip(target)))
                })?;
                if endpoint.origin() != base.origin() {
                    return Err(McpError::SseEndpoint(format!(
                        "`{}` is on another origin than the stream ({}); refused: cadre \
                         posts messages (with the server's headers) only to the origin it \
                         was configured with",
                        clip(endpoint.as_str()),
                        base.origin().ascii_serialization()
                    )));
                }
                early.append(&mut self.events);
                self.events = early;
                return Ok(endpoint);
            }
            if let Err(why) = self.read_chunk().await {
                return Err(McpError::SseEndpoint(format!(
                    "{why} before the server named its message endpoint"
                )));
            }
        }
    }

    /// Reads the next chunk of the stream into `events`; `Err` says why
    /// the stream is over.
    async fn read_chunk(&mut self) -> Result<(), String> {
        let Some(stream) = self.stream.as_mut() else {
            return Err("the stream is closed".into());
        };
        match stream.chunk().await {
            Ok(Some(bytes)) => self
                .decoder
                .feed(&bytes, &mut self.events)
                .map_err(|e| match e {
                    DecodeError::EventTooLarge(max) => format!(
                        "the server sent an event larger than {} MiB",
                        max / (1024 * 1024)
                    ),
                    DecodeError::NotUtf8 => "the server sent an event that is not UTF-8".into(),
                }),
            Ok(None) => Err("the server closed the event stream".into()),
            Err(e) => Err(format!("the event stream failed: {e}")),
        }
    }

    /// The stream is over: close it and answer every waiting request
    /// with an error that says why.
    fn end(&mut self, why: &str) {
        self.stream = None;
        tracing::warn!(
            "MCP server `{}` (SSE): {why}; the connection is closed",
            self.server
        );
        let message = format!("MCP server `{}`: {why}", self.server);
        for id in self.pending.drain() {
            let error = ErrorData::new(ErrorCode::INTERNAL_ERROR, message.clone(), None);
            self.orphans
                .push_back(ServerJsonRpcMessage::error(error, Some(id)));
        }
    }
}

/// At most 200 characters of `s` (for messages).
fn clip(s: &str) -> String {
    crate::provider::sse::clip(s, 200)
}

/// The first bytes of an error response's body, as `: BODY`, or nothing.
async fn error_body(response: reqwest::Response) -> String {
    let body = crate::provider::sse::read_error_body(
        response.bytes_stream(),
        MAX_ERROR_BODY,
        Duration::from_secs(5),
    )
    .await;
    let body = body.trim();
    if body.is_empty() {
        String::new()
    } else {
        format!(": {}", clip(body))
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), SseError>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(r) = &item {
            self.pending.insert(r.id.clone());
        }
        let body = serde_json::to_vec(&item).map_err(|e| SseError::Encode(e.to_string()));
        let http = self.http.clone();
        let endpoint = self.endpoint.clone();
        let headers = self.headers.clone();
        let auth = self.auth.clone();
        async move {
            let body = body?;
            let token = bearer(auth.as_deref()).await.map_err(SseError::Token)?;
            let mut request = http
                .post(endpoint.clone())
                .headers(headers)
                .header(header::CONTENT_TYPE, "application/json")
                .timeout(POST_TIMEOUT)
                .body(body);
            if let Some(token) = token {
                request = request.header(header::AUTHORIZATION, token);
            }
            let response = request.send().await.map_err(|e| SseError::Post {
                url: endpoint.to_string(),
                error: e.to_string(),
            })?;
            let status = response.status();
            if !status.is_success() {
                let body = error_body(response).await;
                return Err(SseError::Refused {
                    status: status.as_u16(),
                    body: body.trim_start_matches(": ").to_string(),
                });
            }
            // The answer comes on the stream; the body (`Accepted`) is
            // not read.
            Ok(())
        }
    }

    /// The next message of the stream. Cancel-safe: the only wait is for
    /// the next chunk, and everything decoded is kept in `self`.
    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            while let Some(event) = self.events.pop_front() {
                if event.name != "message" {
                    tracing::debug!(server = %self.server, "SSE event `{}` ignored", event.name);
                    continue;
                }
                match serde_json::from_str::<ServerJsonRpcMessage>(&event.data) {
                    Ok(message) => {
                        match &message {
                            ServerJsonRpcMessage::Response(r) => {
                                self.pending.remove(&r.id);
                            }
                            ServerJsonRpcMessage::Error(e) => {
                                if let Some(id) = &e.id {
                                    self.pending.remove(id);
                                }
                            }
                            _ => {}
                        }
                        return Some(message);
                    }
                    Err(e) => tracing::warn!(
                        "MCP server `{}` (SSE) sent a message that is not JSON-RPC ({e}); \
                         skipped: {}",
                        self.server,
                        clip(&event.data)
                    ),
                }
            }
            if let Some(orphan) = self.orphans.pop_front() {
                return Some(orphan);
            }
            self.stream.as_ref()?;
            if let Err(why) = self.read_chunk().await {
                self.end(&why);
            }
        }
    }

    async fn close(&mut self) -> Result<(), SseError> {
        self.stream = None;
        self.pending.clear();
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_resolves_against_the_stream_url_and_keeps_the_origin() {
        let base = Url::parse("http://127.0.0.1:3001/mcp/sse").unwrap();
        let e = base.join("/message?sessionId=abc").unwrap();
        assert_eq!(e.as_str(), "http://127.0.0.1:3001/message?sessionId=abc");
        assert_eq!(e.origin(), base.origin());
        let e = base.join("messages/").unwrap();
        assert_eq!(e.as_str(), "http://127.0.0.1:3001/mcp/messages/");
        for other in [
            "http://127.0.0.1:3002/message",
            "https://127.0.0.1:3001/message",
            "//evil.example/message",
            "http://localhost:3001/message",
        ] {
            assert_ne!(base.join(other).unwrap().origin(), base.origin(), "{other}");
        }
    }
}
