//! One agent's conversation and its query loop.
//!
//! Each turn loads the current snapshot once, builds the request (system
//! prompt and tool definitions rendered for this session, or a fork's
//! inherited bytes), streams the response, runs the tool calls and appends
//! exactly one tool_result per tool_use. The loop ends when the model stops
//! calling tools or the session reaches its turn limit.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use crate::catalog::AgentDef;
use crate::config::{PermissionMode, SessionKind};
use crate::message::{
    ContentBlock, History, Message, ModelRequest, Role, Sampling, StopReason, ToolDefinition, Usage,
};
use crate::provider::{ProviderError, StreamEvent};
use crate::snapshot::Snapshot;
use crate::templates::RenderError;
use crate::tools::spec::{DescriptionContext, TrimContext, render_definitions};

use super::listing::Listing;
use super::prompt::{PromptContext, main_system_prompt, subagent_system_prompt};
use super::structured::{STRUCTURED_OUTPUT, StructuredSpec, StructuredState, TurnVerdict};
use super::texts::{
    LimitRunWait, LimitSessionTokens, LimitTaskTokens, MaxTokensRecovery, StructuredOutputEnforce,
    StructuredOutputTool, ToolCancelled, TurnInterrupted,
};
use super::transcript::Transcript;
use super::{Engine, EngineEvent};

/// A fork's inherited request parts: never re-rendered. Kept in the fork's
/// transcript (its `spawn` line), so a resumed fork sends the same bytes.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Frozen {
    pub system: Arc<str>,
    pub tools: Arc<[ToolDefinition]>,
    pub tool_names: Arc<[String]>,
    pub sampling: Sampling,
    pub max_tokens: u32,
}

/// Everything that defines a session before it runs.
#[derive(Debug, Clone)]
pub struct SessionSpec {
    pub agent_id: String,
    pub parent_agent_id: Option<String>,
    /// The agent it runs as; `None` for the default main agent.
    pub def: Option<Arc<AgentDef>>,
    /// True for the process's main session.
    pub is_main: bool,
    pub model: String,
    pub kind: SessionKind,
    pub mode: PermissionMode,
    /// 0 for the main session, +1 per level of sub-agent.
    pub depth: u32,
    /// Set for fork children: the parent's request parts.
    pub frozen: Option<Frozen>,
    /// The session was started by the fork route.
    pub started_by_fork: bool,
    pub max_turns: u32,
    pub cwd: std::path::PathBuf,
    /// The tools this session may call (ignored for forks, which inherit).
    pub tool_names: Vec<String>,
    /// When the model ends its turn while background children still run,
    /// wait for their notifications and continue (`run`, and every
    /// sub-agent); `chat` leaves them for the next prompt.
    pub wait_for_background: bool,
    /// The reasoning effort asked for (the Agent call's, else the
    /// definition's), before trimming to the model; forks inherit their
    /// parent's request settings instead.
    pub effort: Option<String>,
    /// The team this session is a member of (the lead, or a teammate) when
    /// it starts; TeamCreate and TeamDelete change the lead's afterwards
    /// (see `Session::seat`).
    pub team: Option<TeamSeat>,
}

/// A session's place in an agent team.
#[derive(Debug, Clone)]
pub struct TeamSeat {
    pub store: crate::teams::TeamStore,
    /// Its name in the team (`team-lead` for the lead).
    pub member: String,
    /// The lead's team has a team file (`.claude/teams/NAME.yaml`): its
    /// members, as the snapshot of each lead turn has them, are started (a
    /// member added there joins then).
    pub from_file: bool,
    /// A teammate started in plan mode: the permission mode it gets once
    /// the lead approves its plan (a `plan_approval_response` with
    /// `approve: true`).
    pub after_plan: Option<crate::config::PermissionMode>,
}

impl TeamSeat {
    pub fn is_lead(&self) -> bool {
        self.member == crate::teams::LEAD
    }
}

/// Counters of a session so far.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub usage: Usage,
    pub last_usage: Usage,
    pub tool_uses: u32,
}

/// Why a session stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopKind {
    EndTurn,
    MaxTurns,
    /// The last answer was cut at `max_tokens`, and so were the
    /// continuations asked for (`provider.max_tokens_recoveries`).
    MaxTokens,
    /// The repeated-call guard (`agents.repeated_call_limit`) held back a
    /// call a second time after the agent had been told to answer: the
    /// session ends with the best partial answer it has.
    RepeatedCalls,
}

impl StopKind {
    /// The name used in results and transcripts.
    pub fn as_str(self) -> &'static str {
        match self {
            StopKind::EndTurn => "end_turn",
            StopKind::MaxTurns => "max_turns",
            StopKind::MaxTokens => "max_tokens",
            StopKind::RepeatedCalls => "repeated_calls",
        }
    }
}

/// What a finished session reports.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Text blocks of the last assistant message that has text.
    pub final_text: Option<Vec<String>>,
    pub stop: StopKind,
    pub turns: u32,
    /// Own usage plus every child's.
    pub usage: Usage,
    /// The last response's usage (for the input side of `total_tokens`).
    pub last_usage: Usage,
    pub tool_uses: u32,
    pub duration_ms: u64,
    /// `--json-schema`: the StructuredOutput call's input that fit.
    pub structured_output: Option<serde_json::Value>,
    /// `--json-schema`: why the run ended without structured output (too
    /// many calls that did not fit).
    pub structured_failure: Option<String>,
}

/// A session failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Provider(#[from] ProviderError),
    #[error("{0}")]
    Template(#[from] RenderError),
    #[error("cancelled")]
    Cancelled,
    /// A limit of the session stopped it (the text names the limit).
    #[error("{0}")]
    Limit(String),
}

/// Request parts rendered for one snapshot generation, reused while the
/// snapshot does not change.
struct Rendered {
    generation: u64,
    /// The MCP manager's version the tools were rendered for.
    mcp_version: u64,
    system: Arc<str>,
    tools: Arc<[ToolDefinition]>,
    tool_names: Arc<[String]>,
    /// The agent types and skills this session may use now.
    listing: Arc<Listing>,
}

pub struct Session {
    pub(super) engine: Arc<Engine>,
    pub(super) spec: SessionSpec,
    pub(super) history: History,
    pub(super) transcript: Arc<Transcript>,
    pub(super) cancel: CancellationToken,
    rendered: Option<Rendered>,
    /// The listing the conversation has been told of (see
    /// [`super::listing`]); empty at the start and after a compaction.
    pub(super) announced: Arc<Listing>,
    /// Instruction files delivered on demand so far (see
    /// [`super::instructions`]), in order.
    pub(super) delivered: Vec<super::instructions::Delivered>,
    pub(super) usage: Usage,
    pub(super) last_usage: Usage,
    pub(super) tool_uses: u32,
    /// Turns counted against `max_turns`.
    turns: u32,
    /// Turns that only answered task notifications (not counted).
    wake_ups: u32,
    /// Turns of this run whose calls the repeated-call guard held back.
    guard_fires: u32,
    started: Instant,
    /// This session's TodoWrite list.
    pub(super) todos: std::sync::Mutex<Vec<super::todos::Todo>>,
    /// The task this session runs as (sub-agents): told of progress.
    pub(super) task: Option<Arc<super::tasks::Task>>,
    /// A teammate read a `shutdown_request`: it stops after this turn.
    pub(super) shutdown: std::sync::atomic::AtomicBool,
    /// The team this session is in now (`spec.team` at the start; the
    /// lead's TeamCreate and TeamDelete change it).
    pub(super) team: std::sync::Mutex<Option<TeamSeat>>,
    /// A teammate in plan mode read the lead's approval: it leaves plan
    /// mode before its next request.
    pub(super) plan_approved: std::sync::atomic::AtomicBool,
    /// The agent's memory (`memory:`), read at the first rendering and
    /// kept, so later writes to it do not change this session's prompt.
    agent_memory: Option<Option<crate::catalog::agent_memory::AgentMemory>>,
    /// Skills loaded since the last user prompt (and a sub-agent's
    /// preloaded ones): their `allowed-tools` need no asking, and the last
    /// one's `model` answers.
    pub(super) active_skills: std::sync::Mutex<Vec<super::todos::ActiveSkill>>,
    /// The rules those skills' `allowed-tools` make, with the snapshot
    /// generation and the lists they were parsed from (see `skill_rules`).
    pub(super) skill_rules: std::sync::Mutex<SkillRules>,
    /// `--json-schema`: the schema the answer must fit (the main session
    /// is offered the StructuredOutput tool).
    pub(super) structured: Option<StructuredSpec>,
    /// How this prompt's StructuredOutput calls went.
    structured_state: StructuredState,
    /// The thinking budget set for this session (an SDK client's
    /// `set_max_thinking_tokens`), over `provider.thinking_budget`.
    thinking_budget: Option<u32>,
    /// A hook answered `continue: false`, with this reason: the run ends
    /// before its next request.
    pub(super) halted: std::sync::Mutex<Option<String>>,
    /// The snapshot of this session's last turn: a newer one (a live
    /// reload) fires ConfigChange.
    seen_snap: Option<Arc<Snapshot>>,
    /// The snapshot generation whose broken team file the lead reported
    /// last (each is reported once, not at every turn).
    pub(super) team_file_reported: std::sync::atomic::AtomicU64,
    /// The files `agents.first_search` read for this prompt (the answer
    /// check counts them as read).
    pub(super) pre_read: Vec<String>,
    /// Where a `cd` in a Bash call left the shell, when that is not the
    /// session's folder (`spec.cwd`): the next Bash call starts there.
    pub(super) shell_dir: std::sync::Mutex<Option<std::path::PathBuf>>,
    /// The last assistant message a MessageDisplay hook rewrote for the
    /// user, and the text shown instead (the history keeps the original).
    displayed: Option<(Arc<Message>, String)>,
    /// The front end fires MessageDisplay as it prints the stream
    /// ([`Session::stream_display`]): not again for a finished message.
    pub(super) display_streamed: bool,
}

/// Parsed skill rules: (snapshot generation, the allowed-tools lists, the
/// rules).
pub(super) type SkillRules = Option<(u64, Vec<String>, Arc<crate::permissions::Rules>)>;

/// One turn's fixed inputs, shared by the tool calls it makes.
pub(super) struct Turn {
    pub snap: Arc<Snapshot>,
    pub request: ModelRequest,
    pub assistant: Arc<Message>,
    pub tool_names: Arc<[String]>,
}

impl Session {
    pub fn new(
        engine: Arc<Engine>,
        spec: SessionSpec,
        history: History,
        transcript: Arc<Transcript>,
        cancel: CancellationToken,
    ) -> Self {
        let team = std::sync::Mutex::new(spec.team.clone());
        Session {
            engine,
            spec,
            team,
            plan_approved: Default::default(),
            history,
            transcript,
            cancel,
            rendered: None,
            announced: Arc::default(),
            delivered: Default::default(),
            usage: Usage::default(),
            last_usage: Usage::default(),
            tool_uses: 0,
            turns: 0,
            wake_ups: 0,
            guard_fires: 0,
            structured: None,
            structured_state: StructuredState::default(),
            thinking_budget: None,
            started: Instant::now(),
            todos: Default::default(),
            task: None,
            shutdown: Default::default(),
            agent_memory: None,
            active_skills: Default::default(),
            skill_rules: Default::default(),
            halted: Default::default(),
            shell_dir: Default::default(),
            displayed: None,
            display_streamed: false,
            seen_snap: None,
            team_file_reported: Default::default(),
            pre_read: Vec::new(),
        }
    }

    /// The listing a resumed conversation was last told of (its
    /// transcript's last `listing` line), so it is not announced again.
    pub fn set_announced(&mut self, listing: Listing) {
        self.announced = Arc::new(listing);
    }

    /// The instruction files a resumed conversation already holds (its
    /// transcript's `instructions` lines since the last compaction).
    pub fn set_delivered(
        &mut self,
        files: impl IntoIterator<Item = super::instructions::Delivered>,
    ) {
        self.delivered.extend(files);
    }

    /// Rules with `paths` and nested memory of the files this turn's tool
    /// calls touched (see [`super::instructions`]), recorded in the
    /// transcript; none for the sessions that get no memory.
    fn instructions_after_tools(
        &mut self,
        turn: &Turn,
        results: &[ContentBlock],
    ) -> Vec<ContentBlock> {
        if !super::prompt::gets_memory(self.spec.def.as_deref()) {
            return Vec::new();
        }
        let (blocks, new) = super::instructions::after_tools(
            &turn.snap,
            &self.spec.cwd,
            &mut self.delivered,
            &self.history,
            &turn.assistant,
            results,
        );
        if !new.is_empty() {
            self.transcript
                .record("instructions", serde_json::json!({ "delivered": new }));
        }
        blocks
    }

    /// Makes the session report its progress to `task` (for the stall limit).
    pub fn set_task(&mut self, task: Arc<super::tasks::Task>) {
        self.task = Some(task);
    }

    /// The permission mode from the next tool call on: `trigger` says
    /// what changed it (`sdk`: a client's `set_permission_mode`;
    /// `plan_approval`: a teammate's plan was approved).
    pub fn set_mode(&mut self, mode: crate::config::PermissionMode, trigger: &'static str) {
        if mode != self.spec.mode {
            self.engine.emit(EngineEvent::ModeChanged {
                agent_id: self.spec.agent_id.clone(),
                from: self.spec.mode.as_str(),
                to: mode.as_str(),
                trigger,
            });
        }
        self.spec.mode = mode;
        if self.spec.is_main {
            *self
                .engine
                .main_mode
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = mode;
        }
    }

    /// The model from the next request on (an SDK client's `set_model`).
    pub fn set_model(&mut self, model: String) {
        self.spec.model = model;
    }

    /// Replaces the cancellation token (an interactive session gets a fresh
    /// one per prompt, so Ctrl-C cancels that prompt only).
    pub fn set_cancel(&mut self, cancel: CancellationToken) {
        self.cancel = cancel;
    }

    pub fn spec(&self) -> &SessionSpec {
        &self.spec
    }

    pub fn history(&self) -> &History {
        &self.history
    }

    pub fn transcript(&self) -> &Arc<Transcript> {
        &self.transcript
    }

    pub fn stats(&self) -> Stats {
        Stats {
            usage: self.usage,
            last_usage: self.last_usage,
            tool_uses: self.tool_uses,
        }
    }

    /// Appends a user message (the prompt, or a follow-up in `chat`), with
    /// any notifications that arrived since the last turn placed before it.
    /// When the history already ends with a user message no answer followed
    /// (the "cancelled" results of a cut turn), the blocks join it, so
    /// roles keep alternating.
    pub fn push_user(&mut self, message: Message) {
        // A skill loaded for the last prompt ends with it.
        if let Ok(mut skills) = self.active_skills.lock() {
            skills.clear();
        }
        if self.spec.is_main {
            // The prompt is the last text block (project memory and an
            // agent's initial prompt come before it).
            let text = message
                .content
                .iter()
                .rev()
                .find_map(ContentBlock::as_text)
                .unwrap_or_default();
            let prompt_id = self
                .engine
                .prompt_id()
                .unwrap_or_else(|| self.engine.new_prompt_id());
            self.engine.emit(EngineEvent::UserPrompt {
                agent_id: self.spec.agent_id.clone(),
                text: text.to_string(),
                prompt_id,
            });
        }
        let mut content = self.take_incoming();
        content.extend(message.content);
        self.join_last_user_message(content);
    }

    /// [`Session::push_user`], then marks `skill` active for the prompt
    /// (a `/name` the user typed: its `allowed-tools` and `model` apply).
    pub fn push_user_with(&mut self, message: Message, skill: Option<super::todos::ActiveSkill>) {
        self.push_user(message);
        if let Some(s) = skill {
            self.activate_skills(vec![s]);
        }
    }

    /// Notifications of finished background children and SendMessage texts
    /// addressed to this session, as text blocks, in arrival order.
    pub(super) fn take_incoming(&self) -> Vec<ContentBlock> {
        let tasks = &self.engine.tasks;
        let id = &self.spec.agent_id;
        let mut blocks: Vec<ContentBlock> = tasks
            .take_notifications(id)
            .into_iter()
            .map(ContentBlock::text)
            .collect();
        blocks.extend(tasks.take_inbox(id).into_iter().map(ContentBlock::text));
        blocks.extend(self.team_incoming());
        blocks
    }

    /// Adds blocks (a teammate's mail, hook feedback) as the next user
    /// message, joined to a trailing one.
    pub(super) fn push_blocks(&mut self, blocks: Vec<ContentBlock>) {
        if !blocks.is_empty() {
            self.join_last_user_message(blocks);
        }
    }

    pub(super) fn append(&mut self, message: Arc<Message>) {
        self.append_marked(message, &[], None);
    }

    /// [`Session::append`] for a user message the engine adds itself (a
    /// reminder), reported as synthetic.
    pub(super) fn append_synthetic(&mut self, message: Arc<Message>) {
        self.append_as(message, &[], None, true);
    }

    /// [`Session::append`], marking tool calls converted from text; what is
    /// printed of an assistant message is `shown`'s text instead of its
    /// own, when a MessageDisplay hook rewrote it.
    fn append_marked(
        &mut self,
        message: Arc<Message>,
        converted: &[String],
        shown: Option<String>,
    ) {
        self.append_as(message, converted, shown, false);
    }

    fn append_as(
        &mut self,
        message: Arc<Message>,
        converted: &[String],
        shown: Option<String>,
        synthetic: bool,
    ) {
        if message.role == Role::Assistant && !self.spec.is_main {
            let texts: Vec<String> = message
                .content
                .iter()
                .filter_map(ContentBlock::as_text)
                .map(str::to_string)
                .collect();
            if texts.iter().any(|t| !t.trim().is_empty())
                && let Some(task) = self.engine.tasks.get(&self.spec.agent_id)
            {
                task.state().latest_text = Some(texts);
            }
        }
        if let Some(t) = &self.task {
            t.touch();
        }
        let uuid = self.transcript.assistant_message(&message, converted);
        let printed = match &shown {
            Some(text) => Arc::new(displayed_as(&message, text)),
            None => Arc::clone(&message),
        };
        self.engine.emit(EngineEvent::Message {
            agent_id: self.spec.agent_id.clone(),
            message: printed,
            uuid,
            synthetic,
        });
        if let Some(text) = shown {
            self.displayed = Some((Arc::clone(&message), text));
        }
        self.history.push(message);
    }

    /// After a cancelled turn: answers every tool_use of a trailing
    /// assistant message with an error result, so the history stays valid.
    pub fn repair_after_cancel(&mut self) {
        let text = self
            .engine
            .snapshot
            .load()
            .templates
            .show(&ToolCancelled {});
        let Some(last) = self.history.last() else {
            return;
        };
        if last.role == Role::User {
            // Cancelled before any reply: an assistant turn says so, so
            // the next prompt does not follow a user message directly.
            let note = self
                .engine
                .snapshot
                .load()
                .templates
                .show(&TurnInterrupted {});
            self.append(Arc::new(Message {
                role: Role::Assistant,
                content: vec![ContentBlock::text(note.trim_end())],
            }));
            return;
        }
        let results: Vec<ContentBlock> = last
            .tool_uses()
            .map(|(id, _, _)| ContentBlock::tool_result(id, text.clone(), true))
            .collect();
        if !results.is_empty() {
            self.append(Arc::new(Message::user(results)));
        }
    }

    /// Builds the request the next turn would send, without sending it.
    pub fn next_request(&mut self) -> Result<ModelRequest, RunError> {
        let snap = self.engine.snapshot.load_full();
        let (request, _) = self.build_request(&snap)?;
        Ok(request)
    }

    pub(super) fn build_request(
        &mut self,
        snap: &Arc<Snapshot>,
    ) -> Result<(ModelRequest, Arc<[String]>), RunError> {
        let settings = snap.settings();
        let (system, tools, names, sampling, max_tokens) = match &self.spec.frozen {
            Some(f) => (
                Arc::clone(&f.system),
                Arc::clone(&f.tools),
                Arc::clone(&f.tool_names),
                f.sampling.clone(),
                f.max_tokens,
            ),
            None => {
                self.announce(snap)?;
                let effort = self.spec.effort.as_deref().and_then(|e| {
                    crate::agent_tool::trim_effort(e, &self.spec.model, &settings.effort_levels)
                        .sent
                });
                let thinking_budget = self.thinking_budget.or(settings.provider.thinking_budget);
                let r = self.render(snap)?;
                let sampling = Sampling {
                    temperature: settings.provider.temperature,
                    thinking_budget,
                    effort,
                };
                (
                    Arc::clone(&r.system),
                    Arc::clone(&r.tools),
                    Arc::clone(&r.tool_names),
                    sampling,
                    settings.provider.max_tokens,
                )
            }
        };
        let request = ModelRequest {
            model: self.active_skill_model(snap),
            system,
            tools,
            messages: self.history.clone(),
            max_tokens,
            sampling,
            server_tools: Vec::new(),
        };
        Ok((request, names))
    }

    /// Tells the conversation of agent types and skills added, changed or
    /// removed since it was last told (the whole listing the first time):
    /// text blocks joined to the user message this turn sends, so the
    /// tools, the system prompt and every earlier message keep their bytes.
    fn announce(&mut self, snap: &Snapshot) -> Result<(), RunError> {
        let now = Arc::clone(&self.render(snap)?.listing);
        if now == self.announced {
            return Ok(());
        }
        let blocks: Vec<ContentBlock> = now
            .announce(&self.announced, snap)
            .into_iter()
            .map(ContentBlock::text)
            .collect();
        if !blocks.is_empty() {
            // After everything else the message holds (tool results must
            // come first in it).
            self.join_last_user_message(blocks);
        }
        self.transcript.record(
            "listing",
            serde_json::to_value(&*now).unwrap_or(serde_json::Value::Null),
        );
        self.announced = now;
        Ok(())
    }

    /// Renders the system prompt and tool definitions for this snapshot,
    /// reusing the last rendering while the snapshot is the same.
    fn render(&mut self, snap: &Snapshot) -> Result<&Rendered, RunError> {
        let mcp_version = self.engine.mcp.version();
        if self
            .rendered
            .as_ref()
            .is_none_or(|r| r.generation != snap.generation || r.mcp_version != mcp_version)
        {
            let mut names: Vec<String> = self.spec.tool_names.clone();
            let mcp = &self.engine.mcp;
            // `Agent(A, B)` in this session's own tools: list only those types.
            let spawnable = self
                .spec
                .def
                .as_deref()
                .and_then(crate::agent_tool::spawnable_types);
            let listed = |d: &AgentDef| {
                mcp.required_ready(&d.required_mcp_servers)
                    && spawnable.as_ref().is_none_or(|t| t.contains(&d.name))
            };
            let offer = self.engine.tool_offer(snap);
            let listing = Listing::for_session(snap, self.spec.kind, &names, &listed, Some(&offer));
            let mut tools = shared_tools(&self.engine, snap, self.spec.kind, &names, &listed)?;
            let mcp_tools = self.mcp_tools(snap);
            let resource_tools = self.resource_tool_names(snap);
            if !mcp_tools.is_empty() || !resource_tools.is_empty() {
                let mut own = tools.to_vec();
                for t in mcp_tools {
                    names.push(crate::tools::Tool::name(&*t).to_string());
                    own.push(t.definition());
                }
                if !resource_tools.is_empty() {
                    own.extend(render_tools_for(
                        snap,
                        self.spec.kind,
                        &resource_tools,
                        &listed,
                    )?);
                    names.extend(resource_tools);
                }
                tools = Arc::from(own);
            }
            if let Some(spec) = &self.structured {
                let description = snap.templates.show(&StructuredOutputTool {});
                let mut own = tools.to_vec();
                own.push(spec.definition(description.trim_end().to_string()));
                names.push(STRUCTURED_OUTPUT.to_string());
                tools = Arc::from(own);
            }
            let memory = self.agent_memory().cloned();
            let agent_name = self.spec.def.as_ref().map_or("main", |d| d.name.as_str());
            let scratchpad = self
                .engine
                .session_dir
                .as_ref()
                .map(|d| d.join("scratchpad"));
            let mut ctx = PromptContext::new(&self.spec.cwd, &self.spec.model, agent_name)
                .with_tools(&names)
                .with_scratchpad(scratchpad.as_deref());
            ctx.agent_memory = memory;
            // The output style is the main session's (as in Claude Code).
            if self.spec.is_main {
                ctx = ctx.with_style(super::prompt::ActiveStyle::of(snap));
            }
            let key = SystemKey {
                is_main: self.spec.is_main,
                def: self.spec.def.clone(),
                ctx,
            };
            let system = match rendered_system(&self.engine, snap, &key) {
                Some(system) => system,
                None => {
                    let system = self.render_system(snap, &key.ctx)?;
                    keep_system(&self.engine, snap, key, system)
                }
            };
            self.rendered = Some(Rendered {
                generation: snap.generation,
                mcp_version,
                system,
                tools,
                tool_names: Arc::from(names),
                listing: Arc::new(listing),
            });
        }
        // Just set above when absent.
        self.rendered.as_ref().ok_or(RunError::Cancelled)
    }

    /// The system prompt from `ctx`: the main session's (its head, or the
    /// one the command line gave) or the sub-agent's. A scratchpad folder
    /// the prompt names is created.
    fn render_system(&self, snap: &Snapshot, ctx: &PromptContext) -> Result<String, RunError> {
        let system = if self.spec.is_main {
            let edits = &self.engine.main_prompt;
            let mut system = match &edits.replace {
                Some(head) => super::prompt::main_system_prompt_with_head(snap, head, ctx)?,
                None => main_system_prompt(snap, self.spec.def.as_deref(), ctx)?,
            };
            if let Some(extra) = &edits.append {
                system.push_str("\n\n");
                system.push_str(extra);
            }
            system
        } else {
            match &self.spec.def {
                Some(d) => subagent_system_prompt(snap, d, ctx)?,
                None => main_system_prompt(snap, None, ctx)?,
            }
        };
        // The scratchpad exists once a prompt tells the model of it.
        if let Some(dir) = &ctx.scratchpad
            && system.contains(dir.as_str())
            && let Err(e) = fs_err::create_dir_all(dir)
        {
            tracing::warn!("{e}");
        }
        Ok(system)
    }

    /// This session's agent memory: the folder of its definition's
    /// `memory:` scope and the head of its `MEMORY.md`, read once.
    pub(super) fn agent_memory(&mut self) -> Option<&crate::catalog::agent_memory::AgentMemory> {
        if self.agent_memory.is_none() {
            let snap = self.engine.snapshot.load();
            let loaded = self.spec.def.as_deref().and_then(|d| {
                let scope = d.memory.as_deref()?;
                let home = self.engine.env_var("HOME").map(std::path::PathBuf::from);
                let m = crate::catalog::agent_memory::agent_memory(
                    scope,
                    &d.name,
                    home.as_deref(),
                    &self.spec.cwd,
                    &snap.project_files,
                )?;
                if let Some(o) = &m.outside {
                    tracing::warn!(
                        "agent `{}`: {} links to {}, outside the project, and was not read; trust the folder with `cadre trust {}` to read it",
                        d.name,
                        o.file.display(),
                        o.target.display(),
                        snap.config.trust_root.display()
                    );
                }
                Some(m)
            });
            self.agent_memory = Some(loaded);
        }
        self.agent_memory.as_ref().and_then(Option::as_ref)
    }

    /// The model of the request: the last active skill's `model` (not for
    /// forks, which keep their parent's), else the session's.
    fn active_skill_model(&self, snap: &Snapshot) -> String {
        if self.spec.frozen.is_none()
            && let Ok(skills) = self.active_skills.lock()
            && let Some(m) = skills.iter().rev().find_map(|s| s.model.as_deref())
            && m != "inherit"
        {
            return snap.resolve_alias(m).to_string();
        }
        self.spec.model.clone()
    }

    /// Marks skills active in this session (a sub-agent's preloaded ones).
    pub(super) fn activate_skills(&self, skills: Vec<super::todos::ActiveSkill>) {
        if let Ok(mut active) = self.active_skills.lock() {
            active.extend(skills);
        }
    }

    /// The agent's memory folder, once the session has rendered its
    /// prompt, when no symbolic link leads to it.
    pub(super) fn memory_dir(&self) -> Option<&std::path::Path> {
        self.agent_memory
            .as_ref()
            .and_then(Option::as_ref)
            .filter(|m| m.plain)
            .map(|m| m.dir.as_path())
    }

    /// Starts counting turns afresh for a new prompt of a multi-prompt
    /// session (`-p` with stream-json input, `cadre chat`): `max_turns` and
    /// an outcome's `turns` are per prompt, as in Claude Code. Usage stays
    /// cumulative.
    pub fn begin_prompt(&mut self) {
        self.turns = 0;
        self.wake_ups = 0;
        self.structured_state = StructuredState::default();
    }

    /// The reasoning effort of this session's requests from now on
    /// (trimmed to what its model takes when sent).
    pub fn set_effort(&mut self, effort: String) {
        self.spec.effort = Some(effort);
    }

    /// The thinking budget of this session's requests from now on (0:
    /// off); `None` goes back to `provider.thinking_budget`.
    pub fn set_thinking_budget(&mut self, budget: Option<u32>) {
        self.thinking_budget = budget;
    }

    /// Asks for structured output (`--json-schema`): the session is
    /// offered the StructuredOutput tool from its next request on, and a
    /// run ends once the tool is called with input that fits.
    pub fn set_structured_output(&mut self, spec: StructuredSpec) {
        self.structured = Some(spec);
        self.rendered = None;
    }

    /// The model turns of the current prompt so far (wake-ups included).
    pub fn turns_this_prompt(&self) -> u32 {
        self.turns + self.wake_ups
    }

    /// Runs turns until the model stops calling tools or the turn limit.
    pub async fn run(&mut self) -> Result<Outcome, RunError> {
        let outcome = self.run_prompt().await;
        if self.spec.is_main {
            self.engine.emit(EngineEvent::TurnEnd {
                agent_id: self.spec.agent_id.clone(),
            });
        }
        outcome
    }

    async fn run_prompt(&mut self) -> Result<Outcome, RunError> {
        let mut stop_blocks = 0;
        // Where this prompt's messages start (the prompt is the one just
        // before), and whether its answer was checked already.
        let asked_at = self.history.len();
        let mut answer_checked = false;
        // Continuations asked for after answers cut at max_tokens in a row.
        let mut recoveries = 0u32;
        // The next turn answers task notifications only (a wake-up): it
        // does not count against max_turns.
        let mut wake_up = false;
        // At the turn limit: how many more notifications still get a turn
        // (those of the children running when the limit was reached).
        let mut after_limit: Option<usize> = None;
        // A `prompt is too long` error was answered by a compaction and
        // the request is being sent again: a second one fails the turn.
        let mut overflow_retried = false;
        // Time spent waiting for background children after an answer
        // (bounded by `agents.run_wait_ceiling_ms` for the main session).
        let mut waited = std::time::Duration::ZERO;
        // The guard steers each prompt's run once.
        self.guard_fires = 0;
        // How a run asked for structured output ended: the output, or
        // why there is none.
        let mut structured_end: Option<Result<serde_json::Value, String>> = None;
        // A `continue: false` left from an earlier run does not end this one.
        if let Ok(mut h) = self.halted.lock() {
            h.take();
        }
        // What the configured first search finds joins the prompt.
        let first = self.engine.snapshot.load_full();
        self.pre_read = match self.first_search(&first).await {
            Some((blocks, read)) => {
                self.join_last_user_message(blocks);
                read
            }
            None => Vec::new(),
        };
        let stop = loop {
            if self.turns >= self.spec.max_turns && !wake_up {
                let left = *after_limit
                    .get_or_insert_with(|| self.engine.tasks.pending_count(&self.spec.agent_id));
                if !self.spec.wait_for_background || left == 0 {
                    break StopKind::MaxTurns;
                }
                // Background children started before the limit still
                // report: wait for them and answer, in free turns.
                self.engine
                    .tasks
                    .wait_for_notification(&self.spec.agent_id, &self.cancel)
                    .await;
                let snap = self.engine.snapshot.load_full();
                self.gather_notifications(&snap).await;
                if self.cancel.is_cancelled() {
                    return Err(RunError::Cancelled);
                }
                let incoming = self.take_incoming();
                if incoming.is_empty() {
                    break StopKind::MaxTurns;
                }
                after_limit = Some(left.saturating_sub(incoming.len()));
                self.join_last_user_message(incoming);
                wake_up = true;
                continue;
            }
            if self.cancel.is_cancelled() {
                return Err(RunError::Cancelled);
            }
            // A teammate whose plan was approved meanwhile leaves plan mode.
            self.apply_plan_approval();
            self.catch_up_team_file().await;
            let snap = self.engine.snapshot.load_full();
            if let Some(seen) = self.seen_snap.replace(Arc::clone(&snap))
                && seen.generation != snap.generation
            {
                self.config_change_hooks(&seen, &snap).await;
            }
            self.check_token_budget(&snap)?;
            self.engine.mcp.sync(&snap.mcp_servers, &self.spec.cwd);
            self.compact_if_due(&snap).await;
            if self.cancel.is_cancelled() {
                return Err(RunError::Cancelled);
            }
            self.sync_team_file(&snap).await;
            let (request, tool_names) = self.build_request(&snap)?;
            if !request.tools.is_empty() {
                crate::tools::warm_input_checks();
            }
            let engine = Arc::clone(&self.engine);
            let agent_id = self.spec.agent_id.clone();
            let task = self.task.clone();
            let on_event = move |e: StreamEvent| {
                if let Some(t) = &task {
                    t.touch();
                }
                match e {
                    StreamEvent::TextDelta(text) => engine.emit(EngineEvent::TextDelta {
                        agent_id: agent_id.clone(),
                        text,
                    }),
                    StreamEvent::ThinkingDelta(thinking) => {
                        engine.emit(EngineEvent::ThinkingDelta {
                            agent_id: agent_id.clone(),
                            thinking,
                        });
                    }
                    StreamEvent::SignatureDelta(signature) => {
                        engine.emit(EngineEvent::SignatureDelta {
                            agent_id: agent_id.clone(),
                            signature,
                        });
                    }
                    StreamEvent::Retrying {
                        attempt,
                        delay_ms,
                        reason,
                    } => {
                        engine.emit(EngineEvent::Retrying {
                            agent_id: agent_id.clone(),
                            attempt,
                            delay_ms,
                            reason,
                        });
                    }
                    _ => {}
                }
            };
            // Whatever the model is sent is in the transcript's copies first
            // (a fleet worker's broker): a takeover continues from it.
            tokio::select! {
                () = self.transcript.flushed() => {}
                () = self.cancel.cancelled() => return Err(RunError::Cancelled),
            }
            let sent = std::time::Instant::now();
            let response = tokio::select! {
                r = self.engine.provider.send(&request, &on_event) => r,
                () = self.cancel.cancelled() => return Err(RunError::Cancelled),
            };
            let response = match response {
                Ok(r) => {
                    overflow_retried = false;
                    r
                }
                // Too long for the model: compact once and send again.
                Err(e) if !overflow_retried && super::compact::is_context_overflow(&e) => {
                    overflow_retried = true;
                    match self
                        .compact(&snap, super::compact::Trigger::Overflow, None)
                        .await
                    {
                        Ok(true) => continue,
                        Ok(false) => {}
                        Err(RunError::Cancelled) => return Err(RunError::Cancelled),
                        Err(c) => {
                            tracing::warn!("{}: compaction failed: {c}", self.spec.agent_id);
                        }
                    }
                    self.stop_failure_hooks(&snap, &e).await;
                    return Err(e.into());
                }
                Err(e) => {
                    self.engine.api_error(
                        &self.spec.agent_id,
                        &request.model,
                        &e,
                        u64::try_from(sent.elapsed().as_millis()).unwrap_or(u64::MAX),
                    );
                    self.stop_failure_hooks(&snap, &e).await;
                    return Err(e.into());
                }
            };
            self.engine.model_response(
                &self.spec.agent_id,
                &request.model,
                response.usage,
                u64::try_from(sent.elapsed().as_millis()).unwrap_or(u64::MAX),
                response.stop_reason == Some(crate::message::StopReason::Refusal),
            );
            if std::mem::take(&mut wake_up) {
                self.wake_ups += 1;
            } else {
                self.turns += 1;
            }
            self.usage.add(&response.usage);
            self.last_usage = response.usage;
            let assistant = Arc::new(response.message);
            let shown = self.message_display_hooks(&assistant).await;
            self.append_marked(
                Arc::clone(&assistant),
                &response.converted_tool_calls,
                shown,
            );
            self.transcript
                .record("usage", serde_json::json!({"usage": response.usage}));
            let cut = response.stop_reason == Some(StopReason::MaxTokens);
            if cut {
                self.transcript.record(
                    "stop_reason",
                    serde_json::json!({"stop_reason": "max_tokens", "max_tokens": request.max_tokens,
                                       "recoveries": recoveries}),
                );
            }
            if assistant.tool_uses().next().is_none() && cut {
                // As Claude Code does: ask the model to go on from where it
                // was cut, a few times, before giving up on the answer.
                let limit = snap.settings().provider.max_tokens_recoveries;
                if recoveries >= limit {
                    break StopKind::MaxTokens;
                }
                recoveries += 1;
                let text = snap.templates.show(&MaxTokensRecovery {
                    max_tokens: request.max_tokens,
                });
                self.append(Arc::new(Message::user_text(text)));
                continue;
            }
            recoveries = 0;
            if assistant.tool_uses().next().is_none() {
                if self.spec.wait_for_background {
                    // Background children still running: wait for the next
                    // notification and let the model continue with it.
                    self.wait_for_children(&snap, &mut waited).await;
                    if self.cancel.is_cancelled() {
                        return Err(RunError::Cancelled);
                    }
                    let incoming = self.take_incoming();
                    if !incoming.is_empty() {
                        self.append(Arc::new(Message::user(incoming)));
                        wake_up = true;
                        continue;
                    }
                }
                // A team's lead waits while its teammates work, and answers
                // what they send.
                if self.spec.wait_for_background && self.wait_for_team().await {
                    let incoming = self.take_incoming();
                    if !incoming.is_empty() {
                        self.append(Arc::new(Message::user(incoming)));
                        wake_up = true;
                        continue;
                    }
                }
                if let Some(feedback) = self.subagent_stop_hooks(&snap, stop_blocks).await {
                    stop_blocks += 1;
                    self.append(Arc::new(Message::user_text(feedback)));
                    continue;
                }
                // Last look at the inbox, closed in the same step: a
                // SendMessage that came meanwhile gets a turn; a later one
                // resumes this agent after it ends.
                let unread = self.engine.tasks.close_inbox(&self.spec.agent_id);
                if !unread.is_empty() {
                    let blocks = unread.into_iter().map(ContentBlock::text).collect();
                    self.append(Arc::new(Message::user(blocks)));
                    continue;
                }
                // An answer that names what the project does not have, or
                // a question's file nobody read: sent back once.
                if !answer_checked {
                    answer_checked = true;
                    if let Some(blocks) = self.answer_check(&snap, asked_at).await {
                        self.append(Arc::new(Message::user(blocks)));
                        continue;
                    }
                }
                // Structured output asked for and answered in text: told
                // once to call the tool (then the text answer stands).
                if self.structured.is_some() && !self.structured_state.enforced {
                    self.structured_state.enforced = true;
                    let text = snap.templates.show(&StructuredOutputEnforce {});
                    self.append_synthetic(Arc::new(Message::user_text(
                        text.trim_end().to_string(),
                    )));
                    continue;
                }
                break StopKind::EndTurn;
            }
            let turn = Turn {
                snap,
                request,
                assistant,
                tool_names,
            };
            let held_back = self.guard_holds_back(&turn);
            let mut results = self.run_tools(&turn, &response.invalid_tool_inputs).await;
            self.post_tool_batch_hooks(&turn.snap, &turn.assistant, &mut results)
                .await;
            // Rules and nested memory of the files these calls touched.
            let loaded = self.instructions_after_tools(&turn, &results);
            results.extend(loaded);
            // Whatever arrived meanwhile joins this user message, after
            // every tool_result: appended, never inserted earlier.
            let verdict = match self.structured {
                Some(_) => self.structured_state.after_tools(&turn.assistant, &results),
                None => TurnVerdict::Continue,
            };
            results.extend(self.take_incoming());
            self.append(Arc::new(Message::user(results)));
            match verdict {
                TurnVerdict::Continue => {}
                TurnVerdict::Done(value) => {
                    structured_end = Some(Ok(value));
                    break StopKind::EndTurn;
                }
                TurnVerdict::GaveUp(why) => {
                    structured_end = Some(Err(why));
                    break StopKind::EndTurn;
                }
            }
            // A hook's `continue: false` ends the run here, its history
            // complete (every call answered).
            if self.halted.lock().ok().and_then(|mut h| h.take()).is_some() {
                break StopKind::EndTurn;
            }
            // The first time, the guard's answer tells the agent to answer
            // from what it has; a second time ends the run.
            if held_back {
                self.guard_fires += 1;
                if self.guard_fires > 1 {
                    break StopKind::RepeatedCalls;
                }
            }
        };
        let mut outcome = self.outcome(stop);
        if let Some(end) = structured_end {
            // Claude Code counts the turn the run ends in, whose request
            // is never sent.
            outcome.turns += 1;
            match end {
                Ok(value) => outcome.structured_output = Some(value),
                Err(why) => outcome.structured_failure = Some(why),
            }
        }
        Ok(outcome)
    }

    /// A sub-agent past `agents.task_token_budget`, or any session of a
    /// process past `agents.session_token_budget`, ends before its next
    /// request, its history complete (every tool call answered). A
    /// sub-agent ends `failed` with one notification naming the limit; the
    /// main session ends with [`RunError::Limit`].
    fn check_token_budget(&self, snap: &Snapshot) -> Result<(), RunError> {
        let agents = &snap.settings().agents;
        let (task_budget, session_budget) = (agents.task_token_budget, agents.session_token_budget);
        let (used, session_used) = (self.usage.total(), self.engine.session_tokens());
        let reason = if session_budget > 0 && session_used >= session_budget {
            snap.templates.show(&LimitSessionTokens {
                budget: session_budget,
                used: session_used,
            })
        } else if task_budget > 0 && used >= task_budget && self.task.is_some() {
            snap.templates.show(&LimitTaskTokens {
                budget: task_budget,
                used,
            })
        } else {
            return Ok(());
        };
        match &self.task {
            Some(task) => {
                task.end_by_limit(reason);
                Err(RunError::Cancelled)
            }
            None => Err(RunError::Limit(reason.trim_end().to_string())),
        }
    }

    /// Waits for the next notification of a background child. The main
    /// session waits at most `agents.run_wait_ceiling_ms` in all (`waited`
    /// counts it); past that, every child still running ends `failed`
    /// with one notification naming the limit, and those are awaited.
    async fn wait_for_children(&self, snap: &Snapshot, waited: &mut std::time::Duration) {
        self.wait_under_ceiling(snap, waited).await;
        self.gather_notifications(snap).await;
    }

    /// Waits for siblings of the notifications just received that are
    /// about to end too (`agents.notification_gap_ms`), so that one request
    /// answers them all.
    async fn gather_notifications(&self, snap: &Snapshot) {
        let gap = std::time::Duration::from_millis(snap.settings().agents.notification_gap_ms);
        self.engine
            .tasks
            .gather_notifications(&self.spec.agent_id, gap, &self.cancel)
            .await;
    }

    /// [`Session::wait_for_children`] without the gathering.
    async fn wait_under_ceiling(&self, snap: &Snapshot, waited: &mut std::time::Duration) {
        let tasks = &self.engine.tasks;
        let id = &self.spec.agent_id;
        let ceiling_ms = snap.settings().agents.run_wait_ceiling_ms;
        if !self.spec.is_main || ceiling_ms == 0 {
            tasks.wait_for_notification(id, &self.cancel).await;
            return;
        }
        let ceiling = std::time::Duration::from_millis(ceiling_ms);
        let left = ceiling.saturating_sub(*waited);
        let start = Instant::now();
        let in_time = tokio::time::timeout(left, tasks.wait_for_notification(id, &self.cancel))
            .await
            .is_ok();
        *waited += start.elapsed();
        if in_time {
            return;
        }
        let reason = snap.templates.show(&LimitRunWait { ms: ceiling_ms });
        for t in tasks.running_background_children(id) {
            t.end_by_limit(reason.clone());
        }
        tasks.wait_for_notification(id, &self.cancel).await;
    }

    /// Adds blocks to the user message that ends the history (tool results
    /// not yet sent), or appends them as a new one. The message was never
    /// part of a request, so no cached prefix changes.
    fn join_last_user_message(&mut self, blocks: Vec<ContentBlock>) {
        let added = Message::user(blocks);
        match self.history.last() {
            Some(last) if last.role == Role::User => {
                let mut content = last.content.clone();
                content.extend(added.content.iter().cloned());
                self.transcript.joined_message(&added);
                self.history.pop();
                self.history.push(Arc::new(Message::user(content)));
            }
            _ => self.append(Arc::new(added)),
        }
    }

    fn outcome(&self, stop: StopKind) -> Outcome {
        let mut final_text = match stop {
            StopKind::RepeatedCalls => self.partial_answer(),
            _ => last_text(&self.history),
        };
        // The answer as the user was shown it (a MessageDisplay hook's
        // rewrite), as in Claude Code's `result`.
        if let (Some(_), Some((message, shown))) = (&final_text, &self.displayed)
            && last_with_text(&self.history).is_some_and(|m| Arc::ptr_eq(m, message))
        {
            final_text = Some(vec![shown.clone()]);
        }
        if let Some(text) = final_text.as_mut() {
            let snap = self.engine.snapshot.load();
            text.extend(self.unverified_note(&snap, text));
        }
        Outcome {
            final_text,
            stop,
            turns: self.turns + self.wake_ups,
            usage: self.usage,
            last_usage: self.last_usage,
            tool_uses: self.tool_uses,
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            structured_output: None,
            structured_failure: None,
        }
    }
}

/// The text blocks of the last assistant message that has any.
/// `message` with its text replaced by `shown`: the first text block
/// holds it, the others are emptied (as Claude Code prints a rewrite).
fn displayed_as(message: &Message, shown: &str) -> Message {
    let mut first = true;
    let content = message
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { .. } => {
                let text = if first { shown } else { "" };
                first = false;
                ContentBlock::text(text)
            }
            other => other.clone(),
        })
        .collect();
    Message {
        role: message.role,
        content,
    }
}

/// The last assistant message with some text.
fn last_with_text(history: &History) -> Option<&Arc<Message>> {
    history.iter().rev().find(|m| {
        m.role == Role::Assistant
            && m.content
                .iter()
                .filter_map(ContentBlock::as_text)
                .any(|t| !t.trim().is_empty())
    })
}

pub fn last_text(history: &History) -> Option<Vec<String>> {
    history
        .iter()
        .rev()
        .filter(|m| m.role == Role::Assistant)
        .find_map(|m| {
            let texts: Vec<String> = m
                .content
                .iter()
                .filter_map(ContentBlock::as_text)
                .map(str::to_string)
                .collect();
            if texts.iter().any(|t| !t.trim().is_empty()) {
                Some(texts)
            } else {
                None
            }
        })
}

/// Tool definitions for `names` as a session of `kind` sees them now. No
/// description lists agents or skills: those are announced in messages
/// (see [`super::listing`]).
pub fn render_tools(
    snap: &Snapshot,
    kind: SessionKind,
    names: &[String],
) -> Result<Vec<ToolDefinition>, RenderError> {
    render_tools_for(snap, kind, names, &|_| true)
}

/// [`render_tools`] for a session that may start only the agents for which
/// `listed` holds (those whose required MCP servers are ready, and allowed by
/// its `Agent(A, B)`): the Agent tool names the type a call without
/// `subagent_type` starts among those.
pub fn render_tools_for(
    snap: &Snapshot,
    kind: SessionKind,
    names: &[String],
    listed: &dyn Fn(&AgentDef) -> bool,
) -> Result<Vec<ToolDefinition>, RenderError> {
    render_tools_with(snap, kind, names, description_context(snap, kind, listed))
}

/// What the tool descriptions of a session of `kind` are rendered with.
fn description_context(
    snap: &Snapshot,
    kind: SessionKind,
    listed: &dyn Fn(&AgentDef) -> bool,
) -> DescriptionContext {
    let agents = snap.visible_agents(kind);
    let default_type = crate::agent_tool::default_type(
        agents.iter().filter(|d| listed(d)).map(|d| d.name.as_str()),
    )
    .unwrap_or(crate::catalog::GENERAL_PURPOSE)
    .to_string();
    DescriptionContext {
        fork: snap.fork_effective(kind),
        background: snap.background_enabled(kind),
        coordinator: kind.coordinator,
        default_type,
    }
}

fn render_tools_with(
    snap: &Snapshot,
    kind: SessionKind,
    names: &[String],
    desc: DescriptionContext,
) -> Result<Vec<ToolDefinition>, RenderError> {
    let holds = |c: &crate::config::Condition| snap.holds(c, kind);
    let aliases = snap.model_aliases();
    let trim = TrimContext {
        holds: &holds,
        model_aliases: &aliases,
    };
    render_definitions(&snap.tools, &snap.templates, names, &desc, &trim)
}

/// Tool definitions rendered for one snapshot generation (see
/// [`shared_tools`]).
#[derive(Default)]
pub(super) struct ToolDefCache {
    generation: u64,
    by_input: HashMap<(SessionKind, Vec<String>, String), Arc<[ToolDefinition]>>,
    /// The last system prompts rendered (see [`shared_system`]).
    systems: Vec<Arc<str>>,
    /// The same prompts by what they were rendered from, for this
    /// generation (see [`rendered_system`]).
    by_key: Vec<(SystemKey, Arc<str>)>,
}

/// What a session's system prompt is rendered from, besides the snapshot:
/// sessions with equal keys in one generation get the same prompt.
pub(super) struct SystemKey {
    is_main: bool,
    /// Compared by identity: the cache entry holds the `Arc`, so its
    /// address cannot be reused by another definition while it is kept.
    def: Option<Arc<AgentDef>>,
    ctx: PromptContext,
}

impl PartialEq for SystemKey {
    fn eq(&self, other: &Self) -> bool {
        let same_def = match (&self.def, &other.def) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        self.is_main == other.is_main && same_def && self.ctx == other.ctx
    }
}

/// The system prompt already rendered for `key` in this snapshot's
/// generation: the children of one turn share a context (same folder,
/// model, tools and date), and rendering the templates again for each of
/// a thousand was most of a child's own work.
fn rendered_system(engine: &Engine, snap: &Snapshot, key: &SystemKey) -> Option<Arc<str>> {
    let cache = tool_def_cache(engine);
    if cache.generation != snap.generation {
        return None;
    }
    cache
        .by_key
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, system)| Arc::clone(system))
}

/// Keeps `system`, rendered for `key`, for the sessions that follow (and
/// shares its text with equal ones, see [`shared_system`]).
fn keep_system(engine: &Engine, snap: &Snapshot, key: SystemKey, system: String) -> Arc<str> {
    let mut cache = tool_def_cache(engine);
    let system = shared_system(&mut cache, system);
    if cache.at(snap.generation) {
        if cache.by_key.len() >= SHARED_SYSTEMS {
            cache.by_key.remove(0);
        }
        cache.by_key.push((key, Arc::clone(&system)));
    }
    system
}

/// The engine's [`ToolDefCache`]. A panic while holding the lock leaves a
/// usable cache behind.
fn tool_def_cache(engine: &Engine) -> std::sync::MutexGuard<'_, ToolDefCache> {
    engine
        .tool_defs
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ToolDefCache {
    /// Makes the cache hold entries of `generation`, dropping older ones;
    /// `false` when it holds a newer generation (an older snapshot still in
    /// use does not evict it).
    fn at(&mut self, generation: u64) -> bool {
        if self.generation > generation {
            return false;
        }
        if self.generation < generation {
            self.generation = generation;
            self.by_input.clear();
            self.by_key.clear();
        }
        true
    }
}

/// How many system prompts [`ToolDefCache`] keeps.
const SHARED_SYSTEMS: usize = 16;

/// `system` as an `Arc` shared with the sessions that rendered the same
/// text (the children of one turn): one copy in memory instead of one per
/// child, and one request head for all of them (see the provider's
/// `BodyHeads`).
fn shared_system(cache: &mut ToolDefCache, system: String) -> Arc<str> {
    if let Some(same) = cache.systems.iter().find(|s| ***s == *system) {
        return Arc::clone(same);
    }
    let system: Arc<str> = Arc::from(system);
    if cache.systems.len() >= SHARED_SYSTEMS {
        cache.systems.remove(0);
    }
    cache.systems.push(Arc::clone(&system));
    system
}

/// [`render_tools_for`] through the engine's cache: the definitions depend
/// only on the snapshot, the session kind, the tool names and the default
/// agent type, so every session for which those are the same gets the
/// same `Arc` (one copy for a thousand children, and the same bytes).
fn shared_tools(
    engine: &Engine,
    snap: &Snapshot,
    kind: SessionKind,
    names: &[String],
    listed: &dyn Fn(&AgentDef) -> bool,
) -> Result<Arc<[ToolDefinition]>, RenderError> {
    let desc = description_context(snap, kind, listed);
    let key = (kind, names.to_vec(), desc.default_type.clone());
    {
        let cache = tool_def_cache(engine);
        if cache.generation == snap.generation
            && let Some(tools) = cache.by_input.get(&key)
        {
            return Ok(Arc::clone(tools));
        }
    }
    // Rendered outside the lock: two sessions racing here render the same
    // definitions, and the first one stored is kept.
    let tools: Arc<[ToolDefinition]> = Arc::from(render_tools_with(snap, kind, names, desc)?);
    let mut cache = tool_def_cache(engine);
    if !cache.at(snap.generation) {
        return Ok(tools);
    }
    Ok(Arc::clone(cache.by_input.entry(key).or_insert(tools)))
}
