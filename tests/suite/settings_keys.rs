//! Claude Code settings keys that limit a session, through the binary,
//! written in `.claude/settings.json` as a team writes them:
//! `disableAllHooks`, `maxEffortLevel`, `deniedModels`, `availableModels`,
//! `apiKeyHelper`, `disableSkillShellExecution`, `bashOutputMaxChars`.

use serde_json::json;

use super::harness::{Project, last_tool_results, result_text};
use super::kit::{FakeServer, anthropic};

#[test]
fn disable_all_hooks_stops_settings_and_plugin_hooks_and_the_status_line() {
    let p = Project::new();
    let plugin = p.home.path().join("plug");
    std::fs::create_dir_all(plugin.join("hooks")).unwrap();
    std::fs::write(
        plugin.join("hooks/hooks.json"),
        r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch \"$CLAUDE_PROJECT_DIR/plugin-hook\""}]}]}}"#,
    )
    .unwrap();
    p.write(
        ".claude/settings.json",
        r#"{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch \"$CLAUDE_PROJECT_DIR/settings-hook\""}]}]},
            "statusLine": {"type": "command", "command": "echo status"}}"#,
    );
    let server = FakeServer::start([anthropic::text_reply("a"), anthropic::text_reply("b")]);
    let dir = plugin.display().to_string();
    // Without the switch both hooks run (the test would pass vacuously
    // otherwise).
    p.run(Some(&server), &["-p", "hi", "--plugin-dir", &dir])
        .ok();
    assert!(p.path().join("settings-hook").exists());
    assert!(p.path().join("plugin-hook").exists());
    std::fs::remove_file(p.path().join("settings-hook")).unwrap();
    std::fs::remove_file(p.path().join("plugin-hook")).unwrap();

    p.write(
        ".claude/settings.local.json",
        r#"{"disableAllHooks": true}"#,
    );
    p.run(Some(&server), &["-p", "hi", "--plugin-dir", &dir])
        .ok();
    assert!(!p.path().join("settings-hook").exists());
    assert!(!p.path().join("plugin-hook").exists());
    let show = p.run(None, &["config", "show", "--plugin-dir", &dir]);
    assert!(
        show.stdout.contains("disable_all_hooks = true")
            && !show.stdout.contains("status_line.command"),
        "{}",
        show.stdout
    );
}

#[test]
fn max_effort_level_lowers_a_higher_request() {
    let p = Project::new();
    p.write(".claude/settings.json", r#"{"maxEffortLevel": "medium"}"#);
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    p.run(
        Some(&server),
        &["-p", "hi", "--model", "claude-opus-4-6", "--effort", "max"],
    )
    .ok();
    assert_eq!(
        server.request(0).json["output_config"],
        json!({"effort": "medium"})
    );
}

#[test]
fn denied_and_available_models_refuse_the_main_model_and_a_sub_agents() {
    let p = Project::new();
    p.write(
        ".claude/settings.json",
        "{\n  \"deniedModels\": [\"opus\"]\n}\n",
    );
    let run = p.run(None, &["-p", "hi", "--model", "claude-opus-4-5"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("deniedModels") && run.stderr.contains("claude-opus-4-5"),
        "{}",
        run.stderr
    );

    // A sub-agent whose definition names a denied model is not started;
    // the caller's model is told why.
    p.write(
        ".claude/agents/deep.md",
        "---\nname: deep\ndescription: Thinks hard\nmodel: claude-opus-4-5\n---\nThink.\n",
    );
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_1",
            "Agent",
            json!({"description": "d", "prompt": "p", "subagent_type": "deep"}),
        ),
        anthropic::text_reply("done"),
    ]);
    p.run(Some(&server), &["run", "go"]).ok();
    assert_eq!(server.requests().len(), 2, "no child request");
    let results = last_tool_results(&server.request(1).json);
    let text = result_text(&results[0]);
    assert!(
        text.contains("cannot be started") && text.contains("deniedModels"),
        "{text}"
    );

    // `availableModels` allows only what it lists.
    p.write(
        ".claude/settings.json",
        r#"{"availableModels": ["sonnet"]}"#,
    );
    let run = p.run(None, &["-p", "hi", "--model", "claude-opus-4-5"]);
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("availableModels"), "{}", run.stderr);
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    p.run(Some(&server), &["-p", "hi"]).ok();
}

#[test]
fn api_key_helper_of_the_user_makes_the_key_and_a_projects_is_ignored() {
    let p = Project::new();
    let user = p.home.path().join(".claude/settings.json");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    std::fs::write(&user, r#"{"apiKeyHelper": "echo helper-key-123"}"#).unwrap();
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    server.skip_invariant_checks();
    let out = p
        .command(Some(&server))
        .env_remove("ANTHROPIC_API_KEY")
        .args(["-p", "hi"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = server
        .request(0)
        .headers
        .iter()
        .find(|(k, _)| k == "x-api-key")
        .map(|(_, v)| v.clone());
    assert_eq!(key.as_deref(), Some("helper-key-123"));

    // A repository's helper is never run: no key, and a warning at its place.
    std::fs::remove_file(&user).unwrap();
    p.write(
        ".claude/settings.json",
        r#"{"apiKeyHelper": "touch \"$PWD/ran\"; echo stolen"}"#,
    );
    let out = p
        .command(Some(&server))
        .env_remove("ANTHROPIC_API_KEY")
        .args(["-p", "hi"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!p.path().join("ran").exists());
    assert!(err.contains("apiKeyHelper is read from your own"), "{err}");
    assert_eq!(server.requests().len(), 1, "{err}");
}

#[test]
fn disable_skill_shell_execution_leaves_shell_lines_unrun() {
    let p = Project::new();
    p.write(
        ".claude/commands/status.md",
        "---\nallowed-tools: Bash(touch:*)\n---\nState: !`touch ran-it`\n",
    );
    p.write(
        ".claude/settings.json",
        r#"{"disableSkillShellExecution": true}"#,
    );
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    let run = p.run(Some(&server), &["-p", "/status"]);
    run.ok();
    assert!(!p.path().join("ran-it").exists());
    let body = server.request(0).json.to_string();
    assert!(body.contains("disableSkillShellExecution"), "{body}");
    assert!(
        run.stderr.contains("disableSkillShellExecution is set"),
        "{}",
        run.stderr
    );
}

#[test]
fn bash_output_max_chars_cuts_a_long_output_for_the_model() {
    let p = Project::new();
    let run_seq = |settings: &str| {
        p.write(".claude/settings.json", settings);
        let server = FakeServer::start([
            anthropic::tool_use_reply("toolu_1", "Bash", json!({"command": "seq 1 5000"})),
            anthropic::text_reply("done"),
        ]);
        p.run(Some(&server), &["-p", "count"]).ok();
        let results = last_tool_results(&server.request(1).json);
        result_text(&results[0]).chars().count()
    };
    // `seq 1 5000` prints about 23,900 characters: whole by default…
    let whole = run_seq(r#"{"permissions": {"allow": ["Bash(seq:*)"]}}"#);
    assert!(whole >= 23_000, "{whole}");
    // …cut to about 4,000 with the key.
    let cut = run_seq(r#"{"permissions": {"allow": ["Bash(seq:*)"]}, "bashOutputMaxChars": 4000}"#);
    assert!(cut < 4_300, "{cut}");
}

#[test]
fn claude_md_excludes_skips_the_memory_files_it_names() {
    let p = Project::new();
    p.write("CLAUDE.md", "Team rule: be brief.\n");
    p.write("packages/web/CLAUDE.md", "Web rule: use tabs.\n");
    let first_request = |p: &Project| {
        let server = FakeServer::start([anthropic::text_reply("ok")]);
        p.run(Some(&server), &["-p", "hi", "--cwd", "packages/web"])
            .ok();
        server.request(0).json.to_string()
    };
    std::fs::create_dir_all(p.path().join(".git")).unwrap();
    let body = first_request(&p);
    assert!(body.contains("Web rule") && body.contains("Team rule"));
    p.write(
        "packages/web/.claude/settings.json",
        r#"{"claudeMdExcludes": ["**/packages/web/CLAUDE.md"]}"#,
    );
    let body = first_request(&p);
    assert!(!body.contains("Web rule"));
    assert!(body.contains("Team rule"));
}
