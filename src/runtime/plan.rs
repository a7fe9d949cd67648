//! Deciding a spawn, with no effects: an Agent call, the caller's state and
//! one snapshot go in; a [`SpawnPlan`] (everything the child will be) or a
//! [`SpawnRefusal`] comes out.
//!
//! Planning reads no files, starts nothing and writes nothing: the caller
//! passes the parent's state as values (its kind, depth, model, mode, the
//! environment's model override, the tools the engine offers, and for a
//! fork its turn). Carrying out a plan — waiting for required MCP servers,
//! making a worktree, opening a transcript, registering the task, running
//! the loop — is `spawn.rs`'s work. A plan is plain data (serde both ways,
//! no credentials, no handles to live resources), so another process with
//! the same repository and its own snapshot can run the child from it
//! ([`SpawnPlan::session`]). `cadre agents show --effective` shows the plan
//! of a spawn of that agent.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::agent_tool::{
    AgentInput, ModelSource, ResolvedModel, Route, RouteError, default_type, fork_messages,
    resolve_fork_model, resolve_model, route, spawnable_types, tool_pool,
};
use crate::catalog::{AgentDef, FORK_AGENT, GENERAL_PURPOSE, Isolation, Source};
use crate::config::{PermissionMode, SessionKind};
use crate::message::{ContentBlock, History, Message};
use crate::snapshot::Snapshot;
use crate::templates::Templates;

use super::prompt;
use super::session::{Frozen, SessionSpec};
use super::team_texts::{BadTeammateMode, ModeNeedsTeammate};
use super::texts::{
    AgentTypeNotAllowed, DeniedAgent, ForkChild, ForkInFork, ForkPlaceholder, MaxDepth,
    ModelNotAllowed, SkillText, SubagentSkills, UnknownAgent,
};

/// Everything a sub-agent is before it runs: what [`plan_spawn`] decided.
///
/// The definition is referenced by name (and the source it came from, for
/// the record); a process that runs the plan looks it up in its own
/// snapshot. `messages` is the child's whole starting history (for a
/// named agent: memory, preloaded skills and the prompt; for a fork: the
/// parent's conversation plus the directive). A fork also carries the
/// parent's rendered request parts (`frozen`), so it sends the same bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnPlan {
    /// The child's id (its task id and transcript name).
    pub agent_id: String,
    pub parent_agent_id: String,
    /// The parent process's session id (the folder its transcripts go to).
    pub parent_session_id: String,
    /// The call's `description`.
    pub description: String,
    /// The call's `name` (addressable by SendMessage), if any.
    pub name: Option<String>,
    /// The fork route: the child continues the parent's conversation.
    pub fork: bool,
    /// The definition it runs as (`fork` for a fork).
    pub agent: AgentRef,
    /// What the child session is (model, kind, mode, depth, turn limit,
    /// tools, effort): for a sub-agent, the model with aliases resolved;
    /// the kind never interactive in the background; the mode the
    /// parent's narrowed by the definition's (SPEC §7), `bubble` for a
    /// fork; the depth the parent's + 1; the tools by name (a fork's are
    /// its parent's); the effort the call's, else the definition's, before
    /// trimming to the model ([`SpawnPlan::effort_for_model`]).
    #[serde(flatten)]
    pub core: SessionPlan,
    /// The layer that chose the model.
    pub model_source: ModelSource,
    /// The folder it runs in, before isolation (a worktree replaces it).
    pub cwd: PathBuf,
    /// Skills preloaded from the definition's `skills:`, by name.
    pub skills: Vec<String>,
    /// SPEC §9: runs as a background task.
    pub background: bool,
    /// Runs in its own git worktree (the call's `isolation` or the
    /// definition's).
    pub isolation: Option<Isolation>,
    /// The child's starting history.
    pub messages: History,
    /// A fork's inherited system prompt, tool definitions and request
    /// settings; `None` for named agents (they render their own).
    pub frozen: Option<Frozen>,
    /// A teammate started in plan mode: the mode it takes once the lead
    /// approves its plan ([`plan_teammate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_plan: Option<PermissionMode>,
}

/// What every session is, whoever starts it: the part of a plan that the
/// main session's ([`super::main_plan::MainPlan`]) and a spawn's
/// ([`SpawnPlan`]) share, serialisable, and the one source of a
/// [`SessionSpec`]'s model, kind, mode, depth, turn limit, tools and
/// effort ([`SessionPlan::spec`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionPlan {
    /// The model id, aliases resolved.
    pub model: String,
    /// For flag gates and schema trimming.
    pub kind: SessionKind,
    pub mode: PermissionMode,
    /// 0 for the main session, +1 per level of sub-agent.
    pub depth: u32,
    pub max_turns: u32,
    /// The tools it may call, by name, in the order they are offered.
    pub tools: Vec<String>,
    /// The reasoning effort asked for, before trimming to the model.
    pub effort: Option<String>,
}

impl SessionPlan {
    /// The session this describes, as `agent_id` (a child of
    /// `parent_agent_id`; the main session when that is `None`), running
    /// `def` in `cwd`. The rest of the spec is the caller's: a fork's
    /// request parts, whether it waits for background children, its team.
    pub fn spec(
        &self,
        agent_id: String,
        parent_agent_id: Option<String>,
        def: Option<Arc<AgentDef>>,
        cwd: PathBuf,
    ) -> SessionSpec {
        SessionSpec {
            agent_id,
            is_main: parent_agent_id.is_none(),
            parent_agent_id,
            def,
            model: self.model.clone(),
            kind: self.kind,
            mode: self.mode,
            depth: self.depth,
            frozen: None,
            started_by_fork: false,
            max_turns: self.max_turns,
            cwd,
            tool_names: self.tools.clone(),
            wait_for_background: true,
            effort: self.effort.clone(),
            team: None,
        }
    }
}

/// The tools of a team member besides its agent's own.
pub const TEAM_TOOLS: &[&str] = &[
    "SendMessage",
    "TaskCreate",
    "TaskGet",
    "TaskList",
    "TaskUpdate",
];

/// The Agent call's `mode` that starts a teammate in plan mode (the only
/// one a teammate may be given).
pub const TEAMMATE_PLAN_MODE: &str = "plan";

/// Which agent definition a plan runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRef {
    pub name: String,
    pub source: Source,
    /// The file it was read from (none for built-in and synthetic agents).
    pub path: Option<PathBuf>,
}

/// Why a spawn is refused. [`SpawnRefusal::text`] is the tool result the
/// caller's model reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "refusal", rename_all = "snake_case")]
pub enum SpawnRefusal {
    /// `mode` belongs to teammates (a named spawn in a team).
    ModeNeedsTeammate,
    /// A teammate's `mode` other than `plan`.
    BadTeammateMode { mode: String },
    /// A fork child asked for a fork.
    ForkInFork,
    /// No visible agent of that type.
    UnknownAgent {
        agent_type: String,
        available: Vec<String>,
    },
    /// The caller's `Agent(A, B)` does not list the type.
    NotAllowed {
        agent_type: String,
        allowed: Vec<String>,
    },
    /// A `permissions.deny` rule names the type.
    Denied {
        agent_type: String,
        rule: String,
        /// The settings layer the rule came from.
        source: String,
    },
    /// The child would pass `agents.max_depth`.
    MaxDepth { agent_type: String, max_depth: u32 },
    /// The child's model is refused by `deniedModels`/`availableModels`.
    ModelNotAllowed { agent_type: String, why: String },
}

impl SpawnRefusal {
    /// The refusal as the caller's model reads it (templates).
    pub fn text(&self, t: &Templates) -> String {
        match self {
            SpawnRefusal::ModeNeedsTeammate => t.show(&ModeNeedsTeammate {}),
            SpawnRefusal::BadTeammateMode { mode } => {
                t.show(&BadTeammateMode { mode: mode.clone() })
            }
            SpawnRefusal::ForkInFork => t.show(&ForkInFork {}),
            SpawnRefusal::UnknownAgent {
                agent_type,
                available,
            } => t.show(&UnknownAgent {
                agent_type: agent_type.clone(),
                available: available.join(", "),
            }),
            SpawnRefusal::NotAllowed {
                agent_type,
                allowed,
            } => t.show(&AgentTypeNotAllowed {
                agent_type: agent_type.clone(),
                allowed: allowed.join(", "),
            }),
            SpawnRefusal::Denied {
                agent_type,
                rule,
                source,
            } => t.show(&DeniedAgent {
                agent_type: agent_type.clone(),
                rule: rule.clone(),
                source: source.clone(),
            }),
            SpawnRefusal::MaxDepth {
                agent_type,
                max_depth,
            } => t.show(&MaxDepth {
                agent_type: agent_type.clone(),
                max_depth: *max_depth,
            }),
            SpawnRefusal::ModelNotAllowed { agent_type, why } => t.show(&ModelNotAllowed {
                agent_type: agent_type.clone(),
                why: why.clone(),
            }),
        }
    }
}

/// The state of the caller that a spawn depends on, as values.
#[derive(Debug, Clone)]
pub struct SpawnParent<'a> {
    pub agent_id: &'a str,
    pub session_id: &'a str,
    pub kind: SessionKind,
    pub depth: u32,
    /// Its model id (children inherit it).
    pub model: &'a str,
    pub mode: PermissionMode,
    /// The definition it runs as (its `Agent(A, B)` limits what it spawns).
    pub def: Option<&'a AgentDef>,
    pub cwd: &'a Path,
    /// Started by the fork route, or its history carries a fork directive.
    pub is_fork_child: bool,
    /// `CADRE_SUBAGENT_MODEL` (else `CLAUDE_CODE_SUBAGENT_MODEL`) of its
    /// environment.
    pub env_model: Option<&'a str>,
    /// The tools the engine offers now, by name.
    pub available_tools: &'a [String],
    /// The turn that made the call; `None` outside a session (the CLI).
    pub turn: Option<ParentTurn<'a>>,
}

/// What a fork takes from its parent's turn.
#[derive(Debug, Clone)]
pub struct ParentTurn<'a> {
    /// The turn's request messages.
    pub messages: &'a History,
    /// The assistant message holding the Agent call.
    pub assistant: &'a Arc<Message>,
    /// The turn's rendered request parts (its `tool_names` are the
    /// parent's tools).
    pub frozen: Frozen,
}

/// What a sub-agent's files (its meta file and its transcript's `spawn`
/// line) say it was, read back to resume it. None of it is trusted:
/// [`super::plan::plan_resumed`] plans the child again and lets these values only
/// narrow the plan.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    pub agent_id: String,
    pub parent_agent_id: String,
    pub agent_type: String,
    pub description: String,
    pub name: Option<String>,
    /// Started by the fork route.
    pub fork: bool,
    pub model: Option<String>,
    pub effort: Option<String>,
    pub mode: Option<PermissionMode>,
    pub tools: Option<Vec<String>>,
    pub depth: Option<u32>,
    /// A fork's inherited request parts.
    pub frozen: Option<Frozen>,
}

/// Plans the spawn `input` asks `parent` for, as `agent_id`.
///
/// Checks in order: `mode` outside a team, the route (a fork inside a
/// fork), the type (the caller's default when none is given; a type in
/// another case names the one agent it matches), `Agent(A, B)`, deny
/// rules, `agents.max_depth`. Forks skip the last four.
pub fn plan_spawn(
    snap: &Snapshot,
    parent: &SpawnParent<'_>,
    input: &AgentInput,
    agent_id: String,
) -> Result<SpawnPlan, SpawnRefusal> {
    if input.mode.is_some() {
        return Err(SpawnRefusal::ModeNeedsTeammate);
    }
    let kind = parent.kind;
    let routed = route(input, snap.fork_effective(kind), parent.is_fork_child)
        .map_err(|RouteError::ForkInFork| SpawnRefusal::ForkInFork)?;
    let mut plan = match routed {
        Route::Fork => plan_fork(snap, parent, input, agent_id)?,
        Route::Named(agent_type) => plan_named(snap, parent, input, agent_type, agent_id)?.0,
    };
    // SPEC §9: the call's flag, the definition's `background`, or
    // coordinator mode, unless background tasks are disabled. Nothing else
    // (in particular not FORK_SUBAGENT) forces it.
    plan.background =
        (input.run_in_background == Some(true) || plan.background || kind.coordinator)
            && snap.background_enabled(kind);
    if plan.background && !plan.fork {
        plan.core.kind.interactive = false;
    }
    if input.isolation.as_deref() == Some("worktree") {
        plan.isolation = Some(Isolation::Worktree);
    }
    Ok(plan)
}

/// Plans the teammate a team's lead (`parent`) starts with a named Agent
/// call, as `agent_id`.
///
/// A teammate is a named agent: the same checks as [`plan_spawn`]'s named
/// route (the caller's default type, a type in another case, the caller's
/// `Agent(A, B)`, deny rules on the resolved name, `agents.max_depth`) and
/// the same model, mode and tool pool, plus [`TEAM_TOOLS`]. It never runs
/// in the background or in a worktree, nobody answers its questions, and
/// the call's `mode` may only be `plan`: it then starts in plan mode, and
/// `after_plan` is the mode it takes once the lead approves. Its first
/// message is the team's introduction, which the team writes: `messages`
/// and `skills` are empty.
pub fn plan_teammate(
    snap: &Snapshot,
    parent: &SpawnParent<'_>,
    input: &AgentInput,
    agent_id: String,
) -> Result<SpawnPlan, SpawnRefusal> {
    let plan_mode = match input.mode.as_deref() {
        None => false,
        Some(TEAMMATE_PLAN_MODE) => true,
        Some(other) => {
            return Err(SpawnRefusal::BadTeammateMode { mode: other.into() });
        }
    };
    let agent_type = input
        .subagent_type
        .clone()
        .unwrap_or_else(|| GENERAL_PURPOSE.to_string());
    let (mut plan, def) = plan_named(snap, parent, input, agent_type, agent_id)?;
    let not_disallowed = |n: &String| {
        !def.disallowed_tools
            .iter()
            .any(|s| crate::catalog::base_name(s) == n.as_str())
    };
    plan.core.tools = parent
        .available_tools
        .iter()
        .filter(|n| plan.core.tools.contains(n) || TEAM_TOOLS.contains(&n.as_str()))
        .filter(|n| not_disallowed(n))
        .cloned()
        .collect();
    plan.core.kind.interactive = false;
    plan.background = false;
    plan.isolation = None;
    plan.messages = Vec::new();
    plan.skills = Vec::new();
    if plan_mode {
        plan.after_plan = Some(plan.core.mode);
        plan.core.mode = PermissionMode::Plan;
    }
    Ok(plan)
}

/// Plans again, for a resume, the sub-agent `rec` describes, as a child of
/// `parent` (the main session as it is now: its mode from the user's
/// current settings, its definition, the tools the engine offers).
///
/// A named child goes through the same checks as a new spawn (its type
/// still visible, the main session's `Agent(A, B)` for its direct
/// children, deny rules, `agents.max_depth`); a fork gets `bubble` and at
/// most the tools offered now. What was recorded may only narrow the
/// result: the mode is the planned one narrowed by the recorded one
/// ([`crate::permissions::child_mode`]), the tools are the recorded ones
/// that the plan also gives (in the recorded order, so the requests keep
/// their bytes), and a depth lower than the recorded parent allows is not
/// believed. The recorded model, effort and a fork's request parts are
/// kept: they are what the child's requests were sent with, not rights.
/// `messages` is empty: the history is the transcript's.
pub fn plan_resumed(
    snap: &Snapshot,
    parent: &SpawnParent<'_>,
    rec: &Recorded,
) -> Result<SpawnPlan, SpawnRefusal> {
    let direct = rec.parent_agent_id == parent.agent_id;
    // A direct child is at depth 1; a deeper one at least 2.
    let depth = if direct {
        parent.depth + 1
    } else {
        rec.depth.unwrap_or(0).max(parent.depth + 2)
    };
    let parent = SpawnParent {
        agent_id: &rec.parent_agent_id,
        depth: depth - 1,
        // The limits of a deeper child's own parent are not known here.
        def: parent.def.filter(|_| direct),
        turn: None,
        ..parent.clone()
    };
    let input = AgentInput {
        description: rec.description.clone(),
        subagent_type: Some(rec.agent_type.clone()),
        name: rec.name.clone(),
        ..AgentInput::default()
    };
    let id = rec.agent_id.clone();
    let mut plan = if rec.fork {
        plan_fork(snap, &parent, &input, id)?
    } else {
        plan_named(snap, &parent, &input, rec.agent_type.clone(), id)?.0
    };
    plan.core.mode = crate::permissions::child_mode(plan.core.mode, rec.mode);
    if let Some(tools) = &rec.tools {
        plan.core.tools = tools
            .iter()
            .filter(|n| plan.core.tools.contains(n))
            .cloned()
            .collect();
    }
    plan.frozen = rec.frozen.clone().filter(|_| rec.fork).map(|mut f| {
        f.tool_names = f
            .tool_names
            .iter()
            .filter(|n| plan.core.tools.contains(n))
            .cloned()
            .collect();
        f
    });
    if let Some(model) = &rec.model {
        plan.core.model.clone_from(model);
    }
    plan.core.effort.clone_from(&rec.effort);
    plan.background = true;
    plan.messages = Vec::new();
    plan.skills = Vec::new();
    Ok(plan)
}

/// The fields every plan takes from its definition and parent; the route's
/// own (model, mode, tools, messages) are filled in by the caller.
fn base_plan(
    snap: &Snapshot,
    parent: &SpawnParent<'_>,
    input: &AgentInput,
    def: &AgentDef,
    agent_id: String,
    model: ResolvedModel,
) -> SpawnPlan {
    SpawnPlan {
        agent_id,
        parent_agent_id: parent.agent_id.to_string(),
        parent_session_id: parent.session_id.to_string(),
        description: input.description.clone(),
        name: input.name.clone(),
        fork: false,
        agent: AgentRef {
            name: def.name.clone(),
            source: def.source,
            path: def.path.clone(),
        },
        core: SessionPlan {
            model: model.model,
            kind: parent.kind,
            mode: parent.mode,
            depth: parent.depth + 1,
            max_turns: def
                .max_turns
                .unwrap_or(snap.settings().agents.default_max_turns),
            tools: Vec::new(),
            effort: None,
        },
        model_source: model.source,
        cwd: parent.cwd.to_path_buf(),
        skills: Vec::new(),
        background: false,
        isolation: def.isolation,
        messages: Vec::new(),
        frozen: None,
        after_plan: None,
    }
}

/// A fork: the parent's model (or the environment's override), turn and
/// tools, in `bubble` mode.
fn plan_fork(
    snap: &Snapshot,
    parent: &SpawnParent<'_>,
    input: &AgentInput,
    agent_id: String,
) -> Result<SpawnPlan, SpawnRefusal> {
    let def = snap
        .catalog
        .get(FORK_AGENT)
        .ok_or_else(|| SpawnRefusal::UnknownAgent {
            agent_type: FORK_AGENT.to_string(),
            available: visible_names(snap, parent.kind),
        })?;
    let model = resolve_fork_model(parent.env_model, parent.model, &snap.settings().models);
    let mut plan = base_plan(snap, parent, input, def, agent_id, model);
    plan.fork = true;
    plan.core.mode = PermissionMode::Bubble;
    match &parent.turn {
        Some(turn) => {
            let t = &snap.templates;
            let directive = t.show(&ForkChild {
                directive: input.prompt.clone(),
            });
            let placeholder = t.show(&ForkPlaceholder {});
            plan.messages =
                fork_messages(turn.messages, turn.assistant, &placeholder, directive, None);
            plan.core.tools = turn.frozen.tool_names.to_vec();
            plan.frozen = Some(turn.frozen.clone());
        }
        // Outside a session (the CLI): the tools a main session is offered.
        None => plan.core.tools = parent.available_tools.to_vec(),
    }
    Ok(plan)
}

/// A named agent: checked against the caller's limits, with its own
/// model, tools, mode and first message. Returns the definition with the
/// plan.
fn plan_named(
    snap: &Snapshot,
    parent: &SpawnParent<'_>,
    input: &AgentInput,
    agent_type: String,
    agent_id: String,
) -> Result<(SpawnPlan, Arc<AgentDef>), SpawnRefusal> {
    let settings = snap.settings();
    let def = named_def(snap, parent, input, agent_type)?;
    let depth = parent.depth + 1;
    if depth > settings.agents.max_depth {
        return Err(SpawnRefusal::MaxDepth {
            agent_type: def.name.clone(),
            max_depth: settings.agents.max_depth,
        });
    }
    let model = resolve_model(
        parent.env_model,
        input.model.as_deref(),
        def.model.as_deref(),
        parent.model,
        &settings.models,
    );
    if let Some(why) = settings.model_refusal(&model.model) {
        return Err(SpawnRefusal::ModelNotAllowed {
            agent_type: def.name.clone(),
            why,
        });
    }
    let mut plan = base_plan(snap, parent, input, &def, agent_id, model);
    let interactive_only = |n: &str| snap.tools.get(n).is_some_and(|s| s.interactive_only);
    plan.core.tools = tool_pool(
        parent.available_tools,
        interactive_only,
        &def,
        depth,
        settings.agents.max_depth,
    );
    // Plugin agents' `permissionMode` is ignored (SPEC §7).
    let def_mode = def.permission_mode.filter(|_| def.source != Source::Plugin);
    plan.core.mode = crate::permissions::child_mode(parent.mode, def_mode);
    plan.messages = named_messages(snap, &def, &input.prompt);
    plan.core.effort = input.effort.clone().or_else(|| def_effort(&def));
    plan.skills = def.skills.clone();
    plan.background = def.background;
    Ok((plan, def))
}

/// A definition's `effort` as a level name (integers are not levels).
pub(crate) fn def_effort(def: &AgentDef) -> Option<String> {
    def.effort
        .as_ref()
        .and_then(crate::catalog::EffortSetting::level)
        .map(str::to_string)
}

/// The names of the agents `kind` may spawn by type.
fn visible_names(snap: &Snapshot, kind: SessionKind) -> Vec<String> {
    snap.visible_agents(kind)
        .iter()
        .map(|d| d.name.clone())
        .collect()
}

/// The definition a named route resolves to, or why it may not be spawned.
fn named_def(
    snap: &Snapshot,
    parent: &SpawnParent<'_>,
    input: &AgentInput,
    agent_type: String,
) -> Result<Arc<AgentDef>, SpawnRefusal> {
    let kind = parent.kind;
    let spawnable = parent.def.and_then(spawnable_types);
    let listed = snap.visible_agents(kind);
    // No type given: the caller's default (general-purpose, or the first
    // type its `Agent(…)` allows).
    let agent_type = if input
        .subagent_type
        .as_deref()
        .is_none_or(|t| t.trim().is_empty())
    {
        default_type(
            listed
                .iter()
                .map(|d| d.name.as_str())
                .filter(|n| spawnable.as_ref().is_none_or(|s| s.iter().any(|t| t == n))),
        )
        .map_or(agent_type, str::to_string)
    } else {
        agent_type
    };
    // A type written in another case ("General-purpose") is the one agent
    // it names when exactly one does; rules apply to the resolved name.
    let found = snap.visible_agent(&agent_type, kind).cloned().or_else(|| {
        let mut same = listed
            .iter()
            .filter(|d| d.name.eq_ignore_ascii_case(agent_type.trim()));
        match (same.next(), same.next()) {
            (Some(d), None) => Some(Arc::clone(d)),
            _ => None,
        }
    });
    let Some(def) = found else {
        return Err(SpawnRefusal::UnknownAgent {
            agent_type,
            available: visible_names(snap, kind),
        });
    };
    if let Some(allowed) = spawnable
        && !allowed.iter().any(|t| *t == def.name)
    {
        return Err(SpawnRefusal::NotAllowed {
            agent_type: def.name.clone(),
            allowed,
        });
    }
    if let Some(rule) = snap.rules.denied_agent_type(&def.name) {
        let source = snap
            .config
            .origins
            .of_item("permissions.deny", rule)
            .map_or_else(|| "settings".to_string(), ToString::to_string);
        return Err(SpawnRefusal::Denied {
            agent_type: def.name.clone(),
            rule: rule.to_string(),
            source,
        });
    }
    Ok(def)
}

/// A named agent's first message: project memory (unless it is a one-shot
/// built-in), its preloaded skills, then the prompt.
fn named_messages(snap: &Snapshot, def: &AgentDef, prompt_text: &str) -> History {
    let mut blocks = Vec::new();
    if prompt::gets_memory(Some(def))
        && let Some(memory) = prompt::memory_block(snap)
    {
        blocks.push(ContentBlock::text(memory));
    }
    let skills: Vec<SkillText> = def
        .skills
        .iter()
        .filter_map(|n| snap.skills.get(n))
        .map(|s| SkillText {
            name: s.name.clone(),
            dir: s.dir.display().to_string(),
            body: s.body.clone(),
        })
        .collect();
    if !skills.is_empty() {
        blocks.push(ContentBlock::text(
            snap.templates.show(&SubagentSkills { skills }),
        ));
    }
    blocks.push(ContentBlock::text(prompt_text.to_string()));
    vec![Arc::new(Message::user(blocks))]
}

impl SpawnPlan {
    /// The effort asked for, trimmed to the child's model (`sent` is what
    /// its requests carry); `None` when none was asked for.
    pub fn effort_for_model(
        &self,
        levels: &std::collections::BTreeMap<String, Vec<String>>,
    ) -> Option<crate::agent_tool::Effort> {
        self.core
            .effort
            .as_deref()
            .map(|e| crate::agent_tool::trim_effort(e, &self.core.model, levels))
    }

    /// The session the plan describes, against `snap` (this process's, or
    /// a worker's own): the definition is looked up there by name. Returns
    /// the spec and the starting history; a definition that `snap` does not
    /// have is refused as unknown.
    pub fn session(&self, snap: &Snapshot) -> Result<(SessionSpec, History), SpawnRefusal> {
        let def = snap.catalog.get(&self.agent.name).cloned().ok_or_else(|| {
            SpawnRefusal::UnknownAgent {
                agent_type: self.agent.name.clone(),
                available: visible_names(snap, self.core.kind),
            }
        })?;
        let mut spec = self.core.spec(
            self.agent_id.clone(),
            Some(self.parent_agent_id.clone()),
            Some(def),
            self.cwd.clone(),
        );
        spec.frozen.clone_from(&self.frozen);
        spec.started_by_fork = self.fork;
        Ok((spec, self.messages.clone()))
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
