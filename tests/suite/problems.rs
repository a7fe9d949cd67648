//! How a failed sub-agent's problem reaches its parent: through the
//! `run_problem` / `provider_problem` templates (typed contexts), never as
//! cadre's own error text. Each test overrides those templates on disk, so
//! the exact text the parent's model receives proves the template was
//! used; the people-facing `error` (meta file) keeps cadre's account.

use serde_json::json;

use super::harness::{
    Project, assistant_turns, child_requests_of, is_main_session, last_tool_results, main_requests,
    result_text, user_texts,
};
use super::kit::{FakeServer, Reply, anthropic};

/// Overrides that print the problem's data and nothing of cadre's words.
const RUN_PROBLEM: &str = "RUN[{{problem.kind}}{{#if (eq problem.kind \"provider\")}}: {{#with problem}}{{> provider_problem}}{{/with}}{{/if}}]";
const PROVIDER_PROBLEM: &str = "PROVIDER[{{provider.kind}}{{#if (eq provider.kind \"http\")}} {{provider.status}} said={{provider.message}}{{/if}}]";

/// A project whose templates folder overrides the two problem templates.
fn project() -> Project {
    let mut p = Project::new();
    p.config("[agents]\nbuiltin_dir = \"builtin\"\n");
    p.write("builtin/templates/run_problem.hbs", RUN_PROBLEM);
    p.write("builtin/templates/provider_problem.hbs", PROVIDER_PROBLEM);
    p
}

/// Words of `ProviderError`'s and `RunError`'s `Display`: none may reach
/// the model.
const CADRE_WORDS: &[&str] = &[
    "gave up after",
    "API error",
    "provider.max_retries",
    "the stream was cut",
    "connection cut",
    "ended before",
    "provider.idle_timeout_ms",
];

fn assert_no_cadre_words(text: &str) {
    for w in CADRE_WORDS {
        assert!(!text.contains(w), "{w:?} reached the model: {text}");
    }
}

#[test]
fn a_childs_exhausted_retries_reach_the_parent_as_the_templates_words() {
    let p = project();
    let server = FakeServer::route(|r| {
        if !is_main_session(r) {
            return Reply::anthropic_error(500, "api_error", "upstream exploded");
        }
        match assistant_turns(r) {
            0 => anthropic::tool_use_reply(
                "toolu_d",
                "Agent",
                json!({"description": "D", "prompt": "look around", "subagent_type": "general-purpose"}),
            ),
            _ => anthropic::text_reply("parent finished"),
        }
    });
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    // max_retries = 2: three attempts, then the child fails.
    assert_eq!(child_requests_of(&server, true).len(), 3);
    let mains = main_requests(&server);
    let r = &last_tool_results(&mains[1].json)[0];
    assert_eq!(r["is_error"], true, "{r}");
    let text = result_text(r);
    assert_eq!(
        text,
        "Agent \"D\" failed: RUN[provider: PROVIDER[http 500 said=upstream exploded]]"
    );
    assert_no_cadre_words(&mains[1].body_str());
    // People still get cadre's account of it.
    let metas = p.meta_files();
    let error = metas[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("gave up after 3 attempts"), "{error}");
}

#[test]
fn a_stream_cut_mid_message_reaches_the_parent_in_its_task_notification() {
    let p = project();
    let server = FakeServer::route(|r| {
        if !is_main_session(r) {
            let events = anthropic::message().text("half an answer, then").events();
            return Reply::CutAfter { events, n: 3 };
        }
        match assistant_turns(r) {
            0 => anthropic::tool_use_reply(
                "toolu_bg",
                "Agent",
                json!({"description": "cut", "prompt": "p", "run_in_background": true}),
            ),
            1 => anthropic::text_reply("waiting"),
            _ => anthropic::text_reply("final"),
        }
    });
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let mains = main_requests(&server);
    let last = mains.last().unwrap();
    let texts = user_texts(last);
    assert!(
        texts.contains(
            "<summary>Agent \"cut\" failed: RUN[provider: PROVIDER[stream_broke]]</summary>"
        ),
        "{texts}"
    );
    assert_no_cadre_words(&last.body_str());
    let metas = p.meta_files();
    let error = metas[0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("stream"), "{error}");
}

#[test]
fn a_task_stopped_by_task_stop_carries_a_typed_cancel_to_its_notification() {
    let p = project();
    // The notification's own override shows the problem it was given.
    p.write(
        "builtin/templates/task_notification.hbs",
        "<task-notification>{{status}} {{#if problem}}{{> run_problem}}{{/if}}</task-notification>",
    );
    let server = FakeServer::route(|r| {
        if is_main_session(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply(
                    "toolu_1",
                    "Agent",
                    json!({"description": "endless", "prompt": "p", "name": "endless", "run_in_background": true}),
                ),
                1 => {
                    anthropic::tool_use_reply("toolu_2", "TaskStop", json!({"task_id": "endless"}))
                }
                2 => anthropic::text_reply("stopped it"),
                _ => anthropic::text_reply("final"),
            };
        }
        anthropic::text_reply("too late").delayed(std::time::Duration::from_secs(20))
    });
    let run = p.run(Some(&server), &["run", "go"]);
    run.ok();
    let last = user_texts(main_requests(&server).last().unwrap());
    assert!(
        last.contains("<task-notification>killed RUN[cancelled]</task-notification>"),
        "{last}"
    );
}

#[test]
fn a_failed_small_model_request_reaches_web_fetch_as_the_templates_words() {
    let site = FakeServer::start([Reply::html("<html><body><h1>Docs</h1></body></html>")]);
    site.skip_invariant_checks();
    let url = format!("{}/docs", site.url());
    let mut p = project();
    p.config("[permissions]\nallow = [\"WebFetch(domain:127.0.0.1)\"]\n");
    let fetch = json!({"url": url, "prompt": "What is it?"});
    let server = FakeServer::route(move |r| {
        // The small model's request: no system prompt.
        if !r.body_str().contains("\"system\"") {
            return Reply::anthropic_error(429, "rate_limit_error", "slow down");
        }
        match assistant_turns(r) {
            0 => anthropic::tool_use_reply("toolu_f", "WebFetch", fetch.clone()),
            _ => anthropic::text_reply("done"),
        }
    });
    p.run(Some(&server), &["run", "read it"]).ok();
    let mains = main_requests(&server);
    let r = &last_tool_results(&mains[1].json)[0];
    assert_eq!(r["is_error"], true, "{r}");
    assert_eq!(
        result_text(r),
        format!(
            "WebFetch could not read {url}: the model reading the page failed: PROVIDER[rate_limited]"
        )
    );
    assert_no_cadre_words(&mains[1].body_str());
}

#[test]
fn a_teammate_whose_requests_fail_is_reported_to_the_lead_in_the_templates_words() {
    let mut p = project();
    p.env("CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS", "1");
    let server = FakeServer::route(|r| {
        if !is_main_session(r) {
            return Reply::anthropic_error(500, "api_error", "boom");
        }
        match assistant_turns(r) {
            0 => anthropic::tool_use_reply(
                "toolu_a",
                "Agent",
                json!({"description": "alice", "prompt": "take a task", "name": "alice"}),
            ),
            _ => anthropic::text_reply("ok"),
        }
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let mains = main_requests(&server);
    let told = mains
        .iter()
        .find(|r| r.body_str().contains("alice has stopped: "))
        .unwrap_or_else(|| panic!("the lead was told: {:#?}", mains.last().map(user_texts)));
    assert!(
        told.body_str()
            .contains("alice has stopped: RUN[provider: PROVIDER[http 500 said=boom]]"),
        "{}",
        user_texts(told)
    );
    assert_no_cadre_words(&told.body_str());
}
