//! WebSearch through the real binary: on the Anthropic provider through
//! the server-side web search tool (a fake Anthropic server streams
//! `server_tool_use` and `web_search_tool_result` blocks, pauses the turn,
//! and must get the blocks back exactly), and elsewhere through a fake
//! SearXNG instance.

use serde_json::{Value, json};

use super::harness::{Project, last_tool_results, result_text, tool_names};
use super::kit::{FakeServer, Reply, SseEvent, anthropic, openai};

fn ev(v: Value) -> SseEvent {
    let name = v["type"].as_str().unwrap_or("message").to_string();
    SseEvent::named(name, v.to_string())
}

/// The blocks the search request's first answer holds, as the API sends
/// them whole (the server tool's input is streamed separately).
fn server_use() -> Value {
    json!({"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search",
           "input": {"query": "rust 2024 edition"}, "caller": {"type": "direct"}})
}

fn search_result() -> Value {
    json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01",
           "caller": {"type": "direct"},
           "content": [
               {"type": "web_search_result", "title": "Rust 2024 - The Edition Guide",
                "url": "https://doc.rust-lang.org/edition-guide/rust-2024/index.html",
                "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5", "page_age": "February 20, 2025"},
               {"type": "web_search_result", "title": "Announcing Rust 1.85.0",
                "url": "https://blog.rust-lang.org/2025/02/20/Rust-1.85.0.html",
                "encrypted_content": "Fmw2Cg4IARgBIiQ5YjVjYzI", "page_age": null}]})
}

/// A streamed search answer: the server tool call (input in deltas), its
/// result, a text block, then `pause_turn`.
fn paused_search_stream() -> Reply {
    let mut start_use = server_use();
    start_use["input"] = json!({});
    Reply::Sse(vec![
        ev(
            json!({"type": "message_start", "message": {"id": "msg_s1", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 40, "output_tokens": 1}}}),
        ),
        ev(json!({"type": "content_block_start", "index": 0, "content_block": start_use})),
        ev(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"query\": \"rust 20"}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "24 edition\"}"}}),
        ),
        ev(json!({"type": "content_block_stop", "index": 0})),
        ev(json!({"type": "content_block_start", "index": 1, "content_block": search_result()})),
        ev(json!({"type": "content_block_stop", "index": 1})),
        ev(
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
        ),
        ev(
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "The 2024 edition "}}),
        ),
        ev(json!({"type": "content_block_stop", "index": 2})),
        ev(
            json!({"type": "message_delta", "delta": {"stop_reason": "pause_turn", "stop_sequence": null},
               "usage": {"output_tokens": 30, "server_tool_use": {"web_search_requests": 1}}}),
        ),
        ev(json!({"type": "message_stop"})),
    ])
}

#[test]
fn anthropic_search_uses_the_server_tool_and_keeps_its_blocks_exactly() {
    let mut p = Project::new();
    p.config("[permissions]\nallow = [\"WebSearch\"]\n");
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_1",
            "WebSearch",
            json!({"query": "rust 2024 edition", "allowed_domains": ["rust-lang.org"]}),
        ),
        paused_search_stream(),
        anthropic::message()
            .text("shipped with Rust 1.85.")
            .model("claude-sonnet-4-5")
            .reply(),
        anthropic::text_reply("Rust 2024 shipped in 1.85."),
    ]);
    server.skip_invariant_checks();
    let run = p.run(Some(&server), &["run", "when did rust 2024 ship?"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "Rust 2024 shipped in 1.85.");
    assert!(tool_names(&server.request(0).json).contains(&"WebSearch".to_string()));

    // The search request: the server tool with the call's domain filter.
    let search = &server.request(1).json;
    assert_eq!(
        search["tools"],
        json!([{"type": "web_search_20250305", "name": "web_search", "max_uses": 8,
                "allowed_domains": ["rust-lang.org"]}])
    );
    assert_eq!(search["model"], "claude-sonnet-4-5", "the caller's model");
    let ask = search["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(ask.contains("rust 2024 edition"), "{ask}");

    // The paused turn goes back exactly as it streamed in, so the API can
    // go on with it.
    let cont = &server.request(2).json;
    let msgs = cont["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "{cont}");
    assert_eq!(msgs[1]["role"], "assistant");
    let blocks = msgs[1]["content"].as_array().unwrap();
    assert_eq!(blocks[0], server_use());
    let mut result = blocks[1].clone();
    result.as_object_mut().unwrap().remove("cache_control");
    assert_eq!(result, search_result());
    assert_eq!(blocks[2]["text"], "The 2024 edition ");

    // The tool result: the links and the answer text of both rounds.
    let r = &last_tool_results(&server.request(3).json)[0];
    assert!(r.get("is_error").is_none(), "{r}");
    let text = result_text(r);
    assert!(text.contains("rust 2024 edition"), "{text}");
    assert!(
        text.contains(r#""title":"Rust 2024 - The Edition Guide""#)
            && text.contains("https://blog.rust-lang.org/2025/02/20/Rust-1.85.0.html"),
        "{text}"
    );
    assert!(
        text.contains("The 2024 edition shipped with Rust 1.85."),
        "{text}"
    );
    assert!(!text.contains("EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5"), "{text}");

    // The search's tokens are counted in the session's usage.
    let lines = p.transcript_lines();
    let side: Vec<&Value> = lines.iter().filter(|l| l["type"] == "side_usage").collect();
    assert_eq!(side.len(), 2, "both search rounds are recorded");
    assert_eq!(side[0]["tool"], "WebSearch");
    assert_eq!(side[0]["usage"]["input_tokens"], 40);
}

/// `m`'s stream, reporting two server-side searches in its usage.
fn two_searches(m: anthropic::MessageBuilder) -> Reply {
    let events = m
        .events()
        .into_iter()
        .map(|mut e| {
            if e.event.as_deref() == Some("message_delta") {
                let mut v: Value = serde_json::from_str(&e.data).unwrap();
                v["usage"]["server_tool_use"] = json!({"web_search_requests": 2});
                e.data = v.to_string();
            }
            e
        })
        .collect();
    Reply::Sse(events)
}

#[test]
fn json_output_counts_the_search_tokens() {
    let mut p = Project::new();
    p.config("[permissions]\nallow = [\"WebSearch\"]\n");
    let server = FakeServer::start([
        anthropic::message()
            .tool_use("toolu_1", "WebSearch", json!({"query": "cadre"}))
            .usage(100, 10)
            .reply(),
        two_searches(anthropic::message().text("nothing").usage(1000, 50)),
        anthropic::message().text("done").usage(200, 20).reply(),
    ]);
    server.skip_invariant_checks();
    let run = p.run(Some(&server), &["run", "--output-format", "json", "search"]);
    run.ok();
    let v = run.json();
    assert_eq!(v["usage"]["input_tokens"], 1300, "{v}");
    assert_eq!(v["usage"]["output_tokens"], 80, "{v}");
    // claude-sonnet-4-5 at $3 / $15 per million tokens, and two searches
    // at $10 per thousand.
    let expected = (1300.0 * 3.0 + 80.0 * 15.0) / 1_000_000.0 + 2.0 * 10.0 / 1000.0;
    let cost = v["total_cost_usd"].as_f64().unwrap();
    assert!((cost - expected).abs() < 1e-9, "{cost} vs {expected}");
    // `sessions list` counts the search from the transcript too.
    let list = p.run(None, &["sessions", "list", "--json"]).ok().json();
    let listed = list[0]["cost_usd"].as_f64().unwrap();
    assert!(
        (listed - expected).abs() < 1e-9,
        "{listed} vs {expected}: {list}"
    );
}

#[test]
fn searxng_answers_on_other_providers_and_domain_lists_filter_it() {
    let searx = FakeServer::route(|r| {
        let body = json!({"query": "q", "results": [
            {"url": "https://docs.rs/tokio/latest/tokio/", "title": "tokio - Rust", "content": "An event-driven runtime"},
            {"url": "https://github.com/tokio-rs/tokio", "title": "tokio-rs/tokio", "content": "A runtime"},
            {"url": "https://www.docs.rs/mio", "title": "mio", "content": "Metal I/O"}],
            "answers": [], "unresponsive_engines": [["bing", "timeout"]], "path": r.path});
        Reply::Body {
            code: 200,
            content_type: "application/json".into(),
            body: body.to_string().into_bytes(),
        }
    });
    searx.skip_invariant_checks();
    let server = FakeServer::start([
        openai::tool_call_reply(
            "call_1",
            "WebSearch",
            json!({"query": "tokio runtime", "blocked_domains": ["github.com"]}),
        ),
        openai::text_reply("tokio is a runtime"),
    ]);
    let mut p = Project::new();
    p.config(&format!(
        "[permissions]\nallow = [\"WebSearch\"]\n[web_search]\nsearxng_url = \"{}/\"\n",
        searx.url()
    ));
    p.env("CADRE_PROVIDER__KIND", "openai")
        .env("CADRE_PROVIDER__BASE_URL", server.url());
    let run = p.run(None, &["run", "--model", "local-model", "what is tokio"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "tokio is a runtime");
    let got = searx.requests();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].method, "GET");
    assert_eq!(got[0].path, "/search");
    assert_eq!(got[0].query, "q=tokio+runtime&format=json");
    let msgs = server.request(1).json["messages"].clone();
    let tool = msgs
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let text = tool["content"].as_str().unwrap();
    assert!(
        text.contains("https://docs.rs/tokio/latest/tokio/")
            && text.contains("An event-driven runtime"),
        "{text}"
    );
    assert!(text.contains("https://www.docs.rs/mio"), "{text}");
    assert!(!text.contains("github.com"), "blocked: {text}");
    assert!(text.contains("failed: bing: timeout"), "{text}");
}

#[test]
fn without_a_backend_the_model_is_told_what_to_configure() {
    let server = FakeServer::start([
        openai::tool_call_reply("call_1", "WebSearch", json!({"query": "anything"})),
        openai::text_reply("ok"),
    ]);
    let mut p = Project::new();
    p.config("[permissions]\nallow = [\"WebSearch\"]\n");
    p.env("CADRE_PROVIDER__KIND", "openai")
        .env("CADRE_PROVIDER__BASE_URL", server.url());
    p.run(None, &["run", "--model", "local-model", "search"])
        .ok();
    let msgs = server.request(1).json["messages"].clone();
    let tool = msgs
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let text = tool["content"].as_str().unwrap();
    assert!(
        text.starts_with("Error:") && text.contains("web_search.searxng_url"),
        "{text}"
    );
}

#[test]
fn searching_is_asked_for_and_denied_in_a_plain_run() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "WebSearch", json!({"query": "anything"})),
        anthropic::text_reply("ok"),
    ]);
    p.run(Some(&server), &["run", "search"]).ok();
    assert_eq!(server.requests().len(), 2, "no search request was made");
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true);
}

#[test]
fn an_untrusted_project_cannot_choose_where_searches_go() {
    let searx = FakeServer::route(|_| Reply::Body {
        code: 200,
        content_type: "application/json".into(),
        body: br#"{"results": []}"#.to_vec(),
    });
    searx.skip_invariant_checks();
    let server = FakeServer::start([
        openai::tool_call_reply("call_1", "WebSearch", json!({"query": "secret plans"})),
        openai::text_reply("ok"),
        openai::tool_call_reply("call_2", "WebSearch", json!({"query": "secret plans"})),
        openai::text_reply("ok"),
    ]);
    let mut p = Project::new();
    p.config(&format!(
        "[web_search]\nsearxng_url = \"{}\"\n",
        searx.url()
    ));
    p.env("CADRE_PROVIDER__KIND", "openai")
        .env("CADRE_PROVIDER__BASE_URL", server.url())
        .env("CADRE_PERMISSIONS__ALLOW", "[\"WebSearch\"]");
    // Trusted: the project's instance is used.
    p.run(None, &["run", "--model", "local-model", "search"])
        .ok();
    assert_eq!(searx.requests().len(), 1);
    p.untrust();
    p.run(None, &["run", "--model", "local-model", "search"]);
    assert_eq!(
        searx.requests().len(),
        1,
        "an untrusted repository's search server got the query"
    );
    let msgs = server.request(3).json["messages"].clone();
    let tool = msgs
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .contains("web_search.searxng_url"),
        "{tool}"
    );
}
