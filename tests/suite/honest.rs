//! Honest ends (issue 38): a run that answered nothing — the turn limit,
//! the repeated-call guard, an empty final message — exits 1 in `run` and
//! `-p`, says why on stderr and in the JSON result; the guard steers once,
//! then ends the run with the last sub-agent report labelled incomplete; a
//! sub-agent that found nothing is reported as such; and without a
//! terminal each sub-agent gets a start and a done line on stderr;
//! `scripts/test --help` installs nothing, and `scripts/run-main-job`
//! says when it ends that the local model server is still running.

use serde_json::json;

use super::harness::{
    Project, assistant_turns, child_requests_of, is_main_session, last_tool_results, main_requests,
    result_text,
};
use super::kit::{FakeServer, anthropic};

/// The main agent always asks Explore the same thing; Explore answers
/// `child` (its report).
fn same_agent_call_server(child: &'static str) -> FakeServer {
    FakeServer::route(move |r| {
        if is_main_session(r) {
            anthropic::tool_use_reply(
                &format!("toolu_{}", assistant_turns(r)),
                "Agent",
                json!({"description": "find schema", "prompt": "find the schema",
                       "subagent_type": "Explore"}),
            )
        } else {
            anthropic::text_reply(child)
        }
    })
}

fn guarded() -> Project {
    let mut p = Project::new();
    p.config("[agents]\nrepeated_call_limit = 1\n");
    p
}

#[test]
fn the_turn_limit_exits_1_and_says_why_in_run_and_print_mode() {
    let p = Project::new();
    for args in [
        &["run", "--max-turns", "2", "loop"][..],
        &["-p", "loop", "--max-turns", "2"][..],
    ] {
        let server = FakeServer::route(|_| {
            anthropic::tool_use_reply("toolu_x", "Glob", json!({"pattern": "*.none"}))
        });
        let run = p.run(Some(&server), args);
        assert_eq!(run.code, 1, "{args:?}: {run:?}");
        assert!(
            run.stderr
                .contains("error: Reached maximum number of turns (2)"),
            "{args:?}: {}",
            run.stderr
        );
        assert_eq!(run.stdout.trim(), "", "{args:?}");
    }
}

#[test]
fn an_empty_final_message_is_an_error_result() {
    let p = Project::new();
    for args in [
        &["run", "--output-format", "json", "say something"][..],
        &["-p", "say something", "--output-format", "json"][..],
    ] {
        let server = FakeServer::start([anthropic::message().text("").reply()]);
        let run = p.run(Some(&server), args);
        assert_eq!(run.code, 1, "{args:?}: {run:?}");
        let v = run.json();
        assert_eq!(v["is_error"], true, "{v}");
        assert_eq!(v["subtype"], "error_during_execution", "{v}");
        let why = v["errors"][0].as_str().unwrap_or_default();
        assert!(why.contains("the model ended without an answer"), "{v}");
        assert!(
            run.stderr.contains(&format!("error: {why}")),
            "{}",
            run.stderr
        );
    }
    // Text output: nothing on stdout, the reason on stderr, exit 1.
    let server = FakeServer::start([anthropic::message().text("").reply()]);
    let run = p.run(Some(&server), &["-p", "say something"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("without an answer"), "{}", run.stderr);
}

#[test]
fn the_guard_steers_once_then_ends_with_the_last_report_labelled_incomplete() {
    let p = guarded();
    let server = same_agent_call_server("It might be src/agent_tool/schema.rs.");
    let run = p.run(
        Some(&server),
        &[
            "run",
            "--max-turns",
            "8",
            "--output-format",
            "json",
            "where?",
        ],
    );
    assert_eq!(run.code, 1, "{run:?}");
    // The first call ran, the second was held back with the steer, the
    // third ended the run: three main requests, one child, not eight turns.
    let mains = main_requests(&server);
    assert_eq!(mains.len(), 3, "{run:?}");
    assert_eq!(child_requests_of(&server, true).len(), 1);
    let steer = result_text(&last_tool_results(&mains[2].json)[0]);
    assert!(
        steer.contains("Not run") && steer.contains("Give your final answer now"),
        "{steer}"
    );
    let v = run.json();
    assert_eq!(v["subtype"], "error_during_execution", "{v}");
    assert_eq!(v["is_error"], true);
    let result = v["result"].as_str().unwrap_or_default();
    assert!(
        result.starts_with("[Incomplete answer")
            && result.contains("The last sub-agent report")
            && result.contains("It might be src/agent_tool/schema.rs."),
        "{result}"
    );
    assert!(
        v["errors"][0]
            .as_str()
            .is_some_and(|e| e.contains("repeated-call guard")),
        "{v}"
    );
    assert!(run.stderr.contains("repeated-call guard"), "{}", run.stderr);

    // Text output: the labelled partial answer on stdout, still exit 1.
    let server = same_agent_call_server("It might be src/agent_tool/schema.rs.");
    let run = p.run(Some(&server), &["-p", "where?", "--max-turns", "8"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout.starts_with("[Incomplete answer") && run.stdout.contains("schema.rs"),
        "{run:?}"
    );
}

#[test]
fn a_sub_agent_that_found_nothing_is_reported_as_such() {
    let p = guarded();
    let server = same_agent_call_server("");
    let run = p.run(Some(&server), &["run", "--max-turns", "8", "where?"]);
    let mains = main_requests(&server);
    let told = result_text(&last_tool_results(&mains[1].json)[0]);
    assert!(
        told.contains("found nothing") && told.contains("Do not give it the same task again"),
        "{told}"
    );
    // The guard ends it with no report to give: nothing on stdout, exit 1.
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.stdout.trim(), "", "{run:?}");
}

#[test]
fn a_sub_agent_the_guard_ends_gives_its_parent_its_last_words_labelled_incomplete() {
    let p = guarded();
    let server = FakeServer::route(|r| {
        if is_main_session(r) {
            return if assistant_turns(r) == 0 {
                anthropic::tool_use_reply(
                    "toolu_main",
                    "Agent",
                    json!({"description": "find schema", "prompt": "find the schema",
                           "subagent_type": "Explore"}),
                )
            } else {
                anthropic::text_reply("main done")
            };
        }
        // The child says something, then makes the same Glob every turn.
        anthropic::message()
            .text("Maybe in src/agent_tool.")
            .tool_use(
                &format!("toolu_c{}", assistant_turns(r)),
                "Glob",
                json!({"pattern": "src/**/schema*"}),
            )
            .reply()
    });
    p.run(Some(&server), &["run", "--max-turns", "8", "where?"])
        .ok();
    // The child ran one Glob, was steered once, and ended on the next
    // repeat: three requests, not its whole turn budget.
    assert_eq!(child_requests_of(&server, true).len(), 3);
    let mains = main_requests(&server);
    let told = result_text(&last_tool_results(&mains[1].json)[0]);
    assert!(
        told.starts_with("[Incomplete answer")
            && told.contains("The agent's last words")
            && told.contains("Maybe in src/agent_tool."),
        "{told}"
    );
}

#[test]
fn without_a_terminal_each_phase_and_sub_agent_gets_a_line() {
    let p = Project::new();
    let server = || {
        FakeServer::route(|r| {
            if !is_main_session(r) {
                anthropic::text_reply("auth is in src/auth.rs")
            } else if assistant_turns(r) == 0 {
                anthropic::tool_use_reply(
                    "toolu_1",
                    "Agent",
                    json!({"description": "find auth", "prompt": "find auth",
                           "subagent_type": "Explore"}),
                )
            } else {
                anthropic::text_reply("main done")
            }
        })
    };
    // stderr is a pipe here, not a terminal.
    for args in [&["run", "go"][..], &["-p", "go"][..]] {
        let run = p.run(Some(&server()), args);
        run.ok();
        let lines: Vec<&str> = run.stderr.lines().map(str::trim).collect();
        let start = lines
            .iter()
            .position(|l| *l == "[Explore] find auth started");
        let done = lines
            .iter()
            .position(|l| l.starts_with("[Explore] find auth done ("));
        assert!(
            start.is_some() && done.is_some() && start < done,
            "{args:?}: {}",
            run.stderr
        );
        // The main agent's phases: each model answer, and its tool call
        // once the call has its result.
        let answers: Vec<usize> = (0..lines.len())
            .filter(|i| lines[*i].starts_with("model answered in "))
            .collect();
        let call = lines
            .iter()
            .position(|l| l.starts_with("• Agent ") && l.ends_with("— ok"));
        assert!(
            answers.len() == 2
                && Some(answers[0]) < start
                && done < call
                && call < Some(answers[1]),
            "{args:?}: {}",
            run.stderr
        );
        assert_eq!(run.stdout.trim(), "main done");
    }
    // --quiet: neither.
    let run = p.run(Some(&server()), &["--quiet", "run", "go"]);
    assert!(!run.ok().stderr.contains("[Explore]"), "{}", run.stderr);
}

#[test]
fn scripts_test_help_explains_itself_and_installs_nothing() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // A PATH without cargo: had it gone on to `cargo test`, it would have
    // failed.
    let out = std::process::Command::new("/bin/bash")
        .arg(root.join("scripts/test"))
        .arg("--help")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.starts_with("Usage: scripts/test")
            && stdout.contains(".ci/node")
            && stdout.contains("installs nothing"),
        "{stdout}"
    );
}

#[test]
fn run_main_job_says_the_local_model_server_is_still_running_when_it_ends() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    // A process of ours stands in for the running model server.
    let mut server = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    std::fs::write(dir.path().join("server.pid"), server.id().to_string()).unwrap();
    // `echo` stands in for cadre: it prints the arguments it got and ends.
    let out = std::process::Command::new("/bin/bash")
        .arg(root.join("scripts/run-main-job"))
        .arg("a question")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("CADRE_LOCAL_MODEL_DIR", dir.path())
        .env("CADRE_LOCAL_MODEL_PORT", "9")
        .env("CADRE_BIN", "/bin/echo")
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("config/local.toml run a question"),
        "{stdout}"
    );
    assert!(
        stderr.contains("the local model server is still running")
            && stderr.contains("scripts/local-model stop"),
        "{stderr}"
    );
}

/// `agents.check_answers`: an answer to a question about a file nobody read,
/// naming a path the project lacks, is sent back once with the file read
/// for it; what is still missing in the final answer is said after it.
#[test]
fn a_checked_answer_is_sent_back_once_with_the_file_and_a_missing_path_is_said() {
    let mut p = Project::new();
    p.config("[agents]\ncheck_answers = true\n");
    p.write("config/defaults.toml", "lease_ms = 8000\n");
    let server = FakeServer::start([
        anthropic::text_reply("It is 5000, set in src/lease.rs."),
        anthropic::text_reply("It is 8000 (config/defaults.toml; see also src/gone.rs)."),
    ]);
    let run = p.run(
        Some(&server),
        &["run", "What is lease_ms in config/defaults.toml?"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(server.request_count(), 2);
    let sent_back = server.request(1).last_user_text();
    assert!(
        super::harness::user_texts(&server.request(1)).contains("lease_ms = 8000")
            && sent_back
                .contains("`config/defaults.toml` is named in the request: its text is above")
            && sent_back.contains("`src/lease.rs`, named in your answer, does not exist"),
        "{sent_back}"
    );
    assert!(
        run.stdout.contains("It is 8000")
            && run
                .stdout
                .contains("not found in the project: `src/gone.rs`"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("config/defaults.toml`"),
        "{}",
        run.stdout
    );

    // A file the rules deny is not read for the agent.
    let mut p = Project::new();
    p.config("[agents]\ncheck_answers = true\n[permissions]\ndeny = [\"Read(config/**)\"]\n");
    p.write("config/defaults.toml", "lease_ms = 8000\n");
    let server = FakeServer::start([
        anthropic::text_reply("It is 5000."),
        anthropic::text_reply("I could not find it."),
    ]);
    let run = p.run(
        Some(&server),
        &["run", "What is lease_ms in config/defaults.toml?"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let sent_back = server.request(1).last_user_text();
    assert!(
        !super::harness::user_texts(&server.request(1)).contains("lease_ms = 8000")
            && sent_back.contains(
                "`config/defaults.toml` is named in the request, and it could not be read"
            ),
        "{sent_back}"
    );

    // A link that leads out of the project is not followed.
    let mut p = Project::new();
    p.config("[agents]\ncheck_answers = true\n");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.toml"), "token = 42\n").unwrap();
    std::fs::create_dir_all(p.path().join("config")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.toml"),
        p.path().join("config/linked.toml"),
    )
    .unwrap();
    let server = FakeServer::start([
        anthropic::text_reply("It is 5."),
        anthropic::text_reply("I could not find it."),
    ]);
    let run = p.run(Some(&server), &["run", "What is in config/linked.toml?"]);
    assert_eq!(run.code, 0, "{run:?}");
    let sent = super::harness::user_texts(&server.request(1));
    assert!(
        !sent.contains("token = 42")
            && sent
                .contains("`config/linked.toml` is named in the request, and it could not be read"),
        "{sent}"
    );

    // Off (the default): the first answer stands as it is.
    let p = Project::new();
    p.write("config/defaults.toml", "lease_ms = 8000\n");
    let server = FakeServer::start([anthropic::text_reply("It is 5000, set in src/lease.rs.")]);
    let run = p.run(
        Some(&server),
        &["run", "What is lease_ms in config/defaults.toml?"],
    );
    assert_eq!(server.request_count(), 1);
    assert_eq!(run.stdout.trim(), "It is 5000, set in src/lease.rs.");
}

/// A sub-agent's answer is checked too, inside the child: the parent gets
/// the report it gave after reading.
#[test]
fn a_sub_agents_answer_is_checked_before_the_parent_gets_it() {
    let mut p = Project::new();
    p.config("[agents]\ncheck_answers = true\n");
    p.write("scripts/go", "#!/bin/sh\necho go\n");
    let server = FakeServer::route(|r| {
        let turns = assistant_turns(r);
        if is_main_session(r) {
            match turns {
                0 => anthropic::tool_use_reply(
                    "toolu_a",
                    "Agent",
                    json!({"description": "look", "prompt": "What does scripts/go print?",
                           "subagent_type": "Explore"}),
                ),
                _ => anthropic::text_reply("It prints go."),
            }
        } else {
            match turns {
                0 => anthropic::text_reply("It prints hello."),
                _ => anthropic::text_reply("It prints go (scripts/go)."),
            }
        }
    });
    let run = p.run(Some(&server), &["run", "look"]);
    assert_eq!(run.code, 0, "{run:?}");
    let children = child_requests_of(&server, false);
    assert_eq!(children.len(), 2, "{children:?}");
    assert!(
        super::harness::user_texts(&children[1]).contains("echo go"),
        "{}",
        super::harness::user_texts(&children[1])
    );
    assert!(
        children[1]
            .last_user_text()
            .contains("`scripts/go` is named in the request"),
        "{}",
        children[1].last_user_text()
    );
    let last_main = main_requests(&server).pop().unwrap();
    let result = result_text(&last_tool_results(&last_main.json)[0]);
    assert!(result.starts_with("It prints go (scripts/go)."), "{result}");
}

/// `agents.first_search`: before an agent's first request of a prompt, the
/// files the prompt names are read for it, the folders it names listed and
/// the files named like its words found — through the tool pipeline, so a
/// deny rule keeps a file unread; a long file is read in part; a
/// sub-agent's task is not searched for.
#[test]
fn a_first_search_reads_lists_and_finds_what_the_prompt_names_before_the_first_request() {
    const ALL: &str = "[agents]\nfirst_search = [\"find_named_files\", \"read_named_files\", \"list_named_folders\"]\n";
    let team_files = |p: &Project| {
        p.write("config/defaults.toml", "lease_ms = 8000\n");
        p.write("tests/all.rs", "mod suite;\n");
        p.write("tests/suite/x.rs", "\n");
        p.write("src/cli/worker.rs", "// the worker command\n");
        p.write("agents/worker.md", "---\nname: worker\n---\n");
        p.write(
            "agents/Explore.md",
            "---\nname: Explore\nmodel: haiku\n---\n",
        );
    };
    let mut p = Project::new();
    p.config(ALL);
    team_files(&p);
    let server = FakeServer::start([anthropic::text_reply("8000.")]);
    let run = p.run(
        Some(&server),
        &[
            "run",
            "What is lease_ms in config/defaults.toml, what is in tests/, and where is `cadre worker`?",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(server.request_count(), 1);
    let sent = super::harness::user_texts(&server.request(0));
    assert!(
        sent.contains("lease_ms = 8000")
            && sent.contains("- `config/defaults.toml`: its text is above, read for you.")
            && sent.contains("- Files in `tests/`: `tests/all.rs`\n")
            && sent.contains("`src/cli/worker.rs`")
            && sent.contains("`agents/worker.md`")
            // Two files match `worker`: listed, not read.
            && !sent.contains("the worker command"),
        "{sent}"
    );

    // One file named like a word, and nothing else read: it is read.
    let server = FakeServer::start([anthropic::text_reply("haiku")]);
    let run = p.run(
        Some(&server),
        &["run", "Which model does the Explore agent use?"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let sent = super::harness::user_texts(&server.request(0));
    assert!(
        sent.contains("model: haiku") && sent.contains("`agents/Explore.md`: its text is above"),
        "{sent}"
    );

    // A long file is read in part, and the agent told how to read on.
    let long: String = (1..=250).map(|n| format!("line {n}\n")).collect();
    p.write("scripts/long-script", &long);
    let server = FakeServer::start([anthropic::text_reply("line 3")]);
    let run = p.run(
        Some(&server),
        &[
            "run",
            "What does scripts/long-script say on its third line?",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let sent = super::harness::user_texts(&server.request(0));
    assert!(
        sent.contains("line 200\n")
            && !sent.contains("line 201")
            && sent.contains(
                "- `scripts/long-script`: its first lines are above, read for you; 50 more lines follow (Read with offset 201 for them)."
            ),
        "{sent}"
    );

    // A file the rules deny is not read, and the agent is told.
    let mut p = Project::new();
    p.config(&format!(
        "{ALL}[permissions]\ndeny = [\"Read(config/**)\"]\n"
    ));
    team_files(&p);
    let server = FakeServer::start([anthropic::text_reply("I could not find it.")]);
    let run = p.run(
        Some(&server),
        &["run", "What is lease_ms in config/defaults.toml?"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let sent = super::harness::user_texts(&server.request(0));
    assert!(
        !sent.contains("lease_ms = 8000")
            && sent.contains("`config/defaults.toml` could not be read"),
        "{sent}"
    );

    // A sub-agent's task is not searched for the child: it is the parent's
    // plan of what to search (the main prompt here names nothing).
    let mut p = Project::new();
    p.config(ALL);
    team_files(&p);
    let server = FakeServer::route(|r| match (is_main_session(r), assistant_turns(r)) {
        (true, 0) => anthropic::tool_use_reply(
            "toolu_a",
            "Agent",
            json!({"description": "look", "prompt": "What is lease_ms in config/defaults.toml?",
                   "subagent_type": "Explore"}),
        ),
        _ => anthropic::text_reply("8000"),
    });
    let run = p.run(Some(&server), &["run", "look"]);
    assert_eq!(run.code, 0, "{run:?}");
    let children = child_requests_of(&server, false);
    let task = super::harness::user_texts(&children[0]);
    assert!(
        task.contains("What is lease_ms in config/defaults.toml?")
            && !task.contains("lease_ms = 8000")
            && !task.contains("Before you start"),
        "{children:?}"
    );

    // Off (the default): the prompt goes as typed.
    let p = Project::new();
    team_files(&p);
    let server = FakeServer::start([anthropic::text_reply("8000.")]);
    let run = p.run(
        Some(&server),
        &["run", "What is lease_ms in config/defaults.toml?"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let sent = super::harness::user_texts(&server.request(0));
    assert!(
        !sent.contains("lease_ms = 8000") && !sent.contains("Before you start"),
        "{sent}"
    );
}

/// With the repeated-call guard on, a call written again with the same
/// input in one message runs once; the copies are answered with a line
/// naming the first. Off, every copy runs (as in Claude Code).
#[test]
fn the_same_call_written_many_times_in_one_message_runs_once_with_the_guard_on() {
    let reply = || {
        let mut m = anthropic::message();
        for i in 0..4 {
            m = m.tool_use(
                &format!("toolu_{i}"),
                "Read",
                json!({"file_path": "notes.txt"}),
            );
        }
        m.tool_use("toolu_g", "Glob", json!({"pattern": "*.txt"}))
            .stop_reason("tool_use")
            .reply()
    };
    for (guard, copies_run) in [(true, false), (false, true)] {
        let mut p = Project::new();
        if guard {
            p.config("[agents]\nrepeated_call_limit = 1\n");
        }
        p.write("notes.txt", "the note\n");
        let server = FakeServer::start([reply(), anthropic::text_reply("done")]);
        let run = p.run(Some(&server), &["run", "read it"]);
        assert_eq!(run.code, 0, "{run:?}");
        let results = last_tool_results(&server.request(1).json);
        assert_eq!(results.len(), 5, "{results:?}");
        let texts: Vec<String> = results.iter().map(result_text).collect();
        assert!(texts[0].contains("the note"), "{texts:?}");
        assert!(texts[4].contains("notes.txt"), "{texts:?}");
        for t in &texts[1..4] {
            assert_eq!(t.contains("the note"), copies_run, "{texts:?}");
            assert_eq!(
                t.contains("Not run: the same Read call, with the same input, as call toolu_0"),
                !copies_run,
                "{texts:?}"
            );
        }
    }
}
