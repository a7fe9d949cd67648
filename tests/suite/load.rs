//! Load: 200 sub-agents at once through the real binary. The main agent
//! makes 200 Agent calls in one assistant message (calls of one turn run
//! concurrently); each child answers once. Background sub-agents are not
//! in this branch yet; when they land, the same test should launch them
//! with `run_in_background` and count notifications.
//!
//! Checked: every tool_use got exactly one tool_result (the kit's invariant
//! checks, on every request), every child started and ended exactly once
//! and sent one request plus at most one per announced retry, and
//! every child's answer reached the parent exactly once, under its own
//! tool_use id.

use std::collections::BTreeMap;

use serde_json::json;

use super::harness::{Project, last_tool_results, result_text};
use super::kit::{FakeServer, anthropic};

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
    let mut task_of_agent: BTreeMap<String, usize> = BTreeMap::new();
    let mut retries: BTreeMap<usize, usize> = BTreeMap::new();
    let mut ends: BTreeMap<usize, usize> = BTreeMap::new();
    for e in &events {
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
                assert_eq!(e["status"], "completed", "{e}");
                *ends.entry(task_of_agent[&id]).or_default() += 1;
            }
            _ => {}
        }
    }
    assert_eq!(task_of_agent.len(), CHILDREN, "every child started once");
    assert_eq!(ends.len(), CHILDREN);
    assert!(ends.values().all(|c| *c == 1), "every child ended once");

    let requests = server.requests();
    let mut per_child: BTreeMap<usize, usize> = BTreeMap::new();
    for r in requests
        .iter()
        .filter(|r| !r.system_text().contains("You are cadre"))
    {
        let n = task_of(&r.last_user_text()).expect("a child request names its task");
        *per_child.entry(n).or_default() += 1;
    }
    assert_eq!(per_child.len(), CHILDREN, "every child ran");
    let unexplained: Vec<_> = per_child
        .iter()
        // A retry whose first attempt never reached the server (a refused
        // or reset connection) adds no request, so retries bound the count
        // from above only.
        .filter(|(n, c)| **c < 1 || **c > 1 + retries.get(*n).copied().unwrap_or(0))
        .collect();
    assert!(
        unexplained.is_empty(),
        "each child sent one request, plus at most one per announced retry; (task, count): {unexplained:?}"
    );

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
