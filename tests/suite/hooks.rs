//! Hooks end to end: PreToolUse blocks before permissions, PostToolUse and
//! SubagentStart add context, a hanging hook is killed at its timeout,
//! frontmatter hooks fire only inside their agent, SubagentStop sends a
//! child back to work (a bounded number of times).

use serde_json::{Value, json};

use super::harness::{
    Project, assistant_turns, child_requests_of, has_main_prompt as is_main, last_tool_results,
    result_text,
};
use super::kit::{FakeServer, RecordedRequest, anthropic};

fn child_requests(server: &FakeServer) -> Vec<RecordedRequest> {
    child_requests_of(server, false)
}

/// The main agent makes `calls` in one message, then says "all done";
/// every child plays `child(turn)`: a tool call, or text when `None`.
fn server(
    calls: Vec<(&'static str, &'static str, Value)>,
    child: fn(usize) -> Option<(&'static str, Value)>,
) -> FakeServer {
    FakeServer::route(move |r| {
        if is_main(r) {
            if assistant_turns(r) == 0 {
                let mut m = anthropic::message();
                for (id, name, input) in &calls {
                    m = m.tool_use(id, name, input.clone());
                }
                return m.reply();
            }
            return anthropic::text_reply("all done");
        }
        let n = assistant_turns(r);
        match child(n) {
            Some((name, input)) => anthropic::message()
                .tool_use(&format!("toolu_c{n}"), name, input)
                .reply(),
            None => anthropic::text_reply(&format!("child answer {n}")),
        }
    })
}

fn main_results(server: &FakeServer) -> Vec<Value> {
    let r = server
        .requests()
        .into_iter()
        .find(|r| is_main(r) && assistant_turns(r) == 1)
        .expect("main's second request");
    last_tool_results(&r.json)
}

fn no_child(_: usize) -> Option<(&'static str, Value)> {
    None
}

#[test]
fn pre_tool_use_exit_2_blocks_even_in_bypass_mode_and_post_tool_use_adds_context() {
    let mut p = Project::new();
    p.config(
        r#"
[permissions]
default_mode = "bypassPermissions"

[[hooks.PreToolUse]]
matcher = "Bash"
command = "if grep -q '\"rm '; then echo 'rm is not allowed here' >&2; exit 2; fi"

[[hooks.PreToolUse]]
matcher = "Read"
command = "echo 'never for Bash' >&2; exit 2"

[[hooks.PostToolUse]]
matcher = "Bash"
command = "echo '{\"hookSpecificOutput\": {\"additionalContext\": \"POST-CONTEXT\"}}'"
"#,
    );
    p.write("keep.txt", "keep\n");
    let server = server(
        vec![
            ("toolu_1", "Bash", json!({"command": "rm -f keep.txt"})),
            ("toolu_2", "Bash", json!({"command": "echo still here"})),
        ],
        no_child,
    );
    p.run(Some(&server), &["run", "go"]).ok();
    let results = main_results(&server);
    assert_eq!(results[0]["is_error"], true);
    let blocked = result_text(&results[0]);
    assert!(blocked.contains("rm is not allowed here"), "{blocked}");
    assert!(!blocked.contains("POST-CONTEXT"), "the tool did not run");
    assert!(p.path().join("keep.txt").exists());
    let ran = result_text(&results[1]);
    assert_eq!(results[1]["is_error"], Value::Null, "{ran}");
    assert!(
        ran.contains("still here") && ran.contains("POST-CONTEXT"),
        "{ran}"
    );
}

#[test]
fn a_pre_tool_use_block_wins_over_an_allow_rule_and_sees_its_input() {
    let mut p = Project::new();
    p.config(
        r#"
[permissions]
allow = ["Bash"]

[[hooks.PreToolUse]]
command = "cat > hook-input.json; echo blocked by policy >&2; exit 2"
"#,
    );
    let server = server(
        vec![("toolu_1", "Bash", json!({"command": "echo hi"}))],
        no_child,
    );
    p.run(Some(&server), &["run", "go"]).ok();
    let text = result_text(&main_results(&server)[0]);
    assert!(text.contains("blocked by policy"), "{text}");
    let input: Value = serde_json::from_str(&p.read("hook-input.json")).unwrap();
    assert_eq!(input["hook_event_name"], "PreToolUse");
    assert_eq!(input["tool_name"], "Bash");
    assert_eq!(input["tool_input"], json!({"command": "echo hi"}));
    assert_eq!(input["agent_id"], "main");
    assert!(input["session_id"].is_string());
    assert!(input["transcript_path"].is_string());
    assert_eq!(
        std::path::Path::new(input["cwd"].as_str().unwrap()),
        p.path()
    );
}

#[test]
fn subagent_start_context_reaches_the_childs_first_request() {
    let mut p = Project::new();
    p.config(
        r#"
[[hooks.SubagentStart]]
matcher = "general-purpose"
command = "echo '{\"hookSpecificOutput\": {\"additionalContext\": \"CTX-FROM-HOOK\"}}'"

[[hooks.SubagentStart]]
matcher = "Explore"
command = "echo '{\"additionalContext\": \"NOT-FOR-GP\"}'"
"#,
    );
    let server = server(
        vec![(
            "toolu_1",
            "Agent",
            json!({"description": "d", "prompt": "the task"}),
        )],
        no_child,
    );
    p.run(Some(&server), &["run", "go"]).ok();
    let children = child_requests(&server);
    assert_eq!(children.len(), 1);
    let first = &children[0].messages()[0];
    assert_eq!(first["content"][0]["text"], "the task");
    let all = first.to_string();
    assert!(all.contains("CTX-FROM-HOOK"), "{all}");
    assert!(!all.contains("NOT-FOR-GP"), "{all}");
    assert!(!server.request(0).contains("CTX-FROM-HOOK"));
}

#[test]
fn a_hanging_hook_is_killed_at_its_timeout_and_the_run_goes_on() {
    let mut p = Project::new();
    p.config(
        r#"
[permissions]
default_mode = "bypassPermissions"

[[hooks.PreToolUse]]
command = "sleep 30; echo never >&2; exit 2"
timeout_ms = 500
"#,
    );
    let server = server(
        vec![("toolu_1", "Bash", json!({"command": "echo ran"}))],
        no_child,
    );
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let results = main_results(&server);
    assert_eq!(results[0]["is_error"], Value::Null);
    assert!(result_text(&results[0]).contains("ran"));
    assert!(run.stderr.contains("timed out"), "{}", run.stderr);
}

const WORKER: &str = r#"---
name: worker
description: Does work
tools: Read
hooks:
  PreToolUse:
    - matcher: Read
      hooks:
        - type: command
          command: "cat >> hook.log; echo >> hook.log"
---
You work.
"#;

#[test]
fn frontmatter_hooks_fire_only_inside_their_agent() {
    let p = Project::new();
    p.write(".claude/agents/worker.md", WORKER);
    let server = server(
        vec![
            ("toolu_1", "Read", json!({"file_path": "cadre.toml"})),
            (
                "toolu_2",
                "Agent",
                json!({"description": "d", "prompt": "work", "subagent_type": "worker"}),
            ),
        ],
        |n| (n == 0).then(|| ("Read", json!({"file_path": "cadre.toml"}))),
    );
    p.run(Some(&server), &["run", "go"]).ok();
    let log = p.read("hook.log");
    let lines: Vec<Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert_eq!(lines[0]["agent_type"], "worker");
    assert_eq!(lines[0]["tool_name"], "Read");
    assert_ne!(lines[0]["agent_id"], "main");
}

#[test]
fn subagent_stop_exit_2_sends_the_child_back_once() {
    let mut p = Project::new();
    p.config(
        r#"
[[hooks.SubagentStop]]
command = "cat > stop-input.json; if [ -f stopped-once ]; then exit 0; fi; touch stopped-once; echo 'also list the risks' >&2; exit 2"
"#,
    );
    let server = server(
        vec![(
            "toolu_1",
            "Agent",
            json!({"description": "d", "prompt": "the task"}),
        )],
        no_child,
    );
    p.run(Some(&server), &["run", "go"]).ok();
    let children = child_requests(&server);
    assert_eq!(children.len(), 2);
    assert!(
        children[1].last_user_text().contains("also list the risks"),
        "{}",
        children[1].last_user_text()
    );
    let text = result_text(&main_results(&server)[0]);
    assert!(text.starts_with("child answer 1"), "{text}");
    let input: Value = serde_json::from_str(&p.read("stop-input.json")).unwrap();
    assert_eq!(input["hook_event_name"], "SubagentStop");
    assert_eq!(input["agent_type"], "general-purpose");
    assert_eq!(input["stop_hook_active"], true);
    assert_eq!(input["last_assistant_message"], "child answer 1");
}

#[test]
fn subagent_stop_cannot_keep_a_child_forever() {
    let mut p = Project::new();
    p.config(
        r#"
[[hooks.SubagentStop]]
command = "echo 'not yet' >&2; exit 2"
"#,
    );
    let server = server(
        vec![(
            "toolu_1",
            "Agent",
            json!({"description": "d", "prompt": "the task"}),
        )],
        no_child,
    );
    p.run(Some(&server), &["run", "go"]).ok();
    assert_eq!(
        child_requests(&server).len(),
        4,
        "the first stop plus three returns"
    );
    let text = result_text(&main_results(&server)[0]);
    assert!(text.starts_with("child answer 3"), "{text}");
}

/// A PreToolUse hook as a team writes it in `.claude/settings.json`.
fn settings_hooks(p: &Project, hooks: Value) {
    p.write(
        ".claude/settings.json",
        &serde_json::to_string_pretty(&json!({ "hooks": hooks })).unwrap(),
    );
}

/// The model's command: harmless if never run as shell code, but a shell
/// that reads the hook's JSON input as a script expands it.
const SHELL_IN_INPUT: &str = "echo $(touch stdin-executed)";

#[test]
fn a_hook_with_args_runs_its_program_directly_and_never_executes_its_input() {
    let p = Project::new();
    p.write(
        ".claude/hooks/check.sh",
        "cat > seen.json\nprintf '%s|%s' \"$0\" \"$1\" > ran-with.txt\necho 'blocked by check.sh' >&2\nexit 2\n",
    );
    settings_hooks(
        &p,
        json!({"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "bash", "args": [".claude/hooks/check.sh", "two words"]}
        ]}]}),
    );
    let server = server(
        vec![("toolu_1", "Bash", json!({"command": SHELL_IN_INPUT}))],
        no_child,
    );
    p.run(Some(&server), &["run", "go"]).ok();
    assert!(
        !p.path().join("stdin-executed").exists(),
        "the hook's stdin was run as a shell script"
    );
    assert_eq!(p.read("ran-with.txt"), ".claude/hooks/check.sh|two words");
    let seen: Value = serde_json::from_str(&p.read("seen.json")).unwrap();
    assert_eq!(seen["tool_input"]["command"], SHELL_IN_INPUT);
    let results = main_results(&server);
    assert_eq!(results[0]["is_error"], true);
    let text = result_text(&results[0]);
    assert!(text.contains("blocked by check.sh"), "{text}");
}

#[test]
fn hooks_get_claude_project_dir_and_a_script_named_by_it_runs() {
    let p = Project::new();
    p.write(
        ".claude/hooks/where.sh",
        "printf '%s\\n%s\\n' \"$CLAUDE_PROJECT_DIR\" \"$(pwd)\" > \"$CLAUDE_PROJECT_DIR/where.txt\"\necho '{\"additionalContext\": \"FROM-PROJECT-HOOK\"}'\n",
    );
    settings_hooks(
        &p,
        json!({"PostToolUse": [{"matcher": "Read", "hooks": [
            {"type": "command", "command": "bash \"$CLAUDE_PROJECT_DIR\"/.claude/hooks/where.sh"}
        ]}]}),
    );
    let server = server(
        vec![("toolu_1", "Read", json!({"file_path": "cadre.toml"}))],
        no_child,
    );
    p.run(Some(&server), &["run", "go"]).ok();
    let text = result_text(&main_results(&server)[0]);
    assert!(text.contains("FROM-PROJECT-HOOK"), "{text}");
    let root = std::fs::canonicalize(p.path()).unwrap();
    let lines: Vec<String> = p.read("where.txt").lines().map(String::from).collect();
    assert_eq!(
        lines
            .iter()
            .map(|l| std::fs::canonicalize(l).unwrap())
            .collect::<Vec<_>>(),
        [root.clone(), root]
    );
}

#[test]
fn an_async_hook_does_not_hold_up_the_call_and_cannot_block_it() {
    let p = Project::new();
    // The async PreToolUse hook can only finish once the PostToolUse hook
    // (which runs after the tool) has started: were it awaited, the tool
    // would wait for it, and the PostToolUse hook would never see it end.
    settings_hooks(
        &p,
        json!({
            "PreToolUse": [{"matcher": "Read", "hooks": [{"type": "command", "async": true, "timeout": 60,
                "command": "until [ -f post-started ]; do sleep 0.05; done; touch async-finished; echo 'too late to block' >&2; exit 2"}]}],
            "PostToolUse": [{"matcher": "Read", "hooks": [{"type": "command",
                "command": "touch post-started; for i in $(seq 400); do [ -f async-finished ] && break; sleep 0.05; done; [ -f async-finished ] && echo '{\"additionalContext\": \"ASYNC-HOOK-ENDED-AFTER-THE-TOOL\"}'; exit 0"}]}]
        }),
    );
    let server = server(
        vec![("toolu_1", "Read", json!({"file_path": "cadre.toml"}))],
        no_child,
    );
    p.run(Some(&server), &["run", "go"]).ok();
    let results = main_results(&server);
    let text = result_text(&results[0]);
    assert_eq!(results[0]["is_error"], Value::Null, "{text}");
    assert!(text.contains("ASYNC-HOOK-ENDED-AFTER-THE-TOOL"), "{text}");
    assert!(!text.contains("too late to block"), "{text}");
}

#[test]
fn hook_entries_are_checked_strictly_and_a_bad_one_never_runs() {
    let p = Project::new();
    let settings = r#"{
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Read",
        "hooks": [
          {"type": "command", "command": "echo typo >> ran.log", "timout": 5},
          {"type": "command", "command": "echo args >> ran.log", "args": "x"},
          {"type": "command", "command": "echo timeout >> ran.log", "timeout": "soon"},
          {"type": "command", "command": "echo good >> ran.log", "statusMessage": "checking"}
        ]
      },
      {"matchr": "Read", "hooks": [{"type": "command", "command": "echo group >> ran.log"}]}
    ]
  }
}"#;
    p.write(".claude/settings.json", settings);
    let server = server(
        vec![("toolu_1", "Read", json!({"file_path": "cadre.toml"}))],
        no_child,
    );
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    assert_eq!(p.read("ran.log"), "good\n");
    for needle in [
        ".claude/settings.json:7:66: warning: hooks.PreToolUse: unknown key `timout`",
        ".claude/settings.json:8:74: warning: hooks.PreToolUse: `args`: expected a list of strings",
        ".claude/settings.json:9:80: warning: hooks.PreToolUse: `timeout`: expected a positive number of seconds",
        ".claude/settings.json:13:8: warning: hooks.PreToolUse: unknown key `matchr`; a matcher group has matcher, hooks; the hooks of this group are not run",
    ] {
        assert!(run.stderr.contains(needle), "{needle}\n{}", run.stderr);
    }
}

#[test]
fn a_flood_of_hook_output_is_kept_bounded_and_an_endless_writer_is_stopped() {
    let p = Project::new();
    settings_hooks(
        &p,
        json!({"PreToolUse": [
            {"matcher": "Read", "hooks": [{"type": "command",
                "command": "yes 'stderr flood' | head -c 100000000 >&2; exit 2"}]},
            {"matcher": "Glob", "hooks": [{"type": "command", "timeout": 1, "command": "yes"}]}
        ]}),
    );
    let server = server(
        vec![
            ("toolu_1", "Read", json!({"file_path": "cadre.toml"})),
            ("toolu_2", "Glob", json!({"pattern": "*.toml"})),
        ],
        no_child,
    );
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let results = main_results(&server);
    assert_eq!(results[0]["is_error"], true);
    let blocked = result_text(&results[0]);
    assert!(
        blocked.starts_with("A PreToolUse hook blocked this Read call: stderr flood\nstderr flood"),
        "{}",
        &blocked[..200]
    );
    assert!(
        blocked.len() < 2 * 1024 * 1024,
        "{} bytes reached the model",
        blocked.len()
    );
    assert!(blocked.contains("characters truncated"), "the cut is said");
    let globbed = result_text(&results[1]);
    assert_eq!(results[1]["is_error"], Value::Null, "{globbed}");
    assert!(globbed.contains("cadre.toml"), "{globbed}");
    assert!(run.stderr.contains("timed out"), "{}", run.stderr);
}

/// One pipeline for every call: a management tool (TaskStop here, whose
/// call fails: there is no such task) passes the hooks after a call like a
/// built-in tool, and the hook's context reaches the model with its
/// result. A failed call fires PostToolUseFailure (with the error), a
/// successful one PostToolUse, never both, as in Claude Code.
#[test]
fn a_management_tool_call_passes_the_hooks_after_a_call_like_any_other() {
    let mut p = Project::new();
    p.config(
        r#"
[permissions]
allow = ["Bash"]

[[hooks.PostToolUse]]
command = "cat >> post.jsonl; echo >> post.jsonl"

[[hooks.PostToolUseFailure]]
command = "cat >> failure.jsonl; echo >> failure.jsonl; echo '{\"hookSpecificOutput\": {\"additionalContext\": \"AFTER-FAILURE\"}}'"
"#,
    );
    let server = server(
        vec![
            ("toolu_1", "TaskStop", json!({"task_id": "no-such-task"})),
            ("toolu_2", "Bash", json!({"command": "echo fine"})),
            ("toolu_3", "Bash", json!({"command": "exit 3"})),
        ],
        no_child,
    );
    p.run(Some(&server), &["run", "go"]).ok();
    let results = main_results(&server);
    assert!(result_text(&results[0]).contains("AFTER-FAILURE"));
    assert!(!result_text(&results[1]).contains("AFTER-FAILURE"));
    assert!(result_text(&results[2]).contains("AFTER-FAILURE"));
    let read = |file: &str| -> Vec<Value> {
        p.read(file)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let failures = read("failure.jsonl");
    let names: Vec<&str> = failures
        .iter()
        .map(|v| v["tool_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["TaskStop", "Bash"]);
    assert_eq!(failures[0]["hook_event_name"], "PostToolUseFailure");
    assert_eq!(
        failures[0]["tool_input"],
        json!({"task_id": "no-such-task"})
    );
    assert!(
        failures[0]["error"]
            .as_str()
            .unwrap()
            .contains("no-such-task")
    );
    assert_eq!(failures[0]["is_interrupt"], false);
    let posts = read("post.jsonl");
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0]["tool_name"], "Bash");
    assert_eq!(posts[0]["tool_input"], json!({"command": "echo fine"}));
    assert_eq!(posts[0]["tool_response"]["is_error"], false);
}
