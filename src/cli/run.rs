//! `cadre run`, `cadre chat` and `cadre render`: a main session against the
//! configured provider.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::emit::{Emitter, Print};
use super::headless::{PromptStart, local_result, result_of};
use super::output::{OutputFormat, Progress, SessionArg, print_answer, print_line};
use super::wire::Output;
use super::{CliError, GlobalArgs, Overrides, load_snapshot};
use crate::catalog::AgentDef;
use crate::config::PermissionMode;
use crate::message::{ContentBlock, Message, Role};
use crate::provider::{Provider, ProviderErrorKind};
use crate::reload::{self, ReloadHandle};
use crate::runtime::{
    self, Engine, EventSink, RunError, Session, StopKind, transcript::Transcript,
};
use crate::snapshot::SnapshotInput;

#[derive(Debug, Clone, Default, Args)]
pub struct SessionArgs {
    /// Run as this agent (its prompt, tools and model) instead of the default main agent.
    #[arg(long, value_name = "NAME")]
    pub(super) agent: Option<String>,
    /// Model for the main session (an alias from [models] or a full id).
    #[arg(long, value_name = "MODEL")]
    pub(super) model: Option<String>,
    /// Stop after this many model turns.
    #[arg(long, value_name = "N")]
    pub(super) max_turns: Option<u32>,
    /// Permission mode of the main session.
    #[arg(long, value_name = "MODE", value_parser = parse_mode)]
    pub(super) permission_mode: Option<PermissionMode>,
    /// A folder besides the working directory where edits need no rule;
    /// repeatable.
    #[arg(long = "add-dir", value_name = "DIR")]
    pub(super) add_dirs: Vec<PathBuf>,
    /// Continue session ID (see `cadre sessions list`) from its transcript.
    #[arg(long, value_name = "ID", conflicts_with = "continue_latest")]
    pub(super) resume: Option<String>,
    /// Continue the latest session of this project.
    #[arg(short = 'c', long = "continue")]
    pub(super) continue_latest: bool,
    /// With --resume or --continue: write to a new session (a copy) and
    /// leave the original as it was.
    #[arg(long)]
    pub(super) fork_session: bool,
    /// With --resume and --fork-session: continue from this message (its
    /// `uuid` in the transcript, as the stream's messages carry it),
    /// leaving out what came after it (Claude Code's truncating resume).
    #[arg(long, value_name = "UUID", requires = "fork_session")]
    pub(super) resume_session_at: Option<String>,
    /// With --resume-session-at: the `uuid` of the prompt of the turn this
    /// leaves out; the resume is refused unless what is left out is that
    /// one turn.
    #[arg(long, value_name = "UUID", requires = "resume_session_at")]
    pub(super) resume_drops_turn: Option<String>,
    /// With AGENT_TEAMS on: lead the team NAME (its folder under
    /// `agents.teams_dir`, shared with any other session that names it).
    /// Without it the team is named after the session.
    #[arg(long, value_name = "NAME")]
    pub(super) team: Option<String>,
}

impl SessionArgs {
    pub(super) fn resuming(&self) -> bool {
        self.resume.is_some() || self.continue_latest
    }
}

/// What the headless flags add to a main session's setup.
#[derive(Default, Clone)]
pub(super) struct Extras {
    /// Settings given as `CADRE_*` variables (`--mcp-config` servers).
    pub env: Vec<(String, String)>,
    /// `--allowedTools`/`--disallowedTools`: the command-line layer's rules.
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// `--tools`: only these built-in tools (`None` = all).
    pub tools: Option<Vec<String>>,
    /// Tools removed from the main session's pool (bare names of `--disallowedTools`).
    pub remove_tools: Vec<String>,
    pub session_id: Option<String>,
    pub main_prompt: runtime::MainPrompt,
    pub client_hooks: Option<runtime::ClientHooks>,
    /// Who answers MCP servers' requests for input (`None` declines them).
    pub elicitor: Option<crate::mcp::Elicitor>,
    /// Who answers AskUserQuestion (`None`: nobody; the model decides).
    pub questioner: Option<runtime::ask_user::Questioner>,
    /// Reaches the SDK client's in-process MCP servers.
    pub mcp_local: Option<crate::mcp::LocalConnector>,
    /// `--strict-mcp-config`: only these MCP servers.
    pub mcp_only: Option<Vec<String>>,
    /// Keep file checkpoints for `rewind_files`
    /// (`CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING`).
    pub file_checkpoints: bool,
}

pub(super) fn parse_mode(s: &str) -> Result<PermissionMode, String> {
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
pub(super) struct Prepared {
    pub session: Session,
    pub engine: Arc<Engine>,
    pub def: Option<Arc<AgentDef>>,
    /// Where the main model came from: `flag`, `agent`, `settings` or `managed`.
    pub model_source: &'static str,
    /// What the snapshot was built from, for the reload watcher.
    input: SnapshotInput,
    interactive: bool,
}

impl Prepared {
    /// Starts reloading the engine's snapshot when its files change; the
    /// watcher stops when the handle is dropped.
    pub fn watch(&self) -> Option<ReloadHandle> {
        reload::spawn(
            self.input.clone(),
            Arc::clone(&self.engine.snapshot),
            self.interactive,
        )
    }
}

/// How a main session is set up.
pub(super) struct Mode {
    /// The session kind for flag gates.
    pub interactive: bool,
    pub write_transcripts: bool,
    /// `run` waits for background children before it ends; `chat` does not.
    pub wait_for_background: bool,
    /// Start the MCP servers (`render` starts no process).
    pub connect_mcp: bool,
}

fn prepare(
    g: &GlobalArgs,
    args: &SessionArgs,
    how: Mode,
    events: EventSink,
    asker: Option<runtime::Asker>,
) -> Result<Prepared, CliError> {
    prepare_with(g, args, how, events, asker, Extras::default())
}

pub(super) fn prepare_with(
    g: &GlobalArgs,
    args: &SessionArgs,
    how: Mode,
    events: EventSink,
    asker: Option<runtime::Asker>,
    extras: Extras,
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
        env: extras.env.clone(),
        allow: extras.allow.clone(),
        deny: extras.deny.clone(),
    };
    let (input, swap) = load_snapshot(g, &overrides)?;
    let snap = swap.load_full();
    let sessions_dir = snap.settings().transcripts.dir.clone();
    if args.fork_session && !args.resuming() {
        return Err(CliError::Usage(
            "--fork-session needs --resume ID or --continue".into(),
        ));
    }
    let restored = if args.resuming() {
        Some(restore(
            &runtime::session_dirs::SessionDirs::new(&sessions_dir, &input.load.cwd),
            args,
        )?)
    } else {
        None
    };
    let settings = snap.settings();
    let tools = crate::tools::builtin_tools();
    let available = runtime::available_tools(&snap, tools.iter().map(|t| t.name()));
    let plan = runtime::main_plan::plan_main(
        &snap,
        &runtime::main_plan::MainInput {
            interactive,
            agent: args.agent.as_deref(),
            model: args.model.as_deref(),
            mode_flag: args.permission_mode.is_some(),
            max_turns: args.max_turns,
            resumed: restored.as_ref().and_then(|(_, r)| r.header.as_ref()),
            available_tools: &available,
            only_tools: extras.tools.as_deref(),
            remove_tools: &extras.remove_tools,
        },
    )
    .map_err(|e| CliError::Usage(e.to_string()))?;
    let provider = Provider::new(&settings.provider, &input.load.env)
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let (kind, def, model, model_source, mode) = (
        plan.core.kind,
        plan.def.clone(),
        plan.core.model.clone(),
        plan.model_source,
        plan.core.mode,
    );
    let resumed = restored.as_ref().map(|(id, r)| (id.clone(), r));
    let (session_id, forked_from) = match &resumed {
        Some((id, _)) if !args.fork_session => (id.clone(), None),
        Some((id, _)) => (
            extras.session_id.clone().unwrap_or_else(new_session_id),
            Some(id.clone()),
        ),
        None => (
            extras.session_id.clone().unwrap_or_else(new_session_id),
            None,
        ),
    };
    let session_dir: Option<PathBuf> =
        (write_transcripts && settings.transcripts.enabled).then(|| sessions_dir.join(&session_id));
    if let (Some(given), Some(dir)) = (&extras.session_id, &session_dir)
        && (resumed.is_none() || args.fork_session)
        && runtime::resume::main_file(dir).exists()
    {
        return Err(CliError::Usage(format!(
            "Session ID {given} is already in use."
        )));
    }
    if session_dir.is_some()
        && let Some(days) = settings.transcripts.cleanup_period_days
    {
        let n = runtime::transcript::remove_old_sessions(&sessions_dir, days);
        if n > 0 {
            tracing::info!("removed {n} session folder(s) older than {days} days");
        }
    }
    // With AGENT_TEAMS on, the main session leads a team.
    let mut lead_prompt: Option<String> = None;
    let team = if snap.teams_effective(kind) {
        let name = args.team.clone().unwrap_or_else(|| session_id.clone());
        let dir = input.load.cwd.join(&settings.agents.teams_dir);
        let store = crate::teams::TeamStore::open(&dir, &name)
            .map_err(|e| CliError::Usage(format!("--team {name}: {e}")))?;
        store
            .join(crate::teams::Member {
                name: crate::teams::LEAD.into(),
                agent_id: "main".into(),
                agent_type: def.as_ref().map_or("main", |d| d.name.as_str()).into(),
                status: crate::teams::MemberStatus::Active,
                session_id: session_id.clone(),
                joined: crate::clock::now_rfc3339(),
            })
            .map_err(|e| CliError::Failed(e.to_string()))?;
        // A team file (`.claude/teams/NAME.yaml`): checked now, its tasks
        // added (once per subject), its members started at the first turn.
        // The snapshot read it (a broken one is an error here, before
        // anything runs).
        let file = snap.teams.get(&name);
        if let Some(f) = file.filter(|f| !f.errors.is_empty()) {
            return Err(CliError::Usage(
                f.errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n"),
            ));
        }
        if let Some(def) = file.and_then(|f| f.def.as_ref()) {
            let existing = store.tasks().map_err(|e| CliError::Failed(e.to_string()))?;
            for t in &def.tasks {
                if !existing.iter().any(|x| x.subject == t.subject) {
                    store
                        .create_task(&t.subject, &t.description)
                        .map_err(|e| CliError::Failed(e.to_string()))?;
                }
            }
            if let Some(lead) = &def.lead_prompt {
                lead_prompt = Some(lead.clone());
            }
        }
        let from_file = file.is_some();
        Some(runtime::TeamSeat {
            store,
            member: crate::teams::LEAD.into(),
            from_file,
            after_plan: None,
        })
    } else if let Some(name) = &args.team {
        return Err(CliError::Usage(format!(
            "--team {name}: agent teams are off; turn on AGENT_TEAMS (--feature AGENT_TEAMS=on or CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS=1)"
        )));
    } else {
        None
    };
    // Telemetry records after the session's own sink, when it is on; a
    // session that runs nothing (`render`) starts none.
    let events = if connect_mcp {
        crate::telemetry::start(
            events,
            &crate::telemetry::Start {
                settings_env: &settings.env,
                process_env: &input.load.env,
                session_id: &session_id,
                start_type: Some(match (&resumed, args.continue_latest) {
                    (None, _) => "fresh",
                    (Some(_), true) => "continue",
                    (Some(_), false) => "resume",
                }),
                prices: &settings.prices,
            },
        )
    } else {
        events
    };
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
    engine.main_prompt = extras.main_prompt;
    // A lead's turn brings the snapshot up to date with its team file.
    engine.catch_up = Some({
        let (input, swap) = (input.clone(), Arc::clone(&swap));
        Arc::new(move |dirs: &[PathBuf]| {
            let t = reload::Targets {
                files: Vec::new(),
                dirs: dirs.to_vec(),
            };
            if reload::changed_since(&t, swap.load().read_from) {
                reload::reload_quiet(&input, &swap, interactive, true);
            }
        })
    });
    // An SDK host's `apply_flag_settings`, `update_settings` and reloads.
    engine.apply_settings = Some({
        let (input, swap) = (input.clone(), Arc::clone(&swap));
        Arc::new(move |patch| {
            let host = &input.load.cli.host_settings;
            let before = host.get();
            if let Some(p) = patch {
                host.merge(p);
            }
            let event = reload::reload(&input, &swap, interactive);
            if event.ok {
                Ok(())
            } else {
                host.set(before);
                Err(event.to_string())
            }
        })
    });
    // The team file's words for the lead join its system prompt.
    if let Some(lead) = lead_prompt {
        let append = match engine.main_prompt.append.take() {
            Some(a) => format!("{a}\n\n{lead}"),
            None => lead,
        };
        engine.main_prompt.append = Some(append);
    }
    engine.client_hooks = extras.client_hooks;
    // `[distributed] backend = "nats"`: background children run on workers.
    let fleet = (settings.distributed.backend == crate::config::TaskBackendKind::Nats)
        .then(|| crate::fleet::parent::NatsBackend::new(settings.distributed.clone()));
    if let Some(f) = &fleet {
        engine.backend = Some(Arc::clone(f) as Arc<dyn runtime::backend::TaskBackend>);
    }
    let elicitor = extras.elicitor;
    engine.questioner = extras.questioner;
    if extras.file_checkpoints {
        let history = runtime::file_history::FileHistory::new(session_dir.as_deref())
            .map_err(|e| CliError::Failed(format!("file checkpoints: {e}")))?;
        engine.file_history = Some(Arc::new(history));
    }
    engine.mcp.set_local_connector(extras.mcp_local);
    engine.mcp.set_only(extras.mcp_only);
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
    if let (Some((id, _)), Some(dir)) = (&resumed, &session_dir) {
        // The sub-agents of the resumed session, for SendMessage, planned
        // again as children of this session as it is now.
        let parent = runtime::plan::SpawnParent {
            agent_id: "main",
            session_id: &engine.session_id,
            kind,
            depth: 0,
            model: &model,
            mode,
            def: def.as_deref(),
            cwd: &input.load.cwd,
            is_fork_child: false,
            env_model: engine.subagent_model.as_deref(),
            available_tools: &available,
            turn: None,
        };
        let n = runtime::restore::restore_tasks(&engine, dir, &parent);
        if n > 0 {
            tracing::info!("restored {n} sub-agent(s) of session {id}");
        }
        if let (Some(f), Some((_, r))) = (&fleet, &resumed) {
            let n = f.restore(&engine, dir, &parent, &r.history);
            if n > 0 {
                tracing::info!("{n} background task(s) on workers wait for their notice");
            }
        }
    }
    let main_file = session_dir.as_deref().map(runtime::resume::main_file);
    if let (Some((id, r)), Some(file)) = (&resumed, &main_file) {
        let original = runtime::resume::main_file(&sessions_dir.join(id));
        if forked_from.is_some() {
            // The fork starts as a copy of the complete lines.
            let bytes = fs_err::read(&original).map_err(|e| CliError::Failed(e.to_string()))?;
            let keep = usize::try_from(r.complete_len)
                .unwrap_or(bytes.len())
                .min(bytes.len());
            if let Some(d) = file.parent() {
                fs_err::create_dir_all(d).map_err(|e| CliError::Failed(e.to_string()))?;
            }
            fs_err::write(file, &bytes[..keep]).map_err(|e| CliError::Failed(e.to_string()))?;
            if let Some(to) = &session_dir {
                copy_agent_files(&sessions_dir.join(id), to)?;
            }
        } else {
            runtime::resume::trim_partial_tail(file, r.complete_len)
                .map_err(|e| CliError::Failed(e.to_string()))?;
        }
    }
    let transcript = Arc::new(match &main_file {
        Some(f) => Transcript::open(f.clone(), "main", None),
        None => Transcript::disabled("main", None),
    });
    // The new messages continue the chain of the last one read back
    // (lines another program wrote included).
    transcript.chain_after(resumed.as_ref().and_then(|(_, r)| r.last_uuid.clone()));
    *engine
        .main_mode
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = mode;
    // MCP servers start connecting now, in the background (each turn
    // re-syncs them with the snapshot).
    if connect_mcp {
        engine.mcp.set_extra_roots(engine.add_dirs.clone());
        engine.mcp.set_elicitor(elicitor);
        engine
            .mcp
            .set_elicit_hooks(Some(runtime::elicit_hooks::elicit_hooks(
                Arc::downgrade(&engine),
                input.load.cwd.clone(),
                Arc::clone(&transcript),
            )));
        if settings.mcp.sampling != crate::config::SamplingPolicy::Off {
            engine.mcp.set_sampler(Some(runtime::sampling::sampler(
                Arc::downgrade(&engine),
                model.clone(),
                settings.provider.max_tokens,
                settings.mcp.sampling,
                Arc::clone(&transcript),
            )));
        }
        engine.mcp.sync(&snap.mcp_servers, &input.load.cwd);
    }
    let spec = plan.session(input.load.cwd.clone(), wait_for_background, team);
    let header = plan.header(
        &snap,
        engine.session_id.clone(),
        spec.cwd.clone(),
        forked_from,
    );
    let header = serde_json::to_value(&header).unwrap_or(Value::Null);
    let history = match &resumed {
        Some((id, r)) => {
            transcript.record(
                "resume",
                serde_json::json!({"from": id, "settings": header}),
            );
            r.history.clone()
        }
        None => {
            transcript.record("session", header);
            Vec::new()
        }
    };
    let mut session = Session::new(
        Arc::clone(&engine),
        spec,
        history,
        transcript,
        CancellationToken::new(),
    );
    if let Some((_, r)) = &resumed {
        if let Some(listing) = r.listing.clone() {
            session.set_announced(listing);
        }
        session.set_delivered(r.instructions.iter().cloned());
    }
    if resumed.is_some() {
        // A turn cut by a crash or kill: its tool calls get one
        // "cancelled" result each, so every tool_use keeps exactly one.
        session.repair_after_cancel();
    }
    Ok(Prepared {
        session,
        engine,
        def,
        model_source,
        input,
        interactive,
    })
}

/// `/compact [instructions]` (`chat`, a stream-json session): summarise
/// the conversation now; returns what to tell the user.
pub(super) async fn compact_now(
    session: &mut Session,
    engine: &Engine,
    instructions: &str,
) -> String {
    let cancel = CancellationToken::new();
    session.set_cancel(cancel.clone());
    let snap = engine.snapshot.load_full();
    let instructions = (!instructions.is_empty()).then_some(instructions);
    let before = session.history().len();
    let result = tokio::select! {
        r = session.compact(&snap, runtime::CompactTrigger::Manual, instructions) => r,
        _ = tokio::signal::ctrl_c() => { cancel.cancel(); Err(RunError::Cancelled) }
    };
    match result {
        Ok(true) => format!("compacted: {before} messages → {}", session.history().len()),
        Ok(false) => "nothing to compact yet".to_string(),
        Err(e) => format!("compaction failed, conversation unchanged: {e}"),
    }
}

/// `/help` (and `/mcp`): the built-in commands, the skills and commands
/// (`/name`), and the MCP prompts of the ready servers; `/mcp` lists only
/// the MCP prompts. One table for `chat` and headless sessions.
pub(super) async fn help_text(engine: &Engine, which: &str, chat: bool) -> String {
    let prompts = crate::mcp::prompt_commands(&engine.mcp).await;
    let mut text = String::new();
    if which != "mcp" {
        text.push_str("Built-in commands:");
        let chat_only = if chat {
            runtime::commands::CHAT_BUILTINS
        } else {
            &[]
        };
        let mut builtins: Vec<_> = runtime::commands::BUILTINS
            .iter()
            .chain(chat_only)
            .collect();
        builtins.sort_by_key(|(name, _, _)| *name);
        for (name, hint, what) in builtins {
            let usage = format!("/{name} {hint}");
            text.push_str(&format!("\n  {:28}  {what}", usage.trim_end()));
        }
        let snap = engine.snapshot.load();
        text.push_str("\nCommands and skills (docs/commands.md):");
        if snap.skills.skills.is_empty() {
            text.push_str("\n  none: add .claude/commands/NAME.md or .claude/skills/NAME/SKILL.md");
        }
        for s in snap.skills.skills.values() {
            let usage = format!("/{} {}", s.name, s.argument_hint.as_deref().unwrap_or(""));
            let desc = super::output::first_line(&s.description, 70);
            text.push_str(&format!(
                "\n  {:28}  {desc} ({} {}{})",
                usage.trim_end(),
                s.source,
                s.kind,
                if s.model_invocable { "" } else { ", user only" }
            ));
        }
        text.push('\n');
    }
    text.push_str("MCP prompts:");
    if prompts.is_empty() {
        text.push_str("\n  none: no ready server offers prompts");
    }
    for c in prompts {
        text.push_str(&format!("\n  {:28}  {}", c.usage(), c.description));
    }
    text
}

/// `--fork-session`: the sub-agents' transcripts and meta files go with
/// the copy, so the fork can resume them without touching the original.
fn copy_agent_files(from: &std::path::Path, to: &std::path::Path) -> Result<(), CliError> {
    let failed = |e: std::io::Error| CliError::Failed(e.to_string());
    let (from, to) = (
        runtime::resume::subagents_dir(from),
        runtime::resume::subagents_dir(to),
    );
    let Ok(entries) = std::fs::read_dir(&from) else {
        return Ok(());
    };
    fs_err::create_dir_all(&to).map_err(failed)?;
    for e in entries.flatten() {
        let is_file = e.file_type().is_ok_and(|t| t.is_file());
        let name = e.file_name();
        let wanted = name.to_string_lossy().ends_with(".jsonl")
            || name.to_string_lossy().ends_with(".meta.json");
        if is_file && wanted {
            fs_err::copy(e.path(), to.join(&name)).map_err(failed)?;
        }
    }
    Ok(())
}

/// The session `--resume ID` or `--continue` names, read back from its
/// transcript. `--continue` takes the newest session of the session folder
/// only; `--resume ID` of a session in the project's old `.cadre/sessions`
/// moves it into the session folder first, and says so.
fn restore(
    dirs: &runtime::session_dirs::SessionDirs,
    args: &SessionArgs,
) -> Result<(String, runtime::resume::Restored), CliError> {
    use runtime::resume;
    let usage = |e: resume::ResumeError| CliError::Usage(e.to_string());
    let id = match &args.resume {
        Some(id) => id.clone(),
        None => dirs.latest().map_err(usage)?,
    };
    let found = dirs.find(&id).map_err(usage)?;
    if found.old {
        // Read with the same rule as any other: the session is re-planned
        // from the current settings (runtime::restore).
        eprintln!(
            "cadre: session {id} is in the project's old {} (a repository can ship files there); moving it to {} and resuming it under the current settings",
            found.folder.display(),
            dirs.dir.display()
        );
    }
    let folder = dirs
        .adopt(&found)
        .map_err(|e| CliError::Failed(e.to_string()))?;
    let path = resume::main_file(&folder);
    let Some(at) = &args.resume_session_at else {
        return Ok((id, resume::load(&path).map_err(usage)?));
    };
    // Truncating resume: the transcript up to the message `at`, read
    // back as a whole one; the fork copies just that part.
    if !args.fork_session {
        return Err(CliError::Usage(
            "--resume-session-at: cadre resumes part of a session only into a new one; \
             add --fork-session (the original session is left as it was)"
                .into(),
        ));
    }
    let cut = resume::find_cut(&path, at)
        .map_err(usage)?
        .ok_or_else(|| CliError::Usage(format!("No message found with message.uuid of: {at}")))?;
    if let Some(turn) = &args.resume_drops_turn {
        cut.check_drops_turn(at, turn).map_err(CliError::Usage)?;
    }
    // Only the part kept is read (the file may have grown since).
    let mut bytes = Vec::new();
    fs_err::File::open(&path)
        .and_then(|f| f.take(cut.len).read_to_end(&mut bytes))
        .map_err(|e| CliError::Failed(e.to_string()))?;
    Ok((id, resume::parse(&path, &bytes).map_err(usage)?))
}

/// A new session's id: a random UUID, as Claude Code names sessions.
pub(super) fn new_session_id() -> String {
    runtime::transcript::new_uuid()
}

pub(super) fn read_prompt(prompt: Option<String>) -> Result<String, CliError> {
    match prompt {
        Some(p) => Ok(p),
        None => read_stdin_prompt("as an argument"),
    }
}

/// The longest prompt read from stdin (far beyond any model's window; a
/// bound, so that an endless stdin cannot take all memory).
pub(super) const MAX_STDIN_PROMPT_BYTES: u64 = 64 * 1024 * 1024;

/// The prompt from stdin (not from a terminal; not empty; at most
/// [`MAX_STDIN_PROMPT_BYTES`]). `where_else` completes "give one … or on
/// stdin" in the error.
pub(super) fn read_stdin_prompt(where_else: &str) -> Result<String, CliError> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(CliError::Usage(format!(
            "no prompt: give one {where_else} or on stdin"
        )));
    }
    let mut text = String::new();
    stdin
        .lock()
        .take(MAX_STDIN_PROMPT_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| CliError::Usage(format!("cannot read stdin: {e}")))?;
    if text.len() as u64 > MAX_STDIN_PROMPT_BYTES {
        return Err(CliError::Usage(format!(
            "the prompt on stdin is longer than {MAX_STDIN_PROMPT_BYTES} bytes; not read"
        )));
    }
    if text.trim().is_empty() {
        return Err(CliError::Usage("no prompt: stdin was empty".into()));
    }
    Ok(text)
}

/// The first user message: project memory (unless the agent is one that
/// goes without it), the agent's `initialPrompt` (for `--agent`), then the
/// prompt.
pub(super) fn first_message(
    engine: &runtime::Engine,
    def: Option<&AgentDef>,
    prompt: String,
) -> Message {
    first_message_with(engine, def, vec![ContentBlock::text(prompt)])
}

/// [`first_message`] for a prompt given as content blocks (stream-json input).
pub(super) fn first_message_with(
    engine: &runtime::Engine,
    def: Option<&AgentDef>,
    prompt: Vec<ContentBlock>,
) -> Message {
    let mut blocks = Vec::new();
    if runtime::gets_memory(def)
        && let Some(memory) = runtime::memory_block(&engine.snapshot.load())
    {
        blocks.push(ContentBlock::text(memory));
    }
    if let Some(initial) = def.and_then(|d| d.initial_prompt.clone()) {
        blocks.push(ContentBlock::text(initial));
    }
    blocks.extend(prompt);
    Message::user(blocks)
}

pub async fn run(g: &GlobalArgs, args: RunArgs) -> Result<(), CliError> {
    let prompt = read_prompt(args.prompt)?;
    let print = match args.output_format {
        OutputFormat::StreamJson => Print::Messages,
        _ => Print::Nothing,
    };
    let progress = match args.output_format {
        OutputFormat::StreamJson => None,
        _ => Some(Progress::new(false, g.quiet)),
    };
    // The accounts (cost, usage) and, for stream-json, the protocol lines.
    let emitter = Emitter::new(print, String::new(), String::new(), BTreeMap::new(), None);
    let events: EventSink = match &progress {
        None => emitter.sink(),
        Some(progress) => {
            let bars = progress.sink();
            let accounts = emitter.sink();
            Arc::new(move |e: &runtime::EngineEvent| {
                accounts(e);
                bars(e);
            })
        }
    };
    let resumed = args.session.resuming();
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
    emitter.configure(
        &prepared.engine.session_id,
        &prepared.session.spec().model,
        prepared.engine.snapshot.load().settings(),
    );
    let Prepared {
        mut session,
        engine,
        def,
        ..
    } = prepared;
    let start = PromptStart::now(&emitter);
    let source = if resumed { "resume" } else { "startup" };
    let start_context = session.session_start_hooks(source).await;
    // UserPromptSubmit sees the prompt as typed, before a slash command is
    // expanded.
    let contexts = match session.user_prompt_hooks(&prompt).await {
        Ok(c) => c,
        Err(reason) => {
            session.session_end_hooks("other").await;
            engine.shutdown(std::time::Duration::from_secs(5)).await;
            return Err(CliError::Failed(format!(
                "UserPromptSubmit hook blocked the prompt: {reason}"
            )));
        }
    };
    // A slash command: expanded (its shell lines run now); a built-in or
    // a refused shell line answers without the model.
    let (content, active) = match session.prompted(vec![ContentBlock::text(prompt)]).await {
        runtime::commands::Prompted::Send {
            blocks,
            skill,
            notes,
        } => sent(blocks, skill, notes),
        runtime::commands::Prompted::Local(text) => {
            session.session_end_hooks("other").await;
            engine.shutdown(std::time::Duration::from_secs(5)).await;
            let r = local_result(&emitter, &engine.session_id, &start, text, None);
            print_local(args.output_format, &r);
            return Ok(());
        }
        runtime::commands::Prompted::Builtin(name, instructions) => {
            let text = match name {
                "compact" => compact_now(&mut session, &engine, &instructions).await,
                "clear" => String::new(),
                other => help_text(&engine, other, false).await,
            };
            session.session_end_hooks("other").await;
            engine.shutdown(std::time::Duration::from_secs(5)).await;
            let r = local_result(&emitter, &engine.session_id, &start, text, Some(name));
            print_local(args.output_format, &r);
            return Ok(());
        }
    };
    let mut message = if resumed {
        Message::user(content)
    } else {
        first_message_with(&engine, def.as_deref(), content)
    };
    message.content.extend(contexts);
    message.content.extend(start_context);
    session.push_user_with(message, active);
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
    session.session_end_hooks("other").await;
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
    let wire_result = result_of(
        &emitter,
        &engine.session_id,
        &start,
        &result,
        session.turns_this_prompt(),
    );
    let line = || serde_json::to_string(&Output::Result(wire_result.clone())).unwrap_or_default();
    match result {
        Ok(outcome) => {
            let text = outcome.final_text.clone().unwrap_or_default().join("\n");
            if outcome.stop == StopKind::MaxTokens && !g.quiet {
                eprintln!("warning: the answer was cut at provider.max_tokens");
            }
            // A run that ended without an answer (the turn limit, the
            // repeated-call guard, no text at all) says why, whatever
            // --quiet says.
            for e in &wire_result.errors {
                eprintln!("error: {e}");
            }
            match args.output_format {
                OutputFormat::Text if wire_result.is_error && text.trim().is_empty() => {}
                OutputFormat::Text => print_answer(&text),
                OutputFormat::Json | OutputFormat::StreamJson => print_line(&line()),
            }
            // As Claude Code: an error result (the turn limit) exits 1.
            if wire_result.is_error {
                return Err(CliError::Exit(1));
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
                    print_line(&line());
                    eprintln!("error: {msg}");
                    Err(CliError::Exit(1))
                }
            }
        }
    }
}

/// A prompt to send: its blocks and the command to mark active; its
/// notes (shell lines not run, files not read) are said on stderr.
fn sent(
    blocks: Vec<ContentBlock>,
    skill: Option<runtime::todos::ActiveSkill>,
    notes: Vec<String>,
) -> (Vec<ContentBlock>, Option<runtime::todos::ActiveSkill>) {
    for n in notes {
        eprintln!("cadre: {n}");
    }
    (blocks, skill)
}

/// A result that did not reach the model (a built-in, a refused shell
/// line), printed as the output format wants it.
fn print_local(format: OutputFormat, r: &super::wire::ResultOut) {
    match format {
        OutputFormat::Text => print_line(&r.result),
        OutputFormat::Json | OutputFormat::StreamJson => {
            print_line(&serde_json::to_string(&Output::Result(r.clone())).unwrap_or_default())
        }
    }
}

/// Before the first request of a one-shot run: waits until every MCP
/// server is ready or has failed (failures are reported as they happen),
/// at most `limit`, with the wait on a progress line. Servers still
/// connecting after that are reported; the run goes on without them, and
/// their tools join a later turn if they become ready.
/// A permission question as chat puts it: who asks, the exact command (a
/// Bash call) or the whole input, and why the rules ask. The model's text
/// is shown with its control characters as symbols.
fn permission_question(ask: &runtime::AskRequest) -> String {
    let what = match ask.input.get("command").and_then(serde_json::Value::as_str) {
        Some(command) if ask.tool == "Bash" => {
            format!(
                "{} wants to run this command:\n    {}",
                ask.agent_id,
                super::output::shown(command)
            )
        }
        _ if ask.tool == crate::tools::sandbox::proxy::SANDBOX_NETWORK_ACCESS => format!(
            "{}'s sandboxed command wants to reach this host:\n    {}",
            ask.agent_id,
            super::output::shown(ask.input["host"].as_str().unwrap_or_default())
        ),
        _ => format!(
            "{} wants to use {}:\n    {}",
            ask.agent_id,
            ask.tool,
            super::output::shown(&ask.input.to_string())
        ),
    };
    format!("{what}\n  ({})", super::output::shown(&ask.reason))
}

/// The line above each chat prompt: the output of the settings'
/// `statusLine` command (Claude Code's), else the model, the permission
/// mode, the context the last request filled, and the tasks running.
async fn status_line(session: &Session, engine: &Arc<Engine>, progress: &Progress) -> String {
    let snap = engine.snapshot.load_full();
    let model = session.spec().model.clone();
    let spent = progress.spent();
    let window = snap.settings().compact.window(&model);
    let filled = spent.last_main.as_ref().map_or(0, |(_, sent)| *sent);
    let running = engine
        .tasks
        .all()
        .iter()
        .filter(|t| t.status() == runtime::tasks::TaskStatus::Running)
        .count();
    let plain = format!(
        "{model} · {} · context {:.0}% · {running} task(s) running",
        session.spec().mode.as_str(),
        filled as f64 * 100.0 / window.max(1) as f64
    );
    let Some(setting) = &snap.settings().status_line else {
        return plain;
    };
    let cwd = session.spec().cwd.clone();
    let cost: f64 = spent
        .agents
        .values()
        .map(|(m, _, u)| {
            crate::message::cost_of(crate::message::price_of(&snap.settings().prices, m), u)
        })
        .sum();
    let input = serde_json::json!({
        "hook_event_name": "Status",
        "session_id": engine.session_id,
        "transcript_path": session.transcript().path(),
        "cwd": cwd,
        "model": {"id": model, "display_name": model},
        "workspace": {"current_dir": cwd, "project_dir": cwd},
        "version": env!("CARGO_PKG_VERSION"),
        "output_style": {"name": snap.output_style_name()},
        "cost": {"total_cost_usd": cost},
    });
    let mut hook = crate::config::HookConfig::command(&setting.command);
    hook.timeout_ms = STATUS_LINE_TIMEOUT_MS;
    let place = runtime::hooks::HookPlace::new(&snap, &cwd);
    match runtime::hooks::run_any(
        &hook,
        &input,
        &cwd,
        &place.env,
        runtime::hooks::Asked::default(),
        place.sandbox.as_deref(),
    )
    .await
    {
        runtime::hooks::HookRun::Exited {
            code: Some(0),
            stdout,
            ..
        } => {
            let line = stdout.head.lines().next().unwrap_or_default();
            super::output::first_line(line, 200)
        }
        _ => format!("{plain} (statusLine command failed)"),
    }
}

/// How long the `statusLine` command may take before each prompt.
const STATUS_LINE_TIMEOUT_MS: u64 = 2000;

enum ChatDone {
    Exit,
    Shown,
    /// `/resume ID`: continue that session instead.
    Resume(String),
}

/// The answers chat's permission question takes; "always" names what it
/// remembers.
fn allow_choices(always: Option<&super::remember::Offer>) -> String {
    match always {
        Some(offer) => format!("Allow? [y]es · [a]lways: {} · [N]o", offer.words),
        None => "Allow? [y/N]".to_string(),
    }
}

/// Chat's own built-in commands (`CHAT_BUILTINS`) and the answer to an
/// unknown `/name`; `None` for anything else (a prompt, a command, a skill,
/// another built-in).
async fn chat_builtin(
    line: &str,
    session: &mut Session,
    engine: &Arc<Engine>,
    progress: &Progress,
) -> Option<ChatDone> {
    let rest = line.trim().strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let args = args.trim();
    let snap = engine.snapshot.load_full();
    match name {
        "exit" | "quit" => return Some(ChatDone::Exit),
        "model" if args.is_empty() => eprintln!("model: {}", session.spec().model),
        "model" => {
            let model = snap.resolve_alias(args).to_string();
            let from = session.spec().model.clone();
            match session.pre_model_switch_hooks(args, "command").await {
                Err(why) => eprintln!("the model stays {from}: {why}"),
                Ok(()) => {
                    session.set_model(model.clone());
                    session.post_model_switch_hooks(&from, "command").await;
                    eprintln!("model: {model} (was {from}), from the next request on");
                }
            }
        }
        "agents" => {
            if let Err(e) = super::agents::print_list(&snap, &super::agents::ListArgs::default()) {
                eprintln!("{e}");
            }
        }
        "config" => {
            let settings = serde_json::to_value(&snap.config.settings).unwrap_or_default();
            super::config::print_settings(&snap.config, &settings, true, "");
        }
        "permissions" if args.is_empty() => {
            let settings = serde_json::to_value(&snap.config.settings).unwrap_or_default();
            super::config::print_settings(&snap.config, &settings, true, "permissions.");
            eprintln!("{}", session_rules(engine));
        }
        "permissions" => eprintln!("{}", edit_session_rules(engine, args)),
        "memory" => super::config::show_instructions(&snap),
        "resume" => {
            let cwd = session.spec().cwd.clone();
            let recent = super::sessions::recent(&snap, &cwd, 10);
            if args.is_empty() {
                if recent.is_empty() {
                    eprintln!("no earlier session of this project to resume");
                }
                for (i, (id, line)) in recent.iter().enumerate() {
                    let this = if *id == engine.session_id {
                        "  (this chat)"
                    } else {
                        ""
                    };
                    eprintln!("{:>3}  {}{this}", i + 1, super::output::shown(line));
                }
                eprintln!("/resume N or /resume SESSION-ID continues one of them here");
            } else {
                let id = match args.parse::<usize>() {
                    Ok(n) if (1..=recent.len()).contains(&n) => recent[n - 1].0.clone(),
                    _ => args.to_string(),
                };
                if id == engine.session_id {
                    eprintln!("{id} is this chat");
                } else {
                    return Some(ChatDone::Resume(id));
                }
            }
        }
        "cost" | "usage" => eprintln!("{}", cost_text(&progress.spent(), &snap)),
        "context" => {
            let spent = progress.spent();
            let model = session.spec().model.clone();
            let window = snap.settings().compact.window(&model);
            match spent.last_main {
                None => eprintln!("context: no request sent yet; window {window} tokens ({model})"),
                Some((_, sent)) => eprintln!(
                    "context: {sent} of {window} tokens ({:.0}%) in the last request; compaction at {} ({model})",
                    sent as f64 * 100.0 / window.max(1) as f64,
                    snap.settings().compact.limit(&model)
                ),
            }
        }
        _ => {
            // Anything `prompted` knows goes on; a word that is not a
            // command is an unknown one, not a prompt.
            let known = runtime::commands::BUILTINS
                .iter()
                .any(|(b, _, _)| *b == name)
                || snap.skills.skills.contains_key(name)
                || name.starts_with("mcp__");
            let word = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ':' | '.'));
            if known || !word {
                return None;
            }
            eprintln!("unknown command /{name} (type /help for the list)");
        }
    }
    Some(ChatDone::Shown)
}

/// `/permissions`' last part: the rules this session added (an "always"
/// answer, `/permissions allow …`), and how to change them.
fn session_rules(engine: &Engine) -> String {
    let Ok(grants) = engine.grants.lock() else {
        return String::new();
    };
    let mut text = String::from("added in this session:");
    let mut any = false;
    for (behavior, rules) in grants.own() {
        for r in rules {
            any = true;
            text.push_str(&format!("\n  {} {r}", behavior.as_str()));
        }
    }
    if !any {
        text.push_str("\n  none");
    }
    text.push_str(
        "\n/permissions allow|ask|deny RULE adds a rule for this session; /permissions remove RULE takes one of these away (settings files are edited in the files)",
    );
    text
}

/// `/permissions allow|ask|deny RULE` and `/permissions remove RULE`: the
/// session's own rules (added to the settings' rules; a deny rule of any
/// layer still binds).
fn edit_session_rules(engine: &Engine, args: &str) -> String {
    use runtime::grants::{Behavior, PermissionUpdate};
    let (verb, rule) = args.split_once(char::is_whitespace).unwrap_or((args, ""));
    let rule = rule.trim().to_string();
    if rule.is_empty() {
        return "usage: /permissions allow|ask|deny RULE, or /permissions remove RULE".into();
    }
    let update = match verb {
        "allow" | "ask" | "deny" => {
            let behavior = match verb {
                "allow" => Behavior::Allow,
                "ask" => Behavior::Ask,
                _ => Behavior::Deny,
            };
            if let Err(e) = crate::permissions::Rule::parse(&rule) {
                return format!("not a permission rule: {rule}: {e}");
            }
            PermissionUpdate::AddRules {
                behavior,
                rules: vec![rule.clone()],
            }
        }
        "remove" => {
            let Ok(mut g) = engine.grants.lock() else {
                return String::new();
            };
            let found = g.own().iter().any(|(_, rules)| rules.contains(&rule));
            if !found {
                return format!("{rule} is not a rule this session added (see /permissions)");
            }
            for behavior in [Behavior::Allow, Behavior::Ask, Behavior::Deny] {
                g.apply(&PermissionUpdate::RemoveRules {
                    behavior,
                    rules: vec![rule.clone()],
                });
            }
            return format!("removed {rule} for this session");
        }
        other => return format!("unknown /permissions {other}: use allow, ask, deny or remove"),
    };
    let Ok(mut g) = engine.grants.lock() else {
        return String::new();
    };
    g.apply(&update);
    format!("{verb} {rule} for the rest of this session")
}

/// `/cost`: per agent, its requests, tokens, cache-read share and cost.
fn cost_text(spent: &super::output::Spent, snap: &crate::snapshot::Snapshot) -> String {
    let prices = &snap.settings().prices;
    let mut text = String::from("cost so far (this chat):");
    if spent.agents.is_empty() {
        text.push_str("\n  nothing sent yet");
        return text;
    }
    let mut total = 0.0;
    for (agent, (model, requests, u)) in &spent.agents {
        let cost = crate::message::cost_of(crate::message::price_of(prices, model), u);
        total += cost;
        let sent = u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens;
        let share = u.cache_read_input_tokens as f64 * 100.0 / sent.max(1) as f64;
        text.push_str(&format!(
            "\n  {agent}: {requests} requests, {sent} tokens in ({share:.0}% read from cache), {} out, ${cost:.4} ({model})",
            u.output_tokens
        ));
    }
    text.push_str(&format!("\n  total: ${total:.4}"));
    text
}

/// What Tab completes at the start of a chat line: the built-in commands,
/// the commands and skills, and the prompts of the MCP servers ready when
/// the chat starts.
async fn chat_commands(engine: &Engine) -> Vec<String> {
    let mut names: Vec<String> = runtime::commands::BUILTINS
        .iter()
        .chain(runtime::commands::CHAT_BUILTINS)
        .map(|(name, _, _)| format!("/{name}"))
        .collect();
    names.extend(
        engine
            .snapshot
            .load()
            .skills
            .skills
            .keys()
            .map(|name| format!("/{name}")),
    );
    names.extend(
        crate::mcp::prompt_commands(&engine.mcp)
            .await
            .into_iter()
            .map(|c| format!("/{}", c.command)),
    );
    names
}

pub(super) async fn wait_for_servers(
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
    let message = if args.session.resuming() {
        Message::user_text(prompt)
    } else {
        first_message(&engine, def.as_deref(), prompt)
    };
    session.push_user(message);
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

/// MCP servers' requests for input, asked on the terminal (stderr, stdin)
/// while the turn waits.
fn terminal_elicitor() -> crate::mcp::Elicitor {
    Arc::new(|ask: crate::mcp::Elicitation| {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                use std::io::Write;
                let _terminal = super::turn_keys::hold_terminal();
                let mut read = || {
                    let mut line = String::new();
                    match std::io::stdin().read_line(&mut line) {
                        Ok(0) | Err(_) => None,
                        Ok(_) => Some(line),
                    }
                };
                let mut write = |s: &str| {
                    let mut err = std::io::stderr();
                    let _ = err.write_all(s.as_bytes());
                    let _ = err.flush();
                };
                super::elicit::dialogue(&ask, &mut read, &mut write)
            })
            .await
            .unwrap_or(crate::mcp::ElicitAnswer {
                action: crate::mcp::ElicitAction::Cancel,
                content: None,
            })
        })
    })
}

pub async fn chat(g: &GlobalArgs, args: ChatArgs) -> Result<(), CliError> {
    offer_trust(g)?;
    let progress = Progress::new(true, g.quiet);
    let asker: runtime::Asker = Arc::new(|ask: runtime::AskRequest| {
        let question = permission_question(&ask);
        let suggested = super::wire::permission_answer(&serde_json::json!({
            "behavior": "allow",
            "updatedPermissions": super::wire::permission_suggestions(&ask.tool, &ask.input),
        }));
        let always = super::remember::offer(suggested.updates);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let _terminal = super::turn_keys::hold_terminal();
                eprint!("{question}\n{} ", allow_choices(always.as_ref()));
                let mut line = String::new();
                if std::io::stdin().read_line(&mut line).is_err() {
                    return false.into();
                }
                match (line.trim(), always) {
                    ("y" | "Y" | "yes", _) => true.into(),
                    ("a" | "A" | "always", Some(offer)) => runtime::AskAnswer {
                        allow: true,
                        updates: super::remember::keep(offer.updates),
                        ..runtime::AskAnswer::default()
                    },
                    _ => false.into(),
                }
            })
            .await
            .unwrap_or_else(|_| false.into())
        })
    });
    let mode = || Mode {
        interactive: true,
        write_transcripts: true,
        wait_for_background: false,
        connect_mcp: true,
    };
    let extras = Extras {
        elicitor: Some(terminal_elicitor()),
        questioner: Some(super::ask::terminal_questioner(Arc::clone(&progress))),
        ..Extras::default()
    };
    let prepared = prepare_with(
        g,
        &args.session,
        mode(),
        progress.sink(),
        Some(Arc::clone(&asker)),
        extras.clone(),
    )?;
    let mut _reload = prepared.watch();
    let Prepared {
        mut session,
        mut def,
        mut engine,
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
            // The exports run on this runtime: this thread leaves it
            // while the last ones go out.
            tokio::task::block_in_place(crate::telemetry::shutdown);
            super::turn_keys::restore_terminal();
            std::process::exit(143);
        });
    }
    let agents: Vec<String> = engine
        .snapshot
        .load()
        .visible_agents(session.spec().kind)
        .iter()
        .map(|d| d.name.clone())
        .collect();
    let mut editor = super::chat_input::ChatInput::new(chat_commands(&engine).await, &agents)?;
    eprintln!(
        "cadre chat — type a task; a \\ at the end of a line (or Alt-Enter) goes on to the next; Esc or Ctrl-C cancels a running turn, Ctrl-D quits."
    );
    let mut first = !args.session.resuming();
    let source = if args.session.resuming() {
        "resume"
    } else {
        "startup"
    };
    let mut start_context = session.session_start_hooks(source).await;
    // What was typed while the last turn ran, for the next prompt.
    let mut typed = String::new();
    loop {
        let status = status_line(&session, &engine, &progress).await;
        eprintln!("{}", super::output::dim(&status));
        // A line typed and entered while the last turn ran is the next
        // prompt; a line typed without Enter waits on the prompt line.
        if typed.starts_with(super::turn_keys::END) {
            break;
        }
        let ahead = match typed.split_once('\n') {
            Some((line, rest)) => {
                let line = line.to_string();
                typed = rest.to_string();
                Some(line)
            }
            None => None,
        };
        let read = match ahead {
            Some(line) => {
                eprintln!("› {line}");
                Ok(Some(line))
            }
            None => editor.read("› ", &std::mem::take(&mut typed)),
        };
        let line = match read {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(rustyline::error::ReadlineError::Interrupted) => continue,
            Err(e) => return Err(CliError::Failed(format!("input: {e}"))),
        };
        if line.trim().is_empty() {
            continue;
        }
        editor.remember(&line);
        // Chat's own built-ins (a person at a terminal), and an unknown
        // `/name`, are answered here and never reach the model.
        match chat_builtin(&line, &mut session, &engine, &progress).await {
            Some(ChatDone::Exit) => break,
            Some(ChatDone::Shown) => continue,
            Some(ChatDone::Resume(id)) => {
                // The session is checked before this one ends: a wrong id
                // leaves the chat as it was.
                let resumed = SessionArgs {
                    resume: Some(id.clone()),
                    continue_latest: false,
                    fork_session: false,
                    ..args.session.clone()
                };
                let prepared = match prepare_with(
                    g,
                    &resumed,
                    mode(),
                    progress.sink(),
                    Some(Arc::clone(&asker)),
                    extras.clone(),
                ) {
                    Ok(p) => p,
                    Err(e) => {
                        eprintln!("cannot resume {id}: {e}");
                        continue;
                    }
                };
                session.session_end_hooks("resume").await;
                engine.shutdown(std::time::Duration::from_secs(5)).await;
                session.transcript().record(
                    "end",
                    serde_json::json!({"status": "completed", "resumed_other": id}),
                );
                _reload = prepared.watch();
                session = prepared.session;
                engine = prepared.engine;
                def = prepared.def;
                first = false;
                start_context = session.session_start_hooks("resume").await;
                eprintln!(
                    "resumed session {} ({} messages)",
                    engine.session_id,
                    session.history().len()
                );
                continue;
            }
            None => {}
        }
        // UserPromptSubmit sees the prompt as typed, before a slash
        // command is expanded.
        let contexts = match session.user_prompt_hooks(&line).await {
            Ok(c) => c,
            Err(reason) => {
                eprintln!("UserPromptSubmit hook blocked the prompt: {reason}");
                continue;
            }
        };
        // Slash commands: built-ins here, skills and commands expanded
        // (their shell lines run now, asking as any call would).
        let (prompt, active) = match session
            .prompted(vec![ContentBlock::text(line.clone())])
            .await
        {
            runtime::commands::Prompted::Send {
                blocks,
                skill,
                notes,
            } => sent(blocks, skill, notes),
            runtime::commands::Prompted::Local(text) => {
                eprintln!("{text}");
                continue;
            }
            runtime::commands::Prompted::Builtin("compact", instructions) => {
                eprintln!(
                    "{}",
                    compact_now(&mut session, &engine, &instructions).await
                );
                continue;
            }
            runtime::commands::Prompted::Builtin("clear", _) => {
                // A new session: the old one ends (its transcript stays).
                session.session_end_hooks("clear").await;
                engine.shutdown(std::time::Duration::from_secs(5)).await;
                session.transcript().record(
                    "end",
                    serde_json::json!({"status": "completed", "cleared": true}),
                );
                let fresh = SessionArgs {
                    resume: None,
                    continue_latest: false,
                    fork_session: false,
                    ..args.session.clone()
                };
                let mut extras = extras.clone();
                extras.session_id = Some(new_session_id());
                let prepared = prepare_with(
                    g,
                    &fresh,
                    mode(),
                    progress.sink(),
                    Some(Arc::clone(&asker)),
                    extras,
                )?;
                _reload = prepared.watch();
                session = prepared.session;
                engine = prepared.engine;
                def = prepared.def;
                first = true;
                start_context = session.session_start_hooks("clear").await;
                eprintln!("cleared: new session {}", engine.session_id);
                continue;
            }
            runtime::commands::Prompted::Builtin(name, _) => {
                eprintln!("{}", help_text(&engine, name, true).await);
                continue;
            }
        };
        let mut message = if first {
            first_message_with(&engine, def.as_deref(), prompt)
        } else {
            Message::user(prompt)
        };
        message.content.extend(contexts);
        message.content.append(&mut start_context);
        first = false;
        session.push_user_with(message, active);
        let before = session.history().len();
        let cancel = CancellationToken::new();
        if let Ok(mut c) = current.lock() {
            *c = cancel.clone();
        }
        session.set_cancel(cancel.clone());
        session.begin_prompt();
        // Esc cancels the turn as Ctrl-C does.
        let keys = super::turn_keys::TurnKeys::watch(cancel.clone());
        let result = tokio::select! {
            r = session.run() => Some(r),
            _ = tokio::signal::ctrl_c() => { cancel.cancel(); None }
            () = cancel.cancelled() => None,
        };
        typed = keys.finish();
        progress.end_text();
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
            Some(Err(e)) if !matches!(e, RunError::Cancelled) => eprintln!("error: {e}"),
            Some(Err(_)) | None => {
                session.repair_after_cancel();
                progress.clear_calls();
                eprintln!("(cancelled)");
            }
        }
    }
    session.session_end_hooks("prompt_input_exit").await;
    engine.shutdown(std::time::Duration::from_secs(5)).await;
    session
        .transcript()
        .record("end", serde_json::json!({"status": "completed"}));
    Ok(())
}

/// What the user is told when a session ends without any answer text, so
/// an empty line on stdout never goes unexplained.
pub(super) fn empty_answer_warning(stop: &str, turns: u32) -> String {
    format!("warning: {}", empty_answer(stop, turns))
}

/// Why a run that ended without any answer text failed (the result's
/// `errors`, and stderr).
pub(super) fn empty_answer(stop: &str, turns: u32) -> String {
    format!(
        "the model ended without an answer: no reply of this session had text \
         (last stop: {stop}, after {turns} turn{})",
        if turns == 1 { "" } else { "s" }
    )
}

/// Why a run the repeated-call guard ended failed.
pub(super) fn repeated_calls_error(turns: u32) -> String {
    format!(
        "stopped after {turns} turn{}: the agent repeated a call the repeated-call guard \
         (agents.repeated_call_limit) had already held back, after being told to answer; \
         the answer printed, if any, is incomplete",
        if turns == 1 { "" } else { "s" }
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ask(tool: &str, input: serde_json::Value) -> runtime::AskRequest {
        runtime::AskRequest {
            question: String::new(),
            agent_id: "main".into(),
            tool_use_id: "toolu_1".into(),
            tool: tool.into(),
            input,
            reason: "permission mode 'default'".into(),
        }
    }

    #[test]
    fn a_permission_question_shows_the_exact_command_and_why() {
        let q = permission_question(&ask(
            "Bash",
            serde_json::json!({"command": "rm -rf build \u{1b}]52;c;eA==\u{7}", "description": "clean"}),
        ));
        assert_eq!(
            q,
            "main wants to run this command:\n    rm -rf build ␛]52;c;eA==␇\n  (permission mode 'default')"
        );
        let q = permission_question(&ask("Write", serde_json::json!({"file_path": "/etc/x"})));
        assert_eq!(
            q,
            "main wants to use Write:\n    {\"file_path\":\"/etc/x\"}\n  (permission mode 'default')"
        );
    }
}
