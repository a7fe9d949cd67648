//! The Agent tool end to end: every row of the decision table, named agents
//! and general-purpose, forks with byte-identical prefixes, the recursion
//! guard, model resolution and schema trimming — through the real binary.

use serde_json::{Value, json};

use super::harness::{
    MAIN_MARKER, Project, assistant_turns, child_requests_of, is_fork_child,
    is_main_session as is_main, last_tool_results, result_text, tool, tool_names,
};
use super::kit::{FakeServer, RecordedRequest, anthropic};

fn child_requests(server: &FakeServer) -> Vec<RecordedRequest> {
    child_requests_of(server, true)
}

const REVIEWER: &str = "---\nname: reviewer\ndescription: Reviews code for bugs\ntools: Read, Grep, Glob\nmodel: haiku\n---\nREVIEWER-BODY: you review code.\n";

/// A server where the main agent makes `calls` (one assistant message),
/// every child answers `child says: <its first user text or directive>`,
/// and the main agent then answers "all done".
fn spawning_server(calls: Vec<(&'static str, Value)>) -> FakeServer {
    FakeServer::route(move |r| {
        if is_main(r) {
            if assistant_turns(r) == 0 {
                let mut m = anthropic::message().text("delegating");
                for (id, input) in &calls {
                    m = m.tool_use(id, "Agent", input.clone());
                }
                return m.reply();
            }
            return anthropic::text_reply("all done");
        }
        let who = if is_fork_child(r) {
            format!("fork:{}", r.last_user_text().lines().last().unwrap_or(""))
        } else {
            "child".into()
        };
        anthropic::message()
            .text(&format!("{who} finished"))
            .usage(50, 10)
            .reply()
    })
}

fn main_second_request(server: &FakeServer) -> RecordedRequest {
    server
        .requests()
        .into_iter()
        .find(|r| is_main(r) && assistant_turns(r) == 1)
        .expect("main's second request")
}

fn fork_on(p: &mut Project) {
    // Forks are gated off in non-interactive sessions by default; this
    // admin removes that gate so `cadre run` may fork.
    p.config("[features]\nFORK_SUBAGENT = true\n[flags.FORK_SUBAGENT]\ndescription = \"fork\"\ngates = [\"coordinator\"]\n");
}

#[test]
fn named_agent_gets_its_own_prompt_tools_and_model() {
    let p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    let server = spawning_server(vec![(
        "toolu_1",
        json!({"description": "review", "prompt": "review src", "subagent_type": "reviewer"}),
    )]);
    p.run(Some(&server), &["run", "go"]).ok();
    let children = child_requests(&server);
    assert_eq!(children.len(), 1);
    let c = &children[0];
    assert!(
        c.system_text().contains("REVIEWER-BODY"),
        "{}",
        c.system_text()
    );
    assert!(!c.system_text().contains(MAIN_MARKER));
    assert_eq!(tool_names(&c.json), ["Glob", "Grep", "Read"]);
    assert_eq!(c.json["model"], "claude-haiku-4-5");
    assert_eq!(
        c.messages().len(),
        1,
        "a fresh history holding only the prompt"
    );
    assert_eq!(c.messages()[0]["content"][0]["text"], "review src");
    let r = &last_tool_results(&main_second_request(&server).json)[0];
    let text = result_text(r);
    assert!(text.starts_with("child finished"), "{text}");
    assert!(
        text.contains("agentId: a") && text.contains("<usage>total_tokens: 60"),
        "trailer: {text}"
    );
}

#[test]
fn no_type_means_general_purpose_and_fork_is_ignored_while_not_effective() {
    for input in [
        json!({"description": "d", "prompt": "p"}),
        json!({"description": "d", "prompt": "p", "fork": true}),
    ] {
        let p = Project::new();
        let server = spawning_server(vec![("toolu_1", input)]);
        p.run(Some(&server), &["run", "go"]).ok();
        let children = child_requests(&server);
        assert_eq!(children.len(), 1);
        let c = &children[0];
        assert!(!is_fork_child(c), "not a fork");
        assert!(
            !tool_names(&c.json).contains(&"Agent".to_string()),
            "general-purpose does not nest"
        );
        assert!(tool_names(&c.json).contains(&"Write".to_string()));
        assert_eq!(
            c.json["model"], "claude-sonnet-4-5",
            "inherits the parent's model"
        );
        assert!(tool(&main_second_request(&server).json, "Agent").is_some());
    }
}

#[test]
fn fork_true_with_a_type_forks_while_effective_and_names_it_while_not() {
    // Effective: subagent_type is ignored and the child is a fork.
    let mut p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    fork_on(&mut p);
    let server = spawning_server(vec![(
        "toolu_1",
        json!({"description": "d", "prompt": "look", "subagent_type": "reviewer", "fork": true}),
    )]);
    p.run(Some(&server), &["run", "go"]).ok();
    let c = &child_requests(&server)[0];
    assert!(is_fork_child(c));
    assert!(!c.system_text().contains("REVIEWER-BODY"));

    // Not effective (default gates in a non-interactive run): the named agent.
    let mut p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    p.config("[features]\nFORK_SUBAGENT = true\n");
    let server = spawning_server(vec![(
        "toolu_1",
        json!({"description": "d", "prompt": "look", "subagent_type": "reviewer", "fork": true}),
    )]);
    p.run(Some(&server), &["run", "go"]).ok();
    let first = &server.request(0).json;
    assert!(
        tool(first, "Agent").unwrap()["input_schema"]["properties"]
            .get("fork")
            .is_none()
    );
    let c = &child_requests(&server)[0];
    assert!(!is_fork_child(c));
    assert!(c.system_text().contains("REVIEWER-BODY"));
}

#[test]
fn sibling_forks_share_every_byte_up_to_their_directive() {
    let mut p = Project::new();
    fork_on(&mut p);
    let server = spawning_server(vec![
        (
            "toolu_a",
            json!({"description": "one", "prompt": "check module A", "fork": true}),
        ),
        (
            "toolu_b",
            json!({"description": "two", "prompt": "check module B", "fork": true}),
        ),
    ]);
    p.run(Some(&server), &["run", "refactor everything"]).ok();
    let mut forks = child_requests(&server);
    assert_eq!(forks.len(), 2);
    // Both bodies quote both calls (the cloned assistant message); order
    // them by their own directive.
    let (common, len) = super::harness::assert_siblings_share_up_to_directive(
        &mut forks,
        "Your directive: check module B",
    );
    let shared_share = common as f64 / len as f64;
    assert!(shared_share > 0.9, "shared share {shared_share}");

    // The shared prefix is the parent's request: same model, system and tools
    // bytes; the parent's messages, then the cloned assistant message and
    // one user message of placeholders plus the directive.
    let parent = &server.request(0);
    let fork = &forks[0];
    for key in ["model", "system", "tools", "max_tokens"] {
        assert_eq!(
            parent.json[key].to_string(),
            fork.json[key].to_string(),
            "{key} differs"
        );
    }
    let pm = parent.messages();
    let fm = fork.messages();
    assert_eq!(fm.len(), pm.len() + 2);
    assert_eq!(fm[0]["content"][0]["text"], pm[0]["content"][0]["text"]);
    assert_eq!(fm[1]["role"], "assistant");
    let calls: Vec<&str> = fm[1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["id"].as_str())
        .collect();
    assert_eq!(
        calls,
        ["toolu_a", "toolu_b"],
        "the assistant message is cloned whole"
    );
    let last = fm[2]["content"].as_array().unwrap();
    assert_eq!(last.len(), 3);
    for (block, id) in last.iter().zip(["toolu_a", "toolu_b"]) {
        assert_eq!(block["tool_use_id"], id);
        assert_eq!(
            result_text(block),
            "Fork started — processing in background"
        );
    }
    let directive = last[2]["text"].as_str().unwrap();
    assert!(directive.starts_with("<fork-boilerplate>"));
    assert!(directive.ends_with("Your directive: check module A"));

    // The parent got both results.
    let results = last_tool_results(&main_second_request(&server).json);
    assert_eq!(results.len(), 2);
    assert!(result_text(&results[0]).starts_with("fork:Your directive: check module A finished"));
}

#[test]
fn a_fork_that_tries_to_fork_gets_the_error_and_continues() {
    let mut p = Project::new();
    fork_on(&mut p);
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return if assistant_turns(r) == 0 {
                anthropic::tool_use_reply(
                    "toolu_1",
                    "Agent",
                    json!({"description": "d", "prompt": "dig", "fork": true}),
                )
            } else {
                anthropic::text_reply("main done")
            };
        }
        // The fork child: its own first turn tries to fork again.
        let own_turns = assistant_turns(r) - 1;
        if own_turns == 0 {
            anthropic::tool_use_reply(
                "toolu_2",
                "Agent",
                json!({"description": "again", "prompt": "deeper", "fork": true}),
            )
        } else {
            anthropic::text_reply("fork done")
        }
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let child_second = server
        .requests()
        .into_iter()
        .find(|r| is_fork_child(r) && assistant_turns(r) == 2)
        .expect("the fork continued");
    let r = &last_tool_results(&child_second.json)[0];
    assert_eq!(r["is_error"], true);
    assert_eq!(
        result_text(r),
        "Fork is not available inside a forked worker. Complete your task directly using your tools."
    );
    let main_result = &last_tool_results(&main_second_request(&server).json)[0];
    assert!(result_text(main_result).starts_with("fork done"));
}

#[test]
fn unknown_and_denied_types_are_error_results() {
    let mut p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    p.config("[permissions]\ndeny = [\"Agent(reviewer)\"]\n");
    let server = spawning_server(vec![
        (
            "toolu_1",
            json!({"description": "d", "prompt": "p", "subagent_type": "Nope"}),
        ),
        (
            "toolu_2",
            json!({"description": "d", "prompt": "p", "subagent_type": "reviewer"}),
        ),
        (
            "toolu_3",
            json!({"description": "d", "prompt": "p", "subagent_type": "fork"}),
        ),
        ("toolu_4", json!({"description": "d"})),
    ]);
    p.run(Some(&server), &["run", "go"]).ok();
    assert!(child_requests(&server).is_empty());
    let results = last_tool_results(&main_second_request(&server).json);
    assert_eq!(results.len(), 4);
    assert!(results.iter().all(|r| r["is_error"] == true));
    let unknown = result_text(&results[0]);
    assert!(
        unknown.starts_with("Agent type 'Nope' not found. Available agents: "),
        "{unknown}"
    );
    assert!(
        unknown.contains("Explore")
            && unknown.contains("general-purpose")
            && unknown.contains("reviewer")
    );
    assert!(
        !unknown.contains("fork"),
        "the synthetic fork is never listed: {unknown}"
    );
    let denied = result_text(&results[1]);
    assert!(
        denied.starts_with(
            "Agent type 'reviewer' has been denied by permission rule 'Agent(reviewer)' from "
        ),
        "{denied}"
    );
    assert!(
        result_text(&results[2]).starts_with("Agent type 'fork' not found"),
        "fork is an unknown type while not effective"
    );
    assert!(
        result_text(&results[3]).contains("prompt"),
        "missing prompt names the field"
    );
}

#[test]
fn a_type_in_another_case_names_its_one_agent_and_rules_still_apply() {
    // Small models write "General-purpose" or "EXPLORE"; exactly one agent
    // has that name ignoring case, so it is the one started. A deny rule
    // written for the real name still binds the variant.
    let mut p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    p.config("[permissions]\ndeny = [\"Agent(reviewer)\"]\n");
    let server = spawning_server(vec![
        (
            "toolu_1",
            json!({"description": "d", "prompt": "look around", "subagent_type": "EXPLORE"}),
        ),
        (
            "toolu_2",
            json!({"description": "d", "prompt": "p", "subagent_type": "Reviewer"}),
        ),
    ]);
    p.run(Some(&server), &["run", "go"]).ok();
    let children = child_requests(&server);
    assert_eq!(children.len(), 1, "only the Explore child ran");
    assert!(
        children[0].system_text().contains("code-search specialist"),
        "the child runs with Explore's prompt"
    );
    let results = last_tool_results(&main_second_request(&server).json);
    assert!(results[0].get("is_error").is_none(), "{}", results[0]);
    let denied = result_text(&results[1]);
    assert!(
        denied.starts_with(
            "Agent type 'reviewer' has been denied by permission rule 'Agent(reviewer)'"
        ),
        "{denied}"
    );
}

#[test]
fn explore_gets_no_write_edit_or_agent_and_invented_calls_are_rejected() {
    let p = Project::new();
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return if assistant_turns(r) == 0 {
                anthropic::tool_use_reply(
                    "toolu_1",
                    "Agent",
                    json!({"description": "find", "prompt": "find auth", "subagent_type": "Explore"}),
                )
            } else {
                anthropic::text_reply("main done")
            };
        }
        if assistant_turns(r) == 0 {
            anthropic::tool_use_reply(
                "toolu_w",
                "Write",
                json!({"file_path": "x.txt", "content": "nope"}),
            )
        } else {
            anthropic::text_reply("auth is in src/auth.rs")
        }
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let children = child_requests(&server);
    let names = tool_names(&children[0].json);
    for banned in ["Write", "Edit", "Agent"] {
        assert!(
            !names.contains(&banned.to_string()),
            "{banned} offered to Explore: {names:?}"
        );
    }
    assert!(names.contains(&"Read".to_string()) && names.contains(&"Grep".to_string()));
    assert_eq!(children[0].json["model"], "claude-haiku-4-5");
    let rejected = &last_tool_results(&children[1].json)[0];
    assert_eq!(rejected["is_error"], true);
    assert!(result_text(rejected).contains("No such tool available: Write"));
    assert!(!p.path().join("x.txt").exists());
    let main_result = result_text(&last_tool_results(&main_second_request(&server).json)[0]);
    assert_eq!(
        main_result, "auth is in src/auth.rs",
        "Explore is one-shot: no trailer"
    );
}

#[test]
fn subagent_model_env_overrides_everything_including_forks() {
    let mut p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    fork_on(&mut p);
    p.env("CADRE_SUBAGENT_MODEL", "override-model");
    let server = spawning_server(vec![
        (
            "toolu_1",
            json!({"description": "d", "prompt": "p", "subagent_type": "reviewer", "model": "opus"}),
        ),
        (
            "toolu_2",
            json!({"description": "d", "prompt": "p", "fork": true}),
        ),
    ]);
    p.run(Some(&server), &["run", "go"]).ok();
    let children = child_requests(&server);
    assert_eq!(children.len(), 2);
    assert!(children.iter().all(|c| c.json["model"] == "override-model"));
    let metas = p.meta_files();
    assert_eq!(metas.len(), 2);
    assert!(
        metas
            .iter()
            .all(|m| m["model_source"] == "env" && m["model"] == "override-model")
    );
}

#[test]
fn a_family_alias_matching_the_parent_reuses_its_exact_model() {
    let p = Project::new();
    let server = spawning_server(vec![
        (
            "toolu_1",
            json!({"description": "d", "prompt": "p", "model": "sonnet"}),
        ),
        (
            "toolu_2",
            json!({"description": "d", "prompt": "p", "model": "opus"}),
        ),
    ]);
    p.run(
        Some(&server),
        &["run", "--model", "claude-sonnet-4-20250514", "go"],
    )
    .ok();
    let mut models: Vec<String> = child_requests(&server)
        .iter()
        .map(|c| c.json["model"].as_str().unwrap().to_string())
        .collect();
    models.sort();
    assert_eq!(models, ["claude-opus-4-5", "claude-sonnet-4-20250514"]);
}

#[test]
fn schema_trimming_follows_flags_and_session_kind() {
    let schema = |p: &Project, args: &[&str]| -> Value {
        let mut all = vec!["tools", "schema", "--json", "--tool", "Agent"];
        all.extend_from_slice(args);
        let v = p.run(None, &all).ok().json();
        v[0]["input_schema"]["properties"].clone()
    };
    let mut p = Project::new();
    let props = schema(&p, &[]);
    assert!(props.get("run_in_background").is_some());
    assert!(props.get("fork").is_none());

    p.config("[features]\nFORK_SUBAGENT = true\nDISABLE_BACKGROUND_TASKS = true\n");
    let props = schema(&p, &[]);
    assert!(
        props.get("run_in_background").is_none(),
        "trimmed while background tasks are disabled"
    );
    assert!(
        props.get("fork").is_none(),
        "fork is gated off in non-interactive sessions"
    );
    let props = schema(&p, &["--session", "interactive"]);
    assert!(props.get("fork").is_some());
    let all = p
        .run(None, &["tools", "schema", "--json"])
        .ok()
        .stdout
        .clone();
    assert!(!all.contains("x-when"), "x-when never reaches the model");

    let mut p = Project::new();
    fork_on(&mut p);
    assert!(
        schema(&p, &[]).get("fork").is_some(),
        "present once the admin removes the gate"
    );
}

#[test]
fn a_fork_sent_while_trimmed_is_ignored_not_rejected() {
    let p = Project::new();
    let server = spawning_server(vec![(
        "toolu_1",
        json!({"description": "d", "prompt": "p", "fork": true, "run_in_background": false}),
    )]);
    p.run(Some(&server), &["run", "go"]).ok();
    let r = &last_tool_results(&main_second_request(&server).json)[0];
    assert!(r.get("is_error").is_none(), "{r}");
    assert_eq!(child_requests(&server).len(), 1);
}

#[test]
fn stream_json_reports_the_subagent_lifecycle() {
    let p = Project::new();
    let server = spawning_server(vec![(
        "toolu_1",
        json!({"description": "look around", "prompt": "p"}),
    )]);
    let run = p.run(
        Some(&server),
        &["run", "--output-format", "stream-json", "go"],
    );
    run.ok();
    let lines = run.json_lines();
    let start = lines
        .iter()
        .find(|l| l["type"] == "subagent_start")
        .expect("subagent_start");
    assert_eq!(start["agent_type"], "general-purpose");
    assert_eq!(start["description"], "look around");
    let end = lines
        .iter()
        .find(|l| l["type"] == "subagent_end")
        .expect("subagent_end");
    assert_eq!(end["agent_id"], start["agent_id"]);
    assert_eq!(end["status"], "completed");
    let v = lines.last().unwrap();
    assert_eq!(
        v["usage"]["output_tokens"],
        5 + 10 + 5,
        "the parent's usage includes the child's"
    );
}

#[test]
fn the_agent_list_and_fork_directive_render_from_templates() {
    let mut p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    fork_on(&mut p);
    let v = p
        .run(None, &["tools", "schema", "--json", "--tool", "Agent"])
        .ok()
        .json();
    let desc = v[0]["description"].as_str().unwrap().to_string();
    insta::assert_snapshot!("agent_tool_description_fork_on", desc);
    let p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    let v = p
        .run(None, &["tools", "schema", "--json", "--tool", "Agent"])
        .ok()
        .json();
    let desc = v[0]["description"].as_str().unwrap().to_string();
    assert!(
        !desc.to_lowercase().contains("fork"),
        "nothing about forks while not effective"
    );
    insta::assert_snapshot!("agent_tool_description_fork_off", desc);
    // The agent types are announced in the first user message instead.
    let body = p.run(None, &["render", "go"]).ok().json();
    insta::assert_snapshot!("agent_listing", super::harness::listings(&body));

    let mut p = Project::new();
    fork_on(&mut p);
    let server = spawning_server(vec![(
        "toolu_1",
        json!({"description": "d", "prompt": "THE DIRECTIVE", "fork": true}),
    )]);
    p.run(Some(&server), &["run", "go"]).ok();
    let c = &child_requests(&server)[0];
    let directive = c.messages().last().unwrap()["content"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["text"]
        .as_str()
        .unwrap()
        .to_string();
    insta::assert_snapshot!("fork_directive", directive);
}

/// Children of one turn that share an agent, model and tools share one
/// rendered system prompt; any difference in what the prompt is rendered
/// from (the model, the agent, its tools) gives that child its own.
#[test]
fn siblings_share_a_system_prompt_only_when_rendered_from_the_same_context() {
    let p = Project::new();
    let body = "{{agent_name}} on {{model}} with{{#each tools}} {{this}}{{/each}}.";
    p.write(
        ".claude/agents/alpha.md",
        &format!("---\nname: alpha\ndescription: A\ntools: Read\n---\n{body}\n"),
    );
    p.write(
        ".claude/agents/beta.md",
        &format!("---\nname: beta\ndescription: B\ntools: Read, Grep\n---\n{body}\n"),
    );
    let call = |prompt: &str, agent: &str, model: Option<&str>| {
        let mut input = json!({"description": prompt, "prompt": prompt, "subagent_type": agent});
        if let Some(m) = model {
            input["model"] = json!(m);
        }
        input
    };
    let server = spawning_server(vec![
        ("toolu_1", call("p1", "alpha", None)),
        ("toolu_2", call("p2", "alpha", None)),
        ("toolu_3", call("p3", "alpha", Some("opus"))),
        ("toolu_4", call("p4", "beta", None)),
    ]);
    p.run(Some(&server), &["run", "go"]).ok();
    let system_of = |prompt: &str| {
        let children = child_requests(&server);
        let c = children
            .iter()
            .find(|c| c.last_user_text().trim() == prompt)
            .unwrap_or_else(|| panic!("no child for {prompt}"));
        (
            c.system_text(),
            c.json["model"].as_str().unwrap_or("").to_string(),
        )
    };
    let (s1, m1) = system_of("p1");
    let (s2, _) = system_of("p2");
    let (s3, m3) = system_of("p3");
    let (s4, _) = system_of("p4");
    assert_eq!(s1, s2);
    assert!(s1.contains(&format!("alpha on {m1} with Read.")), "{s1}");
    assert_ne!(m1, m3);
    assert!(s3.contains(&format!("alpha on {m3} with Read.")), "{s3}");
    assert!(
        s4.contains(&format!("beta on {m1} with Grep Read.")),
        "{s4}"
    );
}

#[test]
fn claude_code_subagent_model_in_the_settings_env_pins_every_child() {
    let p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    p.write(
        ".claude/settings.json",
        r#"{"env": {"CLAUDE_CODE_SUBAGENT_MODEL": "settings-model"}}"#,
    );
    let server = spawning_server(vec![(
        "toolu_1",
        json!({"description": "d", "prompt": "p", "subagent_type": "reviewer", "model": "opus"}),
    )]);
    p.run(Some(&server), &["run", "go"]).ok();
    let children = child_requests(&server);
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].json["model"], "settings-model");
}
