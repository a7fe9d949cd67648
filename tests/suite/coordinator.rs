//! Coordinator mode end to end (docs/coordinator.md): the main session runs
//! as the built-in `coordinator` agent with only the orchestration tools,
//! every spawn is a background `worker`, workers are continued with
//! SendMessage, and a resumed session keeps the mode.

use serde_json::{Value, json};

use super::harness::{
    Project, assistant_turns, last_tool_results, result_text, tool, tool_names, user_texts,
};
use super::kit::{FakeServer, RecordedRequest, anthropic};

/// Words of agents/coordinator.md and agents/worker.md.
const COORDINATOR: &str = "You are cadre running as a coordinator";
const WORKER: &str = "You are a worker started by a coordinator";

fn is_coordinator(r: &RecordedRequest) -> bool {
    r.system_text().contains(COORDINATOR)
}

fn is_worker(r: &RecordedRequest) -> bool {
    r.system_text().contains(WORKER)
}

fn coordinators(server: &FakeServer) -> Vec<RecordedRequest> {
    server
        .requests()
        .into_iter()
        .filter(is_coordinator)
        .collect()
}

fn agent_schema(body: &Value) -> Value {
    tool(body, "Agent").expect("the Agent tool is offered")["input_schema"].clone()
}

/// A coordinator that starts one worker (no type given), waits, then answers.
fn one_worker_server() -> FakeServer {
    FakeServer::route(|r| {
        if is_coordinator(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_w",
                    "Agent",
                    json!({"description": "count files", "prompt": "count the files", "model": "haiku"}),
                ),
                1 => anthropic::text_reply("started a worker"),
                _ => anthropic::text_reply("the worker says 3"),
            };
        }
        anthropic::text_reply("there are 3 files")
    })
}

#[test]
fn the_coordinator_offers_only_the_orchestration_tools_and_its_prompt() {
    let mut p = Project::new();
    // Fork on and ungated except for coordinator mode: still no `fork`.
    p.config("[features]\nFORK_SUBAGENT = true\n[flags.FORK_SUBAGENT]\ndescription = \"f\"\ngates = [\"coordinator\"]\n");
    let server = one_worker_server();
    let r = p.run(Some(&server), &["--coordinator", "run", "how many files?"]);
    r.ok();
    assert_eq!(r.stdout.trim(), "the worker says 3");
    let mains = coordinators(&server);
    assert_eq!(mains.len(), 3, "launch, answer, notification turn");
    let first = &mains[0].json;
    assert_eq!(
        tool_names(first),
        ["Agent", "SendMessage", "TaskOutput", "TaskStop"],
        "exactly the orchestration tools"
    );
    let system = mains[0].system_text();
    let scratchpad = p.sessions_dir();
    assert!(
        system.contains(&format!("{}", scratchpad.display())) && system.contains("/scratchpad"),
        "the prompt names the shared scratchpad: {system}"
    );
    let schema = agent_schema(first);
    let props: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    assert!(!props.iter().any(|k| *k == "fork"), "{props:?}");
    assert!(
        !props.iter().any(|k| *k == "model"),
        "model is ignored: {props:?}"
    );
    let description = tool(first, "Agent").unwrap()["description"]
        .as_str()
        .unwrap();
    // The agent types are announced in the first user message.
    let listing = super::harness::listings(first);
    assert!(listing.contains("- worker: "), "{listing}");
    assert!(
        !listing.contains("- general-purpose:") && !listing.contains("- Explore:"),
        "only workers can be started: {listing}"
    );
    assert!(
        description.contains("the worker agent is used"),
        "{description}"
    );
    assert!(
        !description.contains("When to use it"),
        "the slim variant: {description}"
    );
}

#[test]
fn a_spawn_without_a_type_is_a_background_worker_and_its_model_is_ignored() {
    let p = Project::new();
    let server = one_worker_server();
    p.run(Some(&server), &["--coordinator", "run", "how many files?"])
        .ok();
    let mains = coordinators(&server);
    let launched = result_text(&last_tool_results(&mains[1].json)[0]);
    assert!(
        launched.starts_with("Async agent launched successfully."),
        "every spawn is background: {launched}"
    );
    let workers: Vec<RecordedRequest> = server.requests().into_iter().filter(is_worker).collect();
    assert_eq!(workers.len(), 1);
    assert_eq!(
        workers[0].json["model"], "claude-sonnet-4-5",
        "the call's `model: haiku` is ignored; the worker inherits"
    );
    assert_eq!(
        tool_names(&workers[0].json),
        [
            "Bash",
            "Edit",
            "Glob",
            "Grep",
            "NotebookEdit",
            "Read",
            "Skill",
            "TodoWrite",
            "WebFetch",
            "Write"
        ],
        "the worker's tool set, without the orchestration tools"
    );
    let last = user_texts(&mains[2]);
    assert!(last.contains("<task-notification>"), "{last}");
    assert!(
        last.contains("<result>there are 3 files</result>"),
        "{last}"
    );
    let meta = p.meta_files();
    assert_eq!(meta[0]["agent_type"], "worker");
    assert_eq!(meta[0]["background"], true);
}

#[test]
fn the_environment_variable_and_the_setting_turn_it_on_too() {
    for how in ["env", "setting"] {
        let mut p = Project::new();
        match how {
            "env" => {
                p.env("CLAUDE_CODE_COORDINATOR_MODE", "1");
            }
            _ => {
                p.env("CADRE_MODE", "coordinator");
            }
        }
        let server = one_worker_server();
        p.run(Some(&server), &["run", "how many files?"]).ok();
        let mains = coordinators(&server);
        assert!(!mains.is_empty(), "{how}: the coordinator prompt is sent");
        assert_eq!(
            tool_names(&mains[0].json),
            ["Agent", "SendMessage", "TaskOutput", "TaskStop"],
            "{how}"
        );
    }
}

#[test]
fn a_worker_is_continued_with_send_message() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if is_coordinator(r) {
            let n = assistant_turns(r);
            return match n {
                0 => anthropic::tool_use_reply(
                    "toolu_w",
                    "Agent",
                    json!({"description": "survey", "prompt": "survey the code"}),
                ),
                1 => anthropic::text_reply("waiting"),
                2 => {
                    // The notification names the worker's id: continue it.
                    let body = r.body_str();
                    let id = body
                        .split("<task-id>")
                        .nth(1)
                        .and_then(|s| s.split("</task-id>").next())
                        .unwrap()
                        .to_string();
                    anthropic::tool_use_reply(
                        "toolu_send",
                        "SendMessage",
                        json!({"to": id, "message": "now count the tests"}),
                    )
                }
                3 => anthropic::text_reply("asked again"),
                _ => anthropic::text_reply("done: 7 tests"),
            };
        }
        if assistant_turns(r) == 0 {
            anthropic::text_reply("surveyed")
        } else {
            anthropic::text_reply("7 tests")
        }
    });
    let r = p.run(Some(&server), &["--coordinator", "run", "survey and count"]);
    r.ok();
    assert_eq!(r.stdout.trim(), "done: 7 tests");
    server.assert_invariants();
    let workers: Vec<RecordedRequest> = server.requests().into_iter().filter(is_worker).collect();
    assert_eq!(workers.len(), 2, "the same worker ran twice");
    let second = workers[1].messages();
    assert_eq!(second.len(), 3, "its history continued: {second:?}");
    assert!(user_texts(&workers[1]).contains("now count the tests"));
    let last = user_texts(coordinators(&server).last().unwrap());
    assert!(last.contains("<result>7 tests</result>"), "{last}");
    assert_eq!(p.meta_files().len(), 1, "one worker, continued");
}

#[test]
fn a_resumed_session_stays_in_coordinator_mode() {
    let p = Project::new();
    let server = one_worker_server();
    p.run(Some(&server), &["--coordinator", "run", "how many files?"])
        .ok();
    let again = FakeServer::route(|_| anthropic::text_reply("still coordinating"));
    // No --coordinator this time: the transcript says which mode it was.
    let r = p.run(Some(&again), &["run", "--continue", "and now?"]);
    r.ok();
    let reqs = again.requests();
    assert_eq!(reqs.len(), 1);
    assert!(is_coordinator(&reqs[0]), "{}", reqs[0].system_text());
    assert_eq!(
        tool_names(&reqs[0].json),
        ["Agent", "SendMessage", "TaskOutput", "TaskStop"]
    );
    assert!(
        !agent_schema(&reqs[0].json)["properties"]
            .as_object()
            .unwrap()
            .contains_key("model")
    );
}

#[test]
fn normal_mode_offers_neither_the_worker_nor_the_coordinator() {
    let p = Project::new();
    let r = p.run(None, &["render", "hi"]);
    r.ok();
    let body: Value = serde_json::from_str(&r.stdout).unwrap();
    let description = tool(&body, "Agent").unwrap()["description"]
        .as_str()
        .unwrap();
    let listing = super::harness::listings(&body);
    assert!(listing.contains("- general-purpose: "), "{listing}");
    assert!(!listing.contains("- worker:"), "{listing}");
    assert!(!listing.contains("- coordinator:"), "{listing}");
    assert!(description.contains("the general-purpose agent is used"));
    assert!(agent_schema(&body)["properties"].get("model").is_some());
    assert!(tool_names(&body).contains(&"Read".to_string()));
}
