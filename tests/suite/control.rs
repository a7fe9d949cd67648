//! The SDKs' control requests about settings, MCP servers, listings, usage
//! and the queue, through the binary's stdin and stdout as an SDK sends
//! them (src/cli/control.rs; docs/headless.md, "Control requests").

use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{Project, has_main_prompt as is_main, last_tool_results, result_text};
use super::headless::Driven;
use super::kit::{FakeServer, RecordedRequest, anthropic};

fn is_result(v: &Value) -> bool {
    v["type"] == "result"
}

/// Sends one control request and returns its answer's `response`.
fn ask(d: &mut Driven, id: &str, request: Value) -> Value {
    d.send(json!({"type": "control_request", "request_id": id, "request": request}));
    let answer = d.until(id, |v| {
        v["type"] == "control_response" && v["response"]["request_id"] == id
    });
    answer["response"].clone()
}

fn ok(r: &Value) -> &Value {
    assert_eq!(r["subtype"], "success", "{r}");
    &r["response"]
}

fn error(r: &Value) -> &str {
    assert_eq!(r["subtype"], "error", "{r}");
    r["error"].as_str().unwrap_or_default()
}

/// The model calls Bash when asked to, Read when asked to, and then ends.
fn bash_or_read(dir: &std::path::Path) -> impl Fn(&RecordedRequest) -> super::kit::Reply + use<> {
    let notes = dir.join("notes.txt").display().to_string();
    move |r: &RecordedRequest| {
        if !last_tool_results(&r.json).is_empty() {
            return anthropic::text_reply("done");
        }
        let text = r.last_user_text();
        if text.contains("run bash") {
            anthropic::tool_use_reply("toolu_b", "Bash", json!({"command": "echo hi"}))
        } else if text.contains("read notes") {
            anthropic::tool_use_reply("toolu_r", "Read", json!({"file_path": notes}))
        } else {
            anthropic::text_reply("ok")
        }
    }
}

/// The tool result the model got for the prompt containing `prompt`.
fn tool_result_after(server: &FakeServer, prompt: &str) -> Value {
    let reqs = server.requests();
    let at = reqs
        .iter()
        .position(|r| is_main(r) && r.last_user_text().contains(prompt))
        .unwrap_or_else(|| panic!("no request for {prompt}"));
    reqs[at + 1..]
        .iter()
        .filter(|r| is_main(r))
        .find_map(|r| last_tool_results(&r.json).into_iter().next())
        .unwrap_or_else(|| panic!("no tool result after {prompt}"))
}

/// `apply_flag_settings` joins the flag layer for the rest of the session:
/// its deny rule stops a Read at once and `get_settings` and
/// `list_permission_rules` show it; its allow rule cannot loosen what
/// managed settings deny.
#[test]
fn host_settings_apply_for_the_session_and_managed_settings_still_win() {
    let managed = tempfile::tempdir().unwrap();
    let policy = managed.path().join("etc/claude-code/managed-settings.json");
    std::fs::create_dir_all(policy.parent().unwrap()).unwrap();
    std::fs::write(&policy, r#"{"permissions": {"deny": ["Bash"]}}"#).unwrap();
    let mut p = Project::new();
    p.env("CADRE_MANAGED_ROOT", &managed.path().display().to_string());
    p.write("notes.txt", "the notes\n");
    p.write(
        ".claude/settings.json",
        r#"{"permissions": {"ask": ["Bash(rm:*)"]}}"#,
    );
    let server = FakeServer::route(bash_or_read(p.path()));
    let mut d = Driven::start(&p, &server, &[]);
    let applied = ask(
        &mut d,
        "r_apply",
        json!({"subtype": "apply_flag_settings",
               "settings": {"permissions": {"allow": ["Bash"], "deny": ["Read"]}}}),
    );
    // Claude Code's bare acknowledgement: no `response`.
    assert_eq!(applied["subtype"], "success", "{applied}");
    assert!(applied.get("response").is_none(), "{applied}");
    let settings = ask(&mut d, "r_get", json!({"subtype": "get_settings"}));
    let s = ok(&settings);
    let sources: Vec<&str> = s["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["source"].as_str())
        .collect();
    assert_eq!(
        sources,
        ["projectSettings", "flagSettings", "policySettings"],
        "{s}"
    );
    assert_eq!(
        s["effective"]["permissions"]["deny"],
        json!(["Read", "Bash"]),
        "{s}"
    );
    assert_eq!(s["applied"]["model"], "claude-sonnet-4-5", "{s}");
    let rules = ask(
        &mut d,
        "r_rules",
        json!({"subtype": "list_permission_rules"}),
    );
    let rules = ok(&rules)["state"]["rules"].clone();
    let row = |behavior: &str, rule: &str| {
        rules
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["behavior"] == behavior && r["rule"] == rule)
            .cloned()
            .unwrap_or_else(|| panic!("no {behavior} {rule} in {rules}"))
    };
    assert_eq!(row("allow", "Bash")["source"], "flagSettings");
    assert_eq!(row("deny", "Read")["source"], "flagSettings");
    assert_eq!(row("deny", "Bash")["source"], "policySettings");
    assert_eq!(row("deny", "Bash")["editability"], "readonly");
    assert_eq!(row("ask", "Bash(rm:*)")["source"], "projectSettings");
    assert_eq!(row("ask", "Bash(rm:*)")["editability"], "persistent");

    d.user("read notes");
    let first = d.until("first result", is_result);
    d.user("run bash");
    let second = d.until("second result", is_result);
    assert_eq!(d.finish(), 0);
    // Each result lists the call refused during its prompt.
    assert_eq!(
        first["permission_denials"],
        json!([{"tool_name": "Read", "tool_use_id": "toolu_r",
                "tool_input": {"file_path": p.path().join("notes.txt").display().to_string()}}]),
        "{first}"
    );
    // (A tool a rule denies whole is not offered to the model at all: the
    // call fails as a call to no tool, not as a refusal.)
    assert_eq!(second["subtype"], "success", "{second}");
    let read = tool_result_after(&server, "read notes");
    assert_eq!(read["is_error"], true, "{read}");
    assert!(!result_text(&read).contains("the notes"), "{read}");
    let bash = tool_result_after(&server, "run bash");
    assert_eq!(bash["is_error"], true, "{bash}");
    assert!(!result_text(&bash).contains("hi\n"), "{bash}");
}

/// `update_settings` writes the local settings file's `outputStyle` (and
/// nothing else), as Claude Code's allow-list says.
#[test]
fn update_settings_writes_the_local_output_style_and_refuses_other_keys() {
    let p = Project::new();
    p.write(
        ".claude/output-styles/pirate.md",
        "---\nname: Pirate\ndescription: Arr\n---\nSpeak like a pirate.\n",
    );
    let server = FakeServer::route(|_| anthropic::text_reply("ok"));
    let mut d = Driven::start(&p, &server, &[]);
    let written = ask(
        &mut d,
        "r_update",
        json!({"subtype": "update_settings", "source": "localSettings",
               "settings": {"outputStyle": "Pirate"}}),
    );
    assert_eq!(ok(&written), &json!({}));
    let refused = ask(
        &mut d,
        "r_model",
        json!({"subtype": "update_settings", "source": "localSettings",
               "settings": {"model": "x"}}),
    );
    assert_eq!(error(&refused), "update_settings keys not allowed: model");
    let project = ask(
        &mut d,
        "r_project",
        json!({"subtype": "update_settings", "source": "projectSettings",
               "settings": {"outputStyle": "x"}}),
    );
    assert_eq!(
        error(&project),
        "update_settings: unsupported source projectSettings"
    );
    let settings = ask(&mut d, "r_get", json!({"subtype": "get_settings"}));
    assert_eq!(ok(&settings)["effective"]["outputStyle"], "Pirate");
    assert_eq!(d.finish(), 0);
    let local: Value = serde_json::from_str(&p.read(".claude/settings.local.json")).unwrap();
    assert_eq!(local, json!({"outputStyle": "Pirate"}));
}

/// The host's own MCP server: added by `mcp_set_servers`, called with
/// `mcp_call` and read with `mcp_read_resource` with no model turn,
/// switched off and on by `mcp_toggle`, restarted by `mcp_reconnect` (a
/// new process), removed by `mcp_set_servers` again.
#[test]
fn a_hosts_mcp_server_is_added_called_switched_off_restarted_and_removed() {
    let p = Project::new();
    let server = FakeServer::route(|_| anthropic::text_reply("ok"));
    let mut d = Driven::start(&p, &server, &[]);
    let (command, args) = super::mcp::server_command();
    let mut env = serde_json::Map::new();
    env.insert(super::mcp::MODE_ENV.into(), "rich".into());
    let config = json!({"command": command, "args": args, "env": env});
    let set = ask(
        &mut d,
        "r_set",
        json!({"subtype": "mcp_set_servers", "servers": {"echo": config}}),
    );
    assert_eq!(
        ok(&set),
        &json!({"added": ["echo"], "removed": [], "errors": {}})
    );
    let status = ask(&mut d, "r_status", json!({"subtype": "mcp_status"}));
    assert_eq!(
        ok(&status)["mcpServers"],
        json!([{"name": "echo", "status": "connected"}])
    );
    let call = |d: &mut Driven, id: &str, tool: &str| {
        ask(
            d,
            id,
            json!({"subtype": "mcp_call", "tool": tool, "arguments": {"text": "hi"}}),
        )
    };
    let echoed = call(&mut d, "r_call", "mcp__echo__echo");
    assert_eq!(
        ok(&echoed)["content"],
        json!([{"type": "text", "text": "echo: hi"}])
    );
    let page = ask(
        &mut d,
        "r_page",
        json!({"subtype": "mcp_read_resource", "serverName": "echo", "uri": "ui://app/page"}),
    );
    assert_eq!(ok(&page)["contents"][0]["text"], "<p>the app</p>", "{page}");
    let pid_before = ok(&call(&mut d, "r_pid1", "mcp__echo__pid"))["content"][0]["text"].clone();

    let off = ask(
        &mut d,
        "r_off",
        json!({"subtype": "mcp_toggle", "serverName": "echo", "enabled": false}),
    );
    ok(&off);
    let refused = call(&mut d, "r_call_off", "mcp__echo__echo");
    assert_eq!(error(&refused), "MCP server not connected: echo");
    let on = ask(
        &mut d,
        "r_on",
        json!({"subtype": "mcp_toggle", "serverName": "echo", "enabled": true}),
    );
    ok(&on);
    let again = call(&mut d, "r_call_on", "mcp__echo__echo");
    assert_eq!(ok(&again)["content"][0]["text"], "echo: hi");
    let pid_on = ok(&call(&mut d, "r_pid2", "mcp__echo__pid"))["content"][0]["text"].clone();
    assert_ne!(pid_before, pid_on, "switched on again: a new process");

    let re = ask(
        &mut d,
        "r_reconnect",
        json!({"subtype": "mcp_reconnect", "serverName": "echo"}),
    );
    ok(&re);
    let pid_after = ok(&call(&mut d, "r_pid3", "mcp__echo__pid"))["content"][0]["text"].clone();
    assert_ne!(pid_on, pid_after, "reconnected: a new process");

    let cleared = ask(
        &mut d,
        "r_clear",
        json!({"subtype": "mcp_set_servers", "servers": {}}),
    );
    assert_eq!(
        ok(&cleared),
        &json!({"added": [], "removed": ["echo"], "errors": {}})
    );
    let gone = ask(
        &mut d,
        "r_gone",
        json!({"subtype": "mcp_reconnect", "serverName": "echo"}),
    );
    assert_eq!(error(&gone), "Server not found: echo");
    assert_eq!(d.finish(), 0);
}

/// `cancel_async_message` withdraws a prompt still in the queue: it never
/// runs and has no result; one already dequeued is not withdrawn.
#[test]
fn a_queued_prompt_is_withdrawn_by_its_uuid() {
    let p = Project::new();
    let (open, gate) = tokio::sync::watch::channel(false);
    let server = FakeServer::route(move |r| {
        if r.last_user_text().contains("first") {
            anthropic::text_reply("one").held(gate.clone(), Duration::from_secs(60))
        } else {
            anthropic::text_reply("other")
        }
    });
    let mut d = Driven::start(&p, &server, &[]);
    let prompt = |text: &str, uuid: &str| {
        json!({"type": "user", "session_id": "", "parent_tool_use_id": null, "uuid": uuid,
               "message": {"role": "user", "content": text}})
    };
    d.send(prompt("first", "u-1"));
    assert!(
        server.wait_for_requests(1, Duration::from_secs(60)),
        "the first prompt reaches the model"
    );
    d.send(prompt("second", "u-2"));
    d.send(prompt("third", "u-3"));
    let running = ask(
        &mut d,
        "r_running",
        json!({"subtype": "cancel_async_message", "message_uuid": "u-1"}),
    );
    assert_eq!(ok(&running), &json!({"cancelled": false}));
    let queued = ask(
        &mut d,
        "r_queued",
        json!({"subtype": "cancel_async_message", "message_uuid": "u-2"}),
    );
    assert_eq!(ok(&queued), &json!({"cancelled": true}));
    let unknown = ask(
        &mut d,
        "r_unknown",
        json!({"subtype": "cancel_async_message", "message_uuid": "nope"}),
    );
    assert_eq!(ok(&unknown), &json!({"cancelled": false}));
    open.send(true).unwrap();
    d.until("first result", is_result);
    d.until("third result", is_result);
    let seen_before = d.finish();
    assert_eq!(seen_before, 0);
    let prompts: Vec<String> = server
        .requests()
        .iter()
        .filter(|r| is_main(r))
        .map(|r| r.last_user_text())
        .collect();
    assert!(prompts.iter().all(|t| !t.contains("second")), "{prompts:?}");
    assert!(prompts.iter().any(|t| t.contains("third")), "{prompts:?}");
}

/// The read-only listings after one turn, each in Claude Code's shape.
#[test]
fn usage_cost_models_hooks_and_reloads_answer_in_claude_codes_shape() {
    let p = Project::new();
    p.write(
        ".claude/settings.json",
        r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo hi", "timeout": 5}]}]}}"#,
    );
    let server = FakeServer::route(|_| anthropic::message().text("ok").usage(1200, 30).reply());
    let mut d = Driven::start(&p, &server, &[]);
    d.user("one");
    d.until("result", is_result);

    let usage = ask(&mut d, "r_usage", json!({"subtype": "get_usage"}));
    let u = ok(&usage);
    assert_eq!(
        u["session"]["model_usage"]["claude-sonnet-4-5"]["inputTokens"], 1200,
        "{u}"
    );
    assert_eq!(u["rate_limits_available"], false, "{u}");
    assert!(u["subscription_type"].is_null(), "{u}");
    let cost = ask(&mut d, "r_cost", json!({"subtype": "get_session_cost"}));
    let text = ok(&cost)["text"].as_str().unwrap_or_default().to_string();
    assert!(
        text.contains("Usage:                 1200 input, 30 output"),
        "{text}"
    );
    let models = ask(&mut d, "r_models", json!({"subtype": "list_models"}));
    assert_eq!(ok(&models)["models"][0]["value"], "default", "{models}");
    let hooks = ask(&mut d, "r_hooks", json!({"subtype": "get_hooks_listing"}));
    let h = ok(&hooks);
    assert_eq!(
        h["events"],
        json!([{"name": "PreToolUse", "summary": "Before tool execution",
                "supportsMatcher": true, "hookCount": 1}]),
        "{h}"
    );
    assert_eq!(h["hooks"][0]["matcher"], "Bash", "{h}");
    assert_eq!(h["hooks"][0]["commandText"], "echo hi", "{h}");
    assert_eq!(h["hooks"][0]["timeout"], 5, "{h}");
    assert_eq!(
        h["hooks"][0]["editable"],
        json!({"matcher": "Bash", "config": {"type": "command", "command": "echo hi", "timeout": 5}}),
        "{h}"
    );

    // A skill written while the session runs is listed after the reload.
    p.write(
        ".claude/skills/greet/SKILL.md",
        "---\nname: greet\ndescription: Says hello\n---\nSay hello.\n",
    );
    let skills = ask(&mut d, "r_skills", json!({"subtype": "reload_skills"}));
    let names: Vec<&str> = ok(&skills)["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert!(names.contains(&"greet"), "{skills}");
    let plugins = ask(&mut d, "r_plugins", json!({"subtype": "reload_plugins"}));
    let pl = ok(&plugins);
    for key in ["commands", "agents", "plugins", "mcpServers"] {
        assert!(pl[key].is_array(), "{key}: {pl}");
    }
    assert_eq!(pl["error_count"], 0, "{pl}");

    let background = ask(&mut d, "r_bg", json!({"subtype": "background_tasks"}));
    assert_eq!(ok(&background), &json!({}));
    let one = ask(
        &mut d,
        "r_bg1",
        json!({"subtype": "background_tasks", "tool_use_id": "toolu_x"}),
    );
    assert_eq!(ok(&one), &json!({"backgrounded": false}));
    let output = ask(
        &mut d,
        "r_out",
        json!({"subtype": "get_task_output", "task_id": "b123"}),
    );
    assert_eq!(
        error(&output),
        "get_task_output: no shell or Monitor task with that task_id in this session"
    );
    let seeded = ask(
        &mut d,
        "r_seed",
        json!({"subtype": "seed_read_state", "path": "x.txt", "mtime": 1}),
    );
    assert_eq!(seeded["subtype"], "success", "{seeded}");
    assert!(seeded.get("response").is_none(), "{seeded}");
    assert_eq!(d.finish(), 0);
}

/// Before any prompt or `initialize`, a request about the session sets the
/// session up and is answered (as Claude Code answers it at once).
#[test]
fn a_settings_request_before_initialize_is_answered() {
    let p = Project::new();
    let server = FakeServer::route(|_| anthropic::text_reply("ok"));
    let mut d = Driven::start(&p, &server, &[]);
    let models = ask(&mut d, "r_models", json!({"subtype": "list_models"}));
    assert_eq!(ok(&models)["models"][0]["value"], "default");
    d.user("hi");
    d.until("result", is_result);
    assert_eq!(d.finish(), 0);
}

/// File checkpoints outlive the process: a session resumed by a new one
/// rewinds to a message of the first (the SDKs' `enable_file_checkpointing`).
#[test]
fn rewind_files_reaches_a_message_from_before_the_resume() {
    let mut p = Project::new();
    p.env("CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING", "true");
    let file = p.path().join("new.txt");
    let target = file.display().to_string();
    let server = FakeServer::route(move |r| {
        if !last_tool_results(&r.json).is_empty() {
            anthropic::text_reply("written")
        } else {
            anthropic::tool_use_reply(
                "toolu_w",
                "Write",
                json!({"file_path": target, "content": "made in the first process\n"}),
            )
        }
    });
    let mut d = Driven::start(&p, &server, &["--permission-mode", "acceptEdits"]);
    d.send(
        json!({"type": "user", "session_id": "", "parent_tool_use_id": null, "uuid": "u-first",
                  "message": {"role": "user", "content": "write it"}}),
    );
    let result = d.until("result", is_result);
    assert_eq!(d.finish(), 0);
    assert!(file.exists(), "{result}");
    let session = result["session_id"].as_str().unwrap().to_string();

    let mut d = Driven::start(&p, &server, &["--resume", &session]);
    ok(&ask(&mut d, "r_init", json!({"subtype": "initialize"})));
    let preview = ask(
        &mut d,
        "r_dry",
        json!({"subtype": "rewind_files", "user_message_id": "u-first", "dry_run": true}),
    );
    assert_eq!(ok(&preview)["canRewind"], true, "{preview}");
    assert_eq!(
        ok(&preview)["filesChanged"],
        json!([file.display().to_string()])
    );
    let done = ask(
        &mut d,
        "r_rewind",
        json!({"subtype": "rewind_files", "user_message_id": "u-first"}),
    );
    assert_eq!(ok(&done)["canRewind"], true, "{done}");
    assert_eq!(d.finish(), 0);
    assert!(!file.exists(), "the file the first process made is gone");
}

/// `read_file` answers a file of the project, bounded by `max_bytes` (in
/// base64 when asked), and refuses what lies outside the project and its
/// added folders: an absolute path, a `..` path, a link leading out.
#[test]
fn read_file_stays_inside_the_project_and_is_bounded() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "secret\n").unwrap();
    let p = Project::new();
    p.write("notes.txt", "hello from the notes\n");
    std::os::unix::fs::symlink(&secret, p.path().join("link.txt")).unwrap();
    let server = FakeServer::route(|_| anthropic::text_reply("ok"));
    let mut d = Driven::start(&p, &server, &[]);
    let whole = ask(
        &mut d,
        "r1",
        json!({"subtype": "read_file", "path": "notes.txt"}),
    );
    let whole = ok(&whole);
    assert_eq!(whole["contents"], "hello from the notes\n", "{whole}");
    assert_eq!(whole["lossy"], false, "{whole}");
    assert!(whole.get("truncated").is_none(), "{whole}");
    assert!(
        whole["absPath"].as_str().unwrap().ends_with("/notes.txt"),
        "{whole}"
    );
    let cut = ask(
        &mut d,
        "r2",
        json!({"subtype": "read_file", "path": "notes.txt", "max_bytes": 5, "encoding": "base64"}),
    );
    let cut = ok(&cut);
    assert_eq!(cut["contents"], "aGVsbG8=", "{cut}");
    assert_eq!(cut["encoding"], "base64", "{cut}");
    assert_eq!(cut["truncated"], true, "{cut}");
    let sneaky = [
        secret.display().to_string(),
        format!(
            "../{}/secret.txt",
            outside.path().file_name().unwrap().to_string_lossy()
        ),
        "link.txt".to_string(),
    ];
    for (i, path) in sneaky.iter().enumerate() {
        let r = ask(
            &mut d,
            &format!("r_out{i}"),
            json!({"subtype": "read_file", "path": path}),
        );
        let why = error(&r);
        assert!(
            why.starts_with("read denied") || why.contains("No such file"),
            "{path}: {r}"
        );
        assert!(!r.to_string().contains("secret\\n"), "{path}: {r}");
    }
    d.user("hi");
    d.until("result", is_result);
    assert_eq!(d.finish(), 0);
}

/// `rename_session` writes Claude Code's `custom-title` line into the
/// session's transcript (where the SDKs' `list_sessions` reads the title),
/// says so on stdout, and the session still resumes.
#[test]
fn rename_session_titles_the_transcript_and_the_session_resumes() {
    let p = Project::new();
    let server = FakeServer::route(|_| anthropic::text_reply("ok"));
    let mut d = Driven::start(&p, &server, &[]);
    d.user("hi");
    let result = d.until("result", is_result);
    let sid = result["session_id"].as_str().unwrap().to_string();
    let empty = ask(
        &mut d,
        "r0",
        json!({"subtype": "rename_session", "title": "  "}),
    );
    assert!(error(&empty).contains("empty"), "{empty}");
    d.send(
        json!({"type": "control_request", "request_id": "r1", "request":
        {"subtype": "rename_session", "title": " Tidy notes ", "session_id": sid}}),
    );
    // Said on stdout before the answer, as Claude Code does.
    let told = d.until("title changed", |v| v["subtype"] == "session_title_changed");
    assert_eq!(told["title"], "Tidy notes");
    let renamed = d.until("r1", |v| {
        v["type"] == "control_response" && v["response"]["request_id"] == "r1"
    });
    let renamed = &renamed["response"];
    assert_eq!(renamed["subtype"], "success", "{renamed}");
    assert!(renamed.get("response").is_none(), "{renamed}");
    assert_eq!(d.finish(), 0);
    let file = p.transcript_of(&sid);
    let text = std::fs::read_to_string(&file).unwrap();
    let titles: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "custom-title")
        .collect();
    assert_eq!(titles.len(), 1, "{text}");
    assert_eq!(titles[0]["customTitle"], "Tidy notes");
    assert_eq!(titles[0]["sessionId"], sid.as_str());
    p.run(Some(&server), &["-p", "again", "--resume", &sid])
        .ok();
}

/// The host's file, version and watcher requests: suggestions under the
/// project, the version, the output styles, and acknowledgements.
#[test]
fn file_suggestions_version_styles_and_subscribers_are_answered() {
    let p = Project::new();
    p.write("docs/notes.txt", "n\n");
    p.write("src/main.rs", "fn main() {}\n");
    let server = FakeServer::route(|_| anthropic::text_reply("ok"));
    let mut d = Driven::start(&p, &server, &[]);
    let found = ask(
        &mut d,
        "r1",
        json!({"subtype": "file_suggestions", "query": "NOTE"}),
    );
    let found = ok(&found);
    let paths: Vec<&str> = found["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["path"].as_str())
        .collect();
    assert_eq!(paths, ["docs/notes.txt"], "{found}");
    let version = ask(&mut d, "r2", json!({"subtype": "get_binary_version"}));
    assert_eq!(ok(&version)["version"], env!("CARGO_PKG_VERSION"));
    let styles = ask(&mut d, "r3", json!({"subtype": "reload_output_styles"}));
    assert!(
        ok(&styles)["available_output_styles"].is_array(),
        "{styles}"
    );
    let watched = ask(
        &mut d,
        "r4",
        json!({"subtype": "set_has_subscribers", "has_subscribers": false}),
    );
    assert_eq!(watched["subtype"], "success", "{watched}");
    let root = ask(
        &mut d,
        "r5",
        json!({"subtype": "register_repo_root", "directory": "."}),
    );
    assert!(error(&root).contains("working directory"), "{root}");
    d.user("hi");
    d.until("result", is_result);
    assert_eq!(d.finish(), 0);
}
