//! Hot reload through the real binary: `cadre watch --json` against real
//! files in temp folders (flag flips, a broken then fixed config, a folder
//! created after start, a burst of writes, SIGHUP and SIGTERM), and a
//! `cadre run` session whose next request sees a flag flipped mid-run.
//! Timeouts are generous and only bound a wait; assertions are on content.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::kit::{FakeServer, anthropic};

const WAIT: Duration = Duration::from_secs(30);

fn cadre() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cadre"))
}

/// The binary the benchmark runs: `CADRE_BENCH_BIN` (e.g. a release build)
/// or the test build.
fn bench_bin() -> PathBuf {
    std::env::var_os("CADRE_BENCH_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_cadre")), PathBuf::from)
}

/// A project folder with a config file and an empty home.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new(config: &str) -> Project {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        super::harness::trust_folder(&dir.path().join("home"), dir.path());
        let p = Project { dir };
        p.write("cadre.toml", config);
        p
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn config(&self) -> PathBuf {
        self.path().join("cadre.toml")
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// `cadre` with HOME, the working directory and the config set.
    fn command(&self) -> Command {
        self.command_of(cadre())
    }

    fn command_of(&self, mut c: Command) -> Command {
        c.env("HOME", self.path().join("home"))
            .env_remove("CADRE_CONFIG")
            .env_remove("CADRE_LOG")
            .env_remove("XDG_CONFIG_HOME")
            .arg("--cwd")
            .arg(self.path())
            .arg("--config")
            .arg(self.config());
        c
    }

    /// `cadre flags --json --session SESSION`: name → (value, effective).
    fn flag(&self, name: &str, session: &str) -> (bool, bool) {
        let out = self
            .command()
            .args(["flags", "--json", "--session", session])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap();
        (
            row["value"].as_bool().unwrap(),
            row["effective"].as_bool().unwrap(),
        )
    }
}

/// A running `cadre watch --json`, its stdout read line by line.
struct Watch {
    child: Child,
    lines: Receiver<Value>,
    ready: Value,
    seen: Vec<Value>,
}

impl Watch {
    fn start(p: &Project, session: &str) -> Watch {
        Watch::start_with(p, session, cadre())
    }

    fn start_with(p: &Project, session: &str, bin: Command) -> Watch {
        let mut child = p
            .command_of(bin)
            .env("CADRE_LOG", "cadre=trace")
            .args(["watch", "--json", "--session", session])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(p.path().join("watch.log")).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value =
                    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line}: {e}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let ready = lines.recv_timeout(WAIT).expect("no ready line");
        assert_eq!(ready["event"], "ready", "{ready}");
        assert_eq!(ready["generation"], 1);
        Watch {
            child,
            lines,
            ready,
            seen: Vec::new(),
        }
    }

    fn pid(&self) -> nix::unistd::Pid {
        nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap())
    }

    /// The next reload event.
    fn next(&mut self) -> Value {
        let v = self.lines.recv_timeout(WAIT).expect("no reload event");
        assert_eq!(v["event"], "reload", "{v}");
        self.seen.push(v.clone());
        v
    }

    /// Events until one satisfies `pred`; returns it.
    fn until(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(v) => {
                    assert_eq!(v["event"], "reload", "{v}");
                    self.seen.push(v.clone());
                    if pred(&v) {
                        return v;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no event with {what}; saw {:#?}", self.seen)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("cadre watch ended; saw {:#?}", self.seen)
                }
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn names(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap_or_default().to_string())
        .collect()
}

fn flag_change<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v["flags_changed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
}

#[test]
fn flipping_a_flag_reports_it_as_cadre_flags_does() {
    let p = Project::new("[features]\nFORK_SUBAGENT = false\n");
    let mut w = Watch::start(&p, "interactive");
    assert_eq!(w.ready["config"], json!(p.config()));

    p.write("cadre.toml", "[features]\nFORK_SUBAGENT = true\n");
    let e = w.until("FORK_SUBAGENT", |v| {
        flag_change(v, "FORK_SUBAGENT").is_some()
    });
    assert_eq!(e["ok"], true, "{e}");
    assert_eq!(e["generation"], 2);
    assert_eq!(
        flag_change(&e, "FORK_SUBAGENT").unwrap(),
        &json!({"name": "FORK_SUBAGENT", "value": true, "effective": true})
    );
    assert!(e["agents_added"].as_array().unwrap().is_empty());
    assert!(e["templates_changed"].as_array().unwrap().is_empty());
    assert!(e["duration_ms"].as_f64().unwrap() >= 0.0);
    // What `cadre flags` says about the same file.
    assert_eq!(p.flag("FORK_SUBAGENT", "interactive"), (true, true));
    // Non-interactive sessions: the gate blocks it.
    assert_eq!(p.flag("FORK_SUBAGENT", "non-interactive"), (true, false));

    p.write("cadre.toml", "[features]\nFORK_SUBAGENT = false\n");
    let e = w.until("FORK_SUBAGENT off", |v| {
        flag_change(v, "FORK_SUBAGENT").is_some()
    });
    assert_eq!(e["generation"], 3, "{:#?}", w.seen);
    assert_eq!(
        flag_change(&e, "FORK_SUBAGENT").unwrap()["effective"],
        false
    );
    assert_eq!(p.flag("FORK_SUBAGENT", "interactive"), (false, false));
}

#[test]
fn claude_code_settings_files_created_after_start_reload() {
    let p = Project::new("");
    let mut w = Watch::start(&p, "interactive");
    p.write(
        ".claude/settings.local.json",
        r#"{"permissions": {"deny": ["Bash(rm:*)"]}}"#,
    );
    let e = w.until("settings_changed", |v| v["settings_changed"] == true);
    assert_eq!(e["ok"], true, "{e}");
    // A broken file keeps the last good snapshot and says where.
    p.write(".claude/settings.json", "{\"permissions\": [");
    let e = w.until("a failed reload", |v| v["ok"] == false);
    let d = e["diagnostics"][0].clone();
    assert!(
        d["path"]
            .as_str()
            .unwrap()
            .ends_with(".claude/settings.json"),
        "{e}"
    );
    assert_eq!(d["line"], 1, "{e}");
    p.write(".claude/settings.json", "{}");
    w.until("recovered", |v| v["ok"] == true);
    // Project memory and the files it imports.
    p.write("CLAUDE.md", "Rules: @rules.md\n");
    w.until("memory_changed", |v| v["memory_changed"] == true);
    p.write("rules.md", "imported later\n");
    w.until("an imported file's change", |v| v["memory_changed"] == true);
}

#[test]
fn a_settings_flag_file_is_followed_like_the_other_layers() {
    let p = Project::new("");
    p.write("team.json", r#"{"permissions": {"deny": ["Bash(rm:*)"]}}"#);
    let mut bin = cadre();
    bin.args(["--settings", "team.json"]);
    let mut w = Watch::start_with(&p, "interactive", bin);
    p.write(
        "team.json",
        r#"{"permissions": {"deny": ["Bash(rm:*)", "Read(./.env)"]}}"#,
    );
    let e = w.until("settings_changed", |v| v["settings_changed"] == true);
    assert_eq!(e["ok"], true, "{e}");
    let out = p
        .command()
        .args(["config", "show", "--json", "--settings", "team.json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["settings"]["permissions"]["deny"],
        json!(["Bash(rm:*)", "Read(./.env)"])
    );
}

#[test]
fn a_gated_flag_is_reported_with_its_value_and_not_effective() {
    let p = Project::new("");
    let mut w = Watch::start(&p, "non-interactive");
    p.write("cadre.toml", "[features]\nFORK_SUBAGENT = true\n");
    let e = w.until("FORK_SUBAGENT", |v| {
        flag_change(v, "FORK_SUBAGENT").is_some()
    });
    assert_eq!(
        flag_change(&e, "FORK_SUBAGENT").unwrap(),
        &json!({"name": "FORK_SUBAGENT", "value": true, "effective": false})
    );
    assert_eq!(p.flag("FORK_SUBAGENT", "non-interactive"), (true, false));
}

#[test]
fn a_broken_config_keeps_the_old_snapshot_until_fixed() {
    let p = Project::new("[features]\nDISABLE_BACKGROUND_TASKS = false\n");
    let mut w = Watch::start(&p, "non-interactive");

    p.write(
        "cadre.toml",
        "[features]\nDISABLE_BACKGROUND_TASKS = true\n",
    );
    let e = w.until("a flag change", |v| {
        flag_change(v, "DISABLE_BACKGROUND_TASKS").is_some()
    });
    let good = e["generation"].as_u64().unwrap();
    assert_eq!(good, 2);

    p.write(
        "cadre.toml",
        "[features]\nDISABLE_BACKGROUND_TASKS = true\nFORK_SUBAGENT = = on\n",
    );
    let e = w.until("ok:false", |v| v["ok"] == false);
    assert_eq!(
        e["generation"], good,
        "a failed reload keeps the generation: {e}"
    );
    let d = &e["diagnostics"][0];
    assert_eq!(d["path"], json!(p.config()), "{e}");
    assert_eq!(d["line"], 3, "{e}");
    assert!(d["column"].is_u64(), "{e}");
    assert_eq!(d["severity"], "error");
    assert!(!d["message"].as_str().unwrap().is_empty());
    assert!(flag_change(&e, "DISABLE_BACKGROUND_TASKS").is_none());

    // The fix applies, one generation on from the last good one; the flag
    // value never changed in between, so it is not reported.
    p.write(
        "cadre.toml",
        "[features]\nDISABLE_BACKGROUND_TASKS = true\nFORK_SUBAGENT = true\n",
    );
    let e = w.until("ok:true", |v| v["ok"] == true);
    assert_eq!(e["generation"], good + 1, "{e}");
    assert!(e["diagnostics"].as_array().unwrap().is_empty(), "{e}");
    assert!(flag_change(&e, "DISABLE_BACKGROUND_TASKS").is_none(), "{e}");
    assert_eq!(
        flag_change(&e, "FORK_SUBAGENT").unwrap()["value"],
        true,
        "{e}"
    );
}

#[test]
fn a_builtin_folder_created_after_start_is_picked_up() {
    // `builtin` does not exist yet: watched through the project folder.
    let p = Project::new("[agents]\nbuiltin_dir = \"builtin\"\n");
    let mut w = Watch::start(&p, "non-interactive");
    p.write(
        "builtin/templates/fork_child.hbs",
        "Changed directive: {{directive}}\n",
    );
    let e = w.until("templates_changed", |v| {
        !names(v, "templates_changed").is_empty()
    });
    assert_eq!(e["ok"], true);
    assert_eq!(names(&e, "templates_changed"), vec!["fork_child"]);
    let generation = e["generation"].as_u64().unwrap();

    // The new folder is now watched itself.
    p.write(
        "builtin/templates/fork_child.hbs",
        "Changed again: {{directive}}\n",
    );
    let e = w.until("templates_changed", |v| {
        !names(v, "templates_changed").is_empty()
    });
    assert_eq!(names(&e, "templates_changed"), vec!["fork_child"]);
    assert!(e["generation"].as_u64().unwrap() > generation);

    // A tool spec that does not parse is a diagnostic; the reload applies.
    p.write("builtin/tools/Glob.yaml", "name: [unclosed\n");
    let e = w.until("a diagnostic", |v| {
        !v["diagnostics"].as_array().unwrap().is_empty()
    });
    assert_eq!(e["ok"], true, "{e}");
    assert!(
        e["diagnostics"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("Glob.yaml"),
        "{e}"
    );
}

#[test]
fn a_templates_folder_created_under_an_existing_builtin_dir_is_picked_up() {
    let p = Project::new("[agents]\nbuiltin_dir = \"agents\"\n");
    std::fs::create_dir_all(p.path().join("agents")).unwrap();
    // Restart-free: the folder existed before the watcher, `templates` did not.
    let mut w = Watch::start(&p, "non-interactive");
    let watching = w.ready["watching"].as_array().unwrap().clone();
    assert!(
        watching.contains(&json!({"path": p.path().join("agents"), "recursive": true})),
        "{watching:?}"
    );
    p.write("agents/templates/fork_child.hbs", "Fork: {{directive}}\n");
    let e = w.until("templates_changed", |v| {
        !names(v, "templates_changed").is_empty()
    });
    assert_eq!(e["ok"], true);
    assert_eq!(names(&e, "templates_changed"), vec!["fork_child"]);
    // Removing it brings the embedded template back: a change again.
    std::fs::remove_dir_all(p.path().join("agents/templates")).unwrap();
    let e = w.until("templates_changed", |v| {
        !names(v, "templates_changed").is_empty()
    });
    assert_eq!(names(&e, "templates_changed"), vec!["fork_child"]);
}

#[test]
fn a_burst_of_writes_ends_in_the_final_state_and_never_a_partial_one() {
    // DISABLE_BACKGROUND_TASKS is on in every version of the file and comes
    // last: a half-written file would drop it (or not parse).
    let content = |fork: bool| {
        // A debounce well above a busy machine's scheduling stalls: a
        // writer paused mid-write for longer than the debounce leaves a
        // truncated file that any watcher would read.
        let mut s = String::from("# a config rewritten many times\n[reload]\ndebounce_ms = 250\n");
        for i in 0..40 {
            s.push_str(&format!(
                "# padding line {i} to make a partial write visible\n"
            ));
        }
        s.push_str(&format!(
            "[features]\nFORK_SUBAGENT = {fork}\nDISABLE_BACKGROUND_TASKS = true\n"
        ));
        s
    };
    let p = Project::new(&content(false));
    let mut w = Watch::start(&p, "interactive");
    for i in 0..200 {
        p.write("cadre.toml", &content(i % 2 == 1));
    }
    // The last write declares one more flag: its event comes after every
    // event of the burst (a reload reads the file as it is then, and the
    // file is final), so no quiet period has to be waited out.
    p.write(
        "cadre.toml",
        &format!(
            "{}BURST_OVER = true\n[flags.BURST_OVER]\ndescription = \"the burst is over\"\n\
             default = false\ngates = []\n",
            content(true)
        ),
    );
    // Follow FORK_SUBAGENT through the events up to that one.
    let fork = std::cell::Cell::new(false);
    w.until("the end of the burst", |v| {
        if let Some(f) = flag_change(v, "FORK_SUBAGENT") {
            fork.set(f["value"].as_bool().unwrap());
        }
        flag_change(v, "BURST_OVER").is_some()
    });
    assert!(
        fork.get(),
        "the last event's state is the file's final state"
    );
    let events = &w.seen;
    for e in events {
        let log = || std::fs::read_to_string(p.path().join("watch.log")).unwrap_or_default();
        assert_eq!(e["ok"], true, "a partial file was read: {e}\n{}", log());
        assert!(
            flag_change(e, "DISABLE_BACKGROUND_TASKS").is_none(),
            "a partial file was read: {e}\n{}",
            log()
        );
        assert!(e["diagnostics"].as_array().unwrap().is_empty(), "{e}");
    }
    assert!(
        events.len() < 200,
        "the burst was not debounced: {} events",
        events.len()
    );
    let gens: Vec<u64> = events
        .iter()
        .map(|e| e["generation"].as_u64().unwrap())
        .collect();
    assert!(
        gens.windows(2).all(|w| w[1] == w[0] + 1),
        "generations {gens:?}"
    );
    eprintln!("200 writes -> {} reload event(s)", events.len());
    assert_eq!(p.flag("FORK_SUBAGENT", "interactive"), (true, true));
    assert_eq!(
        p.flag("DISABLE_BACKGROUND_TASKS", "interactive"),
        (true, true)
    );
}

#[test]
fn sighup_forces_a_reload_and_sigterm_exits_cleanly() {
    use nix::sys::signal::{Signal, kill};
    let p = Project::new("");
    let mut w = Watch::start(&p, "non-interactive");
    kill(w.pid(), Signal::SIGHUP).unwrap();
    let e = w.next();
    assert_eq!(e["ok"], true, "{e}");
    assert_eq!(e["generation"], 2);
    assert!(e["flags_changed"].as_array().unwrap().is_empty());
    kill(w.pid(), Signal::SIGHUP).unwrap();
    assert_eq!(w.next()["generation"], 3);

    kill(w.pid(), Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(s) = w.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "cadre watch did not exit on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}

#[test]
fn unrelated_files_next_to_the_config_do_not_reload() {
    let p = Project::new("");
    let mut w = Watch::start(&p, "non-interactive");
    p.write("notes.txt", "not config");
    p.write("sub/other.toml", "x = 1");
    // A relevant change afterwards is the first event seen.
    p.write("cadre.toml", "[features]\nFORK_SUBAGENT = true\n");
    let e = w.next();
    assert!(flag_change(&e, "FORK_SUBAGENT").is_some(), "{e}");
    assert_eq!(e["generation"], 2);
}

#[test]
fn an_editor_save_by_rename_reloads() {
    let p = Project::new("[features]\nFORK_SUBAGENT = false\n");
    let mut w = Watch::start(&p, "interactive");
    // As vim and most editors save: a new file, then a rename over the old.
    p.write(".cadre.toml.swp", "[features]\nFORK_SUBAGENT = true\n");
    std::fs::rename(p.path().join(".cadre.toml.swp"), p.config()).unwrap();
    let e = w.next();
    assert_eq!(e["ok"], true, "{e}");
    assert_eq!(
        flag_change(&e, "FORK_SUBAGENT").unwrap()["value"],
        true,
        "{e}"
    );
    // And again: the watch survives the file being replaced.
    p.write(".cadre.toml.swp", "[features]\nFORK_SUBAGENT = false\n");
    std::fs::rename(p.path().join(".cadre.toml.swp"), p.config()).unwrap();
    let e = w.next();
    assert_eq!(
        flag_change(&e, "FORK_SUBAGENT").unwrap()["value"],
        false,
        "{e}"
    );
}

#[test]
fn agent_files_added_changed_and_removed() {
    let p = Project::new("[agents]\ndirs = [\"team\"]\n");
    let mut w = Watch::start(&p, "non-interactive");
    // `team` does not exist yet.
    p.write(
        "team/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews code\n---\nReview it.\n",
    );
    let e = w.until("agents_added", |v| !names(v, "agents_added").is_empty());
    assert_eq!(names(&e, "agents_added"), vec!["reviewer"]);
    p.write(
        "team/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews code well\n---\nReview it.\n",
    );
    let e = w.until("agents_changed", |v| !names(v, "agents_changed").is_empty());
    assert_eq!(names(&e, "agents_changed"), vec!["reviewer"]);
    p.write("team/broken.md", "---\nname: [\n---\n");
    let e = w.until("a diagnostic", |v| {
        !v["diagnostics"].as_array().unwrap().is_empty()
    });
    assert_eq!(e["ok"], true);
    std::fs::remove_file(p.path().join("team/reviewer.md")).unwrap();
    let e = w.until("agents_removed", |v| !names(v, "agents_removed").is_empty());
    assert_eq!(names(&e, "agents_removed"), vec!["reviewer"]);
    // `.claude/agents` in the working directory, created after start.
    p.write(
        ".claude/agents/late.md",
        "---\nname: late\ndescription: Came late\n---\nHi.\n",
    );
    let e = w.until("agents_added", |v| !names(v, "agents_added").is_empty());
    assert_eq!(names(&e, "agents_added"), vec!["late"]);
}

/// The Agent tool's input properties in a recorded request.
fn agent_properties(body: &Value) -> Value {
    let tools = body["tools"].as_array().expect("tools");
    let agent = tools
        .iter()
        .find(|t| t["name"] == "Agent")
        .expect("an Agent tool");
    agent["input_schema"]["properties"].clone()
}

/// Runs `cadre run` whose first model reply waits until `change` has been
/// made and the session's watcher logged a reload mentioning `marker`;
/// returns the two requests the session sent.
fn run_across_a_change(
    p: &Project,
    change: impl FnOnce(&Project),
    marker: &str,
) -> Vec<super::kit::RecordedRequest> {
    let reqs = run_across_a_change_with(p, cadre(), change, marker, |_| {
        anthropic::text_reply("done")
    });
    assert_eq!(reqs.len(), 2);
    reqs
}

/// [`run_across_a_change`] with the binary `bin`, answering every request
/// after the first with `later`; returns every request sent.
fn run_across_a_change_with(
    p: &Project,
    bin: Command,
    change: impl FnOnce(&Project),
    marker: &str,
    later: impl Fn(&super::kit::RecordedRequest) -> super::kit::Reply + Send + Sync + 'static,
) -> Vec<super::kit::RecordedRequest> {
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let g = Arc::clone(&gate);
    let server = FakeServer::route(move |req| {
        if req.index == 0 {
            let (open, cv) = &*g;
            let guard = open.lock().unwrap();
            let _unused = cv.wait_timeout_while(guard, WAIT * 2, |o| !*o).unwrap();
            anthropic::tool_use_reply("toolu_1", "Glob", json!({"pattern": "*.nothing"}))
        } else {
            later(req)
        }
    });
    let mut child = p
        .command_of(bin)
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", super::kit::TEST_KEY)
        .args([
            "-v",
            "run",
            "--session",
            "interactive",
            "--output-format",
            "json",
            "list files",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, lines) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });

    assert!(server.wait_for_requests(1, WAIT), "no first request");
    change(p);
    let deadline = Instant::now() + WAIT;
    let mut log = Vec::new();
    loop {
        match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) => {
                let done = l.contains("reloaded") && l.contains(marker);
                log.push(l);
                if done {
                    break;
                }
            }
            Err(_) => panic!("the session did not reload; stderr: {log:#?}"),
        }
    }
    {
        let (open, cv) = &*gate;
        *open.lock().unwrap() = true;
        cv.notify_all();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["is_error"], false, "{result}");
    server.assert_invariants();
    server.requests()
}

#[test]
fn a_running_session_sees_a_flag_flip_on_its_next_request() {
    let p = Project::new("[features]\nFORK_SUBAGENT = false\n");
    let reqs = run_across_a_change(
        &p,
        |p| {
            p.write("cadre.toml", "[features]\nFORK_SUBAGENT = true\n");
        },
        "FORK_SUBAGENT",
    );
    let first = agent_properties(&reqs[0].json);
    let second = agent_properties(&reqs[1].json);
    assert!(
        first.get("fork").is_none(),
        "the first request had `fork`: {first}"
    );
    assert!(
        second.get("fork").is_some(),
        "the second request lacks `fork`: {second}"
    );
}

/// The watches are placed one debounce after start; a change made before
/// that (here: while the first request waits, well inside a 1.5 s
/// debounce) is found by the catch-up check when they are placed.
#[test]
fn a_change_before_the_watches_are_placed_reaches_the_next_request() {
    let head = "[reload]\ndebounce_ms = 1500\n[features]\n";
    let p = Project::new(&format!("{head}FORK_SUBAGENT = false\n"));
    let reqs = run_across_a_change(
        &p,
        |p| {
            p.write("cadre.toml", &format!("{head}FORK_SUBAGENT = true\n"));
        },
        "FORK_SUBAGENT",
    );
    assert!(agent_properties(&reqs[0].json).get("fork").is_none());
    assert!(
        agent_properties(&reqs[1].json).get("fork").is_some(),
        "the second request lacks `fork`"
    );
}

/// A request body in prompt-cache order (tools, system, messages), each
/// part compact JSON: what a prompt cache can share between two requests.
fn cache_order(body: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    for part in ["tools", "system", "messages"] {
        out.extend(serde_json::to_vec(&body[part]).unwrap());
    }
    out
}

/// The share of `before`'s bytes (in cache order) that `after` starts with.
fn prefix_share(before: &Value, after: &Value) -> f64 {
    let (a, b) = (cache_order(before), cache_order(after));
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    common as f64 / a.len() as f64
}

/// A message with its `cache_control` markers removed (the breakpoint moves
/// to the newest message; the bytes before it stay).
fn without_cache_control(message: &Value) -> Value {
    let mut m = message.clone();
    for block in m["content"].as_array_mut().into_iter().flatten() {
        if let Some(o) = block.as_object_mut() {
            o.remove("cache_control");
        }
    }
    m
}

const LATECOMER: &str =
    "---\nname: latecomer\ndescription: Arrived while the session ran\n---\nLATE-BODY\n";

/// Every line of the main transcripts under a project.
fn main_transcript_lines(p: &Project) -> Vec<Value> {
    // The user's session folder of the project: the one folder under
    // `$HOME/.claude/projects`.
    let projects = p.path().join("home/.claude/projects");
    let mut folders = std::fs::read_dir(&projects).unwrap().flatten();
    let folder = folders.next().unwrap().path();
    assert!(folders.next().is_none(), "one project folder");
    std::fs::read_dir(folder)
        .unwrap()
        .flat_map(|d| {
            let t = d.unwrap().path();
            let main = t.extension().is_some_and(|e| e == "jsonl");
            std::fs::read_to_string(t)
                .ok()
                .filter(|_| main)
                .unwrap_or_default()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn an_agent_edit_mid_session_keeps_tools_and_system_and_is_announced() {
    let p = Project::new("");
    p.write(
        ".claude/agents/leaving.md",
        "---\nname: leaving\ndescription: Goes away mid-session\n---\nBye.\n",
    );
    let reqs = run_across_a_change_with(
        &p,
        cadre(),
        |p| {
            std::fs::remove_file(p.path().join(".claude/agents/leaving.md")).unwrap();
            p.write(".claude/agents/latecomer.md", LATECOMER);
        },
        "latecomer",
        |r| {
            if r.system_text().contains("LATE-BODY") {
                anthropic::text_reply("late report")
            } else if r.messages().len() == 3 {
                anthropic::tool_use_reply(
                    "toolu_2",
                    "Agent",
                    json!({"description": "late", "prompt": "go", "subagent_type": "latecomer"}),
                )
            } else {
                anthropic::text_reply("done")
            }
        },
    );
    let main: Vec<_> = reqs
        .iter()
        .filter(|r| !r.system_text().contains("LATE-BODY"))
        .collect();
    assert_eq!(main.len(), 3, "main requests");
    let (before, after) = (&main[0].json, &main[1].json);
    // The tools and the system prompt keep their bytes; so does the first
    // message (cache markers aside).
    assert_eq!(after["tools"], before["tools"]);
    assert_eq!(after["system"], before["system"]);
    assert_eq!(
        without_cache_control(&after["messages"][0]),
        without_cache_control(&before["messages"][0])
    );
    let share = prefix_share(before, after);
    assert!(share > 0.95, "prefix share {share}");
    // The change is announced in the request that follows it, and only the
    // change.
    let first = super::harness::listings(before);
    assert!(
        first.contains("- leaving: Goes away mid-session"),
        "{first}"
    );
    assert!(!first.contains("latecomer"), "{first}");
    let now = super::harness::listings(after);
    let delta = now.strip_prefix(first.as_str()).unwrap_or(&now);
    assert!(
        delta.contains("- latecomer: Arrived while the session ran (Tools: All tools)"),
        "{now}"
    );
    assert!(delta.contains("No longer available: leaving"), "{delta}");
    assert!(!delta.contains("- Explore:"), "only the change: {delta}");
    // The new agent can be started.
    let child = reqs
        .iter()
        .find(|r| r.system_text().contains("LATE-BODY"))
        .expect("the latecomer ran");
    assert!(super::harness::user_texts(child).contains("go"));
    let result = &super::harness::last_tool_results(&main[2].json)[0];
    assert_ne!(result["is_error"], true, "{result}");
    assert!(super::harness::result_text(result).contains("late report"));
    // Each listing told is in the transcript, so a resumed session does not
    // tell it again.
    let lines = main_transcript_lines(&p);
    let told: Vec<&Value> = lines.iter().filter(|l| l["type"] == "listing").collect();
    assert_eq!(told.len(), 2, "{told:#?}");
    assert!(
        told[1]["agents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["name"] == "latecomer")
    );
}

/// A change on disk mid-session whose kept prefix docs/benchmarks.md
/// reports ("Between turns: the prefix a change keeps").
struct PrefixScenario {
    label: &'static str,
    /// The project's `cadre.toml`.
    config: &'static str,
    change: fn(&Project),
    /// A word of the reload's log line.
    marker: &'static str,
    /// Text a request after the change carries and the first did not: the
    /// change reached the session.
    seen: &'static str,
}

/// The five changes of the benchmark table, in its order.
fn prefix_scenarios() -> [PrefixScenario; 5] {
    [
        PrefixScenario {
            label: "an agent file added",
            config: "",
            change: |p| p.write(".claude/agents/latecomer.md", LATECOMER),
            marker: "latecomer",
            seen: "- latecomer: Arrived while the session ran",
        },
        PrefixScenario {
            label: "an agent's description changed",
            config: "",
            change: |p| {
                p.write(
                    ".claude/agents/steady.md",
                    "---\nname: steady\ndescription: Reviews code, now more carefully\n---\nBody.\n",
                );
            },
            marker: "steady",
            seen: "- steady: Reviews code, now more carefully",
        },
        PrefixScenario {
            label: "an agent file removed",
            config: "",
            change: |p| std::fs::remove_file(p.path().join(".claude/agents/steady.md")).unwrap(),
            marker: "steady",
            seen: "No longer available: steady",
        },
        PrefixScenario {
            label: "a skill added",
            config: "",
            change: |p| {
                p.write(
                    ".claude/skills/pdf/SKILL.md",
                    "---\nname: pdf\ndescription: Fill in PDF forms\n---\nUse the form tools.\n",
                );
            },
            marker: "reloaded",
            seen: "- pdf: Fill in PDF forms",
        },
        PrefixScenario {
            label: "a template only sub-agents use changed",
            config: "[agents]\nbuiltin_dir = \"builtin\"\n",
            change: |p| {
                p.write(
                    "builtin/templates/subagent_notes.hbs",
                    "You are a sub-agent. Report back briefly.\n",
                );
            },
            marker: "subagent_notes",
            // In the system prompt of the sub-agent started after it.
            seen: "Report back briefly.",
        },
    ]
}

/// The project the prefix scenarios start from: one agent, one skill, an
/// empty templates folder.
fn prefix_project(config: &str) -> Project {
    let p = Project::new(config);
    p.write(
        ".claude/agents/steady.md",
        "---\nname: steady\ndescription: Reviews code\n---\nBody.\n",
    );
    p.write(
        ".claude/skills/notes/SKILL.md",
        "---\nname: notes\ndescription: Take notes\n---\nWrite them down.\n",
    );
    std::fs::create_dir_all(p.path().join("builtin/templates")).unwrap();
    p
}

/// Each change of the benchmark table keeps the previous request: the
/// request after it has the same tools and system prompt, and its
/// messages start with the previous request's messages (cache markers
/// aside, since the breakpoint moves to the newest message) — while the
/// change itself reaches the session (the listing, or the sub-agent's
/// prompt).
#[test]
fn every_change_in_the_benchmark_table_keeps_the_previous_request_as_prefix() {
    for PrefixScenario {
        label,
        config,
        change,
        marker,
        seen,
    } in prefix_scenarios()
    {
        let p = prefix_project(config);
        let reqs = run_across_a_change_with(&p, cadre(), change, marker, |r| {
            if !super::harness::has_main_prompt(r) {
                anthropic::text_reply("child done")
            } else if r.messages().len() == 3 {
                anthropic::tool_use_reply(
                    "toolu_2",
                    "Agent",
                    json!({"description": "check", "prompt": "go",
                           "subagent_type": "general-purpose"}),
                )
            } else {
                anthropic::text_reply("done")
            }
        });
        let main: Vec<_> = reqs
            .iter()
            .filter(|r| super::harness::has_main_prompt(r))
            .collect();
        assert_eq!(main.len(), 3, "{label}: main requests");
        let (before, after) = (&main[0].json, &main[1].json);
        assert_eq!(after["tools"], before["tools"], "{label}: tools");
        assert_eq!(after["system"], before["system"], "{label}: system");
        let kept: Vec<Value> = before["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(without_cache_control)
            .collect();
        let next: Vec<Value> = after["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(without_cache_control)
            .collect();
        assert!(
            next.len() > kept.len() && next[..kept.len()] == kept[..],
            "{label}: the next request does not start with the previous one's messages:\n\
             before: {kept:#?}\nafter: {next:#?}"
        );
        assert!(
            !reqs[0].body_str().contains(seen),
            "{label}: the first request already has {seen:?}"
        );
        assert!(
            reqs[1..].iter().any(|r| r.body_str().contains(seen)),
            "{label}: no request after the change has {seen:?}"
        );
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Benchmark, not a check: `cargo test --test all -- --ignored --nocapture
/// reload_benchmark`. Latency from a config write to the reload event
/// (printed after the swap), minus the debounce, over 200 edits; and the
/// time of `snapshot::build` with 1,000 agent files on disk.
#[test]
#[ignore = "benchmark; prints figures"]
fn reload_benchmark() {
    let p = Project::new("[features]\nFORK_SUBAGENT = false\n");
    let mut w = Watch::start_with(&p, "interactive", Command::new(bench_bin()));
    let debounce = w.ready["debounce_ms"].as_f64().unwrap();
    let mut lat = Vec::new();
    for i in 0..200 {
        let on = i % 2 == 0;
        let t0 = Instant::now();
        p.write("cadre.toml", &format!("[features]\nFORK_SUBAGENT = {on}\n"));
        w.until("the flip", |v| {
            flag_change(v, "FORK_SUBAGENT").is_some_and(|f| f["value"] == on)
        });
        lat.push(t0.elapsed().as_secs_f64() * 1000.0 - debounce);
        std::thread::sleep(Duration::from_millis(60));
    }
    let rebuild: Vec<f64> = w
        .seen
        .iter()
        .map(|e| e["duration_ms"].as_f64().unwrap())
        .collect();
    lat.sort_by(f64::total_cmp);
    let mut rb = rebuild.clone();
    rb.sort_by(f64::total_cmp);
    eprintln!(
        "latency above the {debounce} ms debounce over {} edits: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; rebuild+swap p50 {:.1} ms",
        lat.len(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat[lat.len() - 1],
        percentile(&rb, 0.5)
    );

    let agent_dir = p.path().join(".claude/agents");
    std::fs::create_dir_all(&agent_dir).unwrap();
    for i in 0..1000 {
        std::fs::write(
            agent_dir.join(format!("agent-{i:04}.md")),
            format!("---\nname: agent-{i:04}\ndescription: Agent number {i}, for the benchmark\ntools: Read, Grep\n---\nYou are agent {i}.\n"),
        )
        .unwrap();
    }
    // Forced reloads (SIGHUP) with the files present, timed by the binary.
    let before = w.seen.len();
    for _ in 0..30 {
        nix::sys::signal::kill(w.pid(), nix::sys::signal::Signal::SIGHUP).unwrap();
        w.next();
    }
    let mut rb: Vec<f64> = w.seen[before..]
        .iter()
        .map(|e| e["duration_ms"].as_f64().unwrap())
        .collect();
    rb.sort_by(f64::total_cmp);
    eprintln!(
        "rebuild+swap in `cadre watch` with 1000 agent files on disk: p50 {:.1} ms, max {:.1} ms",
        percentile(&rb, 0.5),
        rb[rb.len() - 1]
    );
    drop(w);
    let input = cadre::snapshot::SnapshotInput {
        load: cadre::config::LoadInput {
            cwd: p.path().to_path_buf(),
            config: Some(p.config()),
            env: Vec::new(),
            cli: Default::default(),
        },
        cli_agents: None,
        home: Some(p.path().join("home")),
    };
    let mut times = Vec::new();
    let mut agents = 0;
    for _ in 0..30 {
        let t0 = Instant::now();
        let snap = cadre::snapshot::build(&input, 1).unwrap();
        times.push(t0.elapsed().as_secs_f64() * 1000.0);
        agents = snap.catalog.agents.len();
    }
    times.sort_by(f64::total_cmp);
    eprintln!(
        "snapshot::build with 1000 agent files on disk ({agents} agents loaded): p50 {:.1} ms, min {:.1} ms, max {:.1} ms",
        percentile(&times, 0.5),
        times[0],
        times[times.len() - 1]
    );
}

/// Benchmark, not a check: `cargo test --test all -- --ignored --nocapture
/// reload_benchmark`. How much of the previous request's bytes (in
/// prompt-cache order: tools, system, messages) the next main request
/// starts with after each kind of change mid-session.
#[test]
#[ignore = "benchmark; prints figures"]
fn reload_benchmark_prefix_share() {
    for PrefixScenario {
        label,
        config,
        change,
        marker,
        ..
    } in prefix_scenarios()
    {
        let p = prefix_project(config);
        let reqs = run_across_a_change_with(&p, Command::new(bench_bin()), change, marker, |_| {
            anthropic::text_reply("done")
        });
        let (before, after) = (&reqs[0].json, &reqs[1].json);
        let yes = |same: bool| if same { "yes" } else { "no" };
        eprintln!(
            "prefix share after {label}: {:.1}% of {} B (tools unchanged: {}, system unchanged: {})",
            prefix_share(before, after) * 100.0,
            cache_order(before).len(),
            yes(before["tools"] == after["tools"]),
            yes(before["system"] == after["system"]),
        );
    }
}

#[test]
fn config_change_hooks_fire_at_the_first_turn_after_a_reload() {
    let p = Project::new("");
    let settings = |allow: &str| {
        json!({"permissions": {"allow": [allow]}, "hooks": {"ConfigChange": [
            {"matcher": "project_settings", "hooks": [{"type": "command", "command": "cat >> config-change.jsonl; echo >> config-change.jsonl"}]}
        ]}})
        .to_string()
    };
    p.write(".claude/settings.json", &settings("Read"));
    run_across_a_change(
        &p,
        |p| p.write(".claude/settings.json", &settings("Glob")),
        "settings changed",
    );
    let text = std::fs::read_to_string(p.path().join("config-change.jsonl")).unwrap();
    let seen: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(seen.len(), 1, "{text}");
    assert_eq!(seen[0]["hook_event_name"], "ConfigChange");
    assert_eq!(seen[0]["source"], "project_settings");
    assert!(
        seen[0]["file_path"]
            .as_str()
            .is_some_and(|f| f.ends_with(".claude/settings.json")),
        "{text}"
    );
}
