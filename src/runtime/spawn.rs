//! Starting a sub-agent from an Agent call: route, build the child session
//! (named agent, general-purpose or fork), run it, format its result.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use serde_json::{Value, json};

use crate::agent_tool::{
    AgentInput, ModelSource, ResolvedModel, Route, RouteError, fork_messages, has_fork_boilerplate,
    resolve_fork_model, resolve_model, route, tool_pool,
};
use crate::catalog::{FORK_AGENT, ONE_SHOT_AGENTS};
use crate::config::PermissionMode;
use crate::message::{History, Message, ToolResultContent, Usage};
use crate::tools::permissions::Rules;

use super::exec::text_content;
use super::session::{Frozen, Session, SessionSpec, Turn};
use super::transcript::{Transcript, write_json_atomic};
use super::{EngineEvent, new_agent_id, total_tokens};

impl Session {
    /// Handles one Agent call. `Ok` is the result content and the child's
    /// usage; `Err` is the error text for an `is_error` result.
    pub(super) async fn agent_call(
        &self,
        turn: &Turn,
        tool_use_id: &str,
        input: Value,
    ) -> Result<(Vec<ToolResultContent>, Usage), String> {
        let snap = &turn.snap;
        let render = |template: &str, ctx: Value| -> String {
            snap.templates
                .render(template, &ctx)
                .map_or_else(|e| e.to_string(), |t| t.trim_end().to_string())
        };
        let input: AgentInput =
            serde_json::from_value(input).map_err(|e| format!("Invalid Agent input: {e}"))?;
        let kind = self.spec.kind;
        let caller_is_fork_child = self.spec.started_by_fork || has_fork_boilerplate(&self.history);
        let routed = route(&input, snap.fork_effective(kind), caller_is_fork_child);
        let settings = snap.settings();
        let env_model = self
            .engine
            .env_var("CADRE_SUBAGENT_MODEL")
            .or_else(|| self.engine.env_var("CLAUDE_CODE_SUBAGENT_MODEL"));
        let agent_id = new_agent_id();

        let (spec, history, description_type) = match routed {
            Err(RouteError::ForkInFork) => return Err(render("error_fork_in_fork", json!({}))),
            Ok(Route::Fork) => {
                let def = snap
                    .catalog
                    .get(FORK_AGENT)
                    .cloned()
                    .ok_or_else(|| "the fork agent is not defined".to_string())?;
                let ResolvedModel { model, source } =
                    resolve_fork_model(env_model, &self.spec.model, &settings.models);
                let directive = render("fork_child", json!({"directive": input.prompt}));
                let placeholder = render("fork_placeholder", json!({}));
                let history: History = fork_messages(
                    &turn.request.messages,
                    &turn.assistant,
                    &placeholder,
                    directive,
                    None,
                );
                let frozen = Frozen {
                    system: Arc::clone(&turn.request.system),
                    tools: Arc::clone(&turn.request.tools),
                    tool_names: Arc::clone(&turn.tool_names),
                    sampling: turn.request.sampling.clone(),
                    max_tokens: turn.request.max_tokens,
                };
                let spec = SessionSpec {
                    agent_id: agent_id.clone(),
                    parent_agent_id: Some(self.spec.agent_id.clone()),
                    max_turns: def.max_turns.unwrap_or(settings.agents.default_max_turns),
                    def: Some(def),
                    is_main: false,
                    model,
                    kind,
                    mode: PermissionMode::Bubble,
                    depth: self.spec.depth + 1,
                    frozen: Some(frozen),
                    started_by_fork: true,
                    cwd: self.spec.cwd.clone(),
                    tool_names: turn.tool_names.to_vec(),
                };
                (spec, history, (FORK_AGENT.to_string(), source))
            }
            Ok(Route::Named(agent_type)) => {
                let Some(def) = snap.visible_agent(&agent_type, kind).cloned() else {
                    let available: Vec<&str> = snap
                        .visible_agents(kind)
                        .iter()
                        .map(|d| d.name.as_str())
                        .collect();
                    return Err(render(
                        "error_unknown_agent",
                        json!({"agent_type": agent_type, "available": available.join(", ")}),
                    ));
                };
                let rules = Rules::from_settings(&settings.permissions);
                if let Some(rule) = rules.denied_agent_type(&def.name) {
                    let source = snap
                        .config
                        .path
                        .as_ref()
                        .map_or_else(|| "settings".to_string(), |p| p.display().to_string());
                    return Err(render(
                        "error_denied_agent",
                        json!({"agent_type": def.name, "rule": rule, "source": source}),
                    ));
                }
                let depth = self.spec.depth + 1;
                if depth > settings.agents.max_depth {
                    return Err(render(
                        "error_max_depth",
                        json!({"agent_type": def.name, "max_depth": settings.agents.max_depth}),
                    ));
                }
                if let Err(e) = self
                    .engine
                    .mcp
                    .wait_required(
                        &def.required_mcp_servers,
                        Duration::from_millis(settings.agents.required_mcp_wait_ms),
                        Duration::from_millis(settings.agents.required_mcp_poll_ms),
                    )
                    .await
                {
                    return Err(render(
                        "error_mcp_required",
                        json!({"agent_type": def.name, "missing": e.missing.join(", "), "available": e.available.join(", ")}),
                    ));
                }
                let ResolvedModel { model, source } = resolve_model(
                    env_model,
                    input.model.as_deref(),
                    def.model.as_deref(),
                    &self.spec.model,
                    &settings.models,
                );
                let available = self.engine.available_tools(snap);
                let interactive_only =
                    |n: &str| snap.tools.get(n).is_some_and(|s| s.interactive_only);
                let tool_names = tool_pool(
                    &available,
                    interactive_only,
                    &def,
                    depth,
                    settings.agents.max_depth,
                );
                let mode = match self.spec.mode {
                    PermissionMode::BypassPermissions | PermissionMode::AcceptEdits => {
                        self.spec.mode
                    }
                    _ => def.permission_mode.unwrap_or(PermissionMode::AcceptEdits),
                };
                let spec = SessionSpec {
                    agent_id: agent_id.clone(),
                    parent_agent_id: Some(self.spec.agent_id.clone()),
                    max_turns: def.max_turns.unwrap_or(settings.agents.default_max_turns),
                    is_main: false,
                    model,
                    kind,
                    mode,
                    depth,
                    frozen: None,
                    started_by_fork: false,
                    cwd: self.spec.cwd.clone(),
                    tool_names,
                    def: Some(Arc::clone(&def)),
                };
                let history: History = vec![Arc::new(Message::user_text(input.prompt.clone()))];
                (spec, history, (def.name.clone(), source))
            }
        };
        let (agent_type, model_source) = description_type;
        self.run_child(
            spec,
            history,
            &agent_type,
            model_source,
            &input,
            tool_use_id,
        )
        .await
    }

    /// Runs the child to its end. Returns a boxed future: the call graph
    /// is recursive (a child may start children), and naming the future's
    /// type here is what lets the compiler see that it is `Send`.
    fn run_child<'a>(
        &'a self,
        spec: SessionSpec,
        history: History,
        agent_type: &'a str,
        model_source: ModelSource,
        input: &'a AgentInput,
        tool_use_id: &'a str,
    ) -> BoxFuture<'a, Result<(Vec<ToolResultContent>, Usage), String>> {
        Box::pin(async move {
            let engine = Arc::clone(&self.engine);
            let snap = engine.snapshot.load_full();
            let agent_id = spec.agent_id.clone();
            let transcript = match &engine.session_dir {
                Some(dir) => {
                    let agents = dir.join("agents");
                    write_json_atomic(
                        &agents.join(format!("agent-{agent_id}.meta.json")),
                        &json!({
                            "agent_id": agent_id,
                            "parent_agent_id": self.spec.agent_id,
                            "agent_type": agent_type,
                            "description": input.description,
                            "tool_use_id": tool_use_id,
                            "model": spec.model,
                            "model_source": model_source,
                            "tools": spec.tool_names,
                            "permission_mode": spec.mode,
                            "fork": spec.started_by_fork,
                            "worktree": null,
                        }),
                    );
                    Transcript::open(
                        agents.join(format!("agent-{agent_id}.jsonl")),
                        &agent_id,
                        Some(&self.spec.agent_id),
                    )
                }
                None => Transcript::disabled(&agent_id, Some(&self.spec.agent_id)),
            };
            let transcript = Arc::new(transcript);
            transcript.record(
            "spawn",
            json!({"agent_type": agent_type, "description": input.description, "model": spec.model, "model_source": model_source, "tools": spec.tool_names}),
        );
            engine.emit(EngineEvent::SubagentStart {
                agent_id: agent_id.clone(),
                parent_agent_id: self.spec.agent_id.clone(),
                agent_type: agent_type.to_string(),
                description: input.description.clone(),
                model: spec.model.clone(),
                fork: spec.started_by_fork,
            });
            // Every message of the child's starting history goes to its transcript.
            for m in &history {
                transcript.message(m);
            }
            let mut child = Session::new(
                Arc::clone(&engine),
                spec,
                history,
                Arc::clone(&transcript),
                self.cancel.child_token(),
            );
            // An agent's inline MCP servers live exactly as long as its session.
            let scoped = match child
                .spec()
                .def
                .as_ref()
                .filter(|_| !child.spec().started_by_fork)
            {
                Some(def) if !def.mcp_servers.is_empty() => Some(
                    engine
                        .mcp
                        .start_scoped(&agent_id, &def.name, &def.mcp_servers, &child.spec().cwd)
                        .await,
                ),
                _ => None,
            };
            let result = child.run().await;
            if let Some(s) = scoped {
                s.stop().await;
            }
            let render = |template: &str, ctx: Value| -> String {
                snap.templates
                    .render(template, &ctx)
                    .map_or_else(|e| e.to_string(), |t| t.trim_end().to_string())
            };
            match result {
                Ok(outcome) => {
                    let total = total_tokens(&outcome.last_usage, &outcome.usage);
                    transcript.record("result", json!({"status": "completed", "total_tokens": total, "tool_uses": outcome.tool_uses, "duration_ms": outcome.duration_ms}));
                    engine.emit(EngineEvent::SubagentEnd {
                        agent_id: agent_id.clone(),
                        status: "completed".into(),
                        tool_uses: outcome.tool_uses,
                        duration_ms: outcome.duration_ms,
                        total_tokens: total,
                    });
                    let mut texts = outcome
                        .final_text
                        .clone()
                        .unwrap_or_else(|| vec![render("result_empty", json!({}))]);
                    if !ONE_SHOT_AGENTS.contains(&agent_type) {
                        texts.push(
                            render(
                                "result_trailer",
                                json!({
                                    "agent_id": agent_id,
                                    "worktree_path": null,
                                    "worktree_branch": null,
                                    "total_tokens": total,
                                    "tool_uses": outcome.tool_uses,
                                    "duration_ms": outcome.duration_ms,
                                }),
                            )
                            .trim_end()
                            .to_string(),
                        );
                    }
                    Ok((text_content(texts), outcome.usage))
                }
                Err(e) => {
                    transcript.record(
                        "result",
                        json!({"status": "failed", "error": e.to_string()}),
                    );
                    engine.emit(EngineEvent::SubagentEnd {
                        agent_id,
                        status: "failed".into(),
                        tool_uses: 0,
                        duration_ms: 0,
                        total_tokens: 0,
                    });
                    Err(render(
                        "error_subagent_failed",
                        json!({"description": input.description, "error": e.to_string()}),
                    ))
                }
            }
        })
    }
}
