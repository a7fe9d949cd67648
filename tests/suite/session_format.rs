//! Sessions in Claude Code's format, both ways, through the real
//! programs: Claude Code (the conformance oracle) continues a session
//! cadre wrote, and cadre continues one Claude Code wrote. Each run has
//! the same project and `HOME`, so both look in the same
//! `~/.claude/projects/<key>/`.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::conformance::{is_main, oracle_in, server};
use super::harness::Project;
use super::kit::{FakeServer, TEST_KEY, anthropic};

/// Claude Code in `p`, against `server`, as the conformance harness runs it.
fn claude_code(p: &Project, server: &FakeServer) -> Command {
    let oracle = oracle_in(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap_or_else(|e| panic!("{e}"));
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
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(Stdio::null());
    c
}

/// Every text of a request's messages, tool calls as `tool_use:ID` and
/// their results as `tool_result:ID`, in order, with each message's role.
fn transcript_of_request(body: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("").to_string();
        match &m["content"] {
            Value::String(t) => out.push((role.clone(), t.clone())),
            Value::Array(blocks) => {
                for b in blocks {
                    let item = match b["type"].as_str() {
                        Some("text") => b["text"].as_str().unwrap_or("").to_string(),
                        Some("tool_use") => format!("tool_use:{}", b["id"].as_str().unwrap_or("")),
                        Some("tool_result") => {
                            format!("tool_result:{}", b["tool_use_id"].as_str().unwrap_or(""))
                        }
                        other => format!("{other:?}"),
                    };
                    out.push((role.clone(), item));
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether `wanted` appear in `seen` in this order, each as (role, a
/// piece of the text).
fn in_order(seen: &[(String, String)], wanted: &[(&str, &str)]) -> bool {
    let mut rest = seen.iter();
    wanted
        .iter()
        .all(|(role, text)| rest.any(|(r, t)| r == role && t.contains(text)))
}

/// Claude Code's `--resume` of a session cadre wrote sends the earlier
/// turns (the prompt, the tool call and its result, the answer) before the
/// new prompt: it reads cadre's message lines and skips cadre's own.
#[test]
fn claude_code_resumes_a_session_cadre_wrote() {
    let p = Project::new();
    p.write("notes.txt", "the notes say plum\n");
    let first = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_read",
            "Read",
            json!({"file_path": p.path().join("notes.txt")}),
        ),
        anthropic::text_reply("They say plum."),
    ]);
    let run = p.run(
        Some(&first),
        &["-p", "read the notes", "--output-format", "json"],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let id = run.json()["session_id"].as_str().unwrap().to_string();
    assert!(p.transcript_of(&id).is_file());

    let second = server(vec![anthropic::text_reply("Still plum.")]);
    second.skip_invariant_checks();
    let out = claude_code(&p, &second)
        .args([
            "-p",
            "--resume",
            &id,
            "what did they say?",
            "--output-format",
            "json",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(result["session_id"], id.as_str(), "{result}");
    assert_eq!(result["result"], "Still plum.", "{result}");
    let main = second
        .requests()
        .into_iter()
        .find(is_main)
        .expect("a request of the main conversation");
    let seen = transcript_of_request(&main.json);
    assert!(
        in_order(
            &seen,
            &[
                ("user", "read the notes"),
                ("assistant", "tool_use:toolu_read"),
                ("user", "tool_result:toolu_read"),
                ("assistant", "They say plum."),
                ("user", "what did they say?"),
            ]
        ),
        "{seen:#?}"
    );
    // It appended to the same file, continuing the chain: cadre reads the
    // whole conversation back.
    let list = p
        .run(None, &["sessions", "show", &id, "--json"])
        .ok()
        .json();
    let texts: Vec<String> = list["messages_list"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect();
    assert!(texts.iter().any(|t| t == "Still plum."), "{texts:#?}");
}

/// cadre's `--resume` of a session Claude Code wrote (its prompt as a
/// string, its answer one content block a line, its attachments and own
/// events) sends the earlier turns and the new prompt, and appends to the
/// same file.
#[test]
fn cadre_resumes_a_session_claude_code_wrote() {
    let p = Project::new();
    let first = server(vec![anthropic::text_reply("Remembered: plum.")]);
    first.skip_invariant_checks();
    let out = claude_code(&p, &first)
        .args(["-p", "remember plum", "--output-format", "json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = serde_json::from_str::<Value>(stdout.trim()).unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        p.transcript_of(&id).is_file(),
        "Claude Code wrote {id} elsewhere"
    );

    let second = FakeServer::start([anthropic::text_reply("It was plum.")]);
    let run = p.run(Some(&second), &["run", "--resume", &id, "what was it?"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("It was plum."), "{}", run.stdout);
    second.assert_invariants();
    let seen = transcript_of_request(&second.request(0).json);
    assert!(
        in_order(
            &seen,
            &[
                ("user", "remember plum"),
                ("assistant", "Remembered: plum."),
                ("user", "what was it?"),
            ]
        ),
        "{seen:#?}"
    );
    let text = std::fs::read_to_string(p.transcript_of(&id)).unwrap();
    assert!(
        text.contains("It was plum."),
        "appended to Claude Code's file"
    );
}

/// After a compaction (`/compact` in a stream-json session) Claude Code's
/// `--resume` of the session goes on from the summary, as after one of its
/// own: cadre writes Claude Code's view of it (a `compact_boundary`, the
/// summary) beside its own `compact` line, and cadre's own resume still
/// reads the compacted history once.
#[test]
fn claude_code_resumes_a_compacted_cadre_session_from_the_summary() {
    let p = Project::new();
    let first = FakeServer::start([
        anthropic::text_reply("Remembered: plum."),
        anthropic::text_reply("SUMMARY: the fruit is known."),
    ]);
    let mut d = super::headless::Driven::start(&p, &first, &[]);
    d.user("remember plum");
    let answered = d.until("first result", |v| v["type"] == "result");
    let id = answered["session_id"].as_str().unwrap().to_string();
    d.user("/compact");
    d.until("compact result", |v| v["type"] == "result");
    assert_eq!(d.finish(), 0);

    let second = server(vec![anthropic::text_reply("It was in the summary.")]);
    second.skip_invariant_checks();
    let out = claude_code(&p, &second)
        .args([
            "-p",
            "--resume",
            &id,
            "what was it?",
            "--output-format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let main = second
        .requests()
        .into_iter()
        .find(is_main)
        .expect("a request of the main conversation");
    let seen = transcript_of_request(&main.json);
    assert!(
        in_order(
            &seen,
            &[
                ("user", "SUMMARY: the fruit is known."),
                ("user", "what was it?")
            ]
        ),
        "{seen:#?}"
    );
    assert!(
        !seen.iter().any(|(_, t)| t.contains("remember plum")),
        "the compacted turns are not sent again: {seen:#?}"
    );

    // cadre's own resume: the summary once, then the new prompt.
    let third = FakeServer::start([anthropic::text_reply("plum")]);
    let run = p.run(Some(&third), &["run", "--resume", &id, "and now?"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let seen = transcript_of_request(&third.request(0).json);
    let summaries = seen
        .iter()
        .filter(|(_, t)| t.contains("SUMMARY: the fruit is known."))
        .count();
    assert_eq!(summaries, 1, "{seen:#?}");
    assert!(
        !seen.iter().any(|(_, t)| t.contains("remember plum")),
        "{seen:#?}"
    );
}
