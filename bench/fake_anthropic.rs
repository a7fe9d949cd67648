//! A fast fake Anthropic Messages server for whole-process benchmarks: the
//! same scenarios, classification and control endpoints as
//! `bench/fake_anthropic.py`, on tokio and axum, so that 1,000 concurrent
//! model requests cost the server milliseconds rather than a second.
//!
//! ```text
//! cargo build --release --example fake_anthropic
//! target/release/examples/fake_anthropic --port 0        # prints the port
//! target/release/examples/fake_anthropic --floor 1000    # the server's own floor
//! target/release/examples/fake_anthropic --port 0 --tls tests/fixtures/tls/server.pem \
//!     tests/fixtures/tls/server.key                      # HTTPS, HTTP/2 by ALPN
//! ```
//!
//! With `--tls CERT KEY` it serves HTTPS and offers HTTP/2 by ALPN, as the
//! real API does, so that a client with HTTP/2 sends all its requests on
//! one connection (trust the test authority with
//! `SSL_CERT_FILE=tests/fixtures/tls/ca.pem`); `--h2-streams N` announces
//! a limit of N concurrent streams per connection (none by default).
//!
//! `--floor N` measures what the server alone costs: it starts the server,
//! sends N concurrent sub-agent-shaped requests (each answered after
//! `--latency-ms`, 100 by default) from an HTTP/1 client in this process,
//! and prints the wall time until the last answer was read, minus nothing.
//! Everything else matches the Python server (see its docstring): `POST
//! /_reset[?scenario=NAME&latency_ms=MS&children=N]`, `GET /_stats`, and
//! `POST /v1/messages` answered with one SSE stream chosen by who asks.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

/// What the server remembers between a reset and the next.
struct Shared {
    scenario: String,
    latency: Duration,
    children: usize,
    t0: Instant,
    record: Vec<Value>,
}

#[derive(Clone)]
struct App {
    shared: Arc<Mutex<Shared>>,
    /// The latency given on the command line, restored by every reset.
    default_latency: Duration,
}

impl App {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while holding the lock leaves plain data behind.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn sse(out: &mut Vec<u8>, event: &str, data: &Value) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(event.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(data.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// One answer as an SSE stream: each block whole in one delta.
fn stream(blocks: &[Value], stop_reason: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(512 + blocks.len() * 400);
    sse(
        &mut out,
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": "msg_bench", "type": "message", "role": "assistant",
            "model": "claude-bench", "content": [], "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}),
    );
    for (i, b) in blocks.iter().enumerate() {
        if b["type"] == "text" {
            sse(
                &mut out,
                "content_block_start",
                &json!({"type": "content_block_start", "index": i,
                        "content_block": {"type": "text", "text": ""}}),
            );
            sse(
                &mut out,
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "text_delta", "text": b["text"]}}),
            );
        } else {
            sse(
                &mut out,
                "content_block_start",
                &json!({"type": "content_block_start", "index": i,
                        "content_block": {"type": "tool_use", "id": b["id"],
                                          "name": b["name"], "input": {}}}),
            );
            sse(
                &mut out,
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "input_json_delta",
                                  "partial_json": b["input"].to_string()}}),
            );
        }
        sse(
            &mut out,
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": i}),
        );
    }
    sse(
        &mut out,
        "message_delta",
        &json!({"type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": 5}}),
    );
    sse(&mut out, "message_stop", &json!({"type": "message_stop"}));
    out
}

fn system_texts(body: &Value) -> Vec<&str> {
    match &body["system"] {
        Value::String(s) => vec![s.as_str()],
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => Vec::new(),
    }
}

fn agent_tool(body: &Value) -> Option<&str> {
    body["tools"].as_array()?.iter().find_map(|t| {
        let name = t["name"].as_str()?;
        matches!(name, "Agent" | "Task").then_some(name)
    })
}

/// The last message's content blocks (a string content as one text block).
fn last_user_content(body: &Value) -> Vec<Value> {
    let Some(last) = body["messages"].as_array().and_then(|m| m.last()) else {
        return Vec::new();
    };
    match &last["content"] {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(blocks) => blocks.clone(),
        _ => Vec::new(),
    }
}

fn is_fork_child(body: &Value) -> bool {
    last_user_content(body).iter().any(|b| {
        let text = b["text"].as_str().unwrap_or_default();
        b["type"] == "text"
            && (text.contains("<fork-boilerplate>")
                || text
                    .chars()
                    .take(200)
                    .collect::<String>()
                    .to_lowercase()
                    .contains("fork")
                    && text.to_lowercase().contains("directive"))
    })
}

fn classify(body: &Value, is_claude_code: bool) -> &'static str {
    let system = system_texts(body);
    if system
        .first()
        .is_some_and(|s| s.contains("cc_is_subagent=true"))
        || is_fork_child(body)
    {
        return "child";
    }
    if system.iter().any(|s| s.contains("You are cadre")) {
        return "main";
    }
    match agent_tool(body) {
        None if is_claude_code => "side",
        None => "child",
        Some(_) => "main",
    }
}

fn has_tool_results(body: &Value) -> bool {
    last_user_content(body)
        .iter()
        .any(|b| b["type"] == "tool_result")
}

/// The main session's reply in the current scenario.
fn main_reply(
    body: &Value,
    is_claude_code: bool,
    scenario: &str,
    children: usize,
) -> (Vec<Value>, &'static str) {
    let tool = agent_tool(body).unwrap_or("Agent");
    let messages = body["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let turns = messages.iter().filter(|m| m["role"] == "assistant").count();
    let final_answer = || {
        (
            vec![json!({"type": "text", "text": "final answer"})],
            "end_turn",
        )
    };
    let glob = |id: String| {
        (
            vec![
                json!({"type": "tool_use", "id": id, "name": "Glob", "input": {"pattern": "*.md"}}),
            ],
            "tool_use",
        )
    };
    match scenario {
        "roundtrip" => {
            let done = messages.iter().any(|m| {
                m["content"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
            });
            if done {
                final_answer()
            } else {
                glob("toolu_rt".into())
            }
        }
        "script3" if turns < 2 => glob(format!("toolu_g{turns}")),
        "script3" => final_answer(),
        _ if has_tool_results(body) || turns > 0 => final_answer(),
        _ => {
            let calls: Vec<Value> = match scenario {
                "bg1000" => (0..children)
                    .map(|i| {
                        json!({"type": "tool_use", "id": format!("toolu_bg_{i:05}"), "name": tool,
                               "input": {"description": format!("job {i}"),
                                         "prompt": format!("Do job {i} and report."),
                                         "subagent_type": "general-purpose",
                                         "run_in_background": true}})
                    })
                    .collect(),
                "explore" => vec![
                    json!({"type": "tool_use", "id": "toolu_explore", "name": tool,
                    "input": {"description": "Find the readme",
                              "prompt": "Find README files and say what they contain.",
                              "subagent_type": "Explore"}}),
                ],
                _ => ["A", "B"]
                    .iter()
                    .map(|x| {
                        let mut input = json!({"description": format!("check module {x}"),
                                               "prompt": format!("Check module {x} for bugs.")});
                        if is_claude_code {
                            input["subagent_type"] = json!("fork");
                        } else {
                            input["fork"] = json!(true);
                        }
                        json!({"type": "tool_use", "id": format!("toolu_fork_{x}"), "name": tool,
                               "input": input})
                    })
                    .collect(),
            };
            let mut blocks = vec![json!({"type": "text", "text": "Delegating."})];
            blocks.extend(calls);
            (blocks, "tool_use")
        }
    }
}

/// How many `<task-notification>`s a main request carries, with how many
/// distinct `<tool-use-id>`s and how many say completed.
fn notifications(raw: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(raw);
    if !text.contains("<task-notification>") {
        return None;
    }
    let mut ids = Vec::new();
    let mut rest = text.as_ref();
    while let Some(at) = rest.find("<tool-use-id>") {
        rest = &rest[at + "<tool-use-id>".len()..];
        let Some(end) = rest.find("</tool-use-id>") else {
            break;
        };
        ids.push(&rest[..end]);
        rest = &rest[end..];
    }
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    Some(json!({
        "count": text.matches("<task-notification>").count(),
        "distinct_ids": ids.len(),
        "ids": count,
        "completed": text.matches("<status>completed</status>").count(),
    }))
}

fn json_response(code: StatusCode, value: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

async fn reset(State(app): State<App>, RawQuery(query): RawQuery) -> Response {
    let mut s = app.lock();
    s.record.clear();
    s.t0 = Instant::now();
    s.latency = app.default_latency;
    s.children = 1000;
    for kv in query.unwrap_or_default().split('&') {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "scenario" => s.scenario = v.to_string(),
            "latency_ms" => s.latency = Duration::from_millis(v.parse().unwrap_or(0)),
            "children" => s.children = v.parse().unwrap_or(1000),
            _ => {}
        }
    }
    json_response(StatusCode::OK, &json!({"ok": true}))
}

async fn stats(State(app): State<App>) -> Response {
    let s = app.lock();
    json_response(StatusCode::OK, &Value::Array(s.record.clone()))
}

async fn messages(State(app): State<App>, uri: Uri, headers: HeaderMap, raw: Bytes) -> Response {
    let path = uri.path().to_string();
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let header_text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_lowercase()
    };
    let (kind, is_cc) = if path.contains("count_tokens") {
        ("count_tokens", false)
    } else if path.trim_end_matches('/').ends_with("/messages") {
        let ua = header_text("user-agent") + &header_text("x-app");
        let is_cc = ua.contains("claude") || ua.contains("cli");
        (classify(&body, is_cc), is_cc)
    } else {
        ("other", false)
    };
    let notes = if kind == "main" {
        notifications(&raw)
    } else {
        None
    };
    let (latency, scenario, children) = {
        let mut s = app.lock();
        // Sub-agent bodies are kept for prefix comparisons, except in the
        // 1,000-children scenario.
        let keep_body = kind == "child" && s.scenario != "bg1000";
        let entry = json!({
            "kind": kind,
            "bytes": raw.len(),
            "path": uri.to_string(),
            "t": s.t0.elapsed().as_secs_f64(),
            "notifications": notes,
            // Latin-1, as the Python server sends it: one char per byte.
            "body": keep_body.then(|| raw.iter().map(|&b| char::from(b)).collect::<String>()),
        });
        s.record.push(entry);
        (s.latency, s.scenario.clone(), s.children)
    };
    if !latency.is_zero() && matches!(kind, "main" | "child" | "side") {
        tokio::time::sleep(latency).await;
    }
    let (blocks, stop) = match kind {
        "count_tokens" => return json_response(StatusCode::OK, &json!({"input_tokens": 100})),
        "other" => {
            return json_response(
                StatusCode::NOT_FOUND,
                &json!({"type": "error", "error": {"type": "not_found_error", "message": path}}),
            );
        }
        "main" => main_reply(&body, is_cc, &scenario, children),
        "child" => (
            vec![json!({"type": "text", "text": "README.md: a benchmark fixture."})],
            "end_turn",
        ),
        _ => (vec![json!({"type": "text", "text": "ok"})], "end_turn"),
    };
    if body["stream"] != Value::Bool(true) {
        let msg = json!({"id": "msg_bench", "type": "message", "role": "assistant",
                         "model": "claude-bench", "content": blocks, "stop_reason": stop,
                         "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 5}});
        return json_response(StatusCode::OK, &msg);
    }
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        stream(&blocks, stop),
    )
        .into_response()
}

async fn not_found(uri: Uri) -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        &json!({"type": "error", "error": {"type": "not_found_error", "message": uri.path()}}),
    )
}

/// Binds 127.0.0.1:`port` with a listen backlog large enough for 1,000
/// clients connecting at once (a short one drops SYNs, and a dropped SYN
/// costs a second of retransmission).
fn listen(port: u16) -> Result<tokio::net::TcpListener> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::from(([127, 0, 0, 1], port)))?;
    Ok(socket.listen(4096)?)
}

/// How the server speaks: plain HTTP/1.1, or TLS offering HTTP/2 by ALPN
/// (as the real API does) with HTTP/1.1 as the fallback.
#[derive(Clone, Default)]
struct Tls {
    /// The certificate chain and key (PEM files); `None` for plain HTTP.
    files: Option<(String, String)>,
    /// The HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS` announced; `None`: no
    /// limit announced.
    streams: Option<u32>,
}

async fn serve(listener: tokio::net::TcpListener, app: App, tls: Tls) -> Result<()> {
    use axum::serve::ListenerExt;
    let router = Router::new()
        .route("/_reset", post(reset))
        .route("/_stats", get(stats))
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(messages))
        .fallback(not_found)
        .layer(DefaultBodyLimit::disable())
        .with_state(app);
    if let Some((cert, key)) = &tls.files {
        return serve_tls(listener, router, tls_config(cert, key)?, tls.streams).await;
    }
    // Without TCP_NODELAY, Nagle's algorithm and the client's delayed ACK
    // add ~40 ms to a response written in two parts.
    let listener = listener.tap_io(|io| {
        let _ = io.set_nodelay(true);
    });
    axum::serve(listener, router).await?;
    Ok(())
}

/// A rustls server configuration for the PEM files `cert` (the chain) and
/// `key`, offering `h2` then `http/1.1`.
fn tls_config(cert: &str, key: &str) -> Result<Arc<rustls::ServerConfig>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .with_context(|| format!("{cert}: no certificate"))?;
    let key = PrivateKeyDer::from_pem_file(key).with_context(|| format!("{key}: no key"))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `router` over TLS: a task per connection (handshake, then
/// HTTP/2 or HTTP/1.1 as negotiated).
async fn serve_tls(
    listener: tokio::net::TcpListener,
    router: Router,
    config: Arc<rustls::ServerConfig>,
    streams: Option<u32>,
) -> Result<()> {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let (acceptor, router) = (acceptor.clone(), router.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let mut builder =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            builder.http2().max_concurrent_streams(streams);
            let _ = builder
                .serve_connection(
                    hyper_util::rt::TokioIo::new(tls),
                    hyper_util::service::TowerToHyperService::new(router),
                )
                .await;
        });
    }
}

/// Sends `n` concurrent sub-agent requests to the server at `base` and
/// returns the time until the last answer was read.
async fn floor(base: &str, n: usize) -> Result<Duration> {
    // reqwest is built without a default TLS provider; plain HTTP still
    // builds a TLS configuration.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(usize::MAX)
        .build()?;
    let body = json!({"model": "claude-bench", "max_tokens": 1024, "stream": true,
                      "system": [{"type": "text", "text": "You are a sub-agent."}],
                      "messages": [{"role": "user", "content": "Do the job and report."}]})
    .to_string();
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let client = client.clone();
        let body = body.clone();
        let url = format!("{base}/v1/messages");
        tasks.spawn(async move {
            let r = client.post(url).body(body).send().await?;
            let bytes = r.bytes().await?;
            anyhow::Ok(bytes.len())
        });
    }
    while let Some(done) = tasks.join_next().await {
        if done?? == 0 {
            bail!("an empty answer");
        }
    }
    Ok(start.elapsed())
}

/// User+system CPU time of this process so far, from `/proc/self/stat`
/// (in clock ticks, 10 ms each on Linux).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which is in parentheses).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime: fields 14 and 15 of the line, 11 and 12 after the name.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

fn app(latency: Duration) -> App {
    App {
        shared: Arc::new(Mutex::new(Shared {
            scenario: "explore".into(),
            latency,
            children: 1000,
            t0: Instant::now(),
            record: Vec::new(),
        })),
        default_latency: latency,
    }
}

/// `--floor N`: the server on its own thread (as when it serves cadre),
/// the client on this one.
fn measure_floor(n: usize, latency: Duration) -> Result<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let served = (|| -> Result<()> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let listener = listen(0)?;
                let _ = tx.send(listener.local_addr()?);
                serve(listener, app(latency), Tls::default()).await
            })
        })();
        if let Err(e) = served {
            eprintln!("fake server: {e:#}");
        }
    });
    let addr = rx.recv().context("the server did not start")?;
    let base = format!("http://{addr}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        // A warm-up round, then three measured ones.
        floor(&base, n).await?;
        let mut times = Vec::new();
        let cpu0 = cpu_time();
        for _ in 0..3 {
            times.push(floor(&base, n).await?);
        }
        let cpu = (cpu_time() - cpu0) / 3;
        times.sort();
        println!(
            "{n} concurrent requests answered after {} ms: {:.1} ms (min {:.1}, max {:.1}), \
             {:.1} ms above the latency; CPU of server and client together {:.1} ms per round",
            latency.as_millis(),
            times[1].as_secs_f64() * 1e3,
            times[0].as_secs_f64() * 1e3,
            times[2].as_secs_f64() * 1e3,
            times[1].saturating_sub(latency).as_secs_f64() * 1e3,
            cpu.as_secs_f64() * 1e3,
        );
        Ok(())
    })
}

fn main() -> Result<()> {
    let mut port = 0u16;
    let mut latency_ms = 0u64;
    let mut floor_n = None;
    let mut tls = Tls::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().context(format!("{arg} needs a value"));
        match arg.as_str() {
            "--port" => port = value()?.parse()?,
            "--latency-ms" => latency_ms = value()?.parse()?,
            "--floor" => floor_n = Some(value()?.parse::<usize>()?),
            "--tls" => tls.files = Some((value()?, value()?)),
            "--h2-streams" => tls.streams = Some(value()?.parse()?),
            other => bail!(
                "unknown argument `{other}` (--port, --latency-ms, --floor, --tls CERT KEY, \
                 --h2-streams N)"
            ),
        }
    }
    if let Some(n) = floor_n {
        return measure_floor(n, Duration::from_millis(latency_ms.max(1)));
    }
    // One thread: the server shares the machine with the program it serves.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = listen(port)?;
        println!("{}", listener.local_addr()?.port());
        serve(listener, app(Duration::from_millis(latency_ms)), tls).await
    })
}
