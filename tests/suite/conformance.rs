//! The differential conformance harness: Claude Code is the oracle.
//!
//! Each [`Scenario`] runs twice with the same arguments and stdin — once
//! through Claude Code (the binary the Python Agent SDK wheel bundles,
//! installed into `.ci/venv` by `scripts/test`), once through cadre — each
//! in its own project and `HOME`, against its own fake model server playing
//! the same script. The outputs are compared with `kit::shape` (event
//! order and shapes, result values, the main conversation's requests, hook
//! inputs, control responses) and every difference must be listed in
//! `docs/claude-code-differences.md`; a listed one that no longer occurs
//! fails too, so the list stays true.
//!
//! Adding a scenario is one entry in [`scenarios`].

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::Project;
use super::kit::shape::{self, Area, Difference};
use super::kit::wire_schema;
use super::kit::{FakeServer, RecordedRequest, Reply, TEST_KEY, anthropic};

/// The reviewed list of differences, relative to the repository.
const DIFFERENCES: &str = "docs/claude-code-differences.md";

/// The model both programs are told to use.
const MODEL: &str = "claude-sonnet-4-5";

/// A bound for a hung program (no timing check: a loaded machine runs
/// many of these at once).
const HUNG: Duration = Duration::from_secs(90);

/// One step of a stream-json conversation on stdin.
enum Step {
    /// Write this line.
    Send(Value),
    /// Wait for an output line of this `type` before going on.
    Await(&'static str),
    /// Wait for a `can_use_tool` control request and deny it with this
    /// message.
    Deny(&'static str),
    /// Wait for a `can_use_tool` control request and answer it with this
    /// `response`, which does not fit the protocol (not checked against
    /// the input schema).
    Malformed(Value),
}

/// A scripted run: the same for both programs.
struct Scenario {
    name: &'static str,
    args: Vec<String>,
    /// Stdin, for `--input-format stream-json`; empty: stdin is closed.
    steps: Vec<Step>,
    /// Files to put in the project before the run.
    setup: fn(&Project),
    /// The main conversation's replies, given the project folder.
    replies: fn(&Path) -> Vec<Reply>,
    /// Hook inputs to compare: the values at these pointers must match.
    hook_fields: &'static [&'static str],
    /// Environment for both programs.
    env: &'static [(&'static str, &'static str)],
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter()
        .copied()
        .chain(["--model", MODEL])
        .map(str::to_string)
        .collect()
}

fn user(text: &str) -> Step {
    Step::Send(
        json!({"type": "user", "session_id": "", "parent_tool_use_id": null,
                      "message": {"role": "user", "content": text}}),
    )
}

fn no_setup(_: &Project) {}

/// A `Deny` step's message.
fn deny_message(step: &Step) -> &'static str {
    match step {
        Step::Deny(m) => m,
        _ => "",
    }
}

fn read_notes(dir: &Path) -> Vec<Reply> {
    let file = dir.join("notes.txt").display().to_string();
    vec![
        anthropic::tool_use_reply("toolu_read1", "Read", json!({"file_path": file})),
        anthropic::text_reply("The notes say hello."),
    ]
}

fn write_notes(p: &Project) {
    p.write("notes.txt", "hello from the notes\n");
}

/// A PreToolUse command hook (Claude Code's settings format) that appends
/// its stdin to `hook-input.jsonl` in the project.
fn write_notes_and_hook(p: &Project) {
    write_notes(p);
    let log = p.path().join("hook-input.jsonl");
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "Read", "hooks": [
        {"type": "command", "command": format!("cat >> '{}'", log.display())}]}]}});
    p.write(".claude/settings.json", &settings.to_string());
}

/// `-p` with stream-json output: the model reads `notes.txt`, then answers.
fn read_scenario(
    name: &'static str,
    setup: fn(&Project),
    hook_fields: &'static [&'static str],
) -> Scenario {
    Scenario {
        name,
        args: args(&[
            "-p",
            "read notes.txt",
            "--output-format",
            "stream-json",
            "--verbose",
        ]),
        steps: vec![],
        setup,
        replies: read_notes,
        hook_fields,
        env: &[],
    }
}

/// A PreToolUse command hook that denies every Read with a reason.
fn write_notes_and_denying_hook(p: &Project) {
    write_notes(p);
    let answer = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "notes are private"}});
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "Read", "hooks": [
        {"type": "command", "command": format!("cat > /dev/null; echo '{answer}'")}]}]}});
    p.write(".claude/settings.json", &settings.to_string());
}

/// The schema of the structured-output scenarios.
const ANSWER_SCHEMA: &str =
    r#"{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}"#;

/// A StructuredOutput call with this input, in a message of its own id
/// (Claude Code joins messages that share one).
fn structured(id: &str, input: Value) -> Reply {
    anthropic::message()
        .id(&format!("msg_{id}"))
        .tool_use(id, "StructuredOutput", input)
        .reply()
}

const STREAM_IO: [&str; 6] = [
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--verbose",
    "-p",
];

fn scenarios() -> Vec<Scenario> {
    let two_prompts = || {
        vec![
            user("first"),
            Step::Await("result"),
            user("second"),
            Step::Await("result"),
        ]
    };
    let two_answers = |_: &Path| vec![anthropic::text_reply("one"), anthropic::text_reply("two")];
    vec![
        Scenario {
            name: "json-text",
            args: args(&["-p", "hi", "--output-format", "json"]),
            steps: vec![],
            setup: no_setup,
            replies: |_| vec![anthropic::text_reply("hello")],
            hook_fields: &[],
            env: &[],
        },
        read_scenario("stream-read", write_notes, &[]),
        Scenario {
            name: "stream-input-two-prompts",
            args: args(&STREAM_IO),
            steps: two_prompts(),
            setup: no_setup,
            replies: two_answers,
            hook_fields: &[],
            env: &[],
        },
        Scenario {
            name: "max-turns-per-prompt",
            args: args(&[&STREAM_IO[..], &["--max-turns", "1"]].concat()),
            steps: two_prompts(),
            setup: no_setup,
            replies: two_answers,
            hook_fields: &[],
            env: &[],
        },
        Scenario {
            name: "api-error-404",
            args: args(&["-p", "hi", "--output-format", "stream-json", "--verbose"]),
            steps: vec![],
            setup: no_setup,
            // Every try answered 404 (Claude Code tries a 404 again).
            replies: |_| {
                vec![Reply::anthropic_error(404, "not_found_error", &format!("model: {MODEL}")); 4]
            },
            hook_fields: &[],
            env: &[],
        },
        Scenario {
            name: "api-error-500",
            args: args(&["-p", "hi", "--output-format", "json"]),
            steps: vec![],
            setup: no_setup,
            // Every try answered 500; both programs try twice more.
            replies: |_| vec![Reply::anthropic_error(500, "api_error", "Internal server error"); 4],
            hook_fields: &[],
            env: &[("CLAUDE_CODE_MAX_RETRIES", "2")],
        },
        Scenario {
            name: "structured-output",
            args: args(&[
                "-p",
                "2+2",
                "--output-format",
                "stream-json",
                "--verbose",
                "--json-schema",
                ANSWER_SCHEMA,
            ]),
            steps: vec![],
            setup: no_setup,
            // An answer in text first (told to call the tool), then one
            // that does not fit, then one that does.
            replies: |_| {
                vec![
                    anthropic::text_reply("it is 4"),
                    structured("toolu_s1", json!({"answer": "four"})),
                    structured("toolu_s2", json!({"answer": 4})),
                ]
            },
            hook_fields: &[],
            env: &[],
        },
        Scenario {
            name: "structured-output-retries",
            args: args(&[
                "-p",
                "2+2",
                "--output-format",
                "json",
                "--json-schema",
                ANSWER_SCHEMA,
            ]),
            steps: vec![],
            setup: no_setup,
            // Never fits: both give up after five tries.
            replies: |_| {
                (0..8)
                    .map(|i| structured(&format!("toolu_s{i}"), json!({"answer": "x"})))
                    .collect()
            },
            hook_fields: &[],
            env: &[],
        },
        Scenario {
            name: "thinking",
            args: args(&[
                "-p",
                "2+2",
                "--output-format",
                "stream-json",
                "--verbose",
                "--include-partial-messages",
                "--max-thinking-tokens",
                "2048",
            ]),
            steps: vec![],
            setup: no_setup,
            // A thinking block (with its signature), then the answer.
            replies: |_| {
                vec![
                    anthropic::message()
                        .thinking("two and two", "sig-1")
                        .text("four")
                        .reply(),
                ]
            },
            hook_fields: &[],
            env: &[],
        },
        read_scenario(
            "pre-tool-use-hook",
            write_notes_and_hook,
            &["/hook_event_name", "/tool_name", "/tool_input", "/cwd"],
        ),
        Scenario {
            name: "partial-messages",
            args: args(&[
                "-p",
                "hi",
                "--output-format",
                "stream-json",
                "--verbose",
                "--include-partial-messages",
            ]),
            steps: vec![],
            setup: no_setup,
            replies: |_| vec![anthropic::text_reply("hello there")],
            hook_fields: &[],
            env: &[],
        },
        read_scenario(
            "pre-tool-use-hook-denies",
            write_notes_and_denying_hook,
            &[],
        ),
        Scenario {
            name: "can-use-tool-deny",
            args: args(&[&STREAM_IO[..], &["--permission-prompt-tool", "stdio"]].concat()),
            steps: vec![
                user("clean up"),
                Step::Deny("not today"),
                Step::Await("result"),
            ],
            setup: no_setup,
            replies: |_| {
                vec![
                    anthropic::tool_use_reply(
                        "toolu_b",
                        "Bash",
                        json!({"command": "rm -rf build"}),
                    ),
                    anthropic::text_reply("ok, I won't"),
                ]
            },
            hook_fields: &[],
            env: &[],
        },
        // The host answers two permission requests with answers that do
        // not fit the protocol: an allow whose `updatedInput` is not an
        // object, then one with no `behavior`.
        Scenario {
            name: "can-use-tool-malformed",
            args: args(&[&STREAM_IO[..], &["--permission-prompt-tool", "stdio"]].concat()),
            steps: vec![
                user("clean up"),
                Step::Malformed(json!({"behavior": "allow", "updatedInput": "rm -rf /"})),
                Step::Malformed(json!({"message": "no behavior"})),
                Step::Await("result"),
            ],
            setup: no_setup,
            replies: |_| {
                vec![
                    anthropic::message()
                        .id("msg_b1")
                        .tool_use("toolu_b1", "Bash", json!({"command": "rm -rf build"}))
                        .reply(),
                    anthropic::message()
                        .id("msg_b2")
                        .tool_use("toolu_b2", "Bash", json!({"command": "rm -rf dist"}))
                        .reply(),
                    anthropic::text_reply("ok, I won't"),
                ]
            },
            hook_fields: &[],
            env: &[],
        },
        Scenario {
            name: "denied-without-a-prompt-tool",
            args: args(&["-p", "write out.txt", "--output-format", "json"]),
            steps: vec![],
            setup: no_setup,
            replies: |dir| {
                let file = dir.join("out.txt").display().to_string();
                vec![
                    anthropic::tool_use_reply(
                        "toolu_w",
                        "Write",
                        json!({"file_path": file, "content": "x"}),
                    ),
                    anthropic::text_reply("could not write"),
                ]
            },
            hook_fields: &[],
            env: &[],
        },
        Scenario {
            name: "sub-agent",
            args: args(&[
                "-p",
                "delegate",
                "--output-format",
                "stream-json",
                "--verbose",
            ]),
            steps: vec![],
            setup: no_setup,
            // The parent calls a general-purpose sub-agent, which answers
            // at once; then the parent answers.
            replies: |_| {
                vec![
                    anthropic::tool_use_reply(
                        "toolu_agent",
                        "Agent",
                        json!({"description": "say found", "prompt": "Say found.",
                               "subagent_type": "general-purpose"}),
                    ),
                    anthropic::text_reply("found"),
                    anthropic::text_reply("done"),
                ]
            },
            hook_fields: &[],
            // Sub-agents in the foreground, so the requests come in one
            // order (both programs read this variable).
            env: &[("CLAUDE_CODE_DISABLE_BACKGROUND_TASKS", "1")],
        },
        Scenario {
            name: "initialize",
            args: args(&STREAM_IO),
            steps: vec![
                Step::Send(json!({"type": "control_request", "request_id": "req_init",
                                  "request": {"subtype": "initialize", "hooks": null}})),
                Step::Await("control_response"),
                user("hi"),
                Step::Await("result"),
            ],
            setup: no_setup,
            replies: |_| vec![anthropic::text_reply("hello")],
            hook_fields: &[],
            env: &[],
        },
        // The control requests the Python SDK sends besides initialize,
        // interrupt, set_permission_mode, set_model and mcp_status, each
        // answered before the next is sent, and one no program knows.
        Scenario {
            name: "control-requests",
            args: args(&STREAM_IO),
            steps: [
                json!({"subtype": "stop_task", "task_id": "no-such-task"}),
                json!({"subtype": "get_context_usage"}),
                json!({"subtype": "mcp_reconnect", "serverName": "nope"}),
                json!({"subtype": "mcp_toggle", "serverName": "nope", "enabled": false}),
                json!({"subtype": "rewind_files",
                       "user_message_id": "00000000-0000-0000-0000-000000000000"}),
                json!({"subtype": "rewind_files", "dry_run": true,
                       "user_message_id": "00000000-0000-0000-0000-000000000000"}),
                json!({"subtype": "bogus_thing"}),
            ]
            .into_iter()
            .enumerate()
            .flat_map(|(i, request)| {
                [
                    Step::Send(json!({"type": "control_request",
                                      "request_id": format!("req_{i}"), "request": request})),
                    Step::Await("control_response"),
                ]
            })
            .chain([user("hi"), Step::Await("result")])
            .collect(),
            setup: no_setup,
            replies: |_| vec![anthropic::text_reply("hello")],
            hook_fields: &[],
            env: &[],
        },
        // The control requests the TypeScript SDK sends about settings,
        // MCP servers, listings, usage and the queue, answered before a
        // prompt (src/cli/control.rs), then after one turn.
        Scenario {
            name: "control-queries",
            args: args(&STREAM_IO),
            steps: {
                let ask = |i: usize, request: Value| {
                    [
                        Step::Send(json!({"type": "control_request",
                                          "request_id": format!("req_{i}"), "request": request})),
                        Step::Await("control_response"),
                    ]
                };
                let before = [
                    json!({"subtype": "get_settings"}),
                    json!({"subtype": "apply_flag_settings",
                           "settings": {"permissions": {"deny": ["WebFetch"]}}}),
                    json!({"subtype": "get_settings"}),
                    json!({"subtype": "list_permission_rules"}),
                    json!({"subtype": "update_settings", "source": "localSettings",
                           "settings": {"model": "x"}}),
                    json!({"subtype": "update_settings", "source": "projectSettings",
                           "settings": {"outputStyle": "x"}}),
                    json!({"subtype": "mcp_set_servers", "servers": {}}),
                    json!({"subtype": "mcp_call", "tool": "mcp__nope__x", "arguments": {}}),
                    json!({"subtype": "mcp_read_resource", "serverName": "nope", "uri": "ui://a"}),
                    json!({"subtype": "mcp_read_resource", "serverName": "nope", "uri": "file:///a"}),
                    json!({"subtype": "background_tasks"}),
                    json!({"subtype": "get_task_output", "task_id": "b1234567"}),
                    json!({"subtype": "get_hooks_listing"}),
                    json!({"subtype": "cancel_async_message", "message_uuid": "nope"}),
                    json!({"subtype": "seed_read_state", "path": "a.txt", "mtime": 1}),
                ];
                let after = [
                    json!({"subtype": "get_usage", "skip_behaviors": true}),
                    json!({"subtype": "get_session_cost"}),
                ];
                let n = before.len();
                before
                    .into_iter()
                    .enumerate()
                    .flat_map(|(i, r)| ask(i, r))
                    .chain([user("hi"), Step::Await("result")])
                    .chain(
                        after
                            .into_iter()
                            .enumerate()
                            .flat_map(|(i, r)| ask(n + i, r)),
                    )
                    .collect()
            },
            setup: |p| {
                p.write(
                    ".claude/settings.json",
                    &json!({"permissions": {"ask": ["Bash(rm:*)"]},
                            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}})
                    .to_string(),
                );
            },
            replies: |_| vec![anthropic::text_reply("hello")],
            hook_fields: &[],
            env: &[],
        },
        // One call of each file and shell tool, each allowed by a flag:
        // the `user` message carrying each result has its typed
        // `tool_use_result`.
        Scenario {
            name: "tool-results",
            args: args(&[
                "-p",
                "use the tools",
                "--output-format",
                "stream-json",
                "--verbose",
                "--allowedTools",
                "Bash,Write,Edit,Read,Glob,Grep",
            ]),
            steps: vec![],
            setup: write_notes,
            replies: |dir| {
                let file = |name: &str| dir.join(name).display().to_string();
                let call = |id: &str, name: &str, input: Value| {
                    anthropic::message()
                        .id(&format!("msg_{id}"))
                        .tool_use(id, name, input)
                        .reply()
                };
                vec![
                    call("toolu_r", "Read", json!({"file_path": file("notes.txt")})),
                    call(
                        "toolu_e",
                        "Edit",
                        json!({"file_path": file("notes.txt"), "old_string": "hello",
                               "new_string": "goodbye"}),
                    ),
                    call(
                        "toolu_w",
                        "Write",
                        json!({"file_path": file("new.txt"), "content": "one\ntwo\n"}),
                    ),
                    call("toolu_b", "Bash", json!({"command": "echo hi"})),
                    call("toolu_g", "Glob", json!({"pattern": "*.txt"})),
                    call("toolu_s", "Grep", json!({"pattern": "goodbye"})),
                    anthropic::text_reply("done"),
                ]
            },
            hook_fields: &[],
            env: &[],
        },
        // The control requests hosts send about files, the session's name
        // and its watchers, each answered before the next.
        Scenario {
            name: "control-host",
            args: args(&STREAM_IO),
            steps: [
                // A query nothing matches: Claude Code's file index is
                // built in the background, so what it finds at once
                // depends on timing (tests/suite/control.rs checks cadre's
                // suggestions).
                json!({"subtype": "file_suggestions", "query": "no-such-name"}),
                json!({"subtype": "get_binary_version"}),
                json!({"subtype": "read_file", "path": "notes.txt"}),
                json!({"subtype": "read_file", "path": "/etc/hostname"}),
                json!({"subtype": "read_file", "path": "notes.txt", "max_bytes": 5}),
                json!({"subtype": "register_repo_root", "directory": "."}),
                json!({"subtype": "reload_output_styles"}),
                json!({"subtype": "rename_session", "title": "Tidy notes"}),
                json!({"subtype": "set_color", "color": "blue"}),
                json!({"subtype": "set_has_subscribers", "has_subscribers": false}),
            ]
            .into_iter()
            .enumerate()
            .flat_map(|(i, request)| {
                [
                    Step::Send(json!({"type": "control_request",
                                      "request_id": format!("req_{i}"), "request": request})),
                    Step::Await("control_response"),
                ]
            })
            .chain([user("hi"), Step::Await("result")])
            .collect(),
            setup: write_notes,
            replies: |_| vec![anthropic::text_reply("hello")],
            hook_fields: &[],
            env: &[],
        },
        // A project's own output style, chosen in its settings: `init`
        // names it.
        Scenario {
            name: "output-style",
            args: args(&["-p", "hi", "--output-format", "stream-json", "--verbose"]),
            steps: vec![],
            setup: |p| {
                p.write(
                    ".claude/output-styles/pirate.md",
                    "---\nname: Pirate\ndescription: Arr\n---\nSpeak like a pirate.\n",
                );
                p.write(".claude/settings.json", "{\"outputStyle\": \"Pirate\"}\n");
            },
            replies: |_| vec![anthropic::text_reply("arr")],
            hook_fields: &[],
            env: &[],
        },
    ]
}

/// Claude Code as the Python Agent SDK wheel bundles it, under `root`'s
/// `.ci/venv`; else a message saying how to install it.
pub(super) fn oracle_in(root: &Path) -> Result<PathBuf, String> {
    let lib = root.join(".ci/venv/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|rd| {
        rd.flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| {
                e.path()
                    .join("site-packages/claude_agent_sdk/_bundled/claude")
            })
            .find(|p| p.is_file())
    });
    found.ok_or_else(|| {
        format!(
            "Claude Code, the conformance oracle, is not installed: no \
             {}/python3*/site-packages/claude_agent_sdk/_bundled/claude. Run scripts/test \
             (it installs the Python Agent SDK, which bundles Claude Code, into .ci/venv).",
            lib.display()
        )
    })
}

fn oracle_version(bin: &Path) -> String {
    let out = Command::new(bin)
        .arg("--version")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A request of the main conversation: the Messages API with tools (Claude
/// Code's side requests — titles, quota probes — carry none).
pub(super) fn is_main(r: &RecordedRequest) -> bool {
    r.path.trim_end_matches('/').ends_with("/v1/messages")
        && r.json["tools"].as_array().is_some_and(|t| !t.is_empty())
}

fn json_body(v: Value) -> Reply {
    Reply::Body {
        code: 200,
        content_type: "application/json".into(),
        body: v.to_string().into_bytes(),
    }
}

/// The harmless answer to a request outside the main conversation (token
/// counts, Claude Code's titles and probes); `None` for a main one.
pub(super) fn side_reply(r: &RecordedRequest) -> Option<Reply> {
    if r.path.contains("count_tokens") {
        return Some(json_body(json!({"input_tokens": 10})));
    }
    if is_main(r) {
        return None;
    }
    if r.json["stream"] == true {
        return Some(anthropic::text_reply("ok"));
    }
    Some(json_body(
        json!({"id": "msg_side", "type": "message", "role": "assistant",
        "model": MODEL, "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 1}}),
    ))
}

/// A server that plays `script` to the main conversation and answers
/// everything else harmlessly.
pub(super) fn server(script: Vec<Reply>) -> FakeServer {
    let queue = Mutex::new(VecDeque::from(script));
    FakeServer::route(move |r| {
        if let Some(side) = side_reply(r) {
            return side;
        }
        let next = queue.lock().map(|mut q| q.pop_front()).ok().flatten();
        next.unwrap_or_else(|| {
            Reply::anthropic_error(400, "invalid_request_error", "no scripted reply left")
        })
    })
}

#[derive(Clone, Copy, Debug)]
enum Program {
    ClaudeCode,
    Cadre,
}

/// What one program did in one scenario, paths normalised.
struct Observed {
    exit: i32,
    events: Vec<Value>,
    control: Vec<Value>,
    requests: Vec<Value>,
    hooks: Vec<Value>,
}

fn run(program: Program, oracle: &Path, sc: &Scenario) -> Observed {
    let p = Project::new();
    (sc.setup)(&p);
    let server = server((sc.replies)(p.path()));
    server.skip_invariant_checks();
    let mut cmd = match program {
        Program::Cadre => p.command(Some(&server)),
        Program::ClaudeCode => {
            let mut c = Command::new(oracle);
            c.current_dir(p.path())
                .env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env("HOME", p.home.path())
                .env("NO_COLOR", "1")
                .env("ANTHROPIC_BASE_URL", server.url())
                .env("ANTHROPIC_API_KEY", TEST_KEY)
                .env("DISABLE_TELEMETRY", "1")
                .env("DISABLE_AUTOUPDATER", "1")
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
            c
        }
    };
    cmd.envs(sc.env.iter().copied())
        .args(&sc.args)
        .stdin(if sc.steps.is_empty() {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("{program:?}: cannot start: {e}"));
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines: Vec<String> = Vec::new();
    let mut stdin = child.stdin.take();
    let hung = |lines: &[String], what: &str, child: &mut std::process::Child| -> ! {
        let _ = child.kill();
        panic!(
            "{} / {program:?}: no {what} within {HUNG:?}; stdout so far:\n{}",
            sc.name,
            lines.join("\n")
        )
    };
    for step in &sc.steps {
        match step {
            Step::Send(v) => {
                let problems = wire_schema::input_problems(v);
                assert!(
                    problems.is_empty(),
                    "{}: a line sent does not fit docs/schemas/stream-json-input.schema.json: {v}\n{}",
                    sc.name,
                    problems.join("\n")
                );
                if let Some(w) = stdin.as_mut() {
                    let _ = writeln!(w, "{v}").and_then(|()| w.flush());
                }
            }
            Step::Await(ty) => {
                await_line(&rx, &mut lines, |v| v["type"] == *ty)
                    .unwrap_or_else(|| hung(&lines, ty, &mut child));
            }
            Step::Deny(_) | Step::Malformed(_) => {
                let is_ask = |v: &Value| {
                    v["type"] == "control_request" && v["request"]["subtype"] == "can_use_tool"
                };
                let ask = await_line(&rx, &mut lines, is_ask)
                    .unwrap_or_else(|| hung(&lines, "can_use_tool request", &mut child));
                let response = match step {
                    Step::Malformed(v) => v.clone(),
                    _ => json!({"behavior": "deny", "message": deny_message(step)}),
                };
                let answer = json!({"type": "control_response", "response": {
                    "subtype": "success", "request_id": ask["request_id"],
                    "response": response}});
                if !matches!(step, Step::Malformed(_)) {
                    assert_eq!(wire_schema::input_problems(&answer), Vec::<String>::new());
                }
                if let Some(w) = stdin.as_mut() {
                    let _ = writeln!(w, "{answer}").and_then(|()| w.flush());
                }
            }
        }
    }
    drop(stdin);
    loop {
        match rx.recv_timeout(HUNG) {
            Ok(line) => lines.push(line),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => hung(&lines, "end of output", &mut child),
        }
    }
    let exit = child.wait().map(|s| s.code().unwrap_or(-1)).unwrap_or(-1);
    let stderr = err_reader.join().unwrap_or_default();
    let replace = [
        (
            p.path().canonicalize().unwrap().display().to_string(),
            "<project>",
        ),
        (p.path().display().to_string(), "<project>"),
        (p.home.path().display().to_string(), "<home>"),
    ];
    let raw: Vec<Value> = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap_or_else(|e| {
                panic!(
                    "{} / {program:?}: stdout line is not JSON ({e}): {l}\nstderr:\n{stderr}",
                    sc.name
                )
            })
        })
        .collect();
    // What cadre writes fits the schemas it commits (docs/schemas/).
    if matches!(program, Program::Cadre) {
        wire_schema::assert_output_fits(sc.name, &raw);
    }
    let parsed: Vec<Value> = raw.iter().map(|v| shape::normalise(v, &replace)).collect();
    let (control, events) = parsed
        .into_iter()
        .partition(|v| v["type"] == "control_response");
    let hook_log = std::fs::read_to_string(p.path().join("hook-input.jsonl")).unwrap_or_default();
    let hooks = serde_json::Deserializer::from_str(&hook_log)
        .into_iter::<Value>()
        .map(|v| {
            shape::normalise(
                &v.unwrap_or_else(|e| panic!("{program:?}: bad hook input ({e}): {hook_log}")),
                &replace,
            )
        })
        .collect();
    let requests = server
        .requests()
        .iter()
        .filter(|r| is_main(r))
        .map(|r| r.json.clone())
        .collect();
    Observed {
        exit,
        events,
        control,
        requests,
        hooks,
    }
}

/// Reads output lines into `lines` up to one that parses and satisfies
/// `done`; returns it, or `None` when none comes within [`HUNG`].
fn await_line(
    rx: &mpsc::Receiver<String>,
    lines: &mut Vec<String>,
    done: impl Fn(&Value) -> bool,
) -> Option<Value> {
    loop {
        let line = rx.recv_timeout(HUNG).ok()?;
        let v = serde_json::from_str::<Value>(&line).ok();
        lines.push(line);
        if let Some(v) = v.filter(|v| done(v)) {
            return Some(v);
        }
    }
}

/// Every difference of cadre from Claude Code in one scenario.
fn compare(sc: &Scenario, claude: &Observed, cadre: &Observed) -> Vec<Difference> {
    let mut out = shape::compare_events(&claude.events, &cadre.events);
    if claude.exit != cadre.exit {
        out.push(Difference {
            area: Area::Result,
            path: "exit_code".into(),
            claude: claude.exit.to_string(),
            cadre: cadre.exit.to_string(),
        });
    }
    out.extend(shape::compare_results(&claude.events, &cadre.events));
    out.extend(shape::compare_requests(&claude.requests, &cadre.requests));
    out.extend(shape::compare_objects(
        Area::Hooks,
        "input",
        &claude.hooks,
        &cadre.hooks,
        sc.hook_fields,
    ));
    out.extend(shape::compare_objects(
        Area::Control,
        "control_response",
        &claude.control,
        &cadre.control,
        &["/response/subtype", "/response/request_id"],
    ));
    out
}

/// One row of the reviewed list.
#[derive(Debug)]
struct Listed {
    line: usize,
    scenario: String,
    area: String,
    path: String,
}

impl Listed {
    fn matches(&self, scenario: &str, d: &Difference) -> bool {
        (self.scenario == "*" || self.scenario == scenario)
            && self.area == d.area.as_str()
            && self.path == d.path
    }
}

/// The heading above the table of differences.
const TABLE_HEADING: &str = "## Differences";

/// The rows of the table under [`TABLE_HEADING`]: `| scenario | area |
/// path | Claude Code | cadre | why |`, cells trimmed of spaces and
/// backticks.
fn parse_listed(text: &str) -> Result<Vec<Listed>, String> {
    let mut out = Vec::new();
    let Some(start) = text.lines().position(|l| l.trim() == TABLE_HEADING) else {
        return Err(format!("no {TABLE_HEADING:?} heading"));
    };
    for (i, line) in text.lines().enumerate().skip(start + 1) {
        let line = line.trim();
        if !line.starts_with('|') {
            continue;
        }
        let cells: Vec<String> = line
            .replace("\\|", "\u{1}")
            .trim_matches('|')
            .split('|')
            .map(|c| c.replace('\u{1}', "|").trim().trim_matches('`').to_string())
            .collect();
        if cells
            .first()
            .is_some_and(|c| c == "scenario" || c.starts_with("---"))
        {
            continue;
        }
        let n = i + 1;
        if cells.len() != 6 {
            return Err(format!("line {n}: expected 6 cells, found {}", cells.len()));
        }
        if !Area::ALL.iter().any(|a| a.as_str() == cells[1]) {
            return Err(format!("line {n}: unknown area {:?}", cells[1]));
        }
        if cells[5].is_empty() {
            return Err(format!("line {n}: say why the difference is kept"));
        }
        out.push(Listed {
            line: n,
            scenario: cells[0].clone(),
            area: cells[1].clone(),
            path: cells[2].clone(),
        });
    }
    Ok(out)
}

/// What is wrong with the list given what was found: differences it does
/// not list, and rows that match nothing (each as a readable line).
fn check_listed(found: &[(&str, Difference)], listed: &[Listed]) -> (Vec<String>, Vec<String>) {
    let unlisted = found
        .iter()
        .filter(|(sc, d)| !listed.iter().any(|l| l.matches(sc, d)))
        .map(|(sc, d)| {
            format!(
                "| {sc} | {} | `{}` | {} | {} | ? |",
                d.area,
                d.path,
                d.claude.replace('|', "\\|"),
                d.cadre.replace('|', "\\|")
            )
        })
        .collect();
    let stale = listed
        .iter()
        .filter(|l| !found.iter().any(|(sc, d)| l.matches(sc, d)))
        .map(|l| format!("line {}: {} | {} | {}", l.line, l.scenario, l.area, l.path))
        .collect();
    (unlisted, stale)
}

#[test]
fn cadre_matches_claude_code_up_to_the_listed_differences() {
    let oracle = oracle_in(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap_or_else(|e| panic!("{e}"));
    let version = oracle_version(&oracle);
    eprintln!("conformance oracle: {version} ({})", oracle.display());
    let list_path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DIFFERENCES);
    let text = std::fs::read_to_string(&list_path)
        .unwrap_or_else(|e| panic!("{}: {e}", list_path.display()));
    let listed = parse_listed(&text).unwrap_or_else(|e| panic!("{DIFFERENCES}: {e}"));
    // `CADRE_CONFORMANCE_ONLY=a,b` runs only these scenarios (while working
    // on one); rows for every scenario (`*`) are then not checked for
    // staleness, and neither are the other scenarios' rows.
    let only: Option<Vec<String>> = std::env::var("CADRE_CONFORMANCE_ONLY")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let all: Vec<Scenario> = scenarios()
        .into_iter()
        .filter(|sc| only.as_ref().is_none_or(|o| o.iter().any(|n| n == sc.name)))
        .collect();
    let mut found = Vec::new();
    // `CADRE_CONFORMANCE_DUMP=DIR` writes what each program printed, per
    // scenario, to DIR (while working on a difference).
    let dump = std::env::var_os("CADRE_CONFORMANCE_DUMP").map(PathBuf::from);
    for sc in &all {
        let claude = run(Program::ClaudeCode, &oracle, sc);
        let cadre = run(Program::Cadre, &oracle, sc);
        if let Some(dir) = &dump {
            for (who, o) in [("claude", &claude), ("cadre", &cadre)] {
                let lines: Vec<String> = o
                    .events
                    .iter()
                    .chain(&o.control)
                    .map(Value::to_string)
                    .collect();
                let _ = std::fs::create_dir_all(dir);
                let _ = std::fs::write(
                    dir.join(format!("{}.{who}.jsonl", sc.name)),
                    lines.join("\n"),
                );
            }
        }
        found.extend(
            compare(sc, &claude, &cadre)
                .into_iter()
                .map(|d| (sc.name, d)),
        );
    }
    let mut per_area: Vec<String> = Area::ALL
        .iter()
        .map(|a| format!("{a} {}", found.iter().filter(|(_, d)| d.area == *a).count()))
        .collect();
    per_area.insert(0, format!("{} scenarios", all.len()));
    eprintln!("differences with {version}: {}", per_area.join(", "));
    let (unlisted, mut stale) = check_listed(&found, &listed);
    if let Some(o) = &only {
        stale.retain(|row| {
            listed
                .iter()
                .any(|l| o.contains(&l.scenario) && row.starts_with(&format!("line {}:", l.line)))
        });
    }
    assert!(
        unlisted.is_empty() && stale.is_empty(),
        "cadre against {version}: the differences do not match {DIFFERENCES}.\n\
         Not listed ({}): fix cadre, or add the row with why it is kept:\n{}\n\
         Listed but no longer seen ({}): remove the row:\n{}",
        unlisted.len(),
        unlisted.join("\n"),
        stale.len(),
        stale.join("\n")
    );
}

#[test]
fn a_missing_oracle_says_how_to_install_it() {
    let empty = tempfile::tempdir().unwrap();
    let e = oracle_in(empty.path()).unwrap_err();
    assert!(e.contains("Run scripts/test"), "{e}");
}

#[test]
fn the_list_check_fails_on_unlisted_and_stale_rows() {
    let listed = parse_listed(
        "## Differences\n\
         | scenario | area | path | Claude Code | cadre | why |\n\
         |---|---|---|---|---|---|\n\
         | * | result | `[0].num_turns` | 1 | 2 | to fix: issue 33 |\n\
         | json-text | events | `sequence` | a | b | kept: cadre's own |\n",
    )
    .unwrap();
    let d = |area, path: &str| Difference {
        area,
        path: path.into(),
        claude: "1".into(),
        cadre: "2".into(),
    };
    let found = [
        ("any", d(Area::Result, "[0].num_turns")),
        ("any", d(Area::Hooks, "input.cwd")),
    ];
    let (unlisted, stale) = check_listed(&found, &listed);
    assert_eq!(unlisted, ["| any | hooks | `input.cwd` | 1 | 2 | ? |"]);
    assert_eq!(stale, ["line 5: json-text | events | sequence"]);
    assert!(parse_listed("## Differences\n| x | nowhere | p | a | b | c |").is_err());
    assert!(parse_listed("## Differences\n| x | events | p | a | b | |").is_err());
    assert!(parse_listed("| x | events | p | a | b | c |").is_err());
}
