//! Running one turn's tool calls: pool check, input validation, the
//! permission decision, then the tool. Read-only calls that follow each
//! other run concurrently; any other call runs alone, in order. Every
//! tool_use gets exactly one tool_result, in the order of the calls.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::join_all;
use serde_json::{Value, json};

use crate::agent_tool::AGENT_TOOL;
use crate::message::{ContentBlock, ToolResultContent, Usage};
use crate::permissions::{Decision, Rules, decide_in, explain_with_hook};
use crate::tools::outcome::{FetchProblem, SearchProblem};
use crate::tools::{PathFilter, ShellDirs, Tool, ToolContext, ToolOutput};

use super::EngineEvent;

use super::hooks::PreTool;
use super::session::{Session, Turn};
use super::structured::STRUCTURED_OUTPUT;
use super::texts::{
    InvalidInput, InvalidJson, NoSuchTool, PermissionDenied, RepeatedCall, RepeatedCallThisTurn,
    StructuredOutputDone, WebFetchPrompt,
};

/// What one call produced, plus the usage of any child it ran.
pub(super) struct CallResult {
    pub block: ContentBlock,
    pub child_usage: Usage,
    /// The result as data, for programs (`tools::typed`).
    pub typed: Option<Value>,
}

impl CallResult {
    fn text(id: &str, text: impl Into<String>, is_error: bool) -> Self {
        CallResult {
            block: ContentBlock::tool_result(id, text, is_error),
            child_usage: Usage::default(),
            typed: None,
        }
    }
}

/// What in the configuration decided a call, in Claude Code's words
/// (`tool_result_meta`): `rule`, `mode`, `hook`; none for the tools that
/// never ask (the Agent tool, the session's own tools), as Claude Code.
fn reason_type_of(by: &crate::permissions::Reason) -> Option<&'static str> {
    use crate::permissions::Reason as R;
    match by {
        R::DenyRule { .. } | R::AskRule { .. } | R::UnsureRule { .. } | R::AllowRules { .. } => {
            Some("rule")
        }
        R::Mode(_) | R::OutsideDirs { .. } | R::DontAsk { .. } => Some("mode"),
        R::HookDenied { .. } | R::HookAsked { .. } | R::HookAllowed { .. } => Some("hook"),
        R::ReadsOnly { tool } if tool == AGENT_TOOL => None,
        R::ReadsOnly { .. } => Some("mode"),
        R::SessionOnly { .. } => None,
    }
}

/// The error text for an input that does not fit the tool's schema.
fn invalid_input(snap: &crate::snapshot::Snapshot, name: &str, issues: Vec<String>) -> String {
    snap.templates.show(&InvalidInput {
        tool: name.to_string(),
        plural: issues.len() > 1,
        issues: issues.join("\n"),
    })
}

impl Session {
    pub(super) async fn run_tools(
        &mut self,
        turn: &Turn,
        invalid: &[(String, String)],
    ) -> Vec<ContentBlock> {
        let calls: Vec<(String, String, Value)> = turn
            .assistant
            .tool_uses()
            .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
            .collect();
        self.tool_uses += u32::try_from(calls.len()).unwrap_or(u32::MAX);
        let mut results: Vec<CallResult> = Vec::with_capacity(calls.len());
        let mut i = 0;
        while i < calls.len() {
            let mut j = i + 1;
            if self.is_read_only(turn, &calls[i].1) {
                while j < calls.len() && self.is_read_only(turn, &calls[j].1) {
                    j += 1;
                }
            }
            let this = &*self;
            let batch = calls[i..j].iter().map(|(id, name, input)| {
                let bad = invalid
                    .iter()
                    .find(|(bad_id, _)| bad_id == id)
                    .map(|(_, e)| e.as_str());
                this.call_tool(turn, id, name, input.clone(), bad)
            });
            results.extend(join_all(batch).await);
            i = j;
        }
        let mut blocks = Vec::with_capacity(results.len());
        for r in results {
            self.usage.add(&r.child_usage);
            blocks.push(r.block);
        }
        blocks
    }

    fn is_read_only(&self, turn: &Turn, name: &str) -> bool {
        if super::mcp::is_mcp_name(name) {
            return self.mcp_tool(name).is_some_and(|t| t.read_only());
        }
        turn.snap.tools.get(name).is_none_or(|s| s.read_only)
    }

    async fn call_tool(
        &self,
        turn: &Turn,
        id: &str,
        name: &str,
        input: Value,
        invalid_json: Option<&str>,
    ) -> CallResult {
        let engine = &self.engine;
        let agent_id = self.spec.agent_id.clone();
        engine.emit(EngineEvent::ToolUse {
            agent_id: agent_id.clone(),
            tool_use_id: id.into(),
            name: name.into(),
            input: input.clone(),
        });
        if !self.spec.is_main {
            engine.emit(EngineEvent::SubagentProgress {
                agent_id: agent_id.clone(),
                tool_uses: self.tool_uses,
                duration_ms: 0,
                last_tool: name.to_string(),
            });
        }
        // A running call is progress for the stall limit; a sub-agent
        // call is not (the sub-agent's own progress is counted instead).
        let running = (name != AGENT_TOOL)
            .then(|| self.task.as_ref().map(super::tasks::Task::tool_running))
            .flatten();
        let result = self
            .call_tool_inner(turn, id, name, input, invalid_json)
            .await;
        drop(running);
        let error = match &result.block {
            ContentBlock::ToolResult {
                is_error: true,
                content,
                ..
            } => Some(
                content
                    .iter()
                    .find_map(|c| match c {
                        ToolResultContent::Text { text } => Some(first_line(text, 300)),
                        ToolResultContent::Image { .. } => None,
                    })
                    .unwrap_or_default(),
            ),
            _ => None,
        };
        engine.emit(EngineEvent::ToolResult {
            agent_id,
            tool_use_id: id.into(),
            is_error: error.is_some(),
            error,
            typed: result.typed.clone(),
        });
        result
    }

    /// One call through the pipeline every call takes — built-in, MCP,
    /// management and SDK tools alike, in this order, each step written
    /// once: validate ([`Session::admit`]) → PreToolUse and the permission
    /// decision ([`Session::permit`]: rules, mode, the hooks' decision, an
    /// active skill's tools, the user) → run ([`Session::run_call`]) →
    /// PostToolUse (PostToolUseFailure for an error result). A step that
    /// refuses ends the call with its error result; the hooks after a call
    /// see every call that ran.
    async fn call_tool_inner(
        &self,
        turn: &Turn,
        id: &str,
        name: &str,
        input: Value,
        invalid_json: Option<&str>,
    ) -> CallResult {
        if let Err(text) = self.admit(turn, name, &input, invalid_json) {
            return CallResult::text(id, text, true);
        }
        if let Some(first) = self.made_earlier_this_turn(turn, id, name, &input) {
            let text = turn.snap.templates.show(&RepeatedCallThisTurn {
                tool: name.to_string(),
                first_id: first,
            });
            return CallResult::text(id, text, true);
        }
        let input = match self.permit(&turn.snap, id, name, input).await {
            Ok(input) => input,
            Err(refused) => return refused,
        };
        let mut result = match self.run_call(turn, id, name, &input).await {
            Ok(result) => result,
            Err(refused) => return refused,
        };
        self.post_tool_hooks(&turn.snap, name, &input, &mut result.block)
            .await;
        result
    }

    /// A call the user's command makes, not the model (a `` !`command` ``
    /// line, an `@path` read): the same pipeline — validate, PreToolUse and
    /// the permission decision (rules, mode, active skills' tools, the
    /// user), run, PostToolUse — without a turn. `Ok` is the result's
    /// text (`is_error` set when the tool failed); `Err` why it was
    /// refused before it ran.
    pub(super) async fn side_tool_call(
        &self,
        snap: &Arc<crate::snapshot::Snapshot>,
        name: &str,
        input: Value,
    ) -> Result<(String, bool), String> {
        let turn = Turn {
            snap: Arc::clone(snap),
            request: crate::message::ModelRequest {
                model: self.spec.model.clone(),
                system: Arc::from(""),
                tools: Arc::from(Vec::new()),
                messages: Vec::new(),
                max_tokens: 0,
                sampling: crate::message::Sampling::default(),
                server_tools: Vec::new(),
            },
            assistant: Arc::new(crate::message::Message::assistant(Vec::new())),
            tool_names: Arc::from(vec![name.to_string()]),
        };
        let id = format!("command_{:08x}", rand::random::<u32>());
        let text = |r: CallResult| super::commands::result_text(&r.block);
        self.admit(&turn, name, &input, None)?;
        let input = self.permit(snap, &id, name, input).await.map_err(text)?;
        let mut result = self
            .run_call(&turn, &id, name, &input)
            .await
            .map_err(text)?;
        self.post_tool_hooks(snap, name, &input, &mut result.block)
            .await;
        let failed = matches!(
            result.block,
            ContentBlock::ToolResult { is_error: true, .. }
        );
        Ok((super::commands::result_text(&result.block), failed))
    }

    /// The checks before anything runs: the tool is offered, its input is
    /// JSON that fits its schema, and it is not the same call the agent
    /// keeps repeating. `Err` is the error text for the model.
    fn admit(
        &self,
        turn: &Turn,
        name: &str,
        input: &Value,
        invalid_json: Option<&str>,
    ) -> Result<(), String> {
        let snap = &turn.snap;
        if !turn.tool_names.iter().any(|n| n == name) {
            return Err(snap.templates.show(&NoSuchTool {
                name: name.to_string(),
            }));
        }
        if let Some(err) = invalid_json {
            return Err(snap.templates.show(&InvalidJson {
                tool: name.to_string(),
                error: err.to_string(),
            }));
        }
        if let Some(turns) = self.repeated_streak(snap, name, input) {
            return Err(snap.templates.show(&RepeatedCall {
                tool: name.to_string(),
                turns,
            }));
        }
        self.validate(snap, name, input)
            .map_err(|issues| invalid_input(snap, name, issues))
    }

    /// PreToolUse, then the permission decision: `Ok` with the input to
    /// run (a hook's or the user's replacement, checked like the model's),
    /// or the refusal.
    async fn permit(
        &self,
        snap: &Arc<crate::snapshot::Snapshot>,
        id: &str,
        name: &str,
        input: Value,
    ) -> Result<Value, CallResult> {
        let mut source = "config";
        let mut reason_type = None;
        let permitted = self
            .permit_inner(snap, id, name, input, (&mut source, &mut reason_type))
            .await;
        self.engine.emit(EngineEvent::ToolDecision {
            agent_id: self.spec.agent_id.clone(),
            tool_use_id: id.to_string(),
            tool: name.to_string(),
            accept: permitted.is_ok(),
            source,
            reason_type,
        });
        permitted
    }

    /// [`Session::permit`], telling in `source` who decided (the words of
    /// [`EngineEvent::ToolDecision`]).
    async fn permit_inner(
        &self,
        snap: &Arc<crate::snapshot::Snapshot>,
        id: &str,
        name: &str,
        input: Value,
        (source, reason_type): (&mut &'static str, &mut Option<&'static str>),
    ) -> Result<Value, CallResult> {
        let (verdict, mut input) = match self.pre_tool_hooks(snap, id, name, &input).await {
            PreTool::Blocked(text) => {
                *source = "hook";
                *reason_type = Some("hook");
                return Err(CallResult::text(id, text, true));
            }
            PreTool::Go {
                verdict,
                input: None,
            } => (verdict, input),
            // A hook's replacement input is checked like the model's.
            PreTool::Go {
                verdict,
                input: Some(updated),
            } => {
                if let Err(issues) = self.validate(snap, name, &updated) {
                    return Err(CallResult::text(
                        id,
                        invalid_input(snap, name, issues),
                        true,
                    ));
                }
                (verdict, updated)
            }
        };
        let permissions = &snap.settings().permissions;
        // The session's own updates (an SDK client's) add to the settings.
        let (session_rules, session_dirs, session_mode) = match self.engine.grants.lock() {
            Ok(g) => (g.merged(&snap.rules), g.add_dirs.clone(), g.mode),
            Err(_) => (None, Vec::new(), None),
        };
        let rules: &Rules = session_rules.as_ref().unwrap_or(&snap.rules);
        let mode = match session_mode {
            Some(m) if self.spec.is_main => m,
            _ => self.spec.mode,
        }
        .unless_bypass_disabled(snap.config.bypass_disabled_by.is_some());
        let mut add_dirs: Vec<PathBuf> = permissions
            .additional_directories
            .iter()
            .chain(&self.engine.add_dirs)
            .chain(&session_dirs)
            .map(|d| self.spec.cwd.join(d))
            .collect();
        // A Bash call is judged from where the shell is; the session's
        // folder stays a working directory (a `cd` never widens them: the
        // shell only stays inside these folders).
        let here = self.call_dir(name);
        if here != self.spec.cwd {
            add_dirs.push(self.spec.cwd.clone());
        }
        let explained = explain_with_hook(
            rules,
            mode,
            name,
            &input,
            &here,
            &add_dirs,
            verdict.as_ref(),
        );
        // The rule that decided and where it was written, for the text.
        let (rule, origin) = match &explained.rule {
            Some(c) => (Some(c.rule.clone()), c.origin.clone()),
            None => (None, None),
        };
        let denied = |reason, rule, origin, asked, message, unreadable, retry| {
            CallResult::text(
                id,
                snap.templates.show(&PermissionDenied {
                    tool: name.to_string(),
                    reason,
                    rule,
                    origin,
                    asked,
                    interactive: asked && self.engine.asker.is_some(),
                    message,
                    unreadable,
                    retry,
                }),
                true,
            )
        };
        *reason_type = reason_type_of(&explained.by);
        if verdict.is_some() {
            *source = "hook";
            *reason_type = Some("hook");
        }
        match explained.decision {
            Decision::Allow => {}
            Decision::Deny { reason } => {
                return Err(denied(reason, rule, origin, false, None, None, false));
            }
            // A sandboxed command runs without asking when only the mode
            // would have asked (`autoAllowBashIfSandboxed`): the kernel
            // keeps it inside the boundary. Deny and ask rules still decide.
            Decision::Ask {
                reason: crate::permissions::Reason::Mode(_),
            } if self.auto_allowed(snap, name, &input) => {}
            // An agent's own memory folder is its to read and write.
            Decision::Ask { .. } if self.in_memory_dir(name, &input) => {}
            // So are the tools an active skill lists in `allowed-tools`.
            Decision::Ask { .. }
                if self.skill_allows(snap, name, &input, &here, &add_dirs, verdict.as_ref()) => {}
            Decision::Ask { reason } => {
                // PermissionRequest hooks may answer on the user's behalf,
                // before the user (or the SDK client) is asked.
                let hooked = self.permission_request_hooks(snap, name, &input).await;
                // Nobody can answer: the session refuses on its own (what
                // Claude Code's auto mode has its classifier decide).
                let unanswered = hooked.is_none() && self.engine.asker.is_none();
                let answer = match (hooked, &self.engine.asker) {
                    (Some(a), _) => super::AskAnswer {
                        allow: a.allow,
                        message: Some(a.message).filter(|m| !m.is_empty()),
                        updated_input: a.updated_input,
                        ..super::AskAnswer::default()
                    },
                    (None, Some(ask)) => {
                        self.notification_hooks(
                            snap,
                            "permission_prompt",
                            &format!("Claude needs your permission to use {name}"),
                        )
                        .await;
                        ask(super::AskRequest {
                            question: format!(
                                "{} wants to use {name}: {}",
                                self.spec.agent_id,
                                summarize(&input)
                            ),
                            agent_id: self.spec.agent_id.clone(),
                            tool_use_id: id.to_string(),
                            tool: name.to_string(),
                            input: input.clone(),
                            reason: reason.words(&snap.templates),
                        })
                        .await
                    }
                    (None, None) => super::AskAnswer::from(false),
                };
                if self.engine.asker.is_some() {
                    *reason_type = None;
                    *source = match (answer.allow, answer.updates.is_empty()) {
                        (false, _) => "user_reject",
                        (true, true) => "user_temporary",
                        (true, false) => "user_permanent",
                    };
                }
                if !answer.allow {
                    let retry = unanswered
                        && self
                            .permission_denied_hooks(
                                snap,
                                id,
                                name,
                                &input,
                                &reason.words(&snap.templates),
                            )
                            .await;
                    return Err(denied(
                        reason,
                        rule,
                        origin,
                        true,
                        answer.message,
                        answer.unreadable,
                        retry,
                    ));
                }
                if !answer.updates.is_empty()
                    && let Ok(mut g) = self.engine.grants.lock()
                {
                    for u in &answer.updates {
                        for e in g.apply(u) {
                            tracing::warn!("permission update: {e}; the rule is ignored");
                        }
                    }
                }
                // A replacement input is checked like the model's: against
                // the schema, then against the rules, so that an answer
                // cannot carry a denied call through.
                if let Some(updated) = answer.updated_input
                    && updated != input
                {
                    if let Err(issues) = self.validate(snap, name, &updated) {
                        return Err(CallResult::text(
                            id,
                            invalid_input(snap, name, issues),
                            true,
                        ));
                    }
                    if let Decision::Deny { reason } =
                        decide_in(rules, mode, name, &updated, &here, &add_dirs)
                    {
                        return Err(denied(reason, None, None, false, None, None, false));
                    }
                    input = updated;
                }
            }
        }
        Ok(input)
    }

    /// Runs an admitted and permitted call by what kind of tool it is: the
    /// Agent tool, a session tool (TodoWrite, Skill, AskUserQuestion), a
    /// management tool, or a built-in, MCP or resource tool. `Err` is a
    /// call that never ran (a sub-agent that could not be started, a tool
    /// that went away): the hooks after a call do not see it.
    async fn run_call(
        &self,
        turn: &Turn,
        id: &str,
        name: &str,
        input: &Value,
    ) -> Result<CallResult, CallResult> {
        let snap = &turn.snap;
        if name == AGENT_TOOL {
            return match self.agent_call(turn, id, input.clone()).await {
                Ok((content, usage)) => Ok(CallResult {
                    block: ContentBlock::ToolResult {
                        tool_use_id: id.into(),
                        content,
                        is_error: false,
                    },
                    child_usage: usage,
                    typed: None,
                }),
                Err(text) => Err(CallResult::text(id, text, true)),
            };
        }
        if name == STRUCTURED_OUTPUT && self.structured.is_some() {
            // The input fit the schema (checked on admission); the run
            // ends with it after this turn.
            let text = snap.templates.show(&StructuredOutputDone {});
            return Ok(CallResult::text(id, text.trim_end(), false));
        }
        if [
            super::todos::TODO_WRITE,
            super::todos::SKILL,
            super::ask_user::ASK_USER_QUESTION,
        ]
        .contains(&name)
            || super::RUNTIME_TOOLS.contains(&name)
        {
            let done = match name {
                super::todos::SKILL => self.skill_call(snap, input).await,
                super::todos::TODO_WRITE => self.todo_write(snap, input.clone()),
                super::ask_user::ASK_USER_QUESTION => self.ask_user(snap, id, input.clone()).await,
                _ => self.manage_call(snap, name, input.clone()).await,
            };
            return Ok(match done {
                Ok(text) => CallResult::text(id, text, false),
                Err(text) => CallResult::text(id, text, true),
            });
        }
        let tool: Option<Arc<dyn Tool>> = match self.engine.tools.get(name) {
            Some(t) => Some(Arc::clone(t)),
            None => match self.mcp_tool(name) {
                Some(t) => Some(t as Arc<dyn Tool>),
                None => self.resource_tool(name).map(|t| t as Arc<dyn Tool>),
            },
        };
        let Some(tool) = tool else {
            return Err(CallResult::text(
                id,
                snap.templates.show(&NoSuchTool {
                    name: name.to_string(),
                }),
                true,
            ));
        };
        // Glob and Grep leave out what the rules forbid them to read.
        let hidden: Option<PathFilter> = matches!(name, "Glob" | "Grep").then(|| {
            let (tool, cwd) = (name.to_string(), self.spec.cwd.clone());
            let rules = Arc::clone(&snap.rules);
            Arc::new(move |p: &Path| rules.hides(&tool, p, &cwd)) as PathFilter
        });
        let sandbox = if name == "Bash" {
            match self.sandbox_policy(snap, input) {
                Ok(p) => p,
                Err(text) => return Err(CallResult::text(id, text, true)),
            }
        } else {
            None
        };
        let ask_host = sandbox
            .as_ref()
            .filter(|p| p.isolate_network)
            .and_then(|_| self.host_asker(snap, id));
        let shell = (name == "Bash").then(|| ShellDirs {
            root: self.spec.cwd.clone(),
            allowed: std::iter::once(self.spec.cwd.clone())
                .chain(self.added_dirs(snap))
                .collect(),
            moved_to: Default::default(),
        });
        let ctx = ToolContext {
            cwd: self.call_dir(name),
            shell,
            cancel: self.cancel.child_token(),
            env: std::sync::Arc::new(snap.settings().child_env()),
            hidden,
            bash: snap.settings().bash,
            web_fetch: snap.settings().web_fetch.clone(),
            small_model: (name == "WebFetch").then(|| self.small_model(Arc::clone(snap))),
            progress: Some(self.progress_reporter(id)),
            web_search: snap.settings().web_search.clone(),
            searcher: (name == "WebSearch")
                .then(|| self.searcher(Arc::clone(snap)))
                .flatten(),
            sandbox,
            ask_host,
        };
        if let Some(history) = &self.engine.file_history
            && let Some(path) = super::file_history::target(name, input, &ctx.cwd)
        {
            let history = Arc::clone(history);
            let _ = tokio::task::spawn_blocking(move || history.before_change(&path)).await;
        }
        let out: ToolOutput = tool.call(input.clone(), &ctx).await;
        if let Some(to) = ctx.shell.as_ref().and_then(|s| s.moved_to.get()) {
            self.shell_moved(snap, &ctx.cwd, to.clone()).await;
        }
        let mut result = CallResult::text(id, out.render(&snap.templates), out.is_error);
        result.typed = out.typed.map(|t| *t);
        let images = out.images;
        if !images.is_empty()
            && let ContentBlock::ToolResult { content, .. } = &mut result.block
        {
            // An image-only result has no (empty) text block.
            content.retain(|c| !matches!(c, ToolResultContent::Text { text } if text.is_empty()));
            content.extend(
                images
                    .into_iter()
                    .map(|source| ToolResultContent::Image { source }),
            );
        }
        Ok(result)
    }

    /// The folder a call runs in and is judged from: for Bash, where the
    /// last `cd` left the shell; for every other tool, the session's.
    pub(super) fn call_dir(&self, tool: &str) -> PathBuf {
        if tool == "Bash"
            && let Ok(dir) = self.shell_dir.lock()
            && let Some(dir) = dir.as_ref()
        {
            return dir.clone();
        }
        self.spec.cwd.clone()
    }

    /// A Bash call left the shell in `to` (inside the allowed folders, or
    /// the session's folder it was sent back to): later calls start there,
    /// and CwdChanged fires.
    async fn shell_moved(&self, snap: &crate::snapshot::Snapshot, from: &Path, to: PathBuf) {
        let home = std::fs::canonicalize(&self.spec.cwd).unwrap_or_else(|_| self.spec.cwd.clone());
        if let Ok(mut dir) = self.shell_dir.lock() {
            *dir = (to != home).then(|| to.clone());
        }
        self.cwd_changed_hooks(snap, from, &to).await;
    }

    fn added_dirs(&self, snap: &crate::snapshot::Snapshot) -> Vec<PathBuf> {
        self.engine.added_dirs(snap, &self.spec.cwd)
    }

    /// Whether a Bash call runs without asking because it runs sandboxed
    /// (`sandbox.autoAllowBashIfSandboxed`, on by default): the sandbox is
    /// on and usable here and the command is not one of
    /// `excludedCommands`.
    fn auto_allowed(&self, snap: &crate::snapshot::Snapshot, name: &str, input: &Value) -> bool {
        let settings = &snap.settings().sandbox;
        name == "Bash"
            && settings.enabled
            && settings.auto_allow_bash_if_sandboxed
            && matches!(self.sandbox_policy(snap, input), Ok(Some(_)))
    }

    /// Who decides about a host a sandboxed command wants to reach that the
    /// sandbox's network does not allow: the session's asker (chat, an SDK
    /// client's `can_use_tool` with the tool name `SandboxNetworkAccess`),
    /// unless a `WebFetch(domain:…)` deny rule names the host. A yes
    /// allows the host for the rest of the session (a session rule
    /// `WebFetch(domain:HOST)`, which later sandboxes read). `None`: there
    /// is nobody to ask, and such hosts are refused.
    fn host_asker(
        &self,
        snap: &Arc<crate::snapshot::Snapshot>,
        id: &str,
    ) -> Option<crate::tools::sandbox::proxy::HostAsker> {
        use super::grants::{Behavior, PermissionUpdate};
        let asker = self.engine.asker.clone()?;
        let engine = Arc::clone(&self.engine);
        let snap = Arc::clone(snap);
        let (agent_id, tool_use_id) = (self.spec.agent_id.clone(), id.to_string());
        Some(Arc::new(move |host: String| {
            let (asker, engine, snap) = (asker.clone(), Arc::clone(&engine), Arc::clone(&snap));
            let (agent_id, tool_use_id) = (agent_id.clone(), tool_use_id.clone());
            Box::pin(async move {
                if snap.rules.denies_domain(&host) {
                    return false;
                }
                let reason = snap
                    .templates
                    .show(&super::texts::SandboxHostQuestion { host: host.clone() });
                let answer = asker(super::AskRequest {
                    question: reason.clone(),
                    agent_id,
                    tool_use_id,
                    tool: crate::tools::sandbox::proxy::SANDBOX_NETWORK_ACCESS.to_string(),
                    input: json!({ "host": host }),
                    reason,
                })
                .await;
                if answer.allow
                    && let Ok(mut g) = engine.grants.lock()
                {
                    let mut updates = answer.updates;
                    updates.push(PermissionUpdate::AddRules {
                        behavior: Behavior::Allow,
                        rules: vec![format!("WebFetch(domain:{host})")],
                    });
                    for u in &updates {
                        for e in g.apply(u) {
                            tracing::warn!("permission update: {e}; the rule is ignored");
                        }
                    }
                }
                answer.allow
            })
        }))
    }

    /// The sandbox a Bash call runs in (docs/sandbox.md): `None` when the
    /// sandbox is off, the command is one of `excludedCommands`, the call
    /// asked to run outside and `allowUnsandboxedCommands` lets it, or this
    /// machine cannot sandbox (a warning, once); `Err` with the tool
    /// result when it cannot and `failIfUnavailable` is set.
    fn sandbox_policy(
        &self,
        snap: &crate::snapshot::Snapshot,
        input: &Value,
    ) -> Result<Option<Arc<crate::tools::sandbox::Policy>>, String> {
        use crate::tools::sandbox;
        let settings = &snap.settings().sandbox;
        let command = input.get("command").and_then(Value::as_str).unwrap_or("");
        let outside = input.get("dangerouslyDisableSandbox") == Some(&Value::Bool(true));
        match sandbox::classify(settings, command, outside) {
            sandbox::Use::Off | sandbox::Use::Excluded(_) | sandbox::Use::Unsandboxed => {
                return Ok(None);
            }
            sandbox::Use::Unavailable { refused: true } => {
                let support = sandbox::support();
                return Err(snap.templates.show(&super::texts::SandboxUnavailable {
                    mechanism: support.mechanism(),
                    problems: support.problems.join("; "),
                }));
            }
            sandbox::Use::Unavailable { refused: false } => {
                static WARNED: std::sync::Once = std::sync::Once::new();
                WARNED.call_once(|| {
                    tracing::warn!(
                        "sandbox.enabled is set but this machine cannot sandbox ({}): Bash runs unsandboxed",
                        sandbox::support().problems.join("; ")
                    );
                });
                return Ok(None);
            }
            sandbox::Use::Sandboxed => {}
        }
        let rules = match self.engine.grants.lock() {
            Ok(g) => g.merged(&snap.rules),
            Err(_) => None,
        };
        let rules = rules.as_ref().unwrap_or(&snap.rules);
        Ok(Some(Arc::new(sandbox::policy(
            settings,
            rules,
            &self.spec.cwd,
            &self.added_dirs(snap),
            sandbox::support(),
        ))))
    }

    /// Checks `input` against the tool's untrimmed schema; `Err` lists the
    /// problems, each naming the field.
    fn validate(
        &self,
        snap: &crate::snapshot::Snapshot,
        name: &str,
        input: &Value,
    ) -> Result<(), Vec<String>> {
        if let Some(t) = self.mcp_tool(name) {
            return t.validate(input);
        }
        if name == STRUCTURED_OUTPUT
            && let Some(structured) = &self.structured
        {
            return crate::tools::schema_issues(&structured.validator, input);
        }
        let Some(spec) = snap.tools.get(name) else {
            return Ok(());
        };
        let key = (snap.generation, name.to_string());
        let cached = self
            .engine
            .validators
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned());
        let validator = match cached {
            Some(v) => v,
            None => {
                let schema = spec.input_schema.untrimmed(&snap.model_aliases());
                match jsonschema::validator_for(&schema) {
                    Ok(v) => {
                        let v = Arc::new(v);
                        if let Ok(mut m) = self.engine.validators.lock() {
                            m.insert(key, Arc::clone(&v));
                        }
                        v
                    }
                    // A schema that does not compile cannot reject anything.
                    Err(_) => return Ok(()),
                }
            }
        };
        crate::tools::schema_issues(&validator, input)
    }
}

/// Sends a tool's own model request (WebFetch's reader, WebSearch's
/// search) and counts it: a `ModelResponse` event (cost and usage in
/// `result` lines) and a `side_usage` transcript line naming the tool.
#[derive(Clone)]
pub(super) struct SideCall {
    provider: crate::provider::Provider,
    engine: Arc<super::Engine>,
    agent_id: String,
    transcript: Arc<super::transcript::Transcript>,
    tool: &'static str,
}

impl SideCall {
    /// A side request of `agent_id`, recorded in `transcript`, for `tool`.
    pub(super) fn new(
        engine: Arc<super::Engine>,
        agent_id: &str,
        transcript: Arc<super::transcript::Transcript>,
        tool: &'static str,
    ) -> SideCall {
        SideCall {
            provider: engine.provider.clone(),
            engine,
            agent_id: agent_id.to_string(),
            transcript,
            tool,
        }
    }

    pub(super) async fn send(
        &self,
        request: &crate::message::ModelRequest,
    ) -> Result<crate::message::ModelResponse, crate::provider::ProviderProblem> {
        let started = std::time::Instant::now();
        let response = self
            .provider
            .send(request, &|_| {})
            .await
            .map_err(|e| crate::provider::ProviderProblem::from(&e))?;
        // Priced as the session's own requests are: by the model asked for.
        self.engine.emit(super::EngineEvent::ModelResponse {
            agent_id: self.agent_id.clone(),
            model: request.model.clone(),
            refused: false,
            usage: response.usage,
            api_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
        self.transcript.record(
            "side_usage",
            json!({"tool": self.tool, "model": request.model, "usage": response.usage}),
        );
        Ok(response)
    }
}

/// Answers `prompt` hooks: one request, without tools, to the hook's
/// `model` or the small model (`haiku`, as Claude Code's), with the
/// system text `hook_prompt_system`; counted as a side request.
pub(super) fn hook_model(side: SideCall) -> super::hooks::HookModel {
    Arc::new(move |model: Option<String>, text: String| {
        let side = side.clone();
        Box::pin(async move {
            let snap = side.engine.snapshot.load_full();
            let request = crate::message::ModelRequest {
                model: snap
                    .resolve_alias(model.as_deref().unwrap_or("haiku"))
                    .to_string(),
                system: Arc::from(snap.templates.show(&super::texts::HookPromptSystem {})),
                tools: Arc::from(Vec::new()),
                messages: vec![Arc::new(crate::message::Message::user_text(text))],
                max_tokens: 1024,
                sampling: Default::default(),
                server_tools: Vec::new(),
            };
            let response = side
                .send(&request)
                .await
                .map_err(|e| format!("the model request failed: {e:?}"))?;
            Ok(response.message.joined_text().unwrap_or_default())
        }) as futures_util::future::BoxFuture<'static, Result<String, String>>
    })
}

impl Session {
    /// Whether `input` is a Read, Write or Edit of a file inside this
    /// agent's memory folder (as written and as resolved).
    fn in_memory_dir(&self, tool: &str, input: &Value) -> bool {
        use crate::paths::{lexical, resolve};
        let (Some(dir), true) = (
            self.memory_dir(),
            crate::agent_tool::MEMORY_TOOLS.contains(&tool),
        ) else {
            return false;
        };
        let Some(path) = input.get("file_path").and_then(Value::as_str) else {
            return false;
        };
        let path = self.spec.cwd.join(path);
        lexical(&path).starts_with(lexical(dir)) && resolve(&path).starts_with(resolve(dir))
    }

    /// Whether an active skill's `allowed-tools` allow this call: the
    /// decision made again with those as allow rules beside the settings'
    /// (whose deny and ask rules still win).
    fn skill_allows(
        &self,
        snap: &crate::snapshot::Snapshot,
        name: &str,
        input: &Value,
        here: &Path,
        add_dirs: &[PathBuf],
        verdict: Option<&crate::permissions::HookVerdict>,
    ) -> bool {
        let Some(rules) = self.skill_rules(snap) else {
            return false;
        };
        matches!(
            crate::permissions::decide_with_hook(
                &rules,
                self.spec.mode,
                name,
                input,
                here,
                add_dirs,
                verdict
            ),
            Decision::Allow
        )
    }

    /// The settings' rules with the active skills' `allowed-tools` added
    /// as allow rules; `None` while no active skill lists any. Parsed once
    /// per set of active skills and snapshot generation, not per call.
    fn skill_rules(&self, snap: &crate::snapshot::Snapshot) -> Option<Arc<Rules>> {
        let allowed: Vec<String> = self
            .active_skills
            .lock()
            .ok()?
            .iter()
            .flat_map(|s| s.allowed_tools.iter().cloned())
            .collect();
        if allowed.is_empty() {
            return None;
        }
        let mut cache = self.skill_rules.lock().ok()?;
        if let Some((generation, key, rules)) = cache.as_ref()
            && *generation == snap.generation
            && *key == allowed
        {
            return Some(Arc::clone(rules));
        }
        let mut lists = snap.settings().permissions.clone();
        lists.allow.extend(allowed.iter().cloned());
        let rules = Arc::new(Rules::from_settings(&lists));
        *cache = Some((snap.generation, allowed, Arc::clone(&rules)));
        Some(rules)
    }

    pub(super) fn side_call(&self, tool: &'static str) -> SideCall {
        SideCall::new(
            Arc::clone(&self.engine),
            &self.spec.agent_id,
            Arc::clone(&self.transcript),
            tool,
        )
    }

    /// WebFetch's reader: one request, without tools, to the model that
    /// Turns a call's progress lines into `ToolProgress` events.
    fn progress_reporter(&self, tool_use_id: &str) -> crate::tools::ProgressFn {
        let engine = Arc::clone(&self.engine);
        let agent_id = self.spec.agent_id.clone();
        let tool_use_id = tool_use_id.to_string();
        Arc::new(move |message: String| {
            engine.emit(EngineEvent::ToolProgress {
                agent_id: agent_id.clone(),
                tool_use_id: tool_use_id.clone(),
                message,
            });
        })
    }

    /// Answers `prompt` hooks ([`hook_model`]) in this session.
    pub(super) fn hook_model(&self) -> super::hooks::HookModel {
        hook_model(self.side_call("hook"))
    }

    /// `web_fetch.model` names (the `haiku` alias of the active provider by
    /// default), with the page and prompt put in `web_fetch_prompt`.
    fn small_model(&self, snap: Arc<crate::snapshot::Snapshot>) -> crate::tools::SmallModel {
        let side = self.side_call("WebFetch");
        Arc::new(move |q: crate::tools::PageQuery| {
            let side = side.clone();
            let snap = Arc::clone(&snap);
            Box::pin(async move {
                let settings = &snap.settings().web_fetch;
                let text = snap
                    .templates
                    .render(&WebFetchPrompt {
                        url: q.url,
                        markdown: q.markdown,
                        prompt: q.prompt,
                    })
                    .map_err(|e| FetchProblem::Template { name: e.name })?;
                let request = crate::message::ModelRequest {
                    model: snap.resolve_alias(&settings.model).to_string(),
                    system: Arc::from(""),
                    tools: Arc::from(Vec::new()),
                    messages: vec![Arc::new(crate::message::Message::user_text(text))],
                    max_tokens: settings.max_tokens,
                    sampling: Default::default(),
                    server_tools: Vec::new(),
                };
                let response = side
                    .send(&request)
                    .await
                    .map_err(|provider| FetchProblem::Reader { provider })?;
                Ok(response.message.joined_text().unwrap_or_default())
            }) as futures_util::future::BoxFuture<'static, Result<String, FetchProblem>>
        })
    }
}

impl Session {
    /// WebSearch through Anthropic's server-side web search tool, when the
    /// provider is Anthropic's and `web_search.backend` allows it: one
    /// request (continued while the API pauses the turn) to the model
    /// `web_search.model` names, or this session's model.
    fn searcher(&self, snap: Arc<crate::snapshot::Snapshot>) -> Option<crate::tools::Searcher> {
        use crate::config::{ProviderKind, SearchBackend};
        let settings = &snap.settings();
        if settings.provider.kind != ProviderKind::Anthropic
            || settings.web_search.backend == SearchBackend::Searxng
        {
            return None;
        }
        let side = self.side_call("WebSearch");
        let model = match settings.web_search.model.trim() {
            "" => self.spec.model.clone(),
            m => snap.resolve_alias(m).to_string(),
        };
        Some(Arc::new(move |q: crate::tools::SearchQuery| {
            let (side, snap, model) = (side.clone(), Arc::clone(&snap), model.clone());
            Box::pin(async move {
                let ws = &snap.settings().web_search;
                let mut tool = serde_json::Map::new();
                tool.insert("type".into(), json!(ws.anthropic_tool));
                tool.insert("name".into(), json!("web_search"));
                tool.insert("max_uses".into(), json!(ws.max_uses.max(1)));
                if !q.allowed_domains.is_empty() {
                    tool.insert("allowed_domains".into(), json!(q.allowed_domains));
                }
                if !q.blocked_domains.is_empty() {
                    tool.insert("blocked_domains".into(), json!(q.blocked_domains));
                }
                let text = snap
                    .templates
                    .render(&super::texts::WebSearchPrompt {
                        query: q.query.clone(),
                    })
                    .map_err(|e| SearchProblem::Template { name: e.name })?;
                let mut messages = vec![Arc::new(crate::message::Message::user_text(text))];
                let mut content = Vec::new();
                // The API may pause a long turn; sending the paused message
                // back (exactly) lets it continue. A few rounds at most.
                for _ in 0..4 {
                    let request = crate::message::ModelRequest {
                        model: model.clone(),
                        system: Arc::from(""),
                        tools: Arc::from(Vec::new()),
                        messages: messages.clone(),
                        max_tokens: ws.max_tokens,
                        sampling: Default::default(),
                        server_tools: vec![Value::Object(tool.clone())],
                    };
                    let response = side
                        .send(&request)
                        .await
                        .map_err(|provider| SearchProblem::Provider { provider })?;
                    content.extend(response.message.content.iter().cloned());
                    if response.stop_reason != Some(crate::message::StopReason::PauseTurn) {
                        break;
                    }
                    messages.push(Arc::new(response.message));
                }
                Ok(crate::tools::web_search::anthropic_answer(&content))
            })
                as futures_util::future::BoxFuture<
                    'static,
                    Result<crate::tools::SearchAnswer, SearchProblem>,
                >
        }))
    }
}

fn summarize(input: &Value) -> String {
    let s = input.to_string();
    if s.chars().count() > 200 {
        format!("{}…", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}

/// Text blocks as tool-result content.
pub(super) fn text_content(texts: impl IntoIterator<Item = String>) -> Vec<ToolResultContent> {
    texts
        .into_iter()
        .map(|text| ToolResultContent::Text { text })
        .collect()
}

/// The first non-empty line of `text`, cut to at most `max` characters (for
/// one-line summaries of an error).
fn first_line(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    match line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}
