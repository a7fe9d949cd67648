//! Agent-file fields that change how a sub-agent runs: `memory` (a folder
//! that outlives the run, its MEMORY.md in the next run's prompt) and
//! `effort` (sent in the provider's own parameter, trimmed to what the
//! model accepts).

use serde_json::{Value, json};

use super::harness::{Project, last_tool_results, result_text, tool_names};
use super::kit::{FakeServer, anthropic, openai};

const NOTES: &str = "---\nname: notes\ndescription: Keeps notes about the project\ntools: Bash\nmemory: user\neffort: max\nmodel: claude-opus-4-5\n---\nYou keep notes.\n";

fn spawn(prompt: &str) -> super::kit::Reply {
    anthropic::tool_use_reply(
        "toolu_a",
        "Agent",
        json!({"description": "take notes", "prompt": prompt, "subagent_type": "notes"}),
    )
}

#[test]
fn memory_written_in_one_run_is_in_the_next_runs_prompt() {
    let p = Project::new();
    p.write(".claude/agents/notes.md", NOTES);
    let memory = p.home.path().join(".claude/agent-memory/notes/MEMORY.md");

    // First run: empty memory; the child writes MEMORY.md (in the user's
    // home, outside the project) without being asked.
    let server = FakeServer::start([
        spawn("learn the build"),
        anthropic::tool_use_reply(
            "toolu_w",
            "Write",
            json!({"file_path": memory.display().to_string(), "content": "- The build runs `make all`.\n"}),
        ),
        anthropic::text_reply("noted"),
        anthropic::text_reply("done"),
    ]);
    p.run(Some(&server), &["run", "go"]).ok();
    let child = server.request(1);
    let system = child.system_text();
    assert!(
        system.contains(&memory.parent().unwrap().display().to_string()),
        "{system}"
    );
    assert!(system.contains("MEMORY.md does not exist yet"), "{system}");
    // Read, Write and Edit come with memory, whatever `tools` says.
    let names = tool_names(&child.json);
    for t in ["Bash", "Edit", "Read", "Write"] {
        assert!(names.contains(&t.to_string()), "{names:?}");
    }
    let w = &last_tool_results(&server.request(2).json)[0];
    assert!(w.get("is_error").is_none(), "{}", result_text(w));
    assert_eq!(
        std::fs::read_to_string(&memory).unwrap(),
        "- The build runs `make all`.\n"
    );

    // Second run: the memory is in the child's system prompt.
    let server = FakeServer::start([
        spawn("build it"),
        anthropic::text_reply("make all"),
        anthropic::text_reply("done"),
    ]);
    p.run(Some(&server), &["run", "go"]).ok();
    let system = server.request(1).system_text();
    assert!(system.contains("- The build runs `make all`."), "{system}");
    assert!(!system.contains("does not exist yet"), "{system}");
}

#[test]
fn memory_does_not_open_other_folders() {
    let p = Project::new();
    p.write(".claude/agents/notes.md", NOTES);
    let elsewhere = p.home.path().join(".claude/agent-memory/other/MEMORY.md");
    let server = FakeServer::start([
        spawn("write"),
        anthropic::tool_use_reply(
            "toolu_w",
            "Write",
            json!({"file_path": elsewhere.display().to_string(), "content": "x"}),
        ),
        anthropic::text_reply("ok"),
        anthropic::text_reply("done"),
    ]);
    p.run(Some(&server), &["run", "go"]).ok();
    let w = &last_tool_results(&server.request(2).json)[0];
    assert_eq!(w["is_error"], true, "{w}");
    assert!(!elsewhere.exists());
}

#[test]
fn effort_is_trimmed_to_the_model_and_sent_on_anthropic() {
    let p = Project::new();
    p.write(".claude/agents/notes.md", NOTES);
    let server = FakeServer::start([
        spawn("think"),
        anthropic::text_reply("ok"),
        // An Agent call's own effort wins over the file's.
        anthropic::tool_use_reply(
            "toolu_b",
            "Agent",
            json!({"description": "d", "prompt": "p", "subagent_type": "notes", "effort": "low"}),
        ),
        anthropic::text_reply("ok"),
        anthropic::text_reply("done"),
    ]);
    server.skip_invariant_checks();
    p.run(Some(&server), &["run", "go"]).ok();
    let main = &server.request(0).json;
    assert!(main.get("output_config").is_none(), "{main}");
    // `max` is more than claude-opus-4-5 accepts: `high` is sent.
    let child = &server.request(1).json;
    assert_eq!(child["model"], "claude-opus-4-5");
    assert_eq!(child["output_config"], json!({"effort": "high"}));
    let second = &server.request(3).json;
    assert_eq!(second["output_config"], json!({"effort": "low"}));
    let agent = server.request(0).json["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Agent")
        .cloned()
        .unwrap();
    assert!(agent["input_schema"]["properties"]["effort"].is_object());

    // A model with no effort levels gets none.
    let p = Project::new();
    p.write(
        ".claude/agents/notes.md",
        &NOTES.replace("claude-opus-4-5", "claude-sonnet-4-5"),
    );
    let server = FakeServer::start([
        spawn("think"),
        anthropic::text_reply("ok"),
        anthropic::text_reply("done"),
    ]);
    p.run(Some(&server), &["run", "go"]).ok();
    assert!(server.request(1).json.get("output_config").is_none());
}

#[test]
fn effort_is_sent_as_reasoning_effort_on_openai() {
    let server = FakeServer::start([
        openai::tool_call_reply(
            "call_1",
            "Agent",
            json!({"description": "d", "prompt": "p", "subagent_type": "notes"}),
        ),
        openai::text_reply("ok"),
        openai::text_reply("done"),
    ]);
    let mut p = Project::new();
    p.write(
        ".claude/agents/notes.md",
        &NOTES.replace("claude-opus-4-5", "gpt-5-mini"),
    );
    p.env("CADRE_PROVIDER__KIND", "openai")
        .env("CADRE_PROVIDER__BASE_URL", server.url());
    p.run(None, &["run", "--model", "gpt-5-mini", "go"]).ok();
    assert!(server.request(0).json.get("reasoning_effort").is_none());
    let child = &server.request(1).json;
    assert_eq!(child["model"], "gpt-5-mini");
    assert_eq!(child["reasoning_effort"], "high", "max lowered: {child}");
}

#[test]
fn agents_show_effective_names_effort_and_memory() {
    let p = Project::new();
    p.write(".claude/agents/notes.md", NOTES);
    let run = p.run(None, &["agents", "show", "notes", "--effective", "--json"]);
    run.ok();
    let e: Value = run.json()["effective"].clone();
    assert_eq!(e["effort"]["requested"], "max");
    assert_eq!(e["effort"]["sent"], "high");
    assert!(
        e["effort"]["note"]
            .as_str()
            .unwrap()
            .contains("claude-opus-4-5")
    );
    assert_eq!(e["memory"]["scope"], "user");
    assert_eq!(
        e["memory"]["dir"],
        p.home
            .path()
            .join(".claude/agent-memory/notes")
            .display()
            .to_string()
    );
    let tools: Vec<&str> = e["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(tools, ["Bash", "Edit", "Read", "Write"]);
    let text = p.run(None, &["agents", "show", "notes", "--effective"]);
    assert!(
        text.stdout.contains("effort:      high ("),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("memory:      "), "{}", text.stdout);
}

#[test]
fn a_memory_folder_reached_through_a_link_is_not_opened() {
    let p = Project::new();
    p.write(".claude/agents/notes.md", NOTES);
    // Someone pointed the memory folders somewhere else.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(p.home.path().join(".claude")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), p.home.path().join(".claude/agent-memory"))
        .unwrap();
    let memory = p.home.path().join(".claude/agent-memory/notes/MEMORY.md");
    let server = FakeServer::start([
        spawn("write"),
        anthropic::tool_use_reply(
            "toolu_w",
            "Write",
            json!({"file_path": memory.display().to_string(), "content": "x"}),
        ),
        anthropic::text_reply("ok"),
        anthropic::text_reply("done"),
    ]);
    p.run(Some(&server), &["run", "go"]).ok();
    let w = &last_tool_results(&server.request(2).json)[0];
    assert_eq!(w["is_error"], true, "{w}");
    assert!(!elsewhere.path().join("notes/MEMORY.md").exists());
}
