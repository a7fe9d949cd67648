//! `cadre::provider` against the fake server: both wire protocols, prompt
//! cache breakpoints, retries, error reporting, key hygiene, and a property
//! test that SSE assembly does not depend on how the bytes are chunked.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cadre::config::{ProviderKind, ProviderSettings};
use cadre::message::{
    ContentBlock, Message, ModelRequest, ModelResponse, Sampling, StopReason, ToolDefinition, Usage,
};
use cadre::provider::{Provider, ProviderError, ProviderErrorKind, StreamEvent, decode_stream};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::kit::{self, FakeServer, Reply, SseEvent, TEST_KEY, anthropic, openai};

fn tool(name: &str) -> ToolDefinition {
    ToolDefinition {
        name: name.to_string(),
        description: format!("The {name} tool."),
        input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }
}

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        model: "claude-test-model".to_string(),
        system: Arc::from("You are a test agent."),
        tools: Arc::from(vec![tool("Read"), tool("Grep")]),
        messages: messages.into_iter().map(Arc::new).collect(),
        max_tokens: 1024,
        sampling: Sampling::default(),
        server_tools: Vec::new(),
    }
}

fn hello() -> ModelRequest {
    request(vec![Message::user_text("Say hello.")])
}

fn provider(settings: &ProviderSettings, env: &[(String, String)]) -> Provider {
    Provider::new(settings, env).unwrap()
}

/// Sends and returns the result with every stream event seen.
async fn send(
    p: &Provider,
    req: &ModelRequest,
) -> (Result<ModelResponse, ProviderError>, Vec<StreamEvent>) {
    let events = Mutex::new(Vec::new());
    let result = p.send(req, &|e| events.lock().unwrap().push(e)).await;
    (result, events.into_inner().unwrap())
}

fn retries(events: &[StreamEvent]) -> Vec<(u32, u64, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying {
                attempt,
                delay_ms,
                reason,
            } => Some((*attempt, *delay_ms, reason.clone())),
            _ => None,
        })
        .collect()
}

fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

// ---- Anthropic --------------------------------------------------------------

#[tokio::test]
async fn anthropic_text_reply_streams_and_sends_the_right_request() {
    let server = FakeServer::start([anthropic::text_reply("Hello, world!")]);
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let req = hello();
    let (result, events) = send(&p, &req).await;
    let response = result.unwrap();

    assert_eq!(
        response.message,
        Message::assistant(vec![ContentBlock::text("Hello, world!")])
    );
    assert_eq!(response.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(response.model, "claude-test");
    assert!(response.invalid_tool_inputs.is_empty());
    assert_eq!(text_of(&events), "Hello, world!");
    assert!(
        events
            .iter()
            .filter(|e| matches!(e, StreamEvent::TextDelta(_)))
            .count()
            >= 2
    );

    let r = server.request(0);
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some(TEST_KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("accept"), Some("text/event-stream"));
    assert_eq!(
        r.body,
        p.request_body(&req),
        "the posted bytes are request_body's"
    );
    let keys: Vec<&str> = r
        .json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "model",
            "max_tokens",
            "stream",
            "system",
            "tools",
            "messages"
        ]
    );
    assert_eq!(r.json["model"], "claude-test-model");
    assert_eq!(r.json["stream"], true);
}

#[tokio::test]
async fn anthropic_sampling_and_thinking_go_before_the_system_prompt() {
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let mut req = hello();
    req.max_tokens = 4096;
    req.sampling = Sampling {
        temperature: Some(0.5),
        thinking_budget: Some(2048),
        effort: None,
    };
    send(&p, &req).await.0.unwrap();
    let r = server.request(0);
    let keys: Vec<&str> = r
        .json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "model",
            "max_tokens",
            "stream",
            "temperature",
            "thinking",
            "system",
            "tools",
            "messages"
        ]
    );
    assert_eq!(
        r.json["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(r.json["temperature"], 0.5);
}

#[tokio::test]
async fn anthropic_thinking_budget_fits_under_max_tokens_and_zero_turns_it_off() {
    let server = FakeServer::start([anthropic::text_reply("ok"), anthropic::text_reply("ok")]);
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let mut req = hello();
    req.max_tokens = 4096;
    // The API wants the budget below max_tokens.
    req.sampling.thinking_budget = Some(u32::MAX);
    send(&p, &req).await.0.unwrap();
    assert_eq!(
        server.request(0).json["thinking"],
        json!({"type": "enabled", "budget_tokens": 4095})
    );
    req.sampling.thinking_budget = Some(0);
    send(&p, &req).await.0.unwrap();
    assert_eq!(
        server.request(1).json["thinking"],
        json!({"type": "disabled"})
    );
}

#[tokio::test]
async fn anthropic_tool_use_input_is_assembled_from_deltas() {
    let input = json!({"path": "/tmp/ünïcode.txt", "limit": 10, "nested": {"a": [1, 2, 3]}});
    let server = FakeServer::start([anthropic::message()
        .text("Let me look.")
        .tool_use("toolu_01", "Read", input.clone())
        .reply()]);
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let (result, events) = send(&p, &hello()).await;
    let response = result.unwrap();
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(
        response.message.content,
        vec![
            ContentBlock::text("Let me look."),
            ContentBlock::ToolUse {
                id: "toolu_01".into(),
                name: "Read".into(),
                input
            }
        ]
    );
    assert!(events.contains(&StreamEvent::ToolUseStart {
        id: "toolu_01".into(),
        name: "Read".into()
    }));
    assert!(response.invalid_tool_inputs.is_empty());
}

#[tokio::test]
async fn anthropic_invalid_tool_input_is_reported_not_run() {
    let server = FakeServer::start([anthropic::message()
        .tool_use("toolu_ok", "Read", json!({"path": "a"}))
        .tool_use_raw("toolu_bad", "Grep", "{\"pattern\": \"x\", ")
        .reply()]);
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let response = send(&p, &hello()).await.0.unwrap();
    assert_eq!(response.invalid_tool_inputs.len(), 1);
    assert_eq!(response.invalid_tool_inputs[0].0, "toolu_bad");
    assert!(
        response.invalid_tool_inputs[0].1.contains("not valid JSON"),
        "{:?}",
        response.invalid_tool_inputs
    );
    let inputs: Vec<(&str, &Value)> = response
        .message
        .tool_uses()
        .map(|(id, _, input)| (id, input))
        .collect();
    assert_eq!(
        inputs,
        [
            ("toolu_ok", &json!({"path": "a"})),
            ("toolu_bad", &json!({}))
        ]
    );
}

#[tokio::test]
async fn anthropic_thinking_blocks_round_trip() {
    let server = FakeServer::start([
        anthropic::message()
            .thinking("First, consider the question.", "sig-abc123")
            .redacted_thinking("REDACTED-DATA")
            .text("Answer.")
            .reply(),
        anthropic::text_reply("Second answer."),
    ]);
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let (result, events) = send(&p, &hello()).await;
    let first = result.unwrap();
    let expected = vec![
        ContentBlock::Thinking {
            thinking: "First, consider the question.".into(),
            signature: "sig-abc123".into(),
        },
        ContentBlock::RedactedThinking {
            data: "REDACTED-DATA".into(),
        },
        ContentBlock::text("Answer."),
    ];
    assert_eq!(first.message.content, expected);
    let thinking: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ThinkingDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thinking, "First, consider the question.");

    let follow_up = request(vec![
        Message::user_text("Say hello."),
        first.message.clone(),
        Message::user_text("More."),
    ]);
    send(&p, &follow_up).await.0.unwrap();
    let sent = &server.request(1).json["messages"][1]["content"];
    assert_eq!(
        sent[0],
        json!({"type": "thinking", "thinking": "First, consider the question.", "signature": "sig-abc123"})
    );
    assert_eq!(
        sent[1],
        json!({"type": "redacted_thinking", "data": "REDACTED-DATA"})
    );
    assert_eq!(sent[2], json!({"type": "text", "text": "Answer."}));
}

#[tokio::test]
async fn anthropic_usage_includes_cache_counters() {
    let server = FakeServer::start([anthropic::message()
        .text("hi")
        .usage(120, 42)
        .cache(2000, 3000)
        .reply()]);
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let response = send(&p, &hello()).await.0.unwrap();
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 120,
            output_tokens: 42,
            cache_creation_input_tokens: 2000,
            cache_read_input_tokens: 3000,
            web_search_requests: 0,
            ..Usage::default()
        }
    );
}

fn tool_round_trip(last_text: &str) -> ModelRequest {
    request(vec![
        Message::user_text("Read the file."),
        Message::assistant(vec![
            ContentBlock::text("Reading."),
            ContentBlock::ToolUse {
                id: "toolu_1".into(),
                name: "Read".into(),
                input: json!({"path": "a.txt"}),
            },
        ]),
        Message::user(vec![
            ContentBlock::tool_result("toolu_1", "file contents", false),
            ContentBlock::text(last_text),
        ]),
    ])
}

#[tokio::test]
async fn anthropic_cache_control_sits_on_the_three_breakpoints() {
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    send(&p, &tool_round_trip("Now summarise it."))
        .await
        .0
        .unwrap();
    let r = server.request(0);
    let eph = json!({"type": "ephemeral"});
    assert_eq!(
        r.json["system"],
        json!([{"type": "text", "text": "You are a test agent.", "cache_control": eph}])
    );
    assert!(r.json["tools"][0].get("cache_control").is_none());
    assert_eq!(r.json["tools"][1]["cache_control"], eph);
    let last = &r.json["messages"][2]["content"];
    assert!(last[0].get("cache_control").is_none());
    assert_eq!(
        last[1],
        json!({"type": "text", "text": "Now summarise it.", "cache_control": eph})
    );
    assert_eq!(
        r.body_str().matches("cache_control").count(),
        3,
        "exactly three breakpoints"
    );
    server.assert_invariants();
}

#[tokio::test]
async fn anthropic_requests_differing_in_the_last_text_share_a_prefix_into_it() {
    let server = FakeServer::start([anthropic::text_reply("a"), anthropic::text_reply("b")]);
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let a = tool_round_trip("Directive: explore the parser module");
    let b = tool_round_trip("Directive: review the lexer changes");
    send(&p, &a).await.0.unwrap();
    send(&p, &b).await.0.unwrap();
    let (ba, bb) = (server.request(0).body, server.request(1).body);
    let shared = ba.iter().zip(&bb).take_while(|(x, y)| x == y).count();
    let text = String::from_utf8(ba.clone()).unwrap();
    let block_start = text
        .rfind("{\"type\":\"text\",\"text\":\"Directive: ")
        .unwrap();
    let inside = block_start + "{\"type\":\"text\",\"text\":\"Directive: ".len();
    assert!(
        shared >= inside,
        "shared prefix {shared} ends before the last text block's content at {inside}"
    );
    assert!(shared < ba.len() && shared < bb.len());
    assert!(
        text[shared..].starts_with("explore"),
        "the bodies first differ inside the last block"
    );
}

#[tokio::test]
async fn anthropic_overloaded_status_is_retried() {
    let server = FakeServer::start([
        Reply::anthropic_error(529, "overloaded_error", "Overloaded"),
        anthropic::text_reply("recovered"),
    ]);
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let (result, events) = send(&p, &hello()).await;
    assert_eq!(
        result.unwrap().message.joined_text().as_deref(),
        Some("recovered")
    );
    let r = retries(&events);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].0, 1);
    assert!(
        r[0].2.contains("529") && r[0].2.contains("Overloaded"),
        "{r:?}"
    );
    assert_eq!(server.request_count(), 2);
    assert_eq!(
        server.request(0).body,
        server.request(1).body,
        "a retry resends the same bytes"
    );
}

#[tokio::test]
async fn anthropic_overloaded_stream_error_is_retried() {
    let server = FakeServer::start([
        anthropic::overloaded_stream(),
        anthropic::text_reply("fine"),
    ]);
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let (result, events) = send(&p, &hello()).await;
    assert_eq!(
        result.unwrap().message.joined_text().as_deref(),
        Some("fine")
    );
    assert_eq!(retries(&events).len(), 1);
}

#[tokio::test]
async fn anthropic_retry_after_is_honoured() {
    let server = FakeServer::start([
        Reply::anthropic_error(429, "rate_limit_error", "slow down")
            .with_header("retry-after", "1"),
        anthropic::text_reply("ok"),
    ]);
    let mut settings = kit::anthropic_settings();
    settings.retry_base_ms = 5;
    let p = provider(&settings, &server.anthropic_env());
    let (result, events) = send(&p, &hello()).await;
    result.unwrap();
    let r = retries(&events);
    assert_eq!(r.len(), 1);
    assert_eq!(
        r[0].1, 1000,
        "the delay is the server's retry-after, not the backoff"
    );
}

#[tokio::test]
async fn anthropic_bad_request_fails_at_once_with_the_providers_message() {
    let server = FakeServer::start([
        Reply::anthropic_error(400, "invalid_request_error", "prompt is too long"),
        anthropic::text_reply("never sent"),
    ]);
    server.skip_invariant_checks();
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let (result, events) = send(&p, &hello()).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Status(400));
    assert_eq!(
        err.message,
        "Anthropic API error 400 (invalid_request_error): prompt is too long"
    );
    assert_eq!(server.request_count(), 1);
    assert!(retries(&events).is_empty());
}

#[tokio::test]
async fn anthropic_stream_cut_mid_message_is_retried_whole() {
    let full = anthropic::message().text("The whole answer.").events();
    let server = FakeServer::start([
        Reply::CutAfter {
            events: full.clone(),
            n: 4,
        },
        Reply::Sse(full),
    ]);
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let (result, events) = send(&p, &hello()).await;
    let response = result.unwrap();
    assert_eq!(
        response.message.joined_text().as_deref(),
        Some("The whole answer.")
    );
    assert_eq!(server.request_count(), 2);
    let r = retries(&events);
    assert_eq!(r.len(), 1);
    assert!(
        r[0].2.contains("cut") || r[0].2.contains("ended before"),
        "{r:?}"
    );
}

#[tokio::test]
async fn anthropic_stream_without_message_stop_is_retried() {
    let mut truncated = anthropic::message().text("partial").events();
    truncated.pop();
    let server = FakeServer::start([Reply::Sse(truncated), anthropic::text_reply("complete")]);
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let (result, events) = send(&p, &hello()).await;
    assert_eq!(
        result.unwrap().message.joined_text().as_deref(),
        Some("complete")
    );
    assert!(retries(&events)[0].2.contains("message_stop"));
}

#[tokio::test]
async fn anthropic_malformed_sse_is_a_clear_bad_response_error() {
    let server = FakeServer::start([Reply::Malformed, anthropic::text_reply("not reached")]);
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let err = send(&p, &hello()).await.0.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::BadResponse);
    assert!(
        err.message.contains("malformed `message_start` event"),
        "{}",
        err.message
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn anthropic_stalled_stream_is_retried_then_fails() {
    let head: Vec<SseEvent> = anthropic::message()
        .text("stalling")
        .events()
        .into_iter()
        .take(2)
        .collect();
    let stall = Reply::Stall {
        after_events: head,
        duration: Duration::from_secs(30),
    };
    let server = FakeServer::start([stall.clone(), stall.clone(), stall]);
    let mut settings = kit::anthropic_settings();
    settings.idle_timeout_ms = 200;
    settings.max_retries = 2;
    let p = provider(&settings, &server.anthropic_env());
    let (result, events) = send(&p, &hello()).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Timeout);
    assert!(
        // The head ends with a ping, which is not progress.
        err.message.contains("sent only pings for 200 ms"),
        "{}",
        err.message
    );
    assert!(err.message.contains("3 attempts"), "{}", err.message);
    assert_eq!(server.request_count(), 3);
    assert_eq!(
        retries(&events).iter().map(|r| r.0).collect::<Vec<_>>(),
        [1, 2]
    );
}

#[tokio::test]
async fn retryable_status_gives_up_after_max_retries() {
    let server =
        FakeServer::start((0..3).map(|_| Reply::anthropic_error(503, "api_error", "busy")));
    let mut settings = kit::anthropic_settings();
    settings.max_retries = 2;
    let p = provider(&settings, &server.anthropic_env());
    let err = send(&p, &hello()).await.0.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Status(503));
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn the_api_key_never_appears_in_errors() {
    let echo = format!("invalid x-api-key {TEST_KEY}");
    let server = FakeServer::start([
        Reply::anthropic_error(503, "api_error", &echo),
        Reply::anthropic_error(401, "authentication_error", &echo),
    ]);
    server.skip_invariant_checks();
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let (result, events) = send(&p, &hello()).await;
    let err = result.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Status(401));
    assert!(!err.message.contains(TEST_KEY), "{}", err.message);
    assert!(!err.to_string().contains(TEST_KEY));
    assert!(!format!("{err:?}").contains(TEST_KEY));
    assert!(err.message.contains("[redacted]"), "{}", err.message);
    for (_, _, reason) in retries(&events) {
        assert!(!reason.contains(TEST_KEY), "{reason}");
    }
    assert!(!format!("{p:?}").contains(TEST_KEY));
}

#[tokio::test]
async fn a_missing_key_is_a_config_error_only_when_sending() {
    let server = FakeServer::start([]);
    let env = vec![("ANTHROPIC_BASE_URL".to_string(), server.url().to_string())];
    let p = provider(&kit::anthropic_settings(), &env);
    assert!(
        !p.request_body(&hello()).is_empty(),
        "rendering needs no key"
    );
    let err = send(&p, &hello()).await.0.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Config);
    assert!(err.message.contains("ANTHROPIC_API_KEY"), "{}", err.message);
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn settings_base_url_and_key_env_win() {
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    let mut settings = kit::anthropic_settings();
    settings.base_url = Some(format!("{}/", server.url()));
    settings.api_key_env = Some("MY_KEY".into());
    let env = vec![
        (
            "ANTHROPIC_BASE_URL".to_string(),
            "http://127.0.0.1:9".to_string(),
        ),
        ("MY_KEY".to_string(), "sk-mine".to_string()),
    ];
    send(&provider(&settings, &env), &hello()).await.0.unwrap();
    let r = server.request(0);
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some("sk-mine"));
}

#[tokio::test]
async fn connection_refused_is_retried_as_a_network_error() {
    // Bind then drop a listener to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let env = vec![
        (
            "ANTHROPIC_BASE_URL".to_string(),
            format!("http://127.0.0.1:{port}"),
        ),
        ("ANTHROPIC_API_KEY".to_string(), TEST_KEY.to_string()),
    ];
    let mut settings = kit::anthropic_settings();
    settings.max_retries = 1;
    let (result, events) = send(&provider(&settings, &env), &hello()).await;
    assert_eq!(result.unwrap_err().kind, ProviderErrorKind::Network);
    assert_eq!(retries(&events).len(), 1);
}

#[tokio::test]
async fn routed_replies_follow_a_marker_in_the_request() {
    let server = FakeServer::route(|r| {
        if r.system_text().contains("[agent-b]") {
            anthropic::text_reply("from b")
        } else {
            anthropic::text_reply(&format!("echo: {}", r.last_user_text()))
        }
    });
    let p = provider(&kit::anthropic_settings(), &server.anthropic_env());
    let mut b = hello();
    b.system = Arc::from("You are [agent-b].");
    let a = hello();
    let (ra, rb) = tokio::join!(send(&p, &a), send(&p, &b));
    assert_eq!(
        ra.0.unwrap().message.joined_text().as_deref(),
        Some("echo: Say hello.")
    );
    assert_eq!(
        rb.0.unwrap().message.joined_text().as_deref(),
        Some("from b")
    );
    assert_eq!(server.request_count(), 2);
}

#[test]
fn invariants_catch_unanswered_and_duplicate_tool_uses() {
    let good = json!({"messages": [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]});
    assert!(kit::invariants::check_anthropic(&good).is_empty());
    let bad = json!({"messages": [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "Read", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "x"},
            {"type": "tool_result", "tool_use_id": "t1", "content": "y"},
            {"type": "tool_result", "tool_use_id": "t9", "content": "z"}]},
        {"role": "user", "content": [{"type": "text", "text": "again"}]}]});
    let v = kit::invariants::check_anthropic(&bad);
    assert!(v.iter().any(|m| m.contains("`t1` has 2")), "{v:?}");
    assert!(v.iter().any(|m| m.contains("`t2` has 0")), "{v:?}");
    assert!(
        v.iter().any(|m| m.contains("`t9` answers no tool_use")),
        "{v:?}"
    );
    assert!(
        v.iter().any(|m| m.contains("both have role `user`")),
        "{v:?}"
    );
}

// ---- OpenAI-compatible ------------------------------------------------------

#[tokio::test]
async fn openai_text_reply_without_a_key_sends_no_authorization() {
    let server = FakeServer::start([openai::chat()
        .text("Hello from llama")
        .usage(Some((33, 7)))
        .reply()]);
    let p = provider(&kit::openai_settings(server.url()), &[]);
    let (result, events) = send(&p, &hello()).await;
    let response = result.unwrap();
    assert_eq!(
        response.message,
        Message::assistant(vec![ContentBlock::text("Hello from llama")])
    );
    assert_eq!(response.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 33,
            output_tokens: 7,
            ..Usage::default()
        }
    );
    assert_eq!(response.model, "gpt-test");
    assert_eq!(text_of(&events), "Hello from llama");
    let r = server.request(0);
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), None);
    assert_eq!(r.json["stream"], true);
    assert_eq!(r.json["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        r.json["tools"][0],
        json!({"type": "function", "function": {
        "name": "Read", "description": "The Read tool.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}})
    );
    assert_eq!(r.body, p.request_body(&hello()));
}

#[tokio::test]
async fn openai_tool_call_fragments_are_assembled() {
    let server = FakeServer::start([openai::chat()
        .text("Checking.")
        .tool_call("call_a", "Read", json!({"path": "src/main.rs"}))
        .tool_call(
            "call_b",
            "Grep",
            json!({"pattern": "fn main", "glob": "*.rs"}),
        )
        .reply()]);
    let mut settings = kit::openai_settings(&format!("{}/v1/", server.url()));
    settings.api_key_env = Some("LOCAL_KEY".into());
    let env = vec![("LOCAL_KEY".to_string(), "sk-local".to_string())];
    let (result, events) = send(&provider(&settings, &env), &hello()).await;
    let response = result.unwrap();
    assert_eq!(response.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(
        response.message.content,
        vec![
            ContentBlock::text("Checking."),
            ContentBlock::ToolUse {
                id: "call_a".into(),
                name: "Read".into(),
                input: json!({"path": "src/main.rs"})
            },
            ContentBlock::ToolUse {
                id: "call_b".into(),
                name: "Grep".into(),
                input: json!({"pattern": "fn main", "glob": "*.rs"})
            },
        ]
    );
    assert!(events.contains(&StreamEvent::ToolUseStart {
        id: "call_b".into(),
        name: "Grep".into()
    }));
    let r = server.request(0);
    assert_eq!(
        r.path, "/v1/chat/completions",
        "a base URL ending in /v1 is not doubled"
    );
    assert_eq!(r.header("authorization"), Some("Bearer sk-local"));
}

#[tokio::test]
async fn openai_invalid_arguments_are_reported() {
    let server = FakeServer::start([openai::chat()
        .tool_call_raw("call_x", "Read", "{\"path\": ")
        .reply()]);
    let response = send(
        &provider(&kit::openai_settings(server.url()), &[]),
        &hello(),
    )
    .await
    .0
    .unwrap();
    assert_eq!(response.invalid_tool_inputs.len(), 1);
    assert_eq!(response.invalid_tool_inputs[0].0, "call_x");
}

#[tokio::test]
async fn openai_history_is_mapped_to_chat_messages() {
    let server = FakeServer::start([openai::text_reply("done")]);
    let req = request(vec![
        Message::user_text("Find main."),
        Message::assistant(vec![
            ContentBlock::Thinking {
                thinking: "hmm".into(),
                signature: "s".into(),
            },
            ContentBlock::text("Looking."),
            ContentBlock::ToolUse {
                id: "call_1".into(),
                name: "Grep".into(),
                input: json!({"pattern": "main"}),
            },
            ContentBlock::ToolUse {
                id: "call_2".into(),
                name: "Read".into(),
                input: json!({"path": "a"}),
            },
        ]),
        Message::user(vec![
            ContentBlock::tool_result("call_1", "src/main.rs:1", false),
            ContentBlock::tool_result("call_2", "no such file", true),
            ContentBlock::text("Keep going."),
        ]),
    ]);
    send(&provider(&kit::openai_settings(server.url()), &[]), &req)
        .await
        .0
        .unwrap();
    let r = server.request(0);
    assert_eq!(
        r.json["messages"],
        json!([
            {"role": "system", "content": "You are a test agent."},
            {"role": "user", "content": "Find main."},
            {"role": "assistant", "content": "Looking.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "Grep", "arguments": "{\"pattern\":\"main\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "Read", "arguments": "{\"path\":\"a\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "src/main.rs:1"},
            {"role": "tool", "tool_call_id": "call_2", "content": "Error:\nno such file"},
            {"role": "user", "content": "Keep going."}
        ])
    );
    let keys: Vec<&str> = r
        .json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys.last(), Some(&"messages"));
    assert!(!r.body_str().contains("hmm"), "thinking is dropped");
}

#[tokio::test]
async fn openai_errors_and_missing_base_url() {
    let server = FakeServer::start([Reply::openai_error(404, "not_found", "model `x` not found")]);
    let err = send(
        &provider(&kit::openai_settings(server.url()), &[]),
        &hello(),
    )
    .await
    .0
    .unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Status(404));
    assert_eq!(
        err.message,
        "OpenAI-compatible API error 404 (not_found): model `x` not found"
    );

    let mut settings = kit::openai_settings("");
    settings.base_url = None;
    let err = send(&provider(&settings, &[]), &hello())
        .await
        .0
        .unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Config);
    assert!(err.message.contains("base_url"), "{}", err.message);
}

#[tokio::test]
async fn openai_stream_cut_before_finish_is_retried() {
    let full = openai::chat().text("complete answer").events();
    let server = FakeServer::start([
        Reply::CutAfter {
            events: full.clone(),
            n: 2,
        },
        Reply::Sse(full),
    ]);
    let (result, events) = send(
        &provider(&kit::openai_settings(server.url()), &[]),
        &hello(),
    )
    .await;
    assert_eq!(
        result.unwrap().message.joined_text().as_deref(),
        Some("complete answer")
    );
    assert_eq!(retries(&events).len(), 1);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn openai_stream_ending_after_finish_without_done_is_accepted() {
    let server = FakeServer::start([openai::chat().text("no done marker").without_done().reply()]);
    let response = send(
        &provider(&kit::openai_settings(server.url()), &[]),
        &hello(),
    )
    .await
    .0
    .unwrap();
    assert_eq!(
        response.message.joined_text().as_deref(),
        Some("no done marker")
    );
    assert_eq!(server.request_count(), 1);
}

// ---- SSE assembly is independent of chunking ---------------------------------

/// Cuts `bytes` at the given (sorted, deduplicated) offsets.
fn chunked(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    points.dedup();
    let mut out = Vec::new();
    let mut start = 0;
    for p in points.into_iter().chain([bytes.len()]) {
        out.push(bytes[start..p].to_vec());
        start = p;
    }
    out
}

fn decode(kind: ProviderKind, chunks: Vec<Vec<u8>>) -> Result<ModelResponse, ProviderError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let stream = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, Infallible>));
    rt.block_on(decode_stream(kind, stream, &|_| {}))
}

fn anthropic_fixture() -> Vec<u8> {
    kit::encode(
        &anthropic::message()
            .thinking("Ünïcödé thoughts → ✓", "sig==")
            .text("Héllo, wörld! 你好 🎉")
            .tool_use(
                "toolu_9",
                "Read",
                json!({"path": "/tmp/ß.txt", "n": [1, 2, {"deep": "✓"}]}),
            )
            .usage(11, 22)
            .cache(33, 44)
            .events(),
    )
}

fn openai_fixture() -> Vec<u8> {
    kit::encode(
        &openai::chat()
            .text("Grüße aus dem Server 🚀")
            .tool_call("call_1", "Grep", json!({"pattern": "ä+ö", "flags": ["-i"]}))
            .events(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn anthropic_assembly_ignores_chunk_boundaries(cuts in proptest::collection::vec(any::<usize>(), 0..40)) {
        let bytes = anthropic_fixture();
        let whole = decode(ProviderKind::Anthropic, vec![bytes.clone()]).unwrap();
        let split = decode(ProviderKind::Anthropic, chunked(&bytes, &cuts)).unwrap();
        prop_assert_eq!(&split, &whole);
        prop_assert_eq!(whole.message.content.len(), 3);
    }

    #[test]
    fn openai_assembly_ignores_chunk_boundaries(cuts in proptest::collection::vec(any::<usize>(), 0..40)) {
        let bytes = openai_fixture();
        let whole = decode(ProviderKind::Openai, vec![bytes.clone()]).unwrap();
        let split = decode(ProviderKind::Openai, chunked(&bytes, &cuts)).unwrap();
        prop_assert_eq!(&split, &whole);
        prop_assert_eq!(whole.message.content.len(), 2);
    }

    #[test]
    fn anthropic_byte_at_a_time_matches(_x in 0..1u8) {
        let bytes = anthropic_fixture();
        let singles: Vec<Vec<u8>> = bytes.iter().map(|b| vec![*b]).collect();
        let whole = decode(ProviderKind::Anthropic, vec![bytes.clone()]).unwrap();
        prop_assert_eq!(decode(ProviderKind::Anthropic, singles).unwrap(), whole);
    }
}

#[test]
fn decoded_fixture_has_the_expected_content() {
    let r = decode(ProviderKind::Anthropic, vec![anthropic_fixture()]).unwrap();
    assert_eq!(
        r.message.content[1],
        ContentBlock::text("Héllo, wörld! 你好 🎉")
    );
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 11,
            output_tokens: 22,
            cache_creation_input_tokens: 33,
            cache_read_input_tokens: 44,
            web_search_requests: 0,
            ..Usage::default()
        }
    );
}

#[tokio::test]
async fn a_reply_slower_than_the_idle_timeout_is_retried() {
    let server = FakeServer::start([
        anthropic::text_reply("too late").delayed(Duration::from_millis(600)),
        anthropic::text_reply("on time"),
    ]);
    let mut settings = kit::anthropic_settings();
    settings.idle_timeout_ms = 150;
    let (result, events) = send(&provider(&settings, &server.anthropic_env()), &hello()).await;
    assert_eq!(
        result.unwrap().message.joined_text().as_deref(),
        Some("on time")
    );
    let r = retries(&events);
    assert_eq!(r.len(), 1);
    assert!(r[0].2.contains("no response"), "{r:?}");
}
