//! Maps engine events to the headless protocol ([`super::wire`]) and keeps
//! the session's accounts: tokens and cost per model, API time, and the
//! `--max-budget-usd` stop.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::output::print_line;
use super::wire::{self, Output, WireUsage};
use crate::config::ModelPrice;
use crate::message::{ContentBlock, Role, ToolResultContent, Usage};
use crate::runtime::{EngineEvent, EventSink};

/// Writes one protocol line to stdout.
pub fn send(out: &Output) {
    if let Ok(line) = serde_json::to_string(out) {
        print_line(&line);
    }
}

/// What the emitter prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Print {
    /// Nothing (text and json output): only the accounts are kept.
    Nothing,
    /// Messages and extras (stream-json).
    Messages,
    /// Messages, extras and `stream_event` partials.
    Partials,
}

/// A partial message being streamed: its id and the content block open
/// in it.
struct Streaming {
    id: String,
    /// The open block's index and kind (`text`, `thinking`).
    block: Option<(u64, &'static str)>,
    /// Blocks started so far.
    blocks: u64,
    /// Characters of thinking in the open block, for the estimate.
    thinking_chars: u64,
    /// The open block's text (or thinking) and signature so far: its own
    /// `assistant` message when it ends.
    text: String,
    signature: String,
}

/// How a streamed message ended, for its last partials.
struct Ended<'a> {
    stop: &'static str,
    model: &'a str,
    usage: &'a Usage,
    line_uuid: Option<&'a String>,
}

/// A sub-agent started by an Agent call, for the call's typed result.
struct AgentCall {
    agent_id: String,
    agent_type: String,
    prompt: String,
    model: String,
    usage: Usage,
    /// How it ended: status, tool uses, duration, tokens.
    ended: Option<(String, u32, u64, u64)>,
}

/// What the result's per-model usage says of a model besides its counts:
/// its window, the output cadre asks for, and who serves it.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    compact: crate::config::CompactSettings,
    max_tokens: u64,
    provider: &'static str,
}

impl Limits {
    pub fn of(settings: &crate::config::Settings) -> Self {
        Limits {
            compact: settings.compact.clone(),
            max_tokens: u64::from(settings.provider.max_tokens),
            provider: crate::provider::api_provider(settings.provider.kind),
        }
    }
}

/// A model id without its date suffix (`claude-sonnet-4-5-20250929` →
/// `claude-sonnet-4-5`).
fn canonical_model(model: &str) -> String {
    match model.rsplit_once('-') {
        Some((head, date)) if date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()) => {
            head.to_string()
        }
        _ => model.to_string(),
    }
}

/// What each model counted since the previous result.
pub type SinceLast = BTreeMap<String, wire::ModelUsage>;

/// `now` less `before`, model by model (the counts; the descriptions as now).
fn usage_since(
    now: &BTreeMap<String, wire::ModelUsage>,
    before: &BTreeMap<String, wire::ModelUsage>,
) -> BTreeMap<String, wire::ModelUsage> {
    now.iter()
        .filter_map(|(model, n)| {
            let b = before.get(model).cloned().unwrap_or_default();
            let d = wire::ModelUsage {
                input_tokens: n.input_tokens.saturating_sub(b.input_tokens),
                output_tokens: n.output_tokens.saturating_sub(b.output_tokens),
                cache_read_input_tokens: n
                    .cache_read_input_tokens
                    .saturating_sub(b.cache_read_input_tokens),
                cache_creation_input_tokens: n
                    .cache_creation_input_tokens
                    .saturating_sub(b.cache_creation_input_tokens),
                web_search_requests: n.web_search_requests.saturating_sub(b.web_search_requests),
                cost_usd: (n.cost_usd - b.cost_usd).max(0.0),
                thinking_tokens: n.thinking_tokens.saturating_sub(b.thinking_tokens),
                cache_creation_ephemeral5m_input_tokens: n
                    .cache_creation_ephemeral5m_input_tokens
                    .saturating_sub(b.cache_creation_ephemeral5m_input_tokens),
                cache_creation_ephemeral1h_input_tokens: n
                    .cache_creation_ephemeral1h_input_tokens
                    .saturating_sub(b.cache_creation_ephemeral1h_input_tokens),
                ..n.clone()
            };
            let counted = d.input_tokens
                + d.output_tokens
                + d.cache_read_input_tokens
                + d.cache_creation_input_tokens
                + d.web_search_requests;
            (counted > 0).then(|| (model.clone(), d))
        })
        .collect()
}

/// The session's accounts and the state the mapping needs.
struct State {
    session_id: String,
    main_model: String,
    /// agent id → the Agent tool call that started it.
    parents: HashMap<String, String>,
    /// agent id → its model.
    models: HashMap<String, String>,
    /// agent id → the usage of its last response, for its next message.
    pending_usage: HashMap<String, (String, Usage)>,
    /// The main session's last response's usage: how full its context is.
    main_last: Option<Usage>,
    /// Agents whose partial message is open.
    streaming: HashMap<String, Streaming>,
    /// agent id → the text of its last assistant message that had text
    /// (a task's `summary`).
    last_text: HashMap<String, String>,
    /// agent id → the id of its run, on each of its task events.
    runs: HashMap<String, String>,
    /// Tool calls without their result yet: id → (tool, input), for a
    /// denial's record.
    tool_inputs: HashMap<String, (String, Value)>,
    /// The calls refused since the last result.
    denials: Vec<wire::PermissionDenial>,
    /// Tool call id → its result as data, until its `user` message.
    typed: HashMap<String, Option<Value>>,
    /// Tool call id → (accepted, who decided, what decided), until its
    /// `user` message.
    decisions: HashMap<String, (bool, &'static str, Option<&'static str>)>,
    /// Agent call id → the sub-agent it started.
    agent_calls: HashMap<String, AgentCall>,
    /// Replies stopped by the model's safety systems since the last result.
    safety_stops: u64,
    /// The ids of the main session's messages streamed since the last
    /// result (partial messages).
    begun: Vec<String>,
    /// Sub-agents' text and thinking go out too (the SDKs'
    /// `forwardSubagentText`); by default only their tool calls and
    /// results do, as in Claude Code.
    forward_subagent_text: bool,
    /// Tool calls running: id → (tool name, when it started), for
    /// `tool_progress`.
    calls: HashMap<String, (String, std::time::Instant)>,
    prices: BTreeMap<String, ModelPrice>,
    limits: Limits,
    model_usage: BTreeMap<String, wire::ModelUsage>,
    /// `model_usage` when the last result was sent.
    model_usage_at_result: BTreeMap<String, wire::ModelUsage>,
    /// Results sent so far.
    results: u64,
    subagents: wire::SubagentStats,
    /// agent id → what its messages say of it.
    subagent_of: HashMap<String, wire::SubagentOf>,
    usage: Usage,
    api_ms: u64,
    cost: f64,
    budget: Option<f64>,
    over_budget: bool,
    /// Cancels the prompt being run when the budget is spent.
    current: Option<CancellationToken>,
}

/// Shared by the event sink and the runner.
#[derive(Clone)]
pub struct Emitter {
    state: Arc<Mutex<State>>,
    print: Print,
}

/// The accounts at one moment, for a result.
#[derive(Debug, Clone)]
pub struct Accounts {
    pub usage: Usage,
    pub api_ms: u64,
    pub cost: f64,
    pub model_usage: BTreeMap<String, wire::ModelUsage>,
    pub over_budget: bool,
}

impl Emitter {
    pub fn new(
        print: Print,
        session_id: String,
        main_model: String,
        prices: BTreeMap<String, ModelPrice>,
        budget: Option<f64>,
    ) -> Self {
        Emitter {
            state: Arc::new(Mutex::new(State {
                session_id,
                main_model,
                parents: HashMap::new(),
                models: HashMap::new(),
                pending_usage: HashMap::new(),
                main_last: None,
                streaming: HashMap::new(),
                forward_subagent_text: false,
                last_text: HashMap::new(),
                runs: HashMap::new(),
                tool_inputs: HashMap::new(),
                denials: Vec::new(),
                typed: HashMap::new(),
                decisions: HashMap::new(),
                agent_calls: HashMap::new(),
                safety_stops: 0,
                begun: Vec::new(),
                calls: HashMap::new(),
                prices,
                limits: Limits::default(),
                model_usage: BTreeMap::new(),
                model_usage_at_result: BTreeMap::new(),
                results: 0,
                subagents: wire::SubagentStats::default(),
                subagent_of: HashMap::new(),
                usage: Usage::default(),
                api_ms: 0,
                cost: 0.0,
                budget,
                over_budget: false,
                current: None,
            })),
            print,
        }
    }

    /// Whether sub-agents' text and thinking blocks are sent (the SDKs'
    /// `forwardSubagentText`, from `initialize`).
    pub fn forward_subagent_text(&self, on: bool) {
        if let Ok(mut s) = self.state.lock() {
            s.forward_subagent_text = on;
        }
    }

    pub fn prints(&self) -> bool {
        self.print != Print::Nothing
    }

    pub fn sink(&self) -> EventSink {
        let me = self.clone();
        Arc::new(move |e: &EngineEvent| me.on_event(e))
    }

    /// What is known once the session is set up: its id, the main model
    /// and the price table.
    pub fn configure(
        &self,
        session_id: &str,
        main_model: &str,
        settings: &crate::config::Settings,
    ) {
        if let Ok(mut s) = self.state.lock() {
            session_id.clone_into(&mut s.session_id);
            main_model.clone_into(&mut s.main_model);
            s.prices = settings.prices.clone();
            s.limits = Limits::of(settings);
            s.main_last = None;
        }
    }

    /// A result is being sent: its index, what each model counted since
    /// the previous one, and the sub-agents so far.
    pub fn next_result(&self) -> (u64, Option<SinceLast>, wire::SubagentStats) {
        match self.state.lock() {
            Ok(mut s) => {
                let index = s.results;
                s.results += 1;
                // In a stream of messages only, as Claude Code.
                let since = (self.print != Print::Nothing)
                    .then(|| usage_since(&s.model_usage, &s.model_usage_at_result));
                s.model_usage_at_result = s.model_usage.clone();
                (index, since, s.subagents.clone())
            }
            Err(_) => (0, None, wire::SubagentStats::default()),
        }
    }

    /// The tool calls refused since the last call (a result's
    /// `permission_denials`).
    pub fn take_denials(&self) -> Vec<wire::PermissionDenial> {
        self.state
            .lock()
            .map(|mut s| std::mem::take(&mut s.denials))
            .unwrap_or_default()
    }

    /// What a result counts of its prompt: the replies the model's safety
    /// systems stopped, and (partial messages) the ids of the main
    /// session's messages streamed.
    pub fn take_prompt_marks(&self) -> (u64, Option<Vec<String>>) {
        match self.state.lock() {
            Ok(mut s) => {
                let begun = std::mem::take(&mut s.begun);
                (
                    std::mem::take(&mut s.safety_stops),
                    (self.print == Print::Partials).then_some(begun),
                )
            }
            Err(_) => (0, None),
        }
    }

    /// The main session's model and the usage of its last response
    /// (`get_context_usage`); `None` before the first response.
    pub fn main_context(&self) -> (String, Option<Usage>) {
        match self.state.lock() {
            Ok(s) => (s.main_model.clone(), s.main_last),
            Err(_) => (String::new(), None),
        }
    }

    pub fn set_main_model(&self, model: &str) {
        if let Ok(mut s) = self.state.lock() {
            model.clone_into(&mut s.main_model);
        }
    }

    /// The token that cancels the prompt now running (`None` between prompts).
    pub fn set_current(&self, token: Option<CancellationToken>) {
        if let Ok(mut s) = self.state.lock() {
            s.current = token;
        }
    }

    pub fn accounts(&self) -> Accounts {
        match self.state.lock() {
            Ok(s) => Accounts {
                usage: s.usage,
                api_ms: s.api_ms,
                cost: s.cost,
                model_usage: s.model_usage.clone(),
                over_budget: s.over_budget,
            },
            Err(_) => Accounts {
                usage: Usage::default(),
                api_ms: 0,
                cost: 0.0,
                model_usage: BTreeMap::new(),
                over_budget: false,
            },
        }
    }

    fn on_event(&self, event: &EngineEvent) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        let out = s.map(event, self.print);
        drop(s);
        for o in out {
            send(&o);
        }
    }
}

use crate::message::{cost_of, price_of};

/// An Agent call's typed result, once its sub-agent ended.
fn agent_result(call: AgentCall, content: &[ToolResultContent]) -> Option<Value> {
    let (status, tool_uses, duration_ms, total_tokens) = call.ended?;
    let status = match status.as_str() {
        "completed" => "completed",
        "killed" | "cancelled" | "stopped" => "stopped",
        _ => "failed",
    };
    serde_json::to_value(wire::AgentToolResult {
        status,
        prompt: call.prompt,
        agent_id: call.agent_id,
        agent_type: call.agent_type,
        content: serde_json::to_value(content).unwrap_or(Value::Null),
        resolved_model: call.model,
        total_duration_ms: duration_ms,
        total_tokens,
        total_tool_use_count: tool_uses,
        usage: result_usage(&call.usage),
    })
    .ok()
}

/// A result's `usage`.
/// The engine's events go to the emitter's accounts, and to the progress
/// lines when there are some.
pub fn event_sink(emitter: &Emitter, progress: Option<&Arc<super::output::Progress>>) -> EventSink {
    match progress {
        Some(p) => {
            let bars = p.sink();
            let accounts = emitter.sink();
            Arc::new(move |e: &EngineEvent| {
                accounts(e);
                bars(e);
            })
        }
        None => emitter.sink(),
    }
}

/// A message's content of one text block, as a user message carries it.
pub fn text_content(text: &str) -> Value {
    serde_json::to_value([ContentBlock::text(text)]).unwrap_or(Value::Null)
}

pub fn result_usage(u: &Usage) -> wire::ResultUsage {
    wire::ResultUsage {
        tokens: wire_usage(u),
        output_tokens_details: wire::OutputTokensDetails {
            thinking_tokens: u.thinking_tokens,
        },
        server_tool_use: wire::ServerToolUse {
            web_search_requests: u.web_search_requests,
            web_fetch_requests: u.web_fetch_requests,
        },
        service_tier: u
            .service_tier
            .map_or("standard", crate::message::ServiceTier::as_str),
        inference_geo: "",
        cache_creation: wire::CacheCreation {
            ephemeral_1h_input_tokens: u.cache_creation_1h_input_tokens,
            ephemeral_5m_input_tokens: u.cache_creation_5m_input_tokens,
        },
    }
}

pub fn wire_usage(u: &Usage) -> WireUsage {
    WireUsage {
        input_tokens: u.input_tokens,
        cache_creation_input_tokens: u.cache_creation_input_tokens,
        cache_read_input_tokens: u.cache_read_input_tokens,
        output_tokens: u.output_tokens,
    }
}

impl State {
    fn parent_of(&self, agent_id: &str) -> Option<String> {
        self.parents.get(agent_id).cloned()
    }

    fn model_of(&self, agent_id: &str) -> String {
        if agent_id == "main" {
            return self.main_model.clone();
        }
        self.models
            .get(agent_id)
            .cloned()
            .unwrap_or_else(|| self.main_model.clone())
    }

    fn account(&mut self, model: &str, usage: &Usage, api_ms: u64) {
        let price = price_of(&self.prices, model);
        let cost = cost_of(price, usage);
        self.usage.add(usage);
        self.api_ms = self.api_ms.saturating_add(api_ms);
        self.cost += cost;
        let limits = &self.limits;
        let m = self
            .model_usage
            .entry(model.to_string())
            .or_insert_with(|| wire::ModelUsage {
                context_window: limits.compact.window(model),
                max_output_tokens: limits.max_tokens,
                canonical_model: canonical_model(model),
                provider: limits.provider,
                cost_basis: if price.is_some() { "list" } else { "none" },
                ..wire::ModelUsage::default()
            });
        m.input_tokens += usage.input_tokens;
        m.output_tokens += usage.output_tokens;
        m.cache_read_input_tokens += usage.cache_read_input_tokens;
        m.cache_creation_input_tokens += usage.cache_creation_input_tokens;
        m.web_search_requests += usage.web_search_requests;
        m.thinking_tokens += usage.thinking_tokens;
        m.cache_creation_ephemeral5m_input_tokens += usage.cache_creation_5m_input_tokens;
        m.cache_creation_ephemeral1h_input_tokens += usage.cache_creation_1h_input_tokens;
        m.cost_usd += cost;
        if let Some(limit) = self.budget
            && self.cost >= limit
            && !self.over_budget
        {
            self.over_budget = true;
            if let Some(t) = &self.current {
                t.cancel();
            }
        }
    }

    /// A partial of `agent_id`'s open message.
    fn stream_event(&self, agent_id: &str, event: wire::StreamEvent) -> Output {
        Output::StreamEvent(wire::StreamEventOut {
            uuid: wire::new_uuid(),
            session_id: self.session_id.clone(),
            event,
            parent_tool_use_id: self.parent_of(agent_id),
            api_message_id: self
                .streaming
                .get(agent_id)
                .map(|s| s.id.clone())
                .unwrap_or_default(),
        })
    }

    /// `system`/`thinking_tokens`: the estimate for `agent_id`'s open
    /// thinking block after `more` characters.
    fn thinking_estimate(&mut self, agent_id: &str, more: &str) -> Option<Output> {
        let s = self.streaming.get_mut(agent_id)?;
        let before = s.thinking_chars.div_ceil(4);
        s.thinking_chars += more.chars().count() as u64;
        let now = s.thinking_chars.div_ceil(4);
        Some(Output::System(wire::System::ThinkingTokens(
            wire::ThinkingTokens {
                estimated_tokens: now,
                estimated_tokens_delta: now - before,
                session_id: self.session_id.clone(),
                uuid: wire::new_uuid(),
            },
        )))
    }

    /// Makes sure `agent_id`'s partial message is open (`message_start`)
    /// with a block of `kind` open in it: a delta of another kind closes
    /// the open block and starts the next one.
    fn open_block(&mut self, agent_id: &str, kind: &'static str, out: &mut Vec<Output>) {
        if !self.streaming.contains_key(agent_id) {
            let id = format!("msg_{}", wire::new_uuid().replace('-', ""));
            let model = self.model_of(agent_id);
            self.streaming.insert(
                agent_id.to_string(),
                Streaming {
                    id: id.clone(),
                    block: None,
                    blocks: 0,
                    thinking_chars: 0,
                    text: String::new(),
                    signature: String::new(),
                },
            );
            if self.parent_of(agent_id).is_none() {
                // A model request of the main session is answering.
                out.push(Output::System(wire::System::Status(wire::Status {
                    status: "requesting",
                    session_id: self.session_id.clone(),
                    uuid: wire::new_uuid(),
                })));
                self.begun.push(id.clone());
            }
            out.push(self.stream_event(
                agent_id,
                wire::StreamEvent::MessageStart {
                    message: wire::StreamMessage {
                        id: id.clone(),
                        kind: "message",
                        role: "assistant",
                        model,
                        content: [],
                        stop_reason: None,
                        stop_sequence: None,
                        // Counted when the message ends (`message_delta`).
                        usage: WireUsage::default(),
                    },
                },
            ));
        }
        let Some(open) = self.streaming.get(agent_id).map(|s| s.block) else {
            return;
        };
        if open.is_some_and(|(_, k)| k == kind) {
            return;
        }
        self.close_block(agent_id, out);
        let index = self.streaming.get(agent_id).map_or(0, |s| s.blocks);
        let content_block = match kind {
            "thinking" => wire::StreamBlock::Thinking {
                thinking: String::new(),
                signature: String::new(),
            },
            _ => wire::StreamBlock::Text {
                text: String::new(),
            },
        };
        out.push(self.stream_event(
            agent_id,
            wire::StreamEvent::ContentBlockStart {
                index,
                content_block,
            },
        ));
        if let Some(s) = self.streaming.get_mut(agent_id) {
            s.block = Some((index, kind));
            s.blocks = index + 1;
            s.thinking_chars = 0;
        }
    }

    /// Ends `agent_id`'s open block: the block as its own `assistant`
    /// message, then `content_block_stop` (Claude Code's order).
    fn close_block(&mut self, agent_id: &str, out: &mut Vec<Output>) {
        let Some(s) = self.streaming.get_mut(agent_id) else {
            return;
        };
        let Some((index, kind)) = s.block.take() else {
            return;
        };
        let (text, signature) = (
            std::mem::take(&mut s.text),
            std::mem::take(&mut s.signature),
        );
        let block = match kind {
            "thinking" => ContentBlock::Thinking {
                thinking: text,
                signature,
            },
            _ => ContentBlock::text(text),
        };
        let content = serde_json::to_value([block]).unwrap_or(Value::Null);
        out.push(self.block_message(agent_id, content, WireUsage::default(), None));
        out.push(self.stream_event(agent_id, wire::StreamEvent::ContentBlockStop { index }));
    }

    /// One block of `agent_id`'s streaming message as an `assistant`
    /// message (partial messages), under the message's id.
    fn block_message(
        &self,
        agent_id: &str,
        content: Value,
        usage: WireUsage,
        uuid: Option<String>,
    ) -> Output {
        Output::Assistant(wire::AssistantOut {
            message: wire::ApiMessage {
                id: self
                    .streaming
                    .get(agent_id)
                    .map(|s| s.id.clone())
                    .unwrap_or_default(),
                kind: "message",
                role: "assistant",
                model: self.model_of(agent_id),
                content,
                stop_reason: None,
                stop_sequence: None,
                usage,
            },
            parent_tool_use_id: self.parent_of(agent_id),
            session_id: self.session_id.clone(),
            uuid: uuid.unwrap_or_else(wire::new_uuid),
            timestamp: crate::clock::now_rfc3339(),
            api_error: None,
        })
    }

    /// Whether `agent_id`'s text and thinking go out: the main session's
    /// always, a sub-agent's with `forwardSubagentText`.
    fn forwards_text(&self, agent_id: &str) -> bool {
        self.forward_subagent_text || !self.parents.contains_key(agent_id)
    }

    /// The index of `agent_id`'s open block.
    fn open_index(&self, agent_id: &str) -> u64 {
        self.streaming
            .get(agent_id)
            .and_then(|s| s.block)
            .map_or(0, |(i, _)| i)
    }

    /// Records the refused tool calls for the result's `permission_denials`.
    fn count_denials(&mut self, event: &EngineEvent) {
        match event {
            EngineEvent::ToolUse {
                tool_use_id,
                name,
                input,
                ..
            } => {
                self.tool_inputs
                    .insert(tool_use_id.clone(), (name.clone(), input.clone()));
            }
            EngineEvent::ToolResult { tool_use_id, .. } => {
                self.tool_inputs.remove(tool_use_id);
            }
            EngineEvent::ToolDecision {
                tool_use_id,
                tool,
                accept: false,
                ..
            } => {
                let input = self
                    .tool_inputs
                    .get(tool_use_id)
                    .map_or_else(|| Value::Object(Default::default()), |(_, i)| i.clone());
                self.denials.push(wire::PermissionDenial {
                    tool_name: tool.clone(),
                    tool_use_id: tool_use_id.clone(),
                    tool_input: input,
                });
            }
            _ => {}
        }
    }

    /// Counts what the result's `subagent_stats` reports: the Agent calls'
    /// requests and how sub-agents ended (their starts are counted where
    /// they are mapped).
    fn count_subagents(&mut self, event: &EngineEvent) {
        match event {
            EngineEvent::ToolUse { name, input, .. } if name == crate::agent_tool::AGENT_TOOL => {
                let r = &mut self.subagents.requested;
                match input.get("run_in_background").and_then(Value::as_bool) {
                    Some(true) => r.background += 1,
                    Some(false) => r.foreground += 1,
                    None => r.unset += 1,
                }
            }
            EngineEvent::SubagentEnd { status, .. } => {
                let st = &mut self.subagents;
                match status.as_str() {
                    "completed" => st.completed += 1,
                    "cancelled" => st.killed.parent += 1,
                    "killed" | "stopped" => st.killed.user += 1,
                    _ => st.failed += 1,
                }
            }
            _ => {}
        }
    }

    /// The end of `agent_id`'s streamed message (partial messages): each
    /// block as its own message, as it ends (the last with the message's
    /// usage and transcript line), what was not streamed (tool calls)
    /// after, then `message_delta` and `message_stop`.
    fn end_streamed(
        &mut self,
        agent_id: &str,
        kept: &[&ContentBlock],
        ended: &Ended<'_>,
        out: &mut Vec<Output>,
    ) {
        let first = out.len();
        self.close_block(agent_id, out);
        for block in kept.iter().filter(|b| {
            !matches!(
                b,
                ContentBlock::Text { .. }
                    | ContentBlock::Thinking { .. }
                    | ContentBlock::RedactedThinking { .. }
            )
        }) {
            let content = serde_json::to_value([block]).unwrap_or(Value::Null);
            out.push(self.block_message(agent_id, content, WireUsage::default(), None));
        }
        if let Some(Output::Assistant(last)) = out[first..]
            .iter_mut()
            .rev()
            .find(|o| matches!(o, Output::Assistant(_)))
        {
            last.message.usage = wire_usage(ended.usage);
            ended.model.clone_into(&mut last.message.model);
            if let Some(u) = ended.line_uuid {
                last.uuid.clone_from(u);
            }
        }
        out.push(self.stream_event(
            agent_id,
            wire::StreamEvent::MessageDelta {
                delta: wire::StreamStop {
                    stop_reason: ended.stop,
                    stop_sequence: None,
                },
                usage: wire::StreamOutputTokens {
                    output_tokens: ended.usage.output_tokens,
                },
            },
        ));
        out.push(self.stream_event(agent_id, wire::StreamEvent::MessageStop));
        self.streaming.remove(agent_id);
    }

    /// A message of the conversation: an assistant message (closing its
    /// partial message), or a user message with tool results or of a
    /// sub-agent.
    fn map_message(&mut self, event: &EngineEvent, sid: String, out: &mut Vec<Output>) {
        let EngineEvent::Message {
            agent_id,
            message,
            uuid: line_uuid,
            synthetic,
        } = event
        else {
            return;
        };
        let parent = self.parent_of(agent_id);
        if parent.is_some()
            && message.role == Role::Assistant
            && let Some(text) = message.joined_text()
        {
            self.last_text.insert(agent_id.clone(), text);
        }
        // A sub-agent's text and thinking stay in it unless asked
        // for: only its tool calls go out.
        let kept: Vec<&ContentBlock> = message
            .content
            .iter()
            .filter(|b| {
                self.forwards_text(agent_id)
                    || message.role != Role::Assistant
                    || matches!(b, ContentBlock::ToolUse { .. })
            })
            .collect();
        let nothing_kept = kept.is_empty();
        let content = serde_json::to_value(&kept).unwrap_or(Value::Null);
        match message.role {
            Role::Assistant => {
                let stop = if message.tool_uses().next().is_some() {
                    "tool_use"
                } else {
                    "end_turn"
                };
                let (model, usage) = self
                    .pending_usage
                    .remove(agent_id)
                    .unwrap_or_else(|| (self.model_of(agent_id), Usage::default()));
                if self.streaming.contains_key(agent_id) {
                    let ended = Ended {
                        stop,
                        model: &model,
                        usage: &usage,
                        line_uuid: line_uuid.as_ref(),
                    };
                    return self.end_streamed(agent_id, &kept, &ended, out);
                }
                let id = format!("msg_{}", wire::new_uuid().replace('-', ""));
                if nothing_kept {
                    return;
                }
                out.push(Output::Assistant(wire::AssistantOut {
                    message: wire::ApiMessage {
                        id,
                        kind: "message",
                        role: "assistant",
                        model,
                        content,
                        stop_reason: Some(stop.into()),
                        stop_sequence: None,
                        usage: wire_usage(&usage),
                    },
                    parent_tool_use_id: parent,
                    session_id: sid,
                    uuid: line_uuid.clone().unwrap_or_else(wire::new_uuid),
                    timestamp: crate::clock::now_rfc3339(),
                    api_error: None,
                }));
            }
            Role::User => {
                // The main session's own prompts are the client's;
                // only tool results go back. A sub-agent's prompt
                // and results all go, under its Agent call.
                let has_results = message
                    .content
                    .iter()
                    .any(|b| matches!(b, ContentBlock::ToolResult { .. }));
                if parent.is_some() || has_results || *synthetic {
                    let (tool_use_result, tool_result_meta) = self.typed_results(message);
                    out.push(Output::User(wire::UserOut {
                        message: wire::UserApiMessage {
                            role: "user",
                            content,
                        },
                        parent_tool_use_id: parent,
                        session_id: sid,
                        uuid: wire::new_uuid(),
                        timestamp: crate::clock::now_rfc3339(),
                        subagent: self.subagent_of.get(agent_id).cloned(),
                        is_synthetic: *synthetic,
                        tool_use_result,
                        tool_result_meta,
                    }));
                }
            }
        }
    }

    /// A `user` message's tool results as Claude Code describes them: the
    /// result as data when the message carries one result (the tool's
    /// typed result, an Agent call's, else its text, `Error: …` for a
    /// failure), and how each call was decided.
    fn typed_results(
        &mut self,
        message: &crate::message::Message,
    ) -> (Option<Value>, Option<Vec<wire::ToolResultMeta>>) {
        let mut one = None;
        let mut meta = Vec::new();
        let results = message.content.iter().filter_map(|b| match b {
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => Some((tool_use_id, content, *is_error)),
            _ => None,
        });
        let mut count = 0;
        for (id, content, is_error) in results {
            count += 1;
            let typed = self.typed.remove(id).flatten();
            let agent = self.agent_calls.remove(id);
            let (accepted, source, reason_type) =
                self.decisions.remove(id).unwrap_or((true, "config", None));
            meta.push(wire::ToolResultMeta {
                id: id.clone(),
                permission_decision: wire::PermissionDecision {
                    decision: if accepted { "accept" } else { "reject" },
                    source,
                    reason_type,
                },
                non_execution_kind: (!accepted).then_some("permission-rule"),
            });
            let text = || {
                content
                    .iter()
                    .filter_map(|c| match c {
                        ToolResultContent::Text { text } => Some(text.as_str()),
                        ToolResultContent::Image { .. } => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            one = Some(match (typed, agent) {
                _ if is_error => Value::String(format!("Error: {}", text())),
                (Some(t), _) => t,
                (None, Some(a)) => match agent_result(a, content) {
                    Some(v) => v,
                    None => Value::String(text()),
                },
                (None, None) => Value::String(text()),
            });
        }
        if count == 0 {
            return (None, None);
        }
        ((count == 1).then_some(one).flatten(), Some(meta))
    }

    /// A sub-agent started: counted; cadre's `subagent_start`, Claude
    /// Code's `task_started`, and its task as its first user message.
    fn map_subagent_start(
        &mut self,
        event: &EngineEvent,
        print: Print,
        sid: String,
        out: &mut Vec<Output>,
    ) {
        let EngineEvent::SubagentStart {
            agent_id,
            parent_agent_id,
            agent_type,
            description,
            model,
            fork,
            tool_use_id,
            prompt,
            background,
            depth,
            ..
        } = event
        else {
            return;
        };
        self.parents.insert(agent_id.clone(), tool_use_id.clone());
        self.models.insert(agent_id.clone(), model.clone());
        self.agent_calls.insert(
            tool_use_id.clone(),
            AgentCall {
                agent_id: agent_id.clone(),
                agent_type: agent_type.clone(),
                prompt: prompt.clone(),
                model: model.clone(),
                usage: Usage::default(),
                ended: None,
            },
        );
        let of = wire::SubagentOf {
            agent_id: agent_id.clone(),
            subagent_type: agent_type.clone(),
            task_description: description.clone(),
        };
        self.subagent_of.insert(agent_id.clone(), of.clone());
        let st = &mut self.subagents;
        st.spawned += 1;
        st.max_depth = st.max_depth.max(u64::from(*depth));
        if parent_agent_id != "main" {
            st.spawned_by_subagents += 1;
        }
        if *background {
            st.started_in_background += 1;
        }
        *st.by_type.entry(agent_type.clone()).or_default() += 1;
        if print != Print::Nothing {
            out.push(Output::SubagentStart(wire::SubagentStart {
                agent_id: agent_id.clone(),
                parent_agent_id: parent_agent_id.clone(),
                agent_type: agent_type.clone(),
                description: description.clone(),
                model: model.clone(),
                fork: *fork,
                tool_use_id: tool_use_id.clone(),
                session_id: sid.clone(),
            }));
            let run_id = wire::new_run_id();
            self.runs.insert(agent_id.clone(), run_id.clone());
            out.push(Output::System(wire::System::TaskStarted(
                wire::TaskStarted {
                    task_id: agent_id.clone(),
                    run_id,
                    tool_use_id: tool_use_id.clone(),
                    description: description.clone(),
                    subagent_type: agent_type.clone(),
                    task_type: "local_agent",
                    prompt: prompt.clone(),
                    is_backgrounded: *background,
                    spawn_depth: *depth,
                    uuid: wire::new_uuid(),
                    session_id: sid.clone(),
                },
            )));
            // Its task, as the first message of its conversation.
            out.push(Output::User(wire::UserOut {
                message: wire::UserApiMessage {
                    role: "user",
                    content: text_content(prompt),
                },
                parent_tool_use_id: Some(tool_use_id.clone()),
                session_id: sid,
                uuid: wire::new_uuid(),
                timestamp: crate::clock::now_rfc3339(),
                subagent: Some(of),
                is_synthetic: false,
                tool_use_result: None,
                tool_result_meta: None,
            }));
        }
    }

    /// A sub-agent ended: cadre's `subagent_end`, then Claude Code's
    /// `task_updated` and `task_notification`.
    fn map_subagent_end(&mut self, event: &EngineEvent, sid: String, out: &mut Vec<Output>) {
        let EngineEvent::SubagentEnd {
            agent_id,
            status,
            tool_uses,
            duration_ms,
            total_tokens,
        } = event
        else {
            return;
        };
        if let Some(call) = self
            .parents
            .get(agent_id)
            .and_then(|p| self.agent_calls.get_mut(p))
        {
            call.ended = Some((status.clone(), *tool_uses, *duration_ms, *total_tokens));
        }
        out.push(Output::SubagentEnd(wire::SubagentEnd {
            agent_id: agent_id.clone(),
            status: status.clone(),
            tool_uses: *tool_uses,
            duration_ms: *duration_ms,
            total_tokens: *total_tokens,
            session_id: sid.clone(),
        }));
        // Claude Code's words for how a task ended.
        let ended = match status.as_str() {
            "completed" => "completed",
            "killed" | "cancelled" | "stopped" => "stopped",
            _ => "failed",
        };
        let end_time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let run_id = self.runs.remove(agent_id);
        out.push(Output::System(wire::System::TaskUpdated(
            wire::TaskUpdated {
                task_id: agent_id.clone(),
                run_id: run_id.clone(),
                patch: wire::TaskPatch {
                    status: ended,
                    end_time,
                },
                uuid: wire::new_uuid(),
                session_id: sid.clone(),
            },
        )));
        out.push(Output::System(wire::System::TaskNotification(
            wire::TaskNotification {
                task_id: agent_id.clone(),
                run_id,
                tool_use_id: self.parent_of(agent_id),
                status: ended.to_string(),
                output_file: String::new(),
                summary: self.last_text.remove(agent_id).unwrap_or_default(),
                usage: wire::TaskUsage {
                    total_tokens: *total_tokens,
                    tool_uses: *tool_uses,
                    duration_ms: *duration_ms,
                },
                uuid: wire::new_uuid(),
                session_id: sid,
            },
        )));
    }

    /// A model response: its cost and tokens, a safety stop, the usage its
    /// message will carry.
    fn count_response(&mut self, event: &EngineEvent) {
        let EngineEvent::ModelResponse {
            agent_id,
            model,
            usage,
            api_ms,
            refused,
        } = event
        else {
            return;
        };
        self.account(model, usage, *api_ms);
        if *refused {
            self.safety_stops += 1;
        }
        if let Some(call) = self
            .parents
            .get(agent_id)
            .and_then(|p| self.agent_calls.get_mut(p))
        {
            call.usage.add(usage);
        }
        if !self.parents.contains_key(agent_id) {
            self.main_last = Some(*usage);
        }
        self.pending_usage
            .insert(agent_id.clone(), (model.clone(), *usage));
    }

    /// A piece of a streaming block, as partial messages (its message and
    /// block opened first).
    fn map_delta(&mut self, event: &EngineEvent, out: &mut Vec<Output>) {
        match event {
            EngineEvent::TextDelta { agent_id, text } if self.forwards_text(agent_id) => {
                self.open_block(agent_id, "text", out);
                if let Some(s) = self.streaming.get_mut(agent_id) {
                    s.text.push_str(text);
                }
                let index = self.open_index(agent_id);
                out.push(self.stream_event(
                    agent_id,
                    wire::StreamEvent::ContentBlockDelta {
                        index,
                        delta: wire::StreamDelta::TextDelta { text: text.clone() },
                    },
                ));
            }
            EngineEvent::ThinkingDelta { agent_id, thinking } if self.forwards_text(agent_id) => {
                self.open_block(agent_id, "thinking", out);
                out.extend(self.thinking_estimate(agent_id, thinking));
                if let Some(s) = self.streaming.get_mut(agent_id) {
                    s.text.push_str(thinking);
                }
                let index = self.open_index(agent_id);
                out.push(self.stream_event(
                    agent_id,
                    wire::StreamEvent::ContentBlockDelta {
                        index,
                        delta: wire::StreamDelta::ThinkingDelta {
                            thinking: thinking.clone(),
                        },
                    },
                ));
            }
            EngineEvent::SignatureDelta {
                agent_id,
                signature,
            } => {
                // Part of the thinking block streaming now.
                let open = self.streaming.get(agent_id).and_then(|s| s.block);
                if let Some((index, "thinking")) = open {
                    if let Some(s) = self.streaming.get_mut(agent_id) {
                        s.signature.push_str(signature);
                    }
                    out.push(self.stream_event(
                        agent_id,
                        wire::StreamEvent::ContentBlockDelta {
                            index,
                            delta: wire::StreamDelta::SignatureDelta {
                                signature: signature.clone(),
                            },
                        },
                    ));
                }
            }
            _ => {}
        }
    }

    fn map(&mut self, event: &EngineEvent, print: Print) -> Vec<Output> {
        let sid = self.session_id.clone();
        let mut out = Vec::new();
        self.count_subagents(event);
        self.count_denials(event);
        match event {
            e @ EngineEvent::ModelResponse { .. } => self.count_response(e),
            e @ (EngineEvent::TextDelta { .. }
            | EngineEvent::ThinkingDelta { .. }
            | EngineEvent::SignatureDelta { .. })
                if print == Print::Partials =>
            {
                self.map_delta(e, &mut out);
            }
            e @ EngineEvent::Message { .. } if print != Print::Nothing => {
                self.map_message(e, sid, &mut out);
            }
            EngineEvent::ToolUse {
                tool_use_id, name, ..
            } if print != Print::Nothing => {
                self.calls.insert(
                    tool_use_id.clone(),
                    (name.clone(), std::time::Instant::now()),
                );
            }
            EngineEvent::ToolResult {
                tool_use_id, typed, ..
            } => {
                self.calls.remove(tool_use_id);
                if print != Print::Nothing {
                    self.typed.insert(tool_use_id.clone(), typed.clone());
                }
            }
            EngineEvent::ToolDecision {
                tool_use_id,
                accept,
                source,
                reason_type,
                ..
            } if print != Print::Nothing => {
                self.decisions
                    .insert(tool_use_id.clone(), (*accept, *source, *reason_type));
            }
            EngineEvent::ToolProgress {
                agent_id,
                tool_use_id,
                ..
            } if print != Print::Nothing => {
                if let Some((name, started)) = self.calls.get(tool_use_id) {
                    out.push(Output::ToolProgress(wire::ToolProgress {
                        tool_use_id: tool_use_id.clone(),
                        tool_name: name.clone(),
                        parent_tool_use_id: self.parent_of(agent_id),
                        elapsed_time_seconds: started.elapsed().as_millis() as f64 / 1000.0,
                        uuid: wire::new_uuid(),
                        session_id: sid,
                    }));
                }
            }
            e @ EngineEvent::SubagentStart { .. } => {
                self.map_subagent_start(e, print, sid, &mut out);
            }
            EngineEvent::SubagentProgress {
                agent_id,
                tool_uses,
                duration_ms,
                last_tool,
            } if print != Print::Nothing => {
                out.push(Output::SubagentProgress(wire::SubagentProgress {
                    agent_id: agent_id.clone(),
                    tool_uses: *tool_uses,
                    duration_ms: *duration_ms,
                    last_tool: last_tool.clone(),
                    session_id: sid,
                }));
            }
            e @ EngineEvent::SubagentEnd { .. } if print != Print::Nothing => {
                self.map_subagent_end(e, sid, &mut out);
            }
            EngineEvent::Retrying {
                agent_id,
                attempt,
                delay_ms,
                reason,
            } if print != Print::Nothing => {
                out.push(Output::Retrying(wire::Retrying {
                    agent_id: agent_id.clone(),
                    attempt: *attempt,
                    delay_ms: *delay_ms,
                    reason: reason.clone(),
                    session_id: sid,
                }));
            }
            EngineEvent::Todos { agent_id, todos } if print != Print::Nothing => {
                out.push(Output::Todos(wire::Todos {
                    agent_id: agent_id.clone(),
                    todos: todos.clone(),
                    session_id: sid,
                }));
            }
            _ => {}
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use serde_json::json;

    fn prices() -> BTreeMap<String, ModelPrice> {
        let mut p = BTreeMap::new();
        p.insert(
            "claude-sonnet-4".to_string(),
            ModelPrice {
                input: 3.0,
                output: 15.0,
                cache_read: 0.3,
                cache_write: 3.75,
                web_search: 10.0,
            },
        );
        p
    }

    #[test]
    fn cost_uses_the_longest_prefix_and_every_token_kind() {
        let u = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_creation_input_tokens: 200_000,
            cache_read_input_tokens: 1_000_000,
            ..Usage::default()
        };
        let p = prices();
        let c = cost_of(price_of(&p, "claude-sonnet-4-5-20250929"), &u);
        assert!((c - (3.0 + 1.5 + 0.75 + 0.3)).abs() < 1e-9, "{c}");
        assert_eq!(cost_of(price_of(&p, "qwen2.5-coder"), &u), 0.0);
    }

    /// The partial messages (`--include-partial-messages`) keep the bytes
    /// they had when they were built with `json!`: the field order is the
    /// Messages API's, which the SDKs' parsers do not need but scripts
    /// comparing lines do.
    #[test]
    fn partial_messages_keep_their_bytes() {
        let e = Emitter::new(
            Print::Partials,
            "s".into(),
            "claude-sonnet-4-5".into(),
            prices(),
            None,
        );
        let mut s = e.state.lock().unwrap();
        let main = || "main".to_string();
        let mut lines = Vec::new();
        for event in [
            EngineEvent::ThinkingDelta {
                agent_id: main(),
                thinking: "hm".into(),
            },
            EngineEvent::SignatureDelta {
                agent_id: main(),
                signature: "sig".into(),
            },
            EngineEvent::TextDelta {
                agent_id: main(),
                text: "hi".into(),
            },
            EngineEvent::Message {
                agent_id: main(),
                message: Arc::new(Message::assistant(vec![ContentBlock::text("hi")])),
                uuid: None,
                synthetic: false,
            },
        ] {
            for out in s.map(&event, Print::Partials) {
                match out {
                    Output::StreamEvent(se) => {
                        lines.push(serde_json::to_string(&se.event).unwrap());
                    }
                    // Each block as its own message, before its stop.
                    Output::Assistant(a) => lines.push(format!("assistant {}", a.message.content)),
                    _ => {}
                }
            }
        }
        let id = lines[0].split('"').nth(9).unwrap().to_string();
        assert!(id.starts_with("msg_"), "{}", lines[0]);
        let lines: Vec<String> = lines.iter().map(|l| l.replace(&id, "ID")).collect();
        assert_eq!(
            lines,
            [
                r#"{"type":"message_start","message":{"id":"ID","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}}"#,
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}"#,
                r#"assistant [{"type":"thinking","thinking":"hm","signature":"sig"}]"#,
                r#"{"type":"content_block_stop","index":0}"#,
                r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
                r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hi"}}"#,
                r#"assistant [{"type":"text","text":"hi"}]"#,
                r#"{"type":"content_block_stop","index":1}"#,
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":0}}"#,
                r#"{"type":"message_stop"}"#,
            ]
        );
    }

    #[test]
    fn sub_agent_messages_carry_the_agent_call_and_the_budget_cancels() {
        let e = Emitter::new(
            Print::Messages,
            "s".into(),
            "claude-sonnet-4-5".into(),
            prices(),
            Some(0.01),
        );
        let token = CancellationToken::new();
        e.set_current(Some(token.clone()));
        let mut s = e.state.lock().unwrap();
        s.map(
            &EngineEvent::SubagentStart {
                agent_id: "a1".into(),
                parent_agent_id: "main".into(),
                agent_type: "Explore".into(),
                description: "d".into(),
                model: "claude-haiku-4-5".into(),
                fork: false,
                tool_use_id: "toolu_1".into(),
                color: None,
                prompt: String::new(),
                background: false,
                depth: 1,
            },
            Print::Messages,
        );
        let out = s.map(
            &EngineEvent::Message {
                agent_id: "a1".into(),
                message: Arc::new(Message::user_text("look")),
                uuid: None,
                synthetic: false,
            },
            Print::Messages,
        );
        let v = serde_json::to_value(&out[0]).unwrap();
        assert_eq!(v["type"], "user");
        assert_eq!(v["parent_tool_use_id"], "toolu_1");
        // The main session's prompt is not echoed.
        let out = s.map(
            &EngineEvent::Message {
                agent_id: "main".into(),
                message: Arc::new(Message::user_text("task")),
                uuid: None,
                synthetic: false,
            },
            Print::Messages,
        );
        assert!(out.is_empty());
        assert!(!token.is_cancelled());
        s.map(
            &EngineEvent::ModelResponse {
                agent_id: "main".into(),
                model: "claude-sonnet-4-5".into(),
                refused: false,
                usage: Usage {
                    input_tokens: 10_000,
                    ..Usage::default()
                },
                api_ms: 5,
            },
            Print::Messages,
        );
        assert!(token.is_cancelled(), "0.03 USD is over a 0.01 budget");
        assert!(s.over_budget);
    }

    /// A sub-agent's MCP progress is a `tool_progress` under its Agent
    /// call; progress of a call that ended, or when nothing is printed, is
    /// not.
    #[test]
    fn tool_progress_names_the_call_and_the_agent_call_above_it() {
        let e = Emitter::new(
            Print::Messages,
            "s".into(),
            "claude-sonnet-4-5".into(),
            prices(),
            None,
        );
        let mut s = e.state.lock().unwrap();
        s.map(
            &EngineEvent::SubagentStart {
                agent_id: "a1".into(),
                parent_agent_id: "main".into(),
                agent_type: "Explore".into(),
                description: "d".into(),
                model: "claude-haiku-4-5".into(),
                fork: false,
                tool_use_id: "toolu_agent".into(),
                color: None,
                prompt: String::new(),
                background: false,
                depth: 1,
            },
            Print::Messages,
        );
        s.map(
            &EngineEvent::ToolUse {
                agent_id: "a1".into(),
                tool_use_id: "toolu_mcp".into(),
                name: "mcp__s__long".into(),
                input: json!({}),
            },
            Print::Messages,
        );
        let progress = EngineEvent::ToolProgress {
            agent_id: "a1".into(),
            tool_use_id: "toolu_mcp".into(),
            message: "1/2".into(),
        };
        let out = s.map(&progress, Print::Messages);
        let mut v = serde_json::to_value(&out[0]).unwrap();
        assert!(v["elapsed_time_seconds"].as_f64().unwrap() >= 0.0, "{v}");
        assert_eq!(v["uuid"].as_str().unwrap().len(), 36, "{v}");
        v["elapsed_time_seconds"] = json!(0);
        v["uuid"] = json!("u");
        assert_eq!(
            v,
            json!({"type": "tool_progress", "tool_use_id": "toolu_mcp",
                   "tool_name": "mcp__s__long", "parent_tool_use_id": "toolu_agent",
                   "elapsed_time_seconds": 0, "uuid": "u", "session_id": "s"})
        );
        assert!(s.map(&progress, Print::Nothing).is_empty());
        s.map(
            &EngineEvent::ToolResult {
                agent_id: "a1".into(),
                tool_use_id: "toolu_mcp".into(),
                is_error: false,
                error: None,
                typed: None,
            },
            Print::Messages,
        );
        assert!(s.map(&progress, Print::Messages).is_empty());
    }
}
