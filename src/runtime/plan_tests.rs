//! The planner row by row: one snapshot built from files in a temporary
//! folder, a parent described as values, an Agent call → plan or refusal.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use super::*;
use crate::catalog::GENERAL_PURPOSE;
use crate::config::{CliOverrides, LoadInput};
use crate::snapshot::{self, SnapshotInput};

const PARENT_MODEL: &str = "claude-sonnet-4-5";

const REVIEWER: &str = "---\nname: reviewer\ndescription: Reviews code\ntools: Read, Grep\nmodel: opus\nmaxTurns: 7\n---\nREVIEWER-BODY\n";

struct Fixture {
    _dir: tempfile::TempDir,
    snap: Snapshot,
    available: Vec<String>,
}

/// A snapshot of a folder with `config` as its cadre.toml and `files`
/// (path, text) written into it.
fn fixture(config: &str, files: &[(&str, &str)]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let write = |p: &Path, text: &str| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(&dir.path().join("cadre.toml"), config);
    for (path, text) in files {
        write(&dir.path().join(path), text);
    }
    let input = SnapshotInput {
        load: LoadInput {
            cwd: dir.path().to_path_buf(),
            config: Some(dir.path().join("cadre.toml")),
            env: Vec::new(),
            cli: CliOverrides {
                trust: true,
                ..Default::default()
            },
        },
        cli_agents: None,
        home: Some(dir.path().join("home")),
    };
    let snap = snapshot::build(&input, 1).unwrap();
    let implemented = crate::tools::builtin_tools();
    let available = super::super::available_tools(&snap, implemented.iter().map(|t| t.name()));
    Fixture {
        _dir: dir,
        snap,
        available,
    }
}

impl Fixture {
    /// The main session of a non-interactive run, in `default` mode.
    fn parent(&self) -> SpawnParent<'_> {
        SpawnParent {
            agent_id: "main",
            session_id: "s1",
            kind: SessionKind::NON_INTERACTIVE,
            depth: 0,
            model: PARENT_MODEL,
            mode: PermissionMode::Default,
            def: None,
            cwd: Path::new("/w"),
            is_fork_child: false,
            env_model: None,
            available_tools: &self.available,
            turn: None,
        }
    }

    fn plan(&self, parent: &SpawnParent<'_>, input: serde_json::Value) -> SpawnPlan {
        self.try_plan(parent, input).unwrap()
    }

    fn try_teammate(
        &self,
        parent: &SpawnParent<'_>,
        input: serde_json::Value,
    ) -> Result<SpawnPlan, SpawnRefusal> {
        let input: AgentInput = serde_json::from_value(input).unwrap();
        plan_teammate(&self.snap, parent, &input, "t1".into())
    }

    fn try_plan(
        &self,
        parent: &SpawnParent<'_>,
        input: serde_json::Value,
    ) -> Result<SpawnPlan, SpawnRefusal> {
        let input: AgentInput = serde_json::from_value(input).unwrap();
        plan_spawn(&self.snap, parent, &input, "a1".into())
    }
}

fn call(ty: &str) -> serde_json::Value {
    json!({"description": "d", "prompt": "p", "subagent_type": ty})
}

fn prompt_only(text: &str) -> History {
    vec![Arc::new(Message::user(vec![ContentBlock::text(text)]))]
}

const FORK_ON: &str = "[features]\nFORK_SUBAGENT = true\n";

/// A parent turn: one user message, then the assistant's Agent call.
struct TurnParts {
    messages: History,
    assistant: Arc<Message>,
    frozen: Frozen,
}

fn turn_parts() -> TurnParts {
    TurnParts {
        messages: vec![Arc::new(Message::user_text("hello"))],
        assistant: Arc::new(Message::assistant(vec![ContentBlock::ToolUse {
            id: "toolu_1".into(),
            name: "Agent".into(),
            input: json!({"description": "d", "prompt": "p", "fork": true}),
        }])),
        frozen: Frozen {
            system: Arc::from("SYSTEM"),
            tools: Arc::from(Vec::new()),
            tool_names: Arc::from(vec!["Read".to_string(), "Agent".to_string()]),
            sampling: Default::default(),
            max_tokens: 1000,
        },
    }
}

impl TurnParts {
    fn turn(&self) -> ParentTurn<'_> {
        ParentTurn {
            messages: &self.messages,
            assistant: &self.assistant,
            frozen: self.frozen.clone(),
        }
    }
}

#[test]
fn a_named_agent_gets_its_definitions_model_tools_and_turns() {
    let f = fixture("", &[(".claude/agents/reviewer.md", REVIEWER)]);
    let plan = f.plan(&f.parent(), call("reviewer"));
    let path = plan.agent.path.clone();
    assert!(path.as_ref().is_some_and(|p| p.ends_with("reviewer.md")));
    assert_eq!(
        plan,
        SpawnPlan {
            agent_id: "a1".into(),
            parent_agent_id: "main".into(),
            parent_session_id: "s1".into(),
            description: "d".into(),
            name: None,
            fork: false,
            agent: AgentRef {
                name: "reviewer".into(),
                source: Source::Project,
                path,
            },
            core: SessionPlan {
                model: "claude-opus-4-5".into(),
                kind: SessionKind::NON_INTERACTIVE,
                mode: PermissionMode::Default,
                depth: 1,
                max_turns: 7,
                tools: vec!["Grep".into(), "Read".into()],
                effort: None,
            },
            model_source: ModelSource::Definition,
            cwd: "/w".into(),
            skills: Vec::new(),
            background: false,
            isolation: None,
            messages: prompt_only("p"),
            frozen: None,
            after_plan: None,
        }
    );
}

#[test]
fn no_type_is_general_purpose_and_types_match_in_any_case() {
    let f = fixture("", &[]);
    let p = f.parent();
    let plan = f.plan(&p, json!({"description": "d", "prompt": "p"}));
    assert_eq!(plan.agent.name, GENERAL_PURPOSE);
    assert_eq!(plan.agent.source, Source::Builtin);
    assert_eq!(plan.model_source, ModelSource::Inherit);
    assert!(
        !plan.core.tools.contains(&"Agent".to_string()),
        "no nesting"
    );
    assert!(plan.core.tools.contains(&"Write".to_string()));
    assert_eq!(
        plan.agent.name,
        f.plan(&p, call("General-Purpose")).agent.name
    );
    assert_eq!(f.plan(&p, call("explore")).agent.name, "Explore");
    assert_eq!(f.plan(&p, call(" ")).agent.name, GENERAL_PURPOSE);
}

#[test]
fn fork_follows_the_flag_and_is_refused_inside_a_fork() {
    let parts = turn_parts();
    let fork_call = json!({"description": "d", "prompt": "go", "fork": true});

    // Off (default gates, non-interactive): the flag is ignored.
    let f = fixture("", &[]);
    let mut p = f.parent();
    p.turn = Some(parts.turn());
    let plan = f.plan(&p, fork_call.clone());
    assert!(!plan.fork);
    assert_eq!(plan.agent.name, GENERAL_PURPOSE);

    // On: the parent's conversation, tools, model and request parts.
    let f = fixture(FORK_ON, &[]);
    let mut p = f.parent();
    p.kind = SessionKind::INTERACTIVE;
    p.mode = PermissionMode::AcceptEdits;
    p.turn = Some(parts.turn());
    let plan = f.plan(&p, fork_call.clone());
    assert!(plan.fork);
    assert_eq!(plan.agent.name, FORK_AGENT);
    assert_eq!(
        plan.core.mode,
        PermissionMode::Bubble,
        "forks ask their parent"
    );
    assert_eq!(plan.core.model, PARENT_MODEL);
    assert_eq!(plan.model_source, ModelSource::Inherit);
    assert_eq!(
        plan.core.tools,
        vec!["Read".to_string(), "Agent".to_string()]
    );
    assert_eq!(plan.frozen.as_ref(), Some(&parts.frozen));
    assert_eq!(plan.core.depth, 1);
    assert_eq!(plan.core.kind, SessionKind::INTERACTIVE);
    // The parent's messages, shared, then the two the fork adds.
    assert_eq!(plan.messages.len(), 3);
    assert!(Arc::ptr_eq(&plan.messages[0], &parts.messages[0]));
    // The call's model is ignored for forks.
    let mut with_model = fork_call.clone();
    with_model["model"] = json!("haiku");
    assert_eq!(f.plan(&p, with_model).core.model, PARENT_MODEL);

    // Inside a fork: refused; a named agent is still fine.
    p.is_fork_child = true;
    assert_eq!(f.try_plan(&p, fork_call), Err(SpawnRefusal::ForkInFork));
    assert_eq!(f.plan(&p, call("Plan")).agent.name, "Plan");
}

#[test]
fn unknown_and_not_allowed_types_are_refused_with_what_is_there() {
    let f = fixture("", &[(".claude/agents/reviewer.md", REVIEWER)]);
    let p = f.parent();
    assert_eq!(
        f.try_plan(&p, call("nope")),
        Err(SpawnRefusal::UnknownAgent {
            agent_type: "nope".into(),
            available: vec![
                "Explore".into(),
                GENERAL_PURPOSE.into(),
                "Plan".into(),
                "reviewer".into()
            ],
        })
    );
    // `fork` is not a type while forks are off.
    assert!(matches!(
        f.try_plan(&p, call("fork")),
        Err(SpawnRefusal::UnknownAgent { .. })
    ));

    // `Agent(Explore, reviewer)` in the caller's tools.
    let mut lead = AgentDef::new("lead", "leads", Source::Project);
    lead.tools = Some(vec!["Agent(Explore, reviewer)".into()]);
    let mut p = f.parent();
    p.def = Some(&lead);
    assert_eq!(
        f.try_plan(&p, call("Plan")),
        Err(SpawnRefusal::NotAllowed {
            agent_type: "Plan".into(),
            allowed: vec!["Explore".into(), "reviewer".into()],
        })
    );
    assert_eq!(f.plan(&p, call("REVIEWER")).agent.name, "reviewer");
    // No type: the first type it allows.
    let plan = f.plan(&p, json!({"description": "d", "prompt": "p"}));
    assert_eq!(plan.agent.name, "Explore");
}

#[test]
fn deny_rules_and_max_depth_refuse() {
    let f = fixture("[permissions]\ndeny = [\"Agent(Explore)\"]\n", &[]);
    let p = f.parent();
    match f.try_plan(&p, call("Explore")) {
        Err(SpawnRefusal::Denied {
            agent_type, rule, ..
        }) => {
            assert_eq!(agent_type, "Explore");
            assert_eq!(rule, "Agent(Explore)");
        }
        other => panic!("expected a denial, got {other:?}"),
    }
    assert!(f.try_plan(&p, call("Plan")).is_ok());

    let f = fixture("[agents]\nmax_depth = 2\n", &[]);
    let mut p = f.parent();
    p.depth = 1;
    assert_eq!(f.plan(&p, call("Plan")).core.depth, 2);
    p.depth = 2;
    assert_eq!(
        f.try_plan(&p, call("Plan")),
        Err(SpawnRefusal::MaxDepth {
            agent_type: "Plan".into(),
            max_depth: 2,
        })
    );
}

#[test]
fn model_sources_in_order() {
    let f = fixture("", &[(".claude/agents/reviewer.md", REVIEWER)]);
    let mut p = f.parent();
    let model = |p: &SpawnParent<'_>, input: serde_json::Value| {
        let plan = f.plan(p, input);
        (plan.core.model, plan.model_source)
    };
    assert_eq!(
        model(&p, call("reviewer")),
        ("claude-opus-4-5".into(), ModelSource::Definition)
    );
    let mut with_model = call("reviewer");
    with_model["model"] = json!("haiku");
    assert_eq!(
        model(&p, with_model.clone()),
        ("claude-haiku-4-5".into(), ModelSource::Call)
    );
    assert_eq!(
        model(&p, call("Plan")),
        (PARENT_MODEL.into(), ModelSource::Inherit)
    );
    p.env_model = Some("my-model");
    assert_eq!(model(&p, with_model), ("my-model".into(), ModelSource::Env));

    // A fork takes the override too, and nothing else.
    let f = fixture(FORK_ON, &[]);
    let mut p = f.parent();
    p.kind = SessionKind::INTERACTIVE;
    let fork = json!({"description": "d", "prompt": "p", "fork": true});
    assert_eq!(f.plan(&p, fork.clone()).model_source, ModelSource::Inherit);
    p.env_model = Some("haiku");
    let plan = f.plan(&p, fork);
    assert_eq!(
        (plan.core.model.as_str(), plan.model_source),
        ("claude-haiku-4-5", ModelSource::Env)
    );
}

#[test]
fn a_childs_mode_narrows_the_parents_and_never_widens_it() {
    let agent = |mode: &str| {
        format!("---\nname: m-{mode}\ndescription: x\npermissionMode: {mode}\n---\nbody\n")
    };
    let (bypass, plan_mode, edits) = (
        agent("bypassPermissions"),
        agent("plan"),
        agent("acceptEdits"),
    );
    let f = fixture(
        "",
        &[
            (".claude/agents/a.md", &bypass),
            (".claude/agents/b.md", &plan_mode),
            (".claude/agents/c.md", &edits),
        ],
    );
    let mut p = f.parent();
    let mode = |p: &SpawnParent<'_>, ty: &str| f.plan(p, call(ty)).core.mode;
    assert_eq!(mode(&p, "m-bypassPermissions"), PermissionMode::Default);
    assert_eq!(mode(&p, "m-acceptEdits"), PermissionMode::Default);
    assert_eq!(mode(&p, "m-plan"), PermissionMode::Plan);
    assert_eq!(mode(&p, "Explore"), PermissionMode::Default);
    p.mode = PermissionMode::AcceptEdits;
    assert_eq!(mode(&p, "m-bypassPermissions"), PermissionMode::AcceptEdits);
    assert_eq!(mode(&p, "m-plan"), PermissionMode::Plan);
    assert_eq!(mode(&p, "Explore"), PermissionMode::AcceptEdits);
    p.mode = PermissionMode::BypassPermissions;
    assert_eq!(mode(&p, "m-plan"), PermissionMode::BypassPermissions);
}

#[test]
fn background_comes_from_the_call_the_definition_or_coordinator_mode() {
    let bg = "---\nname: bg\ndescription: x\nbackground: true\n---\nbody\n";
    let f = fixture("", &[(".claude/agents/bg.md", bg)]);
    let mut p = f.parent();
    p.kind = SessionKind::INTERACTIVE;
    let plan = f.plan(&p, call("Plan"));
    assert!(!plan.background);
    assert!(
        plan.core.kind.interactive,
        "a foreground child keeps the kind"
    );
    let mut in_bg = call("Plan");
    in_bg["run_in_background"] = json!(true);
    let plan = f.plan(&p, in_bg);
    assert!(plan.background);
    assert!(
        !plan.core.kind.interactive,
        "nobody answers a background child"
    );
    assert!(f.plan(&p, call("bg")).background);

    // Disabled: nothing runs in the background.
    let f = fixture(
        "[features]\nDISABLE_BACKGROUND_TASKS = true\n",
        &[(".claude/agents/bg.md", bg)],
    );
    let p = f.parent();
    assert!(!f.plan(&p, call("bg")).background);
}

#[test]
fn coordinator_sessions_spawn_workers_in_the_background() {
    let f = fixture("", &[]);
    let coordinator = f.snap.catalog.get("coordinator").cloned().unwrap();
    let mut p = f.parent();
    p.kind = SessionKind {
        interactive: false,
        coordinator: true,
    };
    p.def = Some(&coordinator);
    let plan = f.plan(&p, json!({"description": "d", "prompt": "p"}));
    assert_eq!(plan.agent.name, "worker");
    assert!(plan.background);
    assert!(matches!(
        f.try_plan(&p, call("Explore")),
        Err(SpawnRefusal::NotAllowed { .. })
    ));
}

#[test]
fn isolation_from_the_call_or_the_definition() {
    let iso = "---\nname: iso\ndescription: x\nisolation: worktree\n---\nbody\n";
    let f = fixture("", &[(".claude/agents/iso.md", iso)]);
    let p = f.parent();
    assert_eq!(f.plan(&p, call("Plan")).isolation, None);
    let mut isolated = call("Plan");
    isolated["isolation"] = json!("worktree");
    assert_eq!(f.plan(&p, isolated).isolation, Some(Isolation::Worktree));
    assert_eq!(f.plan(&p, call("iso")).isolation, Some(Isolation::Worktree));
}

#[test]
fn effort_from_the_call_else_the_definition_trimmed_to_the_model() {
    let def = "---\nname: thinker\ndescription: x\neffort: high\n---\nbody\n";
    let f = fixture("", &[(".claude/agents/thinker.md", def)]);
    let p = f.parent();
    let plan = f.plan(&p, call("thinker"));
    assert_eq!(plan.core.effort.as_deref(), Some("high"));
    let mut low = call("thinker");
    low["effort"] = json!("low");
    assert_eq!(f.plan(&p, low).core.effort.as_deref(), Some("low"));
    assert_eq!(f.plan(&p, call("Plan")).core.effort, None);

    let levels: BTreeMap<String, Vec<String>> = [(
        "claude-sonnet".to_string(),
        vec!["low".to_string(), "medium".to_string()],
    )]
    .into_iter()
    .collect();
    let trimmed = plan.effort_for_model(&levels).unwrap();
    assert_eq!(trimmed.requested, "high");
    assert_eq!(trimmed.sent.as_deref(), Some("medium"));
}

#[test]
fn named_agents_start_with_memory_and_skills_but_one_shot_built_ins_do_not_get_memory() {
    let filler = "---\nname: filler\ndescription: Fills forms\nskills: pdf\n---\nYou fill forms.\n";
    let skill = "---\nname: pdf\ndescription: PDF forms\n---\nSKILL-BODY\n";
    let f = fixture(
        "",
        &[
            ("CLAUDE.md", "Use tabs.\n"),
            (".claude/agents/filler.md", filler),
            (".claude/skills/pdf/SKILL.md", skill),
        ],
    );
    let p = f.parent();
    let texts = |plan: &SpawnPlan| -> Vec<String> {
        let [first] = &plan.messages[..] else {
            panic!("one message: {:?}", plan.messages)
        };
        first
            .content
            .iter()
            .map(|b| match b {
                ContentBlock::Text { text } => text.clone(),
                other => panic!("a text block: {other:?}"),
            })
            .collect()
    };
    let gp = texts(&f.plan(&p, call(GENERAL_PURPOSE)));
    assert_eq!(gp.len(), 2, "memory, then the prompt: {gp:?}");
    assert!(gp[0].contains("Use tabs."));
    let filler = f.plan(&p, call("filler"));
    assert_eq!(filler.skills, vec!["pdf".to_string()]);
    let blocks = texts(&filler);
    assert_eq!(blocks.len(), 3, "memory, skills, prompt: {blocks:?}");
    assert!(blocks[1].contains("SKILL-BODY"), "{blocks:?}");
    assert_eq!(blocks[2], "p");
    assert_eq!(
        f.plan(&p, call("Explore")).messages,
        prompt_only("p"),
        "Explore gets no project memory"
    );
}

#[test]
fn a_mode_outside_a_team_is_refused() {
    let f = fixture("", &[]);
    let mut input = call("Plan");
    input["mode"] = json!("plan");
    assert_eq!(
        f.try_plan(&f.parent(), input),
        Err(SpawnRefusal::ModeNeedsTeammate)
    );
}

#[test]
fn a_plan_survives_serialisation_and_becomes_a_session() {
    let parts = turn_parts();
    let f = fixture(FORK_ON, &[(".claude/agents/reviewer.md", REVIEWER)]);
    let mut p = f.parent();
    p.kind = SessionKind::INTERACTIVE;
    p.turn = Some(parts.turn());
    let named = f.plan(&p, call("reviewer"));
    let fork = f.plan(
        &p,
        json!({"description": "d", "prompt": "go", "fork": true}),
    );
    for plan in [named, fork] {
        let text = serde_json::to_string(&plan).unwrap();
        let back: SpawnPlan = serde_json::from_str(&text).unwrap();
        assert_eq!(back, plan);

        let (spec, history) = back.session(&f.snap).unwrap();
        assert_eq!(
            spec.def.as_ref().map(|d| d.name.as_str()),
            Some(plan.agent.name.as_str())
        );
        assert_eq!(spec.agent_id, "a1");
        assert_eq!(spec.parent_agent_id.as_deref(), Some("main"));
        assert_eq!(spec.model, plan.core.model);
        assert_eq!(spec.mode, plan.core.mode);
        assert_eq!(spec.tool_names, plan.core.tools);
        assert_eq!(spec.started_by_fork, plan.fork);
        assert_eq!(spec.frozen, plan.frozen);
        assert_eq!(history, plan.messages);
    }
    // A snapshot without the definition cannot run it.
    let other = fixture("", &[]);
    let plan = f.plan(&p, call("reviewer"));
    assert!(matches!(
        plan.session(&other.snap),
        Err(SpawnRefusal::UnknownAgent { .. })
    ));
}

#[test]
fn refusals_read_as_the_templates_say() {
    let f = fixture("", &[]);
    let text = SpawnRefusal::MaxDepth {
        agent_type: "Plan".into(),
        max_depth: 2,
    }
    .text(&f.snap.templates);
    assert!(text.contains("Plan") && text.contains('2'), "{text}");
}

/// A teammate call: a named Agent call from a team's lead.
fn teammate_call(ty: &str) -> serde_json::Value {
    json!({"description": "d", "prompt": "p", "subagent_type": ty, "name": "alice"})
}

#[test]
fn a_teammate_is_refused_what_the_callers_agent_limit_and_deny_rules_refuse() {
    let f = fixture(
        "[permissions]\ndeny = [\"Agent(reviewer)\"]\n",
        &[(".claude/agents/reviewer.md", REVIEWER)],
    );
    let mut lead = AgentDef::new("lead", "leads", Source::Project);
    lead.tools = Some(vec!["Agent(Explore, reviewer)".into(), "Read".into()]);
    let mut p = f.parent();
    p.def = Some(&lead);
    assert_eq!(
        f.try_teammate(&p, teammate_call("Plan")),
        Err(SpawnRefusal::NotAllowed {
            agent_type: "Plan".into(),
            allowed: vec!["Explore".into(), "reviewer".into()],
        })
    );
    // The deny rule holds for the name the type resolves to.
    match f.try_teammate(&p, teammate_call("REVIEWER")) {
        Err(SpawnRefusal::Denied {
            agent_type, rule, ..
        }) => assert_eq!(
            (agent_type.as_str(), rule.as_str()),
            ("reviewer", "Agent(reviewer)")
        ),
        other => panic!("expected a denial, got {other:?}"),
    }
    // The same refusal a sub-agent spawn gets.
    assert_eq!(
        f.try_teammate(&p, teammate_call("reviewer")),
        f.try_plan(&p, call("reviewer"))
    );
    assert_eq!(
        f.try_teammate(&p, teammate_call("Explore"))
            .unwrap()
            .agent
            .name,
        "Explore"
    );
    // Without a limit, any visible type; an unknown one is refused.
    let p = f.parent();
    assert!(f.try_teammate(&p, teammate_call("Plan")).is_ok());
    assert!(matches!(
        f.try_teammate(&p, teammate_call("nope")),
        Err(SpawnRefusal::UnknownAgent { .. })
    ));
}

#[test]
fn a_teammate_gets_the_team_tools_a_narrowed_mode_and_plan_mode_on_request() {
    let agent = "---\nname: dev\ndescription: x\ntools: Read, Write\npermissionMode: bypassPermissions\nmodel: opus\n---\nbody\n";
    let f = fixture(
        "[features]\nAGENT_TEAMS = true\n",
        &[(".claude/agents/dev.md", agent)],
    );
    let mut p = f.parent();
    p.kind = SessionKind::INTERACTIVE;
    p.mode = PermissionMode::AcceptEdits;
    let plan = f.try_teammate(&p, teammate_call("dev")).unwrap();
    assert_eq!(
        plan.core.tools,
        [
            "Read",
            "SendMessage",
            "TaskCreate",
            "TaskGet",
            "TaskList",
            "TaskUpdate",
            "Write"
        ]
    );
    assert_eq!(
        plan.core.mode,
        PermissionMode::AcceptEdits,
        "never wider than the lead's"
    );
    assert_eq!(plan.after_plan, None);
    assert!(!plan.core.kind.interactive, "nobody answers a teammate");
    assert!(!plan.background);
    assert_eq!(plan.core.depth, 1);
    assert_eq!(plan.name.as_deref(), Some("alice"));
    assert_eq!(plan.core.model, "claude-opus-4-5");
    assert!(
        plan.messages.is_empty(),
        "the team writes its first message"
    );

    let mut in_plan = teammate_call("dev");
    in_plan["mode"] = json!("plan");
    let plan = f.try_teammate(&p, in_plan).unwrap();
    assert_eq!(plan.core.mode, PermissionMode::Plan);
    assert_eq!(plan.after_plan, Some(PermissionMode::AcceptEdits));
    let mut bad = teammate_call("dev");
    bad["mode"] = json!("bypassPermissions");
    assert_eq!(
        f.try_teammate(&p, bad),
        Err(SpawnRefusal::BadTeammateMode {
            mode: "bypassPermissions".into()
        })
    );
    // No type: general-purpose, as for a sub-agent.
    let plan = f
        .try_teammate(
            &p,
            json!({"description": "d", "prompt": "p", "name": "bob"}),
        )
        .unwrap();
    assert_eq!(plan.agent.name, GENERAL_PURPOSE);
}

#[test]
fn the_environments_model_override_reaches_sub_agents_and_teammates() {
    let f = fixture("", &[(".claude/agents/reviewer.md", REVIEWER)]);
    let mut p = f.parent();
    p.env_model = Some("haiku");
    let sub = f.plan(&p, call("reviewer"));
    let mate = f.try_teammate(&p, teammate_call("reviewer")).unwrap();
    for plan in [sub, mate] {
        assert_eq!(
            (plan.core.model.as_str(), plan.model_source),
            ("claude-haiku-4-5", ModelSource::Env)
        );
    }
}

/// A sub-agent's meta file as a resume reads it back.
fn recorded(ty: &str) -> Recorded {
    Recorded {
        agent_id: "a1".into(),
        parent_agent_id: "main".into(),
        agent_type: ty.into(),
        description: "d".into(),
        ..Recorded::default()
    }
}

#[test]
fn a_resumed_child_is_planned_again_and_its_files_only_narrow_the_plan() {
    let f = fixture("", &[(".claude/agents/reviewer.md", REVIEWER)]);
    let p = f.parent();
    let fresh = f.plan(&p, call("reviewer"));

    // Nothing recorded: what a new spawn would get.
    let plan = plan_resumed(&f.snap, &p, &recorded("reviewer")).unwrap();
    assert_eq!(
        (plan.core.mode, &plan.core.tools, plan.core.depth),
        (fresh.core.mode, &fresh.core.tools, 1)
    );
    assert!(plan.background);
    assert!(plan.messages.is_empty(), "the history is the transcript's");

    // A meta file edited to widen: bypassPermissions, more tools, depth 0.
    let mut wide = recorded("reviewer");
    wide.mode = Some(PermissionMode::BypassPermissions);
    wide.tools = Some(vec!["Bash".into(), "Write".into(), "Read".into()]);
    wide.depth = Some(0);
    wide.model = Some("claude-haiku-4-5".into());
    let plan = plan_resumed(&f.snap, &p, &wide).unwrap();
    assert_eq!(plan.core.mode, PermissionMode::Default);
    assert_eq!(plan.core.tools, ["Read"], "only tools the plan gives");
    assert_eq!(plan.core.depth, 1);
    assert_eq!(
        plan.core.model, "claude-haiku-4-5",
        "the model it ran on stays"
    );

    // A narrower record narrows.
    let mut narrow = recorded("reviewer");
    narrow.mode = Some(PermissionMode::Plan);
    narrow.tools = Some(vec!["Grep".into()]);
    let plan = plan_resumed(&f.snap, &p, &narrow).unwrap();
    assert_eq!(
        (plan.core.mode, plan.core.tools),
        (PermissionMode::Plan, vec!["Grep".into()])
    );

    // The parent's mode now bounds it, whatever the record says.
    let mut edits = f.parent();
    edits.mode = PermissionMode::AcceptEdits;
    let mut was_edits = recorded("reviewer");
    was_edits.mode = Some(PermissionMode::AcceptEdits);
    assert_eq!(
        plan_resumed(&f.snap, &edits, &was_edits).unwrap().core.mode,
        PermissionMode::AcceptEdits
    );
    assert_eq!(
        plan_resumed(&f.snap, &p, &was_edits).unwrap().core.mode,
        PermissionMode::Default
    );
}

#[test]
fn a_resumed_child_passes_the_spawn_checks_of_today() {
    let f = fixture(
        "[permissions]\ndeny = [\"Agent(reviewer)\"]\n",
        &[(".claude/agents/reviewer.md", REVIEWER)],
    );
    let p = f.parent();
    assert!(matches!(
        plan_resumed(&f.snap, &p, &recorded("reviewer")),
        Err(SpawnRefusal::Denied { .. })
    ));
    assert!(matches!(
        plan_resumed(&f.snap, &p, &recorded("gone")),
        Err(SpawnRefusal::UnknownAgent { .. })
    ));
    // The main agent's `Agent(A, B)` holds for its own children; a deeper
    // child is at least at depth 2.
    let mut lead = AgentDef::new("lead", "leads", Source::Project);
    lead.tools = Some(vec!["Agent(Explore)".into()]);
    let mut p = f.parent();
    p.def = Some(&lead);
    assert!(matches!(
        plan_resumed(&f.snap, &p, &recorded("Plan")),
        Err(SpawnRefusal::NotAllowed { .. })
    ));
    let mut nested = recorded("Plan");
    nested.parent_agent_id = "a0".into();
    nested.depth = Some(1);
    let plan = plan_resumed(&f.snap, &p, &nested).unwrap();
    assert_eq!((plan.core.depth, plan.parent_agent_id.as_str()), (2, "a0"));
}

#[test]
fn a_resumed_fork_keeps_bubble_and_its_request_parts_cut_to_the_tools_offered() {
    let parts = turn_parts();
    let f = fixture(FORK_ON, &[]);
    let p = f.parent();
    let mut fork = recorded(FORK_AGENT);
    fork.fork = true;
    fork.mode = Some(PermissionMode::BypassPermissions);
    fork.tools = Some(vec!["Read".into(), "Agent".into(), "Nope".into()]);
    let mut frozen = parts.frozen.clone();
    frozen.tool_names = Arc::from(vec!["Read".to_string(), "Nope".to_string()]);
    fork.frozen = Some(frozen);
    let plan = plan_resumed(&f.snap, &p, &fork).unwrap();
    assert!(plan.fork);
    assert_eq!(plan.core.mode, PermissionMode::Bubble);
    assert_eq!(plan.core.tools, ["Read", "Agent"]);
    let frozen = plan.frozen.unwrap();
    assert_eq!(&frozen.tool_names[..], ["Read".to_string()]);
    assert_eq!(frozen.system, parts.frozen.system, "its bytes are kept");
}

/// A plan written to the files a child leaves (its meta file and spawn
/// line, as JSON text) and read back.
fn through_files(plan: &SpawnPlan) -> Recorded {
    use crate::runtime::plan_record::{RecordedSpawn, SpawnLine, SubagentMeta};
    let path = Path::new("/s/subagents/agent-a1.meta.json");
    let meta =
        serde_json::to_string_pretty(&SubagentMeta::of(plan, "toolu_9", None, None)).unwrap();
    let line = serde_json::to_string(&SpawnLine::of(plan)).unwrap();
    let spawn: RecordedSpawn = serde_json::from_str(&line).unwrap();
    let read = SubagentMeta::parse(path, &meta).unwrap();
    assert_eq!(read.tool_use_id(), "toolu_9");
    read.recorded(path, spawn.frozen).unwrap()
}

#[test]
fn a_plan_written_to_its_meta_file_and_spawn_line_plans_back_equal() {
    // Named, in the background (a resume runs it there), with an effort.
    let f = fixture("", &[(".claude/agents/reviewer.md", REVIEWER)]);
    let p = f.parent();
    let mut input = call("reviewer");
    input["run_in_background"] = json!(true);
    input["name"] = json!("rev");
    input["effort"] = json!("high");
    let named = f.plan(&p, input);
    let back = plan_resumed(&f.snap, &p, &through_files(&named)).unwrap();
    assert_eq!(
        back,
        SpawnPlan {
            messages: Vec::new(),
            skills: Vec::new(),
            ..named.clone()
        }
    );
    // General-purpose in plan mode (the mode narrows, and is recorded).
    let mut planning = f.parent();
    planning.mode = PermissionMode::Plan;
    let mut input = call(GENERAL_PURPOSE);
    input["run_in_background"] = json!(true);
    let gp = f.plan(&planning, input);
    let back = plan_resumed(&f.snap, &planning, &through_files(&gp)).unwrap();
    assert_eq!(
        back,
        SpawnPlan {
            messages: Vec::new(),
            ..gp.clone()
        }
    );
    // A fork: its request parts come back from the spawn line.
    let parts = turn_parts();
    let f = fixture(FORK_ON, &[]);
    let mut p = f.parent();
    p.kind = SessionKind::INTERACTIVE;
    p.turn = Some(parts.turn());
    let fork = f.plan(
        &p,
        json!({"description": "d", "prompt": "go", "fork": true}),
    );
    assert!(fork.fork && fork.frozen.is_some());
    p.turn = None;
    let back = plan_resumed(&f.snap, &p, &through_files(&fork)).unwrap();
    assert_eq!(
        back,
        SpawnPlan {
            messages: Vec::new(),
            background: true,
            ..fork.clone()
        }
    );
}

#[test]
fn a_fleet_task_is_the_published_plan_read_back_on_a_worker() {
    use crate::fleet::wire::{PLAN_VERSION, TaskPlan};
    use crate::runtime::plan_record::SubagentMeta;
    let f = fixture("", &[(".claude/agents/reviewer.md", REVIEWER)]);
    let p = f.parent();
    let mut input = call("reviewer");
    input["run_in_background"] = json!(true);
    let plan = f.plan(&p, input);
    let mut meta = SubagentMeta::of(&plan, "toolu_1", None, Some("nats".into()));
    meta.worktree_base = Some("0123abcd".into());
    let published = TaskPlan {
        version: PLAN_VERSION,
        agent_id: plan.agent_id.clone(),
        parent_agent_id: plan.parent_agent_id.clone(),
        session_id: "s1".into(),
        pool: "default".into(),
        spawn: SpawnPlan {
            messages: Vec::new(),
            ..plan.clone()
        },
        run: 0,
        meta: meta.clone(),
        shared_folder: false,
    };
    let on_worker: TaskPlan =
        serde_json::from_str(&serde_json::to_string(&published).unwrap()).unwrap();
    assert_eq!(on_worker, published);
    // The session the worker runs is the one the parent planned.
    let (worker, history) = on_worker.spawn.session(&f.snap).unwrap();
    let (local, _) = plan.session(&f.snap).unwrap();
    assert_eq!(
        (
            &worker.model,
            worker.mode,
            &worker.tool_names,
            worker.depth,
            worker.max_turns,
            &worker.effort
        ),
        (
            &local.model,
            local.mode,
            &local.tool_names,
            local.depth,
            local.max_turns,
            &local.effort
        )
    );
    assert!(history.is_empty(), "its history is the transcript's");
    // What the worker writes into the meta file is the parent's record.
    assert_eq!(SubagentMeta::from_value(&on_worker.meta.to_value()), meta);
    // A plan an older parent published, its meta file as an object with
    // the status on top, still reads.
    let mut older = serde_json::to_value(&published).unwrap();
    older["meta"]["status"] = json!("running");
    older["meta"]["spawnDepth"] = json!(1);
    let older: TaskPlan = serde_json::from_value(older).unwrap();
    assert_eq!(older.meta.worktree_base.as_deref(), Some("0123abcd"));
}

mod main_session {
    use super::*;
    use crate::runtime::main_plan::{MainInput, MainRefusal, plan_main};
    use crate::runtime::resume::{SessionHeader, TRANSCRIPT_VERSION};

    const YOLO: &str = "---\nname: yolo\ndescription: x\ntools: Read, Write, Bash\npermissionMode: bypassPermissions\nmodel: opus\n---\nbody\n";

    fn header(agent: Option<&str>, tools: &[&str]) -> SessionHeader {
        SessionHeader {
            version: TRANSCRIPT_VERSION,
            session_id: "20260101T120000-0123abcd".into(),
            model: "claude-haiku-4-5".into(),
            agent: agent.map(str::to_string),
            mode: None,
            tool_names: tools.iter().map(|t| t.to_string()).collect(),
            sampling: Default::default(),
            max_tokens: 100,
            generation: 1,
            cwd: None,
            forked_from: None,
        }
    }

    #[test]
    fn an_agent_a_transcript_names_only_narrows_the_users_mode() {
        let f = fixture("", &[(".claude/agents/yolo.md", YOLO)]);
        let input = MainInput {
            available_tools: &f.available,
            ..MainInput::default()
        };
        let plain = plan_main(&f.snap, &input).unwrap();
        assert_eq!(
            (
                plain.agent.is_none(),
                plain.core.mode,
                plain.model_source.as_str()
            ),
            (true, PermissionMode::Default, "settings")
        );
        assert!(plain.core.tools.contains(&"Bash".to_string()));

        // Chosen on the command line: its mode and model.
        let chosen = MainInput {
            agent: Some("yolo"),
            ..input.clone()
        };
        let plan = plan_main(&f.snap, &chosen).unwrap();
        assert_eq!(plan.core.mode, PermissionMode::BypassPermissions);
        assert_eq!(
            (plan.core.model.as_str(), plan.model_source.as_str()),
            ("claude-opus-4-5", "agent")
        );
        assert_eq!(plan.core.tools, ["Bash", "Read", "Write"]);

        // Read back from a transcript: the agent, but not its mode.
        let shipped = header(Some("yolo"), &["Write", "Read", "Agent"]);
        let resumed = MainInput {
            resumed: Some(&shipped),
            ..input.clone()
        };
        let plan = plan_main(&f.snap, &resumed).unwrap();
        assert_eq!(plan.agent.as_deref(), Some("yolo"));
        // The plan is values: it reads back as it was written, and names
        // the definition the snapshot holds.
        let back: crate::runtime::main_plan::MainPlan =
            serde_json::from_value(serde_json::to_value(&plan).unwrap()).unwrap();
        assert_eq!(back, plan);
        assert!(std::sync::Arc::ptr_eq(
            &back.def(&f.snap).unwrap(),
            f.snap.catalog.get("yolo").unwrap()
        ));
        assert_eq!(plan.core.mode, PermissionMode::Default);
        assert_eq!(
            (plan.core.model.as_str(), plan.model_source.as_str()),
            ("claude-haiku-4-5", "transcript")
        );
        // The recorded pool, in its order, cut to the agent's.
        assert_eq!(plan.core.tools, ["Write", "Read"]);
        // `--agent` again is the user's choice.
        let again = MainInput {
            agent: Some("yolo"),
            ..resumed.clone()
        };
        assert_eq!(
            plan_main(&f.snap, &again).unwrap().core.mode,
            PermissionMode::BypassPermissions
        );
        // A narrower agent mode still narrows.
        let planner = "---\nname: planner\ndescription: x\npermissionMode: plan\n---\nbody\n";
        let f = fixture("", &[(".claude/agents/planner.md", planner)]);
        let h = header(Some("planner"), &[]);
        let input = MainInput {
            available_tools: &f.available,
            resumed: Some(&h),
            ..MainInput::default()
        };
        assert_eq!(
            plan_main(&f.snap, &input).unwrap().core.mode,
            PermissionMode::Plan
        );
    }

    #[test]
    fn flags_turns_client_tools_and_an_unknown_agent() {
        let f = fixture("", &[(".claude/agents/yolo.md", YOLO)]);
        let only = vec!["Read".to_string(), "Write".to_string()];
        let remove = vec!["Write".to_string()];
        let input = MainInput {
            agent: Some("yolo"),
            model: Some("sonnet"),
            mode_flag: true,
            max_turns: Some(3),
            available_tools: &f.available,
            only_tools: Some(&only),
            remove_tools: &remove,
            ..MainInput::default()
        };
        let plan = plan_main(&f.snap, &input).unwrap();
        assert_eq!(plan.model_source.as_str(), "flag");
        assert_eq!(
            plan.core.mode,
            PermissionMode::Default,
            "the flag's (settings') mode"
        );
        assert_eq!(plan.core.max_turns, 3);
        assert_eq!(plan.core.tools, ["Read"]);
        let spec = plan.session(&f.snap, "/w".into(), true, None);
        assert!(spec.is_main);
        assert_eq!(spec.tool_names, ["Read"]);

        let nope = MainInput {
            agent: Some("nope"),
            available_tools: &f.available,
            ..MainInput::default()
        };
        match plan_main(&f.snap, &nope) {
            Err(MainRefusal::UnknownAgent { name, available }) => {
                assert_eq!(name, "nope");
                assert!(available.contains(&"yolo".to_string()), "{available:?}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}
