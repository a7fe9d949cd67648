//! Slash commands through the real binary: `.claude/commands/**/*.md`
//! typed as `/name args` in `-p` and over stream-json, expanded
//! (`$ARGUMENTS`, `$N`, `@path`, `` !`command` `` lines through the
//! permission rules, never in an untrusted folder), offered to the model
//! through the Skill tool unless `disable-model-invocation`, `/clear` and
//! an unknown `/x` as Claude Code handles them, and `cadre commands list`.

use serde_json::{Value, json};

use super::harness::{Project, Run, last_tool_results, listings, result_text};
use super::headless::Driven;
use super::kit::{FakeServer, anthropic};

/// The texts of the first user message of a request.
fn first_user_texts(body: &Value) -> Vec<String> {
    body["messages"][0]["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|b| b["text"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs cadre and checks it exited 0.
fn ok(p: &Project, server: Option<&FakeServer>, args: &[&str]) -> Run {
    let r = p.run(server, args);
    r.ok();
    r
}

/// A team's folder: a command with arguments in a namespace folder, one
/// with a file reference and a shell line its `allowed-tools` grant, and
/// one of the user's own.
fn project() -> Project {
    let p = Project::new();
    p.write(
        ".claude/commands/greet.md",
        "---\ndescription: Greet someone\nargument-hint: [name] [place]\n---\nHello $ARGUMENTS! first=$0 second=$1 idx=$ARGUMENTS[1]\n",
    );
    p.write(
        ".claude/commands/frontend/component.md",
        "Make the component $ARGUMENTS\n",
    );
    p.write(
        ".claude/commands/ship.md",
        "---\ndescription: Ship it\nallowed-tools: Bash(echo:*)\nmodel: claude-haiku-4-5\n---\nStatus: !`echo shell-$0`\nNotes: @notes.txt\n",
    );
    p.write("notes.txt", "remember the changelog\n");
    let user = p.home.path().join(".claude/commands");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(user.join("mine.md"), "My own command.\n").unwrap();
    p
}

#[test]
fn a_typed_command_is_expanded_with_arguments_files_and_shell_output() {
    let p = project();
    let server = FakeServer::start([
        anthropic::text_reply("greeted"),
        anthropic::text_reply("made"),
        anthropic::text_reply("shipped"),
    ]);
    let out = ok(&p, Some(&server), &["-p", "/greet Bob \"New York\" extra"]);
    assert_eq!(out.stdout.trim(), "greeted");
    let texts = first_user_texts(&server.request(0).json);
    assert!(
        texts.iter().any(|t| t
            == "<command-message>greet</command-message>\n<command-name>/greet</command-name>\n<command-args>Bob \"New York\" extra</command-args>"),
        "{texts:#?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t == "Hello Bob \"New York\" extra! first=Bob second=New York idx=New York\n"),
        "{texts:#?}"
    );

    // A subfolder is a namespace: `frontend/component.md` is
    // `/frontend:component`.
    ok(&p, Some(&server), &["-p", "/frontend:component Button"]);
    let texts = first_user_texts(&server.request(1).json);
    assert!(
        texts.iter().any(|t| t == "Make the component Button\n"),
        "{texts:#?}"
    );

    // The shell line runs before the prompt is sent (its allowed-tools
    // grant `echo`), the file is read through Read, and the command's
    // model answers.
    ok(&p, Some(&server), &["-p", "/ship alpha"]);
    let body = &server.request(2).json;
    let texts = first_user_texts(body);
    assert!(
        texts
            .iter()
            .any(|t| t == "Status: shell-alpha\nNotes: @notes.txt\n"),
        "{texts:#?}"
    );
    let file = texts
        .iter()
        .position(|t| {
            t.contains("Result of calling the Read tool") && t.contains("remember the changelog")
        })
        .unwrap_or_else(|| panic!("{texts:#?}"));
    let head = texts
        .iter()
        .position(|t| t.contains("<command-name>/ship</command-name>"))
        .unwrap();
    assert!(file < head, "the file comes before the command: {texts:#?}");
    assert_eq!(body["model"], "claude-haiku-4-5");
}

#[test]
fn a_shell_line_a_rule_refuses_stops_the_command_before_the_model() {
    let p = project();
    p.write(
        ".claude/settings.json",
        r#"{"permissions": {"deny": ["Bash(touch:*)"]}}"#,
    );
    p.write(
        ".claude/commands/mark.md",
        "---\nallowed-tools: Bash(touch:*), Bash(echo:*)\n---\nA: !`echo visible`\nB: !`touch denied-marker`\n",
    );
    // Not granted by allowed-tools: asks, and `-p` has nobody to ask.
    p.write(
        ".claude/commands/ungranted.md",
        "Run: !`touch ungranted-marker`\n",
    );
    // A line that runs and fails stops the command as well.
    p.write(
        ".claude/commands/failing.md",
        "---\nallowed-tools: Bash(ls:*), Bash(mkdir:*)\n---\nOut: !`ls no-such-file`\nThen: !`mkdir after-failure`\n",
    );
    let server = FakeServer::start([anthropic::text_reply("never")]);
    let out = ok(&p, Some(&server), &["-p", "/failing"]);
    assert!(
        out.stdout
            .starts_with("Shell command failed for pattern \"!`ls no-such-file`\": ")
            && out.stdout.contains("no-such-file"),
        "{}",
        out.stdout
    );
    assert!(!p.path().join("after-failure").exists());
    let out = ok(&p, Some(&server), &["-p", "/mark"]);
    assert!(
        out.stdout.contains(
            "Shell command permission check failed for pattern \"!`touch denied-marker`\""
        ) && out.stdout.contains("deny rule 'Bash(touch:*)'"),
        "{}",
        out.stdout
    );
    let out = ok(&p, Some(&server), &["-p", "/ungranted"]);
    assert!(
        out.stdout.contains(
            "Shell command permission check failed for pattern \"!`touch ungranted-marker`\""
        ),
        "{}",
        out.stdout
    );
    assert!(!p.path().join("denied-marker").exists());
    assert!(!p.path().join("ungranted-marker").exists());
    assert!(server.requests().is_empty(), "nothing reaches the model");
}

#[test]
fn an_untrusted_folder_runs_no_shell_line_of_its_commands() {
    let p = Project::untrusted();
    p.write(
        ".claude/commands/mark.md",
        "---\nallowed-tools: Bash(touch:*)\n---\nMarked: !`touch trust-marker`\n",
    );
    let server = FakeServer::start([anthropic::text_reply("ok"), anthropic::text_reply("ok")]);
    // Even with every call allowed, the repository's shell line does not run.
    let out = ok(
        &p,
        Some(&server),
        &["-p", "/mark", "--permission-mode", "bypassPermissions"],
    );
    assert!(!p.path().join("trust-marker").exists());
    assert!(
        out.stderr.contains("!`touch trust-marker` not run")
            && out.stderr.contains("command `mark`: shell lines"),
        "{}",
        out.stderr
    );
    let texts = first_user_texts(&server.request(0).json);
    assert!(
        texts
            .iter()
            .any(|t| t == "Marked: [not run: `touch trust-marker`; this folder is not trusted]\n"),
        "{texts:#?}"
    );
    // The same folder, trusted for one run: the line runs.
    ok(
        &p,
        Some(&server),
        &[
            "--trust",
            "-p",
            "/mark",
            "--permission-mode",
            "bypassPermissions",
        ],
    );
    assert!(p.path().join("trust-marker").exists());
}

#[test]
fn the_skill_tool_runs_a_command_and_refuses_a_user_only_one() {
    let p = Project::new();
    p.write(
        ".claude/commands/review.md",
        "---\ndescription: Review a file\n---\nReview $ARGUMENTS carefully.\n",
    );
    p.write(
        ".claude/commands/deploy.md",
        "---\ndescription: Deploy to production\ndisable-model-invocation: true\n---\nDeploy now.\n",
    );
    let server = FakeServer::start([
        anthropic::tool_use_reply("m1", "Skill", json!({"skill": "review", "args": "main.rs"})),
        anthropic::tool_use_reply("m2", "Skill", json!({"skill": "deploy"})),
        anthropic::text_reply("done"),
    ]);
    ok(&p, Some(&server), &["-p", "review main.rs"]);
    let listing = listings(&server.request(0).json);
    assert!(listing.contains("- review: Review a file"), "{listing}");
    assert!(!listing.contains("deploy"), "{listing}");
    let loaded = &last_tool_results(&server.request(1).json)[0];
    assert!(
        result_text(loaded).contains("Review main.rs carefully."),
        "{loaded}"
    );
    let refused = &last_tool_results(&server.request(2).json)[0];
    assert_eq!(refused["is_error"], true);
    assert!(
        result_text(refused).contains("no skill named `deploy`"),
        "{refused}"
    );
}

#[test]
fn commands_over_stream_json_and_clear_starts_a_new_session() {
    let p = project();
    let server = FakeServer::start([
        anthropic::text_reply("hi Ann"),
        anthropic::text_reply("Summary: greeted Ann."),
        anthropic::text_reply("fresh"),
        anthropic::text_reply("as written"),
    ]);
    let mut d = Driven::start(&p, &server, &[]);
    d.user("/greet Ann");
    let init = d.until("init", |v| v["subtype"] == "init");
    let commands: Vec<&str> = init["slash_commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for c in [
        "greet",
        "frontend:component",
        "mine",
        "ship",
        "clear",
        "compact",
    ] {
        assert!(commands.contains(&c), "{commands:?}");
    }
    let first = d.until("first result", |v| v["type"] == "result");
    assert_eq!(first["result"], "hi Ann");
    let old = first["session_id"].as_str().unwrap().to_string();
    let texts = first_user_texts(&server.request(0).json);
    assert!(
        texts.iter().any(|t| t.starts_with("Hello Ann! first=Ann")),
        "{texts:#?}"
    );

    // /compact summarises now, through the compaction cadre has.
    d.user("/compact keep the names");
    let compacted = d.until("compact result", |v| v["type"] == "result");
    assert_eq!(compacted["local_command"], "compact");
    assert!(
        compacted["result"]
            .as_str()
            .unwrap()
            .starts_with("compacted:"),
        "{compacted}"
    );
    assert!(server.request(1).body_str().contains("keep the names"));

    d.user("/clear");
    let reset = d.until("conversation_reset", |v| v["type"] == "conversation_reset");
    assert_eq!(reset["trigger"], "clear");
    assert_eq!(reset["session_id"], old.as_str());
    let new = reset["new_conversation_id"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    let cleared = d.until("clear result", |v| v["type"] == "result");
    assert_eq!(cleared["local_command"], "clear");
    assert_eq!(cleared["num_turns"], 0);
    assert_eq!(cleared["session_id"], new.as_str());

    d.user("after");
    let after = d.until("third result", |v| v["type"] == "result");
    assert_eq!(after["result"], "fresh");
    assert_eq!(after["session_id"], new.as_str());
    // `client_composed` (the SDKs' verbatimPrompts): sent as written.
    d.send(json!({"type": "user", "client_composed": true,
                  "message": {"role": "user", "content": "/greet Raw"}}));
    let raw = d.until("verbatim result", |v| v["type"] == "result");
    assert_eq!(raw["result"], "as written");
    assert_eq!(server.request(3).last_user_text().trim(), "/greet Raw");
    assert!(!server.request(3).body_str().contains("Hello Raw"));
    assert_eq!(d.finish(), 0);
    // Four model requests (the prompt, the summary, the prompt after
    // /clear, the verbatim one): /clear itself sent nothing, and the
    // conversation after it starts empty.
    assert_eq!(server.requests().len(), 4);
    let req = server.request(2);
    assert_eq!(req.messages().len(), 1, "{:#?}", req.messages());
    assert!(!req.body_str().contains("Ann"));
}

#[test]
fn an_unknown_command_reaches_the_model_with_a_note() {
    let p = project();
    let server = FakeServer::start([anthropic::text_reply("ok"), anthropic::text_reply("ok")]);
    ok(&p, Some(&server), &["-p", "/nosuch do it"]);
    let texts = first_user_texts(&server.request(0).json);
    let note = texts
        .iter()
        .position(|t| {
            t.contains("starts with the slash command /nosuch, but no command with that name")
                && t.contains("/greet")
        })
        .unwrap_or_else(|| panic!("{texts:#?}"));
    let prompt = texts.iter().position(|t| t == "/nosuch do it").unwrap();
    assert!(note < prompt);
    // A path is not a command.
    ok(&p, Some(&server), &["-p", "/usr/bin/env is a path"]);
    let texts = first_user_texts(&server.request(1).json);
    assert!(
        !texts.iter().any(|t| t.contains("slash command")),
        "{texts:#?}"
    );
}

#[test]
fn commands_are_listed_and_a_broken_file_is_reported_at_its_position() {
    let p = project();
    p.write(
        ".claude/commands/broken.md",
        "---\ndescription: ok\nallowed-tools: [Read\n  - x: y\n---\nbody\n",
    );
    let v = ok(&p, None, &["commands", "list", "--json"]).json();
    let list = v["skills"].as_array().unwrap();
    let find = |n: &str| list.iter().find(|s| s["name"] == n).cloned();
    let greet = find("greet").expect("greet");
    assert_eq!(greet["kind"], "command");
    assert_eq!(greet["argument_hint"], "[name] [place]");
    assert_eq!(greet["source"], "project");
    assert_eq!(greet["model_invocable"], true);
    assert_eq!(find("mine").unwrap()["source"], "user");
    assert!(find("frontend:component").is_some());
    assert!(find("broken").is_none());
    let diags = v["diagnostics"].to_string();
    assert!(
        diags.contains("broken.md") && diags.contains("invalid YAML frontmatter"),
        "{diags}"
    );
    let d = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["path"].as_str().is_some_and(|p| p.ends_with("broken.md")))
        .unwrap();
    assert!(d["line"].as_u64().unwrap() >= 3, "{d}");

    let shown = ok(&p, None, &["commands", "show", "greet"]);
    assert!(
        shown
            .stdout
            .contains("usage:         /greet [name] [place]"),
        "{}",
        shown.stdout
    );
    let config = ok(&p, None, &["config", "show"]);
    assert!(
        config.stdout.contains("# slash commands (honoured")
            && config.stdout.contains("/frontend:component"),
        "{}",
        config.stdout
    );
}

#[test]
fn chat_runs_commands_lists_them_and_clears_the_conversation() {
    let p = project();
    let server = FakeServer::start([
        anthropic::text_reply("hi Zoe"),
        anthropic::text_reply("fresh"),
    ]);
    let out = p.chat(Some(&server), "/greet Zoe\n/help\n/clear\nafter\n");
    let stderr = &out.stderr;
    assert_eq!(out.code, 0, "{stderr}");
    // /help: the built-ins, the commands with their hints, MCP prompts.
    for line in [
        "/clear",
        "/compact [instructions]",
        "/greet [name] [place]",
        "/frontend:component",
        "MCP prompts:",
    ] {
        assert!(stderr.contains(line), "{line}: {stderr}");
    }
    assert!(stderr.contains("cleared: new session"), "{stderr}");
    let texts = first_user_texts(&server.request(0).json);
    assert!(
        texts.iter().any(|t| t.starts_with("Hello Zoe! first=Zoe")),
        "{texts:#?}"
    );
    // After /clear the conversation starts empty, in a new session folder.
    let second = server.request(1);
    assert_eq!(second.messages().len(), 1, "{:#?}", second.messages());
    assert!(!second.body_str().contains("Zoe"));
    let sessions = p.session_ids().len();
    assert_eq!(sessions, 2, "one session before /clear, one after");
}

#[test]
fn a_command_added_while_a_stream_json_session_runs_is_used_at_the_next_prompt() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};
    let p = project();
    let server = FakeServer::start([anthropic::text_reply("one"), anthropic::text_reply("two")]);
    let mut child = p
        .command(Some(&server))
        .args([
            "-v",
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    for stream in [
        Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(child.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    let mut stdin = child.stdin.take().unwrap();
    let mut user = move |text: &str| {
        let v = json!({"type": "user", "message": {"role": "user", "content": text}});
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut seen = Vec::new();
    let mut wait_for = |f: &dyn Fn(&str) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(l) => {
                    let done = f(&l);
                    seen.push(l);
                    if done {
                        return;
                    }
                }
                Err(_) => panic!("timed out; saw {seen:#?}"),
            }
        }
    };
    user("/greet Ann");
    wait_for(&|l| l.contains("\"type\":\"result\""));
    p.write(
        ".claude/commands/tools/late.md",
        "Arrived late: $ARGUMENTS\n",
    );
    wait_for(&|l| l.contains("reloaded") && l.contains("tools:late"));
    user("/tools:late now");
    wait_for(&|l| l.contains("\"type\":\"result\""));
    drop(user); // closes stdin: the session ends
    assert!(child.wait().unwrap().success());
    let body = server.request(1).body_str();
    assert!(body.contains("Arrived late: now"), "{body}");
    assert!(
        body.contains("- tools:late: Arrived late"),
        "the listing tells the model: {body}"
    );
}

/// A PreSkillShellCommand hook sees each shell line before it runs, with
/// the command's name and who invoked it, and can refuse it: the command
/// stops before the model as a refused line would.
#[test]
fn a_pre_skill_shell_command_hook_sees_the_line_and_can_refuse_it() {
    let p = project();
    p.write(
        ".claude/settings.json",
        r#"{"hooks": {"PreSkillShellCommand": [{"hooks": [{"type": "command",
            "command": "cat > hook-input.json; grep -q forbidden hook-input.json && { echo 'no forbidden lines' >&2; exit 2; }; exit 0"}]}]}}"#,
    );
    p.write(
        ".claude/commands/ok.md",
        "---\nallowed-tools: Bash(echo:*)\n---\nSaid: !`echo fine`\n",
    );
    p.write(
        ".claude/commands/bad.md",
        "---\nallowed-tools: Bash(touch:*)\n---\nDo: !`touch forbidden-marker`\n",
    );
    let server = FakeServer::start([anthropic::text_reply("done")]);
    let out = ok(&p, Some(&server), &["-p", "/ok"]);
    assert_eq!(out.stdout.trim(), "done");
    let input: serde_json::Value = serde_json::from_str(&p.read("hook-input.json")).unwrap();
    assert_eq!(input["hook_event_name"], "PreSkillShellCommand");
    assert_eq!(input["tool_input"]["command"], "echo fine");
    assert_eq!(input["command_name"], "ok");
    assert_eq!(input["invoked_by"], "user");
    let out = ok(&p, Some(&server), &["-p", "/bad"]);
    assert!(
        out.stdout.contains(
            "Shell command permission check failed for pattern \"!`touch forbidden-marker`\""
        ) && out.stdout.contains("no forbidden lines"),
        "{}",
        out.stdout
    );
    assert!(!p.path().join("forbidden-marker").exists());
    assert_eq!(
        server.requests().len(),
        1,
        "the refused command sent nothing"
    );
}

#[test]
fn a_plain_prompt_reads_its_at_path_files_first() {
    let p = project();
    let outside = p.home.path().join("secret.txt");
    std::fs::write(&outside, "do not send").unwrap();
    let server = FakeServer::start([anthropic::text_reply("summarised")]);
    let prompt = format!("Summarise @notes.txt and @{} please", outside.display());
    let run = ok(&p, Some(&server), &["-p", &prompt]);
    let texts = first_user_texts(&server.request(0).json);
    let file = texts
        .iter()
        .position(|t| {
            t.contains("Result of calling the Read tool") && t.contains("remember the changelog")
        })
        .unwrap_or_else(|| panic!("{texts:#?}"));
    let typed = texts.iter().position(|t| *t == prompt).unwrap();
    assert!(file < typed, "{texts:#?}");
    assert!(
        !texts.iter().any(|t| t.contains("do not send")),
        "{texts:#?}"
    );
    assert!(run.stderr.contains("outside the project"), "{}", run.stderr);
}

/// `@agent-NAME` in a prompt (Claude Code's mention) asks the model to
/// hand the request to that agent; a name no agent has stays plain text.
#[test]
fn a_prompt_naming_an_agent_asks_for_it() {
    let p = project();
    p.write(
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews changes\n---\nReview.\n",
    );
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    let prompt = "check this @agent-reviewer and @agent-nobody";
    ok(&p, Some(&server), &["-p", prompt]);
    let texts = first_user_texts(&server.request(0).json);
    let typed = texts.iter().position(|t| *t == prompt).unwrap();
    let mention = texts
        .iter()
        .position(|t| {
            t.contains(r#"the agent "reviewer""#) && t.contains(r#"subagent_type "reviewer""#)
        })
        .unwrap_or_else(|| panic!("{texts:#?}"));
    assert!(typed < mention, "{texts:#?}");
    assert!(
        !texts.iter().any(|t| t.contains(r#""nobody""#)),
        "{texts:#?}"
    );
}

/// UserPromptExpansion fires when a typed `/command` is about to expand,
/// with Claude Code's fields: exit 2 blocks it (nothing is sent, no shell
/// line runs); exit 0 adds its output for the model; the matcher is the
/// command's name.
#[test]
fn user_prompt_expansion_hooks_see_block_and_add_to_a_command() {
    let p = project();
    p.write(
        ".claude/commands/deploy.md",
        "---\nallowed-tools: Bash(touch:*)\n---\nDeploy: !`touch ran.txt`\n",
    );
    p.write(
        ".claude/settings.json",
        r#"{"hooks": {"UserPromptExpansion": [
            {"matcher": "deploy", "hooks": [{"type": "command", "command": "cat > expansion.json; echo not on fridays >&2; exit 2"}]},
            {"matcher": "greet", "hooks": [{"type": "command", "command": "echo context-from-the-hook"}]}
        ]}}"#,
    );
    let server = FakeServer::start([anthropic::text_reply("hello")]);
    let run = p.run(Some(&server), &["-p", "/deploy now"]);
    assert!(
        run.stderr.contains("not on fridays") || run.stdout.contains("not on fridays"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(!p.path().join("ran.txt").exists());
    assert_eq!(server.requests().len(), 0);
    let input: Value = serde_json::from_str(&p.read("expansion.json")).unwrap();
    assert_eq!(input["hook_event_name"], "UserPromptExpansion");
    assert_eq!(input["expansion_type"], "slash_command");
    assert_eq!(input["command_name"], "deploy");
    assert_eq!(input["command_args"], "now");
    assert_eq!(input["command_source"], "projectSettings");
    assert_eq!(input["prompt"], "/deploy now");

    ok(&p, Some(&server), &["-p", "/greet Bob Paris"]);
    let texts = first_user_texts(&server.request(0).json);
    assert!(
        texts.iter().any(|t| t.contains("context-from-the-hook")),
        "{texts:#?}"
    );
    assert!(
        texts.iter().any(|t| t.contains("Hello Bob Paris!")),
        "{texts:#?}"
    );
}
