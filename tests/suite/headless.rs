//! `cadre -p` and the Agent SDK's protocol, through the binary and the fake
//! server: Claude Code's flags, stream-json output and input, the control
//! protocol, cost and the budget stop.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{Project, is_main_session, last_tool_results, result_text, tool_names};
use super::kit::{FakeServer, RecordedRequest, Reply, anthropic, wire_schema};

fn types(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| match l["subtype"].as_str() {
            Some(s) if l["type"] == "system" => format!("system/{s}"),
            _ => l["type"].as_str().unwrap_or("?").to_string(),
        })
        .collect()
}

#[test]
fn print_mode_answers_in_text() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::text_reply("Paris")]);
    let run = p.run(Some(&server), &["-p", "capital of France?"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "Paris");
    assert_eq!(server.request(0).last_user_text(), "capital of France?");
}

#[test]
fn json_output_is_one_result_object_with_cost() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::message()
        .text("four")
        .usage(1_000_000, 100_000)
        .reply()]);
    let run = p.run(Some(&server), &["-p", "2+2", "--output-format", "json"]);
    run.ok();
    let v = run.json();
    assert_eq!(v["type"], "result");
    assert_eq!(v["subtype"], "success");
    assert_eq!(v["is_error"], false);
    assert_eq!(v["result"], "four");
    assert_eq!(v["num_turns"], 1);
    assert_eq!(v["usage"]["input_tokens"], 1_000_000);
    assert!(v["duration_ms"].is_u64() && v["duration_api_ms"].is_u64());
    // claude-sonnet-4-5 at $3 / $15 per million: 3 + 1.5.
    let cost = v["total_cost_usd"].as_f64().unwrap();
    assert!((cost - 4.5).abs() < 1e-6, "{cost}");
    assert!(
        (v["modelUsage"]["claude-sonnet-4-5"]["costUSD"]
            .as_f64()
            .unwrap()
            - 4.5)
            .abs()
            < 1e-6
    );
    assert!(v["session_id"].as_str().is_some_and(|s| !s.is_empty()));
}

#[test]
fn stream_json_starts_with_init_and_ends_with_result() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Glob", json!({"pattern": "*.txt"})),
        anthropic::text_reply("none found"),
    ]);
    let run = p.run(
        Some(&server),
        &["-p", "find", "--output-format", "stream-json", "--verbose"],
    );
    run.ok();
    let lines = run.json_lines();
    assert_eq!(
        types(&lines),
        ["system/init", "assistant", "user", "assistant", "result"],
        "{lines:#?}"
    );
    let init = &lines[0];
    assert_eq!(init["model"], "claude-sonnet-4-5");
    assert_eq!(init["permissionMode"], "default");
    assert!(
        init["claude_code_version"]
            .as_str()
            .unwrap()
            .starts_with("2.")
    );
    assert!(
        init["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "Read")
    );
    assert!(
        init["agents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "general-purpose")
    );
    assert_eq!(
        init["cwd"],
        p.path().canonicalize().unwrap().display().to_string()
    );
    let sid = init["session_id"].as_str().unwrap();
    assert!(lines.iter().all(|l| l["session_id"] == sid));
    assert_eq!(lines[1]["message"]["model"], "claude-sonnet-4-5");
    assert_eq!(lines[1]["message"]["stop_reason"], "tool_use");
    assert_eq!(lines[1]["message"]["usage"]["output_tokens"], 5);
    assert_eq!(lines[2]["message"]["content"][0]["tool_use_id"], "toolu_1");
    assert_eq!(lines[4]["result"], "none found");
    assert_eq!(lines[4]["num_turns"], 2);
}

#[test]
fn partial_messages_stream_text_deltas_before_the_message() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::text_reply("hello there")]);
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "hi",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
        ],
    );
    run.ok();
    let lines = run.json_lines();
    let events: Vec<&str> = lines
        .iter()
        .filter(|l| l["type"] == "stream_event")
        .map(|l| l["event"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(events.first(), Some(&"message_start"));
    assert_eq!(events.last(), Some(&"message_stop"));
    let text: String = lines
        .iter()
        .filter(|l| l["event"]["type"] == "content_block_delta")
        .map(|l| l["event"]["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "hello there");
    // As Claude Code: each block is its own `assistant` message as soon
    // as it ends, before its `content_block_stop`; the stream ends with
    // the message's `message_delta` and `message_stop`.
    let kinds: Vec<String> = lines
        .iter()
        .filter(|l| l["type"] == "stream_event" || l["type"] == "assistant")
        .map(|l| match l["type"].as_str() {
            Some("assistant") => "assistant".to_string(),
            _ => l["event"]["type"].as_str().unwrap().to_string(),
        })
        .collect();
    assert_eq!(
        kinds[kinds.len() - 4..],
        [
            "assistant",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let assistant = lines.iter().find(|l| l["type"] == "assistant").unwrap();
    assert_eq!(
        assistant["message"]["content"],
        json!([{"type": "text", "text": "hello there"}])
    );
    // Its id is the one every partial of the message names.
    let id = &assistant["message"]["id"];
    assert!(
        lines
            .iter()
            .filter(|l| l["type"] == "stream_event")
            .all(|l| &l["api_message_id"] == id),
        "{lines:?}"
    );
    let result = lines.iter().find(|l| l["type"] == "result").unwrap();
    assert_eq!(result["begun_message_ids"], json!([id]));
    // Without the flag, no partials.
    let server = FakeServer::start([anthropic::text_reply("x")]);
    let run = p.run(
        Some(&server),
        &["-p", "hi", "--output-format", "stream-json"],
    );
    assert!(!run.stdout.contains("stream_event"));
}

/// The main session delegates to a named agent, which reads a file.
fn delegating_server() -> FakeServer {
    FakeServer::route(|r| {
        if is_main_session(r) {
            return match super::harness::assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_agent",
                    "Agent",
                    json!({"description": "read it", "prompt": "read notes.txt", "subagent_type": "reader"}),
                ),
                _ => anthropic::text_reply("main done"),
            };
        }
        match super::harness::assistant_turns(r) {
            0 => anthropic::tool_use_reply("toolu_read", "Read", json!({"file_path": "notes.txt"})),
            _ => anthropic::text_reply("notes say hi"),
        }
    })
}

const READER: &str =
    "---\nname: reader\ndescription: Reads files\ntools: Read\n---\nYou read files.\n";

#[test]
fn sub_agent_messages_carry_the_agent_calls_id() {
    let p = Project::new();
    p.write(".claude/agents/reader.md", READER);
    p.write("notes.txt", "hi");
    let server = delegating_server();
    let run = p.run(
        Some(&server),
        &["-p", "go", "--output-format", "stream-json", "--verbose"],
    );
    run.ok();
    let lines = run.json_lines();
    let child: Vec<&Value> = lines
        .iter()
        .filter(|l| l["parent_tool_use_id"] == "toolu_agent")
        .collect();
    let kinds: Vec<&str> = child.iter().map(|l| l["type"].as_str().unwrap()).collect();
    // Its task, its Read call and the call's result; its answer in text
    // stays in it, as in Claude Code (the SDKs' forwardSubagentText is
    // off). Its user messages say which sub-agent they are from.
    assert_eq!(kinds, ["user", "assistant", "user"], "{lines:#?}");
    assert_eq!(child[0]["message"]["content"][0]["text"], "read notes.txt");
    assert_eq!(child[1]["message"]["content"][0]["name"], "Read");
    for user in [child[0], child[2]] {
        assert!(user["agent_id"].is_string(), "{user}");
        assert_eq!(user["subagent_type"], "reader");
        assert_eq!(user["task_description"], "read it");
    }
    let start = lines
        .iter()
        .find(|l| l["type"] == "subagent_start")
        .unwrap();
    assert_eq!(start["tool_use_id"], "toolu_agent");
    assert_eq!(start["agent_type"], "reader");
    // Claude Code's task messages too, for the SDKs' typed task events.
    let task = |subtype: &str| {
        lines
            .iter()
            .find(|l| l["type"] == "system" && l["subtype"] == subtype)
            .unwrap_or_else(|| panic!("no system/{subtype}: {lines:#?}"))
    };
    let started = task("task_started");
    assert_eq!(started["task_id"], start["agent_id"]);
    assert_eq!(child[0]["agent_id"], start["agent_id"]);
    assert_eq!(started["prompt"], "read notes.txt");
    assert_eq!(started["is_backgrounded"], false);
    assert_eq!(started["spawn_depth"], 1);
    assert_eq!(started["tool_use_id"], "toolu_agent");
    assert_eq!(started["subagent_type"], "reader");
    let done = task("task_notification");
    assert_eq!(done["task_id"], start["agent_id"]);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["tool_use_id"], "toolu_agent");
    assert_eq!(done["usage"]["tool_uses"], 1);
    // Its last words, which the SDKs read (as they read `output_file`).
    assert_eq!(done["summary"], "notes say hi");
    assert_eq!(done["output_file"], "");
    assert_eq!(task("task_updated")["patch"]["status"], "completed");
    // One run: the same run id on its three task events.
    assert!(
        started["run_id"].as_str().is_some_and(|r| !r.is_empty()),
        "{started}"
    );
    assert_eq!(done["run_id"], started["run_id"]);
    assert_eq!(task("task_updated")["run_id"], started["run_id"]);
    // The main session's result for the Agent call comes back unparented.
    assert!(lines.iter().any(|l| l["type"] == "user"
        && l["parent_tool_use_id"].is_null()
        && l["message"]["content"][0]["tool_use_id"] == "toolu_agent"));
    let result = lines.last().unwrap();
    assert_eq!(result["result"], "main done");
    assert_eq!(result["num_turns"], 2);
    // Claude Code's count of the session's sub-agents.
    let stats = &result["subagent_stats"];
    assert_eq!(stats["spawned"], 1, "{result:#}");
    assert_eq!(stats["completed"], 1);
    assert_eq!(stats["failed"], 0);
    assert_eq!(stats["max_depth"], 1);
    assert_eq!(
        stats["requested"],
        json!({"background": 0, "foreground": 0, "unset": 1})
    );
    assert_eq!(stats["by_type"], json!({"reader": 1}));

    // With forwardSubagentText in `initialize`, its text goes out too.
    let mut d = Driven::start(&p, &server, &[]);
    d.send(json!({"type": "control_request", "request_id": "req_init",
                  "request": {"subtype": "initialize", "forwardSubagentText": true}}));
    d.user("go");
    d.until("result", is_result);
    let child: Vec<&Value> = d
        .seen
        .iter()
        .filter(|l| l["parent_tool_use_id"] == "toolu_agent")
        .collect();
    assert_eq!(child.len(), 4, "{:#?}", d.seen);
    assert_eq!(child[3]["message"]["content"][0]["text"], "notes say hi");
    d.finish();
}

/// Each result numbers itself, and reports the API's usage details: the
/// cache writes split by lifetime, per model with the window and the
/// output cap cadre asked for, and what the prompt alone counted.
#[test]
fn results_number_themselves_and_carry_the_usage_details() {
    let p = Project::new();
    let server = FakeServer::route(|_| {
        anthropic::message()
            .text("ok")
            .usage(100, 7)
            .cache(30, 0)
            .cache_split(10, 20)
            .reply()
    });
    let mut d = Driven::start(&p, &server, &[]);
    d.user("one");
    let first = d.until("result", is_result);
    d.user("two");
    let second = d.until("result", is_result);
    // Messages carry when they were sent.
    let answer = d.seen.iter().find(|l| l["type"] == "assistant").unwrap();
    let stamp = answer["timestamp"].as_str().unwrap_or_default();
    assert!(stamp.ends_with('Z') && stamp.contains('T'), "{answer:#}");
    d.finish();
    assert_eq!(first["result_index"], 0, "{first:#}");
    assert_eq!(second["result_index"], 1);
    assert_eq!(first["queued_turn_count"], 0);
    assert_eq!(
        second["usage"]["cache_creation"],
        json!({"ephemeral_1h_input_tokens": 20, "ephemeral_5m_input_tokens": 10})
    );
    let models = second["modelUsage"].as_object().unwrap();
    assert_eq!(models.len(), 1, "{second:#}");
    let (model, m) = models.iter().next().unwrap();
    assert_eq!(m["inputTokens"], 200, "the session so far");
    assert_eq!(m["cacheCreationEphemeral5mInputTokens"], 20);
    assert_eq!(m["cacheCreationEphemeral1hInputTokens"], 40);
    assert_eq!(m["contextWindow"], 200_000);
    assert_eq!(m["maxOutputTokens"], server.request(0).json["max_tokens"]);
    assert_eq!(m["provider"], "firstParty");
    assert_eq!(m["canonicalModel"], model.as_str());
    let since = &second["model_usage_since_last_result"][model.as_str()];
    assert_eq!(
        since["inputTokens"], 100,
        "the second prompt alone: {second:#}"
    );
    assert_eq!(since["cacheCreationEphemeral1hInputTokens"], 20);
}

#[test]
fn tool_flags_shape_the_tool_list_and_the_rules() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    p.run(
        Some(&server),
        &[
            "-p",
            "x",
            "--tools",
            "Read,Glob,Bash",
            "--disallowedTools",
            "Bash",
        ],
    )
    .ok();
    let names = tool_names(&server.request(0).json);
    assert_eq!(names, ["Glob", "Read"], "{names:?}");

    // A Bash rule from --allowedTools lets the command run without asking;
    // without it a non-interactive session denies it.
    let bash_then_done = || {
        FakeServer::start([
            anthropic::tool_use_reply(
                "toolu_b",
                "Bash",
                json!({"command": "echo hello-from-bash"}),
            ),
            anthropic::text_reply("done"),
        ])
    };
    let server = bash_then_done();
    p.run(
        Some(&server),
        &["-p", "x", "--allowed-tools", "Bash(echo:*)"],
    )
    .ok();
    let r = &last_tool_results(&server.request(1).json)[0];
    assert!(result_text(r).contains("hello-from-bash"), "{r}");
    let server = bash_then_done();
    p.run(Some(&server), &["-p", "x"]).ok();
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true, "{r}");

    // --settings brings permission rules too.
    let server = bash_then_done();
    p.run(
        Some(&server),
        &[
            "-p",
            "x",
            "--settings",
            r#"{"permissions": {"allow": ["Bash"]}, "theme": "dark"}"#,
        ],
    )
    .ok();
    let r = &last_tool_results(&server.request(1).json)[0];
    assert!(result_text(r).contains("hello-from-bash"), "{r}");
}

#[test]
fn system_prompt_flags_replace_and_append() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::text_reply("a"), anthropic::text_reply("b")]);
    p.run(
        Some(&server),
        &[
            "-p",
            "x",
            "--system-prompt",
            "You are a pirate.",
            "--append-system-prompt",
            "Say arr.",
        ],
    )
    .ok();
    let sys = server.request(0).system_text();
    assert!(sys.starts_with("You are a pirate."), "{sys}");
    assert!(sys.trim_end().ends_with("Say arr."), "{sys}");
    p.run(
        Some(&server),
        &["-p", "x", "--append-system-prompt", "Say arr."],
    )
    .ok();
    let sys = server.request(1).system_text();
    assert!(!sys.contains("pirate"));
    assert!(sys.trim_end().ends_with("Say arr."), "{sys}");
}

#[test]
fn max_turns_gives_error_max_turns_and_exit_1() {
    let p = Project::new();
    let server =
        FakeServer::route(|_| anthropic::tool_use_reply("t", "Glob", json!({"pattern": "*"})));
    let run = p.run(
        Some(&server),
        &["-p", "loop", "--max-turns", "2", "--output-format", "json"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let v = run.json();
    assert_eq!(v["subtype"], "error_max_turns");
    assert_eq!(v["is_error"], true);
    assert_eq!(v["num_turns"], 2);
    assert_eq!(server.request_count(), 2);
}

#[test]
fn a_failed_model_request_in_text_mode_prints_the_error_on_stdout() {
    let p = Project::new();
    let server = FakeServer::start([Reply::anthropic_error(
        401,
        "authentication_error",
        "invalid x-api-key",
    )]);
    let run = p.run(Some(&server), &["-p", "find"]);
    assert_eq!(run.code, 1, "{run:?}");
    // Claude Code prints the request's failure on stdout in text mode.
    assert!(
        run.stdout.contains("401") && run.stdout.contains("invalid x-api-key"),
        "{run:?}"
    );
}

#[test]
fn a_failed_model_request_ends_as_claude_codes_api_error() {
    let p = Project::new();
    // One tool turn, then the API refuses the key (not retried).
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Glob", json!({"pattern": "*"})),
        Reply::anthropic_error(401, "authentication_error", "invalid x-api-key"),
    ]);
    let run = p.run(
        Some(&server),
        &["-p", "find", "--output-format", "stream-json", "--verbose"],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let lines = run.json_lines();
    assert_eq!(
        types(&lines),
        ["system/init", "assistant", "user", "assistant", "result"],
        "{lines:#?}"
    );
    let said = &lines[3];
    assert_eq!(said["error"], "authentication_failed");
    assert_eq!(said["is_api_error_message"], true);
    assert_eq!(said["api_error_status"], 401);
    assert_eq!(said["message"]["model"], "<synthetic>");
    let r = &lines[4];
    assert_eq!(r["subtype"], "success");
    assert_eq!(r["is_error"], true);
    assert_eq!(r["terminal_reason"], "api_error");
    assert_eq!(r["api_error_status"], 401);
    assert_eq!(r["api_error_type"], "authentication_error");
    // The completed turn and the failed one.
    assert_eq!(r["num_turns"], 2);
    assert_eq!(said["message"]["content"][0]["text"], r["result"]);
    assert!(
        r["result"].as_str().unwrap().contains("invalid x-api-key"),
        "{r}"
    );
    assert!(r.get("errors").is_none(), "{r}");
    // A run that succeeds says so in Claude Code's words too.
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    let v = p
        .run(Some(&server), &["-p", "x", "--output-format", "json"])
        .json();
    assert_eq!(v["terminal_reason"], "completed");
    assert_eq!(v["api_error_status"], Value::Null);
}

/// The reminder cadre adds when structured output is answered in text
/// goes out as a `user` message marked `isSynthetic`, as Claude Code's.
#[test]
fn the_structured_output_reminder_is_sent_marked_synthetic() {
    let p = Project::new();
    let schema = json!({"type": "object", "properties": {"answer": {"type": "integer"}},
                        "required": ["answer"]});
    let server = FakeServer::start([
        anthropic::text_reply("it is 4"),
        structured_call("toolu_1", json!({"answer": 4})),
    ]);
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "2+2",
            "--output-format",
            "stream-json",
            "--verbose",
            "--json-schema",
            &schema.to_string(),
        ],
    );
    run.ok();
    let lines = run.json_lines();
    let synthetic: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "user" && l["isSynthetic"] == true)
        .collect();
    assert_eq!(synthetic.len(), 1, "{lines:#?}");
    assert!(
        synthetic[0]["message"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("MUST call the StructuredOutput tool")),
        "{}",
        synthetic[0]
    );
    // Tool results are not synthetic.
    assert!(
        lines
            .iter()
            .filter(|l| l["type"] == "user" && l != &synthetic[0])
            .all(|l| l.get("isSynthetic").is_none()),
        "{lines:#?}"
    );
}

/// A StructuredOutput call in a message of its own.
fn structured_call(id: &str, input: Value) -> Reply {
    anthropic::message()
        .id(&format!("msg_{id}"))
        .tool_use(id, "StructuredOutput", input)
        .reply()
}

#[test]
fn json_schema_offers_structured_output_checks_it_and_returns_it() {
    let p = Project::new();
    let schema = json!({"type": "object", "properties": {"answer": {"type": "integer"}},
                        "required": ["answer"]});
    let server = FakeServer::start([
        anthropic::text_reply("it is 4"),
        structured_call("toolu_1", json!({"answer": "four"})),
        structured_call("toolu_2", json!({"answer": 4})),
        anthropic::text_reply("never asked for"),
    ]);
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "2+2",
            "--output-format",
            "json",
            "--json-schema",
            &schema.to_string(),
        ],
    );
    run.ok();
    let v = run.json();
    assert_eq!(v["subtype"], "success", "{v}");
    assert_eq!(v["structured_output"], json!({"answer": 4}));
    assert_eq!(v["result"], r#"{"answer":4}"#);
    assert_eq!(v["stop_reason"], "tool_use");
    assert_eq!(
        v["num_turns"], 4,
        "three requests and the turn that ends the run"
    );
    // The run ends with the call that fits: no fourth request.
    assert_eq!(server.request_count(), 3);
    let offered = server.request(0).json["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "StructuredOutput")
        .cloned()
        .expect("StructuredOutput offered");
    assert_eq!(offered["input_schema"], schema);
    // A text answer is answered with a reminder to call the tool ...
    assert!(
        server
            .request(1)
            .last_user_text()
            .contains("MUST call the StructuredOutput tool"),
        "{}",
        server.request(1).last_user_text()
    );
    // ... and input that does not fit with an error naming the field.
    let second = last_tool_results(&server.request(2).json);
    assert_eq!(second[0]["is_error"], true);
    assert!(result_text(&second[0]).contains("/answer"), "{second:?}");

    // Input that never fits: five tries, then the error result.
    let server = FakeServer::route(|_| structured_call("toolu_x", json!({"answer": "x"})));
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "2+2",
            "--output-format",
            "json",
            "--json-schema",
            &schema.to_string(),
        ],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let v = run.json();
    assert_eq!(v["subtype"], "error_max_structured_output_retries", "{v}");
    assert_eq!(v["is_error"], true);
    assert_eq!(v["terminal_reason"], "structured_output_retry_exhausted");
    assert!(
        v["errors"][0]
            .as_str()
            .unwrap()
            .starts_with("Failed to provide valid structured output after 5 attempts"),
        "{v}"
    );
    assert_eq!(server.request_count(), 5);

    // A schema that is not JSON is a usage error naming the place.
    let run = p.run(Some(&server), &["-p", "x", "--json-schema", "{not json"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("--json-schema:1:2"), "{}", run.stderr);
}

#[test]
fn thinking_flags_set_the_budget_and_thinking_streams_and_stays_in_history() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::message()
            .thinking("look first", "sig-a")
            .tool_use("toolu_1", "Glob", json!({"pattern": "*"}))
            .reply(),
        anthropic::message()
            .id("msg_2")
            .thinking("none there", "sig-b")
            .text("nothing")
            .reply(),
    ]);
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "find",
            "--output-format",
            "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--max-thinking-tokens",
            "500",
        ],
    );
    run.ok();
    // (The test configuration's max_tokens is 1024: a budget fits under it.)
    assert_eq!(
        server.request(0).json["thinking"],
        json!({"type": "enabled", "budget_tokens": 500})
    );
    // The thinking block goes back to the model with its signature.
    let history = &server.request(1).json["messages"];
    let assistant = &history[history.as_array().unwrap().len() - 2];
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": "look first", "signature": "sig-a"})
    );
    let lines = run.json_lines();
    let deltas: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "stream_event" && l["event"]["type"] == "content_block_delta")
        .map(|l| &l["event"])
        .collect();
    // The first message's thinking, streamed in pieces at index 0, then
    // its signature.
    let first: Vec<&&Value> = deltas
        .iter()
        .take_while(|d| d["delta"]["type"] != "signature_delta")
        .collect();
    assert!(first.iter().all(|d| d["index"] == 0), "{deltas:#?}");
    let thought: String = first
        .iter()
        .filter_map(|d| d["delta"]["thinking"].as_str())
        .collect();
    assert_eq!(thought, "look first");
    assert_eq!(
        deltas[first.len()]["delta"],
        json!({"type": "signature_delta", "signature": "sig-a"})
    );
    // The text after the thinking is the message's second block.
    let text = deltas
        .iter()
        .find(|d| d["delta"]["type"] == "text_delta")
        .unwrap();
    assert_eq!(text["index"], 1);
    let starts: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"]["type"] == "content_block_start")
        .map(|l| &l["event"]["content_block"]["type"])
        .collect();
    assert_eq!(starts, ["thinking", "thinking", "text"], "{lines:#?}");
    // Each block is its own `assistant` message as it ends (Claude
    // Code's partial mode): the last thinking block with its signature,
    // then the text.
    let answers: Vec<&Value> = lines.iter().filter(|l| l["type"] == "assistant").collect();
    let thinking = answers[answers.len() - 2];
    assert_eq!(thinking["message"]["content"][0]["type"], "thinking");
    assert_eq!(thinking["message"]["content"][0]["signature"], "sig-b");
    assert_eq!(
        answers[answers.len() - 1]["message"]["content"][0]["type"],
        "text"
    );

    // MAX_THINKING_TOKENS sets it too; --thinking disabled turns it off
    // over it, as Claude Code says it.
    let server = FakeServer::start([anthropic::text_reply("a"), anthropic::text_reply("b")]);
    let mut cmd = p.command(Some(&server));
    cmd.env("MAX_THINKING_TOKENS", "700").args(["-p", "x"]);
    let run = super::harness::Run::from(cmd.output().unwrap());
    run.ok();
    assert_eq!(server.request(0).json["thinking"]["budget_tokens"], 700);
    let mut cmd = p.command(Some(&server));
    cmd.env("MAX_THINKING_TOKENS", "700")
        .args(["-p", "x", "--thinking", "disabled"]);
    super::harness::Run::from(cmd.output().unwrap()).ok();
    assert_eq!(
        server.request(1).json["thinking"],
        json!({"type": "disabled"})
    );
}

#[test]
fn set_max_thinking_tokens_applies_from_the_next_prompt() {
    let p = Project::new();
    let server = FakeServer::route(|_| anthropic::text_reply("ok"));
    let mut d = Driven::start(&p, &server, &[]);
    d.user("one");
    d.until("result", is_result);
    d.send(json!({"type": "control_request", "request_id": "req_t",
                  "request": {"subtype": "set_max_thinking_tokens", "max_thinking_tokens": 600}}));
    let answer = d.until("control_response", |v| v["type"] == "control_response");
    assert_eq!(answer["response"]["subtype"], "success", "{answer}");
    d.user("two");
    d.until("result", is_result);
    d.send(json!({"type": "control_request", "request_id": "req_u",
                  "request": {"subtype": "set_max_thinking_tokens", "max_thinking_tokens": null}}));
    d.user("three");
    d.until("result", is_result);
    d.finish();
    let thinking: Vec<Value> = server
        .requests()
        .iter()
        .map(|r| r.json["thinking"].clone())
        .collect();
    assert_eq!(
        thinking,
        [
            Value::Null,
            json!({"type": "enabled", "budget_tokens": 600}),
            Value::Null
        ]
    );
}

#[test]
fn the_budget_stops_the_session() {
    let p = Project::new();
    // Each response costs $3 (a million input tokens of claude-sonnet-4-5).
    let server = FakeServer::route(|_| {
        anthropic::message()
            .tool_use("t", "Glob", json!({"pattern": "*"}))
            .usage(1_000_000, 0)
            .reply()
    });
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "spend",
            "--max-budget-usd",
            "5",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let v = run.json();
    assert_eq!(v["subtype"], "error_max_budget_usd");
    assert_eq!(v["is_error"], true);
    assert!(
        (v["total_cost_usd"].as_f64().unwrap() - 6.0).abs() < 1e-6,
        "{v}"
    );
    assert_eq!(
        server.request_count(),
        2,
        "stops after the response that crossed $5"
    );
    assert!(run.stderr.contains("max-budget-usd"), "{}", run.stderr);
}

#[test]
fn unsupported_flags_say_so() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::text_reply("ok"), anthropic::text_reply("ok")]);
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "x",
            "--fallback-model",
            "haiku",
            "--setting-sources",
            "user,project",
        ],
    );
    run.ok();
    assert!(
        run.stderr.contains("not supported: --fallback-model"),
        "{}",
        run.stderr
    );
    // --setting-sources is a settings layer choice now (see suite::layers).
    assert!(!run.stderr.contains("--setting-sources"), "{}", run.stderr);
    // --add-dir is checked and used as `cadre run --add-dir` is.
    let run = p.run(Some(&server), &["-p", "x", "--add-dir", "no-such-dir"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--add-dir"), "{}", run.stderr);
    let run = p.run(Some(&server), &["-p", "x", "--resume", "abc"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("\"abc\" is not a session id"),
        "{}",
        run.stderr
    );
    // The SDKs' truncating resume: the turn to drop needs the message to
    // resume at, which goes with a fork (suite::sdk tests them working).
    let id = "0b7d5c9e-1111-4222-8333-444455556666";
    let run = p.run(
        Some(&server),
        &["-p", "x", "--resume", id, "--resume-drops-turn=u2"],
    );
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("--resume-drops-turn requires --resume-session-at"),
        "{}",
        run.stderr
    );
    let run = p.run(Some(&server), &["-p", "x", "--setting-sources", "everyone"]);
    assert_eq!(run.code, 2);
    let run = p.run(Some(&server), &["-p", "x", "--mcp-config", "{not json"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("--mcp-config (inline JSON):1:"),
        "{}",
        run.stderr
    );
}

#[test]
fn version_and_subcommands_live_side_by_side() {
    let p = Project::new();
    let run = p.run(None, &["--version"]);
    run.ok();
    let first = run.stdout.split_whitespace().next().unwrap();
    assert!(first.starts_with("2."), "{}", run.stdout);
    assert!(
        run.stdout
            .contains(&format!("cadre {}", env!("CARGO_PKG_VERSION")))
    );
    p.run(None, &["agents", "list"]).ok();
    let run = p.run(None, &[]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("-p"), "{}", run.stderr);
    // A mistyped command is not sent to a model as a prompt.
    let server = FakeServer::start([]);
    let run = p.run(Some(&server), &["agnets"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("unknown command `agnets`"),
        "{}",
        run.stderr
    );
    // Claude Code's flags do not silently vanish in front of a subcommand.
    let run = p.run(Some(&server), &["--model", "haiku", "run", "hi"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("without a subcommand"),
        "{}",
        run.stderr
    );
    assert_eq!(server.request_count(), 0);
    // Global options still come before a subcommand.
    p.run(None, &["--config", "cadre.toml", "agents", "list"])
        .ok();
}

#[test]
fn session_id_and_mcp_config_are_used() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "x",
            "--output-format",
            "stream-json",
            "--session-id",
            "0b7d5c9e-1111-4222-8333-444455556666",
            "--mcp-config",
            r#"{"mcpServers": {"broken": {"command": "/nonexistent/server"}, "inproc": {"type": "sdk", "name": "inproc"}}}"#,
        ],
    );
    run.ok();
    let lines = run.json_lines();
    assert_eq!(
        lines[0]["session_id"],
        "0b7d5c9e-1111-4222-8333-444455556666"
    );
    assert!(
        lines[0]["mcp_servers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "broken"),
        "{}",
        lines[0]
    );
    assert!(
        run.stderr.contains("SDK MCP server `inproc`"),
        "{}",
        run.stderr
    );
    assert!(
        p.transcript_of("0b7d5c9e-1111-4222-8333-444455556666")
            .is_file()
    );
}

/// A cadre process driven over stdin/stdout, as an SDK drives it.
pub(super) struct Driven {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Driven {
    pub(super) fn start(p: &Project, server: &FakeServer, extra: &[&str]) -> Driven {
        let mut cmd = p.command(Some(server));
        cmd.args([
            "--output-format",
            "stream-json",
            "--verbose",
            "--input-format",
            "stream-json",
        ])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Driven {
            child,
            stdin,
            lines: rx,
            seen: Vec::new(),
        }
    }

    pub(super) fn send(&mut self, v: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    }

    pub(super) fn user(&mut self, text: &str) {
        self.send(
            json!({"type": "user", "session_id": "", "parent_tool_use_id": null,
                         "message": {"role": "user", "content": text}}),
        );
    }

    /// The next line that satisfies `f` (lines before it are kept in `seen`).
    pub(super) fn until(&mut self, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        loop {
            let v = self
                .lines
                // Generous: a bound for a hung process, not a timing check
                // (a loaded CI machine runs many of these at once).
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no {what}; saw {:#?}", self.seen));
            // Every line cadre writes fits the committed output schema.
            wire_schema::assert_output_fits(what, std::slice::from_ref(&v));
            self.seen.push(v.clone());
            if f(&v) {
                return v;
            }
        }
    }

    pub(super) fn finish(mut self) -> i32 {
        drop(self.stdin.take());
        while let Ok(v) = self.lines.recv_timeout(Duration::from_secs(20)) {
            wire_schema::assert_output_fits(
                "the lines after stdin closed",
                std::slice::from_ref(&v),
            );
            self.seen.push(v);
        }
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

fn is_result(v: &Value) -> bool {
    v["type"] == "result"
}

#[test]
fn sdk_invocation_initializes_and_runs_many_turns() {
    let mut p = Project::new();
    p.config("");
    let server = FakeServer::route(|r: &RecordedRequest| {
        if r.last_user_text().contains("second") {
            anthropic::text_reply("two")
        } else {
            anthropic::text_reply("one")
        }
    });
    let mut d = Driven::start(&p, &server, &[]);
    d.send(json!({"type": "control_request", "request_id": "req_1",
                  "request": {"subtype": "initialize", "hooks": null,
                              "agents": {"poet": {"description": "Writes poems", "prompt": "You write poems."}}}}));
    let r = d.until("initialize response", |v| v["type"] == "control_response");
    assert_eq!(r["response"]["subtype"], "success", "{r}");
    assert_eq!(r["response"]["request_id"], "req_1");
    // What the SDKs read from the answer, as Claude Code gives it.
    assert_eq!(r["response"]["pending_permission_requests"], json!([]));
    let answer = &r["response"]["response"];
    let poet = answer["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "poet")
        .unwrap_or_else(|| panic!("no poet: {answer:#}"));
    assert_eq!(poet["description"], "Writes poems");
    let clear = answer["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "clear")
        .unwrap_or_else(|| panic!("no /clear: {answer:#}"));
    assert_eq!(clear["builtin"], true);
    assert_eq!(answer["current_permission_mode"], "default");
    assert_eq!(answer["session_state"], "idle");
    assert!(answer["claude_code_version"].is_string());
    assert_eq!(
        answer["account"],
        json!({"tokenSource": "none", "apiKeySource": "ANTHROPIC_API_KEY", "apiProvider": "firstParty"})
    );
    d.user("first");
    let init = d.until("init", |v| v["subtype"] == "init");
    assert!(
        init["agents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "poet"),
        "{init}"
    );
    let first = d.until("first result", is_result);
    assert_eq!(first["result"], "one");
    d.user("second");
    let second = d.until("second result", is_result);
    assert_eq!(second["result"], "two");
    assert_eq!(d.finish(), 0);
    // The second request carries the first exchange.
    let req = server.request(1);
    let texts: Vec<String> = req.messages().iter().map(|m| m.to_string()).collect();
    assert_eq!(req.messages().len(), 3, "{texts:#?}");
    assert!(texts[1].contains("one"));
    // The agent from initialize is offered to the model.
    assert!(server.request(0).body_str().contains("poet"));
}

#[test]
fn max_turns_counts_each_prompt_of_a_stream_json_session_afresh() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::text_reply("one"), anthropic::text_reply("two")]);
    let mut d = Driven::start(&p, &server, &["--max-turns", "1"]);
    d.user("first");
    let first = d.until("first result", is_result);
    d.user("second");
    let second = d.until("second result", is_result);
    for (r, text) in [(&first, "one"), (&second, "two")] {
        assert_eq!(r["subtype"], "success", "{r}");
        assert_eq!(r["num_turns"], 1, "{r}");
        assert_eq!(r["result"], text, "{r}");
    }
    assert_eq!(d.finish(), 0);
    assert_eq!(server.request_count(), 2);
}

#[test]
fn can_use_tool_goes_to_the_client_and_a_denial_reaches_the_model() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_b", "Bash", json!({"command": "rm -rf build"})),
        anthropic::text_reply("ok, I won't"),
    ]);
    let mut d = Driven::start(&p, &server, &["--permission-prompt-tool", "stdio"]);
    d.user("clean up");
    let ask = d.until("can_use_tool", |v| v["type"] == "control_request");
    assert_eq!(ask["request"]["subtype"], "can_use_tool");
    assert_eq!(ask["request"]["tool_name"], "Bash");
    assert_eq!(ask["request"]["input"]["command"], "rm -rf build");
    assert_eq!(ask["request"]["tool_use_id"], "toolu_b");
    // What hosts show: the tool's name, what it does, the path it would
    // change, and the offer to add that path's folder.
    let dir = std::fs::canonicalize(p.path())
        .unwrap()
        .display()
        .to_string();
    assert_eq!(ask["request"]["display_name"], "Bash");
    assert_eq!(ask["request"]["description"], "rm -rf build");
    assert_eq!(ask["request"]["blocked_path"], format!("{dir}/build"));
    assert_eq!(
        ask["request"]["permission_suggestions"],
        json!([{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "rm:*"}],
                "behavior": "allow", "destination": "localSettings"},
               {"type": "addDirectories", "directories": [dir], "destination": "session"}])
    );
    let id = ask["request_id"].as_str().unwrap().to_string();
    d.send(
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": id,
                  "response": {"behavior": "deny", "message": "not today"}}}),
    );
    // The refusal as the SDKs type it: the error text, the host's reject.
    let refused = d.until("tool result", |v| v["type"] == "user");
    assert!(
        refused["tool_use_result"]
            .as_str()
            .unwrap()
            .starts_with("Error: "),
        "{refused}"
    );
    assert_eq!(
        refused["tool_result_meta"],
        json!([{"id": "toolu_b", "non_execution_kind": "permission-rule",
                "permission_decision": {"decision": "reject", "source": "user_reject"}}])
    );
    let result = d.until("result", is_result);
    assert_eq!(result["result"], "ok, I won't");
    assert_eq!(d.finish(), 0);
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true, "{r}");
    assert!(
        result_text(r).contains("not today"),
        "the client's reason reaches the model: {r}"
    );
}

/// A host's answer that does not fit the protocol (an `allow` whose
/// `updatedInput` is a string) denies the call, and the model is told the
/// answer could not be read, not that a user declined.
#[test]
fn an_unreadable_can_use_tool_answer_denies_and_the_model_is_told_why() {
    let p = Project::new();
    p.write("keep.txt", "kept");
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_b", "Bash", json!({"command": "rm keep.txt"})),
        anthropic::text_reply("not run"),
    ]);
    let mut d = Driven::start(&p, &server, &["--permission-prompt-tool", "stdio"]);
    d.user("remove it");
    answer_can_use_tool(
        &mut d,
        json!({"behavior": "allow", "updatedInput": "rm keep.txt"}),
    );
    let result = d.until("result", is_result);
    assert_eq!(result["result"], "not run");
    assert_eq!(d.finish(), 0);
    assert!(p.path().join("keep.txt").exists(), "the call must not run");
    let text = result_text(&last_tool_results(&server.request(1).json)[0]);
    assert!(
        text.contains("the answer to the permission request could not be read (")
            && text.contains("so the call was not run")
            && !text.contains("the user declined"),
        "{text}"
    );
}

/// Answers the next `can_use_tool` request with `response`; returns the request.
fn answer_can_use_tool(d: &mut Driven, response: Value) -> Value {
    let ask = d.until("can_use_tool", |v| {
        v["type"] == "control_request" && v["request"]["subtype"] == "can_use_tool"
    });
    let id = ask["request_id"].as_str().unwrap().to_string();
    d.send(json!({"type": "control_response",
                  "response": {"subtype": "success", "request_id": id, "response": response}}));
    ask
}

#[test]
fn can_use_tool_updated_input_runs_but_cannot_smuggle_a_denied_command() {
    let mut p = Project::new();
    p.config("[permissions]\ndeny = [\"Bash(rm:*)\"]\n");
    p.write("keep/file.txt", "precious");
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Bash", json!({"command": "echo one"})),
        anthropic::tool_use_reply("toolu_2", "Bash", json!({"command": "echo three"})),
        anthropic::tool_use_reply("toolu_3", "Bash", json!({"command": "echo four"})),
        anthropic::text_reply("done"),
    ]);
    let mut d = Driven::start(&p, &server, &["--permission-prompt-tool", "stdio"]);
    d.user("go");
    let ask = answer_can_use_tool(
        &mut d,
        json!({"behavior": "allow", "updatedInput": {"command": "echo two"}}),
    );
    assert_eq!(ask["request"]["input"]["command"], "echo one");
    answer_can_use_tool(
        &mut d,
        json!({"behavior": "allow", "updatedInput": {"command": "echo x && rm -rf keep"}}),
    );
    answer_can_use_tool(
        &mut d,
        json!({"behavior": "allow", "updatedInput": {"cmd": 4}}),
    );
    let r = d.until("result", is_result);
    assert_eq!(r["result"], "done");
    assert_eq!(d.finish(), 0);
    let first = &last_tool_results(&server.request(1).json)[0];
    assert_ne!(first["is_error"], true, "{first}");
    assert!(result_text(first).contains("two"), "{first}");
    let second = &last_tool_results(&server.request(2).json)[0];
    assert_eq!(second["is_error"], true, "{second}");
    assert!(result_text(second).contains("Bash(rm:*)"), "{second}");
    assert_eq!(p.read("keep/file.txt"), "precious");
    let third = &last_tool_results(&server.request(3).json)[0];
    assert_eq!(third["is_error"], true, "{third}");
    assert!(result_text(third).contains("command"), "{third}");
}

#[test]
fn can_use_tool_updated_permissions_last_for_the_session_and_reach_settings_files() {
    let p = Project::new();
    p.write(".claude/settings.local.json", "{\"model\": \"keep-me\"}\n");
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Bash", json!({"command": "echo a"})),
        anthropic::tool_use_reply("toolu_2", "Bash", json!({"command": "echo b"})),
        anthropic::text_reply("done"),
    ]);
    let mut d = Driven::start(&p, &server, &["--permission-prompt-tool", "stdio"]);
    d.user("go");
    answer_can_use_tool(
        &mut d,
        json!({"behavior": "allow", "updatedInput": {"command": "echo a"}, "updatedPermissions": [
            {"type": "addRules", "behavior": "allow", "destination": "session",
             "rules": [{"toolName": "Bash", "ruleContent": "echo:*"}]},
            {"type": "addRules", "behavior": "deny", "destination": "localSettings",
             "rules": [{"toolName": "WebFetch"}]}
        ]}),
    );
    // The second echo runs without a question: the session rule allows it.
    let r = d.until("result", |v| {
        assert_ne!(v["request"]["subtype"], "can_use_tool", "asked again: {v}");
        is_result(v)
    });
    assert_eq!(r["result"], "done");
    assert_eq!(d.finish(), 0);
    let second = &last_tool_results(&server.request(2).json)[0];
    assert_ne!(second["is_error"], true, "{second}");
    let local: Value = serde_json::from_str(&p.read(".claude/settings.local.json")).unwrap();
    assert_eq!(
        local,
        json!({"model": "keep-me", "permissions": {"deny": ["WebFetch"]}})
    );
}

#[test]
fn hook_callbacks_from_initialize_can_block_a_tool() {
    let p = Project::new();
    p.write("secret.txt", "s3cret");
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_r", "Read", json!({"file_path": "secret.txt"})),
        anthropic::text_reply("blocked"),
    ]);
    let mut d = Driven::start(&p, &server, &[]);
    d.send(json!({"type": "control_request", "request_id": "req_1",
                  "request": {"subtype": "initialize", "hooks": {
                      "PreToolUse": [{"matcher": "Read|Write", "hookCallbackIds": ["hook_0"]}]}}}));
    d.until("initialize response", |v| v["type"] == "control_response");
    d.user("read the secret");
    let call = d.until("hook_callback", |v| v["type"] == "control_request");
    assert_eq!(call["request"]["subtype"], "hook_callback");
    assert_eq!(call["request"]["callback_id"], "hook_0");
    assert_eq!(call["request"]["input"]["hook_event_name"], "PreToolUse");
    assert_eq!(call["request"]["input"]["tool_name"], "Read");
    let id = call["request_id"].as_str().unwrap().to_string();
    d.send(json!({"type": "control_response", "response": {"subtype": "success", "request_id": id,
                  "response": {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                      "permissionDecision": "deny", "permissionDecisionReason": "secrets stay secret"}}}}));
    d.until("result", is_result);
    assert_eq!(d.finish(), 0);
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true);
    let text = result_text(r);
    assert!(
        text.contains("secrets stay secret") && !text.contains("s3cret"),
        "{text}"
    );
}

/// Answers hook callbacks with `answer(event, input, times seen)` until a
/// result comes; returns the result and the inputs seen.
fn answer_hooks_until_result(
    d: &mut Driven,
    answer: impl Fn(&str, &Value, usize) -> Value,
) -> (Value, Vec<Value>) {
    let mut inputs = Vec::new();
    loop {
        let v = d.until("hook callback or result", |v| {
            is_result(v) || v["request"]["subtype"] == "hook_callback"
        });
        if is_result(&v) {
            return (v, inputs);
        }
        let input = v["request"]["input"].clone();
        let event = input["hook_event_name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let seen = inputs
            .iter()
            .filter(|i: &&Value| i["hook_event_name"] == event.as_str())
            .count();
        let response = answer(&event, &input, seen);
        inputs.push(input);
        let id = v["request_id"].as_str().unwrap().to_string();
        d.send(json!({"type": "control_response",
                      "response": {"subtype": "success", "request_id": id, "response": response}}));
    }
}

#[test]
fn hook_callbacks_fire_for_prompt_submit_post_tool_use_and_stop() {
    let p = Project::new();
    p.write("notes.txt", "the notes");
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_r", "Read", json!({"file_path": "notes.txt"})),
        anthropic::text_reply("first answer"),
        anthropic::text_reply("final answer"),
    ]);
    let mut d = Driven::start(&p, &server, &[]);
    d.send(json!({"type": "control_request", "request_id": "req_1",
                  "request": {"subtype": "initialize", "hooks": {
                      "UserPromptSubmit": [{"hookCallbackIds": ["h_prompt"]}],
                      "PostToolUse": [{"matcher": "Read", "hookCallbackIds": ["h_post"]}],
                      "Stop": [{"hookCallbackIds": ["h_stop"]}]}}}));
    d.until("initialize response", |v| v["type"] == "control_response");
    d.user("read the notes");
    let (r, inputs) = answer_hooks_until_result(&mut d, |event, input, seen| match event {
        "UserPromptSubmit" => {
            assert_eq!(input["prompt"], "read the notes");
            json!({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                          "additionalContext": "ctx-from-prompt-hook"}})
        }
        "PostToolUse" => {
            assert_eq!(input["tool_name"], "Read");
            assert!(
                input["tool_response"].to_string().contains("the notes"),
                "{input}"
            );
            json!({"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                          "additionalContext": "ctx-from-post-hook"}})
        }
        "Stop" if seen == 0 => {
            assert_eq!(input["stop_hook_active"], false);
            json!({"decision": "block", "reason": "look once more"})
        }
        "Stop" => {
            assert_eq!(input["stop_hook_active"], true);
            json!({})
        }
        other => panic!("unexpected hook event {other}"),
    });
    assert_eq!(r["result"], "final answer", "{r}");
    let events: Vec<&str> = inputs
        .iter()
        .map(|i| i["hook_event_name"].as_str().unwrap())
        .collect();
    assert_eq!(events, ["UserPromptSubmit", "PostToolUse", "Stop", "Stop"]);
    // A second prompt that the hook blocks never reaches the model.
    d.user("something forbidden");
    let (r, _) = answer_hooks_until_result(&mut d, |event, _, _| {
        assert_eq!(event, "UserPromptSubmit");
        json!({"decision": "block", "reason": "not that"})
    });
    assert_eq!(r["is_error"], true, "{r}");
    assert_eq!(r["result"], "not that", "{r}");
    assert_eq!(d.finish(), 1);
    assert_eq!(server.requests().len(), 3);
    assert!(
        server
            .request(0)
            .body_str()
            .contains("ctx-from-prompt-hook")
    );
    let post = &last_tool_results(&server.request(1).json)[0];
    assert!(result_text(post).contains("ctx-from-post-hook"), "{post}");
    assert!(super::harness::user_texts(&server.request(2)).contains("look once more"));
    assert!(!server.request(2).body_str().contains("something forbidden"));
}

#[test]
fn hook_callbacks_fire_for_session_start_and_permission_request() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::message()
            .tool_use(
                "toolu_w",
                "Write",
                json!({"file_path": "made.txt", "content": "x"}),
            )
            .tool_use(
                "toolu_v",
                "Write",
                json!({"file_path": "refused.txt", "content": "y"}),
            )
            .reply(),
        anthropic::text_reply("written"),
    ]);
    let mut d = Driven::start(&p, &server, &[]);
    d.send(json!({"type": "control_request", "request_id": "req_1",
                  "request": {"subtype": "initialize", "hooks": {
                      "SessionStart": [{"matcher": "startup", "hookCallbackIds": ["h_start"]}],
                      "PermissionRequest": [{"matcher": "Write", "hookCallbackIds": ["h_perm"]}],
                      "SessionEnd": [{"hookCallbackIds": ["h_end"]}]}}}));
    d.until("initialize response", |v| v["type"] == "control_response");
    d.user("write the files");
    let (r, inputs) = answer_hooks_until_result(&mut d, |event, input, _| match event {
        "SessionStart" => {
            assert_eq!(input["source"], "startup");
            json!({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                          "additionalContext": "ctx-from-session-start"}})
        }
        "PermissionRequest" => {
            let behavior = if input["tool_input"]["file_path"] == "made.txt" {
                json!({"behavior": "allow"})
            } else {
                json!({"behavior": "deny", "message": "not that one"})
            };
            json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": behavior}})
        }
        other => panic!("unexpected hook event {other}"),
    });
    assert_eq!(r["result"], "written", "{r}");
    let events: Vec<&str> = inputs
        .iter()
        .map(|i| i["hook_event_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        ["SessionStart", "PermissionRequest", "PermissionRequest"]
    );
    // Nobody can answer a SessionEnd callback once the input ended: the
    // session does not wait for one.
    let ending = std::time::Instant::now();
    assert_eq!(d.finish(), 0);
    assert!(ending.elapsed() < std::time::Duration::from_secs(20));
    assert!(p.path().join("made.txt").exists());
    assert!(!p.path().join("refused.txt").exists());
    assert!(
        server
            .request(0)
            .body_str()
            .contains("ctx-from-session-start")
    );
    let refused = &last_tool_results(&server.request(1).json)[1];
    assert!(result_text(refused).contains("not that one"), "{refused}");
}

#[test]
fn a_failing_hook_callback_with_on_failure_block_blocks_the_tool() {
    let p = Project::new();
    p.write("notes.txt", "the notes");
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_r", "Read", json!({"file_path": "notes.txt"})),
        anthropic::text_reply("blocked"),
    ]);
    let mut d = Driven::start(&p, &server, &[]);
    d.send(json!({"type": "control_request", "request_id": "req_1",
                  "request": {"subtype": "initialize", "hooks": {
                      "PreToolUse": [{"hookCallbackIds": ["h"], "onFailure": "block"}]}}}));
    let init = d.until("initialize response", |v| v["type"] == "control_response");
    assert_eq!(
        init["response"]["response"]["hook_on_failure_supported"],
        true
    );
    d.user("read the notes");
    let call = d.until("hook_callback", |v| v["type"] == "control_request");
    let id = call["request_id"].as_str().unwrap().to_string();
    d.send(
        json!({"type": "control_response", "response": {"subtype": "error", "request_id": id,
                  "error": "the guard crashed"}}),
    );
    d.until("result", is_result);
    assert_eq!(d.finish(), 0);
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true, "{r}");
    let text = result_text(r);
    assert!(
        text.contains("the guard crashed") && !text.contains("the notes"),
        "{text}"
    );
}

#[test]
fn interrupt_cancels_the_running_prompt_and_the_session_goes_on() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::text_reply("too late").delayed(Duration::from_secs(30)),
        anthropic::text_reply("fresh answer"),
    ]);
    let mut d = Driven::start(&p, &server, &[]);
    d.user("slow one");
    assert!(server.wait_for_requests(1, Duration::from_secs(10)));
    d.send(json!({"type": "control_request", "request_id": "int_1", "request": {"subtype": "interrupt"}}));
    // The answer to the interrupt comes before the result it causes.
    let ack = d.until("interrupt ack", |v| {
        assert!(!is_result(v), "a result before the interrupt's answer: {v}");
        v["type"] == "control_response"
    });
    assert_eq!(ack["response"]["subtype"], "success");
    let r = d.until("interrupted result", is_result);
    assert_eq!(r["subtype"], "error_during_execution");
    assert_eq!(r["is_error"], true);
    d.user("again");
    let r = d.until("second result", is_result);
    let sent: Vec<String> = server
        .requests()
        .iter()
        .map(|r| format!("#{} {}", r.index, r.body_str()))
        .collect();
    assert_eq!(r["result"], "fresh answer", "requests: {sent:#?}");
    assert_eq!(d.finish(), 0);
    // The interrupted prompt stays in the conversation, answered by a note.
    let msgs = server.request(1).messages().to_vec();
    assert_eq!(msgs.len(), 3, "{msgs:#?}");
    assert_eq!(msgs[1]["role"], "assistant");
}

/// An interrupt sent right behind its prompt, before the session has
/// taken the prompt up, stops that prompt: what an interrupt stops follows
/// from the order of the lines on stdin, not from how far the session got.
/// (Before, the interrupt found no prompt running and was lost.)
#[test]
fn an_interrupt_right_behind_its_prompt_stops_it() {
    let p = Project::new();
    // Should the prompt's request go out before the interrupt is read, its
    // answer is late enough that only the interrupt can end the prompt.
    let server = FakeServer::route(|r| {
        if r.last_user_text().contains("stop me") {
            anthropic::text_reply("too late").delayed(Duration::from_secs(30))
        } else {
            anthropic::text_reply("fresh answer")
        }
    });
    let mut d = Driven::start(&p, &server, &[]);
    let user = json!({"type": "user", "session_id": "", "parent_tool_use_id": null,
                      "message": {"role": "user", "content": "stop me"}});
    let interrupt = json!({"type": "control_request", "request_id": "int_1",
                           "request": {"subtype": "interrupt"}});
    // One write of both lines, so they reach cadre together.
    let both = format!("{user}\n{interrupt}\n");
    let stdin = d.stdin.as_mut().unwrap();
    stdin.write_all(both.as_bytes()).unwrap();
    stdin.flush().unwrap();
    d.until("interrupt ack", |v| {
        assert!(!is_result(v), "a result before the interrupt's answer: {v}");
        v["type"] == "control_response"
    });
    let r = d.until("interrupted result", is_result);
    assert_eq!(r["subtype"], "error_during_execution", "{r}");
    d.user("again");
    let r = d.until("second result", is_result);
    assert_eq!(r["result"], "fresh answer");
    assert_eq!(d.finish(), 0);
    let last = server.requests().pop().unwrap();
    let msgs = last.messages().to_vec();
    assert_eq!(msgs.len(), 3, "{msgs:#?}");
    assert_eq!(msgs[1]["role"], "assistant");
}

#[test]
fn mcp_status_reports_the_servers() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::text_reply("a")]);
    let mut d = Driven::start(
        &p,
        &server,
        &[
            "--mcp-config",
            r#"{"mcpServers": {"broken": {"command": "/nonexistent/server"}}}"#,
        ],
    );
    d.user("one");
    d.until("first result", is_result);
    d.send(json!({"type": "control_request", "request_id": "s1",
                  "request": {"subtype": "mcp_status"}}));
    let status = d.until("mcp_status", |v| v["response"]["request_id"] == "s1");
    assert_eq!(
        status["response"]["response"]["mcpServers"],
        json!([{"name": "broken", "status": "failed"}])
    );
    assert_eq!(d.finish(), 0);
}

#[test]
fn set_permission_mode_and_set_model_apply_to_the_next_prompt() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::text_reply("a"), anthropic::text_reply("b")]);
    let mut d = Driven::start(&p, &server, &[]);
    d.user("one");
    d.until("first result", is_result);
    d.send(json!({"type": "control_request", "request_id": "m1",
                  "request": {"subtype": "set_model", "model": "haiku"}}));
    d.send(json!({"type": "control_request", "request_id": "m2",
                  "request": {"subtype": "set_permission_mode", "mode": "acceptEdits"}}));
    d.send(json!({"type": "control_request", "request_id": "m3",
                  "request": {"subtype": "set_permission_mode", "mode": "sideways"}}));
    let bad = d.until("m3", |v| v["response"]["request_id"] == "m3");
    assert_eq!(bad["response"]["subtype"], "error");
    d.user("two");
    let init = d.until("second init", |v| v["subtype"] == "init");
    assert_eq!(init["model"], "claude-haiku-4-5");
    assert_eq!(init["permissionMode"], "acceptEdits");
    d.until("second result", is_result);
    assert_eq!(d.finish(), 0);
    assert_eq!(server.request(1).json["model"], "claude-haiku-4-5");
}

#[test]
fn pre_model_switch_hooks_can_refuse_a_set_model_and_post_model_switch_sees_the_change() {
    let p = Project::new();
    p.write(
        ".claude/settings.json",
        &json!({"hooks": {
            "PreModelSwitch": [{"matcher": "opus", "hooks": [{"type": "command",
                "command": "echo 'opus is too dear' >&2; exit 2"}]}],
            "PostModelSwitch": [{"hooks": [{"type": "command",
                "command": "cat >> switched.jsonl; echo >> switched.jsonl"}]}]}})
        .to_string(),
    );
    let server = FakeServer::start([anthropic::text_reply("a"), anthropic::text_reply("b")]);
    let mut d = Driven::start(&p, &server, &[]);
    d.user("one");
    d.until("first result", is_result);
    d.send(json!({"type": "control_request", "request_id": "m1",
                  "request": {"subtype": "set_model", "model": "opus"}}));
    d.send(json!({"type": "control_request", "request_id": "m2",
                  "request": {"subtype": "set_model", "model": "haiku"}}));
    d.user("two");
    let init = d.until("second init", |v| v["subtype"] == "init");
    assert_eq!(init["model"], "claude-haiku-4-5");
    d.until("second result", is_result);
    assert_eq!(d.finish(), 0);
    let text = std::fs::read_to_string(p.path().join("switched.jsonl")).unwrap();
    let seen: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(seen.len(), 1, "only the switch that happened: {text}");
    assert_eq!(seen[0]["hook_event_name"], "PostModelSwitch");
    assert_eq!(seen[0]["to_model"], "claude-haiku-4-5");
    assert_eq!(seen[0]["source"], "sdk");
}

#[test]
fn a_bad_input_line_is_reported_and_skipped() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::text_reply("fine")]);
    let mut cmd = p.command(Some(&server));
    cmd.args([
        "--output-format",
        "stream-json",
        "--input-format",
        "stream-json",
    ])
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{{not json").unwrap();
        writeln!(
            stdin,
            r#"{{"type":"user","message":{{"role":"user","content":[{{"type":"text","text":"hi"}}]}}}}"#
        )
        .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("stdin:1:"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout
            .lines()
            .last()
            .unwrap()
            .contains("\"result\":\"fine\""),
        "{stdout}"
    );
    let _ = Reply::status(200, "");
}

/// A stdin line over `--max-input-line-bytes` is skipped without being
/// held, answered with an error `result`, and the next line is a prompt
/// like any other.
#[test]
fn an_over_long_input_line_gets_an_error_result_and_the_session_goes_on() {
    let p = Project::new();
    let server = FakeServer::route(|_| anthropic::text_reply("fine"));
    let mut d = Driven::start(&p, &server, &["--max-input-line-bytes", "1048576"]);
    let huge = "x".repeat(5 * 1024 * 1024);
    d.user(&huge);
    d.user("hi");
    let first = d.until("the over-long line's result", is_result);
    assert_eq!(first["is_error"], true, "{first}");
    assert_eq!(first["subtype"], "error_during_execution", "{first}");
    let why = first["errors"][0].as_str().unwrap_or_default();
    assert!(why.contains("stdin line 1 ("), "{why}");
    assert!(why.contains("limit of 1048576 bytes"), "{why}");
    let second = d.until("the next prompt's result", is_result);
    assert_eq!(second["is_error"], false, "{second}");
    assert_eq!(second["result"], "fine", "{second}");
    assert_eq!(d.finish(), 0);
    let requests = server.requests();
    assert!(!requests.is_empty());
    for r in requests {
        assert!(!r.json.to_string().contains(&huge[..1000]));
    }
}

#[test]
fn a_fork_is_reported_under_its_agent_call() {
    let mut p = Project::new();
    p.config(
        "[features]\nFORK_SUBAGENT = true\n[flags.FORK_SUBAGENT]\ndescription = \"fork\"\ngates = [\"coordinator\"]\n",
    );
    let server = FakeServer::route(|r| {
        if super::harness::is_fork_child(r) {
            return anthropic::text_reply("fork finished");
        }
        match super::harness::assistant_turns(r) {
            0 => anthropic::tool_use_reply(
                "toolu_fork",
                "Agent",
                json!({"description": "split off", "prompt": "check the tests", "fork": true}),
            ),
            _ => anthropic::text_reply("merged"),
        }
    });
    let run = p.run(
        Some(&server),
        &["-p", "go", "--output-format", "stream-json"],
    );
    run.ok();
    let lines = run.json_lines();
    let start = lines
        .iter()
        .find(|l| l["type"] == "subagent_start")
        .unwrap();
    assert_eq!(start["fork"], true);
    assert_eq!(start["tool_use_id"], "toolu_fork");
    // The fork only answered in text, which stays in it: under its call
    // only its task, as Claude Code sends it.
    let under: Vec<&Value> = lines
        .iter()
        .filter(|l| l["parent_tool_use_id"] == "toolu_fork")
        .collect();
    assert_eq!(under.len(), 1, "{lines:#?}");
    assert_eq!(under[0]["message"]["content"][0]["text"], "check the tests");
    assert_eq!(lines.last().unwrap()["result"], "merged");
}

fn background_server(child: impl Fn() -> Reply + Send + Sync + 'static) -> FakeServer {
    FakeServer::route(move |r| {
        if is_main_session(r) {
            return match super::harness::assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_bg",
                    "Agent",
                    json!({"description": "survey", "prompt": "survey", "run_in_background": true}),
                ),
                1 => anthropic::text_reply("launched; waiting"),
                _ => anthropic::text_reply("final answer"),
            };
        }
        child()
    })
}

#[test]
fn a_background_task_reports_its_messages_and_end() {
    let p = Project::new();
    let server = background_server(|| {
        anthropic::text_reply("survey result").delayed(Duration::from_millis(300))
    });
    let run = p.run(
        Some(&server),
        &["-p", "go", "--output-format", "stream-json"],
    );
    run.ok();
    let lines = run.json_lines();
    let t = types(&lines);
    let pos = |what: &str| t.iter().position(|x| x == what).unwrap();
    assert!(pos("subagent_start") < pos("subagent_end"), "{t:?}");
    let launched = lines
        .iter()
        .find(|l| l["type"] == "user" && l["parent_tool_use_id"].is_null())
        .unwrap();
    assert!(
        launched["message"]["content"][0]["content"]
            .to_string()
            .contains("Async agent launched"),
        "{launched}"
    );
    // The child's text answer stays in it (no forwardSubagentText): under
    // its call only its task.
    let under: Vec<&Value> = lines
        .iter()
        .filter(|l| l["parent_tool_use_id"] == "toolu_bg")
        .collect();
    assert_eq!(under.len(), 1, "{lines:#?}");
    assert_eq!(under[0]["type"], "user");
    let end = lines.iter().find(|l| l["type"] == "subagent_end").unwrap();
    assert_eq!(end["status"], "completed");
    let result = lines.last().unwrap();
    assert_eq!(result["result"], "final answer");
    assert_eq!(result["num_turns"], 3);
}

#[test]
fn the_budget_stop_ends_background_children_too() {
    let p = Project::new();
    // The background child keeps working, $3 a response.
    let server = background_server(|| {
        anthropic::message()
            .tool_use("toolu_g", "Glob", json!({"pattern": "*"}))
            .usage(1_000_000, 0)
            .reply()
            .delayed(Duration::from_millis(100))
    });
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "go",
            "--max-budget-usd",
            "5",
            "--output-format",
            "json",
        ],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let v = run.json();
    assert_eq!(v["subtype"], "error_max_budget_usd");
    let meta = p.meta_files();
    assert_eq!(meta.len(), 1);
    assert_eq!(meta[0]["status"], "killed", "{meta:?}");
    let spent = v["total_cost_usd"].as_f64().unwrap();
    assert!((5.0..6.1).contains(&spent), "{spent}");
}

#[test]
fn model_mode_agent_and_prompt_file_flags() {
    let p = Project::new();
    p.write(".claude/agents/reader.md", READER);
    p.write("prompt.txt", "You are terse.");
    let server = FakeServer::start([anthropic::text_reply("a"), anthropic::text_reply("b")]);
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "x",
            "--output-format",
            "stream-json",
            "--model",
            "haiku",
            "--permission-mode",
            "plan",
            "--system-prompt-file",
            "prompt.txt",
        ],
    );
    run.ok();
    let init = &run.json_lines()[0];
    assert_eq!(init["model"], "claude-haiku-4-5");
    assert_eq!(init["model_source"], "flag");
    assert_eq!(init["permissionMode"], "plan");
    assert_eq!(server.request(0).json["model"], "claude-haiku-4-5");
    assert!(
        server
            .request(0)
            .system_text()
            .starts_with("You are terse.")
    );
    // --agent runs as that agent, with its tools.
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "x",
            "--agent",
            "reader",
            "--dangerously-skip-permissions",
            "--output-format",
            "stream-json",
        ],
    );
    run.ok();
    let init = &run.json_lines()[0];
    assert_eq!(init["tools"], json!(["Read"]));
    assert_eq!(init["permissionMode"], "bypassPermissions");
    assert!(server.request(1).system_text().contains("You read files."));
    let run = p.run(Some(&server), &["-p", "x", "--permission-mode", "sideways"]);
    assert_eq!(run.code, 2);
}

#[test]
fn resume_and_continue_go_on_with_the_conversation() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::text_reply("first answer"),
        anthropic::text_reply("second answer"),
        anthropic::text_reply("third answer"),
    ]);
    // Nothing to continue yet, and --fork-session needs a session.
    let run = p.run(Some(&server), &["-p", "x", "--continue"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let run = p.run(Some(&server), &["-p", "x", "--fork-session"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("--fork-session goes with"),
        "{}",
        run.stderr
    );
    assert_eq!(server.request_count(), 0);

    let first = p
        .run(Some(&server), &["-p", "one", "--output-format", "json"])
        .ok()
        .json();
    let id = first["session_id"].as_str().unwrap().to_string();
    let second = p
        .run(
            Some(&server),
            &["-p", "two", "--resume", &id, "--output-format", "json"],
        )
        .ok()
        .json();
    assert_eq!(second["result"], "second answer");
    assert_eq!(
        second["session_id"],
        id.as_str(),
        "a resumed session keeps its id"
    );
    let msgs = server.request(1).messages().to_vec();
    assert_eq!(msgs.len(), 3, "{msgs:#?}");
    assert_eq!(msgs[1]["content"][0]["text"], "first answer");
    assert_eq!(msgs[2]["content"][0]["text"], "two");
    // The resumed request starts with the first one's bytes.
    let a = server.request(0).body;
    let b = server.request(1).body;
    let shared = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    assert!(shared * 2 > a.len(), "shared {shared} of {} bytes", a.len());

    // --continue picks the latest session of the project.
    let third = p
        .run(
            Some(&server),
            &["-p", "three", "--continue", "--output-format", "json"],
        )
        .ok()
        .json();
    assert_eq!(third["session_id"], id.as_str());
    assert_eq!(server.request(2).messages().len(), 5);
}

#[test]
fn strict_mcp_config_keeps_only_the_flag_servers_and_prompt_tool_needs_stdin() {
    let mut p = Project::new();
    p.config("[mcp_servers.fromfile]\ncommand = \"/nonexistent/file-server\"\n");
    let server = FakeServer::start([anthropic::text_reply("ok"), anthropic::text_reply("ok")]);
    let names = |strict: bool| -> Vec<String> {
        let mut args = vec![
            "-p",
            "x",
            "--output-format",
            "stream-json",
            "--mcp-config",
            r#"{"mcpServers": {"fromflag": {"command": "/nonexistent/flag-server"}}}"#,
        ];
        if strict {
            args.push("--strict-mcp-config");
        }
        let run = p.run(Some(&server), &args);
        run.ok();
        let init = &run.json_lines()[0];
        init["mcp_servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(false), ["fromfile", "fromflag"]);
    assert_eq!(names(true), ["fromflag"]);
    // --permission-prompt-tool stdio needs answers on stdin.
    let run = p.run(
        Some(&server),
        &["-p", "x", "--permission-prompt-tool", "stdio"],
    );
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("--input-format stream-json"),
        "{}",
        run.stderr
    );
}

#[test]
fn ask_user_question_goes_to_the_client_and_its_answers_reach_the_model() {
    let p = Project::new();
    let questions = json!([{"question": "Which database?", "header": "Database", "multiSelect": false,
        "options": [{"label": "Postgres", "description": "server"}, {"label": "SQLite", "description": "file"}]}]);
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_q",
            "AskUserQuestion",
            json!({"questions": questions}),
        ),
        anthropic::text_reply("SQLite it is"),
    ]);
    let mut d = Driven::start(&p, &server, &["--permission-prompt-tool", "stdio"]);
    d.user("set up storage");
    let ask = d.until("can_use_tool", |v| v["type"] == "control_request");
    assert_eq!(ask["request"]["subtype"], "can_use_tool");
    assert_eq!(ask["request"]["tool_name"], "AskUserQuestion");
    assert_eq!(ask["request"]["input"]["questions"], questions);
    let id = ask["request_id"].as_str().unwrap().to_string();
    d.send(
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": id,
        "response": {"behavior": "allow", "updatedInput": {"questions": questions,
            "answers": {"Which database?": "SQLite"}}}}}),
    );
    let result = d.until("result", is_result);
    assert_eq!(result["result"], "SQLite it is");
    assert_eq!(d.finish(), 0);
    let r = &last_tool_results(&server.request(1).json)[0];
    assert!(r.get("is_error").is_none(), "{r}");
    assert!(
        result_text(r).contains(r#""Which database?": "SQLite""#),
        "{r}"
    );
}

#[test]
fn a_hosts_human_origin_comes_back_on_the_result_of_its_prompt() {
    // The Python SDK's e2e test_message_origin: a host stamps
    // `origin: {"kind": "human"}` on a prompt and reads it on the result;
    // an unstamped prompt, or one of another kind, gets none (as Claude
    // Code 2.1.330 answers).
    let p = Project::new();
    let server = FakeServer::route(|_| anthropic::text_reply("ok"));
    let mut d = Driven::start(&p, &server, &[]);
    let prompt = |text: &str, origin: Option<Value>| {
        let mut v = json!({"type": "user", "message": {"role": "user", "content": text},
                           "parent_tool_use_id": null});
        if let Some(o) = origin {
            v["origin"] = o;
        }
        v
    };
    d.send(prompt("one", Some(json!({"kind": "human", "extra": 1}))));
    let first = d.until("first result", is_result);
    d.send(prompt("two", None));
    let second = d.until("second result", is_result);
    d.send(prompt("three", Some(json!({"kind": "channel"}))));
    let third = d.until("third result", is_result);
    assert_eq!(d.finish(), 0);
    assert_eq!(first["origin"], json!({"kind": "human"}), "{first}");
    assert!(second.get("origin").is_none(), "{second}");
    assert!(third.get("origin").is_none(), "{third}");
}

#[test]
fn every_control_request_of_the_python_sdk_is_answered() {
    // The subtypes ClaudeSDKClient sends besides initialize, interrupt,
    // set_permission_mode, set_model and mcp_status, answered as Claude
    // Code 2.1.330 answers them; an unknown one gets its error code.
    let p = Project::new();
    let server = FakeServer::route(|_| anthropic::message().text("ok").usage(1200, 30).reply());
    let mut d = Driven::start(&p, &server, &[]);
    d.user("one");
    d.until("result", is_result);
    let mut ask = |id: &str, request: Value| {
        d.send(json!({"type": "control_request", "request_id": id, "request": request}));
        d.until(id, |v| {
            v["type"] == "control_response" && v["response"]["request_id"] == id
        })
    };
    let stop = ask(
        "r_stop",
        json!({"subtype": "stop_task", "task_id": "no-such-task"}),
    );
    let usage = ask("r_usage", json!({"subtype": "get_context_usage"}));
    let reconnect = ask(
        "r_reconnect",
        json!({"subtype": "mcp_reconnect", "serverName": "nope"}),
    );
    let toggle = ask(
        "r_toggle",
        json!({"subtype": "mcp_toggle", "serverName": "nope", "enabled": false}),
    );
    let no_checkpoint = "00000000-0000-0000-0000-000000000000";
    let rewind = ask(
        "r_rewind",
        json!({"subtype": "rewind_files", "user_message_id": no_checkpoint}),
    );
    let dry_rewind = ask(
        "r_dry",
        json!({"subtype": "rewind_files", "user_message_id": no_checkpoint, "dry_run": true}),
    );
    let bogus = ask("r_bogus", json!({"subtype": "bogus_thing"}));
    assert_eq!(d.finish(), 0);
    assert_eq!(stop["response"]["subtype"], "success", "{stop}");
    assert_eq!(stop["response"]["response"], json!({}), "{stop}");
    let u = &usage["response"]["response"];
    assert_eq!(usage["response"]["subtype"], "success", "{usage}");
    // The last response read 1,200 tokens and wrote 30.
    assert_eq!(u["totalTokens"], 1230, "{usage}");
    assert!(u["maxTokens"].as_u64().unwrap_or(0) >= 200_000, "{usage}");
    assert_eq!(u["model"], "claude-sonnet-4-5", "{usage}");
    assert!(
        u["categories"].as_array().is_some_and(|c| !c.is_empty()),
        "{usage}"
    );
    for r in [&reconnect, &toggle] {
        assert_eq!(r["response"]["subtype"], "error", "{r}");
        assert_eq!(r["response"]["error"], "Server not found: nope", "{r}");
    }
    assert_eq!(rewind["response"]["subtype"], "error", "{rewind}");
    assert_eq!(
        rewind["response"]["error"],
        "File rewinding is not enabled."
    );
    assert_eq!(
        dry_rewind["response"]["response"],
        json!({"canRewind": false, "error": "File rewinding is not enabled."}),
        "{dry_rewind}"
    );
    assert_eq!(bogus["response"]["subtype"], "error", "{bogus}");
    assert_eq!(
        bogus["response"]["error"],
        "Unsupported control request subtype: bogus_thing"
    );
    assert_eq!(bogus["response"]["error_code"], "unsupported_request");
}

/// The `user` messages carrying tool results have them as data too, as
/// the SDKs type them: Read's file, Edit's patch, Bash's output; and each
/// says how its call was decided.
#[test]
fn tool_results_come_typed_with_how_each_call_was_decided() {
    let p = Project::new();
    p.write("notes.txt", "one\ntwo\nthree\n");
    let file = p.path().join("notes.txt").display().to_string();
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_r", "Read", json!({"file_path": file})),
        anthropic::tool_use_reply(
            "toolu_e",
            "Edit",
            json!({"file_path": file, "old_string": "two", "new_string": "2"}),
        ),
        anthropic::tool_use_reply("toolu_b", "Bash", json!({"command": "echo hi"})),
        anthropic::text_reply("done"),
    ]);
    let mut d = Driven::start(
        &p,
        &server,
        &[
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Bash(echo:*)",
        ],
    );
    d.user("go");
    let read = d.until("Read's result", |v| v["type"] == "user");
    let typed = &read["tool_use_result"];
    assert_eq!(typed["type"], "text", "{read}");
    assert_eq!(typed["file"]["content"], "one\ntwo\nthree\n", "{read}");
    assert_eq!(typed["file"]["numLines"], 3, "{read}");
    assert_eq!(typed["file"]["startLine"], 1, "{read}");
    assert_eq!(read["tool_result_meta"][0]["id"], "toolu_r");
    assert_eq!(
        read["tool_result_meta"][0]["permission_decision"]["decision"],
        "accept"
    );
    let edit = d.until("Edit's result", |v| v["type"] == "user");
    let typed = &edit["tool_use_result"];
    assert_eq!(typed["originalFile"], "one\ntwo\nthree\n", "{edit}");
    assert_eq!(typed["replaceAll"], false, "{edit}");
    assert_eq!(
        typed["structuredPatch"],
        json!([{"oldStart": 1, "oldLines": 3, "newStart": 1, "newLines": 3,
                "lines": [" one", "-two", "+2", " three"]}]),
        "{edit}"
    );
    assert_eq!(
        edit["tool_result_meta"][0]["permission_decision"]["reason_type"],
        "mode"
    );
    let bash = d.until("Bash's result", |v| v["type"] == "user");
    assert_eq!(bash["tool_use_result"]["stdout"], "hi", "{bash}");
    assert_eq!(bash["tool_use_result"]["interrupted"], false, "{bash}");
    assert_eq!(
        bash["tool_result_meta"][0]["permission_decision"]["reason_type"],
        "rule"
    );
    d.until("result", is_result);
    assert_eq!(d.finish(), 0);
    assert_eq!(p.read("notes.txt"), "one\n2\nthree\n");
}
