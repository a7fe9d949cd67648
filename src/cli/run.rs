//! `cadre run`, `cadre chat` and `cadre render`: a main session against the
//! configured provider.

use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::output::{
    OutputFormat, Progress, SessionArg, print_line, result_object, stream_json_sink,
};
use super::{CliError, GlobalArgs, Overrides, load_snapshot};
use crate::catalog::AgentDef;
use crate::config::PermissionMode;
use crate::message::{ContentBlock, Message, Role};
use crate::provider::{Provider, ProviderErrorKind};
use crate::reload::{self, ReloadHandle};
use crate::runtime::{
    self, Engine, EventSink, RunError, Session, SessionSpec, StopKind, transcript::Transcript,
};
use crate::snapshot::SnapshotInput;

#[derive(Debug, Clone, Args)]
pub struct SessionArgs {
    /// Run as this agent (its prompt, tools and model) instead of the default main agent.
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// Model for the main session (an alias from [models] or a full id).
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// Stop after this many model turns.
    #[arg(long, value_name = "N")]
    max_turns: Option<u32>,
    /// Permission mode of the main session.
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    permission_mode: Option<PermissionMode>,
    /// A folder besides the working directory where edits need no rule;
    /// repeatable.
    #[arg(long = "add-dir", value_name = "DIR")]
    add_dirs: Vec<PathBuf>,
}

fn parse_mode(s: &str) -> Result<PermissionMode, String> {
    match s.parse::<PermissionMode>()? {
        PermissionMode::Bubble => Err("`bubble` is internal to forks".into()),
        m => Ok(m),
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The task. Read from stdin when absent.
    prompt: Option<String>,
    #[command(flatten)]
    session: SessionArgs,
    #[arg(long, value_enum, default_value = "text")]
    output_format: OutputFormat,
    /// Treat this run as interactive for flag gates (it still never prompts).
    #[arg(long = "session", value_enum, default_value = "non-interactive")]
    kind: SessionArg,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    session: SessionArgs,
}

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The task (stdin when absent).
    prompt: Option<String>,
    #[command(flatten)]
    session: SessionArgs,
    #[arg(long = "session", value_enum, default_value = "non-interactive")]
    kind: SessionArg,
}

/// A main session ready to run.
struct Prepared {
    session: Session,
    engine: Arc<Engine>,
    def: Option<Arc<AgentDef>>,
    /// What the snapshot was built from, for the reload watcher.
    input: SnapshotInput,
    interactive: bool,
}

impl Prepared {
    /// Starts reloading the engine's snapshot when its files change; the
    /// watcher stops when the handle is dropped.
    fn watch(&self) -> Option<ReloadHandle> {
        reload::spawn(
            self.input.clone(),
            Arc::clone(&self.engine.snapshot),
            self.interactive,
        )
    }
}

/// How a main session is set up.
struct Mode {
    /// The session kind for flag gates.
    interactive: bool,
    write_transcripts: bool,
    /// `run` waits for background children before it ends; `chat` does not.
    wait_for_background: bool,
    /// Start the MCP servers (`render` starts no process).
    connect_mcp: bool,
}

fn prepare(
    g: &GlobalArgs,
    args: &SessionArgs,
    how: Mode,
    events: EventSink,
    asker: Option<runtime::Asker>,
) -> Result<Prepared, CliError> {
    let Mode {
        interactive,
        write_transcripts,
        wait_for_background,
        connect_mcp,
    } = how;
    let overrides = Overrides {
        model: args.model.clone(),
        permission_mode: args.permission_mode,
    };
    let (input, swap) = load_snapshot(g, &overrides)?;
    let snap = swap.load_full();
    let kind = snap.session_kind(interactive);
    let def = match &args.agent {
        Some(name) => Some(snap.visible_agent(name, kind).cloned().ok_or_else(|| {
            let names: Vec<&str> = snap
                .visible_agents(kind)
                .iter()
                .map(|d| d.name.as_str())
                .collect();
            CliError::Usage(format!(
                "--agent {name}: no such agent. Available agents: {}",
                names.join(", ")
            ))
        })?),
        None => None,
    };
    let settings = snap.settings();
    // A model set by managed settings is not for a user to change.
    let managed_model = snap
        .config
        .origins
        .of("provider.model")
        .is_some_and(|o| o.scope == crate::config::Scope::Managed);
    let model_written = match (&args.model, def.as_ref().and_then(|d| d.model.as_deref())) {
        _ if managed_model => settings.provider.model.clone(),
        (Some(m), _) => m.clone(),
        (None, Some(m)) if !m.eq_ignore_ascii_case("inherit") => m.to_string(),
        _ => settings.provider.model.clone(),
    };
    let model = snap.resolve_alias(&model_written).to_string();
    let provider = Provider::new(&settings.provider, &input.load.env)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let tools = crate::tools::builtin_tools();
    let available = runtime::available_tools(&snap, tools.iter().map(|t| t.name()));
    let tool_names = runtime::main_tool_pool(&available, &snap, kind, def.as_deref());
    let session_id = new_session_id();
    let session_dir: Option<PathBuf> = (write_transcripts && settings.transcripts.enabled)
        .then(|| settings.transcripts.dir.join(&session_id));
    if session_dir.is_some()
        && let Some(days) = settings.transcripts.cleanup_period_days
    {
        let n = runtime::transcript::remove_old_sessions(&settings.transcripts.dir, days);
        if n > 0 {
            tracing::info!("removed {n} session folder(s) older than {days} days");
        }
    }
    let mut engine = Engine::new(
        Arc::clone(&swap),
        provider,
        tools,
        input.load.env.clone(),
        session_dir.clone(),
        session_id,
        events,
        asker,
    );
    for d in &args.add_dirs {
        let d = input.load.cwd.join(d);
        if !d.is_dir() {
            return Err(CliError::Usage(format!(
                "--add-dir {}: not a directory",
                d.display()
            )));
        }
        engine.add_dirs.push(d);
    }
    let engine = Arc::new(engine);
    // MCP servers start connecting now, in the background (each turn
    // re-syncs them with the snapshot).
    if connect_mcp {
        engine.mcp.set_extra_roots(engine.add_dirs.clone());
        if settings.mcp.sampling {
            engine.mcp.set_sampler(Some(sampler(
                Arc::downgrade(&engine),
                model.clone(),
                settings.provider.max_tokens,
            )));
        }
        engine.mcp.sync(&snap.mcp_servers, &input.load.cwd);
    }
    let transcript = match &session_dir {
        Some(d) => Transcript::open(d.join("main.jsonl"), "main", None),
        None => Transcript::disabled("main", None),
    };
    let mode = match def.as_ref().and_then(|d| d.permission_mode) {
        Some(m) if args.permission_mode.is_none() => m,
        _ => settings.permissions.default_mode,
    };
    // `disableBypassPermissionsMode` holds for an `--agent` definition too.
    let mode =
        if mode == PermissionMode::BypassPermissions && snap.config.bypass_disabled_by.is_some() {
            PermissionMode::Default
        } else {
            mode
        };
    let max_turns = args
        .max_turns
        .or_else(|| def.as_ref().and_then(|d| d.max_turns))
        .unwrap_or(settings.agents.default_max_turns);
    let spec = SessionSpec {
        agent_id: "main".into(),
        parent_agent_id: None,
        def: def.clone(),
        is_main: true,
        model,
        kind,
        mode,
        depth: 0,
        frozen: None,
        started_by_fork: false,
        max_turns,
        cwd: input.load.cwd.clone(),
        tool_names,
        wait_for_background,
    };
    let session = Session::new(
        Arc::clone(&engine),
        spec,
        Vec::new(),
        Arc::new(transcript),
        CancellationToken::new(),
    );
    Ok(Prepared {
        session,
        engine,
        def,
        input,
        interactive,
    })
}

/// Answers MCP sampling requests with the engine's provider and the main
/// session's model, without tools; the server's `maxTokens` is capped at
/// `provider.max_tokens`. Holds the engine weakly (the engine holds the
/// MCP manager, which holds this).
fn sampler(engine: std::sync::Weak<Engine>, model: String, max_tokens: u32) -> crate::mcp::Sampler {
    Arc::new(move |sample: crate::mcp::Sample| {
        let engine = engine.clone();
        let model = model.clone();
        Box::pin(async move {
            let engine = engine
                .upgrade()
                .ok_or_else(|| "the session has ended".to_string())?;
            let request = crate::message::ModelRequest {
                model,
                system: Arc::from(sample.system.unwrap_or_default()),
                tools: Arc::from(Vec::new()),
                messages: sample.messages.into_iter().map(Arc::new).collect(),
                max_tokens: sample.max_tokens.clamp(1, max_tokens.max(1)),
                sampling: crate::message::Sampling::default(),
            };
            let response = engine
                .provider
                .send(&request, &|_| {})
                .await
                .map_err(|e| e.to_string())?;
            let text: Vec<&str> = response
                .message
                .content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            tracing::info!(
                server = %sample.server,
                output_tokens = response.usage.output_tokens,
                "MCP sampling request answered"
            );
            let stop_reason = response.stop_reason.map(|r| {
                match r {
                    crate::message::StopReason::MaxTokens => "maxTokens",
                    crate::message::StopReason::StopSequence => "stopSequence",
                    _ => "endTurn",
                }
                .to_string()
            });
            Ok(crate::mcp::Sampled {
                text: text.join(""),
                model: response.model,
                stop_reason,
            })
        })
    })
}

fn new_session_id() -> String {
    let t = jiff::Timestamp::now().strftime("%Y%m%dT%H%M%S").to_string();
    format!("{t}-{:08x}", rand::random::<u32>())
}

fn read_prompt(prompt: Option<String>) -> Result<String, CliError> {
    if let Some(p) = prompt {
        return Ok(p);
    }
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(CliError::Usage(
            "no prompt: give one as an argument or on stdin".into(),
        ));
    }
    let mut text = String::new();
    stdin
        .lock()
        .read_to_string(&mut text)
        .map_err(|e| CliError::Usage(format!("cannot read stdin: {e}")))?;
    if text.trim().is_empty() {
        return Err(CliError::Usage("no prompt: stdin was empty".into()));
    }
    Ok(text)
}

/// The first user message: project memory (unless the agent is one that
/// goes without it), the agent's `initialPrompt` (for `--agent`), then the
/// prompt.
fn first_message(engine: &runtime::Engine, def: Option<&AgentDef>, prompt: String) -> Message {
    let mut blocks = Vec::new();
    if runtime::gets_memory(def)
        && let Some(memory) = runtime::memory_block(&engine.snapshot.load())
    {
        blocks.push(ContentBlock::text(memory));
    }
    if let Some(initial) = def.and_then(|d| d.initial_prompt.clone()) {
        blocks.push(ContentBlock::text(initial));
    }
    blocks.push(ContentBlock::text(prompt));
    Message::user(blocks)
}

pub async fn run(g: &GlobalArgs, args: RunArgs) -> Result<(), CliError> {
    let prompt = read_prompt(args.prompt)?;
    let started = Instant::now();
    let progress = match args.output_format {
        OutputFormat::StreamJson => None,
        _ => Some(Progress::new(false)),
    };
    let events: EventSink = match &progress {
        Some(p) => p.sink(),
        None => stream_json_sink(),
    };
    let prepared = prepare(
        g,
        &args.session,
        Mode {
            interactive: args.kind.interactive(),
            write_transcripts: true,
            wait_for_background: true,
            connect_mcp: true,
        },
        events,
        None,
    )?;
    let _reload = prepared.watch();
    let Prepared {
        mut session,
        engine,
        def,
        ..
    } = prepared;
    session.push_user(first_message(&engine, def.as_deref(), prompt));
    let cancel = CancellationToken::new();
    session.set_cancel(cancel.clone());
    // SIGINT and SIGTERM end the run alike (cli/signals.rs).
    let mut signal = None;
    let startup =
        std::time::Duration::from_millis(engine.snapshot.load().settings().mcp.startup_timeout_ms);
    let result = tokio::select! {
        r = async {
            wait_for_servers(&engine, progress.as_deref(), startup).await;
            session.run().await
        } => r,
        name = super::signals::interrupted() => {
            cancel.cancel();
            signal = Some(name);
            Err(RunError::Cancelled)
        }
    };
    // Anything still running ends with the process: record it as killed.
    engine.shutdown(std::time::Duration::from_secs(5)).await;
    let status = match &result {
        Ok(_) => "completed",
        Err(RunError::Cancelled) => "killed",
        Err(_) => "failed",
    };
    session.transcript().record(
        "end",
        serde_json::json!({"status": status, "signal": signal}),
    );
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let session_id = engine.session_id.clone();
    match result {
        Ok(outcome) => {
            let text = outcome.final_text.clone().unwrap_or_default().join("\n");
            let stop = outcome.stop.as_str();
            if outcome.stop == StopKind::MaxTurns && !g.quiet {
                eprintln!(
                    "warning: stopped after {} turns (the turn limit)",
                    outcome.turns
                );
            }
            if outcome.stop == StopKind::MaxTokens && !g.quiet {
                eprintln!("warning: the answer was cut at provider.max_tokens");
            }
            if text.trim().is_empty() && !g.quiet {
                eprintln!("{}", empty_answer_warning(stop, outcome.turns));
            }
            let usage = serde_json::to_value(outcome.usage).unwrap_or(Value::Null);
            match args.output_format {
                OutputFormat::Text => print_line(&text),
                OutputFormat::Json => super::output::print_json(&result_object(
                    &text,
                    false,
                    outcome.turns,
                    duration_ms,
                    &usage,
                    &session_id,
                    stop,
                ))?,
                OutputFormat::StreamJson => {
                    print_line(
                        &result_object(
                            &text,
                            false,
                            outcome.turns,
                            duration_ms,
                            &usage,
                            &session_id,
                            stop,
                        )
                        .to_string(),
                    );
                }
            }
            Ok(())
        }
        Err(e) => {
            let msg = e.to_string();
            let config_problem =
                matches!(&e, RunError::Provider(p) if p.kind == ProviderErrorKind::Config);
            match args.output_format {
                OutputFormat::Text if config_problem => Err(CliError::Usage(msg)),
                OutputFormat::Text => Err(CliError::Failed(msg)),
                OutputFormat::Json | OutputFormat::StreamJson => {
                    let obj = result_object(
                        &msg,
                        true,
                        0,
                        duration_ms,
                        &Value::Null,
                        &session_id,
                        "error",
                    );
                    if args.output_format == OutputFormat::Json {
                        super::output::print_json(&obj)?;
                    } else {
                        print_line(&obj.to_string());
                    }
                    eprintln!("error: {msg}");
                    Err(CliError::Exit(1))
                }
            }
        }
    }
}

/// Before the first request of a one-shot run: waits until every MCP
/// server is ready or has failed (failures are reported as they happen),
/// at most `limit`, with the wait on a progress line. Servers still
/// connecting after that are reported; the run goes on without them, and
/// their tools join a later turn if they become ready.
async fn wait_for_servers(
    engine: &Engine,
    progress: Option<&Progress>,
    limit: std::time::Duration,
) {
    use crate::mcp::ServerState;
    if engine.mcp.states().is_empty() {
        return;
    }
    let bar = progress.map(|p| p.status(String::new()));
    let pending = engine
        .mcp
        .wait_settled(limit, |states| {
            if let Some(bar) = &bar {
                let ready = states
                    .values()
                    .filter(|s| **s == ServerState::Ready)
                    .count();
                let waiting: Vec<&str> = states
                    .iter()
                    .filter(|(_, s)| **s == ServerState::Connecting)
                    .map(|(n, _)| n.as_str())
                    .collect();
                bar.set_message(format!(
                    "MCP servers: {ready} of {} ready, waiting for {}",
                    states.len(),
                    waiting.join(", ")
                ));
            }
        })
        .await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if !pending.is_empty() {
        tracing::warn!(
            "MCP server(s) {} still connecting after {} ms (mcp.startup_timeout_ms); \
             the first turn goes without their tools",
            pending
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", "),
            limit.as_millis()
        );
    }
}

pub async fn render(g: &GlobalArgs, args: RenderArgs) -> Result<(), CliError> {
    let prompt = read_prompt(args.prompt)?;
    let events: EventSink = Arc::new(|_: &runtime::EngineEvent| {});
    let Prepared {
        mut session,
        engine,
        def,
        ..
    } = prepare(
        g,
        &args.session,
        Mode {
            interactive: args.kind.interactive(),
            write_transcripts: false,
            wait_for_background: true,
            connect_mcp: false,
        },
        events,
        None,
    )?;
    // Rendering sends nothing and starts nothing: MCP servers (processes,
    // connections) are left alone, so their tools are not in the body.
    let servers = engine.snapshot.load().mcp_servers.len();
    if servers > 0 && !g.quiet {
        eprintln!(
            "cadre: render starts no MCP server, so the tools of the {servers} configured \
             server(s) are not in this request; `cadre tools schema --mcp` lists them"
        );
    }
    session.push_user(first_message(&engine, def.as_deref(), prompt));
    let request = session
        .next_request()
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let body = engine.provider.request_body(&request);
    let value: Value = serde_json::from_slice(&body)
        .map_err(|e| CliError::Failed(format!("request body is not JSON: {e}")))?;
    super::output::print_json(&value)
}

/// In a terminal, asks whether to trust a folder whose project settings
/// were skipped, and records the answer with the user's trust list.
fn offer_trust(g: &GlobalArgs) -> Result<(), CliError> {
    use std::io::IsTerminal;
    if g.trust || !std::io::stdin().is_terminal() {
        return Ok(());
    }
    let input = super::snapshot_input(g, &super::Overrides::default())?;
    let snap = crate::snapshot::build(&input, 1)?;
    if snap.config.trusted || snap.config.skipped.is_empty() {
        return Ok(());
    }
    super::report_untrusted(&snap);
    eprint!(
        "Trust {} and use these settings? [y/N] ",
        snap.config.trust_root.display()
    );
    let mut line = String::new();
    if std::io::stdin().read_line(&mut line).is_err() || !matches!(line.trim(), "y" | "Y" | "yes") {
        return Ok(());
    }
    let mut store = crate::config::trust::TrustStore::load(crate::config::trust::store_path(|k| {
        std::env::var(k).ok()
    }))
    .map_err(CliError::Usage)?;
    store.grant(&snap.config.trust_root);
    store.save().map_err(CliError::Failed)?;
    eprintln!("trusted: {}", snap.config.trust_root.display());
    Ok(())
}

pub async fn chat(g: &GlobalArgs, args: ChatArgs) -> Result<(), CliError> {
    offer_trust(g)?;
    let progress = Progress::new(true);
    let asker: runtime::Asker = Arc::new(|question: String| {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                eprint!("{question}\nAllow? [y/N] ");
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).is_ok()
                    && matches!(line.trim(), "y" | "Y" | "yes")
            })
            .await
            .unwrap_or(false)
        })
    });
    let prepared = prepare(
        g,
        &args.session,
        Mode {
            interactive: true,
            write_transcripts: true,
            wait_for_background: false,
            connect_mcp: true,
        },
        progress.sink(),
        Some(asker),
    )?;
    let _reload = prepared.watch();
    let Prepared {
        mut session,
        def,
        engine,
        ..
    } = prepared;
    // SIGTERM ends the chat at any point, even at the prompt: the turn in
    // flight is cancelled (its Bash groups killed), tasks and MCP servers
    // are stopped, the transcript gets its final line, then the process
    // exits with 143 (128 + SIGTERM).
    let current: Arc<std::sync::Mutex<CancellationToken>> =
        Arc::new(std::sync::Mutex::new(CancellationToken::new()));
    {
        let current = Arc::clone(&current);
        let engine = Arc::clone(&engine);
        let transcript = Arc::clone(session.transcript());
        tokio::spawn(async move {
            super::signals::terminated().await;
            if let Ok(c) = current.lock() {
                c.cancel();
            }
            engine.shutdown(std::time::Duration::from_secs(5)).await;
            transcript.record(
                "end",
                serde_json::json!({"status": "killed", "signal": "SIGTERM"}),
            );
            std::process::exit(143);
        });
    }
    let mut editor = rustyline::DefaultEditor::new()
        .map_err(|e| CliError::Failed(format!("cannot start the line editor: {e}")))?;
    eprintln!("cadre chat — type a task; Ctrl-C cancels a running turn, Ctrl-D quits.");
    let mut first = true;
    loop {
        let line = match editor.readline("› ") {
            Ok(l) => l,
            Err(rustyline::error::ReadlineError::Interrupted) => continue,
            Err(rustyline::error::ReadlineError::Eof) => break,
            Err(e) => return Err(CliError::Failed(format!("input: {e}"))),
        };
        if line.trim().is_empty() {
            continue;
        }
        let _ = editor.add_history_entry(line.as_str());
        let message = if first {
            first_message(&engine, def.as_deref(), line)
        } else {
            Message::user_text(line)
        };
        first = false;
        session.push_user(message);
        let before = session.history().len();
        let cancel = CancellationToken::new();
        if let Ok(mut c) = current.lock() {
            *c = cancel.clone();
        }
        session.set_cancel(cancel.clone());
        let result = tokio::select! {
            r = session.run() => Some(r),
            _ = tokio::signal::ctrl_c() => { cancel.cancel(); None }
        };
        outln!();
        match result {
            Some(Ok(outcome)) => {
                // Only this prompt's replies count: an earlier answer in the
                // conversation does not answer this one.
                let replies = session.history().get(before..).unwrap_or_default();
                let answered = replies.iter().any(|m| {
                    m.role == Role::Assistant
                        && m.content
                            .iter()
                            .filter_map(ContentBlock::as_text)
                            .any(|t| !t.trim().is_empty())
                });
                if !answered {
                    eprintln!(
                        "{}",
                        empty_answer_warning(outcome.stop.as_str(), outcome.turns)
                    );
                }
            }
            Some(Err(e)) => eprintln!("error: {e}"),
            None => {
                session.repair_after_cancel();
                eprintln!("(cancelled)");
            }
        }
    }
    engine.shutdown(std::time::Duration::from_secs(5)).await;
    session
        .transcript()
        .record("end", serde_json::json!({"status": "completed"}));
    Ok(())
}

/// What the user is told when a session ends without any answer text, so
/// an empty line on stdout never goes unexplained.
fn empty_answer_warning(stop: &str, turns: u32) -> String {
    format!(
        "warning: the model ended without an answer: no reply of this session had text \
         (last stop: {stop}, after {turns} turn{})",
        if turns == 1 { "" } else { "s" }
    )
}
