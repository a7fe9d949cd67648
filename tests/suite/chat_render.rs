//! Answers drawn as Markdown on a terminal (docs/chat.md): in `cadre chat`
//! and in `cadre run` when stdout is a terminal, driven through tmux;
//! never when stdout is a pipe.

use super::ask_user::{Tmux, chat_line, quote};
use super::harness::Project;
use super::kit::{FakeServer, anthropic};
use serde_json::json;

const ANSWER: &str = "# Plan\n\nUse **bold** and `code` here.\n\n- first item\n- second item\n\n| name | size |\n|------|------|\n| a.rs | 10 |\n\n```rust\nfn main() {}\n```\nDone now.";

fn assert_drawn(screen: &str) {
    for shown in [
        "Plan",
        "Use bold and code here.",
        "• first item",
        "• second item",
        "name │ size",
        "a.rs │ 10",
        "  fn main() {}",
        "Done now.",
    ] {
        assert!(screen.contains(shown), "{shown:?} missing:\n{screen}");
    }
    for raw in ["**", "`code`", "```", "|------|", "- first", "# Plan"] {
        assert!(!screen.contains(raw), "{raw:?} drawn as typed:\n{screen}");
    }
}

#[test]
fn chat_draws_the_answer_as_markdown_with_colour_unless_told_not_to() {
    for no_color in [false, true] {
        let p = Project::new();
        let server = FakeServer::start([anthropic::text_reply(ANSWER)]);
        let t = Tmux::start(p.path(), &chat_line(&p, &server, no_color));
        t.wait_for("cadre chat");
        t.keys(&["show me", "Enter"]);
        t.wait_for("Done now.");
        assert_drawn(&t.screen());
        let escaped = t.capture(true);
        let code_line = escaped
            .lines()
            .find(|l| l.contains("fn") && l.contains("main"))
            .unwrap_or_default();
        if no_color {
            assert!(!escaped.contains("\u{1b}[1m"), "{escaped:?}");
            assert!(!code_line.contains('\u{1b}'), "{code_line:?}");
        } else {
            // Bold text and a coloured code line.
            assert!(escaped.contains("\u{1b}[1m"), "{escaped:?}");
            assert!(code_line.contains("\u{1b}["), "{code_line:?}");
        }
        t.keys(&["C-d"]);
    }
}

#[test]
fn run_draws_markdown_on_a_terminal_and_writes_it_as_typed_to_a_pipe() {
    let p = Project::new();
    // A pipe: the text exactly as the model wrote it.
    let server = FakeServer::start([anthropic::text_reply(ANSWER)]);
    let run = p.run(Some(&server), &["run", "show me"]);
    assert_eq!(run.ok().stdout.trim_end(), ANSWER);
    // A terminal (--no-color: the layout, no escapes).
    let server = FakeServer::start([anthropic::text_reply(ANSWER)]);
    let line = chat_line(&p, &server, true).replace(
        " chat; sleep 30",
        &format!(" --no-color run {}; sleep 30", quote("show me")),
    );
    let t = Tmux::start(p.path(), &line);
    t.wait_for("Done now.");
    assert_drawn(&t.screen());
    assert!(!t.capture(true).contains("\u{1b}[1m"));
}

/// A sub-agent's progress line never lands in the middle of the answer:
/// the text before the Agent call is on a line of its own, and so is the
/// progress.
#[test]
fn a_sub_agents_progress_does_not_split_the_answer() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if !super::harness::is_main_session(r) {
            return anthropic::text_reply("notes are in notes.md")
                .delayed(std::time::Duration::from_millis(800));
        }
        if r.messages().iter().all(|m| m["role"] != "assistant") {
            return anthropic::message()
                .text("Let me delegate.")
                .tool_use(
                    "toolu_a",
                    "Agent",
                    serde_json::json!({"description": "read notes", "prompt": "find notes",
                                       "subagent_type": "Explore"}),
                )
                .reply();
        }
        anthropic::text_reply("They are in **notes.md**.")
    });
    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    t.keys(&["where are the notes", "Enter"]);
    t.wait_for("They are in notes.md.");
    let screen = t.screen();
    assert!(
        screen.lines().any(|l| l.trim() == "Let me delegate."),
        "{screen}"
    );
    assert!(
        !screen
            .lines()
            .any(|l| l.contains("Let me delegate.") && l.contains("[Explore]")),
        "{screen}"
    );
    t.keys(&["C-d"]);
}

/// A prompt typed in one chat is in the next one's history (Up brings it
/// back), in a file only its user can read; a line ended with `\` goes on
/// to the next, and the model gets both lines.
#[test]
fn chat_keeps_history_across_sessions_and_takes_multi_line_prompts() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::text_reply("first answer"),
        anthropic::text_reply("second answer"),
    ]);
    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    t.keys(&["-l", "line one \\"]);
    t.keys(&["Enter"]);
    t.keys(&["-l", "line two"]);
    t.keys(&["Enter"]);
    t.wait_for("first answer");
    t.keys(&["C-d"]);
    drop(t);
    let first = super::harness::user_texts(&server.request(0));
    assert!(first.starts_with("line one \nline two\n"), "{first}");
    let history = p.home.path().join(".local/state/cadre/chat-history");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&history).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    t.keys(&["Up"]);
    t.wait_for("line two");
    t.keys(&["Enter"]);
    t.wait_for("second answer");
    assert!(
        super::harness::user_texts(&server.request(1)).contains("line one \nline two"),
        "{}",
        super::harness::user_texts(&server.request(1))
    );
    t.keys(&["C-d"]);
}

/// Chat's built-ins answer without the model: /help lists them, /model
/// switches the next request's model, /cost and /context report what was
/// spent, /agents lists the catalog, an unknown /name says so, /exit
/// leaves.
#[test]
fn chat_built_in_commands_answer_without_the_model() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::text_reply("first"),
        anthropic::text_reply("second"),
    ]);
    let line =
        chat_line(&p, &server, true).replace(" chat; sleep 30", " chat; echo chat-ended; sleep 30");
    let t = Tmux::start(p.path(), &line);
    t.wait_for("cadre chat");
    t.keys(&["/help", "Enter"]);
    t.wait_for("/permissions");
    let screen = t.screen();
    for listed in [
        "/clear",
        "/compact",
        "/cost",
        "/context",
        "/model [name]",
        "/exit",
    ] {
        assert!(screen.contains(listed), "{listed} not in /help:\n{screen}");
    }
    t.keys(&["/nosuch", "Enter"]);
    t.wait_for("unknown command /nosuch");
    t.keys(&["hello", "Enter"]);
    t.wait_for("first");
    t.keys(&["/cost", "Enter"]);
    t.wait_for("total: $");
    assert!(t.screen().contains("main: 1 requests"), "{}", t.screen());
    t.keys(&["/context", "Enter"]);
    t.wait_for("in the last request");
    t.keys(&["/agents", "Enter"]);
    t.wait_for("general-purpose");
    t.keys(&["/model claude-opus-4-1", "Enter"]);
    t.wait_for("model: claude-opus-4-1");
    t.keys(&["again", "Enter"]);
    t.wait_for("second");
    t.keys(&["/exit", "Enter"]);
    t.wait_for("chat-ended");
    // Only the two prompts reached the model, the second on the new model.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].json["model"], "claude-opus-4-1");
}

/// The line above each prompt: model, mode, context, tasks by default;
/// the output of Claude Code's `statusLine` command when the settings have
/// one (it gets the session's state on stdin). A clone's `statusLine` is
/// skipped until the folder is trusted.
#[test]
fn chat_shows_a_status_line_and_the_settings_command_replaces_it() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::text_reply("hi")]);
    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    t.wait_for("default · context 0% · 0 task(s) running");
    t.keys(&["C-d"]);
    drop(t);

    p.write(
        ".claude/settings.json",
        r#"{"statusLine": {"type": "command", "command": "cat > status-input.json; echo \"STATUS $PWD\"", "padding": 0}}"#,
    );
    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    t.wait_for("STATUS ");
    let input: serde_json::Value = serde_json::from_str(&p.read("status-input.json")).unwrap();
    assert!(
        input["model"]["id"].as_str().is_some_and(|m| !m.is_empty()),
        "{input}"
    );
    assert!(input["session_id"].as_str().is_some(), "{input}");
    t.keys(&["C-d"]);
    drop(t);

    let clone = Project::untrusted();
    clone.write(
        ".claude/settings.json",
        r#"{"statusLine": {"type": "command", "command": "touch ran"}}"#,
    );
    let show = clone.run(None, &["config", "show", "--json"]);
    let skipped = show.ok().json()["skipped"].to_string();
    assert!(skipped.contains("status_line"), "{skipped}");
}

/// Esc cancels a running turn as Ctrl-C does, and what was typed while the
/// turn ran is waiting on the next prompt line.
#[test]
fn esc_cancels_a_running_turn_and_keeps_what_was_typed() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::text_reply("too late").delayed(std::time::Duration::from_secs(60)),
        anthropic::text_reply("second answer"),
    ]);
    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    t.keys(&["slow one", "Enter"]);
    assert!(server.wait_for_requests(1, std::time::Duration::from_secs(20)));
    t.keys(&["next", "Escape"]);
    t.wait_for("(cancelled)");
    t.wait_for("› next");
    t.keys(&[" please", "Enter"]);
    t.wait_for("second answer");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let last = requests[1].json["messages"].to_string();
    assert!(last.contains("next please"), "{last}");
    assert!(!t.screen().contains("too late"), "{}", t.screen());
}

/// The permission question offers "always" with the rule it would add;
/// that answer writes the rule to the local settings and the next call it
/// covers runs without a question.
#[test]
fn always_at_the_permission_question_adds_the_rule_it_named() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Bash", json!({"command": "echo one"})),
        anthropic::text_reply("did one"),
        anthropic::tool_use_reply("toolu_2", "Bash", json!({"command": "echo two"})),
        anthropic::text_reply("did two"),
    ]);
    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    t.keys(&["first", "Enter"]);
    t.wait_for("[a]lways: allow Bash(echo:*) (kept in .claude/settings.local.json)");
    t.keys(&["a", "Enter"]);
    t.wait_for("did one");
    t.keys(&["second", "Enter"]);
    t.wait_for("did two");
    assert_eq!(t.screen().matches("Allow?").count(), 1, "{}", t.screen());
    let local: serde_json::Value =
        serde_json::from_str(&p.read(".claude/settings.local.json")).unwrap();
    assert_eq!(local["permissions"]["allow"], json!(["Bash(echo:*)"]));
    let requests = server.requests();
    let result = requests[3].json["messages"].to_string();
    assert!(result.contains("two"), "{result}");
}

/// `/permissions deny RULE` binds the rest of the session without a
/// question; `/permissions` lists it and `/permissions remove` takes it
/// away.
#[test]
fn permissions_added_in_chat_bind_the_session() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Bash", json!({"command": "touch made.txt"})),
        anthropic::text_reply("tried"),
    ]);
    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    t.keys(&["/permissions deny Bash(touch:*)", "Enter"]);
    t.wait_for("deny Bash(touch:*) for the rest of this session");
    t.keys(&["/permissions deny Bash(", "Enter"]);
    t.wait_for("not a permission rule: Bash(");
    t.keys(&["go", "Enter"]);
    t.wait_for("tried");
    assert!(!p.path().join("made.txt").exists());
    assert!(!t.screen().contains("Allow?"), "{}", t.screen());
    let result = server.requests()[1].json["messages"].to_string();
    assert!(result.contains("Bash(touch:*)"), "{result}");
    t.keys(&["/permissions", "Enter"]);
    t.wait_for("added in this session:");
    t.wait_for("  deny Bash(touch:*)");
    t.keys(&["/permissions remove Bash(touch:*)", "Enter"]);
    t.wait_for("removed Bash(touch:*) for this session");
}

/// `/resume` lists this project's sessions and `/resume N` continues one
/// in the running chat: the next request carries its conversation. A
/// wrong id leaves the chat as it was.
#[test]
fn chat_resumes_an_earlier_session_in_place() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::text_reply("first answer"),
        anthropic::text_reply("second answer"),
        anthropic::text_reply("third answer"),
    ]);
    let line =
        chat_line(&p, &server, true).replace(" chat; sleep 30", " chat; echo chat-ended; sleep 30");
    let t = Tmux::start(p.path(), &line);
    t.wait_for("cadre chat");
    t.keys(&["remember the word pelican", "Enter"]);
    t.wait_for("first answer");
    t.keys(&["/exit", "Enter"]);
    t.wait_for("chat-ended");
    drop(t);

    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    t.keys(&["a new chat", "Enter"]);
    t.wait_for("second answer");
    t.keys(&["/resume", "Enter"]);
    t.wait_for("/resume N or /resume SESSION-ID");
    let screen = t.screen();
    assert!(screen.contains("remember the word pelican"), "{screen}");
    assert!(screen.contains("(this chat)"), "{screen}");
    t.keys(&["/resume no-such-session", "Enter"]);
    t.wait_for("cannot resume no-such-session");
    // The number the list gives the older session.
    let n = screen
        .lines()
        .find(|l| l.contains("pelican"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    t.keys(&[&format!("/resume {n}"), "Enter"]);
    t.wait_for("resumed session");
    t.keys(&["what was the word?", "Enter"]);
    t.wait_for("third answer");
    let last = server.requests()[2].json["messages"].to_string();
    assert!(
        last.contains("pelican") && !last.contains("a new chat"),
        "{last}"
    );
}

/// A MessageDisplay hook (python): keeps its input, shows the text in
/// capitals.
const SHOUT: &str = r#"import json, sys
event = json.load(sys.stdin)
with open("display.jsonl", "a") as f:
    f.write(json.dumps(event) + "\n")
print(json.dumps({"hookSpecificOutput": {"hookEventName": "MessageDisplay",
                                         "displayContent": event["delta"].upper()}}))
"#;

/// MessageDisplay in chat (docs/hooks.md): while the answer streams, each
/// batch of newly completed lines goes through the hooks, then the rest of
/// the last line (`final`); the screen shows what the hooks answered, and
/// the model keeps the words it wrote.
#[test]
fn chat_shows_the_answer_as_message_display_hooks_rewrite_it() {
    let p = Project::new();
    p.write(".claude/hooks/shout.py", SHOUT);
    p.write(
        ".claude/settings.json",
        &json!({"hooks": {"MessageDisplay": [{"hooks": [
            {"type": "command", "command": "python3", "args": [".claude/hooks/shout.py"]}
        ]}]}})
        .to_string(),
    );
    // The fake model streams this text in two pieces: "quiet one\nquiet"
    // and " two\nquiet end".
    let server = FakeServer::start([
        anthropic::text_reply("quiet one\nquiet two\nquiet end"),
        anthropic::text_reply("next answer"),
    ]);
    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    t.keys(&["speak", "Enter"]);
    t.wait_for("QUIET END");
    t.keys(&["again", "Enter"]);
    t.wait_for("NEXT ANSWER");
    let screen = t.screen();
    for shown in ["QUIET ONE", "QUIET TWO"] {
        assert!(screen.contains(shown), "{shown:?} missing:\n{screen}");
    }
    assert!(!screen.contains("quiet"), "{screen}");
    // The model is sent its own words back.
    let second = server.request(1).json["messages"].to_string();
    assert!(
        second.contains(r"quiet one\nquiet two\nquiet end"),
        "{second}"
    );
    let seen: Vec<serde_json::Value> = p
        .read("display.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let batches: Vec<(u64, bool, &str)> = seen
        .iter()
        .map(|e| {
            (
                e["index"].as_u64().unwrap(),
                e["final"].as_bool().unwrap(),
                e["delta"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        batches,
        [
            (0, false, "quiet one\n"),
            (1, false, "quiet two\n"),
            (2, true, "quiet end"),
            (0, true, "next answer"),
        ],
        "{seen:#?}"
    );
    assert!(
        seen.iter()
            .all(|e| e["hook_event_name"] == "MessageDisplay")
    );
    // One id per message, and each prompt's own turn id.
    assert_eq!(seen[0]["message_id"], seen[2]["message_id"]);
    assert_ne!(seen[0]["message_id"], seen[3]["message_id"]);
    assert!(seen[0]["turn_id"].as_str().is_some_and(|t| !t.is_empty()));
    assert_ne!(seen[0]["turn_id"], seen[3]["turn_id"]);
    t.keys(&["C-d"]);
}
