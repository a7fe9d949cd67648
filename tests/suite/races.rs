//! Exactly once under races, through the real binary: every one of 300
//! background children that finish one by one is delivered and answered
//! (wake-up turns do not count against `max_turns`), and a SendMessage
//! that races the child's end is read by the child, whatever the timing.
//! The in-process stress loops for the same races are unit tests in
//! `src/runtime/tasks.rs`.

use std::time::Duration;

use serde_json::{Value, json};

use super::harness::{
    Project, assistant_turns, is_main_session as is_main, last_tool_results, result_text,
    user_texts,
};
use super::kit::{FakeServer, anthropic};

#[test]
fn three_hundred_children_finishing_one_by_one_all_notify() {
    const N: usize = 300;
    let mut p = Project::new();
    p.config("[agents]\nmax_concurrent = 3\n");
    let server = FakeServer::route(|r| {
        if is_main(r) {
            if assistant_turns(r) == 0 {
                let mut m = anthropic::message();
                for i in 0..N {
                    m = m.tool_use(
                        &format!("toolu_{i}"),
                        "Agent",
                        json!({"description": format!("child {i}"), "prompt": format!("job {i}"),
                               "run_in_background": true}),
                    );
                }
                return m.reply();
            }
            return anthropic::text_reply("noted");
        }
        anthropic::text_reply("child done").delayed(Duration::from_millis(3))
    });
    // A turn limit far below the number of wake-ups.
    let run = p.run(
        Some(&server),
        &["run", "--max-turns", "3", "--output-format", "json", "go"],
    );
    run.ok();
    let v = run.json();
    assert_eq!(v["stop_reason"], "end_turn", "{v}");
    let mains: Vec<_> = server.requests().into_iter().filter(is_main).collect();
    let last = user_texts(mains.last().unwrap());
    assert_eq!(last.matches("<task-notification>").count(), N);
    for i in 0..N {
        assert_eq!(
            last.matches(&format!("<tool-use-id>toolu_{i}</tool-use-id>"))
                .count(),
            1,
            "child {i} notified exactly once"
        );
    }
    let meta = p.meta_files();
    assert_eq!(meta.len(), N);
    assert!(meta.iter().all(|m| m["status"] == "completed"));
}

#[test]
fn background_children_started_before_the_turn_limit_still_report() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_bg",
                    "Agent",
                    json!({"description": "slow", "prompt": "p", "run_in_background": true}),
                ),
                // The last counted turn calls a tool: the limit is reached
                // with the child still running.
                1 => anthropic::tool_use_reply("toolu_glob", "Glob", json!({"pattern": "*"})),
                _ => anthropic::text_reply("answered the notification"),
            };
        }
        anthropic::text_reply("slow result").delayed(Duration::from_millis(500))
    });
    let run = p.run(
        Some(&server),
        &["run", "--max-turns", "2", "--output-format", "json", "go"],
    );
    run.ok();
    let v = run.json();
    assert_eq!(v["result"], "answered the notification", "{v}");
    let mains: Vec<_> = server.requests().into_iter().filter(is_main).collect();
    assert_eq!(mains.len(), 3);
    // The notification joins the unsent tool results: one user message.
    let last = mains[2].messages().last().unwrap().clone();
    let blocks = last["content"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "tool_result");
    assert!(
        blocks.iter().any(|b| b["text"]
            .as_str()
            .is_some_and(|t| t.contains("<result>slow result</result>"))),
        "{last}"
    );
}

/// One round of the SendMessage race: the child answers at once and ends
/// through a SubagentStop hook that takes `hook_ms`; the parent's
/// SendMessage comes `send_after_ms` after it launched the child.
fn send_message_race(hook_ms: u64, send_after_ms: u64) {
    let mut p = Project::new();
    p.config(&format!(
        "[[hooks.SubagentStop]]\ncommand = \"sleep {}\"\n",
        hook_ms as f64 / 1000.0
    ));
    let server = FakeServer::route(move |r| {
        if is_main(r) {
            let texts = user_texts(r);
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_1",
                    "Agent",
                    json!({"description": "worker", "prompt": "start", "name": "worker",
                           "run_in_background": true}),
                ),
                1 => anthropic::tool_use_reply(
                    "toolu_2",
                    "SendMessage",
                    json!({"to": "worker", "message": "LATE NOTE"}),
                )
                .delayed(Duration::from_millis(send_after_ms)),
                _ if texts.contains("<result>saw the note</result>") => {
                    anthropic::text_reply("the worker saw it")
                }
                _ => anthropic::text_reply("waiting"),
            };
        }
        if user_texts(r).contains("LATE NOTE") {
            anthropic::text_reply("saw the note")
        } else {
            anthropic::text_reply("first answer")
        }
    });
    let run = p.run(Some(&server), &["run", "--output-format", "json", "go"]);
    run.ok();
    let mains: Vec<_> = server.requests().into_iter().filter(is_main).collect();
    let reply: Vec<Value> = last_tool_results(&mains[2].json);
    let reply = result_text(&reply[0]);
    assert!(
        reply.contains("queued") || reply.contains("resumed"),
        "hook {hook_ms} ms, send after {send_after_ms} ms: {reply}"
    );
    assert_eq!(
        run.json()["result"],
        "the worker saw it",
        "hook {hook_ms} ms, send after {send_after_ms} ms: the message was delivered"
    );
}

#[test]
fn a_send_message_racing_the_childs_end_is_always_delivered() {
    // Before the child answers, during its slow stop hook, and after it
    // ended.
    for send_after_ms in [0, 150, 350, 900] {
        send_message_race(600, send_after_ms);
    }
}
