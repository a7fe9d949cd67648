//! The Claude Agent SDKs (clients nobody here wrote) driving cadre against
//! the fake model server: the Python one from PyPI through `cli_path`
//! (installed into `.ci/venv` by `scripts/test-deps-sdk`), and the
//! TypeScript one from npm through `pathToClaudeCodeExecutable` (installed
//! into `.ci/sdk-ts` by `scripts/test-deps-sdk-ts`). Without them these
//! tests fail and say how to install them.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{Project, assistant_turns, last_tool_results, result_text};
use super::kit::{FakeServer, RecordedRequest, TEST_KEY, anthropic};

fn python() -> PathBuf {
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/venv");
    let python = venv.join("bin/python");
    assert!(
        python.is_file(),
        "{} is missing: the SDK tests need the Claude Agent SDK for Python; \
         install it with scripts/test-deps-sdk",
        venv.display()
    );
    python
}

/// Runs one scenario of tests/sdk/drive.py; returns what it saw.
fn drive(p: &Project, server: &FakeServer, scenario: &str) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/drive.py");
    let out = Command::new(python())
        .arg(&script)
        .arg(scenario)
        .current_dir(p.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", p.home.path())
        .env("NO_COLOR", "1")
        .env("CADRE_BIN", env!("CARGO_BIN_EXE_cadre"))
        .env("CADRE_PROJECT", p.path())
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", TEST_KEY)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "scenario {scenario} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let last = stdout.lines().last().unwrap_or_default();
    let v: Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("{scenario}: last line is not JSON ({e}): {stdout}\n{stderr}"));
    assert_eq!(v["ok"], true, "{v}");
    v["seen"].clone()
}

fn turn(r: &RecordedRequest) -> usize {
    assistant_turns(r)
}

/// How a test drives cadre through one SDK (Python or TypeScript) with a
/// scenario of its driver script; returns what the script saw.
type Driver = fn(&Project, &FakeServer, &str) -> Value;

/// `query()` one-shot: the model reads a file, the answer uses it, and the
/// session the SDK reports exists on disk.
fn query_runs_a_read_round_trip(drive: Driver) {
    let p = Project::new();
    p.write("notes.txt", "the notes say hello\n");
    let server = FakeServer::route(|r| match turn(r) {
        0 => anthropic::tool_use_reply("toolu_read", "Read", json!({"file_path": "notes.txt"})),
        _ => anthropic::text_reply("The notes say hello."),
    });
    let seen = drive(&p, &server, "query_read");
    assert_eq!(server.request_count(), 2);
    let r = &last_tool_results(&server.request(1).json)[0];
    assert!(result_text(r).contains("the notes say hello"), "{r}");
    // The session is where Claude Code keeps its own (`<key>/<id>.jsonl`),
    // and the SDK's session readers read it: listed under its prompt, its
    // four messages (prompt, tool call, result, answer) in order.
    let id = seen["session_id"].as_str().unwrap();
    assert!(p.transcript_of(id).is_file());
    assert_eq!(seen["sdk_listed"], json!([id]));
    assert_eq!(seen["sdk_summary"], json!(["What do the notes say?"]));
    assert_eq!(
        seen["sdk_types"],
        json!(["user", "assistant", "user", "assistant"]),
        "{seen}"
    );
    assert_eq!(seen["sdk_subagents"], json!(0));
    // The SDK hands the program the tool result as data.
    if let Some(typed) = seen.get("tool_use_result") {
        assert_eq!(typed[0]["type"], "text", "{seen}");
        assert_eq!(
            typed[0]["file"]["content"], "the notes say hello\n",
            "{seen}"
        );
        assert_eq!(typed[0]["file"]["numLines"], 1, "{seen}");
    }
}

/// Two prompts on one connection: the second request carries the first
/// exchange.
fn two_prompts_keep_one_conversation(drive: Driver) {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if r.last_user_text().contains("What is my name") {
            if r.body_str().contains("Ada") {
                anthropic::text_reply("Your name is Ada.")
            } else {
                anthropic::text_reply("I don't know.")
            }
        } else {
            anthropic::text_reply("Nice to meet you.")
        }
    });
    drive(&p, &server, "multi_turn");
    assert_eq!(server.request_count(), 2);
    assert_eq!(server.request(1).messages().len(), 3);
}

#[test]
fn sdk_query_runs_a_read_round_trip() {
    query_runs_a_read_round_trip(drive);
}

#[test]
fn sdk_client_keeps_one_conversation_over_two_prompts() {
    two_prompts_keep_one_conversation(drive);
}

#[test]
fn sdk_can_use_tool_denies_bash() {
    let p = Project::new();
    let server = FakeServer::route(|r| match turn(r) {
        0 => anthropic::tool_use_reply("toolu_rm", "Bash", json!({"command": "rm -rf build"})),
        _ => anthropic::text_reply("I was not allowed to."),
    });
    p.write("build/keep.txt", "still here");
    drive(&p, &server, "deny_bash");
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true);
    assert!(result_text(r).contains("no shell for you"), "{r}");
    assert_eq!(p.read("build/keep.txt"), "still here");
}

#[test]
fn sdk_interrupt_stops_a_prompt_and_the_next_one_runs() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if r.last_user_text().contains("Take your time") {
            anthropic::text_reply("Too late.").delayed(Duration::from_secs(30))
        } else {
            anthropic::text_reply("Quick answer.")
        }
    });
    let seen = drive(&p, &server, "interrupt");
    assert_eq!(seen["interrupted"], "error_during_execution");
}

#[test]
fn sdk_agents_arrive_through_initialize_and_are_used() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if r.system_text().contains("You are the poet") {
            return anthropic::text_reply("Roses are red.");
        }
        match turn(r) {
            0 => anthropic::tool_use_reply(
                "toolu_poet",
                "Agent",
                json!({"description": "a poem", "prompt": "Write a poem.", "subagent_type": "poet"}),
            ),
            _ => anthropic::text_reply("The poet wrote: Roses are red."),
        }
    });
    drive(&p, &server, "custom_agents");
    let child = server
        .requests()
        .into_iter()
        .find(|r| r.system_text().contains("You are the poet"))
        .expect("a request of the poet agent");
    let tools: Vec<String> = super::harness::tool_names(&child.json);
    assert_eq!(tools, ["Read"], "the agent's own tool list");
}

#[test]
fn sdk_pre_tool_use_hook_fires_and_blocks() {
    let p = Project::new();
    let server = FakeServer::route(|r| match turn(r) {
        0 => anthropic::tool_use_reply("toolu_ls", "Bash", json!({"command": "ls"})),
        _ => anthropic::text_reply("Blocked."),
    });
    drive(&p, &server, "pre_tool_hook");
    let r = &last_tool_results(&server.request(1).json)[0];
    assert!(result_text(r).contains("the guard hook says no"), "{r}");
}

/// An SDK server's answer over the MCP message limit fails its call (it
/// used to be dropped by rmcp and the prompt never ended).
#[test]
fn an_sdk_servers_over_long_answer_fails_the_call_and_the_next_one_runs() {
    let p = Project::new();
    let server = FakeServer::route(|r| match turn(r) {
        0 => anthropic::tool_use_reply("toolu_big", "mcp__calc__big", json!({})),
        1 => anthropic::tool_use_reply("toolu_add", "mcp__calc__add", json!({"a": 2, "b": 3})),
        _ => anthropic::text_reply("done."),
    });
    let seen = drive(&p, &server, "sdk_mcp_huge_answer");
    let error = seen["error"].as_str().unwrap_or_default();
    assert!(error.contains("its answer was"), "{error}");
}

#[test]
fn sdk_mcp_server_tools_run_in_the_sdk_program() {
    let p = Project::new();
    let server = FakeServer::route(|r| match turn(r) {
        0 => anthropic::tool_use_reply("toolu_add", "mcp__calc__add", json!({"a": 2, "b": 3})),
        _ => anthropic::text_reply("2 + 3 = 5."),
    });
    drive(&p, &server, "sdk_mcp_tool");
    let tools = super::harness::tool_names(&server.request(0).json);
    assert!(tools.iter().any(|t| t == "mcp__calc__add"), "{tools:?}");
    let r = &last_tool_results(&server.request(1).json)[0];
    assert!(result_text(r).contains("sum=5"), "{r}");
}

#[test]
fn sdk_can_use_tool_rewrites_input_and_grants_a_rule_and_post_hooks_fire() {
    let p = Project::new();
    let server = FakeServer::route(|r| match turn(r) {
        0 => anthropic::tool_use_reply("toolu_1", "Bash", json!({"command": "echo original"})),
        1 => anthropic::tool_use_reply("toolu_2", "Bash", json!({"command": "echo again"})),
        _ => anthropic::text_reply("Said."),
    });
    drive(&p, &server, "rewrite_and_post_hook");
    let first = &last_tool_results(&server.request(1).json)[0];
    let text = result_text(first);
    assert!(
        text.contains("rewritten") && text.contains("checked by the post hook"),
        "{first}"
    );
    let second = &last_tool_results(&server.request(2).json)[0];
    assert!(result_text(second).contains("again"), "{second}");
}

/// `enable_file_checkpointing` through the Python SDK: the model edits
/// `a.txt` in the first message and creates `sub/b.txt` in the second;
/// `rewind_files` to the second message removes `b.txt` and keeps the
/// edit, to the first puts `a.txt` back. The answers (a dry run's counts,
/// an unknown message) are Claude Code 2.1.330's for the same script.
#[test]
fn sdk_rewind_files_restores_what_the_tools_changed() {
    let p = Project::new();
    p.write("a.txt", "original\n");
    let (a, b) = (p.path().join("a.txt"), p.path().join("sub/b.txt"));
    let (a_s, b_s) = (a.display().to_string(), b.display().to_string());
    let server = FakeServer::route(move |r| match turn(r) {
        0 => anthropic::tool_use_reply("toolu_r", "Read", json!({"file_path": a_s})),
        1 => anthropic::tool_use_reply(
            "toolu_e",
            "Edit",
            json!({"file_path": a_s, "old_string": "original", "new_string": "changed"}),
        ),
        3 => anthropic::tool_use_reply(
            "toolu_w",
            "Write",
            json!({"file_path": b_s, "content": "bee\n"}),
        ),
        _ => anthropic::text_reply("done"),
    });
    let seen = drive(&p, &server, "rewind_files");
    let files = |a: &str, b: Value| json!({"a": a, "b": b});
    assert_eq!(seen["uuids"], 2, "{seen:#}");
    assert_eq!(
        seen["after_turns"],
        files("changed\n", json!("bee\n")),
        "{seen:#}"
    );
    assert_eq!(
        seen["dry_run"],
        json!({"canRewind": true, "filesChanged": [a.display().to_string(), b.display().to_string()],
               "insertions": 1, "deletions": 2}),
        "{seen:#}"
    );
    assert_eq!(seen["after_dry_run"], seen["after_turns"]);
    let none = "No file checkpoint found for this message.";
    assert_eq!(seen["unknown"], json!({"canRewind": false, "error": none}));
    assert_eq!(seen["unknown_real"], json!({"error_response": none}));
    assert_eq!(
        seen["to_second"],
        json!({"canRewind": true, "skippedLinks": 0})
    );
    assert_eq!(seen["after_second"], files("changed\n", Value::Null));
    assert_eq!(seen["after_first"], files("original\n", Value::Null));
    assert_eq!(
        seen["again"],
        json!({"canRewind": true, "filesChanged": [], "insertions": 0, "deletions": 0})
    );
}

/// The TypeScript SDK's folder (installed by `scripts/test-deps-sdk-ts`).
fn sdk_ts() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/sdk-ts");
    assert!(
        dir.join("node_modules/@anthropic-ai/claude-agent-sdk/package.json")
            .is_file(),
        "{} is missing: these tests need the Claude Agent SDK for TypeScript; \
         install it with scripts/test-deps-sdk-ts",
        dir.display()
    );
    dir
}

/// Runs one scenario of tests/sdk/drive.mjs; returns what it saw.
fn drive_ts(p: &Project, server: &FakeServer, scenario: &str) -> Value {
    drive_ts_with(p, server, scenario, &[])
}

/// [`drive_ts`] with more environment for the script.
fn drive_ts_with(
    p: &Project,
    server: &FakeServer,
    scenario: &str,
    env: &[(&str, String)],
) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/drive.mjs");
    let out = Command::new("node")
        .arg(&script)
        .arg(scenario)
        .current_dir(p.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", p.home.path())
        .env("NO_COLOR", "1")
        .env("SDK_TS", sdk_ts())
        .env("CADRE_BIN", env!("CARGO_BIN_EXE_cadre"))
        .env("CADRE_PROJECT", p.path())
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", TEST_KEY)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "TypeScript scenario {scenario} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let last = stdout.lines().last().unwrap_or_default();
    let v: Value = serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("{scenario}: last line is not JSON ({e}): {stdout}\n{stderr}"));
    assert_eq!(v["ok"], true, "{v}");
    v["seen"].clone()
}

#[test]
fn ts_sdk_query_runs_a_read_round_trip() {
    query_runs_a_read_round_trip(drive_ts);
}

#[test]
fn ts_sdk_streaming_input_keeps_one_conversation() {
    two_prompts_keep_one_conversation(drive_ts);
}

/// The TypeScript SDK's Query methods that send control requests about
/// settings, MCP servers and listings (src/cli/control.rs), each answered
/// in the shape the SDK hands its caller; a prompt runs after them.
#[test]
fn ts_sdk_query_methods_change_settings_and_manage_a_hosts_mcp_server() {
    let p = Project::new();
    p.write(
        ".claude/skills/greet/SKILL.md",
        "---\nname: greet\ndescription: Says hello\n---\nSay hello.\n",
    );
    let server = FakeServer::route(|_| anthropic::text_reply("ok"));
    let (command, args) = super::mcp::server_command();
    let mut mcp_env = serde_json::Map::new();
    mcp_env.insert(super::mcp::MODE_ENV.into(), "rich".into());
    let seen = drive_ts_with(
        &p,
        &server,
        "control_queries",
        &[
            ("MCP_COMMAND", command),
            ("MCP_ARGS", serde_json::to_string(&args).unwrap()),
            ("MCP_ENV", Value::Object(mcp_env).to_string()),
        ],
    );
    assert_eq!(
        seen["set"],
        json!({"added": ["echo"], "removed": [], "errors": {}}),
        "{seen}"
    );
    assert_eq!(seen["status"], json!([["echo", "connected"]]), "{seen}");
    assert_eq!(
        seen["status_after"],
        json!([["echo", "connected"]]),
        "{seen}"
    );
    assert_eq!(
        seen["page"]["contents"][0]["text"], "<p>the app</p>",
        "{seen}"
    );
    assert!(
        seen["skills"].as_array().unwrap().contains(&json!("greet")),
        "{seen}"
    );
    assert_eq!(seen["backgrounded"], false, "{seen}");
    assert_eq!(seen["models"][0], "default", "{seen}");
}

/// A session with a sub-agent, read back by the SDK's own session
/// functions: `list_sessions` lists it under its prompt,
/// `get_session_messages` gives the main conversation, `list_subagents`
/// the sub-agent, and `get_subagent_messages` its conversation with
/// `parent_tool_use_id` the Agent call that started it (from the meta
/// file beside its transcript, as Claude Code writes it).
#[test]
fn the_sdks_session_functions_read_a_cadre_session_and_its_sub_agent() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if r.system_text().contains("You are the helper") {
            return anthropic::text_reply("The helper found it.");
        }
        match turn(r) {
            0 => anthropic::tool_use_reply(
                "toolu_helper",
                "Agent",
                json!({"description": "look up", "prompt": "Look it up.", "subagent_type": "helper"}),
            ),
            _ => anthropic::text_reply("Done: the helper found it."),
        }
    });
    let seen = drive(&p, &server, "session_reads");
    let id = seen["session_id"].as_str().unwrap();
    let canonical = p.path().canonicalize().unwrap();
    assert_eq!(
        seen["listed"],
        json!([{"id": id, "summary": "Ask the helper.", "cwd": canonical}]),
        "{seen:#}"
    );
    let messages = seen["messages"].as_array().unwrap();
    let types: Vec<&str> = messages
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["user", "assistant", "user", "assistant"],
        "{seen:#}"
    );
    assert_eq!(messages[0]["message"]["content"], "Ask the helper.");
    assert_eq!(messages[1]["message"]["content"][0]["id"], "toolu_helper");
    assert_eq!(
        messages[3]["message"]["content"][0]["text"],
        "Done: the helper found it."
    );
    assert!(messages.iter().all(|m| m["session_id"] == id));
    let subagents = seen["subagents"].as_array().unwrap();
    assert_eq!(subagents.len(), 1, "{seen:#}");
    let child = &seen["subagent_messages"][0];
    assert_eq!(child[0]["type"], "user");
    assert_eq!(child[0]["message"]["content"], "Look it up.");
    assert_eq!(
        child[1]["message"]["content"][0]["text"],
        "The helper found it."
    );
    assert!(
        child
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["parent_tool_use_id"] == "toolu_helper"),
        "{child:#}"
    );
}

/// The SDK's truncating resume, as its own end-to-end test drives it: the
/// stream's assistant message carries its transcript `uuid`, a fork at the
/// end of turn 1 that declares turn 2 dropped goes on without it (the
/// model sees turn 1 and the new prompt only), the source is untouched,
/// and a fork declaring another turn is refused with Claude Code's reason
/// and writes nothing.
#[test]
fn sdk_truncating_resume_forks_at_a_message_and_checks_the_dropped_turn() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        let last = r.messages().last().cloned().unwrap_or_default();
        let text = last["content"]
            .as_array()
            .and_then(|c| c.iter().rev().find_map(|b| b["text"].as_str()))
            .or(last["content"].as_str())
            .unwrap_or("")
            .to_string();
        let word = text.rsplit(' ').next().unwrap_or("?").to_string();
        anthropic::text_reply(&word)
    });
    let seen = drive(&p, &server, "truncating_resume");
    assert_eq!(
        seen["forked_prompts"],
        json!(["Reply with exactly: one", "Reply with exactly: three"]),
        "{seen:#}"
    );
    assert_eq!(
        seen["original_prompts"],
        json!(["Reply with exactly: one", "Reply with exactly: two"])
    );
    assert_eq!(seen["after_refusal"], seen["original_prompts"]);
    let refused = seen["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains("Resume rejected by --resume-drops-turn:"),
        "{seen:#}"
    );
    // The fork's request: turn 1, then the new prompt; turn 2 is gone.
    let fork_request = server
        .requests()
        .into_iter()
        .find(|r| r.body_str().contains("Reply with exactly: three"))
        .expect("the fork's request");
    let body = fork_request.body_str();
    assert!(body.contains("Reply with exactly: one"), "{body}");
    assert!(!body.contains("Reply with exactly: two"), "{body}");
}

/// `session_store=` (`--session-mirror`): the transcript reaches the SDK's
/// `InMemorySessionStore` as `transcript_mirror` frames — the main
/// conversation, and the sub-agent's with its metadata, so the store's
/// readers give `parent_tool_use_id` — and a resume from the store alone
/// (the file on disk deleted, the SDK writing the store's copy into a
/// scratch `CLAUDE_CONFIG_DIR`) sends the earlier conversation.
#[test]
fn sdk_session_store_gets_the_transcript_and_resumes_from_it() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if r.system_text().contains("You are the helper") {
            return anthropic::text_reply("The helper found it.");
        }
        if r.body_str().contains("And again?") {
            return anthropic::text_reply("Again: the helper found it.");
        }
        match turn(r) {
            0 => anthropic::tool_use_reply(
                "toolu_helper",
                "Agent",
                json!({"description": "look up", "prompt": "Look it up.", "subagent_type": "helper"}),
            ),
            _ => anthropic::text_reply("Done: the helper found it."),
        }
    });
    let seen = drive(&p, &server, "session_store");
    assert_eq!(
        seen["store_types"],
        json!(["user", "assistant", "user", "assistant"]),
        "{seen:#}"
    );
    assert_eq!(
        seen["subagents"].as_array().map(Vec::len),
        Some(1),
        "{seen:#}"
    );
    assert_eq!(
        seen["child"],
        json!([
            {"type": "user", "parent_tool_use_id": "toolu_helper"},
            {"type": "assistant", "parent_tool_use_id": "toolu_helper"}
        ])
    );
    assert_eq!(seen["resumed"], "Again: the helper found it.");
    assert_eq!(seen["resumed_session"], seen["session_id"]);
    let resumed = server
        .requests()
        .into_iter()
        .find(|r| r.body_str().contains("And again?"))
        .expect("the resumed request");
    assert!(resumed.body_str().contains("Ask the helper."));
    assert!(resumed.body_str().contains("Done: the helper found it."));
}
