//! Long-lived sessions through the binary: resume and continue from the
//! transcript, `cadre sessions`, and a resumed session's requests compared
//! byte for byte with those of a session that never stopped.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::harness::Project;
use super::kit::{FakeServer, anthropic};

/// The session folders under the project's transcript folder.
fn session_ids(p: &Project) -> BTreeSet<String> {
    p.session_ids().into_iter().collect()
}

/// Runs `cadre chat ARGS` with `input` on stdin; panics unless it
/// succeeds. Returns what it printed.
pub(super) fn chat(p: &Project, server: &FakeServer, args: &[&str], input: &str) -> String {
    let mut child = p
        .command(Some(server))
        .arg("chat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The only id in `after` that is not in `before`.
fn new_id(before: &BTreeSet<String>, after: &BTreeSet<String>) -> String {
    let new: Vec<&String> = after.difference(before).collect();
    assert_eq!(new.len(), 1, "one new session: {new:?}");
    new[0].clone()
}

fn first_turn_replies(file: &str) -> Vec<super::kit::Reply> {
    vec![
        anthropic::tool_use_reply("toolu_1", "Read", json!({"file_path": file})),
        anthropic::text_reply("read it"),
    ]
}

#[test]
fn a_resumed_chat_sends_the_bytes_an_uninterrupted_one_would() {
    let p = Project::new();
    let file = p.write("notes.txt", "alpha\n");
    let file = file.to_str().unwrap();

    // Uninterrupted: two prompts in one process.
    let mut replies = first_turn_replies(file);
    replies.push(anthropic::text_reply("second"));
    let whole = FakeServer::start(replies);
    chat(&p, &whole, &[], "one\ntwo\n");
    assert_eq!(whole.request_count(), 3);

    // Interrupted: the first prompt, the process ends, then a new process
    // resumes the session with the second prompt.
    let before = session_ids(&p);
    let first = FakeServer::start(first_turn_replies(file));
    chat(&p, &first, &[], "one\n");
    let id = new_id(&before, &session_ids(&p));
    let resumed = FakeServer::start([anthropic::text_reply("second")]);
    chat(&p, &resumed, &["--resume", &id], "two\n");

    assert_eq!(resumed.request_count(), 1);
    assert_eq!(
        resumed.request(0).body_str(),
        whole.request(2).body_str(),
        "the resumed request differs from the uninterrupted one"
    );
    // The resumed process wrote to the same session, no new folder.
    assert_eq!(session_ids(&p).len(), 2);
    resumed.assert_invariants();
}

#[test]
fn continue_picks_the_latest_session_and_fork_leaves_it_alone() {
    let p = Project::new();
    let s1 = FakeServer::start([anthropic::text_reply("first")]);
    assert_eq!(p.run(Some(&s1), &["run", "older task"]).code, 0);
    std::thread::sleep(Duration::from_millis(20));
    let s2 = FakeServer::start([anthropic::text_reply("second")]);
    assert_eq!(p.run(Some(&s2), &["run", "newer task"]).code, 0);
    let ids = session_ids(&p);

    let s3 = FakeServer::start([anthropic::text_reply("third")]);
    let r = p.run(Some(&s3), &["run", "--continue", "--fork-session", "go on"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let texts: Vec<String> = s3
        .request(0)
        .messages()
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(texts, ["newer task", "second", "go on"]);
    // The fork is a new session; the one it came from did not change.
    let forked = new_id(&ids, &session_ids(&p));
    let list = p.run(None, &["sessions", "list", "--json"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let rows: Vec<Value> = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(rows.len(), 3);
    let row = |id: &str| rows.iter().find(|r| r["id"] == id).unwrap().clone();
    assert_eq!(row(&forked)["messages"], 4);
    assert_eq!(row(&forked)["turns"], 2);
    // Two responses of 10 tokens in and 5 out, at claude-sonnet-4's
    // default price ($3 and $15 per million).
    let cost = row(&forked)["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.000_21).abs() < 1e-9, "{cost}");
    for id in &ids {
        assert_eq!(row(id)["messages"], 2, "{id} unchanged");
        assert_eq!(row(id)["model"], "claude-sonnet-4-5");
    }
    // The latest session is the fork now.
    assert_eq!(rows.last().unwrap()["id"], forked.as_str());

    let rm = p.run(None, &["sessions", "rm", &forked]);
    assert_eq!(rm.code, 0, "{}", rm.stderr);
    assert_eq!(session_ids(&p), ids);
}

#[test]
fn resume_refuses_unknown_or_hostile_ids_clearly() {
    let p = Project::new();
    let s = FakeServer::start([]);
    for id in ["../../etc", "20260101T120000-deadbeef"] {
        let r = p.run(Some(&s), &["run", "--resume", id, "x"]);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains(id), "{}", r.stderr);
    }
    let r = p.run(Some(&s), &["run", "--continue", "x"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no session to continue"), "{}", r.stderr);
    let r = p.run(Some(&s), &["run", "--fork-session", "x"]);
    assert_eq!(r.code, 2);
    assert_eq!(s.request_count(), 0);
}

#[test]
fn resume_after_kill_9_mid_turn_answers_each_tool_call_once() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::tool_use_reply(
        "toolu_slow",
        "Bash",
        json!({"command": "sleep 3", "description": "wait"}),
    )]);
    let mut child = p
        .command(Some(&server))
        .args([
            "run",
            "--permission-mode",
            "bypassPermissions",
            "start the work",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the assistant's tool call is in the transcript, then
    // kill the process without letting it write anything more.
    let started = Instant::now();
    let main = loop {
        let found = session_ids(&p)
            .into_iter()
            .next()
            .map(|id| p.transcript_of(&id));
        if let Some(f) = found
            && std::fs::read_to_string(&f).is_ok_and(|t| t.contains("toolu_slow"))
        {
            break f;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "no tool call");
        std::thread::sleep(Duration::from_millis(10));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // A crash can also leave half a line behind.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&main)
        .unwrap();
    f.write_all(b"{\"type\":\"message\",\"mess").unwrap();
    drop(f);

    let again = FakeServer::start([anthropic::text_reply("carried on")]);
    let r = p.run(
        Some(&again),
        &[
            "run",
            "--continue",
            "--permission-mode",
            "bypassPermissions",
            "go on",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("carried on"));
    again.assert_invariants();
    let msgs = again.request(0).messages().to_vec();
    assert_eq!(msgs.len(), 3, "{msgs:#?}");
    assert_eq!(msgs[1]["content"][0]["id"], "toolu_slow");
    let results: Vec<&Value> = msgs[2]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["tool_use_id"], "toolu_slow");
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(
        msgs[2]["content"].as_array().unwrap().last().unwrap()["text"],
        "go on"
    );
    // The cut line was dropped: every line of the file parses now.
    for line in std::fs::read_to_string(&main).unwrap().lines() {
        serde_json::from_str::<Value>(line).unwrap();
    }
}

/// `value` with every `cache_control` key removed (breakpoints move from
/// request to request; everything else must stay).
fn without_cache_control(mut value: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("cache_control");
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut value);
    value
}

/// A project whose model has a 1000-token window, compacting at half.
fn small_window() -> Project {
    let mut p = Project::new();
    p.config("[compact]\nthreshold = 0.5\n[compact.windows]\n\"claude-\" = 1000\n");
    p
}

fn read_call(file: &str, input_tokens: u64) -> super::kit::Reply {
    anthropic::message()
        .tool_use("toolu_1", "Read", json!({"file_path": file}))
        .usage(input_tokens, 10)
        .reply()
}

fn compact_lines(p: &Project) -> Vec<Value> {
    p.transcript_lines()
        .into_iter()
        .filter(|l| l["type"] == "compact")
        .collect()
}

#[test]
fn past_the_threshold_a_session_compacts_once_on_its_cached_prefix() {
    let p = small_window();
    let file = p.write("notes.txt", "alpha\n");
    let server = FakeServer::start([
        read_call(file.to_str().unwrap(), 600),
        anthropic::message()
            .text("SUMMARY: read notes.txt")
            .usage(50, 20)
            .reply(),
        anthropic::message().text("all done").usage(120, 5).reply(),
    ]);
    let r = p.run(Some(&server), &["run", "look at the notes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "all done");
    assert_eq!(server.request_count(), 3);
    server.assert_invariants();

    let before = without_cache_control(server.request(0).json);
    let compaction = without_cache_control(server.request(1).json);
    let after = without_cache_control(server.request(2).json);
    // Same system, tools, model and sampling; the earlier messages as they
    // were; only the instruction block added at the very end.
    for key in ["system", "tools", "model", "max_tokens"] {
        assert_eq!(compaction[key], before[key], "{key}");
        assert_eq!(after[key], before[key], "{key}");
    }
    let msgs = compaction["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[0], before["messages"][0]);
    assert_eq!(msgs[1]["content"][0]["id"], "toolu_1");
    let last = msgs[2]["content"].as_array().unwrap();
    assert_eq!(last[0]["type"], "tool_result");
    assert!(last[1]["text"].as_str().unwrap().contains("summary"));
    // Then the summary replaces the first prompt; the last exchange stays.
    let next = after["messages"].as_array().unwrap();
    assert_eq!(next.len(), 3);
    assert!(
        next[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("SUMMARY: read notes.txt")
    );
    assert_eq!(next[1], msgs[1]);
    let tail = next[2]["content"].as_array().unwrap();
    assert_eq!(tail[0], last[0]);
    // The summary need not name the agent types: they are told again, in
    // full, after the tool result.
    assert_eq!(tail.len(), 2, "{tail:#?}");
    let told = tail[1]["text"].as_str().unwrap();
    assert!(
        told.starts_with("<system-reminder>") && told.contains("- Explore:"),
        "{told}"
    );

    let lines = compact_lines(&p);
    assert_eq!(lines.len(), 1, "compacted once");
    assert_eq!(lines[0]["trigger"], "threshold");
    // The transcript rebuilds the compacted history.
    let list = p.run(None, &["sessions", "list", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(rows[0]["messages"], 4);
    assert_eq!(rows[0]["compactions"], 1);
    assert_eq!(rows[0]["turns"], 2);
}

#[test]
fn prompt_is_too_long_compacts_once_and_retries_once() {
    let p = Project::new();
    let file = p.write("notes.txt", "alpha\n");
    let too_long = || {
        super::kit::Reply::anthropic_error(
            400,
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
        )
    };
    let server = FakeServer::start([
        read_call(file.to_str().unwrap(), 10),
        too_long(),
        anthropic::text_reply("SUMMARY"),
        anthropic::text_reply("fits now"),
    ]);
    let r = p.run(Some(&server), &["run", "look"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "fits now");
    assert_eq!(server.request_count(), 4);
    assert!(
        server.request(3).messages()[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("SUMMARY")
    );
    assert_eq!(compact_lines(&p)[0]["trigger"], "overflow");

    // Still too long after compacting: the run fails, no loop.
    let p = Project::new();
    let server = FakeServer::start([
        read_call(file.to_str().unwrap(), 10),
        too_long(),
        anthropic::text_reply("SUMMARY"),
        too_long(),
    ]);
    let r = p.run(Some(&server), &["run", "look"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("prompt is too long"), "{}", r.stderr);
    assert_eq!(server.request_count(), 4);
}

#[test]
fn a_failed_compaction_leaves_history_and_transcript_untouched() {
    let p = small_window();
    let file = p.write("notes.txt", "alpha\n");
    let server = FakeServer::start([
        read_call(file.to_str().unwrap(), 600),
        super::kit::Reply::anthropic_error(400, "invalid_request_error", "nope"),
        anthropic::message()
            .text("done anyway")
            .usage(100, 5)
            .reply(),
    ]);
    let r = p.run(Some(&server), &["run", "look"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "done anyway");
    assert_eq!(server.request_count(), 3);
    // The normal request went out with the full history, no instruction.
    let msgs = server.request(2).messages().to_vec();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[0]["content"][0]["text"], "look");
    assert_eq!(msgs[2]["content"].as_array().unwrap().len(), 1);
    assert!(compact_lines(&p).is_empty());
    let list = p.run(None, &["sessions", "list", "--json"]);
    let rows: Vec<Value> = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(rows[0]["messages"], 4);
}

#[test]
fn slash_compact_in_chat_summarises_on_the_cached_prefix_and_resume_keeps_it() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::text_reply("first"),
        anthropic::text_reply("SUMMARY of one"),
        anthropic::text_reply("second"),
    ]);
    chat(
        &p,
        &server,
        &[],
        "one\n/compact mention the word zebra\ntwo\n",
    );
    assert_eq!(server.request_count(), 3);
    server.assert_invariants();
    let first = without_cache_control(server.request(0).json);
    let compaction = without_cache_control(server.request(1).json);
    let msgs = compaction["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[0], first["messages"][0]);
    assert_eq!(msgs[1]["content"][0]["text"], "first");
    assert!(
        msgs[2]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("zebra")
    );
    assert_eq!(compaction["system"], first["system"]);
    assert_eq!(compaction["tools"], first["tools"]);
    // The summary replaced everything; the next prompt joins it.
    let after = server.request(2);
    let next = after.messages();
    assert_eq!(next.len(), 1);
    assert!(
        next[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("SUMMARY of one")
    );
    assert_eq!(next[0]["content"][1]["text"], "two");

    // Resuming the compacted session sends the compacted history.
    let id = session_ids(&p).into_iter().next().unwrap();
    let again = FakeServer::start([anthropic::text_reply("third")]);
    chat(&p, &again, &["--resume", &id], "three\n");
    let msgs = again.request(0).messages().to_vec();
    assert_eq!(msgs.len(), 3);
    assert_eq!(
        without_cache_control(msgs[0].clone()),
        without_cache_control(next[0].clone())
    );
    assert_eq!(msgs[1]["content"][0]["text"], "second");
    assert_eq!(msgs[2]["content"][0]["text"], "three");
}

/// A main agent that starts one background child, whose requests `child`
/// answers, then waits and answers "noted". Returns the run, every main
/// request's body and the project.
fn run_with_a_background_child(
    config: &str,
    child: impl Fn(&super::kit::RecordedRequest) -> super::kit::Reply + Send + Sync + 'static,
) -> (super::harness::Run, Vec<String>, Project) {
    use super::harness::{assistant_turns, is_main_session};
    let mut p = Project::new();
    p.config(config);
    let server = FakeServer::route(move |r| {
        if is_main_session(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_bg",
                    "Agent",
                    json!({"description": "background work", "prompt": "work", "run_in_background": true}),
                ),
                1 => anthropic::text_reply("launched; waiting"),
                _ => anthropic::text_reply("noted"),
            };
        }
        child(r)
    });
    let r = p.run(Some(&server), &["run", "go"]);
    server.assert_invariants();
    let mains = server
        .requests()
        .into_iter()
        .filter(is_main_session)
        .map(|r| r.body_str())
        .collect();
    (r, mains, p)
}

fn assert_ended_by(config: &str, setting: &str) {
    // The child's model says nothing for far longer than any limit.
    let (r, mains, p) = run_with_a_background_child(config, |_| {
        anthropic::text_reply("too late").delayed(Duration::from_secs(20))
    });
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "noted");
    assert_eq!(mains.len(), 3, "the failure wakes the main agent once");
    let last = &mains[2];
    assert_eq!(last.matches("<task-notification>").count(), 1, "{last}");
    assert_eq!(last.matches(setting).count(), 1, "{last}");
    assert!(last.contains("failed"), "{last}");
    let metas = p.meta_files();
    assert_eq!(metas.len(), 1);
    assert_eq!(metas[0]["status"], "failed");
    assert!(
        metas[0]["error"].as_str().unwrap_or("").contains(setting),
        "{:?}",
        metas[0]
    );
}

#[test]
fn a_stalled_background_child_fails_with_one_notification_naming_the_limit() {
    assert_ended_by(
        "[agents]\nstall_timeout_ms = 300\n",
        "agents.stall_timeout_ms",
    );
}

#[test]
fn a_child_past_its_wall_clock_limit_fails_naming_it() {
    assert_ended_by(
        "[agents]\nstall_timeout_ms = 0\ntask_timeout_ms = 300\n",
        "agents.task_timeout_ms",
    );
}

#[test]
fn run_stops_waiting_for_children_at_its_ceiling() {
    assert_ended_by(
        "[agents]\nstall_timeout_ms = 0\nrun_wait_ceiling_ms = 300\n",
        "agents.run_wait_ceiling_ms",
    );
}

/// A project with `config` whose main agent (its first answer counting
/// `main_tokens`) starts one foreground child that reads a file on every
/// turn, 400 tokens a turn, without end; then the main agent answers.
fn costly_child(config: &str, main_tokens: u64) -> (Project, FakeServer) {
    use super::harness::{assistant_turns, is_main_session};
    let mut p = Project::new();
    p.config(config);
    let file = p.write("notes.txt", "alpha\n").display().to_string();
    let server = FakeServer::route(move |r| {
        if is_main_session(r) {
            return match assistant_turns(r) {
                0 => anthropic::message()
                    .tool_use(
                        "toolu_fg",
                        "Agent",
                        json!({"description": "costly survey", "prompt": "survey"}),
                    )
                    .usage(main_tokens.saturating_sub(10), 10)
                    .reply(),
                _ => anthropic::text_reply("noted"),
            };
        }
        anthropic::message()
            .tool_use("toolu_r", "Read", json!({"file_path": file}))
            .usage(390, 10)
            .reply()
    });
    (p, server)
}

#[test]
fn a_child_over_its_token_budget_fails_naming_it() {
    use super::harness::is_main_session;
    let (p, server) = costly_child("[agents]\ntask_token_budget = 500\n", 0);
    let r = p.run(Some(&server), &["run", "go"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Two child requests (400, then 800 tokens), none after the budget.
    let children = server
        .requests()
        .into_iter()
        .filter(|r| !is_main_session(r))
        .count();
    assert_eq!(children, 2);
    let metas = p.meta_files();
    assert_eq!(metas[0]["status"], "failed");
    assert!(
        metas[0]["error"]
            .as_str()
            .unwrap()
            .contains("agents.task_token_budget = 500"),
        "{:?}",
        metas[0]
    );
    server.assert_invariants();
}

#[test]
fn pre_compact_hooks_run_with_the_trigger_before_the_summary_request() {
    let mut p = small_window();
    p.config("[[hooks.PreCompact]]\nmatcher = \"auto\"\ncommand = \"cat > pre-compact.json\"\n\n[[hooks.PreCompact]]\nmatcher = \"manual\"\ncommand = \"touch manual-ran\"\n");
    let file = p.write("notes.txt", "alpha\n");
    let server = FakeServer::start([
        read_call(file.to_str().unwrap(), 600),
        anthropic::message().text("SUMMARY").usage(50, 20).reply(),
        anthropic::message().text("all done").usage(120, 5).reply(),
    ]);
    let r = p.run(Some(&server), &["run", "look"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let input: Value = serde_json::from_str(&p.read("pre-compact.json")).unwrap();
    assert_eq!(input["hook_event_name"], "PreCompact");
    assert_eq!(input["trigger"], "auto");
    assert_eq!(input["agent_id"], "main");
    assert!(
        !p.path().join("manual-ran").exists(),
        "the matcher selects by trigger"
    );
}

#[test]
fn a_child_killed_with_its_process_is_killed_on_resume_and_send_message_resumes_it() {
    use super::harness::{assistant_turns, is_main_session};
    let p = Project::new();
    let first = FakeServer::route(|r| {
        if is_main_session(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_bg",
                    "Agent",
                    json!({"description": "long survey", "prompt": "survey the code", "run_in_background": true}),
                ),
                _ => anthropic::text_reply("waiting for the survey"),
            };
        }
        anthropic::text_reply("too late").delayed(Duration::from_secs(30))
    });
    let mut child = p
        .command(Some(&first))
        .args(["run", "go"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The main agent has answered and waits; the child's request is at
    // the model, which is silent.
    let started = Instant::now();
    while !(p
        .transcript_lines()
        .iter()
        .any(|l| l["message"]["content"][0]["text"] == "waiting for the survey")
        && first.requests().iter().any(|r| !is_main_session(r))
        // The child's files are made beside its run, not before it (a
        // turn that starts many children does not wait for them): the
        // kill is for a child whose meta file says it runs.
        && p.written_files().iter().any(|(path, text)| {
            path.to_string_lossy().ends_with(".meta.json")
                && serde_json::from_str::<serde_json::Value>(text).is_ok()
        }))
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the main agent never answered, or the child's meta file never appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let metas = p.meta_files();
    assert_eq!(metas[0]["status"], "running", "kill -9 left it running");
    let agent_id = metas[0]["agent_id"].as_str().unwrap().to_string();

    let to = agent_id.clone();
    let second = FakeServer::route(move |r| {
        if is_main_session(r) {
            return match assistant_turns(r) {
                2 => anthropic::tool_use_reply(
                    "toolu_send",
                    "SendMessage",
                    json!({"to": to, "message": "please finish the survey"}),
                ),
                3 => anthropic::text_reply("asked it"),
                _ => anthropic::text_reply("all good"),
            };
        }
        anthropic::text_reply("survey finished")
    });
    let r = p.run(Some(&second), &["run", "--continue", "carry on"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "all good");
    second.assert_invariants();
    let child_requests: Vec<_> = second
        .requests()
        .into_iter()
        .filter(|r| !is_main_session(r))
        .collect();
    assert_eq!(child_requests.len(), 1);
    // Rendered again for the same configuration: the bytes it sent before.
    let before = first
        .requests()
        .into_iter()
        .find(|r| !is_main_session(r))
        .expect("the child's first request");
    for key in ["model", "system", "tools", "max_tokens"] {
        assert_eq!(
            child_requests[0].json[key].to_string(),
            before.json[key].to_string(),
            "{key}"
        );
    }
    let msgs = child_requests[0].messages();
    assert_eq!(msgs.len(), 1, "prompt and message joined: {msgs:?}");
    let texts: Vec<&str> = msgs[0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect();
    assert!(
        texts.first().is_some_and(|t| t.contains("survey the code")),
        "{texts:?}"
    );
    assert_eq!(texts.last(), Some(&"please finish the survey"));
    let send_result = second
        .requests()
        .into_iter()
        .filter(is_main_session)
        .find(|r| assistant_turns(r) == 3)
        .unwrap()
        .body_str();
    assert!(
        send_result.contains("it was resumed in the background"),
        "{send_result}"
    );
    let metas = p.meta_files();
    assert_eq!(metas[0]["status"], "completed");
}

#[test]
fn a_session_over_its_token_budget_stops_naming_the_limit() {
    use super::harness::is_main_session;
    let (p, server) = costly_child("[agents]\nsession_token_budget = 1000\n", 100);
    let r = p.run(Some(&server), &["run", "go"]);
    // 100 (main) + 400 + 400 + 400 (child) passes 1000: the child stops
    // before its fourth request, the main agent before its second.
    assert_eq!(r.code, 1, "{}", r.stderr);
    let (mains, children): (Vec<_>, Vec<_>) =
        server.requests().into_iter().partition(is_main_session);
    assert_eq!((mains.len(), children.len()), (1, 3));
    assert!(
        r.stderr
            .contains("Stopped by the session token budget (agents.session_token_budget = 1000)"),
        "{}",
        r.stderr
    );
    let metas = p.meta_files();
    assert_eq!(metas[0]["status"], "failed");
    let error = metas[0]["error"].as_str().unwrap();
    assert_eq!(
        error.matches("agents.session_token_budget = 1000").count(),
        1,
        "{error}"
    );
    // Every tool call has its result; the transcript says how it ended.
    server.assert_invariants();
    let lines = p.transcript_lines();
    let end: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "end" && l["agent_id"] == "main")
        .collect();
    assert_eq!(end.len(), 1);
    assert_eq!(end[0]["status"], "failed");
}

/// The compaction request: the summary instruction is its last block.
fn is_compaction(r: &super::kit::RecordedRequest) -> bool {
    r.contains("Write the summary now")
}

#[test]
fn a_sub_agent_compacts_on_its_own_at_its_frontmatter_window() {
    use super::harness::{assistant_turns, is_main_session};
    let p = Project::new();
    p.write(
        ".claude/agents/squeezed.md",
        "---\nname: squeezed\ndescription: Reads a lot\ntools: Read\nautoCompactWindow: 1000\ncompactThreshold: 0.5\n---\nYou read files.\n",
    );
    let file = p.write("notes.txt", "alpha\n").display().to_string();
    let server = FakeServer::route(move |r| {
        if is_main_session(r) {
            // The main agent's window is the model's (200k): never compacts.
            return match assistant_turns(r) {
                0 => anthropic::message()
                    .tool_use(
                        "toolu_a",
                        "Agent",
                        json!({"description": "read", "prompt": "read the notes", "subagent_type": "squeezed"}),
                    )
                    .usage(600, 10)
                    .reply(),
                _ => anthropic::message().text("all done").usage(700, 5).reply(),
            };
        }
        if is_compaction(r) {
            return anthropic::message()
                .text("SUMMARY of the reading")
                .usage(50, 20)
                .reply();
        }
        match assistant_turns(r) {
            0 => anthropic::message()
                .tool_use("toolu_r", "Read", json!({"file_path": file}))
                .usage(600, 10)
                .reply(),
            _ => anthropic::message()
                .text("read it all")
                .usage(100, 5)
                .reply(),
        }
    });
    let r = p.run(Some(&server), &["run", "go"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "all done");
    server.assert_invariants();
    let (mains, children): (Vec<_>, Vec<_>) =
        server.requests().into_iter().partition(is_main_session);
    assert_eq!(mains.len(), 2);
    assert!(!mains.iter().any(is_compaction), "the main agent compacted");
    assert_eq!(children.len(), 3);
    assert!(is_compaction(&children[1]), "the child's second request");
    // The child's compaction request is its own next request plus the
    // instruction: its system prompt and tools, its messages.
    let first = without_cache_control(children[0].json.clone());
    let compaction = without_cache_control(children[1].json.clone());
    for key in ["system", "tools", "model"] {
        assert_eq!(compaction[key], first[key], "{key}");
    }
    assert_eq!(compaction["messages"][0], first["messages"][0]);
    let after = children[2].messages();
    assert_eq!(after.len(), 3, "summary, then the last exchange");
    assert!(
        after[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("SUMMARY of the reading")
    );
    let lines = compact_lines(&p);
    assert_eq!(lines.len(), 1, "compacted once");
    assert_ne!(lines[0]["agent_id"], "main");
    assert_eq!(lines[0]["trigger"], "threshold");
}

#[test]
fn forks_of_a_compacted_parent_share_their_prefix_bytewise() {
    use super::harness::{assistant_turns, is_fork_child};
    let mut p = small_window();
    p.config("[features]\nFORK_SUBAGENT = true\n[flags.FORK_SUBAGENT]\ndescription = \"fork\"\ngates = [\"coordinator\"]\n");
    let file = p.write("notes.txt", "alpha\n").display().to_string();
    let server = FakeServer::route(move |r| {
        if is_fork_child(r) {
            return anthropic::message().text("fork done").usage(100, 5).reply();
        }
        if is_compaction(r) {
            return anthropic::message().text("SUMMARY").usage(50, 20).reply();
        }
        match assistant_turns(r) {
            0 => read_call(&file, 600),
            1 => anthropic::message()
                .tool_use(
                    "toolu_a",
                    "Agent",
                    json!({"description": "one", "prompt": "check module A", "fork": true}),
                )
                .tool_use(
                    "toolu_b",
                    "Agent",
                    json!({"description": "two", "prompt": "check module B", "fork": true}),
                )
                .usage(100, 10)
                .reply(),
            _ => anthropic::message().text("all done").usage(120, 5).reply(),
        }
    });
    let r = p.run(Some(&server), &["run", "look at the notes"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    server.assert_invariants();
    assert_eq!(compact_lines(&p).len(), 1, "the parent compacted once");
    let requests = server.requests();
    let (mut forks, mains): (Vec<_>, Vec<_>) = requests.into_iter().partition(is_fork_child);
    assert_eq!(forks.len(), 2);
    // The parent's request that made the calls: the first after compacting.
    let parent = mains
        .iter()
        .find(|r| {
            !is_compaction(r)
                && r.messages()[0]["content"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("SUMMARY"))
        })
        .expect("a request after the compaction");
    super::harness::assert_siblings_share_up_to_directive(
        &mut forks,
        "Your directive: check module B",
    );
    // The shared prefix is the compacted parent's request: its system,
    // tools and messages, the summary first.
    for key in ["model", "system", "tools", "max_tokens"] {
        assert_eq!(
            parent.json[key].to_string(),
            forks[0].json[key].to_string(),
            "{key}"
        );
    }
    let pm: Vec<Value> = parent
        .messages()
        .iter()
        .cloned()
        .map(without_cache_control)
        .collect();
    let fm: Vec<Value> = forks[0]
        .messages()
        .iter()
        .cloned()
        .map(without_cache_control)
        .collect();
    assert_eq!(fm[..pm.len()], pm[..]);
}

#[test]
fn a_resumed_fork_child_sends_the_request_parts_it_inherited() {
    use super::harness::{assistant_turns, is_fork_child, is_main_session};
    let mut p = Project::new();
    p.config("[features]\nFORK_SUBAGENT = true\n[flags.FORK_SUBAGENT]\ndescription = \"fork\"\ngates = [\"coordinator\"]\n");
    let first = FakeServer::route(|r| {
        if is_fork_child(r) {
            return anthropic::text_reply("module A is fine");
        }
        match assistant_turns(r) {
            0 => anthropic::tool_use_reply(
                "toolu_a",
                "Agent",
                json!({"description": "one", "prompt": "check module A", "fork": true}),
            ),
            _ => anthropic::text_reply("all done"),
        }
    });
    let r = p.run(Some(&first), &["run", "refactor"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let original = first
        .requests()
        .into_iter()
        .find(is_fork_child)
        .expect("the fork's request");
    let fork_id = p.meta_files()[0]["agent_id"].as_str().unwrap().to_string();

    let to = fork_id.clone();
    let second = FakeServer::route(move |r| {
        if is_fork_child(r) {
            return anthropic::text_reply("module A is still fine");
        }
        match assistant_turns(r) {
            2 => anthropic::tool_use_reply(
                "toolu_send",
                "SendMessage",
                json!({"to": to, "message": "look at module A again"}),
            ),
            3 => anthropic::text_reply("asked it"),
            _ => anthropic::text_reply("all good"),
        }
    });
    let r = p.run(Some(&second), &["run", "--continue", "check again"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    second.assert_invariants();
    let resumed: Vec<_> = second
        .requests()
        .into_iter()
        .filter(|r| !is_main_session(r))
        .collect();
    assert_eq!(resumed.len(), 1);
    let resumed = &resumed[0];
    // The bytes it inherited from its parent, not a fresh rendering.
    for key in ["model", "system", "tools", "max_tokens"] {
        assert_eq!(
            resumed.json[key].to_string(),
            original.json[key].to_string(),
            "{key}"
        );
    }
    let before: Vec<Value> = original
        .messages()
        .iter()
        .cloned()
        .map(without_cache_control)
        .collect();
    let after: Vec<Value> = resumed
        .messages()
        .iter()
        .cloned()
        .map(without_cache_control)
        .collect();
    assert_eq!(after[..before.len()], before[..], "the history it had");
    assert_eq!(after.len(), before.len() + 2);
    assert_eq!(
        after[before.len()]["content"][0]["text"],
        "module A is fine"
    );
    assert_eq!(
        after[before.len() + 1]["content"][0]["text"],
        "look at module A again"
    );
}

#[test]
fn one_long_tool_call_is_not_a_stall() {
    use super::harness::assistant_turns;
    let config = "[agents]\nstall_timeout_ms = 300\n[permissions]\nallow = [\"Bash\"]\n";
    let (r, mains, p) = run_with_a_background_child(config, |r| match assistant_turns(r) {
        // Silent for five times the stall limit, but running.
        0 => anthropic::tool_use_reply(
            "toolu_sleep",
            "Bash",
            json!({"command": "sleep 1.5; echo built"}),
        ),
        _ => anthropic::text_reply("build finished"),
    });
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "noted");
    let metas = p.meta_files();
    assert_eq!(metas[0]["status"], "completed", "{:?}", metas[0]);
    let last = mains.last().unwrap();
    assert_eq!(last.matches("<task-notification>").count(), 1, "{last}");
    assert!(last.contains("build finished"), "{last}");
    assert!(!last.contains("stall_timeout_ms"), "{last}");
}

/// A transcript cadre wrote over two processes (a tool call in each, the
/// second one resumed): its session id and its bytes.
fn two_process_transcript(p: &Project) -> (String, Vec<u8>) {
    let file = p.write("notes.txt", "alpha\n");
    let file = file.to_str().unwrap();
    let first = FakeServer::start(first_turn_replies(file));
    assert_eq!(p.run(Some(&first), &["run", "one"]).code, 0);
    let second = FakeServer::start([
        anthropic::message()
            .tool_use("toolu_2", "Read", json!({"file_path": file}))
            .tool_use("toolu_3", "Read", json!({"file_path": file}))
            .reply(),
        anthropic::text_reply("read twice"),
    ]);
    assert_eq!(p.run(Some(&second), &["run", "--continue", "two"]).code, 0);
    let id = session_ids(p).into_iter().next().unwrap();
    let bytes = std::fs::read(p.transcript_of(&id)).unwrap();
    (id, bytes)
}

/// Resumes session `id` of `p` with its transcript cut to `cut` bytes (a
/// crash in the middle of a write) and checks the request the resumed
/// session would send: valid (each tool call answered once, roles
/// alternating) and ending with the new prompt.
fn resume_cut(p: &Project, id: &str, bytes: &[u8], cut: usize) -> Result<(), String> {
    let path = p.transcript_of(id);
    std::fs::write(&path, &bytes[..cut]).unwrap();
    let r = p.run(None, &["render", "--resume", id, "go on"]);
    if r.code != 0 {
        return Err(format!("cut {cut}: exit {}: {}", r.code, r.stderr));
    }
    let body: Value = serde_json::from_str(&r.stdout).map_err(|e| format!("cut {cut}: {e}"))?;
    let problems = super::kit::invariants::check_anthropic(&body);
    if !problems.is_empty() {
        return Err(format!("cut {cut}: {problems:?}"));
    }
    // The prompt is the last text of the last message, but for an
    // agent-listing reminder, which may follow it (an empty history is told
    // the whole listing).
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .and_then(|c| {
            c.iter()
                .rev()
                .filter_map(|b| b["text"].as_str())
                .find(|t| !t.trim_start().starts_with("<system-reminder>"))
        });
    if last != Some("go on") {
        return Err(format!(
            "cut {cut}: the request does not end with the prompt"
        ));
    }
    Ok(())
}

/// A crash can cut the transcript anywhere: at every line boundary (and
/// one byte either side) and at random byte offsets, the session still
/// resumes and its next request is valid. Cuts are through the binary's
/// resume path (`render --resume`), not only the parser.
#[test]
fn every_cut_of_a_transcript_still_resumes_with_a_valid_request() {
    use proptest::prelude::*;
    let p = Project::new();
    let (id, bytes) = two_process_transcript(&p);
    let mut cuts: BTreeSet<usize> = BTreeSet::from([0, bytes.len()]);
    for (i, _) in bytes.iter().enumerate().filter(|(_, b)| **b == b'\n') {
        cuts.extend([i, i + 1, (i + 2).min(bytes.len())]);
    }
    for &cut in &cuts {
        resume_cut(&p, &id, &bytes, cut).unwrap();
    }
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(24));
    runner
        .run(&(0..=bytes.len()), |cut| {
            resume_cut(&p, &id, &bytes, cut).map_err(TestCaseError::fail)
        })
        .unwrap();
}

/// A line damaged in the middle of the file (not a crash: an edit) stops
/// the resume with its position, and nothing is written.
#[test]
fn a_damaged_transcript_line_stops_the_resume_with_its_position() {
    let p = Project::new();
    let (id, bytes) = two_process_transcript(&p);
    let text = String::from_utf8(bytes).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":7}}";
    let damaged = lines.join("\n") + "\n";
    let path = p.transcript_of(&id);
    std::fs::write(&path, &damaged).unwrap();
    let server = FakeServer::start([anthropic::text_reply("never")]);
    let r = p.run(Some(&server), &["run", "--resume", &id, "go on"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains(&format!("{id}.jsonl:3:")), "{}", r.stderr);
    assert!(r.stderr.contains("bad message"), "{}", r.stderr);
    assert_eq!(server.request_count(), 0);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), damaged);
}

/// Rewrites every line of the JSON-lines `file` with `edit`: what a
/// repository that ships a session could have done.
fn edit_json_lines(file: &std::path::Path, edit: impl Fn(&mut Value)) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        edit(&mut v);
        out.push_str(&v.to_string());
        out.push('\n');
    }
    std::fs::write(file, out).unwrap();
}

/// A project agent whose definition asks for bypassPermissions.
const BYPASS_AGENT: &str = "---\nname: yolo\ndescription: Does anything\npermissionMode: bypassPermissions\n---\nYou do it.\n";

/// A session's header naming a project agent in bypassPermissions does not
/// make `--continue` run in that mode: the resumed session is planned from
/// the user's settings now, and Write is refused as in any
/// non-interactive default-mode run.
#[test]
fn a_header_naming_a_bypass_agent_does_not_widen_a_continued_session() {
    use super::harness::{assistant_turns, last_tool_results, result_text};
    let p = Project::new();
    p.write(".claude/agents/yolo.md", BYPASS_AGENT);
    let first = FakeServer::start([anthropic::text_reply("hello")]);
    p.run(Some(&first), &["run", "hi"]).ok();
    let id = session_ids(&p).into_iter().next().unwrap();
    let main = p.transcript_of(&id);
    edit_json_lines(&main, |line| {
        if line["type"] == "session" {
            line["agent"] = json!("yolo");
        }
    });
    let second = FakeServer::route(|r| match assistant_turns(r) {
        1 => anthropic::tool_use_reply(
            "toolu_w",
            "Write",
            json!({"file_path": "owned.txt", "content": "x"}),
        ),
        _ => anthropic::text_reply("done"),
    });
    let r = p.run(Some(&second), &["run", "--continue", "go on"]);
    r.ok();
    second.assert_invariants();
    assert!(
        !p.path().join("owned.txt").exists(),
        "the Write ran: the header's agent widened the mode"
    );
    let last = second.requests().pop().unwrap();
    let results = last_tool_results(&last.json);
    assert_eq!(results[0]["is_error"], true, "{results:?}");
    assert!(
        result_text(&results[0]).contains("Write"),
        "{:?}",
        result_text(&results[0])
    );
}

/// A sub-agent's meta file edited to bypassPermissions is not obeyed when
/// SendMessage resumes it: it is planned again from the definition and the
/// main session's mode now, and its Write is refused.
#[test]
fn a_meta_file_in_claude_codes_sidecar_shape_still_resumes_its_sub_agent() {
    use super::harness::{assistant_turns, is_main_session};
    let p = Project::new();
    let first = one_helper_child_run(&p);
    let tools_of = |r: &super::kit::RecordedRequest| -> Vec<String> {
        r.json["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    let first_child = first
        .requests()
        .into_iter()
        .find(|r| !is_main_session(r))
        .unwrap();
    let metas: Vec<std::path::PathBuf> = p
        .written_files()
        .into_iter()
        .map(|(path, _)| path)
        .filter(|path| path.to_string_lossy().ends_with(".meta.json"))
        .collect();
    assert_eq!(metas.len(), 1, "{metas:?}");
    let agent_id = p.meta_files()[0]["agent_id"].as_str().unwrap().to_string();
    // Only what Claude Code writes: the type and the call, the id in the
    // file's name.
    std::fs::write(
        &metas[0],
        r#"{"agentType":"general-purpose","toolUseId":"toolu_a"}"#,
    )
    .unwrap();
    let second = FakeServer::route(move |r| {
        if is_main_session(r) {
            return match assistant_turns(r) {
                2 => anthropic::tool_use_reply(
                    "toolu_send",
                    "SendMessage",
                    json!({"to": agent_id, "message": "look again"}),
                ),
                _ => anthropic::text_reply("all good"),
            };
        }
        anthropic::text_reply("looked again")
    });
    let r = p.run(Some(&second), &["run", "--continue", "carry on"]);
    r.ok();
    second.assert_invariants();
    let child: Vec<_> = second
        .requests()
        .into_iter()
        .filter(|r| !is_main_session(r))
        .collect();
    assert_eq!(child.len(), 1, "the child was resumed and answered");
    assert_eq!(
        tools_of(&child[0]),
        tools_of(&first_child),
        "planned again as it was first planned"
    );
    assert!(
        super::harness::user_texts(&child[0]).contains("look again"),
        "{}",
        child[0].body_str()
    );
}

#[test]
fn a_meta_file_edited_to_bypass_does_not_widen_a_resumed_sub_agent() {
    use super::harness::{assistant_turns, is_main_session};
    let p = Project::new();
    one_helper_child_run(&p);
    let metas: Vec<std::path::PathBuf> = p
        .written_files()
        .into_iter()
        .map(|(path, _)| path)
        .filter(|path| path.to_string_lossy().ends_with(".meta.json"))
        .collect();
    assert_eq!(metas.len(), 1, "{metas:?}");
    assert_eq!(p.meta_files()[0]["permission_mode"], "default");
    let mut meta: Value =
        serde_json::from_str(&std::fs::read_to_string(&metas[0]).unwrap()).unwrap();
    meta["permission_mode"] = json!("bypassPermissions");
    std::fs::write(&metas[0], meta.to_string()).unwrap();
    let agent_id = p.meta_files()[0]["agent_id"].as_str().unwrap().to_string();
    let second = FakeServer::route(move |r| {
        if is_main_session(r) {
            return match assistant_turns(r) {
                2 => anthropic::tool_use_reply(
                    "toolu_send",
                    "SendMessage",
                    json!({"to": agent_id, "message": "now write owned.txt"}),
                ),
                _ => anthropic::text_reply("all good"),
            };
        }
        if r.body_str().contains("toolu_w") {
            return anthropic::text_reply("tried");
        }
        anthropic::tool_use_reply(
            "toolu_w",
            "Write",
            json!({"file_path": "owned.txt", "content": "x"}),
        )
    });
    let r = p.run(Some(&second), &["run", "--continue", "carry on"]);
    r.ok();
    second.assert_invariants();
    let child: Vec<_> = second
        .requests()
        .into_iter()
        .filter(|r| !is_main_session(r))
        .collect();
    assert_eq!(child.len(), 2, "the child was resumed and answered");
    assert!(
        !p.path().join("owned.txt").exists(),
        "the Write ran: the meta file widened the mode"
    );
    let results = super::harness::last_tool_results(&child[1].json);
    assert_eq!(results[0]["is_error"], true, "{results:?}");
}

/// A first run of `p` whose main agent starts one general-purpose child
/// ("helper"), which answers "looked"; the server, for its requests.
fn one_helper_child_run(p: &Project) -> FakeServer {
    use super::harness::{assistant_turns, is_main_session};
    let first = FakeServer::route(|r| {
        if is_main_session(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_a",
                    "Agent",
                    json!({"description": "helper", "prompt": "look around"}),
                ),
                _ => anthropic::text_reply("ok"),
            };
        }
        anthropic::text_reply("looked")
    });
    p.run(Some(&first), &["run", "go"]).ok();
    first
}
