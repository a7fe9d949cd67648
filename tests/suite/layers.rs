//! The command line's settings layers: `--settings FILE|JSON` (the `flag`
//! layer, above local), `--setting-sources` (which of the user, project and
//! local layers are read), `--allowedTools`/`--disallowedTools` (the `cli`
//! layer); denials that name the rule's file; and settings files a
//! repository points elsewhere with a symbolic link. Each test runs the
//! binary in a scratch git repository with a scratch HOME.

use std::path::Path;

use serde_json::{Value, json};

use super::harness::{Project, assistant_turns, has_main_prompt as is_main, last_tool_results};
use super::kit::{FakeServer, anthropic};
use super::worktrees::git;

/// A trusted scratch repository (the harness trusts its folder).
fn repo() -> Project {
    let p = Project::new();
    git(p.path(), &["init", "-q", "-b", "main"]);
    p
}

fn write_home(p: &Project, rel: &str, text: &str) -> std::path::PathBuf {
    let path = p.home.path().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

/// The main agent makes `calls` in its first message, then says "done".
fn server(calls: Vec<(&'static str, Value)>) -> FakeServer {
    FakeServer::route(move |r| {
        if is_main(r) && assistant_turns(r) == 0 {
            let mut m = anthropic::message();
            for (i, (name, input)) in calls.iter().enumerate() {
                m = m.tool_use(&format!("toolu_{i}"), name, input.clone());
            }
            // No calls: an answer (a reply without text is a failed run).
            if calls.is_empty() {
                m = m.text("done");
            }
            return m.reply();
        }
        anthropic::text_reply("done")
    })
}

/// The text of each tool result main got back, and whether it was an error.
fn main_results(server: &FakeServer) -> Vec<(bool, String)> {
    let r = server
        .requests()
        .into_iter()
        .find(|r| is_main(r) && assistant_turns(r) == 1)
        .expect("main's second request");
    last_tool_results(&r.json)
        .iter()
        .map(|b| (b["is_error"] == true, super::harness::result_text(b)))
        .collect()
}

/// The `config show --origin` line of a key (or list item).
fn line_of<'a>(out: &'a str, start: &str) -> &'a str {
    out.lines()
        .find(|l| l.trim_start().starts_with(start))
        .unwrap_or_else(|| panic!("no line for {start}:\n{out}"))
}

#[test]
fn the_settings_flag_is_a_layer_above_local_and_below_the_environment() {
    let mut p = repo();
    p.write(
        ".claude/settings.local.json",
        r#"{"model": "local-model", "permissions": {"deny": ["Read(./local-secret)"]}}"#,
    );
    let team = p.write(
        "team.json",
        "{\n  \"model\": \"flag-model\",\n  \"permissions\": {\n    \"deny\": [\"Read(./flag-secret)\"]\n  },\n  \"env\": {\"TEAM\": \"1\"}\n}\n",
    );
    let team = team.display().to_string();
    let out = p.run(
        None,
        &["config", "show", "--origin", "--settings", "team.json"],
    );
    out.ok();
    let o = &out.stdout;
    assert!(
        line_of(o, "provider.model =").ends_with(&format!("# flag {team}:2:12")),
        "{o}"
    );
    assert!(
        line_of(o, "Read(./flag-secret)").ends_with(&format!("# flag {team}:4:14")),
        "{o}"
    );
    // A deny of a lower layer stays: lists are the union of every layer.
    assert!(
        line_of(o, "Read(./local-secret)").contains("# local "),
        "{o}"
    );
    assert!(line_of(o, "env.TEAM =").contains("# flag "), "{o}");
    assert!(o.contains(&format!("#   flag     {team} (read)")), "{o}");

    // Inline JSON: origin `--settings` with its line and column.
    let inline = p.run(
        None,
        &[
            "config",
            "show",
            "--origin",
            "--settings",
            r#"{"model": "inline-model"}"#,
        ],
    );
    inline.ok();
    assert_eq!(
        line_of(&inline.stdout, "provider.model ="),
        "provider.model = \"inline-model\"    # flag --settings:1:11"
    );

    // The environment is above it, managed above all.
    p.env("CADRE_PROVIDER__MODEL", "env-model");
    let env = p
        .run(
            None,
            &["config", "show", "--json", "--settings", "team.json"],
        )
        .json();
    assert_eq!(env["settings"]["provider"]["model"], "env-model");

    // Bad input: a clear error at its position, exit 2.
    let bad = p.run(None, &["config", "show", "--settings", "{\"model\": }"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr
            .contains("--settings:1:11: error: not valid JSON"),
        "{}",
        bad.stderr
    );
    let missing = p.run(None, &["config", "show", "--settings", "nope.json"]);
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("nope.json"), "{}", missing.stderr);
}

#[test]
fn a_settings_layer_brings_rules_env_and_hooks_to_run_and_to_p() {
    // The user's own flag: it applies in full even in a folder not trusted.
    let p = Project::untrusted();
    git(p.path(), &["init", "-q", "-b", "main"]);
    let settings = json!({
        "permissions": {"allow": ["Bash(touch:*)", "Bash(printenv:*)"]},
        "env": {"TEAM_VAR": "from-the-flag"},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
            {"type": "command", "command": "touch hook-ran.marker"}
        ]}]}
    })
    .to_string();
    for how in [&["run"][..], &["-p"][..]] {
        let server = server(vec![
            ("Bash", json!({"command": "touch made.marker"})),
            ("Bash", json!({"command": "printenv TEAM_VAR"})),
        ]);
        let mut args: Vec<&str> = how.to_vec();
        args.extend(["--settings", &settings, "go"]);
        p.run(Some(&server), &args);
        let r = main_results(&server);
        assert!(!r[0].0, "{how:?}: {r:?}");
        assert!(p.path().join("made.marker").exists(), "{how:?}");
        assert_eq!(r[1], (false, "from-the-flag".to_string()), "{how:?}");
        assert!(p.path().join("hook-ran.marker").exists(), "{how:?}");
        for m in ["made.marker", "hook-ran.marker"] {
            std::fs::remove_file(p.path().join(m)).unwrap();
        }
    }
}

#[test]
fn a_project_deny_beats_allowed_tools_a_settings_bypass_and_a_bypass_child_and_names_its_file() {
    let p = repo();
    let project = p.write(
        ".claude/settings.json",
        "{\n  \"permissions\": {\n    \"deny\": [\"Bash(touch:*)\"]\n  }\n}\n",
    );
    let project = project.display().to_string();
    p.write(
        ".claude/agents/bold.md",
        "---\nname: bold\ndescription: bold\npermissionMode: bypassPermissions\n---\nBOLD-BODY\n",
    );
    let server = FakeServer::route(|r| {
        if is_main(r) && assistant_turns(r) == 0 {
            return anthropic::message()
                .tool_use("toolu_1", "Bash", json!({"command": "touch main.marker"}))
                .tool_use(
                    "toolu_2",
                    "Agent",
                    json!({"description": "b", "prompt": "p", "subagent_type": "bold"}),
                )
                .reply();
        }
        if r.system_text().contains("BOLD-BODY") && assistant_turns(r) == 0 {
            return anthropic::tool_use_reply(
                "toolu_c",
                "Bash",
                json!({"command": "touch child.marker"}),
            );
        }
        anthropic::text_reply("done")
    });
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "go",
            "--allowedTools",
            "Bash(touch:*)",
            "--settings",
            r#"{"permissions": {"allow": ["Bash(touch:*)"], "defaultMode": "bypassPermissions"}}"#,
        ],
    );
    assert!(!p.path().join("main.marker").exists(), "{}", run.stderr);
    assert!(!p.path().join("child.marker").exists(), "{}", run.stderr);
    let (denied, text) = &main_results(&server)[0];
    assert!(denied, "{text}");
    assert!(
        text.contains(&format!(
            "deny rule 'Bash(touch:*)' (rule 'Bash(touch:*)', written in {project}:3:14)"
        )),
        "{text}"
    );
    let child = server
        .requests()
        .into_iter()
        .find(|r| r.system_text().contains("BOLD-BODY") && assistant_turns(r) == 1)
        .expect("the child's second request");
    let r = last_tool_results(&child.json);
    assert_eq!(r[0]["is_error"], true);
    assert!(
        super::harness::result_text(&r[0]).contains(&format!("{project}:3:14")),
        "{}",
        super::harness::result_text(&r[0])
    );

    // `permissions check` names the rule's file too, whatever the layers say.
    let check = p.run(
        None,
        &[
            "permissions",
            "check",
            "Bash",
            "touch x",
            "--settings",
            r#"{"permissions": {"allow": ["Bash(touch:*)"]}}"#,
        ],
    );
    check.ok();
    assert!(
        check.stdout.starts_with("deny: deny rule 'Bash(touch:*)'"),
        "{}",
        check.stdout
    );
    assert!(
        check
            .stdout
            .contains(&format!("rule: Bash(touch:*) (written in {project}:3:14)")),
        "{}",
        check.stdout
    );
    let json = p
        .run(None, &["permissions", "check", "Bash", "touch x", "--json"])
        .json();
    assert_eq!(json["rule"]["origin"], format!("{project}:3:14"));
}

#[test]
fn allowed_and_disallowed_tools_are_the_command_line_layer() {
    let p = repo();
    let server = server(vec![
        ("Bash", json!({"command": "touch allowed.marker"})),
        ("Bash", json!({"command": "printenv HOME"})),
    ]);
    p.run(
        Some(&server),
        &[
            "-p",
            "go",
            "--allowedTools",
            "Bash(touch:*) Bash(printenv:*)",
            "--disallowedTools",
            "Bash(printenv:*)",
        ],
    );
    let r = main_results(&server);
    assert!(!r[0].0, "{r:?}");
    assert!(p.path().join("allowed.marker").exists());
    assert!(r[1].0, "{r:?}");
    assert!(
        r[1].1
            .contains("(rule 'Bash(printenv:*)', written in --disallowedTools)"),
        "{r:?}"
    );
}

#[test]
fn setting_sources_reads_only_the_named_layers_and_managed_always() {
    let p = repo();
    write_home(&p, ".claude/settings.json", r#"{"model": "user-model"}"#);
    write_home(&p, ".claude/CLAUDE.md", "USER-MEMORY\n");
    p.write(
        ".claude/settings.json",
        r#"{"permissions": {"deny": ["Read(./project-secret)"]}}"#,
    );
    p.write(".claude/settings.local.json", r#"{"model": "local-model"}"#);
    p.write("CLAUDE.md", "PROJECT-MEMORY\n");
    let managed = tempfile::tempdir().unwrap();
    let file = managed.path().join("etc/claude-code/managed-settings.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, r#"{"permissions": {"deny": ["Bash(curl:*)"]}}"#).unwrap();
    let show = |sources: &str| {
        let out = p
            .command(None)
            .env("CADRE_MANAGED_ROOT", managed.path())
            .args([
                "config",
                "show",
                "--json",
                &format!("--setting-sources={sources}"),
            ])
            .output()
            .unwrap();
        let run = super::harness::Run::from(out);
        let v = run.json();
        let deny: Vec<String> = v["settings"]["permissions"]["deny"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap().to_string())
            .collect();
        (v["settings"]["provider"]["model"].clone(), deny)
    };
    // Only the user's layer (the project's cadre.toml is a project file too).
    let (model, deny) = show("user");
    assert_eq!(model, "user-model");
    assert_eq!(deny, ["Bash(curl:*)"]);
    // Project and local, not the user's.
    let (model, deny) = show("project,local");
    assert_eq!(model, "local-model");
    assert_eq!(deny, ["Read(./project-secret)", "Bash(curl:*)"]);
    // None of the three: managed still applies.
    let (_, deny) = show("");
    assert_eq!(deny, ["Bash(curl:*)"]);
    let bad = p.run(None, &["config", "show", "--setting-sources", "user,team"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("unknown source \"team\""),
        "{}",
        bad.stderr
    );

    // Memory follows the same sources.
    let render = |sources: &str| {
        p.run(
            None,
            &["render", &format!("--setting-sources={sources}"), "hi"],
        )
        .stdout
    };
    let user_only = render("user");
    assert!(user_only.contains("USER-MEMORY") && !user_only.contains("PROJECT-MEMORY"));
    let project_only = render("project");
    assert!(!project_only.contains("USER-MEMORY") && project_only.contains("PROJECT-MEMORY"));

    // A cadre file named on the command line is read whatever the sources.
    p.write("other.toml", "[provider]\nmodel = \"named-model\"\n");
    let named = p
        .run(
            None,
            &[
                "config",
                "show",
                "--json",
                "--setting-sources=",
                "--config",
                "other.toml",
            ],
        )
        .json();
    assert_eq!(named["settings"]["provider"]["model"], "named-model");
}

#[test]
fn a_huge_or_special_settings_file_is_refused_not_read() {
    let p = repo();
    // A 1 GiB file (sparse: no disk used) where settings should be: the
    // read stops at the limit and says so.
    let file = std::fs::File::create(p.path().join("huge.bin")).unwrap();
    file.set_len(1 << 30).unwrap();
    std::fs::create_dir_all(p.path().join(".claude")).unwrap();
    let settings = p.path().join(".claude/settings.json");
    std::os::unix::fs::symlink(p.path().join("huge.bin"), &settings).unwrap();
    let out = p.run(None, &["config", "show"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("settings.json: error: larger than the 4194304-byte limit"),
        "{}",
        out.stderr
    );
    // /proc files claim 0 bytes and read on: refused all the same.
    std::fs::remove_file(&settings).unwrap();
    std::os::unix::fs::symlink("/proc/self/pagemap", &settings).unwrap();
    let out = p.run(None, &["config", "show"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    // A device or a FIFO is no settings file: not read, nothing blocks.
    std::fs::remove_file(&settings).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &settings).unwrap();
    p.run(None, &["config", "show"]).ok();
    nix_mkfifo(&p.path().join("CLAUDE.md"));
    p.write(".mcp.json", "{}");
    let render = p.run(None, &["render", "hi"]);
    render.ok();
}

fn nix_mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_linked_settings_file_is_judged_by_the_folder_it_is_used_in() {
    // An untrusted clone links its settings to a file inside a folder the
    // user trusts: trust is about the working folder, so nothing runs.
    let trusted = repo();
    let target = trusted.write(
        ".claude/settings.json",
        r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "touch linked-hook.marker"}]}]},
            "permissions": {"allow": ["Bash(touch:*)"]}}"#,
    );
    let clone = Project::untrusted();
    git(clone.path(), &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(clone.path().join(".claude")).unwrap();
    std::os::unix::fs::symlink(&target, clone.path().join(".claude/settings.json")).unwrap();
    let server = server(vec![("Bash", json!({"command": "touch bash.marker"}))]);
    let run = clone.run(Some(&server), &["run", "go"]);
    assert!(!clone.path().join("linked-hook.marker").exists());
    assert!(!clone.path().join("bash.marker").exists());
    assert!(
        run.stderr.contains("not a trusted folder"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("hooks"), "{}", run.stderr);
    assert!(marker_free(clone.path()));
}

fn marker_free(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .all(|e| !e.file_name().to_string_lossy().ends_with(".marker"))
}

#[test]
fn config_validate_places_mcp_json_entries_and_agents_inline_servers() {
    let p = repo();
    p.write(
        ".mcp.json",
        "{\n  \"mcpServers\": {\n    \"ok\": {\"command\": \"true\"},\n    \"bad\": {}\n  }\n}\n",
    );
    let agent = p.write(
        ".claude/agents/a.md",
        "---\nname: a\ndescription: d\nmcpServers:\n  - shared\n  - mine:\n      type: http\n      command: srv\n---\nx\n",
    );
    let out = p.run(None, &["config", "validate"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    let mcp = p.path().join(".mcp.json").display().to_string();
    assert!(
        out.stdout.contains(&format!(
            "{mcp}:4:5: warning: mcpServers.bad: needs a `command`"
        )),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "{}:6:5: error: mcpServers.mine: has `type: \"http\"` but a `command`",
            agent.display()
        )),
        "{}",
        out.stdout
    );
    // An environment variable cannot name the managed agent folders either.
    let mut p = p;
    p.env("CADRE_AGENTS__MANAGED_DIRS", "[\"sneaky\"]");
    let show = p.run(None, &["config", "show", "--json"]);
    assert_eq!(show.json()["settings"]["agents"]["managed_dirs"], json!([]));
    let validate = p.run(None, &["config", "validate"]);
    assert!(
        validate
            .stdout
            .contains("CADRE_AGENTS__MANAGED_DIRS: warning: `agents.managed_dirs` is ignored"),
        "{}",
        validate.stdout
    );
}

#[test]
fn an_untrusted_clone_cannot_write_or_clean_sessions_outside_itself() {
    // Another project of the user's, with an old session.
    let other = repo();
    let old = other.write(
        ".cadre/sessions/20200101T000000-0000abcd/main.jsonl",
        "{}\n",
    );
    let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(40 * 24 * 3600);
    for path in [old.clone(), old.parent().unwrap().to_path_buf()] {
        std::fs::File::open(&path)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
    }
    let sessions = other.path().join(".cadre/sessions");
    // A clone that points its transcripts there, once by path and once
    // through a link that looks like its own folder, and asks for cleanup.
    let clone = Project::untrusted();
    git(clone.path(), &["init", "-q", "-b", "main"]);
    clone.write(".claude/settings.json", r#"{"cleanupPeriodDays": 1}"#);
    std::os::unix::fs::symlink(&sessions, clone.path().join("logs")).unwrap();
    for dir in [sessions.display().to_string(), "logs/x/..".to_string()] {
        let mut clone_cfg = std::fs::read_to_string(clone.path().join("cadre.toml")).unwrap();
        clone_cfg.push_str(&format!("\n[transcripts]\ndir = {dir:?}\n"));
        clone.write("cadre.toml", &clone_cfg);
        let server = server(vec![]);
        let run = clone.run(Some(&server), &["run", "go"]);
        run.ok();
        assert!(old.exists(), "{dir}: {}", run.stderr);
        let entries = std::fs::read_dir(&sessions).unwrap().count();
        assert_eq!(
            entries, 1,
            "{dir}: a session was written to the other project"
        );
        assert!(run.stderr.contains("transcripts.dir ("), "{}", run.stderr);
        assert!(
            run.stderr.contains("transcripts.cleanup_period_days"),
            "{}",
            run.stderr
        );
        clone.write(
            "cadre.toml",
            &clone_cfg.replace(&format!("\n[transcripts]\ndir = {dir:?}\n"), ""),
        );
    }
}

#[test]
fn a_config_file_named_from_outside_the_project_is_the_users_own() {
    // A team file the user keeps outside the clone, named by --config or
    // CADRE_CONFIG: its allow rule applies in a folder not trusted.
    let team_dir = tempfile::tempdir().unwrap();
    let team = team_dir.path().join("team.toml");
    let text = format!(
        "{}\n[permissions]\nallow = [\"Bash(touch:*)\"]\n",
        super::harness::BASE_CONFIG
    );
    std::fs::write(&team, &text).unwrap();
    let mut clone = Project::untrusted();
    git(clone.path(), &["init", "-q", "-b", "main"]);
    let team = team.display().to_string();
    let call = || server(vec![("Bash", json!({"command": "touch made.marker"}))]);

    let s = call();
    let run = clone.run(Some(&s), &["--config", &team, "run", "go"]);
    assert!(clone.path().join("made.marker").exists(), "{}", run.stderr);
    assert!(
        !run.stderr.contains("not a trusted folder"),
        "{}",
        run.stderr
    );
    std::fs::remove_file(clone.path().join("made.marker")).unwrap();
    let show = clone.run(None, &["--config", &team, "config", "show", "--origin"]);
    assert!(
        line_of(&show.stdout, "Bash(touch:*)").contains(&format!("# user {team}:")),
        "{}",
        show.stdout
    );

    // The same, named by the environment.
    clone.env("CADRE_CONFIG", &team);
    let s = call();
    let run = clone.run(Some(&s), &["run", "go"]);
    assert!(clone.path().join("made.marker").exists(), "{}", run.stderr);
    std::fs::remove_file(clone.path().join("made.marker")).unwrap();

    // The same file inside the project, or a link inside the project that
    // points at it, is the project's: its allow rule needs trust.
    let clone = {
        let c = Project::untrusted();
        git(c.path(), &["init", "-q", "-b", "main"]);
        c
    };
    let inside = clone.write("team.toml", &text).display().to_string();
    std::os::unix::fs::symlink(&team, clone.path().join("linked.toml")).unwrap();
    for named in [inside.as_str(), "linked.toml"] {
        let s = call();
        let run = clone.run(Some(&s), &["--config", named, "run", "go"]);
        assert!(!clone.path().join("made.marker").exists(), "{named}");
        assert!(
            run.stderr.contains("not a trusted folder") && run.stderr.contains("permissions.allow"),
            "{named}: {}",
            run.stderr
        );
        let (denied, _) = &main_results(&s)[0];
        assert!(denied, "{named}");
    }
}

#[test]
fn project_files_linked_outside_an_untrusted_clone_are_not_read() {
    // Files elsewhere on the machine: a secret, a skill and an agent file.
    let elsewhere = tempfile::tempdir().unwrap();
    let secret = elsewhere.path().join("credentials");
    std::fs::write(&secret, "aws_secret_access_key = SECRET-MEMORY\n").unwrap();
    let skill = elsewhere.path().join("skill");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: leak\ndescription: SECRET-SKILL\n---\nx\n",
    )
    .unwrap();
    let agent = elsewhere.path().join("agent.md");
    std::fs::write(
        &agent,
        "---\nname: leaker\ndescription: SECRET-AGENT\n---\nx\n",
    )
    .unwrap();

    let clone = Project::untrusted();
    git(clone.path(), &["init", "-q", "-b", "main"]);
    let link = |target: &Path, rel: &str| {
        let at = clone.path().join(rel);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, &at).unwrap();
        at
    };
    let memory = link(&secret, ".claude/CLAUDE.md");
    link(&secret, "CLAUDE.local.md");
    link(&skill, ".claude/skills/leak");
    link(&agent, ".claude/agents/leaker.md");

    let leaked = |server: &FakeServer| {
        let body = String::from_utf8_lossy(&server.request(0).body).into_owned();
        ["SECRET-MEMORY", "SECRET-SKILL", "SECRET-AGENT"]
            .into_iter()
            .filter(|s| body.contains(s))
            .collect::<Vec<_>>()
    };
    let s = server(vec![]);
    let run = clone.run(Some(&s), &["run", "go"]);
    run.ok();
    assert_eq!(leaked(&s), Vec::<&str>::new(), "{}", run.stderr);
    for (file, target) in [
        (memory.clone(), secret.clone()),
        (clone.path().join("CLAUDE.local.md"), secret.clone()),
        (
            clone.path().join(".claude/skills/leak/SKILL.md"),
            skill.join("SKILL.md"),
        ),
        (clone.path().join(".claude/agents/leaker.md"), agent.clone()),
    ] {
        let target = target.canonicalize().unwrap();
        assert!(
            run.stderr.contains(&format!(
                "link to {}, outside the project ({})",
                target.display(),
                file.display()
            )),
            "{file:?}: {}",
            run.stderr
        );
    }
    assert!(
        run.stderr.contains("Trust the folder with"),
        "{}",
        run.stderr
    );
    // `cadre render` sends nothing either.
    let render = clone.run(None, &["render", "go"]);
    assert!(
        !render.stdout.contains("SECRET-MEMORY"),
        "{}",
        render.stdout
    );

    // Trusted, the links are the user's choice: all three are read.
    let s = server(vec![]);
    clone.run(Some(&s), &["--trust", "run", "go"]).ok();
    assert_eq!(
        leaked(&s),
        ["SECRET-MEMORY", "SECRET-SKILL", "SECRET-AGENT"],
        "a trusted folder reads its links"
    );
}

#[test]
fn an_agents_memory_file_linked_outside_an_untrusted_clone_is_not_read() {
    let elsewhere = tempfile::tempdir().unwrap();
    let secret = elsewhere.path().join("notes");
    std::fs::write(&secret, "SECRET-AGENT-MEMORY\n").unwrap();
    let clone = Project::untrusted();
    git(clone.path(), &["init", "-q", "-b", "main"]);
    clone.write(
        ".claude/agents/keeper.md",
        "---\nname: keeper\ndescription: Keeps notes\nmemory: project\n---\nKEEPER-BODY\n",
    );
    let memory = clone.path().join(".claude/agent-memory/keeper/MEMORY.md");
    std::fs::create_dir_all(memory.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&secret, &memory).unwrap();
    let keeper_system = |args: &[&str]| {
        let s = server(vec![(
            "Agent",
            json!({"description": "d", "prompt": "note", "subagent_type": "keeper"}),
        )]);
        let mut all = args.to_vec();
        all.extend(["run", "go"]);
        let run = clone.run(Some(&s), &all);
        let child = s
            .requests()
            .into_iter()
            .find(|r| r.system_text().contains("KEEPER-BODY"))
            .expect("the agent ran");
        (run, child.system_text())
    };
    let (run, system) = keeper_system(&[]);
    assert!(!system.contains("SECRET-AGENT-MEMORY"), "{system}");
    let target = secret.canonicalize().unwrap();
    assert!(
        run.stderr.contains(&format!(
            "agent `keeper`: {} links to {}, outside the project, and was not read",
            memory.display(),
            target.display()
        )) && run.stderr.contains("cadre trust"),
        "{}",
        run.stderr
    );
    let (_, system) = keeper_system(&["--trust"]);
    assert!(system.contains("SECRET-AGENT-MEMORY"), "{system}");
}
