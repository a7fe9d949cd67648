//! `cadre ui` in a real browser: Debian's headless chromium, driven by
//! puppeteer-core (tests/suite/ui_browser.cjs; both installed by
//! scripts/test-deps-browser), watches a `cadre run` whose background
//! child waits in a Bash call until the test lets it end.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{Project, assistant_turns, is_main_session as is_main};
use super::kit::{FakeServer, anthropic};

/// The browser, or a panic that says how to get it.
fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("CADRE_CHROMIUM") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from("/usr/bin/chromium");
    assert!(
        p.exists(),
        "chromium is missing: run scripts/test-deps-browser (Debian: apt-get install chromium), \
         or set CADRE_CHROMIUM to a Chromium or Chrome binary"
    );
    p
}

/// The node_modules holding puppeteer-core.
fn browser_modules() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/browser/node_modules");
    assert!(
        p.join("puppeteer-core/package.json").exists(),
        "puppeteer-core is missing: run scripts/test-deps-browser (installs it into .ci/browser)"
    );
    p
}

/// A process killed when the test ends, passed or not.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `cadre ui --no-open` in the project; returns it with the
/// address it printed.
fn start_ui(p: &Project) -> (Killed, String) {
    let mut ui = Killed(
        p.command(None)
            .args(["ui", "--no-open"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(ui.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_string();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.contains("/?token="),
        "cadre ui prints its address with a token: {url:?}"
    );
    (ui, url)
}

/// tests/suite/ui_browser.cjs driving chromium on `url` in `mode`
/// (`tree` or `fleet`), talking to the test in lines.
struct Driver {
    process: Killed,
    to: std::process::ChildStdin,
    from: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Driver {
    fn start(url: &str, mode: &str) -> Driver {
        let (chromium, modules) = (chromium(), browser_modules());
        let mut process = Killed(
            Command::new("node")
                .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/suite/ui_browser.cjs"))
                .args([url, mode])
                .env("CADRE_BROWSER_MODULES", &modules)
                .env("CADRE_CHROMIUM", &chromium)
                .envs(std::env::var_os("CADRE_UI_SCREENSHOT").map(|v| ("CADRE_UI_SCREENSHOT", v)))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap(),
        );
        let to = process.0.stdin.take().unwrap();
        let from = BufReader::new(process.0.stdout.take().unwrap()).lines();
        Driver { process, to, from }
    }

    /// The next line, which must start with `word`; the JSON after it.
    fn expect(&mut self, word: &str) -> Value {
        let line = self
            .from
            .next()
            .unwrap_or_else(|| panic!("the browser driver ended before {word}"))
            .unwrap();
        let rest = line
            .strip_prefix(word)
            .unwrap_or_else(|| panic!("expected {word}, the browser driver said: {line}"));
        serde_json::from_str(rest.trim()).unwrap_or(Value::Null)
    }

    /// Lets the driver go on to its next step.
    fn go(&mut self) {
        writeln!(self.to, "go").unwrap();
    }

    fn done(mut self) {
        self.expect("DONE");
        assert!(self.process.0.wait().unwrap().success());
    }
}

/// The text of each cell of a row the driver sent.
fn cells(row: &Value) -> Vec<&str> {
    row["text"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect()
}

/// A raw HTTP/1 GET of `target` with `host` as the Host header: the
/// status and the body.
fn get(port: &str, host: &str, target: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

fn get_status(port: &str, host: &str, target: &str) -> u16 {
    get(port, host, target).0
}

/// The port and token of an address `cadre ui` printed.
fn port_and_token(url: &str) -> (String, String) {
    let port = url["http://127.0.0.1:".len()..]
        .split('/')
        .next()
        .unwrap()
        .to_string();
    (port, url.split("token=").nth(1).unwrap().to_string())
}

#[test]
fn the_web_view_shows_a_running_tree_live_in_a_browser_and_refuses_requests_without_the_token() {
    let p = Project::new();
    p.write(
        ".claude/settings.json",
        r#"{"permissions": {"allow": ["Bash"]}}"#,
    );
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_bg",
                    "Agent",
                    json!({"description": "wait for the release", "prompt": "wait", "name": "waiter", "run_in_background": true}),
                ),
                1 => anthropic::text_reply("launched; waiting"),
                _ => anthropic::text_reply("final: the waiter is done"),
            };
        }
        match assistant_turns(r) {
            // The child waits in a Bash call until the test lets it go.
            0 => anthropic::tool_use_reply(
                "toolu_wait",
                "Bash",
                json!({"command": "while [ ! -e release ]; do sleep 0.05; done; echo released", "description": "wait for the release file"}),
            ),
            _ => anthropic::text_reply("released"),
        }
    });
    let run = Killed(
        p.command(Some(&server))
            .args(["run", "go"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (_ui, url) = start_ui(&p);
    let (port, token) = port_and_token(&url);

    // The Host header is checked (DNS rebinding), and so is the token.
    let ok_target = format!("/api/sessions?token={token}");
    assert_eq!(
        get_status(&port, &format!("127.0.0.1:{port}"), &ok_target),
        200
    );
    assert_eq!(
        get_status(&port, &format!("localhost:{port}"), &ok_target),
        200
    );
    assert_eq!(
        get_status(&port, &format!("attacker.example:{port}"), &ok_target),
        403,
        "a page of another site whose name now points at 127.0.0.1 is refused"
    );
    assert_eq!(
        get_status(&port, &format!("127.0.0.1:{port}"), "/api/sessions"),
        403
    );
    assert_eq!(get_status(&port, &format!("127.0.0.1:{port}"), "/"), 403);

    let mut driver = Driver::start(&url, "tree");

    // The page shows the tree while the child runs: the main agent and
    // the named background child, in its Bash call.
    let rows = driver.expect("RUNNING");
    let rows = rows.as_array().unwrap();
    assert_eq!(rows[0]["agent"], "main", "{rows:?}");
    let child = &rows[1];
    assert_eq!(child["status"], "running", "{rows:?}");
    let cells = cells(child);
    assert!(cells[0].contains("waiter"), "its name: {cells:?}");
    assert!(cells[0].contains("background"), "{cells:?}");
    assert!(cells[0].contains("wait for the release"), "{cells:?}");
    assert_eq!(cells[2], "Bash", "its current tool: {cells:?}");
    assert_eq!(cells[3], "1", "one model response so far: {cells:?}");

    // Let the child end; the page follows without a reload.
    std::fs::write(p.path().join("release"), "").unwrap();
    driver.go();
    let rows = driver.expect("COMPLETED");
    let child = &rows.as_array().unwrap()[1];
    assert_eq!(child["status"], "completed", "{rows:?}");
    assert_eq!(
        child["text"][2], "",
        "no current tool once it ended: {rows:?}"
    );
    assert_eq!(child["text"][3], "2", "{rows:?}");
    let transcript = driver.expect("TRANSCRIPT");
    assert!(
        transcript.as_str().unwrap().contains("released"),
        "the child's transcript, its tool result included: {transcript}"
    );
    let refused = driver.expect("REFUSED");
    assert_eq!(
        refused,
        json!({"noToken": 403, "wrong": 403, "page": 403}),
        "no data and no page without the token"
    );
    driver.done();

    let mut run = run;
    let status = run.0.wait().unwrap();
    let (mut stdout, mut stderr) = (String::new(), String::new());
    run.0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    run.0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout.trim(), "final: the waiter is done");
}

/// A child on a fleet worker: the fleet table shows its task running with
/// the worker holding its lease and the lease's age, and the session's
/// tree shows the child in its Bash call (its transcript, written by the
/// worker into the shared session folder); both follow it to its end.
#[test]
fn the_web_view_shows_the_fleet_s_tasks_with_their_workers_and_lease_ages() {
    use super::distributed::{Worker, fleet_project};
    let nats = super::kit::nats::NatsServer::start();
    let p = fleet_project(
        &nats,
        "[permissions]\ndefault_mode = \"bypassPermissions\"",
        "",
    );
    let server = FakeServer::route(|r| {
        if r.system_text().contains(super::harness::MAIN_MARKER) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_bg",
                    "Agent",
                    json!({"description": "remote wait", "prompt": "wait", "subagent_type": "general-purpose", "run_in_background": true}),
                ),
                1 => anthropic::text_reply("launched"),
                _ => anthropic::text_reply("final: remote done"),
            };
        }
        match assistant_turns(r) {
            0 => anthropic::tool_use_reply(
                "toolu_wait",
                "Bash",
                json!({"command": "while [ ! -e release ]; do sleep 0.05; done", "description": "wait"}),
            ),
            _ => anthropic::text_reply("released"),
        }
    });
    let worker = Worker::start(&p, &server, "w1");
    worker.wait_pulling();
    let mut run = Killed(
        p.command(Some(&server))
            .args(["run", "go"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (_ui, url) = start_ui(&p);
    let (port, token) = port_and_token(&url);
    let host = format!("127.0.0.1:{port}");
    let fleet = || -> Value {
        let (status, body) = get(&port, &host, &format!("/api/fleet?token={token}"));
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    };
    let mut task = Value::Null;
    super::harness::wait_until(
        "the task running on the worker",
        Duration::from_secs(30),
        || {
            let f = fleet();
            assert_eq!(f["configured"], true, "{f}");
            task = f["tasks"][0].clone();
            task["status"] == "running" && task["lease_age_ms"].is_u64()
        },
    );
    assert!(
        task["owner"].as_str().is_some_and(|o| !o.is_empty()),
        "the worker holding the lease: {task}"
    );
    assert_eq!(task["description"], "remote wait");

    // The page draws the same: the task's row with its status, the worker
    // holding its lease, the lease's age, the session and description.
    let mut driver = Driver::start(&url, "fleet");
    let rows = driver.expect("FLEET_RUNNING");
    let row = &rows.as_array().unwrap()[0];
    assert_eq!(row["task"], task["agent_id"], "{rows:?}");
    assert_eq!(row["status"], "running", "{rows:?}");
    let drawn = cells(row);
    assert_eq!(drawn[0], task["agent_id"].as_str().unwrap(), "{drawn:?}");
    assert_eq!(drawn[1], "running", "{drawn:?}");
    assert_eq!(
        drawn[2],
        task["owner"].as_str().unwrap(),
        "the worker: {drawn:?}"
    );
    assert!(
        drawn[3].ends_with(" s") && drawn[3].trim_end_matches(" s").parse::<f64>().is_ok(),
        "the lease's age in seconds: {drawn:?}"
    );
    assert_eq!(drawn[4], task["attempt"].to_string(), "{drawn:?}");
    assert_eq!(drawn[5], task["session_id"].as_str().unwrap(), "{drawn:?}");
    assert_eq!(drawn[6], "remote wait", "{drawn:?}");
    let session = task["session_id"].as_str().unwrap().to_string();
    let tree_of = || -> Value {
        let (status, body) = get(
            &port,
            &host,
            &format!("/api/tree?token={token}&id={session}"),
        );
        assert_eq!(status, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    };
    super::harness::wait_until(
        "the child in its Bash call",
        Duration::from_secs(30),
        || {
            let child = &tree_of()["agents"][1];
            child["status"] == "running" && child["current_tools"] == json!(["Bash"])
        },
    );

    std::fs::write(p.path().join("release"), "").unwrap();
    driver.go();
    let rows = driver.expect("FLEET_COMPLETED");
    let drawn = cells(&rows.as_array().unwrap()[0]);
    assert_eq!(drawn[1], "completed", "{rows:?}");
    assert_eq!(drawn[3], "–", "no lease once it ended: {drawn:?}");
    driver.done();
    super::harness::wait_until("the task to end", Duration::from_secs(30), || {
        fleet()["tasks"][0]["status"] == "completed"
    });
    let t = &fleet()["tasks"][0];
    assert!(t["lease_age_ms"].is_null(), "no lease once ended: {t}");
    assert!(run.0.wait().unwrap().success());
    super::harness::wait_until("the session to end", Duration::from_secs(10), || {
        let tree = tree_of();
        tree["status"] == "ended" && tree["agents"][1]["status"] == "completed"
    });
}
