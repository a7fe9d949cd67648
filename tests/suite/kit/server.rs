//! The fake model server: an axum app on `127.0.0.1:0`, running on its own
//! thread and runtime, that plays scripted replies and records requests.
//!
//! Because it owns its runtime, a test can use it from async code (the
//! `cadre::provider` API) or from blocking code (running the `cadre` binary
//! with `ANTHROPIC_BASE_URL` pointing at [`FakeServer::url`]). Dropping the
//! server stops it and, unless disabled, fails the test when a recorded
//! request broke a conversation invariant.

use std::collections::VecDeque;
use std::io;
use std::net::TcpListener as StdListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::invariants;

/// The key the kit's environment helpers hand out. Tests assert that it
/// never shows up in error text.
pub const TEST_KEY: &str = "sk-test-SECRET";

/// The test certificate authority that signed the TLS fake server's
/// certificate ([`FakeServer::route_tls`]): give it to the `cadre` binary
/// as `SSL_CERT_FILE`, which it then trusts instead of the system's store.
pub const TEST_CA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tls/ca.pem");

/// One server-sent event: an optional `event:` name and its `data:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

impl SseEvent {
    /// An event with a name (the Anthropic style).
    pub fn named(event: impl Into<String>, data: impl Into<String>) -> SseEvent {
        SseEvent {
            event: Some(event.into()),
            data: data.into(),
        }
    }

    /// An unnamed `data:` event (the OpenAI style).
    pub fn data(data: impl Into<String>) -> SseEvent {
        SseEvent {
            event: None,
            data: data.into(),
        }
    }

    /// The wire form, ending with the blank line that dispatches it.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = String::new();
        if let Some(e) = &self.event {
            out.push_str("event: ");
            out.push_str(e);
            out.push('\n');
        }
        for line in self.data.split('\n') {
            out.push_str("data: ");
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
        out.into_bytes()
    }
}

/// The wire form of a list of events.
pub fn encode(events: &[SseEvent]) -> Vec<u8> {
    events.iter().flat_map(SseEvent::to_bytes).collect()
}

/// What the server answers to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A `200 text/event-stream` with these events, then a clean close.
    Sse(Vec<SseEvent>),
    /// A plain response (errors, rate limits).
    Status {
        code: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// The first `n` events of a stream, then the connection is broken.
    CutAfter { events: Vec<SseEvent>, n: usize },
    /// A stream whose first event's data is not JSON.
    Malformed,
    /// These events, then silence for `duration`, then a clean close.
    Stall {
        after_events: Vec<SseEvent>,
        duration: Duration,
    },
    /// Waits `delay` before answering with `reply`.
    Delayed { delay: Duration, reply: Box<Reply> },
    /// Waits until `gate` turns true (or `deadline` passes) before
    /// answering with `reply`.
    Held {
        gate: tokio::sync::watch::Receiver<bool>,
        deadline: Duration,
        reply: Box<Reply>,
    },
    /// A response with this status, content type and body, sent at once.
    Body {
        code: u16,
        content_type: String,
        body: Vec<u8>,
    },
    /// A response that never ends: `head`, then `chunk` again and again
    /// (waiting `every` between chunks) until the client hangs up.
    Endless {
        code: u16,
        content_type: String,
        head: Vec<u8>,
        chunk: Vec<u8>,
        every: Duration,
    },
}

impl Reply {
    /// A status reply with a body and no extra headers.
    pub fn status(code: u16, body: impl Into<String>) -> Reply {
        Reply::Status {
            code,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// A status reply with an Anthropic-shaped error body.
    pub fn anthropic_error(code: u16, kind: &str, message: &str) -> Reply {
        Reply::status(
            code,
            json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
        )
    }

    /// A status reply with an OpenAI-shaped error body.
    pub fn openai_error(code: u16, kind: &str, message: &str) -> Reply {
        Reply::status(
            code,
            json!({"error": {"message": message, "type": kind, "code": null}}).to_string(),
        )
    }

    /// Adds a response header (only meaningful on `Status`).
    pub fn with_header(self, name: &str, value: &str) -> Reply {
        match self {
            Reply::Status {
                code,
                mut headers,
                body,
            } => {
                headers.push((name.to_string(), value.to_string()));
                Reply::Status {
                    code,
                    headers,
                    body,
                }
            }
            other => other,
        }
    }

    /// A `200 text/html` page, as a proxy or a wrong base URL gives.
    pub fn html(body: &str) -> Reply {
        Reply::Body {
            code: 200,
            content_type: "text/html; charset=utf-8".to_string(),
            body: body.as_bytes().to_vec(),
        }
    }

    /// An event stream that never ends: `head` events, then `chunk` bytes
    /// over and over, as fast as the client reads.
    pub fn endless_sse(head: &[SseEvent], chunk: Vec<u8>) -> Reply {
        Reply::Endless {
            code: 200,
            content_type: "text/event-stream".to_string(),
            head: encode(head),
            chunk,
            every: Duration::ZERO,
        }
    }

    /// Sets the wait between the chunks of an `Endless` reply.
    pub fn every(self, every: Duration) -> Reply {
        match self {
            Reply::Endless {
                code,
                content_type,
                head,
                chunk,
                ..
            } => Reply::Endless {
                code,
                content_type,
                head,
                chunk,
                every,
            },
            other => other,
        }
    }

    /// Answers only after `delay`.
    pub fn delayed(self, delay: Duration) -> Reply {
        Reply::Delayed {
            delay,
            reply: Box::new(self),
        }
    }

    /// Answers only once `gate` is true, or after `deadline` at the latest.
    pub fn held(self, gate: tokio::sync::watch::Receiver<bool>, deadline: Duration) -> Reply {
        Reply::Held {
            gate,
            deadline,
            reply: Box::new(self),
        }
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// Position in arrival order, from 0.
    pub index: usize,
    pub method: String,
    pub path: String,
    /// The query string, without `?` (empty when there is none).
    pub query: String,
    /// Header names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body parsed as JSON, `Null` when it is not JSON.
    pub json: Value,
    /// `HTTP/1.1` or `HTTP/2.0`.
    pub version: String,
    /// The client's address and port: requests with the same one came on
    /// the same connection (empty on the plain-HTTP server).
    pub peer: String,
}

impl RecordedRequest {
    /// The first value of a header (name matched case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `messages` array (both protocols), empty when absent.
    pub fn messages(&self) -> &[Value] {
        self.json
            .get("messages")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The system prompt: Anthropic `system` blocks joined, or the content
    /// of an OpenAI `system` message.
    pub fn system_text(&self) -> String {
        match self.json.get("system") {
            Some(Value::String(s)) => return s.clone(),
            Some(Value::Array(blocks)) => return join_text(blocks),
            _ => {}
        }
        self.messages()
            .iter()
            .find(|m| m.get("role").and_then(Value::as_str) == Some("system"))
            .map(content_text)
            .unwrap_or_default()
    }

    /// The text of the last `user` message (text blocks joined), without
    /// the engine's `<system-reminder>` announcements (agent types, skills).
    pub fn last_user_text(&self) -> String {
        self.messages()
            .iter()
            .rev()
            .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .map(content_text)
            .map(|t| without_reminders(&t))
            .unwrap_or_default()
    }

    /// Whether the raw body contains `needle` anywhere.
    pub fn contains(&self, needle: &str) -> bool {
        self.body_str().contains(needle)
    }
}

fn join_text(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` without its `<system-reminder>…</system-reminder>` parts (and the
/// line break that joined each to the rest).
fn without_reminders(text: &str) -> String {
    const OPEN: &str = "<system-reminder>";
    const CLOSE: &str = "</system-reminder>";
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        match rest[start..].find(CLOSE) {
            Some(end) => {
                rest = &rest[start + end + CLOSE.len()..];
                rest = rest.strip_prefix('\n').unwrap_or(rest);
            }
            None => {
                rest = &rest[start..];
                break;
            }
        }
    }
    out.push_str(rest);
    out.trim_end_matches('\n').to_string()
}

fn content_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => join_text(blocks),
        _ => String::new(),
    }
}

type Router_ = Box<dyn Fn(&RecordedRequest) -> Reply + Send + Sync>;

enum Script {
    Queue(VecDeque<Reply>),
    Route(Router_),
}

struct Shared {
    script: Mutex<Script>,
    requests: Mutex<Vec<RecordedRequest>>,
    violations: Mutex<Vec<String>>,
    check_invariants: AtomicBool,
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A running fake server. Stops when dropped.
pub struct FakeServer {
    url: String,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeServer {
    /// Starts a server that answers requests with `replies`, in order.
    /// Once they run out it answers `400` with "no scripted reply left".
    pub fn start(replies: impl IntoIterator<Item = Reply>) -> FakeServer {
        FakeServer::with_script(Script::Queue(replies.into_iter().collect()))
    }

    /// Starts a server that chooses each reply with `route`, for requests
    /// that arrive in no fixed order (concurrent sub-agents): pick by a
    /// marker in [`RecordedRequest::system_text`] or
    /// [`RecordedRequest::last_user_text`].
    pub fn route(route: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static) -> FakeServer {
        FakeServer::with_script(Script::Route(Box::new(route)))
    }

    /// Like [`FakeServer::route`], served over TLS with the test
    /// certificate (tests/fixtures/tls; trust it with `SSL_CERT_FILE` =
    /// [`TEST_CA`]), offering HTTP/2 by ALPN as the real API
    /// does when `h2` (or HTTP/1.1 only). The URL is `https://127.0.0.1:…`.
    pub fn route_tls(
        h2: bool,
        route: impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
    ) -> FakeServer {
        FakeServer::serve(Script::Route(Box::new(route)), Some(h2))
    }

    fn with_script(script: Script) -> FakeServer {
        FakeServer::serve(script, None)
    }

    /// `tls`: `None` for plain HTTP/1.1; `Some(h2)` for TLS, offering h2.
    fn serve(script: Script, tls: Option<bool>) -> FakeServer {
        let shared = Arc::new(Shared {
            script: Mutex::new(script),
            requests: Mutex::new(Vec::new()),
            violations: Mutex::new(Vec::new()),
            check_invariants: AtomicBool::new(true),
        });
        let listener = StdListener::bind("127.0.0.1:0").expect("fake server: bind 127.0.0.1:0");
        listener
            .set_nonblocking(true)
            .expect("fake server: non-blocking listener");
        let url = format!(
            "{}://{}",
            if tls.is_some() { "https" } else { "http" },
            listener.local_addr().expect("fake server: local address")
        );
        let (tx, rx) = oneshot::channel::<()>();
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let thread = std::thread::Builder::new()
            .name("fake-model-server".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                else {
                    return;
                };
                rt.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    // No graceful shutdown: a stalled stream must not keep
                    // the test waiting.
                    match tls {
                        None => tokio::select! {
                            _ = axum::serve(listener, app) => {}
                            _ = rx => {}
                        },
                        Some(h2) => tokio::select! {
                            () = serve_tls(listener, app, h2) => {}
                            _ = rx => {}
                        },
                    }
                });
                // Streams still stalling must not hold the test up.
                rt.shutdown_timeout(Duration::from_millis(100));
            })
            .expect("fake server: spawn thread");
        FakeServer {
            url,
            shared,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// The server root, e.g. `http://127.0.0.1:41234` (no `/v1`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Appends replies to an in-order script.
    pub fn push(&self, reply: Reply) {
        if let Script::Queue(q) = &mut *lock(&self.shared.script) {
            q.push_back(reply);
        }
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    pub fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// The `n`th request (from 0); panics when there is none.
    pub fn request(&self, n: usize) -> RecordedRequest {
        let all = self.requests();
        match all.get(n) {
            Some(r) => r.clone(),
            None => panic!("fake server: no request #{n}; {} recorded", all.len()),
        }
    }

    /// Blocks until at least `n` requests arrived or `timeout` passed;
    /// returns whether they arrived. For tests that drive a child process.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        while self.request_count() < n {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    /// Environment for a provider or the `cadre` binary talking to this
    /// server with the Anthropic protocol.
    pub fn anthropic_env(&self) -> Vec<(String, String)> {
        vec![
            ("ANTHROPIC_BASE_URL".to_string(), self.url.clone()),
            ("ANTHROPIC_API_KEY".to_string(), TEST_KEY.to_string()),
        ]
    }

    /// Invariant violations found so far (see `invariants`).
    pub fn violations(&self) -> Vec<String> {
        lock(&self.shared.violations).clone()
    }

    /// Panics listing every invariant violation found so far.
    pub fn assert_invariants(&self) {
        let v = self.violations();
        assert!(
            v.is_empty(),
            "fake server: invariant violations:\n{}",
            v.join("\n")
        );
    }

    /// Stops the automatic check on drop (for tests that send bad
    /// histories on purpose).
    pub fn skip_invariant_checks(&self) {
        self.shared.check_invariants.store(false, Ordering::SeqCst);
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if !std::thread::panicking() && self.shared.check_invariants.load(Ordering::SeqCst) {
            self.assert_invariants();
        }
    }
}

/// The client's address, added to each request of a TLS connection.
#[derive(Clone)]
struct Peer(String);

/// Serves `app` over TLS with the test certificate: HTTP/2 when the client
/// asks for it by ALPN and `h2` is set, HTTP/1.1 otherwise.
async fn serve_tls(listener: tokio::net::TcpListener, app: Router, h2: bool) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(include_bytes!("../../fixtures/tls/server.pem"))
            .collect::<Result<_, _>>()
            .expect("fake server: test certificate");
    let key = PrivateKeyDer::from_pem_slice(include_bytes!("../../fixtures/tls/server.key"))
        .expect("fake server: test key");
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("fake server: TLS versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("fake server: TLS configuration");
    config.alpn_protocols = if h2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    loop {
        let Ok((tcp, addr)) = listener.accept().await else {
            continue;
        };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let app = app.layer(axum::Extension(Peer(addr.to_string())));
            let mut builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            // Enough streams on one connection for any test's children.
            builder.http2().max_concurrent_streams(4096);
            let _ = builder
                .serve_connection(
                    hyper_util::rt::TokioIo::new(tls),
                    hyper_util::service::TowerToHyperService::new(app),
                )
                .await;
        });
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    version: axum::http::Version,
    peer: Option<axum::Extension<Peer>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = {
        let mut requests = lock(&shared.requests);
        let recorded = RecordedRequest {
            index: requests.len(),
            method: method.to_string(),
            path: uri.path().to_string(),
            query: uri.query().unwrap_or("").to_string(),
            headers: headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            json: serde_json::from_slice(&body).unwrap_or(Value::Null),
            body: body.to_vec(),
            version: format!("{version:?}"),
            peer: peer.map(|p| p.0.0).unwrap_or_default(),
        };
        requests.push(recorded.clone());
        recorded
    };
    let found = invariants::check(&recorded);
    if !found.is_empty() {
        lock(&shared.violations).extend(
            found
                .into_iter()
                .map(|v| format!("request #{}: {v}", recorded.index)),
        );
    }
    let reply = match &mut *lock(&shared.script) {
        Script::Queue(q) => q.pop_front(),
        Script::Route(f) => Some(f(&recorded)),
    };
    let reply = reply.unwrap_or_else(|| {
        Reply::anthropic_error(
            400,
            "invalid_request_error",
            &format!(
                "fake server: no scripted reply left for request #{}",
                recorded.index
            ),
        )
    });
    render(reply).await
}

/// One chunk of a streamed body: bytes, or a transport error that breaks
/// the connection.
type Chunk = Result<Bytes, io::Error>;

enum Step {
    Send(Vec<u8>),
    Sleep(Duration),
    Break,
    /// These bytes again and again, with this wait between them, until
    /// the client hangs up.
    Forever(Vec<u8>, Duration),
}

async fn render(mut reply: Reply) -> Response {
    loop {
        match reply {
            Reply::Delayed {
                delay,
                reply: inner,
            } => {
                tokio::time::sleep(delay).await;
                reply = *inner;
            }
            Reply::Held {
                mut gate,
                deadline,
                reply: inner,
            } => {
                let _ = tokio::time::timeout(deadline, gate.wait_for(|open| *open)).await;
                reply = *inner;
            }
            other => {
                reply = other;
                break;
            }
        }
    }
    let mut content_type = "text/event-stream".to_string();
    let mut code = StatusCode::OK;
    let steps: Vec<Step> = match reply {
        Reply::Body {
            code,
            content_type,
            body,
        } => {
            let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut map = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_str(&content_type) {
                map.insert("content-type", v);
            }
            return (code, map, Body::from(body)).into_response();
        }
        Reply::Endless {
            code: status,
            content_type: ct,
            head,
            chunk,
            every,
        } => {
            content_type = ct;
            code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            vec![Step::Send(head), Step::Forever(chunk, every)]
        }
        Reply::Status {
            code,
            headers,
            body,
        } => {
            let mut map = HeaderMap::new();
            for (k, v) in headers {
                if let (Ok(k), Ok(v)) = (
                    HeaderName::from_bytes(k.as_bytes()),
                    HeaderValue::from_str(&v),
                ) {
                    map.append(k, v);
                }
            }
            let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return (code, map, body).into_response();
        }
        Reply::Delayed { .. } | Reply::Held { .. } => Vec::new(),
        Reply::Sse(events) => events.iter().map(|e| Step::Send(e.to_bytes())).collect(),
        Reply::CutAfter { events, n } => {
            let mut steps: Vec<Step> = events
                .iter()
                .take(n)
                .map(|e| Step::Send(e.to_bytes()))
                .collect();
            steps.push(Step::Break);
            steps
        }
        Reply::Malformed => vec![Step::Send(
            SseEvent::named("message_start", "{\"type\": \"message_st").to_bytes(),
        )],
        Reply::Stall {
            after_events,
            duration,
        } => {
            let mut steps: Vec<Step> = after_events
                .iter()
                .map(|e| Step::Send(e.to_bytes()))
                .collect();
            steps.push(Step::Sleep(duration));
            steps
        }
    };
    let (tx, rx) = mpsc::channel::<Chunk>(4);
    tokio::spawn(async move {
        for step in steps {
            let ok = match step {
                Step::Send(bytes) => tx.send(Ok(Bytes::from(bytes))).await.is_ok(),
                Step::Sleep(d) => {
                    tokio::time::sleep(d).await;
                    true
                }
                Step::Break => {
                    let _ = tx
                        .send(Err(io::Error::other("fake server: connection cut")))
                        .await;
                    false
                }
                Step::Forever(chunk, every) => {
                    let chunk = Bytes::from(chunk);
                    while tx.send(Ok(chunk.clone())).await.is_ok() {
                        if !every.is_zero() {
                            tokio::time::sleep(every).await;
                        }
                    }
                    false
                }
            };
            if !ok {
                break;
            }
        }
    });
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&content_type) {
        headers.insert("content-type", v);
    }
    headers.insert("cache-control", HeaderValue::from_static("no-cache"));
    (code, headers, Body::from_stream(stream)).into_response()
}
