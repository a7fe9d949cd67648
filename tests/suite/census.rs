//! What `scripts/dotclaude-census` found in six public repositories'
//! `.claude` folders (docs/coming-from-claude-code.md, "Measured on real
//! folders"), each item reduced to a folder written the way the team wrote
//! it: every item is either honoured or said by `cadre config show` /
//! `validate`, never dropped without a word. The last test runs the census
//! script itself.

use serde_json::{Value, json};

use super::harness::{Project, listings, result_text};
use super::kit::{FakeServer, anthropic};
use super::worktrees::git;

/// A trusted scratch repository (the harness trusts its folder).
fn repo() -> Project {
    let p = Project::new();
    git(p.path(), &["init", "-q", "-b", "main"]);
    p
}

fn show(p: &Project) -> Value {
    let r = p.run(None, &["config", "show", "--json"]);
    r.ok();
    r.json()
}

/// 2anki/server: one matcher group with several hooks. Each is its own
/// item of `config show`, at its own line (they were all shown at the
/// group's matcher, so nobody could tell which of them was placed).
#[test]
fn census_each_hook_of_a_matcher_group_is_placed_at_its_own_entry() {
    let p = repo();
    p.write(
        ".claude/settings.json",
        r#"{
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "python3 $CLAUDE_PROJECT_DIR/.claude/hooks/safety.py"
          },
          {
            "type": "command",
            "command": "python3 $CLAUDE_PROJECT_DIR/.claude/hooks/pre-bash-curl-pipe.py"
          }
        ]
      }
    ]
  }
}
"#,
    );
    let v = show(&p);
    let hooks = &v["items"]["hooks.PreToolUse"];
    let lines: Vec<&Value> = hooks
        .as_array()
        .unwrap()
        .iter()
        .map(|h| &h["origin"]["line"])
        .collect();
    assert_eq!(lines, [&json!(7), &json!(11)], "{hooks}");
    let text = p.run(None, &["config", "show", "--origin"]).stdout;
    assert!(text.contains("settings.json:11:"), "{text}");
}

/// 2anki/server, langfuse, getsentry/sentry-mcp: a `.mcp.json` server a
/// session starts was shown nowhere by `config show`; one the approvals
/// leave out was left out without a word.
#[test]
fn census_mcp_json_servers_are_shown_with_where_they_were_written() {
    let p = repo();
    p.write(
        ".mcp.json",
        r#"{
  "mcpServers": {
    "ide": {
      "type": "stdio",
      "command": "claude",
      "args": ["mcp", "serve-ide"]
    },
    "sentry-dev": {
      "command": "npx",
      "args": ["-y", "@sentry/mcp-server"]
    }
  }
}
"#,
    );
    p.write(
        ".claude/settings.json",
        r#"{"enabledMcpjsonServers": ["ide"]}"#,
    );
    let v = show(&p);
    let servers = v["mcp_servers"].as_array().unwrap();
    assert_eq!(servers.len(), 1, "{servers:?}");
    assert_eq!(servers[0]["name"], "ide");
    let origin = servers[0]["origin"].as_str().unwrap();
    assert!(origin.ends_with(".mcp.json:3:5"), "{origin}");
    let skipped = v["skipped"].to_string();
    assert!(
        skipped.contains("`sentry-dev` (not in enabledMcpjsonServers)")
            && skipped.contains(".mcp.json:8:5"),
        "{skipped}"
    );
    let text = p.run(None, &["config", "show"]).stdout;
    assert!(text.contains("# MCP servers"), "{text}");
    assert!(text.contains(".mcp.json:3:5"), "{text}");

    // Untrusted, nothing starts, and each server is said where written.
    p.untrust();
    let v = show(&p);
    assert_eq!(v["mcp_servers"], json!([]));
    let skipped = v["skipped"].to_string();
    assert!(skipped.contains(".mcp.json:3:5"), "{skipped}");
}

/// langfuse: `web/CLAUDE.md` holds `@AGENTS.md`. The session reads the
/// import with the nested file; `config show` now says so.
#[test]
fn census_imports_of_nested_memory_are_shown() {
    let p = repo();
    p.write("CLAUDE.md", "# Project\n");
    p.write("web/CLAUDE.md", "# Web\n\n@AGENTS.md\n");
    p.write("web/AGENTS.md", "Use pnpm in web/.\n");
    let v = show(&p);
    let imports = &v["instructions"]["nested_imports"];
    let one = &imports[0];
    assert!(
        one["path"].as_str().unwrap().ends_with("web/AGENTS.md")
            && one["imported_from"]
                .as_str()
                .unwrap()
                .ends_with("web/CLAUDE.md"),
        "{imports}"
    );
    let text = p.run(None, &["config", "show"]).stdout;
    assert!(text.contains("AGENTS.md    imported by"), "{text}");
}

/// pydantic/pydantic-ai: `user-invocable` in skills. `false` (Claude
/// Code: "Claude can invoke, you can't") keeps the user from typing the
/// skill, with Claude Code's words and no request, and from `/help`; the
/// model still sees and loads it. It was accepted and did nothing.
#[test]
fn census_a_skill_the_user_may_not_invoke_cannot_be_typed() {
    let p = repo();
    p.write(
        ".claude/skills/i-have-adhd/SKILL.md",
        "---\nname: i-have-adhd\ndescription: Shape every response for a reader who skims.\nuser-invocable: false\n---\n\nLead with the result.\n",
    );
    p.write(
        ".claude/skills/complete-partial-pr/SKILL.md",
        "---\nname: complete-partial-pr\ndescription: Complete a partial PR.\nuser-invocable: true\n---\n\nFinish it.\n",
    );
    let server = FakeServer::start([anthropic::text_reply("done")]);
    let r = p.run(
        Some(&server),
        &["-p", "/i-have-adhd now", "--output-format", "json"],
    );
    r.ok();
    let result = r.json();
    assert!(
        result["result"].as_str().unwrap_or_default().contains(
            "This skill can only be invoked by Claude, not directly by users. Ask Claude to use the \"i-have-adhd\" skill for you."
        ),
        "{result}"
    );
    assert!(server.requests().is_empty(), "nothing reaches the model");

    // The model is told of it and may load it.
    let server = FakeServer::start([
        anthropic::tool_use_reply("m1", "Skill", json!({"skill": "i-have-adhd"})),
        anthropic::text_reply("done"),
    ]);
    p.run(Some(&server), &["-p", "/complete-partial-pr 12"])
        .ok();
    let first = &server.request(0).json;
    assert!(
        listings(first).contains("i-have-adhd"),
        "{}",
        listings(first)
    );
    assert!(first.to_string().contains("Finish it."), "typed: {first}");
    let loaded = &super::harness::last_tool_results(&server.request(1).json)[0];
    assert!(
        result_text(loaded).contains("Lead with the result."),
        "{loaded}"
    );

    let list = p.run(None, &["skills", "list", "--json"]).json();
    let flags: Vec<(Value, Value)> = list["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].clone(), s["user_invocable"].clone()))
        .collect();
    assert_eq!(
        flags,
        [
            (json!("complete-partial-pr"), json!(true)),
            (json!("i-have-adhd"), json!(false))
        ]
    );
    let help = p.run(None, &["-p", "/help"]).stdout;
    assert!(help.contains("/complete-partial-pr"), "{help}");
    assert!(!help.contains("/i-have-adhd"), "{help}");
}

/// The census script on a folder holding one of each item it found
/// dropped: nothing is dropped any more, and each item is classed.
#[test]
fn census_script_classes_every_item_of_a_team_folder() {
    let p = repo();
    p.write(
        ".claude/settings.json",
        r#"{
  "$schema": "https://json.schemastore.org/claude-code-settings.json",
  "includeCoAuthoredBy": true,
  "permissions": {"allow": ["Bash(git status:*)", "Bash(uv run pyright *)"]},
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [
        {"type": "command", "command": "python3 $CLAUDE_PROJECT_DIR/.claude/hooks/a.py"},
        {"type": "command", "command": "python3 $CLAUDE_PROJECT_DIR/.claude/hooks/b.py"}
      ]}
    ]
  }
}
"#,
    );
    p.write(
        ".mcp.json",
        r#"{"mcpServers": {"ide": {"command": "claude", "args": ["mcp", "serve-ide"]}}}"#,
    );
    p.write("CLAUDE.md", "# Project\n");
    p.write("web/CLAUDE.md", "@AGENTS.md\n");
    p.write("web/AGENTS.md", "Use pnpm.\n");
    p.write(
        ".claude/skills/adhd/SKILL.md",
        "---\nname: adhd\ndescription: Be brief.\nuser-invocable: false\nlicense: MIT\n---\nBrief.\n",
    );
    // PostHog/posthog's rules: `paths` as a YAML list.
    p.write(
        ".claude/rules/django-migrations.md",
        "---\npaths:\n  - 'posthog/migrations/**'\n  - 'products/*/backend/migrations/**'\n---\n\nInvoke the `/django-migrations` skill first.\n",
    );
    p.write(
        ".claude/rules/python.mdc",
        "---\nglobs: \"**/*.py\"\n---\nCursor's.\n",
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/dotclaude-census");
    let out = std::process::Command::new("python3")
        .arg(script)
        .args(["--json", "--cadre", env!("CARGO_BIN_EXE_cadre")])
        .arg(p.path())
        .env("HOME", p.home.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let r = &v[0];
    let classes: Vec<(String, String)> = r["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["item"].as_str().unwrap().to_string(),
                i["class"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let class_of = |needle: &str| {
        classes
            .iter()
            .find(|(item, _)| item.contains(needle))
            .map(|(_, c)| c.as_str())
            .unwrap_or_else(|| panic!("no item {needle}: {classes:?}"))
    };
    assert_eq!(class_of("$schema"), "inert");
    assert_eq!(class_of("includeCoAuthoredBy"), "listed");
    assert_eq!(class_of("Bash(git status:*)"), "honoured");
    assert_eq!(class_of("hooks/a.py"), "honoured");
    assert_eq!(class_of("hooks/b.py"), "honoured");
    assert_eq!(class_of("ide"), "honoured");
    assert_eq!(class_of("@AGENTS.md"), "honoured");
    assert_eq!(class_of("user-invocable"), "honoured");
    assert_eq!(class_of("license"), "inert");
    assert_eq!(class_of("django-migrations.md: paths"), "honoured");
    assert_eq!(class_of("python.mdc"), "inert");
    assert_eq!(r["counts"]["dropped"], 0, "{classes:?}");
}

/// A skill's Claude Code keys that cadre accepts and does not act on yet
/// (`effort`, `context: fork`, ...) are listed by `config show` at their
/// position, like the settings keys it does not implement; before, they
/// were accepted without a word.
#[test]
fn census_skill_keys_cadre_does_not_act_on_are_listed_at_their_position() {
    let p = repo();
    p.write(
        ".claude/skills/review/SKILL.md",
        "---\nname: review\ndescription: Review a change\neffort: high\ncontext: fork\nlicense: MIT\n---\nReview it.\n",
    );
    let v = show(&p);
    let ignored: Vec<(String, Value)> = v["ignored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["key"].as_str().unwrap().to_string(),
                i["origin"]["line"].clone(),
            )
        })
        .collect();
    assert_eq!(
        ignored,
        [
            ("skill `review`: effort".to_string(), json!(4)),
            ("skill `review`: context".to_string(), json!(5)),
        ]
    );
    let text = p.run(None, &["config", "show"]).stdout;
    assert!(text.contains("skill `review`: effort"), "{text}");
    assert!(text.contains("SKILL.md:4:1"), "{text}");
}

/// humanlayer/humanlayer: `"env": {"MAX_THINKING_TOKENS": "32000"}`.
/// Claude Code 2.1.330 sends `max_tokens` 32000 with a budget of 31999
/// (measured); cadre's default `max_tokens` of 8192 cut the team's budget
/// to 8191 without a word. A `max_tokens` someone set still bounds it.
#[test]
fn census_a_thinking_budget_from_the_settings_env_gets_claude_codes_output_limit() {
    let p = repo();
    // The harness's own file sets `max_tokens`; this project leaves it.
    p.write(
        "cadre.toml",
        &super::harness::BASE_CONFIG.replace("max_tokens = 1024\n", ""),
    );
    p.write(
        ".claude/settings.json",
        "{\n  \"env\": {\n    \"MAX_THINKING_TOKENS\": \"32000\"\n  }\n}\n",
    );
    let server = FakeServer::start([anthropic::text_reply("done")]);
    p.run(Some(&server), &["-p", "hi"]).ok();
    let body = &server.request(0).json;
    assert_eq!(body["max_tokens"], 32000, "{body}");
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 31999})
    );

    p.write(
        ".claude/settings.json",
        "{\n  \"env\": {\n    \"MAX_THINKING_TOKENS\": \"32000\",\n    \"CLAUDE_CODE_MAX_OUTPUT_TOKENS\": \"16000\"\n  }\n}\n",
    );
    let server = FakeServer::start([anthropic::text_reply("done")]);
    p.run(Some(&server), &["-p", "hi"]).ok();
    let body = &server.request(0).json;
    assert_eq!(body["max_tokens"], 16000, "{body}");
    assert_eq!(body["thinking"]["budget_tokens"], 15999, "{body}");
}

/// An agent file's `hooks` and `requiredMcpServers` are acted on, but
/// `cadre agents list --json` did not show them, so nothing outside could
/// tell they were read.
#[test]
fn census_agents_list_shows_an_agents_hooks_and_required_servers() {
    let p = repo();
    p.write(
        ".claude/agents/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews changes\nrequiredMcpServers: [github]\nhooks:\n  PreToolUse:\n    - matcher: Bash\n      hooks:\n        - type: command\n          command: ./check.sh\n---\nReview.\n",
    );
    let v = p
        .run(None, &["agents", "show", "reviewer", "--json"])
        .json();
    assert_eq!(v["required_mcp_servers"], json!(["github"]), "{v}");
    let hooks = v["hooks"].to_string();
    assert!(
        hooks.contains("PreToolUse") && hooks.contains("./check.sh"),
        "{hooks}"
    );
}
