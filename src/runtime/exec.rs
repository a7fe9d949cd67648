//! Running one turn's tool calls: pool check, input validation, the
//! permission decision, then the tool. Read-only calls that follow each
//! other run concurrently; any other call runs alone, in order. Every
//! tool_use gets exactly one tool_result, in the order of the calls.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::join_all;
use serde_json::Value;

use crate::agent_tool::AGENT_TOOL;
use crate::message::{ContentBlock, ToolResultContent, Usage};
use crate::tools::permissions::{Decision, Rules, decide_in, explain_with_hook};
use crate::tools::spec::untrimmed_schema;
use crate::tools::{PathFilter, Tool, ToolContext, ToolOutput};

use super::EngineEvent;
use super::hooks::PreTool;
use super::session::{Session, Turn};
use super::texts::{
    InvalidInput, InvalidJson, NoSuchTool, PermissionDenied, RepeatedCall, WebFetchPrompt,
};

/// What one call produced, plus the usage of any child it ran.
pub(super) struct CallResult {
    pub block: ContentBlock,
    pub child_usage: Usage,
}

impl CallResult {
    fn text(id: &str, text: impl Into<String>, is_error: bool) -> Self {
        CallResult {
            block: ContentBlock::tool_result(id, text, is_error),
            child_usage: Usage::default(),
        }
    }
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

    /// With `agents.repeated_call_limit` set: how many assistant turns in
    /// a row, just before this one, made this very call (same tool, same
    /// input), when that reaches the limit; `None` when the call may run.
    /// Small models tend to repeat a call whose result they already have
    /// instead of answering; the guard answers for the tool instead.
    fn repeated_streak(
        &self,
        snap: &crate::snapshot::Snapshot,
        name: &str,
        input: &Value,
    ) -> Option<u32> {
        let limit = snap.settings().agents.repeated_call_limit;
        if limit == 0 {
            return None;
        }
        // The last assistant message is this turn's own; count the ones
        // before it that made the same call, stopping at the first that
        // did not.
        let streak = self
            .history
            .iter()
            .rev()
            .filter(|m| m.role == crate::message::Role::Assistant)
            .skip(1)
            .take_while(|m| m.tool_uses().any(|(_, n, i)| n == name && i == input))
            .count();
        let streak = u32::try_from(streak).unwrap_or(u32::MAX);
        (streak >= limit).then_some(streak)
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
        });
        result
    }

    async fn call_tool_inner(
        &self,
        turn: &Turn,
        id: &str,
        name: &str,
        input: Value,
        invalid_json: Option<&str>,
    ) -> CallResult {
        let snap = &turn.snap;
        let error = |text: String| CallResult::text(id, text, true);
        let no_such_tool = || {
            error(snap.templates.show(&NoSuchTool {
                name: name.to_string(),
            }))
        };
        if !turn.tool_names.iter().any(|n| n == name) {
            return no_such_tool();
        }
        if let Some(err) = invalid_json {
            return error(snap.templates.show(&InvalidJson {
                tool: name.to_string(),
                error: err.to_string(),
            }));
        }
        if let Some(turns) = self.repeated_streak(snap, name, &input) {
            return error(snap.templates.show(&RepeatedCall {
                tool: name.to_string(),
                turns,
            }));
        }
        let invalid = |issues: Vec<String>| {
            error(snap.templates.show(&InvalidInput {
                tool: name.to_string(),
                plural: issues.len() > 1,
                issues: issues.join("\n"),
            }))
        };
        if let Err(issues) = self.validate(snap, name, &input) {
            return invalid(issues);
        }
        let (verdict, input) = match self.pre_tool_hooks(snap, id, name, &input).await {
            PreTool::Blocked(text) => return CallResult::text(id, text, true),
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
                    return invalid(issues);
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
        };
        let add_dirs: Vec<PathBuf> = permissions
            .additional_directories
            .iter()
            .chain(&self.engine.add_dirs)
            .chain(&session_dirs)
            .map(|d| self.spec.cwd.join(d))
            .collect();
        let mut input = input;
        let explained = explain_with_hook(
            rules,
            mode,
            name,
            &input,
            &self.spec.cwd,
            &add_dirs,
            verdict.as_ref(),
        );
        // The rule that decided and where it was written, for the text.
        let (rule, origin) = match &explained.rule {
            Some(c) => (Some(c.rule.as_str()), c.origin.as_deref()),
            None => (None, None),
        };
        match explained.decision {
            Decision::Allow => {}
            Decision::Deny { reason } => {
                return error(snap.templates.show(&PermissionDenied {
                    tool: name.to_string(),
                    reason,
                    rule: rule.map(str::to_string),
                    origin: origin.map(str::to_string),
                    asked: false,
                    interactive: false,
                    message: None,
                }));
            }
            Decision::Ask { reason } => {
                let answer = match &self.engine.asker {
                    Some(ask) => {
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
                            reason: reason.clone(),
                        })
                        .await
                    }
                    None => super::AskAnswer::from(false),
                };
                if !answer.allow {
                    return error(snap.templates.show(&PermissionDenied {
                        tool: name.to_string(),
                        reason,
                        rule: rule.map(str::to_string),
                        origin: origin.map(str::to_string),
                        asked: true,
                        interactive: self.engine.asker.is_some(),
                        message: answer.message,
                    }));
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
                        return invalid(issues);
                    }
                    if let Decision::Deny { reason } =
                        decide_in(rules, mode, name, &updated, &self.spec.cwd, &add_dirs)
                    {
                        return error(snap.templates.show(&PermissionDenied {
                            tool: name.to_string(),
                            reason,
                            rule: None,
                            origin: None,
                            asked: false,
                            interactive: false,
                            message: None,
                        }));
                    }
                    input = updated;
                }
            }
        }
        if name == AGENT_TOOL {
            let mut result = match self.agent_call(turn, id, input.clone()).await {
                Ok((content, usage)) => CallResult {
                    block: ContentBlock::ToolResult {
                        tool_use_id: id.into(),
                        content,
                        is_error: false,
                    },
                    child_usage: usage,
                },
                Err(text) => return CallResult::text(id, text, true),
            };
            self.post_tool_hooks(snap, name, &input, &mut result.block)
                .await;
            return result;
        }
        if name == super::todos::TODO_WRITE || name == super::todos::SKILL {
            let done = if name == super::todos::SKILL {
                self.skill_call(snap, &input)
            } else {
                self.todo_write(snap, input.clone())
            };
            let (text, is_error) = match done {
                Ok(t) => (t, false),
                Err(t) => (t, true),
            };
            let mut result = CallResult::text(id, text, is_error);
            self.post_tool_hooks(snap, name, &input, &mut result.block)
                .await;
            return result;
        }
        if super::RUNTIME_TOOLS.contains(&name) {
            return match self.manage_call(snap, name, input).await {
                Ok(text) => CallResult::text(id, text, false),
                Err(text) => CallResult::text(id, text, true),
            };
        }
        let tool: Option<Arc<dyn Tool>> = match self.engine.tools.get(name) {
            Some(t) => Some(Arc::clone(t)),
            None => match self.mcp_tool(name) {
                Some(t) => Some(t as Arc<dyn Tool>),
                None => self.resource_tool(name).map(|t| t as Arc<dyn Tool>),
            },
        };
        let Some(tool) = tool else {
            return no_such_tool();
        };
        // Glob and Grep leave out what the rules forbid them to read.
        let hidden: Option<PathFilter> = matches!(name, "Glob" | "Grep").then(|| {
            let (tool, cwd) = (name.to_string(), self.spec.cwd.clone());
            let rules = Arc::clone(&snap.rules);
            Arc::new(move |p: &Path| rules.hides(&tool, p, &cwd)) as PathFilter
        });
        let ctx = ToolContext {
            cwd: self.spec.cwd.clone(),
            cancel: self.cancel.child_token(),
            env: std::sync::Arc::new(snap.settings().child_env()),
            hidden,
            web_fetch: snap.settings().web_fetch.clone(),
            small_model: (name == "WebFetch").then(|| self.small_model(Arc::clone(snap))),
            progress: Some(self.progress_reporter(id)),
        };
        let out: ToolOutput = tool.call(input.clone(), &ctx).await;
        let mut result = CallResult::text(id, out.render(&snap.templates), out.is_error);
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
        self.post_tool_hooks(snap, name, &input, &mut result.block)
            .await;
        result
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
                let schema = untrimmed_schema(&spec.input_schema, &snap.model_aliases());
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

impl Session {
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

    /// `web_fetch.model` names (the `haiku` alias of the active provider by
    /// default), with the page and prompt put in `web_fetch_prompt`.
    fn small_model(&self, snap: Arc<crate::snapshot::Snapshot>) -> crate::tools::SmallModel {
        let provider = self.engine.provider.clone();
        Arc::new(move |q: crate::tools::PageQuery| {
            let provider = provider.clone();
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
                    .map_err(|e| e.to_string())?;
                let request = crate::message::ModelRequest {
                    model: snap.resolve_alias(&settings.model).to_string(),
                    system: Arc::from(""),
                    tools: Arc::from(Vec::new()),
                    messages: vec![Arc::new(crate::message::Message::user_text(text))],
                    max_tokens: settings.max_tokens,
                    sampling: Default::default(),
                };
                let response = provider
                    .send(&request, &|_| {})
                    .await
                    .map_err(|e| e.to_string())?;
                let texts: Vec<&str> = response
                    .message
                    .content
                    .iter()
                    .filter_map(ContentBlock::as_text)
                    .collect();
                Ok(texts.join("\n"))
            }) as futures_util::future::BoxFuture<'static, Result<String, String>>
        })
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
