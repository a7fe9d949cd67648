//! `cadre run` end to end against the fake Anthropic server: the tool loop,
//! built-in tools, permissions, provider failures, output formats and
//! transcripts.

use serde_json::json;

use super::harness::{Project, last_tool_results, result_text, tool_names};
use super::kit::{FakeServer, Reply, SseEvent, TEST_KEY, anthropic};

#[test]
fn read_round_trip_answers_with_the_file() {
    let p = Project::new();
    let file = p.write("notes.txt", "alpha\nbeta\n");
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_1",
            "Read",
            json!({"file_path": file.to_str().unwrap()}),
        ),
        anthropic::text_reply("The file says alpha and beta."),
    ]);
    let run = p.run(Some(&server), &["run", "what is in notes.txt?"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "The file says alpha and beta.");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let first = &reqs[0].json;
    assert_eq!(first["model"], "claude-sonnet-4-5");
    assert_eq!(
        first["messages"][0]["content"][0]["text"],
        "what is in notes.txt?"
    );
    assert!(
        first["system"][0]["text"]
            .as_str()
            .unwrap()
            .contains("<env>")
    );
    for t in ["Agent", "Bash", "Edit", "Glob", "Grep", "Read", "Write"] {
        assert!(
            tool_names(first).contains(&t.to_string()),
            "{t} missing from {:?}",
            tool_names(first)
        );
    }
    let results = last_tool_results(&reqs[1].json);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["tool_use_id"], "toolu_1");
    let text = result_text(&results[0]);
    assert!(text.contains("alpha") && text.contains("beta"), "{text}");
    assert!(results[0].get("is_error").is_none());
}

#[test]
fn bash_needs_permission_in_default_mode_and_runs_when_allowed() {
    let mut p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Bash", json!({"command": "echo from-bash"})),
        anthropic::text_reply("denied"),
    ]);
    p.run(Some(&server), &["run", "say hi"]).ok();
    let denied = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(denied["is_error"], true);
    let text = result_text(denied);
    assert!(
        text.contains("permission mode 'default'") && text.contains("non-interactive"),
        "{text}"
    );

    p.config("[permissions]\nallow = [\"Bash(echo:*)\"]\n");
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Bash", json!({"command": "echo from-bash"})),
        anthropic::text_reply("ran"),
    ]);
    p.run(Some(&server), &["run", "say hi"]).ok();
    let ran = &last_tool_results(&server.request(1).json)[0];
    assert!(ran.get("is_error").is_none(), "{ran}");
    assert!(result_text(ran).contains("from-bash"));
}

#[test]
fn edit_changes_the_file_in_accept_edits_mode() {
    let p = Project::new();
    let file = p.write("src/lib.rs", "fn old() {}\n");
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_1",
            "Edit",
            json!({"file_path": "src/lib.rs", "old_string": "old", "new_string": "new"}),
        ),
        anthropic::text_reply("renamed"),
    ]);
    p.run(
        Some(&server),
        &["run", "--permission-mode", "acceptEdits", "rename"],
    )
    .ok();
    assert_eq!(std::fs::read_to_string(file).unwrap(), "fn new() {}\n");
    assert!(
        last_tool_results(&server.request(1).json)[0]
            .get("is_error")
            .is_none()
    );
}

#[test]
fn deny_rules_win_even_when_bypassing_permissions() {
    let mut p = Project::new();
    p.config("[permissions]\ndeny = [\"Bash(rm:*)\"]\n");
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Bash", json!({"command": "rm -rf important"})),
        anthropic::text_reply("ok"),
    ]);
    p.write("important/keep.txt", "x");
    p.run(
        Some(&server),
        &["run", "--permission-mode", "bypassPermissions", "clean"],
    )
    .ok();
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true);
    assert!(result_text(r).contains("Bash(rm:*)"), "{r}");
    assert!(p.path().join("important/keep.txt").exists());
}

#[test]
fn overloaded_then_success_is_retried() {
    let p = Project::new();
    let server = FakeServer::start([
        Reply::anthropic_error(529, "overloaded_error", "Overloaded"),
        anthropic::text_reply("fine"),
    ]);
    let run = p.run(Some(&server), &["run", "hi"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "fine");
    assert_eq!(server.request_count(), 2);
}

#[test]
fn bad_request_fails_at_once_with_the_providers_message() {
    let p = Project::new();
    let server = FakeServer::start([Reply::anthropic_error(
        400,
        "invalid_request_error",
        "prompt is too long",
    )]);
    let run = p.run(Some(&server), &["run", "hi"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("prompt is too long"), "{}", run.stderr);
    assert_eq!(server.request_count(), 1);
}

#[test]
fn a_stream_cut_mid_message_is_retried_whole() {
    let p = Project::new();
    let events = anthropic::message().text("a long answer").events();
    let server = FakeServer::start([
        Reply::CutAfter {
            events: events.clone(),
            n: 3,
        },
        anthropic::text_reply("complete"),
    ]);
    let run = p.run(Some(&server), &["run", "hi"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "complete");
    assert_eq!(server.request_count(), 2);
}

#[test]
fn malformed_sse_is_a_clear_error() {
    let p = Project::new();
    let bad = Reply::Sse(vec![SseEvent::named("message_start", "{not json")]);
    let server = FakeServer::start([bad.clone(), bad.clone(), bad]);
    let run = p.run(Some(&server), &["run", "hi"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("message_start"),
        "the error names the event: {}",
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

#[test]
fn a_hallucinated_tool_gets_an_error_result_and_the_loop_goes_on() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Teleport", json!({"to": "mars"})),
        anthropic::text_reply("sorry"),
    ]);
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "sorry");
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true);
    assert!(result_text(r).contains("No such tool available: Teleport"));
}

#[test]
fn invalid_tool_input_is_rejected_before_the_tool_runs() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Read", json!({"path": "x"})),
        anthropic::message()
            .tool_use_raw("toolu_2", "Read", "{\"file_path\": ")
            .reply(),
        anthropic::text_reply("ok"),
    ]);
    p.run(Some(&server), &["run", "go"]).ok();
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true);
    assert!(
        result_text(r).contains("file_path"),
        "names the missing field: {r}"
    );
    let r = &last_tool_results(&server.request(2).json)[0];
    assert_eq!(r["is_error"], true);
    assert!(result_text(r).contains("not valid JSON"), "{r}");
}

#[test]
fn max_turns_stops_the_loop() {
    let p = Project::new();
    let server = FakeServer::route(|_| {
        anthropic::tool_use_reply("toolu_x", "Glob", json!({"pattern": "*.none"}))
    });
    let run = p.run(
        Some(&server),
        &["run", "--max-turns", "2", "--output-format", "json", "loop"],
    );
    assert_eq!(run.code, 1, "the turn limit is an error result: {run:?}");
    assert_eq!(server.request_count(), 2);
    let v = run.json();
    assert_eq!(v["num_turns"], 2);
    assert_eq!(v["subtype"], "error_max_turns");
    assert_eq!(v["is_error"], true);
}

#[test]
fn chat_counts_max_turns_per_prompt() {
    let p = Project::new();
    let server =
        FakeServer::route(|r| anthropic::text_reply(&format!("re: {}", r.last_user_text())));
    let stdout = super::sessions::chat(&p, &server, &["--max-turns", "1"], "first\nsecond\n");
    // Each prompt gets its own turn: the second is answered too.
    assert_eq!(server.request_count(), 2, "{stdout}");
    assert!(stdout.contains("re: second"), "{stdout}");
}

#[test]
fn json_output_has_the_documented_fields_and_counts_usage() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::message()
        .text("done")
        .usage(100, 7)
        .cache(20, 30)
        .reply()]);
    let v = p
        .run(Some(&server), &["run", "--output-format", "json", "hi"])
        .ok()
        .json();
    assert_eq!(v["result"], "done");
    assert_eq!(v["is_error"], false);
    assert_eq!(v["num_turns"], 1);
    assert_eq!(v["usage"]["input_tokens"], 100);
    assert_eq!(v["usage"]["output_tokens"], 7);
    assert_eq!(v["usage"]["cache_creation_input_tokens"], 20);
    assert_eq!(v["usage"]["cache_read_input_tokens"], 30);
    assert!(v["duration_ms"].is_u64());
    assert!(v["session_id"].as_str().is_some_and(|s| !s.is_empty()));
}

#[test]
fn stream_json_prints_events_as_they_happen_then_the_result() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Glob", json!({"pattern": "*.txt"})),
        anthropic::text_reply("none found"),
    ]);
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "find"],
    );
    run.ok();
    let lines = run.json_lines();
    let types: Vec<&str> = lines.iter().filter_map(|l| l["type"].as_str()).collect();
    // Claude Code's stream-json: the tool call, its result, the answer, the result.
    assert_eq!(
        types,
        ["assistant", "user", "assistant", "result"],
        "{lines:#?}"
    );
    assert_eq!(lines[0]["message"]["content"][0]["type"], "tool_use");
    assert_eq!(lines[0]["message"]["content"][0]["name"], "Glob");
    assert_eq!(lines[1]["message"]["content"][0]["type"], "tool_result");
    assert_eq!(lines[1]["message"]["content"][0]["tool_use_id"], "toolu_1");
    assert!(
        lines
            .iter()
            .take(3)
            .all(|l| l["parent_tool_use_id"].is_null())
    );
    assert_eq!(lines[3]["subtype"], "success");
    assert_eq!(lines[3]["result"], "none found");
    assert_eq!(lines[3]["num_turns"], 2);
}

#[test]
fn transcripts_are_valid_jsonl_and_never_hold_the_key() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Glob", json!({"pattern": "*"})),
        anthropic::text_reply("done"),
    ]);
    p.run(Some(&server), &["run", "hi"]).ok();
    let files = p.written_files();
    assert!(
        files
            .iter()
            .any(|(path, _)| path.extension().is_some_and(|e| e == "jsonl")),
        "{files:?}"
    );
    for (path, text) in &files {
        assert!(
            !text.contains(TEST_KEY),
            "{} holds the API key",
            path.display()
        );
    }
    let lines = p.transcript_lines();
    let messages: Vec<_> = lines
        .iter()
        .filter(|l| (l["type"] == "user" || l["type"] == "assistant") && l["joined"] != true)
        .collect();
    assert_eq!(messages.len(), 4, "prompt, tool_use, tool_result, answer");
    assert!(
        lines
            .iter()
            .all(|l| l["agent_id"] == "main" && l["timestamp"].is_string())
    );
}

#[test]
fn render_prints_the_first_request_without_sending_it() {
    let p = Project::new();
    let server = FakeServer::start([]);
    let v = p
        .run(Some(&server), &["render", "plan the work"])
        .ok()
        .json();
    assert_eq!(server.request_count(), 0);
    assert_eq!(v["model"], "claude-sonnet-4-5");
    assert_eq!(v["stream"], true);
    assert_eq!(v["messages"][0]["content"][0]["text"], "plan the work");
    assert_eq!(v["system"][0]["cache_control"]["type"], "ephemeral");
    assert!(p.written_files().is_empty(), "render writes no transcript");
}

/// `cadre run` without a prompt argument, fed `write` on stdin by a
/// thread of its own; the output once it has exited.
fn run_on_stdin(
    p: &Project,
    server: &FakeServer,
    write: impl FnOnce(&mut std::process::ChildStdin) + Send + 'static,
) -> std::process::Output {
    let mut child = p
        .command(Some(server))
        .args(["run"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || write(&mut stdin));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

#[test]
fn prompt_is_read_from_stdin_when_absent() {
    use std::io::Write;
    let p = Project::new();
    let server = FakeServer::start([anthropic::text_reply("got it")]);
    let out = run_on_stdin(&p, &server, |stdin| {
        stdin.write_all(b"from stdin").unwrap();
    });
    assert!(out.status.success());
    assert_eq!(
        server.request(0).json["messages"][0]["content"][0]["text"],
        "from stdin"
    );
}

/// Without a bound, an endless stdin was read until memory ran out.
#[test]
fn a_prompt_on_stdin_over_the_limit_is_refused_unread() {
    use std::io::Write;
    let p = Project::new();
    let server = FakeServer::start([anthropic::text_reply("got it")]);
    let out = run_on_stdin(&p, &server, |stdin| {
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..64 {
            stdin.write_all(&chunk).unwrap();
        }
        // One byte over; a closed pipe after it is fine.
        let _ = stdin.write_all(b"x");
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the prompt on stdin is longer than 67108864 bytes"),
        "{stderr}"
    );
    assert_eq!(server.request_count(), 0);
}

#[test]
fn missing_key_is_a_clear_configuration_error_without_a_request() {
    let p = Project::new();
    let server = FakeServer::start([]);
    let run = p
        .command(None)
        .env("ANTHROPIC_BASE_URL", server.url())
        .args(["run", "hi"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(
        run.status.code(),
        Some(2),
        "a missing key is a configuration error"
    );
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
    assert_eq!(server.request_count(), 0);
}

#[test]
fn openai_compatible_servers_work_through_the_binary() {
    use super::kit::openai;
    let mut p = Project::new();
    let server = FakeServer::start([
        openai::tool_call_reply("call_1", "Glob", json!({"pattern": "*.md"})),
        openai::text_reply("no markdown here"),
    ]);
    // Through the environment layer, which must win over the file's [provider].
    p.env("CADRE_PROVIDER__KIND", "openai")
        .env("CADRE_PROVIDER__BASE_URL", server.url());
    let run = p.run(None, &["run", "--model", "local-model", "find docs"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "no markdown here");
    let second = &server.request(1);
    assert_eq!(second.path, "/v1/chat/completions");
    assert!(
        second.header("authorization").is_none(),
        "no key, no Authorization header"
    );
    let msgs = second.json["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["role"], "system");
    let tool_msg = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool_msg["tool_call_id"], "call_1");
}

#[test]
fn chat_keeps_one_conversation_across_prompts() {
    use std::io::Write;
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::text_reply("first answer"),
        anthropic::text_reply("second answer"),
    ]);
    let mut child = p
        .command(Some(&server))
        .args(["chat"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello\nand then?\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("first answer") && stdout.contains("second answer"),
        "streamed text: {stdout}"
    );
    let second = server.request(1);
    let msgs = second.messages();
    assert_eq!(msgs.len(), 3, "prompt, answer, prompt");
    assert_eq!(msgs[0]["content"][0]["text"], "hello");
    assert_eq!(msgs[2]["content"][0]["text"], "and then?");
    // chat is interactive: the fork gate does not block there.
    let agent = second.json["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Agent")
        .unwrap()
        .clone();
    assert!(
        agent["input_schema"]["properties"].get("fork").is_none(),
        "still off by default"
    );
}
