//! A team's `.claude` folder beyond settings, through the real binary:
//! rule files (`.claude/rules`, with and without `paths`), nested
//! `CLAUDE.md` files below the working directory, and output styles
//! (`.claude/output-styles`, the built-in ones, `outputStyle`), with the
//! cached prefix kept and trust applied (docs/memory.md,
//! docs/output-styles.md).

use serde_json::{Value, json};

use super::harness::{Project, assistant_turns, is_fork_child, is_main_session, last_tool_results};
use super::kit::{FakeServer, anthropic};

/// Every text block of the user messages of a request, in order.
fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect()
}

/// A value without its `cache_control` marks (the breakpoint moves to the
/// newest message; the bytes it marks do not change).
fn uncached(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "cache_control")
                .map(|(k, v)| (k.clone(), uncached(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(uncached).collect()),
        other => other.clone(),
    }
}

/// How many user text blocks of a request contain `needle`.
fn count(body: &Value, needle: &str) -> usize {
    user_texts(body)
        .iter()
        .filter(|t| t.contains(needle))
        .count()
}

fn team_project() -> Project {
    let p = Project::new();
    p.write("CLAUDE.md", "Root memory.\n");
    p.write(".claude/rules/style.md", "Always rule: indent with tabs.\n");
    p.write(
        ".claude/rules/api/typescript.md",
        "---\npaths:\n  - \"src/api/**/*.ts\"\n---\nTS rule: prefer interfaces to type aliases.\n",
    );
    p.write(
        ".claude/rules/docs.md",
        "---\npaths: \"docs/**/*.md, *.txt\"\n---\nDocs rule: one sentence per line.\n",
    );
    p.write(
        "src/api/CLAUDE.md",
        "Nested memory: handlers return typed errors.\n",
    );
    p.write("src/api/x.ts", "export const x = 1;\n");
    p.write("src/api/y.ts", "export const y = 2;\n");
    p
}

fn read(p: &Project, rel: &str) -> Value {
    json!({"file_path": p.path().join(rel).display().to_string()})
}

#[test]
fn rules_and_nested_memory_arrive_once_with_the_files_they_concern() {
    let p = team_project();
    let server = FakeServer::start([
        anthropic::tool_use_reply("m1", "Read", read(&p, "src/api/x.ts")),
        anthropic::tool_use_reply("m2", "Read", read(&p, "src/api/y.ts")),
        anthropic::text_reply("done"),
        // The resumed session reads the first file again.
        anthropic::tool_use_reply("m3", "Read", read(&p, "src/api/x.ts")),
        anthropic::text_reply("done again"),
    ]);
    let first = p
        .run(
            Some(&server),
            &["-p", "look at the api", "--output-format", "json"],
        )
        .ok()
        .json();

    // The first request: CLAUDE.md and the rule without paths, not the
    // rule with paths nor the nested memory.
    let r0 = server.request(0).json;
    let memory = &user_texts(&r0)[0];
    assert!(memory.contains("Root memory."), "{memory}");
    assert!(
        memory.contains("Always rule: indent with tabs."),
        "{memory}"
    );
    assert!(
        memory.find("Root memory.") < memory.find("Always rule"),
        "rules come after CLAUDE.md: {memory}"
    );
    assert_eq!(count(&r0, "TS rule"), 0);
    assert_eq!(count(&r0, "Nested memory"), 0);
    assert_eq!(count(&r0, "Docs rule"), 0);

    // After the Read: the matching rule and the folder's CLAUDE.md join
    // the message of the tool result, after it; everything before is the
    // first request's bytes.
    let r1 = server.request(1).json;
    let last = r1["messages"].as_array().unwrap().last().unwrap().clone();
    let blocks = last["content"].as_array().unwrap();
    assert_eq!(blocks[0]["type"], "tool_result", "{last}");
    let later: Vec<&str> = blocks[1..]
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect();
    assert_eq!(later.len(), 2, "{later:?}");
    assert!(later[0].contains("Nested memory: handlers return typed errors."));
    assert!(later[0].contains(&p.path().join("src/api/CLAUDE.md").display().to_string()));
    assert!(later[1].contains("TS rule: prefer interfaces"));
    assert_eq!(uncached(&r1["system"]), uncached(&r0["system"]));
    assert_eq!(uncached(&r1["tools"]), uncached(&r0["tools"]));
    assert_eq!(
        uncached(&r1["messages"][0]),
        uncached(&r0["messages"][0]),
        "the cached prefix changed"
    );

    // The second Read (same rule, same folder): nothing delivered again,
    // and the earlier messages keep their bytes.
    let r2 = server.request(2).json;
    assert_eq!(count(&r2, "TS rule"), 1);
    assert_eq!(count(&r2, "Nested memory"), 1);
    let n1 = r1["messages"].as_array().unwrap().len();
    assert_eq!(
        uncached(&Value::from(
            r2["messages"].as_array().unwrap()[..n1].to_vec()
        )),
        uncached(&r1["messages"])
    );
    assert_eq!(count(&r2, "Docs rule"), 0, "no matching file was touched");

    // A resumed session knows what it was given: reading the file again
    // brings nothing twice.
    let id = first["session_id"].as_str().unwrap().to_string();
    p.run(
        Some(&server),
        &["-p", "again", "--resume", &id, "--output-format", "json"],
    )
    .ok();
    let r4 = server.request(4).json;
    assert_eq!(last_tool_results(&r4).len(), 1);
    assert_eq!(count(&r4, "TS rule"), 1, "delivered again after resume");
    assert_eq!(count(&r4, "Nested memory"), 1);
    let lines = p.transcript_lines();
    assert!(
        lines.iter().any(|l| l["type"] == "instructions"),
        "the transcript records the delivery"
    );
}

#[test]
fn a_delivered_rule_survives_a_compaction_once() {
    let mut p = team_project();
    p.config("[compact]\nthreshold = 0.5\n[compact.windows]\n\"claude-\" = 1000\n");
    let notes = p.write("notes.txt", "alpha\n");
    let server = FakeServer::start([
        anthropic::message()
            .tool_use("toolu_1", "Read", read(&p, "src/api/x.ts"))
            .usage(100, 10)
            .reply(),
        anthropic::message()
            .tool_use("toolu_2", "Read", json!({"file_path": notes}))
            .usage(600, 10)
            .reply(),
        anthropic::message()
            .text("SUMMARY: read two files")
            .usage(50, 20)
            .reply(),
        anthropic::message().text("all done").usage(120, 5).reply(),
    ]);
    let r = p.run(Some(&server), &["run", "look"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(server.request_count(), 4);
    // The summary replaced the message that carried the rule and the
    // nested memory: they come back with it, once.
    let after = server.request(3).json;
    let first = user_texts(&json!({"messages": [after["messages"][0].clone()]})).join("\n");
    assert!(first.contains("SUMMARY: read two files"), "{first}");
    assert!(first.contains("TS rule"), "{first}");
    assert_eq!(count(&after, "TS rule"), 1);
    assert_eq!(count(&after, "Nested memory"), 1);
    // notes.txt matched the docs rule (`*.txt` at any depth), in the
    // kept exchange: it stays where it was.
    assert_eq!(count(&after, "Docs rule"), 1);
    // The transcript names all three after the compact line (for a resume).
    let lines = p.transcript_lines();
    let compact = lines.iter().position(|l| l["type"] == "compact").unwrap();
    assert!(
        lines[compact..].iter().any(|l| l["type"] == "instructions"
            && l["delivered"].as_array().is_some_and(|d| d.len() == 3)),
        "{lines:#?}"
    );
}

#[test]
fn a_fork_inherits_delivered_rules_and_is_not_given_them_again() {
    let mut p = team_project();
    p.config("[features]\nFORK_SUBAGENT = true\n[flags.FORK_SUBAGENT]\ndescription = \"fork\"\ngates = [\"coordinator\"]\n");
    let x = read(&p, "src/api/x.ts");
    let y = read(&p, "src/api/y.ts");
    let server = FakeServer::route(move |r| {
        if is_main_session(r) {
            return match assistant_turns(r) {
                0 => anthropic::tool_use_reply("toolu_1", "Read", x.clone()),
                1 => anthropic::tool_use_reply(
                    "toolu_2",
                    "Agent",
                    json!({"description": "d", "prompt": "look at y", "fork": true}),
                ),
                _ => anthropic::text_reply("main done"),
            };
        }
        // The fork child reads another file the same rule covers.
        if assistant_turns(r) == 2 {
            anthropic::tool_use_reply("toolu_3", "Read", y.clone())
        } else {
            anthropic::text_reply("fork done")
        }
    });
    p.run(Some(&server), &["run", "go"]).ok();
    let child = server
        .requests()
        .into_iter()
        .find(|r| is_fork_child(r) && assistant_turns(r) == 3)
        .expect("the fork read its file");
    assert_eq!(last_tool_results(&child.json).len(), 1);
    // Inherited with the parent's messages, not given twice.
    assert_eq!(count(&child.json, "TS rule"), 1);
    assert_eq!(count(&child.json, "Nested memory"), 1);
}

#[test]
fn an_output_style_shapes_the_system_prompt_and_init() {
    let p = Project::new();
    p.write(
        ".claude/output-styles/pirate.md",
        "---\nname: Pirate\ndescription: Arr\n---\nSpeak like a pirate in every answer.\n",
    );
    p.write(".claude/settings.json", "{\"outputStyle\": \"Pirate\"}\n");
    let server = FakeServer::start([anthropic::text_reply("arr")]);
    let out = p
        .run(
            Some(&server),
            &["-p", "hi", "--output-format", "stream-json", "--verbose"],
        )
        .ok()
        .json_lines();
    let init = out.iter().find(|l| l["subtype"] == "init").unwrap();
    assert_eq!(init["output_style"], "Pirate");
    let system = server.request(0).system_text();
    assert!(
        system.contains("# Output style: Pirate\n\nSpeak like a pirate in every answer."),
        "{system}"
    );
    // keep-coding-instructions is absent: the coding paragraph goes.
    assert!(!system.contains("Work carefully"), "{system}");
    assert!(
        system.find("<env>") < system.find("# Output style"),
        "{system}"
    );

    // A built-in style from the user's settings keeps them.
    let p = Project::new();
    let user = p.home.path().join(".claude");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("settings.json"),
        "{\"outputStyle\": \"Explanatory\"}",
    )
    .unwrap();
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    let out = p
        .run(
            Some(&server),
            &["-p", "hi", "--output-format", "stream-json", "--verbose"],
        )
        .ok()
        .json_lines();
    assert_eq!(out[0]["output_style"], "Explanatory");
    let system = server.request(0).system_text();
    assert!(system.contains("# Output style: Explanatory"), "{system}");
    assert!(system.contains("Insight"), "{system}");
    assert!(system.contains("Work carefully"), "{system}");

    // Without a style, the prompt is the default one.
    let p = Project::new();
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    let out = p
        .run(
            Some(&server),
            &["-p", "hi", "--output-format", "stream-json", "--verbose"],
        )
        .ok()
        .json_lines();
    assert_eq!(out[0]["output_style"], "default");
    assert!(!server.request(0).system_text().contains("Output style"));
}

#[test]
fn an_untrusted_clone_cannot_choose_the_style_or_link_rules_outside() {
    let p = Project::untrusted();
    p.write(
        ".claude/output-styles/quiet.md",
        "---\nkeep-coding-instructions: false\n---\nSay nothing useful.\n",
    );
    p.write(".claude/settings.json", "{\"outputStyle\": \"quiet\"}\n");
    p.write(".claude/rules/inside.md", "Inside rule.\n");
    let secret = p.home.path().join("secret.md");
    std::fs::write(&secret, "SECRET TOKEN\n").unwrap();
    std::os::unix::fs::symlink(&secret, p.path().join(".claude/rules/linked.md")).unwrap();
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    let run = p.run(
        Some(&server),
        &["-p", "hi", "--output-format", "stream-json", "--verbose"],
    );
    let out = run.ok().json_lines();
    assert_eq!(out[0]["output_style"], "default");
    let r0 = server.request(0).json;
    assert!(
        !server
            .request(0)
            .system_text()
            .contains("Say nothing useful")
    );
    // As for CLAUDE.md: a rule inside the project loads, a link out does not.
    assert_eq!(count(&r0, "Inside rule."), 1);
    assert!(!server.request(0).body_str().contains("SECRET TOKEN"));
    assert!(run.stderr.contains("linked.md"), "{}", run.stderr);
    assert!(run.stderr.contains("output_style"), "{}", run.stderr);
}

#[test]
fn config_show_lists_rules_styles_and_nested_memory_and_validate_places_errors() {
    let p = team_project();
    p.write(".claude/output-styles/pirate.md", "Arr.\n");
    p.write(
        ".claude/rules/broken.md",
        "---\npaths:\n  - \"src/[x\"\n---\nBroken.\n",
    );
    p.write(".claude/rules/bad-yaml.md", "---\npaths: [a\n---\nB\n");
    let show = p.run(None, &["config", "show"]).ok().stdout.clone();
    let rules = p.path().join(".claude/rules");
    assert!(
        show.contains(&format!("{}    rule", rules.join("style.md").display())),
        "{show}"
    );
    assert!(
        show.contains(&format!(
            "{}    paths: src/api/**/*.ts",
            rules.join("api/typescript.md").display()
        )),
        "{show}"
    );
    assert!(
        show.contains(&p.path().join("src/api/CLAUDE.md").display().to_string()),
        "{show}"
    );
    assert!(show.contains("pirate"), "{show}");
    let v = p.run(None, &["config", "show", "--json"]).ok().json();
    assert_eq!(v["instructions"]["output_style"], "default");
    assert_eq!(v["instructions"]["path_rules"].as_array().unwrap().len(), 2);

    let run = p.run(None, &["config", "validate"]);
    let out = format!("{}{}", run.stdout, run.stderr);
    assert!(
        out.contains(&format!("{}:3:5", rules.join("broken.md").display())),
        "{out}"
    );
    assert!(
        out.contains(&format!("{}:2:", rules.join("bad-yaml.md").display())),
        "{out}"
    );
}

#[test]
fn setting_sources_choose_whose_agents_skills_and_commands_load() {
    // The Python SDK's e2e test_setting_sources_user_only: with only the
    // user's source, the project's agents, skills and commands stay out
    // (as in Claude Code), and with only the project's, the user's do.
    let p = Project::new();
    p.write(
        ".claude/commands/testcmd.md",
        "---\ndescription: Test command\n---\nThis is a test command.\n",
    );
    p.write(
        ".claude/agents/project-helper.md",
        "---\nname: project-helper\ndescription: Helps\n---\nHelp.\n",
    );
    p.write(
        ".claude/skills/project-skill/SKILL.md",
        "---\nname: project-skill\ndescription: A skill\n---\nDo it.\n",
    );
    let home = p.home.path().join(".claude");
    std::fs::create_dir_all(home.join("commands")).unwrap();
    std::fs::write(
        home.join("commands/usercmd.md"),
        "---\ndescription: Mine\n---\nMine.\n",
    )
    .unwrap();
    let init = |sources: &str| {
        let server = FakeServer::start([anthropic::text_reply("4")]);
        let flag = format!("--setting-sources={sources}");
        let args = [
            "-p",
            "What is 2 + 2?",
            "--output-format",
            "stream-json",
            "--verbose",
        ];
        let mut all: Vec<&str> = args.to_vec();
        all.push(&flag);
        let out = p.run(Some(&server), &all).ok().json_lines();
        let names = |key: &str| -> Vec<String> {
            out[0][key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        };
        (names("slash_commands"), names("agents"), names("skills"))
    };
    let (commands, agents, skills) = init("user");
    assert!(commands.contains(&"usercmd".to_string()), "{commands:?}");
    for name in ["testcmd", "project-skill"] {
        assert!(!commands.iter().any(|c| c == name), "{name}: {commands:?}");
    }
    assert!(!agents.iter().any(|a| a == "project-helper"), "{agents:?}");
    assert!(!skills.iter().any(|s| s == "project-skill"), "{skills:?}");
    let (commands, agents, skills) = init("project");
    assert!(commands.contains(&"testcmd".to_string()), "{commands:?}");
    assert!(!commands.iter().any(|c| c == "usercmd"), "{commands:?}");
    assert!(agents.iter().any(|a| a == "project-helper"), "{agents:?}");
    assert!(skills.iter().any(|s| s == "project-skill"), "{skills:?}");
}

#[test]
fn init_names_the_chosen_style_even_when_no_file_defines_it() {
    // The Python SDK's e2e test_setting_sources_default: a local settings
    // file chooses a style by a name no file defines; init reports that
    // name as Claude Code does, the prompt stays the default one and a
    // warning says so.
    let p = Project::new();
    p.write(
        ".claude/settings.local.json",
        "{\"outputStyle\": \"local-test-style\"}",
    );
    let server = FakeServer::start([anthropic::text_reply("4")]);
    let run = p.run(
        Some(&server),
        &["-p", "hi", "--output-format", "stream-json", "--verbose"],
    );
    let out = run.ok().json_lines();
    assert_eq!(out[0]["output_style"], "local-test-style");
    assert!(!server.request(0).system_text().contains("Output style"));
    assert!(
        run.stderr.contains("no style named `local-test-style`"),
        "{}",
        run.stderr
    );
}

/// `CLAUDE_CONFIG_DIR` names the user's Claude Code folder, as Claude Code
/// reads it (the SDKs point it at a temporary copy when they resume from a
/// session store): its settings, agents and memory are the user's, and
/// `~/.claude` is not read.
#[test]
fn claude_config_dir_is_the_users_claude_folder() {
    let mut p = Project::new();
    let config = tempfile::tempdir().unwrap();
    let write = |root: &std::path::Path, rel: &str, text: &str| {
        let f = root.join(rel);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, text).unwrap();
    };
    write(
        config.path(),
        "settings.json",
        r#"{"outputStyle": "Explanatory"}"#,
    );
    write(
        config.path(),
        "agents/from-config.md",
        "---\nname: from-config\ndescription: In the config folder\n---\nHi.\n",
    );
    write(config.path(), "CLAUDE.md", "memory-from-config-dir");
    write(
        p.home.path(),
        ".claude/agents/from-home.md",
        "---\nname: from-home\ndescription: In the home folder\n---\nHi.\n",
    );
    write(p.home.path(), ".claude/CLAUDE.md", "memory-from-home");
    p.env("CLAUDE_CONFIG_DIR", config.path().to_str().unwrap());
    let server = FakeServer::start([anthropic::text_reply("ok")]);
    let run = p.run(
        Some(&server),
        &["-p", "hi", "--output-format", "stream-json", "--verbose"],
    );
    let out = run.ok().json_lines();
    assert_eq!(out[0]["output_style"], "Explanatory", "{}", out[0]);
    let agents = out[0]["agents"].to_string();
    assert!(
        agents.contains("from-config") && !agents.contains("from-home"),
        "{agents}"
    );
    let body = server.request(0).json.to_string();
    assert!(body.contains("memory-from-config-dir"), "{body}");
    assert!(!body.contains("memory-from-home"), "{body}");
}
