//! AskUserQuestion through the binary: in a plain `run` nobody can answer
//! and the model is told to decide; in `cadre chat`, driven through tmux
//! as a person would, the question is a choice prompt whose answer reaches
//! the model. (The SDK client's answers: `headless.rs`.)

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::harness::{Project, last_tool_results, result_text, tool_names};
use super::kit::{FakeServer, anthropic};

fn questions() -> Value {
    json!([
        {"question": "Which database?", "header": "Database", "multiSelect": false,
         "options": [{"label": "Postgres", "description": "a server"},
                     {"label": "SQLite", "description": "one file"}]},
        {"question": "Which extras?", "header": "Extras", "multiSelect": true,
         "options": [{"label": "Backups", "description": "nightly"},
                     {"label": "Metrics", "description": "Prometheus"},
                     {"label": "Tracing", "description": "OpenTelemetry"}]}
    ])
}

#[test]
fn in_a_plain_run_the_model_is_told_to_decide_on_its_own() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_q",
            "AskUserQuestion",
            json!({"questions": questions()}),
        ),
        anthropic::text_reply("I chose SQLite."),
    ]);
    let run = p.run(Some(&server), &["run", "set up storage"]);
    run.ok();
    assert!(tool_names(&server.request(0).json).contains(&"AskUserQuestion".to_string()));
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true);
    let text = result_text(r);
    assert!(
        text.contains("No one can answer") && text.contains("Decide on your own"),
        "{text}"
    );
}

#[test]
fn a_question_outside_the_schema_is_refused_with_the_field() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_q",
            "AskUserQuestion",
            json!({"questions": [{"question": "Q?", "header": "H", "multiSelect": false,
                                  "options": [{"label": "only one", "description": "d"}]}]}),
        ),
        anthropic::text_reply("ok"),
    ]);
    p.run(Some(&server), &["run", "x"]).ok();
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true);
    assert!(result_text(r).contains("options"), "{r}");
}

/// A tmux session of its own (its own server socket) running one command.
pub(super) struct Tmux {
    socket: String,
}

impl Tmux {
    pub(super) fn start(dir: &Path, command: &str) -> Tmux {
        let socket = format!("cadre-test-{}-{}", std::process::id(), rand_suffix());
        let ok = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "t",
                "-x",
                "160",
                "-y",
                "50",
            ])
            .arg(command)
            .current_dir(dir)
            .status()
            .expect("tmux must be installed to test `cadre chat` (apt-get install tmux)")
            .success();
        assert!(ok, "tmux new-session failed");
        Tmux { socket }
    }

    pub(super) fn keys(&self, keys: &[&str]) {
        let ok = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", "t"])
            .args(keys)
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux send-keys {keys:?}");
    }

    pub(super) fn screen(&self) -> String {
        self.capture(false)
    }

    /// The pane's text; with `escapes`, with its colour sequences.
    pub(super) fn capture(&self, escapes: bool) -> String {
        let out = Command::new("tmux")
            .args([
                "-L",
                &self.socket,
                "capture-pane",
                "-p",
                "-J",
                "-S",
                "-200",
                "-t",
                "t",
            ])
            .args(escapes.then_some("-e"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(super) fn wait_for(&self, text: &str) {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{text:?} never appeared; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .status();
    }
}

fn rand_suffix() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
}

/// `sh -c` quoting of one word.
pub(super) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The shell line that runs `cadre chat` for `p` in a fresh environment
/// (without `NO_COLOR` unless `no_color`).
pub(super) fn chat_line(p: &Project, server: &FakeServer, no_color: bool) -> String {
    let cmd = p.command(Some(server));
    let env: Vec<String> = cmd
        .get_envs()
        .filter(|(k, _)| no_color || *k != "NO_COLOR")
        .filter_map(|(k, v)| Some(format!("{}={}", k.to_str()?, quote(v?.to_str()?))))
        .collect();
    format!(
        "env -i TERM=xterm-256color {} {} chat; sleep 30",
        env.join(" "),
        quote(cmd.get_program().to_str().unwrap())
    )
}

#[test]
fn an_agents_color_paints_its_progress_line_unless_no_color() {
    for no_color in [false, true] {
        let p = Project::new();
        p.write(
            ".claude/agents/painter.md",
            "---\nname: painter\ndescription: Paints\ncolor: red\n---\nPaint.\n",
        );
        let server = FakeServer::start([
            anthropic::tool_use_reply(
                "toolu_a",
                "Agent",
                json!({"description": "paint the fence", "prompt": "p", "subagent_type": "painter"}),
            ),
            anthropic::text_reply("painted"),
            anthropic::text_reply("All painted."),
        ]);
        let t = Tmux::start(p.path(), &chat_line(&p, &server, no_color));
        t.wait_for("cadre chat");
        t.keys(&["paint", "Enter"]);
        t.wait_for("All painted.");
        t.wait_for("paint the fence done");
        let screen = t.capture(true);
        let red = "\u{1b}[31m[painter]";
        if no_color {
            assert!(
                !screen.contains(red) && screen.contains("[painter] paint the fence"),
                "{screen}"
            );
        } else {
            assert!(screen.contains(red), "{screen:?}");
        }
        t.keys(&["C-d"]);
    }
}

#[test]
fn chat_shows_a_choice_prompt_and_the_answers_reach_the_model() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_q",
            "AskUserQuestion",
            json!({"questions": questions()}),
        ),
        anthropic::text_reply("Setting up SQLite with metrics."),
    ]);
    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    t.keys(&["set up storage", "Enter"]);
    t.wait_for("[Database] Which database?");
    t.wait_for("SQLite — one file");
    // The second option.
    t.keys(&["Down"]);
    t.keys(&["Enter"]);
    t.wait_for("[Extras] Which extras?");
    // Metrics, and an answer of one's own (the last choice).
    t.keys(&["Down"]);
    t.keys(&["Space"]);
    t.keys(&["Down", "Down"]);
    t.keys(&["Space"]);
    t.keys(&["Enter"]);
    t.wait_for("Your answer");
    t.keys(&["nightly dumps", "Enter"]);
    t.wait_for("Setting up SQLite with metrics.");
    let r = &last_tool_results(&server.request(1).json)[0];
    assert!(r.get("is_error").is_none(), "{r}");
    let text = result_text(r);
    assert!(text.contains(r#""Which database?": "SQLite""#), "{text}");
    assert!(
        text.contains(r#""Which extras?": "Metrics, nightly dumps""#),
        "{text}"
    );
    t.keys(&["C-d"]);
}

#[test]
fn a_sub_agents_question_reaches_the_user_in_chat() {
    let p = Project::new();
    let one = json!([{"question": "Which port?", "header": "Port", "multiSelect": false,
        "options": [{"label": "8080", "description": "the usual"},
                    {"label": "9090", "description": "the other"}]}]);
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_a",
            "Agent",
            json!({"description": "pick a port", "prompt": "ask which port"}),
        ),
        anthropic::tool_use_reply("toolu_q", "AskUserQuestion", json!({"questions": one})),
        anthropic::text_reply("port 8080"),
        anthropic::text_reply("Using 8080."),
    ]);
    let t = Tmux::start(p.path(), &chat_line(&p, &server, true));
    t.wait_for("cadre chat");
    t.keys(&["set it up", "Enter"]);
    t.wait_for("[Port] Which port?");
    t.keys(&["Enter"]);
    t.wait_for("Using 8080.");
    let r = &last_tool_results(&server.request(2).json)[0];
    assert!(r.get("is_error").is_none(), "{r}");
    assert!(result_text(r).contains(r#""Which port?": "8080""#), "{r}");
    t.keys(&["C-d"]);
}
