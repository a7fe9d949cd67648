//! `cadre -p`: Claude Code's top-level flags and its headless mode, in
//! text, json or stream-json, with stream-json input and the Agent SDK's
//! control protocol (see `docs/headless.md`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::args::{HeadlessArgs, InputFormat, MAX_INPUT_LINE_BYTES, SessionArgs};
use super::emit::{Emitter, Print, event_sink, send, wire_usage};
use super::headless_flags::plan;
use super::listings::{command_list, model_list, server_statuses};
use super::output::{OutputFormat, Progress, note, print_answer, print_line};
use super::prepare::{self, Extras, Mode, Prepared};
use super::results::{
    PromptStart, api_error, api_error_message, local_result, result_of, too_long_result,
};
use super::wire::{
    self, FromClient, Input, Output, ResultOut, ResultSubtype, ToClient, parse_mode,
};
use super::{CliError, GlobalArgs, commands};
use crate::config::PermissionMode;
use crate::message::{ContentBlock, Message};
use crate::provider::ProviderErrorKind;
use crate::raw::lines::Line;
use crate::runtime::{self, EventSink, Outcome, RunError, Session};

/// Requests cadre sends to the client and the answers it waits for.
#[derive(Default)]
struct Control {
    pending: Mutex<HashMap<String, oneshot::Sender<Result<Value, String>>>>,
    next: AtomicU64,
    /// The client's input ended: nothing can answer a request any more
    /// (a SessionEnd callback, say), so none is sent.
    closed: std::sync::atomic::AtomicBool,
}

impl Control {
    /// Sends a request and waits for its answer (`Err` when the client
    /// answered with an error or went away).
    async fn ask(&self, request: ToClient) -> Result<Value, String> {
        self.start(request).await
    }

    /// Sends a request now; the answer comes through the returned future.
    fn start(
        &self,
        request: ToClient,
    ) -> impl std::future::Future<Output = Result<Value, String>> + Send + 'static {
        let id = format!(
            "cadre_req_{}",
            self.next.fetch_add(1, Ordering::Relaxed) + 1
        );
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            // Checked under the lock `close` takes: a request is either
            // refused here or dropped there, never left waiting.
            if !self.closed.load(Ordering::Relaxed) {
                p.insert(id.clone(), tx);
            }
        }
        send(&Output::ControlRequest(wire::ControlRequestOut {
            request_id: id,
            request,
        }));
        async move {
            rx.await
                .unwrap_or_else(|_| Err("the client closed its input".into()))
        }
    }

    fn answer(&self, response: wire::ResponseIn) {
        let tx = self
            .pending
            .lock()
            .ok()
            .and_then(|mut p| p.remove(response.request_id()));
        if let Some(tx) = tx {
            let _ = tx.send(match response {
                wire::ResponseIn::Success { response, .. } => Ok(response),
                wire::ResponseIn::Error { error, .. } => Err(error),
            });
        }
    }

    /// The client is gone: every waiting request fails.
    fn close(&self) {
        if let Ok(mut p) = self.pending.lock() {
            self.closed.store(true, Ordering::Relaxed);
            p.clear();
        }
    }
}

/// The prompts read from stdin and not yet answered, each with the token
/// that cancels it. An interrupt cancels every prompt read before it —
/// the one running and any still queued — so what it stops depends only on
/// the order of the lines on stdin, never on how far the session loop got.
#[derive(Default)]
struct Prompts {
    open: Mutex<Vec<(u64, CancellationToken)>>,
    next: AtomicU64,
    /// Prompts not started yet, by the uuid their client gave them
    /// (`cancel_async_message`); a withdrawn one is dropped unrun.
    waiting: Mutex<Vec<(u64, String)>>,
    withdrawn: Mutex<Vec<u64>>,
}

impl Prompts {
    /// A prompt was read: its id and its token.
    fn admit(&self) -> (u64, CancellationToken) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        if let Ok(mut open) = self.open.lock() {
            open.push((id, token.clone()));
        }
        (id, token)
    }

    /// Prompt `id` came with `uuid`: it can be withdrawn until it starts.
    fn name(&self, id: u64, uuid: Option<&str>) {
        if let (Some(u), Ok(mut w)) = (uuid, self.waiting.lock()) {
            w.push((id, u.to_string()));
        }
    }

    /// Withdraws the waiting prompt with this uuid; whether there was one.
    fn withdraw(&self, uuid: &str) -> bool {
        let Ok(mut w) = self.waiting.lock() else {
            return false;
        };
        let Some(at) = w.iter().position(|(_, u)| u == uuid) else {
            return false;
        };
        let (id, _) = w.remove(at);
        if let Ok(mut d) = self.withdrawn.lock() {
            d.push(id);
        }
        true
    }

    /// Prompt `id` is about to run: `false` when it was withdrawn (it is
    /// then done, unrun).
    fn start(&self, id: u64) -> bool {
        if let Ok(mut w) = self.waiting.lock() {
            w.retain(|(i, _)| *i != id);
        }
        let withdrawn = self.withdrawn.lock().is_ok_and(|mut d| {
            let was = d.contains(&id);
            d.retain(|i| *i != id);
            was
        });
        if withdrawn {
            self.done(id);
        }
        !withdrawn
    }

    /// The prompt has its result.
    fn done(&self, id: u64) {
        if let Ok(mut open) = self.open.lock() {
            open.retain(|(i, _)| *i != id);
        }
    }

    /// Prompts read and not yet answered.
    fn queued(&self) -> u64 {
        self.open.lock().map_or(0, |open| open.len() as u64)
    }

    /// Cancels every open prompt; how many there were.
    fn interrupt(&self) -> usize {
        match self.open.lock() {
            Ok(open) => {
                for (_, t) in open.iter() {
                    t.cancel();
                }
                open.len()
            }
            Err(_) => 0,
        }
    }
}

/// A prompt from stdin with the token an interrupt cancels it by.
struct Prompt {
    message: Message,
    id: u64,
    cancel: CancellationToken,
    /// `client_composed`: sent as written, never a slash command.
    verbatim: bool,
    /// With `--replay-user-messages`: the message as the client sent it.
    echo: Option<Echo>,
    /// Echoed on the prompt's result (`origin`).
    origin: Option<wire::HumanOrigin>,
    /// The client's id for the message (its checkpoint's name).
    uuid: Option<String>,
}

/// A user message of stdin, kept to be echoed back (`--replay-user-messages`).
struct Echo {
    message: wire::UserApiMessage,
    parent_tool_use_id: Option<String>,
    origin: Option<Value>,
}

/// What the stdin reader hands the session loop.
enum Incoming {
    User(Prompt),
    Initialize {
        request_id: String,
        hooks: BTreeMap<String, Vec<wire::HookMatcherIn>>,
        agents: Option<Map<String, Value>>,
        forward_subagent_text: bool,
    },
    SetMode(PermissionMode),
    SetModel(Option<String>),
    /// `set_max_thinking_tokens`: the budget from the next prompt on.
    SetThinking(Option<u32>),
    /// Line `line` of stdin was longer than the cap and was skipped.
    TooLong {
        line: u64,
        bytes: u64,
    },
    /// A control request answered in `control.rs` that came before the
    /// session was set up.
    Control(String, Vec<u8>, super::control::Ctx),
    /// stdin ended (or could not be read).
    End,
}

/// A user message from stdin as a conversation message.
fn user_message(u: wire::UserIn) -> Result<Message, String> {
    if let Some(role) = u.message.role.as_deref()
        && role != "user"
    {
        return Err(format!("expected role \"user\", found {role:?}"));
    }
    match u.message.content {
        Value::String(s) => Ok(Message::user(vec![ContentBlock::text(s)])),
        v @ Value::Array(_) => serde_json::from_value::<Vec<ContentBlock>>(v)
            .map(Message::user)
            .map_err(|e| format!("content blocks: {e}")),
        other => Err(format!(
            "content must be a string or an array of blocks, found {other}"
        )),
    }
}

/// What the stdin reader passes its lines to.
struct Lines {
    replay: bool,
    tx: mpsc::UnboundedSender<Incoming>,
    control: Arc<Control>,
    prompts: Arc<Prompts>,
    engine: Arc<std::sync::OnceLock<Arc<runtime::Engine>>>,
    emitter: Emitter,
    started: std::time::Instant,
}

impl Lines {
    /// A user message (line `n`): a prompt for the session loop, kept as
    /// sent to be echoed with `replay`.
    fn user(&self, u: wire::UserIn, n: u64) {
        let verbatim = u.client_composed;
        let uuid = u.uuid.clone();
        let echo = self.replay.then(|| Echo {
            message: wire::UserApiMessage {
                role: "user",
                content: u.message.content.clone(),
            },
            parent_tool_use_id: u.parent_tool_use_id.clone(),
            origin: u.origin.clone(),
        });
        let origin = u.echoed_origin();
        match user_message(u) {
            Ok(message) => {
                let (id, cancel) = self.prompts.admit();
                self.prompts.name(id, uuid.as_deref());
                let _ = self.tx.send(Incoming::User(Prompt {
                    message,
                    id,
                    cancel,
                    verbatim,
                    echo,
                    origin,
                    uuid,
                }));
            }
            Err(e) => eprintln!("cadre: stdin:{n}: user message: {e}"),
        }
    }

    /// A control request (stdin line `line`): answered at once, passed
    /// to the session loop, or answered by `control.rs`.
    async fn request(&self, id: String, request: FromClient, line: &[u8]) {
        let (tx, engine) = (&self.tx, &self.engine);
        let mcp = engine.get().map(|e| &e.mcp);
        let reply = match request {
            FromClient::Initialize {
                hooks,
                agents,
                forward_subagent_text,
                rest,
            } => {
                let ignored: Vec<&str> = rest
                    .iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, _)| k.as_str())
                    .collect();
                if !ignored.is_empty() {
                    eprintln!(
                        "cadre: not supported in initialize: {} (ignored)",
                        ignored.join(", ")
                    );
                }
                let _ = tx.send(Incoming::Initialize {
                    request_id: id,
                    hooks: hooks.unwrap_or_default(),
                    agents,
                    forward_subagent_text: forward_subagent_text.unwrap_or(false),
                });
                None
            }
            FromClient::Interrupt => {
                // Acknowledged first, so the answer precedes the `result`
                // of the prompt it stops.
                send(&Output::ControlResponse(wire::ControlResponseOut::success(
                    &id,
                    wire::Done {},
                )));
                let n = self.prompts.interrupt();
                tracing::debug!("interrupt: {n} prompt(s) cancelled");
                None
            }
            FromClient::SetPermissionMode { mode } => Some(match parse_mode(&mode) {
                Ok(m) => {
                    let _ = tx.send(Incoming::SetMode(m));
                    wire::ControlResponseOut::success(&id, wire::Done {})
                }
                Err(e) => wire::ControlResponseOut::error(&id, e),
            }),
            FromClient::SetModel { model } => {
                // `default` (the first of `initialize`'s models): the
                // configured model, as `null`.
                let model = model.filter(|m| m != "default");
                let _ = tx.send(Incoming::SetModel(model));
                Some(wire::ControlResponseOut::success(&id, wire::Done {}))
            }
            FromClient::SetMaxThinkingTokens {
                max_thinking_tokens,
            } => {
                let _ = tx.send(Incoming::SetThinking(max_thinking_tokens));
                Some(wire::ControlResponseOut::success(&id, wire::Done {}))
            }
            FromClient::McpStatus => Some(wire::ControlResponseOut::success(
                &id,
                wire::McpStatusAnswer {
                    mcp_servers: mcp.map(|m| server_statuses(m)).unwrap_or_default(),
                },
            )),
            FromClient::StopTask { task_id } => {
                if let Some(task) = engine.get().and_then(|e| e.tasks.get(&task_id)) {
                    task.cancel.cancel();
                }
                Some(wire::ControlResponseOut::success(&id, wire::Done {}))
            }
            FromClient::GetContextUsage => Some(wire::ControlResponseOut::success(
                &id,
                context_usage(engine.get(), &self.emitter),
            )),
            FromClient::RewindFiles {
                user_message_id,
                dry_run,
            } => Some(self.rewind(&id, user_message_id.as_deref(), dry_run == Some(true))),
            FromClient::Unsupported => {
                self.elsewhere(id, line).await;
                None
            }
        };
        if let Some(r) = reply {
            send(&Output::ControlResponse(r));
        }
    }

    /// `rewind_files`, with Claude Code's answers: a failed dry run is a
    /// success saying why; a failed rewind an error.
    fn rewind(
        &self,
        id: &str,
        user_message_id: Option<&str>,
        dry_run: bool,
    ) -> wire::ControlResponseOut {
        let done = match self.engine.get().and_then(|e| e.file_history.as_ref()) {
            None => Err("File rewinding is not enabled.".to_string()),
            Some(h) => h.rewind(user_message_id.unwrap_or(""), dry_run),
        };
        match done {
            Ok(r) => wire::ControlResponseOut::success(id, rewind_answer(&r, dry_run)),
            Err(why) if dry_run => wire::ControlResponseOut::success(
                id,
                wire::RewindAnswer {
                    can_rewind: false,
                    error: Some(why),
                    files_changed: None,
                    insertions: None,
                    deletions: None,
                    skipped_links: None,
                },
            ),
            Err(why) => wire::ControlResponseOut::error(id, why),
        }
    }

    /// A request `control.rs` answers: now, or once the session is set up
    /// (or, for one that writes the transcript, between prompts).
    async fn elsewhere(&self, id: String, line: &[u8]) {
        let ctx = super::control::Ctx {
            engine: self.engine.get().cloned(),
            emitter: self.emitter.clone(),
            withdraw: {
                let p = Arc::clone(&self.prompts);
                Arc::new(move |uuid: &str| p.withdraw(uuid))
            },
            started: self.started,
            transcript: None,
        };
        if (ctx.engine.is_none() && super::control::needs_session(line))
            || super::control::needs_transcript(line)
        {
            // Answered by the session loop (which sets the session up,
            // as `initialize` does).
            let _ = self.tx.send(Incoming::Control(id, line.to_vec(), ctx));
        } else {
            super::control::respond(id, line.to_vec(), ctx).await;
        }
    }
}

/// Reads stdin lines until it ends: answers control responses and
/// interrupts at once, passes the rest on in order. No line longer than
/// `max` bytes is held: it is skipped to its newline and reported. With
/// `replay`, each user message is kept as sent, to be echoed.
#[allow(clippy::too_many_arguments)]
fn spawn_reader<R>(
    mut input: R,
    max: u64,
    replay: bool,
    tx: mpsc::UnboundedSender<Incoming>,
    control: Arc<Control>,
    prompts: Arc<Prompts>,
    engine: Arc<std::sync::OnceLock<Arc<runtime::Engine>>>,
    emitter: Emitter,
) where
    R: tokio::io::AsyncBufRead + Unpin + Send + 'static,
{
    let lines = Lines {
        replay,
        tx,
        control,
        prompts,
        engine,
        emitter,
        started: std::time::Instant::now(),
    };
    tokio::spawn(async move {
        let cap = usize::try_from(max).unwrap_or(usize::MAX);
        let mut line = Vec::new();
        let mut n = 0u64;
        loop {
            match crate::raw::lines::next_line(&mut input, &mut line, cap, |_| {}).await {
                Ok(Some(Line::Whole)) => {}
                Ok(Some(Line::TooLong(bytes))) => {
                    n += 1;
                    eprintln!(
                        "cadre: stdin:{n}: a line of {bytes} bytes, longer than the limit of \
                         {max} bytes (--max-input-line-bytes); skipped"
                    );
                    let _ = lines.tx.send(Incoming::TooLong { line: n, bytes });
                    continue;
                }
                Ok(None) => break,
                Err(e) => {
                    eprintln!("cadre: cannot read stdin: {e}");
                    break;
                }
            }
            n += 1;
            if line.trim_ascii().is_empty() {
                continue;
            }
            match serde_json::from_slice::<Input>(&line) {
                Ok(Input::User(u)) => lines.user(u, n),
                Ok(Input::ControlResponse(r)) => lines.control.answer(r.response),
                Ok(Input::ControlCancelRequest { .. } | Input::KeepAlive) => {}
                Ok(Input::ControlRequest(req)) => {
                    lines.request(req.request_id, req.request, &line).await;
                }
                Err(e) => eprintln!(
                    "cadre: stdin:{n}:{}: not a stream-json message: {e}",
                    e.column()
                ),
            }
        }
        tracing::debug!("stdin ended after {n} lines");
        lines.control.close();
        let _ = lines.tx.send(Incoming::End);
    });
}

/// wrote), against the model's window and the auto-compact threshold.
fn context_usage(engine: Option<&Arc<runtime::Engine>>, emitter: &Emitter) -> wire::ContextUsage {
    let (model, last) = emitter.main_context();
    let used = last.map_or(0, |u| u.total());
    let (window, limit, auto) = engine.map_or((0, 0, false), |e| {
        let snap = e.snapshot.load();
        let c = &snap.settings().compact;
        (c.window(&model), c.limit_for(&model, None, None), c.auto)
    });
    let free = window.saturating_sub(used);
    let percentage = used.saturating_mul(100).checked_div(window).unwrap_or(0);
    let category = |id, name, tokens, color, kind| wire::ContextCategory {
        id,
        name,
        tokens,
        color,
        kind,
    };
    wire::ContextUsage {
        categories: vec![
            category("messages", "Messages", used, "purple", "used"),
            category("free_space", "Free space", free, "promptBorder", "free"),
        ],
        total_tokens: used,
        max_tokens: window,
        raw_max_tokens: window,
        percentage,
        model,
        auto_compact_threshold: limit,
        is_auto_compact_enabled: auto,
        memory_files: Vec::new(),
        mcp_tools: Vec::new(),
        agents: Vec::new(),
        api_usage: last.map(|u| wire_usage(&u)),
    }
}

/// `rewind_files`' answer for a rewind done (or, dry, previewed).
fn rewind_answer(r: &runtime::file_history::Rewind, dry_run: bool) -> wire::RewindAnswer {
    let mut answer = wire::RewindAnswer {
        can_rewind: true,
        error: None,
        files_changed: None,
        insertions: None,
        deletions: None,
        skipped_links: None,
    };
    if dry_run {
        answer.files_changed = Some(
            r.files_changed
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
        );
        answer.insertions = Some(r.insertions);
        answer.deletions = Some(r.deletions);
    } else {
        answer.skipped_links = Some(r.skipped_links);
    }
    answer
}

/// The hook events whose callbacks cadre calls (Claude Code's names;
/// `Stop` is the main session's stop).
const CLIENT_HOOK_EVENTS: [&str; 30] = [
    "MessageDisplay",
    "FileChanged",
    "DirectoryAdded",
    "Setup",
    "CwdChanged",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Stop",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "SessionStart",
    "SessionEnd",
    "Notification",
    "PermissionRequest",
    "PermissionDenied",
    "PreModelSwitch",
    "PostModelSwitch",
    "PreSkillShellCommand",
    "StopFailure",
    "ConfigChange",
    "InstructionsLoaded",
    "WorktreeCreate",
    "WorktreeRemove",
    "PostToolBatch",
    "Elicitation",
    "ElicitationResult",
];

/// Calls the client's callbacks registered for `event` whose matcher
/// selects `target`, in order; the answers of those that answered in time.
async fn call_client_hooks(
    control: &Control,
    matchers: &[wire::HookMatcherIn],
    event: &str,
    target: &str,
    input: &Value,
) -> Vec<Value> {
    let mut out = Vec::new();
    let tool_use_id = input
        .get("tool_use_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    for m in matchers {
        if !wire::matcher_selects(m.matcher.as_deref(), target) {
            continue;
        }
        // The SDKs give a timeout in seconds; Claude Code's default is 60.
        let secs = m
            .timeout
            .filter(|t| t.is_finite() && *t > 0.0)
            .unwrap_or(60.0)
            .min(86_400.0);
        for id in &m.hook_callback_ids {
            let ask = control.ask(ToClient::HookCallback {
                callback_id: id.clone(),
                input: input.clone(),
                tool_use_id: tool_use_id.clone(),
            });
            let failure =
                match tokio::time::timeout(std::time::Duration::from_secs_f64(secs), ask).await {
                    Ok(Ok(v)) => {
                        match wire::read_answer::<wire::HookOutputIn>("hook_callback", v.clone()) {
                            Ok(_) => {
                                out.push(v);
                                continue;
                            }
                            Err(why) => format!("{event} hook callback {id}: {why}"),
                        }
                    }
                    Ok(Err(e)) => format!("{event} hook callback {id} failed: {e}"),
                    Err(_) => format!("{event} hook callback {id} gave no answer within {secs} s"),
                };
            if m.on_failure.as_deref().is_some_and(|f| f != "continue") {
                eprintln!("cadre: {failure}; it blocks (onFailure)");
                out.push(json!({"decision": "block", "reason": failure}));
            } else {
                eprintln!("cadre: {failure}; going on without it");
            }
        }
    }
    out
}

/// The client's hook callbacks as the engine calls them.
fn client_hooks(
    control: Arc<Control>,
    hooks: BTreeMap<String, Vec<wire::HookMatcherIn>>,
) -> runtime::ClientHooks {
    let hooks = Arc::new(hooks);
    runtime::ClientHooks {
        events: hooks.keys().cloned().collect(),
        call: Arc::new(move |event: &'static str, target: String, input: Value| {
            let control = Arc::clone(&control);
            let hooks = Arc::clone(&hooks);
            Box::pin(async move {
                let Some(matchers) = hooks.get(event) else {
                    return Vec::new();
                };
                call_client_hooks(&control, matchers, event, &target, &input).await
            })
        }),
    }
}

/// Reaches the client's in-process MCP servers named `names`: each
/// connection is a stream whose JSON-RPC lines travel as `mcp_message`
/// control requests, the client's `mcp_response` coming back as a line.
fn sdk_connector(control: Arc<Control>, names: Vec<String>) -> crate::mcp::LocalConnector {
    Arc::new(move |name: &str| {
        if !names.iter().any(|n| n == name) {
            return None;
        }
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        spawn_sdk_bridge(Arc::clone(&control), name.to_string(), theirs);
        Some(ours)
    })
}

fn spawn_sdk_bridge(control: Arc<Control>, server: String, stream: tokio::io::DuplexStream) {
    use tokio::io::AsyncWriteExt;
    let (read, mut write) = tokio::io::split(stream);
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            if write.write_all(line.as_bytes()).await.is_err() {
                break;
            }
        }
    });
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                tracing::warn!("SDK MCP server {server}: a line that is not JSON was dropped");
                continue;
            };
            let id = message.get("id").cloned();
            let is_request = id.is_some() && message.get("method").is_some();
            // Sent in the order written, answered whenever the client can.
            let answer = control.start(ToClient::McpMessage {
                server_name: server.clone(),
                message,
            });
            let tx = tx.clone();
            tokio::spawn(async move {
                let answer = answer.await;
                if !is_request {
                    return;
                }
                let error = |text: String| json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": text}});
                let response = match answer
                    .and_then(|v| wire::read_answer::<wire::McpAnswerIn>("mcp_message", v))
                {
                    Ok(a) => a.mcp_response,
                    Err(e) => error(e),
                };
                let _ = tx.send(format!("{response}\n"));
            });
        }
    });
}

/// `can_use_tool` through the client.
fn client_asker(control: Arc<Control>, prompts: Arc<Prompts>) -> runtime::Asker {
    Arc::new(move |ask: runtime::AskRequest| {
        let control = Arc::clone(&control);
        let prompts = Arc::clone(&prompts);
        Box::pin(async move {
            let answer = control
                .ask(wire::can_use_tool(wire::PermissionAsk {
                    tool: ask.tool,
                    input: ask.input,
                    tool_use_id: ask.tool_use_id,
                    agent_id: ask.agent_id,
                    reason: ask.reason,
                    question: ask.question,
                    cwd: std::env::current_dir().unwrap_or_default(),
                }))
                .await;
            match answer {
                Ok(v) => {
                    let a = wire::permission_answer(&v);
                    if let Some(why) = a.invalid {
                        eprintln!("cadre: {why}; the call is denied");
                        return runtime::AskAnswer {
                            allow: false,
                            unreadable: Some(why),
                            ..runtime::AskAnswer::default()
                        };
                    }
                    if a.interrupt {
                        // Denied, and the prompt's run stops (Claude
                        // Code's `interrupt: true`).
                        prompts.interrupt();
                    }
                    for p in &a.problems {
                        eprintln!("cadre: can_use_tool answer: {p}; that update is ignored");
                    }
                    let updates = super::remember::keep(a.updates);
                    runtime::AskAnswer {
                        allow: a.allow,
                        message: a.message,
                        unreadable: None,
                        updated_input: a.updated_input,
                        updates,
                    }
                }
                Err(e) => {
                    eprintln!("cadre: can_use_tool failed, the call is denied: {e}");
                    false.into()
                }
            }
        })
    })
}

/// MCP servers' requests for input, forwarded to the client as
/// `elicitation` control requests; a failed request declines.
fn client_elicitor(control: Arc<Control>) -> crate::mcp::Elicitor {
    Arc::new(move |ask: crate::mcp::Elicitation| {
        let control = Arc::clone(&control);
        Box::pin(async move {
            let server = ask.server.clone();
            let answer = control
                .ask(ToClient::Elicitation {
                    mcp_server_name: ask.server,
                    message: ask.message,
                    mode: ask.mode.to_string(),
                    url: ask.url,
                    elicitation_id: ask.elicitation_id,
                    requested_schema: ask.requested_schema,
                })
                .await;
            match answer.and_then(|v| wire::elicitation_answer(&v)) {
                Ok(a) => a,
                Err(e) => {
                    eprintln!(
                        "cadre: the elicitation request of MCP server `{server}` failed, declined: {e}"
                    );
                    crate::mcp::ElicitAnswer::declined()
                }
            }
        })
    })
}

/// AskUserQuestion through the client's `can_use_tool`, as Claude Code's
/// SDK does it: the client shows the questions and allows the call with
/// `updatedInput.answers` (question → answer); a denial is a refusal.
fn client_questioner(control: Arc<Control>) -> runtime::ask_user::Questioner {
    use runtime::ask_user::Unanswered;
    Arc::new(move |q: runtime::ask_user::QuestionRequest| {
        let control = Arc::clone(&control);
        Box::pin(async move {
            let answer = control
                .ask(ToClient::CanUseTool {
                    tool_name: runtime::ask_user::ASK_USER_QUESTION.to_string(),
                    display_name: runtime::ask_user::ASK_USER_QUESTION.to_string(),
                    description: "the model asks the user questions".to_string(),
                    blocked_path: None,
                    input: q.input,
                    permission_suggestions: Vec::new(),
                    tool_use_id: q.tool_use_id,
                    agent_id: (q.agent_id != "main").then_some(q.agent_id),
                    decision_reason: "the model asks the user questions".to_string(),
                })
                .await
                .map_err(|e| Unanswered::Failed {
                    error: e.to_string(),
                })?;
            let read = wire::permission_answer(&answer);
            if let Some(error) = read.invalid {
                return Err(Unanswered::Failed { error });
            }
            if !read.allow {
                return Err(Unanswered::Declined {
                    message: read.message,
                });
            }
            read.updated_input
                .as_ref()
                .and_then(runtime::ask_user::answers_from_input)
                .ok_or(Unanswered::NoAnswers)
        })
    })
}

/// Merges agents from `initialize` into the `--agents` JSON.
fn merge_agents(g: &mut GlobalArgs, agents: Map<String, Value>) {
    let mut all = match g.agents.as_deref().map(serde_json::from_str::<Value>) {
        Some(Ok(Value::Object(m))) => m,
        _ => Map::new(),
    };
    all.extend(agents);
    g.agents = Some(Value::Object(all).to_string());
}

/// The `system`/`init` message for the session as it is now.
fn init_message(engine: &runtime::Engine, model_source: &str, session: &Session) -> Output {
    let snap = engine.snapshot.load_full();
    let spec = session.spec();
    let kind = snap.session_kind(spec.kind.interactive);
    let mut tools = spec.tool_names.clone();
    tools.extend(
        engine
            .mcp
            .tools(&["main"])
            .iter()
            .map(|t| crate::tools::Tool::name(&**t).to_string()),
    );
    let mcp_servers = server_statuses(&engine.mcp);
    Output::System(wire::System::Init(Box::new(wire::Init {
        cwd: spec.cwd.display().to_string(),
        session_id: engine.session_id.clone(),
        tools,
        mcp_servers,
        model: spec.model.clone(),
        permission_mode: spec.mode.as_str().to_string(),
        slash_commands: runtime::commands::slash_commands(&snap),
        api_key_source: "none".into(),
        claude_code_version: wire::CLAUDE_CODE_VERSION.into(),
        output_style: snap.chosen_output_style(),
        agents: snap
            .visible_agents(kind)
            .iter()
            .map(|d| d.name.clone())
            .collect(),
        skills: snap
            .skills
            .skills
            .values()
            .filter(|s| s.kind == crate::catalog::SkillKind::Skill)
            .map(|s| s.name.clone())
            .collect(),
        plugins: snap.config.plugins.iter().map(|p| p.init_entry()).collect(),
        uuid: wire::new_uuid(),
        original_cwd: std::env::current_dir()
            .unwrap_or_else(|_| spec.cwd.clone())
            .display()
            .to_string(),
        additional_directories: engine
            .added_dirs(&snap, &spec.cwd)
            .iter()
            .map(|d| d.display().to_string())
            .collect(),
        cadre_version: wire::CADRE_VERSION.into(),
        model_source: model_source.into(),
        reload_generation: snap.generation,
    })))
}

/// `initialize`'s `agents`: those the main session may call, with their
/// description and, when set, their model.
fn agent_list(engine: &runtime::Engine, session: &Session) -> Vec<wire::AgentEntry> {
    let snap = engine.snapshot.load();
    let kind = snap.session_kind(session.spec().kind.interactive);
    snap.visible_agents(kind)
        .iter()
        .map(|d| wire::AgentEntry {
            name: d.name.clone(),
            description: d.description.clone(),
            model: d.model.clone(),
        })
        .collect()
}

/// `initialize`'s `account`: cadre has no login; the provider's key
/// variable, when it is set.
fn account(engine: &runtime::Engine) -> wire::Account {
    let snap = engine.snapshot.load();
    let provider = &snap.settings().provider;
    let key_env = crate::provider::key_env(provider);
    let has_key = engine
        .env
        .iter()
        .any(|(k, v)| *k == key_env && !v.is_empty());
    wire::Account {
        token_source: "none",
        api_key_source: if has_key { key_env } else { "none".into() },
        api_provider: crate::provider::api_provider(provider.kind),
    }
}

/// `system`/`session_state_changed`.
fn session_state(session_id: &str, state: &'static str) -> Output {
    Output::System(wire::System::SessionStateChanged(
        wire::SessionStateChanged {
            state,
            uuid: wire::new_uuid(),
            session_id: session_id.to_string(),
        },
    ))
}

/// Runs one prompt with interrupts, the budget and Ctrl-C wired to its cancel.
async fn run_prompt(
    session: &mut Session,
    emitter: &Emitter,
    cancel: CancellationToken,
) -> Result<Outcome, RunError> {
    session.set_cancel(cancel.clone());
    session.begin_prompt();
    if emitter.accounts().over_budget {
        cancel.cancel();
    }
    let r = tokio::select! {
        r = session.run() => r,
        _ = super::signals::interrupted() => {
            cancel.cancel();
            Err(RunError::Cancelled)
        }
    };
    emitter.set_current(None);
    if matches!(r, Err(RunError::Cancelled)) {
        session.repair_after_cancel();
    }
    r
}

/// `cadre -p …` and the SDKs' invocation.
pub async fn headless(g: &GlobalArgs, h: HeadlessArgs) -> Result<(), CliError> {
    let mut g = g.clone();
    let plan = plan(&g, &h)?;
    let print = match plan.output {
        OutputFormat::StreamJson if h.include_partial_messages => Print::Partials,
        OutputFormat::StreamJson => Print::Messages,
        _ => Print::Nothing,
    };
    let emitter = Emitter::new(
        print,
        String::new(),
        String::new(),
        BTreeMap::new(),
        h.max_budget_usd,
    );
    let control = Arc::new(Control::default());
    let prompts = Arc::new(Prompts::default());
    // Set once the session is set up, for `mcp_status`.
    let live_engine = Arc::new(std::sync::OnceLock::new());
    let mut extras = plan.extras;
    let mut session_args = plan.session;
    let reader = Reader {
        control: Arc::clone(&control),
        prompts: Arc::clone(&prompts),
        engine: Arc::clone(&live_engine),
        emitter: emitter.clone(),
    };
    let mut opening = open_input(&mut g, &h, plan.input, &mut session_args, reader).await?;
    let session_id = extras
        .session_id
        .clone()
        .unwrap_or_else(prepare::new_session_id);
    extras.session_id = Some(session_id);
    let hooks = std::mem::take(&mut opening.hooks);
    let asker = wire_client(
        &g,
        (&control, &prompts),
        &mut extras,
        hooks,
        (&plan.sdk_servers, plan.stdio_permissions, plan.input),
    );
    let progress = (plan.output == OutputFormat::Text).then(|| Progress::new(false, g.quiet));
    let events = event_sink(&emitter, progress.as_ref());
    // What `/clear` sets a new session up with.
    let clear_with = (Arc::clone(&events), asker.clone(), extras.clone());
    let prepared =
        match prepare::prepare_with(&g, &session_args, headless_mode(), events, asker, extras) {
            Ok(p) => p,
            Err(e) => {
                let init = opening.init_reply.as_deref();
                return Err(setup_failed(e, init, &session_args, &emitter));
            }
        };
    let reload = prepared.watch();
    let _ = live_engine.set(Arc::clone(&prepared.engine));
    // A resumed session keeps its own id.
    emitter.configure(
        &prepared.engine.session_id,
        &prepared.session.spec().model,
        prepared.engine.snapshot.load().settings(),
    );
    if let Some(id) = &opening.init_reply {
        answer_initialize(id, &prepared);
    }
    let Prepared {
        mut session,
        engine,
        def,
        model_source,
        ..
    } = prepared;
    if let Some(spec) = plan.structured.clone() {
        session.set_structured_output(spec);
    }
    if let Some(effort) = &h.effort {
        session.set_effort(effort.clone());
    }
    if let Some(t) = opening.thinking {
        session.set_thinking_budget(t);
    }
    // As in `run`: the first request offers the MCP tools of every server
    // that came up within mcp.startup_timeout_ms.
    let startup =
        std::time::Duration::from_millis(engine.snapshot.load().settings().mcp.startup_timeout_ms);
    prepare::wait_for_servers(&engine, progress.as_deref(), startup).await;
    for (id, line, mut ctx) in std::mem::take(&mut opening.early_control) {
        ctx.engine = Some(Arc::clone(&engine));
        ctx.transcript = Some(Arc::clone(session.transcript()));
        super::control::respond(id, line, ctx).await;
    }
    // A resumed conversation already has its first message (and memory).
    let source = if session_args.resuming() {
        "resume"
    } else {
        "startup"
    };
    if let Some(trigger) = h.setup_trigger() {
        session.setup_hooks(trigger).await;
    }
    let start_context = session.session_start_hooks(source).await;
    if h.init_only {
        session.session_end_hooks("other").await;
        return Ok(());
    }
    let run = Run {
        g: &g,
        output: plan.output,
        input: plan.input,
        emitter: &emitter,
        prompts: &prompts,
        progress,
        startup,
        max_line: h.max_input_line_bytes.unwrap_or(MAX_INPUT_LINE_BYTES),
        // Claude Code's `session_state_changed` messages, which clients such
        // as the ACP adapters ask for with this variable and wait on.
        state_events: plan.output == OutputFormat::StreamJson
            && std::env::var("CLAUDE_CODE_EMIT_SESSION_STATE_EVENTS")
                .is_ok_and(|v| matches!(v.trim(), "1" | "true")),
        model_source,
        session_args: &session_args,
        clear_with,
    };
    let mut live = Live {
        is_first: !session_args.resuming(),
        session,
        engine,
        def,
        _reload: reload,
        start_context,
        last_error: false,
        last_failed: false,
        last_text: String::new(),
        last_result: None,
    };
    for (line, bytes) in std::mem::take(&mut opening.skipped) {
        run.too_long(&mut live, line, bytes);
    }
    run.serve(&mut live, &mut opening).await?;
    live.session.session_end_hooks("other").await;
    // The session is over: children still running end with it.
    live.engine
        .shutdown(std::time::Duration::from_secs(5))
        .await;
    finish(plan.output, &live)
}

/// How headless mode sets a main session up.
fn headless_mode() -> Mode {
    Mode {
        interactive: false,
        write_transcripts: true,
        wait_for_background: true,
        connect_mcp: true,
    }
}

/// What the stdin reader shares with the session loop.
struct Reader {
    control: Arc<Control>,
    prompts: Arc<Prompts>,
    engine: Arc<std::sync::OnceLock<Arc<runtime::Engine>>>,
    emitter: Emitter,
}

/// What was read before the session was set up.
#[derive(Default)]
struct Opening {
    rx: Option<mpsc::UnboundedReceiver<Incoming>>,
    first: Option<Prompt>,
    hooks: BTreeMap<String, Vec<wire::HookMatcherIn>>,
    /// The `initialize` request to answer once the session is set up.
    init_reply: Option<String>,
    /// `set_max_thinking_tokens` read before the session was set up.
    thinking: Option<Option<u32>>,
    /// Over-long lines read before the session was set up.
    skipped: Vec<(u64, u64)>,
    /// Control requests answered in `control.rs` that came before the
    /// session was set up: answered once it is.
    early_control: Vec<(String, Vec<u8>, super::control::Ctx)>,
}

/// Text input: one prompt. Stream input: the reader, then initialize (if
/// the client sends it) before the first user message.
async fn open_input(
    g: &mut GlobalArgs,
    h: &HeadlessArgs,
    input: InputFormat,
    session_args: &mut SessionArgs,
    reader: Reader,
) -> Result<Opening, CliError> {
    let mut opening = Opening::default();
    match input {
        // `--init-only` reads no prompt: it runs hooks and ends.
        _ if h.init_only => {}
        InputFormat::Text => {
            let text = match h.prompt.clone() {
                Some(p) => p,
                None => super::args::read_stdin_prompt("after -p")?,
            };
            let (id, cancel) = reader.prompts.admit();
            opening.first = Some(Prompt {
                message: Message::user_text(text),
                id,
                cancel,
                verbatim: false,
                echo: None,
                origin: None,
                uuid: None,
            });
        }
        InputFormat::StreamJson => {
            if h.prompt.is_some() {
                return Err(CliError::Usage(
                    "with --input-format stream-json the prompts come on stdin, not as an argument"
                        .into(),
                ));
            }
            let (tx, mut r) = mpsc::unbounded_channel();
            spawn_reader(
                tokio::io::BufReader::new(tokio::io::stdin()),
                h.max_input_line_bytes.unwrap_or(MAX_INPUT_LINE_BYTES),
                h.replay_user_messages.is_some(),
                tx,
                reader.control,
                reader.prompts,
                reader.engine,
                reader.emitter.clone(),
            );
            loop {
                match r.recv().await {
                    Some(Incoming::Initialize {
                        request_id,
                        hooks: hk,
                        agents,
                        forward_subagent_text,
                    }) => {
                        if let Some(a) = agents {
                            merge_agents(g, a);
                        }
                        reader.emitter.forward_subagent_text(forward_subagent_text);
                        opening.hooks = hk;
                        opening.init_reply = Some(request_id);
                        // Answered once the session is set up (or failed to be).
                        break;
                    }
                    Some(Incoming::User(m)) => {
                        opening.first = Some(m);
                        break;
                    }
                    Some(Incoming::Control(id, line, ctx)) => {
                        opening.early_control.push((id, line, ctx));
                        break;
                    }
                    Some(Incoming::SetMode(m)) => session_args.permission_mode = Some(m),
                    Some(Incoming::SetModel(m)) => session_args.model = m,
                    Some(Incoming::SetThinking(t)) => opening.thinking = Some(t),
                    // Answered once the session is set up, in order.
                    Some(Incoming::TooLong { line, bytes }) => opening.skipped.push((line, bytes)),
                    Some(Incoming::End) | None => break,
                }
            }
            opening.rx = Some(r);
        }
    }
    Ok(opening)
}

/// The SDK client's parts of the session: its hook callbacks, its
/// in-process MCP servers, its answers to permission questions,
/// elicitations and AskUserQuestion, file checkpoints.
fn wire_client(
    g: &GlobalArgs,
    (control, prompts): (&Arc<Control>, &Arc<Prompts>),
    extras: &mut Extras,
    hooks: BTreeMap<String, Vec<wire::HookMatcherIn>>,
    (sdk_servers, stdio_permissions, input): (&[String], bool, InputFormat),
) -> Option<runtime::Asker> {
    let unsupported_hooks: Vec<String> = hooks
        .keys()
        .filter(|e| !CLIENT_HOOK_EVENTS.contains(&e.as_str()))
        .cloned()
        .collect();
    if !unsupported_hooks.is_empty() {
        note(
            g,
            &format!(
                "not supported: SDK hook callbacks for {} (cadre has no such event; they are never called)",
                unsupported_hooks.join(", ")
            ),
        );
    }
    if !hooks.is_empty() {
        extras.client_hooks = Some(client_hooks(Arc::clone(control), hooks));
    }
    if !sdk_servers.is_empty() {
        extras.mcp_local = Some(sdk_connector(Arc::clone(control), sdk_servers.to_vec()));
    }
    let asker = stdio_permissions.then(|| client_asker(Arc::clone(control), Arc::clone(prompts)));
    if input == InputFormat::StreamJson {
        extras.elicitor = Some(client_elicitor(Arc::clone(control)));
    }
    if stdio_permissions {
        extras.questioner = Some(client_questioner(Arc::clone(control)));
    }
    // The SDKs' `enable_file_checkpointing`.
    extras.file_checkpoints = std::env::var("CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING")
        .is_ok_and(|v| matches!(v.trim(), "1" | "true"));
    asker
}

/// The session could not be set up: the error, after what the client
/// waits for.
fn setup_failed(
    e: CliError,
    init_reply: Option<&str>,
    session_args: &SessionArgs,
    emitter: &Emitter,
) -> CliError {
    // A session that cannot be resumed (unknown id, a truncating resume
    // refused) ends the process before any answer, as Claude Code checks
    // it before it reads stdin: the SDKs raise their process error with
    // the reason from stderr. (The process ends now: the reader of stdin
    // would keep it waiting for a client that waits for the answer.)
    if init_reply.is_some() && session_args.resuming() {
        let start = PromptStart::now(emitter);
        let failed = Err(RunError::Limit(e.to_string()));
        let id = prepare::new_session_id();
        send(&Output::Result(result_of(emitter, &id, &start, &failed, 0)));
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    if let Some(id) = init_reply {
        send(&Output::ControlResponse(wire::ControlResponseOut::error(
            id,
            e.to_string(),
        )));
    }
    e
}

/// The answer to `initialize`, once the session is set up.
fn answer_initialize(id: &str, prepared: &Prepared) {
    let snap = prepared.engine.snapshot.load();
    send(&Output::InitializeResponse(
        wire::ControlResponseOut::success(
            id,
            wire::InitializeAnswer {
                commands: command_list(&snap),
                output_style: snap.chosen_output_style(),
                available_output_styles: snap.output_styles.names(),
                models: model_list(&snap),
                agents: agent_list(&prepared.engine, &prepared.session),
                account: account(&prepared.engine),
                pid: std::process::id(),
                claude_code_version: wire::CLAUDE_CODE_VERSION,
                current_permission_mode: prepared.session.spec().mode.as_str().to_string(),
                // No prompt has been read yet.
                session_state: "idle",
                // None of Claude Code's optional protocol extensions.
                capabilities: Vec::new(),
                hook_on_failure_supported: true,
                hooks_applied: true,
            },
        )
        // cadre answers `initialize` before it runs anything: no permission
        // request can be waiting yet.
        .with_pending_permission_requests(Vec::new()),
    ));
}

/// What a headless run keeps for its whole length.
struct Run<'a> {
    g: &'a GlobalArgs,
    output: OutputFormat,
    input: InputFormat,
    emitter: &'a Emitter,
    prompts: &'a Prompts,
    progress: Option<Arc<Progress>>,
    startup: std::time::Duration,
    max_line: u64,
    state_events: bool,
    model_source: &'static str,
    session_args: &'a SessionArgs,
    /// What `/clear` sets a new session up with.
    clear_with: (EventSink, Option<runtime::Asker>, Extras),
}

/// The session a headless run drives, and what its end reports.
struct Live {
    session: Session,
    engine: Arc<runtime::Engine>,
    def: Option<Arc<crate::catalog::AgentDef>>,
    _reload: Option<crate::reload::ReloadHandle>,
    is_first: bool,
    /// SessionStart's context, joining the first prompt that is sent.
    start_context: Vec<ContentBlock>,
    last_error: bool,
    last_failed: bool,
    last_text: String,
    last_result: Option<ResultOut>,
}

/// A prompt's text, or a built-in's, answered without the model.
type Local = (String, Option<&'static str>);

impl Run<'_> {
    /// Answers the prompts, the first one read and then stdin's, until
    /// stdin ends or a prompt stops the session.
    async fn serve(&self, live: &mut Live, opening: &mut Opening) -> Result<(), CliError> {
        let mut first = opening.first.take();
        loop {
            let prompt = match first.take() {
                Some(m) => m,
                None => match opening.rx.as_mut() {
                    None => return Ok(()),
                    Some(r) => match self.next_prompt(live, r).await {
                        Some(p) => p,
                        None => return Ok(()),
                    },
                },
            };
            // Withdrawn while it waited (`cancel_async_message`).
            if !self.prompts.start(prompt.id) {
                continue;
            }
            if self.answer(live, prompt).await? {
                return Ok(());
            }
        }
    }

    /// Answers a stdin line longer than the cap with an error `result`.
    fn too_long(&self, live: &mut Live, line: u64, bytes: u64) {
        let result = too_long_result(
            self.emitter,
            &live.engine.session_id,
            line,
            bytes,
            self.max_line,
        );
        send(&Output::Result(result.clone()));
        live.last_error = true;
        live.last_result = Some(result);
    }

    /// The next prompt from stdin, after the requests that come between
    /// prompts; `None` when stdin ended.
    async fn next_prompt(
        &self,
        live: &mut Live,
        r: &mut mpsc::UnboundedReceiver<Incoming>,
    ) -> Option<Prompt> {
        loop {
            let (session, engine) = (&mut live.session, &live.engine);
            match r.recv().await {
                Some(Incoming::User(p)) => return Some(p),
                Some(Incoming::SetMode(m)) => {
                    session.set_mode(m, "sdk");
                    // The client's latest word wins over an earlier
                    // permission update's mode.
                    if let Ok(mut g) = engine.grants.lock() {
                        g.mode = None;
                    }
                }
                Some(Incoming::SetThinking(t)) => session.set_thinking_budget(t),
                Some(Incoming::SetModel(m)) => {
                    let snap = engine.snapshot.load_full();
                    let requested = m.unwrap_or_else(|| snap.settings().provider.model.clone());
                    let model = snap.resolve_alias(&requested).to_string();
                    if let Err(why) = session.pre_model_switch_hooks(&requested, "sdk").await {
                        note(
                            self.g,
                            &format!("the model stays {}: {why}", session.spec().model),
                        );
                        continue;
                    }
                    let from = session.spec().model.clone();
                    self.emitter.set_main_model(&model);
                    session.set_model(model);
                    session.post_model_switch_hooks(&from, "sdk").await;
                }
                Some(Incoming::Initialize { request_id, .. }) => {
                    send(&Output::ControlResponse(wire::ControlResponseOut::error(
                        &request_id,
                        "already initialized",
                    )));
                }
                Some(Incoming::Control(id, line, mut ctx)) => {
                    ctx.engine = Some(Arc::clone(engine));
                    ctx.transcript = Some(Arc::clone(session.transcript()));
                    super::control::respond(id, line, ctx).await;
                }
                Some(Incoming::TooLong { line, bytes }) => self.too_long(live, line, bytes),
                Some(Incoming::End) | None => return None,
            }
        }
    }

    /// Runs one prompt and sends its `result`; `true` when the session
    /// stops after it (the budget is spent, or text input met a
    /// configuration problem).
    async fn answer(&self, live: &mut Live, prompt: Prompt) -> Result<bool, CliError> {
        let Prompt {
            message,
            id: prompt_id,
            cancel,
            verbatim,
            echo,
            origin,
            uuid: client_uuid,
        } = prompt;
        let was_first = live.is_first;
        let prompt_text = message
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect::<Vec<_>>()
            .join("\n");
        // The budget stop cancels the prompt running; an interrupt has had
        // this token since the prompt was read.
        self.emitter.set_current(Some(cancel.clone()));
        self.begin(live, echo, client_uuid);
        let start = PromptStart::now(self.emitter);
        // UserPromptSubmit sees the prompt as typed, before a slash
        // command is expanded.
        let mut contexts = Vec::new();
        let mut blocked = None;
        // UserPromptSubmit: the settings' hooks and the client's callbacks.
        match live.session.user_prompt_hooks(&prompt_text).await {
            Ok(c) => contexts = c,
            Err(reason) => blocked = Some(reason),
        }
        let mut local: Option<Local> = None;
        let mut active = None;
        let mut content = Vec::new();
        if verbatim && blocked.is_none() {
            content = message.content;
        } else if blocked.is_none() {
            match self.expand(live, message.content).await? {
                Ok((blocks, skill)) => {
                    content = blocks;
                    active = skill;
                }
                Err(l) => local = Some(l),
            }
        }
        if let Some((text, command)) = local {
            self.prompts.done(prompt_id);
            let mut result =
                local_result(self.emitter, &live.engine.session_id, &start, text, command);
            result.origin = origin;
            result.queued_turn_count = self.prompts.queued();
            live.last_error = false;
            live.last_failed = false;
            live.last_text = result.result.clone();
            if self.output == OutputFormat::StreamJson {
                send(&Output::Result(result.clone()));
            }
            if self.state_events {
                send(&session_state(&live.engine.session_id, "idle"));
            }
            live.last_result = Some(result);
            return Ok(false);
        }
        let mut message = if live.is_first {
            prepare::first_message_with(&live.engine, live.def.as_deref(), content)
        } else {
            Message::user(content)
        };
        live.is_first = false;
        message.content.extend(contexts);
        // SessionStart's context joins the first prompt that is sent.
        message.content.append(&mut live.start_context);
        let outcome = match &blocked {
            // A blocked prompt never joins the conversation (the next one
            // is the first, if this was).
            Some(_) => {
                live.is_first = was_first;
                Err(RunError::Cancelled)
            }
            None => {
                live.session.push_user_with(message, active);
                run_prompt(&mut live.session, self.emitter, cancel).await
            }
        };
        self.prompts.done(prompt_id);
        let mut result = result_of(
            self.emitter,
            &live.engine.session_id,
            &start,
            &outcome,
            live.session.turns_this_prompt(),
        );
        result.origin = origin;
        result.queued_turn_count = self.prompts.queued();
        if let Some(reason) = blocked {
            result.errors = vec![format!(
                "UserPromptSubmit hook blocked the prompt: {reason}"
            )];
            result.result = reason;
        }
        Ok(self.report(live, &outcome, result))
    }

    /// Before a prompt runs: the mode a permission update set, the
    /// `running` state, `init`, and the prompt's echo; its file checkpoint
    /// starts.
    fn begin(&self, live: &mut Live, echo: Option<Echo>, client_uuid: Option<String>) {
        let engine = &live.engine;
        // A mode set by a permission update becomes the session's own
        // (reported in `init`, inherited by sub-agents).
        let granted = engine.grants.lock().ok().and_then(|mut g| g.mode.take());
        if let Some(m) = granted {
            live.session.set_mode(m, "sdk");
        }
        if self.state_events {
            send(&session_state(&engine.session_id, "running"));
        }
        if self.emitter.prints() {
            send(&init_message(engine, self.model_source, &live.session));
        }
        // The message's id: the client's, or a new one; `rewind_files`
        // names a checkpoint by it.
        let message_uuid = client_uuid.unwrap_or_else(wire::new_uuid);
        if let Some(history) = &engine.file_history {
            history.begin(&message_uuid);
        }
        if let Some(e) = echo
            && self.output == OutputFormat::StreamJson
        {
            send(&Output::UserReplay(wire::UserReplay {
                message: e.message,
                parent_tool_use_id: e.parent_tool_use_id,
                session_id: engine.session_id.clone(),
                uuid: message_uuid,
                timestamp: crate::clock::now_rfc3339(),
                is_replay: true,
                origin: e.origin,
            }));
        }
    }

    /// Slash commands: a built-in is carried out here (`Err`: its text),
    /// a skill or command is expanded (its shell lines run now), anything
    /// else is sent as it is.
    async fn expand(
        &self,
        live: &mut Live,
        blocks: Vec<ContentBlock>,
    ) -> Result<Result<(Vec<ContentBlock>, Option<runtime::todos::ActiveSkill>), Local>, CliError>
    {
        Ok(match live.session.prompted(blocks).await {
            runtime::commands::Prompted::Send {
                blocks,
                skill,
                notes,
            } => {
                for n in &notes {
                    note(self.g, n);
                }
                Ok((blocks, skill))
            }
            runtime::commands::Prompted::Local(text) => Err((text, None)),
            runtime::commands::Prompted::Builtin("clear", _) => {
                self.clear(live).await?;
                Err((String::new(), Some("clear")))
            }
            runtime::commands::Prompted::Builtin("compact", instructions) => {
                let text =
                    commands::compact_now(&mut live.session, &live.engine, &instructions).await;
                Err((text, Some("compact")))
            }
            runtime::commands::Prompted::Builtin(name, _) => Err((
                commands::help_text(&live.engine, name, false).await,
                Some(name),
            )),
        })
    }

    /// `/clear`: the session ends and a new one starts under a new id.
    async fn clear(&self, live: &mut Live) -> Result<(), CliError> {
        let old = live.engine.session_id.clone();
        live.session.session_end_hooks("clear").await;
        live.engine
            .shutdown(std::time::Duration::from_secs(5))
            .await;
        live.session
            .transcript()
            .record("end", json!({"status": "completed", "cleared": true}));
        let fresh = SessionArgs {
            resume: None,
            continue_latest: false,
            fork_session: false,
            ..self.session_args.clone()
        };
        let new_id = prepare::new_session_id();
        let (events, asker, extras) = &self.clear_with;
        let mut extras = extras.clone();
        extras.session_id = Some(new_id.clone());
        let prepared = prepare::prepare_with(
            self.g,
            &fresh,
            headless_mode(),
            Arc::clone(events),
            asker.clone(),
            extras,
        )?;
        live._reload = prepared.watch();
        self.emitter.configure(
            &prepared.engine.session_id,
            &prepared.session.spec().model,
            prepared.engine.snapshot.load().settings(),
        );
        live.session = prepared.session;
        live.engine = prepared.engine;
        live.def = prepared.def;
        prepare::wait_for_servers(&live.engine, self.progress.as_deref(), self.startup).await;
        live.is_first = true;
        live.start_context = live.session.session_start_hooks("clear").await;
        if self.emitter.prints() {
            let id = wire::new_uuid();
            send(&Output::ConversationReset(wire::ConversationReset {
                new_conversation_id: new_id,
                uuid: id,
                trigger: "clear".into(),
                timestamp: crate::clock::now_rfc3339(),
                session_id: old,
            }));
            send(&init_message(
                &live.engine,
                self.model_source,
                &live.session,
            ));
        }
        Ok(())
    }

    /// Sends a run's `result` (after the API error message of a failed
    /// model request) and says on stderr why it failed; `true` when the
    /// session stops after it.
    fn report(
        &self,
        live: &mut Live,
        outcome: &Result<Outcome, RunError>,
        result: ResultOut,
    ) -> bool {
        live.last_error = result.is_error;
        live.last_text = result.result.clone();
        if self.output == OutputFormat::StreamJson {
            if let Err(RunError::Provider(p)) = outcome
                && let Some(fields) = api_error(p)
            {
                send(&api_error_message(
                    &live.engine.session_id,
                    &result.result,
                    fields,
                ));
            }
            send(&Output::Result(result.clone()));
        }
        if self.state_events {
            send(&session_state(&live.engine.session_id, "idle"));
        }
        if let Err(e) = outcome
            && !matches!(e, RunError::Cancelled)
        {
            eprintln!("error: {e}");
        }
        let over = result.subtype == ResultSubtype::ErrorMaxBudgetUsd;
        // A run that ended without an answer says why.
        if outcome.is_ok() && result.is_error {
            for e in &result.errors {
                eprintln!("error: {e}");
            }
        }
        live.last_failed = outcome.is_err();
        if over {
            note(self.g, "stopped: the session reached --max-budget-usd");
        }
        let config_problem =
            matches!(outcome, Err(RunError::Provider(p)) if p.kind == ProviderErrorKind::Config);
        live.last_result = Some(result);
        over || (config_problem && self.input == InputFormat::Text)
    }
}

/// What text and json output print once the session is over, and the
/// exit status.
fn finish(output: OutputFormat, live: &Live) -> Result<(), CliError> {
    match output {
        OutputFormat::Text => {
            if let Some(r) = &live.last_result {
                // A failure's text went to stderr; an answer, even a
                // partial one, goes to stdout. A failed model request's
                // text goes to stdout too, as Claude Code prints it there.
                if live.last_failed {
                    if matches!(r.terminal_reason, Some("api_error" | "prompt_too_long")) {
                        print_line(&r.result);
                    }
                    return Err(CliError::Exit(1));
                }
                if !r.is_error || !live.last_text.trim().is_empty() {
                    print_answer(&live.last_text);
                }
            }
        }
        OutputFormat::Json => {
            if let Some(r) = &live.last_result {
                print_line(&serde_json::to_string(&Output::Result(r.clone())).unwrap_or_default());
            }
        }
        OutputFormat::StreamJson => {}
    }
    if live.last_error {
        return Err(CliError::Exit(1));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::mpsc;

    use super::{Control, Incoming, Prompts, spawn_reader};

    const USER: &str = r#"{"type":"user","message":{"role":"user","content":"hi"}}"#;
    const INTERRUPT: &str =
        r#"{"type":"control_request","request_id":"i","request":{"subtype":"interrupt"}}"#;

    /// What the session loop would see of `input`: for each prompt,
    /// whether it is cancelled once stdin has been read to its end.
    async fn cancelled_prompts(input: String) -> Vec<bool> {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let prompts = Arc::new(Prompts::default());
        spawn_reader(
            std::io::Cursor::new(input.into_bytes()),
            super::MAX_INPUT_LINE_BYTES,
            false,
            tx,
            Arc::new(Control::default()),
            Arc::clone(&prompts),
            Arc::new(std::sync::OnceLock::new()),
            super::Emitter::new(
                super::Print::Nothing,
                String::new(),
                String::new(),
                std::collections::BTreeMap::new(),
                None,
            ),
        );
        let mut seen = Vec::new();
        let mut tokens = Vec::new();
        while let Some(i) = rx.recv().await {
            match i {
                Incoming::User(p) => tokens.push(p.cancel),
                Incoming::End => break,
                _ => {}
            }
        }
        for t in tokens {
            seen.push(t.is_cancelled());
        }
        seen
    }

    /// The session loop takes a prompt from the channel some time after
    /// the reader read it; an interrupt read in between must still stop it
    /// (it used to find no prompt running and be lost).
    #[tokio::test]
    async fn an_interrupt_stops_every_prompt_read_before_it_however_late_the_loop() {
        let input = format!("{USER}\n{INTERRUPT}\n{USER}\n");
        assert_eq!(cancelled_prompts(input).await, [true, false]);
        let input = format!("{INTERRUPT}\n{USER}\n{USER}\n{INTERRUPT}\n");
        assert_eq!(cancelled_prompts(input).await, [true, true]);
    }

    #[test]
    fn a_finished_prompt_is_not_cancelled_again() {
        let p = Prompts::default();
        let (a, ta) = p.admit();
        let (_, tb) = p.admit();
        p.done(a);
        assert_eq!(p.interrupt(), 1);
        assert!(!ta.is_cancelled());
        assert!(tb.is_cancelled());
    }
}
