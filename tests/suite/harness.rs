//! Running the real `cadre` binary in a throwaway project: a temp working
//! directory with its own `cadre.toml`, a temp `HOME`, and the environment
//! pointed at a fake model server.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use tempfile::TempDir;

use super::kit::{FakeServer, TEST_KEY};

/// Settings every test project starts with: quick retries and timeouts.
pub const BASE_CONFIG: &str = r#"
[provider]
model = "claude-sonnet-4-5"
max_tokens = 1024
connect_timeout_ms = 2000
idle_timeout_ms = 3000
max_retries = 2
retry_base_ms = 1
retry_max_ms = 5
"#;

pub struct Project {
    pub dir: TempDir,
    pub home: TempDir,
    config: String,
    env: Vec<(String, String)>,
}

impl Project {
    pub fn new() -> Project {
        let p = Project {
            dir: tempfile::tempdir().unwrap(),
            home: tempfile::tempdir().unwrap(),
            config: BASE_CONFIG.to_string(),
            env: Vec::new(),
        };
        p.write_config();
        trust_folder(p.home.path(), p.dir.path());
        p
    }

    /// A project whose folder the user has not trusted (a fresh clone).
    pub fn untrusted() -> Project {
        let p = Project::new();
        p.untrust();
        p
    }

    /// Forgets that the project folder is trusted.
    pub fn untrust(&self) {
        let _ = std::fs::remove_file(trust_file(self.home.path()));
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Appends TOML to `cadre.toml`.
    pub fn config(&mut self, extra: &str) -> &mut Self {
        self.config.push('\n');
        self.config.push_str(extra);
        self.write_config();
        self
    }

    fn write_config(&self) {
        std::fs::write(self.dir.path().join("cadre.toml"), &self.config).unwrap();
    }

    pub fn env(&mut self, key: &str, value: &str) -> &mut Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    pub fn write(&self, rel: &str, content: &str) -> PathBuf {
        let p = self.dir.path().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, content).unwrap();
        p
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(rel)).unwrap()
    }

    pub fn command(&self, server: Option<&FakeServer>) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_cadre"));
        cmd.current_dir(self.dir.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.home.path())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        if let Some(s) = server {
            cmd.env("ANTHROPIC_BASE_URL", s.url())
                .env("ANTHROPIC_API_KEY", TEST_KEY);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// `cadre chat` with `input` typed (piped) and stdin then closed.
    pub fn chat(&self, server: Option<&FakeServer>, input: &str) -> Run {
        use std::io::Write;
        let mut child = self
            .command(server)
            .arg("chat")
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
        Run::from(child.wait_with_output().unwrap())
    }

    pub fn run(&self, server: Option<&FakeServer>, args: &[&str]) -> Run {
        let out = self.command(server).args(args).output().unwrap();
        Run::from(out)
    }

    /// The user's session folder for this project, where Claude Code
    /// keeps its sessions: `$HOME/.claude/projects/<key>`, the key being
    /// the project's real path with every character but ASCII letters and
    /// digits turned into `-` (test paths are short and ASCII).
    pub fn sessions_dir(&self) -> PathBuf {
        let real = self.dir.path().canonicalize().unwrap();
        let key: String = real
            .to_str()
            .unwrap()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        self.home.path().join(".claude/projects").join(key)
    }

    /// The sessions in the session folder: the ids of its `<id>.jsonl`
    /// transcripts (Claude Code's layout), sorted.
    pub fn session_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = std::fs::read_dir(self.sessions_dir())
            .map(|d| {
                d.flatten()
                    .filter_map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        name.strip_suffix(".jsonl").map(str::to_string)
                    })
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids
    }

    /// The main transcript of session `id`: `<session folder>/<id>.jsonl`.
    pub fn transcript_of(&self, id: &str) -> PathBuf {
        self.sessions_dir().join(format!("{id}.jsonl"))
    }

    /// Every file under the project's `.cadre` folder and the user's
    /// session folder for the project, with its content.
    pub fn written_files(&self) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        let mut stack = vec![self.dir.path().join(".cadre"), self.sessions_dir()];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    out.push((p.clone(), std::fs::read_to_string(&p).unwrap_or_default()));
                }
            }
        }
        out.sort();
        out
    }

    /// Every sub-agent meta file (`agent-ID.meta.json`) written so far, parsed.
    pub fn meta_files(&self) -> Vec<Value> {
        self.written_files()
            .into_iter()
            .filter(|(path, _)| path.to_string_lossy().ends_with(".meta.json"))
            .map(|(_, text)| serde_json::from_str(&text).unwrap())
            .collect()
    }

    /// The lines of every `*.jsonl` transcript, parsed (panics on a bad line).
    pub fn transcript_lines(&self) -> Vec<Value> {
        self.written_files()
            .into_iter()
            .filter(|(p, _)| p.extension().is_some_and(|e| e == "jsonl"))
            .flat_map(|(p, text)| {
                text.lines()
                    .map(|l| {
                        serde_json::from_str::<Value>(l)
                            .unwrap_or_else(|e| panic!("{}: bad line {l:?}: {e}", p.display()))
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// The user's trust list under a scratch HOME (no XDG_CONFIG_HOME).
pub fn trust_file(home: &Path) -> PathBuf {
    home.join(".config/cadre/trusted.toml")
}

/// Records `dir` as trusted in the scratch HOME's trust list, as
/// `cadre trust` would: test projects are the tester's own folders.
pub fn trust_folder(home: &Path, dir: &Path) {
    let file = trust_file(home);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let dir = dir.canonicalize().unwrap();
    std::fs::write(
        file,
        format!("folders = [{:?}]\n", dir.display().to_string()),
    )
    .unwrap();
}

/// A finished run.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

impl Run {
    pub fn ok(&self) -> &Self {
        assert_eq!(
            self.code, 0,
            "exit {}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        );
        self
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    pub fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// The tool_result blocks of a recorded request's last user message.
pub fn last_tool_results(body: &Value) -> Vec<Value> {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .map(|c| {
            c.iter()
                .filter(|b| b["type"] == "tool_result")
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// The text of a tool_result block (its text parts joined).
pub fn result_text(block: &Value) -> String {
    match &block["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Tool names in a recorded request.
pub fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The announcements of agent types and skills (`<system-reminder>` text
/// blocks of user messages) in a request body, joined by newlines.
pub fn listings(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .filter(|t| t.starts_with("<system-reminder>"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A tool definition of a recorded request by name.
pub fn tool<'a>(body: &'a Value, name: &str) -> Option<&'a Value> {
    body["tools"].as_array()?.iter().find(|t| t["name"] == name)
}

/// Words of cadre's main system prompt (`main_system.hbs`): requests that
/// carry it come from the main session or from one of its forks.
pub const MAIN_MARKER: &str = "You are cadre";

/// How many assistant messages a request's history holds: 0 on a
/// session's first request.
pub fn assistant_turns(r: &super::kit::RecordedRequest) -> usize {
    r.messages()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count()
}

/// A fork child's request: its history carries the fork directive.
pub fn is_fork_child(r: &super::kit::RecordedRequest) -> bool {
    r.body_str().contains("<fork-boilerplate>")
}

/// The main session's system prompt (the main session, or a fork of it).
pub fn has_main_prompt(r: &super::kit::RecordedRequest) -> bool {
    r.system_text().contains(MAIN_MARKER)
}

/// The main session itself, not one of its forks.
pub fn is_main_session(r: &super::kit::RecordedRequest) -> bool {
    has_main_prompt(r) && !is_fork_child(r)
}

/// The requests of sub-agents: named ones, and forks when `with_forks`.
pub fn child_requests_of(
    server: &FakeServer,
    with_forks: bool,
) -> Vec<super::kit::RecordedRequest> {
    let is_parent = if with_forks {
        is_main_session
    } else {
        has_main_prompt
    };
    server
        .requests()
        .into_iter()
        .filter(|r| !is_parent(r))
        .collect()
}

/// The main session's own requests (not its sub-agents', not its forks').
pub fn main_requests(server: &super::kit::FakeServer) -> Vec<super::kit::RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(is_main_session)
        .collect()
}

/// Every text block of every user message in a request, joined by newlines.
pub fn user_texts(r: &super::kit::RecordedRequest) -> String {
    r.messages()
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Two sibling fork requests: sorts them by whether their directive is
/// `second` (the other first), then checks that their bodies are the same
/// bytes up to the first one's directive and differ first at its text.
/// Returns the shared length and the first body's length.
pub fn assert_siblings_share_up_to_directive(
    forks: &mut [super::kit::RecordedRequest],
    second: &str,
) -> (usize, usize) {
    assert_eq!(forks.len(), 2);
    forks.sort_by_key(|r| r.body_str().contains(second));
    let (a, b) = (&forks[0].body, &forks[1].body);
    let common = a.iter().zip(b.iter()).take_while(|(x, y)| x == y).count();
    let a_text = String::from_utf8_lossy(a);
    let directive_at = a_text.rfind("Your directive: ").unwrap();
    assert!(
        common > directive_at,
        "fork bodies diverge before the directive (at {common}, directive at {directive_at})"
    );
    assert!(
        a_text[common..].starts_with('A'),
        "they differ first at the directive's text: {}",
        &a_text[common..]
    );
    (common, a.len())
}

/// Waits until `done` holds, checking every 20 ms; `timeout` only bounds
/// a hung wait (generous: it is no timing check).
pub fn wait_until(what: &str, timeout: std::time::Duration, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + timeout;
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
