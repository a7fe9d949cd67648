//! The permission engine through the real binary: symlinks and `..` cannot
//! route around path rules, Grep and Glob hide denied folders, edits outside
//! the working directory ask (a denial in `run`) unless added with
//! `--add-dir`, children inherit their parent's mode, PreToolUse hooks
//! decide in Claude Code's JSON, and `cadre permissions check` explains.

use std::path::Path;

use serde_json::{Value, json};

use super::harness::{
    Project, assistant_turns, has_main_prompt as is_main, last_tool_results, result_text,
};
use super::kit::{FakeServer, anthropic};

/// The main agent makes `calls` in one message, then says "done"; a child
/// makes `child_calls` in its first turn, then answers.
fn script(calls: Vec<(&str, Value)>, child_calls: Vec<(&str, Value)>) -> FakeServer {
    let calls: Vec<(String, Value)> = calls.into_iter().map(|(n, v)| (n.to_string(), v)).collect();
    let child_calls: Vec<(String, Value)> = child_calls
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
    FakeServer::route(move |r| {
        let (list, is_main) = if is_main(r) {
            (&calls, true)
        } else {
            (&child_calls, false)
        };
        if assistant_turns(r) == 0 && !list.is_empty() {
            let mut m = anthropic::message();
            for (i, (name, input)) in list.iter().enumerate() {
                let id = if is_main {
                    format!("toolu_m{i}")
                } else {
                    format!("toolu_c{i}")
                };
                m = m.tool_use(&id, name, input.clone());
            }
            return m.reply();
        }
        anthropic::text_reply(if is_main { "done" } else { "child done" })
    })
}

/// The tool results of the main session's second request, as texts with
/// `ERR:` before errors.
fn main_results(server: &FakeServer) -> Vec<String> {
    let r = server
        .requests()
        .into_iter()
        .find(|r| is_main(r) && assistant_turns(r) == 1)
        .expect("main's second request");
    results(&r.json)
}

/// The tool results a child got back for its first turn's calls.
fn child_results(server: &FakeServer) -> Vec<String> {
    let r = server
        .requests()
        .into_iter()
        .find(|r| !is_main(r) && assistant_turns(r) == 1)
        .expect("the child's second request");
    results(&r.json)
}

fn results(body: &Value) -> Vec<String> {
    last_tool_results(body)
        .iter()
        .map(|b| {
            let t = result_text(b);
            if b["is_error"] == true {
                format!("ERR: {t}")
            } else {
                t
            }
        })
        .collect()
}

fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

#[test]
fn a_symlink_or_dotdot_does_not_route_around_a_path_rule() {
    let mut p = Project::new();
    p.config("[permissions]\ndefault_mode = \"acceptEdits\"\ndeny = [\"Read(secrets/**)\", \"Edit(secrets/**)\"]\n");
    p.write("secrets/key", "TOP-SECRET\n");
    p.write("src/main.rs", "fn main() {}\n");
    symlink(&p.path().join("secrets"), &p.path().join("data"));
    let server = script(
        vec![
            ("Read", json!({"file_path": p.path().join("data/key")})),
            (
                "Read",
                json!({"file_path": p.path().join("src/../secrets/key")}),
            ),
            (
                "Write",
                json!({"file_path": p.path().join("data/new"), "content": "x"}),
            ),
            (
                "Edit",
                json!({"file_path": p.path().join("data/key"), "old_string": "TOP", "new_string": "NOT"}),
            ),
            ("Read", json!({"file_path": p.path().join("src/main.rs")})),
        ],
        vec![],
    );
    p.run(Some(&server), &["run", "go"]).ok();
    let r = main_results(&server);
    assert!(
        r[0].starts_with("ERR:") && r[0].contains("Read(secrets/**)"),
        "{r:?}"
    );
    assert!(
        r[1].starts_with("ERR:") && r[1].contains("Read(secrets/**)"),
        "{r:?}"
    );
    assert!(
        r[2].starts_with("ERR:") && r[2].contains("Edit(secrets/**)"),
        "{r:?}"
    );
    assert!(
        r[3].starts_with("ERR:") && r[3].contains("Edit(secrets/**)"),
        "{r:?}"
    );
    assert!(r[4].contains("fn main"), "{r:?}");
    assert!(!r.iter().any(|t| t.contains("TOP-SECRET")), "{r:?}");
    assert!(!p.path().join("secrets/new").exists());
    assert_eq!(p.read("secrets/key"), "TOP-SECRET\n");
}

#[test]
fn grep_and_glob_never_show_a_denied_folder() {
    let mut p = Project::new();
    // No transcript: it would hold the calls' inputs, which Grep finds.
    p.config("[permissions]\ndeny = [\"Read(secrets/**)\"]\n[transcripts]\nenabled = false\n");
    p.write("secrets/key.txt", "token=HIDDEN-VALUE\n");
    p.write("secrets/deep/more.txt", "token=HIDDEN-DEEP\n");
    p.write("notes/open.txt", "token=VISIBLE\n");
    // A link inside the tree pointing into the denied folder.
    symlink(
        &p.path().join("secrets/key.txt"),
        &p.path().join("notes/link.txt"),
    );
    let server = script(
        vec![
            (
                "Grep",
                json!({"pattern": "token", "output_mode": "content"}),
            ),
            (
                "Grep",
                json!({"pattern": "token", "output_mode": "files_with_matches", "path": "."}),
            ),
            ("Glob", json!({"pattern": "**/*.txt"})),
            ("Grep", json!({"pattern": "token", "path": "secrets"})),
            (
                "Grep",
                json!({"pattern": "token", "path": "secrets/key.txt"}),
            ),
        ],
        vec![],
    );
    p.run(Some(&server), &["run", "go"]).ok();
    let r = main_results(&server);
    for t in &r[..3] {
        assert!(!t.contains("HIDDEN") && !t.contains("secrets/"), "{t}");
    }
    assert!(r[0].contains("VISIBLE"), "{r:?}");
    assert!(r[1].contains("open.txt"), "{r:?}");
    assert!(r[2].contains("open.txt"), "{r:?}");
    // Searching the denied folder itself finds nothing: every file in it
    // is hidden from the walk.
    assert_eq!(r[3], "No matches found", "{r:?}");
    // Naming a denied file is denied outright.
    assert!(
        r[4].starts_with("ERR:") && r[4].contains("Read(secrets/**)"),
        "{r:?}"
    );
}

#[test]
fn edits_outside_the_working_directory_ask_in_every_mode_but_bypass() {
    let outside = tempfile::tempdir().unwrap();
    let target = |name: &str| outside.path().join(name);
    for (mode, allowed) in [
        ("default", false),
        ("acceptEdits", false),
        ("dontAsk", false),
        ("plan", false),
        ("bypassPermissions", true),
    ] {
        let p = Project::new();
        symlink(outside.path(), &p.path().join("out"));
        let file = format!("{mode}.txt");
        let server = script(
            vec![
                ("Write", json!({"file_path": target(&file), "content": "x"})),
                (
                    "Write",
                    json!({"file_path": p.path().join("out").join(format!("link-{file}")), "content": "x"}),
                ),
                (
                    "Write",
                    json!({"file_path": p.path().join("../").join(outside.path().file_name().unwrap()).join(format!("dots-{file}")), "content": "x"}),
                ),
            ],
            vec![],
        );
        p.run(Some(&server), &["run", "--permission-mode", mode, "go"])
            .ok();
        let r = main_results(&server);
        for (i, name) in [file.clone(), format!("link-{file}"), format!("dots-{file}")]
            .iter()
            .enumerate()
        {
            assert_eq!(target(name).exists(), allowed, "{mode} {name}: {r:?}");
            assert_eq!(r[i].starts_with("ERR:"), !allowed, "{mode}: {r:?}");
        }
        if mode == "acceptEdits" {
            assert!(r[0].contains("outside the working directory"), "{r:?}");
        }
    }
    // `--add-dir` (or `permissions.additional_directories`) makes it fine
    // in acceptEdits.
    let p = Project::new();
    let server = script(
        vec![(
            "Write",
            json!({"file_path": target("added.txt"), "content": "x"}),
        )],
        vec![],
    );
    let dir = outside.path().to_str().unwrap();
    p.run(
        Some(&server),
        &[
            "run",
            "--permission-mode",
            "acceptEdits",
            "--add-dir",
            dir,
            "go",
        ],
    )
    .ok();
    assert!(target("added.txt").exists(), "{:?}", main_results(&server));
    let mut p = Project::new();
    p.config(&format!(
        "[permissions]\nadditional_directories = [{:?}]\n",
        dir
    ));
    let server = script(
        vec![(
            "Write",
            json!({"file_path": target("settings.txt"), "content": "x"}),
        )],
        vec![],
    );
    p.run(
        Some(&server),
        &["run", "--permission-mode", "acceptEdits", "go"],
    )
    .ok();
    assert!(
        target("settings.txt").exists(),
        "{:?}",
        main_results(&server)
    );
}

#[test]
fn a_child_inherits_its_parents_mode_and_cannot_widen_it() {
    for (parent, agent_mode, may_write) in [
        ("default", None, false),
        ("plan", None, false),
        ("dontAsk", None, false),
        ("acceptEdits", None, true),
        ("bypassPermissions", None, true),
        ("default", Some("acceptEdits"), false),
        ("plan", Some("bypassPermissions"), false),
        ("dontAsk", Some("acceptEdits"), false),
        ("acceptEdits", Some("plan"), false),
        ("bypassPermissions", Some("plan"), true),
    ] {
        let p = Project::new();
        let agent_type = match agent_mode {
            Some(m) => {
                p.write(
                    ".claude/agents/writer.md",
                    &format!("---\nname: writer\ndescription: writes\npermissionMode: {m}\n---\nWrite files.\n"),
                );
                "writer"
            }
            None => "general-purpose",
        };
        let server = script(
            vec![(
                "Agent",
                json!({"description": "d", "prompt": "write it", "subagent_type": agent_type}),
            )],
            vec![(
                "Write",
                json!({"file_path": p.path().join("child.txt"), "content": "x"}),
            )],
        );
        p.run(Some(&server), &["run", "--permission-mode", parent, "go"])
            .ok();
        let case = format!("parent {parent}, definition {agent_mode:?}");
        let r = child_results(&server);
        assert_eq!(
            p.path().join("child.txt").exists(),
            may_write,
            "{case}: {r:?}"
        );
        assert_eq!(r[0].starts_with("ERR:"), !may_write, "{case}: {r:?}");
    }
}

#[test]
fn hook_decisions_in_claude_codes_json() {
    let mut p = Project::new();
    p.config(
        r#"
[permissions]
deny = ["Bash(rm:*)"]
ask = ["Bash(git push:*)"]

[[hooks.PreToolUse]]
matcher = "Bash"
command = """
cmd=$(sed -n 's/.*"command":"\\([^"]*\\)".*/\\1/p')
case "$cmd" in
  "echo rewrite-me") echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "echo REWRITTEN"}}}' ;;
  "echo ask-me") echo '{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "a human should look"}}' ;;
  "echo deny-me") echo '{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "not today"}}' ;;
  "echo legacy-block") echo '{"decision": "block", "reason": "old style"}' ;;
  *) echo '{"hookSpecificOutput": {"permissionDecision": "allow", "permissionDecisionReason": "looks fine"}}' ;;
esac
"""
"#,
    );
    p.write("keep.txt", "keep\n");
    let server = script(
        vec![
            // The hook allows: in default mode, non-interactive, it runs.
            ("Bash", json!({"command": "echo allowed-by-hook"})),
            // The hook allows, but a deny rule still denies...
            ("Bash", json!({"command": "rm keep.txt"})),
            // ...and an ask rule still asks (a denial in `run`).
            ("Bash", json!({"command": "git push"})),
            ("Bash", json!({"command": "echo rewrite-me"})),
            ("Bash", json!({"command": "echo ask-me"})),
            ("Bash", json!({"command": "echo deny-me"})),
            ("Bash", json!({"command": "echo legacy-block"})),
        ],
        vec![],
    );
    p.run(Some(&server), &["run", "go"]).ok();
    let r = main_results(&server);
    assert_eq!(r[0].trim(), "allowed-by-hook", "{r:?}");
    assert!(
        r[1].starts_with("ERR:") && r[1].contains("deny rule 'Bash(rm:*)'"),
        "{r:?}"
    );
    assert!(p.path().join("keep.txt").exists());
    assert!(
        r[2].starts_with("ERR:") && r[2].contains("ask rule 'Bash(git push:*)'"),
        "{r:?}"
    );
    assert_eq!(r[3].trim(), "REWRITTEN", "{r:?}");
    assert!(
        r[4].starts_with("ERR:") && r[4].contains("a human should look"),
        "{r:?}"
    );
    assert!(
        r[5].starts_with("ERR:") && r[5].contains("not today"),
        "{r:?}"
    );
    assert!(
        r[6].starts_with("ERR:") && r[6].contains("old style"),
        "{r:?}"
    );
}

#[test]
fn permissions_check_explains_a_decision() {
    let mut p = Project::new();
    p.config(
        "[permissions]\nallow = [\"Bash(git status:*)\", \"Bash(echo:*)\"]\ndeny = [\"Bash(rm:*)\"]\n",
    );
    let out = p.run(
        None,
        &[
            "permissions",
            "check",
            "Bash",
            "git status && echo `rm -rf x`",
            "--json",
        ],
    );
    out.ok();
    let v = out.json();
    assert_eq!(v["decision"], "deny");
    assert_eq!(v["by"], "deny rule 'Bash(rm:*)'");
    assert_eq!(v["mode"], "default");
    assert_eq!(
        v["commands"],
        json!(["git status", "rm -rf x", "echo `rm -rf x`"])
    );
    let out = p.run(
        None,
        &["permissions", "check", "Bash", "git status; echo hi"],
    );
    out.ok();
    assert!(
        out.stdout
            .starts_with("allow: allow rules 'Bash(git status:*)', 'Bash(echo:*)'\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("commands:\n  git status\n  echo hi\n"),
        "{}",
        out.stdout
    );
    let out = p.run(None, &["permissions", "check", "Bash", "$CMD x"]);
    out.ok();
    assert!(
        out.stdout
            .starts_with("ask: cannot tell whether deny rule 'Bash(rm:*)' applies"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("uncertain:\n  the command name `$CMD`"),
        "{}",
        out.stdout
    );
    // --agent decides in that agent's mode.
    p.write(
        ".claude/agents/planner.md",
        "---\nname: planner\ndescription: plans\npermissionMode: plan\n---\nPlan.\n",
    );
    let out = p.run(
        None,
        &[
            "permissions",
            "check",
            "Write",
            "{\"file_path\": \"a.txt\", \"content\": \"x\"}",
            "--agent",
            "planner",
            "--json",
        ],
    );
    out.ok();
    let v = out.json();
    assert_eq!(v["decision"], "deny");
    assert_eq!(v["by"], "permission mode 'plan'");
    let out = p.run(None, &["permissions", "check", "mcp__fs__read", "not json"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
}

#[test]
fn a_tool_denied_as_a_whole_is_not_offered_and_a_call_to_it_fails() {
    let mut p = Project::new();
    p.config("[permissions]\ndefault_mode = \"bypassPermissions\"\ndeny = [\"Write\", \"Edit(secrets/**)\"]\n");
    let server = FakeServer::start([
        anthropic::tool_use_reply(
            "toolu_1",
            "Write",
            json!({"file_path": "x.txt", "content": "hi"}),
        ),
        anthropic::text_reply("done"),
    ]);
    p.run(Some(&server), &["run", "write x"]).ok();
    let names = super::harness::tool_names(&server.request(0).json);
    assert!(!names.contains(&"Write".to_string()), "{names:?}");
    // A rule for some paths only leaves the tool in place.
    assert!(names.contains(&"Edit".to_string()), "{names:?}");
    let result = super::harness::last_tool_results(&server.request(1).json);
    assert_eq!(result[0]["is_error"], true);
    assert!(!p.path().join("x.txt").exists());
}

#[test]
fn wildcard_and_assignment_rules_from_a_teams_settings_allow_what_they_say_and_no_more() {
    let p = Project::new();
    p.write(
        ".claude/settings.json",
        r#"{"permissions": {"allow": ["Bash(echo*)", "Bash(GREETING=hi printenv GREETING)"]}}"#,
    );
    let server = script(
        vec![
            ("Bash", json!({"command": "echo wild"})),
            ("Bash", json!({"command": "echo x && touch made-by-rm"})),
            ("Bash", json!({"command": "GREETING=hi printenv GREETING"})),
            ("Bash", json!({"command": "GREETING=bye printenv GREETING"})),
        ],
        vec![],
    );
    p.run(Some(&server), &["run", "go"]).ok();
    let r = main_results(&server);
    assert!(r[0].contains("wild") && !r[0].starts_with("ERR:"), "{r:?}");
    assert!(r[1].starts_with("ERR:"), "{r:?}");
    assert!(!p.path().join("made-by-rm").exists());
    assert!(r[2].contains("hi") && !r[2].starts_with("ERR:"), "{r:?}");
    assert!(
        r[3].starts_with("ERR:") && r[3].contains("GREETING"),
        "{r:?}"
    );
}

#[test]
fn config_validate_warns_about_rules_that_never_match_at_their_position() {
    let p = Project::new();
    p.write(
        ".claude/settings.json",
        "{\n  \"permissions\": {\n    \"allow\": [\"Bash(npm*)\", \"Bash(npm test && npm run build)\"],\n    \"deny\": [\"KillShell\", \"Task(x)\"]\n  }\n}\n",
    );
    let out = p.run(None, &["config", "validate"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let settings = p.path().join(".claude/settings.json").display().to_string();
    assert!(
        out.stdout.contains(&format!(
            "{settings}:3:29: warning: permission rule 'Bash(npm test && npm run build)' holds 2 commands"
        )),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "{settings}:4:14: warning: permission rule 'KillShell': cadre has no tool named `KillShell`"
        )),
        "{}",
        out.stdout
    );
    // A wildcard and a legacy name are fine.
    assert!(!out.stdout.contains("Bash(npm*)"), "{}", out.stdout);
    assert!(!out.stdout.contains("Task(x)"), "{}", out.stdout);
    assert!(
        out.stdout.contains("0 error(s), 2 warning(s)"),
        "{}",
        out.stdout
    );
}
