//! MCP servers end to end, against real servers: a small stdio server
//! written here with `rmcp`, and the published reference servers from npm
//! (filesystem and everything, installed by `scripts/test` into `.ci/node`).
//!
//! The rmcp server needs an executable. Cargo gives integration tests no
//! path to an example binary, so the test binary serves it itself: the
//! "test" [`mcp_server_mode`] does nothing in a normal run, but when
//! `CADRE_TEST_MCP_SERVER` is set it speaks MCP on stdio until stdin
//! closes. A server entry runs this binary with `--exact` on that test;
//! the lines libtest prints to stdout ("running 1 test") are not JSON, and
//! MCP clients (rmcp included) skip unparsable lines; the server mode ends
//! any line libtest left open before it speaks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use super::harness::{
    Project, assistant_turns, child_requests_of, has_main_prompt as is_main, last_tool_results,
    result_text, tool, tool_names, wait_until,
};
use super::kit::{FakeServer, RecordedRequest, anthropic};

fn child_requests(server: &FakeServer) -> Vec<RecordedRequest> {
    child_requests_of(server, false)
}

/// A 1×1 PNG, base64.
const PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

pub(super) const MODE_ENV: &str = "CADRE_TEST_MCP_SERVER";
pub(super) const PIDFILE_ENV: &str = "CADRE_TEST_MCP_PIDFILE";

/// The stdio MCP server, when this binary is started as one.
#[test]
fn mcp_server_mode() {
    let Ok(mode) = std::env::var(MODE_ENV) else {
        return;
    };
    // libtest may have started a line ("test NAME ... "); end it so the
    // first message starts a line of its own.
    {
        use std::io::Write;
        let mut out = std::io::stdout();
        out.write_all(b"\n").unwrap();
        out.flush().unwrap();
    }
    if let Ok(p) = std::env::var(PIDFILE_ENV) {
        std::fs::write(p, std::process::id().to_string()).unwrap();
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        match mode.as_str() {
            // Reads its input and never answers: a server that never connects.
            "hang" => {
                use tokio::io::AsyncReadExt;
                let mut sink = Vec::new();
                let _ = tokio::io::stdin().read_to_end(&mut sink).await;
            }
            // Says why on stderr and exits before the handshake.
            "crash" => {
                eprintln!("starting up");
                eprintln!("fatal: MCP_TEST_TOKEN is not set");
                std::process::exit(3);
            }
            // Answers `initialize` (offering tools) and nothing else:
            // `tools/list` is "method not found", as the ACP adapter's own
            // server answers when it has no tools to lend.
            "no-tools-list" => {
                use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
                let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
                let mut out = tokio::io::stdout();
                while let Ok(Some(line)) = lines.next_line().await {
                    let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                        continue;
                    };
                    let Some(id) = msg.get("id").cloned() else {
                        continue;
                    };
                    let reply = if msg["method"] == "initialize" {
                        json!({"jsonrpc": "2.0", "id": id, "result": {
                            "protocolVersion": msg["params"]["protocolVersion"],
                            "capabilities": {"tools": {}},
                            "serverInfo": {"name": "bare", "version": "1.0.0"}}})
                    } else {
                        json!({"jsonrpc": "2.0", "id": id,
                               "error": {"code": -32601, "message": "Method not found"}})
                    };
                    let _ = out.write_all(format!("{reply}\n").as_bytes()).await;
                    let _ = out.flush().await;
                }
            }
            // Connects once the file after `gated:` exists.
            mode if mode.starts_with("gated:") => {
                let gate = Path::new(&mode["gated:".len()..]);
                while !gate.exists() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let running = EchoServer.serve(rmcp::transport::stdio()).await.unwrap();
                let _ = running.waiting().await;
            }
            mode => {
                if mode == "slow" {
                    tokio::time::sleep(Duration::from_millis(800)).await;
                }
                let running = EchoServer.serve(rmcp::transport::stdio()).await.unwrap();
                let _ = running.waiting().await;
            }
        }
    });
    std::process::exit(0);
}

#[derive(Clone)]
struct EchoServer;

/// Set in the "grow" mode once the server has added its late tool.
static GROWN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The "rich" mode: every kind of content, and resources.
fn rich() -> bool {
    std::env::var(MODE_ENV).is_ok_and(|m| m == "rich")
}

fn schema(v: Value) -> std::sync::Arc<rmcp::model::JsonObject> {
    std::sync::Arc::new(v.as_object().unwrap().clone())
}

impl ServerHandler for EchoServer {
    fn get_info(&self) -> ServerConfig {
        if rich() {
            ServerConfig::new(
                ServerCapabilities::builder()
                    .enable_tools()
                    .enable_resources()
                    .build(),
            )
        } else {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
        }
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        // The "grow" mode adds a tool a moment after the handshake and says so.
        if std::env::var(MODE_ENV).is_ok_and(|m| m == "grow") {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                GROWN.store(true, std::sync::atomic::Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
            });
        }
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        let mut notes = rmcp::model::Resource::new("file:///notes.txt", "notes");
        notes.description = Some("Meeting notes".into());
        notes.mime_type = Some("text/plain".into());
        let pixel = rmcp::model::Resource::new("file:///pixel.png", "pixel");
        Ok(rmcp::model::ListResourcesResult::with_all_items(vec![
            notes, pixel,
        ]))
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, ErrorData> {
        use rmcp::model::{ReadResourceResponse, ReadResourceResult, ResourceContents};
        let contents = match request.uri.as_str() {
            "file:///notes.txt" => ResourceContents::text("notes: ship it", "file:///notes.txt"),
            // An MCP Apps page, for a host that renders it.
            "ui://app/page" => ResourceContents::text("<p>the app</p>", "ui://app/page"),
            "file:///pixel.png" => ResourceContents::BlobResourceContents {
                uri: request.uri.clone(),
                mime_type: Some("image/png".into()),
                blob: PIXEL_PNG.into(),
                meta: None,
            },
            other => {
                return Err(ErrorData::resource_not_found(
                    format!("no resource {other}"),
                    None,
                ));
            }
        };
        Ok(ReadResourceResponse::Complete(ReadResourceResult::new(
            vec![contents],
        )))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = vec![
            Tool::new(
                "echo",
                "Echoes the text back",
                schema(json!({
                    "type": "object",
                    "properties": {"text": {"type": "string", "description": "what to echo"}},
                    "required": ["text"]
                })),
            ),
            Tool::new(
                "pid",
                "The server's process id",
                schema(json!({"type": "object", "properties": {}})),
            )
            .with_annotations(ToolAnnotations::new().read_only(true)),
        ];
        if GROWN.load(std::sync::atomic::Ordering::SeqCst) {
            tools.push(Tool::new(
                "late_tool",
                "Added after the handshake",
                schema(json!({"type": "object", "properties": {}})),
            ));
        }
        // The "progress" mode adds a tool that reports progress quickly.
        if std::env::var(MODE_ENV).is_ok_and(|m| m == "progress") {
            tools.push(Tool::new(
                "steps",
                "Reports 20 steps of progress, the last right before its answer",
                schema(json!({"type": "object", "properties": {}})),
            ));
        }
        // The "rich" mode adds a tool that returns every kind of content.
        if rich() {
            tools.push(Tool::new(
                "picture",
                "Returns an image with other kinds of content",
                schema(json!({"type": "object", "properties": {}})),
            ));
            tools.push(Tool::new(
                "roots",
                "The client's roots",
                schema(json!({"type": "object", "properties": {}})),
            ));
            tools.push(Tool::new(
                "sample",
                "Asks the client's model a question",
                schema(json!({"type": "object", "properties": {}})),
            ));
            tools.push(Tool::new(
                "ask",
                "Asks the user for a name",
                schema(json!({"type": "object", "properties": {}})),
            ));
            tools.push(Tool::new(
                "wait",
                "Waits until cancelled (marks wait-started and wait-cancelled in its folder)",
                schema(json!({"type": "object", "properties": {}})),
            ));
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        // Over HTTP, echo the test header too (to check configured headers).
        let token = context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|p| p.headers.get("x-test-token"))
            .and_then(|v| v.to_str().ok())
            .map(|t| format!(" (token {t})"))
            .unwrap_or_default();
        let result = match request.name.as_ref() {
            // The "huge" mode answers `big` with more than cadre takes in
            // one message (rmcp's line limit, 16 MiB).
            "echo"
                if std::env::var(MODE_ENV).is_ok_and(|m| m == "huge")
                    && args.get("text").and_then(Value::as_str) == Some("big") =>
            {
                CallToolResult::success(vec![ContentBlock::text("x".repeat(17 << 20))])
            }
            // The "bye" mode answers, then exits: a server that goes away.
            "echo" if std::env::var(MODE_ENV).is_ok_and(|m| m == "bye") => {
                std::thread::spawn(|| {
                    std::thread::sleep(Duration::from_millis(100));
                    std::process::exit(0);
                });
                CallToolResult::success(vec![ContentBlock::text("bye")])
            }
            "echo" => CallToolResult::success(vec![ContentBlock::text(format!(
                "echo: {}{token}",
                args.get("text").and_then(Value::as_str).unwrap_or("")
            ))]),
            "pid" => {
                CallToolResult::success(vec![ContentBlock::text(std::process::id().to_string())])
            }
            "picture" => CallToolResult::success(vec![
                ContentBlock::text("a red pixel:"),
                ContentBlock::image(PIXEL_PNG, "image/png"),
                ContentBlock::image("PHN2Zz48L3N2Zz4=", "image/svg+xml"),
                ContentBlock::embedded_text("file:///notes.txt", "the notes say hi"),
                ContentBlock::resource_link(rmcp::model::Resource::new(
                    "file:///big.csv",
                    "big.csv",
                )),
            ]),
            #[allow(deprecated)]
            "roots" => {
                let listed = context.peer.list_roots().await;
                let text = match listed {
                    Ok(r) => serde_json::to_string(&r.roots).unwrap(),
                    Err(e) => format!("roots failed: {e}"),
                };
                CallToolResult::success(vec![ContentBlock::text(text)])
            }
            #[allow(deprecated)]
            "sample" => {
                let mut params = rmcp::model::CreateMessageRequestParams::new(
                    vec![rmcp::model::SamplingMessage::user_text(
                        "SAMPLE-ME: say pong",
                    )],
                    50,
                );
                params.system_prompt = Some("You are the sampler.".into());
                let request = rmcp::model::ServerRequest::CreateMessageRequest(
                    rmcp::model::CreateMessageRequest::new(params),
                );
                let text = match context.peer.send_request(request).await {
                    Ok(rmcp::model::ClientResult::CreateMessageResult(r)) => format!(
                        "sampled: {} (model {}, stop {:?})",
                        r.message
                            .content
                            .first()
                            .and_then(|c| c.as_text())
                            .map(|t| t.text.clone())
                            .unwrap_or_default(),
                        r.model,
                        r.stop_reason
                    ),
                    Ok(other) => format!("unexpected {other:?}"),
                    Err(e) => format!("sampling failed: {e}"),
                };
                CallToolResult::success(vec![ContentBlock::text(text)])
            }
            "steps" => {
                // Back to back, and the answer right after the last one.
                if let Some(token) = context.meta.get_progress_token() {
                    for step in 1..=STEPS {
                        let report = rmcp::model::ProgressNotificationParam::new(
                            token.clone(),
                            f64::from(step),
                        )
                        .with_total(f64::from(STEPS))
                        .with_message(format!("step {step}"));
                        let _ = context.peer.notify_progress(report).await;
                    }
                }
                CallToolResult::success(vec![ContentBlock::text("stepped")])
            }
            "wait" => {
                std::fs::write("wait-started", "").unwrap();
                tokio::select! {
                    () = context.ct.cancelled() => {
                        std::fs::write("wait-cancelled", "").unwrap();
                        CallToolResult::success(vec![ContentBlock::text("cancelled")])
                    }
                    () = tokio::time::sleep(Duration::from_secs(120)) => {
                        CallToolResult::success(vec![ContentBlock::text("waited")])
                    }
                }
            }
            "ask" => {
                let declared = context
                    .peer
                    .peer_info()
                    .is_some_and(|i| i.capabilities.elicitation.is_some());
                let schema = rmcp::model::ElicitationSchema::builder()
                    .required_string("name")
                    .build()
                    .unwrap();
                let params = rmcp::model::ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: "What is your name?".into(),
                    requested_schema: schema,
                };
                // (`Peer::create_elicitation` needs rmcp's `elicitation`
                // feature; the plain request needs nothing more.)
                let request = rmcp::model::ServerRequest::ElicitRequest(
                    rmcp::model::ElicitRequest::new(params),
                );
                let text = match context.peer.send_request(request).await {
                    Ok(rmcp::model::ClientResult::ElicitResult(r)) => match r.content {
                        Some(c) => {
                            format!("declared {declared}, action {:?}, content {c}", r.action)
                        }
                        None => format!("declared {declared}, action {:?}", r.action),
                    },
                    Ok(other) => format!("declared {declared}, unexpected {other:?}"),
                    Err(e) => format!("declared {declared}, elicitation failed: {e}"),
                };
                CallToolResult::success(vec![ContentBlock::text(text)])
            }
            "late_tool" => CallToolResult::success(vec![ContentBlock::text("late and here")]),
            other => CallToolResult::error(vec![ContentBlock::text(format!("no tool {other}"))]),
        };
        Ok(CallToolResponse::Complete(result))
    }
}

/// The command line that starts this binary as the MCP server.
pub(super) fn server_command() -> (String, Vec<String>) {
    let exe = std::env::current_exe().unwrap();
    let args = [
        "--exact",
        "suite::mcp::mcp_server_mode",
        "--nocapture",
        "--quiet",
        "--test-threads=1",
    ];
    (
        exe.display().to_string(),
        args.iter().map(|s| s.to_string()).collect(),
    )
}

/// `[mcp_servers.NAME]` for the test server in `mode`.
fn server_toml(name: &str, mode: &str) -> String {
    let (cmd, args) = server_command();
    format!(
        "[mcp_servers.{name}]\ncommand = {}\nargs = {}\nenv = {{ {MODE_ENV} = \"{mode}\" }}\n",
        toml_str(&cmd),
        serde_json::to_string(&args).unwrap()
    )
}

fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// A first reply late enough for the servers to connect: a harmless Glob
/// call, so the second request shows what a later turn sees.
fn first_turn_reply() -> super::kit::Reply {
    anthropic::tool_use_reply("t0", "Glob", json!({"pattern": "*.nothing"}))
        .delayed(Duration::from_millis(1500))
}

/// The reply while a request does not list `tool` yet (`chat` connects
/// its servers in the background; a server may add a tool later): a
/// harmless Glob call, answered after a pause, so that the model asks
/// again with a later turn's tools. `None` once `tool` is listed. (The
/// turn limit and the test's own deadline bound the wait.)
fn until_listed(r: &RecordedRequest, tool: &str) -> Option<super::kit::Reply> {
    if tool_names(&r.json).iter().any(|n| n == tool) {
        return None;
    }
    let id = format!("wait{}", assistant_turns(r));
    Some(
        anthropic::tool_use_reply(&id, "Glob", json!({"pattern": "*.nothing"}))
            .delayed(Duration::from_millis(200)),
    )
}

/// Whether the model of request `r` has called tool use `id` already.
fn called(r: &RecordedRequest, id: &str) -> bool {
    r.json["messages"].as_array().is_some_and(|m| {
        m.iter()
            .filter(|m| m["role"] == "assistant")
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .any(|b| b["type"] == "tool_use" && b["id"] == id)
    })
}

/// The request that carries the result of tool use `id`.
fn result_request<'a>(reqs: &'a [RecordedRequest], id: &str) -> &'a RecordedRequest {
    reqs.iter()
        .find(|r| {
            last_tool_results(&r.json)
                .iter()
                .any(|t| t["tool_use_id"] == id)
        })
        .unwrap_or_else(|| panic!("no request has the result of {id}"))
}

#[test]
fn an_mcp_tool_call_goes_end_to_end_with_the_servers_schema() {
    let mut p = Project::new();
    p.config(&server_toml("echo", "echo"));
    p.config(&server_toml("late", "slow"));
    p.config("[permissions]\nallow = [\"mcp__echo__*\"]\n");
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => first_turn_reply(),
        1 => anthropic::tool_use_reply("t1", "mcp__echo__echo", json!({"text": "hi"})),
        _ => anthropic::text_reply("done"),
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let first = tool_names(&reqs[0].json);
    assert!(
        first.contains(&"mcp__late__echo".to_string())
            && first.contains(&"mcp__echo__echo".to_string()),
        "`run` waits for every server before its first request: {first:?}"
    );
    let names = tool_names(&reqs[1].json);
    assert!(
        names.contains(&"mcp__late__echo".to_string()),
        "a later turn sees servers that became ready: {names:?}"
    );
    assert!(names.contains(&"mcp__echo__echo".to_string()), "{names:?}");
    assert!(names.contains(&"mcp__echo__pid".to_string()), "{names:?}");
    let echo = tool(&reqs[1].json, "mcp__echo__echo").unwrap();
    assert_eq!(echo["description"], "Echoes the text back");
    assert_eq!(
        echo["input_schema"]["properties"]["text"]["type"], "string",
        "{echo}"
    );
    assert_eq!(echo["input_schema"]["required"], json!(["text"]));
    let results = last_tool_results(&reqs[2].json);
    assert_eq!(results.len(), 1);
    assert_eq!(result_text(&results[0]), "echo: hi");
    assert_ne!(results[0]["is_error"], true);
}

#[test]
fn the_first_request_of_run_offers_mcp_tools_and_can_call_them() {
    let mut p = Project::new();
    p.config(&server_toml("late", "slow"));
    p.config("[permissions]\nallow = [\"mcp__late\"]\n");
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::tool_use_reply("t1", "mcp__late__echo", json!({"text": "first"})),
        _ => anthropic::text_reply("done"),
    });
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let reqs = server.requests();
    let tool_result = last_tool_results(&reqs[1].json);
    assert_eq!(result_text(&tool_result[0]), "echo: first");
    assert_ne!(tool_result[0]["is_error"], true);
}

#[test]
fn the_wait_for_servers_is_bounded_by_the_startup_timeout() {
    let mut p = Project::new();
    p.config(&server_toml("echo", "echo"));
    p.config(&server_toml("stuck", "hang"));
    p.config("[mcp]\nstartup_timeout_ms = 700\n");
    let server = FakeServer::route(|_| anthropic::text_reply("done"));
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let first = tool_names(&server.requests()[0].json);
    assert!(first.contains(&"mcp__echo__echo".to_string()), "{first:?}");
    assert!(
        !first.iter().any(|n| n.starts_with("mcp__stuck")),
        "{first:?}"
    );
    assert!(
        run.stderr.contains("`stuck` still connecting after 700 ms"),
        "stderr: {}",
        run.stderr
    );
}

#[test]
fn a_server_that_dies_at_start_is_reported_with_its_stderr() {
    let mut p = Project::new();
    p.config(&server_toml("crashy", "crash"));
    let server = FakeServer::route(|_| anthropic::text_reply("done"));
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    assert!(
        run.stderr.contains("MCP server `crashy` failed")
            && run.stderr.contains("fatal: MCP_TEST_TOKEN is not set")
            && run.stderr.contains("starting up"),
        "stderr: {}",
        run.stderr
    );
    // The failure ended the wait: the run went on without the server.
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn chat_does_not_wait_for_servers_before_its_first_request() {
    use std::io::Write;
    let mut p = Project::new();
    p.config(&server_toml("late", "slow"));
    let server = FakeServer::route(|_| anthropic::text_reply("hello back"));
    let mut child = p
        .command(Some(&server))
        .args(["chat"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = tool_names(&server.requests()[0].json);
    assert!(
        !first.iter().any(|n| n.starts_with("mcp__late")),
        "chat starts at once: {first:?}"
    );
}

#[test]
fn mcp_tools_are_permission_checked_and_schema_validated() {
    let mut p = Project::new();
    p.config(&server_toml("echo", "echo"));
    // No allow rule: in the default mode an MCP tool asks, which is a
    // denial without a user. The read-only `pid` tool is denied too:
    // only the server's annotation makes it read-only, not a permission.
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => first_turn_reply(),
        1 => anthropic::message()
            .tool_use("t1", "mcp__echo__echo", json!({"text": "hi"}))
            .reply(),
        2 => anthropic::tool_use_reply("t2", "mcp__echo__nope", json!({})),
        _ => anthropic::text_reply("done"),
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let reqs = server.requests();
    let denied = last_tool_results(&reqs[2].json);
    assert_eq!(denied[0]["is_error"], true);
    assert!(
        result_text(&denied[0]).contains("mcp__echo__echo"),
        "{denied:?}"
    );
    let unknown = last_tool_results(&reqs[3].json);
    assert_eq!(unknown[0]["is_error"], true);

    // With an allow rule, input is checked against the server's schema.
    let mut p = Project::new();
    p.config(&server_toml("echo", "echo"));
    p.config("[permissions]\nallow = [\"mcp__echo\"]\n");
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => first_turn_reply(),
        1 => anthropic::tool_use_reply("t1", "mcp__echo__echo", json!({"text": 5})),
        _ => anthropic::text_reply("done"),
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let bad = last_tool_results(&server.requests()[2].json);
    assert_eq!(bad[0]["is_error"], true);
    assert!(result_text(&bad[0]).contains("text"), "{bad:?}");
}

#[test]
fn a_failing_server_is_reported_and_the_run_continues() {
    let mut p = Project::new();
    p.config(&server_toml("echo", "echo"));
    p.config("[mcp_servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n");
    p.config("[permissions]\nallow = [\"mcp__*\"]\n");
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => first_turn_reply(),
        1 => anthropic::tool_use_reply("t1", "mcp__echo__echo", json!({"text": "still here"})),
        _ => anthropic::text_reply("done"),
    });
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    assert!(
        run.stderr.contains("MCP server `broken` failed"),
        "stderr: {}",
        run.stderr
    );
    let reqs = server.requests();
    let names = tool_names(&reqs[1].json);
    assert!(!names.iter().any(|n| n.starts_with("mcp__broken")));
    assert_eq!(
        result_text(&last_tool_results(&reqs[2].json)[0]),
        "echo: still here"
    );
}

/// rmcp drops a message over its line limit; the call it answered used to
/// wait for ever. It fails at once, naming the server and the limit, and
/// the server stays usable.
#[test]
fn an_answer_over_the_message_limit_fails_the_call_and_the_session_goes_on() {
    use std::process::Stdio;
    let mut p = Project::new();
    p.config(&server_toml("bulky", "huge"));
    p.config("[permissions]\nallow = [\"mcp__bulky__*\"]\n");
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::tool_use_reply("t1", "mcp__bulky__echo", json!({"text": "big"})),
        1 => anthropic::tool_use_reply("t2", "mcp__bulky__echo", json!({"text": "small"})),
        _ => anthropic::text_reply("all done"),
    });
    let mut child = p
        .command(Some(&server))
        .args(["run", "go"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A bound for a hung run (what this test catches), not a timing check.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the run hung on the over-long answer");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let run = super::harness::Run::from(child.wait_with_output().unwrap());
    run.ok();
    assert!(run.stdout.contains("all done"), "{}", run.stdout);
    assert!(
        run.stderr
            .contains("MCP server `bulky` answered with a message of"),
        "{}",
        run.stderr
    );
    let reqs = server.requests();
    let big = &last_tool_results(&result_request(&reqs, "t1").json)[0];
    assert_eq!(big["is_error"], true, "{big}");
    let text = result_text(big);
    assert!(
        text.starts_with("MCP server `bulky` failed to run `echo`"),
        "{text}"
    );
    assert!(text.contains("limit of 16777216 bytes"), "{text}");
    let small = &last_tool_results(&result_request(&reqs, "t2").json)[0];
    assert_eq!(result_text(small), "echo: small");
}

#[test]
fn mcp_json_servers_are_read_and_settings_win_on_a_clash() {
    let mut p = Project::new();
    let (cmd, args) = server_command();
    let entry = |mode: &str| json!({"command": cmd, "args": args, "env": {MODE_ENV: mode}});
    p.write(
        ".mcp.json",
        &json!({"mcpServers": {"fromjson": entry("echo"), "clash": {"command": "/nonexistent/x"}}})
            .to_string(),
    );
    p.config(&server_toml("clash", "echo"));
    p.config("[permissions]\nallow = [\"mcp__*\"]\n");
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => first_turn_reply(),
        _ => anthropic::text_reply("done"),
    });
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let names = tool_names(&server.requests()[1].json);
    assert!(
        names.contains(&"mcp__fromjson__echo".to_string()),
        "{names:?}"
    );
    assert!(names.contains(&"mcp__clash__echo".to_string()), "{names:?}");
    assert!(!run.stderr.contains("failed"), "{}", run.stderr);
}

#[test]
fn mcp_json_expands_variables_with_defaults() {
    let mut p = Project::new();
    let (cmd, args) = server_command();
    p.env("TEST_MCP_BIN", &cmd);
    p.env("TEST_MCP_MODE", "echo");
    let mut expanded_args = args.clone();
    // `${VAR:-default}` with the variable unset gives the default.
    expanded_args[1] = "${TEST_MCP_FILTER:-suite::mcp::mcp_server_mode}".into();
    p.write(
        ".mcp.json",
        &json!({"mcpServers": {
            "vars": {"type": "stdio", "command": "${TEST_MCP_BIN}", "args": expanded_args,
                     "env": {MODE_ENV: "${TEST_MCP_MODE}"}},
            "unset": {"command": "${TEST_MCP_NOT_SET}"}
        }})
        .to_string(),
    );
    p.config("[permissions]\nallow = [\"mcp__vars\"]\n");
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::tool_use_reply("t1", "mcp__vars__echo", json!({"text": "x"})),
        _ => anthropic::text_reply("done"),
    });
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    assert_eq!(
        result_text(&last_tool_results(&server.requests()[1].json)[0]),
        "echo: x"
    );
    assert!(
        run.stderr.contains("mcpServers.unset")
            && run.stderr.contains("`TEST_MCP_NOT_SET` is not set"),
        "stderr: {}",
        run.stderr
    );
}

/// Main waits for the servers, spawns `agent`, then finishes; the child
/// calls `child_call` (if any) once and then answers.
fn spawning_server(agent: &'static str, child_call: Option<(&'static str, Value)>) -> FakeServer {
    FakeServer::route(spawning_route(agent, child_call))
}

fn spawning_route(
    agent: &'static str,
    child_call: Option<(&'static str, Value)>,
) -> impl Fn(&RecordedRequest) -> super::kit::Reply + Send + Sync + 'static {
    move |r| {
        if is_main(r) {
            return match assistant_turns(r) {
                0 => first_turn_reply(),
                1 => anthropic::tool_use_reply(
                    "a1",
                    "Agent",
                    json!({"description": "use mcp", "prompt": "go", "subagent_type": agent}),
                ),
                _ => anthropic::text_reply("all done"),
            };
        }
        match (assistant_turns(r), &child_call) {
            (0, Some((name, input))) => anthropic::tool_use_reply("c1", name, input.clone()),
            _ => anthropic::text_reply("child finished"),
        }
    }
}

fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Ok(s) => !s
            .lines()
            .any(|l| l.starts_with("State:") && l.contains("Z")),
        Err(_) => false,
    }
}

#[test]
fn an_agents_inline_server_runs_for_the_child_only() {
    let mut p = Project::new();
    p.config("[permissions]\nallow = [\"mcp__*\"]\n");
    let pidfile: PathBuf = p.path().join("scoped.pid");
    let (cmd, args) = server_command();
    let def = format!(
        "---\nname: scoped\ndescription: Has its own server\nmcpServers:\n  - own:\n      command: {}\n      args: {}\n      env:\n        {MODE_ENV}: echo\n        {PIDFILE_ENV}: {}\n---\nBody.\n",
        toml_str(&cmd),
        serde_json::to_string(&args).unwrap(),
        toml_str(&pidfile.display().to_string()),
    );
    p.write(".claude/agents/scoped.md", &def);
    // The main agent's last request happens after the child ended: record
    // whether the server process was still alive then.
    let alive_after = std::sync::Arc::new(std::sync::Mutex::new(None::<bool>));
    let seen = std::sync::Arc::clone(&alive_after);
    let pf = pidfile.clone();
    let inner = spawning_route("scoped", Some(("mcp__own__echo", json!({"text": "mine"}))));
    let server = FakeServer::route(move |r| {
        if is_main(r) && assistant_turns(r) == 2 {
            let pid: u32 = std::fs::read_to_string(&pf)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            *seen.lock().unwrap() = Some(pid_alive(pid));
        }
        inner(r)
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let children = child_requests(&server);
    assert!(!children.is_empty());
    assert!(
        tool_names(&children[0].json).contains(&"mcp__own__echo".to_string()),
        "{:?}",
        tool_names(&children[0].json)
    );
    assert_eq!(
        result_text(&last_tool_results(&children[1].json)[0]),
        "echo: mine"
    );
    let main_reqs: Vec<_> = server.requests().into_iter().filter(is_main).collect();
    assert!(
        main_reqs.iter().all(|r| !tool_names(&r.json)
            .iter()
            .any(|n| n.starts_with("mcp__own"))),
        "the main session never sees the child's server"
    );
    assert_eq!(
        *alive_after.lock().unwrap(),
        Some(false),
        "the inline server stops when the child ends"
    );
}

#[test]
fn an_allowlist_limits_a_childs_mcp_tools_and_deny_rules_apply() {
    let mut p = Project::new();
    p.config(&server_toml("echo", "echo"));
    p.config(&server_toml("other", "echo"));
    p.config("[permissions]\nallow = [\"mcp__*\"]\ndeny = [\"mcp__other__pid\"]\n");
    p.write(
        ".claude/agents/narrow.md",
        "---\nname: narrow\ndescription: Only echo\ntools: Read, mcp__echo__echo\n---\nBody.\n",
    );
    p.write(
        ".claude/agents/globbed.md",
        "---\nname: globbed\ndescription: Every tool of one server\ntools: [Read, \"mcp__other__*\"]\n---\nBody.\n",
    );
    p.write(
        ".claude/agents/wide.md",
        "---\nname: wide\ndescription: No allowlist\ndisallowedTools: mcp__echo__pid\n---\nBody.\n",
    );
    let mcp_names = |r: &RecordedRequest| -> Vec<String> {
        tool_names(&r.json)
            .into_iter()
            .filter(|n| n.starts_with("mcp__"))
            .collect()
    };
    for (agent, want) in [
        ("narrow", vec!["mcp__echo__echo"]),
        ("globbed", vec!["mcp__other__echo"]),
        ("wide", vec!["mcp__echo__echo", "mcp__other__echo"]),
    ] {
        let server = spawning_server(agent, None);
        p.run(Some(&server), &["run", "go"]).ok();
        let children = child_requests(&server);
        assert_eq!(mcp_names(&children[0]), want, "{agent}");
        let main_second = server
            .requests()
            .into_iter()
            .find(|r| is_main(r) && assistant_turns(r) == 1)
            .unwrap();
        assert_eq!(
            mcp_names(&main_second),
            ["mcp__echo__echo", "mcp__echo__pid", "mcp__other__echo"],
            "the main session has every MCP tool but the denied one"
        );
    }
}

/// An agent that needs a server whose name has `git` in it.
const NEEDS_GIT: &str =
    "---\nname: needs\ndescription: Needs GitHub\nrequiredMcpServers: [GIT]\n---\nBody.\n";

#[test]
fn a_required_server_that_never_connects_fails_the_spawn_after_the_wait() {
    let mut p = Project::new();
    p.config(&server_toml("echo", "echo"));
    p.config(&server_toml("slowgit", "hang"));
    // Short waits, both set here: the run starts without `slowgit`, and
    // the spawn gives it 300 ms more.
    p.config("[mcp]\nstartup_timeout_ms = 1000\n");
    p.config("[agents]\nrequired_mcp_wait_ms = 300\nrequired_mcp_poll_ms = 50\n");
    p.write(".claude/agents/needs.md", NEEDS_GIT);
    p.write(
        ".claude/agents/fine.md",
        "---\nname: fine\ndescription: Needs echo\nrequiredMcpServers: [ech]\n---\nBody.\n",
    );
    let server = spawning_server("needs", None);
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    assert!(
        run.stderr
            .contains("`slowgit` still connecting after 1000 ms"),
        "{}",
        run.stderr
    );
    let reqs = server.requests();
    assert!(
        child_requests(&server).is_empty(),
        "the child never started"
    );
    let main_third = reqs
        .iter()
        .find(|r| is_main(r) && assistant_turns(r) == 2)
        .unwrap();
    let res = &last_tool_results(&main_third.json)[0];
    assert_eq!(res["is_error"], true);
    let text = result_text(res);
    assert!(
        text.contains("Agent type 'needs' requires MCP servers that are not available: GIT."),
        "{text}"
    );
    assert!(text.contains("Available MCP servers: echo"), "{text}");
    // The Agent tool lists only agents whose required servers are ready.
    let main_second = reqs
        .iter()
        .find(|r| is_main(r) && assistant_turns(r) == 1)
        .unwrap();
    let listing = super::harness::listings(&main_second.json);
    assert!(listing.contains("- fine:"), "{listing}");
    assert!(!listing.contains("- needs:"), "{listing}");
}

/// The other half of the wait: a required server still connecting when
/// the Agent call comes is waited for. Its connection is held until a
/// PreToolUse hook on that call opens the gate, so the spawn starts while
/// the server is still connecting, whatever the machine's speed.
#[test]
fn a_required_server_that_connects_during_the_wait_lets_the_spawn_through() {
    let mut p = Project::new();
    let gate = p.path().join("gate");
    p.config(&server_toml(
        "slowgit",
        &format!("gated:{}", gate.display()),
    ));
    p.config(&format!(
        "[mcp]\nstartup_timeout_ms = 300\n\
         [agents]\nrequired_mcp_wait_ms = 60000\nrequired_mcp_poll_ms = 50\n\
         [[hooks.PreToolUse]]\nmatcher = \"Agent\"\ncommand = {}\n",
        toml_str(&format!("touch '{}'", gate.display()))
    ));
    p.write(".claude/agents/needs.md", NEEDS_GIT);
    let server = spawning_server("needs", None);
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    assert!(
        run.stderr
            .contains("`slowgit` still connecting after 300 ms"),
        "the run started before the server connected: {}",
        run.stderr
    );
    let children = child_requests(&server);
    assert_eq!(
        children.len(),
        1,
        "the child started once the server was ready"
    );
    assert!(
        tool_names(&children[0].json).contains(&"mcp__slowgit__echo".to_string()),
        "{:?}",
        tool_names(&children[0].json)
    );
}

#[test]
fn a_required_server_that_is_ready_lets_the_spawn_through() {
    let mut p = Project::new();
    p.config(&server_toml("echo", "echo"));
    p.write(
        ".claude/agents/fine.md",
        "---\nname: fine\ndescription: Needs echo\nrequiredMcpServers: [ECHO]\n---\nBody.\n",
    );
    let server = spawning_server("fine", None);
    p.run(Some(&server), &["run", "go"]).ok();
    assert_eq!(child_requests(&server).len(), 1);
}

/// The reference filesystem server from npm, run with node. Installed by
/// `scripts/test` (the README's test command); without node or the install
/// the test fails and says how to fix it.
fn filesystem_server() -> Option<PathBuf> {
    assert!(
        std::process::Command::new("node")
            .arg("--version")
            .output()
            .is_ok(),
        "node is not installed: the npm MCP reference server test needs it (see scripts/test)"
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".ci/node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        path.is_file(),
        "{} is missing: run the tests with `scripts/test`, which installs it into .ci/node",
        path.display()
    );
    Some(path)
}

#[test]
fn the_npm_reference_filesystem_server_works() {
    let Some(script) = filesystem_server() else {
        return;
    };
    let mut p = Project::new();
    p.write("data/hello.txt", "hello from the filesystem server\n");
    let data = p.path().join("data").canonicalize().unwrap();
    p.config(&format!(
        "[mcp_servers.fs]\ncommand = \"node\"\nargs = [{}, {}]\n[permissions]\nallow = [\"mcp__fs__*\"]\n",
        toml_str(&script.display().to_string()),
        toml_str(&data.display().to_string())
    ));
    let file = data.join("hello.txt").display().to_string();
    let server = FakeServer::route(move |r| match assistant_turns(r) {
        0 => anthropic::tool_use_reply("t0", "Glob", json!({"pattern": "*.nothing"}))
            .delayed(Duration::from_millis(2500)),
        1 => anthropic::tool_use_reply("t1", "mcp__fs__read_text_file", json!({"path": file})),
        _ => anthropic::text_reply("done"),
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let reqs = server.requests();
    let names = tool_names(&reqs[1].json);
    assert!(
        names.contains(&"mcp__fs__read_text_file".to_string()),
        "{names:?}"
    );
    assert!(
        names.contains(&"mcp__fs__list_directory".to_string()),
        "{names:?}"
    );
    let res = &last_tool_results(&reqs[2].json)[0];
    assert_ne!(res["is_error"], true, "{res}");
    assert!(
        result_text(res).contains("hello from the filesystem server"),
        "{res}"
    );
}

/// The echo server over streamable HTTP, on its own thread and runtime for
/// the rest of the test process; returns its URL.
pub(super) fn http_echo_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    serve_echo_over_http(listener, |echo| echo);
    url
}

/// Serves on `listener`, on its own thread and runtime for the rest of the
/// test process, the app `wrap` makes of a router with the echo server at
/// `/mcp`.
pub(super) fn serve_echo_over_http(
    listener: std::net::TcpListener,
    wrap: impl FnOnce(axum::Router) -> axum::Router + Send + 'static,
) {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let service = StreamableHttpService::new(
                || Ok(EchoServer),
                LocalSessionManager::default().into(),
                StreamableHttpServerConfig::default(),
            );
            let app = wrap(axum::Router::new().nest_service("/mcp", service));
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
}

#[test]
fn a_streamable_http_server_gets_its_headers_and_serves_tools() {
    let url = http_echo_server();
    let mut p = Project::new();
    p.config(&format!(
        "[mcp_servers.web]\nurl = {}\nheaders = {{ X-Test-Token = \"s3cret\" }}\n[permissions]\nallow = [\"mcp__web\"]\n",
        toml_str(&url)
    ));
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => first_turn_reply(),
        1 => anthropic::tool_use_reply("t1", "mcp__web__echo", json!({"text": "over http"})),
        _ => anthropic::text_reply("done"),
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let reqs = server.requests();
    assert!(tool_names(&reqs[1].json).contains(&"mcp__web__echo".to_string()));
    assert_eq!(
        result_text(&last_tool_results(&reqs[2].json)[0]),
        "echo: over http (token s3cret)"
    );
}

#[test]
fn an_http_server_from_mcp_json_gets_expanded_url_and_headers() {
    let url = http_echo_server();
    let mut p = Project::new();
    p.env("TEST_MCP_URL", &url);
    p.env("TEST_MCP_TOKEN", "from-env");
    p.write(
        ".mcp.json",
        &json!({"mcpServers": {"web": {
            "type": "http",
            "url": "${TEST_MCP_URL}",
            "headers": {"X-Test-Token": "${TEST_MCP_TOKEN}"}
        }}})
        .to_string(),
    );
    p.config("[permissions]\nallow = [\"mcp__web\"]\n");
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::tool_use_reply("t1", "mcp__web__echo", json!({"text": "hi"})),
        _ => anthropic::text_reply("done"),
    });
    p.run(Some(&server), &["run", "go"]).ok();
    assert_eq!(
        result_text(&last_tool_results(&server.requests()[1].json)[0]),
        "echo: hi (token from-env)"
    );
}

/// A server entry that only leaves a marker file when it is started.
fn marker_server(p: &Project) -> (Value, PathBuf) {
    let marker = p.path().join("server-started.marker");
    let script = format!("echo started > '{}'", marker.display());
    (json!({"command": "sh", "args": ["-c", script]}), marker)
}

#[test]
fn render_starts_no_mcp_server_and_tools_schema_mcp_lists_their_tools() {
    let mut p = Project::new();
    let (entry, marker) = marker_server(&p);
    p.write(
        ".mcp.json",
        &json!({"mcpServers": {"marker": entry}}).to_string(),
    );
    p.config(&server_toml("echo", "echo"));
    let run = p.run(None, &["render", "go"]);
    run.ok();
    assert!(!marker.exists(), "render started a server");
    assert!(!run.stdout.contains("mcp__"), "{}", run.stdout);
    assert!(
        run.stderr.contains("render starts no MCP server"),
        "{}",
        run.stderr
    );

    // The same configuration does start servers for `tools schema --mcp`.
    let run = p.run(None, &["tools", "schema", "--mcp", "--json"]);
    run.ok();
    assert!(marker.exists(), "the marker server was never started");
    let defs: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    let echo = defs
        .iter()
        .find(|d| d["name"] == "mcp__echo__echo")
        .unwrap();
    assert_eq!(echo["description"], "Echoes the text back");
    assert!(defs.iter().any(|d| d["name"] == "Read"), "built-ins stay");
    assert!(
        run.stderr.contains("MCP server `marker` is not ready"),
        "{}",
        run.stderr
    );
}

#[test]
fn inspection_in_an_untrusted_folder_starts_nothing() {
    let p = Project::untrusted();
    let (entry, marker) = marker_server(&p);
    p.write(
        ".mcp.json",
        &json!({"mcpServers": {"marker": entry}}).to_string(),
    );
    for args in [
        &["render", "go"][..],
        &["tools", "schema", "--mcp", "--json"],
        &["mcp", "list"],
    ] {
        let run = p.run(None, args);
        run.ok();
        assert!(!marker.exists(), "{args:?} started a server");
        if args[0] != "render" {
            assert!(
                run.stderr.contains("not a trusted folder"),
                "{}",
                run.stderr
            );
        }
    }
}

#[test]
fn mcp_list_and_get_show_status_tools_and_stderr() {
    let mut p = Project::new();
    p.config(&server_toml("echo", "echo"));
    p.config(&server_toml("crashy", "crash"));
    let run = p.run(None, &["mcp", "list"]);
    run.ok();
    assert!(
        run.stdout.contains("echo  ready, 2 tools"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("crashy  failed: "), "{}", run.stdout);

    let run = p.run(None, &["mcp", "get", "crashy"]);
    run.ok();
    assert!(
        run.stdout.contains("fatal: MCP_TEST_TOKEN is not set"),
        "{}",
        run.stdout
    );

    let run = p.run(None, &["mcp", "get", "echo", "--json"]);
    run.ok();
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(v["status"], "ready");
    let tools = v["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0]["name"], "mcp__echo__echo");
    // Environment values (often secrets) are not printed, only their names.
    assert_eq!(v["transport"]["env"], json!([MODE_ENV]));
    assert!(!run.stdout.contains("\"echo\"}"), "{}", run.stdout);

    let run = p.run(None, &["mcp", "get", "nope"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("no MCP server `nope`"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_image_result_reaches_the_model_as_an_image_block() {
    let mut p = Project::new();
    p.config(&server_toml("echo", "rich"));
    p.config("[permissions]\nallow = [\"mcp__echo\"]\n");
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::tool_use_reply("t1", "mcp__echo__picture", json!({})),
        _ => anthropic::text_reply("done"),
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let results = last_tool_results(&server.requests()[1].json);
    let content = results[0]["content"].as_array().unwrap();
    let images: Vec<&Value> = content.iter().filter(|c| c["type"] == "image").collect();
    assert_eq!(images.len(), 1, "{content:?}");
    assert_eq!(
        images[0]["source"],
        json!({"type": "base64", "media_type": "image/png", "data": PIXEL_PNG})
    );
    let text: Vec<&str> = content.iter().filter_map(|c| c["text"].as_str()).collect();
    let text = text.join("\n");
    assert!(text.contains("a red pixel:"), "{text}");
    assert!(
        text.contains("image/svg+xml") && text.contains("not shown"),
        "{text}"
    );
    assert!(text.contains("the notes say hi"), "{text}");
    assert!(
        text.contains("[resource link: big.csv <file:///big.csv>]"),
        "{text}"
    );
}

#[test]
fn an_image_result_goes_to_openai_in_a_user_message_after_the_tool_message() {
    use super::kit::openai;
    let mut p = Project::new();
    p.config(&server_toml("echo", "rich"));
    p.config("[permissions]\nallow = [\"mcp__echo\"]\n");
    let server = FakeServer::start([
        openai::tool_call_reply("call_1", "mcp__echo__picture", json!({})),
        openai::text_reply("done"),
    ]);
    p.env("CADRE_PROVIDER__KIND", "openai")
        .env("CADRE_PROVIDER__BASE_URL", server.url());
    p.run(None, &["run", "--model", "local-model", "go"]).ok();
    let msgs = server.request(1).json["messages"]
        .as_array()
        .unwrap()
        .clone();
    let at = msgs.iter().position(|m| m["role"] == "tool").unwrap();
    let tool_text = msgs[at]["content"].as_str().unwrap();
    assert!(tool_text.contains("a red pixel:"), "{tool_text}");
    assert!(tool_text.contains("[image(s) in the next user message]"));
    let next = &msgs[at + 1];
    assert_eq!(next["role"], "user");
    let parts = next["content"].as_array().unwrap();
    assert!(parts[0]["text"].as_str().unwrap().contains("call_1"));
    assert_eq!(
        parts[1]["image_url"]["url"],
        format!("data:image/png;base64,{PIXEL_PNG}")
    );
}

#[test]
fn resources_are_listed_and_read_through_the_resource_tools() {
    // No allow rule: the resource tools only read, which every mode allows.
    let mut p = Project::new();
    p.config(&server_toml("plain", "echo"));
    p.config(&server_toml("docs", "rich"));
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::tool_use_reply("t1", "ListMcpResources", json!({})),
        1 => anthropic::message()
            .tool_use(
                "t2",
                "ReadMcpResource",
                json!({"server": "docs", "uri": "file:///notes.txt"}),
            )
            .tool_use(
                "t3",
                "ReadMcpResource",
                json!({"server": "docs", "uri": "file:///pixel.png"}),
            )
            .tool_use(
                "t4",
                "ReadMcpResource",
                json!({"server": "plain", "uri": "file:///x"}),
            )
            .tool_use(
                "t5",
                "ReadMcpResource",
                json!({"server": "docs", "uri": "file:///nope"}),
            )
            .reply(),
        _ => anthropic::text_reply("done"),
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let reqs = server.requests();
    let list = tool(&reqs[0].json, "ListMcpResources").unwrap();
    assert!(
        list["description"]
            .as_str()
            .unwrap()
            .contains("ReadMcpResource")
    );
    assert!(tool(&reqs[0].json, "ReadMcpResource").is_some());

    let listed = result_text(&last_tool_results(&reqs[1].json)[0]);
    assert!(
        listed.contains(r#"<resource server="docs" uri="file:///notes.txt" mimeType="text/plain">notes: Meeting notes</resource>"#),
        "{listed}"
    );
    assert!(listed.contains("file:///pixel.png"), "{listed}");

    let results = last_tool_results(&reqs[2].json);
    assert_eq!(result_text(&results[0]), "notes: ship it");
    let image = &results[1]["content"][0];
    assert_eq!(image["type"], "image", "{results:?}");
    assert_eq!(image["source"]["data"], PIXEL_PNG);
    assert_eq!(results[2]["is_error"], true);
    assert!(
        result_text(&results[2]).contains("No connected MCP server `plain` offers resources")
            && result_text(&results[2]).contains("Servers with resources: docs"),
        "{:?}",
        results[2]
    );
    assert_eq!(results[3]["is_error"], true);
    assert!(
        result_text(&results[3]).contains("no resource file:///nope"),
        "{:?}",
        results[3]
    );
}

#[test]
fn resource_tools_are_offered_only_when_a_server_has_resources() {
    let mut p = Project::new();
    p.config(&server_toml("plain", "echo"));
    let server = FakeServer::route(|_| anthropic::text_reply("done"));
    p.run(Some(&server), &["run", "go"]).ok();
    let names = tool_names(&server.requests()[0].json);
    assert!(names.contains(&"mcp__plain__echo".to_string()));
    assert!(
        !names.iter().any(|n| n.contains("McpResource")),
        "{names:?}"
    );
}

#[test]
fn servers_get_the_roots_and_an_elicitation_is_declined_in_run() {
    let mut p = Project::new();
    let extra = p.path().join("extra dir");
    std::fs::create_dir_all(&extra).unwrap();
    p.config(&server_toml("rich", "rich"));
    p.config("[permissions]\nallow = [\"mcp__rich\"]\n");
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::message()
            .tool_use("t1", "mcp__rich__roots", json!({}))
            .tool_use("t2", "mcp__rich__ask", json!({}))
            .reply(),
        _ => anthropic::text_reply("done"),
    });
    let run = p.run(Some(&server), &["run", "--add-dir", "extra dir", "go"]);
    run.ok();
    let results = last_tool_results(&server.requests()[1].json);
    let roots: Vec<Value> = serde_json::from_str(&result_text(&results[0])).unwrap();
    let uris: Vec<&str> = roots.iter().map(|r| r["uri"].as_str().unwrap()).collect();
    let cwd = std::fs::canonicalize(p.path()).unwrap_or(p.path().to_path_buf());
    assert_eq!(uris.len(), 2, "{roots:?}");
    assert!(uris[0].starts_with("file:///"), "{uris:?}");
    assert!(
        uris[0].ends_with(cwd.file_name().unwrap().to_str().unwrap()),
        "{uris:?}"
    );
    assert!(uris[1].ends_with("/extra%20dir"), "{uris:?}");
    assert_eq!(result_text(&results[1]), "declared true, action Decline");
    assert!(
        run.stderr
            .contains("MCP server `rich` asked for input (\"What is your name?\"); declined"),
        "{}",
        run.stderr
    );
}

/// A model that calls the rich server's `sample` tool, answers the
/// sampling request (the one that says SAMPLE-ME) with "pong", then ends.
fn sampling_model() -> FakeServer {
    FakeServer::route(|r| {
        if r.json.to_string().contains("SAMPLE-ME") {
            return anthropic::text_reply("pong");
        }
        match assistant_turns(r) {
            0 => anthropic::tool_use_reply("t1", "mcp__rich__sample", json!({})),
            _ => anthropic::text_reply("done"),
        }
    })
}

/// `mcp.sampling` and the permission mode decide, in a run that cannot ask
/// anyone: off (not offered), `true` (needs approval: refused, unless the
/// mode is `bypassPermissions`), `"allow"`. Every request that reached
/// cadre is an `mcp_sampling` line in the main transcript.
#[test]
fn sampling_is_gated_by_the_setting_and_the_mode_and_recorded_in_the_transcript() {
    let cases: [(&str, &[&str], &str); 4] = [
        ("", &[], "off"),
        ("[mcp]\nsampling = true\n", &[], "refused"),
        (
            "[mcp]\nsampling = true\n",
            &["--permission-mode", "bypassPermissions"],
            "bypassPermissions",
        ),
        ("[mcp]\nsampling = \"allow\"\n", &[], "settings"),
    ];
    for (config, flags, expect) in cases {
        let mut p = Project::new();
        p.config(&server_toml("rich", "rich"));
        p.config("[permissions]\nallow = [\"mcp__rich\"]\n");
        p.config(config);
        let server = sampling_model();
        let mut args = vec!["run"];
        args.extend_from_slice(flags);
        args.push("go");
        let run = p.run(Some(&server), &args);
        run.ok();
        let reqs = server.requests();
        let sampled: Vec<&RecordedRequest> = reqs
            .iter()
            .filter(|r| r.json.to_string().contains("SAMPLE-ME"))
            .collect();
        let last = reqs.last().unwrap();
        let text = result_text(&last_tool_results(&last.json)[0]);
        let lines: Vec<Value> = p
            .transcript_lines()
            .into_iter()
            .filter(|l| l["type"] == "mcp_sampling")
            .collect();
        match expect {
            "off" => {
                assert!(sampled.is_empty());
                assert!(text.contains("sampling is off"), "{text}");
                assert!(lines.is_empty(), "{lines:?}");
            }
            "refused" => {
                assert!(sampled.is_empty(), "a refused request reaches no model");
                assert!(
                    text.contains("sampling needs approval and this session cannot ask anyone"),
                    "{text}"
                );
                assert!(
                    run.stderr.contains(
                        "MCP server `rich` asked for a model completion; refused: sampling needs approval"
                    ),
                    "{}",
                    run.stderr
                );
                assert_eq!(lines.len(), 1, "{lines:?}");
                assert!(
                    lines[0]["refused"]
                        .as_str()
                        .unwrap()
                        .contains("mcp.sampling")
                );
                assert_eq!(lines[0]["server"], "rich");
                assert!(lines[0].get("response").is_none());
            }
            by => {
                assert_eq!(
                    sampled.len(),
                    1,
                    "{by}: one sampling request reached the provider"
                );
                let s = &sampled[0].json;
                assert!(
                    s["system"].to_string().contains("You are the sampler."),
                    "{s}"
                );
                assert!(
                    s.get("tools")
                        .is_none_or(|t| t.as_array().is_none_or(|a| a.is_empty())),
                    "{s}"
                );
                assert_eq!(s["model"], reqs[0].json["model"], "the session's model");
                assert!(text.starts_with("sampled: pong (model "), "{text}");
                assert_eq!(lines.len(), 1, "{lines:?}");
                let l = &lines[0];
                assert_eq!(l["approved_by"], by);
                assert_eq!(l["agent_id"], "main");
                assert_eq!(l["system"], "You are the sampler.");
                assert_eq!(
                    l["messages"][0]["content"][0]["text"],
                    "SAMPLE-ME: say pong"
                );
                assert_eq!(l["response"]["text"], "pong");
                assert_eq!(l["model"], reqs[0].json["model"]);
                assert!(l["usage"]["output_tokens"].is_u64(), "{l}");
            }
        }
    }
}

/// The reference server that exercises the whole protocol, from npm
/// (`@modelcontextprotocol/server-everything@2026.8.31`, installed by
/// `scripts/test` into `.ci/node`).
pub(super) fn everything_server() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".ci/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        path.is_file(),
        "{} is missing: run the tests with `scripts/test`, which installs it into .ci/node",
        path.display()
    );
    path
}

#[test]
fn the_npm_everything_server_gets_roots_sampling_images_and_a_declined_elicitation() {
    let index = everything_server();
    let mut p = Project::new();
    p.config(&format!(
        "[mcp_servers.every]\ncommand = \"node\"\nargs = [{}, \"stdio\"]\n\
         [mcp]\nsampling = \"allow\"\n[permissions]\nallow = [\"mcp__every\"]\n",
        toml_str(&index.display().to_string())
    ));
    // The sampling request is the one without tools.
    let sampling = |r: &RecordedRequest| r.json["tools"].as_array().is_none_or(|t| t.is_empty());
    let server = FakeServer::route(move |r| {
        if sampling(r) {
            return anthropic::text_reply("pong from the model");
        }
        match assistant_turns(r) {
            0 => anthropic::message()
                .tool_use("t1", "mcp__every__get-tiny-image", json!({}))
                .tool_use("t2", "mcp__every__get-roots-list", json!({}))
                .tool_use("t3", "mcp__every__trigger-elicitation-request", json!({}))
                .tool_use(
                    "t4",
                    "mcp__every__trigger-sampling-request",
                    json!({"prompt": "SAMPLE-ME", "maxTokens": 20}),
                )
                .tool_use("t5", "ListMcpResources", json!({}))
                .reply(),
            _ => anthropic::text_reply("done"),
        }
    });
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let reqs = server.requests();
    let first = tool_names(&reqs[0].json);
    for t in [
        "mcp__every__get-tiny-image",
        "mcp__every__get-roots-list",
        "mcp__every__trigger-elicitation-request",
        "mcp__every__trigger-sampling-request",
        "ListMcpResources",
        "ReadMcpResource",
    ] {
        assert!(
            first.contains(&t.to_string()),
            "{t} missing from the first request: {first:?}"
        );
    }
    let sampled_requests: Vec<&RecordedRequest> = reqs.iter().filter(|r| sampling(r)).collect();
    assert_eq!(sampled_requests.len(), 1);
    assert!(sampled_requests[0].json.to_string().contains("SAMPLE-ME"));
    let last = reqs.iter().rev().find(|r| !sampling(r)).unwrap();
    let results = last_tool_results(&last.json);
    assert_eq!(results.len(), 5);
    assert!(
        results[0]["content"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "image" && c["source"]["media_type"] == "image/png"),
        "{:?}",
        results[0]
    );
    let roots = result_text(&results[1]);
    let dir_name = p.path().file_name().unwrap().to_str().unwrap();
    assert!(roots.contains(dir_name), "{roots}");
    let elicited = result_text(&results[2]);
    assert!(elicited.contains("declined"), "{elicited}");
    assert!(
        run.stderr.contains("MCP server `every` asked for input"),
        "{}",
        run.stderr
    );
    let sampled = result_text(&results[3]);
    assert!(sampled.contains("pong from the model"), "{sampled}");
    let resources = result_text(&results[4]);
    assert!(
        resources.contains("<resource server=\"every\""),
        "{resources}"
    );
}

#[test]
fn a_servers_tool_list_change_reaches_the_next_turn() {
    let mut p = Project::new();
    p.config(&server_toml("grow", "grow"));
    p.config("[permissions]\nallow = [\"mcp__grow\"]\n");
    let server = FakeServer::route(|r| {
        if let Some(wait) = until_listed(r, "mcp__grow__late_tool") {
            return wait;
        }
        if called(r, "t1") {
            return anthropic::text_reply("done");
        }
        anthropic::tool_use_reply("t1", "mcp__grow__late_tool", json!({}))
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let reqs = server.requests();
    // The first request lists the server's tools as they were at the
    // handshake; a later one has the tool it added.
    let first = tool_names(&reqs[0].json);
    assert!(first.contains(&"mcp__grow__echo".to_string()), "{first:?}");
    let grown = reqs
        .iter()
        .find(|r| called(r, "t1"))
        .expect("the model called the late tool");
    let names = tool_names(&grown.json);
    assert!(
        names.contains(&"mcp__grow__late_tool".to_string()),
        "{names:?}"
    );
    assert!(names.contains(&"mcp__grow__echo".to_string()), "{names:?}");
    let result = &last_tool_results(&result_request(&reqs, "t1").json)[0];
    assert_ne!(result["is_error"], true, "{result:?}");
}

#[test]
fn mcp_get_lists_a_servers_resources() {
    let mut p = Project::new();
    p.config(&server_toml("docs", "rich"));
    let run = p.run(None, &["mcp", "get", "docs", "--json"]);
    run.ok();
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let uris: Vec<&str> = v["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(uris, ["file:///notes.txt", "file:///pixel.png"]);
    assert!(v.get("prompts").is_none(), "the server has no prompts: {v}");
    let run = p.run(None, &["mcp", "get", "docs"]);
    assert!(
        run.stdout
            .contains("  resources (2):\n    file:///notes.txt  Meeting notes"),
        "{}",
        run.stdout
    );
}

/// `chat` puts a server's request for input to the user on the terminal
/// (a pseudo-terminal here) and reads the answers, field by field.
#[test]
fn chat_asks_the_user_for_a_servers_elicitation() {
    let mut p = Project::new();
    p.config(&server_toml("rich", "rich"));
    p.config("[permissions]\nallow = [\"mcp__rich\"]\n");
    let server = FakeServer::route(|r| {
        if let Some(wait) = until_listed(r, "mcp__rich__ask") {
            return wait;
        }
        if called(r, "t1") {
            return anthropic::text_reply("all done");
        }
        anthropic::tool_use_reply("t1", "mcp__rich__ask", json!({}))
    });
    let mut cmd = p.command(Some(&server));
    cmd.arg("chat");
    let mut pty = super::newcomer::Pty::spawn(cmd);
    pty.wait_for("cadre chat");
    pty.type_line("go");
    pty.wait_for("Answer? [y = answer / n = decline / c = cancel]");
    pty.type_line("y");
    pty.wait_for("name (string, required)");
    pty.type_line("");
    pty.wait_for("an answer is required");
    pty.type_line("Ada Lovelace");
    pty.wait_for("all done");
    let screen = pty.quit();
    assert!(
        screen.contains("MCP server `rich` asks for input:\r\n  What is your name?")
            || screen.contains("MCP server `rich` asks for input:\n  What is your name?"),
        "{screen}"
    );
    let reqs = server.requests();
    let result = &last_tool_results(&result_request(&reqs, "t1").json)[0];
    assert_eq!(
        result_text(result),
        r#"declared true, action Accept, content {"name":"Ada Lovelace"}"#
    );
}

/// A long-running tool of the npm everything server reports progress,
/// shown as lines in chat (on a terminal without cursor control).
#[test]
fn chat_shows_an_mcp_tools_progress() {
    let index = everything_server();
    let mut p = Project::new();
    p.config(&format!(
        "[mcp_servers.every]\ncommand = \"node\"\nargs = [{}, \"stdio\"]\n\
         [permissions]\nallow = [\"mcp__every\"]\n",
        toml_str(&index.display().to_string())
    ));
    let server = FakeServer::route(|r| {
        let tool = "mcp__every__trigger-long-running-operation";
        if let Some(wait) = until_listed(r, tool) {
            return wait;
        }
        if called(r, "t1") {
            return anthropic::text_reply("all done");
        }
        anthropic::tool_use_reply("t1", tool, json!({"duration": 1, "steps": 2}))
    });
    let mut cmd = p.command(Some(&server));
    cmd.arg("chat");
    let mut pty = super::newcomer::Pty::spawn(cmd);
    pty.wait_for("cadre chat");
    pty.type_line("go");
    pty.wait_for("all done");
    let screen = pty.quit();
    for line in [
        "… mcp__every__trigger-long-running-operation: 1/2",
        "… mcp__every__trigger-long-running-operation: 2/2",
    ] {
        assert!(screen.contains(line), "{line:?} not shown:\n{screen}");
    }
    let reqs = server.requests();
    let result = &last_tool_results(&result_request(&reqs, "t1").json)[0];
    assert!(
        result_text(result).contains("Long running operation completed"),
        "{result}"
    );
}

/// How many progress reports the "steps" tool sends.
const STEPS: u32 = 20;

/// Every progress report a server sends before its answer reaches the
/// caller, in order, the last ones (sent right before the answer)
/// included: rmcp handles a notification on a task of its own, which may
/// run after the answer ended the call; cadre takes them from the
/// transport as it reads them.
#[test]
fn every_progress_report_sent_before_the_answer_reaches_the_caller() {
    let mut p = Project::new();
    p.config(&server_toml("prog", "progress"));
    p.config("[permissions]\nallow = [\"mcp__prog\"]\n");
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::message()
            .tool_use("t1", "mcp__prog__steps", json!({}))
            .tool_use("t2", "mcp__prog__steps", json!({}))
            .tool_use("t3", "mcp__prog__steps", json!({}))
            .reply(),
        _ => anthropic::text_reply("done"),
    });
    let run = p.run(
        Some(&server),
        &["-p", "go", "--output-format", "stream-json", "--verbose"],
    );
    run.ok();
    let results = last_tool_results(&server.requests()[1].json);
    assert_eq!(results.len(), 3, "{results:?}");
    for (id, result) in ["t1", "t2", "t3"].into_iter().zip(&results) {
        assert_eq!(result_text(result), "stepped", "{result}");
        let reports: Vec<Value> = run
            .stdout
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|l| l["type"] == "tool_progress" && l["tool_use_id"] == id)
            .collect();
        assert_eq!(reports.len(), STEPS as usize, "{id}:\n{}", run.stdout);
    }
}

/// Ctrl-C in chat cancels the turn, and with it a running MCP tool call:
/// the server gets `notifications/cancelled` (its request is cancelled)
/// and the chat goes on.
#[test]
fn interrupting_chat_cancels_a_running_mcp_call() {
    let mut p = Project::new();
    p.config(&server_toml("rich", "rich"));
    p.config("[permissions]\nallow = [\"mcp__rich\"]\n");
    let server = FakeServer::route(|r| {
        if let Some(wait) = until_listed(r, "mcp__rich__wait") {
            return wait;
        }
        // (After Ctrl-C, the next message is answered, whatever the
        // cancelled turn left in the history.)
        if called(r, "t1") || r.body_str().contains("still there?") {
            return anthropic::text_reply("after");
        }
        anthropic::tool_use_reply("t1", "mcp__rich__wait", json!({}))
    });
    let mut cmd = p.command(Some(&server));
    cmd.arg("chat");
    let mut pty = super::newcomer::Pty::spawn(cmd);
    pty.wait_for("cadre chat");
    pty.type_line("go");
    let started = p.path().join("wait-started");
    wait_until("the wait tool to start", Duration::from_secs(60), || {
        started.is_file()
    });
    // What Ctrl-C sends (the test's pty is not the child's controlling
    // terminal, so the signal goes directly).
    let ok = std::process::Command::new("kill")
        .args(["-INT", &pty.pid().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let cancelled = p.path().join("wait-cancelled");
    wait_until(
        "the server to see the cancellation",
        Duration::from_secs(60),
        || cancelled.is_file(),
    );
    pty.type_line("still there?");
    pty.wait_for("after");
    pty.quit();
}

/// With the SDK protocol a server's request for input goes to the client
/// as an `elicitation` control request, and its answer goes back.
#[test]
fn the_sdk_client_answers_a_servers_elicitation() {
    let mut p = Project::new();
    p.config(&server_toml("rich", "rich"));
    p.config("[permissions]\nallow = [\"mcp__rich\"]\n");
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::tool_use_reply("t1", "mcp__rich__ask", json!({})),
        _ => anthropic::text_reply("done"),
    });
    let mut d = super::headless::Driven::start(&p, &server, &[]);
    d.user("go");
    let ask = d.until("elicitation", |v| v["type"] == "control_request");
    let req = &ask["request"];
    assert_eq!(req["subtype"], "elicitation");
    assert_eq!(req["mcp_server_name"], "rich");
    assert_eq!(req["message"], "What is your name?");
    assert_eq!(req["mode"], "form");
    assert_eq!(req["requested_schema"]["required"], json!(["name"]));
    let id = ask["request_id"].as_str().unwrap().to_string();
    d.send(
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": id,
                  "response": {"action": "accept", "content": {"name": "Grace"}}}}),
    );
    d.until("result", |v| v["type"] == "result");
    assert_eq!(d.finish(), 0);
    let reqs = server.requests();
    let result = &last_tool_results(&reqs[1].json)[0];
    assert_eq!(
        result_text(result),
        r#"declared true, action Accept, content {"name":"Grace"}"#
    );
}

/// The npm everything server runs `simulate-research-query` only as an
/// MCP task: cadre starts the task, polls it and returns its result.
#[test]
fn a_tool_that_runs_as_an_mcp_task_works_end_to_end() {
    let index = everything_server();
    let mut p = Project::new();
    p.config(&format!(
        "[mcp_servers.every]\ncommand = \"node\"\nargs = [{}, \"stdio\"]\n\
         [permissions]\nallow = [\"mcp__every\"]\n",
        toml_str(&index.display().to_string())
    ));
    let server = FakeServer::route(|r| match assistant_turns(r) {
        0 => anthropic::tool_use_reply(
            "t1",
            "mcp__every__simulate-research-query",
            json!({"topic": "python"}),
        ),
        _ => anthropic::text_reply("done"),
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let reqs = server.requests();
    let result = &last_tool_results(&reqs[1].json)[0];
    let text = result_text(result);
    assert_ne!(result["is_error"], true, "{text}");
    assert!(text.contains("# Research Report: python"), "{text}");
    assert!(text.contains("Stage 4: Generating report"), "{text}");
}

/// `cadre mcp test NAME` starts that server only, lists what it offers,
/// stops it, and says how long each step took; a server that fails makes
/// it exit 1 with the error and the server's stderr.
#[test]
fn mcp_test_starts_one_server_lists_and_stops_it_with_timings() {
    let mut p = Project::new();
    p.config(&server_toml("docs", "rich"));
    p.config(&server_toml("broken", "crash"));
    let run = p.run(None, &["mcp", "test", "docs", "--json"]);
    run.ok();
    let v = run.json();
    assert_eq!(v["name"], "docs");
    assert_eq!(v["status"], "ready");
    assert_eq!(v["tools"], 7, "{v}");
    assert_eq!(v["resources"]["count"], 2, "{v}");
    assert!(v["resources"]["ms"].is_u64(), "{v}");
    assert_eq!(
        v["prompts"],
        Value::Null,
        "the server offers no prompts: {v}"
    );
    assert!(v["connect_ms"].is_u64() && v["stop_ms"].is_u64(), "{v}");
    let run = p.run(None, &["mcp", "test", "docs"]);
    run.ok();
    assert!(
        run.stdout.contains("  connected in ")
            && run
                .stdout
                .contains(" ms (start, handshake, 7 tools listed)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("  prompts: not offered"),
        "{}",
        run.stdout
    );

    let run = p.run(None, &["mcp", "test", "broken"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stdout.contains("broken: failed"), "{}", run.stdout);
    assert!(
        run.stdout.contains("fatal: MCP_TEST_TOKEN is not set"),
        "{}",
        run.stdout
    );
    let run = p.run(None, &["mcp", "test", "nope"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr
            .contains("no MCP server `nope` is configured here"),
        "{}",
        run.stderr
    );
}

/// `agents show --effective` lists the MCP tools an agent would get:
/// its allowlist and denylist applied to the configured servers' tools.
#[test]
fn agents_show_effective_lists_the_mcp_tools_an_agent_gets() {
    let mut p = Project::new();
    p.config(&server_toml("docs", "rich"));
    p.write(
        ".claude/agents/narrow.md",
        "---\nname: narrow\ndescription: Narrow\ntools: Read, mcp__docs__echo, mcp__docs__p*\n\
         disallowedTools: mcp__docs__picture\n---\nBe narrow.\n",
    );
    let run = p.run(None, &["agents", "show", "narrow", "--json", "--effective"]);
    run.ok();
    let v = run.json();
    assert_eq!(
        v["effective"]["mcp_tools"],
        json!(["mcp__docs__echo", "mcp__docs__pid"]),
        "{v}"
    );
    let run = p.run(None, &["agents", "show", "narrow", "--effective"]);
    run.ok();
    assert!(
        run.stdout
            .contains("mcp tools:   mcp__docs__echo, mcp__docs__pid"),
        "{}",
        run.stdout
    );
    // An agent without an allowlist gets every tool of the server.
    let run = p.run(
        None,
        &["agents", "show", "general-purpose", "--json", "--effective"],
    );
    let all = run.json()["effective"]["mcp_tools"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(all, 7);
}

/// In chat, `/mcp` lists the servers' prompts as commands and
/// `/mcp__SERVER__PROMPT ARGS` sends the prompt's messages as the user's
/// message (npm everything server's `args-prompt`).
#[test]
fn chat_runs_an_mcp_prompt_as_a_slash_command() {
    let index = everything_server();
    let mut p = Project::new();
    p.config(&format!(
        "[mcp_servers.every]\ncommand = \"node\"\nargs = [{}, \"stdio\"]\n",
        toml_str(&index.display().to_string())
    ));
    let server = FakeServer::route(|_| anthropic::text_reply("sunny"));
    let mut cmd = p.command(Some(&server));
    cmd.arg("chat");
    let mut pty = super::newcomer::Pty::spawn(cmd);
    pty.wait_for("cadre chat");
    // Chat does not wait for servers: ask until the server is ready.
    let start = std::time::Instant::now();
    loop {
        pty.type_line("/mcp");
        std::thread::sleep(Duration::from_millis(300));
        if pty
            .screen()
            .contains("/mcp__every__args-prompt <city> [state]")
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{}",
            pty.screen()
        );
    }
    pty.type_line("/mcp__every__args-prompt");
    pty.wait_for("missing <city>; usage: /mcp__every__args-prompt <city> [state]");
    pty.type_line("/mcp__every__args-prompt Paris Ile de France");
    pty.wait_for("sunny");
    pty.quit();
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1, "nothing else was sent");
    let last_user = reqs[0].json["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(
        last_user.contains("What's weather in Paris, Ile de France?"),
        "{last_user}"
    );
}

/// An HTTP server that wants OAuth (401 with a challenge) fails with an
/// error that says so and names both ways in: `cadre mcp login` and a
/// header.
#[test]
fn an_http_server_that_wants_oauth_gets_a_clear_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = axum::Router::new().fallback(|| async {
                (
                    axum::http::StatusCode::UNAUTHORIZED,
                    [(
                        "www-authenticate",
                        "Bearer resource_metadata=\"http://127.0.0.1/.well-known/oauth-protected-resource\"",
                    )],
                    "",
                )
            });
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    let mut p = Project::new();
    p.config(&format!(
        "[mcp_servers.web]\nurl = {}\n[mcp]\nstartup_timeout_ms = 3000\n",
        toml_str(&url)
    ));
    let run = p.run(None, &["mcp", "get", "web", "--json"]);
    run.ok();
    let v = run.json();
    assert_eq!(v["status"], "failed");
    let error = v["error"].as_str().unwrap();
    assert!(
        error.contains(
            "the server asks for OAuth authorization (WWW-Authenticate: Bearer resource_metadata="
        ),
        "{error}"
    );
    assert!(error.contains("`cadre mcp login web`"), "{error}");
    assert!(error.contains("give it in `headers`"), "{error}");
}

/// The read-only built-in Explore agent reads MCP resources without any
/// allow rule: the resource tools are in the read-only group.
#[test]
fn explore_reads_mcp_resources_without_an_allow_rule() {
    let mut p = Project::new();
    p.config(&server_toml("docs", "rich"));
    let server = spawning_server(
        "Explore",
        Some((
            "ReadMcpResource",
            json!({"server": "docs", "uri": "file:///notes.txt"}),
        )),
    );
    p.run(Some(&server), &["run", "go"]).ok();
    let children = child_requests(&server);
    assert!(
        tool_names(&children[0].json).contains(&"ListMcpResources".to_string()),
        "{:?}",
        tool_names(&children[0].json)
    );
    let result = &last_tool_results(&children[1].json)[0];
    assert_ne!(result["is_error"], true, "{result}");
    assert_eq!(result_text(result), "notes: ship it");
}

/// With `mcp.sampling = true` a sampling request is put to whoever answers
/// permission questions: here the SDK client's `can_use_tool`, for the
/// tool name `McpSampling`.
#[test]
fn the_sdk_client_approves_a_sampling_request() {
    let mut p = Project::new();
    p.config(&server_toml("rich", "rich"));
    p.config("[permissions]\nallow = [\"mcp__rich\"]\n[mcp]\nsampling = true\n");
    let server = sampling_model();
    let mut d = super::headless::Driven::start(&p, &server, &["--permission-prompt-tool", "stdio"]);
    d.user("go");
    let ask = d.until("can_use_tool", |v| v["type"] == "control_request");
    let req = &ask["request"];
    assert_eq!(req["subtype"], "can_use_tool");
    assert_eq!(req["tool_name"], "McpSampling");
    assert_eq!(req["input"]["server"], "rich");
    assert_eq!(req["input"]["maxTokens"], 50);
    let id = ask["request_id"].as_str().unwrap().to_string();
    d.send(
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": id,
                  "response": {"behavior": "allow"}}}),
    );
    d.until("result", |v| v["type"] == "result");
    assert_eq!(d.finish(), 0);
    let reqs = server.requests();
    let last = reqs.last().unwrap();
    let text = result_text(&last_tool_results(&last.json)[0]);
    assert!(text.starts_with("sampled: pong (model "), "{text}");
    let lines: Vec<Value> = p
        .transcript_lines()
        .into_iter()
        .filter(|l| l["type"] == "mcp_sampling")
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["approved_by"], "user");
}

/// A server that offers no tools and does not answer `tools/list` (the ACP
/// adapter's own server, with no editor access to lend) is connected with
/// no tools, as Claude Code has it, not failed.
#[test]
fn a_server_without_tools_list_is_connected_with_no_tools() {
    let mut p = Project::new();
    p.config(&server_toml("bare", "no-tools-list"));
    let server = FakeServer::route(|_| anthropic::text_reply("hi"));
    let run = p.run(
        Some(&server),
        &["-p", "hi", "--output-format", "stream-json", "--verbose"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let init = run
        .json_lines()
        .into_iter()
        .find(|v| v["subtype"] == "init")
        .unwrap();
    assert_eq!(
        init["mcp_servers"],
        json!([{"name": "bare", "status": "connected"}]),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("failed"), "{}", run.stderr);
}
