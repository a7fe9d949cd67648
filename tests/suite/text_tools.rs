//! `provider.tool_call_fallback = "json-text"` through the real binary: a
//! model that writes its tool call as JSON text (fenced or bare, with prose
//! around it) gets the tool run and its result sent back, over both wire
//! protocols; with the fallback off the JSON stays text.

use serde_json::{Value, json};

use super::harness::{Project, last_tool_results, result_text};
use super::kit::{FakeServer, anthropic, openai};

/// Turns the fallback on (through the environment layer: the test config
/// already has a `[provider]` table).
fn fallback_on(p: &mut Project) {
    p.env("CADRE_PROVIDER__TOOL_CALL_FALLBACK", "json-text");
}

fn fenced_read(path: &str) -> String {
    format!(
        "I'll read the file first.\n\n```json\n{}\n```",
        json!({"name": "Read", "arguments": {"file_path": path}})
    )
}

/// The transcript message line of the assistant's converted call.
fn converted_lines(p: &Project) -> Vec<Value> {
    p.transcript_lines()
        .into_iter()
        .filter(|l| l["type"] == "assistant" && l["converted_from_text"] == true)
        .collect()
}

#[test]
fn anthropic_text_tool_call_runs_the_tool_and_sends_its_result() {
    let mut p = Project::new();
    let file = p.write("notes.txt", "alpha\nbeta\n");
    fallback_on(&mut p);
    let server = FakeServer::start([
        anthropic::text_reply(&fenced_read(file.to_str().unwrap())),
        anthropic::text_reply("The notes say alpha and beta."),
    ]);
    let run = p.run(Some(&server), &["run", "what is in notes.txt?"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "The notes say alpha and beta.");
    let second = &server.request(1).json;
    let msgs = second["messages"].as_array().unwrap();
    let assistant = &msgs[msgs.len() - 2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][0]["text"], "I'll read the file first.");
    assert_eq!(assistant["content"][1]["type"], "tool_use");
    assert_eq!(assistant["content"][1]["name"], "Read");
    let id = assistant["content"][1]["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("toolu_text_"), "{id}");
    let results = last_tool_results(second);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["tool_use_id"], id.as_str());
    assert!(result_text(&results[0]).contains("alpha"));
    let lines = converted_lines(&p);
    assert_eq!(lines.len(), 1, "one converted message line");
    assert_eq!(lines[0]["converted_tool_calls"], json!([id]));
    assert_eq!(lines[0]["message"]["role"], "assistant");
}

#[test]
fn openai_bare_text_tool_call_runs_the_tool_and_sends_its_result() {
    let mut p = Project::new();
    let file = p.write("notes.txt", "gamma\n");
    fallback_on(&mut p);
    let call = json!({"name": "Read", "parameters": {"file_path": file.to_str().unwrap()}});
    let server = FakeServer::start([
        openai::text_reply(&format!("Reading {{it}} now: {call} then I answer.")),
        openai::text_reply("It says gamma."),
    ]);
    p.env("CADRE_PROVIDER__KIND", "openai")
        .env("CADRE_PROVIDER__BASE_URL", server.url());
    let run = p.run(None, &["run", "--model", "local-model", "read notes.txt"]);
    run.ok();
    assert_eq!(run.stdout.trim(), "It says gamma.");
    let second = &server.request(1).json;
    let msgs = second["messages"].as_array().unwrap();
    let assistant = msgs.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["content"], "Reading {it} now:  then I answer.");
    let calls = assistant["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["function"]["name"], "Read");
    let tool_msg = msgs.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool_msg["tool_call_id"], calls[0]["id"]);
    assert!(tool_msg["content"].as_str().unwrap().contains("gamma"));
    assert_eq!(converted_lines(&p).len(), 1);
}

#[test]
fn without_the_fallback_json_text_stays_text() {
    let p = Project::new();
    let text = fenced_read("notes.txt");
    let server = FakeServer::start([anthropic::text_reply(&text)]);
    let run = p.run(Some(&server), &["run", "what is in notes.txt?"]);
    run.ok();
    assert_eq!(server.requests().len(), 1, "no tool ran, no second request");
    assert!(run.stdout.contains("\"name\":\"Read\""), "{}", run.stdout);
    assert!(converted_lines(&p).is_empty());
}

#[test]
fn openai_without_the_fallback_json_text_stays_text() {
    let mut p = Project::new();
    let text = "{\"name\": \"Read\", \"arguments\": {\"file_path\": \"x\"}}";
    let server = FakeServer::start([openai::text_reply(text)]);
    p.env("CADRE_PROVIDER__KIND", "openai")
        .env("CADRE_PROVIDER__BASE_URL", server.url());
    let run = p.run(None, &["run", "--model", "local-model", "read x"]);
    run.ok();
    assert_eq!(server.requests().len(), 1);
    assert_eq!(run.stdout.trim(), text);
}

#[test]
fn a_json_naming_no_offered_tool_stays_text_with_the_fallback_on() {
    let mut p = Project::new();
    fallback_on(&mut p);
    let text = "```json\n{\"name\": \"launch_rockets\", \"arguments\": {\"count\": 3}}\n```";
    let server = FakeServer::start([anthropic::text_reply(text)]);
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    assert_eq!(server.requests().len(), 1);
    assert_eq!(run.stdout.trim(), text);
    assert!(converted_lines(&p).is_empty());
}

#[test]
fn the_shipped_local_config_loads_cleanly_and_leaves_tool_calls_to_the_server() {
    let p = Project::new();
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/config/local.toml");
    let run = p.run(None, &["--config", config, "render", "hi"]);
    run.ok();
    assert!(
        !run.stderr.contains("warning") && !run.stderr.contains("unknown key"),
        "{}",
        run.stderr
    );
    let body: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(body["model"], "local-model");
    assert!(
        body["messages"][0]["role"] == "system",
        "the OpenAI wire shape"
    );
    // scripts/local-model starts llama-server with a chat template that
    // turns the model's fenced-json calls into native ones, so the system
    // prompt carries no text-call instructions of its own.
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(!system.contains("How to use a tool"), "{system}");
    assert!(body["tools"].as_array().is_some_and(|t| !t.is_empty()));
    let script =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/local-model"))
            .unwrap();
    let template = "config/local-model/qwen2.5-fenced-tools.jinja";
    assert!(
        script.contains(template),
        "scripts/local-model uses {template}"
    );
    assert!(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(template)
            .is_file()
    );
}

#[test]
fn the_system_prompt_explains_text_tool_calls_only_with_the_fallback_on() {
    let mut p = Project::new();
    let system = |p: &Project| -> String {
        let v = p.run(None, &["render", "hi"]).ok().json();
        v["system"][0]["text"].as_str().unwrap().to_string()
    };
    assert!(!system(&p).contains("How to use a tool"));
    fallback_on(&mut p);
    let text = system(&p);
    assert!(text.contains("How to use a tool"), "{text}");
    assert!(
        text.contains(
            "TOOL must be exactly one of these tool names: Agent, AskUserQuestion, Bash, Edit"
        ),
        "{text}"
    );
    assert!(text.contains(r#"the tool name is always "Agent""#));
    // A sub-agent without the Agent tool gets the format but not the Agent example.
    let explore = p
        .run(None, &["render", "--agent", "Explore", "hi"])
        .ok()
        .json();
    let text = explore["system"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("How to use a tool") && !text.contains("always \"Agent\""),
        "{text}"
    );
}
