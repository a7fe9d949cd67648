//! Claude Code plugins through the real binary: a folder given with
//! `--plugin-dir`, a plugin a project enables from its team's marketplace
//! (a git repository, cloned over `file://`) installed with `cadre plugins
//! install`, and trust: a plugin a repository enables loads nothing until
//! the folder is trusted. Each plugin is written the way a plugin author
//! lays one out: `.claude-plugin/plugin.json`, `commands/`, `agents/`,
//! `skills/`, `hooks/hooks.json` and `.mcp.json`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::harness::{Project, tool_names};
use super::kit::{FakeServer, anthropic};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A plugin named `hello` at `root`: a command, an agent that asks for a
/// permission mode it may not have, a skill, a SessionStart hook that
/// writes its `CLAUDE_PLUGIN_ROOT` into the project, and an MCP server.
fn hello_plugin(root: &Path) {
    write(
        root,
        ".claude-plugin/plugin.json",
        r#"{"name": "hello", "version": "1.2.0", "description": "Greets"}"#,
    );
    write(
        root,
        "commands/greet.md",
        "---\ndescription: Greet someone\n---\nSay hello to $ARGUMENTS from the plugin.\n",
    );
    write(
        root,
        "agents/helper.md",
        "---\nname: helper\ndescription: Helps with greetings\npermissionMode: bypassPermissions\n---\nYou help.\n",
    );
    write(
        root,
        "skills/tidy/SKILL.md",
        "---\nname: tidy\ndescription: Tidies greetings\n---\nTidy up.\n",
    );
    write(
        root,
        "hooks/hooks.json",
        r#"{"description": "records where the plugin is", "hooks": {"SessionStart": [{"hooks": [
            {"type": "command", "command": "printf '%s|%s' \"$CLAUDE_PLUGIN_ROOT\" '${CLAUDE_PLUGIN_ROOT}' > \"$CLAUDE_PROJECT_DIR/plugin-root.txt\""}
        ]}]}}"#,
    );
    write(
        root,
        "output-styles/terse.md",
        "---\nname: Terse\ndescription: Short answers\n---\nAnswer in one line.\n",
    );
    let (cmd, args) = super::mcp::server_command();
    write(
        root,
        ".mcp.json",
        &json!({"mcpServers": {"srv": {
            "command": cmd,
            "args": args,
            "env": {super::mcp::MODE_ENV: "echo"}
        }}})
        .to_string(),
    );
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

/// The texts of the first request's first user message.
fn first_user_texts(server: &FakeServer) -> String {
    server.request(0).json["messages"][0]["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[test]
fn a_plugin_dir_brings_its_commands_agents_skills_hooks_and_mcp_server() {
    let p = Project::new();
    let plugin = p.home.path().join("dev/hello-plugin");
    hello_plugin(&plugin);
    let server = FakeServer::start([anthropic::text_reply("greeted")]);
    let dir = plugin.display().to_string();
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "/hello:greet Bob",
            "--output-format",
            "stream-json",
            "--verbose",
            "--plugin-dir",
            &dir,
            "--settings",
            r#"{"outputStyle": "hello:Terse"}"#,
        ],
    );
    run.ok();
    let lines = run.json_lines();
    let init = lines.iter().find(|l| l["subtype"] == "init").unwrap();
    assert_eq!(
        init["plugins"],
        json!([{"name": "hello", "path": dir, "source": "hello@inline", "version": "1.2.0"}])
    );
    let commands = strings(&init["slash_commands"]);
    assert!(
        commands.contains(&"hello:greet".to_string())
            && commands.contains(&"hello:tidy".to_string()),
        "{commands:?}"
    );
    assert!(strings(&init["agents"]).contains(&"hello:helper".to_string()));
    assert!(strings(&init["skills"]).contains(&"hello:tidy".to_string()));
    assert_eq!(init["output_style"], "hello:Terse");
    let servers = init["mcp_servers"].to_string();
    assert!(servers.contains("plugin:hello:srv"), "{servers}");

    // The typed command was the plugin's, expanded.
    let texts = first_user_texts(&server);
    assert!(
        texts.contains("Say hello to Bob from the plugin."),
        "{texts}"
    );
    // The plugin's server's tools are offered under Claude Code's name.
    let tools = tool_names(&server.request(0).json);
    assert!(
        tools.contains(&"mcp__plugin_hello_srv__echo".to_string()),
        "{tools:?}"
    );
    // The hook ran with the plugin's folder, as a variable and written
    // into its command.
    assert_eq!(
        p.read("plugin-root.txt"),
        format!("{dir}|{dir}"),
        "{}",
        run.stderr
    );

    // `config show` lists the plugin and where it came from, and each of
    // its hooks at its place in the plugin's file.
    let show = p.run(None, &["config", "show", "--origin", "--plugin-dir", &dir]);
    show.ok();
    assert!(
        show.stdout.contains("hello@inline") && show.stdout.contains("--plugin-dir"),
        "{}",
        show.stdout
    );
    let hooks_json = plugin.join("hooks/hooks.json").display().to_string();
    assert!(
        show.stdout.contains(&format!("{hooks_json}:2:")),
        "{}",
        show.stdout
    );
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A team's marketplace as a bare git repository: `team-tools`, holding
/// the `hello` plugin under `plugins/hello`. Returns its `file://` URL.
fn git_marketplace(base: &Path) -> String {
    let work = base.join("market-src");
    write(
        &work,
        ".claude-plugin/marketplace.json",
        r#"{"name": "team-tools", "owner": {"name": "Team"},
            "plugins": [{"name": "hello", "source": "./plugins/hello", "description": "Greets"}]}"#,
    );
    hello_plugin(&work.join("plugins/hello"));
    git(&work, &["init", "--quiet", "-b", "main"]);
    git(&work, &["add", "."]);
    git(&work, &["commit", "--quiet", "-m", "marketplace"]);
    let bare = base.join("market.git");
    git(
        base,
        &[
            "clone",
            "--quiet",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    format!("file://{}", bare.display())
}

#[test]
fn a_plugin_the_project_enables_is_installed_from_its_git_marketplace() {
    let p = Project::new();
    let remote = tempfile::tempdir().unwrap();
    let url = git_marketplace(remote.path());
    p.write(
        ".claude/settings.json",
        &json!({
            "extraKnownMarketplaces": {"team-tools": {"source": {"source": "git", "url": url}}},
            "enabledPlugins": {"hello@team-tools": true}
        })
        .to_string(),
    );
    // Not installed yet: said, and nothing is loaded.
    let before = p.run(None, &["config", "validate"]);
    let said = format!("{}{}", before.stdout, before.stderr);
    assert!(
        said.contains("cadre plugins install hello@team-tools"),
        "{said}"
    );

    let install = p.run(None, &["plugins", "install", "hello@team-tools"]);
    install.ok();
    let home = p.home.path();
    let cached = home.join(".claude/plugins/cache/team-tools/hello/1.2.0");
    assert!(
        cached.join("commands/greet.md").is_file(),
        "{}",
        install.stdout
    );
    assert!(
        home.join(".claude/plugins/marketplaces/team-tools/.claude-plugin/marketplace.json")
            .is_file()
    );
    let records: Value = serde_json::from_str(
        &std::fs::read_to_string(home.join(".claude/plugins/installed_plugins.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(records["version"], 2);
    assert_eq!(
        records["plugins"]["hello@team-tools"][0]["installPath"],
        cached.display().to_string()
    );
    let user: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".claude/settings.json")).unwrap())
            .unwrap();
    assert_eq!(user["enabledPlugins"]["hello@team-tools"], true);

    let list = p.run(None, &["plugins", "list"]);
    list.ok();
    assert!(
        list.stdout.contains("hello@team-tools") && list.stdout.contains("loaded"),
        "{}",
        list.stdout
    );

    let server = FakeServer::start([anthropic::text_reply("greeted")]);
    p.run(Some(&server), &["-p", "/hello:greet Ann"]).ok();
    assert!(first_user_texts(&server).contains("Say hello to Ann from the plugin."));
    assert_eq!(
        p.read("plugin-root.txt"),
        format!("{0}|{0}", cached.display())
    );

    let remove = p.run(None, &["plugins", "remove", "hello@team-tools"]);
    remove.ok();
    assert!(!cached.exists());
    let after = p.run(None, &["commands", "list"]);
    assert!(!after.stdout.contains("hello:greet"), "{}", after.stdout);
}

/// A plugin kept in the project's own marketplace folder, enabled by the
/// project's settings.
fn project_with_local_plugin() -> Project {
    let p = Project::new();
    p.write(
        "tools/market/.claude-plugin/marketplace.json",
        r#"{"name": "local", "owner": {"name": "Team"},
            "plugins": [{"name": "hello", "source": "./hello"}]}"#,
    );
    hello_plugin(&p.path().join("tools/market/hello"));
    p.write(
        ".claude/settings.json",
        &json!({
            "extraKnownMarketplaces": {"local": {"source": {"source": "directory", "path": "tools/market"}}},
            "enabledPlugins": {"hello@local": true}
        })
        .to_string(),
    );
    p
}

#[test]
fn a_plugin_a_project_enables_runs_nothing_until_the_folder_is_trusted() {
    let p = project_with_local_plugin();
    p.untrust();
    let server = FakeServer::start([anthropic::text_reply("hi"), anthropic::text_reply("hi")]);
    let run = p.run(
        Some(&server),
        &["-p", "hello", "--output-format", "stream-json", "--verbose"],
    );
    run.ok();
    let lines = run.json_lines();
    let init = lines.iter().find(|l| l["subtype"] == "init").unwrap();
    assert_eq!(init["plugins"], json!([]));
    assert!(!strings(&init["slash_commands"]).contains(&"hello:greet".to_string()));
    assert!(!PathBuf::from(p.path()).join("plugin-root.txt").exists());
    let tools = tool_names(&server.request(0).json);
    assert!(
        !tools.iter().any(|t| t.starts_with("mcp__plugin_")),
        "{tools:?}"
    );
    assert!(
        run.stderr.contains("plugins.enabled") && run.stderr.contains("cadre trust"),
        "{}",
        run.stderr
    );

    // Trusted, the same folder loads the plugin and runs its hook.
    let run = p.run(
        Some(&server),
        &[
            "--trust",
            "-p",
            "hello",
            "--output-format",
            "stream-json",
            "--verbose",
        ],
    );
    run.ok();
    let lines = run.json_lines();
    let init = lines.iter().find(|l| l["subtype"] == "init").unwrap();
    assert_eq!(init["plugins"][0]["source"], "hello@local");
    assert!(p.path().join("plugin-root.txt").exists());
}

/// A plugin whose manifest keeps its parts outside the default folders:
/// `commands`, `agents` and `outputStyles` replace `commands/`, `agents/`
/// and `output-styles/`; `skills`, `hooks` and `mcpServers` add to
/// theirs; `lspServers` are listed as not supported. Three `commands`
/// entries try to leave the plugin (`..`, an absolute path, a symbolic
/// link to a folder outside it) and are refused at their place in the
/// manifest.
fn kit_plugin(root: &Path, outside: &Path) {
    let (cmd, args) = super::mcp::server_command();
    // The server writes its process id into the plugin's data folder.
    let server = json!({"command": cmd, "args": args, "env": {
        super::mcp::MODE_ENV: "echo",
        super::mcp::PIDFILE_ENV: "${CLAUDE_PLUGIN_DATA}/mcp.pid"
    }});
    write(
        root,
        ".claude-plugin/plugin.json",
        &format!(
            r#"{{
  "name": "kit",
  "commands": ["./cmds/deploy.md", "./more-cmds",
               "../outside.md",
               "/etc/passwd",
               "./link-out"],
  "agents": "./team/reviewer.md",
  "skills": "./extra-skills",
  "outputStyles": "./styles/brief.md",
  "hooks": "./config/hooks.json",
  "mcpServers": {{"inline": {server}}},
  "lspServers": {{"rust": {{"command": "rust-analyzer", "extensionToLanguage": {{".rs": "rust"}}}}}}
}}"#
        ),
    );
    write(
        root,
        "cmds/deploy.md",
        "---\ndescription: Deploy\n---\nDeploy $ARGUMENTS now.\n",
    );
    write(root, "more-cmds/ship.md", "Ship it.\n");
    // Replaced by the manifest's `commands`, `agents`, `outputStyles`.
    write(root, "commands/old.md", "Old command.\n");
    write(
        root,
        "agents/old-agent.md",
        "---\nname: old-agent\ndescription: Old\n---\nOld.\n",
    );
    write(
        root,
        "output-styles/old.md",
        "---\nname: Old\ndescription: Old\n---\nOld.\n",
    );
    write(
        root,
        "team/reviewer.md",
        "---\nname: reviewer\ndescription: Reviews\n---\nYou review.\n",
    );
    // Added to `skills/` by the manifest's `skills`.
    write(
        root,
        "skills/base/SKILL.md",
        "---\nname: base\ndescription: Base skill\n---\nBase.\n",
    );
    write(
        root,
        "extra-skills/extra/SKILL.md",
        "---\nname: extra\ndescription: Extra skill\n---\nExtra.\n",
    );
    write(
        root,
        "styles/brief.md",
        "---\nname: Brief\ndescription: Brief answers\n---\nBe brief.\n",
    );
    write(
        root,
        "config/hooks.json",
        r#"{"hooks": {"SessionStart": [{"hooks": [
            {"type": "command", "command": "printf '%s|%s' \"$CLAUDE_PLUGIN_DATA\" '${CLAUDE_PLUGIN_DATA}' > \"$CLAUDE_PROJECT_DIR/plugin-data.txt\""}
        ]}]}}"#,
    );
    write(
        root,
        ".lsp.json",
        r#"{"go": {"command": "gopls", "extensionToLanguage": {".go": "go"}}}"#,
    );
    write(outside, "evil.md", "Outside the plugin.\n");
    std::os::unix::fs::symlink(outside, root.join("link-out")).unwrap();
}

#[test]
fn a_plugin_manifest_names_its_parts_paths_and_gets_a_data_folder() {
    let p = Project::new();
    let plugin = p.home.path().join("dev/kit");
    kit_plugin(&plugin, &p.home.path().join("elsewhere"));
    let dir = plugin.display().to_string();
    let server = FakeServer::start([anthropic::text_reply("deployed")]);
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "/kit:deploy prod",
            "--output-format",
            "stream-json",
            "--verbose",
            "--plugin-dir",
            &dir,
            "--settings",
            r#"{"outputStyle": "kit:Brief"}"#,
        ],
    );
    run.ok();
    let lines = run.json_lines();
    let init = lines.iter().find(|l| l["subtype"] == "init").unwrap();
    let commands = strings(&init["slash_commands"]);
    for wanted in ["kit:deploy", "kit:ship", "kit:base", "kit:extra"] {
        assert!(
            commands.contains(&wanted.to_string()),
            "{wanted}: {commands:?}"
        );
    }
    for unwanted in ["kit:old", "kit:evil"] {
        assert!(
            !commands.contains(&unwanted.to_string()),
            "{unwanted}: {commands:?}"
        );
    }
    let agents = strings(&init["agents"]);
    assert!(agents.contains(&"kit:reviewer".to_string()), "{agents:?}");
    assert!(!agents.contains(&"kit:old-agent".to_string()), "{agents:?}");
    assert_eq!(init["output_style"], "kit:Brief");
    let texts = first_user_texts(&server);
    assert!(texts.contains("Deploy prod now."), "{texts}");
    let tools = tool_names(&server.request(0).json);
    assert!(
        tools.contains(&"mcp__plugin_kit_inline__echo".to_string()),
        "{tools:?}"
    );

    // Each entry that leaves the plugin is refused where it is written.
    let manifest = plugin
        .join(".claude-plugin/plugin.json")
        .display()
        .to_string();
    for (line, why) in [
        (4, "leaves the plugin's folder"),
        (5, "is an absolute path"),
        (6, "leads out of the plugin's folder"),
    ] {
        assert!(
            run.stderr
                .lines()
                .any(|l| l.contains(&format!("{manifest}:{line}:")) && l.contains(why)),
            "line {line} ({why}): {}",
            run.stderr
        );
    }

    // The hook got the data folder, created, as a variable and in its
    // command: Claude Code's `~/.claude/plugins/data/NAME-SOURCE`.
    let data = p.home.path().join(".claude/plugins/data/kit-inline");
    let data_s = data.display().to_string();
    assert_eq!(
        p.read("plugin-data.txt"),
        format!("{data_s}|{data_s}"),
        "{}",
        run.stderr
    );
    assert!(data.is_dir());
    assert!(
        data.join("mcp.pid").is_file(),
        "the MCP server got the data folder"
    );

    // The LSP servers are listed as not supported, not dropped.
    let list = p.run(None, &["plugins", "list", "--plugin-dir", &dir]);
    list.ok();
    assert!(
        list.stdout.contains("lspServers go, rust: not supported"),
        "{}",
        list.stdout
    );
    assert!(list.stdout.contains(&data_s), "{}", list.stdout);
    let show = p.run(None, &["config", "show", "--plugin-dir", &dir]);
    show.ok();
    assert!(
        show.stdout.contains("lspServers go, rust: not supported"),
        "{}",
        show.stdout
    );
}

/// The mapping form of the manifest's `commands`: a command read from a
/// file of the plugin under the mapping's name and description, and one
/// written inline; `commands/` is not read then.
#[test]
fn a_plugin_manifest_maps_command_names_to_files_and_inline_text() {
    let p = Project::new();
    let plugin = p.home.path().join("dev/notes");
    write(
        &plugin,
        ".claude-plugin/plugin.json",
        r#"{"name": "notes", "commands": {
            "about": {"source": "./docs/about.md", "description": "About the notes", "argumentHint": "[topic]"},
            "hi": {"content": "Say hi to $ARGUMENTS from the notes."},
            "broken": {"description": "no text"}
        }}"#,
    );
    write(
        &plugin,
        "docs/about.md",
        "---\ndescription: old words\n---\nTell about $ARGUMENTS.\n",
    );
    write(&plugin, "commands/old.md", "Old command.\n");
    let dir = plugin.display().to_string();
    let server = FakeServer::start([anthropic::text_reply("hi")]);
    let run = p.run(
        Some(&server),
        &[
            "-p",
            "/notes:hi Ann",
            "--output-format",
            "stream-json",
            "--verbose",
            "--plugin-dir",
            &dir,
        ],
    );
    run.ok();
    let lines = run.json_lines();
    let init = lines.iter().find(|l| l["subtype"] == "init").unwrap();
    let commands = strings(&init["slash_commands"]);
    assert!(
        commands.contains(&"notes:about".to_string()),
        "{commands:?}"
    );
    assert!(commands.contains(&"notes:hi".to_string()), "{commands:?}");
    assert!(!commands.contains(&"notes:old".to_string()), "{commands:?}");
    assert!(
        !commands.contains(&"notes:broken".to_string()),
        "{commands:?}"
    );
    let texts = first_user_texts(&server);
    assert!(texts.contains("Say hi to Ann from the notes."), "{texts}");
    let manifest = plugin
        .join(".claude-plugin/plugin.json")
        .display()
        .to_string();
    assert!(
        run.stderr
            .lines()
            .any(|l| l.contains(&format!("{manifest}:4:"))
                && l.contains("neither `source` nor `content`")),
        "{}",
        run.stderr
    );
    let list = p.run(None, &["commands", "list", "--json", "--plugin-dir", &dir]);
    list.ok();
    assert!(list.stdout.contains("About the notes"), "{}", list.stdout);
    assert!(!list.stdout.contains("old words"), "{}", list.stdout);
}
