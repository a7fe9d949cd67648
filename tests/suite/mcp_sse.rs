//! MCP's legacy HTTP+SSE transport (`type: "sse"`) end to end: the npm
//! everything server in its SSE mode, and a small fake SSE server (axum)
//! for what a real server would not do: die in the middle of a call, name
//! an endpoint on another origin, send an event without end. Also the
//! stream-json `tool_progress` messages of an MCP tool's progress.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::harness::{
    Project, assistant_turns, last_tool_results, result_text, tool_names, wait_until,
};
use super::kit::{FakeServer, anthropic};

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// server-everything in its SSE mode (`index.js sse`, port from `PORT`),
/// killed when dropped.
struct EverythingSse {
    child: Child,
    port: u16,
}

impl EverythingSse {
    fn start() -> EverythingSse {
        let index = super::mcp::everything_server();
        // A free port: bound, read, released (the server binds it next).
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("node")
            .arg(&index)
            .arg("sse")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = EverythingSse { child, port };
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "server-everything did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/sse", self.port)
    }
}

impl Drop for EverythingSse {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The stream-json lines of `run` (non-JSON lines fail the test).
fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn tool_progress_for<'a>(lines: &'a [Value], id: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["type"] == "tool_progress" && l["tool_use_id"] == id)
        .collect()
}

/// The first request of `run` lists the SSE server's tools; a call goes
/// there and back (text and an image), its progress reaches stream-json as
/// `tool_progress`, and `cadre mcp test` reports the server.
#[test]
fn an_sse_server_from_npm_serves_tools_from_the_first_request() {
    let every = EverythingSse::start();
    let mut p = Project::new();
    p.write(
        ".mcp.json",
        &json!({"mcpServers": {"every": {"type": "sse", "url": every.url()}}}).to_string(),
    );
    p.config("[permissions]\nallow = [\"mcp__every\"]\n");
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::message()
            .tool_use("t1", "mcp__every__echo", json!({"message": "over sse"}))
            .tool_use("t2", "mcp__every__get-tiny-image", json!({}))
            .tool_use(
                "t3",
                "mcp__every__trigger-long-running-operation",
                json!({"duration": 1, "steps": 3}),
            )
            .reply(),
        _ => anthropic::text_reply("done"),
    });
    let run = p.run(
        Some(&server),
        &["-p", "go", "--output-format", "stream-json", "--verbose"],
    );
    run.ok();
    let reqs = server.requests();
    let first = tool_names(&reqs[0].json);
    for t in [
        "mcp__every__echo",
        "mcp__every__get-tiny-image",
        "mcp__every__trigger-long-running-operation",
    ] {
        assert!(first.contains(&t.to_string()), "{t} missing: {first:?}");
    }
    let results = last_tool_results(&reqs[1].json);
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(result_text(&results[0]), "Echo: over sse");
    assert!(
        results[1]["content"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "image" && c["source"]["media_type"] == "image/png"),
        "{:?}",
        results[1]
    );
    assert!(
        result_text(&results[2]).contains("Long running operation completed"),
        "{:?}",
        results[2]
    );
    let out = lines(&run.stdout);
    let progress = tool_progress_for(&out, "t3");
    assert_eq!(progress.len(), 3, "one per report:\n{}", run.stdout);
    assert_eq!(
        progress[0]["tool_name"],
        "mcp__every__trigger-long-running-operation"
    );

    let run = p.run(None, &["mcp", "test", "every", "--json"]);
    run.ok();
    let v = run.json();
    assert_eq!(v["status"], "ready", "{v}");
    assert!(v["tools"].as_u64().unwrap() >= 10, "{v}");
    assert!(v["resources"]["count"].as_u64().unwrap() >= 1, "{v}");
    assert!(v["prompts"]["count"].as_u64().unwrap() >= 1, "{v}");
}

/// `--output-format stream-json` carries one `tool_progress` message per
/// progress report of an MCP call, with Claude Code's fields.
#[test]
fn stream_json_carries_tool_progress_for_an_mcp_call() {
    let index = super::mcp::everything_server();
    let mut p = Project::new();
    p.config(&format!(
        "[mcp_servers.every]\ncommand = \"node\"\nargs = [{}, \"stdio\"]\n\
         [permissions]\nallow = [\"mcp__every\"]\n",
        toml_str(&index.display().to_string())
    ));
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::message()
            .tool_use(
                "toolu_long",
                "mcp__every__trigger-long-running-operation",
                json!({"duration": 1, "steps": 3}),
            )
            .tool_use("toolu_echo", "mcp__every__echo", json!({"message": "x"}))
            .reply(),
        _ => anthropic::text_reply("done"),
    });
    let run = p.run(
        Some(&server),
        &["-p", "go", "--output-format", "stream-json", "--verbose"],
    );
    run.ok();
    let out = lines(&run.stdout);
    let session_id = out[0]["session_id"].as_str().unwrap().to_string();
    let progress = tool_progress_for(&out, "toolu_long");
    // One per report, the last (sent right before the answer) included.
    assert_eq!(progress.len(), 3, "one per report:\n{}", run.stdout);
    let mut last = 0.0;
    for line in &progress {
        let mut fields: Vec<&str> = line
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            [
                "elapsed_time_seconds",
                "parent_tool_use_id",
                "session_id",
                "tool_name",
                "tool_use_id",
                "type",
                "uuid"
            ]
        );
        assert_eq!(
            line["tool_name"],
            "mcp__every__trigger-long-running-operation"
        );
        assert_eq!(line["parent_tool_use_id"], Value::Null);
        assert_eq!(line["session_id"], session_id.as_str());
        assert_eq!(line["uuid"].as_str().unwrap().len(), 36, "{line}");
        let elapsed = line["elapsed_time_seconds"].as_f64().unwrap();
        assert!(elapsed >= last, "{elapsed} after {last}");
        last = elapsed;
    }
    assert!(
        tool_progress_for(&out, "toolu_echo").is_empty(),
        "echo reports no progress"
    );
    // Progress comes after the call's tool_use and before its result.
    let at = |pred: &dyn Fn(&Value) -> bool| out.iter().position(pred).unwrap();
    let call = at(&|l| l["type"] == "assistant");
    let first = at(&|l| l["type"] == "tool_progress");
    let result = at(&|l| l["type"] == "user");
    assert!(call < first && first < result, "{}", run.stdout);
}

// ------------------------------------------------------------ fake server

/// What the fake SSE server does when a tool is called.
#[derive(Clone, Copy, PartialEq)]
enum OnCall {
    /// Sends a message that is not JSON-RPC, then answers `called`.
    Answer,
    /// Ends the event stream without answering.
    Die,
    /// Breaks the connection (as a process that dies does: no end of the
    /// chunked body).
    Crash,
    /// Sends one `message` event whose data never ends.
    Endless,
}

/// The bytes of an endless event the server sends at most.
const ENDLESS_CAP: usize = 256 * 1024 * 1024;

#[derive(Default)]
struct FakeState {
    /// The open stream's sender.
    stream: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    /// `METHOD PATH` of every HTTP request, with its `x-test` and
    /// `authorization` headers.
    requests: Vec<(String, String)>,
}

/// A minimal HTTP+SSE MCP server with one tool (`hang`).
struct FakeSse {
    url: String,
    state: Arc<Mutex<FakeState>>,
    /// Bytes of the endless event handed to the socket.
    endless_sent: Arc<AtomicUsize>,
    /// Set when the stream that sent the endless event is dropped (its
    /// client went away, or the cap was reached): no byte follows.
    endless_over: Arc<AtomicBool>,
}

/// Lives as long as one event stream; marks the end of an endless one.
struct StreamEnd {
    endless: bool,
    over: Arc<AtomicBool>,
}

impl Drop for StreamEnd {
    fn drop(&mut self) {
        if self.endless {
            self.over.store(true, Ordering::SeqCst);
        }
    }
}

impl FakeSse {
    /// `endpoint` is what the `endpoint` event says (`{origin}` is
    /// replaced by the server's own origin).
    fn start(endpoint: &str, on_call: OnCall) -> FakeSse {
        FakeSse::start_with(endpoint, on_call, false)
    }

    /// With `oauth`, a GET of the stream without a bearer token is
    /// answered 401 with a challenge, as an OAuth-protected server does.
    fn start_with(endpoint: &str, on_call: OnCall, oauth: bool) -> FakeSse {
        use axum::body::Body;
        use axum::extract::State;
        use axum::http::{HeaderMap, StatusCode};
        use axum::response::Response;
        use axum::routing::{get, post};

        type Shared = (
            Arc<Mutex<FakeState>>,
            String,
            OnCall,
            Arc<AtomicUsize>,
            Arc<AtomicBool>,
            bool,
        );

        fn record(state: &Mutex<FakeState>, what: &str, headers: &HeaderMap) {
            let h = |k: &str| {
                headers
                    .get(k)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string()
            };
            state.lock().unwrap().requests.push((
                what.to_string(),
                format!(
                    "x-test={} authorization={}",
                    h("x-test"),
                    h("authorization")
                ),
            ));
        }

        async fn sse(State(s): State<Shared>, headers: HeaderMap) -> Response {
            let (state, endpoint, _, endless_sent, endless_over, oauth) = s;
            record(&state, "GET /sse", &headers);
            if oauth && !headers.contains_key("authorization") {
                return Response::builder()
                    .status(401)
                    .header("www-authenticate", "Bearer")
                    .body(Body::empty())
                    .unwrap();
            }
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
            state.lock().unwrap().stream = Some(tx);
            let first = format!("event: endpoint\ndata: {endpoint}\n\n");
            let end = StreamEnd {
                endless: false,
                over: endless_over,
            };
            let body = futures_util::stream::unfold(
                (Some(first), rx, end),
                move |(first, mut rx, mut end)| {
                    let endless_sent = Arc::clone(&endless_sent);
                    async move {
                        if let Some(f) = first {
                            return Some((Ok::<_, std::io::Error>(f), (None, rx, end)));
                        }
                        if end.endless {
                            let sent = endless_sent.fetch_add(65536, Ordering::SeqCst);
                            if sent >= ENDLESS_CAP {
                                return None;
                            }
                            return Some((Ok("x".repeat(65536)), (None, rx, end)));
                        }
                        let next = rx.recv().await?;
                        if next == "CRASH" {
                            return Some((Err(std::io::Error::other("crash")), (None, rx, end)));
                        }
                        end.endless = next == "ENDLESS";
                        let chunk = if end.endless {
                            "event: message\ndata: ".to_string()
                        } else {
                            format!("event: message\ndata: {next}\n\n")
                        };
                        Some((Ok(chunk), (None, rx, end)))
                    }
                },
            );
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(body))
                .unwrap()
        }

        async fn message(State(s): State<Shared>, headers: HeaderMap, body: String) -> StatusCode {
            let (state, _, on_call, _, _, _) = s;
            record(&state, "POST /message", &headers);
            let msg: Value = serde_json::from_str(&body).unwrap();
            let Some(id) = msg.get("id").cloned() else {
                return StatusCode::ACCEPTED;
            };
            let result = match msg["method"].as_str().unwrap_or("") {
                "initialize" => json!({
                    "protocolVersion": "2024-11-05",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fake-sse", "version": "1"}
                }),
                "tools/list" => json!({"tools": [{
                    "name": "hang", "description": "Answers, or not",
                    "inputSchema": {"type": "object", "properties": {}}
                }]}),
                "tools/call" => match on_call {
                    OnCall::Answer => {
                        let tx = state.lock().unwrap().stream.clone();
                        if let Some(tx) = tx {
                            let _ = tx.send("{\"jsonrpc\": \"2.0\", \"method\": ".into());
                        }
                        json!({"content": [{"type": "text", "text": "called"}]})
                    }
                    OnCall::Die => {
                        state.lock().unwrap().stream = None;
                        return StatusCode::ACCEPTED;
                    }
                    OnCall::Endless | OnCall::Crash => {
                        let tx = state.lock().unwrap().stream.clone();
                        if let Some(tx) = tx {
                            let command = if on_call == OnCall::Crash {
                                "CRASH"
                            } else {
                                "ENDLESS"
                            };
                            let _ = tx.send(command.into());
                        }
                        return StatusCode::ACCEPTED;
                    }
                },
                _ => json!({}),
            };
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
            let tx = state.lock().unwrap().stream.clone();
            if let Some(tx) = tx {
                let _ = tx.send(answer);
            }
            StatusCode::ACCEPTED
        }

        // Enough OAuth metadata for a stored token to be used (rmcp reads
        // it before it hands out the token).
        async fn resource(State(s): State<Shared>) -> axum::Json<Value> {
            let origin = s.1.split("/message").next().unwrap_or("").to_string();
            axum::Json(
                json!({"resource": format!("{origin}/sse"), "authorization_servers": [origin]}),
            )
        }
        async fn as_metadata(State(s): State<Shared>) -> axum::Json<Value> {
            let b = s.1.split("/message").next().unwrap_or("").to_string();
            axum::Json(json!({
                "issuer": b,
                "authorization_endpoint": format!("{b}/authorize"),
                "token_endpoint": format!("{b}/token"),
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
            }))
        }

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(Mutex::new(FakeState::default()));
        let endless_sent = Arc::new(AtomicUsize::new(0));
        let endless_over = Arc::new(AtomicBool::new(false));
        let shared: Shared = (
            Arc::clone(&state),
            endpoint.replace("{origin}", &origin),
            on_call,
            Arc::clone(&endless_sent),
            Arc::clone(&endless_over),
            oauth,
        );
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let app = axum::Router::new()
                    .route("/sse", get(sse))
                    .route("/message", post(message))
                    .route("/.well-known/oauth-protected-resource", get(resource))
                    .route("/.well-known/oauth-authorization-server", get(as_metadata))
                    .with_state(shared);
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        FakeSse {
            url: format!("{origin}/sse"),
            state,
            endless_sent,
            endless_over,
        }
    }

    fn requests(&self) -> Vec<(String, String)> {
        self.state.lock().unwrap().requests.clone()
    }
}

/// `[mcp_servers.fake]` for a fake SSE server, with a header.
fn fake_toml(fake: &FakeSse) -> String {
    format!(
        "[mcp_servers.fake]\ntype = \"sse\"\nurl = {}\nheaders = {{ X-Test = \"s3cret\" }}\n\
         [permissions]\nallow = [\"mcp__fake\"]\n",
        toml_str(&fake.url)
    )
}

fn call_hang() -> FakeServer {
    FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::tool_use_reply("t1", "mcp__fake__hang", json!({})),
        _ => anthropic::text_reply("done"),
    })
}

/// The configured headers go with the stream's GET and with every POST.
/// A message that is not JSON-RPC is skipped with a warning.
#[test]
fn an_sse_servers_headers_go_with_every_request() {
    let fake = FakeSse::start("/message?sessionId=1", OnCall::Answer);
    let mut p = Project::new();
    p.config(&fake_toml(&fake));
    let server = call_hang();
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let reqs = server.requests();
    assert_eq!(result_text(&last_tool_results(&reqs[1].json)[0]), "called");
    assert!(
        run.stderr
            .contains("MCP server `fake` (SSE) sent a message that is not JSON-RPC"),
        "{}",
        run.stderr
    );
    let seen = fake.requests();
    assert_eq!(seen[0].0, "GET /sse");
    assert!(seen.iter().any(|(what, _)| what == "POST /message"));
    for (what, headers) in &seen {
        assert_eq!(headers, "x-test=s3cret authorization=", "{what}");
    }
}

/// A token `cadre mcp login` stored for an SSE server goes with the
/// stream's GET and with every POST as a bearer token.
#[test]
fn a_stored_oauth_token_goes_with_every_sse_request() {
    let fake = FakeSse::start_with("{origin}/message?sessionId=1", OnCall::Answer, true);
    let mut p = Project::new();
    p.config(&fake_toml(&fake));
    // The file `login` writes (see tests/suite/mcp_oauth.rs for the flow):
    // `NAME-FNV1A64(URL).json` under ~/.config/cadre/mcp-tokens.
    let hash = fake.url.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    let dir = p.home.path().join(".config/cadre/mcp-tokens");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(format!("fake-{hash:016x}.json")),
        json!({"server": "fake", "url": fake.url, "credentials": {
            "client_id": "client-1",
            "token_response": {"access_token": "tok-1", "token_type": "bearer"},
        }})
        .to_string(),
    )
    .unwrap();
    let server = call_hang();
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    assert_eq!(
        result_text(&last_tool_results(&server.requests()[1].json)[0]),
        "called",
        "{}",
        run.stderr
    );
    let seen = fake.requests();
    // rmcp's discovery GETs the stream once without a token (and is
    // answered 401); every other request carries it.
    let mcp: Vec<_> = seen
        .iter()
        .filter(|(_, h)| h.contains("authorization=Bearer"))
        .collect();
    assert!(
        seen.iter()
            .filter(|(_, h)| !h.contains("authorization=Bearer"))
            .all(|(w, _)| w == "GET /sse"),
        "{seen:?}"
    );
    assert!(mcp.iter().any(|(w, _)| w == "GET /sse"), "{seen:?}");
    assert!(mcp.len() >= 4, "{seen:?}");
    for (what, headers) in mcp {
        assert_eq!(
            headers, "x-test=s3cret authorization=Bearer tok-1",
            "{what}"
        );
    }
}

/// A server whose stream ends in the middle of a call: the call gets an
/// error that says so, the run goes on, and stderr names the server.
#[test]
fn an_sse_server_that_dies_mid_call_gives_a_clear_error() {
    let fake = FakeSse::start("/message?sessionId=1", OnCall::Die);
    let mut p = Project::new();
    p.config(&fake_toml(&fake));
    let server = call_hang();
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let reqs = server.requests();
    let result = &last_tool_results(&reqs[1].json)[0];
    assert_eq!(result["is_error"], true, "{result}");
    let text = result_text(result);
    assert!(
        text.contains("MCP server `fake`: the server closed the event stream"),
        "{text}"
    );
    assert!(
        run.stderr
            .contains("MCP server `fake` (SSE): the server closed the event stream"),
        "{}",
        run.stderr
    );
}

/// With telemetry on, a server whose stream ends on its own after it had
/// connected is an `mcp_server_connection` event with status
/// `disconnected`, as a stdio server that exits is.
#[test]
fn an_sse_server_whose_stream_ends_is_a_disconnected_event() {
    let receiver = super::telemetry::collector();
    let fake = FakeSse::start("/message?sessionId=1", OnCall::Die);
    let mut p = Project::new();
    p.config(&fake_toml(&fake));
    super::telemetry::telemetry_env(&mut p, receiver.url(), "http/protobuf");
    let server = call_hang();
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let got = super::telemetry::decode_protobuf(&receiver);
    let all = got.events_named("claude_code.mcp_server_connection");
    let status: Vec<&str> = all.iter().map(|e| e["status"].as_str()).collect();
    assert_eq!(
        status,
        ["connected", "disconnected"],
        "{all:#?}\n{}",
        run.stderr
    );
    assert_eq!(all[1]["transport_type"], "sse");
    assert!(all[1]["duration_ms"].parse::<u64>().is_ok(), "{all:#?}");
}

/// A connection that breaks in the middle of a call (the server died):
/// the call gets an error that says the stream failed.
#[test]
fn an_sse_connection_that_breaks_mid_call_gives_a_clear_error() {
    let fake = FakeSse::start("/message?sessionId=1", OnCall::Crash);
    let mut p = Project::new();
    p.config(&fake_toml(&fake));
    let server = call_hang();
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let result = &last_tool_results(&server.requests()[1].json)[0];
    assert_eq!(result["is_error"], true, "{result}");
    let text = result_text(result);
    assert!(
        text.contains("MCP server `fake`: the event stream failed: "),
        "{text}"
    );
    assert!(
        run.stderr
            .contains("MCP server `fake` (SSE): the event stream failed"),
        "{}",
        run.stderr
    );
}

/// An `endpoint` event naming another origin is refused: nothing is
/// posted there, and the server fails to connect with the reason.
#[test]
fn an_sse_endpoint_on_another_origin_is_refused() {
    // A listener that counts connections stands for the other origin.
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    other.set_nonblocking(true).unwrap();
    let other_url = format!("http://{}/steal", other.local_addr().unwrap());
    let fake = FakeSse::start(&other_url, OnCall::Answer);
    let mut p = Project::new();
    p.config(&fake_toml(&fake));
    let run = p.run(None, &["mcp", "test", "fake"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.contains("is on another origin than the stream"),
        "{}",
        run.stdout
    );
    assert!(
        other.accept().is_err(),
        "cadre connected to the other origin"
    );
    assert_eq!(
        fake.requests()
            .iter()
            .filter(|(w, _)| w.starts_with("POST"))
            .count(),
        0
    );
}

/// An event that never ends is refused once it passes the limit (16 MiB):
/// the call gets an error naming it, and cadre stops reading (the server
/// could send no more than the limit plus what the sockets buffer).
#[test]
fn an_endless_sse_event_is_bounded() {
    let fake = FakeSse::start("/message?sessionId=1", OnCall::Endless);
    let mut p = Project::new();
    p.config(&fake_toml(&fake));
    let server = call_hang();
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let reqs = server.requests();
    let result = &last_tool_results(&reqs[1].json)[0];
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result_text(result).contains("the server sent an event larger than 16 MiB"),
        "{result}"
    );
    // The server drops the stream once it notices the closed connection;
    // from then on nothing more is sent.
    wait_until("the endless stream to end", Duration::from_secs(60), || {
        fake.endless_over.load(Ordering::SeqCst)
    });
    let sent = fake.endless_sent.load(Ordering::SeqCst);
    assert!(
        sent < 48 * 1024 * 1024,
        "the server handed {sent} bytes to a reader that should have stopped at 16 MiB"
    );
}

/// A URL that does not serve an event stream fails to connect with the
/// status, and a streamable-HTTP server's answer is named as such.
#[test]
fn an_sse_url_that_is_not_an_event_stream_is_reported() {
    let fake = FakeSse::start("/message?sessionId=1", OnCall::Answer);
    let mut p = Project::new();
    let wrong = fake.url.replace("/sse", "/nope");
    p.config(&format!(
        "[mcp_servers.fake]\ntype = \"sse\"\nurl = {}\n",
        toml_str(&wrong)
    ));
    let run = p.run(None, &["mcp", "test", "fake"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.contains(&format!(
            "cannot open the SSE stream: GET {wrong} answered HTTP 404"
        )),
        "{}",
        run.stdout
    );
    let mut p = Project::new();
    let url = super::mcp::http_echo_server();
    p.config(&format!(
        "[mcp_servers.fake]\ntype = \"sse\"\nurl = {}\n",
        toml_str(&url)
    ));
    let run = p.run(None, &["mcp", "test", "fake"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.contains("cannot open the SSE stream"),
        "{}",
        run.stdout
    );
}

/// An SSE server of an untrusted folder's `.mcp.json` is never contacted.
#[test]
fn an_untrusted_folders_sse_server_gets_no_request() {
    let fake = FakeSse::start("/message?sessionId=1", OnCall::Answer);
    let p = Project::untrusted();
    p.write(
        ".mcp.json",
        &json!({"mcpServers": {"fake": {"type": "sse", "url": fake.url}}}).to_string(),
    );
    let server = FakeServer::route(|_| anthropic::text_reply("done"));
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let run = p.run(None, &["mcp", "list"]);
    run.ok();
    assert!(
        run.stderr.contains("not a trusted folder"),
        "{}",
        run.stderr
    );
    assert!(fake.requests().is_empty(), "{:?}", fake.requests());
    assert!(!tool_names(&server.requests()[0].json).contains(&"mcp__fake__hang".to_string()));
}
