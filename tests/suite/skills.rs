//! Skills through the real binary: SKILL.md folders from the project and
//! the user's home, listed in the Skill tool's description, loaded on call
//! with their base folder, preloaded into a sub-agent by `skills:`, denied
//! by `Skill(name)` rules, and shown by `cadre skills list|show`.

use serde_json::json;

use super::harness::{Project, last_tool_results, result_text};
use super::headless::Driven;
use super::kit::{FakeServer, anthropic};

const PDF: &str = "---\nname: pdf\ndescription: Fill in PDF forms\nallowed-tools: Read, Bash(python:*)\n---\n# Filling forms\nRun scripts/fill.py.\n";

fn project() -> Project {
    let p = Project::new();
    p.write(".claude/skills/pdf/SKILL.md", PDF);
    let user = p.home.path().join(".claude/skills/notes");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("SKILL.md"),
        "---\ndescription: Take notes\n---\nWrite notes.\n",
    )
    .unwrap();
    p
}

#[test]
fn skills_are_listed_loaded_and_preloaded() {
    let p = project();
    p.write(
        ".claude/agents/filler.md",
        "---\nname: filler\ndescription: Fills forms\nskills: pdf\ntools: Read\n---\nYou fill forms.\n",
    );
    let server = FakeServer::start([
        anthropic::tool_use_reply("m1", "Skill", json!({"skill": "pdf", "args": "form.pdf"})),
        anthropic::tool_use_reply(
            "m2",
            "Agent",
            json!({"description": "fill", "prompt": "fill form.pdf", "subagent_type": "filler"}),
        ),
        anthropic::text_reply("filled"),
        anthropic::tool_use_reply("m3", "Skill", json!({"skill": "nope"})),
        anthropic::text_reply("done"),
    ]);
    p.run(Some(&server), &["run", "fill the form"]).ok();

    let first = &server.request(0).json;
    let listing = super::harness::listings(first);
    assert!(
        listing.contains("- notes: Take notes\n") && listing.contains("- pdf: Fill in PDF forms"),
        "{listing}"
    );

    let loaded = result_text(&last_tool_results(&server.request(1).json)[0]);
    let dir = p.path().join(".claude/skills/pdf");
    assert!(
        loaded.contains(&format!("Base directory for this skill: {}", dir.display())),
        "{loaded}"
    );
    assert!(
        loaded.contains("# Filling forms\nRun scripts/fill.py."),
        "{loaded}"
    );
    assert!(loaded.contains("ARGUMENTS: form.pdf"), "{loaded}");

    // The sub-agent starts with the skill before its task.
    let child = &server.request(2).json;
    let blocks = child["messages"][0]["content"].as_array().unwrap();
    let texts: Vec<&str> = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
    let skill_at = texts
        .iter()
        .position(|t| t.contains("<skill name=\"pdf\">"))
        .expect("preloaded");
    let task_at = texts.iter().position(|t| *t == "fill form.pdf").unwrap();
    assert!(skill_at < task_at, "{texts:?}");
    assert!(texts[skill_at].contains("Run scripts/fill.py."));

    let unknown = &last_tool_results(&server.request(4).json)[0];
    assert_eq!(unknown["is_error"], true);
    assert!(
        result_text(unknown).contains("no skill named `nope`. The skills are: notes, pdf"),
        "{}",
        result_text(unknown)
    );
}

#[test]
fn a_skill_rule_denies_loading_it() {
    let mut p = project();
    p.config("[permissions]\ndeny = [\"Skill(pdf)\"]\n");
    let server = FakeServer::start([
        anthropic::tool_use_reply("m1", "Skill", json!({"skill": "pdf"})),
        anthropic::tool_use_reply("m2", "Skill", json!({"skill": "notes"})),
        anthropic::text_reply("ok"),
    ]);
    p.run(Some(&server), &["run", "go"]).ok();
    let denied = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(denied["is_error"], true);
    assert!(
        result_text(denied).contains("deny rule 'Skill(pdf)'"),
        "{}",
        result_text(denied)
    );
    let ok = &last_tool_results(&server.request(2).json)[0];
    assert!(ok.get("is_error").is_none(), "{ok}");
}

#[test]
fn skills_list_and_show_and_diagnostics_with_positions() {
    let p = project();
    p.write(
        ".claude/skills/broken/SKILL.md",
        "---\nname: broken\ndescription: \"x\n---\n",
    );
    p.write(
        ".claude/skills/odd/SKILL.md",
        "---\ndescription: d\nfoo: 1\n---\nbody\n",
    );
    let v = p.run(None, &["skills", "list", "--json"]).ok().json();
    let names: Vec<&str> = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["notes", "odd", "pdf"]);
    assert_eq!(v["skills"][0]["source"], "user");
    assert_eq!(v["skills"][2]["source"], "project");
    assert_eq!(
        v["skills"][2]["allowed_tools"],
        json!(["Read", "Bash(python:*)"])
    );
    let diags: Vec<String> = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{}:{}:{}",
                d["path"]
                    .as_str()
                    .unwrap()
                    .rsplit(".claude/")
                    .next()
                    .unwrap(),
                d["line"],
                d["column"]
            )
        })
        .collect();
    assert_eq!(
        diags,
        ["skills/broken/SKILL.md:4:1", "skills/odd/SKILL.md:3:1"]
    );

    let show = p.run(None, &["skills", "show", "pdf"]).ok().stdout.clone();
    assert!(
        show.contains("allowed-tools: Read, Bash(python:*)") && show.contains("# Filling forms"),
        "{show}"
    );
    let none = p.run(None, &["skills", "show", "zzz"]);
    assert_eq!(none.code, 2);
    assert!(
        none.stderr
            .contains("no skill or command named `zzz`. Skills and commands: notes, odd, pdf"),
        "{}",
        none.stderr
    );
    // `agents validate` reports skill files too.
    let run = p.run(None, &["agents", "validate"]);
    assert!(
        run.stdout
            .contains("skills/odd/SKILL.md:3:1: warning: unknown key `foo`"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_loaded_skills_allowed_tools_and_model_are_honoured_until_the_next_prompt() {
    let p = project();
    p.write(
        ".claude/skills/fast/SKILL.md",
        "---\nname: fast\ndescription: Quick checks\nmodel: haiku\nallowed-tools: Bash(echo:*)\n---\nBe quick.\n",
    );
    let server = FakeServer::start([
        // Before any skill: Bash asks, which a session without a prompt
        // tool denies.
        anthropic::tool_use_reply("b0", "Bash", json!({"command": "echo before"})),
        anthropic::tool_use_reply("s1", "Skill", json!({"skill": "fast"})),
        // With the skill: `echo` runs without asking; `ls` still asks.
        anthropic::message()
            .tool_use("b1", "Bash", json!({"command": "echo with-skill"}))
            .tool_use("b2", "Bash", json!({"command": "ls"}))
            .reply(),
        anthropic::text_reply("done"),
        // The next prompt: the skill no longer applies.
        anthropic::tool_use_reply("b3", "Bash", json!({"command": "echo after"})),
        anthropic::text_reply("done again"),
    ]);
    // One session, two prompts, as an SDK sends them.
    let mut d = Driven::start(&p, &server, &[]);
    d.user("check");
    let first = d.until("first result", |v| v["type"] == "result");
    assert_eq!(first["result"], "done", "{first}");
    d.user("check again");
    let second = d.until("second result", |v| v["type"] == "result");
    assert_eq!(second["result"], "done again", "{second}");
    assert_eq!(d.finish(), 0);
    let denied = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(denied["is_error"], true, "{denied}");
    assert_eq!(server.request(1).json["model"], "claude-sonnet-4-5");
    // The request after loading the skill uses its model.
    assert_eq!(server.request(2).json["model"], "claude-haiku-4-5");
    let results = last_tool_results(&server.request(3).json);
    assert!(results[0].get("is_error").is_none(), "{}", results[0]);
    assert_eq!(result_text(&results[0]).trim(), "with-skill");
    assert_eq!(results[1]["is_error"], true, "{}", results[1]);
    // The next prompt's requests use the session's model again, and its
    // `echo` asks (and is denied) as before the skill.
    assert_eq!(server.request(4).json["model"], "claude-sonnet-4-5");
    assert_eq!(server.request(5).json["model"], "claude-sonnet-4-5");
    let after = &last_tool_results(&server.request(5).json)[0];
    assert_eq!(after["is_error"], true, "{after}");
    assert!(
        result_text(after).contains("Permission to use Bash was denied"),
        "{after}"
    );
}

#[test]
fn a_plugins_skills_are_named_after_the_plugin() {
    let mut p = project();
    p.write(
        "plugins/reviewer/.claude-plugin/plugin.json",
        r#"{"name": "review-kit"}"#,
    );
    p.write(
        "plugins/reviewer/agents/critic.md",
        "---\nname: critic\ndescription: Critiques\n---\nCritique.\n",
    );
    p.write(
        "plugins/reviewer/skills/style/SKILL.md",
        "---\ndescription: House style\n---\nUse the house style.\n",
    );
    p.config("[agents]\nplugin_dirs = [\"plugins/reviewer/agents\"]\n");
    let run = p.run(None, &["skills", "list", "--json"]);
    run.ok();
    let v = run.json();
    let names: Vec<&str> = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert!(names.contains(&"review-kit:style"), "{v}");
    let style = v["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "review-kit:style")
        .unwrap();
    assert_eq!(style["source"], "plugin");
}

/// A skill that asks for Bash without a question.
fn deploy_skill(p: &Project, allowed: &str) {
    p.write(
        ".claude/skills/deploy/SKILL.md",
        &format!("---\ndescription: Deploys\nallowed-tools: {allowed}\n---\nDeploy.\n"),
    );
}

/// The model loads `deploy`, then runs `touch made.marker`; returns the
/// run and whether the Bash call was refused.
fn skill_then_touch(p: &Project, args: &[&str]) -> (super::harness::Run, bool) {
    let server = FakeServer::start([
        anthropic::tool_use_reply("s1", "Skill", json!({"skill": "deploy"})),
        anthropic::tool_use_reply("b1", "Bash", json!({"command": "touch made.marker"})),
        anthropic::text_reply("done"),
    ]);
    let mut all = args.to_vec();
    all.extend(["run", "deploy it"]);
    let run = p.run(Some(&server), &all);
    let result = &last_tool_results(&server.request(2).json)[0];
    let refused = result["is_error"] == true;
    assert_eq!(
        refused,
        !p.path().join("made.marker").exists(),
        "{result}: {}",
        run.stderr
    );
    let _ = std::fs::remove_file(p.path().join("made.marker"));
    (run, refused)
}

#[test]
fn an_untrusted_projects_skill_grants_no_tools() {
    let p = Project::untrusted();
    deploy_skill(&p, "Bash");
    let (run, refused) = skill_then_touch(&p, &[]);
    assert!(refused, "the skill's allowed-tools were honoured untrusted");
    let skill = p.path().join(".claude/skills/deploy/SKILL.md");
    assert!(
        run.stderr.contains(&format!(
            "skill `deploy`: allowed-tools ({})",
            skill.display()
        )) && run.stderr.contains("Trust the folder with `cadre trust"),
        "{}",
        run.stderr
    );
    let show = p.run(None, &["config", "show"]);
    assert!(
        show.stdout.contains("#   skill `deploy`: allowed-tools"),
        "{}",
        show.stdout
    );
    // Trusted for one run, or by the trust record: Bash runs unasked.
    let (_, refused) = skill_then_touch(&p, &["--trust"]);
    assert!(!refused);
    super::harness::trust_folder(p.home.path(), p.path());
    let (run, refused) = skill_then_touch(&p, &[]);
    assert!(!refused);
    assert!(!run.stderr.contains("allowed-tools"), "{}", run.stderr);
}

#[test]
fn an_untrusted_project_agent_preloading_a_skill_gets_no_tools_from_it() {
    let p = Project::untrusted();
    deploy_skill(&p, "Bash(touch:*)");
    p.write(
        ".claude/agents/deployer.md",
        "---\nname: deployer\ndescription: Deploys\nskills: deploy\ntools: Bash\n---\nDEPLOYER-BODY\n",
    );
    let route = || {
        FakeServer::route(|r| {
            let turns = super::harness::assistant_turns(r);
            if r.system_text().contains("DEPLOYER-BODY") && turns == 0 {
                return anthropic::tool_use_reply(
                    "b1",
                    "Bash",
                    json!({"command": "touch child.marker"}),
                );
            }
            if super::harness::is_main_session(r) && turns == 0 {
                return anthropic::tool_use_reply(
                    "a1",
                    "Agent",
                    json!({"description": "d", "prompt": "deploy", "subagent_type": "deployer"}),
                );
            }
            anthropic::text_reply("done")
        })
    };
    let child_result = |server: &FakeServer| {
        let r = server
            .requests()
            .into_iter()
            .find(|r| {
                r.system_text().contains("DEPLOYER-BODY") && super::harness::assistant_turns(r) == 1
            })
            .expect("the child's second request");
        last_tool_results(&r.json)[0].clone()
    };
    let server = route();
    let run = p.run(Some(&server), &["run", "go"]);
    assert!(!p.path().join("child.marker").exists(), "{}", run.stderr);
    assert_eq!(child_result(&server)["is_error"], true);
    assert!(
        run.stderr.contains("skill `deploy`: allowed-tools"),
        "{}",
        run.stderr
    );
    let server = route();
    p.run(Some(&server), &["--trust", "run", "go"]);
    assert!(p.path().join("child.marker").exists());
    assert!(child_result(&server).get("is_error").is_none());
}

#[test]
fn a_trusted_skill_grants_no_more_than_the_rules_allow() {
    // A deny rule still wins over the skill's allowed-tools.
    let mut p = project();
    deploy_skill(&p, "Bash");
    p.config("[permissions]\ndeny = [\"Bash(touch:*)\"]\n");
    let (_, refused) = skill_then_touch(&p, &[]);
    assert!(refused);
    // `Bash(*)` is every Bash command, as in a permission rule.
    let p = project();
    deploy_skill(&p, "Bash(*)");
    let (run, refused) = skill_then_touch(&p, &[]);
    assert!(!refused, "{}", run.stderr);
    // An entry that is no rule is reported with the skill's file.
    deploy_skill(&p, "Bash(touch:*), Read(");
    let run = p.run(None, &["skills", "list"]);
    assert!(
        run.stderr
            .contains("deploy/SKILL.md: error: allowed-tools: permission rule 'Read('"),
        "{}",
        run.stderr
    );
}

#[test]
fn claude_code_and_agent_skills_frontmatter_is_accepted_quietly_and_when_to_use_is_listed() {
    let p = Project::new();
    p.write(
        ".claude/skills/review/SKILL.md",
        "---\nname: review\ndescription: Review a change\nwhen_to_use: When the user asks for a review of a diff.\nargument-hint: \"[file]\"\nuser-invocable: true\neffort: high\npaths: [\"src/**\"]\ndisallowed-tools: Write\ncompatibility: Claude Code 2.1\nlicense: MIT\nmetadata:\n  owner: team\ncontext: fork\nagent: Explore\n---\nReview it.\n",
    );
    p.write(
        ".claude/skills/release/SKILL.md",
        "---\ndescription: Cut a release\ndisable-model-invocation: true\n---\nRelease.\n",
    );
    let server = FakeServer::start([
        anthropic::tool_use_reply("m1", "Skill", json!({"skill": "release"})),
        anthropic::text_reply("done"),
    ]);
    let out = p.run(Some(&server), &["run", "go"]);
    out.ok();
    assert!(!out.stderr.contains("unknown key"), "{}", out.stderr);
    let listing = super::harness::listings(&server.request(0).json);
    assert!(
        listing.contains("- review: Review a change When the user asks for a review of a diff.\n"),
        "{listing}"
    );
    // The user's to run: not listed, and the Skill tool does not load it.
    assert!(!listing.contains("release"), "{listing}");
    let r = &last_tool_results(&server.request(1).json)[0];
    assert_eq!(r["is_error"], true, "{r}");
    assert!(!result_text(r).contains("Release."), "{r}");
    let v = p.run(None, &["config", "validate"]);
    assert!(!v.stdout.contains("unknown key"), "{}", v.stdout);
}
