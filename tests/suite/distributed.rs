//! The worker fleet on NATS JetStream (docs/distributed.md), end to end:
//! a real nats-server per test (tests/suite/kit/nats.rs), the fake model
//! server, a parent `cadre run` with `[distributed] backend = "nats"` and
//! real `cadre worker` processes sharing the project folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::harness::{BASE_CONFIG, MAIN_MARKER, Project, user_texts, wait_until};
use super::kit::nats::NatsServer;
use super::kit::{FakeServer, RecordedRequest, Reply, anthropic};

/// A project whose background spawns go to `nats`: `extra` is more config
/// before the `[distributed]` table, `distributed` more keys inside it.
pub(super) fn fleet_project(nats: &NatsServer, extra: &str, distributed: &str) -> Project {
    let p = Project::new();
    p.write(
        "cadre.toml",
        &format!(
            "{}\n{extra}\n[distributed]\nbackend = \"nats\"\nurl = \"{}\"\n{distributed}",
            BASE_CONFIG.replace("idle_timeout_ms = 3000", "idle_timeout_ms = 120000"),
            nats.url()
        ),
    );
    p
}

/// A client of `nats`'s broker, with the default names, as cadre's own
/// processes connect.
async fn broker_of(nats: &NatsServer) -> cadre::fleet::Broker {
    let settings = cadre::config::DistributedSettings {
        url: nats.url(),
        ..Default::default()
    };
    cadre::fleet::Broker::connect(&settings).await.unwrap()
}

/// A `cadre worker` process, killed (SIGKILL, by PID) when dropped.
pub(super) struct Worker {
    child: Option<Child>,
    log: PathBuf,
}

impl Worker {
    pub(super) fn start(p: &Project, server: &FakeServer, name: &str) -> Worker {
        Worker::spawn(
            p.command(Some(server)),
            p.path().join(format!("{name}.log")),
        )
    }

    /// Runs `cmd` as `cadre worker`, its log written to `log`.
    fn spawn(mut cmd: std::process::Command, log: PathBuf) -> Worker {
        let child = cmd
            .args(["worker"])
            .env("CADRE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Worker {
            child: Some(child),
            log,
        }
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().map_or(0, |c| c.id() as i32)
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = c.wait();
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the worker has connected and pulls its pool.
    pub(super) fn wait_pulling(&self) {
        wait_until("the worker to pull", Duration::from_secs(30), || {
            self.log_text().contains("pulling pool")
        });
    }
}

/// Gives a worker's command a home of its own whose user settings hold the
/// `[distributed]` table for `nats_url` (and `extra`): a worker whose user
/// has not trusted the project folder finds them there. It keeps the
/// parent's session folder, which a worker shares.
fn worker_settings_outside_the_project(
    cmd: &mut std::process::Command,
    home: &Path,
    p: &Project,
    nats_url: &str,
    extra: &str,
) {
    let user = home.join(".config/cadre/cadre.toml");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    std::fs::write(
        &user,
        format!("[distributed]\nbackend = \"nats\"\nurl = \"{nats_url}\"\n{extra}"),
    )
    .unwrap();
    cmd.env("HOME", home);
    cmd.env("CLAUDE_CONFIG_DIR", p.home.path().join(".claude"));
}

/// A parent `cadre run` of the prompt `go`, its output discarded.
fn quiet_parent(p: &Project, server: &FakeServer) -> Child {
    p.command(Some(server))
        .args(["run", "--output-format", "stream-json", "go"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn logs(workers: &[Worker]) -> String {
    workers
        .iter()
        .map(Worker::log_text)
        .collect::<Vec<_>>()
        .join("\n-----\n")
}

/// Every `<task-id>ID</task-id>` in the user texts of a request.
fn notified_ids(r: &RecordedRequest) -> Vec<String> {
    let texts = user_texts(r);
    texts
        .split("<task-id>")
        .skip(1)
        .filter_map(|s| s.split("</task-id>").next())
        .map(str::to_string)
        .collect()
}

fn task_of(text: &str) -> Option<usize> {
    let at = text.find("fleet-task-")? + "fleet-task-".len();
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()
}

fn is_main(r: &RecordedRequest) -> bool {
    r.system_text().contains(MAIN_MARKER)
}

/// The parent's side of a fleet test: its first request starts one
/// background general-purpose child (in a worktree when `isolated`); a
/// task notification is answered "parent done", anything else "waiting".
fn background_parent(
    r: &RecordedRequest,
    description: &str,
    prompt: &str,
    isolated: bool,
) -> super::kit::Reply {
    if r.messages().iter().all(|m| m["role"] != "assistant") {
        let mut input = json!({"description": description, "prompt": prompt,
                               "subagent_type": "general-purpose", "run_in_background": true});
        if isolated {
            input["isolation"] = json!("worktree");
        }
        return anthropic::message()
            .tool_use("toolu_agent", "Agent", input)
            .reply();
    }
    if user_texts(r).contains("<task-notification>") {
        anthropic::text_reply("parent done")
    } else {
        anthropic::text_reply("waiting")
    }
}

/// `cadre tasks list --json`, by agent id.
fn task_states(p: &Project) -> BTreeMap<String, Value> {
    let run = p.run(None, &["tasks", "list", "--json"]);
    run.ok();
    run.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["agent_id"].as_str().unwrap().to_string(), r.clone()))
        .collect()
}

const SPAWNS: usize = 200;
const MAX_CONCURRENT: usize = 6;

#[test]
fn two_hundred_background_spawns_over_three_workers_notify_exactly_once() {
    let nats = NatsServer::start();
    let p = fleet_project(
        &nats,
        &format!("[agents]\nmax_concurrent = {MAX_CONCURRENT}\n"),
        "",
    );
    // Each child answers after a short delay; the arrival times of child
    // requests bound how many children were running at once from below.
    let delay = Duration::from_millis(30);
    let arrivals: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let seen = Arc::clone(&arrivals);
    let server = FakeServer::route(move |r| {
        if !is_main(r) {
            seen.lock().unwrap().push(Instant::now());
            let n = task_of(&r.last_user_text()).unwrap_or(usize::MAX);
            return anthropic::message()
                .text(&format!("answer-{n}"))
                .usage(20, 5)
                .reply()
                .delayed(delay);
        }
        fan_out_main(r, SPAWNS, "all children reported")
    });
    let workers: Vec<Worker> = (0..3)
        .map(|i| Worker::start(&p, &server, &format!("worker{i}")))
        .collect();
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "fan out"],
    );
    assert!(
        run.code == 0,
        "run failed: {}\n{}\nworkers:\n{}",
        run.stderr,
        run.stdout.lines().last().unwrap_or(""),
        logs(&workers)
    );
    let events = run.json_lines();
    assert_eq!(events.last().unwrap()["result"], "all children reported");

    // The conversation got exactly one notification per agent id.
    let last_main = server.requests().into_iter().rfind(is_main).unwrap();
    let ids = notified_ids(&last_main);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for id in &ids {
        *counts.entry(id.clone()).or_default() += 1;
    }
    assert_eq!(ids.len(), SPAWNS, "notifications in the conversation");
    assert_eq!(counts.len(), SPAWNS, "distinct agent ids notified");
    assert!(counts.values().all(|c| *c == 1), "{counts:?}");

    // Every child ran once (one model request each) and completed.
    let mut per_child: BTreeMap<usize, usize> = BTreeMap::new();
    for r in server.requests().iter().filter(|r| !is_main(r)) {
        *per_child
            .entry(task_of(&r.last_user_text()).unwrap())
            .or_default() += 1;
    }
    assert_eq!(per_child.len(), SPAWNS);
    assert!(per_child.values().all(|c| *c == 1), "{per_child:?}");
    let states = task_states(&p);
    assert_eq!(states.len(), SPAWNS);
    for (id, s) in &states {
        assert_eq!(s["status"], "completed", "{id}: {s}");
        assert_eq!(s["attempt"], 1, "{id}: {s}");
        assert!(
            counts.contains_key(id),
            "{id} in the bucket but not notified"
        );
    }

    // Never more than max_concurrent at once across the three workers: at
    // each arrival, the requests that arrived within the delay before it
    // were still unanswered, so their children were all running.
    let mut times = arrivals.lock().unwrap().clone();
    times.sort();
    let peak = (0..times.len())
        .map(|i| {
            times[..=i]
                .iter()
                .filter(|t| times[i].duration_since(**t) < delay)
                .count()
        })
        .max()
        .unwrap_or(0);
    let owners: std::collections::BTreeSet<&str> = states
        .values()
        .filter_map(|s| s["owner"].as_str())
        .collect();
    eprintln!(
        "peak child requests in flight: {peak}; workers used: {}",
        owners.len()
    );
    assert!(
        peak <= MAX_CONCURRENT,
        "{peak} children ran at once (max {MAX_CONCURRENT})"
    );
}

/// The messages of a request without cache breakpoints (which move).
fn messages_without_breakpoints(r: &RecordedRequest) -> Value {
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
    let mut m = r.json["messages"].clone();
    strip(&mut m);
    m
}

/// How the first worker is taken out while its child waits for a model
/// answer.
#[derive(Clone, Copy, PartialEq)]
enum Disruption {
    /// `kill -9`: the lease runs out, another worker resumes the task.
    Kill,
    /// SIGSTOP past the lease, then SIGCONT once another worker has
    /// finished the task: the stalled worker's late finish and ack must not
    /// count.
    Stall,
}

/// One background child that runs a Bash call (appending to a marker
/// file), then waits for its next model answer on worker A, which is
/// disrupted; worker B takes the task over after the lease.
fn takeover(disruption: Disruption) {
    let nats = NatsServer::start();
    let p = fleet_project(
        &nats,
        "[permissions]\ndefault_mode = \"bypassPermissions\"",
        "lease_ms = 1500\n",
    );
    let child_requests = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&child_requests);
    let (release, late) = tokio::sync::watch::channel(false);
    let server = FakeServer::route(move |r| {
        if !is_main(r) {
            return match seen.fetch_add(1, Ordering::SeqCst) {
                0 => anthropic::tool_use_reply(
                    "toolu_bash",
                    "Bash",
                    json!({"command": "echo ran >> marker.txt", "description": "mark"}),
                ),
                // Worker A's request: answered once A is gone (or, when A
                // was only stopped, once B has finished the task and A runs
                // again).
                1 => anthropic::text_reply("late answer from the first worker")
                    .held(late.clone(), Duration::from_secs(60)),
                _ => anthropic::text_reply("child done"),
            };
        }
        background_parent(r, "takeover", "Mark and report.", false)
    });
    let mut a = Worker::start(&p, &server, "workerA");
    let out = p.path().join("run.out");
    let mut parent = p
        .command(Some(&server))
        .args(["run", "--output-format", "stream-json", "go"])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(p.path().join("run.err")).unwrap())
        .spawn()
        .unwrap();
    wait_until(
        "the child's second request",
        Duration::from_secs(30),
        || child_requests.load(Ordering::SeqCst) >= 2,
    );
    assert_eq!(p.read("marker.txt"), "ran\n");
    let pid = nix::unistd::Pid::from_raw(a.pid());
    match disruption {
        Disruption::Kill => {
            a.kill9();
            let _ = release.send(true);
        }
        Disruption::Stall => {
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
        }
    }
    let b = Worker::start(&p, &server, "workerB");
    wait_until(
        "worker B's resumed request",
        Duration::from_secs(30),
        || child_requests.load(Ordering::SeqCst) >= 3,
    );
    if disruption == Disruption::Stall {
        // Let B finish (its notice published) before A wakes up.
        wait_until("the task to end", Duration::from_secs(30), || {
            task_states(&p).values().any(|s| s["status"] == "completed")
        });
        // A's late answer goes out while A is still stopped (a short pause
        // lets it reach A's socket), so it is ready when A wakes.
        let _ = release.send(true);
        std::thread::sleep(Duration::from_millis(500));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = parent.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the parent did not end:\n{}",
            logs(&[a, b])
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{}\n{}", p.read("run.err"), logs(&[a, b]));
    if disruption == Disruption::Stall {
        // A wakes up, sees its lease gone, and drops its run: give it the
        // time of its (late) model answer and a heartbeat.
        wait_until("worker A to drop its run", Duration::from_secs(20), || {
            a.log_text().contains("lease lost") || a.log_text().contains("finishing refused")
        });
    }
    let events: Vec<Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.last().unwrap()["result"], "parent done");

    // The Bash call ran once: B continued from the transcript.
    assert_eq!(p.read("marker.txt"), "ran\n");
    if disruption == Disruption::Stall {
        // A's late answer was ready when it woke. A logs either line
        // waited for above only once its child has ended (stopped after
        // the lost heartbeat, or finished and then refused), so A's run
        // writes nothing after it: what A wrote is there now.
        let lines = p.transcript_lines();
        assert!(
            !lines
                .iter()
                .any(|l| l.to_string().contains("late answer from the first worker")),
            "the stalled worker wrote to the transcript after losing its lease"
        );
    }
    let requests = server.requests();
    let child: Vec<&RecordedRequest> = requests.iter().filter(|r| !is_main(r)).collect();
    assert_eq!(
        messages_without_breakpoints(child[2]),
        messages_without_breakpoints(child[1]),
        "the resumed request continues the conversation as it was"
    );
    // One notification, for the one task.
    let last_main = requests.iter().rfind(|r| is_main(r)).unwrap();
    let ids = notified_ids(last_main);
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert!(user_texts(last_main).contains("child done"));
    let states = task_states(&p);
    let state = &states[&ids[0]];
    assert_eq!(state["status"], "completed", "{state}");
    assert_eq!(state["attempt"], 2, "{state}");
    let b_pid = format!("-{}-", b.pid());
    assert!(
        state["owner"].as_str().unwrap().contains(&b_pid),
        "finished by worker B: {state}"
    );

    // The notices stream holds one notice for the task, and refuses a
    // second one (a forged or repeated completion).
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let broker = broker_of(&nats).await;
        let session = state["session_id"].as_str().unwrap();
        let subject = broker.names.notice_subject(session, &ids[0]);
        let forged = json!({"agent_id": ids[0], "session_id": session, "status": "failed",
                            "total_tokens": 0, "tool_uses": 0, "duration_ms": 0,
                            "worker": "forger", "attempt": 9});
        let publish = broker
            .js
            .publish(subject.clone(), serde_json::to_vec(&forged).unwrap().into())
            .await;
        let refused = match publish {
            Ok(ack) => ack.await.is_err(),
            Err(_) => true,
        };
        assert!(refused, "a second notice for the task was accepted");
        let stream = broker
            .js
            .get_stream(&broker.names.notices_stream)
            .await
            .unwrap();
        let stored = stream
            .get_last_raw_message_by_subject(&subject)
            .await
            .unwrap();
        let stored: Value = serde_json::from_slice(&stored.payload).unwrap();
        assert_eq!(stored["status"], "completed");
        assert!(stored["worker"].as_str().unwrap().contains(&b_pid));
        let info = stream.get_info().await.unwrap();
        assert_eq!(info.state.messages, 1, "notices stored");
    });
}

#[test]
fn a_killed_worker_s_task_is_resumed_by_another_and_notifies_once() {
    takeover(Disruption::Kill);
}

#[test]
fn a_stalled_worker_s_late_finish_is_refused() {
    takeover(Disruption::Stall);
}

/// `n` background spawns of `fleet-task-I` from the first main request;
/// afterwards the main agent answers `done` once every notification is in
/// its conversation, else `waiting`.
fn fan_out_main(r: &RecordedRequest, n: usize, done: &str) -> super::kit::Reply {
    if r.messages().iter().all(|m| m["role"] != "assistant") {
        let mut m = anthropic::message().text("fanning out");
        for i in 0..n {
            m = m.tool_use(
                &format!("toolu_{i:04}"),
                "Agent",
                json!({
                    "description": format!("task {i}"),
                    "prompt": format!("Do fleet-task-{i} and report."),
                    "subagent_type": "general-purpose",
                    "run_in_background": true,
                }),
            );
        }
        return m.reply();
    }
    if user_texts(r).matches("<task-notification>").count() >= n {
        anthropic::text_reply(done)
    } else {
        anthropic::text_reply("waiting")
    }
}

/// The last main request's notifications: each of `n` agent ids once.
fn assert_each_notified_once(server: &FakeServer, n: usize) -> Vec<String> {
    let requests = server.requests();
    let last_main = requests.iter().rfind(|r| is_main(r)).unwrap();
    let mut ids = notified_ids(last_main);
    assert_eq!(ids.len(), n, "{ids:?}");
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "an agent id notified twice");
    ids
}

#[test]
fn a_broker_restart_mid_run_loses_and_doubles_nothing() {
    const N: usize = 12;
    let mut nats = NatsServer::start();
    let p = fleet_project(&nats, "[agents]\nmax_concurrent = 4", "lease_ms = 3000\n");
    let child_requests = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&child_requests);
    let server = FakeServer::route(move |r| {
        if !is_main(r) {
            seen.fetch_add(1, Ordering::SeqCst);
            let n = task_of(&r.last_user_text()).unwrap_or(usize::MAX);
            return anthropic::text_reply(&format!("answer-{n}"))
                .delayed(Duration::from_millis(400));
        }
        fan_out_main(r, N, "all reported")
    });
    let workers: Vec<Worker> = (0..2)
        .map(|i| Worker::start(&p, &server, &format!("worker{i}")))
        .collect();
    let mut parent = p
        .command(Some(&server))
        .args(["run", "--output-format", "stream-json", "go"])
        .stdout(std::fs::File::create(p.path().join("run.out")).unwrap())
        .stderr(std::fs::File::create(p.path().join("run.err")).unwrap())
        .spawn()
        .unwrap();
    wait_until("some children to run", Duration::from_secs(30), || {
        child_requests.load(Ordering::SeqCst) >= 3
    });
    nats.restart();
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = parent.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the parent did not end:\n{}\n{}",
            p.read("run.err"),
            logs(&workers)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "{}\n{}",
        p.read("run.err"),
        logs(&workers)
    );
    let ids = assert_each_notified_once(&server, N);
    let states = task_states(&p);
    assert_eq!(states.len(), N);
    for id in &ids {
        assert_eq!(states[id]["status"], "completed", "{}", states[id]);
    }
}

#[test]
fn a_resumed_parent_picks_up_the_notices_that_came_while_it_was_gone() {
    resumed_parent(false);
}

/// The same with a worker in its own clone and HOME (as `nobody` under
/// root): the children's transcripts, written while no parent ran, reach
/// the resumed parent's session folder through the broker.
#[test]
fn a_resumed_parent_gets_the_transcripts_of_a_shared_nothing_fleet() {
    resumed_parent(true);
}

fn resumed_parent(isolated: bool) {
    const N: usize = 3;
    let nats = NatsServer::start();
    let p = fleet_project(&nats, "", "");
    let (open, gate) = tokio::sync::watch::channel(false);
    let child_requests = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&child_requests);
    let server = FakeServer::route(move |r| {
        if !is_main(r) {
            seen.fetch_add(1, Ordering::SeqCst);
            let n = task_of(&r.last_user_text()).unwrap_or(usize::MAX);
            return anthropic::text_reply(&format!("answer-{n}"))
                .held(gate.clone(), Duration::from_secs(60));
        }
        fan_out_main(r, N, "resumed and reported")
    });
    let (workers, _kept) = if isolated {
        git_repo(&p);
        let (w, project, _) = isolated_worker(&p, &server, "worker0");
        ([w], Some(project))
    } else {
        ([Worker::start(&p, &server, "worker0")], None)
    };
    let mut parent = p
        .command(Some(&server))
        .args(["run", "go"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("every child to run", Duration::from_secs(30), || {
        child_requests.load(Ordering::SeqCst) >= N
    });
    // The parent waits for its children; it dies instead.
    wait_until("the parent to wait", Duration::from_secs(30), || {
        server.requests().iter().filter(|r| is_main(r)).count() >= 2
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(parent.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = parent.wait();
    // The children finish while no parent runs.
    let _ = open.send(true);
    wait_until("every task to end", Duration::from_secs(30), || {
        let s = task_states(&p);
        s.len() == N && s.values().all(|v| v["status"] == "completed")
    });
    let session = p.session_ids()[0].clone();
    let run = p.run(
        Some(&server),
        &[
            "run",
            "--resume",
            &session,
            "--output-format",
            "stream-json",
            "go on",
        ],
    );
    assert!(run.code == 0, "{}\n{}", run.stderr, logs(&workers));
    assert_eq!(
        run.json_lines().last().unwrap()["result"],
        "resumed and reported"
    );
    assert_each_notified_once(&server, N);
    // A second resume finds them in the conversation and adds none.
    let again = p.run(Some(&server), &["run", "--resume", &session, "once more"]);
    assert!(again.code == 0, "{}", again.stderr);
    assert_each_notified_once(&server, N);
    // Each child's whole transcript is in the parent's session folder.
    let transcripts = child_transcripts(&p);
    assert_eq!(transcripts.len(), N, "{:?}", transcripts.keys());
    for t in transcripts.values() {
        assert!(t.contains("\"answer-"), "{t}");
    }
}

#[test]
fn send_message_and_task_stop_reach_a_child_on_a_worker() {
    let nats = NatsServer::start();
    let p = fleet_project(
        &nats,
        "[permissions]\ndefault_mode = \"bypassPermissions\"",
        "",
    );
    // Two children: "talk" gets a message between its turns and answers
    // with it; "stop" waits on a long answer and is stopped.
    let server = FakeServer::route(move |r| {
        if !is_main(r) {
            let texts = user_texts(r);
            if texts.contains("child-stop") {
                return anthropic::text_reply("never").delayed(Duration::from_secs(60));
            }
            if r.messages().len() == 1 {
                return anthropic::tool_use_reply(
                    "toolu_sleep",
                    "Bash",
                    json!({"command": "sleep 1.5", "description": "wait"}),
                )
                .delayed(Duration::from_millis(300));
            }
            return if texts.contains("remote-hello") {
                anthropic::text_reply("child heard remote-hello")
            } else {
                anthropic::text_reply("child heard nothing")
            };
        }
        let texts = user_texts(r);
        let ids: Vec<String> = r
            .body_str()
            .split("agentId: ")
            .skip(1)
            .map(|s| s.chars().take(17).collect())
            .collect();
        match super::harness::assistant_turns(r) {
            0 => anthropic::message()
                .tool_use(
                    "toolu_talk",
                    "Agent",
                    json!({"description": "talk", "prompt": "child-talk: wait for a message.",
                           "subagent_type": "general-purpose", "run_in_background": true}),
                )
                .tool_use(
                    "toolu_stop",
                    "Agent",
                    json!({"description": "stop", "prompt": "child-stop: run long.",
                           "subagent_type": "general-purpose", "run_in_background": true}),
                )
                .reply(),
            1 => {
                assert_eq!(
                    ids.len(),
                    2,
                    "agent ids in the launch results: {}",
                    r.body_str()
                );
                anthropic::message()
                    .tool_use(
                        "toolu_send",
                        "SendMessage",
                        json!({"to": ids[0], "message": "remote-hello"}),
                    )
                    .tool_use("toolu_taskstop", "TaskStop", json!({"task_id": ids[1]}))
                    .reply()
            }
            _ if texts.matches("<task-notification>").count() >= 2 => {
                anthropic::text_reply("both ended")
            }
            _ => anthropic::text_reply("waiting"),
        }
    });
    let workers = [Worker::start(&p, &server, "worker0")];
    let t0 = Instant::now();
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "go"],
    );
    assert!(run.code == 0, "{}\n{}", run.stderr, logs(&workers));
    let events = run.json_lines();
    assert_eq!(events.last().unwrap()["result"], "both ended");
    // The remote child's Bash call reached the parent as a progress line.
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "subagent_progress" && e["last_tool"] == "Bash"),
        "no progress line from the worker"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(50),
        "the stopped child ran on"
    );
    let requests = server.requests();
    let last_main = requests.iter().rfind(|r| is_main(r)).unwrap();
    let texts = user_texts(last_main);
    assert!(texts.contains("child heard remote-hello"), "{texts}");
    assert!(texts.contains("killed"), "{texts}");
    let states = task_states(&p);
    let statuses: std::collections::BTreeSet<&str> = states
        .values()
        .filter_map(|s| s["status"].as_str())
        .collect();
    assert_eq!(
        statuses,
        ["completed", "killed"].into_iter().collect(),
        "{states:?}"
    );
}

#[test]
fn a_task_goes_only_to_workers_of_its_pool() {
    let nats = NatsServer::start();
    let p = fleet_project(&nats, "", "pool = \"gpu\"\n");
    let server = FakeServer::route(|r| {
        if !is_main(r) {
            return anthropic::text_reply("child done");
        }
        fan_out_main(r, 1, "pooled")
    });
    // A worker of the default pool, pulling before the task exists and
    // until it has ended: the task is never its.
    let pool_worker = |pool: &str| {
        let log = p.path().join(format!("{pool}.log"));
        let mut cmd = p.command(Some(&server));
        cmd.args(["worker", "--pool", pool])
            .env("CADRE_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let worker = Worker {
            log,
            child: Some(cmd.spawn().unwrap()),
        };
        wait_until("the worker to pull", Duration::from_secs(30), || {
            worker.log_text().contains(&format!("pulling pool {pool}"))
        });
        worker
    };
    let other = pool_worker("default");
    let mut parent = p
        .command(Some(&server))
        .args(["run", "--output-format", "stream-json", "go"])
        .stdout(std::fs::File::create(p.path().join("run.out")).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the task to be published", Duration::from_secs(30), || {
        task_states(&p).values().any(|s| s["pool"] == "gpu")
    });
    let gpu = pool_worker("gpu");
    let status = parent.wait().unwrap();
    assert!(status.success());
    let out = p.read("run.out");
    assert!(out.lines().last().unwrap().contains("pooled"), "{out}");
    // Both workers pulled while the task waited and ran; only the gpu one
    // took it, at its first attempt.
    let states = task_states(&p);
    assert_eq!(states.len(), 1, "{states:?}");
    let state = states.values().next().unwrap();
    assert_eq!(state["attempt"], 1, "{state}");
    assert!(
        state["owner"]
            .as_str()
            .is_some_and(|o| o.contains(&format!("-{}-", gpu.pid()))),
        "a worker of another pool ran the task: {state}"
    );
    assert!(
        !other.log_text().contains("attempt"),
        "a worker of another pool ran the task: {}",
        other.log_text()
    );
    // `tasks list --json`: one row per task, fields as documented (ids,
    // the worker's name and times redacted).
    let mut rows = p.run(None, &["tasks", "list", "--json"]).json();
    for row in rows.as_array_mut().unwrap() {
        for (key, value) in row.as_object_mut().unwrap() {
            if matches!(
                key.as_str(),
                "agent_id" | "session_id" | "owner" | "queued_at_ms" | "ended_at_ms"
            ) && !value.is_null()
            {
                *value = json!(format!("[{key}]"));
            }
        }
    }
    insta::assert_json_snapshot!("fleet_tasks_list", rows);
    let list = p.run(None, &["tasks", "list"]);
    list.ok();
    assert!(list.stdout.starts_with("ID "), "{}", list.stdout);
    assert!(list.stdout.contains(" completed "), "{}", list.stdout);
}

#[test]
fn a_worker_that_cannot_reach_its_server_says_so() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = Project::new();
    p.write(
        "cadre.toml",
        &format!(
            "{BASE_CONFIG}\n[distributed]\nurl = \"nats://127.0.0.1:{port}\"\nconnect_timeout_ms = 500\n"
        ),
    );
    let run = p.run(None, &["worker"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("NATS server nats://127.0.0.1:{port}")),
        "{}",
        run.stderr
    );
}

/// A named background child and a background fork send the same request
/// whether they run in the parent's process or on a worker: the plan and
/// the transcript rebuild the same session (fork request parts included,
/// byte for byte).
#[test]
fn a_child_on_a_worker_sends_what_it_would_send_locally() {
    let nats = NatsServer::start();
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if super::harness::is_fork_child(r) {
            return anthropic::text_reply("fork done");
        }
        if !is_main(r) {
            return anthropic::text_reply("named done");
        }
        if r.messages().iter().all(|m| m["role"] != "assistant") {
            return anthropic::message()
                .text("two children")
                .tool_use(
                    "toolu_named",
                    "Agent",
                    json!({"description": "named", "prompt": "Look around and report.",
                           "subagent_type": "general-purpose", "run_in_background": true}),
                )
                .tool_use(
                    "toolu_fork",
                    "Agent",
                    json!({"description": "forked", "prompt": "Check the other half.",
                           "fork": true, "run_in_background": true}),
                )
                .reply();
        }
        if user_texts(r).matches("<task-notification>").count() >= 2 {
            anthropic::text_reply("both reported")
        } else {
            anthropic::text_reply("waiting")
        }
    });
    let config = |fleet: bool| {
        let mut c = format!(
            "{}\n[features]\nFORK_SUBAGENT = true\n[flags.FORK_SUBAGENT]\ndescription = \"f\"\ngates = []\n",
            BASE_CONFIG.replace("idle_timeout_ms = 3000", "idle_timeout_ms = 120000")
        );
        if fleet {
            c.push_str(&format!(
                "[distributed]\nbackend = \"nats\"\nurl = \"{}\"\n",
                nats.url()
            ));
        }
        c
    };
    let mut bodies = Vec::new();
    for fleet in [false, true] {
        p.write("cadre.toml", &config(fleet));
        let _worker = fleet.then(|| Worker::start(&p, &server, "worker"));
        let before = server.requests().len();
        let run = p.run(
            Some(&server),
            &["run", "--output-format", "stream-json", "go"],
        );
        assert!(run.code == 0, "{}", run.stderr);
        assert_eq!(run.json_lines().last().unwrap()["result"], "both reported");
        let requests = server.requests();
        let fresh = &requests[before..];
        let named: Vec<&RecordedRequest> = fresh.iter().filter(|r| !is_main(r)).collect();
        let forks: Vec<&RecordedRequest> = fresh
            .iter()
            .filter(|r| super::harness::is_fork_child(r))
            .collect();
        assert_eq!((named.len(), forks.len()), (1, 1), "fleet: {fleet}");
        let strip = |r: &RecordedRequest| {
            let mut body = r.json.clone();
            fn drop_breakpoints(v: &mut Value) {
                match v {
                    Value::Object(m) => {
                        m.remove("cache_control");
                        m.values_mut().for_each(drop_breakpoints);
                    }
                    Value::Array(a) => a.iter_mut().for_each(drop_breakpoints),
                    _ => {}
                }
            }
            drop_breakpoints(&mut body);
            body
        };
        bodies.push((strip(named[0]), strip(forks[0])));
    }
    // The second run's two children ran on the worker.
    let states = task_states(&p);
    assert_eq!(states.len(), 2, "{states:?}");
    assert!(
        states
            .values()
            .all(|s| s["status"] == "completed" && s["owner"].is_string())
    );
    let (local, fleet) = (&bodies[0], &bodies[1]);
    assert_eq!(
        fleet.0, local.0,
        "the named child's request differs on a worker"
    );
    assert_eq!(fleet.1, local.1, "the fork's request differs on a worker");
}

#[test]
fn spawns_to_an_unreachable_broker_each_fail_with_one_notification() {
    const N: usize = 3;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = Project::new();
    p.write(
        "cadre.toml",
        &format!(
            "{BASE_CONFIG}\n[distributed]\nbackend = \"nats\"\nurl = \"nats://127.0.0.1:{port}\"\nconnect_timeout_ms = 500\n"
        ),
    );
    let server = FakeServer::route(|r| fan_out_main(r, N, "all failed"));
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "go"],
    );
    assert!(run.code == 0, "{}", run.stderr);
    assert_eq!(run.json_lines().last().unwrap()["result"], "all failed");
    assert_each_notified_once(&server, N);
    let requests = server.requests();
    let texts = user_texts(requests.iter().rfind(|r| is_main(r)).unwrap());
    // Each is told as a typed problem, not in the NATS client's words.
    assert_eq!(
        texts
            .matches(
                "could not be handed to the nats worker fleet: its server could not be reached."
            )
            .count(),
        N,
        "{texts}"
    );
    assert!(
        !texts.contains("NATS server") && !texts.contains("nats://"),
        "{texts}"
    );
    assert_eq!(
        texts.matches("<status>failed</status>").count(),
        N,
        "{texts}"
    );
}

/// A stopped worker (SIGTERM) hands its running task back at once: another
/// worker continues it long before the lease would have run out.
#[test]
fn a_stopped_worker_releases_its_task_to_another() {
    let nats = NatsServer::start();
    let p = fleet_project(&nats, "", "lease_ms = 60000\n");
    let child_requests = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&child_requests);
    let server = FakeServer::route(move |r| {
        if !is_main(r) {
            return if seen.fetch_add(1, Ordering::SeqCst) == 0 {
                anthropic::text_reply("never sent").delayed(Duration::from_secs(60))
            } else {
                anthropic::text_reply("child done")
            };
        }
        fan_out_main(r, 1, "released and done")
    });
    let a = Worker::start(&p, &server, "workerA");
    let mut parent = p
        .command(Some(&server))
        .args(["run", "--output-format", "stream-json", "go"])
        .stdout(std::fs::File::create(p.path().join("run.out")).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the child's first request", Duration::from_secs(30), || {
        child_requests.load(Ordering::SeqCst) >= 1
    });
    let t0 = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(a.pid()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let b = Worker::start(&p, &server, "workerB");
    let status = parent.wait().unwrap();
    let elapsed = t0.elapsed();
    let workers = [a, b];
    assert!(status.success(), "{}", logs(&workers));
    assert!(
        elapsed < Duration::from_secs(30),
        "the task waited for its lease to run out:\n{}",
        logs(&workers)
    );
    let [a, _b] = workers;
    assert!(p.read("run.out").contains("released and done"));
    assert_completed_on_second_attempt(&p);
    assert!(a.log_text().contains("released"), "{}", a.log_text());
}

/// Sends `signal` to `w` and waits (up to 20 s) for it to exit: its exit
/// code and how long that took.
fn stop_worker(w: &mut Worker, signal: nix::sys::signal::Signal) -> (Option<i32>, Duration) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(w.pid()), signal).unwrap();
    let t0 = Instant::now();
    let child = w.child.as_mut().unwrap();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return (s.code(), t0.elapsed());
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the worker ignored {signal}:\n{}",
            w.log_text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A worker stops when asked whatever the broker does: idle with the
/// server up (exit 0), idle with the server gone and the client
/// reconnecting (exit 0: nothing was held), and running a child with the
/// server gone (exit 1, saying the hand-back was not confirmed), for
/// SIGTERM and SIGINT alike. Before, a worker in its reconnect loop
/// ignored both.
#[test]
fn a_worker_stops_on_a_signal_even_with_its_broker_gone() {
    use nix::sys::signal::Signal::{SIGINT, SIGTERM};
    for signal in [SIGTERM, SIGINT] {
        // Idle, server up.
        let nats = NatsServer::start();
        let p = fleet_project(&nats, "", "");
        let server = FakeServer::route(|_| anthropic::text_reply("unused"));
        let mut w = Worker::start(&p, &server, "idle");
        w.wait_pulling();
        let (code, _) = stop_worker(&mut w, signal);
        assert_eq!(code, Some(0), "{}", w.log_text());

        // Idle, server gone.
        let mut w = Worker::start(&p, &server, "orphan");
        w.wait_pulling();
        let mut nats = nats;
        nats.kill();
        std::thread::sleep(Duration::from_millis(1500));
        let (code, _) = stop_worker(&mut w, signal);
        assert_eq!(code, Some(0), "{}", w.log_text());
    }

    // Running a child, server gone.
    let mut nats = NatsServer::start();
    let p = fleet_project(&nats, "", "lease_ms = 60000\n");
    let child_requests = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&child_requests);
    let server = FakeServer::route(move |r| {
        if !is_main(r) {
            seen.fetch_add(1, Ordering::SeqCst);
            return anthropic::text_reply("never sent").delayed(Duration::from_secs(60));
        }
        fan_out_main(r, 1, "unused")
    });
    let mut w = Worker::start(&p, &server, "busy");
    let mut parent = quiet_parent(&p, &server);
    wait_until("the child's first request", Duration::from_secs(30), || {
        child_requests.load(Ordering::SeqCst) >= 1
    });
    nats.kill();
    std::thread::sleep(Duration::from_millis(1500));
    let (code, _) = stop_worker(&mut w, SIGTERM);
    let _ = parent.kill();
    let _ = parent.wait();
    assert_eq!(code, Some(1), "{}", w.log_text());
    assert!(
        w.log_text()
            .contains("did not confirm the hand-back of 1 running task"),
        "{}",
        w.log_text()
    );
}

/// Failover time with default settings (docs/distributed.md): two idle
/// workers, one background child held by whichever takes it; that worker
/// is killed (-9) and the time until the other one's first request for
/// the task is printed. A benchmark, not a check: run with
/// `cargo nextest run --run-ignored only -E 'test(failover_time)' --no-capture`.
#[test]
#[ignore = "benchmark; prints figures"]
fn failover_time_from_kill_to_takeover() {
    let mut times = Vec::new();
    for _ in 0..5 {
        let nats = NatsServer::start();
        let p = fleet_project(&nats, "", "");
        let child_requests = Arc::new(Mutex::new(Vec::<Instant>::new()));
        let seen = Arc::clone(&child_requests);
        let server = FakeServer::route(move |r| {
            if !is_main(r) {
                let mut seen = seen.lock().unwrap();
                seen.push(Instant::now());
                return if seen.len() == 1 {
                    anthropic::text_reply("never sent").delayed(Duration::from_secs(120))
                } else {
                    anthropic::text_reply("child done")
                };
            }
            fan_out_main(r, 1, "moved and done")
        });
        let mut workers = vec![
            Worker::start(&p, &server, "workerA"),
            Worker::start(&p, &server, "workerB"),
        ];
        for w in &workers {
            w.wait_pulling();
        }
        let mut parent = quiet_parent(&p, &server);
        wait_until("the child's first request", Duration::from_secs(30), || {
            !child_requests.lock().unwrap().is_empty()
        });
        let owner = task_states(&p)
            .values()
            .next()
            .and_then(|t| t["owner"].as_str().map(str::to_string))
            .unwrap();
        let held = workers
            .iter()
            .position(|w| owner.contains(&format!("-{}-", w.pid())))
            .unwrap();
        let killed_at = Instant::now();
        workers[held].kill9();
        wait_until("the takeover", Duration::from_secs(120), || {
            child_requests.lock().unwrap().len() >= 2
        });
        let moved = child_requests.lock().unwrap()[1] - killed_at;
        times.push(moved.as_secs_f64());
        assert!(parent.wait().unwrap().success(), "{}", logs(&workers));
    }
    times.sort_by(f64::total_cmp);
    println!(
        "failover (kill -9 to the other worker's first request), default lease: min {:.2} s, median {:.2} s, max {:.2} s over {}",
        times[0],
        times[times.len() / 2],
        times[times.len() - 1],
        times.len()
    );
}

/// A project whose `.mcp.json` names the rmcp test server (tests/suite/
/// mcp.rs); each process that starts it has it write its pid to the file
/// its `MCP_PIDFILE` names. One background child asks for the server's
/// pid (`mcp__echo__pid`) if its first request offers the tool. Returns
/// the child's requests and what the parent and the worker wrote there
/// (`None`: the file does not exist).
fn project_server_on_a_worker(
    trusted_worker: bool,
) -> (Vec<RecordedRequest>, String, Option<String>) {
    let nats = NatsServer::start();
    let mut p = fleet_project(&nats, "[permissions]\nallow = [\"mcp__echo__*\"]\n", "");
    let (cmd, args) = super::mcp::server_command();
    p.write(
        ".mcp.json",
        &json!({"mcpServers": {"echo": {"command": cmd, "args": args,
            "env": {super::mcp::MODE_ENV: "echo", "CADRE_TEST_MCP_PIDFILE": "${MCP_PIDFILE}"}}}})
        .to_string(),
    );
    let server = FakeServer::route(|r| {
        if !is_main(r) {
            let offered = super::harness::tool_names(&r.json)
                .iter()
                .any(|n| n == "mcp__echo__pid");
            return match super::harness::assistant_turns(r) {
                0 if offered => anthropic::tool_use_reply("toolu_pid", "mcp__echo__pid", json!({})),
                0 => anthropic::text_reply("no project server here"),
                _ => anthropic::text_reply("asked the server"),
            };
        }
        fan_out_main(r, 1, "child reported")
    });
    let parent_pidfile = p.path().join("parent.pid");
    let worker_pidfile = p.path().join("worker.pid");
    // A worker whose user has not trusted the project folder finds its
    // `[distributed]` settings in its own user settings.
    let worker_home = tempfile::tempdir().unwrap();
    let mut worker_cmd = p.command(Some(&server));
    worker_cmd.env("MCP_PIDFILE", &worker_pidfile);
    if !trusted_worker {
        worker_settings_outside_the_project(
            &mut worker_cmd,
            worker_home.path(),
            &p,
            &nats.url(),
            "",
        );
    }
    let _worker = Worker::spawn(worker_cmd, p.path().join("worker.log"));
    p.env("MCP_PIDFILE", parent_pidfile.to_str().unwrap());
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "go"],
    );
    assert!(run.code == 0, "{}\n{}", run.stderr, _worker.log_text());
    assert_eq!(run.json_lines().last().unwrap()["result"], "child reported");
    let states = task_states(&p);
    assert_eq!(states.len(), 1, "the child ran on the worker: {states:?}");
    assert!(
        states
            .values()
            .all(|s| s["status"] == "completed" && s["owner"].is_string()),
        "the child ran on the worker: {states:?}"
    );
    let parent_pid = std::fs::read_to_string(&parent_pidfile).unwrap_or_default();
    assert!(
        !parent_pid.is_empty(),
        "the parent (trusted folder) starts the project's server"
    );
    let child = server
        .requests()
        .into_iter()
        .filter(|r| !is_main(r))
        .collect();
    (
        child,
        parent_pid,
        std::fs::read_to_string(&worker_pidfile).ok(),
    )
}

/// A project's `.mcp.json` server serves a child on a worker as it serves
/// a local child: started by the worker (its own, not the parent's), and
/// ready for the child's first request.
#[test]
fn a_child_on_a_worker_uses_the_project_s_mcp_servers() {
    let (child, parent_pid, worker_pid) = project_server_on_a_worker(true);
    assert_eq!(child.len(), 2, "the child called the server's tool");
    let worker_pid = worker_pid.expect("the worker started the server");
    let results = super::harness::last_tool_results(&child[1].json);
    assert_eq!(
        super::harness::result_text(&results[0]),
        worker_pid,
        "answered by the worker's server"
    );
    assert_ne!(worker_pid, parent_pid);
}

/// A worker whose user has not trusted the project folder starts none of
/// its `.mcp.json` servers (the parent's trust does not count there).
#[test]
fn an_untrusted_worker_folder_starts_no_project_mcp_server() {
    let (child, _, worker_pid) = project_server_on_a_worker(false);
    assert_eq!(child.len(), 1, "the child had no project tool to call");
    assert!(
        !super::harness::tool_names(&child[0].json)
            .iter()
            .any(|n| n.starts_with("mcp__")),
        "an MCP tool offered on an untrusted worker"
    );
    assert_eq!(worker_pid, None, "the untrusted worker started the server");
}

/// A worker stalled past its lease writes nothing when it wakes up, even
/// when the step it was in (a model answer) is ready at that moment: every
/// transcript line and meta write is fenced on the lease's deadline. Worker
/// A is stopped while its child waits for the model; B takes the task over
/// and finishes it; A's answer is sent while it is still stopped; A wakes.
#[test]
fn a_worker_stalled_past_its_lease_writes_nothing_after_it() {
    let nats = NatsServer::start();
    let p = fleet_project(&nats, "", "lease_ms = 1500\n");
    let (open, gate) = tokio::sync::watch::channel(false);
    let child_requests = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&child_requests);
    let server = FakeServer::route(move |r| {
        if !is_main(r) {
            return match seen.fetch_add(1, Ordering::SeqCst) {
                0 => anthropic::text_reply("late answer from the stalled worker")
                    .held(gate.clone(), Duration::from_secs(60)),
                _ => anthropic::text_reply("child done by the second worker"),
            };
        }
        fan_out_main(r, 1, "parent done")
    });
    let a = Worker::start(&p, &server, "workerA");
    let mut parent = p
        .command(Some(&server))
        .args(["run", "--output-format", "stream-json", "go"])
        .stdout(std::fs::File::create(p.path().join("run.out")).unwrap())
        .stderr(std::fs::File::create(p.path().join("run.err")).unwrap())
        .spawn()
        .unwrap();
    wait_until("worker A's request", Duration::from_secs(30), || {
        child_requests.load(Ordering::SeqCst) >= 1
    });
    let pid = nix::unistd::Pid::from_raw(a.pid());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let b = Worker::start(&p, &server, "workerB");
    wait_until(
        "worker B to finish the task",
        Duration::from_secs(60),
        || task_states(&p).values().any(|s| s["status"] == "completed"),
    );
    let result_lines = |p: &Project| {
        p.transcript_lines()
            .iter()
            .filter(|l| l["type"] == "result" && l["agent_id"] != l["parent_agent_id"])
            .count()
    };
    let before = p.transcript_lines().len();
    // A's answer goes out while A is stopped (a short pause lets it reach
    // A's socket; were it later, A must still write nothing).
    let _ = open.send(true);
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    wait_until("worker A to drop its run", Duration::from_secs(30), || {
        a.log_text().contains("lease lost") || a.log_text().contains("lease deadline passed")
    });
    let status = parent.wait().unwrap();
    let workers = [a, b];
    assert!(
        status.success(),
        "{}\n{}",
        p.read("run.err"),
        logs(&workers)
    );
    // Once A has dropped its run, nothing of it is in the transcript: no
    // late answer, no second result line.
    let lines = p.transcript_lines();
    assert!(
        !lines.iter().any(|l| l
            .to_string()
            .contains("late answer from the stalled worker")),
        "the stalled worker wrote to the transcript after its lease:\n{}",
        logs(&workers)
    );
    assert_eq!(result_lines(&p), 1, "one result line, the second worker's");
    assert!(lines.len() >= before);
    let ids = assert_each_notified_once(&server, 1);
    let states = task_states(&p);
    let state = &states[&ids[0]];
    assert_eq!(state["attempt"], 2, "{state}");
    assert!(
        state["owner"]
            .as_str()
            .unwrap()
            .contains(&format!("-{}-", workers[1].pid())),
        "{state}"
    );
    let requests = server.requests();
    let last_main = requests.iter().rfind(|r| is_main(r)).unwrap();
    assert!(user_texts(last_main).contains("child done by the second worker"));
}

/// Makes the fleet project a git repository with one commit.
fn git_repo(p: &Project) {
    use super::worktrees::git;
    p.write("README.md", "hello\n");
    let d = p.path();
    git(d, &["init", "-q", "-b", "main"]);
    git(d, &["config", "user.name", "Test"]);
    git(d, &["config", "user.email", "test@example.com"]);
    git(d, &["config", "commit.gpgsign", "false"]);
    git(d, &["add", "."]);
    git(d, &["commit", "-qm", "init"]);
}

/// The `<worktreePath>` of every notification in a request.
fn notified_worktrees(r: &RecordedRequest) -> Vec<String> {
    user_texts(r)
        .split("<worktreePath>")
        .skip(1)
        .filter_map(|s| s.split("</worktreePath>").next())
        .map(str::to_string)
        .collect()
}

/// The agent worktrees `git worktree list` knows of.
fn agent_worktrees(p: &Project) -> Vec<String> {
    super::worktrees::git(p.path(), &["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .filter(|w| w.contains(".cadre/worktrees/agent-"))
        .map(str::to_string)
        .collect()
}

/// Background children with `isolation: worktree` run on a worker, in a
/// worktree the worker made: one that changed a file keeps it (path and
/// branch in its notification), one that changed nothing leaves none.
#[test]
fn a_worktree_child_runs_on_a_worker_and_its_worktree_is_kept_or_removed() {
    let nats = NatsServer::start();
    let p = fleet_project(
        &nats,
        "[permissions]\ndefault_mode = \"bypassPermissions\"",
        "",
    );
    git_repo(&p);
    let server = FakeServer::route(|r| {
        if !is_main(r) {
            let texts = user_texts(r);
            if super::harness::assistant_turns(r) == 0 && texts.contains("child-write") {
                return anthropic::tool_use_reply(
                    "toolu_write",
                    "Bash",
                    json!({"command": "echo from-the-worker > new.txt && pwd", "description": "write"}),
                );
            }
            return anthropic::text_reply("child finished");
        }
        if super::harness::assistant_turns(r) == 0 {
            let mut m = anthropic::message().text("two isolated children");
            for (i, what) in ["child-write", "child-look"].iter().enumerate() {
                m = m.tool_use(
                    &format!("toolu_{i}"),
                    "Agent",
                    json!({"description": what, "prompt": format!("{what}: go."),
                           "subagent_type": "general-purpose", "run_in_background": true,
                           "isolation": "worktree"}),
                );
            }
            return m.reply();
        }
        if user_texts(r).matches("<task-notification>").count() >= 2 {
            anthropic::text_reply("both isolated children reported")
        } else {
            anthropic::text_reply("waiting")
        }
    });
    let workers = [Worker::start(&p, &server, "worker0")];
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "go"],
    );
    assert!(run.code == 0, "{}\n{}", run.stderr, logs(&workers));
    assert_eq!(
        run.json_lines().last().unwrap()["result"],
        "both isolated children reported"
    );
    let states = task_states(&p);
    assert_eq!(states.len(), 2);
    assert!(
        states
            .values()
            .all(|s| s["status"] == "completed" && s["owner"].is_string()),
        "both ran on the worker: {states:?}"
    );
    let requests = server.requests();
    let last_main = requests.iter().rfind(|r| is_main(r)).unwrap();
    let kept = notified_worktrees(last_main);
    assert_eq!(kept.len(), 1, "one kept worktree reported: {kept:?}");
    let root = p.path().canonicalize().unwrap().join(".cadre/worktrees");
    assert!(PathBuf::from(&kept[0]).starts_with(&root), "{kept:?}");
    assert!(user_texts(last_main).contains("<worktreeBranch>worktree-agent-"));
    assert_eq!(
        std::fs::read_to_string(PathBuf::from(&kept[0]).join("new.txt")).unwrap(),
        "from-the-worker\n"
    );
    assert!(
        !p.path().join("new.txt").exists(),
        "the main checkout is untouched"
    );
    // The Bash call ran in the worktree.
    let child_results: Vec<String> = requests
        .iter()
        .filter(|r| !is_main(r))
        .flat_map(|r| super::harness::last_tool_results(&r.json))
        .map(|b| super::harness::result_text(&b))
        .collect();
    assert!(
        child_results.iter().any(|t| t.trim() == kept[0]),
        "{child_results:?}"
    );
    // The unchanged one is gone, worktree and branch.
    assert_eq!(agent_worktrees(&p), kept);
    let branches = super::worktrees::git(p.path(), &["branch"]);
    assert_eq!(branches.matches("worktree-agent-").count(), 1, "{branches}");
}

/// With `shared_folder = true` (workers see the parent's repository), a
/// worker dies while its isolated child runs; the worker that takes the
/// task over continues in the same worktree (the file the first one's
/// Bash call wrote is there, and no second worktree is made).
#[test]
fn a_task_taken_over_continues_in_its_worktree() {
    let nats = NatsServer::start();
    let p = fleet_project(
        &nats,
        "[permissions]\ndefault_mode = \"bypassPermissions\"",
        "lease_ms = 1500\nshared_folder = true\n",
    );
    git_repo(&p);
    let child_requests = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&child_requests);
    let server = FakeServer::route(move |r| {
        if !is_main(r) {
            return match seen.fetch_add(1, Ordering::SeqCst) {
                0 => anthropic::tool_use_reply(
                    "toolu_bash",
                    "Bash",
                    json!({"command": "echo ran >> marker.txt", "description": "mark"}),
                ),
                1 => anthropic::text_reply("never sent").delayed(Duration::from_secs(60)),
                _ => anthropic::text_reply("child done"),
            };
        }
        background_parent(r, "isolated", "Mark and report.", true)
    });
    let mut a = Worker::start(&p, &server, "workerA");
    let mut parent = p
        .command(Some(&server))
        .args(["run", "--output-format", "stream-json", "go"])
        .stdout(std::fs::File::create(p.path().join("run.out")).unwrap())
        .stderr(std::fs::File::create(p.path().join("run.err")).unwrap())
        .spawn()
        .unwrap();
    wait_until(
        "the child's second request",
        Duration::from_secs(30),
        || child_requests.load(Ordering::SeqCst) >= 2,
    );
    let made = agent_worktrees(&p);
    assert_eq!(made.len(), 1, "{made:?}");
    a.kill9();
    let b = Worker::start(&p, &server, "workerB");
    let status = parent.wait().unwrap();
    assert!(status.success(), "{}\n{}", p.read("run.err"), logs(&[a, b]));
    assert!(p.read("run.out").contains("parent done"));
    // The same worktree, kept (it holds the marker), reported, and the
    // Bash call ran once.
    assert_eq!(agent_worktrees(&p), made);
    assert_eq!(
        std::fs::read_to_string(PathBuf::from(&made[0]).join("marker.txt")).unwrap(),
        "ran\n"
    );
    let requests = server.requests();
    let last_main = requests.iter().rfind(|r| is_main(r)).unwrap();
    assert_eq!(notified_worktrees(last_main), made);
    let child: Vec<&RecordedRequest> = requests.iter().filter(|r| !is_main(r)).collect();
    assert_eq!(child.len(), 3);
    assert_eq!(
        child[2].system_text(),
        child[1].system_text(),
        "the resumed child works where it worked"
    );
    assert_completed_on_second_attempt(&p);
}

/// SendMessage to a remote task that has ended resumes it where background
/// children run, on a worker, as a local one resumes in the background:
/// the child continues its conversation with the message, and its second
/// run notifies once more.
#[test]
fn send_message_to_an_ended_remote_task_resumes_it_on_a_worker() {
    let nats = NatsServer::start();
    let p = fleet_project(&nats, "", "");
    let server = FakeServer::route(follow_up_script("heard twice", None));
    let workers = [Worker::start(&p, &server, "worker0")];
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "go"],
    );
    assert!(run.code == 0, "{}\n{}", run.stderr, logs(&workers));
    assert_eq!(run.json_lines().last().unwrap()["result"], "heard twice");
    let requests = server.requests();
    let child: Vec<&RecordedRequest> = requests.iter().filter(|r| !is_main(r)).collect();
    assert_eq!(child.len(), 2, "one request per run");
    // The second run continues the first one's conversation.
    let second = child[1].body_str();
    assert!(second.contains("first answer") && second.contains("follow-up-question"));
    let last_main = requests.iter().rfind(|r| is_main(r)).unwrap();
    let ids = notified_ids(last_main);
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], ids[1], "both notifications are the one task's");
    let texts = user_texts(last_main);
    assert!(texts.contains("first answer") && texts.contains("second answer, to the follow-up"));
    // It ran on the worker both times: its state is the worker's end of
    // run 1.
    let states = task_states(&p);
    let state = &states[&ids[0]];
    assert_eq!(state["status"], "completed", "{state}");
    assert_eq!(state["run"], 1, "{state}");
    assert!(
        state["owner"]
            .as_str()
            .unwrap()
            .contains(&format!("-{}-", workers[0].pid())),
        "{state}"
    );
}

/// The model of the SendMessage tests: main starts one background
/// general-purpose child; after its first notice main sends it
/// "follow-up-question" (the child's second answer held on `gate` when
/// given); after the second notice main answers `done`. The child answers
/// "first answer", then "second answer, to the follow-up".
fn follow_up_script(
    done: &'static str,
    gate: Option<tokio::sync::watch::Receiver<bool>>,
) -> impl Fn(&RecordedRequest) -> Reply + Send + Sync + 'static {
    move |r| {
        if !is_main(r) {
            return if r.last_user_text().contains("follow-up-question") {
                let reply = anthropic::text_reply("second answer, to the follow-up");
                match &gate {
                    Some(g) => reply.held(g.clone(), Duration::from_secs(60)),
                    None => reply,
                }
            } else {
                anthropic::text_reply("first answer")
            };
        }
        let notices = user_texts(r).matches("<task-notification>").count();
        if super::harness::assistant_turns(r) == 0 {
            return anthropic::message()
                .tool_use(
                    "toolu_agent",
                    "Agent",
                    json!({"description": "talk", "prompt": "Answer, then wait.",
                           "subagent_type": "general-purpose", "run_in_background": true}),
                )
                .reply();
        }
        if notices >= 2 {
            return anthropic::text_reply(done);
        }
        if notices == 1 && !r.body_str().contains("toolu_send") {
            let id: String = r
                .body_str()
                .split("agentId: ")
                .nth(1)
                .unwrap()
                .chars()
                .take(17)
                .collect();
            return anthropic::tool_use_reply(
                "toolu_send",
                "SendMessage",
                json!({"to": id, "message": "follow-up-question"}),
            );
        }
        anthropic::text_reply("waiting")
    }
}

/// A parent killed while a run that SendMessage resumed is on a worker:
/// `--resume` waits for that run's notice (not the first run's, which is
/// in the conversation already) and delivers it once.
#[test]
fn a_resumed_parent_waits_for_the_run_send_message_started() {
    let nats = NatsServer::start();
    let p = fleet_project(&nats, "", "");
    let (open, gate) = tokio::sync::watch::channel(false);
    let server = FakeServer::route(follow_up_script("heard twice after a resume", Some(gate)));
    let workers = [Worker::start(&p, &server, "worker0")];
    let mut parent = p
        .command(Some(&server))
        .args(["run", "go"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The second run is on the worker (its request held) and the parent
    // waits for it: the parent dies.
    wait_until("the second run's request", Duration::from_secs(30), || {
        server
            .requests()
            .iter()
            .any(|r| !is_main(r) && r.last_user_text().contains("follow-up-question"))
    });
    wait_until("the parent to wait", Duration::from_secs(30), || {
        server.requests().iter().any(|r| {
            is_main(r)
                && r.body_str().contains("toolu_send")
                && super::harness::assistant_turns(r) >= 3
        })
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(parent.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = parent.wait();
    let _ = open.send(true);
    wait_until("the second run to end", Duration::from_secs(30), || {
        task_states(&p)
            .values()
            .any(|s| s["run"] == 1 && s["status"] == "completed")
    });
    let session = p.session_ids()[0].clone();
    let run = p.run(
        Some(&server),
        &[
            "run",
            "--resume",
            &session,
            "--output-format",
            "stream-json",
            "go on",
        ],
    );
    assert!(run.code == 0, "{}\n{}", run.stderr, logs(&workers));
    assert_eq!(
        run.json_lines().last().unwrap()["result"],
        "heard twice after a resume"
    );
    let requests = server.requests();
    let last_main = requests.iter().rfind(|r| is_main(r)).unwrap();
    let ids = notified_ids(last_main);
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(user_texts(last_main).contains("second answer, to the follow-up"));
}

/// A background fork with `isolation: worktree` on a worker sends what it
/// would send locally: the inherited conversation, its directive, and the
/// worktree notice after it (only the worktree's name differs, since it
/// carries the agent id).
#[test]
fn an_isolated_fork_on_a_worker_gets_the_worktree_notice_as_locally() {
    let nats = NatsServer::start();
    let p = Project::new();
    git_repo(&p);
    let server = FakeServer::route(|r| {
        if super::harness::is_fork_child(r) {
            return anthropic::text_reply("fork done");
        }
        if r.messages().iter().all(|m| m["role"] != "assistant") {
            return anthropic::message()
                .text("one isolated fork")
                .tool_use(
                    "toolu_fork",
                    "Agent",
                    json!({"description": "forked", "prompt": "Check it in isolation.",
                           "fork": true, "run_in_background": true, "isolation": "worktree"}),
                )
                .reply();
        }
        if user_texts(r).contains("<task-notification>") {
            anthropic::text_reply("fork reported")
        } else {
            anthropic::text_reply("waiting")
        }
    });
    let config = |fleet: bool| {
        let mut c = format!(
            "{}\n[features]\nFORK_SUBAGENT = true\n[flags.FORK_SUBAGENT]\ndescription = \"f\"\ngates = []\n",
            BASE_CONFIG.replace("idle_timeout_ms = 3000", "idle_timeout_ms = 120000")
        );
        if fleet {
            c.push_str(&format!(
                "[distributed]\nbackend = \"nats\"\nurl = \"{}\"\n",
                nats.url()
            ));
        }
        c
    };
    let mut forks = Vec::new();
    for fleet in [false, true] {
        p.write("cadre.toml", &config(fleet));
        let _worker = fleet.then(|| Worker::start(&p, &server, "worker"));
        let before = server.requests().len();
        let run = p.run(
            Some(&server),
            &["run", "--output-format", "stream-json", "go"],
        );
        assert!(run.code == 0, "{}", run.stderr);
        assert_eq!(run.json_lines().last().unwrap()["result"], "fork reported");
        let fork = server.requests()[before..]
            .iter()
            .find(|r| super::harness::is_fork_child(r))
            .cloned()
            .unwrap();
        forks.push(fork);
    }
    // The fleet lists the second run's fork (the first ran here, outside
    // it), taken and finished by the worker.
    let states = task_states(&p);
    assert_eq!(
        states.len(),
        1,
        "the second fork ran on the worker: {states:?}"
    );
    assert!(
        states
            .values()
            .all(|s| s["status"] == "completed" && s["owner"].is_string()),
        "the second fork ran on the worker: {states:?}"
    );
    // The worktrees' names, `agent-ID8`, are the only difference.
    let normal = |r: &RecordedRequest| {
        let mut body = r.json["messages"].clone();
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
        strip(&mut body);
        let text = body.to_string();
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("worktrees/agent-") {
            let (head, tail) = rest.split_at(at + "worktrees/agent-".len());
            out.push_str(head);
            out.push_str("ID8");
            rest = &tail[8.min(tail.len())..];
        }
        out.push_str(rest);
        out
    };
    let (local, remote) = (normal(&forks[0]), normal(&forks[1]));
    assert!(
        remote.contains("You are working in an isolated git worktree at"),
        "{remote}"
    );
    assert_eq!(remote, local, "the fork's messages differ on a worker");
}

/// A worker that shares nothing with the parent: its own clone of the
/// parent's repository (made here, as root would make it for a container)
/// in its own folder, with its own HOME (its own session folder); run as
/// `nobody` through setpriv when the suite runs as root (CI), so that it
/// cannot read the parent's folders at all. Returns the worker, its
/// project (kept alive) and its clone.
fn isolated_worker(p: &Project, server: &FakeServer, name: &str) -> (Worker, Project, PathBuf) {
    use super::worktrees::git;
    let w = Project::new();
    let clone = w.path().join("clone");
    git(
        w.path(),
        &[
            "clone",
            "-q",
            p.path().to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    let log = w.home.path().join(format!("{name}.log"));
    let stderr = std::fs::File::create(&log).unwrap();
    let base = w.command(Some(server));
    let as_nobody =
        nix::unistd::geteuid().is_root() && std::path::Path::new("/usr/bin/setpriv").exists();
    let mut cmd = if as_nobody {
        // The parent's folders are its user's own.
        use std::os::unix::fs::PermissionsExt;
        for dir in [p.path(), p.home.path()] {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        for dir in [w.path(), w.home.path()] {
            let ok = std::process::Command::new("chown")
                .args(["-R", "65534:65534"])
                .arg(dir)
                .status()
                .unwrap();
            assert!(ok.success());
        }
        // The parent's folders are closed to it.
        let peek = std::process::Command::new("/usr/bin/setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "ls"])
            .arg(p.path())
            .output()
            .unwrap();
        assert!(
            !peek.status.success(),
            "nobody can read the parent's folder {}: {peek:?}",
            p.path().display()
        );
        let mut c = std::process::Command::new("/usr/bin/setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_cadre"));
        c
    } else {
        std::process::Command::new(env!("CARGO_BIN_EXE_cadre"))
    };
    cmd.arg("worker").current_dir(&clone).env_clear();
    for (k, v) in base.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    let child = cmd
        .env("CADRE_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let worker = Worker {
        child: Some(child),
        log,
    };
    (worker, w, clone)
}

/// The parent's copy of each child's transcript (`agent-ID.jsonl` in its
/// own session folder), by agent id.
fn child_transcripts(p: &Project) -> BTreeMap<String, String> {
    p.written_files()
        .into_iter()
        .filter_map(|(path, text)| {
            let name = path.file_name()?.to_str()?;
            let id = name.strip_prefix("agent-")?.strip_suffix(".jsonl")?;
            Some((id.to_string(), text))
        })
        .collect()
}

/// The shared-nothing fleet (the default): two workers, each in its own
/// clone and HOME (as `nobody` under root), a parent with uncommitted
/// changes spawning ten background children, a worktree child and a slow
/// child. The slow child's worker is killed with SIGKILL mid-task and the
/// broker restarted while no worker holds it; the other worker continues
/// it from the broker's copy of its transcript (its Bash call not run
/// again). Every child notifies once, the parent's session folder holds
/// every child's whole transcript, and the worktree child's change comes
/// back as a branch of the parent's repository, started from the parent's
/// uncommitted state.
#[test]
fn a_fleet_that_shares_nothing_but_the_broker_runs_and_survives_a_kill_and_a_restart() {
    const N: usize = 10;
    let mut nats = NatsServer::start();
    let p = fleet_project(
        &nats,
        "[permissions]\ndefault_mode = \"bypassPermissions\"",
        "lease_ms = 1500\n",
    );
    git_repo(&p);
    // Uncommitted: a tracked file changed and an untracked one.
    p.write("README.md", "hello, edited\n");
    p.write("draft.txt", "the parent's draft\n");
    let slow_requests = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&slow_requests);
    let wt_answers = Arc::new(AtomicUsize::new(0));
    let wt_seen = Arc::clone(&wt_answers);
    let (release, late) = tokio::sync::watch::channel(false);
    let server = FakeServer::route(move |r| {
        if !is_main(r) {
            let first = r.messages()[0].to_string();
            let turns = super::harness::assistant_turns(r);
            if first.contains("slow-child") {
                return match seen.fetch_add(1, Ordering::SeqCst) {
                    0 => anthropic::tool_use_reply(
                        "toolu_mark",
                        "Bash",
                        json!({"command": "echo ran >> marker.txt && echo marked", "description": "mark"}),
                    ),
                    1 => anthropic::text_reply("late answer")
                        .held(late.clone(), Duration::from_secs(60)),
                    _ => anthropic::text_reply("slow child done"),
                };
            }
            if first.contains("wt-child") {
                return if turns == 0 {
                    anthropic::tool_use_reply(
                        "toolu_wt",
                        "Bash",
                        json!({"command": "cat draft.txt README.md && echo from-the-worker > made.txt", "description": "edit"}),
                    )
                } else {
                    wt_seen.fetch_add(1, Ordering::SeqCst);
                    anthropic::text_reply("worktree child done")
                };
            }
            let n = task_of(&first).unwrap_or(usize::MAX);
            return anthropic::text_reply(&format!("answer-{n}"));
        }
        if super::harness::assistant_turns(r) == 0 {
            let mut m = anthropic::message().text("fanning out");
            for i in 0..N {
                m = m.tool_use(
                    &format!("toolu_{i:04}"),
                    "Agent",
                    json!({"description": format!("task {i}"),
                           "prompt": format!("Do fleet-task-{i} and report."),
                           "subagent_type": "general-purpose", "run_in_background": true}),
                );
            }
            m = m
                .tool_use(
                    "toolu_wt",
                    "Agent",
                    json!({"description": "isolated", "prompt": "wt-child: edit.",
                           "subagent_type": "general-purpose", "run_in_background": true,
                           "isolation": "worktree"}),
                )
                .tool_use(
                    "toolu_slow",
                    "Agent",
                    json!({"description": "slow", "prompt": "slow-child: mark and report.",
                           "subagent_type": "general-purpose", "run_in_background": true}),
                );
            return m.reply();
        }
        if user_texts(r).matches("<task-notification>").count() >= N + 2 {
            anthropic::text_reply("parent done")
        } else {
            anthropic::text_reply("waiting")
        }
    });
    let (a, _wa, clone_a) = isolated_worker(&p, &server, "workerA");
    let (b, _wb, clone_b) = isolated_worker(&p, &server, "workerB");
    let mut workers = vec![a, b];
    for w in &workers {
        w.wait_pulling();
    }
    let mut parent = p
        .command(Some(&server))
        .args(["run", "--output-format", "stream-json", "go"])
        .stdout(std::fs::File::create(p.home.path().join("run.out")).unwrap())
        .stderr(std::fs::File::create(p.home.path().join("run.err")).unwrap())
        .spawn()
        .unwrap();
    // The worktree child may run on the worker killed below: its Bash
    // call's result (so its worktree's state) is on the broker once its
    // second request went out, and a takeover continues from both. Killed
    // between its Bash call and that, it would start again without the
    // file (the call recorded as cancelled, the model answering "done").
    wait_until(
        "the slow child's and the worktree child's second requests",
        Duration::from_secs(60),
        || slow_requests.load(Ordering::SeqCst) >= 2 && wt_answers.load(Ordering::SeqCst) >= 1,
    );
    // Kill the worker holding the slow child, then restart the broker.
    let (holder, other) = if std::fs::read_to_string(clone_a.join("marker.txt")).is_ok() {
        (0, 1)
    } else {
        assert!(clone_b.join("marker.txt").exists(), "{}", logs(&workers));
        (1, 0)
    };
    workers[holder].kill9();
    let _ = release.send(true);
    nats.restart();
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = parent.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the parent did not end:\n{}\n{}",
            std::fs::read_to_string(p.home.path().join("run.err")).unwrap_or_default(),
            logs(&workers)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = std::fs::read_to_string(p.home.path().join("run.err")).unwrap_or_default();
    assert!(status.success(), "{err}\n{}", logs(&workers));
    let ids = assert_each_notified_once(&server, N + 2);

    // The slow child: taken over by the other worker from the broker's
    // copy; its Bash call ran once, and the resumed request continues the
    // conversation as it was.
    let clones = [&clone_a, &clone_b];
    assert_eq!(
        std::fs::read_to_string(clones[holder].join("marker.txt")).unwrap(),
        "ran\n"
    );
    assert!(
        !clones[other].join("marker.txt").exists(),
        "the Bash call ran again"
    );
    let requests = server.requests();
    let slow: Vec<&RecordedRequest> = requests
        .iter()
        .filter(|r| !is_main(r) && r.messages()[0].to_string().contains("slow-child"))
        .collect();
    assert_eq!(slow.len(), 3);
    assert_eq!(
        messages_without_breakpoints(slow[2]),
        messages_without_breakpoints(slow[1])
    );
    let states = task_states(&p);
    let slow_state = states
        .values()
        .find(|s| s["description"] == "slow")
        .unwrap();
    assert_eq!(slow_state["attempt"], 2, "{slow_state}");
    assert!(
        slow_state["owner"]
            .as_str()
            .unwrap()
            .contains(&format!("-{}-", workers[other].pid())),
        "{slow_state}"
    );

    // The parent's session folder holds every child's whole transcript:
    // its first lines (written here) and the worker's (through the broker).
    let transcripts = child_transcripts(&p);
    for id in &ids {
        let t = transcripts
            .get(id)
            .unwrap_or_else(|| panic!("no transcript for {id}: {:?}", transcripts.keys()));
        assert!(
            t.contains("answer-") || t.contains("child done"),
            "{id}: {t}\n{err}\n{}",
            logs(&workers)
        );
        for line in t.lines() {
            serde_json::from_str::<Value>(line).unwrap();
        }
    }
    let slow_t = transcripts
        .values()
        .find(|t| t.contains("slow-child"))
        .unwrap();
    assert_eq!(slow_t.matches("\"marked").count(), 1, "{slow_t}");
    assert!(slow_t.contains("slow child done"));

    // The worktree child started from the parent's uncommitted state and
    // its change came back as a branch of this repository, checked out as
    // its kept worktree.
    let wt_request = requests
        .iter()
        .find(|r| {
            !is_main(r)
                && r.messages()[0].to_string().contains("wt-child")
                && super::harness::assistant_turns(r) == 1
        })
        .unwrap();
    let seen_by_child: String = super::harness::last_tool_results(&wt_request.json)
        .iter()
        .map(super::harness::result_text)
        .collect();
    assert!(
        seen_by_child.contains("the parent's draft") && seen_by_child.contains("hello, edited"),
        "{seen_by_child}"
    );
    let last_main = requests.iter().rfind(|r| is_main(r)).unwrap();
    let kept = notified_worktrees(last_main);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let root = p.path().canonicalize().unwrap().join(".cadre/worktrees");
    assert!(PathBuf::from(&kept[0]).starts_with(&root), "{kept:?}");
    assert_eq!(
        std::fs::read_to_string(PathBuf::from(&kept[0]).join("made.txt")).unwrap(),
        "from-the-worker\n"
    );
    let branch = user_texts(last_main)
        .split("<worktreeBranch>")
        .nth(1)
        .and_then(|s| s.split("</worktreeBranch>").next())
        .unwrap()
        .to_string();
    let made = super::worktrees::git(p.path(), &["show", &format!("{branch}:made.txt")]);
    assert_eq!(made.trim(), "from-the-worker");
    // Only the worktree child changed files: one branch.
    let branches = super::worktrees::git(p.path(), &["branch"]);
    assert_eq!(branches.matches("worktree-agent-").count(), 1, "{branches}");
    // The parent's checkout is as it was.
    assert_eq!(p.read("README.md"), "hello, edited\n");
    assert!(!p.path().join("made.txt").exists());
}

/// A worktree child on a shared-nothing fleet whose worker is killed
/// (SIGKILL) mid-task: the worker that takes it over, in its own clone,
/// starts from the work in progress the first one published after its
/// tool call (a file made, a file changed, a file deleted), not from the
/// base commit, and the branch that comes back to the parent holds both
/// workers' changes. The first Bash call is not run again.
#[test]
fn a_worktree_child_taken_over_keeps_the_first_worker_s_changes() {
    worktree_takeover(KillAt::SecondRequest);
}

/// The same, killed after the child's answer reached the broker but
/// before its worker sent the branch (held in `git status`): the worker
/// that takes it over sends no request (the answer stands) and still
/// brings the first worker's changes back as the branch.
#[test]
fn a_worktree_child_answered_before_its_worker_died_still_returns_its_branch() {
    worktree_takeover(KillAt::Answered);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum KillAt {
    /// While the child waits for its second model answer.
    SecondRequest,
    /// Once its answer is on the broker, before the task is finished.
    Answered,
}

fn worktree_takeover(at: KillAt) {
    let nats = NatsServer::start();
    let p = fleet_project(
        &nats,
        "[permissions]\ndefault_mode = \"bypassPermissions\"",
        "lease_ms = 1500\n",
    );
    git_repo(&p);
    p.write("notes.txt", "one\n");
    super::worktrees::git(p.path(), &["add", "notes.txt"]);
    super::worktrees::git(p.path(), &["commit", "-qm", "notes"]);
    // Worker A's git waits in its fsmonitor hook while `hold` exists: the
    // child's end (its worktree's `git status`) stalls there.
    let gate = tempfile::tempdir().unwrap();
    let hold = gate.path().join("hold");
    let hook = gate.path().join("fsmonitor.sh");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\nwhile [ -e '{}' ]; do sleep 0.05; done\nexit 1\n",
            hold.display()
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(gate.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let child_requests = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&child_requests);
    let held = hold.clone();
    let server = FakeServer::route(move |r| {
        if !is_main(r) {
            return match (seen.fetch_add(1, Ordering::SeqCst), at) {
                (0, _) => anthropic::tool_use_reply(
                    "toolu_first",
                    "Bash",
                    json!({"command": "echo first >> first.txt && echo two >> notes.txt && rm README.md && echo did-first",
                           "description": "first"}),
                ),
                (1, KillAt::SecondRequest) => {
                    anthropic::text_reply("never sent").delayed(Duration::from_secs(60))
                }
                (1, KillAt::Answered) => {
                    std::fs::write(&held, "").unwrap();
                    anthropic::text_reply("child done")
                }
                (2, _) => anthropic::tool_use_reply(
                    "toolu_second",
                    "Bash",
                    json!({"command": "echo second > second.txt && cat first.txt notes.txt && ls",
                           "description": "second"}),
                ),
                _ => anthropic::text_reply("child done"),
            };
        }
        background_parent(r, "isolated", "Edit in two steps.", true)
    });
    let (mut a, _wa, clone_a) = isolated_worker(&p, &server, "workerA");
    let config = clone_a.join(".git/config");
    super::worktrees::git(
        gate.path(),
        &[
            "config",
            "--file",
            config.to_str().unwrap(),
            "core.fsmonitor",
            hook.to_str().unwrap(),
        ],
    );
    a.wait_pulling();
    let mut parent = p
        .command(Some(&server))
        .args(["run", "--output-format", "stream-json", "go"])
        .stdout(std::fs::File::create(p.home.path().join("run.out")).unwrap())
        .stderr(std::fs::File::create(p.home.path().join("run.err")).unwrap())
        .spawn()
        .unwrap();
    match at {
        // The second request goes out only once the first call's result
        // (and so the worktree's state before it) is on the broker.
        KillAt::SecondRequest => wait_until(
            "the child's second request",
            Duration::from_secs(60),
            || child_requests.load(Ordering::SeqCst) >= 2,
        ),
        // The parent's copy of the transcript has the answer: the broker
        // has it.
        KillAt::Answered => wait_until(
            "the child's answer in the parent's copy",
            Duration::from_secs(60),
            || {
                child_transcripts(&p)
                    .values()
                    .any(|t| t.contains("child done"))
            },
        ),
    }
    a.kill9();
    let _ = std::fs::remove_file(&hold);
    let (b, _wb, _clone_b) = isolated_worker(&p, &server, "workerB");
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = parent.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the parent did not end:\n{}\n{}",
            std::fs::read_to_string(p.home.path().join("run.err")).unwrap_or_default(),
            logs(&[b])
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = std::fs::read_to_string(p.home.path().join("run.err")).unwrap_or_default();
    let workers = [a, b];
    assert!(status.success(), "{err}\n{}", logs(&workers));
    // The first worker's worktree had the change (the call ran there).
    let wt_a: Vec<PathBuf> = std::fs::read_dir(clone_a.join(".cadre/worktrees"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(wt_a.len(), 1, "{wt_a:?}");
    assert_eq!(
        std::fs::read_to_string(wt_a[0].join("first.txt")).unwrap(),
        "first\n"
    );
    let requests = server.requests();
    let child: Vec<&RecordedRequest> = requests.iter().filter(|r| !is_main(r)).collect();
    let expected = if at == KillAt::SecondRequest { 4 } else { 2 };
    assert_eq!(child.len(), expected, "{}", logs(&workers));
    if at == KillAt::SecondRequest {
        // The second worker's Bash call saw the first one's files.
        let seen_by_second: String = super::harness::last_tool_results(&child[3].json)
            .iter()
            .map(super::harness::result_text)
            .collect();
        assert!(
            seen_by_second.contains("first\none\ntwo\n") && !seen_by_second.contains("README"),
            "{seen_by_second}\n{}",
            logs(&workers)
        );
    }
    // One branch back in the parent's repository, with both workers'
    // changes and the first call run once.
    let last_main = requests.iter().rfind(|r| is_main(r)).unwrap();
    let kept = notified_worktrees(last_main);
    assert_eq!(kept.len(), 1, "{kept:?}\n{}", logs(&workers));
    let branch = user_texts(last_main)
        .split("<worktreeBranch>")
        .nth(1)
        .and_then(|s| s.split("</worktreeBranch>").next())
        .unwrap()
        .to_string();
    let show = |f: &str| {
        let out = std::process::Command::new("git")
            .args(["show", &format!("{branch}:{f}")])
            .current_dir(p.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{branch}:{f}: {}\n{kept:?}\n{err}\n{}",
            String::from_utf8_lossy(&out.stderr),
            logs(&workers)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(show("first.txt"), "first");
    assert_eq!(show("notes.txt"), "one\ntwo");
    if at == KillAt::SecondRequest {
        assert_eq!(show("second.txt"), "second");
    }
    let files = super::worktrees::git(p.path(), &["ls-tree", "--name-only", &branch]);
    assert!(!files.lines().any(|f| f == "README.md"), "{files}");
    assert_eq!(
        std::fs::read_to_string(PathBuf::from(&kept[0]).join("first.txt")).unwrap(),
        "first\n"
    );
    assert_completed_on_second_attempt(&p);
}

/// A worktree child whose starting commit the parent has pushed: the plan
/// names the parent's remote branch (its URL without credentials), and a
/// worker whose clone lacks the commit fetches it from its own remote of
/// that URL (named differently here) instead of a bundle.
#[test]
fn a_pushed_base_commit_is_fetched_from_the_worker_s_own_remote() {
    use super::worktrees::git;
    let nats = NatsServer::start();
    let p = fleet_project(
        &nats,
        "[permissions]\ndefault_mode = \"bypassPermissions\"",
        "",
    );
    git_repo(&p);
    // The shared remote: a bare repository the parent pushes to.
    let shared = tempfile::tempdir().unwrap();
    let bare = shared.path().join("app.git");
    git(
        shared.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    git(
        p.path(),
        &["remote", "add", "origin", bare.to_str().unwrap()],
    );
    git(p.path(), &["push", "-q", "origin", "main"]);
    let server = FakeServer::route(|r| {
        if !is_main(r) {
            return if super::harness::assistant_turns(r) == 0 {
                anthropic::tool_use_reply(
                    "toolu_cat",
                    "Bash",
                    json!({"command": "cat pushed.txt && echo edited > pushed.txt", "description": "read"}),
                )
            } else {
                anthropic::text_reply("child done")
            };
        }
        background_parent(r, "isolated", "Read and edit.", true)
    });
    // The worker's clone is made now: it lacks the commit pushed below.
    let (w, _ww, clone) = isolated_worker(&p, &server, "worker");
    p.write("pushed.txt", "from the pushed commit\n");
    git(p.path(), &["add", "pushed.txt"]);
    git(p.path(), &["commit", "-qm", "pushed"]);
    git(p.path(), &["push", "-q", "origin", "main"]);
    let pushed = git(p.path(), &["rev-parse", "HEAD"]).trim().to_string();
    if nix::unistd::geteuid().is_root() {
        let ok = std::process::Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(&bare)
            .status()
            .unwrap();
        assert!(ok.success());
    }
    // The worker's own remote for it, under another name.
    let config = clone.join(".git/config");
    for (k, v) in [
        ("remote.shared.url", bare.to_str().unwrap()),
        ("remote.shared.fetch", "+refs/heads/*:refs/remotes/shared/*"),
    ] {
        git(
            shared.path(),
            &["config", "--file", config.to_str().unwrap(), k, v],
        );
    }
    w.wait_pulling();
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "go"],
    );
    let workers = [w];
    assert!(run.code == 0, "{}\n{}", run.stderr, logs(&workers));
    assert_eq!(run.json_lines().last().unwrap()["result"], "parent done");
    // The child saw the pushed commit, fetched from the worker's remote.
    let requests = server.requests();
    let seen: String = requests
        .iter()
        .filter(|r| !is_main(r))
        .flat_map(|r| super::harness::last_tool_results(&r.json))
        .map(|b| super::harness::result_text(&b))
        .collect();
    assert!(
        seen.contains("from the pushed commit"),
        "{seen}\n{}",
        logs(&workers)
    );
    assert!(
        logs(&workers).contains(&format!("commit {pushed} fetched from remote shared")),
        "{}",
        logs(&workers)
    );
    // Its branch came back as usual.
    let last_main = requests.iter().rfind(|r| is_main(r)).unwrap();
    let kept = notified_worktrees(last_main);
    assert_eq!(kept.len(), 1, "{kept:?}\n{}", logs(&workers));
    assert_eq!(
        std::fs::read_to_string(PathBuf::from(&kept[0]).join("pushed.txt")).unwrap(),
        "edited\n"
    );
}

/// A bundle whose chunks go while a parent reads it (the object was
/// replaced under it) ends the read with an error, tried again for a
/// while, instead of waiting for the chunks for ever; the same bundle
/// whole is read back.
#[test]
fn a_bundle_whose_chunks_vanish_under_a_reader_fails_instead_of_hanging() {
    use tokio::io::AsyncReadExt;
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let broker = broker_of(&nats).await;
        let store = broker.git_store().await.unwrap();
        // Several chunks (128 KiB each by default).
        let data: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
        store
            .put("branch-x-r0-a1", &mut data.as_slice())
            .await
            .unwrap();
        let mut whole = Vec::new();
        store
            .get("branch-x-r0-a1")
            .await
            .unwrap()
            .read_to_end(&mut whole)
            .await
            .unwrap();
        assert_eq!(whole, data);
        let nuid = store.info("branch-x-r0-a1").await.unwrap().nuid;
        let bucket = &broker.names.git_bucket;
        let stream = broker.js.get_stream(format!("OBJ_{bucket}")).await.unwrap();
        stream
            .purge()
            .filter(format!("$O.{bucket}.C.{nuid}"))
            .await
            .unwrap();
        // Bounded by the test, not by the code under test: the old read
        // never ended.
        let read = tokio::time::timeout(
            Duration::from_secs(120),
            cadre::fleet::git::receive_branch(&broker, dir.path(), "x", "b", "branch-x-r0-a1"),
        )
        .await
        .expect("the read of a bundle with no chunks never ended");
        let err = read
            .expect_err("a bundle with no chunks was read")
            .to_string();
        assert!(
            err.contains("reading branch-x-r0-a1: nothing came"),
            "{err}"
        );
    });
}

/// The broker goes away just as a worker is about to store a worktree
/// child's branch (held in its clone's post-commit hook, which runs in the
/// middle of it): the bundle's put is tried again until the broker is
/// back, and the branch reaches the parent.
#[test]
fn a_branch_bundle_is_stored_once_the_broker_is_back() {
    let mut nats = NatsServer::start();
    let p = fleet_project(
        &nats,
        "[permissions]\ndefault_mode = \"bypassPermissions\"",
        "",
    );
    git_repo(&p);
    let gate = tempfile::tempdir().unwrap();
    let (hold, entered) = (gate.path().join("hold"), gate.path().join("entered"));
    std::fs::write(&hold, "").unwrap();
    let server = FakeServer::route(|r| {
        if !is_main(r) {
            return if super::harness::assistant_turns(r) == 0 {
                anthropic::tool_use_reply(
                    "toolu_write",
                    "Bash",
                    json!({"command": "echo kept > kept.txt", "description": "write"}),
                )
            } else {
                anthropic::text_reply("child done")
            };
        }
        background_parent(r, "isolated", "Write.", true)
    });
    let (w, _ww, clone) = isolated_worker(&p, &server, "worker");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(gate.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let hook = clone.join(".git/hooks/post-commit");
        std::fs::write(
            &hook,
            format!(
                "#!/bin/sh\ntouch '{}'\nwhile [ -e '{}' ]; do sleep 0.05; done\n",
                entered.display(),
                hold.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    w.wait_pulling();
    let mut parent = p
        .command(Some(&server))
        .args(["run", "--output-format", "stream-json", "go"])
        .stdout(std::fs::File::create(p.home.path().join("run.out")).unwrap())
        .stderr(std::fs::File::create(p.home.path().join("run.err")).unwrap())
        .spawn()
        .unwrap();
    wait_until(
        "the worker to commit the child's changes",
        Duration::from_secs(60),
        || entered.exists(),
    );
    nats.kill();
    std::fs::remove_file(&hold).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !w.log_text().contains("trying again") {
        assert!(Instant::now() < deadline, "{}", w.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    nats.launch();
    let deadline = Instant::now() + Duration::from_secs(60);
    let workers = [w];
    let status = loop {
        if let Some(s) = parent.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the parent did not end:\n{}\n{}",
            std::fs::read_to_string(p.home.path().join("run.err")).unwrap_or_default(),
            logs(&workers)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = std::fs::read_to_string(p.home.path().join("run.err")).unwrap_or_default();
    assert!(status.success(), "{err}\n{}", logs(&workers));
    assert!(
        logs(&workers).contains("storing branch-"),
        "{}",
        logs(&workers)
    );
    let requests = server.requests();
    let last_main = requests.iter().rfind(|r| is_main(r)).unwrap();
    let kept = notified_worktrees(last_main);
    assert_eq!(kept.len(), 1, "{kept:?}\n{err}\n{}", logs(&workers));
    let root = p.path().canonicalize().unwrap().join(".cadre/worktrees");
    assert!(
        PathBuf::from(&kept[0]).starts_with(&root),
        "{kept:?}\n{err}\n{}",
        logs(&workers)
    );
    assert_eq!(
        std::fs::read_to_string(PathBuf::from(&kept[0]).join("kept.txt")).unwrap(),
        "kept\n"
    );
}

/// The only task of `p` completed, on its second attempt (a takeover).
fn assert_completed_on_second_attempt(p: &Project) {
    let states = task_states(p);
    let state = states.values().next().unwrap();
    assert_eq!(
        (state["status"].as_str(), state["attempt"].as_u64()),
        (Some("completed"), Some(2))
    );
}

/// A background worktree child on a worker whose project folder has
/// `WorktreeCreate`/`WorktreeRemove` hooks (`.claude/settings.json`): the
/// worker fires them from its own settings (the parent, which sends the
/// child away, fires none). Returns the child's Bash result and the
/// project.
fn worktree_hooks_on_a_worker(trusted_worker: bool) -> (String, Project) {
    let nats = NatsServer::start();
    let p = fleet_project(
        &nats,
        "[permissions]\ndefault_mode = \"bypassPermissions\"",
        "",
    );
    let cmd = |c: &str| json!([{"hooks": [{"type": "command", "command": c}]}]);
    p.write(
        ".claude/settings.json",
        &json!({"hooks": {
            "WorktreeCreate": cmd(
                "cat > \"$CLAUDE_PROJECT_DIR/create.json\"; d=\"$CLAUDE_PROJECT_DIR/.wt/made\"; \
                 mkdir -p \"$d\"; echo 'made by the hook' > \"$d/marker.txt\"; echo \"$d\""
            ),
            "WorktreeRemove": cmd(
                "cat > \"$CLAUDE_PROJECT_DIR/removed.json\"; rm -rf \"$CLAUDE_PROJECT_DIR/.wt/made\""
            ),
        }})
        .to_string(),
    );
    git_repo(&p);
    let server = FakeServer::route(|r| {
        if !is_main(r) {
            if super::harness::assistant_turns(r) == 0 {
                return anthropic::tool_use_reply(
                    "toolu_look",
                    "Bash",
                    json!({"command": "pwd; cat marker.txt 2>/dev/null || true", "description": "look"}),
                );
            }
            return anthropic::text_reply("child finished");
        }
        if super::harness::assistant_turns(r) == 0 {
            return anthropic::tool_use_reply(
                "toolu_0",
                "Agent",
                json!({"description": "look", "prompt": "look: go.",
                       "subagent_type": "general-purpose", "run_in_background": true,
                       "isolation": "worktree"}),
            );
        }
        if user_texts(r).contains("<task-notification>") {
            anthropic::text_reply("the isolated child reported")
        } else {
            anthropic::text_reply("waiting")
        }
    });
    // A worker whose user has not trusted the project folder finds its
    // `[distributed]` settings in its own user settings.
    let worker_home = tempfile::tempdir().unwrap();
    let mut worker_cmd = p.command(Some(&server));
    if !trusted_worker {
        worker_settings_outside_the_project(
            &mut worker_cmd,
            worker_home.path(),
            &p,
            &nats.url(),
            "[permissions]\ndefault_mode = \"bypassPermissions\"\n",
        );
    }
    let worker = Worker::spawn(worker_cmd, p.path().join("worker.log"));
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "go"],
    );
    assert!(run.code == 0, "{}\n{}", run.stderr, worker.log_text());
    assert_eq!(
        run.json_lines().last().unwrap()["result"],
        "the isolated child reported"
    );
    let states = task_states(&p);
    assert!(
        states.len() == 1
            && states
                .values()
                .all(|s| s["status"] == "completed" && s["owner"].is_string()),
        "the child ran on the worker: {states:?}\n{}",
        worker.log_text()
    );
    let looked = server
        .requests()
        .into_iter()
        .filter(|r| !is_main(r))
        .flat_map(|r| super::harness::last_tool_results(&r.json))
        .map(|b| super::harness::result_text(&b))
        .next()
        .unwrap_or_default();
    (looked, p)
}

#[test]
fn a_worker_fires_its_worktree_hooks_for_a_child_it_runs() {
    let (looked, p) = worktree_hooks_on_a_worker(true);
    // The child ran in the folder the worker's hook made, not in a git
    // worktree, and the remove hook was given that folder at the end.
    assert!(looked.contains("made by the hook"), "{looked}");
    assert!(looked.contains(".wt/made"), "{looked}");
    let created: Value = serde_json::from_str(&p.read("create.json")).unwrap();
    assert_eq!(created["hook_event_name"], "WorktreeCreate");
    assert!(
        created["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("agent-")),
        "{created}"
    );
    let removed: Value = serde_json::from_str(&p.read("removed.json")).unwrap();
    assert_eq!(removed["hook_event_name"], "WorktreeRemove");
    assert!(
        removed["worktree_path"]
            .as_str()
            .is_some_and(|w| w.ends_with(".wt/made")),
        "{removed}"
    );
    assert!(!p.path().join(".wt/made").exists());
    assert!(agent_worktrees(&p).is_empty(), "git made no worktree");
}

/// The same project on a worker whose user has not trusted the folder:
/// the project's hooks never run there; the worker makes a git worktree.
#[test]
fn an_untrusted_worker_folder_runs_no_worktree_hook() {
    let (looked, p) = worktree_hooks_on_a_worker(false);
    assert!(looked.contains(".cadre/worktrees/agent-"), "{looked}");
    assert!(!looked.contains("made by the hook"), "{looked}");
    assert!(!p.path().join("create.json").exists());
    assert!(!p.path().join("removed.json").exists());
}
