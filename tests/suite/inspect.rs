//! The inspection commands through the real binary: `agents list|show|
//! validate`, `flags`, `tools schema`, and the exit codes of bad usage.
//! JSON outputs are snapshot-tested with temp paths redacted.

use serde_json::Value;

use super::harness::Project;

const REVIEWER: &str = "---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep, Bash(git diff:*)\ndisallowedTools: Bash\nmodel: opus\nmaxTurns: 7\ncolor: blue\n---\nReview.\n";

/// Replaces the project and home folders with placeholders.
fn redact(p: &Project, text: &str) -> String {
    text.replace(&p.path().display().to_string(), "[PROJECT]")
        .replace(&p.home.path().display().to_string(), "[HOME]")
}

#[test]
fn agents_list_json_shows_sources_and_shadowing() {
    let p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    // A user-level agent of the same name loses to the project's.
    let user = p.home.path().join(".claude/agents");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("reviewer.md"),
        "---\nname: reviewer\ndescription: user copy\n---\nx\n",
    )
    .unwrap();
    let run = p.run(None, &["agents", "list", "--json"]);
    run.ok();
    insta::assert_snapshot!("agents_list_json", redact(&p, &run.stdout));
    let all: Value = p
        .run(None, &["agents", "list", "--all", "--json"])
        .ok()
        .json();
    let shadowed: Vec<&Value> = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| !a["shadowed_by"].is_null())
        .collect();
    assert_eq!(shadowed.len(), 1);
    assert_eq!(shadowed[0]["source"], "user");
    assert_eq!(shadowed[0]["shadowed_by"], "project");
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .any(|a| a["name"] == "fork" && a["synthetic"] == true)
    );
}

#[test]
fn agents_show_effective_resolves_model_and_tools() {
    let p = Project::new();
    p.write(".claude/agents/reviewer.md", REVIEWER);
    let v = p
        .run(
            None,
            &["agents", "show", "reviewer", "--json", "--effective"],
        )
        .ok()
        .json();
    assert_eq!(v["effective"]["model"], "claude-opus-4-5");
    assert_eq!(v["effective"]["model_source"], "definition");
    // No `permissionMode`: it inherits the main session's.
    assert_eq!(v["effective"]["permission_mode"], "default");
    assert_eq!(
        v["effective"]["tools"],
        serde_json::json!(["Grep", "Read"]),
        "Bash is denied by base name"
    );
    assert_eq!(
        v["tools"],
        serde_json::json!(["Read", "Grep", "Bash(git diff:*)"])
    );
    insta::assert_snapshot!(
        "agents_show_effective",
        redact(&p, &serde_json::to_string_pretty(&v).unwrap())
    );
    let mut p2 = Project::new();
    p2.write(".claude/agents/reviewer.md", REVIEWER);
    p2.env("CADRE_SUBAGENT_MODEL", "pinned");
    let v = p2
        .run(
            None,
            &["agents", "show", "reviewer", "--json", "--effective"],
        )
        .ok()
        .json();
    assert_eq!(v["effective"]["model"], "pinned");
    assert_eq!(v["effective"]["model_source"], "env");
    let run = p.run(None, &["agents", "show", "nobody"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("no agent named `nobody`"));
}

#[test]
fn validate_reports_every_problem_with_file_and_line_and_fails_on_errors() {
    let p = Project::new();
    p.write(
        ".claude/agents/good.md",
        "---\nname: good\ndescription: fine\n---\nok\n",
    );
    p.write(
        ".claude/agents/bad-color.md",
        "---\nname: colorful\ndescription: d\ncolor: mauve\n---\nx\n",
    );
    p.write(".claude/agents/no-desc.md", "---\nname: nodesc\n---\nx\n");
    p.write(".claude/agents/broken.yaml", "name: [unclosed\n");
    let run = p.run(None, &["agents", "validate", "--json"]);
    assert_eq!(run.code, 1, "errors present: {}", run.stdout);
    let v = run.json();
    let diags = v["diagnostics"].as_array().unwrap();
    let find = |file: &str| {
        diags
            .iter()
            .find(|d| d["path"].as_str().is_some_and(|p| p.ends_with(file)))
            .cloned()
    };
    let color = find("bad-color.md").expect("color warning");
    assert_eq!(color["severity"], "warning");
    assert_eq!(color["line"], 4);
    let nodesc = find("no-desc.md").expect("missing description");
    assert_eq!(nodesc["severity"], "error");
    assert!(nodesc["line"].is_u64());
    let broken = find("broken.yaml").expect("syntax error");
    assert_eq!(broken["severity"], "error");
    assert_eq!(broken["line"], 1);
    assert!(
        v["agents"].as_u64().unwrap() >= 2,
        "the good ones still load"
    );
    let list: Value = p.run(None, &["agents", "list", "--json"]).ok().json();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert!(names.contains(&"good") && names.contains(&"colorful") && !names.contains(&"nodesc"));

    // Paths given explicitly; human output is path:line:col.
    let run = p.run(None, &["agents", "validate", ".claude/agents/bad-color.md"]);
    assert_eq!(run.code, 0, "a warning is not a failure");
    assert!(
        run.stdout.contains("bad-color.md:4:8: warning:"),
        "{}",
        run.stdout
    );
}

#[test]
fn flags_json_says_where_each_value_came_from() {
    let mut p = Project::new();
    p.config("[features]\nDISABLE_BACKGROUND_TASKS = true\n");
    p.env("CADRE_FEATURES__FORK_SUBAGENT", "on");
    let v = p.run(None, &["flags", "--json"]).ok().json();
    let flag = |n: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == n)
            .unwrap()
            .clone()
    };
    let fork = flag("FORK_SUBAGENT");
    assert_eq!(fork["value"], true);
    assert_eq!(fork["set_by"], "env");
    assert_eq!(fork["effective"], false);
    assert_eq!(fork["blocked_by"], "non_interactive");
    assert_eq!(flag("DISABLE_BACKGROUND_TASKS")["set_by"], "file");
    let v = p
        .run(
            None,
            &[
                "--feature",
                "FORK_SUBAGENT=off",
                "flags",
                "--json",
                "--session",
                "interactive",
            ],
        )
        .ok()
        .json();
    let fork = v
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "FORK_SUBAGENT")
        .unwrap()
        .clone();
    assert_eq!(fork["set_by"], "cli");
    assert_eq!(fork["value"], false);
    let v = p
        .run(
            None,
            &[
                "--feature",
                "FORK_SUBAGENT=on",
                "flags",
                "--json",
                "--session",
                "interactive",
            ],
        )
        .ok()
        .json();
    assert_eq!(
        v.as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == "FORK_SUBAGENT")
            .unwrap()["effective"],
        true
    );
}

#[test]
fn tools_schema_lists_the_tools_the_model_sees() {
    let p = Project::new();
    let v = p.run(None, &["tools", "schema", "--json"]).ok().json();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        [
            "Agent",
            "AskUserQuestion",
            "Bash",
            "Edit",
            "Glob",
            "Grep",
            "NotebookEdit",
            "Read",
            "SendMessage",
            "Skill",
            "TaskOutput",
            "TaskStop",
            "TodoWrite",
            "WebFetch",
            "WebSearch",
            "Write"
        ]
    );
    for t in v.as_array().unwrap() {
        assert!(t["description"].as_str().is_some_and(|d| !d.is_empty()));
        assert_eq!(t["input_schema"]["type"], "object", "{}", t["name"]);
    }
    let read = &v
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Read")
        .unwrap()["input_schema"];
    insta::assert_json_snapshot!("read_schema", read);
}

#[test]
fn bad_usage_and_configuration_exit_2() {
    let mut p = Project::new();
    let run = p.run(None, &["--feature", "FORK_SUBAGENT", "flags"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("NAME=on"), "{}", run.stderr);
    let run = p.run(None, &["run", "--agent", "nope", "x"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("Available agents"), "{}", run.stderr);
    assert_eq!(p.run(None, &["no-such-command"]).code, 2);
    p.config("[agents]\nmax_depth = \"deep\"\n");
    let run = p.run(None, &["flags"]);
    assert_eq!(run.code, 2);
    let shown = redact(&p, &run.stderr);
    assert!(
        shown.contains("[PROJECT]/cadre.toml:") && shown.contains("agents.max_depth"),
        "{shown}"
    );
}

#[test]
fn cli_agents_load_and_one_bad_entry_drops_only_itself() {
    let p = Project::new();
    let json = r#"{"helper": {"description": "helps", "prompt": "You help."}, "broken": {"prompt": "no description"}}"#;
    let run = p.run(None, &["--agents", json, "agents", "list", "--json"]);
    run.ok();
    let v = run.json();
    let helper = v
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "helper")
        .expect("helper loads");
    assert_eq!(helper["source"], "cli");
    assert!(helper["path"].is_null());
    assert!(!v.as_array().unwrap().iter().any(|a| a["name"] == "broken"));
    assert!(
        run.stderr.contains("--agents"),
        "the bad entry is reported: {}",
        run.stderr
    );
}

#[test]
fn works_with_no_files_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_cadre"))
        .current_dir(dir.path())
        .env_clear()
        .env("HOME", home.path())
        .args(["agents", "list", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert_eq!(names, ["Explore", "general-purpose", "Plan"]);
    assert!(
        v.as_array()
            .unwrap()
            .iter()
            .all(|a| a["source"] == "builtin" && a["path"].is_null())
    );
}

const WEB: &str = "---\nname: web\ndescription: Reads the web\ntools: WebFetch, WebSearchX, Read, Write, mcp__jira__find\n---\nBrowse.\n";

/// A tool an agent asks for and will not get is never silent: `show
/// --effective` lists it with the reason, `validate` warns, and the Agent
/// tool's line for the agent names only what it really has.
#[test]
fn tools_an_agent_will_not_get_are_named_with_the_reason() {
    let mut p = Project::new();
    p.config("[permissions]\ndeny = [\"Write\"]\n");
    p.write(".claude/agents/web.md", WEB);
    let v = p
        .run(None, &["agents", "show", "web", "--json", "--effective"])
        .ok()
        .json();
    assert_eq!(
        v["effective"]["tools"],
        serde_json::json!(["Read", "WebFetch"])
    );
    assert_eq!(
        v["effective"]["withheld_tools"],
        serde_json::json!([
            {"tool": "WebSearchX", "reason": "unknown"},
            {"tool": "Write", "reason": "denied", "rule": "Write"},
            {"tool": "mcp__jira__find", "reason": "mcp_server_missing", "server": "jira"},
        ])
    );
    let text = p
        .run(None, &["agents", "show", "web", "--effective"])
        .ok()
        .stdout
        .clone();
    assert!(
        text.contains("not given:   WebSearchX (unknown tool)")
            && text.contains("not given:   Write (denied by the permission rule `Write`)")
            && text.contains("not given:   mcp__jira__find (MCP server `jira` is not configured)"),
        "{text}"
    );

    let run = p.run(None, &["agents", "validate"]);
    run.ok();
    assert!(
        run.stdout.contains(
            "web.md:4:8: warning: tools: unknown tool `WebSearchX`; the agent runs without it"
        ) || run
            .stdout
            .contains("tools: unknown tool `WebSearchX`; the agent runs without it"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(
            "agent `web` will not get tool `Write`: denied by the permission rule `Write`"
        ),
        "{}",
        run.stdout
    );
    // Checking the one file says the same.
    let run = p.run(None, &["agents", "validate", ".claude/agents/web.md"]);
    run.ok();
    assert!(
        run.stdout.contains("unknown tool `WebSearchX`"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("will not get tool `mcp__jira__find`"),
        "{}",
        run.stdout
    );

    let body = p.run(None, &["render", "go"]).ok().json();
    let listing = super::harness::listings(&body);
    assert!(
        listing.contains("- web: Reads the web (Tools: WebFetch, Read)"),
        "{listing}"
    );
}
