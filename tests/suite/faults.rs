//! Fault injection through the real binary: rate limits, server errors, a
//! stalled stream, broken tool input and a failing sub-agent. Every case
//! ends in success after retries or in a clear error with exit 1; never a
//! panic, and every transcript line stays valid JSON.
//!
//! The 529, 400, cut-stream, malformed-SSE, hallucinated-tool and
//! invalid-tool-input cases already live in `run.rs`; they are not repeated.

use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{BASE_CONFIG, Project, Run, last_tool_results, result_text};
use super::kit::{FakeServer, Reply, anthropic};

/// What every faulty run must satisfy, whatever its outcome.
fn assert_no_panic_and_valid_transcripts(p: &Project, run: &Run) {
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    // Panics on any line that is not JSON.
    let lines = p.transcript_lines();
    assert!(!lines.is_empty(), "a transcript was written");
}

/// Rewrites the project's config with a short idle timeout and
/// `max_retries` (the kit's base config sets both already).
fn with_provider(p: &Project, idle_timeout_ms: u64, max_retries: u32) {
    let config = BASE_CONFIG
        .replace(
            "idle_timeout_ms = 3000",
            &format!("idle_timeout_ms = {idle_timeout_ms}"),
        )
        .replace("max_retries = 2", &format!("max_retries = {max_retries}"));
    assert_ne!(config, BASE_CONFIG);
    p.write("cadre.toml", &config);
}

fn retrying_events(run: &Run) -> Vec<Value> {
    run.json_lines()
        .into_iter()
        .filter(|e| e["type"] == "retrying")
        .collect()
}

#[test]
fn rate_limited_with_retry_after_then_success() {
    let p = Project::new();
    let server = FakeServer::start([
        Reply::anthropic_error(429, "rate_limit_error", "Number of requests exceeded")
            .with_header("retry-after", "1"),
        anthropic::text_reply("after the wait"),
    ]);
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "hi"],
    );
    run.ok();
    assert_eq!(server.request_count(), 2);
    let retries = retrying_events(&run);
    assert_eq!(retries.len(), 1, "{}", run.stdout);
    // The server's `retry-after: 1` wins over the config's 1-5 ms backoff.
    assert_eq!(retries[0]["delay_ms"], 1000, "{}", retries[0]);
    let last = run.json_lines().pop().unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["result"], "after the wait");
    assert_no_panic_and_valid_transcripts(&p, &run);
}

#[test]
fn internal_error_and_bad_gateway_are_retried_then_succeed() {
    let p = Project::new();
    let server = FakeServer::start([
        Reply::anthropic_error(500, "api_error", "Internal server error"),
        Reply::status(502, "<html>Bad Gateway</html>"),
        anthropic::text_reply("third time lucky"),
    ]);
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "hi"],
    );
    run.ok();
    assert_eq!(server.request_count(), 3);
    assert_eq!(retrying_events(&run).len(), 2, "{}", run.stdout);
    assert_eq!(
        run.json_lines().pop().unwrap()["result"],
        "third time lucky"
    );
    assert_no_panic_and_valid_transcripts(&p, &run);
}

#[test]
fn a_stall_beyond_the_idle_timeout_is_retried_then_fails_clearly() {
    let p = Project::new();
    with_provider(&p, 300, 1);
    let stall = || Reply::Stall {
        after_events: anthropic::message().text("never finished").events()[..3].to_vec(),
        duration: Duration::from_secs(5),
    };
    let server = FakeServer::start([stall(), stall()]);
    let run = p.run(Some(&server), &["run", "--output-format", "json", "hi"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(server.request_count(), 2, "one try plus one retry");
    let v = run.json();
    assert_eq!(v["is_error"], true);
    // Claude Code's shape for a model request that failed for good.
    assert_eq!(v["subtype"], "success");
    assert_eq!(v["terminal_reason"], "api_error");
    assert_eq!(v["api_error_status"], Value::Null);
    let msg = v["result"].as_str().unwrap();
    assert!(
        msg.contains("300 ms") || msg.to_lowercase().contains("stall") || msg.contains("idle"),
        "the error says the stream went quiet: {msg}"
    );
    assert_no_panic_and_valid_transcripts(&p, &run);
}

#[test]
fn a_stall_then_success_is_retried() {
    let p = Project::new();
    with_provider(&p, 300, 2);
    let server = FakeServer::start([
        Reply::Stall {
            after_events: Vec::new(),
            duration: Duration::from_secs(5),
        },
        anthropic::text_reply("recovered"),
    ]);
    let run = p.run(Some(&server), &["run", "hi"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "recovered");
    assert_no_panic_and_valid_transcripts(&p, &run);
}

#[test]
fn tool_use_with_invalid_json_gets_an_error_result_and_the_run_succeeds() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::message()
            .text("let me look")
            .tool_use_raw("toolu_1", "Glob", "{\"pattern\": \"*.rs\"")
            .tool_use_raw("toolu_2", "Agent", "not json at all")
            .reply(),
        anthropic::text_reply("done anyway"),
    ]);
    let run = p.run(Some(&server), &["run", "--output-format", "json", "go"]);
    run.ok();
    assert_eq!(run.json()["result"], "done anyway");
    let results = last_tool_results(&server.request(1).json);
    assert_eq!(results.len(), 2, "one result per tool_use");
    for r in &results {
        assert_eq!(r["is_error"], true, "{r}");
        assert!(result_text(r).contains("not valid JSON"), "{r}");
    }
    assert_no_panic_and_valid_transcripts(&p, &run);
}

#[test]
fn every_retry_exhausted_is_exit_1_with_the_last_error() {
    let p = Project::new();
    // BASE_CONFIG: max_retries = 2, so three attempts.
    let server = FakeServer::route(|_| Reply::status(503, "upstream unavailable"));
    let run = p.run(Some(&server), &["run", "hi"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(server.request_count(), 3);
    assert!(run.stderr.contains("503"), "{}", run.stderr);
    assert_no_panic_and_valid_transcripts(&p, &run);
}

#[test]
fn a_childs_provider_failure_is_an_error_result_and_the_parent_goes_on() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        let is_main = r.system_text().contains("You are cadre");
        if !is_main {
            return Reply::anthropic_error(400, "invalid_request_error", "child request rejected");
        }
        if r.messages().iter().all(|m| m["role"] != "assistant") {
            anthropic::message()
                .tool_use(
                    "toolu_d",
                    "Agent",
                    json!({"description": "D", "prompt": "look around", "subagent_type": "Explore"}),
                )
                .reply()
        } else {
            anthropic::text_reply("parent finished")
        }
    });
    let run = p.run(Some(&server), &["run", "--output-format", "json", "go"]);
    run.ok();
    assert_eq!(run.json()["result"], "parent finished");
    let second = server
        .requests()
        .into_iter()
        .filter(|r| r.system_text().contains("You are cadre"))
        .nth(1)
        .expect("the parent's second request");
    let r = &last_tool_results(&second.json)[0];
    assert_eq!(r["is_error"], true, "{r}");
    let text = result_text(r);
    assert!(text.starts_with("Agent \"D\" failed: "), "{text}");
    assert!(text.contains("child request rejected"), "{text}");
    // The child's transcript records the failure.
    let lines = p.transcript_lines();
    assert!(
        lines.iter().any(|l| l.to_string().contains("\"failed\"")),
        "a transcript line records the failed child"
    );
    assert_no_panic_and_valid_transcripts(&p, &run);
}
