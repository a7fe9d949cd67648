//! The engine's events turned into Claude Code's metrics and events and
//! into the spans of the agent tree: one trace per prompt (a
//! `claude_code.interaction` root), under it a span per model request and
//! per tool call, and a sub-agent's span under the Agent call that started
//! it, with the sub-agent's own requests and calls under that.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, Severity};
use opentelemetry::metrics::{Counter, Meter};
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::logs::SdkLogger;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracer;
use serde_json::Value;

use crate::config::ModelPrice;
use crate::message::{Usage, cost_of, price_of};
use crate::runtime::EngineEvent;

/// What every metric and event carries, and what the switches allow.
pub(super) struct Shared {
    pub session_id: String,
    pub version: &'static str,
    pub include_session_id: bool,
    pub include_version: bool,
    pub log_user_prompts: bool,
    pub log_tool_details: bool,
    pub terminal: Option<String>,
    pub prices: std::collections::BTreeMap<String, ModelPrice>,
}

/// Claude Code's counters.
pub(super) struct Instruments {
    session: Counter<u64>,
    tokens: Counter<u64>,
    cost: Counter<f64>,
    lines: Counter<u64>,
    edit_decision: Counter<u64>,
    active_time: Counter<f64>,
    commits: Counter<u64>,
    pull_requests: Counter<u64>,
}

impl Instruments {
    pub fn new(meter: &Meter) -> Instruments {
        Instruments {
            session: meter
                .u64_counter("claude_code.session.count")
                .with_unit("count")
                .with_description("Count of CLI sessions started")
                .build(),
            tokens: meter
                .u64_counter("claude_code.token.usage")
                .with_unit("tokens")
                .with_description("Number of tokens used")
                .build(),
            cost: meter
                .f64_counter("claude_code.cost.usage")
                .with_unit("USD")
                .with_description("Cost of the session")
                .build(),
            lines: meter
                .u64_counter("claude_code.lines_of_code.count")
                .with_unit("count")
                .with_description("Count of lines of code modified")
                .build(),
            edit_decision: meter
                .u64_counter("claude_code.code_edit_tool.decision")
                .with_unit("count")
                .with_description("Count of code editing tool permission decisions")
                .build(),
            active_time: meter
                .f64_counter("claude_code.active_time.total")
                .with_unit("s")
                .with_description("Total active time in seconds")
                .build(),
            commits: meter
                .u64_counter("claude_code.commit.count")
                .with_unit("count")
                .with_description("Number of git commits created")
                .build(),
            pull_requests: meter
                .u64_counter("claude_code.pull_request.count")
                .with_unit("count")
                .with_description("Number of pull requests created")
                .build(),
        }
    }
}

/// One open tool call.
struct Call {
    name: String,
    agent_id: String,
    started: Instant,
    input_bytes: usize,
    span: Option<Context>,
    /// Lines added and removed, and the language, for the edit tools.
    edit: Option<(u64, u64, &'static str)>,
    decision: Option<(bool, &'static str)>,
    /// A Bash call that makes a commit or opens a pull request.
    creates: Creates,
}

/// One running sub-agent.
struct Agent {
    agent_type: String,
    span: Option<Context>,
    cost: f64,
}

/// The prompt being answered.
struct Prompt {
    id: String,
    span: Option<Context>,
    started: Instant,
    cost: f64,
    usage: Usage,
}

/// The most hook runs held for the next prompt's span.
const MAX_PENDING_HOOKS: usize = 256;

/// A hook run with no span to go under yet (SessionStart and
/// UserPromptSubmit run before their prompt's span starts): its span is
/// made under the next prompt's, or at the end as a root of its own.
struct PendingHook {
    name: String,
    start: SystemTime,
    end: SystemTime,
    attrs: Vec<KeyValue>,
    failed: Option<String>,
}

/// When something happened, on the wall clock (for the exported times)
/// and the monotonic one (for durations).
#[derive(Clone, Copy, Debug)]
pub(super) struct At {
    pub wall: SystemTime,
    pub mono: Instant,
}

impl At {
    pub fn now() -> At {
        At {
            wall: SystemTime::now(),
            mono: Instant::now(),
        }
    }
}

/// Claude Code's user time: a person's keys less than this apart count
/// the time between them.
const USER_IDLE: Duration = Duration::from_secs(5);

/// The user time not yet added to `active_time`.
#[derive(Default)]
struct UserTime {
    /// The last key, since the last prompt ended.
    last: Option<Instant>,
    uncounted: Duration,
}

impl UserTime {
    /// A key pressed `at`: the time since the key before, when under
    /// [`USER_IDLE`], is the user's. Whether to add what is uncounted to
    /// the counter now (a whole second of it, or a pause ended).
    fn key(&mut self, at: Instant) -> bool {
        let gap = self.last.map(|l| at.saturating_duration_since(l));
        if let Some(gap) = gap.filter(|g| *g < USER_IDLE) {
            self.uncounted += gap;
        }
        self.last = Some(at);
        self.uncounted >= Duration::from_secs(1) || gap.is_some_and(|g| g >= USER_IDLE)
    }

    /// A prompt starts or ends: the time until the next key is no one's.
    fn pause(&mut self) {
        self.last = None;
    }
}

struct State {
    /// The time of the event being recorded.
    now: At,
    sequence: u64,
    user: UserTime,
    /// The plugins reported as loaded (each once per process).
    plugins: std::collections::HashSet<(String, Option<String>)>,
    prompt: Option<Prompt>,
    calls: HashMap<String, Call>,
    agents: HashMap<String, Agent>,
    hooks: Vec<PendingHook>,
}

impl Default for State {
    fn default() -> State {
        State {
            now: At::now(),
            sequence: 0,
            user: UserTime::default(),
            plugins: std::collections::HashSet::new(),
            prompt: None,
            calls: HashMap::new(),
            agents: HashMap::new(),
            hooks: Vec::new(),
        }
    }
}

pub(super) struct Recorder {
    shared: Shared,
    meters: Option<Instruments>,
    logger: Option<SdkLogger>,
    tracer: Option<SdkTracer>,
    state: Mutex<State>,
}

impl Recorder {
    pub fn new(
        shared: Shared,
        meters: Option<Instruments>,
        logger: Option<SdkLogger>,
        tracer: Option<SdkTracer>,
    ) -> Recorder {
        Recorder {
            shared,
            meters,
            logger,
            tracer,
            state: Mutex::new(State::default()),
        }
    }

    /// The standard attributes of a metric point.
    fn metric_attrs(&self, extra: &[KeyValue]) -> Vec<KeyValue> {
        let s = &self.shared;
        let mut out = Vec::with_capacity(extra.len() + 3);
        if s.include_session_id {
            out.push(KeyValue::new("session.id", s.session_id.clone()));
        }
        if s.include_version {
            out.push(KeyValue::new("app.version", s.version));
        }
        if let Some(t) = &s.terminal {
            out.push(KeyValue::new("terminal.type", t.clone()));
        }
        out.extend_from_slice(extra);
        out
    }

    pub fn session_started(&self, start_type: &'static str) {
        if let Some(m) = &self.meters {
            m.session.add(
                1,
                &self.metric_attrs(&[KeyValue::new("start_type", start_type)]),
            );
        }
    }

    /// An event (a log record named `claude_code.<name>`) with the
    /// standard attributes, `event.*` and the prompt's id.
    fn event(&self, st: &mut State, name: &'static str, attrs: Vec<(&'static str, AnyValue)>) {
        let Some(logger) = &self.logger else { return };
        st.sequence += 1;
        let mut record = logger.create_log_record();
        let full = event_name(name);
        record.set_event_name(full);
        record.set_body(AnyValue::from(full));
        record.set_severity_number(Severity::Info);
        let now = st.now.wall;
        record.set_timestamp(now);
        record.set_observed_timestamp(now);
        record.add_attribute("event.name", name);
        record.add_attribute(
            "event.timestamp",
            jiff::Timestamp::try_from(now)
                .map_or_else(|_| crate::clock::now_rfc3339(), crate::clock::rfc3339),
        );
        record.add_attribute(
            "event.sequence",
            i64::try_from(st.sequence).unwrap_or(i64::MAX),
        );
        record.add_attribute("session.id", self.shared.session_id.clone());
        if self.shared.include_version {
            record.add_attribute("app.version", self.shared.version);
        }
        if let Some(t) = &self.shared.terminal {
            record.add_attribute("terminal.type", t.clone());
        }
        if let Some(p) = &st.prompt {
            record.add_attribute("prompt.id", p.id.clone());
            if let Some(span) = &p.span {
                let sc = span.span().span_context().clone();
                record.set_trace_context(sc.trace_id(), sc.span_id(), Some(sc.trace_flags()));
            }
        }
        for (k, v) in attrs {
            record.add_attribute(k, v);
        }
        logger.emit(record);
    }

    /// The span context a call or request of `agent_id` goes under: its
    /// sub-agent span, else the prompt's.
    fn parent_of(st: &State, agent_id: &str) -> Context {
        Self::open_parent(st, agent_id).unwrap_or_default()
    }

    /// [`Recorder::parent_of`], `None` when there is no span to go under.
    fn open_parent(st: &State, agent_id: &str) -> Option<Context> {
        st.agents
            .get(agent_id)
            .and_then(|a| a.span.clone())
            .or_else(|| st.prompt.as_ref().and_then(|p| p.span.clone()))
    }

    /// A hook's span: under the tool call it is about, else its agent's
    /// span or the prompt's; held for the next prompt when there is none.
    fn hook_run(&self, st: &mut State, run: &EngineEvent) {
        let EngineEvent::HookRun {
            agent_id,
            tool_use_id,
            event,
            hook_type,
            hook,
            outcome,
            exit_code,
            error,
            run_async,
            duration_ms,
        } = run
        else {
            return;
        };
        if self.tracer.is_none() {
            return;
        }
        let end = st.now.wall;
        let start = end - Duration::from_millis(*duration_ms);
        let mut attrs = vec![
            KeyValue::new("span.type", "hook"),
            KeyValue::new("hook_event", *event),
            KeyValue::new("hook_name", *event),
            KeyValue::new("duration_ms", to_i64(*duration_ms)),
            KeyValue::new("cadre.hook.type", *hook_type),
            KeyValue::new("cadre.hook.outcome", *outcome),
            KeyValue::new("cadre.agent_id", agent_id.clone()),
        ];
        if let Some(id) = tool_use_id {
            attrs.push(KeyValue::new("gen_ai.tool.call.id", id.clone()));
        }
        if let Some(code) = exit_code {
            attrs.push(KeyValue::new("cadre.hook.exit_code", i64::from(*code)));
        }
        if *run_async {
            attrs.push(KeyValue::new("cadre.hook.async", true));
        }
        // What the hook is (a command line, a URL) and what it said may
        // carry a team's secrets: only with OTEL_LOG_TOOL_DETAILS, as
        // Claude Code's `hook_definitions`.
        if self.shared.log_tool_details {
            if !hook.is_empty() {
                attrs.push(KeyValue::new("hook_definitions", hook.clone()));
            }
            if let Some(e) = error {
                attrs.push(KeyValue::new("cadre.hook.error", e.clone()));
            }
        }
        let failed = (*outcome == "error").then(|| {
            error
                .as_deref()
                .filter(|_| self.shared.log_tool_details)
                .unwrap_or("the hook failed")
                .to_string()
        });
        let parent = tool_use_id
            .as_ref()
            .and_then(|id| st.calls.get(id))
            .and_then(|c| c.span.clone())
            .or_else(|| Self::open_parent(st, agent_id));
        let pending = PendingHook {
            name: "claude_code.hook".to_string(),
            start,
            end,
            attrs,
            failed,
        };
        match parent {
            Some(parent) => self.hook_span(pending, &parent),
            // Bounded: a long pause between prompts full of hooks sends
            // the rest at once, each its own trace.
            None if st.hooks.len() >= MAX_PENDING_HOOKS => {
                self.hook_span(pending, &Context::new());
            }
            None => st.hooks.push(pending),
        }
    }

    fn hook_span(&self, h: PendingHook, parent: &Context) {
        if let Some(cx) = self.start_span(h.name, parent, h.start, h.attrs) {
            if let Some(why) = h.failed {
                cx.span().set_status(Status::error(why));
            }
            cx.span().end_with_timestamp(h.end);
        }
    }

    fn start_span(
        &self,
        name: String,
        parent: &Context,
        start: SystemTime,
        attrs: Vec<KeyValue>,
    ) -> Option<Context> {
        let tracer = self.tracer.as_ref()?;
        let span = tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .with_start_time(start)
            .with_attributes(attrs)
            .start_with_context(tracer, parent);
        Some(parent.with_span(span))
    }

    /// A key a person pressed `at`: the time since the last one counts as
    /// the user's when it is under [`USER_IDLE`] and no prompt is being
    /// worked on (that time is `cli`'s), as Claude Code counts it. Added to
    /// the counter by whole seconds, after a pause, when a prompt starts,
    /// and at exit.
    pub fn user_activity(&self, at: At) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        if st.prompt.is_none() && st.user.key(at.mono) {
            self.count_user_time(&mut st);
        }
    }

    fn count_user_time(&self, st: &mut State) {
        let t = std::mem::take(&mut st.user.uncounted);
        if let Some(m) = &self.meters
            && !t.is_zero()
        {
            m.active_time.add(
                t.as_secs_f64(),
                &self.metric_attrs(&[KeyValue::new("type", "user")]),
            );
        }
    }

    /// Something that happened beside the sessions: an MCP server's
    /// connection, a plugin loaded or installed. Names (of servers,
    /// plugins, marketplaces) and errors only with `OTEL_LOG_TOOL_DETAILS`,
    /// as Claude Code sends a team's own ones.
    pub fn observed(&self, what: &crate::config::observed::Observed, at: At) {
        use crate::config::observed::Observed;
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let st = &mut *st;
        st.now = at;
        let details = self.shared.log_tool_details;
        let named = |n: &str| {
            AnyValue::from(if details {
                n.to_string()
            } else {
                "third-party".to_string()
            })
        };
        match what {
            Observed::McpConnection(c) => {
                // When it connected (or failed), even if noted before
                // telemetry was set up.
                st.now.wall = c.at;
                let mut attrs = vec![
                    (
                        "status",
                        AnyValue::from(if c.disconnected {
                            "disconnected"
                        } else if c.error.is_none() {
                            "connected"
                        } else {
                            "failed"
                        }),
                    ),
                    ("transport_type", AnyValue::from(c.transport.clone())),
                    ("duration_ms", AnyValue::from(c.duration_ms.to_string())),
                    ("is_plugin", AnyValue::from(c.plugin().is_some())),
                ];
                if let Some(p) = c.plugin() {
                    attrs.push(("plugin.name", named(p)));
                }
                if let Some((name, marketplace)) =
                    c.plugin_source.as_deref().and_then(|s| s.rsplit_once('@'))
                {
                    attrs.push((
                        "plugin_id_hash",
                        AnyValue::from(plugin_id_hash(name, marketplace)),
                    ));
                }
                if let Some(scope) = c.scope {
                    attrs.push(("server_scope", AnyValue::from(scope)));
                }
                if let Some(code) = c.error_code {
                    attrs.push(("error_code", AnyValue::from(code)));
                }
                if details {
                    attrs.push(("server_name", AnyValue::from(c.server.clone())));
                    if let Some(e) = &c.error {
                        attrs.push(("error", AnyValue::from(e.clone())));
                    }
                }
                self.event(st, "mcp_server_connection", attrs);
            }
            Observed::PluginLoaded(plugin) => {
                let p = crate::config::observed::PluginLoad::of(plugin);
                if !st.plugins.insert((p.name.clone(), p.marketplace.clone())) {
                    return;
                }
                // A `--plugin-dir` plugin's marketplace is `inline`, as
                // Claude Code names it.
                let marketplace = p.marketplace.as_deref().unwrap_or("inline");
                let mut attrs = vec![
                    ("plugin.name", named(&p.name)),
                    ("marketplace.name", named(marketplace)),
                    (
                        "plugin_id_hash",
                        AnyValue::from(plugin_id_hash(&p.name, marketplace)),
                    ),
                ];
                if let Some(v) = p.version.as_ref().filter(|_| details) {
                    attrs.push(("plugin.version", AnyValue::from(v.clone())));
                }
                attrs.extend([
                    (
                        "plugin.scope",
                        AnyValue::from(if p.managed { "org" } else { "user-local" }),
                    ),
                    (
                        "enabled_via",
                        AnyValue::from(if p.managed {
                            "org-policy"
                        } else {
                            "user-install"
                        }),
                    ),
                    ("has_hooks", AnyValue::from(p.has_hooks)),
                    ("has_mcp", AnyValue::from(p.has_mcp)),
                ]);
                self.event(st, "plugin_loaded", attrs);
            }
            Observed::PluginInstalled {
                name,
                marketplace,
                version,
            } => {
                let mut attrs = Vec::new();
                if details {
                    attrs.push(("plugin.name", AnyValue::from(name.clone())));
                    if let Some(v) = version {
                        attrs.push(("plugin.version", AnyValue::from(v.clone())));
                    }
                    attrs.push(("marketplace.name", AnyValue::from(marketplace.clone())));
                }
                attrs.extend([
                    ("marketplace.is_official", AnyValue::from("false")),
                    ("install.trigger", AnyValue::from("cli")),
                ]);
                self.event(st, "plugin_installed", attrs);
            }
        }
    }

    /// Whether [`Recorder::record`] does anything with `event` (the others
    /// are not kept while telemetry is being set up).
    pub fn wanted(event: &EngineEvent) -> bool {
        matches!(
            event,
            EngineEvent::UserPrompt { .. }
                | EngineEvent::TurnEnd { .. }
                | EngineEvent::HookRun { .. }
                | EngineEvent::ModelResponse { .. }
                | EngineEvent::ApiError { .. }
                | EngineEvent::ToolUse { .. }
                | EngineEvent::ToolDecision { .. }
                | EngineEvent::ToolResult { .. }
                | EngineEvent::SubagentStart { .. }
                | EngineEvent::SubagentEnd { .. }
                | EngineEvent::HookEvent { .. }
                | EngineEvent::Compacted { .. }
                | EngineEvent::ModeChanged { .. }
                | EngineEvent::SkillActivated { .. }
        )
    }

    /// Records `event`, which happened `at`.
    pub fn record(&self, event: &EngineEvent, at: At) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let st = &mut *st;
        st.now = at;
        match event {
            EngineEvent::UserPrompt {
                text, prompt_id, ..
            } => self.prompt(st, text, prompt_id),
            EngineEvent::TurnEnd { .. } => self.end_prompt(st),
            EngineEvent::HookRun { .. } => self.hook_run(st, event),
            EngineEvent::ModelResponse {
                agent_id,
                model,
                usage,
                api_ms,
                ..
            } => self.model_response(st, agent_id, model, usage, *api_ms),
            EngineEvent::ApiError {
                agent_id,
                model,
                error,
                status_code,
                duration_ms,
            } => {
                let mut attrs = vec![
                    ("model", AnyValue::from(model.clone())),
                    ("error", AnyValue::from(error.clone())),
                    ("duration_ms", AnyValue::from(to_i64(*duration_ms))),
                    ("attempt", AnyValue::from(1_i64)),
                    ("query_source", AnyValue::from(query_source(agent_id))),
                ];
                if let Some(code) = status_code {
                    attrs.push(("status_code", AnyValue::from(i64::from(*code))));
                }
                self.event(st, "api_error", attrs);
                let parent = Self::parent_of(st, agent_id);
                let start = st.now.wall - Duration::from_millis(*duration_ms);
                if let Some(cx) =
                    self.start_span(format!("chat {model}"), &parent, start, chat_attrs(model))
                {
                    cx.span().set_status(Status::error(error.clone()));
                    cx.span().end_with_timestamp(st.now.wall);
                }
            }
            EngineEvent::ToolUse {
                agent_id,
                tool_use_id,
                name,
                input,
            } => {
                let parent = Self::parent_of(st, agent_id);
                let mut attrs = vec![
                    KeyValue::new("gen_ai.operation.name", "execute_tool"),
                    KeyValue::new("gen_ai.tool.name", name.clone()),
                    KeyValue::new("gen_ai.tool.call.id", tool_use_id.clone()),
                    KeyValue::new("cadre.agent_id", agent_id.clone()),
                ];
                if let Some(server) = mcp_server(name) {
                    attrs.push(KeyValue::new("gen_ai.tool.type", "extension"));
                    attrs.push(KeyValue::new("mcp.server.name", server.to_string()));
                }
                let span =
                    self.start_span(format!("execute_tool {name}"), &parent, st.now.wall, attrs);
                st.calls.insert(
                    tool_use_id.clone(),
                    Call {
                        name: name.clone(),
                        agent_id: agent_id.clone(),
                        started: st.now.mono,
                        input_bytes: serde_json::to_vec(input).map_or(0, |v| v.len()),
                        span,
                        edit: edit_lines(name, input),
                        decision: None,
                        creates: if name == "Bash" {
                            creates(input.get("command").and_then(Value::as_str).unwrap_or(""))
                        } else {
                            Creates::default()
                        },
                    },
                );
            }
            EngineEvent::ToolDecision {
                tool_use_id,
                tool,
                accept,
                source,
                ..
            } => {
                let decision = if *accept { "accept" } else { "reject" };
                let language = st.calls.get_mut(tool_use_id).and_then(|c| {
                    c.decision = Some((*accept, source));
                    c.edit.map(|(_, _, lang)| lang)
                });
                if let (Some(m), Some(language)) = (&self.meters, language) {
                    m.edit_decision.add(
                        1,
                        &self.metric_attrs(&[
                            KeyValue::new("tool_name", tool.clone()),
                            KeyValue::new("decision", decision),
                            KeyValue::new("source", *source),
                            KeyValue::new("language", language),
                        ]),
                    );
                }
                self.event(
                    st,
                    "tool_decision",
                    vec![
                        ("tool_name", AnyValue::from(tool.clone())),
                        ("tool_use_id", AnyValue::from(tool_use_id.clone())),
                        ("decision", AnyValue::from(decision)),
                        ("source", AnyValue::from(*source)),
                    ],
                );
            }
            EngineEvent::ToolResult {
                tool_use_id,
                is_error,
                error,
                ..
            } => {
                let Some(call) = st.calls.remove(tool_use_id) else {
                    return;
                };
                let ms = to_i64(ms_between(call.started, st.now.mono));
                if let Some(cx) = &call.span {
                    if *is_error {
                        cx.span().set_status(Status::error("the tool call failed"));
                    }
                    cx.span().end_with_timestamp(st.now.wall);
                }
                if !is_error && let (Some(m), Some((added, removed, _))) = (&self.meters, call.edit)
                {
                    for (kind, n) in [("added", added), ("removed", removed)] {
                        if n > 0 {
                            m.lines
                                .add(n, &self.metric_attrs(&[KeyValue::new("type", kind)]));
                        }
                    }
                }
                if !is_error && let Some(m) = &self.meters {
                    if call.creates.commit {
                        m.commits.add(1, &self.metric_attrs(&[]));
                    }
                    if call.creates.pull_request {
                        m.pull_requests.add(1, &self.metric_attrs(&[]));
                    }
                }
                let mut attrs = vec![
                    ("tool_name", AnyValue::from(call.name.clone())),
                    ("tool_use_id", AnyValue::from(tool_use_id.clone())),
                    (
                        "success",
                        AnyValue::from(if *is_error { "false" } else { "true" }),
                    ),
                    ("duration_ms", AnyValue::from(ms)),
                    (
                        "tool_input_size_bytes",
                        AnyValue::from(i64::try_from(call.input_bytes).unwrap_or(i64::MAX)),
                    ),
                    ("query_source", AnyValue::from(query_source(&call.agent_id))),
                ];
                if let Some((accept, source)) = call.decision {
                    attrs.push((
                        "decision_type",
                        AnyValue::from(if accept { "accept" } else { "reject" }),
                    ));
                    attrs.push(("decision_source", AnyValue::from(source)));
                }
                if let Some(server) = mcp_server(&call.name) {
                    attrs.push(("mcp_server_name", AnyValue::from(server.to_string())));
                }
                if self.shared.log_tool_details
                    && let Some(e) = error
                {
                    attrs.push(("error", AnyValue::from(e.clone())));
                }
                self.event(st, "tool_result", attrs);
            }
            EngineEvent::SubagentStart {
                agent_id,
                parent_agent_id,
                agent_type,
                model,
                fork,
                tool_use_id,
                ..
            } => {
                let parent = st
                    .calls
                    .get(tool_use_id)
                    .and_then(|c| c.span.clone())
                    .unwrap_or_else(|| Self::parent_of(st, parent_agent_id));
                let span = self.start_span(
                    format!("invoke_agent {agent_type}"),
                    &parent,
                    st.now.wall,
                    vec![
                        KeyValue::new("gen_ai.operation.name", "invoke_agent"),
                        KeyValue::new("gen_ai.agent.name", agent_type.clone()),
                        KeyValue::new("gen_ai.agent.id", agent_id.clone()),
                        KeyValue::new("gen_ai.request.model", model.clone()),
                        KeyValue::new("cadre.parent_agent_id", parent_agent_id.clone()),
                        KeyValue::new("cadre.fork", *fork),
                        KeyValue::new("gen_ai.tool.call.id", tool_use_id.clone()),
                    ],
                );
                st.agents.insert(
                    agent_id.clone(),
                    Agent {
                        agent_type: agent_type.clone(),
                        span,
                        cost: 0.0,
                    },
                );
            }
            EngineEvent::SubagentEnd {
                agent_id,
                status,
                tool_uses,
                duration_ms,
                total_tokens,
            } => {
                let Some(agent) = st.agents.remove(agent_id) else {
                    return;
                };
                if let Some(cx) = &agent.span {
                    let span = cx.span();
                    span.set_attributes([
                        KeyValue::new("cadre.status", status.clone()),
                        KeyValue::new("cadre.tool_uses", i64::from(*tool_uses)),
                        KeyValue::new("cadre.duration_ms", to_i64(*duration_ms)),
                        KeyValue::new("cadre.total_tokens", to_i64(*total_tokens)),
                        KeyValue::new("cadre.cost_usd", agent.cost),
                    ]);
                    if status != "completed" {
                        span.set_status(Status::error(status.clone()));
                    }
                    span.end_with_timestamp(st.now.wall);
                }
            }
            EngineEvent::HookEvent {
                event,
                hooks,
                ended,
                ..
            } => {
                let mut attrs = vec![
                    ("hook_event", AnyValue::from(*event)),
                    ("hook_name", AnyValue::from(*event)),
                    ("num_hooks", AnyValue::from(hooks.to_string())),
                ];
                match ended {
                    None => self.event(st, "hook_execution_start", attrs),
                    Some(t) => {
                        attrs.extend([
                            ("num_success", AnyValue::from(t.success.to_string())),
                            ("num_blocking", AnyValue::from(t.blocking.to_string())),
                            (
                                "num_non_blocking_error",
                                AnyValue::from(t.non_blocking_error.to_string()),
                            ),
                            ("num_cancelled", AnyValue::from("0")),
                            (
                                "total_duration_ms",
                                AnyValue::from(t.duration_ms.to_string()),
                            ),
                        ]);
                        self.event(st, "hook_execution_complete", attrs);
                    }
                }
            }
            EngineEvent::Compacted {
                trigger,
                success,
                duration_ms,
                pre_tokens,
                post_tokens,
                error,
                ..
            } => {
                let mut attrs = vec![
                    ("trigger", AnyValue::from(*trigger)),
                    ("success", AnyValue::from(success.to_string())),
                    ("duration_ms", AnyValue::from(duration_ms.to_string())),
                    ("pre_tokens", AnyValue::from(pre_tokens.to_string())),
                ];
                if let Some(n) = post_tokens {
                    attrs.push(("post_tokens", AnyValue::from(n.to_string())));
                }
                if let Some(e) = error {
                    attrs.push(("error", AnyValue::from(*e)));
                }
                self.event(st, "compaction", attrs);
            }
            EngineEvent::ModeChanged {
                from, to, trigger, ..
            } => self.event(
                st,
                "permission_mode_changed",
                vec![
                    ("from_mode", AnyValue::from(*from)),
                    ("to_mode", AnyValue::from(*to)),
                    ("trigger", AnyValue::from(*trigger)),
                ],
            ),
            EngineEvent::SkillActivated {
                name,
                trigger,
                source,
                ..
            } => {
                // Claude Code names a team's own skills only with
                // OTEL_LOG_TOOL_DETAILS (`custom_skill` otherwise).
                let shown = if self.shared.log_tool_details {
                    name.clone()
                } else {
                    "custom_skill".to_string()
                };
                self.event(
                    st,
                    "skill_activated",
                    vec![
                        ("skill.name", AnyValue::from(shown)),
                        ("invocation_trigger", AnyValue::from(*trigger)),
                        ("skill.source", AnyValue::from(*source)),
                    ],
                );
            }
            _ => {}
        }
    }

    fn prompt(&self, st: &mut State, text: &str, id: &str) {
        self.end_prompt(st);
        self.count_user_time(st);
        st.user.pause();
        let id = id.to_string();
        let mut attrs = vec![
            KeyValue::new("session.id", self.shared.session_id.clone()),
            KeyValue::new("prompt.id", id.clone()),
            KeyValue::new("prompt_length", to_i64(text.chars().count() as u64)),
        ];
        if self.shared.log_user_prompts {
            attrs.push(KeyValue::new("user_prompt", text.to_string()));
        }
        // The hooks that ran on the way to the prompt (SessionStart,
        // UserPromptSubmit) are its first children, so it starts with them.
        let pending = std::mem::take(&mut st.hooks);
        let start = pending
            .iter()
            .map(|h| h.start)
            .fold(st.now.wall, SystemTime::min);
        let span = self.start_span(
            "claude_code.interaction".into(),
            &Context::new(),
            start,
            attrs,
        );
        if let Some(parent) = &span {
            for h in pending {
                self.hook_span(h, parent);
            }
        }
        st.prompt = Some(Prompt {
            id,
            span,
            started: st.now.mono,
            cost: 0.0,
            usage: Usage::default(),
        });
        let mut attrs = vec![(
            "prompt_length",
            AnyValue::from(to_i64(text.chars().count() as u64)),
        )];
        if self.shared.log_user_prompts {
            attrs.push(("prompt", AnyValue::from(text.to_string())));
        }
        self.event(st, "user_prompt", attrs);
    }

    fn end_prompt(&self, st: &mut State) {
        let Some(p) = st.prompt.take() else { return };
        st.user.pause();
        if let Some(m) = &self.meters {
            m.active_time.add(
                st.now.mono.duration_since(p.started).as_secs_f64(),
                &self.metric_attrs(&[KeyValue::new("type", "cli")]),
            );
        }
        if let Some(cx) = &p.span {
            let span = cx.span();
            span.set_attributes(usage_attrs(&p.usage));
            span.set_attribute(KeyValue::new("cadre.cost_usd", p.cost));
            span.end_with_timestamp(st.now.wall);
        }
    }

    fn model_response(
        &self,
        st: &mut State,
        agent_id: &str,
        model: &str,
        usage: &Usage,
        api_ms: u64,
    ) {
        let cost = cost_of(price_of(&self.shared.prices, model), usage);
        let source = query_source(agent_id);
        let agent_name = st.agents.get(agent_id).map(|a| a.agent_type.clone());
        if let Some(m) = &self.meters {
            let mut extra = vec![
                KeyValue::new("model", model.to_string()),
                KeyValue::new("query_source", source),
            ];
            if let Some(name) = &agent_name {
                extra.push(KeyValue::new("agent.name", name.clone()));
            }
            for (kind, n) in [
                ("input", usage.input_tokens),
                ("output", usage.output_tokens),
                ("cacheRead", usage.cache_read_input_tokens),
                ("cacheCreation", usage.cache_creation_input_tokens),
            ] {
                let mut attrs = self.metric_attrs(&extra);
                attrs.push(KeyValue::new("type", kind));
                m.tokens.add(n, &attrs);
            }
            m.cost.add(cost, &self.metric_attrs(&extra));
        }
        if let Some(a) = st.agents.get_mut(agent_id) {
            a.cost += cost;
        }
        if let Some(p) = &mut st.prompt {
            p.cost += cost;
            p.usage.add(usage);
        }
        let parent = Self::parent_of(st, agent_id);
        let start = st.now.wall - Duration::from_millis(api_ms);
        let mut attrs = chat_attrs(model);
        attrs.extend(usage_attrs(usage));
        attrs.push(KeyValue::new("cadre.cost_usd", cost));
        attrs.push(KeyValue::new("cadre.agent_id", agent_id.to_string()));
        if let Some(cx) = self.start_span(format!("chat {model}"), &parent, start, attrs) {
            cx.span().end_with_timestamp(st.now.wall);
        }
        let mut attrs = vec![
            ("model", AnyValue::from(model.to_string())),
            ("cost_usd", AnyValue::from(cost)),
            ("duration_ms", AnyValue::from(to_i64(api_ms))),
            ("input_tokens", AnyValue::from(to_i64(usage.input_tokens))),
            ("output_tokens", AnyValue::from(to_i64(usage.output_tokens))),
            (
                "cache_read_tokens",
                AnyValue::from(to_i64(usage.cache_read_input_tokens)),
            ),
            (
                "cache_creation_tokens",
                AnyValue::from(to_i64(usage.cache_creation_input_tokens)),
            ),
            ("query_source", AnyValue::from(source)),
        ];
        if let Some(name) = agent_name {
            attrs.push(("agent.name", AnyValue::from(name)));
        }
        self.event(st, "api_request", attrs);
    }

    /// The W3C trace context (`traceparent`) of a sub-agent's span, for a
    /// worker on another host to continue the trace under it.
    pub fn trace_context(&self, agent_id: &str) -> Option<HashMap<String, String>> {
        let st = self.state.lock().ok()?;
        let cx = st.agents.get(agent_id)?.span.as_ref()?;
        let mut carrier = HashMap::new();
        TraceContextPropagator::new().inject_context(cx, &mut carrier);
        Some(carrier)
    }

    /// A sub-agent started elsewhere (by a parent on another host) runs
    /// here: its span continues the trace the parent's context names, so
    /// its requests and calls nest under the parent's Agent call.
    pub fn adopt(&self, agent_id: &str, agent_type: &str, carrier: &HashMap<String, String>) {
        let parent = TraceContextPropagator::new().extract(carrier);
        if !parent.span().span_context().is_valid() {
            return;
        }
        let span = self.start_span(
            format!("invoke_agent {agent_type}"),
            &parent,
            SystemTime::now(),
            vec![
                KeyValue::new("gen_ai.operation.name", "invoke_agent"),
                KeyValue::new("gen_ai.agent.name", agent_type.to_string()),
                KeyValue::new("gen_ai.agent.id", agent_id.to_string()),
                KeyValue::new("cadre.remote", true),
            ],
        );
        if let Ok(mut st) = self.state.lock() {
            st.agents.insert(
                agent_id.to_string(),
                Agent {
                    agent_type: agent_type.to_string(),
                    span,
                    cost: 0.0,
                },
            );
        }
    }

    /// Ends every open span (at exit: a span never ended is never sent).
    pub fn finish(&self) {
        let Ok(mut st) = self.state.lock() else {
            return;
        };
        let st = &mut *st;
        st.now = At::now();
        for (_, call) in st.calls.drain() {
            if let Some(cx) = call.span {
                cx.span().end();
            }
        }
        for (_, agent) in st.agents.drain() {
            if let Some(cx) = agent.span {
                cx.span().end();
            }
        }
        self.end_prompt(st);
        self.count_user_time(st);
        // Hooks no prompt followed (SessionEnd, a prompt a hook blocked):
        // each a trace of its own.
        for h in std::mem::take(&mut st.hooks) {
            self.hook_span(h, &Context::new());
        }
    }
}

/// The full event name (`claude_code.` and the short one).
fn event_name(name: &'static str) -> &'static str {
    match name {
        "user_prompt" => "claude_code.user_prompt",
        "api_request" => "claude_code.api_request",
        "api_error" => "claude_code.api_error",
        "tool_result" => "claude_code.tool_result",
        "tool_decision" => "claude_code.tool_decision",
        "hook_execution_start" => "claude_code.hook_execution_start",
        "hook_execution_complete" => "claude_code.hook_execution_complete",
        "compaction" => "claude_code.compaction",
        "permission_mode_changed" => "claude_code.permission_mode_changed",
        "skill_activated" => "claude_code.skill_activated",
        "mcp_server_connection" => "claude_code.mcp_server_connection",
        "plugin_loaded" => "claude_code.plugin_loaded",
        "plugin_installed" => "claude_code.plugin_installed",
        _ => "claude_code.event",
    }
}

/// What a Bash command creates, as Claude Code counts it: a commit (`git
/// commit`, not `--dry-run`) and a pull request (`gh pr create`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Creates {
    commit: bool,
    pull_request: bool,
}

/// Each simple command of `command` (split at `;`, `&`, `|` and new
/// lines), looked at for `git [options] commit` and `gh pr create`.
fn creates(command: &str) -> Creates {
    let mut out = Creates::default();
    for part in command.split([';', '&', '|', '\n', '(', ')']) {
        let words: Vec<&str> = part
            .split_whitespace()
            .map(|w| w.trim_matches(['"', '\'']))
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .collect();
        match words.first().map(|w| w.rsplit('/').next().unwrap_or(w)) {
            Some("git") => {
                // Past git's own options (`-C dir`, `-c k=v`, `--no-pager`).
                let mut rest = words[1..].iter();
                let mut sub = None;
                while let Some(w) = rest.next() {
                    match *w {
                        "-C" | "-c" | "--git-dir" | "--work-tree" => {
                            rest.next();
                        }
                        w if w.starts_with('-') => {}
                        w => {
                            sub = Some(w);
                            break;
                        }
                    }
                }
                if sub == Some("commit") && !rest.any(|w| *w == "--dry-run") {
                    out.commit = true;
                }
            }
            Some("gh") if words.get(1) == Some(&"pr") && words.get(2) == Some(&"create") => {
                out.pull_request = true;
            }
            _ => {}
        }
    }
    out
}

fn chat_attrs(model: &str) -> Vec<KeyValue> {
    vec![
        KeyValue::new("gen_ai.operation.name", "chat"),
        KeyValue::new("gen_ai.request.model", model.to_string()),
    ]
}

/// GenAI token counts and the share of the input read from the cache.
fn usage_attrs(u: &Usage) -> Vec<KeyValue> {
    let input = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens;
    let share = if input == 0 {
        0.0
    } else {
        u.cache_read_input_tokens as f64 / input as f64
    };
    vec![
        KeyValue::new("gen_ai.usage.input_tokens", to_i64(u.input_tokens)),
        KeyValue::new("gen_ai.usage.output_tokens", to_i64(u.output_tokens)),
        KeyValue::new(
            "gen_ai.usage.cache_read.input_tokens",
            to_i64(u.cache_read_input_tokens),
        ),
        KeyValue::new(
            "gen_ai.usage.cache_creation.input_tokens",
            to_i64(u.cache_creation_input_tokens),
        ),
        KeyValue::new("cadre.cache_read_share", share),
    ]
}

/// Claude Code's `plugin_id_hash`: the first 16 hex digits of the SHA-256
/// of `NAME@MARKETPLACE` (the marketplace in lower case) followed by
/// Claude Code's fixed salt; checked against Claude Code 2.1.330's own
/// events. The same plugin has the same id in both tools' data, and its
/// name does not leave.
fn plugin_id_hash(name: &str, marketplace: &str) -> String {
    use sha2::Digest as _;
    const SALT: &str = "claude-plugin-telemetry-v1";
    let id = format!("{name}@{}{SALT}", marketplace.to_lowercase());
    let digest = sha2::Sha256::digest(id.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

fn query_source(agent_id: &str) -> &'static str {
    if agent_id == "main" {
        "main"
    } else {
        "subagent"
    }
}

fn mcp_server(tool: &str) -> Option<&str> {
    tool.strip_prefix("mcp__")?.split("__").next()
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn ms_between(from: Instant, to: Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_millis()).unwrap_or(u64::MAX)
}

/// Lines added and removed by an edit tool's call, and the language of
/// its file; `None` for other tools.
fn edit_lines(tool: &str, input: &Value) -> Option<(u64, u64, &'static str)> {
    let text = |k: &str| input.get(k).and_then(Value::as_str).unwrap_or("");
    let path = input
        .get("file_path")
        .or_else(|| input.get("notebook_path"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let (added, removed) = match tool {
        "Edit" => diff_lines(text("old_string"), text("new_string")),
        "MultiEdit" => input
            .get("edits")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|e| {
                let t = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("");
                diff_lines(t("old_string"), t("new_string"))
            })
            .fold((0, 0), |(a, r), (a2, r2)| (a + a2, r + r2)),
        "Write" => (text("content").lines().count() as u64, 0),
        "NotebookEdit" => (text("new_source").lines().count() as u64, 0),
        _ => return None,
    };
    Some((added, removed, language(path)))
}

/// Lines of `new` not in `old` and lines of `old` not in `new` (as
/// multisets: a cheap stand-in for a diff).
fn diff_lines(old: &str, new: &str) -> (u64, u64) {
    let mut left: HashMap<&str, u64> = HashMap::new();
    for l in old.lines() {
        *left.entry(l).or_default() += 1;
    }
    let mut added = 0;
    for l in new.lines() {
        match left.get_mut(l) {
            Some(n) if *n > 0 => *n -= 1,
            _ => added += 1,
        }
    }
    (added, left.values().sum())
}

fn language(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map_or("", |(_, e)| e);
    match ext.to_ascii_lowercase().as_str() {
        "rs" => "Rust",
        "py" => "Python",
        "ts" | "tsx" | "mts" | "cts" => "TypeScript",
        "js" | "jsx" | "mjs" | "cjs" => "JavaScript",
        "md" | "markdown" => "Markdown",
        "go" => "Go",
        "java" => "Java",
        "kt" => "Kotlin",
        "rb" => "Ruby",
        "c" | "h" => "C",
        "cc" | "cpp" | "cxx" | "hpp" => "C++",
        "cs" => "C#",
        "swift" => "Swift",
        "sh" | "bash" => "Shell",
        "json" => "JSON",
        "yaml" | "yml" => "YAML",
        "toml" => "TOML",
        "html" => "HTML",
        "css" => "CSS",
        "sql" => "SQL",
        "ipynb" => "Jupyter Notebook",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_and_pull_requests_are_seen_in_bash_commands() {
        let c = |cmd: &str| {
            let c = creates(cmd);
            (c.commit, c.pull_request)
        };
        assert_eq!(c("git commit -m 'fix the parser'"), (true, false));
        assert_eq!(c("git add . && git -C repo commit -am x"), (true, false));
        assert_eq!(
            c("GIT_AUTHOR_NAME=a /usr/bin/git commit -m x"),
            (true, false)
        );
        assert_eq!(c("git commit --dry-run"), (false, false));
        assert_eq!(c("git log --grep commit"), (false, false));
        assert_eq!(c("echo git commit"), (false, false));
        assert_eq!(
            c("git push -u origin HEAD; gh pr create --fill"),
            (false, true)
        );
        assert_eq!(c("gh pr list"), (false, false));
    }

    #[test]
    fn user_time_is_the_time_between_keys_less_than_five_seconds_apart() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut u = UserTime::default();
        // The first key starts the count; 400 ms and 500 ms later, two more.
        assert!(!u.key(at(0)));
        assert!(!u.key(at(400)));
        assert!(!u.key(at(900)));
        assert_eq!(u.uncounted, Duration::from_millis(900));
        // Past a second: added now.
        assert!(u.key(at(1200)));
        assert_eq!(u.uncounted, Duration::from_millis(1200));
        u.uncounted = Duration::ZERO;
        // A pause of 5 s or more counts nothing, and ends a stretch.
        assert!(u.key(at(6200)));
        assert_eq!(u.uncounted, Duration::ZERO);
        // A prompt ran meanwhile: the time since the last key is cli's.
        u.pause();
        assert!(!u.key(at(6300)));
        assert_eq!(u.uncounted, Duration::ZERO);
        assert!(!u.key(at(6500)));
        assert_eq!(u.uncounted, Duration::from_millis(200));
    }

    #[test]
    fn a_plugins_id_hash_is_claude_codes() {
        // What Claude Code 2.1.330 exported for a `--plugin-dir` plugin
        // named hello, and for one of its own built-in plugins.
        assert_eq!(plugin_id_hash("hello", "inline"), "11daaa17733b7153");
        assert_eq!(
            plugin_id_hash("cc-plugin-agents-md", "builtin"),
            "da63145d0acbb62d"
        );
        // The marketplace in lower case (Python's hashlib, the same recipe).
        assert_eq!(plugin_id_hash("hello", "Acme-Tools"), "745951132556a5d7");
    }

    #[test]
    fn edits_count_changed_lines_and_name_the_language() {
        let input = serde_json::json!({
            "file_path": "src/a.rs",
            "old_string": "a\nb\nc",
            "new_string": "a\nB\nc\nd",
        });
        assert_eq!(edit_lines("Edit", &input), Some((2, 1, "Rust")));
        let write = serde_json::json!({"file_path": "x.unknownext", "content": "1\n2\n3\n"});
        assert_eq!(edit_lines("Write", &write), Some((3, 0, "unknown")));
        assert_eq!(edit_lines("Read", &write), None);
    }
}
