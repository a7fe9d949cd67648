//! Load: 200 sub-agents at once through the real binary. The main agent
//! makes 200 Agent calls in one assistant message; each child answers
//! once. Two tests: 200 **background** children (`run_in_background`,
//! `agents.max_concurrent = 200`), whose results come back as
//! `<task-notification>`s, and 200 **foreground** children (calls of one
//! turn run concurrently), whose results come back as tool_results.
//!
//! Checked: every tool_use got exactly one tool_result (the kit's invariant
//! checks, on every request), every child started and ended exactly once
//! and sent one request plus at most one per announced retry, the children really
//! ran at once (background), and every child's answer reached the parent
//! exactly once, under its own tool_use id.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use super::harness::{BASE_CONFIG, Project, last_tool_results, result_text, user_texts};
use super::kit::{FakeServer, RecordedRequest, anthropic};

const CHILDREN: usize = 200;

fn task_of(text: &str) -> Option<usize> {
    let at = text.find("load-task-")? + "load-task-".len();
    text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()
}

/// What the `subagent_start`/`retrying`/`subagent_end` events of a
/// stream-json run say, per task.
struct Lifecycle {
    task_of_agent: BTreeMap<String, usize>,
    retries: BTreeMap<usize, usize>,
    ends: BTreeMap<usize, usize>,
}

/// Counts the lifecycle events per task; asserts every child ended
/// `completed`.
fn lifecycle(events: &[serde_json::Value]) -> Lifecycle {
    let mut task_of_agent: BTreeMap<String, usize> = BTreeMap::new();
    let mut retries: BTreeMap<usize, usize> = BTreeMap::new();
    let mut ends: BTreeMap<usize, usize> = BTreeMap::new();
    for e in events {
        let id = e["agent_id"].as_str().unwrap_or("").to_string();
        match e["type"].as_str() {
            Some("subagent_start") => {
                let n = task_of(&format!(
                    "load-task-{}",
                    e["description"]
                        .as_str()
                        .unwrap()
                        .trim_start_matches("task ")
                ))
                .unwrap();
                task_of_agent.insert(id, n);
            }
            Some("retrying") if id != "main" => {
                *retries.entry(task_of_agent[&id]).or_default() += 1;
            }
            Some("subagent_end") => {
                if e["status"] != "completed" {
                    let own: Vec<_> = events
                        .iter()
                        .filter(|x| x["agent_id"] == e["agent_id"])
                        .collect();
                    panic!("a child did not complete: {own:#?}");
                }
                *ends.entry(task_of_agent[&id]).or_default() += 1;
            }
            _ => {}
        }
    }
    Lifecycle {
        task_of_agent,
        retries,
        ends,
    }
}

/// Each child's request reached the server at least once and at most once
/// plus once per retry it announced (an attempt that failed on a pooled
/// connection the server had already closed never reached it).
fn assert_one_request_per_child(server: &FakeServer, retries: &BTreeMap<usize, usize>) {
    let mut per_child: BTreeMap<usize, usize> = BTreeMap::new();
    for r in server
        .requests()
        .iter()
        .filter(|r| !r.system_text().contains("You are cadre"))
    {
        let n = task_of(&r.last_user_text()).expect("a child request names its task");
        *per_child.entry(n).or_default() += 1;
    }
    assert_eq!(per_child.len(), CHILDREN, "every child ran");
    let unexplained: Vec<_> = per_child
        .iter()
        .filter(|(n, c)| **c > 1 + retries.get(*n).copied().unwrap_or(0))
        .collect();
    assert!(
        unexplained.is_empty(),
        "each child sent one request plus at most one per announced retry; (task, count): {unexplained:?}"
    );
}

#[test]
fn two_hundred_concurrent_background_subagents_each_notify_exactly_once() {
    // Every child's answer is held back until all CHILDREN child requests
    // have arrived: the gate opens only if every child is in flight at once.
    // Children run one after the other would never open it; the deadline
    // only bounds how long such a failure takes to show.
    const DEADLINE: Duration = Duration::from_secs(120);
    let p = Project::new();
    // The held-back answers must not trip the provider's idle timeout.
    p.write(
        "cadre.toml",
        &format!(
            "{}\n[agents]\nmax_concurrent = {CHILDREN}\n",
            BASE_CONFIG.replace("idle_timeout_ms = 3000", "idle_timeout_ms = 300000")
        ),
    );
    let (open, gate) = tokio::sync::watch::channel(false);
    // Child requests seen so far, when the first came, and whether the gate
    // opened before that first request's deadline (so no answer went out
    // before the last request came in).
    let arrived = Arc::new(AtomicUsize::new(0));
    let opened_in_time = Arc::new(AtomicBool::new(false));
    let first: Arc<Mutex<Option<Instant>>> = Arc::default();
    let (seen, in_time) = (Arc::clone(&arrived), Arc::clone(&opened_in_time));
    let server = FakeServer::route(move |r| {
        let is_main = r.system_text().contains("You are cadre");
        if !is_main {
            let first = *first.lock().unwrap().get_or_insert_with(Instant::now);
            if seen.fetch_add(1, Ordering::SeqCst) + 1 == CHILDREN {
                in_time.store(first.elapsed() < DEADLINE, Ordering::SeqCst);
                let _ = open.send(true);
            }
            let n = task_of(&r.last_user_text()).unwrap_or(usize::MAX);
            return anthropic::message()
                .text(&format!("answer-{n}"))
                .usage(20, 5)
                .reply()
                .held(gate.clone(), DEADLINE);
        }
        if r.messages().iter().all(|m| m["role"] != "assistant") {
            let mut m = anthropic::message().text("fanning out");
            for i in 0..CHILDREN {
                m = m.tool_use(
                    &format!("toolu_{i:04}"),
                    "Agent",
                    json!({
                        "description": format!("task {i}"),
                        "prompt": format!("Do load-task-{i} and report."),
                        "subagent_type": "general-purpose",
                        "run_in_background": true,
                    }),
                );
            }
            return m.reply();
        }
        if user_texts(r).matches("<task-notification>").count() == CHILDREN {
            anthropic::text_reply("all children reported")
        } else {
            anthropic::text_reply("waiting")
        }
    });
    let t0 = Instant::now();
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "fan out"],
    );
    let elapsed = t0.elapsed();
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run.ok();
    let events = run.json_lines();
    assert_eq!(events.last().unwrap()["result"], "all children reported");
    let Lifecycle {
        task_of_agent,
        retries,
        ends,
    } = lifecycle(&events);
    assert_eq!(task_of_agent.len(), CHILDREN, "every child started once");
    assert_eq!(ends.len(), CHILDREN);
    assert!(ends.values().all(|c| *c == 1), "every child ended once");
    assert_one_request_per_child(&server, &retries);

    // Concurrency: no child got its answer before every child had sent its
    // request, so all of them were in flight at once.
    let requests = arrived.load(Ordering::SeqCst);
    eprintln!("{requests} child requests for {CHILDREN} children; run took {elapsed:?}");
    assert!(
        opened_in_time.load(Ordering::SeqCst),
        "an answer went out before all {CHILDREN} children had sent their request: \
         they did not all run at once (run took {elapsed:?})"
    );

    let mains: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.system_text().contains("You are cadre"))
        .collect();
    // The launch: one async_launched tool_result per Agent call.
    let launched = last_tool_results(&mains[1].json);
    assert_eq!(launched.len(), CHILDREN);
    for (i, r) in launched.iter().enumerate() {
        assert_eq!(r["tool_use_id"], format!("toolu_{i:04}"));
        assert!(
            result_text(r).starts_with("Async agent launched successfully."),
            "{r}"
        );
    }
    // The main session's final request carries every notification once.
    let last = mains.last().unwrap();
    let texts = user_texts(last);
    assert_eq!(texts.matches("<task-notification>").count(), CHILDREN);
    for i in 0..CHILDREN {
        assert_eq!(
            texts
                .matches(&format!("<tool-use-id>toolu_{i:04}</tool-use-id>"))
                .count(),
            1,
            "toolu_{i:04} notified exactly once"
        );
        assert_eq!(
            texts
                .matches(&format!("<result>answer-{i}</result>"))
                .count(),
            1,
            "task {i}'s own answer, once"
        );
    }
    // The children of one turn send the same bytes before their own
    // messages (model, settings, system prompt, tools: one shared head),
    // each body with a content-length that is its length.
    let children: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/messages") && !r.system_text().contains("You are cadre"))
        .collect();
    assert_eq!(children.len(), CHILDREN);
    let head = |r: &RecordedRequest| {
        let body = r.body_str();
        let at = body.find(",\"messages\":[").expect("a messages field");
        body[..at].to_string()
    };
    let first = head(&children[0]);
    assert!(
        first.contains("\"tools\":[") && first.contains("\"system\":["),
        "{first}"
    );
    for r in &children {
        assert_eq!(head(r), first, "request {} has another head", r.index);
        assert_eq!(
            r.header("content-length"),
            Some(r.body.len().to_string().as_str()),
            "request {}",
            r.index
        );
        assert_eq!(r.header("transfer-encoding"), None);
    }
    server.assert_invariants();
    assert!(p.transcript_lines().len() > CHILDREN);
}

#[test]
fn two_hundred_concurrent_subagents_each_answer_exactly_once() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        let is_main = r.system_text().contains("You are cadre");
        if !is_main {
            let n = task_of(&r.last_user_text()).unwrap_or(usize::MAX);
            return anthropic::message()
                .text(&format!("answer-{n}"))
                .usage(20, 5)
                .reply();
        }
        if r.messages().iter().all(|m| m["role"] != "assistant") {
            let mut m = anthropic::message().text("fanning out");
            for i in 0..CHILDREN {
                m = m.tool_use(
                    &format!("toolu_{i:04}"),
                    "Agent",
                    json!({
                        "description": format!("task {i}"),
                        "prompt": format!("Do load-task-{i} and report."),
                        "subagent_type": "general-purpose",
                    }),
                );
            }
            return m.reply();
        }
        anthropic::text_reply("all children reported")
    });
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "fan out"],
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run.ok();
    let events = run.json_lines();
    assert_eq!(events.last().unwrap()["result"], "all children reported");
    // A child may retry a request (a pooled connection the server closed
    // under load is retryable); each retry is announced by an event.
    let Lifecycle {
        task_of_agent,
        retries,
        ends,
    } = lifecycle(&events);
    assert_eq!(task_of_agent.len(), CHILDREN, "every child started once");
    assert_eq!(ends.len(), CHILDREN);
    assert!(ends.values().all(|c| *c == 1), "every child ended once");
    assert_one_request_per_child(&server, &retries);

    let requests = server.requests();
    let last = requests
        .iter()
        .rfind(|r| r.system_text().contains("You are cadre"))
        .unwrap();
    let results = last_tool_results(&last.json);
    assert_eq!(results.len(), CHILDREN);
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r["tool_use_id"], format!("toolu_{i:04}"));
        assert_ne!(r["is_error"], true, "{r}");
        let text = result_text(r);
        assert!(
            text.starts_with(&format!("answer-{i}")),
            "child {i}'s own answer: {text}"
        );
    }
    server.assert_invariants();
    // The transcripts stay valid JSON lines (panics otherwise).
    assert!(p.transcript_lines().len() > CHILDREN);
}

/// A run of `children` background children against a TLS server (h2
/// offered or not); returns the server's requests after checking that
/// every child answered and the parent heard of each one.
fn background_run_over_tls(h2: bool, children: usize) -> Vec<RecordedRequest> {
    let mut p = Project::new();
    p.config(&format!("[agents]\nmax_concurrent = {children}\n"));
    p.env("SSL_CERT_FILE", super::kit::TEST_CA);
    let server = FakeServer::route_tls(h2, move |r| {
        if !r.system_text().contains("You are cadre") {
            let n = task_of(&r.last_user_text()).unwrap_or(usize::MAX);
            return anthropic::text_reply(&format!("answer-{n}"));
        }
        if r.messages().iter().all(|m| m["role"] != "assistant") {
            let mut m = anthropic::message().text("fanning out");
            for i in 0..children {
                m = m.tool_use(
                    &format!("toolu_{i:04}"),
                    "Agent",
                    json!({"description": format!("task {i}"),
                           "prompt": format!("Do load-task-{i} and report."),
                           "subagent_type": "general-purpose",
                           "run_in_background": true}),
                );
            }
            return m.reply();
        }
        anthropic::text_reply("noted")
    });
    let run = p.run(Some(&server), &["run", "fan out"]);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run.ok();
    let requests = server.requests();
    let last_main = requests
        .iter()
        .rfind(|r| r.system_text().contains("You are cadre"))
        .unwrap();
    let texts = user_texts(last_main);
    let heard: std::collections::BTreeSet<usize> = texts
        .match_indices("answer-")
        .filter_map(|(at, _)| task_of(&texts[at..].replacen("answer-", "load-task-", 1)))
        .collect();
    assert_eq!(
        heard.len(),
        children,
        "every child's answer reached the parent"
    );
    server.assert_invariants();
    requests
}

/// Over HTTPS the API negotiates HTTP/2, and one connection carries every
/// request of a run: the parent's and all its concurrent children's (the
/// server sees one client address and port).
#[test]
fn background_children_over_tls_share_one_http2_connection() {
    let requests = background_run_over_tls(true, 40);
    assert!(requests.len() > 40);
    assert!(
        requests.iter().all(|r| r.version == "HTTP/2.0"),
        "{:?}",
        requests.iter().map(|r| &r.version).collect::<Vec<_>>()
    );
    let connections: std::collections::BTreeSet<&str> =
        requests.iter().map(|r| r.peer.as_str()).collect();
    assert_eq!(connections.len(), 1, "{connections:?}");
}

/// A TLS server that offers only HTTP/1.1 (an OpenAI-compatible proxy,
/// say) still gets every request, one connection per request in flight.
#[test]
fn a_tls_server_without_http2_gets_http1() {
    let requests = background_run_over_tls(false, 8);
    assert!(requests.iter().all(|r| r.version == "HTTP/1.1"));
    let connections: std::collections::BTreeSet<&str> =
        requests.iter().map(|r| r.peer.as_str()).collect();
    assert!(connections.len() > 1, "{connections:?}");
}
