//! Hook events beyond the tool calls, and hook types beyond commands, end
//! to end through the binary with a `.claude/settings.json` written the way
//! a team writes it: SessionStart, UserPromptSubmit, Stop, SessionEnd and
//! PermissionRequest fire with Claude Code's input and decisions; `http`
//! hooks POST their input to a server; `prompt` hooks ask the model; and
//! in an untrusted folder no project hook of any type runs.

use serde_json::{Value, json};

use super::harness::{Project, has_main_prompt as is_main, last_tool_results, result_text};
use super::kit::{FakeServer, Reply, anthropic};

/// The project's `.claude/settings.json` with these hooks.
fn settings_hooks(p: &Project, hooks: Value) {
    p.write(
        ".claude/settings.json",
        &serde_json::to_string_pretty(&json!({ "hooks": hooks })).unwrap(),
    );
}

fn command(c: &str) -> Value {
    json!([{"hooks": [{"type": "command", "command": c}]}])
}

fn read_json(p: &Project, rel: &str) -> Value {
    serde_json::from_str(&p.read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Whether a request is a prompt hook's question.
fn is_hook_question(r: &super::kit::RecordedRequest) -> bool {
    r.system_text().contains("You evaluate a hook condition")
}

#[test]
fn session_start_prompt_submit_stop_and_session_end_fire_with_their_input() {
    let p = Project::new();
    settings_hooks(
        &p,
        json!({
            "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command",
                "command": "cat > session-start.json; echo '{\"hookSpecificOutput\": {\"hookEventName\": \"SessionStart\", \"additionalContext\": \"START-CONTEXT\"}}'"}]},
                {"matcher": "resume", "hooks": [{"type": "command", "command": "touch wrong-source"}]}],
            "UserPromptSubmit": command("cat > prompt.json; echo PROMPT-CONTEXT"),
            "Stop": command(
                "n=$(ls stop-*.json 2>/dev/null | wc -l); cat > stop-$n.json; \
                 if grep -q '\"stop_hook_active\":false' stop-$n.json; then \
                 echo '{\"decision\": \"block\", \"reason\": \"RUN THE TESTS FIRST\"}'; fi"
            ),
            "SessionEnd": command("cat > session-end.json"),
        }),
    );
    let server = FakeServer::route(|r| {
        let n = r
            .messages()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count();
        anthropic::text_reply(&format!("answer {n}"))
    });
    let out = p.run(Some(&server), &["-p", "do the thing"]);
    out.ok();
    assert!(out.stdout.contains("answer 1"), "{}", out.stdout);

    let start = read_json(&p, "session-start.json");
    assert_eq!(start["hook_event_name"], "SessionStart");
    assert_eq!(start["source"], "startup");
    assert!(start["session_id"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(
        !p.path().join("wrong-source").exists(),
        "matcher: the source"
    );
    let prompt = read_json(&p, "prompt.json");
    assert_eq!(prompt["hook_event_name"], "UserPromptSubmit");
    assert_eq!(prompt["prompt"], "do the thing");
    assert_eq!(prompt["session_id"], start["session_id"]);

    let requests = server.requests();
    assert_eq!(
        requests.len(),
        2,
        "one answer, then one more after the Stop block"
    );
    // Both contexts reach the model with the prompt, in the first user
    // message (the cached prefix of the second request is the first's).
    let first = requests[0].body_str();
    assert!(first.contains("START-CONTEXT"), "{first}");
    assert!(first.contains("PROMPT-CONTEXT"), "{first}");
    assert!(!requests[0].system_text().contains("START-CONTEXT"));
    let again = requests[1].last_user_text();
    assert!(again.contains("RUN THE TESTS FIRST"), "{again}");
    assert!(again.contains("Stop hook"), "{again}");

    let stop0 = read_json(&p, "stop-0.json");
    assert_eq!(stop0["hook_event_name"], "Stop");
    assert_eq!(stop0["stop_hook_active"], false);
    assert_eq!(stop0["last_assistant_message"], "answer 0");
    let stop1 = read_json(&p, "stop-1.json");
    assert_eq!(stop1["stop_hook_active"], true);
    // The prompt's id, as Claude Code gives it: the same in every hook
    // while the prompt is answered; none before the first prompt.
    assert!(
        prompt["prompt_id"].as_str().is_some_and(|s| s.len() == 36),
        "{prompt}"
    );
    assert_eq!(stop0["prompt_id"], prompt["prompt_id"]);
    assert_eq!(stop1["prompt_id"], prompt["prompt_id"]);
    assert!(start.get("prompt_id").is_none(), "{start}");
    assert!(!p.path().join("stop-2.json").exists());

    let end = read_json(&p, "session-end.json");
    assert_eq!(end["hook_event_name"], "SessionEnd");
    assert_eq!(end["reason"], "other");
}

#[test]
fn a_stop_hook_that_always_blocks_is_bounded() {
    let p = Project::new();
    settings_hooks(&p, json!({"Stop": command("echo 'not yet' >&2; exit 2")}));
    let server = FakeServer::route(|_| anthropic::text_reply("done"));
    p.run(Some(&server), &["-p", "go"]).ok();
    // The first answer and three continuations; then it stops.
    assert_eq!(server.requests().len(), 4);
}

#[test]
fn a_user_prompt_submit_block_keeps_the_prompt_from_the_model() {
    let p = Project::new();
    settings_hooks(
        &p,
        json!({"UserPromptSubmit": [{"hooks": [
            {"type": "command", "command": "if grep -q deploy; then echo 'no deploys on Fridays' >&2; exit 2; fi"}
        ]}]}),
    );
    let server = FakeServer::route(|_| anthropic::text_reply("deployed"));
    let out = p.run(
        Some(&server),
        &["-p", "deploy it", "--output-format", "json"],
    );
    assert_ne!(out.code, 0);
    assert!(
        server.requests().is_empty(),
        "the prompt never reached the model"
    );
    let result = out.json();
    assert_eq!(result["is_error"], true);
    assert!(
        result["result"]
            .as_str()
            .is_some_and(|r| r.contains("no deploys on Fridays")),
        "{result}"
    );
}

/// The main agent makes `calls`, then answers "all done".
fn calling(calls: Vec<(&'static str, &'static str, Value)>) -> FakeServer {
    FakeServer::route(move |r| {
        if is_hook_question(r) {
            let asked = r.last_user_text();
            let verdict = if asked.contains("rm -rf") {
                json!({"ok": false, "reason": "MODEL SAYS NO"})
            } else {
                json!({"ok": true})
            };
            return anthropic::text_reply(&verdict.to_string());
        }
        if is_main(r) && r.messages().iter().any(|m| m["role"] == "assistant") {
            return anthropic::text_reply("all done");
        }
        let mut m = anthropic::message();
        for (id, name, input) in &calls {
            m = m.tool_use(id, name, input.clone());
        }
        m.reply()
    })
}

fn main_results(server: &FakeServer) -> Vec<Value> {
    let r = server
        .requests()
        .into_iter()
        .rfind(|r| is_main(r) && !is_hook_question(r))
        .expect("main's last request");
    last_tool_results(&r.json)
}

#[test]
fn permission_request_hooks_allow_and_deny_on_the_users_behalf() {
    let p = Project::new();
    settings_hooks(
        &p,
        json!({"PermissionRequest": [{"matcher": "Bash", "hooks": [{"type": "command", "command":
            "cat >> permission-requests.jsonl; echo >> permission-requests.jsonl; \
             if tail -n 2 permission-requests.jsonl | grep -q denied.txt; then \
             echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PermissionRequest\", \"decision\": {\"behavior\": \"deny\", \"message\": \"NOT THAT FILE\"}}}'; \
             else echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PermissionRequest\", \"decision\": {\"behavior\": \"allow\"}}}'; fi"}]}]}),
    );
    let server = calling(vec![
        ("toolu_1", "Bash", json!({"command": "touch made.txt"})),
        ("toolu_2", "Bash", json!({"command": "touch denied.txt"})),
    ]);
    // `-p` has nobody to ask: without the hook both calls are denied.
    p.run(Some(&server), &["-p", "go"]).ok();
    assert!(p.path().join("made.txt").exists());
    assert!(!p.path().join("denied.txt").exists());
    let results = main_results(&server);
    assert_eq!(results[1]["is_error"], true);
    let denied = result_text(&results[1]);
    assert!(denied.contains("NOT THAT FILE"), "{denied}");
    let first_line = p.read("permission-requests.jsonl");
    let first: Value = serde_json::from_str(first_line.lines().next().unwrap()).unwrap();
    assert_eq!(first["hook_event_name"], "PermissionRequest");
    assert_eq!(first["tool_name"], "Bash");
    assert_eq!(first["tool_input"]["command"], "touch made.txt");
}

#[test]
fn an_http_hook_posts_its_input_with_only_the_allowed_variables_and_can_deny() {
    let p = {
        let mut p = Project::new();
        p.env("HOOK_TOKEN", "tok-123").env("SECRET_KEY", "s3cret");
        p
    };
    let endpoint = FakeServer::route(|_| {
        Reply::status(
            200,
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "deny", "permissionDecisionReason": "HTTP SAYS NO"}})
            .to_string(),
        )
    });
    settings_hooks(
        &p,
        json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "http",
            "url": format!("{}/hooks/pre-tool", endpoint.url()),
            "headers": {"Authorization": "Bearer $HOOK_TOKEN", "X-Leak": "${SECRET_KEY}"},
            "allowedEnvVars": ["HOOK_TOKEN"], "timeout": 10}]}]}),
    );
    let server = calling(vec![(
        "toolu_1",
        "Bash",
        json!({"command": "touch http-ran.txt"}),
    )]);
    p.run(
        Some(&server),
        &["-p", "go", "--permission-mode", "bypassPermissions"],
    )
    .ok();
    assert!(!p.path().join("http-ran.txt").exists());
    let text = result_text(&main_results(&server)[0]);
    assert!(text.contains("HTTP SAYS NO"), "{text}");
    let posted = endpoint.requests();
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0].method, "POST");
    assert_eq!(posted[0].path, "/hooks/pre-tool");
    assert_eq!(posted[0].json["hook_event_name"], "PreToolUse");
    assert_eq!(
        posted[0].json["tool_input"]["command"],
        "touch http-ran.txt"
    );
    assert_eq!(posted[0].header("authorization"), Some("Bearer tok-123"));
    assert_eq!(posted[0].header("x-leak"), Some(""));
}

#[test]
fn a_prompt_hook_asks_the_model_and_its_no_blocks_the_call() {
    let p = Project::new();
    settings_hooks(
        &p,
        json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "prompt",
            "prompt": "Is this command safe to run? $ARGUMENTS"}]}]}),
    );
    let server = calling(vec![
        ("toolu_1", "Bash", json!({"command": "rm -rf build"})),
        ("toolu_2", "Bash", json!({"command": "touch fine.txt"})),
    ]);
    p.run(
        Some(&server),
        &["-p", "go", "--permission-mode", "bypassPermissions"],
    )
    .ok();
    let questions: Vec<_> = server
        .requests()
        .into_iter()
        .filter(is_hook_question)
        .collect();
    assert_eq!(questions.len(), 2, "one question per call");
    let asked = questions
        .iter()
        .map(|q| q.last_user_text())
        .find(|t| t.contains("rm -rf"))
        .expect("the question about rm");
    assert!(
        asked.starts_with("Is this command safe to run? {"),
        "{asked}"
    );
    assert!(asked.contains("\"tool_name\":\"Bash\""), "{asked}");
    let results = main_results(&server);
    assert_eq!(results[0]["is_error"], true);
    assert!(result_text(&results[0]).contains("MODEL SAYS NO"));
    assert!(p.path().join("fine.txt").exists());
}

#[test]
fn in_an_untrusted_folder_no_project_hook_of_any_type_runs() {
    let p = Project::untrusted();
    let endpoint = FakeServer::route(|_| Reply::status(200, "{}"));
    settings_hooks(
        &p,
        json!({
            "SessionStart": command("touch start-ran"),
            "UserPromptSubmit": [{"hooks": [
                {"type": "http", "url": format!("{}/hook", endpoint.url())},
                {"type": "prompt", "prompt": "Is this fine? $ARGUMENTS"},
                {"type": "agent", "prompt": "Look around: is this fine? $ARGUMENTS"}
            ]}],
            "Stop": command("touch stop-ran"),
            "SessionEnd": command("touch end-ran"),
        }),
    );
    let server = FakeServer::route(|_| anthropic::text_reply("hello"));
    p.run(Some(&server), &["-p", "hi"]).ok();
    for f in ["start-ran", "stop-ran", "end-ran"] {
        assert!(!p.path().join(f).exists(), "{f}");
    }
    assert!(endpoint.requests().is_empty());
    assert_eq!(server.requests().len(), 1);
    assert!(!server.requests().iter().any(is_hook_question));
}

#[test]
fn continue_false_from_a_post_tool_use_hook_ends_the_run_after_the_call() {
    let p = Project::new();
    settings_hooks(
        &p,
        json!({"PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command":
            "echo '{\"continue\": false, \"stopReason\": \"enough for today\", \"systemMessage\": \"stopping\"}'"}]}]}),
    );
    let server = calling(vec![(
        "toolu_1",
        "Bash",
        json!({"command": "touch once.txt"}),
    )]);
    let out = p.run(
        Some(&server),
        &["-p", "go", "--permission-mode", "bypassPermissions"],
    );
    assert!(p.path().join("once.txt").exists(), "the call itself ran");
    assert_eq!(
        server.requests().len(),
        1,
        "no request after the hook said stop\n{}",
        out.stderr
    );
    assert!(out.stderr.contains("enough for today"), "{}", out.stderr);
}

#[test]
fn stop_failure_hooks_see_the_failed_request() {
    let p = Project::new();
    settings_hooks(
        &p,
        json!({"StopFailure": [{"matcher": "invalid_request", "hooks": [
            {"type": "command", "command": "cat > stop-failure.json"}]}]}),
    );
    let server = FakeServer::route(|_| {
        Reply::anthropic_error(400, "invalid_request_error", "messages: bad shape")
    });
    let out = p.run(Some(&server), &["-p", "go"]);
    assert_ne!(out.code, 0);
    let seen = read_json(&p, "stop-failure.json");
    assert_eq!(seen["hook_event_name"], "StopFailure");
    assert_eq!(seen["error"], "invalid_request");
    assert!(
        seen["error_details"]
            .as_str()
            .is_some_and(|d| d.contains("bad shape")),
        "{seen}"
    );
}

#[test]
fn a_post_tool_use_exit_2_tells_the_model_after_the_call_ran() {
    let p = Project::new();
    settings_hooks(
        &p,
        json!({"PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command":
            "echo 'LINT FAILED: fix the style' >&2; exit 2"}]}]}),
    );
    let server = calling(vec![(
        "toolu_1",
        "Bash",
        json!({"command": "touch ran.txt"}),
    )]);
    p.run(
        Some(&server),
        &["-p", "go", "--permission-mode", "bypassPermissions"],
    )
    .ok();
    assert!(p.path().join("ran.txt").exists());
    let text = result_text(&main_results(&server)[0]);
    assert!(text.contains("LINT FAILED: fix the style"), "{text}");
}

#[test]
fn instructions_loaded_fires_once_per_memory_file_at_startup() {
    let p = Project::new();
    p.write("CLAUDE.md", "Use tabs.\n@docs/style.md\n");
    p.write("docs/style.md", "Short lines.\n");
    settings_hooks(
        &p,
        json!({"InstructionsLoaded": command("cat >> loaded.jsonl; echo >> loaded.jsonl")}),
    );
    let server = FakeServer::route(|_| anthropic::text_reply("ok"));
    p.run(Some(&server), &["-p", "hi"]).ok();
    let text = p.read("loaded.jsonl");
    let seen: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rows: Vec<(String, String, String)> = seen
        .iter()
        .map(|v| {
            let file = v["file_path"].as_str().unwrap_or_default();
            (
                file.rsplit('/').next().unwrap_or_default().to_string(),
                v["memory_type"].as_str().unwrap_or_default().to_string(),
                v["load_reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert!(
        rows.contains(&("CLAUDE.md".into(), "Project".into(), "session_start".into())),
        "{rows:?}"
    );
    let import = seen
        .iter()
        .find(|v| v["load_reason"] == "include")
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert!(
        import["file_path"]
            .as_str()
            .unwrap()
            .ends_with("docs/style.md")
    );
    assert!(
        import["parent_file_path"]
            .as_str()
            .unwrap()
            .ends_with("CLAUDE.md")
    );
    assert_eq!(seen[0]["hook_event_name"], "InstructionsLoaded");
}

#[test]
fn post_tool_batch_sees_every_call_of_the_turn_once() {
    let p = Project::new();
    settings_hooks(
        &p,
        json!({"PostToolBatch": command(
            "cat >> batch.jsonl; echo >> batch.jsonl; echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PostToolBatch\", \"additionalContext\": \"BATCH-CONTEXT\"}}'"
        )}),
    );
    let server = calling(vec![
        ("toolu_1", "Bash", json!({"command": "echo one"})),
        ("toolu_2", "Bash", json!({"command": "echo two"})),
    ]);
    p.run(
        Some(&server),
        &["-p", "go", "--permission-mode", "bypassPermissions"],
    )
    .ok();
    let text = p.read("batch.jsonl");
    let seen: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(seen.len(), 1, "once per batch: {text}");
    let calls = seen[0]["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["tool_use_id"], "toolu_1");
    assert!(calls[1]["tool_response"].as_str().unwrap().contains("two"));
    let last = server.requests().into_iter().rfind(is_main).unwrap();
    assert!(last.last_user_text().contains("BATCH-CONTEXT"));
}

/// A project whose `.mcp.json` has the test kit's `rich` server (its `ask`
/// tool elicits a `name`), allowed in `.claude/settings.json` with these
/// hooks; a model that calls `ask` once.
fn eliciting_project(hooks: Value) -> (Project, FakeServer) {
    let p = Project::new();
    let (cmd, args) = super::mcp::server_command();
    p.write(
        ".mcp.json",
        &json!({"mcpServers": {"rich": {"command": cmd, "args": args,
            "env": {super::mcp::MODE_ENV: "rich"}}}})
        .to_string(),
    );
    p.write(
        ".claude/settings.json",
        &serde_json::to_string_pretty(
            &json!({"permissions": {"allow": ["mcp__rich"]}, "hooks": hooks}),
        )
        .unwrap(),
    );
    let server = calling(vec![("t1", "mcp__rich__ask", json!({}))]);
    (p, server)
}

/// What the server's `ask` tool saw as the answer to its elicitation.
fn elicited(server: &FakeServer) -> String {
    result_text(&main_results(server)[0])
}

#[test]
fn an_elicitation_hook_answers_for_the_user_and_a_result_hook_is_then_not_asked() {
    let (p, server) = eliciting_project(json!({
        "Elicitation": [{"matcher": "rich", "hooks": [{"type": "command", "command":
            "cat > elicitation.json; echo '{\"hookSpecificOutput\": {\"hookEventName\": \"Elicitation\", \"action\": \"accept\", \"content\": {\"name\": \"Ada\"}}}'"}]},
            {"matcher": "other", "hooks": [{"type": "command", "command": "touch wrong-server"}]}],
        "ElicitationResult": command("touch result-fired"),
    }));
    p.run(Some(&server), &["-p", "go"]).ok();
    assert_eq!(
        elicited(&server),
        "declared true, action Accept, content {\"name\":\"Ada\"}"
    );
    let input = read_json(&p, "elicitation.json");
    assert_eq!(input["hook_event_name"], "Elicitation");
    assert_eq!(input["mcp_server_name"], "rich");
    assert_eq!(input["message"], "What is your name?");
    assert_eq!(input["mode"], "form");
    assert_eq!(input["requested_schema"]["required"], json!(["name"]));
    assert!(input["session_id"].as_str().is_some_and(|s| !s.is_empty()));
    assert_eq!(input["permission_mode"], "default");
    assert!(
        !p.path().join("wrong-server").exists(),
        "matcher: the server"
    );
    // Answered by a hook: nobody was asked, and no result hook runs (as in
    // Claude Code).
    assert!(!p.path().join("result-fired").exists());
}

#[test]
fn elicitation_result_hooks_see_the_answer_and_may_replace_it_and_exit_2_declines() {
    // In `-p` nobody can answer: the answer is a decline, which the
    // ElicitationResult hook sees and turns into an accept with values.
    let (p, server) = eliciting_project(json!({
        "Elicitation": command("cat > elicitation.json"),
        "ElicitationResult": [{"matcher": "rich", "hooks": [{"type": "command", "command":
            "cat > result.json; echo '{\"hookSpecificOutput\": {\"hookEventName\": \"ElicitationResult\", \"action\": \"accept\", \"content\": {\"name\": \"Grace\"}}}'"}]}],
    }));
    p.run(Some(&server), &["-p", "go"]).ok();
    assert_eq!(
        elicited(&server),
        "declared true, action Accept, content {\"name\":\"Grace\"}"
    );
    assert_eq!(read_json(&p, "elicitation.json")["mode"], "form");
    let result = read_json(&p, "result.json");
    assert_eq!(result["hook_event_name"], "ElicitationResult");
    assert_eq!(result["mcp_server_name"], "rich");
    assert_eq!(result["action"], "decline");
    assert_eq!(result["mode"], "form");

    // An Elicitation hook's exit 2 declines, even where the result hook
    // would accept.
    let (p, server) = eliciting_project(json!({
        "Elicitation": command("echo 'no forms in CI' >&2; exit 2"),
        "ElicitationResult": command(
            "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"ElicitationResult\", \"action\": \"accept\", \"content\": {\"name\": \"X\"}}}'"
        ),
    }));
    let run = p.run(Some(&server), &["-p", "go"]);
    run.ok();
    assert_eq!(elicited(&server), "declared true, action Decline");
    assert!(run.stderr.contains("no forms in CI"), "{}", run.stderr);
}

/// Whether a request is an agent hook's sub-agent's.
fn is_hook_agent(r: &super::kit::RecordedRequest) -> bool {
    r.system_text()
        .contains("a checker that a hook of a coding agent started")
}

#[test]
fn an_agent_hook_reads_the_project_and_its_no_keeps_the_agent_working() {
    let p = Project::new();
    p.write("NOTES.md", "status: pending\n");
    settings_hooks(
        &p,
        json!({"Stop": [{"hooks": [{"type": "agent",
            "prompt": "Does NOTES.md say `status: done`? $ARGUMENTS"}]}]}),
    );
    let notes = p.path().join("NOTES.md");
    let server = FakeServer::route(move |r| {
        let turns = super::harness::assistant_turns(r);
        if is_hook_agent(r) {
            if turns == 0 {
                return anthropic::tool_use_reply(
                    "toolu_read",
                    "Read",
                    json!({"file_path": notes.display().to_string()}),
                );
            }
            let read = result_text(&last_tool_results(&r.json)[0]);
            let verdict = if read.contains("status: pending") {
                json!({"ok": false, "reason": "NOTES.md still says pending"})
            } else {
                json!({"ok": true, "reason": "the notes say done"})
            };
            return anthropic::tool_use_reply("toolu_answer", "StructuredOutput", verdict);
        }
        match turns {
            0 => anthropic::text_reply("first answer"),
            1 => anthropic::tool_use_reply(
                "toolu_write",
                "Write",
                json!({"file_path": notes.display().to_string(), "content": "status: done\n"}),
            ),
            _ => anthropic::text_reply("done now"),
        }
    });
    let out = p.run(
        Some(&server),
        &[
            "-p",
            "finish",
            "--permission-mode",
            "acceptEdits",
            "--output-format",
            "stream-json",
            "--verbose",
        ],
    );
    out.ok();
    assert!(
        out.stdout.contains("done now"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    // The hook's agent works out of sight, as in Claude Code.
    for unseen in ["toolu_read", "toolu_answer", "StructuredOutput"] {
        assert!(!out.stdout.contains(unseen), "{unseen}: {}", out.stdout);
    }
    let requests = server.requests();
    let (agent, main): (Vec<_>, Vec<_>) = requests.iter().partition(|r| is_hook_agent(r));
    assert_eq!(
        main.len(),
        3,
        "an answer, the write after the block, the last answer"
    );
    assert!(
        main[1]
            .last_user_text()
            .contains("NOTES.md still says pending"),
        "{}",
        main[1].last_user_text()
    );
    // Two stops, two agents of two requests each: a Read, then the answer.
    assert_eq!(agent.len(), 4);
    let mut tools = super::harness::tool_names(&agent[0].json);
    tools.sort();
    assert_eq!(tools, ["Glob", "Grep", "Read", "StructuredOutput"]);
    let asked = agent[0].last_user_text();
    assert!(
        asked.starts_with("Does NOTES.md say `status: done`? {"),
        "{asked}"
    );
    assert!(asked.contains("\"hook_event_name\":\"Stop\""), "{asked}");
    let read = |r: &super::kit::RecordedRequest| result_text(&last_tool_results(&r.json)[0]);
    assert!(
        read(agent[1]).contains("status: pending"),
        "{}",
        read(agent[1])
    );
    assert!(
        read(agent[3]).contains("status: done"),
        "{}",
        read(agent[3])
    );
    // The small model, unless the hook names one.
    assert!(
        agent[0].json["model"].as_str().unwrap().contains("haiku"),
        "{}",
        agent[0].json["model"]
    );
}

#[test]
fn permission_denied_fires_when_nobody_could_approve_and_retry_tells_the_model() {
    let p = Project::new();
    p.write(
        ".claude/settings.json",
        &serde_json::to_string_pretty(&json!({
            "permissions": {"deny": ["Bash(rm:*)"]},
            "hooks": {"PermissionDenied": [{"matcher": "Bash", "hooks": [{"type": "command",
                "command": "cat >> denied.jsonl; echo >> denied.jsonl; echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PermissionDenied\", \"retry\": true}}'"}]}]}
        }))
        .unwrap(),
    );
    // In `-p` nobody can approve the first call (the mode asks); a deny
    // rule refuses the second: only the first is the session's own refusal.
    let server = calling(vec![
        ("toolu_1", "Bash", json!({"command": "touch made.txt"})),
        ("toolu_2", "Bash", json!({"command": "rm -r build"})),
    ]);
    p.run(Some(&server), &["-p", "go"]).ok();
    let text = p.read("denied.jsonl");
    let seen: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(seen.len(), 1, "{text}");
    assert_eq!(seen[0]["hook_event_name"], "PermissionDenied");
    assert_eq!(seen[0]["tool_name"], "Bash");
    assert_eq!(seen[0]["tool_use_id"], "toolu_1");
    assert_eq!(seen[0]["tool_input"]["command"], "touch made.txt");
    assert!(seen[0]["reason"].as_str().is_some_and(|r| !r.is_empty()));
    let results = main_results(&server);
    let first = result_text(&results[0]);
    assert_eq!(results[0]["is_error"], true);
    assert!(first.contains("nobody could approve it"), "{first}");
    assert!(
        first.contains("PermissionDenied hook says you may retry"),
        "{first}"
    );
    let second = result_text(&results[1]);
    assert!(!second.contains("retry"), "{second}");
    assert!(!p.path().join("made.txt").exists());
}

/// The JSON objects a hook appended to `rel`, one a line.
fn read_lines(p: &Project, rel: &str) -> Vec<Value> {
    p.read(rel)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{rel}: {e}: {l}")))
        .collect()
}

/// A hook command that appends its input, one object a line, to `file`.
fn log_to(file: &str) -> String {
    format!("cat >> {file}; echo >> {file}")
}

#[test]
fn setup_hooks_run_for_init_only_and_maintenance_before_session_start() {
    let p = Project::new();
    settings_hooks(
        &p,
        json!({
            "Setup": [
                {"matcher": "init", "hooks": [{"type": "command",
                    "command": format!("{}; echo 'not now' >&2; exit 2", log_to("events.jsonl"))}]},
                {"matcher": "maintenance", "hooks": [{"type": "command", "command": log_to("events.jsonl")}]}
            ],
            "SessionStart": command(&log_to("events.jsonl")),
            "SessionEnd": command(&log_to("events.jsonl")),
        }),
    );
    // --init-only: the Setup hooks (init), SessionStart, and out; no prompt
    // is read and no model is asked.
    let server = FakeServer::route(|_| anthropic::text_reply("answered"));
    let out = p.run(Some(&server), &["--init-only"]);
    out.ok();
    assert_eq!(out.stdout, "", "--init-only prints nothing");
    assert_eq!(server.request_count(), 0);
    let events = read_lines(&p, "events.jsonl");
    let names: Vec<_> = events
        .iter()
        .map(|e| e["hook_event_name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(names, ["Setup", "SessionStart", "SessionEnd"], "{events:?}");
    assert_eq!(events[0]["trigger"], "init");
    assert_eq!(events[1]["source"], "startup");
    assert_eq!(events[0]["session_id"], events[1]["session_id"]);

    // --maintenance with a prompt: the maintenance hooks, then the session
    // as usual (the init hook's exit 2 above blocked nothing either).
    std::fs::remove_file(p.path().join("events.jsonl")).unwrap();
    let out = p.run(Some(&server), &["-p", "hi", "--maintenance"]);
    out.ok();
    assert!(out.stdout.contains("answered"), "{}", out.stdout);
    let events = read_lines(&p, "events.jsonl");
    assert_eq!(events[0]["hook_event_name"], "Setup");
    assert_eq!(events[0]["trigger"], "maintenance");
    assert_eq!(events[1]["hook_event_name"], "SessionStart");
    assert_eq!(events.len(), 3, "the init hook did not run: {events:?}");

    // Without -p, --init has nothing to go on with.
    let out = p.run(Some(&server), &["--init"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--init-only"), "{}", out.stderr);

    // A fresh clone's Setup hooks never run.
    std::fs::remove_file(p.path().join("events.jsonl")).unwrap();
    p.untrust();
    p.run(Some(&server), &["--init-only"]).ok();
    assert!(!p.path().join("events.jsonl").exists());
}

#[test]
fn a_cd_in_bash_stays_for_the_next_call_within_the_project_and_fires_cwd_changed() {
    let p = Project::new();
    p.write("sub/here.txt", "");
    settings_hooks(&p, json!({"CwdChanged": command(&log_to("cwd.jsonl"))}));
    let server = FakeServer::start([
        anthropic::tool_use_reply("t1", "Bash", json!({"command": "cd sub && pwd"})),
        anthropic::tool_use_reply("t2", "Bash", json!({"command": "pwd; ls"})),
        anthropic::tool_use_reply("t3", "Bash", json!({"command": "cd / && pwd"})),
        anthropic::tool_use_reply("t4", "Bash", json!({"command": "pwd"})),
        anthropic::text_reply("done"),
    ]);
    p.run(
        Some(&server),
        &["-p", "look around", "--allowedTools", "Bash"],
    )
    .ok();
    let root = p.path().canonicalize().unwrap().display().to_string();
    let sub = format!("{root}/sub");
    let results: Vec<String> = (1..5)
        .map(|n| result_text(&last_tool_results(&server.request(n).json)[0]))
        .collect();
    assert_eq!(results[0], sub);
    assert_eq!(results[1], format!("{sub}\nhere.txt"), "the cd stayed");
    // Out of the project: the shell goes back, and the result says so
    // (Claude Code's words).
    assert_eq!(results[2], format!("/\nShell cwd was reset to {root}"));
    assert_eq!(results[3], root);

    let moves = read_lines(&p, "cwd.jsonl");
    assert_eq!(moves.len(), 2, "{moves:?}");
    assert_eq!(moves[0]["hook_event_name"], "CwdChanged");
    assert_eq!(moves[0]["old_cwd"], root);
    assert_eq!(moves[0]["new_cwd"], sub);
    assert_eq!(moves[0]["cwd"], sub);
    assert_eq!(moves[1]["old_cwd"], sub);
    assert_eq!(moves[1]["new_cwd"], root, "back to where it was kept");
    // The system prompt never changes: the cached prefix stays valid.
    let systems: Vec<String> = server.requests().iter().map(|r| r.system_text()).collect();
    assert!(systems.iter().all(|s| *s == systems[0]));
}

#[test]
fn bash_calls_after_a_cd_are_judged_from_the_shells_folder_and_never_beyond_the_project() {
    let p = Project::new();
    p.write("sub/.keep", "");
    let server = FakeServer::start([
        anthropic::tool_use_reply("t1", "Bash", json!({"command": "cd sub"})),
        // From sub, ../note.txt is the project's: an echo there is allowed.
        anthropic::tool_use_reply("t2", "Bash", json!({"command": "echo hi > ../note.txt"})),
        // ../../ is beyond the project: asked (refused, with nobody to ask).
        anthropic::tool_use_reply(
            "t3",
            "Bash",
            json!({"command": "echo hi > ../../cadre-escaped-note.txt"}),
        ),
        anthropic::text_reply("done"),
    ]);
    p.run(
        Some(&server),
        &[
            "-p",
            "write",
            "--allowedTools",
            "Bash(cd:*)",
            "Bash(echo:*)",
        ],
    )
    .ok();
    assert_eq!(p.read("note.txt"), "hi\n");
    let refused = &last_tool_results(&server.request(3).json)[0];
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        !p.path()
            .parent()
            .unwrap()
            .join("cadre-escaped-note.txt")
            .exists()
    );
}

#[test]
fn add_dir_in_chat_adds_a_working_directory_and_fires_directory_added() {
    let p = Project::new();
    let extra = tempfile::tempdir().unwrap();
    let extra_path = extra.path().canonicalize().unwrap().display().to_string();
    p.write(
        ".claude/settings.json",
        &serde_json::to_string_pretty(&json!({
            "permissions": {"allow": ["Bash(cd:*)", "Bash(pwd:*)", "Bash(echo:*)"]},
            "hooks": {"DirectoryAdded": [{"matcher": "slash_command",
                "hooks": [{"type": "command", "command": log_to("added.jsonl")}]}]}
        }))
        .unwrap(),
    );
    let server = FakeServer::start([
        // Inside the added folder: allowed by the echo rule, no asking.
        anthropic::tool_use_reply(
            "t1",
            "Bash",
            json!({"command": format!("echo hi > {extra_path}/note.txt")}),
        ),
        // The shell may stay there too.
        anthropic::tool_use_reply(
            "t2",
            "Bash",
            json!({"command": format!("cd {extra_path} && pwd")}),
        ),
        anthropic::tool_use_reply("t3", "Bash", json!({"command": "pwd"})),
        anthropic::text_reply("done"),
    ]);
    let out = p.chat(
        Some(&server),
        &format!("/add-dir {extra_path}\nwrite there\n"),
    );
    assert!(
        out.stderr
            .contains(&format!("Added {extra_path} as a working directory")),
        "{}",
        out.stderr
    );
    assert_eq!(
        std::fs::read_to_string(extra.path().join("note.txt")).unwrap_or_default(),
        "hi\n",
        "{}",
        out.stderr
    );
    let last = result_text(&last_tool_results(&server.request(3).json)[0]);
    assert_eq!(last, extra_path, "the cd into the added folder stayed");
    let added = read_lines(&p, "added.jsonl");
    assert_eq!(added.len(), 1, "{added:?}");
    assert_eq!(added[0]["hook_event_name"], "DirectoryAdded");
    assert_eq!(added[0]["directory"], extra_path);
    assert_eq!(added[0]["source"], "slash_command");

    // Headless, as in Claude Code: not available; nothing is asked or added.
    let before = server.request_count();
    let out = p.run(Some(&server), &["-p", &format!("/add-dir {extra_path}")]);
    out.ok();
    assert_eq!(
        out.stdout.trim(),
        "/add-dir isn't available in this environment."
    );
    assert_eq!(server.request_count(), before);
    assert_eq!(read_lines(&p, "added.jsonl").len(), 1);
}

/// A Bash command that waits (up to 60 s) for `file` to have content: a
/// hook that fires on its own time has then fired.
fn wait_for(file: &str) -> String {
    format!("for i in $(seq 1 600); do [ -s {file} ] && break; sleep 0.1; done")
}

#[test]
fn file_changed_fires_for_the_files_the_matchers_name_and_the_paths_hooks_answer() {
    let p = Project::new();
    p.write(".envrc", "export A=0\n");
    p.write("data/.keep", "");
    settings_hooks(
        &p,
        json!({
            "FileChanged": [
                {"matcher": ".envrc", "hooks": [{"type": "command", "command": log_to("envrc.jsonl")}]},
                {"matcher": "other.txt", "hooks": [{"type": "command", "command": log_to("other.jsonl")}]},
                {"matcher": "x.json", "hooks": [{"type": "command", "command": log_to("data.jsonl")}]}
            ],
            "SessionStart": command(
                "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"SessionStart\", \"watchPaths\": [\"data\"]}}'"
            ),
        }),
    );
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "t1",
            "Bash",
            json!({"command": format!("echo 'export A=1' > .envrc; {}", wait_for("envrc.jsonl"))}),
        ),
        anthropic::tool_use_reply(
            "t2",
            "Bash",
            json!({"command": format!("echo '{{}}' > data/x.json; {}", wait_for("data.jsonl"))}),
        ),
        anthropic::text_reply("done"),
    ]);
    p.run(Some(&server), &["-p", "edit", "--allowedTools", "Bash"])
        .ok();
    let root = p.path().canonicalize().unwrap().display().to_string();
    let envrc = read_lines(&p, "envrc.jsonl");
    assert_eq!(envrc[0]["hook_event_name"], "FileChanged");
    assert_eq!(envrc[0]["file_path"], format!("{root}/.envrc"));
    assert_eq!(envrc[0]["event"], "change");
    // A folder a SessionStart hook answered is watched with what is in it;
    // the matcher is tested against the file's name.
    let data = read_lines(&p, "data.jsonl");
    assert_eq!(data[0]["file_path"], format!("{root}/data/x.json"));
    assert_eq!(data[0]["event"], "add");
    assert!(!p.path().join("other.jsonl").exists());
}

#[test]
fn message_display_rewrites_what_is_printed_and_the_model_keeps_what_it_said() {
    let p = Project::new();
    settings_hooks(
        &p,
        json!({"MessageDisplay": command(&format!(
            "{}; echo '{{\"hookSpecificOutput\": {{\"hookEventName\": \"MessageDisplay\", \"displayContent\": \"[shown]\"}}}}'",
            log_to("shown.jsonl")
        ))}),
    );
    let server = FakeServer::start([
        anthropic::message()
            .text("looking SECRET")
            .tool_use("t1", "Bash", json!({"command": "true"}))
            .reply(),
        anthropic::text_reply("final SECRET"),
    ]);
    let out = p.run(
        Some(&server),
        &[
            "-p",
            "go",
            "--output-format",
            "stream-json",
            "--verbose",
            "--allowedTools",
            "Bash",
        ],
    );
    out.ok();
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let printed: Vec<&Value> = lines
        .iter()
        .filter(|v| v["type"] == "assistant")
        .flat_map(|v| v["message"]["content"].as_array().into_iter().flatten())
        .filter(|b| b["type"] == "text")
        .collect();
    assert_eq!(printed.len(), 2, "{}", out.stdout);
    assert!(
        printed.iter().all(|b| b["text"] == "[shown]"),
        "{printed:?}"
    );
    let result = lines.iter().find(|v| v["type"] == "result").unwrap();
    assert_eq!(result["result"], "[shown]");
    assert!(!out.stdout.contains("SECRET"), "{}", out.stdout);
    // The conversation keeps what the model said.
    assert!(server.request(1).body_str().contains("looking SECRET"));
    let seen = read_lines(&p, "shown.jsonl");
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0]["hook_event_name"], "MessageDisplay");
    assert_eq!(seen[0]["delta"], "looking SECRET");
    assert_eq!(seen[0]["index"], 0);
    assert_eq!(seen[0]["final"], true);
    assert_eq!(seen[1]["delta"], "final SECRET");
}
