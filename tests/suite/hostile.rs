//! Hostile files through the real binary: an agent body whose template
//! partials include themselves fails its own spawn (never the process), a
//! tool schema that is not a JSON Schema is reported and skipped, and
//! frontmatter that Claude Code reads is read the same way.

use serde_json::json;

use super::harness::assistant_turns;
use super::harness::{Project, is_main_session as is_main, last_tool_results, result_text};
use super::kit::{FakeServer, anthropic};

#[test]
fn a_self_including_partial_in_an_agent_body_fails_that_spawn_only() {
    let p = Project::new();
    let file = p.write(
        ".claude/agents/looper.md",
        "---\nname: looper\ndescription: loops\n---\n{{#*inline \"p\"}}again {{> p}}{{/inline}}{{> p}}\n",
    );
    let server = FakeServer::route(|r| {
        if is_main(r) {
            return match assistant_turns(r) {
                0 => anthropic::message()
                    .tool_use(
                        "toolu_loop",
                        "Agent",
                        json!({"description": "loop", "prompt": "go", "subagent_type": "looper"}),
                    )
                    .tool_use(
                        "toolu_ok",
                        "Agent",
                        json!({"description": "fine", "prompt": "go", "subagent_type": "general-purpose"}),
                    )
                    .reply(),
                _ => anthropic::text_reply("parent carried on"),
            };
        }
        anthropic::text_reply("general-purpose answer")
    });
    let run = p.run(Some(&server), &["run", "--output-format", "json", "go"]);
    run.ok();
    assert_eq!(run.json()["result"], "parent carried on");
    let mains: Vec<_> = server.requests().into_iter().filter(is_main).collect();
    let results = last_tool_results(&mains[1].json);
    assert_eq!(results[0]["is_error"], true, "{}", results[0]);
    let text = result_text(&results[0]);
    assert!(text.contains(&file.display().to_string()), "{text}");
    assert!(
        text.contains("partial `p` includes itself (p → p)"),
        "{text}"
    );
    assert!(
        result_text(&results[1]).starts_with("general-purpose answer"),
        "the other spawn of the same turn runs"
    );
}

#[test]
fn a_tool_schema_that_is_not_a_json_schema_is_reported_and_skipped() {
    let mut p = Project::new();
    p.config("[agents]\nbuiltin_dir = \"builtin\"\n");
    let file = p.write(
        "builtin/tools/Glob.yaml",
        "name: Glob\ndescription: my glob\ninput_schema:\n  type: object\n  properties:\n    pattern:\n      type: 5\n",
    );
    let run = p.run(None, &["tools", "schema", "--json", "--tool", "Glob"]);
    run.ok();
    assert!(
        run.stderr.contains(&format!(
            "{}:7:13: error: `input_schema` is not a valid JSON Schema at `/properties/pattern/type`",
            file.display()
        )),
        "{}",
        run.stderr
    );
    // The invalid override is skipped: the built-in Glob is what the model sees.
    let tools = run.json();
    assert_ne!(tools[0]["description"], "my glob");
    assert_eq!(
        tools[0]["input_schema"]["properties"]["pattern"]["type"],
        "string"
    );
}

#[test]
fn frontmatter_is_read_as_claude_code_reads_it() {
    let p = Project::new();
    p.write(
        ".claude/agents/promo.md",
        "---\nname: promo\ndescription: Our app just hit #1 on the store\n----\nCelebrate.\n",
    );
    let run = p.run(None, &["agents", "show", "promo", "--json"]);
    run.ok();
    let v = run.json();
    assert_eq!(v["description"], "Our app just hit #1 on the store", "{v}");
    assert!(!run.stderr.contains("error"), "{}", run.stderr);
}
