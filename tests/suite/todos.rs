//! TodoWrite through the real binary: Claude Code's schema, each session's
//! own list, a `todos` event in stream-json, and no permission prompt.

use serde_json::{Value, json};

use super::harness::{Project, last_tool_results, result_text, tool_names};
use super::kit::{FakeServer, anthropic};

fn todos(items: &[(&str, &str)]) -> Value {
    json!({"todos": items.iter().map(|(c, s)| json!({"content": c, "status": s, "activeForm": format!("Doing {c}")})).collect::<Vec<_>>()})
}

#[test]
fn todo_lists_are_per_agent_and_streamed_as_events() {
    let p = Project::new();
    let server = FakeServer::start([
        // main writes its list, then hands work to a sub-agent
        anthropic::tool_use_reply(
            "m1",
            "TodoWrite",
            todos(&[("plan", "completed"), ("build", "in_progress")]),
        ),
        anthropic::tool_use_reply(
            "m2",
            "Agent",
            json!({"description": "build it", "prompt": "build", "subagent_type": "general-purpose"}),
        ),
        // the sub-agent writes its own list
        anthropic::tool_use_reply("c1", "TodoWrite", todos(&[("compile", "in_progress")])),
        anthropic::text_reply("built"),
        anthropic::tool_use_reply(
            "m3",
            "TodoWrite",
            todos(&[("plan", "completed"), ("build", "completed")]),
        ),
        anthropic::text_reply("all done"),
    ]);
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "go"],
    );
    run.ok();
    assert!(tool_names(&server.request(0).json).contains(&"TodoWrite".to_string()));
    // Allowed without asking, in the default mode of a non-interactive run.
    let r = &last_tool_results(&server.request(1).json)[0];
    assert!(r.get("is_error").is_none(), "{r}");
    assert!(
        result_text(r).contains("2 items (1 completed, 1 in progress, 0 pending)"),
        "{}",
        result_text(r)
    );

    let events: Vec<Value> = run
        .json_lines()
        .into_iter()
        .filter(|l| l["type"] == "todos")
        .collect();
    assert_eq!(events.len(), 3, "{events:#?}");
    assert_eq!(events[0]["agent_id"], "main");
    assert_eq!(
        events[0]["todos"],
        json!([
            {"content": "plan", "status": "completed", "activeForm": "Doing plan"},
            {"content": "build", "status": "in_progress", "activeForm": "Doing build"}
        ])
    );
    let child = events[1]["agent_id"].as_str().unwrap();
    assert_ne!(child, "main", "the sub-agent's list is its own");
    assert_eq!(
        events[1]["todos"],
        json!([{"content": "compile", "status": "in_progress", "activeForm": "Doing compile"}])
    );
    assert_eq!(events[2]["agent_id"], "main");
    assert_eq!(events[2]["todos"][1]["status"], "completed");
}

#[test]
fn a_malformed_list_is_an_error_naming_the_problem() {
    let p = Project::new();
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "m1",
            "TodoWrite",
            json!({"todos": [{"content": "x", "status": "started", "activeForm": "X"}]}),
        ),
        anthropic::text_reply("ok"),
    ]);
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "go"],
    );
    run.ok();
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true);
    assert!(result_text(r).contains("status"), "{}", result_text(r));
    assert!(!run.json_lines().iter().any(|l| l["type"] == "todos"));
}
