//! What a new user meets first: the README's demo task is in no prompt,
//! chat says which tools ran and which failed, an empty answer is
//! explained, a missing key points at the local model, and the small-model
//! guard rails of `config/local.toml` work.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::{Project, tool};
use super::kit::{FakeServer, anthropic};

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Lower-case words of `text`, punctuation dropped.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The task of the README's main-job command (the quoted prompt given to
/// `scripts/run-main-job`), and the script's own default prompt.
fn demo_prompts() -> Vec<String> {
    let mut prompts = Vec::new();
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    for line in readme.lines() {
        if let Some(rest) = line.trim().strip_prefix("scripts/run-main-job \"") {
            prompts.push(rest.trim_end_matches('"').to_string());
        }
    }
    let script = std::fs::read_to_string(repo_root().join("scripts/run-main-job")).unwrap();
    for line in script.lines() {
        if let Some(rest) = line.trim().strip_prefix("DEFAULT_PROMPT=\"") {
            prompts.push(rest.trim_end_matches('"').to_string());
        }
    }
    assert!(
        !prompts.is_empty(),
        "the README names no main-job prompt; this test reads it from there"
    );
    prompts
}

#[test]
fn no_prompt_file_repeats_the_readme_demo_task() {
    // Any run of six consecutive words of the demo task, found in a file the
    // model reads, means an example was tuned to the demo.
    const RUN: usize = 6;
    let mut files = Vec::new();
    for dir in ["agents", "config"] {
        let mut stack = vec![repo_root().join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    files.push(p);
                }
            }
        }
    }
    assert!(files.len() > 20, "templates and tool files were found");
    let texts: Vec<(String, String)> = files
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            (
                p.display().to_string(),
                format!(" {} ", words(&text).join(" ")),
            )
        })
        .collect();
    for prompt in demo_prompts() {
        let w = words(&prompt);
        // The instruction to call the Agent tool is how the demo is driven,
        // not its task: only the task after it counts.
        let start = w.iter().position(|x| x == "to").map_or(0, |i| i + 1);
        let task = &w[start..];
        assert!(task.len() >= RUN, "demo task too short to check: {prompt}");
        for window in task.windows(RUN) {
            let needle = format!(" {} ", window.join(" "));
            for (path, text) in &texts {
                assert!(
                    !text.contains(&needle),
                    "{path} repeats the README's demo task ({needle:?})"
                );
            }
        }
    }
}

#[test]
fn an_empty_final_answer_is_explained_on_stderr() {
    let p = Project::new();
    let server = FakeServer::start([anthropic::message().text("").reply()]);
    let run = p.run(Some(&server), &["run", "say something"]);
    assert_eq!(run.code, 1, "no answer is no success: {run:?}");
    assert_eq!(run.stdout.trim(), "");
    assert!(
        run.stderr
            .contains("the model ended without an answer: no reply of this session had text")
            && run.stderr.contains("last stop: end_turn, after 1 turn)"),
        "{}",
        run.stderr
    );

    // A normal answer says nothing of the kind.
    let server = FakeServer::start([anthropic::text_reply("an answer")]);
    let run = p.run(Some(&server), &["run", "say something"]);
    assert!(
        !run.ok().stderr.contains("without an answer"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_missing_key_error_points_at_the_local_model() {
    let p = Project::new();
    let run = p.run(None, &["run", "hi"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    for part in [
        "ANTHROPIC_API_KEY",
        "scripts/local-model",
        "config/local.toml",
        "~/.config/cadre/cadre.toml",
    ] {
        assert!(run.stderr.contains(part), "{part} missing: {}", run.stderr);
    }
}

/// The Agent tool's input properties and description for a project.
fn agent_tool(p: &Project) -> (Vec<String>, String) {
    let v = p
        .run(None, &["tools", "schema", "--json", "--tool", "Agent"])
        .ok()
        .json();
    let props = v[0]["input_schema"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    (props, v[0]["description"].as_str().unwrap().to_string())
}

#[test]
fn minimal_agent_schema_offers_no_optional_fields_and_ignores_them_if_sent() {
    let mut p = Project::new();
    let (props, desc) = agent_tool(&p);
    assert!(props.contains(&"isolation".to_string()), "{props:?}");
    assert!(
        props.contains(&"run_in_background".to_string()),
        "{props:?}"
    );
    assert!(desc.contains("isolation") && desc.contains("run_in_background"));

    p.config("[features]\nMINIMAL_AGENT_SCHEMA = true\n");
    let (props, desc) = agent_tool(&p);
    assert_eq!(
        props,
        ["description", "prompt", "subagent_type"],
        "only the fields a small model needs"
    );
    assert!(
        !desc.contains("isolation") && !desc.contains("run_in_background"),
        "the description does not explain fields the schema lacks:\n{desc}"
    );

    // Sent anyway (a small model copies fields from memory): the worktree
    // and the background run are not made; the child runs in the foreground
    // in the caller's folder.
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_1",
            "Agent",
            json!({"description": "look around", "prompt": "Say hi.",
                   "subagent_type": "general-purpose", "isolation": "worktree",
                   "run_in_background": true}),
        ),
        anthropic::text_reply("child says hi"),
        anthropic::text_reply("parent done"),
    ]);
    let run = p.run(Some(&server), &["run", "delegate"]);
    assert_eq!(run.ok().stdout.trim(), "parent done");
    let result = super::harness::last_tool_results(&server.request(2).json);
    let text = super::harness::result_text(&result[0]);
    assert!(
        text.starts_with("child says hi"),
        "completed in the foreground: {text}"
    );
    assert!(!p.path().join(".cadre/worktrees").exists());
    assert!(tool(&server.request(0).json, "Agent").is_some());
}

#[test]
fn the_shipped_local_config_turns_the_guard_on() {
    let local = std::fs::read_to_string(repo_root().join("config/local.toml")).unwrap();
    let v: toml::Table = toml::from_str(&local).unwrap();
    assert_eq!(
        v["features"]["MINIMAL_AGENT_SCHEMA"].as_bool(),
        Some(true),
        "config/local.toml offers a small model only the essential Agent fields"
    );
}

#[test]
fn the_local_config_offers_a_small_model_only_the_tools_it_needs() {
    let p = Project::new();
    let local = repo_root().join("config/local.toml");
    let local = local.to_str().unwrap();
    let body = p
        .run(None, &["--trust", "--config", local, "render", "x"])
        .ok()
        .json();
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Agent", "Bash", "Glob", "Grep", "Read"]);
    let agent = &body["tools"][0]["function"]["parameters"]["properties"];
    assert!(agent.get("isolation").is_none() && agent.get("run_in_background").is_none());
}

#[test]
fn a_call_repeated_past_the_limit_is_answered_without_running() {
    // The same Bash call two turns in a row, then a different one: with a
    // limit of 1, the first runs, the repeat is answered by the guard, and
    // the different call runs. The marker file counts real runs. (A second
    // repeat would end the run: tests/suite/honest.rs.)
    let mut p = Project::new();
    p.config("[agents]\nrepeated_call_limit = 1\n[permissions]\nallow = [\"Bash(echo:*)\"]\n");
    let same = json!({"command": "echo run >> runs.txt"});
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Bash", same.clone()),
        anthropic::tool_use_reply("toolu_2", "Bash", same.clone()),
        anthropic::tool_use_reply(
            "toolu_4",
            "Bash",
            json!({"command": "echo other >> runs.txt"}),
        ),
        anthropic::tool_use_reply("toolu_5", "Bash", same),
        anthropic::text_reply("done"),
    ]);
    p.run(Some(&server), &["run", "go"]).ok();
    let runs = std::fs::read_to_string(p.path().join("runs.txt")).unwrap();
    assert_eq!(runs, "run\nother\nrun\n", "only the repeats were held back");
    let result = &super::harness::last_tool_results(&server.request(2).json)[0];
    assert_eq!(result["is_error"], true, "{result}");
    let text = super::harness::result_text(result);
    assert!(
        text.contains("Not run") && text.contains("previous turn"),
        "{text}"
    );
    // Off by default: the same script runs every call.
    let mut q = Project::new();
    q.config("[permissions]\nallow = [\"Bash(echo:*)\"]\n");
    let same = json!({"command": "echo run >> runs.txt"});
    let server = FakeServer::start([
        anthropic::tool_use_reply("toolu_1", "Bash", same.clone()),
        anthropic::tool_use_reply("toolu_2", "Bash", same),
        anthropic::text_reply("done"),
    ]);
    q.run(Some(&server), &["run", "go"]).ok();
    let runs = std::fs::read_to_string(q.path().join("runs.txt")).unwrap();
    assert_eq!(runs, "run\nrun\n");
}

#[test]
fn the_shipped_local_config_limits_repeated_calls() {
    let local = std::fs::read_to_string(repo_root().join("config/local.toml")).unwrap();
    let v: toml::Table = toml::from_str(&local).unwrap();
    assert!(
        v["agents"]["repeated_call_limit"].as_integer().unwrap_or(0) > 0,
        "config/local.toml keeps a small model from repeating a call"
    );
}

#[test]
fn worktree_isolation_without_commits_is_a_clear_error() {
    let p = Project::new();
    git(p.path(), &["init", "-q"]);
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_1",
            "Agent",
            json!({"description": "isolated", "prompt": "x", "isolation": "worktree"}),
        ),
        anthropic::text_reply("ok"),
    ]);
    p.run(Some(&server), &["run", "go"]).ok();
    let result = super::harness::last_tool_results(&server.request(1).json);
    assert_eq!(result[0]["is_error"], true);
    let text = super::harness::result_text(&result[0]);
    assert!(
        text.contains("has no commits yet") && text.contains("without isolation"),
        "{text}"
    );
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

/// `cadre chat` on a pseudo-terminal: what the user's terminal shows.
pub(super) struct Pty {
    master: std::fs::File,
    screen: Arc<Mutex<String>>,
    child: std::process::Child,
}

impl Pty {
    pub(super) fn spawn(mut cmd: Command) -> Pty {
        let pty = nix::pty::openpty(None, None).unwrap();
        let slave = std::fs::File::from(pty.slave);
        cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .env("TERM", "dumb");
        let child = cmd.spawn().unwrap();
        let master = std::fs::File::from(pty.master);
        let screen = Arc::new(Mutex::new(String::new()));
        let mut reader = master.try_clone().unwrap();
        let sink = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends with EIO once the child has exited and closed the slave.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Pty {
            master,
            screen,
            child,
        }
    }

    /// Everything the terminal has shown so far.
    pub(super) fn screen(&self) -> String {
        self.screen.lock().unwrap().clone()
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(super) fn type_line(&mut self, line: &str) {
        self.master.write_all(line.as_bytes()).unwrap();
        self.master.write_all(b"\r").unwrap();
    }

    /// Waits until the screen shows `text`; panics with the screen after 30 s.
    pub(super) fn wait_for(&self, text: &str) {
        let start = Instant::now();
        while !self.screen.lock().unwrap().contains(text) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{text:?} never appeared; the screen:\n{}",
                self.screen.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(super) fn quit(mut self) -> String {
        self.master.write_all(&[4]).unwrap(); // Ctrl-D
        let start = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(20) {
                let _ = self.child.kill();
                panic!("chat did not quit: {}", self.screen.lock().unwrap());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(100));
        self.screen.lock().unwrap().clone()
    }
}

#[test]
fn chat_prints_a_line_per_tool_call_and_per_failure() {
    let p = Project::new();
    git(p.path(), &["init", "-q"]);
    p.write("notes.md", "# notes\n");
    let server = FakeServer::start([
        // Main: one tool that works, one that fails.
        anthropic::message()
            .tool_use("toolu_1", "Glob", json!({"pattern": "*.md"}))
            .tool_use("toolu_2", "Read", json!({"file_path": "missing.txt"}))
            .reply(),
        // Main: a spawn that cannot start (no commits for a worktree).
        anthropic::tool_use_reply(
            "toolu_3",
            "Agent",
            json!({"description": "isolated look", "prompt": "x", "isolation": "worktree"}),
        ),
        // Main: an Explore child that runs a tool of its own.
        anthropic::tool_use_reply(
            "toolu_4",
            "Agent",
            json!({"description": "find notes", "prompt": "Find notes.",
                   "subagent_type": "Explore"}),
        ),
        anthropic::tool_use_reply("toolu_5", "Grep", json!({"pattern": "notes"})),
        anthropic::text_reply("notes.md has them"),
        anthropic::text_reply("All finished."),
        // Second prompt: an answer with no text at all.
        anthropic::message().text("").reply(),
    ]);
    let mut cmd = p.command(Some(&server));
    cmd.arg("chat");
    let mut pty = Pty::spawn(cmd);
    pty.wait_for("cadre chat");
    pty.type_line("look around");
    pty.wait_for("All finished.");
    pty.type_line("and now?");
    pty.wait_for("without an answer");
    let screen = pty.quit();
    for line in [
        "• Glob *.md — ok",
        "• Read missing.txt — error: ",
        "• Agent general-purpose: isolated look — error: Cannot create agent worktree: \
         the git repository at",
        "• [Explore] Grep notes — ok",
        "• Agent Explore: find notes — ok",
    ] {
        assert!(
            screen.contains(line),
            "{line:?} not shown; the screen:\n{screen}"
        );
    }
    assert_eq!(server.request_count(), 7);
}
