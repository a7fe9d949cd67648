//! Bounded reads, through the real binary: a server that sends too much,
//! never ends, sends only pings or answers with HTML gets a clear error
//! naming the limit or what came back, quickly; an answer cut at
//! `max_tokens` is continued, then reported as `max_tokens`; one retry
//! budget covers a request; the file tools refuse FIFOs and devices.

use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{BASE_CONFIG, Project, Run, last_tool_results, result_text};
use super::kit::{FakeServer, Reply, SseEvent, anthropic};

/// A failed run: exit 1, an error result, no panic; returns the message.
fn failed_with(run: &Run) -> String {
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert_eq!(run.code, 1, "{run:?}");
    let v = run.json();
    assert_eq!(v["is_error"], true, "{v}");
    v["result"].as_str().unwrap_or_default().to_string()
}

/// A project whose `[provider]` table has these `key = value` lines, in
/// place of the base config's lines for the same keys.
fn project(provider_keys: &str) -> Project {
    let p = Project::new();
    let keys: Vec<&str> = provider_keys
        .lines()
        .filter_map(|l| l.split('=').next())
        .map(str::trim)
        .collect();
    let mut config: String = BASE_CONFIG
        .lines()
        .filter(|l| !keys.contains(&l.split('=').next().unwrap_or("").trim()))
        .map(|l| format!("{l}\n"))
        .collect();
    // BASE_CONFIG ends inside [provider]: these keys join it.
    config.push_str(provider_keys);
    config.push('\n');
    p.write("cadre.toml", &config);
    p
}

#[test]
fn an_endless_stream_of_deltas_stops_at_max_response_bytes() {
    let p = project("max_response_bytes = 1048576\nmax_retries = 0");
    let server = FakeServer::start([Reply::endless_sse(
        &anthropic::text_stream_head(),
        anthropic::text_delta("0123456789").to_bytes(),
    )]);
    let run = p.run(Some(&server), &["run", "--output-format", "json", "hi"]);
    let msg = failed_with(&run);
    assert!(msg.contains("provider.max_response_bytes (1 MiB)"), "{msg}");
    assert_eq!(server.request_count(), 1, "a limit is not retried");
}

#[test]
fn many_small_deltas_stop_at_max_message_bytes() {
    let p = project("max_message_bytes = 65536");
    let server = FakeServer::start([Reply::endless_sse(
        &anthropic::text_stream_head(),
        anthropic::text_delta(&"x".repeat(1000)).to_bytes(),
    )]);
    let run = p.run(Some(&server), &["run", "--output-format", "json", "hi"]);
    let msg = failed_with(&run);
    assert!(msg.contains("provider.max_message_bytes"), "{msg}");
}

#[test]
fn one_oversized_event_stops_at_max_event_bytes() {
    let p = project("max_event_bytes = 1048576");
    let mut events = anthropic::text_stream_head();
    events.push(anthropic::text_delta(&"y".repeat(2 * 1024 * 1024)));
    let server = FakeServer::start([Reply::Sse(events)]);
    let run = p.run(Some(&server), &["run", "--output-format", "json", "hi"]);
    let msg = failed_with(&run);
    assert!(msg.contains("provider.max_event_bytes (1 MiB)"), "{msg}");
}

#[test]
fn a_data_line_that_never_ends_stops_at_max_event_bytes() {
    let p = project("max_event_bytes = 1048576");
    let mut head = anthropic::text_stream_head();
    head.push(SseEvent::named("content_block_delta", "{}"));
    let mut reply = Reply::endless_sse(&head, b"zzzzzzzzzzzzzzzz".repeat(64));
    if let Reply::Endless { head, .. } = &mut reply {
        head.extend_from_slice(b"event: content_block_delta\ndata: ");
    }
    let server = FakeServer::start([reply]);
    let run = p.run(Some(&server), &["run", "--output-format", "json", "hi"]);
    let msg = failed_with(&run);
    assert!(msg.contains("provider.max_event_bytes"), "{msg}");
}

#[test]
fn a_line_that_trickles_in_without_ending_is_not_progress() {
    let p = project("idle_timeout_ms = 400\nmax_retries = 0");
    let mut reply = Reply::endless_sse(&anthropic::text_stream_head(), b"x".to_vec())
        .every(Duration::from_millis(20));
    if let Reply::Endless { head, .. } = &mut reply {
        head.extend_from_slice(b"data: ");
    }
    let server = FakeServer::start([reply]);
    let run = p.run(Some(&server), &["run", "--output-format", "json", "hi"]);
    let msg = failed_with(&run);
    assert!(msg.contains("sent no complete event for 400 ms"), "{msg}");
}

#[test]
fn pings_alone_do_not_keep_a_stream_alive() {
    let p = project("idle_timeout_ms = 400\nmax_retries = 1");
    let pings = || {
        Reply::endless_sse(&anthropic::text_stream_head(), anthropic::ping().to_bytes())
            .every(Duration::from_millis(20))
    };
    let server = FakeServer::start([pings(), pings()]);
    let run = p.run(Some(&server), &["run", "--output-format", "json", "hi"]);
    let msg = failed_with(&run);
    assert!(msg.contains("only pings for 400 ms"), "{msg}");
    assert!(msg.contains("gave up after 2 attempts"), "{msg}");
    assert_eq!(server.request_count(), 2, "an idle stream is retried");
}

#[test]
fn an_html_page_with_200_says_what_came_back() {
    let p = Project::new();
    let server = FakeServer::start([Reply::html(
        "<!DOCTYPE html><html><body>Sign in to the corporate proxy</body></html>",
    )]);
    let run = p.run(Some(&server), &["run", "--output-format", "json", "hi"]);
    let msg = failed_with(&run);
    assert!(
        msg.contains("content-type `text/html; charset=utf-8`"),
        "{msg}"
    );
    assert!(msg.contains("<!DOCTYPE html><html>"), "{msg}");
    assert!(msg.contains("not an event stream"), "{msg}");
    assert_eq!(server.request_count(), 1, "not retried");
}

#[test]
fn an_endless_error_body_is_read_only_up_to_its_limit() {
    let p = project("max_error_body_bytes = 1024\nmax_retries = 1");
    let endless_500 = || Reply::Endless {
        code: 500,
        content_type: "text/plain".to_string(),
        head: b"upstream exploded: ".to_vec(),
        chunk: b"e".repeat(64 * 1024),
        every: Duration::ZERO,
    };
    let server = FakeServer::start([endless_500(), endless_500()]);
    let run = p.run(Some(&server), &["run", "--output-format", "json", "hi"]);
    let msg = failed_with(&run);
    assert!(msg.contains("500: upstream exploded: eee"), "{msg}");
    assert!(
        msg.len() < 2_000,
        "the error is clipped: {} bytes",
        msg.len()
    );
    assert!(msg.contains("gave up after 2 attempts in"), "{msg}");
}

#[test]
fn the_retry_budget_ends_a_request_before_a_long_wait() {
    let p = project("retry_budget_ms = 500\nmax_retries = 5");
    let server = FakeServer::route(|_| {
        Reply::anthropic_error(529, "overloaded_error", "Overloaded")
            .with_header("retry-after", "2")
    });
    let run = p.run(Some(&server), &["run", "--output-format", "json", "hi"]);
    let msg = failed_with(&run);
    assert_eq!(
        server.request_count(),
        1,
        "a 2 s wait does not fit in 500 ms"
    );
    assert!(msg.contains("Overloaded"), "{msg}");
    assert!(msg.contains("gave up after 1 attempt in"), "{msg}");
    assert!(msg.contains("provider.retry_budget_ms (500 ms)"), "{msg}");
}

fn cut_reply(text: &str) -> Reply {
    anthropic::message()
        .text(text)
        .stop_reason("max_tokens")
        .reply()
}

#[test]
fn an_answer_cut_at_max_tokens_is_continued() {
    let p = Project::new();
    let server = FakeServer::start([
        cut_reply("The first half of a long"),
        anthropic::text_reply(" answer, finished."),
    ]);
    let run = p.run(Some(&server), &["run", "--output-format", "json", "hi"]);
    run.ok();
    let v = run.json();
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["result"], " answer, finished.");
    let second = server.request(1);
    assert!(
        second
            .last_user_text()
            .contains("output limit of 1024 tokens"),
        "{}",
        second.last_user_text()
    );
    let lines = p.transcript_lines();
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "stop_reason" && l["stop_reason"] == "max_tokens"),
        "the transcript records the cut"
    );
}

#[test]
fn answers_cut_again_and_again_stop_with_max_tokens() {
    let p = project("max_tokens_recoveries = 1");
    let server = FakeServer::start([cut_reply("cut once"), cut_reply("cut twice")]);
    let run = p.run(Some(&server), &["run", "--output-format", "json", "hi"]);
    run.ok();
    let v = run.json();
    assert_eq!(v["stop_reason"], "max_tokens", "{v}");
    assert_eq!(v["result"], "cut twice");
    assert_eq!(server.request_count(), 2);
    assert!(
        run.stderr.contains("cut at provider.max_tokens"),
        "{}",
        run.stderr
    );
}

fn mkfifo(path: &std::path::Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn file_tools_refuse_fifos_and_devices_even_through_symlinks() {
    let p = Project::new();
    mkfifo(&p.path().join("pipe"));
    std::os::unix::fs::symlink("/dev/zero", p.path().join("zero")).unwrap();
    let server = FakeServer::start([
        anthropic::message()
            .tool_use("t1", "Read", json!({"file_path": "pipe"}))
            .tool_use(
                "t2",
                "Edit",
                json!({"file_path": "zero", "old_string": "a", "new_string": "b"}),
            )
            .tool_use("t3", "Write", json!({"file_path": "pipe", "content": "x"}))
            .tool_use("t4", "Grep", json!({"pattern": "x", "path": "zero"}))
            .reply(),
        anthropic::text_reply("done"),
    ]);
    let run = p.run(
        Some(&server),
        &[
            "run",
            "--permission-mode",
            "bypassPermissions",
            "--output-format",
            "json",
            "go",
        ],
    );
    run.ok();
    let results: Vec<Value> = last_tool_results(&server.request(1).json);
    let texts: Vec<String> = results.iter().map(result_text).collect();
    assert_eq!(results.len(), 4, "{texts:?}");
    for r in &results {
        assert_eq!(r["is_error"], true, "{r}");
    }
    let pipe = p.path().join("pipe").display().to_string();
    let zero = p.path().join("zero").display().to_string();
    assert_eq!(
        texts[0],
        format!(
            "{pipe} is a named pipe (FIFO), not a regular file. Read only works on regular files, so it was left alone."
        )
    );
    assert!(
        texts[1].starts_with(&format!("{zero} is a character device")),
        "{}",
        texts[1]
    );
    assert!(
        texts[2].contains("Write only works on regular files"),
        "{}",
        texts[2]
    );
}
